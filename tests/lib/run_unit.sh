#!/usr/bin/env bash
# Runs each unit-test binary given; 77 = skipped.  Prints one summary line.
set -u
pass=0 fail=0 skip=0
for t in "$@"; do
	"$t"
	rc=$?
	case $rc in
	0) pass=$((pass + 1)) ;;
	77) skip=$((skip + 1)); echo "SKIP $t" ;;
	*) fail=$((fail + 1)); echo "FAIL $t (exit $rc)" ;;
	esac
done
echo "unit binaries: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
