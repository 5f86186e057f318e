/* bench_matmul.c: the cost of er_matmul + er_covers (any_order, fp16 inputs, fp32 output) next to a naive
 * per-element MPFR reference (each element's products summed exactly in MPFR at 128 bits, which is exact for
 * fp16 data, then rounded to fp32) measured in the same run. Prints `name: X s vs baseline Y s = Rx`.
 * Usage: bench_matmul [N ...] (default 512 1024). The baseline runs on at most 64 rows of each shape and is
 * scaled to the full shape (it is linear in the rows); the line says so. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <mpfr.h>
#include <exactref/exactref.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 42;
static double uniform(void) {
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    return (double)(rng >> 11) * 0x1p-53 * 2.0 - 1.0;
}

/* The naive reference: per element, exact MPFR sum, correctly rounded to fp32, compared with the output. */
static int naive_mpfr(const double *a, const double *b, const float *c, int rows, int K, int N) {
    mpfr_t acc, t;
    mpfr_init2(acc, 128);
    mpfr_init2(t, 64);
    int same = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < N; j++) {
            mpfr_set_zero(acc, 1);
            for (int k = 0; k < K; k++) {
                mpfr_set_d(t, a[(size_t)i * K + k], MPFR_RNDN);
                mpfr_mul_d(t, t, b[(size_t)k * N + j], MPFR_RNDN);
                mpfr_add(acc, acc, t, MPFR_RNDN);
            }
            same += mpfr_get_flt(acc, MPFR_RNDN) == c[(size_t)i * N + j];
        }
    mpfr_clear(acc);
    mpfr_clear(t);
    return same;
}

static void run(int n) {
    int M = n, K = n, N = n;
    uint16_t *A = malloc(sizeof *A * (size_t)M * K), *B = malloc(sizeof *B * (size_t)K * N);
    double *ad = malloc(sizeof *ad * (size_t)M * K), *bd = malloc(sizeof *bd * (size_t)K * N);
    float *C = malloc(sizeof *C * (size_t)M * N);
    for (size_t i = 0; i < (size_t)M * K; i++) {
        uint64_t bits;
        er_encode(&bits, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        A[i] = (uint16_t)bits;
        er_decode(&ad[i], ER_FP16, bits);
    }
    for (size_t i = 0; i < (size_t)K * N; i++) {
        uint64_t bits;
        er_encode(&bits, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        B[i] = (uint16_t)bits;
        er_decode(&bd[i], ER_FP16, bits);
    }
    /* the "kernel": fp32 accumulation in k order */
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) s += (float)(ad[(size_t)i * K + k] * bd[(size_t)k * N + j]);
            C[(size_t)i * N + j] = s;
        }
    er_tensor tA, tB, tC;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){M, N}, NULL, C);
    er_standard std;
    er_standard_init(&std);
    double t0 = now();
    er_ref *ref;
    er_report rep;
    double tm = 0;
    if (er_matmul(&ref, &tA, &tB) != ER_OK || (tm = now()) == 0 || er_covers(&rep, ref, &tC, &std) != ER_OK) {
        fprintf(stderr, "exactref: %s\n", er_last_error());
        exit(1);
    }
    double t1 = now();
    int rows = M < 64 ? M : 64;
    naive_mpfr(ad, bd, C, rows, K, N);
    double t2 = now();
    double tx = t1 - t0, tb = (t2 - t1) * ((double)M / rows);
    printf("matmul_covers_fp16_%dx%dx%d: %.3f s vs baseline %.3f s = %.3fx  (baseline: naive MPFR per element, "
           "%d of %d rows timed and scaled; er_matmul %.3f s, er_covers %.3f s; verdict %s, exact %lld, covered %lld)\n",
           M, K, N, tx, tb, tx / tb, rows, M, tm - t0, t1 - tm, er_report_all(&rep) ? "pass" : "FAIL",
           (long long)rep.counts[ER_CLASS_EXACT], (long long)rep.counts[ER_CLASS_COVERED]);
    er_report_clear(&rep);
    er_ref_free(ref);
    free(A); free(B); free(ad); free(bd); free(C);
}

int main(int argc, char **argv) {
    if (argc > 1) for (int i = 1; i < argc; i++) run(atoi(argv[i]));
    else { run(512); run(1024); }
    return 0;
}
