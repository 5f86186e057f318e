/* modules.c: the table of op modules and what they share (src/ops/module.h; docs/design.md): a reference's making,
 * release, shape and inputs through its module; the output set through the output conversion, the options each op
 * takes, the output shape of single-output ops. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"

const er_op_module *er__module_of(const er_ref *ref) { return ref->mod; }

const char *er__op_name(const er_ref *r) { return r->name ? r->name : r->mod->name; }

int64_t er__ref_numel(const er_ref *r) { return r->n; }

er_status er__ref_alloc(er_ref **out, const er_op_module *m) {
    const er_op_module *const *t = er__modules;
    while (*t && *t != m) t++;
    if (!*t) return er__fail(ER_ERR_INTERNAL, "op module %s is not in the table of modules (src/ops/table.c)", m->name);
    /* the state follows the reference, at an offset aligned for any type */
    size_t head = (sizeof(er_ref) + _Alignof(max_align_t) - 1) / _Alignof(max_align_t) * _Alignof(max_align_t);
    er_ref *r = calloc(1, head + m->priv_size);
    if (!r) return er__fail(ER_ERR_NOMEM, "cannot allocate a reference");
    r->mod = m;
    r->priv = (char *)r + head;
    *out = r;
    return ER_OK;
}

void er_ref_free(er_ref *r) {
    if (!r) return;
    if (r->mod->destroy) r->mod->destroy(r);
    free(r);
}

int er_ref_fast(const er_ref *r) { return r && r->mod->fast ? r->mod->fast(r) : 0; }

er_status er_ref_shape(const er_ref *r, int *ndim, int64_t *shape) {
    er__ok();
    ER_CHECK_NULL(r, "ref");
    ER_CHECK_NULL(ndim, "ndim");
    ER_CHECK_NULL(shape, "shape");
    *ndim = r->ndim;
    for (int i = 0; i < r->ndim; i++) shape[i] = r->shape[i];
    return ER_OK;
}

er_status er__ref_index(const er_ref *r, const int64_t *index, int64_t *idx) {
    int64_t v = 0;
    for (int i = 0; i < r->ndim; i++) {
        if (index[i] < 0 || index[i] >= r->shape[i])
            return er__fail(ER_ERR_INVALID, "index %lld is out of range [0, %lld) in dimension %d",
                            (long long)index[i], (long long)r->shape[i], i);
        v = v * r->shape[i] + index[i];
    }
    *idx = v;
    return ER_OK;
}

int er__ref_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap) {
    return cap > 0 ? r->mod->inputs(r, views, names, cap) : 0;
}

/* Maps one endpoint v of the compute set through the output conversion. Returns 0 when the whole finite part
 * is gone (every value on the far side overflows); sets flags for infinities and NaN the conversion makes. */
static int er_map_endpoint(er_cset *c, const er_fmt_info *O, er_overflow ov, double v, double *endpoint, int is_lo) {
    double r = er__round_double(O, v, ER_ROUND_NEAREST, ov);
    if (isfinite(r)) { *endpoint = r; return 1; }
    if (isnan(r)) c->nan_ok = 1; else if (r > 0) c->pinf_ok = 1; else c->ninf_ok = 1;
    *endpoint = v > 0 ? O->max : -O->max;
    return !((is_lo && v > 0) || (!is_lo && v < 0));
}

/* The conversion of a compute-format infinity that some order produces. */
static void er_map_inf(er_cset *c, const er_fmt_info *O, er_overflow ov, double inf) {
    double r = er__round_double(O, inf, ER_ROUND_NEAREST, ov);
    if (isnan(r)) { c->nan_ok = 1; return; }
    if (isinf(r)) { if (r > 0) c->pinf_ok = 1; else c->ninf_ok = 1; return; }
    if (c->lo > c->hi) { c->lo = c->hi = r; return; } /* saturated */
    if (r < c->lo) c->lo = r;
    if (r > c->hi) c->hi = r;
}

void er__cset_build(er_cset *c, const er_fmt_info *O, er_overflow ov, int any, const er_cval *v, double exact,
                    double rounded) {
    memset(c, 0, sizeof *c);
    c->lo = INFINITY;
    c->hi = -INFINITY;
    c->nan_req = v->nan_req;
    c->nan_ok = v->nan;
    if (v->lo <= v->hi) {
        int finite = er_map_endpoint(c, O, ov, v->lo, &c->lo, 1);
        finite = er_map_endpoint(c, O, ov, v->hi, &c->hi, 0) && finite;
        if (!finite) { c->lo = INFINITY; c->hi = -INFINITY; }
    }
    if (v->pinf) er_map_inf(c, O, ov, INFINITY);
    if (v->ninf) er_map_inf(c, O, ov, -INFINITY);
    c->exact = exact;
    c->rounded = rounded;
    if (O->no_nan && (c->nan_req || c->nan_ok)) {
        /* fp4 and fp6 have no NaN: what a kernel's conversion of a NaN result gives is its own, any value */
        c->nan_req = c->nan_ok = 0;
        c->lo = -O->max;
        c->hi = O->max;
        return;
    }
    if (!any || c->nan_req) return;
    /* any_order: the correctly rounded exact result belongs to the set (a kernel returning it is never wrong) */
    if (isnan(c->rounded)) c->nan_ok = 1;
    else if (isinf(c->rounded)) { if (c->rounded > 0) c->pinf_ok = 1; else c->ninf_ok = 1; }
    else if (c->lo > c->hi) c->lo = c->hi = c->rounded;
    else { if (c->rounded < c->lo) c->lo = c->rounded; if (c->rounded > c->hi) c->hi = c->rounded; }
}

/* The options and values only some ops take: the bit a module's `takes` holds for them, whether a standard sets them,
 * and the refusal, whose first %s is the ops that take them (from the table of modules), the second the op. */
typedef struct er_takes_rule {
    unsigned bit;
    er_status status;
    int (*set)(const er_standard *s);
    const char *fmt;
    const char *label; /* the options or values, as er_op_options lists them */
} er_takes_rule;

static int er_set_mma(const er_standard *s) { return s->order == ER_ORDER_MMA; }
static int er_set_tf32(const er_standard *s) { return s->compute == ER_TF32; }
static int er_set_rsqrt(const er_standard *s) { return s->rsqrt_ulps != 0; }
static int er_set_variance(const er_standard *s) { return s->variance != 0; }
static int er_set_combine(const er_standard *s) { return s->combine_depth != 0; }
static int er_set_exp(const er_standard *s) { return s->exp_ulps != 0; }
static int er_set_log(const er_standard *s) { return s->log_ulps != 0; }
static int er_set_div(const er_standard *s) { return s->div != 0; }
static int er_set_fast(const er_standard *s) { return s->exp_fast || s->fast_math == 1; }
static int er_set_triton(const er_standard *s) { return s->fast_math == 2; }
static int er_set_flush(const er_standard *s) { return s->subnormals == ER_SUBNORMALS_FLUSH; }
static int er_set_div_ulps(const er_standard *s) { return s->div_ulps != 0; }
static int er_set_online(const er_standard *s) { return s->max_optional || s->online; }
static int er_set_depth(const er_standard *s) { return s->depth != 0; }
static int er_set_mean(const er_standard *s) { return s->mean != 0; }
static int er_set_attn(const er_standard *s) { return s->kv_block != 0 || s->p_sum != 0 || s->qk_scale != 0; }
static int er_set_products(const er_standard *s) { return s->products != 0; }
static int er_set_amax_floor(const er_standard *s) { return s->amax_floor != 0; }

static const er_takes_rule er_takes_rules[] = {
    {ER_TAKES_MMA, ER_ERR_STANDARD, er_set_mma, "mma standards model tensor-core products; they apply to %s, not to %s",
     "mma:<arch>"},
    {ER_TAKES_TF32, ER_ERR_STANDARD, er_set_tf32,
     "compute=tf32 converts operands of products; it applies to %s, not to %s", "compute=tf32"},
    {ER_TAKES_RSQRT, ER_ERR_STANDARD, er_set_rsqrt, "rsqrt_ulps= applies to %s, not to %s", "rsqrt_ulps="},
    {ER_TAKES_VARIANCE, ER_ERR_STANDARD, er_set_variance, "variance= applies to %s, not to %s", "variance="},
    {ER_TAKES_VARIANCE, ER_ERR_STANDARD, er_set_combine, "combine_depth= bounds a Welford tree (%s), not %s",
     "combine_depth="},
    {ER_TAKES_EXP, ER_ERR_STANDARD, er_set_exp, "exp_ulps= applies to %s, not to %s", "exp_ulps="},
    {ER_TAKES_LOG, ER_ERR_STANDARD, er_set_log, "log_ulps= applies to %s, not to %s", "log_ulps="},
    {ER_TAKES_DIV, ER_ERR_STANDARD, er_set_div, "div= applies to %s, not to %s", "div="},
    {ER_TAKES_FAST, ER_ERR_STANDARD, er_set_fast, "exp_ulps=fast and math=fast apply to %s, not to %s",
     "exp_ulps=fast, math=fast"},
    {ER_TAKES_TRITON, ER_ERR_STANDARD, er_set_triton, "math=triton applies to %s, not to %s", "math=triton"},
    {ER_TAKES_FLUSH, ER_ERR_UNSUPPORTED, er_set_flush,
     "subnormals=flush is modelled for %s in this version, not for %s", "subnormals=flush"},
    {ER_TAKES_DIV_ULPS, ER_ERR_STANDARD, er_set_div_ulps, "div_ulps= applies to %s, not to %s", "div_ulps="},
    {ER_TAKES_ONLINE, ER_ERR_STANDARD, er_set_online, "max= and online= apply to %s, not to %s", "max=, online="},
    {ER_TAKES_DEPTH, ER_ERR_STANDARD, er_set_depth, "depth= bounds additions; it applies to %s, not to %s", "depth="},
    {ER_TAKES_MEAN, ER_ERR_STANDARD, er_set_mean, "mean= applies to %s, not to %s", "mean="},
    {ER_TAKES_ATTN, ER_ERR_STANDARD, er_set_attn, "kv_block=, p_sum= and qk_scale= apply to %s, not to %s",
     "kv_block=, p_sum=, qk_scale="},
    {ER_TAKES_PRODUCTS, ER_ERR_STANDARD, er_set_products, "products= applies to %s, not to %s", "products="},
    {ER_TAKES_AMAX_FLOOR, ER_ERR_STANDARD, er_set_amax_floor, "amax_floor= applies to %s, not to %s", "amax_floor="},
};

/* The names of the table's ops whose modules take bit, as "a, b and c", into buf. */
static const char *er_ops_taking(unsigned bit, char *buf, size_t cap) {
    int n = 0, total = 0;
    for (const er_op_module *const *m = er__modules; *m; m++) total += ((*m)->takes & bit) != 0;
    buf[0] = '\0';
    size_t len = 0;
    for (const er_op_module *const *m = er__modules; *m && len < cap; m++) {
        if (!((*m)->takes & bit)) continue;
        n++;
        int w = snprintf(buf + len, cap - len, "%s%s", n == 1 ? "" : n == total ? " and " : ", ", (*m)->name);
        if (w < 0) break;
        len += (size_t)w;
    }
    return buf;
}

int er_op_count(void) {
    int n = 0;
    while (er__modules[n]) n++;
    return n;
}

const char *er_op_name(int i) { return i >= 0 && i < er_op_count() ? er__modules[i]->name : NULL; }

er_status er_op_options(const char *name, char *buf, size_t cap, size_t *needed) {
    er__ok();
    ER_CHECK_NULL(name, "name");
    if (!buf && cap) return er__fail(ER_ERR_NULL, "buf is NULL but cap is %zu", cap);
    const er_op_module *const *m = er__modules;
    while (*m && strcmp((*m)->name, name) != 0) m++;
    if (!*m) return er__fail(ER_ERR_INVALID, "unknown op '%.40s' (er_op_name lists them)", name);
    char tmp[512];
    size_t len = 0;
    tmp[0] = '\0';
    for (size_t i = 0; i < sizeof er_takes_rules / sizeof er_takes_rules[0]; i++)
        if ((*m)->takes & er_takes_rules[i].bit) {
            int w = snprintf(tmp + len, sizeof tmp - len, "%s%s", len ? ", " : "", er_takes_rules[i].label);
            if (w > 0 && (size_t)w < sizeof tmp - len) len += (size_t)w;
        }
    if (needed) *needed = len;
    if (cap) {
        size_t k = len < cap - 1 ? len : cap - 1;
        memcpy(buf, tmp, k);
        buf[k] = '\0';
    }
    if (len >= cap) return er__fail(ER_ERR_BUFFER, "the options of %s need %zu bytes (cap %zu)", name, len + 1, cap);
    return ER_OK;
}

er_status er__standard_takes(const er_ref *ref, const er_standard *std) {
    unsigned takes = ref->mod->takes;
    for (size_t i = 0; i < sizeof er_takes_rules / sizeof er_takes_rules[0]; i++) {
        const er_takes_rule *t = &er_takes_rules[i];
        if ((takes & t->bit) || !t->set(std)) continue;
        char ops[256];
        return er__fail(t->status, t->fmt, er_ops_taking(t->bit, ops, sizeof ops), er__op_name(ref));
    }
    if (std->fast_math == 2 && std->compute != ER_FP32)
        return er__fail(ER_ERR_STANDARD, "math=triton models Triton's fp32 lowering: it takes compute=fp32");
    return ER_OK;
}

er_status er__standard_backward(const er_ref *ref, const er_standard *std, const char *sums) {
    ER_RETURN_IF_ERROR(er__standard_takes(ref, std));
    if (std->order != ER_ORDER_ANY)
        return er__fail(ER_ERR_UNSUPPORTED, "%s takes order any_order in this version (%s in any order)",
                        er__op_name(ref), sums);
    if (std->rounding != ER_RND_NEAREST || std->compute == ER_TF32)
        return er__fail(ER_ERR_STANDARD, "%s takes rounding=nearest and compute fp64, fp32, fp16 or bf16",
                        er__op_name(ref));
    const er_fmt_info *F = er__fmt(std->compute);
    const er_tensor *views[8];
    const char *names[8];
    int k = ref->mod->inputs(ref, views, names, 8);
    for (int i = 0; i < k && i < 8; i++) {
        const er_fmt_info *X = er__fmt(views[i]->format);
        if (X->p > F->p || X->min_sub < F->min_sub || X->max > F->max)
            return er__fail(ER_ERR_STANDARD, "%s of %s %s needs a compute format holding it (compute=%s does not)",
                            er__op_name(ref), names[i], X->name, F->name);
    }
    return ER_OK;
}

void er__cval_of_enclosure(er_cval *v, double lo, double hi, uint8_t f) {
    memset(v, 0, sizeof *v);
    v->lo = isnan(lo) ? INFINITY : lo;
    v->hi = isnan(hi) ? -INFINITY : hi;
    v->nan = (f & ER_ENCLOSURE_NAN) != 0;
    v->nan_req = (f & ER_ENCLOSURE_NAN_ONLY) != 0;
    v->pinf = (f & ER_ENCLOSURE_PINF) != 0;
    v->ninf = (f & ER_ENCLOSURE_NINF) != 0;
}

void er__index_of(const er_ref *ref, int64_t idx, int64_t *index) {
    for (int d = ref->ndim - 1; d >= 0; d--) { index[d] = idx % ref->shape[d]; idx /= ref->shape[d]; }
}

er_status er__ref_bracket(const er_ref *r, int64_t idx, double *mid, double *lo, double *hi) {
    const er_op_module *m = er__module_of(r);
    if (m->bracket) return m->bracket(r, idx, mid, lo, hi);
    double e = NAN;
    if (m->exact) ER_RETURN_IF_ERROR(m->exact(r, idx, er__fmt(ER_FP64), &e, NULL));
    *mid = e;
    *lo = isfinite(e) ? nextafter(e, -INFINITY) : NAN;
    *hi = isfinite(e) ? nextafter(e, INFINITY) : NAN;
    return ER_OK;
}

void er__cursor_inner_run(const er_op_module *mod, void *cur, int64_t begin, int64_t m, double *lo, double *hi,
                          double *blo, double *bhi, uint8_t *ok) {
    if (mod->cursor_inner_run) {
        mod->cursor_inner_run(cur, begin, m, lo, hi, blo, bhi, ok);
        return;
    }
    for (int64_t i = 0; i < m; i++)
        ok[i] = (uint8_t)(mod->cursor_inner(cur, begin + i, 0, &lo[i], &hi[i], &blo[i], &bhi[i]) != 0);
}

/* "[a, b, c]" into buf (at most ER_MAX_DIMS sizes of 20 digits: 200 bytes hold them). */
static const char *er_shape_text(char *buf, size_t cap, int nd, const int64_t *shape) {
    int n = snprintf(buf, cap, "[");
    for (int i = 0; i < nd && n > 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, "]");
    return buf;
}

er_status er__out_shape_fits(const er_ref *ref, int o, const er_tensor *out, int nd, const int64_t *shape) {
    if (!out) return ER_OK;
    int od = out->ndim;
    while (od > nd && out->shape[od - 1] == 1) od--;
    int same = od == nd;
    for (int i = 0; same && i < od; i++) same = out->shape[i] == shape[i];
    if (same) return ER_OK;
    char a[200], b[200];
    return er__fail(ER_ERR_OUTPUT, "%s's %s must have shape %s (trailing size-1 dimensions allowed); got %s",
                    er__op_name(ref), er_ref_output_name(ref, o), er_shape_text(b, sizeof b, nd, shape),
                    er_shape_text(a, sizeof a, out->ndim, out->shape));
}

er_status er__out_shape_same(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape) {
    (void)o;
    *ndim = ref->ndim;
    for (int i = 0; i < ref->ndim; i++) shape[i] = ref->shape[i];
    if (!out) return ER_OK;
    int same = out->ndim == ref->ndim;
    for (int i = 0; same && i < ref->ndim; i++) same = out->shape[i] == ref->shape[i];
    if (same) return ER_OK;
    char a[200], b[200];
    return er__fail(ER_ERR_OUTPUT, "the output has shape %s but the %s produces %s",
                    er_shape_text(a, sizeof a, out->ndim, out->shape), er__op_name(ref),
                    er_shape_text(b, sizeof b, ref->ndim, ref->shape));
}

