"""I/O errors under a server's blocks file: a failing disk is explicit.

The errors are injected by the store's own block I/O layer
(ORCH_STORE_EIO, src/common/fault.def), on the syncs of the blocks file
(where a disk's write errors show for buffered writes) while a flag file
exists, so the test starts and stops a failing disk under a running
server.  A flush that failed lost data the kernel could not write back:
the server must say so (one log line), show as failed in `orchard ping`,
`stats`, `status` and the metrics, make scrub exit non-zero, refuse
writes, and recover on a restart without the errors, with everything
fsynced before intact."""
import errno
import hashlib
import os
import urllib.request

from cluster import Cluster, free_port, wait_until
from mount import Mount

MiB = 1 << 20


def write_fsync(path, data):
    """0, or the errno of the write, fsync or close that failed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as e:
        return e.errno
    try:
        os.write(fd, data)
        os.fsync(fd)
        return 0
    except OSError as e:
        return e.errno
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def ping_state(c, name):
    r = c.cli("ping", check=False)
    for line in r.stdout.splitlines():
        f = line.split()
        if f and f[0] == name:
            return f[2], r
    return None, r


def metric(port, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.split()[-1])
    return None


def test_write_errors_fail_the_server_explicitly(tmp_path):
    c = Cluster(tmp_path / "c", nservers=2)
    flag = str(tmp_path / "disk-fails")
    port = free_port()
    c.set_server_option("s0", "metrics", "127.0.0.1:%d" % port)
    m = None
    try:
        c.start("s0", env={"ORCH_STORE_EIO": "sync@" + flag})
        c.start("s1")
        m = Mount(c, str(tmp_path / "mnt")).start()
        # Stripes on both servers; fsynced while the disk is healthy.
        kept = os.urandom(6 * MiB)
        assert write_fsync(os.path.join(m.mnt, "kept"), kept) == 0
        assert ping_state(c, "s0")[0] == "up"
        assert metric(port, "orchard_store_failed") == 0

        open(flag, "w").close()          # the disk fails...
        err = write_fsync(os.path.join(m.mnt, "lost"), os.urandom(6 * MiB))
        assert err == errno.EIO, errno.errorcode.get(err, err)
        os.unlink(flag)                  # ...and works again: too late

        wait_until(lambda: ping_state(c, "s0")[0] == "failed", timeout=20,
                   what="ping to show s0 failed")
        state, r = ping_state(c, "s0")
        assert r.returncode != 0 and "read-only" in r.stderr, r.stdout + r.stderr
        assert ping_state(c, "s1")[0] == "up"
        st = c.server_stats()
        assert st["s0"]["store_state"] == "failed" and st["s0"]["store_error"] == "EIO", st["s0"]
        assert st["s1"]["store_state"] == "ok"
        assert metric(port, "orchard_store_failed") == 1
        r = c.cli("status", check=False)
        assert r.returncode != 0 and "failed (EIO)" in r.stdout, r.stdout + r.stderr
        # Still read-only with the disk healthy again: explicit, not sticky by accident.
        err = write_fsync(os.path.join(m.mnt, "after"), os.urandom(6 * MiB))
        assert err == errno.EIO, errno.errorcode.get(err, err)
        r = c.cli("scrub", "--all", "--data", check=False, timeout=300)
        assert r.returncode != 0 and "F1" in r.stdout and "store failed" in r.stdout, \
            r.stdout + r.stderr
        # One clear line, not one per request.
        log = c.log_text("s0")
        assert log.count("failed: cannot flush") == 1, log[-3000:]
        assert "restart the server on healthy media" in log
        with open(os.path.join(m.mnt, "kept"), "rb") as f:
            assert f.read() == kept

        # A restart on healthy media recovers, with what was fsynced intact.
        m.stop()
        m = None
        c.stop("s0")
        c.start("s0")
        assert ping_state(c, "s0")[0] == "up"
        assert c.server_stats()["s0"]["store_state"] == "ok"
        m = Mount(c, str(tmp_path / "mnt")).start()
        with open(os.path.join(m.mnt, "kept"), "rb") as f:
            assert hashlib.sha256(f.read()).digest() == hashlib.sha256(kept).digest()
        again = os.urandom(6 * MiB)
        assert write_fsync(os.path.join(m.mnt, "again"), again) == 0
        with open(os.path.join(m.mnt, "again"), "rb") as f:
            assert f.read() == again
        for name in ("lost", "after"):
            try:
                os.unlink(os.path.join(m.mnt, name))
            except FileNotFoundError:
                pass
        r = c.cli("scrub", "--all", "--data", check=False, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        try:
            if m is not None:
                m.stop()
        finally:
            c.stop_all()
