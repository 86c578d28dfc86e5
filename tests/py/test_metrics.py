"""Metrics, the status page, `orchard status` and `orchard stats --watch`
(docs/ADMIN.md, "Monitoring"; docs/DESIGN.md, "Metrics and the status page").

One cluster for the module: two servers, each serving /metrics and its
status page on a free 127.0.0.1 port, and one mount with -o metrics=.  A
real Prometheus (Debian's `prometheus`) scrapes all three during a small
workload; the text is also checked by a parser (python3-prometheus-client);
the status page is rendered by headless Chromium (Debian's `chromium`), the
screenshot kept in /tmp/orchard-status/.  The tests that stop a server come
last (pytest runs a module's tests in file order), and each makes sure of
the state it needs.  Every process a test starts is stopped by its PID.
"""
import contextlib
import http.client
import json
import os
import pty
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest

from cluster import ORCHARD, ORCHARDD, Cluster, free_port, run, server_of, wait_until
from mount import ORCHARD_MOUNT, Mount

PROMETHEUS = shutil.which("prometheus")
CHROMIUM = shutil.which("chromium")
SHOTS = "/tmp/orchard-status"


def fetch(addr, path="/metrics", method="GET", body=None, headers=None):
    """(status, headers, body text) of one request to @addr (host, port)."""
    c = http.client.HTTPConnection(addr[0], addr[1], timeout=10)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode()
    finally:
        c.close()


def metrics(addr):
    status, hdr, text = fetch(addr)
    assert status == 200, text
    assert hdr["Content-Type"].startswith("text/plain; version=0.0.4"), hdr
    return text


def workload(m, tag, n=8):
    for i in range(n):
        p = m.path("%s%d" % (tag, i))
        with open(p, "wb") as f:
            f.write(b"x" * 8192)
        with open(p, "rb") as f:
            f.read()
        os.listdir(m.mnt)
        try:
            os.stat(m.path("absent-%s" % tag))
        except FileNotFoundError:
            pass


@contextlib.contextmanager
def background_workload(m, tag):
    """Keeps a small workload going on mount @m while the block runs."""
    stop = threading.Event()
    errors = []

    def loop():
        while not stop.is_set():
            try:
                workload(m, tag, 4)
            except OSError as e:
                errors.append(e)
                return
    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors


class Env:
    pass


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    base = tmp_path_factory.mktemp("metrics")
    e = Env()
    e.base = base
    e.c = Cluster(base / "c", nservers=2)
    e.addr = {}
    for name in e.c.names:
        e.addr[name] = ("127.0.0.1", free_port())
        e.c.set_server_option(name, "metrics", "127.0.0.1:%d" % e.addr[name][1])
    e.maddr = ("127.0.0.1", free_port())
    e.m = Mount(e.c, base / "mnt", {"metrics": "%s:%d" % e.maddr})
    try:
        e.c.start_all()
        e.m.start()
        yield e
    finally:
        try:
            e.m.stop()
        finally:
            e.c.stop_all()


def families(text):
    """{family name: family} of the text, as Prometheus's Python client reads it."""
    parser = pytest.importorskip(
        "prometheus_client.parser",
        reason="python3-prometheus-client is not installed (Debian package)")
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def check_conventions(fams):
    """Names, types and histogram consistency, per the Prometheus conventions."""
    for name, f in fams.items():
        assert name.startswith("orchard_") or name.startswith("process_"), name
        assert f.type in ("counter", "gauge", "histogram"), (name, f.type)
        assert f.documentation, name
        for s in f.samples:
            assert s.value >= 0, s
            if f.type == "counter":
                assert s.name.endswith("_total") or s.name.endswith("_created"), s.name
        if f.type == "histogram":
            assert name.endswith("_seconds"), name
            series = {}
            for s in f.samples:
                key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                series.setdefault(key, {})[(s.name, s.labels.get("le"))] = s.value
            assert series, name
            for key, v in series.items():
                buckets = sorted(((float(le), n) for (sn, le), n in v.items()
                                  if sn.endswith("_bucket")), key=lambda x: x[0])
                counts = [n for _, n in buckets]
                assert counts == sorted(counts), (name, key, buckets)
                assert buckets[-1][0] == float("inf")
                assert buckets[-1][1] == v[(name + "_count", None)], (name, key)
        if "bytes" in name and f.type != "histogram":
            assert name.endswith("_bytes") or name.endswith("_bytes_total"), name


def sample(fams, name, **labels):
    """The value of the first sample called @name with @labels, or None."""
    for f in fams.values():
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None


SERVER_FAMILIES = [
    "orchard_build_info", "orchard_server_info", "process_start_time_seconds",
    "orchard_server_requests", "orchard_server_request_duration_seconds",
    "orchard_server_request_errors", "orchard_server_received_bytes",
    "orchard_server_sent_bytes", "orchard_server_connections",
    "orchard_namespace_commits", "orchard_namespace_wal_bytes", "orchard_store_wal_bytes",
    "orchard_server_flushes", "orchard_server_fsync_requests",
    "orchard_server_flush_duration_seconds", "orchard_store_operations",
    "orchard_store_commits", "orchard_store_ag_free_blocks", "orchard_store_ag_used_blocks",
    "orchard_server_leases", "orchard_server_lease_pushes", "orchard_scrub_last_findings",
    "orchard_scrub_last_end_timestamp_seconds", "orchard_namespace_open_files",
    "orchard_namespace_orphans", "orchard_namespace_orphans_freed",
]
MOUNT_FAMILIES = [
    "orchard_build_info", "orchard_mount_info", "process_start_time_seconds",
    "orchard_mount_requests", "orchard_mount_request_duration_seconds",
    "orchard_mount_request_errors", "orchard_mount_read_bytes", "orchard_mount_written_bytes",
    "orchard_mount_server_requests", "orchard_mount_connections", "orchard_mount_leases",
    "orchard_mount_lease_cache_hits", "orchard_mount_lease_cache_misses",
    "orchard_mount_lease_renewals", "orchard_mount_lease_renewals_dropped",
    "orchard_mount_lease_vouches", "orchard_mount_lease_vouches_failed",
]


def test_metrics_text_parses_and_counts(env):
    """Every family of a server and of the mount parses with Prometheus's own
    parser, follows the naming conventions, and counts what the workload did."""
    workload(env.m, "parse")
    with open(env.m.path("parse0"), "rb+") as f:
        os.fsync(f.fileno())
    for name in env.c.names:
        fams = families(metrics(env.addr[name]))
        missing = [f for f in SERVER_FAMILIES if f not in fams]
        assert not missing, (name, missing)
        check_conventions(fams)
        assert sample(fams, "orchard_server_info", server=name) == 1
        assert sample(fams, "orchard_build_info", role="server") == 1
        assert sample(fams, "orchard_store_ag_used_blocks", ag="0") >= 1
    fams = families(metrics(env.addr["s0"]))
    fams1 = families(metrics(env.addr["s1"]))
    writes = sum((sample(f, "orchard_server_requests_total", type="WRITE", **{"from": "client"}) or 0)
                 for f in (fams, fams1))
    assert writes >= 8
    fsyncs = sum(sample(f, "orchard_server_request_duration_seconds_count", type="FSYNC") or 0
                 for f in (fams, fams1))
    assert fsyncs >= 1
    fams = families(metrics(env.maddr))
    missing = [f for f in MOUNT_FAMILIES if f not in fams]
    assert not missing, missing
    check_conventions(fams)
    assert sample(fams, "orchard_mount_written_bytes_total") >= 8 * 8192
    assert sample(fams, "orchard_mount_read_bytes_total") >= 8 * 8192
    assert sample(fams, "orchard_mount_request_duration_seconds_count", type="WRITE") >= 8
    assert sample(fams, "orchard_mount_request_errors_total", errno="ENOENT") >= 1
    assert sample(fams, "orchard_mount_connections") == 2


def test_orphans_counted(env):
    """A file open through the mount whose last name goes is an orphan of
    its inode's server until the last close frees it."""
    p = env.m.path("orphan-metric")
    with open(p, "wb") as f:
        f.write(b"o" * 4096)
    addr = env.addr["s%d" % server_of(env.c, "/orphan-metric")]
    before = families(metrics(addr))
    freed0 = sample(before, "orchard_namespace_orphans_freed_total")
    orphans0 = sample(before, "orchard_namespace_orphans")
    f = open(p, "rb")
    try:
        assert sample(families(metrics(addr)), "orchard_namespace_open_files") >= 1
        os.unlink(p)
        assert sample(families(metrics(addr)), "orchard_namespace_orphans") == orphans0 + 1
        assert f.read() == b"o" * 4096
    finally:
        f.close()
    wait_until(lambda: sample(families(metrics(addr)), "orchard_namespace_orphans_freed_total")
               == freed0 + 1, 10, what="the orphan freed at its last close")
    assert sample(families(metrics(addr)), "orchard_namespace_orphans") == orphans0


def test_endpoint_is_read_only_and_bounded(env):
    """GET and HEAD only, no body, known paths; idle clients past the limit
    hold neither the server's requests nor, once gone, the endpoint."""
    addr = env.addr["s0"]
    status, hdr, _ = fetch(addr, method="POST", body="x=1")
    assert status == 405 and "GET" in hdr.get("Allow", ""), (status, hdr)
    assert fetch(addr, "/nope")[0] == 404
    assert fetch(addr, method="GET", body="hello")[0] == 400
    assert fetch(addr, "/", method="PUT", body="x")[0] == 405
    status, _, body = fetch(addr, method="HEAD")
    assert status == 200 and body == ""
    assert fetch(env.maddr, "/")[0] == 404
    # Slow clients: more than the endpoint serves at once, each with half a
    # request.  The server keeps answering its clients meanwhile.
    held = []
    try:
        for _ in range(20):
            s = socket.create_connection(addr, timeout=5)
            s.sendall(b"GET /metr")
            held.append(s)
        t0 = time.monotonic()
        env.c.cli("ls", "/")
        workload(env.m, "slow", 2)
        assert time.monotonic() - t0 < 5
    finally:
        for s in held:
            s.close()

    def serves():
        try:
            return fetch(addr)[0] == 200
        except (OSError, http.client.HTTPException):
            return False  # the limit still counts the closed ones for a moment
    wait_until(serves, 15, 0.1, "the endpoint after the slow clients")


def test_metrics_address_refused(env, tmp_path):
    """A public address without metrics_public, a busy one or a bad one stops
    the server before it opens its data, and mounts nothing."""
    conf = str(tmp_path / "o.conf")

    def server_with(value, extra=""):
        with open(env.c.conf) as f:
            text = f.read()
        text = text.replace("metrics = 127.0.0.1:%d\n" % env.addr["s0"][1], "")
        text = text.replace("[server s0]\n", "[server s0]\nmetrics = %s\n%s" % (value, extra), 1)
        with open(conf, "w") as f:
            f.write(text.replace("key_file = orchard.key",
                                 "key_file = " + os.path.join(env.c.dir, "orchard.key")))
        # s0 itself runs: this one must stop before it touches s0's data.
        return run([ORCHARDD, "-c", conf, "-n", "s0"], check=False, timeout=30)

    r = server_with("0.0.0.0:%d" % free_port())
    assert r.returncode == 1 and "not a loopback address" in r.stderr, r.stderr
    assert "metrics_public" in r.stderr
    r = server_with("127.0.0.1:%d" % env.addr["s1"][1])
    assert r.returncode == 1 and "cannot listen for metrics" in r.stderr, r.stderr
    r = server_with("nonsense")
    assert r.returncode == 1 and "bad value for 'metrics'" in r.stderr, r.stderr
    r = server_with("127.0.0.1:%d" % free_port(), "metrics_public = maybe\n")
    assert r.returncode == 1 and "'metrics_public'" in r.stderr, r.stderr
    assert env.c.alive("s0")
    mnt = tmp_path / "m2"
    mnt.mkdir()
    r = run([ORCHARD_MOUNT, "-f", "-c", env.c.conf, str(mnt), "-o",
             "metrics=0.0.0.0:%d" % free_port()], check=False, timeout=30)
    assert r.returncode != 0 and "not a loopback address" in r.stderr, r.stderr
    assert "not mounted" in r.stderr and not os.path.ismount(str(mnt))
    # Asked for, a public address is served (here on every address).
    port = free_port()
    m = Mount(env.c, mnt, {"metrics": "0.0.0.0:%d" % port, "metrics_public": None})
    try:
        m.start()
        assert "orchard_mount_requests_total" in metrics(("127.0.0.1", port))
    finally:
        m.stop()


def test_scrapes_race_the_workload(env):
    """Scrapes of every endpoint and of the status page from several threads
    at once, while the mount works: the part check-tsan runs."""
    errors = []
    stop = threading.Event()

    def scrape(addr, path):
        while not stop.is_set():
            try:
                status, _, body = fetch(addr, path)
                assert status == 200 and body, (addr, path, status)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
                return
    threads = [threading.Thread(target=scrape, args=a, daemon=True) for a in
               [(env.addr["s0"], "/metrics"), (env.addr["s1"], "/metrics"),
                (env.addr["s0"], "/metrics"), (env.maddr, "/metrics"),
                (env.maddr, "/metrics"), (env.addr["s1"], "/")]]
    with background_workload(env.m, "race"):
        for t in threads:
            t.start()
        time.sleep(1.5)  # the duration of the race itself, not a wait for a condition
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors


def prometheus_query(port, expr):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expr}))
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def prometheus_value(port, expr):
    res = prometheus_query(port, expr)
    return float(res[0]["value"][1]) if res else None


@pytest.mark.skipif(not PROMETHEUS, reason="prometheus is not installed (Debian package "
                    "prometheus, which scripts/deps.sh installs)")
def test_prometheus_server_scrapes(env, tmp_path):
    """A real Prometheus scrapes both servers and the mount every second
    during a workload: the request counter rises, the latency histograms
    have observations and quantiles."""
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    targets = ", ".join("'%s:%d'" % env.addr[n] for n in env.c.names)
    cfg.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                   "  evaluation_interval: 1s\n"
                   "scrape_configs:\n"
                   "  - job_name: servers\n    static_configs:\n      - targets: [%s]\n"
                   "  - job_name: mount\n    static_configs:\n      - targets: ['%s:%d']\n"
                   % (targets, env.maddr[0], env.maddr[1]))
    log = open(str(tmp_path / "prometheus.log"), "wb")
    proc = subprocess.Popen([PROMETHEUS, "--config.file=%s" % cfg,
                             "--storage.tsdb.path=%s" % (tmp_path / "data"),
                             "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True)
    log.close()
    try:
        def ready():
            assert proc.poll() is None, open(str(tmp_path / "prometheus.log")).read()
            try:
                return fetch(("127.0.0.1", port), "/-/ready")[0] == 200
            except OSError:
                return False
        wait_until(ready, 30, 0.1, "prometheus to be ready")
        with background_workload(env.m, "prom"):
            total = "sum(orchard_server_requests_total)"
            first = wait_until(lambda: prometheus_value(port, total), 30, 0.2,
                               "a first scrape of the servers")
            wait_until(lambda: (prometheus_value(port, total) or 0) > first, 30, 0.2,
                       "orchard_server_requests_total to rise")
            wait_until(lambda: prometheus_value(
                port, "count(up{job=~'servers|mount'} == 1)") == 3, 30, 0.2,
                "all three targets up")
            assert prometheus_value(
                port, "sum(orchard_server_request_duration_seconds_count)") > 0
            assert prometheus_value(
                port, 'sum(orchard_server_request_duration_seconds_bucket{le="+Inf"})') > 0
            assert prometheus_value(
                port, "sum(orchard_mount_request_duration_seconds_count)") > 0
            q = ("histogram_quantile(0.9, sum by (le) "
                 "(rate(orchard_server_request_duration_seconds_bucket[5s])))")
            quantile = wait_until(lambda: prometheus_value(port, q), 30, 0.2,
                                  "a latency quantile")
            assert 0 < quantile <= 10, quantile
            by_type = prometheus_query(port, "sum by (type) (orchard_server_requests_total)")
            assert {"WRITE", "READ"} <= {r["metric"]["type"] for r in by_type}
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def read_pty(fd, until, timeout):
    """Reads the pty @fd until until(text) or @timeout; returns the text."""
    text, deadline = "", time.monotonic() + timeout
    while not until(text) and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the other side is closed
                break
            if not chunk:
                break
            text += chunk.decode(errors="replace")
    return text


def test_stats_watch_redraws_until_interrupted(env):
    """Under a terminal, stats --watch redraws per-second rates by request
    type and ends cleanly on SIGINT; piped, --count frames and no escapes."""
    with background_workload(env.m, "watch"):
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(ORCHARD, [ORCHARD, "-c", env.c.conf, "stats", "--watch"])
        try:
            text = read_pty(fd, lambda t: t.count("Ctrl-C to stop") >= 2, 20)
            assert text.count("Ctrl-C to stop") >= 2, text
            os.kill(pid, signal.SIGINT)
            text += read_pty(fd, lambda t: False, 10)
            _, status = os.waitpid(pid, 0)
            pid = None
        finally:
            if pid:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            os.close(fd)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (status, text)
        assert "ThreadSanitizer" not in text, text
        assert "\x1b[H\x1b[2J" in text
        assert "REQUESTS/S" in text and "CL2SV_WRITE" in text and "total" in text, text
        r = run([ORCHARD, "stats", "--watch", "-n", "1", env.m.mnt], timeout=30)
    assert "FUSE REQUESTS/S" in r.stdout and "WRITE" in r.stdout, r.stdout
    assert "\x1b[" not in r.stdout
    assert run([ORCHARD, "stats", "-n", "2"], check=False).returncode == 2


def chromium_render(url, png):
    """The DOM of @url after Chromium rendered it, and its screenshot in @png."""
    ud = os.path.join(os.path.dirname(png), "chromium-profile")
    r = run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--user-data-dir=" + ud, "--screenshot=" + png, "--dump-dom",
             "--window-size=1200,900", url], check=False, timeout=120)
    shutil.rmtree(ud, ignore_errors=True)
    assert r.returncode == 0, r.stderr[-4000:]
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    return r.stdout


def test_status_exit_codes(env):
    """orchard status exits 0 with every server up and 1 with one stopped;
    the status page of the server left shows the stopped one down."""
    if env.c.alive("s1"):
        r = env.c.cli("status")
        assert "2 of 2 servers up" in r.stdout, r.stdout
        lines = {ln.split()[0]: ln for ln in r.stdout.splitlines()[3:] if ln.strip()}
        assert set(lines) == {"s0", "s1"} and all(" up " in ln for ln in lines.values())
        assert "0.1.0" in lines["s0"] and "GiB" in lines["s0"], r.stdout
        status, _, page = fetch(env.addr["s0"], "/")
        assert status == 200 and page.count('<tr class="up">') == 2, page
        env.c.cli("scrub", "--all")
        env.c.stop("s1")
    r = env.c.cli("status", check=False)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "1 of 2 servers up" in r.stdout and "down (unreachable)" in r.stdout, r.stdout
    assert "server 's1' is down" in r.stderr
    s0 = [ln for ln in r.stdout.splitlines() if ln.startswith("s0 ")][0]
    assert " up " in s0 and "clean" in s0, s0
    status, _, page = fetch(env.addr["s0"], "/")
    assert status == 200 and '<tr class="down"><td><b>s1</b>' in page, page


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (Debian package "
                    "chromium, which scripts/deps.sh installs)")
def test_status_page_in_chromium(env, tmp_path):
    """The status page, as headless Chromium renders it, names every server
    and shows the stopped one down; the screenshot is kept in
    /tmp/orchard-status."""
    env.c.stop("s1")
    png = str(tmp_path / "status.png")
    dom = chromium_render("http://%s:%d/" % env.addr["s0"], png)
    assert '<tr class="up"><td><b>s0</b>' in dom, dom
    assert '<tr class="down"><td><b>s1</b>' in dom, dom
    assert "1 of 2" in dom and "unreachable" in dom
    assert "<script" not in dom
    os.makedirs(SHOTS, exist_ok=True)
    shutil.copy(png, os.path.join(SHOTS, "status-one-down.png"))
