/* devchain.c: er_covers_device of a chain whose elements the epilogue pass decides (docs/algorithms/chains.md, On
 * the GPU): the pass on the GPU over the output where it lies (devchain.cu), its base's state and the stages'
 * operands copied up from the reference; then the chain's covers on the host with the GPU's classes (chainmod.c),
 * which decides the elements the pass left open one by one and makes the report, as on host copies. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/cuda.h>
#include "format/format.h"
#include "ops/chainvec.h"
#include "ops/dotmod.h"
#include "ops/modkit.h"
#include "tensor/tensor_internal.h"

#ifdef ER_HAVE_CUDA
#include <cuda_runtime_api.h>
#include "cuda/devbufs.h"
#include "cuda/devchain.h"
#include "cuda/devrows.h"

static er_dev_vfmt er_dc_vfmt(er_vec_fmt f) {
    return (er_dev_vfmt){f.narrow, f.drop, f.half, f.mask, f.minn, f.big, f.maxv};
}

/* One run of the chain's pass on the GPU: its buffers and the first CUDA error. */
typedef struct er_dc_run {
    er_devbufs db;
    cudaStream_t s;
    cudaError_t e;
} er_dc_run;

/* n doubles of h copied to fresh device memory (NULL once an error is held). */
static double *er_dc_up(er_dc_run *r, const void *h, size_t bytes) {
    void *d = er_dev_alloc(&r->db, bytes, r->s, &r->e);
    if (r->e == cudaSuccess && bytes) r->e = cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, r->s);
    return d;
}

/* A stage's tensor operand's values at element offsets 0 to its last as doubles on the device (offsets by its shape
 * and strides there): fp32, fp16, bf16 or fp64, strides not negative; 0 where it does not take the operand. */
static int er_dc_operand(er_dc_run *r, const er_tensor *t, er_dev_epi_stage *ds, double **hold) {
    if ((t->format != ER_FP32 && t->format != ER_FP16 && t->format != ER_BF16 && t->format != ER_FP64) ||
        t->ndim > 8)
        return 0;
    int64_t last = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->strides[i] < 0) return 0;
        last += (t->shape[i] - 1) * t->strides[i];
        ds->shape[i] = t->shape[i];
        ds->strides[i] = t->strides[i];
    }
    double *h = malloc(sizeof(double) * (size_t)(last + 1));
    if (!h) return 0;
    er__load_step(er__simd(), t, 0, 1, last + 1, h); /* (the views' formats: any bits decode) */
    ds->ndim = t->ndim;
    ds->src = 1;
    ds->op = er_dc_up(r, h, sizeof(double) * (size_t)(last + 1));
    *hold = h; /* freed once the copy is done */
    return 1;
}

/* The base's state on the device: a matmul on the fast path (S_hat, the norms' bounds: er_matmul_device's where it
 * kept them on this device, else copied up; the batches' operands, the decision's constants for an fp32 compute
 * format) or a tensor's values; 0 for another base. */
static int er_dc_base(er_dc_run *r, const er_ref *base, const er_standard *std, er_dev_epi *h, double **hold) {
    const er_op_module *m = er__module_of(base);
    if (m == &er__matmul_module && er__dot(base)->fast) {
        const er_dot_state *d = er__dot(base);
        er_standard bs = *std;
        bs.fast_math = 0;
        er_tensor view;
        er_dot_ctx cx;
        if (er_tensor_view(&view, ER_FP32, base->ndim, base->shape, NULL, d->fs) != ER_OK ||
            er__dot_ctx_init(&cx, base, &view, &bs) != ER_OK) {
            er__ok();
            return 0;
        }
        er__dot_fast_consts(&h->fc, &cx);
        er__dot_ctx_clear(&cx);
        const er_mm_plan *pl = &d->plan;
        int64_t *ia = malloc(sizeof(int64_t) * (size_t)(2 * pl->nbatch + 1));
        if (h->fc.out_fmt != 0 || !ia) {
            free(ia);
            return 0;
        }
        for (int64_t b = 0; b < pl->nbatch; b++) er__matmul_batch_of(base, b, &ia[b], &ia[pl->nbatch + b]);
        h->base = 0;
        h->M = pl->M;
        h->N = pl->N;
        int dev = -1; /* er_matmul_device's copies on this device, else copies of the host's */
        if (d->dev_free && cudaGetDevice(&dev) == cudaSuccess && dev == d->dev_id) {
            h->fs = d->dev[0];
            h->an = d->dev[1];
            h->bn = d->dev[2];
        } else {
            h->fs = er_dc_up(r, d->fs, sizeof(double) * (size_t)base->n);
            h->an = er_dc_up(r, d->an, sizeof(double) * (size_t)(pl->a_batches * pl->M));
            h->bn = er_dc_up(r, d->bn, sizeof(double) * (size_t)(pl->b_batches * pl->N));
        }
        h->ia = (const int64_t *)er_dc_up(r, ia, sizeof(int64_t) * (size_t)(2 * pl->nbatch));
        h->ib = h->ia ? h->ia + pl->nbatch : NULL;
        *hold = (double *)ia;
        return 1;
    }
    const er_tensor *v;
    const char *name;
    if (m != &er__tensor_module || m->inputs(base, &v, &name, 1) != 1) return 0;
    double *x = malloc(sizeof(double) * (size_t)(base->n ? base->n : 1));
    if (!x) return 0;
    er__load_run(er__simd(), v, 0, base->n, x);
    h->base = 1;
    h->x = er_dc_up(r, x, sizeof(double) * (size_t)base->n);
    *hold = x;
    return 1;
}

/* The plan on the host (the stages' operands copied up): 0 where the GPU's pass does not take it. hold[] receives
 * the host memory the copies read, to free once they are done. */
static int er_dc_plan(er_dc_run *r, const er_epi *pl, const er_ref *base, const er_standard *std, er_dev_epi *h,
                      double **hold) {
    memset(h, 0, sizeof *h);
    h->ns = pl->ns;
    h->fn = pl->fn;
    h->nvar = pl->nvar;
    h->tri = pl->tri;
    h->can = pl->ulps >= 1.5;
    h->ofmt = er_dev_fmt(pl->out->format);
    h->o = er_dc_vfmt(pl->o);
    for (int i = 0; i < pl->ns; i++) {
        const er_stage *st = &pl->st[i];
        er_dev_epi_stage *ds = &h->st[i];
        ds->kind = (int)st->kind;
        if (st->kind == ER_STAGE_ADD || st->kind == ER_STAGE_MUL) {
            if (st->t && !er_dc_operand(r, st->t, ds, &hold[1 + i])) return 0;
            ds->c0 = st->scalar;
            ds->wc0 = pl->wop[i];
        } else if (st->kind == ER_STAGE_CAST) {
            ds->cast = er_dc_vfmt(pl->cast[i]);
        }
    }
    er__exp_tables(h->exp_tlo, h->exp_thi, &h->exp_lh, &h->exp_ll);
    return er_dc_base(r, base, std, h, &hold[0]);
}

/* The GPU's classes of every element into dec (host memory, n bytes) and its widest decided hull into *wrel, *widx;
 * the classes also into keep's device array where the report keeps them there. 0 where the pass does not take the
 * chain (nothing is then done); else 1, with r->e CUDA's first error. */
static int er_dc_decide(er_dc_run *r, const er_ref *ref, const er_tensor *out, const er_standard *std,
                        er_dev_keep *keep, uint8_t *dec, double *wrel, int64_t *widx) {
    er_epi pl;
    const er_ref *base;
    if (!er__chain_epi_of(ref, std, out, &pl, &base) || er_dev_fmt(out->format) < 0) return 0;
    int64_t n = ref->n;
    er_dev_epi *h = malloc(sizeof *h);
    double *hold[1 + ER_DEV_EPI_STAGES] = {NULL};
    int taken = h && er_dc_plan(r, &pl, base, std, h, hold);
    uint8_t *dcl = NULL;
    const er_dev_epi *dp = NULL;
    if (taken) {
        dp = (const er_dev_epi *)er_dc_up(r, h, sizeof *h);
        if (keep->want && r->e == cudaSuccess) {
            r->e = er_dev_keep_alloc(keep, n, r->s);
            dcl = keep->dcl;
        } else {
            dcl = er_dev_alloc(&r->db, (size_t)n, r->s, &r->e);
        }
    }
    double brel[ER_DEV_EPI_BLOCKS];
    long long bidx[ER_DEV_EPI_BLOCKS];
    double *drel = taken ? er_dev_alloc(&r->db, sizeof brel, r->s, &r->e) : NULL;
    long long *didx = taken ? er_dev_alloc(&r->db, sizeof bidx, r->s, &r->e) : NULL;
    if (taken && r->e == cudaSuccess) r->e = (cudaError_t)er__devchain_decide(dp, out->data, n, dcl, drel, didx, r->s);
    int locked = taken && r->e == cudaSuccess ? er_dev_lock(dec, (size_t)n, 1) : 0;
    if (taken && r->e == cudaSuccess) r->e = cudaMemcpyAsync(dec, dcl, (size_t)n, cudaMemcpyDeviceToHost, r->s);
    if (taken && r->e == cudaSuccess) r->e = cudaMemcpyAsync(brel, drel, sizeof brel, cudaMemcpyDeviceToHost, r->s);
    if (taken && r->e == cudaSuccess) r->e = cudaMemcpyAsync(bidx, didx, sizeof bidx, cudaMemcpyDeviceToHost, r->s);
    er_dev_free_all(&r->db, r->s);
    cudaError_t e2 = cudaStreamSynchronize(r->s); /* the copies done: their host memory may go */
    if (r->e == cudaSuccess) r->e = e2;
    er_dev_unlock(dec, locked);
    for (int i = 0; i <= ER_DEV_EPI_STAGES; i++) free(hold[i]);
    free(h);
    *wrel = -1;
    *widx = -1;
    for (int b = 0; taken && r->e == cudaSuccess && b < ER_DEV_EPI_BLOCKS; b++)
        if (brel[b] > *wrel || (brel[b] == *wrel && brel[b] >= 0 && bidx[b] < *widx)) {
            *wrel = brel[b];
            *widx = bidx[b];
        }
    return taken;
}

er_status er__dev_chain_covers(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std,
                               void *stream, int *taken) {
    *taken = 0;
    if (!ref || !std || er__module_of(ref) != &er__chain_module ||
        er__covers_precheck(er__module_of(ref), ref, 0, out, std) != ER_OK) {
        er__ok(); /* the host's path refuses it, with its message */
        return ER_OK;
    }
    er_dev_keep keep = er_dev_keep_of(rep);
    uint8_t *dec = malloc((size_t)(ref->n ? ref->n : 1));
    if (!dec) return ER_OK; /* the host's path */
    er_dc_run r = {{{0}, 0}, (cudaStream_t)stream, cudaSuccess};
    double wrel;
    int64_t widx;
    *taken = er_dc_decide(&r, ref, out, std, &keep, dec, &wrel, &widx);
    er_status st = ER_OK;
    if (*taken && r.e != cudaSuccess)
        st = er__fail(ER_ERR_DEVICE, "a CUDA call of the GPU chain path failed: %s (%s)", cudaGetErrorString(r.e),
                      cudaGetErrorName(r.e));
    (void)cudaGetLastError();
    er_tensor hv;
    void *hbuf = NULL;
    if (*taken && st == ER_OK)
        st = er_tensor_from_device(&hv, &hbuf, out->format, out->ndim, out->shape, out->strides, out->data, stream);
    if (*taken && st == ER_OK) {
        er_epi_pre pre = {dec, wrel, widx};
        st = er__covers_module(rep, er__module_of(ref), ref, &hv, std, &pre);
    }
    /* kept: the report's classes (the host's decisions of the open elements among them) over the GPU's */
    cudaError_t e = cudaSuccess;
    if (keep.dcl && st == ER_OK && rep->classes)
        e = cudaMemcpy(keep.dcl, rep->classes, (size_t)ref->n, cudaMemcpyHostToDevice);
    if (e != cudaSuccess)
        st = er__fail(ER_ERR_DEVICE, "copying the report's classes to the device failed: %s (%s)",
                      cudaGetErrorString(e), cudaGetErrorName(e));
    if (keep.dcl) er_dev_keep_end(&keep, rep, st);
    free(hbuf);
    free(dec);
    return st;
}
#endif
