/* rmsnorm.h: the set of an rmsnorm row (docs/algorithms/rmsnorm.md). */
#ifndef ER_RMSNORM_H
#define ER_RMSNORM_H

#include "format/format.h"
#include "enclose/anyorder.h"
#include "enclose/layernorm.h"

typedef struct er_rmsnorm_plan {
    const er_fmt_info *F, *O, *X; /* compute, output, input formats */
    er_overflow ov_out;
    double eps;
    double U;                     /* rsqrt accuracy in ulps of F */
    int mean;                     /* 0 either, 1 divide, 2 reciprocal */
    int rsqrt_ftz;                /* rsqrt flushes a subnormal argument to 0 (rsqrt.approx.ftz.f32: math=triton) */
    double Udiv_n;                /* the division by n within this many ulps (div.full.f32: math=triton), 0: rounded */
    int64_t depth;                /* the sum of squares' (and the Welford tree's) depth bound (0: any tree) */
    int variance;                 /* 0, 1 the sum of squares; 2 Welford's M2 / n + m^2; 3 either */
    int64_t combine_depth;        /* the Welford tree's combines on a leaf's path (0: depth's bound) */
    int64_t n;                    /* the rows' length */
    er_anyorder_bound bq;         /* the any-order constants of the sum of squares of n values (er__rmsnorm_setup) */
    er_welford_k wk;              /* Welford's constants for rows of n (er__rmsnorm_setup) */
} er_rmsnorm_plan;

/* Row x[0..n) with weights w (NULL: none): each output's set in the output format, the exact rmsnorm rounded to
 * double and correctly rounded to the output format. env: the accumulator range for sum x_j^2. */
ER_INTERNAL er_status er__rmsnorm_row(const er_rmsnorm_plan *pl, er_acc *acc, const er_dot_env *env, const double *x,
                                      const double *w, int64_t n, er_cval *cv, double *exact, double *rounded);

/* er__rmsnorm_row in parts: what a row computes once (begin; end frees it), then each element (elem: its set, exact
 * and correctly rounded results) or the whole row at once in double where it can (run). */
typedef struct er_rms_row {
    er_dotsum sm;
    double rlo, rhi;   /* rstd's set */
    double r_lo, r_hi; /* 1/sqrt(S/n + eps) enclosed in doubles (dbl) */
    int special, dbl;
    mpfr_t rs[2];      /* 1/sqrt(S/n + eps) at the two ends of S's bracket, at 256 bits (rz: a zero radicand) */
    int rz[2];
} er_rms_row;
ER_INTERNAL er_status er__rmsnorm_row_begin(const er_rmsnorm_plan *pl, er_acc *acc, const er_dot_env *env,
                                            const double *x, int64_t n, er_rms_row *r);
ER_INTERNAL void er__rmsnorm_row_end(er_rms_row *r);
ER_INTERNAL void er__rmsnorm_elem(const er_rmsnorm_plan *pl, const er_rms_row *r, const double *x, double wi,
                                  int64_t n, int64_t i, er_cval *cv, double *exact, double *rounded);
/* The row's elements through the output conversion in a loop that vectorises (er__rmsnorm_elem's double case and
 * er__cset_build's with any = 1, value for value; devrms.cu's on the GPU): where an element's set is a finite interval
 * of O and double decides its correct rounding, lo[i] and hi[i] its ends in O, exact[i] and rounded[i] its results;
 * lo[i] NaN where the element needs er__rmsnorm_elem. Returns 0, writing nothing, where the row cannot take the loop
 * (a compute format other than fp32, an output format other than fp32, fp16 and bf16, x not floats, variance=
 * welford, a row er__rmsnorm_elem takes in MPFR). w: the weights (1 where the op has none), finite floats (the
 * caller's check, once for every row). */
ER_INTERNAL int er__rmsnorm_row_run(const er_rmsnorm_plan *pl, const er_rms_row *r, const double *x, const double *w,
                                    int64_t n, int simd, double *lo, double *hi, double *exact, double *rounded);

/* The set [*rlo, *rhi] of the rstd a kernel of the model computes for row x[0..n) (rmsnorm.md: the sum of squares in
 * any order, the division by n, eps, rsqrt within U ulps), the sum of squares' exact summary (*sm), and whether its
 * set held a NaN or was empty (*qspecial: then [0, +inf]). */
ER_INTERNAL er_status er__rmsnorm_rstd_set(const er_rmsnorm_plan *pl, er_acc *acc, const er_dot_env *env,
                                           const double *x, int64_t n, er_dotsum *sm, int *qspecial, double *rlo,
                                           double *rhi);
/* er__rmsnorm_rstd_set from the sum of squares' summary sm (x is read only by variance=welford). */
ER_INTERNAL er_status er__rmsnorm_rstd_of(const er_rmsnorm_plan *pl, const er_dotsum *sm, const double *x, int64_t n,
                                          int *qspecial, double *rlo, double *rhi);
/* What er__rmsnorm_row computes once for a row of n values whose sum of squares has the summary sm, where its
 * elements' sets and exact results then take double arithmetic alone (not variance=welford): rstd's set [c[0], c[1]]
 * and 1/sqrt(S/n + eps) enclosed in doubles [c[2], c[3]] (1); 0 where the row needs more (no finite rstd set, a
 * radicand of 0, an exact result in MPFR). */
ER_INTERNAL int er__rmsnorm_dev_row(const er_rmsnorm_plan *pl, const er_dotsum *sm, int64_t n, double c[4]);
/* fl(q / n) or fl(q * fl(1/n)) (mode 1 divide, 2 reciprocal, 0 either) over q in [qlo, qhi]; with Udiv > 0 the
 * division may instead be within Udiv ulps (div.full.f32: math=triton). */
ER_INTERNAL void er__div_n_set(const er_fmt_info *F, double qlo, double qhi, int64_t n, int mode, double Udiv,
                               double *lo, double *hi);
/* The values rsqrt(v) within U ulps of F takes for v in [vlo, vhi] (values of F): [*rlo, *rhi]; with ftz a
 * subnormal v is taken as 0 (rsqrt +inf). */
ER_INTERNAL void er__rsqrt_set(const er_fmt_info *F, double U, int ftz, double vlo, double vhi, double *rlo,
                               double *rhi);

#endif
