// devapprox.cuh: the device code of the row paths' exps (devsm.cu, devxe.cu): exp(t + e) from exp(t)'s bounds, and an
// approximate function's ends in fp32, each repeating a host function operation for operation. Included by .cu files
// built with -fmad=false, after devrec.cuh.
#ifndef ER_DEVAPPROX_CUH
#define ER_DEVAPPROX_CUH

#include "cuda/devrec.cuh"

// exp(t + e) from the bounds [lo, hi] of exp(t), |e| <= 2^-30; below, exp(x_j - m) < 2^-1074 (er_exps_shift, exps.c).
__device__ static inline void er_exps_shift(double e, double *lo, double *hi) {
    if (e != 0 && fabs(e) <= 0x1p-30) {
        *lo = er_dn(*lo * er_dn(1.0 - 2.0 * fabs(e)));
        *hi = er_up(*hi * er_up(1.0 + 2.0 * fabs(e)));
        if (*lo < 0) *lo = 0;
    } else if (e != 0) {
        *lo = 0;
        *hi = 4.9406564584124654e-324;
    }
}

// ---- an approximate function's ends in fp32 (er__approx_ends, approx.h; its general case, approx.c) ----

#define ER_F32_MIN_NORMAL 0x1p-126
#define ER_F32_MIN_SUB 0x1p-149
__device__ static double er_spacing(double x) {
    double z = fabs(x);
    if (z < 2.0 * ER_F32_MIN_NORMAL) return ER_F32_MIN_SUB;
    int ex;
    frexp(z, &ex);
    return ldexp(1.0, ex - 24);
}
__device__ static double er_g(double U, double x) {
    double s = er_mul_up(U, er_spacing(x)), r = x - s, bb = r - x, e = (x - (r - bb)) + (-s - bb);
    return e < 0 ? er_dn(r) : r;
}
__device__ static double er_g_min(double U, double a, double b) {
    double m = er_g(U, a);
    if (a > 0) {
        int ex;
        frexp(a, &ex);
        double P = ldexp(1.0, ex);
        if (P <= b) {
            double gp = er_g(U, P);
            if (gp < m) m = gp;
        }
    }
    return m;
}
__device__ static double er_low(double U, double a, double b) {
    if (a == -INFINITY) return -INFINITY;
    if (b == INFINITY) b = DBL_MAX;
    double ca = er_f32_rn(a), cb = er_f32_rn(b);
    if (cb == INFINITY) cb = FLT_MAX;
    double m = er_g_min(U, a, b);
    if (ca == INFINITY) return m;
    if (ca == -INFINITY) return -INFINITY;
    double mr = er_g_min(U, ca, cb);
    return mr < m ? mr : m;
}
__device__ static void er_approx_ends(double U, double a, double b, double *lo, double *hi) {
    if (a >= 2.0 * ER_F32_MIN_NORMAL && b <= FLT_MAX && a >= DBL_MIN) {
        uint64_t ea = er_bits(a) >> 52, eb = er_bits(b) >> 52;
        if (ea == eb && (int64_t)ea >= 24) {
            double top = er_from_bits((ea + 1) << 52), ca = er_f32_rn(a), cb = er_f32_rn(b);
            if (cb < top) {
                double sp = er_from_bits((uint64_t)((int64_t)ea + 1 - 24) << 52), m = ca < a ? ca : a,
                       M = cb > b ? cb : b, us = U * sp;
                if (U >= 0 && U <= 0x1p30 && (double)(int64_t)U == U && us <= 0.125 * m) {
                    *lo = er_f32_ru(m - us);
                    *hi = er_f32_rd(M + us);
                    return;
                }
                double s = er_mul_up(U, sp);
                *lo = er_f32_ru(er_dn(m - s));
                *hi = er_f32_rd(er_up(M + s));
                return;
            }
        }
    }
    double L = er_low(U, a, b), H = -er_low(U, -b, -a);
    *lo = L == -INFINITY ? -INFINITY : er_f32_ru(L);
    *hi = H == INFINITY ? INFINITY : er_f32_rd(H);
}

#endif
