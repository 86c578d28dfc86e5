"""Leases: the mount answers lookups and stats from what the servers leased
to it, and the servers push invalidations when any client changes it
(docs/DESIGN.md, "Leases and invalidations").

The kernel's own timeouts are set to 1 ms here, so nearly every stat
reaches the mount: whatever is not a server request was served by the
lease cache, and a change made through another mount must show at once,
not after lease_ms (30 s by default).
"""
import errno
import os
import shutil
import stat
import threading
import time

import pytest

from cluster import wait_until
from mount import ORCHARD_MOUNT, requests_by_type, requests_delta, run_threads, stat_errno, write_file

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or not os.path.exists(ORCHARD_MOUNT)
    or shutil.which("fusermount3") is None,
    reason="needs /dev/fuse, fusermount3 and orchard-mount")

SHORT = {"dcache_timeout_ms": 1, "getattr_timeout_ms": 1, "coherent": "off"}
# A change must show well before a lease could have run out (lease_ms 30 s).
PROMPT_S = 2.0


def shows_within(cond, what):
    """Polls @cond; returns the seconds it took, failing past PROMPT_S."""
    t0 = time.monotonic()
    wait_until(cond, PROMPT_S, interval=0.002, what=what)
    return time.monotonic() - t0


def stat_for(path, seconds):
    """stat()s @path for @seconds: the kernel's 1 ms entries run out many
    times meanwhile.  Returns the number of calls."""
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        os.stat(path)
        n += 1
    return n


def fuse_asks(m):
    f = m.stats()["fuse"]
    return f["LOOKUP"] + f["GETATTR"]


def test_stats_served_under_leases(mounts):
    m = mounts(SHORT)
    os.mkdir(m.path("d"))
    p = m.path("d", "f")
    write_file(p, b"data")
    os.stat(p)
    before, asked0, lc0 = m.server_requests(), fuse_asks(m), m.stats()["lease_cache"]
    # stat()s until the kernel's 1 ms entries have run out and been asked
    # again 50 times (half a second when idle; longer on a loaded machine,
    # well inside the 30 s lease either way).
    calls, t0 = 0, time.monotonic()
    while fuse_asks(m) - asked0 < 50 and time.monotonic() - t0 < 10:
        calls += stat_for(p, 0.05)
    n = requests_delta(before, m.server_requests())
    asked = fuse_asks(m) - asked0
    lc1 = m.stats()["lease_cache"]
    print("%d stats with 1 ms kernel timeouts: the kernel asked %d times, "
          "%d server requests, %d lease-cache hits"
          % (calls, asked, n, lc1["hits"] - lc0["hits"]))
    assert lc1["lease_ms"] == 30000
    assert asked >= 50
    assert n <= 5
    assert lc1["hits"] - lc0["hits"] >= asked - 5


def test_timeouts_zero_bypass_the_lease_cache(mounts):
    m = mounts({"dcache_timeout_ms": 0, "getattr_timeout_ms": 0, "coherent": "off"})
    p = m.path("f")
    write_file(p, b"data")
    before = m.server_requests()
    for _ in range(200):
        os.stat(p)
    assert requests_delta(before, m.server_requests()) >= 200
    assert m.stats()["lease_cache"]["hits"] == 0


def test_changes_pushed_to_the_other_mount(cluster3, mounts):
    a = mounts(SHORT)
    b = mounts(SHORT)
    write_file(a.path("f"), b"one")
    os.mkdir(a.path("d"))
    # b holds f's name and attributes, and knows "new" is absent.
    assert stat.S_IMODE(os.stat(b.path("f")).st_mode) == 0o644
    assert stat_errno(b.path("new")) == errno.ENOENT
    assert stat_errno(b.path("new")) == errno.ENOENT
    # a's last changes may still reach b as pushes (a close's release is
    # asynchronous), and each one dropped is asked again: b must serve 50
    # rounds from its leases in a round where it heard no push.
    for _ in range(5):
        pushes, before = b.stats()["lease_cache"]["pushes"], b.server_requests()
        for _ in range(50):
            os.stat(b.path("f"))
            assert stat_errno(b.path("new")) == errno.ENOENT
        after = b.server_requests()
        if b.stats()["lease_cache"]["pushes"] == pushes:
            break
    assert requests_delta(before, after) <= 2, \
        "b did not serve from its leases: %s" % requests_by_type(before, after)
    pushes0 = b.stats()["lease_cache"]["pushes"]

    took = []
    os.chmod(a.path("f"), 0o600)
    took.append(shows_within(lambda: stat.S_IMODE(os.stat(b.path("f")).st_mode) == 0o600,
                             "b to see the chmod"))
    write_file(a.path("new"), b"")
    took.append(shows_within(lambda: stat_errno(b.path("new")) == 0, "b to see the create"))
    write_file(a.path("f"), b"longer data", os.O_WRONLY)
    took.append(shows_within(lambda: os.stat(b.path("f")).st_size == 11,
                             "b to see the size after a's close"))
    os.rename(a.path("f"), a.path("d", "g"))
    took.append(shows_within(lambda: stat_errno(b.path("f")) == errno.ENOENT,
                             "b to see the rename's source go"))
    took.append(shows_within(lambda: stat_errno(b.path("d", "g")) == 0,
                             "b to see the rename's target"))
    os.unlink(a.path("new"))
    took.append(shows_within(lambda: stat_errno(b.path("new")) == errno.ENOENT,
                             "b to see the unlink"))
    print("seconds until b saw each change: %s" % ", ".join("%.3f" % t for t in took))
    assert b.stats()["lease_cache"]["pushes"] > pushes0
    assert sum(s["lease_pushes"] for s in cluster3.server_stats().values()) > 0


def test_a_close_leases_the_attributes_it_published(mounts):
    # The close of a file written here publishes its size by the WRITERS that
    # releases the writer registration, and that reply leases the attributes
    # (ORCH_FEAT_WRITERS_ATTR): the next stat of the file asks no server.
    # Leased means pushed: another mount's changes still show here at once.
    a = mounts(SHORT)
    b = mounts(SHORT)
    os.mkdir(a.path("d"))
    n = 20
    for i in range(n):
        write_file(a.path("d", "f%d" % i), b"x" * (i + 1))
    os.stat(a.path("d"))
    before = a.server_requests()
    for i in range(n):
        assert os.stat(a.path("d", "f%d" % i)).st_size == i + 1
    asked = requests_by_type(before, a.server_requests())
    print("stats of %d files just written and closed: %s" % (n, asked))
    # st_blocks is counted where the data lies (ALLOCATED); nothing else is asked.
    assert not set(asked) - {"CL2SV_ALLOCATED"}, asked
    os.chmod(b.path("d", "f0"), 0o600)
    shows_within(lambda: stat.S_IMODE(os.stat(a.path("d", "f0")).st_mode) == 0o600,
                 "a to see b's chmod")
    write_file(b.path("d", "f1"), b"longer data", os.O_WRONLY)
    shows_within(lambda: os.stat(a.path("d", "f1")).st_size == 11,
                 "a to see the size b published at its close")


def test_leases_dropped_with_the_connection(cluster3, mounts):
    """A restarted server has forgotten b's leases and cannot push to it:
    b drops what it held from that server when the connection goes."""
    a = mounts(SHORT)
    b = mounts(dict(SHORT, op_timeout_ms=2000))
    write_file(a.path("f"), b"x")
    assert stat.S_IMODE(os.stat(b.path("f")).st_mode) == 0o644
    # A's create reached b's kernel cache as an invalidation too, perhaps
    # after that first stat: the next one may ask again.  Then b holds it.
    wait_until(lambda: b.stats()["kernel_invalidations"]["queued"] == 0, 10,
               what="b's kernel invalidations to be sent")
    os.stat(b.path("f"))
    before = b.server_requests()
    os.stat(b.path("f"))
    assert requests_delta(before, b.server_requests()) == 0
    cluster3.stop("s0")
    cluster3.start("s0")
    wait_until(lambda: stat_errno(a.path("f")) == 0, 30, what="a to work again")
    os.chmod(a.path("f"), 0o600)
    shows_within(lambda: stat.S_IMODE(os.stat(b.path("f")).st_mode) == 0o600,
                 "b to see the chmod made after the restart")


def test_no_leases_when_lease_ms_is_zero(cluster3, mounts):
    cluster3.stop_all()
    cluster3.set_cluster_option("lease_ms", 0)
    cluster3.start_all()
    m = mounts(SHORT)
    p = m.path("f")
    write_file(p, b"data")
    before, asked0 = m.server_requests(), fuse_asks(m)
    # 30 asks at least, however slow each is (under TSan on a busy machine
    # 0.3 s once gave 27).
    deadline = time.monotonic() + 20
    while fuse_asks(m) - asked0 < 30 and time.monotonic() < deadline:
        stat_for(p, 0.3)
    asked = fuse_asks(m) - asked0
    assert asked >= 30
    assert requests_delta(before, m.server_requests()) >= asked
    lc = m.stats()["lease_cache"]
    assert lc["lease_ms"] == 0 and lc["hits"] == 0
    assert all(s["leases"] == 0 for s in cluster3.server_stats().values())


def test_renewed_leases_still_invalidated(cluster3, mounts):
    """Refresh ahead under a 2 s term: b stats a few files all the time, so
    it renews their names and attributes in the background near the end of
    each term (LOOKUP and GETATTR replies that fill its cache like a
    miss's) while a truncates them, one after the other.  Every change
    shows in b at once and never goes back: a renewal's reply read before
    the change's push cannot fill (the push wins), one read after it
    carries the change."""
    cluster3.stop_all()
    cluster3.set_cluster_option("lease_ms", 2000)
    cluster3.start_all()
    a = mounts(SHORT)
    b = mounts(SHORT)
    n = 8
    paths = ["f%d" % i for i in range(n)]
    for p in paths:
        write_file(a.path(p), b"")
    last = [0] * n
    wrong = []
    stop = threading.Event()

    def look():
        while not stop.is_set():
            for i, p in enumerate(paths):
                size = os.stat(b.path(p)).st_size
                if size < last[i]:
                    wrong.append("%s: size %d after %d" % (p, size, last[i]))
                last[i] = max(last[i], size)

    looker = threading.Thread(target=look)
    looker.start()
    renewals0 = b.stats()["lease_cache"]["renewals"]
    try:
        # Three terms; each file changes every n * ~0.15 s, past the 1 s
        # at which its keys enter the last part of their term.
        v, t_end = 0, time.monotonic() + 6.0
        while time.monotonic() < t_end:
            v += 1
            p = paths[v % n]
            os.truncate(a.path(p), v)
            shows_within(lambda: os.stat(b.path(p)).st_size == v, "b to see %s at %d" % (p, v))
            time.sleep(0.15)
    finally:
        stop.set()
        looker.join()
    lc = b.stats()["lease_cache"]
    print("%d changes; b: %d renewals, %d dropped, %d pushes"
          % (v, lc["renewals"] - renewals0, lc["renewals_dropped"], lc["pushes"]))
    assert not wrong, wrong[:5]
    assert lc["renewals"] - renewals0 >= n


def view(path):
    """What a mount shows of @path: None if absent, else (type, mode, size, nlink)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size, st.st_nlink)


def test_random_changes_seen_by_other_mount(mounts):
    """A seeded random sequence of changes through mount a; after each, mount
    b, which holds leases on everything it looked at, must show the same
    within a short bound (its kernel entries last 1 ms).  A change whose
    push is missing would stay stale in b for lease_ms (30 s)."""
    import random
    seed = int(os.environ.get("ORCH_TEST_SEED", random.randrange(1 << 30)))
    print("seed", seed)
    rng = random.Random(seed)
    a = mounts(SHORT)
    b = mounts(SHORT)
    dirs = ["", "d0", "d1", "d0/e"]
    for d in dirs[1:]:
        os.mkdir(a.path(d))
    names = [os.path.join(d, "n%d" % i) for d in dirs for i in range(4)]
    slow = []
    for step in range(300):
        p = rng.choice(names)
        q = rng.choice(names)
        op = rng.choice(["create", "write", "chmod", "unlink", "rename", "link",
                         "mkdir", "rmdir", "truncate"])
        try:
            if op == "create":
                write_file(a.path(p), b"")
            elif op == "write":
                write_file(a.path(p), b"w" * rng.randrange(1, 9000), os.O_WRONLY | os.O_APPEND)
            elif op == "chmod":
                os.chmod(a.path(p), rng.choice([0o600, 0o644, 0o755]))
            elif op == "unlink":
                os.unlink(a.path(p))
            elif op == "rename":
                os.rename(a.path(p), a.path(q))
            elif op == "link":
                os.link(a.path(p), a.path(q))
            elif op == "mkdir":
                os.mkdir(a.path(p))
            elif op == "rmdir":
                os.rmdir(a.path(p))
            elif op == "truncate":
                os.truncate(a.path(p), rng.randrange(0, 5000))
        except OSError:
            pass
        for n in (p, q):
            want = view(a.path(n))
            t0 = time.monotonic()
            while view(b.path(n)) != want:
                assert time.monotonic() - t0 < PROMPT_S, (
                    "seed %d step %d: %s %s %s: b shows %s for %s, a %s"
                    % (seed, step, op, p, q, view(b.path(n)), n, want))
            slow.append(time.monotonic() - t0)
    slow.sort()
    print("b caught up: median %.4f s, max %.4f s" % (slow[len(slow) // 2], slow[-1]))
    assert b.stats()["lease_cache"]["hits"] > 0


def test_parallel_changes_pushed_while_the_other_mount_looks(mounts):
    """Changers on both mounts and lookers on b, all at once: b's FUSE
    workers answer from its lease cache while its connections' readers
    apply the pushes the changes cause (the race check of make check-tsan).
    When the changers are done, b shows what a shows."""
    a = mounts(SHORT)
    b = mounts(SHORT)
    nchangers, nlookers, rounds = 3, 3, 20
    for k in range(nchangers):
        os.mkdir(a.path("c%d" % k))
    names = [os.path.join("c%d" % k, "n%d" % i) for k in range(nchangers) for i in range(3)]
    # b's lookers stay out of the directory b changes (the last): see
    # test_parallel_requests_one_mount.
    watched = [n for n in names if not n.startswith("c%d/" % (nchangers - 1))]
    done = threading.Event()
    finished = []

    def changer(k):
        mnt = b if k == nchangers - 1 else a
        for r in range(rounds):
            p = mnt.path("c%d" % k, "n%d" % (r % 3))
            q = mnt.path("c%d" % k, "n%d" % ((r + 1) % 3))
            write_file(p, b"x" * (r + 1))
            os.chmod(p, 0o600 if r % 2 else 0o644)
            os.rename(p, q)
            if r % 3 == 2:
                os.unlink(q)

    def looker(k):
        deadline = time.monotonic() + 120
        while not done.is_set() and time.monotonic() < deadline:
            for n in watched:
                view(b.path(n))
            os.listdir(b.path("c%d" % (k % (nchangers - 1))))

    def body(k):
        if k >= nchangers:
            looker(k)
            return
        try:
            changer(k)
        finally:
            finished.append(k)
            if len(finished) == nchangers:
                done.set()

    run_threads(nchangers + nlookers, body)
    for n in names:
        shows_within(lambda: view(b.path(n)) == view(a.path(n)), "b to show " + n)
    assert b.stats()["lease_cache"]["hits"] > 0


def test_access_answered_from_leases(mounts):
    """access(2) is checked on leased attributes with the servers' rule, and
    another mount's chmod changes the answer at once."""
    a = mounts(SHORT)
    b = mounts(SHORT)
    write_file(a.path("f"), b"#!/bin/sh\n")
    os.stat(b.path("f"))
    before = b.server_requests()
    fuse0 = b.stats()["fuse"]["ACCESS"]
    for _ in range(20):
        # Root may execute a file only if some x bit is set.
        assert not os.access(b.path("f"), os.X_OK)
        assert os.access(b.path("f"), os.R_OK | os.W_OK)
    assert b.stats()["fuse"]["ACCESS"] - fuse0 >= 40
    assert b.server_requests()["CL2SV_ACCESS"] == before["CL2SV_ACCESS"]
    os.chmod(a.path("f"), 0o744)
    shows_within(lambda: os.access(b.path("f"), os.X_OK), "b to see the chmod in access()")
