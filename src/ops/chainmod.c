/* chainmod.c: the op module of chains (src/ops/module.h; docs/algorithms/chains.md): a reduction followed by
 * elementwise stages. The base's enclosure in the compute format, each stage's image of the set before it (every
 * stage is monotone in its input, so an interval's image lies between its ends' images; the special values are
 * followed separately), the output conversion; the exact result through the stages in MPFR, each stage exact (a
 * cast is a storage rounding of the kernel, not part of the real function). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h> /* before mpfr.h: the intmax_t functions */
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include <exactref/mpfr.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "enclose/elementwise.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"
#include "enclose/approx.h"
#include "enclose/ival.h"
#include "ops/chainvec.h"

/* The unary functions, ER_STAGE_EXP to ER_STAGE_RSQRT, and the activations: gelu (both forms) and silu. */
const char *er_stage_kind_name(er_stage_kind kind) {
    static const char *const names[] = { NULL,   "add", "mul",  "relu",    "cast", "gelu",  "silu",     "exp",
                                         "exp2", "log", "tanh", "sigmoid", "erf",  "rsqrt", "gelu_tanh" };
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : NULL;
}

size_t er_stage_sizeof(void) { return sizeof(er_stage); }

static int er_is_unary(er_stage_kind k) { return k >= ER_STAGE_EXP && k <= ER_STAGE_RSQRT; }
static int er_is_activation(er_stage_kind k) {
    return k == ER_STAGE_GELU || k == ER_STAGE_SILU || k == ER_STAGE_GELU_TANH;
}

/* The state of a chain: the base reference (not owned) and the stages, their tensors' views copied into views[]. */
#define ER_CHAIN_MAX 12
typedef struct er_chain_state {
    const er_ref *base;
    er_stage stages[ER_CHAIN_MAX];
    er_tensor views[ER_CHAIN_MAX];
    int nstages;
    char chain_name[32]; /* the base's name and the stages', as reports show them: "matmul+add+relu+cast" */
} er_chain_state;
static er_chain_state *er__chain(const er_ref *r) { return (er_chain_state *)r->priv; }

/* The base's inputs, then each stage's tensor or reference's inputs. */
static int er_chain_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap) {
    const er_chain_state *c = er__chain(r);
    int n = er__ref_inputs(c->base, views, names, cap);
    for (int i = 0; i < c->nstages && n < cap; i++) {
        if (c->stages[i].t) { names[n] = "a stage's tensor"; views[n++] = c->stages[i].t; }
        if (c->stages[i].ref) n += er__ref_inputs(c->stages[i].ref, views + n, names + n, cap - n);
    }
    return n;
}

/* A chain decides on its fast path where its base and reference operands give single sets (chains.md). */
static int er_chain_fast(const er_ref *r) {
    const er_chain_state *c = er__chain(r);
    int fast = er_ref_fast(c->base) || c->base->mod == &er__tensor_module;
    for (int i = 0; i < c->nstages && fast; i++)
        fast = !c->stages[i].ref || er_ref_fast(c->stages[i].ref) || c->stages[i].ref->mod == &er__tensor_module;
    return fast;
}

er_status er_chain(er_ref **out, const er_ref *base, const er_stage *stages, int nstages) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(base, "base");
    if (nstages < 0 || nstages > ER_CHAIN_MAX)
        return er__fail(ER_ERR_INVALID, "nstages %d: expected 0 to %d", nstages, ER_CHAIN_MAX);
    if (nstages && !stages) return er__fail(ER_ERR_NULL, "stages is NULL with %d stages", nstages);
    if (!((base->mod == &er__matmul_module && !er__dot(base)->b_is_one) || base->mod == &er__sum_module ||
          base->mod == &er__tensor_module))
        return er__fail(ER_ERR_UNSUPPORTED,
                        "a chain starts from a matmul, a scaled matmul, a sum or a tensor (er_tensor_ref) "
                        "in this version (not %s)",
                        er__op_name(base));
    for (int i = 0; i < nstages; i++) {
        const er_stage *s = &stages[i];
        if ((s->kind == ER_STAGE_ADD || s->kind == ER_STAGE_MUL) && s->ref) {
            if (s->t) return er__fail(ER_ERR_INVALID, "stage %d: give a tensor or a reference, not both", i);
            int nd;
            int64_t sh[ER_MAX_DIMS];
            if (er_ref_num_outputs(s->ref) != 1 || er_ref_shape(s->ref, &nd, sh) != ER_OK)
                return er__fail(ER_ERR_UNSUPPORTED, "stage %d: its reference must have one output (not %s)", i,
                                er__op_name(s->ref));
            int same = nd == base->ndim;
            for (int d = 0; same && d < nd; d++) same = sh[d] == base->shape[d];
            if (!same) return er__fail(ER_ERR_SHAPE, "stage %d: its reference's output must have the base's shape", i);
            continue;
        }
        if (s->kind == ER_STAGE_ADD || s->kind == ER_STAGE_MUL) {
            if (!s->t) {
                if (isnan(s->scalar) || isinf(s->scalar))
                    return er__fail(ER_ERR_INVALID,
                                    "stage %d: the scalar %g is not finite (give a tensor for special values)", i,
                                    s->scalar);
                continue;
            }
            ER_RETURN_IF_ERROR(er__tensor_check(s->t, "a stage's tensor"));
            int same = s->t->ndim == base->ndim;
            for (int d = 0; same && d < base->ndim; d++) same = s->t->shape[d] == base->shape[d];
            if (!same)
                return er__fail(ER_ERR_SHAPE,
                                "stage %d: its tensor must have the output's shape (%d dimensions; stride 0 where it "
                                "broadcasts)",
                                i, base->ndim);
        } else if (s->kind == ER_STAGE_CAST) {
            if (!er__fmt(s->format))
                return er__fail(ER_ERR_FORMAT, "stage %d: invalid format value %d", i, (int)s->format);
        } else if (er_is_activation(s->kind) || er_is_unary(s->kind)) {
            if (!(s->scalar >= 0 && s->scalar <= 64))
                return er__fail(ER_ERR_INVALID, "stage %d: %g ulps: expected 0 (the function's default) to 64", i,
                                s->scalar);
        } else if (s->kind != ER_STAGE_RELU) {
            return er__fail(ER_ERR_INVALID, "stage %d: unknown kind %d", i, (int)s->kind);
        }
    }
    er_ref *r;
    ER_RETURN_IF_ERROR(er__ref_alloc(&r, &er__chain_module));
    er_stage *st = er__chain(r)->stages;
    for (int i = 0; i < nstages; i++) {
        st[i] = stages[i];
        if (stages[i].t) { er__chain(r)->views[i] = *stages[i].t; st[i].t = &er__chain(r)->views[i]; }
    }
    er__chain(r)->base = base;
    er__chain(r)->nstages = nstages;
    static const char *const kinds[15] = { "",     "add", "mul",  "relu",    "cast", "gelu",  "silu",     "exp",
                                           "exp2", "log", "tanh", "sigmoid", "erf",  "rsqrt", "gelu_tanh" };
    int len = snprintf(er__chain(r)->chain_name, sizeof er__chain(r)->chain_name, "%s", er__op_name(base));
    for (int i = 0; i < nstages && len < (int)sizeof er__chain(r)->chain_name; i++)
        len += snprintf(er__chain(r)->chain_name + len, sizeof er__chain(r)->chain_name - (size_t)len, "+%s",
                        kinds[stages[i].kind]);
    r->ndim = base->ndim;
    memcpy(r->shape, base->shape, sizeof r->shape);
    r->n = base->n;
    r->name = er__chain(r)->chain_name;
    *out = r;
    return ER_OK;
}

/* The standard applies to the base; the stages compute in its compute format, and no cast is wider than it. */
static er_status er_chain_check(const er_ref *ref, const er_standard *std) {
    const er_ref *base = er__chain(ref)->base;
    /* math=triton is the stages' (Triton's fp32 lowering of exp, exp2, log, rsqrt, sigmoid); the base's standard
     * is the rest */
    if (std->fast_math == 1)
        return er__fail(ER_ERR_STANDARD, "math=fast is not modelled for chains; give each function's ulps instead");
    if (std->fast_math == 2 && std->compute != ER_FP32)
        return er__fail(ER_ERR_STANDARD, "math=triton models Triton's fp32 lowering: it takes compute=fp32");
    er_standard bs = *std;
    bs.fast_math = 0;
    ER_RETURN_IF_ERROR(er__module_of(base)->check(base, &bs));
    for (int i = 0; i < er__chain(ref)->nstages; i++)
        if (er__chain(ref)->stages[i].ref)
            ER_RETURN_IF_ERROR(er__module_of(er__chain(ref)->stages[i].ref)->check(er__chain(ref)->stages[i].ref, &bs));
    const er_fmt_info *E = er__fmt(std->compute == ER_TF32 ? ER_FP32 : std->compute);
    for (int i = 0; i < er__chain(ref)->nstages; i++)
        if (er__chain(ref)->stages[i].kind == ER_STAGE_CAST && er__fmt(er__chain(ref)->stages[i].format)->p > E->p)
            return er__fail(ER_ERR_STANDARD, "stage %d casts to %s, wider than the compute format %s the stages run in",
                            i, er__fmt(er__chain(ref)->stages[i].format)->name, E->name);
    return ER_OK;
}

/* The value a stage's operand has at element idx, rounded to nearest into E (the kernel converts it first). */
static double er_stage_operand(const er_stage *s, const er_fmt_info *E, int64_t idx) {
    double b = s->t ? er__load(s->t, er__offset(s->t, idx)) : s->scalar;
    return er__round_double(E, b, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
}

/* The set after stage s, of the set v before it (values of E), at element idx. */
static void er_stage_apply(er_cval *v, const er_stage *s, const er_fmt_info *E, int64_t idx, int tri,
                           const er_cval *w) {
    if (v->nan_req && s->kind != ER_STAGE_RELU) return; /* NaN in, NaN out */
    if (er_is_unary(s->kind)) { er__unary_image(v, s->kind, s->scalar, E, tri); return; }
    if (w) { er__set_op(v, w, s->kind == ER_STAGE_MUL, E); return; }
    int finite = v->lo <= v->hi;
    if (er_is_activation(s->kind)) {
        /* +inf gives +inf (gelu: inf (1 + 1); silu: inf / (1 + 0), inf 1); -inf gives NaN (gelu: -inf times 0; silu:
         * -inf / inf, -inf 0) */
        int pinf = v->pinf, ninf = v->ninf;
        if (finite) er__act_interval(E, s->kind, tri, s->scalar > 0 ? s->scalar : 2.0, v->lo, v->hi, &v->lo, &v->hi);
        v->pinf = (uint8_t)pinf;
        v->ninf = 0;
        if (ninf) v->nan = 1;
        if (!finite) { v->lo = INFINITY; v->hi = -INFINITY; }
        return;
    }
    if (s->kind == ER_STAGE_RELU) {
        /* max(x, 0): exact; -inf gives 0; NaN stays NaN (torch) or gives 0 (max instructions return the number) */
        int zero = (finite && v->lo <= 0) || v->ninf || v->nan || v->nan_req;
        double lo = finite ? fmax(v->lo, 0.0) : INFINITY, hi = finite ? fmax(v->hi, 0.0) : -INFINITY;
        if (zero) { lo = fmin(lo, 0.0); hi = fmax(hi, 0.0); }
        v->lo = lo;
        v->hi = hi;
        v->ninf = 0;
        if (v->nan_req) { v->nan_req = 0; v->nan = 1; }
        return;
    }
    if (s->kind == ER_STAGE_CAST) {
        const er_fmt_info *G = er__fmt(s->format);
        er_overflow ov = er__overflow_rule(G, ER_OVERFLOW_DEFAULT);
        int pinf = v->pinf, ninf = v->ninf;
        v->pinf = v->ninf = 0;
        if (finite) {
            double l = er__round_double(G, v->lo, ER_ROUND_NEAREST, ov),
                   h = er__round_double(G, v->hi, ER_ROUND_NEAREST, ov);
            /* an end that overflows to NaN (a format without infinities): NaN possible, and every value beyond it
             * overflows too; the others end at the largest finite value */
            int empty = 0;
            if (isnan(l)) { v->nan = 1; if (v->lo < 0) l = -G->max; else empty = 1; }
            if (isnan(h)) { v->nan = 1; if (v->hi > 0) h = G->max; else empty = 1; }
            if (empty) { v->lo = INFINITY; v->hi = -INFINITY; }
            else er__set_ends(v, G, l, h);
        }
        for (int k = 0; k < 2; k++) { /* the infinities through the cast */
            if (!(k ? ninf : pinf)) continue;
            double r = er__round_double(G, k ? -INFINITY : INFINITY, ER_ROUND_NEAREST, ov);
            if (isnan(r)) v->nan = 1;
            else if (r > 0) v->pinf = 1;
            else v->ninf = 1;
        }
        return;
    }
    double b = er_stage_operand(s, E, idx);
    if (isnan(b)) { v->nan_req = 1; v->nan = 1; v->lo = INFINITY; v->hi = -INFINITY; v->pinf = v->ninf = 0; return; }
    int pinf = v->pinf, ninf = v->ninf;
    v->pinf = v->ninf = 0;
    if (s->kind == ER_STAGE_ADD) {
        if (isinf(b)) {
            /* every finite value gives b; the infinity of the other sign gives NaN */
            if (finite || (b > 0 ? pinf : ninf)) { if (b > 0) v->pinf = 1; else v->ninf = 1; }
            if (b > 0 ? ninf : pinf) v->nan = 1;
            v->lo = INFINITY;
            v->hi = -INFINITY;
            return;
        }
        v->pinf = (uint8_t)pinf;
        v->ninf = (uint8_t)ninf;
        if (finite)
            er__set_ends(v, E, er__round_sum(E, v->lo, b, ER_ROUND_NEAREST),
                         er__round_sum(E, v->hi, b, ER_ROUND_NEAREST));
        return;
    }
    /* mul: increasing in x for b > 0, decreasing for b < 0; b = 0 gives 0 for finite x and NaN for infinities */
    if (b == 0) {
        if (pinf || ninf) v->nan = 1;
        if (finite) { v->lo = 0.0; v->hi = 0.0; }
        return;
    }
    if (isinf(b)) {
        if (finite && v->lo <= 0 && v->hi >= 0) v->nan = 1; /* 0 times inf */
        int up = (finite && v->hi > 0) || pinf, down = (finite && v->lo < 0) || ninf;
        if (b > 0) { v->pinf = (uint8_t)up; v->ninf = (uint8_t)down; }
        else { v->pinf = (uint8_t)down; v->ninf = (uint8_t)up; }
        v->lo = INFINITY;
        v->hi = -INFINITY;
        return;
    }
    if (b > 0) { v->pinf = (uint8_t)pinf; v->ninf = (uint8_t)ninf; }
    else { v->pinf = (uint8_t)ninf; v->ninf = (uint8_t)pinf; }
    if (finite) {
        double l = er__round_prod(E, b > 0 ? v->lo : v->hi, b, 1, ER_ROUND_NEAREST);
        double h = er__round_prod(E, b > 0 ? v->hi : v->lo, b, 1, ER_ROUND_NEAREST);
        er__set_ends(v, E, l, h);
    }
}

/* A mul stage (by m) followed by an add stage (of b), which a compiler may contract into one fused multiply-add:
 * RN(x m + b) for every x of v, monotone in x as the separate roundings are (docs/algorithms/chains.md, Lemma C3).
 * always: the fused evaluation alone; else either, joined. */
static void er_mul_add(er_cval *v, const er_stage *mul, const er_stage *add, const er_fmt_info *E, int64_t idx,
                       int always, const er_cval *wm, const er_cval *wa) {
    er_cval sep = *v, fused = *v;
    er_stage_apply(&sep, mul, E, idx, 0, wm);
    er_stage_apply(&sep, add, E, idx, 0, wa);
    if (wm || wa) {
        /* a reference operand: RN(x m + b) over the corners of x's, m's and b's intervals (x m + b is bilinear in x
         * and m and increasing in b; Lemma C11), the specials as the separate evaluation has them */
        er_cval pm, pa;
        er__cval_empty(&pm);
        er__cval_empty(&pa);
        if (wm) pm = *wm; else er__cval_put(&pm, er_stage_operand(mul, E, idx));
        if (wa) pa = *wa; else er__cval_put(&pa, er_stage_operand(add, E, idx));
        fused = sep;
        if (v->lo <= v->hi && pm.lo <= pm.hi && pa.lo <= pa.hi && !v->nan_req) {
            double mn = INFINITY, mx = -INFINITY;
            for (int k = 0; k < 8; k++) {
                double f = er__round_fma(E, k & 1 ? v->hi : v->lo, k & 2 ? pm.hi : pm.lo, k & 4 ? pa.hi : pa.lo, 1,
                                         ER_ROUND_NEAREST);
                mn = fmin(mn, f);
                mx = fmax(mx, f);
            }
            er_cval f;
            er__cval_empty(&f);
            er__set_ends(&f, E, mn, mx);
            er__cval_join(&fused, &f);
        }
        if (always) { *v = fused; return; }
        *v = sep;
        er__cval_join(v, &fused);
        return;
    }
    double m = er_stage_operand(mul, E, idx), b = er_stage_operand(add, E, idx);
    if (v->lo <= v->hi && isfinite(m) && isfinite(b) && !v->nan_req) {
        /* the specials as the separate evaluation has them (an infinity times m plus b), the finite ends fused */
        fused = sep;
        double l = er__round_fma(E, m > 0 ? v->lo : v->hi, m, b, 1, ER_ROUND_NEAREST);
        double h = er__round_fma(E, m > 0 ? v->hi : v->lo, m, b, 1, ER_ROUND_NEAREST);
        fused.lo = INFINITY;
        fused.hi = -INFINITY;
        er__set_ends(&fused, E, fmin(l, h), fmax(l, h));
    } else {
        fused = sep;
    }
    if (always) { *v = fused; return; }
    *v = sep;
    er__cval_join(v, &fused);
}

/* The most bits an exact intermediate value keeps (chains.md, Lemma C14): every value within the formats' reach
 * needs far fewer (a sum of fp64 products spans about 4400 bits, a product of two such 8800); past it (exp2 of a
 * large argument, then an addition: 66666 bits, or 2^30 where MPFR's exponents allow) the value is kept rounded to
 * odd at the cap, so that its later roundings to any format come out as the exact value's, in bounded time and
 * stack (GMP's multiplications at 66666 bits overflowed a 1 MiB stack). */
#define ER_CHAIN_PREC_CAP 16384

/* x after an operation rounded toward zero with ternary value t: rounded to odd (an inexact result's last bit set). */
static void er_round_odd(mpfr_ptr x, int t) {
    if (t != 0 && mpfr_regular_p(x) && mpfr_min_prec(x) < mpfr_get_prec(x)) {
        if (mpfr_sgn(x) > 0) mpfr_nextabove(x);
        else mpfr_nextbelow(x);
    }
}

static mpfr_prec_t er_prec_capped(mpfr_prec_t p) { return p > ER_CHAIN_PREC_CAP ? ER_CHAIN_PREC_CAP : p; }

/* The stages applied exactly to x (element idx): add and mul at enough bits (up to the cap, then rounded to odd),
 * relu; a cast is the kernel's storage rounding, not part of the real function. */
static void er_chain_stages_mpfr(const er_ref *ref, int64_t idx, mpfr_t x) {
    for (int i = 0; i < er__chain(ref)->nstages; i++) {
        const er_stage *s = &er__chain(ref)->stages[i];
        if (s->kind == ER_STAGE_RELU) {
            if (mpfr_sgn(x) < 0) mpfr_set_zero(x, 1);
        } else if (er_is_activation(s->kind)) {
            /* (x / 2)(1 + erf(x / sqrt 2)), x / (1 + exp(-2 u)) = (x / 2)(1 + tanh(u)) with u = sqrt(2 / pi)(x +
             * 0.044715 x^3), or x / (1 + exp(-x)), at 256 bits: not exact, but within 2^-250 of it */
            mpfr_t t;
            mpfr_init2(t, 256);
            mpfr_prec_round(x, mpfr_get_prec(x) > 256 ? mpfr_get_prec(x) : 256, MPFR_RNDN);
            if (s->kind == ER_STAGE_GELU_TANH) {
                mpfr_t c;
                mpfr_init2(c, 256);
                mpfr_pow_ui(t, x, 3, MPFR_RNDN);
                mpfr_set_str(c, "0.044715", 10, MPFR_RNDN);
                mpfr_mul(t, t, c, MPFR_RNDN);
                mpfr_add(t, t, x, MPFR_RNDN);
                mpfr_const_pi(c, MPFR_RNDN);
                mpfr_ui_div(c, 2, c, MPFR_RNDN);
                mpfr_sqrt(c, c, MPFR_RNDN);
                mpfr_mul(t, t, c, MPFR_RNDN);
                mpfr_mul_si(t, t, -2, MPFR_RNDN);
                mpfr_exp(t, t, MPFR_RNDN);
                mpfr_add_ui(t, t, 1, MPFR_RNDN);
                mpfr_div(x, x, t, MPFR_RNDN);
                mpfr_clear(c);
            } else if (s->kind == ER_STAGE_GELU) {
                mpfr_sqrt_ui(t, 2, MPFR_RNDN);
                mpfr_div(t, x, t, MPFR_RNDN);
                mpfr_erf(t, t, MPFR_RNDN);
                mpfr_add_ui(t, t, 1, MPFR_RNDN);
                mpfr_mul(x, x, t, MPFR_RNDN);
                mpfr_div_2ui(x, x, 1, MPFR_RNDN);
            } else {
                mpfr_neg(t, x, MPFR_RNDN);
                mpfr_exp(t, t, MPFR_RNDN);
                mpfr_add_ui(t, t, 1, MPFR_RNDN);
                mpfr_div(x, x, t, MPFR_RNDN);
            }
            mpfr_clear(t);
        } else if (er_is_unary(s->kind)) {
            /* at 256 bits: f(x) at a dyadic x != 0 is a dyadic (then exact here) or irrational, so no exact result
             * is a rounding boundary of the output that this value misses (chains.md, Lemma C8) */
            mpfr_t
                y; /* f of the exact x into 256 bits, whatever x's own precision (MPFR's cost follows the result's) */
            mpfr_init2(y, 256);
            if (s->kind == ER_STAGE_SIGMOID) {
                mpfr_neg(x, x, MPFR_RNDN); /* exact */
                mpfr_exp(y, x, MPFR_RNDN);
                mpfr_add_ui(y, y, 1, MPFR_RNDN);
                mpfr_ui_div(y, 1, y, MPFR_RNDN);
            } else {
                static const int fns[] = {ER_FN_EXP, ER_FN_EXP2, ER_FN_LOG, ER_FN_TANH, 0, ER_FN_ERF, ER_FN_RSQRT};
                er__mpfr_fn(fns[s->kind - ER_STAGE_EXP], y, x, MPFR_RNDN);
            }
            mpfr_swap(x, y);
            mpfr_clear(y);
        } else if ((s->kind == ER_STAGE_ADD || s->kind == ER_STAGE_MUL) && s->ref) {
            /* the other reference's exact value, added or multiplied exactly (enough bits for both) */
            int64_t index[ER_MAX_DIMS];
            er__index_of(ref, idx, index);
            mpfr_t w;
            mpfr_init2(w, 64);
            if (er_ref_exact_mpfr(w, s->ref, index) != ER_OK) mpfr_set_nan(w);
            mpfr_prec_t p = er_prec_capped(mpfr_get_prec(x) + mpfr_get_prec(w) + 2);
            if (s->kind == ER_STAGE_ADD && mpfr_regular_p(x) && mpfr_regular_p(w)) {
                long dx = mpfr_get_exp(x) - mpfr_get_exp(w);
                p = er_prec_capped(p + (mpfr_prec_t)(dx < 0 ? (dx < -ER_CHAIN_PREC_CAP ? ER_CHAIN_PREC_CAP : -dx)
                                                                : (dx > ER_CHAIN_PREC_CAP ? ER_CHAIN_PREC_CAP : dx)));
            }
            mpfr_t r;
            mpfr_init2(r, p);
            er_round_odd(r, s->kind == ER_STAGE_ADD ? mpfr_add(r, x, w, MPFR_RNDZ) : mpfr_mul(r, x, w, MPFR_RNDZ));
            mpfr_set_prec(x, p);
            mpfr_set(x, r, MPFR_RNDN);
            mpfr_clears(r, w, (mpfr_ptr)0);
        } else if (s->kind == ER_STAGE_ADD || s->kind == ER_STAGE_MUL) {
            double b = s->t ? er__load(s->t, er__offset(s->t, idx)) : s->scalar;
            /* exact: a double added to (or multiplied into) x at enough bits, from x's top bit (or b's) down to the
             * lower of their last bits */
            mpfr_prec_t p = mpfr_get_prec(x) + 64;
            if (s->kind == ER_STAGE_ADD && mpfr_regular_p(x) && b != 0 && isfinite(b)) {
                int eb;
                frexp(b, &eb);
                long top = mpfr_get_exp(x) > eb ? mpfr_get_exp(x) : eb, low = mpfr_get_exp(x) - (long)mpfr_get_prec(x);
                if (eb - 53 < low) low = eb - 53;
                p = top - low + 2 > ER_CHAIN_PREC_CAP ? ER_CHAIN_PREC_CAP : (mpfr_prec_t)(top - low + 2);
            }
            p = er_prec_capped(p);
            mpfr_prec_round(x, p > mpfr_get_prec(x) ? p : mpfr_get_prec(x), MPFR_RNDN); /* exact: more bits */
            er_round_odd(x, s->kind == ER_STAGE_ADD ? mpfr_add_d(x, x, b, MPFR_RNDZ) : mpfr_mul_d(x, x, b, MPFR_RNDZ));
        }
    }
}

/* An activation at x in double arithmetic (within a few ulps: libm's functions, a few roundings). */
static double er_act_double(er_stage_kind kind, double x) {
    if (kind == ER_STAGE_GELU) return 0.5 * x * erfc(-x * 0.70710678118654752440);
    if (kind == ER_STAGE_SILU) return x / (1.0 + exp(-x));
    return x / (1.0 + exp(-2.0 * 0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}

/* A unary stage's function at x in double arithmetic (libm's, within a few ulps). */
static double er_unary_double(er_stage_kind kind, double x) {
    switch (kind) {
    case ER_STAGE_EXP: return exp(x);
    case ER_STAGE_EXP2: return exp2(x);
    case ER_STAGE_LOG: return log(x);
    case ER_STAGE_TANH: return tanh(x);
    case ER_STAGE_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case ER_STAGE_ERF: return erf(x);
    default: return 1.0 / sqrt(x);
    }
}

/* The stages applied to the real interval [*l, *h] (doubles), the result widened outward to doubles again: each
 * add and mul rounded to nearest then stepped one double outward, relu exact; a cast is not part of the real
 * function. 0 where a value is not finite. */
static int er_chain_stages_double(const er_ref *ref, int64_t idx, double *l, double *h, const double *opl,
                                  const double *oph) {
    double a = *l, b = *h;
    for (int i = 0; i < er__chain(ref)->nstages && isfinite(a) && isfinite(b); i++) {
        const er_stage *s = &er__chain(ref)->stages[i];
        if (s->kind == ER_STAGE_RELU) { a = a > 0 ? a : 0.0; b = b > 0 ? b : 0.0; continue; }
        if (er_is_activation(s->kind)) {
            /* not monotone: the values at the ends (libm's erf, exp, within a few double ulps), widened by the
             * slope's bound times the width (|gelu'| in both forms and |silu'| are below 1.2) and a relative 2^-45;
             * 1 + erf(t) as erfc(-t) and 1 + tanh(u) as 2 / (1 + exp(-2 u)): no cancellation near -1 */
            double fa = er_act_double(s->kind, a), fb = a == b ? fa : er_act_double(s->kind, b);
            /* each has one minimum (gelu's near -0.752 in both forms, silu's near -1.278): monotone on an interval
             * below -2 or above -0.4 (silu: -0.9), the values at its ends bound it (chains.md, Lemma C12) */
            int mono = b < -2.0 || a > (s->kind == ER_STAGE_SILU ? -0.9 : -0.4);
            double w = mono ? 0.0 : 1.2 * (b - a), m = fmax(fabs(fa), fabs(fb)) * 0x1p-45 + 0x1p-1000;
            a = fmin(fa, fb) - w - m;
            b = fmax(fa, fb) + w + m;
            continue;
        }
        if (er_is_unary(s->kind)) {
            /* monotone: libm's values at the ends (within a few double ulps), widened by a relative 2^-45; log and
             * rsqrt of a non-positive end stop here */
            double fa, fb;
            if ((s->kind == ER_STAGE_LOG || s->kind == ER_STAGE_RSQRT) && !(a > 0)) { a = NAN; break; }
            fa = er_unary_double(s->kind, s->kind == ER_STAGE_RSQRT ? b : a);
            fb = a == b ? fa : er_unary_double(s->kind, s->kind == ER_STAGE_RSQRT ? a : b);
            a = fa - (fabs(fa) * 0x1p-45 + 0x1p-1000);
            b = fb + (fabs(fb) * 0x1p-45 + 0x1p-1000);
            continue;
        }
        if (s->kind != ER_STAGE_ADD && s->kind != ER_STAGE_MUL) continue;
        if (s->ref) {
            /* the other reference's exact value within its bracket: an interval */
            double cl = opl ? opl[i] : NAN, ch = oph ? oph[i] : NAN;
            if (!isfinite(cl) || !isfinite(ch)) { a = NAN; break; }
            if (s->kind == ER_STAGE_ADD) { a = -er__next_up(-(a + cl)); b = er__next_up(b + ch); continue; }
            double c4[4] = {a * cl, a * ch, b * cl, b * ch}, mn = c4[0], mx = c4[0];
            for (int k = 1; k < 4; k++) { mn = fmin(mn, c4[k]); mx = fmax(mx, c4[k]); }
            a = -er__next_up(-mn);
            b = er__next_up(mx);
            continue;
        }
        double c = s->t ? er__load(s->t, er__offset(s->t, idx)) : s->scalar;
        if (s->kind == ER_STAGE_ADD) { a = -er__next_up(-(a + c)); b = er__next_up(b + c); continue; }
        double x = a * c, y = b * c;
        a = -er__next_up(-(x < y ? x : y));
        b = er__next_up(x < y ? y : x);
    }
    *l = a;
    *h = b;
    return isfinite(a) && isfinite(b);
}

/* The exact result of element idx, to double (*exact) and correctly rounded to the output (*rounded). The chain is
 * monotone in the base's exact result S, which lies in a bracket [lo, hi]: within a double's ulp of e = RN64(S), or
 * on the fast path within K 2^-52 |a|_2 |b|_2 of fl64(A B). Where the chain's values at the bracket's ends round
 * alike (enclosed in doubles first, then in MPFR), that is the rounding, and *exact the chain at e (enclosed within
 * a few double ulps by the first way); else S itself, summed in MPFR. */
static er_status er_chain_exact(const er_ref *ref, int64_t idx, const er_sink *sk, mpfr_t x, double *exact,
                                double *rounded, const double *opl, const double *oph) {
    int64_t index[ER_MAX_DIMS];
    er__index_of(ref, idx, index);
    double e, lo, hi;
    ER_RETURN_IF_ERROR(er__ref_bracket(er__chain(ref)->base, idx, &e, &lo, &hi));
    if (isfinite(e) && isfinite(lo) && isfinite(hi)) {
        /* first in double: the chain over the bracket, widened outward at each stage; where both ends round alike
         * in the output, that is the correctly rounded result (the chain is monotone in S) */
        double a = lo, b = hi, ea = e, eb = e;
        if (er_chain_stages_double(ref, idx, &a, &b, opl, oph) &&
            er_chain_stages_double(ref, idx, &ea, &eb, opl, oph)) {
            double ra = er__round_double(sk->O, a, ER_ROUND_NEAREST, sk->ov),
                   rb = er__round_double(sk->O, b, ER_ROUND_NEAREST, sk->ov);
            if (ra == rb && ea <= eb) {
                *rounded = ra;
                *exact = ea == eb ? ea : ea + (eb - ea) / 2; /* within the interval of the chain at e */
                return ER_OK;
            }
        }
        int monotone = 1;
        for (int i = 0; i < er__chain(ref)->nstages; i++) monotone &= !er_is_activation(er__chain(ref)->stages[i].kind);
        double r[3] = {0, 1, 0};
        for (int k = 0; k < 3 && monotone; k++) {
            mpfr_set_prec(x, 64);
            mpfr_set_d(x, k == 0 ? lo : k == 1 ? hi : e, MPFR_RNDN); /* exact */
            er_chain_stages_mpfr(ref, idx, x);
            r[k] = er__round_mpfr(sk->O, x, ER_ROUND_NEAREST, sk->ov);
            if (k == 2) *exact = mpfr_get_d(x, MPFR_RNDN);
        }
        if (monotone && (r[0] == r[1] || (isnan(r[0]) && isnan(r[1])))) { *rounded = r[0]; return ER_OK; }
    }
    mpfr_set_prec(x, 64);
    ER_RETURN_IF_ERROR(er_ref_exact_mpfr(x, er__chain(ref)->base, index));
    er_chain_stages_mpfr(ref, idx, x);
    *exact = mpfr_get_d(x, MPFR_RNDN);
    *rounded = er__round_mpfr(sk->O, x, ER_ROUND_NEAREST, sk->ov);
    return ER_OK;
}

/* One thread's contiguous run of elements [begin, end), into its sink. */
typedef struct er_chain_job {
    const er_ref *ref;
    const er_standard *std;
    const er_fmt_info *E;
    const double *lo, *hi;
    const uint8_t *fl;
    /* each stage's reference operand: its sets (lo, hi, flags) and brackets of its exact values, per element */
    double *olo[12], *ohi[12], *obl[12], *obh[12];
    uint8_t *ofl[12];
    er_sink *sk;
    int64_t begin, end;
    er_status st;
} er_chain_job;

/* An element's set as er_ref_enclosure stores it (er__sink_put), from a module's cursor. */
static void er_cval_of_cset(er_cval *v, const er_cset *c) {
    int finite = c->lo <= c->hi && !c->nan_req;
    er__cval_of_enclosure(v, finite ? c->lo : NAN, finite ? c->hi : NAN, er__cset_flags(c));
}

/* Element idx's output set from its base's set v (changed) and its reference operands' sets w and brackets [bl, bh]
 * (stage i's at i), with its exact values. */
/* Stage i applied to v (with the next, where a mul then add may be fused): the index of the stage after them. */
static int er_chain_step(const er_ref *ref, const er_standard *std, const er_fmt_info *E, int64_t idx, int i,
                         er_cval *v, const er_cval *w) {
    const er_stage *s = &er__chain(ref)->stages[i];
    const er_cval *wi = s->ref ? &w[i] : NULL;
    if (s->kind == ER_STAGE_MUL && i + 1 < er__chain(ref)->nstages &&
        er__chain(ref)->stages[i + 1].kind == ER_STAGE_ADD && std->fma != ER_FMA_NEVER) {
        er_mul_add(v, s, &er__chain(ref)->stages[i + 1], E, idx, std->fma == ER_FMA_ALWAYS, wi,
                   er__chain(ref)->stages[i + 1].ref ? &w[i + 1] : NULL);
        return i + 2;
    }
    er_stage_apply(v, s, E, idx, std->fast_math == 2, wi);
    return i + 1;
}

static er_status er_chain_cset(const er_ref *ref, const er_standard *std, const er_fmt_info *E, const er_sink *sk,
                               int64_t idx, er_cval *v, const er_cval *w, const double *bl, const double *bh, mpfr_t x,
                               er_cset *c) {
    for (int i = 0; i < er__chain(ref)->nstages;) i = er_chain_step(ref, std, E, idx, i, v, w);
    double exact = NAN, rounded = NAN;
    ER_RETURN_IF_ERROR(er_chain_exact(ref, idx, sk, x, &exact, &rounded, bl, bh));
    er__cset_build(c, sk->O, sk->ov, 1, v, exact, rounded);
    return ER_OK;
}

/* For a failing element with output y: the most leading stages whose set, rounded to the output, holds y (0: the
 * base's alone; er_element's stage), from the base's set v0 and the operands' w; -1 where none does. A mul and the
 * add fused with it count as one step. */
static int er_chain_trace(const er_ref *ref, const er_standard *std, const er_fmt_info *E, const er_sink *sk,
                          int64_t idx, const er_cval *v0, const er_cval *w, double y) {
    er_cval v = *v0;
    int found = -1;
    for (int i = 0; i < er__chain(ref)->nstages && isfinite(y);) {
        er_cset c;
        er__cset_build(&c, sk->O, sk->ov, 0, &v, NAN, NAN);
        if (y >= c.lo && y <= c.hi && !c.nan_req) found = i;
        i = er_chain_step(ref, std, E, idx, i, &v, w);
    }
    return found;
}

/* Element idx's set into the sink, from its base's set v0 and its operands' sets w and brackets; a failing element
 * gets its stage (er_chain_trace). */
static er_status er_chain_put(const er_ref *ref, const er_standard *std, const er_fmt_info *E, er_sink *sk, int64_t idx,
                              const er_cval *v0, const er_cval *w, const double *bl, const double *bh, mpfr_t x) {
    er_cval v = *v0;
    er_cset c;
    ER_RETURN_IF_ERROR(er_chain_cset(ref, std, E, sk, idx, &v, w, bl, bh, x, &c));
    er__sink_put(sk, idx, &c);
    if (er__sink_reads_output(sk) && !er_class_passes((er_class)er__sink_classes(sk)[idx]))
        er__sink_stage(sk, idx,
                       er_chain_trace(ref, std, E, sk, idx, v0, w, er__load(sk->out, er__offset(sk->out, idx))));
    return ER_OK;
}

static void *er_chain_run(void *arg) {
    er_chain_job *j = arg;
    const er_ref *ref = j->ref;
    mpfr_t x;
    mpfr_init2(x, 64);
    j->st = ER_OK;
    for (int64_t idx = j->begin; idx < j->end && j->st == ER_OK; idx++) {
        if ((idx & 1023) == 0) {
            if (er__cancelled()) {
                j->st = ER_ERR_CANCELLED;
                break;
            }
            if (idx > j->begin) er__progress_step(1024);
        }
        er_cval v, w[12];
        double bl[12], bh[12];
        er__cval_of_enclosure(&v, j->lo[idx], j->hi[idx], j->fl[idx]);
        for (int i = 0; i < er__chain(ref)->nstages; i++) {
            if (!er__chain(ref)->stages[i].ref) continue;
            bl[i] = j->obl[i][idx];
            bh[i] = j->obh[i][idx];
            er__cval_of_enclosure(&w[i], j->olo[i][idx], j->ohi[i][idx], j->ofl[i][idx]);
        }
        j->st = er_chain_put(ref, j->std, j->E, j->sk, idx, &v, w, bl, bh, x);
    }
    mpfr_clear(x);
    if (j->begin > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread: MPFR's per-thread constants */
    return NULL;
}

/* The fast decision (docs/algorithms/chains.md, "The fast decision"). An element's set holds the value of every
 * evaluation of the stages their standard admits from every value of the base's set (Lemmas C1 to C11), and it is an
 * interval: it holds every value between two such values. The witnesses here: every step rounded to nearest in
 * fp32, every function correctly rounded (within any ulps budget), from two values of the base's set that its
 * module's cursor gives (and of each reference operand's). An output between them, after the output's rounding, is
 * covered; exact where it is the correctly rounded result, known where the chain's double enclosure over the base's
 * bracket rounds alike (er_chain_exact's first step). The other elements go through the engine, each from its
 * modules' single sets, and so does the element whose witnesses lie furthest apart, as the report's widest. */

/* f(x) correctly rounded to fp32 where the bounds of Lemma C10 decide it; NAN where they do not. */
static double er_cr32(int fn, double x) {
    if (x == 0)
        return fn == ER_FN_EXP || fn == ER_FN_EXP2   ? 1.0
               : fn == ER_FN_TANH || fn == ER_FN_ERF ? x
                                                     : NAN; /* exact, no MPFR */
    double dn, up;
    er__exact_fn(er__fmt(ER_FP32), fn, x, &dn,
                 &up); /* the bounds the sets use: libm's within its margin, else MPFR's */
    float a = (float)dn, b = (float)up;
    return a == b ? a : NAN;
}

/* exp(x) correctly rounded, or (math=triton) 2^RN(x RN(log2 e)) correctly rounded: values each model admits. */
static float er_wit_exp(int tri, float x) {
    if (!tri) return (float)er_cr32(ER_FN_EXP, x);
    return (float)er_cr32(ER_FN_EXP2, x * (float)1.44269504088896340736);
}

/* A transcendental's correctly rounded value v moved one float up (var 1) or down (var 2), where its budget of U
 * ulps holds that: U >= 1.5 and v normal (v is within half an ulp of the exact value, the step one ulp of v's
 * binade, at most 1.5 of the exact value's). Else v (var 0, or a step the budget may not hold). */
static float er_wit_step(float v, int var, double U) {
    if ((var != 1 && var != 2) || U < 1.5 || !(fabsf(v) >= 0x1p-126f) || !isfinite(v)) return v;
    return nextafterf(v, var == 1 ? INFINITY : -INFINITY);
}

/* The stages evaluated from the base value x0 (of fp32) in fp32, each step rounded to nearest and each function
 * correctly rounded; a reference operand's value at stage i is opw[i]. 0 where no such value is found (a function
 * the margin does not decide, a value that is not finite). Every step is one the stage's set admits: a mul then add
 * fused only under fma=always; x / d for silu and 1 / d for sigmoid correctly rounded. Variants, each as admissible
 * (chains.md, Lemma C12): var 1 and 2 move every function's value one float up or down (er_wit_step); var 3 and 4
 * take gelu's tanh form as x sigmoid(2u), x / d and x RN(1 / d) (Lemma C9), and var 4 silu as x RN(1 / d). */
static int er_chain_witness(const er_ref *ref, const er_standard *std, const er_fmt_info *E, int64_t idx, double x0,
                            const double *opw, int var, double *out) {
    int tri = std->fast_math == 2;
    float x = (float)x0;
    for (int i = 0; i < er__chain(ref)->nstages && isfinite(x); i++) {
        const er_stage *s = &er__chain(ref)->stages[i];
        double U = s->scalar > 0 && s->kind != ER_STAGE_ADD && s->kind != ER_STAGE_MUL ? s->scalar
                   : s->kind == ER_STAGE_LOG                                           ? 1.0
                                                                                       : 2.0;
        switch (s->kind) {
        case ER_STAGE_ADD:
        case ER_STAGE_MUL: {
            float b = (float)(s->ref ? opw[i] : er_stage_operand(s, E, idx));
            if (s->kind == ER_STAGE_MUL && i + 1 < er__chain(ref)->nstages &&
                er__chain(ref)->stages[i + 1].kind == ER_STAGE_ADD && std->fma == ER_FMA_ALWAYS) {
                const er_stage *a = &er__chain(ref)->stages[++i];
                x = fmaf(x, b, (float)(a->ref ? opw[i] : er_stage_operand(a, E, idx)));
            } else {
                x = s->kind == ER_STAGE_ADD ? x + b : x * b;
            }
            break;
        }
        case ER_STAGE_RELU: x = x > 0 ? x : 0.0f; break;
        case ER_STAGE_CAST: {
            const er_fmt_info *G = er__fmt(s->format);
            x = (float)er__round_double(G, x, ER_ROUND_NEAREST, er__overflow_rule(G, ER_OVERFLOW_DEFAULT));
            break;
        }
        case ER_STAGE_EXP: x = er_wit_step(er_wit_exp(tri, x), var, U); break;
        case ER_STAGE_EXP2: x = er_wit_step((float)er_cr32(ER_FN_EXP2, x), var, U); break;
        case ER_STAGE_LOG: x = x > 0 ? er_wit_step((float)er_cr32(ER_FN_LOG, x), var, U) : NAN; break;
        case ER_STAGE_TANH: x = er_wit_step((float)er_cr32(ER_FN_TANH, x), var, U); break;
        case ER_STAGE_ERF: x = er_wit_step((float)er_cr32(ER_FN_ERF, x), var, U); break;
        case ER_STAGE_RSQRT: x = x > 0 ? er_wit_step((float)er_cr32(ER_FN_RSQRT, x), var, U) : NAN; break;
        case ER_STAGE_SIGMOID: x = 1.0f / (1.0f + er_wit_step(er_wit_exp(tri, -x), var, U)); break;
        case ER_STAGE_SILU: {
            float d = 1.0f + er_wit_step(er_wit_exp(tri, -x), var, U);
            x = var == 4 ? x * (1.0f / d) : x / d;
            break;
        }
        case ER_STAGE_GELU: {
            float e = er_wit_step((float)er_cr32(ER_FN_ERF, x * (float)0.70710678118654752440), var, U);
            x = (x * 0.5f) * (1.0f + e);
            break;
        }
        case ER_STAGE_GELU_TANH: {
            float cube = (x * x) * x, u = (float)0.79788456080286535588 * (x + (float)0.044715 * cube);
            if (var == 3 || var == 4) { /* x sigmoid(2u): d = 1 + exp(-2u) */
                float d = 1.0f + er_wit_exp(tri, -2.0f * u);
                x = var == 3 ? x / d : x * (1.0f / d);
            } else {
                x = (x * 0.5f) * (1.0f + er_wit_step((float)er_cr32(ER_FN_TANH, u), var, U));
            }
            break;
        }
        default: x = NAN;
        }
    }
    *out = x;
    return isfinite(x);
}

/* One thread's share of the fast decision: its cursors (0: the base's; i + 1: stage i's reference's), its chunks
 * (pass 1) or its contiguous range (pass 2). */
typedef struct er_chain_fast_job {
    const er_ref *ref;
    const er_standard *std;
    const er_fmt_info *E;
    const er_op_module *mod[13];
    void *cur[13];
    er_sink *sk;
    int64_t *next;
    int64_t counts[2], widx, begin, end;
    double wrel;
    er_status st;
    int refs, forms;       /* whether a stage has a reference operand; one with a second form (gelu_tanh, silu) */
    er_stage_kind vec;     /* the one stage the batch pass decides (exp, tanh, sigmoid, silu, relu), or 0 */
    double vec_ulps;       /* its exp's ulps budget */
    const er_tensor *vxt;  /* its input tensor (fp32, fp16 or bf16, row-major) */
    int simd;              /* er__simd(): the AVX2 build of the exps' loops */
    int epi;               /* the epilogue pass (chainepi.c) applies, its plan and arrays */
    er_epi plan;
    er_epi_scratch *scr;
    const er_epi_pre *pre; /* the pass's classes from the GPU (er_covers_device), else NULL */
    /* the outputs the witnesses leave open and found outside their whole sets (er_chain_outside), marked
     * ER_FAST_OUT; the widest of those sets (its width, element and set); whether the last element tried was one (the
     * next is then tried that way first) */
    er_outs outs;
    double owrel;
    er_cset owc;
    int64_t owidx;
    int out_first;
} er_chain_fast_job;

/* The chain's double enclosure over the base's bracket [a, b] (and the operands' [bl, bh]) rounded to the output's
 * format at both ends, into *ra and *rb; 0 where it cannot be formed. Where both ends round to one value, that is the
 * exact result correctly rounded, which every chain's set holds (er__cset_build's any_order rule). */
static int er_chain_rounded_ends(const er_chain_fast_job *j, int64_t idx, double a, double b, const double *bl,
                                 const double *bh, double *ra, double *rb) {
    if (!isfinite(a) || !isfinite(b) || !er_chain_stages_double(j->ref, idx, &a, &b, bl, bh)) return 0;
    *ra = er__round_double(j->sk->O, a, ER_ROUND_NEAREST, j->sk->ov);
    *rb = er__round_double(j->sk->O, b, ER_ROUND_NEAREST, j->sk->ov);
    return 1;
}

/* The class of output y (finite) of element idx where the bracket or the witnesses decide it, with the decided
 * set's hull [*wlo, *whi] in the output format ([y, y] for an exact output); ER_PENDING where they do not. */
static int er_chain_fast_class(const er_chain_fast_job *j, int64_t idx, double y, double *wlo, double *whi) {
    const er_ref *ref = j->ref;
    const er_fmt_info *O = j->sk->O;
    er_overflow ov = j->sk->ov;
    int found = 0, ends = 0; /* the last effort's enclosure rounded to O: ra, rb */
    double a = NAN, b = NAN, bl[12], bh[12], ra = NAN, rb = NAN; /* brackets of the base's and operands' values */
    for (int effort = 0; effort < 2 && !found; effort++) {
        double l, h, ol[12], oh[12], w1, w2;
        if (!j->mod[0]->cursor_inner(j->cur[0], idx, effort, &l, &h, &a, &b)) continue;
        int ok = 1;
        for (int i = 0; i < er__chain(ref)->nstages && ok; i++)
            if (er__chain(ref)->stages[i].ref)
                ok = j->mod[i + 1]->cursor_inner(j->cur[i + 1], idx, effort, &ol[i], &oh[i], &bl[i], &bh[i]);
        if (!ok) continue;
        /* the enclosure first: an output it rounds to alone is exact, its set [y, y], whatever the witnesses reach */
        ends = er_chain_rounded_ends(j, idx, a, b, bl, bh, &ra, &rb);
        if (ends && ra == rb && y == ra) {
            *wlo = *whi = y;
            return ER_CLASS_EXACT;
        }
        if (!er_chain_witness(ref, j->std, j->E, idx, l, ol, 0, &w1)) continue;
        double o1 = er__round_double(O, w1, ER_ROUND_NEAREST, ov);
        if (!isfinite(o1)) continue;
        *wlo = *whi = o1;
        if ((found = y == o1)) break; /* the one witness suffices (most outputs are the nearest value to it) */
        if (!er_chain_witness(ref, j->std, j->E, idx, h, oh, 0, &w2)) continue;
        double o2 = er__round_double(O, w2, ER_ROUND_NEAREST, ov);
        if (!isfinite(o2)) continue;
        *wlo = fmin(o1, o2);
        *whi = fmax(o1, o2);
        found = y >= *wlo && y <= *whi;
        /* the variants at both ends (one where they are the same point): more values the set holds, a wider hull
         * (an output the kernel's own form of a function gives, a correctly rounded result of gelu or silu, lies in
         * it far more often) */
        int nends = l == h && !j->refs ? 1 : 2;
        for (int var = 1; var <= (j->forms ? 4 : 2) && !found; var++)
            for (int end = 0; end < nends; end++) {
                double w, o;
                if (!er_chain_witness(ref, j->std, j->E, idx, end ? h : l, end ? oh : ol, var, &w)) continue;
                o = er__round_double(O, w, ER_ROUND_NEAREST, ov);
                if (!isfinite(o)) continue;
                *wlo = fmin(*wlo, o);
                *whi = fmax(*whi, o);
            }
        found = y >= *wlo && y <= *whi;
        if (l == h && a == b && !j->refs) break; /* an exact base value: a second effort gives the same */
    }
    if (!found || !ends) return ER_PENDING;
    if (ra == rb) return y == ra ? ER_CLASS_EXACT : ER_CLASS_COVERED;
    return y < ra || y > rb ? ER_CLASS_COVERED : ER_PENDING;
}

/* The batch pass over elements [begin, end) of a one-stage chain on a tensor (er_chain_vec_kind): dec[i] gets the
 * class the per-element decision (er_chain_fast_class and what follows it) gives where this pass can tell it, else
 * ER_VEC_OPEN. exp's value comes from er__exp_bounds (double-bounds.md, Theorem D1) where the per-element decision
 * calls libm and MPFR: its witness, exp correctly rounded to fp32, where both bounds round alike; the exact result's
 * bracket from the same bounds (chains.md, Lemma C12 and "The batch pass"). Each witness and bracket end is rounded
 * to the output format O (a narrower O: the exact result's rounding from the bracket, never from the witness). A
 * set decided here has the hull [y, y] or is left to the per-element decision, so the widest set is found as
 * before. */
/* er_chain_vec_decide's loop for a relu, exp, tanh, sigmoid or silu stage, without a call or a branch: the classes
 * the general loop gives where it reaches no witness beyond the first (exact, covered, else open), every rounding
 * into O through er_vec_rn (an element whose roundings it cannot give is left open). */
ER_ALWAYS_INLINE void er_chain_vec_body(int64_t m, er_stage_kind k, int narrow, int drop, double minn, double maxv,
                                        const float *restrict xs, const float *restrict ys,
                                        const double *restrict elo, const double *restrict ehi,
                                        uint8_t *restrict dec) {
    uint64_t half = narrow ? (UINT64_C(1) << (drop - 1)) - 1 : 0, mask = narrow ? ~((UINT64_C(1) << drop) - 1) : 0;
    double big = 1.5 * minn * (double)(UINT64_C(1) << drop); /* 1.5 2^52 times O's least subnormal */
    for (int64_t i = 0; i < m; i++) {
        double x = xs[i], y = ys[i], lo, hi, o1;
        int ok = (fabs(x) <= FLT_MAX) & (fabs(y) <= FLT_MAX);
        if (k == ER_STAGE_RELU) { /* x is exact, and so is max(x, 0) */
            double r = er_vec_rn(x > 0 ? x : 0.0, narrow, drop, half, mask, minn, big, maxv, &ok);
            dec[i] = (ok & (y == r)) ? ER_CLASS_EXACT : ER_VEC_OPEN;
            continue;
        }
        if (k == ER_STAGE_SIGMOID || k == ER_STAGE_SILU) {
            /* exp(-x) correctly rounded to fp32 where both bounds round to it, the one witness from it, the exact
             * result's bracket c / (1 + e) over e in [elo, ehi] (c = 1 or x); y must be the witness, or the
             * bracket's one rounding, for this loop to class it */
            float a = (float)elo[i];
            ok &= (a == (float)ehi[i]) & (fabs(a) <= FLT_MAX);
            a = ok ? a : 0.0f; /* (a value the lanes left open never see) */
            float c = k == ER_STAGE_SIGMOID ? 1.0f : xs[i], w = c / (1.0f + a);
            ok &= fabs(w) <= FLT_MAX;
            o1 = narrow ? er_vec_rn(w, narrow, drop, half, mask, minn, big, maxv, &ok) : w; /* w is fp32's already */
            er__quot_1p_bounds(c, elo[i], ehi[i], &lo, &hi);
        } else {
            if (k == ER_STAGE_EXP) {
                lo = elo[i];
                hi = ehi[i];
            } else { /* tanh from exp(2 |x|)'s bounds for |x| >= 1/4, from its series below (x a float) */
                ok &= er__tanh_any_bounds(x, elo[i], ehi[i], &lo, &hi);
            }
            /* the exact result rounded to fp32, where both ends round alike: the set holds it */
            float a = (float)lo;
            ok &= (a == (float)hi) & (fabs(a) <= FLT_MAX);
            if (!narrow) { /* a is the exact result rounded into O: exact if y is a, else left open */
                dec[i] = (ok & (y == a)) ? ER_CLASS_EXACT : ER_VEC_OPEN;
                continue;
            }
            o1 = er_vec_rn(a, narrow, drop, half, mask, minn, big, maxv, &ok);
        }
        double ra = er_vec_rn(lo, narrow, drop, half, mask, minn, big, maxv, &ok),
               rb = er_vec_rn(hi, narrow, drop, half, mask, minn, big, maxv, &ok);
        /* exp, tanh: y is the witness's rounding or the exact result's (the bracket decides); sigmoid, silu: the
         * witness's, or the bracket's one rounding */
        ok &= (y == o1) | ((y == ra) & ((k == ER_STAGE_EXP) | (k == ER_STAGE_TANH) | (ra == rb)));
        dec[i] = !ok                  ? ER_VEC_OPEN
                 : ra == rb           ? (y == ra ? ER_CLASS_EXACT : ER_CLASS_COVERED)
                 : ((y < ra) | (y > rb)) ? ER_CLASS_COVERED
                                       : ER_VEC_OPEN;
    }
}
#define ER_CHAIN_VEC_ARGS                                                                                             \
    int64_t m, er_stage_kind k, int narrow, int drop, double minn, double maxv, const float *restrict xs,            \
        const float *restrict ys, const double *restrict elo, const double *restrict ehi, uint8_t *restrict dec
#define ER_CHAIN_VEC_CALL(kind, nw) er_chain_vec_body(m, kind, nw, drop, minn, maxv, xs, ys, elo, ehi, dec)
#define ER_CHAIN_VEC_KINDS(nw)                                                                                        \
    {                                                                                                                 \
        if (k == ER_STAGE_RELU) ER_CHAIN_VEC_CALL(ER_STAGE_RELU, nw);                                                 \
        else if (k == ER_STAGE_EXP) ER_CHAIN_VEC_CALL(ER_STAGE_EXP, nw);                                              \
        else if (k == ER_STAGE_SIGMOID) ER_CHAIN_VEC_CALL(ER_STAGE_SIGMOID, nw);                                      \
        else if (k == ER_STAGE_SILU) ER_CHAIN_VEC_CALL(ER_STAGE_SILU, nw);                                            \
        else ER_CHAIN_VEC_CALL(ER_STAGE_TANH, nw);                                                                    \
    }
#define ER_CHAIN_VEC_BODY                                                                                             \
    {                                                                                                                 \
        if (narrow) ER_CHAIN_VEC_KINDS(1)                                                                             \
        else ER_CHAIN_VEC_KINDS(0)                                                                                    \
    }
ER_ALWAYS_INLINE void er_chain_vec_any(ER_CHAIN_VEC_ARGS) ER_CHAIN_VEC_BODY
ER_SIMD_BUILDS(er_chain_vec, (ER_CHAIN_VEC_ARGS), (m, k, narrow, drop, minn, maxv, xs, ys, elo, ehi, dec),
               er_chain_vec_any)

static void er_chain_vec_decide(const er_chain_fast_job *j, int64_t begin, int64_t end, uint8_t *dec) {
    const er_fmt_info *O = j->sk->O;
    er_overflow ov = j->sk->ov;
    int64_t m = end - begin;
    int o32 = O->id == ER_FP32;
    float xs[ER_VEC_CHUNK], ys[ER_VEC_CHUNK];
    double elo[ER_VEC_CHUNK], ehi[ER_VEC_CHUNK];
    er_vec_load(j->vxt, begin, m, xs);
    er_vec_load(j->sk->out, begin, m, ys);
    er_stage_kind k = j->vec;
    if (k != ER_STAGE_RELU) {
        double ts[ER_VEC_CHUNK];
        for (int64_t i = 0; i < m; i++) { /* exp(x), exp(2 |x|) for tanh, or exp(-x) */
            double x = xs[i];
            ts[i] = k == ER_STAGE_EXP ? x : k == ER_STAGE_TANH ? 2 * fabs(x) : -x;
        }
        er__exp_bounds_run(j->simd, m, ts, elo, ehi);
    }
    if (o32 || O->id == ER_BF16 || O->id == ER_FP16) { /* every output er_chain_vec_kind admits */
        int narrow = !o32, drop = 53 - O->p;
        er_chain_vec(j->simd, m, k, narrow, drop, O->min_normal, O->max, xs, ys, elo, ehi, dec);
        return;
    }
    for (int64_t i = 0; i < m; i++) {
        float x = xs[i];
        double y = ys[i], lo, hi; /* the exact result's bracket */
        dec[i] = ER_VEC_OPEN;
        if (!isfinite(x) || !isfinite(y)) continue;
        if (k == ER_STAGE_RELU) { /* x is exact, and so is max(x, 0) */
            if (y == er__round_double(O, x > 0 ? x : 0.0, ER_ROUND_NEAREST, ov)) dec[i] = ER_CLASS_EXACT;
            continue;
        }
        if (k == ER_STAGE_EXP || k == ER_STAGE_TANH) {
            /* the function's bounds (tanh |x| from exp(2 |x|)'s, for |x| >= 1/4, Lemma D6; tanh is odd); the
             * witness is its value correctly rounded to fp32, where both bounds round alike */
            if (k == ER_STAGE_EXP) {
                lo = elo[i];
                hi = ehi[i];
            } else if (!er__tanh_any_bounds(x, elo[i], ehi[i], &lo, &hi)) {
                continue;
            }
            float a = (float)lo;
            if (a != (float)hi || !isfinite(a)) continue;
            if (o32) { /* a is the exact result rounded, and the set holds it */
                if (y == a) dec[i] = ER_CLASS_EXACT;
                continue;
            }
            if (y != er__round_double(O, a, ER_ROUND_NEAREST, ov) && y != er__round_double(O, lo, ER_ROUND_NEAREST, ov))
                continue; /* y is the witness's rounding, or perhaps the exact result's (the bracket decides below) */
        } else {
            float a = (float)elo[i]; /* exp(-x) correctly rounded to fp32, where both bounds round to it */
            if (a != (float)ehi[i] || !isfinite(a)) continue;
            float w = k == ER_STAGE_SIGMOID ? 1.0f / (1.0f + a) : x / (1.0f + a); /* the one witness */
            double o1 = er__round_double(O, w, ER_ROUND_NEAREST, ov);
            if (!isfinite(w) || !isfinite(o1)) continue;
            er__quot_1p_bounds(k == ER_STAGE_SIGMOID ? 1.0 : (double)x, elo[i], ehi[i], &lo, &hi);
            double rl = er__round_double(O, lo, ER_ROUND_NEAREST, ov);
            if (y != o1 && !(y == rl && rl == er__round_double(O, hi, ER_ROUND_NEAREST, ov))) {
                /* (an output equal to the exact result correctly rounded is in the set: every chain's set holds it)
                 * more witnesses: silu's other form, x RN(1 / d); and from exp's value a moved one float either
                 * way, as the per-element decision's variants do (er_wit_step). Every one is in the set, an
                 * interval, and so is its rounding to O in the output's: so is y between the least and the
                 * greatest */
                float wl = w, wh = w;
                if (k == ER_STAGE_SILU) {
                    float w2 = x * (1.0f / (1.0f + a));
                    wl = w2 < wl ? w2 : wl;
                    wh = w2 > wh ? w2 : wh;
                }
                for (int var = 1; var <= 2; var++) {
                    float nb = er_wit_step(a, var, j->vec_ulps), d, v1, v2; /* the variants' step (Lemma C12) */
                    if (nb == a) continue;
                    d = 1.0f + nb;
                    v1 = k == ER_STAGE_SIGMOID ? 1.0f / d : x / d;
                    v2 = k == ER_STAGE_SILU ? x * (1.0f / d) : v1;
                    wl = v1 < wl ? v1 : wl;
                    wl = v2 < wl ? v2 : wl;
                    wh = v1 > wh ? v1 : wh;
                    wh = v2 > wh ? v2 : wh;
                }
                if (!(y >= er__round_double(O, wl, ER_ROUND_NEAREST, ov) &&
                      y <= er__round_double(O, wh, ER_ROUND_NEAREST, ov))) {
                    /* the stage's set at x, which the per-element decision builds (a tensor's value is exact in
                     * fp32) */
                    er_cval v;
                    memset(&v, 0, sizeof v);
                    v.lo = v.hi = x;
                    if (k == ER_STAGE_SILU) er__act_interval(j->E, k, 0, j->vec_ulps, x, x, &v.lo, &v.hi);
                    else er__unary_image(&v, k, er__chain(j->ref)->stages[0].scalar, j->E, 0);
                    if (!(y >= er__round_double(O, v.lo, ER_ROUND_NEAREST, ov) &&
                          y <= er__round_double(O, v.hi, ER_ROUND_NEAREST, ov)))
                        continue;
                }
            }
            /* the exact result's bracket above: c / (1 + e) over e in [elo, ehi] (c = 1 or x; Lemma D6) */
        }
        /* y is in the set: exact where the bracket rounds to y alone, covered where it rounds to another value
         * alone or y lies outside its rounding */
        double ra = er__round_double(O, lo, ER_ROUND_NEAREST, ov), rb = er__round_double(O, hi, ER_ROUND_NEAREST, ov);
        if (ra == rb) dec[i] = y == ra ? ER_CLASS_EXACT : ER_CLASS_COVERED;
        else if (y < ra || y > rb) dec[i] = ER_CLASS_COVERED;
    }
}

static er_status er_chain_fast_inputs(const er_chain_fast_job *j, int64_t idx, er_cval *v, er_cval *w, double *bl,
                                      double *bh);

/* Whether output y (finite) of element idx lies outside the set er_chain_put would put, that set computed as there
 * from the modules' single sets but without the exact value: its stages' set joined with the correctly rounded
 * result r, known where the chain's double enclosure over the base's bracket rounds to one value (r lies in that
 * rounding: the fast decision's enclosure). 0 where r is not so known or y lies in the set (or a module refuses:
 * its put refuses again). Where 1: the set in *c (its exact value NaN, its rounded r) and y's distance as
 * er_classify gives it. */
static int er_chain_outside(const er_chain_fast_job *j, int64_t idx, double y, double *dist, er_cset *c) {
    const er_ref *ref = j->ref;
    const er_fmt_info *O = j->sk->O;
    er_cval v, w[12];
    double bl[12], bh[12], e, a, b;
    if (er_chain_fast_inputs(j, idx, &v, w, bl, bh) != ER_OK ||
        er__ref_bracket(er__chain(ref)->base, idx, &e, &a, &b) != ER_OK) {
        er__ok();
        return 0;
    }
    double ra, rb;
    if (!er_chain_rounded_ends(j, idx, a, b, bl, bh, &ra, &rb) || !isfinite(ra) || ra != rb) return 0;
    for (int i = 0; i < er__chain(ref)->nstages;) i = er_chain_step(ref, j->std, j->E, idx, i, &v, w);
    er__cset_build(c, O, j->sk->ov, 1, &v, NAN, ra);
    if (c->nan_req || !(c->lo <= c->hi) || (y >= c->lo && y <= c->hi)) return 0;
    double edge = y > c->hi ? c->hi : c->lo;
    *dist = fabs(y - edge) / er__ulp(O, edge);
    return 1;
}

/* er_chain_outside for an element the witnesses (or a batch pass) leave open: marked ER_FAST_OUT and recorded where
 * its output lies outside its set (its width a candidate for the widest); 0 otherwise. */
static int er_chain_mark_out(er_chain_fast_job *j, int64_t idx, double y, uint8_t *classes) {
    double d;
    er_cset c;
    if (!er_chain_outside(j, idx, y, &d, &c) || !er__outs_mark(&j->outs, idx, d, d)) return 0;
    classes[idx] = ER_FAST_OUT;
    double rel = er_set_rel(c.lo, c.hi);
    if (rel > j->owrel || (rel == j->owrel && rel >= 0 && idx < j->owidx)) {
        j->owrel = rel;
        j->owidx = idx;
        j->owc = c;
    }
    return 1;
}

static void *er_chain_fast_run(void *arg) {
    er_chain_fast_job *j = arg;
    const er_tensor *out = j->sk->out;
    uint8_t *classes = er__sink_classes(j->sk);
    int contig = er__row_major(out);
    int64_t n = j->ref->n, counts[2] = {0, 0}, widx = -1;
    double wrel = -1;
    for (;;) {
        int64_t begin = __atomic_fetch_add(j->next, ER_VEC_CHUNK, __ATOMIC_RELAXED);
        if (begin >= n) break;
        if (er__cancelled()) {
            j->st = ER_ERR_CANCELLED;
            break;
        }
        int64_t end = begin + ER_VEC_CHUNK < n ? begin + ER_VEC_CHUNK : n;
        er__progress_step(end - begin);
        uint8_t dec[ER_VEC_CHUNK];
        int batch = j->vec || j->epi || j->pre;
        if (batch) {
            if (j->pre) memcpy(dec, j->pre->dec + begin, (size_t)(end - begin));
            else if (j->vec) er_chain_vec_decide(j, begin, end, dec);
            else er__epi_decide(&j->plan, j->mod[0], j->cur[0], begin, end, j->scr, dec, &wrel, &widx);
            int64_t m = end - begin, c1 = 0, open = 0; /* decided elements are exact (0) or covered (1) */
            for (int64_t i = 0; i < m; i++) {
                c1 += dec[i] == ER_CLASS_COVERED;
                open += dec[i] == ER_VEC_OPEN;
            }
            /* the decided classes as they are; the open ones are written below */
            memcpy(classes + begin, dec, (size_t)m);
            counts[ER_CLASS_EXACT] += m - c1 - open;
            counts[ER_CLASS_COVERED] += c1;
            if (!open) continue;
        }
        for (int64_t idx = begin; idx < end; idx++) {
            if (batch) { /* the next element the pass left open */
                const uint8_t *o = memchr(dec + (idx - begin), ER_VEC_OPEN, (size_t)(end - idx));
                if (!o) break;
                idx = begin + (o - dec);
            }
            double y = er__load(out, contig ? idx : er__offset(out, idx)), lo = 0, hi = 0;
            /* where the last element lay outside its set (a kernel with a bug), its set first, else the witnesses
             * first */
            int first = isfinite(y) && j->out_first, away = first && er_chain_mark_out(j, idx, y, classes);
            int cls = away || !isfinite(y) ? ER_PENDING : er_chain_fast_class(j, idx, y, &lo, &hi);
            if (!away && !first && cls == ER_PENDING && isfinite(y)) away = er_chain_mark_out(j, idx, y, classes);
            j->out_first = away;
            if (away) continue;
            classes[idx] = (uint8_t)cls;
            if (cls == ER_PENDING) continue;
            counts[cls]++;
            double rel = er_set_rel(lo, hi);
            if (rel > wrel || (rel == wrel && rel >= 0 && idx < widx)) { wrel = rel; widx = idx; }
        }
    }
    j->counts[0] = counts[0];
    j->counts[1] = counts[1];
    j->wrel = wrel;
    j->widx = widx;
    if (j->begin > 0)
        mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread: what a witness's MPFR bounds cached */
    return NULL;
}

/* Element idx's base set v, its operands' sets w and brackets [bl, bh], from its modules' single sets. */
static er_status er_chain_fast_inputs(const er_chain_fast_job *j, int64_t idx, er_cval *v, er_cval *w, double *bl,
                                      double *bh) {
    const er_ref *ref = j->ref;
    er_cset c;
    double m;
    ER_RETURN_IF_ERROR(j->mod[0]->cursor_set(j->cur[0], idx, &c));
    er_cval_of_cset(v, &c);
    for (int i = 0; i < er__chain(ref)->nstages; i++) {
        if (!er__chain(ref)->stages[i].ref) continue;
        ER_RETURN_IF_ERROR(j->mod[i + 1]->cursor_set(j->cur[i + 1], idx, &c));
        er_cval_of_cset(&w[i], &c);
        if (er__ref_bracket(er__chain(ref)->stages[i].ref, idx, &m, &bl[i], &bh[i]) != ER_OK) {
            bl[i] = bh[i] = NAN;
            er__ok();
        }
    }
    return ER_OK;
}

static void *er_chain_fast_rest(void *arg) {
    er_chain_fast_job *j = arg;
    const uint8_t *classes = er__sink_classes(j->sk);
    mpfr_t x;
    mpfr_init2(x, 64);
    j->st = ER_OK;
    for (int64_t idx = j->begin; idx < j->end && j->st == ER_OK; idx++) {
        const uint8_t *p = memchr(classes + idx, ER_PENDING, (size_t)(j->end - idx)); /* the next element left */
        if (!p) break;
        idx = p - classes;
        if (er__cancelled()) {
            j->st = ER_ERR_CANCELLED;
            break;
        }
        er_cval v, w[12];
        double bl[12], bh[12];
        j->st = er_chain_fast_inputs(j, idx, &v, w, bl, bh);
        if (j->st == ER_OK) j->st = er_chain_put(j->ref, j->std, j->E, j->sk, idx, &v, w, bl, bh, x);
    }
    mpfr_clear(x);
    if (j->begin > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    return NULL;
}

/* The stage the batch pass decides (er_chain_vec_decide), with its input tensor in *x: a chain of one exp, tanh,
 * sigmoid, silu or relu stage (exp's not under math=triton) on a tensor of fp32, fp16 or bf16, compute fp32, the
 * output fp32, fp16 or bf16, both row-major; 0 where not, or where EXACTREF_BATCH=0 turns the pass off. */
static er_stage_kind er_chain_vec_kind(const er_ref *ref, const er_standard *std, const er_tensor *out,
                                       const er_fmt_info *O, const er_tensor **x) {
    const er_chain_state *c = er__chain(ref);
    const char *env = getenv("EXACTREF_BATCH");
    if ((env && env[0] == '0') || c->nstages != 1 || c->stages[0].ref || std->fast_math != 0) return 0;
    er_stage_kind k = c->stages[0].kind;
    if (k != ER_STAGE_EXP && k != ER_STAGE_TANH && k != ER_STAGE_SIGMOID && k != ER_STAGE_SILU && k != ER_STAGE_RELU)
        return 0;
    er_format of = out->format;
    if (er__module_of(c->base) != &er__tensor_module || (of != ER_FP32 && of != ER_FP16 && of != ER_BF16) ||
        O != er__fmt(of) || !er__row_major(out))
        return 0;
    const er_tensor *v;
    const char *name;
    if (er__module_of(c->base)->inputs(c->base, &v, &name, 1) != 1 || !er__row_major(v) ||
        (v->format != ER_FP32 && v->format != ER_FP16 && v->format != ER_BF16))
        return 0;
    *x = v;
    return k;
}

/* Whether the standard lets the fast decision run: fp32 stages, not math=fast, and EXACTREF_FAST=0 not set. */
static int er_chain_fast_std(const er_standard *std) {
    const char *env = getenv("EXACTREF_FAST");
    return !(env && env[0] == '0') && std->compute == ER_FP32 && std->fast_math != 1;
}

/* The fast decision where it applies (*done = 1): an output to read and no sets wanted, a standard that allows it
 * (er_chain_fast_std), and a cursor from the base's module and each reference operand's. */
static er_status er_chain_covers_fast(const er_ref *ref, const er_standard *std, er_sinks *sks, int nt, int *done) {
    *done = 0;
    er_sink *sk0 = er__sinks_at(sks, 0, 0);
    if (!er__sink_reads_output(sk0) || sk0->set_lo || !er_chain_fast_std(std)) return ER_OK;
    er_standard bs = *std; /* math= is the stages' (er_chain_check) */
    bs.fast_math = 0;
    er_chain_fast_job jobs[ER_MAX_THREADS];
    memset(jobs, 0, sizeof jobs);
    int64_t next = 0;
    int ok = 1;
    const er_tensor *vx = NULL;
    er_stage_kind vec = er_chain_vec_kind(ref, std, sk0->out, sk0->O, &vx);
    const er_epi_pre *pre = er__sinks_arg(sks); /* the GPU's pass (er_covers_device), else NULL */
    if (vec && vec != ER_STAGE_RELU) er__exp_init();
    int simd = er__simd();
    for (int t = 0; t < nt; t++) {
        er_chain_fast_job *j = &jobs[t];
        for (int i = 0; i < er__chain(ref)->nstages; i++) {
            er_stage_kind k = er__chain(ref)->stages[i].kind;
            j->refs |= er__chain(ref)->stages[i].ref != NULL;
            j->forms |= k == ER_STAGE_GELU_TANH || k == ER_STAGE_SILU;
        }
        j->vec = vec;
        j->vec_ulps = vec ? (er__chain(ref)->stages[0].scalar > 0 ? er__chain(ref)->stages[0].scalar : 2.0) : 0;
        j->vxt = vx;
        j->pre = pre;
        j->simd = simd;
        j->ref = ref;
        j->std = std;
        j->E = er__fmt(ER_FP32);
        j->sk = er__sinks_at(sks, t, 0);
        j->owrel = -1;
        j->owidx = -1;
        j->next = &next;
        j->begin = ref->n * t / nt;
        j->end = ref->n * (t + 1) / nt;
        for (int i = -1; i < er__chain(ref)->nstages; i++) {
            const er_ref *o = i < 0 ? er__chain(ref)->base : er__chain(ref)->stages[i].ref;
            if (!o) continue;
            const er_op_module *m = er__module_of(o);
            j->mod[i + 1] = m;
            j->cur[i + 1] = m->cursor_open ? m->cursor_open(o, &bs, j->E) : NULL;
            ok &= j->cur[i + 1] != NULL;
        }
        if (ok && !vec && !pre &&
            er__epi_plan(&j->plan, er__chain(ref)->stages, er__chain(ref)->nstages, std, j->sk->out, j->sk->O, j->mod,
                         j->cur)) {
            j->scr = malloc(sizeof *j->scr);
            if (j->scr) j->scr->runs = j->scr->skip[0] = j->scr->skip[1] = 0;
            j->epi = j->scr != NULL; /* without the memory, the per-element decision alone */
        }
    }
    er_status st = ER_OK;
    if (ok) {
        er__run_jobs_progress(jobs, sizeof jobs[0], nt, er_chain_fast_run, ref->n);
        for (int t = 0; t < nt; t++)
            if (jobs[t].st == ER_ERR_CANCELLED) st = ER_ERR_CANCELLED; /* the classes are not all written */
        int64_t widx = -1;
        double wrel = -1;
        if (pre) { /* the widest hull the GPU's pass decided */
            wrel = pre->wrel;
            widx = pre->widx;
        }
        er_outs *outs[ER_MAX_THREADS];
        for (int t = 0; t < nt; t++) {
            er__sink_count(jobs[t].sk, ER_CLASS_EXACT, jobs[t].counts[0]);
            er__sink_count(jobs[t].sk, ER_CLASS_COVERED, jobs[t].counts[1]);
            if (jobs[t].wrel > wrel || (jobs[t].wrel == wrel && jobs[t].wrel >= 0 && jobs[t].widx < widx)) {
                wrel = jobs[t].wrel;
                widx = jobs[t].widx;
            }
            outs[t] = &jobs[t].outs;
        }
        /* the outputs found outside their sets: the report's candidates among them for the engine, below */
        er__outs_finish(outs, nt, er__sink_classes(jobs[0].sk), ref->n, jobs[0].sk);
        if (st == ER_OK) er__run_jobs(jobs, sizeof jobs[0], nt, er_chain_fast_rest);
        for (int t = 0; t < nt && st == ER_OK; t++) st = jobs[t].st;
        for (int t = 0; t < nt && st == ER_OK; t++) {
            if (jobs[t].owidx < 0) continue; /* the widest of the sets found with an output outside them */
            er__sink_widest(jobs[t].sk, jobs[t].owidx, &jobs[t].owc, /* its exact value: report_exact */
                            er__load(jobs[t].sk->out, er__offset(jobs[t].sk->out, jobs[t].owidx)));
        }
        if (st == ER_OK && widx >= 0) {
            /* the decided element whose witnesses lie furthest apart: its whole set, a candidate for the widest */
            er_cset c;
            mpfr_t x;
            mpfr_init2(x, 64);
            er_cval v, w[12];
            double bl[12], bh[12];
            st = er_chain_fast_inputs(&jobs[0], widx, &v, w, bl, bh);
            if (st == ER_OK) st = er_chain_cset(ref, std, jobs[0].E, jobs[0].sk, widx, &v, w, bl, bh, x, &c);
            mpfr_clear(x);
            const er_tensor *out = jobs[0].sk->out;
            if (st == ER_OK) er__sink_widest(jobs[0].sk, widx, &c, er__load(out, er__offset(out, widx)));
        }
        *done = 1;
    }
    for (int t = 0; t < nt; t++) {
        for (int i = 0; i <= er__chain(ref)->nstages; i++)
            if (jobs[t].cur[i]) jobs[t].mod[i]->cursor_close(jobs[t].cur[i]);
        free(jobs[t].scr);
    }
    return st;
}

int er__chain_epi_of(const er_ref *ref, const er_standard *std, const er_tensor *out, er_epi *p,
                     const er_ref **base) {
    if (er__module_of(ref) != &er__chain_module || !er_chain_fast_std(std)) return 0;
    const er_chain_state *c = er__chain(ref);
    const er_tensor *vx;
    for (int i = 0; i < c->nstages; i++)
        if (c->stages[i].ref) return 0;
    if (er_chain_vec_kind(ref, std, out, er__fmt(out->format), &vx)) return 0;
    er_standard bs = *std; /* the cursor the fast decision opens (er_chain_covers_fast) */
    bs.fast_math = 0;
    const er_op_module *mods[13] = {er__module_of(c->base)};
    void *curs[13] = {NULL};
    void *cur = mods[0]->cursor_open ? mods[0]->cursor_open(c->base, &bs, er__fmt(ER_FP32)) : NULL;
    if (!cur) return 0;
    mods[0]->cursor_close(cur);
    if (!er__epi_plan(p, c->stages, c->nstages, std, out, er__fmt(out->format), mods, curs)) return 0;
    *base = c->base;
    return 1;
}

static er_status er_chain_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    const er_fmt_info *E = er__fmt(std->compute == ER_TF32 ? ER_FP32 : std->compute);
    int64_t n = ref->n;
    int nt = er__num_threads(n * 256);
    if (nt > n) nt = n > 0 ? (int)n : 1;
    ER_RETURN_IF_ERROR(er__sinks_open(sks, nt));
    int fast = 0;
    ER_RETURN_IF_ERROR(er_chain_covers_fast(ref, std, sks, nt, &fast));
    if (fast) return ER_OK;
    ER_RETURN_IF_ERROR(er__mem_check(17.0 * (double)n, "a chain's base sets"));
    double *lo = malloc(sizeof(double) * (size_t)(n ? n : 1)), *hi = malloc(sizeof(double) * (size_t)(n ? n : 1));
    uint8_t *fl = malloc((size_t)(n ? n : 1));
    er_status st =
        lo && hi && fl ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate the base sets of %lld elements", (long long)n);
    /* the base's sets in the compute format, then each element through the stages, threads on contiguous runs */
    er_standard bs = *std; /* math= is the stages' (er_chain_check) */
    bs.fast_math = 0;
    if (st == ER_OK) st = er_ref_enclosure(er__chain(ref)->base, 0, &bs, E->id, lo, hi, fl);
    /* each reference operand's sets in the compute format (the same standard) and exact values in double */
    er_chain_job j0;
    memset(&j0, 0, sizeof j0);
    for (int i = 0; i < er__chain(ref)->nstages && st == ER_OK; i++) {
        const er_ref *o = er__chain(ref)->stages[i].ref;
        if (!o) continue;
        st = er__mem_check(25.0 * (double)n, "a stage's reference sets");
        if (st != ER_OK) break;
        size_t m = (size_t)(n ? n : 1);
        j0.olo[i] = malloc(sizeof(double) * m);
        j0.ohi[i] = malloc(sizeof(double) * m);
        j0.obl[i] = malloc(sizeof(double) * m);
        j0.obh[i] = malloc(sizeof(double) * m);
        j0.ofl[i] = malloc(m);
        if (!j0.olo[i] || !j0.ohi[i] || !j0.obl[i] || !j0.obh[i] || !j0.ofl[i]) {
            st = er__fail(ER_ERR_NOMEM, "cannot allocate a stage's sets");
            break;
        }
        st = er_ref_enclosure(o, 0, &bs, E->id, j0.olo[i], j0.ohi[i], j0.ofl[i]);
        for (int64_t idx = 0; idx < n && st == ER_OK; idx++) {
            double mid;
            if (er__ref_bracket(o, idx, &mid, &j0.obl[i][idx], &j0.obh[i][idx]) != ER_OK) {
                j0.obl[i][idx] = j0.obh[i][idx] = NAN;
                er__ok();
            }
        }
    }
    if (st == ER_OK) {
        er_chain_job jobs[ER_MAX_THREADS];
        for (int t = 0; t < nt; t++) {
            jobs[t] = j0;
            jobs[t].ref = ref;
            jobs[t].std = std;
            jobs[t].E = E;
            jobs[t].lo = lo;
            jobs[t].hi = hi;
            jobs[t].fl = fl;
            jobs[t].sk = er__sinks_at(sks, t, 0);
            jobs[t].begin = n * t / nt;
            jobs[t].end = n * (t + 1) / nt;
            jobs[t].st = ER_OK;
        }
        er__run_jobs_progress(jobs, sizeof jobs[0], nt, er_chain_run, n);
        for (int t = 0; t < nt && st == ER_OK; t++) st = jobs[t].st;
    }
    for (int i = 0; i < 12; i++) {
        free(j0.olo[i]);
        free(j0.ohi[i]);
        free(j0.obl[i]);
        free(j0.obh[i]);
        free(j0.ofl[i]);
    }
    free(lo);
    free(hi);
    free(fl);
    return st;
}

/* er_ref_exact_mpfr: the base's exact result through the stages in MPFR (each add and mul exact, the functions at
 * 256 bits: within 2^-250 of the exact value, and no rounding boundary of a format is missed, chains.md Lemma C8). */
static er_status er_chain_exact_mpfr(const er_ref *ref, int64_t idx, mpfr_ptr out) {
    int64_t index[ER_MAX_DIMS];
    er__index_of(ref, idx, index);
    mpfr_set_prec(out, 64);
    ER_RETURN_IF_ERROR(er_ref_exact_mpfr(out, er__chain(ref)->base, index));
    er_chain_stages_mpfr(ref, idx, out);
    return ER_OK;
}

/* er_ref_exact: the same, to double and correctly rounded to f. */
static er_status er_chain_exact_value(const er_ref *ref, int64_t idx, const er_fmt_info *f, double *exact,
                                      double *rounded) {
    mpfr_t x;
    mpfr_init2(x, 64);
    er_status st = er_chain_exact_mpfr(ref, idx, x);
    if (st == ER_OK) {
        if (exact) *exact = mpfr_get_d(x, MPFR_RNDN);
        if (rounded) *rounded = er__round_mpfr(f, x, ER_ROUND_NEAREST, er__overflow_rule(f, ER_OVERFLOW_DEFAULT));
    }
    mpfr_clear(x);
    return st;
}

/* A bracket of element idx's exact result: the base's bracket through the stages in double (each widened outward;
 * the operands' brackets likewise), else the exact value in MPFR and the doubles next to it. */
static er_status er_chain_bracket(const er_ref *ref, int64_t idx, double *mid, double *lo, double *hi) {
    double e, m, a, b, bl[12], bh[12];
    for (int i = 0; i < er__chain(ref)->nstages; i++)
        if (er__chain(ref)->stages[i].ref)
            ER_RETURN_IF_ERROR(er__ref_bracket(er__chain(ref)->stages[i].ref, idx, &m, &bl[i], &bh[i]));
    ER_RETURN_IF_ERROR(er__ref_bracket(er__chain(ref)->base, idx, &e, &a, &b));
    double ea = e, eb = e;
    if (isfinite(a) && isfinite(b) && er_chain_stages_double(ref, idx, &a, &b, bl, bh) &&
        er_chain_stages_double(ref, idx, &ea, &eb, bl, bh)) {
        *lo = a;
        *hi = b;
        *mid = fmin(fmax(ea + (eb - ea) / 2, a), b);
        return ER_OK;
    }
    ER_RETURN_IF_ERROR(er_chain_exact_value(ref, idx, er__fmt(ER_FP64), &e, NULL));
    *mid = e;
    *lo = isfinite(e) ? nextafter(e, -INFINITY) : NAN;
    *hi = isfinite(e) ? nextafter(e, INFINITY) : NAN;
    return ER_OK;
}

static const char *const er_chain_names[1] = {"out"};

/* a chain takes math=triton for its stages (er_chain_check); its base's module judges the rest */
const er_op_module er__chain_module = { .name = "chain",
                                        .takes = ER_TAKES_TRITON,
                                        .nout = 1,
                                        .out_names = er_chain_names,
                                        .out_shape = er__out_shape_same,
                                        .priv_size = sizeof(er_chain_state),
                                        .inputs = er_chain_inputs,
                                        .fast = er_chain_fast,
                                        .check = er_chain_check,
                                        .covers = er_chain_covers,
                                        .exact = er_chain_exact_value,
                                        .report_exact = 1,
                                        .exact_mpfr = er_chain_exact_mpfr,
                                        .bracket = er_chain_bracket };
