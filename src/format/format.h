/* format.h: the format descriptors, exact decoding and correctly rounded conversion (src/format/format.c, round.c). */
#ifndef ER_FORMAT_H
#define ER_FORMAT_H

#include "core/internal.h"

typedef struct er_fmt_info {
    er_format id;
    const char *name;
    int bits;        /* storage bits (8 for the MX formats: one element per byte) */
    int ebits, mbits;/* exponent and stored fraction bits */
    int bias;
    int p;           /* precision, implicit bit included */
    int emin, emax;  /* exponents of the smallest normal and the largest finite values */
    int has_inf;
    int e4m3fn;      /* no infinity; NaN only when exponent and fraction are all ones */
    double max, min_normal, min_sub;
    er_overflow ov_default;
    int vbits;       /* the pattern's bits (4 for fp4, 6 for fp6, else the storage bits) */
    int no_nan;      /* fp4, fp6: every pattern is a finite value */
    int e8m0;        /* the MX scale: unsigned powers of two 2^-127 .. 2^127, NaN 0xFF, no zero */
} er_fmt_info;

/* NULL for an invalid format. */
ER_INTERNAL const er_fmt_info *er__fmt(er_format f);
/* The pseudo-format of the constant 1 a reduction multiplies by: precision 0, so that x * 1 counts as exact in
 * an accumulator exactly when x's format fits in it (any-order.md, Lemma 3). Used only in the analysis. */
ER_INTERNAL const er_fmt_info *er__fmt_one(void);

/* er_format_ulp(O->id, y) for a finite y, from y's exponent field */
static inline double er__ulp(const er_fmt_info *O, double y) {
    double a = fabs(y);
    if (!(a >= O->min_normal)) return O->min_sub;
    uint64_t u;
    memcpy(&u, &a, 8);
    int64_t e = (int64_t)(u >> 52) - O->p + 1; /* 2^(e - p + 1): the biased exponent less p - 1 */
    if (e <= 0) return er_format_ulp(O->id, y);  /* a subnormal double (fp64 output) */
    u = (uint64_t)e << 52;
    memcpy(&a, &u, 8);
    return a;
}

/* Rounds (-1)^neg * (m + sticky*tiny) * 2^e to the format, where `sticky` says that bits below m's last bit
 * are nonzero. Resolves ER_OVERFLOW_DEFAULT first with er__overflow_rule. */
ER_INTERNAL double er__round_core(const er_fmt_info *fi, int neg, uint64_t m, int64_t e, int sticky,
                                  er_round mode, er_overflow ov);
ER_INTERNAL er_overflow er__overflow_rule(const er_fmt_info *fi, er_overflow ov);
ER_INTERNAL double er__decode(const er_fmt_info *fi, uint64_t bits);
/* x correctly rounded to the format (er__round_double's general case: every format, mode, rule and value). */
ER_INTERNAL double er__round_double_general(const er_fmt_info *fi, double x, er_round mode, er_overflow ov);
/* x (an mpfr_srcptr) correctly rounded to the format; with `sticky`, x stands for a value just beyond it (away
 * from zero): x was truncated from it. */
ER_INTERNAL double er__round_mpfr(const er_fmt_info *fi, const void *x, er_round mode, er_overflow ov);
ER_INTERNAL double er__round_mpfr_sticky(const er_fmt_info *fi, const void *x, int sticky, er_round mode,
                                         er_overflow ov);
/* x / n correctly rounded to the format (x a double, n > 0). */
ER_INTERNAL double er__round_quotient(const er_fmt_info *fi, double x, int64_t n, er_round mode);
/* RN(n m / d) into the format under the overflow rule ov, for finite doubles n, m, d (d != 0; m with at most 8
 * significant bits, as qmax and 1 have): decided in double where an enclosure of the quotient decides it
 * (quantize.md, Lemma Q10), else with MPFR. */
ER_INTERNAL double er__round_ratio(const er_fmt_info *fi, double n, double m, double d, er_overflow ov);

/* x + y, a*b and a*b + y rounded once to the format (src/format/round.c); `wide` says a*b may not be an exact
 * double. Infinite operands follow IEEE (inf - inf is NaN). */
ER_INTERNAL double er__round_sum_general(const er_fmt_info *fi, double x, double y, er_round mode);
/* er__round_sum's common cases inline (to nearest in fp64, and in fp32 for two floats: the hardware's sum, one
 * rounding), the rest in round.c. */
static inline double er__round_sum(const er_fmt_info *fi, double x, double y, er_round mode) {
    if (mode == ER_ROUND_NEAREST && fi->id == ER_FP64) return x + y;
    if (mode == ER_ROUND_NEAREST && fi->id == ER_FP32 && er__is_float(x) && er__is_float(y))
        return (double)((float)x + (float)y);
    return er__round_sum_general(fi, x, y, mode);
}
ER_INTERNAL double er__round_prod(const er_fmt_info *fi, double a, double b, int wide, er_round mode);
ER_INTERNAL double er__round_fma(const er_fmt_info *fi, double a, double b, double y, int wide, er_round mode);

/* x (|x| <= FLT_MAX) rounded to fp32 to nearest, up or down: the hardware conversion to nearest, then one step
 * toward the mode where nearest went the other way, without a branch on the data (the steps are random in a set's
 * ends): +1 on the bits of a positive float (-1 of a negative one) goes up; a zero never needs the step that would
 * cross its sign (nearest keeps the sign of x). */
static inline double er__round_f32(double x, er_round mode) {
    float f = (float)x;
    if (mode == ER_ROUND_NEAREST) return f;
    uint32_t b, up = mode == ER_ROUND_UP, step = up ? (double)f < x : (double)f > x;
    memcpy(&b, &f, 4);
    b += step * (((b >> 31) ^ up) ? 1u : (uint32_t)-1);
    memcpy(&f, &b, 4);
    return f;
}

/* x (within the format's range) rounded to nearest, ties to even, in a format of `frac` fraction bits whose least
 * ulp exponent is qmin (fp16 10 and -24, bf16 7 and -133): x + c for c = 1.5 2^(q + 52), q = x's ulp exponent in
 * the format (at least qmin): the sum lies in c's binade, whose ulp is 2^q, so it is rounded once to a multiple of
 * 2^q; subtracting c is exact. */
static inline double er__round_by_constant(double x, int frac, int qmin) {
    uint64_t u;
    memcpy(&u, &x, 8);
    int q = (int)((u >> 52) & 0x7ff) - 1023 - frac;
    if (q < qmin) q = qmin;
    uint64_t cu = ((uint64_t)(q + 52 + 1023) << 52) | (UINT64_C(1) << 51);
    double c;
    memcpy(&c, &cu, 8);
    return copysign((x + c) - c, x);
}

/* x correctly rounded to the format. Inline for the common cases (a finite double is a value of fp64; fp32 within
 * its range by the hardware conversion, to nearest, then one step where that went the wrong way for a directed
 * mode; fp16, bf16 and the fp8, fp6 and fp4 formats to nearest within their range by adding and removing a
 * constant), the general case in round.c. t-ival compares the two on every value and midpoint of the narrow formats. */
static inline double er__round_double(const er_fmt_info *fi, double x, er_round mode, er_overflow ov) {
    if (fi->id == ER_FP64 && fabs(x) <= DBL_MAX) return x;
    if (fi->id == ER_FP32 && fabs(x) <= FLT_MAX && mode != ER_ROUND_ZERO && mode != ER_ROUND_NEAREST_AWAY)
        return er__round_f32(x, mode);
    if (fi->id == ER_FP16 && mode == ER_ROUND_NEAREST && fabs(x) <= 65504.0) return er__round_by_constant(x, 10, -24);
    if (fi->id == ER_BF16 && mode == ER_ROUND_NEAREST && fabs(x) <= 3.3895313892515355e38)
        return er__round_by_constant(x, 7, -133);
    /* the fp8, fp6 and fp4 formats (not e8m0, whose values are powers of two alone) within their largest value */
    if (mode == ER_ROUND_NEAREST && fi->vbits <= 8 && !fi->e8m0 && fi->p >= 2 && fabs(x) <= fi->max)
        return er__round_by_constant(x, fi->p - 1, fi->emin - fi->p + 1);
    return er__round_double_general(fi, x, mode, ov);
}

/* Whether every product of a value of fa and one of fb is a value of F (any-order.md, Lemma 3). */
ER_INTERNAL int er__products_exact(const er_fmt_info *fa, const er_fmt_info *fb, const er_fmt_info *F);

#endif
