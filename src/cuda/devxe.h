/* devxe.h: cross_entropy's rows on the GPU (src/cuda/devxe.cu; docs/algorithms/cross-entropy.md, On the GPU). One
 * pass over each row gives the sums its loss follows from (er_xent_rowsum's, with the operations of the host's
 * er__exps_fill_kernel and sums in the lanes' order, ER_XENT_LANES); a second decides its gradient's elements as the
 * host's fast decision does (Theorem X3's witness and the double enclosure of each exact gradient, er_xent_grad_fast),
 * so that a row's classes are the host's. C interface; every function returns 0 or a cudaError_t value and queues its
 * work on `stream`. */
#ifndef ER_DEVXE_H
#define ER_DEVXE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A row's sums as the host finishes them (er__xent_sums_finish, er_xent_rowsum): the maximum m, the sums to nearest
 * esl, esh of the kernel's exps' ends, the witness's sum s (a value of fp32), the target's logit xt and exp(x_t - m)'s
 * enclosure [tlo, thi], the fixed-point sum S of the enclosures (its lower and upper parts, 64 bits each: lo0 the low
 * word), the sums to nearest of x_j and |x_j| and max |x_j|. */
typedef struct er_devxe_sums {
    double m, esl, esh, s, xt, tlo, thi, sx, sa, xm;
    uint64_t Slo0, Slo1, Shi0, Shi1;
} er_devxe_sums;

/* The constants: the exp bound (er_softmax_plan's U and exp_fast), div=reciprocal, the formats (0 fp32, 1 fp16, 2
 * bf16) of the logits and of dlogits, whether the gradient is decided (0: the sums alone), whether a log-probability
 * may be stored in the logits' format (narrower than fp32, products=compute not stated), the ignored target,
 * er_xent_fastc's values, W and label smoothing eps, and the tables of er__exp_bounds (ival.h). */
typedef struct er_devxe_consts {
    double U;
    int exp_fast, div2, x_fmt, g_fmt, grads, s_narrow;
    int64_t C, ignore;
    double g, ecl, ech, oml, omh, rWl, rWh, e1l, e1h, W, eps;
    double exp_tlo[64], exp_thi[64], exp_lh, exp_ll;
} er_devxe_consts;

/* The rows of x (rows x C, contiguous, format c->x_fmt) with targets target[rows] (device memory), on `blocks` blocks:
 * each row's sums into sums[row] and head[row] = 1, or head[row] = 0 where the row holds a NaN or an infinity (the
 * host's); an ignored row's head 1 without sums. c: host memory (the kernels take it by value). */
int er__devxe_heads(const void *x, const int64_t *target, int64_t rows, const er_devxe_consts *c, int blocks,
                    er_devxe_sums *sums, uint8_t *head, void *stream);
/* The gradients y (dlogits, format c->g_fmt) of the rows whose head is 1, decided with their sums and the ends of the
 * kernel's log of its sum lw[2 row .. 2 row + 2) (er__xent_log_ends's, the second witnesses'; NaN: none):
 * whole[row] = 1 where every element is exact or covered (its classes, 0 exact or 1 covered, into classes[], added
 * into counts[0] and counts[1], which must start at zero; an ignored row's outputs all zero), 0 where the host takes
 * the row (its classes then partly written). */
int er__devxe_grads(const void *x, const void *y, const int64_t *target, int64_t rows, const er_devxe_consts *c,
                    const er_devxe_sums *sums, const uint8_t *head, const float *lw, int blocks, uint8_t *whole,
                    uint8_t *classes, unsigned long long *counts, void *stream);

#ifdef __cplusplus
}
#endif
#endif
