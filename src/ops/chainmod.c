/* chainmod.c: the op module of chains (src/ops/module.h; docs/algorithms/chains.md): a reduction followed by
 * elementwise stages. The base's enclosure in the compute format, each stage's image of the set before it (every
 * stage is monotone in its input, so an interval's image lies between its ends' images; the special values are
 * followed separately), the output conversion; the exact result through the stages in MPFR, each stage exact (a
 * cast is a storage rounding of the kernel, not part of the real function). */
#include <math.h>
#include <stdint.h> /* before mpfr.h: the intmax_t functions */
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include <exactref/mpfr.h>
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

er_status er_chain(er_ref **out, const er_ref *base, const er_stage *stages, int nstages) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(base, "base");
    if (nstages < 0 || nstages > 12) return er__fail(ER_ERR_INVALID, "nstages %d: expected 0 to 12", nstages);
    if (nstages && !stages) return er__fail(ER_ERR_NULL, "stages is NULL with %d stages", nstages);
    if (!((base->op == ER_OP_MATMUL && !base->b_is_one) || base->op == ER_OP_SUM))
        return er__fail(ER_ERR_UNSUPPORTED, "a chain starts from a matmul, a scaled matmul or a sum in this version (not %s)",
                        er__op_name(base));
    for (int i = 0; i < nstages; i++) {
        const er_stage *s = &stages[i];
        if (s->kind == ER_STAGE_ADD || s->kind == ER_STAGE_MUL) {
            if (!s->t) {
                if (isnan(s->scalar) || isinf(s->scalar))
                    return er__fail(ER_ERR_INVALID, "stage %d: the scalar %g is not finite (give a tensor for special values)", i, s->scalar);
                continue;
            }
            ER_RETURN_IF_ERROR(er__tensor_check(s->t, "a stage's tensor"));
            int same = s->t->ndim == base->ndim;
            for (int d = 0; same && d < base->ndim; d++) same = s->t->shape[d] == base->shape[d];
            if (!same)
                return er__fail(ER_ERR_SHAPE, "stage %d: its tensor must have the output's shape (%d dimensions; stride 0 where it "
                                "broadcasts)", i, base->ndim);
        } else if (s->kind == ER_STAGE_CAST) {
            if (!er__fmt(s->format)) return er__fail(ER_ERR_FORMAT, "stage %d: invalid format value %d", i, (int)s->format);
        } else if (s->kind != ER_STAGE_RELU) {
            return er__fail(ER_ERR_INVALID, "stage %d: unknown kind %d", i, (int)s->kind);
        }
    }
    er_ref *r = calloc(1, sizeof *r);
    er_stage *st = calloc((size_t)(nstages ? nstages : 1), sizeof *st);
    er_tensor *views = calloc((size_t)(nstages ? nstages : 1), sizeof *views);
    if (!r || !st || !views) {
        free(r); free(st); free(views);
        return er__fail(ER_ERR_NOMEM, "cannot allocate a chain of %d stages", nstages);
    }
    for (int i = 0; i < nstages; i++) {
        st[i] = stages[i];
        if (stages[i].t) { views[i] = *stages[i].t; st[i].t = &views[i]; }
    }
    r->op = ER_OP_CHAIN;
    r->base = base;
    r->stages = st;
    r->views = views;
    r->nstages = nstages;
    r->ndim = base->ndim;
    memcpy(r->shape, base->shape, sizeof r->shape);
    r->n = base->n;
    r->K = base->K;
    *out = r;
    return ER_OK;
}

/* The standard applies to the base; the stages compute in its compute format, and no cast is wider than it. */
static er_status er_chain_check(const er_ref *ref, const er_standard *std) {
    const er_ref *base = ref->base;
    ER_RETURN_IF_ERROR(er__module_of(base)->check(base, std));
    const er_fmt_info *E = er__fmt(std->compute == ER_TF32 ? ER_FP32 : std->compute);
    for (int i = 0; i < ref->nstages; i++)
        if (ref->stages[i].kind == ER_STAGE_CAST && er__fmt(ref->stages[i].format)->p > E->p)
            return er__fail(ER_ERR_STANDARD, "stage %d casts to %s, wider than the compute format %s the stages run in", i,
                            er__fmt(ref->stages[i].format)->name, E->name);
    return ER_OK;
}

/* The value a stage's operand has at element idx, rounded to nearest into E (the kernel converts it first). */
static double er_stage_operand(const er_stage *s, const er_fmt_info *E, int64_t idx) {
    double b = s->t ? er__load(s->t, er__offset(s->t, idx)) : s->scalar;
    return er__round_double(E, b, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
}

/* v's finite part given as the images l <= h of its ends (each a value of E or an infinity from overflow): an end
 * beyond the largest finite value makes that infinity possible and cuts the interval there. */
static void er_set_ends(er_cval *v, const er_fmt_info *E, double l, double h) {
    if (l == INFINITY) { v->pinf = 1; v->lo = INFINITY; v->hi = -INFINITY; return; }
    if (h == -INFINITY) { v->ninf = 1; v->lo = INFINITY; v->hi = -INFINITY; return; }
    if (l == -INFINITY) { v->ninf = 1; l = -E->max; }
    if (h == INFINITY) { v->pinf = 1; h = E->max; }
    v->lo = l;
    v->hi = h;
}

/* The set after stage s, of the set v before it (values of E), at element idx. */
static void er_stage_apply(er_cval *v, const er_stage *s, const er_fmt_info *E, int64_t idx) {
    if (v->nan_req && s->kind != ER_STAGE_RELU) return; /* NaN in, NaN out */
    int finite = v->lo <= v->hi;
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
            double l = er__round_double(G, v->lo, ER_ROUND_NEAREST, ov), h = er__round_double(G, v->hi, ER_ROUND_NEAREST, ov);
            /* an end that overflows to NaN (a format without infinities): NaN possible, and every value beyond it
             * overflows too; the others end at the largest finite value */
            int empty = 0;
            if (isnan(l)) { v->nan = 1; if (v->lo < 0) l = -G->max; else empty = 1; }
            if (isnan(h)) { v->nan = 1; if (v->hi > 0) h = G->max; else empty = 1; }
            if (empty) { v->lo = INFINITY; v->hi = -INFINITY; }
            else er_set_ends(v, G, l, h);
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
        if (finite) er_set_ends(v, E, er__round_sum(E, v->lo, b, ER_ROUND_NEAREST), er__round_sum(E, v->hi, b, ER_ROUND_NEAREST));
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
        er_set_ends(v, E, l, h);
    }
}

/* v's join with w: every value either allows. */
static void er_cval_join(er_cval *v, const er_cval *w) {
    if (w->lo <= w->hi) {
        if (v->lo > v->hi) { v->lo = w->lo; v->hi = w->hi; }
        else { v->lo = fmin(v->lo, w->lo); v->hi = fmax(v->hi, w->hi); }
    }
    v->nan_req = v->nan_req && w->nan_req;
    v->nan |= w->nan | w->nan_req;
    v->pinf |= w->pinf;
    v->ninf |= w->ninf;
}

/* A mul stage (by m) followed by an add stage (of b), which a compiler may contract into one fused multiply-add:
 * RN(x m + b) for every x of v, monotone in x as the separate roundings are (docs/algorithms/chains.md, Lemma C3).
 * always: the fused evaluation alone; else either, joined. */
static void er_mul_add(er_cval *v, const er_stage *mul, const er_stage *add, const er_fmt_info *E, int64_t idx, int always) {
    er_cval sep = *v, fused = *v;
    er_stage_apply(&sep, mul, E, idx);
    er_stage_apply(&sep, add, E, idx);
    double m = er_stage_operand(mul, E, idx), b = er_stage_operand(add, E, idx);
    if (v->lo <= v->hi && isfinite(m) && isfinite(b) && !v->nan_req) {
        /* the specials as the separate evaluation has them (an infinity times m plus b), the finite ends fused */
        fused = sep;
        double l = er__round_fma(E, m > 0 ? v->lo : v->hi, m, b, 1, ER_ROUND_NEAREST);
        double h = er__round_fma(E, m > 0 ? v->hi : v->lo, m, b, 1, ER_ROUND_NEAREST);
        fused.lo = INFINITY;
        fused.hi = -INFINITY;
        er_set_ends(&fused, E, fmin(l, h), fmax(l, h));
    } else {
        fused = sep;
    }
    if (always) { *v = fused; return; }
    *v = sep;
    er_cval_join(v, &fused);
}

/* The stages applied exactly to x (element idx): add and mul at enough bits, relu; a cast is the kernel's storage
 * rounding, not part of the real function. */
static void er_chain_stages_mpfr(const er_ref *ref, int64_t idx, mpfr_t x) {
    for (int i = 0; i < ref->nstages; i++) {
        const er_stage *s = &ref->stages[i];
        if (s->kind == ER_STAGE_RELU) {
            if (mpfr_sgn(x) < 0) mpfr_set_zero(x, 1);
        } else if (s->kind == ER_STAGE_ADD || s->kind == ER_STAGE_MUL) {
            double b = s->t ? er__load(s->t, er__offset(s->t, idx)) : s->scalar;
            /* exact: a double added to (or multiplied into) x at enough bits */
            mpfr_prec_round(x, mpfr_get_prec(x) + (s->kind == ER_STAGE_ADD ? 2200 : 64), MPFR_RNDN);
            if (s->kind == ER_STAGE_ADD) mpfr_add_d(x, x, b, MPFR_RNDN);
            else mpfr_mul_d(x, x, b, MPFR_RNDN);
        }
    }
}

/* The exact result of element idx, to double (*exact) and correctly rounded to the output (*rounded). The chain is
 * monotone in the base's exact result S, and S lies within a double's ulp of e = RN64(S): where the chain's values
 * at e's two neighbours round alike, that is the rounding; else S itself, summed in MPFR. */
static er_status er_chain_exact(const er_ref *ref, int64_t idx, const er_sink *sk, mpfr_t x, double *exact, double *rounded) {
    int64_t index[ER_MAX_DIMS], rem = idx;
    for (int d = ref->ndim - 1; d >= 0; d--) { index[d] = rem % ref->shape[d]; rem /= ref->shape[d]; }
    double e;
    ER_RETURN_IF_ERROR(er_ref_exact(ref->base, index, ER_FP64, &e, NULL));
    if (isfinite(e)) {
        double r[3];
        for (int k = 0; k < 3; k++) {
            mpfr_set_prec(x, 64);
            mpfr_set_d(x, k == 0 ? nextafter(e, -INFINITY) : k == 1 ? nextafter(e, INFINITY) : e, MPFR_RNDN); /* exact */
            er_chain_stages_mpfr(ref, idx, x);
            r[k] = er__round_mpfr(sk->O, x, ER_ROUND_NEAREST, sk->ov);
            if (k == 2) *exact = mpfr_get_d(x, MPFR_RNDN);
        }
        if (r[0] == r[1] || (isnan(r[0]) && isnan(r[1]))) { *rounded = r[0]; return ER_OK; }
    }
    mpfr_set_prec(x, 64);
    ER_RETURN_IF_ERROR(er_ref_exact_mpfr(x, ref->base, index));
    er_chain_stages_mpfr(ref, idx, x);
    *exact = mpfr_get_d(x, MPFR_RNDN);
    *rounded = er__round_mpfr(sk->O, x, ER_ROUND_NEAREST, sk->ov);
    return ER_OK;
}

static er_status er_chain_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    const er_ref *base = ref->base;
    const er_fmt_info *E = er__fmt(std->compute == ER_TF32 ? ER_FP32 : std->compute);
    int64_t n = ref->n;
    ER_RETURN_IF_ERROR(er__mem_check(17.0 * (double)n, "a chain's base sets"));
    double *lo = malloc(sizeof(double) * (size_t)(n ? n : 1)), *hi = malloc(sizeof(double) * (size_t)(n ? n : 1));
    uint8_t *fl = malloc((size_t)(n ? n : 1));
    er_status st = lo && hi && fl ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate the base sets of %lld elements", (long long)n);
    if (st == ER_OK) st = er_ref_enclosure(base, 0, std, E->id, lo, hi, fl);
    if (st == ER_OK) st = er__sinks_open(sks, 1);
    er_sink *sk = st == ER_OK ? er__sinks_at(sks, 0, 0) : NULL;
    mpfr_t x;
    mpfr_init2(x, 64);
    for (int64_t idx = 0; idx < n && st == ER_OK; idx++) {
        er_cval v;
        memset(&v, 0, sizeof v);
        v.lo = isnan(lo[idx]) ? INFINITY : lo[idx];
        v.hi = isnan(hi[idx]) ? -INFINITY : hi[idx];
        v.nan = (fl[idx] & ER_ENCLOSURE_NAN) != 0;
        v.nan_req = (fl[idx] & ER_ENCLOSURE_NAN_ONLY) != 0;
        v.pinf = (fl[idx] & ER_ENCLOSURE_PINF) != 0;
        v.ninf = (fl[idx] & ER_ENCLOSURE_NINF) != 0;
        for (int i = 0; i < ref->nstages; i++) {
            const er_stage *s = &ref->stages[i];
            if (s->kind == ER_STAGE_MUL && i + 1 < ref->nstages && ref->stages[i + 1].kind == ER_STAGE_ADD && std->fma != ER_FMA_NEVER) {
                er_mul_add(&v, s, &ref->stages[i + 1], E, idx, std->fma == ER_FMA_ALWAYS);
                i++;
                continue;
            }
            er_stage_apply(&v, s, E, idx);
        }
        double exact = NAN, rounded = NAN;
        st = er_chain_exact(ref, idx, sk, x, &exact, &rounded);
        if (st != ER_OK) break;
        er_cset c;
        er__cset_build(&c, sk->O, sk->ov, 1, &v, exact, rounded);
        er__sink_put(sk, idx, &c);
    }
    mpfr_clear(x);
    free(lo);
    free(hi);
    free(fl);
    return st;
}

static const char *const er_chain_names[1] = {"out"};

const er_op_module er__chain_module = {.name = "chain", .nout = 1, .out_names = er_chain_names, .out_shape = er__out_shape_same,
                                       .check = er_chain_check, .covers = er_chain_covers};
