import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from cluster import Cluster  # noqa: E402
from deadline import DEFAULT_S, Deadline, start_dumper  # noqa: E402
from mount import Mount  # noqa: E402


def pytest_configure(config):
    start_dumper()
    config.addinivalue_line(
        "markers", "deadline(seconds): this test's deadline, instead of ORCH_TEST_DEADLINE's "
        "(tests/lib/deadline.py)")


@pytest.fixture(autouse=True)
def deadline(request):
    """Every test fails, with the stacks of its orchard processes, rather
    than hang past its deadline (tests/lib/deadline.py)."""
    marker = request.node.get_closest_marker("deadline")
    seconds = DEFAULT_S
    if marker and DEFAULT_S > 0:
        seconds = max(DEFAULT_S, marker.args[0])
    d = Deadline(seconds, request.node.nodeid)
    yield d
    d.cancel()
    if d.fired():
        pytest.fail("ran past its deadline of %.0f s (the stacks are in its stderr)" % seconds)


@pytest.fixture
def group(tmp_path):
    """One replica group of three members."""
    c = Cluster(tmp_path / "c", nservers=3, replicas=3)
    c.start_all()
    yield c
    c.stop_all()


@pytest.fixture
def cluster3(tmp_path):
    c = Cluster(tmp_path / "c", nservers=3)
    c.start_all()
    yield c
    c.stop_all()


@pytest.fixture
def cluster2(tmp_path):
    c = Cluster(tmp_path / "c", nservers=2)
    c.start_all()
    yield c
    c.stop_all()


@pytest.fixture
def cluster1(tmp_path):
    c = Cluster(tmp_path / "c", nservers=1)
    c.start_all()
    yield c
    c.stop_all()


@pytest.fixture
def mounts(cluster3, tmp_path):
    """Factory: mounts(opts) -> a started Mount of cluster3.  All are stopped
    (and their stderr checked) before the cluster stops."""
    made = []

    def make(opts=None, name=None, extra_args=(), where=None, env=None):
        base = where or tmp_path
        m = Mount(cluster3, os.path.join(base, name or "mnt%d" % len(made)), opts, extra_args,
                  env)
        made.append(m)
        return m.start()

    yield make
    errors = []
    for m in reversed(made):
        try:
            # No FORGET of an inode the mount did not count (lookup counts).
            if m.proc is not None and m.proc.poll() is None and os.path.ismount(m.mnt):
                unknown = m.stats()["inode_table"]["forget_unknown"]
                if unknown:
                    errors.append("%s: %d FORGETs of unknown inodes" % (m.mnt, unknown))
            m.stop()
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)


@pytest.fixture
def public_dir():
    """A directory every user can traverse (pytest's tmp_path is 0700), for
    mounts that another uid uses."""
    d = tempfile.mkdtemp(prefix="orch-mnt-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def shared(public_dir, mounts, request):
    """A mount that uid 65534 may use (allow_other, with default_permissions
    when the test's perms parameter says so), and its directory "shared"
    (mode 0777: mkdir's mode went through our umask)."""
    perms = request.node.callspec.params.get("perms")
    opts = {"allow_other": None}
    if perms == "default_permissions":
        opts["default_permissions"] = None
    m = mounts(opts, where=public_dir)
    os.chmod(m.mnt, 0o755)
    os.mkdir(m.path("shared"))
    os.chmod(m.path("shared"), 0o777)
    return m
