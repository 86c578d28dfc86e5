"""Write-behind in orchard-mount (src/mount/wb.c): a write is answered once
it is sent, before the servers commit it.  Reads through the same mount
still see every write, a write that fails after it was answered is reported
by close (flush) and fsync, and O_DIRECT writes wait for the servers."""
import errno
import mmap
import os
import random
import signal
import threading
import time

import pytest

from cluster import dirs_on_two_servers, server_of, stat_layout, wait_until
from mount import Mount

KiB = 1 << 10


def mount(cluster, tmp_path, **opts):
    return Mount(cluster, str(tmp_path / "mnt"), opts).start()


@pytest.mark.parametrize("wb_kb", [16384, 0])
def test_reads_see_writes_in_flight(cluster2, tmp_path, wb_kb):
    """Random writes, each followed at once by an O_DIRECT read of the same
    range through another descriptor: the read goes to the servers, which
    answer a READ at once, so it must wait for the write in flight."""
    m = mount(cluster2, tmp_path, writebehind_kb=wb_kb)
    try:
        rng = random.Random(7)
        path = m.path("f")
        size = 4 << 20
        model = bytearray(size)
        end = 0
        w = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        r = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            for _ in range(150):
                # Whole 4 KiB blocks: what O_DIRECT reads with an aligned buffer.
                off = rng.randrange(0, size // 4096 - 64) * 4096
                data = rng.randbytes(rng.randrange(1, 64) * 4096)
                assert os.pwrite(w, data, off) == len(data)
                model[off:off + len(data)] = data
                end = max(end, off + len(data))
                got = os.pread(r, len(data), off)
                assert got == data, "read at %d missed a write" % off
        finally:
            os.close(r)
            os.close(w)
        with open(path, "rb") as f:
            assert f.read() == bytes(model[:end])
        wb = m.stats()["write_behind"]
        assert wb["max_bytes"] == wb_kb * KiB
        assert (wb["writes"] > 0) == (wb_kb > 0)
        assert wb["bytes_in_flight"] == 0
    finally:
        m.stop()


def file_and_its_first_server(c, m, name):
    """Creates @name on mount @m with one block, fsynced, so that the mount
    is connected to every server of its layout; returns its path and the
    name of the server that holds its byte 0 (the layout's first server)."""
    path = m.path(name)
    with open(path, "wb") as f:
        f.write(b"w" * 4096)
        os.fsync(f.fileno())
    return path, c.names[stat_layout(c, "/" + name)["first_server"]]


def test_write_error_reported_at_close(cluster2, tmp_path):
    """A server that stops answering: the write is answered at once (it is
    in flight), and close reports the failure once the deadline passes."""
    c = cluster2
    m = mount(c, tmp_path, op_timeout_ms=1000)
    stopped = None
    try:
        path, stopped = file_and_its_first_server(c, m, "f")
        fd = os.open(path, os.O_WRONLY)
        os.kill(c.pid(stopped), signal.SIGSTOP)
        t0 = time.monotonic()
        assert os.write(fd, b"x" * 4096) == 4096
        assert time.monotonic() - t0 < 0.5, "the write waited for the server"
        with pytest.raises(OSError) as e:
            os.close(fd)
        assert e.value.errno in (errno.ETIMEDOUT, errno.EIO)
    finally:
        if stopped:
            os.kill(c.pid(stopped), signal.SIGCONT)
        m.stop()


def test_write_error_while_reads_wait_for_it(cluster2, tmp_path):
    """Reads of a file wait for its writes in flight while the kernel holds
    their pages locked; when those writes fail, the mount drops the file's
    pages.  That drop waits for the page locks, so it must not be made by
    the thread that collects the writes, or the reads wait for it forever
    (they did: the read and the close below hung)."""
    c = cluster2
    m = mount(c, tmp_path, op_timeout_ms=1000)
    stopped = None
    fds = []
    try:
        path, stopped = file_and_its_first_server(c, m, "r")
        wfd = os.open(path, os.O_WRONLY)
        fds.append(wfd)
        rfd = os.open(path, os.O_RDONLY)
        fds.append(rfd)
        os.posix_fadvise(rfd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.kill(c.pid(stopped), signal.SIGSTOP)
        # Past the first page: the writes leave their bytes in the page
        # cache, and the read below must miss it.  64 KiB each: all four
        # fit in the stopped server's socket buffers, so none waits to be
        # sent (past the 1 s deadline under TSan, one failed the next).
        for k in range(4):
            assert os.pwrite(wfd, bytes([65 + k]) * (64 << 10), (k + 1) << 18) == 64 << 10
        outcome = []

        def reader():
            # Waits for the writes above, its pages locked by the kernel.
            try:
                outcome.append(len(os.pread(rfd, 4096, 0)))
            except OSError as e:
                outcome.append(e.errno)

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        t.join(30)
        assert not t.is_alive(), "the read still waits 30 s after the writes failed"
        os.kill(c.pid(stopped), signal.SIGCONT)
        stopped = None
        with pytest.raises(OSError) as e:
            os.close(fds.pop(0))
        assert e.value.errno in (errno.ETIMEDOUT, errno.EIO)
    finally:
        # the writes of the files still open failed: so may their closes
        wind_down(c, m, stopped, fds, close_errors=False)


def wind_down(c, m, stopped, fds, close_errors=True):
    """The end of a test that may have stopped server @stopped: it goes
    on, the descriptors @fds close, and mount @m stops.  A close that
    failed is raised after that, unless @close_errors is False."""
    errors = []
    try:
        if stopped:
            os.kill(c.pid(stopped), signal.SIGCONT)
        for fd in fds:
            try:
                os.close(fd)
            except OSError as e:
                errors.append(e)   # raised once the mount is stopped
    finally:
        m.stop()
    if errors and close_errors:
        raise errors[0]


def fsynced(fd, data):
    """Writes @data at @fd's offset and fsyncs: True, or False if the
    server is not back yet (ETIMEDOUT or EIO)."""
    try:
        assert os.write(fd, data) == len(data)
        os.fsync(fd)
        return True
    except OSError as e:
        assert e.errno in (errno.ETIMEDOUT, errno.EIO), e
        return False


def test_write_error_reported_at_fsync_and_odirect_waits(cluster2, tmp_path):
    """fsync reports a failed write in flight; an O_DIRECT write waits for
    the servers, so it fails itself."""
    c = cluster2
    m = mount(c, tmp_path, op_timeout_ms=1000)
    stopped = None
    fds = []
    try:
        path, stopped_name = file_and_its_first_server(c, m, "g")
        stopped = stopped_name
        fd = os.open(path, os.O_WRONLY)
        fds.append(fd)
        dfd = os.open(path, os.O_WRONLY | os.O_DIRECT)
        fds.append(dfd)
        buf = mmap.mmap(-1, 4096)   # page-aligned, as O_DIRECT may want
        os.kill(c.pid(stopped), signal.SIGSTOP)
        assert os.write(fd, b"y" * 4096) == 4096
        with pytest.raises(OSError) as e:
            os.fsync(fd)
        assert e.value.errno in (errno.ETIMEDOUT, errno.EIO)
        os.kill(c.pid(stopped), signal.SIGCONT)
        stopped = None
        # Once the server answers again (and a probe has found it: a
        # server silent for a whole deadline is sick until then, its calls
        # failing at once, docs/mount.md "Failures"), the same descriptors
        # work.
        wait_until(lambda: fsynced(fd, b"z" * 4096), 30, 0.05,
                   "a write and fsync after the server came back")
        # An O_DIRECT write to a server that just went silent waits for it
        # (no write-behind) and fails itself.
        os.kill(c.pid(stopped_name), signal.SIGSTOP)
        stopped = stopped_name
        t0 = time.monotonic()
        with pytest.raises(OSError):
            os.pwritev(dfd, [memoryview(buf)], 0)
        assert time.monotonic() - t0 >= 0.9, "the O_DIRECT write did not wait"
        os.kill(c.pid(stopped), signal.SIGCONT)
        stopped = None
        wait_until(lambda: fsynced(fd, b"w" * 4096), 30, 0.05,
                   "a write and fsync after the server came back")
    finally:
        wind_down(c, m, stopped, fds)


def test_fsync_asks_only_the_servers_this_mount_changed_the_file_on(cluster3, tmp_path):
    """An fsync asks the file's inode server and the servers of the ranges
    this mount wrote since its last fsync, not every server the layout
    spans: a small file's fsync neither costs nor waits for a server that
    holds none of what it wrote, even a stopped one.  A write that did
    reach that server makes the next fsync ask it, and an fsync that
    failed asks it again the next time."""
    c = cluster3
    m = mount(c, tmp_path, op_timeout_ms=1000)
    stopped = None
    fds = []
    try:
        path = m.path("f")
        with open(path, "wb") as f:
            f.write(b"w" * 4096)
            os.fsync(f.fileno())
        lay = stat_layout(c, "/f")
        home, first = server_of(c, "/f"), lay["first_server"]
        idle = ({0, 1, 2} - {home, first}).pop()
        idle_strip = (idle - first) % lay["stripe_count"]

        def fsyncs():
            return [c.requests(n).get("CL2SV_FSYNC", 0) for n in c.names]

        fd = os.open(path, os.O_WRONLY)
        fds.append(fd)
        before = fsyncs()
        os.pwrite(fd, b"a" * 4096, 0)
        os.fsync(fd)
        asked = [a - b for a, b in zip(fsyncs(), before)]
        assert asked[idle] == 0 and asked[home] == 1 and asked[first] == 1, \
            "FSYNCs per server %s (inode on %d, byte 0 on %d)" % (asked, home, first)
        # The server of the strip nobody wrote to stops: fsync does not wait for it.
        stopped = c.names[idle]
        os.kill(c.pid(stopped), signal.SIGSTOP)
        os.pwrite(fd, b"b" * 4096, 0)
        os.fsync(fd)
        # A write to its strip: that fsync must ask it, and fails.
        os.pwrite(fd, b"c" * 4096, idle_strip * lay["strip_size"])
        with pytest.raises(OSError) as e:
            os.fsync(fd)
        assert e.value.errno in (errno.ETIMEDOUT, errno.EIO)
        os.kill(c.pid(stopped), signal.SIGCONT)
        stopped = None
        # The failed fsync left it owed: the next one asks that server again.
        before = fsyncs()
        wait_until(lambda: fsynced(fd, b""), 30, 0.05, "an fsync once the server answers")
        assert fsyncs()[idle] > before[idle], "the fsync after a failed one skipped %s" % idle
    finally:
        wind_down(c, m, stopped, fds)


def test_a_write_a_stopped_server_holds_does_not_hold_another_files_fsync(cluster3, tmp_path):
    """The reaper collects acknowledgements in the order the writes were
    sent, so a write to a server that stopped answering holds it; a
    thread that waits for another file's writes (its fsync) collects them
    itself.  Before, that fsync waited until the stuck write gave up."""
    c = cluster3
    m = mount(c, tmp_path)
    stopped = None
    fds = []
    try:
        d1, d2 = dirs_on_two_servers(c)
        paths = []
        for d in (d1, d2):
            path = m.path(d.lstrip("/") + "/f")
            with open(path, "wb") as f:
                f.write(b"w" * 4096)
                os.fsync(f.fileno())
            paths.append(path)
        held, free = ("/" + os.path.relpath(p, m.mnt) for p in paths)
        on = [{server_of(c, p), stat_layout(c, p)["first_server"]} for p in (held, free)]
        assert len(on[0]) == len(on[1]) == 1 and on[0] != on[1], on
        fds = [os.open(p, os.O_WRONLY) for p in paths]
        stopped = c.names[on[0].pop()]
        os.kill(c.pid(stopped), signal.SIGSTOP)
        assert os.pwrite(fds[0], b"a" * 4096, 0) == 4096   # answered at once, held
        assert os.pwrite(fds[1], b"b" * 4096, 0) == 4096
        os.fsync(fds[1])
        wb = m.stats()["write_behind"]
        assert wb["bytes_in_flight"] >= 4096, \
            "the fsync returned only once the held write had failed: %s" % wb
        os.kill(c.pid(stopped), signal.SIGCONT)
        stopped = None
        os.fsync(fds[0])
        with open(paths[0], "rb") as f:
            assert f.read() == b"a" * 4096
    finally:
        wind_down(c, m, stopped, fds)


def test_a_server_silent_for_a_while_fails_no_write(cluster3, tmp_path):
    """A server that says nothing for longer than the client's grace for
    callers of a silent server (a quarter of the deadline, at most 1 s),
    then answers.  That grace ends early the calls of a third caller and
    beyond, so that a frozen server does not hold every thread; but a
    write nobody waits for yet holds no thread, and a write is never ended
    early (its error would be reported at close though the server took
    it).  Three writes behind to one server, then:
    - a read of a fourth file: its one caller beside the reaper waits, and
      reads;
    - fsyncs of the last two written files, each collecting its own write:
      both succeed (they failed with EIO, and a read of the file saw its
      old bytes)."""
    c = cluster3
    # The kernel asks for security.capability before each write: an
    # absence the mount knows for the attributes' timeout saves asking the
    # stopped server (it may be the files' inode server too).
    m = mount(c, tmp_path, getattr_timeout_ms=60000)
    stopped = None
    fds = []
    try:
        on = {}
        for k in range(12):
            path, first = file_and_its_first_server(c, m, "f%d" % k)
            on.setdefault(first, []).append(path)
        name, paths = max(on.items(), key=lambda kv: len(kv[1]))
        assert len(paths) >= 4, on
        fds = [os.open(p, os.O_RDWR) for p in paths[:3]]
        fds.append(os.open(paths[3], os.O_RDONLY | os.O_DIRECT))

        def stalled(calls, fill):
            """Runs @calls in threads while server @name is stopped past
            the grace (1 s at the default 10 s deadline), after writes
            filled with @fill; returns what each gave once it goes on."""
            nonlocal stopped
            out = {}

            def run(k, call):
                try:
                    out[k] = call()
                except OSError as e:
                    out[k] = e.errno
            for fd in fds[:3]:   # registered as writers, security.capability asked
                assert os.pwrite(fd, b"w" * 4096, 0) == 4096
                os.fsync(fd)
            os.kill(c.pid(name), signal.SIGSTOP)
            stopped = name
            # Not a wait for a condition: the client's clock counts
            # milliseconds, and the server's last answer must come before
            # the writes on it, as with a server already silent.
            time.sleep(0.02)
            for k, fd in enumerate(fds[:3]):
                assert os.pwrite(fd, bytes([fill + k]) * 4096, 0) == 4096
            threads = [threading.Thread(target=run, args=(k, call), daemon=True)
                       for k, call in enumerate(calls)]
            for t in threads:
                t.start()
            threads[-1].join(2.5)
            assert not out, "a call ended while its server was stopped: %s" % out
            os.kill(c.pid(name), signal.SIGCONT)
            stopped = None
            for t in threads:
                t.join(30)
            return [out.get(k) for k in range(len(calls))]

        assert stalled([lambda: os.pread(fds[3], 4096, 0)], 65) == [b"w" * 4096]
        assert stalled([lambda: os.fsync(fds[1]), lambda: os.fsync(fds[2])], 97) == \
            [None, None]
        for k, fd in enumerate(fds[:3]):
            assert os.pread(fd, 4096, 0) == bytes([97 + k]) * 4096
            os.fsync(fd)
    finally:
        wind_down(c, m, stopped, fds)
