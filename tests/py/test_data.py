"""File data on a 3-server cluster: striping, sizes around strip boundaries,
holes, truncation, overwrite, df and freeing of deleted data.

Everything goes through the `orchard` CLI against real servers, except where
the CLI cannot express the operation (a write at an offset, one server's own
statfs): there tests/lib/wire.py speaks the protocol directly.
"""
import hashlib
import os
import random
import re
import struct
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import wire  # noqa: E402
from cluster import Cluster, wait_until  # noqa: E402

STRIP = 65536
MiB = 1 << 20

CL2SV_STATFS = 0x010B
CL2SV_WRITE = 0x0202
CL2SV_EXTEND = 0x0111
CRED_ROOT = struct.pack("<IIH", 0, 0, 0)


# --- helpers ------------------------------------------------------------------

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MiB), b""):
            h.update(chunk)
    return h.hexdigest()


def write_local(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def put_bytes(c, tmp_path, data, dest):
    src = write_local(tmp_path / ("src-" + dest.strip("/").replace("/", "_")), data)
    c.cli("put", src, dest)


def get_bytes(c, path):
    """The whole file, through `orchard cat` (binary stdout)."""
    import subprocess
    from cluster import ORCHARD
    p = subprocess.run([ORCHARD, "-c", c.conf, "cat", path], capture_output=True,
                       timeout=120)
    assert p.returncode == 0, "cat %s failed: %s" % (path, p.stderr.decode(errors="replace"))
    return p.stdout


def stat_fields(c, path):
    """size, handle, strip_size, stripe_count, first_server from `orchard stat`."""
    out = c.cli("stat", path).stdout
    size = int(re.search(r"Size:\s+(\d+)", out).group(1))
    handle = int(re.search(r"Handle:\s+0x([0-9a-fA-F]+)", out).group(1), 16)
    m = re.search(r"strip_size=(\d+) stripe_count=(\d+) first_server=(\d+)", out)
    return {"size": size, "handle": handle, "strip_size": int(m.group(1)),
            "stripe_count": int(m.group(2)), "first_server": int(m.group(3))}


def per_server(c, key):
    return {name: s[key] for name, s in c.server_stats().items()}


def per_server_requests(c, rtype):
    return {name: s["requests"].get(rtype, 0) for name, s in c.server_stats().items()}


def peer(c, name):
    p = wire.Peer(c.address(name))
    assert p.handshake(wire.read_key(c.dir)) == 0
    return p


def call(p, type_, payload, reqid=7):
    p.send(wire.frame(type_, payload, reqid=reqid))
    t, flags, rid, body = p.recv_frame()
    assert t == type_ and flags & wire.REPLY and rid == reqid, (t, flags, rid)
    return struct.unpack_from("<I", body)[0], body[4:]


def raw_write(c, path, offset, data):
    """Writes @data at file offset @offset the way the client library does:
    each strip's piece to the server holding it (docs/SPEC-wire.md, Rules),
    then EXTEND on the inode's server."""
    f = stat_fields(c, path)
    ss, cnt, first = f["strip_size"], f["stripe_count"], f["first_server"]
    peers = {}
    try:
        pos = 0
        while pos < len(data):
            off = offset + pos
            i = off // ss
            n = min(len(data) - pos, ss - off % ss)
            server = c.names[(first + i) % cnt]
            local = (i // cnt) * ss + off % ss
            if server not in peers:
                peers[server] = peer(c, server)
            payload = (CRED_ROOT + struct.pack("<QQI", f["handle"], local, n) +
                       data[pos:pos + n])
            st, _ = call(peers[server], CL2SV_WRITE, payload)
            assert st == 0, "WRITE to %s failed: status %d" % (server, st)
            pos += n
        owner = c.names[f["handle"] >> 48]
        if owner not in peers:
            peers[owner] = peer(c, owner)
        st, _ = call(peers[owner], CL2SV_EXTEND,
                     CRED_ROOT + struct.pack("<QQQ", f["handle"], offset + len(data), 0))
        assert st == 0, "EXTEND failed: status %d" % st
    finally:
        for p in peers.values():
            p.close()


# --- tests --------------------------------------------------------------------

def test_big_file_striped_over_every_server(cluster3, tmp_path):
    c = cluster3
    src = tmp_path / "big"
    rnd = random.Random(1)
    with open(src, "wb") as f:
        for _ in range(100):
            f.write(rnd.randbytes(MiB))
    written0 = per_server(c, "data_bytes_written")
    read0 = per_server(c, "data_bytes_read")
    writes0 = per_server_requests(c, "CL2SV_WRITE")

    c.cli("put", src, "/big")
    assert stat_fields(c, "/big")["size"] == 100 * MiB

    written1 = per_server(c, "data_bytes_written")
    writes1 = per_server_requests(c, "CL2SV_WRITE")
    for name in c.names:
        grew = written1[name] - written0[name]
        # Round robin over 3 servers: each holds a third, give or take a strip.
        assert abs(grew - 100 * MiB / 3) <= 2 * STRIP, (name, grew)
        assert writes1[name] > writes0[name], (name, writes0, writes1)
    assert sum(written1[n] - written0[n] for n in c.names) == 100 * MiB

    out = tmp_path / "big.out"
    c.cli("get", "/big", out)
    assert os.path.getsize(out) == 100 * MiB
    assert sha256_file(out) == sha256_file(src)
    read1 = per_server(c, "data_bytes_read")
    for name in c.names:
        assert read1[name] - read0[name] >= 100 * MiB // 3 - 2 * STRIP, name


def test_many_small_files(cluster3, tmp_path):
    c = cluster3
    rnd = random.Random(2)
    # Directories land on different servers, so the files do too.
    dirs = ["/d%d" % i for i in range(6)]
    for d in dirs:
        c.cli("mkdir", d)
    files = {}
    for i in range(120):
        data = rnd.randbytes(rnd.randint(0, 20 * 1024))
        path = "%s/f%03d" % (dirs[i % len(dirs)], i)
        put_bytes(c, tmp_path, data, path)
        files[path] = data
    for path, data in files.items():
        assert get_bytes(c, path) == data, path
    for d in dirs:
        names = c.cli("ls", d).stdout.split()
        assert sorted(names) == sorted(p.rsplit("/", 1)[1] for p in files
                                       if p.startswith(d + "/"))
    # The files' inodes really are spread over the servers.
    inodes = per_server(c, "inodes")
    assert all(inodes[n] > 1 for n in c.names), inodes


BOUNDARY_SIZES = [0, 1, 4095, 4096, STRIP - 1, STRIP, STRIP + 1, 2 * STRIP,
                  3 * STRIP - 1, 3 * STRIP, 3 * STRIP + 1, 3 * STRIP + 5,
                  4 * STRIP - 1, 6 * STRIP + 4097, 7 * STRIP + 12345,
                  (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 4 * MiB + 3]


def test_sizes_around_strip_boundaries(cluster3, tmp_path):
    c = cluster3
    rnd = random.Random(3)
    c.cli("mkdir", "/b")
    for size in BOUNDARY_SIZES:
        data = rnd.randbytes(size)
        path = "/b/s%d" % size
        put_bytes(c, tmp_path, data, path)
        assert stat_fields(c, path)["size"] == size, path
        got = get_bytes(c, path)
        assert len(got) == size and got == data, "size %d differs" % size
        out = tmp_path / ("get%d" % size)
        c.cli("get", path, out)
        with open(out, "rb") as f:
            assert f.read() == data, "get of size %d differs" % size


@pytest.mark.parametrize("nservers,strip", [(1, 4096), (2, 16384), (3, 1 << 20)])
def test_sizes_other_layouts(tmp_path, nservers, strip):
    c = Cluster(tmp_path / "c", nservers=nservers, strip_size=strip)
    try:
        c.start_all()
        rnd = random.Random(strip)
        for size in sorted({0, 1, strip - 1, strip, strip + 1, nservers * strip - 1,
                            nservers * strip, nservers * strip + 1,
                            3 * nservers * strip + strip // 2, 5 * MiB + 1}):
            data = rnd.randbytes(size)
            put_bytes(c, tmp_path, data, "/s%d" % size)
            f = stat_fields(c, "/s%d" % size)
            assert (f["size"], f["strip_size"], f["stripe_count"]) == (size, strip, nservers)
            assert get_bytes(c, "/s%d" % size) == data, "size %d differs" % size
        # A hole in the middle of a strip and across a stripe.
        c.cli("truncate", "-s", strip // 2 + 1, "/s1")
        c.cli("truncate", "-s", 4 * nservers * strip, "/s1")
        got = get_bytes(c, "/s1")
        assert got[1:] == bytes(4 * nservers * strip - 1)
    finally:
        c.stop_all()


def test_truncate_extend_makes_hole(cluster3, tmp_path):
    c = cluster3
    data = random.Random(4).randbytes(100000)
    put_bytes(c, tmp_path, data, "/h")
    c.cli("truncate", "-s", 10 * STRIP + 7, "/h")
    assert stat_fields(c, "/h")["size"] == 10 * STRIP + 7
    got = get_bytes(c, "/h")
    assert got[:100000] == data
    assert got[100000:] == bytes(10 * STRIP + 7 - 100000)

    # truncate creates a missing file: all hole, on no server at all.
    c.cli("truncate", "-s", "3M", "/empty-hole")
    got = get_bytes(c, "/empty-hole")
    assert got == bytes(3 * MiB)


@pytest.mark.parametrize("cut", [0, 1, 70000, 2 * STRIP, 3 * STRIP - 1, 4 * STRIP + 100])
def test_shrink_then_extend_reads_zeros(cluster3, tmp_path, cut):
    c = cluster3
    size = 9 * STRIP + 321
    data = random.Random(cut).randbytes(size)
    put_bytes(c, tmp_path, data, "/s")
    c.cli("truncate", "-s", cut, "/s")
    assert get_bytes(c, "/s") == data[:cut]
    c.cli("truncate", "-s", size + 1000, "/s")
    got = get_bytes(c, "/s")
    assert len(got) == size + 1000
    assert got[:cut] == data[:cut]
    assert got[cut:] == bytes(size + 1000 - cut), "old bytes came back after shrink+extend"


def test_write_at_offsets(cluster3, tmp_path):
    """Writes at offsets past EOF and inside holes (raw WRITE + EXTEND, as
    the client library sends them); the gaps read as zeros."""
    c = cluster3
    c.cli("mkdir", "/w")
    c.cli("touch", "/w/f")
    model = bytearray()
    rnd = random.Random(5)
    for off, n in [(5 * STRIP + 10, 100), (0, 7), (2 * STRIP - 3, 10),
                   (20 * STRIP, STRIP + 1), (9 * STRIP + 5, 3 * STRIP)]:
        d = rnd.randbytes(n)
        raw_write(c, "/w/f", off, d)
        if len(model) < off + n:
            model.extend(bytes(off + n - len(model)))
        model[off:off + n] = d
        assert stat_fields(c, "/w/f")["size"] == len(model)
        assert get_bytes(c, "/w/f") == bytes(model), "after write at %d+%d" % (off, n)
    # put + truncate on top: a put replaces it all, an extension is a hole.
    put_bytes(c, tmp_path, b"x" * 1000, "/w/f")
    c.cli("truncate", "-s", 25 * STRIP, "/w/f")
    assert get_bytes(c, "/w/f") == b"x" * 1000 + bytes(25 * STRIP - 1000)


def test_extend_after_interrupted_put_reads_zeros(cluster3, tmp_path):
    """A put killed after writing strips but before setting the size leaves
    bytes past EOF in the store; growing the file must not expose them
    (regression test: fixed in 0fbaa7b, TRUNCATE intent on growth)."""
    import subprocess
    from cluster import ORCHARD
    c = cluster3
    chunk = 4 * MiB
    written0 = sum(per_server(c, "data_bytes_written").values())
    p = subprocess.Popen([ORCHARD, "-c", c.conf, "put", "-", "/interrupted"],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        p.stdin.write(b"\xab" * chunk)
        p.stdin.flush()
        wait_until(lambda: sum(per_server(c, "data_bytes_written").values()) >=
                   written0 + chunk, timeout=20, what="the first chunk to be written")
    finally:
        p.kill()  # before it publishes the size
        p.wait()
        p.stdin.close()
    assert stat_fields(c, "/interrupted")["size"] == 0
    assert get_bytes(c, "/interrupted") == b""
    c.cli("truncate", "-s", chunk, "/interrupted")
    got = get_bytes(c, "/interrupted")
    assert len(got) == chunk
    assert got.count(0) == chunk, "%d bytes never written to the file read back non-zero" % (
        chunk - got.count(0))


def test_overwrite_with_smaller_file_leaves_no_tail(cluster3, tmp_path):
    c = cluster3
    big = random.Random(6).randbytes(8 * STRIP + 999)
    small = random.Random(7).randbytes(1000)
    put_bytes(c, tmp_path, big, "/o")
    put_bytes(c, tmp_path, small, "/o")
    assert stat_fields(c, "/o")["size"] == 1000
    assert get_bytes(c, "/o") == small
    # Extending exposes whatever the servers still hold past 1000: must be zeros.
    c.cli("truncate", "-s", len(big), "/o")
    got = get_bytes(c, "/o")
    assert got[:1000] == small
    assert got[1000:] == bytes(len(big) - 1000), "old tail survived the overwrite"
    # And an empty overwrite.
    put_bytes(c, tmp_path, b"", "/o")
    c.cli("truncate", "-s", 3 * STRIP, "/o")
    assert get_bytes(c, "/o") == bytes(3 * STRIP)


def _raw_statfs(c, name):
    p = peer(c, name)
    try:
        st, body = call(p, CL2SV_STATFS, CRED_ROOT)
    finally:
        p.close()
    assert st == 0
    bsize, blocks, bfree, bavail, files, ffree, namemax = struct.unpack_from("<IQQQQQI", body)
    return {"bsize": bsize, "blocks": blocks, "bfree": bfree, "bavail": bavail,
            "files": files, "ffree": ffree}


def _df(c):
    lines = c.cli("df").stdout.splitlines()
    assert lines[0].split()[:2] == ["Filesystem", "1K-blocks"], lines
    f = lines[1].split()
    return {"kblocks": int(f[1]), "inodes": int(f[5]), "iused": int(f[6])}


def test_df_sums_every_server(cluster3, tmp_path):
    c = cluster3
    for i in range(9):
        c.cli("mkdir", "/dd%d" % i)
        c.cli("touch", "/dd%d/x" % i)
    df = _df(c)
    raw = [_raw_statfs(c, n) for n in c.names]
    assert df["kblocks"] == sum(r["blocks"] * r["bsize"] for r in raw) // 1024
    inodes = per_server(c, "inodes")
    # Root, 9 directories and 9 files, spread over the servers.
    assert sum(inodes.values()) == 19
    assert df["iused"] == sum(r["files"] - r["ffree"] for r in raw) == 19
    assert sum(1 for n in c.names if inodes[n]) >= 2, inodes
    human = c.cli("df", "-h").stdout.splitlines()
    assert human[0].split()[1] == "Size" and human[1].startswith("orchard:")


def test_df_is_the_stores_size(tmp_path):
    """On a disk with room, space is the extent stores' (store_size of
    each), not the disk's (test_store_space.py: a small disk caps it);
    written data takes blocks and deleting gives them back."""
    c = Cluster(tmp_path / "c", nservers=2, store_size="256M")
    c.start_all()
    try:
        raw = [_raw_statfs(c, n) for n in c.names]
        for r in raw:
            assert r["bsize"] == 4096
            # 256M is 65536 blocks; the superblock and static area are not data.
            assert 65536 - 64 <= r["blocks"] <= 65536, r
            assert r["bfree"] <= r["blocks"]
        free0 = sum(r["bfree"] for r in raw)
        data = os.urandom(4 << 20)
        local = tmp_path / "src"
        local.write_bytes(data)
        c.cli("put", str(local), "/f")
        used = free0 - sum(_raw_statfs(c, n)["bfree"] for n in c.names)
        assert used >= (4 << 20) // 4096, used
        c.cli("rm", "/f")
        wait_until(lambda: sum(_raw_statfs(c, n)["bfree"] for n in c.names) == free0,
                   timeout=20, what="the blocks of /f to be freed")
    finally:
        c.stop_all()


def _find_in_sparse(path, needle):
    """Offset of @needle in the data regions of sparse file @path, or None."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        off = 0
        while off < end:
            try:
                start = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:
                return None
            stop = os.lseek(fd, start, os.SEEK_HOLE)
            chunk = os.pread(fd, stop - start, start)
            i = chunk.find(needle)
            if i >= 0:
                return start + i
            off = stop
    finally:
        os.close(fd)
    return None


def test_checksum_error_reaches_client_as_eio(tmp_path):
    """A block whose checksum fails reads as EIO (status IO on the wire, the
    store's -EIO); the server counts it and serves everything else."""
    c = Cluster(tmp_path / "c", nservers=1)
    c.start_all()
    try:
        good, bad = tmp_path / "good", tmp_path / "bad"
        good.write_bytes(b"g" * 100000)
        victim = random.Random(7).randbytes(65536)
        bad.write_bytes(victim)
        c.cli("put", "--fsync", str(good), "/good")
        c.cli("put", "--fsync", str(bad), "/bad")
        blocks = os.path.join(c.dir, "s0", "blocks")
        off = _find_in_sparse(blocks, victim[8192:8192 + 4096])
        assert off is not None, "data not found in the blocks file"
        with open(blocks, "r+b") as f:
            f.seek(off + 100)
            b = f.read(1)
            f.seek(off + 100)
            f.write(bytes([b[0] ^ 0xff]))
        r = c.cli("cat", "/bad", check=False)
        assert r.returncode == 1 and "Input/output error" in r.stderr, r.stderr
        assert c.alive("s0")
        assert c.cli("cat", "/good").stdout == "g" * 100000
        assert c.server_stats()["s0"]["store"]["csum_errors"] >= 1
    finally:
        c.stop_all()


def test_delete_frees_data_on_every_server(cluster3, tmp_path):
    c = cluster3
    c.cli("mkdir", "/del")
    put_bytes(c, tmp_path, random.Random(8).randbytes(5 * STRIP + 1), "/del/f")
    put_bytes(c, tmp_path, b"tiny", "/del/t")
    deleted0 = per_server(c, "data_objects_deleted")
    c.cli("rm", "/del/f")
    assert c.cli("ls", "/del").stdout.split() == ["t"]

    def freed():
        now = per_server(c, "data_objects_deleted")
        return all(now[n] > deleted0[n] for n in c.names)
    wait_until(freed, timeout=15, interval=0.1,
               what="data_objects_deleted to grow on every server")
    # The other file is untouched.
    assert get_bytes(c, "/del/t") == b"tiny"
    # rm -r of a tree frees the data of every file in it.
    for i in range(3):
        put_bytes(c, tmp_path, random.Random(i).randbytes(3 * STRIP), "/del/g%d" % i)
    deleted1 = per_server(c, "data_objects_deleted")
    c.cli("rm", "-r", "/del")
    assert c.cli("ls", "/del", check=False).returncode == 1

    def freed_all():
        now = per_server(c, "data_objects_deleted")
        return all(now[n] >= deleted1[n] + 3 for n in c.names)
    wait_until(freed_all, timeout=15, interval=0.1,
               what="every deleted file's objects to be freed")
