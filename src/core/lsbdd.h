/* lsbdd.h: log_softmax's backward exact results in double-double (softmax-backward.md, Lemma B5), for the elements
 * the double step leaves open, one copy for the host (enclose/softmax_bwd.c, er__lsbwd_row) and the GPU
 * (cuda/devsbwd.cu): dx = dy - exp(y) S with exp(y) from Lemma D8 and S from its summary's 64 bits, the correct
 * rounding into an output format of at most 24 bits certified by the signs of dx minus the midpoints around it.
 * Plain C, no library header. */
#ifndef ER_LSBDD_H
#define ER_LSBDD_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/ddsign.h"
#include "core/expdd.h"

/* The constants a log_softmax_backward row holds on the GPU (er__lsbwd_dev_row): S~'s set's ends, S's bounds in
 * double, S = 0, and the two low parts below (a0, a1). */
#define ER_LSBWD_DEV_CONSTS 7

/* An element's terms: exp(y) = h + l within 2^-65 (Lemma D8), |S|'s ends as pairs k[0] + k[1] <= |S| <=
 * k[2] + k[3] (|k[1]| <= 2^-53 k[0], |k[3]| <= 2^-53 k[2]) and S's sign. */
typedef struct er_lsb_dd {
    double h, l, k[4];
    int neg;
} er_lsb_dd;

/* For |S| in [M + a0, M + a1] (M = m 2^e with m's last 11 bits cleared, m of 64 bits with its top bit set, a0 and a1
 * below 2^(e + 11): exact doubles), S of sign neg, and -600 <= y <= 1: the terms into *d and the report's
 * value of dx = dy - exp(y) S into *ex, within 2^-43 |dx|; 0 where y, the products or ex lie outside Lemma B5's
 * range or ex's bound does not hold. */
ER_XD_HD static inline int er_lsb_dd_value(double dy, double y, double M, double a0, double a1, int neg, double lh,
                                           double ll, const double *t1, const double *t2, er_lsb_dd *d, double *ex) {
    if (!(y >= -600.0 && y <= 1.0 && M > 0 && fabs(dy) <= 0x1p900)) return 0;
    double h, l;
    er_exp_dd_tab(y, lh, ll, t1, t2, &h, &l);
    if (!(h >= 0x1p-900 && h * M >= 0x1p-900 && h * M <= 0x1p900)) return 0;
    d->h = h;
    d->l = l;
    d->neg = neg;
    double s0 = M + a0, s1 = M + a1; /* Fast2Sum (M >= 2^52 a0, a1): exact */
    d->k[0] = s0;
    d->k[1] = a0 - (s0 - M);
    d->k[2] = s1;
    d->k[3] = a1 - (s1 - M);
    /* ex = dy - (h + l)(k[0] + k[1]) (S's lower end, signed) in double-double, rounded once at the end */
    double kh = neg ? -d->k[0] : d->k[0], kl = neg ? -d->k[1] : d->k[1];
    double p1 = h * kh, p2 = fma(h, kh, -p1), c = h * kl + l * kh;
    double xh = dy - p1, bv = xh - dy, xl = (dy - (xh - bv)) + (-p1 - bv); /* TwoSum: xh + xl = dy - p1 */
    double v = xh + ((xl - p2) - c);
    if (!(fabs(v) <= 0x1p900 && 0x1p-62 * (fabs(p1) + fabs(xh)) <= 0x1p-43 * fabs(v))) return 0;
    *ex = v;
    return 1;
}

/* The sign of dx - mu (mu a double, |mu| <= 2^900): 1 or -1 where certain, else 0. */
ER_XD_HD static inline int er_lsb_dd_side(const er_lsb_dd *d, double dy, double mu) {
    double bh = dy - mu, bv = bh - dy, bl = (dy - (bh - bv)) + (-mu - bv); /* TwoSum: bh + bl = dy - mu */
    if (d->neg) {
        bh = -bh;
        bl = -bl;
    }
    /* dx - mu = (+-1)(B - exp(y) |S|), B = +-(dy - mu) = bh + bl; exp(y) between h + lo and h + hi */
    double lo = er_xd_dn(d->l - d->h * 0x1p-64), hi = er_xd_up(d->l + d->h * 0x1p-64);
    int t = bh <= 0                                                 ? -1
            : er_dd_sign(bh, bl, d->k[2], d->k[3], d->h, hi) == 1   ? 1
            : er_dd_sign(bh, bl, d->k[0], d->k[1], d->h, lo) == -1  ? -1
                                                                    : 0;
    return d->neg ? -t : t;
}

/* The midpoints between r (finite, 0 < |r| < the format's largest value; p <= 24 bits, least normal exponent emin) and
 * its neighbours in the format: *mlo below r, *mhi above (exact doubles). */
ER_XD_HD static inline void er_lsb_mids(double r, int p, int emin, double *mlo, double *mhi) {
    double a = fabs(r);
    uint64_t b;
    memcpy(&b, &a, sizeof b);
    int e = (int)(b >> 52) - 1023, q = (e > emin ? e : emin) - p; /* half r's spacing above: 2^q */
    uint64_t hb = (uint64_t)(q + 1023) << 52;
    double half;
    memcpy(&half, &hb, sizeof half);
    double below = e > emin && (b << 12) == 0 ? 0.5 * half : half; /* a power of two: the spacing below halves */
    *mlo = r > 0 ? a - below : -(a + half);
    *mhi = r > 0 ? a + half : -(a - below);
}

/* Whether r (as er_lsb_mids takes it) is the correct rounding of dx: dx lies strictly between r's midpoints. */
ER_XD_HD static inline int er_lsb_dd_rounds_to(const er_lsb_dd *d, double dy, double r, int p, int emin) {
    double mlo, mhi;
    er_lsb_mids(r, p, emin, &mlo, &mhi);
    return er_lsb_dd_side(d, dy, mlo) == 1 && er_lsb_dd_side(d, dy, mhi) == -1;
}

/* Lemma B5 (b): for y < -600, S != 0 of sign neg with |S| <= 2 M <= 2^200, 2^-600 <= |dy| <= 2^900 and r = dy rounded
 * to nearest into the format (as er_lsb_mids takes it): dx's correct rounding into *rd (r, or r's neighbour on the side
 * of -S where dy is a midpoint); the report's value is dy. 0 where those do not hold. */
ER_XD_HD static inline int er_lsb_dd_tiny(double dy, double y, double M, int neg, double r, int p, int emin,
                                          double *rd) {
    if (!(y < -600.0 && M <= 0x1p199 && fabs(dy) >= 0x1p-600 && fabs(dy) <= 0x1p900)) return 0;
    double mlo, mhi;
    er_lsb_mids(r, p, emin, &mlo, &mhi);
    double v = dy == mlo && !neg ? 2 * mlo - r : dy == mhi && neg ? 2 * mhi - r : r; /* dx - dy has -S's sign */
    *rd = v == 0 ? copysign(0.0, dy) : v;
    return 1;
}

#endif
