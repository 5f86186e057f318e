/* xent.h: the sets of cross-entropy's loss and gradient from the logits (docs/algorithms/cross-entropy.md): for a row
 * x of C logits with target t and label smoothing eps, the row loss L - (1 - eps) x_t - (eps / C) sum_j x_j with
 * L = log sum_j exp(x_j), and the gradient (p_j - (1 - eps) [j = t] - eps / C) / W with p = softmax(x), W the
 * reduction's divisor (the rows not ignored for "mean", 1 else). */
#ifndef ER_ENCLOSE_XENT_H
#define ER_ENCLOSE_XENT_H

#include "core/internal.h"
#include "format/format.h"
#include <stdint.h> /* before mpfr.h: the intmax_t functions */
#include <mpfr.h>
#include "enclose/anyorder.h" /* er_cval */
#include "enclose/softmax.h"
#include "enclose/ival.h" /* er_fxsum */

/* An element the fast decision leaves to its set (the engine's value, src/ops/module.h). */
#ifndef ER_PENDING
#define ER_PENDING 0xFF
#endif

/* Roundings a monomial of the model may pass through outside the sums: in the compute format, and in the logits'
 * format where it is narrower, on the gradient's paths and on the loss's after its stored log-probabilities (Theorems
 * X1, X2). */
#define ER_XENT_ROUNDINGS 8
#define ER_XENT_GRAD_ROUNDINGS_S 3
#define ER_XENT_LOSS_ROUNDINGS_S 4

typedef struct er_xent_plan {
    er_softmax_plan sm;        /* softmax's plan of the standard, output F (its log_softmax plan sets log and lse) */
    const er_fmt_info *F, *S;  /* the compute format and the logits' format */
    const er_fmt_info *G;      /* the gradient's output format (NULL: the gradient is not wanted) */
    er_overflow gov;           /* its overflow rule */
    double eps;                /* label smoothing, in [0, 1] */
    int64_t C;                 /* classes */
    int64_t dC, dN;            /* additions on a term's path in a sum over the classes and over the rows (0: none) */
    double W;                  /* the gradient's divisor (rows not ignored for "mean", else 1) */
    int mp_only;               /* the exact results by MPFR alone (EXACTREF_FAST=0), not first in double */
    int compute_only;          /* products=compute: no value rounded to the logits' format (fused kernels) */
    int want_loss;             /* the loss is checked (else its set and exact value are not computed) */
    int simd;                  /* er__simd(): the AVX2 builds of the vectorised loops */
} er_xent_plan;

/* A row's loss: its set before the reduction ([lo, hi], real bounds, the reduction's roundings counted in), the exact
 * row loss enclosed in [elo, ehi], and special: 0 finite, 1 NaN (a row holding a NaN or +inf, or every logit -inf),
 * 2 +inf (a -inf logit at the target, or anywhere with eps > 0). */
typedef struct er_xent_loss { double lo, hi, elo, ehi; int special; } er_xent_loss;

/* Scratch of a row of C: 8 C doubles and 2 C sets. */
typedef struct er_xent_work { double *d; er_cval *cv; } er_xent_work;

/* cls of a pending gradient element whose correct rounding is left open: grd holds the lower candidate, gcv both;
 * no output may be called exact. */
#define ER_XENT_OPEN 0xFE
/* Row x (C logits, values of S) with target t in [0, C): its loss (ls, where pl->want_loss) and, where pl->G is set,
 * each gradient element's class decided on the fast path (cls: ER_CLASS_EXACT or ER_CLASS_COVERED from the kernel's
 * outputs y, where y is given and er__xent_fast_ok; ER_PENDING or ER_XENT_OPEN else) and, for the pending ones, its
 * set in F (gcv), exact value rounded to double (gex) and correctly rounded into G (grd). */
ER_INTERNAL er_status er__xent_row(const er_xent_plan *pl, const double *x, int64_t t, er_xent_work *w,
                                   er_xent_loss *ls, const double *y, uint8_t *cls, er_cval *gcv, double *gex,
                                   double *grd);
/* Whether the plan allows the gradient's fast decision (Theorem X3): compute fp32, an output format within it, exp
 * within at least an ulp, no math=triton, online= or depth=, exact results not forced through MPFR. */
ER_INTERNAL int er__xent_fast_ok(const er_xent_plan *pl);

/* Theorem X3's constants of a plan: gamma (g), bounds of eps / C, of 1 - eps and of 1 / W (exact where W is a power
 * of two), and of eps (C - 1) / C (the target's exact gradient). */
typedef struct er_xent_fastc { double g, ecl, ech, oml, omh, rWl, rWh, e1l, e1h; } er_xent_fastc;
ER_INTERNAL void er__xent_fast_consts(const er_xent_plan *pl, er_xent_fastc *q);

/* Theorem X3's second witnesses' ends [l[0], l[1]] of the kernel's log of its sum (values of F: log_softmax's, from
 * the sums to nearest esl, esh of the kernel's exps' ends, er__log_softmax_log_ends); 0 where they are not finite or
 * subnormals may flush. */
ER_INTERNAL int er__xent_log_ends(const er_xent_plan *pl, double esl, double esh, float *l);

/* Whether output y of format G (within the compute format F) is the rounding into G of an F value of the interval
 * [lo, hi] (Theorem X3's: its F values are the set's, the outputs their roundings); for G of F's precision, whether y
 * lies in it. */
ER_INTERNAL int er__xent_in(const er_fmt_info *F, const er_fmt_info *G, double y, double lo, double hi);

/* The order of a row's sums in double and of the fast decision's witness sum in fp32 (one of the orders Lemma N4 and
 * Theorem X3 allow): lane l of ER_XENT_LANES adds the terms l, l + ER_XENT_LANES, ... in turn, then the lanes' partial
 * sums are added in turn from lane 0 (er__sums32's order), as a warp of the GPU's rows adds them. */
#define ER_XENT_LANES 32

/* A finite row's sums, from which its loss follows: the maximum m, the sums to nearest esl, esh of the kernel's exps'
 * ends (er__exps_fill_kernel's), the target's logit xt and the enclosure [tlo, thi] of exp(x_t - m), and z: the
 * enclosures of S and R (the sum of exp(x_j - m) and that sum without the target's term), the bounds of sum x_j and
 * of sum |x_j| and max |x_j| (er__xent_sums_finish). */
typedef struct er_xent_rowsum { double m, esl, esh, xt, tlo, thi, z[8]; } er_xent_rowsum;
/* z's eight values (Sl, Sh, Rl, Rh, sxl, sxh, sabs, xmax) from the fixed-point sum S of the row's enclosures of
 * exp(x_j - m), the target's enclosure [tlo, thi] (added into S), the sums to nearest s of x_j and sa of |x_j| (in any
 * order) and xm = max |x_j|. */
ER_INTERNAL void er__xent_sums_finish(const er_fxsum *S, double tlo, double thi, double s, double sa, double xm,
                                      int64_t C, double *z8);
/* Whether a row's loss follows from its sums (er__xent_loss_of_sums): no label smoothing, and log_softmax's sets in
 * the double path's main case (er__log_softmax_one_of_sums). er__xent_row takes its loss so then where it builds no
 * gradient set. */
ER_INTERNAL int er__xent_sums_path(const er_xent_plan *pl);
/* A finite row's loss (ls: its set and exact enclosure) from its sums, with target t (x_t finite), as er__xent_row
 * gives it. Refusals: those of log_softmax's any-order bound. */
ER_INTERNAL er_status er__xent_loss_of_sums(const er_xent_plan *pl, const er_xent_rowsum *rs, int64_t t,
                                            er_xent_loss *ls);

/* The exact row loss enclosed at precision prec into [lo, hi] (initialised MPFR numbers), for a row whose double
 * enclosure cannot decide a rounding; special rows (er_xent_loss.special) are the caller's. */
ER_INTERNAL void er__xent_loss_mp(const er_xent_plan *pl, const double *x, int64_t t, mpfr_prec_t prec, mpfr_t lo,
                                  mpfr_t hi);

#endif
