#!/usr/bin/env bash
# Runs each unit-test binary given, UNIT_JOBS (default: the number of CPUs)
# at a time: the store's tests spend most of their time waiting on fsync,
# so running them side by side shortens the run without loading the CPUs
# more.  A binary's output is printed whole when it ends, so the outputs of
# binaries running together do not interleave.  UNIT_WRAP (e.g. "valgrind
# -q ...") is put in front of each binary.  Exit 77 means skipped.  Prints
# one summary line, naming the binaries that failed; their output comes last.
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
# Passing binaries' output first, failing ones' last: CI shows the tail.
pass=0 fail=0 skip=0 failed=""
for t in "$@"; do
	log=$out/$(basename "$t").log
	rc=$(cat "$log.rc" 2>/dev/null || echo 1)
	case $rc in
	0) pass=$((pass + 1)); cat "$log" ;;
	77) skip=$((skip + 1)); cat "$log"; echo "SKIP $t" ;;
	*) fail=$((fail + 1)); failed="$failed $t" ;;
	esac
done
for t in $failed; do
	log=$out/$(basename "$t").log
	echo "--- output of $t, which failed:"
	cat "$log"
	echo "FAIL $t (exit $(cat "$log.rc" 2>/dev/null || echo '?'))"
done
echo "unit binaries: $pass passed, $fail failed, $skip skipped${failed:+ (failed:$failed)}"
[ "$fail" = 0 ]
