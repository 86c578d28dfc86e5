"""Servers stopping, crashing and coming back.

* A clean stop and start of the whole cluster keeps every file and directory.
* SIGKILL of one server in the middle of a stream of puts loses nothing that
  was acknowledged, leaves no dangling directory entries, and the intents
  that were cut short complete once it is back (README "Durability").
* A client asking a stopped or dead server gets an error within
  op_timeout_ms, not a hang, and works again once the server is back, without
  restarting (docs/SPEC-wire.md, DESIGN "Wire protocol").
"""
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from cluster import ORCHARD, Cluster, server_of, wait_until  # noqa: E402

STRIP = 65536
SERVER_DOWN = re.compile(r"timed out|Input/output error|Host is down|Connection refused")


@pytest.fixture
def cluster3_fast(tmp_path):
    """3 servers with op_timeout_ms = 2000 (clients and servers)."""
    c = Cluster(tmp_path / "c", nservers=3)
    c.set_cluster_option("op_timeout_ms", 2000)
    try:
        c.start_all()
        yield c
    finally:
        for name in c.names:
            pid = c.pid(name)
            if pid:
                os.kill(pid, signal.SIGCONT)  # in case a test left it stopped
        c.stop_all()


def cat(c, path, timeout=60):
    p = subprocess.run([ORCHARD, "-c", c.conf, "cat", path], capture_output=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def put_bytes(c, tmp_path, data, dest, check=True):
    src = tmp_path / ("src-" + dest.strip("/").replace("/", "_"))
    with open(src, "wb") as f:
        f.write(data)
    return c.cli("put", src, dest, check=check)


def snapshot(c, root="/"):
    """Everything observable about a tree: ls -l of every directory, stat of
    every entry (atime aside) and every regular file's bytes."""
    snap = {}
    todo = [root]
    while todo:
        d = todo.pop()
        listing = c.cli("ls", "-l", d).stdout
        snap["ls " + d] = listing
        for line in listing.splitlines():
            f = line.split(None, 7)
            if len(f) < 8:
                continue
            name = f[7].split(" -> ")[0]
            path = d.rstrip("/") + "/" + name
            st = c.cli("stat", path).stdout
            snap["stat " + path] = "\n".join(
                ln for ln in st.splitlines() if not re.match(r"Access: \d", ln))
            if line.startswith("d"):
                todo.append(path)
            elif line.startswith("-"):
                rc, data, err = cat(c, path)
                assert rc == 0, err
                snap["data " + path] = data
    return snap


def test_clean_restart_keeps_everything(cluster3, tmp_path):
    c = cluster3
    rnd = random.Random(10)
    c.cli("mkdir", "-p", "/p/q/r", "/x/y", "/z")
    for i in range(12):
        d = ["/", "/p", "/p/q", "/p/q/r", "/x", "/x/y", "/z"][i % 7]
        put_bytes(c, tmp_path, rnd.randbytes(rnd.choice([0, 1, 5000, 3 * STRIP + 7, 700000])),
                  d.rstrip("/") + "/f%d" % i)
    c.cli("ln", "-s", "/p/q/f2", "/x/link")
    c.cli("ln", "/p/f1", "/z/hard")
    c.cli("chmod", "750", "/x/y")
    c.cli("truncate", "-s", 5 * STRIP, "/z/sparse")
    c.cli("xattr", "set", "/p/f1", "user.colour", "green")
    c.cli("mv", "/x/y/f5", "/p/q/r/moved")
    before = snapshot(c)
    assert len([k for k in before if k.startswith("data ")]) == 14

    c.stop_all()
    for name in c.names:
        assert c.procs[name].returncode == 0, c.log_tail(name)
        assert "stopped cleanly" in c.log_text(name)
    c.start_all()

    after = snapshot(c)
    assert sorted(after) == sorted(before)
    for k in before:
        assert after[k] == before[k], k
    assert c.cli("xattr", "get", "/p/f1", "user.colour").stdout == "green\n"
    # And it still takes changes.
    put_bytes(c, tmp_path, b"new", "/p/q/r/new")
    rc, data, _ = cat(c, "/p/q/r/new")
    assert rc == 0 and data == b"new"


def test_sigkill_during_puts_loses_nothing_acknowledged(cluster3_fast, tmp_path):
    c = cluster3_fast
    c.cli("mkdir", "/w")
    # The victim holds the directory (so the new inodes) and a strip of each file.
    victim = c.names[server_of(c, "/w")]
    results = []          # (path, data, rc) in order
    stop = threading.Event()
    rnd = random.Random(11)

    def loop():
        i = 0
        while not stop.is_set() and i < 400:
            data = rnd.randbytes(rnd.randint(0, 6 * STRIP))
            path = "/w/f%04d" % i
            src = tmp_path / ("l%04d" % i)
            with open(src, "wb") as f:
                f.write(data)
            p = subprocess.run([ORCHARD, "-c", c.conf, "put", str(src), path],
                               capture_output=True, timeout=60)
            results.append((path, data, p.returncode))
            i += 1

    t = threading.Thread(target=loop)
    t.start()
    try:
        wait_until(lambda: sum(1 for r in results if r[2] == 0) >= 15, timeout=30,
                   what="some puts to succeed")
        c.kill(victim)
        n_at_kill = len(results)
        # Some puts run (and fail) while it is down.
        wait_until(lambda: len(results) >= n_at_kill + 3, timeout=30,
                   what="puts to go on while a server is down")
        c.start(victim)
        n_at_start = len(results)
        wait_until(lambda: sum(1 for r in results[n_at_start:] if r[2] == 0) >= 10,
                   timeout=30, what="puts to succeed again after the restart")
    finally:
        stop.set()
        t.join(120)
    assert not t.is_alive()
    assert any(r[2] != 0 for r in results), "no put failed while a server was down"

    # Every acknowledged put reads back identical.
    for path, data, rc in results:
        if rc == 0:
            got_rc, got, err = cat(c, path)
            assert got_rc == 0, "%s: %s" % (path, err)
            assert got == data, "%s differs after the crash" % path
    # No dangling entries: everything listed can be stat'ed and read.
    listing = c.cli("ls", "-l", "/w").stdout.splitlines()
    names = [ln.split(None, 7)[7] for ln in listing]
    acked = {p.rsplit("/", 1)[1] for p, _, rc in results if rc == 0}
    assert acked <= set(names)
    for name in names:
        c.cli("stat", "/w/" + name)
        rc, _, err = cat(c, "/w/" + name)
        assert rc == 0, "%s listed but unreadable: %s" % (name, err)
    c.check_logs()


def test_intents_complete_after_peer_crash(cluster3_fast, tmp_path):
    """mkdirs whose inode goes to a dead server wait in intents; once it is
    back they complete, and new ones work."""
    c = cluster3_fast
    c.kill("s1")
    # Directory placement hashes the name: some of these belong on s1.
    outcome = {}
    for i in range(12):
        p = c.cli("mkdir", "/m%02d" % i, check=False, timeout=30)
        outcome["/m%02d" % i] = (p.returncode, p.stderr)
    failed = [d for d, (rc, _) in outcome.items() if rc != 0]
    assert failed, "no mkdir needed the dead server"
    for d in failed:
        assert SERVER_DOWN.search(outcome[d][1]), outcome[d][1]
    c.start("s1")

    # The intents of the failed mkdirs complete: the directories appear, on s1.
    def all_there():
        return all(c.cli("stat", d, check=False).returncode == 0 for d in failed)
    wait_until(all_there, timeout=20, interval=0.2, what="pending mkdir intents to finish")
    for d in failed:
        assert server_of(c, d) == 1, d
        c.cli("touch", d + "/inside")
    # New mkdirs landing on s1 work at once.
    fresh = ["/n%02d" % i for i in range(12)]
    for d in fresh:
        c.cli("mkdir", d)
    assert any(server_of(c, d) == 1 for d in fresh)
    listing = c.cli("ls", "-l", "/").stdout.splitlines()
    assert len(listing) == 24
    for ln in listing:
        c.cli("stat", "/" + ln.split(None, 7)[7])
    done = {s["name"]: s["intents_done"] for s in c.stats()["servers"]}
    assert done["s0"] >= len(failed), done
    # The coordinator retried while s1 was down, but does not keep failing.
    log = c.log_text("s0")
    assert len(re.findall(r"cannot finish intent", log)) <= 2, log[-3000:]
    # Retries every second while s1 was down are not each a log line.
    assert len(re.findall(r"peer down: server=s1", log)) <= 3, log[-3000:]


def test_intent_replay_after_coordinator_crash(cluster3_fast, tmp_path):
    """Intents left in the coordinator's database by a SIGKILL are driven
    again when it starts: pending mkdirs complete, a deleted file's data is
    freed on the server that was down."""
    c = cluster3_fast
    data = random.Random(15).randbytes(6 * STRIP)
    put_bytes(c, tmp_path, data, "/f")
    assert server_of(c, "/f") == 0
    c.kill("s1")
    pending = []
    for i in range(12):
        p = c.cli("mkdir", "/m%02d" % i, check=False, timeout=30)
        if p.returncode:
            assert SERVER_DOWN.search(p.stderr), p.stderr
            pending.append("/m%02d" % i)
    assert pending
    c.cli("rm", "/f")  # freeing the data waits for nobody
    c.kill("s0")       # the coordinator dies with its intents open
    c.start("s1")
    c.start("s0")

    def done():
        return all(c.cli("stat", d, check=False).returncode == 0 for d in pending)
    wait_until(done, timeout=20, interval=0.2, what="replayed mkdir intents to finish")
    wait_until(lambda: c.server_stats()["s1"]["data_objects_deleted"] >= 1, timeout=20,
               interval=0.2, what="the replayed free-data intent to reach s1")
    for d in pending:
        assert server_of(c, d) == 1
    listing = c.cli("ls", "-l", "/").stdout.splitlines()
    assert sorted(ln.split(None, 7)[7] for ln in listing) == ["m%02d" % i for i in range(12)]
    for ln in listing:
        c.cli("stat", "/" + ln.split(None, 7)[7])
    c.check_logs()


def test_failed_put_leaves_no_stale_bytes(cluster3_fast, tmp_path):
    """A put that fails because a server is down publishes only what it
    wrote in full; strips that did land past that size must not show when
    the file grows later."""
    c = cluster3_fast
    src = b"\xab" * (8 << 20)
    c.stop("s2")
    p = put_bytes(c, tmp_path, src, "/partial", check=False)
    assert p.returncode == 1 and SERVER_DOWN.search(p.stderr), p.stderr
    assert p.stderr.startswith("orchard: cannot write '/partial': "), p.stderr
    c.start("s2")
    size = int(re.search(r"Size:\s+(\d+)", c.cli("stat", "/partial").stdout).group(1))
    rc, got, err = cat(c, "/partial")
    assert rc == 0 and got == src[:size], err
    c.cli("truncate", "-s", len(src), "/partial")
    rc, got, err = cat(c, "/partial")
    assert rc == 0 and len(got) == len(src), err
    assert got[:size] == src[:size]
    assert got[size:].count(0) == len(src) - size, "stale bytes past the published size"


def test_client_times_out_on_a_hung_server(cluster3_fast, tmp_path):
    c = cluster3_fast
    data = random.Random(12).randbytes(6 * STRIP)
    put_bytes(c, tmp_path, data, "/f")
    pid = c.pid("s1")
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        rc, _, err = cat(c, "/f", timeout=30)
        elapsed = time.monotonic() - t0
        assert rc == 1, err
        assert err.startswith("orchard: cannot read '/f': ") and "timed out" in err, err
        assert elapsed < 2.0 + 2.5, "took %.1f s with op_timeout_ms = 2000" % elapsed
        p = c.cli("ping", check=False, timeout=30)
        assert p.returncode == 1
        assert re.search(r"^s1\s.*\bdown\b", p.stdout, re.M), p.stdout
    finally:
        os.kill(pid, signal.SIGCONT)
    rc, got, err = cat(c, "/f")
    assert rc == 0 and got == data, err


def test_client_error_and_recovery_when_server_down(cluster3_fast, tmp_path):
    c = cluster3_fast
    data = random.Random(13).randbytes(6 * STRIP)
    put_bytes(c, tmp_path, data, "/f")
    c.stop("s2")
    t0 = time.monotonic()
    rc, _, err = cat(c, "/f", timeout=30)
    assert rc == 1 and SERVER_DOWN.search(err), err
    assert err.startswith("orchard: cannot read '/f': "), err
    assert time.monotonic() - t0 < 4.5
    p = put_bytes(c, tmp_path, data, "/g", check=False)
    assert p.returncode == 1 and SERVER_DOWN.search(p.stderr), p.stderr
    c.start("s2")
    rc, got, err = cat(c, "/f")
    assert rc == 0 and got == data, err
    put_bytes(c, tmp_path, data, "/g")
    rc, got, err = cat(c, "/g")
    assert rc == 0 and got == data, err


def test_one_client_reconnects_after_server_restart(cluster3_fast, tmp_path):
    """One long-lived client (`put -` fed through a pipe): a server restarts
    between two of its writes; the second write reconnects by itself."""
    c = cluster3_fast
    chunk = 4 << 20  # ORCH_CLI_IO_CHUNK: one read from stdin, one striped write
    rnd = random.Random(14)
    part1, part2 = rnd.randbytes(chunk), rnd.randbytes(chunk + 12345)
    bytes0 = {s["name"]: s["data_bytes_written"] for s in c.stats()["servers"]}
    p = subprocess.Popen([ORCHARD, "-c", c.conf, "put", "-", "/stream"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        p.stdin.write(part1)
        p.stdin.flush()

        # Committed, not only received: a write still in flight when s1
        # stops would fail the put, which is not what this test is about.
        def committed_everywhere():
            now = {s["name"]: s["data_bytes_written"] for s in c.stats()["servers"]}
            return (all(now[n] > bytes0[n] for n in c.names) and
                    sum(now[n] - bytes0[n] for n in c.names) >= chunk)
        wait_until(committed_everywhere, timeout=20, what="the first chunk committed everywhere")
        c.stop("s1")
        c.start("s1")
        p.stdin.write(part2)
        p.stdin.close()
        rc = p.wait(30)
        err = p.stderr.read().decode(errors="replace")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == 0, err
    rc, got, err = cat(c, "/stream")
    assert rc == 0, err
    assert got == part1 + part2


def test_namespace_wal_emptied_when_idle(tmp_path):
    """The flusher empties the namespace WAL once the writer pauses (DESIGN
    "The namespace WAL"): after a burst of changes meta.db-wal goes back to
    zero bytes within a few flushes, the restart is counted, and everything
    is still there after a restart of the server."""
    c = Cluster(tmp_path / "c", nservers=1)
    c.set_cluster_option("commit_interval_ms", 50)
    c.start_all()
    try:
        wal = os.path.join(c.dir, "s0", "meta.db-wal")
        assert os.path.exists(wal), "data directory layout changed"
        names = ["/d%03d" % i for i in range(300)]
        c.cli("mkdir", *names)
        wait_until(lambda: os.path.getsize(wal) == 0 and
                   c.server_stats()["s0"]["wal_restarts"] >= 1,
                   what="the namespace WAL emptied by the flusher")
        c.cli("mkdir", "/after")
        c.stop("s0")
        c.start("s0")
        listed = set(c.cli("ls", "/").stdout.split())
        assert {n.lstrip("/") for n in names} | {"after"} <= listed
    finally:
        c.stop_all()
