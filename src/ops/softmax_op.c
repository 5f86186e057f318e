/* softmax_op.c: the softmax reference: validation and the walk over rows (the set is src/enclose/softmax.c). */
#include <math.h>
#include <stdlib.h>
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

static er_status er_softmax_like(er_ref **out, const er_tensor *x, int dim, er_op op) {
    ER_CHECK_NULL(out, "out");
    ER_RETURN_IF_ERROR(er__check_dim(x, &dim));
    int nd = x->ndim;
    er_ref *r = calloc(1, sizeof *r);
    if (!r) return er__fail(ER_ERR_NOMEM, "cannot allocate a reference");
    r->op = op;
    r->A = *x;
    r->dim = dim;
    r->ndim = nd;
    r->n = 1;
    for (int i = 0; i < nd; i++) { r->shape[i] = x->shape[i]; r->n *= x->shape[i]; }
    r->K = x->shape[dim];
    *out = r;
    return ER_OK;
}

er_status er_softmax(er_ref **out, const er_tensor *x, int dim) {
    er__ok();
    return er_softmax_like(out, x, dim, ER_OP_SOFTMAX);
}

er_status er_log_softmax(er_ref **out, const er_tensor *x, int dim) {
    er__ok();
    return er_softmax_like(out, x, dim, ER_OP_LOG_SOFTMAX);
}

er_status er_rmsnorm(er_ref **out, const er_tensor *x, const er_tensor *weight, double eps) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(x, "x");
    ER_RETURN_IF_ERROR(er__tensor_check(x, "x"));
    if (!(eps >= 0) || isinf(eps)) return er__fail(ER_ERR_INVALID, "eps must be finite and nonnegative (got %g)", eps);
    int64_t n = x->shape[x->ndim - 1];
    if (weight) {
        ER_RETURN_IF_ERROR(er__tensor_check(weight, "weight"));
        if (weight->ndim != 1 || weight->shape[0] != n)
            return er__fail(ER_ERR_SHAPE, "weight must be a vector of the normalised length %lld", (long long)n);
    }
    er_ref *r;
    ER_RETURN_IF_ERROR(er_softmax_like(&r, x, -1, ER_OP_RMSNORM));
    if (weight) { r->B = *weight; r->has_weight = 1; }
    r->eps = eps;
    *out = r;
    return ER_OK;
}

er_status er__softmax_foreach(const er_ref *r, er_row_fn fn, void *ctx) {
    const er_tensor *x = &r->A;
    int nd = x->ndim, d = r->dim;
    int64_t K = x->shape[d], rows = K ? r->n / K : 0;
    double *row = malloc(sizeof(double) * (size_t)(K ? K : 1));
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(K ? K : 1));
    if (!row || !idx) { free(row); free(idx); return er__fail(ER_ERR_NOMEM, "cannot allocate a row of %lld", (long long)K); }
    /* row-major strides of the output (same shape as x), for the report's element indices */
    int64_t ostride[ER_MAX_DIMS], st = 1;
    for (int i = nd - 1; i >= 0; i--) { ostride[i] = st; st *= x->shape[i]; }
    er_status s = ER_OK;
    for (int64_t rr = 0; rr < rows && s == ER_OK; rr++) {
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
