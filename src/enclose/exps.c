/* exps.c: a row's exponentials enclosed in double (docs/algorithms/double-bounds.md): exp(x_j - m) and the
 * kernel's exp(d_j), d_j = fl(x_j - m), for softmax's and cross_entropy's sets and exact results (softmax.h). */
#include <math.h>
#include <stdint.h>
#include "format/format.h"
#include "enclose/approx.h"
#include "enclose/ival.h"
#include "enclose/softmax.h"

/* exp(t + e) from the bounds [lo, hi] of exp(t) (|e| <= 2^-30): exp(t + e) within exp(t) e^(+-|e|), which 1 - 2|e|
 * and 1 + 2|e| bound; for larger |e| (t <= -2^23, as |e| <= 2^-53 |t|) exp(x_j - m) < 2^-1074. */
static void er_exps_shift(double e, double *lo, double *hi) {
    if (e != 0 && fabs(e) <= 0x1p-30) {
        *lo = er__dn(*lo * er__dn(1.0 - 2.0 * fabs(e)));
        *hi = er__up(*hi * er__up(1.0 + 2.0 * fabs(e)));
        if (*lo < 0) *lo = 0;
    } else if (e != 0) {
        *lo = 0;
        *hi = 4.9406564584124654e-324;
    }
}

void er__exps_fill(er_exps *ex, const double *x, int64_t n, double m) {
    for (int64_t j = 0; j < n; j++) {
        if (x[j] == -INFINITY) { ex->lo[j] = ex->hi[j] = 0; ex->t[j] = -INFINITY; ex->e[j] = 0; continue; }
        double t = x[j] - m, bb = t - x[j], e = (x[j] - (t - bb)) + (-m - bb); /* TwoSum: t + e = x_j - m */
        double lo, hi;
        er__exp_bounds(t, &lo, &hi);
        er_exps_shift(e, &lo, &hi);
        ex->lo[j] = lo;
        ex->hi[j] = hi;
        ex->t[j] = t;
        ex->e[j] = e;
    }
}

void er__exps_fill_kernel(er_exps *ex, const er_softmax_plan *pl, const double *x, int64_t n, double m) {
    const er_fmt_info *F = pl->F;
    double sl = 0, sh = 0;
    for (int64_t j = 0; j < n; j++) {
        if (x[j] == -INFINITY) {
            ex->lo[j] = ex->hi[j] = ex->dlo[j] = ex->dhi[j] = ex->e[j] = 0;
            ex->t[j] = -INFINITY;
            continue;
        }
        double t = x[j] - m, bb = t - x[j], e = (x[j] - (t - bb)) + (-m - bb); /* TwoSum: t + e = x_j - m */
        double dj = er__round_sum(F, x[j], -m, ER_ROUND_NEAREST), dl, dh, lo, hi;
        ex->t[j] = t;
        ex->e[j] = e;
        if (dj == -INFINITY) {
            ex->dlo[j] = ex->dhi[j] = 0;
            er__exp_bounds(t, &lo, &hi);
            er_exps_shift(e, &lo, &hi);
        } else {
            er__exp_bounds(dj, &dl, &dh);
            ex->dlo[j] = dl;
            ex->dhi[j] = dh;
            double el, eh; /* the sets' sums, added as er_softmax_sets_dbl adds them */
            er__exp_ends(pl, dj, dl, dh, &el, &eh);
            sl += el;
            sh += eh;
            /* x_j - m = d_j + v* with v* = (t - d_j) + e; the double v below is within 2^-53 (|t - d_j| + |v|) of it
             * (two roundings), below 2^-60 where |v| <= 2^-18 */
            double v = (t - dj) + e;
            if (dj == t && e == 0) {
                lo = dl;
                hi = dh;
            } else if (fabs(v) <= 0x1p-18) {
                er__exp_shift(dl, dh, v, &lo, &hi);
            } else {
                er__exp_bounds(t, &lo, &hi);
                er_exps_shift(e, &lo, &hi);
            }
        }
        ex->lo[j] = lo;
        ex->hi[j] = hi;
    }
    ex->sums = 1;
    ex->esl = sl;
    ex->esh = sh;
}

void er__exps_fill_rounded(er_exps *ex, const er_fmt_info *F, const double *x, int64_t n, double m) {
    for (int64_t j = 0; j < n; j++) {
        double dj = x[j] == -INFINITY ? -INFINITY : er__round_sum(F, x[j], -m, ER_ROUND_NEAREST);
        if (dj == -INFINITY) ex->dlo[j] = ex->dhi[j] = 0;
        else if (dj == ex->t[j] && ex->e[j] == 0) { ex->dlo[j] = ex->lo[j]; ex->dhi[j] = ex->hi[j]; }
        else er__exp_bounds(dj, &ex->dlo[j], &ex->dhi[j]);
    }
}
