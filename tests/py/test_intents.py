"""Cross-server operations and their intents, seen from the servers'
databases: every intent is deleted once done, and peers forget their
idempotency ("applied") records of intents that are done for good."""
import os
import sqlite3

from cluster import wait_until


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
    remote = sum(1 for i in range(600)
                 if "Server: 1" in c.cli("stat", "/d%d" % i).stdout)
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
