#!/usr/bin/env bash
# The fuzz smoke of `make test`: each target a fixed number of runs from its seed corpus (new inputs go to a
# temporary folder), then its reach (tests/fuzz/harness.h) held against the shares stated here: a target fails when
# fewer than MIN_CALLED percent of its inputs reach a call of the code it is for, or when a kind of call is never
# accepted; an input that runs 10 s or more (under the sanitizers) is a finding. usage: smoke.sh BUILD_DIR TARGET:RUNS:MIN_CALLED ...
set -u
build=$1; shift
fail=0; passed=0
for spec in "$@"; do
  IFS=: read -r t runs min <<<"$spec"
  tmp=$(mktemp -d)
  if ! ER_FUZZ_REACH=$tmp/reach "$build/tests/fuzz/fuzz_$t" -runs="$runs" -max_len=1024 -timeout=10 -artifact_prefix="$tmp/" \
       "$tmp" "tests/fuzz/corpus/$t" > "$tmp/log" 2>&1; then
    echo "fuzz_$t: FINDING"; tail -30 "$tmp/log"; fail=1; rm -rf "$tmp"; continue
  fi
  if [ ! -s "$tmp/reach" ]; then echo "fuzz_$t: wrote no reach counts"; fail=1; rm -rf "$tmp"; continue; fi
  inputs=$(awk '$1 == "inputs" {print $2}' "$tmp/reach")
  called=$(awk '$1 == "called" {print $2}' "$tmp/reach")
  never=$(awk '$1 == "kind" && $6 == 0 {printf " %s", $2}' "$tmp/reach")
  share=$(( inputs > 0 ? 100 * called / inputs : 0 ))
  if [ "$share" -lt "$min" ]; then
    echo "fuzz_$t: only $called of $inputs inputs ($share%) reached a call; at least $min% must"; fail=1
  elif [ -n "$never" ]; then
    echo "fuzz_$t: never accepted:$never ($called of $inputs inputs reached a call)"; fail=1
  else
    echo "fuzz_$t: $runs runs, $called of $inputs inputs ($share%) reached a call, every kind accepted, no finding"
    passed=$((passed + 1))
  fi
  rm -rf "$tmp"
done
echo "fuzz smoke: $passed passed, $(( $# - passed )) failed"
exit $fail
