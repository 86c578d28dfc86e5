"""Coherent mode (docs/DESIGN.md, "Coherent mode"): with coherent=on, the
kernel keeps names, absent names and attributes a server leased until the
lease ends, not for the 50 ms timeouts, because every change before then is
pushed, dropped from the kernel and acknowledged before it returns
(test_acks.py runs its checks on coherent mounts too).  So stats of cached
names cost no FUSE request at all.
"""
import os
import shutil
import stat
import time

import pytest

from cluster import ORCHARD, run, wait_until
from mount import ORCHARD_MOUNT, kernel_asks, stat_errno, write_file

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or not os.path.exists(ORCHARD_MOUNT)
    or shutil.which("fusermount3") is None,
    reason="needs /dev/fuse, fusermount3 and orchard-mount")

COHERENT = {"coherent": "on"}
NFILES = 10000


def test_ten_thousand_cached_stats_cost_no_fuse_request(mounts):
    """10,000 names, stat-ed twice (a LOOKUP each, then a GETATTR each: an
    inode new to the kernel keeps its first attributes for the 50 ms
    timeout only), then stat-ed again: not one LOOKUP or GETATTR."""
    a = mounts()
    b = mounts(COHERENT)
    os.mkdir(a.path("d"))
    for i in range(NFILES):
        with open(a.path("d", "f%d" % i), "wb"):
            pass
    paths = [b.path("d", "f%d" % i) for i in range(NFILES)]
    for p in paths:
        os.stat(p)
    for p in paths:
        os.stat(p)
    asked = kernel_asks(b)
    for p in paths:
        os.stat(p)
    assert kernel_asks(b) - asked <= 1   # reading the counters may ask for the root
    # The same with coherence off (a mount with the same timeouts): every
    # stat after the 50 ms asks again.
    c = mounts({"coherent": "off"})
    for p in paths[:100]:
        os.stat(p.replace(b.mnt, c.mnt))
    time.sleep(0.1)   # what is awaited is the 50 ms timeout itself
    asked = kernel_asks(c)
    for p in paths[:100]:
        os.stat(p.replace(b.mnt, c.mnt))
    assert kernel_asks(c) - asked >= 100


def test_absent_names_are_kept_and_dropped_by_a_create(mounts):
    a = mounts()
    b = mounts(COHERENT)
    p = b.path("absent")
    assert stat_errno(p) == 2
    asked = kernel_asks(b)
    for _ in range(100):
        assert stat_errno(p) == 2
    assert kernel_asks(b) - asked <= 1
    write_file(a.path("absent"), b"now")
    assert stat_errno(p) == 0   # on the create's return, no wait


def test_the_kernel_asks_again_when_the_lease_ends(cluster3, mounts):
    """The kernel keeps a leased answer to the lease's end, not longer:
    lease_ms 1 s, and a stat 1.2 s after the one that filled the cache is
    asked of the mount again."""
    cluster3.stop_all()
    cluster3.set_cluster_option("lease_ms", 1000)
    cluster3.start_all()
    a = mounts()
    b = mounts(COHERENT)
    write_file(a.path("f"), b"x")
    os.stat(b.path("f"))
    os.stat(b.path("f"))
    asked = kernel_asks(b)
    os.stat(b.path("f"))
    assert kernel_asks(b) - asked <= 1
    time.sleep(1.2)   # what is awaited is the lease's end itself
    asked = kernel_asks(b)
    os.stat(b.path("f"))
    assert kernel_asks(b) - asked >= 1


def test_cache_mode_shown_and_switched_live(cluster3, mounts):
    m = mounts()
    out = run([ORCHARD, "cache", m.mnt]).stdout
    assert "coherent=1" in out.split()   # the default
    assert "mode: coherent:" in out and "lease_ms=30000" in out
    out = run([ORCHARD, "cache", m.mnt, "coherent=off"]).stdout
    assert "coherent=0" in out.split() and "mode: timeouts: coherent is off" in out
    write_file(m.path("g"), b"x")
    os.stat(m.path("g"))
    time.sleep(0.1)   # what is awaited is the 50 ms timeout itself
    asked = kernel_asks(m)
    os.stat(m.path("g"))
    assert kernel_asks(m) - asked >= 1
    out = run([ORCHARD, "cache", m.mnt, "coherent=on"]).stdout
    assert "coherent=1" in out.split()
    r = run([ORCHARD, "cache", m.mnt, "coherent=maybe"], check=False)
    assert r.returncode == 1 and "on, off, 1 or 0" in r.stderr
    assert m.knob("coherent") == 1
    # The switch works on the answers that follow.
    write_file(m.path("f"), b"x")
    os.stat(m.path("f"))
    os.stat(m.path("f"))
    asked = kernel_asks(m)
    for _ in range(50):
        os.stat(m.path("f"))
    assert kernel_asks(m) - asked <= 1
    assert stat.S_ISREG(os.stat(m.path("f")).st_mode)


def test_no_leases_means_timeouts(cluster3, mounts):
    """coherent=on without leases (lease_ms = 0): the timeouts apply."""
    cluster3.stop_all()
    cluster3.set_cluster_option("lease_ms", 0)
    cluster3.start_all()
    m = mounts({"coherent": "on", "dcache_timeout_ms": 0, "getattr_timeout_ms": 0})
    out = run([ORCHARD, "cache", m.mnt]).stdout
    assert "mode: timeouts: coherent is on, but the config grants no leases" in out
    write_file(m.path("f"), b"x")
    asked = kernel_asks(m)
    for _ in range(20):
        os.stat(m.path("f"))
    assert kernel_asks(m) - asked >= 20


def observe(m, names):
    """Each name's state on mount m: absent, or type, mode, size, links."""
    out = []
    for n in names:
        try:
            st = os.lstat(m.path(n))
        except FileNotFoundError:
            out.append(None)
            continue
        out.append((stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                    st.st_size if stat.S_ISREG(st.st_mode) else 0, st.st_nlink))
    return out


def test_random_changes_show_on_the_other_mount_at_once(mounts):
    """Thousands of seeded changes, each made on a random one of two
    coherent mounts and checked on the other as soon as it returns: the
    names it touched (and their directories) look the same on both.  The
    seed is printed on failure (ORCH_TEST_SEED=N replays it)."""
    import random

    seed = int(os.environ.get("ORCH_TEST_SEED", "0")) or random.randrange(1, 1 << 30)
    rng = random.Random(seed)
    ms = [mounts(COHERENT), mounts(COHERENT)]
    dirs = ["", "d0", "d1", "d0/e"]
    for d in dirs[1:]:
        os.mkdir(ms[0].path(d))
    names = ["%s%s%d" % (d, "/" if d else "", i) for d in dirs for i in range(4)]
    ops = 0
    stale = []
    for step in range(int(os.environ.get("ORCH_TEST_OPS", "2000"))):
        a = rng.randrange(2)
        m, other = ms[a], ms[1 - a]
        n = rng.choice(names)
        n2 = rng.choice(names)
        touched = [n, n2, os.path.dirname(n) or ".", os.path.dirname(n2) or "."]
        # Both mounts hold what the check will look at, in their kernels.
        observe(other, touched)
        kind = rng.choice(["create", "write", "truncate", "chmod", "unlink", "rename",
                           "link", "mkdir", "rmdir"])
        try:
            if kind == "create":
                os.close(os.open(m.path(n), os.O_CREAT | os.O_WRONLY, 0o644))
            elif kind == "write":
                with open(m.path(n), "ab") as f:
                    f.write(b"x" * rng.randrange(1, 100))
            elif kind == "truncate":
                os.truncate(m.path(n), rng.randrange(0, 300))
            elif kind == "chmod":
                os.chmod(m.path(n), rng.choice([0o600, 0o644, 0o755, 0o700]))
            elif kind == "unlink":
                os.unlink(m.path(n))
            elif kind == "rename":
                os.rename(m.path(n), m.path(n2))
            elif kind == "link":
                os.link(m.path(n), m.path(n2))
            elif kind == "mkdir":
                os.mkdir(m.path(n))
            elif kind == "rmdir":
                os.rmdir(m.path(n))
            ops += 1
        except OSError:
            pass   # the model is the mounts themselves: a refused change changes nothing
        want, got = observe(m, touched), observe(other, touched)
        if want != got:
            stale.append("step %d: %s %s %s on mount %d: %r on it, %r on the other"
                         % (step, kind, n, n2, a, want, got))
            if len(stale) >= 5:
                break
    assert not stale, "seed %d:\n%s" % (seed, "\n".join(stale))
    assert ops > 300, "seed %d: only %d changes went through" % (seed, ops)


def test_names_kept_by_the_kernel_go_when_their_server_restarts(cluster3, mounts):
    """A restarted server forgot every lease and cannot push what changes
    next, so b must drop from its kernel every name of that server it was
    keeping on a lease, absent or present (knames.c), not keep them to the
    lease's end (30 s)."""
    a = mounts()
    b = mounts(COHERENT)
    write_file(a.path("here"), b"x")
    assert stat_errno(b.path("absent")) == 2
    assert stat_errno(b.path("here")) == 0
    asked = kernel_asks(b)
    for _ in range(20):
        assert stat_errno(b.path("absent")) == 2
        assert stat_errno(b.path("here")) == 0
    assert kernel_asks(b) - asked <= 1   # b's kernel keeps both
    kept = b.stats()["kernel_invalidations"]["names_kept"]
    assert kept >= 2
    cluster3.kill("s0")                  # the root's names live on s0
    cluster3.start("s0")
    write_file(a.path("absent"), b"now")
    os.unlink(a.path("here"))
    t0 = time.monotonic()
    wait_until(lambda: stat_errno(b.path("absent")) == 0 and stat_errno(b.path("here")) == 2,
               5.0, interval=0.01, what="b to drop the names it kept from s0")
    print("b saw both changes %.3f s after they returned" % (time.monotonic() - t0))
    assert b.stats()["kernel_invalidations"]["names_reset"] >= 2


def listings(m):
    f = m.stats()["fuse"]
    return f["READDIR"] + f["READDIRPLUS"]


def test_listings_kept_by_the_kernel_and_dropped_by_a_change(mounts):
    """b's kernel keeps d's listing from one open to the next (no READDIR at
    all); a create, an unlink or a rename on a, and b's own create, show in
    b's next listing as soon as they return."""
    a = mounts()
    b = mounts(COHERENT)
    os.mkdir(a.path("d"))
    want = {"f%d" % i for i in range(50)}
    for n in want:
        write_file(a.path("d", n), b"")
    assert set(os.listdir(b.path("d"))) == want
    before = listings(b)
    for _ in range(20):
        assert set(os.listdir(b.path("d"))) == want
    assert listings(b) == before
    steps = [
        ("create", lambda: write_file(a.path("d", "new"), b"")),
        ("unlink", lambda: os.unlink(a.path("d", "f0"))),
        ("rename", lambda: os.rename(a.path("d", "f1"), a.path("d", "g1"))),
        ("rename out", lambda: os.rename(a.path("d", "f2"), a.path("f2"))),
        ("own create", lambda: write_file(b.path("d", "mine"), b"")),
    ]
    for what, change in steps:
        os.listdir(b.path("d"))                  # cached before the change
        change()
        cur = set(os.listdir(a.path("d")))
        assert set(os.listdir(b.path("d"))) == cur, what
    assert "new" in cur and "f0" not in cur and "g1" in cur and "mine" in cur
    # Kept again once re-read.
    before = listings(b)
    for _ in range(5):
        assert set(os.listdir(b.path("d"))) == cur
    assert listings(b) == before
    # Not kept with coherent=off.
    c = mounts({"coherent": "off"})
    os.listdir(c.path("d"))
    before = listings(c)
    for _ in range(5):
        os.listdir(c.path("d"))
    assert listings(c) - before >= 5


def test_ls_l_again_costs_no_lookup(mounts):
    """The names and attributes of a listing are kept like a lookup's: a
    second `ls -l` (a listing and a stat of each name) asks b's mount
    nothing but to open the directory."""
    a = mounts()
    b = mounts(COHERENT)
    os.mkdir(a.path("d"))
    for i in range(200):
        write_file(a.path("d", "f%d" % i), b"x" * i)

    def ls_l():
        return {n: os.lstat(b.path("d", n)).st_size for n in os.listdir(b.path("d"))}

    assert ls_l() == {"f%d" % i: i for i in range(200)}
    ls_l()
    asked, lists = kernel_asks(b), listings(b)
    assert ls_l() == {"f%d" % i: i for i in range(200)}
    assert kernel_asks(b) - asked <= 1 and listings(b) == lists


def test_cached_data_kept_across_opens_and_dropped_by_another_writer(mounts):
    """b's page cache of a file survives b's close and open (no READ), and
    once a's overwrite returns from its close, b reads the new bytes, even
    through a descriptor it kept open all along: the push of a's EXTEND
    dropped b's attributes before a's close returned, and b's kernel, asking
    again at its next read, sees the new mtime and drops its pages."""
    a = mounts()
    b = mounts(COHERENT)
    old = bytes(range(256)) * 256            # 64 KiB
    write_file(a.path("f"), old)
    kept = os.open(b.path("f"), os.O_RDONLY)
    try:
        assert os.pread(kept, len(old), 0) == old
        reads = b.stats()["fuse"]["READ"]
        for _ in range(3):
            with open(b.path("f"), "rb") as f:
                assert f.read() == old
        assert os.pread(kept, len(old), 0) == old
        assert b.stats()["fuse"]["READ"] == reads      # all from b's page cache
        fd = os.open(a.path("f"), os.O_WRONLY)
        try:
            os.pwrite(fd, b"NEW!" * 1024, 8192)
        finally:
            os.close(fd)
        new = old[:8192] + b"NEW!" * 1024 + old[8192 + 4096:]
        assert os.pread(kept, len(old), 0) == new
        with open(b.path("f"), "rb") as f:
            assert f.read() == new
    finally:
        os.close(kept)

