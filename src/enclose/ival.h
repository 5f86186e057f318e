/* ival.h: bounds in double arithmetic (docs/algorithms/double-bounds.md).
 *
 * A double operation rounds to nearest, so the exact result lies between the double below and the double above
 * the rounded one: er__dn(a + b) <= a + b <= er__up(a + b), and likewise for -, * and /, whatever the operands'
 * magnitudes (gradual underflow and overflow included: the neighbour of an infinity is the largest finite
 * value). Each bound costs one operation and a bit step; it is one ulp of double looser than a directed
 * rounding, which is far below the ulps of the formats of at most 24 bits these bounds serve. */
#ifndef ER_IVAL_H
#define ER_IVAL_H

#include <float.h>
#include <math.h>
#include "core/internal.h"
#include "core/ddsign.h"
#include "core/expdd.h"
#include "core/tanhser.h"
#include "enclose/compsum.h"

/* The double just above / below a result rounded to nearest: an upper / lower bound of its exact value (core/ddsign.h,
 * the GPU's too). */
static inline double er__up(double x) { return er_xd_up(x); }
static inline double er__dn(double x) { return er_xd_dn(x); }
/* er__up and er__dn for a finite x, the same values, without a branch (loops that vectorise). */
static inline double er__up_finite(double x) {
    uint64_t b = er__bits(x);
    double r = er__from_bits(b + (uint64_t)(1 | ((int64_t)b >> 63)));
    return (b << 1) == 0 ? 4.9406564584124654e-324 : r;
}
static inline double er__dn_finite(double x) { return -er__up_finite(-x); }
/* Bounds like er__up and er__dn for finite x without a branch: x moved by |x| 2^-52 + 2^-1074, at least an ulp of
 * x (the scaling is exact above the subnormals, and 2^-1074 covers its rounding there), so the sum rounds at least
 * one step beyond x; up to three (two but near the subnormals, t-ival), and an infinity beyond DBL_MAX. */
static inline double er__up_wide(double x) { return x + (fabs(x) * 0x1p-52 + 0x1p-1074); }
static inline double er__dn_wide(double x) { return x - (fabs(x) * 0x1p-52 + 0x1p-1074); }

/* a + b and a b rounded down (up = 0) or up (up = 1), exactly where finite (Lemma D13): rounded to nearest, then
 * moved one double where the exact error lies on the other side (TwoSum for the sum; fma for a product of at least
 * 2^-960, whose error is then a double); a product below 2^-960 or an infinite result is moved whatever its error
 * (Lemma D0: a bound, one double looser at most). */
static inline double er__sum_dir(double a, double b, int up) {
    double s, e;
    er__two_sum(a, b, &s, &e);
    if (isinf(s)) return up ? er__up(s) : er__dn(s);
    return up ? (e > 0 ? er__up(s) : s) : (e < 0 ? er__dn(s) : s);
}
static inline double er__prod_dir(double a, double b, int up) {
    double p = a * b;
    if (isinf(p) || !(fabs(p) >= 0x1p-960)) return up ? er__up(p) : er__dn(p);
    double e = fma(a, b, -p);
    return up ? (e > 0 ? er__up(p) : p) : (e < 0 ? er__dn(p) : p);
}

/* The constants of er__exp_bounds (ival.c), set once by er__exp_init from MPFR. */
ER_INTERNAL extern double er__exp_tlo[64], er__exp_thi[64], er__exp_lh, er__exp_ll, er__exp_t1[64], er__exp_t2[64];
/* Sets them (thread-safe; cheap after the first call). Call before er__exp_bounds. */
ER_INTERNAL void er__exp_init(void);
/* Theorem D1's tables er__exp_tlo, er__exp_thi, er__exp_lh and er__exp_ll, set up first, copied (for the GPU's
 * kernels, which repeat er__exp_bounds). */
ER_INTERNAL void er__exp_tables(double tlo[64], double thi[64], double *lh, double *ll);
/* log(x) rounded down (up = 0) or up to a double, for x >= 0 (log 0 = -inf; +inf and NaN as MPFR gives them): a
 * certified double evaluation within a few ulps (Lemma D10 of double-bounds.md), else MPFR at 64 bits. */
ER_INTERNAL double er__log_dir(double x, int up);
/* 1/sqrt(v) rounded down into *rd and up into *ru (equal where it is a double), exactly, for a positive finite
 * double v (Lemma D12 of double-bounds.md): 1, else 0 and nothing written. */
ER_INTERNAL int er__rsqrt_dirs(double v, double *rd, double *ru);
/* er__log_dir's double evaluation alone (er__exp_init first): 1 and *r where it is certified, 0 where not (x not a
 * positive finite double; or libm's guess off by more than its margin, not seen) (t-ival counts them). */
ER_INTERNAL int er__log_fast(double x, int up, double *r);
/* er__exp_bounds(t[i], &lo[i], &hi[i]) for i < n, the same values, in loops that vectorise (simd: er__simd()'s AVX2
 * build); t must not overlap lo or hi. */
ER_INTERNAL void er__exp_bounds_run(int simd, int64_t n, const double *t, double *lo, double *hi);

/* x 2^q, q >= -1077, as a lower (dir < 0) or upper bound; exact unless the result is subnormal. */
static inline double er__scale2(double x, int q, int dir) {
    if (q < -1000) { x *= 0x1p-64; q += 64; }                    /* x in [0.5, 2]: stays normal */
    double y = x * er__from_bits((uint64_t)(q + 1023) << 52);
    if (y < 0x1p-1022) y = dir < 0 ? er__dn(y) : er__up(y);      /* gradual underflow rounded */
    return y;
}

/* exp(t) lies in [*lo, *hi] (Theorem D1): for -745 <= t <= 709 with a normal result, hi <= lo (1 + 2^-49); below,
 * [0, 2^-1074] (0 at -inf); above, [2^1022, +inf]; NaN gives NaN. t = k L + r with L = ln 2 / 64, |r| <= 0.0056,
 * exp(t) = 2^q 2^(j/64) exp(r) with k = 64 q + j; exp(r) from a degree-6 Taylor polynomial by Horner's rule, within
 * 1.03 2^-53 of it. The slack 2^-51 on exp(r) covers that and the rounding of the product, so neither needs an outward
 * step (double-bounds.md). */
static inline void er__exp_core(double t, double *lo, double *hi, int *q);
static inline void er__exp_bounds(double t, double *lo, double *hi) {
    if (t != t) { *lo = *hi = t; return; }
    if (t < -745.0) {
        *lo = 0.0;
        *hi = t == -INFINITY ? 0.0 : 4.9406564584124654e-324; /* exp(-745) < 2^-1074 */
        return;
    }
    if (t > 709.0) { *lo = 0x1p1022; *hi = INFINITY; return; } /* exp(709) > 2^1022 */
    int q;
    double l, h;
    er__exp_core(t, &l, &h, &q);
    *lo = er__scale2(l, q, -1);
    *hi = er__scale2(h, q, 1);
}

/* Theorem D1's reduction and polynomial, for -745 <= t <= 709: exp(t) = 2^q 2^(j/64) exp(r), *p within 1.03 2^-53
 * of exp(r). Without a branch or a table, so that a loop of it vectorises. */
static inline void er__exp_poly(double t, double *p, int *j, int *q) {
    /* k: |t - k L| <= L/2 (1 + 2^-30); the nearest integer by adding and removing 1.5 2^52 */
    double kd = (t * 92.332482616893656877 + 0x1.8p52) - 0x1.8p52;
    int k = (int)kd;
    double r = (t - kd * er__exp_lh) - kd * er__exp_ll;          /* within 2^-59.9 of t - k L */
    double c = 1.0 / 720.0;
    c = c * r + 1.0 / 120.0;
    c = c * r + 1.0 / 24.0;
    c = c * r + 1.0 / 6.0;
    c = c * r + 0.5;
    c = c * r + 1.0;
    *p = c * r + 1.0;
    *j = k & 63;
    *q = (k - *j) / 64;
}
/* Theorem D1 before its scaling, for -745 <= t <= 709: 2^-q exp(t) lies in [*lo, *hi] (both in [0.99, 2]); a loop
 * that scales by 2^q with one product must keep q >= -1000 and the result normal (t >= -690 does), where that
 * product is er__scale2's exactly. */
static inline void er__exp_core(double t, double *lo, double *hi, int *q) {
    double p;
    int j;
    er__exp_poly(t, &p, &j, q);
    *lo = er__exp_tlo[j] * (p - 0x1p-51);
    *hi = er__exp_thi[j] * (p + 0x1p-51);
}

/* exp(t) for -690 <= t <= 1 as *h + *l, within 2^-65 exp(t) of it, |*l| <= 2^-52 |*h| (Lemma D8: core/expdd.h). For
 * the rows whose double enclosures cannot decide, where MPFR would cost a microsecond a class. */
static inline void er__exp_dd(double t, double *h, double *l) {
    er_exp_dd_tab(t, er__exp_lh, er__exp_ll, er__exp_t1, er__exp_t2, h, l);
}

/* Lemma X4's (cross-entropy.md) fixed-point bounds of a term h + l (Lemma D8's exp, |l| <= 2^-52 h,
 * 2^-996 <= h <= 1) in units of 2^-96: *L <= (h + l - h 2^-64) 2^96 and *U >= (h + l + h 2^-64) 2^96, the slack
 * covering Lemma D8's 2^-65. */
static inline void er__dd_fx_term(double h, double l, __int128 *L, __int128 *U) {
    double A = h * 0x1p96, fA = floor(A), fr = A - fA, B = l * 0x1p96, c = h * 0x1p32; /* each exact */
    __int128 I = (__int128)fA;
    *L = I + (__int128)floor(er__dn(er__dn(fr + B) - c));
    *U = I + (__int128)ceil(er__up(er__up(fr + B) + c));
}
/* I 2^-96 as h + l, below it (up = 0) or above it (up = 1), |l| <= 2^-51.9 h; I in [0, 2^123). */
static inline void er__dd_fx_pair(__int128 I, int up, double *h, double *l) {
    double a = (double)I; /* to nearest; an integer, converted back exactly */
    double b = (double)(I - (__int128)a);
    b = up ? er__up(b) : er__dn(b);
    *h = a * 0x1p-96;
    *l = b * 0x1p-96;
}
/* The sign of a - k s (Lemma X4; core/ddsign.h, the GPU's too) for a = ah + al, k = kh + kl, s = sh + sl with ah >= 0,
 * kh, sh > 0, |al| <= 2^-51 ah, |kl| <= 2^-53 kh, |sl| <= 2^-51 sh: 1 or -1 where the computed difference exceeds its
 * error bound, else 0. */
static inline int er__dd_sign(double ah, double al, double kh, double kl, double sh, double sl) {
    return er_dd_sign(ah, al, kh, kl, sh, sl);
}

/* exp(d + v*) from bounds [dl, dh] of exp(d) (dl >= 0), for a double v with |v| <= 2^-18 and |v - v*| <= 2^-60
 * (Lemma D7): exp(v*) lies within 1.1 2^-53 of P = fl(1 + (v + v^2/2)), so between fl(P - 2^-51) and fl(P + 2^-51);
 * each product rounded outward, the lower end no lower than +0 (exp is positive). */
static inline void er__exp_shift(double dl, double dh, double v, double *lo, double *hi) {
    double p = 1.0 + (v + 0.5 * (v * v)), l = er__dn(dl * (p - 0x1p-51));
    *lo = l > 0 ? l : 0.0;
    *hi = er__up(dh * (p + 0x1p-51));
}

/* er__exp_shift without a branch, for bounds 0 <= dl <= dh (dh may be +inf): the same products, each moved outward
 * one unit of its bits (the lower end no lower than +0; +inf stays). */
static inline void er__exp_shift_run1(double dl, double dh, double v, double *lo, double *hi) {
    double p = 1.0 + (v + 0.5 * (v * v)), l = dl * (p - 0x1p-51), h = dh * (p + 0x1p-51);
    *lo = l > 0 ? er__from_bits(er__bits(l) - 1) : 0.0;
    *hi = h <= DBL_MAX ? er__from_bits(er__bits(h) + 1) : h;
}

/* tanh(s) from bounds [elo, ehi] of exp(2 s) (Lemma D6): 1 - 2 / (e + 1), increasing in e, each end with three
 * roundings (within 2^-49.6 of its value where s >= 1/4, so tanh(s) >= 0.2449) moved outward by 2^-46 of itself.
 * 0 for s below 1/4 (or NaN), where the subtraction cancels: the ends written then mean nothing. */
static inline int er__tanh_bounds(double s, double elo, double ehi, double *lo, double *hi) {
    double tl = 1.0 - 2.0 / (elo + 1.0), th = 1.0 - 2.0 / (ehi + 1.0); /* written either way: no branch */
    *lo = tl - tl * 0x1p-46;
    *hi = th + th * 0x1p-46;
    return s >= 0.25;
}

/* tanh(s) for 2^-900 <= |s| < 1/4, or s = 0 (Lemma D9): core/tanhser.h's series, within 2^-48.5 of its value, moved
 * outward by 2^-46 of itself. */
static inline void er__tanh_small_bounds(double s, double *lo, double *hi) { er_tanh_series_bounds(s, lo, hi); }

/* tanh(x) for a double x, from bounds [elo, ehi] of exp(2 |x|) where |x| >= 1/4 (Lemma D6 (a)), from Lemma D9's
 * where |x| < 1/4: 1 where the bounds hold (x = 0 or |x| >= 2^-900), 0 otherwise (NaN included). Without a
 * branch. */
static inline int er__tanh_any_bounds(double x, double elo, double ehi, double *lo, double *hi) {
    double a = fabs(x), tl, th, sl, sh;
    int big = er__tanh_bounds(a, elo, ehi, &tl, &th);
    er__tanh_small_bounds(a, &sl, &sh);
    double l = big ? tl : sl, h = big ? th : sh;
    *lo = x > 0 ? l : -h;
    *hi = x > 0 ? h : -l;
    return (a == 0) | ((a >= 0x1p-900) & (a <= DBL_MAX));
}

/* c / (1 + e) for e >= 0 in [elo, ehi] and c finite (sigmoid with c = 1, silu with c = x; Lemma D6): monotone in e,
 * each end with two roundings (within 2^-52 of its value) moved outward by 2^-48 of itself. */
static inline void er__quot_1p_bounds(double c, double elo, double ehi, double *lo, double *hi) {
    double q1 = c / (1.0 + elo), q2 = c / (1.0 + ehi), l = q1 < q2 ? q1 : q2, h = q1 < q2 ? q2 : q1;
    *lo = l - fabs(l) * 0x1p-48;
    *hi = h + fabs(h) * 0x1p-48;
}

/* One of er__quot_1p_bounds's ends, without the other's division: the lower (up 0) or the upper (up 1). c / (1 + e)
 * decreases in e for c >= 0 and increases for c < 0, so the lower end is at ehi for c >= 0, at elo otherwise. */
static inline double er__quot_1p_bound(double c, double elo, double ehi, int up) {
    double q = c / (1.0 + ((c >= 0) != up ? ehi : elo));
    return up ? q + fabs(q) * 0x1p-48 : q - fabs(q) * 0x1p-48;
}

/* Sums of n values in [0, 2] (+0 included, -0 not): exact sums of each term rounded down (lo) and up (hi) to a multiple
 * of 2^-90, returned as doubles below and above them (Lemma D2). n < 2^37. */
typedef struct er_fxsum { unsigned __int128 lo, hi; } er_fxsum;
/* The terms lo and hi (in [0, 2]) as the sum's lower and upper parts add them: lo 2^90 rounded down, hi 2^90 up. */
static inline void er__fxsum_terms(double lo, double hi, unsigned __int128 *tl, unsigned __int128 *th) {
    /* lo, hi in [0, 2]: m 2^e with m < 2^53 */
    uint64_t bl = er__bits(lo), bh = er__bits(hi);
    int el = (int)(bl >> 52), eh = (int)(bh >> 52);
    uint64_t ml = (bl & ((UINT64_C(1) << 52) - 1)) | ((uint64_t)(el != 0) << 52);
    uint64_t mh = (bh & ((UINT64_C(1) << 52) - 1)) | ((uint64_t)(eh != 0) << 52);
    int sl = (el ? el : 1) - 1075 + 90, sh = (eh ? eh : 1) - 1075 + 90; /* value 2^90 = m 2^s */
    *tl = sl >= 0 ? (unsigned __int128)ml << sl : sl > -64 ? ml >> -sl : 0;
    *th = sh >= 0    ? (unsigned __int128)mh << sh
          : sh > -64 ? (mh >> -sh) + ((mh & ((UINT64_C(1) << -sh) - 1)) != 0)
                     : mh != 0;
}
static inline void er__fxsum_add(er_fxsum *s, double lo, double hi) {
    unsigned __int128 tl, th;
    er__fxsum_terms(lo, hi, &tl, &th);
    s->lo += tl;
    s->hi += th;
}
static inline double er__fxsum_lo(const er_fxsum *s) { return er__dn(ldexp(er__dn((double)s->lo), -90)); }
static inline double er__fxsum_hi(const er_fxsum *s) { return er__up(ldexp(er__up((double)s->hi), -90)); }

#endif
