/* sqwin.h: the exact sum of squares S = sum_j x_j^2 of a row of values of at most 24 bits (fp32, fp16, bf16), as a
 * fixed-point window: the GPU path of rmsnorm sums a row's squares with these functions and the host reads the
 * summary that er__dot_summary would give (m, e, sticky: S = (m + frac) 2^e, m's top bit set) from the window,
 * where the window decides it (docs/algorithms/rmsnorm.md, On the GPU). One copy for the host and the GPU (plain C,
 * no library header). */
#ifndef ER_SQWIN_H
#define ER_SQWIN_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ER_SQ_HD __host__ __device__
#else
#define ER_SQ_HD
#endif

typedef unsigned __int128 er_sq_u128;

/* What the GPU hands the host of one row of n values: its window W = wlo + 2^64 whi at last bit b, whether some square
 * lay below it (tail), the sum to nearest of the squares in the rows' one order (pos: er_sqwin_pos's), and whether
 * the row holds a NaN or an infinity (special: the host's row). */
typedef struct er_sqwin_row {
    uint64_t wlo, whi;
    double pos;
    int32_t b;
    uint8_t tail, special, pad[2];
} er_sqwin_row;

/* The lanes of the rows' one order of a sum of squares: the GPU's block size. */
#define ER_SQWIN_LANES 256

/* The sum to nearest of x_j^2 over a row of n values of at most 24 bits (each square exact in double) in the rows'
 * one order, which the GPU's block keeps too: ER_SQWIN_LANES partial sums, the t-th adding x_j^2 for j = t,
 * t + ER_SQWIN_LANES, ... in turn from 0, then the partial sums added in turn from the 0th (Lemma 4 of any-order.md
 * bounds a sum of nonnegative terms to nearest in any order). */
static inline double er_sqwin_pos(const double *x, int64_t n) {
    double p[ER_SQWIN_LANES] = { 0 }, s = 0;
    for (int64_t j0 = 0; j0 < n; j0 += ER_SQWIN_LANES) {
        int64_t m = n - j0 < ER_SQWIN_LANES ? n - j0 : ER_SQWIN_LANES;
        for (int64_t t = 0; t < m; t++) p[t] += x[j0 + t] * x[j0 + t];
    }
    for (int t = 0; t < ER_SQWIN_LANES; t++) s += p[t];
    return s;
}

/* The window's last bit b for a row whose largest |x_j| is amax (finite, > 0): with amax < 2^k, every square is below
 * 2^(2k) and b = 2k - 96, so a square is below 2^96 units of 2^b and n < 2^31 of them below 2^127. */
ER_SQ_HD static inline int er_sqwin_base(double amax) {
    int k;
    frexp(amax, &k);
    return 2 * k - 96;
}

/* floor(v^2 / 2^b) for a value v of at most 24 bits (v^2 exact in double) with v^2 < 2^(b + 96); *rem |= 1 where
 * v^2 is not a multiple of 2^b. */
ER_SQ_HD static inline er_sq_u128 er_sqwin_term(double v, int b, int *rem) {
    double p = v * v;
    if (p == 0) return 0;
    int e;
    double f = frexp(p, &e);                        /* p = f 2^e, f in [1/2, 1) */
    uint64_t M = (uint64_t)ldexp(f, 53);            /* p = M 2^(e - 53), M < 2^53, exact */
    int s = e - 53 - b;
    if (s >= 0) return (er_sq_u128)M << s;          /* s <= 43: p < 2^(b + 96) */
    if (s <= -64) { *rem |= 1; return 0; }
    *rem |= (M & ((UINT64_C(1) << -s) - 1)) != 0;
    return (er_sq_u128)(M >> -s);
}

/* The summary of S = W 2^b + t 2^b, 0 <= t < n, t > 0 iff tail (W the sum of the floors of n terms, tail whether
 * some term was not a multiple of 2^b): *m, *e, *sticky as er__acc_summary gives them (m = 0, e = 0 for S = 0).
 * Returns 1 where W decides them, 0 where t could carry into m's bits or W is too short to hold them. */
ER_SQ_HD static inline int er_sqwin_summary(er_sq_u128 W, int b, int tail, int64_t n, uint64_t *m, int64_t *e,
                                            int *sticky) {
    if (W == 0) {
        if (tail) return 0;
        *m = 0;
        *e = 0;
        *sticky = 0;
        return 1;
    }
    uint64_t hi = (uint64_t)(W >> 64);
    int bits = 0;
    for (er_sq_u128 w = hi ? (er_sq_u128)hi : W; w; w >>= 1) bits++;
    if (hi) bits += 64;
    int drop = bits - 64;
    if (drop <= 0) {
        if (tail) return 0; /* t would reach m's bits */
        *m = (uint64_t)W << -drop;
        *e = (int64_t)b + drop;
        *sticky = 0;
        return 1;
    }
    er_sq_u128 low = W & (((er_sq_u128)1 << drop) - 1);
    /* S / 2^(b + drop) = (W >> drop) + (low + t) / 2^drop: no carry into m where low + n <= 2^drop (t < n) */
    if (tail && low + (er_sq_u128)n > ((er_sq_u128)1 << drop)) return 0; /* drop <= 63: W < 2^127 */
    *m = (uint64_t)(W >> drop);
    *e = (int64_t)b + drop;
    *sticky = low != 0 || tail;
    return 1;
}

#endif
