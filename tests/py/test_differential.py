"""Differential random tester: Orchard mount vs. a local directory.

One seeded random sequence of file-system operations (create with and
without O_EXCL, open+write at random offsets making holes, O_APPEND and
O_TRUNC opens, reads, truncate up and down, rename of files and directories
-- over files, over empty and non-empty directories, into their own subtree
--, link, unlink, mkdir, rmdir, chmod, utime, readdir, fsync, symlink,
readlink, stat, lstat, and descriptors kept open across operations) is
applied to an Orchard mount (3 servers) and to a local directory under
tmp_path.  Every outcome (value or errno) is compared, and so are the whole
trees every 100 operations and at the end, where the Orchard tree is also
read through a second, fresh mount (what the servers hold, without the
first mount's pending sizes and kernel caches).  See tests/lib/difftest.py for
what is compared exactly.

The name space is small (five names per directory, a few directories), so
operations collide often and the error paths are exercised.

CI runs DEFAULT_OPS operations for each of the seeds below, with the
default kernel-cache timeouts (50 ms) and with dcache/getattr timeouts 0.

Replaying: a failure prints the seed and the operation index; run

    ORCH_DIFF_SEED=N ORCH_DIFF_OPS=M ORCH_BUILDDIR=build \\
        /usr/bin/python3 -m pytest -q tests/py/test_differential.py [-k zero|default]

to run exactly that seed for M operations (with each timeout configuration
unless -k picks one).  ORCH_DIFF_TRACE=1 prints every operation and its
local result (pytest -s to see it).
"""
import os
import shutil

import pytest

from difftest import Runner
from mount import ORCHARD_MOUNT, Mount

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or not os.path.exists(ORCHARD_MOUNT)
    or shutil.which("fusermount3") is None or os.geteuid() != 0,
    reason="needs root, /dev/fuse, fusermount3 and orchard-mount")

DEFAULT_OPS = 1500
CONFIGS = {
    "default": {},
    "zero": {"dcache_timeout_ms": 0, "getattr_timeout_ms": 0},
}
SEEDS = {"default": [1, 2, 3], "zero": [4, 5, 6]}


def _cases():
    env_seed = os.environ.get("ORCH_DIFF_SEED")
    out = []
    for cfg in CONFIGS:
        seeds = [int(env_seed)] if env_seed else SEEDS[cfg]
        out += [pytest.param(cfg, s, id="%s-seed%d" % (cfg, s)) for s in seeds]
    return out


@pytest.mark.parametrize("config,seed", _cases())
def test_differential(cluster3, tmp_path, config, seed):
    nops = int(os.environ.get("ORCH_DIFF_OPS", DEFAULT_OPS))
    trace = print if os.environ.get("ORCH_DIFF_TRACE") else None
    local = tmp_path / "local"
    local.mkdir()
    m = Mount(cluster3, tmp_path / "mnt", CONFIGS[config]).start()
    try:
        r = Runner(seed, m.mnt, str(local), label="timeouts " + config, trace=trace)
        r.run(nops)
        # What the servers hold, seen by a mount that never saw the sequence
        # (nothing pending in its inode table, cold kernel caches).
        fresh = Mount(cluster3, tmp_path / "fresh", CONFIGS["zero"]).start()
        try:
            r.check_trees(nops, "through a fresh mount at the end", fresh.mnt)
        finally:
            fresh.stop()
        print("seed %d (%s): %d ops: %s" % (seed, config, nops, " ".join(
            "%s=%d" % kv for kv in sorted(r.stats.items()) if ":" in kv[0])))
        unknown = m.stats()["inode_table"]["forget_unknown"]
        assert unknown == 0, "%d FORGETs of unknown inodes" % unknown
    finally:
        m.stop()
