/* internal.h: what every module of the library shares (never installed): status and messages, the checks'
macros, bits of doubles, threads, the memory cap and checked arithmetic. Formats are format/format.h's.
 *
 * Implementation assumptions (checked at compile time where C allows):
 *  - double is IEEE 754 binary64 and double operations round to nearest-even (the default environment;
 *    the library never changes it) and are not contracted (built with -ffp-contract=off);
 *  - int64_t and uint64_t exist; signed right shift is arithmetic (GCC and Clang guarantee it);
 *  - unsigned __int128 is available (GCC, Clang). */
#ifndef ER_INTERNAL_H
#define ER_INTERNAL_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/exactref.h>

_Static_assert(sizeof(double) == 8 && DBL_MANT_DIG == 53 && DBL_MAX_EXP == 1024, "double must be binary64");
_Static_assert(FLT_RADIX == 2, "binary floating point required");
_Static_assert(((-5) >> 1) == -3, "arithmetic right shift of negative integers required");

#define ER_INTERNAL __attribute__((visibility("hidden")))

/* Records a detailed message for er_last_error() and returns `status`. */
ER_INTERNAL er_status er__fail(er_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clears the last error message of this thread (called at the start of each public entry point). */
ER_INTERNAL void er__ok(void);
#define ER_RETURN_IF_ERROR(expr) do { er_status er__s = (expr); if (er__s != ER_OK) return er__s; } while (0)
#define ER_CHECK_NULL(p, name) do { if ((p) == NULL) return er__fail(ER_ERR_NULL, "%s is NULL", (name)); } while (0)

/* An always-on assertion for broken internal invariants: it never aborts, it makes the call fail. */
#define ER_ASSERT_OR_FAIL(cond)                                                                                   \
    do {                                                                                                          \
        if (!(cond))                                                                                              \
            return er__fail(ER_ERR_INTERNAL,                                                                      \
                            "internal invariant '%s' failed at %s:%d; please report this with the inputs", #cond, \
                            __FILE__, __LINE__);                                                                  \
    } while (0)

/* Scratch that a thread's rows reuse (grow-only, one buffer a slot): a row op's arrays of n elements, which malloc
 * would otherwise map and the kernel fault in afresh for every row once they pass malloc's mmap threshold. */
enum { ER_WORK_SLOTS = 12 };
typedef struct er_work { void *p[ER_WORK_SLOTS]; size_t cap[ER_WORK_SLOTS]; } er_work;
/* Slot k's buffer of at least `bytes` (its contents not kept when it grows); NULL where memory runs out. */
static inline void *er__work_get(er_work *w, int k, size_t bytes) {
    if (bytes > w->cap[k]) {
        void *q = malloc(bytes ? bytes : 1);
        if (!q) return NULL;
        free(w->p[k]);
        w->p[k] = q;
        w->cap[k] = bytes;
    }
    return w->p[k];
}
/* Frees every buffer of w (zeroed: reusable). */
static inline void er__work_free(er_work *w) {
    for (int k = 0; k < ER_WORK_SLOTS; k++) free(w->p[k]);
    memset(w, 0, sizeof *w);
}

/* Bits of a double and back. */
static inline uint64_t er__bits(double x) { uint64_t b; memcpy(&b, &x, 8); return b; }
static inline double er__from_bits(uint64_t b) { double x; memcpy(&x, &b, 8); return x; }
/* The next double above x (x finite or -inf): an upper bound of any real that rounds to nearest to x. */
static inline double er__next_up(double x) {
    if (x != x || x == __builtin_inf()) return x;
    if (x == 0) return 4.9406564584124654e-324;
    uint64_t b = er__bits(x);
    return er__from_bits(x > 0 ? b + 1 : b - 1);
}
/* Whether x is a value of fp32 (NaN counts: the hardware's float operation gives the same NaN-ness). */
static inline int er__is_float(double x) { return (double)(float)x == x || x != x; }

/* The float next to f toward +inf (dir > 0) or -inf; f finite, or the infinity on the other side. */
static inline float er__f32_step(float f, int dir) {
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b << 1) == 0) b = dir > 0 ? 1u : 0x80000001u;                   /* +-0: the least subnormal */
    else b += ((b >> 31) ^ (uint32_t)(dir > 0)) ? 1u : (uint32_t)-1;    /* away from 0 when the step goes outward */
    memcpy(&f, &b, 4);
    return f;
}

/* Upper bounds of a+b and a*b for nonnegative a, b (round to nearest is within half an ulp). */
static inline double er__add_up(double a, double b) { return er__next_up(a + b); }
static inline double er__mul_up(double a, double b) { return er__next_up(a * b); }

/* ---- vectorised loops ----
 * A hot loop written to vectorise (no call, no early exit, selects instead of branches) is compiled twice where the
 * compiler can target AVX2 on x86-64: once for the baseline ISA and once with ER_AVX2 (AVX2 and FMA); the hottest
 * (layer_norm's backward rows, exp's bounds, the elementwise batch pass) a third time with ER_AVX512 (AVX-512 F, VL,
 * DQ and BW as well). er__simd() gives the level the processor has, 0 (baseline), 1 (AVX2 and FMA) or 2 (AVX-512
 * too), at most EXACTREF_SIMD's where that is set (the tests run each level). All compute the same values: each
 * double operation rounds once either way (no contraction, no reassociation; fma() is exact in each, a call or an
 * instruction). ER_ONE_SIMD_BUILD (CMake's EXACTREF_SIMD_BUILDS=OFF, the sanitizer builds of `make test`) compiles the
 * baseline alone, as on other processors. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(ER_ONE_SIMD_BUILD)
#define ER_HAVE_AVX2 1
#define ER_AVX2 __attribute__((target("avx2,fma")))
#define ER_AVX512 __attribute__((target("avx2,fma,avx512f,avx512vl,avx512dq,avx512bw")))
#else
#define ER_HAVE_AVX2 0
#define ER_AVX2
#define ER_AVX512
#endif
#define ER_ALWAYS_INLINE static inline __attribute__((always_inline))
ER_INTERNAL int er__simd(void);
/* A loop function in the three builds from one always-inline body: ER_SIMD_BUILDS(name, (params), (args), body)
 * defines name##_base, name##_avx2 and name##_avx512 (each `body args;` with the parameters params; the baseline's
 * alone without AVX2) and static void name(int simd, params), which runs the build of er__simd()'s level simd;
 * ER_SIMD_BUILDS_RET(type, ...) the same for a body that returns a value of type. */
#define ER_UNPAREN(...) __VA_ARGS__
#if ER_HAVE_AVX2
#define ER_SIMD_BUILDS(name, params, args, body)                                                                      \
    static void name##_base params { body args; }                                                                     \
    ER_AVX2 static void name##_avx2 params { body args; }                                                             \
    ER_AVX512 static void name##_avx512 params { body args; }                                                         \
    static void name(int simd, ER_UNPAREN params) {                                                                   \
        if (simd >= 2) name##_avx512 args;                                                                            \
        else if (simd) name##_avx2 args;                                                                              \
        else name##_base args;                                                                                        \
    }
/* The same for a loop function returning a value of `type`. */
#define ER_SIMD_BUILDS_RET(type, name, params, args, body)                                                            \
    static type name##_base params { return body args; }                                                              \
    ER_AVX2 static type name##_avx2 params { return body args; }                                                      \
    ER_AVX512 static type name##_avx512 params { return body args; }                                                  \
    static type name(int simd, ER_UNPAREN params) {                                                                   \
        if (simd >= 2) return name##_avx512 args;                                                                     \
        if (simd) return name##_avx2 args;                                                                            \
        return name##_base args;                                                                                      \
    }
#else
#define ER_SIMD_BUILDS(name, params, args, body)                                                                      \
    static void name(int simd, ER_UNPAREN params) {                                                                   \
        (void)simd;                                                                                                   \
        body args;                                                                                                    \
    }
#define ER_SIMD_BUILDS_RET(type, name, params, args, body)                                                            \
    static type name(int simd, ER_UNPAREN params) {                                                                   \
        (void)simd;                                                                                                   \
        return body args;                                                                                             \
    }
#endif

/* ---- threads (src/core/threads.c) ---- */
/* The memory cap (src/core/mem.c): ER_OK when `bytes` planned for `what` fit under EXACTREF_MAX_BYTES (by default
 * half the machine's memory), else ER_ERR_NOMEM naming both (ER_ERR_INVALID for a malformed EXACTREF_MAX_BYTES). */
ER_INTERNAL er_status er__mem_check(double bytes, const char *what);
/* Whether `bytes` fit under the cap, without a message (for allocations with a fallback). */
ER_INTERNAL int er__mem_fits(double bytes);

#define ER_MAX_THREADS 64
/* Threads for `work` products: EXACTREF_THREADS, else the online processors; fewer for small work. */
ER_INTERNAL int er__num_threads(int64_t work);
/* Runs fn on n jobs (an array of n elements of `size` bytes, n <= ER_MAX_THREADS): job 0 in the calling thread, the
 * others in threads of their own, and a job whose thread cannot start in the calling thread too
 * (src/core/threads.c). */
ER_INTERNAL void er__run_jobs(void *jobs, size_t size, int n, void *(*fn)(void *));
/* Touches every page of a fresh buffer of `bytes` (from 16 MiB) on the threads, so that the one writer that fills it
 * next (a copy from the device) meets no page fault: a fault zeroes its page, and one thread's faults are slower
 * than the copy itself. Smaller buffers are left as they are. */
ER_INTERNAL void er__prefault(void *p, size_t bytes);
/* Whether er_cancel asked the running calls to stop (a relaxed atomic load: poll it in long loops). */
ER_INTERNAL int er__cancelled(void);
/* ER_ERR_CANCELLED with its message (for the calling thread: the workers' messages are their own). */
#define ER_CANCELLED() er__fail(ER_ERR_CANCELLED, "the call was cancelled (er_cancel)")
/* Progress (er_set_progress): a call's element count, k more elements done (from any thread), its end. */
ER_INTERNAL void er__progress_begin(int64_t total);
ER_INTERNAL void er__progress_step(int64_t k);
ER_INTERNAL void er__progress_end(void);
/* er__run_jobs between er__progress_begin(total) and er__progress_end(). */
ER_INTERNAL void er__run_jobs_progress(void *jobs, size_t size, int n, void *(*fn)(void *), int64_t total);

/* Checked int64 arithmetic: 0 on overflow. */
static inline int er__mul_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline int er__add_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }

#endif
