"""Data objects whose inode a power cut took away (docs/DESIGN.md,
"Orphaned data objects").

A file is put without fsync, striped over s0 (its inode's server) and s1,
and s0 loses power before anything was durable: the file is gone, as it
may be, but s1 still holds a strip under the dead handle.  Two things must
follow.  The handle is never handed out again (the counter reservation was
durable before the handle left s0), so no new file adopts the dead strip;
and s1 reclaims the strip once s0 says the inode does not exist, so scrub
is clean again without anyone's help.

The servers run with a long commit interval: nothing becomes durable by
itself, only what the protocol forces."""
import pytest

from cluster import ON_LOG, Cluster, wait_until

STRIP = 65536
SIZE = 300 * 1000   # strips 0, 2, 4 on s0 and 1, 3 on s1


def handle(c, path):
    out = c.cli("stat", path).stdout
    return int(out.split("Handle: 0x")[1].split()[0], 16)


def exists(c, path):
    return c.cli("stat", path, check=False).returncode == 0


def lost_file_cluster(tmp_path):
    """A cluster in which s0 lost /lost (its strips on s1 remain), s0
    restarted; returns (cluster, the dead file's handle, its data)."""
    c = Cluster(tmp_path / "c", nservers=2,
                extra="\n[cluster]\ncommit_interval_ms = 600000\n")
    try:
        c.start_all()
        c.cli("mkdir", "/keep")       # durable by a clean stop
        c.stop_all()
        c.start_pcut("s0")
        c.start("s1")
        # The first create after a start reserves handles, and that commit is
        # synced; the file after it is not.
        c.cli("touch", "/first")  # in /, held by s0
        data = bytes((i * 7 + 1) & 0xff or 1 for i in range(SIZE))  # no zero byte
        src = tmp_path / "src"
        src.write_bytes(data)
        c.cli("put", src, "/lost")
        dead = handle(c, "/lost")
        assert dead >> 48 == 0, "the inode is on s0"
        c.power_cut("s0")
        c.start("s0")
        assert not exists(c, "/lost"), "the unsynced file survived: nothing to test"
    except BaseException:
        c.stop_all(check_logs=False)  # no server outlives a failed setup
        raise
    return c, dead, data


@pytest.mark.skipif(ON_LOG, reason="a log syncs every namespace change: a cut loses none")
def test_dead_handle_never_reissued(tmp_path):
    c, dead, data = lost_file_cluster(tmp_path)
    try:
        out = tmp_path / "out"
        for i in range(20):
            path = "/new%d" % i
            c.cli("touch", path)
            assert handle(c, path) != dead, "handle 0x%x handed out twice" % dead
            c.cli("truncate", "-s", SIZE, path)
            if out.exists():
                out.unlink()
            c.cli("get", path, out)
            assert out.read_bytes() == bytes(SIZE), "%s reads a dead file's bytes" % path
        c.stop_all()
    finally:
        c.stop_all(check_logs=False)


@pytest.mark.skipif(ON_LOG, reason="a log syncs every namespace change: a cut loses none")
def test_orphaned_strips_reclaimed(tmp_path):
    c, dead, data = lost_file_cluster(tmp_path)
    try:
        # s1 learns from s0's restart that s0 may have lost inodes, and asks.
        wait_until(lambda: c.server_stats()["s1"]["data_objects_reclaimed"] >= 1,
                   30, what="s1 to reclaim the dead file's strips")
        assert "reclaimed" in c.log_text("s1")
        p = c.cli("scrub", "--all", check=False, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        # Live files' strips are kept.
        src = tmp_path / "live"
        src.write_bytes(data)
        c.cli("put", "--fsync", src, "/keep/live")
        c.stop("s0")
        c.start("s0")
        before = c.server_stats()["s1"]["data_objects_reclaimed"]
        out = tmp_path / "out"
        c.cli("get", "/keep/live", out)
        assert out.read_bytes() == data
        p = c.cli("scrub", "--all", check=False, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        assert c.server_stats()["s1"]["data_objects_reclaimed"] == before
        c.stop_all()
        c.store_check_all()
    finally:
        c.stop_all(check_logs=False)
