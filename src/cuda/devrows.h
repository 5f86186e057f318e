/* devrows.h: what the row paths on the GPU (devsoftmax.c, devrmsnorm.c) share on the host: one check's state; the
 * classes, tallies and rows left coming back from the GPU; the rows left gathered in chunks and run by the op's row
 * function on the host's threads; the widest decided set's entry. */
#ifndef ER_DEVROWS_H
#define ER_DEVROWS_H

#include <stdint.h>
#include <cuda_runtime_api.h>
#include "ops/module.h"
#include "tensor/tensor_internal.h"
#include "cuda/devbufs.h"
#include "cuda/devrec.h"

/* The module of a row path on the GPU (one output "out"): the op's check, the path's covers. */
static const char *const er_dev_rows_out[1] = {"out"};
#define ER_DEV_ROWS_MODULE(op, chk, cov)                                                                               \
    {.name = op, .nout = 1, .out_names = er_dev_rows_out, .out_shape = er__out_shape_same, .check = chk,               \
     .covers = cov, .classic_bug = er__rows_classic_bug}

typedef struct er_dev_rows er_dev_rows;
/* The op's row function on the host: rows rows[0 .. np) (values xs, the second input's x2s where the op has one,
 * else NULL, and outputs ys, n each) into sk (only < 0), or the one element `only` given to sk as the widest set's
 * candidate. */
typedef er_status (*er_dev_rows_put)(const er_dev_rows *r, er_sink *sk, const int64_t *rows, int64_t np,
                                     const double *xs, const double *x2s, const double *ys, int64_t only);

/* The op's one-element kernel queued on r's stream: element idx, which its rows' kernel decided, decided again for the
 * widest set's entry into *set (device memory). Returns 0 or a cudaError_t value. */
typedef int (*er_dev_rows_one)(const er_dev_rows *r, int64_t idx, er_dev_cset *set);

/* One check's state. */
struct er_dev_rows {
    const er_ref *ref;            /* the shapes (its data pointer the device's) */
    const er_standard *std;
    const er_tensor *x, *x2, *out; /* device views: rows x n, contiguous (x2: an op's second input, or NULL) */
    cudaStream_t s;
    int64_t rows, n;
    int blocks;
    er_devbufs db;
    cudaError_t e;
    er_status st;
    er_dev_part *parts;           /* the blocks' tallies (host) */
    int64_t *pend, npend;         /* the rows the GPU left (host, sorted) */
    er_dev_rows_put put;
    const void *op;               /* what the op's row function reads besides the rows (rmsnorm: its weights) */
    er_dev_keep *keep;            /* where the classes stay on the device (NULL: copied into the report) */
    er_dev_rows_one one;          /* the widest set's entry on the GPU (NULL, or where its kernel does not decide the
                                   * element: the op's row function gives it) */
    const void *dev;              /* what `one` reads: the path's device buffers */
};

/* Starts r for rows of n elements along the last dimension of x (and x2, NULL where the op has one input) and out,
 * on `blocks` blocks (at most the rows); its tallies' and rows' host arrays allocated (r->st: ER_ERR_NOMEM where
 * not). keep: the classes left on the device in keep->dcl where keep->want (NULL: none). */
void er_dev_rows_init(er_dev_rows *r, const er_ref *ref, const er_standard *std, const er_tensor *x,
                      const er_tensor *x2, const er_tensor *out, int64_t n, void *stream, int blocks,
                      er_dev_rows_put put, const void *op, er_dev_keep *keep);
/* What a path's element kernel reads and writes in device memory besides the tensors: the rows' constants (drc; NULL
 * where the path has none), the classes (dcl), the blocks' tallies (dparts), the rows left (dpend) and their count
 * (*dn). */
typedef struct er_dev_kio {
    double *drc;
    uint8_t *dcl;
    er_dev_part *dparts;
    int64_t *dpend;
    unsigned long long *dn;
} er_dev_kio;
/* o's device memory allocated, the rows' constants rc (k doubles a row; NULL: none) copied up and the count zeroed,
 * all queued on r's stream (r->e: the first CUDA error). */
void er_dev_kio_init(er_dev_rows *r, er_dev_kio *o, const double *rc, int k);
/* After the kernels are queued, which write o's classes, tallies, rows left and count: the classes into the report's
 * array `classes` (but where they stay on the device), the tallies and the rows left (sorted) into r. */
void er_dev_rows_back(er_dev_rows *r, const er_dev_kio *o, uint8_t *classes);
/* The rest of the check: the sinks opened, the GPU's tally into the first share, the rows left by the op's row
 * function in order (where the classes stay on the device, theirs copied there), the widest decided set's entry (by
 * r->one where it gives it, else by the op's row function); the device buffers freed; r's state and errors as a
 * status. */
er_status er_dev_rows_finish(er_dev_rows *r, er_sinks *sks);

/* Host copies of the device views v[0 .. k) (a NULL entry skipped) for a path's check on the host: each into h[i]
 * (er_tensor_from_device), its buffer into bufs[i] (NULL where none; the caller frees each); the first error. */
er_status er_dev_host_views(int k, const er_tensor *const *v, er_tensor *h, void **bufs, void *stream);

#endif
