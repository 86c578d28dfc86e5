"""orchard fsmap and whoowns on a live cluster (docs/ADMIN.md).

Files are written through the cluster; the map of each server must name
every file by path with the right file byte ranges (checked against the
store's own extent map and the file's layout), list static metadata and
free space, and add up to the store's size.  whoowns of one data block
names the file and the byte range that block holds.
"""
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from cluster import Cluster, stat_layout  # noqa: E402
from test_store_corrupt import BLOCK, file_offset, store_extents  # noqa: E402

AG_BLOCKS = 4096


def fsmap(c, name, *args):
    return json.loads(c.cli("fsmap", name, "--json", *args).stdout)


def expected_ranges(c, name, idx, f, path):
    """{(physical block, file byte offset)} of every block @path has on @name."""
    if orch_layout_local_size(f, path_size(c, path), idx) == 0:
        return set()
    agb, ext = store_extents(os.path.join(c.dir, name), f["handle"])
    out = set()
    for off, ag, agbno, ln in ext:
        for i in range(ln):
            out.add((ag * agb + agbno + i, file_offset(f, idx, (off + i) * BLOCK)))
    return out


def path_size(c, path):
    return int(re.search(r"Size:\s+(\d+)", c.cli("stat", path).stdout).group(1))


def orch_layout_local_size(f, size, idx):
    """Bytes of the file's object on server @idx (layout.c)."""
    ss, cnt, first = f["strip_size"], f["stripe_count"], f["first_server"]
    row, slot = ss * cnt, (idx - first) % cnt
    local = size // row * ss
    rem = size % row
    if rem > slot * ss:
        local += min(rem - slot * ss, ss)
    return local


def mapped_ranges(m, path):
    out = set()
    for r in m["records"]:
        if path in r.get("paths", []):
            for i in range(r["len"]):
                out.add((r["start"] + i, r["offset"] + i * BLOCK))
    return out


def test_fsmap_names_every_file(tmp_path):
    c = Cluster(tmp_path / "c", nservers=2, ag_blocks=AG_BLOCKS)
    c.start_all()
    try:
        rnd = random.Random(5)
        files = {"/top": 300000, "/d/e/deep": 1 << 20, "/d/small": 5000}
        c.cli("mkdir", "-p", "/d/e")
        for path, size in files.items():
            src = tmp_path / "src"
            src.write_bytes(rnd.randbytes(size))
            c.cli("put", str(src), path)
        c.cli("ln", "/d/small", "/d/e/hard")
        layouts = {p: stat_layout(c, p) for p in files}
        for idx, name in enumerate(c.names):
            m = fsmap(c, name)
            assert m["complete"]
            # Every block once (no sharing here): the lengths add up.
            assert m["total"] == m["blocks"] == sum(r["len"] for r in m["records"])
            assert m["free"] + m["static"] + m["data"] + m["bad"] == m["blocks"]
            owners = {r["owner"] for r in m["records"]}
            assert "free space" in owners and "static metadata" in owners
            assert m["records"][0]["owner"] == "static metadata"
            assert m["records"][0]["start"] == 0
            starts = [r["start"] for r in m["records"]]
            assert starts == sorted(starts)
            for path, f in layouts.items():
                want = expected_ranges(c, name, idx, f, path)
                got = mapped_ranges(m, path)
                if path == "/d/small":
                    # Two links: both paths are named on the record.
                    got |= mapped_ranges(m, "/d/e/hard")
                assert got == want, (name, path)
            # Text output: one line per record, the paths in it.
            out = c.cli("fsmap", name).stdout
            assert "static metadata" in out and "free space" in out
            v = c.cli("fsmap", name, "-v").stdout
            assert "AG-OFFSET" in v and "total %d blocks" % m["blocks"] in v
        # A range: only what overlaps it, clipped.
        m = fsmap(c, "s0", "--range", "1:3")
        assert sum(r["len"] for r in m["records"]) == 3
        assert all(1 <= r["start"] <= 3 for r in m["records"])
    finally:
        c.stop_all()


def test_whoowns_names_the_file(tmp_path):
    c = Cluster(tmp_path / "c", nservers=2, ag_blocks=AG_BLOCKS)
    c.start_all()
    try:
        src = tmp_path / "src"
        src.write_bytes(random.Random(9).randbytes(400000))
        c.cli("mkdir", "/dir")
        c.cli("put", str(src), "/dir/file")
        f = stat_layout(c, "/dir/file")
        agb, ext = store_extents(os.path.join(c.dir, "s1"), f["handle"])
        off, ag, agbno, ln = ext[0]
        pblock = ag * agb + agbno + 1
        fo = file_offset(f, 1, (off + 1) * BLOCK)
        out = c.cli("whoowns", "s1", str(pblock)).stdout
        assert "/dir/file %d..%d" % (fo, fo + BLOCK - 1) in out, out
        assert "[%d..%d]" % (pblock, pblock) in out, out
        out = c.cli("whoowns", "s1", "0").stdout
        assert "static metadata" in out
        # Usage errors and an unknown server.
        assert c.cli("whoowns", "s1", check=False).returncode == 2
        assert c.cli("whoowns", "s1", "x:y", check=False).returncode == 2
        assert c.cli("fsmap", "nosuch", check=False).returncode == 2
    finally:
        c.stop_all()
