/* tanhser.h: tanh by its odd Taylor series near 0 (double-bounds.md, Lemma D9), one copy for the host
 * (enclose/ival.h, er__tanh_small_bounds) and the GPU (cuda/devchain.cu, the chain's epilogue pass). Plain C, no
 * library header; built with every double operation rounded once (-ffp-contract=off, -fmad=false). */
#ifndef ER_TANHSER_H
#define ER_TANHSER_H

#include <math.h>

#ifdef __CUDACC__
#define ER_TS_HD __host__ __device__
#else
#define ER_TS_HD
#endif

/* tanh(s) for 2^-900 <= |s| < 1/4, or s = 0 (Lemma D9): s P(s^2), P tanh's odd Taylor series through s^21 over s
 * (coefficients rounded to nearest, Horner's rule), within 2^-48.5 of its value, moved outward by 2^-46 of itself. */
ER_TS_HD static inline void er_tanh_series_bounds(double s, double *lo, double *hi) {
    double z = s * s, p = 0x1.967e18afcafadp-14;
    p = p * z - 0x1.f57d7734d1664p-13;
    p = p * z + 0x1.3558248036744p-11;
    p = p * z - 0x1.7da36452b75e3p-10;
    p = p * z + 0x1.d6d3d0e157de0p-9;
    p = p * z - 0x1.226e355e6c23dp-7;
    p = p * z + 0x1.664f4882c10fap-6;
    p = p * z - 0x1.ba1ba1ba1ba1cp-5;
    p = p * z + 0x1.1111111111111p-3;
    p = p * z - 0x1.5555555555555p-2;
    p = p * z + 1.0;
    double r = s * p, m = fabs(r) * 0x1p-46;
    *lo = r - m;
    *hi = r + m;
}

#endif
