/* sbwdmod.c: softmax's and log_softmax's backward passes and their op modules (src/ops/module.h): dx = y (dy - sum_j
 * dy_j y_j) and dx = dy - exp(y) sum_j dy_j along dim, from the kernel's saved output y and the incoming gradient dy;
 * one output, dx. The sets are
 * src/enclose/softmax_bwd.c's (docs/algorithms/softmax-backward.md). Rows along the last dimension run in contiguous
 * runs, one per thread; rows along another dimension are computed first and put in element order. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"
#include "enclose/ival.h"
#include "enclose/softmax_bwd.h"

/* The views of dy and y (not copies), the dimension of the rows, the rows' length K, and the elements after dim in
 * row-major order (inner: a row's stride in element numbers). */
typedef struct er_sbwd_state {
    er_tensor dy, y;
    int dim;
    int64_t K, inner, rows;
} er_sbwd_state;
static er_sbwd_state *er__sbwd(const er_ref *r) { return (er_sbwd_state *)r->priv; }

/* Whether r is log_softmax_backward's (else softmax_backward's). */
static int er_sbwd_log(const er_ref *r) { return r->mod == &er__log_softmax_backward_module; }

static int er_sbwd_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap) {
    names[0] = "dy";
    views[0] = &er__sbwd(r)->dy;
    if (cap < 2) return 1;
    names[1] = "y";
    views[1] = &er__sbwd(r)->y;
    return 2;
}

/* softmax_backward and log_softmax_backward: the same arguments and state. */
static er_status er_bwd_make(er_ref **out, const er_tensor *dy, const er_tensor *y, int dim, const er_op_module *m) {
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(dy, "dy");
    ER_CHECK_NULL(y, "y");
    ER_RETURN_IF_ERROR(er__tensor_check(dy, "dy"));
    ER_RETURN_IF_ERROR(er__check_dim(y, &dim));
    int same = dy->ndim == y->ndim;
    for (int i = 0; same && i < y->ndim; i++) same = dy->shape[i] == y->shape[i];
    if (!same) return er__fail(ER_ERR_SHAPE, "dy and y must have the same shape");
    er_ref *r;
    ER_RETURN_IF_ERROR(er__ref_alloc(&r, m));
    er_sbwd_state *s = er__sbwd(r);
    s->dy = *dy;
    s->y = *y;
    s->dim = dim;
    s->K = y->shape[dim];
    s->inner = 1;
    for (int i = dim + 1; i < y->ndim; i++) s->inner *= y->shape[i];
    r->ndim = y->ndim;
    r->n = 1;
    for (int i = 0; i < y->ndim; i++) {
        r->shape[i] = y->shape[i];
        r->n *= y->shape[i];
    }
    s->rows = s->K ? r->n / s->K : 0;
    *out = r;
    return ER_OK;
}

er_status er_softmax_backward(er_ref **out, const er_tensor *dy, const er_tensor *y, int dim) {
    er__ok();
    return er_bwd_make(out, dy, y, dim, &er__softmax_backward_module);
}

er_status er_log_softmax_backward(er_ref **out, const er_tensor *dy, const er_tensor *y, int dim) {
    er__ok();
    return er_bwd_make(out, dy, y, dim, &er__log_softmax_backward_module);
}

/* any_order in a compute format holding dy's and y's values, rounding to nearest; depth= bounds D's tree. */
static er_status er_sbwd_check(const er_ref *ref, const er_standard *std) {
    return er__standard_backward(ref, std, "its sum");
}

/* One thread's run of rows [r0, r1). */
typedef struct er_sbwd_job {
    const er_ref *ref;
    er_sbwd_plan pl;
    er_sink *sk;            /* rows along the last dimension: their sets straight into the sink */
    er_cset *all;           /* else: every element's set, put in element order afterwards */
    int64_t r0, r1;
    er_status st;
} er_sbwd_job;

/* Row r's sets (intervals of F, er__cval_from_ival's) into the sink: in runs where the record allows, else one by one
 * through er__row_put; or (rows along another dimension) each element's set into all[]. */
static void er_sbwd_put(er_sbwd_job *j, er_row_rec *rec, int64_t r, int64_t K, const int64_t *idx, const double *lo,
                        const double *hi, const double *ex, const double *rd, er_cval *cv) {
    const er_fmt_info *F = j->pl.F;
    if (j->sk && er__row_scratch(j->sk, rec, K)) {
        er__row_put_ivals(j->sk, rec, r * K, K, F, lo, hi, ex, rd);
        return;
    }
    for (int64_t k = 0; k < K; k++) er__cval_from_ival(&cv[k], lo[k], hi[k], F);
    if (j->sk) er__row_put(j->sk, rec, NULL, r * K, K, cv, ex, rd);
    else
        for (int64_t k = 0; k < K; k++) er__cset_build(&j->all[idx[k]], j->pl.O, j->pl.ov, 1, &cv[k], ex[k], rd[k]);
}

static void *er_sbwd_run(void *arg) {
    er_sbwd_job *j = arg;
    const er_sbwd_state *s = er__sbwd(j->ref);
    int64_t K = s->K;
    size_t k1 = (size_t)(K ? K : 1); /* an empty dimension has no rows, and malloc(0) may return NULL */
    double *buf = malloc(sizeof(double) * 6 * k1);
    er_cval *cv = malloc(sizeof *cv * k1);
    int64_t *idx = malloc(sizeof(int64_t) * k1);
    j->st = buf && cv && idx ? ER_OK
                             : er__fail(ER_ERR_NOMEM, "cannot allocate a softmax_backward row of %lld", (long long)K);
    double *dy = buf, *y = buf + K, *ex = buf + 2 * K, *rd = buf + 3 * K, *lo = buf + 4 * K, *hi = buf + 5 * K;
    er_row_rec rec; /* rows along the last dimension: decided in runs where the sink allows */
    memset(&rec, 0, sizeof rec);
    if (j->sk) er__row_rec_begin(&rec, j->sk, 1);
    for (int64_t r = j->r0; r < j->r1 && j->st == ER_OK; r++) {
        if (er__cancelled()) {
            j->st = ER_ERR_CANCELLED;
            break;
        }
        er__progress_step(1);
        int64_t o = r / s->inner, in = r % s->inner;
        if (j->sk) { /* a row along the last dimension: elements r K .. r K + K - 1 */
            er__load_run(rec.simd, &s->dy, r * K, K, dy);
            er__load_run(rec.simd, &s->y, r * K, K, y);
        }
        for (int64_t k = 0; k < K && !j->sk; k++) {
            idx[k] = (o * K + k) * s->inner + in;
            dy[k] = er__load(&s->dy, er__offset(&s->dy, idx[k]));
            y[k] = er__load(&s->y, er__offset(&s->y, idx[k]));
        }
        j->st = (er_sbwd_log(j->ref) ? er__lsbwd_row : er__sbwd_row)(&j->pl, dy, y, K, lo, hi, ex, rd);
        if (j->st == ER_OK) er_sbwd_put(j, &rec, r, K, idx, lo, hi, ex, rd, cv);
    }
    if (j->sk) er__row_rec_end(&rec, j->sk, j->st);
    free(buf);
    free(cv);
    free(idx);
    if (j->r0 > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread (job 0 runs in the calling one) */
    return NULL;
}

/* A row's plan under std for outputs of format O (overflow rule ov). */
static er_sbwd_plan er_sbwd_plan_of(const er_ref *ref, const er_standard *std, const er_fmt_info *O, er_overflow ov) {
    const er_sbwd_state *s = er__sbwd(ref);
    er_sbwd_plan pl = {er__fmt(std->compute), er__fmt(s->dy.format), er__fmt(s->y.format), O, ov, std->depth,
                       std->exp_ulps ? std->exp_ulps : 2.0, std->exp_fast || std->fast_math == 1, std->products == 1,
                       0, NULL};
    return pl;
}

er_sbwd_devinfo er__sbwd_dev_of(const er_ref *ref, const er_standard *std, const er_fmt_info *O) {
    er_sbwd_devinfo d = {0, 0, er_sbwd_log(ref), 0, NULL};
    if ((ref->mod != &er__softmax_backward_module && !d.log) || er__sbwd(ref)->inner != 1) return d;
    er_sbwd_plan pl = er_sbwd_plan_of(ref, std, O, ER_OVERFLOW_IEEE);
    d.n = er__sbwd(ref)->K;
    d.U = pl.U;
    d.takes = (d.log ? er__lsbwd_dev_takes(&pl) : er__sbwd_dev_takes(&pl)) && d.n >= 1 && d.n < INT32_MAX;
    d.P = d.log ? NULL : er__sbwd_dev_rounds(&pl);
    return d;
}

void er__lsbwd_dev_tables(double tlo[64], double thi[64], double *lh, double *ll, double t1[64], double t2[64]) {
    er__exp_tables(tlo, thi, lh, ll);
    memcpy(t1, er__exp_t1, sizeof(double) * 64);
    memcpy(t2, er__exp_t2, sizeof(double) * 64);
}

/* softmax_backward's (log_softmax_backward's) row r on the GPU (er_dev_row_fn). */
typedef struct er_sbwd_devrow {
    const er_sbwd_plan *pl;
    const er_sbwd_dev *d;
    const er_pwin_row *win;
    int64_t n;
    int log;
} er_sbwd_devrow;
static int er_sbwd_dev_row(const void *ctx, int64_t r, double *c) {
    const er_sbwd_devrow *x = ctx;
    return x->log ? er__lsbwd_dev_row(x->pl, x->d, x->win + 2 * r, x->n, c)
                  : er__sbwd_dev_row(x->pl, x->d, x->win + 2 * r, x->n, c);
}

er_status er__sbwd_dev_consts_of(const er_ref *ref, const er_standard *std, const er_fmt_info *O,
                                 const er_pwin_row *win, int64_t rows, int64_t n, double *rc) {
    er_sbwd_plan pl = er_sbwd_plan_of(ref, std, O, ER_OVERFLOW_IEEE); /* the GPU takes outputs within O's range */
    er_sbwd_dev d;
    int log = er_sbwd_log(ref);
    ER_RETURN_IF_ERROR(log ? er__lsbwd_dev_setup(&pl, n, &d) : er__sbwd_dev_setup(&pl, n, &d));
    er_sbwd_devrow x = {&pl, &d, win, n, log};
    er__dev_consts(er_sbwd_dev_row, &x, rows, log ? ER_LSBWD_DEV_CONSTS : 5, rc);
    return ER_OK;
}

er_status er__sbwd_rows_put(const er_ref *ref, const er_standard *std, er_sink *sk, const int64_t *rows, int64_t np,
                            int64_t n, const double *dys, const double *yvs, const double *outs, int64_t only) {
    er_sbwd_plan pl = er_sbwd_plan_of(ref, std, sk->O, sk->ov);
    size_t k1 = (size_t)(n ? n : 1);
    double *buf = malloc(sizeof(double) * 4 * k1);
    er_cval *cv = malloc(sizeof *cv * k1);
    er_status st = buf && cv ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate a row of %lld", (long long)n);
    double *lo = buf, *hi = buf + n, *ex = buf + 2 * n, *rd = buf + 3 * n;
    er_row_rec rec;
    er__row_rec_begin(&rec, sk, only < 0);
    int log = er_sbwd_log(ref);
    for (int64_t p = 0; p < np && st == ER_OK; p++) {
        st = (log ? er__lsbwd_row : er__sbwd_row)(&pl, dys + p * n, yvs + p * n, n, lo, hi, ex, rd);
        if (st == ER_OK && only < 0 && er__row_scratch(sk, &rec, n)) { /* in runs, as er_sbwd_put puts them */
            rec.ys = outs + p * n;
            er__row_put_ivals(sk, &rec, rows[p] * n, n, pl.F, lo, hi, ex, rd);
            rec.ys = NULL;
            continue;
        }
        for (int64_t k = 0; st == ER_OK && k < n; k++) er__cval_from_ival(&cv[k], lo[k], hi[k], pl.F);
        if (st == ER_OK) er__row_put_out(sk, &rec, rows[p], n, cv, ex, rd, outs + p * n, only);
    }
    er__row_rec_end(&rec, sk, st);
    free(buf);
    free(cv);
    return st;
}

static er_status er_sbwd_covers(const er_ref *ref, const er_standard *std, er_sinks *sk) {
    const er_sbwd_state *s = er__sbwd(ref);
    int last = s->inner == 1;
    int nt = last ? er__num_threads(ref->n * 16) : 1;
    if (nt > s->rows) nt = s->rows > 0 ? (int)s->rows : 1;
    ER_RETURN_IF_ERROR(er__sinks_open(sk, nt));
    er_sink *s0 = er__sinks_at(sk, 0, 0);
    er_sbwd_plan pl = er_sbwd_plan_of(ref, std, s0->O, s0->ov);
    er_cset *all = NULL;
    if (!last) {
        ER_RETURN_IF_ERROR(er__mem_check((double)sizeof *all * (double)ref->n, "softmax_backward's sets"));
        all = malloc(sizeof *all * (size_t)(ref->n ? ref->n : 1));
        if (!all) return er__fail(ER_ERR_NOMEM, "cannot allocate the sets of %lld elements", (long long)ref->n);
    }
    er_status st = ER_OK;
    er_sbwd_job jobs[ER_MAX_THREADS];
    for (int t = 0; t < nt && st == ER_OK; t++)
        jobs[t] = (er_sbwd_job){ref, pl, last ? er__sinks_at(sk, t, 0) : NULL, all, s->rows * t / nt,
                                s->rows * (t + 1) / nt, ER_OK};
    if (st == ER_OK) er__run_jobs_progress(jobs, sizeof jobs[0], nt, er_sbwd_run, s->rows);
    for (int t = 0; t < nt && st == ER_OK; t++) st = jobs[t].st;
    for (int64_t i = 0; st == ER_OK && !last && i < ref->n; i++) er__sink_put(s0, i, &all[i]);
    free(all);
    return st;
}

static const char *const er_sbwd_names[1] = {"dx"};

#define ER_BWD_MODULE(op, t)                                                                                        \
    {                                                                                                               \
        .name = op, .nout = 1, .out_names = er_sbwd_names, .priv_size = sizeof(er_sbwd_state), .takes = t,          \
        .inputs = er_sbwd_inputs, .out_shape = er__out_shape_same, .check = er_sbwd_check, .covers = er_sbwd_covers \
    }
const er_op_module er__softmax_backward_module = ER_BWD_MODULE("softmax_backward", ER_TAKES_DEPTH | ER_TAKES_PRODUCTS),
                   er__log_softmax_backward_module = ER_BWD_MODULE("log_softmax_backward",
                                                                   ER_TAKES_DEPTH | ER_TAKES_EXP | ER_TAKES_FAST);
