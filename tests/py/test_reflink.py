"""Reflink clones and dedupe on a real cluster (docs/SPEC-store.md, I23-I25):
cp on the mount and `orchard clone` share the source's blocks on every
server (df does not move, fsmap lists each shared range once per owner),
a write to either copy changes only that copy, and `orchard dedupe` shares
identical files' blocks and refuses different ones.  Scrub stays clean."""
import json
import os
import subprocess

import pytest

from cluster import dirs_on_two_servers
from mount import Mount

MiB = 1 << 20


@pytest.fixture
def mnt(cluster3, tmp_path):
    m = Mount(cluster3, str(tmp_path / "mnt"))
    m.start()
    yield m
    m.stop()


def store_free(c):
    """Free bytes of every server's store, from statfs (what df shows)."""
    out = c.cli("df").stdout.splitlines()[1].split()
    return int(out[3]) * 1024


def fsmap_owners(c, server):
    """{path: blocks} of the data owners in one server's fsmap."""
    rows = json.loads(c.cli("fsmap", server, "--json").stdout)["records"]
    owners = {}
    for r in rows:
        for p in r.get("paths", [])[:1]:
            owners[p] = owners.get(p, 0) + r["len"]
    return owners


def scrub_clean(c):
    r = c.cli("scrub", "--all", "--data", check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_cp_shares_blocks_and_copies_on_write(cluster3, mnt):
    c = cluster3
    da, db = dirs_on_two_servers(c)
    data = os.urandom(8 * MiB + 12345)
    with open(mnt.path(da[1:], "src"), "wb") as f:
        f.write(data)
    subprocess.run(["sync"], check=True)
    free0 = store_free(c)
    before = mnt.server_requests()
    # A destination in a directory whose files start on another server: it
    # takes the source's layout, so every strip is shared where it lies.
    subprocess.run(["cp", mnt.path(da[1:], "src"), mnt.path(db[1:], "dst")], check=True)
    after = mnt.server_requests()
    assert after.get("CL2SV_COPY_RANGE", 0) > before.get("CL2SV_COPY_RANGE", 0)
    assert after.get("CL2SV_WRITE", 0) == before.get("CL2SV_WRITE", 0)
    assert store_free(c) >= free0 - 64 * 1024, "cp used data blocks"
    with open(mnt.path(db[1:], "dst"), "rb") as f:
        assert f.read() == data
    # Every server lists the shared blocks once for each file.
    for name in c.names:
        owners = fsmap_owners(c, name)
        src, dst = owners.get(da + "/src", 0), owners.get(db + "/dst", 0)
        assert src == dst and src > 0, (name, owners)

    # Copy-on-write: an unaligned overwrite of the copy changes only the copy.
    patch = os.urandom(10000)
    with open(mnt.path(db[1:], "dst"), "r+b") as f:
        f.seek(MiB + 100)
        f.write(patch)
    subprocess.run(["sync"], check=True)
    mine = data[:MiB + 100] + patch + data[MiB + 100 + len(patch):]
    with open(mnt.path(db[1:], "dst"), "rb") as f:
        assert f.read() == mine
    with open(mnt.path(da[1:], "src"), "rb") as f:
        assert f.read() == data
    assert free0 - 64 * 1024 <= store_free(c) + 0 <= free0
    scrub_clean(c)

    # The last owner frees: the copy outlives its source, then goes too.
    os.unlink(mnt.path(da[1:], "src"))
    with open(mnt.path(db[1:], "dst"), "rb") as f:
        assert f.read() == mine
    os.unlink(mnt.path(db[1:], "dst"))
    subprocess.run(["sync"], check=True)
    scrub_clean(c)


def layout(c, path):
    return c.cli("stat", path).stdout.split("Layout: ")[1].split("\n")[0]


def put_like(c, local, like, prefix):
    """Puts @local at the first @prefix<i> whose layout is @like's: blocks
    can only be shared on one server, so dedupe needs equal layouts."""
    want = layout(c, like)
    for i in range(64):
        path = "%s%d" % (prefix, i)
        c.cli("put", local, path)
        if layout(c, path) == want:
            return path
        c.cli("rm", path)
    raise AssertionError("no name gave the layout " + want)


def test_orchard_clone_and_dedupe(cluster3, tmp_path):
    c = cluster3
    data = os.urandom(5 * MiB + 777)
    (tmp_path / "local_a").write_bytes(data)
    c.cli("mkdir", "/x")
    c.cli("put", str(tmp_path / "local_a"), "/x/a")
    free0 = store_free(c)

    out = c.cli("clone", "/x/a", "/b").stdout
    assert "bytes shared" in out
    assert store_free(c) >= free0 - 64 * 1024
    c.cli("get", "/b", str(tmp_path / "local_b"))
    assert (tmp_path / "local_b").read_bytes() == data
    # Over an existing file: replaced whole, by rename, no helper file left.
    c.cli("clone", "/x/a", "/b")
    c.cli("get", "/b", str(tmp_path / "local_b"))
    assert (tmp_path / "local_b").read_bytes() == data
    assert ".orchard-clone" not in c.cli("ls", "/").stdout
    assert store_free(c) >= free0 - 64 * 1024

    # A second copy written the ordinary way uses space; dedupe gives it back.
    cpath = put_like(c, str(tmp_path / "local_a"), "/x/a", "/x/c")
    assert store_free(c) <= free0 - 5 * MiB
    r = c.cli("dedupe", "/x/a", cpath)
    deduped = int(r.stdout.split("deduplicated ")[1].split()[0])
    assert len(data) - 3 * 4096 <= deduped <= len(data)
    assert store_free(c) >= free0 - 3 * 4096 - 64 * 1024
    c.cli("get", cpath, str(tmp_path / "local_c"))
    assert (tmp_path / "local_c").read_bytes() == data

    # Different contents: nothing changes, exit 1.
    other = bytearray(data)
    other[3 * MiB] ^= 0xff
    (tmp_path / "local_d").write_bytes(bytes(other))
    dpath = put_like(c, str(tmp_path / "local_d"), "/x/a", "/x/d")
    free1 = store_free(c)
    r = c.cli("dedupe", "/x/a", dpath, check=False)
    assert r.returncode == 1 and "contents differ" in r.stderr
    assert store_free(c) == free1
    # ...but the equal first megabytes can be shared alone.
    r = c.cli("dedupe", "/x/a", dpath, "--range", "0:2M")
    assert "deduplicated %d bytes" % (2 * MiB) in r.stdout

    # --scan finds the identical file among the others.
    epath = put_like(c, str(tmp_path / "local_a"), "/x/a", "/x/e")
    free2 = store_free(c)
    r = c.cli("dedupe", "--scan", "/")
    saved = int(r.stdout.split("blocks: ")[1].split()[0])
    assert saved >= len(data) - 3 * 4096, r.stdout
    assert store_free(c) - free2 >= len(data) - 3 * 4096
    c.cli("get", epath, str(tmp_path / "local_e"))
    assert (tmp_path / "local_e").read_bytes() == data
    scrub_clean(c)

    r = c.cli("dedupe", "/x/a", check=False)
    assert r.returncode == 2


def test_dedupe_sparse_files(cluster3, tmp_path):
    """Holes and strips a server holds nothing of compare as zeros: two
    equal sparse files dedupe, and the written blocks are shared."""
    c = cluster3
    data = os.urandom(64 * 1024)
    (tmp_path / "small").write_bytes(data)
    c.cli("put", str(tmp_path / "small"), "/s0")
    other = put_like(c, str(tmp_path / "small"), "/s0", "/s1")
    for p in ("/s0", other):
        c.cli("truncate", "-s", "1M", p)
    r = c.cli("dedupe", "/s0", other)
    assert int(r.stdout.split("deduplicated ")[1].split()[0]) >= len(data) - 3 * 4096
    c.cli("get", other, str(tmp_path / "back"))
    assert (tmp_path / "back").read_bytes() == data + bytes((1 << 20) - len(data))
    scrub_clean(c)


# --- dedupe --scan: identical blocks found by their stored checksums ---------

def crc32c(data, crc=0):
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc


def crc32c_twin(block):
    """A block of the same length and CRC-32C as @block, other bytes: its
    last 4 bytes are solved for (the CRC is affine in the message)."""
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    by_top = {t >> 24: i for i, t in enumerate(table)}

    def run(reg, data):
        for b in data:
            reg = table[(reg ^ b) & 0xff] ^ (reg >> 8)
        return reg

    head = bytes(b ^ 0x5a for b in block[:-4])
    want = run(0xffffffff, block)          # the register after @block
    idx, reg = [], want
    for _ in range(4):                     # walk the register back 4 bytes
        j = by_top[reg >> 24]
        idx.append(j)
        reg = ((reg ^ table[j]) << 8) & 0xffffffff
    reg, tail = run(0xffffffff, head), []
    for j in reversed(idx):
        b = (reg ^ j) & 0xff
        tail.append(b)
        reg = table[(reg ^ b) & 0xff] ^ (reg >> 8)
    twin = head + bytes(tail)
    assert twin != block and run(0xffffffff, twin) == want
    return twin


def blocks_freeable(files):
    """Blocks a perfect per-server dedupe frees, for files that share
    nothing yet: {server: [block contents]}, summed over the files given as
    (bytes, layout) pairs."""
    per_server = {}
    for data, lay in files:
        strip, count, first = lay["strip_size"], lay["stripe_count"], lay["first_server"]
        for off in range(0, len(data) - 4095, 4096):
            server = (first + off // strip) % count
            per_server.setdefault(server, []).append(data[off:off + 4096])
    return sum(len(v) - len(set(v)) for v in per_server.values())


def test_dedupe_scan_finds_identical_blocks(cluster3, tmp_path):
    """--scan shares identical blocks inside and across files (not only
    whole twins), exactly as many as a per-server model says, leaves every
    byte as it was, and never shares two blocks whose checksums match but
    whose bytes differ.  A second scan finds nothing more."""
    from cluster import stat_layout
    c = cluster3
    c.cli("mkdir", "/d")
    row = 3 * 64 * 1024
    r = os.urandom(row)
    block = os.urandom(4096)
    # x: one row twice (same servers, one row apart), then a block and its
    # CRC twin one row apart, then a random tail.
    x = r + r + block + os.urandom(row - 4096) + crc32c_twin(block) + os.urandom(5000)
    (tmp_path / "x").write_bytes(x)
    c.cli("put", str(tmp_path / "x"), "/d/x")
    # y: x's layout, its first 8 KiB different, then x's bytes at x's offsets.
    y = os.urandom(8192) + x[8192:3 * row]
    (tmp_path / "y").write_bytes(y)
    ypath = put_like(c, str(tmp_path / "y"), "/d/x", "/d/y")
    # z: whatever layout its name gives; 200 KiB of zeros written out.
    z = bytes(200 * 1024)
    (tmp_path / "z").write_bytes(z)
    c.cli("put", str(tmp_path / "z"), "/d/z")
    subprocess.run(["sync"], check=True)
    want = blocks_freeable([(x, stat_layout(c, "/d/x")), (y, stat_layout(c, ypath)),
                            (z, stat_layout(c, "/d/z"))])
    assert want > 100

    free0 = store_free(c)
    out = c.cli("dedupe", "--scan", "/d").stdout
    deduped = int(out.split("blocks: ")[1].split()[0])
    assert deduped == want * 4096, out
    assert "1 blocks had equal checksums but different bytes" in out, out
    assert store_free(c) - free0 == want * 4096
    for name, data in (("/d/x", x), (ypath, y), ("/d/z", z)):
        c.cli("get", name, str(tmp_path / "back"))
        assert (tmp_path / "back").read_bytes() == data, name
    out = c.cli("dedupe", "--scan", "/").stdout
    assert " 0 bytes deduplicated" in out, out
    scrub_clean(c)


def test_dedupe_runs_beside_the_loop(tmp_path):
    """A dedupe runs on the server's data worker: while one is held there
    (a test gate, ORCH_TEST_WORK_GATE), the server keeps answering other
    requests; released, it completes."""
    from cluster import ORCHARD, Cluster, wait_until
    c = Cluster(tmp_path / "c", nservers=1)
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    c.start("s0", env={"ORCH_TEST_WORK_GATE": gate})
    w = p = None
    try:
        data = os.urandom(MiB)
        (tmp_path / "a").write_bytes(data)
        c.cli("put", str(tmp_path / "a"), "/a")
        c.cli("put", str(tmp_path / "a"), "/b")
        p = subprocess.Popen([ORCHARD, "-c", c.conf, "dedupe", "/a", "/b"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def worker_holds_a_job():
            nonlocal w
            try:   # succeeds once the worker opened the gate: a job waits there
                w = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                return False
            return True
        wait_until(worker_holds_a_job, what="the dedupe to reach the data worker")
        # Held; the loop answers a read and the stats meanwhile.
        c.cli("get", "/a", str(tmp_path / "back"))
        assert (tmp_path / "back").read_bytes() == data
        assert c.requests().get("CL2SV_DEDUPE", 0) == 1
        assert p.poll() is None
        os.write(w, b"xx")   # the compare pass, then the share pass
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert "deduplicated %d bytes" % MiB in out
    finally:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()
        if w is not None:
            os.close(w)
        c.stop_all()
