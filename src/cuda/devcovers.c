/* devcovers.c: er_matmul_covers_device, the matmul check with its operands and output in device memory
 * (docs/algorithms/fast-path.md, On the GPU): the decisions on the GPU (devmm.cu), the elements they leave and the
 * widest set's entry by the matmul module's exact engine on the host (src/ops/dotmod.h), through the engine's sinks
 * (src/ops/module.h). What the GPU path does not take runs on host copies. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include <exactref/cuda.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/dotmod.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

#ifdef ER_HAVE_CUDA
#include <cuda_runtime_api.h>
#include "cuda/devmm.h"

static int er_cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The whole computation on host copies (operands and output copied back): the path for what the GPU path does not
 * take. */
static er_status er_mm_covers_host(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *out,
                                   const er_standard *std, void *stream) {
    er_tensor hA, hB, hO;
    void *pa = NULL, *pb = NULL, *po = NULL;
    er_status st = er_tensor_from_device(&hA, &pa, A->format, A->ndim, A->shape, A->strides, A->data, stream);
    if (st == ER_OK) st = er_tensor_from_device(&hB, &pb, B->format, B->ndim, B->shape, B->strides, B->data, stream);
    if (st == ER_OK)
        st = er_tensor_from_device(&hO, &po, out->format, out->ndim, out->shape, out->strides, out->data, stream);
    er_ref *ref = NULL;
    if (st == ER_OK) st = er_matmul(&ref, &hA, &hB);
    if (st == ER_OK) st = er_covers(rep, ref, &hO, std);
    er_ref_free(ref);
    free(pa);
    free(pb);
    free(po);
    return st;
}

/* Device buffers of one call, freed together. */
enum { ER_DEVBUFS = 32 };
typedef struct er_devbufs { void *p[ER_DEVBUFS]; int n; } er_devbufs;
static void *er_dev_alloc(er_devbufs *b, size_t bytes, cudaStream_t s, cudaError_t *e) {
    void *p = NULL;
    if (*e == cudaSuccess && b->n == ER_DEVBUFS) *e = cudaErrorMemoryAllocation; /* never: the path holds fewer */
    if (*e == cudaSuccess) *e = cudaMallocAsync(&p, bytes ? bytes : 1, s);
    if (*e == cudaSuccess) b->p[b->n++] = p;
    return p;
}
#endif

#ifdef ER_HAVE_CUDA
/* One thread's share of the elements the GPU left: the exact engine on the gathered vectors, in element order. */
typedef struct er_devrest_job {
    er_dot_ctx *cx;
    const er_dot_env *env;
    const int64_t *idx;       /* the chunk's elements */
    const float *rows;        /* their vectors (exact as floats) */
    const double *ys;         /* their outputs */
    int64_t p0, p1, K;        /* this job's share of the chunk */
    er_status st;
} er_devrest_job;

static void *er_devrest_run(void *arg) {
    er_devrest_job *j = arg;
    int64_t K = j->K;
    double *va = malloc(sizeof(double) * (size_t)K), *vb = malloc(sizeof(double) * (size_t)K);
    j->st = va && vb ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate two vectors of %lld", (long long)K);
    for (int64_t p = j->p0; p < j->p1 && j->st == ER_OK; p++) {
        for (int64_t k = 0; k < K; k++) { va[k] = j->rows[2 * p * K + k]; vb[k] = j->rows[(2 * p + 1) * K + k]; }
        er_cset c;
        j->st = er__dot_element_set(j->cx, j->env, j->idx[p], va, vb, K, 0, &c);
        if (j->st == ER_OK) er__sink_put_value(j->cx->sk, j->idx[p], &c, j->ys[p]);
    }
    free(va);
    free(vb);
    if (j->p0 > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread (job 0 runs in the calling one) */
    return NULL;
}

/* The job's one element, the widest set the GPU decided: its whole set from the exact engine, as the candidate for
 * the report's widest set. */
static void er_devrest_widest(er_devrest_job *j) {
    int64_t K = j->K, idx = j->idx[0];
    double *va = malloc(sizeof(double) * (size_t)K), *vb = malloc(sizeof(double) * (size_t)K);
    j->st = va && vb ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate two vectors of %lld", (long long)K);
    if (j->st == ER_OK) {
        for (int64_t k = 0; k < K; k++) { va[k] = j->rows[k]; vb[k] = j->rows[K + k]; }
        er_cset c;
        j->st = er__dot_element_set(j->cx, j->env, idx, va, vb, K, 0, &c);
        if (j->st == ER_OK) er__sink_widest(j->cx->sk, idx, &c, j->ys[0]);
    }
    free(va);
    free(vb);
}

/* What the module's covers needs beyond the reference of shapes: the device views and the stream; fallback is set
 * where the GPU path does not apply. */
typedef struct er_dev_arg { er_ref *ref; const er_tensor *A, *B, *out; void *stream; int fallback; } er_dev_arg;

static er_status er_dev_covers(const er_ref *ref, const er_standard *std, er_sinks *sks);
static const char *const er_dev_names[1] = {"out"};
/* The host matmul's options: the tensor-core models, tf32 and depth=. */
static er_status er_dev_check(const er_ref *ref, const er_standard *std) {
    return er__standard_takes(ref, std);
}
static const er_op_module er_dev_module = { .name = "matmul",
                                            .nout = 1,
                                            .out_names = er_dev_names,
                                            .out_shape = er__out_shape_same,
                                            .check = er_dev_check,
                                            .covers = er_dev_covers };
#endif

static er_status er_matmul_covers_device_run(er_report *rep, const er_tensor *A, const er_tensor *B,
                                             const er_tensor *out, const er_standard *std, void *stream);

er_status er_matmul_covers_device(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *out,
                                  const er_standard *std, void *stream) {
    er_status st = er_matmul_covers_device_run(rep, A, B, out, std, stream);
    er__report_finish(rep, st);
    return st;
}

static er_status er_matmul_covers_device_run(er_report *rep, const er_tensor *A, const er_tensor *B,
                                             const er_tensor *out, const er_standard *std, void *stream) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(A, "A");
    ER_CHECK_NULL(B, "B");
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(std, "standard");
    ER_RETURN_IF_ERROR(er__tensor_check(A, "A"));
    ER_RETURN_IF_ERROR(er__tensor_check(B, "B"));
#ifndef ER_HAVE_CUDA
    (void)stream;
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    er_ref *ref;
    ER_RETURN_IF_ERROR(er__matmul_shape_ref(&ref, A, B));
    er_dev_arg arg = {ref, A, B, out, stream, 0};
    er_status st = er__covers_module(rep, &er_dev_module, ref, out, std, &arg);
    er_ref_free(ref);
    if (st != ER_OK || !arg.fallback) return st;
    er_report_clear(rep);
    return er_mm_covers_host(rep, A, B, out, std, stream);
#endif
}

#ifdef ER_HAVE_CUDA
/* The GPU path's covers: the decisions on the GPU; the elements left, in element order, by the exact engine on the
 * host's threads, each chunk's elements in contiguous shares. */
static er_status er_dev_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    er_dev_arg *arg = er__sinks_arg(sks);
    const er_tensor *A = arg->A, *B = arg->B, *out = arg->out;
    void *stream = arg->stream;
    er_status st = ER_OK;
    const er_mm_plan *pl = &er__dot(ref)->plan;
    const er_fmt_info *fa = er__fmt(A->format), *fb = er__fmt(B->format), *fo = er__fmt(out->format);
    int any_set = std->order == ER_ORDER_ANY || (std->order == ER_ORDER_MMA && std->outer == ER_SUB_ANY);
    int loadable_a = fa->p <= 24 && (fa->bits <= 16 || A->format == ER_FP32),
        loadable_b = fb->p <= 24 && (fb->bits <= 16 || B->format == ER_FP32);
    int ok = any_set && std->compute == ER_FP32 && loadable_a && loadable_b && er__row_major(A) && er__row_major(B) &&
             er__row_major(out) && (fo->id == ER_FP32 || fo->id == ER_FP16 || fo->id == ER_BF16) && pl->K >= 1 &&
             ref->n > 0 && pl->M < INT32_MAX && pl->N < INT32_MAX && pl->K < INT32_MAX;
    if (!ok) { arg->fallback = 1; return ER_OK; }
    cudaStream_t s = (cudaStream_t)stream;
    int64_t na = pl->a_batches * pl->M * pl->K, nbv = pl->b_batches * pl->K * pl->N, n = ref->n, K = pl->K;
    er_devbufs db = {{0}, 0};
    cudaError_t e = cudaSuccess;
    int ec = 0, fallback = 0;
    /* the tables of 8- and 16-bit formats, and each output batch's operand batches */
    double *luts[2] = {NULL, NULL}, *dlut[2] = {NULL, NULL};
    int64_t *hia = malloc(sizeof(int64_t) * (size_t)pl->nbatch), *hib = malloc(sizeof(int64_t) * (size_t)pl->nbatch);
    if (!hia || !hib) st = er__fail(ER_ERR_NOMEM, "cannot allocate %lld batch numbers", (long long)pl->nbatch);
    for (int64_t bi = 0; st == ER_OK && bi < pl->nbatch; bi++) er__matmul_batch_of(ref, bi, &hia[bi], &hib[bi]);
    const er_fmt_info *fis[2] = {fa, fb};
    for (int o = 0; o < 2 && st == ER_OK; o++) {
        if (fis[o]->bits > 16) continue;
        size_t cnt = (size_t)1 << fis[o]->bits;
        luts[o] = malloc(sizeof(double) * cnt);
        if (!luts[o]) { st = er__fail(ER_ERR_NOMEM, "cannot allocate a decoding table"); break; }
        for (size_t i = 0; i < cnt; i++) luts[o][i] = er__decode(fis[o], i);
        dlut[o] = er_dev_alloc(&db, sizeof(double) * cnt, s, &e);
        if (e == cudaSuccess) e = cudaMemcpyAsync(dlut[o], luts[o], sizeof(double) * cnt, cudaMemcpyHostToDevice, s);
    }
    /* decode; the statistics decide whether the GPU path applies (no NaN or infinity) */
    double *Ad = er_dev_alloc(&db, sizeof(double) * (size_t)na, s, &e),
           *Bd = er_dev_alloc(&db, sizeof(double) * (size_t)nbv, s, &e);
    er_dev_stats *dst = er_dev_alloc(&db, 2 * sizeof(er_dev_stats), s, &e), hst[2];
    int64_t *dia = er_dev_alloc(&db, sizeof(int64_t) * (size_t)pl->nbatch, s, &e),
            *dib = er_dev_alloc(&db, sizeof(int64_t) * (size_t)pl->nbatch, s, &e);
    if (st == ER_OK && e == cudaSuccess) {
        e = cudaMemcpyAsync(dia, hia, sizeof(int64_t) * (size_t)pl->nbatch, cudaMemcpyHostToDevice, s);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(dib, hib, sizeof(int64_t) * (size_t)pl->nbatch, cudaMemcpyHostToDevice, s);
        if (e == cudaSuccess) ec = er__devmm_stats_init(dst, s);
        if (!ec) ec = er__devmm_stats_init(dst + 1, s);
        if (!ec) ec = er__devmm_decode(A->data, fa->bits, dlut[0], fa->p, na, Ad, dst, s);
        if (!ec) ec = er__devmm_decode(B->data, fb->bits, dlut[1], fb->p, nbv, Bd, dst + 1, s);
        if (ec) e = (cudaError_t)ec;
        if (e == cudaSuccess) e = cudaMemcpyAsync(hst, dst, sizeof hst, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        fallback = e == cudaSuccess && (hst[0].nonfinite || hst[1].nonfinite); /* NaN or inf: the exact engine's */
    }
    /* norms, the GEMM, the decisions */
    unsigned long long hcnt[4] = { 0, 0, 0, 0 },
                       hw[2] = { 0, ULLONG_MAX }; /* hw: the widest decided set's width bits and element */
    int64_t *dpend = NULL;
    uint8_t *dcl = NULL; /* the classes the GPU decided */
    double *Bt = NULL; /* B transposed: its columns contiguous */
    if (st == ER_OK && e == cudaSuccess && !fallback) {
        double *S = er_dev_alloc(&db, sizeof(double) * (size_t)n, s, &e);
        double *an = er_dev_alloc(&db, sizeof(double) * (size_t)(pl->a_batches * pl->M), s, &e);
        double *bnv = er_dev_alloc(&db, sizeof(double) * (size_t)(pl->b_batches * pl->N), s, &e);
        Bt = er_dev_alloc(&db, sizeof(double) * (size_t)nbv, s, &e);
        if (e == cudaSuccess) ec = er__devmm_transpose(Bd, pl->b_batches, K, pl->N, Bt, s);
        if (!ec && e == cudaSuccess)
            ec = er__devmm_norms(Ad, pl->a_batches * pl->M, Bt, pl->b_batches * pl->N, K, an, bnv, s);
        if (ec) e = (cudaError_t)ec;
        if (e == cudaSuccess) {
            int g = er__devmm_dgemm(Ad, Bd, S, hia, hib, pl->nbatch, pl->M, pl->N, K, s);
            if (g == -1) fallback = 1; /* no cuBLAS: the host path */
            else if (g)
                st = er__fail(ER_ERR_DEVICE, "cuBLAS's dgemm failed on %lld x %lld x %lld", (long long)pl->M,
                              (long long)K, (long long)pl->N);
        }
        if (st == ER_OK && e == cudaSuccess && !fallback) {
            er_dot_ctx cx0;
            st = er__dot_ctx_init(&cx0, ref, out,
                                  std); /* the constants (out's format and layout only; its data stay on the GPU) */
            er_fast_consts fc;
            if (st == ER_OK) { er__dot_fast_consts(&fc, &cx0); er__dot_ctx_clear(&cx0); }
            dcl = er_dev_alloc(&db, (size_t)n, s, &e);
            unsigned long long *dcnt = er_dev_alloc(&db, 4 * sizeof(unsigned long long), s, &e);
            int64_t *dcand = er_dev_alloc(&db, sizeof(int64_t) * (size_t)n, s, &e);
            dpend = er_dev_alloc(&db, sizeof(int64_t) * (size_t)n, s, &e);
            if (st == ER_OK && e == cudaSuccess) e = cudaMemsetAsync(dcnt, 0, 4 * sizeof(unsigned long long), s);
            if (st == ER_OK && e == cudaSuccess)
                ec = er__devmm_decide(out->data, S, Ad, Bt, an, bnv, dia, dib, pl->nbatch, pl->M, pl->N, K, fc, dcl,
                                      dcnt, dcand, dpend, s);
            if (ec) e = (cudaError_t)ec;
            /* the widest set among the decided elements, with P = fl64(|A| |B|) (fast-path.md, On the GPU) */
            double *Aabs = er_dev_alloc(&db, sizeof(double) * (size_t)na, s, &e),
                   *Babs = er_dev_alloc(&db, sizeof(double) * (size_t)nbv, s, &e);
            double *Pd = er_dev_alloc(&db, sizeof(double) * (size_t)n, s, &e),
                   *Rd = er_dev_alloc(&db, sizeof(double) * (size_t)n, s, &e);
            unsigned long long *dw = er_dev_alloc(&db, sizeof hw, s, &e);
            if (st == ER_OK && e == cudaSuccess) e = cudaMemcpyAsync(dw, hw, sizeof hw, cudaMemcpyHostToDevice, s);
            if (st == ER_OK && e == cudaSuccess) ec = er__devmm_abs(Ad, na, Aabs, s);
            if (!ec && st == ER_OK && e == cudaSuccess) ec = er__devmm_abs(Bd, nbv, Babs, s);
            if (!ec && st == ER_OK && e == cudaSuccess &&
                er__devmm_dgemm(Aabs, Babs, Pd, hia, hib, pl->nbatch, pl->M, pl->N, K, s))
                st = er__fail(ER_ERR_DEVICE, "cuBLAS's dgemm failed on %lld x %lld x %lld", (long long)pl->M,
                              (long long)K, (long long)pl->N);
            if (!ec && st == ER_OK && e == cudaSuccess)
                ec = er__devmm_widest(S, Pd, n, fc, dcl, dcnt, dpend, Rd, dw, s);
            if (ec) e = (cudaError_t)ec;
            if (st == ER_OK && e == cudaSuccess) e = cudaMemcpyAsync(hw, dw, sizeof hw, cudaMemcpyDeviceToHost, s);
            if (st == ER_OK && e == cudaSuccess)
                e = cudaMemcpyAsync(hcnt, dcnt, sizeof hcnt, cudaMemcpyDeviceToHost, s);
            if (st == ER_OK && e == cudaSuccess) e = cudaStreamSynchronize(s);
        }
    }
    /* the elements left, in element order, in chunks: their vectors gathered on the GPU, the exact engine on the host's
     * threads, each on a contiguous share of the chunk (one share of the sinks each, in element order) */
    int64_t np = (int64_t)hcnt[3];
    int64_t chunk = (INT64_C(1) << 21) / K > 0 ? (INT64_C(1) << 21) / K : 1; /* 16 MiB of vectors at a time */
    if (chunk > np) chunk = np > 0 ? np : 1;
    int shares = 0;
    for (int64_t c0 = 0; c0 < np; c0 += chunk) {
        int64_t cn = np - c0 < chunk ? np - c0 : chunk;
        int nt = er__num_threads(cn * K * 16);
        shares += nt > cn ? (int)cn : nt;
    }
    if (st == ER_OK && e == cudaSuccess && !fallback) st = er__sinks_open(sks, shares ? shares : 1);
    if (st == ER_OK && e == cudaSuccess && !fallback) {
        /* the classes straight into the report's array, registered with CUDA for the copy when that works */
        er_sink *s0 = er__sinks_at(sks, 0, 0);
        uint8_t *classes = er__sink_classes(s0);
        int reg = cudaHostRegister(classes, (size_t)n, cudaHostRegisterDefault) == cudaSuccess;
        if (!reg) (void)cudaGetLastError();
        e = cudaMemcpyAsync(classes, dcl, (size_t)n, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        if (reg) cudaHostUnregister(classes);
        er__sink_count(s0, ER_CLASS_EXACT, (int64_t)hcnt[0]);
        er__sink_count(s0, ER_CLASS_COVERED, (int64_t)hcnt[1]);
        int64_t *hp = malloc(sizeof(int64_t) * (size_t)(np ? np : 1));
        float *rows = NULL;
        double *ys = malloc(sizeof(double) * (size_t)chunk);
        if (np && e == cudaSuccess)
            e = cudaMallocHost((void **)&rows, sizeof(float) * (size_t)(2 * chunk * K)); /* pinned: full-speed copies */
        float *drows = er_dev_alloc(&db, sizeof(float) * (size_t)(2 * chunk * K), s, &e);
        double *dys = er_dev_alloc(&db, sizeof(double) * (size_t)chunk, s, &e);
        if (!hp || !ys) st = er__fail(ER_ERR_NOMEM, "cannot allocate the vectors of %lld elements", (long long)chunk);
        if (st == ER_OK && e == cudaSuccess && np) {
            e = cudaMemcpyAsync(hp, dpend, sizeof(int64_t) * (size_t)np, cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaStreamSynchronize(s);
            qsort(hp, (size_t)np, sizeof(int64_t), er_cmp_i64);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(dpend, hp, sizeof(int64_t) * (size_t)np, cudaMemcpyHostToDevice, s);
        }
        er__matmul_env(ref, -1,
                       &(er_dense_stats){ hst[0].emin_lsb, hst[0].emin, hst[0].emax, hst[0].qmin, hst[0].any_nonzero },
                       &(er_dense_stats){ hst[1].emin_lsb, hst[1].emin, hst[1].emax, hst[1].qmin, hst[1].any_nonzero },
                       &er__dot(arg->ref)->env);
        int share = 0;
        for (int64_t c0 = 0; c0 < np && st == ER_OK && e == cudaSuccess; c0 += chunk) {
            int64_t cn = np - c0 < chunk ? np - c0 : chunk;
            ec = er__devmm_gather(dpend + c0, cn, out->data,
                                  fo->id == ER_FP32   ? 0
                                  : fo->id == ER_FP16 ? 1
                                                      : 2,
                                  Ad, Bt, dia, dib, pl->M, pl->N, K, drows, dys, s);
            if (ec) { e = (cudaError_t)ec; break; }
            e = cudaMemcpyAsync(rows, drows, sizeof(float) * (size_t)(2 * cn * K), cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaMemcpyAsync(ys, dys, sizeof(double) * (size_t)cn, cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaStreamSynchronize(s);
            if (e != cudaSuccess) break;
            int nt = er__num_threads(cn * K * 16);
            if (nt > cn) nt = (int)cn;
            er_dot_ctx cx[ER_MAX_THREADS];
            er_devrest_job jobs[ER_MAX_THREADS];
            int made = 0;
            for (int t = 0; t < nt && st == ER_OK; t++, made++) {
                st = er__dot_ctx_init(&cx[t], ref, out, std);
                if (st != ER_OK) break;
                cx[t].sk = er__sinks_at(sks, share + t, 0);
                jobs[t] = (er_devrest_job){ &cx[t],      &er__dot(ref)->env, hp + c0, rows, ys,
                                            cn * t / nt, cn * (t + 1) / nt,  K,       ER_OK };
            }
            if (st == ER_OK) er__run_jobs(jobs, sizeof jobs[0], nt, er_devrest_run);
            for (int t = 0; t < made; t++) {
                if (st == ER_OK) st = jobs[t].st;
                er__dot_ctx_clear(&cx[t]);
            }
            share += nt;
        }
        /* the widest set the GPU decided: its whole set from the exact engine, the candidate for the report's */
        int64_t gidx = (int64_t)hw[1];
        if (st == ER_OK && e == cudaSuccess && hw[0] && hw[1] != ULLONG_MAX) {
            float *one = malloc(sizeof(float) * (size_t)(2 * K));
            double y;
            e = cudaMemcpyAsync(dpend, &gidx, sizeof gidx, cudaMemcpyHostToDevice, s);
            if (e == cudaSuccess)
                e = (cudaError_t)er__devmm_gather(dpend, 1, out->data,
                                                  fo->id == ER_FP32   ? 0
                                                  : fo->id == ER_FP16 ? 1
                                                                      : 2,
                                                  Ad, Bt, dia, dib, pl->M, pl->N, K, drows, dys, s);
            if (e == cudaSuccess && one)
                e = cudaMemcpyAsync(one, drows, sizeof(float) * (size_t)(2 * K), cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaMemcpyAsync(&y, dys, sizeof y, cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaStreamSynchronize(s);
            if (!one) st = er__fail(ER_ERR_NOMEM, "cannot allocate two vectors of %lld", (long long)K);
            er_dot_ctx cw;
            if (st == ER_OK && e == cudaSuccess) st = er__dot_ctx_init(&cw, ref, out, std);
            if (st == ER_OK && e == cudaSuccess) {
                cw.sk = s0;
                er_devrest_job job = {&cw, &er__dot(ref)->env, &gidx, one, &y, 0, 1, K, ER_OK};
                er_devrest_widest(&job);
                st = job.st;
                er__dot_ctx_clear(&cw);
            }
            free(one);
        }
        free(hp);
        if (rows) cudaFreeHost(rows);
        free(ys);
    }
    for (int i = 0; i < db.n; i++) cudaFreeAsync(db.p[i], s);
    cudaError_t e2 = cudaStreamSynchronize(s);
    if (e == cudaSuccess) e = e2;
    free(hia);
    free(hib);
    free(luts[0]);
    free(luts[1]);
    if (st == ER_OK && e != cudaSuccess)
        st = er__fail(ER_ERR_DEVICE, "a CUDA call of the GPU matmul path failed: %s (%s)", cudaGetErrorString(e),
                      cudaGetErrorName(e));
    if (st == ER_OK && fallback) arg->fallback = 1;
    return st;
}
#endif
