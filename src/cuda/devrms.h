/* devrms.h: rmsnorm's rows on the GPU (src/cuda/devrms.cu; docs/algorithms/rmsnorm.md, On the GPU). A first kernel
 * sums each row's squares in core/sqwin.h's window and to nearest in er_sqwin_pos's order; the host turns those into
 * the row's constants (er__rmsnorm_dev_consts); a second kernel computes every element's set and exact result with
 * the operations of er__rmsnorm_row's double case and classifies the elements of each row it decides whole; any other
 * row is left to the host. C interface; every function returns 0 or a cudaError_t value and queues its work on
 * `stream`. */
#ifndef ER_DEVRMS_H
#define ER_DEVRMS_H

#include <stdint.h>
#include "core/sqwin.h"
#include "cuda/devrec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The elements' constants. Formats: 0 fp32, 1 fp16, 2 bf16; w_fmt -1: no weight. */
typedef struct er_devrms_consts {
    int x_fmt, w_fmt, out_fmt;
    double omax;          /* the output format's largest finite value */
    double bug;           /* the classic bug's relative move (0: none) */
} er_devrms_consts;

/* Each row of x (rows x n, contiguous, format x_fmt) summed into win[row], on `blocks` blocks. */
int er__devrms_sums(const void *x, int x_fmt, int64_t rows, int64_t n, int blocks, er_sqwin_row *win, void *stream);
/* The rows of x and weight w (n values, or NULL) against out, with each row's constants rc[4 row .. 4 row + 4)
 * (er__rmsnorm_dev_consts; NaN: the host's row): each decided row's classes (0 exact, 1 covered) into classes[],
 * each other row's ER_PENDING with its number in pend[] (their count in *npend, which must start at zero; in no
 * order), each block's tally into parts[blocks]. c in host memory (the kernel takes it by value), rc in device
 * memory. */
int er__devrms_rows(const void *x, const void *w, const void *out, int64_t rows, int64_t n, const er_devrms_consts *c,
                    const double *rc, int blocks, uint8_t *classes, er_dev_part *parts, int64_t *pend,
                    unsigned long long *npend, void *stream);
/* Element idx that er__devrms_rows decided, decided again by one thread for the report's widest set: its set into
 * *set (device memory; set->ok 0: not decided). */
int er__devrms_one(const void *x, const void *w, const void *out, int64_t n, const er_devrms_consts *c,
                   const double *rc, int64_t idx, er_dev_cset *set, void *stream);

#ifdef __cplusplus
}
#endif
#endif
