/* dotmod.c: the op module of matmul, sum, mean and max (src/ops/module.h; docs/design.md): every op whose element is
 * a reduction of products, walked by the matmul engine (src/ops/matmul.c). Their sets under any order
 * (docs/algorithms/any-order.md), fixed orders (orders.md) and the tensor-core models (hardware/mma.md), from the
 * cached exact summaries or the operands; the BLAS fast path's decisions (fast-path.md); the emulation of fully fixed
 * standards; the exact values. */
#include <limits.h>
#include <math.h>
#include <stdint.h> /* before mpfr.h: enables the intmax_t functions */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <mpfr.h>
#include "format/format.h"
#include "standard/standard.h"
#include "ops/modkit.h"
#include "ops/dotmod.h"
#include "ops/fastdecide.h"
#include "enclose/anyorder.h"
#include "enclose/compsum.h"
#include "enclose/dotorder.h"
#include "enclose/ival.h"
#include "enclose/mma.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"



/* The exact result of a summarised reduction, rounded to double and correctly rounded to the output format. */
static void er_exact_of_sum(const er_dot_ctx *cx, const er_dotsum *sm, double *exact, double *rounded) {
    if ((sm->special & ER_SPECIAL_NAN) || ((sm->special & ER_SPECIAL_PINF) && (sm->special & ER_SPECIAL_NINF))) {
        *exact = *rounded = NAN;
    } else if (sm->special & (ER_SPECIAL_PINF | ER_SPECIAL_NINF)) {
        *exact = sm->special & ER_SPECIAL_PINF ? INFINITY : -INFINITY;
        *rounded = er__round_double(cx->O, *exact, ER_ROUND_NEAREST, cx->ov_out);
    } else {
        *exact =
            er__round_core(er__fmt(ER_FP64), sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        *rounded = er__round_core(cx->O, sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, cx->ov_out);
    }
}

/* The output set from the compute-format set v, with the exact result (for any_order it joins the set). */
static void er_cset_build(er_cset *c, const er_dot_ctx *cx, const er_cval *v, double exact, double rounded) {
    er__cset_build(c, cx->O, cx->ov_out, cx->any, v, exact, rounded);
}

/* mean: the sum's set v (values of F) divided by n, by fl(s / n), fl(s * fl(1/n)) or either, each monotone in
 * s (docs/algorithms/reductions.md). */
static void er_mean_cval(const er_dot_ctx *cx, er_cval *v, int64_t n) {
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
        double l = er__round_prod(F, v->lo, v->lo < 0 ? rh : rl, 1, lo_m),
               h = er__round_prod(F, v->hi, v->hi < 0 ? rl : rh, 1, hi_m);
        if (l < lo) lo = l;
        if (h > hi) hi = h;
    }
    v->lo = lo;
    v->hi = hi;
}

/* The exact mean S/n correctly rounded; S comes from the summary, recomputed exactly where its 64 bits do not
 * decide the rounding. */
static void er_exact_of_mean(const er_dot_ctx *cx, const er_dotsum *sm, int64_t idx, double *exact, double *rounded) {
    int64_t n = er__dot(cx->ref)->K;
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
static void er_scale_one(const er_dot_ctx *cx, int64_t idx, double acc, double out[2]) {
    const er_fmt_info *F = cx->F;
    double sa, sb;
    er__dot_scales(cx->ref, idx, &sa, &sb);
    out[0] = er__round_prod(F, er__round_prod(F, acc, sa, 1, ER_ROUND_NEAREST), sb, 1, ER_ROUND_NEAREST);
    out[1] = er__round_prod(F, acc, er__round_prod(F, sa, sb, 1, ER_ROUND_NEAREST), 1, ER_ROUND_NEAREST);
}

static void er_scale_cval(const er_dot_ctx *cx, int64_t idx, er_cval *v) {
    if (v->nan_req) return; /* NaN times a scale is NaN */
    double lo = INFINITY, hi = -INFINITY, r[2], ends[4];
    int nan = v->nan, ne = 0, any = 0;
    if (v->lo <= v->hi) { ends[ne++] = v->lo; ends[ne++] = v->hi; }
    if (v->pinf) ends[ne++] = INFINITY;
    if (v->ninf) ends[ne++] = -INFINITY;
    for (int i = 0; i < ne; i++) {
        er_scale_one(cx, idx, ends[i], r);
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
static void er_exact_of_scaled(const er_dot_ctx *cx, const er_dotsum *sm, int64_t idx, double *exact, double *rounded) {
    double e0, r0, sa, sb;
    er__dot_scales(cx->ref, idx, &sa, &sb);
    er_exact_of_sum(cx, sm, &e0, &r0);
    if (!isfinite(e0)) {
        *exact = e0 * sa * sb;
        *rounded = er__round_double(cx->O, *exact, ER_ROUND_NEAREST, cx->ov_out);
        return;
    }
    mpfr_t s, b;
    mpfr_inits2(200, s, b, (mpfr_ptr)0);
    double rr[2];
    for (int up = 0; up < 2; up++) {
        mpfr_set_uj_2exp(s, sm->m, sm->e, MPFR_RNDN);
        if (up && sm->sticky) { mpfr_set_ui_2exp(b, 1, sm->e, MPFR_RNDN); mpfr_add(s, s, b, MPFR_RNDN); }
        if (sm->neg) mpfr_neg(s, s, MPFR_RNDN);
        mpfr_mul_d(s, s, sa, MPFR_RNDN); /* exact: 65 + 24 bits */
        mpfr_mul_d(s, s, sb, MPFR_RNDN);
        rr[up] = er__round_mpfr(cx->O, s, ER_ROUND_NEAREST, cx->ov_out);
        if (!up) *exact = mpfr_get_d(s, MPFR_RNDN);
    }
    if (rr[0] != rr[1]) {
        mpfr_t x;
        mpfr_init2(x, 2);
        if (er__matmul_exact_mpfr(cx->ref, idx, x) == ER_OK) {
            mpfr_set_prec(s, mpfr_get_prec(x) + 64);
            mpfr_mul_d(s, x, sa, MPFR_RNDN);
            mpfr_mul_d(s, s, sb, MPFR_RNDN);
            rr[0] = er__round_mpfr(cx->O, s, ER_ROUND_NEAREST, cx->ov_out);
        }
        mpfr_clear(x);
    }
    *rounded = rr[0];
    mpfr_clears(s, b, (mpfr_ptr)0);
}

/* The set and exact result of one element from its summary and, for fixed orders, its accumulator set v. */
static void er_finish(er_dot_ctx *cx, er_cset *c, er_cval *v, const er_dotsum *sm, int64_t idx) {
    double exact, rounded;
    if (cx->ref->mod == &er__mean_module) {
        er_mean_cval(cx, v, er__dot(cx->ref)->K);
        er_exact_of_mean(cx, sm, idx, &exact, &rounded);
    } else if (er__dot(cx->ref)->scaled) {
        er_scale_cval(cx, idx, v);
        er_exact_of_scaled(cx, sm, idx, &exact, &rounded);
    } else {
        er_exact_of_sum(cx, sm, &exact, &rounded);
    }
    er_cset_build(c, cx, v, exact, rounded);
}

/* max: exact, so its set is the one value (NaN when an element is NaN), converted to the output format. */
static void er_max_set(er_dot_ctx *cx, er_cset *c, const double *a, int64_t K) {
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

er_status er__dot_ctx_init(er_dot_ctx *cx, const er_ref *ref, const er_tensor *out, const er_standard *std) {
    memset(cx, 0, sizeof *cx);
    cx->ref = ref;
    cx->std = std;
    cx->out = out;
    cx->out_contig = er__row_major(out);
    cx->any = std->order == ER_ORDER_ANY || (std->order == ER_ORDER_MMA && std->outer == ER_SUB_ANY);
    cx->F = er__fmt(std->compute == ER_TF32 ? ER_FP32 : std->compute);
    cx->O = er__fmt(out->format);
    cx->ov_out = er__overflow_rule(cx->O, std->out_overflow);
    int conv = std->compute == ER_TF32 ? (int)std->tf32 : -1;
    er__edge_scratch_init(&cx->w);
    if (ref->mod == &er__softmax_module || ref->mod == &er__log_softmax_module || ref->mod == &er__rmsnorm_module ||
        ref->mod == &er__layernorm_module)
        return ER_OK;
    const er_fmt_info *fa = er__fmt(er__operand_format(er__dot(ref)->A.format, conv));
    const er_fmt_info *fb =
        er__dot(ref)->b_is_one ? er__fmt_one() : er__fmt(er__operand_format(er__dot(ref)->B.format, conv));
    if (std->order == ER_ORDER_MMA) {
        er_status st = er__mma_params(std->mma_arch, fa, fb, std->compute == ER_FP16, &cx->mma);
        if (st != ER_OK) { er__edge_scratch_clear(&cx->w); return st; }
        int x3 = std->compute == ER_TF32 && std->tf32 == ER_TF32_X3;
        /* tf32x3: three chains of blocks, each dot's K padded to whole blocks */
        int64_t Kb = x3 ? 3 * cx->mma.k * ((er__dot(ref)->K + cx->mma.k - 1) / cx->mma.k) : er__dot(ref)->K;
        if (cx->any) {
            er__mma_bound(&cx->bd, &cx->mma, Kb, std->promote);
            if (x3) er_x3_widen(&cx->bd);
        } else if (cx->mma.fp8) {
            /* Triton's fp8 tl.dot on the H200 is not this chain (docs/hardware/mma.md): no fixed fp8 chain is
             * claimed */
            er__edge_scratch_clear(&cx->w);
            return er__fail(ER_ERR_UNSUPPORTED,
                            "mma:sm%d has no established fixed chain for fp8 operands; use outer=any "
                            "(with promote=N where the kernel adds into fp32 every N blocks)",
                            std->mma_arch);
        } else cx->mma_chain = 1;
    } else if (cx->any) {
        int x3 = std->compute == ER_TF32 && std->tf32 == ER_TF32_X3;
        er_status st = er__anyorder_bound_depth(&cx->bd, fa, fb, cx->F, x3 ? 3 * er__dot(ref)->K : er__dot(ref)->K,
                                                std->depth, std->rounding == ER_RND_FAITHFUL);
        if (st != ER_OK) { er__edge_scratch_clear(&cx->w); return st; }
        if (x3) er_x3_widen(&cx->bd);
    } else {
        if (std->order == ER_ORDER_TRITON && er__dot(ref)->K > std->triton_block) {
            er__edge_scratch_clear(&cx->w);
            return er__fail(ER_ERR_STANDARD, "triton:%lld sums one block; K = %lld is longer",
                            (long long)std->triton_block, (long long)er__dot(ref)->K);
        }
        er__order_plan_init(&cx->plan, std, fa, fb);
        cx->have_plan = 1;
        if (std->order == ER_ORDER_TREE) {
            er_status st = er__tree_parse(std->tree, &cx->tree, NULL);
            if (st == ER_OK && cx->tree.leaves != er__dot(ref)->K)
                st = er__fail(ER_ERR_STANDARD, "the tree has %lld elements; the reduction has K = %lld",
                              (long long)cx->tree.leaves, (long long)er__dot(ref)->K);
            if (st == ER_OK) st = er__order_plan_set_tree(&cx->plan, cx->tree.post, cx->tree.npost, cx->tree.leaves);
            if (st != ER_OK) { er__dot_ctx_clear(cx); return st; }
        }
    }
    return ER_OK;
}

void er__dot_ctx_clear(er_dot_ctx *cx) {
    er__edge_scratch_clear(&cx->w);
    if (cx->have_plan) er__order_plan_clear(&cx->plan);
    er__tree_free(&cx->tree);
    if (cx->have_acc) er__acc_free(&cx->acc);
}

static void er_record(er_dot_ctx *cx, int64_t idx, const er_cset *c) { er__sink_put(cx->sk, idx, c); }

/* The output set of one element from its operand vectors (fixed orders, or any order over converted
 * operands). */
er_status er__dot_element_set(er_dot_ctx *cx, const er_dot_env *env, int64_t idx, const double *a,
                                const double *b, int64_t K, int special, er_cset *c) {
    if (cx->ref->mod == &er__max_module) { er_max_set(cx, c, a, K); return ER_OK; }
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
    er_dot_ctx *cx = vcx;
    er_cset c;
    ER_RETURN_IF_ERROR(er__dot_element_set(cx, env, idx, a, b, K, special, &c));
    if (cx->keep_pass == 1) { cx->keep[idx] = c; return ER_OK; }
    if (cx->keep_pass == 2) er_cset_join(&c, &cx->keep[idx]);
    er_record(cx, idx, &c);
    return ER_OK;
}

/* The cached any-order path over a range of elements (one thread's share). */
typedef struct er_range_job { er_dot_ctx *cx; int64_t begin, end; er_status st; } er_range_job;

static void *er_cached_range(void *arg) {
    er_range_job *j = arg;
    er_dot_ctx *cx = j->cx;
    const er_ref *ref = cx->ref;
    for (int64_t idx = j->begin; idx < j->end; idx++) {
        if ((idx & 4095) == 0) {
            if (er__cancelled()) {
                j->st = ER_ERR_CANCELLED;
                break;
            }
            if (idx > j->begin) er__progress_step(4096);
        }
        er_cval v;
        er_cset c;
        er__anyorder_cval(&v, &cx->bd, cx->F, &er__dot(ref)->sums[idx], &cx->w);
        er_finish(cx, &c, &v, &er__dot(ref)->sums[idx], idx);
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
void er__dot_fast_consts(er_fast_consts *fc, const er_dot_ctx *cx) {
    const er_anyorder_bound *bd = &cx->bd;
    double K = (double)er__dot(cx->ref)->K;
    fc->gK = K * 0x1p-52 * ER_FAST_UP;                 /* (1 + 2^-53)^K - 1 <= K 2^-52: fp64 sums of exact products */
    double eng = (1.0 + 4.0 * K * 0x1p-52) * ER_FAST_UP; /* the engine's bound of sum |p| is within this factor of P */
    fc->c1lo = bd->c1 * ER_FAST_DN;
    fc->c1hi = bd->c1 * eng * ER_FAST_UP;
    fc->c2lo = bd->c2 * ER_FAST_DN;
    fc->c2hi = bd->c2 * ER_FAST_UP;
    fc->g = bd->g * ER_FAST_UP;
    fc->lim = fmin(bd->thr, cx->O->max) / 4;
    /* Lemma F1: RN_O(RU_F(t)), RN_O(RD_F(t)) and RN_O(t) are within eps |t| + eta of t (no overflow below lim) */
    int p = cx->F->p < cx->O->p ? cx->F->p : cx->O->p;
    fc->eps = ldexp(1.0, 2 - p) + 0x1p-120;
    fc->eta = 2.0 * (cx->F->min_sub + cx->O->min_sub);
    er_format o = cx->O->id;
    fc->out_fmt = cx->F->id != ER_FP32 ? -1 : o == ER_FP32 ? 0 : o == ER_FP16 ? 1 : o == ER_BF16 ? 2 : -1;
}

/* The lower edge RN_O(RU_F(t)) (upper = 0) or the upper edge RN_O(RD_F(t)) of a set through the compute format F and
 * the output format O, for t below the overflow limit. A float f is RU_F(t) when it is (float)t, unless that is
 * below t. */
ER_ALWAYS_INLINE double er_fast_edge_f32(double t, int upper) {
    /* without a branch on the rounding's direction (taken half of the time): one step toward t where the float
     * nearest t is on the wrong side. Up from a float of sign bit 0 (+0 included: t > 0 rounds to +0, never to -0)
     * is the next encoding, up from a negative one the previous; down, the reverse (t < 0 rounds to -0). */
    float f = (float)t;
    uint32_t u, step = upper ? (double)f > t : (double)f < t;
    memcpy(&u, &f, 4);
    u += step * (1u - 2u * ((u >> 31) ^ (uint32_t)upper));
    memcpy(&f, &u, 4);
    return f;
}

static inline double er_fast_edge(const er_fast_consts *fc, const er_dot_ctx *cx, double t, int upper) {
    if (fc->out_fmt == 0) return er_fast_edge_f32(t, upper);
    double e = er__round_double(cx->F, t, upper ? ER_ROUND_DOWN : ER_ROUND_UP, ER_OVERFLOW_IEEE);
    return er__round_double(cx->O, e, ER_ROUND_NEAREST, cx->ov_out);
}

/* RN_O(t) for t below the overflow limit. */
static inline double er_fast_rn(const er_fast_consts *fc, const er_dot_ctx *cx, double t) {
    return fc->out_fmt == 0 ? (double)(float)t : er__round_double(cx->O, t, ER_ROUND_NEAREST, cx->ov_out);
}

/* The class of output y from S_hat and P in [Plo, Phi], or ER_PENDING when some S or bound the exact engine could
 * hold gives another class (or overflow is possible). */
static inline int er_fast_decide(const er_fast_consts *fc, const er_dot_ctx *cx, double y, const er_fast_bracket *b) {
    if (fc->out_fmt == 0)
        return er_fast_class(y, b->tlo, b->thi, (float)b->slo, (float)b->shi); /* no overflow below lim */
    return er_fast_class(y, er_fast_edge(fc, cx, b->tlo, 0), er_fast_edge(fc, cx, b->thi, 1),
                         er_fast_rn(fc, cx, b->slo), er_fast_rn(fc, cx, b->shi));
}

/* The engine's set of the element whose bracket is b, where b decides it (er_fast_join): its finite ends lo, hi. */
static inline int er_fast_set(const er_fast_consts *fc, const er_dot_ctx *cx, const er_fast_bracket *b, double r1,
                              double r2, double *lo, double *hi) {
    double l = er_fast_edge(fc, cx, b->ulo, 0), h = er_fast_edge(fc, cx, b->uhi, 1);
    /* for fp32 in and out, RU_F(tlo) = l = RU_F(ulo) exactly when tlo <= l (ulo <= tlo), and RD_F(thi) = h when
     * thi >= h */
    int same = fc->out_fmt == 0 ? b->tlo <= l && b->thi >= h
                                : l == er_fast_edge(fc, cx, b->tlo, 0) && h == er_fast_edge(fc, cx, b->thi, 1);
    return er_fast_join(same, l, h, r1, r2, lo, hi);
}

/* Whether the set of the element whose bracket is b may be wider, relative to its size, than best: false when an
 * upper bound of its er_set_rel is at most best (er_fast_rel_ub). lo = min(edge, r) lies in [min(E_lo(ulo), r1),
 * min(E_lo(tlo), r2)] and hi in [max(E_hi(thi), r1), max(E_hi(uhi), r2)]. First a cheaper test on the outer ends
 * (for fp32 in and out ulo <= RU_F(ulo) and RD_F(uhi) <= uhi), then these. */
static inline int er_fast_may_be_widest(const er_fast_consts *fc, const er_dot_ctx *cx, const er_fast_bracket *b,
                                        double r1, double r2, double best) {
    if (best < 0) return 1;
    double l = fc->out_fmt == 0 ? b->ulo : er_fast_edge(fc, cx, b->ulo, 0),
           h = fc->out_fmt == 0 ? b->uhi : er_fast_edge(fc, cx, b->uhi, 1);
    double L1 = l < r1 ? l : r1, H2 = h > r2 ? h : r2, al = fabs(L1), ah = fabs(H2);
    /* without a division nor a branch on the sign: rel <= w / m, w = H2 - L1, m = min(|L1|, |H2|) where [L1, H2]
     * lies on one side of 0 (m bounds max(|lo|, |hi|) below); on both sides, w >= 2 m while rel <= 2. If
     * fl(w / m) >= best, then w >= best m (1 - 2^-53) > fl(fl(best (1 - 2^-50)) m). */
    if (H2 - L1 < best * (1.0 - 0x1p-50) * (al < ah ? al : ah)) return 0;
    /* the sets that may reach 0, which the test above cannot rule out: Lemma F1 */
    if (er_fast_rel_ub_shared(fc, b) <= best) return 0;
    double lt = er_fast_edge(fc, cx, b->tlo, 0), ht = er_fast_edge(fc, cx, b->thi, 1);
    /* strictly wider only: a thread meets its elements in increasing order, so one of equal width comes after the
     * widest so far and never replaces it (the earliest of equals is kept) */
    return er_fast_rel_ub(L1, lt < r2 ? lt : r2, ht > r1 ? ht : r1, H2) > best;
}

/* Whether output y, finite, lies outside the engine's set of the element whose bracket is b, r1 = RN_O(slo) and
 * r2 = RN_O(shi) (fast-path.md, Lemma F3): below L1 = min(E_lo(ulo), r1) or above H2 = max(E_hi(uhi), r2). Then
 * the distance er_classify reports, fl(|y - e|) / ulp_O(e) at the set's nearer end e, lies in [*dlo, *dhi]. */
static inline int er_fast_outside(const er_fast_consts *fc, const er_dot_ctx *cx, double y, const er_fast_bracket *b,
                                  double r1, double r2, double *dlo, double *dhi) {
    double l = er_fast_edge(fc, cx, b->ulo, 0), h = er_fast_edge(fc, cx, b->uhi, 1);
    double L1 = l < r1 ? l : r1, H2 = h > r2 ? h : r2, near, far, mlo, mhi;
    if (y >= L1 && y <= H2) return 0; /* the common case, before the inner ends' roundings */
    double lt = er_fast_edge(fc, cx, b->tlo, 0), ht = er_fast_edge(fc, cx, b->thi, 1);
    er_fast_out_ends(y, L1, lt < r2 ? lt : r2, ht > r1 ? ht : r1, H2, &near, &far, &mlo, &mhi);
    *dlo = fabs(y - near) / er__ulp(cx->O, mhi);
    *dhi = fabs(y - far) / er__ulp(cx->O, mlo);
    return 1;
}

/* The factors that bracket P = sum |a_k b_k|: P_f (1 - 2 K 2^-53) <= P <= P_f (1 + 4 K 2^-53) for P_f the floats' dot
 * product in double (Lemma D4), and (1 - gK) P_hat <= P <= (1 + 2 gK) P_hat for P_hat = fl64(|A| |B|) (fast-path.md,
 * The sets), each moved outward. */
typedef struct er_p_factors { double f_lo, f_hi, g_lo, g_hi; } er_p_factors;
static er_p_factors er_p_factors_of(const er_fast_consts *fc, int64_t K) {
    double Kd = (double)K;
    return (er_p_factors){(1.0 - 2.0 * Kd * 0x1p-53) * ER_FAST_DN, (1.0 + 4.0 * Kd * 0x1p-53) * ER_FAST_UP,
                          (1.0 - fc->gK) * ER_FAST_DN, (1.0 + 2.0 * fc->gK) * ER_FAST_UP};
}

/* sum |a_k b_k| of two float vectors in double (each product exact) with eight running sums, in any order as Lemma
 * D4's bounds allow; the AVX2 build (simd) keeps them in two vector registers. */
#define ER_ABS_DOT_BODY                                                                                               \
    {                                                                                                                 \
        double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                                       \
        int64_t k = 0;                                                                                                \
        for (; k + 7 < K; k += 8)                                                                                     \
            for (int q = 0; q < 8; q++) s[q] += fabs((double)a[k + q] * b[k + q]);                                   \
        for (; k < K; k++) s[0] += fabs((double)a[k] * b[k]);                                                         \
        return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));                                     \
    }
/* sum a_k b_k of two float vectors (each product exact in double) added in four chains of TwoSums, joined by three
 * more: *S their sum, and whether every TwoSum was exact (each error 0), so that *S is the exact sum (fast-path.md,
 * Lemma F5; a NaN error is not 0). */
static int er_twosum_dot(const float *a, const float *b, int64_t K, double *S) {
    double h[4] = {0, 0, 0, 0}, e, nz = 0;
    int64_t k = 0;
    for (; k + 3 < K; k += 4)
        for (int q = 0; q < 4; q++) {
            er__two_sum(h[q], (double)a[k + q] * b[k + q], &h[q], &e);
            nz += fabs(e);
        }
    for (; k < K; k++) {
        er__two_sum(h[0], (double)a[k] * b[k], &h[0], &e);
        nz += fabs(e);
    }
    er__two_sum(h[0], h[1], &h[0], &e);
    nz += fabs(e);
    er__two_sum(h[2], h[3], &h[2], &e);
    nz += fabs(e);
    er__two_sum(h[0], h[2], &h[0], &e);
    nz += fabs(e);
    *S = h[0];
    return nz == 0;
}

static double er_abs_dot_base(const float *restrict a, const float *restrict b, int64_t K) ER_ABS_DOT_BODY
#if ER_HAVE_AVX2
ER_AVX2 static double er_abs_dot_avx2(const float *restrict a, const float *restrict b, int64_t K) ER_ABS_DOT_BODY
#endif
static inline double er_abs_dot(const float *a, const float *b, int64_t K, int simd) {
    (void)simd;
#if ER_HAVE_AVX2
    if (simd) return er_abs_dot_avx2(a, b, K);
#endif
    return er_abs_dot_base(a, b, K);
}

/* The fast path's first pass: threads take chunks of elements from a shared counter (a thread slowed by other
 * work takes fewer) and decide what the bounds decide, leaving the rest ER_PENDING; each thread counts its own, and
 * keeps the widest set among those it decided (the earliest of equal widths). With er_covers_sets, every decided
 * element's set is written. */
typedef struct er_fast_job {
    er_dot_ctx *cx;
    int64_t *next;
    const double *P;        /* |A| |B| in fp64 (er__fast_absprod), or NULL: P from the floats where needed */
    int64_t counts[2];
    double wrel;            /* the widest set decided here: its er_set_rel and element (-1: none) */
    int64_t widx;
    int simd;               /* er__simd(): the AVX2 build of the first pass */
    er_outs outs;           /* the outputs found outside their sets (Lemma F3), marked ER_FAST_OUT */
} er_fast_job;

/* The common case of er_fast_decide_run's step for a run of elements along a row of C (fp32 compute and output,
 * neither P nor sets nor scaled operands), in one pass that vectorises: stage 1's bracket, the class
 * er_fast_decide gives, and the first (cheaper) test of er_fast_may_be_widest against best, the widest so far. An
 * element whose bracket may overflow, whose set may be the widest, or which its bracket leaves pending is marked
 * ER_FAST_REDO for the step itself; one whose output is not finite is pending, as the step leaves it. Every class
 * written is the step's. */
#define ER_FAST_REDO 0xFD
typedef float er_fast_f32u __attribute__((aligned(1))); /* a view's data need not be aligned */
ER_ALWAYS_INLINE void er_fast_pre_body(int64_t n, const er_fast_consts *fcp, const er_fast_f32u *restrict yv,
                                       const double *restrict fs, double an, const double *restrict bn, double best,
                                       uint8_t *restrict cls) {
    const er_fast_consts fc = *fcp;
    for (int64_t j = 0; j < n; j++) {
        double y = yv[j], Plo, Phi;
        er_fast_bracket b;
        er_fast_stage1(&fc, fs[j], an, bn[j], &Plo, &Phi);
        int bad = er_fast_bracket_of(&fc, fs[j], Plo, Phi, &b) ^ 1;
        double r1 = (float)b.slo, r2 = (float)b.shi;
        double L1 = b.ulo < r1 ? b.ulo : r1, H2 = b.uhi > r2 ? b.uhi : r2, al = fabs(L1), ah = fabs(H2);
        int cand = (best < 0) | ((H2 - L1 < best * (1.0 - 0x1p-50) * (al < ah ? al : ah)) ^ 1);
        int in = (y >= b.tlo) & (y <= b.thi), one = r1 == r2, out = (y < r1) | (y > r2);
        int c = in & one ? (y == r1 ? 0 : 1) : in & out ? 1 : ER_PENDING; /* er_fast_class */
        int fin = fabs(y) < INFINITY;
        cls[j] = (uint8_t)(fin ? ((bad | cand | (c == ER_PENDING)) ? ER_FAST_REDO : c) : ER_PENDING);
    }
}
#define ER_FAST_PRE_ARGS                                                                                              \
    int64_t n, const er_fast_consts *fcp, const er_fast_f32u *restrict yv, const double *restrict fs, double an,       \
        const double *restrict bn, double best, uint8_t *restrict cls
static void er_fast_pre(ER_FAST_PRE_ARGS) { er_fast_pre_body(n, fcp, yv, fs, an, bn, best, cls); }
#if ER_HAVE_AVX2
ER_AVX2 static void er_fast_pre_avx2(ER_FAST_PRE_ARGS) { er_fast_pre_body(n, fcp, yv, fs, an, bn, best, cls); }
#endif
static void er_fast_pre_pass(int simd, ER_FAST_PRE_ARGS) {
    (void)simd;
#if ER_HAVE_AVX2
    if (simd) {
        er_fast_pre_avx2(n, fcp, yv, fs, an, bn, best, cls);
        return;
    }
#endif
    er_fast_pre(n, fcp, yv, fs, an, bn, best, cls);
}

#define ER_FAST_CHUNK 16384

static void *er_fast_decide_run(void *arg) {
    er_fast_job *fj = arg;
    er_dot_ctx *cx = fj->cx;
    const er_ref *ref = cx->ref;
    const er_mm_plan *pl = &er__dot(ref)->plan;
    const er_tensor *out = cx->out;
    uint8_t *classes = er__sink_classes(cx->sk);
    er_fast_consts fc;
    er__dot_fast_consts(&fc, cx);
    int64_t K = pl->K, MN = pl->M * pl->N, n = ref->n;
    er_p_factors pf = er_p_factors_of(&fc, K);
    const char *yb = out->data;
    int yf32 = cx->O->id == ER_FP32 && cx->out_contig, sets = cx->sk->set_lo != NULL;
    int pre = yf32 && fc.out_fmt == 0 && !sets && !fj->P && !er__dot(ref)->scaled; /* er_fast_pre_pass first */
    /* counts and the widest in locals, stored once: the jobs lie side by side, and a store per element into one
     * would share its cache line with the other threads' */
    int64_t counts[2] = {0, 0}, widx = -1;
    double wrel = -1;
    for (;;) {
        int64_t begin = __atomic_fetch_add(fj->next, ER_FAST_CHUNK, __ATOMIC_RELAXED);
        if (begin >= n) break;
        int64_t end = begin + ER_FAST_CHUNK < n ? begin + ER_FAST_CHUNK : n, cur_bi = -1, ia = 0, ib = 0;
        int64_t bi = begin / MN, i = (begin % MN) / pl->N, jj = begin % pl->N; /* idx's coordinates, stepped */
        int64_t seg = begin; /* where the first pass's next run (the rest of a row of C) starts */
        for (int64_t idx = begin; idx < end; idx++, jj++) {
            if (jj == pl->N) { jj = 0; if (++i == pl->M) { i = 0; bi++; } }
            if (bi != cur_bi) { er__matmul_batch_of(ref, bi, &ia, &ib); cur_bi = bi; }
            if (pre && idx == seg) { /* the common case of the rest of this row, against the widest so far */
                seg = idx + (pl->N - jj) < end ? idx + (pl->N - jj) : end;
                er_fast_pre_pass(fj->simd, seg - idx, &fc, (const er_fast_f32u *)(yb + 4 * idx), er__dot(ref)->fs + idx,
                                 er__dot(ref)->an[ia * pl->M + i], er__dot(ref)->bn + ib * pl->N + jj, wrel,
                                 classes + idx);
            }
            if (pre && classes[idx] != ER_FAST_REDO) {
                if (classes[idx] != ER_PENDING) counts[classes[idx]]++;
                continue;
            }
            double y;
            if (yf32) { float yv; memcpy(&yv, yb + 4 * idx, 4); y = yv; } /* a view's data need not be aligned */
            else y = er__load(out, cx->out_contig ? idx : er__offset(out, idx));
            double Sh = er__dot(ref)->fs[idx];
            int cls = ER_PENDING;
            er_fast_bracket b;
            double Plo, Phi;
            if (fabs(y) < INFINITY && !er__dot(ref)->scaled) {
                int want_set = sets;
                double r1 = 0, r2 = 0;
                if (fj->P) {
                    /* fl64(|A| |B|) is within gK of P (Theorem 2, exact terms):
                     * P_hat (1 - gK) <= P <= P_hat (1 + 2 gK) */
                    if (!er_fast_bracket_of(&fc, Sh, fj->P[idx] * pf.g_lo, fj->P[idx] * pf.g_hi, &b)) {
                        classes[idx] = ER_PENDING;
                        continue;
                    }
                } else {
                    /* Cauchy-Schwarz above, |S| below; then, if that does not decide (or the set may be the widest and
                     * is not decided by it), P from the floats */
                    er_fast_stage1(&fc, Sh, er__dot(ref)->an[ia * pl->M + i], er__dot(ref)->bn[ib * pl->N + jj], &Plo,
                                   &Phi);
                    if (!er_fast_bracket_of(&fc, Sh, Plo, Phi, &b)) { classes[idx] = ER_PENDING; continue; }
                    r1 = er_fast_rn(&fc, cx, b.slo);
                    r2 = er_fast_rn(&fc, cx, b.shi);
                    want_set = want_set || er_fast_may_be_widest(&fc, cx, &b, r1, r2, wrel);
                    if (!want_set) cls = er_fast_decide(&fc, cx, y, &b);
                    double dlo, dhi; /* an output outside even this bracket's set fails: Lemma F3 */
                    if (!want_set && cls == ER_PENDING && er_fast_outside(&fc, cx, y, &b, r1, r2, &dlo, &dhi) &&
                        er__outs_mark(&fj->outs, idx, dlo, dhi)) {
                        classes[idx] = ER_FAST_OUT;
                        continue;
                    }
                    if (want_set || cls == ER_PENDING) {
                        const float *ar = er__dot(ref)->af + (ia * pl->M + i) * K,
                                    *bc = er__dot(ref)->bt + (ib * pl->N + jj) * K;
                        double P = er_abs_dot(ar, bc, K, fj->simd);
                        double lo = P * pf.f_lo, hi = P * pf.f_hi;
                        lo = lo > Plo ? lo : Plo;
                        hi = hi < Phi ? hi : Phi;
                        if (!er_fast_bracket_of(&fc, Sh, lo, hi, &b)) {
                            classes[idx] = ER_PENDING;
                            continue;
                        }
                        if (!want_set) cls = er_fast_decide(&fc, cx, y, &b);
                        if (!want_set && cls == ER_PENDING &&
                            er_fast_outside(&fc, cx, y, &b, er_fast_rn(&fc, cx, b.slo), er_fast_rn(&fc, cx, b.shi),
                                            &dlo, &dhi) &&
                            er__outs_mark(&fj->outs, idx, dlo, dhi)) {
                            classes[idx] = ER_FAST_OUT;
                            continue;
                        }
                        /* still open (an exact sum on a rounding tie, most often: bf16 products of 16 bits add up
                         * exactly): the sum itself where Lemma F5 makes it exact, its correct rounding RN_O(S) with
                         * the bracket's set edges. Only where the set may not be the widest (want_set clear), so that
                         * no candidate for it is lost */
                        double S2;
                        if (!want_set && cls == ER_PENDING && er_twosum_dot(ar, bc, K, &S2)) {
                            double rs = er_fast_rn(&fc, cx, S2);
                            cls = fc.out_fmt == 0 ? er_fast_class(y, b.tlo, b.thi, rs, rs)
                                                  : er_fast_class(y, er_fast_edge(&fc, cx, b.tlo, 0),
                                                                  er_fast_edge(&fc, cx, b.thi, 1), rs, rs);
                        }
                    }
                }
                double slo, shi;
                if (want_set) {
                    r1 = er_fast_rn(&fc, cx, b.slo);
                    r2 = er_fast_rn(&fc, cx, b.shi);
                }
                if (want_set && er_fast_set(&fc, cx, &b, r1, r2, &slo, &shi)) {
                    int in = y >= slo && y <= shi, away = 0;
                    if (!in) { /* outside a set known exactly: its distance as er_classify computes it */
                        double e = y > shi ? shi : slo, d = fabs(y - e) / er__ulp(cx->O, e);
                        away = er__outs_mark(&fj->outs, idx, d, d);
                    }
                    if (in && (r1 == r2 || y < r1 || y > r2))
                        cls = r1 == r2 && y == r1 ? ER_CLASS_EXACT : ER_CLASS_COVERED;
                    /* the width only where it may reach the widest so far (the division of er_fast_may_be_widest) */
                    double al = fabs(slo), ah = fabs(shi);
                    if ((away || cls != ER_PENDING) && shi - slo >= wrel * (1.0 - 0x1p-50) * (al > ah ? al : ah)) {
                        double rel = er_set_rel(slo, shi);
                        if (rel > wrel || (rel == wrel && rel >= 0 && idx < widx)) { wrel = rel; widx = idx; }
                    }
                    if (sets && (away || cls != ER_PENDING)) er__sink_set(cx->sk, idx, slo, shi, y);
                    if (away) {
                        classes[idx] = ER_FAST_OUT;
                        continue;
                    }
                }
            }
            classes[idx] = (uint8_t)cls;
            if (cls != ER_PENDING) counts[cls]++;
        }
    }
    fj->counts[0] = counts[0];
    fj->counts[1] = counts[1];
    fj->wrel = wrel;
    fj->widx = widx;
    return NULL;
}

/* An enclosure on the fast path (no output to classify): each element's set from the bracket with P from
 * fl64(|A| |B|) where it decides it (fast-path.md, The sets), put at once (an enclosure's sink only stores it);
 * the others marked ER_PENDING for the exact engine. */
typedef struct er_fast_enc_job { er_dot_ctx *cx; const double *P; int64_t begin, end; } er_fast_enc_job;

static void *er_fast_enclose_run(void *arg) {
    er_fast_enc_job *j = arg;
    er_dot_ctx *cx = j->cx;
    const er_ref *ref = cx->ref;
    uint8_t *classes = er__sink_classes(cx->sk);
    er_fast_consts fc;
    er__dot_fast_consts(&fc, cx);
    er_p_factors pf = er_p_factors_of(&fc, er__dot(ref)->plan.K);
    for (int64_t idx = j->begin; idx < j->end; idx++) {
        er_fast_bracket b;
        double lo, hi;
        int ok = j->P && er_fast_bracket_of(&fc, er__dot(ref)->fs[idx], j->P[idx] * pf.g_lo, j->P[idx] * pf.g_hi, &b);
        if (ok) ok = er_fast_set(&fc, cx, &b, er_fast_rn(&fc, cx, b.slo), er_fast_rn(&fc, cx, b.shi), &lo, &hi);
        if (!ok) { classes[idx] = ER_PENDING; continue; }
        er_cset c;
        memset(&c, 0, sizeof c);
        c.lo = lo;
        c.hi = hi;
        c.exact = c.rounded = NAN; /* not kept by an enclosure */
        er__sink_put(cx->sk, idx, &c);
        classes[idx] = ER_CLASS_COVERED;
    }
    return NULL;
}

/* Element idx's operands from the fast path's kept floats, as doubles for the exact engine. */
static void er_fast_operands(const er_ref *ref, int64_t idx, double *va, double *vb) {
    const float *arow, *bcol;
    er__dot_float_rows(ref, idx, &arow, &bcol);
    for (int64_t k = 0; k < er__dot(ref)->plan.K; k++) {
        va[k] = arow[k];
        vb[k] = bcol[k];
    }
}

/* The fast path's second pass, in contiguous ranges (reports merge in element order): the exact engine on each
 * element left, from the kept operands (exact as doubles). */
static void *er_fast_rest(void *arg) {
    er_range_job *j = arg;
    er_dot_ctx *cx = j->cx;
    const er_ref *ref = cx->ref;
    const er_mm_plan *pl = &er__dot(ref)->plan;
    int64_t K = pl->K;
    double *va = NULL, *vb = NULL;
    const uint8_t *cls = er__sink_classes(cx->sk);
    for (int64_t idx = j->begin; idx < j->end && j->st == ER_OK; idx++) {
        /* the next pending element, found a word at a time */
        const uint8_t *nx = memchr(cls + idx, ER_PENDING, (size_t)(j->end - idx));
        if (!nx) break;
        idx = nx - cls;
        if (er__cancelled()) { /* a pending element is O(K): polled every one */
            j->st = ER_ERR_CANCELLED;
            break;
        }
        er__progress_step(1);
        if (!va) {
            va = malloc(sizeof(double) * (size_t)K);
            vb = malloc(sizeof(double) * (size_t)K);
            if (!va || !vb) {
                j->st = er__fail(ER_ERR_NOMEM, "cannot allocate two vectors of %lld", (long long)K);
                break;
            }
        }
        er_fast_operands(ref, idx, va, vb);
        j->st = er_covers_cb(cx, &er__dot(ref)->env, idx, va, vb, K, 0);
    }
    free(va);
    free(vb);
    return NULL;
}

/* Element idx, whose set the fast pass decided and found the widest of its elements: its whole set from the exact
 * engine (from the kept operands) as the share's candidate for the report's widest set. */
static er_status er_fast_widest(er_dot_ctx *cx, int64_t idx) {
    const er_ref *ref = cx->ref;
    const er_mm_plan *pl = &er__dot(ref)->plan;
    int64_t K = pl->K;
    double *va = malloc(sizeof(double) * (size_t)(K ? K : 1)), *vb = malloc(sizeof(double) * (size_t)(K ? K : 1));
    er_status st = va && vb ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate two vectors of %lld", (long long)K);
    if (st == ER_OK) {
        er_fast_operands(ref, idx, va, vb);
        er_cset c;
        st = er__dot_element_set(cx, &er__dot(ref)->env, idx, va, vb, K, 0, &c);
        if (st == ER_OK)
            er__sink_widest(cx->sk, idx, &c, er__load(cx->out, cx->out_contig ? idx : er__offset(cx->out, idx)));
    }
    free(va);
    free(vb);
    return st;
}

/* The exact pass over the elements the fast path left. */
static er_status er_pending_cb(void *vcx, const er_dot_env *env, int64_t idx, const double *a, const double *b,
                               int64_t K, int special) {
    er_dot_ctx *cx = vcx;
    if (er__sink_classes(cx->sk)[idx] != ER_PENDING) return ER_OK;
    return er_covers_cb(vcx, env, idx, a, b, K, special);
}

/* Runs fn over n elements split into nt contiguous ranges, range t with context cx[t]; range 0 in this thread, and a
 * range whose thread cannot start here too. */
static er_status er_run_ranges(er_dot_ctx *cx, int nt, int64_t n, void *(*fn)(void *)) {
    er_range_job jobs[ER_MAX_THREADS];
    for (int t = 0; t < nt; t++) jobs[t] = (er_range_job){&cx[t], n * t / nt, n * (t + 1) / nt, ER_OK};
    er__progress_begin(n);
    er__run_jobs(jobs, sizeof jobs[0], nt, fn);
    er__progress_end();
    for (int t = 0; t < nt; t++) {
        if (jobs[t].st == ER_ERR_CANCELLED) return ER_CANCELLED();
        ER_RETURN_IF_ERROR(jobs[t].st);
    }
    return ER_OK;
}

/* The sets of every element: the fast path's decisions and the exact engine for the rest, the cached summaries, the
 * two conversions of tf32=nearest, or the walk over the operands; one context per share of the sinks. */
static er_status er_dot_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    int any_set = std->order == ER_ORDER_ANY || (std->order == ER_ORDER_MMA && std->outer == ER_SUB_ANY);
    int cached = any_set && std->compute != ER_TF32 && ref->mod != &er__max_module;
    /* the fast path decides an element in about the time of 32 products, a cached summary's set in about 256 */
    int nt = er__num_threads(ref->n * (cached && er__dot(ref)->fast ? 32 : cached ? 256 : er__dot(ref)->K + 64));
    ER_RETURN_IF_ERROR(er__sinks_open(sks, nt));
    /* one context per share; the classes array is shared (each element written once) */
    er_dot_ctx cx[ER_MAX_THREADS];
    void *ctxs[ER_MAX_THREADS] = {0};
    er_status st = ER_OK;
    int made = 0, sets = er__sinks_at(sks, 0, 0)->set_lo != NULL;
    double fast_wrel = -1; /* the fast pass's widest set: its width and element */
    int64_t fast_widx = -1;
    for (int t = 0; t < nt && st == ER_OK; t++, made++) {
        er_sink *sk = er__sinks_at(sks, t, 0);
        st = er__dot_ctx_init(&cx[t], ref, sk->out, std);
        if (st != ER_OK) break;
        cx[t].sk = sk;
        ctxs[t] = &cx[t];
    }
    if (st == ER_OK) {
        if (cached && er__dot(ref)->fast && !er__sink_reads_output(cx[0].sk)) {
            /* an enclosure: no output to decide from; each set from the bracket where it decides it (P from one
             * more GEMM), the rest by the exact engine from the kept operands */
            memset(er__sink_classes(cx[0].sk), ER_PENDING, (size_t)ref->n);
            if (er__dot(ref)->scaled) st = er__matmul_foreach_n(ref, -1, er_pending_cb, ctxs, nt);
            else {
                double *absprod = er__fast_absprod(ref);
                er_fast_enc_job ej[ER_MAX_THREADS];
                for (int t = 0; t < nt; t++)
                    ej[t] = (er_fast_enc_job){ &cx[t], absprod, ref->n * t / nt, ref->n * (t + 1) / nt };
                er__run_jobs(ej, sizeof ej[0], nt, er_fast_enclose_run);
                free(absprod);
                st = er_run_ranges(cx, nt, ref->n, er_fast_rest);
            }
        } else if (cached && er__dot(ref)->fast) {
            /* pass 1: the fast decisions (counts, the widest set, the sets if wanted); pass 2: the rest exactly, in
             * contiguous ranges (a scaled matmul's rest through the exact engine's walk) */
            er_fast_job fj[ER_MAX_THREADS];
            int64_t next = 0;
            /* with the sets, every element needs P: one GEMM of the absolute values (when memory allows) */
            double *absprod = sets && !er__dot(ref)->scaled ? er__fast_absprod(ref) : NULL;
            int simd = er__simd();
            for (int t = 0; t < nt; t++)
                fj[t] = (er_fast_job){.cx = &cx[t], .next = &next, .P = absprod, .wrel = -1, .widx = -1, .simd = simd};
            er__run_jobs(fj, sizeof fj[0], nt, er_fast_decide_run);
            free(absprod);
            for (int t = 0; t < nt; t++) {
                er__sink_count(cx[t].sk, ER_CLASS_EXACT, fj[t].counts[0]);
                er__sink_count(cx[t].sk, ER_CLASS_COVERED, fj[t].counts[1]);
                if (fj[t].wrel > fast_wrel || (fj[t].wrel == fast_wrel && fj[t].wrel >= 0 && fj[t].widx < fast_widx)) {
                    fast_wrel = fj[t].wrel;
                    fast_widx = fj[t].widx;
                }
            }
            er_outs *outs[ER_MAX_THREADS];
            for (int t = 0; t < nt; t++) outs[t] = &fj[t].outs;
            er__outs_finish(outs, nt, er__sink_classes(cx[0].sk), ref->n, cx[0].sk);
            int64_t pending = 0;
            const uint8_t *classes = er__sink_classes(cx[0].sk);
            for (int64_t i = 0; i < ref->n; i++) pending += classes[i] == ER_PENDING;
            if (pending && er__dot(ref)->scaled) st = er__matmul_foreach_n(ref, -1, er_pending_cb, ctxs, nt);
            else if (pending) st = er_run_ranges(cx, nt, ref->n, er_fast_rest);
        } else if (cached && !er__dot(ref)->fast) {
            /* the reference's cached exact summaries are those of this standard */
            st = er_run_ranges(cx, nt, ref->n, er_cached_range);
        } else if (std->compute == ER_TF32 && std->tf32 == ER_TF32_NEAREST) {
            /* either tie rule, one for the whole kernel: the sets under each conversion, joined (orders.md) */
            st = er__mem_check((double)sizeof(er_cset) * (double)ref->n, "tf32=nearest's sets of the first conversion");
            er_cset *keep = st == ER_OK ? malloc(sizeof *keep * (size_t)(ref->n ? ref->n : 1)) : NULL;
            if (!keep && st == ER_OK)
                st = er__fail(ER_ERR_NOMEM, "cannot allocate %lld element sets", (long long)ref->n);
            for (int pass = 1; pass <= 2 && st == ER_OK; pass++) {
                for (int t = 0; t < nt; t++) { cx[t].keep = keep; cx[t].keep_pass = pass; }
                st = er__matmul_foreach_n(ref, pass == 1 ? ER_TF32_RNE : ER_TF32_RNA, er_covers_cb, ctxs, nt);
            }
            free(keep);
        } else {
            st = er__matmul_foreach_n(ref, er_operand_conv(std), er_covers_cb, ctxs, nt);
        }
    }
    /* the widest set among those the fast pass decided: a candidate for the report's, with its exact values */
    if (st == ER_OK && fast_widx >= 0) st = er_fast_widest(&cx[0], fast_widx);
    for (int t = 0; t < made; t++) er__dot_ctx_clear(&cx[t]);
    return st;
}

/* er_emulate: the one value of each element's set, written into the destination. */
static er_status er_emulate_cb(void *vcx, const er_dot_env *env, int64_t idx, const double *a, const double *b,
                               int64_t K, int special) {
    er_dot_ctx *cx = vcx;
    er_cset c;
    if (cx->ref->mod == &er__max_module) ER_RETURN_IF_ERROR(er__dot_element_set(cx, env, idx, a, b, K, special, &c));
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
        if (cx->ref->mod == &er__mean_module) er_mean_cval(cx, &w, er__dot(cx->ref)->K);
        er_cset_build(&c, cx, &w, NAN, NAN);
    }
    double v;
    int finite = c.lo <= c.hi;
    if (c.nan_req) v = NAN;
    else if (finite && c.lo == c.hi && !c.pinf_ok && !c.ninf_ok && !c.nan_ok) v = c.lo;
    else if (!finite && c.pinf_ok + c.ninf_ok + c.nan_ok == 1) v = c.pinf_ok ? INFINITY : c.ninf_ok ? -INFINITY : NAN;
    else return er__fail(ER_ERR_INTERNAL, "the emulated set of element %lld is not a single value", (long long)idx);
    er__store_value(cx->dst, idx, v, cx->ov_out);
    return ER_OK;
}

/* er_emulate's tile walk: T values of the fixed fp32 order, converted to the output as er_cset_build would. */
static er_status er_emulate_tile_cb(void *vcx, int64_t idx0, const float *vals, int T) {
    er_dot_ctx *cx = vcx;
    const er_tensor *dst = cx->dst;
    for (int t = 0; t < T; t++) {
        double v = er__round_double(cx->O, vals[t], ER_ROUND_NEAREST, cx->ov_out);
        if (dst->format == ER_FP32 && cx->out_contig) {
            float f = (float)v; /* v is a value of fp32 (or an infinity or NaN) */
            memcpy((char *)(uintptr_t)dst->data + 4 * (idx0 + t), &f, 4);
        } else {
            er__store_value(dst, idx0 + t, v, cx->ov_out);
        }
    }
    return ER_OK;
}

static er_status er_dot_emulate(const er_ref *ref, er_tensor *out, const er_standard *std) {
    int fixed = ref->mod == &er__max_module ||
                (er__standard_is_fixed_info(std, er__fmt(er__dot(ref)->A.format),
                                            er__dot(ref)->b_is_one ? er__fmt_one() : er__fmt(er__dot(ref)->B.format)) &&
                 (ref->mod != &er__mean_module || std->mean != 0));
    if (!fixed) {
        char name[160];
        er_standard_format(std, name, sizeof name, NULL);
        const char *why = std->order == ER_ORDER_ANY        ? "any_order leaves the order free"
                          : std->rounding != ER_RND_NEAREST ? "faithful rounding leaves each rounding free"
                          : (std->inner == ER_SUB_ANY || std->outer == ER_SUB_ANY)
                              ? "inner=any or outer=any leaves an order free"
                          : (ref->mod == &er__mean_module && std->mean == 0)
                              ? "mean=either leaves the division free (state mean=divide or mean=reciprocal)"
                              : "fma=either leaves the fusing of each product free (state fma=never or fma=always)";
        return er__fail(ER_ERR_STANDARD, "emulate needs a fully fixed standard; '%s' is not: %s", name, why);
    }
    if (er__dot(ref)->scaled)
        return er__fail(ER_ERR_UNSUPPORTED,
                        "emulate does not apply to a scaled matmul: the scaling's association is left free");
    ER_RETURN_IF_ERROR(er__check_distinct(out));
    int nt = er__num_threads(ref->n * (er__dot(ref)->K + 64)), made = 0;
    er_dot_ctx cx[ER_MAX_THREADS];
    void *ctxs[ER_MAX_THREADS] = {0};
    er_status st = ER_OK;
    for (int t = 0; t < nt && st == ER_OK; t++, made++) {
        st = er__dot_ctx_init(&cx[t], ref, out, std);
        if (st != ER_OK) break;
        cx[t].dst = out; /* each element is written by one thread */
        ctxs[t] = &cx[t];
    }
    int conv = er_operand_conv(std), outer = 0;
    int64_t block = st == ER_OK && ref->mod == &er__matmul_module && cx[0].have_plan && !cx[0].mma_chain
                        ? er__dot_order_tile_block(&cx[0].plan, er__dot(ref)->K, &outer) : 0;
    if (st == ER_OK && block > 0) st = er__matmul_foreach_tile(ref, conv, block, outer, er_emulate_tile_cb, ctxs, nt);
    else if (st == ER_OK) st = er__matmul_foreach_n(ref, conv, er_emulate_cb, ctxs, nt);
    for (int t = 0; t < made; t++) er__dot_ctx_clear(&cx[t]);
    return st;
}

/* The exact sum of a summary rounded to double and correctly rounded to O (its default overflow rule). */
static void er_rounded_of_sum(const er_fmt_info *O, const er_dotsum *sm, double *e, double *rd) {
    if ((sm->special & ER_SPECIAL_NAN) || (sm->special & ER_SPECIAL_PINF && sm->special & ER_SPECIAL_NINF))
        *e = *rd = NAN;
    else if (sm->special & (ER_SPECIAL_PINF | ER_SPECIAL_NINF)) {
        *e = sm->special & ER_SPECIAL_PINF ? INFINITY : -INFINITY;
        *rd = er__round_double(O, *e, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
    } else {
        *e = er__round_core(er__fmt(ER_FP64), sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        *rd = er__round_core(O, sm->neg, sm->m, sm->e, sm->sticky, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
    }
}

/* er_ref_exact of element idx. */
static er_status er_dot_exact(const er_ref *ref, int64_t idx, const er_fmt_info *O, double *exact, double *rounded) {
    double e, rd;
    if (ref->mod == &er__max_module) {
        int64_t offa, offb;
        er__matmul_offsets(ref, idx, &offa, &offb);
        const er_tensor *A = &er__dot(ref)->A;
        e = er__load(A, offa);
        for (int64_t k = 0; k < er__dot(ref)->K && !isnan(e); k++) {
            double v = er__load(A, offa + k * A->strides[A->ndim - 1]);
            if (isnan(v) || v > e) e = v;
        }
        rd = er__round_double(O, e, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
    } else if (ref->mod == &er__mean_module) {
        mpfr_t x, q;
        mpfr_init2(x, 2);
        ER_RETURN_IF_ERROR(er__matmul_exact_mpfr(ref, idx, x));
        mpfr_init2(q, mpfr_get_prec(x) + 64);
        int inex =
            er__dot(ref)->K ? mpfr_div_ui(q, x, (unsigned long)er__dot(ref)->K, MPFR_RNDZ) : (mpfr_set_nan(q), 0);
        e = mpfr_get_d(q, MPFR_RNDN);
        rd = er__round_mpfr_sticky(O, q, inex != 0, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        mpfr_clears(x, q, (mpfr_ptr)0);
    } else if (er__dot(ref)->scaled) {
        mpfr_t x;
        mpfr_init2(x, 2);
        er_status st = er__matmul_exact_mpfr(ref, idx, x);
        if (st != ER_OK) { mpfr_clear(x); return st; }
        double sa, sb;
        er__dot_scales(ref, idx, &sa, &sb);
        mpfr_prec_round(x, mpfr_get_prec(x) + 50, MPFR_RNDN); /* exact: more bits */
        mpfr_mul_d(x, x, sa, MPFR_RNDN);                      /* exact: 24 more bits each */
        mpfr_mul_d(x, x, sb, MPFR_RNDN);
        e = mpfr_get_d(x, MPFR_RNDN);
        rd = er__round_mpfr(O, x, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        mpfr_clear(x);
    } else {
        er_dotsum one;
        const er_dotsum *sm = &one;
        if (er__dot(ref)->sums) sm = &er__dot(ref)->sums[idx];
        else ER_RETURN_IF_ERROR(er__matmul_elem_summary(ref, idx, &one)); /* a fast-path reference */
        er_rounded_of_sum(O, sm, &e, &rd);
    }
    if (exact) *exact = e;
    if (rounded) *rounded = rd;
    return ER_OK;
}

/* er_ref_rounded: on the fast path every summary at once, as the reference keeps none; else element by element. */
static er_status er_dot_rounded(const er_ref *ref, er_tensor *out) {
    if (er__dot(ref)->fast &&
        !er__dot(ref)->scaled) { /* a fast-path reference keeps no summaries: compute them all at once */
        er_dotsum *sums;
        ER_RETURN_IF_ERROR(er__matmul_all_sums(ref, &sums));
        for (int64_t idx = 0; idx < ref->n; idx++) {
            double e, v;
            er_rounded_of_sum(er__fmt(out->format), &sums[idx], &e, &v);
            er__store_value(out, idx, v, ER_OVERFLOW_DEFAULT);
        }
        free(sums);
        return ER_OK;
    }
    for (int64_t idx = 0; idx < ref->n; idx++) {
        double v;
        ER_RETURN_IF_ERROR(er_dot_exact(ref, idx, er__fmt(out->format), NULL, &v));
        er__store_value(out, idx, v, ER_OVERFLOW_DEFAULT);
    }
    return ER_OK;
}

/* er_ref_exact_mpfr of element idx: matmul and sum. */
static er_status er_dot_exact_mpfr(const er_ref *ref, int64_t idx, mpfr_ptr out) {
    if (ref->mod != &er__matmul_module && ref->mod != &er__sum_module)
        return er__fail(ER_ERR_UNSUPPORTED, "er_ref_exact_mpfr gives matmul and sum values (this is a %s)",
                        er__op_name(ref));
    ER_RETURN_IF_ERROR(er__matmul_exact_mpfr(ref, idx, out));
    if (er__dot(ref)->scaled && mpfr_number_p(out)) {
        double sa, sb;
        er__dot_scales(ref, idx, &sa, &sb);
        mpfr_prec_round(out, mpfr_get_prec(out) + 50, MPFR_RNDN); /* exact: more bits */
        mpfr_mul_d(out, out, sa, MPFR_RNDN);
        mpfr_mul_d(out, out, sb, MPFR_RNDN);
    }
    return ER_OK;
}

/* A bracket of element idx's exact result: on the fast path fl64(A B) within K 2^-52 |a|_2 |b|_2 (fast-path.md,
 * item 1), with no exact engine; else the exact double and its neighbours. */
static er_status er_dot_bracket(const er_ref *ref, int64_t idx, double *mid, double *lo, double *hi) {
    double e;
    if (er__dot(ref)->fast && !er__dot(ref)->scaled) {
        const er_mm_plan *pl = &er__dot(ref)->plan;
        int64_t MN = pl->M * pl->N, ia, ib;
        er__matmul_batch_of(ref, idx / MN, &ia, &ib);
        double d = (double)pl->K * 0x1p-52 * (1.0 + 0x1p-40) * er__dot(ref)->an[ia * pl->M + (idx % MN) / pl->N] *
                   er__dot(ref)->bn[ib * pl->N + idx % pl->N];
        e = er__dot(ref)->fs[idx];
        d = nextafter(d * (1.0 + 0x1p-40), INFINITY);
        *mid = e;
        *lo = nextafter(e - d, -INFINITY);
        *hi = nextafter(e + d, INFINITY);
        return ER_OK;
    }
    ER_RETURN_IF_ERROR(er_dot_exact(ref, idx, er__fmt(ER_FP64), &e, NULL));
    *mid = e;
    *lo = isfinite(e) ? nextafter(e, -INFINITY) : NAN;
    *hi = isfinite(e) ? nextafter(e, INFINITY) : NAN;
    return ER_OK;
}

/* matmul: the tensor-core models, tf32 and depth=; sum: depth=; mean: depth= and mean=; max: none (it adds
 * nothing). */
static er_status er_dot_check(const er_ref *ref, const er_standard *std) {
    ER_RETURN_IF_ERROR(er__standard_takes(ref, std));
    if (ref->mod == &er__max_module && (std->compute != ER_FP32 || std->fma != ER_FMA_EITHER))
        return er__fail(ER_ERR_STANDARD, "max adds and multiplies nothing: compute= and fma= do not apply to it");
    /* inputs wider than the accumulator: a kernel converts them first, which no order models (the check would judge
     * it on values it never read); compute=tf32 and tf32x3 convert operands by their definition */
    if (ref->mod == &er__max_module || std->compute == ER_TF32) return ER_OK;
    const er_fmt_info *F = er__fmt(std->compute);
    const er_tensor *views[2];
    const char *names[2];
    int k = er__dot_inputs(ref, views, names, 2);
    for (int i = 0; i < k && i < 2; i++) {
        const er_fmt_info *X = er__fmt(views[i]->format);
        if (X->p > F->p || X->min_sub < F->min_sub || X->max > F->max)
            return er__fail(ER_ERR_STANDARD,
                            "%s of %s %s needs a compute format holding it (compute=%s does not): pass the values "
                            "the kernel read (converted to its input format), or compute=%s",
                            er__op_name(ref), names[i], X->name, F->name, X->id == ER_FP64 ? "fp64" : "fp32");
    }
    return ER_OK;
}

static const char *const er_dot_names[1] = {"out"};

/* The cursor of single elements' sets (module.h) for a matmul on the fast path under a standard whose sets are the
 * cached any-order ones: the inner values from the fast path's brackets (fast-path.md: every value between
 * RN_E(RU_F(tlo)) and RN_E(RD_F(thi)) belongs to the engine's set), the sets from the exact engine on the kept
 * operands, in format E as the output. */
typedef struct er_dot_cursor {
    er_dot_ctx cx;
    er_tensor view;         /* a view of format E, never read */
    er_fast_consts fc;
    er_p_factors pf;        /* P's bracket from the floats' dot product or from P_hat */
    double *va, *vb;        /* one element's operands, for the exact engine */
    int simd;               /* er__simd(): the AVX2 builds of the inner values' loop */
    const double *P;        /* the reference's P_hat once this cursor has taken it (er_dot_cursor_P), else NULL */
    int64_t nset;           /* the sets this cursor gave with P from the floats */
} er_dot_cursor;

static void er_dot_cursor_close(void *p) {
    er_dot_cursor *c = p;
    if (!c) return;
    er_dot_state *d = er__dot(c->cx.ref);
    pthread_mutex_lock(&d->pmu);
    if (--d->ncur == 0) { /* the last cursor: the check's P_hat goes */
        free(d->P);
        d->P = NULL;
        d->p_tried = 0;
    }
    pthread_mutex_unlock(&d->pmu);
    er__dot_ctx_clear(&c->cx);
    free(c->va);
    free(c->vb);
    free(c);
}

static void *er_dot_cursor_open(const er_ref *ref, const er_standard *std, const er_fmt_info *E) {
    int any_set = std->order == ER_ORDER_ANY || (std->order == ER_ORDER_MMA && std->outer == ER_SUB_ANY);
    if (ref->mod != &er__matmul_module || !er__dot(ref)->fast || er__dot(ref)->scaled || !any_set ||
        std->compute == ER_TF32)
        return NULL;
    er_dot_cursor *c = calloc(1, sizeof *c);
    int64_t K = er__dot(ref)->K > 0 ? er__dot(ref)->K : 1;
    if (!c) return NULL;
    c->va = malloc(sizeof(double) * (size_t)K);
    c->vb = malloc(sizeof(double) * (size_t)K);
    if (!c->va || !c->vb || er_tensor_view(&c->view, E->id, ref->ndim, ref->shape, NULL, er__dot(ref)->fs) != ER_OK ||
        er__dot_ctx_init(&c->cx, ref, &c->view, std) != ER_OK) {
        free(c->va);
        free(c->vb);
        free(c);
        er__ok();
        return NULL;
    }
    er__dot_fast_consts(&c->fc, &c->cx);
    c->simd = er__simd();
    c->pf = er_p_factors_of(&c->fc, er__dot(ref)->K);
    pthread_mutex_lock(&er__dot(ref)->pmu);
    er__dot(ref)->ncur++;
    pthread_mutex_unlock(&er__dot(ref)->pmu);
    return c;
}

/* The reference's P_hat for this cursor's sets, once it has given ER_DOT_SETS_FOR_P of them from the floats (and a
 * 64th of the elements): a check that sets many elements one by one (its outputs outside their sets) then takes P
 * from one GEMM of |A| |B| instead of an O(K) product each. Made by the first cursor to ask, shared until the last
 * closes; NULL before, or where it cannot be made (no memory: P from the floats, as before). */
#define ER_DOT_SETS_FOR_P 256
static const double *er_dot_cursor_P(er_dot_cursor *c) {
    if (c->P || ++c->nset < ER_DOT_SETS_FOR_P || 64 * c->nset < c->cx.ref->n) return c->P;
    er_dot_state *d = er__dot(c->cx.ref);
    pthread_mutex_lock(&d->pmu);
    if (!d->p_tried) {
        d->P = er__fast_absprod(c->cx.ref);
        d->p_tried = 1;
    }
    c->P = d->P;
    pthread_mutex_unlock(&d->pmu);
    if (!c->P) c->nset = INT64_MIN; /* (not asked again) */
    return c->P;
}

/* Element idx's operand rows: A's row and B's column as kept floats. */
static void er_dot_cursor_rows(const er_ref *ref, int64_t idx, const float **arow, const float **bcol, int64_t *ia,
                               int64_t *ib, int64_t *i, int64_t *j) {
    const er_mm_plan *pl = &er__dot(ref)->plan;
    int64_t MN = pl->M * pl->N;
    er__matmul_batch_of(ref, idx / MN, ia, ib);
    *i = (idx % MN) / pl->N;
    *j = idx % pl->N;
    *arow = er__dot(ref)->af + (*ia * pl->M + *i) * pl->K;
    *bcol = er__dot(ref)->bt + (*ib * pl->N + *j) * pl->K;
}

static int er_dot_cursor_inner(void *p, int64_t idx, int effort, double *lo, double *hi, double *blo, double *bhi) {
    er_dot_cursor *c = p;
    const er_ref *ref = c->cx.ref;
    const float *arow, *bcol;
    int64_t ia, ib, i, j;
    er_dot_cursor_rows(ref, idx, &arow, &bcol, &ia, &ib, &i, &j);
    double Sh = er__dot(ref)->fs[idx], Plo, Phi;
    er_fast_stage1(&c->fc, Sh, er__dot(ref)->an[ia * er__dot(ref)->plan.M + i],
                   er__dot(ref)->bn[ib * er__dot(ref)->plan.N + j], &Plo, &Phi);
    if (effort > 0) {
        double P = er_abs_dot(arow, bcol, er__dot(ref)->plan.K, c->simd), l = P * c->pf.f_lo, h = P * c->pf.f_hi;
        Plo = l > Plo ? l : Plo;
        Phi = h < Phi ? h : Phi;
    }
    er_fast_bracket b;
    if (!er_fast_bracket_of(&c->fc, Sh, Plo, Phi, &b)) return 0;
    *lo = er_fast_edge(&c->fc, &c->cx, b.tlo, 0);
    *hi = er_fast_edge(&c->fc, &c->cx, b.thi, 1);
    *blo = b.slo; /* S lies in [slo, shi] (fast-path.md) */
    *bhi = b.shi;
    return *lo <= *hi;
}

/* er_dot_cursor_inner at effort 0 over a run of one row of the output (fs and bn at its first element), for an fp32
 * compute format and edges (out_fmt 0): the same steps, in a loop without a call or a branch. */
ER_ALWAYS_INLINE void er_dot_inner_row_body(const er_fast_consts *restrict fc, int64_t m, const double *restrict fs,
                                            double an, const double *restrict bn, double *restrict lo,
                                            double *restrict hi, double *restrict blo, double *restrict bhi,
                                            uint8_t *restrict ok) {
    er_fast_consts c = *fc;
    for (int64_t i = 0; i < m; i++) {
        double Plo, Phi;
        er_fast_bracket b;
        er_fast_stage1(&c, fs[i], an, bn[i], &Plo, &Phi);
        int64_t in = er_fast_bracket_of(&c, fs[i], Plo, Phi, &b);
        double l = er_fast_edge_f32(b.tlo, 0), h = er_fast_edge_f32(b.thi, 1);
        lo[i] = l;
        hi[i] = h;
        blo[i] = b.slo;
        bhi[i] = b.shi;
        ok[i] = (uint8_t)(in & (l <= h));
    }
}
#define ER_DOT_ROW_ARGS                                                                                                \
    const er_fast_consts *restrict fc, int64_t m, const double *restrict fs, double an, const double *restrict bn,   \
        double *restrict lo, double *restrict hi, double *restrict blo, double *restrict bhi, uint8_t *restrict ok
ER_SIMD_BUILDS(er_dot_inner_row, (ER_DOT_ROW_ARGS), (fc, m, fs, an, bn, lo, hi, blo, bhi, ok), er_dot_inner_row_body)

static void er_dot_cursor_inner_run(void *p, int64_t begin, int64_t m, double *lo, double *hi, double *blo,
                                    double *bhi, uint8_t *ok) {
    er_dot_cursor *c = p;
    const er_ref *ref = c->cx.ref;
    const er_dot_state *d = er__dot(ref);
    int64_t N = d->plan.N, MN = d->plan.M * N;
    for (int64_t s = 0; s < m;) {
        int64_t idx = begin + s, ia, ib, i = (idx % MN) / N, j = idx % N, r = N - j < m - s ? N - j : m - s;
        if (c->fc.out_fmt != 0) { /* another pair of formats: element by element */
            ok[s] = (uint8_t)er_dot_cursor_inner(p, idx, 0, &lo[s], &hi[s], &blo[s], &bhi[s]);
            s++;
            continue;
        }
        er__matmul_batch_of(ref, idx / MN, &ia, &ib);
        const double *fs = d->fs + idx, *bn = d->bn + ib * N + j;
        double an = d->an[ia * d->plan.M + i];
        er_dot_inner_row(c->simd, &c->fc, r, fs, an, bn, lo + s, hi + s, blo + s, bhi + s, ok + s);
        s += r;
    }
}

static er_status er_dot_cursor_set(void *p, int64_t idx, er_cset *out) {
    er_dot_cursor *c = p;
    const er_ref *ref = c->cx.ref;
    const float *arow, *bcol;
    int64_t ia, ib, i, j;
    er_dot_cursor_rows(ref, idx, &arow, &bcol, &ia, &ib, &i, &j);
    /* the set from the bracket with P from the floats where it decides it (fast-path.md, The sets): the engine's
     * lo and hi, and below the overflow limit no special value */
    double Sh = er__dot(ref)->fs[idx], Plo, Phi, lo, hi;
    er_fast_stage1(&c->fc, Sh, er__dot(ref)->an[ia * er__dot(ref)->plan.M + i],
                   er__dot(ref)->bn[ib * er__dot(ref)->plan.N + j], &Plo, &Phi);
    /* P from P_hat where the cursor has taken it: (1 - gK) P_hat <= P <= (1 + 2 gK) P_hat (fast-path.md, The sets);
     * else from the floats */
    const double *Ph = er_dot_cursor_P(c);
    double P = Ph ? Ph[idx] : er_abs_dot(arow, bcol, er__dot(ref)->plan.K, c->simd),
           l = P * (Ph ? c->pf.g_lo : c->pf.f_lo), h = P * (Ph ? c->pf.g_hi : c->pf.f_hi);
    er_fast_bracket b;
    if (er_fast_bracket_of(&c->fc, Sh, l > Plo ? l : Plo, h < Phi ? h : Phi, &b) &&
        er_fast_set(&c->fc, &c->cx, &b, er_fast_rn(&c->fc, &c->cx, b.slo), er_fast_rn(&c->fc, &c->cx, b.shi), &lo,
                    &hi)) {
        memset(out, 0, sizeof *out);
        out->lo = lo;
        out->hi = hi;
        out->exact = out->rounded = NAN;
        return ER_OK;
    }
    for (int64_t k = 0; k < er__dot(ref)->plan.K; k++) { c->va[k] = arow[k]; c->vb[k] = bcol[k]; }
    return er__dot_element_set(&c->cx, &er__dot(ref)->env, idx, c->va, c->vb, er__dot(ref)->plan.K, 0, out);
}

/* matmul, sum, mean and max share one module's functions (a reduction is a matmul by a vector of ones). */
#define ER_DOT_MODULE(op, t)                                                                                         \
    {                                                                                                                \
        .name = op, .takes = t, .nout = 1, .out_names = er_dot_names, .priv_size = sizeof(er_dot_state),             \
        .destroy = er__dot_destroy, .inputs = er__dot_inputs, .fast = er__dot_fast, .out_shape = er__out_shape_same, \
        .check = er_dot_check, .covers = er_dot_covers, .emulate = er_dot_emulate, .exact = er_dot_exact,            \
        .rounded = er_dot_rounded, .exact_mpfr = er_dot_exact_mpfr, .bracket = er_dot_bracket,                       \
        .cursor_open = er_dot_cursor_open, .cursor_inner = er_dot_cursor_inner,                                     \
        .cursor_inner_run = er_dot_cursor_inner_run, .cursor_set = er_dot_cursor_set,                                \
        .cursor_close = er_dot_cursor_close                                                                          \
    }
const er_op_module er__matmul_module = ER_DOT_MODULE("matmul", ER_TAKES_MMA | ER_TAKES_TF32 | ER_TAKES_DEPTH),
                   er__sum_module = ER_DOT_MODULE("sum", ER_TAKES_DEPTH),
                   er__mean_module = ER_DOT_MODULE("mean", ER_TAKES_DEPTH | ER_TAKES_MEAN),
                   er__max_module = ER_DOT_MODULE("max", 0);
