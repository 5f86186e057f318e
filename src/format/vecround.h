/* vecround.h: rounding a double into fp32, fp16 or bf16 to nearest-even in loops that vectorise (no call, no
 * branch), for the batch passes of the ops and the engine's tally of a run of elements. */
#ifndef ER_VECROUND_H
#define ER_VECROUND_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "format/format.h"

/* A value v rounded to nearest-even into an output format O, without a call or a branch: for fp32 (narrow 0) its
 * conversion to float, *ok where |v| <= FLT_MAX; for fp16 or bf16 (narrow 1) its double's last `drop` bits (53 - p
 * of O) rounded off where |v| >= minn (O's least normal), and else (v + big) - big with big = 1.5 2^52 q, q O's least
 * subnormal (big's ulp is q, and v + big stays in big's binade: the sum rounds v to a multiple of q, ties to an even
 * multiple, and the difference is exact; it is +0 for a zero, so v's sign goes back on: a negative v that rounds to
 * zero gives -0, as a rounding to nearest does): *ok where the result is at most maxv (O's largest value). NaN and
 * infinities are not ok. */
ER_ALWAYS_INLINE double er_vec_rn(double v, int narrow, int drop, uint64_t half, uint64_t mask, double minn,
                                  double big, double maxv, int *ok) {
    if (!narrow) {
        int in = fabs(v) <= FLT_MAX;
        *ok &= in;
        return (double)(float)(in ? v : 0.0); /* (GCC vectorises the conversion of a value known in range) */
    }
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    u = (u + half + ((u >> drop) & 1)) & mask;
    double r, sub = copysign((v + big) - big, v);
    memcpy(&r, &u, sizeof r);
    r = fabs(v) >= minn ? r : sub;
    *ok &= fabs(r) <= maxv;
    return r;
}

/* er_vec_rn's parameters for a format of fp32, fp16 or bf16. */
typedef struct er_vec_fmt { int narrow, drop; uint64_t half, mask; double minn, big, maxv; } er_vec_fmt;
static inline er_vec_fmt er_vec_fmt_of(const er_fmt_info *f) {
    int narrow = f->id != ER_FP32, drop = 53 - f->p;
    return (er_vec_fmt){narrow, drop, narrow ? (UINT64_C(1) << (drop - 1)) - 1 : 0,
                        narrow ? ~((UINT64_C(1) << drop) - 1) : 0, f->min_normal, 0x1.8p52 * f->min_sub, f->max};
}
/* er_vec_rn's value and its *ok for v and that value r, with narrow a constant and f a copy in a local: the
 * epilogue pass's loops, which GCC 12 did not vectorise with er_vec_rn's flag passed by address and and-ed in, nor
 * with a select on a narrow known only when the loop runs. */
ER_ALWAYS_INLINE double er_vec_rn_fmt(double v, er_vec_fmt f, int narrow) {
    if (!narrow) return (double)(float)(fabs(v) <= FLT_MAX ? v : 0.0);
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    u = (u + f.half + ((u >> f.drop) & 1)) & f.mask;
    double r, sub = copysign((v + f.big) - f.big, v);
    memcpy(&r, &u, sizeof r);
    return fabs(v) >= f.minn ? r : sub;
}
ER_ALWAYS_INLINE int64_t er_vec_rn_ok(double v, double r, er_vec_fmt f, int narrow) {
    return narrow ? fabs(r) <= f.maxv : fabs(v) <= FLT_MAX;
}

#endif
