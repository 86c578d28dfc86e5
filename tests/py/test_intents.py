"""Cross-server operations and their intents, seen from the servers'
databases: every intent is deleted once done, peers forget their
idempotency ("applied") records of intents that are done for good, and the
data of removed files is freed in batches, crash-safely."""
import os
import signal
import sqlite3
import time

from cluster import Cluster, wait_until


def rows(c, name, table):
    con = sqlite3.connect(os.path.join(c.dir, name, "meta.db"))
    try:
        return con.execute("SELECT COUNT(*) FROM %s" % table).fetchone()[0]
    finally:
        con.close()


def test_intents_done_and_applied_trimmed(cluster2):
    c = cluster2
    # 600 directories under / (entries on s0): about half of the inodes are
    # placed on s1, each through a MKDIR intent on s0 and an applied record
    # on s1.
    c.cli("mkdir", *["/d%d" % i for i in range(600)])
    # The root is on s0, so every inode on s1 is one of those directories.
    remote = rows(c, "s1", "inode")
    assert remote > 100
    wait_until(lambda: rows(c, "s0", "intent") == 0, what="intents to finish")
    # Trims go out every 256 finished intents: what is left is fewer than that.
    wait_until(lambda: rows(c, "s1", "applied") < 256, what="applied records trimmed")
    stats = {s["name"]: s for s in c.stats()["servers"]}
    assert stats["s0"]["intents_done"] >= remote
    assert stats["s1"]["requests"].get("SV2SV_APPLIED_TRIM", 0) >= 1
    # Removing them goes through RMDIR intents; nothing is left behind.
    c.cli("rm", "-r", *["/d%d" % i for i in range(600)])
    wait_until(lambda: rows(c, "s0", "intent") == 0, what="rmdir intents to finish")
    assert c.cli("ls", "/").stdout.split() == []
    assert rows(c, "s1", "inode") == 0


STRIP = 65536


def objects(c, name):
    con = sqlite3.connect(os.path.join(c.dir, name, "store.db"))
    try:
        return con.execute("SELECT COUNT(*) FROM obj").fetchone()[0]
    finally:
        con.close()


def put_files(c, tmp_path, n, size=2 * STRIP + 10):
    """n files in / (entries and inodes on s0), with data on every server."""
    src = tmp_path / "src"
    with open(src, "wb") as f:
        f.write(os.urandom(size))
    paths = ["/f%02d" % i for i in range(n)]
    for p in paths:
        c.cli("put", src, p)
    return paths


def scrub_clean(c):
    p = c.cli("scrub", "--all", check=False, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_free_data_batched(cluster2, tmp_path):
    """The data of removed files is freed in batches: one
    SV2SV_DATA_DELETE_MANY per peer for many files, one transaction for
    their intents, and nothing is left behind."""
    c = cluster2
    paths = put_files(c, tmp_path, 40)
    assert objects(c, "s0") == 40 and objects(c, "s1") == 40
    c.cli("rm", *paths)
    wait_until(lambda: objects(c, "s0") == 0 and objects(c, "s1") == 0,
               what="every object to be freed")
    wait_until(lambda: rows(c, "s0", "intent") == 0, what="free-data intents to finish")
    req = c.requests("s1")
    assert 1 <= req.get("SV2SV_DATA_DELETE_MANY", 0) < 40, req
    assert req.get("SV2SV_DATA_DELETE", 0) == 0, req   # no intent needed a retry alone
    assert c.server_stats()["s0"]["intents_done"] >= 40
    scrub_clean(c)


def test_free_data_crash_with_batch_in_flight(tmp_path):
    """The coordinator dies while a batch of free-data intents waits for a
    stopped peer: after the restart the intents are replayed, every object
    is freed on both servers, and the scrub finds no orphan."""
    c = Cluster(tmp_path / "c", nservers=2)
    c.set_cluster_option("op_timeout_ms", 2000)
    try:
        c.start_all()
        paths = put_files(c, tmp_path, 20)
        os.kill(c.pid("s1"), signal.SIGSTOP)
        try:
            c.cli("rm", *paths)          # answered at once: nobody waits for the data
            assert rows(c, "s0", "intent") == 20
            time.sleep(0.5)              # the batch went out to s1, which does not answer
            c.kill("s0")
        finally:
            os.kill(c.pid("s1"), signal.SIGCONT)
        c.start("s0")
        wait_until(lambda: rows(c, "s0", "intent") == 0, timeout=20,
                   what="replayed free-data intents to finish")
        assert objects(c, "s0") == 0 and objects(c, "s1") == 0
        assert c.cli("ls", "/").stdout.split() == []
        scrub_clean(c)
    finally:
        c.stop_all()


def test_free_data_peer_down_falls_back(tmp_path):
    """A batch whose peer is down goes on intent by intent (retried every
    second) and completes once the peer is back."""
    c = Cluster(tmp_path / "c", nservers=2)
    c.set_cluster_option("op_timeout_ms", 2000)
    try:
        c.start_all()
        paths = put_files(c, tmp_path, 10)
        c.kill("s1")
        c.cli("rm", *paths)
        wait_until(lambda: objects(c, "s0") == 0, what="s0's objects to be freed")
        assert rows(c, "s0", "intent") == 10
        c.start("s1")
        wait_until(lambda: rows(c, "s0", "intent") == 0, timeout=20,
                   what="free-data intents to finish after the peer is back")
        assert objects(c, "s1") == 0
        scrub_clean(c)
    finally:
        c.stop_all()
