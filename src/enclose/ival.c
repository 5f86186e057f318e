/* ival.c: exp(t) enclosed in double arithmetic (docs/algorithms/double-bounds.md, Theorem D1).
 *
 * t = k L + r with L = ln 2 / 64, k the nearest integer to t / L and |r| <= 0.0055; exp(t) = 2^q 2^(j/64) exp(r)
 * with k = 64 q + j. The constants 2^(j/64) and L come from MPFR once, each as a pair of doubles around the
 * real value; exp(r) from a degree-6 Taylor polynomial evaluated by Horner's rule, within 2^-48 of exp(r). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <mpfr.h>
#include "enclose/ival.h"

static double er_tlo[64], er_thi[64]; /* 2^(j/64) in [tlo, thi] */
static double er_lh, er_ll_lo, er_ll_hi; /* L - lh in [ll_lo, ll_hi]; lh has 36 significant bits */
static pthread_once_t er_exp_once = PTHREAD_ONCE_INIT;

static void er_exp_init(void) {
    mpfr_t a, b;
    mpfr_inits2(200, a, b, (mpfr_ptr)0);
    for (int j = 0; j < 64; j++) {
        mpfr_set_si(a, j, MPFR_RNDN);
        mpfr_div_2ui(a, a, 6, MPFR_RNDN); /* exact */
        mpfr_exp2(a, a, MPFR_RNDN);       /* within 2^-199 */
        er_tlo[j] = mpfr_get_d(a, MPFR_RNDD);
        er_thi[j] = mpfr_get_d(a, MPFR_RNDU);
        if (j == 0) er_tlo[j] = er_thi[j] = 1.0;
    }
    mpfr_const_log2(a, MPFR_RNDN);
    mpfr_div_2ui(a, a, 6, MPFR_RNDN);     /* L within 2^-205 */
    mpfr_set_prec(b, 36);
    mpfr_set(b, a, MPFR_RNDN);
    er_lh = mpfr_get_d(b, MPFR_RNDN);     /* exact: 36 bits */
    mpfr_set_prec(b, 200);
    mpfr_sub_d(b, a, er_lh, MPFR_RNDN);   /* exact */
    er_ll_lo = er__dn(mpfr_get_d(b, MPFR_RNDD)); /* a further step covers a's own 2^-205 */
    er_ll_hi = er__up(mpfr_get_d(b, MPFR_RNDU));
    mpfr_clears(a, b, (mpfr_ptr)0);
}

/* x 2^q, q >= -1077, as a lower (dir < 0) or upper bound; exact unless the result is subnormal. */
static double er_scale(double x, int q, int dir) {
    if (q < -1000) { x *= 0x1p-64; q += 64; }                    /* x in [0.5, 2]: stays normal */
    double y = x * er__from_bits((uint64_t)(q + 1023) << 52);
    if (y < 0x1p-1022) y = dir < 0 ? er__dn(y) : er__up(y);      /* gradual underflow rounded */
    return y;
}

void er__exp_bounds(double t, double *lo, double *hi) {
    if (t != t) { *lo = *hi = t; return; }
    if (t < -745.0) {
        *lo = 0.0;
        *hi = t == -INFINITY ? 0.0 : 4.9406564584124654e-324; /* exp(-745) < 2^-1074 */
        return;
    }
    if (t > 709.0) { *lo = 0x1p1022; *hi = INFINITY; return; } /* exp(709) > 2^1022 */
    pthread_once(&er_exp_once, er_exp_init);
    /* k: |t - k L| <= L/2 (1 + 2^-30) */
    double kd = nearbyint(t * 92.332482616893656877);
    int k = (int)kd;
    /* r = t - k lh - k (L - lh), in [rl, rh] */
    double u = t - kd * er_lh;                                   /* k lh is exact: |k| < 2^17 */
    double ul = er__dn(u), uh = er__up(u), cl, ch;
    if (k >= 0) { cl = er__dn(kd * er_ll_lo); ch = er__up(kd * er_ll_hi); }
    else { cl = er__dn(kd * er_ll_hi); ch = er__up(kd * er_ll_lo); }
    double rl = er__dn(ul - ch), rh = er__up(uh - cl);
    /* Horner's rule at rl, within 2^-48 of exp(rl) (|r| <= 0.0055); exp(r) <= exp(rl) (1 + 2 (rh - rl)) */
    double p = 1.0 / 720.0;
    p = p * rl + 1.0 / 120.0;
    p = p * rl + 1.0 / 24.0;
    p = p * rl + 1.0 / 6.0;
    p = p * rl + 0.5;
    p = p * rl + 1.0;
    p = p * rl + 1.0;
    double el = er__dn(p - 0x1p-48);
    double eh = er__up(er__up(p + 0x1p-48) * er__up(1.0 + 2.0 * er__up(rh - rl)));
    int j = k & 63, q = (k - j) / 64;
    *lo = er_scale(er__dn(er_tlo[j] * el), q, -1);
    *hi = er_scale(er__up(er_thi[j] * eh), q, 1);
}
