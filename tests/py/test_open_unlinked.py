"""Open files whose last name goes (docs/DESIGN.md, "Open files whose last
name went").

As on a local file system: once the last name of an open file is removed,
fstat says nlink 0, no name is left in the directory (which can then be
removed), the file is still read and written through its descriptors on
every mount, and its data goes at the last close anywhere.  The inode's
server keeps such an orphan while a mount has it registered as open, a
lease term after that mount's connection went, and a lease term after a
restart of the server; then frees it as any removed file.

The clusters run with a short lease term, so the holds end quickly."""
import os
import signal
import subprocess
import sys
import time

import pytest

from cluster import Cluster, server_of, wait_until
from mount import Mount

STRIP = 65536
LEASE_MS = 1500
# A server holds the orphans of before its start this long (sv_opens.c: the
# lease term and its margin, SV_LEASE_MARGIN_MS).
HOLD_S = (LEASE_MS + 1000) / 1000
DATA = bytes((i * 13 + 7) & 0xff or 1 for i in range(5 * STRIP + 123))  # no zero byte


@pytest.fixture
def cl(tmp_path):
    c = Cluster(tmp_path / "c", nservers=2, strip_size=STRIP,
                extra="\n[cluster]\nlease_ms = %d\n" % LEASE_MS)
    made = []

    def mount(name):
        m = Mount(c, tmp_path / name)
        made.append(m)
        return m.start()

    c.mount = mount
    try:
        c.start_all()
        yield c
    finally:
        try:
            for m in reversed(made):
                m.kill()
        finally:
            c.stop_all()


def total(c, key):
    return sum(s.get(key, 0) for s in c.server_stats().values())


def orphans(c):
    return sum(s["orphans"] for s in c.server_stats().values())


def objects(c):
    return total(c, "data_objects")


def registrations(c, name):
    return c.server_stats().get(name, {}).get("open_registrations", 0)


def put(path, data=DATA):
    with open(path, "wb") as f:
        f.write(data)


def read_fd(fd, n=len(DATA)):
    return os.pread(fd, n + 10, 0)


def assert_scrub_clean(c):
    p = c.cli("scrub", "--all", check=False, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_fstat_after_unlink_says_nlink_0_and_no_name_is_left(cl):
    m = cl.mount("m")
    os.mkdir(m.path("d"))
    put(m.path("d", "f"))
    fd = os.open(m.path("d", "f"), os.O_RDONLY)
    try:
        os.unlink(m.path("d", "f"))
        st = os.fstat(fd)
        assert st.st_nlink == 0
        assert st.st_size == len(DATA)
        assert os.listdir(m.path("d")) == []
        os.rmdir(m.path("d"))
        assert not os.path.exists(m.path("d"))
        assert read_fd(fd) == DATA
        assert orphans(cl) == 1
    finally:
        os.close(fd)
    wait_until(lambda: orphans(cl) == 0 and objects(cl) == 0, 15,
               what="the removed file freed at its last close")
    assert total(cl, "orphans_freed") == 1
    assert_scrub_clean(cl)


def test_read_and_write_through_the_descriptor_after_unlink(cl):
    m = cl.mount("m")
    put(m.path("f"))
    fd = os.open(m.path("f"), os.O_RDWR)
    try:
        os.unlink(m.path("f"))
        assert os.pwrite(fd, b"tail", len(DATA)) == 4
        os.fsync(fd)
        assert os.fstat(fd).st_size == len(DATA) + 4
        assert os.fstat(fd).st_nlink == 0
        assert read_fd(fd) == DATA + b"tail"
        os.ftruncate(fd, 10)
        assert read_fd(fd) == DATA[:10]
        assert os.listdir(m.mnt) == []
    finally:
        os.close(fd)
    wait_until(lambda: orphans(cl) == 0 and objects(cl) == 0, 15,
               what="the removed file freed at its last close")


def test_open_on_another_mount_keeps_the_data_until_it_closes(cl):
    a, b = cl.mount("a"), cl.mount("b")
    put(a.path("f"))
    put(a.path("other"), b"kept")
    fd = os.open(b.path("f"), os.O_RDONLY)
    try:
        os.unlink(a.path("f"))
        assert not os.path.exists(a.path("f"))
        # b's kernel may trust its cached attributes for getattr_timeout_ms.
        wait_until(lambda: os.fstat(fd).st_nlink == 0, 5, what="nlink 0 on mount b")
        assert os.listdir(b.mnt) == ["other"]
        assert read_fd(fd) == DATA
        assert orphans(cl) == 1
        # The intents that free removed files ran meanwhile: this one is kept.
        wait_until(lambda: cl.intents("s0") == 0 and cl.intents("s1") == 0, 15,
                   what="no intent pending")
        assert read_fd(fd) == DATA
    finally:
        os.close(fd)
    wait_until(lambda: orphans(cl) == 0 and objects(cl) == 1, 15,
               what="the removed file freed at the last close on mount b")
    with open(b.path("other"), "rb") as f:
        assert f.read() == b"kept"
    assert_scrub_clean(cl)


def orphan_of_a_killed_mount(cl, other):
    """Mount b opens /f (its inode on s0, the root's server), mount a
    removes it and writes /other; then b is killed with /f open.  Returns
    mount a."""
    a, b = cl.mount("a"), cl.mount("b")
    put(a.path("f"))
    put(a.path("other"), other)
    fd = os.open(b.path("f"), os.O_RDONLY)
    try:
        os.unlink(a.path("f"))
        assert read_fd(fd) == DATA
        assert orphans(cl) == 1
        b.kill()
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    return a


def assert_only_other_left(cl, a, other):
    # One object per server that holds a strip of it.
    wait_until(lambda: objects(cl) == min((len(other) + STRIP - 1) // STRIP, cl.n), 15,
               what="only /other's objects left")
    with open(a.path("other"), "rb") as f:
        assert f.read() == other
    assert os.listdir(a.mnt) == ["other"]
    assert_scrub_clean(cl)


def test_killed_mount_orphan_reclaimed_after_its_lease(cl):
    a = orphan_of_a_killed_mount(cl, b"kept")
    # Held for a lease term after b's connection went, then freed.
    wait_until(lambda: orphans(cl) == 0, LEASE_MS / 1000 + 15,
               what="the killed mount's orphan reclaimed")
    assert_only_other_left(cl, a, b"kept")


def test_orphan_pending_at_a_server_restart_reclaimed_after_the_lease(cl):
    a = orphan_of_a_killed_mount(cl, DATA[::-1])
    cl.kill("s0")
    cl.start("s0")
    # Kept at the start (a mount of before may come back), freed after a term.
    assert "1 removed files were open: kept" in cl.log_text("s0")
    wait_until(lambda: orphans(cl) == 0, LEASE_MS / 1000 + 15,
               what="the orphan of before the restart reclaimed")
    assert total(cl, "orphans_freed") == 1
    assert_only_other_left(cl, a, DATA[::-1])


def test_open_on_a_mount_survives_a_server_restart(cl):
    a, b = cl.mount("a"), cl.mount("b")
    put(a.path("f"))
    fd = os.open(b.path("f"), os.O_RDONLY)
    try:
        os.unlink(a.path("f"))
        cl.kill("s0")
        cl.start("s0")
        # b registers again with its next read on the new connection (not
        # one the kernel's page cache answers).
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert read_fd(fd) == DATA
        assert orphans(cl) == 1
        assert read_fd(fd) == DATA
    finally:
        os.close(fd)
    wait_until(lambda: orphans(cl) == 0 and objects(cl) == 0, LEASE_MS / 1000 + 15,
               what="the orphan freed at its last close")


def test_idle_open_files_survive_a_server_restart(cl):
    """The mount registers its open files again as soon as it is connected
    to the restarted server, not at their next read or write: files held
    open and left idle for longer than the server's hold after its start
    keep their data.  Enough of them that the mount sends their OPENs in
    several rounds."""
    m = cl.mount("m")
    fd = os.open(m.path("f"), os.O_RDWR | os.O_CREAT, 0o644)
    small = {}
    try:
        assert os.pwrite(fd, DATA, 0) == len(DATA)
        os.fsync(fd)
        name = cl.names[server_of(cl, "/f")]
        for i in range(40):
            put(m.path("s%d" % i), b"small %d" % i)
            small[i] = os.open(m.path("s%d" % i), os.O_RDONLY)
        for i in small:
            os.unlink(m.path("s%d" % i))
        os.unlink(m.path("f"))
        assert orphans(cl) == 41
        before = registrations(cl, name)
        assert before >= 17
        cl.kill(name)
        cl.start(name)
        started = time.monotonic()
        # Nothing touches the descriptors: the mount registers them by
        # itself, well before the hold ends.
        wait_until(lambda: registrations(cl, name) == before, HOLD_S - 0.5,
                   what="the open files registered again after the restart")
        # Idle past the hold (an orphan nobody registered goes then).
        time.sleep(max(0.0, started + HOLD_S + 1.0 - time.monotonic()))
        assert orphans(cl) == 41
        assert total(cl, "orphans_freed") == 0
        # The reads go to the servers, not to the kernel's page cache.
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert read_fd(fd) == DATA
        assert os.fstat(fd).st_nlink == 0
        for i, sfd in small.items():
            os.posix_fadvise(sfd, 0, 0, os.POSIX_FADV_DONTNEED)
            assert os.pread(sfd, 100, 0) == b"small %d" % i
    finally:
        os.close(fd)
        for sfd in small.values():
            os.close(sfd)
    wait_until(lambda: orphans(cl) == 0 and objects(cl) == 0, 15,
               what="the orphans freed at their last close")
    assert total(cl, "orphans_freed") == 41
    assert registrations(cl, name) == 0
    assert_scrub_clean(cl)


# Holds a file open in a process of its own and reads it on each line of
# input: while its mount is stopped, the test itself must hold nothing
# there, since a child it spawns (a server, the CLI) closes the inherited
# descriptors, and each close waits for the mount (FLUSH).
HOLDER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print("open", flush=True)
for line in sys.stdin:
    try:
        print(os.pread(fd, int(line), 0).hex(), flush=True)
    except OSError as e:
        print("errno %d" % e.errno, flush=True)
"""


class Holder:
    def __init__(self, path):
        self.p = subprocess.Popen([sys.executable, "-c", HOLDER, path], text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.p.stdout.readline() == "open\n"

    def read(self, n=len(DATA) + 10):
        """The bytes read, or the errno of the read that failed."""
        self.p.stdin.write("%d\n" % n)
        self.p.stdin.flush()
        out = self.p.stdout.readline().strip()
        return int(out.split()[1]) if out.startswith("errno") else bytes.fromhex(out)

    def close(self):
        self.p.stdin.close()
        assert self.p.wait(30) == 0


def test_mount_stopped_across_a_server_restart_loses_the_file(cl):
    """Registering again takes a running mount: one stopped across the
    restart of the file's server for longer than the hold loses the file,
    as a mount that died does, and once running again registers nothing
    for it."""
    a, b = cl.mount("a"), cl.mount("b")
    put(a.path("f"))
    put(a.path("other"), b"kept")
    name = cl.names[server_of(cl, "/f")]
    h = Holder(b.path("f"))
    try:
        os.unlink(a.path("f"))
        assert h.read() == DATA
        assert orphans(cl) == 1
        sent = b.server_requests().get("CL2SV_WRITERS", 0)
        os.kill(b.proc.pid, signal.SIGSTOP)
        try:
            cl.kill(name)
            cl.start(name)
            wait_until(lambda: orphans(cl) == 0, HOLD_S + 15,
                       what="the orphan freed after the hold")
        finally:
            os.kill(b.proc.pid, signal.SIGCONT)
        # b tries once it runs again, and the server has nothing to keep.
        wait_until(lambda: b.server_requests().get("CL2SV_WRITERS", 0) > sent, 10,
                   what="mount b to register its open file again")
        assert registrations(cl, name) == 0
        assert orphans(cl) == 0
        # The descriptor still reads a file that is gone: an error, not stale bytes.
        assert isinstance(h.read(), int)
    finally:
        h.close()
    assert_only_other_left(cl, a, b"kept")
    assert total(cl, "orphans_freed") == 1
