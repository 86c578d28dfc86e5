"""Replica groups against a register checker, Jepsen style (docs/DESIGN.md,
"Replica groups", "A register in file data"): clients on two mounts write
unique values to registers and read them back while the leader is killed
or cut off, and the recorded history must be linearizable
(tests/lib/linearize.py).  Apart from test_replicas.py, whose tests they
share, so that a parallel run spreads them over its processes."""
import errno
import os
import random
import threading
import time

from cluster import wait_until
from linearize import Op, check
from mount import Mount, write_file
from netns import NetCluster, skip_unless_usable
from test_replicas import leader


REGISTER_WIDTH = 16


class XattrRegister:
    """A register in an extended attribute: each call one request."""
    def init(self, path):
        write_file(path, b"")
        os.setxattr(path, "user.v", b"init")

    def write(self, path, value):
        os.setxattr(path, "user.v", value.encode())

    def read(self, path):
        return os.getxattr(path, "user.v").decode()


class DataRegister:
    """A register in a file's first REGISTER_WIDTH bytes, written in place
    (the size never changes) through open, pwrite and close, so through
    write-behind, and read with O_DIRECT: the bytes the group serves, which
    its data stream replicated.  Not through the page cache: that is
    close-to-open, so a reader may keep old pages while a write is not
    closed yet after another mount already read the new bytes, which no
    register allows (docs/DESIGN.md, "Coherent mode", "Data");
    test_linearize.py checks what the caches promise."""
    def init(self, path):
        write_file(path, b"init".ljust(REGISTER_WIDTH))

    def write(self, path, value):
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, value.encode().ljust(REGISTER_WIDTH), 0)
        finally:
            os.close(fd)          # write-behind's error, if any, comes here

    def read(self, path):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            return os.pread(fd, REGISTER_WIDTH, 0).decode().rstrip()
        finally:
            os.close(fd)


def register_history(c, where, fault, heal, rounds=4, register=XattrRegister()):
    """Jepsen style: four clients on two mounts write and read three
    registers (@register: an extended attribute, or a file's bytes; each
    value written once) while @fault(leader) strikes @rounds times, each
    followed by @heal(leader) once the clients did 60 more operations.
    Checks that no call failed (the mounts carry on by themselves) and
    that the recorded history is linearizable (tests/lib/linearize.py)."""
    seed = int(os.environ.get("ORCH_TEST_SEED", random.randrange(1 << 30)))
    ms = [Mount(c, where / ("mnt%d" % i)).start() for i in range(2)]
    keys = ["reg%d" % i for i in range(3)]
    history, errors, lock = [], [], threading.Lock()
    stop = threading.Event()
    try:
        for k in keys:
            register.init(ms[0].path(k))

        def client(cid, m):
            rng = random.Random(seed * 10 + cid)
            i = 0
            while not stop.is_set():
                key = rng.choice(keys)
                i += 1
                call = time.monotonic()
                if rng.random() < 0.5:
                    value = "c%d-%d" % (cid, i)
                    try:
                        register.write(m.path(key), value)
                        ret = time.monotonic()
                    except OSError as e:
                        ret = None        # may or may not have happened
                        errors.append("client %d: write %s: %s after %.2f s" % (
                            cid, value, errno.errorcode[e.errno], time.monotonic() - call))
                    op = Op(key, "w", value, call, ret, cid)
                else:
                    try:
                        got = register.read(m.path(key))
                    except OSError as e:
                        errors.append("client %d: read: %s" % (cid, errno.errorcode[e.errno]))
                        continue
                    op = Op(key, "r", got, call, time.monotonic(), cid)
                with lock:
                    history.append(op)

        threads = [threading.Thread(target=client, args=(cid, ms[cid % 2])) for cid in range(4)]
        for t in threads:
            t.start()
        try:
            for k in range(rounds):
                n0 = len(history)
                wait_until(lambda: len(history) >= n0 + 60 or errors, 30, 0.01,
                           "60 operations before fault %d" % k)
                lead = leader(c)
                fault(lead)
                try:
                    n1 = len(history)
                    wait_until(lambda: len(history) >= n1 + 60 or errors, 30, 0.01,
                               "60 operations after fault %d" % k)
                finally:
                    heal(lead)
        finally:
            stop.set()
            for t in threads:
                t.join()
    finally:
        for m in ms:
            m.stop()
    assert not errors, "seed %d (ORCH_TEST_SEED): %s" % (seed, errors[:5])
    v = check(history, initial="init")
    print("%d operations, %d writes; seed %d" %
          (len(history), sum(o.kind == "w" for o in history), seed))
    assert v.ok, "seed %d (ORCH_TEST_SEED): %s" % (seed, v.explain())


def test_a_register_history_through_leader_kills_is_linearizable(group, tmp_path):
    """The leader SIGKILLed four times, restarted each time."""
    register_history(group, tmp_path, group.kill, group.start)


def test_a_register_history_through_leader_cuts_is_linearizable(tmp_path):
    """Each member on a host of its own, the mounts in the root namespace:
    the leader's link cut three times (it steps down and restarts as a
    follower), healed each time once the clients carried on without it."""
    skip_unless_usable()
    with NetCluster(tmp_path / "c", nservers=3, replicas=3) as c:
        register_history(c, tmp_path, c.net.cut, c.net.heal, rounds=3)


def test_a_register_in_file_data_through_leader_kills_is_linearizable(group, tmp_path):
    """The same with the registers in files' bytes (DataRegister); the
    leader SIGKILLed four times."""
    register_history(group, tmp_path, group.kill, group.start, register=DataRegister())


def test_a_register_in_file_data_through_leader_cuts_is_linearizable(tmp_path):
    """File-data registers with the leader's link cut three times."""
    skip_unless_usable()
    with NetCluster(tmp_path / "c", nservers=3, replicas=3) as c:
        register_history(c, tmp_path, c.net.cut, c.net.heal, rounds=3,
                         register=DataRegister())
