"""Every crash point of every cross-server intent (docs/DESIGN.md,
"Intents"): one side is power-cut (common/pcut.h: everything not synced is
put back, as a power loss would) at a named step, restarted, and the intent
must converge: a moved file keeps exactly one of its names, a link count
matches the names, nothing is left that names nothing, and scrub and the
store checker find nothing.

The servers run with a long commit interval, so nothing becomes durable by
itself during the operation: only what the protocol forces survives a cut.
The setup is made durable by a clean stop before the cut run starts.

Two servers; /a is held by s0 and /b by s1 (chosen by the placement hash).
A file made in a directory has its inode on that directory's server."""
import os
import subprocess

import pytest

from cluster import ORCHARD, Cluster, wait_until

STRIP = 65536
MASK = (1 << 64) - 1


def placement(parent, name, nservers):
    """The server a new directory @name in @parent goes to (sv_dir_placement)."""
    h = 1469598103934665603
    for i in range(8):
        h = ((h ^ ((parent >> (8 * i)) & 0xff)) * 1099511628211) & MASK
    for b in name.encode():
        h = ((h ^ b) * 1099511628211) & MASK
    return h % nservers


def handle(c, path):
    out = c.cli("stat", path).stdout
    return int(out.split("Handle: 0x")[1].split()[0], 16)


def name_on(c, parent_path, server, prefix):
    """A name whose directory, made in @parent_path, lands on @server."""
    ph = handle(c, parent_path)
    for i in range(1000):
        name = "%s%d" % (prefix, i)
        if placement(ph, name, c.n) == server:
            return name
    raise AssertionError("no name placed on s%d" % server)


def exists(c, path):
    return c.cli("stat", path, check=False).returncode == 0


def links(c, path):
    return int(c.cli("stat", path).stdout.split("Links: ")[1].split()[0])


def read(c, tmp_path, path):
    out = tmp_path / "out"
    if out.exists():
        out.unlink()
    c.cli("get", path, out)
    return out.read_bytes()



DATA = bytes(range(256)) * (3 * STRIP // 256 + 7)  # spans both servers


def make_tree(c, tmp_path):
    """Durable starting state for every operation."""
    root = handle(c, "/")
    names = {}
    for srv, key in ((0, "a"), (1, "b")):
        names[key] = "/" + name_on(c, "/", srv, key)
        c.cli("mkdir", names[key])
    a, b = names["a"], names["b"]
    src = tmp_path / "src"
    src.write_bytes(DATA)
    c.cli("put", src, a + "/f")        # inode on s0
    c.cli("put", src, b + "/g")        # inode on s1
    c.cli("put", src, a + "/h")        # inode on s0, its only name moved to /b
    c.cli("mv", a + "/h", b + "/h")
    c.cli("put", src, a + "/k")        # inode on s0, a second name in /b
    c.cli("ln", a + "/k", b + "/k2")
    c.cli("put", src, a + "/big")      # freed by unlink: data on both servers
    names["sub"] = a + "/" + name_on(c, a, 1, "sub")   # mkdir'd under the cut
    names["rd"] = a + "/" + name_on(c, a, 1, "rd")     # rmdir'd under the cut
    c.cli("mkdir", names["rd"])
    assert "Server: 1" in c.cli("stat", names["rd"]).stdout
    assert root
    return names


# operation: (argv, coordinator, coordinator's intent kind, peer's message)
OPS = {
    "rename-out": (lambda n: ["mv", n["a"] + "/f", n["b"] + "/f"], 0, "rename",
                   "SV2SV_RENAME_IN"),
    "rename-in": (lambda n: ["mv", n["b"] + "/g", n["a"] + "/g"], 1, "rename",
                  "SV2SV_RENAME_IN"),
    "link": (lambda n: ["ln", n["a"] + "/f", n["b"] + "/l"], 1, "link", "SV2SV_NLINK_ADJ"),
    "unlink-last": (lambda n: ["rm", n["b"] + "/h"], 1, "nlink", "SV2SV_NLINK_ADJ"),
    "unlink-link": (lambda n: ["rm", n["b"] + "/k2"], 1, "nlink", "SV2SV_NLINK_ADJ"),
    "mkdir": (lambda n: ["mkdir", n["sub"]], 0, "mkdir", "SV2SV_MKDIR_INODE"),
    "rmdir": (lambda n: ["rm", "-r", n["rd"]], 0, "rmdir", "SV2SV_RMDIR_INODE"),
    "free-data": (lambda n: ["rm", n["a"] + "/big"], 0, "free-data",
                  "SV2SV_DATA_DELETE_MANY"),
}

COORD_STEPS = ("begun", "durable", "answered", "finished")
DATA_STEPS = ("begun", "durable", "stored", "finished")
PEER_STEPS = ("applied", "durable")


def cases():
    for op, (_, coord, kind, msg) in OPS.items():
        for step in (DATA_STEPS if kind == "free-data" else COORD_STEPS):
            yield op, coord, "%s-%s" % (kind, step)
        for step in PEER_STEPS:
            yield op, 1 - coord, "%s-%s" % (msg, step)


def check_converged(c, tmp_path, op, n):
    """What must hold after the intent converged, whichever way it went."""
    a, b = n["a"], n["b"]
    if op in ("rename-out", "rename-in"):
        src, dst = ((a + "/f", b + "/f") if op == "rename-out" else (b + "/g", a + "/g"))
        there = [p for p in (src, dst) if exists(c, p)]
        assert len(there) == 1, "names after the cut: %s" % there
        assert links(c, there[0]) == 1
        assert read(c, tmp_path, there[0]) == DATA
    elif op == "link":
        assert read(c, tmp_path, a + "/f") == DATA
        assert links(c, a + "/f") == 1 + exists(c, b + "/l")
    elif op == "unlink-last":
        if exists(c, b + "/h"):
            assert links(c, b + "/h") == 1
            assert read(c, tmp_path, b + "/h") == DATA
    elif op == "unlink-link":
        assert links(c, a + "/k") == 1 + exists(c, b + "/k2")
        assert read(c, tmp_path, a + "/k") == DATA
    elif op == "mkdir":
        if exists(c, n["sub"]):
            assert "directory" in c.cli("stat", n["sub"]).stdout
            assert c.cli("ls", n["sub"]).stdout.split() == []
    elif op == "rmdir":
        if exists(c, n["rd"]):
            assert c.cli("ls", n["rd"]).stdout.split() == []
    elif op == "free-data":
        if exists(c, a + "/big"):
            assert read(c, tmp_path, a + "/big") == DATA
    # No entry names nothing: every listed name can be looked up.
    for d in ("/", a, b):
        for name in c.cli("ls", d).stdout.split():
            assert exists(c, d.rstrip("/") + "/" + name), "dangling %s/%s" % (d, name)
    p = c.cli("scrub", "--all", check=False, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def run_case(tmp_path, op, victim, point):
    argv, _, _, _ = OPS[op]
    c = Cluster(tmp_path / "c", nservers=2,
                extra="\n[cluster]\ncommit_interval_ms = 600000\n")
    vname = "s%d" % victim
    done = os.path.join(c.dir, vname + ".pcut-done")
    proc = None
    try:
        c.start_all()
        n = make_tree(c, tmp_path)
        c.stop_all()  # a clean stop: the setup is durable
        c.start(vname, wait=False, env={"ORCH_PCUT": "1", "ORCH_PCUT_DONE": done,
                                        "ORCH_PCUT_POINT": point})
        c.start("s%d" % (1 - victim), wait=False)
        for name in c.names:
            c.wait_up(name)
        proc = subprocess.Popen([ORCHARD, "-c", c.conf] + [str(a) for a in argv(n)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_until(lambda: c.procs[vname].poll() is not None, 30, what="the cut at " + point)
        wait_until(lambda: os.path.exists(done), 30, what="the cut's revert")
        assert c.procs[vname].returncode == 137, c.log_tail(vname)
        assert "power cut at point " + point in c.log_tail(vname)
        c.start(vname)
        proc.communicate(timeout=60)  # its answer, whatever it is, came
        proc = None
        wait_until(lambda: c.intents("s0") == 0 and c.intents("s1") == 0, 30,
                   what="every intent to finish")
        check_converged(c, tmp_path, op, n)
        c.stop_all()
        c.store_check_all()
    finally:
        if proc is not None:
            proc.kill()
            proc.communicate()
        c.stop_all(check_logs=False)


@pytest.mark.parametrize("op,victim,point", list(cases()),
                         ids=["%s:s%d:%s" % x for x in cases()])
def test_intent_crash_point(tmp_path, op, victim, point):
    run_case(tmp_path, op, victim, point)
