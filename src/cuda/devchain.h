/* devchain.h: the chain's epilogue pass on the GPU (src/cuda/devchain.cu; docs/algorithms/chains.md, "The epilogue
 * pass", On the GPU): every element of a chain over a matmul on the fast path or a tensor, its base's bracket from
 * the fast path's state (or the tensor's value), the stages and the classes as the host's pass decides them
 * (chainepi.c), one thread an element. C interface to the kernel; it returns 0 or a cudaError_t value and queues its
 * work on `stream`. */
#ifndef ER_DEVCHAIN_H
#define ER_DEVCHAIN_H

#include <stdint.h>
#include "ops/fastdecide.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { ER_DEV_EPI_STAGES = 12 };

/* er_vec_fmt (format/vecround.h), field for field: a rounding to nearest into fp32 (narrow 0), fp16 or bf16. */
typedef struct er_dev_vfmt { int narrow, drop; uint64_t half, mask; double minn, big, maxv; } er_dev_vfmt;

/* One stage: its er_stage_kind; an add's or mul's operand, a number (src 0: c0, and wc0 its fp32 rounding) or a
 * tensor (src 1: op, its values as doubles at the offsets its shape and strides give, over ndim dimensions); a cast's
 * rounding. */
typedef struct er_dev_epi_stage {
    int kind, src, ndim;
    float wc0;
    double c0;
    const double *op;
    int64_t shape[8], strides[8];
    er_dev_vfmt cast;
} er_dev_epi_stage;

/* The pass's plan (er_epi's, chainvec.h) and its base, in device memory while the kernel runs. */
typedef struct er_dev_epi {
    int ns, fn, nvar, tri, can; /* the stages; the function stage (-1: none), its variants, math=triton, ulps >= 1.5 */
    int ofmt;                   /* the output's format: 0 fp32, 1 fp16, 2 bf16 */
    er_dev_vfmt o;              /* its rounding */
    er_dev_epi_stage st[ER_DEV_EPI_STAGES];
    /* the base: 0 a matmul on the fast path (S_hat fs, the norms' bounds an and bn, each output batch's operand
     * batches ia and ib, M x N outputs a batch, the decision's constants fc for an fp32 compute format), 1 a tensor's
     * values x (row-major) */
    int base;
    const double *fs, *an, *bn, *x;
    const int64_t *ia, *ib;
    int64_t M, N;
    er_fast_consts fc;
    double exp_tlo[64], exp_thi[64], exp_lh, exp_ll; /* Theorem D1's tables (er__exp_bounds) */
} er_dev_epi;

/* Blocks of er__devchain_decide's grid: its per-block widest entries (brel[blocks], bidx[blocks]). */
enum { ER_DEV_EPI_BLOCKS = 2048 };

/* Each of the n elements' class (0 exact, 1 covered, 255 open) into classes, with the plan p (device memory) and the
 * output out (row-major, format p->ofmt); each block's widest decided hull (its er_set_rel, -1 for none) and its
 * first element into brel and bidx (ER_DEV_EPI_BLOCKS each). */
int er__devchain_decide(const er_dev_epi *p, const void *out, int64_t n, uint8_t *classes, double *brel,
                        long long *bidx, void *stream);

#ifdef __cplusplus
}
#endif

#ifndef __CUDACC__
#include <exactref/report.h>
#include <exactref/ref.h>
#include <exactref/standard.h>
/* er_covers_device of chain ref on the device output out where its epilogue pass runs on the GPU (*taken 1): the
 * pass there, the rest on the host (the status of the whole check; a CUDA error is ER_ERR_DEVICE); *taken 0 and
 * nothing done where it does not apply (another op, base, stage or layout; a refusal, which the host's path then
 * makes). A report marked er_report_keep_on_device keeps its classes on the device. */
er_status er__dev_chain_covers(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std,
                               void *stream, int *taken);
#endif
#endif
