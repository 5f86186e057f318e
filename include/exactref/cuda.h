/* exactref/cuda.h: outputs and inputs that live in GPU memory.
 *
 * The functions are always exported; when the library was built without the CUDA toolkit they return
 * ER_ERR_UNSUPPORTED (er_cuda_available() says which). `stream` is a cudaStream_t passed as void* (NULL: the
 * default stream), so this header needs no CUDA headers. Copies go device to host with cudaMemcpyAsync on that
 * stream, which is then synchronised: work queued before on the stream (the kernel under test) completes first. */
#ifndef EXACTREF_CUDA_H
#define EXACTREF_CUDA_H

#include <exactref/export.h>
#include <exactref/status.h>
#include <exactref/tensor.h>
#include <exactref/standard.h>
#include <exactref/report.h>
#include <exactref/ref.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the library was built with the CUDA runtime. */
ER_API int er_cuda_available(void);
/* Copies the device tensor (format f, shape, strides in elements, device pointer) to host memory the library
 * allocates, and fills *view over the copy (same shape and strides). *host receives the allocation: release it
 * with er_host_free once the view is no longer used. On refusal nothing is allocated and *view is untouched;
 * a CUDA error is ER_ERR_DEVICE with cudaGetErrorString's text. */
ER_API er_status er_tensor_from_device(er_tensor *view, void **host, er_format f, int ndim, const int64_t *shape,
                                       const int64_t *strides, const void *device_ptr, void *stream);
ER_API void er_host_free(void *host);
/* Clears *rep (er_report_clear) and marks it so that the next device call into it (er_matmul_covers_device,
 * er_softmax_covers_device, er_log_softmax_covers_device, er_softmax_backward_covers_device,
 * er_log_softmax_backward_covers_device, er_rmsnorm_covers_device,
 * er_layernorm_covers_device; the dlogits report of er_cross_entropy_covers_device; er_covers_device of a chain whose
 * epilogue pass runs on the GPU) leaves the report's classes in device memory the report owns, where the GPU wrote
 * them, instead of copying n bytes to the host: rep->classes is then NULL and er_report_fetch_classes copies them when
 * they are wanted. The counts, the first failing elements, the
 * worst and widest elements, the text and the JSON are the report's as ever. A call that takes another path (host
 * copies, a refusal) or any other call fills or zeroes the report as usual; a call clears the mark. Without the CUDA
 * toolkit: ER_ERR_UNSUPPORTED, *rep untouched. */
ER_API er_status er_report_keep_on_device(er_report *rep);
/* The device calls allocate from a memory pool of the library's on each device, which keeps what they freed, up to a
 * quarter of the device's memory, and keep their pinned host buffers (up to 1 GiB), for the next call's reuse
 * (docs/reference/cuda.md): this returns them all to CUDA (cudaMemPoolTrimTo, cudaFreeHost), e.g. before a workload
 * that needs the memory. Memory in use by a call running on another thread, or by a report's classes kept on the
 * device, stays. ER_OK, also without the CUDA toolkit (nothing kept there). */
ER_API er_status er_cuda_trim(void);
/* Brings the classes a device call left on the GPU into host memory the report owns (rep->classes, what
 * er_report_classes returns), and frees their device memory; ER_OK and nothing done where they are in host memory
 * already or the report has none. A CUDA error is ER_ERR_DEVICE and leaves the report as it was. */
ER_API er_status er_report_fetch_classes(er_report *rep);
/* er_covers on an output in device memory: `out` describes it with a device pointer as data. A chain whose elements
 * the epilogue pass decides (a GEMM epilogue over er_matmul or er_matmul_device, elementwise stages over a tensor;
 * docs/reference/cuda.md) is decided on the GPU where the output lies, the elements it leaves on the host; anything
 * else is checked on a host copy. The report is the one er_covers gives on a host copy. */
ER_API er_status er_covers_device(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std,
                                  void *stream);
/* The reference of the matmul A B (er_matmul's) for operands in device memory (their views' data are device
 * pointers): host copies of A and B, which the reference owns and er_ref_free releases, and where er_matmul takes
 * its fast path, its fp64 GEMM by cuBLAS on the GPU (operands of fp32 or at most 16 bits, row-major and contiguous;
 * others by the host's BLAS on the copies). The reference is the one er_matmul gives on host copies: every check,
 * chain, set and report of it is the same. Where the GEMM ran on the GPU, its output and the operands' norm bounds
 * also stay in device memory (8 bytes an output element) until er_ref_free, for er_covers_device of a chain over it.
 * A CUDA error is ER_ERR_DEVICE; on any error nothing is allocated and *out is untouched. */
ER_API er_status er_matmul_device(er_ref **out, const er_tensor *A, const er_tensor *B, void *stream);
/* The matmul A B and covers of its output, all three in device memory (their views' data are device pointers),
 * computed on the GPU where it applies: an any-order standard with compute=fp32, operands of at most 24 bits
 * (fp32, fp16, bf16, fp8) and an fp32, fp16 or bf16 output, all row-major and contiguous. The GEMM runs in fp64
 * through cuBLAS (loaded when first needed) and the decisions on the GPU; the elements they leave go to the exact
 * engine on the host. Anything else (and operands holding NaN or infinities, or no cuBLAS) is copied back and
 * checked on the host. The report is the one er_matmul and er_covers give on host copies. */
ER_API er_status er_matmul_covers_device(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *out,
                                         const er_standard *std, void *stream);

/* softmax of x along dimension dim and covers of its output, both in device memory, computed on the GPU where it
 * applies: compute=fp32 with exp_ulps=, div= and depth= as the standard says (not online=, max=optional, div_ulps=,
 * math=, subnormals=flush), x and out of fp32, fp16 or bf16, row-major and contiguous, dim the last dimension. Every
 * row's sets are computed on the GPU in double with the operations of the host's; a row whose elements the GPU does
 * not all decide as exact or covered (an element outside its set, a NaN or infinity, a correct rounding that double
 * cannot decide) goes to the host's softmax rows. Anything else is copied back and checked on the host. The report is
 * the one er_softmax and er_covers give on host copies. */
ER_API er_status er_softmax_covers_device(er_report *rep, const er_tensor *x, int dim, const er_tensor *out,
                                          const er_standard *std, void *stream);

/* log_softmax of x along dimension dim and covers of its output, both in device memory, computed on the GPU where
 * it applies: the scope of er_softmax_covers_device, with log_ulps= (and math=fast's division, which log_softmax does
 * not use). A first pass computes each row's maximum and sums on the GPU; the host takes the two logs of each row
 * (MPFR, one row per thread); a second pass computes every element's set and exact result on the GPU with the
 * operations of the host's. A row holding -inf goes to the host's rows too, as those er_softmax_covers_device sends
 * there. The report is the one er_log_softmax and er_covers give on host copies. */
ER_API er_status er_log_softmax_covers_device(er_report *rep, const er_tensor *x, int dim, const er_tensor *out,
                                              const er_standard *std, void *stream);

/* softmax's backward pass dx = y (dy - sum_j dy_j y_j) along dimension dim and covers of its output, dy, y and out all
 * in device memory, computed on the GPU where it applies: compute=fp32 with products= and depth= as the standard
 * says, dy, y and out of fp32, fp16 or bf16, row-major and contiguous, dim the last dimension. Each row's sum
 * D = sum_j dy_j y_j is summed exactly on the GPU (a fixed-point window; also the products rounded to the inputs'
 * format under products=either with fp16 or bf16 inputs); the host turns it into the row's set of D~ and D's leading
 * bits; every element's set and exact result are computed on the GPU with the operations of the host's. A row whose
 * elements the GPU does not all decide as exact or covered (an element outside its set, a NaN or infinity, a value
 * beyond the output's range, a sum the window does not decide, a correct rounding that double-double cannot decide)
 * goes to the host's softmax_backward rows. Anything else is copied back and checked on the host. The report is the
 * one er_softmax_backward and er_covers give on host copies. */
ER_API er_status er_softmax_backward_covers_device(er_report *rep, const er_tensor *dy, const er_tensor *y, int dim,
                                                   const er_tensor *out, const er_standard *std, void *stream);

/* log_softmax's backward pass dx = dy - exp(y) sum_j dy_j along dimension dim and covers of its output, dy, y (the
 * saved log_softmax output) and out all in device memory, computed on the GPU where it applies: compute=fp32 with
 * exp_ulps= (an integer, not exp=fast's bound) and depth= as the standard says, dy, y and out of fp32, fp16 or bf16,
 * row-major and contiguous, dim the last dimension. Each row's sum S = sum_j dy_j is summed exactly on the GPU (a
 * fixed-point window); the host turns it into the row's set of S~ and S's bounds; every element's exp(y) bounds and
 * values within exp_ulps, set and exact result are computed on the GPU with the operations of the host's. A row whose
 * elements the GPU does not all decide as exact or covered (an element outside its set, a NaN or infinity, a y above
 * 2^10, a value beyond the output's range, a sum the window does not decide, a correct rounding the double step
 * cannot decide) goes to the host's log_softmax_backward rows. Anything else is copied back and checked on the host.
 * The report is the one er_log_softmax_backward and er_covers give on host copies. */
ER_API er_status er_log_softmax_backward_covers_device(er_report *rep, const er_tensor *dy, const er_tensor *y,
                                                       int dim, const er_tensor *out, const er_standard *std,
                                                       void *stream);

/* rmsnorm of x over its last dimension with weight (NULL: none) and eps, and covers of its output, all in device
 * memory, computed on the GPU where it applies: compute=fp32 with rsqrt_ulps=, mean=, depth= and math=triton as the
 * standard says (not variance=welford or either), x, weight and out of fp32, fp16 or bf16, row-major and contiguous.
 * Each row's sum of squares is summed exactly on the GPU; the host turns it into the row's rstd set and the bounds of
 * its exact 1/sqrt(mean + eps) (MPFR, one row per thread); every element's set and exact result are computed on the
 * GPU in double with the operations of the host's. A row whose elements the GPU does not all decide as exact or
 * covered (an element outside its set, a NaN or infinity, a value beyond the output's range, a correct rounding that
 * double cannot decide) goes to the host's rmsnorm rows. Anything else is copied back and checked on the host. The
 * report is the one er_rmsnorm and er_covers give on host copies. */
ER_API er_status er_rmsnorm_covers_device(er_report *rep, const er_tensor *x, const er_tensor *weight, double eps,
                                          const er_tensor *out, const er_standard *std, void *stream);

/* layernorm of x over its last normalized_ndim dimensions with weight and bias (NULL: none) and eps, and covers of its
 * output y, all in device memory, computed on the GPU where it applies: compute=fp32 with variance=, mean=,
 * rsqrt_ulps=, depth=, combine_depth= and math=triton as the standard says, x, weight, bias and y of fp32, fp16 or
 * bf16, row-major and contiguous, weight and bias finite. Each row's sum, sum of squares and sum of magnitudes are
 * summed exactly on the GPU; the host turns them into the row's sets of the mean and rstd and the bounds of the exact
 * ones (MPFR, one row per thread); every element's set and exact result are computed on the GPU with the operations of
 * the host's. A row whose elements the GPU does not all decide as exact or covered (an element outside its set, a NaN
 * or infinity, a value beyond the output's range, a correct rounding that double cannot decide, a row too wide for the
 * exact integers) goes to the host's layernorm rows. Anything else is copied back and checked on the host. The report
 * is the one er_layernorm and er_covers (y alone) give on host copies; mean and rstd, one value per row, are checked
 * on the host with er_covers_outputs. */
ER_API er_status er_layernorm_covers_device(er_report *rep, const er_tensor *x, int normalized_ndim,
                                            const er_tensor *weight, const er_tensor *bias, double eps,
                                            const er_tensor *out, const er_standard *std, void *stream);

/* Attention forward (er_attention's q, k, v and opts) and covers of its output O, all in device memory, with each row's
 * loops over its keys on the GPU: the scores' bounds, the weights' bounds and their exact sum, and the two sums over
 * the keys of every value dimension, in double with the operations and order of the host's (so the same bits). The
 * host takes each row from those sums as its own rows do (the sets of Theorem A2 under the standard, MPFR where double
 * leaves a correct rounding open), a chunk of rows while the GPU computes the next. Every standard er_attention takes;
 * q, k and v of fp32, fp16 or bf16 with any strides, O of any format and strides (copied to the host, as are q, k and
 * v for the rows' MPFR enclosures). Anything else (or too little device memory) is checked on host copies. The
 * report is the one er_attention and er_covers (O alone) give on host copies; LSE too: the next call. */
ER_API er_status er_attention_covers_device(er_report *rep, const er_tensor *q, const er_tensor *k, const er_tensor *v,
                                            const er_attention_opts *opts, const er_tensor *out,
                                            const er_standard *std, void *stream);
/* Cross-entropy (er_cross_entropy's logits, targets, reduction, ignore_index and label smoothing) and covers of its
 * outputs outs[0] loss and outs[1] dlogits (either NULL: not checked) into reps[0] and reps[1], the logits and outputs
 * in device memory, the targets (ntarget integers) in host memory. Where it applies (compute=fp32 with the exp and log
 * bounds, div=, math=fast and subnormals=flush, no label smoothing, no online=, depth=, max=optional or math=triton;
 * logits and dlogits of fp32, fp16 or bf16, row-major and contiguous), each row's sums and its gradient's fast
 * decision (Theorem X3) run on the GPU with the operations of the host's, its loss follows on the host from its sums,
 * and a row whose gradient the GPU does not decide whole (a NaN, an infinity, an element outside the witnesses'
 * intervals or whose rounding double leaves open) is taken by the host's rows, gathered on the GPU. The reports are
 * the ones er_cross_entropy and er_covers_outputs give on host copies; anything else is checked on host copies. A
 * dlogits report marked er_report_keep_on_device keeps its classes on the device. */
ER_API er_status er_cross_entropy_covers_device(er_report *reps, const er_tensor *logits, const int64_t *target,
                                                int64_t ntarget, int reduction, int64_t ignore_index,
                                                double label_smoothing, const er_tensor *const *outs,
                                                const er_standard *std, void *stream);
/* er_attention_covers_device of both outputs: outs[0] O and outs[1] LSE (either NULL: not checked) into reps[0] and
 * reps[1], as er_covers_outputs gives them on host copies; LSE's sets come from the GPU's sums as O's do. */
ER_API er_status er_attention_covers_device_outputs(er_report *reps, const er_tensor *q, const er_tensor *k,
                                                    const er_tensor *v, const er_attention_opts *opts,
                                                    const er_tensor *const *outs, const er_standard *std,
                                                    void *stream);

#ifdef __cplusplus
}
#endif
#endif
