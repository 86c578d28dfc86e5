"""Installing and operating Orchard: make install and uninstall
(DESTDIR, PREFIX), the systemd units (systemd-analyze verify), the man pages
(they render without warnings, and every option the binaries accept, every
knob and every config key is in its page: the option tables of the source
are read, so code and pages cannot drift apart), genconfig for servers on
other hosts (run for real on 127.0.0.2 and 127.0.0.3), the default config
path, and orchardd's READY=1 to systemd.

Nothing here writes outside pytest's tmp_path: installs go to a DESTDIR or
to a PREFIX inside it.
"""
import glob
import os
import re
import shutil
import socket
import subprocess

import pytest

from cluster import BIN, BUILDDIR, ORCHARD, ORCHARDD, Cluster, free_port, run, wait_until
from mount import ORCHARD_MOUNT

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAN = os.path.join(REPO, "man")
PROGRAMS = ("orchard", "orchardd", "orchard-mount")
DEFAULT_CONF = "/etc/orchard/orchard.conf"


def sanitized_build():
    try:
        with open(os.path.join(BUILDDIR, ".flags")) as f:
            return "-fsanitize" in f.read()
    except OSError:
        return False


# The pages, the install layout and the units are the same whatever the
# programs were compiled with: under check-asan these would only repeat.
build_independent = pytest.mark.skipif(sanitized_build(),
                                       reason="same in every build; run by make test")


# --- make install ------------------------------------------------------------

def make_install(tmp, target="install", **make_vars):
    """`make install` (or uninstall) of this build with @make_vars.  The
    build's programs are copied into a scratch BUILDDIR and marked old (-o),
    so that make installs them as they are: a make with other flags than the
    build's would otherwise rebuild the build directory itself."""
    b = os.path.join(str(tmp), "b")
    os.makedirs(os.path.join(b, "bin"), exist_ok=True)
    for p in PROGRAMS:
        shutil.copy2(os.path.join(BIN, p), os.path.join(b, "bin", p))
    args = ["make", "-s", "-C", REPO, target, "BUILDDIR=" + b]
    for p in PROGRAMS:
        args += ["-o", os.path.join(b, "bin", p)]
    args += ["%s=%s" % kv for kv in sorted(make_vars.items())]
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)


def files_under(root):
    out = set()
    for d, _, names in os.walk(root):
        for n in names:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def expected_files(prefix, helperdir="/sbin", unitdir=None, confdir="/etc/orchard"):
    unitdir = unitdir or prefix + "/lib/systemd/system"
    man = prefix + "/share/man"
    files = [prefix + "/bin/orchard", prefix + "/sbin/orchardd", prefix + "/sbin/orchard-mount",
             helperdir + "/mount.orchard", unitdir + "/orchardd@.service",
             unitdir + "/orchard-mount@.service", man + "/man1/orchard.1",
             man + "/man5/orchard.conf.5", man + "/man8/orchardd.8",
             man + "/man8/orchard-mount.8", man + "/man8/mount.orchard.8",
             confdir + "/orchard.conf.example"]
    return {f.lstrip("/") for f in files}


@build_independent
@pytest.mark.parametrize("prefix", ["/usr", None], ids=["prefix-usr", "prefix-default"])
def test_install_and_uninstall(tmp_path, prefix):
    """make install puts exactly the programs, man pages, units, mount
    helper and example config in their places under DESTDIR (the helper in
    /sbin whatever PREFIX is), with the paths of PREFIX in the units and the
    helper; make uninstall removes exactly those and nothing else."""
    root = tmp_path / "root"
    make_vars = {"DESTDIR": str(root)}
    if prefix:
        make_vars["PREFIX"] = prefix
    prefix = prefix or "/usr/local"
    r = make_install(tmp_path, **make_vars)
    assert r.returncode == 0, r.stdout + r.stderr
    assert files_under(str(root)) == expected_files(prefix)

    def at(path):
        return os.path.join(str(root), path.lstrip("/"))
    for p in PROGRAMS:
        where = prefix + ("/bin/" if p == "orchard" else "/sbin/") + p
        with open(at(where), "rb") as f, open(os.path.join(BIN, p), "rb") as g:
            assert f.read() == g.read(), where
        assert os.stat(at(where)).st_mode & 0o777 == 0o755, where
    assert os.stat(at("/sbin/mount.orchard")).st_mode & 0o777 == 0o755
    for f in expected_files(prefix):
        if not re.search(r"/(s?bin)/", "/" + f):
            assert os.stat(at(f)).st_mode & 0o777 == 0o644, f
    units = prefix + "/lib/systemd/system/"
    text = open(at(units + "orchardd@.service")).read()
    assert "ExecStart=%s/sbin/orchardd -n %%i\n" % prefix in text, text
    text = open(at(units + "orchard-mount@.service")).read()
    assert "ExecStart=%s/sbin/orchard-mount -f %%f" % prefix in text, text
    text = open(at("/sbin/mount.orchard")).read()
    assert "ORCHARD_MOUNT=%s/sbin/orchard-mount\n" % prefix in text
    assert "@" not in text.replace("$@", "").replace('"$@"', "")
    # mount.orchard(8) is orchard-mount(8), through man's .so.
    r = subprocess.run(["man", "--warnings", "-M", at(prefix + "/share/man"), "8",
                        "mount.orchard"], capture_output=True, text=True,
                       env=dict(os.environ, MANWIDTH="80", MANPAGER="cat", PAGER="cat"))
    assert r.returncode == 0 and not r.stderr, r.stderr
    assert "mount.orchard" in r.stdout and "readdirplus" in r.stdout

    # Files of others in the same directories survive the uninstall; so
    # does /etc/orchard with an admin's config in it.
    for other in (prefix + "/bin/other", "/sbin/mount.other", "/etc/orchard/orchard.conf"):
        with open(at(other), "w") as f:
            f.write("not Orchard's\n")
    r = make_install(tmp_path, "uninstall", **make_vars)
    assert r.returncode == 0, r.stdout + r.stderr
    assert files_under(str(root)) == {(prefix + "/bin/other").lstrip("/"), "sbin/mount.other",
                                      "etc/orchard/orchard.conf"}
    os.unlink(at("/etc/orchard/orchard.conf"))
    r = make_install(tmp_path, "uninstall", **make_vars)
    assert r.returncode == 0 and not os.path.exists(at("/etc/orchard"))


@build_independent
def test_units_verify(tmp_path):
    """Both units pass systemd-analyze verify (which also checks that the
    programs they run and the man pages they name exist), installed for
    real under a PREFIX; orchardd@ is Type=notify with Restart=on-failure
    and the hardening options; orchard-mount@ has no option that would
    give it a mount namespace of its own."""
    if not shutil.which("systemd-analyze"):
        pytest.skip("no systemd-analyze (Debian package systemd)")
    p = str(tmp_path / "prefix")
    r = make_install(tmp_path, PREFIX=p, MOUNTHELPERDIR=p + "/sbin",
                     CONFDIR=p + "/etc/orchard")
    assert r.returncode == 0, r.stdout + r.stderr
    units = sorted(glob.glob(p + "/lib/systemd/system/*.service"))
    assert [os.path.basename(u) for u in units] == ["orchard-mount@.service",
                                                   "orchardd@.service"]
    r = subprocess.run(["systemd-analyze", "verify"] + units, capture_output=True, text=True,
                       cwd=str(tmp_path), env=dict(os.environ, MANPATH=p + "/share/man"))
    assert r.returncode == 0 and not r.stdout and not r.stderr, r.stdout + r.stderr

    def settings(path):
        out = {}
        for line in open(path):
            if "=" in line and not line.startswith("#"):
                k, v = line.strip().split("=", 1)
                out.setdefault(k, []).append(v)
        return out
    sv = settings(p + "/lib/systemd/system/orchardd@.service")
    for k, v in (("Type", "notify"), ("Restart", "on-failure"), ("ProtectSystem", "full"),
                 ("PrivateTmp", "yes"), ("NoNewPrivileges", "yes")):
        assert sv.get(k) == [v], (k, sv.get(k))
    mt = settings(p + "/lib/systemd/system/orchard-mount@.service")
    assert mt["Type"] == ["notify"] and mt["NoNewPrivileges"] == ["yes"]
    for k in ("ProtectSystem", "PrivateTmp", "ProtectHome", "PrivateDevices", "PrivateMounts",
              "ReadOnlyPaths", "ReadWritePaths", "TemporaryFileSystem", "ProtectKernelTunables",
              "ProtectControlGroups", "ProtectKernelModules", "MountFlags"):
        assert k not in mt, k


@build_independent
@pytest.mark.parametrize("args", [
    ["CONF", "DIR", "-o", "defaults,_netdev,a=1"],
    ["CONF", "DIR", "-n", "-v", "-f", "-o", "nofail,x-systemd.automount,a=1", "-t", "orchard"],
    ["-o", "noauto,auto,user,a=1,comment=z,X-y=2", "-sfv", "CONF", "DIR"],
    ["CONF", "-oa=1", "DIR", "-o", "nousers,x-*"],
])
def test_mount_helper_passes_only_orchard_options(tmp_path, args):
    """mount.orchard, run as mount(8) runs it (-f: fake, -v: verbose),
    drops mount(8)'s and systemd's options, keeps the others in order, and
    names the config's real path as the source."""
    conf = tmp_path / "c.conf"
    conf.write_text("")
    os.symlink(str(conf), str(tmp_path / "link.conf"))
    helper = tmp_path / "mount.orchard"
    helper.write_text(open(os.path.join(REPO, "dist", "mount.orchard.in")).read()
                      .replace("@SBINDIR@", "/nonexistent"))
    args = [str(tmp_path / "link.conf") if a == "CONF" else a for a in args]
    args = [str(tmp_path / "mnt") if a == "DIR" else a for a in args]
    if "-f" not in args and "-sfv" not in args:
        args += ["-f", "-v"]
    r = subprocess.run(["sh", str(helper)] + args, capture_output=True, text=True,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stderr == "mount.orchard: /nonexistent/orchard-mount %s %s -o fsname=%s,a=1\n" % (
        tmp_path / "link.conf", tmp_path / "mnt", conf), r.stderr


@build_independent
def test_mount_helper_usage(tmp_path):
    helper = tmp_path / "mount.orchard"
    helper.write_text(open(os.path.join(REPO, "dist", "mount.orchard.in")).read())
    for args in ([], ["conf"], ["a", "b", "c"], ["a", "b", "-x"], ["a", "b", "-o"]):
        r = subprocess.run(["sh", str(helper)] + args, capture_output=True, text=True)
        assert r.returncode == 1 and "usage: mount.orchard" in r.stderr, (args, r.stderr)


# --- Man pages -----------------------------------------------------------------

PAGES = ["orchard.1", "orchard.conf.5", "orchardd.8", "orchard-mount.8"]


@build_independent
@pytest.mark.parametrize("page", PAGES)
def test_man_page_renders_without_warnings(page):
    path = os.path.join(MAN, page)
    r = subprocess.run(["groff", "-ww", "-z", "-man", path], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stdout and not r.stderr, r.stderr
    r = subprocess.run(["man", "--warnings", "-l", path], capture_output=True, text=True,
                       env=dict(os.environ, MANWIDTH="80", MANPAGER="cat", PAGER="cat"))
    assert r.returncode == 0 and not r.stderr, r.stderr
    assert "NAME" in r.stdout and "SEE ALSO" in r.stdout
    r = subprocess.run(["lexgrog", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr   # whatis can parse NAME


@build_independent
def test_so_pages_name_a_page():
    for path in glob.glob(os.path.join(MAN, "*.[158]")):
        first = open(path).readline()
        if first.startswith(".so "):
            target = first.split()[1]
            assert os.path.basename(target) in PAGES, (path, target)


# roff to searchable text: fonts and escapes out, macro names out; the
# font-alternating macros (.BR a b) join their words as they render.
def roff_text(lines):
    out = []
    for line in lines:
        if line.startswith('.\\"'):
            continue
        m = re.match(r"\.(B|I|BR|RB|IR|RI|BI|IB|SM|SB)\s+(.*)", line)
        if m:
            words = re.findall(r'"([^"]*)"|(\S+)', m.group(2))
            words = [a or b for a, b in words]
            line = (" " if m.group(1) in ("B", "I", "SM", "SB") else "").join(words)
        elif line.startswith("."):
            line = line.split(None, 1)[1] if " " in line and line[1:3] in ("SS", "SH") else ""
        out.append(line)
    text = "\n".join(out)
    for a, b in ((r"\f[BIRP]", ""), (r"\\-", "-"), (r"\\\(aq", "'"), (r"\\&", ""),
                 (r"\\c\n", ""), (r"\\e", "\\\\"), (r"\\ ", " ")):
        text = re.sub(a, b, text)
    return text


def man_source(page):
    with open(os.path.join(MAN, page)) as f:
        return f.read().splitlines()


def man_sections(page, macro):
    """{first word of each .SS (or .SH) heading: its text}."""
    out, name, cur = {}, None, []
    for line in man_source(page):
        if line.startswith(".SS ") or line.startswith(".SH "):
            if name is not None:
                out[name] = roff_text(cur)
            name, cur = None, []
            if line.startswith("." + macro + " "):
                name = line.split(None, 1)[1].strip('"').split()[0]
            continue
        cur.append(line)
    if name is not None:
        out[name] = roff_text(cur)
    return out


def man_items(page):
    """{tag of each .TP item (its first word): the tag line and its text}."""
    out, tag, cur = {}, None, []
    lines = man_source(page)
    for i, line in enumerate(lines):
        if line.startswith(".TP"):
            if tag:
                out.setdefault(tag, []).append(roff_text(cur))
            cur = [lines[i + 1]]
            tag = roff_text([lines[i + 1]]).split()[0] if i + 1 < len(lines) else None
            continue
        if re.match(r"\.(SH|SS|PP)\b", line) and tag:
            out.setdefault(tag, []).append(roff_text(cur))
            tag, cur = None, []
            continue
        if tag:
            cur.append(line)
    if tag:
        out.setdefault(tag, []).append(roff_text(cur))
    return {k: "\n".join(v) for k, v in out.items()}


def source(*globs):
    text = ""
    for g in globs:
        for path in sorted(glob.glob(os.path.join(REPO, g))):
            with open(path) as f:
                text += f.read()
    return text


def option_tables(text):
    """[(function, [long options], short option string)] of every `struct
    option` table and getopt call in @text, with the function it is in."""
    tables = []
    funcs = [(m.start(), m.group(1)) for m in
             re.finditer(r"^(?:static )?int (\w+)\(", text, re.M)]

    def func_at(pos):
        name = None
        for start, f in funcs:
            if start > pos:
                break
            name = f
        return name
    for m in re.finditer(r"struct option \w+\[\] = \{(.*?)\n\t*\};", text, re.S):
        longs = re.findall(r'\{\s*"([\w-]+)",', m.group(1))
        if "ORCH_CLI_OPTS_END" in m.group(1):
            longs += ["help", "config"]
        tables.append((func_at(m.start()), longs, ""))
    for m in re.finditer(r'getopt(?:_long)?\((?:cli, )?argc, argv, "([^"]*)"', text):
        tables.append((func_at(m.start()), [], m.group(1).lstrip("+").replace(":", "")))
    return tables


def help_options(args):
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", r.stdout))


@build_independent
def test_orchard_man_page_has_every_command_and_option():
    """orchard(1) has a section per subcommand of orchard.c's table, and
    each section names every option that the command's getopt table takes
    and its --help lists."""
    sections = man_sections("orchard.1", "SS")
    commands = re.findall(r'^\t\{ "(\w+)", orch_cmd_\w+,', source("src/cli/orchard.c"), re.M)
    assert len(commands) >= 26
    assert sorted(sections) == sorted(commands), set(sections) ^ set(commands)
    files = {os.path.basename(p)[4:-2]: p for p in glob.glob(os.path.join(REPO, "src/cli/cmd_*.c"))}
    missing = []
    for stem, path in sorted(files.items()):
        for func, longs, shorts in option_tables(open(path).read()):
            m = re.match(r"orch_cmd_(\w+)$", func or "")
            cmd = m.group(1) if m else stem
            assert cmd in sections, (path, func)
            for o in ["--" + x for x in longs] + ["-" + x for x in shorts]:
                if o not in ("--config", "--help", "-c") and o not in sections[cmd]:
                    missing.append("%s %s" % (cmd, o))
    for cmd in commands:
        for o in help_options([ORCHARD, cmd, "--help"]) - {"--config", "--help", "-c"}:
            if o not in sections[cmd]:
                missing.append("%s %s (from --help)" % (cmd, o))
    # The global options.
    opts = man_sections("orchard.1", "SH")["OPTIONS"]
    for func, longs, shorts in option_tables(source("src/cli/orchard.c")):
        for o in ["--" + x for x in longs] + ["-" + x for x in shorts]:
            if o not in opts:
                missing.append("orchard %s" % o)
    assert not missing, "not in man/orchard.1: " + ", ".join(missing)


@build_independent
def test_orchardd_man_page_has_every_option():
    """Every option of every getopt table in src/server/ (however the files
    are split) and of orchardd --help is in orchardd(8)."""
    text = roff_text(man_source("orchardd.8"))
    found = []
    for func, longs, shorts in option_tables(source("src/server/*.c")):
        found += ["--" + x for x in longs] + ["-" + x for x in shorts]
    assert "--name" in found and "-n" in found
    found += sorted(help_options([ORCHARDD, "--help"]))
    missing = sorted({o for o in found if o not in text})
    assert not missing, "not in man/orchardd.8: " + ", ".join(missing)


def knobs():
    """[(name, default, min, live)] of proto/knobs.def."""
    out = []
    for m in re.finditer(r"^ORCH_KNOB_(LIVE|MOUNT)\((\w+), (\d+), (\d+), (\d+)",
                         source("src/proto/knobs.def"), re.M):
        out.append((m.group(2), int(m.group(3)), int(m.group(4)), m.group(1) == "LIVE"))
    return out


@build_independent
def test_orchard_mount_man_page_has_every_option_and_knob():
    """orchard-mount(8) names every -o option of the mount's fuse_opt table
    (the numeric ones from knobs.def, each with its default), every runtime
    knob as its user.orchard. xattr, the options of --help, and every option
    the mount helper drops."""
    items = man_items("orchard-mount.8")
    text = roff_text(man_source("orchard-mount.8"))
    ks = knobs()
    assert len(ks) >= 6
    missing = []
    for name, default, lo, live in ks:
        tag = name + "=N"
        if tag not in items:
            missing.append(tag)
        elif not (default == 0 and lo > 0) and "default %d" % default not in items[tag]:
            missing.append("%s's default %d" % (name, default))
        if live and "user.orchard." + name not in items:
            missing.append("user.orchard." + name)
    if "user.orchard.stats" not in items:
        missing.append("user.orchard.stats")
    spec = re.search(r"mnt_opt_spec\[\] = \{(.*?)\n\};", source("src/mount/main.c"), re.S).group(1)
    for o in re.findall(r'(?:\{ |FUSE_OPT_KEY\()"([^"#]+)', spec):
        o = re.sub(r"(=| )%[su]$", "=", o)
        if o.rstrip("=") not in text:
            missing.append(o)
    for o in help_options([ORCHARD_MOUNT, "--help"]):
        if o not in text and not o.startswith("-o"):
            missing.append(o + " (from --help)")
    helper = source("dist/mount.orchard.in")
    dropped = re.search(r'for o in \$opts; do\n\tcase \$o in\n(.*?)\tesac', helper, re.S).group(1)
    for pat in re.findall(r"[\w.=*-]+", " ".join(dropped.splitlines()[:2])):
        if pat not in ('""',) and pat.rstrip("*") not in text:
            missing.append("helper drops " + pat)
    assert not missing, "not in man/orchard-mount.8: " + ", ".join(missing)


@build_independent
def test_orchard_conf_man_page_has_every_key_and_default():
    """orchard.conf(5) has an item for every key the parser knows, and the
    item of each key with a numeric default in cfg_defaults() states it."""
    cfg = source("src/common/cfg.c")
    keys = re.findall(r'strcmp\(name, "(\w+)"\) == 0', cfg)
    assert len(keys) >= 15
    items = man_items("orchard.conf.5")
    missing = [k for k in keys if k not in items]
    defaults = re.search(r"static void cfg_defaults\(.*?\n\}", cfg, re.S).group(0)
    for field, value in re.findall(r"cfg->(\w+) = (\d+);", defaults):
        if field in items and "default %s" % value not in items[field].replace("\n", " ").lower():
            missing.append("%s's default %s" % (field, value))
    sections = man_sections("orchard.conf.5", "SH")
    for s in ("[cluster]", "[server"):
        if s not in sections:
            missing.append(s)
    assert not missing, "not in man/orchard.conf.5: " + ", ".join(missing)


def test_example_config_parses(tmp_path):
    """dist/orchard.conf.example is a valid config (with a key file): every
    command can read it."""
    conf = tmp_path / "orchard.conf"
    shutil.copy(os.path.join(REPO, "dist", "orchard.conf.example"), str(conf))
    key = tmp_path / "orchard.key"
    key.write_text("00" * 32 + "\n")
    os.chmod(str(key), 0o600)
    r = run([ORCHARD, "-c", str(conf), "ping", "-t", "50"], check=False)
    assert r.returncode == 1, r.stderr            # down, not a config error
    assert [ln.split()[0] for ln in r.stdout.splitlines()[1:]] == ["s0", "s1", "s2"]


# --- genconfig for servers on other hosts -------------------------------------

def test_genconfig_other_hosts(tmp_path):
    """--servers HOST:PORT,... writes one server per address, in order, with
    its data in /var/lib/orchard/NAME (or --data-dir); servers started from
    it listen on those addresses only, and a file striped over them reads
    back."""
    r = run([ORCHARD, "genconfig", "--servers", "host1:7400,host2:7400,host3:7400",
             "--dir", str(tmp_path / "h")])
    text = open(r.stdout.strip()).read()
    for i in range(3):
        assert ("[server s%d]\naddress = host%d:7400\ndata_dir = /var/lib/orchard/s%d\n"
                % (i, i + 1, i)) in text, text
    assert os.stat(str(tmp_path / "h" / "orchard.key")).st_mode & 0o777 == 0o600

    hosts = ["127.0.0.2", "127.0.0.3"]
    addrs = ["%s:%d" % (h, free_port(h)) for h in hosts]
    conf = run([ORCHARD, "genconfig", "--servers", ",".join(addrs), "--dir",
                str(tmp_path / "c"), "--data-dir", str(tmp_path / "data")]).stdout.strip()
    procs = []
    try:
        for name in ("s0", "s1"):
            run([ORCHARD, "mkfs", "-c", conf, "-n", name, "--store-size", "256M"])
            log = open(str(tmp_path / (name + ".log")), "ab")
            procs.append(subprocess.Popen([ORCHARDD, "-c", conf, "-n", name],
                                          stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                          start_new_session=True))
            log.close()
        assert os.path.isdir(str(tmp_path / "data" / "s1"))

        def all_up():
            return run([ORCHARD, "-c", conf, "ping"], check=False).returncode == 0
        wait_until(all_up, 20, 0.05, "both servers to answer")
        out = run([ORCHARD, "-c", conf, "ping"]).stdout
        for a in addrs:
            assert a in out, out
        # Bound to the address given, not to every address.
        port = int(addrs[0].rsplit(":", 1)[1])
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        data = os.urandom(300000)
        run([ORCHARD, "-c", conf, "put", "-", "/f"], input=data)
        assert run([ORCHARD, "-c", conf, "stat", "/f"]).stdout.count("stripe_count=2") == 1
        assert subprocess.run([ORCHARD, "-c", conf, "get", "/f", "-"], capture_output=True,
                              check=True).stdout == data
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(20)
    assert [p.returncode for p in procs] == [0, 0]


@build_independent
@pytest.mark.parametrize("args,message", [
    (["--servers", "h1:7400,h1:7400"], "address 'h1:7400' given twice"),
    (["--servers", "h1:7400,h2"], "bad address 'h2'"),
    (["--servers", "h1:70000"], "bad address 'h1:70000'"),
    (["--servers", "h1:7400,"], "bad address ''"),
    (["--servers", "h1:1,h2:2", "--base-port", "7400"], "--base-port goes with --servers N"),
    (["--servers", "2", "--data-dir", "rel"], "--data-dir: want an absolute path"),
    (["--servers", "x"], "want 1 to 64, or HOST:PORT"),
])
def test_genconfig_usage_errors(tmp_path, args, message):
    r = run([ORCHARD, "genconfig", "--dir", str(tmp_path / "g")] + args, check=False)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not os.path.exists(str(tmp_path / "g"))


# --- The default config path, and systemd's notify protocol ---------------------

def test_no_config_names_the_default_path(tmp_path):
    """Without -c and ORCHARD_CONF every program falls back to
    /etc/orchard/orchard.conf; when that is missing each says so."""
    if os.path.exists(DEFAULT_CONF):
        pytest.skip(DEFAULT_CONF + " exists on this machine")
    env = {k: v for k, v in os.environ.items() if k != "ORCHARD_CONF"}
    for args in ([ORCHARD, "ping"], [ORCHARD_MOUNT, str(tmp_path)]):
        r = subprocess.run(args, capture_output=True, text=True, env=env)
        assert r.returncode == 2, (args, r.stderr)
        assert DEFAULT_CONF in r.stderr and "ORCHARD_CONF" in r.stderr, r.stderr
    r = subprocess.run([ORCHARDD, "-n", "s0"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "usage: orchardd [-c CONF]" in r.stderr, r.stderr
    # ORCHARD_CONF is the next choice, for all three.
    env["ORCHARD_CONF"] = str(tmp_path / "nosuch.conf")
    for args in ([ORCHARD, "ping"], [ORCHARDD, "-n", "s0"]):
        r = subprocess.run(args, capture_output=True, text=True, env=env)
        assert r.returncode == 1 and "nosuch.conf" in r.stderr, (args, r.stderr)


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_orchardd_tells_systemd_it_is_ready(tmp_path, abstract):
    """With $NOTIFY_SOCKET (as systemd sets it for Type=notify), orchardd
    sends READY=1 once it listens: a client is served at that moment."""
    c = Cluster(tmp_path / "c", nservers=1)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        if abstract:
            name = "orchard-test-%d-%s" % (os.getpid(), os.path.basename(str(tmp_path)))
            sock.bind("\0" + name)
            where = "@" + name
        else:
            where = str(tmp_path / "notify")
            sock.bind(where)
        sock.settimeout(30)
        c.start("s0", wait=False, env={"NOTIFY_SOCKET": where})
        msg = sock.recv(4096)
        r = run([ORCHARD, "-c", c.conf, "ping", "-t", "2000"], check=False)
        assert msg.split(b"\n")[0] == b"READY=1", msg
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        sock.close()
        c.stop_all()

