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
#include "cuda/devbufs.h"
#include "cuda/devrec.h"
#include "cuda/devsm.h"

/* The whole check on host copies of x and out. */
static er_status er_sm_covers_host(er_report *rep, const er_tensor *x, int dim, const er_tensor *out,
                                   const er_standard *std, void *stream) {
    er_tensor hx, ho;
    void *px = NULL, *po = NULL;
    er_status st = er_tensor_from_device(&hx, &px, x->format, x->ndim, x->shape, x->strides, x->data, stream);
    if (st == ER_OK)
        st = er_tensor_from_device(&ho, &po, out->format, out->ndim, out->shape, out->strides, out->data, stream);
    er_ref *ref = NULL;
    if (st == ER_OK) st = er_softmax(&ref, &hx, dim);
    if (st == ER_OK) st = er_covers(rep, ref, &ho, std);
    er_ref_free(ref);
    free(px);
    free(po);
    return st;
}

/* The device views and the stream; fallback is set where the GPU path does not apply. */
typedef struct er_sm_arg { const er_tensor *x, *out; void *stream; int fallback; } er_sm_arg;

static er_status er_sm_covers(const er_ref *ref, const er_standard *std, er_sinks *sks);
static er_status er_sm_check(const er_ref *ref, const er_standard *std) { return er__softmax_module.check(ref, std); }
static const char *const er_sm_names[1] = {"out"};
static const er_op_module er_sm_module = { .name = "softmax",
                                           .nout = 1,
                                           .out_names = er_sm_names,
                                           .out_shape = er__out_shape_same,
                                           .check = er_sm_check,
                                           .covers = er_sm_covers,
                                           .classic_bug = er__rows_classic_bug };
#endif

static er_status er_softmax_covers_device_run(er_report *rep, const er_tensor *x, int dim, const er_tensor *out,
                                              const er_standard *std, void *stream) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(x, "x");
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(std, "standard");
    ER_RETURN_IF_ERROR(er__tensor_check(x, "x"));
#ifndef ER_HAVE_CUDA
    (void)dim;
    (void)stream;
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    er_ref *ref; /* the shapes alone: its data pointer is the device's, which nothing on the host reads */
    ER_RETURN_IF_ERROR(er_softmax(&ref, x, dim));
    er_sm_arg arg = {x, out, stream, 0};
    er_status st = er__covers_module(rep, &er_sm_module, ref, out, std, &arg);
    er_ref_free(ref);
    if (st != ER_OK || !arg.fallback) return st;
    er_report_clear(rep);
    return er_sm_covers_host(rep, x, dim, out, std, stream);
#endif
}

er_status er_softmax_covers_device(er_report *rep, const er_tensor *x, int dim, const er_tensor *out,
                                   const er_standard *std, void *stream) {
    er_status st = er_softmax_covers_device_run(rep, x, dim, out, std, stream);
    er__report_finish(rep, st);
    return st;
}

#ifdef ER_HAVE_CUDA
/* One GPU check's state. */
typedef struct er_sm_run {
    const er_ref *ref;
    er_sm_arg *arg;
    cudaStream_t s;
    int64_t rows, n;
    int blocks;
    er_devbufs db;
    cudaError_t e;
    er_status st;
    const er_standard *std;
    er_dev_part *parts;         /* the blocks' tallies (host) */
    int64_t *pend, npend;         /* the rows the GPU left (host, sorted) */
} er_sm_run;

/* Whether the GPU path takes the check: softmax's main case in double (er__softmax_dev_plan) along the last dimension
 * of contiguous views, inputs and outputs of fp32, fp16 or bf16. */
static int er_sm_takes(const er_ref *ref, const er_sm_arg *arg, const er_standard *std, er_softmax_dev *d) {
    int64_t n = er__rows(ref)->K;
    return er_dev_fmt(arg->x->format) >= 0 && er_dev_fmt(arg->out->format) >= 0 &&
           er__rows(ref)->dim == ref->ndim - 1 && er__row_major(arg->x) && er__row_major(arg->out) && n >= 1 &&
           n < INT32_MAX && ref->n > 0 && er__softmax_dev_plan(std, er__fmt(arg->out->format), n, d);
}

/* The kernels' constants. */
static void er_sm_consts(const er_sm_run *r, const er_softmax_dev *d, er_devsm_consts *c) {
    const char *what = NULL;
    memset(c, 0, sizeof *c);
    c->U = d->U;
    c->exp_fast = d->exp_fast;
    c->div = d->div;
    c->c1 = d->c1;
    c->g = d->g;
    c->thr = d->thr;
    c->bug = er__rows_classic_bug(r->ref, 0, &what);
    c->x_fmt = er_dev_fmt(r->arg->x->format);
    c->out_fmt = er_dev_fmt(r->arg->out->format);
    c->omax = er__fmt(r->arg->out->format)->max;
    memcpy(c->exp_tlo, d->exp_tlo, sizeof c->exp_tlo);
    memcpy(c->exp_thi, d->exp_thi, sizeof c->exp_thi);
    c->exp_lh = d->exp_lh;
    c->exp_ll = d->exp_ll;
}

/* The report's classes array written once by the host's threads (each its own run of pages), while the GPU works:
 * its pages are then in place when the classes arrive, which a single thread's copy into fresh pages would fault in
 * one by one. */
typedef struct er_sm_fault_job { uint8_t *p; size_t len; } er_sm_fault_job;
static void *er_sm_fault_run(void *arg) {
    er_sm_fault_job *j = arg;
    memset(j->p, ER_PENDING, j->len);
    return NULL;
}
static void er_sm_prefault(uint8_t *classes, int64_t total) {
    int nt = er__num_threads(total);
    er_sm_fault_job jobs[ER_MAX_THREADS];
    for (int t = 0; t < nt; t++) {
        int64_t a = total * t / nt, b = total * (t + 1) / nt;
        jobs[t] = (er_sm_fault_job){ classes + a, (size_t)(b - a) };
    }
    er__run_jobs(jobs, sizeof jobs[0], nt, er_sm_fault_run);
}

/* The rows on the GPU: the classes into the report's array, the blocks' tallies and the rows left into r. */
static void er_sm_gpu(er_sm_run *r, const er_devsm_consts *hc, uint8_t *classes) {
    cudaStream_t s = r->s;
    int64_t n = r->n, total = r->rows * n;
    er_devsm_consts *dc = er_dev_alloc(&r->db, sizeof *dc, s, &r->e);
    double *scratch = er_dev_alloc(&r->db, sizeof(double) * 2 * (size_t)n * (size_t)r->blocks, s, &r->e);
    uint8_t *dcl = er_dev_alloc(&r->db, (size_t)total, s, &r->e);
    er_dev_part *dparts = er_dev_alloc(&r->db, sizeof *dparts * (size_t)r->blocks, s, &r->e);
    int64_t *dpend = er_dev_alloc(&r->db, sizeof(int64_t) * (size_t)r->rows, s, &r->e);
    unsigned long long *dn = er_dev_alloc(&r->db, sizeof *dn, s, &r->e), hn = 0;
    if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(dc, hc, sizeof *hc, cudaMemcpyHostToDevice, s);
    if (r->e == cudaSuccess) r->e = cudaMemsetAsync(dn, 0, sizeof *dn, s);
    if (r->e == cudaSuccess) {
        int ec = er__devsm_rows(r->arg->x->data, r->arg->out->data, r->rows, n, dc, r->blocks, scratch, dcl, dparts,
                                dpend, dn, s);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (r->e == cudaSuccess) er_sm_prefault(classes, total);
    /* the classes' pages locked while the GPU works, for their copy at full speed */
    int pinned =
        r->e == cudaSuccess && cudaHostRegister(classes, (size_t)total, cudaHostRegisterDefault) == cudaSuccess;
    if (!pinned) (void)cudaGetLastError();
    if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(classes, dcl, (size_t)total, cudaMemcpyDeviceToHost, s);
    if (r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(r->parts, dparts, sizeof *dparts * (size_t)r->blocks, cudaMemcpyDeviceToHost, s);
    if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(&hn, dn, sizeof hn, cudaMemcpyDeviceToHost, s);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
    if (pinned) cudaHostUnregister(classes);
    r->npend = (int64_t)hn;
    if (r->e == cudaSuccess && r->npend)
        r->e = cudaMemcpyAsync(r->pend, dpend, sizeof(int64_t) * (size_t)r->npend, cudaMemcpyDeviceToHost, s);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
    if (r->e == cudaSuccess) qsort(r->pend, (size_t)r->npend, sizeof(int64_t), er_dev_cmp_i64);
}

/* One thread's share of a chunk of rows: rows[p0 .. p1) (their values xs and outputs ys, n each) by the module's row
 * function, each element's set put into sk (put = 1), or the one element `only` given as the widest set's
 * candidate (put = 0). */
typedef struct er_sm_job {
    const er_sm_run *r;
    er_sink *sk;
    const int64_t *rows;
    const double *xs, *ys;
    int64_t p0, p1, only;
    int put;
    er_status st;
} er_sm_job;

static void *er_sm_job_run(void *arg) {
    er_sm_job *j = arg;
    int64_t n = j->r->n;
    j->st = er__softmax_rows_put(j->r->std, j->sk, j->rows + j->p0, j->p1 - j->p0, n, j->xs + j->p0 * n,
                                 j->ys + j->p0 * n, j->put ? -1 : j->only);
    if (j->p0 > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread (job 0 runs in the calling one) */
    return NULL;
}

/* The rows at a time gathered from the GPU (32 MiB of their values), and each chunk's threads. */
static int64_t er_sm_chunk(const er_sm_run *r) { return (INT64_C(1) << 21) / r->n > 0 ? (INT64_C(1) << 21) / r->n : 1; }
static int er_sm_threads(const er_sm_run *r, int64_t cn) {
    int nt = er__num_threads(cn * r->n * 256);
    return nt > cn ? (int)cn : nt;
}

/* Rows rows[0 .. np) gathered on the GPU in chunks, each chunk's rows in contiguous runs on the host's threads, into
 * the sinks' shares from *share on (put = 1; *share is moved past them), or the one element `only` into sink sk
 * (put = 0, np = 1). */
static void er_sm_rows_back(er_sm_run *r, er_sinks *sks, int *share, er_sink *sk, const int64_t *rows, int64_t np,
                            int put, int64_t only) {
    int64_t n = r->n, chunk = er_sm_chunk(r);
    if (chunk > np) chunk = np;
    double *xs = malloc(sizeof(double) * (size_t)(chunk * n)), *ys = malloc(sizeof(double) * (size_t)(chunk * n));
    int64_t *drows = er_dev_alloc(&r->db, sizeof(int64_t) * (size_t)chunk, r->s, &r->e);
    double *dx = er_dev_alloc(&r->db, sizeof(double) * (size_t)(chunk * n), r->s, &r->e);
    double *dy = er_dev_alloc(&r->db, sizeof(double) * (size_t)(chunk * n), r->s, &r->e);
    if (!xs || !ys) r->st = er__fail(ER_ERR_NOMEM, "cannot allocate %lld softmax rows of %lld", (long long)chunk,
                                     (long long)n);
    for (int64_t c0 = 0; c0 < np && r->st == ER_OK && r->e == cudaSuccess; c0 += chunk) {
        int64_t cn = np - c0 < chunk ? np - c0 : chunk;
        size_t bytes = sizeof(double) * (size_t)(cn * n);
        r->e = cudaMemcpyAsync(drows, rows + c0, sizeof(int64_t) * (size_t)cn, cudaMemcpyHostToDevice, r->s);
        if (r->e == cudaSuccess) {
            int ec = er__dev_gather(drows, cn, r->arg->x->data, er_dev_fmt(r->arg->x->format), r->arg->out->data,
                                      er_dev_fmt(r->arg->out->format), n, dx, dy, r->s);
            if (ec) r->e = (cudaError_t)ec;
        }
        if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(xs, dx, bytes, cudaMemcpyDeviceToHost, r->s);
        if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(ys, dy, bytes, cudaMemcpyDeviceToHost, r->s);
        if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(r->s);
        if (r->e != cudaSuccess) break;
        int nt = put ? er_sm_threads(r, cn) : 1;
        er_sm_job jobs[ER_MAX_THREADS];
        for (int t = 0; t < nt; t++)
            jobs[t] = (er_sm_job){ r, put ? er__sinks_at(sks, *share + t, 0) : sk, rows + c0, xs, ys, cn * t / nt,
                                   cn * (t + 1) / nt, only, put, ER_OK };
        er__run_jobs(jobs, sizeof jobs[0], nt, er_sm_job_run);
        if (put) *share += nt;
        for (int t = 0; t < nt && r->st == ER_OK; t++) r->st = jobs[t].st;
    }
    free(xs);
    free(ys);
}

/* The GPU path's covers: the rows on the GPU; the rows it leaves, in order, by the module's row function on the host's
 * threads, and the widest decided set's entry. */
static er_status er_sm_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    er_sm_arg *arg = er__sinks_arg(sks);
    er_sm_run r;
    memset(&r, 0, sizeof r);
    r.ref = ref;
    r.arg = arg;
    r.s = (cudaStream_t)arg->stream;
    r.e = cudaSuccess;
    r.n = er__rows(ref)->K;
    r.rows = r.n ? ref->n / r.n : 0;
    r.std = std;
    er_softmax_dev d;
    if (!er_sm_takes(ref, arg, std, &d)) {
        arg->fallback = 1;
        er__sinks_decline(sks);
        return ER_OK;
    }
    /* at most 256 MiB of scratch (two doubles per element of each block's row) but for one block */
    r.blocks = er__dev_blocks(r.rows);
    if ((double)r.blocks * 16.0 * (double)r.n > 0x1p28) r.blocks = (int)(0x1p28 / (16.0 * (double)r.n)) + 1;
    if (r.blocks > r.rows) r.blocks = (int)r.rows;
    r.parts = malloc(sizeof *r.parts * (size_t)r.blocks);
    r.pend = malloc(sizeof(int64_t) * (size_t)r.rows);
    if (!r.parts || !r.pend)
        r.st = er__fail(ER_ERR_NOMEM, "cannot allocate the tallies of %lld rows", (long long)r.rows);
    if (r.st == ER_OK) {
        er_devsm_consts c;
        er_sm_consts(&r, &d, &c);
        er_sm_gpu(&r, &c, er__sinks_classes(sks, 0));
    }
    /* the shares: one for the GPU's tally and the widest set's entry, then each chunk's threads for the rows left */
    int shares = 1;
    for (int64_t c0 = 0, chunk = er_sm_chunk(&r); c0 < r.npend; c0 += chunk)
        shares += er_sm_threads(&r, r.npend - c0 < chunk ? r.npend - c0 : chunk);
    if (r.st == ER_OK && r.e == cudaSuccess) r.st = er__sinks_open(sks, shares);
    if (r.st == ER_OK && r.e == cudaSuccess) {
        er_sink *s0 = er__sinks_at(sks, 0, 0);
        int64_t widx = er_dev_tally(r.parts, r.blocks, s0), wrow = widx / r.n;
        int share = 1;
        er_sm_rows_back(&r, sks, &share, NULL, r.pend, r.npend, 1, -1);
        if (widx >= 0 && r.st == ER_OK && r.e == cudaSuccess) er_sm_rows_back(&r, sks, &share, s0, &wrow, 1, 0, widx);
    }
    er_dev_free_all(&r.db, r.s);
    cudaError_t e2 = cudaStreamSynchronize(r.s);
    if (r.e == cudaSuccess) r.e = e2;
    free(r.parts);
    free(r.pend);
    er_status st = r.st;
    if (st == ER_OK && r.e != cudaSuccess)
        st = er__fail(ER_ERR_DEVICE, "a CUDA call of the GPU softmax path failed: %s (%s)", cudaGetErrorString(r.e),
                      cudaGetErrorName(r.e));
    return st;
}
#endif
