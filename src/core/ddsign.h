/* ddsign.h: the sign of a - k s in double-double (cross-entropy.md, Lemma X4) with the outward steps it takes, one
 * copy for the host (enclose/ival.h: er__up, er__dn, er__dd_sign) and the GPU (cuda/devsm.cu's softmax, devsbwd.cu's
 * log_softmax backward). Plain C, no library header; built with every double operation rounded once (-ffp-contract=off,
 * -fmad=false): the fused products are the fma calls. */
#ifndef ER_DDSIGN_H
#define ER_DDSIGN_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/expdd.h"

/* The double just above a result rounded to nearest (an upper bound of its exact value): +1 unit above 0, -1 below;
 * the least subnormal above +-0; NaN and +inf kept (the neighbour of -inf is -DBL_MAX). */
ER_XD_HD static inline double er_xd_up(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    if (x != x || b == UINT64_C(0x7ff0000000000000)) return x;
    if ((b << 1) == 0) return 4.9406564584124654e-324;
    b += (uint64_t)(1 | ((int64_t)b >> 63));
    memcpy(&x, &b, sizeof b);
    return x;
}
/* The double just below (a lower bound). */
ER_XD_HD static inline double er_xd_dn(double x) { return -er_xd_up(-x); }

/* The sign of a - k s (Lemma X4) for a = ah + al, k = kh + kl, s = sh + sl with ah >= 0, kh, sh > 0, |al| <= 2^-51 ah,
 * |kl| <= 2^-53 kh, |sl| <= 2^-51 sh: 1 or -1 where the computed difference exceeds its error bound, else 0. */
ER_XD_HD static inline int er_dd_sign(double ah, double al, double kh, double kl, double sh, double sl) {
    double p1 = kh * sh, p2 = fma(kh, sh, -p1); /* kh sh = p1 + p2 */
    double c = kh * sl + kl * sh;
    double d1 = ah - p1, d2 = (al - p2) - c, d = d1 + d2;
    double err = 0x1p-52 * fabs(d1) + 0x1p-98 * (ah + p1);
    return er_xd_dn(d) > err ? 1 : er_xd_up(d) < -err ? -1 : 0;
}

#endif
