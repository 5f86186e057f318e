/* bench_matmul.c: the cost of er_matmul + er_covers (any_order, fp16 or bf16 inputs, fp32 output) next to
 * baselines measured in the same run: an fp64 GEMM of the same shape through OpenBLAS (when exactref was built
 * with it), and, up to 1024, a naive per-element MPFR reference (each element's products summed exactly in MPFR at
 * 128 bits, then rounded to fp32; timed on at most 64 rows and scaled, as the line says). Also prints the peak
 * memory exactref added, in bytes per output element. Against the GEMM: three rounds, each the GEMM then exactref,
 * and the medians. Prints `name: X s vs baseline Y s = Rx`.
 * Usage: bench_matmul [N ...] (default 512 1024 2048), N x N x N.
 *        bench_matmul --kscan: M = N = 1024 fp16 at K = 256, 1024 and 4096, er_covers's time per output element at
 *        each K and its ratio to the time at K = 256 (flat in K is the target: the decision is O(1) per element after
 *        the GEMM). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <mpfr.h>
#include <exactref/exactref.h>
#include "bench_util.h"

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

#ifdef BENCH_HAVE_BLAS
void cblas_dgemm(int order, int ta, int tb, int M, int N, int K, double alpha, const double *A, int lda, const double *B,
                 int ldb, double beta, double *C, int ldc);
void cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc);
#endif

static long maxrss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* The peak resident memory from a clean high-water mark: Linux resets VmHWM when "5" is written to
 * /proc/self/clear_refs; then VmHWM is read from /proc/self/status. Returns -1 where either is unavailable (the peak
 * is then measured against getrusage's lifetime maximum, which an earlier allocation may already have raised). */
static void peak_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) { fputs("5", f); fclose(f); }
}
/* A "Key: N kB" line of /proc/self/status (VmHWM, VmRSS), or -1. */
static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':' && sscanf(line + n + 1, "%ld", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}
static long peak_kb(void) { return status_kb("VmHWM"); }
static long rss_kb(void) { return status_kb("VmRSS"); }

/* One shape: the kernel's fp32 output, then three rounds of the baseline and exactref. Returns er_covers's median. */
static double run_shape(int M, int K, int N, er_format fmt, int verbose) {
    int n = M == K && K == N ? M : 0;
    const char *fname = fmt == ER_FP16 ? "fp16" : "bf16";
    uint16_t *A = malloc(sizeof *A * (size_t)M * K), *B = malloc(sizeof *B * (size_t)K * N);
    double *ad = malloc(sizeof *ad * (size_t)M * K), *bd = malloc(sizeof *bd * (size_t)K * N);
    float *C = malloc(sizeof *C * (size_t)M * N);
    for (size_t i = 0; i < (size_t)M * K; i++) {
        uint64_t bits;
        er_encode(&bits, fmt, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        A[i] = (uint16_t)bits;
        er_decode(&ad[i], fmt, bits);
    }
    for (size_t i = 0; i < (size_t)K * N; i++) {
        uint64_t bits;
        er_encode(&bits, fmt, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        B[i] = (uint16_t)bits;
        er_decode(&bd[i], fmt, bits);
    }
    /* the "kernel": fp32 accumulation (OpenBLAS sgemm when present, else in k order) */
#ifdef BENCH_HAVE_BLAS
    {
        float *af = malloc(sizeof(float) * (size_t)M * K), *bf = malloc(sizeof(float) * (size_t)K * N);
        for (size_t i = 0; i < (size_t)M * K; i++) af[i] = (float)ad[i];
        for (size_t i = 0; i < (size_t)K * N; i++) bf[i] = (float)bd[i];
        cblas_sgemm(101, 111, 111, M, N, K, 1.0f, af, K, bf, N, 0.0f, C, N);
        free(af);
        free(bf);
    }
#else
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) s += (float)(ad[(size_t)i * K + k] * bd[(size_t)k * N + j]);
            C[(size_t)i * N + j] = s;
        }
#endif
    er_tensor tA, tB, tC;
    er_tensor_view(&tA, fmt, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, fmt, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){M, N}, NULL, C);
    er_standard std;
    er_standard_init(&std);
    /* three rounds, each the baseline then exactref, medians reported: neither side always runs first (after the
     * kernel's GEMM, whose BLAS threads keep spinning a while) */
    double tx = 0, tb = 0, txs[3], tms[3], tcs[3], tbs[3];
    char info[256] = "";
    long rss0 = rss_kb(), clean = rss0 >= 0 && peak_kb() >= 0;
    if (clean) peak_reset();
    else rss0 = maxrss_kb();
    for (int round = 0; round < 3; round++) {
#ifdef BENCH_HAVE_BLAS
        double *cd = malloc(sizeof(double) * (size_t)M * N);
        double t2 = now();
        cblas_dgemm(101, 111, 111, M, N, K, 1.0, ad, K, bd, N, 0.0, cd, N);
        tbs[round] = now() - t2;
        free(cd);
#else
        tbs[round] = 0;
#endif
        double t0 = now();
        er_ref *ref;
        er_report rep;
        double tm = 0;
        if (er_matmul(&ref, &tA, &tB) != ER_OK || (tm = now()) == 0 || er_covers(&rep, ref, &tC, &std) != ER_OK) {
            fprintf(stderr, "exactref: %s\n", er_last_error());
            exit(1);
        }
        double t1 = now();
        txs[round] = t1 - t0;
        tms[round] = tm - t0;
        tcs[round] = t1 - tm;
        if (round == 0) {
            double bytes = (double)((clean ? peak_kb() : maxrss_kb()) - rss0) * 1024.0 / ((double)M * N);
            snprintf(info, sizeof info, "fast path %s, peak %.1f bytes per output element (%s); verdict %s, exact %lld, "
                     "covered %lld", er_ref_fast(ref) ? "yes" : "no", bytes,
                     clean ? "from a clean high-water mark" : "lifetime maximum", er_report_all(&rep) ? "pass" : "FAIL",
                     (long long)rep.counts[ER_CLASS_EXACT], (long long)rep.counts[ER_CLASS_COVERED]);
        }
        er_report_clear(&rep);
        er_ref_free(ref);
    }
    tx = median3(txs);
    tb = median3(tbs);
    if (!verbose) {
        free(A); free(B); free(ad); free(bd); free(C);
        return median3(tcs);
    }
    char full[400];
    snprintf(full, sizeof full, "er_matmul %.3f s, er_covers %.3f s (medians of 3), %s", median3(tms), median3(tcs), info);
#ifdef BENCH_HAVE_BLAS
    printf("matmul_covers_%s_%dx%dx%d: %.3f s vs baseline %.3f s = %.2fx  (baseline: fp64 GEMM of the same shape, "
           "OpenBLAS dgemm; medians of 3 alternating rounds; %s)\n", fname, M, K, N, tx, tb, tx / tb, full);
#endif
    if (n && n <= 1024) {
        int rows = M < 64 ? M : 64;
        double t3 = now();
        naive_mpfr(ad, bd, C, rows, K, N);
        tb = (now() - t3) * ((double)M / rows);
        printf("matmul_covers_%s_%dx%dx%d: %.3f s vs baseline %.3f s = %.3fx  (baseline: naive MPFR per element, "
               "%d of %d rows timed and scaled; %s)\n", fname, M, K, N, tx, tb, tx / tb, rows, M, full);
    }
    free(A); free(B); free(ad); free(bd); free(C);
    return median3(tcs);
}

static void run(int n, er_format fmt) { run_shape(n, n, n, fmt, 1); }

/* er_covers per output element at M = N = 1024 and K = 256, 1024, 4096, each against K = 256's in the same run: three
 * passes over the three shapes (each pass's value the median of its three rounds), and the median of the passes. */
static void kscan(void) {
    static const int Ks[3] = {256, 1024, 4096};
    double t[3], v[3][3];
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < 3; i++) v[i][pass] = run_shape(1024, Ks[i], 1024, ER_FP16, 0);
    for (int i = 0; i < 3; i++) t[i] = median3(v[i]);
    for (int i = 0; i < 3; i++)
        printf("matmul_covers_per_element_fp16_1024x%dx1024: %.2f ns vs baseline %.2f ns = %.2fx  (er_covers only, "
               "median of 3 interleaved passes; baseline: the same at K = 256; flat in K is the target)\n", Ks[i],
               t[i] * 1e9 / (1024.0 * 1024), t[0] * 1e9 / (1024.0 * 1024), t[i] / t[0]);
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--kscan")) { kscan(); return 0; }
    if (argc > 1) for (int i = 1; i < argc; i++) { run(atoi(argv[i]), ER_FP16); run(atoi(argv[i]), ER_BF16); }
    else { run(512, ER_FP16); run(1024, ER_FP16); run(2048, ER_FP16); run(2048, ER_BF16); }
    return 0;
}
