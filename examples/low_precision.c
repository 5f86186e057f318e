/* low_precision.c: checking kernels that accumulate in fp16, and kernels with a fixed summation order.
 *
 * Two plain-C "kernels" on fp16 inputs:
 *   - acc16: adds the products one at a time into an fp16 accumulator (each product and each addition
 *     rounded to fp16), as a kernel with an fp16 accumulator does;
 *   - loop32: adds the products one at a time into an fp32 accumulator with fmaf, as a CUDA-core loop does.
 * The fp16-accumulating kernel is covered by compute=fp16 and not by the fp32 claim. The fp32 loop is
 * reproduced bit for bit by er_emulate under `sequential fma=always`, so the test can demand equality. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <exactref/exactref.h>

enum { M = 24, K = 512, N = 16 };

static uint64_t rng_state = 0x243F6A8885A308D3u;
static double uniform(void) {
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

static double half_value(uint16_t h) { double v; er_decode(&v, ER_FP16, h); return v; }

static void check(const char *what, const er_tensor *A, const er_tensor *B, const er_tensor *C, const char *order,
                  const char *options) {
    er_report rep;
    if (er_matmul_covers(&rep, A, B, C, order, options) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
    printf("%-28s under %-10s %-30s covered: %s", what, order, options, er_report_all(&rep) ? "True" : "False");
    if (!er_report_all(&rep)) printf("  (%lld of %lld outside, worst %.0f ulp)", (long long)rep.counts[ER_CLASS_OUTSIDE],
                                     (long long)rep.n, rep.worst.distance_ulps);
    printf("\n");
    er_report_clear(&rep);
}

int main(void) {
    static uint16_t A[M * K], B[K * N], C16[M * N];
    static float C32[M * N], E32[M * N];
    for (int i = 0; i < M * K; i++) { uint64_t b; er_encode(&b, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); A[i] = (uint16_t)b; }
    for (int i = 0; i < K * N; i++) { uint64_t b; er_encode(&b, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); B[i] = (uint16_t)b; }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc16 = 0;
            float acc32 = 0;
            for (int k = 0; k < K; k++) {
                double a = half_value(A[i * K + k]), b = half_value(B[k * N + j]);
                /* fp16 accumulator: the product rounded to fp16, then added and rounded to fp16 (a*b and the sum
                 * of two fp16 values are exact doubles, so each step rounds once) */
                double p16;
                er_round_double(&p16, ER_FP16, a * b, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
                er_round_double(&acc16, ER_FP16, acc16 + p16, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
                acc32 = fmaf((float)a, (float)b, acc32);
            }
            uint64_t bits;
            er_encode(&bits, ER_FP16, acc16, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
            C16[i * N + j] = (uint16_t)bits;
            C32[i * N + j] = acc32;
        }
    er_tensor tA, tB, t16, t32, tE;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&t16, ER_FP16, 2, (int64_t[]){M, N}, NULL, C16);
    er_tensor_view(&t32, ER_FP32, 2, (int64_t[]){M, N}, NULL, C32);
    er_tensor_view(&tE, ER_FP32, 2, (int64_t[]){M, N}, NULL, E32);

    check("fp16-accumulating kernel", &tA, &tB, &t16, "any_order", "compute=fp32");
    check("fp16-accumulating kernel", &tA, &tB, &t16, "any_order", "compute=fp16");
    check("fp16-accumulating kernel", &tA, &tB, &t16, "sequential", "compute=fp16");
    check("fp32 loop with fmaf", &tA, &tB, &t32, "any_order", "compute=fp32");
    check("fp32 loop with fmaf", &tA, &tB, &t32, "sequential", "compute=fp32");

    /* A fixed order has exactly one correct output: ask for it. */
    er_ref *ref;
    er_standard std;
    er_matmul(&ref, &tA, &tB);
    er_standard_parse(&std, "sequential", "compute=fp32 fma=always");
    if (er_emulate(ref, &tE, &std) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); return 1; }
    int same = 0;
    for (int i = 0; i < M * N; i++) same += E32[i] == C32[i];
    printf("er_emulate(sequential fma=always) equals the fp32 loop in %d of %d elements\n", same, M * N);
    er_ref_free(ref);
    return 0;
}
