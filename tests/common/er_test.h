/* er_test.h: what every exactref test shares: the seed (ER_TEST_SEED, printed on failure: include it in bug
 * reports), the work multiplier (ER_TEST_MULTIPLIER), a small fast generator, and an MPFR oracle for
 * rounding to a format that does not use exactref's own rounding code. */
#ifndef ER_TEST_H
#define ER_TEST_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include <exactref/exactref.h>
#include <exactref/mpfr.h>

static uint64_t er_test_seed_value;
static uint64_t er_rng;

static inline uint64_t er_test_seed(void) {
    const char *s = getenv("ER_TEST_SEED");
    return s && *s ? strtoull(s, NULL, 0) : UINT64_C(20261129);
}
static inline double er_test_multiplier(void) {
    const char *s = getenv("ER_TEST_MULTIPLIER");
    double m = s && *s ? atof(s) : 1.0;
    return m > 0 ? m : 1.0;
}
/* A loop's n trials (random or fixed cases) scaled by the multiplier, at least min: the count its tallies need to
 * mean anything (a sanitizer run's share of the work; the full count where the multiplier is 1 or more). */
static inline long er_test_trials(long n, long min) {
    long t = (long)((double)n * er_test_multiplier());
    return t < min ? min : t;
}
/* Of a fixed list of cases (captures, every pattern of a format), every k-th is checked, k the multiplier's inverse
 * rounded (1 where it is 1 or more): each case still read and counted, the share checked that of random trials. */
static inline int er_test_stride(void) {
    double m = er_test_multiplier();
    return m >= 1 ? 1 : (int)(1 / m + 0.5);
}
/* splitmix64 */
static inline uint64_t er_rand64(void) {
    uint64_t z = (er_rng += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}
static inline void er_test_reseed(uint64_t salt) { er_test_seed_value = er_test_seed(); er_rng = er_test_seed_value ^ (salt * UINT64_C(0x2545F4914F6CDD1D)); }
static inline double er_rand_unit(void) { return (double)(er_rand64() >> 11) * 0x1p-53; }
static inline int64_t er_rand_int(int64_t lo, int64_t hi) { return lo + (int64_t)(er_rand64() % (uint64_t)(hi - lo + 1)); }
static inline double er_rand_normal(void) {
    double u = er_rand_unit(), v = er_rand_unit();
    return sqrt(-2.0 * log(u + 0x1p-60)) * cos(6.283185307179586 * v);
}

#define ER_SEED_MSG_FMT "seed %llu (rerun with ER_TEST_SEED=%llu)"
#define ER_SEED_ARGS (unsigned long long)er_test_seed_value, (unsigned long long)er_test_seed_value

/* The MPFR oracle: x rounded to format f in direction rnd, with f's subnormals emulated by MPFR's own
 * mpfr_subnormalize and overflow decided as IEEE 754 does (the rounded value with unbounded exponent exceeds
 * the largest finite number), then the overflow rule applied. */
static inline double er_oracle_round(er_format f, mpfr_srcptr x, mpfr_rnd_t rnd, er_overflow ov) {
    int p = er_format_precision(f), emin = er_format_emin(f);
    double max = er_format_max(f);
    if (mpfr_nan_p(x)) return NAN;
    mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
    MPFR_DECL_INIT(y, p); /* on the stack, as below: no allocation per call */
    mpfr_set_emin(emin - p + 2); /* MPFR exponents: x = m 2^E with m in [1/2, 1) */
    if (rnd == MPFR_RNDNA) {
        /* ties away from zero: the neighbours toward zero and away from zero (each with MPFR's subnormal
         * emulation), and the exact midpoint between them decides */
        MPFR_DECL_INIT(z, p);
        MPFR_DECL_INIT(a, p);
        MPFR_DECL_INIT(mid, mpfr_get_prec(x) + p + 8);
        int iz = mpfr_set(z, x, MPFR_RNDZ);
        iz = mpfr_check_range(z, iz, MPFR_RNDZ);
        mpfr_subnormalize(z, iz, MPFR_RNDZ);
        int ia = mpfr_set(a, x, MPFR_RNDA);
        ia = mpfr_check_range(a, ia, MPFR_RNDA);
        mpfr_subnormalize(a, ia, MPFR_RNDA);
        mpfr_exp_t lo_emin = mpfr_get_emin();
        mpfr_set_emin(old_emin);
        mpfr_add(mid, z, a, MPFR_RNDN); /* exact: mid's precision covers both */
        mpfr_div_2ui(mid, mid, 1, MPFR_RNDN);
        int c = mpfr_cmpabs(x, mid);
        mpfr_set_emin(lo_emin);
        mpfr_set(y, (mpfr_equal_p(z, a) || c < 0) ? z : a, MPFR_RNDN);
    } else {
        int inex = mpfr_set(y, x, rnd);
        inex = mpfr_check_range(y, inex, rnd);
        mpfr_subnormalize(y, inex, rnd);
    }
    double r = mpfr_get_d(y, MPFR_RNDN); /* exact: y has <= 53 bits and is within double's range, or inf */
    mpfr_set_emin(old_emin);
    mpfr_set_emax(old_emax);
    if (ov == ER_OVERFLOW_DEFAULT) /* the formats without an infinity saturate (OCP fp8 e4m3fn and MX) */
        ov = f == ER_FP8_E4M3FN || f == ER_FP4_E2M1FN || f == ER_FP6_E2M3FN || f == ER_FP6_E3M2FN
                 ? ER_OVERFLOW_SATURATE
                 : ER_OVERFLOW_IEEE;
    if (mpfr_inf_p(x)) { /* an infinity converts to itself where the format has one, else by the rule */
        if (ov == ER_OVERFLOW_NAN) return NAN;
        if (ov == ER_OVERFLOW_SATURATE || !er_format_has_inf(f)) return r < 0 ? -max : max;
        return r;
    }
    if (fabs(r) > max) {
        int neg = r < 0;
        if (ov == ER_OVERFLOW_NAN) return NAN;
        if (ov == ER_OVERFLOW_SATURATE) return neg ? -max : max;
        int to_inf = rnd == MPFR_RNDN || rnd == MPFR_RNDNA || (rnd == MPFR_RNDU && !neg) || (rnd == MPFR_RNDD && neg);
        return to_inf ? (neg ? -INFINITY : INFINITY) : (neg ? -max : max);
    }
    return r;
}

/* The oracle applied to a double. */
static inline double er_oracle_round_d(er_format f, double x) {
    mpfr_t t;
    mpfr_init2(t, 53);
    mpfr_set_d(t, x, MPFR_RNDN);
    double r = er_oracle_round(f, t, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
    mpfr_clear(t);
    return r;
}

static inline mpfr_rnd_t er_mpfr_rnd(er_round m) {
    return m == ER_ROUND_NEAREST ? MPFR_RNDN : m == ER_ROUND_ZERO ? MPFR_RNDZ : m == ER_ROUND_UP ? MPFR_RNDU
         : m == ER_ROUND_DOWN ? MPFR_RNDD : MPFR_RNDNA;
}

static inline double er__from_bits_test(uint64_t b) { double x; memcpy(&x, &b, 8); return x; }

/* Same value, with +0 == -0 treated as different and NaN equal to NaN. */
static inline int er_same(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

/* Stores v (a value of f, or NaN/inf) as f's pattern at element i of a dense buffer; reads it back. */
static inline void er_store(void *base, er_format f, int64_t i, double v) {
    uint64_t bits;
    er_encode(&bits, f, v, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
    switch (er_format_storage_bits(f)) {
    case 8: ((uint8_t *)base)[i] = (uint8_t)bits; break;
    case 16: ((uint16_t *)base)[i] = (uint16_t)bits; break;
    case 32: ((uint32_t *)base)[i] = (uint32_t)bits; break;
    default: ((uint64_t *)base)[i] = bits; break;
    }
}
static inline double er_load(const void *base, er_format f, int64_t i) {
    uint64_t bits;
    switch (er_format_storage_bits(f)) {
    case 8: bits = ((const uint8_t *)base)[i]; break;
    case 16: bits = ((const uint16_t *)base)[i]; break;
    case 32: bits = ((const uint32_t *)base)[i]; break;
    default: bits = ((const uint64_t *)base)[i]; break;
    }
    double v;
    er_decode(&v, f, bits);
    return v;
}

/* A GEMM's element as a kernel computes it: the exact products a[k sa] b[k sb] (fp16 x fp16 is exact in fp32) added
 * in fp32 in a random order. K <= 4096. */
static inline float er_random_order_dot_f32(const double *a, int64_t sa, const double *b, int64_t sb, int K) {
    int perm[4096];
    for (int k = 0; k < K; k++) perm[k] = k;
    for (int k = K - 1; k > 0; k--) { int r = (int)er_rand_int(0, k), t = perm[k]; perm[k] = perm[r]; perm[r] = t; }
    float s = 0;
    for (int k = 0; k < K; k++) s += (float)(a[perm[k] * sa] * b[perm[k] * sb]);
    return s;
}

/* Check records every passing ck_assert (a write per call): hot loops use ER_REQUIRE, which only calls
 * into Check on failure. */
#define ER_REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

/* Aborts the test with `what` (printf-style) and the report's text when an element of the report fails. */
#define ER_REQUIRE_PASS(rep, ...) do {                                                     \
        if (!er_report_all(rep)) {                                                         \
            char er__what[1024], er__text[4096];                                           \
            snprintf(er__what, sizeof er__what, __VA_ARGS__);                              \
            er_report_text((rep), er__text, sizeof er__text, NULL);                        \
            ck_abort_msg("%s\n%s", er__what, er__text);                                    \
        }                                                                                  \
    } while (0)

/* Runs a suite; returns the process exit status. */
static inline int er_run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Two reports are the same: counts, classes, the first failing elements, the worst one and the widest set, field by
 * field. */
static inline int er_same_element(const er_element *a, const er_element *b) {
    return a->index == b->index && a->cls == b->cls && a->lo == b->lo && a->hi == b->hi &&
           (a->exact == b->exact || (isnan(a->exact) && isnan(b->exact))) &&
           (a->rounded == b->rounded || (isnan(a->rounded) && isnan(b->rounded))) &&
           (a->distance_ulps == b->distance_ulps) && a->nan_allowed == b->nan_allowed &&
           a->pinf_allowed == b->pinf_allowed && a->ninf_allowed == b->ninf_allowed;
}

static inline void er_require_same_report(const er_report *a, const er_report *b, const char *what) {
    ER_REQUIRE(a->n == b->n && memcmp(a->counts, b->counts, sizeof a->counts) == 0 && a->n_failed == b->n_failed,
               "%s: counts differ (exact %lld/%lld, covered %lld/%lld, outside %lld/%lld)" ER_SEED_MSG_FMT, what,
               (long long)a->counts[0], (long long)b->counts[0], (long long)a->counts[1], (long long)b->counts[1],
               (long long)a->counts[3], (long long)b->counts[3], ER_SEED_ARGS);
    /* (an output not checked has no classes: NULL, which memcmp may not take even for no bytes) */
    ER_REQUIRE(a->n == 0 || memcmp(a->classes, b->classes, (size_t)a->n) == 0, "%s: classes differ" ER_SEED_MSG_FMT, what,
               ER_SEED_ARGS);
    ER_REQUIRE(a->n_unbounded == b->n_unbounded, "%s: unbounded sets differ (%lld, %lld)" ER_SEED_MSG_FMT, what,
               (long long)a->n_unbounded, (long long)b->n_unbounded, ER_SEED_ARGS);
    ER_REQUIRE(a->n_first == b->n_first && a->has_worst == b->has_worst, "%s: failing lists differ" ER_SEED_MSG_FMT, what, ER_SEED_ARGS);
    for (int i = 0; i < a->n_first; i++)
        ER_REQUIRE(er_same_element(&a->first[i], &b->first[i]), "%s: first failing element %d differs" ER_SEED_MSG_FMT, what, i, ER_SEED_ARGS);
    if (a->has_worst) ER_REQUIRE(er_same_element(&a->worst, &b->worst), "%s: worst element differs" ER_SEED_MSG_FMT, what, ER_SEED_ARGS);
    ER_REQUIRE(a->has_widest == b->has_widest && (!a->has_widest || (a->widest_rel == b->widest_rel && er_same_element(&a->widest, &b->widest))),
               "%s: widest set differs (element %lld, %.17g of its size, against element %lld, %.17g)" ER_SEED_MSG_FMT, what,
               a->has_widest ? (long long)a->widest.index : -1LL, a->widest_rel, b->has_widest ? (long long)b->widest.index : -1LL,
               b->widest_rel, ER_SEED_ARGS);
}

/* Two reports' rendering by fmt (er_report_json, er_report_text; named `kind`) is the same, character for character
 * (the sign of a zero included), naming the first difference with some context: a whole report is too long for
 * Check's message. */
static inline void er_require_same_rendering(const er_report *a, const er_report *b, const char *what,
                                             er_status (*fmt)(const er_report *, char *, size_t, size_t *),
                                             const char *kind) {
    size_t na = 0, nb = 0;
    fmt(a, NULL, 0, &na);
    fmt(b, NULL, 0, &nb);
    char *ja = malloc(na + 1), *jb = malloc(nb + 1);
    ck_assert_int_eq(fmt(a, ja, na + 1, NULL), ER_OK);
    ck_assert_int_eq(fmt(b, jb, nb + 1, NULL), ER_OK);
    size_t at = 0;
    while (ja[at] && ja[at] == jb[at]) at++;
    size_t from = at > 80 ? at - 80 : 0;
    ER_REQUIRE(ja[at] == 0 && jb[at] == 0, "%s: the reports' %s differ at character %zu:\n%.160s\n%.160s", what, kind,
               at, ja + from, jb + from);
    free(ja);
    free(jb);
}
static inline void er_require_same_json(const er_report *a, const er_report *b, const char *what) {
    er_require_same_rendering(a, b, what, er_report_json, "JSON");
}
static inline void er_require_same_text(const er_report *a, const er_report *b, const char *what) {
    er_require_same_rendering(a, b, what, er_report_text, "text");
}

/* Two reports agree beyond er_require_same_report: the classic bug's tests, the resolution's widths, the unseen
 * elements, and the JSON. */
static inline void er_require_same_tally(const er_report *a, const er_report *b, const char *what) {
    er_require_same_report(a, b, what);
    ER_REQUIRE(a->n_bug_tried == b->n_bug_tried && a->n_bug_seen == b->n_bug_seen && a->blind_rel == b->blind_rel,
               "%s: the classic bug's tests differ (%lld/%lld tried, %lld/%lld seen)", what,
               (long long)a->n_bug_tried, (long long)b->n_bug_tried, (long long)a->n_bug_seen,
               (long long)b->n_bug_seen);
    ER_REQUIRE(a->n_away == b->n_away && a->coarsest_rel == b->coarsest_rel && a->finest_rel == b->finest_rel &&
                   a->n_unseen == b->n_unseen,
               "%s: the resolution's widths differ", what);
    er_require_same_json(a, b, what);
}

/* Loads a capture's arrays into *z and opens its case list (one case a line), failing the test when either is
 * missing. The caller closes the file and frees z. */
#include "npz.h"
static inline FILE *open_cases(npz_file *z, const char *npz_path, const char *list_path) {
    const char *err;
    ck_assert_msg(npz_load(z, npz_path, &err) == 0, "%s: %s", npz_path, err);
    FILE *f = fopen(list_path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", list_path);
    return f;
}

#endif
