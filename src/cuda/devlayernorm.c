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
    void *hp[4];
    er_status st = er_dev_host_views(4, dv, hv, hp, a->stream);
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
                           const double *x2s, const double *ys, int64_t only) {
    (void)x2s; /* one input */
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
typedef struct er_ln_dev { er_devln_consts c; double *drc; const void *w, *b; } er_ln_dev;

/* The chunks of rows the check runs in, at most ER_LN_CHUNKS of at least 1024 rows: while the host computes a chunk's
 * rows' constants, the GPU runs the sums of the chunks after it and the elements of those before it. */
enum { ER_LN_CHUNKS = 4 };
static int er_ln_chunks(int64_t rows) {
    int64_t c = rows / 1024;
    return c < 1 ? 1 : c > ER_LN_CHUNKS ? ER_LN_CHUNKS : (int)c;
}

/* The rows on the GPU in nch chunks of bpc blocks each: every chunk's sums, copied back behind them; then each
 * chunk's rows' constants on the host as its sums arrive, copied up, and its elements; the classes into the report's
 * array, the blocks' tallies and the rows left into r; the buffers er_ln_one reads into *d. */
static void er_ln_gpu(er_dev_rows *r, const er_ln_arg *arg, uint8_t *classes, er_ln_dev *d, int nch, int bpc) {
    cudaStream_t s = r->s;
    int64_t n = r->n, rows = r->rows;
    er_ln_sums *sums = NULL;
    double *rc = NULL;
    cudaEvent_t ev[ER_LN_CHUNKS] = {NULL};
    er_devln_consts hc = { er_dev_fmt(arg->x->format), arg->w ? er_dev_fmt(arg->w->format) : -1,
                           arg->b ? er_dev_fmt(arg->b->format) : -1, er_dev_fmt(arg->out->format),
                           er__fmt(arg->out->format)->max, 0 };
    const char *what = NULL;
    hc.bug = er__rows_classic_bug(r->ref, 0, &what);
    size_t esz = hc.x_fmt == 0 ? 4 : 2;
    /* pinned where CUDA gives them: the copies run behind the kernels without holding the host */
    int psums = 0, prc = 0;
    sums = er_host_buf_get(sizeof *sums * (size_t)rows, &psums);
    rc = er_host_buf_get(sizeof(double) * 8 * (size_t)rows, &prc);
    if (!sums || !rc) r->st = er__fail(ER_ERR_NOMEM, "cannot allocate the row sums of %lld rows", (long long)rows);
    er_ln_sums *dsums = er_dev_alloc(&r->db, sizeof *dsums * (size_t)rows, s, &r->e);
    double *drc = er_dev_alloc(&r->db, sizeof(double) * 8 * (size_t)rows, s, &r->e);
    er_dev_kio o;
    er_dev_kio_init(r, &o, NULL, 0);
    *d = (er_ln_dev){ hc, drc, arg->w ? arg->w->data : NULL, arg->b ? arg->b->data : NULL };
    for (int c = 0; c < nch && r->st == ER_OK && r->e == cudaSuccess; c++) {
        int64_t r0 = rows * c / nch, r1 = rows * (c + 1) / nch;
        int ec = er__devln_sums((const char *)arg->x->data + (size_t)(r0 * n) * esz, hc.x_fmt, r1 - r0, n, bpc,
                                dsums + r0, s);
        r->e = ec ? (cudaError_t)ec : cudaMemcpyAsync(sums + r0, dsums + r0, sizeof *sums * (size_t)(r1 - r0),
                                                      cudaMemcpyDeviceToHost, s);
        if (r->e == cudaSuccess) r->e = cudaEventCreateWithFlags(&ev[c], cudaEventDisableTiming);
        if (r->e == cudaSuccess) r->e = cudaEventRecord(ev[c], s);
    }
    for (int c = 0; c < nch && r->st == ER_OK && r->e == cudaSuccess; c++) {
        int64_t r0 = rows * c / nch, r1 = rows * (c + 1) / nch;
        r->e = cudaEventSynchronize(ev[c]);
        if (r->e == cudaSuccess) r->st = er__layernorm_dev_consts(r->ref, r->std, sums + r0, r1 - r0, n, rc + 8 * r0);
        if (r->st == ER_OK && r->e == cudaSuccess)
            r->e = cudaMemcpyAsync(drc + 8 * r0, rc + 8 * r0, sizeof(double) * 8 * (size_t)(r1 - r0),
                                   cudaMemcpyHostToDevice, s);
        if (r->st == ER_OK && r->e == cudaSuccess) {
            int ec = er__devln_rows(arg->x->data, arg->w ? arg->w->data : NULL, arg->b ? arg->b->data : NULL,
                                    arg->out->data, r0, r1 - r0, n, &d->c, drc, bpc, o.dcl, o.dparts + c * bpc, o.dpend,
                                    o.dn, s);
            if (ec) r->e = (cudaError_t)ec;
        }
    }
    if (r->st == ER_OK) er_dev_rows_back(r, &o, classes);
    cudaError_t e2 = cudaStreamSynchronize(s); /* sums and rc are the copies' until here */
    if (r->e == cudaSuccess) r->e = e2;
    for (int c = 0; c < nch; c++)
        if (ev[c]) cudaEventDestroy(ev[c]);
    er_host_buf_put(sums, psums);
    er_host_buf_put(rc, prc);
}

/* The widest set's entry on the GPU (er_dev_rows_one). */
static int er_ln_one(const er_dev_rows *r, int64_t idx, er_dev_cset *set) {
    const er_ln_dev *d = r->dev;
    return er__devln_one(r->x->data, d->w, d->b, r->out->data, r->n, &d->c, d->drc, idx, set, r->s);
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
        int64_t rows = ref->n / n;
        int nch = er_ln_chunks(rows), bpc = er__dev_blocks(rows / nch); /* each chunk holds at least bpc rows */
        er_dev_rows_init(&r, ref, std, arg->x, NULL, arg->out, er__rows(ref)->K, arg->stream, nch * bpc, er_ln_put,
                         &op, &arg->keep);
        er_ln_dev dev;
        memset(&dev, 0, sizeof dev);
        if (r.st == ER_OK) {
            er_ln_gpu(&r, arg, er__sinks_classes(sks, 0), &dev, nch, bpc);
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
