/* covers.c: covering sets of the any_order standard, classification of each output element, and the
 * report's counts, worst element and first failures.
 *
 * Skeleton per element: the set in the accumulator format (any_order: src/enclose/anyorder.c from the cached
 * exact summary; fixed orders: interval emulation, src/enclose/dotorder.c), then the monotone output
 * conversion; for any_order the correctly rounded exact result joins the set (a kernel returning it is never
 * wrong; a fixed order allows only what its emulation allows). er_emulate writes the one value of a fully
 * fixed standard. */
#include <limits.h>
#include <math.h>
#include <stdint.h> /* before mpfr.h: enables the intmax_t functions */
#include <stdlib.h>
#include <stdio.h>
#include <mpfr.h>
#include <exactref/mpfr.h>
#include "ops/module.h"
#include "covers/fastdecide.h"
#include "enclose/anyorder.h"
#include "enclose/dotorder.h"
#include "enclose/ival.h"
#include "enclose/mma.h"
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

/* The class of the output value y against the set; *dist gets the distance in output ulps for OUTSIDE. Inline in
 * the recording of every element: the common case (finite, inside the set) first. */
static inline er_class er_classify(const er_cset *c, double y, er_format out, double *dist) {
    *dist = 0;
    if (y >= c->lo && y <= c->hi && !c->nan_req) return y == c->rounded ? ER_CLASS_EXACT : ER_CLASS_COVERED; /* +0 == -0 */
    if (isnan(y)) {
        if (!c->nan_req && !c->nan_ok) return ER_CLASS_NAN_UNEXPECTED;
        return c->nan_req || isnan(c->rounded) ? ER_CLASS_EXACT : ER_CLASS_OVERFLOW;
    }
    if (c->nan_req) return ER_CLASS_NAN_MISSING;
    if (isinf(y)) {
        if (!(y > 0 ? c->pinf_ok : c->ninf_ok)) return ER_CLASS_INF_UNEXPECTED;
        return y == c->rounded ? ER_CLASS_EXACT : ER_CLASS_OVERFLOW;
    }
    if (c->lo > c->hi) return c->pinf_ok || c->ninf_ok ? ER_CLASS_INF_MISSING : ER_CLASS_NAN_MISSING; /* no finite value */
    double edge = y > c->hi ? c->hi : c->lo;
    *dist = fabs(y - edge) / er_format_ulp(out, edge);
    return ER_CLASS_OUTSIDE;
}

/* Ops whose outputs depend on a whole row (softmax, log_softmax, rmsnorm, layernorm). */
static int er_row_op(const er_ref *ref) {
    return ref->op == ER_OP_SOFTMAX || ref->op == ER_OP_LOG_SOFTMAX || ref->op == ER_OP_RMSNORM || ref->op == ER_OP_LAYERNORM;
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
    er_mma_params mma;              /* mma:<arch> */
    int mma_chain;                  /* mma with outer=sequential: the one chain, emulated */
    /* classification: the engine's sink (its report and, for er_covers_sets, each element's finite set ends
     * written at its row-major index; NULL: not wanted) */
    const er_tensor *out;
    int out_contig;                 /* out is row-major contiguous */
    er_sink sk;
    /* emulation */
    er_tensor *dst;
    /* tf32=nearest: the sets of the first conversion (ties to even), joined with the second's (ties away) */
    er_cset *keep;
    int keep_pass;                  /* 1: store the set; 2: join and classify */
} er_covers_ctx;

/* The exact result of a summarised reduction, rounded to double and correctly rounded to the output format. */
static void er_exact_of_sum(const er_covers_ctx *cx, const er_dotsum *sm, double *exact, double *rounded) {
    if ((sm->special & ER_SPECIAL_NAN) || ((sm->special & ER_SPECIAL_PINF) && (sm->special & ER_SPECIAL_NINF))) {
        *exact = *rounded = NAN;
    } else if (sm->special & (ER_SPECIAL_PINF | ER_SPECIAL_NINF)) {
        *exact = sm->special & ER_SPECIAL_PINF ? INFINITY : -INFINITY;
        *rounded = er__round_double(cx->O, *exact, ER_ROUND_NEAREST, cx->ov_out);
    } else {
        *exact = er__round_core(er__fmt(ER_FP64), sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        *rounded = er__round_core(cx->O, sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, cx->ov_out);
    }
}

/* The output set from the compute-format set v, with the exact result (for any_order it joins the set). */
static void er_cset_build(er_cset *c, const er_covers_ctx *cx, const er_cval *v, double exact, double rounded) {
    er__cset_build(c, cx->O, cx->ov_out, cx->any, v, exact, rounded);
}

/* mean: the sum's set v (values of F) divided by n, by fl(s / n), fl(s * fl(1/n)) or either, each monotone in
 * s (docs/algorithms/reductions.md). */
static void er_mean_cval(const er_covers_ctx *cx, er_cval *v, int64_t n) {
    const er_fmt_info *F = cx->F;
    int faithful = cx->std->rounding == ER_RND_FAITHFUL;
    er_round lo_m = faithful ? ER_ROUND_DOWN : ER_ROUND_NEAREST, hi_m = faithful ? ER_ROUND_UP : ER_ROUND_NEAREST;
    if (n == 0) { memset(v, 0, sizeof *v); v->lo = INFINITY; v->hi = -INFINITY; v->nan = v->nan_req = 1; return; }
    if (v->lo > v->hi) return; /* only infinities or NaN: unchanged by a positive divisor */
    double lo = INFINITY, hi = -INFINITY;
    if (cx->std->mean != 2) {
        lo = er__round_quotient(F, v->lo, n, lo_m);
        hi = er__round_quotient(F, v->hi, n, hi_m);
    }
    if (cx->std->mean != 1) {
        double rl = er__round_quotient(F, 1.0, n, lo_m), rh = er__round_quotient(F, 1.0, n, hi_m);
        double l = er__round_prod(F, v->lo, v->lo < 0 ? rh : rl, 1, lo_m), h = er__round_prod(F, v->hi, v->hi < 0 ? rl : rh, 1, hi_m);
        if (l < lo) lo = l;
        if (h > hi) hi = h;
    }
    v->lo = lo;
    v->hi = hi;
}

/* The exact mean S/n correctly rounded; S comes from the summary, recomputed exactly where its 64 bits do not
 * decide the rounding. */
static void er_exact_of_mean(const er_covers_ctx *cx, const er_dotsum *sm, int64_t idx, double *exact, double *rounded) {
    int64_t n = cx->ref->K;
    if (n == 0) { *exact = *rounded = NAN; return; }
    er_exact_of_sum(cx, sm, exact, rounded);
    if (isnan(*exact) || isinf(*exact) || sm->special) {
        *exact = *exact / (double)n;
        *rounded = er__round_double(cx->O, *exact, ER_ROUND_NEAREST, cx->ov_out);
        return;
    }
    mpfr_t s, t;
    mpfr_init2(s, 66);
    mpfr_init2(t, 256);
    double r[2], e = 0;
    for (int up = 0; up < 2; up++) { /* S lies in [m, m + sticky) 2^e in magnitude */
        mpfr_set_uj_2exp(s, sm->m, sm->e, MPFR_RNDN);
        if (up && sm->sticky) { mpfr_set_ui_2exp(t, 1, sm->e, MPFR_RNDN); mpfr_add(s, s, t, MPFR_RNDN); }
        if (sm->neg) mpfr_neg(s, s, MPFR_RNDN);
        int inex = mpfr_div_ui(t, s, (unsigned long)n, MPFR_RNDZ);
        r[up] = er__round_mpfr_sticky(cx->O, t, inex != 0 || (up == 0 && sm->sticky), ER_ROUND_NEAREST, cx->ov_out);
        if (!up) e = mpfr_get_d(t, MPFR_RNDN);
    }
    if (!(r[0] == r[1] || (isnan(r[0]) && isnan(r[1])))) {
        /* the rounding is not decided by the summary: the exact sum, from the operands */
        mpfr_t x;
        mpfr_init2(x, 2);
        er__matmul_exact_mpfr(cx->ref, idx, x);
        mpfr_set_prec(t, mpfr_get_prec(x) + 64);
        int inex = mpfr_div_ui(t, x, (unsigned long)n, MPFR_RNDZ);
        r[0] = er__round_mpfr_sticky(cx->O, t, inex != 0, ER_ROUND_NEAREST, cx->ov_out);
        mpfr_clear(x);
    }
    *exact = e;
    *rounded = r[0];
    mpfr_clear(s);
    mpfr_clear(t);
}

/* Scaled matmul: the accumulator's set v (values of F) through y = fl(fl(acc sa) sb) or fl(acc fl(sa sb)), both
 * monotone in acc (scaled-matmul section of docs/hardware/mma.md). */
static void er_scale_one(const er_covers_ctx *cx, double acc, double out[2]) {
    const er_fmt_info *F = cx->F;
    double sa = cx->ref->sa, sb = cx->ref->sb;
    out[0] = er__round_prod(F, er__round_prod(F, acc, sa, 1, ER_ROUND_NEAREST), sb, 1, ER_ROUND_NEAREST);
    out[1] = er__round_prod(F, acc, er__round_prod(F, sa, sb, 1, ER_ROUND_NEAREST), 1, ER_ROUND_NEAREST);
}

static void er_scale_cval(const er_covers_ctx *cx, er_cval *v) {
    if (v->nan_req) return; /* NaN times a scale is NaN */
    double lo = INFINITY, hi = -INFINITY, r[2], ends[4];
    int nan = v->nan, ne = 0, any = 0;
    if (v->lo <= v->hi) { ends[ne++] = v->lo; ends[ne++] = v->hi; }
    if (v->pinf) ends[ne++] = INFINITY;
    if (v->ninf) ends[ne++] = -INFINITY;
    for (int i = 0; i < ne; i++) {
        er_scale_one(cx, ends[i], r);
        for (int j = 0; j < 2; j++) {
            if (isnan(r[j])) { nan = 1; continue; } /* inf times a zero scale */
            if (r[j] < lo) lo = r[j];
            if (r[j] > hi) hi = r[j];
            any = 1;
        }
    }
    /* the hull of the images: monotone maps send [lo, hi] between the images of its ends */
    if (any) er__cval_from_interval(v, lo, hi, nan, cx->F);
    else if (nan) er__cval_from_interval(v, NAN, NAN, 1, cx->F);
}

/* The exact scaled result S sa sb, from the summary's bracket of S (128 bits) or, when that does not decide the
 * rounding, from the exact sum. */
static void er_exact_of_scaled(const er_covers_ctx *cx, const er_dotsum *sm, int64_t idx, double *exact, double *rounded) {
    double e0, r0;
    er_exact_of_sum(cx, sm, &e0, &r0);
    if (!isfinite(e0)) { *exact = e0 * cx->ref->sa * cx->ref->sb; *rounded = er__round_double(cx->O, *exact, ER_ROUND_NEAREST, cx->ov_out); return; }
    mpfr_t s, b;
    mpfr_inits2(200, s, b, (mpfr_ptr)0);
    double rr[2];
    for (int up = 0; up < 2; up++) {
        mpfr_set_uj_2exp(s, sm->m, sm->e, MPFR_RNDN);
        if (up && sm->sticky) { mpfr_set_ui_2exp(b, 1, sm->e, MPFR_RNDN); mpfr_add(s, s, b, MPFR_RNDN); }
        if (sm->neg) mpfr_neg(s, s, MPFR_RNDN);
        mpfr_mul_d(s, s, cx->ref->sa, MPFR_RNDN); /* exact: 65 + 24 bits */
        mpfr_mul_d(s, s, cx->ref->sb, MPFR_RNDN);
        rr[up] = er__round_mpfr(cx->O, s, ER_ROUND_NEAREST, cx->ov_out);
        if (!up) *exact = mpfr_get_d(s, MPFR_RNDN);
    }
    if (rr[0] != rr[1]) {
        mpfr_t x;
        mpfr_init2(x, 2);
        if (er__matmul_exact_mpfr(cx->ref, idx, x) == ER_OK) {
            mpfr_set_prec(s, mpfr_get_prec(x) + 64);
            mpfr_mul_d(s, x, cx->ref->sa, MPFR_RNDN);
            mpfr_mul_d(s, s, cx->ref->sb, MPFR_RNDN);
            rr[0] = er__round_mpfr(cx->O, s, ER_ROUND_NEAREST, cx->ov_out);
        }
        mpfr_clear(x);
    }
    *rounded = rr[0];
    mpfr_clears(s, b, (mpfr_ptr)0);
}

/* The set and exact result of one element from its summary and, for fixed orders, its accumulator set v. */
static void er_finish(er_covers_ctx *cx, er_cset *c, er_cval *v, const er_dotsum *sm, int64_t idx) {
    double exact, rounded;
    if (cx->ref->op == ER_OP_MEAN) {
        er_mean_cval(cx, v, cx->ref->K);
        er_exact_of_mean(cx, sm, idx, &exact, &rounded);
    } else if (cx->ref->scaled) {
        er_scale_cval(cx, v);
        er_exact_of_scaled(cx, sm, idx, &exact, &rounded);
    } else {
        er_exact_of_sum(cx, sm, &exact, &rounded);
    }
    er_cset_build(c, cx, v, exact, rounded);
}

/* max: exact, so its set is the one value (NaN when an element is NaN), converted to the output format. */
static void er_max_set(er_covers_ctx *cx, er_cset *c, const double *a, int64_t K) {
    double m = a[0];
    int nan = 0;
    for (int64_t k = 0; k < K; k++) {
        if (isnan(a[k])) nan = 1;
        else if (isnan(m) || a[k] > m) m = a[k];
    }
    er_cval v;
    if (nan) er__cval_from_interval(&v, NAN, NAN, 1, er__fmt(ER_FP64));
    else er__cval_from_interval(&v, m, m, 0, er__fmt(ER_FP64));
    double rounded = nan ? NAN : er__round_double(cx->O, m, ER_ROUND_NEAREST, cx->ov_out);
    er_cset_build(c, cx, &v, nan ? NAN : m, rounded);
}

static void er_fill_element(er_element *el, const er_report *r, int64_t idx, er_class cls, double y, const er_cset *c,
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

/* The element offset of the row-major position idx in a strided view. */
/* Whether t is row-major contiguous: the element offset is the row-major index. */
static int er_row_major(const er_tensor *t) {
    int64_t st = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != st) return 0;
        st *= t->shape[i];
    }
    return 1;
}

static int64_t er_offset(const er_tensor *t, int64_t idx) {
    int64_t off = 0;
    for (int i = t->ndim - 1; i >= 0; i--) {
        off += (idx % t->shape[i]) * t->strides[i];
        idx /= t->shape[i];
    }
    return off;
}

/* The output view must have the op's shape. */
static er_status er_check_out_shape(const er_ref *ref, const er_tensor *out) {
    int nd;
    int64_t sh[ER_MAX_DIMS];
    return er__out_shape_same(ref, 0, out, &nd, sh);
}

/* A view that is written must not repeat elements (a zero stride over a dimension longer than 1). */
static er_status er_check_distinct(const er_tensor *out) {
    for (int i = 0; i < out->ndim; i++)
        if (out->strides[i] == 0 && out->shape[i] > 1)
            return er__fail(ER_ERR_OUTPUT, "the output view repeats elements (stride 0 in dimension %d)", i);
    return ER_OK;
}

/* Encodes v (rounded to nearest under the overflow rule ov) into element idx of a writable view. */
static void er_store_value(const er_tensor *t, int64_t idx, double v, er_overflow ov) {
    const er_fmt_info *fi = er__fmt(t->format);
    if (ov == ER_OVERFLOW_IEEE && !fi->has_inf) ov = ER_OVERFLOW_SATURATE;
    uint64_t bits;
    er_encode(&bits, t->format, v, ER_ROUND_NEAREST, ov);
    char *p = (char *)(uintptr_t)t->data + er_offset(t, idx) * (fi->bits / 8);
    switch (fi->bits) {
    case 8: *(uint8_t *)p = (uint8_t)bits; break;
    case 16: { uint16_t x = (uint16_t)bits; memcpy(p, &x, 2); break; }
    case 32: { uint32_t x = (uint32_t)bits; memcpy(p, &x, 4); break; }
    default: memcpy(p, &bits, 8); break;
    }
}

static er_status er_check_covers_args(const er_ref *ref, const er_tensor *out, const er_standard *std) {
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(std, "standard");
    ER_RETURN_IF_ERROR(er_standard_validate(std));
    ER_RETURN_IF_ERROR(er__tensor_check(out, "out"));
    if (ref->op != ER_OP_LAYERNORM) ER_RETURN_IF_ERROR(er_check_out_shape(ref, out)); /* layernorm: per output */
    ER_RETURN_IF_ERROR(er__standard_applies(ref, std));
    const er_fmt_info *O = er__fmt(out->format);
    if (std->out_overflow == ER_OVERFLOW_IEEE && !O->has_inf)
        return er__fail(ER_ERR_STANDARD, "overflow=ieee does not apply to output format %s, which has no infinity", O->name);
    return ER_OK;
}

/* The conversion the operands go through before the products (-1: none; compute=tf32x3 keeps them whole and
 * widens the bound instead). */
static int er_operand_conv(const er_standard *std) {
    return std->compute == ER_TF32 && std->tf32 != ER_TF32_X3 ? (int)std->tf32 : -1;
}

/* compute=tf32x3 (docs/algorithms/orders.md, Theorem X1): the bound of the 3K products a_big b_big, a_big b_small,
 * a_small b_big, whose magnitudes add up to at most lambda P, plus what the split drops, at most c_split P:
 * lambda = (1 + u)^2 (1 + 2u) <= 1 + 2^-9 + 2^-19, c_split = u^2 (3 + 2u + 2u^2) <= 3 2^-22 + 2^-31 (u = 2^-11). */
static void er_x3_widen(er_anyorder_bound *bd) {
    const double lambda = 1.0 + 0x1p-9 + 0x1p-19, c_split = 0x1.8p-21 + 0x1p-31;
    bd->c1 = er__add_up(er__mul_up(bd->c1, lambda), c_split);
    bd->g = er__mul_up(bd->g, lambda);
}

/* compute=tf32x3 where an operand is below 2^-102 (Theorem X1, the absolute term): its split parts may be subnormal,
 * rounded on tf32's subnormal grid or flushed, each such part off by at most 2^-126 more; the set widens by
 * 2^-124 (|a_k| + |b_k|) + 2^-240 for each such k. A special operand allows NaN (the split makes inf - inf). */
static void er_x3_tiny(er_cval *v, const er_fmt_info *F, const double *a, const double *b, int64_t K, int special) {
    if (special) { v->nan = 1; return; }
    double w = 0;
    for (int64_t k = 0; k < K; k++)
        if ((fabs(a[k]) < 0x1p-102 || fabs(b[k]) < 0x1p-102) && a[k] != 0 && b[k] != 0)
            w = er__add_up(w, er__add_up(er__mul_up(0x1p-124, er__add_up(fabs(a[k]), fabs(b[k]))), 0x1p-240));
    if (w == 0 || !(v->lo <= v->hi)) return;
    v->lo = er__round_double(F, er__dn(v->lo - w), ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
    v->hi = er__round_double(F, er__up(v->hi + w), ER_ROUND_UP, ER_OVERFLOW_IEEE);
    if (v->lo == -INFINITY) { v->lo = -F->max; v->ninf = 1; }
    if (v->hi == INFINITY) { v->hi = F->max; v->pinf = 1; }
}

static er_status er_ctx_init(er_covers_ctx *cx, const er_ref *ref, const er_tensor *out, const er_standard *std) {
    memset(cx, 0, sizeof *cx);
    cx->ref = ref;
    cx->std = std;
    cx->out = out;
    cx->out_contig = er_row_major(out);
    cx->sk.out = out;
    cx->sk.out_contig = cx->out_contig;
    cx->any = std->order == ER_ORDER_ANY || (std->order == ER_ORDER_MMA && std->outer == ER_SUB_ANY);
    cx->F = er__fmt(std->compute == ER_TF32 ? ER_FP32 : std->compute);
    cx->O = er__fmt(out->format);
    cx->ov_out = er__overflow_rule(cx->O, std->out_overflow);
    cx->sk.O = cx->O;
    cx->sk.ov = cx->ov_out;
    cx->sk.worst_dist = -1;
    int conv = std->compute == ER_TF32 ? (int)std->tf32 : -1;
    er__edge_scratch_init(&cx->w);
    if (ref->op == ER_OP_SOFTMAX || ref->op == ER_OP_LOG_SOFTMAX || ref->op == ER_OP_RMSNORM || ref->op == ER_OP_LAYERNORM)
        return ER_OK;
    const er_fmt_info *fa = er__fmt(er__operand_format(ref->A.format, conv));
    const er_fmt_info *fb = ref->b_is_one ? er__fmt_one() : er__fmt(er__operand_format(ref->B.format, conv));
    if (std->order == ER_ORDER_MMA) {
        er_status st = er__mma_params(std->mma_arch, fa, fb, std->compute == ER_FP16, &cx->mma);
        if (st != ER_OK) { er__edge_scratch_clear(&cx->w); return st; }
        int x3 = std->compute == ER_TF32 && std->tf32 == ER_TF32_X3;
        /* tf32x3: three chains of blocks, each dot's K padded to whole blocks */
        int64_t Kb = x3 ? 3 * cx->mma.k * ((ref->K + cx->mma.k - 1) / cx->mma.k) : ref->K;
        if (cx->any) {
            er__mma_bound(&cx->bd, &cx->mma, Kb, std->promote);
            if (x3) er_x3_widen(&cx->bd);
        } else if (cx->mma.fp8) {
            /* Triton's fp8 tl.dot on the H200 is not this chain (docs/hardware/mma.md): no fixed fp8 chain is claimed */
            er__edge_scratch_clear(&cx->w);
            return er__fail(ER_ERR_UNSUPPORTED, "mma:sm%d has no established fixed chain for fp8 operands; use outer=any "
                            "(with promote=N where the kernel adds into fp32 every N blocks)", std->mma_arch);
        } else cx->mma_chain = 1;
    } else if (cx->any) {
        int x3 = std->compute == ER_TF32 && std->tf32 == ER_TF32_X3;
        er_status st = er__anyorder_bound_depth(&cx->bd, fa, fb, cx->F, x3 ? 3 * ref->K : ref->K, std->depth,
                                                std->rounding == ER_RND_FAITHFUL);
        if (st != ER_OK) { er__edge_scratch_clear(&cx->w); return st; }
        if (x3) er_x3_widen(&cx->bd);
    } else {
        er__order_plan_init(&cx->plan, std, fa, fb);
        cx->have_plan = 1;
    }
    return ER_OK;
}

static void er_ctx_clear(er_covers_ctx *cx) {
    er__edge_scratch_clear(&cx->w);
    if (cx->have_plan) er__order_plan_clear(&cx->plan);
    if (cx->have_acc) er__acc_free(&cx->acc);
}

/* er_format_ulp(O, y) for a finite y, from y's exponent field */
static inline double er_out_ulp(const er_fmt_info *O, double y) {
    double a = fabs(y);
    if (!(a >= O->min_normal)) return O->min_sub;
    uint64_t u;
    memcpy(&u, &a, 8);
    int64_t e = (int64_t)(u >> 52) - O->p + 1; /* 2^(e - p + 1): the biased exponent less p - 1 */
    if (e <= 0) return er_format_ulp(O->id, y);  /* a subnormal double (fp64 output) */
    u = (uint64_t)e << 52;
    memcpy(&a, &u, 8);
    return a;
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
        s = d / er_out_ulp(sk->O, y);
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
    if (!c->nan_req) {
        /* the set's width relative to its size: how much a passing output could have been off */
        double rel = er_set_rel(c->lo, c->hi);
        if (rel >= 0 && (!r->has_widest || rel > r->widest_rel)) {
            er_fill_element(&r->widest, r, idx, cls, y, c, dist);
            r->widest_rel = rel;
            r->has_widest = 1;
        }
    }
    if (sk->set_lo) er_store_set(sk, idx, c->lo <= c->hi && !c->nan_req, c->lo, c->hi, y);
    r->counts[cls]++;
    if (er_class_passes(cls)) return;
    r->n_failed++;
    if (r->n_first < ER_REPORT_FIRST) er_fill_element(&r->first[r->n_first++], r, idx, cls, y, c, dist);
    int better = !r->has_worst || (cls == ER_CLASS_OUTSIDE && (r->worst.cls != ER_CLASS_OUTSIDE || dist > sk->worst_dist));
    if (better) {
        er_fill_element(&r->worst, r, idx, cls, y, c, dist);
        r->has_worst = 1;
        sk->worst_dist = dist;
    }
}

void er__sink_put(er_sink *sk, int64_t idx, const er_cset *c) {
    const er_tensor *out = sk->out;
    er_sink_record(sk, idx, c, er__load(out, sk->out_contig ? idx : er_offset(out, idx)));
}

static void er_record(er_covers_ctx *cx, int64_t idx, const er_cset *c) { er__sink_put(&cx->sk, idx, c); }

/* The output set of one element from its operand vectors (fixed orders, or any order over converted
 * operands). */
static er_status er_element_set(er_covers_ctx *cx, const er_dot_env *env, int64_t idx, const double *a,
                                const double *b, int64_t K, int special, er_cset *c) {
    if (cx->ref->op == ER_OP_MAX) { er_max_set(cx, c, a, K); return ER_OK; }
    if (!cx->have_acc) {
        ER_RETURN_IF_ERROR(er__acc_init(&cx->acc, env->base, env->top));
        cx->have_acc = 1;
    }
    er_dotsum sm;
    er__dot_summary(&sm, &cx->acc, a, b, K, env, special);
    er_cval v;
    if (cx->mma_chain) {
        double d = er__mma_chain(&cx->mma, a, b, K);
        er__cval_from_interval(&v, d, d, isnan(d), cx->F);
    } else if (cx->any) {
        if (cx->std->compute == ER_TF32 && cx->std->tf32 == ER_TF32_X3) {
            /* the split products big x small may have either sign: each side's sum gains up to delta of the other
             * (|big_a small_b| + |small_a big_b| <= delta |a b|, delta = 2u (1 + u)^2 <= 2^-10 + 2^-20), which the
             * overflow rule (Theorem 5) must see */
            er_dotsum sx = sm;
            const double delta = 0x1p-10 + 0x1p-20;
            sx.pos = er__add_up(sm.pos, er__mul_up(delta, sm.negs));
            sx.negs = er__add_up(sm.negs, er__mul_up(delta, sm.pos));
            er__anyorder_cval(&v, &cx->bd, cx->F, &sx, &cx->w);
            er_x3_tiny(&v, cx->F, a, b, K, special);
        } else {
            er__anyorder_cval(&v, &cx->bd, cx->F, &sm, &cx->w);
        }
    } else {
        const er_fmt_info *G;
        ER_RETURN_IF_ERROR(er__dot_order(&cx->plan, env, a, b, K, special, &v, &G));
    }
    er_finish(cx, c, &v, &sm, idx);
    return ER_OK;
}

/* c joined with k: every value either allows (the exact values stay c's). */
static void er_cset_join(er_cset *c, const er_cset *k) {
    if (k->lo <= k->hi) {
        if (c->lo > c->hi) { c->lo = k->lo; c->hi = k->hi; }
        else { if (k->lo < c->lo) c->lo = k->lo; if (k->hi > c->hi) c->hi = k->hi; }
    }
    c->nan_ok |= k->nan_ok | k->nan_req;
    c->nan_ok |= c->nan_req;
    c->nan_req &= k->nan_req;
    c->pinf_ok |= k->pinf_ok;
    c->ninf_ok |= k->ninf_ok;
}

static er_status er_covers_cb(void *vcx, const er_dot_env *env, int64_t idx, const double *a, const double *b,
                              int64_t K, int special) {
    er_covers_ctx *cx = vcx;
    er_cset c;
    ER_RETURN_IF_ERROR(er_element_set(cx, env, idx, a, b, K, special, &c));
    if (cx->keep_pass == 1) { cx->keep[idx] = c; return ER_OK; }
    if (cx->keep_pass == 2) er_cset_join(&c, &cx->keep[idx]);
    er_record(cx, idx, &c);
    return ER_OK;
}

/* The cached any-order path over a range of elements (one thread's share). */
typedef struct er_range_job { er_covers_ctx *cx; int64_t begin, end; er_status st; } er_range_job;

static void *er_cached_range(void *arg) {
    er_range_job *j = arg;
    er_covers_ctx *cx = j->cx;
    const er_ref *ref = cx->ref;
    for (int64_t idx = j->begin; idx < j->end; idx++) {
        er_cval v;
        er_cset c;
        er__anyorder_cval(&v, &cx->bd, cx->F, &ref->sums[idx], &cx->w);
        er_finish(cx, &c, &v, &ref->sums[idx], idx);
        er_record(cx, idx, &c);
    }
    return NULL;
}

/* The fast path (docs/algorithms/fast-path.md): from S_hat = fl64(A B) and bounds of P = sum |a b| (the operands'
 * norms, then if needed a dot product of their absolute values), decide the elements whose class is the same for
 * every S and every bound the exact engine could hold; recompute the others exactly from the kept operands (a
 * scaled matmul: mark them 0xFF for the exact pass). */
_Static_assert(ER_CLASS_EXACT == 0 && ER_CLASS_COVERED == 1, "the fast path computes these two classes");

/* The constants of the decision (fastdecide.h) for the context's K, bound and formats. */
static void er_fast_consts_init(er_fast_consts *fc, const er_covers_ctx *cx) {
    const er_anyorder_bound *bd = &cx->bd;
    double K = (double)cx->ref->K;
    fc->gK = K * 0x1p-52 * ER_FAST_UP;                 /* (1 + 2^-53)^K - 1 <= K 2^-52: fp64 sums of exact products */
    double eng = (1.0 + 4.0 * K * 0x1p-52) * ER_FAST_UP; /* the engine's bound of sum |p| is within this factor of P */
    fc->c1lo = bd->c1 * ER_FAST_DN;
    fc->c1hi = bd->c1 * eng * ER_FAST_UP;
    fc->c2lo = bd->c2 * ER_FAST_DN;
    fc->c2hi = bd->c2 * ER_FAST_UP;
    fc->g = bd->g * ER_FAST_UP;
    fc->lim = fmin(bd->thr, cx->O->max) / 4;
    er_format o = cx->O->id;
    fc->out_fmt = cx->F->id != ER_FP32 ? -1 : o == ER_FP32 ? 0 : o == ER_FP16 ? 1 : o == ER_BF16 ? 2 : -1;
}

/* The lower edge RN_O(RU_F(t)) (upper = 0) or the upper edge RN_O(RD_F(t)) of a set through the compute format F and
 * the output format O, for t below the overflow limit. A float f is RU_F(t) when it is (float)t, unless that is below t. */
static inline double er_fast_edge(const er_fast_consts *fc, const er_covers_ctx *cx, double t, int upper) {
    if (fc->out_fmt == 0) {
        /* without a branch on the rounding's direction (taken half of the time): one step toward t where the float
         * nearest t is on the wrong side. Up from a float of sign bit 0 (+0 included: t > 0 rounds to +0, never to
         * -0) is the next encoding, up from a negative one the previous; down, the reverse (t < 0 rounds to -0). */
        float f = (float)t;
        uint32_t u, step = upper ? (double)f > t : (double)f < t;
        memcpy(&u, &f, 4);
        u += step * (1u - 2u * ((u >> 31) ^ (uint32_t)upper));
        memcpy(&f, &u, 4);
        return f;
    }
    double e = er__round_double(cx->F, t, upper ? ER_ROUND_DOWN : ER_ROUND_UP, ER_OVERFLOW_IEEE);
    return er__round_double(cx->O, e, ER_ROUND_NEAREST, cx->ov_out);
}

/* RN_O(t) for t below the overflow limit. */
static inline double er_fast_rn(const er_fast_consts *fc, const er_covers_ctx *cx, double t) {
    return fc->out_fmt == 0 ? (double)(float)t : er__round_double(cx->O, t, ER_ROUND_NEAREST, cx->ov_out);
}

/* The class of output y from S_hat and P in [Plo, Phi], or ER_PENDING when some S or bound the exact engine could
 * hold gives another class (or overflow is possible). */
static inline int er_fast_decide(const er_fast_consts *fc, const er_covers_ctx *cx, double y, const er_fast_bracket *b) {
    if (fc->out_fmt == 0) return er_fast_class(y, b->tlo, b->thi, (float)b->slo, (float)b->shi); /* no overflow below lim */
    return er_fast_class(y, er_fast_edge(fc, cx, b->tlo, 0), er_fast_edge(fc, cx, b->thi, 1), er_fast_rn(fc, cx, b->slo),
                         er_fast_rn(fc, cx, b->shi));
}

/* The engine's set of the element whose bracket is b, where b decides it (er_fast_join): its finite ends lo, hi. */
static inline int er_fast_set(const er_fast_consts *fc, const er_covers_ctx *cx, const er_fast_bracket *b, double r1, double r2,
                              double *lo, double *hi) {
    double l = er_fast_edge(fc, cx, b->ulo, 0), h = er_fast_edge(fc, cx, b->uhi, 1);
    /* for fp32 in and out, RU_F(tlo) = l = RU_F(ulo) exactly when tlo <= l (ulo <= tlo), and RD_F(thi) = h when thi >= h */
    int same = fc->out_fmt == 0 ? b->tlo <= l && b->thi >= h : l == er_fast_edge(fc, cx, b->tlo, 0) && h == er_fast_edge(fc, cx, b->thi, 1);
    return er_fast_join(same, l, h, r1, r2, lo, hi);
}

/* Whether the set of the element whose bracket is b may be as wide, relative to its size, as best: false only when
 * an upper bound of its er_set_rel is below best (er_fast_rel_ub). lo = min(edge, r) lies in [min(E_lo(ulo), r1),
 * min(E_lo(tlo), r2)] and hi in [max(E_hi(thi), r1), max(E_hi(uhi), r2)]. First a cheaper test on the outer ends
 * (for fp32 in and out ulo <= RU_F(ulo) and RD_F(uhi) <= uhi), then these. */
static inline int er_fast_may_be_widest(const er_fast_consts *fc, const er_covers_ctx *cx, const er_fast_bracket *b, double r1,
                                        double r2, double best) {
    if (best < 0) return 1;
    double l = fc->out_fmt == 0 ? b->ulo : er_fast_edge(fc, cx, b->ulo, 0), h = fc->out_fmt == 0 ? b->uhi : er_fast_edge(fc, cx, b->uhi, 1);
    double L1 = l < r1 ? l : r1, H2 = h > r2 ? h : r2, al = fabs(L1), ah = fabs(H2);
    /* without a division nor a branch on the sign: rel <= w / m, w = H2 - L1, m = min(|L1|, |H2|) where [L1, H2]
     * lies on one side of 0 (m bounds max(|lo|, |hi|) below); on both sides, w >= 2 m while rel <= 2. If
     * fl(w / m) >= best, then w >= best m (1 - 2^-53) > fl(fl(best (1 - 2^-50)) m). */
    if (H2 - L1 < best * (1.0 - 0x1p-50) * (al < ah ? al : ah)) return 0;
    double lt = er_fast_edge(fc, cx, b->tlo, 0), ht = er_fast_edge(fc, cx, b->thi, 1);
    return er_fast_rel_ub(L1, lt < r2 ? lt : r2, ht > r1 ? ht : r1, H2) >= best;
}

/* sum |a_k b_k| of two float vectors in double (each product exact) with four running sums. */
static double er_abs_dot(const float *a, const float *b, int64_t K) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t k = 0;
    for (; k + 3 < K; k += 4) {
        s0 += fabs((double)a[k] * b[k]);
        s1 += fabs((double)a[k + 1] * b[k + 1]);
        s2 += fabs((double)a[k + 2] * b[k + 2]);
        s3 += fabs((double)a[k + 3] * b[k + 3]);
    }
    for (; k < K; k++) s0 += fabs((double)a[k] * b[k]);
    return (s0 + s1) + (s2 + s3);
}

/* The fast path's first pass: threads take chunks of elements from a shared counter (a thread slowed by other
 * work takes fewer) and decide what the bounds decide, leaving the rest ER_PENDING; each thread counts its own, and
 * keeps the widest set among those it decided (the earliest of equal widths). With er_covers_sets, every decided
 * element's set is written. */
typedef struct er_fast_job {
    er_covers_ctx *cx;
    int64_t *next;
    const double *P;        /* |A| |B| in fp64 (er__fast_absprod), or NULL: P from the floats where needed */
    int64_t counts[2];
    double wrel;            /* the widest set decided here: its er_set_rel and element (-1: none) */
    int64_t widx;
} er_fast_job;
#define ER_FAST_CHUNK 16384

static void *er_fast_decide_run(void *arg) {
    er_fast_job *fj = arg;
    er_covers_ctx *cx = fj->cx;
    const er_ref *ref = cx->ref;
    const er_mm_plan *pl = &ref->plan;
    const er_tensor *out = cx->out;
    uint8_t *classes = cx->sk.rep->classes;
    er_fast_consts fc;
    er_fast_consts_init(&fc, cx);
    int64_t K = pl->K, MN = pl->M * pl->N, n = ref->n;
    double Kd = (double)K, plo_f = (1.0 - 2.0 * Kd * 0x1p-53) * ER_FAST_DN, phi_f = (1.0 + 4.0 * Kd * 0x1p-53) * ER_FAST_UP; /* Lemma D4 */
    double pg_lo = (1.0 - fc.gK) * ER_FAST_DN, pg_hi = (1.0 + 2.0 * fc.gK) * ER_FAST_UP;
    const char *yb = out->data;
    int yf32 = cx->O->id == ER_FP32 && cx->out_contig, sets = cx->sk.set_lo != NULL;
    fj->wrel = -1;
    fj->widx = -1;
    for (;;) {
        int64_t begin = __atomic_fetch_add(fj->next, ER_FAST_CHUNK, __ATOMIC_RELAXED);
        if (begin >= n) break;
        int64_t end = begin + ER_FAST_CHUNK < n ? begin + ER_FAST_CHUNK : n, cur_bi = -1, ia = 0, ib = 0;
        int64_t bi = begin / MN, i = (begin % MN) / pl->N, jj = begin % pl->N; /* idx's coordinates, stepped */
        for (int64_t idx = begin; idx < end; idx++, jj++) {
            if (jj == pl->N) { jj = 0; if (++i == pl->M) { i = 0; bi++; } }
            double y;
            if (yf32) { float yv; memcpy(&yv, yb + 4 * idx, 4); y = yv; } /* a view's data need not be aligned */
            else y = er__load(out, cx->out_contig ? idx : er_offset(out, idx));
            if (bi != cur_bi) { er__matmul_batch_of(ref, bi, &ia, &ib); cur_bi = bi; }
            double Sh = ref->fs[idx];
            int cls = ER_PENDING;
            er_fast_bracket b;
            double Plo, Phi;
            if (fabs(y) < INFINITY && !ref->scaled) {
                int want_set = sets;
                double r1 = 0, r2 = 0;
                if (fj->P) {
                    /* fl64(|A| |B|) is within gK of P (Theorem 2, exact terms): P_hat (1 - gK) <= P <= P_hat (1 + 2 gK) */
                    if (!er_fast_bracket_of(&fc, Sh, fj->P[idx] * pg_lo, fj->P[idx] * pg_hi, &b)) { classes[idx] = ER_PENDING; continue; }
                } else {
                    /* Cauchy-Schwarz above, |S| below; then, if that does not decide (or the set may be the widest and
                     * is not decided by it), P from the floats */
                    er_fast_stage1(&fc, Sh, ref->an[ia * pl->M + i], ref->bn[ib * pl->N + jj], &Plo, &Phi);
                    if (!er_fast_bracket_of(&fc, Sh, Plo, Phi, &b)) { classes[idx] = ER_PENDING; continue; }
                    r1 = er_fast_rn(&fc, cx, b.slo);
                    r2 = er_fast_rn(&fc, cx, b.shi);
                    want_set = want_set || er_fast_may_be_widest(&fc, cx, &b, r1, r2, fj->wrel);
                    if (!want_set) cls = er_fast_decide(&fc, cx, y, &b);
                    if (want_set || cls == ER_PENDING) {
                        double P = er_abs_dot(ref->af + (ia * pl->M + i) * K, ref->bt + (ib * pl->N + jj) * K, K);
                        double lo = P * plo_f, hi = P * phi_f;
                        if (!er_fast_bracket_of(&fc, Sh, lo > Plo ? lo : Plo, hi < Phi ? hi : Phi, &b)) { classes[idx] = ER_PENDING; continue; }
                        if (!want_set) cls = er_fast_decide(&fc, cx, y, &b);
                    }
                }
                double slo, shi;
                if (want_set) {
                    r1 = er_fast_rn(&fc, cx, b.slo);
                    r2 = er_fast_rn(&fc, cx, b.shi);
                }
                if (want_set && er_fast_set(&fc, cx, &b, r1, r2, &slo, &shi) && y >= slo && y <= shi &&
                    (r1 == r2 || y < r1 || y > r2)) {
                    cls = r1 == r2 && y == r1 ? ER_CLASS_EXACT : ER_CLASS_COVERED;
                    /* the width only where it may reach the widest so far (the division of er_fast_may_be_widest) */
                    double al = fabs(slo), ah = fabs(shi);
                    if (shi - slo >= fj->wrel * (1.0 - 0x1p-50) * (al > ah ? al : ah)) {
                        double rel = er_set_rel(slo, shi);
                        if (rel > fj->wrel || (rel == fj->wrel && rel >= 0 && idx < fj->widx)) { fj->wrel = rel; fj->widx = idx; }
                    }
                    if (sets) er_store_set(&cx->sk, idx, 1, slo, shi, y);
                }
            }
            classes[idx] = (uint8_t)cls;
            if (cls != ER_PENDING) fj->counts[cls]++;
        }
    }
    return NULL;
}

/* The fast path's second pass, in contiguous ranges (reports merge in element order): the exact engine on each
 * element left, from the kept operands (exact as doubles). */
static void *er_fast_rest(void *arg) {
    er_range_job *j = arg;
    er_covers_ctx *cx = j->cx;
    const er_ref *ref = cx->ref;
    const er_mm_plan *pl = &ref->plan;
    int64_t K = pl->K, MN = pl->M * pl->N;
    double *va = NULL, *vb = NULL;
    for (int64_t idx = j->begin; idx < j->end && j->st == ER_OK; idx++) {
        if (cx->sk.rep->classes[idx] != ER_PENDING) continue;
        if (!va) {
            va = malloc(sizeof(double) * (size_t)K);
            vb = malloc(sizeof(double) * (size_t)K);
            if (!va || !vb) { j->st = er__fail(ER_ERR_NOMEM, "cannot allocate two vectors of %lld", (long long)K); break; }
        }
        int64_t ia, ib;
        er__matmul_batch_of(ref, idx / MN, &ia, &ib);
        const float *arow = ref->af + (ia * pl->M + (idx % MN) / pl->N) * K, *bcol = ref->bt + (ib * pl->N + idx % pl->N) * K;
        for (int64_t k = 0; k < K; k++) { va[k] = arow[k]; vb[k] = bcol[k]; }
        j->st = er_covers_cb(cx, &ref->env, idx, va, vb, K, 0);
    }
    free(va);
    free(vb);
    return NULL;
}

/* The report's widest set from element idx, which the fast pass decided: its set from the exact engine, from the kept
 * operands. */
static er_status er_fast_widest(er_covers_ctx *cx, er_report *r, int64_t idx) {
    const er_ref *ref = cx->ref;
    const er_mm_plan *pl = &ref->plan;
    int64_t K = pl->K, MN = pl->M * pl->N, ia, ib;
    double *va = malloc(sizeof(double) * (size_t)(K ? K : 1)), *vb = malloc(sizeof(double) * (size_t)(K ? K : 1));
    er_status st = va && vb ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate two vectors of %lld", (long long)K);
    if (st == ER_OK) {
        er__matmul_batch_of(ref, idx / MN, &ia, &ib);
        const float *arow = ref->af + (ia * pl->M + (idx % MN) / pl->N) * K, *bcol = ref->bt + (ib * pl->N + idx % pl->N) * K;
        for (int64_t k = 0; k < K; k++) { va[k] = arow[k]; vb[k] = bcol[k]; }
        er_cset c;
        st = er_element_set(cx, &ref->env, idx, va, vb, K, 0, &c);
        if (st == ER_OK) {
            double y = er__load(cx->out, cx->out_contig ? idx : er_offset(cx->out, idx));
            er_fill_element(&r->widest, r, idx, (er_class)r->classes[idx], y, &c, 0);
            r->widest_rel = er_set_rel(c.lo, c.hi);
            r->has_widest = 1;
        }
    }
    free(va);
    free(vb);
    return st;
}

/* The exact pass over the elements the fast path left. */
static er_status er_pending_cb(void *vcx, const er_dot_env *env, int64_t idx, const double *a, const double *b,
                               int64_t K, int special) {
    er_covers_ctx *cx = vcx;
    if (cx->sk.rep->classes[idx] != ER_PENDING) return ER_OK;
    return er_covers_cb(vcx, env, idx, a, b, K, special);
}

/* Runs fn over n elements split into nt contiguous ranges, range t with context cx[t]; range 0 in this thread, and a
 * range whose thread cannot start here too. */
static er_status er_run_ranges(er_covers_ctx *cx, int nt, int64_t n, void *(*fn)(void *)) {
    er_range_job jobs[ER_MAX_THREADS];
    for (int t = 0; t < nt; t++) jobs[t] = (er_range_job){&cx[t], n * t / nt, n * (t + 1) / nt, ER_OK};
    er__run_jobs(jobs, sizeof jobs[0], nt, fn);
    for (int t = 0; t < nt; t++) ER_RETURN_IF_ERROR(jobs[t].st);
    return ER_OK;
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

static void er_part_begin(er_report *part, const er_report *r, er_covers_ctx *cx) { er_part_begin_sink(part, r, &cx->sk); }

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
    if (part->has_worst &&
        (!r->has_worst || (part->worst.cls == ER_CLASS_OUTSIDE && (r->worst.cls != ER_CLASS_OUTSIDE || part_dist > *worst_dist)))) {
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
    r->classes = malloc((size_t)(r->n ? r->n : 1));
    if (!r->classes) return er__fail(ER_ERR_NOMEM, "cannot allocate %lld classes", (long long)r->n);
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

/* ---- the engine of the op modules (src/ops/module.h): sinks, checks, reports ---- */

struct er_sinks {
    const er_op_module *m;
    const er_standard *std;
    const er_tensor *const *outs;   /* m->nout views, NULL where not checked */
    er_report *reps;                /* the check's reports, begun */
    double *const *lo, *const *hi, *const *slack;
    int nt;
    er_sink *sink;                  /* [nt][nout] */
    er_report *part;                /* [nt][nout]: each share's partial reports */
};

er_status er__sinks_open(er_sinks *sk, int nt) {
    int no = sk->m->nout;
    if (sk->sink || nt < 1 || nt > ER_MAX_THREADS) return er__fail(ER_ERR_INTERNAL, "a module opened %d sinks (or twice)", nt);
    sk->sink = calloc((size_t)nt * (size_t)no, sizeof *sk->sink);
    sk->part = calloc((size_t)nt * (size_t)no, sizeof *sk->part);
    if (!sk->sink || !sk->part) return er__fail(ER_ERR_NOMEM, "cannot allocate %d thread sinks", nt);
    sk->nt = nt;
    for (int t = 0; t < nt; t++)
        for (int o = 0; o < no; o++) {
            const er_tensor *out = sk->outs[o];
            if (!out) continue;
            er_sink *s = &sk->sink[t * no + o];
            s->out = out;
            s->out_contig = er_row_major(out);
            s->O = er__fmt(out->format);
            s->ov = er__overflow_rule(s->O, sk->std->out_overflow);
            s->worst_dist = -1;
            if (sk->lo && sk->lo[o]) {
                s->set_lo = sk->lo[o];
                s->set_hi = sk->hi[o];
                s->set_slack = sk->slack ? sk->slack[o] : NULL;
            }
            er_part_begin_sink(&sk->part[t * no + o], &sk->reps[o], s);
        }
    return ER_OK;
}

er_sink *er__sinks_at(er_sinks *sk, int t, int o) {
    return t >= 0 && t < sk->nt && o >= 0 && o < sk->m->nout && sk->outs[o] ? &sk->sink[t * sk->m->nout + o] : NULL;
}

/* One output of a module's op: the arguments, its shape, the standard. */
static er_status er_check_module_args(const er_op_module *m, const er_ref *ref, int o, const er_tensor *out, const er_standard *std,
                                      int *ndim, int64_t *shape) {
    ER_RETURN_IF_ERROR(er_standard_validate(std));
    ER_RETURN_IF_ERROR(er__tensor_check(out, "out"));
    ER_RETURN_IF_ERROR(m->out_shape(ref, o, out, ndim, shape));
    ER_RETURN_IF_ERROR(m->check(ref, std));
    const er_fmt_info *O = er__fmt(out->format);
    if (std->out_overflow == ER_OVERFLOW_IEEE && !O->has_inf)
        return er__fail(ER_ERR_STANDARD, "overflow=ieee does not apply to output format %s, which has no infinity", O->name);
    return ER_OK;
}

/* covers through a module: its sets into per-share sinks, classified and merged in element order into one report
 * per checked output (reps[o] untouched where outs[o] is NULL). */
static er_status er_module_covers(er_report *reps, const er_op_module *m, const er_ref *ref, const er_tensor *const *outs,
                                  const er_standard *std, double *const *lo, double *const *hi, double *const *slack) {
    int no = m->nout, nd[3];
    int64_t sh[3][ER_MAX_DIMS];
    int any = 0;
    for (int o = 0; o < no; o++) {
        if (!outs[o]) continue;
        any = 1;
        ER_RETURN_IF_ERROR(er_check_module_args(m, ref, o, outs[o], std, &nd[o], sh[o]));
    }
    if (!any) {
        char names[96];
        int k = 0;
        for (int o = 0; o < no; o++)
            k += snprintf(names + k, sizeof names - (size_t)k, "%s%s", o == 0 ? "" : o == no - 1 ? " or " : ", ", m->out_names[o]);
        return er__fail(ER_ERR_NULL, "every output is NULL: give %s", names);
    }
    memset(reps, 0, (size_t)no * sizeof *reps);
    er_status st = ER_OK;
    for (int o = 0; o < no && st == ER_OK; o++) {
        if (!outs[o]) continue;
        char suffix[24] = "";
        if (o) snprintf(suffix, sizeof suffix, ".%s", m->out_names[o]);
        st = er_report_begin(&reps[o], m->name, suffix, nd[o], sh[o], outs[o], std);
    }
    er_sinks sk = {m, std, outs, reps, lo, hi, slack, 0, NULL, NULL};
    if (st == ER_OK) st = m->covers(ref, std, &sk);
    for (int o = 0; o < no; o++) {
        double worst = -1;
        for (int t = 0; t < sk.nt && st == ER_OK && outs[o]; t++)
            er_merge(&reps[o], &worst, &sk.part[t * no + o], sk.sink[t * no + o].worst_dist);
        if (st != ER_OK) er_report_clear(&reps[o]);
    }
    free(sk.sink);
    free(sk.part);
    return st;
}

static er_status er_covers_sets_run(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std, double *set_lo,
                                    double *set_hi, double *set_slack);

static er_status er_covers_outputs_run(er_report *reps, const er_ref *ref, const er_tensor *const *outs, int nout, const er_standard *std,
                                       double *const *set_lo, double *const *set_hi, double *const *set_slack) {
    er__ok();
    ER_CHECK_NULL(reps, "reports");
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(outs, "outs");
    int want = er_ref_num_outputs(ref);
    if (nout != want)
        return er__fail(ER_ERR_OUTPUT, "%s has %d output%s (got %d)", er__op_name(ref), want, want == 1 ? "" : "s", nout);
    const er_op_module *m = er__module_of(ref);
    if (nout == 1) {
        ER_CHECK_NULL(outs[0], "outs[0]");
        return er_covers_sets_run(reps, ref, outs[0], std, set_lo ? set_lo[0] : NULL, set_hi ? set_hi[0] : NULL,
                                  set_slack ? set_slack[0] : NULL);
    }
    ER_CHECK_NULL(std, "standard");
    er_report tmp[3];
    ER_RETURN_IF_ERROR(er_module_covers(tmp, m, ref, outs, std, set_lo, set_hi, set_slack));
    memcpy(reps, tmp, (size_t)nout * sizeof *tmp);
    return ER_OK;
}

er_status er_covers_outputs(er_report *reps, const er_ref *ref, const er_tensor *const *outs, int nout, const er_standard *std) {
    er_status st = er_covers_outputs_run(reps, ref, outs, nout, std, NULL, NULL, NULL);
    for (int i = 0; reps && i < nout && i < 3; i++) er__report_finish(&reps[i], st);
    return st;
}

er_status er_covers(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std) {
    er_status st = er__covers_run(rep, ref, out, std);
    er__report_finish(rep, st);
    return st;
}

er_status er_covers_sets(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std, double *lo, double *hi,
                         double *slack) {
    er__ok();
    er_status st = lo && hi ? er_covers_sets_run(rep, ref, out, std, lo, hi, slack) : er__fail(ER_ERR_NULL, "lo and hi must not be NULL");
    er__report_finish(rep, st);
    return st;
}

er_status er_covers_outputs_sets(er_report *reps, const er_ref *ref, const er_tensor *const *outs, int nout, const er_standard *std,
                                 double *const *lo, double *const *hi, double *const *slack) {
    er__ok();
    er_status st = lo && hi ? ER_OK : er__fail(ER_ERR_NULL, "lo and hi must not be NULL (their entries may be)");
    for (int i = 0; st == ER_OK && i < nout && i < 3; i++)
        if (!lo[i] != !hi[i]) st = er__fail(ER_ERR_NULL, "lo[%d] and hi[%d] are both given or both NULL", i, i);
    if (st == ER_OK) st = er_covers_outputs_run(reps, ref, outs, nout, std, lo, hi, slack);
    for (int i = 0; reps && i < nout && i < 3; i++) er__report_finish(&reps[i], st);
    return st;
}

er_status er__covers_run(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std) {
    return er_covers_sets_run(rep, ref, out, std, NULL, NULL, NULL);
}

static er_status er_covers_sets_run(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std, double *set_lo,
                                    double *set_hi, double *set_slack) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_RETURN_IF_ERROR(er_check_covers_args(ref, out, std));
    const er_op_module *m = er__module_of(ref);
    if (m) {
        /* the op's first output (the others unchecked) */
        const er_tensor *outs[3] = {out, NULL, NULL};
        er_report reps[3];
        double *const los[3] = {set_lo, NULL, NULL}, *const his[3] = {set_hi, NULL, NULL}, *const sls[3] = {set_slack, NULL, NULL};
        ER_RETURN_IF_ERROR(er_module_covers(reps, m, ref, outs, std, set_lo ? los : NULL, set_lo ? his : NULL, sls));
        *rep = reps[0];
        return ER_OK;
    }
    er_report r;
    ER_RETURN_IF_ERROR(er_report_begin(&r, er__op_name(ref), "", ref->ndim, ref->shape, out, std));
    int any_set = std->order == ER_ORDER_ANY || (std->order == ER_ORDER_MMA && std->outer == ER_SUB_ANY);
    int cached = any_set && std->compute != ER_TF32 && ref->op != ER_OP_MAX;
    int nt = er__num_threads(ref->n * (cached ? 256 : ref->K + 64));
    /* one context and one partial report per thread; the classes array is shared (each element written once) */
    er_covers_ctx cx[ER_MAX_THREADS];
    er_report part[ER_MAX_THREADS];
    void *ctxs[ER_MAX_THREADS] = {0};
    er_status st = ER_OK;
    int made = 0;
    double fast_wrel = -1; /* the fast pass's widest set: its width and element */
    int64_t fast_widx = -1;
    for (int t = 0; t < nt && st == ER_OK; t++, made++) {
        st = er_ctx_init(&cx[t], ref, out, std);
        if (st != ER_OK) break;
        cx[t].sk.set_lo = set_lo;
        cx[t].sk.set_hi = set_hi;
        cx[t].sk.set_slack = set_lo ? set_slack : NULL;
        er_part_begin(&part[t], &r, &cx[t]);
        ctxs[t] = &cx[t];
    }
    if (st == ER_OK) {
        if (cached && ref->fast) {
            /* pass 1: the fast decisions (counts, the widest set, the sets if wanted); pass 2: the rest exactly, in
             * contiguous ranges (a scaled matmul's rest through the exact engine's walk) */
            er_fast_job fj[ER_MAX_THREADS];
            int64_t next = 0;
            /* with the sets, every element needs P: one GEMM of the absolute values (when memory allows) */
            double *absprod = set_lo && !ref->scaled ? er__fast_absprod(ref) : NULL;
            for (int t = 0; t < nt; t++) fj[t] = (er_fast_job){&cx[t], &next, absprod, {0, 0}, -1, -1};
            er__run_jobs(fj, sizeof fj[0], nt, er_fast_decide_run);
            free(absprod);
            for (int t = 0; t < nt; t++) {
                part[t].counts[0] += fj[t].counts[0];
                part[t].counts[1] += fj[t].counts[1];
                if (fj[t].wrel > fast_wrel || (fj[t].wrel == fast_wrel && fj[t].wrel >= 0 && fj[t].widx < fast_widx)) {
                    fast_wrel = fj[t].wrel;
                    fast_widx = fj[t].widx;
                }
            }
            int64_t pending = 0;
            for (int64_t i = 0; i < ref->n; i++) pending += r.classes[i] == ER_PENDING;
            if (pending && ref->scaled) st = er__matmul_foreach_n(ref, -1, er_pending_cb, ctxs, nt);
            else if (pending) st = er_run_ranges(cx, nt, ref->n, er_fast_rest);
        } else if (cached && !ref->fast) {
            /* the reference's cached exact summaries are those of this standard */
            st = er_run_ranges(cx, nt, ref->n, er_cached_range);
        } else if (std->compute == ER_TF32 && std->tf32 == ER_TF32_NEAREST) {
            /* either tie rule, one for the whole kernel: the sets under each conversion, joined (orders.md) */
            er_cset *keep = malloc(sizeof *keep * (size_t)(ref->n ? ref->n : 1));
            if (!keep) st = er__fail(ER_ERR_NOMEM, "cannot allocate %lld element sets", (long long)ref->n);
            for (int pass = 1; pass <= 2 && st == ER_OK; pass++) {
                for (int t = 0; t < nt; t++) { cx[t].keep = keep; cx[t].keep_pass = pass; }
                st = er__matmul_foreach_n(ref, pass == 1 ? ER_TF32_RNE : ER_TF32_RNA, er_covers_cb, ctxs, nt);
            }
            free(keep);
        } else {
            st = er__matmul_foreach_n(ref, er_operand_conv(std), er_covers_cb, ctxs, nt);
        }
    }
    double worst_dist = -1;
    for (int t = 0; t < made && st == ER_OK; t++) er_merge(&r, &worst_dist, &part[t], cx[t].sk.worst_dist);
    /* the widest set among those the fast pass decided, where it is wider than (or as wide as and before) those of
     * the exact pass: its report entry from the exact engine */
    if (st == ER_OK && fast_widx >= 0 &&
        (!r.has_widest || fast_wrel > r.widest_rel || (fast_wrel == r.widest_rel && fast_widx < r.widest.index)))
        st = er_fast_widest(&cx[0], &r, fast_widx);
    for (int t = 0; t < made; t++) er_ctx_clear(&cx[t]);
    if (st != ER_OK) { free(r.classes); return st; }
    *rep = r;
    return ER_OK;
}

/* er_emulate: the one value of each element's set, written into the destination. */
static er_status er_emulate_cb(void *vcx, const er_dot_env *env, int64_t idx, const double *a, const double *b,
                               int64_t K, int special) {
    er_covers_ctx *cx = vcx;
    er_cset c;
    if (cx->ref->op == ER_OP_MAX) ER_RETURN_IF_ERROR(er_element_set(cx, env, idx, a, b, K, special, &c));
    else {
        /* the set of the fixed order alone: the exact summary, which only covers needs, is not computed */
        er_cval w;
        if (cx->mma_chain) {
            double d = er__mma_chain(&cx->mma, a, b, K);
            er__cval_from_interval(&w, d, d, isnan(d), cx->F);
        } else {
            const er_fmt_info *G;
            ER_RETURN_IF_ERROR(er__dot_order(&cx->plan, env, a, b, K, special, &w, &G));
        }
        if (cx->ref->op == ER_OP_MEAN) er_mean_cval(cx, &w, cx->ref->K);
        er_cset_build(&c, cx, &w, NAN, NAN);
    }
    double v;
    int finite = c.lo <= c.hi;
    if (c.nan_req) v = NAN;
    else if (finite && c.lo == c.hi && !c.pinf_ok && !c.ninf_ok && !c.nan_ok) v = c.lo;
    else if (!finite && c.pinf_ok + c.ninf_ok + c.nan_ok == 1) v = c.pinf_ok ? INFINITY : c.ninf_ok ? -INFINITY : NAN;
    else return er__fail(ER_ERR_INTERNAL, "the emulated set of element %lld is not a single value", (long long)idx);
    er_store_value(cx->dst, idx, v, cx->ov_out);
    return ER_OK;
}

/* er_emulate's tile walk: T values of the fixed fp32 order, converted to the output as er_cset_build would. */
static er_status er_emulate_tile_cb(void *vcx, int64_t idx0, const float *vals, int T) {
    er_covers_ctx *cx = vcx;
    const er_tensor *dst = cx->dst;
    for (int t = 0; t < T; t++) {
        double v = er__round_double(cx->O, vals[t], ER_ROUND_NEAREST, cx->ov_out);
        if (dst->format == ER_FP32 && cx->out_contig) {
            float f = (float)v; /* v is a value of fp32 (or an infinity or NaN) */
            memcpy((char *)(uintptr_t)dst->data + 4 * (idx0 + t), &f, 4);
        } else {
            er_store_value(dst, idx0 + t, v, cx->ov_out);
        }
    }
    return ER_OK;
}

er_status er_emulate(const er_ref *ref, er_tensor *out, const er_standard *std) {
    er__ok();
    ER_RETURN_IF_ERROR(er_check_covers_args(ref, out, std));
    if (er_row_op(ref))
        return er__fail(ER_ERR_STANDARD, "emulate needs a fully fixed standard; %s's elementary functions leave its "
                        "results free", er__op_name(ref));
    int fixed = ref->op == ER_OP_MAX ||
                (er__standard_is_fixed_info(std, er__fmt(ref->A.format), ref->b_is_one ? er__fmt_one() : er__fmt(ref->B.format)) &&
                 (ref->op != ER_OP_MEAN || std->mean != 0));
    if (!fixed) {
        char name[160];
        er_standard_format(std, name, sizeof name, NULL);
        const char *why = std->order == ER_ORDER_ANY ? "any_order leaves the order free"
                        : std->rounding != ER_RND_NEAREST ? "faithful rounding leaves each rounding free"
                        : (std->inner == ER_SUB_ANY || std->outer == ER_SUB_ANY) ? "inner=any or outer=any leaves an order free"
                        : (ref->op == ER_OP_MEAN && std->mean == 0) ? "mean=either leaves the division free (state mean=divide or mean=reciprocal)"
                        : "fma=either leaves the fusing of each product free (state fma=never or fma=always)";
        return er__fail(ER_ERR_STANDARD, "emulate needs a fully fixed standard; '%s' is not: %s", name, why);
    }
    if (ref->scaled)
        return er__fail(ER_ERR_UNSUPPORTED, "emulate does not apply to a scaled matmul: the scaling's association is left free");
    ER_RETURN_IF_ERROR(er_check_distinct(out));
    int nt = er__num_threads(ref->n * (ref->K + 64)), made = 0;
    er_covers_ctx cx[ER_MAX_THREADS];
    void *ctxs[ER_MAX_THREADS] = {0};
    er_status st = ER_OK;
    for (int t = 0; t < nt && st == ER_OK; t++, made++) {
        st = er_ctx_init(&cx[t], ref, out, std);
        if (st != ER_OK) break;
        cx[t].dst = out; /* each element is written by one thread */
        ctxs[t] = &cx[t];
    }
    int conv = er_operand_conv(std), outer = 0;
    int64_t block = st == ER_OK && ref->op == ER_OP_MATMUL && cx[0].have_plan && !cx[0].mma_chain
                        ? er__dot_order_tile_block(&cx[0].plan, ref->K, &outer) : 0;
    if (st == ER_OK && block > 0) st = er__matmul_foreach_tile(ref, conv, block, outer, er_emulate_tile_cb, ctxs, nt);
    else if (st == ER_OK) st = er__matmul_foreach_n(ref, conv, er_emulate_cb, ctxs, nt);
    for (int t = 0; t < made; t++) er_ctx_clear(&cx[t]);
    return st;
}

/* The exact sum of a summary rounded to double and correctly rounded to O (its default overflow rule). */
static void er_rounded_of_sum(const er_fmt_info *O, const er_dotsum *sm, double *e, double *rd) {
    if ((sm->special & ER_SPECIAL_NAN) || (sm->special & ER_SPECIAL_PINF && sm->special & ER_SPECIAL_NINF)) *e = *rd = NAN;
    else if (sm->special & (ER_SPECIAL_PINF | ER_SPECIAL_NINF)) {
        *e = sm->special & ER_SPECIAL_PINF ? INFINITY : -INFINITY;
        *rd = er__round_double(O, *e, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
    } else {
        *e = er__round_core(er__fmt(ER_FP64), sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        *rd = er__round_core(O, sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
    }
}

er_status er_ref_exact(const er_ref *ref, const int64_t *index, er_format f, double *exact, double *rounded) {
    er__ok();
    ER_CHECK_NULL(ref, "ref");
    ER_CHECK_NULL(index, "index");
    const er_fmt_info *O = er__fmt(f);
    if (!O) return er__fail(ER_ERR_FORMAT, "invalid format value %d", (int)f);
    int64_t idx;
    ER_RETURN_IF_ERROR(er__ref_index(ref, index, &idx));
    if (er_row_op(ref))
        return er__fail(ER_ERR_UNSUPPORTED, "er_ref_exact does not give %s values in this version (covers reports them)",
                        er__op_name(ref));
    double e, rd;
    if (ref->op == ER_OP_MAX) {
        int64_t offa, offb;
        er__matmul_offsets(ref, idx, &offa, &offb);
        const er_tensor *A = &ref->A;
        e = er__load(A, offa);
        for (int64_t k = 0; k < ref->K && !isnan(e); k++) {
            double v = er__load(A, offa + k * A->strides[A->ndim - 1]);
            if (isnan(v) || v > e) e = v;
        }
        rd = er__round_double(O, e, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
    } else if (ref->op == ER_OP_MEAN) {
        mpfr_t x, q;
        mpfr_init2(x, 2);
        ER_RETURN_IF_ERROR(er__matmul_exact_mpfr(ref, idx, x));
        mpfr_init2(q, mpfr_get_prec(x) + 64);
        int inex = ref->K ? mpfr_div_ui(q, x, (unsigned long)ref->K, MPFR_RNDZ) : (mpfr_set_nan(q), 0);
        e = mpfr_get_d(q, MPFR_RNDN);
        rd = er__round_mpfr_sticky(O, q, inex != 0, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        mpfr_clears(x, q, (mpfr_ptr)0);
    } else if (ref->scaled) {
        mpfr_t x;
        mpfr_init2(x, 2);
        er_status st = er__matmul_exact_mpfr(ref, idx, x);
        if (st != ER_OK) { mpfr_clear(x); return st; }
        mpfr_prec_round(x, mpfr_get_prec(x) + 50, MPFR_RNDN); /* exact: more bits */
        mpfr_mul_d(x, x, ref->sa, MPFR_RNDN);                  /* exact: 24 more bits each */
        mpfr_mul_d(x, x, ref->sb, MPFR_RNDN);
        e = mpfr_get_d(x, MPFR_RNDN);
        rd = er__round_mpfr(O, x, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        mpfr_clear(x);
    } else {
        er_dotsum one;
        const er_dotsum *sm = &one;
        if (ref->sums) sm = &ref->sums[idx];
        else ER_RETURN_IF_ERROR(er__matmul_elem_summary(ref, idx, &one)); /* a fast-path reference */
        er_rounded_of_sum(O, sm, &e, &rd);
    }
    if (exact) *exact = e;
    if (rounded) *rounded = rd;
    return ER_OK;
}

er_status er_ref_rounded(er_tensor *out, const er_ref *ref) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(ref, "ref");
    ER_RETURN_IF_ERROR(er__tensor_check(out, "out"));
    ER_RETURN_IF_ERROR(er_check_out_shape(ref, out));
    ER_RETURN_IF_ERROR(er_check_distinct(out));
    if (er_row_op(ref))
        return er__fail(ER_ERR_UNSUPPORTED, "er_ref_rounded does not give %s values in this version", er__op_name(ref));
    if (ref->fast && !ref->scaled) { /* a fast-path reference keeps no summaries: compute them all at once */
        er_dotsum *sums;
        ER_RETURN_IF_ERROR(er__matmul_all_sums(ref, &sums));
        for (int64_t idx = 0; idx < ref->n; idx++) {
            double e, v;
            er_rounded_of_sum(er__fmt(out->format), &sums[idx], &e, &v);
            er_store_value(out, idx, v, ER_OVERFLOW_DEFAULT);
        }
        free(sums);
        return ER_OK;
    }
    int64_t index[ER_MAX_DIMS] = {0};
    for (int64_t idx = 0; idx < ref->n; idx++) {
        double v;
        er_status st = er_ref_exact(ref, index, out->format, NULL, &v);
        if (st != ER_OK) return st;
        er_store_value(out, idx, v, ER_OVERFLOW_DEFAULT);
        for (int i = ref->ndim - 1; i >= 0; i--) { if (++index[i] < ref->shape[i]) break; index[i] = 0; }
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
    if (ref->op != ER_OP_MATMUL && ref->op != ER_OP_SUM)
        return er__fail(ER_ERR_UNSUPPORTED, "er_ref_exact_mpfr gives matmul and sum values (this is a %s)", er__op_name(ref));
    ER_RETURN_IF_ERROR(er__matmul_exact_mpfr(ref, idx, out));
    if (ref->scaled && mpfr_number_p(out)) {
        mpfr_prec_round(out, mpfr_get_prec(out) + 50, MPFR_RNDN); /* exact: more bits */
        mpfr_mul_d(out, out, ref->sa, MPFR_RNDN);
        mpfr_mul_d(out, out, ref->sb, MPFR_RNDN);
    }
    return ER_OK;
}

static er_status er_matmul_covers_run(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *C,
                                      const char *standard, const char *options) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(C, "C");
    er_standard std;
    ER_RETURN_IF_ERROR(er_standard_parse(&std, standard ? standard : "any_order", options));
    er_ref *ref;
    ER_RETURN_IF_ERROR(er_matmul(&ref, A, B));
    er_status st = er__covers_run(rep, ref, C, &std);
    er_ref_free(ref);
    return st;
}

er_status er_matmul_covers(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *C,
                           const char *standard, const char *options) {
    er_status st = er_matmul_covers_run(rep, A, B, C, standard, options);
    er__report_finish(rep, st);
    return st;
}

/* ---- the matmul reference on the GPU (docs/algorithms/fast-path.md, On the GPU) ---- */

#ifdef ER_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <exactref/cuda.h>
#include "cuda/devmm.h"

static int er_cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The whole computation on host copies (operands and output copied back): the path for what the GPU path does not
 * take. */
static er_status er_mm_covers_host(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *out,
                                   const er_standard *std, void *stream) {
    er_tensor hA, hB, hO;
    void *pa = NULL, *pb = NULL, *po = NULL;
    er_status st = er_tensor_from_device(&hA, &pa, A->format, A->ndim, A->shape, A->strides, A->data, stream);
    if (st == ER_OK) st = er_tensor_from_device(&hB, &pb, B->format, B->ndim, B->shape, B->strides, B->data, stream);
    if (st == ER_OK) st = er_tensor_from_device(&hO, &po, out->format, out->ndim, out->shape, out->strides, out->data, stream);
    er_ref *ref = NULL;
    if (st == ER_OK) st = er_matmul(&ref, &hA, &hB);
    if (st == ER_OK) st = er__covers_run(rep, ref, &hO, std);
    er_ref_free(ref);
    free(pa);
    free(pb);
    free(po);
    return st;
}

/* Device buffers of one call, freed together. */
enum { ER_DEVBUFS = 32 };
typedef struct er_devbufs { void *p[ER_DEVBUFS]; int n; } er_devbufs;
static void *er_dev_alloc(er_devbufs *b, size_t bytes, cudaStream_t s, cudaError_t *e) {
    void *p = NULL;
    if (*e == cudaSuccess && b->n == ER_DEVBUFS) *e = cudaErrorMemoryAllocation; /* never: the path holds fewer */
    if (*e == cudaSuccess) *e = cudaMallocAsync(&p, bytes ? bytes : 1, s);
    if (*e == cudaSuccess) b->p[b->n++] = p;
    return p;
}
#endif

#ifdef ER_HAVE_CUDA
/* One thread's share of the elements the GPU left: the exact engine on the gathered vectors, in element order. */
typedef struct er_devrest_job {
    er_covers_ctx *cx;
    const er_dot_env *env;
    const int64_t *idx;       /* the chunk's elements */
    const float *rows;        /* their vectors (exact as floats) */
    const double *ys;         /* their outputs */
    int64_t p0, p1, K;        /* this job's share of the chunk */
    er_status st;
} er_devrest_job;

static void *er_devrest_run(void *arg) {
    er_devrest_job *j = arg;
    int64_t K = j->K;
    double *va = malloc(sizeof(double) * (size_t)K), *vb = malloc(sizeof(double) * (size_t)K);
    j->st = va && vb ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate two vectors of %lld", (long long)K);
    for (int64_t p = j->p0; p < j->p1 && j->st == ER_OK; p++) {
        for (int64_t k = 0; k < K; k++) { va[k] = j->rows[2 * p * K + k]; vb[k] = j->rows[(2 * p + 1) * K + k]; }
        er_cset c;
        j->st = er_element_set(j->cx, j->env, j->idx[p], va, vb, K, 0, &c);
        if (j->st == ER_OK) er_sink_record(&j->cx->sk, j->idx[p], &c, j->ys[p]);
    }
    free(va);
    free(vb);
    if (j->p0 > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread (job 0 runs in the calling one) */
    return NULL;
}

/* The report's widest set from the job's one element, which the GPU decided: its set from the exact engine. */
static void er_devrest_widest(er_devrest_job *j, er_report *r) {
    int64_t K = j->K, idx = j->idx[0];
    double *va = malloc(sizeof(double) * (size_t)K), *vb = malloc(sizeof(double) * (size_t)K);
    j->st = va && vb ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate two vectors of %lld", (long long)K);
    if (j->st == ER_OK) {
        for (int64_t k = 0; k < K; k++) { va[k] = j->rows[k]; vb[k] = j->rows[K + k]; }
        er_cset c;
        j->st = er_element_set(j->cx, j->env, idx, va, vb, K, 0, &c);
        if (j->st == ER_OK) {
            er_fill_element(&r->widest, r, idx, (er_class)r->classes[idx], j->ys[0], &c, 0);
            r->widest_rel = er_set_rel(c.lo, c.hi);
            r->has_widest = 1;
        }
    }
    free(va);
    free(vb);
}
#endif

static er_status er_matmul_covers_device_run(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *out,
                                             const er_standard *std, void *stream);

er_status er_matmul_covers_device(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *out,
                                  const er_standard *std, void *stream) {
    er_status st = er_matmul_covers_device_run(rep, A, B, out, std, stream);
    er__report_finish(rep, st);
    return st;
}

static er_status er_matmul_covers_device_run(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *out,
                                             const er_standard *std, void *stream) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(A, "A");
    ER_CHECK_NULL(B, "B");
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(std, "standard");
    ER_RETURN_IF_ERROR(er__tensor_check(A, "A"));
    ER_RETURN_IF_ERROR(er__tensor_check(B, "B"));
#ifndef ER_HAVE_CUDA
    (void)stream;
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    er_ref *ref;
    ER_RETURN_IF_ERROR(er__matmul_shape_ref(&ref, A, B));
    er_status st = er_check_covers_args(ref, out, std);
    if (st != ER_OK) { er_ref_free(ref); return st; }
    const er_mm_plan *pl = &ref->plan;
    const er_fmt_info *fa = er__fmt(A->format), *fb = er__fmt(B->format), *fo = er__fmt(out->format);
    int any_set = std->order == ER_ORDER_ANY || (std->order == ER_ORDER_MMA && std->outer == ER_SUB_ANY);
    int loadable_a = fa->p <= 24 && (fa->bits <= 16 || A->format == ER_FP32), loadable_b = fb->p <= 24 && (fb->bits <= 16 || B->format == ER_FP32);
    int ok = any_set && std->compute == ER_FP32 && loadable_a && loadable_b && er_row_major(A) && er_row_major(B) &&
             er_row_major(out) && (fo->id == ER_FP32 || fo->id == ER_FP16 || fo->id == ER_BF16) && pl->K >= 1 && ref->n > 0 &&
             pl->M < INT32_MAX && pl->N < INT32_MAX && pl->K < INT32_MAX;
    if (!ok) { er_ref_free(ref); return er_mm_covers_host(rep, A, B, out, std, stream); }
    cudaStream_t s = (cudaStream_t)stream;
    int64_t na = pl->a_batches * pl->M * pl->K, nbv = pl->b_batches * pl->K * pl->N, n = ref->n, K = pl->K;
    er_devbufs db = {{0}, 0};
    cudaError_t e = cudaSuccess;
    int ec = 0, fallback = 0;
    /* the tables of 8- and 16-bit formats, and each output batch's operand batches */
    double *luts[2] = {NULL, NULL}, *dlut[2] = {NULL, NULL};
    int64_t *hia = malloc(sizeof(int64_t) * (size_t)pl->nbatch), *hib = malloc(sizeof(int64_t) * (size_t)pl->nbatch);
    if (!hia || !hib) st = er__fail(ER_ERR_NOMEM, "cannot allocate %lld batch numbers", (long long)pl->nbatch);
    for (int64_t bi = 0; st == ER_OK && bi < pl->nbatch; bi++) er__matmul_batch_of(ref, bi, &hia[bi], &hib[bi]);
    const er_fmt_info *fis[2] = {fa, fb};
    for (int o = 0; o < 2 && st == ER_OK; o++) {
        if (fis[o]->bits > 16) continue;
        size_t cnt = (size_t)1 << fis[o]->bits;
        luts[o] = malloc(sizeof(double) * cnt);
        if (!luts[o]) { st = er__fail(ER_ERR_NOMEM, "cannot allocate a decoding table"); break; }
        for (size_t i = 0; i < cnt; i++) luts[o][i] = er__decode(fis[o], i);
        dlut[o] = er_dev_alloc(&db, sizeof(double) * cnt, s, &e);
        if (e == cudaSuccess) e = cudaMemcpyAsync(dlut[o], luts[o], sizeof(double) * cnt, cudaMemcpyHostToDevice, s);
    }
    /* decode; the statistics decide whether the GPU path applies (no NaN or infinity) */
    double *Ad = er_dev_alloc(&db, sizeof(double) * (size_t)na, s, &e), *Bd = er_dev_alloc(&db, sizeof(double) * (size_t)nbv, s, &e);
    er_dev_stats *dst = er_dev_alloc(&db, 2 * sizeof(er_dev_stats), s, &e), hst[2];
    int64_t *dia = er_dev_alloc(&db, sizeof(int64_t) * (size_t)pl->nbatch, s, &e), *dib = er_dev_alloc(&db, sizeof(int64_t) * (size_t)pl->nbatch, s, &e);
    if (st == ER_OK && e == cudaSuccess) {
        e = cudaMemcpyAsync(dia, hia, sizeof(int64_t) * (size_t)pl->nbatch, cudaMemcpyHostToDevice, s);
        if (e == cudaSuccess) e = cudaMemcpyAsync(dib, hib, sizeof(int64_t) * (size_t)pl->nbatch, cudaMemcpyHostToDevice, s);
        if (e == cudaSuccess) ec = er__devmm_stats_init(dst, s);
        if (!ec) ec = er__devmm_stats_init(dst + 1, s);
        if (!ec) ec = er__devmm_decode(A->data, fa->bits, dlut[0], fa->p, na, Ad, dst, s);
        if (!ec) ec = er__devmm_decode(B->data, fb->bits, dlut[1], fb->p, nbv, Bd, dst + 1, s);
        if (ec) e = (cudaError_t)ec;
        if (e == cudaSuccess) e = cudaMemcpyAsync(hst, dst, sizeof hst, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        fallback = e == cudaSuccess && (hst[0].nonfinite || hst[1].nonfinite); /* NaN or inf: the exact engine's */
    }
    /* norms, the GEMM, the decisions */
    er_report r;
    memset(&r, 0, sizeof r);
    unsigned long long hcnt[4] = {0, 0, 0, 0}, hw[2] = {0, ULLONG_MAX}; /* hw: the widest decided set's width bits and element */
    int64_t *dpend = NULL;
    double *Bt = NULL; /* B transposed: its columns contiguous */
    if (st == ER_OK && e == cudaSuccess && !fallback) {
        double *S = er_dev_alloc(&db, sizeof(double) * (size_t)n, s, &e);
        double *an = er_dev_alloc(&db, sizeof(double) * (size_t)(pl->a_batches * pl->M), s, &e);
        double *bnv = er_dev_alloc(&db, sizeof(double) * (size_t)(pl->b_batches * pl->N), s, &e);
        Bt = er_dev_alloc(&db, sizeof(double) * (size_t)nbv, s, &e);
        if (e == cudaSuccess) ec = er__devmm_transpose(Bd, pl->b_batches, K, pl->N, Bt, s);
        if (!ec && e == cudaSuccess) ec = er__devmm_norms(Ad, pl->a_batches * pl->M, Bt, pl->b_batches * pl->N, K, an, bnv, s);
        if (ec) e = (cudaError_t)ec;
        if (e == cudaSuccess) {
            int g = er__devmm_dgemm(Ad, Bd, S, hia, hib, pl->nbatch, pl->M, pl->N, K, s);
            if (g == -1) fallback = 1; /* no cuBLAS: the host path */
            else if (g) st = er__fail(ER_ERR_DEVICE, "cuBLAS's dgemm failed on %lld x %lld x %lld", (long long)pl->M, (long long)K, (long long)pl->N);
        }
        if (st == ER_OK && e == cudaSuccess && !fallback) st = er_report_begin(&r, er__op_name(ref), "", ref->ndim, ref->shape, out, std);
        if (st == ER_OK && e == cudaSuccess && !fallback) {
            er_covers_ctx cx0;
            st = er_ctx_init(&cx0, ref, out, std); /* the constants (out's format and layout only; its data stay on the GPU) */
            er_fast_consts fc;
            if (st == ER_OK) { er_fast_consts_init(&fc, &cx0); er_ctx_clear(&cx0); }
            uint8_t *dcl = er_dev_alloc(&db, (size_t)n, s, &e);
            unsigned long long *dcnt = er_dev_alloc(&db, 4 * sizeof(unsigned long long), s, &e);
            int64_t *dcand = er_dev_alloc(&db, sizeof(int64_t) * (size_t)n, s, &e);
            dpend = er_dev_alloc(&db, sizeof(int64_t) * (size_t)n, s, &e);
            if (st == ER_OK && e == cudaSuccess) e = cudaMemsetAsync(dcnt, 0, 4 * sizeof(unsigned long long), s);
            if (st == ER_OK && e == cudaSuccess)
                ec = er__devmm_decide(out->data, S, Ad, Bt, an, bnv, dia, dib, pl->nbatch, pl->M, pl->N, K, fc, dcl, dcnt, dcand, dpend, s);
            if (ec) e = (cudaError_t)ec;
            /* the widest set among the decided elements, with P = fl64(|A| |B|) (fast-path.md, On the GPU) */
            double *Aabs = er_dev_alloc(&db, sizeof(double) * (size_t)na, s, &e), *Babs = er_dev_alloc(&db, sizeof(double) * (size_t)nbv, s, &e);
            double *Pd = er_dev_alloc(&db, sizeof(double) * (size_t)n, s, &e), *Rd = er_dev_alloc(&db, sizeof(double) * (size_t)n, s, &e);
            unsigned long long *dw = er_dev_alloc(&db, sizeof hw, s, &e);
            if (st == ER_OK && e == cudaSuccess) e = cudaMemcpyAsync(dw, hw, sizeof hw, cudaMemcpyHostToDevice, s);
            if (st == ER_OK && e == cudaSuccess) ec = er__devmm_abs(Ad, na, Aabs, s);
            if (!ec && st == ER_OK && e == cudaSuccess) ec = er__devmm_abs(Bd, nbv, Babs, s);
            if (!ec && st == ER_OK && e == cudaSuccess && er__devmm_dgemm(Aabs, Babs, Pd, hia, hib, pl->nbatch, pl->M, pl->N, K, s))
                st = er__fail(ER_ERR_DEVICE, "cuBLAS's dgemm failed on %lld x %lld x %lld", (long long)pl->M, (long long)K, (long long)pl->N);
            if (!ec && st == ER_OK && e == cudaSuccess) ec = er__devmm_widest(S, Pd, n, fc, dcl, dcnt, dpend, Rd, dw, s);
            if (ec) e = (cudaError_t)ec;
            if (st == ER_OK && e == cudaSuccess) e = cudaMemcpyAsync(hw, dw, sizeof hw, cudaMemcpyDeviceToHost, s);
            /* the classes straight into the report's array, registered with CUDA for the copy when that works */
            int reg = st == ER_OK && e == cudaSuccess && cudaHostRegister(r.classes, (size_t)n, cudaHostRegisterDefault) == cudaSuccess;
            if (!reg) (void)cudaGetLastError();
            if (st == ER_OK && e == cudaSuccess) e = cudaMemcpyAsync(r.classes, dcl, (size_t)n, cudaMemcpyDeviceToHost, s);
            if (st == ER_OK && e == cudaSuccess) e = cudaStreamSynchronize(s);
            if (reg) cudaHostUnregister(r.classes);
            if (st == ER_OK && e == cudaSuccess) e = cudaMemcpyAsync(hcnt, dcnt, sizeof hcnt, cudaMemcpyDeviceToHost, s);
            if (st == ER_OK && e == cudaSuccess) e = cudaStreamSynchronize(s);
        }
    }
    /* the elements left, in element order, in chunks: their vectors gathered on the GPU, the exact engine on the host's
     * threads, each on a contiguous share */
    int64_t np = (int64_t)hcnt[3];
    if (st == ER_OK && e == cudaSuccess && !fallback) {
        r.counts[ER_CLASS_EXACT] = (int64_t)hcnt[0];
        r.counts[ER_CLASS_COVERED] = (int64_t)hcnt[1];
        int64_t *hp = malloc(sizeof(int64_t) * (size_t)(np ? np : 1));
        int64_t chunk = (INT64_C(1) << 21) / K > 0 ? (INT64_C(1) << 21) / K : 1; /* 16 MiB of vectors at a time */
        if (chunk > np) chunk = np > 0 ? np : 1;
        float *rows = NULL;
        double *ys = malloc(sizeof(double) * (size_t)chunk);
        if (np && e == cudaSuccess) e = cudaMallocHost((void **)&rows, sizeof(float) * (size_t)(2 * chunk * K)); /* pinned: full-speed copies */
        float *drows = er_dev_alloc(&db, sizeof(float) * (size_t)(2 * chunk * K), s, &e);
        double *dys = er_dev_alloc(&db, sizeof(double) * (size_t)chunk, s, &e);
        if (!hp || !ys) st = er__fail(ER_ERR_NOMEM, "cannot allocate the vectors of %lld elements", (long long)chunk);
        if (st == ER_OK && e == cudaSuccess && np) {
            e = cudaMemcpyAsync(hp, dpend, sizeof(int64_t) * (size_t)np, cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaStreamSynchronize(s);
            qsort(hp, (size_t)np, sizeof(int64_t), er_cmp_i64);
            if (e == cudaSuccess) e = cudaMemcpyAsync(dpend, hp, sizeof(int64_t) * (size_t)np, cudaMemcpyHostToDevice, s);
        }
        er__matmul_env(ref, -1, &(er_dense_stats){hst[0].emin_lsb, hst[0].emin, hst[0].emax, hst[0].qmin, hst[0].any_nonzero},
                       &(er_dense_stats){hst[1].emin_lsb, hst[1].emin, hst[1].emax, hst[1].qmin, hst[1].any_nonzero}, &ref->env);
        double worst_dist = -1;
        for (int64_t c0 = 0; c0 < np && st == ER_OK && e == cudaSuccess; c0 += chunk) {
            int64_t cn = np - c0 < chunk ? np - c0 : chunk;
            ec = er__devmm_gather(dpend + c0, cn, out->data, fo->id == ER_FP32 ? 0 : fo->id == ER_FP16 ? 1 : 2, Ad, Bt, dia, dib, pl->M,
                                  pl->N, K, drows, dys, s);
            if (ec) { e = (cudaError_t)ec; break; }
            e = cudaMemcpyAsync(rows, drows, sizeof(float) * (size_t)(2 * cn * K), cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaMemcpyAsync(ys, dys, sizeof(double) * (size_t)cn, cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaStreamSynchronize(s);
            if (e != cudaSuccess) break;
            int nt = er__num_threads(cn * K * 16);
            if (nt > cn) nt = (int)cn;
            er_covers_ctx cx[ER_MAX_THREADS];
            er_report part[ER_MAX_THREADS];
            er_devrest_job jobs[ER_MAX_THREADS];
            int made = 0;
            for (int t = 0; t < nt && st == ER_OK; t++, made++) {
                st = er_ctx_init(&cx[t], ref, out, std);
                if (st != ER_OK) break;
                er_part_begin(&part[t], &r, &cx[t]);
                jobs[t] = (er_devrest_job){&cx[t], &ref->env, hp + c0, rows, ys, cn * t / nt, cn * (t + 1) / nt, K, ER_OK};
            }
            if (st == ER_OK) er__run_jobs(jobs, sizeof jobs[0], nt, er_devrest_run);
            for (int t = 0; t < made; t++) {
                if (st == ER_OK) st = jobs[t].st;
                if (st == ER_OK) er_merge(&r, &worst_dist, &part[t], cx[t].sk.worst_dist);
                er_ctx_clear(&cx[t]);
            }
        }
        /* the widest set the GPU decided, where it is wider than (or as wide as and before) the exact engine's: its
         * entry from the exact engine */
        double grel;
        memcpy(&grel, &hw[0], sizeof grel);
        int64_t gidx = (int64_t)hw[1];
        if (st == ER_OK && e == cudaSuccess && hw[0] && hw[1] != ULLONG_MAX &&
            (!r.has_widest || grel > r.widest_rel || (grel == r.widest_rel && gidx < r.widest.index))) {
            float *one = malloc(sizeof(float) * (size_t)(2 * K));
            double y;
            e = cudaMemcpyAsync(dpend, &gidx, sizeof gidx, cudaMemcpyHostToDevice, s);
            if (e == cudaSuccess) e = (cudaError_t)er__devmm_gather(dpend, 1, out->data, fo->id == ER_FP32 ? 0 : fo->id == ER_FP16 ? 1 : 2,
                                                                    Ad, Bt, dia, dib, pl->M, pl->N, K, drows, dys, s);
            if (e == cudaSuccess && one) e = cudaMemcpyAsync(one, drows, sizeof(float) * (size_t)(2 * K), cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaMemcpyAsync(&y, dys, sizeof y, cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaStreamSynchronize(s);
            if (!one) st = er__fail(ER_ERR_NOMEM, "cannot allocate two vectors of %lld", (long long)K);
            er_covers_ctx cw;
            if (st == ER_OK && e == cudaSuccess) st = er_ctx_init(&cw, ref, out, std);
            if (st == ER_OK && e == cudaSuccess) {
                er_devrest_job job = {&cw, &ref->env, &gidx, one, &y, 0, 1, K, ER_OK};
                er_devrest_widest(&job, &r);
                st = job.st;
                er_ctx_clear(&cw);
            }
            free(one);
        }
        free(hp);
        if (rows) cudaFreeHost(rows);
        free(ys);
    }
    for (int i = 0; i < db.n; i++) cudaFreeAsync(db.p[i], s);
    cudaError_t e2 = cudaStreamSynchronize(s);
    if (e == cudaSuccess) e = e2;
    free(hia);
    free(hib);
    free(luts[0]);
    free(luts[1]);
    er_ref_free(ref);
    if (st == ER_OK && e != cudaSuccess)
        st = er__fail(ER_ERR_DEVICE, "a CUDA call of the GPU matmul path failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    if (st != ER_OK || fallback) {
        free(r.classes);
        if (st != ER_OK) return st;
        return er_mm_covers_host(rep, A, B, out, std, stream);
    }
    *rep = r;
    return ER_OK;
#endif
}
