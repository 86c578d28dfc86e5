"""The `orchard` command line and `orchardd` start-up, as README.md describes
them: genconfig, mkfs, the server's refusals, clean stop, `local up/down`,
help and usage errors, error messages, ping and stats.
"""
import fcntl
import json
import os
import re
import selectors
import signal
import sqlite3
import stat
import struct
import subprocess
import sys
import termios
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import wire  # noqa: E402
from cluster import ORCHARD, ORCHARDD, Cluster, wait_until  # noqa: E402

NOENT = re.compile(r"^orchard: cannot [a-z ]+ '(/[^']*)'( to '[^']*')?: "
                   r"No such file or directory\n$")


def orchard(*args, env=None, conf=None, input=None, timeout=60):
    cmd = [ORCHARD] + (["-c", str(conf)] if conf else []) + [str(a) for a in args]
    e = dict(os.environ)
    e.pop("ORCHARD_CONF", None)
    if env:
        e.update(env)
    return subprocess.run(cmd, capture_output=True, text=True, env=e, input=input,
                          timeout=timeout)


def sha(path):
    with open(path, "rb") as f:
        return f.read()


def run_orchardd(conf, name, timeout=15):
    """Runs orchardd that is expected to refuse to start; returns (rc, stderr).
    If it starts serving instead, it is stopped (by PID) and rc is None."""
    p = subprocess.Popen([ORCHARDD, "-c", str(conf), "-n", name], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, err
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        return None, err


def pid_gone(pid):
    """True once @pid has exited (a zombie waiting for its reaper counts)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# --- genconfig ------------------------------------------------------------------

def test_genconfig_writes_conf_and_private_key(tmp_path):
    d = tmp_path / "cfg"
    r = orchard("genconfig", "--servers", 3, "--dir", d, "--name", "alpha")
    assert r.returncode == 0, r.stderr
    conf, key = d / "orchard.conf", d / "orchard.key"
    assert r.stdout.strip() == str(conf)
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert re.fullmatch(r"[0-9a-f]{64}\n", open(key).read())
    text = open(conf).read()
    assert re.search(r"^\[cluster\]$", text, re.M)
    assert re.search(r"^name = alpha$", text, re.M)
    assert re.search(r"^id = [0-9a-f]+$", text, re.M)
    ports = re.findall(r"^address = 127\.0\.0\.1:(\d+)$", text, re.M)
    assert len(ports) == 3 and len(set(ports)) == 3
    assert re.findall(r"^\[server (\S+)\]$", text, re.M) == ["s0", "s1", "s2"]

    # Never overwrites either file.
    before = (sha(conf), sha(key))
    r = orchard("genconfig", "--servers", 2, "--dir", d)
    assert r.returncode == 1
    assert "refusing to overwrite" in r.stderr and str(conf) in r.stderr, r.stderr
    assert (sha(conf), sha(key)) == before
    os.unlink(conf)
    r = orchard("genconfig", "--servers", 2, "--dir", d)
    assert r.returncode == 1
    assert "orchard.key" in r.stderr and "File exists" in r.stderr, r.stderr
    assert sha(key) == before[1]
    assert not conf.exists()

    # Two configs never share an id or a key.
    r2 = orchard("genconfig", "--servers", 1, "--dir", tmp_path / "other", "--base-port",
                 47000)
    assert r2.returncode == 0, r2.stderr
    other = open(tmp_path / "other" / "orchard.conf").read()
    assert "address = 127.0.0.1:47000" in other
    assert re.search(r"^id = (\S+)", other, re.M).group(1) != \
        re.search(r"^id = (\S+)", text, re.M).group(1)
    assert sha(tmp_path / "other" / "orchard.key") != before[1]


@pytest.mark.parametrize("args", [["--servers", "0", "--dir", "x"], ["--servers", "2"],
                                  ["--dir", "x"], ["--servers", "2", "--dir", "x",
                                                   "--strip-size", "1000"],
                                  ["--servers", "2", "--dir", "x", "extra"]])
def test_genconfig_usage_errors(tmp_path, args):
    r = orchard("genconfig", *[str(tmp_path / a) if a == "x" else a for a in args])
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert "orchard genconfig --help" in r.stderr
    assert not (tmp_path / "x" / "orchard.conf").exists()


# --- mkfs -------------------------------------------------------------------------

def test_mkfs_refuses_non_empty_dir_without_force(tmp_path):
    c = Cluster(tmp_path / "c", nservers=1)  # genconfig + mkfs s0
    try:
        r = orchard("mkfs", "-n", "s0", conf=c.conf)
        assert r.returncode == 1
        assert "not empty" in r.stderr and "--force" in r.stderr, r.stderr
        # A data directory with someone else's file is refused as well.
        stray_dir = os.path.join(c.dir, "s0")
        c.start_all()
        c.cli("put", "-", "/keepme", input="hello")
        c.stop_all()
        with open(os.path.join(stray_dir, "NOTES"), "w") as f:
            f.write("operator's file\n")
        r = orchard("mkfs", "-n", "s0", conf=c.conf)
        assert r.returncode == 1 and "not empty" in r.stderr
        # --force wipes what mkfs made (the file is gone) and nothing else.
        r = orchard("mkfs", "-n", "s0", "--force", conf=c.conf)
        assert r.returncode == 0, r.stderr
        assert "initialised server 's0'" in r.stderr
        assert open(os.path.join(stray_dir, "NOTES")).read() == "operator's file\n"
        c.start_all()
        assert c.cli("ls", "/").stdout == ""
        assert c.cli("stat", "/keepme", check=False).returncode == 1
        # Unknown server name.
        r = orchard("mkfs", "-n", "nosuch", conf=c.conf)
        assert r.returncode == 1 and "no server 'nosuch'" in r.stderr
    finally:
        c.stop_all()


def test_mkfs_force_refused_while_server_runs(tmp_path):
    """Regression test: mkfs --force used to wipe a running server's
    directory before taking the store lock (fixed in 0fbaa7b)."""
    c = Cluster(tmp_path / "c", nservers=1)
    try:
        c.start_all()
        c.cli("put", "-", "/data", input="precious")
        r = orchard("mkfs", "-n", "s0", "--force", conf=c.conf)
        assert r.returncode == 1, r.stderr
        assert "in use" in r.stderr or "running" in r.stderr, r.stderr
        assert c.alive("s0")
        assert c.cli("cat", "/data").stdout == "precious"
    finally:
        c.stop_all()


GEOM = re.compile(r"^orchard: store of server '(\S+)': .* format \d+: (\d+) blocks of "
                  r"4096 bytes, (\d+) allocation groups? of (\d+) blocks, extents of at "
                  r"most (\d+) blocks$", re.M)


def geometry(stderr, name="s0"):
    """(blocks, ag_count, ag_blocks, maxext) that mkfs printed for @name."""
    for m in GEOM.finditer(stderr):
        if m.group(1) == name:
            return tuple(int(g) for g in m.groups()[1:])
    raise AssertionError("no geometry for %s in: %s" % (name, stderr))


def test_mkfs_store_geometry_from_config_and_options(tmp_path):
    c = Cluster(tmp_path / "c", nservers=1, store_size="64M", ag_blocks=1024, maxext=256)
    try:
        # The geometry of the config: 64M = 16384 blocks in 16 AGs of 1024.
        r = orchard("mkfs", "-n", "s0", "--force", conf=c.conf)
        assert r.returncode == 0, r.stderr
        blocks, agc, agb, maxext = geometry(r.stderr)
        assert (agc, agb, maxext) == (16, 1024, 256), r.stderr
        assert 16384 - 16 <= blocks <= 16384
        # Options override it for this mkfs; 0 is the store's default.
        r = orchard("mkfs", "-n", "s0", "--force", "--store-size", "8MiB", "--ag-blocks",
                    "512", "--maxext", "128", conf=c.conf)
        assert r.returncode == 0, r.stderr
        blocks, agc, agb, maxext = geometry(r.stderr)
        assert (agc, agb, maxext) == (4, 512, 128), r.stderr
        assert 2048 - 4 <= blocks <= 2048, r.stderr
        # The store works with it.
        c.start_all()
        c.cli("put", "-", "/f", input="z" * 300000)
        assert c.cli("cat", "/f").stdout == "z" * 300000
    finally:
        c.stop_all()


@pytest.mark.parametrize("opts,want", [
    (["--store-size", "12Q"], "--store-size: want a byte count"),
    (["--store-size", "100K"], "bad --store-size"),
    (["--ag-blocks", "1000"], "bad --ag-blocks 1000: want 0 (default 1048576) or a power of two"),
    (["--ag-blocks", "32"], "bad --ag-blocks 32"),
    (["--ag-blocks", "64", "--maxext", "65"], "bad --maxext 65"),
    (["--maxext", "x"], "--maxext: want a number of blocks"),
])
def test_mkfs_geometry_option_errors(tmp_path, opts, want):
    c = Cluster(tmp_path / "c", nservers=1)
    r = orchard("mkfs", "-n", "s0", "--force", *opts, conf=c.conf)
    assert r.returncode == 2, r.stderr
    assert want in r.stderr, r.stderr


@pytest.mark.parametrize("line,want", [
    ("store_size = 1X", "bad value for 'store_size' in [cluster]: want a byte count"),
    ("store_size = 4097", "bad store_size 4097 in [cluster]: want 0 (default 64G) or at "
     "least 256K"),
    ("store_ag_blocks = 100", "bad store_ag_blocks 100 in [cluster]"),
    ("store_ag_blocks = -1", "bad value for 'store_ag_blocks' in [cluster]"),
    ("store_maxext = 5000", "bad store_maxext 5000 in [cluster]: want 0 (default 4096) "
     "or 1 to 4096"),
])
def test_config_store_geometry_errors(tmp_path, line, want):
    """A bad store setting is refused by every reader of the config, naming it."""
    c = Cluster(tmp_path / "c", nservers=1, store_size=None)
    key, value = [x.strip() for x in line.split("=")]
    c.set_cluster_option(key, value)
    if key == "store_maxext":
        c.set_cluster_option("store_ag_blocks", "4096")
    r = orchard("mkfs", "-n", "s0", "--force", conf=c.conf)
    assert r.returncode == 1, r.stderr
    assert want in r.stderr, r.stderr
    rc, err = run_orchardd(c.conf, "s0")
    assert rc not in (None, 0) and want in err, err


def test_mkfs_store_device(tmp_path):
    """[server NAME] store_device puts the blocks elsewhere (a file here)."""
    c = Cluster(tmp_path / "c", nservers=1, store_size="16M")
    dev = tmp_path / "dev0"
    with open(c.conf, "a") as f:
        f.write("store_device = %s\n" % dev)  # the last section is [server s0]
    try:
        r = orchard("mkfs", "-n", "s0", "--force", conf=c.conf)
        assert r.returncode == 0, r.stderr
        assert str(dev) in r.stderr, r.stderr
        assert dev.stat().st_size == 16 << 20
        c.start_all()
        c.cli("put", "-", "/f", input="on the device")
        assert c.cli("cat", "/f").stdout == "on the device"
    finally:
        c.stop_all()


# --- orchardd refusals and clean stop ---------------------------------------------

def _conf_with(c, path, replace):
    """A copy of c's config with lines rewritten; relative paths made absolute."""
    out = []
    for ln in open(c.conf).read().splitlines():
        k = ln.split("=", 1)[0].strip()
        if k in ("key_file", "data_dir"):
            ln = "%s = %s" % (k, os.path.join(c.dir, ln.split("=", 1)[1].strip()))
        out.append(replace(ln))
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return path


def test_orchardd_refuses_data_dir_of_another_cluster(tmp_path):
    c = Cluster(tmp_path / "c", nservers=2)
    other = Cluster(tmp_path / "other", nservers=2)
    try:
        my_id = re.search(r"^id = (\S+)", open(c.conf).read(), re.M).group(1)
        other_id = re.search(r"^id = (\S+)", open(other.conf).read(), re.M).group(1)
        # Same servers and directories, another cluster's id.
        conf = _conf_with(c, tmp_path / "foreign.conf",
                          lambda ln: "id = " + other_id if ln.startswith("id =") else ln)
        rc, err = run_orchardd(conf, "s0")
        assert rc is not None, "orchardd served a data dir of another cluster"
        assert rc != 0
        assert "belongs to cluster %s, not %s" % (my_id, other_id) in err, err
        # Server s1 pointed at s0's directory.
        s0dir = os.path.join(c.dir, "s0")
        conf = _conf_with(c, tmp_path / "swapped.conf",
                          lambda ln: "data_dir = " + s0dir
                          if ln.startswith("data_dir") and ln.endswith("/s1") else ln)
        rc, err = run_orchardd(conf, "s1")
        assert rc not in (None, 0)
        assert "belongs to server 0, not 1" in err, err
        # A directory never initialised.
        conf = _conf_with(c, tmp_path / "fresh.conf",
                          lambda ln: "data_dir = " + str(tmp_path / "empty")
                          if ln.startswith("data_dir") and ln.endswith("/s0") else ln)
        rc, err = run_orchardd(conf, "s0")
        assert rc not in (None, 0)
        assert "not initialised (run: orchard mkfs)" in err, err
        # The right config still works afterwards: nothing was changed.
        c.start_all()
        c.cli("ping")
    finally:
        c.stop_all()
        other.stop_all()


def test_orchardd_refuses_other_format_version(tmp_path):
    c = Cluster(tmp_path / "c", nservers=1)
    db = os.path.join(c.dir, "s0", "meta.db")
    with sqlite3.connect(db) as con:
        con.execute("UPDATE super SET value = 99 WHERE key = 'format_version'")
    con.close()
    rc, err = run_orchardd(c.conf, "s0")
    assert rc is not None, "orchardd served a format it does not know"
    assert rc != 0
    assert "format version 99, this build reads 1" in err, err
    # And a file that is not an orchard namespace at all.
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA application_id = 12345")
    con.close()
    rc, err = run_orchardd(c.conf, "s0")
    assert rc not in (None, 0)
    assert "not an orchard namespace" in err, err


def test_orchardd_usage_errors(tmp_path):
    p = subprocess.run([ORCHARDD], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and "usage: orchardd" in p.stderr
    p = subprocess.run([ORCHARDD, "--help"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and "usage: orchardd" in p.stdout
    c = Cluster(tmp_path / "c", nservers=1)
    rc, err = run_orchardd(c.conf, "nosuch")
    assert rc == 1 and "no server 'nosuch'" in err, err
    rc, err = run_orchardd(tmp_path / "missing.conf", "s0")
    assert rc == 1 and "cannot load config" in err, err


def test_orchardd_stops_cleanly_on_sigterm(cluster1, tmp_path):
    c = cluster1
    c.cli("put", "-", "/f", input="x" * 100000)
    # With an idle authenticated client connected, and one half-way in a frame.
    idle = wire.Peer(c.address("s0"))
    assert idle.handshake(wire.read_key(c.dir)) == 0
    half = wire.Peer(c.address("s0"))
    half.send(wire.frame(wire.HELLO, b"\x01")[:10])
    try:
        t0 = time.monotonic()
        c.stop("s0")
        assert time.monotonic() - t0 < 10
        assert c.procs["s0"].returncode == 0
        log = c.log_text("s0")
        assert "stopping: signal=15" in log
        assert log.rstrip().endswith("stopped cleanly"), log[-500:]
        assert idle.closed_by_peer()
    finally:
        idle.close()
        half.close()
    c.start("s0")
    assert c.cli("cat", "/f").stdout == "x" * 100000
    # SIGINT is a clean stop too.
    c.stop("s0", sig=signal.SIGINT)
    assert c.procs["s0"].returncode == 0
    assert c.log_text("s0").rstrip().endswith("stopped cleanly")


def test_orchardd_stops_cleanly_with_writes_queued(cluster1, tmp_path):
    """SIGTERM while clients keep writing: the writes queued to the store
    finish before it closes, and the server stops cleanly."""
    c = cluster1
    src = tmp_path / "big"
    src.write_bytes(os.urandom(8 << 20))
    puts = [subprocess.Popen([ORCHARD, "-c", c.conf, "put", str(src), "/p%d" % i],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for i in range(4)]
    try:
        wait_until(lambda: c.server_stats()["s0"]["store"]["ops"] >= 8, timeout=20,
                   what="writes to reach the store")
        c.stop("s0")
        assert c.procs["s0"].returncode == 0
        assert c.log_text("s0").rstrip().endswith("stopped cleanly")
    finally:
        for p in puts:
            p.wait(60)
    c.start("s0")
    c.cli("put", str(src), "/after")
    out = tmp_path / "out"
    c.cli("get", "/after", str(out))
    assert out.read_bytes() == src.read_bytes()


# --- local up / down ------------------------------------------------------------------

def test_local_up_down(tmp_path):
    d = tmp_path / "local"
    conf = str(d / "orchard.conf")

    def pids():
        out = {}
        for n in ("s0", "s1"):
            try:
                out[n] = int(open(d / (n + ".pid")).read())
            except OSError:
                pass
        return out

    try:
        r = orchard("local", "up", d, "--servers", 2)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-1] == conf
        assert "created a 2-server cluster" in r.stdout
        first = pids()
        assert set(first) == {"s0", "s1"}
        assert all(not pid_gone(p) for p in first.values())
        assert orchard("ping", conf=conf).returncode == 0
        r = orchard("put", "-", "/kept", input="survives local down", conf=conf)
        assert r.returncode == 0, r.stderr

        r = orchard("local", "up", d)
        assert r.returncode == 0, r.stderr
        assert "already running" in r.stdout
        assert r.stdout.splitlines()[-1] == conf
        assert pids() == first

        r = orchard("local", "down", d)
        assert r.returncode == 0, r.stderr
        assert sorted(re.findall(r"^stopped (s\d) \(pid (\d+)\)$", r.stdout, re.M)) == \
            sorted((n, str(p)) for n, p in first.items())
        wait_until(lambda: all(pid_gone(p) for p in first.values()), timeout=10,
                   what="the servers to exit")
        assert pids() == {}
        assert "stopped cleanly" in open(d / "s0.log").read()
        r = orchard("ping", conf=conf)
        assert r.returncode == 1
        r = orchard("local", "down", d)
        assert r.returncode == 0 and "nothing was running" in r.stdout

        # Up again: the same cluster, with its data.
        r = orchard("local", "up", d, "--servers", 2)
        assert r.returncode == 0, r.stderr
        assert "created" not in r.stdout
        assert r.stdout.splitlines()[-1] == conf
        second = pids()
        assert set(second) == {"s0", "s1"} and set(second.values()).isdisjoint(first.values())
        r = orchard("cat", "/kept", conf=conf)
        assert r.returncode == 0 and r.stdout == "survives local down", r.stderr
        # One server gone: up starts just that one.
        os.kill(second["s1"], signal.SIGTERM)
        wait_until(lambda: pid_gone(second["s1"]), timeout=10, what="s1 to exit")
        r = orchard("local", "up", d)
        assert r.returncode == 0, r.stderr
        assert re.search(r"^started s1 ", r.stdout, re.M) and "started s0" not in r.stdout
        assert pids()["s0"] == second["s0"]
        assert orchard("ping", conf=conf).returncode == 0
    finally:
        orchard("local", "down", d)
        for p in pids().values():  # if down itself failed
            if not pid_gone(p):
                os.kill(p, signal.SIGKILL)


# --- help, usage, messages ------------------------------------------------------------

def _commands():
    r = orchard("--help")
    assert r.returncode == 0
    text = r.stdout.split("Commands:\n", 1)[1]
    return [ln.split()[0] for ln in text.splitlines() if ln.strip()]


def test_every_subcommand_has_help():
    cmds = _commands()
    assert {"genconfig", "mkfs", "local", "ping", "stats", "df", "ls", "stat", "mkdir",
            "put", "get", "cat", "rm", "mv", "ln", "truncate", "chmod", "touch",
            "xattr"} <= set(cmds)
    for cmd in cmds:
        r = orchard(cmd, "--help")
        assert r.returncode == 0, (cmd, r.stderr)
        assert r.stdout.startswith("usage: orchard"), (cmd, r.stdout)
        assert cmd in r.stdout.splitlines()[0]
        assert orchard("help", cmd).stdout == r.stdout
    r = orchard("-V")
    assert r.returncode == 0 and re.match(r"orchard \S+ \(protocol \d+\)$", r.stdout.strip())
    assert orchard("help").returncode == 0


def test_usage_errors_exit_2(tmp_path):
    r = orchard("frobnicate")
    assert r.returncode == 2
    assert r.stderr == "orchard: 'frobnicate' is not a command; see 'orchard --help'\n"
    r = orchard()
    assert r.returncode == 2 and "usage: orchard" in r.stderr
    r = orchard("--bogus")
    assert r.returncode == 2
    for args in (["ls", "--bogus"], ["cat"], ["put", "a"], ["mv", "a"], ["local"],
                 ["local", "sideways", "x"], ["truncate", "/x"], ["ping", "-t", "zero"]):
        r = orchard(*args, conf=tmp_path / "unused.conf")
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert "--help" in r.stderr, (args, r.stderr)
    # No configuration at all.
    r = orchard("ping")
    assert r.returncode == 2 and "ORCHARD_CONF" in r.stderr


def test_error_messages(cluster1, tmp_path):
    c = cluster1
    conf = c.conf
    cases = [["cat", "/nope/x"], ["stat", "/nope"], ["ls", "/nope"], ["rm", "/nope"],
             ["get", "/nope", tmp_path / "out"], ["mv", "/nope", "/x"],
             ["mkdir", "/nope/x"], ["truncate", "-s", "1", "/nope/x"],
             ["chmod", "644", "/nope"], ["ln", "-s", "/a", "/nope/x"],
             ["xattr", "get", "/nope", "user.a"], ["put", "/etc/hostname", "/nope/x"]]
    for args in cases:
        r = orchard(*args, conf=conf)
        assert r.returncode == 1, (args, r.returncode, r.stderr)
        assert NOENT.match(r.stderr), (args, r.stderr)
        assert "/nope" in r.stderr
    r = orchard("put", tmp_path / "missing", "/x", conf=conf)
    assert r.returncode == 1
    assert r.stderr == "orchard: cannot open '%s': No such file or directory\n" % (
        tmp_path / "missing")
    # The environment variable stands in for -c.
    r = orchard("ls", "/", env={"ORCHARD_CONF": conf})
    assert r.returncode == 0, r.stderr
    r = orchard("ls", "/", conf=tmp_path / "nosuch.conf")
    assert r.returncode == 1 and "nosuch.conf" in r.stderr, r.stderr
    assert r.stderr.startswith("orchard: ")
    # Other errors keep the format.
    c.cli("mkdir", "/d")
    c.cli("touch", "/d/f")
    r = orchard("rm", "/d", conf=conf)
    assert r.returncode == 1
    assert r.stderr == "orchard: cannot remove '/d': Is a directory\n", r.stderr
    r = orchard("mkdir", "/d", conf=conf)
    assert r.returncode == 1
    assert r.stderr == "orchard: cannot create directory '/d': File exists\n", r.stderr
    r = orchard("cat", "/d", conf=conf)
    assert r.returncode == 1
    assert r.stderr == "orchard: cannot read '/d': Is a directory\n", r.stderr


# --- ping and stats ------------------------------------------------------------------------

def test_ping_and_stats(cluster3):
    c = cluster3
    r = orchard("ping", conf=c.conf)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ADDRESS", "STATE", "PROTOCOL", "RTT"]
    for i, name in enumerate(c.names):
        f = lines[i + 1].split()
        host, port = c.address(name)
        assert f[:4] == [name, "%s:%d" % (host, port), "up", "v1"], lines[i + 1]
        assert float(f[4]) >= 0 and f[5] == "ms"

    c.cli("put", "-", "/f", input="y" * 200000)
    r = orchard("stats", "--json", conf=c.conf)
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert [s["name"] for s in doc["servers"]] == c.names
    for s in doc["servers"]:
        assert s["up"] is True
        assert s["address"] == "%s:%d" % c.address(s["name"])
        for k in ("bytes_in", "bytes_out", "commits", "syncs", "intents_done", "inodes",
                  "data_bytes_written", "data_bytes_read", "protocol_errors",
                  "connections", "uptime_ms"):
            assert isinstance(s[k], int) and s[k] >= 0, (s["name"], k)
        st = s["store"]
        for k in ("ops", "commits", "syncs", "sync_calls", "csum_errors", "work_chunks",
                  "writes_queued"):
            assert isinstance(st[k], int) and st[k] >= 0, (s["name"], k)
        # Every write is one store op; the writer batches ops into commits.
        assert st["ops"] >= s["requests"].get("CL2SV_WRITE", 0)
        assert st["commits"] <= st["ops"]
        assert st["csum_errors"] == 0
        assert isinstance(s["requests"], dict)
        assert s["requests"]["AD2SV_STATS"] >= 1
        assert s["requests"]["CL2SV_WRITE"] >= 1
        assert s["bytes_in"] > 0 and s["bytes_out"] > 0
    assert doc["servers"][0]["commits"] >= 1
    # The table has the same numbers, one column per server.
    table = c.cli("stats").stdout.splitlines()
    assert table[0].split() == c.names
    assert table[1].split() == ["up", "yes", "yes", "yes"]
    assert any(ln.split()[0] == "requests.CL2SV_WRITE" for ln in table[2:])
    assert any(ln.split()[0] == "store.commits" for ln in table[2:])

    # One server stopped: ping says which and fails; stats still answers.
    c.stop("s1")
    r = orchard("ping", conf=c.conf)
    assert r.returncode == 1
    assert re.search(r"^s0\s.*\bup\b", r.stdout, re.M)
    assert re.search(r"^s1\s+\S+\s+down\s", r.stdout, re.M), r.stdout
    assert re.search(r"^s2\s.*\bup\b", r.stdout, re.M)
    assert "orchard: 1 of 3 servers down" in r.stderr
    r = orchard("stats", "--json", conf=c.conf)
    doc = json.loads(r.stdout)
    assert [s["up"] for s in doc["servers"]] == [True, False, True]
    assert doc["servers"][1]["error"]
    r = orchard("stats", conf=c.conf)
    assert "server 's1' is down" in r.stderr
    c.start("s1")
    assert orchard("ping", conf=c.conf).returncode == 0


def test_stats_and_status_ask_every_server_at_once(tmp_path):
    """Servers that do not answer (frozen: SIGSTOP) cost `orchard stats`
    one deadline together, not one each as when it asked them in turn;
    and the server that answered is up, though its caller read its reply
    only once the frozen ones had held it past that reply's deadline
    (`orchard status` called it down)."""
    c = Cluster(tmp_path / "c", nservers=4)
    c.set_cluster_option("op_timeout_ms", 2000)
    c.start_all()
    frozen = c.names[1:]
    try:
        for n in frozen:
            os.kill(c.pid(n), signal.SIGSTOP)
        t0 = time.monotonic()
        r = orchard("stats", "--json", conf=c.conf)
        took = time.monotonic() - t0
        doc = json.loads(r.stdout)
        assert [s["up"] for s in doc["servers"]] == [True, False, False, False], r.stdout
        assert took < 4.5, "three frozen servers took stats %.1f s at a 2 s deadline" % took
        r = orchard("status", "-t", "2000", conf=c.conf)
        assert re.search(r"^s0\s.*\bup\b", r.stdout, re.M), r.stdout
        assert "1 of 4 servers up" in r.stdout, r.stdout
    finally:
        for n in frozen:
            os.kill(c.pid(n), signal.SIGCONT)
        c.stop_all()


# --- progress bars ----------------------------------------------------------------------
# The long commands draw a bar on stderr when it is a terminal (src/cli/progress.h):
# here a pseudo-terminal 100 columns wide, read to its end (no sleeps).

PTY_COLS = 100
TIME = r"\d+:\d\d(?::\d\d)?"
# Numbers are padded to keep their columns, hence the " +".
BAR = re.compile(r"^(?P<label>[\w -]+?) +(?P<pct>\d+)% \[(?P<bar>[=> ]+)\] +"
                 r"(?P<count>\S+(?: \w+)?) +(?P<rate>\S+/s)  " + TIME +
                 r"(?:  ETA +(?:" + TIME + "|--:--))? *$")
# Without a total (put from a pipe, repair): no percentage, no bar, no ETA.
BAR_NO_TOTAL = re.compile(r"^(?P<label>[\w -]+?) +(?P<count>\S+) +(?P<rate>\S+/s)  " + TIME +
                          " *$")


def run_pty(args, conf=None, stdout_pipe=False, stdin=None, timeout=60):
    """Runs orchard with its stderr (and, unless @stdout_pipe, its stdout) on
    a new pseudo-terminal.  Returns (rc, what the terminal got as text with
    "\\r\\n" made "\\n", the piped stdout bytes or None)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, PTY_COLS, 0, 0))
    cmd = [ORCHARD] + (["-c", str(conf)] if conf else []) + [str(a) for a in args]
    env = dict(os.environ)
    env.pop("ORCHARD_CONF", None)
    env.pop("COLUMNS", None)
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin is not None else
                             subprocess.DEVNULL,
                             stdout=subprocess.PIPE if stdout_pipe else slave, stderr=slave,
                             env=env)
    finally:
        os.close(slave)
    feeder = None
    if stdin is not None:
        def feed():
            try:
                p.stdin.write(stdin)
            finally:
                p.stdin.close()
        feeder = threading.Thread(target=feed)
        feeder.start()
    term, out = b"", b""
    sel = selectors.DefaultSelector()
    sel.register(master, selectors.EVENT_READ)
    if stdout_pipe:
        sel.register(p.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            assert left > 0, "orchard %s: no end after %d s" % (args, timeout)
            for key, _ in sel.select(left):
                try:
                    data = os.read(key.fd, 1 << 16)
                except OSError:     # EIO: the terminal's last writer has gone
                    data = b""
                if not data:
                    sel.unregister(key.fd)
                elif key.fd == master:
                    term += data
                else:
                    out += data
        rc = p.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if feeder:
            feeder.join()
        os.close(master)
        if p.stdout:
            p.stdout.close()
    return rc, term.decode().replace("\r\n", "\n"), out if stdout_pipe else None


def bars(text, label):
    """The bars whose label matches the regex @label that @text drew, in
    order, as match objects (a bar without a total has no "pct"); and the
    other lines and pieces of lines."""
    found, other = [], []
    for line in text.split("\n"):
        for seg in line.split("\r"):
            if not seg.strip():
                continue
            m = BAR.match(seg) or BAR_NO_TOTAL.match(seg)
            if m and re.fullmatch(label, m.group("label")):
                assert len(seg) <= PTY_COLS - 1, seg        # never wraps
                found.append(m)
            else:
                other.append(seg)
    return found, other


def assert_bar_ends_at_100(text, label, monotonic=True):
    """@text shows a bar: it first appears below 100% (or without a total),
    never goes back (unless its total may grow: not @monotonic), and ends
    on its own line at 100% with a full bar."""
    found, _ = bars(text, label)
    assert len(found) >= 2, text
    pcts = [int(m.groupdict().get("pct") or -1) for m in found]
    assert pcts[0] < 100 and (pcts == sorted(pcts) or not monotonic), pcts
    last = found[-1]
    assert pcts[-1] == 100 and set(last.group("bar")) == {"="}, text
    # The final line is a line: a newline follows it, nothing redraws it.
    tail = text[text.rindex(last.group(0)) + len(last.group(0)):]
    assert tail.startswith("\n"), repr(tail)
    return found


def test_progress_bar_put_get(cluster2, tmp_path):
    """put and get of a 12 MiB file under a terminal show a bar in bytes that
    ends at 100%; piped, or with --quiet/-q, they print nothing at all, as
    before bars; get - with its stdout piped keeps the data clean while the
    bar shows on the terminal, and with stdout on the terminal draws none."""
    c = cluster2
    src = tmp_path / "big.bin"
    data = os.urandom(12 << 20)
    src.write_bytes(data)

    rc, text, _ = run_pty(["put", src, "/big"], conf=c.conf)
    assert rc == 0, text
    found = assert_bar_ends_at_100(text, "put")
    assert found[-1].group("count") == "12M/12M", text
    assert bars(text, "put")[1] == [], text     # nothing but the bar

    dst = tmp_path / "copy.bin"
    rc, text, _ = run_pty(["get", "/big", dst], conf=c.conf)
    assert rc == 0, text
    assert assert_bar_ends_at_100(text, "get")[-1].group("count") == "12M/12M"
    assert dst.read_bytes() == data

    # Piped: not a byte more than before.
    r = orchard("put", src, "/big2", conf=c.conf)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = orchard("get", "/big2", tmp_path / "copy2.bin", conf=c.conf)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    assert (tmp_path / "copy2.bin").read_bytes() == data

    # --quiet and -q: nothing on the terminal either.
    for q in ("--quiet", "-q"):
        rc, text, _ = run_pty(["put", q, src, "/big3"], conf=c.conf)
        assert (rc, text) == (0, "")
        rc, text, _ = run_pty(["get", "/big3", tmp_path / "copy3.bin", q], conf=c.conf)
        assert (rc, text) == (0, "")

    # get -: the data alone on the pipe, the bar on the terminal.
    rc, text, out = run_pty(["get", "/big", "-"], conf=c.conf, stdout_pipe=True)
    assert rc == 0 and out == data, text
    assert_bar_ends_at_100(text, "get")
    # ... and with the data on the terminal, no bar to garble it.
    c.cli("put", "-", "/text", input="0123456789abcdef" * 8192)
    rc, text, _ = run_pty(["get", "/text", "-"], conf=c.conf)
    assert (rc, text) == (0, "0123456789abcdef" * 8192)

    # From a pipe: no total, so no percentage until the end, which is 100%.
    rc, text, _ = run_pty(["put", "-", "/piped"], conf=c.conf, stdin=data[:1 << 20])
    assert rc == 0, text
    found = assert_bar_ends_at_100(text, "put")
    assert "pct" not in found[0].groupdict() and found[0].group("count") == "0", text
    assert found[-1].group("count") == "1.0M/1.0M", text
    assert c.cli("stat", "/piped").stdout.count("Size: 1048576") == 1


def test_progress_bar_long_commands(cluster2, tmp_path):
    """clone, dedupe --scan, scrub and repair under a terminal end their bar
    at 100% before they print their result, which is what the piped command
    prints; piped, no bar."""
    c = cluster2
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(3 << 20) * 2)
    c.cli("mkdir", "/d")
    c.cli("put", src, "/d/a")
    cases = [(["clone", "/d/a", "/d/b"], "clone", r"cloned '/d/a' to '/d/b': 6291456 bytes shared"),
             (["dedupe", "--scan", "/d"], r"walk|dedupe( s\d)?|sums s\d",
              r"scanned 3 files, \d+ blocks: \d+ bytes deduplicated"),
             (["scrub", "--all"], "scrub", r"s0: clean")]
    for args, label, result in cases:
        rc, text, _ = run_pty(args, conf=c.conf)
        assert rc == 0, (args, text)
        # dedupe --scan adds each server's runs to the total when it knows them.
        found = assert_bar_ends_at_100(text, label, monotonic=label == "clone" or
                                       label == "scrub")
        after = text[text.rindex(found[-1].group(0)) + len(found[-1].group(0)) + 1:]
        assert re.match(result, after), (args, after)
        # Piped, the same command prints its result and no bar.
        if label == "clone":
            args = ["clone", "/d/a", "/d/c"]
            result = result.replace("/d/b", "/d/c")
        r = orchard(*args, conf=c.conf)
        assert r.returncode == 0 and re.match(result, r.stdout), (args, r.stdout, r.stderr)
        assert r.stderr == "" and "\r" not in r.stdout and "%" not in r.stdout, r.stdout
    assert bars(text, "scrub")[0][-1].group("count") == "2/2 servers"

    # repair works on a stopped server; its bar counts the bytes it reads.
    c.stop("s0")
    rc, text, _ = run_pty(["repair", "s0", "--rebuild", "refcount"], conf=c.conf)
    assert rc == 0, text
    assert_bar_ends_at_100(text, "repair refcount")
    assert text.endswith("re-check: clean\n"), text
    r = orchard("repair", "s0", "--rebuild", "refcount", conf=c.conf)
    assert r.returncode == 0 and r.stderr == "" and "\r" not in r.stdout, r
    assert "\n" + r.stdout.split("\n", 1)[1] in text   # the same report after the bar
    rc, text, _ = run_pty(["repair", "-q", "s0", "--rebuild", "refcount"], conf=c.conf)
    assert rc == 0 and text == r.stdout, text
