"""The power-cut campaign: cuts of random servers, one or two at a time,
during a workload of creates with fsynced data, renames across servers,
links, unlinks and mkdirs, each followed by fsyncs of the parent
directories (and of the file, whose inode holds the link count), and of
writes that extend a file, sometimes past a gap, without any fsync.

After each cut the victims' stores pass `store-check --data` as the cut
left them; then, with the victims restarted and every intent finished:

* every fsynced file has its data, and every name the model says must be
  there is there;
* a file being renamed (fsynced before) has exactly one of its two names;
* no name is there that the model does not allow, no entry names nothing,
  and each file's link count is the number of its names;
* a file that was never fsynced, if it is there, holds its data or zeros,
  block by block;
* a file extended without fsync keeps its fsynced bytes, and has its old
  size or its new one; past the old size it holds the new data or zeros,
  block by block, and the gap before the new data reads zeros (a cut that
  took the size but left the strips must never let them be read: the
  bytes a dead writer left past the size);
* `scrub --all --data` is clean (given a moment for the servers' sweeps of
  objects whose inode the cut took).

Then every server is flushed and the model takes what is there as durable,
and the next round runs.  ORCH_CAMPAIGN_CUTS sets the number of rounds
(20 in the default suite, `make soak` runs 200) and ORCH_CAMPAIGN_SEED the
seed; the summary line at the end gives the figures."""
import os
import random
import signal
import threading

from cluster import Cluster, wait_until
from op import Op, OpError

CUTS = int(os.environ.get("ORCH_CAMPAIGN_CUTS", "20"))
STRIP = 4096
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
        self.ext = None       # (offset, bytes) of a write past the end, not fsynced

    def extended(self):
        """The contents if the unsynced extension is all there."""
        off, data = self.ext
        return self.data + bytes(off - len(self.data)) + data

    def live_names(self):
        return [p for p, s in self.names.items() if s != GONE]

    def must_exist(self):
        return self.durable and (self.rename is not None or
                                 any(s == MUST for s in self.names.values()))


def parent(path):
    return path.rsplit("/", 1)[0] or "/"


class Workload:
    """Runs random operations, updating the model before and after each step
    so that the model always allows every state a cut could leave."""

    def __init__(self, rnd, files, dirs, counter):
        self.rnd = rnd
        self.files = files
        self.dirs = dirs
        self.counter = counter
        self.ops = 0
        self.stop = False
        self.error = None
        self.current = None   # the operation running (for messages)

    def fresh(self, prefix):
        self.counter[0] += 1
        return "%s%d" % (prefix, self.counter[0])

    def pick_file(self, cond):
        cands = [f for f in self.files.values() if cond(f)]
        return self.rnd.choice(cands) if cands else None

    def op_create(self, op):
        d = self.rnd.choice([p for p, s in self.dirs.items() if s == MUST])
        path = d.rstrip("/") + "/" + self.fresh("f")
        size = self.rnd.choice([1, 100, 4096, 5000, 9000, 13000, 20000])
        f = File(self.fresh(""), self.rnd.randbytes(size))
        self.files[f.fid] = f
        f.names[path] = MAY
        f.handle = op.create(path)["handle"]
        op.write(path, 0, f.data)
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
        d = self.rnd.choice([p for p, s in self.dirs.items() if s == MUST])
        new = d.rstrip("/") + "/" + self.fresh("r")
        f.names[old] = MAY
        f.names[new] = MAY
        f.rename = (old, new)
        op.rename(old, new)
        op.call("fsync", parent(old))
        op.call("fsync", parent(new))
        f.names[old] = GONE
        f.names[new] = MUST
        f.rename = None

    def op_link(self, op):
        f = self.pick_file(lambda f: f.durable and f.rename is None and
                           MUST in f.names.values() and len(f.live_names()) < 4)
        if f is None:
            return
        src = [p for p, s in f.names.items() if s == MUST][0]
        d = self.rnd.choice([p for p, s in self.dirs.items() if s == MUST])
        new = d.rstrip("/") + "/" + self.fresh("l")
        f.names[new] = MAY
        op.link(src, new)
        op.call("fsync", parent(new))
        op.call("fsync", src)
        f.names[new] = MUST

    def op_unlink(self, op):
        f = self.pick_file(lambda f: f.durable and f.rename is None and
                           MUST in f.names.values())
        if f is None:
            return
        name = self.rnd.choice([p for p, s in f.names.items() if s == MUST])
        f.names[name] = MAY
        op.unlink(name)
        op.call("fsync", parent(name))
        f.names[name] = GONE
        rest = [p for p, s in f.names.items() if s == MUST]
        if rest:
            op.call("fsync", rest[0])

    def op_extend(self, op):
        f = self.pick_file(lambda f: f.durable and f.rename is None and f.ext is None and
                           MUST in f.names.values())
        if f is None:
            return
        path = [p for p, s in f.names.items() if s == MUST][0]
        off = len(f.data) + self.rnd.choice([0, 0, 3000, 20000])
        f.ext = (off, self.rnd.randbytes(self.rnd.choice([1, 4096, 9000, 30000])))
        op.write(path, off, f.ext[1])

    def op_mkdir(self, op):
        path = "/" + self.fresh("d")
        self.dirs[path] = MAY
        op.mkdir(path)
        op.call("fsync", "/")
        op.call("fsync", path)
        self.dirs[path] = MUST

    def run(self, op):
        kinds = ([self.op_create] * 5 + [self.op_rename] * 4 + [self.op_link] * 2 +
                 [self.op_unlink] * 2 + [self.op_extend] * 2 + [self.op_mkdir])
        try:
            while not self.stop:
                kind = self.rnd.choice(kinds)
                self.current = kind.__name__
                kind(op)
                self.ops += 1
        except OpError as e:
            self.error = e   # the cut: the operation's outcome is unknown



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


def check(op, files, dirs, gone_handles, tally):
    """The round's checks (module docstring); returns the tree."""
    tree = walk(op)
    by_handle = {}
    for path, (h, typ, _) in tree.items():
        if typ == "dir":
            assert dirs.get(path) in (MUST, MAY), "directory %s should not exist" % path
            continue
        by_handle.setdefault(h, []).append(path)
    for path, s in dirs.items():
        if s == MUST and path != "/":
            assert path in tree, "fsynced directory %s lost" % path
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
            assert f.names.get(p) in (MUST, MAY), \
                "file %s (handle %#x) has a name it should not: %s (model %s)" % (
                    f.fid, f.handle, p, f.names)
        for p, s in f.names.items():
            if s == MUST:
                assert p in present, "file %s lost its name %s (there: %s)" % (
                    f.fid, p, present)
        if f.rename and f.durable:
            both = [p for p in f.rename if p in present]
            assert len(both) == 1, "file %s renamed %s -> %s has names %s" % (
                f.fid, f.rename[0], f.rename[1], both)
        if f.must_exist():
            assert present, "fsynced file %s lost every name (model %s)" % (f.fid, f.names)
        if not present:
            continue
        nlink = tree[present[0]][2]
        assert nlink == len(present), "file %s: nlink %d, names %s" % (f.fid, nlink, present)
        full = f.extended() if f.ext else f.data
        got = read_all(op, present[0], len(full) + BLOCK)
        if f.ext:
            old = len(f.data)
            assert got[:old] == f.data, "fsynced file %s (%s) lost its data" % (
                f.fid, present[0])
            assert len(got) in (old, len(full)), \
                "file %s extended from %d to %d has size %d" % (f.fid, old, len(full),
                                                                len(got))
            for off in range(old // BLOCK * BLOCK, len(got), BLOCK):
                lo, hi = max(off, old), min(off + BLOCK, len(got))
                assert got[lo:hi] == full[lo:hi] or got[lo:hi] == bytes(hi - lo), \
                    "garbage past the fsynced end of %s at %d (a dead writer's bytes?)" % (
                        f.fid, lo)
            tally["files"] += 1
        elif f.durable:
            assert got == f.data, "fsynced file %s (%s) reads %d bytes, not its %d" % (
                f.fid, present[0], len(got), len(f.data))
            tally["files"] += 1
        else:
            assert len(got) <= len(f.data), "file %s grew" % f.fid
            for off in range(0, len(got), BLOCK):
                b = got[off:off + BLOCK]
                assert b == f.data[off:off + len(b)] or b == bytes(len(b)), \
                    "garbage in unsynced file %s at %d" % (f.fid, off)
    for h, paths in by_handle.items():
        assert h in known or paths == ["/sync"], "names %s of an unknown file %#x" % (paths, h)
        assert h not in gone_handles, "a dead file's handle %#x is back: %s" % (h, paths)
    return tree


def settle(op, files, dirs, tree, gone_handles):
    """Flushes every server; what is there is now durable."""
    op.call("fsync", "/sync")   # striped over every server: flushes them all
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
        if not f.durable or f.ext:
            full = f.extended() if f.ext else f.data
            f.data = read_all(op, present[0], len(full) + BLOCK)
            f.durable = True
            f.ext = None


def scrub_clean(c):
    """scrub --all --data exits 0, allowing the servers' sweeps to finish."""
    last = []

    def clean():
        p = c.cli("scrub", "--all", "--data", check=False, timeout=300)
        last[:] = [p.stdout + p.stderr]
        return p.returncode == 0
    try:
        wait_until(clean, 30, 0.5, "scrub to be clean")
    except AssertionError:
        raise AssertionError("scrub after the cut: " + last[0])


def test_power_cut_campaign(tmp_path):
    rnd = random.Random(int(os.environ.get("ORCH_CAMPAIGN_SEED", "16")))
    c = Cluster(tmp_path / "c", nservers=3, strip_size=STRIP)
    files, dirs, gone_handles = {}, {"/": MUST}, set()
    counter = [0]
    tally = {"cuts": 0, "files": 0, "names": 0, "ops": 0}
    try:
        for n in c.names:
            c.start_pcut(n, wait=False)
        for n in c.names:
            c.wait_up(n)
        with Op(c) as op:
            op.create("/sync")
            op.write("/sync", 0, bytes(3 * STRIP))
            for _ in range(3):
                Workload(rnd, files, dirs, counter).op_mkdir(op)
        for cut in range(CUTS):
            victims = rnd.sample(c.names, 2 if rnd.random() < 0.2 else 1)
            w = Workload(rnd, files, dirs, counter)
            op = Op(c)
            t = threading.Thread(target=w.run, args=(op,))
            t.start()
            try:
                at = rnd.randint(1, 25)
                wait_until(lambda: w.ops >= at or not t.is_alive(), 60,
                           what="the workload to run %d operations" % at)
                assert t.is_alive(), "the workload stopped before the cut: %s" % w.error
                w.stop = True
                for v in victims:
                    c.procs[v].send_signal(signal.SIGUSR2)
                for v in victims:
                    c.wait_power_cut(v)
                    assert "power cut" in c.log_tail(v)
                for v in victims:
                    c.store_check(v)
                for v in victims:
                    c.start_pcut(v, wait=False)
                for v in victims:
                    c.wait_up(v)
                t.join(120)
                assert not t.is_alive(), "an operation hangs after the cut"
            finally:
                w.stop = True
                t.join(120)
                op.close()
            tally["cuts"] += len(victims)
            tally["ops"] += w.ops
            wait_until(lambda: all(c.intents(n) == 0 for n in c.names), 60,
                       what="every intent to finish")
            with Op(c) as vop:
                try:
                    tree = check(vop, files, dirs, gone_handles, tally)
                except AssertionError as e:
                    raise AssertionError("round %d, cut %s during %s (%s): %s" % (
                        cut, victims, w.current, w.error, e))
                scrub_clean(c)
                settle(vop, files, dirs, tree, gone_handles)
        c.stop_all()
        c.store_check_all()
        print("\npower-cut campaign: cuts=%d rounds=%d operations=%d fsynced files verified=%d"
              " names checked=%d findings=0" % (tally["cuts"], CUTS, tally["ops"],
                                               tally["files"], tally["names"]))
    finally:
        c.stop_all(check_logs=False)
