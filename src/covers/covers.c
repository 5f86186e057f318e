/* covers.c: the engine (docs/design.md, Op modules). It checks a call's arguments, begins one report per checked
 * output, gives an op's module its sinks, classifies each element the module puts against its set, records the
 * report's counts, first failures, worst element and widest set and, for er_covers_sets, the sets, and merges the
 * module's shares in element order. It reaches an op only through src/ops/module.h; the sets themselves are the
 * modules' (src/ops/dotmod.c, rowmods.c, lnmod.c). */
#include <limits.h>
#include <math.h>
#include <stdint.h> /* before mpfr.h: enables the intmax_t functions */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <mpfr.h>
#include <exactref/mpfr.h>
#include "format/format.h"
#include "format/vecround.h"
#include "ops/module.h"
#include "tensor/tensor_internal.h"

const char *er_class_name(er_class c) {
    switch (c) {
    case ER_CLASS_EXACT: return "exact";
    case ER_CLASS_COVERED: return "covered";
    case ER_CLASS_OVERFLOW: return "overflow";
    case ER_CLASS_OUTSIDE: return "outside";
    case ER_CLASS_NAN_UNEXPECTED: return "nan_unexpected";
    case ER_CLASS_NAN_MISSING: return "nan_missing";
    case ER_CLASS_INF_UNEXPECTED: return "inf_unexpected";
    case ER_CLASS_INF_MISSING: return "inf_missing";
    }
    return "unknown";
}

int er_class_passes(er_class c) {
    return c == ER_CLASS_EXACT || c == ER_CLASS_COVERED || c == ER_CLASS_OVERFLOW;
}

/* The class of the output value y against the set; *dist gets the distance in output ulps for OUTSIDE. Inline in
 * the recording of every element: the common case (finite, inside the set) first. */
static inline er_class er_classify(const er_cset *c, double y, er_format out, double *dist) {
    *dist = 0;
    if (y >= c->lo && y <= c->hi && !c->nan_req)
        return y == c->rounded ? ER_CLASS_EXACT : ER_CLASS_COVERED; /* +0 == -0 */
    if (isnan(y)) {
        if (!c->nan_req && !c->nan_ok) return ER_CLASS_NAN_UNEXPECTED;
        return c->nan_req || isnan(c->rounded) ? ER_CLASS_EXACT : ER_CLASS_OVERFLOW;
    }
    if (c->nan_req) return ER_CLASS_NAN_MISSING;
    if (isinf(y)) {
        if (!(y > 0 ? c->pinf_ok : c->ninf_ok)) return ER_CLASS_INF_UNEXPECTED;
        return y == c->rounded ? ER_CLASS_EXACT : ER_CLASS_OVERFLOW;
    }
    if (c->lo > c->hi)
        return c->pinf_ok || c->ninf_ok ? ER_CLASS_INF_MISSING : ER_CLASS_NAN_MISSING; /* no finite value */
    double edge = y > c->hi ? c->hi : c->lo;
    *dist = fabs(y - edge) / er_format_ulp(out, edge);
    return ER_CLASS_OUTSIDE;
}

static void er_fill_element(er_element *el, const er_report *r, int64_t idx, er_class cls, double y, const er_cset *c,
                            double dist) {
    memset(el, 0, sizeof *el);
    el->index = idx;
    int64_t rem = idx;
    for (int i = r->ndim - 1; i >= 0; i--) {
        el->coord[i] = r->shape[i] ? rem % r->shape[i] : 0;
        rem = r->shape[i] ? rem / r->shape[i] : 0;
    }
    el->cls = cls;
    el->value = y;
    el->lo = c->lo;
    el->hi = c->hi;
    el->nan_allowed = c->nan_ok || c->nan_req;
    el->pinf_allowed = c->pinf_ok;
    el->ninf_allowed = c->ninf_ok;
    el->exact = c->exact;
    el->rounded = c->rounded;
    el->distance_ulps = dist;
    el->stage = -1;
}

/* The output view must have the shape of the op's first output. */
static er_status er_check_out_shape(const er_ref *ref, const er_tensor *out) {
    int nd;
    int64_t sh[ER_MAX_DIMS];
    return er__module_of(ref)->out_shape(ref, 0, out, &nd, sh);
}

static er_status er_check_module_args(const er_op_module *m, const er_ref *ref, int o, const er_tensor *out,
                                      const er_standard *std, int *ndim, int64_t *shape);

/* The arguments of a check of the op's first output. */
static er_status er_check_covers_args(const er_ref *ref, const er_tensor *out, const er_standard *std) {
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(std, "standard");
    int nd;
    int64_t sh[ER_MAX_DIMS];
    return er_check_module_args(er__module_of(ref), ref, 0, out, std, &nd, sh);
}

/* er_covers_sets: element idx's finite set ends (NaN when finite says there are none) and the slack of output y. */
static inline void er_store_set(const er_sink *sk, int64_t idx, int finite, double lo, double hi, double y) {
    sk->set_lo[idx] = finite ? lo : NAN;
    sk->set_hi[idx] = finite ? hi : NAN;
    if (!sk->set_slack) return;
    /* the distance to the nearer edge in ulps of the output at y; negative outside */
    double s = NAN;
    if (finite && isfinite(y)) {
        double d = y >= lo && y <= hi ? fmin(y - lo, hi - y) : -fmax(lo - y, y - hi);
        s = d / er__ulp(sk->O, y);
    }
    sk->set_slack[idx] = s;
}

/* Classifies output value y of element idx against its set into the sink's report. */
static void er_sink_record(er_sink *sk, int64_t idx, const er_cset *c, double y) {
    const er_tensor *out = sk->out;
    double dist = 0;
    er_report *r = sk->rep;
    er_class cls = er_classify(c, y, out->format, &dist);
    r->classes[idx] = (uint8_t)cls;
    /* the set's width relative to its size (how much a passing output could have been off), and the same width where
     * the set lies away from 0 (the resolution's), from one division */
    double rel = -1, away = -1;
    if (!c->nan_req) er_set_rels(c->lo, c->hi, &rel, &away);
    if (rel >= 0 && (!r->has_widest || rel > r->widest_rel)) {
        er_fill_element(&r->widest, r, idx, cls, y, c, dist);
        r->widest_rel = rel;
        r->has_widest = 1;
    }
    if (sk->bug != 0 && !c->nan_req && c->lo <= c->hi && isfinite(c->exact)) {
        /* the op's classic bug: this element's exact value moved by it, rounded to the output format */
        double yb = er__round_double(sk->O, c->exact * (1 + sk->bug), ER_ROUND_NEAREST, sk->ov);
        r->n_bug_tried++;
        r->n_bug_seen += !(yb >= c->lo && yb <= c->hi);
    }
    if (!c->nan_req && c->lo <= -sk->O->max && c->hi >= sk->O->max) r->n_unbounded++;
    if (away >= 0) {
        if (!r->n_away || away > r->coarsest_rel) r->coarsest_rel = away;
        if (!r->n_away || away < r->finest_rel) r->finest_rel = away;
        r->n_away++;
    }
    if (sk->set_lo) er_store_set(sk, idx, c->lo <= c->hi && !c->nan_req, c->lo, c->hi, y);
    r->counts[cls]++;
    if (er_class_passes(cls)) return;
    r->n_failed++;
    if (r->n_first < ER_REPORT_FIRST) er_fill_element(&r->first[r->n_first++], r, idx, cls, y, c, dist);
    int better =
        !r->has_worst || (cls == ER_CLASS_OUTSIDE && (r->worst.cls != ER_CLASS_OUTSIDE || dist > sk->worst_dist));
    if (better) {
        er_fill_element(&r->worst, r, idx, cls, y, c, dist);
        r->has_worst = 1;
        sk->worst_dist = dist;
    }
}

int er__sink_reads_output(const er_sink *sk) { return !sk->enclose; }

void er__sink_put(er_sink *sk, int64_t idx, const er_cset *c) {
    if (sk->enclose) { /* the set alone: its finite part and its special values */
        int finite = c->lo <= c->hi && !c->nan_req;
        sk->set_lo[idx] = finite ? c->lo : NAN;
        sk->set_hi[idx] = finite ? c->hi : NAN;
        if (sk->set_flags) sk->set_flags[idx] = er__cset_flags(c);
        return;
    }
    const er_tensor *out = sk->out;
    er_sink_record(sk, idx, c, er__load(out, sk->out_contig ? idx : er__offset(out, idx)));
}

void er__sink_put_value(er_sink *sk, int64_t idx, const er_cset *c, double y) { er_sink_record(sk, idx, c, y); }

uint8_t *er__sink_classes(er_sink *sk) { return sk->rep->classes; }

void er__sink_stage(er_sink *sk, int64_t idx, int stage) {
    er_report *r = sk->rep;
    if (sk->enclose) return;
    for (int i = 0; i < r->n_first; i++)
        if (r->first[i].index == idx) r->first[i].stage = stage;
    if (r->has_worst && r->worst.index == idx) r->worst.stage = stage;
}

void er__sink_count(er_sink *sk, int cls, int64_t n) {
    sk->rep->counts[cls] += n;
    sk->rep->n_unseen += n;
    if (!er_class_passes((er_class)cls)) sk->rep->n_failed += n;
}

/* Adds to r the record of elements seen elsewhere: the resolution's widths, the classic bug's tests, the unbounded
 * sets. */
static void er_add_seen(er_report *r, const er_sink_tally *t) {
    if (t->n_away) {
        if (!r->n_away || t->coarsest > r->coarsest_rel) r->coarsest_rel = t->coarsest;
        if (!r->n_away || t->finest < r->finest_rel) r->finest_rel = t->finest;
        r->n_away += t->n_away;
    }
    r->n_bug_tried += t->n_bug_tried;
    r->n_bug_seen += t->n_bug_seen;
    r->n_unbounded += t->n_unbounded;
}

int er__sink_tally_put(er_sink *sk, er_sink_tally *t, int64_t idx, const er_cset *c, double y, double *rel) {
    if (c->nan_req || !(y >= c->lo && y <= c->hi)) {
        er_sink_record(sk, idx, c, y);
        *rel = -1;
        return 0;
    }
    /* er_sink_record's steps for an output inside its set (exact or covered), into the tally */
    double dist, away;
    er_class cls = er_classify(c, y, sk->out->format, &dist);
    sk->rep->classes[idx] = (uint8_t)cls;
    if (cls == ER_CLASS_EXACT) t->exact++;
    else t->covered++;
    er_set_rels(c->lo, c->hi, rel, &away);
    if (sk->bug != 0 && isfinite(c->exact)) {
        double yb = er__round_double(sk->O, c->exact * (1 + sk->bug), ER_ROUND_NEAREST, sk->ov);
        t->n_bug_tried++;
        t->n_bug_seen += !(yb >= c->lo && yb <= c->hi);
    }
    if (c->lo <= -sk->O->max && c->hi >= sk->O->max) t->n_unbounded++;
    if (away >= 0) {
        if (!t->n_away || away > t->coarsest) t->coarsest = away;
        if (!t->n_away || away < t->finest) t->finest = away;
        t->n_away++;
    }
    return 1;
}

/* er__sink_tally_run's loop: its counts, the largest and least width of the sets away from 0 (n_away of them). */
typedef struct er_run_tally {
    int64_t exact, covered, n_away, tried, seen, pending;
    double coarsest, finest;
} er_run_tally;

/* One element of er__sink_tally_put's steps in selects: the output inside the finite set [L, H], its classic-bug test
 * decided without the overflow rule (the moved value within O's range) and the set not every finite value of O (an
 * unbounded set, for the record), else pending. Vectorised (core/internal.h). */
ER_ALWAYS_INLINE void er_tally_run_body(int64_t n, const double *restrict lo, const double *restrict hi,
                                        const double *restrict ex, const double *restrict rd,
                                        const double *restrict y, double *restrict rel, uint8_t *restrict cls,
                                        er_vec_fmt f, int narrow, double bug, double omax, er_run_tally *rt) {
    int64_t ne = 0, nc = 0, na = 0, nt = 0, ns = 0, np = 0, hasbug = bug != 0;
    int64_t co = 0, fi = INT64_MAX; /* the widths' bits: a width away from 0 is >= 0, where they order as the values */
    for (int64_t q = 0; q < n; q++) {
        double L = lo[q], H = hi[q], Y = y[q], v = ex[q] * (1 + bug), yb = er_vec_rn_fmt(v, f, narrow);
        int64_t fin = fabs(ex[q]) <= DBL_MAX, in = (Y >= L) & (Y <= H);
        in &= (!hasbug | !fin | er_vec_rn_ok(v, yb, f, narrow)) & !((L <= -omax) & (H >= omax));
        int64_t hit = Y == rd[q], moved = hasbug & fin & in;
        double al = fabs(L), ah = fabs(H), m = al > ah ? al : ah, w = (H - L) / m;
        double r = ((L < H) & (m > 0) & (w <= DBL_MAX)) ? w : -1;
        int64_t aw = in & ((L > 0) | (H < 0)) & (m <= DBL_MAX);
        ne += in & hit;
        nc += in & !hit;
        na += aw;
        int64_t wb, wc, wf;
        memcpy(&wb, &w, sizeof wb);
        wc = wb & -aw; /* masks, not selects: GCC folds a select into the reduction and then cannot vectorise it */
        wf = wc | ((aw - 1) & INT64_MAX);
        co = wc > co ? wc : co;
        fi = wf < fi ? wf : fi;
        nt += moved;
        ns += moved & !((yb >= L) & (yb <= H));
        np += !in;
        cls[q] = in ? (uint8_t)(hit ? ER_CLASS_EXACT : ER_CLASS_COVERED) : (uint8_t)ER_PENDING;
        rel[q] = in ? r : -1;
    }
    double c, m;
    memcpy(&c, &co, sizeof c);
    memcpy(&m, &fi, sizeof m);
    *rt = (er_run_tally){ ne, nc, na, nt, ns, np, c, m };
}
#define ER_TALLY_RUN_ARGS                                                                                             \
    int64_t n, const double *restrict lo, const double *restrict hi, const double *restrict ex,                       \
        const double *restrict rd, const double *restrict y, double *restrict rel, uint8_t *restrict cls,             \
        er_vec_fmt f, double bug, double omax, er_run_tally *rt
#define ER_TALLY_RUN_CALL(narrow) er_tally_run_body(n, lo, hi, ex, rd, y, rel, cls, f, narrow, bug, omax, rt)
ER_ALWAYS_INLINE void er_tally_run_any(ER_TALLY_RUN_ARGS) {
    if (f.narrow) ER_TALLY_RUN_CALL(1);
    else ER_TALLY_RUN_CALL(0);
}
ER_SIMD_BUILDS(er_tally_run, (ER_TALLY_RUN_ARGS), (n, lo, hi, ex, rd, y, rel, cls, f, bug, omax, rt), er_tally_run_any)

int er__sink_tally_runs(const er_sink *sk) {
    er_format o = sk->O->id;
    return !sk->enclose && !sk->set_lo && sk->out->format == o && (o == ER_FP32 || o == ER_FP16 || o == ER_BF16);
}

int64_t er__sink_tally_run(er_sink *sk, er_sink_tally *t, int64_t idx0, int64_t n, const double *lo, const double *hi,
                           const double *ex, const double *rd, const double *y, double *rel, int simd) {
    er_vec_fmt f = er_vec_fmt_of(sk->O);
    uint8_t *cls = sk->rep->classes + idx0;
    er_run_tally rt;
    er_tally_run(simd, n, lo, hi, ex, rd, y, rel, cls, f, sk->bug, sk->O->max, &rt);
    t->exact += rt.exact;
    t->covered += rt.covered;
    t->n_bug_tried += rt.tried;
    t->n_bug_seen += rt.seen;
    if (rt.n_away) {
        if (!t->n_away || rt.coarsest > t->coarsest) t->coarsest = rt.coarsest;
        if (!t->n_away || rt.finest < t->finest) t->finest = rt.finest;
        t->n_away += rt.n_away;
    }
    return rt.pending;
}

void er__sink_tally(er_sink *sk, const er_sink_tally *t) {
    sk->rep->counts[ER_CLASS_EXACT] += t->exact;
    sk->rep->counts[ER_CLASS_COVERED] += t->covered;
    er_add_seen(sk->rep, t);
}

#define ER_OUTS_MAX ((int64_t)1 << 20) /* candidates a share keeps at most (16 MiB) */
int er__outs_mark(er_outs *o, int64_t idx, double dlo, double dhi) {
    if (dlo > o->dmax) o->dmax = dlo;
    if (dhi >= o->dmax) {
        if (o->nfar == o->cap) {
            int64_t k = 0; /* those below the largest lower bound can no longer be the worst */
            for (int64_t i = 0; i < o->nfar; i++)
                if (o->far[i].dhi >= o->dmax) o->far[k++] = o->far[i];
            o->nfar = k;
            if (2 * k >= o->cap) { /* still half full: twice the room */
                int64_t cap = o->cap ? 2 * o->cap : 64;
                er_out_far *f = cap <= ER_OUTS_MAX ? realloc(o->far, sizeof *f * (size_t)cap) : NULL;
                if (f) { o->far = f; o->cap = cap; }
                else if (k == o->cap) return 0;
            }
        }
        o->far[o->nfar++] = (er_out_far){idx, dhi};
    }
    o->n++;
    return 1;
}

void er__outs_finish(er_outs *const *o, int nt, uint8_t *classes, int64_t n, er_sink *sk) {
    int64_t nout = 0, engine = 0, first;
    double D = 0;
    for (int t = 0; t < nt; t++) {
        nout += o[t]->n;
        if (o[t]->dmax > D) D = o[t]->dmax;
    }
    for (int t = 0; t < nt; t++) {
        for (int64_t k = 0; k < o[t]->nfar; k++)
            if (o[t]->far[k].dhi >= D) {
                classes[o[t]->far[k].idx] = ER_PENDING;
                engine++;
            }
        free(o[t]->far);
        o[t]->far = NULL;
        o[t]->nfar = o[t]->cap = 0;
    }
    first = er__outs_relabel(classes, n, nout - engine, NULL);
    er__sink_count(sk, ER_CLASS_OUTSIDE, nout - engine - first);
}

int64_t er__outs_relabel(uint8_t *classes, int64_t n, int64_t nout, int64_t *first) {
    int64_t k = 0, i = 0;
    for (; i < n && k < ER_REPORT_FIRST && k < nout; i++)
        if (classes[i] == ER_FAST_OUT) {
            classes[i] = ER_PENDING;
            if (first) first[k] = i;
            k++;
        }
    if (k == nout) return k;
    for (; i < n; i++) classes[i] = classes[i] == ER_FAST_OUT ? (uint8_t)ER_CLASS_OUTSIDE : classes[i];
    return k;
}

void er__sink_set(er_sink *sk, int64_t idx, double lo, double hi, double y) {
    if (sk->set_lo) er_store_set(sk, idx, 1, lo, hi, y);
}

void er__sink_widest(er_sink *sk, int64_t idx, const er_cset *c, double y) {
    er_report *r = sk->rep;
    double rel = c->nan_req ? -1 : er_set_rel(c->lo, c->hi);
    if (rel < 0 || (r->has_widest && (rel < r->widest_rel || (rel == r->widest_rel && idx > r->widest.index)))) return;
    er_class cls = (er_class)r->classes[idx];
    double dist = 0; /* an element found outside its set has its distance, as er_sink_record gives it */
    if (cls == ER_CLASS_OUTSIDE) (void)er_classify(c, y, sk->out->format, &dist);
    er_fill_element(&r->widest, r, idx, cls, y, c, dist);
    r->widest_rel = rel;
    r->has_widest = 1;
}

/* A thread's partial report of r: empty, sharing r's classes array (each element written by one thread) and its
 * element coordinates; the context records into it. */
static void er_part_begin_sink(er_report *part, const er_report *r, er_sink *sk) {
    memset(part, 0, sizeof *part);
    part->classes = r->classes;
    part->ndim = r->ndim;
    memcpy(part->shape, r->shape, sizeof r->shape);
    sk->rep = part;
}

/* Adds one thread's partial report (elements after those already merged) to r, keeping the sequential rules:
 * counts add up, the first failures stay in index order, the worst is the earliest of the largest distances, the
 * widest set the earliest of the widest. */
static void er_merge(er_report *r, double *worst_dist, const er_report *part, double part_dist) {
    for (int c = 0; c < ER_CLASS_COUNT; c++) r->counts[c] += part->counts[c];
    r->n_failed += part->n_failed;
    for (int i = 0; i < part->n_first && r->n_first < ER_REPORT_FIRST; i++) r->first[r->n_first++] = part->first[i];
    if (part->has_widest && (!r->has_widest || part->widest_rel > r->widest_rel ||
                             (part->widest_rel == r->widest_rel && part->widest.index < r->widest.index))) {
        r->widest = part->widest;
        r->widest_rel = part->widest_rel;
        r->has_widest = 1;
    }
    er_add_seen(r, &(er_sink_tally){ .n_away = part->n_away,
                                     .n_bug_tried = part->n_bug_tried,
                                     .n_bug_seen = part->n_bug_seen,
                                     .n_unbounded = part->n_unbounded,
                                     .coarsest = part->coarsest_rel,
                                     .finest = part->finest_rel });
    r->n_unseen += part->n_unseen;
    if (part->has_worst && (!r->has_worst || (part->worst.cls == ER_CLASS_OUTSIDE &&
                                              (r->worst.cls != ER_CLASS_OUTSIDE || part_dist > *worst_dist)))) {
        r->worst = part->worst;
        r->has_worst = 1;
        *worst_dist = part_dist;
    }
}

/* A new report's header and classes array for an output of ndim/shape. */
static er_status er_report_begin(er_report *r, const char *op, const char *suffix, int ndim, const int64_t *shape,
                                 const er_tensor *out, const er_standard *std) {
    memset(r, 0, sizeof *r);
    r->n = 1;
    for (int i = 0; i < ndim; i++) { r->shape[i] = shape[i]; r->n *= shape[i]; }
    r->ndim = ndim;
    ER_RETURN_IF_ERROR(er__mem_check((double)r->n, "the report's classes"));
    r->classes = malloc((size_t)(r->n ? r->n : 1));
    if (!r->classes) return er__fail(ER_ERR_NOMEM, "cannot allocate %lld classes", (long long)r->n);
    r->guard = er__report_guard(r->classes, NULL);
    snprintf(r->op, sizeof r->op, "%s%s", op, suffix);
    er_standard_format(std, r->standard, sizeof r->standard, NULL);
    r->out_format = out->format;
    return ER_OK;
}

int er_ref_num_outputs(const er_ref *ref) {
    const er_op_module *m = ref ? er__module_of(ref) : NULL;
    return !ref ? 0 : m ? m->nout : 1;
}

const char *er_ref_output_name(const er_ref *ref, int i) {
    if (!ref || i < 0 || i >= er_ref_num_outputs(ref)) return NULL;
    const er_op_module *m = er__module_of(ref);
    return m ? m->out_names[i] : "out";
}

er_status er_ref_output_shape(const er_ref *ref, int output, int *ndim, int64_t *shape) {
    er__ok();
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(ndim, "ndim");
    ER_CHECK_NULL(shape, "shape");
    int nout = er_ref_num_outputs(ref);
    if (output < 0 || output >= nout)
        return er__fail(ER_ERR_INVALID, "output %d is out of range: the %s has %d output%s", output, er__op_name(ref),
                        nout, nout == 1 ? "" : "s");
    int nd;
    int64_t sh[ER_MAX_DIMS];
    ER_RETURN_IF_ERROR(er__module_of(ref)->out_shape(ref, output, NULL, &nd, sh));
    *ndim = nd;
    for (int i = 0; i < nd; i++) shape[i] = sh[i];
    return ER_OK;
}

/* ---- the engine of the op modules (src/ops/module.h): sinks, checks, reports ---- */

/* What one check reads and writes of each output of a module's op (m->nout of them). */
typedef struct er_out_args {
    const er_tensor *out;           /* the kernel's output; NULL: not checked */
    double *lo, *hi, *slack;        /* where its sets go (NULL: not wanted) */
    uint8_t *flags;                 /* er_ref_enclosure's: the sets alone (no output read, nothing classified) */
    int nd;                         /* its shape, as the module gives it */
    int64_t sh[ER_MAX_DIMS];
} er_out_args;

struct er_sinks {
    const er_op_module *m;
    const er_ref *ref;
    const er_standard *std;
    const er_out_args *oa;          /* m->nout */
    er_report *reps;                /* the check's reports, begun */
    void *arg;                      /* er__covers_module's */
    int enclose;                    /* er_ref_enclosure */
    int declined;                   /* er__sinks_decline */
    int nt;
    er_sink *sink;                  /* [nt][nout] */
    er_report *part;                /* [nt][nout]: each share's partial reports */
};

void *er__sinks_arg(er_sinks *sk) { return sk->arg; }

uint8_t *er__sinks_classes(er_sinks *sk, int o) {
    return o >= 0 && o < sk->m->nout && sk->oa[o].out ? sk->reps[o].classes : NULL;
}

void er__sinks_decline(er_sinks *sk) { sk->declined = 1; }

er_status er__sinks_open(er_sinks *sk, int nt) {
    int no = sk->m->nout;
    if (sk->sink || nt < 1) return er__fail(ER_ERR_INTERNAL, "a module opened %d sinks (or twice)", nt);
    sk->sink = calloc((size_t)nt * (size_t)no, sizeof *sk->sink);
    sk->part = calloc((size_t)nt * (size_t)no, sizeof *sk->part);
    if (!sk->sink || !sk->part) return er__fail(ER_ERR_NOMEM, "cannot allocate %d thread sinks", nt);
    sk->nt = nt;
    for (int t = 0; t < nt; t++)
        for (int o = 0; o < no; o++) {
            const er_out_args *a = &sk->oa[o];
            const er_tensor *out = a->out;
            if (!out) continue;
            er_sink *s = &sk->sink[t * no + o];
            s->out = out;
            s->out_contig = er__row_major(out);
            s->O = er__fmt(out->format);
            s->ov = er__overflow_rule(s->O, sk->std->out_overflow);
            s->worst_dist = -1;
            const char *what = NULL;
            s->bug = sk->m->classic_bug && !sk->enclose ? sk->m->classic_bug(sk->ref, o, &what) : 0;
            if (a->lo) {
                s->set_lo = a->lo;
                s->set_hi = a->hi;
                s->set_slack = a->slack;
            }
            if (sk->enclose) {
                s->enclose = 1;
                s->set_flags = a->flags;
            }
            er_part_begin_sink(&sk->part[t * no + o], &sk->reps[o], s);
        }
    return ER_OK;
}

int er__sinks_checks(const er_sinks *sk, int o) { return o >= 0 && o < sk->m->nout && sk->oa[o].out != NULL; }

er_sink *er__sinks_at(er_sinks *sk, int t, int o) {
    return t >= 0 && t < sk->nt && o >= 0 && o < sk->m->nout && sk->oa[o].out ? &sk->sink[t * sk->m->nout + o] : NULL;
}

/* One output of a module's op: the arguments, its shape, the standard. */
static er_status er_check_module_args(const er_op_module *m, const er_ref *ref, int o, const er_tensor *out,
                                      const er_standard *std, int *ndim, int64_t *shape) {
    ER_RETURN_IF_ERROR(er_standard_validate(std));
    ER_RETURN_IF_ERROR(er__tensor_check(out, "out"));
    ER_RETURN_IF_ERROR(m->out_shape(ref, o, out, ndim, shape));
    ER_RETURN_IF_ERROR(m->check(ref, std));
    const er_fmt_info *O = er__fmt(out->format);
    if (std->out_overflow == ER_OVERFLOW_IEEE && !O->has_inf)
        return er__fail(ER_ERR_STANDARD, "overflow=ieee does not apply to output format %s, which has no infinity",
                        O->name);
    if (std->out_overflow == ER_OVERFLOW_NAN && O->no_nan)
        return er__fail(ER_ERR_STANDARD, "overflow=nan does not apply to output format %s, which has no NaN", O->name);
    return ER_OK;
}

er_status er__covers_precheck(const er_op_module *m, const er_ref *ref, int o, const er_tensor *out,
                              const er_standard *std) {
    int nd;
    int64_t sh[ER_MAX_DIMS];
    return er_check_module_args(m, ref, o, out, std, &nd, sh);
}

/* A written view (w) or array (p, bytes) shares no memory with the reference's inputs nor with the view `out`. */
static er_status er_check_written(const er_ref *ref, const er_tensor *w, const char *wname, const void *p, size_t bytes,
                                  const er_tensor *out) {
    const er_tensor *in[16];
    const char *names[16];
    int n = er__ref_inputs(ref, in, names, 16);
    for (int i = 0; i < n; i++) ER_RETURN_IF_ERROR(er__check_disjoint(w, wname, p, bytes, in[i], names[i]));
    if (out) ER_RETURN_IF_ERROR(er__check_disjoint(w, wname, p, bytes, out, "the output"));
    return ER_OK;
}

/* An output a call writes values into: every result needs a pattern, which NaN has not in fp4 or fp6, nor a
 * negative value or zero in e8m0. */
static er_status er_check_storable(const er_tensor *out) {
    const er_fmt_info *O = er__fmt(out->format);
    if (O->no_nan || O->e8m0)
        return er__fail(ER_ERR_FORMAT,
                        "writes no %s output: a result without a pattern there (%s) would be lost; write fp32 and "
                        "convert",
                        O->name, O->e8m0 ? "zero, a negative value, NaN" : "NaN");
    return ER_OK;
}

/* The arrays a call writes (n of them, NULL ones skipped, bytes[k] each): each apart from the inputs, the output
 * (NULL: none read) and the other arrays. */
static er_status er_check_arrays(const er_ref *ref, const er_tensor *out, int n, const void *const *p,
                                 const char *const *names, const size_t *bytes) {
    for (int k = 0; k < n; k++) {
        if (!p[k]) continue;
        ER_RETURN_IF_ERROR(er_check_written(ref, NULL, names[k], p[k], bytes[k], out));
        for (int j = 0; j < k; j++) {
            uintptr_t a = (uintptr_t)p[k], b = (uintptr_t)p[j];
            if (p[j] && bytes[k] && bytes[j] && a < b + bytes[j] && b < a + bytes[k])
                return er__fail(ER_ERR_OUTPUT, "%s shares memory with %s: give each array memory of its own", names[k],
                                names[j]);
        }
    }
    return ER_OK;
}

/* er_covers_sets' arrays (lo, hi, slack; count doubles each). */
static er_status er_check_set_arrays(const er_ref *ref, const er_out_args *a, int64_t count) {
    static const char *const names[3] = {"lo", "hi", "slack"};
    size_t b = sizeof(double) * (size_t)count, bytes[3] = {b, b, b};
    const void *p[3] = {a->lo, a->hi, a->slack};
    return er_check_arrays(ref, a->out, 3, p, names, bytes);
}

/* The outputs' arguments (each output's shape and arrays checked); ER_ERR_NULL when none is checked. */
static er_status er_check_outputs(const er_op_module *m, const er_ref *ref, er_out_args *oa, const er_standard *std) {
    int no = m->nout, any = 0;
    for (int o = 0; o < no; o++) {
        er_out_args *a = &oa[o];
        if (!a->out) continue;
        any = 1;
        ER_RETURN_IF_ERROR(er_check_module_args(m, ref, o, a->out, std, &a->nd, a->sh));
        if (a->lo && !a->flags) {
            int64_t count = 1;
            for (int i = 0; i < a->nd; i++) count *= a->sh[i];
            ER_RETURN_IF_ERROR(er_check_set_arrays(ref, a, count));
        }
    }
    if (any) return ER_OK;
    char names[256];
    int k = 0;
    for (int o = 0; o < no && k >= 0 && (size_t)k < sizeof names; o++)
        k += snprintf(names + k, sizeof names - (size_t)k, "%s%s",
                      o == 0        ? ""
                      : o == no - 1 ? " or "
                                    : ", ",
                      m->out_names[o]);
    return er__fail(ER_ERR_NULL, "every output is NULL: give %s", names);
}

/* covers through a module: its sets into per-share sinks, classified and merged in element order into one report
 * per checked output (reps[o] zeroed where oa[o].out is NULL); oa has m->nout entries. */
/* The exact values of report r's elements (first failures, worst, widest) from m's exact, for an output of format
 * O. */
static er_status er_report_exact(er_report *r, const er_op_module *m, const er_ref *ref, const er_fmt_info *O) {
    er_element *els[ER_REPORT_FIRST + 2];
    int k = 0;
    for (int i = 0; i < r->n_first; i++) els[k++] = &r->first[i];
    if (r->has_worst) els[k++] = &r->worst;
    if (r->has_widest) els[k++] = &r->widest;
    for (int i = 0; i < k; i++) ER_RETURN_IF_ERROR(m->exact(ref, els[i]->index, O, &els[i]->exact, NULL));
    return ER_OK;
}

static er_status er_module_covers(er_report *reps, const er_op_module *m, const er_ref *ref, er_out_args *oa,
                                  const er_standard *std, void *arg, int enclose) {
    int no = m->nout;
    ER_RETURN_IF_ERROR(er_check_outputs(m, ref, oa, std));
    memset(reps, 0, (size_t)no * sizeof *reps);
    er_status st = ER_OK;
    for (int o = 0; o < no && st == ER_OK; o++) {
        if (!oa[o].out) continue;
        char suffix[24] = "";
        if (o) snprintf(suffix, sizeof suffix, ".%s", m->out_names[o]);
        st = er_report_begin(&reps[o], er__op_name(ref), suffix, oa[o].nd, oa[o].sh, oa[o].out, std);
    }
    er_sinks sk = {m, ref, std, oa, reps, arg, enclose, 0, 0, NULL, NULL};
    if (st == ER_OK) st = m->covers(ref, std, &sk);
    if (st == ER_ERR_CANCELLED) ER_CANCELLED(); /* the message in this thread, whichever worker stopped */
    if (st == ER_OK && sk.declined) {
        /* nothing put: the caller checks another way; only er__covers_module's modules may decline */
        if (sk.nt || !arg) st = er__fail(ER_ERR_INTERNAL, "%s declined its check %s", er__op_name(ref),
                                         sk.nt ? "after opening its sinks" : "outside er__covers_module");
        for (int o = 0; o < no; o++) er_report_clear(&reps[o]);
        free(sk.sink);
        free(sk.part);
        return st;
    }
    for (int o = 0; o < no; o++) {
        double worst = -1;
        for (int t = 0; t < sk.nt && st == ER_OK && oa[o].out; t++)
            er_merge(&reps[o], &worst, &sk.part[t * no + o], sk.sink[t * no + o].worst_dist);
    }
    /* the report's elements' exact values from the module's exact where its sets hold near ones (a few elements) */
    for (int o = 0; o < no && st == ER_OK && !enclose && m->report_exact && m->exact; o++)
        if (oa[o].out) st = er_report_exact(&reps[o], m, ref, er__fmt(oa[o].out->format));
    /* an op's classic bug that every set is at least as wide as, or whose output every set holds: the report says
     * such a bug may pass */
    for (int o = 0; o < no && st == ER_OK && !enclose && m->classic_bug; o++) {
        er_report *r = &reps[o];
        const char *what = NULL;
        double t = oa[o].out ? fabs(m->classic_bug(ref, o, &what)) : 0;
        int wide = r->n_away && r->finest_rel >= t, held = r->n_bug_tried > 0 && r->n_bug_seen == 0;
        if (t > 0 && what && !r->n_unseen && (wide || held)) {
            r->blind_rel = t;
            snprintf(r->blind_bug, sizeof r->blind_bug, "%s", what);
        }
    }
    /* every element classified once: a module that skipped some would pass them silently */
    for (int o = 0; o < no && st == ER_OK && !enclose; o++) {
        if (!oa[o].out) continue;
        int64_t tot = 0;
        for (int c = 0; c < ER_CLASS_COUNT; c++) tot += reps[o].counts[c];
        if (tot != reps[o].n)
            st = er__fail(ER_ERR_INTERNAL, "%s classified %lld of the %lld elements of its output %s", er__op_name(ref),
                          (long long)tot, (long long)reps[o].n, m->out_names[o]);
    }
    for (int o = 0; o < no && st != ER_OK; o++) er_report_clear(&reps[o]);
    free(sk.sink);
    free(sk.part);
    return st;
}

/* A check of the module's outputs with arguments oa (m->nout of them) whose reports the caller does not keep but
 * output `keep`'s (into *rep; NULL: none kept). */
static er_status er_module_covers_one(er_report *rep, int keep, const er_op_module *m, const er_ref *ref,
                                      er_out_args *oa, const er_standard *std, void *arg, int enclose) {
    er_report *reps = calloc((size_t)m->nout, sizeof *reps);
    if (!reps) return er__fail(ER_ERR_NOMEM, "cannot allocate %d reports", m->nout);
    er_status st = er_module_covers(reps, m, ref, oa, std, arg, enclose);
    if (st == ER_OK && rep) *rep = reps[keep];
    else if (st == ER_OK) er_report_clear(&reps[keep]);
    free(reps);
    return st;
}

/* Every output's arguments, zeroed (m->nout of them; free with free()). */
static er_status er_out_args_new(const er_op_module *m, er_out_args **oa) {
    *oa = calloc((size_t)m->nout, sizeof **oa);
    return *oa ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate the arguments of %d outputs", m->nout);
}

static er_status er_covers_sets_run(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std,
                                    double *set_lo, double *set_hi, double *set_slack);

/* The outputs of module m's op (several) into reps, with the sets where asked for and arg for m's covers. */
static er_status er_module_outputs(er_report *reps, const er_op_module *m, const er_ref *ref,
                                   const er_tensor *const *outs, int nout, const er_standard *std,
                                   double *const *set_lo, double *const *set_hi, double *const *set_slack, void *arg) {
    ER_CHECK_NULL(std, "standard");
    er_out_args *oa;
    ER_RETURN_IF_ERROR(er_out_args_new(m, &oa));
    er_report *tmp = calloc((size_t)nout, sizeof *tmp);
    er_status st = tmp ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate the reports of %d outputs", nout);
    for (int o = 0; st == ER_OK && o < nout; o++)
        oa[o] = (er_out_args){.out = outs[o], .lo = set_lo ? set_lo[o] : NULL, .hi = set_hi ? set_hi[o] : NULL,
                              .slack = set_slack ? set_slack[o] : NULL};
    if (st == ER_OK) st = er_module_covers(tmp, m, ref, oa, std, arg, 0);
    if (st == ER_OK) memcpy(reps, tmp, (size_t)nout * sizeof *tmp); /* reps untouched on refusal until finished */
    free(tmp);
    free(oa);
    return st;
}

static er_status er_covers_outputs_run(er_report *reps, const er_ref *ref, const er_tensor *const *outs, int nout,
                                       const er_standard *std, double *const *set_lo, double *const *set_hi,
                                       double *const *set_slack) {
    er__ok();
    ER_CHECK_NULL(reps, "reports");
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(outs, "outs");
    int want = er_ref_num_outputs(ref);
    if (nout != want)
        return er__fail(ER_ERR_OUTPUT, "%s has %d output%s (got %d)", er__op_name(ref), want, want == 1 ? "" : "s",
                        nout);
    const er_op_module *m = er__module_of(ref);
    if (nout == 1) {
        ER_CHECK_NULL(outs[0], "outs[0]");
        return er_covers_sets_run(reps, ref, outs[0], std, set_lo ? set_lo[0] : NULL, set_hi ? set_hi[0] : NULL,
                                  set_slack ? set_slack[0] : NULL);
    }
    return er_module_outputs(reps, m, ref, outs, nout, std, set_lo, set_hi, set_slack, NULL);
}

er_status er__covers_module_outputs(er_report *reps, const er_op_module *m, const er_ref *ref,
                                    const er_tensor *const *outs, const er_standard *std, void *arg) {
    return er_module_outputs(reps, m, ref, outs, m->nout, std, NULL, NULL, NULL, arg);
}

/* How many of a caller's nout reports a call finishes: its op's outputs at most (the array holds nout). */
static int er_reports_written(const er_ref *ref, int nout) {
    int want = er_ref_num_outputs(ref);
    return nout < want ? nout : want;
}

er_status er_covers_outputs(er_report *reps, const er_ref *ref, const er_tensor *const *outs, int nout,
                            const er_standard *std) {
    er_status st = er_covers_outputs_run(reps, ref, outs, nout, std, NULL, NULL, NULL);
    for (int i = 0, k = er_reports_written(ref, nout); reps && i < k; i++) er__report_finish(&reps[i], st);
    return st;
}

er_status er_covers(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std) {
    er_status st = er__covers_run(rep, ref, out, std);
    er__report_finish(rep, st);
    return st;
}

er_status er_covers_sets(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std, double *lo,
                         double *hi, double *slack) {
    er__ok();
    er_status st = lo && hi ? er_covers_sets_run(rep, ref, out, std, lo, hi, slack)
                            : er__fail(ER_ERR_NULL, "lo and hi must not be NULL");
    er__report_finish(rep, st);
    return st;
}

er_status er_covers_outputs_sets(er_report *reps, const er_ref *ref, const er_tensor *const *outs, int nout,
                                 const er_standard *std, double *const *lo, double *const *hi, double *const *slack) {
    er__ok();
    er_status st = lo && hi ? ER_OK : er__fail(ER_ERR_NULL, "lo and hi must not be NULL (their entries may be)");
    for (int i = 0, k = er_reports_written(ref, nout); st == ER_OK && i < k; i++)
        if (!lo[i] != !hi[i]) st = er__fail(ER_ERR_NULL, "lo[%d] and hi[%d] are both given or both NULL", i, i);
    if (st == ER_OK) st = er_covers_outputs_run(reps, ref, outs, nout, std, lo, hi, slack);
    for (int i = 0, k = er_reports_written(ref, nout); reps && i < k; i++) er__report_finish(&reps[i], st);
    return st;
}

er_status er__covers_run(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std) {
    return er_covers_sets_run(rep, ref, out, std, NULL, NULL, NULL);
}

static er_status er_covers_sets_run(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std,
                                    double *set_lo, double *set_hi, double *set_slack) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_RETURN_IF_ERROR(er_check_covers_args(ref, out, std));
    /* the op's first output (the others unchecked) */
    const er_op_module *m = er__module_of(ref);
    er_out_args *oa;
    ER_RETURN_IF_ERROR(er_out_args_new(m, &oa));
    oa[0] = (er_out_args){.out = out, .lo = set_lo, .hi = set_lo ? set_hi : NULL, .slack = set_lo ? set_slack : NULL};
    er_status st = er_module_covers_one(rep, 0, m, ref, oa, std, NULL, 0);
    free(oa);
    return st;
}

er_status er__covers_module(er_report *rep, const er_op_module *m, const er_ref *ref, const er_tensor *out,
                            const er_standard *std, void *arg) {
    ER_RETURN_IF_ERROR(er_check_covers_args(ref, out, std));
    er_out_args *oa;
    ER_RETURN_IF_ERROR(er_out_args_new(m, &oa));
    oa[0].out = out;
    er_status st = er_module_covers_one(rep, 0, m, ref, oa, std, arg, 0);
    free(oa);
    return st;
}

er_status er_ref_enclosure(const er_ref *ref, int output, const er_standard *std, er_format format, double *lo,
                           double *hi, uint8_t *flags) {
    er__ok();
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(std, "standard");
    ER_CHECK_NULL(lo, "lo");
    ER_CHECK_NULL(hi, "hi");
    ER_CHECK_NULL(flags, "flags");
    const er_op_module *m = er__module_of(ref);
    if (output < 0 || output >= m->nout)
        return er__fail(ER_ERR_INVALID, "output %d: %s has %d output%s", output, er__op_name(ref), m->nout,
                        m->nout == 1 ? "" : "s");
    if (!er__fmt(format)) return er__fail(ER_ERR_FORMAT, "invalid format value %d", (int)format);
    /* the output's shape (a view of no dimensions never fits, and the module names the shape it wants) */
    er_tensor probe;
    memset(&probe, 0, sizeof probe);
    probe.format = format;
    int nd = 0;
    int64_t sh[ER_MAX_DIMS], count = 1;
    (void)m->out_shape(ref, output, &probe, &nd, sh);
    er__ok();
    for (int i = 0; i < nd; i++) count *= sh[i];
    /* a view of the output's shape and format, never read: the engine reads no output for an enclosure */
    er_tensor view;
    ER_RETURN_IF_ERROR(er_tensor_view(&view, format, nd, sh, NULL, lo));
    static const char *const names[3] = {"lo", "hi", "flags"};
    const void *arrays[3] = {lo, hi, flags};
    size_t bytes[3] = {sizeof(double) * (size_t)count, sizeof(double) * (size_t)count, (size_t)count};
    ER_RETURN_IF_ERROR(er_check_arrays(ref, NULL, 3, arrays, names, bytes));
    er_out_args *oa;
    ER_RETURN_IF_ERROR(er_out_args_new(m, &oa));
    oa[output] = (er_out_args){.out = &view, .lo = lo, .hi = hi, .flags = flags};
    er_status st = er_module_covers_one(NULL, output, m, ref, oa, std, NULL, 1);
    free(oa);
    return st;
}

er_status er_emulate(const er_ref *ref, er_tensor *out, const er_standard *std) {
    er__ok();
    ER_RETURN_IF_ERROR(er_check_covers_args(ref, out, std));
    const er_op_module *m = er__module_of(ref);
    if (!m->emulate)
        return er__fail(ER_ERR_STANDARD, "emulate needs a fully fixed standard; %s's elementary functions leave its "
                        "results free", er__op_name(ref));
    ER_RETURN_IF_ERROR(er_check_storable(out));
    ER_RETURN_IF_ERROR(er_check_written(ref, out, "the output", NULL, 0, NULL));
    return m->emulate(ref, out, std);
}

er_status er_ref_exact(const er_ref *ref, const int64_t *index, er_format f, double *exact, double *rounded) {
    er__ok();
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(index, "index");
    const er_fmt_info *O = er__fmt(f);
    if (!O) return er__fail(ER_ERR_FORMAT, "invalid format value %d", (int)f);
    int64_t idx;
    ER_RETURN_IF_ERROR(er__ref_index(ref, index, &idx));
    const er_op_module *m = er__module_of(ref);
    if (!m->exact)
        return er__fail(ER_ERR_UNSUPPORTED,
                        "er_ref_exact does not give %s values in this version (covers reports them)", er__op_name(ref));
    return m->exact(ref, idx, O, exact, rounded);
}

er_status er_ref_rounded(er_tensor *out, const er_ref *ref) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(ref, "ref");
    ER_RETURN_IF_ERROR(er__tensor_check(out, "out"));
    ER_RETURN_IF_ERROR(er_check_out_shape(ref, out));
    ER_RETURN_IF_ERROR(er__check_distinct(out));
    ER_RETURN_IF_ERROR(er_check_storable(out));
    ER_RETURN_IF_ERROR(er_check_written(ref, out, "the output", NULL, 0, NULL));
    const er_op_module *m = er__module_of(ref);
    if (!m->exact)
        return er__fail(ER_ERR_UNSUPPORTED, "er_ref_rounded does not give %s values in this version", er__op_name(ref));
    if (m->rounded) return m->rounded(ref, out);
    int64_t n = er__ref_numel(ref);
    for (int64_t idx = 0; idx < n; idx++) {
        double v;
        ER_RETURN_IF_ERROR(m->exact(ref, idx, er__fmt(out->format), NULL, &v));
        er__store_value(out, idx, v, ER_OVERFLOW_DEFAULT);
    }
    return ER_OK;
}

er_status er_ref_exact_mpfr(mpfr_ptr out, const er_ref *ref, const int64_t *index) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(index, "index");
    int64_t idx;
    ER_RETURN_IF_ERROR(er__ref_index(ref, index, &idx));
    const er_op_module *m = er__module_of(ref);
    if (!m->exact_mpfr)
        return er__fail(ER_ERR_UNSUPPORTED,
                        "er_ref_exact_mpfr gives matmul, sum, tensor and chain values (this is a %s)",
                        er__op_name(ref));
    return m->exact_mpfr(ref, idx, out);
}
