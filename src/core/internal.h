/* internal.h: helpers shared by every module of the library (never installed).
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
/* A report after its call: refused (zeroed, failing, with the status and the last error's message) when st is an
 * error, else marked filled. Every public call that fills a report ends with it (report.c). */
ER_INTERNAL void er__report_finish(er_report *rep, er_status st);
/* The guard of a report whose classes array the library allocated (er_report_clear frees only such arrays). */
ER_INTERNAL uint64_t er__report_guard(const uint8_t *classes);
/* er_covers without er__report_finish, for the calls built on it (covers.c). */
ER_INTERNAL er_status er__covers_run(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std);

#define ER_RETURN_IF_ERROR(expr) do { er_status er__s = (expr); if (er__s != ER_OK) return er__s; } while (0)
#define ER_CHECK_NULL(p, name) do { if ((p) == NULL) return er__fail(ER_ERR_NULL, "%s is NULL", (name)); } while (0)

/* An always-on assertion for broken internal invariants: it never aborts, it makes the call fail. */
#define ER_ASSERT_OR_FAIL(cond) do { if (!(cond)) return er__fail(ER_ERR_INTERNAL, \
    "internal invariant '%s' failed at %s:%d; please report this with the inputs", #cond, __FILE__, __LINE__); } while (0)

/* ---- format descriptors (src/format/format.c) ---- */
typedef struct er_fmt_info {
    er_format id;
    const char *name;
    int bits;        /* storage bits */
    int ebits, mbits;/* exponent and stored fraction bits */
    int bias;
    int p;           /* precision, implicit bit included */
    int emin, emax;  /* exponents of the smallest normal and the largest finite values */
    int has_inf;
    int e4m3fn;      /* no infinity; NaN only when exponent and fraction are all ones */
    double max, min_normal, min_sub;
    er_overflow ov_default;
} er_fmt_info;

/* NULL for an invalid format. */
ER_INTERNAL const er_fmt_info *er__fmt(er_format f);
/* The pseudo-format of the constant 1 a reduction multiplies by: precision 0, so that x * 1 counts as exact in
 * an accumulator exactly when x's format fits in it (any-order.md, Lemma 3). Used only in the analysis. */
ER_INTERNAL const er_fmt_info *er__fmt_one(void);

/* Rounds (-1)^neg * (m + sticky*tiny) * 2^e to the format, where `sticky` says that bits below m's last bit
 * are nonzero. Resolves ER_OVERFLOW_DEFAULT first with er__overflow_rule. */
ER_INTERNAL double er__round_core(const er_fmt_info *fi, int neg, uint64_t m, int64_t e, int sticky,
                                  er_round mode, er_overflow ov);
ER_INTERNAL er_overflow er__overflow_rule(const er_fmt_info *fi, er_overflow ov);
ER_INTERNAL double er__decode(const er_fmt_info *fi, uint64_t bits);
/* x correctly rounded to the format (er__round_double's general case: every format, mode, rule and value). */
ER_INTERNAL double er__round_double_general(const er_fmt_info *fi, double x, er_round mode, er_overflow ov);
/* x (an mpfr_srcptr) correctly rounded to the format; with `sticky`, x stands for a value just beyond it (away
 * from zero): x was truncated from it. */
ER_INTERNAL double er__round_mpfr(const er_fmt_info *fi, const void *x, er_round mode, er_overflow ov);
ER_INTERNAL double er__round_mpfr_sticky(const er_fmt_info *fi, const void *x, int sticky, er_round mode, er_overflow ov);
/* x / n correctly rounded to the format (x a double, n > 0). */
ER_INTERNAL double er__round_quotient(const er_fmt_info *fi, double x, int64_t n, er_round mode);

/* x + y, a*b and a*b + y rounded once to the format (src/format/round.c); `wide` says a*b may not be an exact
 * double. Infinite operands follow IEEE (inf - inf is NaN). */
ER_INTERNAL double er__round_sum(const er_fmt_info *fi, double x, double y, er_round mode);
ER_INTERNAL double er__round_prod(const er_fmt_info *fi, double a, double b, int wide, er_round mode);
ER_INTERNAL double er__round_fma(const er_fmt_info *fi, double a, double b, double y, int wide, er_round mode);

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

/* x correctly rounded to the format. Inline for the common cases (a finite double is a value of fp64; fp32 within
 * its range by the hardware conversion, to nearest, then one step outward where that went the wrong way for a
 * directed mode), the general case in round.c. */
static inline double er__round_double(const er_fmt_info *fi, double x, er_round mode, er_overflow ov) {
    if (fi->id == ER_FP64 && fabs(x) <= DBL_MAX) return x;
    if (fi->id == ER_FP32 && fabs(x) <= FLT_MAX && mode != ER_ROUND_ZERO && mode != ER_ROUND_NEAREST_AWAY) {
        float f = (float)x;
        if (mode == ER_ROUND_UP && (double)f < x) f = er__f32_step(f, 1);
        if (mode == ER_ROUND_DOWN && (double)f > x) f = er__f32_step(f, -1);
        return f;
    }
    if (fi->id == ER_FP16 && mode == ER_ROUND_NEAREST && fabs(x) <= 65504.0) {
        /* x + c for c = 1.5 2^(q + 52), q = x's fp16 ulp exponent (at least -24): the sum lies in c's binade, whose
         * ulp is 2^q, so it is rounded once to a multiple of 2^q, ties to even; subtracting c is exact */
        uint64_t u;
        memcpy(&u, &x, 8);
        int q = (int)((u >> 52) & 0x7ff) - 1023 - 10;
        if (q < -24) q = -24;
        uint64_t cu = ((uint64_t)(q + 52 + 1023) << 52) | (UINT64_C(1) << 51);
        double c;
        memcpy(&c, &cu, 8);
        return copysign((x + c) - c, x);
    }
    return er__round_double_general(fi, x, mode, ov);
}

/* Upper bounds of a+b and a*b for nonnegative a, b (round to nearest is within half an ulp). */
static inline double er__add_up(double a, double b) { return er__next_up(a + b); }
static inline double er__mul_up(double a, double b) { return er__next_up(a * b); }

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
 * others in threads of their own, and a job whose thread cannot start in the calling thread too (src/core/threads.c). */
ER_INTERNAL void er__run_jobs(void *jobs, size_t size, int n, void *(*fn)(void *));

/* er_standard_is_fixed on format descriptors (which may be er__fmt_one()). */
ER_INTERNAL int er__standard_is_fixed_info(const er_standard *s, const er_fmt_info *a, const er_fmt_info *b);

/* Checked int64 arithmetic: 0 on overflow. */
static inline int er__mul_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline int er__add_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }

#endif
