#!/bin/sh
# t-readme.sh: README.md's C snippet, compiled as written against the build tree, passes on a correct output and
# fails (with "refused" in its report) when its standard is mistyped: a refused call never passes silently.
# Usage: t-readme.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the snippet: the ```c block after the "## In a unit test" heading, less its #include line
awk '/^## In a unit test/ {armed = 1; next}
     armed && /^```c/ {inside = 1; next}
     inside && /^```/ {exit}
     inside && !/^#include/ {print}' "$src/README.md" > "$work/snippet.inc"
grep -q er_matmul_covers "$work/snippet.inc" || { echo "no C snippet under '## In a unit test' in README.md"; exit 1; }
sed 's/"mma:sm90"/"mma:sm_90"/' "$work/snippet.inc" > "$work/mistyped.inc"
cmp -s "$work/snippet.inc" "$work/mistyped.inc" && { echo "the snippet's standard is not \"mma:sm90\""; exit 1; }
for which in snippet mistyped; do
  cat > "$work/$which.c" <<EOC
#include <stdio.h>
#include <exactref/exactref.h>
/* the snippet as the body of a test function over the kernel's operands and output */
static int check(int64_t M, int64_t K, int64_t N, void *a, void *b, void *c_from_gpu) {
#include "$which.inc"
    return passed;
}
int main(void) {
    /* small integers: every order and every tensor-core block gives the exact product, so the output is correct */
    enum { M = 3, K = 20, N = 5 };
    uint16_t a[M * K], b[K * N];
    float c[M * N];
    for (int i = 0; i < M * K; i++) { uint64_t bits; er_encode(&bits, ER_FP16, (double)(i % 7) - 3, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); a[i] = (uint16_t)bits; }
    for (int i = 0; i < K * N; i++) { uint64_t bits; er_encode(&bits, ER_FP16, (double)(i % 5) - 2, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); b[i] = (uint16_t)bits; }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)(((i * K + k) % 7) - 3) * (double)(((k * N + j) % 5) - 2);
            c[i * N + j] = (float)s;
        }
    return check(M, K, N, a, b, c) ? 0 : 1;
}
EOC
  cc -std=c11 -Wall -Werror -I "$src/include" -I "$build/include" -I "$work" "$work/$which.c" \
     -L "$build" -lexactref -Wl,-rpath,"$build" -o "$work/$which"
done
"$work/snippet" 2> "$work/snippet.err" || { echo "the README snippet failed on a correct output:"; cat "$work/snippet.err"; exit 1; }
if "$work/mistyped" 2> "$work/mistyped.err"; then
  echo "the README snippet passed with a mistyped standard:"; cat "$work/mistyped.err"; exit 1
fi
grep -q "refused (ER_ERR_STANDARD)" "$work/mistyped.err" || { echo "the refused check's report does not say so:"; cat "$work/mistyped.err"; exit 1; }
echo "readme: 2 passed, 0 failed"
