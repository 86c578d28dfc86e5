#!/usr/bin/env python3
"""Benchmark of the CLI: create, stat and unlink rates and
put/get MB/s of the CLI against a 2-server local cluster, next to the same
work on a local directory of the same disk, in one run.

    make bench                    # or: /usr/bin/python3 bench/cli_bench.py [-n FILES] [-m MIB]
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

BUILD = os.environ.get("ORCH_BUILDDIR", os.path.join(os.path.dirname(__file__), "..", "build"))
ORCHARD = os.path.join(BUILD, "bin", "orchard")
BENCH = os.path.join(BUILD, "bench", "orch-bench")


def local_meta(d, n):
    rates = {}
    t = time.monotonic()
    for i in range(n):
        os.close(os.open(os.path.join(d, "f%d" % i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    rates["create"] = n / (time.monotonic() - t)
    t = time.monotonic()
    for i in range(n):
        os.stat(os.path.join(d, "f%d" % i))
    rates["stat"] = n / (time.monotonic() - t)
    t = time.monotonic()
    for i in range(n):
        os.unlink(os.path.join(d, "f%d" % i))
    rates["unlink"] = n / (time.monotonic() - t)
    return rates


def timed(args):
    t = time.monotonic()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10000, help="files for the metadata phases")
    ap.add_argument("-m", type=int, default=256, help="MiB for put/get")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="orchard-bench-", dir=os.environ.get("BENCH_DIR", "/tmp"))
    cdir = os.path.join(work, "cluster")
    try:
        out = subprocess.run([ORCHARD, "local", "up", cdir, "--servers", "2"], check=True,
                             capture_output=True, text=True).stdout
        conf = out.strip().splitlines()[-1]
        print("# cluster: 2 servers on 127.0.0.1, config %s" % conf)
        print("# one client thread, one operation at a time")
        res = subprocess.run([BENCH, "-c", conf, "-n", str(args.n), "-m", str(args.m)],
                             check=True, capture_output=True, text=True).stdout
        lib = {}
        for line in res.splitlines():
            f = line.split()
            lib[f[0]] = float(f[4])
        ldir = os.path.join(work, "local")
        os.mkdir(ldir)
        loc = local_meta(ldir, args.n)

        src = os.path.join(work, "src.bin")
        with open(src, "wb") as f:
            for _ in range(args.m):
                f.write(os.urandom(1 << 20))
        dst = os.path.join(work, "dst.bin")
        put = timed([ORCHARD, "-c", conf, "put", src, "/big.bin"])
        # Timed into /dev/null: a first write into a new local file costs
        # more than the whole transfer and is not Orchard's work.
        get = timed([ORCHARD, "-c", conf, "get", "/big.bin", "/dev/null"])
        lget = timed(["cp", src, "/dev/null"])
        subprocess.run([ORCHARD, "-c", conf, "get", "/big.bin", dst], check=True)
        same = open(src, "rb").read() == open(dst, "rb").read()
        os.unlink(dst)
        lput = timed(["cp", src, dst])
        os.unlink(dst)
        subprocess.run(["sync"], check=True)

        print("%-22s %14s %14s %8s" % ("phase", "orchard", "local dir", "ratio"))
        for k in ("create", "stat", "unlink"):
            print("%-22s %10.0f /s %10.0f /s %7.1fx" % (k + " (liborchard)", lib[k], loc[k],
                                                     loc[k] / lib[k]))
        print("%-22s %10.1f MB/s" % ("write+fsync (lib)", lib["write"] * 1.048576))
        print("%-22s %10.1f MB/s" % ("read (lib)", lib["read"] * 1.048576))
        print("%-22s %10.1f MB/s %10.1f MB/s %7.1fx" % ("orchard put (CLI)", args.m * 1.048576 / put,
                                                       args.m * 1.048576 / lput, put / lput))
        print("%-22s %10.1f MB/s %10.1f MB/s %7.1fx" % ("orchard get (CLI)", args.m * 1.048576 / get,
                                                       args.m * 1.048576 / lget, get / lget))
        print("# local dir column: put = cp into a new file, get = cp to /dev/null")
        print("# get returned identical bytes: %s" % same)
    finally:
        subprocess.run([ORCHARD, "local", "down", cdir], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
