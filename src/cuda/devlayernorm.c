/* devlayernorm.c: er_layernorm_covers_device, layernorm's check of y with its input, weight, bias and output in device
 * memory (docs/algorithms/layernorm.md, On the GPU): each row's exact sums on the GPU (devln.cu), the row's constants
 * from them on the host (er__layernorm_dev_consts), the elements on the GPU; the rows it leaves and the widest set's
 * entry by the layernorm module's own row function on the host, through the engine's sinks (devrows.c). What the GPU
 * path does not take runs on host copies. */
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
#include "cuda/devln.h"

/* The device views and the op's numbers; fallback is set where the GPU path does not apply. */
typedef struct er_ln_arg {
    const er_tensor *x, *w, *b, *out;
    int nd;
    double eps;
    void *stream;
    int fallback;
    er_dev_keep keep;
} er_ln_arg;

/* The whole check on host copies of x, the weight, the bias and out. */
static er_status er_ln_covers_host(er_report *rep, const er_ln_arg *a, const er_standard *std) {
    const er_tensor *dv[4] = {a->x, a->w, a->b, a->out};
    er_tensor hv[4];
    void *hp[4] = {NULL, NULL, NULL, NULL};
    er_status st = ER_OK;
    for (int i = 0; i < 4 && st == ER_OK; i++)
        if (dv[i])
            st = er_tensor_from_device(&hv[i], &hp[i], dv[i]->format, dv[i]->ndim, dv[i]->shape, dv[i]->strides,
                                       dv[i]->data, a->stream);
    er_ref *ref = NULL;
    if (st == ER_OK) st = er_layernorm(&ref, &hv[0], a->nd, a->w ? &hv[1] : NULL, a->b ? &hv[2] : NULL, a->eps);
    if (st == ER_OK) st = er_covers(rep, ref, &hv[3], std);
    er_ref_free(ref);
    for (int i = 0; i < 4; i++) free(hp[i]);
    return st;
}

static er_status er_ln_dev_covers(const er_ref *ref, const er_standard *std, er_sinks *sks);
static er_status er_ln_dev_check(const er_ref *ref, const er_standard *std) {
    return er__layernorm_module.check(ref, std);
}
static const er_op_module er_ln_dev_module = ER_DEV_ROWS_MODULE("layernorm", er_ln_dev_check, er_ln_dev_covers);
#endif

static er_status er_layernorm_covers_device_run(er_report *rep, const er_tensor *x, int normalized_ndim,
                                                const er_tensor *weight, const er_tensor *bias, double eps,
                                                const er_tensor *out, const er_standard *std, void *stream) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(x, "x");
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(std, "standard");
    er_ref *ref; /* the shapes alone: its data pointers are the device's, which nothing on the host reads */
    ER_RETURN_IF_ERROR(er_layernorm(&ref, x, normalized_ndim, weight, bias, eps));
#ifndef ER_HAVE_CUDA
    er_ref_free(ref); /* the arguments' checks first, as with the toolkit */
    (void)out;
    (void)stream;
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    er_ln_arg arg = {x, weight, bias, out, normalized_ndim, eps, stream, 0, er_dev_keep_of(rep)};
    er_status st = er__covers_module(rep, &er_ln_dev_module, ref, out, std, &arg);
    er_dev_keep_end(&arg.keep, rep, st);
    er_ref_free(ref);
    if (st != ER_OK || !arg.fallback) return st;
    er_report_clear(rep);
    return er_ln_covers_host(rep, &arg, std);
#endif
}

er_status er_layernorm_covers_device(er_report *rep, const er_tensor *x, int normalized_ndim, const er_tensor *weight,
                                     const er_tensor *bias, double eps, const er_tensor *out, const er_standard *std,
                                     void *stream) {
    er_status st = er_layernorm_covers_device_run(rep, x, normalized_ndim, weight, bias, eps, out, std, stream);
    er__report_finish(rep, st);
    return st;
}

#ifdef ER_HAVE_CUDA
/* A weight or bias the GPU reads: a row-major view of fp32, fp16 or bf16 (or none). */
static int er_ln_vec_ok(const er_tensor *t) { return !t || (er_dev_fmt(t->format) >= 0 && er__row_major(t)); }

/* Whether the GPU path takes the check: layernorm's fp32 case (er__layernorm_dev_takes) over row-major views of fp32,
 * fp16 or bf16. */
static int er_ln_takes(const er_ref *ref, const er_ln_arg *arg, const er_standard *std) {
    int64_t n = er__rows(ref)->K;
    return er_dev_fmt(arg->x->format) >= 0 && er_dev_fmt(arg->out->format) >= 0 && er__row_major(arg->x) &&
           er__row_major(arg->out) && er_ln_vec_ok(arg->w) && er_ln_vec_ok(arg->b) && n >= 1 && n < INT32_MAX &&
           ref->n > 0 && er__layernorm_dev_takes(std);
}

/* The weight and bias as doubles on the host (NULL: none), for the rows the host takes. */
typedef struct er_ln_op { double *w, *b; } er_ln_op;

/* layernorm's row function on the host (er_dev_rows_put). */
static er_status er_ln_put(const er_dev_rows *r, er_sink *sk, const int64_t *rows, int64_t np, const double *xs,
                           const double *ys, int64_t only) {
    const er_ln_op *op = r->op;
    return er__layernorm_rows_put(r->ref, r->std, sk, op->w, op->b, rows, np, r->n, xs, ys, only);
}

/* A device vector of n values as doubles into *h (t NULL: *h stays NULL); *finite cleared where one is NaN or
 * infinite. */
static er_status er_ln_vec_back(const er_tensor *t, int64_t n, void *stream, double **h, int *finite) {
    if (!t) return ER_OK;
    er_tensor ht;
    void *p = NULL;
    ER_RETURN_IF_ERROR(er_tensor_from_device(&ht, &p, t->format, t->ndim, t->shape, t->strides, t->data, stream));
    *h = malloc(sizeof(double) * (size_t)n);
    if (*h) er__decode_rowmajor(&ht, *h);
    free(p);
    if (!*h) return er__fail(ER_ERR_NOMEM, "cannot allocate %lld weights", (long long)n);
    for (int64_t k = 0; k < n; k++) *finite &= isfinite((*h)[k]) != 0;
    return ER_OK;
}

/* The path's device buffers that er_ln_one reads. */
typedef struct er_ln_dev { er_devln_consts *dc; double *drc; const void *w, *b; } er_ln_dev;

/* The rows on the GPU: their sums, the rows' constants on the host, the elements; the classes into the report's
 * array, the blocks' tallies and the rows left into r; the buffers er_ln_one reads into *d. */
static void er_ln_gpu(er_dev_rows *r, const er_ln_arg *arg, uint8_t *classes, er_ln_dev *d) {
    cudaStream_t s = r->s;
    int64_t n = r->n, rows = r->rows;
    er_ln_sums *sums = malloc(sizeof *sums * (size_t)rows);
    double *rc = malloc(sizeof(double) * 8 * (size_t)rows);
    if (!sums || !rc) r->st = er__fail(ER_ERR_NOMEM, "cannot allocate the constants of %lld rows", (long long)rows);
    er_devln_consts hc = { er_dev_fmt(arg->x->format), arg->w ? er_dev_fmt(arg->w->format) : -1,
                           arg->b ? er_dev_fmt(arg->b->format) : -1, er_dev_fmt(arg->out->format),
                           er__fmt(arg->out->format)->max, 0 };
    const char *what = NULL;
    hc.bug = er__rows_classic_bug(r->ref, 0, &what);
    er_ln_sums *dsums = er_dev_alloc(&r->db, sizeof *dsums * (size_t)rows, s, &r->e);
    if (r->st == ER_OK && r->e == cudaSuccess) {
        int ec = er__devln_sums(arg->x->data, hc.x_fmt, rows, n, r->blocks, dsums, s);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (r->st == ER_OK && r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(sums, dsums, sizeof *sums * (size_t)rows, cudaMemcpyDeviceToHost, s);
    if (r->st == ER_OK && r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
    if (r->st == ER_OK && r->e == cudaSuccess) r->st = er__layernorm_dev_consts(r->ref, r->std, sums, rows, n, rc);
    er_devln_consts *dc = er_dev_alloc(&r->db, sizeof *dc, s, &r->e);
    er_dev_kio o;
    er_dev_kio_init(r, &o, rc, 8);
    *d = (er_ln_dev){ dc, o.drc, arg->w ? arg->w->data : NULL, arg->b ? arg->b->data : NULL };
    if (r->st == ER_OK && r->e == cudaSuccess) r->e = cudaMemcpyAsync(dc, &hc, sizeof hc, cudaMemcpyHostToDevice, s);
    if (r->st == ER_OK && r->e == cudaSuccess) {
        int ec = er__devln_rows(arg->x->data, arg->w ? arg->w->data : NULL, arg->b ? arg->b->data : NULL,
                                arg->out->data, rows, n, dc, o.drc, r->blocks, o.dcl, o.dparts, o.dpend, o.dn, s);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (r->st == ER_OK) er_dev_rows_back(r, &o, classes);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s); /* rc is read by its copy until here */
    free(sums);
    free(rc);
}

/* The widest set's entry on the GPU (er_dev_rows_one). */
static int er_ln_one(const er_dev_rows *r, int64_t idx, er_dev_cset *set) {
    const er_ln_dev *d = r->dev;
    return er__devln_one(r->x->data, d->w, d->b, r->out->data, r->n, d->dc, d->drc, idx, set, r->s);
}

static er_status er_ln_dev_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    er_ln_arg *arg = er__sinks_arg(sks);
    int64_t n = er__rows(ref)->K;
    er_ln_op op = { NULL, NULL };
    int takes = er_ln_takes(ref, arg, std);
    /* the weight and bias for the rows the host takes; one NaN or infinity among them makes every row's y
     * unrestricted (er__layernorm_row): the host's path */
    er_status st = takes ? er_ln_vec_back(arg->w, n, arg->stream, &op.w, &takes) : ER_OK;
    if (st == ER_OK && takes) st = er_ln_vec_back(arg->b, n, arg->stream, &op.b, &takes);
    if (st == ER_OK && takes) {
        er_dev_rows r;
        er_dev_rows_init(&r, ref, std, arg->x, arg->out, arg->stream, er__dev_blocks(ref->n / n), er_ln_put, &op,
                         &arg->keep);
        er_ln_dev dev = { NULL, NULL, NULL, NULL };
        if (r.st == ER_OK) {
            er_ln_gpu(&r, arg, er__sinks_classes(sks, 0), &dev);
            r.one = er_ln_one;
            r.dev = &dev;
        }
        st = er_dev_rows_finish(&r, sks);
    } else if (st == ER_OK) {
        arg->fallback = 1;
        er__sinks_decline(sks);
    }
    free(op.w);
    free(op.b);
    return st;
}
#endif
