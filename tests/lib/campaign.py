"""The model of the crash campaigns (test_pcut_campaign.py, power cuts;
test_kill_campaign.py, SIGKILLs): a random workload that keeps, for every
file, what a crash may leave of it, and the checks of what is there after
the crash against that model.

The workload runs on any file-system handle with Op's interface
(tests/lib/op.py, orch-op on liborchard) or FuseOp's (below, system calls
on a mounted orchard-mount).  It updates the model before and after each
step, so the model always allows every state a crash could leave:

* a name is MUST (durable: its directory was fsynced after the change),
  MAY (a change of it is not known durable) or GONE;
* a file's data is durable once fsynced; a change of its contents that is
  not known durable (a write past the end without fsync, an overwrite, an
  append or a truncate before its fsync answered) is `pend`, the whole
  contents it makes, and the file then reads its old contents or the new,
  block by block, with the size of one or the other, or the size a short
  write of it left (`pend_sizes`: a write cut short where the next strip's
  server failed returns what it wrote, and the size that much makes is
  the file's even without a crash).

Against a SIGKILL of a server, which loses nothing acknowledged, a change
is durable once the call that made it returned (Workload's acked).

check() walks the tree with orch-op (no cache between it and the servers)
and tallies what it finds; settle() flushes every server and takes what is
there as durable for the next round."""
import errno
import os
import re
import time

from cluster import wait_until
from op import Op, OpError

BLOCK = 4096
MUST, MAY, GONE = "must", "may", "gone"


class File:
    def __init__(self, fid, data):
        self.fid = fid
        self.data = data
        self.handle = None
        self.names = {}       # path -> MUST, MAY or GONE
        self.durable = False  # its data was fsynced
        self.rename = None    # (old, new) while a rename is not known durable
        self.pend = None      # the contents a change not known durable makes
        self.pend_sizes = ()  # other sizes it may leave: ends of short writes
        self.owner = ""       # the tag of the workload that made it

    def live_names(self):
        return [p for p, s in self.names.items() if s != GONE]

    def must_names(self):
        return [p for p, s in self.names.items() if s == MUST]

    def must_exist(self):
        return self.durable and (self.rename is not None or
                                 any(s == MUST for s in self.names.values()))


def parent(path):
    return path.rsplit("/", 1)[0] or "/"


class Workload:
    """Runs random operations (module docstring) until stop is set or one
    fails: a crash makes the failing operation's outcome unknown, and the
    model already allows both."""

    # The power-cut campaign's mix (its seeds replay with it).
    KINDS = (("create", 5), ("rename", 4), ("link", 2), ("unlink", 2), ("extend", 2),
             ("mkdir", 1))

    def __init__(self, rnd, files, dirs, counter, kinds=None, tag="", acked=False):
        """@files and @dirs: the model, which workloads of different @tag may
        share, each running in its own thread: each changes only the files it
        made, with names of its own; @counter ([n], one per tag) numbers
        them.  @acked: a change is durable once the call that made it
        returned (a name once the create, rename, link, unlink or mkdir
        returned; bytes once the write's close or the truncate returned),
        as it is against a SIGKILL of a server, not only once fsynced."""
        self.rnd = rnd
        self.acked = acked
        self.tag = tag
        self.files = files
        self.dirs = dirs
        self.counter = counter
        self.kinds = []
        for name, weight in kinds or self.KINDS:
            self.kinds += [getattr(self, "op_" + name)] * weight
        self.ops = 0
        self.stop = False
        self.error = None     # the OpError that ended the run
        self.crash = None     # anything else that ended it (a test bug)
        self.current = None   # the operation running (for messages)

    def fresh(self, prefix):
        self.counter[0] += 1
        return "%s%s%d" % (prefix, self.tag, self.counter[0])

    def pick_file(self, cond):
        cands = [f for f in list(self.files.values()) if f.owner == self.tag and cond(f)]
        return self.rnd.choice(cands) if cands else None

    def pick_dir(self):
        return self.rnd.choice([p for p, s in list(self.dirs.items()) if s == MUST])

    def new_path(self, prefix):
        """(a directory picked, a fresh name with @prefix in it)."""
        d = self.pick_dir()
        return d, d.rstrip("/") + "/" + self.fresh(prefix)

    def op_create(self, op):
        d, path = self.new_path("f")
        size = self.rnd.choice([1, 100, 4096, 5000, 9000, 13000, 20000])
        f = File(self.fresh(""), self.rnd.randbytes(size))
        f.owner = self.tag
        self.files[f.fid] = f
        f.names[path] = MAY
        f.handle = op.create(path)["handle"]
        if self.acked:
            f.names[path] = MUST
        op.write(path, 0, f.data)
        if self.acked:
            f.durable = True
        op.call("fsync", path)
        f.durable = True
        op.call("fsync", d)
        f.names[path] = MUST

    def op_rename(self, op):
        f = self.pick_file(lambda f: f.durable and f.rename is None and
                           list(f.names.values()).count(MUST) == 1 and
                           len(f.live_names()) == 1)
        if f is None:
            return
        old = f.live_names()[0]
        _, new = self.new_path("r")
        f.names[old] = MAY
        f.names[new] = MAY
        f.rename = (old, new)
        op.rename(old, new)
        if self.acked:
            self._renamed(f)
        op.call("fsync", parent(old))
        op.call("fsync", parent(new))
        self._renamed(f)

    @staticmethod
    def _renamed(f):
        if f.rename:
            old, new = f.rename
            f.names[old] = GONE
            f.names[new] = MUST
            f.rename = None

    def op_link(self, op):
        f = self.pick_file(lambda f: f.durable and f.rename is None and
                           MUST in f.names.values() and len(f.live_names()) < 4)
        if f is None:
            return
        src = f.must_names()[0]
        _, new = self.new_path("l")
        f.names[new] = MAY
        op.link(src, new)
        if self.acked:
            f.names[new] = MUST
        op.call("fsync", parent(new))
        op.call("fsync", src)
        f.names[new] = MUST

    def op_unlink(self, op):
        f = self.pick_file(lambda f: f.durable and f.rename is None and
                           MUST in f.names.values())
        if f is None:
            return
        name = self.rnd.choice(f.must_names())
        f.names[name] = MAY
        op.unlink(name)
        if self.acked:
            f.names[name] = GONE
        op.call("fsync", parent(name))
        f.names[name] = GONE
        rest = f.must_names()
        if rest:
            op.call("fsync", rest[0])

    def _writable(self):
        return self.pick_file(lambda f: f.durable and f.rename is None and
                              f.pend is None and MUST in f.names.values())

    def op_extend(self, op):
        """A write past the end, sometimes past a gap, not fsynced."""
        f = self._writable()
        if f is None:
            return
        path = f.must_names()[0]
        off = len(f.data) + self.rnd.choice([0, 0, 3000, 20000])
        data = self.rnd.randbytes(self.rnd.choice([1, 4096, 9000, 30000]))
        f.pend = f.data + bytes(off - len(f.data)) + data
        self._write(op, f, path, off, data)
        if self.acked:
            f.data, f.pend = f.pend, None

    @staticmethod
    def _write(op, f, path, off, data):
        """op.write, noting in @f the sizes its short writes left."""
        f.pend_sizes = ()
        try:
            op.write(path, off, data)
        finally:
            f.pend_sizes = tuple(getattr(op, "write_ends", ()))

    def _change(self, op, f, path, new, do):
        f.pend, f.pend_sizes = new, ()
        do()
        if self.acked:
            f.data, f.pend = new, None
        op.call("fsync", path)
        f.data = new
        f.pend = None

    def op_overwrite(self, op):
        """Bytes somewhere in the file (perhaps past its end), fsynced."""
        f = self._writable()
        if f is None:
            return
        path = f.must_names()[0]
        off = self.rnd.randint(0, len(f.data))
        data = self.rnd.randbytes(self.rnd.choice([1, 700, 4096, 6000, 15000]))
        old = f.data + bytes(max(0, off - len(f.data)))
        self._change(op, f, path, old[:off] + data + old[off + len(data):],
                     lambda: self._write(op, f, path, off, data))

    def op_append(self, op):
        """Bytes at the end, fsynced."""
        f = self._writable()
        if f is None:
            return
        path = f.must_names()[0]
        data = self.rnd.randbytes(self.rnd.choice([1, 3000, 4096, 10000, 40000]))
        self._change(op, f, path, f.data + data,
                     lambda: self._write(op, f, path, len(f.data), data))

    def op_truncate(self, op):
        """A truncate down or up, fsynced."""
        f = self._writable()
        if f is None:
            return
        path = f.must_names()[0]
        n = len(f.data)
        size = self.rnd.choice([0, n // 2, max(0, n - 1), n + 1, n + 9000])
        self._change(op, f, path, f.data[:size] + bytes(max(0, size - n)),
                     lambda: op.truncate(path, size))

    def op_mkdir(self, op):
        path = "/" + self.fresh("d")
        self.dirs[path] = MAY
        op.mkdir(path)
        if self.acked:
            self.dirs[path] = MUST
        op.call("fsync", "/")
        op.call("fsync", path)
        self.dirs[path] = MUST

    def run(self, op):
        try:
            while not self.stop:
                kind = self.rnd.choice(self.kinds)
                self.current = kind.__name__
                kind(op)
                self.ops += 1
        except OpError as e:
            self.error = e   # the crash: the operation's outcome is unknown
        except BaseException as e:  # noqa: B902 (the caller reports it)
            self.crash = e


class FuseOp:
    """Op's interface on a mounted file system: each call is the system
    calls a program would make (open, pwrite, fsync, close ...), timed; an
    OSError becomes OpError with the errno's name.  longest is the slowest
    system call seen, (seconds, description)."""

    def __init__(self, mnt):
        self.mnt = str(mnt).rstrip("/")
        self.longest = (0.0, None)
        self.calls = 0

    def _sys(self, what, fn, *args):
        t0 = time.monotonic()
        err = None
        try:
            return fn(*args)
        except OSError as e:
            err = errno.errorcode.get(e.errno, str(e.errno))
            raise OpError(err, "%s: %s" % (what, e)) from e
        finally:
            dt = time.monotonic() - t0
            self.calls += 1
            if dt > self.longest[0]:
                self.longest = (dt, what + (" (%s)" % err if err else ""))

    def _p(self, path):
        return self.mnt + path

    def _close(self, fd, path):
        self._sys("close " + path, os.close, fd)

    def create(self, path):
        fd = self._sys("open O_CREAT|O_EXCL " + path, os.open, self._p(path),
                       os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            st = self._sys("fstat " + path, os.fstat, fd)
        finally:
            self._close(fd, path)
        return {"handle": st.st_ino}

    def write(self, path, off, data):
        fd = self._sys("open O_WRONLY " + path, os.open, self._p(path), os.O_WRONLY)
        self.write_ends = []   # where short writes ended (Workload._write)
        try:
            done = 0
            while done < len(data):
                done += self._sys("pwrite %s %d+%d" % (path, off + done, len(data) - done),
                                  os.pwrite, fd, data[done:], off + done)
                if done < len(data):
                    self.write_ends.append(off + done)
        finally:
            self._close(fd, path)
        return {}

    def call(self, name, path):
        assert name == "fsync", name
        fd = self._sys("open O_RDONLY " + path, os.open, self._p(path), os.O_RDONLY)
        try:
            self._sys("fsync " + path, os.fsync, fd)
        finally:
            self._close(fd, path)
        return {}

    def truncate(self, path, size):
        self._sys("truncate %s %d" % (path, size), os.truncate, self._p(path), size)
        return {}

    def rename(self, old, new):
        self._sys("rename %s %s" % (old, new), os.rename, self._p(old), self._p(new))
        return {}

    def link(self, old, new):
        self._sys("link %s %s" % (old, new), os.link, self._p(old), self._p(new))
        return {}

    def unlink(self, path):
        self._sys("unlink " + path, os.unlink, self._p(path))
        return {}

    def mkdir(self, path):
        self._sys("mkdir " + path, os.mkdir, self._p(path), 0o755)
        return {}


def read_all(op, path, n):
    """Up to @n bytes of @path, in reads orch-op prints whole (64 KiB)."""
    out = b""
    while len(out) < n:
        got = op.read(path, len(out), min(n - len(out), 65536))["data"]
        out += got
        if not got:
            break
    return out


def walk(op):
    """{path: (handle, type, nlink)} of every name, each looked up."""
    out = {}
    todo = ["/"]
    while todo:
        d = todo.pop()
        for name in op.readdir(d)["list"]:
            path = d.rstrip("/") + "/" + name
            try:
                st = op.lstat(path)
            except OpError as e:
                raise AssertionError("entry %s names nothing: %s" % (path, e))
            out[path] = (st["handle"], st["type"], st["nlink"])
            if st["type"] == "dir":
                todo.append(path)
    return out


def new_tally():
    """The figures check() adds to: files whose bytes it verified (each
    round's count, and the set of distinct ones), names it checked, and
    what it found: lost (an fsynced file, name or directory that is not
    there), corrupted (bytes a file may not hold) and other
    (names nobody made, link counts, dead handles)."""
    return {"files": 0, "distinct": set(), "names": 0, "lost": 0, "corrupted": 0,
            "other": 0}


def describe_block(got, old, new):
    """Which bytes of block @got are @old's, @new's, zeros or none of them,
    as runs ("old 0-1023, new 1024-4095"): what a torn or stray write left."""
    runs, start, last = [], 0, None
    for i, c in enumerate(got):
        kind = ("old" if c == old[i] else "new" if c == new[i] else
                "zero" if c == 0 else "other")
        if kind != last and last is not None:
            runs.append("%s %d-%d" % (last, start, i - 1))
            start = i
        last = kind
    if last is not None:
        runs.append("%s %d-%d" % (last, start, len(got) - 1))
    return ", ".join(runs[:12]) + (" ..." if len(runs) > 12 else "")


def check_contents(f, got):
    """None if @got is what file @f may hold (module docstring), else why
    not, as ("lost" or "corrupted", message)."""
    if f.pend is not None:
        old, new = f.data, f.pend
        if len(got) not in (len(old), len(new)) + f.pend_sizes:
            return ("corrupted", "file %s changed from %d to %d bytes has %d" % (
                f.fid, len(old), len(new), len(got)))
        n = max(len(old), len(new))
        oldp, newp = old + bytes(n - len(old)), new + bytes(n - len(new))
        for off in range(0, len(got), BLOCK):
            b = got[off:off + BLOCK]
            if b != oldp[off:off + len(b)] and b != newp[off:off + len(b)]:
                return ("corrupted", "file %s reads neither its old nor its new bytes"
                        " at %d (a dead writer's bytes?): sizes old %d new %d got %d; %s"
                        % (f.fid, off, len(old), len(new), len(got),
                           describe_block(b, oldp[off:off + len(b)], newp[off:off + len(b)])))
        return None
    if f.durable:
        if got != f.data:
            kind = "lost" if len(got) < len(f.data) else "corrupted"
            first = next((i for i in range(min(len(got), len(f.data)))
                          if got[i] != f.data[i]), min(len(got), len(f.data)))
            return (kind, "fsynced file %s reads %d bytes, not its %d (first difference"
                    " at %d)" % (f.fid, len(got), len(f.data), first))
        return None
    if len(got) > len(f.data):
        return ("corrupted", "file %s grew" % f.fid)
    for off in range(0, len(got), BLOCK):
        b = got[off:off + BLOCK]
        if b != f.data[off:off + len(b)] and b != bytes(len(b)):
            return ("corrupted", "garbage in unsynced file %s at %d" % (f.fid, off))
    return None


def check(op, files, dirs, gone_handles, tally, extra=("/sync",)):
    """Checks the tree against the model, adding to @tally; fails with every
    finding at once.  @extra: names the test made outside the model.
    Returns the tree."""
    tree = walk(op)
    found = []

    def finding(kind, msg):
        tally[kind] += 1
        found.append("%s: %s" % (kind, msg))

    by_handle = {}
    for path, (h, typ, _) in tree.items():
        if typ == "dir":
            if dirs.get(path) not in (MUST, MAY):
                finding("other", "directory %s should not exist" % path)
            continue
        by_handle.setdefault(h, []).append(path)
    for path, s in dirs.items():
        if s == MUST and path != "/" and path not in tree:
            finding("lost", "fsynced directory %s lost" % path)
    known = set()
    for f in files.values():
        if f.handle is None:
            # Its create never answered: the name, if there, tells its handle.
            for p in f.live_names():
                if p in tree:
                    f.handle = tree[p][0]
        if f.handle is None:
            continue
        known.add(f.handle)
        present = sorted(by_handle.get(f.handle, []))
        tally["names"] += len(f.names)
        for p in present:
            if f.names.get(p) not in (MUST, MAY):
                finding("other", "file %s (handle %#x) has a name it should not: %s"
                        " (model %s)" % (f.fid, f.handle, p, f.names))
        for p, s in f.names.items():
            if s == MUST and p not in present:
                finding("lost", "file %s lost its name %s (there: %s)" % (f.fid, p, present))
        if f.rename and f.durable:
            both = [p for p in f.rename if p in present]
            if len(both) != 1:
                finding("lost" if not both else "other",
                        "file %s renamed %s -> %s has names %s" % (
                            f.fid, f.rename[0], f.rename[1], both))
        if f.must_exist() and not present:
            finding("lost", "fsynced file %s lost every name (model %s)" % (f.fid, f.names))
        if not present:
            continue
        nlink = tree[present[0]][2]
        if nlink != len(present):
            finding("other", "file %s: nlink %d, names %s" % (f.fid, nlink, present))
        n = max(len(f.data), len(f.pend or b""))
        bad = check_contents(f, read_all(op, present[0], n + BLOCK))
        if bad:
            finding(bad[0], "%s (%s)" % (bad[1], present[0]))
        elif f.durable:
            tally["files"] += 1
            tally["distinct"].add(f.fid)
    for h, paths in by_handle.items():
        if h not in known and not set(paths) <= set(extra):
            finding("other", "names %s of an unknown file %#x" % (paths, h))
        if h in gone_handles:
            finding("other", "a dead file's handle %#x is back: %s" % (h, paths))
    assert not found, "%d findings:\n  %s" % (len(found), "\n  ".join(found))
    return tree


def settle(op, files, dirs, tree, gone_handles, sync="/sync"):
    """Flushes every server (an fsync of @sync, a file striped over all of
    them); what is there is now durable."""
    op.call("fsync", sync)
    by_handle = {}
    for path, (h, typ, _) in tree.items():
        by_handle.setdefault(h, []).append(path)
    for path in list(dirs):
        if path != "/" and path not in tree:
            del dirs[path]
        else:
            dirs[path] = MUST
    for fid in list(files):
        f = files[fid]
        present = by_handle.get(f.handle, []) if f.handle is not None else []
        if not present:
            if f.handle is not None:
                gone_handles.add(f.handle)
            del files[fid]
            continue
        f.names = {p: (MUST if p in present else GONE) for p in f.names}
        f.rename = None
        if not f.durable or f.pend is not None:
            n = max(len(f.data), len(f.pend or b""))
            f.data = read_all(op, present[0], n + BLOCK)
            f.durable = True
            f.pend = None


FINDING = re.compile(r"^(\S+): ([A-Z]\d+) ", re.M)


def scrub_clean(c, timeout=30, dead_bytes_grace=None, tally=None):
    """Polls `scrub --all --data` until it exits 0, allowing the servers'
    sweeps to finish; returns the seconds it took.

    With @dead_bytes_grace (seconds): N7 findings (bytes past a file's size
    that no writer can publish) that are all the scrub finds for that long
    are cut with `scrub --reclaim`, counted in @tally["dead_bytes"], and
    the polling goes on.  A SIGKILLed inode server's restart cuts what lies
    past the size, but a write a live mount sent before the kill can land
    on a data server after that cut; when the mount's close then fails, no
    writer will publish those bytes (docs/DESIGN.md, "Writers and bytes
    past the size": the next writer's registration, a truncate up, or
    scrub --reclaim cuts them; none can make them readable)."""
    last = []
    only_n7 = []
    t0 = time.monotonic()

    def clean():
        p = c.cli("scrub", "--all", "--data", check=False, timeout=300)
        out = p.stdout + p.stderr
        last[:] = [out]
        if p.returncode == 0:
            return True
        codes = {m.group(2) for m in FINDING.finditer(p.stdout)}
        if dead_bytes_grace is None or codes != {"N7"}:
            only_n7[:] = []
            return False
        if not only_n7:
            only_n7[:] = [time.monotonic()]
        elif time.monotonic() - only_n7[0] >= dead_bytes_grace:
            r = c.cli("scrub", "--all", "--data", "--reclaim", check=False, timeout=300)
            tally["dead_bytes"] = tally.get("dead_bytes", 0) + sum(
                1 for m in FINDING.finditer(r.stdout) if m.group(2) == "N7")
            only_n7[:] = []
        return False
    try:
        wait_until(clean, timeout, 0.5, "scrub to be clean")
    except AssertionError:
        raise AssertionError("scrub after the crash: " + last[0])
    return time.monotonic() - t0


def restart_victims(c, victims, start):
    """The crashed servers @victims of cluster @c: each store passes
    `store-check --data` as the crash left it, then each is started with
    @start(name) (not waiting) and waited for."""
    for v in victims:
        c.store_check(v)
    for v in victims:
        start(v)
    for v in victims:
        c.wait_up(v)


def verify_round(c, files, dirs, gone_handles, tally, what, also=None, scrub_timeout=30,
                 dead_bytes_grace=None):
    """A round's end on cluster @c, its servers back up: waits for every
    intent to finish, checks the tree (failing with @what, the crash, in
    the message), runs @also(op, tree) if given, polls the scrub until it
    is clean (@dead_bytes_grace: scrub_clean) and settles.  Returns the
    seconds the scrub took."""
    wait_until(lambda: all(c.intents(n) == 0 for n in c.names), 60,
               what="every intent to finish")
    with Op(c) as op:
        try:
            tree = check(op, files, dirs, gone_handles, tally)
        except AssertionError as e:
            raise AssertionError("%s: %s" % (what, e))
        if also:
            also(op, tree)
        took = scrub_clean(c, scrub_timeout, dead_bytes_grace, tally)
        settle(op, files, dirs, tree, gone_handles)
    return took
