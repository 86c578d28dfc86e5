"""orchard scrub on live servers (docs/ADMIN.md).

* a cluster under a writer is clean, and scrub exits 0;
* a flipped data block: `scrub --all --data` exits 1 and names the file,
  its hard link and a clone sharing the block, with the byte range; the
  server log names them too, the read gives EIO, and the block is
  quarantined: retired, never reused, when its files are gone;
* a stopped server makes scrub exit 4; usage errors exit 8;
* faults put into one server's meta.db while it is stopped are reported
  with their rule.
"""
import json
import os
import random
import re
import sqlite3
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from cluster import Cluster, stat_layout, wait_until  # noqa: E402
from test_store_corrupt import BLOCK, file_offset, flip, store_extents  # noqa: E402

AG_BLOCKS = 4096


def scrub(c, *args):
    return c.cli("scrub", *args, check=False, timeout=300)


def test_scrub_clean_while_writing(tmp_path):
    c = Cluster(tmp_path / "c", nservers=3, ag_blocks=AG_BLOCKS)
    c.start_all()
    stop = threading.Event()
    errors = []

    def writer():
        rnd = random.Random(1)
        i = 0
        while not stop.is_set():
            src = tmp_path / ("w%d" % (i % 2))
            src.write_bytes(rnd.randbytes(rnd.randint(1, 300000)))
            r = c.cli("put", str(src), "/w/f%d" % (i % 7), check=False)
            if r.returncode:
                errors.append(r.stderr)
            if i % 3 == 2:
                c.cli("rm", "/w/f%d" % ((i + 3) % 7), check=False)
            i += 1

    try:
        c.cli("mkdir", "/w")
        t = threading.Thread(target=writer)
        t.start()
        try:
            wait_until(lambda: len(c.cli("ls", "/w").stdout.split()) >= 3, 30, what="files")
            for args in (("--all",), ("--all", "--data", "--rate", "0"), ("--all", "--json")) * 3:
                r = scrub(c, *args)
                assert r.returncode == 0, (args, r.stdout, r.stderr)
            doc = json.loads(r.stdout)
            assert doc["status"] == 0
            assert [s["name"] for s in doc["servers"]] == c.names
            assert all(s["up"] and s["errors"] == 0 for s in doc["servers"])
        finally:
            stop.set()
            t.join()
        assert not errors, errors[:3]
        r = scrub(c, "s1")
        assert r.returncode == 0 and "s1: clean" in r.stdout, r.stdout + r.stderr
    finally:
        c.stop_all()


def test_scrub_bad_block_names_the_file(tmp_path):
    c = Cluster(tmp_path / "c", nservers=2, ag_blocks=AG_BLOCKS)
    c.start_all()
    try:
        data = random.Random(3).randbytes(1 << 20)
        src = tmp_path / "src"
        src.write_bytes(data)
        c.cli("mkdir", "/dir")
        c.cli("put", str(src), "/dir/file")
        c.cli("ln", "/dir/file", "/link")
        c.cli("clone", "/dir/file", "/dir/clone")   # shares every block
        f = stat_layout(c, "/dir/file")
        agb, ext = store_extents(os.path.join(c.dir, "s1"), f["handle"])
        off, ag, agbno, ln = ext[0]
        pblock = ag * agb + agbno + 2
        fo = file_offset(f, 1, (off + 2) * BLOCK)
        want = "/dir/file bytes %d..%d" % (fo, fo + BLOCK - 1)
        flip(os.path.join(c.dir, "s1"), pblock)

        # Without --data the indexes are fine.
        r = scrub(c, "--all")
        assert r.returncode == 0, r.stdout + r.stderr
        r = scrub(c, "--all", "--data")
        assert r.returncode == 1, r.stdout + r.stderr
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("s1: I17")]
        assert len(line) == 1, r.stdout
        assert "block %d" % (pblock % agb) in line[0] and want in line[0], line
        assert "/link bytes %d..%d" % (fo, fo + BLOCK - 1) in line[0], line
        assert "/dir/clone bytes %d..%d" % (fo, fo + BLOCK - 1) in line[0], line
        assert "s0: clean" in r.stdout
        doc = json.loads(scrub(c, "--all", "--data", "--json").stdout)
        assert doc["status"] == 1
        s1 = [s for s in doc["servers"] if s["name"] == "s1"][0]
        assert s1["errors"] == 1
        fnd = s1["report"]["findings"][0]
        assert fnd["rule"] == "I17" and fnd["ag"] == ag and want in fnd["owners"], fnd
        # The server log names the file too.
        wait_until(lambda: want in c.log_text("s1"), 10, what="bad block log line")
        # And the read fails.
        p = c.cli("cat", "/dir/file", check=False)
        assert p.returncode != 0 and "Input/output error" in p.stderr
        assert c.alive("s1")

        # Quarantined: recorded as bad now, retired (never reused) once the
        # last file holding it is gone.
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(c.dir, "s1", "store.db"),
                             uri=True)
        try:
            bad = db.execute("SELECT ag, agbno, len FROM bad").fetchall()
        finally:
            db.close()
        assert (ag, pblock % agb, 1) in bad, bad
        for path in ("/dir/clone", "/dir/file", "/link"):
            c.cli("rm", path)

        def retired():
            doc = json.loads(c.cli("fsmap", "s1", "--range", "%d:%d" % (pblock, pblock),
                                   "--json").stdout)
            return [r["owner"] for r in doc["records"]] == ["bad blocks"]
        wait_until(retired, 15, what="the bad block retired")
        r = scrub(c, "--all")
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        c.stop_all()


def test_scrub_exit_codes(tmp_path):
    c = Cluster(tmp_path / "c", nservers=2)
    c.start_all()
    try:
        for args in ((), ("s0", "--all"), ("--bogus",), ("--all", "--rate", "x"),
                     ("nosuch",), ("s0", "s1")):
            r = scrub(c, *args)
            assert r.returncode == 8, (args, r.returncode, r.stderr)
        c.stop("s1")
        r = scrub(c, "--all")
        assert r.returncode == 4, r.stdout + r.stderr
        assert "s0: clean" in r.stdout and "s1" in r.stderr
        assert scrub(c, "s0").returncode == 0
        assert scrub(c, "s1").returncode == 4
    finally:
        c.stop_all()


def test_scrub_namespace_faults(tmp_path):
    # reclaim_orphans off: the servers would otherwise delete /b's data
    # objects (tests/py/test_orphans.py) before scrub could report them.
    c = Cluster(tmp_path / "c", nservers=2, extra="\n[cluster]\nreclaim_orphans = 0\n")
    c.start_all()
    try:
        src = tmp_path / "src"
        src.write_bytes(random.Random(4).randbytes(200000))
        c.cli("put", str(src), "/a")
        c.cli("put", str(src), "/b")
        ha = stat_layout(c, "/a")["handle"]
        hb = stat_layout(c, "/b")["handle"]
        assert ha >> 48 == 0 and hb >> 48 == 0   # the root's entries are on s0
        assert scrub(c, "--all").returncode == 0
        c.stop("s0")
        db = sqlite3.connect(os.path.join(c.dir, "s0", "meta.db"))
        with db:
            db.execute("INSERT INTO dirent (parent, name, child, type, seq, state)"
                       " VALUES (1, x'67686f7374', 999999, 32768, 999999, 0)")
            db.execute("UPDATE inode SET nlink = 5 WHERE handle = ?", (ha,))
            db.execute("DELETE FROM inode WHERE handle = ?", (hb,))
        db.close()
        c.start("s0")
        r = scrub(c, "--all")
        assert r.returncode == 1, r.stdout + r.stderr
        out = r.stdout
        assert re.search(r"s0: N1 dirent handle 0xf423f: entry 'ghost' .* does not exist", out), out
        assert re.search(r"s0: N2 inode handle %#x: .*nlink 5 but 1 entries" % ha, out), out
        assert re.search(r"s0: N1 dirent handle %#x: entry 'b'" % hb, out), out
        # /b's data objects (on both servers) have lost their inode.
        for name in c.names:
            assert re.search(r"%s: N6 obj handle %#x: data object" % (name, hb), out), out
    finally:
        c.stop_all()


def test_scrub_name_held_twice_across_servers(tmp_path):
    """A file (inode on s0, nlink 1) named by its entry on s0 and by one more
    on s1, as a torn cross-server rename could leave it: the link-count rule
    must count the entries on other servers even when the local ones alone
    match nlink."""
    c = Cluster(tmp_path / "c", nservers=2)
    c.start_all()
    try:
        src = tmp_path / "src"
        src.write_bytes(b"x" * 5000)
        c.cli("put", str(src), "/f")
        hf = stat_layout(c, "/f")["handle"]
        assert hf >> 48 == 0
        # A directory held by s1, where the second name goes.
        d = next(p for p in ("/d%d" % i for i in range(64))
                 if c.cli("mkdir", p) and "Server: 1" in c.cli("stat", p).stdout)
        hd = int(c.cli("stat", d).stdout.split("Handle: 0x")[1].split()[0], 16)
        assert scrub(c, "--all").returncode == 0
        c.stop("s1")
        db = sqlite3.connect(os.path.join(c.dir, "s1", "meta.db"))
        with db:
            db.execute("INSERT INTO dirent (parent, name, child, type, seq, state)"
                       " VALUES (?, x'7477696365', ?, 32768, 999999, 0)", (hd, hf))
        db.close()
        c.start("s1")
        assert c.cli("stat", d + "/twice").returncode == 0
        r = scrub(c, "--all")
        assert r.returncode == 1, r.stdout + r.stderr
        assert re.search(r"s0: N2 inode handle %#x: .*nlink 1 but 2 entries" % hf, r.stdout), \
            r.stdout
    finally:
        c.stop_all()
