#!/usr/bin/env bash
# The fuzz smoke of `make test`: each target a fixed number of runs from its seed corpus (new inputs go to a
# temporary folder), then its reach (tests/fuzz/harness.h) held against the shares stated here: a target fails when
# fewer than MIN_CALLED percent of its inputs reach a call of the code it is for, or when a kind of call is never
# accepted; an input that runs 10 s or more (under the sanitizers) is a finding. The targets run side by side, JOBS at
# a time (default: the processor count); their lines are printed in the order given.
# usage: [JOBS=N] smoke.sh BUILD_DIR TARGET:RUNS:MIN_CALLED ...
set -u
build=$1; shift
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
out=$(mktemp -d)

# One target: its line into $out/K.line, and 0 into $out/K.ok when it passed.
one() {
  local k=$1 spec=$2 t runs min tmp inputs called never share
  IFS=: read -r t runs min <<<"$spec"
  tmp=$(mktemp -d)
  if ! ER_FUZZ_REACH=$tmp/reach "$build/tests/fuzz/fuzz_$t" -runs="$runs" -max_len=1024 -timeout=10 -artifact_prefix="$tmp/" \
       "$tmp" "tests/fuzz/corpus/$t" > "$tmp/log" 2>&1; then
    { echo "fuzz_$t: FINDING"; tail -30 "$tmp/log"; } > "$out/$k.line"
  elif [ ! -s "$tmp/reach" ]; then
    echo "fuzz_$t: wrote no reach counts" > "$out/$k.line"
  else
    inputs=$(awk '$1 == "inputs" {print $2}' "$tmp/reach")
    called=$(awk '$1 == "called" {print $2}' "$tmp/reach")
    never=$(awk '$1 == "kind" && $6 == 0 {printf " %s", $2}' "$tmp/reach")
    share=$(( inputs > 0 ? 100 * called / inputs : 0 ))
    if [ "$share" -lt "$min" ]; then
      echo "fuzz_$t: only $called of $inputs inputs ($share%) reached a call; at least $min% must" > "$out/$k.line"
    elif [ -n "$never" ]; then
      echo "fuzz_$t: never accepted:$never ($called of $inputs inputs reached a call)" > "$out/$k.line"
    else
      echo "fuzz_$t: $runs runs, $called of $inputs inputs ($share%) reached a call, every kind accepted, no finding" \
        > "$out/$k.line"
      echo 0 > "$out/$k.ok"
    fi
  fi
  rm -rf "$tmp"
}

k=0
for spec in "$@"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  one "$k" "$spec" &
  k=$((k + 1))
done
wait
passed=0
for ((i = 0; i < k; i++)); do
  if [ -s "$out/$i.line" ]; then cat "$out/$i.line"; else echo "target $((i + 1)) of $k wrote no result"; fi
  [ -e "$out/$i.ok" ] && passed=$((passed + 1))
done
rm -rf "$out"
echo "fuzz smoke: $passed passed, $(( k - passed )) failed"
[ "$passed" -eq "$k" ]
