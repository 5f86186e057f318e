/* attnmod.c: the attention reference and its op module (src/ops/module.h): two outputs, O and LSE, whose elements
 * depend on one query row each. Rows run in contiguous runs, one per thread; a thread decodes a kv head once for the
 * run of rows that read it. The sets are src/enclose/attention.c's (docs/algorithms/attention.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <mpfr.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"
#include "enclose/attention.h"
#include "enclose/ival.h"
#include "enclose/mma.h"
#include "ops/attn_internal.h"

size_t er_attention_opts_sizeof(void) { return sizeof(er_attention_opts); }

er_status er__attn_make(er_ref **out, const er_tensor *q, const er_tensor *k, const er_tensor *v,
                        const er_attention_opts *opts, const er_op_module *m) {
    ER_CHECK_NULL(q, "q");
    ER_CHECK_NULL(k, "k");
    ER_CHECK_NULL(v, "v");
    const er_tensor *t[3] = {q, k, v};
    static const char *const names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        ER_RETURN_IF_ERROR(er__tensor_check(t[i], names[i]));
        const er_fmt_info *f = er__fmt(t[i]->format);
        if (f->p > 24)
            return er__fail(ER_ERR_UNSUPPORTED,
                            "attention takes q, k and v of at most 24 significant bits (fp32, bf16, fp16, "
                            "fp8); %s is %s",
                            names[i], f->name);
    }
    int nd = q->ndim;
    if (nd < 2 || k->ndim != nd || v->ndim != nd)
        return er__fail(ER_ERR_SHAPE,
                        "attention takes q, k and v of the same number of dimensions, at least 2 ([..., H, S, D]); "
                        "got %d, %d and %d",
                        q->ndim, k->ndim, v->ndim);
    int nl = nd >= 3 ? nd - 3 : 0;
    for (int i = 0; i < nl; i++)
        if (k->shape[i] != q->shape[i] || v->shape[i] != q->shape[i])
            return er__fail(ER_ERR_SHAPE,
                            "q, k and v must have the same leading dimensions (dimension %d: %lld, %lld, %lld)", i,
                            (long long)q->shape[i], (long long)k->shape[i], (long long)v->shape[i]);
    int64_t H = nd >= 3 ? q->shape[nd - 3] : 1, Hkv = nd >= 3 ? k->shape[nd - 3] : 1;
    int64_t Sq = q->shape[nd - 2], D = q->shape[nd - 1], Sk = k->shape[nd - 2], Dv = v->shape[nd - 1];
    if (nd >= 3 && v->shape[nd - 3] != Hkv)
        return er__fail(ER_ERR_SHAPE, "k and v must have the same number of heads (%lld and %lld)", (long long)Hkv,
                        (long long)v->shape[nd - 3]);
    if (k->shape[nd - 1] != D)
        return er__fail(ER_ERR_SHAPE, "q and k must have the same head dimension (%lld and %lld)", (long long)D,
                        (long long)k->shape[nd - 1]);
    if (v->shape[nd - 2] != Sk)
        return er__fail(ER_ERR_SHAPE, "k and v must have the same number of keys (%lld and %lld)", (long long)Sk,
                        (long long)v->shape[nd - 2]);
    if (D < 1 || D > 4096)
        return er__fail(ER_ERR_UNSUPPORTED, "attention takes a head dimension from 1 to 4096 (got %lld)", (long long)D);
    if (Sk > (INT64_C(1) << 31))
        return er__fail(ER_ERR_UNSUPPORTED, "attention takes at most 2^31 keys (got %lld)", (long long)Sk);
    er_attention_opts o = {0};
    if (opts) o = *opts;
    if (H != Hkv) {
        if (!o.enable_gqa)
            return er__fail(ER_ERR_SHAPE, "q has %lld heads and k and v %lld: set enable_gqa to share kv heads",
                            (long long)H, (long long)Hkv);
        if (Hkv < 1 || H % Hkv != 0)
            return er__fail(ER_ERR_SHAPE, "with enable_gqa, k and v's %lld heads must divide q's %lld", (long long)Hkv,
                            (long long)H);
    }
    if (!isfinite(o.scale)) return er__fail(ER_ERR_INVALID, "the scale must be finite (got %g)", o.scale);
    if ((unsigned)o.causal > 1 || (unsigned)o.bottom_right > 1 || (unsigned)o.window > 1 || (unsigned)o.enable_gqa > 1)
        return er__fail(ER_ERR_INVALID, "causal, bottom_right, window and enable_gqa are 0 or 1");
    if (o.window && (o.window_left < 0 || o.window_right < 0))
        return er__fail(ER_ERR_INVALID, "the window's left and right sizes must be nonnegative (got %lld and %lld)",
                        (long long)o.window_left, (long long)o.window_right);
    er_ref *r;
    ER_RETURN_IF_ERROR(er__ref_alloc(&r, m));
    er__attn(r)->q = *q;
    er__attn(r)->k = *k;
    er__attn(r)->v = *v;
    r->ndim = nd;
    int64_t nb = 1;
    for (int i = 0; i < nd; i++) r->shape[i] = q->shape[i];
    for (int i = 0; i < nl; i++) nb *= q->shape[i];
    r->shape[nd - 1] = Dv;
    er__attn(r)->heads = H;
    er__attn(r)->kv_heads = Hkv;
    er__attn(r)->sq = Sq;
    er__attn(r)->sk = Sk;
    er__attn(r)->dh = D;
    er__attn(r)->dv = Dv;
    er__attn(r)->nbatch = nb;
    er__attn(r)->rows = nb * H * Sq;
    r->n = er__attn(r)->rows * Dv;
    er__attn(r)->K = Sk;
    er__attn(r)->scale = o.scale;
    er__attn(r)->causal = o.causal;
    er__attn(r)->bottom_right = o.bottom_right;
    er__attn(r)->window = o.window;
    er__attn(r)->win_l = o.window_left;
    er__attn(r)->win_r = o.window_right;
    *out = r;
    return ER_OK;
}

er_status er_attention(er_ref **out, const er_tensor *q, const er_tensor *k, const er_tensor *v,
                       const er_attention_opts *opts) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    return er__attn_make(out, q, k, v, opts, &er__attention_module);
}

size_t er_attention_fp8_scales_sizeof(void) { return sizeof(er_attention_fp8_scales); }

er_status er_attention_fp8(er_ref **out, const er_tensor *q, const er_tensor *k, const er_tensor *v,
                           const er_attention_opts *opts, const er_attention_fp8_scales *scales) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(scales, "scales");
    static const char *const names[6] = {"descale_q", "descale_k", "descale_v", "scale_s", "descale_s", "scale_o"};
    const double f[6] = {scales->descale_q, scales->descale_k, scales->descale_v,
                         scales->scale_s,   scales->descale_s, scales->scale_o};
    for (int i = 0; i < 6; i++)
        if (!(f[i] >= 0 && f[i] <= 0x1p126))
            return er__fail(ER_ERR_INVALID,
                            "%s must be positive and finite, at most 2^126, or 0 for its default (got %g)", names[i],
                            f[i]);
    er_ref *r;
    ER_RETURN_IF_ERROR(er__attn_make(&r, q, k, v, opts, &er__attention_fp8_module));
    er_attn_state *a = er__attn(r);
    a->fp8 = 1;
    a->dsc_q = f[0] ? f[0] : 1;
    a->dsc_k = f[1] ? f[1] : 1;
    a->dsc_v = f[2] ? f[2] : 1;
    a->sc_s = f[3] ? f[3] : 1;
    a->dsc_s = f[4];
    a->sc_o = f[5] ? f[5] : 1;
    *out = r;
    return ER_OK;
}

/* O has q's shape with v's head dimension last; LSE O's shape without it (trailing size-1 dimensions accepted). */
static er_status er_attn_out_shape(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape) {
    if (o == 0) return er__out_shape_same(ref, o, out, ndim, shape);
    *ndim = o == 1 ? ref->ndim - 1 : 1; /* fp8's amax_s and amax_o: one value */
    for (int i = 0; i < *ndim; i++) shape[i] = o == 1 ? ref->shape[i] : 1;
    return er__out_shape_fits(ref, o, out, *ndim, shape);
}

/* The constants of Lemma A2 for the standard's sums of products: any_order, cg = 12 and cp by the operands (rounding
 * to nearest in any order, and every tensor core of sm80 and later for fp16, bf16 and tf32 operands); mma:<arch>,
 * that architecture's blocks of k products (docs/hardware/mma.md, Theorem M1): beta + u per block. */
er_status er__attn_sums(const er_ref *ref, const er_standard *std, double *cp, double *cg) {
    int tf = std->compute == ER_TF32;
    *cg = 12;
    if (std->order != ER_ORDER_MMA) {
        /* per product: rounding to nearest in any order, 1 (each product rounded at most once, each addition once);
         * the tensor cores of sm80 and later, (beta + u) / k: fp16 and bf16 1.5 (sm80: k = 8, beta + u = 12u), tf32 2
         * (k = 4, 8u). fp32 operands reach tensor cores only as tf32 (compute=tf32); fp8 ones are not held (mma:) */
        const er_fmt_info *ops[3] = { er__fmt(er__attn(ref)->q.format), er__fmt(er__attn(ref)->k.format),
                                      er__fmt(er__attn(ref)->v.format) };
        *cp = 1;
        for (int i = 0; i < 3; i++) {
            double c = tf ? 2.0 : ops[i]->p <= 4 ? 2.0 : ops[i]->p <= 11 ? 1.5 * (1 + 0x1p-20) : 1.0;
            if (c > *cp) *cp = c;
        }
        return ER_OK;
    }
    const er_fmt_info *fq = er__fmt(tf ? ER_TF32 : er__attn(ref)->q.format),
                      *fk = er__fmt(tf ? ER_TF32 : er__attn(ref)->k.format),
                      *fv = er__fmt(tf ? ER_TF32 : er__attn(ref)->v.format);
    er_mma_params a, b;
    ER_RETURN_IF_ERROR(er__mma_params(std->mma_arch, fq, fk, 0, &a));
    ER_RETURN_IF_ERROR(er__mma_params(std->mma_arch, fv, fv, 0, &b));
    *cp = *cg = 0;
    const er_mma_params *mp[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        double F = ldexp(1.0, -mp[i]->F),
               beta = (mp[i]->k + 1) * F + ldexp(1.0, 1 - mp[i]->acc_p) * (1 + (mp[i]->k + 1) * F);
        double g = (beta + 0x1p-24) / 0x1p-24 * (1 + 0x1p-40);
        if (g / mp[i]->k > *cp) *cp = g / mp[i]->k;
        if (g > *cg) *cg = g;
    }
    return ER_OK;
}

/* any_order in fp32 (or tf32 operands), the functions' accuracies and kv_block. */
er_status er__attn_check(const er_ref *ref, const er_standard *std) {
    if (std->div != 0)
        return er__fail(ER_ERR_STANDARD,
                        "div= does not apply to attention: its set holds both a division and a reciprocal");
    ER_RETURN_IF_ERROR(er__standard_takes(ref, std));
    if (std->order != ER_ORDER_ANY && std->order != ER_ORDER_MMA)
        return er__fail(ER_ERR_UNSUPPORTED,
                        "attention takes any_order (every flash-style evaluation) or mma:<arch> (its products "
                        "on that architecture's tensor cores) in this version");
    if (std->order == ER_ORDER_MMA) {
        double cp, cg;
        ER_RETURN_IF_ERROR(er__attn_sums(ref, std, &cp, &cg));
    }
    if (std->compute != ER_FP32 && std->compute != ER_TF32)
        return er__fail(ER_ERR_STANDARD,
                        "attention accumulates in fp32: compute=fp32, or tf32 for kernels that feed tensor cores "
                        "tf32 operands");
    if (std->compute == ER_TF32 && std->tf32 == ER_TF32_X3)
        return er__fail(ER_ERR_UNSUPPORTED, "attention with compute=tf32x3 is not modelled in this version");
    if (std->rounding != ER_RND_NEAREST) return er__fail(ER_ERR_STANDARD, "attention takes rounding=nearest");
    return ER_OK;
}

/* One thread's run of rows [r0, r1). */
typedef struct er_attn_job {
    const er_ref *ref;
    const er_standard *std;
    er_sink *so, *sl;
    int64_t r0, r1;
    er_status st;
    er_attn_amax am; /* fp8: the run's amax bounds (the largest of its rows') */
    const er_attn_given *given; /* the GPU's sums of the rows (NULL: the host's) */
} er_attn_job;

/* The element offset of t's [b (over the leading dimensions), h, 0, 0]. */
int64_t er__attn_base(const er_tensor *t, int64_t b, int64_t h) {
    int nd = t->ndim, nl = nd >= 3 ? nd - 3 : 0;
    int64_t off = nd >= 3 ? h * t->strides[nd - 3] : 0;
    for (int i = nl - 1; i >= 0; i--) { off += (b % t->shape[i]) * t->strides[i]; b /= t->shape[i]; }
    return off;
}

/* Decodes kv head (b, g): k, v (and vf; and bsum, er_attn_kv's), the keys' norm bounds and the prefix counts of keys
 * with a value not finite. */
void er__attn_load_kv(const er_ref *r, int64_t b, int64_t g, double *k, double *v, float *vf, double *bsum,
                      double *kn, int64_t *bad) {
    const er_tensor *K = &er__attn(r)->k, *V = &er__attn(r)->v;
    int nd = K->ndim, simd = er__simd();
    int64_t D = er__attn(r)->dh, Dv = er__attn(r)->dv, Sk = er__attn(r)->sk;
    int64_t ko = er__attn_base(K, b, g), vo = er__attn_base(V, b, g);
    bad[0] = 0;
    for (int64_t j = 0; j < Sk; j++) {
        double ss = 0, *kj = k + j * D, *vj = v + j * Dv;
        int nf = 0;
        er__load_step(simd, K, ko + j * K->strides[nd - 2], K->strides[nd - 1], D, kj);
        er__load_step(simd, V, vo + j * V->strides[nd - 2], V->strides[nd - 1], Dv, vj);
        for (int64_t d = 0; d < D; d++) {
            ss += kj[d] * kj[d];
            nf |= !isfinite(kj[d]);
        }
        for (int64_t d = 0; d < Dv; d++) nf |= !isfinite(vj[d]);
        for (int64_t d = 0; vf && d < Dv; d++) vf[j * Dv + d] = (float)vj[d]; /* exact: a value of at most 24 bits */
        for (int64_t d = 0; bsum && d < Dv; d++) bsum[j * Dv + d] = (j ? bsum[(j - 1) * Dv + d] : 0) + fabs(vj[d]);
        /* squares exact, their sum within (D + 1) 2^-53 of itself */
        kn[j] = nf ? INFINITY : er__up(sqrt(er__up(ss * (1 + (double)(D + 2) * 0x1p-52))));
        bad[j + 1] = bad[j] + nf;
    }
}

/* One thread's rows: the plan, its kv head decoded, the row's results. */
typedef struct er_attn_rowctx {
    const er_ref *r;
    er_attn_plan pl;
    er_attn_work w;
    er_attn_kv kv;
    double *kb, *vb, *kn, *qr, *oex, *ord, lex, lrd;
    float *vf;                 /* v as floats, for the sums over the keys */
    double *bsum;              /* B's sums from the first key (er_attn_kv's), without a window */
    int64_t *bad, cur_b, cur_g;
    er_cval *ocv, lcv;
    int lse;                   /* LSE's set wanted */
    const er_attn_given *given; /* the GPU's sums of the rows (NULL: the host's) */
} er_attn_rowctx;

/* The plan of the forward's sets for the standard (Theorems A2 and A3) with the output formats O and L. */
/* fp8 attention's plan (Theorem A4): the scale with its descales; P quantised as RN_V(fl(p scale_s)) and multiplied
 * back by descale_s: per key a relative (1 + u_V)(1 + u)(1 + m), m = |scale_s descale_s - 1|, and an absolute
 * eta_V / scale_s; the kernel's descale_s, descale_v and their product, three roundings of O. */
static er_status er_attn_plan_fp8(er_attn_plan *pl, const er_attn_state *a, const er_fmt_info *Vf) {
    double u = pl->u;
    pl->fp8 = 1;
    pl->sbase = pl->sc;
    pl->dq = a->dsc_q;
    pl->dk = a->dsc_k;
    pl->sc = pl->sbase * a->dsc_q * a->dsc_k;
    pl->dv = a->dsc_v;
    pl->so = a->sc_o;
    pl->of_lo = er__dn(a->dsc_v * a->sc_o);
    pl->of_hi = er__up(a->dsc_v * a->sc_o);
    double m;
    if (a->dsc_s) m = er__up(fabs(er__dn(a->sc_s * a->dsc_s) - 1) + fabs(er__up(a->sc_s * a->dsc_s) - 1));
    else m = frexp(a->sc_s, &(int){0}) == 0.5 ? 0.0 : u; /* a power of two's reciprocal is exact; else fl(1/scale_s) */
    pl->uv = er__up(((1 + pl->uv) * (1 + u) * (1 + m) - 1) * (1 + 0x1p-40));
    pl->etav = er__up(er__up(Vf->min_sub / a->sc_s) * (1 + m) * (1 + 0x1p-40));
    pl->o_rel = er__up(3 * u * (1 + 0x1p-20));
    pl->ss = a->sc_s;
    /* P scale_s below v's largest value plus half its spacing there rounds to at most that value */
    pl->vmax = Vf->max + ldexp(1.0, ilogb(Vf->max) - Vf->p);
    /* every p is at least as large as an exp of 0 may be, 1 + (U + 2) 2^-23, at its row's maximum (rows whose
     * arguments' roundings allow more are checked by er__attn_row) */
    double U = pl->exp_fast ? 3.0 : pl->U, pmax = er__up(a->sc_s * (1 + (U + 2) * 0x1p-23) * (1 + 0x1p-20));
    if (!(pmax < pl->vmax))
        return er__fail(ER_ERR_UNSUPPORTED,
                        "scale_s = %g could round P past %s's largest value %g (saturation is not modelled): a scale_s "
                        "below %g",
                        a->sc_s, Vf->name, Vf->max, pl->vmax / (1 + (U + 2) * 0x1p-23) / (1 + 0x1p-19));
    pl->amax = 1;
    return ER_OK;
}

er_status er__attn_plan_init(er_attn_plan *pl, const er_ref *r, const er_standard *std, const er_fmt_info *O,
                             er_overflow ov_o, const er_fmt_info *L, er_overflow ov_l) {
    int64_t D = er__attn(r)->dh, Dv = er__attn(r)->dv, Sk = er__attn(r)->sk;
    er__exp_init();
    memset(pl, 0, sizeof *pl);
    pl->simd = er__simd();
    pl->O = O;
    pl->ncomp = er__attn_ncomp(O);
    pl->ov_o = ov_o;
    pl->L = L;
    pl->ov_l = ov_l;
    pl->u = 0x1p-24;
    const er_fmt_info *Vf = er__fmt(er__attn(r)->v.format);
    pl->uv = ldexp(1.0, -Vf->p);
    pl->etav = Vf->min_sub;
    pl->uin = std->compute == ER_TF32 ? 0x1p-11 : 0.0;
    ER_RETURN_IF_ERROR(er__attn_sums(r, std, &pl->cp, &pl->cg));
    pl->U = std->exp_ulps ? std->exp_ulps : 2.0;
    pl->exp_fast = std->exp_fast || (std->fast_math == 1 && std->exp_ulps == 0);
    pl->Ulog = std->log_ulps ? std->log_ulps : 1.0;
    pl->D = D;
    pl->Dv = Dv;
    pl->Sk = Sk;
    pl->kv_block = std->kv_block ? std->kv_block : 16;
    pl->psum_fp32 = std->p_sum == 1;
    if (std->qk_scale == 1) {
        const er_fmt_info *Qf = er__fmt(er__attn(r)->q.format), *Kf = er__fmt(er__attn(r)->k.format);
        pl->uq = ldexp(1.0, -Qf->p);
        pl->uk = ldexp(1.0, -Kf->p);
        pl->etaq = Qf->min_sub;
        pl->etak = Kf->min_sub;
        pl->qkmax = Qf->max < Kf->max ? Qf->max : Kf->max;
    }
    pl->sc_default = er__attn(r)->scale == 0;
    pl->sc = er__attn(r)->scale != 0 ? er__attn(r)->scale : 1.0 / sqrt((double)D);
    if (er__attn(r)->fp8) ER_RETURN_IF_ERROR(er_attn_plan_fp8(pl, er__attn(r), Vf));
    return ER_OK;
}

/* The unmasked keys of query i: *j0 .. *j0 + *n - 1 (n = 0: none). */
void er__attn_keys(const er_ref *r, int64_t i, int64_t *j0, int64_t *n) {
    int64_t Sk = er__attn(r)->sk, Sq = er__attn(r)->sq;
    int64_t ii = i + (er__attn(r)->bottom_right ? Sk - Sq : 0), a = 0, b = Sk - 1;
    if (er__attn(r)->causal && ii < b) b = ii;
    if (er__attn(r)->window) {
        /* compared as distances from the query (small), so a window of up to INT64_MAX keys never overflows */
        if (ii - a > er__attn(r)->win_l) a = ii - er__attn(r)->win_l;
        if (b - ii > er__attn(r)->win_r) b = ii + er__attn(r)->win_r;
    }
    *n = b >= a ? b - a + 1 : 0;
    *j0 = *n ? a : 0;
}

/* The plan for the standard (sets) and the output formats O and L (exact values), and the row buffers. */
static er_status er_attn_ctx_open(er_attn_rowctx *c, const er_ref *r, const er_standard *std, const er_fmt_info *O,
                                  er_overflow ov_o, const er_fmt_info *L, er_overflow ov_l) {
    int64_t D = er__attn(r)->dh, Dv = er__attn(r)->dv, Sk = er__attn(r)->sk;
    memset(c, 0, sizeof *c);
    c->r = r;
    c->cur_b = c->cur_g = -1;
    ER_RETURN_IF_ERROR(er__attn_plan_init(&c->pl, r, std, O, ov_o, L, ov_l));
    /* the kv head's buffers wait for its first decoding (er_attn_ctx_kv): the GPU's rows decode one only for the few
     * rows MPFR finishes */
    c->qr = malloc(sizeof(double) * (size_t)(D + 1));
    c->ocv = malloc(sizeof(er_cval) * (size_t)(Dv + 1));
    c->oex = malloc(sizeof(double) * (size_t)(2 * Dv + 2));
    er_status st = er__attn_work_init(&c->w, Sk, Dv);
    if (st == ER_OK && (!c->qr || !c->ocv || !c->oex))
        st = er__fail(ER_ERR_NOMEM, "cannot allocate an attention row of %lld keys", (long long)Sk);
    if (st != ER_OK) return st;
    c->ord = c->oex + Dv + 1;
    return ER_OK;
}

static void er_attn_ctx_close(er_attn_rowctx *c) {
    er__attn_work_free(&c->w);
    free(c->qr);
    free(c->kb);
    free(c->bad);
    free(c->vf);
    free(c->bsum);
    free(c->ocv);
    free(c->oex);
}

/* Decodes kv head (b, g) into c unless it holds it; its buffers allocated at the first. v as floats, and B's sums
 * without a window (every row's keys then start at the first), only where the host sums over the keys (the GPU's rows
 * need the keys only for MPFR). */
static er_status er_attn_ctx_kv(er_attn_rowctx *c, int64_t b, int64_t g) {
    if (b == c->cur_b && g == c->cur_g) return ER_OK;
    if (!c->kb) {
        int64_t D = er__attn(c->r)->dh, Dv = er__attn(c->r)->dv, Sk = er__attn(c->r)->sk;
        int sums = !c->given, bsums = sums && !er__attn(c->r)->window;
        c->kb = malloc(sizeof(double) * (size_t)(Sk * D + Sk * Dv + Sk + 1));
        c->bad = malloc(sizeof(int64_t) * (size_t)(Sk + 1));
        c->vf = sums ? malloc(sizeof(float) * (size_t)(Sk * Dv + 1)) : NULL;
        c->bsum = bsums ? malloc(sizeof(double) * (size_t)(Sk * Dv + 1)) : NULL;
        if (!c->kb || !c->bad || (sums && !c->vf) || (bsums && !c->bsum)) {
            free(c->kb);
            free(c->bad);
            free(c->vf);
            free(c->bsum);
            c->kb = NULL;
            c->bad = NULL;
            c->vf = NULL;
            c->bsum = NULL;
            return er__fail(ER_ERR_NOMEM, "cannot allocate an attention head of %lld keys", (long long)Sk);
        }
        c->vb = c->kb + Sk * D;
        c->kn = c->vb + Sk * Dv;
        c->kv = (er_attn_kv){c->kb, c->vb, c->kn, c->bad, c->vf, c->bsum};
    }
    er__attn_load_kv(c->r, b, g, c->kb, c->vb, c->vf, c->bsum, c->kn, c->bad);
    c->cur_b = b;
    c->cur_g = g;
    return ER_OK;
}

/* Row `row`'s sets and exact results (ocv, oex, ord; lcv, lex, lrd where c->lse). */
static er_status er_attn_ctx_row(er_attn_rowctx *c, int64_t row) {
    const er_ref *r = c->r;
    int64_t D = er__attn(r)->dh, Dv = er__attn(r)->dv, Sq = er__attn(r)->sq, H = er__attn(r)->heads,
            grp = er__attn(r)->heads / er__attn(r)->kv_heads;
    int64_t i = row % Sq, h = (row / Sq) % H, b = row / (Sq * H), g = h / grp;
    const er_tensor *Q = &er__attn(r)->q;
    int nd = Q->ndim;
    int64_t qo = er__attn_base(Q, b, h) + i * Q->strides[nd - 2];
    er__load_step(c->pl.simd, Q, qo, Q->strides[nd - 1], D, c->qr);
    int64_t j0, n;
    er__attn_keys(r, i, &j0, &n);
    if (!c->given) {
        ER_RETURN_IF_ERROR(er_attn_ctx_kv(c, b, g));
        return er__attn_row(&c->pl, &c->kv, c->qr, j0, n, &c->w, c->lse, c->ocv, c->oex, c->ord, &c->lcv, &c->lex,
                            &c->lrd);
    }
    /* the GPU's sums of the row (a row without keys: nothing written there); the keys decoded only for roundings
     * double leaves open */
    const er_attn_given *gv = c->given;
    int64_t k = row - gv->r0;
    const double *rw = gv->raw + 7 * k;
    const uint64_t *fx = gv->fx + 4 * k;
    er_attn_raw raw = {0, 0, 0, 0, 0, 0};
    er_fxsum Ls = {0, 0};
    double rho = 0;
    if (n > 0) {
        raw = (er_attn_raw){rw[0], rw[1], rw[2], rw[3], rw[4], rw[5]};
        Ls = (er_fxsum){((unsigned __int128)fx[1] << 64) | fx[0], ((unsigned __int128)fx[3] << 64) | fx[2]};
        rho = rw[6];
        memcpy(c->w.N, gv->na + 3 * Dv * k, sizeof(double) * (size_t)(3 * Dv)); /* N, A, B */
    }
    /* a key holding a value that is not finite has an infinite norm bound: the row's largest, raw.kmax */
    ER_RETURN_IF_ERROR(er__attn_row_given(&c->pl, c->qr, j0, n, n > 0 && isinf(raw.kmax), &c->w, &raw, &Ls, rho,
                                          c->lse, c->ocv, c->oex, c->ord, &c->lcv, &c->lex, &c->lrd));
    if (c->w.mpfr_pending) {
        ER_RETURN_IF_ERROR(er_attn_ctx_kv(c, b, g));
        er__attn_row_mpfr(&c->pl, &c->kv, c->qr, j0, n, &c->w, c->ocv, c->oex, c->ord, &c->lcv, &c->lex, &c->lrd);
    }
    return ER_OK;
}

/* The larger of two runs' (or rows') amax bounds, into a. */
static void er_attn_amax_merge(er_attn_amax *a, const er_attn_amax *b) {
    a->any |= b->any;
    a->nan |= b->nan;
    a->o_lo = fmax(a->o_lo, b->o_lo);
    a->o_hi = fmax(a->o_hi, b->o_hi);
    a->s_lo = fmax(a->s_lo, b->s_lo);
    a->s_hi = fmax(a->s_hi, b->s_hi);
    a->o_ex = fmax(a->o_ex, b->o_ex);
    a->s_ex = fmax(a->s_ex, b->s_ex);
}

/* An amax output's set (fp8: amax_s, amax_o) into sink s: [lo, hi] of fp32 computed values (the kernel's max is
 * exact), NaN where an element may be NaN, everything where a row claims nothing; never called exact. */
static void er_attn_amax_put(er_sink *s, const er_attn_amax *a, double lo, double hi, double ex) {
    er_cval v;
    const er_fmt_info *F = er__fmt(ER_FP32);
    if (a->any) er__cval_anything(&v, F);
    else er__cval_from_interval(&v, er__round_double(F, lo, ER_ROUND_DOWN, ER_OVERFLOW_IEEE),
                                er__round_double(F, hi, ER_ROUND_UP, ER_OVERFLOW_IEEE), a->nan, F);
    er_cset cs;
    er__cset_build(&cs, s->O, s->ov, 0, &v, a->any ? NAN : ex, NAN);
    er__sink_put(s, 0, &cs);
}

/* O's element q of a row (er_row_set_fn): a rounding left open has its candidates in the set, none of them the exact
 * one. */
typedef struct er_attn_oset { const er_sink *sk; const er_cval *cv; const double *ex, *rd; const uint8_t *open; }
    er_attn_oset;
static void er_attn_o_set(const void *ctx, int64_t q, er_cset *c) {
    const er_attn_oset *v = ctx;
    int open = v->open[q];
    er__cset_build(c, v->sk->O, v->sk->ov, !open, &v->cv[q], v->ex[q], open ? NAN : v->rd[q]);
}

static er_status er_attn_rows(er_attn_job *j) {
    er_attn_rowctx c;
    const er_fmt_info *F32 = er__fmt(ER_FP32);
    er_status st = er_attn_ctx_open(&c, j->ref, j->std, j->so ? j->so->O : F32, j->so ? j->so->ov : ER_OVERFLOW_IEEE,
                                    j->sl ? j->sl->O : F32, j->sl ? j->sl->ov : ER_OVERFLOW_IEEE);
    c.lse = j->sl != NULL;
    c.given = j->given;
    int64_t Dv = er__attn(j->ref)->dv;
    er_row_rec rec; /* O's record: its rows come in increasing order, decided in runs */
    if (j->so) er__row_rec_begin(&rec, j->so, 1);
    for (int64_t row = j->r0; row < j->r1 && st == ER_OK; row++) {
        if (er__cancelled()) {
            st = ER_ERR_CANCELLED;
            break;
        }
        er__progress_step(1);
        st = er_attn_ctx_row(&c, row);
        if (st != ER_OK) break;
        if (j->so) {
            /* an element left open keeps a candidate in ord (er__attn_row_tail): NaN there, so that the runs leave
             * it to er_attn_o_set */
            for (int64_t d = 0; d < Dv; d++) c.ord[d] = c.w.open[d] ? NAN : c.ord[d];
            er_attn_oset v = { j->so, c.ocv, c.oex, c.ord, c.w.open };
            er__row_put_with(j->so, &rec, NULL, row * Dv, Dv, c.ocv, c.oex, c.ord, er_attn_o_set, &v);
        }
        if (j->sl) {
            er_cset cs;
            int open = c.w.open[Dv];
            er__cset_build(&cs, j->sl->O, j->sl->ov, !open, &c.lcv, c.lex, open ? NAN : c.lrd);
            er__sink_put(j->sl, row, &cs);
        }
        if (c.pl.amax) er_attn_amax_merge(&j->am, &c.w.am);
    }
    if (j->so) er__row_rec_end(&rec, j->so, st);
    er_attn_ctx_close(&c);
    return st;
}

/* er_ref_exact: O's element idx (its row computed whole), as a double and correctly rounded to f. */
static er_status er_attn_exact(const er_ref *ref, int64_t idx, const er_fmt_info *f, double *exact, double *rounded) {
    er_standard std;
    ER_RETURN_IF_ERROR(er_standard_init(&std));
    er_attn_rowctx c;
    er_status st = er_attn_ctx_open(&c, ref, &std, f, ER_OVERFLOW_DEFAULT, er__fmt(ER_FP32), ER_OVERFLOW_IEEE);
    if (st == ER_OK) st = er_attn_ctx_row(&c, idx / er__attn(ref)->dv);
    if (st == ER_OK) {
        if (exact) *exact = c.oex[idx % er__attn(ref)->dv];
        if (rounded) *rounded = c.ord[idx % er__attn(ref)->dv];
    }
    er_attn_ctx_close(&c);
    return st;
}

/* er_ref_rounded: every O element correctly rounded into out, a row at a time. */
static er_status er_attn_rounded(const er_ref *ref, er_tensor *out) {
    er_standard std;
    ER_RETURN_IF_ERROR(er_standard_init(&std));
    er_attn_rowctx c;
    er_status st =
        er_attn_ctx_open(&c, ref, &std, er__fmt(out->format), ER_OVERFLOW_DEFAULT, er__fmt(ER_FP32), ER_OVERFLOW_IEEE);
    for (int64_t row = 0; row < er__attn(ref)->rows && st == ER_OK; row++) {
        st = er_attn_ctx_row(&c, row);
        for (int64_t d = 0; d < er__attn(ref)->dv && st == ER_OK; d++)
            er__store_value(out, row * er__attn(ref)->dv + d, c.ord[d], ER_OVERFLOW_DEFAULT);
    }
    er_attn_ctx_close(&c);
    return st;
}

static void *er_attn_run(void *arg) {
    er_attn_job *j = arg;
    j->st = er_attn_rows(j);
    if (j->r0 > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread: MPFR's per-thread constants */
    return NULL;
}

er_status er__attn_rows_given(const er_ref *ref, const er_standard *std, er_sinks *sk, int share, int nt,
                              const er_attn_given *g) {
    er_attn_job jobs[ER_MAX_THREADS];
    for (int t = 0; t < nt; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].ref = ref;
        jobs[t].std = std;
        jobs[t].so = er__sinks_at(sk, share + t, 0);
        jobs[t].sl = er__sinks_at(sk, share + t, 1);
        jobs[t].r0 = g->r0 + g->nrows * t / nt;
        jobs[t].r1 = g->r0 + g->nrows * (t + 1) / nt;
        jobs[t].given = g;
    }
    er__run_jobs(jobs, sizeof jobs[0], nt, er_attn_run);
    for (int t = 0; t < nt; t++) ER_RETURN_IF_ERROR(jobs[t].st);
    return ER_OK;
}

static er_status er_attn_covers(const er_ref *ref, const er_standard *std, er_sinks *sk) {
    int64_t rows = er__attn(ref)->rows, per = er__attn(ref)->sk * (er__attn(ref)->dh + 2 * er__attn(ref)->dv + 4);
    int nt = er__num_threads(rows * (per > 0 ? per : 1));
    if (nt > rows) nt = rows > 0 ? (int)rows : 1;
    /* each thread's kv head and row: about 8 bytes per key and dimension (12 for v's, held as floats too), 120 per
     * column of scratch */
    ER_RETURN_IF_ERROR(
        er__mem_check((8.0 * (double)er__attn(ref)->sk * (double)(er__attn(ref)->dh + 1.5 * er__attn(ref)->dv + 11) +
                       120.0 * (double)(er__attn(ref)->dv + 1)) *
                          nt,
                      "the attention heads' working sets"));
    ER_RETURN_IF_ERROR(er__sinks_open(sk, nt));
    er_attn_job jobs[ER_MAX_THREADS];
    for (int t = 0; t < nt; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].ref = ref;
        jobs[t].std = std;
        jobs[t].so = er__sinks_at(sk, t, 0);
        jobs[t].sl = er__sinks_at(sk, t, 1);
        jobs[t].r0 = rows * t / nt;
        jobs[t].r1 = rows * (t + 1) / nt;
    }
    er__run_jobs_progress(jobs, sizeof jobs[0], nt, er_attn_run, rows);
    for (int t = 0; t < nt; t++) ER_RETURN_IF_ERROR(jobs[t].st);
    if (er__attn(ref)->fp8) { /* amax_s and amax_o: the largest of every row's bounds (no rows: 0) */
        er_attn_amax am;
        memset(&am, 0, sizeof am);
        for (int t = 0; t < nt; t++) er_attn_amax_merge(&am, &jobs[t].am);
        if (er__sinks_at(sk, 0, 2)) er_attn_amax_put(er__sinks_at(sk, 0, 2), &am, am.s_lo, am.s_hi, am.s_ex);
        if (er__sinks_at(sk, 0, 3)) er_attn_amax_put(er__sinks_at(sk, 0, 3), &am, am.o_lo, am.o_hi, am.o_ex);
    }
    return ER_OK;
}

/* q, k and v, for the report's input checks (er__ref_inputs). */
static int er_attn_inputs(const er_ref *ref, const er_tensor **views, const char **names, int cap) {
    static const char *const qkv[3] = {"q", "k", "v"};
    const er_tensor *t[3] = {&er__attn(ref)->q, &er__attn(ref)->k, &er__attn(ref)->v};
    int n = cap < 3 ? cap : 3;
    for (int i = 0; i < n; i++) { names[i] = qkv[i]; views[i] = t[i]; }
    return n;
}

static const char *const er_attn_names[4] = {"out", "lse", "amax_s", "amax_o"};

/* The forward's module fields, shared by the plain and the fp8 module. */
#define ER_ATTN_MODULE_COMMON \
    .takes = ER_TAKES_MMA | ER_TAKES_TF32 | ER_TAKES_EXP | ER_TAKES_LOG | ER_TAKES_FAST | ER_TAKES_TRITON | \
             ER_TAKES_FLUSH | ER_TAKES_ATTN, \
    .out_names = er_attn_names, .out_shape = er_attn_out_shape, .priv_size = sizeof(er_attn_state), \
    .check = er__attn_check, .covers = er_attn_covers, .exact = er_attn_exact, .rounded = er_attn_rounded, \
    .inputs = er_attn_inputs

const er_op_module er__attention_module = {.name = "attention", .nout = 2, ER_ATTN_MODULE_COMMON};

/* fp8 attention: the forward's rows with its scales (Theorem A4), and two one-value outputs, amax_s and amax_o. */
const er_op_module er__attention_fp8_module = {.name = "attention_fp8", .nout = 4, ER_ATTN_MODULE_COMMON};
