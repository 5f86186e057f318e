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
#include <exactref/mpfr.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"
#include "enclose/approx.h"

/* The state of a quantize reference: x (a tensor's view) or the base reference whose output is quantised (not owned);
 * the format of q, the groups (cols: the last dimension; gpr groups per row, or tiles across; tiles: rowsz the second
 * last dimension and tpr the tiles down it), the recipe of the scale. */
typedef struct er_quant_state {
    er_tensor A;
    const er_ref *base;
    er_format qfmt;
    int gran, recipe;
    int64_t block, cols, gpr, groups, rowsz, tpr;
} er_quant_state;
static er_quant_state *er__quant(const er_ref *r) { return (er_quant_state *)r->priv; }

/* x, or the base's inputs. */
static int er_q_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap) {
    if (er__quant(r)->base) return er__ref_inputs(er__quant(r)->base, views, names, cap);
    names[0] = "the input x";
    views[0] = &er__quant(r)->A;
    return 1;
}

/* The arguments both constructors check. */
static er_status er_q_args(er_format q, er_granularity granularity, int64_t block, er_scale_recipe recipe) {
    if (!er__fmt(q) || q == ER_FP64 || q == ER_TF32 || q == ER_FP8_E8M0FNU)
        return er__fail(ER_ERR_FORMAT, "q's format %d: expected fp32, fp16, bf16, an fp8, fp6 or fp4 format", (int)q);
    if ((unsigned)granularity > ER_GRAN_TILE)
        return er__fail(ER_ERR_INVALID, "granularity %d: expected tensor, row, block or tile", (int)granularity);
    if ((granularity == ER_GRAN_BLOCK || granularity == ER_GRAN_TILE) && block < 1)
        return er__fail(ER_ERR_INVALID, "block %lld: expected 1 or more elements", (long long)block);
    if ((unsigned)recipe > ER_RECIPE_NVFP4)
        return er__fail(ER_ERR_INVALID,
                        "recipe %d: expected amax, pow2, inv, mx, mx_ceil, mx_even, mx_rceil or nvfp4", (int)recipe);
    if (recipe == ER_RECIPE_NVFP4 && granularity != ER_GRAN_BLOCK && granularity != ER_GRAN_TILE)
        return er__fail(ER_ERR_INVALID, "the nvfp4 recipe scales blocks (of 16) or tiles (16 x 16): granularity block "
                                        "or tile, not %s", granularity == ER_GRAN_ROW ? "row" : "tensor");
    return ER_OK;
}

/* The MX recipes (quantize.md, Lemma Q5): the scale is a power of two X and q = RN_q(x / X), saturated. */
static int er_q_mx(er_scale_recipe recipe) { return recipe >= ER_RECIPE_MX && recipe <= ER_RECIPE_MX_RCEIL; }

/* A quantize reference of the given output shape: its groups. */
static er_status er_q_make(er_ref **out, int ndim, const int64_t *shape, er_format q, er_granularity granularity,
                           int64_t block, er_scale_recipe recipe, er_ref **made) {
    if (granularity == ER_GRAN_TILE && ndim < 2)
        return er__fail(ER_ERR_INVALID, "tile granularity takes x of 2 or more dimensions, not %d", ndim);
    er_ref *r;
    ER_RETURN_IF_ERROR(er__ref_alloc(&r, &er__quantize_module));
    r->ndim = ndim;
    r->n = 1;
    for (int i = 0; i < ndim; i++) { r->shape[i] = shape[i]; r->n *= shape[i]; }
    er__quant(r)->qfmt = q;
    er__quant(r)->gran = granularity;
    er__quant(r)->recipe = recipe;
    int blocks = granularity == ER_GRAN_BLOCK || granularity == ER_GRAN_TILE;
    er__quant(r)->block = blocks ? block : 0;
    er__quant(r)->cols = r->shape[ndim - 1];
    int64_t rows = 1; /* the leading dimensions' product: rows of no column are still groups (amax 0) */
    for (int i = 0; i < ndim - 1; i++)
        if (!er__mul_ok(rows, shape[i], &rows)) {
            free(r);
            return er__fail(ER_ERR_SIZE, "x's leading dimensions hold more rows than an int64 counts");
        }
    er__quant(r)->gpr = blocks ? (er__quant(r)->cols ? (er__quant(r)->cols - 1) / block + 1 : 0)
                               : 1; /* ceil without overflow */
    er__quant(r)->groups = granularity == ER_GRAN_TENSOR ? 1 : rows * er__quant(r)->gpr;
    if (granularity == ER_GRAN_TILE) { /* rows / R leading matrices of R rows, each ceil(R / block) tiles down */
        int64_t R = shape[ndim - 2];
        er__quant(r)->rowsz = R;
        er__quant(r)->tpr = R ? (R - 1) / block + 1 : 0;
        er__quant(r)->groups = (R ? rows / R : 0) * er__quant(r)->tpr * er__quant(r)->gpr;
    }
    *out = *made = r;
    return ER_OK;
}

er_status er_quantize(er_ref **out, const er_tensor *x, er_format q, er_granularity granularity, int64_t block,
                      er_scale_recipe recipe) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(x, "x");
    ER_RETURN_IF_ERROR(er__tensor_check(x, "x"));
    ER_RETURN_IF_ERROR(er_q_args(q, granularity, block, recipe));
    er_ref *r;
    ER_RETURN_IF_ERROR(er_q_make(out, x->ndim, x->shape, q, granularity, block, recipe, &r));
    er__quant(r)->A = *x;
    return ER_OK;
}

er_status er_quantize_ref(er_ref **out, const er_ref *base, er_format q, er_granularity granularity, int64_t block,
                          er_scale_recipe recipe) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(base, "base");
    if (er_ref_num_outputs(base) != 1 || !er__module_of(base)->exact)
        return er__fail(ER_ERR_UNSUPPORTED,
                        "quantize takes a reference of one output with exact values (a matmul, a reduction, "
                        "a tensor, a chain), not %s, in this version",
                        er__op_name(base));
    ER_RETURN_IF_ERROR(er_q_args(q, granularity, block, recipe));
    int nd;
    int64_t shape[ER_MAX_DIMS];
    ER_RETURN_IF_ERROR(er_ref_shape(base, &nd, shape));
    er_ref *r;
    ER_RETURN_IF_ERROR(er_q_make(out, nd, shape, q, granularity, block, recipe, &r));
    er__quant(r)->base = base;
    return ER_OK;
}

static const char *const er_q_names[3] = {"q", "amax", "scale"};

/* q has x's shape; amax and scale one value per group: [1] for the tensor, x's leading shape for rows (with the
 * number of blocks last for blocks); trailing dimensions of size 1 are accepted. */
static er_status er_q_out_shape(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape) {
    if (o == 0) return er__out_shape_same(ref, o, out, ndim, shape);
    int tile = er__quant(ref)->gran == ER_GRAN_TILE;
    int lead = er__quant(ref)->gran == ER_GRAN_TENSOR ? 0 : ref->ndim - 1 - tile;
    for (int i = 0; i < lead; i++) shape[i] = ref->shape[i];
    if (tile) shape[lead++] = er__quant(ref)->tpr;
    if (er__quant(ref)->gran == ER_GRAN_BLOCK || tile) shape[lead++] = er__quant(ref)->gpr;
    *ndim = lead ? lead : 1;
    if (!lead) shape[0] = 1;
    return er__out_shape_fits(ref, o, out, *ndim, shape);
}

static er_status er_q_check(const er_ref *ref, const er_standard *std) {
    if (std->amax_floor != 0 && er__quant(ref)->recipe >= ER_RECIPE_MX)
        return er__fail(ER_ERR_STANDARD, "amax_floor= applies to the amax, pow2 and inverse recipes, not to MX or "
                                         "NVFP4");
    if (std->amax_floor != 0 && er__quant(ref)->base)
        return er__fail(ER_ERR_UNSUPPORTED, "amax_floor= on a reference's output is not modelled in this version");
    const er_fmt_info *E = er__fmt(std->compute == ER_TF32 ? ER_FP32 : std->compute),
                      *Q = er__fmt(er__quant(ref)->qfmt);
    if (er__quant(ref)->base) {
        /* a reference's output: its standard is the base's (div_ulps the scale's), the compute format the kernel's
         * accumulator's */
        er_standard bs = *std;
        bs.div_ulps = 0;
        ER_RETURN_IF_ERROR(er__module_of(er__quant(ref)->base)->check(er__quant(ref)->base, &bs));
        if (Q->p >= E->p)
            return er__fail(ER_ERR_STANDARD, "quantize to %s needs a wider compute format than %s", Q->name, E->name);
        return ER_OK;
    }
    const er_fmt_info *X = er__fmt(er__quant(ref)->A.format);
    if (std->order != ER_ORDER_ANY)
        return er__fail(ER_ERR_STANDARD,
                        "quantize sums nothing: give any_order (its options set the scale's division)");
    if (std->rounding != ER_RND_NEAREST || std->compute == ER_TF32)
        return er__fail(ER_ERR_STANDARD, "quantize takes rounding=nearest and compute fp64, fp32, fp16 or bf16");
    if (X->p > E->p || X->min_sub < E->min_sub || X->max > E->max)
        return er__fail(ER_ERR_STANDARD,
                        "quantize of %s inputs needs a compute format holding them (compute=%s does not)", X->name,
                        E->name);
    if (Q->p >= E->p)
        return er__fail(ER_ERR_STANDARD, "quantize to %s needs a wider compute format than compute=%s", Q->name,
                        E->name);
    return er__standard_takes(ref, std);
}

static int64_t er_q_group(const er_ref *r, int64_t idx) {
    if (er__quant(r)->gran == ER_GRAN_TENSOR) return 0;
    if (er__quant(r)->gran == ER_GRAN_ROW) return idx / er__quant(r)->cols;
    const er_quant_state *s = er__quant(r);
    if (s->gran == ER_GRAN_TILE) { /* matrix m, row i, column j: tile (m, i / block, j / block) */
        int64_t row = idx / s->cols, m = row / s->rowsz, i = row % s->rowsz;
        return (m * s->tpr + i / s->block) * s->gpr + (idx % s->cols) / s->block;
    }
    return (idx / s->cols) * s->gpr + (idx % s->cols) / s->block;
}

static double er_q_x(const er_ref *r, int64_t idx) {
    return er__load(&er__quant(r)->A, er__offset(&er__quant(r)->A, idx));
}

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

/* One group's amax and scale: their sets in the compute format, their exact values, and the kernel's values where
 * they are in their sets (then what follows is judged against them). */
typedef struct er_q_group_info {
    er_cval av;              /* amax's set */
    double aexact;           /* the exact amax, to double (a tensor's: exact; a base's: within [abl, abh]) */
    double abl, abh;         /* a bracket of the exact amax (a base's) */
    double arounded;         /* ... correctly rounded to amax's output format */
    er_cval sv;              /* the scale's set */
    double sexact;           /* qmax / amax (1 where amax is 0 or not finite: the recipes' rule) */
    double srnd;             /* NVFP4: the exact decode scale correctly rounded to e4m3 (NaN: none) */
    int have_ka, have_k;     /* the kernel's amax, scale are in their sets */
    double ka, k;
    double anon;             /* max |x| over the elements that are not NaN (a tensor's: a max that skips NaN) */
} er_q_group_info;

/* The scale's set for amax in [alo, ahi] (finite, 0 <= alo <= ahi; quantize.md, Lemma Q1): within U ulps of qmax / a
 * (Lemma U1 over the quotients, decreasing in a), or the powers of two at or below those values; amax 0 or not
 * finite: 1 (Transformer Engine keeps its scale, 1 at first) or the plain quotient (qmax / 0 = inf, qmax / inf = 0). */
static void er_q_scale_range(er_cval *sv, const er_fmt_info *E, double U, double qmax, int pow2, double alo,
                             double ahi) {
    if (alo == 0) { er_q_put(sv, 1.0); er_q_put(sv, INFINITY); }
    if (ahi == 0) return;
    double qa = nextafter(qmax / ahi, 0.0), qb = alo > 0 ? nextafter(qmax / alo, INFINITY) : INFINITY, lo, hi;
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
    er_q_put(sv, lo);
    er_q_put(sv, hi);
}

/* The inverse recipe's scale_inv for amax in [alo, ahi] (finite, 0 <= alo <= ahi; quantize.md, Lemma Q4): within U
 * ulps of a / qmax (increasing in a); amax 0 gives 0 (and 1, a kept or clamped scale). */
static void er_q_scale_inv_range(er_cval *sv, const er_fmt_info *E, double U, double qmax, double alo, double ahi) {
    if (alo == 0) { er_q_put(sv, 0.0); er_q_put(sv, 1.0); }
    if (ahi == 0) return;
    double qa = alo > 0 ? nextafter(alo / qmax, 0.0) : 0.0, qb = nextafter(ahi / qmax, INFINITY), lo, hi;
    er__approx_ends(E, U, qa, qb, &lo, &hi);
    if (lo < E->min_normal) lo = fmin(lo, 0.0); /* a subnormal quotient may be flushed */
    er_q_put(sv, lo);
    er_q_put(sv, hi);
}

/* 2^e held to e8m0's range: below 2^-127 the least value (every recipe clamps there), above 2^127 NaN (e8m0's
 * overflow) or 2^127 (a saturating conversion). */
static void er_q_put_mx_pow2(er_cval *v, long e) {
    if (e > 127) { v->nan = 1; er_q_put(v, 0x1p127); return; }
    er_q_put(v, ldexp(1.0, e < -127 ? -127 : (int)e));
}

/* The exponent e of an MX recipe's scale X = 2^e for a finite amax a > 0 (quantize.md, Lemma Q5; not for MX_RCEIL,
 * which goes through a division): floor(log2 a) - emax_q, its ceiling, or the floor of a rounded to q's precision
 * with ties up (the exponent steps up where a >= 2^k (2 - 2^(1-p))). Each is non-decreasing in a. */
static long er_q_mx_exponent(er_scale_recipe recipe, const er_fmt_info *Q, double a) {
    int ex;
    double m = frexp(a, &ex); /* a = m 2^ex, m in [1/2, 1): floor(log2 a) = ex - 1 */
    long k = ex - 1;
    if (recipe == ER_RECIPE_MX_CEIL && m != 0.5) k++;
    if (recipe == ER_RECIPE_MX_EVEN && m >= 1.0 - ldexp(1.0, -(Q->p + 1))) k++;
    return k - Q->emax;
}

/* 2^ceil(log2 d), at least 2^-127 (cvt.rp.ue8m0 and cuBLAS: a descale at or below 2^-127, 0 included, gives
 * 2^-127); d finite and >= 0. */
static long er_q_rceil_exponent(double d) {
    if (!(d > 0x1p-127)) return -127;
    int ex;
    double m = frexp(d, &ex);
    return m == 0.5 ? ex - 1 : ex;
}

/* The MX scale's set for amax in [alo, ahi] (finite, 0 <= alo <= ahi): the recipe's power of two at each end (it
 * is non-decreasing in amax); for MX_RCEIL over the descales within U ulps of a / qmax (Lemma Q4's set, which a
 * flush may take to 0). An all-zero group allows every scale: q is 0 under each. */
static void er_q_mx_scale_range(er_cval *sv, const er_fmt_info *E, const er_fmt_info *Q, double U,
                                er_scale_recipe recipe, double alo, double ahi) {
    if (alo == 0) { er_q_put(sv, 0x1p-127); er_q_put(sv, 0x1p127); }
    if (ahi == 0) return;
    double lo = alo > 0 ? alo : ldexp(1.0, -1074);
    if (recipe == ER_RECIPE_MX_RCEIL) {
        er_cval d;
        er_q_empty(&d);
        er_q_scale_inv_range(&d, E, U, Q->max, lo, ahi);
        er_q_put_mx_pow2(sv, er_q_rceil_exponent(fmax(d.lo, 0.0)));
        er_q_put_mx_pow2(sv, er_q_rceil_exponent(d.hi));
        return;
    }
    er_q_put_mx_pow2(sv, er_q_mx_exponent(recipe, Q, lo));
    er_q_put_mx_pow2(sv, er_q_mx_exponent(recipe, Q, ahi));
}

/* The MX scale's exact value: the recipe's power of two from the exact amax a (MX_RCEIL from the exact a / qmax);
 * 2^-127 for a = 0 (every implementation's clamp of log2 0); NaN where a is NaN or infinite (the spec's NaN block)
 * or the power lies beyond e8m0's range. */
static double er_q_mx_exact(er_scale_recipe recipe, const er_fmt_info *Q, double a) {
    if (!isfinite(a)) return NAN;
    if (a == 0) return 0x1p-127;
    long e;
    if (recipe == ER_RECIPE_MX_RCEIL) {
        mpfr_t t; /* a / qmax rounded up: its power of two above is the exact quotient's (a quotient is a power of
                     two only where exact, and rounding up never passes the power above an inexact one) */
        mpfr_init2(t, 64);
        mpfr_set_d(t, a, MPFR_RNDN);
        mpfr_div_d(t, t, Q->max, MPFR_RNDU);
        double d = mpfr_get_d(t, MPFR_RNDU);
        mpfr_clear(t);
        e = er_q_rceil_exponent(d);
    } else e = er_q_mx_exponent(recipe, Q, a);
    if (e > 127) return NAN;
    return ldexp(1.0, e < -127 ? -127 : (int)e);
}

/* er_q_mx_exact for an exact amax held in MPFR (a base's, finite): the recipe's exponent of a equals that of a double
 * rounded toward it (quantize.md, Lemma Q8): down for the floor and even recipes (their steps are at doubles, which
 * rounding down never passes), up for the ceiling; MX_RCEIL from a / qmax rounded up in MPFR. */
static double er_q_mx_exact_mp(er_scale_recipe recipe, const er_fmt_info *Q, mpfr_srcptr a) {
    if (mpfr_zero_p(a)) return 0x1p-127;
    if (recipe != ER_RECIPE_MX_RCEIL)
        return er_q_mx_exact(recipe, Q, mpfr_get_d(a, recipe == ER_RECIPE_MX_CEIL ? MPFR_RNDU : MPFR_RNDD));
    mpfr_t t;
    mpfr_init2(t, 64);
    mpfr_div_d(t, a, Q->max, MPFR_RNDU);
    double d = mpfr_get_d(t, MPFR_RNDU);
    mpfr_clear(t);
    long e = er_q_rceil_exponent(d);
    return e > 127 ? NAN : ldexp(1.0, e < -127 ? -127 : (int)e);
}

/* NVFP4 (quantize.md, Lemma Q7): the tensor's encode scale S = 448 qmax / G (G = max |x|; 1 where G is 0) as the
 * kernel holds it, within U ulps of fp32 either as a quotient or as the reciprocal of G / (448 qmax), at most
 * FLT_MAX: [slo, shi]; free (no claim on any scale or q) where G is not finite. */
typedef struct er_q_nv { int free; double G, slo, shi, U; } er_q_nv; /* G: the exact G, to double */
static void er_q_put_any(er_cval *v, const er_fmt_info *Q);

#define ER_NV_SMAX 448.0 /* the block scales' format: e4m3 */

/* The encode scale's range for G in [Gl, Gh] (a tensor's: one point; a base's: Lemma Q9): S is decreasing in G,
 * so its least value comes from Gh and its greatest from Gl; 1 where G may be 0. */
static void er_q_nv_init(er_q_nv *nv, const er_fmt_info *Q, double U, double G, double Gl, double Gh) {
    nv->G = G;
    nv->U = U;
    nv->free = !isfinite(Gh) || isnan(G) || isnan(Gl);
    if (nv->free) return;
    if (Gh == 0) { nv->slo = nv->shi = 1.0; return; }
    double e = U * 0x1p-23 + 0x1p-50; /* S in double: within 2^-53 */
    nv->slo = fmin(ER_NV_SMAX * Q->max / Gh * (1 - e), FLT_MAX);
    nv->shi = Gl > 0 ? fmin(ER_NV_SMAX * Q->max / Gl / (1 - e), FLT_MAX) : FLT_MAX;
    if (Gl == 0) nv->slo = fmin(nv->slo, 1.0);
}

/* n steps of fp32 arithmetic, each a rounding to nearest or a division within U ulps (Triton's div.full): each
 * within max(U, 1/2) 2^-23 relative for a normal result; with a margin for the double arithmetic */
static double er_nv_r(double U, int n) { return n * fmax(U, 0.5) * 0x1p-23 * (1 + 0x1p-20) + 0x1p-45; }

/* A block's decode scale for its amax a in [alo, ahi] (finite, >= 0; a tensor's: one point): D = a S / qmax in fp32
 * (a times fl(S fl(1 / qmax)), or fl(a / qmax) times S, or divided by G / (448 qmax): three roundings; an underflow's
 * absolute 2^-149), at most FLT_MAX, then RN_e4m3 saturated; torchao clamps it to e4m3's least normal 2^-6 first.
 * Non-decreasing in a and S: the ends from alo, slo and ahi, shi. */
static void er_q_nv_scale_range(er_cval *sv, const er_fmt_info *Q, const er_q_nv *nv, double alo, double ahi) {
    const er_fmt_info *S8 = er__fmt(ER_FP8_E4M3FN);
    double r = er_nv_r(nv->U, 3), dlo = fmax(alo * nv->slo / Q->max * (1 - r) - 0x1p-149, 0.0),
           dhi = fmin(ahi * nv->shi / Q->max * (1 + r) + 0x1p-149, FLT_MAX);
    double lo = er__round_double(S8, dlo, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE),
           hi = er__round_double(S8, dhi, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
    er_q_put(sv, lo);
    er_q_put(sv, hi);
    if (lo < 0x1p-6) er_q_put(sv, 0x1p-6);
}

/* q's values for x and a block scale s: RN_q(x S / s) saturated, x S / s in fp32 with up to four roundings (S / s,
 * or the reciprocal of s fl(1 / S); then times x; or x / P then / s), free where s is 0 or not finite (the block
 * decodes to 0 or NaN whatever q holds) or where S / s may leave fp32's normal range. */
static void er_q_nv_put(er_cval *v, const er_fmt_info *Q, const er_q_nv *nv, double x, double s) {
    if (nv->free || !(s > 0) || !isfinite(s) || isnan(x) || nv->shi > 0x1p125 || nv->shi / s > 0x1p120) {
        er_q_put_any(v, Q);
        return;
    }
    if (isinf(x)) { er_q_put(v, x > 0 ? Q->max : -Q->max); return; }
    double r = er_nv_r(nv->U, 4), m = fabs(x), vlo = fmax(m * nv->slo / s * (1 - r) - 0x1p-149, 0.0),
           vhi = m * nv->shi / s * (1 + r) + 0x1p-149;
    double a = er__round_double(Q, vlo, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE),
           b = er__round_double(Q, vhi, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
    er_q_put(v, x < 0 ? -a : a);
    er_q_put(v, x < 0 ? -b : b);
}

/* The scale's set for amax's set av under the recipe; anon (MX only) the max over the elements that are not NaN;
 * floor (amax_floor=, 0: none) the least amax the kernel divides by. */
static void er_q_scale_set(const er_fmt_info *E, const er_fmt_info *Q, double U, er_scale_recipe recipe,
                           const er_cval *av, double anon, double floor, er_cval *sv) {
    er_q_empty(sv);
    double qmax = Q->max;
    if (er_q_mx(recipe)) {
        /* the spec's NaN block: an infinite or NaN element makes X NaN; a max that skips NaN (tl.max, fmaxf) gives
         * the scale of the other elements, unless one of them is infinite */
        if (av->lo <= av->hi) er_q_mx_scale_range(sv, E, Q, U, recipe, av->lo, av->hi);
        if ((av->nan || av->nan_req) && isfinite(anon)) er_q_mx_scale_range(sv, E, Q, U, recipe, anon, anon);
        if (av->pinf || av->nan || av->nan_req) { sv->nan = 1; sv->nan_req = !(sv->lo <= sv->hi); }
        return;
    }
    int inv = recipe == ER_RECIPE_INV;
    if (av->lo <= av->hi) {
        /* the kernel divides by max(amax, floor): non-decreasing in amax, so the ends move to it */
        double lo = fmax(av->lo, floor), hi = fmax(av->hi, floor);
        if (inv) er_q_scale_inv_range(sv, E, U, qmax, lo, hi);
        else er_q_scale_range(sv, E, U, qmax, recipe == ER_RECIPE_POW2, lo, hi);
    }
    if (av->pinf) { er_q_put(sv, 1.0); if (inv) sv->pinf = 1; else er_q_put(sv, 0.0); }
    if (av->nan || av->nan_req) { er_q_put(sv, 1.0); sv->nan = 1; }
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
static void er_q_put_rounded(er_cval *v, const er_fmt_info *Q, double p) {
    if (fabs(p) <= Q->max) { /* no rule applies: |RN_Q(p)| <= max under each */
        er_q_put(v, er__round_double(Q, p, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE));
        return;
    }
    er_q_put(v, er__round_double(Q, p, ER_ROUND_NEAREST, er__overflow_rule(Q, ER_OVERFLOW_DEFAULT)));
    er_q_put(v, er__round_double(Q, p, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE));
    if (Q->id == ER_FP8_E4M3FN) er_q_put(v, er__round_double(Q, p, ER_ROUND_NEAREST, ER_OVERFLOW_NAN));
}

/* Every value of Q: what q may hold where the MX scale is NaN (the block decodes to NaN whatever q is). */
static void er_q_put_any(er_cval *v, const er_fmt_info *Q) {
    er_q_put(v, -Q->max);
    er_q_put(v, Q->max);
    v->nan = 1;
    v->pinf = v->ninf = (uint8_t)Q->has_inf;
}

/* How q comes from x and the scale: RN_Q(RN_E(x s)) (the amax and pow2 recipes), RN_Q of x / s within U ulps (the
 * inverse recipe), or RN_Q(RN_E(x / X)) saturated for a power of two X (the MX recipes). */
enum { ER_Q_MUL = 0, ER_Q_DIV = 1, ER_Q_MX = 2 };
static int er_q_form(er_scale_recipe recipe) {
    return er_q_mx(recipe) ? ER_Q_MX : recipe == ER_RECIPE_INV ? ER_Q_DIV : ER_Q_MUL;
}

/* q's values for x and a scale s (quantize.md, Lemmas Q2, Q4 and Q5; for the division, both ends of its U ulps; a
 * division of 0, by 0 or by an infinity as IEEE 754 has it). */
static void er_q_put_scaled(er_cval *v, const er_fmt_info *E, const er_fmt_info *Q, double x, double s, int form,
                            double U) {
    if (form == ER_Q_MUL) { er_q_put_rounded(v, Q, er__round_prod(E, x, s, 1, ER_ROUND_NEAREST)); return; }
    if (form == ER_Q_MX) {
        if (isnan(s) || isnan(x)) { er_q_put_any(v, Q); return; }
        /* 1 / X is a power of two of double's range: x / X in E is one rounding of the exact quotient */
        er_q_put(v, er__round_double(Q, er__round_prod(E, x, 1.0 / s, 1, ER_ROUND_NEAREST), ER_ROUND_NEAREST,
                                     ER_OVERFLOW_SATURATE));
        return;
    }
    if (x == 0 || s == 0 || isinf(s) || isinf(x) || isnan(s)) { er_q_put_rounded(v, Q, x / s); return; }
    double d = x / s, lo, hi;
    er__approx_ends(E, U, nextafter(d, -INFINITY), nextafter(d, INFINITY), &lo, &hi);
    if (d > -E->min_normal && d < E->min_normal) {
        lo = fmin(lo, 0.0);
        hi = fmax(hi, 0.0);
    } /* a subnormal quotient may be flushed */
    er_q_put_rounded(v, Q, lo);
    er_q_put_rounded(v, Q, hi);
}

/* q's set for an element whose value lies in xv (quantize.md, Lemma Q2): against the kernel's scale where it is in
 * its set, else every scale of the set. RN_Q(RN_E(x s)) is monotone in x for a fixed s >= 0 and in s for a fixed
 * x: over a box (x's interval cut at 0, the scales' finite part) its extremes are at corners; the special values of
 * either join. */
static void er_q_value_set(const er_fmt_info *E, const er_fmt_info *Q, const er_cval *xv, const er_q_group_info *gi,
                           int form, double U, er_cval *v) {
    er_q_empty(v);
    int snan = gi->have_k ? isnan(gi->k) : gi->sv.nan || gi->sv.nan_req;
    /* a NaN scale: the block is NaN, q free; so is the q of a NaN element (fp4 and fp6 have no NaN to give) */
    if (form == ER_Q_MX && (snan || xv->nan || xv->nan_req)) { er_q_put_any(v, Q); return; }
    if (xv->nan_req) { v->nan = v->nan_req = 1; return; }
    if (xv->nan) v->nan = 1;
    double sp[4];
    int ns = 0, sinf = 0;
    if (gi->have_k) { if (isinf(gi->k)) sinf = 1; else sp[ns++] = gi->k; }
    else {
        const er_cval *s = &gi->sv;
        if (s->lo <= s->hi) { sp[ns++] = s->lo; sp[ns++] = s->hi; }
        sinf = s->pinf;
        if (s->nan || s->nan_req) v->nan = 1;
    }
    double xp[5]; /* lo, hi, 0 between them, +inf, -inf */
    int nx = 0;
    if (xv->lo <= xv->hi) {
        xp[nx++] = xv->lo;
        xp[nx++] = xv->hi;
        if (xv->lo < 0 && xv->hi > 0) xp[nx++] = 0.0;
    }
    if (xv->pinf) xp[nx++] = INFINITY;
    if (xv->ninf) xp[nx++] = -INFINITY;
    for (int i = 0; i < nx; i++) {
        for (int j = 0; j < ns; j++) er_q_put_scaled(v, E, Q, xp[i], sp[j], form, U);
        if (sinf) er_q_put_scaled(v, E, Q, xp[i], INFINITY, form, U);
    }
}

/* q's exact result S qmax / amax (S where amax is 0 or not finite, scale 1), to double and correctly rounded, for S
 * in [sl, sh] (the exact value's bracket; a point for a tensor) and amax in [al, ah]: where the quotient's bracket
 * rounds to one value that is the rounding; else MPFR from the exact values (mp, the element's exact S; amp amax). */
static int er_q_exact_bracket(const er_fmt_info *O, er_overflow ov, double sl, double sh, double qmax, double al,
                              double ah, double *exact, double *rounded) {
    if (isnan(al) || isnan(ah) || ah == 0 || isinf(ah) || !isfinite(sl) || !isfinite(sh)) {
        *exact = sl;
        *rounded = er__round_double(O, sl, ER_ROUND_NEAREST, ov);
        return 1;
    }
    *exact = NAN;
    if (!(al > 0)) return 0; /* amax may be 0: the exact values decide */
    if (sl == sh && al == ah) { /* a tensor's value and amax: exact */
        *exact = sl * qmax / al;
        *rounded = er__round_ratio(O, sl, qmax, al, ov);
        return 1;
    }
    double c[4] = {sl * qmax / al, sl * qmax / ah, sh * qmax / al, sh * qmax / ah}, mn = c[0], mx = c[0];
    for (int i = 1; i < 4; i++) { mn = fmin(mn, c[i]); mx = fmax(mx, c[i]); }
    /* each corner within two roundings of its quotient: moved outward by |c| 2^-51 + 2^-1073, at least two units of
     * its last place (a normal c: ulp(c) <= 2^-52 |c|; below, 2^-1074) */
    double r0 = er__round_double(O, mn - (fabs(mn) * 0x1p-51 + 0x1p-1073), ER_ROUND_NEAREST, ov);
    double r1 = er__round_double(O, mx + (fabs(mx) * 0x1p-51 + 0x1p-1073), ER_ROUND_NEAREST, ov);
    *exact = (sl + (sh - sl) / 2) * qmax / (al + (ah - al) / 2);
    *rounded = r0;
    return r0 == r1;
}

/* The exact result's rounding from MPFR: S (mpfr) qmax / amax (mpfr), at enough bits that a quotient which is not
 * a rounding boundary of O is not taken for one. */
static double er_q_exact_mpfr(const er_fmt_info *O, er_overflow ov, mpfr_srcptr S, double qmax, mpfr_srcptr a) {
    mpfr_t t;
    mpfr_init2(t, mpfr_get_prec(S) + mpfr_get_prec(a) + 64);
    mpfr_mul_d(t, S, qmax, MPFR_RNDN); /* exact: qmax has 3 significant bits, the precision room for them */
    mpfr_div(t, t, a, MPFR_RNDN);
    double r = er__round_mpfr(O, t, ER_ROUND_NEAREST, ov);
    mpfr_clear(t);
    return r;
}

typedef struct er_q_job {
    const er_ref *ref;
    const er_fmt_info *E, *Q;
    const er_q_group_info *gi;
    const double *xl, *xh;       /* the element sets' finite ends (NaN: none); flags */
    const double *xm, *xbl, *xbh; /* a base's exact values: near each (mid) and a bracket of each */
    const uint8_t *xf;
    const mpfr_t *amp;           /* each group's exact amax (a base's) */
    double qmax, U, floor;       /* q's largest value; the divisions' ulps; amax_floor (0: none) */
    const er_q_nv *nv;           /* NVFP4's encode scale */
    mpfr_srcptr Gm;              /* NVFP4 of a base: the exact G */
    er_sink *sk;
    int64_t begin, end;
    er_status st;
} er_q_job;

/* Element idx's set: a tensor's value, or the base's enclosure. */
static void er_q_xset(const er_q_job *j, int64_t idx, er_cval *xv) {
    er_q_empty(xv);
    if (!er__quant(j->ref)->base) {
        double x = er_q_x(j->ref, idx);
        if (isnan(x)) xv->nan = xv->nan_req = 1;
        else er_q_put(xv, x);
        return;
    }
    er__cval_of_enclosure(xv, j->xl[idx], j->xh[idx], j->xf[idx]);
}

/* An NVFP4 element's set (Lemma Q7: against the kernel's block scale where it is in its set, else the set's ends),
 * its exact value and correct rounding: x 448 qmax / (G sf) for the correctly rounded decode scale sf; 0 where x or
 * G is 0; none (NaN, never exact) where sf is 0 or the set claims nothing. exact NULL: the set alone. */
static void er_q_nv_element(const er_q_job *j, const er_q_group_info *gi, double x, er_cval *v, double *exact,
                            double *rounded) {
    const er_q_nv *nv = j->nv;
    const er_cval *s = &gi->sv;
    er_q_empty(v);
    if (gi->have_k) er_q_nv_put(v, j->Q, nv, x, gi->k);
    else if (s->nan || s->nan_req || s->pinf || s->ninf || !(s->lo > 0)) er_q_put_any(v, j->Q);
    else { er_q_nv_put(v, j->Q, nv, x, s->lo); er_q_nv_put(v, j->Q, nv, x, s->hi); }
    if (!exact) return;
    double sr = gi->srnd;
    *exact = *rounded = NAN;
    if (nv->G == 0 || x == 0) *exact = *rounded = 0; /* 0 under every finite encode scale */
    else if (!nv->free && sr > 0 && !isnan(x)) {
        *exact = x * (ER_NV_SMAX * j->qmax) / (nv->G * sr);
        *rounded = er__round_ratio(j->sk->O, x, ER_NV_SMAX * j->qmax, nv->G * sr, ER_OVERFLOW_SATURATE);
    }
}

/* The same for element idx of a base (Lemma Q9): q's set over x's interval (its ends, and 0 between them: q is
 * monotone in x for a fixed decode scale); the exact q S_i 448 qmax / (G sf) from S_i's bracket where both ends
 * round alike (the factor within 2^-50 of its double), else in MPFR. */
static er_status er_q_nv_base_element(const er_q_job *j, const er_q_group_info *gi, int64_t idx, er_cval *v,
                                      double *exact, double *rounded) {
    er_cval xv, w;
    er_q_xset(j, idx, &xv);
    er_q_empty(v);
    double xs[3];
    int nx = 0;
    if (xv.lo <= xv.hi) {
        xs[nx++] = xv.lo;
        xs[nx++] = xv.hi;
        if (xv.lo < 0 && xv.hi > 0) xs[nx++] = 0.0;
    }
    if (xv.nan || xv.nan_req || xv.pinf || xv.ninf || !nx) er_q_put_any(v, j->Q); /* the tensor's G is free then */
    for (int i = 0; i < nx; i++) {
        er_q_nv_element(j, gi, xs[i], &w, NULL, NULL);
        er_q_put(v, w.lo);
        er_q_put(v, w.hi);
        v->nan |= w.nan;
        v->pinf |= w.pinf;
        v->ninf |= w.ninf;
    }
    const er_q_nv *nv = j->nv;
    double sr = gi->srnd, bl = j->xbl[idx], bh = j->xbh[idx];
    *exact = *rounded = NAN;
    if (nv->free || isnan(sr)) return ER_OK;
    if (nv->G == 0 || (bl == 0 && bh == 0)) { *exact = *rounded = 0; return ER_OK; }
    if (!(sr > 0)) return ER_OK;
    double c = ER_NV_SMAX * j->qmax / (nv->G * sr), clo = c * (1 - 0x1p-50), chi = c * (1 + 0x1p-50);
    const er_fmt_info *O = j->sk->O;
    double p[4] = {bl * clo, bl * chi, bh * clo, bh * chi}, plo = p[0], phi = p[0];
    for (int k = 1; k < 4; k++) { plo = fmin(plo, p[k]); phi = fmax(phi, p[k]); }
    *exact = j->xm[idx] * c;
    *rounded = er__round_double(O, plo, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
    if (isfinite(plo) && isfinite(phi) &&
        *rounded == er__round_double(O, phi, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE))
        return ER_OK;
    int64_t index[ER_MAX_DIMS];
    er__index_of(j->ref, idx, index);
    mpfr_t S, d;
    mpfr_init2(S, 64);
    mpfr_init2(d, mpfr_get_prec(j->Gm) + 64);
    er_status st = er_ref_exact_mpfr(S, er__quant(j->ref)->base, index);
    if (st == ER_OK) {
        mpfr_mul_d(d, j->Gm, sr, MPFR_RNDN); /* exact: sr has 4 significant bits */
        *exact = mpfr_get_d(S, MPFR_RNDN) * c;
        *rounded = mpfr_zero_p(S) ? 0.0 : er_q_exact_mpfr(O, ER_OVERFLOW_SATURATE, S, ER_NV_SMAX * j->qmax, d);
    }
    mpfr_clear(S);
    mpfr_clear(d);
    return st;
}

static void *er_q_run(void *arg) {
    er_q_job *j = arg;
    const er_ref *ref = j->ref;
    const er_scale_recipe recipe = er__quant(ref)->recipe;
    mpfr_t S;
    mpfr_init2(S, 64);
    for (int64_t idx = j->begin; idx < j->end && j->st == ER_OK; idx++) {
        if ((idx & 1023) == 0) {
            if (er__cancelled()) {
                j->st = ER_ERR_CANCELLED;
                break;
            }
            if (idx > j->begin) er__progress_step(1024);
        }
        int64_t g = er_q_group(ref, idx);
        const er_q_group_info *gi = &j->gi[g];
        er_cval xv, v;
        double exact, rounded, x = er__quant(ref)->base ? 0.0 : er_q_x(ref, idx);
        if (recipe == ER_RECIPE_NVFP4 && er__quant(ref)->base) {
            j->st = er_q_nv_base_element(j, gi, idx, &v, &exact, &rounded);
            if (j->st != ER_OK) break;
        } else if (recipe == ER_RECIPE_NVFP4) er_q_nv_element(j, gi, x, &v, &exact, &rounded);
        else {
            er_q_xset(j, idx, &xv);
            er_q_value_set(j->E, j->Q, &xv, gi, er_q_form(recipe), j->U, &v);
        }
        if (er_q_mx(recipe) && er__quant(ref)->base) {
            /* a base's exact S over the exact power of two: from S's bracket where both ends round alike, else
             * S in MPFR (Lemma Q8) */
            double X = gi->sexact;
            exact = rounded = NAN;
            if (!isnan(X)) {
                exact = j->xm[idx] / X;
                rounded = er__round_double(j->sk->O, j->xbl[idx] / X, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
                if (rounded != er__round_double(j->sk->O, j->xbh[idx] / X, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE) ||
                    !isfinite(j->xbl[idx]) || !isfinite(j->xbh[idx])) {
                    int64_t index[ER_MAX_DIMS];
                    er__index_of(ref, idx, index);
                    j->st = er_ref_exact_mpfr(S, er__quant(ref)->base, index);
                    if (j->st != ER_OK) break;
                    int ex;
                    frexp(X, &ex);
                    mpfr_div_2si(S, S, ex - 1, MPFR_RNDN); /* X = 2^(ex - 1): exact */
                    exact = mpfr_get_d(S, MPFR_RNDN);
                    rounded = er__round_mpfr(j->sk->O, S, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
                }
            }
        } else if (er_q_mx(recipe)) { /* a tensor's x over the exact scale: exact in double */
            exact = x / gi->sexact;
            rounded = er__round_double(j->sk->O, exact, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
        } else if (recipe != ER_RECIPE_NVFP4) {
            /* the exact S and amax within their brackets (a tensor's: exact, at least the floor; NaN stays) */
            int base = er__quant(ref)->base != NULL;
            double sl = base ? j->xbl[idx] : x, sh = base ? j->xbh[idx] : x;
            double al = base ? gi->abl : fmax(gi->aexact, j->floor), ah = base ? gi->abh : fmax(gi->aexact, j->floor);
            if (isnan(gi->aexact)) al = ah = NAN;
            if (!er_q_exact_bracket(j->sk->O, j->sk->ov, sl, sh, j->qmax, al, ah, &exact, &rounded)) {
                int64_t index[ER_MAX_DIMS];
                er__index_of(ref, idx, index);
                j->st = er_ref_exact_mpfr(S, er__quant(ref)->base, index);
                if (j->st != ER_OK) break;
                int one = mpfr_zero_p(j->amp[g]); /* amax 0: scale 1 */
                double Sd = mpfr_get_d(S, MPFR_RNDN);
                rounded = one ? er__round_mpfr(j->sk->O, S, ER_ROUND_NEAREST, j->sk->ov)
                              : er_q_exact_mpfr(j->sk->O, j->sk->ov, S, j->qmax, j->amp[g]);
                exact = one ? Sd : Sd * j->qmax / mpfr_get_d(j->amp[g], MPFR_RNDN);
            }
        }
        er_cset c;
        er__cset_build(&c, j->sk->O, j->sk->ov, 0, &v, exact, rounded);
        er__sink_put(j->sk, idx, &c);
    }
    mpfr_clear(S);
    if (j->begin > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread: MPFR's per-thread constants */
    return NULL;
}

/* Whether a base's element idx may hold its group's greatest |S|: its bracket reaches the greatest of the group's
 * least |S| (and the group's brackets are finite). */
static int er_q_candidate(const er_ref *ref, const er_q_job *j0, const er_q_group_info *gi, int64_t idx) {
    const er_q_group_info *q = &gi[er_q_group(ref, idx)];
    double most = fmax(fabs(j0->xbl[idx]), fabs(j0->xbh[idx]));
    return most >= q->abl && isfinite(q->abh);
}

/* One thread's candidates [begin, end): each one's exact |S| in MPFR into val. */
typedef struct er_q_ajob {
    const er_ref *ref;
    const int64_t *cand;
    mpfr_t *val;
    int64_t begin, end;
    er_status st;
} er_q_ajob;

static void *er_q_amax_run(void *arg) {
    er_q_ajob *j = arg;
    for (int64_t c = j->begin; c < j->end && j->st == ER_OK; c++) {
        int64_t index[ER_MAX_DIMS];
        er__index_of(j->ref, j->cand[c], index);
        j->st = er_ref_exact_mpfr(j->val[c], er__quant(j->ref)->base, index);
        mpfr_abs(j->val[c], j->val[c], MPFR_RNDN);
    }
    if (j->begin > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread: MPFR's per-thread constants */
    return NULL;
}

/* One thread's brackets of a base's exact values, elements [begin, end). */
typedef struct er_q_bjob {
    const er_ref *base;
    double *xm, *xbl, *xbh;
    int64_t begin, end;
    er_status st;
} er_q_bjob;

static void *er_q_bracket_run(void *arg) {
    er_q_bjob *j = arg;
    for (int64_t idx = j->begin; idx < j->end && j->st == ER_OK; idx++)
        j->st = er__ref_bracket(j->base, idx, &j->xm[idx], &j->xbl[idx], &j->xbh[idx]);
    return NULL;
}

/* Each group's amax set and exact amax: from a tensor's values, or from the base's enclosure and the brackets of
 * its exact values (the greatest of each element's least and greatest |x|; the exact amax found in MPFR among the
 * elements whose bracket reaches the greatest of the brackets' least |S|). */
static er_status er_q_amax(const er_ref *ref, er_q_job *j0, er_q_group_info *gi, mpfr_t *amp) {
    int64_t n = ref->n, G = er__quant(ref)->groups;
    uint8_t *seen = calloc((size_t)(G ? G : 1), 1), *fin = calloc((size_t)(G ? G : 1), 1);
    if (!seen || !fin) {
        free(seen);
        free(fin);
        return er__fail(ER_ERR_NOMEM, "cannot allocate %lld groups", (long long)G);
    }
    for (int64_t g = 0; g < G; g++) {
        er_q_empty(&gi[g].av);
        gi[g].aexact = gi[g].abl = gi[g].abh = gi[g].anon = 0;
        fin[g] = 1;
    }
    for (int64_t idx = 0; idx < n; idx++) {
        int64_t g = er_q_group(ref, idx);
        er_q_group_info *q = &gi[g];
        er_cval xv;
        er_q_xset(j0, idx, &xv);
        double e = er__quant(ref)->base ? j0->xm[idx] : er_q_x(ref, idx);
        if (!isnan(e)) q->anon = fmax(q->anon, fabs(e));
        if (isnan(e) || isnan(q->aexact)) q->aexact = q->abl = q->abh = NAN;
        else {
            q->aexact = fmax(q->aexact, fabs(e));
            if (er__quant(ref)->base) {
                double bl = j0->xbl[idx], bh = j0->xbh[idx];
                q->abl = fmax(q->abl, bl > 0 ? bl : bh < 0 ? -bh : 0.0);
                q->abh = fmax(q->abh, fmax(fabs(bl), fabs(bh)));
            }
        }
        q->av.nan |= xv.nan;
        q->av.nan_req |= xv.nan_req;
        q->av.pinf |= xv.pinf | xv.ninf;
        if (!(xv.lo <= xv.hi)) { fin[g] = 0; continue; }
        double least = xv.lo > 0 ? xv.lo : xv.hi < 0 ? -xv.hi : 0.0, most = fmax(fabs(xv.lo), fabs(xv.hi));
        if (!seen[g]) { q->av.lo = least; q->av.hi = most; seen[g] = 1; }
        else { q->av.lo = fmax(q->av.lo, least); q->av.hi = fmax(q->av.hi, most); }
    }
    for (int64_t g = 0; g < G; g++) {
        if (!fin[g]) { gi[g].av.lo = INFINITY; gi[g].av.hi = -INFINITY; } /* an element with no finite value: none */
        else if (!seen[g]) gi[g].av.lo = gi[g].av.hi = 0; /* no element: max |x| over nothing, 0 (aexact too) */
    }
    free(seen);
    free(fin);
    if (!er__quant(ref)->base) return ER_OK;
    /* the exact amax in MPFR: among the elements whose bracket reaches the greatest least |S| (their exact |S| on the
     * threads, then each group's greatest in element order: the first of equals) */
    int64_t nc = 0;
    for (int64_t idx = 0; idx < n; idx++) nc += er_q_candidate(ref, j0, gi, idx);
    int64_t *cand = malloc(sizeof(int64_t) * (size_t)(nc ? nc : 1));
    mpfr_t *val = malloc(sizeof(mpfr_t) * (size_t)(nc ? nc : 1));
    if (!cand || !val) {
        free(cand);
        free(val);
        return er__fail(ER_ERR_NOMEM, "cannot allocate %lld amax candidates", (long long)nc);
    }
    for (int64_t idx = 0, c = 0; idx < n; idx++)
        if (er_q_candidate(ref, j0, gi, idx)) cand[c++] = idx;
    for (int64_t c = 0; c < nc; c++) mpfr_init2(val[c], 64);
    int nt = er__num_threads(nc << 16); /* (each a sum of K terms in MPFR) */
    if (nt > nc) nt = nc > 0 ? (int)nc : 1;
    er_q_ajob jobs[ER_MAX_THREADS];
    for (int t = 0; t < nt; t++) jobs[t] = (er_q_ajob){ref, cand, val, nc * t / nt, nc * (t + 1) / nt, ER_OK};
    er__run_jobs(jobs, sizeof jobs[0], nt, er_q_amax_run);
    er_status st = ER_OK;
    for (int t = 0; t < nt && st == ER_OK; t++) st = jobs[t].st;
    for (int64_t c = 0; c < nc && st == ER_OK; c++) {
        mpfr_ptr a = amp[er_q_group(ref, cand[c])];
        if (mpfr_cmp(val[c], a) > 0) { mpfr_set_prec(a, mpfr_get_prec(val[c])); mpfr_set(a, val[c], MPFR_RNDN); }
    }
    for (int64_t c = 0; c < nc; c++) mpfr_clear(val[c]);
    free(cand);
    free(val);
    return st;
}

static er_status er_q_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    const er_fmt_info *E = er__fmt(std->compute), *Q = er__fmt(er__quant(ref)->qfmt);
    double U = std->div_ulps ? std->div_ulps : 2.0, qmax = Q->max;
    int64_t G = er__quant(ref)->groups, n = ref->n;
    int nt = er__num_threads(n * 64);
    if (nt > n) nt = n > 0 ? (int)n : 1;
    ER_RETURN_IF_ERROR(
        er__mem_check((double)sizeof(er_q_group_info) * (double)G + (er__quant(ref)->base ? 25.0 * (double)n : 0.0),
                      "the groups' amax and scale"));
    ER_RETURN_IF_ERROR(er__sinks_open(sks, nt));
    er_q_group_info *gi = calloc((size_t)(G ? G : 1), sizeof *gi);
    mpfr_t *amp = er__quant(ref)->base ? calloc((size_t)(G ? G : 1), sizeof *amp) : NULL;
    double *xl = NULL, *xh = NULL, *xm = NULL, *xbl = NULL, *xbh = NULL;
    uint8_t *xf = NULL;
    er_status st = gi && (!er__quant(ref)->base || amp)
                       ? ER_OK
                       : er__fail(ER_ERR_NOMEM, "cannot allocate %lld groups", (long long)G);
    for (int64_t g = 0; amp && g < G; g++) { mpfr_init2(amp[g], 64); mpfr_set_zero(amp[g], 1); }
    if (st == ER_OK && er__quant(ref)->base) {
        /* the base's sets in the compute format (the kernel's accumulator) and brackets of its exact values */
        size_t m = (size_t)(n ? n : 1);
        xl = malloc(sizeof(double) * m); xh = malloc(sizeof(double) * m); xf = malloc(m);
        xm = malloc(sizeof(double) * m); xbl = malloc(sizeof(double) * m); xbh = malloc(sizeof(double) * m);
        if (!xl || !xh || !xf || !xm || !xbl || !xbh)
            st = er__fail(ER_ERR_NOMEM, "cannot allocate the base sets of %lld elements", (long long)n);
        er_standard bs = *std; /* div_ulps is the scale's */
        bs.div_ulps = 0;
        if (st == ER_OK) st = er_ref_enclosure(er__quant(ref)->base, 0, &bs, E->id, xl, xh, xf);
        if (st == ER_OK) { /* on the threads */
            er_q_bjob bj[ER_MAX_THREADS];
            for (int t = 0; t < nt; t++) bj[t] = (er_q_bjob){er__quant(ref)->base, xm, xbl, xbh, n * t / nt,
                                                             n * (t + 1) / nt, ER_OK};
            er__run_jobs(bj, sizeof bj[0], nt, er_q_bracket_run);
            for (int t = 0; t < nt && st == ER_OK; t++) st = bj[t].st;
        }
    }
    double floor = std->amax_floor;
    er_q_nv nv = {0, 0, 1, 1, 2};
    mpfr_t Gm;
    mpfr_init2(Gm, 64);
    mpfr_set_zero(Gm, 1);
    er_q_job j0 = {ref, E, Q, gi, xl, xh, xm, xbl, xbh, xf, (const mpfr_t *)amp, qmax, U, floor, &nv, Gm, NULL, 0, 0,
                   ER_OK};
    if (st == ER_OK) st = er_q_amax(ref, &j0, gi, amp);
    int nvfp4 = er__quant(ref)->recipe == ER_RECIPE_NVFP4, base = er__quant(ref)->base != NULL;
    if (nvfp4 && st == ER_OK) {
        /* the tensor's max |x|: NaN where an element is NaN; a base's over its groups' amax sets (an element that may
         * be infinite or NaN: none), and its exact G in MPFR */
        double gmax = 0, gl = 0, gh = 0;
        for (int64_t g = 0; g < G; g++) {
            gmax = isnan(gi[g].aexact) || isnan(gmax) ? NAN : fmax(gmax, gi[g].aexact);
            const er_cval *av = &gi[g].av;
            if (av->nan || av->nan_req || av->pinf || !(av->lo <= av->hi)) gh = INFINITY;
            else { gl = fmax(gl, av->lo); gh = fmax(gh, av->hi); }
            if (base && mpfr_cmp(amp[g], Gm) > 0) {
                mpfr_set_prec(Gm, mpfr_get_prec(amp[g]));
                mpfr_set(Gm, amp[g], MPFR_RNDN);
            }
        }
        if (base) gmax = isfinite(gh) ? mpfr_get_d(Gm, MPFR_RNDN) : NAN;
        if (!base) gl = gh = gmax;
        er_q_nv_init(&nv, Q, U, gmax, gl, gh);
    }
    er_sink *sa = er__sinks_at(sks, 0, 1), *ss = er__sinks_at(sks, 0, 2), *sq;
    for (int64_t g = 0; g < G && st == ER_OK; g++) {
        er_q_group_info *q = &gi[g];
        double a = q->aexact;
        if (sa) {
            er_cset c;
            double ra = er__round_double(sa->O, a, ER_ROUND_NEAREST, sa->ov);
            if (er__quant(ref)->base && isfinite(a)) ra = er__round_mpfr(sa->O, amp[g], ER_ROUND_NEAREST, sa->ov);
            er__cset_build(&c, sa->O, sa->ov, 0, &q->av, a, ra);
            er__sink_put(sa, g, &c);
            q->ka = er__load(sa->out, er__offset(sa->out, g));
            q->have_ka = er_q_in(&c, q->ka);
        }
        /* the scale from the kernel's amax where that is in its set */
        er_cval av = q->av;
        if (q->have_ka) { er_q_empty(&av); er_q_put(&av, q->ka); av.nan_req = (uint8_t)isnan(q->ka); }
        /* the scale's set, its exact value and (with a scale output) its correct rounding */
        int inv = er__quant(ref)->recipe == ER_RECIPE_INV, mx = er_q_mx(er__quant(ref)->recipe);
        double rounded = NAN;
        if (nvfp4) {
            /* Lemma Q7: the block's decode scale from its exact amax and the tensor's encode scale; a base's over
             * its amax set (Lemma Q9), its exact value and correct roundings from the MPFR amax and G */
            int none = nv.free || !isfinite(a);
            er_q_empty(&q->sv);
            if (none) er_q_put_any(&q->sv, er__fmt(ER_FP32));
            else if (base) er_q_nv_scale_range(&q->sv, Q, &nv, av.lo, av.hi);
            else er_q_nv_scale_range(&q->sv, Q, &nv, a, a);
            q->sexact = none ? NAN : nv.G == 0 ? 0.0 : a * ER_NV_SMAX / nv.G;
            const er_fmt_info *S8 = er__fmt(ER_FP8_E4M3FN);
            q->srnd = none ? NAN : nv.G == 0 ? 0.0
                    : base ? er_q_exact_mpfr(S8, ER_OVERFLOW_SATURATE, amp[g], ER_NV_SMAX, Gm)
                           : er__round_double(S8, q->sexact, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            if (ss && !none)
                rounded = nv.G == 0 ? 0.0
                        : base ? er_q_exact_mpfr(ss->O, ss->ov, amp[g], ER_NV_SMAX, Gm)
                               : er__round_ratio(ss->O, a, ER_NV_SMAX, nv.G, ss->ov);
        } else {
            if (mx && base && (av.nan || av.nan_req || av.pinf)) {
                /* a base whose set allows an infinity or NaN in the group: every scale, q free (Lemma Q8) */
                er_q_empty(&q->sv);
                er_q_put(&q->sv, 0x1p-127);
                er_q_put(&q->sv, 0x1p127);
                q->sv.nan = 1;
            } else er_q_scale_set(E, Q, U, er__quant(ref)->recipe, &av, q->anon, floor, &q->sv);
            if (isfinite(a)) a = fmax(a, floor); /* the amax divided by (a tensor's: the base refuses a floor) */
            q->sexact = mx && base ? (isfinite(a) ? er_q_mx_exact_mp(er__quant(ref)->recipe, Q, amp[g]) : NAN)
                      : mx ? er_q_mx_exact(er__quant(ref)->recipe, Q, a)
                      : a > 0 && isfinite(a) ? (inv ? a / qmax : qmax / a) : inv && a == 0 ? 0.0 : 1.0;
            rounded = q->sexact;
            if (ss && mx) rounded = er__round_double(ss->O, q->sexact, ER_ROUND_NEAREST, ss->ov);
            else if (ss && a > 0 && isfinite(a)) {
                if (!er__quant(ref)->base)
                    rounded = inv ? er__round_ratio(ss->O, a, 1.0, qmax, ss->ov)
                                  : er__round_ratio(ss->O, qmax, 1.0, a, ss->ov);
                else {
                    mpfr_t one;
                    mpfr_init2(one, 16);
                    mpfr_set_ui(one, 1, MPFR_RNDN);
                    if (inv) mpfr_set_d(one, qmax, MPFR_RNDN); /* exact: qmax has at most 3 significant bits */
                    rounded = inv ? er_q_exact_mpfr(ss->O, ss->ov, amp[g], 1.0, one)
                                  : er_q_exact_mpfr(ss->O, ss->ov, one, qmax, amp[g]);
                    mpfr_clear(one);
                }
            }
        }
        if (ss) {
            er_cset c;
            er__cset_build(&c, ss->O, ss->ov, 0, &q->sv, q->sexact, rounded);
            er__sink_put(ss, g, &c);
            /* the kernel's scale, where it is in the set: q is one rounding of x times it */
            q->k = er__load(ss->out, er__offset(ss->out, g));
            q->have_k = er_q_in(&c, q->k);
        }
    }
    if (st == ER_OK && (sq = er__sinks_at(sks, 0, 0)) != NULL) {
        er_q_job jobs[ER_MAX_THREADS];
        for (int t = 0; t < nt; t++) {
            jobs[t] = j0;
            jobs[t].sk = er__sinks_at(sks, t, 0);
            jobs[t].begin = n * t / nt;
            jobs[t].end = n * (t + 1) / nt;
        }
        er__run_jobs_progress(jobs, sizeof jobs[0], nt, er_q_run, n);
        for (int t = 0; t < nt && st == ER_OK; t++) st = jobs[t].st;
    }
    for (int64_t g = 0; amp && g < G; g++) mpfr_clear(amp[g]);
    mpfr_clear(Gm);
    free(amp);
    free(gi);
    free(xl); free(xh); free(xf); free(xm); free(xbl); free(xbh);
    return st;
}

const er_op_module er__quantize_module = { .name = "quantize",
                                           .takes = ER_TAKES_DIV_ULPS | ER_TAKES_DEPTH | ER_TAKES_AMAX_FLOOR,
                                           .nout = 3,
                                           .out_names = er_q_names,
                                           .out_shape = er_q_out_shape,
                                           .priv_size = sizeof(er_quant_state),
                                           .inputs = er_q_inputs,
                                           .check = er_q_check,
                                           .covers = er_q_covers };
