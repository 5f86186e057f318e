/* ref_internal.h: the reference object and the per-element exact summary the covers engine reads. */
#ifndef ER_REF_INTERNAL_H
#define ER_REF_INTERNAL_H

#include <pthread.h>
#include "core/internal.h"
#include "format/format.h"
#include "core/sqwin.h"
#include "core/pwin.h"
#include "core/lnsums.h"
#include "exact/accum.h"
#include "ops/module.h"


/* The shape bookkeeping of a matmul. */
typedef struct er_mm_plan {
    int nb;                      /* output batch dims */
    int64_t bshape[ER_MAX_DIMS];
    int64_t M, K, N, nbatch;
    int64_t a_batches, b_batches;
} er_mm_plan;

/* A reference: what every op shares (what the engine reads) and the op's own state, which only its module reads. */
struct er_ref {
    const er_op_module *mod; /* the op's module (its entry in the table of src/ops/modules.c) */
    const char *name;        /* the op's name in reports when not the module's (a chain's: "matmul+add+relu+cast") */
    int ndim;                /* the first output's shape, as the user sees it, and its elements */
    int64_t shape[ER_MAX_DIMS];
    int64_t n;
    void *priv;              /* the module's state: priv_size bytes, zeroed at er__ref_alloc, released by its destroy */
};

/* A new reference of module m (its state zeroed); ER_ERR_NOMEM with a message when memory is short, ER_ERR_INTERNAL
 * when m is not in the table of modules (er__modules). er_ref_free calls m->destroy and frees both. */
ER_INTERNAL er_status er__ref_alloc(er_ref **out, const er_op_module *m);

/* The state of the dot modules (matmul, sum, mean, max: src/ops/matmul.c, dotmod.c, fastmm.c, reduce.c and the GPU
 * path's src/cuda/devcovers.c). */
typedef struct er_dot_state {
    er_tensor A, B;     /* the operands' views (not copies) */
    er_mm_plan plan;
    int64_t K;          /* products per element */
    int b_is_one;       /* reductions: B is the constant 1 (stride 0), analysed as er__fmt_one() */
    int scaled;         /* scaled matmul: the products' sum times sa and sb */
    double sa, sb;
    double *sav, *sbv;  /* rowwise: sa per row of A, sb per column of B (owned; NULL: sa, sb per tensor) */
    er_dotsum *sums;    /* n summaries, row-major (NULL on the fast path) */
    /* the fast path (src/ops/fastmm.c): fs = A B in fp64; the operands as floats, A as [a_batches][M][K] and B
     * transposed as [b_batches][N][K]; upper bounds of their vectors' 2-norms; the exact engine's dot env */
    int fast;
    double *fs;
    float *af, *bt;
    double *an, *bn;
    er_dot_env env;
    /* |A| |B| in fp64 (er__fast_absprod) for the cursors' sets, made once a cursor has set many elements one by one
     * (a failing check's) and freed when the last cursor closes: P, the open cursors ncur, p_tried (1: made or
     * refused, not tried again while cursors stay open); under pmu, initialised where fast is set */
    pthread_mutex_t pmu;
    double *P;
    int ncur, p_tried;
    void *owned[2];     /* host copies of device operands that A and B view (er_matmul_device), freed with it */
    /* er_matmul_device: S_hat and the norms' bounds (fs, an, bn) also kept in memory of CUDA device dev_id, for a
     * chain's epilogue pass there (src/cuda/devchain.c); dev_free releases them with the reference (NULL: none) */
    void *dev[3];
    int dev_id;
    void (*dev_free)(void *const *dev, int dev_id);
} er_dot_state;
static inline er_dot_state *er__dot(const er_ref *r) { return (er_dot_state *)r->priv; }
ER_INTERNAL void er__matmul_batch_of(const er_ref *r, int64_t bi, int64_t *ia, int64_t *ib);
/* Element idx's row of A's kept floats and column of B's (the fast path's af and bt: [batches][M or N][K]). */
static inline void er__dot_float_rows(const er_ref *r, int64_t idx, const float **arow, const float **bcol) {
    const er_dot_state *d = er__dot(r);
    int64_t MN = d->plan.M * d->plan.N, K = d->plan.K, ia, ib;
    er__matmul_batch_of(r, idx / MN, &ia, &ib);
    *arow = d->af + (ia * d->plan.M + (idx % MN) / d->plan.N) * K;
    *bcol = d->bt + (ib * d->plan.N + idx % d->plan.N) * K;
}
/* A scaled matmul's two scales for element idx: per tensor, or rowwise its row's (of its batch of A) and its
 * column's (of its batch of B). */
static inline void er__dot_scales(const er_ref *r, int64_t idx, double *sa, double *sb) {
    const er_dot_state *d = er__dot(r);
    int64_t M = d->plan.M, N = d->plan.N, ia = 0, ib = 0;
    if ((d->sav || d->sbv) && d->plan.nbatch > 1) er__matmul_batch_of(r, idx / (M * N), &ia, &ib);
    *sa = d->sav ? d->sav[ia * M + idx / N % M] : d->sa;
    *sb = d->sbv ? d->sbv[ib * N + idx % N] : d->sb;
}
/* The dot modules' inputs (A and B; a reduction's x), fast path and release of their state. */
ER_INTERNAL int er__dot_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap);
ER_INTERNAL int er__dot_fast(const er_ref *r);
ER_INTERNAL void er__dot_destroy(er_ref *r);

/* The state of the row modules (softmax, log_softmax, rmsnorm, layernorm: src/ops/rowref.c, rowmods.c, lnmod.c). */
typedef struct er_rows_state {
    er_tensor A, B, C;  /* x, the weight (has_weight), the bias (has_bias) */
    int dim;            /* the dimension normalised (layernorm: the last of the nnorm trailing ones) */
    int has_weight, has_bias;
    double eps;         /* rmsnorm, layernorm */
    int nnorm;          /* layernorm: the trailing dimensions normalised together (K elements per row) */
    int64_t rows;       /* layernorm: rows (the mean's and rstd's elements) */
    int64_t K;          /* elements per row */
} er_rows_state;
static inline er_rows_state *er__rows(const er_ref *r) { return (er_rows_state *)r->priv; }
/* The row modules' classic bugs (er_op_module's classic_bug): softmax's denominator missing one of n equal terms
 * (outputs moved by 1/(n - 1)), and rmsnorm's mean square and layernorm's variance divided by n - 1 (by
 * sqrt((n - 1)/n) - 1, eps aside), in their normalised outputs and layernorm's rstd; none for log_softmax and
 * layernorm's mean. */
ER_INTERNAL double er__rows_classic_bug(const er_ref *ref, int o, const char **what);
/* The row modules' inputs: x, then the weight and the bias where given. */
ER_INTERNAL int er__rows_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap);
/* rmsnorm's plan of the standard (compute, rsqrt_ulps=, mean=, variance=, combine_depth=, depth=, math=triton) for
 * inputs of format X and this eps, with the sum of squares' accumulator (initialised; free it) and range; the
 * plan's output is F until the caller sets it. Shared by the forward rows and the backward pass's own rstd. */
struct er_rmsnorm_plan; /* enclose/rmsnorm.h */
ER_INTERNAL er_status er__rmsnorm_setup(struct er_rmsnorm_plan *pl, er_acc *acc, er_dot_env *env,
                                        const er_standard *std, const er_fmt_info *X, double eps, int64_t n);
/* softmax's plan of the standard (compute, exp_ulps=, log_ulps=, div=, div_ulps=, math=, max=, online=,
 * subnormals=, depth=) with output O (ov), for softmax (log 0) or log_softmax (log 1); shared by the softmax rows and
 * cross_entropy. */
struct er_softmax_plan; /* enclose/softmax.h */
ER_INTERNAL struct er_softmax_plan er__softmax_plan_of(const er_standard *sd, const er_fmt_info *O, er_overflow ov,
                                                       int log);
/* softmax's rows on the GPU (src/cuda/devsoftmax.c): what the kernels need of the sets in double for rows of n
 * elements under std with output format O (er_softmax_sets_dbl's main case, er__exp_bounds' tables), where that
 * case applies (compute=fp32 without online=, max=optional, an approximate division (softmax's: log 0), math=triton
 * or flushing, and a tree that adds n terms), for softmax (log 0) or log_softmax (log 1): 1 and *d filled, else 0. */
typedef struct er_softmax_dev {
    double U;          /* exp within U ulps of fp32 */
    int exp_fast;      /* __expf's bound instead */
    int div;           /* 0 either, 1 divide, 2 reciprocal */
    double c1, g, thr; /* the sum's constants (er__anyorder_bound_terms_depth) */
    double exp_tlo[64], exp_thi[64], exp_lh, exp_ll;
    int dd;            /* Lemma S7's pass for the elements double leaves open (softmax, rows of at most 2^26) */
    double exp_t1[64], exp_t2[64]; /* its tables (er__exp_dd) */
} er_softmax_dev;
ER_INTERNAL int er__softmax_dev_plan(const er_standard *std, const er_fmt_info *O, int64_t n, int log,
                                     er_softmax_dev *d);
/* log_softmax on the GPU (softmax.md, On the GPU): each of rows rows' constants from the GPU's sums of its n elements
 * (sums[4 r .. 4 r + 4), er__log_softmax_dev_row's s; NaN: the host's row) into rc[4 r .. 4 r + 4), NaN where the
 * row is the host's (on the host's threads). O: the output's format. */
ER_INTERNAL er_status er__log_softmax_dev_consts(const er_standard *std, const er_fmt_info *O, int64_t rows, int64_t n,
                                                const double *sums, double *rc);
/* The sets of np rows of n elements (rows[p] the row's number, xs its values and ys its outputs, n each) by the
 * softmax (log 0) or log_softmax (log 1) module's row function: each element's set put into sk with its output
 * (only < 0), or the one element `only` given to sk as the widest set's candidate. */
ER_INTERNAL er_status er__softmax_rows_put(const er_standard *std, int log, er_sink *sk, const int64_t *rows,
                                          int64_t np, int64_t n, const double *xs, const double *ys, int64_t only);
/* rmsnorm on the GPU (docs/algorithms/rmsnorm.md, On the GPU): whether its double case takes the check (compute
 * fp32, the sum of squares' variance, not Welford's); then each of rows rows' constants from the GPU's windows of its
 * n squares (win[r]): rc[4 r .. 4 r + 4) rstd's set and 1/sqrt(S/n + eps) in doubles (er__rmsnorm_dev_row), NaN where
 * the row is the host's (on the host's threads). X: x's format; O: the output's. */
ER_INTERNAL int er__rmsnorm_dev_takes(const er_standard *std);
ER_INTERNAL er_status er__rmsnorm_dev_consts(const er_ref *ref, const er_standard *std, const er_fmt_info *X,
                                            const er_fmt_info *O, const er_sqwin_row *win, int64_t rows,
                                            int64_t n, double *rc);
/* er__softmax_rows_put for rmsnorm rows of x's format X with weights w (n doubles; NULL: none). */
ER_INTERNAL er_status er__rmsnorm_rows_put(const er_ref *ref, const er_standard *std, er_sink *sk,
                                          const er_fmt_info *X, const double *w, const int64_t *rows, int64_t np,
                                          int64_t n, const double *xs, const double *ys, int64_t only);
/* softmax_backward and log_softmax_backward on the GPU (docs/algorithms/softmax-backward.md, On the GPU): where ref
 * is one of theirs along the last dimension, its rows' length, whether the GPU path takes it under std with outputs
 * of format O (the host's fast pass: compute fp32, inputs and output of fp32, fp16 or bf16; log_softmax_backward: an
 * integer exp bound, not __expf's), which op, exp's bound and the inputs' format the products may be rounded to first
 * (er__sbwd_dev_of). Then each of rows rows' constants from the GPU's windows (er__sbwd_dev_row's or
 * er__lsbwd_dev_row's, on the host's threads), and the host's rows: rows[0 .. np) of dy's and y's values dys, yvs and
 * outputs outs (n each) into sk, or the element `only` as the widest set's candidate (er__softmax_rows_put's rule). */
typedef struct er_sbwd_devinfo {
    int64_t n;            /* the rows' length */
    int takes;            /* whether the GPU path takes the rows */
    int log;              /* log_softmax_backward's */
    double U;             /* log_softmax_backward: exp within U ulps */
    const er_fmt_info *P; /* softmax_backward: the inputs' format the products may be rounded to (NULL: none) */
} er_sbwd_devinfo;
ER_INTERNAL er_sbwd_devinfo er__sbwd_dev_of(const er_ref *ref, const er_standard *std, const er_fmt_info *O);
/* log_softmax_backward's GPU rows: Theorem D1's tables for the GPU's copy of er__exp_bounds (er__exp_tables) and
 * Lemma D8's for er__exp_dd's (er__exp_t1, er__exp_t2). */
ER_INTERNAL void er__lsbwd_dev_tables(double tlo[64], double thi[64], double *lh, double *ll, double t1[64],
                                      double t2[64]);
ER_INTERNAL er_status er__sbwd_dev_consts_of(const er_ref *ref, const er_standard *std, const er_fmt_info *O,
                                             const er_pwin_row *win, int64_t rows, int64_t n, double *rc);
ER_INTERNAL er_status er__sbwd_rows_put(const er_ref *ref, const er_standard *std, er_sink *sk, const int64_t *rows,
                                        int64_t np, int64_t n, const double *dys, const double *yvs,
                                        const double *outs, int64_t only);
/* A GPU path's row constants on the host's threads: fn(ctx, r, c) fills c = rc + k r (k doubles) for each row
 * r < rows and returns 0 where the row is the host's (c is then set to NaN). */
typedef int (*er_dev_row_fn)(const void *ctx, int64_t r, double *c);
ER_INTERNAL void er__dev_consts(er_dev_row_fn fn, const void *ctx, int64_t rows, int k, double *rc);
/* layernorm on the GPU (docs/algorithms/layernorm.md, On the GPU): whether its double case takes the check (compute
 * fp32); then each of rows rows' constants from the GPU's sums of its n elements (sums[r]): rc[8 r .. 8 r + 8) as
 * er__layernorm_dev_row gives them, NaN where the row is the host's (on the host's threads). */
ER_INTERNAL int er__layernorm_dev_takes(const er_standard *std);
ER_INTERNAL er_status er__layernorm_dev_consts(const er_ref *ref, const er_standard *std, const er_ln_sums *sums,
                                              int64_t rows, int64_t n, double *rc);
/* er__softmax_rows_put for layernorm's y: rows of x with weight w and bias b (n doubles each; NULL: none). */
ER_INTERNAL er_status er__layernorm_rows_put(const er_ref *ref, const er_standard *std, er_sink *sk, const double *w,
                                            const double *b, const int64_t *rows, int64_t np, int64_t n,
                                            const double *xs, const double *ys, int64_t only);
/* The combinations of softmax's options that are not modelled (depth= with online=, subnormals=flush with online= or
 * max=) or contradict each other (online= with max=optional): ER_ERR_UNSUPPORTED or ER_ERR_STANDARD. */
ER_INTERNAL er_status er__softmax_standard(const er_standard *std);
/* The row ops' (softmax, log_softmax, rmsnorm, layernorm) common rule: order any_order, rounding to nearest, and a
 * compute format holding the input's values. */
ER_INTERNAL er_status er__rows_standard(const er_ref *ref, const er_standard *std);

/* The exponent range of an operand's nonzero finite values (as the exact engine's walk finds it). */
typedef struct er_dense_stats {
    int emin_lsb;      /* smallest ulp exponent (exponent - 52, or -1074) of nonzero finite values */
    int emin, emax;    /* smallest and largest floor(log2|x|) of nonzero finite values */
    int qmin;          /* every value is an integer times 2^qmin (its format's precision p: min of ilogb - (p-1)) */
    int any_nonzero;
} er_dense_stats;
static inline void er__dense_stats_init(er_dense_stats *s) {
    s->emin_lsb = s->qmin = s->emin = INT32_MAX;
    s->emax = INT32_MIN;
    s->any_nonzero = 0;
}
/* Notes a finite value x of a format of precision prec. */
static inline void er__dense_stats_add(er_dense_stats *s, double x, int prec) {
    if (x == 0) return;
    s->any_nonzero = 1;
    uint64_t b = er__bits(x);
    int be = (int)((b >> 52) & 0x7ff), e;
    if (be) e = be - 1023;
    else e = -1011 - __builtin_clzll(b & ((UINT64_C(1) << 52) - 1)); /* subnormal: -1074 + the leading bit's place */
    int lsb = e - 52 < -1074 ? -1074 : e - 52;
    if (lsb < s->emin_lsb) s->emin_lsb = lsb;
    if (e - (prec - 1) < s->qmin) s->qmin = e - (prec - 1);
    if (e < s->emin) s->emin = e;
    if (e > s->emax) s->emax = e;
}
/* The exact engine's accumulator range and integer path for the operands' statistics (conv as for the walk). */
ER_INTERNAL void er__matmul_env(const er_ref *r, int conv, const er_dense_stats *sa, const er_dense_stats *sb,
                                er_dot_env *env);

/* Visits every output element in row-major order with its two operand vectors along K (decoded, and
 * converted to tf32 when conv >= 0: ER_TF32_TRUNCATE or ER_TF32_RNA applied to operands wider than tf32).
 * `special` says a vector holds a NaN or an infinity. fn returning nonzero stops the walk (its status is
 * returned). */
typedef er_status (*er_elem_fn)(void *ctx, const er_dot_env *env, int64_t idx, const double *a, const double *b,
                                int64_t K, int special);
ER_INTERNAL er_status er__matmul_foreach(const er_ref *r, int conv, er_elem_fn fn, void *ctx);
/* The same walk shared by nthreads threads (contiguous ranges of elements), thread t calling fn with ctxs[t]. */
ER_INTERNAL er_status er__matmul_foreach_n(const er_ref *r, int conv, er_elem_fn fn, void *const *ctxs, int nthreads);
/* The tile walk of er_emulate for orders the float tile loop computes (er__dot_order_tile): fn gets T <= 16 consecutive
 * output elements of one row, from idx0, as fp32 values. Threads split the (batch, 16 columns) units. */
typedef er_status (*er_tile_fn)(void *ctx, int64_t idx0, const float *vals, int T);
ER_INTERNAL er_status er__matmul_foreach_tile(const er_ref *r, int conv, int64_t block, int outer, er_tile_fn fn,
                                              void *const *ctxs, int nthreads);
/* The operand formats after the conversion conv (tf32 for converted operands). */
ER_INTERNAL er_format er__operand_format(er_format f, int conv);

/* A matmul reference holding only the shapes and the views (no summaries, no fast path): the GPU path's frame,
 * whose operands may be device memory that no host code reads. */
ER_INTERNAL er_status er__matmul_shape_ref(er_ref **out, const er_tensor *A, const er_tensor *B);
/* Builds a matmul reference from checked views (the body of er_matmul). */
ER_INTERNAL er_status er__matmul_build(er_ref **out, const er_tensor *A, const er_tensor *B);
/* The operands' batch numbers (row-major over their own batch dimensions) of output batch bi, under broadcasting. */
ER_INTERNAL void er__matmul_batch_of(const er_ref *r, int64_t bi, int64_t *ia, int64_t *ib);
/* The element offsets in A and B where output element idx's vectors along K start. */
ER_INTERNAL void er__matmul_offsets(const er_ref *r, int64_t idx, int64_t *offa, int64_t *offb);
/* softmax: visits every row along the normalised dimension: its decoded values and its elements' row-major
 * positions in the output. */
typedef er_status (*er_row_fn)(void *ctx, const double *row, const int64_t *idx, int64_t n);
ER_INTERNAL er_status er__softmax_foreach(const er_ref *r, er_row_fn fn, void *ctx);
/* The same over rows r0 .. r1-1 only (rows numbered in the walk's order). */
ER_INTERNAL er_status er__softmax_foreach_range(const er_ref *r, int64_t r0, int64_t r1, er_row_fn fn, void *ctx);
/* layernorm: visits every row (the last nnorm dimensions, row-major) with its decoded values and its number;
 * the row's y elements are row * K ... row * K + K - 1 in row-major order. */
typedef er_status (*er_lnrow_fn)(void *ctx, const double *row, int64_t rownum, int64_t n);
ER_INTERNAL er_status er__layernorm_foreach(const er_ref *r, er_lnrow_fn fn, void *ctx);
ER_INTERNAL er_status er__layernorm_foreach_range(const er_ref *r, int64_t r0, int64_t r1, er_lnrow_fn fn, void *ctx);
/* Decodes every element of t in row-major order into dst. */
ER_INTERNAL void er__decode_rowmajor(const er_tensor *t, double *dst);
/* Checks x and turns a possibly negative dim into 0..ndim-1. */
ER_INTERNAL er_status er__check_dim(const er_tensor *x, int *dim);
/* The op's name for reports ("matmul", "sum", ...). */
ER_INTERNAL const char *er__op_name(const er_ref *r);
ER_INTERNAL int64_t er__ref_numel(const er_ref *r);
ER_INTERNAL int er__ref_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap);

/* The fast path: builds fs and fp when a BLAS is present, the operands allow it (at most 24 significant bits,
 * finite) and EXACTREF_FAST is not 0; otherwise leaves the reference as it is (r->fast = 0). */
/* Where the fast path's GEMM runs when not through the CBLAS (er_matmul_device: on the GPU), with the operands as the
 * fast path keeps them, computed there: the host then decodes nothing. start queues the GEMM and sets *taken (0: the
 * host's decoding and CBLAS after all); finish then writes S_hat = A B in fp64 into fs (n values, row-major) and the
 * operands into ops, and releases what start took, or with fs NULL only releases it. Each returns ER_OK or the error
 * it met (with its message). */
typedef struct er_fast_ops {
    float *af, *bt;          /* A's rows [a_batches][M][K] and B's columns [b_batches][N][K] as floats */
    double *an, *bn;         /* upper bounds of their 2-norms */
    er_dense_stats *sa, *sb; /* each operand's statistics */
} er_fast_ops;
typedef struct er_fast_gemm {
    er_status (*start)(void *ctx, const er_ref *r, int *taken);
    er_status (*finish)(void *ctx, double *fs, const er_fast_ops *ops);
    void *ctx;
} er_fast_gemm;
/* The fast path's state of matmul r where it applies (else r's fast stays 0), its GEMM by g (NULL: the CBLAS). */
ER_INTERNAL er_status er__fast_build(er_ref *r, const er_fast_gemm *g);
/* er_matmul's checks of its arguments (NULLs, the views), with the error's message. */
ER_INTERNAL er_status er__matmul_args(er_ref **out, const er_tensor *A, const er_tensor *B);
/* er_matmul of host views A and B, the fast path's GEMM by g where the fast path applies. */
ER_INTERNAL er_status er__matmul_make_with(er_ref **out, const er_tensor *A, const er_tensor *B,
                                          const er_fast_gemm *g);
ER_INTERNAL int er__fast_enabled(int64_t products);
/* P = |A| |B| in fp64 (one GEMM per batch of the kept floats' absolute values) for every element of a fast-path
 * reference, row-major; free with free(). NULL without a fast path or without memory. Each product is exact, so P
 * is within K 2^-52 of sum_k |a_k b_k| relative, in any order (fast-path.md). */
ER_INTERNAL double *er__fast_absprod(const er_ref *r);
/* The exact summaries of every element (for fast-path references, which keep none); free with free(). */
ER_INTERNAL er_status er__matmul_all_sums(const er_ref *r, er_dotsum **out);
/* The exact summary of output element idx, computed on its own (for fast-path references). */
ER_INTERNAL er_status er__matmul_elem_summary(const er_ref *r, int64_t idx, er_dotsum *sm);
/* The exact sum at linear position idx as an MPFR value of sufficient precision (recomputed exactly). */
ER_INTERNAL er_status er__matmul_exact_mpfr(const er_ref *r, int64_t idx, void *mpfr_out);
ER_INTERNAL er_status er__ref_index(const er_ref *r, const int64_t *index, int64_t *idx);

#endif
