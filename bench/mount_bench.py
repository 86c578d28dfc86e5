#!/usr/bin/env python3
"""Benchmark of the mount next to a local directory and libfuse's
passthrough_ll example, in one run, on one disk.

    /usr/bin/python3 bench/mount_bench.py [--dir DIR] [--files N] [--small N]
        [--big-mib M] [--skip-build] [--timeouts 0,50,1000]
    quick (about a minute):
    /usr/bin/python3 bench/mount_bench.py --files 2000 --small 1000 --big-mib 128 --skip-build

Targets: (a) a local directory; (b) passthrough_ll, compiled here from
/usr/share/doc/libfuse3-dev/examples into the work directory, run with
-o source=BACKING,timeout=T (cache=auto, its default: no writeback, no
keep_cache); (c) orchard-mount on a fresh 2-server `orchard local up`
cluster with dcache_timeout_ms=T,getattr_timeout_ms=T,coherent=off; (d) the
same in coherent mode (the default, once, at T = 50 ms or the first T given), where
the kernel keeps what the servers lease to the lease's end; (e) with
`--targets ...,rep`, (d) on replica groups: SERVERS groups of REPLICAS
members (`--servers 3 --replicas 3`: 3 groups of 3 against (d) on 3
servers), whose ratio to (d) is reported (bench/failover_bench.py times
their failovers).  passthrough_ll
and Orchard run once per timeout T.  Everything (the local directory, the
passthrough backing directory, the servers' data) lives under one work
directory: --dir, default a fresh directory in /var/tmp.  Needs root (it
drops the page cache before the big read) and /dev/fuse.

Phases, each timed alone after an untimed sync:
  metadata: create N empty files in one directory, stat them all (twice),
            `ls -l` of the directory, rename all, unlink all;
  small:    write SMALL files of 4 KiB spread over 50 directories, read
            them all back (and check them);
  untar:    tar -xf of a tarball of 3,100 files in 120 directories shaped
            like a source tree (most under 8 KiB, a few up to 200 KiB),
            made once, seeded, in the work directory;
  build:    cp -r of the tree `git ls-files` lists into the target, `make -j2
            all` there, rm -r of it (needs `make deps` done);
  big:      write BIG MiB in 1 MiB writes, fsync; drop caches; read it back.
Prints seconds per phase and target, the ratio to the local directory and to
passthrough_ll at the same timeout, the targets at 50 ms (docs/PERF-NOTES.md,
"Goals"), and for
Orchard the FUSE and server requests per item of each phase
(`user.orchard.stats` before and after).  Draws the two tables of ratios as
grouped bars in a PNG chart (--chart, default build/bench/bench-mount.png;
bench/chart.py, python3-matplotlib; skipped with a note without it).
"""
import argparse
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("ORCH_BUILDDIR", os.path.join(ROOT, "build"))
ORCHARD = os.path.join(BUILD, "bin", "orchard")
MOUNT = os.path.join(BUILD, "bin", "orchard-mount")
EXAMPLES = "/usr/share/doc/libfuse3-dev/examples"

META = ["create", "stat#1", "stat#2", "ls -l", "rename", "unlink"]
SMALL = ["small write", "small read"]
UNTAR = ["untar"]
UNTAR_FILES = 3100
UNTAR_DIRS = 120
BUILDP = ["tree copy", "make -j2", "tree rm"]
BIG = ["big write+fsync", "big read"]
SMALL_SIZE = 4096
SMALL_DIRS = 50


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def fs_type(path):
    """File system type of the mount holding path (longest prefix match)."""
    path = os.path.realpath(path)
    best, typ = "", "?"
    with open("/proc/mounts") as f:
        for line in f:
            p = line.split()
            mp = p[1].replace("\\040", " ")
            if (path == mp or path.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
                best, typ = mp, p[2]
    return typ


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def sync():
    os.sync()


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError as e:
        log("warning: cannot drop caches (%s); the big read may come from the page cache" % e)
        return False


class FuseProc:
    """A FUSE daemon run in the foreground as our child; stop() unmounts it
    and ends that one process (by pid), whatever happens."""

    def __init__(self, name, argv, mnt, logpath):
        self.name, self.mnt = name, mnt
        self.logf = open(logpath, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.logf,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while not is_mounted(mnt):
            if self.proc.poll() is not None:
                self.logf.close()
                raise RuntimeError("%s exited with %d before mounting; log: %s"
                                   % (name, self.proc.returncode, logpath))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("%s did not mount %s within 15 s" % (name, mnt))
            time.sleep(0.02)

    def stop(self):
        if self.proc is None:
            return
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        self.proc = None
        self.logf.close()


class Target:
    def __init__(self, name, kind, timeout_ms=None, coherent=False, replicas=1):
        self.name, self.kind, self.timeout_ms = name, kind, timeout_ms
        self.coherent = coherent    # orchard-mount -o coherent=on (else off)
        self.replicas = replicas    # servers per replica group (--replicas)
        self.path = None            # where the phases run
        self.fuse = None
        self.cluster = None
        self.times = {}
        self.cpu = {}               # phase -> CPU seconds of the daemons (FUSE + servers)
        self.pids = []
        self.counts = {}            # phase -> (items, {"fuse": {}, "server": {}})

    def daemon_cpu(self):
        tot = 0
        for pid in self.pids:
            try:
                with open("/proc/%d/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                tot += int(fields[11]) + int(fields[12])     # utime, stime
            except (OSError, IndexError, ValueError):
                pass
        return tot / os.sysconf("SC_CLK_TCK")

    def stats(self):
        if self.kind != "orchard":
            return None
        try:
            return json.loads(os.getxattr(self.fuse.mnt, "user.orchard.stats").decode())
        except OSError:
            return None


def start_target(t, work, pt_bin, args, stack):
    if t.kind == "local":
        t.path = os.path.join(work, "local")
        os.mkdir(t.path)
        return
    mnt = os.path.join(work, "mnt-" + t.name)
    os.mkdir(mnt)
    if t.kind == "passthrough_ll":
        back = os.path.join(work, "back-" + t.name)
        os.mkdir(back)
        opts = "source=%s,timeout=%g" % (back, t.timeout_ms / 1000.0)
        if args.pt_opts:
            opts += "," + args.pt_opts
        t.fuse = FuseProc(t.name, [pt_bin, "-f", "-o", opts, mnt], mnt,
                          os.path.join(work, t.name + ".log"))
    else:
        cdir = os.path.join(work, "cluster-" + t.name)
        stack.append(("cluster", cdir))
        up = [ORCHARD, "local", "up", cdir, "--servers", str(args.servers * t.replicas)]
        if t.replicas > 1:
            up += ["--replicas", str(t.replicas)]
        out = subprocess.run(up, check=True, capture_output=True, text=True).stdout
        conf = out.strip().splitlines()[-1]
        t.cluster = (cdir, conf)
        opts = "dcache_timeout_ms=%d,getattr_timeout_ms=%d" % (t.timeout_ms, t.timeout_ms)
        opts += ",coherent=%s" % ("on" if t.coherent else "off")
        if args.orch_opts:
            opts += "," + args.orch_opts
        for f in sorted(os.listdir(cdir)):
            if f.endswith(".pid") and f != "mount.pid":
                with open(os.path.join(cdir, f)) as pf:
                    t.pids.append(int(pf.read().split()[0]))
        t.fuse = FuseProc(t.name, [MOUNT, "-f", "-c", conf, mnt, "-o", opts], mnt,
                          os.path.join(work, t.name + ".log"))
    stack.append(("fuse", t.fuse))
    t.pids.append(t.fuse.proc.pid)
    t.path = os.path.join(mnt, "bench")
    os.mkdir(t.path)


def stop_target(t):
    if t.fuse is not None:
        t.fuse.stop()
    if t.cluster is not None:
        subprocess.run([ORCHARD, "local", "down", t.cluster[0]], capture_output=True)


def delta(a, b):
    out = {}
    for sect, key in (("fuse", "fuse"), ("server", "server_requests")):
        d = {}
        for k, v in b.get(key, {}).items():
            n = v - a.get(key, {}).get(k, 0)
            if n:
                d[k] = n
        out[sect] = d
    return out


def phase(t, name, items, fn):
    """Runs fn after an untimed sync, records its seconds and, for Orchard,
    the requests it cost."""
    sync()
    before = t.stats()
    c = t.daemon_cpu()
    s = time.perf_counter()
    fn()
    t.times[name] = time.perf_counter() - s
    t.cpu[name] = t.daemon_cpu() - c
    after = t.stats()
    if before is not None and after is not None:
        t.counts[name] = (items, delta(before, after))
    log("  %-16s %8.2f s   daemons' CPU %6.2f s" % (name, t.times[name], t.cpu[name]))


def run_metadata(t, n):
    d = os.path.join(t.path, "meta")
    os.mkdir(d)
    names = [os.path.join(d, "f%05d" % i) for i in range(n)]
    new = [os.path.join(d, "g%05d" % i) for i in range(n)]
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY

    def create():
        for p in names:
            os.close(os.open(p, flags, 0o644))

    def stat():
        for p in names:
            os.stat(p)

    def ls():
        subprocess.run(["ls", "-l", d], check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, LC_ALL="C"))

    def rename():
        for a, b in zip(names, new):
            os.rename(a, b)

    def unlink():
        for p in new:
            os.unlink(p)

    phase(t, "create", n, create)
    phase(t, "stat#1", n, stat)
    phase(t, "stat#2", n, stat)
    phase(t, "ls -l", n, ls)
    phase(t, "rename", n, rename)
    phase(t, "unlink", n, unlink)
    os.rmdir(d)


def run_small(t, n):
    base = os.path.join(t.path, "small")
    os.mkdir(base)
    paths = [os.path.join(base, "d%02d" % (i % SMALL_DIRS), "s%05d" % i) for i in range(n)]
    blob = os.urandom(SMALL_SIZE)

    def content(i):
        return b"%08d" % i + blob[8:]

    def write():
        for j in range(SMALL_DIRS):
            os.mkdir(os.path.join(base, "d%02d" % j))
        for i, p in enumerate(paths):
            fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            os.write(fd, content(i))
            os.close(fd)

    bad = []

    def read():
        for i, p in enumerate(paths):
            fd = os.open(p, os.O_RDONLY)
            data = os.read(fd, SMALL_SIZE + 1)
            os.close(fd)
            if data[:8] != b"%08d" % i or len(data) != SMALL_SIZE:
                bad.append(p)

    phase(t, "small write", n, write)
    phase(t, "small read", n, read)
    if bad:
        raise RuntimeError("%s: %d small files read back wrong, first %s" % (t.name, len(bad), bad[0]))
    shutil.rmtree(base)


def make_tarball(work):
    """The untar phase's tarball: UNTAR_FILES files in UNTAR_DIRS directories,
    sizes like a source tree's, seeded (the same bytes in every run)."""
    rnd = random.Random(14)
    path = os.path.join(work, "untar.tar")
    with tarfile.open(path, "w") as tar:
        for j in range(UNTAR_DIRS):
            info = tarfile.TarInfo("src/d%03d" % j)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1700000000
            tar.addfile(info)
        for i in range(UNTAR_FILES):
            size = int(min(200 * 1024, rnd.lognormvariate(8.0, 1.2)))
            info = tarfile.TarInfo("src/d%03d/f%04d.c" % (i % UNTAR_DIRS, i))
            info.size, info.mode, info.mtime = size, 0o644, 1700000000
            tar.addfile(info, io.BytesIO(rnd.randbytes(size)))
    return path


def run_untar(t, tarball):
    dst = os.path.join(t.path, "untar")
    os.mkdir(dst)
    phase(t, "untar", UNTAR_FILES, lambda: subprocess.run(["tar", "-xf", tarball, "-C", dst],
                                                          check=True))
    shutil.rmtree(dst)


def run_build(t, stage, jobs):
    dst = os.path.join(t.path, "orchard-src")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "BUILDDIR", "CFLAGS", "SANITIZE",
                        "ORCH_BUILDDIR", "CC", "V")}
    nfiles = sum(len(f) for _, _, f in os.walk(stage))
    phase(t, "tree copy", nfiles, lambda: subprocess.run(["cp", "-r", stage, dst], check=True))
    res = {}

    def make():
        r = subprocess.run(["make", "-j%d" % jobs, "all"], cwd=dst, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        res["rc"], res["err"] = r.returncode, r.stderr

    phase(t, "make -j2", nfiles, make)
    if res["rc"] != 0:
        raise RuntimeError("%s: make failed:\n%s" % (t.name, res["err"][-3000:]))
    phase(t, "tree rm", nfiles, lambda: subprocess.run(["rm", "-r", dst], check=True))


def run_big(t, mib):
    p = os.path.join(t.path, "big.bin")
    chunk = bytearray(os.urandom(1 << 20))

    def write():
        fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        for i in range(mib):
            chunk[:8] = b"%08d" % i
            os.write(fd, chunk)
        os.fsync(fd)
        os.close(fd)

    phase(t, "big write+fsync", mib, write)
    t.dropped = drop_caches()
    bad = []

    def read():
        fd = os.open(p, os.O_RDONLY)
        i = 0
        while True:
            data = os.read(fd, 1 << 20)
            if not data:
                break
            if len(data) != 1 << 20 or data[:8] != b"%08d" % i:
                bad.append(i)
            i += 1
        os.close(fd)
        if i != mib:
            bad.append("size")

    # phase() syncs first: nothing is dirty now, so the cache stays dropped.
    phase(t, "big read", mib, read)
    if bad:
        raise RuntimeError("%s: big file read back wrong at MiB %s" % (t.name, bad[0]))
    os.unlink(p)


def stage_tree(work):
    stage = os.path.join(work, "stage", "orchard-src")
    os.makedirs(stage)
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.split(b"\0")
    for f in files:
        if not f:
            continue
        src = os.path.join(ROOT.encode(), f)
        dst = os.path.join(stage.encode(), f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isfile(src):
            shutil.copy2(src, dst)
    return stage


def compile_passthrough(work):
    d = os.path.join(work, "passthrough_ll")
    os.mkdir(d)
    for f in ("passthrough_ll.c", "passthrough_helpers.h"):
        shutil.copy(os.path.join(EXAMPLES, f), d)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], check=True,
                           capture_output=True, text=True).stdout.split()
    subprocess.run(["cc", "-O2", "-o", "passthrough_ll", "passthrough_ll.c"] + flags,
                   cwd=d, check=True)
    return os.path.join(d, "passthrough_ll")


def fmt_ratio(a, b):
    if a is None or b is None or b <= 0:
        return "-"
    return "%.2fx" % (a / b)


GROUPS = [("metadata sum", META), ("stat sum", ["stat#1", "stat#2"]), ("small sum", SMALL)]


def total(t, ps):
    """Seconds of target @t over phases @ps, None if one is missing."""
    if any(p not in t.times for p in ps):
        return None
    return sum(t.times[p] for p in ps)


def report_rows(phases):
    """The rows of the tables: the phases, then the sums of whole groups."""
    return list(phases) + [g for g, ps in GROUPS if all(p in phases for p in ps)]


def val(t, r):
    """Seconds of target @t in row @r (a phase or a group's sum), or None."""
    if t is None:
        return None
    for g, ps in GROUPS:
        if r == g:
            return total(t, ps)
    return t.times.get(r)


def ratio(a, b):
    return a / b if a is not None and b else None


def write_chart(targets, args, phases):
    """The ratios of the tables as a PNG chart at args.chart: time over the
    local directory's for every FUSE target, and Orchard's over
    passthrough_ll's at the same timeout.  Says where, or why not."""
    sys.path.insert(0, HERE)
    import chart

    by = {t.name: t for t in targets}
    rows = report_rows(phases)
    orch = [t for t in targets if t.kind == "orchard"]
    pts = [t for t in targets if t.kind == "passthrough_ll"]
    panels = []
    if "local" in by and (orch or pts):
        series, colors = [], []
        for kind, ts, base in (("Orchard", orch, "#4c72b0"), ("passthrough_ll", pts, "#dd8452")):
            colors += chart.shades(base, len(ts))
            series += [("%s %d ms / local" % (kind, t.timeout_ms),
                        [ratio(val(t, r), val(by["local"], r)) for r in rows]) for t in ts]
        panels.append({"groups": rows, "series": series, "colors": colors,
                       "ylabel": "time / local time (lower is better)",
                       "title": "each target next to the local directory"})
    pairs = [(t, by["pt-%d" % t.timeout_ms]) for t in orch if "pt-%d" % t.timeout_ms in by]
    if pairs:
        panels.append({"groups": rows, "colors": chart.shades("#4c72b0", len(pairs)),
                       "series": [("Orchard / passthrough_ll, %d ms" % t.timeout_ms,
                                   [ratio(val(t, r), val(pt, r)) for r in rows])
                                  for t, pt in pairs],
                       "ylabel": "time / passthrough_ll time",
                       "title": "Orchard next to passthrough_ll at the same timeout"})
    if not panels:
        print("# chart skipped: it needs local and a FUSE target, or both FUSE targets")
        return
    note = ("files=%d, small=%d x 4 KiB, big=%d MiB%s; %d CPUs, kernel %s; dashed line: 1.0"
            % (args.files, args.small, args.big_mib, ", build skipped" if args.skip_build
               else "", os.cpu_count(), os.uname().release))
    try:
        chart.ratio_chart(args.chart, "mount_bench: the mount next to a local directory and "
                          "passthrough_ll", panels, note)
    except chart.Skipped as e:
        print("# chart skipped: %s" % e)
        return
    print("# chart: %s" % args.chart)


def report(targets, args, phases):
    by = {t.name: t for t in targets}
    local = by.get("local")
    w = 11
    names = [t.name for t in targets]
    groups = GROUPS
    rows = report_rows(phases)

    print()
    print("# seconds per phase (files=%d, small=%d x 4 KiB in %d dirs, big=%d MiB%s)"
          % (args.files, args.small, SMALL_DIRS, args.big_mib,
             ", build skipped" if args.skip_build else ""))
    print("%-16s" % "phase" + "".join("%*s" % (w, n) for n in names))
    for r in rows:
        cells = []
        for t in targets:
            v = val(t, r)
            cells.append("%*s" % (w, "-" if v is None else "%.2f" % v))
        print("%-16s" % r + "".join(cells))

    print()
    print("# ratio to the local directory (time / local time)")
    print("%-16s" % "phase" + "".join("%*s" % (w, n) for n in names if n != "local"))
    for r in rows:
        print("%-16s" % r + "".join("%*s" % (w, fmt_ratio(val(t, r), val(local, r)))
                                    for t in targets if t.name != "local"))

    print()
    print("# ratio to passthrough_ll at the same timeout (time / passthrough_ll time)")
    orch = [t for t in targets if t.kind == "orchard"]
    print("%-16s" % "phase" + "".join("%*s" % (w, t.name) for t in orch))
    for r in rows:
        cells = []
        for t in orch:
            pt = by.get("pt-%d" % t.timeout_ms)
            cells.append("%*s" % (w, fmt_ratio(val(t, r), val(pt, r) if pt else None)))
        print("%-16s" % r + "".join(cells))

    if args.big_mib and "big read" in phases:
        print()
        print("# sequential MB/s (1 MB = 10^6 bytes)")
        print("%-16s" % "phase" + "".join("%*s" % (w, n) for n in names))
        for r in BIG:
            print("%-16s" % r + "".join("%*.1f" % (w, args.big_mib * 1.048576 / t.times[r])
                                        if t.times.get(r) else "%*s" % (w, "-") for t in targets))

    fuse_t = [t for t in targets if t.kind != "local"]
    if fuse_t:
        print()
        print("# CPU seconds used by the daemons during each phase (passthrough_ll; "
              "orchard-mount + both orchardd)")
        print("%-16s" % "phase" + "".join("%*s" % (w, t.name) for t in fuse_t))
        for r in rows:
            cells = []
            for t in fuse_t:
                if r in t.cpu:
                    v = t.cpu[r]
                else:
                    ps = dict(groups).get(r)
                    v = sum(t.cpu[p] for p in ps) if ps and all(p in t.cpu for p in ps) else None
                cells.append("%*s" % (w, "-" if v is None else "%.2f" % v))
            print("%-16s" % r + "".join(cells))

    o50, p50 = by.get("orch-50"), by.get("pt-50")
    if o50 and p50:
        print()
        print("# targets at 50 ms (docs/PERF-NOTES.md)")
        checks = []
        m = fmt_ratio(total(o50, META), total(p50, META))
        if total(o50, META) is not None:
            checks.append(("metadata phases <= 2x passthrough_ll", m,
                           total(o50, META) <= 2 * total(p50, META)))
        if total(o50, SMALL) is not None:
            checks.append(("small-file phases <= 2x passthrough_ll",
                           fmt_ratio(total(o50, SMALL), total(p50, SMALL)),
                           total(o50, SMALL) <= 2 * total(p50, SMALL)))
        if "make -j2" in o50.times and local:
            checks.append(("source build <= 1.3x local", fmt_ratio(o50.times["make -j2"],
                                                                   local.times["make -j2"]),
                           o50.times["make -j2"] <= 1.3 * local.times["make -j2"]))
        for r in BIG:
            if r in o50.times:
                pct = 100.0 * p50.times[r] / o50.times[r]
                checks.append(("%s >= 70%% of passthrough_ll" % r, "%.0f%%" % pct, pct >= 70))
        for what, v, ok in checks:
            print("%-44s %8s  %s" % (what, v, "met" if ok else "MISSED"))

    c50 = by.get("coh-50")
    if c50 and p50:
        print()
        print("# targets of coherent mode at 50 ms (docs/PERF-NOTES.md), against passthrough_ll at 50 ms")
        checks = []

        def against(what, ps, bound):
            a, b = total(c50, ps), total(p50, ps)
            if a is not None and b is not None:
                checks.append((what, fmt_ratio(a, b), a <= bound * b))

        against("metadata phases <= 1.3x passthrough_ll", META, 1.3)
        against("stat phases < 1.0x passthrough_ll", ["stat#1", "stat#2"], 1.0)
        against("small-file phases <= 1.0x passthrough_ll", SMALL, 1.0)
        against("untar <= 1.5x passthrough_ll", UNTAR, 1.5)
        if "make -j2" in c50.times and local:
            checks.append(("source build <= 1.1x local", fmt_ratio(c50.times["make -j2"],
                                                                   local.times["make -j2"]),
                           c50.times["make -j2"] <= 1.1 * local.times["make -j2"]))
        for what, v, ok in checks:
            print("%-44s %8s  %s" % (what, v, "met" if ok else "MISSED"))

    reps = [t for t in targets if t.replicas > 1]
    for rt in reps:
        base = by.get("coh-%d" % rt.timeout_ms)
        if not base:
            continue
        print()
        print("# replica groups: %s (%d groups of %d) against %s (%d servers), time / time"
              % (rt.name, args.servers, rt.replicas, base.name, args.servers))
        for r in rows:
            print("%-16s%*s" % (r, w, fmt_ratio(val(rt, r), val(base, r))))
        a, b = total(rt, META), total(base, META)
        if a is not None and b is not None:
            print("%-44s %8s  %s" % ("metadata phases <= 1.5x one server per group",
                                     fmt_ratio(a, b), "met" if a <= 1.5 * b else "MISSED"))

    if orch:
        print()
        print("# Orchard requests per item of each phase (item: file; MiB for big; tree file for build)")
        for t in orch:
            print("%s:" % t.name)
            for r in phases:
                if r not in t.counts:
                    continue
                items, c = t.counts[r]
                items = max(items, 1)

                def fmt(d, strip):
                    top = sorted(d.items(), key=lambda kv: -kv[1])
                    return " ".join("%s=%.2f" % (k.replace(strip, ""), v / items)
                                    for k, v in top)
                print("  %-16s server: %s" % (r, fmt(c["server"], "CL2SV_") or "-"))
                print("  %-16s fuse:   %s" % ("", fmt(c["fuse"], "") or "-"))
    if any(getattr(t, "dropped", True) is False for t in targets):
        print("# warning: caches could not be dropped; big read may be from the page cache")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="disk-backed directory for all targets (default: a fresh "
                    "directory in /var/tmp); a fresh subdirectory is made and removed in it")
    ap.add_argument("--files", type=int, default=10000, help="files of the metadata phases")
    ap.add_argument("--small", type=int, default=5000, help="4 KiB files of the small phases")
    ap.add_argument("--big-mib", type=int, default=1024, help="MiB of the sequential phases (0: skip)")
    ap.add_argument("--skip-build", action="store_true", help="skip the source-tree build phases")
    ap.add_argument("--skip-untar", action="store_true", help="skip the untar phase")
    ap.add_argument("--jobs", type=int, default=2, help="make -j of the build phase")
    ap.add_argument("--timeouts", default="0,50,1000",
                    help="comma-separated timeouts in ms for passthrough_ll and Orchard")
    ap.add_argument("--targets", default="local,pt,orch,coh",
                    help="subset of local,pt,orch,coh,rep (coh: Orchard in coherent mode, "
                    "whose timeouts only apply to what no lease covers; rep: the same "
                    "on replica groups, --replicas)")
    ap.add_argument("--pt-opts", default="",
                    help="extra -o options for passthrough_ll, e.g. xattr (default: its own)")
    ap.add_argument("--orch-opts", default="",
                    help="extra -o options for orchard-mount, e.g. negative_timeout_ms=50")
    ap.add_argument("--servers", type=int, default=2,
                    help="servers (replica groups with --replicas) of the Orchard targets")
    ap.add_argument("--replicas", type=int, default=3,
                    help="members per group of the rep target (coherent, at 50 ms or the "
                    "first timeout): SERVERS groups of REPLICAS, against coh's SERVERS servers")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--chart", default=os.path.join(BUILD, "bench", "bench-mount.png"),
                    help="write the ratios as a PNG chart there (python3-matplotlib; "
                    "default %(default)s; '' for none)")
    args = ap.parse_args()

    for b in (ORCHARD, MOUNT):
        if not os.access(b, os.X_OK):
            sys.exit("mount_bench: %s missing; run make first" % b)
    base = args.dir or "/var/tmp"
    os.makedirs(base, exist_ok=True)
    typ = fs_type(base)
    if typ in ("tmpfs", "ramfs", "fuse", "overlay") or typ.startswith("fuse."):
        log("warning: %s is on %s, not a plain disk file system" % (base, typ))
    work = tempfile.mkdtemp(prefix="orchard-mount-bench-", dir=base)
    work = os.path.realpath(work)

    def on_term(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)

    timeouts = [int(x) for x in args.timeouts.split(",") if x != ""]
    want = set(args.targets.split(","))
    targets = []
    if "local" in want:
        targets.append(Target("local", "local"))
    for to in timeouts:
        if "pt" in want:
            targets.append(Target("pt-%d" % to, "passthrough_ll", to))
        if "orch" in want:
            targets.append(Target("orch-%d" % to, "orchard", to))
        if "coh" in want and to == (50 if 50 in timeouts else timeouts[0]):
            targets.append(Target("coh-%d" % to, "orchard", to, coherent=True))
        if "rep" in want and to == (50 if 50 in timeouts else timeouts[0]):
            targets.append(Target("rep%d-%d" % (args.replicas, to), "orchard", to,
                                  coherent=True, replicas=args.replicas))

    phases = (META + SMALL + ([] if args.skip_untar else UNTAR) +
              ([] if args.skip_build else BUILDP) + (BIG if args.big_mib else []))
    stack = []
    t0 = time.monotonic()
    try:
        df = subprocess.run(["df", "-h", work], capture_output=True, text=True).stdout
        print("# work directory %s (%s)" % (work, typ))
        print("# " + df.strip().splitlines()[-1])
        print("# %d CPUs, kernel %s; one client thread, one operation at a time"
              % (os.cpu_count(), os.uname().release))
        print("# load average at start: %s (other work on the machine skews every number)"
              % " ".join(open("/proc/loadavg").read().split()[:3]))
        pt_bin = compile_passthrough(work) if any(t.kind == "passthrough_ll" for t in targets) else None
        stage = None if args.skip_build else stage_tree(work)
        tarball = None if args.skip_untar else make_tarball(work)
        for t in targets:
            log("%s:" % t.name)
            start_target(t, work, pt_bin, args, stack)
            try:
                run_metadata(t, args.files)
                run_small(t, args.small)
                if tarball:
                    run_untar(t, tarball)
                if stage:
                    run_build(t, stage, args.jobs)
                if args.big_mib:
                    run_big(t, args.big_mib)
            finally:
                stop_target(t)
        report(targets, args, phases)
        if args.chart:
            write_chart(targets, args, phases)
        print("# total %.0f s; load average at end: %s" % (
            time.monotonic() - t0, " ".join(open("/proc/loadavg").read().split()[:3])))
    finally:
        for kind, x in reversed(stack):
            try:
                if kind == "fuse":
                    x.stop()
                else:
                    subprocess.run([ORCHARD, "local", "down", x], capture_output=True)
            except Exception as e:  # keep cleaning up
                log("cleanup: %s" % e)
        left = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4]
                if mp == work or mp.startswith(work + "/"):
                    left.append(mp)
        if left:
            log("warning: still mounted, work directory kept: %s" % " ".join(left))
        elif not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
