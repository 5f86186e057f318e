/* xentmod.c: cross_entropy's op module (src/ops/module.h): from logits (N x C, or one row of C) and integer targets,
 * two outputs, the loss (one value for reductions "mean" and "sum", one per row for "none") and dlogits (the
 * logits' shape), as torch's F.cross_entropy and its backward, and fused cross-entropy kernels, produce them. The
 * sets are src/enclose/xent.c's (docs/algorithms/cross-entropy.md). Share t takes a run of rows; a reduced loss is
 * summed from every row's bounds after the shares end. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "format/format.h"
#include "ops/xent_internal.h"
#include "tensor/tensor_internal.h"
#include "enclose/ival.h"

typedef struct er_xent_state {
    er_tensor x;     /* the logits' view */
    int64_t *target; /* a copy of the targets, one per row */
    int64_t N, C, W; /* rows, classes, rows not ignored */
    int64_t ignore;
    int reduction; /* er_reduction */
    double eps;
    const er_xent_dev *dev; /* the rows on a device (NULL: the logits' view is host memory) */
} er_xent_state;
static er_xent_state *er__xent(const er_ref *r) { return (er_xent_state *)r->priv; }

static void er_xent_destroy(er_ref *r) { free(er__xent(r)->target); }

void er__xent_attach_dev(er_ref *ref, const er_xent_dev *d) { er__xent(ref)->dev = d; }

/* Row r's logits into x, from the view or the device. */
static er_status er_xent_load_row(const er_xent_state *s, int simd, int64_t r, double *x) {
    if (s->dev) return s->dev->load(s->dev, r, x, NULL);
    er__load_run(simd, &s->x, r * s->C, s->C, x);
    return ER_OK;
}

static int er_xent_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap) {
    if (cap < 1) return 1;
    views[0] = &er__xent(r)->x;
    names[0] = "logits";
    return 1;
}

er_status er_cross_entropy(er_ref **out, const er_tensor *logits, const int64_t *target, int64_t ntarget,
                           int reduction, int64_t ignore_index, double label_smoothing) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(logits, "logits");
    ER_CHECK_NULL(target, "target");
    ER_RETURN_IF_ERROR(er__tensor_check(logits, "logits"));
    if (logits->ndim > 2)
        return er__fail(ER_ERR_SHAPE, "logits must be N x C or one row of C (got %d dimensions)", logits->ndim);
    if (reduction < ER_REDUCTION_MEAN || reduction > ER_REDUCTION_NONE)
        return er__fail(ER_ERR_INVALID, "reduction must be ER_REDUCTION_MEAN, _SUM or _NONE (got %d)", reduction);
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        return er__fail(ER_ERR_INVALID, "label_smoothing must be in [0, 1] (got %g)", label_smoothing);
    int64_t N = logits->ndim == 2 ? logits->shape[0] : 1, C = logits->shape[logits->ndim - 1];
    if (C < 1) return er__fail(ER_ERR_SHAPE, "cross_entropy needs at least one class (logits have C = 0)");
    if (ntarget != N)
        return er__fail(ER_ERR_SHAPE, "target must hold one class per row: %lld rows, %lld targets", (long long)N,
                        (long long)ntarget);
    int64_t W = 0;
    for (int64_t i = 0; i < N; i++) {
        if (target[i] == ignore_index) continue;
        if (target[i] < 0 || target[i] >= C)
            return er__fail(ER_ERR_INVALID, "target[%lld] = %lld is outside [0, %lld) and not ignore_index (%lld)",
                            (long long)i, (long long)target[i], (long long)C, (long long)ignore_index);
        W++;
    }
    ER_RETURN_IF_ERROR(er__mem_check((double)sizeof(int64_t) * (double)N, "cross_entropy's targets"));
    er_ref *r;
    ER_RETURN_IF_ERROR(er__ref_alloc(&r, &er__cross_entropy_module));
    er_xent_state *s = er__xent(r);
    s->target = malloc(sizeof(int64_t) * (size_t)(N ? N : 1));
    if (!s->target) {
        er_ref_free(r);
        return er__fail(ER_ERR_NOMEM, "cannot copy %lld targets", (long long)N);
    }
    if (N) memcpy(s->target, target, sizeof(int64_t) * (size_t)N);
    s->x = *logits;
    s->N = N;
    s->C = C;
    s->W = W;
    s->ignore = ignore_index;
    s->reduction = reduction;
    s->eps = label_smoothing;
    r->ndim = 1;
    r->shape[0] = reduction == ER_REDUCTION_NONE ? N : 1;
    r->n = r->shape[0];
    *out = r;
    return ER_OK;
}

/* loss: (1) or (N); dlogits: the logits' shape. */
static er_status er_xent_out_shape(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape) {
    if (o == 0) {
        *ndim = 1;
        shape[0] = ref->shape[0];
        if (out && out->ndim == 1 && out->shape[0] == shape[0]) return ER_OK;
        return er__out_shape_fits(ref, o, out, *ndim, shape);
    }
    const er_tensor *x = &er__xent(ref)->x;
    *ndim = x->ndim;
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    return er__out_shape_fits(ref, o, out, *ndim, shape);
}

/* any_order in a compute format holding the logits, with softmax's options (exp, log, division, online, flush). */
static er_status er_xent_check(const er_ref *ref, const er_standard *std) {
    ER_RETURN_IF_ERROR(er__standard_backward(ref, std, "its sums"));
    return er__softmax_standard(std);
}

typedef struct er_xent_job {
    const er_ref *ref;
    er_xent_plan pl;
    er_sink *sl, *sg;     /* the loss's sink (reduction none) and dlogits' (NULL: not checked) */
    int fast;             /* dlogits decided on the fast path where it can (Theorem X3) */
    er_xent_loss *rows;   /* every row's loss (reductions mean and sum) */
    int64_t r0, r1;
    er_status st;
} er_xent_job;

/* A loss element's set from its bounds (real, the kernel's value in F) and its exact enclosure; special as
 * er_xent_loss's. */
static void er_xent_put_loss(er_sink *sk, const er_fmt_info *F, int64_t idx, double lo, double hi, double ex,
                             double rd, int special) {
    er_cval v;
    if (special == 1) er__cval_from_interval(&v, NAN, NAN, 1, F);
    else if (special == 2) {
        memset(&v, 0, sizeof v);
        v.lo = INFINITY;
        v.hi = -INFINITY;
        v.pinf = v.nan = 1;
    } else
        er__cval_from_interval(&v, er__round_double(F, lo, ER_ROUND_UP, ER_OVERFLOW_IEEE),
                               er__round_double(F, hi, ER_ROUND_DOWN, ER_OVERFLOW_IEEE), 0, F);
    er_cset c;
    er__cset_build(&c, sk->O, sk->ov, 1, &v, ex, rd);
    er__sink_put(sk, idx, &c);
}

/* The exact loss of rows [0, N) (reduced: their sum, over W for "mean"; else row i alone) correctly rounded into O
 * (*rd): MPFR at 128, 512 and 2048 bits until both ends round alike; still undecided, the lower end's rounding. */
static er_status er_xent_loss_exact_mp(const er_ref *ref, const er_xent_plan *pl, const er_fmt_info *O,
                                       er_overflow ov, int64_t i, double *rd, double *ex) {
    const er_xent_state *s = er__xent(ref);
    int64_t C = s->C;
    double *x = malloc(sizeof(double) * (size_t)C), r1 = NAN;
    if (!x) return er__fail(ER_ERR_NOMEM, "cannot allocate a cross_entropy row of %lld", (long long)C);
    er_status st = ER_OK;
    for (mpfr_prec_t prec = 128; prec <= 2048 && st == ER_OK; prec *= 4) {
        mpfr_t lo, hi, a, b;
        mpfr_inits2(prec + 64, lo, hi, a, b, (mpfr_ptr)0);
        mpfr_set_zero(lo, 1);
        mpfr_set_zero(hi, 1);
        for (int64_t r = i < 0 ? 0 : i; r < (i < 0 ? s->N : i + 1) && st == ER_OK; r++) {
            if (s->target[r] == s->ignore) continue;
            st = er_xent_load_row(s, 0, r, x);
            if (st != ER_OK) break;
            er__xent_loss_mp(pl, x, s->target[r], prec, a, b);
            mpfr_add(lo, lo, a, MPFR_RNDD);
            mpfr_add(hi, hi, b, MPFR_RNDU);
        }
        if (i < 0 && s->reduction == ER_REDUCTION_MEAN) {
            mpfr_div_si(lo, lo, (long)s->W, MPFR_RNDD);
            mpfr_div_si(hi, hi, (long)s->W, MPFR_RNDU);
        }
        r1 = er__round_mpfr(O, lo, ER_ROUND_NEAREST, ov);
        double r2 = er__round_mpfr(O, hi, ER_ROUND_NEAREST, ov);
        *ex = mpfr_get_d(lo, MPFR_RNDN);
        mpfr_clears(lo, hi, a, b, (mpfr_ptr)0);
        if (r1 == r2) break;
    }
    free(x);
    *rd = r1;
    return st;
}

/* The loss's correct rounding into the sink's format from the exact enclosure [el, eh], or by MPFR (i: the row, -1:
 * the reduction). */
static er_status er_xent_loss_rounded(const er_ref *ref, const er_xent_plan *pl, const er_sink *sk, int64_t i,
                                      double el, double eh, double *rd, double *ex) {
    double r1 = er__round_double(sk->O, el, ER_ROUND_NEAREST, sk->ov),
           r2 = er__round_double(sk->O, eh, ER_ROUND_NEAREST, sk->ov);
    *ex = el + (eh - el) / 2;
    *rd = r1;
    if ((r1 == r2 && !pl->mp_only) || isinf(el) || isinf(eh)) return ER_OK;
    return er_xent_loss_exact_mp(ref, pl, sk->O, sk->ov, i, rd, ex);
}

static void *er_xent_run(void *arg) {
    er_xent_job *j = arg;
    const er_xent_state *s = er__xent(j->ref);
    int64_t C = s->C;
    size_t c1 = (size_t)C;
    double *x = malloc(sizeof(double) * 12 * c1);
    er_cval *cv = malloc(sizeof *cv * 3 * c1);
    uint8_t *cls = malloc(c1);
    j->st = x && cv && cls ? ER_OK
                           : er__fail(ER_ERR_NOMEM, "cannot allocate a cross_entropy row of %lld", (long long)C);
    er_xent_work w = { x + C, cv + C };
    /* the outputs: for the fast decision, and where the output is the device's, for every element put */
    double *gex = x + 9 * C, *grd = x + 10 * C, *y = j->fast || (s->dev && j->sg) ? x + 11 * C : NULL;
    uint8_t *classes = j->fast ? er__sink_classes(j->sg) : NULL;
    int64_t counts[2] = { 0, 0 };
    for (int64_t r = j->r0; r < j->r1 && j->st == ER_OK; r++) {
        if (er__cancelled()) {
            j->st = ER_ERR_CANCELLED;
            break;
        }
        er__progress_step(1);
        int64_t t = s->target[r];
        er_xent_loss ls = { 0, 0, 0, 0, 0 };
        int whole = s->dev && s->dev->whole[r]; /* the GPU's: the classes written, the loss from its sums */
        if (whole) {
            if (t != s->ignore && j->pl.want_loss) j->st = er__xent_loss_of_sums(&j->pl, &s->dev->sums[r], t, &ls);
        } else if (s->dev) {
            j->st = s->dev->load(s->dev, r, x, y); /* both, from the device */
        } else if (y) {
            er__load_run(j->pl.sm.simd, j->sg->out, r * C, C, y);
        }
        if (whole || j->st != ER_OK) {
            /* nothing more to compute */
        } else if (t == s->ignore) { /* an ignored row: loss 0, gradient 0 */
            for (int64_t k = 0; j->sg && k < C; k++) {
                er__cval_from_interval(&cv[k], 0.0, 0.0, 0, j->pl.F);
                gex[k] = grd[k] = 0;
                cls[k] = y && y[k] == 0 ? ER_CLASS_EXACT : ER_PENDING;
            }
        } else {
            if (!s->dev) er__load_run(j->pl.sm.simd, &s->x, r * C, C, x);
            j->st = er__xent_row(&j->pl, x, t, &w, &ls, y, cls, cv, gex, grd);
        }
        if (j->st != ER_OK) break;
        if (j->rows) j->rows[r] = ls;
        if (j->sl) {
            double ex = 0, rd = 0;
            if (t != s->ignore && ls.special == 0)
                j->st = er_xent_loss_rounded(j->ref, &j->pl, j->sl, r, ls.elo, ls.ehi, &rd, &ex);
            else if (ls.special) ex = rd = ls.special == 1 ? NAN : INFINITY;
            if (j->st != ER_OK) break;
            er_xent_put_loss(j->sl, j->pl.F, r, ls.lo, ls.hi, ex, rd, t == s->ignore ? 0 : ls.special);
        }
        for (int64_t k = 0; j->sg && !whole && k < C; k++) {
            int open = cls[k] == ER_XENT_OPEN; /* its candidates in the set, none the exact one */
            if (classes) { /* decided on the fast path, or put below */
                classes[r * C + k] = open ? ER_PENDING : cls[k];
                if (cls[k] == ER_CLASS_EXACT || cls[k] == ER_CLASS_COVERED) {
                    counts[cls[k] == ER_CLASS_COVERED]++;
                    continue;
                }
            }
            er_cset c;
            er__cset_build(&c, j->sg->O, j->sg->ov, !open, &cv[k], gex[k], open ? NAN : grd[k]);
            if (s->dev) er__sink_put_value(j->sg, r * C + k, &c, y[k]); /* the output is the device's */
            else er__sink_put(j->sg, r * C + k, &c);
        }
    }
    if (classes) {
        er__sink_count(j->sg, ER_CLASS_EXACT, counts[0]);
        er__sink_count(j->sg, ER_CLASS_COVERED, counts[1]);
    }
    free(x);
    free(cv);
    free(cls);
    if (j->r0 > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread (job 0 runs in the calling one) */
    return NULL;
}

/* The reduced loss from every row's bounds: their sums (over W for "mean"). */
static er_status er_xent_reduce(const er_ref *ref, const er_xent_plan *pl, er_sink *sk, const er_xent_loss *rows) {
    const er_xent_state *s = er__xent(ref);
    double lo = 0, hi = 0, el = 0, eh = 0;
    int special = 0;
    for (int64_t r = 0; r < s->N; r++) {
        if (s->target[r] == s->ignore) continue;
        if (rows[r].special == 1 || (rows[r].special == 2 && special == 0)) special = rows[r].special;
        lo = er__dn(lo + rows[r].lo);
        hi = er__up(hi + rows[r].hi);
        el = er__dn(el + rows[r].elo);
        eh = er__up(eh + rows[r].ehi);
    }
    if (s->reduction == ER_REDUCTION_MEAN && s->W == 0) { /* 0 / 0: NaN, or 0 where the kernel guards it */
        er_cval v;
        er__cval_from_interval(&v, 0.0, 0.0, 1, pl->F);
        er_cset c;
        er__cset_build(&c, sk->O, sk->ov, 0, &v, NAN, NAN);
        er__sink_put(sk, 0, &c);
        return ER_OK;
    }
    if (s->reduction == ER_REDUCTION_MEAN) {
        double W = (double)s->W;
        lo = er__dn(lo / W);
        hi = er__up(hi / W);
        el = er__dn(el / W);
        eh = er__up(eh / W);
    }
    double ex = special == 1 ? NAN : INFINITY, rd = ex;
    if (special == 0) ER_RETURN_IF_ERROR(er_xent_loss_rounded(ref, pl, sk, -1, el, eh, &rd, &ex));
    er_xent_put_loss(sk, pl->F, 0, lo, hi, ex, rd, special);
    return ER_OK;
}

void er__xent_plan_of(const er_ref *ref, const er_standard *std, const er_fmt_info *G, er_overflow gov,
                      int want_loss, er_xent_plan *pl) {
    const er_xent_state *s = er__xent(ref);
    int64_t C = s->C;
    int reduced = s->reduction != ER_REDUCTION_NONE;
    const er_fmt_info *F = er__fmt(std->compute);
    int64_t dC = std->depth && std->depth < C - 1 ? std->depth : C - 1;
    int64_t dN = !reduced ? 0 : std->depth && std->depth < s->W - 1 ? std->depth : (s->W > 1 ? s->W - 1 : 0);
    const char *fast = getenv("EXACTREF_FAST"); /* =0: the exact results by MPFR alone, as the tests ask */
    int mp_only = fast && fast[0] == '0', simd = er__simd();
    *pl = (er_xent_plan){ er__softmax_plan_of(std, F, ER_OVERFLOW_IEEE, 0),
                          F,
                          er__fmt(s->x.format),
                          G,
                          gov,
                          s->eps,
                          C,
                          dC,
                          dN,
                          s->reduction == ER_REDUCTION_MEAN && s->W > 0 ? (double)s->W : 1.0,
                          mp_only,
                          std->products == 1,
                          want_loss,
                          simd };
    pl->sm.simd = simd;
}

/* The end of share t of nt over rows a GPU pass partly gave whole: the rows the host takes weigh as a row's classes
 * (1 + C / 16 against 1 for a row whose loss alone follows from its sums), the shares about equal in weight. */
static int64_t er_xent_split(const er_xent_state *s, int nt, int t) {
    if (t == nt - 1) return s->N;
    double total = 0, w = 1 + (double)s->C / 16, acc = 0;
    for (int64_t r = 0; r < s->N; r++) total += s->dev->whole[r] ? 1 : w;
    double goal = total * (double)(t + 1) / nt;
    int64_t r = 0;
    for (; r < s->N && acc < goal; r++) acc += s->dev->whole[r] ? 1 : w;
    return r;
}

static er_status er_xent_covers(const er_ref *ref, const er_standard *std, er_sinks *sk) {
    const er_xent_state *s = er__xent(ref);
    int64_t N = s->N, C = s->C;
    int nt = er__num_threads(N * C * 64);
    if (nt > N) nt = N > 0 ? (int)N : 1;
    ER_RETURN_IF_ERROR(er__sinks_open(sk, nt));
    int reduced = s->reduction != ER_REDUCTION_NONE;
    er_sink *loss0 = er__sinks_at(sk, 0, 0);
    er_xent_loss *rows = NULL;
    if (reduced && loss0) {
        ER_RETURN_IF_ERROR(er__mem_check((double)sizeof *rows * (double)N, "cross_entropy's row losses"));
        rows = calloc((size_t)(N ? N : 1), sizeof *rows);
        if (!rows) return er__fail(ER_ERR_NOMEM, "cannot allocate the losses of %lld rows", (long long)N);
    }
    er_xent_job jobs[ER_MAX_THREADS];
    for (int t = 0; t < nt; t++) {
        er_sink *sg = er__sinks_at(sk, t, 1);
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].ref = ref;
        jobs[t].sl = reduced ? NULL : er__sinks_at(sk, t, 0);
        jobs[t].sg = sg;
        jobs[t].rows = rows;
        jobs[t].r0 = t ? jobs[t - 1].r1 : 0;
        jobs[t].r1 = s->dev ? er_xent_split(s, nt, t) : N * (t + 1) / nt;
        er__xent_plan_of(ref, std, sg ? sg->O : NULL, sg ? sg->ov : ER_OVERFLOW_IEEE, loss0 != NULL, &jobs[t].pl);
    }
    for (int t = 0; t < nt; t++) {
        er_xent_job *j = &jobs[t];
        /* the fast decision reads the output and writes classes: not for er_ref_enclosure nor where the sets are
         * asked for */
        j->fast = j->sg && er__sink_reads_output(j->sg) && !j->sg->set_lo && er__xent_fast_ok(&j->pl);
    }
    er__run_jobs_progress(jobs, sizeof jobs[0], nt, er_xent_run, N);
    er_status st = ER_OK;
    for (int t = 0; t < nt && st == ER_OK; t++) st = jobs[t].st;
    er_sink *g0 = er__sinks_at(sk, 0, 1);
    if (st == ER_OK && s->dev && g0) { /* the classes the GPU wrote */
        er__sink_count(g0, ER_CLASS_EXACT, s->dev->counts[0]);
        er__sink_count(g0, ER_CLASS_COVERED, s->dev->counts[1]);
    }
    if (st == ER_OK && rows) st = er_xent_reduce(ref, &jobs[0].pl, loss0, rows);
    free(rows);
    return st;
}

static const char *const er_xent_names[2] = { "loss", "dlogits" };

const er_op_module er__cross_entropy_module = {
    .name = "cross_entropy",
    .nout = 2,
    .out_names = er_xent_names,
    .priv_size = sizeof(er_xent_state),
    .destroy = er_xent_destroy,
    .takes = ER_TAKES_DEPTH | ER_TAKES_EXP | ER_TAKES_FAST | ER_TAKES_TRITON | ER_TAKES_FLUSH | ER_TAKES_DIV_ULPS |
             ER_TAKES_ONLINE | ER_TAKES_LOG | ER_TAKES_DIV | ER_TAKES_PRODUCTS,
    .inputs = er_xent_inputs,
    .out_shape = er_xent_out_shape,
    .check = er_xent_check,
    .covers = er_xent_covers,
};
