/* devsoftmaxbwd.c: er_softmax_backward_covers_device and er_log_softmax_backward_covers_device, softmax's and
 * log_softmax's backward checks with dy, y and dx in device memory (docs/algorithms/softmax-backward.md, On the GPU):
 * each row's sum (of products; log_softmax: of dy) on the GPU (devsbwd.cu), the row's constants from it on the host
 * (er__sbwd_dev_row, er__lsbwd_dev_row), the elements on the GPU; the rows it leaves and the widest set's entry by
 * the op module's own row function on the host, through the engine's sinks (devrows.c). What the GPU path does not
 * take runs on host copies. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/cuda.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

/* er_softmax_backward or er_log_softmax_backward. */
typedef er_status (*er_bwd_make_fn)(er_ref **out, const er_tensor *dy, const er_tensor *y, int dim);

#ifdef ER_HAVE_CUDA
#include <cuda_runtime_api.h>
#include "cuda/devrows.h"
#include "cuda/devsbwd.h"

/* The whole check on host copies of dy, y and out. */
static er_status er_sbwd_covers_host(er_report *rep, er_bwd_make_fn make, const er_tensor *dy, const er_tensor *y,
                                     int dim, const er_tensor *out, const er_standard *std, void *stream) {
    const er_tensor *v[3] = {dy, y, out};
    er_tensor h[3];
    void *bufs[3];
    er_status st = er_dev_host_views(3, v, h, bufs, stream);
    er_ref *ref = NULL;
    if (st == ER_OK) st = make(&ref, &h[0], &h[1], dim);
    if (st == ER_OK) st = er_covers(rep, ref, &h[2], std);
    er_ref_free(ref);
    for (int i = 0; i < 3; i++) free(bufs[i]);
    return st;
}

/* The device views and the stream; fallback is set where the GPU path does not apply. */
typedef struct er_sbwd_arg {
    const er_tensor *dy, *y, *out;
    void *stream;
    int fallback;
    er_dev_keep keep;
} er_sbwd_arg;

static er_status er_sbwd_dev_covers(const er_ref *ref, const er_standard *std, er_sinks *sks);
static er_status er_sbwd_dev_check(const er_ref *ref, const er_standard *std) {
    return er__softmax_backward_module.check(ref, std);
}
static er_status er_lsbwd_dev_check(const er_ref *ref, const er_standard *std) {
    return er__log_softmax_backward_module.check(ref, std);
}
static const char *const er_sbwd_dev_out[1] = {"dx"};
static const er_op_module er_sbwd_dev_module = {.name = "softmax_backward", .nout = 1, .out_names = er_sbwd_dev_out,
                                                .out_shape = er__out_shape_same, .check = er_sbwd_dev_check,
                                                .covers = er_sbwd_dev_covers},
                          er_lsbwd_dev_module = {.name = "log_softmax_backward", .nout = 1,
                                                 .out_names = er_sbwd_dev_out, .out_shape = er__out_shape_same,
                                                 .check = er_lsbwd_dev_check, .covers = er_sbwd_dev_covers};
#endif

/* The check of the op that make builds (log: log_softmax_backward's). */
static er_status er_bwd_covers_device_run(er_report *rep, int log, const er_tensor *dy, const er_tensor *y, int dim,
                                          const er_tensor *out, const er_standard *std, void *stream) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(std, "standard");
    er_bwd_make_fn make = log ? er_log_softmax_backward : er_softmax_backward;
    er_ref *ref; /* the arguments' checks first; the shapes alone: its data pointers are the device's */
    ER_RETURN_IF_ERROR(make(&ref, dy, y, dim));
#ifndef ER_HAVE_CUDA
    er_ref_free(ref);
    (void)stream;
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    er_sbwd_arg arg = {dy, y, out, stream, 0, er_dev_keep_of(rep)};
    er_status st = er__covers_module(rep, log ? &er_lsbwd_dev_module : &er_sbwd_dev_module, ref, out, std, &arg);
    er_dev_keep_end(&arg.keep, rep, st);
    er_ref_free(ref);
    if (st != ER_OK || !arg.fallback) return st;
    er_report_clear(rep);
    return er_sbwd_covers_host(rep, make, dy, y, dim, out, std, stream);
#endif
}

er_status er_softmax_backward_covers_device(er_report *rep, const er_tensor *dy, const er_tensor *y, int dim,
                                            const er_tensor *out, const er_standard *std, void *stream) {
    er_status st = er_bwd_covers_device_run(rep, 0, dy, y, dim, out, std, stream);
    er__report_finish(rep, st);
    return st;
}

er_status er_log_softmax_backward_covers_device(er_report *rep, const er_tensor *dy, const er_tensor *y, int dim,
                                                const er_tensor *out, const er_standard *std, void *stream) {
    er_status st = er_bwd_covers_device_run(rep, 1, dy, y, dim, out, std, stream);
    er__report_finish(rep, st);
    return st;
}

#ifdef ER_HAVE_CUDA
/* The host's rows (er_dev_rows_put). */
static er_status er_sbwd_dev_put(const er_dev_rows *r, er_sink *sk, const int64_t *rows, int64_t np,
                                 const double *xs, const double *x2s, const double *ys, int64_t only) {
    return er__sbwd_rows_put(r->ref, r->std, sk, rows, np, r->n, xs, x2s, ys, only);
}

/* The path's device buffers that er_sbwd_dev_one reads. */
typedef struct er_sbwd_dev { er_devsbwd_consts c; double *drc; } er_sbwd_dev;

/* The rows on the GPU: their windows, the rows' constants on the host, the elements; the classes into the report's
 * array, the blocks' tallies and the rows left into r; the buffers er_sbwd_dev_one reads into *d. */
static void er_sbwd_gpu(er_dev_rows *r, const er_sbwd_arg *arg, const er_devsbwd_consts *hc, uint8_t *classes,
                        er_sbwd_dev *d) {
    cudaStream_t s = r->s;
    int64_t n = r->n, rows = r->rows;
    er_pwin_row *win = malloc(sizeof *win * 2 * (size_t)rows);
    int k = hc->log ? ER_LSBWD_DEV_CONSTS : 5; /* each row's constants */
    double *rc = malloc(sizeof(double) * (size_t)k * (size_t)rows);
    if (!win || !rc) r->st = er__fail(ER_ERR_NOMEM, "cannot allocate the constants of %lld rows", (long long)rows);
    er_pwin_row *dwin = er_dev_alloc(&r->db, sizeof *dwin * 2 * (size_t)rows, s, &r->e);
    if (r->st == ER_OK && r->e == cudaSuccess) { /* log_softmax: the sum of dy */
        int ec = er__devsbwd_sums(arg->dy->data, hc->log ? NULL : arg->y->data, rows, n, hc, r->blocks, dwin, s);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (r->st == ER_OK && r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(win, dwin, sizeof *win * 2 * (size_t)rows, cudaMemcpyDeviceToHost, s);
    if (r->st == ER_OK && r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
    if (r->st == ER_OK && r->e == cudaSuccess)
        r->st = er__sbwd_dev_consts_of(r->ref, r->std, er__fmt(arg->out->format), win, rows, n, rc);
    er_dev_kio o;
    er_dev_kio_init(r, &o, rc, k);
    *d = (er_sbwd_dev){*hc, o.drc};
    if (r->st == ER_OK && r->e == cudaSuccess) {
        int ec = er__devsbwd_rows(arg->dy->data, arg->y->data, arg->out->data, rows, n, hc, o.drc, r->blocks, o.dcl,
                                  o.dparts, o.dpend, o.dn, s);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (r->st == ER_OK) er_dev_rows_back(r, &o, classes);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s); /* rc is read by its copy until here */
    free(win);
    free(rc);
}

/* The widest set's entry on the GPU (er_dev_rows_one). */
static int er_sbwd_dev_one(const er_dev_rows *r, int64_t idx, er_dev_cset *set) {
    const er_sbwd_dev *d = r->dev;
    return er__devsbwd_one(r->x->data, r->x2->data, r->out->data, r->n, &d->c, d->drc, idx, set, r->s);
}

static er_status er_sbwd_dev_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    er_sbwd_arg *arg = er__sinks_arg(sks);
    er_sbwd_devinfo info = er__sbwd_dev_of(ref, std, er__fmt(arg->out->format));
    const er_fmt_info *P = info.P;
    int64_t n = info.n;
    if (!info.takes || ref->n == 0 || er_dev_fmt(arg->dy->format) < 0 || er_dev_fmt(arg->y->format) < 0 ||
        er_dev_fmt(arg->out->format) < 0 || !er__row_major(arg->dy) || !er__row_major(arg->y) ||
        !er__row_major(arg->out)) {
        arg->fallback = 1;
        er__sinks_decline(sks);
        return ER_OK;
    }
    er_devsbwd_consts hc;
    memset(&hc, 0, sizeof hc);
    hc.dy_fmt = er_dev_fmt(arg->dy->format);
    hc.y_fmt = er_dev_fmt(arg->y->format);
    hc.p_fmt = P ? er_dev_fmt(P->id) : -1;
    hc.out_fmt = er_dev_fmt(arg->out->format);
    hc.pmax = P ? P->max : 0.0;
    hc.omax = er__fmt(arg->out->format)->max;
    hc.log = info.log;
    hc.U = info.U;
    if (info.log) er__lsbwd_dev_tables(hc.exp_tlo, hc.exp_thi, &hc.exp_lh, &hc.exp_ll, hc.exp_t1, hc.exp_t2);
    er_dev_rows r;
    er_dev_rows_init(&r, ref, std, arg->dy, arg->y, arg->out, n, arg->stream, er__dev_blocks(ref->n / n),
                     er_sbwd_dev_put, NULL, &arg->keep);
    er_sbwd_dev dev;
    memset(&dev, 0, sizeof dev);
    if (r.st == ER_OK) {
        er_sbwd_gpu(&r, arg, &hc, er__sinks_classes(sks, 0), &dev);
        r.one = er_sbwd_dev_one;
        r.dev = &dev;
    }
    return er_dev_rows_finish(&r, sks);
}
#endif
