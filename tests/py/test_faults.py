"""The test hooks are listed in one table, src/common/fault.def, and read
only through orch_fault_env() (docs/DESIGN.md, "Test hooks")."""
import os
import re

from cluster import Cluster

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def fault_table():
    text = open(os.path.join(ROOT, "src", "common", "fault.def")).read()
    hooks = re.findall(r'^ORCH_FAULT\((\w+), (?:"(\w+)"|NULL),', text, re.M)
    points = re.findall(r'^ORCH_KILLPOINT\((\w+), "(\w+)",', text, re.M)
    return hooks, points


def test_every_hook_is_in_the_table_and_read_through_it():
    hooks, points = fault_table()
    assert len(hooks) >= 7 and len(points) >= 4, (hooks, points)
    variables = {v for _, v in hooks if v}
    design = open(os.path.join(ROOT, "docs", "DESIGN.md")).read()
    for v in variables:
        assert v in design, "docs/DESIGN.md does not name the test hook %s" % v
    stray = []
    for d, _, files in os.walk(os.path.join(ROOT, "src")):
        for f in files:
            if not f.endswith((".c", ".h")) or f == "fault.c":
                continue
            path = os.path.join(d, f)
            for n, line in enumerate(open(path), 1):
                if re.search(r'getenv\("ORCH_', line):
                    stray.append("%s:%d: %s" % (os.path.relpath(path, ROOT), n, line.strip()))
    assert not stray, "test hooks read outside fault.def:\n" + "\n".join(stray)
    for path in ("src/store/writer.c", "src/store/store.c"):
        text = open(os.path.join(ROOT, path)).read()
        assert not re.search(r'killpoint\("', text), "%s names a kill point by string" % path


def test_unknown_kill_point_is_named_in_the_log(tmp_path):
    """A kill point the table does not know is not silently ignored."""
    c = Cluster(tmp_path / "c", nservers=1)
    try:
        c.start("s0", env={"ORCH_STORE_KILL": "nosuchpoint:3"})
        c.cli("mkdir", "/d")
        assert "ORCH_STORE_KILL names no kill point: 'nosuchpoint:3'" in c.log_text("s0")
    finally:
        c.stop_all()
