#!/bin/sh
# t-guide.sh: a guide's shown output is what the program prints. The block after the line
# "<!-- output of: NAME -->" in the guide must equal the output of the program.
# Usage: t-guide.sh GUIDE.md NAME PROGRAM
set -eu
guide=$1
name=$2
prog=$3
want=$(awk -v tag="<!-- output of: $name -->" '
  $0 == tag {armed = 1; next}
  armed && /^```/ { if (inside) exit; inside = 1; next }
  inside {print}' "$guide")
[ -n "$want" ] || { echo "no output block for $name in $guide"; exit 1; }
got=$("$prog") || true
if [ "$got" != "$want" ]; then
  echo "the guide $guide shows an output that $name does not print"
  printf '%s\n' "$want" > /tmp/er-guide-want.$$; printf '%s\n' "$got" > /tmp/er-guide-got.$$
  diff -u /tmp/er-guide-want.$$ /tmp/er-guide-got.$$ || true
  rm -f /tmp/er-guide-want.$$ /tmp/er-guide-got.$$
  exit 1
fi
echo "guide: 1 passed, 0 failed"
