"""A raw Orchard protocol peer in Python, for abuse tests.

It speaks just enough of docs/SPEC-wire.md to authenticate (HELLO/AUTH with
HMAC-SHA256 over the nonces) and to send arbitrary frames, so the tests can
send garbage, truncated and oversized frames, unknown types, and requests
before authentication.
"""
import hashlib
import hmac
import os
import socket
import struct

HDR = struct.Struct("<IHBBQ")  # length, type, version, flags, reqid
REPLY = 0x01
HELLO, AUTH, UNKNOWN, PING = 0x0001, 0x0002, 0x0003, 0x0004
GETATTR = 0x0102
MAXFRAME = (1 << 20) + 64 * 1024
ORIGIN_CLIENT = 0xFFFFFFFF


def read_key(conf_dir):
    with open(os.path.join(conf_dir, "orchard.key")) as f:
        return bytes.fromhex(f.read().strip())


def frame(type_, payload=b"", reqid=1, flags=0, version=1, length=None):
    if length is None:
        length = len(payload)
    return HDR.pack(length, type_, version, flags, reqid) + payload


class Peer:
    def __init__(self, addr, timeout=5.0):
        self.sock = socket.create_connection(addr, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("connection closed")
            buf += chunk
        return buf

    def recv_frame(self):
        length, type_, version, flags, reqid = HDR.unpack(self.recv_exact(HDR.size))
        return type_, flags, reqid, self.recv_exact(length)

    def closed_by_peer(self):
        """True if the server closed the connection (EOF or reset)."""
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def handshake(self, key, origin=ORIGIN_CLIENT):
        """origin: a server index to speak as that server (SV2SV_* requests)."""
        nc = os.urandom(32)
        self.send(frame(HELLO, struct.pack("<BBQ", 1, 1, 0) + nc +
                        struct.pack("<I", origin)))
        type_, flags, _, body = self.recv_frame()
        assert type_ == HELLO and flags & REPLY
        status, = struct.unpack_from("<I", body)
        assert status == 0
        ns = body[4 + 10:4 + 10 + 32]
        maca = body[4 + 10 + 32:4 + 10 + 64]
        expect = hmac.new(key, b"orchard-acceptor" + nc + ns, hashlib.sha256).digest()
        assert hmac.compare_digest(maca, expect), "server MAC mismatch"
        macc = hmac.new(key, b"orchard-connector" + ns + nc, hashlib.sha256).digest()
        self.send(frame(AUTH, macc, reqid=2))
        type_, flags, _, body = self.recv_frame()
        status, = struct.unpack_from("<I", body)
        return status

    def ping(self, reqid=99):
        self.send(frame(PING, reqid=reqid))
        type_, flags, rid, body = self.recv_frame()
        assert rid == reqid and type_ == PING and flags & REPLY
        return struct.unpack_from("<I", body)[0]
