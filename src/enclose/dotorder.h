/* dotorder.h: sets of the fixed-order standards by monotone interval emulation (docs/algorithms/orders.md). */
#ifndef ER_DOTORDER_H
#define ER_DOTORDER_H

#include "format/format.h"
#include "enclose/anyorder.h"

/* An extended interval with a NaN flag: the state of the emulation. */
typedef struct er_iv { double lo, hi; int nan; } er_iv;

typedef struct er_order_plan {
    er_standard std;
    const er_fmt_info *F;          /* accumulator format (fp32 for compute=tf32) */
    const er_fmt_info *P;          /* format of split partials (F unless stated) */
    const er_fmt_info *fa, *fb;    /* operand formats after the tf32 conversion */
    er_round lo_mode, hi_mode;     /* nearest/nearest, or down/up for faithful rounding */
    int fma_never, fma_always;     /* which of the two evaluations of each product are allowed */
    int64_t bound_n[2];            /* cache of any-order constants by block length */
    er_anyorder_bound bound[2];
    er_acc acc;
    int have_acc;
    er_edge_scratch w;
    mpfr_t sl, sh;                 /* exact sums of partials */
    er_iv *parts;                  /* partial intervals */
    int64_t tcap;
    int a_bytes;                   /* A's storage bytes (triton's default vector width) */
    const int32_t *tpost;          /* tree: the postfix program (an element's index, or a negative entry: an addition),
                                      borrowed from the caller (er__order_plan_set_tree) */
    int64_t tnpost, tleaves;
    int32_t *tleaf;                /* tree: the element each stack entry is, or -1 for a sum */
} er_order_plan;

/* fa, fb: the operands' format descriptors (er__fmt_one() for the constant 1 of a reduction). A tree: plan needs
 * er__order_plan_set_tree before its first sum. */
ER_INTERNAL er_status er__order_plan_init(er_order_plan *pl, const er_standard *std, const er_fmt_info *fa,
                                          const er_fmt_info *fb);
ER_INTERNAL void er__order_plan_clear(er_order_plan *pl);
/* The tree of a tree: plan: its postfix program of npost entries over `leaves` elements, which must outlive the
 * plan. ER_ERR_NOMEM possible. */
ER_INTERNAL er_status er__order_plan_set_tree(er_order_plan *pl, const int32_t *post, int64_t npost, int64_t leaves);
/* The vector width of triton:BLOCK for a reduction of K elements of a format of a_bytes bytes: vec= if set, else
 * Triton's choice (16 bytes' worth where K is a multiple of 16, else 1, at most block / (32 warps), at least 1). */
ER_INTERNAL int er__triton_vec(const er_standard *s, int64_t K, int a_bytes);
/* The set in the accumulator (or partial) format of sum_k a[k] b[k] under the plan's standard (not any_order). */
ER_INTERNAL er_status er__dot_order(er_order_plan *pl, const er_dot_env *env, const double *a, const double *b,
                                    int64_t K, int special, er_cval *out, const er_fmt_info **fmt);

/* The tile loop's block length when the plan is a fixed order in fp32 rounding to nearest without fma that it computes
 * (sequential; blocked or split with sequential inner and outer sums, partials in F, or carry=fused) for operands of at
 * most 24 bits, with *outer set when partials are added to a total (blocked, split); 0 otherwise. */
ER_INTERNAL int64_t er__dot_order_tile_block(const er_order_plan *pl, int64_t K, int *outer);
/* out[t] (t < T <= 16): the sum of a[k] * tile[k * T + t] over k < K in that order: products rounded to fp32, partial
 * sums of `block` products from zero, each added in order to a total from +0 (outer) or the one sum itself. The
 * hardware's float operations are the single roundings of the interval emulation's steps (no contraction). */
ER_INTERNAL void er__dot_order_tile(int64_t block, int outer, const float *a, const float *tile, int64_t K, int T,
                                    float *out);

#endif
