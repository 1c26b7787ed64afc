#!/usr/bin/env bash
# Prints, for each test the last ctest run in build dir $1 failed, the lines of its output
# that say why (sanitizer reports, gtest failures, terminate messages), at most 12 each,
# and, for a test that hung, one line per thread of the stacks its hang report printed.
# ctest's own --output-on-failure prints the whole output mid-run; a CI log that keeps
# only its tail still shows these, after the summary.
set -u
dir=${1:?usage: ctest-failures.sh <build-dir>}
here=$(dirname "$0")
log=$dir/Testing/Temporary/LastTest.log
failed=$dir/Testing/Temporary/LastTestsFailed.log
[[ -f $log && -f $failed ]] || exit 0
while IFS=: read -r _ name; do
  echo "--- why $name failed:"
  output=$(awk -v name="$name" '
    $0 ~ "^[0-9]+/[0-9]+ Test: " && substr($0, index($0, "Test: ") + 6) == name { mine = 1; next }
    mine && /^<end of output>/ { exit }
    mine { print }
  ' "$log")
  grep -E 'ERROR: |SUMMARY: |leak of|Failure|terminate called|what\(\):|runtime error|Expected|Which is|Value of|Actual|has run for|actor system\(s\) running' \
    <<<"$output" | head -n 12
  if grep -q "every thread's stack follows" <<<"$output"; then
    awk -f "$here/condense-stacks.awk" <<<"$output" | head -n 16
  fi
done <"$failed"
