/* dotmod.h: the matmul module's per-thread state and the pieces of it that the GPU matmul path (src/cuda/devcovers.c)
 * runs on the host: the exact engine's set of one element, and the fast path's constants. */
#ifndef ER_DOTMOD_H
#define ER_DOTMOD_H

#include "format/format.h"
#include "ops/modkit.h"
#include "ops/fastdecide.h"
#include "ops/ref_internal.h"
#include "enclose/anyorder.h"
#include "enclose/dotorder.h"
#include "enclose/mma.h"
#include "standard/tree.h"

/* The state of one thread of covers or emulate. */
typedef struct er_dot_ctx {
    const er_ref *ref;
    const er_standard *std;
    const er_fmt_info *F, *O;       /* accumulator, output */
    er_overflow ov_out;
    int any;                        /* order any: the exact result joins the set */
    er_anyorder_bound bd;           /* order any */
    er_edge_scratch w;
    er_order_plan plan;             /* fixed orders */
    er_tree tree;                   /* tree: the standard's tree, which plan borrows */
    int have_plan;
    er_acc acc;                     /* order any over converted operands */
    int have_acc;
    er_mma_params mma;              /* mma:<arch> */
    int mma_chain;                  /* mma with outer=sequential: the one chain, emulated */
    /* classification: the engine's sink of this share (NULL for er_emulate) */
    const er_tensor *out;
    int out_contig;                 /* out is row-major contiguous */
    er_sink *sk;
    /* emulation */
    er_tensor *dst;
    /* tf32=nearest: the sets of the first conversion (ties to even), joined with the second's (ties away) */
    er_cset *keep;
    int keep_pass;                  /* 1: store the set; 2: join and classify */
} er_dot_ctx;

/* A context for a check of out under std (er__dot_ctx_clear frees it); its sink is the caller's to set. */
ER_INTERNAL er_status er__dot_ctx_init(er_dot_ctx *cx, const er_ref *ref, const er_tensor *out, const er_standard *std);
ER_INTERNAL void er__dot_ctx_clear(er_dot_ctx *cx);
/* The output set of element idx from its operand vectors a and b (K values each; special: one is NaN or infinite). */
ER_INTERNAL er_status er__dot_element_set(er_dot_ctx *cx, const er_dot_env *env, int64_t idx, const double *a,
                                          const double *b, int64_t K, int special, er_cset *c);
/* The constants of the fast path's decision (fastdecide.h) for the context's K, bound and formats. */
ER_INTERNAL void er__dot_fast_consts(er_fast_consts *fc, const er_dot_ctx *cx);


#endif
