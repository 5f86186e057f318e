/* pwin.h: the exact sum S = sum_j p_j of a row of signed terms, each an exact double (a product of two values of at
 * most 24 bits, or such a product rounded to fp16 or bf16), as a fixed-point window: the GPU path of softmax's
 * backward pass sums each row's products dy_j y_j with these functions, and the host reads from the window the
 * summary that er__dot_summary would give (neg, m, e, sticky) where the window decides it, and S's leading bits as
 * two doubles with a bound of the rest (docs/algorithms/softmax-backward.md, On the GPU: Lemma B4). The positive
 * terms and the negative terms' magnitudes are also summed to nearest in the rows' one order (er_pwin_lanes), which the
 * host's rows keep too. One copy for the host and the GPU (plain C, no library header). */
#ifndef ER_PWIN_H
#define ER_PWIN_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ER_PW_HD __host__ __device__
#else
#define ER_PW_HD
#endif

typedef unsigned __int128 er_pw_u128;
typedef __int128 er_pw_i128;

/* What the GPU hands the host of one row's terms: the window W (two's complement, wlo + 2^64 whi) at last bit b,
 * whether some term was not a multiple of 2^b (tail), the positive terms and the negative terms' magnitudes summed to
 * nearest in the rows' one order (pos, negs), and whether some term is not finite or was not formed (special: the
 * host's row). */
typedef struct er_pwin_row {
    uint64_t wlo, whi;
    double pos, negs;
    int32_t b;
    uint8_t tail, special, pad[2];
} er_pwin_row;

/* The lanes of the rows' one order: the GPU's block size. */
#define ER_PWIN_LANES 256

/* The positive terms' sum and the negative terms' magnitudes' sum to nearest in the rows' one order, each term
 * p_j = a_j b_j (b NULL: a_j), exact in double: ER_PWIN_LANES partial sums, the t-th adding p_j for j = t,
 * t + ER_PWIN_LANES, ... in turn from 0, then the partial sums added in turn from the 0th (Lemma 4 of any-order.md
 * bounds such sums in any order). */
static inline void er_pwin_lanes(const double *a, const double *b, int64_t n, double *pos, double *negs) {
    double lp[ER_PWIN_LANES] = {0}, ln[ER_PWIN_LANES] = {0}, sp = 0, sn = 0;
    for (int64_t j0 = 0; j0 < n; j0 += ER_PWIN_LANES) {
        int64_t m = n - j0 < ER_PWIN_LANES ? n - j0 : ER_PWIN_LANES;
        for (int64_t t = 0; t < m; t++) {
            double p = b ? a[j0 + t] * b[j0 + t] : a[j0 + t];
            lp[t] += p > 0 ? p : 0.0;
            ln[t] += p < 0 ? -p : 0.0;
        }
    }
    for (int t = 0; t < ER_PWIN_LANES; t++) {
        sp += lp[t];
        sn += ln[t];
    }
    *pos = sp;
    *negs = sn;
}

/* The window's last bit b for a row whose largest |p_j| is pmax (finite, > 0): with pmax < 2^k, every term is below
 * 2^k and b = k - 96, so a term is below 2^96 units of 2^b and the sum of n < 2^31 of them below 2^127. */
ER_PW_HD static inline int er_pwin_base(double pmax) {
    int k;
    frexp(pmax, &k);
    return k - 96;
}

/* floor(p / 2^b) for an exact double p with |p| < 2^(b + 96); *rem |= 1 where p is not a multiple of 2^b. */
ER_PW_HD static inline er_pw_i128 er_pwin_term(double p, int b, int *rem) {
    if (p == 0) return 0;
    int e, r = 0;
    double f = frexp(fabs(p), &e);                  /* |p| = f 2^e, f in [1/2, 1) */
    uint64_t M = (uint64_t)ldexp(f, 53);            /* |p| = M 2^(e - 53), M < 2^53, exact */
    int s = e - 53 - b;
    er_pw_u128 q;
    if (s >= 0) q = (er_pw_u128)M << s;             /* s <= 43 */
    else if (s <= -64) { q = 0; r = 1; }
    else { q = M >> -s; r = (M & ((UINT64_C(1) << -s) - 1)) != 0; }
    *rem |= r;
    /* a negative term's floor: -ceil(|p| / 2^b) */
    return p > 0 ? (er_pw_i128)q : -(er_pw_i128)q - r;
}

/* The number of significant bits of a nonzero 128-bit magnitude. */
ER_PW_HD static inline int er_pwin_bits(er_pw_u128 a) {
    uint64_t hi = (uint64_t)(a >> 64), w = hi ? hi : (uint64_t)a;
    int bits = 0;
    while (w) { bits++; w >>= 1; }
    return hi ? bits + 64 : bits;
}

/* The summary of S = (W + t) 2^b, 0 <= t < n, t > 0 iff tail (W the sum of the floors of n terms, tail whether some
 * term was not a multiple of 2^b): *neg, *m, *e, *sticky as er__acc_summary gives them (m = 0, e = 0 for S = 0;
 * |S| = (m + frac) 2^e, m's top bit set). Returns 1 where W decides them, 0 where t could reach m's bits (a carry
 * above, a borrow below) or W is too short to hold them. */
ER_PW_HD static inline int er_pwin_summary(er_pw_i128 W, int b, int tail, int64_t n, int *neg, uint64_t *m,
                                           int64_t *e, int *sticky) {
    if (W == 0) {
        if (tail) return 0;
        *neg = 0;
        *m = 0;
        *e = 0;
        *sticky = 0;
        return 1;
    }
    int ng = W < 0;
    er_pw_u128 A = ng ? (er_pw_u128)0 - (er_pw_u128)W : (er_pw_u128)W; /* |W| < 2^127 */
    int drop = er_pwin_bits(A) - 64;
    if (drop <= 0) {
        if (tail) return 0; /* t would reach m's bits */
        *neg = ng;
        *m = (uint64_t)A << -drop;
        *e = (int64_t)b + drop;
        *sticky = 0;
        return 1;
    }
    er_pw_u128 low = A & (((er_pw_u128)1 << drop) - 1);
    if (tail) {
        /* W >= 0: |S| / 2^(b + drop) = (A >> drop) + (low + t) / 2^drop, no carry where low + n <= 2^drop.
         * W < 0: |S| = A - t, (A >> drop) + (low - t) / 2^drop, no borrow and a nonzero rest where low >= n. */
        if (!ng && low + (er_pw_u128)n > ((er_pw_u128)1 << drop)) return 0;
        if (ng && low < (er_pw_u128)n) return 0;
    }
    *neg = ng;
    *m = (uint64_t)(A >> drop);
    *e = (int64_t)b + drop;
    *sticky = low != 0 || tail;
    return 1;
}

/* A magnitude below 2^127 to the nearest double, ties to even. */
ER_PW_HD static inline double er_pwin_u128_rn(er_pw_u128 v) {
    uint64_t H = (uint64_t)(v >> 64), L = (uint64_t)v;
    if (H == 0) return (double)L; /* to nearest */
    int lz = 128 - er_pwin_bits(v);
    if (lz) { H = (H << lz) | (L >> (64 - lz)); L <<= lz; }
    uint64_t mant = H >> 11, rest = H & 0x7ff;
    int half = (int)((rest >> 10) & 1), sticky = (rest & 0x3ff) != 0 || L != 0;
    if (half && (sticky || (mant & 1))) mant++;
    return ldexp((double)mant, 75 - lz);
}

/* S = (W + t) 2^b as S = dd[0] + dd[1] + r, |r| <= dd[2] (dd[0] the nearest double to W 2^b, dd[1] the nearest to the
 * rest of W, dd[2] what is left of W and n where tail, exact), for 2^b and n 2^b within double's normal range and
 * W 2^b below 2^1000; else dd[0] NaN. */
ER_PW_HD static inline void er_pwin_dd(er_pw_i128 W, int b, int tail, int64_t n, double *dd) {
    if (b < -1000 || b + 160 > 1000) {
        dd[0] = dd[1] = dd[2] = NAN;
        return;
    }
    double sg = W < 0 ? -1.0 : 1.0;
    er_pw_u128 A = W < 0 ? (er_pw_u128)0 - (er_pw_u128)W : (er_pw_u128)W;
    double h = er_pwin_u128_rn(A);                        /* an integer below 2^127 */
    er_pw_i128 r1 = (er_pw_i128)(A - (er_pw_u128)h);      /* |r1| <= 2^73: exact in two's complement */
    double l = r1 < 0 ? -er_pwin_u128_rn((er_pw_u128)-r1) : er_pwin_u128_rn((er_pw_u128)r1);
    er_pw_i128 r2 = r1 - (er_pw_i128)l;                   /* |r2| < 2^21 */
    double rest = (double)(r2 < 0 ? -r2 : r2) + (tail ? (double)n : 0.0); /* exact: below 2^53 */
    dd[0] = sg * ldexp(h, b);
    dd[1] = sg * ldexp(l, b);
    dd[2] = ldexp(rest, b);
}

#endif
