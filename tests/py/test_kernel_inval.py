"""Kernel invalidation (docs/DESIGN.md, "The kernel's caches"): a change
made through one mount drops what the kernel of another mount cached about
it, so it shows there at once, although that kernel was told to keep its
entries and attributes for a minute.

Mount B keeps names, absent names and attributes for 60 s in its kernel
(dcache_timeout_ms, negative_timeout_ms, getattr_timeout_ms); mount A
changes things.  Without the invalidations B would show the old state
for the whole minute.
"""
import os
import shutil
import stat

import pytest

from cluster import server_of, wait_until
from mount import KERNEL_KEEPS_A_MINUTE, ORCHARD_MOUNT, kernel_asks, stat_errno, write_file

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or not os.path.exists(ORCHARD_MOUNT)
    or shutil.which("fusermount3") is None,
    reason="needs /dev/fuse, fusermount3 and orchard-mount")

PROMPT_S = 2.0   # far below the kernel's 60 s


def exists(path):
    try:
        os.lstat(path)
        return True
    except FileNotFoundError:
        return False


@pytest.fixture
def two(mounts):
    a = mounts()
    b = mounts(KERNEL_KEEPS_A_MINUTE)
    os.mkdir(a.path("d"))
    write_file(a.path("d", "f"), b"12345")
    write_file(a.path("d", "g"), b"g")
    return a, b


def test_long_kernel_cache_holds_without_changes(two):
    """The control: with nothing changing, B's kernel answers repeated
    stats itself (so the checks below really test invalidation)."""
    a, b = two
    p = b.path("d", "f")
    os.stat(p)
    asked = kernel_asks(b)
    for _ in range(200):
        os.stat(p)
    assert kernel_asks(b) - asked <= 2   # reading the counters may ask for the root


def test_attributes_changed_elsewhere_show_at_once(two):
    a, b = two
    p = b.path("d", "f")
    assert stat.S_IMODE(os.stat(p).st_mode) != 0o600
    assert os.stat(p).st_size == 5
    os.chmod(a.path("d", "f"), 0o600)
    wait_until(lambda: stat.S_IMODE(os.stat(p).st_mode) == 0o600, PROMPT_S, 0.01,
               "B's kernel to show A's chmod")
    with open(a.path("d", "f"), "ab") as f:
        f.write(b"678")
    wait_until(lambda: os.stat(p).st_size == 8, PROMPT_S, 0.01,
               "B's kernel to show the size A's append published")
    ki = b.stats()["kernel_invalidations"]
    assert ki["sent"] >= 2 and ki["sent_attrs"] >= 2
    assert ki["sent"] == ki["sent_attrs"] + ki["sent_names"]


def test_names_changed_elsewhere_show_at_once(two):
    a, b = two
    assert exists(b.path("d", "g")) and not exists(b.path("d", "h"))  # both cached now

    os.rename(a.path("d", "g"), a.path("d", "h"))
    wait_until(lambda: not exists(b.path("d", "g")), PROMPT_S, 0.01,
               "B's kernel to drop the renamed name")
    wait_until(lambda: exists(b.path("d", "h")), PROMPT_S, 0.01,
               "B's kernel to drop the absent name the rename filled")
    os.unlink(a.path("d", "h"))
    wait_until(lambda: not exists(b.path("d", "h")), PROMPT_S, 0.01,
               "B's kernel to drop the unlinked name")
    assert not exists(b.path("d", "new"))
    write_file(a.path("d", "new"), b"n")
    wait_until(lambda: exists(b.path("d", "new")), PROMPT_S, 0.01,
               "B's kernel to drop the absent name A created")
    with open(b.path("d", "new"), "rb") as f:
        assert f.read() == b"n"
    assert b.stats()["kernel_invalidations"]["sent_names"] >= 3


def test_listing_changed_elsewhere_shows_at_once(two):
    a, b = two
    assert sorted(os.listdir(b.path("d"))) == ["f", "g"]
    write_file(a.path("d", "x"), b"x")
    wait_until(lambda: sorted(os.listdir(b.path("d"))) == ["f", "g", "x"], PROMPT_S, 0.01,
               "B's listing to show A's create")


def test_own_changes_leave_the_kernel_alone(two):
    """A's own creates, writes and chmods push to A too (its lease cache
    orders them), but its kernel applied them already: no invalidation."""
    a, b = two
    os.listdir(b.path("d"))
    before_a = a.stats()["kernel_invalidations"]
    for i in range(50):
        write_file(a.path("d", "own%d" % i), b"x")
        os.chmod(a.path("d", "own%d" % i), 0o640)
    after_a = a.stats()["kernel_invalidations"]
    assert after_a["own"] - before_a["own"] >= 100
    assert after_a["sent"] == before_a["sent"]
    # B held the directory: it was told, and passed it on to its kernel.
    wait_until(lambda: b.stats()["kernel_invalidations"]["sent"] > 0, PROMPT_S, 0.01,
               "B's invalidations")


def test_data_changed_elsewhere_shows_in_a_file_held_open(two):
    """B holds the file open with its pages cached; A rewrites it (same
    size) and closes: B's next read through the same descriptor sees the
    new bytes (the pushed attributes carry the new mtime, and the kernel
    drops pages whose file's mtime changed)."""
    a, b = two
    fd = os.open(b.path("d", "f"), os.O_RDONLY)
    try:
        assert os.pread(fd, 5, 0) == b"12345"
        reads = b.stats()["fuse"]["READ"]
        assert os.pread(fd, 5, 0) == b"12345"
        assert b.stats()["fuse"]["READ"] == reads      # from B's page cache
        with open(a.path("d", "f"), "r+b") as f:
            f.write(b"abcde")
        wait_until(lambda: os.pread(fd, 5, 0) == b"abcde", PROMPT_S, 0.01,
                   "B's open file to read A's new bytes")
    finally:
        os.close(fd)


def test_server_restart_drops_the_kernel_copies_of_its_inodes(two):
    """A restarted server forgot B's leases and will never push to B what
    changes next: B's connection to it breaks, and B drops from its kernel
    every inode of that server, so A's chmod after the restart shows in B
    although B's kernel was told to keep the attributes for a minute."""
    a, b = two
    c = a.cluster
    p = b.path("d", "f")
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o644
    name = "s%d" % server_of(c, "/d/f")
    revokes = b.stats()["kernel_invalidations"]["revokes"]
    c.stop(name)
    c.start(name)
    wait_until(lambda: b.stats()["kernel_invalidations"]["revokes"] > revokes, PROMPT_S, 0.01,
               "B to drop the kernel's copies of the restarted server's inodes")
    wait_until(lambda: stat_errno(a.path("d", "f")) == 0, 30, what="A to work again")
    os.chmod(a.path("d", "f"), 0o600)
    wait_until(lambda: stat.S_IMODE(os.stat(p).st_mode) == 0o600, PROMPT_S, 0.01,
               "B's kernel to show the chmod made after the restart")
