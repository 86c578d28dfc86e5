"""Network faults between a mount and its servers, on the
multi-host harness of tests/lib/netns.py: every server in its own network
namespace, the mount in the root one, linkemu as the wire.

The bounds asserted (docs/mount.md, "Failures"):
* a syscall on a path of a server whose link is cut, or that is frozen,
  fails (EIO or ETIMEDOUT) within op_timeout_ms + 1 s, however often the
  kernel retries it;
* calls that touch only the other servers go at normal speed meanwhile;
* the first call after the link heals succeeds within about 1 s.

Each test takes some seconds.  `make soak` runs them at the scale the faults were first measured at
(ORCH_NET_SOAK=1): op_timeout_ms 10 s, a server frozen for 45 s, 5% loss.
"""
import errno
import hashlib
import os
import random
import re
import threading
import time

import pytest

from cluster import server_of
from mount import Mount
from netns import NetCluster, skip_unless_usable, timed, wait_until

SOAK = bool(os.environ.get("ORCH_NET_SOAK"))
T_MS = 10000 if SOAK else 3000   # the mount's op_timeout_ms
FROZEN_S = 45 if SOAK else 2 * T_MS / 1000 + 1
LOSS = 0.05 if SOAK else 0.01
BOUND = T_MS / 1000 + 1.0    # one syscall against a sick server
FAST = 2.0                   # a call that touches only healthy servers
RECOVER = 2.0                # heal -> first call that succeeds (target 1 s)
LEASE_MS = 1000              # what the mount may answer from its lease cache


@pytest.fixture
def netc(tmp_path):
    skip_unless_usable()
    with NetCluster(tmp_path / "c", nservers=3, start=False) as c:
        c.set_cluster_option("lease_ms", LEASE_MS)
        c.start_all()
        yield c


@pytest.fixture
def mnt(netc, tmp_path):
    m = Mount(netc, tmp_path / "mnt", opts={"op_timeout_ms": T_MS}).start()
    try:
        yield m
    finally:
        m.stop()


def dirs_by_server(c, m, n=3, tries=24):
    """{server index: a directory of the mount whose inode it holds}, with a
    small file `f` (one strip: its data is on that server too)."""
    out = {}
    for i in range(tries):
        d = "d%d" % i
        os.mkdir(m.path(d))
        s = server_of(c, "/" + d)
        if s not in out:
            with open(m.path(d, "f"), "wb") as f:
                f.write(b"%d\n" % s * 100)
            out[s] = d
        if len(out) == n:
            return out
    raise AssertionError("no directory on every server: %s" % out)


def check_fails_in_bound(what, fn, *args):
    dt, r = timed(fn, *args)
    assert isinstance(r, OSError) and r.errno in (errno.EIO, errno.ETIMEDOUT), \
        "%s: %r after %.1f s" % (what, r, dt)
    assert dt <= BOUND, "%s took %.1f s, more than op_timeout + 1 s" % (what, dt)
    return dt


def cat(path):
    with open(path, "rb") as f:
        return f.read()


def create(path):
    with open(path, "wb") as f:
        f.write(b"new\n")


def test_cut_link_one_deadline_per_call_and_quick_recovery(netc, mnt):
    """Each syscall on a path of a server whose link was just cut (the
    kernel revalidates, looks up, then calls: several requests) fails within
    one deadline, and the first call after the link heals succeeds."""
    c, m = netc, mnt
    dirs = dirs_by_server(c, m)
    victim = dirs[1]
    path = m.path(victim, "f")
    ops = (("stat", os.stat, path), ("readdir", os.listdir, m.path(victim)),
           ("open", cat, path), ("create", create, m.path(victim, "new")))
    took, recovery = {}, []

    def ok():
        try:
            os.listdir(m.path(victim))
            return cat(path)
        except OSError:
            return None
    for what, fn, arg in ops:
        assert ok() == b"1\n" * 100       # cached by the kernel and the mount
        c.net.cut("s1")
        time.sleep(LEASE_MS / 1000 + 0.2)   # what s1 leased us is stale now
        took[what] = check_fails_in_bound(what, fn, arg)
        c.net.heal("s1")
        t0 = time.monotonic()
        assert wait_until(ok, 30, 0.02, "s1's file after the heal") == b"1\n" * 100
        recovery.append(time.monotonic() - t0)
    # A longer cut, the mount asking all along: TCP's retransmission
    # backoff on the old connection must not delay the recovery.
    c.net.cut("s1")
    end = time.monotonic() + 10
    while time.monotonic() < end:
        timed(os.stat, m.path(victim, "new"))
        time.sleep(0.5)
    c.net.heal("s1")
    t0 = time.monotonic()
    assert wait_until(ok, 30, 0.02, "s1's file after the heal") == b"1\n" * 100
    recovery.append(time.monotonic() - t0)
    print("cut link, syscall durations:", {k: round(v, 2) for k, v in took.items()},
          "recovery after heal:", [round(v, 2) for v in recovery])
    assert max(recovery) <= RECOVER, "first call succeeded %.1f s after the heal" % \
        max(recovery)


def test_reply_on_the_wire_when_the_link_goes_does_not_keep_it(netc, mnt):
    """A reply that was on the wire when the link was cut arrives just
    after the next call left: the server still counts as sick when that
    call times out (TCP never had its bytes acknowledged), so the first
    call after the heal dials afresh instead of waiting out the dead
    connection's retransmission backoff (seconds)."""
    c, m = netc, mnt
    dirs = dirs_by_server(c, m)
    victim = dirs[1]
    path = m.path(victim, "f")
    os.setxattr(path, "user.k", b"v")
    fd = os.open(path, os.O_RDONLY)
    try:
        recovery = reply_on_the_wire_then_heal(c, m, fd, victim, path)
    finally:
        os.close(fd)
    print("reply on the wire at the cut: recovery after heal %.2f s" % recovery)
    assert recovery <= 1.0, "first call succeeded %.1f s after the heal" % recovery


def reply_on_the_wire_then_heal(c, m, fd, victim, path):
    """The cut of the test above; returns the seconds from the heal to the
    first call that succeeds."""
    got = []
    try:
        # s1's replies take 0.4 s; its way in is cut while one (to an
        # xattr read: one request, no path) is on the wire, and the
        # create's first request leaves before it arrives.
        c.net.set("s1", dir="out", state="up", delay_ms=400)
        first = threading.Thread(target=lambda: got.append(timed(os.getxattr, fd, "user.k")))
        first.start()
        time.sleep(0.1)
        c.net.set("s1", dir="in", state="down")
        time.sleep(0.1)
        check_fails_in_bound("create after the cut", create, m.path(victim, "b"))
        first.join()
        # Long enough for TCP's retransmission backoff to grow to seconds.
        time.sleep(5)
    finally:
        c.net.set("s1", state="up", delay_ms=0)
    t0 = time.monotonic()
    assert got[0][1] == b"v", got   # s1's reply came

    def ok():
        try:
            return cat(path)
        except OSError:
            return None
    assert wait_until(ok, 30, 0.02, "s1's file after the heal") == b"1\n" * 100
    return time.monotonic() - t0


def test_frozen_server_does_not_stall_the_others(netc, mnt):
    """s2 is stopped (SIGSTOP) while threads keep calling on its files:
    calls on files and directories of s0 and s1 go at normal speed all
    along, and those on s2 fail within a deadline."""
    c, m = netc, mnt
    dirs = dirs_by_server(c, m)
    for s in range(3):
        for i in range(8):
            with open(m.path(dirs[s], "g%d" % i), "wb") as f:
                f.write(b"%d\n" % s * 100)
    c.freeze("s2")
    time.sleep(LEASE_MS / 1000 + 0.2)   # what s2 leased us is stale now
    stop = threading.Event()
    sick = []

    def hammer(k):
        while not stop.is_set():
            for what, fn, arg in (("stat", os.stat, m.path(dirs[2], "g%d" % k)),
                                  ("readdir", os.listdir, m.path(dirs[2])),
                                  ("read", cat, m.path(dirs[2], "g%d" % k))):
                dt, r = timed(fn, arg)
                sick.append((what, dt, r))
    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(24)]
    for t in threads:
        t.start()
    slow = []
    try:
        end = time.monotonic() + FROZEN_S
        n = 0
        while time.monotonic() < end:
            for s in (0, 1):
                g = m.path(dirs[s], "g%d" % (n % 8))
                for what, fn, arg in (("stat", os.stat, g), ("readdir", os.listdir,
                                                             m.path(dirs[s])),
                                      ("read", cat, g)):
                    dt, r = timed(fn, arg)
                    assert not isinstance(r, OSError), "%s on s%d: %r" % (what, s, r)
                    slow.append((dt, what, s))
            n += 1
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        c.thaw("s2")
    worst = max(slow)
    print("frozen s2: %d calls on s0/s1, slowest %.2f s (%s on s%d); %d on s2, slowest %.2f s"
          % (len(slow), worst[0], worst[1], worst[2], len(sick), max(x[1] for x in sick)))
    assert worst[0] <= FAST, "%s on s%d took %.1f s while s2 was frozen" % (
        worst[1], worst[2], worst[0])
    for what, dt, r in sick:
        assert dt <= BOUND, "%s on s2 took %.1f s" % (what, dt)
        assert isinstance(r, OSError) and r.errno in (errno.EIO, errno.ETIMEDOUT), (what, r)


def test_lossy_link_checksummed_workload(netc, mnt, tmp_path):
    """2 ms round trip and 1% loss (5% in soak) each way (seeded): files written through
    one mount read back the same through another (no page cache), and the
    servers are all seen up."""
    c, m = netc, mnt
    dirs = dirs_by_server(c, m)
    c.net.shape("client", delay_ms=1, loss=LOSS, seed=7)
    rnd = random.Random(17)
    sums = {}
    t0 = time.monotonic()
    for i in range(24):
        data = rnd.randbytes(rnd.choice((1, 4096, 65536, 300000, 1 << 20)))
        p = m.path(dirs[i % 3], "w%d" % i)
        with open(p, "wb") as f:
            f.write(data)
        sums[p] = hashlib.sha256(data).hexdigest()
    m2 = Mount(c, tmp_path / "mnt2", opts={"op_timeout_ms": T_MS}).start()
    try:
        for p, h in sums.items():
            p2 = os.path.join(m2.mnt, os.path.relpath(p, m.mnt))
            assert hashlib.sha256(cat(p2)).hexdigest() == h, p
    finally:
        m2.stop()
    st = c.net.stats("client")
    print("lossy link: %.1f s, client link %s" % (time.monotonic() - t0, st))
    assert st["out_lost"] + st["in_lost"] > 0, st
    out = c.cli("ping").stdout
    assert all(re.search(r"^s%d\s+\S+\s+up\b" % i, out, re.M) for i in range(3)), out


def test_ping_calls_no_live_server_down_on_a_lossy_link(netc):
    """5% loss each way: a SYN lost cost the connect 1 s, and TCP's 3 s
    timeout after it made `orchard ping` (2 s) call a live server down in
    about one run of ten; the client now races fresh SYNs."""
    c = netc
    c.net.shape("client", delay_ms=1, loss=0.05, seed=11)
    downs = []
    for i in range(20):
        r = c.cli("ping", check=False)
        if r.returncode != 0:
            downs.append(r.stdout + r.stderr)
    assert not downs, "%d of 20 pings called a live server down:\n%s" % (len(downs), downs[0])


def test_lease_cache_answers_on_a_lossy_link(tmp_path):
    """5% loss each way, the cluster's default lease term (30 s), a writer
    busy on the same server: the walk of 2,000 names the mount holds leases
    on is answered from its lease cache, with no server request per name,
    within one term.  (Reported: 43 s instead of 0.1 s.  That was the end of
    a term, when the whole working set ran out at once and each name cost a
    lossy round trip: test_hot_names_renewed_ahead_on_a_lossy_link covers
    it.)"""
    skip_unless_usable()
    with NetCluster(tmp_path / "c", nservers=3) as c:
        m = Mount(c, tmp_path / "mnt", opts={"op_timeout_ms": T_MS, "coherent": "off"}).start()
        stop = threading.Event()
        writer = None
        try:
            d0 = dirs_by_server(c, m)[0]
            names = [m.path(d0, "many", "f%d" % i) for i in range(2000)]
            os.mkdir(m.path(d0, "many"))
            os.mkdir(m.path(d0, "busy"))
            for p in names:
                open(p, "wb").close()

            def write_on():
                k = 0
                while not stop.is_set():
                    with open(m.path(d0, "busy", "g%d" % (k % 50)), "wb") as f:
                        f.write(b"w" * 65536)
                    k += 1

            writer = threading.Thread(target=write_on)
            writer.start()
            c.net.shape("client", delay_ms=1, loss=0.05, seed=23)
            for walk in range(3):
                # Past the kernel's own 50 ms: each name is a LOOKUP to the mount.
                time.sleep(0.1)
                before = m.stats()["lease_cache"]
                dt, r = timed(lambda: [os.stat(p) for p in names])
                after = m.stats()["lease_cache"]
                hits = after["hits"] - before["hits"]
                misses = after["misses"] - before["misses"]
                print("lossy link, walk %d: 2000 stats in %.2f s, %d lease hits, %d misses"
                      % (walk, dt, hits, misses))
                assert not isinstance(r, OSError), r
                assert hits >= 2000 and misses <= 100, (hits, misses)
                assert dt < FAST, "2000 stats took %.1f s" % dt
            assert c.net.stats("client")["out_lost"] + c.net.stats("client")["in_lost"] > 0
        finally:
            stop.set()
            if writer:
                writer.join()
            m.stop()


RENEW_LEASE_MS = 2000


def test_hot_names_renewed_ahead_on_a_lossy_link(tmp_path):
    """5% loss each way, a lease term of 2 s, 500 names walked over and over
    for about four terms: every walk after the first (on the clean link) is
    answered from the lease cache.  A hit in the last part of a key's term
    renews it in the background (docs/DESIGN.md, "Leases and
    invalidations", Renew), so the names in use never run out together.
    Without that, each term's end was a miss storm: a LOOKUP per name, about
    25 ms each at this loss, so a walk of 500 took 10 s or more and the
    names it refilled first had run out again before the next."""
    skip_unless_usable()
    n = 500
    with NetCluster(tmp_path / "c", nservers=3, start=False) as c:
        c.set_cluster_option("lease_ms", RENEW_LEASE_MS)
        c.start_all()
        m = Mount(c, tmp_path / "mnt", opts={"op_timeout_ms": T_MS, "coherent": "off"}).start()
        try:
            os.mkdir(m.path("hot"))
            names = [m.path("hot", "f%d" % i) for i in range(n)]
            for p in names:
                open(p, "wb").close()
            walks = []
            t_end = None
            while t_end is None or time.monotonic() < t_end:
                # Past the kernel's own 50 ms: each name is a LOOKUP to the mount.
                time.sleep(0.1)
                before = m.stats()["lease_cache"]
                dt, r = timed(lambda: [os.stat(p) for p in names])
                after = m.stats()["lease_cache"]
                assert not isinstance(r, OSError), r
                walks.append((dt, after["hits"] - before["hits"],
                              after["misses"] - before["misses"]))
                print("walk %d: %d stats in %.2f s, %d lease hits, %d misses, "
                      "%d renewals (%d dropped) so far"
                      % (len(walks) - 1, n, dt, walks[-1][1], walks[-1][2],
                         after.get("renewals", 0), after.get("renewals_dropped", 0)))
                if t_end is None:
                    c.net.shape("client", delay_ms=1, loss=0.05, seed=29)
                    t_end = time.monotonic() + 4 * RENEW_LEASE_MS / 1000.0
            net = c.net.stats("client")
            assert net["out_lost"] + net["in_lost"] > 0
            lossy = walks[1:]
            assert len(lossy) >= 8, walks
            for i, (dt, hits, misses) in enumerate(lossy, 1):
                # A storm is every name at once; a few renewals that lost
                # their packets twice, or ran late on a sanitizer build (6%
                # seen under ASan), are not.
                assert misses <= 0.10 * n, (i, walks)
                assert dt < FAST, "walk %d of %d names took %.1f s" % (i, n, dt)
            assert m.stats()["lease_cache"]["renewals"] >= n
        finally:
            m.stop()
