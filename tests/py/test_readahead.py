"""Big sequential reads through the mount: the mount raises the kernel's
readahead (readahead_kb), and many reads in flight at once, each fanned out
to every server, all get their replies.  The transport once lost the
wakeup that hands the reading role to a waiting call when that call's
thread was busy with another server: replies sat unread until the op
timeout ("request timed out" in the log) although every server had
answered."""
import hashlib
import os
import threading

import pytest

from mount import Mount

MiB = 1 << 20


def bdi_readahead_kb(path):
    dev = os.stat(path).st_dev
    with open("/sys/class/bdi/%d:%d/read_ahead_kb" % (os.major(dev), os.minor(dev))) as f:
        return int(f.read())


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="sets the bdi readahead and drops caches: root")
def test_big_reads_in_parallel_all_answered(cluster3, tmp_path):
    m = Mount(cluster3, str(tmp_path / "mnt"), {"readahead_kb": 4096})
    m.start()
    try:
        data = os.urandom(96 * MiB)
        with open(m.path("big"), "wb") as f:
            f.write(data)
        assert bdi_readahead_kb(m.mnt) == 4096   # set at the first open
        want = [hashlib.sha256(data[i:i + 24 * MiB]).hexdigest() for i in range(0, len(data), 24 * MiB)]
        for _ in range(3):
            drop_caches()
            got = [None] * 4

            def reader(k):
                h = hashlib.sha256()
                with open(m.path("big"), "rb") as f:
                    f.seek(k * 24 * MiB)
                    left = 24 * MiB
                    while left:
                        b = f.read(min(left, MiB))
                        assert b
                        h.update(b)
                        left -= len(b)
                got[k] = h.hexdigest()

            threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert got == want
        assert "timed out" not in m.stderr(), m.stderr()[-2000:]
    finally:
        m.stop()


def test_readahead_option_checked(cluster3, tmp_path):
    m = Mount(cluster3, str(tmp_path / "mnt"), {"readahead_kb": 1 << 30})
    with pytest.raises(AssertionError, match="readahead_kb"):
        m.start(timeout=10)
