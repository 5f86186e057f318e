/* anyorder.h: the constants of the any-order bound (docs/algorithms/any-order.md, Theorem 1 and 2). */
#ifndef ER_ANYORDER_H
#define ER_ANYORDER_H

#include "core/internal.h"

typedef struct er_anyorder_bound {
    double c1;  /* (1+u)^m - 1 rounded up, m = n (n-1 when every product is exact in F): multiplies sum |p_k| */
    double c2;  /* n (1+u)^(n-1) eta/2 rounded up (0 when every product is exact in F): underflow */
    double g;   /* (1+u)^n rounded up: bounds any partial sum by g * sum of same-signed |p_k| + c2 */
    double thr; /* a lower bound of F's overflow threshold under rounding to nearest */
} er_anyorder_bound;

/* The constants for n products of formats a and b accumulated in F. */
ER_INTERNAL er_status er__anyorder_bound(er_anyorder_bound *b, const er_fmt_info *fa, const er_fmt_info *fb,
                                         const er_fmt_info *F, int64_t n);
/* 1 when every product of a value of fa and a value of fb is a value of F (Lemma 3). */
ER_INTERNAL int er__products_exact(const er_fmt_info *fa, const er_fmt_info *fb, const er_fmt_info *F);

#endif
