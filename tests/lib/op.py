"""A Python handle on build/tests/orch-op (tests/tools/orch-op.c).

One orch-op process per Op object, kept open: every call writes one command
line and reads its one result line.  Results are dicts ("ok key=value ...",
numbers converted, "mode" octal) or OpError with the errno name:

    with Op(cluster) as op:
        a = op.stat("/d/f")                 # {'handle': ..., 'size': 0, ...}
        op.mkdir("/d2", 0o700)
        op.err("ENOENT", "stat", "/nope")   # asserts the error
        op.as_(1000, [1000]).create("/d2/x", 0o644)   # -> OpError EACCES
"""
import os
import subprocess

from cluster import BUILDDIR

ORCH_OP = os.path.join(BUILDDIR, "tests", "orch-op")


class OpError(Exception):
    def __init__(self, errname, line):
        super().__init__("%s (%s)" % (errname, line))
        self.errname = errname


def _value(key, v):
    if key == "mode":
        return int(v, 8)
    if key in ("hex", "sha256", "names", "attrs", "target", "type"):
        return v
    try:
        return int(v)
    except ValueError:
        return v


def parse(line):
    """Parses an "ok ..." line into a dict; raises OpError for "err X"."""
    words = line.split(" ")
    if words[0] == "err":
        raise OpError(words[1], line)
    assert words[0] == "ok", "orch-op said: %r" % line
    out = {}
    for w in words[1:]:
        if not w:
            continue
        k, _, v = w.partition("=")
        out[k] = _value(k, v)
    return out


class Op:
    def __init__(self, cluster, timeout=60):
        assert os.path.exists(ORCH_OP), "build it: make %s" % ORCH_OP
        self.cluster = cluster
        self.timeout = timeout
        # stderr to a file, not a pipe: nobody drains it while commands run.
        self.errpath = self._errpath(cluster)
        with open(self.errpath, "w") as err:
            self.p = subprocess.Popen([ORCH_OP, "-c", cluster.conf], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=err,
                                      text=True, bufsize=1)
        self.prefix = ""

    @staticmethod
    def _errpath(cluster):
        n = 0
        while os.path.exists(os.path.join(cluster.dir, "orch-op.%d.err" % n)):
            n += 1
        return os.path.join(cluster.dir, "orch-op.%d.err" % n)

    def stderr_text(self):
        try:
            with open(self.errpath) as f:
                return f.read()
        except OSError:
            return ""

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(self.timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                raise AssertionError("orch-op did not exit")
        self.p.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- raw ----------------------------------------------------------------
    def raw(self, line):
        """Sends one command line, returns the result line (no parsing)."""
        assert "\n" not in line
        assert self.p.poll() is None, "orch-op exited: %s" % self.stderr_text()
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        out = self.p.stdout.readline()
        if not out:
            raise AssertionError("orch-op died on %r (rc %s): %s" % (
                line, self.p.wait(self.timeout), self.stderr_text()))
        return out.rstrip("\n")

    def call(self, *args):
        """Runs a command; returns its dict, raises OpError on "err"."""
        line = self.prefix + " ".join(str(a) for a in args)
        r = self.raw(line)
        if r == "err EUSAGE":
            raise AssertionError("orch-op cannot parse %r" % line)
        return parse(r)

    def err(self, errname, *args):
        """Asserts that the command fails with errname."""
        try:
            r = self.call(*args)
        except OpError as e:
            assert e.errname == errname, "%s: expected %s, got %s" % (
                " ".join(map(str, args)), errname, e.errname)
            return
        raise AssertionError("%s: expected %s, got ok %r" % (" ".join(map(str, args)),
                                                           errname, r))

    def errname(self, *args):
        """The error name of a command, or None if it succeeded."""
        try:
            self.call(*args)
        except OpError as e:
            return e.errname
        return None

    def as_(self, uid, gids):
        """A view of this process running every command as uid/gids."""
        v = _AsView(self, "as %d %s " % (uid, ",".join(str(g) for g in gids)))
        return v

    # --- commands -----------------------------------------------------------
    def stat(self, path):
        return self.call("stat", path)

    def lstat(self, path):
        return self.call("lstat", path)

    def getattr(self, handle):
        return self.call("getattr", handle)

    def exists(self, path):
        return self.errname("lstat", path) is None

    def create(self, path, mode=0o644, excl=False):
        return self.call("create", path, "%o" % mode, *(["excl"] if excl else []))

    def mkdir(self, path, mode=0o755):
        return self.call("mkdir", path, "%o" % mode)

    def mknod(self, path, kind, mode=0o644, major=None, minor=None):
        extra = [major, minor] if major is not None else []
        return self.call("mknod", path, kind, "%o" % mode, *extra)

    def symlink(self, target, path):
        return self.call("symlink", target, path)

    def readlink(self, path):
        return self.call("readlink", path)["target"]

    def link(self, old, new):
        return self.call("link", old, new)

    def unlink(self, path):
        return self.call("unlink", path)

    def rmdir(self, path):
        return self.call("rmdir", path)

    def rename(self, old, new, flag=None):
        return self.call("rename", old, new, *([flag] if flag else []))

    def chmod(self, path, mode):
        return self.call("chmod", path, "%o" % mode)

    def chown(self, path, uid, gid):
        return self.call("chown", path, uid, gid)

    def truncate(self, path, size):
        return self.call("truncate", path, size)

    def utimens(self, path, atime, mtime):
        return self.call("utimens", path, atime, mtime)

    def readdir(self, path, plus=False, batch=None):
        """All names (server order) and, with plus, {name: (handle, mode, size, nlink)}."""
        args = ["readdir", path] + (["plus"] if plus else [])
        if batch:
            args += ["batch", batch]
        r = self.call(*args)
        r["list"] = r["names"].split(",") if r["names"] else []
        if plus:
            r["attr"] = {}
            for item in (r["attrs"].split(",") if r["attrs"] else []):
                name, h, mode, size, nlink = item.split(":")
                r["attr"][name] = (int(h), int(mode, 8), int(size), int(nlink))
        return r

    def readdir_once(self, path, cookie, batch, plus=False):
        """One batch from cookie: (names, next cookie, eof)."""
        r = self.call("readdir", path, "once", "cookie", cookie, "batch", batch,
                      *(["plus"] if plus else []))
        names = r["names"].split(",") if r["names"] else []
        return names, r["cookie"], bool(r["eof"])

    def ls(self, path):
        return self.readdir(path)["list"]

    def setxattr(self, path, name, value, flag=None):
        v = "hex:" + (value.encode() if isinstance(value, str) else value).hex()
        return self.call("setxattr", path, name, v, *([flag] if flag else []))

    def getxattr(self, path, name):
        return bytes.fromhex(self.call("getxattr", path, name)["hex"])

    def listxattr(self, path):
        r = self.call("listxattr", path)
        return r["names"].split(",") if r["names"] else []

    def removexattr(self, path, name):
        return self.call("removexattr", path, name)

    def access(self, path, mask):
        return self.call("access", path, mask or "f")

    def statfs(self):
        return self.call("statfs")

    def write(self, path, off, data):
        if isinstance(data, int):
            return self.call("write", path, off, "pattern:%d" % data)
        return self.call("write", path, off, "hex:" + data.hex())

    def read(self, path, off, length):
        r = self.call("read", path, off, length)
        if "hex" in r:
            r["data"] = bytes.fromhex(r["hex"])
        return r


def pattern(off, n):
    """The bytes orch-op's "pattern:N" writes at file offset off."""
    return bytes((off + i) % 251 for i in range(n))


class _AsView:
    """Op with a credential prefix on every line (shares the process)."""

    def __init__(self, op, prefix):
        self._op = op
        self._prefix = prefix

    def __getattr__(self, name):
        attr = getattr(Op, name)

        def bound(*args, **kw):
            saved = self._op.prefix
            self._op.prefix = self._prefix
            try:
                return attr(self._op, *args, **kw)
            finally:
                self._op.prefix = saved
        return bound
