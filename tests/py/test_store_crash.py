"""The extent store survives SIGKILL of its server with writes in flight
(docs/SPEC-store.md, I19 and I22).

A 2-server cluster; four files striped over both.  Writer threads send
CL2SV_WRITE requests straight to s1 (the raw protocol, tests/lib/wire.py),
each thread to its own fixed regions of s1's objects, so each region has at
most one write in flight.  s1 is SIGKILLed at a random moment, many times.
After each kill, before the restart, the offline checker (build/tests/
store-check --data) must find nothing; after the restart every region must
hold exactly its last acknowledged write, or the write that was in flight
when the server died (whole: never a mix, never garbage), and reads must not
fail.

Also: a server killed in the middle of a chunked delete (ORCH_STORE_KILL=
chunk) finishes it when it starts again (I21), and the checker tool refuses
a store its server has open.
"""
import os
import random
import sqlite3
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import wire  # noqa: E402
from cluster import BUILDDIR, Cluster, wait_until, stat_layout  # noqa: E402

STORE_CHECK = os.path.join(BUILDDIR, "tests", "store-check")
CL2SV_READ = 0x0201
CL2SV_WRITE = 0x0202
CRED_ROOT = struct.pack("<IIH", 0, 0, 0)
STRIP = 65536
NFILES = 4
FILE_SIZE = 4 << 20           # each file: 2 MiB of it on s1
LOCAL_SIZE = FILE_SIZE // 2
NTHREADS = 4
ROUNDS = 10


def local_image(data, server_idx, f):
    """The bytes of @data that server @server_idx's object holds, in its
    object's offsets (docs/SPEC-wire.md, Rules)."""
    ss, cnt, first = f["strip_size"], f["stripe_count"], f["first_server"]
    out = bytearray()
    for i in range(0, (len(data) + ss - 1) // ss):
        if (first + i) % cnt == server_idx:
            out += data[i * ss:(i + 1) * ss]
    return bytes(out)


class Conn:
    def __init__(self, c, name):
        self.p = wire.Peer(c.address(name), timeout=20)
        assert self.p.handshake(wire.read_key(c.dir)) == 0
        self.reqid = 100

    def call(self, type_, payload):
        self.reqid += 1
        self.p.send(wire.frame(type_, payload, reqid=self.reqid))
        t, flags, rid, body = self.p.recv_frame()
        assert t == type_ and flags & wire.REPLY and rid == self.reqid, (t, flags, rid)
        return struct.unpack_from("<I", body)[0], body[4:]

    def write(self, handle, off, data):
        st, _ = self.call(CL2SV_WRITE, CRED_ROOT + struct.pack("<QQI", handle, off, len(data))
                          + data)
        return st

    def read(self, handle, off, length):
        st, body = self.call(CL2SV_READ, CRED_ROOT + struct.pack("<QQI", handle, off, length))
        if st != 0:
            return st, b""
        n, = struct.unpack_from("<I", body)
        return 0, body[4:4 + n]

    def close(self):
        self.p.close()


class Region:
    def __init__(self, handle, off, length, value):
        self.handle = handle
        self.off = off
        self.length = length
        self.value = value        # last acknowledged (or verified) contents
        self.inflight = None      # sent, not acknowledged


def store_check(data_dir, data=True):
    args = [STORE_CHECK] + (["--data"] if data else []) + [data_dir]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def ignored_rules():
    """ORCH_TEST_IGNORE_RULES="I3,I7": findings of these rules do not fail
    the test (to look past a known bug); they are still shown."""
    return {r for r in os.environ.get("ORCH_TEST_IGNORE_RULES", "").split(",") if r}


def assert_store_clean(data_dir, what):
    r = store_check(data_dir, data=True)
    assert r.returncode in (0, 1), "%s: store-check --data: rc %d\n%s%s" % (
        what, r.returncode, r.stdout, r.stderr)
    bad = [ln for ln in r.stdout.splitlines() if ln.split(" ", 1)[0] not in ignored_rules()]
    assert not bad, "%s: store-check --data: rc %d\n%s%s" % (
        what, r.returncode, r.stdout, r.stderr)


def read_all(c, name, regions):
    """Reads every region from @name: {region index: bytes}."""
    conn = Conn(c, name)
    try:
        out = {}
        for i, r in enumerate(regions):
            st, data = conn.read(r.handle, r.off, r.length)
            assert st == 0, "READ of region %d (handle %016x off %d) failed: status %d" % (
                i, r.handle, r.off, st)
            out[i] = data + bytes(r.length - len(data))
        return out
    finally:
        conn.close()


def test_sigkill_with_writes_in_flight(tmp_path):
    assert os.path.exists(STORE_CHECK), "build it: make " + STORE_CHECK
    rnd = random.Random(4242)
    c = Cluster(tmp_path / "c", nservers=2)
    c.start_all()
    victim, vidx = "s1", 1
    data_dir = os.path.join(c.dir, victim)
    try:
        # Files striped over both servers; s1's halves get the regions.
        regions = []
        for k in range(NFILES):
            data = rnd.randbytes(FILE_SIZE)
            src = tmp_path / ("f%d" % k)
            src.write_bytes(data)
            c.cli("put", str(src), "/f%d" % k)
            f = stat_layout(c, "/f%d" % k)
            assert f["stripe_count"] == 2, f
            image = local_image(data, vidx, f)
            assert len(image) == LOCAL_SIZE
            slot = 48 * 1024
            for s in range(LOCAL_SIZE // slot):
                a = rnd.randrange(0, 8192)
                length = rnd.randrange(1, slot - a)
                off = s * slot + a
                regions.append(Region(f["handle"], off, length, image[off:off + length]))
        # What is there now reads back (through the store, not the page cache).
        got = read_all(c, victim, regions)
        for i, r in enumerate(regions):
            assert got[i] == r.value, "region %d differs before any crash" % i

        total_acked = 0
        inflight = {False: 0, True: 0}   # writes in flight at a kill: lost, kept
        for rnd_no in range(ROUNDS):
            stop = threading.Event()
            errors = []
            acked = [0] * NTHREADS

            def writer(t, seed):
                wr = random.Random(seed)
                mine = [r for i, r in enumerate(regions) if i % NTHREADS == t]
                try:
                    conn = Conn(c, victim)
                except OSError:
                    return
                try:
                    while not stop.is_set():
                        r = wr.choice(mine)
                        data = wr.randbytes(r.length)
                        r.inflight = data
                        try:
                            st = conn.write(r.handle, r.off, data)
                        except (OSError, EOFError, AssertionError):
                            return  # the server died: this write stays in flight
                        if st != 0:
                            errors.append("WRITE status %d" % st)
                            r.inflight = None
                            return
                        r.value = data
                        r.inflight = None
                        acked[t] += 1
                finally:
                    conn.close()

            threads = [threading.Thread(target=writer, args=(t, rnd.random()))
                       for t in range(NTHREADS)]
            for t in threads:
                t.start()
            # Kill at a random moment, once writes are flowing.
            wait_until(lambda: sum(acked) >= 5 or errors, timeout=30,
                       what="writes to be acknowledged")
            time.sleep(rnd.uniform(0.0, 0.6))
            c.kill(victim)
            stop.set()
            for t in threads:
                t.join(60)
                assert not t.is_alive()
            assert not errors, errors
            total_acked += sum(acked)

            # The offline checker finds nothing (the server is down).
            assert_store_clean(data_dir, "round %d" % rnd_no)

            c.start(victim)
            got = read_all(c, victim, regions)
            for i, reg in enumerate(regions):
                if reg.inflight is not None:
                    inflight[got[i] == reg.inflight] += 1
                if got[i] == reg.value:
                    pass
                elif reg.inflight is not None and got[i] == reg.inflight:
                    reg.value = reg.inflight
                else:
                    diff = next(j for j in range(reg.length) if got[i][j] != reg.value[j])
                    raise AssertionError(
                        "round %d: region %d (handle %016x off %d len %d) is neither its "
                        "acknowledged write nor the one in flight (first difference at "
                        "byte %d)" % (rnd_no, i, reg.handle, reg.off, reg.length, diff))
                reg.inflight = None
        assert total_acked >= ROUNDS * 5
        print("%d writes acknowledged; in flight at the kills: %d kept, %d lost" % (
            total_acked, inflight[True], inflight[False]))

        # A clean stop leaves a clean store too, and it works on after.
        c.stop(victim)
        assert_store_clean(data_dir, "after a clean stop")
        c.start(victim)
        got = read_all(c, victim, regions)
        for i, reg in enumerate(regions):
            assert got[i] == reg.value, "region %d differs after a clean restart" % i
    finally:
        c.stop_all()


def test_store_check_refuses_a_running_server(cluster2):
    """The checker tool opens the store exclusively: with the server up it
    fails (exit 4) rather than reading under a live writer."""
    c = cluster2
    r = store_check(os.path.join(c.dir, "s0"), data=False)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "busy" in r.stderr.lower(), r.stderr


def test_kill_in_a_chunked_delete_is_finished_at_open(tmp_path):
    """I21 through a server: deleting a file whose object on s1 has 600
    extents frees them 256 per transaction; s1 runs with
    ORCH_STORE_KILL=chunk and dies after the first chunk.  The work item is
    left in store.db; the restarted server finishes it, the file is gone and
    the checker is clean."""
    assert os.path.exists(STORE_CHECK), "build it: make " + STORE_CHECK
    c = Cluster(tmp_path / "c", nservers=2)
    c.start_all()
    victim = "s1"
    ddir = os.path.join(c.dir, victim)
    try:
        src = tmp_path / "empty"
        src.write_bytes(b"")
        c.cli("put", str(src), "/big")
        h = stat_layout(c, "/big")["handle"]
        conn = Conn(c, victim)
        try:
            blk = bytes(range(256)) * 16
            for i in range(600):  # every other block: no two extents adjacent
                assert conn.write(h, i * 8192, blk) == 0
        finally:
            conn.close()
        c.stop(victim)
        c.start(victim, env={"ORCH_STORE_KILL": "chunk"})
        c.cli("rm", "/big", check=False, timeout=60)
        wait_until(lambda: not c.alive(victim), timeout=30,
                   what="s1 to die at the chunk kill point")
        assert c.procs[victim].returncode == -9, c.log_tail(victim)
        assert "kill point 'chunk'" in c.log_text(victim)

        con = sqlite3.connect("file:%s?mode=ro" % os.path.join(ddir, "store.db"), uri=True)
        try:
            work = con.execute("SELECT type, progress FROM work").fetchall()
        finally:
            con.close()
        assert len(work) == 1, "no interrupted work item: %r" % work

        c.start(victim)
        wait_until(lambda: c.cli("stat", "/big", check=False).returncode != 0, timeout=30,
                   what="/big to be gone")
        c.stop(victim)
        con = sqlite3.connect("file:%s?mode=ro" % os.path.join(ddir, "store.db"), uri=True)
        try:
            assert con.execute("SELECT count(*) FROM work").fetchone()[0] == 0
            key = h ^ (1 << 63)
            key = key - (1 << 64) if key >= 1 << 63 else key
            assert con.execute("SELECT count(*) FROM obj WHERE handle = ?",
                               (key,)).fetchone()[0] == 0
        finally:
            con.close()
        assert_store_clean(ddir, "after the resumed delete")
        c.start(victim)
        c.cli("put", str(src), "/again")
    finally:
        c.stop_all()
