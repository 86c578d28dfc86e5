"""Bit rot in the extent store's blocks file is caught, never returned
(docs/SPEC-store.md, I17; store.h: reads verify every block's checksum).

A file is written through the cluster; its extents on one server are found
in that server's store.db (read-only), and bytes of one 4 KiB block are
flipped in data_dir/blocks: once with the server running (a plain write to
the file: the server reads it back through the page cache), once with it
stopped.  Reading that range through the cluster then fails with EIO, other
ranges still read fine, the server keeps serving, its log names the object,
the byte offset and the physical block, and the offline checker
(build/tests/store-check --data) reports I17 for the block.
"""
import os
import random
import re
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from cluster import BUILDDIR, ORCHARD, Cluster, stat_layout  # noqa: E402
from op import Op, OpError  # noqa: E402

STORE_CHECK = os.path.join(BUILDDIR, "tests", "store-check")
BLOCK = 4096
FILE_SIZE = 1 << 20


def file_offset(f, server_idx, local):
    """File offset of byte @local of server @server_idx's object."""
    ss, cnt, first = f["strip_size"], f["stripe_count"], f["first_server"]
    j, within = divmod(local, ss)
    i = j * cnt + (server_idx - first) % cnt
    return i * ss + within


def key_u64(v):
    """orch_rec_key_u64: a u64 as the signed INTEGER that sorts like it."""
    k = v ^ (1 << 63)
    return k - (1 << 64) if k >= 1 << 63 else k


def store_extents(data_dir, handle):
    """(ag_blocks, [(off, ag, agbno, len)]) of object @handle, from store.db
    opened read-only (the server may be running: WAL readers do not block)."""
    con = sqlite3.connect("file:%s?mode=ro" % os.path.join(data_dir, "store.db"), uri=True)
    try:
        agb = con.execute("SELECT v FROM smeta WHERE k = 'ag_blocks'").fetchone()[0]
        row = con.execute("SELECT nid FROM obj WHERE handle = ?", (key_u64(handle),)).fetchone()
        assert row, "object %016x not in %s/store.db" % (handle, data_dir)
        ext = con.execute("SELECT off, ag, agbno, len FROM bmap WHERE nid = ? ORDER BY off",
                          (row[0],)).fetchall()
        return agb, ext
    finally:
        con.close()


def flip(data_dir, pblock, at=100, n=16):
    """Inverts @n bytes of physical block @pblock of data_dir/blocks."""
    path = os.path.join(data_dir, "blocks")
    with open(path, "r+b") as f:
        f.seek(pblock * BLOCK + at)
        old = f.read(n)
        f.seek(pblock * BLOCK + at)
        f.write(bytes(b ^ 0xff for b in old))
    return old


def cat(c, path):
    p = subprocess.run([ORCHARD, "-c", c.conf, "cat", path], capture_output=True, timeout=60)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def store_check(data_dir, data):
    args = [STORE_CHECK] + (["--data"] if data else []) + [data_dir]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def pick_blocks(ext, n):
    """@n distinct object blocks (off, physical offset in AG terms) from the
    extents, away from the first and last block."""
    blocks = []
    for off, ag, agbno, ln in ext:
        for i in range(ln):
            blocks.append((off + i, ag, agbno + i))
    blocks = blocks[1:-1]
    return random.Random(7).sample(blocks, n)


def mismatch_logged(c, name, handle, local_off, pblock):
    """The log line store.h promises (object, offset, physical block)."""
    pat = re.compile(r"checksum mismatch: object ([0-9a-f]{16}) offset (\d+) "
                     r"\(physical block (\d+)\)")
    found = [m.groups() for m in pat.finditer(c.log_text(name))]
    want = ("%016x" % handle, str(local_off), str(pblock))
    return want in found, found


def test_flipped_block_reads_eio(tmp_path):
    assert os.path.exists(STORE_CHECK), "build it: make " + STORE_CHECK
    c = Cluster(tmp_path / "c", nservers=2)
    c.start_all()
    try:
        data = random.Random(3).randbytes(FILE_SIZE)
        src = tmp_path / "src"
        src.write_bytes(data)
        c.cli("put", str(src), "/f")
        c.cli("put", str(src), "/g")
        f = stat_layout(c, "/f")
        assert f["stripe_count"] == 2
        victim, vidx = "s1", 1
        ddir = os.path.join(c.dir, victim)
        agb, ext = store_extents(ddir, f["handle"])
        assert ext, "no extents"
        assert sum(e[3] for e in ext) == FILE_SIZE // 2 // BLOCK
        (b1, ag1, agbno1), (b2, ag2, agbno2) = pick_blocks(ext, 2)
        p1, p2 = ag1 * agb + agbno1, ag2 * agb + agbno2
        fo1, fo2 = file_offset(f, vidx, b1 * BLOCK), file_offset(f, vidx, b2 * BLOCK)

        # 1. The server is running: the change reaches it through the page cache.
        flip(ddir, p1)
        with Op(c) as op:
            try:
                r = op.read("/f", fo1, BLOCK)
                raise AssertionError("read of the damaged block succeeded (%s)" % (
                    "same bytes as written" if r.get("data") == data[fo1:fo1 + BLOCK]
                    else "different bytes: garbage returned"))
            except OpError as e:
                assert e.errname == "EIO", e
            # A read that covers it partly fails too.
            op.err("EIO", "read", "/f", fo1 + 1000, 100)
            # Other ranges, on either server, still read fine.
            for off in (0, fo2, fo1 + BLOCK if (fo1 + BLOCK) % f["strip_size"] else fo1 - BLOCK,
                        FILE_SIZE - 5000):
                r = op.read("/f", off, 4096)
                assert r["data"] == data[off:off + 4096], off
            r = op.read("/g", fo1, BLOCK)
            assert r["data"] == data[fo1:fo1 + BLOCK]
        rc, out, err = cat(c, "/f")
        assert rc != 0 and "Input/output error" in err, (rc, err)
        assert c.alive(victim)
        rc, out, err = cat(c, "/g")
        assert rc == 0 and out == data, err
        ok, found = mismatch_logged(c, victim, f["handle"], b1 * BLOCK, p1)
        assert ok, "no 'checksum mismatch: object %016x offset %d (physical block %d)' " \
            "in the %s log; found %r" % (f["handle"], b1 * BLOCK, p1, victim, found)
        s = {x["name"]: x for x in c.stats()["servers"]}
        store_stats = s[victim].get("store", {})
        if "csum_errors" in store_stats:
            assert store_stats["csum_errors"] >= 1, store_stats

        # 2. Stopped: the checker reports I17 for exactly that block, and
        # nothing without --data (the metadata is fine).
        c.stop(victim)
        r = store_check(ddir, data=False)
        assert r.returncode == 0, r.stdout + r.stderr
        r = store_check(ddir, data=True)
        assert r.returncode == 1, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        assert all(ln.startswith("I17 ") for ln in lines), r.stdout
        assert any("ag=%d block=%d " % (ag1, agbno1) in ln for ln in lines), r.stdout
        assert len(lines) == 1, r.stdout

        # 3. Damage while stopped; after a restart (cold cache) it fails too.
        flip(ddir, p2, at=4000, n=1)
        c.start(victim)
        with Op(c) as op:
            op.err("EIO", "read", "/f", fo2, BLOCK)
            op.err("EIO", "read", "/f", fo1, BLOCK)
            r = op.read("/f", 0, 4096)
            assert r["data"] == data[:4096]
        ok, found = mismatch_logged(c, victim, f["handle"], b2 * BLOCK, p2)
        assert ok, "no mismatch line for the second block; found %r" % (found,)

        # 4. Overwriting a damaged block whole heals it (new blocks, new sums).
        with Op(c) as op:
            op.write("/f", fo1, data[fo1:fo1 + BLOCK])
            r = op.read("/f", fo1, BLOCK)
            assert r["data"] == data[fo1:fo1 + BLOCK]
            # A partial overwrite must merge with the damaged block: EIO, and
            # nothing changes.
            op.err("EIO", "write", "/f", fo2 + 10, 5)
        c.stop(victim)
        r = store_check(ddir, data=True)
        assert r.returncode == 1 and len(r.stdout.splitlines()) == 1, r.stdout
        assert "ag=%d block=%d " % (ag2, agbno2) in r.stdout, r.stdout
    finally:
        c.stop_all()


STORE_HACK = os.path.join(BUILDDIR, "tests", "store-hack")


def test_moved_bmap_record_reads_eio(tmp_path):
    """A damaged record must never make a read return another file's bytes:
    a bmap record moved onto another object's extent.

    Checksums are keyed by physical block, so the moved record's blocks
    match their checksums: only the record's own CRC (stale) or, once that
    is made to match, the rmap (one probe per extent) can tell.  Either
    way the read fails with EIO and never returns the other file's bytes;
    the log names the record, and the checker reports it."""
    assert os.path.exists(STORE_HACK), "build it: make " + STORE_HACK
    c = Cluster(tmp_path / "c", nservers=1)
    c.start_all()
    try:
        size = 64 << 10
        for name, byte in (("a", b"A"), ("b", b"B")):
            (tmp_path / name).write_bytes(byte * size)
            c.cli("put", str(tmp_path / name), "/" + name)
        ha, hb = stat_layout(c, "/a")["handle"], stat_layout(c, "/b")["handle"]
        assert cat(c, "/a")[:2] == (0, b"A" * size)
        ddir = os.path.join(c.dir, "s0")
        bad_line = re.compile(r"corrupt record: table=bmap nid=\d+ off=0.* object=%016x " % ha)
        for mode, rule in (("stale", "crc "), ("crc", "I8 ")):
            c.stop("s0")
            h = subprocess.run([STORE_HACK, ddir, "move-bmap", hex(ha), hex(hb), mode],
                               capture_output=True, text=True)
            assert h.returncode == 0 and h.stdout.strip() == "1", h.stdout + h.stderr
            assert store_extents(ddir, ha)[1][0][1:3] == store_extents(ddir, hb)[1][0][1:3]
            r = store_check(ddir, data=False)
            assert r.returncode == 1 and any(ln.startswith(rule) for ln in
                                             r.stdout.splitlines()), r.stdout + r.stderr
            c.start("s0")
            rc, out, err = cat(c, "/a")
            assert b"B" not in out, "the other file's bytes were returned (%s)" % mode
            assert rc != 0 and "Input/output error" in err, (mode, rc, err)
            with Op(c) as op:
                op.err("EIO", "read", "/a", 0, BLOCK)
                r = op.read("/b", 0, BLOCK)
                assert r["data"] == b"B" * BLOCK
            assert bad_line.search(c.log_text("s0")), (mode, c.log_tail("s0"))
            assert c.server_stats()["s0"]["store"]["bad_records"] >= 1, c.server_stats()["s0"]
            assert c.alive("s0")
    finally:
        c.stop_all(check_logs=False)
