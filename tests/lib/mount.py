"""orchard-mount processes for the FUSE tests.

A Mount starts `orchard-mount -f -c CONF MNT -o OPTS` as a child (its own
session, stderr to a file), waits until MNT is a mount point (30 s deadline,
failing at once if the process exits), and in stop() unmounts with
`fusermount3 -u`, waits for the process to exit (killing it by PID if it
does not) and scans its stderr for sanitizer reports.
"""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import threading
import time

from cluster import BAD_LOG, BIN

ORCHARD_MOUNT = os.path.join(BIN, "orchard-mount")
STATS_XATTR = "user.orchard.stats"
KNOB_PREFIX = "user.orchard."


class Mount:
    def __init__(self, cluster, mnt, opts=None, extra_args=(), env=None):
        self.cluster = cluster
        self.mnt = str(mnt)
        self.opts = dict(opts or {})
        self.extra_args = list(extra_args)
        self.env = dict(env or {})   # added to the process's environment (test hooks)
        self.log = self.mnt.rstrip("/") + ".stderr"
        self.proc = None

    def _optstring(self):
        out = []
        for k, v in self.opts.items():
            out.append(k if v is None or v is True else "%s=%s" % (k, v))
        return ",".join(out)

    def start(self, timeout=30.0):
        os.makedirs(self.mnt, exist_ok=True)
        args = [ORCHARD_MOUNT, "-f", "-c", self.cluster.conf, self.mnt]
        if self.opts:
            args += ["-o", self._optstring()]
        args += self.extra_args
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=err, stderr=err,
                                         env=dict(os.environ, **self.env),
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None:
                raise AssertionError("orchard-mount exited (%d) before mounting:\n%s"
                                     % (self.proc.returncode, self.stderr()))
            if time.monotonic() > deadline:
                self.stop(check=False)
                raise AssertionError("%s not mounted after %.0f s" % (self.mnt, timeout))
            time.sleep(0.02)
        return self

    def stderr(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def mounted(self):
        """True while the kernel lists the mount, even one whose process died
        (os.path.ismount() cannot stat that: ENOTCONN)."""
        mnt = os.path.realpath(self.mnt)
        with open("/proc/self/mounts") as f:
            return any(line.split()[1] == mnt for line in f)

    def unmount(self):
        """fusermount3 -u (lazy as a fallback); True if it unmounted."""
        if not self.mounted():
            return True
        r = subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
        if r.returncode != 0 and self.mounted():
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True)
        return not self.mounted()

    def kill(self):
        """SIGKILLs the process (by PID) and unmounts what it leaves: the
        kernel keeps the dead mount listed, every call in it failing with
        ENOTCONN.  A plain `umount` (or `fusermount3 -u`) unmounts it once
        nothing in it is open, and fails with EBUSY while a process still
        holds a file there; `umount -l` then detaches it at once (the holder
        keeps getting ENOTCONN until it closes).  Returns the way it took:
        "umount" or "umount -l"."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        if not self.mounted():
            return None
        way = "umount"
        r = subprocess.run(["umount", self.mnt], capture_output=True, text=True)
        if r.returncode != 0 and self.mounted():
            way = "umount -l"
            r = subprocess.run(["umount", "-l", self.mnt], capture_output=True, text=True)
        assert not self.mounted(), "the dead mount %s stays: %s" % (self.mnt, r.stderr)
        return way

    def stop(self, check=True, timeout=20.0):
        """Unmounts and waits for the process; returns its exit status."""
        if self.proc is None:
            return None
        self.unmount()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            stacks = thread_stacks(self.proc.pid, timeout=30)
            os.kill(self.proc.pid, signal.SIGKILL)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                # A thread stuck in the kernel on this mount: only an abort frees it.
                abort_fuse({self.mnt})
                self.proc.wait()
            if check:
                raise AssertionError("orchard-mount did not exit after unmount:\n"
                                     + self.stderr()[-4000:] + stacks)
            rc = None
        self.proc = None
        if check:
            text = self.stderr()
            m = BAD_LOG.search(text)
            assert not m, "orchard-mount reports a defect:\n" + text[-6000:]
        return rc

    # --- the virtual xattrs --------------------------------------------------
    def stats(self):
        return json.loads(os.getxattr(self.mnt, STATS_XATTR))

    def server_requests(self):
        return self.stats()["server_requests"]

    def knob(self, name):
        return int(os.getxattr(self.mnt, KNOB_PREFIX + name))

    def set_knob(self, name, value):
        os.setxattr(self.mnt, KNOB_PREFIX + name, str(value).encode())

    def path(self, *parts):
        return os.path.join(self.mnt, *parts)


FUSECTL = "/sys/fs/fuse/connections"


def mount_fusectl():
    """Mounts the FUSE control file system if it is not (as root)."""
    if os.path.isdir(FUSECTL) and not os.listdir(FUSECTL) and os.geteuid() == 0:
        subprocess.run(["mount", "-t", "fusectl", "none", FUSECTL], capture_output=True)


def abort_fuse(mountpoints):
    """Aborts the FUSE connections of @mountpoints (fusectl mounted by
    mount_fusectl); every request waiting on them fails.  It forks nothing:
    a child would inherit the caller's descriptors of a hung mount, and
    hang closing them."""
    if not os.path.isdir(FUSECTL):
        return
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            # "id parent major:minor root mountpoint ...": the connection is the minor.
            if fields[4] in {os.path.normpath(p) for p in mountpoints}:
                try:
                    with open("%s/%s/abort" % (FUSECTL, fields[2].split(":")[1]), "w") as a:
                        a.write("1")
                except OSError:
                    pass


def thread_stacks(pid, limit=8000, timeout=60):
    """Every thread's stack of process @pid (its last @limit characters),
    from gdb if it is installed (for the message of a process that hangs),
    else ""."""
    gdb = shutil.which("gdb")
    if not gdb:
        return ""
    try:
        r = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        # ptrace waits for every thread to stop; one stuck in the kernel never does.
        return "\n(gdb could not stop every thread of %d in %d s)" % (pid, timeout)
    return "\nthreads of %d:\n%s" % (pid, r.stdout[-limit:])


def mount_pids(mnt):
    """PIDs of orchard-mount processes serving @mnt (from /proc)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"orchard-mount") and mnt.encode() in argv:
            pids.append(int(d))
    return pids


# Mount options that make the kernel keep names, absent names and
# attributes for a minute: what a test of invalidation needs to tell a
# dropped copy from one that timed out.
KERNEL_KEEPS_A_MINUTE = {"dcache_timeout_ms": 60000, "getattr_timeout_ms": 60000,
                         "negative_timeout_ms": 60000}


def kernel_asks(m):
    """LOOKUPs and GETATTRs mount m's kernel has sent it so far."""
    f = m.stats()["fuse"]
    return f["LOOKUP"] + f["GETATTR"]


def write_file(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def stat_errno(path):
    """0 if @path can be stat()ed, else the errno."""
    try:
        os.stat(path)
        return 0
    except OSError as e:
        return e.errno


NOBODY = 65534
_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def fallocate(fd, mode, off, length):
    """fallocate(2) with any @mode (os.posix_fallocate has none)."""
    if _libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def as_user(fn, uid=NOBODY, gid=NOBODY):
    """Runs fn() in a forked child as @uid/@gid (no supplementary groups);
    returns what it returned (JSON), or raises what it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            out = {"ok": fn()}
        except OSError as e:
            out = {"errno": e.errno, "what": str(e)}
        except BaseException as e:  # noqa: B902 - reported to the parent
            out = {"error": repr(e)}
        try:
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    out = json.loads(data.decode())
    if "errno" in out:
        raise OSError(out["errno"], out["what"])
    assert "error" not in out, out["error"]
    return out["ok"]


def err(fn, *args):
    """0, or the errno fn(*args) failed with."""
    try:
        fn(*args)
        return 0
    except OSError as e:
        return e.errno


def run_threads(n, fn):
    """Runs fn(k) on @n threads started together; re-raises the first
    failure.  The GIL is let go in every system call, so their FUSE requests
    overlap in the mount's worker threads."""
    start = threading.Barrier(n)
    errors = []

    def body(k):
        try:
            start.wait()
            fn(k)
        except BaseException as e:  # noqa: B902 (reported below)
            errors.append((k, e))

    ts = [threading.Thread(target=body, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        k, e = errors[0]
        raise AssertionError("thread %d: %r" % (k, e)) from e


def requests_delta(before, after, names=None):
    """Server requests between two server_requests() snapshots."""
    keys = names if names is not None else [k for k in after if k.startswith("CL2SV_")]
    return sum(after.get(k, 0) - before.get(k, 0) for k in keys)


def requests_by_type(before, after):
    """The server requests between two snapshots, by type, for messages."""
    return {k: after[k] - before.get(k, 0) for k in after
            if k.startswith("CL2SV_") and after[k] != before.get(k, 0)}


__all__ = ["Mount", "NOBODY", "as_user", "err", "fallocate", "mount_pids", "requests_by_type",
           "requests_delta",
           "ORCHARD_MOUNT", "run_threads", "stat_errno", "write_file"]
