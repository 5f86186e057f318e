/* cuda_splitk.c: a real CUDA split-K kernel checked with exactref straight from device memory.
 * Prints one line per shape, then the report of the variant whose last chunk drops its last product. */
#include <stdio.h>
#include <stdlib.h>
#include <exactref/exactref.h>
#include "splitk.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Du;
static double uniform(void) {
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

static int check(int M, int K, int N, int S, int buggy, int print_report) {
    uint16_t *A = malloc(2 * (size_t)M * K), *B = malloc(2 * (size_t)K * N);
    for (int i = 0; i < M * K; i++) { uint64_t b; er_encode(&b, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); A[i] = (uint16_t)b; }
    for (int i = 0; i < K * N; i++) { uint64_t b; er_encode(&b, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); B[i] = (uint16_t)b; }
    float *dC;
    int e = splitk_run(A, B, M, N, K, S, buggy, &dC, NULL);
    if (e) { fprintf(stderr, "CUDA error %d\n", e); exit(1); }
    er_tensor tA, tB, tC;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){M, N}, NULL, dC); /* a device pointer */
    er_ref *ref;
    er_standard std;
    er_report rep;
    char opts[64];
    snprintf(opts, sizeof opts, "fma=always outer=any");
    char order[32];
    snprintf(order, sizeof order, "split:%d", S);
    if (er_matmul(&ref, &tA, &tB) != ER_OK || er_standard_parse(&std, order, opts) != ER_OK ||
        er_covers_device(&rep, ref, &tC, &std, NULL) != ER_OK) {
        fprintf(stderr, "exactref: %s\n", er_last_error());
        exit(1);
    }
    int ok = er_report_all(&rep);
    printf("(%d, %d, %d) split:%d%s covered: %s\n", M, K, N, S, buggy ? " with the tail bug," : "", ok ? "True" : "False");
    if (print_report) er_report_fprint(stdout, &rep);
    er_report_clear(&rep);
    er_ref_free(ref);
    splitk_free(dC);
    free(A);
    free(B);
    return ok;
}

int main(void) {
    if (!er_cuda_available() || splitk_device_count() == 0) {
        printf("cuda_splitk: no CUDA device here (or exactref built without CUDA): nothing to run\n");
        return 0;
    }
    static const int shapes[][4] = {{1, 1, 1, 1}, {3, 5, 7, 2}, {64, 256, 32, 4}, {17, 300, 9, 7}};
    int fails = 0;
    for (int i = 0; i < 4; i++) fails += !check(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], 0, 0);
    printf("\n");
    int caught = !check(17, 300, 9, 7, 1, 1);
    return fails == 0 && caught ? 0 : 1;
}
