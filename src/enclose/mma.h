/* mma.h: the tensor-core block FMA and the mma:<arch> standards (docs/hardware/mma.md). */
#ifndef ER_MMA_H
#define ER_MMA_H

#include "format/format.h"
#include "enclose/anyorder.h"

/* One architecture's MMA for one operand type: k products per block, F fraction bits kept below the block's
 * largest exponent, and the precision acc_p of the block's result (24: fp32; 14: Hopper's fp8 e8m13). */
typedef struct er_mma_params {
    int k, F, acc_p;
    int fp16_acc;     /* fp16 accumulator (compute=fp16, fp16 operands): each block rounds to nearest in fp16 */
    int fp8;          /* fp8 operands: no fixed chain is claimed (docs/hardware/mma.md) */
} er_mma_params;

/* The parameters of arch (70, 80, 89, 90, 100) for operands of formats fa and fb (after the tf32 conversion);
 * ER_ERR_STANDARD with a message naming what is not supported. */
ER_INTERNAL er_status er__mma_params(int arch, const er_fmt_info *fa, const er_fmt_info *fb, int fp16_acc,
                                     er_mma_params *out);
/* d = the block FMA of the accumulator c (a value of fp32) and the n <= k products a[j] b[j] (exact as doubles). */
ER_INTERNAL double er__mma_block(const er_mma_params *mp, double c, const double *a, const double *b, int64_t n);
/* The chain over K in order: c = 0; c = block(c, next k products), the last block shorter. */
ER_INTERNAL double er__mma_chain(const er_mma_params *mp, const double *a, const double *b, int64_t K);
/* The any-order constants for "blocks of k in any order and any chains, chains added in fp32" (Theorem M1); with
 * promote > 0, chains of at most that many blocks (Theorem M2). */
ER_INTERNAL void er__mma_bound(er_anyorder_bound *bd, const er_mma_params *mp, int64_t K, int promote);

#endif
