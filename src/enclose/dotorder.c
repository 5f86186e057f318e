/* dotorder.c: the sets of the fixed-order standards (sequential, blocked, split, pairwise) by monotone
 * interval emulation (docs/algorithms/orders.md).
 *
 * Every operation of a fixed order is a rounding of an exact sum, monotone in each operand. Running the
 * sequence of operations on the lower endpoints with the lowest allowed rounding, and on the upper endpoints
 * with the highest, gives an interval that contains every allowed result (Theorem O1). For a fully fixed
 * standard (round to nearest, fma never or always) both runs are the same run and the interval is the one
 * result: that is emulation. Where the standard leaves a sub-sum in any order (inner=any, outer=any), that
 * sub-sum's set comes from the any-order theorems; faithful rounding uses rounding down and up. Infinities
 * follow IEEE; an operation that may meet +inf and -inf makes NaN possible, and the interval then widens to
 * everything (a sound, deliberately coarse answer for a case that only arises after overflow). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "format/format.h"
#include "enclose/dotorder.h"

er_status er__order_plan_init(er_order_plan *pl, const er_standard *std, const er_fmt_info *fa, const er_fmt_info *fb) {
    memset(pl, 0, sizeof *pl);
    pl->std = *std;
    int tf32 = std->compute == ER_TF32;
    pl->F = er__fmt(tf32 ? ER_FP32 : std->compute);
    pl->P = std->partial != ER_FORMAT_INVALID ? er__fmt(std->partial) : pl->F;
    const er_fmt_info *tf = er__fmt(ER_TF32);
    pl->a_bytes = fa->bits > 8 ? fa->bits / 8 : 1;
    pl->fa = tf32 && fa->p > tf->p ? tf : fa;
    pl->fb = tf32 && fb->p > tf->p ? tf : fb;
    int faithful = std->rounding == ER_RND_FAITHFUL;
    pl->lo_mode = faithful ? ER_ROUND_DOWN : ER_ROUND_NEAREST;
    pl->hi_mode = faithful ? ER_ROUND_UP : ER_ROUND_NEAREST;
    pl->fma_never = std->fma != ER_FMA_ALWAYS;
    pl->fma_always = std->fma != ER_FMA_NEVER && std->order != ER_ORDER_PAIRWISE;
    pl->bound_n[0] = pl->bound_n[1] = -1;
    er__edge_scratch_init(&pl->w);
    mpfr_init2(pl->sl, 2300);
    mpfr_init2(pl->sh, 2300);
    return ER_OK;
}

er_status er__order_plan_set_tree(er_order_plan *pl, const int32_t *post, int64_t npost, int64_t leaves) {
    int32_t *p = realloc(pl->tleaf, sizeof *p * (size_t)(leaves > 0 ? leaves : 1));
    if (!p) return er__fail(ER_ERR_NOMEM, "cannot allocate a tree's stack of %lld", (long long)leaves);
    pl->tleaf = p;
    pl->tpost = post;
    pl->tnpost = npost;
    pl->tleaves = leaves;
    return ER_OK;
}

void er__order_plan_clear(er_order_plan *pl) {
    if (pl->have_acc) er__acc_free(&pl->acc);
    er__edge_scratch_clear(&pl->w);
    mpfr_clear(pl->sl);
    mpfr_clear(pl->sh);
    free(pl->parts);
    free(pl->tleaf);
    memset(pl, 0, sizeof *pl);
}

/* Both endpoints NaN: every allowed run gives NaN (a NaN operand, or opposite infinities pinned on both
 * runs). One NaN endpoint: NaN is possible, and the interval widens to everything. */
static void er_iv_widen_if_nan(er_iv *v) {
    if (isnan(v->lo) && isnan(v->hi)) { v->nan = 1; return; }
    if (isnan(v->lo) || isnan(v->hi)) { v->nan = 1; v->lo = -INFINITY; v->hi = INFINITY; }
}

/* x in [xl, xh] plus y in [yl, yh] (extended reals) meets +inf + -inf for some choice: NaN is possible. */
static int er_may_nan(double xl, double xh, double yl, double yh) {
    return (xh == INFINITY && yl == -INFINITY) || (xl == -INFINITY && yh == INFINITY);
}

/* acc + a*b under the plan: the product rounded then added, and/or fused, whichever the standard allows. */
static void er_step(const er_order_plan *pl, int wide, er_iv *acc, double a, double b) {
    const er_fmt_info *F = pl->F;
    double lo = INFINITY, hi = -INFINITY;
    int nan = 0, certain = 1;
    if (pl->fma_never) {
        double tl = er__round_prod(F, a, b, wide, pl->lo_mode), th = er__round_prod(F, a, b, wide, pl->hi_mode);
        double l = er__round_sum(F, acc->lo, tl, pl->lo_mode), h = er__round_sum(F, acc->hi, th, pl->hi_mode);
        nan |= er_may_nan(acc->lo, acc->hi, tl, th);
        certain &= isnan(l) && isnan(h);
        lo = l; hi = h;
    }
    if (pl->fma_always) {
        /* only an infinite operand makes an infinite product; a finite one is exact inside the fma */
        double p = (isinf(a) || isinf(b)) ? a * b : 0.0;
        double l = er__round_fma(F, a, b, acc->lo, wide, pl->lo_mode),
               h = er__round_fma(F, a, b, acc->hi, wide, pl->hi_mode);
        nan |= isinf(p) && er_may_nan(acc->lo, acc->hi, p, p);
        certain &= isnan(l) && isnan(h);
        if (isnan(l) || isnan(h) || isnan(lo) || isnan(hi)) {
            lo = hi = NAN;
        } else { if (l < lo) lo = l; if (h > hi) hi = h; }
    }
    if (lo != lo && !certain) { lo = -INFINITY; hi = INFINITY; nan = 1; }
    acc->lo = lo;
    acc->hi = hi;
    acc->nan |= nan;
    er_iv_widen_if_nan(acc);
}

/* x + y for intervals of values of format G (partials). */
static void er_iv_add(const er_order_plan *pl, const er_fmt_info *G, er_iv *x, const er_iv *y) {
    x->nan |= er_may_nan(x->lo, x->hi, y->lo, y->hi);
    x->lo = er__round_sum(G, x->lo, y->lo, pl->lo_mode);
    x->hi = er__round_sum(G, x->hi, y->hi, pl->hi_mode);
    x->nan |= y->nan;
    er_iv_widen_if_nan(x);
}

static er_status er_bound_for(er_order_plan *pl, int64_t n, const er_anyorder_bound **out) {
    for (int i = 0; i < 2; i++) if (pl->bound_n[i] == n) { *out = &pl->bound[i]; return ER_OK; }
    int slot = pl->bound_n[0] < 0 ? 0 : 1;
    ER_RETURN_IF_ERROR(
        er__anyorder_bound(&pl->bound[slot], pl->fa, pl->fb, pl->F, n, pl->std.rounding == ER_RND_FAITHFUL));
    pl->bound_n[slot] = n;
    *out = &pl->bound[slot];
    return ER_OK;
}

static er_iv er_iv_from_cval(const er_cval *c) {
    er_iv v;
    v.nan = c->nan;
    if (c->lo <= c->hi) { v.lo = c->ninf ? -INFINITY : c->lo; v.hi = c->pinf ? INFINITY : c->hi; }
    else if (c->pinf && !c->ninf) { v.lo = v.hi = INFINITY; }
    else if (c->ninf && !c->pinf) { v.lo = v.hi = -INFINITY; }
    else { v.lo = -INFINITY; v.hi = INFINITY; v.nan = 1; }
    if (c->nan_req && !c->pinf && !c->ninf && c->lo > c->hi) { v.lo = v.hi = NAN; v.nan = 1; }
    return v;
}

/* The exact summary of the block a[0..n) . b[0..n). */
static er_status er_block_summary(er_order_plan *pl, const er_dot_env *env, const double *a, const double *b,
                                  int64_t n, er_dotsum *sm) {
    if (!pl->have_acc) {
        ER_RETURN_IF_ERROR(er__acc_init(&pl->acc, env->base, env->top));
        pl->have_acc = 1;
    }
    int special = 0;
    for (int64_t k = 0; k < n && !special; k++) special = !isfinite(a[k]) || !isfinite(b[k]);
    er__dot_summary(sm, &pl->acc, a, b, n, env, special);
    return ER_OK;
}

/* The sub-sum a[0..n) . b[0..n) from zero, in the inner order. */
static er_status er_subsum(er_order_plan *pl, const er_dot_env *env, const double *a, const double *b, int64_t n,
                           int any, er_iv *out) {
    if (!any && pl->lo_mode == ER_ROUND_NEAREST && pl->hi_mode == ER_ROUND_NEAREST && pl->fma_never != pl->fma_always &&
        !env->wide &&
        ((pl->F->id == ER_FP32 && pl->fa->p <= 24 && pl->fb->p <= 24) ||
         (pl->F->id == ER_FP64 && pl->fa->p <= 26 && pl->fb->p <= 26))) {
        /* one fixed order rounding to nearest in fp32 or fp64 with operands whose products are exact doubles: the
         * hardware's operations are the exact single roundings er_step makes (IEEE specials included), so the
         * interval stays one value; run them directly */
        double r;
        if (pl->F->id == ER_FP32) {
            float acc = pl->std.init_first ? -0.0f : 0.0f;
            if (pl->fma_always) for (int64_t k = 0; k < n; k++) acc = fmaf((float)a[k], (float)b[k], acc);
            else for (int64_t k = 0; k < n; k++) acc = acc + (float)(a[k] * b[k]);
            r = acc;
        } else {
            double acc = pl->std.init_first ? -0.0 : 0.0;
            if (pl->fma_always) for (int64_t k = 0; k < n; k++) acc = fma(a[k], b[k], acc);
            else for (int64_t k = 0; k < n; k++) acc = acc + a[k] * b[k];
            r = acc;
        }
        *out = (er_iv){r, r, isnan(r)};
        return ER_OK;
    }
    if (!any) {
        double z = pl->std.init_first ? -0.0 : 0.0; /* -0 + x = x for every x: the same as starting at the first term */
        er_iv acc = {z, z, 0};
        for (int64_t k = 0; k < n; k++) er_step(pl, env->wide, &acc, a[k], b[k]);
        *out = acc;
        return ER_OK;
    }
    er_dotsum sm;
    ER_RETURN_IF_ERROR(er_block_summary(pl, env, a, b, n, &sm));
    const er_anyorder_bound *bd;
    ER_RETURN_IF_ERROR(er_bound_for(pl, n, &bd));
    er_cval c;
    er__anyorder_cval(&c, bd, pl->F, &sm, &pl->w);
    *out = er_iv_from_cval(&c);
    return ER_OK;
}

/* carry=fused with inner=any: the block's products and the running total t in [carry.lo, carry.hi] (a value of
 * F) summed in any order (orders.md, Theorem O3): monotone in t, so the set runs from the any-order lower edge
 * at t = lo to the upper edge at t = hi, with one more term in the bound. */
static er_status er_fused_block(er_order_plan *pl, const er_dot_env *env, const double *a, const double *b, int64_t n,
                                er_iv *carry) {
    er_dotsum sm;
    ER_RETURN_IF_ERROR(er_block_summary(pl, env, a, b, n, &sm));
    if (sm.special || !isfinite(carry->lo) || !isfinite(carry->hi) || carry->nan) {
        /* infinities or NaN in play: every value is kept possible (sound, coarse) */
        int certain = isnan(carry->lo) && isnan(carry->hi);
        if (!certain) { carry->lo = -INFINITY; carry->hi = INFINITY; }
        carry->nan = 1;
        return ER_OK;
    }
    const er_anyorder_bound *bd;
    ER_RETURN_IF_ERROR(er_bound_for(pl, n + 1, &bd));
    const er_fmt_info *F = pl->F;
    double tmag = fabs(carry->lo) > fabs(carry->hi) ? fabs(carry->lo) : fabs(carry->hi);
    double B = er__add_up(er__mul_up(bd->c1, er__add_up(er__add_up(sm.pos, sm.negs), tmag)), bd->c2);
    double P = er__add_up(er__mul_up(bd->g, er__add_up(sm.pos, carry->hi > 0 ? carry->hi : 0)), bd->c2);
    double N = er__add_up(er__mul_up(bd->g, er__add_up(sm.negs, carry->lo < 0 ? -carry->lo : 0)), bd->c2);
    int pov = P >= bd->thr, nov = N >= bd->thr;
    /* S lies in [S_lo, S_hi] (top 64 bits and the sticky bit); exact sums with the carry endpoints at 2300 bits */
    for (int up = 0; up < 2; up++) {
        mpfr_ptr x = up ? pl->sh : pl->sl;
        if (sm.m == 0) mpfr_set_zero(x, 1);
        else {
            mpfr_set_uj_2exp(x, sm.m, sm.e, MPFR_RNDN);
            if (sm.sticky && (up != sm.neg)) {
                mpfr_set_ui_2exp(pl->w.b, 1, sm.e, MPFR_RNDN);
                mpfr_add(x, x, pl->w.b, MPFR_RNDN);
            }
            if (sm.neg) mpfr_neg(x, x, MPFR_RNDN);
        }
        mpfr_add_d(x, x, up ? carry->hi : carry->lo, MPFR_RNDN);   /* exact at 2300 bits */
        mpfr_set_d(pl->w.b, B, MPFR_RNDN);
        if (up) mpfr_add(x, x, pl->w.b, MPFR_RNDU); else mpfr_sub(x, x, pl->w.b, MPFR_RNDD);
    }
    double lo = er__round_mpfr(F, pl->sl, ER_ROUND_UP, ER_OVERFLOW_IEEE);
    double hi = er__round_mpfr(F, pl->sh, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
    if (bd->faithful && (pov || nov)) { lo = -F->max; hi = F->max; }
    if (pov) hi = INFINITY;
    if (nov) lo = -INFINITY;
    carry->lo = lo;
    carry->hi = hi;
    carry->nan = pov && nov;
    return ER_OK;
}

/* Terms t_j (values of G, as intervals) added in any order in G (Lemma 3 with the terms as "products"). */
static er_status er_combine_any(er_order_plan *pl, const er_fmt_info *G, int64_t n, er_iv *out) {
    int has_pinf = 0, has_ninf = 0, nan = 0;
    double pos = 0, negs = 0, mag = 0;
    mpfr_set_zero(pl->sl, 1);
    mpfr_set_zero(pl->sh, 1);
    for (int64_t j = 0; j < n; j++) {
        double l = pl->parts[j].lo, h = pl->parts[j].hi;
        if (pl->parts[j].nan) nan = 1;
        if (isnan(l) || isnan(h)) continue; /* NaN for certain: nothing finite to add */
        /* An infinite endpoint makes that side of the result infinite; the other endpoint still counts, and a
         * finite value of a term is at most G's largest finite value in magnitude. */
        if (h == INFINITY) has_pinf = 1; else if (h != -INFINITY) mpfr_add_d(pl->sh, pl->sh, h, MPFR_RNDN);
        if (l == -INFINITY) has_ninf = 1; else if (l != INFINITY) mpfr_add_d(pl->sl, pl->sl, l, MPFR_RNDN);
        if (l == INFINITY) has_pinf = 1;   /* a term that is +inf for certain */
        if (h == -INFINITY) has_ninf = 1;
        double hc = h > G->max ? G->max : h, lc = l < -G->max ? -G->max : l;
        pos = er__add_up(pos, hc > 0 ? hc : 0);
        negs = er__add_up(negs, lc < 0 ? -lc : 0);
        double m = fabs(lc) > fabs(hc) ? fabs(lc) : fabs(hc);
        mag = er__add_up(mag, m > G->max ? G->max : m);
    }
    er_anyorder_bound bd;
    ER_RETURN_IF_ERROR(er__anyorder_bound_terms(&bd, G, n, pl->std.rounding == ER_RND_FAITHFUL));
    double B = er__mul_up(bd.c1, mag);
    mpfr_set_d(pl->w.b, B, MPFR_RNDN);
    mpfr_sub(pl->w.x, pl->sl, pl->w.b, MPFR_RNDD);
    double lo = er__round_mpfr(G, pl->w.x, ER_ROUND_UP, ER_OVERFLOW_IEEE);
    mpfr_add(pl->w.x, pl->sh, pl->w.b, MPFR_RNDU);
    double hi = er__round_mpfr(G, pl->w.x, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
    /* Theorem 5 with the partials as terms */
    int pov = er__mul_up(bd.g, pos) >= bd.thr, nov = er__mul_up(bd.g, negs) >= bd.thr;
    if (bd.faithful && (pov || nov)) { /* a saturating partial sum loses mass: any finite value (Theorem 6) */
        lo = -G->max;
        hi = G->max;
    }
    if (pov || has_pinf) hi = INFINITY;
    if (nov || has_ninf) lo = -INFINITY;
    out->lo = lo;
    out->hi = hi;
    /* NaN: a NaN partial, or +inf and -inf both reachable */
    out->nan = nan || (lo == -INFINITY && hi == INFINITY);
    if (nan) { out->lo = -INFINITY; out->hi = INFINITY; }
    return ER_OK;
}

static er_status er_grow(er_order_plan *pl, int64_t n) {
    if (n <= pl->tcap) return ER_OK;
    er_iv *p = realloc(pl->parts, sizeof *p * (size_t)n);
    if (!p) return er__fail(ER_ERR_NOMEM, "cannot allocate %lld partial sums", (long long)n);
    pl->parts = p;
    pl->tcap = n;
    return ER_OK;
}

/* The rounded product a*b as an interval (one value under rounding to nearest). */
static er_iv er_prod_iv(const er_order_plan *pl, int wide, double a, double b) {
    er_iv p = {er__round_prod(pl->F, a, b, wide, pl->lo_mode), er__round_prod(pl->F, a, b, wide, pl->hi_mode), 0};
    return p;
}

/* numpy's pairwise summation (PW_BLOCKSIZE 128, 8-way unrolled blocks) over the rounded products. */
static er_iv er_pairwise(const er_order_plan *pl, int wide, const double *a, const double *b, int64_t n) {
    const er_fmt_info *F = pl->F;
    er_iv t[8], res;
    if (n < 8) {
        res.lo = res.hi = 0.0;
        res.nan = 0;
        for (int64_t i = 0; i < n; i++) {
            er_iv p = er_prod_iv(pl, wide, a[i], b[i]);
            er_iv_add(pl, F, &res, &p);
        }
        return res;
    }
    if (n <= 128) {
        for (int j = 0; j < 8; j++) t[j] = er_prod_iv(pl, wide, a[j], b[j]);
        int64_t i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) {
                er_iv p = er_prod_iv(pl, wide, a[i + j], b[i + j]);
                er_iv_add(pl, F, &t[j], &p);
            }
        er_iv_add(pl, F, &t[0], &t[1]);
        er_iv_add(pl, F, &t[2], &t[3]);
        er_iv_add(pl, F, &t[4], &t[5]);
        er_iv_add(pl, F, &t[6], &t[7]);
        er_iv_add(pl, F, &t[0], &t[2]);
        er_iv_add(pl, F, &t[4], &t[6]);
        er_iv_add(pl, F, &t[0], &t[4]);
        res = t[0];
        for (; i < n; i++) {
            er_iv p = er_prod_iv(pl, wide, a[i], b[i]);
            er_iv_add(pl, F, &res, &p);
        }
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    er_iv x = er_pairwise(pl, wide, a, b, n2), y = er_pairwise(pl, wide, a + n2, b + n2, n - n2);
    er_iv_add(pl, F, &x, &y);
    return x;
}

/* Triton's tl.sum over one block (docs/algorithms/orders.md, Triton's tl.sum): B = triton_block elements, the first K
 * loaded and the rest +0, held S to a vector by 32 W threads; E = B / S vectors, Ld = min(32, E) lanes and
 * Wd = min(W, E / 32) warps hold distinct ones (the others copies). Thread t = 32 w + l chains its elements
 * r S 32 W + t S + s (r outer, s inner) from the first; each warp's Ld lanes are halved pairwise (a butterfly of
 * offsets Ld/2 .. 1, whose lane 0 adds lane o at offset o), then the Wd warps' totals the same way. */
int er__triton_vec(const er_standard *s, int64_t K, int a_bytes) {
    if (s->vec) return s->vec;
    int64_t v = K % 16 == 0 ? 16 / (a_bytes < 16 ? a_bytes : 16) : 1, cap = s->triton_block / (32 * (int64_t)s->warps);
    if (v > cap) v = cap;
    return v < 1 ? 1 : (int)v;
}

static er_status er_triton_sum(er_order_plan *pl, int wide, const double *a, const double *b, int64_t K, er_iv *res) {
    const er_standard *s = &pl->std;
    const er_fmt_info *F = pl->F;
    int64_t B = s->triton_block, S = er__triton_vec(s, K, pl->a_bytes), W = s->warps, E = B / S;
    int64_t Ld = E < 32 ? E : 32, Wd = E / 32 < W ? E / 32 : W, R = E / (32 * W);
    if (Wd < 1) Wd = 1;
    if (R < 1) R = 1;
    ER_RETURN_IF_ERROR(er_grow(pl, 32 * Wd));
    er_iv *part = pl->parts;
    const er_iv zero = {0.0, 0.0, 0};
    for (int64_t w = 0; w < Wd; w++)
        for (int64_t l = 0; l < Ld; l++) {
            int64_t t = 32 * w + l;
            er_iv acc = zero;
            for (int64_t r = 0; r < R; r++)
                for (int64_t j = 0; j < S; j++) {
                    int64_t k = r * S * 32 * W + t * S + j;
                    if (r == 0 && j == 0) acc = k < K ? er_prod_iv(pl, wide, a[k], b[k]) : zero;
                    else if (k < K) er_step(pl, wide, &acc, a[k], b[k]);
                    else er_iv_add(pl, F, &acc, &zero);
                }
            part[32 * w + l] = acc;
        }
    for (int64_t w = 0; w < Wd; w++)
        for (int64_t o = Ld / 2; o >= 1; o /= 2)
            for (int64_t l = 0; l < o; l++) er_iv_add(pl, F, &part[32 * w + l], &part[32 * w + l + o]);
    for (int64_t o = Wd / 2; o >= 1; o /= 2)
        for (int64_t w = 0; w < o; w++) er_iv_add(pl, F, &part[32 * w], &part[32 * (w + o)]);
    *res = part[0];
    return ER_OK;
}

/* The hull of two intervals. */
static er_iv er_iv_hull(er_iv x, const er_iv *y) {
    if (isnan(x.lo) || isnan(y->lo)) {
        if (!(isnan(x.lo) && isnan(y->lo))) { x.lo = -INFINITY; x.hi = INFINITY; x.nan = 1; }
    } else {
        if (y->lo < x.lo) x.lo = y->lo;
        if (y->hi > x.hi) x.hi = y->hi;
    }
    x.nan |= y->nan;
    return x;
}

/* tree: the postfix program on intervals. An addition of a product and a subtree is acc + a*b (er_step: rounded
 * then added, or fused, as fma= allows); of two products, the lower element's product rounded and the other's added
 * or fused (fma=either also the other way round); of two subtrees, a rounded sum. */
static er_status er_tree_sum(er_order_plan *pl, int wide, const double *a, const double *b, int64_t K, er_iv *res) {
    if (!pl->tpost || K != pl->tleaves)
        return er__fail(ER_ERR_STANDARD, "the tree has %lld elements; the reduction has K = %lld",
                        (long long)pl->tleaves, (long long)K);
    ER_RETURN_IF_ERROR(er_grow(pl, K));
    if (pl->F->id == ER_FP32 && pl->lo_mode == ER_ROUND_NEAREST && pl->hi_mode == ER_ROUND_NEAREST &&
        pl->fa->p <= 24 && pl->fb->p <= 24 && (!pl->fma_always || er__products_exact(pl->fa, pl->fb, pl->F))) {
        /* one run in float arithmetic (Theorem O1's emulation): each product of operands of at most 24 bits is exact
         * in double and rounded once to float, each addition one float addition (no contraction: -ffp-contract=off);
         * a fused product changes nothing where products are exact */
        float *fs = (float *)(void *)pl->parts;
        int64_t top = 0;
        for (int64_t i = 0; i < pl->tnpost; i++) {
            int32_t e = pl->tpost[i];
            if (e >= 0) fs[top++] = (float)(a[e] * b[e]);
            else { top--; fs[top - 1] = fs[top - 1] + fs[top]; }
        }
        res->lo = res->hi = fs[0];
        res->nan = isnan(fs[0]);
        (void)wide;
        return ER_OK;
    }
    er_iv *st = pl->parts;
    int32_t *leaf = pl->tleaf;
    int64_t top = 0;
    for (int64_t i = 0; i < pl->tnpost; i++) {
        int32_t e = pl->tpost[i];
        if (e >= 0) {
            leaf[top] = e;
            st[top] = er_prod_iv(pl, wide, a[e], b[e]);
            er_iv_widen_if_nan(&st[top++]);
            continue;
        }
        top--;
        er_iv *x = &st[top - 1], *y = &st[top];
        int32_t lx = leaf[top - 1], ly = leaf[top];
        if (lx >= 0 && ly >= 0) {
            int32_t lo = lx < ly ? lx : ly, hi = lx < ly ? ly : lx;
            er_iv r = er_prod_iv(pl, wide, a[lo], b[lo]);
            er_step(pl, wide, &r, a[hi], b[hi]);
            if (pl->fma_never && pl->fma_always) { /* either: the lower product fused instead */
                er_iv r2 = er_prod_iv(pl, wide, a[hi], b[hi]);
                er_step(pl, wide, &r2, a[lo], b[lo]);
                r = er_iv_hull(r, &r2);
            }
            *x = r;
        } else if (lx >= 0 || ly >= 0) {
            int32_t e2 = lx >= 0 ? lx : ly;
            er_iv acc = lx >= 0 ? *y : *x;
            er_step(pl, wide, &acc, a[e2], b[e2]);
            *x = acc;
        } else {
            er_iv_add(pl, pl->F, x, y);
        }
        leaf[top - 1] = -1;
    }
    *res = st[0];
    return ER_OK;
}

er_status er__dot_order(er_order_plan *pl, const er_dot_env *env, const double *a, const double *b, int64_t K,
                        int special, er_cval *out, const er_fmt_info **fmt) {
    (void)special; /* infinities and NaN travel through the emulation by IEEE rules */
    const er_standard *s = &pl->std;
    double z = s->init_first ? -0.0 : 0.0;
    er_iv r = {z, z, 0};
    *fmt = pl->F;
    switch (s->order) {
    case ER_ORDER_SEQUENTIAL:
        ER_RETURN_IF_ERROR(er_subsum(pl, env, a, b, K, 0, &r));
        break;
    case ER_ORDER_PAIRWISE:
        r = er_pairwise(pl, env->wide, a, b, K);
        break;
    case ER_ORDER_TRITON:
        if (K > s->triton_block)
            return er__fail(ER_ERR_STANDARD, "triton:%lld sums one block; K = %lld is longer",
                            (long long)s->triton_block, (long long)K);
        ER_RETURN_IF_ERROR(er_triton_sum(pl, env->wide, a, b, K, &r));
        break;
    case ER_ORDER_TREE:
        ER_RETURN_IF_ERROR(er_tree_sum(pl, env->wide, a, b, K, &r));
        break;
    case ER_ORDER_BLOCKED:
    case ER_ORDER_SPLIT: {
        int64_t chunk = s->order == ER_ORDER_BLOCKED ? s->block : (K + s->split - 1) / (s->split ? s->split : 1);
        if (chunk < 1) chunk = 1;
        int64_t nparts = K ? (K + chunk - 1) / chunk : 0;
        const er_fmt_info *G = s->order == ER_ORDER_SPLIT ? pl->P : pl->F;
        *fmt = G;
        if (s->carry_fused) {
            /* the running total enters each block's sum */
            for (int64_t k0 = 0; k0 < K; k0 += chunk) {
                int64_t n = K - k0 < chunk ? K - k0 : chunk;
                if (s->inner == ER_SUB_ANY) {
                    ER_RETURN_IF_ERROR(er_fused_block(pl, env, a + k0, b + k0, n, &r));
                } else {
                    for (int64_t k = 0; k < n; k++) er_step(pl, env->wide, &r, a[k0 + k], b[k0 + k]);
                }
            }
            break;
        }
        ER_RETURN_IF_ERROR(er_grow(pl, nparts ? nparts : 1));
        for (int64_t j = 0; j < nparts; j++) {
            int64_t k0 = j * chunk, n = K - k0 < chunk ? K - k0 : chunk;
            er_iv part;
            ER_RETURN_IF_ERROR(er_subsum(pl, env, a + k0, b + k0, n, s->inner == ER_SUB_ANY, &part));
            if (G != pl->F) { /* partials stored in another format */
                part.lo = er__round_double(G, part.lo, pl->lo_mode, ER_OVERFLOW_IEEE);
                part.hi = er__round_double(G, part.hi, pl->hi_mode, ER_OVERFLOW_IEEE);
                er_iv_widen_if_nan(&part);
            }
            pl->parts[j] = part;
        }
        if (s->outer == ER_SUB_ANY && nparts > 1) {
            ER_RETURN_IF_ERROR(er_combine_any(pl, G, nparts, &r));
        } else {
            for (int64_t j = 0; j < nparts; j++) er_iv_add(pl, G, &r, &pl->parts[j]);
        }
        break;
    }
    default:
        return er__fail(ER_ERR_INTERNAL, "order %d has no interval emulation", (int)s->order);
    }
    er__cval_from_interval(out, r.lo, r.hi, r.nan, *fmt);
    return ER_OK;
}

int64_t er__dot_order_tile_block(const er_order_plan *pl, int64_t K, int *outer) {
    const er_standard *s = &pl->std;
    *outer = 0;
    if (pl->lo_mode != ER_ROUND_NEAREST || pl->hi_mode != ER_ROUND_NEAREST || !pl->fma_never || pl->fma_always ||
        pl->F->id != ER_FP32 || pl->fa->p > 24 || pl->fb->p > 24 || K < 1)
        return 0;
    if (s->init_first) return 0; /* the tile loop starts at +0 */
    if (s->order == ER_ORDER_SEQUENTIAL) return K;
    if (s->order != ER_ORDER_BLOCKED && s->order != ER_ORDER_SPLIT) return 0;
    if (s->order == ER_ORDER_SPLIT && pl->P != pl->F) return 0;
    int64_t chunk = s->order == ER_ORDER_BLOCKED ? s->block : (K + s->split - 1) / (s->split ? s->split : 1);
    if (chunk < 1) chunk = 1;
    if (s->carry_fused) return s->inner == ER_SUB_ANY ? 0 : K; /* the running total through every product: sequential */
    if (s->inner == ER_SUB_ANY || s->outer == ER_SUB_ANY) return 0;
    *outer = 1;
    return chunk;
}

void er__dot_order_tile(int64_t block, int outer, const float *a, const float *tile, int64_t K, int T, float *out) {
    float tot[16], part[16];
    for (int t = 0; t < T; t++) tot[t] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += block) {
        int64_t k1 = k0 + block < K ? k0 + block : K;
        for (int t = 0; t < T; t++) part[t] = 0.0f;
        if (T == 16) {
            /* the common case in four vectors of four floats (GCC and Clang vector extensions: each lane's operations
             * are IEEE single roundings, as the scalar ones) */
            typedef float er_v4 __attribute__((vector_size(16)));
            er_v4 p0 = {0, 0, 0, 0}, p1 = p0, p2 = p0, p3 = p0;
            for (int64_t k = k0; k < k1; k++) {
                float ak = a[k];
                er_v4 av = {ak, ak, ak, ak}, b0, b1, b2, b3;
                const float *bk = tile + k * 16;
                memcpy(&b0, bk, 16);
                memcpy(&b1, bk + 4, 16);
                memcpy(&b2, bk + 8, 16);
                memcpy(&b3, bk + 12, 16);
                p0 = p0 + av * b0;
                p1 = p1 + av * b1;
                p2 = p2 + av * b2;
                p3 = p3 + av * b3;
            }
            memcpy(part, &p0, 16);
            memcpy(part + 4, &p1, 16);
            memcpy(part + 8, &p2, 16);
            memcpy(part + 12, &p3, 16);
        } else {
            for (int64_t k = k0; k < k1; k++) {
                float ak = a[k];
                const float *bk = tile + k * T;
                for (int t = 0; t < T; t++) part[t] = part[t] + ak * bk[t];
            }
        }
        /* the emulation adds each partial to a total starting at +0 (blocked, split), or is the one sum */
        if (outer) for (int t = 0; t < T; t++) tot[t] = tot[t] + part[t];
        else for (int t = 0; t < T; t++) tot[t] = part[t];
    }
    for (int t = 0; t < T; t++) out[t] = tot[t];
}
