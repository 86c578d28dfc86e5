#!/usr/bin/env bash
# Runs each unit-test binary given, UNIT_JOBS (default: the number of CPUs)
# at a time: the store's tests spend most of their time waiting on fsync,
# so running them side by side shortens the run without loading the CPUs
# more.  A binary's output is printed whole when it ends, so the outputs of
# binaries running together do not interleave.  UNIT_WRAP (e.g. "valgrind
# -q ...") is put in front of each binary.  Exit 77 means skipped.  Prints
# one summary line.
set -u
jobs=${UNIT_JOBS:-$(nproc)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run_one() {
	local t=$1 log
	log=$out/$(basename "$t").log
	# shellcheck disable=SC2086
	$UNIT_WRAP "$t" >"$log" 2>&1
	echo $? >"$log.rc"
}
export -f run_one
export out UNIT_WRAP="${UNIT_WRAP:-}"
printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c 'run_one "$1"' _ {}
pass=0 fail=0 skip=0
for t in "$@"; do
	log=$out/$(basename "$t").log
	cat "$log"
	rc=$(cat "$log.rc" 2>/dev/null || echo 1)
	case $rc in
	0) pass=$((pass + 1)) ;;
	77) skip=$((skip + 1)); echo "SKIP $t" ;;
	*) fail=$((fail + 1)); echo "FAIL $t (exit $rc)" ;;
	esac
done
echo "unit binaries: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
