/* covers.c: covering sets of the any_order standard, classification of each output element, and the
 * report's counts, worst element and first failures.
 *
 * Skeleton per element: the set in the accumulator format (any_order: src/enclose/anyorder.c from the cached
 * exact summary; fixed orders: interval emulation, src/enclose/dotorder.c), then the monotone output
 * conversion; for any_order the correctly rounded exact result joins the set (a kernel returning it is never
 * wrong; a fixed order allows only what its emulation allows). er_emulate writes the one value of a fully
 * fixed standard. */
#include <math.h>
#include <stdint.h> /* before mpfr.h: enables the intmax_t functions */
#include <stdlib.h>
#include <stdio.h>
#include <mpfr.h>
#include <exactref/mpfr.h>
#include "covers/cset.h"
#include "enclose/anyorder.h"
#include "enclose/dotorder.h"
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
    if (isnan(y)) {
        if (!c->nan_req && !c->nan_ok) return ER_CLASS_NAN_UNEXPECTED;
        return c->nan_req || isnan(c->rounded) ? ER_CLASS_EXACT : ER_CLASS_OVERFLOW;
    }
    if (c->nan_req) return ER_CLASS_NAN_MISSING;
    if (isinf(y)) {
        if (!(y > 0 ? c->pinf_ok : c->ninf_ok)) return ER_CLASS_INF_UNEXPECTED;
        return y == c->rounded ? ER_CLASS_EXACT : ER_CLASS_OVERFLOW;
    }
    if (c->lo > c->hi) return ER_CLASS_INF_MISSING;
    if (y >= c->lo && y <= c->hi) return y == c->rounded ? ER_CLASS_EXACT : ER_CLASS_COVERED; /* +0 == -0 */
    double edge = y > c->hi ? c->hi : c->lo;
    *dist = fabs(y - edge) / er_format_ulp(out, edge);
    return ER_CLASS_OUTSIDE;
}

/* Per-call state of er_covers / er_emulate. */
typedef struct er_covers_ctx {
    const er_ref *ref;
    const er_standard *std;
    const er_fmt_info *F, *O;       /* accumulator, output */
    er_overflow ov_out;
    int any;                        /* order any: the exact result joins the set */
    er_anyorder_bound bd;           /* order any */
    er_edge_scratch w;
    er_order_plan plan;             /* fixed orders */
    int have_plan;
    er_acc acc;                     /* order any over converted operands */
    int have_acc;
    /* classification */
    const er_tensor *out;
    er_report *rep;
    double worst_dist;
    /* emulation */
    er_tensor *dst;
} er_covers_ctx;

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

/* The output set from the compute-format set v (values of G), and the exact result from the summary. */
static void er_cset_build(er_cset *c, const er_covers_ctx *cx, const er_cval *v, const er_sum *sm) {
    const er_fmt_info *D = er__fmt(ER_FP64);
    memset(c, 0, sizeof *c);
    c->lo = INFINITY;
    c->hi = -INFINITY;
    c->nan_req = v->nan_req;
    c->nan_ok = v->nan;
    if (v->lo <= v->hi) {
        int finite = er_map_endpoint(c, cx, v->lo, &c->lo, 1);
        finite = er_map_endpoint(c, cx, v->hi, &c->hi, 0) && finite;
        if (!finite) { c->lo = INFINITY; c->hi = -INFINITY; }
    }
    if (v->pinf) er_map_inf(c, cx, INFINITY);
    if (v->ninf) er_map_inf(c, cx, -INFINITY);
    /* The exact result, and its correct rounding to the output format. */
    if ((sm->special & ER_SPECIAL_NAN) || ((sm->special & ER_SPECIAL_PINF) && (sm->special & ER_SPECIAL_NINF))) {
        c->exact = c->rounded = NAN;
    } else if (sm->special & (ER_SPECIAL_PINF | ER_SPECIAL_NINF)) {
        c->exact = sm->special & ER_SPECIAL_PINF ? INFINITY : -INFINITY;
        c->rounded = er__round_double(cx->O, c->exact, ER_ROUND_NEAREST, cx->ov_out);
    } else {
        c->exact = er__round_core(D, sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        c->rounded = er__round_core(cx->O, sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, cx->ov_out);
    }
    if (!cx->any || c->nan_req) return;
    /* any_order: the correctly rounded exact result belongs to the set (a kernel returning it is never wrong) */
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

static er_status er_ctx_init(er_covers_ctx *cx, const er_ref *ref, const er_tensor *out, const er_standard *std) {
    memset(cx, 0, sizeof *cx);
    cx->ref = ref;
    cx->std = std;
    cx->out = out;
    cx->any = std->order == ER_ORDER_ANY;
    cx->F = er__fmt(std->compute == ER_TF32 ? ER_FP32 : std->compute);
    cx->O = er__fmt(out->format);
    cx->ov_out = er__overflow_rule(cx->O, std->out_overflow);
    cx->worst_dist = -1;
    int conv = std->compute == ER_TF32 ? (int)std->tf32 : -1;
    er__edge_scratch_init(&cx->w);
    if (cx->any) {
        er_status st = er__anyorder_bound(&cx->bd, er__fmt(er__operand_format(ref->A.format, conv)),
                                          er__fmt(er__operand_format(ref->B.format, conv)), cx->F, ref->K,
                                          std->rounding == ER_RND_FAITHFUL);
        if (st != ER_OK) { er__edge_scratch_clear(&cx->w); return st; }
    } else {
        er__order_plan_init(&cx->plan, std, ref->A.format, ref->B.format);
        cx->have_plan = 1;
    }
    return ER_OK;
}

static void er_ctx_clear(er_covers_ctx *cx) {
    er__edge_scratch_clear(&cx->w);
    if (cx->have_plan) er__order_plan_clear(&cx->plan);
    if (cx->have_acc) er__acc_free(&cx->acc);
}

/* The element offset of the row-major position idx in a strided view. */
static int64_t er_offset(const er_tensor *t, int64_t idx) {
    int64_t off = 0;
    for (int i = t->ndim - 1; i >= 0; i--) {
        off += (idx % t->shape[i]) * t->strides[i];
        idx /= t->shape[i];
    }
    return off;
}

/* Classifies element idx against its set and records it in the report. */
static void er_record(er_covers_ctx *cx, int64_t idx, const er_cset *c) {
    const er_tensor *out = cx->out;
    double y = er__load(out, er_offset(out, idx)), dist;
    er_class cls = er__classify(c, y, out->format, &dist);
    er_report *r = cx->rep;
    r->classes[idx] = (uint8_t)cls;
    r->counts[cls]++;
    if (er_class_passes(cls)) return;
    r->n_failed++;
    if (r->n_first < ER_REPORT_FIRST) er_fill_element(&r->first[r->n_first++], cx->ref, idx, cls, y, c, dist);
    int better = !r->has_worst || (cls == ER_CLASS_OUTSIDE && (r->worst.cls != ER_CLASS_OUTSIDE || dist > cx->worst_dist));
    if (better) {
        er_fill_element(&r->worst, cx->ref, idx, cls, y, c, dist);
        r->has_worst = 1;
        cx->worst_dist = dist;
    }
}

/* The output set of one element from its operand vectors (fixed orders, or any order over converted
 * operands). */
static er_status er_element_set(er_covers_ctx *cx, const er_dot_env *env, const double *a, const double *b,
                                int64_t K, int special, er_cset *c) {
    if (!cx->have_acc) {
        ER_RETURN_IF_ERROR(er__acc_init(&cx->acc, env->base, env->top));
        cx->have_acc = 1;
    }
    er_sum sm;
    er__dot_summary(&sm, &cx->acc, a, b, K, env->wide, special);
    er_cval v;
    if (cx->any) {
        er__anyorder_cval(&v, &cx->bd, cx->F, &sm, &cx->w);
    } else {
        const er_fmt_info *G;
        ER_RETURN_IF_ERROR(er__dot_order(&cx->plan, env, a, b, K, special, &v, &G));
    }
    er_cset_build(c, cx, &v, &sm);
    return ER_OK;
}

static er_status er_covers_cb(void *vcx, const er_dot_env *env, int64_t idx, const double *a, const double *b,
                              int64_t K, int special) {
    er_covers_ctx *cx = vcx;
    er_cset c;
    ER_RETURN_IF_ERROR(er_element_set(cx, env, a, b, K, special, &c));
    er_record(cx, idx, &c);
    return ER_OK;
}

er_status er_covers(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_RETURN_IF_ERROR(er_check_covers_args(ref, out, std));
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
    er_covers_ctx cx;
    er_status st = er_ctx_init(&cx, ref, out, std);
    if (st != ER_OK) { free(r.classes); return st; }
    cx.rep = &r;
    if (cx.any && std->compute != ER_TF32) {
        /* the reference's cached exact summaries are those of this standard */
        for (int64_t idx = 0; idx < ref->n; idx++) {
            er_cval v;
            er_cset c;
            er__anyorder_cval(&v, &cx.bd, cx.F, &ref->sums[idx], &cx.w);
            er_cset_build(&c, &cx, &v, &ref->sums[idx]);
            er_record(&cx, idx, &c);
        }
    } else {
        st = er__matmul_foreach(ref, std->compute == ER_TF32 ? (int)std->tf32 : -1, er_covers_cb, &cx);
    }
    er_ctx_clear(&cx);
    if (st != ER_OK) { free(r.classes); return st; }
    *rep = r;
    return ER_OK;
}

/* er_emulate: the one value of each element's set, written into the destination. */
static er_status er_emulate_cb(void *vcx, const er_dot_env *env, int64_t idx, const double *a, const double *b,
                               int64_t K, int special) {
    er_covers_ctx *cx = vcx;
    er_cset c;
    ER_RETURN_IF_ERROR(er_element_set(cx, env, a, b, K, special, &c));
    double v;
    int finite = c.lo <= c.hi;
    if (c.nan_req) v = NAN;
    else if (finite && c.lo == c.hi && !c.pinf_ok && !c.ninf_ok && !c.nan_ok) v = c.lo;
    else if (!finite && c.pinf_ok + c.ninf_ok + c.nan_ok == 1) v = c.pinf_ok ? INFINITY : c.ninf_ok ? -INFINITY : NAN;
    else return er__fail(ER_ERR_INTERNAL, "the emulated set of element %lld is not a single value", (long long)idx);
    const er_tensor *t = cx->dst;
    int64_t off = er_offset(t, idx);
    uint64_t bits;
    er_encode(&bits, t->format, v, ER_ROUND_NEAREST, cx->ov_out == ER_OVERFLOW_IEEE && !cx->O->has_inf ? ER_OVERFLOW_SATURATE : cx->ov_out);
    void *p = (char *)(uintptr_t)t->data + off * (er__fmt(t->format)->bits / 8);
    switch (er__fmt(t->format)->bits) {
    case 8: *(uint8_t *)p = (uint8_t)bits; break;
    case 16: { uint16_t x = (uint16_t)bits; memcpy(p, &x, 2); break; }
    case 32: { uint32_t x = (uint32_t)bits; memcpy(p, &x, 4); break; }
    default: memcpy(p, &bits, 8); break;
    }
    return ER_OK;
}

er_status er_emulate(const er_ref *ref, er_tensor *out, const er_standard *std) {
    er__ok();
    ER_RETURN_IF_ERROR(er_check_covers_args(ref, out, std));
    if (!er_standard_is_fixed(std, ref->A.format, ref->B.format)) {
        char name[160];
        er_standard_format(std, name, sizeof name, NULL);
        const char *why = std->order == ER_ORDER_ANY ? "any_order leaves the order free"
                        : std->rounding != ER_RND_NEAREST ? "faithful rounding leaves each rounding free"
                        : (std->inner == ER_SUB_ANY || std->outer == ER_SUB_ANY) ? "inner=any or outer=any leaves an order free"
                        : "fma=either leaves the fusing of each product free (state fma=never or fma=always)";
        return er__fail(ER_ERR_STANDARD, "emulate needs a fully fixed standard; '%s' is not: %s", name, why);
    }
    /* Emulation writes every element: refuse overlapping writes (a zero stride over a dimension of size > 1). */
    for (int i = 0; i < out->ndim; i++)
        if (out->strides[i] == 0 && out->shape[i] > 1)
            return er__fail(ER_ERR_OUTPUT, "the output view repeats elements (stride 0 in dimension %d)", i);
    er_covers_ctx cx;
    ER_RETURN_IF_ERROR(er_ctx_init(&cx, ref, out, std));
    cx.dst = out;
    er_status st = er__matmul_foreach(ref, std->compute == ER_TF32 ? (int)std->tf32 : -1, er_emulate_cb, &cx);
    er_ctx_clear(&cx);
    return st;
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
