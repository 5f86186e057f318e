/* bench_emulate.c: er_emulate of an N x N x N fp16 matmul under fixed fp32 orders (sequential, and blocked:32 with
 * sequential blocks added in order), next to a plain C loop that adds the products in the same order in float
 * (the loop runs over k, then j, so that the compiler vectorises it over the output row, built at -O3 for that; each
 * element still adds its products in k order). Both results are compared bit for bit. Three alternating rounds, medians.
 * Prints `name: X s vs baseline Y s = Rx`. Usage: bench_emulate [N ...] (default 512 1024). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <exactref/exactref.h>
#include "bench_util.h"

static uint64_t rng = 11;
static double uniform(void) {
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    return (double)(rng >> 11) * 0x1p-53 * 2.0 - 1.0;
}

/* The plain loop: C = A B in float, each element's products added in k order, in blocks of `block` (0: one block)
 * whose partial sums start at zero and are added to the total in order. */
static void plain_loop(int n, const float *a, const float *b, float *c, float *part, int block) {
    int bl = block ? block : n;
    for (int i = 0; i < n; i++) {
        float *ci = c + (size_t)i * n;
        memset(ci, 0, sizeof(float) * (size_t)n);
        for (int k0 = 0; k0 < n; k0 += bl) {
            memset(part, 0, sizeof(float) * (size_t)n);
            for (int k = k0; k < k0 + bl && k < n; k++) {
                float aik = a[(size_t)i * n + k];
                const float *bk = b + (size_t)k * n;
                for (int j = 0; j < n; j++) part[j] = part[j] + aik * bk[j];
            }
            for (int j = 0; j < n; j++) ci[j] = ci[j] + part[j];
        }
    }
}

static void run(int n, int block) {
    uint16_t *A = malloc(2 * (size_t)n * n), *B = malloc(2 * (size_t)n * n);
    float *a = malloc(4 * (size_t)n * n), *b = malloc(4 * (size_t)n * n), *c = malloc(4 * (size_t)n * n);
    float *e = malloc(4 * (size_t)n * n), *part = malloc(4 * (size_t)n);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        uint64_t bits;
        double v;
        er_encode(&bits, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        A[i] = (uint16_t)bits;
        er_decode(&v, ER_FP16, bits);
        a[i] = (float)v;
        er_encode(&bits, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        B[i] = (uint16_t)bits;
        er_decode(&v, ER_FP16, bits);
        b[i] = (float)v;
    }
    er_tensor tA, tB, tE;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){n, n}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){n, n}, NULL, B);
    er_tensor_view(&tE, ER_FP32, 2, (int64_t[]){n, n}, NULL, e);
    er_standard std;
    char opts[64];
    snprintf(opts, sizeof opts, "fma=never%s", block ? " inner=sequential outer=sequential" : "");
    char order[32];
    snprintf(order, sizeof order, block ? "blocked:%d" : "sequential", block);
    if (er_standard_parse(&std, order, opts) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
    er_ref *ref;
    double t0 = now();
    if (er_matmul(&ref, &tA, &tB) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
    double tref = now() - t0, tb[3], tx[3];
    for (int r = 0; r < 3; r++) {
        double t1 = now();
        plain_loop(n, a, b, c, part, block);
        double t2 = now();
        if (er_emulate(ref, &tE, &std) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
        double t3 = now();
        tb[r] = t2 - t1;
        tx[r] = t3 - t2;
    }
    int same = memcmp(c, e, 4 * (size_t)n * n) == 0;
    double x = median3(tx), y = median3(tb);
    printf("emulate_%s_%dx%dx%d: %.3f s vs baseline %.3f s = %.2fx  (baseline: a plain C float loop of the same order; "
           "medians of 3 alternating rounds; er_matmul %.3f s before; bit-identical: %s)\n",
           block ? "blocked32" : "sequential", n, n, n, x, y, x / y, tref, same ? "yes" : "NO");
    er_ref_free(ref);
    free(A); free(B); free(a); free(b); free(c); free(e); free(part);
    if (!same) exit(1);
}

int main(int argc, char **argv) {
    int sizes[16], ns = 0;
    for (int i = 1; i < argc && ns < 16; i++) sizes[ns++] = atoi(argv[i]);
    if (ns == 0) { sizes[0] = 512; sizes[1] = 1024; ns = 2; }
    for (int i = 0; i < ns; i++) { run(sizes[i], 0); run(sizes[i], 32); }
    return 0;
}
