/* devxent.c: er_cross_entropy_covers_device, cross_entropy's check with its logits and outputs in device memory
 * (docs/algorithms/cross-entropy.md, On the GPU): every row's sums and its gradient's fast decision on the GPU
 * (devxe.cu); the rows it does not give whole, each row's loss from its sums and the reduction by the cross_entropy
 * module's own code on the host (src/ops/xentmod.c), through the engine's sinks. What the GPU path does not take runs
 * on host copies. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/cuda.h>
#include "format/format.h"
#include "ops/xent_internal.h"
#include "tensor/tensor_internal.h"

#ifdef ER_HAVE_CUDA
#include <cuda_runtime_api.h>
#include "cuda/devbufs.h"
#include "cuda/devrec.h"
#include "cuda/devxe.h"

/* The device views, the stream, the module's hook on the rows (filled by er_xe_covers) and its arrays; fallback is
 * set where the GPU path does not apply. */
typedef struct er_xe_arg {
    const er_tensor *x, *g; /* the logits and dlogits (NULL: not checked), device views */
    const int64_t *target;  /* host */
    int64_t ignore;
    void *stream;
    int fallback;
    er_xent_dev hook;
    uint8_t *whole;
    er_xent_rowsum *sums;
    er_dev_keep keep; /* dlogits' classes left on the device (er_report_keep_on_device) */
    int64_t *pos;     /* per row: its place in hx and hy where the rows the host takes were gathered, else -1 */
    double *hx, *hy;  /* those rows' logits and dlogits outputs as doubles (pinned where px, py) */
    int px, py;
} er_xe_arg;

/* Row r of the device view v (C elements) into C doubles at d. */
static er_status er_xe_row(const er_tensor *v, int64_t r, int64_t C, double *d) {
    size_t es = (size_t)er__fmt(v->format)->bits / 8, bytes = es * (size_t)C;
    void *h = malloc(bytes ? bytes : 1);
    if (!h) return er__fail(ER_ERR_NOMEM, "cannot allocate a cross_entropy row of %lld", (long long)C);
    cudaError_t e = cudaMemcpy(h, (const char *)v->data + es * (size_t)(r * C), bytes, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) {
        er_tensor hv;
        er_tensor_view(&hv, v->format, 1, &C, NULL, h);
        er__load_run(0, &hv, 0, C, d);
    }
    free(h);
    if (e != cudaSuccess)
        return er__fail(ER_ERR_DEVICE, "copying a cross_entropy row from the device failed: %s (%s)",
                        cudaGetErrorString(e), cudaGetErrorName(e));
    return ER_OK;
}

/* The hook's loader: row r's logits and, where y is not NULL, its dlogits outputs, from the device. */
static er_status er_xe_load(const er_xent_dev *d, int64_t r, double *x, double *y) {
    const er_xe_arg *a = d->ctx;
    int64_t C = a->x->shape[a->x->ndim - 1];
    if (a->pos && a->pos[r] >= 0) {
        memcpy(x, a->hx + a->pos[r] * C, sizeof(double) * (size_t)C);
        if (y) memcpy(y, a->hy + a->pos[r] * C, sizeof(double) * (size_t)C);
        return ER_OK;
    }
    ER_RETURN_IF_ERROR(er_xe_row(a->x, r, C, x));
    return y ? er_xe_row(a->g, r, C, y) : ER_OK;
}

static er_status er_xe_covers(const er_ref *ref, const er_standard *std, er_sinks *sks);

/* Host copies of the device views x and the outputs (either NULL), the reference on them, and covers into reps. */
static er_status er_xe_covers_host(er_report *reps, const er_tensor *x, const int64_t *target, int64_t ntarget,
                                   int reduction, int64_t ignore_index, double eps, const er_tensor *const *outs,
                                   const er_standard *std, void *stream) {
    er_tensor hv[3];
    void *hp[3] = {NULL, NULL, NULL};
    const er_tensor *ho[2] = {NULL, NULL}, *dv[3] = {x, outs[0], outs[1]};
    er_status st = ER_OK;
    for (int i = 0; i < 3 && st == ER_OK; i++)
        if (dv[i])
            st = er_tensor_from_device(&hv[i], &hp[i], dv[i]->format, dv[i]->ndim, dv[i]->shape, dv[i]->strides,
                                       dv[i]->data, stream);
    for (int o = 0; o < 2; o++) ho[o] = outs[o] ? &hv[1 + o] : NULL;
    er_ref *ref = NULL;
    if (st == ER_OK) st = er_cross_entropy(&ref, &hv[0], target, ntarget, reduction, ignore_index, eps);
    if (st == ER_OK) st = er_covers_outputs(reps, ref, ho, 2, std);
    er_ref_free(ref);
    for (int i = 0; i < 3; i++) er_host_free(hp[i]);
    return st;
}
#endif


static er_status er_xe_run(er_report *reps, const er_tensor *x, const int64_t *target, int64_t ntarget, int reduction,
                           int64_t ignore_index, double eps, const er_tensor *const *outs, const er_standard *std,
                           void *stream) {
    er__ok();
    ER_CHECK_NULL(reps, "reports");
    ER_CHECK_NULL(x, "logits");
    ER_CHECK_NULL(target, "target");
    ER_CHECK_NULL(outs, "outs");
    ER_CHECK_NULL(std, "standard");
    if (!outs[0] && !outs[1]) return er__fail(ER_ERR_NULL, "loss and dlogits are both NULL: nothing to check");
    ER_RETURN_IF_ERROR(er__tensor_check(x, "logits"));
    er_ref *ref; /* the shapes, targets, outputs and standard checked: its data pointer is the device's */
    ER_RETURN_IF_ERROR(er_cross_entropy(&ref, x, target, ntarget, reduction, ignore_index, eps));
    er_status st = ER_OK;
    for (int o = 0; o < 2 && st == ER_OK; o++)
        if (outs[o]) st = er__covers_precheck(&er__cross_entropy_module, ref, o, outs[o], std);
#ifndef ER_HAVE_CUDA
    (void)stream;
    er_ref_free(ref);
    ER_RETURN_IF_ERROR(st);
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    /* the loss (one value or one a row) is read from a host copy; dlogits on the device, by the GPU and the hook */
    er_tensor hl;
    void *pl = NULL;
    if (st == ER_OK && outs[0])
        st = er_tensor_from_device(&hl, &pl, outs[0]->format, outs[0]->ndim, outs[0]->shape, outs[0]->strides,
                                   outs[0]->data, stream);
    const er_tensor *eo[2] = {outs[0] ? &hl : NULL, outs[1]};
    er_xe_arg arg;
    memset(&arg, 0, sizeof arg);
    arg.x = x;
    arg.g = outs[1];
    arg.target = target;
    arg.ignore = ignore_index;
    arg.stream = stream;
    arg.hook.load = er_xe_load;
    arg.hook.ctx = &arg;
    if (outs[1]) arg.keep = er_dev_keep_of(&reps[1]);
    er_op_module m = er__cross_entropy_module;
    m.covers = er_xe_covers;
    if (st == ER_OK) {
        er__xent_attach_dev(ref, &arg.hook);
        st = er__covers_module_outputs(reps, &m, ref, eo, std, &arg);
    }
    if (outs[1]) er_dev_keep_end(&arg.keep, &reps[1], st);
    er_ref_free(ref);
    free(arg.whole);
    free(arg.sums);
    free(arg.pos);
    er_host_buf_put(arg.hx, arg.px);
    er_host_buf_put(arg.hy, arg.py);
    er_host_free(pl);
    if (st != ER_OK || !arg.fallback) return st;
    for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
    return er_xe_covers_host(reps, x, target, ntarget, reduction, ignore_index, eps, outs, std, stream);
#endif
}

er_status er_cross_entropy_covers_device(er_report *reps, const er_tensor *logits, const int64_t *target,
                                         int64_t ntarget, int reduction, int64_t ignore_index,
                                         double label_smoothing, const er_tensor *const *outs,
                                         const er_standard *std, void *stream) {
    er_status st = er_xe_run(reps, logits, target, ntarget, reduction, ignore_index, label_smoothing, outs, std,
                             stream);
    for (int o = 0; reps && o < 2; o++) er__report_finish(&reps[o], st);
    return st;
}

#ifdef ER_HAVE_CUDA
/* Whether the GPU path takes the check (plan: the rows' plan, its gradient format dlogits' or fp32 where dlogits is
 * not checked): logits and dlogits of fp32, fp16 or bf16, row-major, compute=fp32, the loss from the rows' sums
 * (no label smoothing; er__xent_sums_path) and the gradient's fast decision (er__xent_fast_ok). */
static int er_xe_takes(const er_ref *ref, const er_xe_arg *a, const er_standard *std, int64_t N, int64_t C,
                       er_xent_plan *plan) {
    const er_fmt_info *G = er__fmt(a->g ? a->g->format : ER_FP32);
    er__xent_plan_of(ref, std, G, ER_OVERFLOW_IEEE, 1, plan);
    return std->compute == ER_FP32 && er_dev_fmt(a->x->format) >= 0 && er__row_major(a->x) &&
           (!a->g || (er_dev_fmt(a->g->format) >= 0 && er__row_major(a->g))) && N >= 1 && C >= 1 &&
           C < INT32_MAX && er__xent_sums_path(plan) && er__xent_fast_ok(plan);
}

/* The kernel's constants of the plan. */
static void er_xe_consts(const er_xe_arg *a, const er_xent_plan *pl, int64_t ignore, er_devxe_consts *c) {
    er_xent_fastc q;
    er__xent_fast_consts(pl, &q);
    memset(c, 0, sizeof *c);
    c->U = pl->sm.U;
    c->exp_fast = pl->sm.exp_fast;
    c->div2 = pl->sm.div == 2;
    c->x_fmt = er_dev_fmt(a->x->format);
    c->g_fmt = a->g ? er_dev_fmt(a->g->format) : 0;
    c->grads = a->g != NULL;
    c->C = pl->C;
    c->ignore = ignore;
    c->g = q.g;
    c->ecl = q.ecl;
    c->ech = q.ech;
    c->oml = q.oml;
    c->omh = q.omh;
    c->rWl = q.rWl;
    c->rWh = q.rWh;
    c->e1l = q.e1l;
    c->e1h = q.e1h;
    c->W = pl->W;
    c->eps = pl->eps;
    c->s_narrow = pl->S->p < pl->F->p && !pl->compute_only;
    er__exp_tables(c->exp_tlo, c->exp_thi, &c->exp_lh, &c->exp_ll);
}

/* The rows on the GPU: their heads (sums), the ends of each one's log of its sum on the host (the second witnesses'),
 * their gradients; the sums and whether each row is given whole into a's arrays, the classes into the report's
 * (NULL: dlogits not checked). */
static er_status er_xe_gpu(er_xe_arg *a, const er_xent_plan *pl, const er_devxe_consts *c, int64_t N,
                           uint8_t *classes) {
    cudaStream_t s = (cudaStream_t)a->stream;
    cudaError_t e = cudaSuccess;
    er_devbufs db = {{NULL}, 0};
    int64_t C = c->C;
    int blocks = er__dev_blocks(N);
    er_devxe_sums *hs = malloc(sizeof *hs * (size_t)N);
    float *lw = malloc(sizeof(float) * 2 * (size_t)N);
    a->whole = malloc((size_t)N);
    a->sums = malloc(sizeof *a->sums * (size_t)N);
    er_status st = hs && lw && a->whole && a->sums
                       ? ER_OK
                       : er__fail(ER_ERR_NOMEM, "cannot allocate the sums of %lld rows", (long long)N);
    int64_t *dt = er_dev_alloc(&db, sizeof(int64_t) * (size_t)N, s, &e);
    er_devxe_sums *ds = er_dev_alloc(&db, sizeof *ds * (size_t)N, s, &e);
    uint8_t *dh = er_dev_alloc(&db, (size_t)N, s, &e), *dw = er_dev_alloc(&db, (size_t)N, s, &e);
    float *dlw = er_dev_alloc(&db, sizeof(float) * 2 * (size_t)N, s, &e);
    unsigned long long *dn = er_dev_alloc(&db, 2 * sizeof *dn, s, &e), hn[2] = {0, 0};
    uint8_t *dcl = NULL;
    if (classes && a->keep.want && e == cudaSuccess) e = er_dev_keep_alloc(&a->keep, N * C, s);
    if (classes) dcl = a->keep.want ? a->keep.dcl : er_dev_alloc(&db, (size_t)(N * C), s, &e);
    if (st == ER_OK && e == cudaSuccess)
        e = cudaMemcpyAsync(dt, a->target, sizeof(int64_t) * (size_t)N, cudaMemcpyHostToDevice, s);
    if (st == ER_OK && e == cudaSuccess) e = cudaMemsetAsync(dn, 0, 2 * sizeof *dn, s);
    if (st == ER_OK && e == cudaSuccess) {
        int ec = er__devxe_heads(a->x->data, dt, N, c, blocks, ds, dh, s);
        if (ec) e = (cudaError_t)ec;
    }
    if (st == ER_OK && e == cudaSuccess) e = cudaMemcpyAsync(hs, ds, sizeof *hs * (size_t)N, cudaMemcpyDeviceToHost, s);
    if (st == ER_OK && e == cudaSuccess) e = cudaMemcpyAsync(a->whole, dh, (size_t)N, cudaMemcpyDeviceToHost, s);
    if (st == ER_OK && e == cudaSuccess) e = cudaStreamSynchronize(s);
    /* the ends of each row's computed log (the second witnesses', MPFR's logs), and the rows' sums as the host
     * finishes them (er__xent_sums_finish) */
    for (int64_t r = 0; st == ER_OK && e == cudaSuccess && r < N; r++) {
        lw[2 * r] = lw[2 * r + 1] = NAN;
        if (!a->whole[r] || a->target[r] == a->ignore) continue;
        const er_devxe_sums *z = &hs[r];
        if (classes) er__xent_log_ends(pl, z->esl, z->esh, &lw[2 * r]);
        er_fxsum S = {((unsigned __int128)z->Slo1 << 64) | z->Slo0, ((unsigned __int128)z->Shi1 << 64) | z->Shi0};
        er_xent_rowsum *q = &a->sums[r];
        *q = (er_xent_rowsum){z->m, z->esl, z->esh, z->xt, z->tlo, z->thi, {0}};
        er__xent_sums_finish(&S, z->tlo, z->thi, z->sx, z->sa, z->xm, C, q->z);
    }
    int locked = 0;
    if (st == ER_OK && e == cudaSuccess && classes) {
        e = cudaMemcpyAsync(dlw, lw, sizeof(float) * 2 * (size_t)N, cudaMemcpyHostToDevice, s);
        if (e == cudaSuccess) {
            int ec = er__devxe_grads(a->x->data, a->g->data, dt, N, c, ds, dh, dlw, blocks, dw, dcl, dn, s);
            if (ec) e = (cudaError_t)ec;
        }
        if (e == cudaSuccess && !a->keep.want) {
            locked = er_dev_lock(classes, (size_t)(N * C), 1);
            e = cudaMemcpyAsync(classes, dcl, (size_t)(N * C), cudaMemcpyDeviceToHost, s);
        }
        if (e == cudaSuccess) e = cudaMemcpyAsync(a->whole, dw, (size_t)N, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess) e = cudaMemcpyAsync(hn, dn, sizeof hn, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        er_dev_unlock(classes, locked);
    }
    er_dev_free_all(&db, s);
    cudaError_t e2 = cudaStreamSynchronize(s);
    if (e == cudaSuccess) e = e2;
    if (st == ER_OK && e != cudaSuccess)
        st = er__fail(ER_ERR_DEVICE, "a CUDA call of the GPU cross_entropy path failed: %s (%s)",
                      cudaGetErrorString(e), cudaGetErrorName(e));
    free(hs);
    free(lw);
    a->hook.whole = a->whole;
    a->hook.sums = a->sums;
    a->hook.counts[0] = (int64_t)hn[0];
    a->hook.counts[1] = (int64_t)hn[1];
    return st;
}

/* The rows the host takes (those the GPU did not give whole), gathered on the GPU into host memory as doubles, their
 * logits and dlogits outputs (the logits twice where dlogits is not checked), at once where they take at most 1 GiB:
 * the loader reads them there (else, or where the environment's EXACTREF_XENT_GATHER is 0, each row is copied when
 * it is taken). */
static er_status er_xe_prefetch(er_xe_arg *a, int64_t N, int64_t C) {
    int64_t np = 0;
    for (int64_t r = 0; r < N; r++) np += !a->whole[r];
    const char *ev = getenv("EXACTREF_XENT_GATHER"); /* =0: row by row (the tests of that path) */
    if (np == 0 || 16.0 * (double)np * (double)C > 0x1p30 || (ev && ev[0] == '0' && !ev[1])) return ER_OK;
    cudaStream_t s = (cudaStream_t)a->stream;
    cudaError_t e = cudaSuccess;
    er_devbufs db = {{NULL}, 0};
    size_t bytes = sizeof(double) * (size_t)(np * C);
    a->pos = malloc(sizeof(int64_t) * (size_t)N);
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)np);
    a->hx = er_host_buf_get(bytes, &a->px);
    a->hy = er_host_buf_get(bytes, &a->py);
    if (!a->pos || !rows || !a->hx || !a->hy) { /* then row by row */
        free(rows);
        free(a->pos);
        a->pos = NULL;
        return ER_OK;
    }
    for (int64_t r = 0, k = 0; r < N; r++) {
        a->pos[r] = a->whole[r] ? -1 : k;
        if (!a->whole[r]) rows[k++] = r;
    }
    int64_t *drows = er_dev_alloc(&db, sizeof(int64_t) * (size_t)np, s, &e);
    double *dx = er_dev_alloc(&db, bytes, s, &e), *dy = er_dev_alloc(&db, bytes, s, &e);
    if (e == cudaSuccess) e = cudaMemcpyAsync(drows, rows, sizeof(int64_t) * (size_t)np, cudaMemcpyHostToDevice, s);
    const er_tensor *o = a->g ? a->g : a->x;
    if (e == cudaSuccess) {
        int ec = er__dev_gather(drows, np, a->x->data, er_dev_fmt(a->x->format), o->data, er_dev_fmt(o->format), C,
                                dx, dy, s);
        if (ec) e = (cudaError_t)ec;
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(a->hx, dx, bytes, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaMemcpyAsync(a->hy, dy, bytes, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    er_dev_free_all(&db, s);
    cudaError_t e2 = cudaStreamSynchronize(s);
    if (e == cudaSuccess) e = e2;
    free(rows);
    if (e != cudaSuccess) {
        free(a->pos);
        a->pos = NULL;
        return er__fail(ER_ERR_DEVICE, "gathering cross_entropy's rows on the device failed: %s (%s)",
                        cudaGetErrorString(e), cudaGetErrorName(e));
    }
    return ER_OK;
}

/* Where dlogits' classes stay on the device: those the host wrote for the rows it took, copied up over the GPU's (runs
 * of consecutive rows at once). */
static er_status er_xe_keep_rows(er_xe_arg *a, const uint8_t *classes, int64_t N, int64_t C) {
    cudaStream_t s = (cudaStream_t)a->stream;
    cudaError_t e = cudaSuccess;
    for (int64_t i = 0, j; i < N && e == cudaSuccess; i = j) {
        for (j = i + 1; j < N && !a->whole[j] == !a->whole[i]; j++) {}
        if (!a->whole[i])
            e = cudaMemcpyAsync(a->keep.dcl + i * C, classes + i * C, (size_t)((j - i) * C), cudaMemcpyHostToDevice,
                                s);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess)
        return er__fail(ER_ERR_DEVICE, "copying cross_entropy's classes to the device failed: %s (%s)",
                        cudaGetErrorString(e), cudaGetErrorName(e));
    return ER_OK;
}

/* The GPU path's covers: the rows on the GPU, then the module's covers over them through the hook. */
static er_status er_xe_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    er_xe_arg *a = er__sinks_arg(sks);
    er_xent_plan plan;
    int64_t N = a->x->ndim == 2 ? a->x->shape[0] : 1, C = a->x->shape[a->x->ndim - 1];
    if (!er_xe_takes(ref, a, std, N, C, &plan)) {
        a->fallback = 1;
        er__sinks_decline(sks);
        return ER_OK;
    }
    er_devxe_consts c;
    er_xe_consts(a, &plan, a->ignore, &c);
    uint8_t *classes = a->g ? er__sinks_classes(sks, 1) : NULL;
    ER_RETURN_IF_ERROR(er_xe_gpu(a, &plan, &c, N, classes));
    ER_RETURN_IF_ERROR(er_xe_prefetch(a, N, C));
    ER_RETURN_IF_ERROR(er__cross_entropy_module.covers(ref, std, sks));
    return a->keep.dcl ? er_xe_keep_rows(a, classes, N, C) : ER_OK;
}
#endif
