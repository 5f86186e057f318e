/* anyorder.h: the constants of the any-order bound (docs/algorithms/any-order.md, Theorem 1 and 2). */
#ifndef ER_ANYORDER_H
#define ER_ANYORDER_H

#include <stdint.h> /* before mpfr.h */
#include <mpfr.h>
#include "core/internal.h"
#include "format/format.h"
#include "exact/accum.h"

typedef struct er_anyorder_bound {
    double c1;  /* (1+u)^m - 1 rounded up, m = n (n-1 when every product is exact in F): multiplies sum |p_k| */
    double c2;  /* n (1+u)^(n-1) eta/2 rounded up (0 when every product is exact in F): underflow */
    double g;   /* (1+u)^n rounded up: bounds any partial sum by g * sum of same-signed |p_k| + c2 */
    double thr; /* a lower bound of F's overflow threshold under rounding to nearest */
    int faithful; /* a rounding may saturate at the largest finite value (Theorem 6) */
} er_anyorder_bound;

/* The constants for n products of formats a and b accumulated in F; faithful: every operation may land on
 * either neighbour (Theorem 6: u becomes 2u, eta/2 becomes eta, the overflow threshold the largest finite). */
ER_INTERNAL er_status er__anyorder_bound(er_anyorder_bound *b, const er_fmt_info *fa, const er_fmt_info *fb,
                                         const er_fmt_info *F, int64_t n, int faithful);
/* The same for n terms that are already values of F (partial sums combined in any order: Lemma 3). */
ER_INTERNAL er_status er__anyorder_bound_terms(er_anyorder_bound *b, const er_fmt_info *F, int64_t n, int faithful);
/* Both for a tree in which every term passes through at most depth additions (Theorem 7; depth 0: any tree);
 * ER_ERR_STANDARD when no such tree adds n terms (n > 2^depth). */
ER_INTERNAL er_status er__anyorder_bound_depth(er_anyorder_bound *b, const er_fmt_info *fa, const er_fmt_info *fb,
                                               const er_fmt_info *F, int64_t n, int64_t depth, int faithful);
ER_INTERNAL er_status er__anyorder_bound_terms_depth(er_anyorder_bound *b, const er_fmt_info *F, int64_t n,
                                                     int64_t depth, int faithful);

/* A set of values of a format: a finite interval [lo, hi] (empty when lo > hi) and the specials. */
typedef struct er_cval {
    double lo, hi;
    uint8_t pinf, ninf; /* +inf, -inf possible */
    uint8_t nan;        /* NaN possible */
    uint8_t nan_req;    /* NaN certain */
} er_cval;

/* MPFR scratch for the edges of sets (one per thread of work). */
typedef struct er_edge_scratch { mpfr_t s, b, x; } er_edge_scratch;
ER_INTERNAL void er__edge_scratch_init(er_edge_scratch *w);
ER_INTERNAL void er__edge_scratch_clear(er_edge_scratch *w);

/* The any-order set in F of the reduction summarised by sm (Theorems 2, 3 and 5, special terms). */
ER_INTERNAL void er__anyorder_cval(er_cval *c, const er_anyorder_bound *bd, const er_fmt_info *F, const er_dotsum *sm,
                                   er_edge_scratch *w);
/* Every value of F, NaN and both infinities: the set of an element about which nothing is claimed. */
ER_INTERNAL void er__cval_anything(er_cval *c, const er_fmt_info *F);
/* gamma(k) = k u / (1 - k u) >= (1 + u)^k - 1 (Higham, Lemma 3.1), rounded up (u = 2^-p, F's unit roundoff); +inf
 * when k u >= 1/2. */
ER_INTERNAL double er__gamma(const er_fmt_info *F, double k);
/* An extended interval [lo, hi] (endpoints may be infinite) and a NaN flag, as a set of values of F. */
ER_INTERNAL void er__cval_from_interval(er_cval *c, double lo, double hi, int nan, const er_fmt_info *F);
/* A set given as an interval [lo, hi] of F without NaN (er__cval_from_interval(lo, hi, 0)), or, with lo NaN, every
 * value of F and NaN (er__cval_from_interval(-inf, +inf, 1)): the row ops' sets in arrays (layernorm.h's er_ln_out). */
ER_INTERNAL void er__cval_from_ival(er_cval *c, double lo, double hi, const er_fmt_info *F);

#endif
