/* abwdmod.c: attention_backward's op module (src/ops/module.h): from q, k, v, the forward's saved o and lse (or
 * none) and the gradient dO, three outputs dQ (q's shape), dK (k's) and dV (v's), as FlashAttention-style backward
 * kernels and torch's SDPA backends produce them. Share t takes a run of kv heads: its query heads' dQ rows and its
 * dK and dV, summed over the rows that see each key. The per-key bounds are src/enclose/attn_bwd.c's
 * (docs/algorithms/attention-backward.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include "format/format.h"
#include "ops/attn_internal.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"
#include "enclose/attn_bwd.h"
#include "enclose/ival.h"
#include "enclose/elementwise.h"

typedef struct er_abwd_state {
    er_attn_state a; /* q, k, v, the mask and the scale: first, so that attention's helpers read it */
    er_tensor o, lse, dout;
    int has_lse;
} er_abwd_state;
static er_abwd_state *er__abwd(const er_ref *r) { return (er_abwd_state *)r->priv; }
/* Query heads per kv head (0 where there are no heads: every output is then empty). */
static int64_t er_abwd_grp(const er_attn_state *a) { return a->kv_heads ? a->heads / a->kv_heads : 0; }

/* Whether t has exactly the shape nd, shape. */
static int er_abwd_shape_is(const er_tensor *t, int nd, const int64_t *shape) {
    if (t->ndim != nd) return 0;
    for (int i = 0; i < nd; i++)
        if (t->shape[i] != shape[i]) return 0;
    return 1;
}

er_status er_attention_backward(er_ref **out, const er_tensor *q, const er_tensor *k, const er_tensor *v,
                                const er_tensor *o, const er_tensor *lse, const er_tensor *dout,
                                const er_attention_opts *opts) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(o, "o");
    ER_CHECK_NULL(dout, "dout");
    ER_RETURN_IF_ERROR(er__tensor_check(o, "o"));
    ER_RETURN_IF_ERROR(er__tensor_check(dout, "dout"));
    if (lse) ER_RETURN_IF_ERROR(er__tensor_check(lse, "lse"));
    const er_tensor *t2[2] = {o, dout};
    static const char *const n2[2] = {"o", "dout"};
    for (int i = 0; i < 2; i++)
        if (er__fmt(t2[i]->format)->p > 24)
            return er__fail(ER_ERR_UNSUPPORTED,
                            "attention_backward takes o and dout of at most 24 significant bits (fp32, bf16, fp16, "
                            "fp8); %s is %s",
                            n2[i], er__fmt(t2[i]->format)->name);
    er_ref *r;
    ER_RETURN_IF_ERROR(er__attn_make(&r, q, k, v, opts, &er__attention_backward_module));
    /* o and dout have O's shape ([..., H, Sq, Dv], r's now); lse O's without its last dimension (or with it 1) */
    /* the message's sizes read before the reference is freed */
    long long H = (long long)er__abwd(r)->a.heads, Sq = (long long)er__abwd(r)->a.sq, Dv = (long long)er__abwd(r)->a.dv;
    int nd = r->ndim;
    if (!er_abwd_shape_is(o, r->ndim, r->shape) || !er_abwd_shape_is(dout, r->ndim, r->shape)) {
        er_ref_free(r);
        return er__fail(ER_ERR_SHAPE,
                        "o and dout must have the forward output's shape [..., H, Sq, Dv] (H = %lld, Sq = %lld, "
                        "Dv = %lld, %d dimensions)",
                        H, Sq, Dv, nd);
    }
    if (lse) {
        int64_t ls[ER_MAX_DIMS];
        memcpy(ls, r->shape, sizeof ls);
        ls[r->ndim - 1] = 1;
        if (!er_abwd_shape_is(lse, r->ndim - 1, r->shape) && !er_abwd_shape_is(lse, r->ndim, ls)) {
            er_ref_free(r);
            return er__fail(ER_ERR_SHAPE,
                            "lse must have the forward's LSE shape [..., H, Sq] (H = %lld, Sq = %lld, %d dimensions)",
                            H, Sq, nd - 1);
        }
    }
    er_abwd_state *s = er__abwd(r);
    s->o = *o;
    s->dout = *dout;
    s->has_lse = lse != NULL;
    if (lse) s->lse = *lse;
    /* the first output, dQ, has q's shape */
    r->shape[r->ndim - 1] = s->a.dh;
    r->n = s->a.rows * s->a.dh;
    *out = r;
    return ER_OK;
}

/* dq: q's shape; dk: k's; dv: v's. */
static er_status er_abwd_out_shape(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape) {
    const er_tensor *t = o == 0 ? &er__abwd(ref)->a.q : o == 1 ? &er__abwd(ref)->a.k : &er__abwd(ref)->a.v;
    *ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
    return er__out_shape_fits(ref, o, out, *ndim, shape);
}

static er_status er_abwd_check(const er_ref *ref, const er_standard *std) { return er__attn_check(ref, std); }

/* The plan: the forward's (its scores, and its LSE set where lse is not given) and the backward's constants. */
static er_status er_abwd_plan_init(er_abwd_plan *pl, const er_ref *r, const er_standard *std) {
    const er_abwd_state *s = er__abwd(r);
    const er_fmt_info *F32 = er__fmt(ER_FP32);
    memset(pl, 0, sizeof *pl);
    ER_RETURN_IF_ERROR(er__attn_plan_init(&pl->fwd, r, std, F32, ER_OVERFLOW_IEEE, F32, ER_OVERFLOW_IEEE));
    pl->has_lse = s->has_lse;
    double u = pl->u = 0x1p-24, uin = pl->uin = pl->fwd.uin;
    const er_tensor *ins[4] = {&s->a.q, &s->a.k, &s->a.v, &s->dout};
    pl->pmax = INFINITY;
    for (int i = 0; i < 4 && std->products != 1; i++) { /* products=compute: P and dS stay in fp32 */
        const er_fmt_info *f = er__fmt(ins[i]->format);
        pl->up = fmax(pl->up, ldexp(1.0, -f->p));
        pl->etap = fmax(pl->etap, f->min_sub);
        pl->pmax = fmin(pl->pmax, f->max);
    }
    if (std->qk_scale == 1) {
        /* an operand pre-scaled by c >= min(scale, sqrt(scale)) alone (Triton's tutorial: k by scale / ln 2): its
         * rounding's absolute part is scale / c <= max(1, sqrt(scale)) times eta / 2 in the scores */
        pl->fwd.qk_cabs = 1.0;
        pl->uqs = pl->fwd.uq;
        pl->uks = pl->fwd.uk;
        pl->etaqs = pl->fwd.etaq;
        pl->etaks = pl->fwd.etak;
    }
    double cp = pl->fwd.cp, cg = pl->fwd.cg, tf = 2 * uin + uin * uin;
    pl->nq = s->a.sk;
    pl->nk = er_abwd_grp(&s->a) * s->a.sq;
    double N = (double)(pl->nq > pl->nk ? pl->nq : pl->nk);
    pl->gP = ((cp * (double)s->a.dv + cg + 8) * u * (1 + 0x1p-10) * (1 + uin) * (1 + uin) + tf) * (1 + 0x1p-40);
    pl->gS = ((cp * N + 2 * cg) * u * (1 + 0x1p-20) + 8 * u + fmax(pl->uqs, pl->uks) * (1 + u) + tf) * (1 + 0x1p-40);
    pl->gV = ((cp * (double)pl->nk + 2 * cg) * u * (1 + 0x1p-20) + tf) * (1 + 0x1p-40);
    pl->gd = (N + 8) * 0x1p-53 * (1 + 0x1p-40);
    return ER_OK;
}

/* One share's kv heads [h0, h1) (over batch x kv heads). */
typedef struct er_abwd_job {
    const er_ref *ref;
    const er_standard *std;
    er_sink *sq, *sk, *sv;
    int64_t h0, h1;
    er_status st;
} er_abwd_job;

/* A share's buffers for one kv head. */
/* The rows whose terms of dK and dV are added together, each key's sums taking them in the rows' order (as one row
 * at a time would): a key's sums stay in cache across the tile's rows, where one row at a time streams every key's
 * sums once a row. */
#define ER_ABWD_TILE 8

typedef struct er_abwd_ctx {
    const er_ref *r;
    er_abwd_plan pl;
    er_attn_work w;
    er_attn_kv kv;
    er_abwd_keys keys[ER_ABWD_TILE]; /* a tile's rows' terms per key */
    double *kb, *vb, *kn, *vn, *qb, *ob, *gb, *dkc, *dkw, *dvc, *dvw, *dka, *dke, *dve, *dkm, *dvm, *cq, *rq, *eq, *aq,
        *ag, *kbuf; /* aq, ag: a tile's rows' |q| and |dO| */
    int tok[ER_ABWD_TILE];   /* whether each of a tile's rows claims its set */
    int64_t *kbad, *rbadd;
    er_abwd_row *rows;
    uint8_t *rowok;
    int64_t nr; /* rows per kv head: H / Hkv Sq */
    er_abwd_mcache mc; /* the MPFR terms of the last row or key, per precision */
} er_abwd_ctx;

static void er_abwd_ctx_close(er_abwd_ctx *c) {
    er__attn_work_free(&c->w);
    er__abwd_mcache_free(&c->mc);
    free(c->kbuf);
    free(c->kbad);
    free(c->rbadd);
    free(c->rows);
    free(c->rowok);
}

static er_status er_abwd_ctx_open(er_abwd_ctx *c, const er_ref *r, const er_standard *std) {
    const er_attn_state *a = &er__abwd(r)->a;
    int64_t D = a->dh, Dv = a->dv, Sk = a->sk, nr = er_abwd_grp(a) * a->sq;
    memset(c, 0, sizeof *c);
    c->r = r;
    c->nr = nr;
    ER_RETURN_IF_ERROR(er_abwd_plan_init(&c->pl, r, std));
    size_t nk = (size_t)Sk, nd = (size_t)(nr * D + 2 * nr * Dv + 5 * Sk * D + 5 * Sk * Dv +
                                          (3 + 8 * ER_ABWD_TILE) * Sk + (3 + ER_ABWD_TILE) * D + ER_ABWD_TILE * Dv + 8);
    c->kbuf = malloc(sizeof(double) * nd);
    c->kbad = malloc(sizeof(int64_t) * (nk + 1));
    c->rbadd = malloc(sizeof(int64_t) * (nk + 1));
    c->rows = malloc(sizeof(er_abwd_row) * (size_t)(nr ? nr : 1));
    c->rowok = malloc((size_t)(nr ? nr : 1));
    er_status st = er__attn_work_init(&c->w, Sk, Dv);
    if (st == ER_OK && (!c->kbuf || !c->kbad || !c->rbadd || !c->rows || !c->rowok))
        st = er__fail(ER_ERR_NOMEM, "cannot allocate an attention_backward head of %lld rows and %lld keys",
                      (long long)nr, (long long)Sk);
    if (st != ER_OK) {
        er_abwd_ctx_close(c);
        return st;
    }
    double *p = c->kbuf;
    c->kb = p; p += Sk * D;
    c->vb = p; p += Sk * Dv;
    c->kn = p; p += Sk;
    c->vn = p; p += Sk;
    c->qb = p; p += nr * D;
    c->ob = p; p += nr * Dv;
    c->gb = p; p += nr * Dv;
    c->dkc = p; p += Sk * D;
    c->dkw = p; p += Sk * D;
    c->dvc = p; p += Sk * Dv;
    c->dvw = p; p += Sk * Dv;
    c->dka = p; p += Sk;
    c->dke = p; p += Sk * D;
    c->dve = p; p += Sk * Dv;
    c->dkm = p; p += Sk * D;
    c->dvm = p; p += Sk * Dv;
    for (int k = 0; k < ER_ABWD_TILE; k++) {
        er_abwd_keys *ky = &c->keys[k];
        ky->pm = p; p += Sk;
        ky->pa = p; p += Sk;
        ky->wv = p; p += Sk;
        ky->ds = p; p += Sk;
        ky->w = p; p += Sk;
        ky->dsa = p; p += Sk;
        ky->ex = p; p += Sk;
        ky->exv = p; p += Sk;
    }
    c->eq = p; p += D;
    c->cq = p; p += D;
    c->rq = p; p += D;
    c->aq = p; p += ER_ABWD_TILE * D;
    c->ag = p;
    c->kv = (er_attn_kv){c->kb, c->vb, c->kn, c->kbad, NULL, NULL};
    return ER_OK;
}

/* The element offset of [b (over the leading dimensions), h, i] in t: q, o, dout ([..., H, S, X], or [S, X] for one
 * head: qnd, q's dimensions, says which) at their last index 0, or lse ([..., H, S] or [S], a trailing 1 allowed). */
static int64_t er_abwd_off(const er_tensor *t, int qnd, int64_t b, int64_t h, int64_t i) {
    int nl = qnd >= 3 ? qnd - 3 : 0;
    int64_t off = 0;
    for (int d = nl - 1; d >= 0; d--) {
        off += (b % t->shape[d]) * t->strides[d];
        b /= t->shape[d];
    }
    if (qnd >= 3) return off + h * t->strides[nl] + i * t->strides[nl + 1];
    return off + i * t->strides[0];
}

/* Decodes kv head hk (batch hk / Hkv, head hk % Hkv): k, v and their norms, the rows of its query heads; zeroes the
 * sums of dK and dV. */
static void er_abwd_load(er_abwd_ctx *c, int64_t hk) {
    const er_ref *r = c->r;
    const er_abwd_state *s = er__abwd(r);
    const er_attn_state *a = &s->a;
    int64_t D = a->dh, Dv = a->dv, Sk = a->sk, Sq = a->sq, grp = er_abwd_grp(a);
    int64_t b = hk / a->kv_heads, g = hk % a->kv_heads;
    int qnd = a->q.ndim;
    er__attn_load_kv(r, b, g, c->kb, c->vb, NULL, NULL, c->kn, c->kbad);
    for (int64_t j = 0; j < Sk; j++) {
        double ss = 0;
        for (int64_t d = 0; d < Dv; d++) ss += c->vb[j * Dv + d] * c->vb[j * Dv + d];
        c->vn[j] = isfinite(ss) ? er__up(sqrt(er__up(ss * (1 + (double)(Dv + 2) * 0x1p-52)))) : INFINITY;
    }
    for (int64_t hh = 0; hh < grp; hh++)
        for (int64_t i = 0; i < Sq; i++) {
            int64_t row = hh * Sq + i, h = g * grp + hh;
            double *q = c->qb + row * D, *o = c->ob + row * Dv, *dout = c->gb + row * Dv;
            int64_t qo = er_abwd_off(&a->q, qnd, b, h, i), oo = er_abwd_off(&s->o, qnd, b, h, i),
                    go = er_abwd_off(&s->dout, qnd, b, h, i);
            er__load_step(c->pl.fwd.simd, &a->q, qo, a->q.strides[qnd - 1], D, q);
            er__load_step(c->pl.fwd.simd, &s->o, oo, s->o.strides[qnd - 1], Dv, o);
            er__load_step(c->pl.fwd.simd, &s->dout, go, s->dout.strides[qnd - 1], Dv, dout);
            int64_t j0, n;
            er__attn_keys(r, i, &j0, &n);
            double lse = s->has_lse ? er__load(&s->lse, er_abwd_off(&s->lse, qnd, b, h, i)) : NAN;
            c->rows[row] = (er_abwd_row){q, o, dout, lse, j0, n};
        }
    memset(c->dkc, 0, sizeof(double) * (size_t)(4 * Sk * D + 4 * Sk * Dv + Sk));
    memset(c->rbadd, 0, sizeof(int64_t) * (size_t)(Sk + 1));
}

/* The correctly rounded exact value of element (which, a, d) from MPFR enclosures at 128, 512 and 2048 bits; *ex
 * its exact value rounded to double. Where 2048 bits leave it open (an exact value on a rounding boundary, which
 * only a rational one can be), 0 with both candidates in *l and *h: the element is then never called exact. */
static int er_abwd_mpfr(er_abwd_ctx *c, const er_sink *s, int which, int64_t a, int64_t d, double *ex, double *l,
                        double *h) {
    er_abwd_head hd = {c->rows, c->nr, &c->kv};
    for (mpfr_prec_t p = 128; p <= 2048; p *= 4) {
        mpfr_t lo, hi;
        mpfr_inits2(p + 64, lo, hi, (mpfr_ptr)0);
        er__abwd_exact_mpfr(&c->pl, &hd, &c->mc, which, a, d, p, lo, hi);
        *l = er__round_mpfr(s->O, lo, ER_ROUND_NEAREST, s->ov);
        *h = er__round_mpfr(s->O, hi, ER_ROUND_NEAREST, s->ov);
        *ex = mpfr_get_d(lo, MPFR_RNDN);
        mpfr_clears(lo, hi, (mpfr_ptr)0);
        if (*l == *h) return 1;
    }
    return 0;
}

/* An element's set and exact value into sink s: the exact value within exr of cen, the kernel's within rad (the
 * sums' weights) and ab (absolute parts) of it (Lemma B2). state 1: the element claims nothing; 2: a fully masked
 * row's dQ (0, or NaN). */
static void er_abwd_put(er_abwd_ctx *c, er_sink *s, int which, int64_t a, int64_t d, int64_t idx, double cen,
                        double rad, double exr, double ab, int state, int nan_ok, int mp_only) {
    const er_fmt_info *F32 = er__fmt(ER_FP32);
    er_cval cv;
    double ex = NAN, rd = NAN, l = NAN, h = NAN;
    int open = 0; /* the exact value's rounding left open: l and h join the set, no output is exact */
    if (state == 1) {
        er__cval_anything(&cv, F32);
    } else if (state == 2) {
        er__cval_from_interval(&cv, 0.0, 0.0, 1, F32);
        ex = rd = 0.0;
    } else {
        double e = er__up(exr * (1 + 0x1p-40) + 0x1p-1000), R = er__up(er__up(rad + e) + ab);
        er__cval_from_interval(&cv, er__dn(cen - R), er__up(cen + R), nan_ok, F32);
        double rl = er__round_double(s->O, er__dn(cen - e), ER_ROUND_NEAREST, s->ov),
               rh = er__round_double(s->O, er__up(cen + e), ER_ROUND_NEAREST, s->ov);
        ex = cen;
        if (rl == rh && !mp_only) rd = rl == 0 ? copysign(0.0, cen) : rl;
        else if (er_abwd_mpfr(c, s, which, a, d, &ex, &l, &h)) rd = l;
        else open = 1;
    }
    if (open) { /* both candidates in the set */
        er__cval_put(&cv, l);
        er__cval_put(&cv, h);
    }
    er_cset cs;
    er__cset_build(&cs, s->O, s->ov, !open, &cv, ex, rd);
    er__sink_put(s, idx, &cs);
}

/* A row's sums of dQ over its keys (their terms in ky): its centre cq, weights rq and eq, each d on its own in the
 * keys' order; *sap the sum of dsa. Built for the baseline, AVX2 and AVX-512. */
ER_ALWAYS_INLINE void er_abwd_dq_body(er_abwd_ctx *c, const er_abwd_keys *ky, int64_t j0, int64_t n, int64_t D,
                                     double *sap) {
    double sa = 0, *restrict cq = c->cq, *restrict rq = c->rq, *restrict eq = c->eq;
    for (int64_t d = 0; d < D; d++) cq[d] = rq[d] = eq[d] = 0;
    for (int64_t t = 0; t < n; t++) {
        const double *restrict kj = c->kb + (j0 + t) * D;
        double a = ky->ds[t], b = ky->w[t], e = ky->ex[t];
        for (int64_t d = 0; d < D; d++) {
            double k = kj[d], ak = fabs(k);
            cq[d] += a * k;
            rq[d] += b * ak;
            eq[d] += e * ak;
        }
        sa += ky->dsa[t];
    }
    *sap = sa;
}
ER_SIMD_BUILDS(er_abwd_dq, (er_abwd_ctx *c, const er_abwd_keys *ky, int64_t j0, int64_t n, int64_t D, double *sap),
               (c, ky, j0, n, D, sap), er_abwd_dq_body)

/* One key's sums of dK (or dV) over m rows, in the rows' order: yc += a_r x_r, yw += b_r ax_r, ye += e_r ax_r and,
 * with gqa, ym += g_r ax_r (x_r the row's q or dO, ax_r its magnitudes), each element of the sums on its own. Eight
 * elements at a time are held in locals across the rows, which the compiler keeps in registers; the additions are
 * those of one row at a time. */
ER_ALWAYS_INLINE void er_abwd_key_sums(int gqa, int m, const double *const *x, const double *const *ax,
                                       const double *a, const double *b, const double *e, const double *g, int64_t n,
                                       double *restrict yc, double *restrict yw, double *restrict ye,
                                       double *restrict ym) {
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
        double sc[8], sw[8], se[8], sm[8];
        for (int k = 0; k < 8; k++) {
            sc[k] = yc[d + k];
            sw[k] = yw[d + k];
            se[k] = ye[d + k];
            sm[k] = gqa ? ym[d + k] : 0;
        }
        for (int r = 0; r < m; r++) {
            const double *xr = x[r] + d, *axr = ax[r] + d;
            double ar = a[r], br = b[r], er = e[r], gr = g[r];
            for (int k = 0; k < 8; k++) {
                sc[k] += ar * xr[k];
                sw[k] += br * axr[k];
                se[k] += er * axr[k];
                if (gqa) sm[k] += gr * axr[k];
            }
        }
        for (int k = 0; k < 8; k++) {
            yc[d + k] = sc[k];
            yw[d + k] = sw[k];
            ye[d + k] = se[k];
            if (gqa) ym[d + k] = sm[k];
        }
    }
    for (; d < n; d++)
        for (int r = 0; r < m; r++) {
            yc[d] += a[r] * x[r][d];
            yw[d] += b[r] * ax[r][d];
            ye[d] += e[r] * ax[r][d];
            if (gqa) ym[d] += g[r] * ax[r][d];
        }
}

/* The terms of dK and dV of rows r0 .. r1 - 1 (a tile, their keys' terms in c->keys) into the keys' sums: key by key,
 * each key's sums taking the tile's rows in order. Built for the baseline, AVX2 and AVX-512. */
ER_ALWAYS_INLINE void er_abwd_tile_body(er_abwd_ctx *c, int64_t r0, int64_t r1, int64_t D, int64_t Dv, int64_t grp) {
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t row = r0; row < r1; row++) {
        const er_abwd_row *rw = &c->rows[row];
        double *aq = c->aq + (row - r0) * D, *ag = c->ag + (row - r0) * Dv;
        if (!c->tok[row - r0]) continue;
        for (int64_t d = 0; d < D; d++) aq[d] = fabs(rw->q[d]);
        for (int64_t d = 0; d < Dv; d++) ag[d] = fabs(rw->g[d]);
        lo = rw->j0 < lo ? rw->j0 : lo;
        hi = rw->j0 + rw->n > hi ? rw->j0 + rw->n : hi;
    }
    for (int64_t jj = lo; jj < hi; jj++) {
        /* the tile's rows that see key jj, in order: their vectors and their terms' factors */
        const double *xq[ER_ABWD_TILE], *xa[ER_ABWD_TILE], *xg[ER_ABWD_TILE], *xb[ER_ABWD_TILE];
        double f[8][ER_ABWD_TILE];
        int m = 0;
        for (int64_t row = r0; row < r1; row++) {
            const er_abwd_row *rw = &c->rows[row];
            const er_abwd_keys *ky = &c->keys[row - r0];
            int64_t t = jj - rw->j0;
            if (!c->tok[row - r0] || t < 0 || t >= rw->n) continue;
            xq[m] = rw->q;
            xa[m] = c->aq + (row - r0) * D;
            xg[m] = rw->g;
            xb[m] = c->ag + (row - r0) * Dv;
            f[0][m] = ky->ds[t];
            f[1][m] = ky->w[t];
            f[2][m] = ky->ex[t];
            f[3][m] = ky->pm[t];
            f[4][m] = ky->wv[t];
            f[5][m] = ky->exv[t];
            f[6][m] = ky->dsa[t];
            f[7][m] = ky->pa[t];
            c->dka[jj] += ky->dsa[t];
            m++;
        }
        if (grp < 2) {
            er_abwd_key_sums(0, m, xq, xa, f[0], f[1], f[2], f[6], D, c->dkc + jj * D, c->dkw + jj * D,
                             c->dke + jj * D, c->dkm + jj * D);
            er_abwd_key_sums(0, m, xg, xb, f[3], f[4], f[5], f[7], Dv, c->dvc + jj * Dv, c->dvw + jj * Dv,
                             c->dve + jj * Dv, c->dvm + jj * Dv);
        } else {
            er_abwd_key_sums(1, m, xq, xa, f[0], f[1], f[2], f[6], D, c->dkc + jj * D, c->dkw + jj * D,
                             c->dke + jj * D, c->dkm + jj * D);
            er_abwd_key_sums(1, m, xg, xb, f[3], f[4], f[5], f[7], Dv, c->dvc + jj * Dv, c->dvw + jj * Dv,
                             c->dve + jj * Dv, c->dvm + jj * Dv);
        }
    }
}
ER_SIMD_BUILDS(er_abwd_tile, (er_abwd_ctx *c, int64_t r0, int64_t r1, int64_t D, int64_t Dv, int64_t grp),
               (c, r0, r1, D, Dv, grp), er_abwd_tile_body)

/* Kv head hk: every row's dQ into j->sq, the sums of dK and dV, then theirs into j->sk and j->sv. */
static void er_abwd_head_run(er_abwd_ctx *c, const er_abwd_job *j, int64_t hk, int mp_only) {
    const er_abwd_state *s = er__abwd(c->r);
    const er_attn_state *a = &s->a;
    const er_abwd_plan *pl = &c->pl;
    int64_t D = a->dh, Dv = a->dv, Sk = a->sk, Sq = a->sq, grp = er_abwd_grp(a);
    double sc = pl->fwd.sc, asc = fabs(sc), msc = fmax(1.0, asc);
    er_abwd_load(c, hk);
    er__abwd_mcache_forget(&c->mc);
    int masked = 0;
    for (int64_t r0 = 0; r0 < c->nr; r0 += ER_ABWD_TILE) {
        int64_t r1 = c->nr - r0 < ER_ABWD_TILE ? c->nr : r0 + ER_ABWD_TILE;
        for (int64_t row = r0; row < r1; row++) {
            const er_abwd_row *rw = &c->rows[row];
            er_abwd_keys *ky = &c->keys[row - r0];
            int64_t n = rw->n, j0 = rw->j0;
            int ok = n > 0 && er__abwd_row(pl, &c->kv, c->vn, rw, &c->w, ky);
            c->tok[row - r0] = ok;
            masked |= n == 0;
            if (n > 0 && !ok) {
                c->rbadd[j0]++;
                c->rbadd[j0 + n]--;
            }
            if (!j->sq) continue;
            int64_t base = ((hk / a->kv_heads * a->heads) + hk % a->kv_heads * grp + row / Sq) * Sq * D +
                           (row % Sq) * D;
            double sa = 0;
            if (ok) er_abwd_dq(c->pl.fwd.simd, c, ky, j0, n, D, &sa);
            double g1 = 1 + (double)(n + 2) * 0x1p-53, ab = msc * ((double)(n + 8) * 0x1p-126 + pl->etaks * 0.5 * sa);
            for (int64_t d = 0; d < D; d++)
                er_abwd_put(c, j->sq, 0, row, d, base + d, ok ? sc * c->cq[d] : 0, ok ? asc * c->rq[d] * g1 : 0,
                            ok ? asc * c->eq[d] * g1 : 0, ab, n == 0 ? 2 : ok ? 0 : 1, 0, mp_only);
        }
        if (j->sk || j->sv) er_abwd_tile(c->pl.fwd.simd, c, r0, r1, D, Dv, grp);
    }
    /* GQA: each query head's dK and dV may be rounded to the output format before the group's sum, which may run in
     * that format (torch's SDPA): grp roundings of at most u_O times the sum of magnitudes and eta_O / 2 each, and
     * the sums' own errors grown by 1 + u_O (Lemma B3) */
    double uk = 0, ek = 0, uv = 0, ev = 0;
    if (grp > 1 && j->sk) {
        uk = ldexp(1.0, -j->sk->O->p);
        ek = (double)grp * j->sk->O->min_sub;
    }
    if (grp > 1 && j->sv) {
        uv = ldexp(1.0, -j->sv->O->p);
        ev = (double)grp * j->sv->O->min_sub;
    }
    double ggk = (double)grp * uk * (1 + 0x1p-20), ggv = (double)grp * uv * (1 + 0x1p-20);
    /* dK and dV: a key seen by a row that claims nothing claims nothing; without a saved LSE a fully masked row may
     * give NaN everywhere (torch's math path) */
    double gk = 1 + (double)(pl->nk + 2) * 0x1p-53;
    int nan_ok = masked && !pl->has_lse;
    int64_t bad = 0;
    for (int64_t jj = 0; jj < Sk && (j->sk || j->sv); jj++) {
        bad += c->rbadd[jj];
        if (j->sk)
            for (int64_t d = 0; d < D; d++)
                er_abwd_put(c, j->sk, 1, jj, d, (hk * Sk + jj) * D + d, sc * c->dkc[jj * D + d],
                            asc * (c->dkw[jj * D + d] * gk * (1 + uk) + ggk * c->dkm[jj * D + d]),
                            asc * c->dke[jj * D + d] * gk,
                            msc * ((double)(pl->nk + 8) * 0x1p-126 + pl->etaqs * 0.5 * c->dka[jj]) + ek, bad > 0,
                            nan_ok, mp_only);
    }
    bad = 0;
    for (int64_t jj = 0; jj < Sk && j->sv; jj++) {
        bad += c->rbadd[jj];
        for (int64_t d = 0; d < Dv; d++)
            er_abwd_put(c, j->sv, 2, jj, d, (hk * Sk + jj) * Dv + d, c->dvc[jj * Dv + d],
                        c->dvw[jj * Dv + d] * gk * (1 + uv) + ggv * c->dvm[jj * Dv + d], c->dve[jj * Dv + d] * gk,
                        (double)(pl->nk + 4) * 0x1p-126 + ev, bad > 0, nan_ok, mp_only);
    }
}

static void *er_abwd_run(void *arg) {
    er_abwd_job *j = arg;
    er_abwd_ctx c;
    const char *fast = getenv("EXACTREF_FAST"); /* =0: every exact result by MPFR, as the tests ask */
    int mp_only = fast && fast[0] == '0';
    j->st = er_abwd_ctx_open(&c, j->ref, j->std);
    if (j->st == ER_OK) {
        for (int64_t hk = j->h0; hk < j->h1; hk++) {
            if (er__cancelled()) {
                j->st = ER_ERR_CANCELLED;
                break;
            }
            er_abwd_head_run(&c, j, hk, mp_only);
            er__progress_step(1);
        }
        er_abwd_ctx_close(&c);
    }
    if (j->h0 > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread: MPFR's per-thread constants */
    return NULL;
}

static er_status er_abwd_covers(const er_ref *ref, const er_standard *std, er_sinks *sk) {
    const er_attn_state *a = &er__abwd(ref)->a;
    int64_t nh = a->nbatch * a->kv_heads, nr = er_abwd_grp(a) * a->sq;
    int nt = er__num_threads(nh * nr * a->sk * (a->dh + a->dv + 8));
    if (nt > nh) nt = nh > 0 ? (int)nh : 1;
    ER_RETURN_IF_ERROR(er__mem_check(8.0 *
                                         ((double)nr * (double)(a->dh + 2 * a->dv) +
                                          (double)a->sk * (double)(3 * a->dh + 3 * a->dv + 27 + 8 * ER_ABWD_TILE)) *
                                         nt,
                                     "the attention_backward heads' working sets"));
    ER_RETURN_IF_ERROR(er__sinks_open(sk, nt));
    er_abwd_job jobs[ER_MAX_THREADS];
    for (int t = 0; t < nt; t++)
        jobs[t] = (er_abwd_job){ref, std, er__sinks_at(sk, t, 0), er__sinks_at(sk, t, 1), er__sinks_at(sk, t, 2),
                                nh * t / nt, nh * (t + 1) / nt, ER_OK};
    er__run_jobs_progress(jobs, sizeof jobs[0], nt, er_abwd_run, nh);
    for (int t = 0; t < nt; t++) ER_RETURN_IF_ERROR(jobs[t].st);
    return ER_OK;
}

/* q, k, v, o, lse (when given) and dout, for the report's input checks. */
static int er_abwd_inputs(const er_ref *ref, const er_tensor **views, const char **names, int cap) {
    const er_abwd_state *s = er__abwd(ref);
    const er_tensor *t[6] = {&s->a.q, &s->a.k, &s->a.v, &s->o, &s->dout, &s->lse};
    static const char *const nm[6] = {"q", "k", "v", "o", "dout", "lse"};
    int n = s->has_lse ? 6 : 5, k = 0;
    for (int i = 0; i < n && k < cap; i++, k++) {
        views[k] = t[i];
        names[k] = nm[i];
    }
    return n;
}

static const char *const er_abwd_names[3] = {"dq", "dk", "dv"};

const er_op_module er__attention_backward_module = {
    .name = "attention_backward",
    .nout = 3,
    .out_names = er_abwd_names,
    .priv_size = sizeof(er_abwd_state),
    .takes = ER_TAKES_MMA | ER_TAKES_TF32 | ER_TAKES_EXP | ER_TAKES_LOG | ER_TAKES_FAST | ER_TAKES_FLUSH |
             ER_TAKES_ATTN | ER_TAKES_PRODUCTS,
    .inputs = er_abwd_inputs,
    .out_shape = er_abwd_out_shape,
    .check = er_abwd_check,
    .covers = er_abwd_covers,
};
