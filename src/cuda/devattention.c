/* devattention.c: er_attention_covers_device, attention's check of O with q, k, v and O in device memory
 * (docs/algorithms/attention.md, On the GPU): each row's loops over its keys on the GPU (devattn.cu: the scores'
 * bounds, the weights' and their sums, N and A), in chunks of rows; each chunk's rows then on the host's threads from
 * those sums (er__attn_rows_given: the sets of every element, the MPFR enclosures of the roundings double leaves
 * open, the report through the engine's sinks) while the GPU computes the next chunk. What the GPU path does not take
 * runs on host copies. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/cuda.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "ops/attn_internal.h"
#include "tensor/tensor_internal.h"

#ifdef ER_HAVE_CUDA
#include <cuda_runtime_api.h>
#include "cuda/devbufs.h"
#include "cuda/devattn.h"

/* The device views and stream; fallback is set where the GPU path does not apply. The host copies of q, k, v and the
 * outputs (their memory allocated, nothing read there before the rows) are made while the GPU computes the first
 * chunk, on a stream of their own after the caller's work on its stream (ready, recorded first). */
typedef struct er_at_arg {
    const er_tensor *q, *k, *v;
    void *stream;
    int fallback;
    int ncp, copied;
    void *ch[5];
    const void *cd[5];
    size_t cb[5];
    cudaEvent_t ready;
} er_at_arg;

static er_status er_at_dev_covers(const er_ref *ref, const er_standard *std, er_sinks *sks);

/* Host views hv of the n device views dv, their memory allocated (hp, freed by the caller) and their copies queued
 * in a. */
static er_status er_at_copies(er_at_arg *a, const er_tensor *const *dv, er_tensor *hv, void **hp, int n) {
    for (int i = 0; i < n; i++) {
        hp[i] = NULL;
        ER_RETURN_IF_ERROR(er__host_view_alloc(&hv[i], &hp[i], &a->cb[a->ncp], dv[i]));
        a->ch[a->ncp] = hp[i];
        a->cd[a->ncp++] = dv[i]->data;
    }
    return ER_OK;
}

/* The host copies (once), on a stream that waits for a->ready: done when it returns. */
static cudaError_t er_at_fill(er_at_arg *a) {
    if (a->copied) return cudaSuccess;
    a->copied = 1;
    cudaStream_t c;
    cudaError_t e = cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking);
    if (e != cudaSuccess) return e;
    e = cudaStreamWaitEvent(c, a->ready, 0);
    for (int i = 0; i < a->ncp && e == cudaSuccess; i++) e = er__host_copy(a->ch[i], a->cd[i], a->cb[i], c);
    cudaError_t e2 = cudaStreamDestroy(c);
    return e != cudaSuccess ? e : e2;
}
#endif

/* O and LSE (outs[0], outs[1]; NULL: not checked) of attention into reps (nrep 1: O alone, into one report). */
static er_status er_attention_covers_device_run(er_report *reps, int nrep, const er_tensor *q, const er_tensor *k,
                                                const er_tensor *v, const er_attention_opts *opts,
                                                const er_tensor *const *outs, const er_standard *std, void *stream) {
    er__ok();
    ER_CHECK_NULL(reps, nrep == 1 ? "report" : "reports");
    ER_CHECK_NULL(outs, "outs");
    ER_CHECK_NULL(std, "standard");
    if (nrep == 1) ER_CHECK_NULL(outs[0], "out");
    if (!outs[0] && !outs[1]) return er__fail(ER_ERR_NULL, "out and lse are both NULL: nothing to check");
    er_ref *dref; /* the shapes, options, outputs and standard checked: its data pointers are the device's, which
                   * nothing reads */
    ER_RETURN_IF_ERROR(er_attention(&dref, q, k, v, opts));
    er_status st = ER_OK;
    for (int o = 0; o < nrep && st == ER_OK; o++)
        if (outs[o]) st = er__covers_precheck(&er__attention_module, dref, o, outs[o], std);
    er_ref_free(dref);
    ER_RETURN_IF_ERROR(st);
#ifndef ER_HAVE_CUDA
    (void)stream;
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    /* the host's reference on copies of q, k and v (the rows the MPFR enclosures take) and copies of the outputs,
     * which the engine reads: their memory now, their bytes while the GPU computes (er_at_fill) */
    const er_tensor *dv[3] = {q, k, v};
    er_tensor hv[5];
    const er_tensor *hout[2] = {NULL, NULL};
    void *hp[5] = {NULL, NULL, NULL, NULL, NULL};
    er_ref *ref = NULL;
    er_at_arg arg = {q, k, v, stream, 0, 0, 0, {NULL}, {NULL}, {0}, NULL};
    cudaError_t e = cudaEventCreateWithFlags(&arg.ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(arg.ready, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        if (arg.ready) cudaEventDestroy(arg.ready);
        return er__fail(ER_ERR_DEVICE, "a CUDA call of the GPU attention path failed: %s (%s)", cudaGetErrorString(e),
                        cudaGetErrorName(e));
    }
    st = er_at_copies(&arg, dv, hv, hp, 3);
    for (int o = 0; o < nrep && st == ER_OK; o++)
        if (outs[o]) {
            st = er_at_copies(&arg, &outs[o], &hv[3 + o], &hp[3 + o], 1);
            hout[o] = &hv[3 + o];
        }
    if (st == ER_OK) st = er_attention(&ref, &hv[0], &hv[1], &hv[2], opts);
    er_op_module m = er__attention_module;
    m.covers = er_at_dev_covers;
    if (st == ER_OK)
        st = nrep == 1 ? er__covers_module(reps, &m, ref, hout[0], std, &arg)
                       : er__covers_module_outputs(reps, &m, ref, hout, std, &arg);
    if (st == ER_OK && arg.fallback) {
        for (int o = 0; o < nrep; o++) er_report_clear(&reps[o]);
        e = er_at_fill(&arg);
        if (e != cudaSuccess)
            st = er__fail(ER_ERR_DEVICE, "copying the attention's tensors from the device failed: %s (%s)",
                          cudaGetErrorString(e), cudaGetErrorName(e));
        else st = nrep == 1 ? er_covers(reps, ref, hout[0], std) : er_covers_outputs(reps, ref, hout, 2, std);
    }
    cudaEventDestroy(arg.ready);
    er_ref_free(ref);
    for (int i = 0; i < 5; i++) free(hp[i]);
    return st;
#endif
}

er_status er_attention_covers_device(er_report *rep, const er_tensor *q, const er_tensor *k, const er_tensor *v,
                                     const er_attention_opts *opts, const er_tensor *out, const er_standard *std,
                                     void *stream) {
    const er_tensor *outs[2] = {out, NULL};
    er_status st = er_attention_covers_device_run(rep, 1, q, k, v, opts, outs, std, stream);
    er__report_finish(rep, st);
    return st;
}

er_status er_attention_covers_device_outputs(er_report *reps, const er_tensor *q, const er_tensor *k,
                                             const er_tensor *v, const er_attention_opts *opts,
                                             const er_tensor *const *outs, const er_standard *std, void *stream) {
    er_status st = er_attention_covers_device_run(reps, 2, q, k, v, opts, outs, std, stream);
    for (int o = 0; reps && o < 2; o++) er__report_finish(&reps[o], st);
    return st;
}

#ifdef ER_HAVE_CUDA
/* One check's device state. */
typedef struct er_at_run {
    const er_ref *ref;
    const er_standard *std;
    const er_attn_state *a;
    cudaStream_t s;
    er_devbufs db;
    cudaError_t e;
    er_devattn_consts c;
    double *q, *k, *v, *qn, *kn;      /* decoded (device) */
    double *bs;                       /* B's sums from each head's first key (NULL: B in the loop) */
    int64_t tph, ntiles, tc, nch;     /* tiles a head, in all, a chunk; chunks */
    double *slo, *shi;                /* a chunk's scores' bounds (device) */
    double *raw[3], *na[3];           /* a chunk's sums (device), three in turn: chunk c's in c mod 3 */
    uint64_t *fx[3];
    void *host[3];                    /* their copies (pinned host memory where CUDA gives it) */
    int hpin[3];                      /* which of them are pinned (er_host_buf_get) */
    cudaEvent_t done[3];              /* recorded after each copy */
} er_at_run;

/* The first row of tile T (T = ntiles: the rows' count). */
static int64_t er_at_row0(const er_at_run *r, int64_t T) {
    return T >= r->ntiles ? r->a->rows : (T / r->tph) * r->a->sq + (T % r->tph) * ER_DEVATTN_TILE;
}

/* Device view t decoded into doubles (nbh heads of S x Dd); NULL after an error. */
static double *er_at_decode(er_at_run *r, const er_tensor *t, int64_t nbh, int64_t heads) {
    int nd = t->ndim;
    int64_t S = t->shape[nd - 2], Dd = t->shape[nd - 1];
    int64_t *hb = malloc(sizeof(int64_t) * (size_t)nbh);
    if (!hb) {
        if (r->e == cudaSuccess) r->e = cudaErrorMemoryAllocation;
        return NULL;
    }
    for (int64_t bh = 0; bh < nbh; bh++) hb[bh] = er__attn_base(t, bh / heads, bh % heads);
    int64_t *base = er_dev_alloc(&r->db, sizeof(int64_t) * (size_t)nbh, r->s, &r->e);
    double *out = er_dev_alloc(&r->db, sizeof(double) * (size_t)(nbh * S * Dd), r->s, &r->e);
    if (r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(base, hb, sizeof(int64_t) * (size_t)nbh, cudaMemcpyHostToDevice, r->s);
    if (r->e == cudaSuccess) {
        int ec = er__devattn_decode(t->data, er_dev_fmt(t->format), base, nbh, S, Dd, t->strides[nd - 2],
                                    t->strides[nd - 1], out, r->s);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (r->e == cudaSuccess) r->e = cudaStreamSynchronize(r->s); /* hb is read by its copy until here */
    free(hb);
    return out;
}

/* The bytes chunks of R rows take: on the device (scores' bounds, three of raw, fx and na) and in one host buffer. */
static size_t er_at_dev_bytes(const er_attn_state *a, int64_t R) {
    return (size_t)R * (size_t)(16 * a->sk + 3 * 8 * (7 + 4 + 3 * a->dv));
}
static size_t er_at_host_bytes(const er_attn_state *a, int64_t R) { return (size_t)R * (size_t)(8 * (11 + 3 * a->dv)); }

/* Chunk ch's tiles [*T0, *T1) and its first row; its count of rows in *R. */
static int64_t er_at_chunk(const er_at_run *r, int64_t ch, int64_t *T0, int64_t *T1, int64_t *R) {
    *T0 = ch * r->tc;
    *T1 = *T0 + r->tc < r->ntiles ? *T0 + r->tc : r->ntiles;
    int64_t r0 = er_at_row0(r, *T0);
    *R = er_at_row0(r, *T1) - r0;
    return r0;
}

/* Queues chunk ch's loops over the keys (ch < nch), its sums into device buffers ch mod 3. */
static void er_at_kernels(er_at_run *r, int64_t ch) {
    int64_t T0, T1, R, r0 = er_at_chunk(r, ch, &T0, &T1, &R), b = ch % 3;
    if (r->e != cudaSuccess) return;
    int ec = er__devattn_rows(&r->c, r->q, r->k, r->v, r->bs, r->qn, r->kn, T0, T1, r0, r->slo, r->shi, r->raw[b],
                              r->fx[b], r->na[b], r->s);
    if (ec) r->e = (cudaError_t)ec;
}

/* Queues the copy of chunk ch's sums (ch < nch) into host buffer ch mod 3, then done[ch mod 3]. */
static void er_at_copy(er_at_run *r, int64_t ch) {
    int64_t T0, T1, R, b = ch % 3, Dv = r->a->dv;
    (void)er_at_chunk(r, ch, &T0, &T1, &R);
    if (r->e != cudaSuccess) return;
    double *hraw = r->host[b];
    uint64_t *hfx = (uint64_t *)(hraw + 7 * R);
    double *hna = (double *)(hfx + 4 * R);
    size_t braw = sizeof(double) * (size_t)(7 * R), bfx = sizeof(uint64_t) * (size_t)(4 * R);
    r->e = cudaMemcpyAsync(hraw, r->raw[b], braw, cudaMemcpyDeviceToHost, r->s);
    if (r->e == cudaSuccess) r->e = cudaMemcpyAsync(hfx, r->fx[b], bfx, cudaMemcpyDeviceToHost, r->s);
    if (r->e == cudaSuccess)
        r->e = cudaMemcpyAsync(hna, r->na[b], sizeof(double) * (size_t)(3 * Dv * R), cudaMemcpyDeviceToHost, r->s);
    if (r->e == cudaSuccess) r->e = cudaEventRecord(r->done[b], r->s);
}

/* The host's threads for a chunk of R rows. */
static int er_at_threads(const er_attn_state *a, int64_t R) {
    int nt = er__num_threads(R * a->sk * (a->dv + 8));
    return nt > R ? (int)(R > 0 ? R : 1) : nt;
}

/* The check's rows: the inputs decoded on the GPU, then chunk by chunk the GPU's sums and the host's rows. */
static er_status er_at_rows(er_at_run *r, er_sinks *sks) {
    const er_attn_state *a = r->a;
    int64_t nbq = a->nbatch * a->heads, nbk = a->nbatch * a->kv_heads, keys = nbk * a->sk;
    er_at_arg *arg = er__sinks_arg(sks);
    r->q = er_at_decode(r, arg->q, nbq, a->heads);
    r->k = er_at_decode(r, arg->k, nbk, a->kv_heads);
    r->v = er_at_decode(r, arg->v, nbk, a->kv_heads);
    r->qn = er_dev_alloc(&r->db, sizeof(double) * (size_t)a->rows, r->s, &r->e);
    r->kn = er_dev_alloc(&r->db, sizeof(double) * (size_t)keys, r->s, &r->e);
    if (r->e == cudaSuccess) {
        int ec = er__devattn_norms(&r->c, r->q, a->rows, r->k, r->v, keys, r->qn, r->kn, r->s);
        if (ec) r->e = (cudaError_t)ec;
    }
    if (!a->window) { /* every row's keys start at its head's first */
        r->bs = er_dev_alloc(&r->db, sizeof(double) * (size_t)(keys * a->dv), r->s, &r->e);
        int ec = r->e == cudaSuccess ? er__devattn_bsums(r->v, nbk, a->sk, a->dv, r->bs, r->s) : 0;
        if (ec) r->e = (cudaError_t)ec;
    }
    /* the chunks: a quarter of the free memory, at most 2 GiB, at least one tile */
    size_t fr = 0, tot = 0;
    if (r->e == cudaSuccess) r->e = cudaMemGetInfo(&fr, &tot);
    size_t budget = fr / 4 < ((size_t)1 << 31) ? fr / 4 : ((size_t)1 << 31);
    r->tph = (a->sq + ER_DEVATTN_TILE - 1) / ER_DEVATTN_TILE;
    r->ntiles = nbq * r->tph;
    r->tc = (int64_t)(budget / er_at_dev_bytes(a, ER_DEVATTN_TILE));
    const char *ev = getenv("EXACTREF_ATTN_TILES"); /* fewer tiles a chunk (more chunks), as the tests ask */
    long et = ev ? strtol(ev, NULL, 10) : 0;
    if (et >= 1 && et < r->tc) r->tc = et;
    if (r->tc < 1) r->tc = 1;
    if (r->tc > r->ntiles) r->tc = r->ntiles;
    r->nch = (r->ntiles + r->tc - 1) / r->tc;
    int64_t R = r->tc * ER_DEVATTN_TILE;
    r->slo = er_dev_alloc(&r->db, sizeof(double) * (size_t)(R * a->sk), r->s, &r->e);
    r->shi = er_dev_alloc(&r->db, sizeof(double) * (size_t)(R * a->sk), r->s, &r->e);
    for (int b = 0; b < 3; b++) {
        r->raw[b] = er_dev_alloc(&r->db, sizeof(double) * (size_t)(7 * R), r->s, &r->e);
        r->fx[b] = er_dev_alloc(&r->db, sizeof(uint64_t) * (size_t)(4 * R), r->s, &r->e);
        r->na[b] = er_dev_alloc(&r->db, sizeof(double) * (size_t)(3 * a->dv * R), r->s, &r->e);
    }
    if (r->e != cudaSuccess) return ER_OK;
    /* every chunk's threads are a run of the sinks' shares, in the rows' order */
    int shares = 0;
    for (int64_t ch = 0; ch < r->nch; ch++) {
        int64_t T0, T1, n;
        (void)er_at_chunk(r, ch, &T0, &T1, &n);
        shares += er_at_threads(a, n);
    }
    ER_RETURN_IF_ERROR(er__sinks_open(sks, shares));
    const er_sink *so = er__sinks_at(sks, 0, 0); /* N's sum as the host rows' plan takes it: O's format, else fp32 */
    r->c.ncomp = er__attn_ncomp(so ? so->O : er__fmt(ER_FP32));
    /* While the host takes chunk c's rows from host buffer c mod 3, the GPU has chunks c + 1 to c + 3 to compute
     * (their loops queued, and the copies of c + 1 and c + 2); chunk c + 3's copy is queued after them, as it writes
     * their buffer. The first chunks' loops run while the host allocates its buffers and copies the tensors. */
    for (int64_t ch = 0; ch < 3 && ch < r->nch; ch++) er_at_kernels(r, ch);
    for (int i = 0; i < 3 && r->e == cudaSuccess; i++) {
        if (!(r->host[i] = er_host_buf_get(er_at_host_bytes(a, R), &r->hpin[i])))
            return er__fail(ER_ERR_NOMEM, "cannot allocate the host buffers of the GPU attention path");
        r->e = cudaEventCreateWithFlags(&r->done[i], cudaEventDisableTiming);
    }
    for (int64_t ch = 0; ch < 3 && ch < r->nch; ch++) er_at_copy(r, ch);
    if (r->nch > 3) er_at_kernels(r, 3);
    if (r->e == cudaSuccess) r->e = er_at_fill(arg);
    er__progress_begin(a->rows);
    er_status st = ER_OK;
    int share = 0;
    for (int64_t ch = 0; ch < r->nch && st == ER_OK && r->e == cudaSuccess; ch++) {
        r->e = cudaEventSynchronize(r->done[ch % 3]);
        if (r->e != cudaSuccess) break;
        int64_t T0, T1, n, r0 = er_at_chunk(r, ch, &T0, &T1, &n);
        const double *hraw = r->host[ch % 3];
        const uint64_t *hfx = (const uint64_t *)(hraw + 7 * n);
        er_attn_given g = {r0, n, hraw, hfx, (const double *)(hfx + 4 * n)};
        int nt = er_at_threads(a, n);
        st = er__attn_rows_given(r->ref, r->std, sks, share, nt, &g);
        share += nt;
        if (ch + 3 < r->nch) er_at_copy(r, ch + 3);
        if (ch + 4 < r->nch) er_at_kernels(r, ch + 4);
    }
    er__progress_end();
    return st;
}

/* Whether the GPU path takes the check: q, k and v of fp32, fp16 or bf16, and the decoded inputs with one tile's
 * scores in the device's free memory. */
static int er_at_takes(const er_attn_state *a, const er_at_arg *arg) {
    if (er_dev_fmt(arg->q->format) < 0 || er_dev_fmt(arg->k->format) < 0 || er_dev_fmt(arg->v->format) < 0) return 0;
    if (a->rows < 1 || a->sk < 1) return 0;
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    double keys = (double)(a->nbatch * a->kv_heads * a->sk);
    double kb = (double)(a->dh + (a->window ? 1 : 2) * a->dv + 1); /* k, v, B's sums (no window), the norm */
    double need = 8.0 * ((double)a->rows * (double)(a->dh + 1) + keys * kb) +
                  4.0 * (double)er_at_dev_bytes(a, ER_DEVATTN_TILE);
    return need < 0.9 * (double)fr;
}

static er_status er_at_dev_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    er_at_arg *arg = er__sinks_arg(sks);
    const er_attn_state *a = er__attn(ref);
    if (!er_at_takes(a, arg)) {
        arg->fallback = 1;
        er__sinks_decline(sks);
        return ER_OK;
    }
    er_attn_plan pl;
    ER_RETURN_IF_ERROR(er__attn_plan_init(&pl, ref, std, er__fmt(ER_FP32), ER_OVERFLOW_IEEE, er__fmt(ER_FP32),
                                          ER_OVERFLOW_IEEE));
    er_attn_sconst sk = er__attn_sconst(&pl);
    er_at_run r;
    memset(&r, 0, sizeof r);
    r.ref = ref;
    r.std = std;
    r.a = a;
    r.s = (cudaStream_t)arg->stream;
    r.e = cudaSuccess;
    r.c = (er_devattn_consts){.D = a->dh, .Dv = a->dv, .Sq = a->sq, .Sk = a->sk, .H = a->heads, .Hkv = a->kv_heads,
                              .causal = a->causal, .bottom_right = a->bottom_right, .window = a->window,
                              .win_l = a->win_l, .win_r = a->win_r, .sc = pl.sc, .gD = sk.gD, .asc = sk.asc,
                              .screl = sk.screl, .c1 = 1 + (double)(a->dh + 2) * 0x1p-52};
    er__exp_tables(r.c.exp_tlo, r.c.exp_thi, &r.c.exp_lh, &r.c.exp_ll);
    er_status st = er_at_rows(&r, sks);
    er_dev_free_all(&r.db, r.s);
    cudaError_t e2 = cudaStreamSynchronize(r.s);
    if (r.e == cudaSuccess) r.e = e2;
    for (int i = 0; i < 3; i++) {
        er_host_buf_put(r.host[i], r.hpin[i]);
        if (r.done[i]) cudaEventDestroy(r.done[i]);
    }
    if (st == ER_OK && r.e != cudaSuccess)
        st = er__fail(ER_ERR_DEVICE, "a CUDA call of the GPU attention path failed: %s (%s)", cudaGetErrorString(r.e),
                      cudaGetErrorName(r.e));
    return st;
}
#endif
