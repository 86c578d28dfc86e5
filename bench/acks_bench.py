#!/usr/bin/env python3
"""What acknowledged invalidation costs a writer, side by side in one run
(docs/DESIGN.md, "Acknowledged invalidation").

    /usr/bin/python3 bench/acks_bench.py [--files N] [--rounds R]

On a fresh 2-server cluster (tests/lib), mount A changes N files (chmod,
then utime, then a create and an unlink per file in one directory) in
these settings, each timed alone, R rounds, the median printed:

  local:    the same calls on a local directory (the floor);
  held-0:   no other mount holds the files: no reply waits;
  held-1:   mount B, in coherent mode, has just looked at every file, so
            each of A's replies waits for B's acknowledgement (one more
            round trip to B, and B's kernel call);
  held-4:   four such mounts hold them: the reply waits for the slowest.

Prints seconds per phase, microseconds per call, the ratios to held-0 and
to the local directory, and the servers' replies_held counters.
Needs root and /dev/fuse; takes about a minute.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))

from cluster import Cluster  # noqa: E402
from mount import Mount  # noqa: E402

PHASES = ["chmod", "utime", "create+unlink"]


def run_phase(name, root, n, look=None):
    """Times phase @name over n files in root (made beforehand); look(i)
    first makes the other mount hold file i (untimed)."""
    if look:
        for i in range(n):
            look(i)
    t0 = time.monotonic()
    if name == "chmod":
        for i in range(n):
            os.chmod(os.path.join(root, "f%d" % i), 0o600 if i % 2 else 0o640)
    elif name == "utime":
        for i in range(n):
            os.utime(os.path.join(root, "f%d" % i), (i, i))
    else:
        for i in range(n):
            p = os.path.join(root, "n%d" % i)
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
            os.unlink(p)
    return time.monotonic() - t0


def make_files(root, n):
    os.makedirs(root, exist_ok=True)
    for i in range(n):
        with open(os.path.join(root, "f%d" % i), "wb"):
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="acks-bench.", dir=args.dir or "/var/tmp")
    cluster = Cluster(os.path.join(work, "c"), nservers=2)
    cluster.start_all()
    settings = ["local", "held-0", "held-1", "held-4"]
    a, holders = None, []
    times = {(s, p): [] for s in settings for p in PHASES}
    try:
        a = Mount(cluster, os.path.join(work, "a")).start()
        for i in range(4):
            holders.append(Mount(cluster, os.path.join(work, "b%d" % i),
                                 {"coherent": "on"}).start())
        n = args.files
        local = os.path.join(work, "local")
        make_files(local, n)
        for r in range(args.rounds):
            for setting in settings:
                root = local if setting == "local" else a.path("r%d%s" % (r, setting))
                if setting != "local":
                    make_files(root, n)
                held = holders[:int(setting.split("-")[1])] if setting != "local" else []
                for phase in PHASES:
                    look = None
                    if held:
                        sub = os.path.relpath(root, a.mnt)

                        def look(i, phase=phase, sub=sub, held=held):
                            for b in held:
                                os.lstat(os.path.join(b.mnt, sub, "f%d" % i))
                                if phase == "create+unlink":
                                    try:
                                        os.lstat(os.path.join(b.mnt, sub, "n%d" % i))
                                    except FileNotFoundError:
                                        pass
                    times[(setting, phase)].append(run_phase(phase, root, n, look))
        stats = list(cluster.server_stats().values())
    finally:
        for m in holders + [a]:
            if m is not None:
                m.stop(check=False)
        cluster.stop_all()
    print("acks_bench: %d files, %d rounds, median seconds (microseconds per call)"
          % (args.files, args.rounds))
    print("%-14s" % "phase" + "".join("%18s" % s for s in settings) +
          "  held-1/held-0 held-4/held-0")
    for p in PHASES:
        calls = args.files * (2 if p == "create+unlink" else 1)
        med = {s: statistics.median(times[(s, p)]) for s in settings}
        print("%-14s" % p + "".join("%8.3f (%6.0f)" % (med[s], med[s] * 1e6 / calls)
                                    for s in settings) +
              "  %13.2f %13.2f" % (med["held-1"] / med["held-0"], med["held-4"] / med["held-0"]))
    count = sum(s["replies_held"] for s in stats)
    us = sum(s["replies_held_us"] for s in stats)
    print("replies held: %d, %.0f us each on average, longest %d us, by expiry %d"
          % (count, us / max(count, 1), max(s["replies_held_max_us"] for s in stats),
             sum(s["replies_held_by_expiry"] for s in stats)))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
