/* softmax_bwd.h: the sets of softmax's and log_softmax's backward passes along a row, dx = y (dy - sum_j dy_j y_j)
 * and dx = dy - exp(y) sum_j dy_j (docs/algorithms/softmax-backward.md). */
#ifndef ER_ENCLOSE_SOFTMAX_BWD_H
#define ER_ENCLOSE_SOFTMAX_BWD_H

#include "core/internal.h"
#include "format/format.h"
#include "enclose/anyorder.h" /* er_cval */

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
} er_sbwd_plan;

/* The n elements of a row (dy[j], y[j] decoded): each dx_j's set in F as an interval [lo, hi] of F's values (lo NaN:
 * every value of F, NaN and the infinities, er__cval_from_ival's), its exact value to double (ex) and correctly
 * rounded into O (rd). */
ER_INTERNAL er_status er__sbwd_row(const er_sbwd_plan *pl, const double *dy, const double *y, int64_t n, double *lo,
                                   double *hi, double *ex, double *rd);

/* log_softmax's backward pass, dx = dy - exp(y) sum_j dy_j, from the saved log_softmax output y: as er__sbwd_row. A
 * row holding a NaN, an infinity in dy, +inf or a value above 2^10 in y (no log_softmax output) claims nothing. */
ER_INTERNAL er_status er__lsbwd_row(const er_sbwd_plan *pl, const double *dy, const double *y, int64_t n, double *lo,
                                    double *hi, double *ex, double *rd);

#endif
