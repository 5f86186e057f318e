/* devsm.h: softmax's rows on the GPU (src/cuda/devsm.cu; docs/algorithms/softmax.md, On the GPU). The kernels compute
 * each row's sets with the operations of the host's sets in double (er_softmax_sets_dbl's main case), the exact
 * result's enclosure of er_exact_row_dbl and, for the elements it leaves open, Lemma S7's pass (er_exact_row_dd), in
 * the same order and roundings, and classify every element of a row whose elements they all decide as exact or
 * covered; any other row is left to the host. C interface; every function
 * returns 0 or a cudaError_t value and queues its work on `stream`. */
#ifndef ER_DEVSM_H
#define ER_DEVSM_H

#include <stdint.h>
#include "cuda/devrec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a row's sets need beyond its values: the standard's exp bound, division and sum constants, the output's
 * format, the classic bug's move, and the tables of er__exp_bounds (ival.h). Formats: 0 fp32, 1 fp16, 2 bf16. */
typedef struct er_devsm_consts {
    double U;             /* exp within U ulps of fp32 (er_softmax_plan's U) */
    int exp_fast;         /* __expf's 2 + floor(1.173 |d|) ulps instead */
    int div;              /* 0 either, 1 divide, 2 reciprocal */
    double c1, g, thr;    /* er__anyorder_bound_terms_depth's for the row's n terms */
    double bug;           /* the classic bug's relative move (0: none) */
    int x_fmt, out_fmt;
    double omax;          /* the output format's largest finite value */
    double exp_tlo[64], exp_thi[64], exp_lh, exp_ll;
    int dd;               /* Lemma S7's pass (er_exact_row_dd) for the elements double leaves open: fp32 outputs */
    double exp_t1[64], exp_t2[64]; /* er__exp_dd's tables */
} er_devsm_consts;

/* The rows of x (rows x n, contiguous, format c->x_fmt) against out (the same, format c->out_fmt), on `blocks` blocks:
 * each decided row's classes (0 exact, 1 covered) into classes[], each other row's ER_PENDING with its number in
 * pend[] (their count in *npend, which must start at zero; in no order), each block's tally into parts[blocks].
 * scratch: 2 n floats per block; c: the constants (host memory: the kernels take them by value, their scalars
 * from constant memory). */
int er__devsm_rows(const void *x, const void *out, int64_t rows, int64_t n, const er_devsm_consts *c, int blocks,
                   float *scratch, uint8_t *classes, er_dev_part *parts, int64_t *pend, unsigned long long *npend,
                   void *stream);

/* log_softmax's rows, in two passes with the host's logs between them (er__log_softmax_dev_consts). The first writes
 * each row's maximum into m[row] and its sums into sums[4 row .. 4 row + 4) (NaN: the host's row); scratch as
 * er__devsm_rows'. The second classifies the rows against out as er__devsm_rows does, with each row's constants
 * rc[4 row .. 4 row + 4) (NaN: the host's row). c in host memory; m, sums and rc in device memory. */
int er__devsm_log_heads(const void *x, int64_t rows, int64_t n, const er_devsm_consts *c, int blocks, float *scratch,
                        double *m, double *sums, void *stream);
int er__devsm_log_rows(const void *x, const void *out, int64_t rows, int64_t n, const er_devsm_consts *c,
                       const double *m, const double *rc, int blocks, uint8_t *classes, er_dev_part *parts,
                       int64_t *pend, unsigned long long *npend, void *stream);
/* Element idx that er__devsm_rows (er__devsm_one) or er__devsm_log_rows (er__devsm_log_one) decided, decided again
 * for the report's widest set: its set into *set (device memory; set->ok 0: not decided). scratch: 2 n floats. */
int er__devsm_one(const void *x, const void *out, int64_t n, const er_devsm_consts *c, float *scratch, int64_t idx,
                  er_dev_cset *set, void *stream);
int er__devsm_log_one(const void *x, const void *out, int64_t n, const er_devsm_consts *c, const double *m,
                      const double *rc, int64_t idx, er_dev_cset *set, void *stream);

#ifdef __cplusplus
}
#endif
#endif
