#!/usr/bin/env python3
"""Failover time of replica groups: from the SIGKILL of a group's leader to
the first operation completed on that group, over many kills.

    /usr/bin/python3 bench/failover_bench.py [--kills 20] [--servers 3]
        [--replicas 3] [--seed N] [--dir DIR] [--json FILE]

A fresh `orchard local up` cluster of SERVERS groups of REPLICAS members,
default settings (the election timeout, the leases, the clients' tries all
as shipped), mounted with orchard-mount.  For each group the bench makes
a directory whose inode lives in that group, and a file in it (a file's
inode and, while it is smaller than a strip, its data live in its
directory's group).  Two probes per group then run without pause:

  meta:  fchmod of an open file, alternating 0600 and 0644 (one change in
         the group's log, answered by its leader);
  path:  the same by path, chmod("/foN/path"): the kernel looks the names
         up again once their lease is no longer vouched for, and "/" (and
         so the name "foN") is held by group 0;
  data:  a 4 KiB pwrite at offset 0 and an fsync (a write streamed to the
         group's followers, then the writer's size at the group's leader;
         the fsync asks only the group its 4 KiB went to).

Each kill picks a random group, asks `orchard stats --json` which member
leads it, and SIGKILLs that member.  Its failover time, per probe, is from
the kill to the end of the first operation that probe started after the
kill (an operation in flight at the kill ends first, once the group has
a new leader; the next one starts then).  The probes of the other groups
show whether they stopped: their slowest operation that overlapped the
failover.  The killed member is then started again (`orchard local up`),
and its rejoin time is how long it took to apply everything its leader
had committed when it was started.  Between kills every probe runs on for
a random 1 to 3 s.

Prints one line per kill and, per probe, the median and the maximum; the
issue's target is "operations on the failed group resume within 5 s of
the kill; others never stop".  Any operation that failed is counted and
printed: there should be none.  All members share this host's CPUs and
loopback, so the times include a busy machine's scheduling, not a
network's.
"""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("ORCH_BUILDDIR", os.path.join(ROOT, "build"))
ORCHARD = os.path.join(BUILD, "bin", "orchard")

KINDS = ("meta", "path", "data")
BLOCK = 4096
DOING = {"meta": "fchmod", "path": "chmod by path", "data": "4 KiB pwrite + fsync"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def wait_until(cond, timeout, what, interval=0.02):
    end = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() >= end:
            raise TimeoutError("gave up after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


class Cluster:
    def __init__(self, work, groups, replicas):
        self.dir = os.path.join(work, "c")
        self.mnt = os.path.join(work, "mnt")
        self.groups, self.replicas = groups, replicas
        self.env = dict(os.environ, ORCHARD_CONF=os.path.join(self.dir, "orchard.conf"))

    def orchard(self, *args, timeout=120):
        return subprocess.run([ORCHARD, *args], check=True, capture_output=True, text=True,
                              env=self.env, timeout=timeout).stdout

    def up(self, mount=False):
        args = ["local", "up", self.dir, "--servers", str(self.groups * self.replicas),
                "--replicas", str(self.replicas)]
        if mount:
            os.makedirs(self.mnt, exist_ok=True)
            args += ["--mount", self.mnt]
        self.orchard(*args)

    def down(self):
        subprocess.run([ORCHARD, "local", "down", self.dir], capture_output=True,
                       env=self.env, timeout=120)

    def pid(self, name):
        with open(os.path.join(self.dir, name + ".pid")) as f:
            return int(f.read().split()[0])

    def members(self):
        """Each live member's log state, by name (a down member is left out)."""
        out = json.loads(self.orchard("stats", "--json"))
        return {s["name"]: s["log"] for s in out["servers"] if s.get("up") and "log" in s}

    def leader(self, group):
        def one():
            found = [(n, log) for n, log in self.members().items()
                     if log["group"] == group and log["role"] == "leader" and log["serving"]]
            return found[0] if len(found) == 1 else None
        return wait_until(one, 60, "a leader of group %d" % group, 0.05)

    def group_of(self, path):
        for line in self.orchard("stat", path).splitlines():
            if "Server:" in line:
                return int(line.split("Server:")[1].split()[0])
        raise RuntimeError("orchard stat %s: no server" % path)


class Probe(threading.Thread):
    """One kind of operation on one group, again and again; every
    operation's start, end and errno (None when it succeeded)."""

    def __init__(self, group, kind, path):
        super().__init__(daemon=True)
        self.group, self.kind, self.path = group, kind, path
        self.ops = []
        self.stop = False

    def run(self):
        fd = os.open(self.path, os.O_WRONLY) if self.kind != "path" else -1
        block = bytearray(BLOCK)
        i = 0
        try:
            while not self.stop:
                i += 1
                t0 = time.monotonic()
                err = None
                try:
                    if self.kind == "meta":
                        os.fchmod(fd, 0o600 if i % 2 else 0o644)
                    elif self.kind == "path":
                        os.chmod(self.path, 0o600 if i % 2 else 0o644)
                    else:
                        block[:8] = i.to_bytes(8, "little")
                        os.pwrite(fd, block, 0)
                        os.fsync(fd)
                except OSError as e:
                    err = e.errno
                self.ops.append((t0, time.monotonic(), err))
        finally:
            if fd >= 0:
                os.close(fd)

    def first_after(self, t):
        """The end of the first operation started at or after @t, if any."""
        first = None
        for start, end, _ in reversed(self.ops):
            if start < t:
                break
            first = end
        return first

    def slowest_between(self, a, b):
        return max((end - start for start, end, _ in self.ops if end >= a and start <= b),
                   default=0.0)

    def count_since(self, t):
        return sum(1 for start, _, _ in self.ops if start >= t)


def process_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def one_kill(c, probes, rnd):
    group = rnd.randrange(c.groups)
    victim, _ = c.leader(group)
    pid = c.pid(victim)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    wait_until(lambda: process_gone(pid), 30, "%s (pid %d) to die" % (victim, pid))
    mine = [p for p in probes if p.group == group]
    resumed = {}
    for p in mine:
        end = wait_until(lambda: p.first_after(killed), 120,
                         "the %s probe of group %d to complete an operation" % (p.kind, group))
        resumed[p.kind] = end - killed
    window_end = killed + max(resumed.values())
    # The other groups' probes, kind by kind: their slowest operation that
    # overlapped the failover.
    others = {}
    for p in probes:
        if p.group != group:
            took = p.slowest_between(killed, window_end)
            others[p.kind] = max(others.get(p.kind, 0.0), took)
    # Start it again and time its rejoin: everything its group's leader had
    # committed once it was started is applied on it.
    c.up()
    restarted = time.monotonic()
    _, lead = c.leader(group)
    target = lead["commit_index"]
    wait_until(lambda: c.members().get(victim, {}).get("applied_index", -1) >= target, 120,
               "%s to apply up to %d" % (victim, target), 0.05)
    rejoined = time.monotonic() - restarted
    return dict(group=group, victim=victim, others=others, rejoin=rejoined, **resumed)


def summary(values):
    return "median %.2f s, max %.2f s" % (statistics.median(values), max(values))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--servers", type=int, default=3, help="replica groups")
    ap.add_argument("--replicas", type=int, default=3, help="members per group")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", help="work directory (default: a new one in /var/tmp, removed)")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    if args.replicas < 3:
        ap.error("a group needs 3 members or more to lose one and go on")
    work = args.dir or tempfile.mkdtemp(prefix="orch-failover.", dir="/var/tmp")
    rnd = random.Random(args.seed)
    c = Cluster(work, args.servers, args.replicas)
    probes = []
    results = []
    try:
        log("starting %d groups of %d in %s" % (args.servers, args.replicas, work))
        c.up(mount=True)
        paths = {}
        i = 0
        while len(paths) < args.servers:
            d = "/fo%d" % i
            os.mkdir(c.mnt + d)
            paths.setdefault(c.group_of(d), d)
            i += 1
            if i > 64 * args.servers:
                raise RuntimeError("no directory landed in some group: %s" % paths)
        for g, d in sorted(paths.items()):
            for kind in KINDS:
                f = "%s%s/%s" % (c.mnt, d, kind)
                with open(f, "wb") as out:
                    out.write(bytes(BLOCK))
                probes.append(Probe(g, kind, f))
        for p in probes:
            p.start()
        log("kill  group victim  failed group: %s   other groups: %s   rejoin"
            % ("  ".join("%-6s" % k for k in KINDS), "  ".join("%-6s" % k for k in KINDS)))
        for k in range(args.kills):
            settle = time.monotonic()
            time.sleep(rnd.uniform(1, 3))
            wait_until(lambda: all(p.count_since(settle) >= 3 for p in probes), 60,
                       "every probe to complete 3 operations")
            r = one_kill(c, probes, rnd)
            results.append(r)
            log("%4d  %5d %-7s %15s" % (k + 1, r["group"], r["victim"], "")
                + "  ".join("%5.2fs" % r[kind] for kind in KINDS) + " " * 16
                + "  ".join("%5.2fs" % r["others"].get(kind, 0) for kind in KINDS)
                + "  %5.2fs" % r["rejoin"])
    finally:
        for p in probes:
            p.stop = True
        for p in probes:
            p.join(60)
        c.down()
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    failed = {"%s/%d" % (p.kind, p.group): sum(1 for *_, e in p.ops if e is not None)
              for p in probes}
    errnos = sorted({os.strerror(e) for p in probes for *_, e in p.ops if e is not None})
    ops = sum(len(p.ops) for p in probes)
    print("\nfailover of %d groups of %d, %d SIGKILLs of a leader, %d operations"
          % (args.servers, args.replicas, len(results), ops))
    for kind in KINDS:
        print("  %s probe (%s): first operation after the kill: %s"
              % (kind, DOING[kind],
                 summary([r[kind] for r in results])))
    if args.servers > 1:
        for kind in KINDS:
            print("  other groups, %s probes: slowest operation during a failover: %s"
                  % (kind, summary([r["others"][kind] for r in results])))
    print("  killed member: rejoined (applied its leader's commit) %s"
          % summary([r["rejoin"] for r in results]))
    print("  failed operations: %d %s" % (sum(failed.values()), errnos or ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"kills": results, "failed": failed, "operations": ops}, f, indent=1)
    return 1 if sum(failed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
