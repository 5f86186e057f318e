#!/bin/sh
# t-style.sh: the style the formatter configurations state (docs/conventions.md): no line of the library's C, CUDA
# and headers (src/, include/) longer than 120 columns, and the Python of the repository clean under ruff (ruff.toml:
# pyflakes, pycodestyle, 120 columns). Usage: t-style.sh SOURCE_DIR PYTHON
set -eu
root=$1
py=${2:-python3}
fail=0
long=$(find "$root/src" "$root/include" -name '*.[ch]' -o -name '*.cu' -o -name '*.in' | sort |
       xargs awk 'length > 120 { printf "%s:%d: %d columns\n", FILENAME, FNR, length }')
[ -z "$long" ] || { echo "lines over 120 columns:"; echo "$long"; fail=1; }
if ! "$py" -m ruff --version >/dev/null 2>&1; then
    echo "ruff is not installed for $py: make deps installs it (or: $py -m pip install ruff)"
    exit 1
fi
(cd "$root" && "$py" -m ruff check --quiet .) || fail=1
[ $fail -eq 0 ] || exit 1
echo "style: no line over 120 columns in src/ and include/; ruff check clean"
