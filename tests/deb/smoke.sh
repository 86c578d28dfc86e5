#!/usr/bin/env bash
# make check-deb: builds the Debian packages (debian/) from a copy of the
# tree, checks them with lintian (no errors), installs them on this machine,
# and uses what they installed: man pages, the units (systemd-analyze
# verify), two servers started from /usr/sbin (through systemctl when
# systemd runs this machine), a mount through `mount -t orchard` with the
# default config /etc/orchard/orchard.conf, a file written and read back,
# unmount.  Then removes the packages (only the conffile may stay), purges
# them (nothing stays) and puts everything back as it was, pass or fail.
#
#   tests/deb/smoke.sh OUTDIR      packages and logs go to OUTDIR
#
# Needs root; refuses to run where Orchard is installed or configured
# already (/etc/orchard, /var/lib/orchard, an orchard-* package), as it
# would have to change what it did not make.
set -euo pipefail

out=${1:?usage: smoke.sh OUTDIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
pkgs=(orchard-tools orchard-server orchard-client)

say() { printf 'check-deb: %s\n' "$*"; }
known() {	# known PKG: dpkg has PKG installed, or its conffiles, or half of it
	case "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" in
	""|*" not-installed") return 1 ;;
	*) return 0 ;;
	esac
}
fail() { say "FAIL: $*" >&2; exit 1; }

if [ "$(id -u)" != 0 ]; then
	say "SKIP: needs root (installs packages)"
	exit 0
fi
for p in "${pkgs[@]}"; do
	if known "$p"; then
		fail "$p is installed already; remove it first (dpkg --purge ${pkgs[*]})"
	fi
done
for d in /etc/orchard /var/lib/orchard; do
	[ ! -e "$d" ] || fail "$d exists; this test makes and removes it, so it must not"
done

t0=$(date +%s)
lap=$t0
timing=""
step() {	# step NAME: the time since the last step, for the summary
	local now
	now=$(date +%s)
	timing="$timing $1=$((now - lap))s"
	lap=$now
}

# --- Build ------------------------------------------------------------------
version=$(cd "$src" && dpkg-parsechangelog -S Version)
rm -rf "$out"
mkdir -p "$out/orchard-$version"
# A copy, so that the build writes nothing into the tree (and its parent).
(cd "$src" && tar --exclude='./build*' --exclude=./.git --exclude=./debian/build -cf - .) |
	tar -xf - -C "$out/orchard-$version"
say "building orchard $version in $out (log: $out/build.log)"
if ! (cd "$out/orchard-$version" &&
      DEB_BUILD_OPTIONS="nocheck noddebs parallel=2" dpkg-buildpackage -us -uc -b) \
	>"$out/build.log" 2>&1; then
	tail -30 "$out/build.log" >&2
	fail "dpkg-buildpackage failed"
fi
rm -rf "$out/orchard-$version"
debs=()
for p in "${pkgs[@]}"; do
	debs+=("$out/${p}_${version}_$(dpkg --print-architecture).deb")
	[ -f "${debs[-1]}" ] || fail "no ${debs[-1]}"
done
ls -l "${debs[@]}"
step build

# lintian: errors fail, warnings are shown.
lint=0
lintian --fail-on error "$out/orchard_${version}_$(dpkg --print-architecture).changes" \
	>"$out/lintian.log" 2>&1 || lint=$?
grep -v "running with root privileges" "$out/lintian.log" || true
[ $lint = 0 ] || fail "lintian reports errors (status $lint)"
step lintian

# --- Install and use --------------------------------------------------------
work=$(mktemp -d /tmp/orchard-deb.XXXXXX)
mnt=$work/mnt
server_pids=""
use_systemctl=
[ -d /run/systemd/system ] && use_systemctl=1

cleanup() {
	local rc=$?
	set +e
	if grep -q " $mnt " /proc/mounts 2>/dev/null; then
		umount "$mnt" || umount -l "$mnt"
	fi
	if [ -n "$use_systemctl" ]; then
		systemctl stop orchardd@s0 orchardd@s1 2>/dev/null
	fi
	for pid in $server_pids; do
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	for p in "${pkgs[@]}"; do
		if known "$p"; then
			dpkg --purge "${pkgs[@]}" >/dev/null 2>&1
			break
		fi
	done
	rm -rf /etc/orchard /var/lib/orchard "$work"
	[ $rc = 0 ] || say "FAIL (status $rc); the system is as it was"
	exit $rc
}
trap cleanup EXIT

say "installing ${debs[*]##*/}"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${debs[@]}" \
	>"$out/install.log" 2>&1 || { tail -20 "$out/install.log" >&2; fail "apt-get install"; }
for f in /usr/bin/orchard /usr/sbin/orchardd /usr/sbin/orchard-mount /sbin/mount.orchard; do
	[ -x "$f" ] || fail "$f is not installed"
done
# A minimal image may tell dpkg to leave man pages out (path-exclude).
verify_man=yes
if grep -rqs '^path-exclude[= ]*/usr/share/man' /etc/dpkg/dpkg.cfg.d/; then
	say "SKIP man pages: dpkg is told not to install /usr/share/man here"
	verify_man=no
else
	for page in orchard.1 orchard.conf.5 orchardd.8 orchard-mount.8 mount.orchard.8; do
		man -w "${page##*.}" "${page%.*}" >/dev/null || fail "man ${page%.*}: no page"
		warn=$(MANWIDTH=80 man --warnings "${page##*.}" "${page%.*}" 2>&1 >/dev/null)
		if [ -n "$warn" ]; then fail "man ${page%.*}: $warn"; fi
	done
	man orchard.conf 2>/dev/null | grep -q store_reserve ||
		fail "man orchard.conf: no store_reserve"
fi
# Also checks that the programs the units run (and their man pages) exist.
systemd-analyze verify --man=$verify_man /lib/systemd/system/orchardd@.service \
	/lib/systemd/system/orchard-mount@.service || fail "systemd-analyze verify"
step install

# A cluster in the default places: /etc/orchard, /var/lib/orchard.
orchard genconfig --servers 2 --dir /etc/orchard --data-dir /var/lib/orchard >/dev/null
for s in s0 s1; do
	orchard mkfs -n $s >"$work/mkfs-$s.log" 2>&1 || { cat "$work/mkfs-$s.log"; fail "mkfs $s"; }
done
if [ -n "$use_systemctl" ]; then
	say "starting orchardd@s0 and orchardd@s1 (systemctl)"
	systemctl start orchardd@s0 orchardd@s1 || {
		journalctl -u orchardd@s0 -u orchardd@s1 --no-pager | tail -20 >&2
		fail "systemctl start"; }
else
	say "starting /usr/sbin/orchardd -n s0 and -n s1 (no systemd on this machine)"
	for s in s0 s1; do
		/usr/sbin/orchardd -n "$s" --log "$work/$s.log" </dev/null &
		server_pids="$server_pids $!"
	done
fi
up=
for _ in $(seq 200); do
	if orchard ping -t 500 >/dev/null 2>&1; then up=1; break; fi
	sleep 0.1
done
[ -n "$up" ] || { orchard ping; fail "the servers do not answer"; }

mkdir "$mnt"
say "mount -t orchard /etc/orchard/orchard.conf $mnt -o dcache_timeout_ms=100"
mount -t orchard /etc/orchard/orchard.conf "$mnt" -o dcache_timeout_ms=100 ||
	fail "mount -t orchard"
grep " $mnt " /proc/mounts
grep -q " $mnt fuse.orchard " /proc/mounts || fail "not mounted"
knob=$(python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.orchard.dcache_timeout_ms").decode())' "$mnt")
[ "$knob" = 100 ] || fail "dcache_timeout_ms is $knob, not 100"
head -c 3000000 /dev/urandom >"$work/in"
cp "$work/in" "$mnt/f"
umount "$mnt"
# Read back through a new mount (nothing cached) and through the CLI.
mount -t orchard /etc/orchard/orchard.conf "$mnt" || fail "mount -t orchard (again)"
cmp "$work/in" "$mnt/f" || fail "the file read back differs"
orchard get /f "$work/out" || fail "orchard get"
cmp "$work/in" "$work/out" || fail "orchard get: the file differs"
umount "$mnt"
for _ in $(seq 100); do
	grep -q " $mnt " /proc/mounts || break
	sleep 0.1
done
if grep -q " $mnt " /proc/mounts; then fail "still mounted after umount"; fi
say "written, read back, unmounted"
if [ -n "$use_systemctl" ]; then
	systemctl stop orchardd@s0 orchardd@s1
else
	for pid in $server_pids; do kill "$pid"; wait "$pid" || fail "orchardd $pid: exit $?"; done
	server_pids=""
fi
step smoke

# --- Remove, purge ----------------------------------------------------------
files=$(dpkg -L "${pkgs[@]}" | sort -u)
conffiles=$(for p in "${pkgs[@]}"; do dpkg-query -W -f='${Conffiles}\n' "$p"; done | awk 'NF {print $1}')
dpkg --remove "${pkgs[@]}" >/dev/null || fail "dpkg --remove"
left=""
for f in $files; do
	[ -d "$f" ] && continue	# shared directories (/usr/sbin ...) stay
	if [ -e "$f" ] || [ -L "$f" ]; then
		grep -qxF "$f" <<<"$conffiles" || left="$left $f"
	fi
done
[ -z "$left" ] || fail "left after remove:$left"
# Not apt-get purge: apt knows no package that is neither installed nor in
# a repository (orchard-server has no conffile, so remove removed it all).
dpkg --purge "${pkgs[@]}" >/dev/null 2>&1 || fail "dpkg --purge"
for p in "${pkgs[@]}"; do
	if known "$p"; then
		fail "$p is still known to dpkg after --purge"
	fi
done
for f in $conffiles; do
	[ ! -e "$f" ] || fail "left after purge: $f"
done
step remove
say "PASS:$timing total=$(($(date +%s) - t0))s"
