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
#include "cuda/devbufs.h"

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
typedef struct er_dev_arg {
    er_ref *ref;
    const er_tensor *A, *B, *out;
    void *stream;
    int fallback;
    er_dev_keep *keep; /* whether the report keeps its classes on the device, and their array there */
} er_dev_arg;

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
    er_dev_keep keep = er_dev_keep_of(rep);
    er_dev_arg arg = {ref, A, B, out, stream, 0, &keep};
    er_status st = er__covers_module(rep, &er_dev_module, ref, out, std, &arg);
    er_ref_free(ref);
    er_dev_keep_end(&keep, rep, st); /* where the GPU path ran and the report keeps its classes there */
    if (st != ER_OK || !arg.fallback) return st;
    er_report_clear(rep);
    return er_mm_covers_host(rep, A, B, out, std, stream);
#endif
}

#ifdef ER_HAVE_CUDA
/* One GPU check's state: its arguments, the device buffers, the host copies and what the GPU decided. */
typedef struct er_dev_run {
    const er_ref *ref;
    const er_standard *std;
    er_dev_arg *arg;
    const er_tensor *A, *B, *out;
    cudaStream_t s;
    const er_mm_plan *pl;
    const er_fmt_info *fa, *fb, *fo;
    int64_t na, nbv, n, K;
    er_devbufs db;
    cudaError_t e;
    er_status st;
    int fallback;
    double *luts[2], *dlut[2];           /* the tables of 8-bit formats */
    int64_t *hia, *hib, *dia, *dib;       /* each output batch's operand batches */
    double *Ad, *Bd, *Bt;                 /* the operands decoded; B transposed: its columns contiguous */
    float *Af, *Btf;                      /* A and B transposed as floats (exact): what the decisions' warps read */
    er_dev_stats *dst, hst[2];
    unsigned long long hcnt[6], hw[4];    /* the counts (er__devmm_decide's); the widest decided set's width bits and
                                           * element (and er__devmm_widest's scratch) */
    float *dh;                            /* the outside elements' distance bounds */
    int64_t *dpend;                       /* the elements the GPU left */
    uint8_t *dcl;                         /* the classes the GPU decided (keep's array where the report keeps them) */
    uint8_t *classes;                     /* the report's classes array (host) */
    int pinned;                           /* classes is registered with CUDA */
    er_dev_keep *keep;                    /* where the report keeps its classes on the device, else NULL */
} er_dev_run;

/* Whether the GPU decodes an operand of format f: of at most 24 bits, stored in 8 or 16 bits or as fp32. */
static int er_dev_loadable(const er_fmt_info *f) {
    return f->p <= 24 && (f->bits <= 8 || f->id == ER_FP16 || f->id == ER_BF16 || f->id == ER_FP32);
}

/* Whether the run may go on: no refusal, no CUDA error, no fallback to the host. */
static int er_dev_going(const er_dev_run *r) { return r->st == ER_OK && r->e == cudaSuccess && !r->fallback; }

/* The decoding tables and batch numbers, the operands decoded on the GPU; their statistics decide whether the GPU
 * path applies (no NaN or infinity). */
static void er_dev_decode(er_dev_run *r) {
    const er_mm_plan *pl = r->pl;
    cudaStream_t s = r->s;
    int ec = 0;
    r->hia = malloc(sizeof(int64_t) * (size_t)pl->nbatch);
    r->hib = malloc(sizeof(int64_t) * (size_t)pl->nbatch);
    if (!r->hia || !r->hib) r->st = er__fail(ER_ERR_NOMEM, "cannot allocate %lld batch numbers", (long long)pl->nbatch);
    for (int64_t bi = 0; r->st == ER_OK && bi < pl->nbatch; bi++)
        er__matmul_batch_of(r->ref, bi, &r->hia[bi], &r->hib[bi]);
    const er_fmt_info *fis[2] = {r->fa, r->fb};
    for (int o = 0; o < 2 && r->st == ER_OK; o++) {
        if (fis[o]->bits > 8) continue; /* fp32, fp16 and bf16: the GPU's own conversions */
        size_t cnt = (size_t)1 << fis[o]->bits;
        r->luts[o] = malloc(sizeof(double) * cnt);
        if (!r->luts[o]) {
            r->st = er__fail(ER_ERR_NOMEM, "cannot allocate a decoding table");
            break;
        }
        for (size_t i = 0; i < cnt; i++) r->luts[o][i] = er__decode(fis[o], i);
        r->dlut[o] = er_dev_alloc(&r->db, sizeof(double) * cnt, s, &r->e);
        if (r->e == cudaSuccess)
            r->e = cudaMemcpyAsync(r->dlut[o], r->luts[o], sizeof(double) * cnt, cudaMemcpyHostToDevice, s);
    }
    r->Ad = er_dev_alloc(&r->db, sizeof(double) * (size_t)r->na, s, &r->e);
    r->Bd = er_dev_alloc(&r->db, sizeof(double) * (size_t)r->nbv, s, &r->e);
    r->dst = er_dev_alloc(&r->db, 2 * sizeof(er_dev_stats), s, &r->e);
    r->dia = er_dev_alloc(&r->db, sizeof(int64_t) * (size_t)pl->nbatch, s, &r->e);
    r->dib = er_dev_alloc(&r->db, sizeof(int64_t) * (size_t)pl->nbatch, s, &r->e);
    if (r->st != ER_OK || r->e != cudaSuccess) return;
    cudaError_t e = cudaMemcpyAsync(r->dia, r->hia, sizeof(int64_t) * (size_t)pl->nbatch, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(r->dib, r->hib, sizeof(int64_t) * (size_t)pl->nbatch, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess) ec = er__devmm_stats_init(r->dst, s);
    if (!ec) ec = er__devmm_stats_init(r->dst + 1, s);
    if (!ec) ec = er__devmm_decode(r->A->data, r->fa->bits, r->dlut[0], r->fa->p, r->na, r->Ad, r->dst, s);
    if (!ec) ec = er__devmm_decode(r->B->data, r->fb->bits, r->dlut[1], r->fb->p, r->nbv, r->Bd, r->dst + 1, s);
    if (ec) e = (cudaError_t)ec;
    if (e == cudaSuccess) e = cudaMemcpyAsync(r->hst, r->dst, sizeof r->hst, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    r->e = e;
    r->fallback = e == cudaSuccess && (r->hst[0].nonfinite || r->hst[1].nonfinite); /* NaN or inf: the exact engine's */
}

/* P_hat = fl64(|A| |B|) into a buffer of its own (fast-path.md, On the GPU): it narrows the decisions' bracket of sum
 * |a_k b_k| where the integer bracket (Lemma F4) is not there or leaves too much to stage 2. */
static double *er_dev_abs_gemm(er_dev_run *r) {
    const er_mm_plan *pl = r->pl;
    cudaStream_t s = r->s;
    int ec = 0;
    double *Pd = er_dev_alloc(&r->db, sizeof(double) * (size_t)r->n, s, &r->e);
    double *Aabs = er_dev_alloc(&r->db, sizeof(double) * (size_t)r->na, s, &r->e);
    double *Babs = er_dev_alloc(&r->db, sizeof(double) * (size_t)r->nbv, s, &r->e);
    if (r->st == ER_OK && r->e == cudaSuccess) ec = er__devmm_abs(r->Ad, r->na, Aabs, s);
    if (!ec && r->st == ER_OK && r->e == cudaSuccess) ec = er__devmm_abs(r->Bd, r->nbv, Babs, s);
    if (ec) r->e = (cudaError_t)ec;
    if (r->st == ER_OK && r->e == cudaSuccess &&
        er__devmm_dgemm(Aabs, Babs, Pd, r->hia, r->hib, pl->nbatch, pl->M, pl->N, r->K, s))
        r->st = er__fail(ER_ERR_DEVICE, "cuBLAS's dgemm failed on %lld x %lld x %lld", (long long)pl->M,
                         (long long)r->K, (long long)pl->N);
    return Pd;
}

/* P's integer bracket (fast-path.md, Lemma F4) into *pb: the operands' magnitudes rounded up and down to int8 over
 * each row's scale (psa, psb, from the norms' kernel), and their two GEMMs in int32, exact while K 127^2 < 2^31.
 * Left empty (P_hat's GEMM instead) where cuBLAS lacks or refuses the int8 GEMM. */
static void er_dev_int_bracket(er_dev_run *r, const double *psa, const double *psb, er_dev_pb *pb) {
    const er_mm_plan *pl = r->pl;
    cudaStream_t s = r->s;
    int8_t *a8 = er_dev_alloc(&r->db, 2 * (size_t)r->na, s, &r->e);
    int8_t *b8 = er_dev_alloc(&r->db, 2 * (size_t)r->nbv, s, &r->e);
    int32_t *G = er_dev_alloc(&r->db, 2 * sizeof(int32_t) * (size_t)r->n, s, &r->e);
    int ec = 0;
    if (!er_dev_going(r)) return;
    ec = er__devmm_quant8(r->Ad, r->na, r->K, psa, a8, a8 + r->na, s);
    if (!ec) ec = er__devmm_quant8(r->Bt, r->nbv, r->K, psb, b8, b8 + r->nbv, s);
    if (ec) { r->e = (cudaError_t)ec; return; }
    int g = er__devmm_igemm(a8, b8, G, r->hia, r->hib, pl->nbatch, pl->M, pl->N, r->K, s);
    if (!g) g = er__devmm_igemm(a8 + r->na, b8 + r->nbv, G + r->n, r->hia, r->hib, pl->nbatch, pl->M, pl->N, r->K, s);
    if (!g) *pb = (er_dev_pb){NULL, G, G + r->n, psa, psb};
}

/* The report's classes array locked (er_dev_lock) for their copy from the GPU while the GPU works on the decisions:
 * the host's page locking then overlaps the GPU's work. */
static void er_dev_pin_classes(er_dev_run *r) {
    if (r->pinned || r->keep || !r->classes || r->n < 1) return;
    r->pinned = er_dev_lock(r->classes, (size_t)r->n, 0);
}

/* The norms, the GEMMs (A B, and P's integer bracket or |A| |B|), the decisions on the GPU, then the widest decided
 * set. Where the integer bracket leaves more than 1/64 of the elements to stage 2 (operands whose magnitudes spread
 * over many binades in a row: their int8 roundings are coarse), P_hat's GEMM narrows stage 1 again: the warp an
 * element of stage 2 takes costs more than its share of that GEMM there. So it does where an output lies outside its
 * set: the candidates for the report's worst are those whose distance's upper bound reaches the largest lower
 * bound, and with the integer bracket alone they were many, each then taken by the exact engine on the host. */
static void er_dev_decide(er_dev_run *r) {
    const er_mm_plan *pl = r->pl;
    cudaStream_t s = r->s;
    int64_t K = r->K, n = r->n, ra = pl->a_batches * pl->M, rb = pl->b_batches * pl->N;
    int ec = 0, ints = K % 4 == 0 && K <= 133143; /* K 127^2 < 2^31; cuBLAS's int8 GEMM: K a multiple of 4 */
    double *S = er_dev_alloc(&r->db, sizeof(double) * (size_t)n, s, &r->e);
    double *an = er_dev_alloc(&r->db, sizeof(double) * (size_t)ra, s, &r->e);
    double *bnv = er_dev_alloc(&r->db, sizeof(double) * (size_t)rb, s, &r->e);
    double *psa = ints ? er_dev_alloc(&r->db, sizeof(double) * (size_t)ra, s, &r->e) : NULL;
    double *psb = ints ? er_dev_alloc(&r->db, sizeof(double) * (size_t)rb, s, &r->e) : NULL;
    r->Bt = er_dev_alloc(&r->db, sizeof(double) * (size_t)r->nbv, s, &r->e);
    r->Af = er_dev_alloc(&r->db, sizeof(float) * (size_t)r->na, s, &r->e);
    r->Btf = er_dev_alloc(&r->db, sizeof(float) * (size_t)r->nbv, s, &r->e);
    if (r->e == cudaSuccess) ec = er__devmm_transpose(r->Bd, pl->b_batches, K, pl->N, r->Bt, s);
    if (!ec && r->e == cudaSuccess) ec = er__devmm_tofloat(r->Ad, r->na, r->Af, s);
    if (!ec && r->e == cudaSuccess) ec = er__devmm_tofloat(r->Bt, r->nbv, r->Btf, s);
    if (!ec && r->e == cudaSuccess) ec = er__devmm_norms(r->Ad, ra, r->Bt, rb, K, an, bnv, psa, psb, s);
    if (ec) r->e = (cudaError_t)ec;
    if (r->e == cudaSuccess) {
        int g = er__devmm_dgemm(r->Ad, r->Bd, S, r->hia, r->hib, pl->nbatch, pl->M, pl->N, K, s);
        if (g == -1) r->fallback = 1; /* no cuBLAS: the host path */
        else if (g)
            r->st = er__fail(ER_ERR_DEVICE, "cuBLAS's dgemm failed on %lld x %lld x %lld", (long long)pl->M,
                             (long long)K, (long long)pl->N);
    }
    er_dev_pb pb = {NULL, NULL, NULL, NULL, NULL};
    if (ints && er_dev_going(r)) er_dev_int_bracket(r, psa, psb, &pb);
    if (!pb.gup && er_dev_going(r)) pb.P = er_dev_abs_gemm(r);
    if (!er_dev_going(r)) return;
    er_dot_ctx cx0;
    /* the constants (out's format and layout only; its data stay on the GPU) */
    r->st = er__dot_ctx_init(&cx0, r->ref, r->out, r->std);
    er_fast_consts fc;
    if (r->st == ER_OK) {
        er__dot_fast_consts(&fc, &cx0);
        er__dot_ctx_clear(&cx0);
    }
    if (!r->keep) r->dcl = er_dev_alloc(&r->db, (size_t)n, s, &r->e);
    else if (r->e == cudaSuccess) r->e = er_dev_keep_alloc(r->keep, n, s);
    if (r->keep) r->dcl = r->keep->dcl;
    unsigned long long *dcnt = er_dev_alloc(&r->db, sizeof r->hcnt, s, &r->e);
    r->dh = er_dev_alloc(&r->db, sizeof(float) * (size_t)n, s, &r->e);
    int64_t *dcand = er_dev_alloc(&r->db, sizeof(int64_t) * (size_t)n, s, &r->e);
    r->dpend = er_dev_alloc(&r->db, sizeof(int64_t) * (size_t)n, s, &r->e);
    for (int pass = 0; pass < 2 && r->st == ER_OK && r->e == cudaSuccess; pass++) {
        r->e = cudaMemsetAsync(dcnt, 0, sizeof r->hcnt, s);
        if (r->e == cudaSuccess)
            ec = er__devmm_decide(r->out->data, S, pb, r->Af, r->Btf, an, bnv, r->dia, r->dib, pl->nbatch, pl->M, pl->N,
                                  K, fc, r->dcl, dcnt, dcand, r->dpend, r->dh, 1, s);
        if (ec) r->e = (cudaError_t)ec;
        er_dev_pin_classes(r);
        if (pb.P || r->e != cudaSuccess) break;
        /* the integer bracket alone: how many it left to stage 2, and whether an output lies outside (the report's
         * worst then comes from the outside elements' distances, which a wide bracket leaves wide) */
        r->e = cudaMemcpyAsync(r->hcnt, dcnt, sizeof r->hcnt, cudaMemcpyDeviceToHost, s);
        if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
        if (r->e != cudaSuccess || ((int64_t)r->hcnt[2] <= n / 64 && r->hcnt[4] == 0)) break;
        pb.P = er_dev_abs_gemm(r);
    }
    if (r->st == ER_OK && r->e == cudaSuccess)
        ec = er__devmm_decide(r->out->data, S, pb, r->Af, r->Btf, an, bnv, r->dia, r->dib, pl->nbatch, pl->M, pl->N, K,
                              fc, r->dcl, dcnt, dcand, r->dpend, r->dh, 2, s);
    if (ec) r->e = (cudaError_t)ec;
    /* the widest decided set */
    double *Rd = er_dev_alloc(&r->db, sizeof(double) * (size_t)n, s, &r->e);
    unsigned long long *dw = er_dev_alloc(&r->db, sizeof r->hw, s, &r->e);
    if (r->st == ER_OK && r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(dw, r->hw, sizeof r->hw, cudaMemcpyHostToDevice, s);
    if (r->st == ER_OK && r->e == cudaSuccess)
        ec = er__devmm_widest(S, pb, r->Af, r->Btf, an, bnv, r->dia, r->dib, pl->nbatch, pl->M, pl->N, K, fc, r->dcl,
                              dcnt, r->dpend, Rd, dcand, dw, r->dh, s);
    if (ec) r->e = (cudaError_t)ec;
    if (r->st == ER_OK && r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(r->hw, dw, sizeof r->hw, cudaMemcpyDeviceToHost, s);
    if (r->st == ER_OK && r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(r->hcnt, dcnt, sizeof r->hcnt, cudaMemcpyDeviceToHost, s);
    if (r->st == ER_OK && r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
}

/* The elements' vectors of dpend[0 .. cn) gathered on the GPU into rows and their outputs into ys (host). */
static void er_dev_gather(er_dev_run *r, const int64_t *dpend, int64_t cn, float *drows, double *dys, float *rows,
                          double *ys) {
    int ec = er__devmm_gather(dpend, cn, r->out->data, er_dev_fmt(r->fo->id), r->Af, r->Btf, r->dia, r->dib, r->pl->M,
                              r->pl->N, r->K, drows, dys, r->s);
    if (ec) { r->e = (cudaError_t)ec; return; }
    r->e = cudaMemcpyAsync(rows, drows, sizeof(float) * (size_t)(2 * cn * r->K), cudaMemcpyDeviceToHost, r->s);
    if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(ys, dys, sizeof(double) * (size_t)cn, cudaMemcpyDeviceToHost, r->s);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(r->s);
}

/* The widest set the GPU decided: its whole set from the exact engine, the candidate for the report's. */
static void er_dev_widest_entry(er_dev_run *r, er_sink *s0, float *drows, double *dys) {
    int64_t gidx = (int64_t)r->hw[1], K = r->K;
    float *one = malloc(sizeof(float) * (size_t)(2 * K));
    double y;
    if (!one) { r->st = er__fail(ER_ERR_NOMEM, "cannot allocate two vectors of %lld", (long long)K); return; }
    r->e = cudaMemcpyAsync(r->dpend, &gidx, sizeof gidx, cudaMemcpyHostToDevice, r->s);
    if (r->e == cudaSuccess) er_dev_gather(r, r->dpend, 1, drows, dys, one, &y);
    er_dot_ctx cw;
    if (r->st == ER_OK && r->e == cudaSuccess) r->st = er__dot_ctx_init(&cw, r->ref, r->out, r->std);
    if (r->st == ER_OK && r->e == cudaSuccess) {
        cw.sk = s0;
        er_devrest_job job = {&cw, &er__dot(r->ref)->env, &gidx, one, &y, 0, 1, K, ER_OK};
        er_devrest_widest(&job);
        r->st = job.st;
        er__dot_ctx_clear(&cw);
    }
    free(one);
}

/* One chunk's elements (hp[0 .. cn), their vectors rows and outputs ys) by the exact engine on the host's threads,
 * each on a contiguous share, the sinks' shares from `share` on. Returns the shares used. */
static int er_dev_chunk(er_dev_run *r, er_sinks *sks, int share, const int64_t *hp, int64_t cn, const float *rows,
                        const double *ys) {
    int nt = er__num_threads(cn * r->K * 16);
    if (nt > cn) nt = (int)cn;
    er_dot_ctx cx[ER_MAX_THREADS];
    er_devrest_job jobs[ER_MAX_THREADS];
    int made = 0;
    for (int t = 0; t < nt && r->st == ER_OK; t++, made++) {
        r->st = er__dot_ctx_init(&cx[t], r->ref, r->out, r->std);
        if (r->st != ER_OK) break;
        cx[t].sk = er__sinks_at(sks, share + t, 0);
        jobs[t] = (er_devrest_job){ &cx[t],      &er__dot(r->ref)->env, hp,   rows, ys,
                                    cn * t / nt, cn * (t + 1) / nt,     r->K, ER_OK };
    }
    if (r->st == ER_OK) er__run_jobs(jobs, sizeof jobs[0], nt, er_devrest_run);
    for (int t = 0; t < made; t++) {
        if (r->st == ER_OK) r->st = jobs[t].st;
        er__dot_ctx_clear(&cx[t]);
    }
    return nt;
}

/* Where the report keeps its classes on the device: the host's classes of the np elements it decided (hp, sorted,
 * as r->dpend holds them) over the GPU's; or, where the whole array came to the host (whole), all of it. */
static void er_dev_keep_up(er_dev_run *r, const uint8_t *classes, const int64_t *hp, int64_t np, int whole) {
    cudaStream_t s = r->s;
    if (whole) {
        r->e = cudaMemcpyAsync(r->dcl, classes, (size_t)r->n, cudaMemcpyHostToDevice, s);
        if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
        return;
    }
    if (!np) return;
    uint8_t *hv = malloc((size_t)np), *dv = er_dev_alloc(&r->db, (size_t)np, s, &r->e);
    if (!hv) {
        r->st = er__fail(ER_ERR_NOMEM, "cannot allocate the classes of %lld elements", (long long)np);
        return;
    }
    for (int64_t i = 0; i < np; i++) hv[i] = classes[hp[i]];
    if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(dv, hv, (size_t)np, cudaMemcpyHostToDevice, s);
    if (r->e == cudaSuccess) r->e = (cudaError_t)er__devmm_scatter8(r->dpend, dv, np, r->dcl, s);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
    free(hv);
}

/* The GPU's classes into the report, then the elements left, in element order, in chunks: their vectors gathered on
 * the GPU, the exact engine on the host's threads, each on a contiguous share of the chunk (one share of the sinks
 * each, in element order); then the widest decided set's entry. */
static void er_dev_rest(er_dev_run *r, er_sinks *sks) {
    cudaStream_t s = r->s;
    /* the pending elements, and the first of those decided outside (the report's first failures) */
    int64_t K = r->K, n = r->n, nout = (int64_t)r->hcnt[4], nfirst = nout < ER_REPORT_FIRST ? nout : ER_REPORT_FIRST,
            npd = (int64_t)r->hcnt[3], np = npd + nfirst;
    int64_t chunk = (INT64_C(1) << 21) / K > 0 ? (INT64_C(1) << 21) / K : 1; /* 16 MiB of vectors at a time */
    if (chunk > np) chunk = np > 0 ? np : 1;
    int shares = 0;
    for (int64_t c0 = 0; c0 < np; c0 += chunk) {
        int64_t cn = np - c0 < chunk ? np - c0 : chunk;
        int nt = er__num_threads(cn * K * 16);
        shares += nt > cn ? (int)cn : nt;
    }
    r->st = er__sinks_open(sks, shares ? shares : 1);
    if (r->st != ER_OK) return;
    /* the classes straight into the report's array (registered with CUDA by er_dev_pin_classes where that works),
     * unless the report keeps them on the device and no output lies outside (whose first failures the host finds in
     * the array) */
    er_sink *s0 = er__sinks_at(sks, 0, 0);
    uint8_t *classes = er__sink_classes(s0);
    int whole = !r->keep || nout;
    if (whole) r->e = cudaMemcpyAsync(classes, r->dcl, (size_t)n, cudaMemcpyDeviceToHost, s);
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
    er__sink_count(s0, ER_CLASS_EXACT, (int64_t)r->hcnt[0]);
    er__sink_count(s0, ER_CLASS_COVERED, (int64_t)r->hcnt[1]);
    int64_t *hp = malloc(sizeof(int64_t) * (size_t)(np ? np : 1));
    if (hp && r->e == cudaSuccess && nout) {
        er__outs_relabel(classes, n, nout, hp + npd);
        er__sink_count(s0, ER_CLASS_OUTSIDE, nout - nfirst);
    }
    float *rows = NULL;
    double *ys = malloc(sizeof(double) * (size_t)chunk);
    /* pinned where the vectors are many (full-speed copies) and CUDA gives it; a few elements' (a passing check's,
     * mostly) in pageable memory, which their copy reads as fast */
    size_t rbytes = sizeof(float) * (size_t)(2 * chunk * K);
    int pin = 0;
    if (np && rbytes > ((size_t)1 << 20)) rows = er_host_buf_get(rbytes, &pin);
    else if (np) rows = malloc(rbytes);
    if (np && !rows) r->st = er__fail(ER_ERR_NOMEM, "cannot allocate the vectors of %lld elements", (long long)chunk);
    float *drows = er_dev_alloc(&r->db, sizeof(float) * (size_t)(2 * chunk * K), s, &r->e);
    double *dys = er_dev_alloc(&r->db, sizeof(double) * (size_t)chunk, s, &r->e);
    if (!hp || !ys) r->st = er__fail(ER_ERR_NOMEM, "cannot allocate the vectors of %lld elements", (long long)chunk);
    if (r->st == ER_OK && r->e == cudaSuccess && np) {
        r->e = cudaMemcpyAsync(hp, r->dpend, sizeof(int64_t) * (size_t)npd, cudaMemcpyDeviceToHost, s);
        if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(s);
        qsort(hp, (size_t)np, sizeof(int64_t), er_dev_cmp_i64);
        if (r->e == cudaSuccess)
            r->e = cudaMemcpyAsync(r->dpend, hp, sizeof(int64_t) * (size_t)np, cudaMemcpyHostToDevice, s);
    }
    const er_dev_stats *h = r->hst;
    er__matmul_env(r->ref, -1, &(er_dense_stats){h[0].emin_lsb, h[0].emin, h[0].emax, h[0].qmin, h[0].any_nonzero},
                   &(er_dense_stats){h[1].emin_lsb, h[1].emin, h[1].emax, h[1].qmin, h[1].any_nonzero},
                   &er__dot(r->arg->ref)->env);
    int share = 0;
    for (int64_t c0 = 0; c0 < np && r->st == ER_OK && r->e == cudaSuccess; c0 += chunk) {
        int64_t cn = np - c0 < chunk ? np - c0 : chunk;
        er_dev_gather(r, r->dpend + c0, cn, drows, dys, rows, ys);
        if (r->e != cudaSuccess) break;
        share += er_dev_chunk(r, sks, share, hp + c0, cn, rows, ys);
    }
    if (r->keep && r->st == ER_OK && r->e == cudaSuccess) er_dev_keep_up(r, classes, hp, np, whole);
    if (r->keep && !whole && r->st == ER_OK && r->e == cudaSuccess && r->hw[0] && r->hw[1] != ULLONG_MAX)
        r->e = cudaMemcpy(classes + r->hw[1], r->dcl + r->hw[1], 1, cudaMemcpyDeviceToHost); /* the entry reads it */
    if (r->st == ER_OK && r->e == cudaSuccess && r->hw[0] && r->hw[1] != ULLONG_MAX)
        er_dev_widest_entry(r, s0, drows, dys);
    free(hp);
    er_host_buf_put(rows, pin);
    free(ys);
}

/* The end of a run: its device buffers freed, its stream synchronised, its host buffers freed; its refusal, else
 * its CUDA error as ER_ERR_DEVICE. */
static er_status er_dev_end(er_dev_run *r) {
    er_dev_free_all(&r->db, r->s);
    cudaError_t e2 = cudaStreamSynchronize(r->s);
    er_dev_unlock(r->classes, r->pinned);
    r->pinned = 0;
    if (r->e == cudaSuccess) r->e = e2;
    free(r->hia);
    free(r->hib);
    free(r->luts[0]);
    free(r->luts[1]);
    r->hia = r->hib = NULL;
    r->luts[0] = r->luts[1] = NULL;
    if (r->st == ER_OK && r->e != cudaSuccess)
        r->st = er__fail(ER_ERR_DEVICE, "a CUDA call of the GPU matmul path failed: %s (%s)",
                         cudaGetErrorString(r->e), cudaGetErrorName(r->e));
    return r->st;
}

/* The GPU path's covers: the decisions on the GPU; the elements left, in element order, by the exact engine on the
 * host's threads, each chunk's elements in contiguous shares. */
static er_status er_dev_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    er_dev_arg *arg = er__sinks_arg(sks);
    er_dev_run r;
    memset(&r, 0, sizeof r);
    r.ref = ref;
    r.std = std;
    r.arg = arg;
    r.A = arg->A;
    r.B = arg->B;
    r.out = arg->out;
    r.s = (cudaStream_t)arg->stream;
    r.pl = &er__dot(ref)->plan;
    r.fa = er__fmt(r.A->format);
    r.fb = er__fmt(r.B->format);
    r.fo = er__fmt(r.out->format);
    r.e = cudaSuccess;
    r.hw[1] = ULLONG_MAX;
    const er_mm_plan *pl = r.pl;
    int any_set = std->order == ER_ORDER_ANY || (std->order == ER_ORDER_MMA && std->outer == ER_SUB_ANY);
    int ok = any_set && std->compute == ER_FP32 && er_dev_loadable(r.fa) && er_dev_loadable(r.fb) &&
             er__row_major(r.A) && er__row_major(r.B) && er__row_major(r.out) &&
             (r.fo->id == ER_FP32 || r.fo->id == ER_FP16 || r.fo->id == ER_BF16) && pl->K >= 1 && ref->n > 0 &&
             pl->M < INT32_MAX && pl->N < INT32_MAX && pl->K < INT32_MAX;
    if (!ok) {
        arg->fallback = 1;
        er__sinks_decline(sks);
        return ER_OK;
    }
    r.na = pl->a_batches * pl->M * pl->K;
    r.nbv = pl->b_batches * pl->K * pl->N;
    r.n = ref->n;
    r.K = pl->K;
    r.classes = er__sinks_classes(sks, 0);
    r.keep = arg->keep && arg->keep->want ? arg->keep : NULL;
    er_dev_decode(&r);
    if (er_dev_going(&r)) er_dev_decide(&r);
    if (er_dev_going(&r)) er_dev_rest(&r, sks);
    er_status st = er_dev_end(&r);
    if (st == ER_OK && r.fallback) {
        arg->fallback = 1;
        er__sinks_decline(sks);
        if (r.keep && r.keep->dcl) { /* the host's path fills the report */
            er__dev_classes_free(r.keep->dcl);
            r.keep->dcl = NULL;
        }
    }
    return st;
}
#endif

#ifdef ER_HAVE_CUDA
/* er_matmul_device's GEMM (er_fast_gemm): the operands decoded on the GPU and S_hat = A B by cuBLAS's DGEMM there,
 * then the operands as floats with their norms, all copied into the reference. */
typedef struct er_mmdev_gemm {
    const er_tensor *A, *B; /* the device views */
    cudaStream_t s;
    er_dev_run r;
    double *S;              /* device */
} er_mmdev_gemm;

static er_status er_mmdev_start(void *ctx, const er_ref *ref, int *taken) {
    er_mmdev_gemm *g = ctx;
    er_dev_run *r = &g->r;
    *taken = 0;
    memset(r, 0, sizeof *r);
    r->ref = ref;
    r->pl = &er__dot(ref)->plan;
    r->A = g->A;
    r->B = g->B;
    r->s = g->s;
    r->e = cudaSuccess;
    r->fa = er__fmt(g->A->format);
    r->fb = er__fmt(g->B->format);
    /* what the GPU decodes: fp32, or at most 16 bits, contiguous; anything else is the CBLAS's on the copies */
    if (!er_dev_loadable(r->fa) || !er_dev_loadable(r->fb) || !er__row_major(g->A) || !er__row_major(g->B))
        return ER_OK;
    const er_mm_plan *pl = r->pl;
    r->na = pl->a_batches * pl->M * pl->K;
    r->nbv = pl->b_batches * pl->K * pl->N;
    r->n = ref->n;
    r->K = pl->K;
    er_dev_decode(r);
    g->S = er_dev_alloc(&r->db, sizeof(double) * (size_t)r->n, r->s, &r->e);
    if (er_dev_going(r)) {
        int ge = er__devmm_dgemm(r->Ad, r->Bd, g->S, r->hia, r->hib, pl->nbatch, pl->M, pl->N, r->K, r->s);
        if (ge == -1) r->fallback = 1; /* no cuBLAS: the CBLAS's */
        else if (ge)
            r->st = er__fail(ER_ERR_DEVICE, "cuBLAS's dgemm failed on %lld x %lld x %lld", (long long)pl->M,
                             (long long)r->K, (long long)pl->N);
    }
    if (er_dev_going(r)) {
        *taken = 1;
        return ER_OK;
    }
    return er_dev_end(r); /* an operand's NaN or infinity (the host's decoding sees it too) or no cuBLAS: ER_OK */
}

/* The operands as floats, their norms' upper bounds and statistics (ops) from the GPU's decoded operands, for the
 * fast path's state: B transposed, each converted, the norms as the GPU path's (every addition and the root rounded
 * upward); copied with S_hat, their pages faulted in while the GPU works. S_hat's and the norms' device buffers into
 * keep[0 .. 2] (still the run's). */
static void er_mmdev_operands(er_mmdev_gemm *g, double *fs, const er_fast_ops *ops, void **keep) {
    er_dev_run *r = &g->r;
    const er_mm_plan *pl = r->pl;
    int64_t ra = pl->a_batches * pl->M, rb = pl->b_batches * pl->N;
    double *Bt = er_dev_alloc(&r->db, sizeof(double) * (size_t)r->nbv, r->s, &r->e);
    float *af = er_dev_alloc(&r->db, sizeof(float) * (size_t)r->na, r->s, &r->e);
    float *bt = er_dev_alloc(&r->db, sizeof(float) * (size_t)r->nbv, r->s, &r->e);
    double *an = er_dev_alloc(&r->db, sizeof(double) * (size_t)ra, r->s, &r->e);
    double *bn = er_dev_alloc(&r->db, sizeof(double) * (size_t)rb, r->s, &r->e);
    int ec = r->e == cudaSuccess ? er__devmm_transpose(r->Bd, pl->b_batches, r->K, pl->N, Bt, r->s) : 0;
    if (!ec && r->e == cudaSuccess) ec = er__devmm_tofloat(r->Ad, r->na, af, r->s);
    if (!ec && r->e == cudaSuccess) ec = er__devmm_tofloat(Bt, r->nbv, bt, r->s);
    if (!ec && r->e == cudaSuccess) ec = er__devmm_norms(r->Ad, ra, Bt, rb, r->K, an, bn, NULL, NULL, r->s);
    if (ec) r->e = (cudaError_t)ec;
    er__prefault(fs, sizeof(double) * (size_t)r->n);
    er__prefault(ops->af, sizeof(float) * (size_t)r->na);
    er__prefault(ops->bt, sizeof(float) * (size_t)r->nbv);
    struct { void *h; const void *d; size_t bytes; } cp[5] = {
        {fs, g->S, sizeof(double) * (size_t)r->n}, {ops->af, af, sizeof(float) * (size_t)r->na},
        {ops->bt, bt, sizeof(float) * (size_t)r->nbv}, {ops->an, an, sizeof(double) * (size_t)ra},
        {ops->bn, bn, sizeof(double) * (size_t)rb}};
    for (int i = 0; i < 5 && r->e == cudaSuccess; i++)
        r->e = cudaMemcpyAsync(cp[i].h, cp[i].d, cp[i].bytes, cudaMemcpyDeviceToHost, r->s);
    keep[0] = g->S;
    keep[1] = an;
    keep[2] = bn;
    const er_dev_stats *h = r->hst;
    er_dense_stats *st[2] = {ops->sa, ops->sb};
    for (int o = 0; o < 2; o++)
        *st[o] = (er_dense_stats){h[o].emin_lsb, h[o].emin, h[o].emax, h[o].qmin, h[o].any_nonzero};
}

/* The kept device copies of S_hat and the norms (er_dot_state's dev) released, on their device. */
static void er_mmdev_free(void *const *dev, int dev_id) {
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || (cur != dev_id && cudaSetDevice(dev_id) != cudaSuccess)) cur = -1;
    for (int i = 0; i < 3; i++) cudaFree(dev[i]);
    if (cur >= 0 && cur != dev_id) cudaSetDevice(cur);
    (void)cudaGetLastError(); /* (at exit, CUDA may be gone already) */
}

static er_status er_mmdev_finish(void *ctx, double *fs, const er_fast_ops *ops) {
    er_mmdev_gemm *g = ctx;
    er_dev_run *r = &g->r;
    void *keep[3] = {NULL, NULL, NULL};
    if (fs && r->e == cudaSuccess) er_mmdev_operands(g, fs, ops, keep);
    int dev = -1;
    if (keep[0] && cudaGetDevice(&dev) == cudaSuccess) /* S_hat and the norms stay: the reference's now */
        for (int i = 0; i < 3; i++) er_dev_detach(&r->db, keep[i]);
    er_status st = er_dev_end(r);
    if (keep[0] && dev >= 0 && st == ER_OK) {
        er_dot_state *d = er__dot(r->ref);
        memcpy(d->dev, keep, sizeof keep);
        d->dev_id = dev;
        d->dev_free = er_mmdev_free;
    } else if (keep[0] && dev >= 0) {
        er_mmdev_free(keep, dev);
    }
    return st;
}
#endif

er_status er_matmul_device(er_ref **out, const er_tensor *A, const er_tensor *B, void *stream) {
    ER_RETURN_IF_ERROR(er__matmul_args(out, A, B));
    er_ref *shapes; /* the shapes checked before any device access */
    ER_RETURN_IF_ERROR(er__matmul_shape_ref(&shapes, A, B));
    er_ref_free(shapes);
#ifndef ER_HAVE_CUDA
    (void)stream;
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    er_tensor hA, hB;
    void *pa = NULL, *pb = NULL;
    er_status st = er_tensor_from_device(&hA, &pa, A->format, A->ndim, A->shape, A->strides, A->data, stream);
    if (st == ER_OK) st = er_tensor_from_device(&hB, &pb, B->format, B->ndim, B->shape, B->strides, B->data, stream);
    er_mmdev_gemm g;
    memset(&g, 0, sizeof g);
    g.A = A;
    g.B = B;
    g.s = (cudaStream_t)stream;
    er_fast_gemm fg = {er_mmdev_start, er_mmdev_finish, &g};
    er_ref *ref = NULL;
    if (st == ER_OK) st = er__matmul_make_with(&ref, &hA, &hB, &fg);
    if (st != ER_OK) {
        free(pa);
        free(pb);
        return st;
    }
    er__dot(ref)->owned[0] = pa;
    er__dot(ref)->owned[1] = pb;
    *out = ref;
    return ER_OK;
#endif
}
