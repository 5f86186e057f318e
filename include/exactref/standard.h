/* exactref/standard.h: the standard an implementation claims to follow.
 *
 * A standard is a value: the order of each reduction, the compute (accumulator) format, the rounding of each
 * operation, whether products may be fused (FMA), subnormal handling, and the conversion to the output format.
 * Build one with er_standard_init() and set fields, or parse one from a short string with er_standard_parse().
 * An unknown or contradictory standard is refused, never silently replaced by a default.
 * Definitions and proofs: docs/algorithms/any-order.md. */
#ifndef EXACTREF_STANDARD_H
#define EXACTREF_STANDARD_H

#include <stddef.h>
#include <exactref/export.h>
#include <exactref/status.h>
#include <exactref/format.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum er_order {
    ER_ORDER_ANY = 1,        /* every summation order (any tree, blocking, split-K), with or without FMA */
    ER_ORDER_SEQUENTIAL = 2, /* acc = 0; acc = acc + p_k for k = 0, 1, ..., K-1 */
    ER_ORDER_BLOCKED = 3,    /* blocks of `block` consecutive products: each block's partial sum (inner order,
                                from zero), the partials folded into the total (outer order) */
    ER_ORDER_SPLIT = 4,      /* `split` contiguous chunks of ceil(K/split) products: a partial sum per chunk
                                (inner order), rounded to `partial`, combined in `partial` arithmetic (outer) */
    ER_ORDER_PAIRWISE = 5,   /* numpy's pairwise summation of the rounded products (8-way blocks of up to 128) */
    ER_ORDER_MMA = 6,        /* tensor-core MMA blocks of `mma_arch` (docs/hardware/mma.md): outer=sequential, one
                                chain over K in order (acc += dot, as Triton's tl.dot); outer=any, the blocks in any
                                order and any number of chains added in fp32 (cuBLAS, split-K) */
    ER_ORDER_TRITON = 7,     /* Triton's tl.sum over one block of `triton_block` elements (K of them loaded, the rest
                                masked to +0) with `warps` warps and `vec` elements per thread and vector: each thread
                                chains its elements, then a butterfly over the lanes and one over the warps
                                (docs/algorithms/orders.md, Triton's tl.sum) */
    ER_ORDER_TREE = 8        /* one written binary tree over the K products (`tree`: docs/reference/standard.md,
                                Trees), each inner node one addition */
} er_order;

/* The order inside a block or chunk (inner) or between partials (outer). */
typedef enum er_suborder {
    ER_SUB_SEQUENTIAL = 0,   /* in index order */
    ER_SUB_ANY = 1           /* any order */
} er_suborder;

typedef enum er_fma {
    ER_FMA_EITHER = 0, /* each product may or may not be fused into its addition */
    ER_FMA_NEVER = 1,  /* products are rounded to the compute format, then added */
    ER_FMA_ALWAYS = 2  /* every product is fused into its addition (fma) */
} er_fma;

typedef enum er_rounding {
    ER_RND_NEAREST = 0,  /* every operation rounds to nearest, ties to even */
    ER_RND_FAITHFUL = 1  /* every operation may land on either neighbour of the exact result (truncating hardware) */
} er_rounding;

typedef enum er_subnormals {
    ER_SUBNORMALS_GRADUAL = 0, /* IEEE gradual underflow */
    ER_SUBNORMALS_FLUSH = 1    /* any operation may flush a subnormal result to a zero of its sign (CUDA -ftz=true,
                                  --use_fast_math); softmax and log_softmax in this version */
} er_subnormals;

/* How inputs become tf32 when compute is ER_TF32. */
typedef enum er_tf32_conv {
    ER_TF32_TRUNCATE = 0, /* the low 13 bits of fp32 dropped (tensor cores fed raw fp32: Triton "tf32") */
    ER_TF32_RNA = 1,      /* rounded to nearest, ties away from zero (PTX cvt.rna.tf32.f32; CUTLASS below sm90) */
    ER_TF32_RNE = 2,      /* rounded to nearest, ties to even (cvt.rn.tf32.f32: cuBLAS, CUTLASS on sm90) */
    ER_TF32_NEAREST = 3,  /* rounded to nearest with either tie rule, the same for every operand (unknown kernel) */
    ER_TF32_X3 = 4        /* split into big + small tf32 parts (cvt.rna), three products, small x small dropped
                             (Triton input_precision="tf32x3"; written compute=tf32x3) */
} er_tf32_conv;

typedef struct er_standard {
    er_order order;
    er_format compute;        /* accumulator: ER_FP32 (default), ER_FP16, ER_BF16, ER_FP64, or ER_TF32 (inputs
                                 converted to tf32, products exact, accumulation in fp32) */
    er_fma fma;
    er_rounding rounding;
    er_subnormals subnormals;
    er_overflow out_overflow; /* overflow rule of the final conversion to the output format */
    int64_t block;            /* ER_ORDER_BLOCKED: products per block (>= 1) */
    int64_t split;            /* ER_ORDER_SPLIT: number of chunks (>= 1) */
    er_suborder inner, outer; /* ER_ORDER_BLOCKED and ER_ORDER_SPLIT */
    er_format partial;        /* ER_ORDER_SPLIT: format of the partials (ER_FORMAT_INVALID: the accumulator's) */
    er_tf32_conv tf32;        /* compute == ER_TF32: the input conversion */
    int mean;                 /* mean: how the sum becomes the mean: 0 either (default), 1 divide (fl(s / n)),
                                 2 reciprocal (fl(s * fl(1/n))) */
    double exp_ulps;          /* softmax: accuracy of exp in ulps of the compute format (0: the default, 2, as
                                 CUDA documents for expf) */
    int div;                  /* softmax: 0 either (default), 1 divide (fl(e / s)), 2 reciprocal (fl(e * fl(1/s))) */
    double log_ulps;          /* log_softmax: accuracy of log in ulps (0: the default, 1, as CUDA documents for logf) */
    double rsqrt_ulps;        /* rmsnorm: accuracy of rsqrt in ulps (0: the default, 2, as CUDA documents for rsqrtf) */
    int carry_fused;          /* ER_ORDER_BLOCKED: the running total is one more term of each block's sum
                                 (acc = acc + dot(block) fused, as tensor-core MMAs and Triton's tl.dot do);
                                 0: each block is summed from zero and then added */
    int variance;             /* layernorm: 0 either (default), 1 two_pass (mean, then the sum of (x - mean)^2),
                                 2 welford (Welford updates and Chan combines in any tree), 3 either (stated);
                                 rmsnorm: 0 and 1 the sum of squares (default), 2 the mean square as Welford's
                                 M2 / n + m^2, 3 either */
    int exp_fast;             /* softmax, log_softmax: exp within 2 + floor(1.173 |x|) ulps of F at argument x (the
                                 __expf intrinsic's documented bound) instead of exp_ulps */
    double div_ulps;          /* softmax: the division e / s within div_ulps ulps of F (0: correctly rounded division
                                 or the rounded reciprocal, as div= says); quantize: the scale qmax / amax (0: 2) */
    int max_optional;         /* softmax: 0 the row maximum is subtracted before exp; 1 it may be left out */
    int online;               /* softmax: 1 the sum is built online, in blocks of any size, each partial rescaled by
                                 exp(m_old - m_new) when the running maximum grows (flash-style) */
    int mma_arch;             /* ER_ORDER_MMA: 70, 80, 89, 90 or 100 (sm70 ... sm100) */
    int promote;              /* ER_ORDER_MMA with outer=any: at most this many blocks are chained in the tensor core
                                 before their sum is added into an fp32 accumulator (0: no promotion) */
    int fast_math;            /* the math preset: 0 precise; 1 fast (exp_fast, div_ulps 2 for softmax, log_ulps 3 for
                                 log_softmax, unless set otherwise); 2 triton (Triton's fp32 lowering: exp as
                                 ex2.approx of the rounded product d * fl(log2 e), div_ulps 2, rsqrt.approx.ftz) */
    int init_first;           /* fixed orders: each accumulator starts at its first term (init=first), which IEEE
                                 arithmetic makes the same as starting at -0; 0: at +0 (init=zero, default) */
    int64_t depth;            /* any_order: every term passes through at most this many additions (a tree of bounded
                                 depth, as GPU reductions are; 0: no bound, the same as n - 1) */
    int64_t kv_block;         /* attention: the kernel rescales its running state at most once per this many keys
                                 (its key block; 0: the default, 16) */
    int p_sum;                /* attention: 0 either (default); 1 the denominator sums p in fp32, before P's rounding to
                                 v's format (p_sum=fp32) */
    int qk_scale;             /* attention: 0 the scale applied in fp32 (default); 1 also q and k each multiplied by
                                 sqrt(scale) and rounded to their own format before the product (qk_scale=input) */
    int64_t triton_block;     /* ER_ORDER_TRITON: the block (a power of two; the reduced length K is at most it) */
    int warps;                /* ER_ORDER_TRITON: num_warps (a power of two, 1 to 32) */
    int vec;                  /* ER_ORDER_TRITON: elements per thread and vector (a power of two; 0: Triton's choice,
                                 16 bytes of A's format where K is a multiple of 16, else 1, at most
                                 block / (32 warps)) */
    int64_t combine_depth;    /* layernorm's Welford trees: at most this many of a leaf's inner nodes are combines
                                 (nodes other than an update, which adds one value x as M + fl(x - M)/n); 0: no bound
                                 beyond depth */
    int products;             /* softmax_backward: 0 either (default): the products dy y may first be rounded to the
                                 inputs' format (torch's CUDA kernel computes grad * output in the input dtype), or
                                 not; 1 compute: rounded in the compute format only, or fused (products=compute).
                                 cross_entropy: 1 compute: no value rounded to the logits' format (fused kernels) */
    double amax_floor;        /* quantize (amax, pow2, inverse recipes): the kernel divides by max(amax, amax_floor)
                                 (torchao: qmax / clamp(amax, 1e-12)); 0: no floor (an amax of 0 gives the recipes'
                                 scale 1 or the plain quotient) */
    const char *tree;         /* ER_ORDER_TREE: the tree's text (what follows "tree:"), borrowed, not copied: it must
                                 outlive every use of the standard; NULL for every other order */
} er_standard;

/* The default standard: any_order, compute fp32, FMA either, round to nearest, gradual underflow,
 * the output format's own overflow rule. */
ER_API er_status er_standard_init(er_standard *s);
/* Parses an order and options. Orders: "any_order" (alias "any"), "sequential", "blocked:B", "split:S",
 * "pairwise", "mma:smNN" (sm70, sm80, sm89, sm90, sm100), "triton:BLOCK", "tree:TEXT" (s->tree then points into
 * order: order must outlive s's uses). Options, a comma- or space-separated list
 * of key=value:
 *   compute=fp32|fp16|bf16|fp64|tf32 (format names as er_format_from_name), fma=either|never|always,
 *   rounding=nearest|faithful, subnormals=gradual, overflow=default|ieee|inf|saturate|nan,
 *   inner=sequential|any and outer=sequential|any (blocked, split), partial=FORMAT (split),
 *   tf32=truncate|rna (compute=tf32), carry=separate|fused (blocked), mean=either|divide|reciprocal (mean),
 *   exp_ulps=U and div=either|divide|reciprocal (softmax), exp_ulps=U and log_ulps=U (log_softmax),
 *   rsqrt_ulps=U (rmsnorm, layernorm), variance=either|two_pass|welford and combine_depth=C (layernorm, rmsnorm),
 *   exp_ulps=fast (softmax, log_softmax), div_ulps=U, max=required|optional and online=yes|no (softmax),
 *   math=precise|fast (softmax, log_softmax: the fast-math preset), promote=N (mma outer=any), warps=W and vec=S
 *   (triton).
 * options may be NULL or "". An unknown order, key or value, or a repeated key, is ER_ERR_STANDARD with a
 * message naming it. On refusal *s is untouched. */
ER_API er_status er_standard_parse(er_standard *s, const char *order, const char *options);
/* Checks a standard built by hand: ER_ERR_STANDARD if it names something unknown, or contradicts itself
 * (an option that does not apply to its order, fma=always with pairwise, a block or split below 1). */
ER_API er_status er_standard_validate(const er_standard *s);
/* 1 when the standard leaves no choice to the implementation for products of formats a and b: a fixed
 * order, round to nearest, and fma never or always (or either when every product is exact in the
 * accumulator, where fusing changes nothing). Then er_emulate gives the one result. */
ER_API int er_standard_is_fixed(const er_standard *s, er_format a, er_format b);
/* Renders s as "any_order compute=fp32 fma=either" into buf (always NUL-terminated when cap > 0). *needed
 * (if not NULL) receives the length without the NUL. ER_ERR_BUFFER if it did not fit. */
ER_API er_status er_standard_format(const er_standard *s, char *buf, size_t cap, size_t *needed);
ER_API size_t er_standard_sizeof(void);
/* The options er_standard_parse reads, from its own table: how many, option i's name ("fma") and the values it takes
 * ("either, never or always"); NULL for i out of range. Which op takes the options only some ops take:
 * er_op_options. */
ER_API int er_standard_option_count(void);
ER_API const char *er_standard_option_name(int i);
ER_API const char *er_standard_option_values(int i);

/* The depth (additions a term passes through at most) of Triton's tl.sum / tl.reduce over a block of `block`
 * elements (a power of two) with `num_warps` warps (a power of two), for Triton major.minor: each thread combines
 * its R = block / (32 num_warps) elements (at least 1) in a chain up to 3.7 and a balanced tree from 3.8, then a
 * 5-level warp butterfly and a log2(num_warps)-level tree across warps: (R - 1) or ceil(log2 R), + 5 + log2 num_warps.
 * For depth= (docs/algorithms/any-order.md, Theorem 7). ER_ERR_INVALID for arguments that are not powers of two or a
 * version before 2.0. */
ER_API er_status er_depth_triton(int64_t *depth, int64_t block, int num_warps, int major, int minor);
/* The depth of CUB's BlockReduce Sum (its default algorithm, BLOCK_REDUCE_WARP_REDUCTIONS) over block_threads
 * threads of items_per_thread fp32 or fp64 items each: each thread adds its items in a chain (ThreadReduce's
 * sequential form, which CUB takes for these types), each warp's lanes in a shuffle-down tree of ceil(log2 L) levels
 * (L = min(block_threads, 32)), then thread 0 adds the W = ceil(block_threads / 32) warp totals in a chain (or in
 * any order through atomics, the non-deterministic variant: the same depth): (items_per_thread - 1) +
 * ceil(log2 L) + (W - 1), at least 1. ER_ERR_INVALID outside 1..65536 items or 1..1024 threads. */
ER_API er_status er_depth_cub_block_reduce(int64_t *depth, int items_per_thread, int block_threads);
/* The depth of torch's CUDA softmax and log_softmax sums over a row of n elements. Its persistent path (n up to
 * 1024, PersistentSoftmax.cuh): with P = n rounded up to a power of two and W = min(P, 32) lanes, each lane adds its
 * P / W elements in a chain from zero (lanes past n add exp(-inf) = 0), then a log2(W)-level xor butterfly:
 * (P / W - 1) + log2 W, at least 1 (depth='s least value). Its block path (n above 1024, SoftMax.cu): 1024 threads
 * each adding a chain of m elements from zero, then two 5-level shfl_down trees: (m - 1) + 10, m the longest chain
 * of fp32's and fp16's kernels (the deeper of the two; a row starting off 16-byte alignment included).
 * ER_ERR_UNSUPPORTED outside 1..2^31. */
ER_API er_status er_depth_torch_softmax(int64_t *depth, int64_t n);
/* The depth of torch's CUDA layer_norm Welford tree over a row of n elements (layer_norm_kernel.cu; depth= with
 * variance=welford or either): its vectorized kernel (n a multiple of 4 up to 2^24, aligned rows) runs 128 threads'
 * Welford chains of 4 ceil(n / 512) elements, then a 5-level warp tree and a 2-level tree over 4 warps:
 * 4 ceil(n / 512) - 1 + 7; its rowwise kernel 512 threads' chains of ceil(n / 512), then two 5-level trees:
 * ceil(n / 512) - 1 + 10. The deeper of the two where both may run (a chain's first update, from an empty state, is
 * exact). ER_ERR_UNSUPPORTED outside 1..2^31. */
ER_API er_status er_depth_torch_layer_norm(int64_t *depth, int64_t n);
/* The combine depth of the same trees (combine_depth= with variance=welford or either, docs/algorithms/layernorm.md,
 * Theorem L8): the most combines (nodes other than an update adding one value) on a leaf's path. Its vectorized
 * kernel combines in 5 + 2 levels, its rowwise kernel in 5 + 5; 10, the larger, for every n (alignment decides which
 * runs). ER_ERR_UNSUPPORTED outside 1..2^31. */
ER_API er_status er_combine_depth_torch_layer_norm(int64_t *combine_depth, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
