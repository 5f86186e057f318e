/* reduce.c: sum, mean and max over one dimension.
 *
 * A sum over dimension d of x is the matmul of x, viewed as [other dims..., 1, K] (no copy: strides), with a
 * K x 1 column of ones (one stored 1, stride 0). Every standard of the matmul then applies to the sum, with the
 * constant analysed as an exact 1 (er__fmt_one). mean divides the sum by K at covers time (src/ops/dotmod.c);
 * max selects, and rounds nothing but the output conversion. */
#include <stdio.h>
#include "format/format.h"
#include "ops/module.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

static const uint8_t er_one_e4m3 = 0x38; /* 1.0 in fp8 e4m3fn */

int er__dot_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap) {
    const er_dot_state *d = er__dot(r);
    names[0] = d->b_is_one ? "the input x" : "operand A";
    views[0] = &d->A;
    if (d->b_is_one || cap < 2) return 1;
    names[1] = "operand B";
    views[1] = &d->B;
    return 2;
}

er_status er__check_dim(const er_tensor *x, int *dim) {
    ER_CHECK_NULL(x, "x");
    ER_RETURN_IF_ERROR(er__tensor_check(x, "x"));
    int nd = x->ndim;
    if (*dim < -nd || *dim >= nd)
        return er__fail(ER_ERR_INVALID, "dim %d is out of range for a tensor of %d dimensions", *dim, nd);
    if (*dim < 0) *dim += nd;
    return ER_OK;
}

static er_status er_reduce(er_ref **out, const er_tensor *x, int dim, const er_op_module *op) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_RETURN_IF_ERROR(er__check_dim(x, &dim));
    int nd = x->ndim;
    if (nd + 1 > ER_MAX_DIMS)
        return er__fail(ER_ERR_SIZE, "a reduction takes at most %d dimensions (x has %d)", ER_MAX_DIMS - 1, nd);
    if (op == &er__max_module && x->shape[dim] == 0)
        return er__fail(ER_ERR_SHAPE, "max over an empty dimension (%d) has no value", dim);
    /* A: [other dims..., 1, K]; B: [K, 1] of ones */
    er_tensor A = *x, B;
    int j = 0;
    for (int i = 0; i < nd; i++)
        if (i != dim) { A.shape[j] = x->shape[i]; A.strides[j] = x->strides[i]; j++; }
    A.shape[j] = 1; A.strides[j] = 0; j++;
    A.shape[j] = x->shape[dim]; A.strides[j] = x->strides[dim]; j++;
    A.ndim = j;
    memset(&B, 0, sizeof B);
    B.format = ER_FP8_E4M3FN;
    B.ndim = 2;
    B.shape[0] = x->shape[dim];
    B.shape[1] = 1;
    B.data = &er_one_e4m3;
    er_ref *r;
    ER_RETURN_IF_ERROR(er__matmul_build(&r, &A, &B));
    r->mod = op;
    er__dot(r)->b_is_one = 1;
    r->ndim = nd - 1;
    for (int i = 0, k = 0; i < nd; i++) if (i != dim) r->shape[k++] = x->shape[i];
    if (r->ndim == 0) { r->ndim = 1; r->shape[0] = 1; } /* a full reduction of a vector: one element */
    *out = r;
    return ER_OK;
}

er_status er_sum(er_ref **out, const er_tensor *x, int dim) { return er_reduce(out, x, dim, &er__sum_module); }
er_status er_mean(er_ref **out, const er_tensor *x, int dim) { return er_reduce(out, x, dim, &er__mean_module); }
er_status er_max(er_ref **out, const er_tensor *x, int dim) { return er_reduce(out, x, dim, &er__max_module); }
