/* lnsums.h: a layernorm row's exact sums S = sum_j x_j, Q = sum_j x_j^2 and A = sum_j |x_j| as 128-bit integers in
 * units of 2^lsb (Q: 2^(2 lsb)), lsb the lowest set bit of any x_j. The host's exact statistics (enclose/layernorm.c)
 * and the first kernel of layernorm's GPU path (cuda/devln.cu) sum with these functions: the sums are exact, so any
 * order gives the same integers (docs/algorithms/layernorm.md, On the GPU). One copy for the host and the GPU (plain
 * C, no library header). */
#ifndef ER_LNSUMS_H
#define ER_LNSUMS_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define ER_LN_HD __host__ __device__
#else
#define ER_LN_HD
#endif

typedef unsigned __int128 er_ln_u128;

/* One row as the GPU hands it to the host: the three integers (S in two's complement), lsb, the largest |x_j|, the
 * least and the greatest x_j; special: a NaN or an infinity in the row; fits: the integers hold the sums (else the
 * host sums the row in MPFR). */
typedef struct er_ln_sums {
    uint64_t s_lo, s_hi, q_lo, q_hi, a_lo, a_hi;
    double X, xmin, xmax;
    int32_t lsb;
    uint8_t special, fits, pad[2];
} er_ln_sums;

/* A finite double v as m 2^(ex - 1075), m < 2^53 an integer: 0 for v = 0. */
ER_LN_HD static inline int er_ln_split(double v, uint64_t *m, int *ex) {
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    *m = b & ((UINT64_C(1) << 52) - 1);
    *ex = (int)((b >> 52) & 0x7ff);
    if (*ex == 0 && *m == 0) return 0;
    if (*ex) *m |= UINT64_C(1) << 52;
    else *ex = 1;
    return 1;
}

/* The bits of a finite double v: v is an integer times 2^*lo and |v| < 2^*hi. 0 for v = 0. */
ER_LN_HD static inline int er_ln_bits(double v, int *lo, int *hi) {
    uint64_t m;
    int ex;
    if (!er_ln_split(v, &m, &ex)) return 0;
#ifdef __CUDA_ARCH__
    *lo = ex - 1075 + __ffsll((long long)m) - 1;
    *hi = ex - 1075 + 64 - __clzll((long long)m);
#else
    *lo = ex - 1075 + __builtin_ctzll(m);
    *hi = ex - 1075 + 64 - __builtin_clzll(m);
#endif
    return 1;
}

/* Whether the integers hold the sums of n values whose bits lie in [lsb, top): |Q| < 2^(2 (top - lsb) + bitlen(n))
 * below 2^125, so S, A < 2^((top - lsb) + bitlen(n)) too, and every |x_j| < 2^62 units. */
ER_LN_HD static inline int er_ln_fits(int lsb, int top, int64_t n) {
    int bl = 0;
    for (int64_t k = n; k; k >>= 1) bl++;
    return top < lsb || 2 * (top - lsb) + bl <= 125;
}

/* |v| in units of 2^lsb, exact: v finite, lsb at or below v's lowest bit, |v| < 2^(lsb + 62). */
ER_LN_HD static inline uint64_t er_ln_units(double v, int lsb) {
    uint64_t m;
    int ex;
    if (!er_ln_split(v, &m, &ex)) return 0;
    int sh = ex - 1075 - lsb; /* v = m 2^(sh + lsb), sh >= -52 */
    return sh >= 0 ? m << sh : m >> -sh;
}

/* v's share of the three sums: s += v, q += v^2, a += |v| in units (u = er_ln_units(v, lsb)). */
ER_LN_HD static inline void er_ln_add(double v, uint64_t u, er_ln_u128 *s, er_ln_u128 *q, er_ln_u128 *a) {
    *s += v < 0 ? -(er_ln_u128)u : (er_ln_u128)u; /* two's complement: the sum wraps to S */
    *q += (er_ln_u128)u * u;
    *a += u;
}

#endif
