"""Local Orchard clusters for the integration tests.

A Cluster lays out a config with `orchard genconfig`, formats every server
with `orchard mkfs`, starts `orchardd` processes on 127.0.0.1 and tracks
them by PID, so a test can stop, kill (SIGKILL) and restart servers.  Every
process it starts is stopped in stop_all(), and the server logs are scanned
for sanitizer reports there.
"""
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import time

BUILDDIR = os.environ.get(
    "ORCH_BUILDDIR",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build"))
BIN = os.path.join(BUILDDIR, "bin")
ORCHARD = os.path.join(BIN, "orchard")
# Every server's namespace through a replicated log of its own (make test-py-log).
ON_LOG = os.environ.get("ORCH_TEST_LOG") == "1"
ORCHARDD = os.path.join(BIN, "orchardd")

BAD_LOG = re.compile(r"AddressSanitizer|LeakSanitizer|ThreadSanitizer|runtime error|assertion failed")


def run(args, check=True, input=None, timeout=120):
    """Runs a command; returns CompletedProcess with text stdout/stderr.
    A ThreadSanitizer report on its stderr fails the caller, checked or not
    (check-tsan; its exit code tells only a checked run)."""
    p = subprocess.run(args, input=input, capture_output=True, timeout=timeout,
                       text=isinstance(input, str) or input is None)
    err = p.stderr if isinstance(p.stderr, str) else p.stderr.decode(errors="replace")
    assert "ThreadSanitizer" not in err, "%s reports a race:\n%s" % (" ".join(args),
                                                                    err[-4000:])
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d): %s%s" % (" ".join(args), p.returncode,
                                                      p.stdout, p.stderr))
    return p


def wait_until(cond, timeout=15.0, interval=0.02, what="condition"):
    """Polls cond() until it is true; fails after timeout seconds, saying
    what it waited for: @what, or what() (a message that tells the state
    at the time out, not at the call)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + (what() if callable(what) else what))
        time.sleep(interval)


_ports_given = set()


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host="127.0.0.1"):
    """A TCP port free on @host now (for a listener the test configures).
    Picked below the kernel's ephemeral range, as genconfig does: a port
    the kernel handed out for a bind to port 0 is in that range, where any
    outgoing connection may take it before the server binds it (a server
    that then failed at start, "cannot load its log", in CI)."""
    low = _ephemeral_low()
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(10000 if low > 11000 else 1024, low)
        if port in _ports_given:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _ports_given.add(port)
        return port
    raise AssertionError("no free port below %d on %s" % (low, host))


# Blocks file of each test server: sparse, so its size costs nothing until
# written; small enough that a full store is reachable by a test that wants one.
TEST_STORE_SIZE = "1G"


def stat_layout(c, path):
    """Handle and layout of @path on cluster @c, from `orchard stat`."""
    out = c.cli("stat", path).stdout
    handle = int(re.search(r"Handle:\s+0x([0-9a-fA-F]+)", out).group(1), 16)
    m = re.search(r"strip_size=(\d+) stripe_count=(\d+) first_server=(\d+)", out)
    return {"handle": handle, "strip_size": int(m.group(1)),
            "stripe_count": int(m.group(2)), "first_server": int(m.group(3))}


def server_of(c, path):
    """The index of the server holding @path's inode, from `orchard stat`."""
    return int(re.search(r"Server:\s+(\d+)", c.cli("stat", path).stdout).group(1))


def dirs_on_two_servers(c, tries=12):
    """Two new directories whose inodes (and so whose new files' first
    strips) sit on different servers: files made in them get layouts that
    differ in their first server."""
    firsts = {}
    for i in range(tries):
        c.cli("mkdir", "/d%d" % i)
        firsts.setdefault(server_of(c, "/d%d" % i), "/d%d" % i)
    assert len(firsts) >= 2
    return list(firsts.values())[:2]


class Cluster:
    def __init__(self, workdir, nservers=3, strip_size=None, extra=None,
                 store_size=TEST_STORE_SIZE, ag_blocks=None, maxext=None, tmpfs=None,
                 replicas=1):
        """store_size, ag_blocks, maxext: the store geometry mkfs lays out
        ([cluster] store_size, store_ag_blocks, store_maxext); None leaves
        the setting out (the store's default).  tmpfs: {server name: size},
        a tmpfs of that size (e.g. "64m") mounted on the server's data
        directory before mkfs (root only); the caller must call
        unmount_tmpfs() after stop_all(), in every outcome.  replicas: servers
        per replica group (genconfig --replicas); @nservers counts them all."""
        self.dir = str(workdir)
        self.n = nservers
        self.replicas = replicas
        self.tmpfs = []
        try:
            self._init(nservers, strip_size, extra, store_size, ag_blocks, maxext,
                       tmpfs or {})
        except BaseException:
            self.unmount_tmpfs()
            raise

    def _init(self, nservers, strip_size, extra, store_size, ag_blocks, maxext, tmpfs):
        args = [ORCHARD, "genconfig", "--servers", str(nservers), "--dir", self.dir]
        if self.replicas > 1:
            args += ["--replicas", str(self.replicas)]
        if strip_size:
            args += ["--strip-size", str(strip_size)]
        run(args)
        self.conf = os.path.join(self.dir, "orchard.conf")
        for key, value in (("store_size", store_size), ("store_ag_blocks", ag_blocks),
                           ("store_maxext", maxext)):
            if value is not None:
                self.set_cluster_option(key, value)
        if extra:
            with open(self.conf, "a") as f:
                f.write(extra)
        self.names = ["s%d" % i for i in range(nservers)]
        if ON_LOG and self.replicas == 1:
            # Each server's namespace through a replicated log of its own
            # (a group of one: docs/DESIGN.md, "The server on the group").
            for name in self.names:
                self.set_server_option(name, "log_address", "127.0.0.1:%d" % free_port())
        self.procs = {}
        for name, size in sorted(tmpfs.items()):
            # genconfig's data_dir for each server is DIR/NAME
            path = os.path.join(self.dir, name)
            os.makedirs(path, exist_ok=True)
            run(["mount", "-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", path])
            self.tmpfs.append(path)
        for name in self.names:
            run([ORCHARD, "mkfs", "-c", self.conf, "-n", name])

    def unmount_tmpfs(self):
        """Unmounts the tmpfs data directories (servers stopped first)."""
        failures = []
        while self.tmpfs:
            path = self.tmpfs.pop()
            r = run(["umount", path], check=False)
            if r.returncode != 0:
                r = run(["umount", "-l", path], check=False)
                failures.append("umount %s: %s" % (path, r.stderr.strip()))
        assert not failures, "; ".join(failures)

    # --- processes ------------------------------------------------------
    def log_path(self, name):
        return os.path.join(self.dir, name + ".log")

    def start(self, name, wait=True, env=None, conf=None, nofile=None):
        """Starts server NAME; env adds variables (e.g. ORCH_PCUT=1); conf
        another config file for it (one with another key, say); nofile its
        RLIMIT_NOFILE (soft and hard), as `ulimit -n` would set it."""
        assert name not in self.procs or self.procs[name].poll() is not None
        log = open(self.log_path(name), "ab")
        penv = dict(os.environ)
        penv.update(env or {})

        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.procs[name] = self._spawn(
            name, [ORCHARDD, "-c", conf or self.conf, "-n", name], stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=True, env=penv,
            preexec_fn=limit if nofile else None)
        log.close()
        if wait:
            self._up_or_stopped([name])

    def _spawn(self, name, args, **kw):
        """Server NAME's process (netns.NetCluster runs it in its host's namespace)."""
        return subprocess.Popen(args, **kw)

    def start_all(self):
        """Starts every server.  At the first start of a new cluster, a port
        of the config that another process took between genconfig and now
        (a test beside this one, whose genconfig picked it too) is picked
        again, the servers made anew (a group's log keeps the addresses it
        started with) and started again."""
        fresh = not self.procs
        for attempt in range(3):
            for name in self.names:
                self.start(name, wait=False)
            try:
                self._up_or_stopped(self.names)
                return
            except AssertionError as e:
                busy = re.findall(r"cannot listen (?:on|at) 127\.0\.0\.1:(\d+)[:,]? .*?"
                                  r"(?:Address already in use|in use)", str(e))
                if attempt == 2 or not busy or not fresh:
                    raise
                for port in set(busy):
                    self._move_port(int(port))
                for name in self.names:
                    self._remake(name)

    def _remake(self, name):
        """Empties server @name's data directory and runs mkfs again."""
        path = os.path.join(self.dir, name)
        for entry in os.listdir(path):
            p = os.path.join(path, entry)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)
        run([ORCHARD, "mkfs", "-c", self.conf, "-n", name])

    def _move_port(self, port):
        """Gives another free port to whatever the config has at @port."""
        with open(self.conf) as f:
            text = f.read()
        new = "127.0.0.1:%d" % free_port()
        text, n = re.subn(r"127\.0\.0\.1:%d(?!\d)" % port, new, text)
        assert n, "port %d is not in %s" % (port, self.conf)
        with open(self.conf, "w") as f:
            f.write(text)

    def _up_or_stopped(self, names):
        """Waits for @names to answer; should one not, stops them all before
        failing, so that a test that started them outside its try leaves
        no server behind."""
        try:
            for name in names:
                self.wait_up(name)
        except BaseException:
            for name in names:
                try:
                    self.stop(name)
                except AssertionError:
                    pass        # killed by stop()
            raise

    def wait_up(self, name, timeout=20.0):
        idx = self.names.index(name)

        def up():
            p = self.procs[name]
            if p.poll() is not None:
                raise AssertionError("%s exited (%d): %s" % (name, p.returncode,
                                                             self.log_tail(name)))
            r = run([ORCHARD, "-c", self.conf, "ping"], check=False, timeout=30)
            for line in r.stdout.splitlines():
                f = line.split()
                if f and f[0] == name and "up" in f:
                    return True
            return False
        wait_until(up, timeout, 0.05, "server %s (#%d) to answer" % (name, idx))

    def stop(self, name, sig=signal.SIGTERM, timeout=20.0):
        p = self.procs.get(name)
        if p is None or p.poll() is not None:
            return
        p.send_signal(sig)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise AssertionError("%s did not stop on %s" % (name, sig))

    def kill(self, name):
        self.stop(name, signal.SIGKILL)

    # --- power cuts (common/pcut.h) --------------------------------------------
    def pcut_done(self, name):
        return os.path.join(self.dir, name + ".pcut-done")

    def start_pcut(self, name, wait=True, point=None):
        """Starts server NAME under the power-cut simulation: a SIGUSR2, or
        reaching crash point @point (ORCH_PCUT_POINT), puts back everything
        it had not synced and kills it."""
        done = self.pcut_done(name)
        if os.path.exists(done):
            os.unlink(done)
        env = {"ORCH_PCUT": "1", "ORCH_PCUT_DONE": done}
        if point:
            env["ORCH_PCUT_POINT"] = point
        self.start(name, wait=wait, env=env)

    def wait_power_cut(self, name, timeout=30):
        """Waits for server NAME (started by start_pcut) to have been cut
        and its unsynced writes put back."""
        p = self.procs[name]
        wait_until(lambda: p.poll() is not None, timeout, what=name + " to be cut")
        wait_until(lambda: os.path.exists(self.pcut_done(name)), timeout,
                   what=name + "'s revert")
        assert p.returncode == 137, self.log_tail(name)

    def power_cut(self, name):
        """Cuts the power of server NAME (started by start_pcut) now."""
        self.procs[name].send_signal(signal.SIGUSR2)
        self.wait_power_cut(name)

    def stop_all(self, check_logs=True):
        # Every server is stopped (killed if it hangs) before a failure is
        # reported: a test never leaves a process behind.
        failures = []
        for name in self.names:
            try:
                self.stop(name)
            except AssertionError as e:
                failures.append(str(e))
        if failures:
            raise AssertionError("; ".join(failures))
        if check_logs:
            self.check_logs()

    def log_tail(self, name, n=20):
        try:
            with open(self.log_path(name), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def check_logs(self):
        for name in self.names:
            try:
                with open(self.log_path(name), errors="replace") as f:
                    text = f.read()
            except OSError:
                continue
            m = BAD_LOG.search(text)
            assert not m, "%s log reports a defect:\n%s" % (name, text[-4000:])

    # --- the CLI ------------------------------------------------------------
    def cli(self, *args, check=True, input=None, timeout=120):
        return run([ORCHARD, "-c", self.conf] + [str(a) for a in args], check=check,
                   input=input, timeout=timeout)

    def stats(self):
        return json.loads(self.cli("stats", "--json").stdout)

    def requests(self, name=None):
        """Request counts by type, per server or summed."""
        total = {}
        for s in self.stats()["servers"]:
            if name and s["name"] != name:
                continue
            for k, v in s.get("requests", {}).items():
                total[k] = total.get(k, 0) + v
        return total

    # --- helpers added for the data, restart, abuse and CLI tests -----------
    def pid(self, name):
        """PID of server @name's running orchardd, or None."""
        p = self.procs.get(name)
        return p.pid if p is not None and p.poll() is None else None

    def alive(self, name):
        p = self.procs.get(name)
        return p is not None and p.poll() is None

    def address(self, name):
        """(host, port) of server @name, from the config file."""
        section = None
        with open(self.conf) as f:
            for line in f:
                line = line.split(";", 1)[0].strip()
                m = re.match(r"\[server\s+(\S+)\]$", line)
                if m:
                    section = m.group(1)
                    continue
                if line.startswith("["):
                    section = None
                    continue
                if section == name and line.startswith("address"):
                    host, port = line.split("=", 1)[1].strip().rsplit(":", 1)
                    return host, int(port)
        raise KeyError(name)

    def set_cluster_option(self, key, value):
        """Adds or replaces `key = value` in the [cluster] section of the config."""
        self._set_option("[cluster]", key, value)

    def set_server_option(self, name, key, value):
        """Adds or replaces `key = value` in the [server NAME] section of the config."""
        self._set_option("[server %s]" % name, key, value)

    def _set_option(self, header, key, value):
        with open(self.conf) as f:
            lines = f.read().splitlines(True)
        out, inside, done = [], False, False
        for line in lines:
            s = line.strip()
            if s.startswith("["):
                inside = s == header
                out.append(line)
                if inside and not done:
                    out.append("%s = %s\n" % (key, value))
                    done = True
                continue
            if inside and re.match(r"%s\s*=" % re.escape(key), s):
                continue
            out.append(line)
        assert done, "no %s section in %s" % (header, self.conf)
        with open(self.conf, "w") as f:
            f.write("".join(out))

    def conf_with_other_key(self, where):
        """A copy of the config in directory @where with a new random key
        file (as genconfig makes one: hex, mode 0600) and data_dir made
        absolute: a client of the same servers that holds the wrong key."""
        os.makedirs(str(where), exist_ok=True)
        keyf = os.path.join(str(where), "other.key")
        with open(keyf, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        os.chmod(keyf, 0o600)
        lines = []
        with open(self.conf) as f:
            for ln in f.read().splitlines():
                if ln.strip().startswith("key_file"):
                    ln = "key_file = %s" % keyf
                elif ln.strip().startswith("data_dir"):
                    ln = "data_dir = %s" % os.path.join(self.dir, ln.split("=", 1)[1].strip())
                lines.append(ln)
        conf = os.path.join(str(where), "other.conf")
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        return conf

    def log_text(self, name):
        try:
            with open(self.log_path(name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def check_integrity(self):
        """PRAGMA integrity_check of every server's meta.db and store.db
        (the servers stopped)."""
        for name in self.names:
            for db in ("meta.db", "store.db"):
                con = sqlite3.connect(os.path.join(self.dir, name, db))
                try:
                    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok", \
                        "%s of %s" % (db, name)
                finally:
                    con.close()

    def intents(self, name):
        """Intents server NAME still has in meta.db (read while it runs)."""
        con = sqlite3.connect(os.path.join(self.dir, name, "meta.db"))
        try:
            return con.execute("SELECT COUNT(*) FROM intent").fetchone()[0]
        finally:
            con.close()

    def store_check(self, name):
        """`store-check --data` of server NAME's store (the server stopped)."""
        r = run([os.path.join(BUILDDIR, "tests", "store-check"), "--data",
                 os.path.join(self.dir, name)], check=False, timeout=300)
        assert r.returncode == 0, "store-check %s: %s%s" % (name, r.stdout, r.stderr)

    def store_objects(self, name):
        """Server NAME's store (the server stopped), checked as store_check
        does: {handle: (size, crc32c of its bytes)} for every object that
        holds bytes, to compare a replica group's members."""
        r = run([os.path.join(BUILDDIR, "tests", "store-check"), "--data", "--objects",
                 os.path.join(self.dir, name)], check=False, timeout=300)
        assert r.returncode == 0, "store-check %s: %s%s" % (name, r.stdout[-4000:], r.stderr)
        out = {}
        for line in r.stdout.splitlines():
            _, handle, size, crc = line.split()
            out[int(handle, 16)] = (int(size), crc)
        return out

    def store_check_all(self):
        for name in self.names:
            self.store_check(name)

    def server_stats(self):
        """Stats by server name (only servers that are up)."""
        return {s["name"]: s for s in self.stats()["servers"] if s.get("up")}
