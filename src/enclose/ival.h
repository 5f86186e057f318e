/* ival.h: bounds in double arithmetic (docs/algorithms/double-bounds.md).
 *
 * A double operation rounds to nearest, so the exact result lies between the double below and the double above
 * the rounded one: er__dn(a + b) <= a + b <= er__up(a + b), and likewise for -, * and /, whatever the operands'
 * magnitudes (gradual underflow and overflow included: the neighbour of an infinity is the largest finite
 * value). Each bound costs one operation and a bit step; it is one ulp of double looser than a directed
 * rounding, which is far below the ulps of the formats of at most 24 bits these bounds serve. */
#ifndef ER_IVAL_H
#define ER_IVAL_H

#include <math.h>
#include "core/internal.h"

/* The double just above / below a result rounded to nearest: an upper / lower bound of its exact value. */
static inline double er__up(double x) {
    uint64_t b = er__bits(x);
    if (x != x || b == UINT64_C(0x7ff0000000000000)) return x;            /* NaN, +inf */
    if ((b << 1) == 0) return 4.9406564584124654e-324;                   /* +-0 */
    return er__from_bits((int64_t)b >= 0 ? b + 1 : b - 1);
}
static inline double er__dn(double x) { return -er__up(-x); }

/* A value of F at or above (up) / at or below (down) the double v; fp32 by the hardware conversion. */
static inline double er__to_fmt_up(const er_fmt_info *F, double v) {
    if (F->id == ER_FP32) {
        float f = (float)v;
        if ((double)f < v) f = nextafterf(f, INFINITY);
        return f;
    }
    return er__round_double(F, v, ER_ROUND_UP, ER_OVERFLOW_IEEE);
}
static inline double er__to_fmt_dn(const er_fmt_info *F, double v) {
    if (F->id == ER_FP32) {
        float f = (float)v;
        if ((double)f > v) f = nextafterf(f, -INFINITY);
        return f;
    }
    return er__round_double(F, v, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
}
/* v rounded to nearest in O under the overflow rule ov (fp32 with IEEE overflow by the hardware conversion). */
static inline double er__to_fmt_near(const er_fmt_info *O, double v, er_overflow ov) {
    if (O->id == ER_FP32 && er__overflow_rule(O, ov) == ER_OVERFLOW_IEEE) return (float)v;
    return er__round_double(O, v, ER_ROUND_NEAREST, ov);
}

/* exp(t) lies in [*lo, *hi] (Theorem D1): for -745 <= t <= 709, hi <= lo (1 + 2^-44); below, [0, 2^-1074] (0 at
 * -inf); above, [2^1022, +inf]; NaN gives NaN. */
ER_INTERNAL void er__exp_bounds(double t, double *lo, double *hi);

/* Sums of n values in [0, 2]: exact sums of each term rounded down (lo) and up (hi) to a multiple of 2^-90,
 * returned as doubles below and above them (Lemma D2). n < 2^37. */
typedef struct er_fxsum { unsigned __int128 lo, hi; } er_fxsum;
static inline void er__fxsum_add(er_fxsum *s, double lo, double hi) {
    /* lo, hi in [0, 2]: m 2^e with m < 2^53 */
    uint64_t bl = er__bits(lo), bh = er__bits(hi);
    int el = (int)(bl >> 52), eh = (int)(bh >> 52);
    uint64_t ml = (bl & ((UINT64_C(1) << 52) - 1)) | ((uint64_t)(el != 0) << 52);
    uint64_t mh = (bh & ((UINT64_C(1) << 52) - 1)) | ((uint64_t)(eh != 0) << 52);
    int sl = (el ? el : 1) - 1075 + 90, sh = (eh ? eh : 1) - 1075 + 90; /* value 2^90 = m 2^s */
    if (sl >= 0) s->lo += (unsigned __int128)ml << sl;
    else if (sl > -64) s->lo += ml >> -sl;
    if (sh >= 0) s->hi += (unsigned __int128)mh << sh;
    else if (sh > -64) s->hi += (mh >> -sh) + ((mh & ((UINT64_C(1) << -sh) - 1)) != 0);
    else s->hi += mh != 0;
}
static inline double er__fxsum_lo(const er_fxsum *s) { return er__dn(ldexp(er__dn((double)s->lo), -90)); }
static inline double er__fxsum_hi(const er_fxsum *s) { return er__up(ldexp(er__up((double)s->hi), -90)); }

#endif
