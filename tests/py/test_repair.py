"""`orchard repair` rebuilds a stopped server's lost extent map from the
reverse map (docs/SPEC-store.md, "Repair" and I28).

A file is written through the cluster; one server is stopped and the file's
extent-map (bmap) records are deleted from its store.db with the test hook
(build/tests/store-hack); started again, that server no longer has the
file's strips (reads fail or give zeros).  `orchard repair --rebuild bmap`
refuses while the server runs (exit 4), a dry run changes nothing, and with
the server stopped it rebuilds the map, re-checks clean, and the file reads
back byte for byte.
"""
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from cluster import BUILDDIR, ORCHARD, Cluster, stat_layout  # noqa: E402

STORE_HACK = os.path.join(BUILDDIR, "tests", "store-hack")
FILE_SIZE = (3 << 20) + 12345


def cat(c, path):
    p = subprocess.run([ORCHARD, "-c", c.conf, "cat", path], capture_output=True, timeout=60)
    return p.returncode, p.stdout


def repair(c, *args):
    return subprocess.run([ORCHARD, "-c", c.conf, "repair"] + list(args),
                          capture_output=True, text=True, timeout=300)


def server_strips(f, idx, size):
    """Byte ranges of a file of @size held by server @idx."""
    ss, cnt, first = f["strip_size"], f["stripe_count"], f["first_server"]
    for i in range((size + ss - 1) // ss):
        if (first + i) % cnt == idx:
            yield i * ss, min(size, (i + 1) * ss)


def test_repair_rebuilds_lost_bmap(tmp_path):
    assert os.path.exists(STORE_HACK), "build it: make " + STORE_HACK
    # Small AGs and extents: the file's strips become many extents in many AGs.
    c = Cluster(tmp_path / "c", nservers=2, store_size="64M", ag_blocks=1024, maxext=16)
    c.start_all()
    try:
        data = random.Random(5).randbytes(FILE_SIZE)
        src = tmp_path / "src"
        src.write_bytes(data)
        c.cli("put", str(src), "/f")
        assert cat(c, "/f") == (0, data)
        f = stat_layout(c, "/f")
        assert f["stripe_count"] == 2
        victim, vidx = "s1", 1
        ddir = os.path.join(c.dir, victim)

        # The hook refuses while the server has the store open.
        h = subprocess.run([STORE_HACK, ddir, "drop-bmap", hex(f["handle"])],
                           capture_output=True, text=True)
        assert h.returncode == 4, h.stderr

        c.stop(victim)
        h = subprocess.run([STORE_HACK, ddir, "drop-bmap", hex(f["handle"])],
                           capture_output=True, text=True, check=True)
        assert int(h.stdout) > 10, "too few extents dropped: " + h.stdout

        c.start(victim)
        rc, out = cat(c, "/f")
        if rc == 0:
            # The victim's strips read as zeros now, the others are intact.
            assert len(out) == FILE_SIZE
            for a, b in server_strips(f, vidx, FILE_SIZE):
                assert out[a:b] == bytes(b - a), "strip at %d not zeros" % a
            assert out != data

        # Against the running server: refused, with the reason.
        r = repair(c, victim, "--rebuild", "bmap")
        assert r.returncode == 4, r.stdout + r.stderr
        assert "in use" in r.stderr and "running" in r.stderr, r.stderr

        c.stop(victim)
        r = repair(c, victim, "--rebuild", "bmap", "--dry-run")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "dry run" in r.stdout, r.stdout

        r = repair(c, victim, "--rebuild", "bmap")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "re-check: clean" in r.stdout, r.stdout
        assert "0 dropped" in r.stdout and "blocks failing their checksum: 0" in r.stdout

        c.start(victim)
        assert cat(c, "/f") == (0, data)
        dst = tmp_path / "dst"
        c.cli("get", "/f", str(dst))
        assert dst.read_bytes() == data

        # Nothing left to do: a second rebuild changes nothing.
        c.stop(victim)
        r = repair(c, victim, "--rebuild", "rmap")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "(0 added, 0 dropped)" in r.stdout, r.stdout
    finally:
        c.stop_all()


def test_repair_usage(tmp_path):
    c = Cluster(tmp_path / "c", nservers=1, store_size="64M", ag_blocks=1024)
    for args in ([], ["s0"], ["s0", "--rebuild", "inodes"], ["nosuch", "--rebuild", "rmap"],
                 ["s0", "s1", "--rebuild", "rmap"]):
        r = repair(c, *args)
        assert r.returncode == 8, (args, r.stdout, r.stderr)
    for what in ("bmap", "rmap", "freespace", "refcount"):
        r = repair(c, "s0", "--rebuild", what)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "re-check: clean" in r.stdout
