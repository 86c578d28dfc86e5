"""A full file system must not block deletes.

Server s0's data directory is a 64 MiB tmpfs; s1's is on the ordinary
disk, so only s0 fills.  Without a reserve the sparse blocks file took
every free block, and the next unlink could not grow meta.db's WAL:
`orchard rm` and `touch` failed with ENOSPC.  The store now keeps
`store_reserve` free for the databases (automatic: 4 MiB here), refuses
new blocks with ENOSPC instead, and gives the space of deleted files
back to the host (hole punching)."""
import os
import shutil

import pytest

from cluster import ON_LOG, Cluster, wait_until

FILE = 2 << 20


def free_bytes(path):
    s = os.statvfs(path)
    return s.f_bavail * s.f_frsize


def fill_delete_refill(c, tmp_path):
    s0 = os.path.join(c.dir, "s0")
    local = tmp_path / "data"
    local.write_bytes(os.urandom(FILE))
    start_free = free_bytes(s0)
    names, full = [], None
    for i in range(200):
        r = c.cli("put", local, "/f%d" % i, check=False)
        names.append("/f%d" % i)
        if r.returncode != 0:
            full = r
            break
    assert full is not None, "64 MiB never filled"
    assert "No space left on device" in full.stderr + full.stdout, full.stderr
    assert "no space for new blocks" in c.log_text("s0")
    # The reserve held: the databases still have room.
    full_free = free_bytes(s0)
    assert full_free >= 2 << 20, full_free

    # Every delete commits, and so do a create and a mkdir.
    for n in names:
        c.cli("rm", n)
    c.cli("touch", "/after")
    c.cli("mkdir", "/dir-after")
    # The deleted files' space comes back to the host (their frees are
    # made durable by the next flush, then their blocks punched).
    wait_until(lambda: free_bytes(s0) >= start_free - (8 << 20), timeout=20,
               what=lambda: "s0's tmpfs to get its space back (%d of %d free)" %
               (free_bytes(s0), start_free))
    print("free on s0: %d at start, %d when full, %d after rm; %d files" %
          (start_free, full_free, free_bytes(s0), len(names)))
    # Writes work again.  Not quite as many: the store's WAL grew by a
    # few MiB meanwhile (it is checkpointed at 16 MiB).
    again = ["/g%d" % i for i in range(len(names) // 2)]
    for n in again:
        c.cli("put", local, n)
    r = c.cli("scrub", "--all", check=False, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    c.cli("rm", *again)


@pytest.mark.skipif(ON_LOG, reason="the log's segments take the tmpfs space this measures")
def test_full_disk_deletes(tmp_path):
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    c = Cluster(tmp_path / "c", nservers=2, tmpfs={"s0": "64m"})
    try:
        c.start_all()
        try:
            fill_delete_refill(c, tmp_path)
        finally:
            c.stop_all()
        c.check_integrity()
    finally:
        c.unmount_tmpfs()
