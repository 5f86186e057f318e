/* devrows.c: the host's side of the row paths on the GPU (devrows.h): the classes and tallies back from the GPU, the
 * rows it leaves gathered in chunks and run by the op's row function on the host's threads, the widest decided set's
 * entry, each through the engine's sinks (src/ops/module.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include <exactref/cuda.h>
#include "ops/modkit.h"
#include "ops/ref_internal.h"

#ifdef ER_HAVE_CUDA
#include "cuda/devrows.h"

void er_dev_rows_init(er_dev_rows *r, const er_ref *ref, const er_standard *std, const er_tensor *x,
                      const er_tensor *x2, const er_tensor *out, int64_t n, void *stream, int blocks,
                      er_dev_rows_put put, const void *op, er_dev_keep *keep) {
    memset(r, 0, sizeof *r);
    r->keep = keep && keep->want ? keep : NULL;
    r->ref = ref;
    r->std = std;
    r->x = x;
    r->x2 = x2;
    r->out = out;
    r->s = (cudaStream_t)stream;
    r->e = cudaSuccess;
    r->n = n;
    r->rows = r->n ? ref->n / r->n : 0;
    r->blocks = blocks > r->rows ? (int)r->rows : blocks;
    r->put = put;
    r->op = op;
    r->parts = malloc(sizeof *r->parts * (size_t)(r->blocks > 0 ? r->blocks : 1));
    r->pend = malloc(sizeof(int64_t) * (size_t)(r->rows > 0 ? r->rows : 1));
    if (!r->parts || !r->pend)
        r->st = er__fail(ER_ERR_NOMEM, "cannot allocate the tallies of %lld rows", (long long)r->rows);
}

void er_dev_kio_init(er_dev_rows *r, er_dev_kio *o, const double *rc, int k) {
    cudaStream_t s = r->s;
    memset(o, 0, sizeof *o);
    if (rc) o->drc = er_dev_alloc(&r->db, sizeof(double) * (size_t)k * (size_t)r->rows, s, &r->e);
    if (!r->keep) o->dcl = er_dev_alloc(&r->db, (size_t)(r->rows * r->n), s, &r->e);
    else if (r->e == cudaSuccess && !r->keep->dcl) r->e = er_dev_keep_alloc(r->keep, r->rows * r->n, s);
    if (r->keep) o->dcl = r->keep->dcl;
    o->dparts = er_dev_alloc(&r->db, sizeof *o->dparts * (size_t)r->blocks, s, &r->e);
    o->dpend = er_dev_alloc(&r->db, sizeof(int64_t) * (size_t)r->rows, s, &r->e);
    o->dn = er_dev_alloc(&r->db, sizeof *o->dn, s, &r->e);
    if (rc && r->st == ER_OK && r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(o->drc, rc, sizeof(double) * (size_t)k * (size_t)r->rows, cudaMemcpyHostToDevice, s);
    if (r->st == ER_OK && r->e == cudaSuccess) r->e = cudaMemsetAsync(o->dn, 0, sizeof *o->dn, s);
}

void er_dev_rows_back(er_dev_rows *r, const er_dev_kio *o, uint8_t *classes) {
    const uint8_t *dcl = o->dcl;
    const er_dev_part *dparts = o->dparts;
    const int64_t *dpend = o->dpend;
    const unsigned long long *dn = o->dn;
    cudaStream_t s = r->s;
    int64_t total = r->rows * r->n;
    unsigned long long hn = 0;
    int copy = !r->keep, locked = 0;
    /* the classes' pages faulted in and locked while the GPU works */
    if (copy && r->e == cudaSuccess) locked = er_dev_lock(classes, (size_t)total, 1);
    if (copy && r->e == cudaSuccess) r->e = cudaMemcpyAsync(classes, dcl, (size_t)total, cudaMemcpyDeviceToHost, s);
    if (r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(r->parts, dparts, sizeof *dparts * (size_t)r->blocks, cudaMemcpyDeviceToHost, s);
    if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(&hn, dn, sizeof hn, cudaMemcpyDeviceToHost, s);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
    er_dev_unlock(classes, locked);
    r->npend = (int64_t)hn;
    if (r->e == cudaSuccess && r->npend)
        r->e = cudaMemcpyAsync(r->pend, dpend, sizeof(int64_t) * (size_t)r->npend, cudaMemcpyDeviceToHost, s);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
    if (r->e == cudaSuccess) qsort(r->pend, (size_t)r->npend, sizeof(int64_t), er_dev_cmp_i64);
}

/* One thread's share of a chunk of rows: rows[p0 .. p1) (their values xs and outputs ys, n each) by the op's row
 * function, each element's set put into sk (put = 1), or the one element `only` given as the widest set's
 * candidate (put = 0). */
typedef struct er_dr_job {
    const er_dev_rows *r;
    er_sink *sk;
    const int64_t *rows;
    const double *xs, *x2s, *ys;
    int64_t p0, p1, only;
    int put;
    er_status st;
} er_dr_job;

static void *er_dr_job_run(void *arg) {
    er_dr_job *j = arg;
    int64_t n = j->r->n;
    j->st = j->r->put(j->r, j->sk, j->rows + j->p0, j->p1 - j->p0, j->xs + j->p0 * n,
                      j->x2s ? j->x2s + j->p0 * n : NULL, j->ys + j->p0 * n, j->put ? -1 : j->only);
    if (j->p0 > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread (job 0 runs in the calling one) */
    return NULL;
}

/* The rows at a time gathered from the GPU (32 MiB of their values), and each chunk's threads. */
static int64_t er_dr_chunk(const er_dev_rows *r) {
    return (INT64_C(1) << 21) / r->n > 0 ? (INT64_C(1) << 21) / r->n : 1;
}
static int er_dr_threads(const er_dev_rows *r, int64_t cn) {
    int nt = er__num_threads(cn * r->n * 256);
    return nt > cn ? (int)cn : nt;
}

/* Rows rows[0 .. np) gathered on the GPU in chunks, each chunk's rows in contiguous runs on the host's threads, into
 * the sinks' shares from *share on (put = 1; *share is moved past them), or the one element `only` into sink sk
 * (put = 0, np = 1). */
static void er_dr_host_rows(er_dev_rows *r, er_sinks *sks, int *share, er_sink *sk, const int64_t *rows, int64_t np,
                            int put, int64_t only) {
    if (np <= 0) return;
    int64_t n = r->n, chunk = er_dr_chunk(r);
    if (chunk > np) chunk = np;
    /* pinned where CUDA gives them: pageable copies of 18 rows of 16384 (2.4 MB each way) took 1.1 ms to 1.4 ms */
    int px = 0, py = 0, px2 = 0;
    double *xs = er_host_buf_get(sizeof(double) * (size_t)(chunk * n), &px),
           *ys = er_host_buf_get(sizeof(double) * (size_t)(chunk * n), &py),
           *x2s = r->x2 ? er_host_buf_get(sizeof(double) * (size_t)(chunk * n), &px2) : NULL;
    int64_t *drows = er_dev_alloc(&r->db, sizeof(int64_t) * (size_t)chunk, r->s, &r->e);
    double *dx = er_dev_alloc(&r->db, sizeof(double) * (size_t)(chunk * n), r->s, &r->e);
    double *dy = er_dev_alloc(&r->db, sizeof(double) * (size_t)(chunk * n), r->s, &r->e);
    double *dx2 = r->x2 ? er_dev_alloc(&r->db, sizeof(double) * (size_t)(chunk * n), r->s, &r->e) : NULL;
    if (!xs || !ys || (r->x2 && !x2s))
        r->st = er__fail(ER_ERR_NOMEM, "cannot allocate %lld rows of %lld", (long long)chunk, (long long)n);
    for (int64_t c0 = 0; c0 < np && r->st == ER_OK && r->e == cudaSuccess; c0 += chunk) {
        int64_t cn = np - c0 < chunk ? np - c0 : chunk;
        size_t bytes = sizeof(double) * (size_t)(cn * n);
        r->e = cudaMemcpyAsync(drows, rows + c0, sizeof(int64_t) * (size_t)cn, cudaMemcpyHostToDevice, r->s);
        if (r->e == cudaSuccess) {
            int ec = er__dev_gather(drows, cn, r->x->data, er_dev_fmt(r->x->format), r->out->data,
                                      er_dev_fmt(r->out->format), n, dx, dy, r->s);
            if (ec) r->e = (cudaError_t)ec;
        }
        if (r->e == cudaSuccess && r->x2) { /* the second input's rows (out's gathered again: the kernel's pair) */
            int ec = er__dev_gather(drows, cn, r->x2->data, er_dev_fmt(r->x2->format), r->out->data,
                                    er_dev_fmt(r->out->format), n, dx2, dy, r->s);
            if (ec) r->e = (cudaError_t)ec;
        }
        if (r->e == cudaSuccess && r->x2) r->e = cudaMemcpyAsync(x2s, dx2, bytes, cudaMemcpyDeviceToHost, r->s);
        if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(xs, dx, bytes, cudaMemcpyDeviceToHost, r->s);
        if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(ys, dy, bytes, cudaMemcpyDeviceToHost, r->s);
        if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(r->s);
        if (r->e != cudaSuccess) break;
        int nt = put ? er_dr_threads(r, cn) : 1;
        er_dr_job jobs[ER_MAX_THREADS];
        for (int t = 0; t < nt; t++)
            jobs[t] = (er_dr_job){ r, put ? er__sinks_at(sks, *share + t, 0) : sk, rows + c0, xs, x2s, ys,
                                   cn * t / nt, cn * (t + 1) / nt, only, put, ER_OK };
        er__run_jobs(jobs, sizeof jobs[0], nt, er_dr_job_run);
        if (put) *share += nt;
        for (int t = 0; t < nt && r->st == ER_OK; t++) r->st = jobs[t].st;
    }
    (void)cudaStreamSynchronize(r->s); /* no copy into them still queued (after an error) when they go back */
    er_host_buf_put(xs, px);
    er_host_buf_put(ys, py);
    if (x2s) er_host_buf_put(x2s, px2);
}

/* Where the classes stay on the device: those the host wrote for the rows the GPU left, copied up over the GPU's
 * (runs of consecutive rows at once). */
static void er_dr_keep_rows(er_dev_rows *r, const uint8_t *classes) {
    for (int64_t i = 0, j; i < r->npend && r->e == cudaSuccess; i = j) {
        for (j = i + 1; j < r->npend && r->pend[j] == r->pend[j - 1] + 1; j++) {}
        size_t at = (size_t)(r->pend[i] * r->n), len = (size_t)((j - i) * r->n);
        r->e = cudaMemcpyAsync(r->keep->dcl + at, classes + at, len, cudaMemcpyHostToDevice, r->s);
    }
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(r->s);
}

/* Element idx's set and output by the op's one-element kernel into *c and *y; 0 where r has none, it did not decide
 * the element or a CUDA call failed (r->e). */
static int er_dr_one(er_dev_rows *r, int64_t idx, er_cset *c, double *y) {
    er_dev_cset h = {0, 0, 0, 0, 0, 0};
    if (!r->one) return 0;
    er_dev_cset *d = er_dev_alloc(&r->db, sizeof *d, r->s, &r->e);
    if (r->e == cudaSuccess) {
        int ec = r->one(r, idx, d);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, r->s);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(r->s);
    if (r->e != cudaSuccess || !h.ok) return 0;
    *c = (er_cset){ .lo = h.lo, .hi = h.hi, .rounded = h.rounded, .exact = h.exact };
    *y = h.y;
    return 1;
}

er_status er_dev_host_views(int k, const er_tensor *const *v, er_tensor *h, void **bufs, void *stream) {
    er_status st = ER_OK;
    for (int i = 0; i < k; i++) {
        bufs[i] = NULL;
        if (st == ER_OK && v[i])
            st = er_tensor_from_device(&h[i], &bufs[i], v[i]->format, v[i]->ndim, v[i]->shape, v[i]->strides,
                                       v[i]->data, stream);
    }
    return st;
}

er_status er_dev_rows_finish(er_dev_rows *r, er_sinks *sks) {
    /* the shares: one for the GPU's tally and the widest set's entry, then each chunk's threads for the rows left */
    int shares = 1;
    for (int64_t c0 = 0, chunk = er_dr_chunk(r); c0 < r->npend; c0 += chunk)
        shares += er_dr_threads(r, r->npend - c0 < chunk ? r->npend - c0 : chunk);
    if (r->st == ER_OK && r->e == cudaSuccess) r->st = er__sinks_open(sks, shares);
    if (r->st == ER_OK && r->e == cudaSuccess) {
        er_sink *s0 = er__sinks_at(sks, 0, 0);
        int64_t widx = er_dev_tally(r->parts, r->blocks, s0), wrow = widx / r->n;
        int share = 1;
        uint8_t *classes = er__sinks_classes(sks, 0);
        er_dr_host_rows(r, sks, &share, NULL, r->pend, r->npend, 1, -1);
        if (r->keep && r->st == ER_OK) er_dr_keep_rows(r, classes);
        /* the widest set's entry reads its element's class */
        if (r->keep && widx >= 0 && r->st == ER_OK && r->e == cudaSuccess)
            r->e = cudaMemcpy(classes + widx, r->keep->dcl + widx, 1, cudaMemcpyDeviceToHost);
        if (widx >= 0 && r->st == ER_OK && r->e == cudaSuccess) {
            er_cset c;
            double y;
            if (er_dr_one(r, widx, &c, &y)) er__sink_widest(s0, widx, &c, y);
            else if (r->e == cudaSuccess) er_dr_host_rows(r, sks, &share, s0, &wrow, 1, 0, widx);
        }
    }
    er_dev_free_all(&r->db, r->s);
    cudaError_t e2 = cudaStreamSynchronize(r->s);
    if (r->e == cudaSuccess) r->e = e2;
    free(r->parts);
    free(r->pend);
    er_status st = r->st;
    if (st == ER_OK && r->e != cudaSuccess)
        st = er__fail(ER_ERR_DEVICE, "a CUDA call of the GPU %s path failed: %s (%s)", r->ref->mod->name,
                      cudaGetErrorString(r->e), cudaGetErrorName(r->e));
    return st;
}
#endif
