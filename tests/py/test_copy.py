"""Server-side copy_file_range (CL2SV_COPY_RANGE): each server copies the
source strips it holds to wherever the destination's layout puts them.  The
result must equal a byte model for any offsets, across strips and servers,
past the source's end, and into holes; and no data goes through the client."""
import os
import random

from cluster import dirs_on_two_servers, stat_layout
from op import Op


def model_copy(src, dst, off_in, off_out, length):
    n = max(0, min(length, len(src) - off_in))
    if n == 0:
        return dst, 0
    if len(dst) < off_out:
        dst = dst + bytes(off_out - len(dst))
    dst = dst[:off_out] + src[off_in:off_in + n] + dst[off_out + n:]
    return dst, n


def get(c, tmp_path, path):
    out = tmp_path / "got"
    c.cli("get", path, str(out))
    return out.read_bytes()


def test_copy_range_matches_model(cluster3, tmp_path):
    c = cluster3
    rnd = random.Random(7)
    # Two directories on different servers, so the files' layouts differ
    # in their first server.
    da, db = dirs_on_two_servers(c)
    src = rnd.randbytes(3 * 65536 * 3 + 12345)
    (tmp_path / "src").write_bytes(src)
    c.cli("put", str(tmp_path / "src"), da + "/src")
    dst = rnd.randbytes(100000)
    (tmp_path / "dst").write_bytes(dst)
    c.cli("put", str(tmp_path / "dst"), db + "/dst")
    writes_before = sum(s["requests"].get("CL2SV_WRITE", 0) for s in c.stats()["servers"])
    cases = [(0, 0, len(src)), (1, 65535, 200000), (65536 * 2 - 7, 5, 70000),
             (len(src) - 10, 300000, 100), (len(src) + 5, 0, 10), (12345, 777777, 65536 * 4)]
    cases += [(rnd.randrange(len(src)), rnd.randrange(900000), rnd.randrange(300000))
              for _ in range(10)]
    with Op(c) as op:
        for off_in, off_out, length in cases:
            r = op.call("copy", da + "/src", off_in, db + "/dst", off_out, length)
            dst, n = model_copy(src, dst, off_in, off_out, length)
            assert r["copied"] == n
            got = get(c, tmp_path, db + "/dst")
            assert len(got) == len(dst), (off_in, off_out, length)
            assert got == dst, (off_in, off_out, length)
        # A copy onto itself, overlapping ranges excluded (as Linux refuses them).
        op.call("copy", da + "/src", 0, da + "/src", len(src) + 65536, 65536)
        src2 = src + bytes(65536) + src[:65536]
        assert get(c, tmp_path, da + "/src") == src2
    stats = c.stats()["servers"]
    writes_after = sum(s["requests"].get("CL2SV_WRITE", 0) for s in stats)
    assert writes_after == writes_before, "copy went through the client"
    assert sum(s["requests"].get("CL2SV_COPY_RANGE", 0) for s in stats) > 0
    assert sum(s["requests"].get("SV2SV_WRITE", 0) for s in stats) > 0


def test_copy_range_same_layout_whole_rows(cluster3, tmp_path):
    """Files of one layout, ranges a whole number of stripe rows apart: each
    server clones its part of the range in one piece.  Offsets that are
    not, and unaligned lengths and ends, still match the byte model."""
    c = cluster3
    rnd = random.Random(11)
    src = rnd.randbytes(5 * 65536 * 3 + 777)
    (tmp_path / "src").write_bytes(src)
    c.cli("put", str(tmp_path / "src"), "/src")
    c.cli("clone", "/src", "/dst")          # a file of the same layout
    lay = stat_layout(c, "/src")
    assert lay == dict(stat_layout(c, "/dst"), handle=lay["handle"])
    row = 65536 * 3
    dst = src
    cases = [(0, 0, len(src)), (0, row, len(src)), (row, 0, 2 * row + 5), (4096, row + 4096, 9000),
             (row * 2, row * 5, row * 10), (123, row + 123, 70000), (0, 2 * row, 100)]
    with Op(c) as op:
        for off_in, off_out, length in cases:
            r = op.call("copy", "/src", off_in, "/dst", off_out, length)
            dst, n = model_copy(src, dst, off_in, off_out, length)
            assert r["copied"] == n
            got = get(c, tmp_path, "/dst")
            assert got == dst, (off_in, off_out, length)
    r = c.cli("scrub", "--all", "--data", check=False)
    assert r.returncode == 0, r.stdout + r.stderr
