/* attn_internal.h: what attention's modules share (src/ops/attnmod.c): the state of q, k, v and the mask, the kv
 * heads' decoding, the keys a query sees, the forward's plan and the standard's check. */
#ifndef ER_ATTN_INTERNAL_H
#define ER_ATTN_INTERNAL_H

#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "enclose/attention.h"

/* The state of an attention reference: q, k and v (views, not copies); heads, sequence lengths, head dimensions and
 * batches; rows = nbatch * heads * sq (the LSE's elements), K = sk; the scale (0: 1/sqrt(dh)) and the mask. A module
 * built on it (the backward's) puts it first in its own state. */
typedef struct er_attn_state {
    er_tensor q, k, v;
    int64_t heads, kv_heads, sq, sk, dh, dv, nbatch, rows, K;
    double scale;
    int causal, bottom_right, window;
    int64_t win_l, win_r;
    /* fp8 attention (er_attention_fp8): its scales, each positive; fp8 = 0 for the other modules */
    int fp8;
    double dsc_q, dsc_k, dsc_v, sc_s, dsc_s, sc_o; /* descale_q, _k, _v, scale_s, descale_s (0: none given), scale_o */
} er_attn_state;
static inline er_attn_state *er__attn(const er_ref *r) { return (er_attn_state *)r->priv; }

/* A reference of module m whose state begins with q, k, v and opts checked (er_attention's rules); the shape is O's. */
ER_INTERNAL er_status er__attn_make(er_ref **out, const er_tensor *q, const er_tensor *k, const er_tensor *v,
                                    const er_attention_opts *opts, const er_op_module *m);
/* The element offset of t's [b (over the leading dimensions), h, 0, 0]. */
ER_INTERNAL int64_t er__attn_base(const er_tensor *t, int64_t b, int64_t h);
/* Decodes kv head (b, g): k (Sk x D), v (Sk x Dv; and as floats into vf unless NULL; the sums of |v_jd| from the
 * first key to each key into bsum (Sk x Dv) unless NULL), the keys' norm bounds and the prefix counts of keys with a
 * value not finite (Sk + 1). */
ER_INTERNAL void er__attn_load_kv(const er_ref *r, int64_t b, int64_t g, double *k, double *v, float *vf, double *bsum,
                                  double *kn, int64_t *bad);
/* The unmasked keys of query i: *j0 .. *j0 + *n - 1 (n = 0: none). */
ER_INTERNAL void er__attn_keys(const er_ref *r, int64_t i, int64_t *j0, int64_t *n);
/* The forward's plan for the standard (Theorems A2 and A3) with the output formats O and L. */
ER_INTERNAL er_status er__attn_plan_init(er_attn_plan *pl, const er_ref *r, const er_standard *std,
                                         const er_fmt_info *O, er_overflow ov_o, const er_fmt_info *L,
                                         er_overflow ov_l);
/* Lemma A2's constants of the standard's sums of products (cp per product, cg per block). */
ER_INTERNAL er_status er__attn_sums(const er_ref *ref, const er_standard *std, double *cp, double *cg);
/* The GPU's sums of the rows [r0, r0 + nrows) (devattention.c), as er__attn_row computes them on the host: per row its
 * scores' loop (raw: er_attn_raw's six values, then the largest (whi - wlo) / whi), its weights' fixed-point sums
 * (fx: lo and hi as 128-bit integers, low word first) and its N, A and B (na: 3 Dv values). */
typedef struct er_attn_given {
    int64_t r0, nrows;
    const double *raw;
    const uint64_t *fx;
    const double *na;
} er_attn_given;
/* The rows of g into shares share .. share + nt - 1 of the sinks (each a contiguous run, on nt threads): O's sets and
 * LSE's where checked, with g's sums in place of the host's loops over the keys; the same sets as er_covers'. */
ER_INTERNAL er_status er__attn_rows_given(const er_ref *ref, const er_standard *std, er_sinks *sk, int share, int nt,
                                          const er_attn_given *g);
/* Whether the standard applies to attention (any_order or mma:<arch>, compute fp32 or tf32, rounding to nearest). */
ER_INTERNAL er_status er__attn_check(const er_ref *ref, const er_standard *std);

#endif
