/* t-unary.c: the unary stages of chains, exp, exp2, log, tanh, sigmoid, erf and rsqrt (docs/algorithms/chains.md,
 * Lemmas C6 to C8), fp32 in and out. Implementations at the edge of their ulp budget, both readings of "within U
 * ulps" (U ulps of the exact value, and U ulps of the correctly rounded one), at and around arguments whose results
 * are powers of two, near overflow and underflow, and spread, are covered; so are Triton's lowerings under
 * math=triton (ex2.approx of the rounded product for exp, div.full for sigmoid's quotient, flushed subnormal
 * arguments for log and rsqrt). The correctly rounded result is exact; a result U + 1 ulps out, where no power of
 * two is near, is caught; special values follow IEEE; a flushed subnormal result passes. The batch pass of one
 * exp, tanh, sigmoid, silu or relu stage classes every element as the per-element decision does. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <mpfr.h>
#include <exactref/mpfr.h>
#include "../common/er_test.h"

enum { L = 4096 };
static float x[L], y[L];

typedef enum { F_EXP, F_EXP2, F_LOG, F_TANH, F_SIGMOID, F_ERF, F_RSQRT, F_COUNT } fn_id;
static const char *const names[F_COUNT] = {"exp", "exp2", "log", "tanh", "sigmoid", "erf", "rsqrt"};
static const er_stage_kind kinds[F_COUNT] = {ER_STAGE_EXP, ER_STAGE_EXP2, ER_STAGE_LOG, ER_STAGE_TANH, ER_STAGE_SIGMOID,
                                             ER_STAGE_ERF, ER_STAGE_RSQRT};
static const double ulps[F_COUNT] = {2, 2, 1, 2, 2, 2, 2};

/* f(t) at 200 bits into r (sigmoid's exp alone: the caller composes it). */
static void mp_fn(fn_id f, mpfr_t r, double t) {
    mpfr_set_d(r, t, MPFR_RNDN);
    switch (f) {
    case F_EXP: case F_SIGMOID: mpfr_exp(r, r, MPFR_RNDN); break;
    case F_EXP2: mpfr_exp2(r, r, MPFR_RNDN); break;
    case F_LOG: mpfr_log(r, r, MPFR_RNDN); break;
    case F_TANH: mpfr_tanh(r, r, MPFR_RNDN); break;
    case F_ERF: mpfr_erf(r, r, MPFR_RNDN); break;
    default: mpfr_rec_sqrt(r, r, MPFR_RNDN); break;
    }
}

/* ulp(v) in fp32: the spacing upward from the power of two at or below |v| (2^-149 below 2^-125). */
static double ulp32(double v) {
    double a = fabs(v);
    if (a < 0x1p-125) return 0x1p-149;
    int e;
    frexp(a, &e);
    return ldexp(1.0, e - 24);
}

/* The float at the edge of a U-ulp budget around the exact value r: reading 0, the correctly rounded value moved by
 * U of its ulps; reading 1, r moved by U of its ulps, rounded back toward r. dir = 0: the correctly rounded value. */
static float edge(mpfr_t r, double U, int reading, int dir) {
    float c = mpfr_get_flt(r, MPFR_RNDN);
    if (dir == 0 || !isfinite(c)) return c;
    if (reading == 0) return (float)((double)c + dir * U * ulp32(c));
    mpfr_t t;
    mpfr_init2(t, 300);
    mpfr_set_d(t, dir * U * ulp32(mpfr_get_d(r, MPFR_RNDN)), MPFR_RNDN);
    mpfr_add(t, t, r, MPFR_RNDN);
    float v = mpfr_get_flt(t, dir > 0 ? MPFR_RNDD : MPFR_RNDU);
    mpfr_clear(t);
    return v;
}

/* f(v) correctly rounded to fp32 (sigmoid: 1 / (1 + exp(-v)) exactly). */
static float correctly_rounded(fn_id f, float v) {
    mpfr_t r;
    mpfr_init2(r, 200);
    mp_fn(f, r, f == F_SIGMOID ? -(double)v : v);
    if (f == F_SIGMOID) { mpfr_add_ui(r, r, 1, MPFR_RNDN); mpfr_ui_div(r, 1, r, MPFR_RNDN); }
    float c = mpfr_get_flt(r, MPFR_RNDN);
    mpfr_clear(r);
    return c;
}

/* What an implementation of f at the edge returns for argument v: precise (CUDA's functions) or Triton's lowering
 * (exp as ex2.approx of fl(v fl(log2 e)); sigmoid's exp likewise and its quotient within 2 ulps). */
static float impl(fn_id f, float v, int tri, int reading, int dir) {
    mpfr_t r;
    mpfr_init2(r, 200);
    float out;
    if (f == F_SIGMOID) {
        float a = -v, e;
        if (tri) { mp_fn(F_EXP2, r, (double)(a * 1.44269504f)); e = edge(r, 2, reading, dir); }
        else { mp_fn(F_EXP, r, a); e = edge(r, 2, reading, dir); }
        float d = 1.0f + e;
        if (!tri) out = 1.0f / d;
        else { mpfr_set_flt(r, d, MPFR_RNDN); mpfr_ui_div(r, 1, r, MPFR_RNDN); out = edge(r, 2, reading, dir); }
    } else if (f == F_EXP && tri) {
        mp_fn(F_EXP2, r, (double)(v * 1.44269504f));
        out = edge(r, 2, reading, dir);
    } else {
        if (tri && (f == F_LOG || f == F_RSQRT) && fabsf(v) < 0x1p-126f) v = 0.0f * v; /* ftz: a zero of v's sign */
        mp_fn(f, r, v);
        out = edge(r, ulps[f], reading, dir);
    }
    mpfr_clear(r);
    return out;
}

/* Arguments: where f's result is at and around powers of two (Newton on the target from a guess), near overflow
 * and underflow of the result, and spread. */
static int arguments(fn_id f, float *xs) {
    int n = 0;
    er_test_reseed(1700 + (uint64_t)f);
    for (int k = -12; k <= 12; k++) {
        double target = ldexp(1.0, k / 2) * (k % 2 ? 1.5 : 1.0), t; /* 2^j and 1.5 2^j */
        switch (f) {
        case F_EXP: t = log(target); break;
        case F_EXP2: t = log2(target); break;
        case F_LOG: t = exp(k < 0 ? -target : target); break;
        case F_RSQRT: t = 1.0 / (target * target); break;
        case F_SIGMOID: t = k < 0 ? -log(target) : log(target); break; /* exp(-x) at powers of two */
        default: {                                                       /* tanh, erf: targets in (-1, 1) */
            double g = (k % 2 ? -1 : 1) * (1.0 - ldexp(1.0, -1 - abs(k) / 2));
            t = 0.5;
            for (int it = 0; it < 80; it++) {
                double fv = f == F_TANH ? tanh(t) : erf(t), d = f == F_TANH ? 1 - fv * fv : 1.1283791670955126 * exp(-t * t);
                if (d < 1e-300) break;
                t -= (fv - g) / d;
            }
        }
        }
        for (int d = -3; d <= 3; d++) {
            float v = (float)t;
            for (int s = 0; s < abs(d); s++) v = nextafterf(v, d > 0 ? INFINITY : -INFINITY);
            if (isfinite(v)) xs[n++] = v;
        }
    }
    static const float ex[] = {88.72f, 88.7228f, 88.73f, -87.33f, -87.34f, -100.0f, -103.2f, -104.0f, -110.0f, 0.0f, 1e-30f, -1e-30f};
    static const float e2[] = {127.99f, 128.0f, -126.0f, -126.5f, -149.0f, -149.5f, -150.0f, 0.0f, 1e-8f};
    static const float lg[] = {1.0f, 1.0000001f, 0.99999994f, 1e-40f, 1e-45f, 1.17549435e-38f, 3.4028235e38f, 2.7182817f, 2.718282f};
    static const float th[] = {1e-40f, -1e-40f, 1e-20f, 8.0f, 9.01f, 10.0f, -9.5f, 20.0f, 0.0f};
    static const float rs[] = {1e-40f, 1.17549435e-38f, 3.4028235e38f, 1.0f, 4.0f, 0.25f, 2.0f, 1e-45f};
    const float *sp = f == F_EXP || f == F_SIGMOID ? ex : f == F_EXP2 ? e2 : f == F_LOG ? lg : f == F_RSQRT ? rs : th;
    int ns = f == F_EXP || f == F_SIGMOID ? 12 : f == F_EXP2 ? 9 : f == F_LOG ? 9 : f == F_RSQRT ? 8 : 9;
    for (int i = 0; i < ns; i++) xs[n++] = f == F_SIGMOID ? -sp[i] : sp[i];
    while (n < L) {
        double g = er_rand_normal() * (f == F_EXP || f == F_EXP2 || f == F_SIGMOID ? 20 : 3);
        xs[n++] = (float)(f == F_LOG || f == F_RSQRT ? fabs(g) * ldexp(1.0, (int)er_rand_int(-60, 60)) : g);
    }
    return n;
}

static void covers_fn(er_report *rep, fn_id f, const char *opts) {
    er_tensor tx, ty;
    er_tensor_view(&tx, ER_FP32, 1, (int64_t[]){L}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 1, (int64_t[]){L}, NULL, y);
    er_ref *t, *ch;
    ck_assert_int_eq(er_tensor_ref(&t, &tx), ER_OK);
    er_stage st[1] = {{kinds[f], NULL, 0, 0, NULL}};
    ck_assert_int_eq(er_chain(&ch, t, st, 1), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", opts), ER_OK);
    ck_assert_int_eq(er_covers(rep, ch, &ty, &std), ER_OK);
    er_ref_free(ch);
    er_ref_free(t);
}

START_TEST(implementations_at_the_edge_are_covered) {
    for (int tri = 0; tri < 2; tri++)
        for (int f = 0; f < F_COUNT; f++) {
            arguments((fn_id)f, x);
            for (int reading = 0; reading < 2; reading++)
                for (int dir = -1; dir <= 1; dir++) {
                    for (int i = 0; i < L; i++) y[i] = impl((fn_id)f, x[i], tri, reading, dir);
                    er_report rep;
                    covers_fn(&rep, (fn_id)f, tri ? "math=triton" : NULL);
                    ER_REQUIRE_PASS(&rep, "%s%s, %s reading, %s", names[f], tri ? " (math=triton)" : "",
                                    reading ? "exact-value" : "rounded-value", dir < 0 ? "lower edge" : dir > 0 ? "upper edge" : "correctly rounded");
                    er_report_clear(&rep);
                }
        }
}
END_TEST

/* A result U + 1 of its ulps from the correctly rounded value is outside both readings where no power of two is
 * within U + 2 ulps of it (and it is normal): every such element is caught. */
/* The correctly rounded result is exact wherever it is finite (sigmoid's too: the exact function's rounding). */
START_TEST(the_correctly_rounded_result_is_exact) {
    for (int f = 0; f < F_COUNT; f++) {
        arguments((fn_id)f, x);
        for (int i = 0; i < L; i++) y[i] = correctly_rounded((fn_id)f, x[i]);
        er_report rep;
        covers_fn(&rep, (fn_id)f, NULL);
        ER_REQUIRE_PASS(&rep, "%s, correctly rounded", names[f]);
        const uint8_t *cls = er_report_classes(&rep);
        for (int i = 0; i < L; i++)
            if (isfinite(y[i]))
                ER_REQUIRE(cls[i] == ER_CLASS_EXACT, "%s(%a) = %a, correctly rounded, is class %d", names[f], x[i], y[i], cls[i]);
        er_report_clear(&rep);
    }
}
END_TEST

START_TEST(one_ulp_beyond_is_caught) {
    for (int f = 0; f < F_COUNT; f++) {
        if (f == F_SIGMOID) continue; /* a composite: its set is the steps', wider than one function's */
        arguments((fn_id)f, x);
        for (int dir = -1; dir <= 1; dir += 2) {
            int checked = 0;
            static uint8_t want[L];
            for (int i = 0; i < L; i++) {
                mpfr_t r;
                mpfr_init2(r, 200);
                mp_fn((fn_id)f, r, x[i]);
                float c = mpfr_get_flt(r, MPFR_RNDN);
                mpfr_clear(r);
                double u = ulp32(c), far = (double)c + dir * (ulps[f] + 1) * u;
                int e;
                frexp(fabs((double)c), &e);
                double lo2 = ldexp(1.0, e - 1), hi2 = ldexp(1.0, e); /* c's binade [lo2, hi2) */
                want[i] = isfinite(c) && fabs((double)c) >= 0x1p-125 && fabs(far) < 3e38 &&
                          fabs((double)c) - (ulps[f] + 2) * u > lo2 && fabs((double)c) + (ulps[f] + 2) * u < hi2;
                y[i] = want[i] ? (float)far : c;
                checked += want[i];
            }
            er_report rep;
            covers_fn(&rep, (fn_id)f, NULL);
            const uint8_t *cls = er_report_classes(&rep);
            for (int i = 0; i < L; i++)
                if (want[i]) ER_REQUIRE(cls[i] == ER_CLASS_OUTSIDE, "%s(%a): %a, %g ulps out, is class %d", names[f], x[i], y[i], ulps[f] + 1, cls[i]);
            ER_REQUIRE(checked > L / 2, "%s: only %d elements checked", names[f], checked);
            er_report_clear(&rep);
        }
    }
}
END_TEST

/* IEEE special values; subnormal results and arguments flushed to zero (CUDA's erff, logf and rsqrtf flush a
 * subnormal argument, and 1.0f / d a subnormal quotient, measured on the H200). */
START_TEST(special_values_and_flushing) {
    static const struct { fn_id f; float in, out; int pass, tri; } cases[] = {
        {F_EXP, -INFINITY, 0.0f, 1, 0}, {F_EXP, INFINITY, INFINITY, 1, 0}, {F_EXP, NAN, NAN, 1, 0}, {F_EXP, -INFINITY, NAN, 0, 0},
        {F_EXP, 100.0f, INFINITY, 1, 0}, {F_EXP, 100.0f, 3.4028235e38f, 0, 0}, {F_EXP, -100.0f, 0.0f, 1, 0},
        {F_EXP, -100.0f, 0x1p-126f, 0, 0}, {F_EXP2, -149.5f, 0.0f, 1, 0}, {F_EXP2, 128.0f, INFINITY, 1, 0},
        {F_LOG, 0.0f, -INFINITY, 1, 0}, {F_LOG, -0.0f, -INFINITY, 1, 0}, {F_LOG, -1.0f, NAN, 1, 0}, {F_LOG, -1.0f, 0.0f, 0, 0},
        {F_LOG, INFINITY, INFINITY, 1, 0}, {F_LOG, 1.0f, 0.0f, 1, 0}, {F_LOG, 1e-40f, -INFINITY, 1, 0},
        {F_LOG, -1e-40f, -INFINITY, 1, 0}, {F_LOG, 1e-40f, 0.0f, 0, 0}, {F_TANH, INFINITY, 1.0f, 1, 0}, {F_TANH, -INFINITY, -1.0f, 1, 0},
        {F_TANH, 1e-40f, 0.0f, 1, 0}, {F_TANH, 1e-40f, 1e-40f, 1, 0}, {F_ERF, INFINITY, 1.0f, 1, 0}, {F_ERF, -INFINITY, 0.0f, 0, 0},
        {F_SIGMOID, INFINITY, 1.0f, 1, 0}, {F_SIGMOID, -INFINITY, 0.0f, 1, 0}, {F_SIGMOID, -200.0f, 0.0f, 1, 0},
        {F_SIGMOID, 0.0f, 0.5f, 1, 0}, {F_SIGMOID, 0.0f, 0.4999997f, 0, 0}, {F_SIGMOID, -INFINITY, NAN, 0, 0},
        {F_RSQRT, 0.0f, INFINITY, 1, 0}, {F_RSQRT, -0.0f, -INFINITY, 1, 0}, {F_RSQRT, INFINITY, 0.0f, 1, 0},
        {F_RSQRT, -1.0f, NAN, 1, 0}, {F_RSQRT, 4.0f, 0.5f, 1, 0}, {F_RSQRT, 4.0f, 0.50000006f, 1, 0},
        {F_RSQRT, 4.0f, 0.5000002f, 0, 0}, {F_RSQRT, 1e-40f, INFINITY, 1, 0}, {F_RSQRT, -1e-40f, -INFINITY, 1, 0},
        {F_RSQRT, 0x1p-140f, 0x1.000002p70f, 1, 0}, {F_RSQRT, 0x1p-140f, 0x1.00001p70f, 0, 0}, {F_ERF, 1e-40f, 0.0f, 1, 0},
        {F_ERF, 1e-40f, 1e-38f, 0, 0}, {F_SIGMOID, -88.03f, 0.0f, 1, 0},
    };
    int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < nc; i++) {
        for (int j = 0; j < L; j++) { x[j] = 1.0f; y[j] = NAN; }
        /* the other elements f(1), correctly rounded */
        for (int j = 1; j < L; j++) y[j] = impl(cases[i].f, 1.0f, cases[i].tri, 0, 0);
        x[0] = cases[i].in;
        y[0] = cases[i].out;
        er_report rep;
        covers_fn(&rep, cases[i].f, cases[i].tri ? "math=triton" : NULL);
        ER_REQUIRE(er_report_all(&rep) == cases[i].pass, "%s(%a) = %a%s: expected %s", names[cases[i].f], x[0], y[0],
                   cases[i].tri ? " (math=triton)" : "", cases[i].pass ? "pass" : "fail");
        er_report_clear(&rep);
    }
}
END_TEST

/* Lemma C10 rests on libm's erf, exp, exp2, log and tanh lying within 2^-36 relative of the exact value at every
 * argument of a format of at most 24 bits where the result is a normal double: checked here on this machine's libm
 * against MPFR, on random fp32 arguments over the whole range (bit patterns) and around the points where relative
 * accuracy is hardest (erf, tanh and exp2 near 0, log near 1, exp near its overflow). */
START_TEST(libm_within_the_margin) {
    er_test_reseed(1750);
    mpfr_t r;
    mpfr_init2(r, 64);
    int64_t checked = 0, count = (int64_t)((1 << 17) * er_test_multiplier());
    double worst = 0;
    for (int f = 0; f < 5; f++) {
        for (int64_t i = 0; i < count; i++) {
            float v;
            if (i % 4 == 0) {
                uint32_t bits = (uint32_t)er_rand64();
                memcpy(&v, &bits, 4);
            } else {
                double c = f == 3 ? 1.0 : f == 1 ? 88.0 : 0.0; /* log near 1, exp near overflow, the others near 0 */
                v = (float)(c + ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(0, 40)));
            }
            if (!isfinite(v) || (f == 3 && !(v > 0))) continue;
            double t = v, lib = f == 0 ? erf(t) : f == 1 ? exp(t) : f == 2 ? exp2(t) : f == 3 ? log(t) : tanh(t);
            if (!(fabs(lib) >= 0x1p-1000 && fabs(lib) <= 0x1p1000) || t == 0) continue; /* where the library takes MPFR */
            mpfr_set_d(r, t, MPFR_RNDN);
            if (f == 0) mpfr_erf(r, r, MPFR_RNDN);
            else if (f == 1) mpfr_exp(r, r, MPFR_RNDN);
            else if (f == 2) mpfr_exp2(r, r, MPFR_RNDN);
            else if (f == 3) mpfr_log(r, r, MPFR_RNDN);
            else mpfr_tanh(r, r, MPFR_RNDN);
            double e = mpfr_get_d(r, MPFR_RNDN), rel = fabs(lib - e) / fabs(e);
            if (rel > worst) worst = rel;
            ER_REQUIRE(rel <= 0x1p-38, "libm's %s(%a) = %a is %g relative from %a", (const char *[]){"erf", "exp", "exp2", "log", "tanh"}[f], t,
                       lib, rel, e);
            checked++;
        }
    }
    mpfr_clear(r);
    ER_REQUIRE(checked > count * 3, "only %lld arguments checked", (long long)checked);
    printf("libm: %lld arguments, the largest relative error %.3g (the margin is 2^-36 = %.3g)\n", (long long)checked, worst, 0x1p-36);
}
END_TEST

/* covers of one stage of `kind` on the input xs (format fx) and output ys (format fy), with the batch pass on
 * (batch 1) or off (EXACTREF_BATCH=0): its classes into cls, its counts of exact and covered elements into counts. */
static void classes_of(er_stage_kind kind, er_format fx, const void *xs, er_format fy, const void *ys, int batch,
                       uint8_t *cls, int64_t *counts) {
    er_tensor tx, ty;
    er_tensor_view(&tx, fx, 1, (int64_t[]){L}, NULL, xs);
    er_tensor_view(&ty, fy, 1, (int64_t[]){L}, NULL, ys);
    er_ref *t, *ch;
    ck_assert_int_eq(er_tensor_ref(&t, &tx), ER_OK);
    er_stage st[1] = {{kind, NULL, 0, 0, NULL}};
    ck_assert_int_eq(er_chain(&ch, t, st, 1), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    if (!batch) setenv("EXACTREF_BATCH", "0", 1);
    er_report rep;
    ck_assert_int_eq(er_covers(&rep, ch, &ty, &std), ER_OK);
    unsetenv("EXACTREF_BATCH");
    memcpy(cls, er_report_classes(&rep), L);
    counts[0] = rep.counts[ER_CLASS_EXACT];
    counts[1] = rep.counts[ER_CLASS_COVERED];
    er_report_clear(&rep);
    er_ref_free(ch);
    er_ref_free(t);
}

/* v into format f's storage at p[i] (fp32 as is; fp16 and bf16 rounded to nearest); moved `steps` patterns up (a
 * finite 16-bit value stays finite). */
static void store(er_format f, void *p, int i, float v, int steps) {
    if (f == ER_FP32) {
        for (int s = 0; s < abs(steps); s++) v = nextafterf(v, steps > 0 ? INFINITY : -INFINITY);
        ((float *)p)[i] = v;
        return;
    }
    uint64_t bits;
    ck_assert_int_eq(er_encode(&bits, f, v, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE), ER_OK);
    uint16_t h = (uint16_t)bits, mag = h & 0x7fff, top = f == ER_FP16 ? 0x7bff : 0x7f7f;
    if (steps && mag > 4 && mag < top - 4) h = (uint16_t)(h + steps);
    ((uint16_t *)p)[i] = h;
}

/* Whether the fp32 value c lies halfway between two neighbours in format fy (the overflow threshold among them). */
static int halfway_in(er_format fy, float c) {
    if (!isfinite(c) || c == 0) return 0;
    double u = er_format_ulp(fy, c);
    return fmod(fabs((double)c), u) == u / 2;
}

/* Up to `want` fp32 arguments x in [-80, 80] whose exp, correctly rounded to fp32 and then rounded to the 16-bit
 * format fy, is not exp correctly rounded to fy (double rounding), into xs; how many were found. The two roundings
 * differ only where exp's fp32 rounding lies halfway between two fy values (fy's halfway points are fp32 values, so
 * the fp32 rounding keeps exp on the same side of each), and that rounding is libm's exp rounded to fp32 or one of
 * its neighbours (libm's double exp is within an ulp of double): MPFR's exp decides only those candidates. */
static int double_rounding_cases(er_format fy, float *xs, int want) {
    mpfr_t r;
    mpfr_init2(r, 200);
    int got = 0;
    er_test_reseed(1977 + (uint64_t)fy);
    for (int t = 0; t < (1 << 22) && got < want; t++) {
        float v = (float)(160 * er_rand_unit() - 80), c = (float)exp((double)v);
        if (!halfway_in(fy, nextafterf(c, 0.0f)) && !halfway_in(fy, c) && !halfway_in(fy, nextafterf(c, INFINITY)))
            continue;
        mpfr_set_flt(r, v, MPFR_RNDN);
        mpfr_exp(r, r, MPFR_RNDN);
        uint64_t once, twice;
        double e = mpfr_get_d(r, MPFR_RNDN); /* within 2^-53 of exp: the 16-bit rounding of e is exp's but at a tie */
        float a = mpfr_get_flt(r, MPFR_RNDN);
        ck_assert_int_eq(er_encode(&once, fy, e, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE), ER_OK);
        ck_assert_int_eq(er_encode(&twice, fy, a, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE), ER_OK);
        if (once != twice && isfinite(a) && (once & 0x7fff) < (fy == ER_FP16 ? 0x7c00u : 0x7f80u)) xs[got++] = v;
    }
    mpfr_clear(r);
    return got;
}

/* A chunk of 4096 elements the batch pass decides whole, whose classes it copies as they are: exp of fp32 arguments
 * spread over [-4, 4] and the eight double-rounding cases, bf16 outputs from exp's fp32 rounding (exact, but covered
 * at those eight, where the exact result rounds to another bf16 value). Both decisions give the same classes and
 * counts, the covered ones among them. */
START_TEST(the_batch_pass_decides_whole_chunks) {
    static uint8_t c1[L], c2[L];
    static float xs32[L];
    static uint16_t ys16[L];
    int64_t n1[2], n2[2];
    er_test_reseed(1950);
    for (int i = 0; i < L; i++) xs32[i] = (float)(8 * er_rand_unit() - 4);
    ER_REQUIRE(double_rounding_cases(ER_BF16, xs32 + 100, 8) == 8, "too few double-rounding cases");
    mpfr_t r;
    mpfr_init2(r, 200);
    for (int i = 0; i < L; i++) { /* exp rounded to fp32, then to bf16 */
        mpfr_set_flt(r, xs32[i], MPFR_RNDN);
        mpfr_exp(r, r, MPFR_RNDN);
        store(ER_BF16, ys16, i, mpfr_get_flt(r, MPFR_RNDN), 0);
    }
    mpfr_clear(r);
    classes_of(ER_STAGE_EXP, ER_FP32, xs32, ER_BF16, ys16, 0, c1, n1);
    classes_of(ER_STAGE_EXP, ER_FP32, xs32, ER_BF16, ys16, 1, c2, n2);
    for (int i = 0; i < L; i++)
        ER_REQUIRE(c1[i] == c2[i], "exp(%a) into bf16: class %d per element, %d in the batch pass", xs32[i], c1[i],
                   c2[i]);
    ER_REQUIRE(n1[0] == n2[0] && n1[1] == n2[1] && n2[0] + n2[1] == L, "counts %lld %lld, %lld %lld", (long long)n1[0],
               (long long)n1[1], (long long)n2[0], (long long)n2[1]);
    ER_REQUIRE(n2[1] == 8, "%lld covered, not the 8 double-rounding cases", (long long)n2[1]);
}
END_TEST

/* The batch pass (chains.md: one exp, tanh, sigmoid, silu or relu stage, exp's bounds from er__exp_bounds) gives
 * every element the class the per-element decision gives: on the arguments above (results at and around powers of
 * two, near overflow and underflow, spread), with outputs correctly rounded, at the edges of the budget in both
 * readings, and moved 1 to 3 ulps from those; silu's as x / (1 + e) with e at exp's edges; tanh's arguments also
 * spread over [-4, 4] and below 1/4 (the pass takes |x| >= 1/4). Inputs and outputs in fp32, and in fp16 and bf16
 * (the arguments and results rounded to them; a narrower output's exact class from the bracket, not the witness). */
START_TEST(the_batch_pass_decides_as_each_element_alone) {
    static const er_stage_kind kinds5[5] = {ER_STAGE_EXP, ER_STAGE_TANH, ER_STAGE_SIGMOID, ER_STAGE_SILU, ER_STAGE_RELU};
    static const er_format fmts[5][2] = {{ER_FP32, ER_FP32}, {ER_BF16, ER_BF16}, {ER_FP16, ER_FP16},
                                         {ER_FP32, ER_BF16}, {ER_FP16, ER_FP32}};
    static uint8_t c1[L], c2[L];
    static float xs32[L];
    static uint16_t xs16[L], ys16[L];
    int64_t n1[2], n2[2];
    for (int ff = 0; ff < 5; ff++)
        for (int kk = 0; kk < 5; kk++) {
            er_format fx = fmts[ff][0], fy = fmts[ff][1];
            er_stage_kind kind = kinds5[kk];
            fn_id f = kind == ER_STAGE_EXP ? F_EXP : kind == ER_STAGE_TANH ? F_TANH : F_SIGMOID;
            arguments(f, x);
            if (kind == ER_STAGE_RELU)
                for (int i = 0; i < 64; i++) x[i] = i % 2 ? -0.0f : i % 3 ? 0x1p-140f : -0x1p-149f;
            if (kind == ER_STAGE_EXP && fy != ER_FP32) /* where rounding to fp32 first gives another fy value */
                ER_REQUIRE(double_rounding_cases(fy, x + 200, 8) == 8, "too few double-rounding cases");
            if (kind == ER_STAGE_TANH) /* spread over [-4, 4], and small (where the pass leaves tanh alone) */
                for (int i = 200; i < L; i++)
                    x[i] = i % 2 ? (float)(8 * er_rand_unit() - 4)
                                 : (float)ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(1, 20));
            void *xp = fx == ER_FP32 ? (void *)xs32 : (void *)xs16, *yp = fy == ER_FP32 ? (void *)y : (void *)ys16;
            for (int i = 0; i < L; i++) { /* the arguments as the input format holds them */
                store(fx, xp, i, x[i], 0);
                if (fx != ER_FP32) {
                    double d;
                    ck_assert_int_eq(er_decode(&d, fx, xs16[i]), ER_OK);
                    x[i] = (float)d;
                }
            }
            for (int variant = 0; variant < 6; variant++) {
                er_test_reseed(1900 + 100 * (uint64_t)ff + 10 * (uint64_t)kk + (uint64_t)variant);
                for (int i = 0; i < L; i++) {
                    int reading = variant & 1, dir = variant < 2 ? 0 : variant < 4 ? -1 : 1, steps = 0;
                    float v;
                    if (kind == ER_STAGE_RELU) v = x[i] > 0 ? x[i] : 0.0f;
                    else if (kind == ER_STAGE_SILU) v = x[i] / (1.0f + impl(F_EXP, -x[i], 0, reading, dir));
                    else v = impl(f, x[i], 0, reading, dir);
                    if (variant >= 2 && i % 3 == 0) /* 1 to 3 ulps from it, either way */
                        steps = (int)er_rand_int(1, 3) * (er_rand_int(0, 1) ? 1 : -1);
                    store(fy, yp, i, v, steps);
                }
                classes_of(kind, fx, xp, fy, yp, 0, c1, n1);
                classes_of(kind, fx, xp, fy, yp, 1, c2, n2);
                for (int i = 0; i < L; i++)
                    ER_REQUIRE(c1[i] == c2[i], "%s(%a) in %s, out %s: class %d per element, %d in the batch pass",
                               er_stage_kind_name(kind), x[i], er_format_name(fx), er_format_name(fy), c1[i], c2[i]);
                ER_REQUIRE(n1[0] == n2[0] && n1[1] == n2[1], "%s: counts differ", er_stage_kind_name(kind));
            }
        }
}
END_TEST

START_TEST(refusals) {
    er_tensor tx;
    er_tensor_view(&tx, ER_FP32, 1, (int64_t[]){L}, NULL, x);
    er_ref *t, *ch;
    ck_assert_int_eq(er_tensor_ref(&t, &tx), ER_OK);
    er_stage bad[1] = {{ER_STAGE_EXP, NULL, 65, 0, NULL}};
    ck_assert_int_eq(er_chain(&ch, t, bad, 1), ER_ERR_INVALID);
    er_stage st[1] = {{ER_STAGE_LOG, NULL, 0, 0, NULL}};
    ck_assert_int_eq(er_chain(&ch, t, st, 1), ER_OK);
    er_standard std;
    er_report rep;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "math=triton compute=fp64"), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ch, &tx, &std), ER_ERR_STANDARD);
    ck_assert(!er_report_all(&rep));
    er_report_clear(&rep);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "math=fast"), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ch, &tx, &std), ER_ERR_STANDARD);
    er_report_clear(&rep);
    er_ref_free(ch);
    er_ref_free(t);
}
END_TEST

int main(void) {
    Suite *s = suite_create("unary");
    TCase *tc = tcase_create("unary");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, implementations_at_the_edge_are_covered);
    tcase_add_test(tc, the_correctly_rounded_result_is_exact);
    tcase_add_test(tc, one_ulp_beyond_is_caught);
    tcase_add_test(tc, special_values_and_flushing);
    tcase_add_test(tc, libm_within_the_margin);
    tcase_add_test(tc, the_batch_pass_decides_as_each_element_alone);
    tcase_add_test(tc, the_batch_pass_decides_whole_chunks);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
