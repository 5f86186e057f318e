/* round.c: correctly rounded conversion to a format from an exact (sign, 64-bit significand, exponent,
 * sticky) value, from doubles and from MPFR values; gradual underflow and every overflow rule.
 *
 * The core works on the integer significand, never on floating-point arithmetic, so it is exact whatever
 * the format: keep the bits at or above the quantum of the value's binade (or of the subnormal range), and
 * decide the increment from the first dropped bit ("half") and whether anything below it is nonzero. */
#include <math.h>
#include <gmp.h>
#include <mpfr.h>
#include "core/internal.h"
#include "format/format.h"
#include <exactref/mpfr.h>

static double er_overflowed(const er_fmt_info *fi, int neg, er_round mode, er_overflow ov) {
    double big;
    if (ov == ER_OVERFLOW_NAN) return NAN;
    if (ov == ER_OVERFLOW_SATURATE || !fi->has_inf) {
        big = fi->max;
    } else {
        /* IEEE 754: to nearest and away-from-zero directions give infinity, the others the largest finite. */
        int to_inf = mode == ER_ROUND_NEAREST || mode == ER_ROUND_NEAREST_AWAY || (mode == ER_ROUND_UP && !neg) ||
                     (mode == ER_ROUND_DOWN && neg);
        big = to_inf ? INFINITY : fi->max;
    }
    return neg ? -big : big;
}

double er__round_core(const er_fmt_info *fi, int neg, uint64_t m, int64_t e, int sticky, er_round mode,
                      er_overflow ov) {
    ov = er__overflow_rule(fi, ov);
    if (fi->e8m0 && (neg || (m == 0 && !sticky))) return NAN; /* e8m0 holds positive values only */
    if (m == 0) {
        if (!sticky) return neg ? -0.0 : 0.0;
        /* Only the sticky part: a positive value below any representable bit: treat as m=1 far below. */
        m = 1;
        e -= 2 * (int64_t)fi->p + 1100;
        sticky = 0;
    }
    int lz = __builtin_clzll(m);
    m <<= lz;
    e -= lz;
    int64_t E = e + 63; /* the value lies in [2^E, 2^(E+1)) */
    if (E > fi->emax + 1) return er_overflowed(fi, neg, mode, ov);
    int64_t q = E - fi->p + 1;
    int64_t qmin = (int64_t)fi->emin - fi->p + 1;
    if (q < qmin) q = qmin;
    int64_t shift = q - e; /* > 0 always: p <= 53 < 64 */
    uint64_t kept, half, rest;
    if (shift > 64) {
        kept = 0; half = 0; rest = 1;
    } else if (shift == 64) {
        kept = 0; half = m >> 63; rest = (m << 1) != 0;
    } else {
        kept = m >> shift;
        half = (m >> (shift - 1)) & 1;
        rest = (m & ((UINT64_C(1) << (shift - 1)) - 1)) != 0;
    }
    rest |= (uint64_t)(sticky != 0);
    int inc;
    switch (mode) {
    case ER_ROUND_NEAREST: inc = half && (rest || (kept & 1)); break;
    case ER_ROUND_NEAREST_AWAY: inc = (int)half; break;
    case ER_ROUND_UP: inc = !neg && (half || rest); break;
    case ER_ROUND_DOWN: inc = neg && (half || rest); break;
    default: inc = 0; break;
    }
    kept += (uint64_t)inc;
    if (kept == 0) return fi->e8m0 ? fi->min_sub : neg ? -0.0 : 0.0; /* e8m0 has no zero: its least value */
    /* kept <= 2^53 is exact as a double, and so is kept 2^q: with q a normal exponent the product is normal */
    double v = q >= -1022 && q <= 1023 ? (double)kept * er__from_bits((uint64_t)(q + 1023) << 52)
                                       : ldexp((double)kept, (int)q);
    if (v > fi->max) return er_overflowed(fi, neg, mode, ov);
    return neg ? -v : v;
}

double er__round_double_general(const er_fmt_info *fi, double x, er_round mode, er_overflow ov) {
    if (isnan(x) || (fi->e8m0 && !(x > 0))) return NAN;
    if (isinf(x)) {
        er_overflow rule = er__overflow_rule(fi, ov);
        if (rule == ER_OVERFLOW_NAN) return NAN;
        if (rule == ER_OVERFLOW_IEEE && fi->has_inf) return x;
        return x < 0 ? -fi->max : fi->max;
    }
    if (x == 0) return x;
    uint64_t b = er__bits(x);
    int neg = (int)(b >> 63);
    int ex = (int)((b >> 52) & 0x7ff);
    uint64_t m = b & ((UINT64_C(1) << 52) - 1);
    if (ex) m |= UINT64_C(1) << 52; else ex = 1;
    return er__round_core(fi, neg, m, ex - 1075, 0, mode, ov);
}

double er__round_mpfr(const er_fmt_info *fi, const void *xv, er_round mode, er_overflow ov) {
    return er__round_mpfr_sticky(fi, xv, 0, mode, ov);
}

double er__round_mpfr_sticky(const er_fmt_info *fi, const void *xv, int sticky, er_round mode, er_overflow ov) {
    mpfr_srcptr x = xv;
    if (mpfr_nan_p(x)) return NAN;
    if (mpfr_inf_p(x)) return er__round_double(fi, mpfr_sgn(x) < 0 ? -INFINITY : INFINITY, mode, ov);
    if (mpfr_zero_p(x)) return fi->e8m0 ? NAN : mpfr_signbit(x) ? -0.0 : 0.0;
    /* The top 64 bits toward zero, and whether anything was dropped: t = 0.m 2^E with m's top bit set, so
     * |x| >= m 2^(E - 64). t lives on the stack (MPFR_DECL_INIT): no allocation per rounding. */
#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0
    MPFR_DECL_INIT(t, 64);
    int inexact = mpfr_set(t, x, MPFR_RNDZ);
    uint64_t m = ((const mp_limb_t *)mpfr_custom_get_significand(t))[0];
    int64_t e = (int64_t)mpfr_get_exp(t) - 64;
    int neg = mpfr_signbit(t) != 0;
#else
    mpfr_t t;
    mpz_t z;
    mpfr_init2(t, 64);
    mpz_init(z);
    int inexact = mpfr_set(t, x, MPFR_RNDZ);
    int64_t e = (int64_t)mpfr_get_z_2exp(z, t);
    int neg = mpz_sgn(z) < 0;
    mpz_abs(z, z);
    uint64_t m = 0;
    mpz_export(&m, NULL, -1, sizeof m, 0, 0, z); /* |z| < 2^64 */
    mpz_clear(z);
    mpfr_clear(t);
#endif
    return er__round_core(fi, neg, m, e, inexact != 0 || sticky, mode, ov);
}

static double er_round_pair(const er_fmt_info *fi, double s, double t, er_round mode);

double er__round_quotient(const er_fmt_info *fi, double x, int64_t n, er_round mode) {
    if (!isfinite(x) || n == 0) return er__round_double(fi, x / (double)n, mode, ER_OVERFLOW_IEEE);
    /* double-bounds.md, Lemma D11: q = RN(x / n) is normal, the remainder x - q n is a double that one fma gives
     * exactly, and x / n = q + r / n with |r / n| <= ulp(q) / 2: the pair rounds once, as a sum's does below */
    if (fi->p <= 52 && n > 0 && n < (INT64_C(1) << 53) && fabs(x) >= 0x1p-900) {
        double q = x / (double)n;
        return er_round_pair(fi, q, fma(-q, (double)n, x), mode);
    }
    mpfr_t t;
    mpfr_init2(t, 128);
    mpfr_set_d(t, x, MPFR_RNDN);                                  /* exact */
    int inexact = mpfr_div_ui(t, t, (unsigned long)n, MPFR_RNDZ);  /* toward zero, the rest as a sticky bit */
    double r = mpfr_zero_p(t) ? x / (double)n : er__round_mpfr_sticky(fi, t, inexact != 0, mode, ER_OVERFLOW_IEEE);
    mpfr_clear(t);
    return r;
}

er_status er_round_mpfr(double *out, er_format f, mpfr_srcptr x, er_round mode, er_overflow ov) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(x, "x");
    double r;
    ER_RETURN_IF_ERROR(er_round_double(&r, f, 0.0, mode, ov)); /* validates f, mode, ov */
    *out = er__round_mpfr(er__fmt(f), x, mode, ov);
    return ER_OK;
}

/* ---- exact single roundings of sums and products of doubles (fixed-order emulation) ----
 *
 * x + y and a*b + y are not doubles in general, and rounding their double result again to the format would
 * round twice. Each helper computes the exact value as an unevaluated pair s + t (TwoSum; TwoProduct with
 * fma) and rounds that pair once. For a format of at most 52 bits the pair's rounding needs only s and the
 * sign of t: s = RN53(s + t) and |t| <= ulp53(s)/2, and every value or midpoint of the format is a multiple of
 * ulp53 near s, so none lies strictly between s + t and s: s shifted up 11 bits, minus one unit when t
 * opposes s, plus a sticky bit, rounds exactly as s + t does. fp64, subnormal doubles and products that may
 * have underflowed go through MPFR at a precision where the value is exact. */

static double er_round_exact_mpfr(const er_fmt_info *fi, double a, double b, double y, int has_prod, er_round mode) {
    mpfr_t t, u;
    mpfr_init2(t, 4400);
    mpfr_init2(u, 4400);
    mpfr_set_d(t, a, MPFR_RNDN);
    if (has_prod) mpfr_mul_d(t, t, b, MPFR_RNDN); /* exact: 106 bits */
    mpfr_set_d(u, y, MPFR_RNDN);
    mpfr_add(t, t, u, MPFR_RNDN);                  /* exact: products and doubles span < 4300 bits */
    double r;
    if (mpfr_zero_p(t)) {
        /* IEEE: an exact zero sum is +0 in every mode but toward -inf, where it is -0; equal signs keep theirs */
        double pa = has_prod ? a * b : a;
        r = (signbit(pa) && signbit(y)) ? -0.0 : (mode == ER_ROUND_DOWN && (signbit(pa) || signbit(y))) ? -0.0 : 0.0;
    } else {
        r = er__round_mpfr(fi, t, mode, ER_OVERFLOW_IEEE);
    }
    mpfr_clear(t);
    mpfr_clear(u);
    return r;
}

static double er_round_pair(const er_fmt_info *fi, double s, double t, er_round mode) {
    if (t == 0) return er__round_double(fi, s, mode, ER_OVERFLOW_IEEE);
    uint64_t b = er__bits(s);
    int ex = (int)((b >> 52) & 0x7ff);
    if (fi->p > 52 || ex == 0) return er_round_exact_mpfr(fi, s, 0, t, 0, mode);
    uint64_t m = ((b & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52)) << 11;
    int neg = (int)(b >> 63);
    if ((t < 0) != neg) m -= 1; /* t pulls the magnitude below |s| */
    return er__round_core(fi, neg, m, (int64_t)ex - 1075 - 11, 1, mode, ER_OVERFLOW_IEEE);
}

/* Round to nearest in fp32 or fp64 on operands of that format: the hardware operation (IEEE 754, the default
 * environment, no contraction) is the exact single rounding. */
double er__round_sum_general(const er_fmt_info *fi, double x, double y, er_round mode) {
    if (mode == ER_ROUND_NEAREST && fi->id == ER_FP64) return x + y;
    if (!isfinite(x) || !isfinite(y)) return er__round_double(fi, x + y, mode, ER_OVERFLOW_IEEE);
    double s = x + y;
    if (!isfinite(s)) return er_round_exact_mpfr(fi, x, 0, y, 0, mode);
    if (s == 0) return (x == 0 && y == 0) ? x + y : (mode == ER_ROUND_DOWN ? -0.0 : 0.0);
    double bb = s - x, t = (x - (s - bb)) + (y - bb); /* TwoSum: s + t = x + y exactly */
    return er_round_pair(fi, s, t, mode);
}

double er__round_prod(const er_fmt_info *fi, double a, double b, int wide, er_round mode) {
    if (mode == ER_ROUND_NEAREST) {
        if (fi->id == ER_FP64) return a * b;
        if (fi->id == ER_FP32 && er__is_float(a) && er__is_float(b)) return (double)((float)a * (float)b);
    }
    double p = a * b;
    if (!isfinite(a) || !isfinite(b)) return er__round_double(fi, p, mode, ER_OVERFLOW_IEEE);
    if (!isfinite(p)) return er_round_exact_mpfr(fi, a, b, 0.0, 1, mode); /* beyond double's range, not infinite */
    /* a zero factor: the product is that signed zero, exact (the exact sum below would add +0 to it) */
    if (!wide || a == 0 || b == 0) return er__round_double(fi, p, mode, ER_OVERFLOW_IEEE);
    if (p == 0 || fabs(p) < 0x1p-960) return er_round_exact_mpfr(fi, a, b, 0.0, 1, mode);
    return er_round_pair(fi, p, fma(a, b, -p), mode); /* TwoProduct: exact without underflow */
}

double er__round_fma(const er_fmt_info *fi, double a, double b, double y, int wide, er_round mode) {
    if (mode == ER_ROUND_NEAREST) {
        if (fi->id == ER_FP64) return fma(a, b, y);
        if (fi->id == ER_FP32 && er__is_float(a) && er__is_float(b) && er__is_float(y))
            return (double)fmaf((float)a, (float)b, (float)y);
    }
    double p = a * b;
    /* IEEE 754 fma: a finite product (however large) plus an infinity is that infinity */
    if (isfinite(a) && isfinite(b) && isinf(y)) return y;
    if (!isfinite(a) || !isfinite(b) || !isfinite(y)) return er__round_double(fi, p + y, mode, ER_OVERFLOW_IEEE);
    if (wide || !isfinite(p)) return er_round_exact_mpfr(fi, a, b, y, 1, mode);
    return er__round_sum(fi, p, y, mode); /* p is exact (a product of two values of at most 24 bits) */
}

/* x moved outward by at least one double (|x| 2^-52 + 2^-1074: ival.h's er__dn_wide and er__up_wide). */
static double er_ratio_dn(double x) { return x - (fabs(x) * 0x1p-52 + 0x1p-1074); }
static double er_ratio_up(double x) { return x + (fabs(x) * 0x1p-52 + 0x1p-1074); }

double er__round_ratio(const er_fmt_info *O, double n, double m, double d, er_overflow ov) {
    /* first in double (quantize.md, Lemma Q10): n m = nh + nl exactly, c = RN(nh / d) with its remainder exact, the
     * rest's quotient c2 within 2^-51 of its own; where the enclosure's ends round alike into O, that is the
     * rounding */
    double nh = n * m, nl = fma(n, m, -nh), c = nh / d, rr = fma(-c, d, nh), t = rr + nl, c2 = t / d;
    if (fabs(nh) >= 0x1p-900 && fabs(d) >= 0x1p-900 && fabs(c) >= 0x1p-900 && fabs(c) <= 0x1p900 &&
        fabs(d) <= 0x1p900 && (t == 0 || (fabs(t) >= 0x1p-1000 && fabs(c2) >= 0x1p-1000))) {
        double E = fabs(c2) * 0x1p-50;
        double L = er_ratio_dn(c + er_ratio_dn(c2 - E)), H = er_ratio_up(c + er_ratio_up(c2 + E));
        if (L > 0 || H < 0) {
            double a = er__round_double(O, L, ER_ROUND_NEAREST, ov), b = er__round_double(O, H, ER_ROUND_NEAREST, ov);
            if (a == b) return a;
        }
    }
    /* n m exactly at 128 bits, then the quotient at 128 bits, which is either exact or farther than 2^-128 relative
     * from every rounding boundary of O (a quotient of a 61-bit and a 53-bit number within that of a value of at most
     * 54 bits equals it), so its rounding is the exact quotient's */
    mpfr_t a, b;
    mpfr_inits2(128, a, b, (mpfr_ptr)0);
    mpfr_set_d(a, n, MPFR_RNDN);
    mpfr_mul_d(a, a, m, MPFR_RNDN); /* exact: 53 + 8 bits */
    mpfr_set_d(b, d, MPFR_RNDN);
    mpfr_div(a, a, b, MPFR_RNDN);
    double r = er__round_mpfr(O, a, ER_ROUND_NEAREST, ov);
    mpfr_clears(a, b, (mpfr_ptr)0);
    return r;
}
