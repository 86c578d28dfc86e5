"""Power loss: the servers run with the power-cut simulation (common/pcut.h),
which records every write to meta.db, store.db, their WALs and the store's
blocks file until it is synced, and at a cut puts back everything not yet
synced, as a power loss at that instant could leave the disk.  The flusher
syncs the store (blocks, then store.db's WAL) and then meta.db's WAL.
After a restart the store must be consistent (SQLite integrity, no dangling
entries), everything fsynced before the cut must read back identical, and
nothing may read back as garbage: a file written without fsync is absent,
or holds, block by block, either its data or zeros (a hole: the old
contents of a new file)."""
import hashlib
import os
import random
import signal

import pytest

from cluster import Cluster, wait_until

BLOCK = 4096


def data_for(seed, size):
    return random.Random(repr(seed)).randbytes(size)


def put(c, tmp_path, path, data, fsync):
    local = tmp_path / ("src-%s" % hashlib.sha1(path.encode()).hexdigest())
    local.write_bytes(data)
    args = ["put"] + (["--fsync"] if fsync else []) + [str(local), path]
    c.cli(*args)


def get(c, tmp_path, path):
    local = tmp_path / "out"
    if local.exists():
        local.unlink()
    c.cli("get", path, str(local))
    return local.read_bytes()


def check_integrity(c):
    c.check_integrity()


def walk(c, path="/"):
    """Every entry listed must also be found by lookup (no dangling entries)."""
    out = {}
    names = c.cli("ls", path).stdout.split()
    for n in names:
        p = path.rstrip("/") + "/" + n
        st = c.cli("stat", p).stdout
        if "directory" in st:
            out.update(walk(c, p))
        else:
            out[p] = st
    return out


def run_round(tmp_path, seed, cut_mode):
    rnd = random.Random(seed)
    c = Cluster(tmp_path / ("c%d" % seed), nservers=2)
    done = {n: os.path.join(c.dir, n + ".pcut-done") for n in c.names}
    for n in c.names:
        env = {"ORCH_PCUT": "1", "ORCH_PCUT_DONE": done[n]}
        if cut_mode == "at-write" and n == "s0":
            env["ORCH_PCUT_AT"] = str(rnd.randint(40, 400))
        c.start(n, wait=False, env=env)
    for n in c.names:
        c.wait_up(n)
    try:
        durable = {}
        c.cli("mkdir", "/keep")
        for i in range(6):
            size = rnd.choice([0, 1, 5000, 65536, 70000, 200000])
            data = data_for((seed, i), size)
            put(c, tmp_path, "/keep/f%d" % i, data, fsync=True)
            durable["/keep/f%d" % i] = data
        loose = {}
        c.cli("mkdir", "/loose")
        k = rnd.randint(1, 25)
        for i in range(60):
            if cut_mode == "signal" and i == k:
                for n in c.names:
                    c.procs[n].send_signal(signal.SIGUSR2)
                break
            size = rnd.choice([1, 4096, 65536, 100000, 300000])
            data = data_for((seed, "l", i), size)
            path = "/loose/g%d" % i
            local = tmp_path / "loose-src"
            local.write_bytes(data)
            r = c.cli("put", str(local), path, check=False)
            if r.returncode != 0:
                break  # the cut came in the middle of this put
            loose[path] = data
            if rnd.random() < 0.3:
                c.cli("mkdir", "/loose/d%d" % i, check=False)
        if cut_mode == "at-write":
            # s0 cut itself at its N-th write; s1 loses power a moment later.
            wait_until(lambda: c.procs["s0"].poll() is not None, 30, what="s0 power cut")
            c.procs["s1"].send_signal(signal.SIGUSR2)
        for n in c.names:
            wait_until(lambda n=n: c.procs[n].poll() is not None, 30, what=n + " to die")
            wait_until(lambda n=n: os.path.exists(done[n]), 30, what=n + " to be reverted")
            assert c.procs[n].returncode == 137, c.log_tail(n)
            assert "power cut" in c.log_tail(n)

        check_integrity(c)
        c.start_all()
        for path, data in durable.items():
            assert get(c, tmp_path, path) == data, "fsynced file %s lost" % path
        tree = walk(c)
        for path in tree:
            if not path.startswith("/loose/g"):
                continue
            data = get(c, tmp_path, path)
            want = loose.get(path)
            if want is None:
                # The put that failed at the cut: whatever survived must be a
                # prefix of the data, block by block, or zeros.
                want = data_for((seed, "l", int(path.rsplit("g", 1)[1])), 300000)
            assert len(data) <= len(want)
            for off in range(0, len(data), BLOCK):
                got = data[off:off + BLOCK]
                assert got == want[off:off + len(got)] or got == bytes(len(got)), \
                    "garbage in %s at %d" % (path, off)
        # The cluster works on: new data, fsynced, reads back.
        put(c, tmp_path, "/after", b"alive" * 1000, fsync=True)
        assert get(c, tmp_path, "/after") == b"alive" * 1000
    finally:
        c.stop_all()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_power_cut_by_signal(tmp_path, seed):
    run_round(tmp_path, seed, "signal")


@pytest.mark.parametrize("seed", [11, 12])
def test_power_cut_mid_write(tmp_path, seed):
    run_round(tmp_path, seed, "at-write")


def test_simulation_keeps_sqlite_locks(tmp_path):
    """The simulation must not change what it simulates.  It used to save the
    bytes a checkpoint overwrote by opening meta.db again, and closing that
    descriptor dropped the server's POSIX locks on it (fcntl(2)).  A reader
    in another process (the tests' intent counts) then closed as the "last"
    connection, checkpointed and deleted the WAL the server still wrote to:
    the server's later commits went to a deleted file, and every fresh
    connection, scrub's included, failed with SQLITE_IOERR_SHORT_READ."""
    c = Cluster(tmp_path / "c", nservers=1)
    c.start_pcut("s0")
    try:
        before = c.server_stats()["s0"]["wal_restarts"]
        for i in range(20):
            c.cli("mkdir", "/d%d" % i)
        # The flusher's checkpoint writes meta.db through the simulation.
        wait_until(lambda: c.server_stats()["s0"]["wal_restarts"] > before, 30,
                   what="a checkpoint of meta.db")
        c.intents("s0")  # another process opens and closes meta.db
        wal = os.path.join(c.dir, "s0", "meta.db-wal")
        fds = os.path.join("/proc", str(c.procs["s0"].pid), "fd")
        deleted = [os.readlink(os.path.join(fds, f)) for f in os.listdir(fds)
                   if os.readlink(os.path.join(fds, f)) == wal + " (deleted)"]
        assert not deleted, "the server writes to a deleted WAL"
        for i in range(20, 40):
            c.cli("mkdir", "/d%d" % i)
        assert sorted(c.cli("ls", "/").stdout.split()) == sorted("d%d" % i for i in range(40))
        c.cli("scrub", "--all")
    finally:
        c.stop_all()


def test_what_a_mount_fsynced_survives_a_cut_of_every_server(tmp_path):
    """A mount's fsync asks only the servers it changed the file on since
    its last fsync (docs/mount.md, "Data"): whatever it skipped must hold
    nothing of the file to make durable.  Writes over random ranges of a
    file striped in 4 KiB strips over three servers, a truncate between
    them, each batch fsynced; then the power of every server is cut at
    once, and the file reads back exactly as fsynced."""
    from mount import Mount

    c = Cluster(tmp_path / "c", nservers=3, strip_size=BLOCK)
    rnd = random.Random(5)
    m = None
    try:
        for n in c.names:
            c.start_pcut(n, wait=False)
        for n in c.names:
            c.wait_up(n)
        m = Mount(c, str(tmp_path / "mnt")).start()
        path = m.path("f")
        model = bytearray()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            for batch in range(12):
                if batch == 6:
                    os.ftruncate(fd, 5 * BLOCK + 100)
                    del model[5 * BLOCK + 100:]
                for _ in range(rnd.randrange(1, 4)):
                    # Mostly inside one strip, sometimes across several.
                    off = rnd.randrange(0, 24 * BLOCK)
                    data = rnd.randbytes(rnd.choice((100, BLOCK, 3 * BLOCK + 7)))
                    os.pwrite(fd, data, off)
                    if len(model) < off:
                        model.extend(bytes(off - len(model)))
                    model[off:off + len(data)] = data
                os.fsync(fd)
        finally:
            os.close(fd)
        for n in c.names:
            c.procs[n].send_signal(signal.SIGUSR2)
        for n in c.names:
            c.wait_power_cut(n)
        m.stop(check=False)
        m = None
        for n in c.names:
            c.start(n, wait=False)
        for n in c.names:
            c.wait_up(n)
        got = get(c, tmp_path, "/f")
        assert len(got) == len(model), "size %d, fsynced %d" % (len(got), len(model))
        bad = [i for i in range(0, len(model), BLOCK) if got[i:i + BLOCK] != model[i:i + BLOCK]]
        assert not bad, "blocks that differ from what was fsynced: %s" % bad
    finally:
        if m:
            m.stop(check=False)
        c.stop_all(check_logs=False)
