"""Space on a shared, small host file system: what is freed goes back, and df
says what is left.

Three servers whose data directories share one small tmpfs, as several
servers on one host share a disk.  Freed blocks must go back to the host
(write/rm rounds do not grow its usage), a full mount fails writes with
ENOSPC and works again as soon as files are deleted, and `df` on the
mount reports what the servers can really still store."""
import errno
import os
import shutil
import subprocess

import pytest

from cluster import ON_LOG, Cluster, run, wait_until
from mount import Mount

MiB = 1 << 20


def host_used(path):
    s = os.statvfs(path)
    return (s.f_blocks - s.f_bfree) * s.f_frsize


def host_avail(path):
    s = os.statvfs(path)
    return s.f_bavail * s.f_frsize


class SharedFs:
    """A tmpfs of @size mounted on @path for the servers' data directories;
    everything is stopped and unmounted in close(), whatever happened."""

    def __init__(self, tmp_path, size, nservers=3, store_size=None):
        if os.geteuid() != 0 or not shutil.which("mount"):
            pytest.skip("mounting a tmpfs needs root")
        self.dir = str(tmp_path / "c")
        os.makedirs(self.dir)
        run(["mount", "-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", self.dir])
        self.c = self.m = None
        try:
            # store_size None: the store's default, 64 GiB per server
            # Servers sharing a file system need a reserve each for their
            # databases (ADMIN.md, "A full file system").
            self.c = Cluster(self.dir, nservers=nservers, store_size=store_size,
                             extra="\n[cluster]\nstore_reserve = %dM\n" % (16 * nservers))
            self.c.start_all()
            self.m = Mount(self.c, str(tmp_path / "mnt")).start()
        except BaseException:
            self.close()
            raise

    def close(self):
        try:
            if self.m is not None:
                self.m.stop()
        finally:
            try:
                if self.c is not None:
                    self.c.stop_all()
            finally:
                r = run(["umount", self.dir], check=False)
                if r.returncode != 0:
                    run(["umount", "-l", self.dir], check=False)


def dd(path, mib, check=True):
    return subprocess.run(["dd", "if=/dev/zero", "of=" + path, "bs=1M",
                           "count=%d" % mib, "conv=fsync"],
                          capture_output=True, text=True, check=check)


def write_file(path, nbytes, chunk=MiB):
    """Writes @nbytes of non-zero data and fsyncs; returns the errno that
    stopped it (0 if none) and the bytes written."""
    buf = os.urandom(chunk)
    done = 0
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as e:
        return e.errno, 0
    try:
        while done < nbytes:
            done += os.write(fd, buf[:min(chunk, nbytes - done)])
        os.fsync(fd)
        return 0, done
    except OSError as e:
        return e.errno, done
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def listing(d):
    """Host bytes each file under @d takes, biggest first."""
    out = []
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            out.append((os.lstat(p).st_blocks * 512, os.path.relpath(p, d)))
    return sorted(out, reverse=True)


def blocks_allocated(d, names):
    """Host bytes the servers' sparse blocks files take."""
    return sum(os.stat(os.path.join(d, n, "blocks")).st_blocks * 512 for n in names)


@pytest.mark.skipif(ON_LOG, reason="the log's segments take the tmpfs space this measures")
def test_write_rm_rounds_give_space_back(tmp_path):
    """Big files (dd) and small ones (extents shorter than the punch
    threshold, which stayed allocated), written and removed in rounds: the
    blocks files give every freed block back to the host."""
    fs = SharedFs(tmp_path, "256m")
    try:
        mnt, c = fs.m.mnt, fs.c
        base = host_used(fs.dir)
        small = os.urandom(24 << 10)   # 6 blocks, on one server
        rounds = []
        for i in range(6):
            if i % 2 == 0:
                dd(os.path.join(mnt, "big"), 64)
                names = [os.path.join(mnt, "big")]
            else:
                names = [os.path.join(mnt, "s%d" % k) for k in range(300)]
                for n in names:
                    with open(n, "wb") as f:
                        f.write(small)
                os.sync()
            grown = blocks_allocated(c.dir, c.names)
            for n in names:
                os.unlink(n)
            # The frees become durable at the next flush, then the blocks
            # are punched: poll for it.
            wait_until(lambda: blocks_allocated(c.dir, c.names) <= 1 << 20, timeout=20,
                       what=lambda: "round %d's blocks to go back to the host (%d KiB left"
                       " of %d)" % (i, blocks_allocated(c.dir, c.names) >> 10, grown >> 10))
            rounds.append((grown >> 10, host_used(fs.dir) >> 20))
            assert host_used(fs.dir) < 200 * MiB, (rounds, listing(fs.dir)[:12])
        print("blocks files' KiB when written, host MiB used after the rm: %s "
              "(%d MiB used at start)" % (rounds, base >> 20))
        # Nothing but the databases' WALs grew, and those have their
        # bounds (DESIGN.md: 64 MiB a WAL): no round's data stayed.
        other = sum(b for b, p in listing(fs.dir) if not p.endswith("-wal"))
        assert other < 8 * MiB, (rounds, listing(fs.dir)[:12])
    finally:
        fs.close()


def test_fill_enospc_delete_write_again(tmp_path):
    """Fill the mount: ENOSPC (not EIO, no hang); delete everything and a
    write of most of that space works at once, not after the next flush."""
    fs = SharedFs(tmp_path, "256m")
    try:
        mnt = fs.m.mnt
        names, err, total = [], 0, 0
        for i in range(64):
            p = os.path.join(mnt, "f%d" % i)
            names.append(p)
            err, n = write_file(p, 16 * MiB)
            total += n
            if err:
                break
        assert err == errno.ENOSPC, "filling failed with %s, not ENOSPC" % \
            errno.errorcode.get(err, err)
        # df says so: no room left, however many servers share the disk.
        assert mount_df(mnt)[1] <= min(8 * MiB, host_avail(fs.dir)), mount_df(mnt)
        for p in names:
            os.unlink(p)
        err, n = write_file(os.path.join(mnt, "again"), total * 3 // 4)
        assert err == 0, "writing %d MiB after deleting %d MiB failed: %s" % (
            (total * 3 // 4) >> 20, total >> 20, errno.errorcode.get(err, err))
        os.unlink(os.path.join(mnt, "again"))
        r = fs.c.cli("scrub", "--all", "--data", check=False, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        fs.close()


def mount_df(mnt):
    s = os.statvfs(mnt)
    return s.f_blocks * s.f_frsize, s.f_bavail * s.f_frsize


@pytest.mark.skipif(ON_LOG, reason="the log's segments take the tmpfs space this measures")
def test_df_is_what_the_servers_can_store(tmp_path):
    """Three servers of the default store size (64 GiB each) on one 64 MiB
    file system: df showed 192 GiB, and three times the host's free space."""
    fs = SharedFs(tmp_path, "64m")
    try:
        mnt = fs.m.mnt
        host_size = os.statvfs(fs.dir).f_blocks * os.statvfs(fs.dir).f_frsize
        size, avail = mount_df(mnt)
        print("df: size %d KiB, avail %d KiB; host: size %d KiB, avail %d KiB" %
              (size >> 10, avail >> 10, host_size >> 10, host_avail(fs.dir) >> 10))
        assert size <= host_size, (size, host_size)
        assert 0 < avail <= host_avail(fs.dir), (avail, host_avail(fs.dir))
        # What df says is free can be written (most of it: the databases
        # take some as they go).
        err, n = write_file(os.path.join(mnt, "f"), avail * 3 // 4)
        assert err == 0, errno.errorcode.get(err, err)
        size2, avail2 = mount_df(mnt)
        assert avail2 <= host_avail(fs.dir) and avail2 <= avail - n // 2, (avail, avail2, n)
        assert size2 - avail2 >= n, (size2, avail2, n)   # used: what the file holds
        os.unlink(os.path.join(mnt, "f"))
        wait_until(lambda: mount_df(mnt)[1] >= avail - (4 * MiB), timeout=20,
                   what=lambda: "df to show the space back (%d KiB, %d before)" %
                   (mount_df(mnt)[1] >> 10, avail >> 10))
        r = fs.c.cli("df")
        f = r.stdout.splitlines()[1].split()
        assert int(f[1]) * 1024 <= host_size and int(f[3]) * 1024 <= host_avail(fs.dir), r.stdout
    finally:
        fs.close()
