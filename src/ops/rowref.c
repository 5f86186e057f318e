/* rowref.c: the row ops' references (softmax, log_softmax, rmsnorm, layernorm): validation, their state, the
 * standards they share and the walk over rows (the sets are src/enclose/softmax.c, rmsnorm.c and layernorm.c). */
#include <math.h>
#include <stdlib.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

static er_status er_softmax_like(er_ref **out, const er_tensor *x, int dim, const er_op_module *op) {
    ER_CHECK_NULL(out, "out");
    ER_RETURN_IF_ERROR(er__check_dim(x, &dim));
    int nd = x->ndim;
    er_ref *r;
    ER_RETURN_IF_ERROR(er__ref_alloc(&r, op));
    er__rows(r)->A = *x;
    er__rows(r)->dim = dim;
    r->ndim = nd;
    r->n = 1;
    for (int i = 0; i < nd; i++) { r->shape[i] = x->shape[i]; r->n *= x->shape[i]; }
    er__rows(r)->K = x->shape[dim];
    *out = r;
    return ER_OK;
}

int er__rows_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap) {
    const er_rows_state *w = er__rows(r);
    int n = 0;
    names[n] = "the input x";
    views[n++] = &w->A;
    if (w->has_weight && n < cap) { names[n] = "the weight"; views[n++] = &w->B; }
    if (w->has_bias && n < cap) { names[n] = "the bias"; views[n++] = &w->C; }
    return n;
}

er_status er__rows_standard(const er_ref *ref, const er_standard *std) {
    const er_fmt_info *X = er__fmt(er__rows(ref)->A.format), *F = er__fmt(std->compute);
    if (std->order != ER_ORDER_ANY)
        return er__fail(ER_ERR_UNSUPPORTED, "%s takes order any_order in this version (its sum in any order)",
                        er__op_name(ref));
    if (std->rounding != ER_RND_NEAREST || std->compute == ER_TF32)
        return er__fail(ER_ERR_STANDARD, "%s takes rounding=nearest and compute fp64, fp32, fp16 or bf16",
                        er__op_name(ref));
    if (X->p > F->p || X->min_sub < F->min_sub || X->max > F->max)
        return er__fail(ER_ERR_STANDARD, "%s of %s inputs needs a compute format holding them (compute=%s does not)",
                        er__op_name(ref), X->name, F->name);
    return ER_OK;
}

er_status er_softmax(er_ref **out, const er_tensor *x, int dim) {
    er__ok();
    return er_softmax_like(out, x, dim, &er__softmax_module);
}

er_status er_log_softmax(er_ref **out, const er_tensor *x, int dim) {
    er__ok();
    return er_softmax_like(out, x, dim, &er__log_softmax_module);
}

er_status er_rmsnorm(er_ref **out, const er_tensor *x, const er_tensor *weight, double eps) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(x, "x");
    ER_RETURN_IF_ERROR(er__tensor_check(x, "x"));
    if (!(eps >= 0) || isinf(eps)) return er__fail(ER_ERR_INVALID, "eps must be finite and nonnegative (got %g)", eps);
    int64_t n = x->shape[x->ndim - 1];
    if (n == 0)
        return er__fail(ER_ERR_SHAPE,
                        "rmsnorm over an empty last dimension has no mean square (as layernorm refuses it)");
    if (weight) {
        ER_RETURN_IF_ERROR(er__tensor_check(weight, "weight"));
        if (weight->ndim != 1 || weight->shape[0] != n)
            return er__fail(ER_ERR_SHAPE, "weight must be a vector of the normalised length %lld", (long long)n);
    }
    er_ref *r = NULL;
    ER_RETURN_IF_ERROR(er_softmax_like(&r, x, -1, &er__rmsnorm_module));
    if (weight) { er__rows(r)->B = *weight; er__rows(r)->has_weight = 1; }
    er__rows(r)->eps = eps;
    *out = r;
    return ER_OK;
}

er_status er_layernorm(er_ref **out, const er_tensor *x, int normalized_ndim, const er_tensor *weight,
                       const er_tensor *bias, double eps) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(x, "x");
    ER_RETURN_IF_ERROR(er__tensor_check(x, "x"));
    int nd = x->ndim, k = normalized_ndim;
    if (k < 1 || k > nd)
        return er__fail(ER_ERR_SHAPE, "normalized_ndim must be between 1 and x's %d dimensions (got %d)", nd, k);
    if (!(eps >= 0) || isinf(eps)) return er__fail(ER_ERR_INVALID, "eps must be finite and nonnegative (got %g)", eps);
    int64_t n = 1, numel = 1;
    for (int i = 0; i < nd; i++) { numel *= x->shape[i]; if (i >= nd - k) n *= x->shape[i]; }
    if (n == 0) return er__fail(ER_ERR_SHAPE, "layernorm over an empty normalised shape has no mean");
    const er_tensor *aff[2] = {weight, bias};
    const char *names[2] = {"weight", "bias"};
    for (int a = 0; a < 2; a++) {
        if (!aff[a]) continue;
        ER_RETURN_IF_ERROR(er__tensor_check(aff[a], names[a]));
        int same = aff[a]->ndim == k;
        for (int i = 0; same && i < k; i++) same = aff[a]->shape[i] == x->shape[nd - k + i];
        if (!same)
            return er__fail(ER_ERR_SHAPE, "%s must have the normalised shape (x's last %d dimensions)", names[a], k);
    }
    er_ref *r;
    ER_RETURN_IF_ERROR(er__ref_alloc(&r, &er__layernorm_module));
    er__rows(r)->A = *x;
    r->ndim = nd;
    for (int i = 0; i < nd; i++) r->shape[i] = x->shape[i];
    r->n = numel;
    er__rows(r)->K = n;
    er__rows(r)->nnorm = k;
    er__rows(r)->rows = numel / n;
    er__rows(r)->dim = nd - 1;
    if (weight) { er__rows(r)->B = *weight; er__rows(r)->has_weight = 1; }
    if (bias) { er__rows(r)->C = *bias; er__rows(r)->has_bias = 1; }
    er__rows(r)->eps = eps;
    *out = r;
    return ER_OK;
}

void er__decode_rowmajor(const er_tensor *t, double *dst) {
    int nd = t->ndim;
    int64_t numel = 1, c[ER_MAX_DIMS] = {0}, off = 0;
    for (int i = 0; i < nd; i++) numel *= t->shape[i];
    if (nd == 1) { for (int64_t k = 0; k < numel; k++) dst[k] = er__load(t, k * t->strides[0]); return; }
    /* an odometer over the coordinates, the last fastest */
    for (int64_t idx = 0; idx < numel; idx++) {
        dst[idx] = er__load(t, off);
        for (int i = nd - 1; i >= 0; i--) {
            off += t->strides[i];
            if (++c[i] < t->shape[i]) break;
            off -= c[i] * t->strides[i];
            c[i] = 0;
        }
    }
}

er_status er__layernorm_foreach(const er_ref *r, er_lnrow_fn fn, void *ctx) {
    return er__layernorm_foreach_range(r, 0, er__rows(r)->rows, fn, ctx);
}

er_status er__layernorm_foreach_range(const er_ref *r, int64_t r0, int64_t r1, er_lnrow_fn fn, void *ctx) {
    const er_tensor *x = &er__rows(r)->A;
    int nd = x->ndim, lead = nd - er__rows(r)->nnorm;
    int64_t n = er__rows(r)->K;
    double *row = malloc(sizeof(double) * (size_t)n);
    if (!row) return er__fail(ER_ERR_NOMEM, "cannot allocate a row of %lld", (long long)n);
    er_tensor tail = *x; /* the row as a tensor of the trailing dimensions */
    tail.ndim = er__rows(r)->nnorm;
    for (int i = 0; i < er__rows(r)->nnorm; i++) {
        tail.shape[i] = x->shape[lead + i];
        tail.strides[i] = x->strides[lead + i];
    }
    er_status s = ER_OK;
    for (int64_t rr = r0; rr < r1 && s == ER_OK; rr++) {
        if (er__cancelled()) {
            s = ER_ERR_CANCELLED;
            break;
        }
        er__progress_step(1);
        int64_t rem = rr, off = 0;
        for (int i = lead - 1; i >= 0; i--) { off += (rem % x->shape[i]) * x->strides[i]; rem /= x->shape[i]; }
        tail.data = (const char *)x->data + off * (er__fmt(x->format)->bits / 8);
        er__decode_rowmajor(&tail, row);
        s = fn(ctx, row, rr, n);
    }
    free(row);
    return s;
}

er_status er__softmax_foreach(const er_ref *r, er_row_fn fn, void *ctx) {
    int64_t K = er__rows(r)->A.shape[er__rows(r)->dim];
    return er__softmax_foreach_range(r, 0, K ? r->n / K : 0, fn, ctx);
}

er_status er__softmax_foreach_range(const er_ref *r, int64_t r0, int64_t r1, er_row_fn fn, void *ctx) {
    const er_tensor *x = &er__rows(r)->A;
    int nd = x->ndim, d = er__rows(r)->dim;
    int64_t K = x->shape[d], rows = K ? r->n / K : 0;
    double *row = malloc(sizeof(double) * (size_t)(K ? K : 1));
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(K ? K : 1));
    if (!row || !idx) {
        free(row);
        free(idx);
        return er__fail(ER_ERR_NOMEM, "cannot allocate a row of %lld", (long long)K);
    }
    /* row-major strides of the output (same shape as x), for the report's element indices */
    int64_t ostride[ER_MAX_DIMS], st = 1;
    for (int i = nd - 1; i >= 0; i--) { ostride[i] = st; st *= x->shape[i]; }
    er_status s = ER_OK;
    (void)rows;
    for (int64_t rr = r0; rr < r1 && s == ER_OK; rr++) {
        if (er__cancelled()) {
            s = ER_ERR_CANCELLED;
            break;
        }
        er__progress_step(1);
        int64_t rem = rr, off = 0, base = 0;
        for (int i = nd - 1; i >= 0; i--) {
            if (i == d) continue;
            int64_t c = rem % x->shape[i];
            rem /= x->shape[i];
            off += c * x->strides[i];
            base += c * ostride[i];
        }
        for (int64_t k = 0; k < K; k++) {
            row[k] = er__load(x, off + k * x->strides[d]);
            idx[k] = base + k * ostride[d];
        }
        s = fn(ctx, row, idx, K);
    }
    free(row);
    free(idx);
    return s;
}

double er__rows_classic_bug(const er_ref *ref, int o, const char **what) {
    double n = (double)er__rows(ref)->K;
    if (n < 2) return 0;
    if (ref->mod == &er__softmax_module) { /* the denominator (n - 1)/n of its value: the outputs n/(n - 1) times */
        *what = "a denominator missing one of n equal terms";
        return 1 / (n - 1);
    }
    if (ref->mod == &er__rmsnorm_module || (ref->mod == &er__layernorm_module && o != 1)) {
        /* the mean square or variance n/(n - 1) times its value: y and rstd sqrt((n - 1)/n) times */
        *what = ref->mod == &er__rmsnorm_module ? "a mean square divided by n - 1" : "a variance divided by n - 1";
        return -1 / n / (1 + sqrt(1 - 1 / n)); /* sqrt((n - 1)/n) - 1 */
    }
    return 0;
}
