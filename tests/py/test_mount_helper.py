"""`mount -t orchard` and /etc/fstab (docs/mount.md) on a real local cluster:
mount(8) runs /sbin/mount.orchard (dist/mount.orchard.in, installed here
for the test and removed after), which drops mount(8)'s and systemd's
options and runs orchard-mount.  Checked: options reach the mount; the
options of mount(8) and systemd (_netdev, nofail, x-systemd.*, rw, noauto,
defaults) are never fatal; an unknown option or a bad value is refused by
name with nothing mounted; fstab lines with mount -a (twice: no second
mount on top), umount, and the units systemd-fstab-generator makes of them;
orchard-mount -f tells systemd READY=1 once mounted.

Root only.  /etc/fstab is restored byte for byte, every mount is unmounted
and every orchard-mount process is gone (killed by PID if need be) before
a test ends, pass or fail.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess

import pytest

from cluster import BAD_LOG, BIN, ORCHARD, Cluster, wait_until
from mount import ORCHARD_MOUNT, mount_pids

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HELPER = "/sbin/mount.orchard"
GENERATOR = "/lib/systemd/system-generators/systemd-fstab-generator"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/dev/fuse") or not shutil.which("mount")
    or not os.path.exists(ORCHARD_MOUNT),
    reason="needs root, /dev/fuse, mount(8) and orchard-mount")


@pytest.fixture(scope="module")
def cluster2(tmp_path_factory):
    """One 2-server cluster for the module (each test uses its own files):
    started once, stopped after the last test, pass or fail."""
    c = Cluster(tmp_path_factory.mktemp("helper") / "c", nservers=2)
    try:
        c.start_all()
        yield c
    finally:
        c.stop_all()


@pytest.fixture
def helper():
    """/sbin/mount.orchard running this build's orchard-mount, for the test."""
    if os.path.lexists(HELPER):
        pytest.skip(HELPER + " exists (an installed Orchard?); not replacing it")
    with open(os.path.join(REPO, "dist", "mount.orchard.in")) as f:
        text = f.read().replace("@SBINDIR@", BIN)
    with open(HELPER, "w") as f:
        f.write(text)
    try:
        os.chmod(HELPER, 0o755)
        yield HELPER
    finally:
        os.unlink(HELPER)


def mounts_at(mnt):
    """[(source, fstype)] of the mounts on @mnt, from mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == mnt:
                rest = fields[fields.index("-") + 1:]
                out.append((rest[1], rest[0]))
    return out


class Mounts:
    """The mountpoints of a test, and their cleanup: unmount (lazily if
    need be), wait for each orchard-mount to exit, kill it by PID if it does
    not, and check its sanitizer log (daemons have no stderr)."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.dirs = []
        self.asan = str(tmp_path / "asan")
        opts = os.environ.get("ASAN_OPTIONS", "")
        self.env = dict(os.environ, ASAN_OPTIONS=(opts + ":" if opts else "")
                        + "log_path=" + self.asan)

    def dir(self, name):
        d = str(self.tmp / name)
        os.makedirs(d, exist_ok=True)
        self.dirs.append(d)
        return d

    def run(self, args):
        return subprocess.run(args, capture_output=True, text=True, env=self.env, timeout=60)

    def umount(self, mnt):
        r = subprocess.run(["umount", mnt], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        wait_until(lambda: not mount_pids(mnt), 20, what="orchard-mount of %s to exit" % mnt)
        assert not mounts_at(mnt)

    def cleanup(self):
        problems = []
        for d in self.dirs:
            while mounts_at(d):
                if subprocess.run(["umount", d], capture_output=True).returncode != 0:
                    subprocess.run(["umount", "-l", d], capture_output=True)
                    problems.append("%s: lazy unmount" % d)
            try:
                wait_until(lambda: not mount_pids(d), 20, what="orchard-mount to exit")
            except AssertionError:
                for pid in mount_pids(d):
                    os.kill(pid, signal.SIGKILL)
                problems.append("%s: orchard-mount killed" % d)
        for path in sorted(os.listdir(str(self.tmp))):
            if path.startswith("asan."):
                text = open(str(self.tmp / path), errors="replace").read()
                if BAD_LOG.search(text):
                    problems.append(text[-4000:])
        return problems


@pytest.fixture
def mounts(tmp_path, helper):
    m = Mounts(tmp_path)
    yield m
    problems = m.cleanup()
    assert not problems, "\n".join(problems)


def knob(mnt, name):
    return int(os.getxattr(mnt, "user.orchard." + name))


def check_io(c, mnt, name):
    data = os.urandom(300000)
    with open(os.path.join(mnt, name), "wb") as f:
        f.write(data)
    with open(os.path.join(mnt, name), "rb") as f:
        assert f.read() == data
    assert subprocess.run([ORCHARD, "-c", c.conf, "get", "/" + name, "-"],
                          capture_output=True, check=True).stdout == data


def test_mount_t_orchard(cluster2, mounts):
    """mount -t orchard CONF DIR -o OPTS mounts (type fuse.orchard, the
    config's path as source), with the option in force; umount unmounts
    and the process ends."""
    c = cluster2
    mnt = mounts.dir("mnt")
    r = mounts.run(["mount", "-t", "orchard", c.conf, mnt, "-o", "dcache_timeout_ms=100"])
    assert r.returncode == 0, r.stderr
    assert mounts_at(mnt) == [(os.path.realpath(c.conf), "fuse.orchard")]
    assert knob(mnt, "dcache_timeout_ms") == 100
    assert knob(mnt, "getattr_timeout_ms") == 50
    check_io(c, mnt, "f")
    assert len(mount_pids(mnt)) == 1
    mounts.umount(mnt)


def test_mount_and_systemd_options_are_not_fatal(cluster2, mounts):
    """The options mount(8) and systemd put on an fstab line are dropped by
    the helper (or are FUSE's own, as rw), next to Orchard's."""
    c = cluster2
    mnt = mounts.dir("mnt")
    opts = ("defaults,_netdev,nofail,noauto,auto,rw,x-systemd.automount,"
            "x-systemd.requires=network-online.target,x-systemd.mount-timeout=30,"
            "comment=orchard,X-note=1,getattr_timeout_ms=70")
    r = mounts.run(["mount", "-t", "orchard", c.conf, mnt, "-o", opts])
    assert r.returncode == 0, r.stderr
    assert mounts_at(mnt) == [(os.path.realpath(c.conf), "fuse.orchard")]
    assert knob(mnt, "getattr_timeout_ms") == 70
    check_io(c, mnt, "g")
    mounts.umount(mnt)


@pytest.mark.parametrize("opts,name", [
    ("bogus_opt=1", "bogus_opt=1"),
    ("_netdev,nofail,frobnicate", "frobnicate"),
    ("dcache_timeout_ms=abc", "dcache_timeout_ms=abc"),
    ("writebehind_kb=4294967295", "writebehind_kb"),
    ("readdirplus=maybe", "readdirplus=maybe"),
])
def test_mount_t_refuses_a_bad_option(cluster2, mounts, opts, name):
    """An unknown option or a bad value fails the mount with a message that
    names it; nothing is mounted and no process is left."""
    mnt = mounts.dir("mnt")
    r = mounts.run(["mount", "-t", "orchard", cluster2.conf, mnt, "-o", opts])
    assert r.returncode != 0
    assert name in r.stderr, r.stderr
    assert not mounts_at(mnt) and not mount_pids(mnt)


def test_mount_t_refuses_a_missing_config(mounts, tmp_path):
    mnt = mounts.dir("mnt")
    r = mounts.run(["mount", "-t", "orchard", str(tmp_path / "nosuch.conf"), mnt])
    assert r.returncode != 0 and "nosuch.conf" in r.stderr, r.stderr
    assert not mounts_at(mnt)


class Fstab:
    """Lines added to /etc/fstab for one test; restore() puts back the
    file's exact bytes (and mode)."""
    PATH = "/etc/fstab"

    def __init__(self):
        self.existed = os.path.exists(self.PATH)
        self.saved = open(self.PATH, "rb").read() if self.existed else None
        self.mode = os.stat(self.PATH).st_mode & 0o7777 if self.existed else 0o644

    def add(self, lines):
        text = self.saved or b""
        if text and not text.endswith(b"\n"):
            text += b"\n"
        with open(self.PATH, "wb") as f:
            f.write(text + b"# orchard test\n" + "".join(ln + "\n" for ln in lines).encode())

    def restore(self):
        if self.existed:
            with open(self.PATH, "wb") as f:
                f.write(self.saved)
            os.chmod(self.PATH, self.mode)
            assert open(self.PATH, "rb").read() == self.saved
        elif os.path.exists(self.PATH):
            os.unlink(self.PATH)


@pytest.fixture
def fstab():
    f = Fstab()
    try:
        yield f
    finally:
        f.restore()


def test_fstab(cluster2, mounts, fstab, tmp_path):
    """fstab lines of type orchard: `mount -a` mounts every auto line
    (options in force, _netdev, nofail and x-systemd.* ignored), a second
    `mount -a` mounts nothing on top, `umount` unmounts; a noauto line with
    a bad option is left alone by mount -a and refused by name when
    mounted; systemd-fstab-generator makes units of the lines that verify,
    and their mount command works."""
    c = cluster2
    m1, m2, m3 = mounts.dir("m1"), mounts.dir("m2"), mounts.dir("m3")
    fstab.add(["%s %s orchard defaults,_netdev 0 0" % (c.conf, m1),
               "%s %s orchard _netdev,nofail,x-systemd.mount-timeout=30,dcache_timeout_ms=200 0 0"
               % (c.conf, m2),
               "%s %s orchard noauto,_netdev,bogus_opt=1 0 0" % (c.conf, m3)])
    source = os.path.realpath(c.conf)
    for _ in range(2):
        r = mounts.run(["mount", "-a", "-t", "orchard"])
        assert r.returncode == 0, r.stderr
        assert mounts_at(m1) == [(source, "fuse.orchard")]
        assert mounts_at(m2) == [(source, "fuse.orchard")]
        assert not mounts_at(m3)
    assert knob(m1, "dcache_timeout_ms") == 50 and knob(m2, "dcache_timeout_ms") == 200
    check_io(c, m1, "a")
    with open(os.path.join(m2, "a"), "rb") as f:
        assert len(f.read()) == 300000
    r = mounts.run(["mount", m3])
    assert r.returncode != 0 and "bogus_opt=1" in r.stderr, r.stderr
    assert not mounts_at(m3) and not mount_pids(m3)
    mounts.umount(m1)
    mounts.umount(m2)

    # What systemd makes of the lines at boot.
    if not os.path.exists(GENERATOR) or not shutil.which("systemd-analyze"):
        pytest.skip("no systemd-fstab-generator or systemd-analyze (package systemd)")
    gen = tmp_path / "generator"
    gen.mkdir()
    r = subprocess.run([GENERATOR, str(gen), str(gen), str(gen)], capture_output=True,
                       text=True, env=dict(os.environ, SYSTEMD_FSTAB=fstab.PATH))
    assert r.returncode == 0, r.stderr

    def unit(mnt):
        return subprocess.run(["systemd-escape", "-p", "--suffix=mount", mnt],
                              capture_output=True, text=True, check=True).stdout.strip()
    u1, u2, u3 = unit(m1), unit(m2), unit(m3)
    # _netdev: part of remote-fs.target (nofail: wanted, not required); noauto: neither.
    assert os.path.exists(str(gen / "remote-fs.target.requires" / u1))
    assert os.path.exists(str(gen / "remote-fs.target.wants" / u2))
    linked = [d for d, _, names in os.walk(str(gen)) if u3 in names and d != str(gen)]
    assert not linked, linked
    units = [str(gen / u) for u in (u1, u2, u3)]
    r = subprocess.run(["systemd-analyze", "verify"] + units, capture_output=True, text=True,
                       cwd=str(tmp_path))
    assert r.returncode == 0 and not r.stderr, r.stderr
    # A mount unit runs `mount What Where -t Type -o Options`.
    conf = {}
    for line in open(str(gen / u2)):
        if "=" in line:
            k, v = line.strip().split("=", 1)
            conf[k] = v
    assert (conf["What"], conf["Where"], conf["Type"]) == (c.conf, m2, "orchard")
    r = mounts.run(["mount", conf["What"], conf["Where"], "-t", conf["Type"], "-o",
                    conf["Options"]])
    assert r.returncode == 0, r.stderr
    assert knob(m2, "dcache_timeout_ms") == 200
    mounts.umount(m2)


def test_orchard_mount_tells_systemd_it_is_mounted(cluster2, tmp_path):
    """orchard-mount -f (orchard-mount@.service, Type=notify) sends READY=1
    to $NOTIFY_SOCKET once the file system is mounted; SIGTERM (systemctl
    stop) unmounts and ends it with status 0."""
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    where = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(where)
    sock.settimeout(30)
    log = open(str(tmp_path / "mount.stderr"), "wb")
    p = subprocess.Popen([ORCHARD_MOUNT, "-f", "-c", cluster2.conf, mnt],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         env=dict(os.environ, NOTIFY_SOCKET=where), start_new_session=True)
    log.close()
    try:
        msg = sock.recv(4096)
        assert msg.split(b"\n")[0] == b"READY=1", msg
        assert mounts_at(mnt) == [("orchard:orchard", "fuse.orchard")]
        os.listdir(mnt)
        # The kernel's RELEASEDIR of that listing comes on its own time; a
        # directory still open when the session ends is never freed.
        wait_until(lambda: json.loads(os.getxattr(mnt, "user.orchard.stats"))["fuse"]
                   .get("RELEASEDIR", 0) >= 1, 10, what="the RELEASEDIR")
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
        assert not mounts_at(mnt)
    finally:
        sock.close()
        if p.poll() is None:
            subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    text = open(str(tmp_path / "mount.stderr"), errors="replace").read()
    assert not BAD_LOG.search(text), text
    assert re.search(r"mounted: cluster='orchard'", text), text
