/* devsbwd.h: softmax's and log_softmax's backward passes along rows on the GPU (src/cuda/devsbwd.cu;
 * docs/algorithms/softmax-backward.md, On the GPU). A first kernel sums each row's products dy_j y_j (and, under
 * products=either with narrower inputs, the products rounded to the inputs' format; log_softmax: the sum of dy_j) in
 * core/pwin.h's window and in the rows' one order of er_pwin_lanes; the host turns those into the row's constants
 * (er__sbwd_dev_row, er__lsbwd_dev_row); a second kernel computes every element's set and exact result with the
 * operations of er__sbwd_row's (er__lsbwd_row's) fast pass and classifies the elements of each row it decides whole;
 * any other row is left to the host. C interface; every function returns 0 or a cudaError_t value and queues its
 * work on `stream`. */
#ifndef ER_DEVSBWD_H
#define ER_DEVSBWD_H

#include <stdint.h>
#include "core/pwin.h"
#include "core/lsbdd.h"
#include "cuda/devrec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The elements' constants. Formats: 0 fp32, 1 fp16, 2 bf16; p_fmt -1: the products are not rounded first. */
typedef struct er_devsbwd_consts {
    int dy_fmt, y_fmt, p_fmt, out_fmt;
    double pmax;          /* the largest finite value of p_fmt */
    double omax;          /* the output format's largest finite value */
    int log;              /* log_softmax's backward pass (dx = dy - exp(y) S); 0 softmax's */
    double U;             /* log_softmax: exp within U ulps of fp32 (an integer, er__lsbwd_dev_takes) */
    double exp_tlo[64], exp_thi[64], exp_lh, exp_ll; /* log_softmax: er__exp_bounds's tables (er__exp_tables) */
    double exp_t1[64], exp_t2[64];                   /* log_softmax: er__exp_dd's (Lemma B5) */
} er_devsbwd_consts;

/* Each row of dy and y (rows x n, contiguous) summed into win[2 row] (the products; y NULL: the sum of dy) and
 * win[2 row + 1] (the products rounded to c->p_fmt; where p_fmt is -1, not written), on `blocks` blocks. */
int er__devsbwd_sums(const void *dy, const void *y, int64_t rows, int64_t n, const er_devsbwd_consts *c, int blocks,
                     er_pwin_row *win, void *stream);
/* The rows of dy and y against out, with each row's constants rc[k row .. k row + k) (er__sbwd_dev_row, k = 5; where
 * c->log er__lsbwd_dev_row, k = ER_LSBWD_DEV_CONSTS; NaN: the host's row): each decided row's classes (0 exact,
 * 1 covered) into classes[], each other row's ER_PENDING with its number in pend[] (their count in *npend, which must
 * start at zero; in no order), each block's tally into parts[blocks]. c in host memory (the kernel takes it by
 * value), rc in device memory. */
int er__devsbwd_rows(const void *dy, const void *y, const void *out, int64_t rows, int64_t n,
                     const er_devsbwd_consts *c, const double *rc, int blocks, uint8_t *classes, er_dev_part *parts,
                     int64_t *pend, unsigned long long *npend, void *stream);
/* Element idx that er__devsbwd_rows decided, decided again by one thread for the report's widest set: its set into
 * *set (device memory; set->ok 0: not decided). */
int er__devsbwd_one(const void *dy, const void *y, const void *out, int64_t n, const er_devsbwd_consts *c,
                    const double *rc, int64_t idx, er_dev_cset *set, void *stream);

#ifdef __cplusplus
}
#endif
#endif
