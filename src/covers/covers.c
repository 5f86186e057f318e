/* covers.c: covering sets of the any_order standard, classification of each output element, and the
 * report's counts, worst element and first failures.
 *
 * Skeleton per element (docs/algorithms/any-order.md): special terms first (NaN, infinities); then the
 * bound B = c1 * sum|p| + c2 (Theorem 2) rounded up; the compute-format set [RU_F(S - B), RD_F(S + B)],
 * with the overflow analysis of Theorem 5; then the monotone output conversion; finally the correctly
 * rounded exact result is added to the set (a kernel returning it is never wrong). */
#include <math.h>
#include <stdint.h> /* before mpfr.h: enables the intmax_t functions */
#include <stdlib.h>
#include <stdio.h>
#include <mpfr.h>
#include <exactref/mpfr.h>
#include "covers/cset.h"
#include "enclose/anyorder.h"
#include "ops/ref_internal.h"
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

er_class er__classify(const er_cset *c, double y, er_format out, double *dist) {
    *dist = 0;
    if (isnan(y)) return c->nan_req || isnan(c->rounded) ? ER_CLASS_EXACT : c->nan_ok ? ER_CLASS_OVERFLOW : ER_CLASS_NAN_UNEXPECTED;
    if (c->nan_req) return ER_CLASS_NAN_MISSING;
    if (y == c->rounded) return ER_CLASS_EXACT; /* +0 == -0: the sign of a zero is not checked */
    if (isinf(y)) return (y > 0 ? c->pinf_ok : c->ninf_ok) ? ER_CLASS_OVERFLOW : ER_CLASS_INF_UNEXPECTED;
    if (c->lo > c->hi) return ER_CLASS_INF_MISSING;
    if (y >= c->lo && y <= c->hi) return ER_CLASS_COVERED;
    double edge = y > c->hi ? c->hi : c->lo;
    *dist = fabs(y - edge) / er_format_ulp(out, edge);
    return ER_CLASS_OUTSIDE;
}

/* Per-call state: the bound constants and MPFR scratch reused across elements. */
typedef struct er_covers_ctx {
    const er_fmt_info *F, *O;
    er_overflow ov_out;
    er_anyorder_bound bd;
    mpfr_t s, b, x;
} er_covers_ctx;

/* up = 0: RU_F(S_lo - B); up = 1: RD_F(S_hi + B), where S_lo <= S <= S_hi come from the summary. The
 * difference is rounded outward at 128 bits before the rounding to F: by monotonicity the result can only
 * be further out than RU_F(S - B) (resp. RD_F(S + B)), never inside it. */
static double er_edge(er_covers_ctx *cx, const er_sum *sm, double B, int up) {
    if (sm->m == 0) {
        mpfr_set_zero(cx->s, 1);
    } else {
        mpfr_set_uj_2exp(cx->s, sm->m, sm->e, MPFR_RNDN); /* exact: 64 bits into 66 */
        /* |S| is in [m, m+1) 2^e when sticky: move to the far end on the side being bounded. */
        if (sm->sticky && (up != sm->neg)) {
            mpfr_set_ui_2exp(cx->b, 1, sm->e, MPFR_RNDN);
            mpfr_add(cx->s, cx->s, cx->b, MPFR_RNDN); /* exact: m + 1 <= 2^64 */
        }
        if (sm->neg) mpfr_neg(cx->s, cx->s, MPFR_RNDN);
    }
    mpfr_set_d(cx->b, B, MPFR_RNDN); /* exact */
    if (up) mpfr_add(cx->x, cx->s, cx->b, MPFR_RNDU);
    else mpfr_sub(cx->x, cx->s, cx->b, MPFR_RNDD);
    return er__round_mpfr(cx->F, cx->x, up ? ER_ROUND_DOWN : ER_ROUND_UP, ER_OVERFLOW_IEEE);
}

/* Maps one endpoint v of the compute set through the output conversion. Returns 0 when the whole finite part
 * is gone (every value on the far side overflows); sets flags for infinities and NaN the conversion makes. */
static int er_map_endpoint(er_cset *c, const er_covers_ctx *cx, double v, double *endpoint, int is_lo) {
    double r = er__round_double(cx->O, v, ER_ROUND_NEAREST, cx->ov_out);
    if (isfinite(r)) { *endpoint = r; return 1; }
    if (isnan(r)) c->nan_ok = 1; else if (r > 0) c->pinf_ok = 1; else c->ninf_ok = 1;
    *endpoint = v > 0 ? cx->O->max : -cx->O->max;
    return !((is_lo && v > 0) || (!is_lo && v < 0));
}

/* The conversion of a compute-format infinity that some order produces. */
static void er_map_inf(er_cset *c, const er_covers_ctx *cx, double inf) {
    double r = er__round_double(cx->O, inf, ER_ROUND_NEAREST, cx->ov_out);
    if (isnan(r)) { c->nan_ok = 1; return; }
    if (isinf(r)) { if (r > 0) c->pinf_ok = 1; else c->ninf_ok = 1; return; }
    if (c->lo > c->hi) { c->lo = c->hi = r; return; } /* saturated */
    if (r < c->lo) c->lo = r;
    if (r > c->hi) c->hi = r;
}

static void er_cset_build(er_cset *c, er_covers_ctx *cx, const er_sum *sm) {
    const er_fmt_info *D = er__fmt(ER_FP64);
    memset(c, 0, sizeof *c);
    c->lo = INFINITY;
    c->hi = -INFINITY;
    int nan_term = sm->special & ER_SPECIAL_NAN, pinf_term = sm->special & ER_SPECIAL_PINF,
        ninf_term = sm->special & ER_SPECIAL_NINF;
    /* Overflow of the finite terms' partial sums (Theorem 5): possible only beyond the threshold. */
    double P = er__add_up(er__mul_up(cx->bd.g, sm->pos), cx->bd.c2);
    double N = er__add_up(er__mul_up(cx->bd.g, sm->negs), cx->bd.c2);
    int pov = P >= cx->bd.thr, nov = N >= cx->bd.thr;
    if (nan_term || (pinf_term && ninf_term)) {
        c->nan_req = 1;
        c->rounded = c->exact = NAN;
        return;
    }
    if (pinf_term || ninf_term) {
        /* Every order yields that infinity, unless the finite part overflows the other way first (NaN). */
        double inf = pinf_term ? INFINITY : -INFINITY;
        if (pinf_term ? nov : pov) c->nan_ok = 1;
        c->exact = inf;
        c->rounded = er__round_double(cx->O, inf, ER_ROUND_NEAREST, cx->ov_out);
        er_map_inf(c, cx, inf);
        return;
    }
    double B = er__add_up(er__mul_up(cx->bd.c1, er__add_up(sm->pos, sm->negs)), cx->bd.c2);
    double lo_c, hi_c;
    if (isinf(B)) {
        lo_c = -cx->F->max;
        hi_c = cx->F->max;
    } else {
        lo_c = er_edge(cx, sm, B, 0);
        hi_c = er_edge(cx, sm, B, 1);
    }
    int pinf_c = pov, ninf_c = nov, finite = 1;
    if (lo_c == INFINITY) { finite = 0; pinf_c = 1; }   /* every order overflows upward */
    if (hi_c == -INFINITY) { finite = 0; ninf_c = 1; }
    if (finite) {
        finite = er_map_endpoint(c, cx, lo_c, &c->lo, 1);
        finite = er_map_endpoint(c, cx, hi_c, &c->hi, 0) && finite;
        if (!finite) { c->lo = INFINITY; c->hi = -INFINITY; }
    }
    if (pinf_c) er_map_inf(c, cx, INFINITY);
    if (ninf_c) er_map_inf(c, cx, -INFINITY);
    if (pinf_c && ninf_c) c->nan_ok = 1;
    /* The correctly rounded exact result belongs to the set: a kernel returning it is never wrong. */
    c->exact = er__round_core(D, sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    c->rounded = er__round_core(cx->O, sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, cx->ov_out);
    if (isnan(c->rounded)) c->nan_ok = 1;
    else if (isinf(c->rounded)) { if (c->rounded > 0) c->pinf_ok = 1; else c->ninf_ok = 1; }
    else if (c->lo > c->hi) c->lo = c->hi = c->rounded;
    else { if (c->rounded < c->lo) c->lo = c->rounded; if (c->rounded > c->hi) c->hi = c->rounded; }
}

static void er_fill_element(er_element *el, const er_ref *r, int64_t idx, er_class cls, double y, const er_cset *c,
                            double dist) {
    memset(el, 0, sizeof *el);
    el->index = idx;
    int64_t rem = idx;
    for (int i = r->ndim - 1; i >= 0; i--) { el->coord[i] = r->shape[i] ? rem % r->shape[i] : 0; rem = r->shape[i] ? rem / r->shape[i] : 0; }
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
}

static er_status er_check_covers_args(const er_ref *ref, const er_tensor *out, const er_standard *std) {
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(std, "standard");
    ER_RETURN_IF_ERROR(er_standard_validate(std));
    ER_RETURN_IF_ERROR(er__tensor_check(out, "out"));
    int same = out->ndim == ref->ndim;
    for (int i = 0; same && i < ref->ndim; i++) same = out->shape[i] == ref->shape[i];
    if (!same) {
        char a[200], b[200];
        int na = 0, nb = 0;
        for (int i = 0; i < out->ndim; i++) na += snprintf(a + na, sizeof a - (size_t)na, "%s%lld", i ? ", " : "", (long long)out->shape[i]);
        for (int i = 0; i < ref->ndim; i++) nb += snprintf(b + nb, sizeof b - (size_t)nb, "%s%lld", i ? ", " : "", (long long)ref->shape[i]);
        return er__fail(ER_ERR_OUTPUT, "the output has shape [%s] but the matmul produces [%s]", a, b);
    }
    const er_fmt_info *O = er__fmt(out->format);
    if (std->out_overflow == ER_OVERFLOW_IEEE && !O->has_inf)
        return er__fail(ER_ERR_STANDARD, "overflow=ieee does not apply to output format %s, which has no infinity", O->name);
    return ER_OK;
}

er_status er_covers(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_RETURN_IF_ERROR(er_check_covers_args(ref, out, std));
    er_covers_ctx cx;
    cx.F = er__fmt(std->compute);
    cx.O = er__fmt(out->format);
    cx.ov_out = er__overflow_rule(cx.O, std->out_overflow);
    ER_RETURN_IF_ERROR(er__anyorder_bound(&cx.bd, er__fmt(ref->A.format), er__fmt(ref->B.format), cx.F, ref->K));
    er_report r;
    memset(&r, 0, sizeof r);
    r.classes = malloc((size_t)(ref->n ? ref->n : 1));
    if (!r.classes) return er__fail(ER_ERR_NOMEM, "cannot allocate %lld classes", (long long)ref->n);
    snprintf(r.op, sizeof r.op, "matmul");
    er_standard_format(std, r.standard, sizeof r.standard, NULL);
    r.out_format = out->format;
    r.ndim = ref->ndim;
    for (int i = 0; i < ref->ndim; i++) r.shape[i] = ref->shape[i];
    r.n = ref->n;
    mpfr_inits2(66, cx.s, cx.b, (mpfr_ptr)0);
    mpfr_init2(cx.x, 128);
    int64_t coord[ER_MAX_DIMS] = {0};
    double worst_dist = -1;
    for (int64_t idx = 0; idx < ref->n; idx++) {
        int64_t off = 0;
        for (int i = 0; i < out->ndim; i++) off += coord[i] * out->strides[i];
        double y = er__load(out, off);
        er_cset c;
        er_cset_build(&c, &cx, &ref->sums[idx]);
        double dist;
        er_class cls = er__classify(&c, y, out->format, &dist);
        r.classes[idx] = (uint8_t)cls;
        r.counts[cls]++;
        if (!er_class_passes(cls)) {
            r.n_failed++;
            if (r.n_first < ER_REPORT_FIRST) er_fill_element(&r.first[r.n_first++], ref, idx, cls, y, &c, dist);
            int better = !r.has_worst || (cls == ER_CLASS_OUTSIDE && (r.worst.cls != ER_CLASS_OUTSIDE || dist > worst_dist));
            if (better) {
                er_fill_element(&r.worst, ref, idx, cls, y, &c, dist);
                r.has_worst = 1;
                worst_dist = dist;
            }
        }
        for (int i = out->ndim - 1; i >= 0; i--) { if (++coord[i] < out->shape[i]) break; coord[i] = 0; }
    }
    mpfr_clears(cx.s, cx.b, cx.x, (mpfr_ptr)0);
    *rep = r;
    return ER_OK;
}

er_status er_ref_exact(const er_ref *ref, const int64_t *index, er_format f, double *exact, double *rounded) {
    er__ok();
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(index, "index");
    const er_fmt_info *O = er__fmt(f);
    if (!O) return er__fail(ER_ERR_FORMAT, "invalid format value %d", (int)f);
    int64_t idx;
    ER_RETURN_IF_ERROR(er__ref_index(ref, index, &idx));
    const er_sum *sm = &ref->sums[idx];
    double e, rd;
    if ((sm->special & ER_SPECIAL_NAN) || (sm->special & ER_SPECIAL_PINF && sm->special & ER_SPECIAL_NINF)) e = rd = NAN;
    else if (sm->special & (ER_SPECIAL_PINF | ER_SPECIAL_NINF)) {
        e = sm->special & ER_SPECIAL_PINF ? INFINITY : -INFINITY;
        rd = er__round_double(O, e, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
    } else {
        e = er__round_core(er__fmt(ER_FP64), sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        rd = er__round_core(O, sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
    }
    if (exact) *exact = e;
    if (rounded) *rounded = rd;
    return ER_OK;
}

er_status er_ref_exact_mpfr(mpfr_ptr out, const er_ref *ref, const int64_t *index) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(index, "index");
    int64_t idx;
    ER_RETURN_IF_ERROR(er__ref_index(ref, index, &idx));
    return er__matmul_exact_mpfr(ref, idx, out);
}

er_status er_matmul_covers(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *C,
                           const char *standard, const char *options) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(C, "C");
    er_standard std;
    ER_RETURN_IF_ERROR(er_standard_parse(&std, standard ? standard : "any_order", options));
    er_ref *ref;
    ER_RETURN_IF_ERROR(er_matmul(&ref, A, B));
    er_status st = er_covers(rep, ref, C, &std);
    er_ref_free(ref);
    return st;
}
