/* softmax.h: the set of a softmax row under the softmax standard (docs/algorithms/softmax.md). */
#ifndef ER_SOFTMAX_H
#define ER_SOFTMAX_H

#include "format/format.h"
#include "enclose/anyorder.h"
#include "enclose/approx.h"

typedef struct er_softmax_plan {
    const er_fmt_info *F;   /* compute format */
    const er_fmt_info *O;   /* output format */
    er_overflow ov_out;
    double U;               /* exp accuracy in ulps of F */
    int div;                /* 0 either, 1 divide, 2 reciprocal */
    int log;                /* log_softmax: y = (x - m) - log(s) instead of e / s */
    double Ulog;            /* log accuracy in ulps of F */
    int exp_fast;           /* exp within 2 + floor(1.173 |d|) ulps at argument d, instead of U */
    double Udiv;            /* e / s within Udiv ulps (0: fl(e / s) or fl(e * fl(1/s)) as div says) */
    int max_optional;       /* the maximum may be left out: exp(x) instead of exp(x - max) */
    int online;             /* the sum built online, rescaled by exp(m_old - m_new) (Theorem S3) */
    int exp2_triton;        /* math=triton: e = ex2.approx(fl(d * fl(log2 e))) within U ulps of 2^fl(d fl(log2 e)),
                               and the quotient (div.full.f32) may flush a subnormal result (Theorem S5) */
    int flush;              /* subnormals=flush: any result below the least normal may be a zero (Theorem S6) */
    int64_t depth;          /* the sum's tree depth bound (0: any tree; any-order.md Theorem 7) */
    int sets_only;          /* the sets alone: exact and rounded are not written */
    double *lse;            /* log_softmax: where the bounds of the computed m + log(s) and of log(s) join (their
                               hulls with [lse[0], lse[1]] and [lse[2], lse[3]]; NULL: not wanted) */
    const int64_t *only;    /* log_softmax: the set of this element alone is written (NULL: every element's) */
    const struct er_exps *pre; /* the exps of x_j - m for this row's maximum m, filled by the caller (NULL: filled
                                  here); read for the sets only, so only with sets_only */
    int simd;               /* er__simd(): the AVX2 builds of the vectorised loops (0: the baseline ones) */
    int scalar;             /* 1: every element by the scalar code, none by the loops that vectorise (their
                               reference in t-ival) */
    int no_dd;              /* 1: the exact results the double enclosures leave go to MPFR at once, without
                               Lemma S7's pass in double-double (its reference in t-ival) */
    int64_t *dd_decided;    /* where not NULL, the elements Lemma S7's pass decided are added to it (the tests'
                               count: one thread a plan) */
    er_work *work;          /* a thread's scratch its rows reuse (slots ER_SMW_*; NULL: each row allocates and
                               frees its own) */
} er_softmax_plan;

/* er_softmax_plan's work slots: the callers' (cv, exact, rounded of a row), then er__softmax_row's own. */
enum { ER_SMW_CV, ER_SMW_EX, ER_SMW_RD, ER_SMW_DONE, ER_SMW_C0, ER_SMW_LO, ER_SMW_HI, ER_SMW_T, ER_SMW_E,
       ER_SMW_SETS };

/* The values of F the kernel's exp of d_j may give, from the enclosure [zl, zh] of exp(d_j) (Lemma U1): within U
 * ulps, or __expf's 2 + floor(1.173 |d|); a result below the least normal may be flushed (Theorem S6). */
static inline void er__exp_ends(const er_softmax_plan *pl, double dj, double zl, double zh, double *lo, double *hi) {
    double Uj = pl->exp_fast ? 2.0 + floor(er__mul_up(1.1730001, fabs(dj))) : pl->U;
    er__approx_ends(pl->F, Uj, zl, zh, lo, hi);
    if (!(*lo >= pl->F->min_normal)) *lo = 0;
}

/* exp(x_j - m) enclosed in double for a row (Theorem D1): [lo, hi]; t the difference rounded to nearest and e its
 * error (t + e = x_j - m exactly, by TwoSum). dlo, dhi (NULL: not kept): exp(d_j) enclosed for the kernel's
 * difference d_j = x_j - m rounded to nearest in the compute format (er__exps_fill_rounded), which the sets in
 * double read instead of enclosing it again. */
typedef struct er_exps {
    double *lo, *hi, *t, *e, *dlo, *dhi;
    int sums;        /* esl, esh hold the sums (to nearest, er__sums32's order) of the ends of the kernel's exps of
                        d_j (the values of F its exp may give, er_softmax_sets_dbl's), which log_softmax's sets read
                        instead */
    double esl, esh;
} er_exps;
/* fl(log2 e) in F, the constant Triton multiplies by before ex2 (0x3FB8AA3B in fp32). */
ER_INTERNAL double er__log2e(const er_fmt_info *F);
/* ex->t, ex->e (x_j - m = t + e, TwoSum), ex->lo, ex->hi (exp(x_j - m) enclosed: Theorem D1 and the shift by e);
 * simd: er__simd()'s AVX2 build of the loops. */
ER_INTERNAL void er__exps_fill(er_exps *ex, const double *x, int64_t n, double m, int simd);
/* ex->dlo and ex->dhi for the compute format F (after er__exps_fill: [lo, hi] where d_j = x_j - m exactly); 0 where
 * d_j is -inf. */
ER_INTERNAL void er__exps_fill_rounded(er_exps *ex, const er_fmt_info *F, const double *x, int64_t n, double m);
/* Every array of ex at once (those of er__exps_fill and er__exps_fill_rounded for pl->F) and the sums (pl's U or
 * __expf's bound), exp(x_j - m) enclosed from
 * exp(d_j)'s bounds where x_j - m is within 2^-18 of d_j (Lemma D7 of double-bounds.md): one exp a term. The
 * enclosure of exp(x_j - m) may be up to 2^-49 wider than er__exps_fill's, so use it where only exact results read
 * it (not for the online sum's bounds). These live in src/enclose/exps.c. */
typedef struct er_exps_scratch {
    double *el, *eh; /* n doubles each */
    uint8_t *slow;   /* n bytes */
    int simd;        /* er__simd(): the AVX2 build of the vectorised loop */
} er_exps_scratch;
/* w: scratch for the vectorised pass over the common case (the same values; NULL: the scalar loop alone). */
ER_INTERNAL void er__exps_fill_kernel(er_exps *ex, const struct er_softmax_plan *pl, const double *x, int64_t n,
                                      double m, const er_exps_scratch *w);

/* The sums to nearest *sa of a[0..n) and *sb of b[0..n) (the kernel's exps' ends of a row, nonnegative) in the rows'
 * one order, which the GPU's warp keeps too (Lemma D4 bounds any order): 32 partial sums, the l-th adding a_j for
 * j = l, l + 32, l + 64, ... in turn from 0, then the partial sums added in turn from the 0th. simd: er__simd(). */
ER_INTERNAL void er__sums32(int simd, const double *a, const double *b, int64_t n, double *sa, double *sb);

/* er__exp_ends over a row for F = fp32, pl->U an integer of at most 2^30 and not __expf's bound, m a float, in loops
 * that vectorise (simd: er__simd()): elo[j], ehi[j] the ends of the kernel's exp of d_j = fl(x_j - m) (the values
 * er__exp_ends gives from er__exp_bounds(d_j)) where slow[j] is 0; slow[j] = 1 where x_j is not a float, d_j < -690
 * or er__approx_ends leaves its common case (the caller computes those elements itself). */
ER_INTERNAL void er__exp_ends_f32_run(int simd, int64_t n, const double *x, double m, double U, double *elo,
                                      double *ehi, uint8_t *slow);
/* The same for m = 0 (d_j = x_j) with exp(x_j)'s bounds given, [dl[j], dh[j]] (er__exp_bounds_run's): log_softmax's
 * backward, which reads those bounds again for its exact results. */
ER_INTERNAL void er__exp_ends_f32_of(int simd, int64_t n, const double *x, const double *dl, const double *dh,
                                     double U, double *elo, double *ehi, uint8_t *slow);

/* For a row x[0..n) (values of F): the set of each output in F (cv), the exact softmax rounded to double and
 * correctly rounded to the output format (not written under sets_only). */
ER_INTERNAL er_status er__softmax_row(const er_softmax_plan *pl, const double *x, int64_t n, er_cval *cv,
                                      double *exact, double *rounded);

/* log_softmax on the GPU: what er__softmax_row computes once for a row of n elements from its sums alone, in its
 * double case (not online=, flushing or math=triton): s[0], s[1] the sums to nearest in element order of the ends of
 * the kernel's exps, s[2], s[3] the bounds of the exact sum of exp(x_j - m) (er__fxsum_lo, er__fxsum_hi); bd the
 * sum's any-order constants. Into c: the ends [c[0], c[1]] of the kernel's log of its sum, and log(S) enclosed in
 * doubles [c[2], c[3]]. 1 where all four are finite (the elements' sets then take fp32 sums alone), else 0. */
/* The ends [*l_lo, *l_hi] (values of F) of the kernel's log of its sum for a row of n, from the sums to nearest esl,
 * esh of its exps' ends in er__sums32's order, in the double path's main case (er_softmax_sets_dbl's: the sum in any
 * order, then the log within pl->Ulog ulps). Refusals: those of the sum's any-order bound. */
ER_INTERNAL er_status er__log_softmax_log_ends(const er_softmax_plan *pl, int64_t n, double esl, double esh,
                                               double *l_lo, double *l_hi);
/* log_softmax's set of one element x of a row of n in the double path's main case (F and O of at most 24 bits, no
 * online sum, max=optional or math=triton), from the row's maximum m and the sums to nearest esl, esh of the kernel's
 * exps' ends in er__sums32's order (er__exps_fill_kernel's): the set into *c and the log-sum-exp's bounds joined into
 * pl->lse, as er__softmax_row gives them for the plan with pl->only at that element and those exps. Refusals: those of
 * the sum's any-order bound. */
ER_INTERNAL er_status er__log_softmax_one_of_sums(const er_softmax_plan *pl, int64_t n, double m, double esl,
                                                  double esh, double x, er_cval *c);
ER_INTERNAL int er__log_softmax_dev_row(const er_softmax_plan *pl, const er_anyorder_bound *bd, int64_t n,
                                        const double s[4], double c[4]);

#endif
