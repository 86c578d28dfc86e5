"""POSIX conformance through orchard-mount: what a local file
system (XFS, ext4) does, checked on real servers and real FUSE mounts, as
root and as uid 65534, with and without default_permissions.

The syscalls of another user run in a forked child that switches with
os.setresuid; it sends back, through a pipe, what it saw (errno numbers,
stat fields)."""
import errno
import os
import shutil
import stat
import struct
import subprocess

import pytest

from mount import NOBODY, ORCHARD_MOUNT, as_user, err, fallocate, write_file

pytestmark = [
    pytest.mark.skipif(
        not os.path.exists("/dev/fuse") or not os.path.exists(ORCHARD_MOUNT)
        or shutil.which("fusermount3") is None,
        reason="needs /dev/fuse, fusermount3 and orchard-mount"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users"),
]

PERMS = ["server", "default_permissions"]

KEEP_SIZE, PUNCH_HOLE, COLLAPSE_RANGE, ZERO_RANGE = 0x01, 0x02, 0x08, 0x10


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


# --- Item 2: ftruncate through a descriptor opened for writing -------------------

@pytest.mark.parametrize("perms", PERMS)
def test_ftruncate_through_write_descriptor(shared, perms):
    """open(O_CREAT|O_RDWR, 0) gives a writable descriptor on a file its
    mode forbids writing; ftruncate through it works (the open checked the
    permission), while truncate by path is still refused."""
    p = shared.path("shared", "f")

    def child():
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0)
        try:
            os.write(fd, b"hello world")
            os.ftruncate(fd, 0)
            sizes = [os.fstat(fd).st_size]
            os.ftruncate(fd, 5000)
            sizes.append(os.fstat(fd).st_size)
            fallocate(fd, 0, 0, 6000)       # mode 0 grows the size: the same rule
            sizes.append(os.fstat(fd).st_size)
        finally:
            os.close(fd)
        return sizes + [err(os.truncate, p, 0), os.stat(p).st_size]

    assert as_user(child) == [0, 5000, 6000, errno.EACCES, 6000]
    assert mode_of(p) == 0
    with open(p, "rb") as f:
        assert f.read() == bytes(6000)


# --- Item 1: writing, truncating, chowning a set-id file --------------------------

def _setid_file(m, name, mode, owner=0):
    p = m.path("shared", name)
    write_file(p, b"data")
    os.chown(p, owner, owner)
    os.chmod(p, mode)
    assert mode_of(p) == mode
    return p


@pytest.mark.parametrize("perms", PERMS)
def test_write_clears_setid(shared, perms):
    """A write by another user with write permission succeeds and clears
    S_ISUID, and S_ISGID when group-execute is set or the writer is not in
    the file's group (Linux 6.x); root's write keeps them (CAP_FSETID)."""
    cases = {0o4777: 0o777, 0o2777: 0o777, 0o6777: 0o777, 0o6767: 0o767, 0o4666: 0o666}
    paths = {mode: _setid_file(shared, "f%o" % mode, mode) for mode in cases}

    def child():
        out = []
        for mode, p in sorted(paths.items()):
            with open(p, "ab") as f:
                f.write(b"x")
            out.append([mode, stat.S_IMODE(os.stat(p).st_mode), os.stat(p).st_size])
        return out

    assert as_user(child) == [[mode, cases[mode], 5] for mode in sorted(cases)]
    # A member of the file's group keeps S_ISGID when it is not group-executable.
    p = _setid_file(shared, "member", 0o2767, owner=NOBODY)

    def member():
        with open(p, "ab") as f:
            f.write(b"x")
        return stat.S_IMODE(os.stat(p).st_mode)
    assert as_user(member, uid=1000, gid=NOBODY) == 0o2767
    # Root keeps them.
    p = _setid_file(shared, "root", 0o6777)
    with open(p, "ab") as f:
        f.write(b"x")
    assert mode_of(p) == 0o6777


@pytest.mark.parametrize("perms", PERMS)
def test_truncate_clears_setid(shared, perms):
    """truncate(2), ftruncate and open(O_TRUNC) by another user clear the
    set-id bits; root's truncate keeps them."""
    a = _setid_file(shared, "a", 0o6777)
    b = _setid_file(shared, "b", 0o4777)
    c = _setid_file(shared, "c", 0o2777)

    def child():
        os.truncate(a, 1)
        fd = os.open(b, os.O_WRONLY)
        os.ftruncate(fd, 2)
        os.close(fd)
        os.close(os.open(c, os.O_WRONLY | os.O_TRUNC))
        return [[stat.S_IMODE(st.st_mode), st.st_size] for st in map(os.stat, (a, b, c))]

    assert as_user(child) == [[0o777, 1], [0o777, 2], [0o777, 0]]
    os.chmod(a, 0o6777)
    os.truncate(a, 3)
    assert mode_of(a) == 0o6777 and os.stat(a).st_size == 3


@pytest.mark.parametrize("perms", PERMS)
def test_chown_clears_setid(shared, perms):
    """A chown clears S_ISUID, and S_ISGID when group-executable, of anything
    but a directory, root's chown included (Linux); a directory keeps them."""
    p = _setid_file(shared, "f", 0o6777)
    os.chown(p, NOBODY, NOBODY)
    assert mode_of(p) == 0o777
    q = _setid_file(shared, "g", 0o6767)
    os.chown(q, NOBODY, NOBODY)
    assert mode_of(q) == 0o2767        # root may keep a group it is not in
    d = shared.path("shared", "d")
    os.mkdir(d)
    os.chmod(d, 0o3777)
    os.chown(d, NOBODY, NOBODY)
    assert mode_of(d) == 0o3777
    # The owner's chgrp (to its own group): the same.
    r = _setid_file(shared, "r", 0o6755, owner=NOBODY)

    def child():
        os.chown(r, -1, NOBODY)
        return stat.S_IMODE(os.stat(r).st_mode)
    assert as_user(child) == 0o755


# --- Item 1: file capabilities go as the set-id bits do --------------------------

CAPS = "security.capability"
# VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE; permitted: CAP_NET_RAW.
CAPS_VALUE = struct.pack("<IIIII", 0x02000001, 1 << 13, 0, 0, 0)


def _caps_file(m, name, mode=0o666, owner=0):
    p = _setid_file(m, name, mode, owner)
    os.setxattr(p, CAPS, CAPS_VALUE)
    assert os.getxattr(p, CAPS) == CAPS_VALUE
    return p


def _has_caps(p):
    """True if @p has the capability xattr, False if not (ENODATA)."""
    try:
        return os.getxattr(p, CAPS) == CAPS_VALUE
    except OSError as e:
        if e.errno != errno.ENODATA:
            raise
        return False


@pytest.mark.parametrize("perms", PERMS)
def test_write_drops_capabilities(shared, perms):
    """A write by another user with write permission succeeds and drops
    security.capability (Linux: the kernel removes it as the writer), while
    that user may neither remove nor set it directly (EPERM: CAP_SETFCAP).
    Set again, the next write drops it again; with set-id bits, both go.
    Root's write drops it too, as on ext4 (CAP_FSETID keeps only the bits)."""
    p = _caps_file(shared, "w")

    def refused():
        return [err(os.removexattr, p, CAPS), err(os.setxattr, p, CAPS, CAPS_VALUE),
                _has_caps(p)]

    def append():
        with open(p, "ab") as f:
            f.write(b"x")
        return os.stat(p).st_size

    assert as_user(refused) == [errno.EPERM, errno.EPERM, True]
    assert as_user(append) == 5
    assert not _has_caps(p)
    os.setxattr(p, CAPS, CAPS_VALUE)
    assert _has_caps(p)
    assert as_user(append) == 6
    assert not _has_caps(p)
    q = _caps_file(shared, "setid", 0o6777)

    def setid():
        with open(q, "ab") as f:
            f.write(b"x")
        return stat.S_IMODE(os.stat(q).st_mode)
    assert as_user(setid) == 0o777
    assert not _has_caps(q)
    r = _caps_file(shared, "root")
    with open(r, "ab") as f:
        f.write(b"x")
    assert not _has_caps(r)


@pytest.mark.parametrize("perms", PERMS)
def test_truncate_drops_capabilities(shared, perms):
    """truncate(2) with write permission, ftruncate through a descriptor
    opened for writing and open(O_TRUNC) by another user succeed and drop
    security.capability; root's truncate drops it too."""
    a = _caps_file(shared, "a")
    b = _caps_file(shared, "b")
    c = _caps_file(shared, "c")

    def child():
        os.truncate(a, 1)
        fd = os.open(b, os.O_WRONLY)
        try:
            os.ftruncate(fd, 2)
        finally:
            os.close(fd)
        os.close(os.open(c, os.O_WRONLY | os.O_TRUNC))
        return [os.stat(x).st_size for x in (a, b, c)]

    assert as_user(child) == [1, 2, 0]
    assert [_has_caps(x) for x in (a, b, c)] == [False, False, False]
    d = _caps_file(shared, "d")
    os.truncate(d, 3)
    assert not _has_caps(d) and os.stat(d).st_size == 3


@pytest.mark.parametrize("perms", PERMS)
def test_chown_drops_capabilities(shared, perms):
    """A chown by root and the owner's chgrp (to its own group) succeed and
    drop security.capability of a file; a directory keeps it (Linux)."""
    p = _caps_file(shared, "f")
    os.chown(p, NOBODY, NOBODY)
    assert os.stat(p).st_uid == NOBODY and not _has_caps(p)
    r = _caps_file(shared, "r", 0o755, owner=NOBODY)

    def child():
        os.chown(r, -1, NOBODY)
        return os.stat(r).st_gid
    assert as_user(child) == NOBODY
    assert not _has_caps(r)
    d = shared.path("shared", "d")
    os.mkdir(d)
    os.setxattr(d, CAPS, CAPS_VALUE)
    os.chown(d, NOBODY, NOBODY)
    assert _has_caps(d)


# --- Item 4: fallocate(FALLOC_FL_ZERO_RANGE) ----------------------------------------

STRIP = 65536


@pytest.mark.parametrize("perms", ["server"])
def test_fallocate_zero_range(shared, perms):
    """ZERO_RANGE zeroes the range (unaligned edges, across strips and
    servers), keeps the size with KEEP_SIZE, and without it extends the size
    like mode 0, also for a range wholly past the end; as another user,
    through a descriptor."""
    p = shared.path("shared", "z")
    data = bytearray(os.urandom(7 * STRIP + 123))
    write_file(p, bytes(data))
    os.chmod(p, 0o666)

    def zero(fd, mode, off, length):
        fallocate(fd, mode, off, length)
        end = off + length
        if not mode & KEEP_SIZE and end > len(data):
            data.extend(bytes(end - len(data)))
        n = min(end, len(data)) - off
        if n > 0:
            data[off:off + n] = bytes(n)
        return [os.fstat(fd).st_size, os.pread(fd, len(data) + 10, 0) == bytes(data)]

    def child():
        fd = os.open(p, os.O_RDWR)
        try:
            out = [zero(fd, ZERO_RANGE, 1000, 3 * STRIP + 5),            # 4 strips, 3 servers
                   zero(fd, ZERO_RANGE | KEEP_SIZE, 5 * STRIP - 7, 14),  # across one edge
                   zero(fd, ZERO_RANGE | KEEP_SIZE, 7 * STRIP, STRIP),   # past the end: nothing
                   zero(fd, ZERO_RANGE, 7 * STRIP + 100, STRIP),         # grows the size
                   zero(fd, ZERO_RANGE, 10 * STRIP, 10)]                 # wholly past the end
            # Past the end with KEEP_SIZE, then a truncate up: zeros there too.
            zero(fd, ZERO_RANGE | KEEP_SIZE, 10 * STRIP + 10, 4096)
            os.ftruncate(fd, 10 * STRIP + 5000)
            data.extend(bytes(10 * STRIP + 5000 - len(data)))
            out.append([os.fstat(fd).st_size, os.pread(fd, len(data) + 10, 0) == bytes(data)])
            return out
        finally:
            os.close(fd)

    sizes = [7 * STRIP + 123, 7 * STRIP + 123, 7 * STRIP + 123, 8 * STRIP + 100,
             10 * STRIP + 10, 10 * STRIP + 5000]
    assert as_user(child) == [[s, True] for s in sizes]
    with open(p, "rb") as f:
        content = f.read()
    assert len(content) == 10 * STRIP + 5000
    assert content[:1000] != bytes(1000) and content[1000:1000 + 3 * STRIP + 5] == bytes(
        3 * STRIP + 5)


# --- Item 5: the permission check at open, without default_permissions -------------

@pytest.mark.parametrize("perms", PERMS)
def test_open_checks_permission(shared, perms):
    """open(2) and opendir check read and write access by the open flags,
    and O_TRUNC needs write, with or without default_permissions: a
    directory the caller may not read cannot be opened, not only listed."""
    d = shared.path("shared", "d")
    os.mkdir(d)
    os.chmod(d, 0o311)
    wo = shared.path("shared", "wo")
    write_file(wo, b"w")
    os.chmod(wo, 0o622)
    ro = shared.path("shared", "ro")
    write_file(ro, b"r")
    os.chmod(ro, 0o644)
    ok = shared.path("shared", "ok")
    os.mkdir(ok)
    os.chmod(ok, 0o755)

    def opens(path, flags):
        fd = os.open(path, flags)
        os.close(fd)

    def child():
        return [err(opens, d, os.O_RDONLY),
                err(opens, d, os.O_RDONLY | os.O_DIRECTORY),
                err(os.listdir, d),
                err(os.stat, os.path.join(d, "absent")),     # search is allowed
                err(opens, ok, os.O_RDONLY | os.O_DIRECTORY),
                err(opens, wo, os.O_RDONLY),
                err(opens, wo, os.O_WRONLY),
                err(opens, wo, os.O_RDWR),
                err(opens, ro, os.O_RDONLY),
                err(opens, ro, os.O_WRONLY),
                err(opens, ro, os.O_RDONLY | os.O_TRUNC)]

    A = errno.EACCES
    assert as_user(child) == [A, A, A, errno.ENOENT, 0, A, 0, A, 0, A, A]
    assert os.stat(ro).st_size == 1
    # Root may open them all.
    opens(d, os.O_RDONLY)
    assert os.listdir(d) == []


# --- Item 6: st_blocks is what the servers hold ------------------------------------

def test_st_blocks_allocated(mounts):
    """st_blocks counts the blocks the servers' stores hold for the file
    (4 KiB each), summed over the servers of its strips, clones included as
    on XFS: a sparse file is not full to du, a punched hole gives blocks
    back, and another mount sees the same."""
    m = mounts()
    other = mounts()
    blocks = lambda p: os.stat(p).st_blocks  # noqa: E731
    p = m.path("sparse")
    with open(p, "wb") as f:
        f.truncate(1 << 30)
    assert os.stat(p).st_size == 1 << 30 and blocks(p) == 0
    assert subprocess.run(["du", "-k", p], capture_output=True, text=True,
                          check=True).stdout.split()[0] == "0"
    fd = os.open(p, os.O_RDWR)
    try:
        os.pwrite(fd, os.urandom(1 << 20), 0)          # 16 strips: every server
        os.pwrite(fd, b"x", 100 << 20)                  # one block far away
        os.fsync(fd)
        assert blocks(p) == (1 << 20) // 512 + 8
        fallocate(fd, PUNCH_HOLE | KEEP_SIZE, 3 * STRIP, 2 * STRIP)
        assert blocks(p) == (1 << 20) // 512 + 8 - 2 * STRIP // 512
        fallocate(fd, ZERO_RANGE | KEEP_SIZE, 0, STRIP)
        assert blocks(p) == (1 << 20) // 512 + 8 - 3 * STRIP // 512
    finally:
        os.close(fd)
    assert blocks(other.path("sparse")) == (1 << 20) // 512 + 8 - 3 * STRIP // 512
    # Small and empty files.
    write_file(m.path("small"), b"x" * 100)
    assert blocks(m.path("small")) == 8
    write_file(m.path("empty"), b"")
    assert blocks(m.path("empty")) == 0
    # A clone (copy_file_range shares whole blocks) counts in both files.
    src = m.path("src")
    write_file(src, os.urandom(4 * STRIP))
    with open(src, "rb") as fi, open(m.path("dst"), "wb") as fo:
        assert os.copy_file_range(fi.fileno(), fo.fileno(), 4 * STRIP) == 4 * STRIP
    assert blocks(src) == blocks(m.path("dst")) == 4 * STRIP // 512
    # ls -l's listing (readdirplus) gives du the same counts.
    os.listdir(other.mnt)
    assert {n: blocks(other.path(n)) for n in ("small", "empty", "dst")} == {
        "small": 8, "empty": 0, "dst": 4 * STRIP // 512}
