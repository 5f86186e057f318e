/* exactref/tensor.h: tensor views over caller memory.
 *
 * A view is a small value: format, shape, strides counted in elements (not bytes), and a pointer. exactref
 * never copies or frees the memory; the caller keeps it alive and unchanged while any reference built from
 * it is used. Strides may be zero (broadcast) or describe any non-contiguous layout; negative strides are
 * refused. Leading dimensions beyond the last two of a matmul operand are batch dimensions. */
#ifndef EXACTREF_TENSOR_H
#define EXACTREF_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include <exactref/export.h>
#include <exactref/status.h>
#include <exactref/format.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ER_MAX_DIMS 8

typedef struct er_tensor {
    er_format format;
    int ndim;
    int64_t shape[ER_MAX_DIMS];
    int64_t strides[ER_MAX_DIMS]; /* in elements */
    const void *data;
} er_tensor;

/* Fills *t. strides == NULL means C-contiguous (row-major). Refuses ndim outside 1..ER_MAX_DIMS, negative
 * sizes or strides, an element count or extent that overflows int64, an invalid format, and data == NULL
 * unless the tensor has no elements. On refusal *t is untouched. */
ER_API er_status er_tensor_view(er_tensor *t, er_format f, int ndim, const int64_t *shape,
                                const int64_t *strides, const void *data);
/* Number of elements (product of the shape); 0 for an empty tensor, -1 for an invalid view. */
ER_API int64_t er_tensor_numel(const er_tensor *t);
/* The decoded value of the element at `index` (ndim coordinates). */
ER_API er_status er_tensor_get(double *out, const er_tensor *t, const int64_t *index);
/* sizeof(er_tensor), for bindings that allocate views without a C compiler. */
ER_API size_t er_tensor_sizeof(void);

#ifdef __cplusplus
}
#endif
#endif
