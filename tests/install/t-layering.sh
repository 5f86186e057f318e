#!/bin/sh
# t-layering.sh: the dependency rules of docs/design.md over the #include lines of src/. Each folder includes headers
# of the folders its row of the design's table allows and no others; the engine (src/covers/) reaches the ops only
# through ops/module.h, which itself includes only core/ and format/; no file outside src/covers/ includes a header of
# it. Usage: t-layering.sh SOURCE_DIR
set -eu
src=$1/src
fail=0
rules=0
incl() { grep -h '^#include "' "$@" | sed 's/^#include "\([^"]*\)".*/\1/' | sort -u; }
# allowed FOLDER "OTHER FOLDERS": the folders whose headers FOLDER's files may include (its own always)
allowed() {
    rules=$((rules + 1))
    pat="^($1|$(echo "$2" | tr ' ' '|'))/"
    bad=$(incl "$src/$1"/* | grep -v -E "$pat" || true)
    [ -z "$bad" ] || { echo "src/$1/ includes beyond $1 and $2:"; echo "$bad"; fail=1; }
}
allowed core ""
allowed format "core"
allowed exact "core format"
allowed tensor "core format"
allowed standard "core format"
allowed enclose "core format exact"
allowed ops "core format exact tensor standard enclose"
allowed covers "core format tensor ops"
allowed cuda "core format tensor ops"
rules=$((rules + 1))
bad=$(incl "$src"/covers/* | grep '^ops/' | grep -v '^ops/module\.h$' || true)
[ -z "$bad" ] || { echo "src/covers/ includes of src/ops/ beyond module.h:"; echo "$bad"; fail=1; }
rules=$((rules + 1))
bad=$(incl "$src"/ops/module.h | grep -v -E '^(core|format)/' || true)
[ -z "$bad" ] || { echo "ops/module.h includes beyond core/ and format/:"; echo "$bad"; fail=1; }
rules=$((rules + 1))
bad=$(grep -l '^#include "covers/' $(find "$src" -name '*.[ch]' -o -name '*.cu' | grep -v '/covers/') || true)
[ -z "$bad" ] || { echo "files outside src/covers/ that include its headers:"; echo "$bad"; fail=1; }
[ $fail -eq 0 ] || exit 1
echo "layering: $rules rules passed, 0 failed"
