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
#include <exactref/mpfr.h>

static double er_overflowed(const er_fmt_info *fi, int neg, er_round mode, er_overflow ov) {
    double big;
    if (ov == ER_OVERFLOW_NAN) return NAN;
    if (ov == ER_OVERFLOW_SATURATE || !fi->has_inf) {
        big = fi->max;
    } else {
        /* IEEE 754: to nearest and away-from-zero directions give infinity, the others the largest finite. */
        int to_inf = mode == ER_ROUND_NEAREST || (mode == ER_ROUND_UP && !neg) || (mode == ER_ROUND_DOWN && neg);
        big = to_inf ? INFINITY : fi->max;
    }
    return neg ? -big : big;
}

double er__round_core(const er_fmt_info *fi, int neg, uint64_t m, int64_t e, int sticky, er_round mode,
                      er_overflow ov) {
    ov = er__overflow_rule(fi, ov);
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
    case ER_ROUND_UP: inc = !neg && (half || rest); break;
    case ER_ROUND_DOWN: inc = neg && (half || rest); break;
    default: inc = 0; break;
    }
    kept += (uint64_t)inc;
    if (kept == 0) return neg ? -0.0 : 0.0;
    double v = ldexp((double)kept, (int)q); /* kept <= 2^54: exact; q within double's range */
    if (v > fi->max) return er_overflowed(fi, neg, mode, ov);
    return neg ? -v : v;
}

double er__round_double(const er_fmt_info *fi, double x, er_round mode, er_overflow ov) {
    if (isnan(x)) return NAN;
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
    mpfr_srcptr x = xv;
    if (mpfr_nan_p(x)) return NAN;
    if (mpfr_inf_p(x)) return er__round_double(fi, mpfr_sgn(x) < 0 ? -INFINITY : INFINITY, mode, ov);
    if (mpfr_zero_p(x)) return mpfr_signbit(x) ? -0.0 : 0.0;
    /* The top 64 bits toward zero, and whether anything was dropped. */
    mpfr_t t;
    mpz_t z;
    mpfr_init2(t, 64);
    mpz_init(z);
    int inexact = mpfr_set(t, x, MPFR_RNDZ);
    mpfr_exp_t e = mpfr_get_z_2exp(z, t);
    int neg = mpz_sgn(z) < 0;
    mpz_abs(z, z);
    uint64_t m = 0;
    mpz_export(&m, NULL, -1, sizeof m, 0, 0, z); /* |z| < 2^64 */
    mpz_clear(z);
    mpfr_clear(t);
    return er__round_core(fi, neg, m, (int64_t)e, inexact != 0, mode, ov);
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
