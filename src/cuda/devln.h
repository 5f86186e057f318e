/* devln.h: layernorm's rows on the GPU (src/cuda/devln.cu; docs/algorithms/layernorm.md, On the GPU). A first kernel
 * sums each row exactly (core/lnsums.h: S, sum x^2 and sum |x| as 128-bit integers, with the row's largest |x|, least
 * and greatest value); the host turns those into the row's constants (er__layernorm_dev_consts); a second kernel
 * computes every element's set and exact result with the operations of er__layernorm_row's fp32 and double cases and
 * classifies the elements of each row it decides whole; any other row is left to the host. C interface; every
 * function returns 0 or a cudaError_t value and queues its work on `stream`. */
#ifndef ER_DEVLN_H
#define ER_DEVLN_H

#include <stdint.h>
#include "core/lnsums.h"
#include "cuda/devrec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The elements' constants. Formats: 0 fp32, 1 fp16, 2 bf16; w_fmt, b_fmt -1: no weight, no bias. */
typedef struct er_devln_consts {
    int x_fmt, w_fmt, b_fmt, out_fmt;
    double omax;          /* the output format's largest finite value */
    double bug;           /* the classic bug's relative move (0: none) */
} er_devln_consts;

/* Each row of x (rows x n, contiguous, format x_fmt) summed into sums[row], on `blocks` blocks. */
int er__devln_sums(const void *x, int x_fmt, int64_t rows, int64_t n, int blocks, er_ln_sums *sums, void *stream);
/* Rows row0 .. row0 + rows of x with weight w and bias b (n values each, or NULL) against out, with each row's
 * constants rc[8 row .. 8 row + 8) (er__layernorm_dev_consts; NaN: the host's row): each decided row's classes
 * (0 exact, 1 covered) into classes[], each other row's ER_PENDING with its number in pend[] (their count in *npend,
 * which must start at zero; in no order), each block's tally into parts[blocks]. Rows and elements are numbered from
 * x's first. c in host memory (the kernel takes it by value), rc in device memory. */
int er__devln_rows(const void *x, const void *w, const void *b, const void *out, int64_t row0, int64_t rows, int64_t n,
                   const er_devln_consts *c, const double *rc, int blocks, uint8_t *classes, er_dev_part *parts,
                   int64_t *pend, unsigned long long *npend, void *stream);
/* Element idx that er__devln_rows decided, decided again by one thread for the report's widest set: its set into
 * *set (device memory; set->ok 0: not decided). */
int er__devln_one(const void *x, const void *w, const void *b, const void *out, int64_t n, const er_devln_consts *c,
                  const double *rc, int64_t idx, er_dev_cset *set, void *stream);

#ifdef __cplusplus
}
#endif
#endif
