#!/usr/bin/env bash
# Installs every Debian package Orchard's build and tests need. Idempotent: it
# does nothing when everything is present, so `make` may call it every time.
set -eu
pkgs="gcc make pkg-config libfuse3-dev fuse3 libsqlite3-dev sqlite3 libinih-dev
libssl-dev python3-pytest python3-pytest-xdist clang libclang-rt-14-dev valgrind
man-db groff-base systemd build-essential dpkg-dev debhelper lintian
python3-matplotlib libmicrohttpd-dev prometheus chromium fonts-dejavu-core
python3-prometheus-client iproute2 gdb libraft-dev libuv1-dev"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages:$missing (run as root, or: sudo $0)" >&2
	exit 1
fi
echo "deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq $missing >/dev/null
