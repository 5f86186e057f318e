/* attention.h: the sets of one attention row, O and LSE, under the flash standard (docs/algorithms/attention.md). */
#ifndef ER_ATTENTION_H
#define ER_ATTENTION_H

#include "format/format.h"
#include "enclose/anyorder.h"
#include "enclose/ival.h"

typedef struct er_attn_plan {
    const er_fmt_info *O, *L;  /* output formats of O and LSE */
    int simd;                  /* er__simd() when the plan was made: the rows' loops' build */
    er_overflow ov_o, ov_l;
    double u;                  /* unit roundoff of the compute format (fp32: 2^-24) */
    double uv, etav;           /* P's format (v's): unit roundoff, subnormal spacing */
    double uin;                /* compute=tf32: the operands' rounding (2^-11); else 0 */
    double cp, cg;             /* a sum of n products errs by at most (cp n + 2 cg) u times the sum of their magnitudes
                                  (Lemma A2) */
    double U;                  /* exp and exp2 within U ulps of the compute format */
    int exp_fast;              /* or within 2 + floor(1.173 |x|) ulps at argument x (__expf) */
    double Ulog;               /* log and log2 within Ulog ulps, or 2^-20 absolute */
    int psum_fp32;             /* the denominator sums p before its rounding to v's format (p_sum=fp32) */
    double uq, uk, etaq, etak; /* qk_scale=input: q's and k's unit roundoffs and subnormal spacings (else 0) */
    double qkmax;              /* qk_scale=input: the smaller of q's and k's largest finite values */
    double qk_cabs;            /* qk_scale=input: a bound of scale / c for an operand pre-scaled by c alone, when above
                                  sqrt(|scale|) (0: both operands by c = fl(sqrt(scale)), the forward's) */
    int64_t D, Dv, Sk, kv_block;
    double sc;                 /* the scale as a double */
    int sc_default;            /* the scale is the real number 1/sqrt(D) (sc its rounding; else sc is exact) */
    /* fp8 attention (er_attention_fp8; docs/algorithms/attention.md, Theorem A4). fp8 = 0: none of these apply */
    int fp8;
    double sbase;              /* the scale before the descales: the double, or 1/sqrt(D) rounded (sc_default) */
    double dq, dk;             /* descale_q and descale_k: sc is fl(fl(sbase dq) dk) */
    double dv, so;             /* descale_v and scale_o: the output is RN_O(O dv scale_o) */
    double of_lo, of_hi;       /* doubles below and above the real dv so */
    double o_rel;              /* the kernel's extra relative error on O dv before scale_o (its descales' roundings) */
    double ss, vmax;           /* scale_s, and v's largest value plus half its spacing there: a row whose p scale_s
                                  may reach it claims nothing */
    int amax;                  /* the rows' amax bounds are wanted (w->am) */
    int ncomp;                 /* N summed with each addition's error kept (Lemma A1): an output of 24 bits or more */
} er_attn_plan;

/* One row's bounds of what a kernel's amax outputs may take from it (fp8 attention): max |O dv| over the row (amax_o)
 * and max P (amax_s, normalised or not); any: the row claims nothing; nan: NaN possible. */
typedef struct er_attn_amax {
    double o_lo, o_hi, s_lo, s_hi, o_ex, s_ex;
    int any, nan;
} er_attn_amax;

/* One kv head, decoded. */
typedef struct er_attn_kv {
    const double *k;           /* Sk x D */
    const double *v;           /* Sk x Dv */
    const double *kn;          /* Sk: upper bounds of ||k_j||_2 */
    const int64_t *bad;        /* Sk + 1: prefix counts of keys holding a value that is not finite */
    const float *vf;           /* Sk x Dv: v's values as floats, which hold them exactly (attention takes formats of
                                * at most 24 bits, whose values are all floats'), for the sums over the keys */
    const double *bsum;        /* Sk x Dv: sum_{t <= j} |v_td| added from the first key, a row's B_d where its keys
                                * start at the first (NULL: B added with N and A) */
} er_attn_kv;

/* Whether N is summed with its additions' errors kept (er_attn_plan.ncomp) for an output of format O: one of 24
 * bits or more, whose roundings need N's enclosure narrower than its double sum's (Lemma A1). The GPU path's sums
 * follow the same rule. */
static inline int er__attn_ncomp(const er_fmt_info *O) { return O->p >= 24; }

/* A thread's scratch for rows of up to Sk keys and Dv columns (er__attn_work_init / _free). */
typedef struct er_attn_work {
    double *s, *slo, *shi, *wlo, *whi;
    double *e0, *e1, *e2; /* scratch of Sk each: exp's arguments and the bounds not kept (er__exp_bounds_run) */
    double *N, *A, *B;
    double *T;     /* 6 Dv: a row's elements' bounds and their roundings (er__attn_row_tail) */
    uint8_t *open; /* Dv + 1 flags (er__attn_row) */
    uint8_t *tok;  /* Dv flags: the element's bounds and roundings taken from the tail's loop (er__attn_row_tail) */
    er_attn_amax am; /* the row's amax bounds (er__attn_row, where the plan's amax is set) */
    int mpfr_pending; /* er__attn_row_given without the keys: roundings left open for er__attn_row_mpfr */
    double Mt;        /* the row's shift, for the MPFR enclosures */
    int wok;          /* wlo and whi hold the row's weights' bounds */
} er_attn_work;
ER_INTERNAL er_status er__attn_work_init(er_attn_work *w, int64_t Sk, int64_t Dv);
ER_INTERNAL void er__attn_work_free(er_attn_work *w);

/* The row's quantities its bounds share: the scores' bounds (Lemma A1) and Theorem A2's score error. */
typedef struct er_attn_rowq {
    double u, uin, qn, Mt, smin, smax, numax, errmax, kmax, delta, Mabs;
    double Llo, Lhi, rho; /* the weights' sum's bounds and their largest relative width */
} er_attn_rowq;

/* sum_i a_i b_i in double in four chains: term i into chain i mod 4 up to the last multiple of 4, the rest into the
 * first, then (s0 + s1) + (s2 + s3). Lemma A1's bound counts the longest chain's additions: the GPU keeps this
 * order. */
ER_INTERNAL double er__attn_dot(const double *a, const double *b, int64_t n);
/* er__attn_dot(q, k + t D, D) into S[t] for each of n rows of k (D values a row, consecutive), bit for bit, in the
 * build simd (er__simd()'s levels). */
ER_INTERNAL void er__attn_dots(int simd, const double *q, const double *k, int64_t D, int64_t n, double *S);

/* The scores' constants (Lemma A1): each score's dot bound gD nu_j (gD = (m + 2) 2^-53 (1 + 2^-40), m = D / 4 +
 * D % 4 the longest chain of er__attn_dot), the scale's magnitude asc and relative error screl. */
typedef struct er_attn_sconst { double gD, asc, screl; } er_attn_sconst;
ER_INTERNAL er_attn_sconst er__attn_sconst(const er_attn_plan *pl);

/* What the scores' loop finds over a row's keys (er__attn_scores; on the GPU, devattn.cu): the largest computed
 * score Mt (the first of equal ones), the least lower and the largest upper score bound, the largest nu_j, score
 * error and key norm bound. Each a maximum or minimum, the same in any order of the keys but Mt's zero sign. */
typedef struct er_attn_raw { double Mt, smin, smax, numax, errmax, kmax; } er_attn_raw;
/* The row's quantities from them (Theorem A2's score error delta among them) into rq; 0 where the row claims
 * nothing (premises that fail). */
ER_INTERNAL int er__attn_rowq_finish(const er_attn_plan *pl, double qn, const er_attn_raw *raw, er_attn_rowq *rq);

/* The scores of query row q against keys j0 .. j0 + n - 1 into w (s, slo, shi: Lemma A1) and the row's quantities
 * into rq (Theorem A2's score error delta among them); 0 where the row claims nothing (a special value, or bounds
 * whose premises fail). */
ER_INTERNAL int er__attn_scores(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0, int64_t n,
                                er_attn_work *w, er_attn_rowq *rq);
/* The weights' sum's bounds from its fixed-point sum, and rho from the largest (whi - wlo) / whi, into rq. */
ER_INTERNAL void er__attn_sums_finish(const er_fxsum *Ls, double rho, er_attn_rowq *rq);
/* The LSE of query row q against keys j0 .. j0 + n - 1 (n >= 1): the exact one in [b[0], b[1]] (Lemma A1), every
 * flash-style kernel's (Theorem A3, before its rounding to fp32) in [b[2], b[3]]; 0 where the row claims nothing.
 * The scores stay in w and their quantities go to *rq (er__attn_scores's; rq may be NULL). */
ER_INTERNAL int er__attn_lse_bounds(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0,
                                    int64_t n, er_attn_work *w, double b[4], er_attn_rowq *rq);

/* The sets of query row q (D values) against keys j0 .. j0 + n - 1 (n = 0: a fully masked row): O's Dv sets (ocv,
 * with the exact results rounded to double and correctly rounded to O) and, where lse, LSE's (lcv, lex, lrd).
 * w->open[d] (d = Dv: the LSE) says where the correct rounding is left open: ord (lrd) then holds the lower candidate
 * and the set both candidates, and no output may be called exact. */
ER_INTERNAL er_status er__attn_row(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0, int64_t n,
                                   er_attn_work *w, int lse, er_cval *ocv, double *oex, double *ord, er_cval *lcv,
                                   double *lex, double *lrd);
/* er__attn_row with the loops over the keys done elsewhere (the GPU's), without the keys' values: the scores' loop's
 * raw (keys_bad: a key of the row holds a value that is not finite), the weights' sum Ls and largest relative width
 * rho, w->N, w->A and w->B (er_attn_weights's order). Where double leaves a correct rounding open, w->mpfr_pending is
 * set and the row's sets are finished by er__attn_row_mpfr with the keys. */
ER_INTERNAL er_status er__attn_row_given(const er_attn_plan *pl, const double *q, int64_t j0, int64_t n, int keys_bad,
                                         er_attn_work *w, const er_attn_raw *raw, const er_fxsum *Ls, double rho,
                                         int lse, er_cval *ocv, double *oex, double *ord, er_cval *lcv, double *lex,
                                         double *lrd);
/* The MPFR enclosures of the roundings er__attn_row_given left open (w->mpfr_pending, cleared). */
ER_INTERNAL void er__attn_row_mpfr(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0,
                                   int64_t n, er_attn_work *w, er_cval *ocv, double *oex, double *ord, er_cval *lcv,
                                   double *lex, double *lrd);
/* er__attn_row after its weights, for a row (n >= 1) whose inputs are finite: rq from er__attn_rowq_finish and
 * er__attn_sums_finish, w->N, w->A and w->B its sums (er_attn_weights's; the GPU's). kv NULL: roundings left open
 * are left to er__attn_row_mpfr (w->mpfr_pending). */
ER_INTERNAL er_status er__attn_row_tail(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0,
                                        int64_t n, er_attn_work *w, const er_attn_rowq *rq, int lse, er_cval *ocv,
                                        double *oex, double *ord, er_cval *lcv, double *lex, double *lrd);

#endif
