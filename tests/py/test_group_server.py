"""The server's namespace through a replicated log (docs/DESIGN.md, "The
server on the group"): with log_address set, every namespace change a
client asks for runs on the leader inside a capture of the group, its reply
leaves once the entry is applied, and changes asked while an entry is in
flight share the next one.  A group of one member here: the suite's other
files run the same way with ORCH_TEST_LOG=1 (make test-py-log)."""
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import threading

import pytest

from cluster import ON_LOG, ORCHARDD, Cluster, free_port, wait_until
from mount import ORCHARD_MOUNT, Mount, write_file

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or not os.path.exists(ORCHARD_MOUNT)
    or shutil.which("fusermount3") is None,
    reason="needs /dev/fuse, fusermount3 and orchard-mount")


@pytest.fixture
def logged(tmp_path):
    """One server whose namespace goes through a log."""
    c = Cluster(tmp_path / "c", nservers=1)
    c.set_server_option("s0", "log_address", "127.0.0.1:%d" % free_port())
    c.start_all()
    made = []

    def mount(opts=None):
        m = Mount(c, tmp_path / ("mnt%d" % len(made)), opts)
        made.append(m)
        return m.start()

    yield c, mount
    for m in reversed(made):
        m.stop()
    c.stop_all()


def log_of(c):
    return c.server_stats()["s0"]["log"]


def tree(root):
    """Every name under @root with its kind, mode, size and bytes."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            data = None
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    data = f.read()
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                                             st.st_size, st.st_nlink, data)
    return out


def workload(m):
    """Every kind of namespace change a mount makes; returns how many requests."""
    os.mkdir(m.path("d"))
    os.mkdir(m.path("e"))
    for i in range(20):
        write_file(m.path("d", "f%d" % i), b"x" * (100 * i))
    os.rename(m.path("d", "f1"), m.path("e", "g1"))
    os.rename(m.path("d", "f2"), m.path("d", "f3"))      # over another file
    os.link(m.path("d", "f4"), m.path("e", "l4"))
    os.symlink("f5", m.path("d", "s5"))
    os.unlink(m.path("d", "f6"))
    os.chmod(m.path("d", "f7"), 0o600)
    os.truncate(m.path("d", "f8"), 10)
    os.setxattr(m.path("d", "f9"), "user.k", b"v")
    os.removexattr(m.path("d", "f9"), "user.k")
    os.setxattr(m.path("d", "f9"), "user.k2", b"v2")
    os.utime(m.path("d", "f10"), (1000000, 2000000))
    os.mkdir(m.path("e", "sub"))
    os.rmdir(m.path("e", "sub"))
    return 20


def test_every_change_goes_through_the_log_and_outlives_a_kill(logged):
    c, mount = logged
    m = mount()
    before = log_of(c)
    assert before["role"] == "leader"
    creates = workload(m)
    after = log_of(c)
    changes = after["changes"] - before["changes"]
    # At least the creates, mkdirs, renames, link, symlink, unlink, chmod,
    # truncate, xattrs, utime and rmdir, each one change through the log.
    assert changes >= creates + 14, after
    assert after["entries"] > before["entries"] and after["failed"] == 0, after
    assert after["applied_index"] == after["commit_index"] == after["last_index"], after
    status = c.cli("status").stdout
    assert " LOG " in status, status
    row = next(line for line in status.splitlines() if line.startswith("s0 "))
    assert "leader t%d @%d" % (after["term"], after["applied_index"]) in row, status
    want = tree(m.mnt)
    assert want["d/f7"][1] == 0o600 and want["d/f8"][2] == 10 and "d/f6" not in want
    assert os.getxattr(m.path("d", "f9"), "user.k2") == b"v2"
    # A SIGKILL: the log replays what the database has, skipping it, and the
    # mount carries on with the same namespace.
    c.kill("s0")
    c.start("s0")
    again = log_of(c)
    assert again["role"] == "leader" and again["applied_index"] >= after["applied_index"], again
    assert again["failed"] == 0
    wait_until(lambda: tree(m.mnt) == want, what="the namespace back after the restart")
    write_file(m.path("d", "new"), b"after")
    assert log_of(c)["changes"] >= 1


def test_changes_asked_together_share_entries(logged):
    c, mount = logged
    m = mount()
    for k in range(8):
        os.mkdir(m.path("d%d" % k))
    before = log_of(c)
    errors = []

    def creator(k):
        # A directory each: the kernel makes creates in one directory wait for each other.
        try:
            for i in range(40):
                with open(m.path("d%d" % k, "t%d" % i), "wb"):
                    pass
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=creator, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sum(len(os.listdir(m.path("d%d" % k))) for k in range(8)) == 320
    after = log_of(c)
    changes = after["changes"] - before["changes"]
    entries = after["entries"] - before["entries"]
    # Eight clients' creates wait behind one synced entry at a time: they batch.
    assert after["batch_max"] > 1 and entries < changes, after


def test_another_mount_sees_a_change_once_it_returns(logged):
    """Pushes leave once the entry is applied, on behalf of the request
    that made it: the reply waits for the other holder's acknowledgement."""
    c, mount = logged
    a = mount()
    b = mount({"coherent": "on"})
    write_file(a.path("f"), b"1")
    os.chmod(a.path("f"), 0o644)
    for mode in (0o600, 0o640, 0o604, 0o644) * 5:
        os.stat(b.path("f"))     # held in B's kernel under its lease
        os.chmod(a.path("f"), mode)
        assert stat.S_IMODE(os.stat(b.path("f")).st_mode) == mode
    held = c.server_stats()["s0"]["replies_held"]
    assert held >= 1


def test_a_refused_change_changes_nothing_and_the_log_goes_on(logged):
    c, mount = logged
    m = mount()
    os.mkdir(m.path("d"))
    before = log_of(c)
    # Through the CLI: a mount's kernel would refuse these from its own cache.
    assert c.cli("mkdir", "/d", check=False).returncode != 0
    assert c.cli("mv", "/nope", "/d2", check=False).returncode != 0
    assert c.cli("rm", "/d/nope", check=False).returncode != 0
    mid = log_of(c)
    # Refused changes change nothing: a group of one answers them without an entry.
    assert mid["entries"] == before["entries"], (before, mid)
    refused = mid["changes"] - before["changes"]
    assert refused >= 2 and mid["unlogged"] - before["unlogged"] == refused, (before, mid)
    write_file(m.path("d", "f"), b"ok")
    after = log_of(c)
    assert after["failed"] == before["failed"]
    assert sorted(os.listdir(m.mnt)) == ["d"] and os.listdir(m.path("d")) == ["f"]


def test_a_server_stopped_with_changes_in_flight_answers_them(logged):
    """SIGTERM while clients create: every create either happened or
    failed with an error, none hangs, and the server stops cleanly."""
    c, mount = logged
    m = mount()
    os.mkdir(m.path("d"))
    stop = threading.Event()
    done = []

    def creator(k):
        i = 0
        while not stop.is_set() and i < 2000:
            try:
                with open(m.path("d", "s%d-%d" % (k, i)), "wb"):
                    pass
                done.append(1)
            except OSError:
                pass
            i += 1

    threads = [threading.Thread(target=creator, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: len(done) > 50, what="creates under way")
    c.stop("s0", signal.SIGTERM)
    assert "stopped cleanly" in c.log_text("s0")
    c.start("s0")
    stop.set()
    for t in threads:
        t.join()
    assert len(os.listdir(m.path("d"))) >= 50


@pytest.mark.parametrize("value,want", [
    ("localhost:7600", "want IPv4:PORT"),
    ("[::1]:7600", "want IPv4:PORT"),
    ("127.0.0.1", "want IPv4:PORT"),
    ("127.0.0.1:0", "want IPv4:PORT"),
])
def test_a_bad_log_address_is_refused_naming_it(tmp_path, value, want):
    c = Cluster(tmp_path / "c", nservers=1)
    c.set_server_option("s0", "log_address", value)
    r = subprocess.run([ORCHARDD, "-c", c.conf, "-n", "s0"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0
    assert "bad value for 'log_address' in [server s0]" in r.stderr and want in r.stderr, \
        r.stderr


def test_a_busy_log_address_stops_the_server_with_a_reason(tmp_path):
    c = Cluster(tmp_path / "c", nservers=1)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        c.set_server_option("s0", "log_address", "127.0.0.1:%d" % port)
        r = subprocess.run([ORCHARDD, "-c", c.conf, "-n", "s0"], capture_output=True,
                           text=True, timeout=30)
    assert r.returncode != 0
    assert "cannot start the namespace's log" in r.stderr and str(port) in r.stderr, r.stderr
    assert "cannot listen at 127.0.0.1:%d: in use" % port in r.stderr, r.stderr
    assert "Address already in use" in r.stderr, r.stderr


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_power_cut_loses_no_acknowledged_change(tmp_path, seed):
    """Two servers on logs, cut while a workload of namespace changes (some
    across servers: intents) runs.  Every write of the namespace goes
    through the log, whose appends are synced, so after the restart the
    log replays what the databases lost (they are not synced on apply):
    every acknowledged change is there, fsynced or not, and each member's
    log applies (a write made beside the log would leave an entry that
    does not apply, and the member would not start)."""
    rnd = random.Random(seed)
    c = Cluster(tmp_path / "c", nservers=2)
    for n in c.names:
        c.set_server_option(n, "log_address", "127.0.0.1:%d" % free_port())
        c.start_pcut(n, wait=False)
    for n in c.names:
        c.wait_up(n)
    try:
        names = set()     # every name acknowledged, as a model
        durable = {}
        src = tmp_path / "src"
        for i in range(6):
            data = rnd.randbytes(rnd.choice([1, 5000, 70000]))
            src.write_bytes(data)
            c.cli("put", "--fsync", str(src), "/f%d" % i)
            durable["/f%d" % i] = data
            names.add("/f%d" % i)
        cut_at = rnd.randint(10, 60)
        for i in range(80):
            if i == cut_at:
                for n in c.names:
                    c.procs[n].send_signal(signal.SIGUSR2)
                break
            op = rnd.random()
            if op < 0.4:
                r = c.cli("mkdir", "/d%d" % i, check=False)   # placed on either server
                if r.returncode != 0:
                    break
                names.add("/d%d" % i)
            elif op < 0.7:
                src.write_bytes(b"x" * rnd.randint(0, 3000))
                r = c.cli("put", str(src), "/g%d" % i, check=False)
                if r.returncode != 0:
                    break
                names.add("/g%d" % i)
            else:
                old = sorted(n for n in names if n.startswith("/g") or n.startswith("/d"))
                if not old:
                    continue
                victim = rnd.choice(old)
                new = "/m%d" % i
                r = c.cli("mv", victim, new, check=False)
                if r.returncode != 0:
                    break
                names.discard(victim)
                names.add(new)
        for n in c.names:
            c.wait_power_cut(n)
        c.check_integrity()
        c.start_all()
        for n in c.names:
            log = c.server_stats()[n]["log"]
            assert log["role"] == "leader" and log["failed"] == 0, log
        listed = {"/" + n for n in c.cli("ls", "/").stdout.split()}
        # The cut came between two changes: exactly what was acknowledged is there.
        assert listed == names, "lost: %s, appeared: %s" % (sorted(names - listed),
                                                            sorted(listed - names))
        out = tmp_path / "out"
        for path, data in durable.items():
            if out.exists():
                out.unlink()
            c.cli("get", path, str(out))
            assert out.read_bytes() == data, "fsynced file %s differs" % path
        c.cli("mkdir", "/after")
    finally:
        c.stop_all()


def test_writers_and_changes_of_the_same_files_at_once(logged):
    """Writes published at close (CL2SV_WRITERS) and chmods of the same
    files from other threads: each change is captured while another is in
    flight, so one made beside the log would meet a row the entry in flight
    changed, that entry would not apply and the member would stop (EIO)."""
    c, mount = logged
    a = mount()
    b = mount()
    for i in range(8):
        write_file(a.path("f%d" % i), b"0")
    errors = []

    def writer(k):
        try:
            for r in range(40):
                write_file(a.path("f%d" % (k % 8)), b"%d-%d" % (k, r) * (r + 1))
        except OSError as e:
            errors.append(e)

    def chmoder(k):
        try:
            for r in range(80):
                os.chmod(b.path("f%d" % ((k + r) % 8)), 0o600 | (r % 2) * 0o44)
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    threads += [threading.Thread(target=chmoder, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    log = log_of(c)
    assert log["role"] == "leader" and log["failed"] == 0, log
    assert log["applied_index"] == log["commit_index"], log
    assert os.path.getsize(a.path("f0")) > 0


@pytest.mark.skipif(ON_LOG, reason="every server has a log under ORCH_TEST_LOG=1")
def test_status_shows_no_log_column_without_logs(cluster1):
    status = cluster1.cli("status").stdout
    assert "LAST SCRUB" in status and " LOG " not in status, status
