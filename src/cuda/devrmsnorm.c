/* devrmsnorm.c: er_rmsnorm_covers_device, rmsnorm's check with its input, weight and output in device memory
 * (docs/algorithms/rmsnorm.md, On the GPU): each row's sum of squares on the GPU (devrms.cu), the row's constants
 * from it on the host (er__rmsnorm_dev_consts), the elements on the GPU; the rows it leaves and the widest set's entry
 * by the rmsnorm module's own row function on the host, through the engine's sinks (devrows.c). What the GPU path does
 * not take runs on host copies. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/cuda.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

#ifdef ER_HAVE_CUDA
#include <cuda_runtime_api.h>
#include "cuda/devrows.h"
#include "cuda/devrms.h"

/* The whole check on host copies of x, the weight and out. */
static er_status er_rms_covers_host(er_report *rep, const er_tensor *x, const er_tensor *w, double eps,
                                    const er_tensor *out, const er_standard *std, void *stream) {
    const er_tensor *v[3] = {x, w, out};
    er_tensor h[3];
    void *bufs[3];
    er_status st = er_dev_host_views(3, v, h, bufs, stream);
    er_ref *ref = NULL;
    if (st == ER_OK) st = er_rmsnorm(&ref, &h[0], w ? &h[1] : NULL, eps);
    if (st == ER_OK) st = er_covers(rep, ref, &h[2], std);
    er_ref_free(ref);
    for (int i = 0; i < 3; i++) free(bufs[i]);
    return st;
}

/* The device views and the stream; fallback is set where the GPU path does not apply. */
typedef struct er_rms_arg {
    const er_tensor *x, *w, *out;
    void *stream;
    int fallback;
    er_dev_keep keep;
} er_rms_arg;

static er_status er_rms_covers(const er_ref *ref, const er_standard *std, er_sinks *sks);
static er_status er_rms_check(const er_ref *ref, const er_standard *std) {
    return er__rmsnorm_module.check(ref, std);
}
static const er_op_module er_rms_module = ER_DEV_ROWS_MODULE("rmsnorm", er_rms_check, er_rms_covers);
#endif

static er_status er_rmsnorm_covers_device_run(er_report *rep, const er_tensor *x, const er_tensor *weight, double eps,
                                              const er_tensor *out, const er_standard *std, void *stream) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(x, "x");
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(std, "standard");
#ifndef ER_HAVE_CUDA
    er_ref *ref; /* the arguments' checks first, as with the toolkit */
    ER_RETURN_IF_ERROR(er_rmsnorm(&ref, x, weight, eps));
    er_ref_free(ref);
    (void)stream;
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    er_ref *ref; /* the shapes alone: its data pointers are the device's, which nothing on the host reads */
    ER_RETURN_IF_ERROR(er_rmsnorm(&ref, x, weight, eps));
    er_rms_arg arg = {x, weight, out, stream, 0, er_dev_keep_of(rep)};
    er_status st = er__covers_module(rep, &er_rms_module, ref, out, std, &arg);
    er_dev_keep_end(&arg.keep, rep, st);
    er_ref_free(ref);
    if (st != ER_OK || !arg.fallback) return st;
    er_report_clear(rep);
    return er_rms_covers_host(rep, x, weight, eps, out, std, stream);
#endif
}

er_status er_rmsnorm_covers_device(er_report *rep, const er_tensor *x, const er_tensor *weight, double eps,
                                   const er_tensor *out, const er_standard *std, void *stream) {
    er_status st = er_rmsnorm_covers_device_run(rep, x, weight, eps, out, std, stream);
    er__report_finish(rep, st);
    return st;
}

#ifdef ER_HAVE_CUDA
/* Whether the GPU path takes the check: rmsnorm's double case (er__rmsnorm_dev_takes) over contiguous views of fp32,
 * fp16 or bf16, the weight (if any) a contiguous vector of them too. */
static int er_rms_takes(const er_ref *ref, const er_rms_arg *arg, const er_standard *std) {
    int64_t n = er__rows(ref)->K;
    return er_dev_fmt(arg->x->format) >= 0 && er_dev_fmt(arg->out->format) >= 0 && er__row_major(arg->x) &&
           er__row_major(arg->out) &&
           (!arg->w || (er_dev_fmt(arg->w->format) >= 0 && (arg->w->shape[0] <= 1 || arg->w->strides[0] == 1))) &&
           n >= 1 && n < INT32_MAX && ref->n > 0 && er__rmsnorm_dev_takes(std);
}

/* The weights as doubles on the host, for the rows the host takes. */
typedef struct er_rms_op { const er_fmt_info *X; double *w; } er_rms_op;

/* rmsnorm's row function on the host (er_dev_rows_put). */
static er_status er_rms_put(const er_dev_rows *r, er_sink *sk, const int64_t *rows, int64_t np, const double *xs,
                            const double *x2s, const double *ys, int64_t only) {
    (void)x2s; /* one input */
    const er_rms_op *op = r->op;
    return er__rmsnorm_rows_put(r->ref, r->std, sk, op->X, op->w, rows, np, r->n, xs, ys, only);
}

/* The path's device buffers that er_rms_one reads. */
typedef struct er_rms_dev { er_devrms_consts c; double *drc; const void *w; } er_rms_dev;

/* The rows on the GPU: their sums of squares, the rows' constants on the host, the elements; the classes into the
 * report's array, the blocks' tallies and the rows left into r; the buffers er_rms_one reads into *d. */
static void er_rms_gpu(er_dev_rows *r, const er_rms_arg *arg, uint8_t *classes, er_rms_dev *d) {
    cudaStream_t s = r->s;
    int64_t n = r->n, rows = r->rows;
    er_sqwin_row *win = malloc(sizeof *win * (size_t)rows);
    double *rc = malloc(sizeof(double) * 4 * (size_t)rows);
    if (!win || !rc) r->st = er__fail(ER_ERR_NOMEM, "cannot allocate the constants of %lld rows", (long long)rows);
    er_devrms_consts hc = { er_dev_fmt(arg->x->format), arg->w ? er_dev_fmt(arg->w->format) : -1,
                            er_dev_fmt(arg->out->format), er__fmt(arg->out->format)->max, 0 };
    const char *what = NULL;
    hc.bug = er__rows_classic_bug(r->ref, 0, &what);
    er_sqwin_row *dwin = er_dev_alloc(&r->db, sizeof *dwin * (size_t)rows, s, &r->e);
    if (r->st == ER_OK && r->e == cudaSuccess) {
        int ec = er__devrms_sums(arg->x->data, hc.x_fmt, rows, n, r->blocks, dwin, s);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (r->st == ER_OK && r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(win, dwin, sizeof *win * (size_t)rows, cudaMemcpyDeviceToHost, s);
    if (r->st == ER_OK && r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
    if (r->st == ER_OK && r->e == cudaSuccess)
        r->st = er__rmsnorm_dev_consts(r->ref, r->std, er__fmt(arg->x->format), er__fmt(arg->out->format), win, rows,
                                       n, rc);
    er_dev_kio o;
    er_dev_kio_init(r, &o, rc, 4);
    *d = (er_rms_dev){ hc, o.drc, arg->w ? arg->w->data : NULL };
    if (r->st == ER_OK && r->e == cudaSuccess) {
        int ec = er__devrms_rows(arg->x->data, arg->w ? arg->w->data : NULL, arg->out->data, rows, n, &d->c, o.drc,
                                 r->blocks, o.dcl, o.dparts, o.dpend, o.dn, s);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (r->st == ER_OK) er_dev_rows_back(r, &o, classes);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s); /* rc is read by its copy until here */
    free(win);
    free(rc);
}

/* The widest set's entry on the GPU (er_dev_rows_one). */
static int er_rms_one(const er_dev_rows *r, int64_t idx, er_dev_cset *set) {
    const er_rms_dev *d = r->dev;
    return er__devrms_one(r->x->data, d->w, r->out->data, r->n, &d->c, d->drc, idx, set, r->s);
}

static er_status er_rms_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    er_rms_arg *arg = er__sinks_arg(sks);
    if (!er_rms_takes(ref, arg, std)) {
        arg->fallback = 1;
        er__sinks_decline(sks);
        return ER_OK;
    }
    int64_t n = er__rows(ref)->K;
    er_rms_op op = { er__fmt(arg->x->format), NULL };
    er_dev_rows r;
    er_dev_rows_init(&r, ref, std, arg->x, NULL, arg->out, n, arg->stream, er__dev_blocks(ref->n / n), er_rms_put, &op,
                     &arg->keep);
    /* the weights as doubles, for the rows the host takes */
    er_tensor hw;
    void *pw = NULL;
    if (r.st == ER_OK && arg->w)
        r.st = er_tensor_from_device(&hw, &pw, arg->w->format, 1, arg->w->shape, arg->w->strides, arg->w->data,
                                     arg->stream);
    if (r.st == ER_OK && arg->w) {
        op.w = malloc(sizeof(double) * (size_t)n);
        if (!op.w) r.st = er__fail(ER_ERR_NOMEM, "cannot allocate %lld weights", (long long)n);
        for (int64_t k = 0; op.w && k < n; k++) op.w[k] = er__load(&hw, k * hw.strides[0]);
    }
    free(pw);
    er_rms_dev dev;
    memset(&dev, 0, sizeof dev);
    if (r.st == ER_OK) {
        er_rms_gpu(&r, arg, er__sinks_classes(sks, 0), &dev);
        r.one = er_rms_one;
        r.dev = &dev;
    }
    er_status st = er_dev_rows_finish(&r, sks);
    free(op.w);
    return st;
}
#endif
