#!/bin/sh
# t-symbols.sh: every symbol the library exports starts with er_, and every exported function is documented
# in docs/reference/. Usage: t-symbols.sh SOURCE_DIR LIBRARY
set -eu
src=$1
lib=$2
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {print $3}')
bad=$(printf '%s\n' "$syms" | grep -v '^er_' | grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$' || true)
[ -z "$bad" ] || { echo "exported symbols without the er_ prefix:"; echo "$bad"; exit 1; }
n=0; missing=""
for s in $syms; do
  case $s in er_*) ;; *) continue ;; esac
  n=$((n + 1))
  grep -rq "\b$s\b" "$src/docs/reference" || missing="$missing $s"
done
[ -z "$missing" ] || { echo "exported but not documented in docs/reference:$missing"; exit 1; }
echo "symbols: $n passed, 0 failed"
