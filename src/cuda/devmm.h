/* devmm.h: the matmul fast path on the GPU (src/cuda/devmm.cu; docs/algorithms/fast-path.md, On the GPU).
 * C interface to the kernels; every function returns 0 or a cudaError_t value, and queues its work on `stream`. */
#ifndef ER_DEVMM_H
#define ER_DEVMM_H

#include <stdint.h>
#include "ops/fastdecide.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Statistics of an operand's values, as er_dense_stats, plus whether a value is not finite. */
typedef struct er_dev_stats { int emin_lsb, emin, emax, qmin, any_nonzero, nonfinite; } er_dev_stats;


/* Decodes n contiguous values of `bits` storage bits of a format of precision prec into doubles d: fp32 (bits 32),
 * fp16 and bf16 (bits 16, lut NULL; prec 11 or 8 says which) by the GPU's conversions, any other 8-bit format through
 * the device table lut of 256 doubles; notes the statistics into *st (device memory, initialised by
 * er__devmm_stats_init). */
int er__devmm_decode(const void *src, int bits, const double *lut, int prec, int64_t n, double *d, er_dev_stats *st,
                     void *stream);
/* The initial statistics (device memory). */
int er__devmm_stats_init(er_dev_stats *st, void *stream);
/* B [batches][K][N] transposed into Bt [batches][N][K]. */
int er__devmm_transpose(const double *B, int64_t batches, int64_t K, int64_t N, double *Bt, void *stream);
/* Upper bounds of the 2-norms of A's arows rows and Bt's brows rows, of K values each; with pa and pb non-NULL, each
 * row's scale for P's integer bracket (a power of two: fast-path.md, Lemma F4). */
int er__devmm_norms(const double *A, int64_t arows, const double *Bt, int64_t brows, int64_t K, double *an, double *bn,
                    double *pa, double *pb, void *stream);
/* The n values of x (rows of K) as int8 magnitudes: ceil into up, floor into dn, of |x| / ps[row] (Lemma F4). */
int er__devmm_quant8(const double *x, int64_t n, int64_t K, const double *ps, int8_t *up, int8_t *dn, void *stream);

/* What narrows the decisions' bracket of P = sum |a_k b_k| beyond the norms (either or both; NULL: not held): P_hat
 * = fl64(|A| |B|), and the integer bracket sa[row of A] sb[column of B] [gdn, gup] of Lemma F4. */
typedef struct er_dev_pb { const double *P; const int32_t *gup, *gdn; const double *sa, *sb; } er_dev_pb;
/* The decisions for every output element: classes (0 exact, 1 covered, ER_FAST_OUT outside, 0xFF pending);
 * counts[0], counts[1] the exact and covered ones decided, counts[2] the candidates of the second stage (their
 * indices in cand[]), counts[3] the pending elements (their indices in pending[], in no order), counts[4] those
 * decided outside (fast-path.md, Lemma F3), each with an upper bound of its distance in Dh[idx] (n floats), and
 * counts[5] the largest lower bound of those distances (a non-negative double's bits). counts must start at zero.
 * pb narrows stage 1's bracket of sum |a_k b_k|. A and Bt: the operands as floats (exact), B transposed (stage 2, the
 * widest sets' refinement and the gathering read them: half the bytes of doubles). ia, ib: each output batch's operand
 * batches; c: the decision's constants, with out_fmt 0, 1 or 2. stages: 1 stage 1 (every element), 2 stage 2 (stage
 * 1's candidates), 3 both. */
int er__devmm_decide(const void *out, const double *S, er_dev_pb pb, const float *A, const float *Bt,
                     const double *an, const double *bn, const int64_t *ia, const int64_t *ib, int64_t nbatch,
                     int64_t M, int64_t N, int64_t K, er_fast_consts c, uint8_t *classes, unsigned long long *counts,
                     int64_t *cand, int64_t *pending, float *Dh, int stages, void *stream);
/* y = x as floats for n values (exact for values of at most 24 bits). */
int er__devmm_tofloat(const double *x, int64_t n, float *y, void *stream);
/* d[idx[i]] = v[i] for i < n. */
int er__devmm_scatter8(const int64_t *idx, const uint8_t *v, int64_t n, uint8_t *d, void *stream);
/* y = |x| for n values. */
int er__devmm_abs(const double *x, int64_t n, double *y, void *stream);
/* After er__devmm_decide, with the same pb: the relative width of each decided element's set into R (n doubles of
 * scratch), the largest into w[0] (the bits of a non-negative double; 0: none) and its first element into w[1]
 * (ULLONG_MAX: none); w[2] and w[3] scratch (the largest lower bound of a width, the count of cand[], n indices of
 * scratch); w must start at {0, ULLONG_MAX, 0, 0}. Where pb does not decide a set that may be the widest, P is
 * bracketed from the products (one warp each); a decided element (one outside too) whose set that does not decide
 * either, and may be as wide, becomes pending (counts and pending as er__devmm_decide's). Then each element decided
 * outside whose distance may be the largest (Dh[idx] at least counts[5]'s value) becomes pending. */
int er__devmm_widest(const double *S, er_dev_pb pb, const float *A, const float *Bt, const double *an,
                     const double *bn, const int64_t *ia, const int64_t *ib, int64_t nbatch, int64_t M, int64_t N,
                     int64_t K, er_fast_consts c, uint8_t *classes, unsigned long long *counts, int64_t *pending,
                     double *R, int64_t *cand, unsigned long long *w, const float *Dh, void *stream);
/* For each of the n pending elements: its A row and B column (K values each, exact as floats) into rows[2 n K],
 * its output into ys. */
int er__devmm_gather(const int64_t *pending, int64_t n, const void *out, int out_fmt, const float *A, const float *Bt,
                     const int64_t *ia, const int64_t *ib, int64_t M, int64_t N, int64_t K, float *rows, double *ys,
                     void *stream);
/* S = A B per output batch in fp64 through cuBLAS (loaded on first use): 0, or a negative value when cuBLAS is
 * missing (-1) or fails (-2). */
int er__devmm_dgemm(const double *A, const double *B, double *S, const int64_t *ia_host, const int64_t *ib_host,
                    int64_t nbatch, int64_t M, int64_t N, int64_t K, void *stream);

/* G = A8 Bt8^T per output batch in int8 with int32 sums through cuBLAS (A8 [batches][M][K], Bt8 [batches][N][K], G
 * [nbatch][M][N]; exact below 2^31): 0, or a negative value when cuBLAS is missing (-1) or fails (-2), or lacks or
 * refuses the int8 GEMM (-3). */
int er__devmm_igemm(const int8_t *A8, const int8_t *Bt8, int32_t *G, const int64_t *ia_host, const int64_t *ib_host,
                    int64_t nbatch, int64_t M, int64_t N, int64_t K, void *stream);

#ifdef __cplusplus
}
#endif
#endif
