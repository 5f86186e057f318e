/* lnmod.c: the op module of layernorm (src/ops/module.h): three outputs, y and each row's mean and rstd, whose sets
 * come from one pass over each row (docs/algorithms/layernorm.md); threads take contiguous runs of rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "enclose/layernorm.h"

static const char *const er_ln_names[3] = {"y", "mean", "rstd"};

/* y has x's shape; mean and rstd one value per row, shaped as x's leading dimensions: trailing dimensions of size 1
 * (torch keeps them) are accepted, and [1] when every dimension is normalised. */
static er_status er_ln_out_shape(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape) {
    if (o == 0) return er__out_shape_same(ref, o, out, ndim, shape);
    int lead = ref->ndim - er__rows(ref)->nnorm;
    *ndim = lead ? lead : 1;
    for (int i = 0; i < lead; i++) shape[i] = ref->shape[i];
    if (!lead) shape[0] = 1;
    return er__out_shape_fits(ref, o, out, *ndim, shape);
}

/* The plan of rows of n elements under std, no output yet. */
static er_status er_ln_plan(er_layernorm_plan *pl, const er_ref *ref, const er_standard *std, int64_t n) {
    memset(pl, 0, sizeof *pl);
    pl->F = er__fmt(std->compute);
    pl->X = er__fmt(er__rows(ref)->A.format);
    pl->eps = er__round_double(pl->F, er__rows(ref)->eps, ER_ROUND_NEAREST,
                               ER_OVERFLOW_IEEE); /* eps as the kernel holds it */
    pl->U = std->rsqrt_ulps ? std->rsqrt_ulps : 2.0;
    pl->rsqrt_ftz = std->fast_math == 2;
    pl->mean = std->mean;
    pl->variance = std->variance;
    pl->depth = std->depth;
    pl->combine_depth = std->combine_depth;
    pl->Udiv_n = std->fast_math == 2 ? 2.0 : 0.0;
    return er__layernorm_prepare(pl, n);
}

/* One thread's rows: the three outputs' sets at once, into the sinks of the checked outputs. */
typedef struct er_ln_ctx {
    er_sink *sk[3];
    er_layernorm_plan pl;
    const double *w, *b;
    er_ln_out o[3];
    double *ylo;    /* y's sets as intervals: lo, then hi (2 n) */
    er_row_rec rec; /* y's record (its elements come in increasing order) */
} er_ln_ctx;

static er_status er_ln_cb(void *v, const double *row, int64_t rownum, int64_t n) {
    er_ln_ctx *lc = v;
    er_ln_out *oy = &lc->o[0];
    /* y's sets as intervals where the row is decided in runs */
    int runs = lc->sk[0] && er__row_scratch(lc->sk[0], &lc->rec, n);
    oy->lo = runs ? lc->ylo : NULL;
    oy->hi = runs ? lc->ylo + n : NULL;
    oy->ival = 0;
    ER_RETURN_IF_ERROR(er__layernorm_row(&lc->pl, row, lc->w, lc->b, n, lc->o, lc->rec.simd));
    if (oy->ival)
        er__row_put_ivals(lc->sk[0], &lc->rec, rownum * n, n, lc->pl.F, oy->lo, oy->hi, oy->exact, oy->rounded);
    else if (lc->sk[0]) er__row_put(lc->sk[0], &lc->rec, NULL, rownum * n, n, oy->cv, oy->exact, oy->rounded);
    for (int o = 1; o < 3; o++) { /* mean and rstd: one each */
        er_sink *sk = lc->sk[o];
        if (!sk) continue;
        er_cset c;
        er__cset_build(&c, sk->O, sk->ov, 1, lc->o[o].cv, lc->o[o].exact[0], lc->o[o].rounded[0]);
        er__sink_put(sk, rownum, &c);
    }
    return ER_OK;
}

typedef struct er_ln_job { er_ln_ctx *lc; const er_ref *ref; int64_t r0, r1; er_status st; } er_ln_job;

static void *er_ln_run(void *arg) {
    er_ln_job *j = arg;
    if (j->lc->sk[0]) er__row_rec_begin(&j->lc->rec, j->lc->sk[0], 1);
    j->st = er__layernorm_foreach_range(j->ref, j->r0, j->r1, er_ln_cb, j->lc);
    if (j->lc->sk[0]) er__row_rec_end(&j->lc->rec, j->lc->sk[0], j->st);
    if (j->r0 > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread: MPFR's per-thread constants */
    return NULL;
}

static er_status er_ln_covers(const er_ref *ref, const er_standard *std, er_sinks *sk) {
    int64_t n = er__rows(ref)->K, rows = n ? ref->n / n : 0;
    int nt = er__num_threads(ref->n * 256);
    if (nt > rows) nt = rows > 0 ? (int)rows : 1;
    /* each thread's row: its values, sets and exact results, about 256 bytes per element at most */
    ER_RETURN_IF_ERROR(er__mem_check(256.0 * (double)n * nt, "the rows' working sets"));
    ER_RETURN_IF_ERROR(er__sinks_open(sk, nt));
    er_ln_ctx *lc = calloc((size_t)nt, sizeof *lc);
    double *w = er__rows(ref)->has_weight ? malloc(sizeof(double) * (size_t)n) : NULL,
           *b = er__rows(ref)->has_bias ? malloc(sizeof(double) * (size_t)n) : NULL;
    er_status st = lc ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate %d thread contexts", nt);
    if (st == ER_OK && ((er__rows(ref)->has_weight && !w) || (er__rows(ref)->has_bias && !b)))
        st = er__fail(ER_ERR_NOMEM, "cannot allocate %lld weights", (long long)n);
    if (st == ER_OK && w) er__decode_rowmajor(&er__rows(ref)->B, w);
    if (st == ER_OK && b) er__decode_rowmajor(&er__rows(ref)->C, b);
    for (int t = 0; t < nt && st == ER_OK; t++) {
        er_ln_ctx *l = &lc[t];
        l->w = w;
        l->b = b;
        st = er_ln_plan(&l->pl, ref, std, n);
        for (int o = 0; o < 3 && st == ER_OK; o++) {
            er_sink *s = er__sinks_at(sk, t, o);
            if (!s) continue;
            l->sk[o] = s;
            l->pl.O[o] = s->O;
            l->pl.ov[o] = s->ov;
            int64_t cnt = o == 0 ? n : 1;
            l->o[o].cv = malloc(sizeof(er_cval) * (size_t)cnt);
            l->o[o].exact = malloc(sizeof(double) * (size_t)cnt);
            l->o[o].rounded = malloc(sizeof(double) * (size_t)cnt);
            if (o == 0) l->ylo = malloc(sizeof(double) * 2 * (size_t)n);
            if (!l->o[o].cv || !l->o[o].exact || !l->o[o].rounded || (o == 0 && !l->ylo))
                st = er__fail(ER_ERR_NOMEM, "cannot allocate a row of %lld", (long long)n);
        }
    }
    if (st == ER_OK) {
        er_ln_job jobs[ER_MAX_THREADS];
        for (int t = 0; t < nt; t++) jobs[t] = (er_ln_job){&lc[t], ref, rows * t / nt, rows * (t + 1) / nt, ER_OK};
        er__run_jobs_progress(jobs, sizeof jobs[0], nt, er_ln_run, rows);
        for (int t = 0; t < nt && st == ER_OK; t++) st = jobs[t].st;
    }
    for (int t = 0; t < nt && lc; t++) {
        for (int o = 0; o < 3; o++) {
            free(lc[t].o[o].cv);
            free(lc[t].o[o].exact);
            free(lc[t].o[o].rounded);
        }
        free(lc[t].ylo);
    }
    free(lc);
    free(w);
    free(b);
    return st;
}

/* layernorm: its rsqrt, variance=, mean=, math=triton (two-pass only). */
static er_status er_ln_check(const er_ref *ref, const er_standard *std) {
    ER_RETURN_IF_ERROR(er__standard_takes(ref, std));
    if (std->fast_math == 2 && std->variance != 1)
        return er__fail(ER_ERR_UNSUPPORTED,
                        "math=triton models Triton's two-pass layernorm (its divisions approximate): "
                        "state variance=two_pass");
    return er__rows_standard(ref, std);
}

const er_op_module er__layernorm_module = { .name = "layernorm",
                                            .takes = ER_TAKES_RSQRT | ER_TAKES_VARIANCE | ER_TAKES_TRITON |
                                                     ER_TAKES_MEAN | ER_TAKES_DEPTH,
                                            .nout = 3,
                                            .out_names = er_ln_names,
                                            .out_shape = er_ln_out_shape,
                                            .check = er_ln_check,
                                            .covers = er_ln_covers,
                                            .priv_size = sizeof(er_rows_state),
                                            .inputs = er__rows_inputs,
                                            .classic_bug = er__rows_classic_bug };

int er__layernorm_dev_takes(const er_standard *std) { return std->compute == ER_FP32; }

/* layernorm's row r (er_dev_row_fn). */
typedef struct er_ln_dev { const er_layernorm_plan *pl; const er_ln_sums *sums; int64_t n; } er_ln_dev;
static int er_ln_dev_row(const void *ctx, int64_t r, double *c) {
    const er_ln_dev *d = ctx;
    return er__layernorm_dev_row(d->pl, &d->sums[r], d->n, c);
}

er_status er__layernorm_dev_consts(const er_ref *ref, const er_standard *std, const er_ln_sums *sums, int64_t rows,
                                   int64_t n, double *rc) {
    er_layernorm_plan pl;
    ER_RETURN_IF_ERROR(er_ln_plan(&pl, ref, std, n));
    er_ln_dev d = { &pl, sums, n };
    er__dev_consts(er_ln_dev_row, &d, rows, 8, rc);
    return ER_OK;
}

er_status er__layernorm_rows_put(const er_ref *ref, const er_standard *std, er_sink *sk, const double *w,
                                 const double *b, const int64_t *rows, int64_t np, int64_t n, const double *xs,
                                 const double *ys, int64_t only) {
    er_layernorm_plan pl;
    ER_RETURN_IF_ERROR(er_ln_plan(&pl, ref, std, n));
    pl.O[0] = sk->O;
    pl.ov[0] = sk->ov;
    /* y's sets as intervals where the row gives them so, as er_ln_cb takes them (the same ends, zeros' signs too) */
    double *iv = malloc(sizeof(double) * 2 * (size_t)n);
    er_ln_out o[3] = {{malloc(sizeof(er_cval) * (size_t)n), malloc(sizeof(double) * (size_t)n),
                       malloc(sizeof(double) * (size_t)n), iv, iv ? iv + n : NULL, 0}};
    er_status st = o[0].cv && o[0].exact && o[0].rounded && iv
                       ? ER_OK
                       : er__fail(ER_ERR_NOMEM, "cannot allocate a row of %lld", (long long)n);
    er_row_rec rec;
    er__row_rec_begin(&rec, sk, only < 0);
    for (int64_t p = 0; p < np && st == ER_OK; p++) {
        o[0].ival = 0;
        st = er__layernorm_row(&pl, xs + p * n, w, b, n, o, rec.simd);
        if (st == ER_OK && o[0].ival && only < 0 && er__row_scratch(sk, &rec, n)) {
            /* decided in runs, as er_ln_cb decides the host's rows */
            rec.ys = ys + p * n;
            er__row_put_ivals(sk, &rec, rows[p] * n, n, pl.F, o[0].lo, o[0].hi, o[0].exact, o[0].rounded);
            rec.ys = NULL;
            continue;
        }
        for (int64_t i = 0; st == ER_OK && o[0].ival && i < n; i++)
            er__cval_from_ival(&o[0].cv[i], o[0].lo[i], o[0].hi[i], pl.F);
        if (st == ER_OK) er__row_put_out(sk, &rec, rows[p], n, o[0].cv, o[0].exact, o[0].rounded, ys + p * n, only);
    }
    er__row_rec_end(&rec, sk, st);
    free(o[0].cv);
    free(o[0].exact);
    free(o[0].rounded);
    free(iv);
    return st;
}
