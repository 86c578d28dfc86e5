"""The namespace on a real 3-server cluster: lookup, attributes, create,
mkdir, mknod, symlink, link, unlink, rmdir, rename, readdir, statfs, xattrs
and the Linux error codes, including the operations that span two servers.

Calls go through build/tests/orch-op (tests/tools/orch-op.c, wrapped by
tests/lib/op.py), which drives liborchard directly and can act as any user;
the `orchard` CLI is used where a user would use it.

Placement: a handle's top 16 bits are its server.  A directory's entries
live on its inode's server; a file or symlink is created on its parent's
server; a new directory's inode goes where a hash of (parent, name) says, so
a test that needs a particular placement makes directories until one lands
where it wants (mkdir_placed).
"""
import hashlib
import json
import os
import time

import pytest

from cluster import wait_until
from op import Op, pattern

ROOT = 1
U1 = (1000, [1000])
U2 = (2000, [2000])


def srv(handle):
    return handle >> 48


def join(parent, name):
    return parent.rstrip("/") + "/" + name


@pytest.fixture
def op(cluster3):
    with Op(cluster3) as o:
        yield o


def mkdir_placed(op, parent, want, prefix="d", mode=0o755, tries=100):
    """Makes parent/<prefix><i> until want(server of its inode) holds; the
    misses are removed again.  Returns (path, attrs)."""
    for i in range(tries):
        path = join(parent, "%s%d" % (prefix, i))
        if op.exists(path):
            continue
        a = op.mkdir(path, mode)
        if want(srv(a["handle"])):
            return path, a
        op.rmdir(path)
    raise AssertionError("no directory under %s landed where wanted" % parent)


def dir_pair(op):
    """Two directories under / held by different servers: (pa, a, pb, b)."""
    pa, a = mkdir_placed(op, "/", lambda s: True, "src")
    pb, b = mkdir_placed(op, "/", lambda s: s != srv(a["handle"]), "dst")
    return pa, a, pb, b


# --- lookup and getattr --------------------------------------------------------------------


def test_lookup_getattr_size_always_present(op, cluster3):
    op.mkdir("/d")
    f = op.create("/d/f")
    assert f["size"] == 0 and f["nlink"] == 1 and f["type"] == "reg"
    op.write("/d/f", 0, 100000)
    for a in (op.stat("/d/f"), op.lstat("/d/f"), op.call("lookup", "/d", "f"),
              op.getattr(f["handle"])):
        assert a["handle"] == f["handle"]
        assert a["size"] == 100000
        assert a["parent"] == op.stat("/d")["handle"]
    # Every kind of object comes back with its size.
    op.symlink("f", "/d/l")
    assert op.lstat("/d/l")["size"] == 1
    assert op.stat("/d/l")["size"] == 100000
    assert "size" in op.stat("/d") and "size" in op.stat("/")
    r = op.read("/d/f", 99990, 100)
    assert r["got"] == 10 and r["data"] == pattern(99990, 10)
    # "." and ".." resolve through the parent pointers.
    assert op.stat("/d/./f")["handle"] == f["handle"]
    assert op.stat("/d/../d/f")["handle"] == f["handle"]
    assert op.stat("/..")["handle"] == ROOT
    out = cluster3.cli("stat", "/d/f").stdout
    assert "Size: 100000" in out and "Links: 1" in out
    assert "Handle: 0x%016x" % f["handle"] in out


def test_root_attributes(op):
    r = op.stat("/")
    assert r["handle"] == ROOT and r["type"] == "dir" and r["parent"] == ROOT
    assert r["mode"] & 0o7777 == 0o755 and r["uid"] == 0 and r["nlink"] == 2


# --- setattr -----------------------------------------------------------------------------------


def test_setattr_mode_and_owner(op):
    op.mkdir("/d", 0o777)
    f = op.create("/d/f", 0o644)
    assert op.chmod("/d/f", 0o600)["mode"] == 0o100600
    assert op.stat("/d/f")["mode"] == 0o100600
    a = op.chown("/d/f", 1000, 1000)
    assert (a["uid"], a["gid"]) == (1000, 1000)
    a = op.chown("/d/f", -1, 3000)
    assert (a["uid"], a["gid"]) == (1000, 3000)
    a = op.chown("/d/f", 1000, 1000)
    assert a["ctime"] >= f["ctime"]
    u1 = op.as_(*U1)
    # The owner: chmod, and chgrp to a group he belongs to only.
    assert u1.chmod("/d/f", 0o640)["mode"] == 0o100640
    op.as_(1000, [1000, 2500]).chown("/d/f", -1, 2500)
    assert op.stat("/d/f")["gid"] == 2500
    u1.err("EPERM", "chown", "/d/f", -1, 4000)
    u1.err("EPERM", "chown", "/d/f", 2000, -1)
    op.as_(*U2).err("EPERM", "chmod", "/d/f", 0o777)
    # A chown by a non-root owner drops the set-user-ID bit.
    op.chmod("/d/f", 0o4755)
    op.as_(1000, [1000, 2500]).chown("/d/f", -1, 1000)
    assert op.stat("/d/f")["mode"] == 0o100755
    # chmod on a directory whose inode may live on another server than its entry.
    for i in range(6):
        p = "/d/sub%d" % i
        op.mkdir(p, 0o700)
        assert op.chmod(p, 0o751)["mode"] == 0o40751
        assert op.stat(p)["mode"] == 0o40751


def test_setattr_size(op):
    op.mkdir("/d", 0o777)
    op.create("/d/f", 0o666)
    op.write("/d/f", 0, 200000)  # over all three servers (64 KiB strips)
    assert op.truncate("/d/f", 300000)["size"] == 300000
    r = op.read("/d/f", 190000, 110000)
    assert r["got"] == 110000
    whole = bytes(pattern(190000, 10000)) + bytes(100000)
    assert r["sha256"] == hashlib.sha256(whole).hexdigest()
    assert op.truncate("/d/f", 70000)["size"] == 70000
    assert op.stat("/d/f")["size"] == 70000
    assert op.read("/d/f", 60000, 20000)["data"] == pattern(60000, 10000)
    # Growing again must not bring the cut bytes back.
    op.truncate("/d/f", 200000)
    r = op.read("/d/f", 69990, 4000)
    assert r["data"] == pattern(69990, 10) + bytes(3990)
    r = op.read("/d/f", 150000, 1000)
    assert r["data"] == bytes(1000)
    assert op.truncate("/d/f", 0)["size"] == 0
    op.err("EISDIR", "truncate", "/d", 0)
    op.chmod("/d/f", 0o644)
    op.as_(*U1).err("EACCES", "truncate", "/d/f", 10)


def test_setattr_times(op):
    op.mkdir("/d", 0o777)
    op.create("/d/f", 0o666)
    a = op.utimens("/d/f", 1000000000123, 2000000000456)
    assert (a["atime"], a["mtime"]) == (1000000000123, 2000000000456)
    s = op.stat("/d/f")
    assert (s["atime"], s["mtime"]) == (1000000000123, 2000000000456)
    # omit leaves one alone; now is the server's clock, same as ours here.
    before = time.time_ns()
    a = op.utimens("/d/f", "omit", "now")
    after = time.time_ns()
    assert a["atime"] == 1000000000123
    assert before <= a["mtime"] <= after and before <= a["ctime"] <= after
    a = op.utimens("/d/f", "now", "omit")
    assert a["mtime"] <= a["atime"] <= time.time_ns()
    # UTIME_NOW needs write permission or ownership; explicit times, ownership.
    u1 = op.as_(*U1)
    u1.utimens("/d/f", "now", "now")
    u1.err("EPERM", "utimens", "/d/f", 5, 5)
    op.chmod("/d/f", 0o644)
    u1.err("EACCES", "utimens", "/d/f", "now", "now")
    op.chown("/d/f", 1000, 1000)
    assert u1.utimens("/d/f", 7, 8)["mtime"] == 8
    # Negative times (before 1970) round-trip.
    assert op.utimens("/d/f", -5000000000, "omit")["atime"] == -5000000000


# --- create, mkdir, mknod ---------------------------------------------------------------------


def test_create_and_excl(op):
    d = op.mkdir("/d", 0o777)
    before = op.stat("/d")
    f = op.create("/d/f", 0o640)
    assert f["existed"] == 0 and f["mode"] == 0o100640 and f["nlink"] == 1
    assert f["parent"] == d["handle"] and srv(f["handle"]) == srv(d["handle"])
    assert f["stripe_count"] == 3 and f["first_server"] == srv(f["handle"])
    assert op.stat("/d")["mtime"] >= before["mtime"]
    again = op.create("/d/f", 0o600)
    assert again["existed"] == 1 and again["handle"] == f["handle"]
    assert again["mode"] == 0o100640
    op.err("EEXIST", "create", "/d/f", "644", "excl")
    op.err("EEXIST", "mkdir", "/d/f", "755")
    op.err("EEXIST", "mknod", "/d/f", "fifo", "644")
    # Credentials decide the owner.
    g = op.as_(1000, [1234]).create("/d/g", 0o600)
    assert (g["uid"], g["gid"]) == (1000, 1234)
    assert sorted(op.ls("/d")) == ["f", "g"]


def test_setgid_directory_inheritance(op):
    op.mkdir("/d", 0o777)
    op.chown("/d", 0, 50)
    op.chmod("/d", 0o2777)
    u1 = op.as_(*U1)
    assert u1.create("/d/f", 0o644)["gid"] == 50
    servers = set()
    # Subdirectories inherit gid and S_ISGID, wherever their inode lands.
    for i in range(8):
        a = u1.mkdir("/d/s%d" % i, 0o755)
        servers.add(srv(a["handle"]))
        assert a["gid"] == 50 and a["uid"] == 1000 and a["mode"] == 0o42755, a
        assert op.stat("/d/s%d" % i)["gid"] == 50
    assert len(servers) > 1


def test_mkdir_spreads_over_servers(op, cluster3):
    servers = {}
    for i in range(30):
        a = op.mkdir("/dir%02d" % i, 0o755)
        assert a["type"] == "dir" and a["nlink"] == 2 and a["parent"] == ROOT
        servers[srv(a["handle"])] = servers.get(srv(a["handle"]), 0) + 1
    assert len(servers) > 1, servers
    assert all(s < 3 for s in servers)
    assert op.stat("/")["nlink"] == 2 + 30
    assert sorted(op.ls("/")) == ["dir%02d" % i for i in range(30)]
    out = cluster3.cli("ls", "/").stdout.split()
    assert out == ["dir%02d" % i for i in range(30)]
    # Each directory holds its own entries, whichever server it is on.
    for i in range(30):
        op.create("/dir%02d/f" % i)
        f = op.stat("/dir%02d/f" % i)
        assert srv(f["handle"]) == srv(op.stat("/dir%02d" % i)["handle"])
    # mkdir -p through the CLI, then every level resolves with the right parent.
    cluster3.cli("mkdir", "-p", "/p/q/r/s/t")
    cluster3.cli("mkdir", "-p", "/p/q/r/s/t")
    parent = ROOT
    path = ""
    for name in "pqrst":
        path += "/" + name
        a = op.stat(path)
        assert a["parent"] == parent and a["type"] == "dir"
        parent = a["handle"]
    assert op.stat("/p/q/r/s/t/../../..")["handle"] == op.stat("/p/q")["handle"]


def test_mknod(op, cluster3):
    d = op.mkdir("/dev", 0o755)
    fifo = op.mknod("/dev/fifo", "fifo", 0o644)
    sock = op.mknod("/dev/sock", "sock", 0o600)
    chr_ = op.mknod("/dev/null", "chr", 0o666, 1, 3)
    blk = op.mknod("/dev/sda", "blk", 0o660, 8, 1)
    for a, t, m in ((fifo, "fifo", 0o010644), (sock, "sock", 0o140600),
                    (chr_, "chr", 0o020666), (blk, "blk", 0o060660)):
        assert a["type"] == t and a["mode"] == m and a["nlink"] == 1 and a["size"] == 0
        assert a["parent"] == d["handle"]
    assert (op.stat("/dev/null")["rdev_major"], op.stat("/dev/null")["rdev_minor"]) == (1, 3)
    assert (op.stat("/dev/sda")["rdev_major"], op.stat("/dev/sda")["rdev_minor"]) == (8, 1)
    out = cluster3.cli("stat", "/dev/sda").stdout
    assert "Device: 8,1" in out
    r = op.readdir("/dev", plus=True)
    assert sorted(r["list"]) == ["fifo", "null", "sda", "sock"]
    assert r["attr"]["null"][1] == 0o020666
    op.err("EEXIST", "mknod", "/dev/fifo", "fifo", "644")
    for name in ("fifo", "sock", "null", "sda"):
        op.unlink("/dev/" + name)
    assert op.ls("/dev") == []


# --- symlinks ---------------------------------------------------------------------------------


def test_symlink_readlink(op, cluster3):
    op.mkdir("/d")
    op.create("/d/f")
    op.write("/d/f", 0, b"hello")
    a = op.symlink("f", "/d/rel")
    assert a["type"] == "lnk" and a["mode"] == 0o120777 and a["size"] == 1
    op.symlink("/d", "/dl")
    assert op.readlink("/d/rel") == "f"
    assert op.readlink("/dl") == "/d"
    assert op.stat("/d/rel")["handle"] == op.stat("/d/f")["handle"]
    assert op.lstat("/d/rel")["type"] == "lnk"
    # A symlinked directory in the middle of a path is followed.
    assert op.stat("/dl/f")["handle"] == op.stat("/d/f")["handle"]
    assert op.read("/dl/rel", 0, 5)["data"] == b"hello"
    # Dangling: lstat works, stat does not.
    op.symlink("/nowhere", "/d/dangling")
    assert op.lstat("/d/dangling")["type"] == "lnk"
    op.err("ENOENT", "stat", "/d/dangling")
    # Loops end in ELOOP.
    op.symlink("/d/loop2", "/d/loop1")
    op.symlink("/d/loop1", "/d/loop2")
    op.err("ELOOP", "stat", "/d/loop1")
    # Target length limits: PATH_MAX (4096) fits, one more does not.
    # Target length limits as Linux: PATH_MAX with its NUL, 4095 bytes.
    long_target = "/" + "x" * 4094
    assert op.symlink(long_target, "/d/long")["size"] == 4095
    assert op.readlink("/d/long") == long_target
    op.err("ENAMETOOLONG", "symlink", "/" + "x" * 4095, "/d/toolong")
    op.err("ENAMETOOLONG", "symlink", "/" + "x" * 4096, "/d/toolong")
    op.err("EEXIST", "symlink", "x", "/d/f")
    op.err("EINVAL", "readlink", "/d/f")
    cluster3.cli("ln", "-s", "/d/f", "/d/clilink")
    assert op.readlink("/d/clilink") == "/d/f"
    assert "/d/clilink -> /d/f" in cluster3.cli("stat", "/d/clilink").stdout


# --- link and unlink ---------------------------------------------------------------------------


def test_link_same_server(op, cluster3):
    op.mkdir("/d")
    f = op.create("/d/f")
    op.write("/d/f", 0, 1000)
    a = op.link("/d/f", "/d/g")
    assert a["handle"] == f["handle"] and a["nlink"] == 2
    assert op.stat("/d/f")["nlink"] == 2
    cluster3.cli("ln", "/d/f", "/d/h")
    assert op.stat("/d/h")["nlink"] == 3 and op.stat("/d/h")["handle"] == f["handle"]
    assert sorted(op.ls("/d")) == ["f", "g", "h"]
    op.err("EEXIST", "link", "/d/f", "/d/g")
    op.err("EPERM", "link", "/d", "/d/dirlink")
    op.err("ENOENT", "link", "/d/nope", "/d/x")
    op.unlink("/d/f")
    assert op.stat("/d/g")["nlink"] == 2
    op.unlink("/d/h")
    assert op.stat("/d/g")["nlink"] == 1
    assert op.read("/d/g", 0, 1000)["data"] == pattern(0, 1000)
    op.unlink("/d/g")
    op.err("ENOENT", "getattr", f["handle"])
    assert op.ls("/d") == []


def test_link_cross_server(op, cluster3):
    pa, a, pb, b = dir_pair(op)
    f = op.create(join(pa, "f"))
    assert srv(f["handle"]) == srv(a["handle"]) != srv(b["handle"])
    op.write(join(pa, "f"), 0, 150000)
    inodes_before = inode_counts(cluster3)
    # The entry goes to b's server, the link count to a's.
    g = op.link(join(pa, "f"), join(pb, "g"))
    assert g["handle"] == f["handle"] and g["nlink"] == 2
    # open(O_CREAT) of the name: b's server holds no attributes to give, so
    # they come from a's, not zeroed.
    again = op.create(join(pb, "g"), 0o600)
    assert again["existed"] == 1 and again["handle"] == f["handle"]
    assert (again["mode"], again["size"], again["nlink"]) == (0o100644, 150000, 2)
    h = op.link(join(pb, "g"), join(pb, "h"))
    assert h["nlink"] == 3
    for p in (join(pa, "f"), join(pb, "g"), join(pb, "h")):
        s = op.stat(p)
        assert s["handle"] == f["handle"] and s["nlink"] == 3 and s["size"] == 150000
    r = op.readdir(pb, plus=True)
    assert sorted(r["list"]) == ["g", "h"] and r["all_attrs"] == 1
    assert r["attr"]["g"] == (f["handle"], 0o100644, 150000, 3)
    assert op.read(join(pb, "h"), 0, 150000)["sha256"] == op.read(join(pa, "f"), 0, 150000)["sha256"]
    # Unlink the remote entries and the local one, in an order that leaves the
    # last link remote: the inode dies on its own server only then.
    op.unlink(join(pb, "g"))
    assert op.stat(join(pa, "f"))["nlink"] == 2
    op.err("ENOENT", "lstat", join(pb, "g"))
    op.unlink(join(pa, "f"))
    assert op.stat(join(pb, "h"))["nlink"] == 1
    assert op.getattr(f["handle"])["nlink"] == 1
    assert op.read(join(pb, "h"), 149990, 10)["data"] == pattern(149990, 10)
    op.unlink(join(pb, "h"))
    op.err("ENOENT", "getattr", f["handle"])
    assert op.ls(pa) == [] and op.ls(pb) == []
    assert inode_counts(cluster3) == [n - (1 if i == srv(f["handle"]) else 0)
                                      for i, n in enumerate(inodes_before)]


def test_link_cross_server_errors(op):
    pa, a, pb, b = dir_pair(op)
    op.create(join(pa, "f"))
    op.create(join(pb, "taken"))
    op.err("EEXIST", "link", join(pa, "f"), join(pb, "taken"))
    op.err("EPERM", "link", pa, join(pb, "dirlink"))
    op.chmod(pb, 0o755)
    op.as_(*U1).err("EACCES", "link", join(pa, "f"), join(pb, "g"))
    # A failed cross-server link leaves the count and the names alone.
    assert op.stat(join(pa, "f"))["nlink"] == 1
    assert sorted(op.ls(pb)) == ["taken"]


def inode_counts(cluster):
    st = json.loads(cluster.cli("stats", "--json").stdout)
    return [s["inodes"] for s in st["servers"]]


def test_unlink(op, cluster3):
    op.mkdir("/d", 0o777)
    f = op.create("/d/f")
    op.write("/d/f", 0, 200000)
    op.mkdir("/d/sub")
    before = op.stat("/d")
    op.unlink("/d/f")
    op.err("ENOENT", "stat", "/d/f")
    op.err("ENOENT", "getattr", f["handle"])
    assert op.stat("/d")["mtime"] >= before["mtime"]
    op.err("ENOENT", "unlink", "/d/f")
    op.err("EISDIR", "unlink", "/d/sub")
    op.create("/d/g")
    op.err("ENOTDIR", "rmdir", "/d/g")
    op.err("ENOTDIR", "unlink", "/d/g/x")
    cluster3.cli("rm", "/d/g")
    assert op.ls("/d") == ["sub"]
    # A recreated name is a new inode.
    assert op.create("/d/f")["handle"] != f["handle"]


# --- rmdir ----------------------------------------------------------------------------------------


def test_rmdir(op, cluster3):
    op.mkdir("/d")
    op.mkdir("/d/e")
    assert op.stat("/d")["nlink"] == 3
    op.create("/d/e/f")
    op.err("ENOTEMPTY", "rmdir", "/d/e")
    op.err("ENOTEMPTY", "rmdir", "/d")
    op.unlink("/d/e/f")
    e = op.stat("/d/e")
    op.rmdir("/d/e")
    op.err("ENOENT", "getattr", e["handle"])
    assert op.stat("/d")["nlink"] == 2
    op.err("ENOENT", "rmdir", "/d/e")
    op.err("EINVAL", "rmdir", "/d/.")
    op.rmdir("/d")
    assert op.ls("/") == []
    cluster3.cli("mkdir", "-p", "/x/y/z")
    cluster3.cli("ln", "-s", "/x", "/x/y/up")
    for i in range(5):
        op.create("/x/y/z/f%d" % i)
    cluster3.cli("rm", "-r", "/x")
    assert op.ls("/") == []
    assert cluster3.cli("rm", "/x", check=False).returncode == 1


@pytest.mark.parametrize("content", ["file", "subdir"])
def test_rmdir_cross_server(op, content):
    """A directory whose inode lives on another server than its entry is
    emptiness-checked where it lives."""
    op.mkdir("/p")
    p = srv(op.stat("/p")["handle"])
    path, d = mkdir_placed(op, "/p", lambda s: s != p)
    inner = join(path, "x")
    if content == "file":
        op.create(inner)
    else:
        op.mkdir(inner)
    op.err("ENOTEMPTY", "rmdir", path)
    # Nothing changed: the entry is live again (not left busy), the contents stay.
    assert op.stat(path)["handle"] == d["handle"]
    assert op.ls(path) == ["x"]
    op.create(join(path, "y"))
    op.rename(join(path, "y"), join(path, "z"))
    op.err("ENOTEMPTY", "rmdir", path)
    assert op.stat("/p")["nlink"] == 3
    op.call("unlink" if content == "file" else "rmdir", inner)
    op.unlink(join(path, "z"))
    op.rmdir(path)
    op.err("ENOENT", "getattr", d["handle"])
    op.err("ENOENT", "stat", path)
    assert op.stat("/p")["nlink"] == 2
    assert op.ls("/p") == []


# --- rename ---------------------------------------------------------------------------------------


def test_rename_file_over_file(op, cluster3):
    op.mkdir("/d")
    f = op.create("/d/f")
    op.write("/d/f", 0, b"new")
    v = op.create("/d/v")
    op.write("/d/v", 0, b"victim")
    op.link("/d/v", "/d/v2")
    op.rename("/d/f", "/d/v")
    assert op.stat("/d/v")["handle"] == f["handle"]
    assert op.read("/d/v", 0, 10)["data"] == b"new"
    op.err("ENOENT", "stat", "/d/f")
    # The victim had two names: it loses one link, and lives on.
    assert op.stat("/d/v2")["nlink"] == 1 and op.stat("/d/v2")["handle"] == v["handle"]
    op.rename("/d/v", "/d/v2")
    op.err("ENOENT", "getattr", v["handle"])
    assert op.ls("/d") == ["v2"]
    # Renaming onto another name of the same inode does nothing.
    op.link("/d/v2", "/d/same")
    op.rename("/d/v2", "/d/same")
    assert sorted(op.ls("/d")) == ["same", "v2"]
    assert op.stat("/d/same")["nlink"] == 2
    # The CLI's mv, into a directory and over a file.
    op.mkdir("/e")
    cluster3.cli("mv", "/d/same", "/e")
    assert op.stat("/e/same")["handle"] == f["handle"]
    # Onto another name of the same inode, across directories: a no-op too.
    cluster3.cli("mv", "/e/same", "/d/v2")
    assert op.ls("/e") == ["same"] and op.ls("/d") == ["v2"]
    cluster3.cli("mv", "/e/same", "/d/other")
    assert op.ls("/e") == [] and sorted(op.ls("/d")) == ["other", "v2"]
    op.err("ENOENT", "rename", "/d/nope", "/d/x")
    op.err("ENOENT", "rename", "/d/v2", "/nodir/x")


@pytest.mark.parametrize("full", [False, True], ids=["empty", "nonempty"])
@pytest.mark.parametrize("victim", ["local", "remote"])
def test_rename_dir_over_dir(op, victim, full):
    """Same parent; the victim directory's inode on the parent's server or
    on another one (emptiness then checked where it lives)."""
    op.mkdir("/d")
    d = srv(op.stat("/d")["handle"])
    src, s = mkdir_placed(op, "/d", lambda x: True, "src")
    op.create(join(src, "inside"))
    dst, t = mkdir_placed(op, "/d", (lambda x: x == d) if victim == "local"
                          else (lambda x: x != d), "dst")
    if full:
        op.create(join(dst, "keep"))
    assert op.stat("/d")["nlink"] == 4
    if full:
        op.err("ENOTEMPTY", "rename", src, dst)
        # Both entries usable again afterwards (not left busy).
        assert op.ls(dst) == ["keep"] and op.ls(src) == ["inside"]
        op.unlink(join(dst, "keep"))
        op.rename(join(src, "inside"), join(src, "inside2"))
    op.rename(src, dst)
    assert op.stat(dst)["handle"] == s["handle"]
    assert op.ls(dst) == ["inside2" if full else "inside"]
    op.err("ENOENT", "getattr", t["handle"])
    op.err("ENOENT", "stat", src)
    assert op.stat("/d")["nlink"] == 3
    assert op.ls("/d") == [os.path.basename(dst)]


@pytest.mark.parametrize("victim", [
    "at-target",
    "elsewhere",
])
def test_rename_dir_cross_server_over_empty_dir(op, victim):
    pa, a, pb, b = dir_pair(op)
    sb = srv(b["handle"])
    m, ma = mkdir_placed(op, pa, lambda x: True, "m")
    v, va = mkdir_placed(op, pb, (lambda x: x == sb) if victim == "at-target"
                         else (lambda x: x != sb), "v")
    op.create(join(v, "x"))
    op.err("ENOTEMPTY", "rename", m, v)
    op.unlink(join(v, "x"))
    op.rename(m, v)
    assert op.stat(v)["handle"] == ma["handle"]
    op.err("ENOENT", "getattr", va["handle"])
    assert (op.stat(pa)["nlink"], op.stat(pb)["nlink"]) == (2, 3)
    assert op.ls(pa) == [] and op.ls(pb) == [os.path.basename(v)]


def test_rename_dir_errors(op):
    op.mkdir("/d")
    d = srv(op.stat("/d")["handle"])
    a, _ = mkdir_placed(op, "/d", lambda x: x == d, "a")
    b, _ = mkdir_placed(op, "/d", lambda x: x == d, "b")
    op.create(join(b, "f"))
    op.create("/d/file")
    op.err("ENOTEMPTY", "rename", a, b)
    op.err("ENOTDIR", "rename", a, "/d/file")
    op.err("EISDIR", "rename", "/d/file", a)
    # Into its own subtree.
    op.mkdir(join(a, "x"))
    op.mkdir(join(a, "x/y"))
    op.err("EINVAL", "rename", a, join(a, "x/y/z"))
    op.err("EINVAL", "rename", a, join(a, "moved"))
    op.err("EINVAL", "rename", "/d", join(a, "x/d"))
    assert sorted(op.ls("/d")) == sorted([os.path.basename(a), os.path.basename(b), "file"])
    assert op.ls(join(a, "x")) == ["y"]


def test_rename_noreplace(op):
    op.mkdir("/d")
    f = op.create("/d/f")
    op.create("/d/g")
    op.err("EEXIST", "rename", "/d/f", "/d/g", "noreplace")
    assert op.stat("/d/f")["handle"] == f["handle"]
    op.rename("/d/f", "/d/h", "noreplace")
    assert op.stat("/d/h")["handle"] == f["handle"]
    pa, a, pb, b = dir_pair(op)
    op.create(join(pa, "x"))
    op.create(join(pb, "x"))
    op.err("EEXIST", "rename", join(pa, "x"), join(pb, "x"), "noreplace")
    assert op.exists(join(pa, "x"))


def test_rename_exchange(op):
    op.mkdir("/d")
    d = srv(op.stat("/d")["handle"])
    f = op.create("/d/f")
    g = op.create("/d/g")
    op.rename("/d/f", "/d/g", "exchange")
    assert op.stat("/d/f")["handle"] == g["handle"]
    assert op.stat("/d/g")["handle"] == f["handle"]
    op.err("ENOENT", "rename", "/d/f", "/d/none", "exchange")
    # A directory and a file in two directories of one server: the directory's
    # ".." and both parents' link counts follow.
    p, pa = mkdir_placed(op, "/d", lambda x: x == d, "p")
    q, qa = mkdir_placed(op, "/d", lambda x: x == d, "q")
    sub = op.mkdir(join(p, "sub"))
    op.create(join(q, "file"))
    assert (op.stat(p)["nlink"], op.stat(q)["nlink"]) == (3, 2)
    op.rename(join(p, "sub"), join(q, "file"), "exchange")
    assert op.stat(join(q, "file"))["handle"] == sub["handle"]
    assert op.stat(join(q, "file"))["parent"] == qa["handle"]
    assert op.stat(join(q, "file/.."))["handle"] == qa["handle"]
    assert op.stat(join(p, "sub"))["type"] == "reg"
    assert (op.stat(p)["nlink"], op.stat(q)["nlink"]) == (2, 3)
    op.err("EINVAL", "rename", "/d", join(p, "sub"), "exchange")


def test_rename_exchange_cross_server(op):
    pa, a, pb, b = dir_pair(op)
    f = op.create(join(pa, "f"))
    g = op.create(join(pb, "g"))
    op.rename(join(pa, "f"), join(pb, "g"), "exchange")
    assert op.stat(join(pa, "f"))["handle"] == g["handle"]
    assert op.stat(join(pb, "g"))["handle"] == f["handle"]


@pytest.mark.parametrize("moved", ["at-source", "at-target", "elsewhere"])
def test_rename_exchange_cross_server_dir_with_file(op, moved):
    """A directory and a file swap places across servers: both parents'
    link counts and the directory's parent pointer follow, at once."""
    pa, a, pb, b, m, ma = moved_dir_setup(op, moved)
    op.create(join(m, "inside"))
    g = op.create(join(pb, "g"))
    na, nb = op.stat(pa)["nlink"], op.stat(pb)["nlink"]
    op.rename(m, join(pb, "g"), "exchange")
    assert op.stat(join(pb, "g"))["handle"] == ma["handle"]
    assert op.stat(m)["handle"] == g["handle"]
    assert op.getattr(ma["handle"])["parent"] == b["handle"]
    assert op.ls(join(pb, "g")) == ["inside"]
    assert op.stat(pa)["nlink"] == na - 1
    assert op.stat(pb)["nlink"] == nb + 1


def moved_dir_setup(op, moved):
    """Directories pa, pb on different servers and pa/m, whose inode is on
    pa's server, pb's, or a third one."""
    pa, a, pb, b = dir_pair(op)
    sa, sb = srv(a["handle"]), srv(b["handle"])
    want = {"at-source": lambda s: s == sa, "at-target": lambda s: s == sb,
            "elsewhere": lambda s: s not in (sa, sb)}[moved]
    m, ma = mkdir_placed(op, pa, want, "m")
    return pa, a, pb, b, m, ma


def parent_settles(op, handle, parent, moved):
    """The moved directory's parent pointer.  On a third server it may lag
    the rename's reply (see test_rename_dir_third_server_parent_in_reply)."""
    if moved != "elsewhere":
        assert op.getattr(handle)["parent"] == parent
        return
    wait_until(lambda: op.getattr(handle)["parent"] == parent, 10,
               what="parent pointer of the moved directory")


@pytest.mark.parametrize("moved", ["at-source", "at-target", "elsewhere"])
def test_rename_dir_cross_server_updates_parent(op, moved):
    """Rename between directories held by different servers."""
    pa, a, pb, b, m, ma = moved_dir_setup(op, moved)
    op.create(join(m, "f"))
    assert (op.stat(pa)["nlink"], op.stat(pb)["nlink"]) == (3, 2)
    op.rename(m, join(pb, "moved"))
    parent_settles(op, ma["handle"], b["handle"], moved)
    op.err("ENOENT", "stat", m)
    a2 = op.stat(join(pb, "moved"))
    assert a2["handle"] == ma["handle"] and a2["parent"] == b["handle"]
    assert op.stat(join(pb, "moved/.."))["handle"] == b["handle"]
    assert op.ls(join(pb, "moved")) == ["f"]
    assert (op.stat(pa)["nlink"], op.stat(pb)["nlink"]) == (2, 3)
    assert op.ls(pa) == [] and op.ls(pb) == ["moved"]
    # And back the way it came.
    op.rename(join(pb, "moved"), join(pa, "back"))
    parent_settles(op, ma["handle"], a["handle"], moved)
    assert op.stat(join(pa, "back/.."))["handle"] == a["handle"]
    assert (op.stat(pa)["nlink"], op.stat(pb)["nlink"]) == (3, 2)
    # The subtree check holds across servers too.
    op.mkdir(join(pa, "back/inner"))
    op.err("EINVAL", "rename", pa, join(pa, "back/inner/x"))


def test_rename_dir_third_server_parent_in_reply(op):
    """The reply of a rename means the moved directory's ".." is updated, as
    sv_rename() promises for same-server renames ("the last intent carries
    the reply, so the caller sees the moved parent")."""
    pa, a, pb, b, m, ma = moved_dir_setup(op, "elsewhere")
    where = [(m, a), (join(pb, "m"), b)]
    # The window is narrow (a few percent of renames hit it): try many times,
    # stopping at the first stale pointer.
    for i in range(400):
        src, dst = where[i % 2], where[(i + 1) % 2]
        op.rename(src[0], dst[0])
        # One round trip to the inode's server, right after the reply.
        got = op.getattr(ma["handle"])["parent"]
        assert got == dst[1]["handle"], "parent pointer stale after rename #%d" % i


def test_rename_file_cross_server(op, cluster3):
    pa, a, pb, b = dir_pair(op)
    f = op.create(join(pa, "f"))
    op.write(join(pa, "f"), 0, 100000)
    v = op.create(join(pb, "v"))
    op.rename(join(pa, "f"), join(pb, "new"))
    s = op.stat(join(pb, "new"))
    assert s["handle"] == f["handle"] and s["nlink"] == 1 and s["size"] == 100000
    op.err("ENOENT", "stat", join(pa, "f"))
    # Over an existing file on the other server: the victim is freed.
    op.rename(join(pb, "new"), join(pa, "g"))
    op.rename(join(pa, "g"), join(pb, "v"))
    assert op.stat(join(pb, "v"))["handle"] == f["handle"]
    op.err("ENOENT", "getattr", v["handle"])
    assert op.read(join(pb, "v"), 99990, 10)["data"] == pattern(99990, 10)
    assert op.ls(pa) == [] and sorted(op.ls(pb)) == ["v"]
    cluster3.cli("mv", join(pb, "v"), join(pa, "cli"))
    assert op.stat(join(pa, "cli"))["handle"] == f["handle"]


# --- readdir --------------------------------------------------------------------------------------


def test_readdir_cursor_stable_under_changes(op):
    op.mkdir("/d")
    orig = ["e%03d" % i for i in range(60)]
    for n in orig:
        op.create(join("/d", n))
    stable = set(orig[0::2])            # never touched
    doomed = list(reversed(orig[1::2]))  # removed along the way, from both ends
    seen, ever = [], set(orig)
    cookie, eof, k = 0, False, 0
    while not eof:
        names, cookie, eof = op.readdir_once("/d", cookie, 7)
        seen += names
        # Between batches: add names, remove names seen and not yet seen,
        # and replace one not seen yet by a rename over it.
        for _ in range(2):
            n = "new%03d" % k
            k += 1
            op.create(join("/d", n))
            ever.add(n)
        for _ in range(2):
            if doomed:
                op.unlink(join("/d", doomed.pop()))
            if doomed:
                op.unlink(join("/d", doomed.pop(0)))
        assert k < 200, "listing does not end"
    assert len(seen) == len(set(seen)), "an entry came twice"
    assert set(seen) <= ever
    assert stable <= set(seen)
    final = op.ls("/d")
    assert len(final) == len(set(final))
    assert set(final) == stable | {"new%03d" % i for i in range(k)}


def test_readdir_batches_and_cookies(op, cluster3):
    op.mkdir("/d")
    names = ["f%04d" % i for i in range(300)]
    for n in names:
        op.create(join("/d", n))
    for batch in (1, 64, 299, 300, 1024):
        r = op.readdir("/d", batch=batch)
        assert r["list"] == names, batch    # creation order
        assert r["eof"] == 1
    # A cookie taken mid-way resumes right after its entry.
    first, cookie, eof = op.readdir_once("/d", 0, 100)
    assert first == names[:100] and not eof
    rest, _, eof = op.readdir_once("/d", cookie, 1024)
    assert rest == names[100:] and eof
    out = cluster3.cli("ls", "/d").stdout.split()
    assert out == sorted(names)
    op.err("ENOTDIR", "readdir", "/d/f0000")
    op.err("ENOENT", "readdir", "/none")


def test_readdirplus_attrs(op):
    op.mkdir("/d")
    d = srv(op.stat("/d")["handle"])
    for i in range(12):
        op.mkdir("/d/sub%02d" % i)
    for i in range(5):
        op.create("/d/f%d" % i)
        op.write("/d/f%d" % i, 0, 1000 * (i + 1))
    op.symlink("/d/f0", "/d/lnk")
    op.mknod("/d/fifo", "fifo", 0o600)
    r = op.readdir("/d", plus=True, batch=5)
    assert r["all_attrs"] == 1
    assert len(r["list"]) == 19 and set(r["attr"]) == set(r["list"])
    remote = 0
    for name, (h, mode, size, nlink) in r["attr"].items():
        s = op.lstat(join("/d", name))
        assert (h, mode, size, nlink) == (s["handle"], s["mode"], s["size"], s["nlink"]), name
        remote += srv(h) != d
    assert remote > 0, "no subdirectory landed on another server"
    assert r["attr"]["f3"][2] == 4000


# --- statfs ---------------------------------------------------------------------------------------


def test_statfs_summed_over_servers(op, cluster3):
    s = op.statfs()
    assert s["bsize"] == 4096 and s["namemax"] == 255
    # Each server's extent store has TEST_STORE_SIZE (1G) of blocks, less
    # its superblock and static area.
    per = (1 << 30) // 4096
    assert 3 * (per - 64) <= s["blocks"] <= 3 * per, s
    assert 0 < s["bavail"] <= s["bfree"] <= s["blocks"]
    assert s["files"] - s["ffree"] == sum(inode_counts(cluster3))
    for i in range(10):
        op.mkdir("/d%d" % i)
    s2 = op.statfs()
    assert s2["files"] - s2["ffree"] == s["files"] - s["ffree"] + 10
    out = cluster3.cli("df").stdout
    assert "orchard:" in out


# --- extended attributes ----------------------------------------------------------------------------


def test_xattrs(op, cluster3):
    op.mkdir("/d", 0o777)
    op.create("/d/f", 0o644)
    op.setxattr("/d/f", "user.a", "one")
    assert op.getxattr("/d/f", "user.a") == b"one"
    op.err("EEXIST", "setxattr", "/d/f", "user.a", "x", "create")
    op.setxattr("/d/f", "user.a", "two", "replace")
    assert op.getxattr("/d/f", "user.a") == b"two"
    op.err("ENODATA", "setxattr", "/d/f", "user.b", "x", "replace")
    op.setxattr("/d/f", "user.b", "", "create")
    assert op.getxattr("/d/f", "user.b") == b""
    big = bytes(range(256)) * 256
    op.setxattr("/d/f", "user.big", big)
    assert op.getxattr("/d/f", "user.big") == big
    assert op.call("getxattr", "/d/f", "user.big", "size")["size"] == 65536
    op.err("E2BIG", "setxattr", "/d/f", "user.huge", "pattern:65537")
    assert sorted(op.listxattr("/d/f")) == ["user.a", "user.b", "user.big"]
    op.removexattr("/d/f", "user.a")
    op.err("ENODATA", "getxattr", "/d/f", "user.a")
    op.err("ENODATA", "removexattr", "/d/f", "user.a")
    assert sorted(op.listxattr("/d/f")) == ["user.b", "user.big"]
    # Namespaces and permissions.
    op.setxattr("/d/f", "trusted.t", "root")
    u1 = op.as_(*U1)
    u1.err("EPERM", "setxattr", "/d/f", "trusted.t2", "x")
    u1.err("EACCES", "setxattr", "/d/f", "user.u", "x")
    assert u1.getxattr("/d/f", "user.b") == b""
    op.err("EOPNOTSUPP", "setxattr", "/d/f", "bogus.x", "x")
    op.chmod("/d/f", 0o600)
    u1.err("EACCES", "getxattr", "/d/f", "user.b")
    # On directories, wherever their inode is.
    for i in range(6):
        p = "/d/s%d" % i
        op.mkdir(p)
        op.setxattr(p, "user.where", str(i))
        assert op.getxattr(p, "user.where") == str(i).encode()
        assert op.listxattr(p) == ["user.where"]
    # Through the CLI, and gone with the inode.
    cluster3.cli("xattr", "set", "/d/f", "user.cli", "hi")
    assert cluster3.cli("xattr", "get", "/d/f", "user.cli").stdout == "hi\n"
    assert "user.cli" in cluster3.cli("xattr", "list", "/d/f").stdout.split()
    h = op.stat("/d/f")["handle"]
    op.unlink("/d/f")
    op.create("/d/f")
    assert op.stat("/d/f")["handle"] != h
    assert op.listxattr("/d/f") == []
    op.err("ENOENT", "getxattr", "/d/nope", "user.a")


# --- error codes and permissions ----------------------------------------------------------------------


def test_error_codes(op):
    op.mkdir("/d")
    op.create("/d/f")
    op.err("ENOENT", "stat", "/nope")
    op.err("ENOENT", "stat", "/d/nope/x")
    op.err("ENOENT", "create", "/nope/f", "644")
    op.err("ENOENT", "unlink", "/d/nope")
    op.err("ENOENT", "rmdir", "/d/nope")
    op.err("EEXIST", "mkdir", "/d", "755")
    op.err("EEXIST", "create", "/d", "644", "excl")
    op.err("ENOTDIR", "stat", "/d/f/x")
    op.err("ENOTDIR", "create", "/d/f/x", "644")
    op.err("ENOTDIR", "mkdir", "/d/f/x", "755")
    op.err("ENOTDIR", "stat", "/d/f/")
    op.err("EISDIR", "unlink", "/d")
    op.err("EISDIR", "truncate", "/d", 0)
    n255, n256 = "a" * 255, "a" * 256
    op.create(join("/d", n255))
    assert op.stat(join("/d", n255))["size"] == 0
    op.mkdir(join("/d", "b" * 255))
    op.err("ENAMETOOLONG", "create", join("/d", n256), "644")
    op.err("ENAMETOOLONG", "mkdir", join("/d", n256), "755")
    op.err("ENAMETOOLONG", "stat", join("/d", n256))
    op.err("ENAMETOOLONG", "lookup", "/d", n256)
    op.err("ENAMETOOLONG", "symlink", "x", join("/d", n256))
    op.err("ENAMETOOLONG", "rename", "/d/f", join("/d", n256))
    op.err("ENAMETOOLONG", "link", "/d/f", join("/d", n256))
    assert sorted(op.ls("/d")) == sorted(["f", n255, "b" * 255])


def test_eacces_private_dir(op):
    """Non-root credentials on a 0700 directory owned by root, checked by the
    servers, including directories whose inode is on another server."""
    op.mkdir("/top", 0o755)
    top = srv(op.stat("/top")["handle"])
    for want in (lambda s: s == top, lambda s: s != top):
        path, _ = mkdir_placed(op, "/top", want, "priv", 0o700)
        op.create(join(path, "f"), 0o644)
        op.mkdir(join(path, "sub"), 0o755)
        u1 = op.as_(*U1)
        u1.err("EACCES", "stat", join(path, "f"))
        u1.err("EACCES", "lookup", path, "f")
        u1.err("EACCES", "create", join(path, "g"), "644")
        u1.err("EACCES", "mkdir", join(path, "g"), "755")
        u1.err("EACCES", "mknod", join(path, "g"), "fifo", "644")
        u1.err("EACCES", "symlink", "x", join(path, "g"))
        u1.err("EACCES", "readdir", path)
        u1.err("EACCES", "unlink", join(path, "f"))
        u1.err("EACCES", "rmdir", join(path, "sub"))
        u1.err("EACCES", "rename", join(path, "f"), "/top/stolen")
        u1.err("EACCES", "access", path, "r")
        u1.access(path, "f")
        assert u1.errname("access", "/top", "rx") is None
        assert u1.errname("access", "/top", "w") == "EACCES"
        # Read but no search permission: listing works, lookups do not.
        op.chmod(path, 0o704)
        assert sorted(u1.ls(path)) == ["f", "sub"]
        u1.err("EACCES", "stat", join(path, "f"))
        # Search but no read: lookups work, listing does not.
        op.chmod(path, 0o701)
        assert u1.stat(join(path, "f"))["size"] == 0
        u1.err("EACCES", "readdir", path)
        u1.err("EACCES", "create", join(path, "g"), "644")
        # Group permissions through a supplementary group.
        op.chown(path, 0, 77)
        op.chmod(path, 0o770)
        g = op.as_(1000, [1000, 77])
        g.create(join(path, "g"), 0o644)
        g.unlink(join(path, "g"))
        u1.err("EACCES", "create", join(path, "g"), "644")
        # Root passes, but needs an x bit to execute.
        op.chmod(join(path, "f"), 0o600)
        assert op.errname("access", join(path, "f"), "rw") is None
        assert op.errname("access", join(path, "f"), "x") == "EACCES"
        op.chmod(join(path, "f"), 0o601)
        assert op.errname("access", join(path, "f"), "x") is None


def test_eperm_chown_by_non_root(op):
    op.mkdir("/d", 0o777)
    op.as_(*U1).create("/d/mine", 0o644)
    u1 = op.as_(*U1)
    u1.err("EPERM", "chown", "/d/mine", 0, -1)
    u1.err("EPERM", "chown", "/d/mine", 2000, 2000)
    u1.err("EPERM", "chown", "/d/mine", -1, 2000)
    op.as_(*U2).err("EPERM", "chown", "/d/mine", -1, 2000)
    op.as_(*U2).err("EPERM", "chmod", "/d/mine", 0o777)
    op.as_(*U2).err("EPERM", "utimens", "/d/mine", 1, 1)
    a = op.stat("/d/mine")
    assert (a["uid"], a["gid"], a["mode"]) == (1000, 1000, 0o100644)


def test_sticky_dir(op):
    op.mkdir("/tmp", 0o777)
    op.chmod("/tmp", 0o1777)
    t = op.stat("/tmp")
    assert t["mode"] == 0o41777
    u1, u2 = op.as_(*U1), op.as_(*U2)
    u1.create("/tmp/f1", 0o666)
    u2.create("/tmp/f2", 0o666)
    u2.err("EPERM", "unlink", "/tmp/f1")
    u2.err("EPERM", "rename", "/tmp/f1", "/tmp/x")
    u2.err("EPERM", "rename", "/tmp/f2", "/tmp/f1")
    assert op.stat("/tmp/f1")["uid"] == 1000
    u1.unlink("/tmp/f1")
    u2.rename("/tmp/f2", "/tmp/f3")
    # The directory's owner and root may remove anyone's entry.
    op.chown("/tmp", 2000, 2000)
    u1.create("/tmp/g", 0o666)
    u2.unlink("/tmp/g")
    u1.create("/tmp/g", 0o666)
    op.unlink("/tmp/g")
    # A non-sticky world-writable directory lets anyone remove.
    op.chmod("/tmp", 0o777)
    u1.unlink("/tmp/f3")


def test_sticky_dir_own_remote_child(op):
    op.mkdir("/tmp", 0o777)
    op.chmod("/tmp", 0o1777)
    t = srv(op.stat("/tmp")["handle"])
    u1 = op.as_(*U1)
    for i in range(30):
        a = u1.mkdir("/tmp/mine%d" % i, 0o755)
        if srv(a["handle"]) != t:
            break
    else:
        raise AssertionError("no directory landed on another server")
    assert a["uid"] == 1000
    op.as_(*U2).err("EPERM", "rmdir", "/tmp/mine%d" % i)
    u1.rename("/tmp/mine%d" % i, "/tmp/renamed")
    u1.rmdir("/tmp/renamed")
    # A hard link in the sticky directory to a file held by another server.
    pa, _ = mkdir_placed(op, "/", lambda s: s != t, "home", 0o777)
    u1.create(join(pa, "f"), 0o644)
    u1.link(join(pa, "f"), "/tmp/lnk")
    op.as_(*U2).err("EPERM", "unlink", "/tmp/lnk")
    op.as_(*U2).err("EPERM", "rename", "/tmp/lnk", "/tmp/lnk2")
    u1.unlink("/tmp/lnk")
    assert op.stat(join(pa, "f"))["nlink"] == 1


def test_sticky_dir_other_users_remote_child(op):
    """The safe side of the sticky rule holds across servers: another user's
    directory stays, whichever server holds its inode."""
    op.mkdir("/tmp", 0o777)
    op.chmod("/tmp", 0o1777)
    u1, u2 = op.as_(*U1), op.as_(*U2)
    for i in range(8):
        u1.mkdir("/tmp/m%d" % i, 0o777)
        u2.err("EPERM", "rmdir", "/tmp/m%d" % i)
        u2.err("EPERM", "rename", "/tmp/m%d" % i, "/tmp/x%d" % i)
        op.rmdir("/tmp/m%d" % i)
