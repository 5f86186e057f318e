/* rowmods.c: the op modules of softmax, log_softmax and rmsnorm (src/ops/module.h): ops of one output whose
 * elements depend on a whole row. The sets of a row come at once (docs/algorithms/softmax.md, rmsnorm.md); the
 * rows run in contiguous runs, one per thread, when they lie along the output's last dimension. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"
#include "enclose/softmax.h"
#include "enclose/ival.h"
#include "enclose/rmsnorm.h"
#include "core/sqwin.h"
#include "format/vecround.h"

/* One thread's run of rows [r0, r1) into its sink. */
typedef struct er_row_job {
    const er_ref *ref;
    const er_standard *std;
    er_sink *sk;
    int64_t r0, r1;
    er_status st;
    int simd; /* er__simd() */
    er_row_rec rec;
    er_work work; /* the softmax rows' scratch, reused row after row */
} er_row_job;

/* The widest recorded set: the first of the widest (rows come in increasing order; within a row the decided elements
 * and the others are offered apart). */
static void er_row_offer(er_row_rec *rec, int64_t i, double rel, const er_cset *c, double y) {
    if (!(rel >= 0) || rel < rec->wrel || (rel == rec->wrel && (rec->widx < 0 || i > rec->widx))) return;
    rec->wrel = rel;
    rec->widx = i;
    rec->wc = *c;
    rec->wy = y;
}

/* The row's sets through the output conversion (er__cset_build with any = 1) where that is a finite interval of O,
 * [lo[q], hi[q]] with the correctly rounded result in it; lo[q] NaN elsewhere (a special value possible, an end beyond
 * O's range). Vectorised (core/internal.h). */
ER_ALWAYS_INLINE void er_row_map_body(int64_t n, const er_cval *restrict cv, const double *restrict rd,
                                      double *restrict lo, double *restrict hi, er_vec_fmt f, int narrow) {
    for (int64_t q = 0; q < n; q++) {
        double a = cv[q].lo, b = cv[q].hi, r = rd[q], L = er_vec_rn_fmt(a, f, narrow), H = er_vec_rn_fmt(b, f, narrow);
        int64_t sp = cv[q].pinf | cv[q].ninf | cv[q].nan | cv[q].nan_req;
        int64_t ok = !sp & (a <= b) & er_vec_rn_ok(a, L, f, narrow) & er_vec_rn_ok(b, H, f, narrow);
        ok &= fabs(r) <= f.maxv;
        L = r < L ? r : L;
        H = r > H ? r : H;
        lo[q] = ok ? L : NAN;
        hi[q] = H;
    }
}
#define ER_ROW_MAP_ARGS                                                                                               \
    int64_t n, const er_cval *restrict cv, const double *restrict rd, double *restrict lo, double *restrict hi,       \
        er_vec_fmt f
static void er_row_map(ER_ROW_MAP_ARGS) {
    if (f.narrow) er_row_map_body(n, cv, rd, lo, hi, f, 1);
    else er_row_map_body(n, cv, rd, lo, hi, f, 0);
}
#if ER_HAVE_AVX2
ER_AVX2 static void er_row_map_avx2(ER_ROW_MAP_ARGS) {
    if (f.narrow) er_row_map_body(n, cv, rd, lo, hi, f, 1);
    else er_row_map_body(n, cv, rd, lo, hi, f, 0);
}
#endif

double *er__row_scratch(er_sink *sk, er_row_rec *rec, int64_t n) {
    if (!rec->on || n <= 0 || !er__sink_tally_runs(sk)) return NULL;
    if (rec->cap < n) {
        double *b = er__mem_fits(32.0 * (double)n) ? realloc(rec->buf, sizeof(double) * 4 * (size_t)n) : NULL;
        if (!b) return NULL;
        rec->buf = b;
        rec->cap = n;
    }
    return rec->buf;
}

void er__row_put_sets(er_sink *sk, er_row_rec *rec, int64_t base, int64_t n, const double *ex, const double *rd,
                      er_row_set_fn set, const void *ctx) {
    double *lo = rec->buf, *hi = lo + n, *rel = hi + 2 * n;
    const double *y = rec->ys;
    if (!y) {
        er__load_run(rec->simd, sk->out, base, n, hi + n);
        y = hi + n;
    }
    int64_t open = er__sink_tally_run(sk, &rec->t, base, n, lo, hi, ex, rd, y, rel, rec->simd);
    const uint8_t *cls = er__sink_classes(sk) + base;
    er_cset c;
    double r;
    for (int64_t q = 0; open > 0; q++) { /* the elements left, in order: put as er__row_put puts them */
        const uint8_t *p = memchr(cls + q, ER_PENDING, (size_t)(n - q));
        q = p - cls;
        open--;
        if (lo[q] == lo[q]) c = (er_cset){ .lo = lo[q], .hi = hi[q], .rounded = rd[q], .exact = ex[q] };
        else set(ctx, q, &c);
        if (er__sink_tally_put(sk, &rec->t, base + q, &c, y[q], &r)) er_row_offer(rec, base + q, r, &c, y[q]);
    }
    double wmax = -1;
    for (int64_t q = 0; q < n; q++) wmax = rel[q] > wmax ? rel[q] : wmax;
    if (wmax >= 0 && wmax >= rec->wrel)
        for (int64_t q = 0; q < n; q++)
            if (rel[q] == wmax) {
                c = (er_cset){ .lo = lo[q], .hi = hi[q], .rounded = rd[q], .exact = ex[q] };
                er_row_offer(rec, base + q, wmax, &c, y[q]);
                break;
            }
}

/* er_row_set_fn over a row's compute-format sets. */
typedef struct er_row_cvs { const er_sink *sk; const er_cval *cv; const double *ex, *rd; } er_row_cvs;
static void er_row_cv_set(const void *ctx, int64_t q, er_cset *c) {
    const er_row_cvs *v = ctx;
    er__cset_build(c, v->sk->O, v->sk->ov, 1, &v->cv[q], v->ex[q], v->rd[q]);
}

/* The row's sets given as intervals of F (er__cval_from_ival) through the output conversion, as er_row_map_body. */
ER_ALWAYS_INLINE void er_row_map_ival_body(int64_t n, const double *restrict flo, const double *restrict fhi,
                                           double fmax, const double *restrict rd, double *restrict lo,
                                           double *restrict hi, er_vec_fmt f, int narrow) {
    for (int64_t q = 0; q < n; q++) {
        double a = flo[q], b = fhi[q], r = rd[q], L = er_vec_rn_fmt(a, f, narrow), H = er_vec_rn_fmt(b, f, narrow);
        int64_t ok = (fabs(a) <= fmax) & (fabs(b) <= fmax) & (a <= b) & er_vec_rn_ok(a, L, f, narrow) &
                     er_vec_rn_ok(b, H, f, narrow) & (fabs(r) <= f.maxv);
        L = r < L ? r : L;
        H = r > H ? r : H;
        lo[q] = ok ? L : NAN;
        hi[q] = H;
    }
}
#define ER_ROW_MAP_IVAL_ARGS                                                                                          \
    int64_t n, const double *restrict flo, const double *restrict fhi, double fmax, const double *restrict rd,        \
        double *restrict lo, double *restrict hi, er_vec_fmt f
static void er_row_map_ival(ER_ROW_MAP_IVAL_ARGS) {
    if (f.narrow) er_row_map_ival_body(n, flo, fhi, fmax, rd, lo, hi, f, 1);
    else er_row_map_ival_body(n, flo, fhi, fmax, rd, lo, hi, f, 0);
}
#if ER_HAVE_AVX2
ER_AVX2 static void er_row_map_ival_avx2(ER_ROW_MAP_IVAL_ARGS) {
    if (f.narrow) er_row_map_ival_body(n, flo, fhi, fmax, rd, lo, hi, f, 1);
    else er_row_map_ival_body(n, flo, fhi, fmax, rd, lo, hi, f, 0);
}
#endif

/* er_row_set_fn over a row's sets given as intervals of F. */
typedef struct er_row_ivals {
    const er_sink *sk;
    const er_fmt_info *F;
    const double *flo, *fhi, *ex, *rd;
} er_row_ivals;
static void er_row_ival_set(const void *ctx, int64_t q, er_cset *c) {
    const er_row_ivals *v = ctx;
    er_cval cv;
    er__cval_from_ival(&cv, v->flo[q], v->fhi[q], v->F);
    er__cset_build(c, v->sk->O, v->sk->ov, 1, &cv, v->ex[q], v->rd[q]);
}

void er__row_put_ivals(er_sink *sk, er_row_rec *rec, int64_t base, int64_t n, const er_fmt_info *F, const double *flo,
                       const double *fhi, const double *ex, const double *rd) {
    double *lo = rec->buf, *hi = lo + n;
    er_vec_fmt f = er_vec_fmt_of(sk->O);
#if ER_HAVE_AVX2
    if (rec->simd) er_row_map_ival_avx2(n, flo, fhi, F->max, rd, lo, hi, f);
    else
#endif
        er_row_map_ival(n, flo, fhi, F->max, rd, lo, hi, f);
    er_row_ivals v = { sk, F, flo, fhi, ex, rd };
    er__row_put_sets(sk, rec, base, n, ex, rd, er_row_ival_set, &v);
}

/* A row of n elements from base whose record is on, decided in runs (er__row_put_sets); 0 where that cannot run
 * (the sink's format, no memory), the caller then putting the row element by element. */
static int er_row_put_run(er_sink *sk, er_row_rec *rec, int64_t base, int64_t n, const er_cval *cv, const double *ex,
                          const double *rd, er_row_set_fn set, const void *ctx) {
    double *lo = er__row_scratch(sk, rec, n);
    if (!lo) return 0;
    double *hi = lo + n;
    er_vec_fmt f = er_vec_fmt_of(sk->O);
#if ER_HAVE_AVX2
    if (rec->simd) er_row_map_avx2(n, cv, rd, lo, hi, f);
    else
#endif
        er_row_map(n, cv, rd, lo, hi, f);
    er__row_put_sets(sk, rec, base, n, ex, rd, set, ctx);
    return 1;
}

/* Whether elements idx[0 .. n) (n > 0) are consecutive, the first idx[0]: a row the runs can take. */
static int er_row_consecutive(const int64_t *idx, int64_t n) {
    int64_t k = 0;
    while (k < n && idx[k] == idx[0] + k) k++;
    return k == n;
}

void er__row_put_with(er_sink *sk, er_row_rec *rec, const int64_t *idx, int64_t base, int64_t n, const er_cval *cv,
                      const double *ex, const double *rd, er_row_set_fn set, const void *ctx) {
    if (rec->on && n > 0) { /* a run of consecutive elements: decided in runs */
        if ((!idx || er_row_consecutive(idx, n)) &&
            er_row_put_run(sk, rec, idx ? idx[0] : base, n, cv, ex, rd, set, ctx))
            return;
    }
    for (int64_t k = 0; k < n; k++) {
        er_cset c;
        int64_t i = idx ? idx[k] : base + k;
        set(ctx, k, &c);
        if (!rec->on) { er__sink_put(sk, i, &c); continue; }
        double y = rec->ys ? rec->ys[k] : er__load(sk->out, sk->out_contig ? i : er__offset(sk->out, i)), rel;
        if (er__sink_tally_put(sk, &rec->t, i, &c, y, &rel)) er_row_offer(rec, i, rel, &c, y);
    }
}

void er__row_put(er_sink *sk, er_row_rec *rec, const int64_t *idx, int64_t base, int64_t n, const er_cval *cv,
                 const double *ex, const double *rd) {
    er_row_cvs v = { sk, cv, ex, rd };
    er__row_put_with(sk, rec, idx, base, n, cv, ex, rd, er_row_cv_set, &v);
}

void er__row_rec_begin(er_row_rec *rec, const er_sink *sk, int in_order) {
    const char *env = getenv("EXACTREF_FAST");
    memset(rec, 0, sizeof *rec);
    rec->on = in_order && er__sink_reads_output(sk) && !sk->set_lo && !(env && env[0] == '0');
    rec->wrel = -1;
    rec->widx = -1;
    rec->simd = er__simd();
}
void er__row_rec_end(er_row_rec *rec, er_sink *sk, er_status st) {
    free(rec->buf);
    rec->buf = NULL;
    rec->cap = 0;
    if (!rec->on || st != ER_OK) return;
    er__sink_tally(sk, &rec->t);
    if (rec->widx >= 0) er__sink_widest(sk, rec->widx, &rec->wc, rec->wy);
}

void er__row_put_out(er_sink *sk, er_row_rec *rec, int64_t row, int64_t n, const er_cval *cv, const double *ex,
                     const double *rd, const double *ys, int64_t only) {
    if (only < 0 && rec && rec->on) { /* decided in runs, as the host's rows are */
        rec->ys = ys;
        er__row_put(sk, rec, NULL, row * n, n, cv, ex, rd);
        rec->ys = NULL;
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t idx = row * n + k;
        if (only >= 0 && idx != only) continue;
        er_cset c;
        er__cset_build(&c, sk->O, sk->ov, 1, &cv[k], ex[k], rd[k]);
        if (only < 0) er__sink_put_value(sk, idx, &c, ys[k]);
        else er__sink_widest(sk, idx, &c, ys[k]);
    }
}

er_softmax_plan er__softmax_plan_of(const er_standard *sd, const er_fmt_info *O, er_overflow ov, int log) {
    er_softmax_plan pl = { er__fmt(sd->compute),
                           O,
                           ov,
                           sd->exp_ulps ? sd->exp_ulps : 2.0,
                           sd->div,
                           log,
                           sd->log_ulps         ? sd->log_ulps
                           : sd->fast_math == 1 ? 3.0
                                                : 1.0,
                           sd->exp_fast || (sd->fast_math == 1 && sd->exp_ulps == 0),
                           sd->div_ulps                ? sd->div_ulps
                           : sd->fast_math && !sd->div ? 2.0
                                                       : 0.0,
                           sd->max_optional,
                           sd->online,
                           sd->fast_math == 2,
                           sd->subnormals == ER_SUBNORMALS_FLUSH,
                           sd->depth,
                           0,
                           NULL,
                           NULL,
                           NULL,
                           0,
                           0,
                           0,
                           NULL,
                           NULL };
    return pl;
}

int er__softmax_dev_plan(const er_standard *std, const er_fmt_info *O, int64_t n, int log, er_softmax_dev *d) {
    er_softmax_plan pl = er__softmax_plan_of(std, O, ER_OVERFLOW_IEEE, log);
    er_anyorder_bound bd;
    if (pl.F->id != ER_FP32 || pl.online || (pl.Udiv > 0 && !log) || pl.flush || pl.exp2_triton || pl.max_optional ||
        er__anyorder_bound_terms_depth(&bd, pl.F, n, pl.depth, 0) != ER_OK)
        return 0;
    memset(d, 0, sizeof *d);
    d->U = pl.U;
    d->exp_fast = pl.exp_fast;
    d->div = pl.div;
    d->c1 = bd.c1;
    d->g = bd.g;
    d->thr = bd.thr;
    er__exp_tables(d->exp_tlo, d->exp_thi, &d->exp_lh, &d->exp_ll);
    d->dd = !log && !pl.no_dd && n <= (INT64_C(1) << 26); /* er_exact_row_dd's rows */
    memcpy(d->exp_t1, er__exp_t1, sizeof d->exp_t1);
    memcpy(d->exp_t2, er__exp_t2, sizeof d->exp_t2);
    return 1;
}

typedef struct er_dev_consts_job { er_dev_row_fn fn; const void *ctx; int64_t r0, r1; int k; double *rc; }
    er_dev_consts_job;

static void *er_dev_consts_run(void *arg) {
    er_dev_consts_job *j = arg;
    for (int64_t r = j->r0; r < j->r1; r++) {
        double *c = j->rc + j->k * r;
        if (!j->fn(j->ctx, r, c))
            for (int i = 0; i < j->k; i++) c[i] = NAN;
    }
    if (j->r0 > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread */
    return NULL;
}

void er__dev_consts(er_dev_row_fn fn, const void *ctx, int64_t rows, int k, double *rc) {
    int nt = er__num_threads(rows * 4096);
    if (nt > rows) nt = rows > 0 ? (int)rows : 1;
    er_dev_consts_job jobs[ER_MAX_THREADS];
    for (int t = 0; t < nt; t++) jobs[t] = (er_dev_consts_job){ fn, ctx, rows * t / nt, rows * (t + 1) / nt, k, rc };
    er__run_jobs(jobs, sizeof jobs[0], nt, er_dev_consts_run);
}

/* log_softmax's row r (er_dev_row_fn). */
typedef struct er_lsm_dev { const er_softmax_plan *pl; const er_anyorder_bound *bd; const double *sums; int64_t n; }
    er_lsm_dev;
static int er_lsm_dev_row(const void *ctx, int64_t r, double *c) {
    const er_lsm_dev *d = ctx;
    return d->sums[4 * r] == d->sums[4 * r] && er__log_softmax_dev_row(d->pl, d->bd, d->n, d->sums + 4 * r, c);
}

er_status er__log_softmax_dev_consts(const er_standard *std, const er_fmt_info *O, int64_t rows, int64_t n,
                                     const double *sums, double *rc) {
    er_softmax_plan pl = er__softmax_plan_of(std, O, ER_OVERFLOW_IEEE, 1);
    er_anyorder_bound bd;
    ER_RETURN_IF_ERROR(er__anyorder_bound_terms_depth(&bd, pl.F, n, pl.depth, 0));
    er_lsm_dev d = { &pl, &bd, sums, n };
    er__dev_consts(er_lsm_dev_row, &d, rows, 4, rc);
    return ER_OK;
}

er_status er__softmax_rows_put(const er_standard *std, int log, er_sink *sk, const int64_t *rows, int64_t np,
                               int64_t n, const double *xs, const double *ys, int64_t only) {
    er_softmax_plan pl = er__softmax_plan_of(std, sk->O, sk->ov, log);
    pl.simd = er__simd();
    er_cval *cv = malloc(sizeof *cv * (size_t)(n ? n : 1));
    double *ex = malloc(sizeof(double) * (size_t)(n ? n : 1)), *rd = malloc(sizeof(double) * (size_t)(n ? n : 1));
    er_status st =
        cv && ex && rd ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate a softmax row of %lld", (long long)n);
    er_row_rec rec;
    er__row_rec_begin(&rec, sk, only < 0);
    for (int64_t p = 0; p < np && st == ER_OK; p++) {
        st = er__softmax_row(&pl, xs + p * n, n, cv, ex, rd);
        if (st == ER_OK) er__row_put_out(sk, &rec, rows[p], n, cv, ex, rd, ys + p * n, only);
    }
    er__row_rec_end(&rec, sk, st);
    free(cv);
    free(ex);
    free(rd);
    return st;
}

int er__rmsnorm_dev_takes(const er_standard *std) { return std->compute == ER_FP32 && std->variance < 2; }

/* rmsnorm's row r (er_dev_row_fn). */
typedef struct er_rms_dev { const er_rmsnorm_plan *pl; const er_sqwin_row *win; int64_t n; } er_rms_dev;
static int er_rms_dev_row(const void *ctx, int64_t r, double *c) {
    const er_rms_dev *d = ctx;
    const er_sqwin_row *w = &d->win[r];
    uint64_t m;
    int64_t e;
    int sticky;
    er_dotsum sm;
    if (w->special || !er_sqwin_summary(((er_sq_u128)w->whi << 64) | w->wlo, w->b, w->tail, d->n, &m, &e, &sticky))
        return 0;
    /* er__rmsnorm_rstd_set's: the sum in er_sqwin_pos's order, no negative product, no special term */
    er__dotsum_finish(&sm, w->pos, 0.0, d->n, 0, 0, m, e, sticky);
    return er__rmsnorm_dev_row(d->pl, &sm, d->n, c);
}

er_status er__rmsnorm_dev_consts(const er_ref *ref, const er_standard *std, const er_fmt_info *X,
                                 const er_fmt_info *O, const er_sqwin_row *win, int64_t rows, int64_t n, double *rc) {
    er_rmsnorm_plan pl;
    er_acc acc;
    er_dot_env env;
    ER_RETURN_IF_ERROR(er__rmsnorm_setup(&pl, &acc, &env, std, X, er__rows(ref)->eps, n));
    er__acc_free(&acc);
    pl.O = O;
    pl.ov_out = ER_OVERFLOW_IEEE; /* the GPU takes outputs within O's range alone */
    er_rms_dev d = { &pl, win, n };
    er__dev_consts(er_rms_dev_row, &d, rows, 4, rc);
    return ER_OK;
}

er_status er__rmsnorm_rows_put(const er_ref *ref, const er_standard *std, er_sink *sk, const er_fmt_info *X,
                               const double *w, const int64_t *rows, int64_t np, int64_t n, const double *xs,
                               const double *ys, int64_t only) {
    er_rmsnorm_plan pl;
    er_acc acc;
    er_dot_env env;
    ER_RETURN_IF_ERROR(er__rmsnorm_setup(&pl, &acc, &env, std, X, er__rows(ref)->eps, n));
    pl.O = sk->O;
    pl.ov_out = sk->ov;
    er_cval *cv = malloc(sizeof *cv * (size_t)n);
    double *ex = malloc(sizeof(double) * (size_t)n), *rd = malloc(sizeof(double) * (size_t)n);
    er_status st = cv && ex && rd ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate a row of %lld", (long long)n);
    er_row_rec rec;
    er__row_rec_begin(&rec, sk, only < 0);
    for (int64_t p = 0; p < np && st == ER_OK; p++) {
        const double *row = xs + p * n;
        env.special = 0;
        for (int64_t k = 0; k < n; k++) env.special |= !isfinite(row[k]);
        st = er__rmsnorm_row(&pl, &acc, &env, row, w, n, cv, ex, rd);
        if (st == ER_OK) er__row_put_out(sk, &rec, rows[p], n, cv, ex, rd, ys + p * n, only);
    }
    er__row_rec_end(&rec, sk, st);
    er__acc_free(&acc);
    free(cv);
    free(ex);
    free(rd);
    return st;
}

/* softmax and log_softmax rows. */
static er_status er_softmax_cb(void *v, const double *row, const int64_t *idx, int64_t n) {
    er_row_job *j = v;
    er_softmax_plan pl = er__softmax_plan_of(j->std, j->sk->O, j->sk->ov, j->ref->mod == &er__log_softmax_module);
    pl.simd = j->simd;
    pl.work = &j->work;
    er_cval *cv = er__work_get(&j->work, ER_SMW_CV, sizeof *cv * (size_t)n);
    double *ex = er__work_get(&j->work, ER_SMW_EX, sizeof(double) * (size_t)n),
           *rd = er__work_get(&j->work, ER_SMW_RD, sizeof(double) * (size_t)n);
    er_status st = cv && ex && rd ? er__softmax_row(&pl, row, n, cv, ex, rd)
                                  : er__fail(ER_ERR_NOMEM, "cannot allocate a softmax row of %lld", (long long)n);
    if (st == ER_OK) er__row_put(j->sk, &j->rec, idx, 0, n, cv, ex, rd);
    return st;
}

/* rmsnorm rows: weights decoded once, one accumulator for every row's sum of squares. */
typedef struct er_rms_ctx {
    er_row_job *j;
    er_rmsnorm_plan pl;
    er_acc acc;
    er_dot_env env;
    double *w;
    int w_floats; /* every weight a finite float (er__rmsnorm_row_run's) */
} er_rms_ctx;

/* er_row_set_fn over an rmsnorm row's elements. */
typedef struct er_rms_elems {
    const er_sink *sk;
    const er_rmsnorm_plan *pl;
    const er_rms_row *r;
    const double *x, *w;
    int64_t n;
} er_rms_elems;
static void er_rms_set(const void *ctx, int64_t q, er_cset *c) {
    const er_rms_elems *e = ctx;
    er_cval cv;
    double ex, rd;
    er__rmsnorm_elem(e->pl, e->r, e->x, e->w[q], e->n, q, &cv, &ex, &rd);
    er__cset_build(c, e->sk->O, e->sk->ov, 1, &cv, ex, rd);
}

static er_status er_rms_cb(void *v, const double *row, const int64_t *idx, int64_t n) {
    er_rms_ctx *rc = v;
    er_sink *sk = rc->j->sk;
    er_cval *cv = malloc(sizeof *cv * (size_t)n);
    double *ex = malloc(sizeof(double) * (size_t)n), *rd = malloc(sizeof(double) * (size_t)n);
    er_status st = cv && ex && rd ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate a row of %lld", (long long)n);
    rc->env.special = 0;
    for (int64_t k = 0; k < n && st == ER_OK; k++) rc->env.special |= !isfinite(row[k]);
    er_rms_row r;
    if (st == ER_OK && n > 0) st = er__rmsnorm_row_begin(&rc->pl, &rc->acc, &rc->env, row, n, &r);
    if (st != ER_OK || n == 0) goto done;
    int64_t b = idx[0];
    double *lo = er_row_consecutive(idx, n) ? er__row_scratch(sk, &rc->j->rec, n) : NULL;
    if (lo && rc->w_floats && er__rmsnorm_row_run(&rc->pl, &r, row, rc->w, n, rc->j->simd, lo, lo + n, ex, rd)) {
        er_rms_elems e = { sk, &rc->pl, &r, row, rc->w, n };
        er__row_put_sets(sk, &rc->j->rec, b, n, ex, rd, er_rms_set, &e);
    } else {
        for (int64_t i = 0; i < n; i++) er__rmsnorm_elem(&rc->pl, &r, row, rc->w[i], n, i, &cv[i], &ex[i], &rd[i]);
        er__row_put(sk, &rc->j->rec, idx, 0, n, cv, ex, rd);
    }
    er__rmsnorm_row_end(&r);
done:
    free(cv);
    free(ex);
    free(rd);
    return st;
}

er_status er__rmsnorm_setup(er_rmsnorm_plan *pl, er_acc *acc, er_dot_env *env, const er_standard *std,
                            const er_fmt_info *X, double eps, int64_t n) {
    const er_fmt_info *F = er__fmt(std->compute);
    memset(pl, 0, sizeof *pl);
    pl->F = F;
    pl->O = F;
    pl->X = X;
    pl->eps = er__round_double(F, eps, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); /* eps as the kernel holds it */
    pl->U = std->rsqrt_ulps ? std->rsqrt_ulps : 2.0;
    pl->rsqrt_ftz = std->fast_math == 2; /* rsqrt.approx.ftz: a subnormal argument is 0, its rsqrt +inf */
    pl->depth = std->depth;
    pl->variance = std->variance;
    pl->combine_depth = std->combine_depth;
    pl->Udiv_n = std->fast_math == 2 ? 2.0 : 0.0; /* math=triton: x / n is div.full.f32 */
    pl->mean = std->mean;
    /* the sum of squares' bound for rows of n: once, not per row */
    pl->n = n;
    ER_RETURN_IF_ERROR(er__anyorder_bound_depth(&pl->bq, X, X, F, n, pl->depth, 0));
    if (pl->variance >= 2) er__welford_k_init(&pl->wk, F, n, pl->depth, pl->combine_depth); /* else zero: unused */
    /* products x_j^2: exact doubles unless x is fp64 (then 106-bit); the range of any value of X */
    memset(env, 0, sizeof *env);
    env->wide = X->p > 26;
    int lsb = X->emin - X->p + 1;
    env->base = env->wide ? 2 * (int64_t)lsb : 2 * (int64_t)lsb - 52;
    env->top = 2 * (int64_t)(X->emax + 1) + 2 + 64;
    return er__acc_init(acc, env->base, env->top);
}

static er_status er_rmsnorm_rows(er_row_job *j) {
    const er_ref *ref = j->ref;
    const er_standard *std = j->std;
    const er_fmt_info *X = er__fmt(er__rows(ref)->A.format);
    er_rms_ctx rc;
    memset(&rc, 0, sizeof rc);
    rc.j = j;
    ER_RETURN_IF_ERROR(er__rmsnorm_setup(&rc.pl, &rc.acc, &rc.env, std, X, er__rows(ref)->eps, er__rows(ref)->K));
    rc.pl.O = j->sk->O;
    rc.pl.ov_out = j->sk->ov;
    int64_t n = er__rows(ref)->K;
    rc.w = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!rc.w) {
        er__acc_free(&rc.acc);
        return er__fail(ER_ERR_NOMEM, "cannot allocate %lld weights", (long long)n);
    }
    rc.w_floats = 1;
    for (int64_t k = 0; k < n; k++) {
        rc.w[k] = er__rows(ref)->has_weight ? er__load(&er__rows(ref)->B, k * er__rows(ref)->B.strides[0]) : 1.0;
        rc.w_floats &= er__is_float(rc.w[k]) && isfinite(rc.w[k]);
    }
    er_status st = er__softmax_foreach_range(ref, j->r0, j->r1, er_rms_cb, &rc);
    er__acc_free(&rc.acc);
    free(rc.w);
    return st;
}

static void *er_row_run(void *arg) {
    er_row_job *j = arg;
    /* rows along the last dimension: their elements in increasing order */
    er__row_rec_begin(&j->rec, j->sk, j->ref->mod == &er__rmsnorm_module || er__rows(j->ref)->dim == j->ref->ndim - 1);
    if (j->ref->mod == &er__rmsnorm_module) j->st = er_rmsnorm_rows(j);
    else j->st = er__softmax_foreach_range(j->ref, j->r0, j->r1, er_softmax_cb, j);
    er__work_free(&j->work);
    er__row_rec_end(&j->rec, j->sk, j->st);
    if (j->r0 > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread: MPFR's per-thread constants */
    return NULL;
}

/* Rows along the last dimension are contiguous in the output: threads take contiguous runs of them (softmax along
 * another dimension: one thread). */
static er_status er_rows_covers(const er_ref *ref, const er_standard *std, er_sinks *sk) {
    int row_par = ref->mod == &er__rmsnorm_module || er__rows(ref)->dim == ref->ndim - 1;
    int64_t rows = er__rows(ref)->K ? ref->n / er__rows(ref)->K : 0;
    int nt = row_par ? er__num_threads(ref->n * 256) : 1;
    if (nt > rows) nt = rows > 0 ? (int)rows : 1;
    /* each thread's row: its values, sets and exact results, about 256 bytes per element at most */
    ER_RETURN_IF_ERROR(er__mem_check(256.0 * (double)er__rows(ref)->K * nt, "the rows' working sets"));
    ER_RETURN_IF_ERROR(er__sinks_open(sk, nt));
    er_row_job jobs[ER_MAX_THREADS];
    int simd = er__simd();
    for (int t = 0; t < nt; t++) {
        jobs[t] = (er_row_job){ .ref = ref, .std = std, .sk = er__sinks_at(sk, t, 0), .r0 = rows * t / nt,
                                .r1 = rows * (t + 1) / nt, .st = ER_OK, .simd = simd };
    }
    er__run_jobs_progress(jobs, sizeof jobs[0], nt, er_row_run, rows);
    for (int t = 0; t < nt; t++) ER_RETURN_IF_ERROR(jobs[t].st);
    return ER_OK;
}

/* softmax: its functions, math models, flushing, div_ulps, online and max=; log_softmax: no division; rmsnorm: its
 * rsqrt, math=triton, mean=. */
static er_status er_rows_check(const er_ref *ref, const er_standard *std) {
    ER_RETURN_IF_ERROR(er__standard_takes(ref, std));
    ER_RETURN_IF_ERROR(er__softmax_standard(std));
    return er__rows_standard(ref, std);
}

er_status er__softmax_standard(const er_standard *std) {
    if (std->depth && std->online)
        return er__fail(ER_ERR_UNSUPPORTED, "depth= with online= is not modelled in this version");
    if (std->subnormals == ER_SUBNORMALS_FLUSH && (std->online || std->max_optional))
        return er__fail(ER_ERR_UNSUPPORTED, "subnormals=flush with online= or max= is not modelled in this version");
    if (std->online && std->max_optional)
        return er__fail(ER_ERR_STANDARD, "online=yes rescales by the running maximum: max=optional contradicts it");
    return ER_OK;
}

static const char *const er_one_out[1] = {"out"};

/* softmax, log_softmax and rmsnorm share the row modules' functions and state; each takes its own options. */
#define ER_ROWS_MODULE(op, t)                                                                                          \
    {.name = op, .takes = ER_TAKES_DEPTH | ER_TAKES_TRITON | (t), .nout = 1, .out_names = er_one_out,                  \
     .out_shape = er__out_shape_same, .check = er_rows_check, .covers = er_rows_covers,                                \
     .priv_size = sizeof(er_rows_state), .inputs = er__rows_inputs, .classic_bug = er__rows_classic_bug}
#define ER_SOFTMAX_TAKES                                                                                               \
    (ER_TAKES_EXP | ER_TAKES_DIV | ER_TAKES_FAST | ER_TAKES_FLUSH | ER_TAKES_DIV_ULPS | ER_TAKES_ONLINE)
const er_op_module er__softmax_module = ER_ROWS_MODULE("softmax", ER_SOFTMAX_TAKES),
                   er__log_softmax_module =
                       ER_ROWS_MODULE("log_softmax", ER_TAKES_EXP | ER_TAKES_LOG | ER_TAKES_FAST | ER_TAKES_FLUSH),
                   er__rmsnorm_module = ER_ROWS_MODULE("rmsnorm", ER_TAKES_RSQRT | ER_TAKES_MEAN | ER_TAKES_VARIANCE);
