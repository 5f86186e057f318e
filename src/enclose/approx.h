/* approx.h: the values an approximate function within U ulps may return (docs/algorithms/ulp-slack.md). */
#ifndef ER_APPROX_H
#define ER_APPROX_H

#include <float.h>
#include "core/internal.h"
#include "format/format.h"
#include "enclose/ival.h"

/* [*lo, *hi]: values of F covering every value of F that lies within U ulps of f(v), for every argument v whose
 * exact f(v) is in [a, b] (a <= b, bounds of the exact values; -inf and +inf allowed). Both readings of "within U
 * ulps" are covered: U ulps of F at the exact value, and U ulps of the correctly rounded value (CUDA's accuracy
 * table); the ulp is the spacing of F upward from |x|'s power of two, so the slack at a power of two is the larger
 * one (Lemma U1). An end beyond F's range is an infinity. */
ER_INTERNAL void er__approx_ends_general(const er_fmt_info *F, double U, double a, double b, double *lo, double *hi);
static inline void er__approx_ends(const er_fmt_info *F, double U, double a, double b, double *lo, double *hi) {
    /* The common case inline: [a, b] positive inside one binade [2^(e-1), 2^e) of normals, and so are RN(a) and
     * RN(b) (RN is monotone and 2^(e-1) is a value of F): no power of two lies inside, ulp is one spacing s, and the
     * ends are min(a, RN(a)) - U s and max(b, RN(b)) + U s. */
    if (a >= 2.0 * F->min_normal && b <= F->max && a >= DBL_MIN) {
        /* a and b are normal doubles: their binades from the exponent bits (frexp's exponent less one) */
        uint64_t ea = er__bits(a) >> 52, eb = er__bits(b) >> 52;
        if (ea == eb && (int64_t)ea >= F->p) {
            double top = er__from_bits((ea + 1) << 52); /* 2^e */
            double ca = er__round_double(F, a, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            double cb = er__round_double(F, b, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            if (cb < top) {
                /* the spacing 2^(e - p): a normal double, as the exponent field ea + 1 - p is at least 1 */
                double sp = er__from_bits((uint64_t)((int64_t)ea + 1 - F->p) << 52), m = ca < a ? ca : a,
                       M = cb > b ? cb : b, us = U * sp; /* exact: a power of two times U, far from both ends */
                if (F->p <= 26 && U >= 0 && U <= 0x1p30 && (double)(int64_t)U == U && us <= 0.125 * m) {
                    /* U an integer: m - U s and M + U s exact in double, and directly rounded inward (Lemma U2) */
                    *lo = er__round_double(F, m - us, ER_ROUND_UP, ER_OVERFLOW_IEEE);
                    *hi = er__round_double(F, M + us, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
                    return;
                }
                double s = er__mul_up(U, sp);
                *lo = er__round_double(F, er__dn(m - s), ER_ROUND_UP, ER_OVERFLOW_IEEE);
                *hi = er__round_double(F, er__up(M + s), ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
                return;
            }
        }
    }
    er__approx_ends_general(F, U, a, b, lo, hi); /* every other case, by Lemma U1's minimum */
}

#endif
