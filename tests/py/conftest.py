import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from cluster import Cluster  # noqa: E402


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
