/* softmax.c: the set of a softmax row (docs/algorithms/softmax.md).
 *
 * The model: m = max_j x_j; d_j = fl(x_j - m); e_j = exp(d_j) within U ulps of F; s = the e_j summed in any
 * order in F; y_i = fl(e_i / s) or fl(e_i * fl(1/s)). The set of y_i keeps the dependency between e_i in the
 * numerator and in s: y_i grows with e_i and falls with every other e_j, so its lowest value takes e_i at its
 * lowest and the others at their highest (Theorem S1). Every bound is computed with MPFR rounding outward. The
 * exact softmax (exact max subtraction, exact exp, exact division) is enclosed at increasing precision until
 * its correct rounding to the output format is decided (Ziv's strategy). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <mpfr.h>
#include "format/format.h"
#include "enclose/approx.h"
#include "enclose/ival.h"
#include "enclose/softmax.h"
#include "format/vecround.h"

static void er_all_nan(er_cval *cv, double *exact, double *rounded, int64_t n) {
    /* NaN rows are NaN in softmax and log_softmax alike */
    for (int64_t i = 0; i < n; i++) {
        memset(&cv[i], 0, sizeof cv[i]);
        cv[i].lo = INFINITY;
        cv[i].hi = -INFINITY;
        cv[i].nan = cv[i].nan_req = 1;
        exact[i] = rounded[i] = NAN;
    }
}

/* softmax.h. */
double er__log2e(const er_fmt_info *F) {
    mpfr_t c;
    mpfr_init2(c, 200);
    mpfr_const_log2(c, MPFR_RNDN);
    mpfr_ui_div(c, 1, c, MPFR_RNDN); /* 200 bits: no format's rounding of 1/ln 2 is in doubt */
    double r = er__round_mpfr(F, c, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    mpfr_clear(c);
    return r;
}

/* A set [*lo, *hi] of F widened by the flush of a subnormal result to a zero of its sign (Theorem S6). */
static void er_flush_join(const er_fmt_info *F, double *lo, double *hi) {
    if (*lo > *hi || *hi <= -F->min_normal || *lo >= F->min_normal) return;
    if (*lo > 0) *lo = 0;
    if (*hi < 0) *hi = 0;
}


/* The exact softmax, correctly rounded to O, for the elements not yet done: enclosures at 64, 256, 1024 and 4096
 * bits until both ends round alike. */
static er_status er_exact_row(const er_softmax_plan *pl, const double *x, int64_t n, double m, double *exact,
                              double *rounded, char *done, int64_t todo) {
    mpfr_t *lo = malloc(sizeof(mpfr_t) * (size_t)n), *hi = malloc(sizeof(mpfr_t) * (size_t)n);
    if (!lo || !hi) {
        free(lo);
        free(hi);
        return er__fail(ER_ERR_NOMEM, "cannot allocate a softmax row of %lld", (long long)n);
    }
    mpfr_t d, sl, sh, q;
    for (mpfr_prec_t p = 64; p <= 8192 && todo > 0; p *= 4) {
        mpfr_init2(d, 2200);
        mpfr_inits2(p + 64, sl, sh, q, (mpfr_ptr)0);
        mpfr_set_zero(sl, 1);
        mpfr_set_zero(sh, 1);
        for (int64_t j = 0; j < n; j++) {
            mpfr_inits2(p, lo[j], hi[j], (mpfr_ptr)0);
            if (x[j] == -INFINITY) { mpfr_set_zero(lo[j], 1); mpfr_set_zero(hi[j], 1); continue; }
            mpfr_set_d(d, x[j], MPFR_RNDN);
            mpfr_sub_d(d, d, m, MPFR_RNDN); /* exact at 2200 bits */
            /* one exp to nearest; the exact value lies strictly between its neighbours */
            mpfr_exp(lo[j], d, MPFR_RNDN);
            mpfr_set(hi[j], lo[j], MPFR_RNDN);
            mpfr_nextbelow(lo[j]);
            mpfr_nextabove(hi[j]);
            mpfr_add(sl, sl, lo[j], MPFR_RNDD);
            mpfr_add(sh, sh, hi[j], MPFR_RNDU);
        }
        if (pl->log) { /* y* = (x_i - M) - log(S): between (x_i - M) - log(S_hi) and (x_i - M) - log(S_lo) */
            mpfr_t ll, lh;
            mpfr_inits2(p + 64, ll, lh, (mpfr_ptr)0);
            mpfr_log(ll, sl, MPFR_RNDD);
            mpfr_log(lh, sh, MPFR_RNDU);
            for (int64_t i = 0; i < n; i++) {
                if (done[i]) continue;
                if (x[i] == -INFINITY) { exact[i] = rounded[i] = -INFINITY; done[i] = 1; todo--; continue; }
                mpfr_set_d(d, x[i], MPFR_RNDN);
                mpfr_sub_d(d, d, m, MPFR_RNDN);
                mpfr_sub(q, d, lh, MPFR_RNDD);
                double rl = er__round_mpfr(pl->O, q, ER_ROUND_NEAREST, pl->ov_out);
                exact[i] = mpfr_get_d(q, MPFR_RNDN);
                mpfr_sub(q, d, ll, MPFR_RNDU);
                double rh = er__round_mpfr(pl->O, q, ER_ROUND_NEAREST, pl->ov_out);
                rounded[i] = rl;
                if (rl == rh) { done[i] = 1; todo--; }
            }
            mpfr_clears(ll, lh, (mpfr_ptr)0);
        }
        for (int64_t i = 0; i < n && !pl->log; i++) {
            if (done[i]) continue;
            mpfr_div(q, lo[i], sh, MPFR_RNDD);
            double rl = er__round_mpfr(pl->O, q, ER_ROUND_NEAREST, pl->ov_out);
            exact[i] = mpfr_get_d(q, MPFR_RNDN);
            mpfr_div(q, hi[i], sl, MPFR_RNDU);
            double rh = er__round_mpfr(pl->O, q, ER_ROUND_NEAREST, pl->ov_out);
            rounded[i] = rl;
            if (rl == rh) { done[i] = 1; todo--; }
        }
        for (int64_t j = 0; j < n; j++) mpfr_clears(lo[j], hi[j], (mpfr_ptr)0);
        mpfr_clears(d, sl, sh, q, (mpfr_ptr)0);
    }
    free(lo);
    free(hi);
    return ER_OK;
}

/* log_softmax's sets from the bounds [s_lo, s_hi] (values of F) of the rounded sum: l = log(s) within Ulog ulps;
 * y = fl(d_i - l) or fl(x_i - fl(m + l)), both decreasing in l (softmax.md, Theorem S2). */
/* The values [*l_lo, *l_hi] of F the kernel's log of its sum may give, for the sum's bounds [s_lo, s_hi]. */
static void er_log_ends(const er_softmax_plan *pl, int64_t n, double s_lo, double s_hi, double *l_lo, double *l_hi) {
    const er_fmt_info *F = pl->F;
    /* flushed partial sums lose less than the least normal each (Theorem S6) */
    if (pl->flush && s_lo > 0)
        s_lo = er__round_double(F, er__dn(s_lo - er__mul_up((double)(n - 1), F->min_normal)), ER_ROUND_DOWN,
                                ER_OVERFLOW_IEEE);
    /* the exact logs lie in [log(s_lo), log(s_hi)]; the computed one within Ulog ulps of them (Lemma U1) */
    double la = s_lo > 0 ? er__log_dir(s_lo, 0) : -INFINITY;
    double lb = s_hi != INFINITY ? er__log_dir(s_hi, 1) : INFINITY;
    er__approx_ends(F, pl->Ulog, la, lb, l_lo, l_hi);
}

/* log_softmax's set of one element x in F (er_log_sets): fl(fl(x - m) - l) and fl(x - fl(m + l)) at both ends of
 * the kernel's log l in [l_lo, l_hi]. */
static void er_log_set_one(const er_softmax_plan *pl, double x, double m, double l_lo, double l_hi, er_cval *c) {
    const er_fmt_info *F = pl->F;
    memset(c, 0, sizeof *c);
    if (x == -INFINITY) { c->lo = INFINITY; c->hi = -INFINITY; c->ninf = 1; return; }
    double d = er__round_sum(F, x, -m, ER_ROUND_NEAREST);
    double y1 = er__round_sum(F, d, -l_hi, ER_ROUND_NEAREST), y2 = er__round_sum(F, d, -l_lo, ER_ROUND_NEAREST);
    double z1 = er__round_sum(F, x, -er__round_sum(F, m, l_hi, ER_ROUND_NEAREST), ER_ROUND_NEAREST);
    double z2 = er__round_sum(F, x, -er__round_sum(F, m, l_lo, ER_ROUND_NEAREST), ER_ROUND_NEAREST);
    double lo = y1 < z1 ? y1 : z1, hi = y2 > z2 ? y2 : z2;
    if (pl->flush) er_flush_join(F, &lo, &hi);
    er__cval_from_interval(c, lo, hi, 0, F);
}

/* er_log_set_one for F = fp32 (no flushing) over a run, m and the log's ends floats, in a loop that vectorises: the
 * same float operations (er__round_sum's of two floats), the ends into lo and hi; ok where x is a finite float and
 * both ends finite (er__cval_from_interval then keeps them as they are). */
ER_ALWAYS_INLINE void er_log_sets_f32_body(int64_t n, const double *restrict x, float m, float ll, float lh,
                                           double *restrict lo, double *restrict hi, uint8_t *restrict ok) {
    float mh = m + lh, ml = m + ll;
    for (int64_t i = 0; i < n; i++) {
        double xd = x[i];
        int64_t in = fabs(xd) <= FLT_MAX;
        float xf = (float)(in ? xd : 0.0), d = xf - m;
        double y1 = (double)(d - lh), y2 = (double)(d - ll), z1 = (double)(xf - mh), z2 = (double)(xf - ml);
        double l = y1 < z1 ? y1 : z1, h = y2 > z2 ? y2 : z2;
        lo[i] = l;
        hi[i] = h;
        ok[i] = (uint8_t)(in & ((double)xf == xd) & (fabs(l) <= FLT_MAX) & (fabs(h) <= FLT_MAX));
    }
}
#define ER_LOG_SETS_ARGS                                                                                              \
    int64_t n, const double *restrict x, float m, float ll, float lh, double *restrict lo, double *restrict hi,       \
        uint8_t *restrict ok
ER_SIMD_BUILDS(er_log_sets_f32_run, (ER_LOG_SETS_ARGS), (n, x, m, ll, lh, lo, hi, ok), er_log_sets_f32_body)
#define ER_LOG_RUN 256 /* elements a pass of er_log_sets_f32_run */

/* The computed log-sum-exp m + l, before any rounding of the sum, and l (in [l_lo, l_hi]) join pl->lse. */
static void er_lse_join(const er_softmax_plan *pl, double m, double l_lo, double l_hi) {
    if (!pl->lse) return;
    double e[4] = { er__dn(m + l_lo), er__up(m + l_hi), l_lo, l_hi };
    for (int k = 0; k < 4; k += 2) {
        if (!(e[k] >= pl->lse[k])) pl->lse[k] = e[k];
        if (!(e[k + 1] <= pl->lse[k + 1])) pl->lse[k + 1] = e[k + 1];
    }
}

static void er_log_sets(const er_softmax_plan *pl, const double *x, int64_t n, double m, double s_lo, double s_hi,
                        er_cval *cv) {
    const er_fmt_info *F = pl->F;
    double l_lo, l_hi;
    er_log_ends(pl, n, s_lo, s_hi, &l_lo, &l_hi);
    er_lse_join(pl, m, l_lo, l_hi);
    int64_t i0 = pl->only ? *pl->only : 0, i1 = pl->only ? *pl->only + 1 : n;
    /* fp32 without flushing, m and the log's ends floats: runs of elements in the loop below that vectorises, its
     * elements of finite float x and ends within F's range written here, the others by er_log_set_one */
    int run = F->id == ER_FP32 && !pl->flush && !pl->only && !pl->scalar && er__is_float(m) && fabs(m) <= FLT_MAX &&
              er__is_float(l_lo) && er__is_float(l_hi) && fabs(l_lo) <= FLT_MAX && fabs(l_hi) <= FLT_MAX;
    for (int64_t a = i0; a < i1; a += ER_LOG_RUN) {
        int64_t k = i1 - a < ER_LOG_RUN ? i1 - a : ER_LOG_RUN;
        double lo[ER_LOG_RUN], hi[ER_LOG_RUN];
        uint8_t ok[ER_LOG_RUN];
        if (run) er_log_sets_f32_run(pl->simd, k, x + a, (float)m, (float)l_lo, (float)l_hi, lo, hi, ok);
        for (int64_t q = 0; q < k; q++) {
            if (run && ok[q]) {
                memset(&cv[a + q], 0, sizeof cv[a + q]);
                cv[a + q].lo = lo[q];
                cv[a + q].hi = hi[q];
            } else {
                er_log_set_one(pl, x[a + q], m, l_lo, l_hi, &cv[a + q]);
            }
        }
    }
}

/* The sums to nearest of n terms [sl, sh] widened once to bounds of their exact sums (Lemma D4). */
static void er_sums_widen(int64_t n, double *sl, double *sh) {
    if ((double)n > 0x1p49) { *sl = 0; *sh = INFINITY; }
    else {
        *sl = er__dn(*sl * er__dn(1.0 - 2.0 * (double)n * 0x1p-53));
        *sh = er__up(*sh * er__up(1.0 + 4.0 * (double)n * 0x1p-53));
    }
}

/* log_softmax: the bounds [*s_lo, *s_hi] (values of F) of the kernel's sum in any order (bd) of terms whose exact sum
 * lies in [sl, sh]. */
static void er_log_sum_bounds(const er_fmt_info *F, const er_anyorder_bound *bd, double sl, double sh, double *s_lo,
                              double *s_hi) {
    double one_minus = er__dn(1.0 - bd->c1), one_plus = er__up(1.0 + bd->c1);
    *s_hi = er__round_double(F, er__up(sh * one_plus), ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
    *s_lo = er__round_double(F, er__dn(sl * (one_minus > 0 ? one_minus : 0.0)), ER_ROUND_UP, ER_OVERFLOW_IEEE);
    if (er__mul_up(bd->g, sh) >= bd->thr) *s_hi = INFINITY;
}

/* The bounds of the online sum (Theorem S3): s_hat within [*lo, *hi] for every block partition, with exp within
 * U (or the fast bound) ulps for each exp and each rescale factor. */
static void er_online_sum(const er_softmax_plan *pl, const double *x, int64_t n, double m, const er_exps *ex,
                          mpfr_t lo, mpfr_t hi) {
    const er_fmt_info *F = pl->F;
    double xmin = m;
    for (int64_t j = 0; j < n; j++) if (x[j] != -INFINITY && x[j] < xmin) xmin = x[j];
    double R = er__next_up(m - xmin), u = ldexp(1.0, -F->p), u2 = ldexp(1.0, 1 - F->p);
    double Umax = pl->exp_fast ? 2.0 + floor(er__mul_up(1.1730001, er__mul_up(R, 1.0 + u))) : pl->U;
    mpfr_t t, e, f, g;
    mpfr_inits2(1200, t, (mpfr_ptr)0);
    mpfr_inits2(64, e, f, g, (mpfr_ptr)0);
    mpfr_set_zero(lo, 1);
    mpfr_set_zero(hi, 1);
    if (ex) {
        /* the exact exps enclosed in double (Theorem D1), summed with outward bounds */
        double a = 0, b = 0;
        for (int64_t j = 0; j < n; j++) { a = er__dn(a + ex->lo[j]); b = er__up(b + ex->hi[j]); }
        mpfr_set_d(lo, a, MPFR_RNDD);
        mpfr_set_d(hi, b, MPFR_RNDU);
    }
    for (int64_t j = 0; j < n && !ex; j++) {
        if (x[j] == -INFINITY) continue;
        mpfr_set_d(t, x[j], MPFR_RNDN);
        mpfr_sub_d(t, t, m, MPFR_RNDN); /* exact at 1200 bits */
        mpfr_exp(e, t, MPFR_RNDD);
        mpfr_add(lo, lo, e, MPFR_RNDD);
        mpfr_exp(e, t, MPFR_RNDU);
        mpfr_add(hi, hi, e, MPFR_RNDU);
    }
    /* per term: (1 +- u)^(3n) (1 +- 2u Umax) (1 +- 2u Ur)^n exp(+-u R) [exp(+-2.35 u R) for the fast bound] */
    double Ur = pl->exp_fast ? 2.0 : pl->U;
    double rexp = pl->exp_fast ? er__mul_up(er__mul_up(2.3460002, u), er__mul_up(R, 1.0 + u)) : 0.0;
    rexp = er__add_up(rexp, er__mul_up(u, R));
    mpfr_set_d(f, u, MPFR_RNDN);
    mpfr_add_ui(f, f, 1, MPFR_RNDU);
    mpfr_pow_ui(f, f, (unsigned long)(3 * n), MPFR_RNDU);
    mpfr_set_d(g, er__mul_up(u2, Ur), MPFR_RNDU);
    mpfr_add_ui(g, g, 1, MPFR_RNDU);
    mpfr_pow_ui(g, g, (unsigned long)n, MPFR_RNDU);
    mpfr_mul(f, f, g, MPFR_RNDU);
    mpfr_set_d(g, er__mul_up(u2, Umax), MPFR_RNDU);
    mpfr_add_ui(g, g, 1, MPFR_RNDU);
    mpfr_mul(f, f, g, MPFR_RNDU);
    mpfr_set_d(g, rexp, MPFR_RNDU);
    mpfr_exp(g, g, MPFR_RNDU);
    mpfr_mul(f, f, g, MPFR_RNDU);            /* f >= the largest factor */
    mpfr_mul(hi, hi, f, MPFR_RNDU);
    mpfr_ui_sub(g, 2, f, MPFR_RNDD);         /* 2 - f <= the smallest factor (f - 1 >= 1 - the smallest) */
    if (mpfr_sgn(g) < 0) mpfr_set_zero(g, 1);
    mpfr_mul(lo, lo, g, MPFR_RNDD);
    /* subnormal exps and products: at most Umax + 1 units of the least subnormal each, for 2n of them */
    double z = er__mul_up(er__mul_up(2.0 * (double)n, Umax + 1.0), F->min_sub);
    mpfr_sub_d(lo, lo, z, MPFR_RNDD);
    if (mpfr_sgn(lo) < 0) mpfr_set_zero(lo, 1);
    mpfr_add_d(hi, hi, z, MPFR_RNDU);
    mpfr_clears(t, e, f, g, (mpfr_ptr)0);
}

/* Each e_j's bounds into elo[j], ehi[j] (row x, maximum m subtracted) and their exact sums added into sl and sh. */
static void er_softmax_exps(const er_softmax_plan *pl, const double *x, int64_t n, double m, double *elo, double *ehi,
                            mpfr_t sl, mpfr_t sh) {
    const er_fmt_info *F = pl->F;
    mpfr_t t, z, zl, zh;
    mpfr_inits2(64, t, z, (mpfr_ptr)0);
    mpfr_inits2(128, zl, zh, (mpfr_ptr)0);
    double c2 = pl->exp2_triton ? er__log2e(F) : 0;
    /* e_j = exp(d_j) within U ulps (Lemma U1), never below 0, and 0 where a subnormal result may be flushed (every
     * exp: CUDA's expf and ex2.approx flush them, measured on the H200); math=triton: 2^fl(d_j fl(log2 e)) instead */
    for (int64_t j = 0; j < n; j++) {
        double dj = x[j] == -INFINITY ? -INFINITY : er__round_sum(F, x[j], -m, ER_ROUND_NEAREST);
        if (dj == -INFINITY) { elo[j] = ehi[j] = 0; continue; }
        mpfr_set_d(t, pl->exp2_triton ? er__round_prod(F, dj, c2, 0, ER_ROUND_NEAREST) : dj, MPFR_RNDN);
        /* one exp to nearest at 64 bits; the exact exp lies strictly between its two neighbours */
        if (pl->exp2_triton) mpfr_exp2(z, t, MPFR_RNDN);
        else mpfr_exp(z, t, MPFR_RNDN);
        mpfr_nextbelow(z);
        mpfr_set(zl, z, MPFR_RNDN); /* exact: 64 bits into 128 */
        mpfr_nextabove(z);
        mpfr_nextabove(z);
        mpfr_set(zh, z, MPFR_RNDN);
        double Uj =
            pl->exp_fast ? 2.0 + floor(er__mul_up(1.1730001, fabs(dj))) : pl->U; /* __expf: 2 + floor(1.173 |d|) */
        er__approx_ends(F, Uj, mpfr_get_d(zl, MPFR_RNDD), mpfr_get_d(zh, MPFR_RNDU), &elo[j], &ehi[j]);
        if (!(elo[j] >= F->min_normal)) elo[j] = 0; /* never below 0; a subnormal result may be flushed */
        mpfr_add_d(sl, sl, elo[j], MPFR_RNDN);
        mpfr_add_d(sh, sh, ehi[j], MPFR_RNDN);
    }
    mpfr_clears(t, z, zl, zh, (mpfr_ptr)0);
}

/* The sets of a row for the maximum m subtracted (m = 0: left out). */
static er_status er_softmax_sets(const er_softmax_plan *pl, const double *x, int64_t n, double m, er_cval *cv) {
    const er_fmt_info *F = pl->F;
    double *elo = malloc(sizeof(double) * (size_t)n), *ehi = malloc(sizeof(double) * (size_t)n);
    if (!elo || !ehi) {
        free(elo);
        free(ehi);
        return er__fail(ER_ERR_NOMEM, "cannot allocate a softmax row of %lld", (long long)n);
    }
    mpfr_t sl, sh, a, b;
    mpfr_inits2(128, a, b, (mpfr_ptr)0);
    mpfr_inits2(1400, sl, sh, (mpfr_ptr)0); /* values of F from 2^-1074 to 2^2: every sum of them is exact */
    mpfr_set_zero(sl, 1);
    mpfr_set_zero(sh, 1);
    er_softmax_exps(pl, x, n, m, elo, ehi, sl, sh);
    er_anyorder_bound bd;
    er_status st = er__anyorder_bound_terms_depth(&bd, F, n, pl->depth, 0);
    /* s may overflow F only if its terms' sum can reach the threshold: then y = e/inf = 0 is possible */
    int sum_may_overflow = er__mul_up(bd.g, mpfr_get_d(sh, MPFR_RNDU)) >= bd.thr;
    double u = ldexp(1.0, -F->p);
    if (pl->log && st == ER_OK) {
        /* s in [RU_F(L (1 - c1)), RD_F(H (1 + c1))]; l = log(s) within Ulog ulps; y = fl(d_i - l) or fl(x_i - fl(m +
         * l)), both decreasing in l (softmax.md, Theorem S2) */
        double one_minus = nextafter(1.0 - bd.c1, 0.0);
        mpfr_set_d(b, bd.c1, MPFR_RNDN);
        mpfr_add_ui(b, b, 1, MPFR_RNDU);
        mpfr_mul(a, sh, b, MPFR_RNDU);
        double s_hi = er__round_mpfr(F, a, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
        mpfr_mul_d(a, sl, one_minus > 0 ? one_minus : 0.0, MPFR_RNDD);
        double s_lo = er__round_mpfr(F, a, ER_ROUND_UP, ER_OVERFLOW_IEEE);
        if (sum_may_overflow) s_hi = INFINITY;
        if (pl->online) { /* the online sum's bounds instead (Theorem S3) */
            er_online_sum(pl, x, n, m, NULL, a, b);
            s_lo = er__round_mpfr(F, a, ER_ROUND_UP, ER_OVERFLOW_IEEE);
            s_hi = er__round_mpfr(F, b, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
        }
        er_log_sets(pl, x, n, m, s_lo, s_hi, cv);
    }
    mpfr_t olo, ohi;
    mpfr_inits2(64, olo, ohi, (mpfr_ptr)0);
    if (pl->online && !pl->log) er_online_sum(pl, x, n, m, NULL, olo, ohi);
    double one_minus = nextafter(1.0 - bd.c1, 0.0); /* below the exact 1 - c1 whatever the rounding */
    for (int64_t i = 0; i < n && st == ER_OK && !pl->log; i++) {
        memset(&cv[i], 0, sizeof cv[i]);
        /* bounds of the exact quotient e_i / s over the allowed e and s: a (lowest) and b (highest) */
        int zlo = elo[i] == 0, inf_hi = 0;
        if (!zlo) {
            if (pl->online) mpfr_set(a, ohi, MPFR_RNDU);
            else {
                /* lowest: e_i low, the others high: e_lo / ((e_lo + R_hi)(1 + c1)) */
                mpfr_sub_d(a, sh, ehi[i], MPFR_RNDU);  /* R_hi */
                mpfr_add_d(a, a, elo[i], MPFR_RNDU);
                mpfr_set_d(b, bd.c1, MPFR_RNDN);
                mpfr_add_ui(b, b, 1, MPFR_RNDU);
                mpfr_mul(a, a, b, MPFR_RNDU);          /* (1 + c1), c1 already an upper bound */
            }
            mpfr_d_div(a, elo[i], a, MPFR_RNDD);
        }
        if (ehi[i] == 0) {
            mpfr_set_zero(b, 1);
        } else if (pl->online ? mpfr_zero_p(olo) : one_minus <= 0) {
            inf_hi = 1;
        } else {
            if (pl->online) mpfr_set(b, olo, MPFR_RNDD);
            else {
                /* highest: e_i high, the others low: e_hi / ((e_hi + R_lo)(1 - c1)) */
                mpfr_sub_d(b, sl, elo[i], MPFR_RNDD);  /* R_lo */
                mpfr_add_d(b, b, ehi[i], MPFR_RNDD);
                mpfr_mul_d(b, b, one_minus, MPFR_RNDD);
                if (pl->flush) mpfr_sub_d(b, b, er__mul_up((double)(n - 1), F->min_normal), MPFR_RNDD); /* Theorem S6 */
            }
            if (mpfr_sgn(b) <= 0) inf_hi = 1;
            else mpfr_d_div(b, ehi[i], b, MPFR_RNDU);
        }
        double ql, qh;
        if (pl->Udiv > 0) {
            /* e / s within Udiv ulps of the quotient in [a, b] (Lemma U1); 0 / s is 0 */
            er__approx_ends(F, pl->Udiv, zlo ? 0.0 : mpfr_get_d(a, MPFR_RNDD),
                            inf_hi ? INFINITY : mpfr_get_d(b, MPFR_RNDU), &ql, &qh);
            if (!(ql > 0)) ql = 0;
            if (ehi[i] == 0) qh = 0;
        } else {
            /* fl(e / s) is monotone in the quotient; fl(e * fl(1/s)) may be u beyond it */
            if (zlo) ql = 0;
            else {
                if (pl->div != 1) mpfr_mul_d(a, a, 1.0 - u, MPFR_RNDD);
                ql = er__round_mpfr(F, a, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            }
            if (inf_hi) qh = INFINITY;
            else {
                if (pl->div != 1) mpfr_mul_d(b, b, 1.0 + u, MPFR_RNDU);
                qh = ehi[i] == 0 ? 0.0 : er__round_mpfr(F, b, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            }
        }
        if (sum_may_overflow) ql = 0;
        if (pl->flush || pl->exp2_triton) er_flush_join(F, &ql, &qh); /* a subnormal quotient may be flushed */
        cv[i].lo = ql;
        cv[i].hi = qh;
        if (qh == INFINITY) { cv[i].hi = F->max; cv[i].pinf = 1; }
    }
    mpfr_clears(olo, ohi, (mpfr_ptr)0);
    mpfr_clears(a, b, sl, sh, (mpfr_ptr)0);
    free(elo);
    free(ehi);
    return st;
}

/* The main case's quotient ends (Lemma D5): the sums to nearest [sl, sh], the any-order factors one_minus, one_plus
 * and the chains' factors klo, khi. */
typedef struct er_sm_quot { double sl, sh, one_minus, one_plus, klo, khi; } er_sm_quot;

/* One element's set in F from its exp's ends [a, b] (er_softmax_sets_dbl's main case): the lowest quotient
 * a / ((sh - b + a)(1 + c1)) and the highest b / ((sl - a + b)(1 - c1)), each times its factor and rounded to
 * nearest (0 where the exp's end is 0; the upper end unbounded where the denominator is not positive). */
static void er_sm_quot_one(const er_fmt_info *F, double a, double b, const er_sm_quot *q, int sum_may_overflow,
                           er_cval *c) {
    double ql = 0, qh = 0;
    int inf_hi = 0;
    if (a != 0)
        ql = er__round_double(F, (a / (((q->sh - b) + a) * q->one_plus)) * q->klo, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    if (b != 0) {
        double den = ((q->sl - a) + b) * q->one_minus;
        if (!(den > 0)) inf_hi = 1;
        else qh = er__round_double(F, (b / den) * q->khi, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    }
    if (sum_may_overflow) ql = 0;
    memset(c, 0, sizeof *c);
    c->lo = ql;
    c->hi = inf_hi ? F->max : qh;
    c->pinf = inf_hi || qh == INFINITY;
    if (qh == INFINITY) c->hi = F->max;
}

/* er_sm_quot_one for F = fp32 over a row, in a loop that vectorises: ql, qh its ends where fix is 0; fix = 1 where
 * a quotient is beyond FLT_MAX (or not a number) or a denominator not positive (er_sm_quot_one decides those). */
ER_ALWAYS_INLINE void er_sm_quot_f32_body(int64_t n, const double *restrict elo, const double *restrict ehi,
                                          er_sm_quot q, double *restrict ql, double *restrict qh,
                                          uint8_t *restrict fix) {
    for (int64_t i = 0; i < n; i++) {
        double a = elo[i], b = ehi[i];
        double lv = (a / (((q.sh - b) + a) * q.one_plus)) * q.klo, den = ((q.sl - a) + b) * q.one_minus,
               hv = (b / den) * q.khi;
        int64_t lin = fabs(lv) <= FLT_MAX, hin = (den > 0) & (fabs(hv) <= FLT_MAX);
        double l = (double)(float)(lin ? lv : 0.0), h = (double)(float)(hin ? hv : 0.0);
        ql[i] = a != 0 ? l : 0.0;
        qh[i] = b != 0 ? h : 0.0;
        fix[i] = (uint8_t)(((a != 0) & !lin) | ((b != 0) & !hin));
    }
}
#define ER_SM_QUOT_ARGS                                                                                               \
    int64_t n, const double *restrict elo, const double *restrict ehi, er_sm_quot q, double *restrict ql,             \
        double *restrict qh, uint8_t *restrict fix
ER_SIMD_BUILDS(er_sm_quot_f32_run, (ER_SM_QUOT_ARGS), (n, elo, ehi, q, ql, qh, fix), er_sm_quot_f32_body)

/* The sets of a row in double arithmetic, for F of at most 24 bits (docs/algorithms/double-bounds.md): the
 * formulas of er_softmax_sets, each MPFR bound replaced by a double bound on the same side (ival.h). ex: the
 * exps of x_j - m, reused where d_j = x_j - m exactly. */
static er_status er_softmax_sets_dbl(const er_softmax_plan *pl, const double *x, int64_t n, double m, const er_exps *ex,
                                     er_cval *cv) {
    const er_fmt_info *F = pl->F;
    /* elo, ehi, then 3 n more doubles of scratch (the vectorised passes' flags and quotients) */
    double *elo = er__work_get(pl->work, ER_SMW_SETS, sizeof(double) * (size_t)n * 5), *ehi = elo ? elo + n : NULL;
    if (!elo) return er__fail(ER_ERR_NOMEM, "cannot allocate a softmax row of %lld", (long long)n);
    double *scr = elo + 2 * n;
    /* e_j's bounds from the enclosure [zl, zh] of exp(d_j) (Lemma U1); the sums to nearest, widened once per row
     * (Lemma D4). In fp32 with an integer U, a vectorised pass gives most elements' ends (the values below); the
     * others (slow) take the loop's own code. */
    double sl = 0, sh = 0;
    uint8_t *slow = (uint8_t *)scr;
    int run = F->id == ER_FP32 && !pl->exp_fast && !pl->scalar && pl->U >= 0 && pl->U <= 0x1p30 &&
              (double)(int64_t)pl->U == pl->U && (double)(float)m == m && !(pl->log && ex->sums);
    if (run) er__exp_ends_f32_run(pl->simd, n, x, m, pl->U, elo, ehi, slow);
    int sums = !(pl->log && ex->sums); /* log_softmax reads the sums alone */
    for (int64_t j = 0; j < n && sums; j++) {
        if (run && !slow[j]) continue;
        double dj = x[j] == -INFINITY ? -INFINITY : er__round_sum(F, x[j], -m, ER_ROUND_NEAREST), zl, zh;
        if (dj == -INFINITY) { elo[j] = ehi[j] = 0; continue; }
        if (ex->dlo) { zl = ex->dlo[j]; zh = ex->dhi[j]; }
        else if (dj == ex->t[j] && ex->e[j] == 0) { zl = ex->lo[j]; zh = ex->hi[j]; }
        else er__exp_bounds(dj, &zl, &zh);
        er__exp_ends(pl, dj, zl, zh, &elo[j], &ehi[j]);
    }
    if (sums) er__sums32(pl->simd, elo, ehi, n, &sl, &sh);
    if (pl->log && ex->sums) {
        sl = ex->esl;
        sh = ex->esh;
    }
    er_sums_widen(n, &sl, &sh);
    er_anyorder_bound bd;
    er_status st = er__anyorder_bound_terms_depth(&bd, F, n, pl->depth, 0);
    int sum_may_overflow = er__mul_up(bd.g, sh) >= bd.thr;
    double u = ldexp(1.0, -F->p);
    double one_minus = er__dn(1.0 - bd.c1), one_plus = er__up(1.0 + bd.c1);
    if (pl->log && st == ER_OK) {
        double s_lo, s_hi;
        er_log_sum_bounds(F, &bd, sl, sh, &s_lo, &s_hi);
        if (pl->online) { /* the online sum's bounds instead (Theorem S3) */
            mpfr_t a, b;
            mpfr_inits2(64, a, b, (mpfr_ptr)0);
            er_online_sum(pl, x, n, m, ex, a, b);
            s_lo = er__round_mpfr(F, a, ER_ROUND_UP, ER_OVERFLOW_IEEE);
            s_hi = er__round_mpfr(F, b, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
            mpfr_clears(a, b, (mpfr_ptr)0);
        }
        er_log_sets(pl, x, n, m, s_lo, s_hi, cv);
    }
    double olo = 0, ohi = INFINITY;
    if (pl->online && !pl->log && st == ER_OK) {
        mpfr_t a, b;
        mpfr_inits2(64, a, b, (mpfr_ptr)0);
        er_online_sum(pl, x, n, m, ex, a, b);
        olo = mpfr_get_d(a, MPFR_RNDD);
        ohi = mpfr_get_d(b, MPFR_RNDU);
        mpfr_clears(a, b, (mpfr_ptr)0);
    }
    if (!pl->online && !(pl->Udiv > 0) && !pl->flush && !pl->exp2_triton && !pl->log && st == ER_OK) {
        /* the main case in round-to-nearest operations, each chain's errors covered by one factor (Lemma D5):
         * K_lo <= (1 - u)(1 - 2^-50), K_hi >= (1 + u)(1 + 2^-50), without the (1 -+ u) for div=divide */
        double klo = pl->div != 1 ? er__dn(er__dn(1.0 - u) * er__dn(1.0 - 0x1p-50)) : er__dn(1.0 - 0x1p-50);
        double khi = pl->div != 1 ? er__up(er__up(1.0 + u) * er__up(1.0 + 0x1p-50)) : er__up(1.0 + 0x1p-50);
        const er_sm_quot qc = {sl, sh, one_minus, one_plus, klo, khi};
        double *ql = scr + n, *qh = scr + 2 * n;
        uint8_t *fix = (uint8_t *)scr;
        int loop = F->id == ER_FP32 && !pl->scalar;
        if (loop) er_sm_quot_f32_run(pl->simd, n, elo, ehi, qc, ql, qh, fix);
        for (int64_t i = 0; i < n; i++) {
            if (loop && !fix[i]) {
                memset(&cv[i], 0, sizeof cv[i]);
                cv[i].lo = sum_may_overflow ? 0.0 : ql[i];
                cv[i].hi = qh[i];
            } else {
                er_sm_quot_one(F, elo[i], ehi[i], &qc, sum_may_overflow, &cv[i]);
            }
        }
    }
    for (int64_t i = 0;
         i < n && st == ER_OK && !pl->log && (pl->online || pl->Udiv > 0 || pl->flush || pl->exp2_triton); i++) {
        memset(&cv[i], 0, sizeof cv[i]);
        /* the quotient e_i / s: a at its lowest (e_i low, the others high), b at its highest */
        int zlo = elo[i] == 0, inf_hi = 0;
        double a = 0, b = 0;
        if (!zlo) {
            double den = pl->online ? ohi : er__up(er__up(er__up(sh - ehi[i]) + elo[i]) * one_plus);
            a = er__dn(elo[i] / den);
        }
        if (ehi[i] != 0) {
            double den = pl->online ? olo : er__dn(er__dn(er__dn(sl - elo[i]) + ehi[i]) * one_minus);
            if (pl->flush) den = er__dn(den - er__mul_up((double)(n - 1), F->min_normal)); /* Theorem S6 */
            if (!(den > 0)) inf_hi = 1;
            else b = er__up(ehi[i] / den);
        }
        double ql, qh;
        if (pl->Udiv > 0) {
            /* e / s within Udiv ulps of the quotient in [a, b] (Lemma U1); 0 / s is 0 */
            er__approx_ends(F, pl->Udiv, zlo ? 0.0 : a, inf_hi ? INFINITY : b, &ql, &qh);
            if (!(ql > 0)) ql = 0;
            if (ehi[i] == 0) qh = 0;
        } else {
            /* fl(e / s) is monotone in the quotient; fl(e * fl(1/s)) may be u beyond it */
            if (zlo) ql = 0;
            else ql = er__round_double(F, pl->div != 1 ? er__dn(a * (1.0 - u)) : a, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            if (inf_hi) qh = INFINITY;
            else
                qh = ehi[i] == 0 ? 0.0
                                 : er__round_double(F, pl->div != 1 ? er__up(b * (1.0 + u)) : b, ER_ROUND_NEAREST,
                                                    ER_OVERFLOW_IEEE);
        }
        if (sum_may_overflow) ql = 0;
        if (pl->flush || pl->exp2_triton) er_flush_join(F, &ql, &qh); /* a subnormal quotient may be flushed */
        cv[i].lo = ql;
        cv[i].hi = qh;
        if (qh == INFINITY) { cv[i].hi = F->max; cv[i].pinf = 1; }
    }
    return st;
}

/* log(sl) rounded down and log(sh) rounded up, to doubles. */
static void er_log_outward(double sl, double sh, double *lsl, double *lsh) {
    *lsl = er__log_dir(sl, 0);
    *lsh = er__log_dir(sh, 1);
}

#define ER_EXACT_RUN 256 /* elements a pass of er_exact_quot_run */

/* er_exact_row_dbl's softmax (not log) for an output of fp32, fp16 or bf16, in a loop that vectorises: the
 * quotients' ends ql = lo_i rl, qh = hi_i rh rounded to O by er_vec_rn_fmt (er__round_double's values within O's
 * range); an end rounded beyond the range is rounded again by er__round_double, with the output's overflow rule.
 * done[i] = 1 where both ends round to one value. Returns how many are left. */
ER_ALWAYS_INLINE void er_exact_quot_body(int64_t n, const double *restrict lo, const double *restrict hi, double rl,
                                         double rh, er_vec_fmt f, int narrow, double *restrict exact,
                                         double *restrict rounded, double *restrict oh, uint8_t *restrict bad) {
    for (int64_t i = 0; i < n; i++) {
        double ql = lo[i] * rl, qh = hi[i] * rh, a = er_vec_rn_fmt(ql, f, narrow), b = er_vec_rn_fmt(qh, f, narrow);
        exact[i] = 0.5 * ql + 0.5 * qh;
        rounded[i] = a;
        oh[i] = b;
        bad[i] = (uint8_t)!(er_vec_rn_ok(ql, a, f, narrow) & er_vec_rn_ok(qh, b, f, narrow));
    }
}
#define ER_EXACT_QUOT_ARGS                                                                                            \
    int64_t n, const double *restrict lo, const double *restrict hi, double rl, double rh, er_vec_fmt f,              \
        double *restrict exact, double *restrict rounded, double *restrict oh, uint8_t *restrict bad
#define ER_EXACT_QUOT_CALLS                                                                                           \
    if (f.narrow) er_exact_quot_body(n, lo, hi, rl, rh, f, 1, exact, rounded, oh, bad);                              \
    else er_exact_quot_body(n, lo, hi, rl, rh, f, 0, exact, rounded, oh, bad)
ER_ALWAYS_INLINE void er_exact_quot_any(ER_EXACT_QUOT_ARGS) { ER_EXACT_QUOT_CALLS; }
ER_SIMD_BUILDS(er_exact_quot, (ER_EXACT_QUOT_ARGS), (n, lo, hi, rl, rh, f, exact, rounded, oh, bad), er_exact_quot_any)
static int64_t er_exact_quot_run(int simd, int64_t n, const double *lo, const double *hi, double rl, double rh,
                                 er_vec_fmt f, const er_softmax_plan *pl, double *exact, double *rounded, char *done) {
    int64_t todo = 0;
    double oh[ER_EXACT_RUN];
    uint8_t bad[ER_EXACT_RUN];
    for (int64_t i0 = 0; i0 < n; i0 += ER_EXACT_RUN) {
        int64_t k = n - i0 < ER_EXACT_RUN ? n - i0 : ER_EXACT_RUN;
        er_exact_quot(simd, k, lo + i0, hi + i0, rl, rh, f, exact + i0, rounded + i0, oh, bad);
        for (int64_t q = 0; q < k; q++) {
            int64_t i = i0 + q;
            double b = oh[q];
            if (bad[q]) {
                rounded[i] = er__round_double(pl->O, lo[i] * rl, ER_ROUND_NEAREST, pl->ov_out);
                b = er__round_double(pl->O, hi[i] * rh, ER_ROUND_NEAREST, pl->ov_out);
            }
            done[i] = rounded[i] == b;
            todo += !done[i];
        }
    }
    return todo;
}

/* Bounds r[0] <= 1 / sh and r[1] >= 1 / sl with a margin 2^-51 for a product's rounding: lo_i r[0] is below
 * lo_i / S_hi once rounded, and hi_i r[1] above hi_i / S_lo (a product in the subnormal range is off by at most
 * 2^-1074, far below any rounding boundary of a format of at most 24 bits). */
static void er_recip_ends(double sl, double sh, double r[2]) {
    r[0] = er__dn(er__dn(1.0 / sh) * (1.0 - 0x1p-51));
    r[1] = er__up(er__up(1.0 / sl) * (1.0 + 0x1p-51));
}

/* exp(t + e) as h + l within 2^-64.9 of itself, |l| <= 2^-52 h, for -690 <= t <= 0 and |e| <= 2^-53 |t| (Lemma S7):
 * Lemma D8's pair times 1 + e. */
static void er_exp_dd_shift(double t, double e, double *h, double *l) {
    er__exp_dd(t, h, l);
    if (e == 0) return;
    double c = *l + *h * e, s = *h + c; /* Fast2Sum: |c| < 2^-40 h */
    *l = c - (s - *h);
    *h = s;
}

/* Lemma S7 (softmax.md): the elements er_exact_row_dbl left open (done[i] = 0, rounded[i] the lower end's rounding),
 * for softmax (not log) and rows of at most 2^26: each exp(x_j - m) by Lemma D8 shifted by TwoSum's error, the sum
 * bounded in fixed point, and for an open element whose ends round to neighbours r1 < r2 of O, the side of their
 * midpoint mu that e_i / S lies on, from the sign of e_i - mu S (Lemma X4's test). Those decided get done[i] = 1,
 * their rounding and their quotient to about 2^-100 in exact[i]; returns how many are left. sl, sh: the double
 * sum's bounds er_exact_row_dbl took. */
static int64_t er_exact_row_dd(const er_softmax_plan *pl, int64_t n, const er_exps *ex, double sl, double sh,
                               double *exact, double *rounded, char *done, int64_t todo) {
    if (pl->log || pl->no_dd || n > (INT64_C(1) << 26)) return todo;
    __int128 SL = 0, SU = 0;
    for (int64_t j = 0; j < n; j++) {
        __int128 L = 0, U = 1; /* exp(x_j - m) < 2^-995 below -690 (and 0 at -inf) */
        if (ex->t[j] >= -690.0) {
            double h, l;
            er_exp_dd_shift(ex->t[j], ex->e[j], &h, &l);
            er__dd_fx_term(h, l, &L, &U);
        }
        SL += L;
        SU += U;
    }
    double s[2][2]; /* S below and above */
    er__dd_fx_pair(SL, 0, &s[0][0], &s[0][1]);
    er__dd_fx_pair(SU, 1, &s[1][0], &s[1][1]);
    double r[2]; /* 1/S's bounds, er_exact_row_dbl's */
    er_recip_ends(sl, sh, r);
    int64_t decided = 0;
    for (int64_t i = 0; i < n && todo > 0; i++) {
        if (done[i] || !(ex->t[i] >= -690.0)) continue;
        double r1 = rounded[i], r2 = er__round_double(pl->O, ex->hi[i] * r[1], ER_ROUND_NEAREST, pl->ov_out);
        double mu = 0.5 * r1 + 0.5 * r2; /* exact: both at most 24 bits, at least 2^-1000 apart from the subnormals */
        if (!(r1 >= 0 && r1 < r2 && r2 <= 1) || mu == r1 || mu == r2 ||
            er__round_double(pl->O, mu, ER_ROUND_DOWN, pl->ov_out) != r1 ||
            er__round_double(pl->O, mu, ER_ROUND_UP, pl->ov_out) != r2)
            continue; /* not neighbours of O */
        double h, l;
        er_exp_dd_shift(ex->t[i], ex->e[i], &h, &l);
        /* e_i / S > mu iff e_i - mu S > 0: e_i's lower end against S's upper, and the other way */
        int above = er__dd_sign(h, er__dn(l - h * 0x1p-64), mu, 0.0, s[1][0], s[1][1]) > 0;
        int below = er__dd_sign(h, er__up(l + h * 0x1p-64), mu, 0.0, s[0][0], s[0][1]) < 0;
        if (above || below) {
            /* the quotient to about 2^-100 from S's lower pair, for the report's exact value */
            double q0 = h / s[0][0], p = q0 * s[0][0], pe = fma(q0, s[0][0], -p);
            exact[i] = q0 + (((h - p) - pe) + (l - q0 * s[0][1])) / s[0][0];
            rounded[i] = above ? r2 : r1;
            done[i] = 1;
            todo--;
            decided++;
        }
    }
    if (pl->dd_decided) *pl->dd_decided += decided;
    return todo;
}

/* The exact softmax from the exps enclosed in double: each element whose enclosure rounds to one value of O is
 * decided here (with exact[i] the enclosure's midpoint); the others are marked in done = 0 for er_exact_row_dd and
 * er_exact_row. Returns how many are left; *psl, *psh: the bounds of the sum of the exps it took. */
static int64_t er_exact_row_dbl(const er_softmax_plan *pl, const double *x, int64_t n, const er_exps *ex,
                                double *exact, double *rounded, char *done, double *psl, double *psh) {
    double sl = 0, sh = 0;
    if (n < (INT64_C(1) << 36)) { /* every exp at most 1 (1 + 2^-49): sums exact to 2^-90 per term */
        er_fxsum fs = {0, 0};
        for (int64_t j = 0; j < n; j++) er__fxsum_add(&fs, ex->lo[j], ex->hi[j]);
        sl = er__fxsum_lo(&fs);
        sh = er__fxsum_hi(&fs);
    } else {
        for (int64_t j = 0; j < n; j++) { sl = er__dn(sl + ex->lo[j]); sh = er__up(sh + ex->hi[j]); }
    }
    *psl = sl;
    *psh = sh;
    double lsl = 0, lsh = 0;
    if (pl->log) er_log_outward(sl, sh, &lsl, &lsh);
    double r[2]; /* 1/S's bounds */
    er_recip_ends(sl, sh, r);
    double rl = r[0], rh = r[1];
    int64_t todo = 0;
    er_format o = pl->O->id;
    if (!pl->log && !pl->scalar && (o == ER_FP32 || o == ER_FP16 || o == ER_BF16))
        return er_exact_quot_run(pl->simd, n, ex->lo, ex->hi, rl, rh, er_vec_fmt_of(pl->O), pl, exact, rounded, done);
    for (int64_t i = 0; i < n; i++) {
        double ql, qh;
        if (pl->log) {
            if (x[i] == -INFINITY) { exact[i] = rounded[i] = -INFINITY; done[i] = 1; continue; }
            double t = ex->t[i], tl = ex->e[i] == 0 ? t : er__dn(t), th = ex->e[i] == 0 ? t : er__up(t);
            ql = er__dn(tl - lsh);
            qh = er__up(th - lsl);
        } else {
            ql = ex->lo[i] * rl;
            qh = ex->hi[i] * rh;
        }
        double ol = er__round_double(pl->O, ql, ER_ROUND_NEAREST, pl->ov_out),
               oh = er__round_double(pl->O, qh, ER_ROUND_NEAREST, pl->ov_out);
        exact[i] = 0.5 * ql + 0.5 * qh;
        rounded[i] = ol;
        done[i] = ol == oh;
        todo += !done[i];
    }
    return todo;
}

/* The sets for the maximum m subtracted (m = 0: left out): in double for narrow formats, else MPFR. */
static er_status er_sets(const er_softmax_plan *pl, int dbl, const double *x, int64_t n, double m, er_exps *ex,
                         er_cval *cv) {
    if (!dbl) return er_softmax_sets(pl, x, n, m, cv);
    if (ex != pl->pre) er__exps_fill(ex, x, n, m, pl->simd);
    /* math=triton's exps are 2^fl(d fl(log2 e)): the MPFR sets (the double ones enclose exp(d)) */
    return pl->exp2_triton ? er_softmax_sets(pl, x, n, m, cv) : er_softmax_sets_dbl(pl, x, n, m, ex, cv);
}

er_status er__softmax_row(const er_softmax_plan *pl, const double *x, int64_t n, er_cval *cv, double *exact,
                          double *rounded) {
    if (n == 0) return ER_OK;
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        if (isnan(x[j]) || x[j] == INFINITY) { er_all_nan(cv, exact, rounded, n); return ER_OK; }
        if (x[j] > m) m = x[j];
    }
    if (m == -INFINITY) { er_all_nan(cv, exact, rounded, n); return ER_OK; } /* a fully masked row: -inf - -inf */
    /* formats of at most 24 bits: double bounds (29 bits to spare) decide nearly every element */
    int dbl = pl->F->p <= 24 && pl->O->p <= 24;
    if (dbl) er__exp_init();
    /* the row's arrays from the caller's scratch, else from scratch of its own, freed on return */
    er_work own = { { 0 }, { 0 } };
    er_softmax_plan lp;
    if (!pl->work) {
        lp = *pl;
        lp.work = &own;
        pl = &lp;
    }
    er_work *w = pl->work;
    er_exps ex = {0};
    size_t nd = sizeof(double) * (size_t)n;
    char *done = er__work_get(w, ER_SMW_DONE, (size_t)n);
    if (done) memset(done, 0, (size_t)n);
    er_cval *c0 = pl->max_optional && m != 0 ? er__work_get(w, ER_SMW_C0, sizeof *c0 * (size_t)n) : NULL;
    if (dbl) {
        ex.lo = er__work_get(w, ER_SMW_LO, nd);
        ex.hi = er__work_get(w, ER_SMW_HI, nd);
        ex.t = er__work_get(w, ER_SMW_T, nd);
        ex.e = er__work_get(w, ER_SMW_E, nd);
    }
    er_status st = ER_OK;
    if (!done || (pl->max_optional && m != 0 && !c0) || (dbl && (!ex.lo || !ex.hi || !ex.t || !ex.e)))
        st = er__fail(ER_ERR_NOMEM, "cannot allocate a softmax row of %lld", (long long)n);
    if (st == ER_OK && c0) {
        /* max=optional: the sets with the maximum left out join (Theorem S4); where exp(x) may overflow or every
         * exp(x) underflow, a kernel without the maximum may give NaN, and nothing is claimed */
        const er_fmt_info *F = pl->F;
        int wild = !(m < log(F->max) - 1.0 && m > log(F->min_normal) + 1.0);
        if (!wild) st = er_sets(pl, dbl, x, n, 0.0, &ex, c0);
        for (int64_t i = 0; i < n && st == ER_OK; i++) {
            if (wild) er__cval_from_interval(&c0[i], -INFINITY, INFINITY, 1, F);
        }
    }
    /* last: ex keeps the exps of x_j - m (the caller's, where it gave them for the sets alone) */
    if (st == ER_OK) st = er_sets(pl, dbl, x, n, m, pl->pre && pl->sets_only ? (er_exps *)pl->pre : &ex, cv);
    for (int64_t i = 0; c0 && i < n && st == ER_OK; i++) {
        if (c0[i].lo < cv[i].lo) cv[i].lo = c0[i].lo;
        if (c0[i].hi > cv[i].hi) cv[i].hi = c0[i].hi;
        cv[i].pinf |= c0[i].pinf;
        cv[i].ninf |= c0[i].ninf;
        cv[i].nan |= c0[i].nan;
        cv[i].nan_req &= c0[i].nan_req;
    }
    if (st == ER_OK && !pl->sets_only) {
        double sl = 0, sh = 0;
        int64_t todo = dbl ? er_exact_row_dbl(pl, x, n, &ex, exact, rounded, done, &sl, &sh) : n;
        if (todo > 0 && dbl) todo = er_exact_row_dd(pl, n, &ex, sl, sh, exact, rounded, done, todo);
        if (todo > 0) st = er_exact_row(pl, x, n, m, exact, rounded, done, todo);
    }
    if (w == &own) er__work_free(&own);
    return st;
}

er_status er__log_softmax_log_ends(const er_softmax_plan *pl, int64_t n, double esl, double esh, double *l_lo,
                                   double *l_hi) {
    double sl = esl, sh = esh, s_lo, s_hi;
    er_sums_widen(n, &sl, &sh);
    er_anyorder_bound bd;
    ER_RETURN_IF_ERROR(er__anyorder_bound_terms_depth(&bd, pl->F, n, pl->depth, 0));
    er_log_sum_bounds(pl->F, &bd, sl, sh, &s_lo, &s_hi);
    er_log_ends(pl, n, s_lo, s_hi, l_lo, l_hi);
    return ER_OK;
}

er_status er__log_softmax_one_of_sums(const er_softmax_plan *pl, int64_t n, double m, double esl, double esh,
                                      double x, er_cval *c) {
    double l_lo, l_hi;
    ER_RETURN_IF_ERROR(er__log_softmax_log_ends(pl, n, esl, esh, &l_lo, &l_hi));
    er_lse_join(pl, m, l_lo, l_hi);
    er_log_set_one(pl, x, m, l_lo, l_hi, c);
    return ER_OK;
}

int er__log_softmax_dev_row(const er_softmax_plan *pl, const er_anyorder_bound *bd, int64_t n, const double s[4],
                            double c[4]) {
    double sl = s[0], sh = s[1], s_lo, s_hi;
    er_sums_widen(n, &sl, &sh);
    er_log_sum_bounds(pl->F, bd, sl, sh, &s_lo, &s_hi);
    er_log_ends(pl, n, s_lo, s_hi, &c[0], &c[1]);
    er_log_outward(s[2], s[3], &c[2], &c[3]);
    return isfinite(c[0]) && isfinite(c[1]) && isfinite(c[2]) && isfinite(c[3]);
}
