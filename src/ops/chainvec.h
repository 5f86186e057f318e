/* chainvec.h: the chain's batch passes (docs/algorithms/chains.md, "The batch pass" and "The epilogue pass"): the
 * roundings and loads they share (chainmod.c), and the epilogue pass over a base of single sets (chainepi.c). */
#ifndef ER_CHAINVEC_H
#define ER_CHAINVEC_H

#include <float.h>
#include <math.h>
#include <string.h>
#include "ops/modkit.h"
#include "core/setwidth.h"
#include "tensor/tensor_internal.h"
#include "format/vecround.h"
#include "enclose/ival.h" /* er__exp_tables, for the GPU's copy */

/* Elements a batch pass takes at a time; its mark for an element it leaves to the per-element decision (the decided
 * ones are ER_CLASS_EXACT and ER_CLASS_COVERED). */
enum { ER_VEC_CHUNK = 4096, ER_VEC_OPEN = 255 };

/* Elements [begin, begin + m) of a row-major fp32, fp16 or bf16 tensor as floats (exact). */
static inline void er_vec_load(const er_tensor *t, int64_t begin, int64_t m, float *dst) {
    if (t->format == ER_FP32) {
        memcpy(dst, (const float *)t->data + begin, sizeof(float) * (size_t)m);
    } else if (t->format == ER_BF16) {
        const uint16_t *p = (const uint16_t *)t->data + begin;
        for (int64_t i = 0; i < m; i++) {
            uint32_t b = (uint32_t)p[i] << 16;
            memcpy(&dst[i], &b, sizeof b);
        }
    } else {
        for (int64_t i = 0; i < m; i++) dst[i] = (float)er__load(t, begin + i);
    }
}

/* The epilogue pass's plan: the chain's stages, at most one function among them (exp, tanh, sigmoid, silu, gelu's
 * tanh form), the others add, mul (a tensor, a number or another reference with a cursor), relu and casts to fp32,
 * fp16 or bf16; the output fp32, fp16 or bf16, row-major. */
typedef struct er_epi {
    const er_stage *st;
    int ns;
    er_vec_fmt o, cast[12]; /* the output's rounding; each cast stage's */
    float wop[12];          /* a number operand rounded to fp32, as the witness takes it */
    const er_tensor *out;
    const er_op_module *rmod[12]; /* each stage's reference operand's module and cursor (NULL: none) */
    void *rcur[12];
    int simd;               /* er__simd(): the AVX2 build of exp's loops */
    int fn, nvar;           /* the function stage (-1: none) and its variants (0, 2 or 4: er_chain_witness's) */
    int tri;                /* math=triton: the witnesses' exp is 2^RN(x RN(log2 e)) correctly rounded */
    double ulps;            /* its ulps budget (er_chain_witness's U) */
} er_epi;

/* The arrays of one thread's pass (about 1.3 MiB: on the heap). */
typedef struct er_epi_scratch {
    double lo[ER_VEC_CHUNK], hi[ER_VEC_CHUNK], wl[ER_VEC_CHUNK], wh[ER_VEC_CHUNK], op[ER_VEC_CHUNK], y[ER_VEC_CHUNK];
    double rel[ER_VEC_CHUNK], blo[ER_VEC_CHUNK], bhi[ER_VEC_CHUNK]; /* the base's bracket */
    double t[6 * ER_VEC_CHUNK], elo[6 * ER_VEC_CHUNK], ehi[6 * ER_VEC_CHUNK];
    /* the witnesses from l and h, then their variants (at most four each), and whether each is formed (as wide as
     * a double: loops that vectorise) */
    float w[10][ER_VEC_CHUNK];
    int64_t okw[10][ER_VEC_CHUNK], oke[ER_VEC_CHUNK];
    double rl[ER_VEC_CHUNK], rh[ER_VEC_CHUNK], rbl[ER_VEC_CHUNK], rbh[ER_VEC_CHUNK]; /* a reference operand's */
    uint8_t okc[ER_VEC_CHUNK], dec2[ER_VEC_CHUNK], okr[ER_VEC_CHUNK];
    int32_t ix[ER_VEC_CHUNK]; /* the elements a run leaves open */
    int64_t runs;             /* the chunks this thread decided (0 at first) */
    int skip[2];              /* whether its next chunk skips the bracket's run, the first witness's (er__epi_decide) */
} er_epi_scratch;

/* 1 where the epilogue pass applies to a chain of these stages under std with output out of format O (its plan in *p),
 * else 0 (and where EXACTREF_BATCH=0 turns it off). mods[i + 1] and curs[i + 1]: stage i's reference operand's module
 * and cursor (the pass takes that operand's values through it). */
ER_INTERNAL int er__epi_plan(er_epi *p, const er_stage *st, int ns, const er_standard *std, const er_tensor *out,
                             const er_fmt_info *O, const er_op_module *const *mods, void *const *curs);
/* The class of each element of [begin, end) (end - begin <= ER_VEC_CHUNK) where the pass decides it, else
 * ER_VEC_OPEN, into dec; the base's single sets from its module's cursor. The decided element whose witnesses' hull
 * is widest (er_set_rel; the least index among equals) replaces *widx where wider than *wrel (or as wide and before
 * it), as the per-element decision's does. */
ER_INTERNAL void er__epi_decide(const er_epi *p, const er_op_module *mod, void *cur, int64_t begin, int64_t end,
                                er_epi_scratch *s, uint8_t *dec, double *wrel, int64_t *widx);


/* What the epilogue pass on the GPU decided (er_covers_device, src/cuda/devchain.c), handed to the chain's covers as
 * er__covers_module's argument: every element's class (ER_CLASS_EXACT, ER_CLASS_COVERED, or ER_VEC_OPEN for the
 * per-element decision), and the widest hull among those decided (wrel, widx; -1 for none) as er__epi_decide's. */
typedef struct er_epi_pre { const uint8_t *dec; double wrel; int64_t widx; } er_epi_pre;
/* Whether er_covers of chain ref on an output of out's layout under std decides its elements by the epilogue pass
 * on every thread (each condition of the chain's fast decision and er__epi_plan, no stage with a reference operand,
 * and not the one-stage batch pass): its plan into *p and the chain's base into *base; 0 otherwise. */
ER_INTERNAL int er__chain_epi_of(const er_ref *ref, const er_standard *std, const er_tensor *out, er_epi *p,
                                 const er_ref **base);

#endif
