/* standard.c: the standard value: defaults, parsing from strings, validation and rendering. */
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include "core/internal.h"
#include "format/format.h"
#include "standard/standard.h"
#include "standard/tree.h"

er_status er_standard_init(er_standard *s) {
    er__ok();
    ER_CHECK_NULL(s, "s");
    memset(s, 0, sizeof *s);
    s->order = ER_ORDER_ANY;
    s->compute = ER_FP32;
    s->fma = ER_FMA_EITHER;
    s->rounding = ER_RND_NEAREST;
    s->subnormals = ER_SUBNORMALS_GRADUAL;
    s->out_overflow = ER_OVERFLOW_DEFAULT;
    s->inner = ER_SUB_SEQUENTIAL;
    s->outer = ER_SUB_SEQUENTIAL;
    s->partial = ER_FORMAT_INVALID;
    s->tf32 = ER_TF32_TRUNCATE;
    return ER_OK;
}

static const char *er_order_name(er_order o) {
    switch (o) {
    case ER_ORDER_ANY: return "any_order";
    case ER_ORDER_SEQUENTIAL: return "sequential";
    case ER_ORDER_BLOCKED: return "blocked";
    case ER_ORDER_SPLIT: return "split";
    case ER_ORDER_PAIRWISE: return "pairwise";
    case ER_ORDER_MMA: return "mma";
    case ER_ORDER_TRITON: return "triton";
    case ER_ORDER_TREE: return "tree";
    }
    return "?";
}

/* The fields' values: each within its enum's range, the compute format an accumulator. */
static er_status er_validate_fields(const er_standard *s) {
    if ((int)s->order < ER_ORDER_ANY || (int)s->order > ER_ORDER_TREE)
        return er__fail(ER_ERR_STANDARD, "unknown order value %d", (int)s->order);
    const er_fmt_info *fi = er__fmt(s->compute);
    if (!fi) return er__fail(ER_ERR_STANDARD, "invalid compute format value %d", (int)s->compute);
    if (s->compute != ER_FP32 && s->compute != ER_FP16 && s->compute != ER_BF16 && s->compute != ER_FP64 &&
        s->compute != ER_TF32)
        return er__fail(ER_ERR_STANDARD, "compute=%s is not an accumulator format (use fp64, fp32, tf32, fp16 or bf16)",
                        fi->name);
    if ((int)s->fma < 0 || (int)s->fma > 2) return er__fail(ER_ERR_STANDARD, "invalid fma value %d", (int)s->fma);
    if ((int)s->rounding < 0 || (int)s->rounding > 1)
        return er__fail(ER_ERR_STANDARD, "invalid rounding value %d", (int)s->rounding);
    if ((unsigned)s->subnormals > ER_SUBNORMALS_FLUSH)
        return er__fail(ER_ERR_STANDARD, "invalid subnormals value %d", (int)s->subnormals);
    if ((int)s->out_overflow < 0 || (int)s->out_overflow > 3)
        return er__fail(ER_ERR_STANDARD, "invalid output overflow rule %d", (int)s->out_overflow);
    if ((int)s->inner < 0 || (int)s->inner > 1 || (int)s->outer < 0 || (int)s->outer > 1)
        return er__fail(ER_ERR_STANDARD, "invalid inner or outer order value");
    if ((int)s->tf32 < 0 || (int)s->tf32 > ER_TF32_X3)
        return er__fail(ER_ERR_STANDARD, "invalid tf32 conversion value %d", (int)s->tf32);
    return ER_OK;
}

/* The order's parameters and the options that apply to some orders only. */
static er_status er_validate_order(const er_standard *s) {
    int blocked = s->order == ER_ORDER_BLOCKED, split = s->order == ER_ORDER_SPLIT;
    if (s->order == ER_ORDER_TREE) {
        if (!s->tree) return er__fail(ER_ERR_STANDARD, "tree: needs its text (the standard's tree is NULL)");
        ER_RETURN_IF_ERROR(er__tree_parse(s->tree, NULL, NULL));
    } else if (s->tree) {
        return er__fail(ER_ERR_STANDARD, "a tree's text applies to tree: only, not to %s", er_order_name(s->order));
    }
    if (blocked && s->block < 1)
        return er__fail(ER_ERR_STANDARD, "blocked needs a block size of at least 1 (got %lld)", (long long)s->block);
    if (split && s->split < 1)
        return er__fail(ER_ERR_STANDARD, "split needs at least 1 chunk (got %lld)", (long long)s->split);
    if (!blocked && s->block != 0)
        return er__fail(ER_ERR_STANDARD, "a block size applies to blocked only, not to %s", er_order_name(s->order));
    if (!split && s->split != 0)
        return er__fail(ER_ERR_STANDARD, "a split count applies to split only, not to %s", er_order_name(s->order));
    int triton = s->order == ER_ORDER_TRITON;
    if (triton) {
        int64_t b = s->triton_block;
        if (b < 1 || b > (INT64_C(1) << 30) || (b & (b - 1)))
            return er__fail(ER_ERR_STANDARD, "triton needs a block that is a power of two up to 2^30 (got %lld)",
                            (long long)b);
        if (s->warps < 1 || s->warps > 32 || (s->warps & (s->warps - 1)))
            return er__fail(ER_ERR_STANDARD, "warps=%d: expected a power of two from 1 to 32", s->warps);
        if (s->vec < 0 || s->vec > 16 || (s->vec & (s->vec - 1)) || s->vec > b)
            return er__fail(ER_ERR_STANDARD, "vec=%d: expected a power of two from 1 to 16, at most the block", s->vec);
        if (s->inner != ER_SUB_SEQUENTIAL || s->outer != ER_SUB_SEQUENTIAL)
            return er__fail(ER_ERR_STANDARD, "triton fixes its own tree: inner= and outer= do not apply");
    } else if (s->triton_block != 0 || s->warps != 0 || s->vec != 0) {
        return er__fail(ER_ERR_STANDARD, "warps= and vec= apply to triton:BLOCK only, not to %s",
                        er_order_name(s->order));
    }
    int mma = s->order == ER_ORDER_MMA;
    if (mma) {
        if (s->mma_arch != 70 && s->mma_arch != 80 && s->mma_arch != 89 && s->mma_arch != 90 && s->mma_arch != 100)
            return er__fail(ER_ERR_STANDARD, "mma:sm%d: known architectures are sm70, sm80, sm89, sm90 and sm100",
                            s->mma_arch);
        if (s->compute != ER_FP32 && s->compute != ER_TF32 && s->compute != ER_FP16)
            return er__fail(ER_ERR_STANDARD,
                            "mma accumulates in fp32 or fp16: compute=%s does not apply (fp32, fp16, or tf32 for fp32 "
                            "operands)",
                            er_format_name(s->compute));
        if (s->fma != ER_FMA_EITHER || s->rounding != ER_RND_NEAREST || s->inner != ER_SUB_SEQUENTIAL)
            return er__fail(ER_ERR_STANDARD, "mma fixes its own arithmetic: fma=, rounding= and inner= do not apply");
        if (s->promote < 0) return er__fail(ER_ERR_STANDARD, "promote must be at least 1 block");
        if (s->promote && s->outer != ER_SUB_ANY)
            return er__fail(ER_ERR_STANDARD, "promote= applies to mma with outer=any");
    } else if (s->promote != 0) {
        return er__fail(ER_ERR_STANDARD, "promote= applies to mma only, not to %s", er_order_name(s->order));
    } else if (s->mma_arch != 0) {
        return er__fail(ER_ERR_STANDARD, "an mma architecture applies to mma only, not to %s", er_order_name(s->order));
    }
    if ((unsigned)s->init_first > 1) return er__fail(ER_ERR_STANDARD, "init_first is 0 or 1");
    if (s->init_first &&
        !(s->order == ER_ORDER_SEQUENTIAL || s->order == ER_ORDER_BLOCKED || s->order == ER_ORDER_SPLIT))
        return er__fail(ER_ERR_STANDARD,
                        "init= applies to sequential, blocked and split (the sign of a zero result), not to %s",
                        er_order_name(s->order));
    if (s->depth < 0) return er__fail(ER_ERR_STANDARD, "depth must be at least 1");
    if (s->kv_block < 0) return er__fail(ER_ERR_STANDARD, "kv_block must be at least 1");
    if (s->combine_depth < 0) return er__fail(ER_ERR_STANDARD, "combine_depth must be at least 1");
    if (s->combine_depth && s->order != ER_ORDER_ANY)
        return er__fail(ER_ERR_STANDARD, "combine_depth= bounds the Welford tree of any_order, not %s",
                        er_order_name(s->order));
    if (s->combine_depth && s->variance == 1)
        return er__fail(ER_ERR_STANDARD, "combine_depth= bounds a Welford tree; variance=two_pass has none");
    if ((unsigned)s->p_sum > 1) return er__fail(ER_ERR_STANDARD, "p_sum is 0 (either) or 1 (fp32)");
    if ((unsigned)s->qk_scale > 1) return er__fail(ER_ERR_STANDARD, "qk_scale is 0 (fp32) or 1 (input)");
    if ((unsigned)s->products > 1) return er__fail(ER_ERR_STANDARD, "products is 0 (either) or 1 (compute)");
    if (s->depth && s->order != ER_ORDER_ANY)
        return er__fail(ER_ERR_STANDARD, "depth= bounds the tree of any_order; %s fixes its own",
                        er_order_name(s->order));
    if (s->depth && s->compute == ER_TF32 && s->tf32 == ER_TF32_X3)
        return er__fail(ER_ERR_UNSUPPORTED, "depth= with compute=tf32x3 is not modelled in this version");
    if (!blocked && !split && !mma && (s->inner != ER_SUB_SEQUENTIAL || s->outer != ER_SUB_SEQUENTIAL))
        return er__fail(ER_ERR_STANDARD, "inner= and outer= apply to blocked, split and (outer=) mma, not to %s",
                        er_order_name(s->order));
    if (s->partial != ER_FORMAT_INVALID) {
        if (!split)
            return er__fail(ER_ERR_STANDARD, "partial= applies to split only, not to %s", er_order_name(s->order));
        const er_fmt_info *pf = er__fmt(s->partial);
        if (!pf || s->partial == ER_TF32 || !pf->has_inf || pf->p < 8)
            return er__fail(ER_ERR_STANDARD, "partial=%s: partials are kept in fp64, fp32, fp16 or bf16",
                            pf ? pf->name : "?");
    }
    if (s->order == ER_ORDER_PAIRWISE && s->fma == ER_FMA_ALWAYS)
        return er__fail(ER_ERR_STANDARD, "pairwise adds finished products: fma=always does not apply");
    if (s->compute == ER_TF32 && s->tf32 == ER_TF32_X3 &&
        !(s->order == ER_ORDER_ANY || (s->order == ER_ORDER_MMA && s->outer == ER_SUB_ANY)))
        return er__fail(ER_ERR_STANDARD,
                        "compute=tf32x3 is modelled for any_order and mma outer=any (its three products in any order)");
    if (s->compute != ER_TF32 && s->tf32 != ER_TF32_TRUNCATE)
        return er__fail(ER_ERR_STANDARD, "tf32= applies to compute=tf32 only");
    return ER_OK;
}

/* The elementary functions' options (softmax, the norms) and blocked's carry. */
static er_status er_validate_functions(const er_standard *s) {
    int blocked = s->order == ER_ORDER_BLOCKED;
    if (!(s->exp_ulps >= 0 && s->exp_ulps <= 1e6))
        return er__fail(ER_ERR_STANDARD, "exp_ulps must be between 0 and 1e6");
    if (s->div < 0 || s->div > 2) return er__fail(ER_ERR_STANDARD, "invalid div value %d", s->div);
    if (!(s->log_ulps >= 0 && s->log_ulps <= 1e6))
        return er__fail(ER_ERR_STANDARD, "log_ulps must be between 0 and 1e6");
    if (!(s->rsqrt_ulps >= 0 && s->rsqrt_ulps <= 1e6))
        return er__fail(ER_ERR_STANDARD, "rsqrt_ulps must be between 0 and 1e6");
    if (s->mean < 0 || s->mean > 2) return er__fail(ER_ERR_STANDARD, "invalid mean value %d", s->mean);
    if (!(s->div_ulps >= 0 && s->div_ulps <= 1e6))
        return er__fail(ER_ERR_STANDARD, "div_ulps must be between 0 and 1e6");
    if (!(s->amax_floor >= 0 && s->amax_floor <= DBL_MAX))
        return er__fail(ER_ERR_STANDARD, "amax_floor must be 0 (none) or a positive finite number");
    if ((unsigned)s->exp_fast > 1 || (unsigned)s->max_optional > 1 || (unsigned)s->online > 1 ||
        (unsigned)s->fast_math > 2)
        return er__fail(ER_ERR_STANDARD, "exp_fast, max_optional and online are 0 or 1, fast_math 0, 1 or 2");
    if (s->fast_math == 2 && s->exp_fast)
        return er__fail(ER_ERR_STANDARD,
                        "math=triton states its exp (ex2.approx of a rounded product): exp_ulps=fast contradicts it");
    if (s->fast_math == 2 && (s->online || s->max_optional))
        return er__fail(ER_ERR_UNSUPPORTED, "math=triton with online= or max= is not modelled in this version");
    if (s->exp_fast && s->exp_ulps != 0)
        return er__fail(ER_ERR_STANDARD, "exp_ulps is either a number or fast, not both");
    if (s->div_ulps != 0 && s->div != 0)
        return er__fail(ER_ERR_STANDARD, "div_ulps= bounds any division: it contradicts div=%s",
                        s->div == 1 ? "divide" : "reciprocal");
    if (s->variance < 0 || s->variance > 3) return er__fail(ER_ERR_STANDARD, "invalid variance value %d", s->variance);
    if (s->carry_fused != 0 && s->carry_fused != 1)
        return er__fail(ER_ERR_STANDARD, "invalid carry value %d", s->carry_fused);
    if (s->carry_fused && !blocked)
        return er__fail(ER_ERR_STANDARD, "carry= applies to blocked only, not to %s", er_order_name(s->order));
    if (s->carry_fused && s->outer == ER_SUB_ANY)
        return er__fail(ER_ERR_STANDARD, "carry=fused chains the blocks in order: outer=any contradicts it");
    return ER_OK;
}

er_status er_standard_validate(const er_standard *s) {
    ER_CHECK_NULL(s, "standard");
    ER_RETURN_IF_ERROR(er_validate_fields(s));
    ER_RETURN_IF_ERROR(er_validate_order(s));
    return er_validate_functions(s);
}

int er_standard_is_fixed(const er_standard *s, er_format a, er_format b) {
    if (!er__fmt(a) || !er__fmt(b)) return 0;
    return er__standard_is_fixed_info(s, er__fmt(a), er__fmt(b));
}

int er__standard_is_fixed_info(const er_standard *s, const er_fmt_info *ia, const er_fmt_info *ib) {
    if (!s || er_standard_validate(s) != ER_OK) return 0;
    if (s->order == ER_ORDER_ANY || s->rounding != ER_RND_NEAREST) return 0;
    if (s->compute == ER_TF32 && s->tf32 >= ER_TF32_NEAREST)
        return 0; /* two conversions, or three products: not fixed */
    if (s->order == ER_ORDER_MMA) return s->outer == ER_SUB_SEQUENTIAL;
    if ((s->order == ER_ORDER_BLOCKED || s->order == ER_ORDER_SPLIT) &&
        (s->inner == ER_SUB_ANY || s->outer == ER_SUB_ANY))
        return 0;
    if (s->fma != ER_FMA_EITHER || s->order == ER_ORDER_PAIRWISE) return 1;
    /* fma=either is fixed when fusing changes nothing: every product is a value of the accumulator format */
    const er_fmt_info *acc = er__fmt(s->compute == ER_TF32 ? ER_FP32 : s->compute);
    const er_fmt_info *tf = er__fmt(ER_TF32);
    const er_fmt_info *fa = s->compute == ER_TF32 && ia->p > tf->p ? tf : ia;
    const er_fmt_info *fb = s->compute == ER_TF32 && ib->p > tf->p ? tf : ib;
    return er__products_exact(fa, fb, acc);
}

/* ---- the options: one table (name, kind, field, values, range), one parser ---- */

/* A value an option's word sets ("never" -> ER_FMA_NEVER); aliases are further entries of the same value. */
typedef struct er_opt_word {
    const char *word;
    int value;
} er_opt_word;

typedef enum er_opt_kind {
    ER_OPT_WORDS,   /* one of the words (an int or enum field) */
    ER_OPT_FORMAT,  /* a format's name (an er_format field) */
    ER_OPT_ULPS,    /* an accuracy in ulps, 0.5 to 1e6 (a double field) */
    ER_OPT_COUNT,   /* a decimal integer in [1, hi] (an int64_t field, or an int one where hi fits) */
    ER_OPT_POW2,    /* a power of two in [1, hi] (an int field), for triton:BLOCK only */
    ER_OPT_REAL     /* a positive finite number (a double field) */
} er_opt_kind;

typedef struct er_opt_def {
    const char *name;
    er_opt_kind kind;
    size_t field;               /* offsetof(er_standard, ...) */
    int is64;                   /* ER_OPT_COUNT: the field is an int64_t */
    const er_opt_word *words;   /* ER_OPT_WORDS: ending in {NULL, 0} */
    int64_t hi;                 /* ER_OPT_COUNT, ER_OPT_POW2: the largest value */
    const char *expect;         /* what the refusal of a bad value says is expected */
} er_opt_def;

static const er_opt_word er_w_fma[] = {{"either", ER_FMA_EITHER}, {"never", ER_FMA_NEVER}, {"false", ER_FMA_NEVER},
                                       {"no", ER_FMA_NEVER}, {"always", ER_FMA_ALWAYS}, {"true", ER_FMA_ALWAYS},
                                       {"yes", ER_FMA_ALWAYS}, {NULL, 0}};
static const er_opt_word er_w_rounding[] = {{"nearest", ER_RND_NEAREST}, {"faithful", ER_RND_FAITHFUL}, {NULL, 0}};
static const er_opt_word er_w_subnormals[] = { { "gradual", ER_SUBNORMALS_GRADUAL },
                                               { "flush", ER_SUBNORMALS_FLUSH },
                                               { NULL, 0 } };
static const er_opt_word er_w_overflow[] = { { "default", ER_OVERFLOW_DEFAULT }, { "ieee", ER_OVERFLOW_IEEE },
                                             { "inf", ER_OVERFLOW_IEEE },        { "saturate", ER_OVERFLOW_SATURATE },
                                             { "nan", ER_OVERFLOW_NAN },         { NULL, 0 } };
static const er_opt_word er_w_sub[] = { { "sequential", ER_SUB_SEQUENTIAL },
                                        { "seq", ER_SUB_SEQUENTIAL },
                                        { "any", ER_SUB_ANY },
                                        { "any_order", ER_SUB_ANY },
                                        { NULL, 0 } };
static const er_opt_word er_w_max[] = {{"required", 0}, {"optional", 1}, {NULL, 0}};
static const er_opt_word er_w_yesno[] = {{"yes", 1}, {"no", 0}, {NULL, 0}};
static const er_opt_word er_w_init[] = {{"zero", 0}, {"first", 1}, {NULL, 0}};
static const er_opt_word er_w_qk_scale[] = {{"fp32", 0}, {"input", 1}, {NULL, 0}};
static const er_opt_word er_w_p_sum[] = {{"either", 0}, {"fp32", 1}, {NULL, 0}};
static const er_opt_word er_w_math[] = {{"fast", 1}, {"precise", 0}, {"triton", 2}, {NULL, 0}};
static const er_opt_word er_w_division[] = {{"either", 0}, {"divide", 1}, {"reciprocal", 2}, {NULL, 0}};
/* variance=either is 3, stated: rmsnorm's default (0) is the sum of squares alone */
static const er_opt_word er_w_variance[] = {{"either", 3}, {"two_pass", 1}, {"two-pass", 1}, {"welford", 2}, {NULL, 0}};
static const er_opt_word er_w_carry[] = {{"fused", 1}, {"separate", 0}, {NULL, 0}};
static const er_opt_word er_w_products[] = {{"either", 0}, {"compute", 1}, {NULL, 0}};
static const er_opt_word er_w_tf32[] = { { "truncate", ER_TF32_TRUNCATE }, { "trunc", ER_TF32_TRUNCATE },
                                         { "rna", ER_TF32_RNA },           { "rne", ER_TF32_RNE },
                                         { "nearest", ER_TF32_NEAREST },   { NULL, 0 } };

#define ER_OFF(f) offsetof(er_standard, f)
#define ER_WORDS(n, f, w, e) {n, ER_OPT_WORDS, ER_OFF(f), 0, w, 0, e}
#define ER_ULPS(n, f) {n, ER_OPT_ULPS, ER_OFF(f), 0, NULL, 0, "a number of ulps between 0.5 and 1e6"}
/* Every option of the standard string (docs/reference/standard.md). compute and exp_ulps also take a word beyond
 * their kind's values (tf32x3, fast): er_opt_special reads those. Adding an option is one line here (and its field,
 * its validation and its documentation). */
static const er_opt_def er_options[] = {
    {"compute", ER_OPT_FORMAT, ER_OFF(compute), 0, NULL, 0, NULL},
    ER_WORDS("fma", fma, er_w_fma, "either, never (no, false) or always (yes, true)"),
    ER_WORDS("rounding", rounding, er_w_rounding, "nearest or faithful"),
    ER_WORDS("subnormals", subnormals, er_w_subnormals, "gradual or flush"),
    ER_WORDS("overflow", out_overflow, er_w_overflow, "default, ieee, saturate or nan"),
    ER_WORDS("inner", inner, er_w_sub, "sequential or any"),
    ER_WORDS("outer", outer, er_w_sub, "sequential or any"),
    {"partial", ER_OPT_FORMAT, ER_OFF(partial), 0, NULL, 0, NULL},
    ER_WORDS("tf32", tf32, er_w_tf32, "truncate, rna, rne or nearest"),
    ER_WORDS("carry", carry_fused, er_w_carry, "separate or fused"),
    ER_WORDS("mean", mean, er_w_division, "either, divide or reciprocal"),
    ER_ULPS("exp_ulps", exp_ulps),
    ER_ULPS("log_ulps", log_ulps),
    ER_ULPS("rsqrt_ulps", rsqrt_ulps),
    ER_WORDS("div", div, er_w_division, "either, divide or reciprocal"),
    ER_ULPS("div_ulps", div_ulps),
    ER_WORDS("variance", variance, er_w_variance, "either, two_pass or welford"),
    ER_WORDS("max", max_optional, er_w_max, "required or optional"),
    ER_WORDS("online", online, er_w_yesno, "yes or no"),
    ER_WORDS("math", fast_math, er_w_math, "precise, fast or triton"),
    {"promote", ER_OPT_COUNT, ER_OFF(promote), 0, NULL, 1000000, "a number of blocks from 1 to 1000000"},
    {"depth", ER_OPT_COUNT, ER_OFF(depth), 1, NULL, INT64_C(1) << 40, "a number of additions from 1"},
    {"combine_depth", ER_OPT_COUNT, ER_OFF(combine_depth), 1, NULL, INT64_C(1) << 40, "a number of combines from 1"},
    ER_WORDS("init", init_first, er_w_init, "zero or first"),
    {"kv_block", ER_OPT_COUNT, ER_OFF(kv_block), 1, NULL, INT64_C(1) << 40, "a number of keys from 1"},
    ER_WORDS("p_sum", p_sum, er_w_p_sum, "fp32 or either"),
    ER_WORDS("qk_scale", qk_scale, er_w_qk_scale, "fp32 or input"),
    {"warps", ER_OPT_POW2, ER_OFF(warps), 0, NULL, 32, "a power of two"},
    {"vec", ER_OPT_POW2, ER_OFF(vec), 0, NULL, 32, "a power of two"},
    ER_WORDS("products", products, er_w_products, "either or compute"),
    {"amax_floor", ER_OPT_REAL, ER_OFF(amax_floor), 0, NULL, 0, "a positive finite number"},
};
#define ER_NOPTIONS ((int)(sizeof er_options / sizeof er_options[0]))
_Static_assert(ER_NOPTIONS <= 64, "the parser marks the options seen in 64 bits");

/* The known option closest to key (at most two edits, one for keys under 6 characters, or key a prefix of it), or
 * NULL: for the unknown-option message. */
static const char *er_nearest_option(const char *key) {
    const char *best = NULL;
    size_t kl = strlen(key);
    int bestd = kl >= 6 ? 3 : 2; /* up to two edits for longer keys, one for short ones */
    if (kl > 32) return NULL;
    for (int i = 0; i < ER_NOPTIONS; i++) {
        const char *w = er_options[i].name;
        size_t wl = strlen(w);
        if (kl >= 2 && kl < wl && strncmp(key, w, kl) == 0) return w;
        int d[34][34]; /* Levenshtein distance, rows over key, columns over w */
        for (size_t a = 0; a <= kl; a++) d[a][0] = (int)a;
        for (size_t b = 0; b <= wl; b++) d[0][b] = (int)b;
        for (size_t a = 1; a <= kl; a++)
            for (size_t b = 1; b <= wl; b++) {
                int c = d[a - 1][b - 1] + (key[a - 1] != w[b - 1]), x = d[a - 1][b] + 1, y = d[a][b - 1] + 1;
                d[a][b] = c < x ? (c < y ? c : y) : (x < y ? x : y);
            }
        if (d[kl][wl] < bestd) { bestd = d[kl][wl]; best = w; }
    }
    return best;
}

/* Copies the next token of `p` (up to ',' or whitespace) into buf; returns the position after it. */
static const char *er_next_token(const char *p, char *buf, size_t cap, int *too_long) {
    size_t n = 0;
    *too_long = 0;
    while (*p && *p != ',' && !isspace((unsigned char)*p)) {
        if (n + 1 < cap) buf[n++] = *p; else *too_long = 1;
        p++;
    }
    buf[n] = '\0';
    return p;
}

/* "blocked:32" -> 32; refuses anything but a positive decimal integer. */
static er_status er_parse_count(const char *order, const char *num, int64_t *out) {
    char *end;
    if (!*num || !isdigit((unsigned char)*num))
        return er__fail(ER_ERR_STANDARD, "'%s': expected a positive integer after ':'", order);
    long long v = strtoll(num, &end, 10);
    if (*end || v < 1 || v > (INT64_C(1) << 40))
        return er__fail(ER_ERR_STANDARD, "'%s': expected a positive integer after ':'", order);
    *out = v;
    return ER_OK;
}

/* Sets option o from its value val in s (ER_ERR_STANDARD naming what is expected when val is not one). */
static er_status er_opt_set(const er_opt_def *o, const char *val, er_standard *s) {
    char *field = (char *)s + o->field, *end;
    switch (o->kind) {
    case ER_OPT_WORDS:
        for (const er_opt_word *w = o->words; w->word; w++)
            if (strcmp(val, w->word) == 0) { memcpy(field, &w->value, sizeof(int)); return ER_OK; }
        break;
    case ER_OPT_FORMAT: {
        er_format f;
        if (er_format_from_name(&f, val) != ER_OK)
            return er__fail(ER_ERR_STANDARD, "%s=%s: unknown format", o->name, val);
        memcpy(field, &f, sizeof f);
        return ER_OK;
    }
    case ER_OPT_ULPS: {
        double u = strtod(val, &end);
        if (*end || !(u >= 0.5 && u <= 1e6)) break;
        memcpy(field, &u, sizeof u);
        return ER_OK;
    }
    case ER_OPT_REAL: {
        double u = strtod(val, &end);
        if (end == val || *end || !(u > 0 && u <= DBL_MAX)) break;
        memcpy(field, &u, sizeof u);
        return ER_OK;
    }
    case ER_OPT_COUNT:
    case ER_OPT_POW2: {
        long long v = isdigit((unsigned char)*val) ? strtoll(val, &end, 10) : -1;
        if (v < 1 || v > o->hi || *end || (o->kind == ER_OPT_POW2 && (v & (v - 1)))) break;
        if (o->is64) { int64_t w = v; memcpy(field, &w, sizeof w); }
        else { int w = (int)v; memcpy(field, &w, sizeof w); }
        return ER_OK;
    }
    }
    return er__fail(ER_ERR_STANDARD, "%s=%s: expected %s", o->name, val, o->expect);
}

/* The values an option's kind does not hold: compute=tf32x3 (x3 set) and exp_ulps=fast. 1 when val was one. */
static int er_opt_special(const er_opt_def *o, const char *val, er_standard *s, int *x3) {
    if (strcmp(o->name, "compute") == 0 && strcmp(val, "tf32x3") == 0) { s->compute = ER_TF32; *x3 = 1; return 1; }
    if (strcmp(o->name, "exp_ulps") == 0 && strcmp(val, "fast") == 0) { s->exp_fast = 1; return 1; }
    return 0;
}

int er_standard_option_count(void) { return ER_NOPTIONS; }

const char *er_standard_option_name(int i) { return i >= 0 && i < ER_NOPTIONS ? er_options[i].name : NULL; }

const char *er_standard_option_values(int i) {
    if (i < 0 || i >= ER_NOPTIONS) return NULL;
    const er_opt_def *o = &er_options[i];
    if (strcmp(o->name, "compute") == 0) return "fp64, fp32, tf32, tf32x3, fp16 or bf16";
    if (strcmp(o->name, "exp_ulps") == 0) return "a number of ulps between 0.5 and 1e6, or fast";
    if (o->kind == ER_OPT_FORMAT) return "a format's name";
    if (o->kind == ER_OPT_POW2) return "a power of two from 1 to 32";
    return o->expect;
}

/* The bit of the option named name in the parser's mask of those seen. */
static uint64_t er_opt_bit(const char *name) {
    for (int i = 0; i < ER_NOPTIONS; i++)
        if (strcmp(er_options[i].name, name) == 0) return UINT64_C(1) << i;
    return 0;
}

/* The order part of a standard ("blocked:32", "mma:sm90") into s. */
static er_status er_parse_order(const char *order, er_standard *s) {
    if (strcasecmp(order, "any_order") == 0 || strcasecmp(order, "any") == 0) s->order = ER_ORDER_ANY;
    else if (strcasecmp(order, "sequential") == 0) s->order = ER_ORDER_SEQUENTIAL;
    else if (strcasecmp(order, "pairwise") == 0) s->order = ER_ORDER_PAIRWISE;
    else if (strncasecmp(order, "mma:", 4) == 0) {
        const char *a = order + 4;
        if (strncasecmp(a, "sm", 2) == 0) a += 2;
        char *end;
        long v = strtol(a, &end, 10);
        if (end == a || *end || v < 0 || v > 1000)
            return er__fail(ER_ERR_STANDARD, "'%s': expected mma:sm70, sm80, sm89, sm90 or sm100", order);
        s->order = ER_ORDER_MMA;
        s->mma_arch = (int)v;
    } else if (strncasecmp(order, "blocked:", 8) == 0) {
        s->order = ER_ORDER_BLOCKED;
        ER_RETURN_IF_ERROR(er_parse_count(order, order + 8, &s->block));
    } else if (strncasecmp(order, "triton:", 7) == 0) {
        s->order = ER_ORDER_TRITON;
        ER_RETURN_IF_ERROR(er_parse_count(order, order + 7, &s->triton_block));
        s->warps = 4;
    } else if (strncasecmp(order, "split:", 6) == 0) {
        s->order = ER_ORDER_SPLIT;
        ER_RETURN_IF_ERROR(er_parse_count(order, order + 6, &s->split));
    } else
        return er__fail(ER_ERR_STANDARD,
                        "unknown order '%.24s' (known: any_order (alias any), sequential, blocked:B, split:S, "
                        "pairwise, mma:smNN (NN: 70, 80, 89, 90, 100), triton:BLOCK, tree:TEXT; options may follow, "
                        "as in 'mma:sm90 outer=any')",
                        order);
    return ER_OK;
}

/* The options string into s (its order parsed already): each key=value through the table, once each. */
static er_status er_parse_options(const char *p, er_standard *s) {
    uint64_t seen = 0;
    int x3 = 0; /* compute=tf32x3 */
    char tok[128];
    while (*p) {
        while (*p == ',' || isspace((unsigned char)*p)) p++;
        if (!*p) break;
        int too_long;
        p = er_next_token(p, tok, sizeof tok, &too_long);
        if (too_long) return er__fail(ER_ERR_STANDARD, "option '%.40s...' is too long", tok);
        char *eq = strchr(tok, '=');
        if (!eq) return er__fail(ER_ERR_STANDARD, "option '%s' is not of the form key=value", tok);
        *eq = '\0';
        const char *key = tok, *val = eq + 1;
        int i = 0;
        while (i < ER_NOPTIONS && strcmp(key, er_options[i].name) != 0) i++;
        if (i == ER_NOPTIONS) {
            const char *near = er_nearest_option(key);
            return er__fail(ER_ERR_STANDARD, "unknown option '%.24s'%s%s%s (every option: docs/reference/standard.md)",
                            key, near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
        }
        const er_opt_def *o = &er_options[i];
        if (!er_opt_special(o, val, s, &x3)) ER_RETURN_IF_ERROR(er_opt_set(o, val, s));
        if (o->kind == ER_OPT_POW2 && s->order != ER_ORDER_TRITON)
            return er__fail(ER_ERR_STANDARD, "%s= applies to triton:BLOCK only", key);
        if (seen & (UINT64_C(1) << i)) return er__fail(ER_ERR_STANDARD, "option '%s' is given twice", key);
        seen |= UINT64_C(1) << i;
        if (x3 && (seen & er_opt_bit("tf32")))
            return er__fail(ER_ERR_STANDARD, "compute=tf32x3 splits the operands itself: tf32= does not apply");
    }
    if (x3) s->tf32 = ER_TF32_X3;
    return ER_OK;
}

er_status er_standard_parse(er_standard *out, const char *order, const char *options) {
    er__ok();
    ER_CHECK_NULL(out, "standard");
    ER_CHECK_NULL(order, "order");
    /* "mma:sm90 outer=any": options may follow the order in one string, as the docs write standards */
    char ord[64], opts[1024];
    const char *tree = NULL, *rest = NULL;
    size_t olen = strcspn(order, " \t\r\n,");
    if (strncasecmp(order, "tree:", 5) == 0) {
        /* the tree's text holds spaces and commas of its own: it ends where its outermost node does */
        ER_RETURN_IF_ERROR(er__tree_parse(order + 5, NULL, &rest));
        if (*rest && !isspace((unsigned char)*rest) && *rest != ',')
            return er__fail(ER_ERR_STANDARD, "tree: at character %lld ('%.12s'): the tree ends before it",
                            (long long)(rest - (order + 5)), rest);
        tree = order + 5;
    } else if (order[olen]) {
        if (olen >= sizeof ord) return er__fail(ER_ERR_STANDARD, "unknown order '%.*s'", (int)olen, order);
        memcpy(ord, order, olen);
        ord[olen] = '\0';
        rest = order + olen;
        order = ord;
    }
    if (rest) {
        int w = snprintf(opts, sizeof opts, "%s %s", rest, options ? options : "");
        if (w < 0 || (size_t)w >= sizeof opts)
            return er__fail(ER_ERR_STANDARD, "the standard's options are longer than %zu bytes", sizeof opts - 1);
        options = opts;
    }
    er_standard s;
    er_standard_init(&s);
    if (tree) {
        s.order = ER_ORDER_TREE;
        s.tree = tree;
    } else {
        ER_RETURN_IF_ERROR(er_parse_order(order, &s));
    }
    ER_RETURN_IF_ERROR(er_parse_options(options ? options : "", &s));
    ER_RETURN_IF_ERROR(er_standard_validate(&s));
    *out = s;
    return ER_OK;
}

static int er_log2_exact(int64_t v) {
    if (v < 1 || (v & (v - 1))) return -1;
    int k = 0;
    while ((INT64_C(1) << k) < v) k++;
    return k;
}

er_status er_depth_triton(int64_t *depth, int64_t block, int num_warps, int major, int minor) {
    er__ok();
    ER_CHECK_NULL(depth, "depth");
    int lb = er_log2_exact(block), lw = er_log2_exact(num_warps);
    if (lb < 0 || lb > 40)
        return er__fail(ER_ERR_INVALID, "block %lld: expected a power of two up to 2^40", (long long)block);
    if (lw < 0 || lw > 10)
        return er__fail(ER_ERR_INVALID, "num_warps %d: expected a power of two up to 1024", num_warps);
    if (major < 2 || minor < 0) return er__fail(ER_ERR_INVALID, "Triton %d.%d: expected 2.0 or later", major, minor);
    int64_t r = block >> (5 + lw);
    if (r < 1) r = 1;
    int chain = major < 3 || (major == 3 && minor <= 7);
    *depth = (chain ? r - 1 : er_log2_exact(r)) + 5 + lw;
    return ER_OK;
}

er_status er_depth_cub_block_reduce(int64_t *depth, int items_per_thread, int block_threads) {
    er__ok();
    ER_CHECK_NULL(depth, "depth");
    if (items_per_thread < 1 || items_per_thread > 1 << 16)
        return er__fail(ER_ERR_INVALID, "items_per_thread %d: expected 1 to 65536", items_per_thread);
    if (block_threads < 1 || block_threads > 1024)
        return er__fail(ER_ERR_INVALID, "block_threads %d: expected 1 to 1024", block_threads);
    int lanes = block_threads < 32 ? block_threads : 32, levels = 0, warps = (block_threads + 31) / 32;
    while ((1 << levels) < lanes) levels++;
    *depth = (items_per_thread - 1) + levels + (warps - 1);
    if (*depth < 1) *depth = 1; /* one element: no addition; depth= takes 1 or more */
    return ER_OK;
}

er_status er_depth_torch_softmax(int64_t *depth, int64_t n) {
    er__ok();
    ER_CHECK_NULL(depth, "depth");
    if (n < 1 || n > (INT64_C(1) << 31))
        return er__fail(ER_ERR_UNSUPPORTED, "n %lld: torch's softmax depth is given for rows of 1 to 2^31 elements",
                        (long long)n);
    if (n > 1024) {
        /* the block path (SoftMax.cu): 1024 threads, each a chain from zero, then two 5-level shfl_down trees. A
         * thread's chain: ilpReduce's at most ceil((n + 7) / 1024) elements (one before the vectors where the row
         * starts up to 7 fp16 elements past 16-byte alignment), or the shared-memory kernel's whole loads of 4
         * (fp32) or 8 (fp16, bf16) elements where n is a multiple of them and fits in 48 KiB */
        int64_t m = (n + 7 + 1023) / 1024;
        for (int64_t ilp = 4; ilp <= 8; ilp *= 2)
            if (n % ilp == 0 && n < (49152 - 128) / (16 / ilp)) {
                int64_t c = ilp * ((n + ilp * 1024 - 1) / (ilp * 1024));
                if (c > m) m = c;
            }
        *depth = (m - 1) + 10;
        return ER_OK;
    }
    int64_t p = 1;
    int lw = 0;
    while (p < n) p *= 2;
    int64_t w = p < 32 ? p : 32;
    while ((INT64_C(1) << lw) < w) lw++;
    *depth = (p / w - 1) + lw;
    if (*depth < 1) *depth = 1; /* one element: no addition; depth= takes 1 or more */
    return ER_OK;
}

er_status er_depth_torch_layer_norm(int64_t *depth, int64_t n) {
    er__ok();
    ER_CHECK_NULL(depth, "depth");
    if (n < 1 || n > (INT64_C(1) << 31))
        return er__fail(ER_ERR_UNSUPPORTED, "n %lld: torch's layer_norm depth is given for rows of 1 to 2^31 elements",
                        (long long)n);
    /* RowwiseMomentsCUDAKernel: 512 threads' Welford chains of ceil(n / 512), then two 5-level trees */
    int64_t d = (n + 511) / 512 - 1 + 10;
    if (n % 4 == 0 && n <= (INT64_C(1) << 24)) {
        /* the vectorized kernel (rows of a multiple of 4, aligned): 128 threads' chains of 4 ceil(n / 512), then a
         * 5-level warp tree and a 2-level tree over 4 warps */
        int64_t v = 4 * ((n + 511) / 512) - 1 + 7;
        if (v > d) d = v;
    }
    *depth = d;
    return ER_OK;
}

er_status er_combine_depth_torch_layer_norm(int64_t *combine_depth, int64_t n) {
    er__ok();
    ER_CHECK_NULL(combine_depth, "combine_depth");
    if (n < 1 || n > (INT64_C(1) << 31))
        return er__fail(ER_ERR_UNSUPPORTED,
                        "n %lld: torch's layer_norm combine depth is given for rows of 1 to 2^31 elements",
                        (long long)n);
    /* the vectorized kernel's 5 + 2 combine levels, the rowwise kernel's 5 + 5: the larger */
    *combine_depth = 10;
    return ER_OK;
}

static const char *er_fma_name(er_fma f) {
    return f == ER_FMA_NEVER ? "never" : f == ER_FMA_ALWAYS ? "always" : "either";
}
static const char *er_ov_name(er_overflow o) {
    return o == ER_OVERFLOW_IEEE       ? "ieee"
           : o == ER_OVERFLOW_SATURATE ? "saturate"
           : o == ER_OVERFLOW_NAN      ? "nan"
                                       : "default";
}

er_status er_standard_format(const er_standard *s, char *buf, size_t cap, size_t *needed) {
    er__ok();
    ER_CHECK_NULL(s, "standard");
    if (!buf && cap) return er__fail(ER_ERR_NULL, "buf is NULL but cap is %zu", cap);
    ER_RETURN_IF_ERROR(er_standard_validate(s));
    char tmp[320];
    int n = 0;
#define ER_PUT(...) n += snprintf(tmp + n, sizeof tmp - (size_t)n, __VA_ARGS__)
    if (s->order == ER_ORDER_BLOCKED) ER_PUT("blocked:%lld", (long long)s->block);
    else if (s->order == ER_ORDER_SPLIT) ER_PUT("split:%lld", (long long)s->split);
    else if (s->order == ER_ORDER_MMA) ER_PUT("mma:sm%d", s->mma_arch);
    else if (s->order == ER_ORDER_TRITON) ER_PUT("triton:%lld warps=%d", (long long)s->triton_block, s->warps);
    else if (s->order != ER_ORDER_TREE) ER_PUT("%s", er_order_name(s->order));
    if (s->compute == ER_TF32 && s->tf32 == ER_TF32_X3) ER_PUT(" compute=tf32x3");
    else ER_PUT(" compute=%s", er_format_name(s->compute));
    if (s->compute == ER_TF32 && s->tf32 != ER_TF32_X3) {
        static const char *const conv[4] = {"truncate", "rna", "rne", "nearest"};
        ER_PUT(" tf32=%s", conv[s->tf32]);
    }
    ER_PUT(" fma=%s", er_fma_name(s->fma));
    if (s->order == ER_ORDER_MMA) ER_PUT(" outer=%s", s->outer == ER_SUB_ANY ? "any" : "sequential");
    if (s->promote) ER_PUT(" promote=%d", s->promote);
    if (s->depth) ER_PUT(" depth=%lld", (long long)s->depth);
    if (s->combine_depth) ER_PUT(" combine_depth=%lld", (long long)s->combine_depth);
    if (s->kv_block) ER_PUT(" kv_block=%lld", (long long)s->kv_block);
    if (s->vec) ER_PUT(" vec=%d", s->vec);
    if (s->p_sum == 1) ER_PUT(" p_sum=fp32");
    if (s->qk_scale == 1) ER_PUT(" qk_scale=input");
    if (s->products == 1) ER_PUT(" products=compute");
    if (s->init_first) ER_PUT(" init=first");
    if (s->order == ER_ORDER_BLOCKED || s->order == ER_ORDER_SPLIT)
        ER_PUT(" inner=%s outer=%s", s->inner == ER_SUB_ANY ? "any" : "sequential",
               s->outer == ER_SUB_ANY ? "any" : "sequential");
    if (s->carry_fused) ER_PUT(" carry=fused");
    if (s->mean) ER_PUT(" mean=%s", s->mean == 1 ? "divide" : "reciprocal");
    if (s->fast_math) ER_PUT(" math=%s", s->fast_math == 2 ? "triton" : "fast");
    if (s->subnormals == ER_SUBNORMALS_FLUSH) ER_PUT(" subnormals=flush");
    if (s->exp_ulps) ER_PUT(" exp_ulps=%g", s->exp_ulps);
    if (s->exp_fast) ER_PUT(" exp_ulps=fast");
    if (s->div_ulps) ER_PUT(" div_ulps=%g", s->div_ulps);
    if (s->amax_floor) ER_PUT(" amax_floor=%.17g", s->amax_floor);
    if (s->max_optional) ER_PUT(" max=optional");
    if (s->online) ER_PUT(" online=yes");
    if (s->log_ulps) ER_PUT(" log_ulps=%g", s->log_ulps);
    if (s->rsqrt_ulps) ER_PUT(" rsqrt_ulps=%g", s->rsqrt_ulps);
    if (s->variance) ER_PUT(" variance=%s", s->variance == 1 ? "two_pass" : s->variance == 2 ? "welford" : "either");
    if (s->div) ER_PUT(" div=%s", s->div == 1 ? "divide" : "reciprocal");
    if (s->partial != ER_FORMAT_INVALID) ER_PUT(" partial=%s", er_format_name(s->partial));
    if (s->rounding == ER_RND_FAITHFUL) ER_PUT(" rounding=faithful");
    if (s->out_overflow != ER_OVERFLOW_DEFAULT) ER_PUT(" overflow=%s", er_ov_name(s->out_overflow));
#undef ER_PUT
    /* a tree's canonical text comes first, "tree:(...)" before the options (tmp starts with their space) */
    char *text = NULL;
    size_t tlen = 0, total = (size_t)n;
    if (s->order == ER_ORDER_TREE) {
        er_tree t;
        ER_RETURN_IF_ERROR(er__tree_parse(s->tree, &t, NULL));
        er_status st = er__tree_render(&t, &text, &tlen);
        er__tree_free(&t);
        if (st != ER_OK) return st;
        total += 5 + tlen;
    }
    if (needed) *needed = total;
    if (cap) snprintf(buf, cap, "%s%s%s", text ? "tree:" : "", text ? text : "", tmp);
    free(text);
    if (total + 1 > cap) return er__fail(ER_ERR_BUFFER, "standard needs %zu bytes, buffer has %zu", total + 1, cap);
    return ER_OK;
}

size_t er_standard_sizeof(void) { return sizeof(er_standard); }
