"""A multi-host network for the fault tests: every server in its own network
namespace, the mounts and the CLI in the root namespace, and a link
emulator (tests/tools/linkemu.c) as the wire between them.

    with NetCluster(tmp_path / "c", nservers=3) as c:   # servers started
        m = Mount(c, tmp_path / "mnt").start()           # tests/lib/mount.py
        c.net.cut("s1")          # s1's link drops every packet, both ways
        c.net.heal("s1")
        c.net.shape("client", delay_ms=1, loss=0.01, seed=7)
        c.freeze("s2"); c.thaw("s2")                     # SIGSTOP / SIGCONT
        c.kill("s0"); c.start("s0")                      # a host crash and restart

Topology.  Host i (server s<i>) lives in namespace `orch<X>-s<i>` with
one interface, a TUN device whose other end linkemu holds, address
10.<X>.<i+1>.2/16 and every route through it; the root namespace gets
10.<X>.0.1/16 on its own TUN device (host "client").  linkemu reads each
packet a host sends and writes it into the device of the host its
destination names, after the packet has passed the sender's uplink and the
receiver's: so shaping "client" shapes every mount-server path, shaping
"s1" every path to and from s1, peers' included.  Servers listen only on
their namespace's address (the config's `address` lines are rewritten to
them); nothing of the harness listens anywhere else.

Why a packet-level emulator (TUN) and not a TCP relay, nor `ip link set
down` on veths: this kernel has no netem and no iptables, a TCP relay
terminates TCP (the client's connection to the relay never loses a packet,
so "loss" would only be a pause, a cut link would look like a frozen
server, and the retransmission backoff that made recovery slow would not
exist), and veths only cut.  linkemu drops, delays and holds real IP
packets, with losses drawn from a seeded generator per link and
direction, so a test's faults are repeatable (the packets themselves still
depend on timing).  Its queues hold at most 32 MiB per stage.

Link states (Net.set / the helpers):
    up      packets pass, after delay_ms (+ up to jitter_ms, in order) and
            loss (a probability per packet and direction)
    down    every packet is dropped, queued ones too (a cable pulled out)
    stall   packets are held and delivered when the link is up again

Cleanup.  Everything is removed on close() (the fixtures and `with` call
it in every outcome): mounts first (the caller's), then server processes by
PID (thawed first), linkemu (its devices go with it), the namespaces.  A
run that died without cleaning up leaves its namespaces behind; the next
Net that takes the same number X removes them (and the processes in them)
first.  X is held with a lock file in /run/orchard-netns, so concurrent runs
never share addresses or names.

Needs root, /dev/net/tun and `ip` (iproute2); `skip_unless_usable()`
skips a test otherwise.
"""
import fcntl
import os
import re
import signal
import subprocess
import time

from cluster import BUILDDIR, Cluster, run, wait_until

LINKEMU = os.path.join(BUILDDIR, "tests", "linkemu")
LOCK_DIR = "/run/orchard-netns"
FIRST_X, LAST_X = 160, 249   # 10.X.0.0/16 networks the harness may take


def usable():
    """None if the harness can run here, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun"
    if subprocess.run(["ip", "-V"], capture_output=True).returncode != 0:
        return "no ip(8) (iproute2)"
    if not os.path.exists(LINKEMU):
        return "no %s (make all)" % LINKEMU
    return None


def skip_unless_usable():
    import pytest
    why = usable()
    if why:
        pytest.skip(why)


def _ip(*args, check=True):
    return run(["ip"] + [str(a) for a in args], check=check, timeout=30)


def _netns_list():
    r = _ip("netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def _netns_pids(ns):
    r = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in r.stdout.split() if p.isdigit()]


class Net:
    """The namespaces, the devices and the link emulator.  Hosts are named;
    "client" is the root namespace."""

    def __init__(self, names):
        self.names = list(names)
        self.x = None
        self.emu = None
        self._lock = None
        self.ns = {}
        self.addr = {}
        self._route = False
        try:
            self._take_x()
            self._build()
        except BaseException:
            self.close()
            raise

    # --- setup --------------------------------------------------------------
    def _take_x(self):
        os.makedirs(LOCK_DIR, exist_ok=True)
        for x in range(FIRST_X, LAST_X + 1):
            f = open(os.path.join(LOCK_DIR, "%d.lock" % x), "w")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                continue
            self._lock, self.x = f, x
            self._remove_leftovers()
            return
        raise AssertionError("netns: every network 10.%d-%d.0.0/16 is taken" % (FIRST_X, LAST_X))

    def _prefix(self):
        return "orch%d-" % self.x

    def _remove_leftovers(self):
        """What a run that died with this X left behind: its namespaces and
        the processes in them (ours: only the harness makes these names)."""
        for ns in _netns_list():
            if ns.startswith(self._prefix()):
                for pid in _netns_pids(ns):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                _ip("netns", "del", ns, check=False)
        _ip("link", "del", "o%dc" % self.x, check=False)
        _ip("route", "del", "blackhole", "10.%d.0.0/16" % self.x, "metric", 4000, check=False)

    def _build(self):
        x = self.x
        self.addr["client"] = "10.%d.0.1" % x
        args = [LINKEMU, "client=o%dc=%s" % (x, self.addr["client"])]
        for i, name in enumerate(self.names):
            ns = self._prefix() + name
            _ip("netns", "add", ns)
            self.ns[name] = ns
            self.addr[name] = "10.%d.%d.2" % (x, i + 1)
            args.append("%s=o%d%s@%s=%s" % (name, x, name, ns, self.addr[name]))
        self.emu = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, bufsize=1)
        line = self.emu.stdout.readline()
        if line.strip() != "ready":
            raise AssertionError("linkemu did not start: %s%s" % (line, self.emu.stderr.read()))
        # Should linkemu die, its device and the route through it go: the
        # blackhole (a higher metric) keeps 10.X/16 from taking the default
        # route off this machine.
        _ip("route", "replace", "blackhole", "10.%d.0.0/16" % x, "metric", 4000)
        self._route = True
        _ip("addr", "add", self.addr["client"] + "/16", "dev", "o%dc" % x)
        _ip("link", "set", "o%dc" % x, "up")
        for name in self.names:
            ns, dev = self.ns[name], "o%d%s" % (x, name)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", self.addr[name] + "/16", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")

    # --- links --------------------------------------------------------------
    def command(self, line):
        """One linkemu command; returns its answer after "ok"."""
        self.emu.stdin.write(line + "\n")
        self.emu.stdin.flush()
        ans = self.emu.stdout.readline()
        assert ans.startswith("ok"), "linkemu: %s: %s" % (line, ans.strip())
        return ans[2:].strip()

    def set(self, host, dir="both", **kw):
        """Sets link parameters of @host: state (up, down, stall), delay_ms,
        jitter_ms, loss (0..1), seed; dir "in", "out" or "both"."""
        assert host == "client" or host in self.ns, host
        parts = ["set", host, "dir=" + dir]
        for k, v in kw.items():
            if k in ("delay_ms", "jitter_ms"):
                parts.append("%s_us=%d" % (k[:-3], round(v * 1000)))
            else:
                parts.append("%s=%s" % (k, v))
        self.command(" ".join(parts))

    def cut(self, host):
        """Every packet to and from @host is lost (and what was queued)."""
        self.set(host, state="down")

    def heal(self, host):
        self.set(host, state="up")

    def stall(self, host):
        """Packets to and from @host are held until heal()."""
        self.set(host, state="stall")

    def shape(self, host, delay_ms=0, jitter_ms=0, loss=0.0, seed=0):
        """One-way delay (each direction), jitter and loss on @host's link."""
        self.set(host, state="up", delay_ms=delay_ms, jitter_ms=jitter_ms, loss=loss,
                 seed=seed)

    def stats(self, host):
        """Packet counters of @host's link: out_pkts, out_lost, out_cut, ..."""
        return {k: int(v) for k, v in
                (kv.split("=") for kv in self.command("stats " + host).split())}

    # --- processes in a host's namespace ------------------------------------------
    def popen(self, host, args, **kw):
        """Starts @args in @host's network namespace (nsenter execs it: the
        PID is the program's).  Not `ip netns exec`: that also gives the
        program a mount namespace of its own, a copy of the host's mounts
        (/ is private here), and a FUSE mount of another test copied into it
        outlives that test's umount: its orchard-mount never sees the
        unmount and never exits while this server runs."""
        return subprocess.Popen(["nsenter", "--net=/run/netns/" + self.ns[host], "--"]
                                + list(args), **kw)

    # --- teardown -----------------------------------------------------------
    def close(self):
        if self.emu is not None:
            try:
                self.emu.stdin.close()
            except OSError:
                pass
            try:
                self.emu.wait(10)
            except subprocess.TimeoutExpired:
                self.emu.kill()
                self.emu.wait()
            self.emu = None
        for ns in list(self.ns.values()):
            for pid in _netns_pids(ns):   # none, unless the caller left one
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _ip("netns", "del", ns, check=False)
        self.ns = {}
        if self._route:
            _ip("route", "del", "blackhole", "10.%d.0.0/16" % self.x, "metric", 4000,
                check=False)
            self._route = False
        if self._lock is not None:
            self._lock.close()
            self._lock = None


class NetCluster(Cluster):
    """A Cluster (tests/lib/cluster.py) whose servers run each in its own
    namespace of a Net, listening on its private address; the config the
    mounts and the CLI use is the same file.  Adds freeze(), thaw() and
    the Net as .net.  Use as a context manager, or call close()."""

    def __init__(self, workdir, nservers=3, start=True, **kw):
        self.net = None
        self.frozen = set()
        super().__init__(workdir, nservers=nservers, **kw)
        try:
            self.net = Net(self.names)
            self._rewrite_addresses()
            if start:
                self.start_all()
        except BaseException:
            self.close(check_logs=False)
            raise

    def _rewrite_addresses(self):
        with open(self.conf) as f:
            text = f.read()
        out, section = [], None
        for line in text.splitlines(True):
            m = re.match(r"\s*\[server\s+(\S+)\]", line)
            if m:
                section = m.group(1)
            elif line.strip().startswith("["):
                section = None
            key = line.split("=", 1)[0].strip()
            if section in self.net.addr and key in ("address", "log_address"):
                # A replica group's members talk through the wire too.
                port = line.split("=", 1)[1].strip().rsplit(":", 1)[1]
                line = "%s = %s:%s\n" % (key, self.net.addr[section], port)
            out.append(line)
        with open(self.conf, "w") as f:
            f.write("".join(out))

    def _spawn(self, name, args, **kw):
        return self.net.popen(name, args, **kw)

    def start(self, name, *args, **kw):
        self.frozen.discard(name)
        super().start(name, *args, **kw)

    def freeze(self, name):
        """SIGSTOP: its connections stay open, nothing is answered."""
        os.kill(self.procs[name].pid, signal.SIGSTOP)
        self.frozen.add(name)

    def thaw(self, name):
        os.kill(self.procs[name].pid, signal.SIGCONT)
        self.frozen.discard(name)

    def stop(self, name, sig=signal.SIGTERM, timeout=20.0):
        if name in self.frozen and self.alive(name):
            self.thaw(name)
        super().stop(name, sig, timeout)

    def close(self, check_logs=True):
        """Stops every server, then removes the network.  Every step runs
        whatever the others did; the first failure is raised at the end."""
        failures = []
        try:
            if self.net is not None:
                for name in self.names:
                    self.net.heal(name)
                self.net.heal("client")
        except (AssertionError, OSError) as e:
            failures.append("heal: %s" % e)
        try:
            self.stop_all(check_logs=check_logs)
        except AssertionError as e:
            failures.append(str(e))
        for name, p in self.procs.items():   # whatever stop_all could not end
            if p.poll() is None:
                p.kill()
                p.wait()
        if self.net is not None:
            self.net.close()
            self.net = None
        assert not failures, "; ".join(failures)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close(check_logs=exc[0] is None)
        return False


def timed(fn, *args):
    """(seconds, result or the OSError raised) of fn(*args)."""
    t0 = time.monotonic()
    try:
        r = fn(*args)
    except OSError as e:
        r = e
    return time.monotonic() - t0, r


__all__ = ["Net", "NetCluster", "LINKEMU", "skip_unless_usable", "timed", "usable",
           "wait_until"]
