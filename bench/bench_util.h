/* bench_util.h: what the bench programs share: a monotonic clock, the median of three timings, a baseline's rows on
 * exactref's thread count, and torch's layer_norm statistics in fp32. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline double median3(const double *v) {
    double a = v[0], b = v[1], c = v[2];
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

/* The threads a baseline runs on: exactref's (EXACTREF_THREADS, else every online core), at most 64. */
static inline int bench_threads(void) {
    const char *e = getenv("EXACTREF_THREADS");
    long n = e && *e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* fn(ctx, r0, r1, t) on nt threads, thread t taking rows [rows t / nt, rows (t + 1) / nt). */
typedef void (*bench_rows_fn)(void *ctx, int64_t r0, int64_t r1, int t);
typedef struct bench_rows_job { bench_rows_fn fn; void *ctx; int64_t r0, r1; int t; } bench_rows_job;
static inline void *bench_rows_run(void *v) {
    bench_rows_job *j = v;
    j->fn(j->ctx, j->r0, j->r1, j->t);
    return NULL;
}
static inline void bench_rows(int nt, int64_t rows, bench_rows_fn fn, void *ctx) {
    pthread_t th[64];
    bench_rows_job jobs[64];
    int started[64] = {0};
    for (int t = 0; t < nt; t++) jobs[t] = (bench_rows_job){fn, ctx, rows * t / nt, rows * (t + 1) / nt, t};
    for (int t = 1; t < nt; t++) started[t] = pthread_create(&th[t], NULL, bench_rows_run, &jobs[t]) == 0;
    bench_rows_run(&jobs[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else bench_rows_run(&jobs[t]);
    }
}

/* torch's vectorized CUDA layer_norm statistics in fp32 (n a multiple of 4): 128 threads, thread t updating its Welford
 * state over the 4 elements of vectors t, t + 128, ... (mean += delta (1/count), m2 += delta (x - mean)), then torch's
 * combines (coef = 1/count, mean = nA meanA + nB meanB, m2 = m2A + m2B + delta^2 countA nB) in a 5-level shfl_down tree
 * per warp and a 2-level tree over the 4 warps. */
static inline void torch_welford(const float *x, int n, float *mean, float *m2) {
    float M[128], S[128], C[128];
    for (int t = 0; t < 128; t++) {
        M[t] = S[t] = C[t] = 0;
        for (int v = t; v < n / 4; v += 128)
            for (int k = 0; k < 4; k++) {
                float xv = x[4 * v + k], delta = xv - M[t];
                C[t] += 1;
                M[t] += delta * (1.0f / C[t]);
                S[t] += delta * (xv - M[t]);
            }
    }
#define TW_COMBINE(b, a) do {                                                                                    \
        float cnt = C[b] + C[a], d = M[b] - M[a];                                                                \
        if (cnt > 0) {                                                                                           \
            float coef = 1.0f / cnt, nA = C[a] * coef, nB = C[b] * coef;                                         \
            float mn = nA * M[a] + nB * M[b];                                                                    \
            S[b] = S[a] + S[b] + d * d * C[a] * nB;                                                              \
            M[b] = mn;                                                                                           \
        } else M[b] = S[b] = 0;                                                                                  \
        C[b] = cnt;                                                                                              \
    } while (0)
    for (int o = 16; o >= 1; o /= 2)
        for (int w = 0; w < 128; w += 32)
            for (int l = 0; l + o < 32; l++) TW_COMBINE(w + l, w + l + o);
    for (int o = 2; o >= 1; o /= 2)
        for (int w = 0; w < o; w++) TW_COMBINE(w * 32, (w + o) * 32);
#undef TW_COMBINE
    *mean = M[0];
    *m2 = S[0];
}

#endif
