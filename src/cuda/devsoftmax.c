/* devsoftmax.c: er_softmax_covers_device, softmax's check with its input and output in device memory
 * (docs/algorithms/softmax.md, On the GPU): the rows on the GPU (devsm.cu), the rows it leaves and the widest set's
 * entry by the softmax module's own row function on the host, through the engine's sinks (src/ops/module.h). What
 * the GPU path does not take runs on host copies. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include <exactref/cuda.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

#ifdef ER_HAVE_CUDA
#include <cuda_runtime_api.h>
#include "cuda/devrows.h"
#include "cuda/devsm.h"

/* The whole check on host copies of x and out (log: log_softmax). */
static er_status er_sm_covers_host(er_report *rep, int log, const er_tensor *x, int dim, const er_tensor *out,
                                   const er_standard *std, void *stream) {
    const er_tensor *v[2] = {x, out};
    er_tensor h[2];
    void *bufs[2];
    er_status st = er_dev_host_views(2, v, h, bufs, stream);
    er_ref *ref = NULL;
    if (st == ER_OK) st = log ? er_log_softmax(&ref, &h[0], dim) : er_softmax(&ref, &h[0], dim);
    if (st == ER_OK) st = er_covers(rep, ref, &h[1], std);
    er_ref_free(ref);
    for (int i = 0; i < 2; i++) free(bufs[i]);
    return st;
}

/* The device views and the stream; fallback is set where the GPU path does not apply. */
typedef struct er_sm_arg { const er_tensor *x, *out; void *stream; int fallback; er_dev_keep keep; } er_sm_arg;

static er_status er_sm_covers(const er_ref *ref, const er_standard *std, er_sinks *sks);
static er_status er_sm_check(const er_ref *ref, const er_standard *std) { return er__softmax_module.check(ref, std); }
static er_status er_lsm_check(const er_ref *ref, const er_standard *std) {
    return er__log_softmax_module.check(ref, std);
}
static const er_op_module er_sm_module = ER_DEV_ROWS_MODULE("softmax", er_sm_check, er_sm_covers),
                          er_lsm_module = ER_DEV_ROWS_MODULE("log_softmax", er_lsm_check, er_sm_covers);
#endif

static er_status er_softmax_covers_device_run(er_report *rep, int log, const er_tensor *x, int dim,
                                              const er_tensor *out, const er_standard *std, void *stream) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(x, "x");
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(std, "standard");
    ER_RETURN_IF_ERROR(er__tensor_check(x, "x"));
#ifndef ER_HAVE_CUDA
    (void)log;
    (void)dim;
    (void)stream;
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    er_ref *ref; /* the shapes alone: its data pointer is the device's, which nothing on the host reads */
    ER_RETURN_IF_ERROR(log ? er_log_softmax(&ref, x, dim) : er_softmax(&ref, x, dim));
    er_sm_arg arg = {x, out, stream, 0, er_dev_keep_of(rep)};
    er_status st = er__covers_module(rep, log ? &er_lsm_module : &er_sm_module, ref, out, std, &arg);
    er_dev_keep_end(&arg.keep, rep, st);
    er_ref_free(ref);
    if (st != ER_OK || !arg.fallback) return st;
    er_report_clear(rep);
    return er_sm_covers_host(rep, log, x, dim, out, std, stream);
#endif
}

er_status er_softmax_covers_device(er_report *rep, const er_tensor *x, int dim, const er_tensor *out,
                                   const er_standard *std, void *stream) {
    er_status st = er_softmax_covers_device_run(rep, 0, x, dim, out, std, stream);
    er__report_finish(rep, st);
    return st;
}

er_status er_log_softmax_covers_device(er_report *rep, const er_tensor *x, int dim, const er_tensor *out,
                                       const er_standard *std, void *stream) {
    er_status st = er_softmax_covers_device_run(rep, 1, x, dim, out, std, stream);
    er__report_finish(rep, st);
    return st;
}

#ifdef ER_HAVE_CUDA
/* Whether the GPU path takes the check: softmax's main case in double (er__softmax_dev_plan) along the last dimension
 * of contiguous views, inputs and outputs of fp32, fp16 or bf16. */
static int er_sm_takes(const er_ref *ref, const er_sm_arg *arg, const er_standard *std, int log, er_softmax_dev *d) {
    int64_t n = er__rows(ref)->K;
    return er_dev_fmt(arg->x->format) >= 0 && er_dev_fmt(arg->out->format) >= 0 &&
           er__rows(ref)->dim == ref->ndim - 1 && er__row_major(arg->x) && er__row_major(arg->out) && n >= 1 &&
           n < INT32_MAX && ref->n > 0 && er__softmax_dev_plan(std, er__fmt(arg->out->format), n, log, d);
}

/* The kernels' constants. */
static void er_sm_consts(const er_dev_rows *r, const er_softmax_dev *d, er_devsm_consts *c) {
    const char *what = NULL;
    memset(c, 0, sizeof *c);
    c->U = d->U;
    c->exp_fast = d->exp_fast;
    c->div = d->div;
    c->c1 = d->c1;
    c->g = d->g;
    c->thr = d->thr;
    c->bug = er__rows_classic_bug(r->ref, 0, &what);
    c->x_fmt = er_dev_fmt(r->x->format);
    c->out_fmt = er_dev_fmt(r->out->format);
    c->omax = er__fmt(r->out->format)->max;
    memcpy(c->exp_tlo, d->exp_tlo, sizeof c->exp_tlo);
    memcpy(c->exp_thi, d->exp_thi, sizeof c->exp_thi);
    c->exp_lh = d->exp_lh;
    c->exp_ll = d->exp_ll;
    c->dd = d->dd && c->out_fmt == 0;
    memcpy(c->exp_t1, d->exp_t1, sizeof c->exp_t1);
    memcpy(c->exp_t2, d->exp_t2, sizeof c->exp_t2);
}

/* The path's constants (passed to the kernels by value) and the device buffers that er_sm_one reads (log_softmax: dm
 * and drc; softmax: scratch). */
typedef struct er_sm_dev { int log; er_devsm_consts c; float *scratch; double *dm, *drc; } er_sm_dev;

/* The rows on the GPU with d's constants: the classes into the report's array, the blocks' tallies and the rows left
 * into r. */
static void er_sm_gpu(er_dev_rows *r, uint8_t *classes, er_sm_dev *d) {
    cudaStream_t s = r->s;
    int64_t n = r->n;
    float *scratch = er_dev_alloc(&r->db, sizeof(float) * 2 * (size_t)n * (size_t)r->blocks, s, &r->e);
    d->log = 0;
    d->scratch = scratch;
    er_dev_kio o;
    er_dev_kio_init(r, &o, NULL, 0);
    if (r->e == cudaSuccess) {
        int ec = er__devsm_rows(r->x->data, r->out->data, r->rows, n, &d->c, r->blocks, scratch, o.dcl, o.dparts,
                                o.dpend, o.dn, s);
        if (ec) r->e = (cudaError_t)ec;
    }
    er_dev_rows_back(r, &o, classes);
}

/* log_softmax's rows on the GPU: the heads, the host's logs, the elements; the classes into the report's array, the
 * blocks' tallies and the rows left into r. */
static void er_lsm_gpu(er_dev_rows *r, uint8_t *classes, er_sm_dev *d) {
    cudaStream_t s = r->s;
    int64_t n = r->n, rows = r->rows;
    double *sums = malloc(sizeof(double) * 4 * (size_t)rows), *rc = malloc(sizeof(double) * 4 * (size_t)rows);
    if (!sums || !rc) r->st = er__fail(ER_ERR_NOMEM, "cannot allocate the constants of %lld rows", (long long)rows);
    float *scratch = er_dev_alloc(&r->db, sizeof(float) * 2 * (size_t)n * (size_t)r->blocks, s, &r->e);
    double *dm = er_dev_alloc(&r->db, sizeof(double) * (size_t)rows, s, &r->e);
    double *dsums = er_dev_alloc(&r->db, sizeof(double) * 4 * (size_t)rows, s, &r->e);
    if (r->st == ER_OK && r->e == cudaSuccess) {
        int ec = er__devsm_log_heads(r->x->data, rows, n, &d->c, r->blocks, scratch, dm, dsums, s);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (r->st == ER_OK && r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(sums, dsums, sizeof(double) * 4 * (size_t)rows, cudaMemcpyDeviceToHost, s);
    if (r->st == ER_OK && r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
    if (r->st == ER_OK && r->e == cudaSuccess)
        r->st = er__log_softmax_dev_consts(r->std, er__fmt(r->out->format), rows, n, sums, rc);
    er_dev_kio o;
    er_dev_kio_init(r, &o, rc, 4);
    d->log = 1;
    d->scratch = scratch;
    d->dm = dm;
    d->drc = o.drc;
    if (r->st == ER_OK && r->e == cudaSuccess) {
        int ec = er__devsm_log_rows(r->x->data, r->out->data, rows, n, &d->c, dm, o.drc, r->blocks, o.dcl, o.dparts,
                                    o.dpend, o.dn, s);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (r->st == ER_OK) er_dev_rows_back(r, &o, classes);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s); /* rc is read by its copy until here */
    free(sums);
    free(rc);
}

/* softmax's or log_softmax's row function on the host (er_dev_rows_put), as the reference's op says. */
static er_status er_sm_put(const er_dev_rows *r, er_sink *sk, const int64_t *rows, int64_t np, const double *xs,
                           const double *x2s, const double *ys, int64_t only) {
    (void)x2s; /* one input */
    return er__softmax_rows_put(r->std, r->ref->mod == &er__log_softmax_module, sk, rows, np, r->n, xs, ys, only);
}

/* The widest set's entry on the GPU (er_dev_rows_one). */
static int er_sm_one(const er_dev_rows *r, int64_t idx, er_dev_cset *set) {
    const er_sm_dev *d = r->dev;
    return d->log ? er__devsm_log_one(r->x->data, r->out->data, r->n, &d->c, d->dm, d->drc, idx, set, r->s)
                  : er__devsm_one(r->x->data, r->out->data, r->n, &d->c, d->scratch, idx, set, r->s);
}

/* The GPU path's covers: the rows on the GPU; the rows it leaves, in order, by the module's row function on the host's
 * threads, and the widest decided set's entry. */
static er_status er_sm_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    er_sm_arg *arg = er__sinks_arg(sks);
    er_softmax_dev d;
    int log = ref->mod == &er__log_softmax_module;
    if (!er_sm_takes(ref, arg, std, log, &d)) {
        arg->fallback = 1;
        er__sinks_decline(sks);
        return ER_OK;
    }
    /* at most 256 MiB of scratch (two floats per element of each block's row: the kernel's exps' ends, values of fp32)
     * but for one block */
    int64_t n = er__rows(ref)->K;
    int blocks = er__dev_blocks(ref->n / n);
    if ((double)blocks * 8.0 * (double)n > 0x1p28) blocks = (int)(0x1p28 / (8.0 * (double)n)) + 1;
    er_dev_rows r;
    er_dev_rows_init(&r, ref, std, arg->x, NULL, arg->out, er__rows(ref)->K, arg->stream, blocks, er_sm_put, NULL,
                     &arg->keep);
    er_sm_dev dev;
    memset(&dev, 0, sizeof dev);
    if (r.st == ER_OK) {
        er_sm_consts(&r, &d, &dev.c);
        if (log) er_lsm_gpu(&r, er__sinks_classes(sks, 0), &dev);
        else er_sm_gpu(&r, er__sinks_classes(sks, 0), &dev);
        r.one = er_sm_one;
        r.dev = &dev;
    }
    return er_dev_rows_finish(&r, sks);
}
#endif
