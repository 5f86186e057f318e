/* device.c: copying device tensors back to the host through the CUDA runtime (when built with it). */
#include <stdlib.h>
#include "core/internal.h"
#include "ops/module.h"
#include "tensor/tensor_internal.h"
#include <exactref/cuda.h>
#ifdef ER_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int er_cuda_available(void) {
#ifdef ER_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

void er_host_free(void *host) { free(host); }

er_status er_tensor_from_device(er_tensor *view, void **host, er_format f, int ndim, const int64_t *shape,
                                const int64_t *strides, const void *device_ptr, void *stream) {
    er__ok();
    ER_CHECK_NULL(view, "view");
    ER_CHECK_NULL(host, "host");
    er_tensor v;
    ER_RETURN_IF_ERROR(er_tensor_view(&v, f, ndim, shape, strides, device_ptr));
#ifndef ER_HAVE_CUDA
    (void)stream;
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    int64_t extent = 0, n = er_tensor_numel(&v);
    for (int i = 0; n > 0 && i < v.ndim; i++)
        extent += (v.shape[i] - 1) * v.strides[i]; /* an empty view spans nothing */
    size_t bytes = n ? (size_t)(extent + 1) * (size_t)(er_format_storage_bits(f) / 8) : 0;
    void *h = malloc(bytes ? bytes : 1);
    if (!h) return er__fail(ER_ERR_NOMEM, "cannot allocate %zu bytes for the host copy", bytes);
    if (bytes) {
        er__prefault(h, bytes);
        cudaStream_t s = (cudaStream_t)stream;
        cudaError_t e = cudaMemcpyAsync(h, device_ptr, bytes, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        if (e != cudaSuccess) {
            free(h);
            return er__fail(ER_ERR_DEVICE, "copying %zu bytes from the device failed: %s (%s)", bytes,
                            cudaGetErrorString(e), cudaGetErrorName(e));
        }
    }
    v.data = h;
    *view = v;
    *host = h;
    return ER_OK;
#endif
}

static er_status er_covers_device_run(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std,
                                     void *stream) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(out, "out");
    er_tensor v;
    void *h;
    ER_RETURN_IF_ERROR(
        er_tensor_from_device(&v, &h, out->format, out->ndim, out->shape, out->strides, out->data, stream));
    er_status st = er__covers_run(rep, ref, &v, std);
    free(h);
    return st;
}

er_status er_covers_device(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std,
                           void *stream) {
    er_status st = er_covers_device_run(rep, ref, out, std, stream);
    er__report_finish(rep, st);
    return st;
}
