/* devattn.h: attention's loops over the keys on the GPU (src/cuda/devattn.cu; docs/algorithms/attention.md, On the
 * GPU). For each query row they compute what er__attn_row computes on the host before its per-element work, with the
 * same operations in the same order: the scores' bounds and the row's maxima (er__attn_scores's loop), the weights'
 * bounds, their fixed-point sum and largest relative width, and N_d = sum wlo_j v_jd, A_d = sum whi_j |v_jd|,
 * B_d = sum |v_jd| (er_attn_weights). C interface; every function returns 0 or a cudaError_t value and queues its
 * work on `stream`. */
#ifndef ER_DEVATTN_H
#define ER_DEVATTN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The shapes, the mask (er__attn_keys), the scores' constants (er__attn_sconst, the scale sc, c1 = 1 + (D + 2) 2^-52
 * of the norms) and the tables of er__exp_bounds (ival.h). */
typedef struct er_devattn_consts {
    int64_t D, Dv, Sq, Sk, H, Hkv;
    int causal, bottom_right, window;
    int64_t win_l, win_r;
    double sc, gD, asc, screl, c1;
    double exp_tlo[64], exp_thi[64], exp_lh, exp_ll;
    int ncomp; /* N's additions' errors kept and added at the end (the host plan's ncomp) */
} er_devattn_consts;

/* The rows of a tile: query rows i0 .. i0 + 31 of one head. */
enum { ER_DEVATTN_TILE = 32 };

/* t (format fmt: 0 fp32, 1 fp16, 2 bf16) as doubles: out[(bh S + s) Dd + d] = t[base[bh] + s sS + d sD] for bh < nbh,
 * s < S, d < Dd; base in device memory. */
int er__devattn_decode(const void *t, int fmt, const int64_t *base, int64_t nbh, int64_t S, int64_t Dd, int64_t sS,
                       int64_t sD, double *out, void *stream);
/* The bounds of ||q_i|| for rows q (rows x D) and of ||k_j|| for keys k (keys x D, v keys x Dv; infinite where k_j or
 * v_j holds a value that is not finite), as er_attn_qnorm and er__attn_load_kv compute them. */
int er__devattn_norms(const er_devattn_consts *c, const double *q, int64_t rows, const double *k, const double *v,
                      int64_t keys, double *qn, double *kn, void *stream);
/* B_d of the rows whose keys run from their head's first key to key j, for each key of v (nkv heads of Sk x Dv):
 * bs[(h Sk + j) Dv + d] = sum_{t <= j} |v_td|, added from the first key as er__devattn_rows adds B. */
int er__devattn_bsums(const double *v, int64_t nkv, int64_t Sk, int64_t Dv, double *bs, void *stream);
/* Tiles t0 .. t1 - 1 (tile T: head T / ceil(Sq / 32), its rows from (T mod ceil(Sq / 32)) 32), whose first row is r0:
 * each row's score bounds into slo and shi ((row - r0) Sk + j) and its er_attn_raw into raw[7 (row - r0) ..], then its
 * weights' fixed-point sums into fx[4 (row - r0) ..] (lo, hi; low words first), its largest (whi - wlo) / whi into
 * raw[7 (row - r0) + 6], and N, A and B (sum_j |v_jd|) into na[3 Dv (row - r0) ..]: B read from bs (er__devattn_bsums)
 * at the row's last key where bs is not NULL (every row's keys then start at its head's first). Rows with no key are
 * left as they are. */
int er__devattn_rows(const er_devattn_consts *c, const double *q, const double *k, const double *v, const double *bs,
                     const double *qn, const double *kn, int64_t t0, int64_t t1, int64_t r0, double *slo, double *shi,
                     double *raw, uint64_t *fx, double *na, void *stream);

#ifdef __cplusplus
}
#endif
#endif
