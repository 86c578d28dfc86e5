"""A deadline for every test, so that a hang fails one test with the
stacks that explain it instead of eating the whole CI run.

When a test runs past its deadline, the watchdog thread prints every
thread's stack of each orchard process the test started (its children,
found in /proc), then SIGKILLs them.  Killing a mount's process aborts its
FUSE connection, so the test's calls blocked in that mount return ENOTCONN
and the test goes on to fail and clean up; killing the servers ends any
wait on them.
"""
import faulthandler
import os
import signal
import sys
import threading

from mount import thread_stacks

# ORCH_TEST_DEADLINE=0 turns the watchdog off (a debugger, a long soak).
DEFAULT_S = float(os.environ.get("ORCH_TEST_DEADLINE", "900"))


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
            out.append("--- %d: %s" % (pid, " ".join(argv)))
            try:
                out.append(thread_stacks(pid, limit=60000))
            except Exception as e:  # a stuck gdb must not keep the test hanging
                out.append("(no stacks: %s)" % e)
        sys.stderr.write("\n".join(out) + "\n--- the test's own threads:\n")
        sys.stderr.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        for pid, _ in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def cancel(self):
        if self._timer:
            self._timer.cancel()

    def fired(self):
        return self._fired.is_set()
