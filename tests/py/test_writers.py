"""Bytes past a file's size: a crashed writer's bytes must never become
readable after a size change.  Writers put strips on the data servers and
publish the size later (EXTEND); a writer that dies first leaves bytes past
the size.  The inode's server tracks live writers (CL2SV_WRITERS) and cuts
past the size when no other writer is registered, or when the last one goes
without publishing (docs/DESIGN.md, "Writers and bytes past the size").
"""
import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

from cluster import Cluster, stat_layout, wait_until
from mount import Mount
from op import Op

MIB = 1 << 20
DEAD = 16 * MIB          # what the dead writer leaves behind
FAR = 100 * MIB          # where the next writer writes its 3 bytes

WRITER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
chunk = bytes(range(1, 256)) * 4113     # no zero byte: any byte read back is ours
chunk = chunk[:1 << 20]
for i in range(int(sys.argv[2])):
    os.pwrite(fd, chunk, i << 20)
print("written", flush=True)
sys.stdin.read()                        # until killed: never closes the file
"""


def used_kb(c):
    """Used space of the cluster in KiB (orchard df)."""
    line = c.cli("df").stdout.splitlines()[1].split()
    return int(line[2])


def bytes_written(c):
    return sum(s.get("data_bytes_written", 0) for s in c.server_stats().values())


def writer_registrations(c):
    return sum(s.get("writer_registrations", 0) for s in c.server_stats().values())


def crash_writer(c, tmp_path, name, before_kill=None):
    """A mount whose child writes DEAD bytes to /NAME without fsync or close;
    once the servers hold them, the mount is killed (SIGKILL by PID) and
    lazily unmounted.  @before_kill runs just before the kill."""
    m = Mount(c, tmp_path / ("mnt-" + name)).start()
    child = None
    try:
        before = bytes_written(c)
        child = subprocess.Popen([sys.executable, "-c", WRITER, m.path(name),
                                  str(DEAD // MIB)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "written"
        wait_until(lambda: bytes_written(c) - before >= DEAD, timeout=30,
                   what="the dead writer's bytes on the servers")
        if before_kill:
            before_kill()
    finally:
        if m.proc is not None:
            os.kill(m.proc.pid, signal.SIGKILL)
            m.proc.wait()
            m.proc = None
        if child is not None:
            child.kill()
            child.wait()
        subprocess.run(["fusermount3", "-u", "-z", m.mnt], capture_output=True)


def assert_zeros(data, what):
    nz = len(data) - data.count(0)
    assert nz == 0, "%s: %d bytes of a dead writer came back (first at %d)" % (
        what, nz, next(i for i, b in enumerate(data) if b))


def test_crashed_mount_bytes_never_come_back(cluster2, tmp_path):
    """The failure this guards against, scaled down: a mount killed in an unsynced
    write leaves a 0-byte file; 3 bytes written far past it through another
    mount must leave zeros in the gap, and the dead bytes' space is freed."""
    c = cluster2
    base = used_kb(c)
    crash_writer(c, tmp_path, "f")
    assert int(re.search(r"Size:\s+(\d+)", c.cli("stat", "/f").stdout).group(1)) == 0
    m = Mount(c, tmp_path / "mnt2").start()
    try:
        fd = os.open(m.path("f"), os.O_WRONLY)
        try:
            assert os.pwrite(fd, b"abc", FAR) == 3
        finally:
            os.close(fd)
        assert os.stat(m.path("f")).st_size == FAR + 3
        with open(m.path("f"), "rb") as f:
            assert_zeros(f.read(DEAD + MIB), "read through the mount")
            f.seek(FAR)
            assert f.read() == b"abc"
    finally:
        m.stop()
    # Nothing allocated past the size, nobody registered any more.
    wait_until(lambda: used_kb(c) - base < 1024, timeout=15,
               what=lambda: "the dead writer's space freed (used %d KiB, was %d)" % (
                   used_kb(c), base))
    assert writer_registrations(c) == 0


def test_dead_bytes_cut_for_a_new_writer_after_an_inode_server_restart(cluster2, tmp_path):
    """The inode's server restarted before the writer died: it knows no
    writers and cut nothing.  The next writer (here the CLI's) registers,
    which cuts before it writes: the gap reads as zeros."""
    c = cluster2
    c.cli("touch", "/g")
    inode_srv = c.names[stat_layout(c, "/g")["handle"] >> 48]

    def restart():
        c.kill(inode_srv)
        c.start(inode_srv)

    crash_writer(c, tmp_path, "g", before_kill=restart)
    with Op(c) as op:
        assert op.stat("/g")["size"] == 0
        op.write("/g", FAR, b"xyz")
        assert op.stat("/g")["size"] == FAR + 3
        assert_zeros_op(op, "/g", DEAD)
        assert op.read("/g", FAR, 3)["data"] == b"xyz"


def assert_zeros_op(op, path, n):
    """Bytes [0, n) of @path read as zeros through orch-op (its sha256)."""
    r = op.read(path, 0, n)
    assert r["got"] == n, r
    assert r["sha256"] == hashlib.sha256(bytes(n)).hexdigest(), \
        "read through the CLI: a dead writer's bytes came back"


def test_concurrent_writers_keep_each_others_bytes(cluster2, tmp_path):
    """MPI-IO style: two mounts write disjoint ranges of one file without
    fsync; the second, writing below the first, publishes its smaller size
    first, and a third writer comes and goes meanwhile: the first's bytes
    are past the size then, and a registration must not cut them.  Then
    the first closes: the file holds every writer's data."""
    c = cluster2
    ma = Mount(c, tmp_path / "ma").start()
    mb = Mount(c, tmp_path / "mb").start()
    try:
        with open(ma.path("shared"), "wb"):
            pass
        a_data = bytes([0xA5]) * (8 * MIB)
        b_data = bytes([0x5B]) * (8 * MIB)
        # Started before the files open: a process started later would close
        # (so flush, so publish) them in its child (close-on-exec).
        with Op(c) as op:
            fa = os.open(ma.path("shared"), os.O_WRONLY)
            fb = os.open(mb.path("shared"), os.O_WRONLY)
            try:
                assert os.pwrite(fa, a_data, 16 * MIB) == len(a_data)
                assert os.pwrite(fb, b_data, 0) == len(b_data)
                os.close(fb)
                fb = None
                assert op.stat("/shared")["size"] == len(b_data)
                # Another writer registers and leaves while A's bytes are unpublished.
                op.write("/shared", 30 * MIB, b"third")
                assert op.stat("/shared")["size"] == 30 * MIB + 5
            finally:
                if fb is not None:
                    os.close(fb)
                os.close(fa)
        with open(mb.path("shared"), "rb") as f:
            data = f.read()
        assert len(data) == 30 * MIB + 5
        assert data[:8 * MIB] == b_data
        assert data[16 * MIB:24 * MIB] == a_data, "A's unpublished bytes were cut"
        assert_zeros(data[8 * MIB:16 * MIB], "between the writers")
        assert data[30 * MIB:] == b"third"
    finally:
        mb.stop()
        ma.stop()
    wait_until(lambda: writer_registrations(c) == 0, what="every registration released")


# Writes what each line of stdin says ("OFFSET LENGTH BYTE") through one
# descriptor, answering "ok"; closes it at the end of stdin.  A process of
# its own: a fork of the test (every command it runs) would close the
# descriptor in the child, and so flush it, and so publish the size.
PWRITER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
for line in sys.stdin:
    off, n, byte = map(int, line.split())
    assert os.pwrite(fd, bytes([byte]) * n, off) == n
    print("ok", flush=True)
os.close(fd)
"""


def test_writer_that_lost_its_connection_keeps_its_bytes(cluster2, tmp_path):
    """The inode's server restarts while a mount holds unpublished bytes: it
    knows no writers, and another writer registers at once.  Its cut is
    held, so the mount, whose next write registers again with what it
    wrote, keeps its bytes.  (Without the hold the other writer's
    registration cut them, and the mount then published zeros.)"""
    c = cluster2
    n = 4 * MIB
    m = Mount(c, tmp_path / "m").start()
    try:
        with open(m.path("k"), "wb"):
            pass
        inode_srv = c.names[stat_layout(c, "/k")["handle"] >> 48]
        with Op(c) as op:
            before = bytes_written(c)
            w = subprocess.Popen([sys.executable, "-c", PWRITER, m.path("k")],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            try:
                w.stdin.write("0 %d 60\n" % n)
                w.stdin.flush()
                assert w.stdout.readline().strip() == "ok"
                wait_until(lambda: bytes_written(c) - before >= n,
                           what="the unpublished bytes on the servers")
                assert op.stat("/k")["size"] == 0
                c.stop(inode_srv)          # a clean stop: nothing written is lost
                c.start(inode_srv)
                other = threading.Thread(target=op.write, args=("/k", FAR, b"new"))
                other.start()
                try:
                    # Registered and held (a server that cuts at once is done already).
                    wait_until(lambda: writer_registrations(c) >= 1 or not other.is_alive(),
                               what="the other writer registered")
                    w.stdin.write("%d 4 116\n" % n)
                    w.stdin.flush()
                    assert w.stdout.readline().strip() == "ok"
                finally:
                    other.join()
                w.stdin.close()
                assert w.wait(30) == 0
            finally:
                if w.poll() is None:
                    w.kill()
                    w.wait()
        with open(m.path("k"), "rb") as f:
            got = f.read()
        assert len(got) == FAR + 3
        assert got[:n] == bytes([60]) * n, "the live writer's bytes were cut"
        assert got[n:n + 4] == b"tttt"
        assert got[FAR:] == b"new"
    finally:
        m.stop()
    wait_until(lambda: writer_registrations(c) == 0, what="every registration released")


def test_registration_after_a_restart_is_not_held_without_bytes_past_the_size(cluster2):
    """Within the hold after the inode's server started, a new writer of a
    file with nothing past its size is answered at once (every server of
    the layout says so: SV2SV_DATA_CUT PROBE), not at the hold's end (a
    quarter of op_timeout_ms, 2.5 s here), and nothing is cut."""
    c = cluster2
    c.cli("touch", "/q")
    with Op(c) as op:
        op.write("/q", 0, b"abc" * 100000)
    lay = stat_layout(c, "/q")
    assert lay["stripe_count"] == 2
    inode_srv = c.names[lay["handle"] >> 48]
    c.stop(inode_srv)
    c.start(inode_srv)
    t_up = time.monotonic()
    with Op(c) as op:
        t0 = time.monotonic()
        op.write("/q", 300000, b"def")
        took = time.monotonic() - t0
        assert time.monotonic() - t_up < 2.5, "too slow to tell: the hold ended meanwhile"
        assert took < 1.5, "the registration waited %.1f s for the hold" % took
        assert op.read("/q", 299997, 6)["data"] == b"abcdef"
    assert sum(s.get("writer_cuts", 0) for s in c.server_stats().values()) == 0


def test_cut_that_cannot_reach_a_peer_fails_in_bounded_time(cluster2):
    """A new writer is answered only once every server of the layout cut:
    with one of them down it gets EIO, well within the client's timeout,
    and once the server is back the write goes through."""
    c = cluster2
    c.cli("touch", "/p")
    lay = stat_layout(c, "/p")
    assert lay["stripe_count"] == 2
    peer = c.names[1 - (lay["handle"] >> 48)]
    with Op(c) as op:
        c.stop(peer)
        try:
            t0 = time.monotonic()
            op.err("EIO", "write", "/p", 0, "hex:616263")
            assert time.monotonic() - t0 < 8
        finally:
            c.start(peer)
        op.write("/p", 0, b"abc")
        assert op.read("/p", 0, 3)["data"] == b"abc"


def scrub(c, *args):
    return c.cli("scrub", "--all", *args, check=False)


def dead_bytes_after_a_restart(c, tmp_path, name):
    """/NAME with DEAD bytes past its size 0 that no writer can publish:
    the inode's server restarts, then the writer dies.  Its layout."""
    c.cli("touch", "/" + name)
    lay = stat_layout(c, "/" + name)
    inode_srv = c.names[lay["handle"] >> 48]

    def restart():
        c.kill(inode_srv)
        c.start(inode_srv)

    crash_writer(c, tmp_path, name, before_kill=restart)
    return lay


def test_sweep_cuts_dead_bytes_after_an_inode_server_restart(cluster2, tmp_path):
    """Nobody writes the file again: the restarted server's sweeps (every
    server looks at its objects of the restarted server's files) have the
    inode's server cut the dead bytes once its start hold is over, so
    scrub is clean and the space is back without an operator."""
    c = cluster2
    base = used_kb(c)
    assert scrub(c).returncode == 0, scrub(c).stdout
    dead_bytes_after_a_restart(c, tmp_path, "s")
    wait_until(lambda: used_kb(c) - base < 1024, timeout=30,
               what=lambda: "the dead bytes cut (used %d KiB, was %d)" % (used_kb(c), base))
    assert sum(s["data_objects_cut"] for s in c.server_stats().values()) >= 1
    r = scrub(c)
    assert r.returncode == 0, r.stdout + r.stderr
    with Op(c) as op:
        assert op.stat("/s")["size"] == 0
        op.truncate("/s", DEAD)
        assert_zeros_op(op, "/s", DEAD)


def test_scrub_reports_and_reclaims_dead_bytes(tmp_path):
    """Bytes past the size that no live writer can publish, with the
    sweeps off (reclaim_orphans = 0), are N7 on every server that holds
    some; --reclaim cuts them; then scrub is clean and the space is back."""
    c = Cluster(tmp_path / "c", nservers=2, extra="\n[cluster]\nreclaim_orphans = 0\n")
    c.start_all()
    try:
        scrub_reclaims_dead_bytes(c, tmp_path)
    finally:
        c.stop_all()


def scrub_reclaims_dead_bytes(c, tmp_path):
    base = used_kb(c)
    assert scrub(c).returncode == 0, scrub(c).stdout
    lay = dead_bytes_after_a_restart(c, tmp_path, "h")
    assert used_kb(c) - base >= DEAD // 1024
    # Within the hold after its start the inode's server answers BUSY (a
    # writer of before may come back), and scrub says nothing of the file.
    wait_until(lambda: scrub(c).returncode == 1, what="scrub to find the dead bytes")
    r = scrub(c)
    assert r.returncode == 1, r.stdout + r.stderr
    found = re.findall(r"^(\S+): N7 obj handle %#x: data object .* holds (\d+) bytes past "
                       r"the file's size and no writer can publish them$" % lay["handle"],
                       r.stdout, re.M)
    assert sorted(n for n, _ in found) == sorted(c.names), r.stdout
    assert sum(int(b) for _, b in found) == DEAD
    # The inode's server cuts every server's object: the scrubs run in
    # parallel, so one server may find its object cut by the other's reclaim,
    # or its RECLAIM may join the cut the other's started.
    r = scrub(c, "--reclaim")
    assert r.returncode == 1 and "(reclaimed)" in r.stdout, r.stdout
    assert "not reclaimed" not in r.stdout, r.stdout
    r = scrub(c)
    assert r.returncode == 0, r.stdout + r.stderr
    assert used_kb(c) - base < 1024
    with Op(c) as op:
        op.truncate("/h", DEAD)
        assert_zeros_op(op, "/h", DEAD)


def test_live_writer_is_not_a_scrub_finding(cluster2, tmp_path):
    """A mount writing (registered, not yet published): scrub says nothing."""
    c = cluster2
    m = Mount(c, tmp_path / "m").start()
    try:
        fd = os.open(m.path("w"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, b"q" * (4 * MIB), 0)
            os.fsync(fd)                       # the data on disk, the size published
            os.pwrite(fd, b"r" * (4 * MIB), 4 * MIB)
            wait_until(lambda: bytes_written(c) >= 8 * MIB, what="the writes committed")
            r = scrub(c)
            assert r.returncode == 0, r.stdout + r.stderr
        finally:
            os.close(fd)
        assert os.stat(m.path("w")).st_size == 8 * MIB
    finally:
        m.stop()


def test_scrub_finds_no_dead_bytes_in_files_being_rewritten(tmp_path):
    """Files rewritten in a loop (put: truncate, register, write, release)
    while scrub runs again and again: never an N7.  Each object's size is
    read between two PROBEs with the same epoch; with one PROBE, a scrub
    reported about 8 in 100 runs here (a truncate whose size was committed
    before its cut reached the object, or a writer that registered just
    after the PROBE)."""
    c = Cluster(tmp_path / "c", nservers=3, strip_size=4096)
    c.start_all()
    stop = threading.Event()
    ts = []
    try:
        c.cli("mkdir", "/w")
        errors = []

        def writer(k):
            rnd = random.Random(k)
            src = tmp_path / ("src%d" % k)
            i = 0
            while not stop.is_set():
                src.write_bytes(rnd.randbytes(rnd.randint(1, 60000)))
                r = c.cli("put", str(src), "/w/f%d_%d" % (k, i % 3), check=False)
                if r.returncode:
                    errors.append(r.stderr)
                i += 1

        ts = [threading.Thread(target=writer, args=(k,)) for k in range(2)]
        for t in ts:
            t.start()
        wait_until(lambda: len(c.cli("ls", "/w").stdout.split()) >= 6, what="files")
        reports = []
        for _ in range(150):
            r = scrub(c)
            if r.returncode:
                reports.append(r.stdout + r.stderr)
        assert not reports, "%d of 150 scrubs failed: %s" % (len(reports), reports[0])
        stop.set()
        for t in ts:
            t.join()
        assert not errors, errors[:3]
    finally:
        stop.set()
        for t in ts:
            t.join()
        c.stop_all()
