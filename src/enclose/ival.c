/* ival.c: exp(t) enclosed in double arithmetic (docs/algorithms/double-bounds.md, Theorem D1).
 *
 * t = k L + r with L = ln 2 / 64, k the nearest integer to t / L and |r| <= 0.0056; exp(t) = 2^q 2^(j/64) exp(r)
 * with k = 64 q + j. The constants come from MPFR once: 2^(j/64) as the doubles below and above it, L as lh (36
 * bits) plus ll, and 2^(j/64) as a double-double for Lemma D8. The evaluation is inline in ival.h. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <mpfr.h>
#include "enclose/ival.h"

double er__exp_tlo[64], er__exp_thi[64]; /* 2^(j/64) in [tlo, thi] */
double er__exp_t1[64], er__exp_t2[64];   /* 2^(j/64) as t1 + t2 within 2^-106 of it (Lemma D8) */
double er__exp_lh, er__exp_ll; /* lh: L to 36 bits; ll: L - lh to nearest */
static double er_ln2_c1, er_ln2_c2;  /* ln 2 to 42 bits, and the rest to nearest (Lemma D10) */
static pthread_once_t er_exp_once = PTHREAD_ONCE_INIT;

static void er_exp_init(void) {
    mpfr_t a, b;
    mpfr_inits2(200, a, b, (mpfr_ptr)0);
    for (int j = 0; j < 64; j++) {
        mpfr_set_si(a, j, MPFR_RNDN);
        mpfr_div_2ui(a, a, 6, MPFR_RNDN); /* exact */
        mpfr_exp2(b, a, MPFR_RNDD);       /* below 2^(j/64), then below that */
        er__exp_tlo[j] = mpfr_get_d(b, MPFR_RNDD);
        mpfr_exp2(b, a, MPFR_RNDU);
        er__exp_thi[j] = mpfr_get_d(b, MPFR_RNDU);
        if (j == 0) er__exp_tlo[j] = er__exp_thi[j] = 1.0;
        mpfr_exp2(b, a, MPFR_RNDN);       /* within 2^-199 relative */
        er__exp_t1[j] = mpfr_get_d(b, MPFR_RNDN);
        mpfr_sub_d(b, b, er__exp_t1[j], MPFR_RNDN); /* exact */
        er__exp_t2[j] = mpfr_get_d(b, MPFR_RNDN);
    }
    mpfr_const_log2(a, MPFR_RNDN);
    mpfr_div_2ui(a, a, 6, MPFR_RNDN);     /* L within 2^-205 */
    mpfr_set_prec(b, 36);
    mpfr_set(b, a, MPFR_RNDN);
    er__exp_lh = mpfr_get_d(b, MPFR_RNDN);     /* exact: 36 bits */
    mpfr_set_prec(b, 200);
    mpfr_sub_d(b, a, er__exp_lh, MPFR_RNDN);   /* exact */
    er__exp_ll = mpfr_get_d(b, MPFR_RNDN);     /* within 2^-96 of L - lh (|L - lh| <= 2^-43) */
    mpfr_const_log2(a, MPFR_RNDN);             /* within 2^-200 */
    mpfr_set_prec(b, 42);
    mpfr_set(b, a, MPFR_RNDN);
    er_ln2_c1 = mpfr_get_d(b, MPFR_RNDN);      /* exact: 42 bits */
    mpfr_set_prec(b, 200);
    mpfr_sub_d(b, a, er_ln2_c1, MPFR_RNDN);    /* exact */
    er_ln2_c2 = mpfr_get_d(b, MPFR_RNDN);      /* within 2^-97 of ln 2 - c1 (|ln 2 - c1| <= 2^-43) */
    mpfr_clears(a, b, (mpfr_ptr)0);
}

void er__exp_init(void) { pthread_once(&er_exp_once, er_exp_init); }

void er__exp_tables(double tlo[64], double thi[64], double *lh, double *ll) {
    er__exp_init();
    memcpy(tlo, er__exp_tlo, sizeof(double) * 64);
    memcpy(thi, er__exp_thi, sizeof(double) * 64);
    *lh = er__exp_lh;
    *ll = er__exp_ll;
}

/* er__exp_bounds_run: runs of ER_EXP_RUN, Theorem D1's polynomial for every t in one loop that vectorises (an
 * argument outside [-690, 709], or NaN, evaluated at 0 and marked), its table read element by element (a gather the
 * compiler does not emit), the products in a second vectorised loop (the scaling one exact product, er__scale2's for
 * q >= -1000 and a normal result), then er__exp_bounds itself for the marked arguments. */
#define ER_EXP_RUN 256
ER_ALWAYS_INLINE void er_exp_run_poly(int64_t n, const double *restrict t, double *restrict P, int *restrict J,
                                      double *restrict Q, uint8_t *restrict out) {
    for (int64_t i = 0; i < n; i++) {
        int in = (t[i] >= -690.0) & (t[i] <= 709.0), j, q;
        er__exp_poly(in ? t[i] : 0.0, &P[i], &j, &q);
        J[i] = j;
        Q[i] = er__from_bits((uint64_t)(q + 1023) << 52);
        out[i] = (uint8_t)(in ^ 1);
    }
}
ER_ALWAYS_INLINE void er_exp_run_mul(int64_t n, const double *restrict P, const double *restrict Q,
                                     const double *restrict TL, const double *restrict TH, double *restrict lo,
                                     double *restrict hi) {
    for (int64_t i = 0; i < n; i++) {
        lo[i] = TL[i] * (P[i] - 0x1p-51) * Q[i];
        hi[i] = TH[i] * (P[i] + 0x1p-51) * Q[i];
    }
}
ER_ALWAYS_INLINE void er_exp_run_body(int64_t n, const double *restrict t, double *restrict lo, double *restrict hi) {
    double P[ER_EXP_RUN], Q[ER_EXP_RUN], TL[ER_EXP_RUN], TH[ER_EXP_RUN];
    int J[ER_EXP_RUN];
    uint8_t out[ER_EXP_RUN];
    for (int64_t i0 = 0; i0 < n; i0 += ER_EXP_RUN) {
        int64_t k = n - i0 < ER_EXP_RUN ? n - i0 : ER_EXP_RUN;
        er_exp_run_poly(k, t + i0, P, J, Q, out);
        for (int64_t i = 0; i < k; i++) {
            TL[i] = er__exp_tlo[J[i]];
            TH[i] = er__exp_thi[J[i]];
        }
        er_exp_run_mul(k, P, Q, TL, TH, lo + i0, hi + i0);
        for (int64_t i = 0; i < k; i++)
            if (out[i]) er__exp_bounds(t[i0 + i], &lo[i0 + i], &hi[i0 + i]);
    }
}
ER_SIMD_BUILDS(er_exp_run, (int64_t n, const double *restrict t, double *restrict lo, double *restrict hi),
               (n, t, lo, hi), er_exp_run_body)

void er__exp_bounds_run(int simd, int64_t n, const double *t, double *lo, double *hi) {
    er_exp_run(simd, n, t, lo, hi);
}

/* Lemma D10: x = m 2^k with m in [0.7, 1.42); libm's log(m) as a guess y, moved by 2^-62 + 2^-52 |y| to the side
 * asked and certified by Lemma D8's exp at the moved value (exp(y') <= m, or >= m, within its 2^-65); then k ln 2
 * added as k c1 (exact) + k c2 with their error, each sum rounded outward. */
int er__log_fast(double x, int up, double *r) {
    if (!(x > 0) || !(x <= DBL_MAX)) return 0;
    int k;
    double m = 2.0 * frexp(x, &k); /* exact: m in [1, 2) */
    k -= 1;
    if (m > 1.4142135623730951) { m *= 0.5; k += 1; } /* m in [0.7, 1.42): log m near 0 where x is near 1 */
    double y = log(m), yd, h, l;
    yd = up ? y + (0x1p-62 + fabs(y) * 0x1p-52) : y - (0x1p-62 + fabs(y) * 0x1p-52);
    er__exp_dd(yd, &h, &l); /* |yd| < 0.35: within Lemma D8's range */
    /* h is within a factor 2 of m, so m - h and h - m are exact (Sterbenz) */
    if (up ? !(er__dn((h - m) + er__dn(l - h * 0x1p-64)) >= 0) : !(m - h >= er__up(l + h * 0x1p-64))) return 0;
    if (k == 0) { /* log x = log m: yd itself */
        *r = yd;
        return 1;
    }
    double kd = (double)k, a = kd * er_ln2_c1, b = kd * er_ln2_c2; /* k c1 exact: |k| <= 1075 < 2^11 */
    *r = up ? er__up(a + er__up(er__up(er__up(b) + 0x1p-85) + yd))
            : er__dn(a + er__dn(er__dn(er__dn(b) - 0x1p-85) + yd));
    return 1;
}

double er__log_dir(double x, int up) {
    er__exp_init();
    double r;
    if (er__log_fast(x, up, &r)) return r;
    mpfr_t a;
    mpfr_init2(a, 64);
    mpfr_set_d(a, x, MPFR_RNDN);
    mpfr_log(a, a, up ? MPFR_RNDU : MPFR_RNDD);
    r = mpfr_get_d(a, up ? MPFR_RNDU : MPFR_RNDD);
    mpfr_clear(a);
    return r;
}

/* ---- 1/sqrt(v) rounded down and up (double-bounds.md, Lemma D12) ---- */

/* The sign of r^2 v - 1 for positive finite doubles r and v, exactly: with r = mr 2^er and v = mv 2^ev (integers
 * mr, mv < 2^53), r^2 v - 1 has the sign of mr^2 mv - 2^K, K = -(2 er + ev); mr^2 mv < 2^159 is a 192-bit integer. */
static int er_rsq_cmp(double r, double v) {
    int er, ev;
    double fr = frexp(r, &er), fv = frexp(v, &ev); /* r = fr 2^er, fr in [1/2, 1): mr = fr 2^53 */
    uint64_t mr = (uint64_t)ldexp(fr, 53), mv = (uint64_t)ldexp(fv, 53);
    long K = -(2L * (er - 53) + (ev - 53));
    unsigned __int128 r2 = (unsigned __int128)mr * mr, lo = (unsigned __int128)(uint64_t)r2 * mv,
                      hi = (unsigned __int128)(uint64_t)(r2 >> 64) * mv + (uint64_t)(lo >> 64);
    uint64_t w[3] = {(uint64_t)lo, (uint64_t)hi, (uint64_t)(hi >> 64)}; /* mr^2 mv, the least limb first */
    int bl = 0, pow2 = 0;
    for (int i = 2; i >= 0 && !bl; i--)
        if (w[i]) {
            bl = 64 * i + 64 - __builtin_clzll(w[i]);
            pow2 = (w[i] & (w[i] - 1)) == 0;
            for (int j = 0; j < i; j++) pow2 &= w[j] == 0;
        }
    if (K < 0 || bl > K + 1) return 1; /* the product, at least 1, is above 2^K */
    if (bl <= K) return -1;
    return pow2 ? 0 : 1;               /* bitlen K + 1: 2^K itself or above it */
}

int er__rsqrt_dirs(double v, double *rd, double *ru) {
    if (!(v > 0) || v == INFINITY) return 0;
    double r = 1.0 / sqrt(v); /* within two ulps of 1/sqrt(v), a normal double (2^-512 < r < 2^538) */
    int c = er_rsq_cmp(r, v), steps = 0;
    if (c > 0) /* r above: down to the first at or below */
        while (c > 0 && steps++ < 8) r = er__dn(r), c = er_rsq_cmp(r, v);
    else /* r at or below: up while the next one is too */
        while (steps++ < 8) {
            double s = er__up(r);
            int cs = er_rsq_cmp(s, v);
            if (cs > 0) break;
            r = s;
            c = cs;
        }
    if (c > 0 || steps > 8) return 0; /* never: the first guess is within two steps */
    *rd = r;
    *ru = c == 0 ? r : er__up(r);
    return 1;
}
