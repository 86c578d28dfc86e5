"""A deadline for every test, so that a hang fails one test with the
stacks that explain it instead of eating the whole CI run.

When a test runs past its deadline, the watchdog thread prints, for each
orchard process the test started (its children, found in /proc), every
thread's state and kernel stack and then its user stacks (gdb), and the
kernel stacks of the test's own threads; then it SIGKILLs those processes
and aborts their mounts' FUSE connections (fusectl).  The test's calls
blocked in a mount then return ENOTCONN and the test goes on to fail and
clean up.  SIGKILL alone is not enough: a mount thread stuck in the
kernel (on a page lock that waits for a FUSE reply, say) never dies, and
neither do the calls that wait for it.

gdb runs in a process started when this module is imported, before any
test opened a file in a mount: a child forked later would inherit the
test's descriptors of a hung mount, and closing them (as exec does) sends
a FLUSH that waits forever.
"""
import faulthandler
import os
import signal
import subprocess
import sys
import threading

from mount import abort_fuse, mount_fusectl

# The stack dumper: reads PIDs, one per line, and answers each with gdb's
# stacks (tests/lib/mount.py, thread_stacks), then a line "\0".
_DUMPER = r"""
import sys
sys.path.insert(0, %r)
from mount import thread_stacks
for line in sys.stdin:
    try:
        out = thread_stacks(int(line), limit=60000, timeout=30)
    except Exception as e:
        out = "(no stacks: %%s)" %% e
    sys.stdout.write(out.replace("\0", "") + "\n\0\n")
    sys.stdout.flush()
""" % os.path.dirname(os.path.abspath(__file__))
_dumper = None


def _gdb_stacks(pid):
    global _dumper
    if _dumper is None or _dumper.poll() is not None:
        return "(no stack dumper)"
    _dumper.stdin.write("%d\n" % pid)
    _dumper.stdin.flush()
    out = []
    for line in _dumper.stdout:
        if line == "\0\n":
            break
        out.append(line)
    return "".join(out)


def start_dumper():
    """Starts the stack dumper, and mounts fusectl for abort_fuse (once per
    process, before any test)."""
    global _dumper
    mount_fusectl()
    if _dumper is None:
        _dumper = subprocess.Popen([sys.executable, "-c", _DUMPER], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)

# ORCH_TEST_DEADLINE=0 turns the watchdog off (a debugger, a long soak).
DEFAULT_S = float(os.environ.get("ORCH_TEST_DEADLINE", "900"))


def kernel_threads(pid):
    """Each thread of @pid: name, state and kernel wait channel, and the
    kernel stacks, each distinct one once with how many threads share it."""
    lines, stacks = [], {}
    try:
        tids = sorted(os.listdir("/proc/%d/task" % pid), key=int)
    except OSError:
        return "(gone)"
    for tid in tids:
        t = "/proc/%d/task/%s/" % (pid, tid)
        try:
            with open(t + "comm") as f:
                comm = f.read().strip()
            with open(t + "stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(t + "wchan") as f:
                wchan = f.read().strip()
            with open(t + "stack") as f:
                stack = f.read()
        except OSError:
            continue
        lines.append("  %s %s %s %s" % (tid, comm, state, wchan))
        stacks.setdefault(stack, []).append(tid)
    for stack, who in stacks.items():
        if stack.strip():
            lines.append("  kernel stack of %d thread(s) %s:\n%s" % (len(who), ",".join(who[:8]),
                                                                  stack.rstrip()))
    return "\n".join(lines)


def orchard_children(ppid):
    """(pid, argv) of the orchard processes whose parent is @ppid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        # stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == ppid and argv and os.path.basename(argv[0]).startswith("orchard"):
            out.append((int(d), argv))
    return out


class Deadline:
    """Arms a timer of @seconds for the current test; fired() says whether
    it went off (then the test must fail)."""

    def __init__(self, seconds, name):
        self.name = name
        self.seconds = seconds
        self._fired = threading.Event()
        self._timer = None
        if seconds > 0:
            self._timer = threading.Timer(seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self):
        self._fired.set()
        procs = orchard_children(os.getpid())
        out = ["\n%s: still running after its deadline of %.0f s; the stacks of its %d "
               "orchard processes follow, then they are killed\n"
               % (self.name, self.seconds, len(procs))]
        for pid, argv in procs:
            out.append("--- %d: %s\n%s" % (pid, " ".join(argv), kernel_threads(pid)))
        out.append("--- the test's own threads, in the kernel:\n%s" % kernel_threads(os.getpid()))
        sys.stderr.write("\n".join(out) + "\n")
        sys.stderr.flush()
        for pid, argv in procs:
            try:
                # gdb waits forever for a thread stuck in the kernel: at most 30 s.
                sys.stderr.write("--- %d in gdb:%s\n" % (pid, _gdb_stacks(pid)))
            except Exception as e:
                sys.stderr.write("--- %d: no stacks from gdb: %s\n" % (pid, e))
        sys.stderr.write("--- the test's own threads:\n")
        sys.stderr.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        for pid, _ in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        abort_fuse({a for _, argv in procs for a in argv})

    def cancel(self):
        if self._timer:
            self._timer.cancel()

    def fired(self):
        return self._fired.is_set()
