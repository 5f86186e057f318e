/* softmax_bwd.h: the sets of softmax's backward pass, dx = y (dy - sum_j dy_j y_j) along a row
 * (docs/algorithms/softmax-backward.md). */
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
} er_sbwd_plan;

/* The n elements of a row (dy[j], y[j] decoded): each dx_j's set in F (cv), its exact value to double (ex) and
 * correctly rounded into O (rd). */
ER_INTERNAL er_status er__sbwd_row(const er_sbwd_plan *pl, const double *dy, const double *y, int64_t n, er_cval *cv,
                                   double *ex, double *rd);

#endif
