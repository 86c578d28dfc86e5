"""Hostile and idle connections (docs/DESIGN.md, "Connections: what a
stranger can hold").

Raw sockets against a one-server cluster: strangers that connect and say
nothing, strangers that announce a large frame before authenticating, more
connections than the server has descriptors, and more than max_connections.
The server must close what it must, stay small and idle, and serve a real
client (`orchard ping`) meanwhile or right after.  Then a client that holds
the key: it pipelines large READs and reads no reply, and the server must
stop reading it instead of queueing the replies.  Nothing here sleeps to
wait for the server: every wait polls for the state it expects (the
windows over which CPU time and memory are watched are bounded, not waits).
"""
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import wire  # noqa: E402
from cluster import ORCHARD, Cluster, stat_layout, wait_until  # noqa: E402

# Generous for a loaded 2-core machine and the sanitizer builds.
SLACK = 15.0


# --- helpers -----------------------------------------------------------------------

def one_server(tmp_path, **options):
    """A formatted, stopped one-server cluster with [cluster] @options."""
    c = Cluster(tmp_path / "c", nservers=1)
    for key, value in options.items():
        c.set_cluster_option(key, value)
    return c


def proc_status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def cpu_seconds(pid):
    """utime + stime of @pid, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def connect_many(address, n):
    """@n sockets connected to @address that send nothing."""
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection(address, timeout=10)
            s.setblocking(False)
            socks.append(s)
    except BaseException:
        close_all(socks)
        raise
    return socks


def close_all(socks):
    for s in socks:
        s.close()


def is_closed(s):
    """True if the server closed @s (EOF or reset); drains what it sent."""
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except (BlockingIOError, InterruptedError):
        return False
    except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
        return True


def wait_closed(socks, timeout):
    """Polls until the server has closed every socket in @socks or @timeout
    seconds passed; returns the ones still open."""
    deadline = time.monotonic() + timeout
    open_ = list(socks)
    while open_:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        p = select.poll()
        for s in open_:
            p.register(s, select.POLLIN | select.POLLERR | select.POLLHUP)
        p.poll(min(left, 0.5) * 1000)
        open_ = [s for s in open_ if not is_closed(s)]
    return open_


def ping_up(c):
    r = c.cli("ping", "-t", "5000", check=False, timeout=60)
    return r.returncode == 0 and " up " in r.stdout


def server_stats(c):
    return c.server_stats()[c.names[0]]


def warn_lines(c, pattern):
    return [ln for ln in c.log_text(c.names[0]).splitlines()
            if " warn: " in ln and pattern in ln]


def wait_warn(c, pattern):
    return wait_until(lambda: warn_lines(c, pattern), timeout=SLACK,
                      what="a WARN log line containing %r" % pattern)


# --- (a) strangers that never authenticate ----------------------------------------------

def test_unauthenticated_connections_close_after_the_handshake_timeout(tmp_path):
    """100 sockets that say nothing, and one that stops after HELLO, are
    closed handshake_timeout_ms after they connected, not before; a real
    client is served meanwhile, and an authenticated connection that then
    idles past the timeout stays."""
    timeout_s = 2.0
    c = one_server(tmp_path, handshake_timeout_ms=int(timeout_s * 1000))
    socks = []
    try:
        c.start_all()
        addr = c.address(c.names[0])
        member = wire.Peer(addr)
        assert member.handshake(wire.read_key(c.dir)) == 0
        t0 = time.monotonic()
        socks = connect_many(addr, 100)
        half = wire.Peer(addr)
        half.send(wire.frame(wire.HELLO, struct.pack("<BBQ", 1, 1, 0) + os.urandom(32) +
                             struct.pack("<I", wire.ORIGIN_CLIENT)))
        assert half.recv_frame()[0] == wire.HELLO
        half.sock.setblocking(False)
        socks.append(half.sock)
        # Served while the strangers wait.
        assert ping_up(c)
        left = wait_closed(socks, timeout_s + SLACK)
        elapsed = time.monotonic() - t0
        assert not left, "%d of %d strangers still open after %.1f s" % (
            len(left), len(socks), elapsed)
        assert elapsed >= timeout_s * 0.9, "closed after %.2f s, before the timeout" % elapsed
        # The member idled past the timeout and is still served.
        assert member.ping() == 0
        member.close()
        assert ping_up(c)
        wait_warn(c, "no authentication within")
        assert server_stats(c)["connections_timed_out"] >= len(socks)
        assert c.alive(c.names[0])
    finally:
        close_all(socks)
        c.stop_all()


# --- (b) large frames before authentication ------------------------------------------

def test_large_frame_before_auth_is_refused_unbuffered(tmp_path):
    """200 strangers each announce a 1 MiB HELLO and send half of it: each
    is closed from its header, and the server's memory does not grow by
    what they sent (100 MiB in all)."""
    n, sent_each = 200, 512 * 1024
    c = one_server(tmp_path, handshake_timeout_ms=60000)
    socks = []
    try:
        c.start_all()
        pid = c.pid(c.names[0])
        assert ping_up(c)
        rss0, hwm0 = proc_status_kb(pid, "VmRSS"), proc_status_kb(pid, "VmHWM")
        addr = c.address(c.names[0])
        body = os.urandom(sent_each)
        hdr = wire.frame(wire.HELLO, length=1 << 20)
        for _ in range(n):
            s = socket.create_connection(addr, timeout=10)
            socks.append(s)
            try:
                s.sendall(hdr + body)
            except (ConnectionResetError, BrokenPipeError):
                pass             # closed from the header: what we want
            s.setblocking(False)
        left = wait_closed(socks, SLACK)
        rss1, hwm1 = proc_status_kb(pid, "VmRSS"), proc_status_kb(pid, "VmHWM")
        grew = max(rss1 - rss0, hwm1 - hwm0)
        assert grew < 16 * 1024, \
            "RSS grew by %d KiB (%.0f KiB per stranger), %d of %d strangers still open" % (
                grew, grew / n, len(left), n)
        assert not left, "%d of %d strangers still open" % (len(left), n)
        wait_warn(c, "frame too large for a handshake")
        assert ping_up(c)
        assert c.alive(c.names[0])
    finally:
        close_all(socks)
        c.stop_all()


# --- (c) out of descriptors --------------------------------------------------------------

def test_out_of_descriptors_does_not_spin(tmp_path):
    """With RLIMIT_NOFILE at 128 and 300 strangers connected, the server
    stops accepting for a while instead of retrying accept(2) at full CPU;
    once they go, a real client is served at once."""
    c = one_server(tmp_path, handshake_timeout_ms=120000)
    socks = []
    try:
        c.start(c.names[0], nofile=128)
        pid = c.pid(c.names[0])
        addr = c.address(c.names[0])
        socks = connect_many(addr, 300)
        wait_warn(c, "cannot accept")
        wait_until(lambda: open_fds(pid) >= 120, timeout=SLACK,
                   what="the server to use its descriptors")
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(3.0)          # the window the CPU time is measured over
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
        share = (cpu1 - cpu0) / (t1 - t0)
        assert share < 0.2, "server used %.0f%% CPU out of descriptors" % (share * 100)
        assert c.alive(c.names[0])
        close_all(socks)
        t0 = time.monotonic()
        wait_until(lambda: ping_up(c), timeout=SLACK, interval=0.1,
                   what="a real client to be served")
        assert time.monotonic() - t0 < 10.0
        assert c.alive(c.names[0])
    finally:
        close_all(socks)
        c.stop_all()


# --- (d) max_connections -------------------------------------------------------------------

def test_max_connections(tmp_path):
    """With max_connections = 20, the connections past it are closed at
    once and counted; a real client is refused while the server is full and
    served once it is below."""
    cap = 20
    c = one_server(tmp_path, max_connections=cap, handshake_timeout_ms=120000)
    socks = []
    try:
        c.start_all()
        addr = c.address(c.names[0])
        socks = connect_many(addr, cap + 5)
        wait_until(lambda: len([s for s in socks if is_closed(s)]) >= 5, timeout=SLACK,
                   what="the connections past max_connections to be closed")
        held = [s for s in socks if not is_closed(s)]
        # The ping of start_all may still have counted when the first came.
        assert cap - 2 <= len(held) <= cap, "%d held" % len(held)
        wait_warn(c, "too many connections")
        while len(held) < cap:
            held.append(connect_many(addr, 1)[0])
            socks.append(held[-1])
        assert not ping_up(c)
        held[0].close()
        held[1].close()
        wait_until(lambda: ping_up(c), timeout=SLACK, interval=0.1,
                   what="a real client to be served below max_connections")
        assert server_stats(c)["connections_refused"] >= 6
        assert c.alive(c.names[0])
    finally:
        close_all(socks)
        c.stop_all()


# --- (e) an authenticated client that reads no reply -------------------------------------

READ = 0x0201
CRED_ROOT = struct.pack("<IIH", 0, 0, 0)


def read_request(handle, offset, length, reqid):
    """CL2SV_READ "chol": credentials, handle, offset, length."""
    return wire.frame(READ, CRED_ROOT + struct.pack("<QQI", handle, offset, length),
                      reqid=reqid)


def recv_into(sock, view):
    """Fills @view from @sock (blocking)."""
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            raise EOFError("connection closed after %d of %d bytes" % (got, len(view)))
        got += n


def test_unread_replies_stop_reading_not_fill_memory(tmp_path):
    """A client with the key sends 2,000 READs of 1 MiB (2 GiB of replies)
    and reads none: the server stops reading it once its output passes the
    cap (DESIGN.md, "Connections: what a stranger can hold"), so its memory
    grows by megabytes, not gigabytes, while other clients are served.
    Once the client reads, every reply comes, in order, with the data."""
    n, size = 2000, 1 << 20
    bound_kb = 64 * 1024
    window = 4.0                 # seconds over which the memory is watched
    c = one_server(tmp_path)
    hostile = None
    try:
        c.start_all()
        pid = c.pid(c.names[0])
        data = os.urandom(size)
        src = tmp_path / "big"
        src.write_bytes(data)
        c.cli("put", src, "/big")
        handle = stat_layout(c, "/big")["handle"]
        assert ping_up(c)
        rss0, hwm0 = proc_status_kb(pid, "VmRSS"), proc_status_kb(pid, "VmHWM")
        hostile = wire.Peer(c.address(c.names[0]))
        assert hostile.handshake(wire.read_key(c.dir)) == 0
        reqs = memoryview(b"".join(read_request(handle, 0, size, 1000 + i)
                                   for i in range(n)))
        hostile.sock.setblocking(False)
        sent, grew = 0, 0
        deadline = time.monotonic() + window
        while time.monotonic() < deadline:
            if sent < len(reqs):
                try:
                    sent += hostile.sock.send(reqs[sent:])
                except BlockingIOError:
                    pass         # the server stopped reading: what we want
            rss, hwm = proc_status_kb(pid, "VmRSS"), proc_status_kb(pid, "VmHWM")
            grew = max(grew, rss - rss0, hwm - hwm0)
            if grew >= bound_kb:
                break            # failed: do not let it take the machine's memory
            select.select([], [hostile.sock] if sent < len(reqs) else [], [], 0.05)
        assert grew < bound_kb, "RSS grew by %d MiB with %d of %d READs sent" % (
            grew // 1024, sent // len(read_request(0, 0, 0, 0)), n)
        # Others are served meanwhile, on the loop that holds the hostile output.
        assert ping_up(c)
        p = subprocess.run([ORCHARD, "-c", c.conf, "cat", "/big"], capture_output=True,
                           timeout=60)
        assert p.returncode == 0 and p.stdout == data, p.stderr
        # Now it reads: what it had not sent yet goes, and every reply comes in order.
        hostile.sock.setblocking(True)
        hostile.sock.settimeout(SLACK)
        if sent < len(reqs):
            threading.Thread(target=hostile.sock.sendall, args=(reqs[sent:],),
                             daemon=True).start()
        hdr = bytearray(wire.HDR.size)
        body = bytearray(8 + size)
        for i in range(n):
            recv_into(hostile.sock, memoryview(hdr))
            length, type_, _, flags, reqid = wire.HDR.unpack(hdr)
            assert (type_, reqid) == (READ, 1000 + i) and flags & wire.REPLY, \
                "reply %d: type %#x reqid %d" % (i, type_, reqid)
            assert length == len(body), "reply %d: %d bytes" % (i, length)
            recv_into(hostile.sock, memoryview(body))
            status, dlen = struct.unpack_from("<II", body)
            assert (status, dlen) == (0, size), "reply %d: status %d, %d bytes" % (
                i, status, dlen)
            assert body[8:] == data, "reply %d: wrong data" % i
        hostile.close()
        hostile = None
        assert ping_up(c)
        assert c.alive(c.names[0])
    finally:
        if hostile:
            hostile.close()
        c.stop_all()
