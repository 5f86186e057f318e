#!/bin/sh
# t-layering.sh: the dependency rules of docs/design.md (Op modules), over the #include lines. The engine
# (src/covers/) includes of src/ only core/, tensor/ and ops/module.h; ops/module.h includes only core/; no file
# outside src/covers/ includes a header of src/covers/; src/enclose/ includes nothing of src/ops/ or src/cuda/.
# Usage: t-layering.sh SOURCE_DIR
set -eu
src=$1/src
fail=0
incl() { grep -h '^#include "' "$@" | sed 's/^#include "\([^"]*\)".*/\1/' | sort -u; }
bad=$(incl "$src"/covers/*.c | grep -v -E '^(core/|tensor/|ops/module\.h$)' || true)
[ -z "$bad" ] || { echo "src/covers/ includes beyond core/, tensor/ and ops/module.h:"; echo "$bad"; fail=1; }
bad=$(incl "$src"/ops/module.h | grep -v '^core/' || true)
[ -z "$bad" ] || { echo "ops/module.h includes beyond core/:"; echo "$bad"; fail=1; }
bad=$(grep -l '^#include "covers/' $(find "$src" -name '*.[ch]' -o -name '*.cu' | grep -v '/covers/') || true)
[ -z "$bad" ] || { echo "files outside src/covers/ that include its headers:"; echo "$bad"; fail=1; }
bad=$(incl "$src"/enclose/* | grep -E '^(ops|cuda|covers)/' || true)
[ -z "$bad" ] || { echo "src/enclose/ includes ops/, cuda/ or covers/:"; echo "$bad"; fail=1; }
[ $fail -eq 0 ] || exit 1
echo "layering: 4 rules passed, 0 failed"
