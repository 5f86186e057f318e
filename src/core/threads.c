#define _POSIX_C_SOURCE 200809L /* sysconf */
/* threads.c: how many threads a piece of work gets, running one job per thread, and whether the AVX2 loops run. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/internal.h"

/* The online processors, asked of the system once per process: glibc's sysconf reads them from /sys, about 8 us a
 * call on a 2-core EPYC, and every parallel step asked (a sixth of a 64^3 matmul check from Python). */
static long er_online_processors(void) {
    static long cached;
    long n = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (n == 0) {
        n = sysconf(_SC_NPROCESSORS_ONLN);
        n = n < 1 ? 1 : n;
        __atomic_store_n(&cached, n, __ATOMIC_RELAXED);
    }
    return n;
}

int er__num_threads(int64_t work) {
    const char *e = getenv("EXACTREF_THREADS");
    long n = e && *e ? strtol(e, NULL, 10) : er_online_processors();
    if (n < 1) n = 1;
    if (n > ER_MAX_THREADS) n = ER_MAX_THREADS;
    int64_t useful = work / (INT64_C(1) << 18) + 1; /* a thread is worth about 2^18 products */
    return (int)(n < useful ? n : useful);
}

/* One thread's share of er__prefault's pages. */
typedef struct er_fault_job {
    volatile char *p;
    size_t n;
} er_fault_job;

static void *er_fault_run(void *arg) {
    er_fault_job *j = arg;
    for (size_t i = 0; i < j->n; i += 4096) j->p[i] = 0;
    return NULL;
}

void er__prefault(void *p, size_t bytes) {
    if (!p || bytes < ((size_t)16 << 20)) return;
    int nt = er__num_threads((int64_t)(bytes / 4)); /* 1 MiB of pages a thread at least */
    er_fault_job jobs[ER_MAX_THREADS];
    size_t pages = (bytes + 4095) / 4096;
    for (int t = 0; t < nt; t++) {
        size_t a = pages * (size_t)t / (size_t)nt * 4096, b = pages * (size_t)(t + 1) / (size_t)nt * 4096;
        jobs[t].p = (volatile char *)p + a;
        jobs[t].n = (b < bytes ? b : bytes) - a;
    }
    er__run_jobs(jobs, sizeof jobs[0], nt, er_fault_run);
}

int er__simd(void) {
#if ER_HAVE_AVX2
    const char *e = getenv("EXACTREF_SIMD");
    int cap = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "1") == 0 ? 1 : 2;
    __builtin_cpu_init();
    int level = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (level && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
        level = 2;
    return level < cap ? level : cap;
#else
    return 0;
#endif
}

void er__run_jobs(void *jobs, size_t size, int n, void *(*fn)(void *)) {
    pthread_t th[ER_MAX_THREADS];
    int started[ER_MAX_THREADS] = {0};
    char *j = jobs;
    for (int t = 1; t < n; t++) started[t] = pthread_create(&th[t], NULL, fn, j + (size_t)t * size) == 0;
    if (n > 0) fn(j);
    for (int t = 1; t < n; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else fn(j + (size_t)t * size);
    }
}

void er__run_jobs_progress(void *jobs, size_t size, int n, void *(*fn)(void *), int64_t total) {
    er__progress_begin(total);
    er__run_jobs(jobs, size, n, fn);
    er__progress_end();
}
