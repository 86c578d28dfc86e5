"""Acknowledged invalidation (docs/DESIGN.md, "Acknowledged invalidation"):
a change made through mount A returns only once every other mount that
held what it changed (attributes, names present or absent) dropped it from
its kernel (or its lease ran out), so the first call on B or C after A's
returns sees the new state, with no wait and no retry.

B and C keep attributes, names and absent names for a minute in their
kernels: without the acknowledgements their first stat would show the old
value for that minute, or at best until their notifier ran.
"""
import os
import shutil
import signal
import stat
import time

import pytest

from cluster import wait_until
from mount import (KERNEL_KEEPS_A_MINUTE, ORCHARD_MOUNT, kernel_asks, run_threads, stat_errno,
                   write_file)

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or not os.path.exists(ORCHARD_MOUNT)
    or shutil.which("fusermount3") is None,
    reason="needs /dev/fuse, fusermount3 and orchard-mount")

ROUNDS = 40


def held_replies(cluster):
    return sum(s["replies_held"] for s in cluster.server_stats().values())


def cached_in_kernel(m, fn):
    """Calls fn() on mount m, then proves its kernel answers it alone:
    ten more calls cost no LOOKUP or GETATTR (reading the counters may
    cost one).  In coherent mode an inode new to the kernel keeps its
    first attributes for 50 ms only, so a second try is allowed, whose
    GETATTR then got them for the lease.  Returns fn()'s value."""
    v = fn()
    for _ in range(3):
        asked = kernel_asks(m)
        for _ in range(10):
            assert fn() == v
        if kernel_asks(m) - asked <= 1:
            return v
    raise AssertionError("the kernel of %s does not hold it" % m.mnt)


@pytest.fixture(params=["minute", "coherent"])
def three(mounts, cluster3, request):
    """A changes; B and C hold for a minute (the timeouts), or to the end
    of their leases (coherent mode, test_coherent.py)."""
    held = KERNEL_KEEPS_A_MINUTE if request.param == "minute" else {"coherent": "on"}
    a = mounts()
    b = mounts(held)
    c = mounts(held)
    os.mkdir(a.path("d"))
    write_file(a.path("d", "f"), b"12345")
    return a, b, c, cluster3


def check_each_round(three, change, observe, values):
    """For each value v: B and C hold the old value in their kernels, A
    makes change(v), and on its return the first observe() on B and on C
    gives v."""
    a, b, c, cluster = three
    held = held_replies(cluster)
    stale = []
    for i, v in enumerate(values):
        old_b = cached_in_kernel(b, lambda: observe(b))
        old_c = cached_in_kernel(c, lambda: observe(c))
        assert old_b == old_c != v
        change(a, v)
        got_b, got_c = observe(b), observe(c)
        if got_b != v or got_c != v:
            stale.append("round %d: wanted %r, B saw %r, C saw %r" % (i, v, got_b, got_c))
    assert not stale, "\n".join(stale)
    # The replies waited for B's and C's acknowledgements, and they came.
    assert held_replies(cluster) > held
    assert b.stats()["kernel_invalidations"]["acks"] > 0
    assert c.stats()["kernel_invalidations"]["acks"] > 0


def test_chmod_shows_on_return(three):
    modes = [0o600 if i % 2 == 0 else 0o640 for i in range(ROUNDS)]
    check_each_round(three, lambda m, v: os.chmod(m.path("d", "f"), v),
                     lambda m: stat.S_IMODE(os.stat(m.path("d", "f")).st_mode), modes)


def test_chown_shows_on_return(three):
    uids = [1000 + i for i in range(ROUNDS)]
    check_each_round(three, lambda m, v: os.chown(m.path("d", "f"), v, -1),
                     lambda m: os.stat(m.path("d", "f")).st_uid, uids)


def test_utimens_shows_on_return(three):
    times = [1_000_000_000 + i * 1000 for i in range(ROUNDS)]
    check_each_round(three, lambda m, v: os.utime(m.path("d", "f"), (v, v)),
                     lambda m: int(os.stat(m.path("d", "f")).st_mtime), times)


def test_truncate_shows_on_return(three):
    sizes = [100 + i for i in range(ROUNDS)]
    check_each_round(three, lambda m, v: os.truncate(m.path("d", "f"), v),
                     lambda m: os.stat(m.path("d", "f")).st_size, sizes)


def test_write_and_close_shows_on_return(three):
    def append(m, size):
        with open(m.path("d", "f"), "ab") as f:
            f.write(b"x" * (size - f.tell()))

    sizes = [10 + 3 * i for i in range(ROUNDS)]
    check_each_round(three, append, lambda m: os.stat(m.path("d", "f")).st_size, sizes)


def test_link_count_shows_on_return(three):
    """A hard link made or removed on A: the file's link count on B and C."""
    def links(m, n):
        have = os.stat(m.path("d", "f")).st_nlink
        if n > have:
            os.link(m.path("d", "f"), m.path("d", "l%d" % have))
        else:
            os.unlink(m.path("d", "l%d" % n))

    counts = [2, 3, 2, 1] * (ROUNDS // 4)
    check_each_round(three, links, lambda m: os.stat(m.path("d", "f")).st_nlink, counts)


def test_directory_attributes_show_on_return(three):
    """A create in d changes d's mtime and size: B and C see them."""
    def create(m, n):
        write_file(m.path("d", "n%d" % n), b"")

    def observe(m):
        st = os.stat(m.path("d"))
        return st.st_mtime_ns, st.st_size

    a, b, c, cluster = three
    stale = []
    for i in range(ROUNDS):
        old = cached_in_kernel(b, lambda: observe(b))
        cached_in_kernel(c, lambda: observe(c))
        create(a, i)
        want = observe(a)
        assert want != old
        if observe(b) != want or observe(c) != want:
            stale.append("round %d" % i)
    assert not stale


def test_stopped_holder_delays_a_change_by_its_lease_at_most(cluster3, mounts):
    """B holds f's attributes and is frozen (SIGSTOP): A's chmod waits for
    B's lease to run out (lease_ms 2 s and the server's 1 s margin), not
    longer, and after SIGCONT B does not show the old mode: its kernel
    kept the attributes no longer than its lease."""
    cluster3.stop_all()
    cluster3.set_cluster_option("lease_ms", 2000)
    cluster3.start_all()
    short = {"dcache_timeout_ms": 2000, "getattr_timeout_ms": 2000,
             "negative_timeout_ms": 2000}
    a = mounts()
    b = mounts(short)
    write_file(a.path("f"), b"x")
    assert stat.S_IMODE(os.stat(b.path("f")).st_mode) != 0o600
    t_lease = time.monotonic()

    def counts():
        keys = ("lease_grants", "lease_pushes", "acks", "replies_held")
        return {k: sum(s[k] for s in cluster3.server_stats().values()) for k in keys}
    before = counts()
    os.kill(b.proc.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        os.chmod(a.path("f"), 0o600)
        took = time.monotonic() - t0
        waited = time.monotonic() - t_lease
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
    # What the servers did, should it not wait (seen once under load).
    assert took > 0.5, "the chmod did not wait for the frozen holder (%.4f s): %s -> %s" % (
        took, before, counts())
    assert waited < 2.0 + 1.0 + 1.5, "the chmod waited past B's lease (%.2f s)" % waited
    stats = cluster3.server_stats().values()
    assert sum(s["replies_held_by_expiry"] for s in stats) >= 1
    assert stat.S_IMODE(os.stat(b.path("f")).st_mode) == 0o600


def test_killed_holder_does_not_delay_a_change(three):
    """A holder whose connection closed holds nobody: B is killed, A's
    chmod returns at once (the 30 s lease is not waited out)."""
    a, b, c, cluster = three
    os.stat(b.path("d", "f"))
    os.stat(c.path("d", "f"))
    b.kill()   # its sockets close with the process
    t0 = time.monotonic()
    os.chmod(a.path("d", "f"), 0o600)
    assert time.monotonic() - t0 < 2.0
    assert stat.S_IMODE(os.stat(c.path("d", "f")).st_mode) == 0o600


# --- Names ------------------------------------------------------------------------------


def lstat_state(path):
    """What a name is: 'absent', or its type and link count."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    return (stat.S_IFMT(st.st_mode), st.st_nlink)


def names_each_round(three, change, names, rounds=ROUNDS // 2):
    """For each round i: B and C hold the state of every name in names(i)
    (present or absent) in their kernels, A makes change(i), and on its
    return B's and C's first lstat of each name matches A's."""
    a, b, c, cluster = three
    held = held_replies(cluster)
    stale = []
    for i in range(rounds):
        for m in (b, c):
            cached_in_kernel(m, lambda: [lstat_state(m.path(*n)) for n in names(i)])
        change(a, i)
        want = [lstat_state(a.path(*n)) for n in names(i)]
        for m in (b, c):
            got = [lstat_state(m.path(*n)) for n in names(i)]
            if got != want:
                stale.append("round %d on %s: wanted %r, saw %r" % (i, m.mnt, want, got))
    assert not stale, "\n".join(stale)
    assert held_replies(cluster) > held


def test_create_and_unlink_show_on_return(three):
    def change(a, i):
        if i % 2 == 0:
            write_file(a.path("d", "n"), b"")
        else:
            os.unlink(a.path("d", "n"))

    names_each_round(three, change, lambda i: [("d", "n")])


def test_mkdir_and_rmdir_show_on_return(three):
    def change(a, i):
        if i % 2 == 0:
            os.mkdir(a.path("d", "sub"))
        else:
            os.rmdir(a.path("d", "sub"))

    names_each_round(three, change, lambda i: [("d", "sub"), ("d",)])


def test_symlink_and_link_show_on_return(three):
    def change(a, i):
        if i % 4 == 0:
            os.symlink("f", a.path("d", "s"))
        elif i % 4 == 1:
            os.link(a.path("d", "f"), a.path("d", "h"))
        elif i % 4 == 2:
            os.unlink(a.path("d", "s"))
        else:
            os.unlink(a.path("d", "h"))

    names_each_round(three, change, lambda i: [("d", "s"), ("d", "h"), ("d", "f")])


def test_rename_shows_on_return(three):
    """Within a directory and across directories (held on other servers
    than d most of the time), both the source and the target names."""
    a = three[0]
    for e in ("e1", "e2", "e3"):
        os.mkdir(a.path(e))
    where = [("d", "f"), ("e1", "f"), ("d", "g"), ("e2", "f"), ("e3", "g")]

    def change(a, i):
        os.rename(a.path(*where[i % len(where)]), a.path(*where[(i + 1) % len(where)]))

    names_each_round(three, change, lambda i: where)


def test_xattr_shows_on_return(three):
    def change(a, i):
        if i % 3 == 2:
            os.removexattr(a.path("d", "f"), "user.k")
        else:
            os.setxattr(a.path("d", "f"), "user.k", b"v%d" % i)

    def observe(m):
        try:
            return os.getxattr(m.path("d", "f"), "user.k")
        except OSError as e:
            return e.errno

    a, b, c, cluster = three
    stale = []
    for i in range(ROUNDS):
        old = (observe(b), observe(c))
        change(a, i)
        want = observe(a)
        assert want != old[0]
        if observe(b) != want or observe(c) != want:
            stale.append("round %d" % i)
    assert not stale


# --- No cycle ----------------------------------------------------------------------------


def test_mounts_changing_what_the_other_holds_do_not_wait_for_each_other(three):
    """A and B create, rename and chmod at once, each in a directory the
    other holds in its kernel and in the one they share.  The kernel drops
    a name only under its directory's lock, which each one's own changes
    hold while their replies wait for the other's acknowledgement: if a
    name's acknowledgement waited for that lock, each would wait for the
    other until a lease ran out (30 s).  Every call returns well before."""
    a, b, c, cluster = three
    for d in ("da", "db"):
        os.mkdir(a.path(d))
    for m in (a, b):
        for d in ("d", "da", "db"):
            os.listdir(m.path(d))
            stat_errno(m.path(d, "absent"))
    slow = []
    counts = [0, 0]
    stop = time.monotonic() + 6.0

    def work(k):
        m, own = (a, "da") if k == 0 else (b, "db")
        i = 0
        while time.monotonic() < stop:
            for d in (own, "d"):
                t0 = time.monotonic()
                p = m.path(d, "%s%d" % (own, i))
                write_file(p, b"x")
                os.chmod(p, 0o600)
                os.rename(p, p + ".r")
                took = time.monotonic() - t0
                if took > 2.0:
                    slow.append("%s: %.1f s" % (p, took))
            i += 1
        counts[k] = i

    run_threads(2, work)
    assert not slow, slow
    assert min(counts) > 10
    stats = cluster.server_stats().values()
    assert sum(s["replies_held_by_expiry"] for s in stats) == 0
    early = b.stats()["kernel_invalidations"]["acks_early"] + \
        a.stats()["kernel_invalidations"]["acks_early"]
    print("names acknowledged before their call: %d" % early)


# --- Suspend ------------------------------------------------------------------------------


def test_resume_after_a_suspend_drops_what_the_kernel_holds(cluster3, mounts, tmp_path):
    """A suspended machine's CLOCK_MONOTONIC, and its kernel's cache
    timeouts, stand still while the servers' lease terms run on: after a
    resume the mount must not trust anything it held.  B holds f for a
    minute in its kernel; B stops (SIGSTOP) until its lease ran out on the
    server, so A's chmod neither waits for B nor pushes to it; B then
    "resumes from a suspend" (the ORCH_TEST_SUSPEND hook adds 5 s to what
    CLOCK_BOOTTIME counts) and drops every copy, and shows the new mode."""
    cluster3.stop_all()
    cluster3.set_cluster_option("lease_ms", 1000)
    cluster3.start_all()
    hook = tmp_path / "suspended_ms"
    hook.write_text("0")
    a = mounts()
    b = mounts(KERNEL_KEEPS_A_MINUTE, env={"ORCH_TEST_SUSPEND": str(hook)})
    write_file(a.path("f"), b"x")
    assert cached_in_kernel(b, lambda: stat.S_IMODE(os.stat(b.path("f")).st_mode)) == 0o644
    walks = b.stats()["kernel_invalidations"]["revokes"]
    os.kill(b.proc.pid, signal.SIGSTOP)
    try:
        # What is awaited is the clock itself: the server's term for B's
        # lease (lease_ms and the 1 s margin) running out.
        time.sleep(1.0 + 1.0 + 0.5)
        t0 = time.monotonic()
        os.chmod(a.path("f"), 0o600)
        assert time.monotonic() - t0 < 0.5   # B's lease was over: nobody to wait for
        hook.write_text("5000")
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
    wait_until(lambda: b.stats()["kernel_invalidations"]["suspends"] >= 1, 5.0, 0.01,
               "B to see the suspend")
    wait_until(lambda: b.stats()["kernel_invalidations"]["revokes"] >= walks + 3, 5.0, 0.01,
               "B's walks of each server's inodes")
    assert stat.S_IMODE(os.stat(b.path("f")).st_mode) == 0o600
