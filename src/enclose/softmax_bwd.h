/* softmax_bwd.h: the sets of softmax's and log_softmax's backward passes along a row, dx = y (dy - sum_j dy_j y_j)
 * and dx = dy - exp(y) sum_j dy_j (docs/algorithms/softmax-backward.md). */
#ifndef ER_ENCLOSE_SOFTMAX_BWD_H
#define ER_ENCLOSE_SOFTMAX_BWD_H

#include "core/internal.h"
#include "format/format.h"
#include "enclose/anyorder.h" /* er_cval */
#include "core/pwin.h"
#include "core/lsbdd.h" /* ER_LSBWD_DEV_CONSTS; Lemma B5 */

/* A row's standard: the compute format F (holding dy's and y's values), their formats, the output format O and its
 * overflow rule, and the depth bound of the sum D (0: any tree). */
typedef struct er_sbwd_plan {
    const er_fmt_info *F, *Fdy, *Fy, *O;
    er_overflow ov;
    int64_t depth;
    double U;      /* log_softmax: exp's accuracy in ulps */
    int exp_fast;  /* log_softmax: exp within 2 + floor(1.173 |y|) ulps (__expf) */
    int products_compute; /* softmax: the products rounded in F only (products=compute), not first to the inputs'
                             format */
    int no_fast;   /* every row without the fast pass (the sets one element at a time, every exact result with MPFR):
                      the tests' comparison of the two */
    int64_t *mpfr_elems; /* where not NULL, the elements whose exact results MPFR computed are added here (the
                            tests' count of what the fast pass and Lemma B5 leave) */
} er_sbwd_plan;

/* The n elements of a row (dy[j], y[j] decoded): each dx_j's set in F as an interval [lo, hi] of F's values (lo NaN:
 * every value of F, NaN and the infinities, er__cval_from_ival's), its exact value to double (ex) and correctly
 * rounded into O (rd). */
ER_INTERNAL er_status er__sbwd_row(const er_sbwd_plan *pl, const double *dy, const double *y, int64_t n, double *lo,
                                   double *hi, double *ex, double *rd);

/* Lemma B3 on n elements: dx_i = y_i (dy_i - D) for D = Dh + Dl + r, |r| <= Derr, correctly rounded to double (ex)
 * and into O (fp32, fp16 or bf16; rd) where double-double decides them, ex[i] NaN elsewhere (er__sbwd_row's fast
 * pass). */
ER_INTERNAL void er__sbwd_exact_dd(int64_t n, const double *dy, const double *y, double Dh, double Dl, double Derr,
                                   const er_fmt_info *O, double *ex, double *rd);
/* The GPU path (docs/algorithms/softmax-backward.md, On the GPU): whether it takes rows of this plan (the fast pass's
 * forms and exact results), and the inputs' format the products may be rounded to first (er__sbwd_row's second sum;
 * NULL: none). */
ER_INTERNAL int er__sbwd_dev_takes(const er_sbwd_plan *pl);
ER_INTERNAL const er_fmt_info *er__sbwd_dev_rounds(const er_sbwd_plan *pl);
/* The GPU's rows: the any-order bounds of a row of n (bd; bd2, of the rounded products' sum where P, the inputs'
 * format the products may be rounded to, is not NULL), once (er__sbwd_dev_setup); then a row's constants c[0 .. 5)
 * from its windows of the products (w[0]) and of the rounded products (w[1], where P is not NULL): D~'s set's ends,
 * and the exact D as c[2] + c[3] + r with |r| <= c[4] (core/pwin.h); 0 where the host must take the row (a window
 * that does not decide the summary, a special row, no finite set). The same sets as er__sbwd_row's where it gives
 * them. */
typedef struct er_sbwd_dev { er_anyorder_bound bd, bd2; const er_fmt_info *P; } er_sbwd_dev;
ER_INTERNAL er_status er__sbwd_dev_setup(const er_sbwd_plan *pl, int64_t n, er_sbwd_dev *d);
ER_INTERNAL int er__sbwd_dev_row(const er_sbwd_plan *pl, const er_sbwd_dev *d, const er_pwin_row *w, int64_t n,
                                 double *c);

/* log_softmax's backward pass on the GPU: whether it takes rows of this plan (er__lsbwd_row's vectorised exp ends,
 * forms and exact results), the any-order bound of S's n terms (er__lsbwd_dev_setup, into d->bd; d->P NULL), and a
 * row's constants c[0 .. ER_LSBWD_DEV_CONSTS) from its window of dy (w[0]): S~'s set's ends, S's bounds in double
 * (er__lsbwd_row's, from S's summary), 1 where S = 0, and Lemma B5's low parts of |S| (er_lsbwd_sparts's s[1], s[2];
 * 0 where S = 0); 0 where the host must take the row. */
ER_INTERNAL int er__lsbwd_dev_takes(const er_sbwd_plan *pl);
ER_INTERNAL er_status er__lsbwd_dev_setup(const er_sbwd_plan *pl, int64_t n, er_sbwd_dev *d);
ER_INTERNAL int er__lsbwd_dev_row(const er_sbwd_plan *pl, const er_sbwd_dev *d, const er_pwin_row *w, int64_t n,
                                  double *c);

/* log_softmax's backward pass, dx = dy - exp(y) sum_j dy_j, from the saved log_softmax output y: as er__sbwd_row. A
 * row holding a NaN, an infinity in dy, +inf or a value above 2^10 in y (no log_softmax output) claims nothing. */
ER_INTERNAL er_status er__lsbwd_row(const er_sbwd_plan *pl, const double *dy, const double *y, int64_t n, double *lo,
                                    double *hi, double *ex, double *rd);

#endif
