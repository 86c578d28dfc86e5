"""Replica groups (docs/DESIGN.md, "Replica groups"): with `replicas = 3`
three consecutive [server] sections are one group, whose namespace is the
state machine of a log (libraft).  The member that leads serves; the
others answer NOTLEADER naming it, and clients go there by themselves.
A leader that dies is replaced by an election and clients carry on; one
that stops leading starts again as a follower.  Here on 127.0.0.1 with one
port per member; the multi-host tests put each member in a namespace of
its own."""
import errno
import os
import random
import signal
import shutil
import socket
import sqlite3
import stat
import threading
import time

import pytest

from cluster import ORCHARD, Cluster, run, stat_layout, wait_until
from mount import Mount, write_file
from netns import NetCluster, skip_unless_usable


def members(c):
    """Each member's log stats, by name (the members that answer)."""
    return {name: s["log"] for name, s in c.server_stats().items()}


def leader(c, group=0, timeout=15.0):
    """The name of the member of @group that serves as leader, once one does."""
    found = []

    def one():
        found[:] = [n for n, log in members(c).items()
                    if log["group"] == group and log["role"] == "leader" and log["serving"]]
        return len(found) == 1
    wait_until(one, timeout, 0.05, "a member of group %d to lead and serve" % group)
    return found[0]


def freeze(c, name):
    """SIGSTOPs member @name and waits until every thread of it stopped
    (kill returns before they do): what it has not answered yet, it will
    not."""
    pid = c.pid(name)
    os.kill(pid, signal.SIGSTOP)

    def stopped():
        states = []
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        return all(st in "tT" for st in states)
    wait_until(stopped, 5.0, 0.002, "every thread of %s to stop" % name)


def namespace(c, name):
    """Member @name's namespace, table by table (the server stopped or not:
    read through SQLite, which sees the committed state)."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(c.dir, name, "meta.db"), uri=True)
    try:
        out = {}
        for table in ("inode", "dirent", "xattr", "intent", "applied"):
            out[table] = db.execute("SELECT * FROM %s ORDER BY 1, 2" % table).fetchall()
        out["super"] = db.execute(
            "SELECT * FROM super WHERE key NOT IN ('created_ns') ORDER BY 1").fetchall()
        return out
    finally:
        db.close()


def config_with(c, key, value):
    """A copy of @c's config with `key = value` in [cluster]."""
    path = os.path.join(c.dir, "client-%s.conf" % key)
    with open(c.conf) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace("[cluster]\n", "[cluster]\n%s = %s\n" % (key, value), 1))
    return path


def short_timeout(c, ms):
    """A copy of the config whose clients give up after @ms."""
    return config_with(c, "op_timeout_ms", ms)


def names(c):
    return sorted(c.cli("ls", "/").stdout.split())


def test_followers_name_the_leader_and_every_member_applies_each_change(group):
    c = group
    lead = leader(c)
    roles = {n: log["role"] for n, log in members(c).items()}
    assert sorted(roles.values()) == ["follower", "follower", "leader"], roles
    assert {members(c)[n]["member"] for n in c.names} == {0, 1, 2}
    # The CLI starts at the group's first member: whoever that is, the
    # request ends at the leader (a follower's NOTLEADER names it).
    for i in range(20):
        c.cli("mkdir", "/d%02d" % i)
    c.cli("chmod", "700", "/d03")
    c.cli("touch", "/d04/f")
    c.cli("mv", "/d04/f", "/d06/g")
    c.cli("rm", "-r", "/d05")
    want = ["d%02d" % i for i in range(20) if i != 5]
    assert names(c) == want
    # Followers serve nothing of the namespace themselves.
    assert all(log["serving"] == (n == lead) for n, log in members(c).items())
    stop_settled(c)
    spaces = {n: namespace(c, n) for n in c.names}
    assert spaces["s0"] == spaces["s1"] == spaces["s2"]
    assert len(spaces["s0"]["dirent"]) == len(want) + 1   # and /d06/g


def tcp_sockets(pid):
    """Copies (pidfd_getfd) of process @pid's connected TCP sockets."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    SYS_pidfd_getfd = 438
    out = []
    pidfd = os.pidfd_open(pid)
    try:
        for name in os.listdir("/proc/%d/fd" % pid):
            try:
                if not os.readlink("/proc/%d/fd/%s" % (pid, name)).startswith("socket:"):
                    continue
            except FileNotFoundError:
                continue
            fd = libc.syscall(SYS_pidfd_getfd, pidfd, int(name), 0)
            if fd < 0:
                continue
            s = socket.socket(fileno=fd)
            if (s.type == socket.SOCK_STREAM and s.family in (socket.AF_INET, socket.AF_INET6)
                    and not s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)):
                try:
                    s.getpeername()
                    out.append(s)
                    continue
                except OSError:
                    pass
            s.close()
    finally:
        os.close(pidfd)
    return out


def test_every_connection_of_a_member_sends_at_once(group):
    """Small messages leave at once on every connection of every member, the
    log's (libraft's transport) included: with Nagle's algorithm on, an
    append sent while the previous one was unacknowledged waited for the
    follower's delayed ACK, up to 40 ms."""
    c = group
    leader(c)
    for i in range(5):
        c.cli("mkdir", "/n%d" % i)
    for name in c.names:
        socks = tcp_sockets(c.pid(name))
        try:
            ports = {s.getpeername()[1] for s in socks} | {s.getsockname()[1] for s in socks}
            # The log's connections to and from both other members, at least.
            assert len(socks) >= 2, (name, ports)
            slow = [(s.getsockname(), s.getpeername()) for s in socks
                    if not s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)]
            assert not slow, (name, slow)
        finally:
            for s in socks:
                s.close()


def test_a_killed_leader_is_replaced_and_clients_carry_on(group):
    """SIGKILL the leader five times, restarting it each time: the next
    change, asked right after the kill, completes on the new leader within
    5 s, and in the end every member holds the same namespace.  Each kill
    is of a group whose three members are in sync: killed while the member
    restarted before it was still rejoining, the group elected with one
    more round, once (5.05 s: the restarted member had heard from no
    leader yet)."""
    c = group
    took = []
    for k in range(5):
        lead = leader(c)
        c.kill(lead)
        t0 = time.monotonic()
        c.cli("mkdir", "/k%d" % k)
        took.append(time.monotonic() - t0)
        c.start(lead)
        wait_in_sync(c)
    assert names(c) == ["k%d" % k for k in range(5)]
    assert max(took) < 5.0, took
    stop_settled(c)
    spaces = [namespace(c, n) for n in c.names]
    assert spaces[0] == spaces[1] == spaces[2]


def test_a_leader_cut_off_from_its_majority_stops_serving(group):
    """Both followers killed: the leader steps down within an election
    timeout, starts again as a follower under the same process id, and
    refuses changes rather than make one the group does not have; with
    one follower back, a leader is elected and changes go on."""
    c = group
    lead = leader(c)
    c.cli("mkdir", "/before")
    pid = c.pid(lead)
    others = [n for n in c.names if n != lead]
    for n in others:
        c.kill(n)
    wait_until(lambda: "restarting as a follower" in c.log_text(lead), 15, 0.05,
               "the lone leader to step down")
    assert c.pid(lead) == pid and c.alive(lead)
    wait_until(lambda: members(c).get(lead, {}).get("role") == "follower", 15, 0.05,
               "the old leader to be back as a follower")
    r = run([ORCHARD, "-c", short_timeout(c, 2000), "mkdir", "/refused"], check=False)
    assert r.returncode != 0 and "timed out" in r.stderr, r.stderr
    c.start(others[0])
    c.cli("mkdir", "/after")
    assert names(c) == ["after", "before"]
    c.start(others[1])


def test_a_group_needs_log_addresses_and_whole_groups(tmp_path):
    c = Cluster(tmp_path / "c", nservers=3, replicas=3)
    with open(c.conf) as f:
        text = f.read()
    bad = os.path.join(c.dir, "bad.conf")
    with open(bad, "w") as f:
        f.write(text.replace("replicas = 3", "replicas = 2"))
    r = run([ORCHARD, "-c", bad, "ping"], check=False)
    assert r.returncode != 0 and "do not make groups of replicas = 2" in r.stderr
    with open(bad, "w") as f:
        f.write("\n".join(l for l in text.splitlines() if not l.startswith("log_address")))
    r = run([ORCHARD, "-c", bad, "ping"], check=False)
    assert r.returncode != 0 and "needs a log_address (replicas = 3)" in r.stderr
    r = run([ORCHARD, "genconfig", "--servers", "4", "--replicas", "3",
             "--dir", str(tmp_path / "g")], check=False)
    assert r.returncode != 0 and "do not make groups of --replicas 3" in r.stderr


def test_a_client_configured_without_groups_is_told_so(group):
    """A client whose config lists one member as a server of its own
    (replicas left out) is answered as by a group's member: it fails with
    EIO and a log line naming the mismatch, rather than waiting out its
    deadline or going elsewhere."""
    c = group
    lead = leader(c)
    follower = next(n for n in c.names if n != lead)
    with open(c.conf) as f:
        text = f.read()
    head = text[:text.index("; Replica group 0")].replace("replicas = 3\n", "")
    section = text[text.index("[server %s]" % follower):].split("\n\n")[0]
    path = os.path.join(c.dir, "single.conf")
    with open(path, "w") as f:
        f.write(head + section + "\n")
    t0 = time.monotonic()
    r = run([ORCHARD, "-c", path, "mkdir", "/mismatch"], check=False)
    assert r.returncode != 0, r.stdout
    assert "answers as a member of a replica group" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 5.0
    assert "mismatch" not in names(c)


def test_a_change_whose_leader_died_before_answering_is_not_made_twice(tmp_path):
    """Every member dies (ORCH_TEST_NS_KILL) right after the first change it
    applies as leader, before answering it.  The client sends the request
    again, under the same numbers, to the next leader, which answers it
    from the group's record: a mkdir or rename done twice would say
    EEXIST or ENOENT."""
    c = Cluster(tmp_path / "c", nservers=3, replicas=3)
    for name in c.names:
        c.start(name, wait=False, env={"ORCH_TEST_NS_KILL": "1"})
    try:
        c._up_or_stopped(c.names)
        killed = []
        for args in (("mkdir", "/x"), ("mkdir", "/y"), ("mv", "/x", "/z")):
            lead = leader(c)
            c.cli(*args)
            if not c.alive(lead):
                assert "ORCH_TEST_NS_KILL: killed after applying" in c.log_text(lead)
                killed.append(lead)
                c.start(lead)           # without the hook from now on
        assert len(killed) >= 2, killed
        assert names(c) == ["y", "z"]
    finally:
        c.stop_all()


def test_a_writers_release_whose_leader_died_before_answering_is_answered_from_the_record(
        tmp_path):
    """A file is created (the first numbered request), written and closed
    through a mount: the close publishes its size with a writers' release
    (the second).  Every member dies (ORCH_TEST_NS_KILL=2) right after
    applying the second as leader, before answering it.  The release is
    numbered (docs/SPEC-wire.md, "Exactly once"), so the next leader
    answers the retry from the group's record, with the file's attributes
    as they are, which the mount keeps; it does not apply it again (which,
    after a truncate made in between, would grow the file back)."""
    c = Cluster(tmp_path / "c", nservers=3, replicas=3)
    for name in c.names:
        c.start(name, wait=False, env={"ORCH_TEST_NS_KILL": "2"})
    m = None
    try:
        c._up_or_stopped(c.names)
        m = Mount(c, tmp_path / "mnt").start()
        data = os.urandom(100000)
        lead = leader(c)
        with open(m.path("f"), "wb") as f:
            f.write(data)
        assert not c.alive(lead), "the leader did not die at the release"
        assert "ORCH_TEST_NS_KILL: killed after applying" in c.log_text(lead)
        # Every member without the hook from now on (each close is numbered too).
        c.start(lead)
        for name in c.names:
            if name != lead:
                c.stop(name)
                c.start(name)
                leader(c)
        st = os.stat(m.path("f"))
        assert (st.st_size, stat.S_IMODE(st.st_mode)) == (len(data), 0o644), st
        with open(m.path("f"), "rb") as f:
            assert f.read() == data
        assert c.cli("cat", "/f", input=b"").stdout == data   # bytes in, bytes out
    finally:
        if m:
            m.stop()
        c.stop_all()


def caught_up(c):
    """Waits until every member has applied what the leader has."""
    lead = leader(c)
    applied = members(c)[lead]["applied_index"]
    wait_until(lambda: all(log["applied_index"] >= applied for log in members(c).values()),
               15, 0.05, "every member to catch up")


def wait_in_sync(c, group=0):
    """Waits until every member of @group holds the data in sync (the
    leader says so: a restarted member has rejoined)."""
    def in_sync():
        lead = leader(c, group)
        return c.server_stats()[lead]["data_stream"]["in_sync"] == c.replicas
    wait_until(in_sync, 20, 0.05, "every member of group %d in sync" % group)


def stop_settled(c):
    """Stops every group's members once each holds the data in sync and has
    applied every entry, the leaders first: a follower stopped first would
    be taken out of sync by one more entry, which it would miss."""
    groups = len(c.names) // c.replicas
    leads = [leader(c, g) for g in range(groups)]

    def settled():
        stats = c.server_stats()
        if any(stats[lead]["data_stream"]["in_sync"] != c.replicas for lead in leads):
            return False
        return all(len({s["log"]["applied_index"] for s in stats.values()
                        if s["log"]["group"] == g}) == 1 for g in range(groups))
    wait_until(settled, 20, 0.05, "every member in sync, every entry applied")
    for lead in leads:
        c.stop(lead)
    c.stop_all()


def test_a_leader_cut_off_is_replaced_and_rejoins_without_diverging(tmp_path):
    """Each member on a host of its own (a network namespace), the CLI in
    the root namespace.  The leader's link is cut: the next change, sent to
    it first, is given up after 2.5 s of silence and completes on the new
    leader; the cut-off member steps down and starts again as a follower;
    healed, it catches up, and every member holds the same namespace."""
    skip_unless_usable()
    with NetCluster(tmp_path / "c", nservers=3, replicas=3) as c:
        lead = leader(c)
        for i in range(10):
            c.cli("mkdir", "/a%d" % i)
        c.net.cut(lead)
        t0 = time.monotonic()
        c.cli("mkdir", "/b")
        took = time.monotonic() - t0
        print("cut-off leader: the next change took %.2f s" % took)
        assert took < 8.0, took
        wait_until(lambda: "restarting as a follower" in c.log_text(lead), 20, 0.05,
                   "the cut-off leader to step down")
        assert c.alive(lead)
        c.net.heal(lead)
        wait_until(lambda: members(c).get(lead, {}).get("role") == "follower", 20, 0.05,
                   "the old leader to be back as a follower")
        c.cli("mkdir", "/c")
        caught_up(c)
        assert names(c) == ["a%d" % i for i in range(10)] + ["b", "c"]
        stop_settled(c)
        spaces = [namespace(c, n) for n in c.names]
        assert spaces[0] == spaces[1] == spaces[2]


def test_a_mount_carries_on_through_leader_kills(group, tmp_path):
    """A mount of the group: after each SIGKILL of the leader, the next
    changes through the mount (mkdir, create, rename, chmod, symlink,
    unlink) complete by themselves within 5 s, and the mount sees them."""
    c = group
    m = Mount(c, tmp_path / "mnt").start()
    try:
        for k in range(3):
            lead = leader(c)
            c.kill(lead)
            t0 = time.monotonic()
            os.mkdir(m.path("d%d" % k))
            took = time.monotonic() - t0
            with open(m.path("d%d" % k, "f"), "w"):
                pass
            os.rename(m.path("d%d" % k, "f"), m.path("d%d" % k, "g"))
            os.chmod(m.path("d%d" % k, "g"), 0o600)
            os.symlink("g", m.path("d%d" % k, "s"))
            os.unlink(m.path("d%d" % k, "s"))
            assert took < 5.0, (k, took)
            c.start(lead)
            wait_in_sync(c)     # the next kill is of a whole group
        for k in range(3):
            assert os.listdir(m.path("d%d" % k)) == ["g"]
            assert os.stat(m.path("d%d" % k, "g")).st_mode & 0o777 == 0o600
    finally:
        m.stop()


def test_two_groups_through_a_mount_carry_on_through_leader_kills(tmp_path):
    """Two groups of three, a mount: files striped over both, directories
    placed on either (their inodes made by intents across groups), renames
    across them.  The leader of each group in turn is killed; the changes
    that follow complete by themselves within 5 s, and a file written after
    the kill reads back whole (data written before a failover of its group
    is not replicated yet)."""
    c = Cluster(tmp_path / "c", nservers=6, replicas=3)
    c.start_all()
    m = None
    try:
        m = Mount(c, tmp_path / "mnt").start()
        for k in range(4):
            lead = leader(c, k % 2)
            c.kill(lead)
            t0 = time.monotonic()
            for i in range(4):
                os.mkdir(m.path("r%d-%d" % (k, i)))
            took = time.monotonic() - t0
            os.rename(m.path("r%d-0" % k), m.path("r%d-1" % k, "moved"))
            data = os.urandom(300000)
            write_file(m.path("f%d" % k), data)
            with open(m.path("f%d" % k), "rb") as f:
                assert f.read() == data
            assert took < 5.0, (k, took)
            c.start(lead)
            wait_in_sync(c, k % 2)
        want = sorted(["r%d-%d" % (k, i) for k in range(4) for i in (1, 2, 3)] +
                      ["f%d" % k for k in range(4)])
        assert sorted(os.listdir(m.path())) == want
        assert all(os.listdir(m.path("r%d-1" % k)) == ["moved"] for k in range(4))
        placed = {members_group(c, "/r%d-%d" % (k, i)) for k in range(4) for i in (1, 2, 3)}
        assert placed == {0, 1}, placed
    finally:
        if m:
            m.stop()
        c.stop_all()


def test_a_new_leader_finds_the_other_groups_leaders_on_its_first_call(tmp_path):
    """A member that just came to lead its group knows nothing of where
    the other groups' leaders are: its first call to another group may go
    to a follower, which refuses it naming its leader.  The call goes on
    there (sv_peer.c) instead of failing.  Here that call is the probe of
    the writers' hold after the election (sv_writers.c), which, failed,
    held a write registered on the old leader until the hold's end (a
    quarter of op_timeout_ms: 10 s here, so a failed probe shows)."""
    c = Cluster(tmp_path / "c", nservers=6, replicas=3)
    c.set_cluster_option("op_timeout_ms", 40000)
    c.start_all()
    m = None
    fd = -1
    try:
        # The leader of group 1 must not be its member 0, where a new
        # leader's connection to group 1 goes first.
        while leader(c, 1) == c.names[3]:
            c.kill(c.names[3])
            leader(c, 1)
            c.start(c.names[3])
        m = Mount(c, tmp_path / "mnt", {"op_timeout_ms": 40000}).start()
        path = m.path("f")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        os.pwrite(fd, b"a" * 300000, 0)   # over both groups' strips
        os.fsync(fd)
        assert members_group(c, "/f") == 0
        c.kill(leader(c, 0))
        leader(c, 0)
        t0 = time.monotonic()
        os.pwrite(fd, b"b" * 4096, 0)   # registers again, with the new leader
        os.fsync(fd)
        took = time.monotonic() - t0
        # The new leader takes changes 1.2 s after it came to serve.
        assert took < 5.0, "the write after the failover took %.1f s" % took
        with open(path, "rb") as f:
            assert f.read() == b"b" * 4096 + b"a" * (300000 - 4096)
    finally:
        if fd >= 0:
            os.close(fd)
        if m:
            m.stop()
        c.stop_all(check_logs=False)


def test_a_frozen_leader_of_another_group_is_given_up_by_the_peer_calls(tmp_path):
    """Group 1's leader is frozen (SIGSTOP): its connections stay open, its
    kernel acknowledging our bytes, while group 1 elects another.  Group
    0's calls to group 1 (here the intents of mkdirs whose inodes group 1
    makes) went to the frozen member until their deadline, and again after
    it, so each such mkdir failed at the end of the mount's deadline.  A
    member silent for a try and then a PING is now given up for the next
    (sv_peer.c), and those mkdirs complete within the deadline."""
    c = Cluster(tmp_path / "c", nservers=6, replicas=3)
    c.start_all()
    m = None
    frozen = None
    try:
        m = Mount(c, tmp_path / "mnt", {"op_timeout_ms": 30000}).start()
        for i in range(4):   # group 0's leader connects to group 1's
            os.mkdir(m.path("w%d" % i))
        frozen = leader(c, 1)
        freeze(c, frozen)
        leader(c, 1)
        for i in range(6):
            t0 = time.monotonic()
            os.mkdir(m.path("d%d" % i))
            took = time.monotonic() - t0
            # A try (2.5 s), a PING (1.5 s), the intent's retry (1 s), and slack.
            assert took < 15.0, "mkdir d%d took %.1f s" % (i, took)
        os.kill(c.pid(frozen), signal.SIGCONT)
        frozen = None
        assert {members_group(c, "/w%d" % i) for i in range(4)} == {0, 1}
        assert 1 in {members_group(c, "/d%d" % i) for i in range(6)}
    finally:
        if frozen:
            os.kill(c.pid(frozen), signal.SIGCONT)
        if m:
            m.stop()
        c.stop_all(check_logs=False)


def members_group(c, path):
    """The replica group that holds @path's inode (orchard stat's Server)."""
    for line in c.cli("stat", path).stdout.splitlines():
        if "Server:" in line:
            return int(line.split("Server:")[1].split()[0])
    raise AssertionError("no Server in orchard stat " + path)


def test_a_new_leader_takes_changes_only_once_its_predecessor_stopped(group):
    """A leader cut off from its group may serve until libraft steps it
    down, up to two election timeouts after it last heard from a majority,
    while the others elect after one: the new leader serves reads at once
    but changes only one election timeout later, so no change is
    acknowledged while the old leader could still answer a read without
    it.  Right after the new leader serves, a change with a deadline
    shorter than that wait times out, a read does not, and the change then
    goes through."""
    c = group
    c.cli("mkdir", "/before")
    short = short_timeout(c, 300)
    for attempt in range(5):
        lead = leader(c)
        c.kill(lead)
        new = leader(c)
        wait = members(c)[new]["changes_wait_ms"]
        if wait >= 700:
            break
        c.start(lead)            # seen too late to test: once more
    else:
        raise AssertionError("a new leader was never seen waiting 700 ms more: %r"
                             % members(c))
    # Both at once, within the wait even where each CLI takes a while to
    # start (under ASan, beside other tests).
    got = {}
    asks = [threading.Thread(target=lambda what=what: got.update(
                {what[0]: run([ORCHARD, "-c", short] + what, check=False)}))
            for what in (["ls", "/"], ["mkdir", "/early"])]
    for t in asks:
        t.start()
    for t in asks:
        t.join()
    assert got["ls"].returncode == 0, got["ls"].stderr
    r = got["mkdir"]
    assert r.returncode != 0 and "timed out" in r.stderr, r.stderr
    c.cli("mkdir", "/later")
    assert names(c) == ["before", "later"]
    c.start(lead)


def test_a_wiped_member_is_rebuilt_from_a_snapshot(group, tmp_path):
    """A follower whose data directory is lost and made again by `orchard
    mkfs` rejoins: the log it needs is gone from the others (1,200 changes,
    past the 1,024 entries between snapshots), so the leader sends a
    snapshot of the namespace, and the member ends with the same tables as
    the others while the group kept serving."""
    c = group
    lead = leader(c)
    wiped = next(n for n in c.names if n != lead)
    m = Mount(c, tmp_path / "mnt").start()
    try:
        for i in range(1200):
            os.mkdir(m.path("d%04d" % i))
        c.stop(wiped)
        shutil.rmtree(os.path.join(c.dir, wiped))
        run([ORCHARD, "mkfs", "-c", c.conf, "-n", wiped])
        for i in range(1200, 1210):   # while it is away: the group serves
            os.mkdir(m.path("d%04d" % i))
        c.start(wiped)
        os.mkdir(m.path("last"))
        applied = members(c)[leader(c)]["applied_index"]
        # libraft's own 30 s wait for a snapshot's answer is cut to 5 s (sv_ns.c).
        wait_until(lambda: members(c)[wiped]["applied_index"] >= applied, 15, 0.05,
                   "the wiped member to catch up")
        assert members(c)[wiped]["role"] == "follower"
        assert len(os.listdir(m.path())) == 1211
    finally:
        m.stop()
    stop_settled(c)
    spaces = {n: namespace(c, n) for n in c.names}
    assert spaces[wiped] == spaces[lead]
    assert len(spaces[wiped]["dirent"]) == 1211


def config_without(c, name):
    """A copy of the config in which member @name's address refuses
    connections: its clients skip it at once."""
    path = os.path.join(c.dir, "without-%s.conf" % name)
    host, port = c.address(name)
    with open(c.conf) as f:
        text = f.read()
    head, sep, rest = text.partition("[server %s]" % name)
    rest = rest.replace("address = %s:%d" % (host, port), "address = 127.0.0.1:1", 1)
    with open(path, "w") as f:
        f.write(head + sep + rest)
    return path


def test_a_mount_stops_using_what_a_silent_leader_leased(group, tmp_path):
    """Leases across a leader change (DESIGN.md): mount b holds a file's
    mode in its kernel and its lease cache (coherent mode, 30 s leases).
    The leader is frozen (SIGSTOP): it pushes nothing and closes nothing,
    and b's connection to it stays open.  A chmod made through the new
    leader returns; b's next stat must not show the old mode (it shows
    the new one, or fails while b waits on the frozen member), because b
    used what the group leased only while the group vouched for it."""
    c = group
    a = Mount(c, tmp_path / "a", {"coherent": "on"}).start()
    # b gives up on the frozen member only after the chmod below returned.
    b = Mount(c, tmp_path / "b", {"coherent": "on", "op_timeout_ms": 10000}).start()
    lead = None
    try:
        write_file(a.path("f"), b"x")
        os.chmod(a.path("f"), 0o644)
        assert stat.S_IMODE(os.stat(b.path("f")).st_mode) == 0o644
        wait_until(lambda: b.stats()["lease_cache"]["vouches"] > 0, 10, 0.05, "b's first vouch")
        lead = leader(c)
        os.kill(c.pid(lead), signal.SIGSTOP)
        t0 = time.monotonic()
        # A client that cannot reach the frozen member (b's connection can):
        # it waits for the election and the new leader's first second itself.
        run([ORCHARD, "-c", config_without(c, lead), "chmod", "600", "/f"])
        took = time.monotonic() - t0
        try:
            mode = stat.S_IMODE(os.stat(b.path("f")).st_mode)
        except OSError as e:
            mode = e.errno
        print("chmod through the new leader %.2f s after the freeze; b saw %r" % (took, mode))
        assert mode != 0o644, "b served the mode the frozen leader leased"
    finally:
        if lead:
            os.kill(c.pid(lead), signal.SIGCONT)
        b.stop()
        a.stop()


class ConfOf:
    """A cluster as a client sees it through the config file @conf."""

    def __init__(self, conf):
        self.conf = conf


@pytest.mark.parametrize("leases", [True, False], ids=["leases", "no-leases"])
def test_a_mount_passes_a_frozen_leader_by_itself(group, tmp_path, leases):
    """A leader frozen (SIGSTOP) rather than dead: its host still
    acknowledges every byte, so nothing on the wire says it is gone.  A
    mount with leases (the default) finds out through its vouch, which
    hears nothing within ORCH_VOUCH_TERM_MS, gives the member up and goes
    to the new leader; one without (lease_ms = 0 in its config) at the end
    of a try, when a PING on the same connection goes unanswered
    (docs/DESIGN.md, "Clients through a failover").  Files written and
    fsynced in a loop carry on, no call fails, and the one that spans the
    freeze takes a few seconds, not op_timeout_ms."""
    c = group
    m = Mount(c if leases else ConfOf(config_with(c, "lease_ms", 0)),
              tmp_path / "mnt").start()
    if not leases:
        assert "lease_cache" not in m.stats() or not m.stats()["lease_cache"].get("lease_ms")
    done, errors = [], []
    stop = threading.Event()
    lead = None

    def work():
        i = 0
        while not stop.is_set():
            i += 1
            t = time.monotonic()
            try:
                with open(m.path("f%d" % (i % 16)), "wb") as f:
                    f.write(b"%d" % i)
                    f.flush()
                    os.fsync(f.fileno())
                done.append((t, time.monotonic()))
            except OSError as e:
                errors.append("write %d: %s" % (i, errno.errorcode[e.errno]))
    th = threading.Thread(target=work)
    th.start()
    try:
        wait_until(lambda: len(done) >= 20 or errors, 30, 0.01, "20 writes before the freeze")
        lead = leader(c)
        os.kill(c.pid(lead), signal.SIGSTOP)
        frozen = time.monotonic()
        wait_until(lambda: sum(t > frozen for t, _ in done) >= 20 or errors, 30, 0.01,
                   "20 writes started after the freeze")
    finally:
        if lead and c.pid(lead):
            os.kill(c.pid(lead), signal.SIGCONT)
        stop.set()
        th.join()
        m.stop()
    assert not errors, errors
    across = max(end - start for start, end in done if end > frozen)
    print("the write across the freeze took %.2f s" % across)
    assert across < 8, "a write waited %.2f s on the frozen leader" % across


def data_stream(c, name):
    return c.server_stats()[name]["data_stream"]


def test_a_resync_sends_only_the_blocks_that_differ(group, tmp_path):
    """A leader starts its term by resyncing every follower (docs/DESIGN.md,
    "File data in a replica group"): it asks each for its blocks'
    checksums, object by object, and sends only the blocks whose
    checksums differ from its own.  A failover of a group whose members
    agree sends nothing; a follower stopped while 1 MiB of an 8 MiB file
    was overwritten gets that 1 MiB, not the file; the members end with
    the same bytes."""
    c = group
    MiB = 1 << 20
    m = Mount(c, tmp_path / "mnt").start()
    try:
        big = bytearray(os.urandom(8 * MiB))
        with open(m.path("big"), "wb") as f:
            f.write(big)
            os.fsync(f.fileno())
        for i in range(8):
            with open(m.path("small%d" % i), "wb") as f:
                f.write(os.urandom(5000 * (i + 1)))
                os.fsync(f.fileno())

        # A failover: the new leader resyncs two followers that hold it all.
        lead = leader(c)
        c.kill(lead)
        new = leader(c)
        c.start(lead)
        wait_until(lambda: data_stream(c, new)["resyncs"] >= 2, 30, 0.05,
                   "both followers resynced")
        ds = data_stream(c, new)
        print("after the failover:", ds)
        assert ds["resync_bytes"] < 256 << 10, ds
        assert ds["resync_same"] >= 2 * 8 * MiB, ds

        # A follower stopped through an overwrite of 1 MiB: taken out of
        # sync, it is resynced with exactly what changed when it is back.
        other = next(n for n in c.names if n != new)
        ds0 = data_stream(c, new)
        c.stop(other)
        patch = os.urandom(MiB)
        with open(m.path("big"), "r+b") as f:
            f.seek(3 * MiB)
            f.write(patch)
            os.fsync(f.fileno())
        big[3 * MiB:4 * MiB] = patch
        c.start(other)
        wait_until(lambda: data_stream(c, new)["resyncs"] > ds0["resyncs"]
                   and data_stream(c, new)["in_sync"] == 3, 30, 0.05,
                   "the stopped follower resynced and back in sync")
        ds = data_stream(c, new)
        print("after the stop:", ds)
        assert ds["dropped"] > ds0["dropped"], ds
        assert ds["resync_bytes"] - ds0["resync_bytes"] == MiB, ds
        assert ds["resync_same"] - ds0["resync_same"] >= 7 * MiB, ds
        with open(m.path("big"), "rb") as f:
            assert f.read() == big
    finally:
        m.stop()
    stop_settled(c)
    data = [c.store_objects(n) for n in c.names]
    assert data[0] == data[1] == data[2]


def test_file_data_survives_the_loss_of_each_leader_in_turn(group, tmp_path):
    """File data is replicated (docs/DESIGN.md, "File data in a replica
    group"): files written and fsynced through a mount, then the leader
    is SIGKILLed and restarted, five times, with more files written,
    overwritten, truncated and removed in between.  After each kill every
    file reads back byte-identical from the new leader, which had them
    from the data stream or from resyncing after a restart."""
    c = group
    rng = random.Random(7)
    want = {}
    m = Mount(c, tmp_path / "mnt").start()
    try:
        def write(name, data):
            with open(m.path(name), "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            want[name] = data

        for k in range(6):
            write("f%d" % k, os.urandom(rng.choice([1, 4096, 70000, 1 << 20])))
            if k:
                with open(m.path("f0"), "r+b") as f:
                    f.seek(100 * k)
                    f.write(b"x%d" % k)
                old = want["f0"] + bytes(max(0, 100 * k - len(want["f0"])))
                want["f0"] = old[:100 * k] + b"x%d" % k + old[100 * k + 2:]
                os.truncate(m.path("f1"), 5000 // k)
                want["f1"] = (want["f1"] + bytes(5000))[:5000 // k]
            if k == 3:
                os.unlink(m.path("f2"))
                del want["f2"]
            for name, data in want.items():
                with open(m.path(name), "rb") as f:
                    assert f.read() == data, (k, name)
            if k == 5:
                break
            lead = leader(c)
            c.kill(lead)
            for name, data in want.items():
                with open(m.path(name), "rb") as f:
                    assert f.read() == data, ("after killing", lead, name)
            c.start(lead)
        assert sorted(os.listdir(m.path())) == sorted(want)
    finally:
        m.stop()
    # Every member holds the same bytes (store-check --objects), and they are the files'.
    stop_settled(c)
    data = [c.store_objects(n) for n in c.names]
    assert data[0] == data[1] == data[2]
    assert sum(size for size, _ in data[0].values()) == sum(len(d) for d in want.values())


def read_direct(path, at):
    """The 4 KiB block at @at of @path as the servers hold it (O_DIRECT)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        return os.pread(fd, 4096, at)
    finally:
        os.close(fd)


def close_all(fds):
    """Closes @fds; a write error there is one the test has seen already."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def test_a_files_writes_sent_again_after_a_failover_land_in_the_order_written(group, tmp_path):
    """Writes behind to a leader that froze, then died: collecting them
    sends each again to the next leader.  A file's two writes of one block
    must land in the order they were written, whichever threads collect
    them (the reaper takes the first, and the file's fsync is there for
    the second): collected at once by both, they were sent again in either
    order, and the older landed last in about half the rounds."""
    c = group
    # security.capability is asked before each write: its absence is
    # trusted for the attributes' timeout, so no write asks the frozen leader.
    m = Mount(c, tmp_path / "mnt", {"getattr_timeout_ms": 60000}).start()
    fds = []
    try:
        for rnd in range(4):
            path = m.path("f%d" % rnd)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            fds.append(fd)
            assert os.pwrite(fd, b"w" * 4096, 0) == 4096
            os.fsync(fd)   # registered as a writer, the size published
            lead = leader(c)
            freeze(c, lead)
            for byte in b"ab":
                assert os.pwrite(fd, bytes([byte]) * 4096, 0) == 4096
            outcome = []

            def syncer():
                try:
                    os.fsync(fd)
                    outcome.append(0)
                except OSError as e:
                    outcome.append(e.errno)
            t = threading.Thread(target=syncer, daemon=True)
            t.start()
            c.kill(lead)
            t.join(30)
            assert outcome == [0], "fsync through the failover (round %d): %s" % (rnd, outcome)
            got = read_direct(path, 0)
            assert got == b"b" * 4096, "round %d: the block holds %r" % (rnd, got[:1])
            c.start(lead)
    finally:
        close_all(fds)
        m.stop()


def test_a_write_after_a_failover_is_not_overwritten_by_an_older_one_sent_again(tmp_path):
    """Two groups of three; a file whose inode is in group 1 and whose
    second strip is in group 0.  Write A of that strip goes behind to
    group 0's leader, which froze, then died; collecting A sends it again
    to the next leader, here 8 s after its try failed
    (ORCH_TEST_RESEND_DELAY: a client whose pauses between tries fell that
    way).  Write C of the same block, made once the next leader takes
    changes, went straight to it (the file's writer registration, in group
    1, did not change, so nothing waited for A), and A, sent again after
    it, put its old bytes over C: an fsynced write lost.  C now sees that
    it went on another connection to group 0 than A, waits for its file's
    older writes, and goes again (the mount's `overtaken`)."""
    c = Cluster(tmp_path / "c", nservers=6, replicas=3)
    c.start_all()
    m = None
    fds = []
    try:
        # security.capability is asked before each write: its absence is
        # trusted for the attributes' timeout, so no write asks the frozen leader.
        # A's pause must outlast the failover and the chmod even under
        # ASan, and A still have time left after it.
        m = Mount(c, tmp_path / "mnt", {"getattr_timeout_ms": 60000, "op_timeout_ms": 30000},
                  env={"ORCH_TEST_RESEND_DELAY": "8000"}).start()
        for i in range(12):
            c.cli("mkdir", "/d%d" % i)
            if members_group(c, "/d%d" % i) == 1:
                break
        d = "d%d" % i
        assert members_group(c, "/" + d) == 1
        other = m.path("other")   # in /, group 0's
        write_file(other, b"o")
        for rnd in range(2):
            path = m.path(d, "f%d" % rnd)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            fds.append(fd)
            lay = stat_layout(c, "/%s/f%d" % (d, rnd))
            assert (lay["first_server"], lay["stripe_count"]) == (1, 2), lay
            at = lay["strip_size"]   # the second strip: group 0's
            assert os.pwrite(fd, b"w" * 4096, at) == 4096
            os.fsync(fd)   # registered as a writer, the size published
            lead = leader(c, 0)
            freeze(c, lead)
            assert os.pwrite(fd, b"a" * 4096, at) == 4096   # A, held by the frozen leader
            c.kill(lead)
            os.chmod(other, 0o600 + rnd)   # returns once group 0's next leader takes changes
            assert os.pwrite(fd, b"c" * 4096, at) == 4096   # C
            os.fsync(fd)
            got = read_direct(path, at)
            assert got == b"c" * 4096, "round %d: the block holds %r" % (rnd, got[:1])
            assert m.stats()["write_behind"]["overtaken"] == rnd + 1
            c.start(lead)
    finally:
        close_all(fds)
        if m:
            m.stop()
        c.stop_all()
