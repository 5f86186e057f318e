#define _POSIX_C_SOURCE 200809L /* setenv */
/* t-ival.c: the double bounds of src/enclose/ival.c against MPFR (docs/algorithms/double-bounds.md).
 * exp(t) lies in er__exp_bounds's [lo, hi] and hi <= lo (1 + 2^-49) where the theorem says so, for random t over
 * the whole range, the reduction's boundaries (odd multiples of ln 2 / 128), integers, tiny and subnormal t and
 * the ends of the range; tanh's and c / (1 + e)'s bounds built on it (Lemma D6) hold; the fixed-point sums bound
 * the exact sums of their terms; the compensated sums' radii
 * (Lemma N6 of docs/algorithms/norm-backward.md) bound ill-conditioned sums and dot products of fp32 values; the
 * branch-free outward steps (er__up_wide, er__dn_wide) move every double outward; the sum of squares' window
 * (core/sqwin.h) gives er__dot_summary's summary wherever it decides one, and er_sqwin_pos the rows' order of the
 * squares' sum; a layernorm row's constants from its
 * integer sums (core/lnsums.h, summed in another order, as a GPU does) are the host row's mean and rstd sets;
 * Welford's bounds in double are at least their formulas' values and within 2^-40 of them; quotients by integers
 * round once;
 * attention's double dot errs within Lemma A1's bound; softmax's and log_softmax's row loops give the scalar code's
 * values. Compiled with the library's internal source. */
#include "../common/er_test.h"
#include "../common/er_gen.h"
#include "enclose/ival.h"
#include "enclose/compsum.h"
#include "enclose/approx.h"
#include "enclose/softmax.h"
#include "tensor/tensor_internal.h"
#include "exact/accum.h"
#include "core/sqwin.h"
#include "core/pwin.h"
#include "core/setwidth.h"
#include "enclose/layernorm.h"
#include "enclose/attention.h"
#include "enclose/softmax_bwd.h"
#include "core/lsbdd.h"

static mpfr_t E;

/* lo <= exp(t) <= hi with exp(t) at 300 bits (outward), and the width claim. */
static void check_exp(double t) {
    double lo, hi;
    er__exp_bounds(t, &lo, &hi);
    if (t != t) { ER_REQUIRE(lo != lo && hi != hi, "exp(NaN) bounds not NaN"); return; }
    mpfr_set_d(E, t, MPFR_RNDN);
    mpfr_exp(E, E, MPFR_RNDD);
    ER_REQUIRE(mpfr_cmp_d(E, lo) >= 0, "exp(%a): lower bound %a above the exact value", t, lo);
    mpfr_set_d(E, t, MPFR_RNDN);
    mpfr_exp(E, E, MPFR_RNDU);
    ER_REQUIRE(mpfr_cmp_d(E, hi) <= 0, "exp(%a): upper bound %a below the exact value", t, hi);
    if (t >= -745 && t <= 709 && lo >= 0x1p-1022)
        ER_REQUIRE(hi <= lo * (1 + 0x1p-49), "exp(%a): [%a, %a] wider than 2^-49", t, lo, hi);
}

/* er_set_rels (the engine's and the GPU rows' widths, from at most one division) gives er_set_rel's and
 * er_set_away_rel's values bit for bit: ends drawn from zeros of both signs, subnormals, normals of both signs a few
 * ulps apart, the largest double, infinities and NaN, in every pair (lo > hi too), and random pairs. */
static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }
START_TEST(set_widths_agree) {
    er_test_reseed(4242);
    double v[] = {0.0, -0.0, 0x1p-1074, -0x1p-1074, 0x1p-1022, 1.0, nextafter(1.0, 2.0), -1.0, nextafter(-1.0, 0.0),
                  3.5, -2.25, 1e300, DBL_MAX, -DBL_MAX, INFINITY, -INFINITY, NAN};
    int nv = (int)(sizeof v / sizeof v[0]);
    long pairs = 0;
    for (long t = -(long)(nv * nv); t < er_test_trials(200000, 1000); t++) {
        double lo, hi;
        if (t < 0) {
            lo = v[(-t - 1) % nv];
            hi = v[(-t - 1) / nv];
        } else {
            lo = er_rand_normal() * ldexp(1.0, (int)er_rand_int(-60, 60));
            hi = t % 3 ? lo + fabs(er_rand_normal()) * ldexp(fabs(lo), (int)er_rand_int(-55, 0)) : lo;
        }
        double rel, away;
        er_set_rels(lo, hi, &rel, &away);
        ER_REQUIRE(same_bits(rel, er_set_rel(lo, hi)) && same_bits(away, er_set_away_rel(lo, hi)),
                   "[%a, %a]: er_set_rels gave %a, %a against %a, %a", lo, hi, rel, away, er_set_rel(lo, hi),
                   er_set_away_rel(lo, hi));
        pairs++;
    }
    ck_assert_int_gt(pairs, nv * nv);
}
END_TEST

START_TEST(exp_bounds_hold) {
    er_test_reseed(71);
    mpfr_init2(E, 300);
    er__exp_init();
    long trials = (long)(400000 * er_test_multiplier());
    for (long i = 0; i < trials; i++) {
        double t;
        switch (i % 5) {
        case 0: t = -750.0 + 1462.0 * er_rand_unit(); break;          /* the whole range and beyond */
        case 1: t = -20.0 * er_rand_unit(); break;                    /* softmax's usual arguments */
        case 2: t = ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(0, 1080)); break; /* tiny, subnormal */
        case 3: {                                                     /* near a reduction boundary */
            double k = (double)er_rand_int(-137700, 131000) + 0.5;
            t = nextafter(k * 0.693147180559945309417232 / 64, er_rand64() & 1 ? INFINITY : -INFINITY);
            break;
        }
        default: t = (double)(float)(-90.0 * er_rand_unit()); break;  /* float arguments */
        }
        check_exp(t);
    }
    static const double edges[] = {0.0, -0.0, 0x1p-1074, -0x1p-1074, 1.0, -1.0, -745.0, -744.5, -744.44, -708.4, -708.39,
                                   709.0, 708.9, 709.5, 710.0, -746.0, -1e300, 1e300, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) check_exp(edges[i]);
    for (int k = -745; k <= 709; k++) { check_exp(k); check_exp(nextafter(k, 0)); }
    double lo, hi;
    er__exp_bounds(0.0, &lo, &hi);
    ck_assert(lo <= 1.0 && hi >= 1.0 && lo > 1 - 0x1p-50 && hi < 1 + 0x1p-50);
    er__exp_bounds(-INFINITY, &lo, &hi);
    ck_assert(lo == 0 && hi == 0);
    mpfr_clear(E);
    printf("exp bounds: %ld random arguments and %zu edges hold\n", trials, sizeof edges / sizeof edges[0] + 2 * 1455);
}
END_TEST

/* Lemma D6: er__tanh_bounds and er__quot_1p_bounds, fed er__exp_bounds, hold tanh(s) for s >= 1/4 and c / (1 +
 * exp(-x)) (sigmoid, silu) against MPFR at 300 bits, on float arguments spread, near 1/4, large, and (for the
 * quotient) tiny and huge exps; each within its claimed width. */
START_TEST(tanh_and_quotient_bounds_hold) {
    er_test_reseed(73);
    mpfr_init2(E, 300);
    mpfr_t t;
    mpfr_init2(t, 300);
    er__exp_init();
    long trials = (long)(200000 * er_test_multiplier());
    for (long i = 0; i < trials; i++) {
        float s = i % 4 == 0 ? 0.25f + (float)ldexp(er_rand_unit(), -(int)er_rand_int(2, 30))
                  : i % 4 == 1 ? (float)(0.25 + 20 * er_rand_unit())
                  : i % 8 == 2 ? (float)ldexp(er_rand_unit(), -(int)er_rand_int(3, 40)) /* below 1/4: refused */
                               : (float)(0.25 + 400 * er_rand_unit());
        double elo, ehi, lo, hi;
        er__exp_bounds(2 * (double)s, &elo, &ehi);
        int got = er__tanh_bounds(s, elo, ehi, &lo, &hi);
        ER_REQUIRE(got == (s >= 0.25f), "tanh(%a): bounds %s", (double)s, got ? "given below 1/4" : "refused");
        if (!got) lo = hi = NAN;
        mpfr_set_d(E, s, MPFR_RNDN);
        mpfr_tanh(E, E, MPFR_RNDN);
        ER_REQUIRE(!got || (mpfr_cmp_d(E, lo) >= 0 && mpfr_cmp_d(E, hi) <= 0), "tanh(%a) outside [%a, %a]", (double)s,
                   lo, hi);
        ER_REQUIRE(!got || hi <= lo * (1 + 0x1p-42), "tanh(%a): [%a, %a] wider than 2^-42", (double)s, lo, hi);
        /* c / (1 + exp(-x)) with c = 1 and c = x, x a float over [-100, 800] */
        float x = i % 3 == 0 ? (float)(40 * er_rand_unit() - 20) : i % 3 == 1 ? (float)(-100 + 900 * er_rand_unit())
                                                                             : (float)(er_rand_normal() * 4);
        er__exp_bounds(-(double)x, &elo, &ehi);
        for (int cx = 0; cx < 2; cx++) {
            double c = cx ? (double)x : 1.0;
            er__quot_1p_bounds(c, elo, ehi, &lo, &hi);
            mpfr_set_d(E, -(double)x, MPFR_RNDN);
            mpfr_exp(E, E, MPFR_RNDN);
            mpfr_add_ui(E, E, 1, MPFR_RNDN);
            mpfr_set_d(t, c, MPFR_RNDN);
            mpfr_div(E, t, E, MPFR_RNDN);
            ER_REQUIRE(mpfr_cmp_d(E, lo) >= 0 && mpfr_cmp_d(E, hi) <= 0, "%a / (1 + exp(-%a)) outside [%a, %a]", c,
                       (double)x, lo, hi);
            ER_REQUIRE(c == 0 || fabs(hi - lo) <= fabs(lo) * 0x1p-42 + 0x1p-1000, "%a / (1 + exp(-%a)): [%a, %a] wide",
                       c, (double)x, lo, hi);
            ER_REQUIRE(er__quot_1p_bound(c, elo, ehi, 0) == lo && er__quot_1p_bound(c, elo, ehi, 1) == hi,
                       "%a / (1 + exp(-%a)): one end alone differs from [%a, %a]", c, (double)x, lo, hi);
        }
    }
    mpfr_clear(t);
    mpfr_clear(E);
}
END_TEST

/* Lemma D9: tanh below 1/4 from its series, and er__tanh_any_bounds on both sides of 1/4 and of either sign, against
 * MPFR at 300 bits: floats and doubles spread over (0, 1/4), just below 1/4, near powers of two and down to 2^-900;
 * each enclosure within 2^-44 of its size. */
START_TEST(tanh_small_bounds_hold) {
    er_test_reseed(74);
    mpfr_init2(E, 300);
    er__exp_init();
    long trials = (long)(200000 * er_test_multiplier());
    for (long i = 0; i < trials; i++) {
        double s = i % 5 == 0   ? 0.25 - ldexp(er_rand_unit(), -(int)er_rand_int(3, 52))
                   : i % 5 == 1 ? ldexp(1.0 + ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(20, 52)), -(int)er_rand_int(3, 60))
                   : i % 5 == 2 ? ldexp(er_rand_unit(), -(int)er_rand_int(3, 900))
                   : i % 5 == 3 ? (double)(float)(0.25 * er_rand_unit())
                                : 0.25 + 2 * er_rand_unit();
        if (i % 2) s = -s;
        double elo, ehi, lo, hi;
        er__exp_bounds(2 * fabs(s), &elo, &ehi);
        int got = er__tanh_any_bounds(s, elo, ehi, &lo, &hi);
        ER_REQUIRE(got == (fabs(s) >= 0x1p-900 || s == 0), "tanh(%a): bounds %s", s, got ? "given" : "refused");
        if (!got) continue;
        mpfr_set_d(E, s, MPFR_RNDN);
        mpfr_tanh(E, E, MPFR_RNDN);
        ER_REQUIRE(mpfr_cmp_d(E, lo) >= 0 && mpfr_cmp_d(E, hi) <= 0, "tanh(%a) outside [%a, %a]", s, lo, hi);
        ER_REQUIRE(hi - lo <= fabs(lo) * 0x1p-44, "tanh(%a): [%a, %a] wider than 2^-44", s, lo, hi);
    }
    double lo, hi;
    ER_REQUIRE(er__tanh_any_bounds(0.0, 1, 1, &lo, &hi) && lo == 0 && hi == 0, "tanh(0): [%a, %a]", lo, hi);
    ER_REQUIRE(!er__tanh_any_bounds(NAN, 1, 1, &lo, &hi), "tanh(NaN) bounded");
    mpfr_clear(E);
}
END_TEST

START_TEST(fixed_sums_bound_the_exact_sum) {
    er_test_reseed(72);
    mpfr_t sl, sh;
    mpfr_inits2(2300, sl, sh, (mpfr_ptr)0);
    long trials = (long)(3000 * er_test_multiplier());
    for (long tr = 0; tr < trials; tr++) {
        int n = (int)er_rand_int(1, 2000);
        er_fxsum fs = {0, 0};
        mpfr_set_zero(sl, 1);
        mpfr_set_zero(sh, 1);
        for (int j = 0; j < n; j++) {
            double a;
            switch (er_rand64() % 4) {
            case 0: a = 0; break;
            case 1: a = ldexp(er_rand_unit(), -(int)er_rand_int(0, 1074)); break;
            case 2: a = 2.0 * er_rand_unit(); break;
            default: a = exp(-30 * er_rand_unit()); break;
            }
            double b = a == 0 ? 0 : nextafter(a, 2.0);
            er__fxsum_add(&fs, a, b);
            mpfr_add_d(sl, sl, a, MPFR_RNDN); /* exact */
            mpfr_add_d(sh, sh, b, MPFR_RNDN);
        }
        double lo = er__fxsum_lo(&fs), hi = er__fxsum_hi(&fs);
        ER_REQUIRE(mpfr_cmp_d(sl, lo) >= 0, "trial %ld: fixed sum's lower end %a above the exact sum", tr, lo);
        ER_REQUIRE(mpfr_cmp_d(sh, hi) <= 0, "trial %ld: fixed sum's upper end %a below the exact sum", tr, hi);
        /* within n 2^-90 and two roundings of the exact sums */
        mpfr_sub_d(sl, sl, lo, MPFR_RNDU);
        ER_REQUIRE(mpfr_get_d(sl, MPFR_RNDU) <= n * 0x1p-90 + 0x1p-50 * lo, "trial %ld: lower end too low", tr);
    }
    mpfr_clears(sl, sh, (mpfr_ptr)0);
}
END_TEST

/* A random fp32 value of exponent in [lo, hi], of either sign. */
static double f32_at(int lo, int hi) {
    return (double)(float)ldexp((er_rand64() & 1 ? -1.0 : 1.0) * (1.0 + er_rand_unit()), (int)er_rand_int(lo, hi));
}

/* Lemma N6: sum g_j and sum g_j (x_j - m) of fp32 values (g = w dy, a product of two) lie within er__csum_radius
 * of fl(s + b), on sums built to cancel (each term followed, now and then, by its negation moved by a few ulps:
 * condition numbers to 2^60 and beyond), x and m of far-apart exponents (x - m not a double: its companion g dl
 * counts), and exact zeros. The radius is also at most n^2 2^-98 of the magnitudes plus 2^-51 of the result. */
START_TEST(compensated_sums_bound_the_exact_sum) {
    er_test_reseed(73);
    mpfr_t ex, t;
    mpfr_inits2(2400, ex, t, (mpfr_ptr)0);
    long trials = (long)(4000 * er_test_multiplier());
    for (long tr = 0; tr < trials; tr++) {
        int n = (int)er_rand_int(1, 600), dot = (int)(tr & 1), span = (int)er_rand_int(0, 60);
        double m = tr % 3 == 0 ? 0.0 : f32_at(-span - 40, span);
        er_csum c = { 0, 0 };
        double sabs = 0, pg = 0, px = 0;
        mpfr_set_zero(ex, 1);
        for (int j = 0; j < n; j++) {
            double g, x;
            if (j > 0 && er_rand64() % 2) { /* the previous term's negation, moved */
                g = -pg;
                x = (double)nextafterf((float)px, er_rand64() & 1 ? INFINITY : -INFINITY);
                if (er_rand64() % 4 == 0) x = px;
            } else {
                g = f32_at(-span, span) * f32_at(-20, 20);
                x = f32_at(-span, span);
            }
            pg = g;
            px = x;
            if (dot) {
                sabs += fabs(er__csum_add_prod(&c, g, x, m));
                mpfr_set_d(t, x, MPFR_RNDN);
                mpfr_sub_d(t, t, m, MPFR_RNDN); /* exact at 2400 bits */
                mpfr_mul_d(t, t, g, MPFR_RNDN);
            } else {
                er__csum_add(&c, g, 0.0);
                sabs += fabs(g);
                mpfr_set_d(t, g, MPFR_RNDN);
            }
            mpfr_add(ex, ex, t, MPFR_RNDN); /* exact */
        }
        double K = (double)(n + 4) * 0x1p-52, sa = er__up(sabs * (1.0 + K)), centre = c.s + c.b;
        double R = dot ? er__csum_radius(n, 3, 0x1p-50, sa, centre) : er__csum_radius(n, 2, 0.0, sa, centre);
        mpfr_sub_d(t, ex, centre, MPFR_RNDN); /* exact */
        mpfr_abs(t, t, MPFR_RNDN);
        ER_REQUIRE(mpfr_cmp_d(t, R) <= 0, "trial %ld (n %d, %s): |exact - %a| = %a above the radius %a", tr, n,
                   dot ? "dot" : "sum", centre, mpfr_get_d(t, MPFR_RNDU), R);
        ER_REQUIRE(R <= (double)n * n * 0x1p-98 * sa + 0x1p-51 * fabs(centre) + 0x1p-1000,
                   "trial %ld: radius %a wide", tr, R);
    }
    printf("compensated sums: %ld ill-conditioned sums and dot products within their radii\n", trials);
    mpfr_clears(ex, t, (mpfr_ptr)0);
}
END_TEST

/* Lemma D7: er__exp_shift's [lo, hi] holds c exp(v*) for a point [c, c] and every real v* within 2^-60 of v, |v| <=
 * 2^-18 (MPFR at 300 bits), at the ends of that range, tiny and subnormal shifts, and the shifts x - m - fl(x - m)
 * of float differences; each end within 2^-48 of the value. */
START_TEST(exp_shift_bounds_hold) {
    er_test_reseed(75);
    mpfr_t v, e, s;
    mpfr_inits2(300, v, e, s, (mpfr_ptr)0);
    long trials = (long)(200000 * er_test_multiplier());
    for (long i = 0; i < trials; i++) {
        double vd;
        switch (i % 4) {
        case 0: vd = ldexp(2.0 * er_rand_unit() - 1.0, -18); break;
        case 1: vd = (er_rand64() & 1 ? 1 : -1) * nextafter(0x1p-18, 0.0) * (1.0 - ldexp(er_rand_unit(), -40)); break;
        case 2: vd = ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(18, 1075)); break;
        default: { /* a float row's x - m against its rounding to fp32 */
            double x = (double)(float)(8.0 * er_rand_unit() - 4.0), m = (double)(float)(4.0 + 4.0 * er_rand_unit());
            vd = (x - m) - (double)(float)(x - m);
        }
        }
        double c = ldexp(1.0 + er_rand_unit(), -(int)er_rand_int(0, 60)), lo, hi;
        er__exp_shift(c, c, vd, &lo, &hi);
        for (int k = -1; k <= 1; k++) { /* v* = v + k 2^-60 */
            mpfr_set_d(v, vd, MPFR_RNDN);
            mpfr_set_d(s, ldexp((double)k, -60), MPFR_RNDN);
            mpfr_add(v, v, s, MPFR_RNDN); /* exact at 300 bits */
            mpfr_exp(e, v, MPFR_RNDD);
            mpfr_mul_d(e, e, c, MPFR_RNDD);
            ER_REQUIRE(mpfr_cmp_d(e, lo) >= 0, "exp_shift(%a, v %a%+d 2^-60): lower end %a above", c, vd, k, lo);
            mpfr_exp(e, v, MPFR_RNDU);
            mpfr_mul_d(e, e, c, MPFR_RNDU);
            ER_REQUIRE(mpfr_cmp_d(e, hi) <= 0, "exp_shift(%a, v %a%+d 2^-60): upper end %a below", c, vd, k, hi);
        }
        ER_REQUIRE(hi <= lo * (1 + 0x1p-49), "exp_shift(%a, %a): [%a, %a] wider than 2^-49", c, vd, lo, hi);
        er__exp_shift(0.0, 0.0, vd, &lo, &hi); /* exp(d) below double's least subnormal: the ends stay in [0, 2] */
        ER_REQUIRE(lo == 0 && !signbit(lo) && hi >= 0 && hi <= 0x1p-1070, "exp_shift(0, %a): [%a, %a]", vd, lo, hi);
    }
    mpfr_clears(v, e, s, (mpfr_ptr)0);
    printf("exp shifts: %ld shifts hold\n", trials);
}
END_TEST

/* Lemma U2: er__approx_ends's exact ends for an integer U (the common case: a one-binade interval of normals of F,
 * p <= 26) equal those of Lemma U1's general computation (er__approx_ends_general), for fp32, fp16 and bf16, with
 * a at values of F, at their midpoints (ties), a few doubles either side of both, and random; b = a or a little above;
 * U from 0 to 4 and large (below 2^(p-2), within Lemma U1's U < 2^(p-1)). */
START_TEST(approx_ends_exact_form_agrees) {
    er_test_reseed(76);
    static const er_format fs[3] = { ER_FP32, ER_FP16, ER_BF16 };
    long trials = (long)(300000 * er_test_multiplier()), same = 0, exact = 0;
    for (long i = 0; i < trials; i++) {
        const er_fmt_info *F = er__fmt(fs[i % 3]);
        double base = ldexp(1.0 + er_rand_unit(), (int)er_rand_int(-12, 12));
        double a = er__round_double(F, base, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        int e;
        frexp(a, &e);
        double sp = ldexp(1.0, e - F->p), dd = ldexp(1.0, e - 53);
        switch (er_rand_int(0, 4)) {
        case 0: break;                                                     /* a value of F */
        case 1: a += 0.5 * sp; break;                                      /* a midpoint */
        case 2: a += dd * (double)er_rand_int(-3, 3); break;               /* a few doubles from a value */
        case 3: a += 0.5 * sp + dd * (double)er_rand_int(-3, 3); break;    /* a few doubles from a midpoint */
        default: a = base;
        }
        double b = er_rand64() & 1 ? a : a * (1.0 + ldexp(1.0, -(int)er_rand_int(20, 52)));
        double U = (double)(er_rand64() % 7 ? er_rand_int(0, 4) : er_rand_int(5, 3000)); /* the model: U < 2^(p-1) */
        if (U >= ldexp(1.0, F->p - 2)) U = (double)er_rand_int(0, (int64_t)ldexp(1.0, F->p - 2) - 1);
        double l1, h1, l2, h2;
        er__approx_ends(F, U, a, b, &l1, &h1);
        er__approx_ends_general(F, U, a, b, &l2, &h2);
        ER_REQUIRE(l1 == l2 && h1 == h2, "format %d, U %g, [%a, %a]: [%a, %a] against the general [%a, %a]", (int)F->id, U,
                   a, b, l1, h1, l2, h2);
        same++;
        uint64_t ea = er__bits(a) >> 52, eb = er__bits(b) >> 52;
        exact += ea == eb && er__round_double(F, b, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE) < ldexp(1.0, e) &&
                 U * sp <= 0.125 * a;
    }
    ER_REQUIRE(exact > trials / 2, "the exact form was reached %ld times of %ld", exact, trials);
    printf("approx ends: %ld intervals agree, %ld of them by the exact form\n", same, exact);
}
END_TEST

/* er__up_wide and er__dn_wide move every finite double at least one step outward (strictly beyond x, and beyond
 * nextafter's neighbour or equal to it) and at most three: at powers of two and their neighbours, subnormals, 0,
 * both signs, and random doubles over the whole range; an infinity only beyond DBL_MAX's neighbourhood. */
START_TEST(wide_steps_move_outward) {
    er_test_reseed(74);
    long trials = (long)(200000 * er_test_multiplier()), n = 0;
    for (long tr = 0; tr < trials + 2 * 2100; tr++, n++) {
        double x;
        if (tr < 2 * 2100) { /* 2^e for e in [-1074, 1023] and its two neighbours */
            double p = ldexp(1.0, (int)(tr / 2) - 1074 < 1024 ? (int)(tr / 2) - 1074 : 1023);
            x = tr % 2 ? p : nextafter(p, 0.0);
        } else if (tr % 3 == 0) {
            x = ldexp(er_rand_unit(), -(int)er_rand_int(0, 1080));
        } else {
            x = ldexp(1.0 + er_rand_unit(), (int)er_rand_int(-1074, 1023));
        }
        if (er_rand64() & 1) x = -x;
        double u = er__up_wide(x), d = er__dn_wide(x);
        ER_REQUIRE(u > x && u >= nextafter(x, INFINITY), "up_wide(%a) = %a", x, u);
        ER_REQUIRE(d < x && d <= nextafter(x, -INFINITY), "dn_wide(%a) = %a", x, d);
        if (fabs(x) < 0x1p1020)
            ER_REQUIRE(u <= nextafter(nextafter(nextafter(x, INFINITY), INFINITY), INFINITY) &&
                           d >= nextafter(nextafter(nextafter(x, -INFINITY), -INFINITY), -INFINITY),
                       "%a moved by more than three steps: [%a, %a]", x, d, u);
    }
    ck_assert(er__up_wide(0.0) > 0 && er__dn_wide(0.0) < 0 && er__up_wide(-0.0) > 0);
    printf("wide steps: %ld doubles moved outward\n", n);
}
END_TEST

/* er__exps_fill_kernel's vectorised pass (both builds where the processor runs AVX2) writes the scalar loop's
 * values bit for bit, and the same sums: rows of fp32 logits (narrow, wide enough that exp(d_j) leaves the normals of
 * fp32 and of double's scaling, with -inf, with huge values, with d_j next to -k ln 2 so that exp(d_j) rounds to a
 * power of two in fp32, with tiny values whose difference from m is not exact in double), of doubles that are not
 * floats, U of 0, 1, 2, 3 and 2^30, __expf's bound (scalar alone), lengths around the pass's runs. Counts the
 * elements the pass decides and those it leaves to the scalar loop: both must be reached. Likewise softmax's pass
 * of the exps' ends (er__exp_ends_f32_run) against er__exp_ends, where m is a float. */
START_TEST(exps_vector_pass_agrees) {
    er_test_reseed(77);
    er__exp_init();
    enum { NMAX = 1100 };
    static double x[NMAX], a[10][NMAX], b[10][NMAX], el[NMAX], eh[NMAX];
    static uint8_t slow[NMAX];
    static const double Us[5] = { 0, 1, 2, 3, 0x1p30 };
    long trials = (long)(3000 * er_test_multiplier()), vec = 0, scal = 0, ends_run = 0, ends_left = 0;
    int builds = 1 + er__simd();
    for (long tr = 0; tr < trials; tr++) {
        int64_t n = tr % 7 == 0 ? (int64_t)er_rand_int(1, 3) : (int64_t)er_rand_int(200, NMAX);
        int fam = (int)(tr % 8);
        double spread = fam == 0 ? 4.0 : fam == 1 ? 40.0 : fam == 2 ? 200.0 : fam == 3 ? 2000.0 : 8.0;
        for (int64_t j = 0; j < n; j++) {
            double v = spread * (er_rand_unit() - 0.5);
            if (fam == 4 && j % 5 == 0) v = (er_rand64() & 1 ? 1 : -1) * ldexp(1.0 + er_rand_unit(), 100);
            if (fam == 6 && j % 3 == 0) /* d_j next to -k ln 2: exp(d_j) within an ulp of fp32 of a power of two */
                v = 4.0 + (double)nextafterf((float)(-(double)er_rand_int(1, 40) * 0.6931471805599453),
                                             er_rand64() & 1 ? INFINITY : -INFINITY);
            if (fam == 7 && j % 4 == 0) v = ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(40, 140)); /* x - m inexact */
            x[j] = (double)(float)v;
            if (fam == 5 && j % 7 == 0) x[j] = v;              /* a double that is (almost surely) not a float */
            if (j % 97 == 13) x[j] = -INFINITY;
        }
        if (fam == 6) x[0] = 4.0;
        double m = -INFINITY;
        for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
        if (m == -INFINITY) continue;
        er_softmax_plan pl = { 0 };
        pl.F = pl.O = er__fmt(ER_FP32);
        pl.U = Us[tr % 5];
        pl.exp_fast = tr % 11 == 3;
        er_exps R[2];
        for (int k = 0; k < 2; k++) {
            double *d = k ? &b[0][0] : &a[0][0];
            R[k] = (er_exps){ d, d + NMAX, d + 2 * NMAX, d + 3 * NMAX, d + 4 * NMAX, d + 5 * NMAX, 0, 0, 0 };
        }
        er__exps_fill_kernel(&R[0], &pl, x, n, m, NULL);
        for (int simd = 0; simd < builds; simd++) {
            er_exps_scratch w = { el, eh, slow, simd };
            er__exps_fill_kernel(&R[1], &pl, x, n, m, &w);
            for (int64_t j = 0; j < n; j++) {
                const double *A[6] = { R[0].lo, R[0].hi, R[0].t, R[0].e, R[0].dlo, R[0].dhi };
                const double *B[6] = { R[1].lo, R[1].hi, R[1].t, R[1].e, R[1].dlo, R[1].dhi };
                for (int f = 0; f < 6; f++)
                    ER_REQUIRE(er__bits(A[f][j]) == er__bits(B[f][j]), "row %ld (U %g%s, simd %d): array %d at %lld: "
                               "%a, the scalar loop's %a (x %a, m %a)", tr, pl.U, pl.exp_fast ? " fast" : "", simd, f,
                               (long long)j, B[f][j], A[f][j], x[j], m);
                if (simd == 0 && !pl.exp_fast) *(slow[j] ? &scal : &vec) += 1;
            }
            ER_REQUIRE(er__bits(R[0].esl) == er__bits(R[1].esl) && er__bits(R[0].esh) == er__bits(R[1].esh),
                       "row %ld: sums %a %a, the scalar loop's %a %a", tr, R[1].esl, R[1].esh, R[0].esl, R[0].esh);
            /* softmax's sets' pass (er__exp_ends_f32_run): er__exp_ends from er__exp_bounds(d_j) where it decides */
            if (pl.exp_fast || (double)(float)m != m) continue;
            er__exp_ends_f32_run(simd, n, x, m, pl.U, el, eh, slow);
            for (int64_t j = 0; j < n; j++) {
                if (slow[j]) { ends_left += simd == 0; continue; }
                double dj = er__round_sum(pl.F, x[j], -m, ER_ROUND_NEAREST), zl, zh, l, h;
                er__exp_bounds(dj, &zl, &zh);
                er__exp_ends(&pl, dj, zl, zh, &l, &h);
                ER_REQUIRE(er__bits(l) == er__bits(el[j]) && er__bits(h) == er__bits(eh[j]),
                           "row %ld (U %g, simd %d): the exp's ends at %lld [%a, %a], er__exp_ends [%a, %a] (x %a, "
                           "m %a)", tr, pl.U, simd, (long long)j, el[j], eh[j], l, h, x[j], m);
                ends_run += simd == 0;
            }
        }
    }
    ER_REQUIRE(vec > 100000 && scal > 1000, "the pass decided %ld elements and left %ld", vec, scal);
    ER_REQUIRE(ends_run > 100000 && ends_left > 1000, "the exps' ends pass decided %ld elements and left %ld",
               ends_run, ends_left);
    printf("exps pass: %ld elements by the vectorised pass, %ld left to the scalar loop, %d builds agree; the "
           "exps' ends: %ld by their pass, %ld left\n", vec, scal, builds, ends_run, ends_left);
}
END_TEST

/* er__softmax_row's loops that vectorise (the exps' ends, Lemma D5's quotients, log_softmax's compositions, the exact
 * results' roundings) give the scalar code's sets, exact and rounded results (pl.scalar = 1) bit for bit, in every
 * build: rows of fp32 logits narrow and wide, with -inf and with tiny values, fp32, fp16 and bf16 outputs, exp_ulps
 * 1, 2 and 3, each div=, softmax and log_softmax. */
START_TEST(softmax_row_loops_agree) {
    er_test_reseed(81);
    er__exp_init();
    enum { NMAX = 1100 };
    static double x[NMAX], ex[2][NMAX], rd[2][NMAX];
    static er_cval cv[2][NMAX];
    static const er_format outs[3] = { ER_FP32, ER_FP16, ER_BF16 };
    long trials = (long)(540 * er_test_multiplier()), elems = 0;
    int builds = 1 + er__simd();
    for (long tr = 0; tr < trials; tr++) {
        int64_t n = tr % 7 == 0 ? (int64_t)er_rand_int(1, 40) : (int64_t)er_rand_int(200, NMAX);
        int fam = (int)(tr / 18 % 5);
        double spread = fam == 0 ? 4.0 : fam == 1 ? 40.0 : fam == 2 ? 200.0 : 8.0;
        for (int64_t j = 0; j < n; j++) {
            double v = spread * (er_rand_unit() - 0.5);
            if (fam == 4 && j % 3 == 0) v = ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(40, 140));
            x[j] = j % 97 == 13 ? -INFINITY : (double)(float)v;
        }
        er_softmax_plan pl = { 0 };
        pl.F = er__fmt(ER_FP32);
        pl.O = er__fmt(outs[tr % 3]);
        pl.ov_out = ER_OVERFLOW_IEEE;
        pl.U = (double)(1 + tr / 3 % 3);
        pl.div = (int)(tr / 9 % 3);
        pl.log = (int)(tr % 2);
        pl.Ulog = 1.0;
        if (pl.log) pl.div = 0;
        pl.scalar = 1;
        ck_assert_int_eq(er__softmax_row(&pl, x, n, cv[0], ex[0], rd[0]), ER_OK);
        pl.scalar = 0;
        for (int simd = 0; simd < builds; simd++) {
            pl.simd = simd;
            ck_assert_int_eq(er__softmax_row(&pl, x, n, cv[1], ex[1], rd[1]), ER_OK);
            for (int64_t j = 0; j < n; j++) {
                const er_cval *a = &cv[0][j], *b = &cv[1][j];
                ER_REQUIRE(er__bits(a->lo) == er__bits(b->lo) && er__bits(a->hi) == er__bits(b->hi) &&
                               a->pinf == b->pinf && a->ninf == b->ninf && a->nan == b->nan && a->nan_req == b->nan_req,
                           "row %ld (%s, %s out, U %g, div %d, simd %d) at %lld: set [%a, %a], the scalar code's "
                           "[%a, %a] (x %a)", tr, pl.log ? "log_softmax" : "softmax", er_format_name(outs[tr % 3]),
                           pl.U, pl.div, simd, (long long)j, b->lo, b->hi, a->lo, a->hi, x[j]);
                ER_REQUIRE(er__bits(ex[0][j]) == er__bits(ex[1][j]) && er__bits(rd[0][j]) == er__bits(rd[1][j]),
                           "row %ld (simd %d) at %lld: exact %a rounded %a, the scalar code's %a %a", tr, simd,
                           (long long)j, ex[1][j], rd[1][j], ex[0][j], rd[0][j]);
            }
        }
        elems += n;
    }
    printf("softmax rows: %ld elements, the loops give the scalar code's sets and results in %d builds\n", elems,
           builds);
}
END_TEST

/* Lemma D8: er__exp_dd's h + l lies within 2^-65 exp(t) of exp(t) (MPFR at 300 bits) and |l| <= 2^-52 |h|, for
 * random t in [-690, 1], softmax's usual [-30, 0], float arguments, tiny ones, the doubles next to the reduction's
 * boundaries (k + 1/2) L, every integer and its neighbours in the range. Prints the largest error seen. */
START_TEST(exp_dd_within_2_65) {
    er_test_reseed(78);
    er__exp_init();
    mpfr_t e, v;
    mpfr_inits2(300, e, v, (mpfr_ptr)0);
    long trials = (long)(300000 * er_test_multiplier());
    double worst = 0;
    for (long i = 0; i < trials + 2 * 692; i++) {
        double t;
        if (i >= trials) {
            int k = -690 + (int)((i - trials) / 2);
            t = (i - trials) % 2 ? (double)k : nextafter((double)k, 0.0);
        } else {
            switch (i % 5) {
            case 0: t = -690.0 + 691.0 * er_rand_unit(); break;
            case 1: t = -30.0 * er_rand_unit(); break;
            case 2: t = ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(0, 1074)); break;
            case 3: {
                double k = (double)er_rand_int(-63700, 90) + 0.5;
                t = nextafter(k * 0.693147180559945309417232 / 64, er_rand64() & 1 ? INFINITY : -INFINITY);
                break;
            }
            default: t = (double)(float)(-90.0 * er_rand_unit()); break;
            }
        }
        if (!(t >= -690.0 && t <= 1.0)) continue;
        double h, l;
        er__exp_dd(t, &h, &l);
        mpfr_set_d(v, t, MPFR_RNDN);
        mpfr_exp(e, v, MPFR_RNDN);
        mpfr_set_d(v, h, MPFR_RNDN);
        mpfr_add_d(v, v, l, MPFR_RNDN); /* exact at 300 bits */
        mpfr_sub(v, v, e, MPFR_RNDN);
        mpfr_div(v, v, e, MPFR_RNDN);
        double rel = fabs(mpfr_get_d(v, MPFR_RNDN));
        worst = rel > worst ? rel : worst;
        ER_REQUIRE(rel <= 0x1p-65, "exp_dd(%a) = %a + %a: relative error %a above 2^-65", t, h, l, rel);
        ER_REQUIRE(fabs(l) <= 0x1p-52 * fabs(h), "exp_dd(%a) = %a + %a: low part too large", t, h, l);
    }
    mpfr_clears(e, v, (mpfr_ptr)0);
    printf("exp dd: %ld arguments within 2^-65, the largest error 2^%.2f\n", trials, log2(worst));
}
END_TEST

/* er__exp_bounds_run gives er__exp_bounds's values bit for bit, in both builds, on runs of arguments over the whole
 * range and beyond it (the marked ones), the ends of the vectorised range (-690, 709), NaN and the infinities, at
 * lengths around its runs of 256. */
/* Lemma D10: er__log_fast's ends hold log(x) (MPFR at 300 bits) for x over the whole range of doubles (subnormals
 * included), near 1 on both sides, at powers of two and their neighbours, sums of exps (1 to 2^40) and floats; every
 * positive finite x certified; each end within 8 ulps of log(x) plus 2^-60. er__log_dir gives MPFR's -inf at 0 and
 * +inf at +inf. Prints the largest width seen in ulps. */
START_TEST(log_dir_bounds_hold) {
    er_test_reseed(86);
    er__exp_init();
    mpfr_t a, e;
    mpfr_inits2(300, a, e, (mpfr_ptr)0);
    long trials = (long)(200000 * er_test_multiplier()), certified = 0;
    double worst = 0;
    for (long i = 0; i < trials; i++) {
        double x;
        switch (i % 6) {
        case 0: x = ldexp(0.5 + 0.5 * er_rand_unit(), (int)er_rand_int(-1073, 1024)); break;
        case 1: x = 1.0 + ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(1, 60)); break;
        case 2: x = nextafter(ldexp(1.0, (int)er_rand_int(-1074, 1023)), er_rand64() & 1 ? INFINITY : 0.0); break;
        case 3: x = ldexp(1.0 + er_rand_unit(), (int)er_rand_int(0, 40)); break;
        case 4: x = (double)(float)ldexp(er_rand_unit() + 0.01, (int)er_rand_int(-140, 120)); break;
        default: x = er__from_bits(er_rand64() % er__bits(DBL_MAX) + 1); break;
        }
        if (!(x > 0) || !(x <= DBL_MAX)) continue;
        mpfr_set_d(a, x, MPFR_RNDN);
        mpfr_log(e, a, MPFR_RNDN);
        double ends[2];
        int ok = er__log_fast(x, 0, &ends[0]) & er__log_fast(x, 1, &ends[1]);
        ER_REQUIRE(ok, "x = %a: not certified", x);
        certified++;
        ER_REQUIRE(mpfr_cmp_d(e, ends[0]) > 0 && mpfr_cmp_d(e, ends[1]) < 0, "x = %a: log %.20g outside [%a, %a]", x,
                   mpfr_get_d(e, MPFR_RNDN), ends[0], ends[1]);
        double lx = mpfr_get_d(e, MPFR_RNDN), ulp = fabs(nextafter(lx, INFINITY) - lx);
        double w = fmax(lx - ends[0], ends[1] - lx) - 0x1p-60;
        ER_REQUIRE(w <= 8 * ulp, "x = %a: ends [%a, %a] of log %a, %g ulps out", x, ends[0], ends[1], lx, w / ulp);
        if (w / ulp > worst) worst = w / ulp;
    }
    ck_assert(er__log_dir(0.0, 0) == -INFINITY && er__log_dir(0.0, 1) == -INFINITY);
    ck_assert(er__log_dir(INFINITY, 0) == INFINITY && isnan(er__log_dir(NAN, 1)));
    ck_assert(er__log_dir(1.0, 0) <= 0 && er__log_dir(1.0, 1) >= 0 && er__log_dir(1.0, 1) <= 0x1p-60);
    mpfr_clears(a, e, (mpfr_ptr)0);
    printf("log ends: %ld arguments certified, each end within %.2f ulps of log(x) beyond 2^-60\n", certified, worst);
    ck_assert_int_ge(certified, trials * 9 / 10);
}
END_TEST

/* Lemma S7: softmax rows built with one element within 2^-49 of a midpoint of the output format (fp32, bf16, fp16),
 * where the double enclosure leaves it open: three knob logits set to the floats that bring the sum of exps nearest to
 * what the midpoint needs. Half the rows have a maximum of 1 and tiny logits, whose differences x_j - m are not
 * doubles (TwoSum's error reaches Lemma S7's shift), the target among them in a third of those. er__softmax_row
 * with the pass and without it (pl.no_dd, MPFR alone) must give the same roundings bit for bit and exact values
 * within 2^-60; the pass must decide the element in the rows where it lies beyond 2^-61 of the midpoint. */
static void ival_near_sum(const double *x, int64_t n, double m, mpfr_t S) {
    mpfr_t a;
    mpfr_init2(a, 300);
    mpfr_set_zero(S, 1);
    for (int64_t k = 0; k < n; k++) {
        mpfr_set_d(a, x[k], MPFR_RNDN);
        mpfr_sub_d(a, a, m, MPFR_RNDN); /* exact at 300 bits for these logits */
        mpfr_exp(a, a, MPFR_RNDN);
        mpfr_add(S, S, a, MPFR_RNDN);
    }
    mpfr_clear(a);
}
START_TEST(softmax_open_elements_in_double_double) {
    er_test_reseed(85);
    er__exp_init();
    static const er_format outs[3] = { ER_FP32, ER_BF16, ER_FP16 };
    long trials = (long)(60 * er_test_multiplier()), inrange = 0, shifted = 0;
    int64_t decided = 0, decided_in = 0;
    mpfr_t S, e, g, d;
    mpfr_inits2(300, S, e, g, d, (mpfr_ptr)0);
    for (long tr = 0; tr < trials; tr++) {
        int64_t n = tr % 4 == 0 ? 40 : 700, j = 5;
        const er_fmt_info *O = er__fmt(outs[tr % 3]);
        int tiny = (int)(tr / 3 % 2);
        double m = tiny ? 1.0 : 0.0, *x = malloc(sizeof(double) * (size_t)n);
        for (int64_t k = 0; k < n; k++) x[k] = (double)(float)(m - 8.0 * er_rand_unit());
        x[0] = m;
        x[1] = (double)(float)(m - 2.0 + er_rand_unit());
        x[2] = (double)(float)(m - 12.0 + er_rand_unit());
        x[3] = (double)(float)(m - 22.0 + er_rand_unit());
        if (tiny)
            for (int64_t k = 6; k < n; k += 7) x[k] = (double)(float)ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(30, 120));
        if (tiny && tr % 9 < 3) x[j] = (double)(float)ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(30, 60));
        double mid = 0;
        for (int knob = 1; knob <= 4; knob++) {
            ival_near_sum(x, n, m, S);
            mpfr_set_d(e, x[j], MPFR_RNDN);
            mpfr_sub_d(e, e, m, MPFR_RNDN);
            mpfr_exp(e, e, MPFR_RNDN);
            mpfr_div(g, e, S, MPFR_RNDN);
            double q = mpfr_get_d(g, MPFR_RNDN), f = er__round_double(O, q, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            double fa = er__round_double(O, f - f * 0x1p-30, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
            double fb = er__round_double(O, f + f * 0x1p-30, ER_ROUND_UP, ER_OVERFLOW_IEEE);
            /* the midpoint nearer to q; at first the one below, which the first knob reaches by growing */
            mid = q < f || knob == 1 ? 0.5 * (fa + f) : 0.5 * (f + fb);
            mpfr_sub_d(d, g, mid, MPFR_RNDN);
            if (knob == 4) {
                mpfr_div_d(d, d, mid, MPFR_RNDN);
                double rel = fabs(mpfr_get_d(d, MPFR_RNDN));
                ck_assert_msg(rel < 0x1p-49 && rel > 0, "row %ld: the element lies 2^%.1f from a midpoint", tr,
                              log2(rel));
                inrange += rel > 0x1p-61;
                break;
            }
            x[knob] = (double)er_gen_knob_to_mid(x[knob], m, S, e, mid, d, e);
        }
        for (int64_t k = 0; k < n; k++) {
            double t, te;
            er__two_sum(x[k], -m, &t, &te);
            if (te != 0) { shifted++; break; }
        }
        er_softmax_plan pl = { 0 };
        pl.F = er__fmt(ER_FP32);
        pl.O = O;
        pl.ov_out = ER_OVERFLOW_IEEE;
        pl.U = 1.0;
        pl.div = 1;
        pl.simd = er__simd();
        double *ex[2], *rd[2];
        er_cval *cv = malloc(sizeof *cv * (size_t)n);
        int64_t before = decided;
        for (int v = 0; v < 2; v++) {
            ex[v] = malloc(sizeof(double) * (size_t)n);
            rd[v] = malloc(sizeof(double) * (size_t)n);
            pl.no_dd = v;
            pl.dd_decided = v ? NULL : &decided;
            ck_assert_int_eq(er__softmax_row(&pl, x, n, cv, ex[v], rd[v]), ER_OK);
        }
        for (int64_t k = 0; k < n; k++) {
            ER_REQUIRE(er__bits(rd[0][k]) == er__bits(rd[1][k]),
                       "row %ld (%s out) at %lld: rounded %a with the pass, %a by MPFR (x %a)", tr,
                       er_format_name(O->id), (long long)k, rd[0][k], rd[1][k], x[k]);
            ER_REQUIRE(fabs(ex[0][k] - ex[1][k]) <= 0x1p-60 * fabs(ex[1][k]),
                       "row %ld at %lld: exact %a with the pass, %a by MPFR", tr, (long long)k, ex[0][k], ex[1][k]);
        }
        double rel = fabs((rd[0][j] - mid) / mid); /* the rounding is a neighbour of the midpoint */
        ck_assert_msg(rel > 0 && rel < 0x1p-7, "row %ld: rounded %a, midpoint %a", tr, rd[0][j], mid);
        mpfr_sub_d(d, g, mid, MPFR_RNDN);
        ck_assert_msg((mpfr_sgn(d) > 0) == (rd[0][j] > mid), "row %ld: rounded %a on the wrong side of %a", tr,
                      rd[0][j], mid);
        mpfr_div_d(d, d, mid, MPFR_RNDN);
        if (fabs(mpfr_get_d(d, MPFR_RNDN)) > 0x1p-61) decided_in += decided > before;
        for (int v = 0; v < 2; v++) {
            free(ex[v]);
            free(rd[v]);
        }
        free(cv);
        free(x);
    }
    mpfr_clears(S, e, g, d, (mpfr_ptr)0);
    printf("softmax open elements: %ld rows with one within 2^-49 of a midpoint (%ld beyond 2^-61, %ld with "
           "inexact differences); the pass decided %lld elements, in %lld of the rows beyond 2^-61\n",
           trials, inrange, shifted, (long long)decided, (long long)decided_in);
    ck_assert_int_eq(decided_in, inrange);
    ck_assert_int_ge(inrange, trials * 3 / 4);
    ck_assert_int_ge(shifted, trials / 3);
}
END_TEST

START_TEST(exp_bounds_run_agrees) {
    er_test_reseed(79);
    er__exp_init();
    enum { NR = 1000 };
    static double t[NR], lo[NR], hi[NR];
    static const double edges[] = { -690.0, 709.0, -745.5, 709.5, NAN, INFINITY, -INFINITY, 0.0, -0.0, 0x1p-1074 };
    long runs = (long)(600 * er_test_multiplier()), n_el = 0;
    int builds = 1 + er__simd();
    for (long r = 0; r < runs; r++) {
        int64_t n = r % 5 == 0 ? (int64_t)er_rand_int(1, 300) : (int64_t)er_rand_int(250, NR);
        for (int64_t i = 0; i < n; i++)
            t[i] = i % 17 == 0 ? edges[er_rand_int(0, 9)]
                   : i % 3 == 0 ? -750.0 + 1470.0 * er_rand_unit()
                                : ldexp(2.0 * er_rand_unit() - 1.0, (int)er_rand_int(-60, 9));
        for (int simd = 0; simd < builds; simd++) {
            er__exp_bounds_run(simd, n, t, lo, hi);
            for (int64_t i = 0; i < n; i++) {
                double l, h;
                er__exp_bounds(t[i], &l, &h);
                ER_REQUIRE(er__bits(l) == er__bits(lo[i]) && er__bits(h) == er__bits(hi[i]),
                           "exp_bounds_run(%a) = [%a, %a] (simd %d), er__exp_bounds [%a, %a]", t[i], lo[i], hi[i],
                           simd, l, h);
            }
        }
        n_el += n;
    }
    printf("exp bounds run: %ld arguments agree in %d builds\n", n_el, builds);
}
END_TEST

/* er__load_contig's loops without a call (tensor.c: the fast path's operand loads and every row op's runs) decode
 * every fp16 and bf16 pattern as er_decode does, bit for bit (NaN as NaN), at an odd address too. */
START_TEST(contiguous_loads_decode_every_pattern) {
    static uint16_t pat[65536 + 1];
    static double got[65536];
    static const er_format fs[2] = {ER_FP16, ER_BF16};
    static const char *const simd[3] = {"0", "1", "2"}; /* each build the processor runs (er__simd caps the level) */
    for (int f = 0; f < 6; f++)
        for (int shift = 0; shift < 2; shift++) {
            setenv("EXACTREF_SIMD", simd[f / 2], 1);
            char *p = (char *)pat + shift;
            for (uint32_t v = 0; v < 65536; v++) {
                uint16_t h = (uint16_t)v;
                memcpy(p + 2 * v, &h, 2);
            }
            ck_assert_int_eq(er__load_contig(er__simd(), fs[f % 2], p, 65536, got), 1);
            for (uint32_t v = 0; v < 65536; v++) {
                double want;
                ck_assert_int_eq(er_decode(&want, fs[f % 2], v), ER_OK);
                uint64_t a, b;
                memcpy(&a, &got[v], 8);
                memcpy(&b, &want, 8);
                ck_assert_msg(a == b || (isnan(got[v]) && isnan(want)), "%s pattern 0x%04x (level %d): %a, er_decode %a",
                              er_format_name(fs[f % 2]), v, er__simd(), got[v], want);
            }
        }
    unsetenv("EXACTREF_SIMD");
    double d;
    ck_assert_int_eq(er__load_contig(er__simd(), ER_FP8_E5M2, pat, 1, &d), 0);
}
END_TEST

/* er_sqwin_pos, the rows' one order of rmsnorm's sum of squares (the host's rows and the GPU's window pass): the same
 * bits as the order written out (x_j^2 into lane j mod 256 in increasing j, then the lanes in turn), and, widened as
 * er__dotsum_finish widens it (times 1 + n 2^-52, upward), at least the exact sum, which er__anyorder_cval takes as
 * its bound of sum |x_j^2| (any-order.md, Lemma 4). Rows of fp32, fp16 and bf16 values of lengths around multiples
 * of 256 and up to 5000, normal values of several scales and values spread over 2^-60 .. 2^40. */
START_TEST(square_sums_in_lanes) {
    er_test_reseed(101);
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    static const int64_t lens[] = {1, 2, 255, 256, 257, 511, 512, 513, 1000, 4096, 5000};
    long trials = (long)(3000 * er_test_multiplier());
    double *x = malloc(sizeof(double) * 5000), lane[256];
    mpfr_t ex, sq;
    mpfr_inits2(400, ex, sq, (mpfr_ptr)0);
    for (long tr = 0; tr < trials; tr++) {
        const er_fmt_info *X = er__fmt(fmts[er_rand64() % 3]);
        int64_t n = tr % 3 ? lens[er_rand64() % 11] : er_rand_int(1, 5000);
        int spread = (int)(er_rand64() % 2);
        double scale = ldexp(1.0, (int)er_rand_int(-10, 10));
        for (int64_t j = 0; j < n; j++) {
            double v = spread ? ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-60, 40)) : er_rand_normal() * scale;
            x[j] = er__round_double(X, v, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            if (!isfinite(x[j])) x[j] = 0;
        }
        for (int t = 0; t < 256; t++) lane[t] = 0;
        for (int64_t j = 0; j < n; j++) lane[j % 256] += x[j] * x[j];
        double want = 0;
        for (int t = 0; t < 256; t++) want += lane[t];
        double got = er_sqwin_pos(x, n);
        ER_REQUIRE(got == want, "%s row %ld of %lld: er_sqwin_pos %a, the order written out %a", X->name, tr,
                   (long long)n, got, want);
        mpfr_set_zero(ex, 1);
        for (int64_t j = 0; j < n; j++) {
            mpfr_set_d(sq, x[j], MPFR_RNDN);
            mpfr_sqr(sq, sq, MPFR_RNDN); /* exact */
            mpfr_add(ex, ex, sq, MPFR_RNDN); /* exact at 400 bits: the sum spans under 270 bits */
        }
        double bound = er__mul_up(got, 1.0 + (double)n * 0x1p-52);
        ER_REQUIRE(mpfr_cmp_d(ex, bound) <= 0, "%s row %ld of %lld: the widened sum %a below the exact sum %.17g",
                   X->name, tr, (long long)n, bound, mpfr_get_d(ex, MPFR_RNDN));
    }
    mpfr_clears(ex, sq, (mpfr_ptr)0);
    free(x);
    printf("square sums in lanes: %ld rows, the rows' order bit for bit, widened above the exact sums\n", trials);
}
END_TEST

/* The window of core/sqwin.h on rows of fp32, fp16 and bf16 values against er__dot_summary (the accumulator of
 * rmsnorm's rows): wherever the window decides, the same m, e and sticky. Families: normal values of several scales,
 * values spread over 2^-120 .. 2^60 (squares far below the window), a few huge values among tiny ones, zeros, rows of
 * one value, rows of 2^16 values. Then the carry rule at its edge, on constructed windows. */
START_TEST(square_windows_give_the_summary) {
    er_test_reseed(79);
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    er_acc acc;
    er_dot_env env;
    memset(&env, 0, sizeof env);
    env.base = 2 * (-149) - 52; /* as er__rmsnorm_setup sets it for values of fp32's range */
    env.top = 2 * 128 + 2 + 64;
    ck_assert_int_eq(er__acc_init(&acc, env.base, env.top), ER_OK);
    long trials = (long)(20000 * er_test_multiplier()), decided = 0, tails = 0;
    double *x = malloc(sizeof(double) * 65536);
    for (long tr = 0; tr < trials; tr++) {
        const er_fmt_info *F = er__fmt(fmts[er_rand64() % 3]);
        int fam = tr % 200 == 7 ? 5 : (int)(er_rand64() % 5); /* rows of 2^16 values: one in 200 */
        int64_t n = fam == 5 ? 65536 : er_rand_int(1, tr % 10 == 0 ? 3000 : 64);
        double scale = ldexp(1.0, (int)er_rand_int(-20, 20));
        for (int64_t j = 0; j < n; j++) {
            double v = er_rand_normal() * scale;
            if (fam == 1) v = ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-120, 60)) * (er_rand64() % 2 ? 1 : -1);
            if (fam == 2) v = j % 17 == 3 ? 1e4 * er_rand_normal() : 1e-30 * er_rand_normal();
            if (fam == 3 && er_rand64() % 2) v = 0;
            if (fam == 4) v = j ? x[0] : v;
            x[j] = er__round_double(F, v, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            if (!isfinite(x[j])) x[j] = 0;
        }
        double amax = 0;
        for (int64_t j = 0; j < n; j++) amax = fmax(amax, fabs(x[j]));
        er_sq_u128 W = 0;
        int tail = 0, b = amax > 0 ? er_sqwin_base(amax) : 0;
        for (int64_t j = 0; j < n && amax > 0; j++) W += er_sqwin_term(x[j], b, &tail);
        uint64_t m;
        int64_t e;
        int sticky;
        tails += tail;
        er_dotsum sm;
        er__dot_summary(&sm, &acc, x, x, n, &env, 0);
        if (!er_sqwin_summary(W, b, tail, n, &m, &e, &sticky)) continue;
        decided++;
        ER_REQUIRE(m == sm.m && e == sm.e && sticky == sm.sticky && !sm.neg,
                   "row %ld (family %d, n %lld, %s): the window gives m %llx e %lld sticky %d, the summary m %llx e %d "
                   "sticky %d", tr, fam, (long long)n, F->name, (unsigned long long)m, (long long)e, sticky,
                   (unsigned long long)sm.m, sm.e, sm.sticky);
    }
    ER_REQUIRE(decided >= trials - trials / 1000 && tails > trials / 20,
               "the window decided %ld of %ld rows (%ld with squares below it)", decided, trials, tails);
    printf("t-ival: the square window decided %ld of %ld rows (%ld with squares below it), each as er__dot_summary\n",
           decided, trials, tails);
    free(x);
    er__acc_free(&acc);
    /* the carry rule: W's dropped bits all ones and t < n can carry into m for n >= 2, not for n = 1 */
    uint64_t m;
    int64_t e;
    int st;
    er_sq_u128 W = ((er_sq_u128)1 << 100) - 1;
    ck_assert(er_sqwin_summary(W, -10, 1, 1, &m, &e, &st) && m == UINT64_MAX && e == -10 + 36 && st == 1);
    ck_assert(!er_sqwin_summary(W, -10, 1, 2, &m, &e, &st));
    ck_assert(er_sqwin_summary(W, -10, 0, 2, &m, &e, &st) && m == UINT64_MAX && st == 1);
    ck_assert(er_sqwin_summary((er_sq_u128)1 << 100, -10, 1, 1000, &m, &e, &st) && m == UINT64_C(1) << 63 && st == 1);
    ck_assert(!er_sqwin_summary(0, -10, 1, 5, &m, &e, &st));
    ck_assert(er_sqwin_summary(0, -10, 0, 5, &m, &e, &st) && m == 0 && e == 0 && st == 0);
    ck_assert(!er_sqwin_summary(3, -10, 1, 5, &m, &e, &st));
    ck_assert(er_sqwin_summary(3, -10, 0, 5, &m, &e, &st) && m == UINT64_C(3) << 62 && e == -10 - 62 && st == 0);
}
END_TEST

/* The window of core/pwin.h on rows of products dy_j y_j (fp32, fp16 and bf16 values) and of such products rounded to
 * bf16, against er__dot_summary_dd (softmax_backward's accumulator): wherever the window decides, the same sign, m, e
 * and sticky; its two doubles and bound hold the exact sum (MPFR); er_pwin_lanes gives the order written out, and
 * widened as er__dotsum_finish widens it, bounds of the exact sums of the positive terms and of the negative ones'
 * magnitudes. Families: normal values of several scales, values spread over 2^-80 .. 2^40 (terms far below the
 * window), rows summing to about zero (D cancelling: each product and its negation, one nudged), a few huge values
 * among tiny ones, zeros, rows of 2^16 values. Then the carry and borrow rules at their edges, on constructed
 * windows. */
START_TEST(product_windows_give_the_summary) {
    er_test_reseed(131);
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    er_acc acc;
    er_dot_env env;
    memset(&env, 0, sizeof env);
    env.base = 2 * (-149) - 52;
    env.top = 2 * 128 + 2 + 64;
    ck_assert_int_eq(er__acc_init(&acc, env.base, env.top), ER_OK);
    long trials = (long)(20000 * er_test_multiplier()), decided = 0, tails = 0, negs = 0, fams[7] = {0};
    double *a = malloc(sizeof(double) * 65536), *b = malloc(sizeof(double) * 65536), *p = malloc(sizeof(double) * 65536);
    mpfr_t ex, t;
    mpfr_inits2(700, ex, t, (mpfr_ptr)0);
    for (long tr = 0; tr < trials; tr++) {
        const er_fmt_info *F = er__fmt(fmts[er_rand64() % 3]);
        int fam = tr % 200 == 7 ? 6 : (int)(er_rand64() % 6), rounded = er_rand64() % 4 == 0;
        int64_t n = fam == 6 ? 65536 : er_rand_int(1, tr % 10 == 0 ? 3000 : 64);
        double scale = ldexp(1.0, (int)er_rand_int(-20, 20));
        for (int64_t j = 0; j < n; j++) {
            double u = er_rand_normal() * scale, v = er_rand_unit();
            if (fam == 1) {
                u = ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-80, 40)) * (er_rand64() % 2 ? 1 : -1);
                v = ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-40, 0));
            }
            if (fam == 2 && j % 2) { u = -a[j - 1]; v = b[j - 1]; } /* each product and its negation */
            if (fam == 3) u = j % 17 == 3 ? 1e4 * er_rand_normal() : 1e-20 * er_rand_normal();
            if (fam == 4 && er_rand64() % 2) u = 0;
            if (fam == 5 && er_rand64() % 3 == 0) v = 0;
            a[j] = er__round_double(F, u, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            b[j] = er__round_double(F, v, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            if (!isfinite(a[j])) a[j] = 0;
        }
        if (fam == 2 && n > 2) { /* one product nudged (kept finite) */
            double v = er__round_double(F, a[n - 1] * 1.25, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            a[n - 1] = isfinite(v) ? v : a[n - 1];
        }
        /* the terms: exact products, or (rounded) those products rounded to bf16 */
        double pmax = 0;
        for (int64_t j = 0; j < n; j++) {
            p[j] = a[j] * b[j];
            if (rounded) p[j] = er__round_double(er__fmt(ER_BF16), p[j], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            pmax = fmax(pmax, fabs(p[j]));
        }
        er_pw_i128 W = 0;
        int tail = 0, bb = pmax > 0 ? er_pwin_base(pmax) : 0;
        for (int64_t j = 0; j < n && pmax > 0; j++) W += er_pwin_term(p[j], bb, &tail);
        er_dotsum sm;
        double dd[3];
        if (rounded) /* a sum of terms: the accumulator's products by one */
            for (int64_t j = 0; j < n; j++) {
                a[j] = p[j];
                b[j] = 1.0;
            }
        er__dot_summary_dd(&sm, &acc, a, b, n, &env, 0, NULL);
        mpfr_set_zero(ex, 1);
        for (int64_t j = 0; j < n; j++) {
            mpfr_set_d(t, p[j], MPFR_RNDN);
            mpfr_add(ex, ex, t, MPFR_RNDN); /* exact at 700 bits */
        }
        er_pwin_dd(W, bb, tail, n, dd);
        ER_REQUIRE(dd[0] == dd[0], "row %ld: no double-double", tr);
        mpfr_sub_d(t, ex, dd[0], MPFR_RNDN);
        mpfr_sub_d(t, t, dd[1], MPFR_RNDN);
        mpfr_abs(t, t, MPFR_RNDN);
        ER_REQUIRE(mpfr_cmp_d(t, dd[2]) <= 0, "row %ld (family %d, n %lld): the rest %.3g above the bound %a", tr, fam,
                   (long long)n, mpfr_get_d(t, MPFR_RNDN), dd[2]);
        double pos, ng, wp = 0, wn = 0, lp[256] = {0}, ln[256] = {0};
        er_pwin_lanes(p, NULL, n, &pos, &ng);
        for (int64_t j = 0; j < n; j++) {
            lp[j % 256] += p[j] > 0 ? p[j] : 0.0;
            ln[j % 256] += p[j] < 0 ? -p[j] : 0.0;
        }
        for (int k = 0; k < 256; k++) { wp += lp[k]; wn += ln[k]; }
        ER_REQUIRE(pos == wp && ng == wn, "row %ld: the lanes %a %a, the order written out %a %a", tr, pos, ng, wp, wn);
        {
            double pos2, ng2;
            er_pwin_lanes(a, b, n, &pos2, &ng2);
            ER_REQUIRE(pos2 == pos && ng2 == ng, "row %ld: the products' lanes differ from their terms'", tr);
        }
        mpfr_set_zero(t, 1);
        for (int64_t j = 0; j < n; j++)
            if (p[j] > 0) mpfr_add_d(t, t, p[j], MPFR_RNDN);
        ER_REQUIRE(mpfr_cmp_d(t, er__mul_up(pos, 1.0 + (double)n * 0x1p-52)) <= 0, "row %ld: pos below the sum", tr);
        int neg, sticky;
        uint64_t m;
        int64_t e;
        tails += tail;
        if (!er_pwin_summary(W, bb, tail, n, &neg, &m, &e, &sticky)) continue;
        decided++;
        negs += neg;
        fams[fam]++;
        ER_REQUIRE(neg == sm.neg && m == sm.m && e == sm.e && sticky == sm.sticky,
                   "row %ld (family %d, n %lld, %s): the window gives %c m %llx e %lld sticky %d, the summary %c m %llx "
                   "e %d sticky %d", tr, fam, (long long)n, F->name, neg ? '-' : '+', (unsigned long long)m,
                   (long long)e, sticky, sm.neg ? '-' : '+', (unsigned long long)sm.m, sm.e, sm.sticky);
    }
    ER_REQUIRE(decided >= trials - trials / 100 && tails > trials / 20 && negs > trials / 5 && fams[2] > trials / 20,
               "the window decided %ld of %ld rows (%ld negative sums, %ld cancelling rows, %ld with terms below it)",
               decided, trials, negs, fams[2], tails);
    printf("t-ival: the product window decided %ld of %ld rows (%ld negative, %ld cancelling, %ld with terms below "
           "it), each as er__dot_summary\n", decided, trials, negs, fams[2], tails);
    mpfr_clears(ex, t, (mpfr_ptr)0);
    free(a);
    free(b);
    free(p);
    er__acc_free(&acc);
    /* the carry rule (W >= 0) and the borrow rule (W < 0) at their edges */
    int ng, st;
    uint64_t m;
    int64_t e;
    er_pw_i128 W = ((er_pw_i128)1 << 100) - 1;
    ck_assert(er_pwin_summary(W, -10, 1, 1, &ng, &m, &e, &st) && !ng && m == UINT64_MAX && e == -10 + 36 && st == 1);
    ck_assert(!er_pwin_summary(W, -10, 1, 2, &ng, &m, &e, &st));
    /* -(2^100 + 5): |S| = 2^100 + 5 - t, t in (0, n): m 2^63 for n <= 5, a borrow for n = 6 */
    W = -(((er_pw_i128)1 << 100) + 5);
    ck_assert(er_pwin_summary(W, -10, 1, 5, &ng, &m, &e, &st) && ng && m == UINT64_C(1) << 63 && st == 1);
    ck_assert(!er_pwin_summary(W, -10, 1, 6, &ng, &m, &e, &st));
    ck_assert(er_pwin_summary(W, -10, 0, 6, &ng, &m, &e, &st) && ng && m == UINT64_C(1) << 63 && st == 1);
    ck_assert(er_pwin_summary(-((er_pw_i128)1 << 100), -10, 0, 6, &ng, &m, &e, &st) && ng && st == 0);
    ck_assert(!er_pwin_summary(-((er_pw_i128)1 << 100), -10, 1, 1, &ng, &m, &e, &st));
    ck_assert(!er_pwin_summary(0, -10, 1, 5, &ng, &m, &e, &st));
    ck_assert(!er_pwin_summary(-3, -10, 1, 5, &ng, &m, &e, &st));
    ck_assert(er_pwin_summary(-3, -10, 0, 5, &ng, &m, &e, &st) && ng && m == UINT64_C(3) << 62 && e == -10 - 62);
}
END_TEST

/* er__round_quotient (Lemma D11's pair where it applies) against x / n in MPFR at 256 bits toward zero with the rest
 * as a sticky bit, rounded once: every format, all five rounding modes, x from 2^-1074 to 2^1023 (below 2^-900 the
 * MPFR path), n from 1 to 2^53 - 1 (small, powers of two and their neighbours, large), and quotients at, near and one
 * double either side of a midpoint or a value of the format (x = RN(v n), v of p + 1 bits ending in 1, or p bits). */
START_TEST(quotients_round_once) {
    er_test_reseed(97);
    long trials = (long)(200000 * er_test_multiplier()), ties = 0;
    mpfr_t t;
    mpfr_init2(t, 256);
    for (long tr = 0; tr < trials; tr++) {
        const er_fmt_info *F = er__fmt((er_format)er_rand_int(1, ER_FORMAT_COUNT - 1));
        er_round mode = (er_round)(er_rand64() % 5);
        int kind = (int)(er_rand64() % 4);
        int64_t n;
        if (kind == 0) n = er_rand_int(1, 9);
        else if (kind == 1) n = (INT64_C(1) << er_rand_int(0, 52)) + er_rand_int(-1, 1);
        else if (kind == 2) n = er_rand_int(1, 1 << 28);
        else n = (int64_t)(er_rand64() >> 11);
        if (n < 1) n = 1;
        double x;
        int p = F->p < 26 ? F->p : 26;
        if (er_rand64() % 2) {
            /* a midpoint (odd, p + 1 bits) or a value (p bits) of a format of at most p bits, times n: exact for small
             * n, else rounded, so that x / n lies within an ulp of double of v and the rest alone decides */
            int bits = (int)(er_rand64() % 2) ? p + 1 : p;
            double v = ldexp((double)((er_rand64() >> (64 - bits)) | (UINT64_C(1) << (bits - 1)) | 1),
                             (int)er_rand_int(-150, 120) - bits);
            x = v * (double)n;
            int step = (int)er_rand_int(-1, 1);
            if (step) x = nextafter(x, step * INFINITY);
            ties++;
        } else {
            x = ldexp(0.5 + 0.5 * er_rand_unit(), (int)er_rand_int(-1073, 1024));
        }
        if (er_rand64() % 2) x = -x;
        double got = er__round_quotient(F, x, n, mode);
        mpfr_set_d(t, x, MPFR_RNDN);
        int inexact = mpfr_div_ui(t, t, (unsigned long)n, MPFR_RNDZ);
        double want = mpfr_zero_p(t) ? x / (double)n
                                     : er__round_mpfr_sticky(F, t, inexact != 0, mode, ER_OVERFLOW_IEEE);
        ER_REQUIRE(got == want || (got != got && want != want), "%s mode %d: %a / %lld rounds to %a, not %a", F->name,
                   (int)mode, x, (long long)n, got, want);
    }
    mpfr_clear(t);
    printf("quotients: %ld quotients rounded once (%ld at or beside a value or midpoint)\n", trials, ties);
}
END_TEST

/* ---- Welford's bounds in double (layernorm.md, Evaluating Welford's bounds) against their formulas in MPFR at
 * WREF_PREC bits, every operation rounded upward (the library's evaluation before it moved to doubles). */
#define WREF_PREC 256
/* (1+u)^k - 1 rounded up, into g (u = 2^-p). */
static void ref_gamma(mpfr_t g, int p, double k) {
    mpfr_set_ui_2exp(g, 1, (mpfr_exp_t)-p, MPFR_RNDU);
    mpfr_add_ui(g, g, 1, MPFR_RNDU);
    mpfr_pow_ui(g, g, (unsigned long)k, MPFR_RNDU);
    mpfr_sub_ui(g, g, 1, MPFR_RNDU);
}

/* Mt = (n/2) bitlen(n) + n, rounded up: at least sum_v max(m_v, 1) over a Welford tree's nodes (Lemma L1). */
static void ref_welford_mt(mpfr_ptr mt, int64_t n) {
    int bl = 0;
    for (int64_t k = n; k; k >>= 1) bl++;
    mpfr_set_si(mt, n, MPFR_RNDN);
    mpfr_mul_si(mt, mt, bl, MPFR_RNDU);
    mpfr_div_2ui(mt, mt, 1, MPFR_RNDU);
    mpfr_add_si(mt, mt, n, MPFR_RNDU);
}

/* Theorem L8: the first-order part telescoped to sum_w 2 n_w (mu_w - mu) l_w over the non-root inner nodes w (l_w the
 * rounding of w's mean), split into updates and combines, and the corrections' roundings relative to T. H bounds the
 * inner nodes on a leaf's path, cdepth (0: H) the combines among them; a, b, Ew are Theorem L3's. Lowers *F1 (the
 * first-order part) and *B (the second-order part) where the new bounds are smaller. */
static void ref_welford_l8(int64_t n, int64_t H, int64_t cdepth, double A, double R, double Thi, mpfr_srcptr u,
                          mpfr_srcptr eta, mpfr_srcptr a, mpfr_srcptr b, mpfr_srcptr Ew, mpfr_srcptr g3, mpfr_srcptr g7,
                          mpfr_ptr F1, mpfr_ptr B) {
    int64_t H1 = H - 1;                                   /* levels of non-root inner nodes */
    int64_t C1 = cdepth > 0 && cdepth < H1 ? cdepth : H1; /* non-root combines on a leaf's path */
    if (H1 < 0) H1 = 0;
    if (C1 < 0) C1 = 0;
    mpfr_t al, be, lc, t, s, r, Mt;
    mpfr_inits2(WREF_PREC, al, be, lc, t, s, r, Mt, (mpfr_ptr)0);
    /* alpha = u (A + Ew) + (1 + u) eta / 2; beta = (1 + u) g3 (R + 2E); L_c = a + b Ew */
    mpfr_set_d(al, A, MPFR_RNDU);
    mpfr_add(al, al, Ew, MPFR_RNDU);
    mpfr_mul(al, al, u, MPFR_RNDU);
    mpfr_add_ui(t, u, 1, MPFR_RNDU);
    mpfr_mul(s, t, eta, MPFR_RNDU);
    mpfr_div_2ui(s, s, 1, MPFR_RNDU);
    mpfr_add(al, al, s, MPFR_RNDU);
    mpfr_mul_2ui(be, Ew, 1, MPFR_RNDU);
    mpfr_add_d(be, be, R, MPFR_RNDU);
    mpfr_mul(be, be, g3, MPFR_RNDU);
    mpfr_mul(be, be, t, MPFR_RNDU);
    mpfr_mul(lc, b, Ew, MPFR_RNDU);
    mpfr_add(lc, lc, a, MPFR_RNDU);
    /* F = 2 [(alpha H1 + L_c C1) sqrt(n T) + u H1 T + beta sqrt(0.645 n H1 T)]
     *     + sqrt(2 (n - 1) T) (alpha + u R + beta/2) */
    mpfr_set_d(r, Thi, MPFR_RNDU);
    mpfr_mul_si(r, r, n, MPFR_RNDU);
    mpfr_sqrt(r, r, MPFR_RNDU);                               /* sqrt(n T) */
    mpfr_mul_si(s, al, H1, MPFR_RNDU);
    mpfr_mul_si(t, lc, C1, MPFR_RNDU);
    mpfr_add(s, s, t, MPFR_RNDU);
    mpfr_mul(s, s, r, MPFR_RNDU);
    mpfr_mul_d(t, u, Thi, MPFR_RNDU);
    mpfr_mul_si(t, t, H1, MPFR_RNDU);
    mpfr_add(s, s, t, MPFR_RNDU);
    mpfr_set_d(t, Thi, MPFR_RNDU);
    mpfr_mul_si(t, t, n, MPFR_RNDU);
    mpfr_mul_si(t, t, H1, MPFR_RNDU);
    mpfr_mul_d(t, t, 0.645, MPFR_RNDU);                        /* sum over updates of 1/n_w <= n (pi^2/6 - 1) */
    mpfr_sqrt(t, t, MPFR_RNDU);
    mpfr_mul(t, t, be, MPFR_RNDU);
    mpfr_add(s, s, t, MPFR_RNDU);
    mpfr_mul_2ui(s, s, 1, MPFR_RNDU);
    mpfr_set_d(t, Thi, MPFR_RNDU);                            /* the updates' own term sum_U |Delta_w| |l_w| */
    mpfr_mul_si(t, t, 2 * (n > 1 ? n - 1 : 1), MPFR_RNDU);
    mpfr_sqrt(t, t, MPFR_RNDU);
    mpfr_mul_d(r, u, R, MPFR_RNDU);
    mpfr_add(r, r, al, MPFR_RNDU);
    mpfr_div_2ui(Mt, be, 1, MPFR_RNDU);
    mpfr_add(r, r, Mt, MPFR_RNDU);
    mpfr_mul(t, t, r, MPFR_RNDU);
    mpfr_add(s, s, t, MPFR_RNDU);
    mpfr_min(F1, F1, s, MPFR_RNDU);
    /* second order: 4 Ew^2 Mt + g7 (sqrt(T) + 2 Ew sqrt(Mt))^2 */
    ref_welford_mt(Mt, n);
    mpfr_sqr(s, Ew, MPFR_RNDU);
    mpfr_mul_2ui(s, s, 2, MPFR_RNDU);
    mpfr_mul(s, s, Mt, MPFR_RNDU);
    mpfr_sqrt(t, Mt, MPFR_RNDU);
    mpfr_mul(t, t, Ew, MPFR_RNDU);
    mpfr_mul_2ui(t, t, 1, MPFR_RNDU);
    mpfr_set_d(r, Thi, MPFR_RNDU);
    mpfr_sqrt(r, r, MPFR_RNDU);
    mpfr_add(t, t, r, MPFR_RNDU);
    mpfr_sqr(t, t, MPFR_RNDU);
    mpfr_mul(t, t, g7, MPFR_RNDU);
    mpfr_add(s, s, t, MPFR_RNDU);
    mpfr_min(B, B, s, MPFR_RNDU);
    mpfr_clears(al, be, lc, t, s, r, Mt, (mpfr_ptr)0);
}

/* Theorem L4's per-node constants: a = max((1+u)(g3 R + eta/2) + u X, g4 X + (1+u) eta) and
 * b = max((1+u) 2 g3 + u, g4), rounded upward (a2, b2 and t are scratch). */
static void ref_welford_ab(mpfr_t a, mpfr_t b, mpfr_t a2, mpfr_t b2, mpfr_t t, mpfr_srcptr u, mpfr_srcptr eta,
                          mpfr_srcptr g3, mpfr_srcptr g4, double R, double X) {
    /* a1 = (1+u)(g3 R + eta/2) + u X; a2 = g4 X + (1+u) eta */
    mpfr_mul_d(a, g3, R, MPFR_RNDU);
    mpfr_div_2ui(t, eta, 1, MPFR_RNDU);
    mpfr_add(a, a, t, MPFR_RNDU);
    mpfr_add_ui(t, u, 1, MPFR_RNDU);
    mpfr_mul(a, a, t, MPFR_RNDU);
    mpfr_mul_d(t, u, X, MPFR_RNDU);
    mpfr_add(a, a, t, MPFR_RNDU);
    mpfr_mul_d(a2, g4, X, MPFR_RNDU);
    mpfr_add_ui(t, u, 1, MPFR_RNDU);
    mpfr_mul(t, t, eta, MPFR_RNDU);
    mpfr_add(a2, a2, t, MPFR_RNDU);
    mpfr_max(a, a, a2, MPFR_RNDU);
    /* b1 = (1+u) 2 g3 + u; b2 = g4 */
    mpfr_add_ui(t, u, 1, MPFR_RNDU);
    mpfr_mul(b, t, g3, MPFR_RNDU);
    mpfr_mul_2ui(b, b, 1, MPFR_RNDU);
    mpfr_add(b, b, u, MPFR_RNDU);
    mpfr_set(b2, g4, MPFR_RNDU);
    mpfr_max(b, b, b2, MPFR_RNDU);
}

/* The first-order part of Welford's M2 error into F1 (initialised by the caller), the least of the valid bounds of
 * Theorems L4 and L7 (at depth dd > 0 also their bounded-depth forms); t0 = 1 - D b rounded down, M = Mt, bl =
 * bitlen(n), t scratch. */
static void ref_welford_first(mpfr_t F1, mpfr_t t, int64_t n, int64_t dd, int bl, double R, double Thi, mpfr_srcptr a,
                             mpfr_srcptr D, mpfr_srcptr t0, mpfr_srcptr M) {
    mpfr_set_si(F1, n, MPFR_RNDN);
    mpfr_mul_si(F1, F1, n - 1, MPFR_RNDU);
    mpfr_add(F1, F1, M, MPFR_RNDU);                /* + (n/2) bitlen(n) + n */
    mpfr_add_si(F1, F1, n, MPFR_RNDU);
    mpfr_mul(F1, F1, a, MPFR_RNDU);
    mpfr_div(F1, F1, t0, MPFR_RNDU);              /* times kappa */
    mpfr_mul_d(F1, F1, 2.0 * R, MPFR_RNDU);       /* 2R is exact */
    if (dd) {
        /* at bounded depth every subtree's mean is within kappa a D: 4 R kappa a D M instead, when smaller */
        mpfr_t F2;
        mpfr_init2(F2, WREF_PREC);
        mpfr_mul(F2, a, D, MPFR_RNDU);
        mpfr_div(F2, F2, t0, MPFR_RNDU);
        mpfr_mul_d(F2, F2, 4.0 * R, MPFR_RNDU);
        mpfr_mul(F2, F2, M, MPFR_RNDU);
        mpfr_min(F1, F1, F2, MPFR_RNDU);
        mpfr_clear(F2);
    }
    /* Theorem L7 (Cauchy-Schwarz over the nodes, weights m_v: sum_v m_v Delta_v^2 = T): the first-order part is
     * at most sqrt(T) kappa a sqrt(2 (n + 2) (n(n-1) + n bitlen(n) + 3(n - 1))), and at depth D at most
     * sqrt(T) 4 kappa a D sqrt(Mt); the least of the valid bounds is kept */
    mpfr_t F3, rt;
    mpfr_inits2(WREF_PREC, F3, rt, (mpfr_ptr)0);
    mpfr_set_d(rt, Thi, MPFR_RNDU);
    mpfr_sqrt(rt, rt, MPFR_RNDU);                   /* sqrt(T) */
    mpfr_set_si(F3, n, MPFR_RNDN);
    mpfr_mul_si(F3, F3, n - 1, MPFR_RNDU);
    mpfr_set_si(t, n, MPFR_RNDN);
    mpfr_mul_si(t, t, bl, MPFR_RNDU);
    mpfr_add(F3, F3, t, MPFR_RNDU);
    mpfr_add_si(F3, F3, 3 * (n - 1), MPFR_RNDU);    /* S2 */
    mpfr_mul_si(F3, F3, 2 * (n + 2), MPFR_RNDU);
    mpfr_sqrt(F3, F3, MPFR_RNDU);
    mpfr_mul(F3, F3, a, MPFR_RNDU);
    mpfr_div(F3, F3, t0, MPFR_RNDU);                /* times kappa */
    mpfr_mul(F3, F3, rt, MPFR_RNDU);
    mpfr_min(F1, F1, F3, MPFR_RNDU);
    if (dd) {
        mpfr_sqrt(t, M, MPFR_RNDU);                 /* sqrt(Mt) */
        mpfr_mul(F3, a, D, MPFR_RNDU);
        mpfr_div(F3, F3, t0, MPFR_RNDU);
        mpfr_mul_2ui(F3, F3, 2, MPFR_RNDU);         /* 4 kappa a D */
        mpfr_mul(F3, F3, t, MPFR_RNDU);
        mpfr_mul(F3, F3, rt, MPFR_RNDU);
        mpfr_min(F1, F1, F3, MPFR_RNDU);
    }
    mpfr_clears(F3, rt, (mpfr_ptr)0);
}

/* Theorems L3 and L4: Welford's mean is within *EM of the exact mean and its M2 within *ES of T, for any tree
 * of updates and combines over n values with max |x| <= X, range R and T <= Thi. +inf when n is too large for
 * the bound (or for counts exact in F). */
/* depth > 0: every leaf of the tree passes through at most depth inner nodes (Theorems L3 and L4 at bounded depth);
 * cdepth > 0: at most cdepth of them are combines (Theorem L8); A >= |mu|, the exact mean's magnitude. */
static void ref_welford_bounds(const er_fmt_info *F, int64_t n, int64_t depth, int64_t cdepth, double A, double X,
                              double R, double Thi, double *EM, double *ES) {
    int p = F->p;
    int64_t dd = depth > 0 && depth < n - 1 ? depth : 0;
    if (n >= (INT64_C(1) << (p - 1))) { *EM = *ES = INFINITY; return; }
    mpfr_t u, eta, g3, g4, g7, G, D, a, a2, b, b2, t, Ew, B, M;
    mpfr_inits2(WREF_PREC, u, eta, g3, g4, g7, G, D, a, a2, b, b2, t, Ew, B, M, (mpfr_ptr)0);
    mpfr_set_ui_2exp(u, 1, (mpfr_exp_t)-p, MPFR_RNDN);
    mpfr_set_d(eta, F->min_sub, MPFR_RNDU);
    ref_gamma(g3, p, 3);
    ref_gamma(g4, p, 4);
    ref_gamma(g7, p, 7);
    ref_gamma(G, p, 2.0 * (double)(dd ? dd : n)); /* each correction rounds at most twice per ancestor */
    /* D = (n(n-1)/2 + n - 1) / n bounds sum_v n_v / n over the internal nodes (Lemma L1) */
    mpfr_set_si(D, n, MPFR_RNDN);
    mpfr_mul_si(D, D, n - 1, MPFR_RNDU);
    mpfr_div_2ui(D, D, 1, MPFR_RNDU);
    mpfr_add_si(D, D, n - 1, MPFR_RNDU);
    mpfr_div_si(D, D, n, MPFR_RNDU);
    if (dd && mpfr_cmp_si(D, dd) > 0) mpfr_set_si(D, dd, MPFR_RNDU); /* sum_v n_v <= n depth */
    ref_welford_ab(a, b, a2, b2, t, u, eta, g3, g4, R, X);
    /* Ew = D a / (1 - D b) */
    mpfr_t t0;
    mpfr_init2(t0, WREF_PREC);
    mpfr_mul(t0, D, b, MPFR_RNDU);
    mpfr_ui_sub(t0, 1, t0, MPFR_RNDD);                 /* 1 - D b, rounded down */
    if (mpfr_sgn(t0) <= 0) {
        *EM = *ES = INFINITY;
    } else {
        mpfr_mul(Ew, D, a, MPFR_RNDU);
        mpfr_div(Ew, Ew, t0, MPFR_RNDU);
        *EM = mpfr_get_d(Ew, MPFR_RNDU);
        /* the second-order part per node: 4 Ew^2 + g7 (R + 2E)^2, times M = (n/2) bitlen(n) + n >= sum_v max(m_v, 1) */
        mpfr_sqr(B, Ew, MPFR_RNDU);
        mpfr_mul_2ui(B, B, 2, MPFR_RNDU);
        mpfr_mul_2ui(t, Ew, 1, MPFR_RNDU);
        mpfr_add_d(t, t, R, MPFR_RNDU);
        mpfr_sqr(t, t, MPFR_RNDU);
        mpfr_mul(t, t, g7, MPFR_RNDU);
        mpfr_add(B, B, t, MPFR_RNDU);
        int bl = 0;
        for (int64_t k = n; k; k >>= 1) bl++;
        ref_welford_mt(M, n);                           /* M = Mt from here on */
        mpfr_mul(B, B, M, MPFR_RNDU);
        /* the first-order part: 2 R kappa a (n(n-1) + (n/2) bitlen(n) + 2n), kappa = 1/(1 - D b) (Theorem L4) */
        mpfr_t F1;
        mpfr_init2(F1, WREF_PREC);
        ref_welford_first(F1, t, n, dd, bl, R, Thi, a, D, t0, M);
        ref_welford_l8(n, dd ? dd : n - 1, cdepth, A, R, Thi, u, eta, a, b, Ew, g3, g7, F1, B);
        mpfr_add(B, B, F1, MPFR_RNDU);
        mpfr_clear(F1);
        /* ES = (1+G)(first + second order + (n-1)(n+2) eta) + G T */
        mpfr_mul_si(t, eta, n - 1, MPFR_RNDU);
        mpfr_mul_si(t, t, n + 2, MPFR_RNDU);
        mpfr_add(B, B, t, MPFR_RNDU);
        mpfr_add_ui(t, G, 1, MPFR_RNDU);
        mpfr_mul(B, B, t, MPFR_RNDU);
        mpfr_mul_d(t, G, Thi, MPFR_RNDU);
        mpfr_add(B, B, t, MPFR_RNDU);
        *ES = mpfr_get_d(B, MPFR_RNDU);
    }
    mpfr_clears(u, eta, g3, g4, g7, G, D, a, a2, b, b2, t, t0, Ew, B, M, (mpfr_ptr)0);
}


/* er__welford_bounds (constants from er__welford_k_init) at least the formulas' values in MPFR rounded upward (so at
 * least the real bounds) and within 2^-40 of them plus 2^-1000 (a step of double's subnormals, where the numbers lie
 * among them, is large against them), for fp32, bf16, fp16 and fp64, n from 1 to 2^22 (powers of two and
 * their neighbours among them), any depth or one at or above log2 n, a combine depth or none, and A, X, R and T over
 * the whole range of doubles, subnormals of F and of double among them (where the eta terms dominate). */
START_TEST(welford_bounds_in_double_hold) {
    er_test_reseed(89);
    static const er_format fmts[] = {ER_FP32, ER_BF16, ER_FP16, ER_FP64};
    long trials = (long)(40000 * er_test_multiplier()), finite = 0;
    double worst = 0;
    for (long tr = 0; tr < trials; tr++) {
        const er_fmt_info *F = er__fmt(fmts[er_rand64() % 4]);
        int lg = (int)er_rand_int(0, 22);
        int64_t n = (INT64_C(1) << lg) + (er_rand64() % 3 == 0 ? er_rand_int(-1, 1) : er_rand_int(0, (1 << lg) - 1));
        if (n < 1) n = 1;
        int64_t depth = 0, cdepth = 0;
        if (er_rand64() % 2) depth = er_rand_int(lg + 1, lg + 1 + (er_rand64() % 2 ? 4 : n));
        if (er_rand64() % 2) cdepth = er_rand_int(1, 40);
        /* the row's numbers: a scale from tiny to huge, X >= A, R <= 2X, T up to about n R^2 */
        int sc = er_rand64() % 4 == 0 ? (int)er_rand_int(-1074, -900) : (int)er_rand_int(-160, 60);
        double X = ldexp(0.5 + er_rand_unit(), sc), A = X * er_rand_unit(), R = 2 * X * er_rand_unit();
        double T = ldexp(R * R * (double)n * er_rand_unit(), (int)-er_rand_int(0, 40));
        if (er_rand64() % 8 == 0) R = 0, T = 0;
        er_welford_k k;
        er__welford_k_init(&k, F, n, depth, cdepth);
        double em, es, rm, rs;
        er__welford_bounds(&k, A, X, R, T, &em, &es);
        ref_welford_bounds(F, n, depth, cdepth, A, X, R, T, &rm, &rs);
        ER_REQUIRE(em >= rm && es >= rs, "%s n %lld depth %lld cdepth %lld A %a X %a R %a T %a: EM %a ES %a below the "
                   "formulas' %a %a", F->name, (long long)n, (long long)depth, (long long)cdepth, A, X, R, T, em, es,
                   rm, rs);
        if (isinf(rm) || isinf(rs)) continue;
        finite++;
        ER_REQUIRE(em <= rm * (1 + 0x1p-40) + 0x1p-1000 && es <= rs * (1 + 0x1p-40) + 0x1p-1000,
                   "%s n %lld depth %lld cdepth %lld A %a X %a R %a T %a: EM %a ES %a beyond 2^-40 of the formulas' "
                   "%a %a", F->name, (long long)n, (long long)depth, (long long)cdepth, A, X, R, T, em, es, rm, rs);
        if (rm > 0x1p-900 && rs > 0x1p-900) worst = fmax(worst, fmax(em / rm, es / rs) - 1);
    }
    ck_assert_int_gt(finite, trials / 4);
    printf("welford bounds: %ld trials, %ld finite, the largest excess over the formulas 2^%.2f\n", trials, finite,
           log2(worst));
}
END_TEST

/* The GPU's first kernel of layernorm's path: the scan, then the integers (core/lnsums.h), here from the row's end. */
static void ln_row_sums(const double *x, int64_t n, er_ln_sums *s) {
    memset(s, 0, sizeof *s);
    int lo = 100000, hi = -100000;
    s->xmin = INFINITY;
    s->xmax = -INFINITY;
    for (int64_t j = n - 1; j >= 0; j--) {
        int a, b;
        if (er_ln_bits(x[j], &a, &b)) { lo = a < lo ? a : lo; hi = b > hi ? b : hi; }
        s->X = fmax(s->X, fabs(x[j]));
        s->xmin = fmin(s->xmin, x[j]);
        s->xmax = fmax(s->xmax, x[j]);
    }
    s->fits = (uint8_t)er_ln_fits(lo, hi, n);
    s->lsb = hi < lo ? 0 : lo;
    er_ln_u128 S = 0, Q = 0, A = 0;
    for (int64_t j = n - 1; j >= 0 && s->fits; j--) er_ln_add(x[j], er_ln_units(x[j], s->lsb), &S, &Q, &A);
    s->s_lo = (uint64_t)S, s->s_hi = (uint64_t)(S >> 64), s->q_lo = (uint64_t)Q, s->q_hi = (uint64_t)(Q >> 64);
    s->a_lo = (uint64_t)A, s->a_hi = (uint64_t)(A >> 64);
}

/* layernorm's GPU constants (er__layernorm_dev_row, from core/lnsums.h's integers summed from the row's end, as a
 * GPU's threads sum in another order) against er__layernorm_row on the same row: wherever the GPU path takes the
 * row, the mean's and rstd's sets are the host row's, bit for bit. Rows of fp32, fp16 and bf16 values: normal values
 * of a random scale and offset, zeros among them, rows of one value, values spread over 2^-60 .. 2^20 (too wide for
 * the integers); variance two_pass, welford (at a depth, with a combine depth) or either, eps 0 or 1e-5. */
START_TEST(layernorm_gpu_constants_are_the_rows_sets) {
    er_test_reseed(83);
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    long trials = (long)(3000 * er_test_multiplier()), taken = 0;
    double *x = malloc(sizeof(double) * 4096);
    er_cval cv[3];
    double ex[3], rd[3];
    for (long tr = 0; tr < trials; tr++) {
        const er_fmt_info *X = er__fmt(fmts[er_rand64() % 3]);
        int fam = (int)(er_rand64() % 4);
        int64_t n = er_rand_int(1, tr % 10 == 0 ? 4096 : 200);
        double scale = ldexp(1.0, (int)er_rand_int(-12, 12)), off = er_rand64() % 2 ? 0 : 8 * scale * er_rand_normal();
        for (int64_t j = 0; j < n; j++) {
            double v = off + er_rand_normal() * scale;
            if (fam == 1 && er_rand64() % 3 == 0) v = 0;
            if (fam == 2) v = j ? x[0] : v;
            if (fam == 3) v = ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-60, 20)) * (er_rand64() % 2 ? 1 : -1);
            x[j] = er__round_double(X, v, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            if (!isfinite(x[j])) x[j] = 0;
        }
        er_layernorm_plan pl;
        memset(&pl, 0, sizeof pl);
        pl.F = er__fmt(ER_FP32);
        pl.X = X;
        pl.O[1] = pl.O[2] = pl.F;
        pl.eps = er_rand64() % 3 == 0 ? 0.0 : er__round_double(pl.F, 1e-5, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        pl.U = 2.0;
        pl.variance = (int)(er_rand64() % 3);
        pl.depth = er_rand64() % 2 ? 0 : er_rand_int(13, 20); /* at least ceil(log2 n) */
        pl.combine_depth = pl.variance == 2 && er_rand64() % 2 ? 3 : 0;
        ck_assert_int_eq(er__layernorm_prepare(&pl, n), ER_OK);
        er_ln_sums s;
        ln_row_sums(x, n, &s);
        double c[8];
        if (!er__layernorm_dev_row(&pl, &s, n, c)) continue;
        taken++;
        er_ln_out o[3] = {{NULL, NULL, NULL, NULL, NULL, 0},
                          {&cv[1], &ex[1], &rd[1], NULL, NULL, 0},
                          {&cv[2], &ex[2], &rd[2], NULL, NULL, 0}};
        ck_assert_int_eq(er__layernorm_row(&pl, x, NULL, NULL, n, o, 0), ER_OK);
        ER_REQUIRE(c[0] == cv[1].lo && c[1] == cv[1].hi && c[2] == cv[2].lo && c[3] == cv[2].hi && !cv[2].nan,
                   "row %ld (family %d, n %lld, %s, variance %d): the GPU's constants mean [%a, %a] rstd [%a, %a], "
                   "the row's [%a, %a] [%a, %a]", tr, fam, (long long)n, X->name, pl.variance, c[0], c[1], c[2], c[3],
                   cv[1].lo, cv[1].hi, cv[2].lo, cv[2].hi);
        ER_REQUIRE(c[4] <= c[5] && c[6] <= c[7] && c[6] > 0, "row %ld: the exact mean's and rstd's ends out of order",
                   tr);
    }
    ER_REQUIRE(taken > trials / 2, "the GPU path took %ld of %ld rows", taken, trials);
    printf("t-ival: layernorm's GPU constants were the row's mean and rstd sets on the %ld of %ld rows it takes\n",
           taken, trials);
    free(x);
}
END_TEST

/* er__sum_dir and er__prod_dir (Lemma D13) against the exact sum and product (MPFR at 2200 bits) rounded down and
 * up to doubles: equal wherever the result is finite and, for a product, at least 2^-960; elsewhere a bound within
 * one double of it. Operands over the whole range (double's subnormals among them), sums that cancel exactly or
 * nearly, products near 2^-960 and near the overflow, and exact results. */
START_TEST(sums_and_products_rounded_both_ways) {
    er_test_reseed(103);
    long trials = (long)(200000 * er_test_multiplier()), exact = 0, moved = 0;
    mpfr_t t, y;
    mpfr_inits2(2200, t, y, (mpfr_ptr)0);
    for (long tr = 0; tr < trials; tr++) {
        int sc = (int)er_rand_int(-1074, 1023), kind = (int)(tr % 6);
        double a = ldexp(0.5 + 0.5 * er_rand_unit(), sc) * (er_rand64() % 2 ? 1 : -1), b;
        switch (kind) {
        case 0: b = ldexp(0.5 + 0.5 * er_rand_unit(), (int)er_rand_int(-1074, 1023)); break;
        case 1: b = ldexp(0.5 + 0.5 * er_rand_unit(), sc - (int)er_rand_int(0, 60)); break; /* near in scale */
        case 2: b = -a * (er_rand64() % 2 ? 1.0 : 1.0 + 0x1p-52 * (double)er_rand_int(-4, 4)); break;
        case 3: /* products about 2^-960 */
            a = ldexp(1.0 + er_rand_unit(), (int)er_rand_int(-600, -300));
            b = ldexp(1.0 + er_rand_unit(), -960 - ilogb(a) + (int)er_rand_int(-3, 2));
            break;
        case 4:
            a = (double)(int64_t)er_rand_int(-1000000, 1000000);
            b = (double)(int64_t)er_rand_int(-1000, 1000);
            break;
        default: b = ldexp(1.0 + er_rand_unit(), 1023 - ilogb(a) + (int)er_rand_int(-2, 1)); break; /* overflow */
        }
        for (int op = 0; op < 2; op++) {
            mpfr_set_d(t, a, MPFR_RNDN);
            if (op) mpfr_mul_d(t, t, b, MPFR_RNDN); /* exact at 2200 bits */
            else mpfr_add_d(t, t, b, MPFR_RNDN);
            for (int up = 0; up < 2; up++) {
                double r = op ? er__prod_dir(a, b, up) : er__sum_dir(a, b, up);
                double w = mpfr_get_d(t, up ? MPFR_RNDU : MPFR_RNDD);
                int cmp = isinf(r) ? (r > 0 ? 1 : -1) : (mpfr_set_d(y, r, MPFR_RNDN), mpfr_cmp(y, t));
                ER_REQUIRE(up ? cmp >= 0 : cmp <= 0, "%a %s %a rounded %s: %a, not a bound", a, op ? "*" : "+", b,
                           up ? "up" : "down", r);
                int must = isfinite(w) && (!op || fabs(mpfr_get_d(t, MPFR_RNDZ)) >= 0x1p-960);
                ER_REQUIRE(must ? r == w : r == w || r == (up ? er__up(w) : er__dn(w)) || isinf(w),
                           "%a %s %a rounded %s: %a, the directed rounding %a", a, op ? "*" : "+", b,
                           up ? "up" : "down", r, w);
                exact += mpfr_cmp_d(t, w) == 0;
                moved += r != w;
            }
        }
    }
    ER_REQUIRE(exact > trials / 10 && moved > 0, "%ld exact, %ld moved", exact, moved);
    mpfr_clears(t, y, (mpfr_ptr)0);
    printf("sums and products: %ld pairs rounded down and up (%ld results exact, %ld a double beyond)\n", trials,
           exact, moved);
}
END_TEST

/* er__rsqrt_dirs (Lemma D12) against MPFR's rec_sqrt rounded down and up to doubles: positive doubles over the whole
 * range, double's subnormals among them; v = 1/r^2 rounded for a random double r, and its neighbours (1/sqrt(v)
 * within an ulp or two of a double); powers of four (1/sqrt(v) a double) and their neighbours; values of fp32. */
START_TEST(rsqrt_rounded_both_ways) {
    er_test_reseed(97);
    long trials = (long)(300000 * er_test_multiplier()), exact = 0;
    mpfr_t t;
    mpfr_init2(t, 128);
    for (long tr = 0; tr < trials; tr++) {
        double v, r;
        switch (tr % 5) {
        case 0: v = ldexp(0.5 + 0.5 * er_rand_unit(), (int)er_rand_int(-1073, 1024)); break;
        case 1:
            r = ldexp(1.0 + er_rand_unit(), (int)er_rand_int(-500, 500));
            v = 1.0 / (r * r);
            v = er_rand64() % 3 == 0 ? v : er_rand64() % 2 ? nextafter(v, 0) : nextafter(v, INFINITY);
            break;
        case 2:
            v = ldexp(1.0, 2 * (int)er_rand_int(-537, 511));
            v = er_rand64() % 2 ? v : er_rand64() % 2 ? nextafter(v, 0) : nextafter(v, INFINITY);
            break;
        case 3: v = (float)ldexp(1.0 + er_rand_unit(), (int)er_rand_int(-149, 127)); break;
        default: v = ldexp((double)(er_rand64() >> (12 + er_rand64() % 52)), -1074); break;
        }
        if (!(v > 0) || isinf(v)) continue;
        double rd = -1, ru = -1;
        ER_REQUIRE(er__rsqrt_dirs(v, &rd, &ru), "v %a: not taken", v);
        mpfr_set_d(t, v, MPFR_RNDN);
        mpfr_rec_sqrt(t, t, MPFR_RNDD);
        double md = mpfr_get_d(t, MPFR_RNDD);
        mpfr_set_d(t, v, MPFR_RNDN);
        mpfr_rec_sqrt(t, t, MPFR_RNDU);
        double mu = mpfr_get_d(t, MPFR_RNDU);
        ER_REQUIRE(rd == md && ru == mu, "v %a: 1/sqrt(v) rounded down %a and up %a, MPFR %a and %a", v, rd, ru, md,
                   mu);
        exact += rd == ru;
    }
    static const double bad[] = {0.0, -0.0, -1.0, -0x1p-1074, INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 7; k++) {
        double rd = 7, ru = 7;
        ER_REQUIRE(!er__rsqrt_dirs(bad[k], &rd, &ru) && rd == 7 && ru == 7, "v %a taken", bad[k]);
    }
    ER_REQUIRE(exact > trials / 50, "%ld exact results", exact);
    mpfr_clear(t);
    printf("rsqrt: %ld values rounded down and up as MPFR rounds them (%ld exact)\n", trials, exact);
}
END_TEST

/* layernorm's row constants in doubles (er__layernorm_dev_row_how 1; layernorm.md, The box in doubles) against the
 * same constants from the exact row in MPFR (how 0): wherever the doubles decide, the box (the mean's and rstd's
 * sets) and the exact mean's doubles are MPFR's bit for bit, and the combined evaluation (how 2, the library's) is
 * MPFR's on every row; the exact rstd's doubles enclose rstd* (MPFR at 256 bits from the exact sums) within 4
 * ulps. Rows as layernorm_gpu_constants_are_the_rows_sets makes them; compute fp32, fp16, bf16 and fp64 (whose
 * boxes the doubles never decide: the fallback), eps 0 or 1e-5, rsqrt within 1, 2 or 4 ulps, each variance, mean
 * and division. */
START_TEST(layernorm_box_in_doubles_is_mpfrs) {
    er_test_reseed(101);
    static const er_format cfs[] = {ER_FP32, ER_FP32, ER_FP16, ER_BF16, ER_FP64};
    static const er_format xfs[] = {ER_FP32, ER_FP16, ER_BF16};
    long trials = (long)(4000 * er_test_multiplier()), taken = 0, decided = 0, fell = 0;
    double *x = malloc(sizeof(double) * 4096);
    mpfr_t S, Q, v, r;
    mpfr_inits2(2400, S, Q, (mpfr_ptr)0);
    mpfr_inits2(256, v, r, (mpfr_ptr)0);
    for (long tr = 0; tr < trials; tr++) {
        const er_fmt_info *F = er__fmt(cfs[er_rand64() % 5]);
        const er_fmt_info *X = F->id == ER_FP16 || F->id == ER_BF16 ? F : er__fmt(xfs[er_rand64() % 3]);
        int fam = (int)(er_rand64() % 5);
        int64_t n = er_rand_int(1, tr % 10 == 0 ? 4096 : 200);
        if (er_rand64() % 4 == 0) n = INT64_C(1) << er_rand_int(0, 8); /* S / n without a remainder */
        double scale = ldexp(1.0, (int)er_rand_int(-12, 12)), off = er_rand64() % 2 ? 0 : 8 * scale * er_rand_normal();
        for (int64_t j = 0; j < n; j++) {
            double e = off + er_rand_normal() * scale;
            if (fam == 1 && er_rand64() % 3 == 0) e = 0;
            if (fam == 2) e = j ? x[0] : e;
            if (fam == 3) e = ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-60, 20)) * (er_rand64() % 2 ? 1 : -1);
            /* values over 2^-12 .. 2^12 (fp32: sums of more than 53 bits that the integers still hold) */
            if (fam == 4) e = ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-12, 12)) * (er_rand64() % 2 ? 1 : -1);
            x[j] = er__round_double(X, e, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            if (!isfinite(x[j])) x[j] = 0;
        }
        er_layernorm_plan pl;
        memset(&pl, 0, sizeof pl);
        pl.F = F;
        pl.X = X;
        pl.O[1] = pl.O[2] = F;
        pl.eps = er_rand64() % 3 == 0 ? 0.0 : er__round_double(F, 1e-5, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        pl.U = (double)(1 << er_rand_int(0, 2));
        pl.variance = (int)(er_rand64() % 3);
        pl.mean = (int)(er_rand64() % 3);
        pl.Udiv_n = er_rand64() % 4 == 0 ? 2.0 : 0.0;
        pl.depth = er_rand64() % 2 ? 0 : er_rand_int(13, 20);
        pl.combine_depth = pl.variance == 2 && er_rand64() % 2 ? 3 : 0;
        ck_assert_int_eq(er__layernorm_prepare(&pl, n), ER_OK);
        er_ln_sums s;
        ln_row_sums(x, n, &s);
        double c0[8], c1[8], c2[8];
        int r0 = er__layernorm_dev_row_how(&pl, &s, n, 0, c0), r1 = er__layernorm_dev_row_how(&pl, &s, n, 1, c1),
            r2 = er__layernorm_dev_row_how(&pl, &s, n, 2, c2);
        const char *what = "row %ld (family %d, n %lld, %s in %s, variance %d, mean %d): %s";
        ER_REQUIRE(r2 == r0, what, tr, fam, (long long)n, X->name, F->name, pl.variance, pl.mean, "taken differently");
        if (r1 >= 0) {
            decided++;
            ER_REQUIRE(r1 == r0, what, tr, fam, (long long)n, X->name, F->name, pl.variance, pl.mean,
                       "the doubles took it differently");
        } else fell++;
        if (r0 != 1) continue;
        taken++;
        for (int k = 0; k < 6; k++) {
            ER_REQUIRE(er__bits(c2[k]) == er__bits(c0[k]) && (r1 < 0 || er__bits(c1[k]) == er__bits(c0[k])),
                       "row %ld (n %lld, %s in %s, variance %d): constant %d in doubles %a, combined %a, MPFR %a", tr,
                       (long long)n, X->name, F->name, pl.variance, k, c1[k], c2[k], c0[k]);
        }
        /* rstd* = n / sqrt(n sum x^2 - S^2 + n^2 eps), from the exact sums */
        mpfr_set_zero(S, 1);
        mpfr_set_zero(Q, 1);
        for (int64_t j = 0; j < n; j++) {
            mpfr_add_d(S, S, x[j], MPFR_RNDN);
            mpfr_set_d(v, x[j], MPFR_RNDN);
            mpfr_sqr(v, v, MPFR_RNDN);
            mpfr_add(Q, Q, v, MPFR_RNDN);
        }
        mpfr_mul_si(Q, Q, (long)n, MPFR_RNDN);
        mpfr_sqr(S, S, MPFR_RNDN);
        mpfr_sub(Q, Q, S, MPFR_RNDN); /* n T, exact at 2400 bits */
        for (int up = 0; up < 2; up++) {
            mpfr_rnd_t rm = up ? MPFR_RNDD : MPFR_RNDU; /* v rounded against rstd's direction */
            mpfr_div_si(v, Q, (long)n, rm);
            mpfr_div_si(v, v, (long)n, rm);
            mpfr_add_d(v, v, pl.eps, rm);
            mpfr_rec_sqrt(r, v, up ? MPFR_RNDU : MPFR_RNDD);
            double e = mpfr_get_d(r, up ? MPFR_RNDU : MPFR_RNDD);
            ER_REQUIRE(up ? c2[7] >= e : c2[6] <= e, "row %ld (n %lld): rstd* %s %a, the doubles [%a, %a]", tr,
                       (long long)n, up ? "up to" : "down to", e, c2[6], c2[7]);
        }
        ER_REQUIRE(c2[7] - c2[6] <= 4 * (nextafter(c2[6], INFINITY) - c2[6]), "row %ld: rstd* in [%a, %a]", tr, c2[6],
                   c2[7]);
    }
    ER_REQUIRE(taken > trials / 2 && decided > trials / 2 && fell > 0, "%ld taken, %ld decided, %ld fell to MPFR",
               taken, decided, fell);
    printf("t-ival: layernorm's row constants in doubles were MPFR's on the %ld rows they decided (%ld of them taken; "
           "%ld left to MPFR)\n", decided, taken, fell);
    mpfr_clears(S, Q, v, r, (mpfr_ptr)0);
    free(x);
}
END_TEST

/* Lemma A1's score bound: er__attn_dot's error within gD sum |a_i b_i| (er__attn_sconst, the longest of its four
 * chains counted) against the exact sum (MPFR), for random values of at most 24 bits and for the worst case of each
 * chain: 1, then terms just above half an ulp of the running sum, each addition rounding up by about 2^-53. The worst
 * case must come within a factor 2 of the bound (a bound halved would fail it). */
START_TEST(attention_dot_within_its_bound) {
    er_test_reseed(1660);
    static const int Ds[] = {1, 3, 4, 7, 8, 43, 64, 128, 160, 256};
    double a[256], b[256];
    mpfr_t ex, p;
    mpfr_inits2(2200, ex, p, (mpfr_ptr)0);
    double worst = 0;
    for (int k = 0; k < (int)(sizeof Ds / sizeof Ds[0]); k++) {
        int D = Ds[k];
        er_attn_plan pl;
        memset(&pl, 0, sizeof pl);
        pl.D = D;
        double gD = er__attn_sconst(&pl).gD;
        for (int tr = 0; tr < 200; tr++) {
            int adv = tr == 0;
            for (int i = 0; i < D; i++) {
                if (adv) { /* each chain: 1 (its first term, i < 4), then terms of 2^-53 + 2^-70 */
                    a[i] = 1.0;
                    b[i] = i < 4 ? 1.0 : 0x1p-53 + 0x1p-70;
                } else {
                    a[i] = (double)(float)ldexp(er_rand_normal(), (int)er_rand_int(-30, 30));
                    b[i] = (double)(float)ldexp(er_rand_normal(), (int)er_rand_int(-30, 30));
                }
            }
            double S = er__attn_dot(a, b, D), mag = 0;
            mpfr_set_zero(ex, 1);
            for (int i = 0; i < D; i++) {
                mpfr_set_d(p, a[i], MPFR_RNDN);
                mpfr_mul_d(p, p, b[i], MPFR_RNDN); /* exact at 2200 bits */
                mpfr_add(ex, ex, p, MPFR_RNDN);    /* exact */
                mag += fabs(a[i] * b[i]);
            }
            mpfr_sub_d(ex, ex, S, MPFR_RNDN);
            double err = fabs(mpfr_get_d(ex, MPFR_RNDU)), bound = gD * mag * (1 + 0x1p-40);
            ER_REQUIRE(err <= bound, "D = %d, trial %d: er__attn_dot errs by %a, beyond gD sum |a b| = %a", D, tr, err,
                       bound);
            if (adv && D >= 16 && err / bound > worst) worst = err / bound;
        }
    }
    ER_REQUIRE(worst > 0.5, "the worst case reached %.3f of the bound", worst);
    mpfr_clears(ex, p, (mpfr_ptr)0);
}
END_TEST

/* er__dot_summary_dd's pieces against MPFR: dd[0] + dd[1] is the exact sum's leading 106 bits (within dd[2] of it,
 * dd[2] at most 2^-105 of it), and the 64-bit summary is the exact sum's; on rows of fp32, fp16 and bf16 values (the
 * accumulator's path and, for fp16 x fp16, the 128-bit integer path), with cancellation, sums that are exactly zero,
 * and exactly representable sums. */
START_TEST(dot_summary_dd_holds_the_sum) {
    er_test_reseed(83);
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    long trials = (long)(4000 * er_test_multiplier()), zeros = 0, exact_rows = 0, ipaths = 0, beyond = 0;
    double *a = malloc(sizeof(double) * 3000), *b = malloc(sizeof(double) * 3000);
    mpfr_t S, T, R;
    mpfr_inits2(2000, S, T, R, (mpfr_ptr)0);
    for (long tr = 0; tr < trials; tr++) {
        const er_fmt_info *Fa = er__fmt(fmts[er_rand64() % 3]), *Fb = er__fmt(fmts[er_rand64() % 3]);
        int fam = (int)(tr % 4);
        int64_t n = er_rand_int(1, tr % 7 == 0 ? 3000 : 40);
        for (int64_t j = 0; j < n; j++) {
            double x = er_rand_normal() * ldexp(1.0, (int)er_rand_int(-8, 8)), y = er_rand_normal();
            if (fam == 1) x = ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-20, 20)), y = ldexp(1.0, -(int)er_rand_int(0, 120));
            a[j] = er__round_double(Fa, x, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            b[j] = er__round_double(Fb, y, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            if (fam == 2 && (j & 1)) { a[j] = -a[j - 1]; b[j] = b[j - 1]; } /* pairs cancelling: the sum 0 */
            if (fam == 3) b[j] = 1.0;
        }
        er_dot_env env;
        memset(&env, 0, sizeof env);
        env.base = (int64_t)ilogb(Fa->min_sub) + ilogb(Fb->min_sub) - 52;
        env.top = (int64_t)ilogb(Fa->max) + ilogb(Fb->max) + 2 + 64;
        env.ipath = er__dot_ipath(Fa, Fb, n, &env.qa, &env.qb);
        ipaths += env.ipath;
        er_acc acc;
        ck_assert_int_eq(er__acc_init(&acc, env.base, env.top), ER_OK);
        er_dotsum sm;
        double dd[3];
        er__dot_summary_dd(&sm, &acc, a, b, n, &env, 0, dd);
        er__acc_free(&acc);
        mpfr_set_zero(S, 1);
        for (int64_t j = 0; j < n; j++) {
            mpfr_set_d(T, a[j], MPFR_RNDN);
            mpfr_mul_d(T, T, b[j], MPFR_RNDN);
            mpfr_add(S, S, T, MPFR_RNDN); /* exact at 2000 bits */
        }
        ER_REQUIRE(dd[0] == dd[0] && dd[1] == dd[1] && dd[2] >= 0, "row %ld: the pieces %a %a %a", tr, dd[0], dd[1], dd[2]);
        mpfr_sub_d(R, S, dd[0], MPFR_RNDN);
        mpfr_sub_d(R, R, dd[1], MPFR_RNDN); /* exact */
        mpfr_abs(R, R, MPFR_RNDN);
        ER_REQUIRE(mpfr_cmp_d(R, dd[2]) <= 0, "row %ld (%s x %s, n %lld): S - dd[0] - dd[1] = %a beyond dd[2] = %a", tr,
                   Fa->name, Fb->name, (long long)n, mpfr_get_d(R, MPFR_RNDN), dd[2]);
        if (mpfr_zero_p(S)) {
            zeros++;
            ER_REQUIRE(dd[0] == 0 && dd[1] == 0 && dd[2] == 0 && sm.m == 0, "row %ld: a zero sum's pieces", tr);
            continue;
        }
        mpfr_abs(T, S, MPFR_RNDN);
        mpfr_mul_2si(T, T, -105, MPFR_RNDN);
        ER_REQUIRE(mpfr_cmp_d(T, dd[2]) >= 0, "row %ld: dd[2] = %a above 2^-105 |S|", tr, dd[2]);
        exact_rows += mpfr_cmp_d(R, 0) == 0;
        beyond += mpfr_cmp_d(R, 0) != 0;
        /* the 64-bit summary: S's top 64 bits truncated, the sticky bit of the rest */
        mpfr_set_prec(T, 64);
        int inexact = mpfr_abs(T, S, MPFR_RNDZ) != 0;
        mpfr_mul_2si(T, T, -(long)sm.e, MPFR_RNDN);
        ER_REQUIRE(mpfr_cmp_ui(T, 0) > 0 && mpfr_get_uj(T, MPFR_RNDZ) == sm.m && mpfr_integer_p(T) &&
                       inexact == sm.sticky && (mpfr_sgn(S) < 0) == sm.neg,
                   "row %ld: the summary m %llx e %d sticky %d", tr, (unsigned long long)sm.m, sm.e, sm.sticky);
        mpfr_set_prec(T, 2000);
    }
    ER_REQUIRE(zeros > trials / 16 && exact_rows > trials / 8 && beyond > trials / 16 && ipaths > trials / 20,
               "%ld zero sums, %ld rows held whole, %ld beyond 106 bits, %ld on the integer path", zeros, exact_rows,
               beyond, ipaths);
    printf("t-ival: the summary's 106 bits and 64-bit summary on %ld sums (%ld zero, %ld held whole, %ld beyond 106 "
           "bits, %ld on the integer path)\n", trials, zeros, exact_rows, beyond, ipaths);
    mpfr_clears(S, T, R, (mpfr_ptr)0);
    free(a);
    free(b);
}
END_TEST

/* Softmax's backward rows (src/enclose/softmax_bwd.c): the fast pass (the forms' float loop, the exact results in
 * double-double from D's 106 bits, MPFR where they leave one open) gives the MPFR path's sets, exact values and
 * roundings, on every element. Rows: softmax outputs of normal logits; dy_i within ulps of D (cancellation); masked
 * lanes (y = 0); exponents over 60 binades; dy on a grid of eighths; and rows built so that dx_i is exactly a tie of
 * the output format or of double (the enclosure cannot decide: MPFR does), or 2^-80 and 2^-110 from one. Inputs fp32,
 * fp16 or bf16; outputs fp32, fp16 or bf16; products=either and compute; depth free or 10. */
static void sbwd_row_gen(int fam, const er_fmt_info *Fdy, const er_fmt_info *Fy, const er_fmt_info *O, int64_t K,
                         double *dy, double *y) {
    const er_round N = ER_ROUND_NEAREST;
    const er_overflow sat = ER_OVERFLOW_SATURATE;
    if (fam == 5) { /* D = s (1 + 2^-p_O (+ 2^-k)): dx_1 = -y_1 D a tie of O (or near one); the rest zeros */
        double s = ldexp(er_rand64() & 1 ? 1.0 : -1.0, (int)er_rand_int(-6, 6));
        static const int offs[] = {0, 80, 110, 53, 0};
        int off = offs[er_rand64() % 5], k = off == 53 ? 0 : O->p;
        for (int64_t j = 0; j < K; j++) dy[j] = y[j] = 0;
        dy[0] = s, y[0] = 1;
        if (K > 2) dy[2] = s, y[2] = k ? ldexp(1.0, -k) : 0;
        if (K > 3 && off) dy[3] = s, y[3] = ldexp(1.0, -off);
        if (K > 1) dy[1] = 0, y[1] = ldexp(1.0, (int)er_rand_int(-3, 3));
        for (int64_t j = 0; j < K; j++) y[j] = er__round_double(Fy, y[j], N, sat);
        return;
    }
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < K; j++) {
        y[j] = er_rand_normal() * (fam == 3 ? 20 : 2);
        if (fam == 2 && er_rand64() % 3 == 0) y[j] = -INFINITY;
        m = y[j] > m ? y[j] : m;
    }
    if (m == -INFINITY) y[0] = m = 0;
    for (int64_t j = 0; j < K; j++) sum += exp(y[j] - m);
    double D = 0;
    for (int64_t j = 0; j < K; j++) {
        y[j] = er__round_double(Fy, exp(y[j] - m) / sum, N, sat);
        double g = fam == 4 ? (double)er_rand_int(-8, 8) / 8 : er_rand_normal();
        if (fam == 3) g = ldexp(g, (int)er_rand_int(Fdy->p < 12 ? -12 : -30, Fdy->p < 12 ? 12 : 30));
        dy[j] = er__round_double(Fdy, g, N, sat);
        D += dy[j] * y[j];
    }
    if (fam == 1)
        for (int64_t j = 0; j < K; j++) dy[j] = er__round_double(Fdy, D * (1 + (double)er_rand_int(-4, 4) * 0x1p-23), N, sat);
}

START_TEST(softmax_backward_fast_pass_is_the_mpfr_path) {
    er_test_reseed(89);
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    static const int64_t lens[] = {1, 2, 3, 4, 7, 64, 1000};
    long trials = (long)(3000 * er_test_multiplier()), elems = 0, ties = 0;
    double *buf = malloc(sizeof(double) * 10 * 1000);
    for (long tr = 0; tr < trials; tr++) {
        int fam = (int)(tr % 6);
        int64_t K = fam == 5 ? lens[1 + er_rand64() % 4] : lens[er_rand64() % 7];
        const er_fmt_info *Fdy = er__fmt(fmts[er_rand64() % 3]), *Fy = er__fmt(fmts[er_rand64() % 3]),
                          *O = er__fmt(fmts[er_rand64() % 3]);
        if (fam == 5) Fdy = Fy = er__fmt(ER_FP32); /* the constructed sums need fp32's range and precision */
        double *dy = buf, *y = buf + K, *r[2][4];
        for (int v = 0; v < 2; v++)
            for (int q = 0; q < 4; q++) r[v][q] = buf + (2 + 4 * v + q) * K;
        sbwd_row_gen(fam, Fdy, Fy, O, K, dy, y);
        ties += fam == 5;
        er_sbwd_plan pl = {er__fmt(ER_FP32), Fdy, Fy, O, O->ov_default, er_rand64() % 4 ? 0 : 10, 2.0, 0,
                           (int)(er_rand64() & 1), 0, NULL};
        for (int v = 0; v < 2; v++) {
            pl.no_fast = v;
            ck_assert_int_eq(er__sbwd_row(&pl, dy, y, K, r[v][0], r[v][1], r[v][2], r[v][3]), ER_OK);
        }
        for (int64_t i = 0; i < K; i++) {
            int same_set = (r[0][0][i] == r[1][0][i] || (r[0][0][i] != r[0][0][i] && r[1][0][i] != r[1][0][i])) &&
                           (r[0][1][i] == r[1][1][i] || r[0][0][i] != r[0][0][i]);
            ER_REQUIRE(same_set && memcmp(&r[0][2][i], &r[1][2][i], 8) == 0 && memcmp(&r[0][3][i], &r[1][3][i], 8) == 0,
                       "row %ld (family %d, K %lld, dy %s, y %s, out %s, products %d, depth %lld), element %lld: fast "
                       "[%a, %a] exact %a rounded %a, MPFR path [%a, %a] exact %a rounded %a", tr, fam, (long long)K,
                       Fdy->name, Fy->name, O->name, pl.products_compute, (long long)pl.depth, (long long)i,
                       r[0][0][i], r[0][1][i], r[0][2][i], r[0][3][i], r[1][0][i], r[1][1][i], r[1][2][i], r[1][3][i]);
        }
        elems += (long)K;
    }
    printf("t-ival: softmax_backward's fast pass gave the MPFR path's sets and results on %ld elements of %ld rows "
           "(%ld built on ties)\n", elems, trials, ties);
    free(buf);
}
END_TEST

/* Softmax's backward rows of bf16 and fp16 inputs, where D (a sum of products of at most 22 bits) and dx_i often
 * have no bits beyond double-double's and dx_i is as often a tie of double, and of fp32 inputs, where D often has
 * none but y_i (dy_i - D) has: Lemma B3's exact case decides the first in double (dx_i = c + ce exactly), giving the
 * MPFR path's exact values and roundings, and the fast pass leaves MPFR under one element in a thousand. Rows of
 * softmax outputs of normal logits and normal or eighths gradients, outputs of fp32, fp16 and bf16. */
START_TEST(softmax_backward_exact_products_decided_in_double) {
    er_test_reseed(137);
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    long trials = (long)(400 * er_test_multiplier()), elems = 0;
    int64_t left = 0;
    double *buf = malloc(sizeof(double) * 10 * 512);
    for (long tr = 0; tr < trials; tr++) {
        int64_t K = er_rand_int(1, 512);
        const er_fmt_info *Fin = er__fmt(fmts[er_rand64() % 3]), *O = er__fmt(fmts[er_rand64() % 3]);
        double *dy = buf, *y = buf + K, *r[2][4], m = -INFINITY, sum = 0;
        for (int v = 0; v < 2; v++)
            for (int q = 0; q < 4; q++) r[v][q] = buf + (2 + 4 * v + q) * K;
        for (int64_t j = 0; j < K; j++) {
            y[j] = 3 * er_rand_normal();
            m = y[j] > m ? y[j] : m;
        }
        for (int64_t j = 0; j < K; j++) sum += exp(y[j] - m);
        for (int64_t j = 0; j < K; j++) {
            y[j] = er__round_double(Fin, exp(y[j] - m) / sum, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            double g = tr % 2 ? er_rand_normal() : (double)er_rand_int(-16, 16) / 8;
            dy[j] = er__round_double(Fin, g, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
        }
        er_sbwd_plan pl = {er__fmt(ER_FP32), Fin, Fin, O, O->ov_default, 0, 2.0, 0, (int)(er_rand64() & 1), 0, &left};
        for (int v = 0; v < 2; v++) {
            pl.no_fast = v;
            pl.mpfr_elems = v ? NULL : &left;
            ck_assert_int_eq(er__sbwd_row(&pl, dy, y, K, r[v][0], r[v][1], r[v][2], r[v][3]), ER_OK);
        }
        for (int64_t i = 0; i < K; i++)
            ER_REQUIRE(memcmp(&r[0][2][i], &r[1][2][i], 8) == 0 && memcmp(&r[0][3][i], &r[1][3][i], 8) == 0,
                       "row %ld (K %lld, %s in, %s out), element %lld: fast exact %a rounded %a, MPFR path exact %a "
                       "rounded %a", tr, (long long)K, Fin->name, O->name, (long long)i, r[0][2][i], r[0][3][i],
                       r[1][2][i], r[1][3][i]);
        elems += (long)K;
    }
    ER_REQUIRE(left * 1000 < elems, "the fast pass left %lld of %ld elements' exact results to MPFR", (long long)left,
               elems);
    printf("t-ival: softmax_backward of fp32, bf16 and fp16 inputs: the fast pass gave MPFR's exact results on %ld elements, "
           "leaving %lld to MPFR\n", elems, (long long)left);
    free(buf);
}
END_TEST

/* Lemma B3's exact case on constructed elements (er__sbwd_exact_dd against MPFR): dy_i = 0, y_i = 3, 5, 7 or 0.75 and
 * D = Dh + Dl + r chosen so that dx_i = -y_i D is a tie of double (y_i v with v of 53 bits), exactly or moved by a
 * term of many bits far below it (in Dl: then y_i Dl and its sum with the product's error are not exact), or with
 * the rest r of D (|r| <= Derr) deciding it; and random elements of doubles of 1 to 53 bits. Wherever the pass gives
 * a result, it is MPFR's rounding to double and into fp32, fp16 and bf16; on the exact ties it gives one. */
START_TEST(softmax_backward_exact_case_on_ties) {
    er_test_reseed(139);
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    static const double ys[] = {3, 5, 7, 0.75};
    long trials = (long)(200000 * er_test_multiplier()), decided = 0, ties = 0;
    mpfr_t x, t;
    mpfr_inits2(400, x, t, (mpfr_ptr)0);
    for (long tr = 0; tr < trials; tr++) {
        const er_fmt_info *O = er__fmt(fmts[er_rand64() % 3]);
        int fam = (int)(tr % 4);
        double dy, y, Dh, Dl, Derr = 0, r = 0;
        if (fam < 3) {
            y = ys[er_rand64() % 4];
            double k = y == 0.75 ? 3 : y; /* y's odd part */
            /* v odd in [2^53 / k, 2^54 / k): k v an odd integer of 54 bits, a tie of double */
            uint64_t lo = (uint64_t)(0x1p53 / k) + 1, v = (lo + er_rand64() % (uint64_t)(0x1p53 / k - 2)) | 1;
            int e = (int)er_rand_int(-60, 60);
            dy = 0;
            Dh = -ldexp((double)v, e - 52);
            Dl = 0;
            if (fam == 1) /* a term of 53 bits 2^-80 below the tie */
                Dl = ldexp((double)((er_rand64() >> 11) | 1), e - 52 - 80 - 53) * (er_rand64() % 2 ? 1 : -1);
            if (fam == 2) { /* the rest of D decides it */
                r = ldexp(er_rand64() % 2 ? 1.0 : -1.0, e - 52 - 70);
                Derr = er_rand64() % 2 ? fabs(r) : 2 * fabs(r);
            }
        } else {
            dy = ldexp((double)(er_rand64() >> er_rand_int(11, 63)), (int)er_rand_int(-40, 0));
            y = ldexp((double)(er_rand64() >> er_rand_int(11, 63)), (int)er_rand_int(-70, -40));
            Dh = ldexp((double)(er_rand64() >> er_rand_int(11, 63)), (int)er_rand_int(-40, 0));
            Dl = er_rand64() % 2 ? 0 : ldexp((double)(er_rand64() >> er_rand_int(11, 63)), (int)er_rand_int(-110, -60));
            if (er_rand64() % 2) dy = -dy;
        }
        double ex, rd;
        er__sbwd_exact_dd(1, &dy, &y, Dh, Dl, Derr, O, &ex, &rd);
        if (ex != ex) continue;
        decided++;
        /* dx = y (dy - Dh - Dl - r) in MPFR, exact at 400 bits */
        mpfr_set_d(x, dy, MPFR_RNDN);
        mpfr_sub_d(x, x, Dh, MPFR_RNDN);
        mpfr_sub_d(x, x, Dl, MPFR_RNDN);
        mpfr_sub_d(x, x, r, MPFR_RNDN);
        mpfr_mul_d(x, x, y, MPFR_RNDN);
        double want = mpfr_get_d(x, MPFR_RNDN), wrd = er__round_mpfr(O, x, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        mpfr_set_d(t, want, MPFR_RNDN);
        ties += fam == 0 && mpfr_cmp(t, x) != 0;
        ER_REQUIRE(ex == want && rd == wrd, "element %ld (family %d, dy %a, y %a, D %a + %a + %a, Derr %a, %s): the "
                   "pass %a rounded %a, MPFR %a rounded %a", tr, fam, dy, y, Dh, Dl, r, Derr, O->name, ex, rd, want,
                   wrd);
    }
    ER_REQUIRE(ties > trials / 8, "%ld ties of double decided of %ld elements", ties, trials);
    printf("t-ival: Lemma B3's exact case: %ld of %ld elements decided (%ld exact ties of double), each MPFR's rounding\n",
           decided, trials, ties);
    mpfr_clears(x, t, (mpfr_ptr)0);
}
END_TEST

/* log_softmax's backward rows: the fast pass (exp's ends and the forms in loops that vectorise, the exact results in
 * double from Theorem D1's bounds and S's summary, then in double-double by Lemma B5) gives the scalar path's sets and
 * correct roundings on every element (and its report values within 2^-40 of MPFR's). Rows: log_softmax outputs of
 * normal logits (fp32, bf16, fp16), masked lanes (-inf), elements with y = 0, wide exponents, dy summing to exactly 0,
 * dy on a grid of eighths, and one dy_i within 2^8 units of where dx_i cancels; U = 0, 1, 2 or 5. */
START_TEST(log_softmax_backward_fast_pass_is_the_scalar_path) {
    er_test_reseed(97);
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    static const int64_t lens[] = {1, 2, 3, 17, 128, 1000};
    static const double Us[] = {0, 1, 2, 5};
    long trials = (long)(2100 * er_test_multiplier()), elems = 0, mpfr_elems = 0, left_all = 0;
    double *buf = malloc(sizeof(double) * 10 * 1000);
    for (long tr = 0; tr < trials; tr++) {
        int fam = (int)(tr % 7);
        int64_t K = lens[er_rand64() % 6];
        const er_fmt_info *Fdy = er__fmt(fmts[er_rand64() % 3]), *Fy = er__fmt(fmts[er_rand64() % 3]),
                          *O = er__fmt(fmts[er_rand64() % 3]);
        double *dy = buf, *y = buf + K, *r[2][4];
        for (int v = 0; v < 2; v++)
            for (int q = 0; q < 4; q++) r[v][q] = buf + (2 + 4 * v + q) * K;
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < K; j++) {
            y[j] = er_rand_normal() * (fam == 3 ? 30 : 2);
            if (fam == 1 && er_rand64() % 3 == 0) y[j] = -INFINITY;
            m = y[j] > m ? y[j] : m;
        }
        if (m == -INFINITY) y[0] = m = 0;
        for (int64_t j = 0; j < K; j++) sum += exp(y[j] - m);
        for (int64_t j = 0; j < K; j++) {
            y[j] = er__round_double(Fy, y[j] - m - log(sum), ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            if (fam == 2 && er_rand64() % 4 == 0) y[j] = 0;
            double g = fam == 5 ? (double)er_rand_int(-8, 8) / 8 : er_rand_normal();
            if (fam == 3) g = ldexp(g, (int)er_rand_int(-12, 12));
            dy[j] = er__round_double(Fdy, g, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            if (fam == 4 && (j & 1)) dy[j] = -dy[j - 1]; /* S = 0 where K is even */
        }
        if (fam == 6 && K > 1) { /* one dx_i cancelling: dy_i near exp(y_i) S, moved by 0 to 2^8 units of Fdy */
            int64_t i = er_rand_int(0, K - 1);
            double so = 0, e = exp(y[i]);
            for (int64_t j = 0; j < K; j++) so += j == i ? 0 : dy[j];
            double g = er__round_double(Fdy, e * so / (1 - e), ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            dy[i] = g + (double)er_rand_int(-256, 256) * er__ulp(Fdy, g) * (er_rand64() % 2);
        }
        int64_t left = 0;
        er_sbwd_plan pl = {er__fmt(ER_FP32), Fdy, Fy, O, O->ov_default, er_rand64() % 4 ? 0 : 10, Us[er_rand64() % 4],
                           0, 0, 0, &left};
        for (int v = 0; v < 2; v++) {
            pl.no_fast = v;
            if (v) pl.mpfr_elems = NULL;
            ck_assert_int_eq(er__lsbwd_row(&pl, dy, y, K, r[v][0], r[v][1], r[v][2], r[v][3]), ER_OK);
        }
        for (int64_t i = 0; i < K; i++) {
            int nan_set = r[0][0][i] != r[0][0][i];
            int same = (nan_set ? r[1][0][i] != r[1][0][i] : r[0][0][i] == r[1][0][i] && r[0][1][i] == r[1][1][i]) &&
                       memcmp(&r[0][3][i], &r[1][3][i], 8) == 0 &&
                       fabs(r[0][2][i] - r[1][2][i]) <= 0x1p-40 * fabs(r[1][2][i]);
            ER_REQUIRE(same, "row %ld (family %d, K %lld, dy %s, y %s, out %s, U %g), element %lld (dy %a, y %a): fast "
                       "[%a, %a] exact %a rounded %a, scalar [%a, %a] exact %a rounded %a", tr, fam, (long long)K,
                       Fdy->name, Fy->name, O->name, pl.U, (long long)i, dy[i], y[i], r[0][0][i], r[0][1][i], r[0][2][i],
                       r[0][3][i], r[1][0][i], r[1][1][i], r[1][2][i], r[1][3][i]);
            mpfr_elems += r[0][2][i] == r[1][2][i];
        }
        elems += (long)K;
        left_all += (long)left;
    }
    printf("t-ival: log_softmax_backward's fast pass gave the scalar path's sets and roundings on %ld elements of %ld "
           "rows (%ld report values equal to MPFR's rounding; %ld exact results left to MPFR)\n", elems, trials,
           mpfr_elems, left_all);
    free(buf);
}
END_TEST

/* log_softmax_backward's GPU rows: er__lsbwd_dev_row's constants from a window of dy (core/pwin.h, as the GPU sums it)
 * hold S = sum dy exactly between c[2] and c[3] (MPFR), within 2^-52 |S| of each other (the host's rows take the same
 * bounds from the same summary), flag S = 0 in c[4], and hold |S| between M + c[5] and M + c[6] (Lemma B5's parts, M
 * the lesser of |c[2]| and |c[3]|), within 2^-63 M of each other. Rows of fp32, fp16 and bf16 values: normal of several
 * scales, spread over 2^-80 .. 2^40 (sums of more than 53 bits, terms below the window), each value and its negation
 * (S = 0, or one nudged: cancelling), zeros. */
START_TEST(log_softmax_backward_gpu_rows_bound_the_sum) {
    er_test_reseed(141);
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    long trials = (long)(20000 * er_test_multiplier()), decided = 0, inexact = 0, zeros = 0;
    double *dy = malloc(sizeof(double) * 3000);
    mpfr_t S, t;
    mpfr_inits2(700, S, t, (mpfr_ptr)0);
    for (long tr = 0; tr < trials; tr++) {
        const er_fmt_info *F = er__fmt(fmts[er_rand64() % 3]);
        int fam = (int)(er_rand64() % 4);
        int64_t n = er_rand_int(1, tr % 10 == 0 ? 3000 : 64);
        double scale = ldexp(1.0, (int)er_rand_int(-20, 20));
        for (int64_t j = 0; j < n; j++) {
            double u = er_rand_normal() * scale;
            if (fam == 1) u = ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-80, 40)) * (er_rand64() % 2 ? 1 : -1);
            if (fam == 2 && j % 2) u = -dy[j - 1];
            if (fam == 2 && j == n - 1 && er_rand64() % 2) u *= 1.25;
            if (fam == 3 && er_rand64() % 2) u = 0;
            dy[j] = er__round_double(F, u, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
        }
        double pmax = 0;
        for (int64_t j = 0; j < n; j++) pmax = fmax(pmax, fabs(dy[j]));
        er_pw_i128 W = 0;
        int tail = 0, bb = pmax > 0 ? er_pwin_base(pmax) : 0;
        for (int64_t j = 0; j < n && pmax > 0; j++) W += er_pwin_term(dy[j], bb, &tail);
        er_pwin_row w = {(uint64_t)W, (uint64_t)((er_pw_u128)W >> 64), 0, 0, bb, (uint8_t)tail, 0, {0, 0}};
        er_pwin_lanes(dy, NULL, n, &w.pos, &w.negs);
        er_sbwd_plan pl = {er__fmt(ER_FP32), F, F, er__fmt(ER_FP32), ER_OVERFLOW_IEEE, 0, 2, 0, 0, 0, NULL};
        er_sbwd_dev d;
        double c[ER_LSBWD_DEV_CONSTS];
        ck_assert_int_eq(er__lsbwd_dev_setup(&pl, n, &d), ER_OK);
        if (!er__lsbwd_dev_row(&pl, &d, &w, n, c)) continue;
        decided++;
        mpfr_set_zero(S, 1);
        for (int64_t j = 0; j < n; j++) mpfr_add_d(S, S, dy[j], MPFR_RNDN); /* exact at 700 bits */
        ER_REQUIRE(mpfr_cmp_d(S, c[2]) >= 0 && mpfr_cmp_d(S, c[3]) <= 0 && (c[4] == 1) == (mpfr_zero_p(S) != 0),
                   "row %ld (family %d, n %lld, %s): S = %.20g outside [%a, %a] (zero flag %g)", tr, fam, (long long)n,
                   F->name, mpfr_get_d(S, MPFR_RNDN), c[2], c[3], c[4]);
        ER_REQUIRE(c[3] - c[2] <= 0x1p-52 * fabs(c[2]), "row %ld: [%a, %a] wider than 2^-52 of S", tr, c[2], c[3]);
        mpfr_set_d(t, c[2], MPFR_RNDN);
        inexact += mpfr_cmp(t, S) != 0;
        zeros += c[4] == 1;
        /* Lemma B5's parts: M + c[5] <= |S| <= M + c[6] (exact sums at 700 bits), at most 2^-63 |S| apart */
        double M = fmin(fabs(c[2]), fabs(c[3]));
        mpfr_abs(S, S, MPFR_RNDN);
        mpfr_set_d(t, M, MPFR_RNDN);
        mpfr_add_d(t, t, c[5], MPFR_RNDN);
        int below = mpfr_cmp(t, S) <= 0 && (c[4] == 1 || c[5] < ldexp(M, -52));
        mpfr_set_d(t, M, MPFR_RNDN);
        mpfr_add_d(t, t, c[6], MPFR_RNDN);
        ER_REQUIRE(below && mpfr_cmp(t, S) >= 0 && c[6] - c[5] <= 0x1p-63 * M,
                   "row %ld: |S| = %.25g outside [%a + %a, %a + %a]", tr, mpfr_get_d(S, MPFR_RNDN), M, c[5], M, c[6]);
    }
    ER_REQUIRE(decided >= trials - trials / 100 && inexact > trials / 10 && zeros > trials / 100,
               "%ld of %ld rows decided, %ld sums not doubles, %ld zero", decided, trials, inexact, zeros);
    printf("t-ival: log_softmax_backward's GPU rows: %ld of %ld sums bounded (%ld not doubles, %ld zero), each "
           "holding MPFR's\n", decided, trials, inexact, zeros);
    mpfr_clears(S, t, (mpfr_ptr)0);
    free(dy);
}
END_TEST

/* dx = dy - exp(y) S rounded correctly into fp32, fp16 or bf16 (rd) and to double (ex) by MPFR: exp(y) rounded down
 * and up at 200 bits and doubling until both ends of dx's enclosure round alike; S exact. Where exp(y) lies below
 * MPFR's exponent range (y below about -7.4e8), 2^-3000 stands for it: every value below 2^-665 / |S| gives dx's
 * roundings (Lemma B5 (b)). */
static void lsb_dd_mpfr(double dy, double y, mpfr_srcptr S, const er_fmt_info *O, double *ex, double *rd) {
    for (mpfr_prec_t p = 200;; p *= 2) {
        mpfr_t el, eh, lo, hi, t;
        mpfr_inits2(p, el, eh, (mpfr_ptr)0);
        mpfr_inits2(p + 400, lo, hi, t, (mpfr_ptr)0);
        mpfr_set_d(t, y, MPFR_RNDN);
        mpfr_exp(el, t, MPFR_RNDD);
        mpfr_exp(eh, t, MPFR_RNDU);
        if (mpfr_zero_p(el)) {
            mpfr_set_ui_2exp(el, 1, -3000, MPFR_RNDN);
            mpfr_set(eh, el, MPFR_RNDN);
        }
        int pos = mpfr_sgn(S) > 0;
        mpfr_mul(lo, pos ? eh : el, S, MPFR_RNDN); /* exact */
        mpfr_mul(hi, pos ? el : eh, S, MPFR_RNDN);
        mpfr_set_d(t, dy, MPFR_RNDN);
        mpfr_sub(lo, t, lo, MPFR_RNDD);
        mpfr_sub(hi, t, hi, MPFR_RNDU);
        double a = er__round_mpfr(O, lo, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE),
               b = er__round_mpfr(O, hi, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        double da = mpfr_get_d(lo, MPFR_RNDN), db = mpfr_get_d(hi, MPFR_RNDN);
        mpfr_clears(el, eh, lo, hi, t, (mpfr_ptr)0);
        if (a == b && da == db) {
            *rd = a;
            *ex = da;
            return;
        }
    }
}

/* Lemma B5 (core/lsbdd.h): where it decides dy - exp(y) S's rounding into fp32, fp16 or bf16, that is MPFR's, and its
 * report value lies within 2^-43 of the exact result. S = (m + f) 2^e from a summary of 64 bits (sticky: f > 0, a
 * fraction of 30 bits). Families: dy within 2^-6 .. 2^-40 of exp(y) S (cancellation); S set so that dx lies within
 * about 2^-64 |exp(y) S| of a midpoint of the output format, then m moved by 0 to 2^24 units (either side of the
 * midpoint, its distance spread; midpoints below powers of two among them); random elements; y = 0, y up to 1 and
 * down to -600; and (b) y from -600 to -10^5 and fp32's lowest, dy random or a midpoint of the output format. */
START_TEST(log_softmax_backward_double_double_is_mpfrs) {
    er_test_reseed(151);
    er__exp_init();
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    long trials = (long)(75000 * er_test_multiplier()), decided[5] = {0, 0, 0, 0, 0}, tried[5] = {0, 0, 0, 0, 0},
         near = 0, pow2 = 0, mids = 0;
    mpfr_t S, t, u;
    mpfr_inits2(400, S, t, u, (mpfr_ptr)0);
    for (long tr = 0; tr < trials; tr++) {
        int fam = (int)(tr % 5);
        const er_fmt_info *O = er__fmt(fmts[er_rand64() % 3]), *F32 = er__fmt(ER_FP32);
        double y = er__round_double(F32, -fabs(er_rand_normal()) * (double)er_rand_int(1, 20), ER_ROUND_NEAREST,
                                    ER_OVERFLOW_SATURATE);
        if (fam == 3) y = er_rand64() % 3 == 0 ? 0.0 /* exp(y) = 1: dx rational, ties possible */
                          : er_rand64() % 2 ? er__round_double(F32, er_rand_unit(), ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE)
                                            : er__round_double(F32, -600 + 10 * er_rand_unit(), ER_ROUND_NEAREST,
                                                               ER_OVERFLOW_SATURATE);
        uint64_t m = er_rand64() | (UINT64_C(1) << 63);
        int e = (int)er_rand_int(-80, -40), neg = (int)(er_rand64() % 2), sticky = (int)(er_rand64() % 2);
        if (fam == 3 && y < -500) e += 800; /* |exp(y) S| near 1 */
        uint64_t fnum = sticky ? (er_rand64() >> 34) | 1 : 0; /* f = fnum 2^-30 */
        double dy = 0;
        if (fam == 0 || fam == 3) { /* dy within 2^-k of exp(y) S (family 3: any dy) */
            double es = exp(y) * ldexp((double)m, e) * (neg ? -1 : 1);
            dy = fam == 0 ? es * (1 + (er_rand64() % 2 ? 1 : -1) * ldexp(1.0, -(int)er_rand_int(6, 40)))
                          : er_rand_normal() * fabs(es) * 4;
            dy = er__round_double(F32, dy, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
        } else if (fam == 1) { /* S moved so that dx lies near a midpoint mu of O, then m by 0 .. 2^24 units */
            double es = exp(y) * ldexp((double)m, e);
            dy = er__round_double(F32, es * (0.25 + 4 * er_rand_unit()) * (er_rand64() % 2 ? 1 : -1),
                                  ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            double x0 = dy - es * (neg ? -1 : 1), r0 = er__round_double(O, x0, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            if (er_rand64() % 4 == 0) /* r0 a power of two: its midpoint below */
                r0 = copysign(ldexp(1.0, ilogb(r0)), r0);
            if (!(fabs(r0) >= 4 * O->min_normal && fabs(r0) < O->max / 4)) continue;
            mpfr_set_prec(u, O->p);
            mpfr_set_d(u, r0, MPFR_RNDN);
            int down = (int)(er_rand64() % 2);
            if (down) mpfr_nextbelow(u);
            else mpfr_nextabove(u);
            mpfr_set_d(t, r0, MPFR_RNDN);
            mpfr_add(t, t, u, MPFR_RNDN);
            mpfr_div_2ui(t, t, 1, MPFR_RNDN); /* mu, exact */
            pow2 += fabs(r0) == ldexp(1.0, ilogb(r0)) && (r0 > 0) == down;
            /* S = (dy - mu) / exp(y): its magnitude as (m + f) 2^e, m of 64 bits */
            mpfr_set_prec(u, 400);
            mpfr_set_d(u, dy, MPFR_RNDN);
            mpfr_sub(u, u, t, MPFR_RNDN);
            if (mpfr_zero_p(u)) continue;
            mpfr_set_prec(S, 400);
            mpfr_set_d(S, y, MPFR_RNDN);
            mpfr_exp(S, S, MPFR_RNDN);
            mpfr_div(u, u, S, MPFR_RNDN);
            neg = mpfr_sgn(u) < 0;
            mpfr_abs(u, u, MPFR_RNDN);
            e = (int)mpfr_get_exp(u) - 64;
            mpfr_mul_2si(u, u, -e, MPFR_RNDN);
            m = mpfr_get_uj(u, MPFR_RNDZ);
            int64_t k = (int64_t)(er_rand64() % 2 ? er_rand64() % 4 : er_rand64() >> er_rand_int(40, 63));
            m = er_rand64() % 2 ? m + (uint64_t)k : m - (uint64_t)k;
            if (!(m >> 63)) continue;
            near += k < 4;
        } else { /* random elements (family 4: exp(y) S below 2^-665, dy a midpoint of O half the time) */
            dy = er__round_double(F32, er_rand_normal() * ldexp(1.0, (int)er_rand_int(-8, 8)), ER_ROUND_NEAREST,
                                  ER_OVERFLOW_SATURATE);
            if (fam == 4) {
                y = er_rand64() % 10 ? er__round_double(F32, -600 - pow(10, 5 * er_rand_unit()), ER_ROUND_NEAREST,
                                                        ER_OVERFLOW_SATURATE)
                                     : -0x1.fffffep+127;
                double r0 = er__round_double(O, dy, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
                if (er_rand64() % 2 && r0 != 0 && fabs(r0) < O->max) {
                    mpfr_set_prec(u, O->p);
                    mpfr_set_d(u, r0, MPFR_RNDN);
                    if (er_rand64() % 2) mpfr_nextbelow(u);
                    else mpfr_nextabove(u);
                    dy = 0.5 * r0 + 0.5 * mpfr_get_d(u, MPFR_RNDN); /* exact */
                    mids++;
                }
            }
        }
        uint64_t lo = m & 0x7ff;
        double M = ldexp((double)(m - lo), e), a0 = ldexp((double)lo, e), a1 = ldexp((double)(lo + (uint64_t)sticky), e);
        /* S exact: (m + fnum 2^-30) 2^e */
        mpfr_set_prec(S, 128);
        mpfr_set_uj(S, m, MPFR_RNDN);
        mpfr_set_uj(t, fnum, MPFR_RNDN);
        mpfr_mul_2si(t, t, -30, MPFR_RNDN);
        mpfr_add(S, S, t, MPFR_RNDN);
        mpfr_mul_2si(S, S, e, MPFR_RNDN);
        if (neg) mpfr_neg(S, S, MPFR_RNDN);
        er_lsb_dd d;
        double v, r;
        tried[fam]++;
        if (fam == 4) { /* (b) */
            r = er__round_double(O, dy, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            v = dy;
            if (!(r != 0 && fabs(r) < O->max && er_lsb_dd_tiny(dy, y, M, neg, r, O->p, O->emin, &r))) continue;
        } else {
            if (!er_lsb_dd_value(dy, y, M, a0, a1, neg, er__exp_lh, er__exp_ll, er__exp_t1, er__exp_t2, &d, &v))
                continue;
            r = er__round_double(O, v, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            if (!(r != 0 && fabs(r) < O->max && er_lsb_dd_rounds_to(&d, dy, r, O->p, O->emin))) continue;
        }
        decided[fam]++;
        double want, wrd;
        lsb_dd_mpfr(dy, y, S, O, &want, &wrd);
        ER_REQUIRE(memcmp(&r, &wrd, 8) == 0 && fabs(v - want) <= 0x1p-43 * fabs(want),
                   "element %ld (family %d, %s, dy %a, y %a, S = (%#llx + %llu 2^-30) 2^%d, %s): Lemma B5 %a rounded %a, "
                   "MPFR %a rounded %a", tr, fam, O->name, dy, y, (unsigned long long)m, (unsigned long long)fnum, e,
                   neg ? "negative" : "positive", v, r, want, wrd);
    }
    ER_REQUIRE(decided[0] > tried[0] / 4 && decided[0] < tried[0] && decided[1] > tried[1] / 4 &&
               decided[1] < tried[1] - near / 2 && decided[2] > tried[2] - tried[2] / 10 && decided[3] > tried[3] / 2 &&
               decided[4] > tried[4] / 2 && pow2 > trials / 100 && mids > trials / 20,
               "decided %ld/%ld, %ld/%ld, %ld/%ld, %ld/%ld, %ld/%ld; %ld near midpoints, %ld below powers of two, %ld dy "
               "on midpoints", decided[0], tried[0], decided[1], tried[1], decided[2], tried[2], decided[3], tried[3],
               decided[4], tried[4], near, pow2, mids);
    printf("t-ival: Lemma B5 decided %ld of %ld cancelling elements, %ld of %ld near midpoints (%ld within 4 units of "
           "m, %ld below powers of two), %ld of %ld random, %ld of %ld at the ends of y, (b) %ld of %ld (%ld dy on "
           "midpoints), each as MPFR\n", decided[0], tried[0], decided[1], tried[1], near, pow2, decided[2], tried[2],
           decided[3], tried[3], decided[4], tried[4], mids);
    mpfr_clears(S, t, u, (mpfr_ptr)0);
}
END_TEST

/* er__round_double's inline rounding to nearest (format.h) is the general code's (round.c) on every value within the
 * format's largest, for fp32, fp16, bf16 and the fp8, fp6 and fp4 formats: at each value of the narrow formats (every
 * pattern), the midpoints between neighbours, a double either side of each, and random points; fp32 on random
 * values, its midpoints and subnormals. */
static long rn_range_check(const er_fmt_info *O, double p) {
    if (!(fabs(p) <= O->max)) return 0;
    double a = er__round_double(O, p, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE),
           b = er__round_double_general(O, p, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
    ER_REQUIRE(memcmp(&a, &b, 8) == 0, "%s: RN(%a) fast %a, general %a", O->name, p, a, b);
    return 1;
}
START_TEST(inline_nearest_is_the_general_rounding) {
    er_test_reseed(101);
    static const er_format fmts[] = {ER_FP16, ER_BF16, ER_FP8_E4M3FN, ER_FP8_E5M2, ER_FP6_E2M3FN, ER_FP6_E3M2FN,
                                     ER_FP4_E2M1FN};
    long n = 0;
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        const er_fmt_info *O = er__fmt(fmts[k]);
        double prev = -INFINITY;
        /* the format's values in increasing order: every pattern decoded, sorted by walking up from -max */
        for (double v = -O->max; v <= O->max;) {
            double nxt = er__round_double(O, er__up(v), ER_ROUND_UP, ER_OVERFLOW_IEEE);
            if (v == 0 && signbit(v)) nxt = er__round_double(O, 4.9406564584124654e-324, ER_ROUND_UP, ER_OVERFLOW_IEEE);
            double pts[8] = {v, -v, er__up(v), er__dn(v), 0, 0, 0, 0};
            if (prev > -INFINITY) {
                double mid = prev + (v - prev) / 2; /* exact: a double of at most 26 bits */
                pts[4] = mid, pts[5] = er__up(mid), pts[6] = er__dn(mid), pts[7] = prev + (v - prev) * er_rand_unit();
            }
            for (int i = 0; i < 8; i++) n += rn_range_check(O, pts[i]);
            prev = v;
            if (!(nxt > v)) break;
            v = nxt;
        }
    }
    const er_fmt_info *F = er__fmt(ER_FP32);
    for (long i = 0; i < 50000; i++) {
        double v = ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-152, 128)) * (i & 1 ? 1 : -1);
        float f = (float)v, g = nextafterf(f, INFINITY);
        double mid = (double)f + ((double)g - f) / 2;
        n += rn_range_check(F, v) + rn_range_check(F, mid) + rn_range_check(F, er__up(mid)) + rn_range_check(F, er__dn(mid));
    }
    printf("t-ival: er__round_double's inline rounding to nearest matched the general code on %ld values\n", n);
}
END_TEST

/* er__round_ratio (round.c) is RN_O(n m / d) as MPFR gives it at 400 bits: n of 24 or 53 significant bits, m in
 * {1, 6, 448, 57344} (qmax and 1), d of 24 or 53 bits, with n m / d put within a double's rounding of a rounding
 * boundary of O (its midpoints: ties where d is a power of two), of one of O's values, near O's largest value and in
 * its subnormals, for fp32, fp16, bf16, e4m3fn, e5m2 and e2m1 under each overflow rule. */
START_TEST(round_ratio_is_mpfrs) {
    er_test_reseed(103);
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16, ER_FP8_E4M3FN, ER_FP8_E5M2, ER_FP4_E2M1FN};
    static const double ms[] = {1, 6, 448, 57344};
    static const er_overflow ovs[] = {ER_OVERFLOW_SATURATE, ER_OVERFLOW_IEEE, ER_OVERFLOW_NAN};
    long trials = (long)(100000 * er_test_multiplier()), ties = 0;
    mpfr_t t;
    mpfr_init2(t, 400);
    for (long tr = 0; tr < trials; tr++) {
        const er_fmt_info *O = er__fmt(fmts[er_rand64() % 6]);
        double m = ms[er_rand64() % 4];
        er_overflow ov = ovs[er_rand64() % 3];
        if (ov == ER_OVERFLOW_IEEE && !O->has_inf) ov = ER_OVERFLOW_SATURATE;
        if (ov == ER_OVERFLOW_NAN && O->no_nan) ov = ER_OVERFLOW_SATURATE;
        int wide = (int)(er_rand64() % 2), fam = (int)(tr % 5);
        double d = ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-40, 40));
        if (!wide) d = (float)d;
        if (fam == 4) d = ldexp(1.0, (int)er_rand_int(-40, 40));
        /* a target near O's grid: a value of O, a midpoint, O's largest, a subnormal */
        double v = er__round_double(O, ldexp(er_rand_unit() + 0.5, (int)er_rand_int(O->emin - O->p, O->emax)),
                                    ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
        double w = er__round_double(O, er__up(v), ER_ROUND_UP, ER_OVERFLOW_SATURATE);
        double target = fam == 0 ? v : fam == 1 ? O->max + (O->max - er__round_double(O, er__dn(O->max), ER_ROUND_DOWN,
                                                                                       ER_OVERFLOW_SATURATE)) / 2
                                                : v + (w - v) / 2;
        if (fam == 2) target *= 1 + er_rand_normal() * 0x1p-30;
        double n = target * d / m;
        if (!wide) n = (float)n;
        if (er_rand64() % 3 == 0) n = er_rand64() & 1 ? er__up(n) : er__dn(n);
        if (er_rand64() & 1) n = -n;
        if (!(fabs(n) > 0 && isfinite(n))) continue;
        mpfr_set_d(t, n, MPFR_RNDN);
        mpfr_mul_d(t, t, m, MPFR_RNDN);
        mpfr_div_d(t, t, d, MPFR_RNDN); /* 400 bits: within 2^-400 of the quotient, never a boundary it is not */
        double want = er__round_mpfr(O, t, ER_ROUND_NEAREST, ov), got = er__round_ratio(O, n, m, d, ov);
        double dn = er__round_mpfr(O, t, ER_ROUND_DOWN, ER_OVERFLOW_SATURATE),
               up = er__round_mpfr(O, t, ER_ROUND_UP, ER_OVERFLOW_SATURATE);
        ties += dn != up && mpfr_cmp_d(t, dn + (up - dn) / 2) == 0; /* exactly a midpoint of O */
        ER_REQUIRE(memcmp(&want, &got, 8) == 0 || (want != want && got != got),
                   "%s (ov %d): RN(%a * %a / %a) = %a, er__round_ratio %a", O->name, (int)ov, n, m, d, want, got);
    }
    mpfr_clear(t);
    ER_REQUIRE(ties > trials / 50, "%ld quotients on a midpoint", ties);
    printf("t-ival: er__round_ratio matched MPFR on %ld quotients (%ld of them on a midpoint of O)\n", trials, ties);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ival");
    TCase *tc = tcase_create("ival");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, set_widths_agree);
    tcase_add_test(tc, exp_bounds_hold);
    tcase_add_test(tc, tanh_and_quotient_bounds_hold);
    tcase_add_test(tc, tanh_small_bounds_hold);
    tcase_add_test(tc, fixed_sums_bound_the_exact_sum);
    tcase_add_test(tc, compensated_sums_bound_the_exact_sum);
    tcase_add_test(tc, wide_steps_move_outward);
    tcase_add_test(tc, exp_shift_bounds_hold);
    tcase_add_test(tc, approx_ends_exact_form_agrees);
    tcase_add_test(tc, exps_vector_pass_agrees);
    tcase_add_test(tc, exp_dd_within_2_65);
    tcase_add_test(tc, exp_bounds_run_agrees);
    tcase_add_test(tc, softmax_row_loops_agree);
    tcase_add_test(tc, contiguous_loads_decode_every_pattern);
    tcase_add_test(tc, square_windows_give_the_summary);
    tcase_add_test(tc, square_sums_in_lanes);
    tcase_add_test(tc, product_windows_give_the_summary);
    tcase_add_test(tc, layernorm_gpu_constants_are_the_rows_sets);
    tcase_add_test(tc, sums_and_products_rounded_both_ways);
    tcase_add_test(tc, rsqrt_rounded_both_ways);
    tcase_add_test(tc, layernorm_box_in_doubles_is_mpfrs);
    tcase_add_test(tc, welford_bounds_in_double_hold);
    tcase_add_test(tc, quotients_round_once);
    tcase_add_test(tc, attention_dot_within_its_bound);
    tcase_add_test(tc, softmax_open_elements_in_double_double);
    tcase_add_test(tc, log_dir_bounds_hold);
    tcase_add_test(tc, dot_summary_dd_holds_the_sum);
    tcase_add_test(tc, softmax_backward_fast_pass_is_the_mpfr_path);
    tcase_add_test(tc, softmax_backward_exact_products_decided_in_double);
    tcase_add_test(tc, softmax_backward_exact_case_on_ties);
    tcase_add_test(tc, log_softmax_backward_fast_pass_is_the_scalar_path);
    tcase_add_test(tc, log_softmax_backward_gpu_rows_bound_the_sum);
    tcase_add_test(tc, log_softmax_backward_double_double_is_mpfrs);
    tcase_add_test(tc, inline_nearest_is_the_general_rounding);
    tcase_add_test(tc, round_ratio_is_mpfrs);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
