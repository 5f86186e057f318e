/* quantmod.c: the op module of quantisation with an amax (src/ops/module.h; docs/algorithms/quantize.md): three
 * outputs, q and each group's amax and scale. amax is exact; the scale's set is every value a division within
 * div_ulps of qmax / amax gives (or the power of two below it); q is one rounding of x times a scale, judged against
 * the kernel's own scale where that scale is in its set (so q is then determined, ties at q's midpoints included),
 * else against every scale of the set. */
#include <math.h>
#include <stdint.h> /* before mpfr.h: the intmax_t functions */
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"
#include "enclose/approx.h"

er_status er_quantize(er_ref **out, const er_tensor *x, er_format q, er_granularity granularity, int64_t block,
                      er_scale_recipe recipe) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(x, "x");
    ER_RETURN_IF_ERROR(er__tensor_check(x, "x"));
    if (!er__fmt(q) || q == ER_FP64 || q == ER_TF32)
        return er__fail(ER_ERR_FORMAT, "q's format %d: expected fp32, fp16, bf16 or an fp8 format", (int)q);
    if ((unsigned)granularity > ER_GRAN_BLOCK) return er__fail(ER_ERR_INVALID, "granularity %d: expected tensor, row or block", (int)granularity);
    if (granularity == ER_GRAN_BLOCK && block < 1) return er__fail(ER_ERR_INVALID, "block %lld: expected 1 or more elements", (long long)block);
    if ((unsigned)recipe > ER_RECIPE_POW2) return er__fail(ER_ERR_INVALID, "recipe %d: expected amax or pow2", (int)recipe);
    er_ref *r = calloc(1, sizeof *r);
    if (!r) return er__fail(ER_ERR_NOMEM, "cannot allocate a reference");
    r->op = ER_OP_QUANTIZE;
    r->A = *x;
    r->ndim = x->ndim;
    r->n = 1;
    for (int i = 0; i < x->ndim; i++) { r->shape[i] = x->shape[i]; r->n *= x->shape[i]; }
    r->qfmt = q;
    r->gran = granularity;
    r->recipe = recipe;
    r->block = granularity == ER_GRAN_BLOCK ? block : 0;
    r->cols = x->shape[x->ndim - 1];
    int64_t rows = r->cols ? r->n / r->cols : 0;
    r->gpr = granularity == ER_GRAN_BLOCK ? (r->cols + block - 1) / block : 1;
    r->groups = granularity == ER_GRAN_TENSOR ? 1 : rows * r->gpr;
    *out = r;
    return ER_OK;
}

static const char *const er_q_names[3] = {"q", "amax", "scale"};

/* q has x's shape; amax and scale one value per group: [1] for the tensor, x's leading shape for rows (with the
 * number of blocks last for blocks); trailing dimensions of size 1 are accepted. */
static er_status er_q_out_shape(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape) {
    if (o == 0) return er__out_shape_same(ref, o, out, ndim, shape);
    int lead = ref->gran == ER_GRAN_TENSOR ? 0 : ref->ndim - 1;
    for (int i = 0; i < lead; i++) shape[i] = ref->shape[i];
    if (ref->gran == ER_GRAN_BLOCK) shape[lead++] = ref->gpr;
    *ndim = lead ? lead : 1;
    if (!lead) shape[0] = 1;
    int od = out->ndim;
    while (od > *ndim && out->shape[od - 1] == 1) od--;
    int same = od == *ndim;
    for (int i = 0; same && i < od; i++) same = out->shape[i] == shape[i];
    if (same) return ER_OK;
    return er__fail(ER_ERR_OUTPUT, "quantize's %s must have one element per group: %d dimensions (trailing size-1 dimensions "
                    "allowed); got %d dimensions", er_q_names[o], *ndim, out->ndim);
}

static er_status er_q_check(const er_ref *ref, const er_standard *std) {
    const er_fmt_info *E = er__fmt(std->compute), *X = er__fmt(ref->A.format), *Q = er__fmt(ref->qfmt);
    if (std->order != ER_ORDER_ANY)
        return er__fail(ER_ERR_STANDARD, "quantize sums nothing: give any_order (its options set the scale's division)");
    if (std->rounding != ER_RND_NEAREST || std->compute == ER_TF32)
        return er__fail(ER_ERR_STANDARD, "quantize takes rounding=nearest and compute fp64, fp32, fp16 or bf16");
    if (X->p > E->p || X->min_sub < E->min_sub || X->max > E->max)
        return er__fail(ER_ERR_STANDARD, "quantize of %s inputs needs a compute format holding them (compute=%s does not)", X->name, E->name);
    if (Q->p >= E->p)
        return er__fail(ER_ERR_STANDARD, "quantize to %s needs a wider compute format than compute=%s", Q->name, E->name);
    return er__standard_applies(ref, std);
}

static int64_t er_q_group(const er_ref *r, int64_t idx) {
    if (r->gran == ER_GRAN_TENSOR) return 0;
    if (r->gran == ER_GRAN_ROW) return idx / r->cols;
    return (idx / r->cols) * r->gpr + (idx % r->cols) / r->block;
}

static double er_q_x(const er_ref *r, int64_t idx) { return er__load(&r->A, er__offset(&r->A, idx)); }

/* Adds the value w (finite, an infinity or NaN) to v. */
static void er_q_put(er_cval *v, double w) {
    if (isnan(w)) { v->nan = 1; return; }
    if (w == INFINITY) { v->pinf = 1; return; }
    if (w == -INFINITY) { v->ninf = 1; return; }
    if (v->lo > v->hi) { v->lo = v->hi = w; return; }
    if (w < v->lo) v->lo = w;
    if (w > v->hi) v->hi = w;
}

static void er_q_empty(er_cval *v) {
    memset(v, 0, sizeof *v);
    v->lo = INFINITY;
    v->hi = -INFINITY;
}

/* RN(n / d) in format O for doubles n, d (d != 0, both finite): the quotient at 128 bits, which is either exact or
 * farther than 2^-128 relative from every rounding boundary of O (a quotient of 53-bit numbers within that of a
 * value of at most 54 bits equals it), so its rounding is the exact quotient's. */
static double er_q_round_quotient(const er_fmt_info *O, double n, double d, er_overflow ov) {
    mpfr_t a, b;
    mpfr_inits2(128, a, b, (mpfr_ptr)0);
    mpfr_set_d(a, n, MPFR_RNDN);
    mpfr_set_d(b, d, MPFR_RNDN);
    mpfr_div(a, a, b, MPFR_RNDN);
    double r = er__round_mpfr(O, a, ER_ROUND_NEAREST, ov);
    mpfr_clears(a, b, (mpfr_ptr)0);
    return r;
}

/* One group's amax and scale: their sets in the compute format, and the exact scale. */
typedef struct er_q_group_info {
    double amax;
    er_cval sv;              /* the scale's set */
    double sexact;           /* qmax / amax (1 where amax is 0 or not finite: the recipes' rule) */
    int have_k;              /* the kernel's scale is in the scale's set: q is judged against it */
    double k;
} er_q_group_info;

/* The scale's set for amax a (quantize.md, Lemma Q1): within U ulps of qmax / a (Lemma U1), or the powers of two at
 * or below those values; a = 0 or not finite: 1 (Transformer Engine keeps its scale, 1 at first) or the plain
 * quotient (qmax / 0 = inf, qmax / inf = 0, NaN). */
static void er_q_scale_set(const er_fmt_info *E, double U, double qmax, int pow2, double a, er_cval *sv, double *sexact) {
    er_q_empty(sv);
    if (!(a > 0) || isinf(a)) {
        er_q_put(sv, 1.0);
        er_q_put(sv, isnan(a) ? NAN : a == 0 ? INFINITY : 0.0);
        *sexact = 1.0;
        return;
    }
    double q = qmax / a, qa = nextafter(q, 0.0), qb = nextafter(q, INFINITY), lo, hi;
    *sexact = q;
    er__approx_ends(E, U, qa, qb, &lo, &hi);
    if (lo < E->min_normal) lo = fmin(lo, 0.0); /* a subnormal quotient may be flushed */
    if (pow2) {
        /* 2^floor(log2 s) is non-decreasing in s: its least and greatest values come from the ends */
        int el, eh;
        if (lo > 0 && isfinite(lo)) { frexp(lo, &el); lo = ldexp(1.0, el - 1); }
        if (hi > 0 && isfinite(hi)) { frexp(hi, &eh); hi = ldexp(1.0, eh - 1); }
    }
    if (lo == INFINITY) { sv->pinf = 1; return; }
    if (hi == INFINITY) { sv->pinf = 1; hi = E->max; }
    sv->lo = lo;
    sv->hi = hi;
}

/* Whether value w is in the built set c (as the engine classifies: NaN where allowed, an infinity where allowed,
 * a finite value in [lo, hi], nothing else where NaN is required). */
static int er_q_in(const er_cset *c, double w) {
    if (isnan(w)) return c->nan_ok || c->nan_req;
    if (c->nan_req) return 0;
    if (isinf(w)) return w > 0 ? c->pinf_ok : c->ninf_ok;
    return w >= c->lo && w <= c->hi;
}

/* q's values for x and a scale s (finite, infinite or NaN): RN_Q(RN_E(x s)) under each overflow rule a conversion
 * has (Q's own, saturation as a clamp or cvt .satfinite does, NaN as torch's CPU cast to e4m3fn does). */
static void er_q_put_scaled(er_cval *v, const er_fmt_info *E, const er_fmt_info *Q, double x, double s) {
    double p = er__round_prod(E, x, s, 1, ER_ROUND_NEAREST);
    er_q_put(v, er__round_double(Q, p, ER_ROUND_NEAREST, er__overflow_rule(Q, ER_OVERFLOW_DEFAULT)));
    er_q_put(v, er__round_double(Q, p, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE));
    if (Q->id == ER_FP8_E4M3FN) er_q_put(v, er__round_double(Q, p, ER_ROUND_NEAREST, ER_OVERFLOW_NAN));
}

/* q's set for element x of a group (quantize.md, Lemma Q2): against the kernel's scale where it is in its set, else
 * every scale of the set (RN_Q(RN_E(x s)) is monotone in s: the ends of the finite part, and the special scales). */
static void er_q_value_set(const er_fmt_info *E, const er_fmt_info *Q, double x, const er_q_group_info *gi, er_cval *v) {
    er_q_empty(v);
    if (isnan(x)) { v->nan = v->nan_req = 1; return; }
    if (gi->have_k) { er_q_put_scaled(v, E, Q, x, gi->k); return; }
    const er_cval *s = &gi->sv;
    if (s->lo <= s->hi) { er_q_put_scaled(v, E, Q, x, s->lo); er_q_put_scaled(v, E, Q, x, s->hi); }
    if (s->pinf) er_q_put_scaled(v, E, Q, x, INFINITY);
    if (s->nan || s->nan_req) v->nan = 1;
}

/* q's exact result x qmax / amax (x where amax is 0 or not finite, scale 1), to double and correctly rounded. */
static void er_q_exact(const er_fmt_info *O, er_overflow ov, double x, double qmax, double a, double *exact, double *rounded) {
    if (!(a > 0) || isinf(a) || !isfinite(x)) {
        *exact = x;
        *rounded = er__round_double(O, x, ER_ROUND_NEAREST, ov);
        return;
    }
    *exact = x * qmax / a;
    *rounded = er_q_round_quotient(O, x * qmax, a, ov); /* x qmax exact: at most 24 + 3 significant bits */
}

typedef struct er_q_job {
    const er_ref *ref;
    const er_fmt_info *E, *Q;
    const er_q_group_info *gi;
    double qmax;
    er_sink *sk;
    int64_t begin, end;
} er_q_job;

static void *er_q_run(void *arg) {
    er_q_job *j = arg;
    const er_ref *ref = j->ref;
    for (int64_t idx = j->begin; idx < j->end; idx++) {
        double x = er_q_x(ref, idx), exact, rounded;
        const er_q_group_info *gi = &j->gi[er_q_group(ref, idx)];
        er_cval v;
        er_q_value_set(j->E, j->Q, x, gi, &v);
        er_q_exact(j->sk->O, j->sk->ov, x, j->qmax, gi->amax, &exact, &rounded);
        er_cset c;
        er__cset_build(&c, j->sk->O, j->sk->ov, 0, &v, exact, rounded);
        er__sink_put(j->sk, idx, &c);
    }
    if (j->begin > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread: MPFR's per-thread constants */
    return NULL;
}

static er_status er_q_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    const er_fmt_info *E = er__fmt(std->compute), *Q = er__fmt(ref->qfmt);
    double U = std->div_ulps ? std->div_ulps : 2.0, qmax = Q->max;
    int64_t G = ref->groups, n = ref->n;
    int nt = er__num_threads(n * 64);
    if (nt > n) nt = n > 0 ? (int)n : 1;
    ER_RETURN_IF_ERROR(er__mem_check((double)sizeof(er_q_group_info) * (double)G, "the groups' amax and scale"));
    ER_RETURN_IF_ERROR(er__sinks_open(sks, nt));
    er_q_group_info *gi = calloc((size_t)(G ? G : 1), sizeof *gi);
    if (!gi) return er__fail(ER_ERR_NOMEM, "cannot allocate %lld groups", (long long)G);
    /* each group's amax: max |x|, NaN where an element is NaN (torch.amax, the fp8 recipes' reductions) */
    for (int64_t idx = 0; idx < n; idx++) {
        double x = fabs(er_q_x(ref, idx));
        er_q_group_info *g = &gi[er_q_group(ref, idx)];
        if (isnan(x) || isnan(g->amax)) g->amax = NAN;
        else if (x > g->amax) g->amax = x;
    }
    er_sink *sa = er__sinks_at(sks, 0, 1), *ss = er__sinks_at(sks, 0, 2), *sq;
    for (int64_t g = 0; g < G; g++) {
        er_q_group_info *q = &gi[g];
        er_q_scale_set(E, U, qmax, ref->recipe == ER_RECIPE_POW2, q->amax, &q->sv, &q->sexact);
        if (sa) {
            er_cval v;
            er_q_empty(&v);
            er_q_put(&v, q->amax);
            v.nan_req = (uint8_t)isnan(q->amax);
            er_cset c;
            er__cset_build(&c, sa->O, sa->ov, 0, &v, q->amax, er__round_double(sa->O, q->amax, ER_ROUND_NEAREST, sa->ov));
            er__sink_put(sa, g, &c);
        }
        if (ss) {
            double a = q->amax;
            double rounded = a > 0 && isfinite(a) ? er_q_round_quotient(ss->O, qmax, a, ss->ov) : 1.0;
            er_cset c;
            er__cset_build(&c, ss->O, ss->ov, 0, &q->sv, q->sexact, rounded);
            er__sink_put(ss, g, &c);
            /* the kernel's scale, where it is in the set: q is one rounding of x times it */
            q->k = er__load(ss->out, er__offset(ss->out, g));
            q->have_k = er_q_in(&c, q->k);
        }
    }
    if ((sq = er__sinks_at(sks, 0, 0)) != NULL) {
        er_q_job jobs[ER_MAX_THREADS];
        for (int t = 0; t < nt; t++)
            jobs[t] = (er_q_job){ref, E, Q, gi, qmax, er__sinks_at(sks, t, 0), n * t / nt, n * (t + 1) / nt};
        er__run_jobs(jobs, sizeof jobs[0], nt, er_q_run);
    }
    free(gi);
    return ER_OK;
}

const er_op_module er__quantize_module = {.name = "quantize", .nout = 3, .out_names = er_q_names, .out_shape = er_q_out_shape,
                                          .check = er_q_check, .covers = er_q_covers};
