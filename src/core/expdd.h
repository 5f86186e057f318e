/* expdd.h: exp(t) in two doubles (double-bounds.md, Lemma D8), one copy for the host (enclose/ival.h, er__exp_dd)
 * and the GPU (cuda/devsm.cu, softmax's open elements): the reduction's constants lh and ll and the tables t1 and t2
 * (64 entries each) passed in. Plain C, no library header. */
#ifndef ER_EXPDD_H
#define ER_EXPDD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define ER_XD_HD __host__ __device__
#else
#define ER_XD_HD
#endif

/* exp(t) for -690 <= t <= 1 as *h + *l, within 2^-65 exp(t) of it, |*l| <= 2^-52 |*h| (Lemma D8): Theorem D1's
 * reduction carried in two doubles, r = rh + rl within 2^-78.9 of t - k L; exp(rh) = 1 + rh + rh^2 Q(rh) with Q's
 * Taylor terms to rh^6/8!; rl joins as rl (1 + rh); the product by 2^(j/64) held as t1 + t2. Built with every double
 * operation rounded once (-ffp-contract=off, -fmad=false): the fused products are the fma calls. */
ER_XD_HD static inline void er_exp_dd_tab(double t, double lh, double ll, const double *t1s, const double *t2s,
                                          double *h, double *l) {
    double kd = (t * 92.332482616893656877 + 0x1.8p52) - 0x1.8p52;
    int k = (int)kd;
    double s = t - kd * lh;                                      /* exact: k lh and the difference */
    double p = kd * ll, pe = fma(kd, ll, -p);                    /* k ll = p + pe */
    double rh = s - p, bv = rh - s, e1 = (s - (rh - bv)) + (-p - bv); /* TwoSum: rh + e1 = s - p */
    double rl = e1 - pe;
    double q = 1.0 / 40320.0;
    q = q * rh + 1.0 / 5040.0;
    q = q * rh + 1.0 / 720.0;
    q = q * rh + 1.0 / 120.0;
    q = q * rh + 1.0 / 24.0;
    q = q * rh + 1.0 / 6.0;
    q = q * rh + 0.5;
    double z = (rh * rh) * q;                                    /* rh^2 Q(rh) */
    double a = 1.0 + rh, bb = a - 1.0, b = (1.0 - (a - bb)) + (rh - bb); /* TwoSum: a + b = 1 + rh */
    double c = b + (z + (rl + rl * rh));
    double eh = a + c, el = c - (eh - a);                        /* Fast2Sum (|a| >= |c|) */
    int j = k & 63, qq = (k - j) / 64;
    double t1 = t1s[j], t2 = t2s[j];
    double v1 = t1 * eh, v2 = fma(t1, eh, -v1);                  /* TwoProd */
    double w = v2 + (t1 * el + t2 * eh);
    double vh = v1 + w, vl = w - (vh - v1);                      /* Fast2Sum */
    uint64_t bits = (uint64_t)(qq + 1023) << 52;                 /* 2^q, q >= -996 */
    double sc;
    memcpy(&sc, &bits, sizeof sc);
    *h = vh * sc;
    *l = vl * sc;
}

#endif
