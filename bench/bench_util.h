/* bench_util.h: what the bench programs share: a monotonic clock and the median of three timings. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <time.h>

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline double median3(const double *v) {
    double a = v[0], b = v[1], c = v[2];
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

#endif
