"""Protocol abuse (STYLE 2.10, docs/SPEC-wire.md "Handshake" and "Rules").

A raw socket (tests/lib/wire.py) sends garbage, truncated and oversized
frames, requests before authentication, a wrong key, unknown types and
malformed known messages.  The server must answer UNKNOWN or close, log a
rate-limited WARN, and go on serving a good client; it must never crash.
Each test has its own one-server cluster, so the per-call-site rate limits
of one test do not hide the log lines of the next.
"""
import hashlib
import hmac
import os
import random
import re
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import wire  # noqa: E402
from cluster import ORCHARD, Cluster, stat_layout, wait_until  # noqa: E402

HDR = wire.HDR
LOOKUP, GETATTR, UNLINK, RENAME = 0x0101, 0x0102, 0x0108, 0x0109
SV2SV_DATA_DELETE = 0x0404
SV2SV_DATA_DELETE_MANY = 0x040a
SV2SV_DATA_CUT = 0x040b
ST_ACCES, ST_NOSYS, ST_PERM, ST_INVAL, ST_NOENT = 5, 18, 1, 11, 2
CRED_ROOT = struct.pack("<IIH", 0, 0, 0)
WARN_LINE = " warn: "


# --- helpers ------------------------------------------------------------------

def addr(c):
    return c.address(c.names[0])


def authed(c):
    p = wire.Peer(addr(c))
    assert p.handshake(wire.read_key(c.dir)) == 0
    return p


def hello(p):
    """Sends HELLO; returns (server nonce, our nonce)."""
    nc = os.urandom(32)
    p.send(wire.frame(wire.HELLO, struct.pack("<BBQ", 1, 1, 0) + nc +
                      struct.pack("<I", wire.ORIGIN_CLIENT)))
    t, flags, _, body = p.recv_frame()
    assert t == wire.HELLO and flags & wire.REPLY
    assert struct.unpack_from("<I", body)[0] == 0
    return body[14:46], nc


def good_client_works(c, tmp_path, tag):
    """`orchard ping` and a put/get round trip against the same server."""
    r = c.cli("ping")
    assert " up " in r.stdout
    data = os.urandom(random.randint(1, 300000))
    src = tmp_path / ("good-" + tag)
    with open(src, "wb") as f:
        f.write(data)
    c.cli("put", src, "/good-" + tag)
    p = subprocess.run([ORCHARD, "-c", c.conf, "cat", "/good-" + tag], capture_output=True,
                       timeout=60)
    assert p.returncode == 0 and p.stdout == data, p.stderr


def assert_alive(c):
    for name in c.names:
        assert c.alive(name), "%s died:\n%s" % (name, c.log_tail(name))


def warn_lines(c, pattern):
    return [ln for ln in c.log_text(c.names[0]).splitlines()
            if WARN_LINE in ln and pattern in ln]


def wait_warn(c, pattern):
    """The log line is written by the server after it closes; poll for it."""
    return wait_until(lambda: warn_lines(c, pattern), timeout=10,
                      what="a WARN log line containing %r" % pattern)


def stat_handle(c, path):
    return stat_layout(c, path)["handle"]


def protocol_errors(c):
    return c.server_stats()[c.names[0]]["protocol_errors"]


# --- before authentication --------------------------------------------------------------

def test_garbage_bytes(cluster1, tmp_path):
    c = cluster1
    rnd = random.Random(1)
    # Garbage whose length field is huge, and garbage with a plausible header.
    p = wire.Peer(addr(c))
    p.send(struct.pack("<I", 0xDEADBEEF) + rnd.randbytes(60))
    assert p.closed_by_peer()
    p.close()
    wait_warn(c, "frame too large")

    p = wire.Peer(addr(c))
    body = rnd.randbytes(40)
    p.send(HDR.pack(len(body), 0x5A5A, 7, 0x80, 12345) + body)
    assert p.closed_by_peer()
    p.close()
    wait_warn(c, "before authentication")
    good_client_works(c, tmp_path, "g")
    assert_alive(c)


def test_truncated_frame_then_close(cluster1, tmp_path):
    c = cluster1
    # A HELLO cut short, before and during the header.
    for cut in (3, wire.HDR.size, wire.HDR.size + 10):
        p = wire.Peer(addr(c))
        full = wire.frame(wire.HELLO, struct.pack("<BBQ", 1, 1, 0) + os.urandom(32) +
                          struct.pack("<I", wire.ORIGIN_CLIENT))
        p.send(full[:cut])
        p.close()
    # After authentication: a GETATTR cut in its payload, then close.
    p = authed(c)
    req = wire.frame(GETATTR, CRED_ROOT + struct.pack("<Q", 1), reqid=5)
    p.send(req[:-4])
    p.close()
    # A frame that says 1000 bytes and stops at 10, then the peer stays idle.
    p = authed(c)
    p.send(HDR.pack(1000, GETATTR, 1, 0, 6) + b"x" * 10)
    p.sock.settimeout(0.3)
    assert not p.closed_by_peer()  # the server waits for the rest ...
    good_client_works(c, tmp_path, "t")  # ... without blocking anyone else
    p.close()
    good_client_works(c, tmp_path, "t2")
    assert_alive(c)


@pytest.mark.parametrize("when", ["before-auth", "after-auth"])
def test_huge_length_field(cluster1, tmp_path, when):
    c = cluster1
    p = wire.Peer(addr(c)) if when == "before-auth" else authed(c)
    p.send(HDR.pack(0xFFFFFFF0, GETATTR, 1, 0, 9))
    assert p.closed_by_peer()
    p.close()
    # Just over the limit is refused too; the limit itself is not a crash.
    p = authed(c)
    p.send(HDR.pack(wire.MAXFRAME + 1, GETATTR, 1, 0, 10))
    assert p.closed_by_peer()
    p.close()
    lines = wait_warn(c, "frame too large")
    assert "len=4294967280" in "".join(lines), lines
    good_client_works(c, tmp_path, "h")
    assert_alive(c)


def test_request_before_authentication(cluster1, tmp_path):
    c = cluster1
    # Straight away, with no HELLO.
    p = wire.Peer(addr(c))
    p.send(wire.frame(GETATTR, CRED_ROOT + struct.pack("<Q", 1)))
    assert p.closed_by_peer()
    p.close()
    # After HELLO, instead of AUTH.
    p = wire.Peer(addr(c))
    hello(p)
    p.send(wire.frame(wire.PING, reqid=3))
    assert p.closed_by_peer()
    p.close()
    lines = wait_warn(c, "before authentication")
    assert any("type=0x0102" in ln for ln in lines), lines
    good_client_works(c, tmp_path, "b")
    assert_alive(c)


def test_wrong_key_refused(cluster1, tmp_path):
    c = cluster1
    wrong = bytes(32)
    p = wire.Peer(addr(c))
    ns, nc = hello(p)
    mac = hmac.new(wrong, b"orchard-connector" + ns + nc, hashlib.sha256).digest()
    p.send(wire.frame(wire.AUTH, mac, reqid=2))
    t, flags, _, body = p.recv_frame()
    assert t == wire.AUTH and flags & wire.REPLY
    assert struct.unpack_from("<I", body)[0] == ST_ACCES
    assert p.closed_by_peer()
    p.close()
    # A replayed MAC from another connection fails the same way (fresh nonces).
    key = wire.read_key(c.dir)
    p = wire.Peer(addr(c))
    ns1, nc1 = hello(p)
    stale = hmac.new(key, b"orchard-connector" + ns1 + nc1, hashlib.sha256).digest()
    p.close()
    p = wire.Peer(addr(c))
    hello(p)
    p.send(wire.frame(wire.AUTH, stale, reqid=2))
    t, _, _, body = p.recv_frame()
    assert struct.unpack_from("<I", body)[0] == ST_ACCES
    assert p.closed_by_peer()
    p.close()
    assert len(wait_warn(c, "failed authentication")) >= 2
    good_client_works(c, tmp_path, "k")
    assert_alive(c)


def test_cli_with_wrong_key_fails_cleanly(cluster1, tmp_path):
    """A client whose key differs says so, naming the server, instead of
    "Permission denied"; the server logs the failed authentication with the
    client's address (the client tells it with a MAC that never verifies)."""
    c = cluster1
    conf = c.conf_with_other_key(tmp_path / "other")
    want = "authentication failed: cluster key does not match server s0"
    r = subprocess.run([ORCHARD, "-c", conf, "ping"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert re.search(r"^s0\s.*\bdown\b.*" + want, r.stdout, re.M), r.stdout
    for args in (["ls", "/"], ["put", "-", "/x"], ["stat", "/"]):
        r = subprocess.run([ORCHARD, "-c", conf] + args, capture_output=True, text=True,
                           input="", timeout=60)
        assert r.returncode == 1, (args, r.stderr)
        assert want in r.stderr and "Permission denied" not in r.stderr, (args, r.stderr)
    lines = wait_warn(c, "failed authentication")
    assert "peer=127.0.0.1:" in lines[0], lines
    good_client_works(c, tmp_path, "w")
    assert "x" not in c.cli("ls", "/").stdout.split()
    assert_alive(c)


def test_peer_with_wrong_key_logged_on_both_sides(tmp_path):
    """A server reaching a peer that holds another key logs it, and tells
    the peer (an AUTH whose MAC never verifies), which logs it too."""
    c = Cluster(tmp_path / "c", nservers=2)
    c.set_cluster_option("op_timeout_ms", 2000)  # a mkdir stuck on s1 waits less
    try:
        c.start("s0")
        c.start("s1", wait=False, conf=c.conf_with_other_key(tmp_path / "other"))
        wait_until(lambda: "serving:" in c.log_text("s1"), what="s1 to serve")
        # Directories are spread over the servers: some inodes go to s1,
        # which s0 asks for them (the client talks to s0 only).
        for i in range(8):
            c.cli("mkdir", "/d%d" % i, check=False, timeout=60)
            if "failed authentication" in c.log_text("s1"):
                break

        def both():
            return ("server failed authentication" in c.log_text("s0") and
                    "peer failed authentication" in c.log_text("s1"))
        wait_until(both, 15, what="both servers to log the key mismatch")
        assert c.alive("s0") and c.alive("s1")
    finally:
        c.stop_all()


# --- after authentication ---------------------------------------------------------------

def test_unknown_type_gets_unknown_reply(cluster1, tmp_path):
    c = cluster1
    p = authed(c)
    for i, t in enumerate((0x7777, 0x00FF, 0xFFFF, 0x0300, 0x0500)):
        p.send(wire.frame(t, b"whatever" * i, reqid=100 + i))
        rt, flags, rid, body = p.recv_frame()
        assert (rt, rid) == (wire.UNKNOWN, 100 + i)
        assert flags & wire.REPLY
        assert struct.unpack_from("<I", body)[0] == ST_NOSYS
    # A (well-formed) handshake message after the handshake is not served either.
    p.send(wire.frame(wire.HELLO, struct.pack("<BBQ", 1, 1, 0) + os.urandom(32) +
                      struct.pack("<I", wire.ORIGIN_CLIENT), reqid=200))
    rt, _, rid, body = p.recv_frame()
    assert (rt, rid) == (wire.UNKNOWN, 200)
    # The connection stays usable.
    assert p.ping(reqid=300) == 0
    p.send(wire.frame(GETATTR, CRED_ROOT + struct.pack("<Q", 1), reqid=301))
    rt, flags, rid, body = p.recv_frame()
    assert (rt, rid) == (GETATTR, 301) and struct.unpack_from("<I", body)[0] == 0
    p.close()
    good_client_works(c, tmp_path, "u")
    assert_alive(c)


def test_largest_frame_and_pipelining(cluster1, tmp_path):
    """A frame of exactly the maximum size is read and answered; many
    requests in flight on one connection are each answered by reqid."""
    c = cluster1
    p = authed(c)
    p.sock.settimeout(20)
    p.send(wire.frame(0x7ABC, b"\x00" * wire.MAXFRAME, reqid=77))
    rt, flags, rid, body = p.recv_frame()
    assert (rt, rid) == (wire.UNKNOWN, 77) and flags & wire.REPLY
    reqids = list(range(1000, 1200))
    p.send(b"".join(wire.frame(wire.PING, reqid=r) for r in reqids))
    got = []
    for _ in reqids:
        rt, flags, rid, body = p.recv_frame()
        assert rt == wire.PING and flags & wire.REPLY
        assert struct.unpack_from("<I", body)[0] == 0
        got.append(rid)
    assert sorted(got) == reqids
    p.close()
    good_client_works(c, tmp_path, "p")
    assert_alive(c)


def test_server_request_from_client_refused(cluster1, tmp_path):
    c = cluster1
    p = authed(c)
    p.send(wire.frame(SV2SV_DATA_DELETE, struct.pack("<IQQ", 0, 1, 1), reqid=11))
    rt, flags, rid, body = p.recv_frame()
    assert (rt, rid) == (SV2SV_DATA_DELETE, 11) and flags & wire.REPLY
    assert struct.unpack_from("<I", body)[0] == ST_PERM
    handles = struct.pack("<QQ", 1, 2)
    p.send(wire.frame(SV2SV_DATA_DELETE_MANY,
                      struct.pack("<IQI", 0, 1, len(handles)) + handles, reqid=12))
    rt, flags, rid, body = p.recv_frame()
    assert (rt, rid) == (SV2SV_DATA_DELETE_MANY, 12) and flags & wire.REPLY
    assert struct.unpack_from("<I", body)[0] == ST_PERM
    assert p.ping() == 0
    p.close()
    wait_warn(c, "server request from a client")
    good_client_works(c, tmp_path, "s")
    assert_alive(c)


def test_unknown_flag_bits(cluster1, tmp_path):
    """SPEC-wire "Flag words": a bit flags.def does not list is answered
    INVAL in a word that refuses them (before the handler looks at
    anything), served as if clear in one that ignores them, and PERM still
    comes first for a server request from a client."""
    c = cluster1
    p = authed(c)
    rename = (CRED_ROOT + struct.pack("<Q", 1) + name_bytes(b"nothere") +
              struct.pack("<Q", 1) + name_bytes(b"other"))
    for reqid, bits in ((21, 1 << 2), (22, 1 << 31)):
        p.send(wire.frame(RENAME, rename + struct.pack("<I", bits), reqid=reqid))
        rt, flags, rid, body = p.recv_frame()
        assert (rt, rid) == (RENAME, reqid) and flags & wire.REPLY
        assert struct.unpack_from("<I", body)[0] == ST_INVAL
    # Known bits reach the handler: the name is not there.
    p.send(wire.frame(RENAME, rename + struct.pack("<I", 1), reqid=23))
    rt, _, rid, body = p.recv_frame()
    assert (rt, rid) == (RENAME, 23) and struct.unpack_from("<I", body)[0] == ST_NOENT
    # UNLINK ignores what it does not know.
    p.send(wire.frame(UNLINK, CRED_ROOT + struct.pack("<Q", 1) + name_bytes(b"nothere") +
                      struct.pack("<I", 1 << 5), reqid=24))
    rt, _, rid, body = p.recv_frame()
    assert (rt, rid) == (UNLINK, 24) and struct.unpack_from("<I", body)[0] == ST_NOENT
    p.send(wire.frame(SV2SV_DATA_CUT, struct.pack("<IQQQI", 0, 0, 1, 0, 1 << 7), reqid=25))
    rt, _, rid, body = p.recv_frame()
    assert (rt, rid) == (SV2SV_DATA_CUT, 25) and struct.unpack_from("<I", body)[0] == ST_PERM
    assert p.ping() == 0
    p.close()
    good_client_works(c, tmp_path, "f")
    assert_alive(c)


def attr_bytes(mode=0, parent=0):
    """An `a` field (SPEC-wire "Field codes"): 88 bytes, zero but mode and parent."""
    return (struct.pack("<QIIII", 0, mode, 0, 0, 0) + struct.pack("<QQqqq", 0, 0, 0, 0, 0) +
            struct.pack("<QIHHII", parent, 0, 0, 0, 0, 0))


def name_bytes(name):
    return bytes([len(name)]) + name


def data_bytes(data):
    return struct.pack("<I", len(data)) + data


# One server: index 0 exists, and the top 16 bits of a handle name the server.
@pytest.mark.parametrize("bad", [(1 << 64) - 1, 1 << 63, 1 << 48 | 2],
                         ids=["all-ones", "top-bit", "server-1"])
def test_handle_of_missing_server_refused(cluster1, tmp_path, bad):
    """SPEC-wire "Rules": a request naming a handle whose server is not in
    the cluster is answered EINVAL before anything is looked up, allocated or
    created, and the connection goes on.  Before, a WRITE to such a handle
    made a data object nobody could free (scrub's N6 reported it forever)."""
    c = cluster1
    c.cli("put", "-", "/real", input="r" * 5000)
    real = stat_handle(c, "/real")
    layout = struct.pack("<IHH", 4096, 1, 0)
    h = struct.pack("<Q", bad)
    block = b"w" * 4096
    client_reqs = {
        "WRITE": (0x0202, CRED_ROOT + h + struct.pack("<Q", 0) + data_bytes(block)),
        "WRITE-far": (0x0202, CRED_ROOT + h + struct.pack("<Q", 1 << 30) + data_bytes(block)),
        "READ": (0x0201, CRED_ROOT + h + struct.pack("<QI", 0, 4096)),
        "GETATTR": (GETATTR, CRED_ROOT + h),
        "SETATTR": (0x0103, CRED_ROOT + h + struct.pack("<I", 1 << 3) + attr_bytes()),
        "EXTEND": (0x0111, CRED_ROOT + h + struct.pack("<Qq", 8192, 0)),
        "PUNCH": (0x0205, CRED_ROOT + h + layout + struct.pack("<QQ", 0, 4096)),
        "BLOCKSUMS": (0x0207, CRED_ROOT + h + struct.pack("<QI", 0, 16)),
        "FSYNC": (0x0203, CRED_ROOT + h + struct.pack("<I", 0)),
        "SETXATTR": (0x010d, CRED_ROOT + h + name_bytes(b"user.x") + struct.pack("<I", 0) +
                     data_bytes(b"v")),
        "LOOKUP": (LOOKUP, CRED_ROOT + h + name_bytes(b"x")),
        "CREATE": (0x0104, CRED_ROOT + h + name_bytes(b"x") +
                   struct.pack("<IQIH", 0o100644, 0, 0, 0)),
        "MKDIR": (0x0105, CRED_ROOT + h + name_bytes(b"x") + struct.pack("<I", 0o40755)),
        "LINK": (0x0107, CRED_ROOT + struct.pack("<Q", real) + h + name_bytes(b"x")),
        "RENAME": (0x0109, CRED_ROOT + struct.pack("<Q", 1) + name_bytes(b"real") + h +
                   name_bytes(b"x") + struct.pack("<I", 0)),
        "COPY_RANGE": (0x0204, CRED_ROOT + struct.pack("<Q", real) + layout + h + layout +
                       struct.pack("<QQQ", 0, 0, 4096)),
        "NAMES": (0x0303, h),
    }
    # As server 0 (this server itself): the peers' requests are checked too.
    origin = struct.pack("<IQ", 0, 1 << 40)
    server_reqs = {
        "SV2SV_WRITE": (0x0409, struct.pack("<I", 0) + h + struct.pack("<Q", 0) +
                        data_bytes(block)),
        "SV2SV_DATA_TRUNCATE": (0x0405, origin + h + struct.pack("<Q", 4096)),
        "SV2SV_DATA_DELETE": (SV2SV_DATA_DELETE, origin + h),
        "SV2SV_DATA_DELETE_MANY": (SV2SV_DATA_DELETE_MANY,
                                   origin + data_bytes(struct.pack("<QQ", real, bad))),
        "SV2SV_NLINK_ADJ": (0x0403, origin + h + struct.pack("<I", 1)),
        "SV2SV_SET_PARENT": (0x0406, origin + struct.pack("<Q", real) + h),
        "SV2SV_MKDIR_INODE": (0x0401, origin + attr_bytes(0o40755, parent=bad)),
        "SV2SV_RENAME_IN": (0x0407, origin + CRED_ROOT + struct.pack("<Q", 1) +
                            name_bytes(b"x") + h + struct.pack("<IIQ", 0o100644, 0, 0)),
    }
    got = {}
    key = wire.read_key(c.dir)
    for origin_id, reqs in ((wire.ORIGIN_CLIENT, client_reqs), (0, server_reqs)):
        p = wire.Peer(addr(c))
        assert p.handshake(key, origin=origin_id) == 0
        for i, (what, (t, payload)) in enumerate(reqs.items()):
            p.send(wire.frame(t, payload, reqid=500 + i))
            try:
                rt, flags, rid, body = p.recv_frame()
            except (OSError, EOFError) as e:
                raise AssertionError("%s: no answer (%r); answered so far: %s; log:\n%s" %
                                     (what, e, got, c.log_tail(c.names[0])))
            assert (rt, rid) == (t, 500 + i) and flags & wire.REPLY, what
            got[what] = struct.unpack_from("<I", body)[0]
        assert p.ping() == 0  # the connection was kept
        p.close()
    want = {what: ST_INVAL for what in list(client_reqs) + list(server_reqs)}
    assert got == want
    lines = wait_warn(c, "handle of a server not in the cluster")
    assert "handle=%#x" % bad in lines[0] and "peer=127.0.0.1:" in lines[0], lines
    # Nothing was made: no orphan object, no entry, no inode; /real is whole.
    r = c.cli("scrub", "--all", check=False, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(c.cli("ls", "/").stdout.split()) == ["real"]
    assert c.cli("cat", "/real").stdout == "r" * 5000
    good_client_works(c, tmp_path, "i")
    assert_alive(c)


@pytest.mark.parametrize("size", [1 << 49, 1 << 60, (1 << 64) - 1])
def test_huge_ranges_answered_at_once(cluster1, tmp_path, size):
    """Ranges a client chooses (PUNCH, COPY_RANGE) cost the server no loop
    over their length: a 2^49-byte punch with 4 KiB strips is answered at
    once, and ranges past the store's limit are refused with EINVAL."""
    c = cluster1
    c.cli("put", "-", "/victim", input="x" * 10000)
    p = authed(c)
    layout = struct.pack("<IHH", 4096, 1, 0)
    t0 = time.monotonic()
    # CL2SV_PUNCH "chLos": credentials, handle, layout, offset, size.
    p.send(wire.frame(0x0205, CRED_ROOT + struct.pack("<Q", 1 << 48 | 2) + layout +
                      struct.pack("<QQ", 0, size), reqid=21))
    rt, flags, rid, body = p.recv_frame()
    assert (rt, rid) == (0x0205, 21) and flags & wire.REPLY
    status = struct.unpack_from("<I", body)[0]
    assert status in (0, 11)  # OK, or EINVAL past the limit
    # CL2SV_COPY_RANGE "chLHYoQs" with a length past its 64 MiB cap.
    p.send(wire.frame(0x0204, CRED_ROOT + struct.pack("<Q", 2) + layout + struct.pack("<Q", 3) +
                      layout + struct.pack("<QQQ", 0, 0, size), reqid=22))
    rt, flags, rid, body = p.recv_frame()
    assert (rt, rid) == (0x0204, 22) and struct.unpack_from("<I", body)[0] == 11
    assert time.monotonic() - t0 < 5
    assert p.ping() == 0
    p.close()
    good_client_works(c, tmp_path, "r%d" % (size & 0xff))
    assert_alive(c)


@pytest.mark.parametrize("case", ["name-too-long-for-frame", "short", "trailing-bytes",
                                  "zero-length-name", "reply-flag"])
def test_malformed_known_message_closes(cluster1, tmp_path, case):
    c = cluster1
    errors0 = protocol_errors(c)
    p = authed(c)
    base = CRED_ROOT + struct.pack("<Q", 1)
    if case == "name-too-long-for-frame":
        msg = wire.frame(LOOKUP, base + bytes([200]) + b"abc")
        pattern = "malformed request"
    elif case == "short":
        msg = wire.frame(GETATTR, CRED_ROOT + b"\x01\x00")
        pattern = "malformed request"
    elif case == "trailing-bytes":
        msg = wire.frame(GETATTR, base + b"junk")
        pattern = "malformed request"
    elif case == "zero-length-name":
        msg = wire.frame(LOOKUP, base + b"\x00")
        pattern = "malformed request"
    else:
        msg = wire.frame(GETATTR, b"\x00" * 8, flags=wire.REPLY)
        pattern = "unexpected reply frame"
    p.send(msg)
    assert p.closed_by_peer()
    p.close()
    lines = wait_warn(c, pattern)
    if pattern == "malformed request":
        assert "type=CL2SV_" in lines[0], lines
        assert protocol_errors(c) == errors0 + 1
    good_client_works(c, tmp_path, "m")
    assert_alive(c)


def test_newer_version_may_carry_trailing_bytes(cluster1, tmp_path):
    """SPEC-wire "Versioning": trailing bytes are accepted in a frame whose
    version is newer than the receiver's."""
    c = cluster1
    p = authed(c)
    p.send(wire.frame(GETATTR, CRED_ROOT + struct.pack("<Q", 1) + b"future", reqid=21,
                      version=2))
    rt, flags, rid, body = p.recv_frame()
    assert (rt, rid) == (GETATTR, 21) and struct.unpack_from("<I", body)[0] == 0
    assert p.ping() == 0
    p.close()
    assert_alive(c)


# --- flood ------------------------------------------------------------------------------

def test_garbage_flood(cluster1, tmp_path):
    c = cluster1
    stop = threading.Event()
    sent = [0]
    errors = []

    def flood(seed):
        rnd = random.Random(seed)
        try:
            for i in range(20):
                try:
                    s = socket.create_connection(addr(c), timeout=5)
                except OSError as e:
                    errors.append(e)
                    continue
                try:
                    kind = i % 3
                    if kind == 0:
                        s.sendall(rnd.randbytes(200))
                    elif kind == 1:
                        s.sendall(HDR.pack(0xFFFFFFF0, GETATTR, 1, 0, i))
                    else:
                        s.sendall(wire.frame(GETATTR, CRED_ROOT + struct.pack("<Q", 1)))
                    s.settimeout(5)
                    try:
                        while s.recv(4096):
                            pass
                    except OSError:
                        pass
                    sent[0] += 1
                finally:
                    s.close()
                if stop.is_set():
                    return
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(10)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    try:
        # A good client keeps working during the flood.
        good_client_works(c, tmp_path, "f1")
    finally:
        for t in threads:
            t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors[:3]
    assert sent[0] == 200
    good_client_works(c, tmp_path, "f2")
    assert_alive(c)
    # Rate limited: at most 10 per 5 s per call site (three sites here).
    elapsed = time.monotonic() - t0
    warns = [ln for ln in c.log_text(c.names[0]).splitlines() if WARN_LINE in ln]
    windows = int(elapsed / 5) + 1
    assert 3 <= len(warns) <= 3 * 10 * windows, \
        "%d WARN lines for 200 bad peers in %.1f s" % (len(warns), elapsed)

    # Once the window has passed, the next one reports how many it dropped.
    def suppressed():
        s = socket.create_connection(addr(c), timeout=5)
        try:
            s.sendall(HDR.pack(0xFFFFFFF0, GETATTR, 1, 0, 1))
            s.settimeout(5)
            try:
                while s.recv(4096):
                    pass
            except OSError:
                pass
        finally:
            s.close()
        return any("suppressed" in ln for ln in warn_lines(c, ""))
    wait_until(suppressed, timeout=15, interval=0.5,
               what="a 'similar log lines suppressed' summary")
    assert_alive(c)
