/* layernorm.h: the sets of a layernorm row: y, the mean and rstd (docs/algorithms/layernorm.md). */
#ifndef ER_LAYERNORM_H
#define ER_LAYERNORM_H

#include "format/format.h"
#include "enclose/anyorder.h"
#include "core/lnsums.h"

/* Welford's bounds' constants for rows of n values (Theorems L3, L4, L6 to L8; er__welford_k_init): gamma_k, D, b and
 * Mt rounded up, 1 - D b rounded down, ... ok = 0: no bound (n too large for F's counts, or D b >= 1). */
typedef struct er_welford_k {
    int64_t n, dd, H1, C1; /* dd: the depth bound (0: none); H1, C1: Theorem L8's levels */
    int bl, ok;            /* bitlen(n) */
    double u, u1, eta;     /* u = 2^-p, 1 + u rounded up, F's least subnormal */
    double g3, g4, g7, G, G1; /* gamma_3, gamma_4, gamma_7, G and 1 + G */
    double D, b, t0;       /* Theorem L3's D and b, t0 = 1 - D b rounded down */
    double Mt, sqMt;       /* (n/2) bitlen(n) + n and its square root */
    double f4, f7;         /* n(n-1) + (n/2) bitlen(n) + 2n (Theorem L4); Theorem L7's square root */
} er_welford_k;

typedef struct er_layernorm_plan {
    const er_fmt_info *F, *X;  /* compute and input formats */
    const er_fmt_info *O[3];   /* output formats of y, mean and rstd (NULL: that output is not checked) */
    er_overflow ov[3];
    double eps;                /* eps as a value of F */
    double U;                  /* rsqrt accuracy in ulps of F */
    int rsqrt_ftz;             /* rsqrt flushes a subnormal argument to 0 (math=triton) */
    double Udiv_n; /* two_pass's divisions by n within this many ulps (div.full.f32: math=triton), 0: rounded */
    int64_t depth;             /* the sums' and the Welford tree's depth bound (0: any tree) */
    int64_t combine_depth;     /* welford: the most combines on a leaf's path (0: depth's bound) */
    int mean;                  /* the two divisions by n: 0 either, 1 divide, 2 reciprocal */
    int variance;              /* 0 or 3 either, 1 two_pass, 2 welford */
    er_anyorder_bound bs, bq;  /* the any-order constants of S and Q for rows of n (er__layernorm_prepare) */
    er_welford_k wk;           /* Welford's constants for rows of n (er__layernorm_prepare) */
} er_layernorm_plan;

/* Sets the plan's per-row-length constants (F and X set) for rows of n elements. */
ER_INTERNAL er_status er__layernorm_prepare(er_layernorm_plan *pl, int64_t n);
/* Welford's constants for rows of n values in F, at most depth inner nodes on a leaf's path (0: any) and at most
 * cdepth combines among them (0: depth's bound): in MPFR at 128 bits, once, then rounded to doubles. */
ER_INTERNAL void er__welford_k_init(er_welford_k *k, const er_fmt_info *F, int64_t n, int64_t depth, int64_t cdepth);
/* Theorems L3 to L8 for one row (A >= |mu|, X = max |x_j|, R >= max x - min x, Thi >= T = sum (x_j - mu)^2): every
 * mean a Welford tree computes is within *EM of mu and its M2 within *ES of T; +inf where k->ok is 0. In doubles,
 * each operation rounded upward (layernorm.md, Evaluating Welford's bounds). */
ER_INTERNAL void er__welford_bounds(const er_welford_k *k, double A, double X, double R, double Thi, double *EM,
                                    double *ES);
/* The mean squares fl(fl(M2 / n) + fl(m m)) a Welford tree within k's depth and combine depth (er__welford_k_init for
 * F and rows of n) can give for the finite row x (Theorems L3 to L8 for m and M2; the division by n as
 * er__div_n_set): [*lo, *hi], values of F. 0, and nothing written, when the row is not finite or its sums may
 * overflow F (no claim). */
ER_INTERNAL int er__welford_ms_set(const er_welford_k *k, const er_fmt_info *F, const double *x, int64_t n,
                                   int mean_mode, double Udiv, double *lo, double *hi);

/* One output's sets (values of F) and exact results: cv, exact (rounded to double) and rounded (correctly
 * rounded to its output format). */
/* One output's sets (cv), exact and correctly rounded results. For y, where lo and hi are given, a row may instead
 * give its sets as intervals (ival = 1; cv not written): element i's set is er__cval_from_ival(lo[i], hi[i], F). */
typedef struct er_ln_out {
    er_cval *cv;
    double *exact, *rounded;
    double *lo, *hi;
    int ival;
} er_ln_out;

/* Row x[0..n) (n >= 1) with weight w and bias b (NULL: none): out[0] gets the n outputs y, out[1] the mean and
 * out[2] rstd (one each). Outputs whose plan format is NULL are left alone. simd: er__simd()'s level for the loops
 * over y. */
ER_INTERNAL er_status er__layernorm_row(const er_layernorm_plan *pl, const double *x, const double *w, const double *b,
                                        int64_t n, er_ln_out out[3], int simd);

/* The GPU path's constants of a row of n elements from its sums (docs/algorithms/layernorm.md, On the GPU): c[0..1]
 * the mean's set and c[2..3] rstd's (values of F, the box of Theorem L5), c[4..7] the 128-bit enclosures of the exact
 * mean and rstd widened to doubles (as er__layernorm_row's double case takes them). 0 where the host's row function
 * must take the row: a special value, sums beyond the integers, no claim, rstd's set allowing NaN, or rstd* +inf. */
ER_INTERNAL int er__layernorm_dev_row(const er_layernorm_plan *pl, const er_ln_sums *s, int64_t n, double c[8]);
/* er__layernorm_dev_row with the evaluation chosen (the tests compare them): how 2 as er__layernorm_dev_row (in
 * doubles where they decide, else MPFR: layernorm.md, The box in doubles), 1 in doubles only (-1 where they do not
 * decide), 0 in MPFR only. */
ER_INTERNAL int er__layernorm_dev_row_how(const er_layernorm_plan *pl, const er_ln_sums *s, int64_t n, int how,
                                          double c[8]);

#endif
