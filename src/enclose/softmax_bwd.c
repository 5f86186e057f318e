/* softmax_bwd.c: the sets of softmax's backward pass (src/enclose/softmax_bwd.h; docs/algorithms/softmax-backward.md).
 *
 * A kernel computes D~, the sum of the products dy_j y_j in F in some order (each product rounded or fused into its
 * addition), then each dx_i in one of the forms of Lemma B2, each monotone in D~: the set of dx_i is within the least
 * and the greatest of the forms' values at the ends of D~'s any-order set (Theorem B1). The exact D is summed with
 * MPFR at a precision that holds it exactly, and dx_i's exact value from it. */
#include <limits.h>
#include <math.h>
#include <stdint.h> /* before mpfr.h: the intmax_t functions */
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include "enclose/softmax_bwd.h"
#include "enclose/approx.h"
#include "enclose/elementwise.h"

/* Every value of F and the specials: the set of a row whose inputs hold a NaN or an infinity, or whose forms meet
 * an overflow (no claim beyond "anything"). */
static void er_sbwd_anything(er_cval *c, const er_fmt_info *F) {
    memset(c, 0, sizeof *c);
    c->lo = -F->max;
    c->hi = F->max;
    c->nan = c->pinf = c->ninf = 1;
}

/* The forms of Lemma B2 at D~ = d, for dy and y (values of F), and with t the product dy y rounded to the inputs'
 * format (NaN: not rounded), the forms of Theorem B1's products=either: their least and greatest into *lo, *hi; 0
 * when one of them is not finite. */
static int er_sbwd_forms(const er_fmt_info *F, double dy, double y, double t, double d, int wide, double *lo,
                         double *hi) {
    const er_round N = ER_ROUND_NEAREST;
    double a = er__round_prod(F, dy, y, wide, N), b = er__round_prod(F, y, d, wide, N);
    double f[6] = {
        er__round_prod(F, y, er__round_sum(F, dy, -d, N), wide, N), /* y (dy - D) */
        er__round_sum(F, a, -b, N),                                 /* dy y - y D */
        er__round_fma(F, -y, d, a, wide, N),                        /* fma(-y, D, dy y) */
        er__round_fma(F, dy, y, -b, wide, N),                       /* fma(dy, y, -y D) */
        t == t ? er__round_sum(F, t, -b, N) : NAN,                  /* t - y D, t = RN_P(dy y) */
        t == t ? er__round_fma(F, -y, d, t, wide, N) : NAN,         /* fma(-y, D, t) */
    };
    for (int k = 0; k < (t == t ? 6 : 4); k++) {
        if (!isfinite(f[k])) return 0;
        if (f[k] < *lo) *lo = f[k];
        if (f[k] > *hi) *hi = f[k];
    }
    return 1;
}

/* D = sum_j dy_j y_j (y NULL: sum_j dy_j) exactly into D (initialised here; the caller clears it), and the row's
 * summary for the any-order set. */
static void er_sbwd_sum(const er_sbwd_plan *pl, const double *dy, const double *y, int64_t n, mpfr_t D, er_dotsum *sm) {
    long emax = LONG_MIN, lsb = LONG_MAX;
    double pos = 0, negs = 0;
    for (int64_t j = 0; j < n; j++) {
        double yj = y ? y[j] : 1.0, p = dy[j] * yj;
        if (dy[j] == 0 || yj == 0) continue;
        long ea = ilogb(dy[j]), eb = ilogb(yj), lb = y ? eb - (pl->Fy->p - 1) : 0;
        if (ea + eb + 2 > emax) emax = ea + eb + 2;
        if (ea - (pl->Fdy->p - 1) + lb < lsb) lsb = ea - (pl->Fdy->p - 1) + lb;
        /* sums of the positive products and of the negative ones' magnitudes, rounded up (|p| within 2^-53 of the
         * exact product, which may be below double's range: its bound is the least subnormal) */
        double m = er__next_up(fabs(p)) + 4.9406564584124654e-324;
        if ((dy[j] < 0) == (yj < 0)) pos = er__add_up(pos, m);
        else negs = er__add_up(negs, m);
    }
    int lg = 0;
    while ((INT64_C(1) << lg) <= n && lg < 62) lg++;
    mpfr_prec_t P = emax == LONG_MIN ? 2 : (mpfr_prec_t)(emax - lsb + lg + 2);
    mpfr_init2(D, P);
    mpfr_set_zero(D, 1);
    mpfr_t a, t;
    mpfr_inits2(128, a, t, (mpfr_ptr)0);
    for (int64_t j = 0; j < n; j++) {
        if (dy[j] == 0 || (y && y[j] == 0)) continue;
        mpfr_set_d(a, dy[j], MPFR_RNDN);
        mpfr_mul_d(t, a, y ? y[j] : 1.0, MPFR_RNDN); /* exact: 106 bits at most */
        mpfr_add(D, D, t, MPFR_RNDN);      /* exact: P holds every partial sum */
    }
    memset(sm, 0, sizeof *sm);
    sm->pos = pos;
    sm->negs = negs;
    if (mpfr_regular_p(D)) { /* terms are finite here (the callers' checks): D is a number */
        mpfr_t m64;
        mpfr_init2(m64, 64);
        sm->neg = mpfr_sgn(D) < 0;
        sm->sticky = mpfr_abs(m64, D, MPFR_RNDZ) != 0;
        sm->e = (int32_t)(mpfr_get_exp(m64) - 64);
        mpfr_mul_2si(m64, m64, -(long)sm->e, MPFR_RNDN); /* exact: an integer of 64 bits */
        sm->m = (uint64_t)mpfr_get_uj(m64, MPFR_RNDZ);
        mpfr_clear(m64);
    }
    mpfr_clears(a, t, (mpfr_ptr)0);
}

er_status er__sbwd_row(const er_sbwd_plan *pl, const double *dy, const double *y, int64_t n, er_cval *cv, double *ex,
                       double *rd) {
    const er_fmt_info *F = pl->F;
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(dy[j]) || !isfinite(y[j])) {
            for (int64_t i = 0; i < n; i++) {
                er_sbwd_anything(&cv[i], F);
                ex[i] = rd[i] = NAN;
            }
            return ER_OK;
        }
    er_anyorder_bound bd;
    ER_RETURN_IF_ERROR(er__anyorder_bound_depth(&bd, pl->Fdy, pl->Fy, F, n, pl->depth, 0));
    mpfr_t D, x;
    er_dotsum sm;
    er_sbwd_sum(pl, dy, y, n, D, &sm);
    er_edge_scratch w;
    er__edge_scratch_init(&w);
    er_cval dset;
    er__anyorder_cval(&dset, &bd, F, &sm, &w);
    int dfin = !dset.nan && !dset.nan_req && !dset.pinf && !dset.ninf && dset.lo <= dset.hi;
    int wide = F->p > 26;
    /* products=either: the products may first be rounded to the inputs' format P (where narrower than F), then
     * summed in any order in F (terms of F: Lemma 3 of any-order.md): the union with that sum's set */
    const er_fmt_info *P = pl->Fdy->p >= pl->Fy->p ? pl->Fdy : pl->Fy;
    double *t = !pl->products_compute && P->p < F->p ? malloc(sizeof(double) * (size_t)(n ? n : 1)) : NULL;
    if (t) {
        int fin2 = 1; /* a product beyond P's range: no claim (every value and the specials) */
        for (int64_t j = 0; j < n; j++) {
            t[j] = er__round_prod(P, dy[j], y[j], wide, ER_ROUND_NEAREST);
            fin2 = fin2 && isfinite(t[j]);
        }
        er_cval d2 = {0};
        if (fin2) {
            er_sbwd_plan pp = *pl;
            pp.Fdy = P;
            mpfr_t D2;
            er_dotsum sm2;
            er_anyorder_bound bd2;
            er_sbwd_sum(&pp, t, NULL, n, D2, &sm2);
            mpfr_clear(D2);
            er_status st = er__anyorder_bound_terms_depth(&bd2, F, n, pl->depth, 0);
            if (st == ER_OK) er__anyorder_cval(&d2, &bd2, F, &sm2, &w);
            fin2 = st == ER_OK && !d2.nan && !d2.nan_req && !d2.pinf && !d2.ninf && d2.lo <= d2.hi;
        }
        dfin = dfin && fin2;
        if (dfin) {
            dset.lo = fmin(dset.lo, d2.lo);
            dset.hi = fmax(dset.hi, d2.hi);
        }
    } else if (!pl->products_compute && P->p < F->p) {
        er__edge_scratch_clear(&w);
        mpfr_clear(D);
        return er__fail(ER_ERR_NOMEM, "cannot allocate a softmax_backward row of %lld", (long long)n);
    }
    er__edge_scratch_clear(&w);
    mpfr_init2(x, 2);
    for (int64_t i = 0; i < n; i++) {
        double lo = INFINITY, hi = -INFINITY, ti = t ? t[i] : NAN;
        if (dfin && er_sbwd_forms(F, dy[i], y[i], ti, dset.lo, wide, &lo, &hi) &&
            er_sbwd_forms(F, dy[i], y[i], ti, dset.hi, wide, &lo, &hi)) {
            memset(&cv[i], 0, sizeof cv[i]);
            cv[i].lo = lo;
            cv[i].hi = hi;
        } else {
            er_sbwd_anything(&cv[i], F);
        }
        /* the exact dx_i = y_i (dy_i - D), at a precision that holds it */
        long top = mpfr_zero_p(D) ? LONG_MIN : (long)mpfr_get_exp(D);
        long low = top == LONG_MIN ? LONG_MAX : top - (long)mpfr_get_prec(D);
        if (dy[i] != 0) {
            long e = ilogb(dy[i]) + 1;
            if (e > top) top = e;
            if (e - 1 - (pl->Fdy->p - 1) < low) low = e - 1 - (pl->Fdy->p - 1);
        }
        mpfr_prec_t pt = top == LONG_MIN ? 2 : (mpfr_prec_t)(top - low + 2);
        mpfr_set_prec(x, pt + 64);
        mpfr_set_d(x, dy[i], MPFR_RNDN);
        mpfr_sub(x, x, D, MPFR_RNDN); /* exact */
        mpfr_mul_d(x, x, y[i], MPFR_RNDN); /* exact: y has at most 53 significant bits */
        ex[i] = mpfr_get_d(x, MPFR_RNDN);
        rd[i] = er__round_mpfr(pl->O, x, ER_ROUND_NEAREST, pl->ov);
    }
    free(t);
    mpfr_clears(D, x, (mpfr_ptr)0);
    return ER_OK;
}

/* ---- log_softmax: dx_i = dy_i - exp(y_i) S, S = sum_j dy_j (Theorem B2) ---- */

/* The forms of Theorem B2 at e (an exp of y_i) and s (a sum): their least and greatest into *lo, *hi; 0 when one is
 * not finite. */
static int er_lsbwd_forms(const er_fmt_info *F, double dy, double e, double s, int wide, double *lo, double *hi) {
    const er_round N = ER_ROUND_NEAREST;
    double f[2] = {
        er__round_sum(F, dy, -er__round_prod(F, e, s, wide, N), N), /* dy - exp(y) S */
        er__round_fma(F, -e, s, dy, wide, N),                       /* fma(-exp(y), S, dy) */
    };
    for (int k = 0; k < 2; k++) {
        if (!isfinite(f[k])) return 0;
        if (f[k] < *lo) *lo = f[k];
        if (f[k] > *hi) *hi = f[k];
    }
    return 1;
}

/* dy - exp(y) S correctly rounded into O (rd) and to double (ex), S exact: Ziv's loop on an enclosure of the exact
 * value at doubling precisions (exp(y) for y != 0 is irrational, so the two ends round alike at some precision). */
static void er_lsbwd_exact(const er_sbwd_plan *pl, double dy, double y, mpfr_srcptr S, double *ex, double *rd) {
    if (mpfr_zero_p(S) || y == 0) {
        /* exp(0) = 1: x = dy - S, exact at a precision spanning both (S = 0: x = dy) */
        long top = mpfr_zero_p(S) ? LONG_MIN : (long)mpfr_get_exp(S);
        long low = top == LONG_MIN ? LONG_MAX : top - (long)mpfr_get_prec(S);
        if (dy != 0) {
            if (ilogb(dy) + 1 > top) top = ilogb(dy) + 1;
            if (ilogb(dy) - 52 < low) low = ilogb(dy) - 52;
        }
        mpfr_t x;
        mpfr_init2(x, top == LONG_MIN ? 64 : (mpfr_prec_t)(top - low + 66));
        mpfr_set_d(x, dy, MPFR_RNDN);
        mpfr_sub(x, x, S, MPFR_RNDN);
        *ex = mpfr_get_d(x, MPFR_RNDN);
        *rd = er__round_mpfr(pl->O, x, ER_ROUND_NEAREST, pl->ov);
        mpfr_clear(x);
        return;
    }
    /* first in double: libm's exp within 2^-40 (far beyond its error), S's directed roundings, each step outward;
     * where both ends round alike into O, that is the correct rounding, and the report's exact value is their
     * midpoint (within 2^-39 relative) */
    double e = exp(y), Sl = mpfr_get_d(S, MPFR_RNDD), Sh = mpfr_get_d(S, MPFR_RNDU);
    /* every factor and product normal: the relative bounds hold */
    if (e >= 0x1p-500 && e <= 0x1p500 && fabs(Sl) >= 0x1p-500 && fabs(Sh) <= 0x1p500 && (Sl > 0) == (Sh > 0)) {
        double el = e * (1 - 0x1p-40), eh = e * (1 + 0x1p-40);
        double c[4] = {el * Sl, el * Sh, eh * Sl, eh * Sh}, pl_ = c[0], ph = c[0];
        for (int k = 1; k < 4; k++) { pl_ = fmin(pl_, c[k]); ph = fmax(ph, c[k]); }
        double xl = nextafter(dy - nextafter(ph, INFINITY), -INFINITY),
               xh = nextafter(dy - nextafter(pl_, -INFINITY), INFINITY);
        double a = er__round_double(pl->O, xl, ER_ROUND_NEAREST, pl->ov),
               b = er__round_double(pl->O, xh, ER_ROUND_NEAREST, pl->ov);
        if (isfinite(xl) && isfinite(xh) && a == b && signbit(a) == signbit(b) && (xl > 0) == (xh > 0) && xl != 0) {
            *rd = a;
            *ex = 0.5 * xl + 0.5 * xh;
            return;
        }
    }
    for (mpfr_prec_t p = 128;; p *= 2) {
        mpfr_t el, eh, lo, hi, t;
        mpfr_inits2(p, el, eh, (mpfr_ptr)0);
        mpfr_inits2(p + mpfr_get_prec(S) + 1200, lo, hi, t, (mpfr_ptr)0);
        mpfr_set_d(t, y, MPFR_RNDN);
        mpfr_exp(el, t, MPFR_RNDD);
        mpfr_exp(eh, t, MPFR_RNDU);
        /* exp(y) S between el S and eh S (S's sign orders them); then dy minus it, exact at this precision */
        int pos = mpfr_sgn(S) > 0;
        mpfr_mul(lo, pos ? eh : el, S, MPFR_RNDN); /* exact: the precision holds both factors' bits */
        mpfr_mul(hi, pos ? el : eh, S, MPFR_RNDN);
        mpfr_set_d(t, dy, MPFR_RNDN);
        mpfr_sub(lo, t, lo, MPFR_RNDD);
        mpfr_sub(hi, t, hi, MPFR_RNDU);
        double a = er__round_mpfr(pl->O, lo, ER_ROUND_NEAREST, pl->ov),
               b = er__round_mpfr(pl->O, hi, ER_ROUND_NEAREST, pl->ov);
        double da = mpfr_get_d(lo, MPFR_RNDN), db = mpfr_get_d(hi, MPFR_RNDN);
        mpfr_clears(el, eh, lo, hi, t, (mpfr_ptr)0);
        if ((a == b && da == db && signbit(a) == signbit(b)) || p > 65536) {
            *rd = a;
            *ex = da;
            return;
        }
    }
}

er_status er__lsbwd_row(const er_sbwd_plan *pl, const double *dy, const double *y, int64_t n, er_cval *cv, double *ex,
                        double *rd) {
    const er_fmt_info *F = pl->F;
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(dy[j]) || !(y[j] <= 0x1p10) || isnan(y[j])) {
            for (int64_t i = 0; i < n; i++) {
                er_sbwd_anything(&cv[i], F);
                ex[i] = rd[i] = NAN;
            }
            return ER_OK;
        }
    er_anyorder_bound bd;
    ER_RETURN_IF_ERROR(er__anyorder_bound_terms_depth(&bd, F, n, pl->depth, 0));
    mpfr_t S;
    er_dotsum sm;
    er_sbwd_sum(pl, dy, NULL, n, S, &sm);
    er_edge_scratch w;
    er__edge_scratch_init(&w);
    er_cval sset;
    er__anyorder_cval(&sset, &bd, F, &sm, &w);
    er__edge_scratch_clear(&w);
    int sfin = !sset.nan && !sset.nan_req && !sset.pinf && !sset.ninf && sset.lo <= sset.hi;
    int wide = F->p > 26;
    for (int64_t i = 0; i < n; i++) {
        /* exp(y_i) within U ulps (__expf: 2 + floor(1.173 |y|)), never below 0, 0 where it may be flushed */
        double elo = 0, ehi = 0;
        if (y[i] != -INFINITY) {
            double dn, up, U = pl->exp_fast ? 2.0 + floor(er__mul_up(1.1730001, fabs(y[i]))) : pl->U;
            er__exact_fn(F, ER_FN_EXP, y[i], &dn, &up);
            er__approx_ends(F, U, dn, up, &elo, &ehi);
            if (!(elo >= F->min_normal)) elo = 0;
        }
        double lo = INFINITY, hi = -INFINITY;
        int ok = sfin && isfinite(ehi);
        for (int c = 0; c < 4 && ok; c++)
            ok = er_lsbwd_forms(F, dy[i], c & 1 ? ehi : elo, c & 2 ? sset.hi : sset.lo, wide, &lo, &hi);
        if (ok) {
            memset(&cv[i], 0, sizeof cv[i]);
            cv[i].lo = lo;
            cv[i].hi = hi;
        } else {
            er_sbwd_anything(&cv[i], F);
        }
        if (y[i] == -INFINITY) { /* exp(-inf) = 0: dx = dy */
            ex[i] = dy[i];
            rd[i] = er__round_double(pl->O, dy[i], ER_ROUND_NEAREST, pl->ov);
        } else {
            er_lsbwd_exact(pl, dy[i], y[i], S, &ex[i], &rd[i]);
        }
    }
    mpfr_clear(S);
    return ER_OK;
}
