/* exactref/ref.h: references: what an op call returns, and covers() against a kernel's output.
 *
 * er_matmul() validates its operands and computes, for every output element, the exact result (held exactly
 * enough to round correctly in any supported format) and the sums of positive and negative products. The
 * covering set of a standard is built from these at covers time. A reference keeps views, not copies: the
 * operands' memory must stay alive and unchanged while the reference is used. A reference is read-only after
 * creation, so one reference may be used by several threads at once. */
#ifndef EXACTREF_REF_H
#define EXACTREF_REF_H

#include <exactref/export.h>
#include <exactref/status.h>
#include <exactref/tensor.h>
#include <exactref/standard.h>
#include <exactref/report.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct er_ref er_ref;

/* C = A . B with numpy matmul semantics for operands of 2 or more dimensions: A is [..., M, K], B is
 * [..., K, N], batch dimensions broadcast, C is [broadcast batch..., M, N]. A and B may have different
 * formats. On success *out holds a new reference (free with er_ref_free); on refusal *out is untouched. */
ER_API er_status er_matmul(er_ref **out, const er_tensor *A, const er_tensor *B);
/* The scaled matmul of fp8 kernels (torch._scaled_mm): C = (A . B) scale_a scale_b with per-tensor fp32 scales
 * (finite values of fp32; ER_ERR_INVALID otherwise), A and B as for er_matmul (any formats, usually e4m3fn or
 * e5m2). The accumulator follows the standard (any_order, mma:sm90 outer=any with or without promote=N, ...); the
 * scaling is fl(fl(acc scale_a) scale_b) or fl(acc fl(scale_a scale_b)) in fp32, then the output conversion. */
ER_API er_status er_scaled_matmul(er_ref **out, const er_tensor *A, const er_tensor *B, double scale_a, double scale_b);
/* The same with rowwise scales (torch._scaled_mm's rowwise fp8 recipe): scale_a one fp32 value per row of A (M
 * values, shape [M] or [M, 1]), scale_b one per column of B (shape [N] or [1, N]); element (i, j) is the accumulator
 * times scale_a[i] and scale_b[j], associated as above. A and B are matrices, or batches of them (broadcasting as
 * er_matmul's) with scales per matrix: scale_a of A's batch shape then [M] or [M, 1], scale_b of B's batch shape then
 * [N] or [1, N]. The scales are copied. */
ER_API er_status er_scaled_matmul_rowwise(er_ref **out, const er_tensor *A, const er_tensor *B,
                                          const er_tensor *scale_a, const er_tensor *scale_b);
/* Reductions of x over dimension `dim` (negative counts from the end): the output has x's shape without that
 * dimension ([1] when x is a vector). x has at most 7 dimensions. sum and mean take every standard of a
 * matmul (the products are x times an exact 1); mean divides by the length at the end (standard option
 * mean=divide|reciprocal|either); max is exact (NaN if any element is NaN) and refuses an empty dimension. */
ER_API er_status er_sum(er_ref **out, const er_tensor *x, int dim);
ER_API er_status er_mean(er_ref **out, const er_tensor *x, int dim);
ER_API er_status er_max(er_ref **out, const er_tensor *x, int dim);
/* softmax of x along `dim`: exp(x_i - max) / sum_j exp(x_j - max). The output has x's shape. Standards: any_order
 * (the sum of the exponentials in any order) with compute (fp32 default; x's values must be values of it),
 * exp_ulps (accuracy of exp, default 2) and div (divide, reciprocal or either). */
ER_API er_status er_softmax(er_ref **out, const er_tensor *x, int dim);
/* log_softmax of x along `dim`: (x_i - max) - log(sum_j exp(x_j - max)); options exp_ulps (default 2) and
 * log_ulps (default 1, CUDA's bound for logf). */
ER_API er_status er_log_softmax(er_ref **out, const er_tensor *x, int dim);
/* softmax's backward pass along dim: dx = y (dy - sum_j dy_j y_j), from the kernel's saved output y and the gradient
 * dy (the same shape, any formats), as torch's _softmax_backward_data. One output, dx, of y's shape. Standard:
 * any_order in a compute format holding dy's and y's values (depth= bounds the sum's tree); the set holds every
 * result of the sum in any order in that format, its products rounded or fused, then dx as y (dy - D), dy y - y D,
 * or either with a fused multiply-add (docs/algorithms/softmax-backward.md). dy and y must outlive the reference. */
ER_API er_status er_softmax_backward(er_ref **out, const er_tensor *dy, const er_tensor *y, int dim);
/* log_softmax's backward pass along dim: dx = dy - exp(y) sum_j dy_j, from the kernel's saved log_softmax output y
 * and the gradient dy, as torch's _log_softmax_backward_data. One output, dx. Standard: any_order with compute (it
 * must hold dy's and y's values), exp_ulps= (default 2, or fast) and depth=; dx as dy - exp(y) S or with a fused
 * multiply-add (docs/algorithms/softmax-backward.md, Theorem B2). */
ER_API er_status er_log_softmax_backward(er_ref **out, const er_tensor *dy, const er_tensor *y, int dim);
/* layer_norm's backward pass over x's last `normalized_ndim` dimensions (n elements per row), from the incoming
 * gradient dy (x's shape), the forward input x, the forward pass's saved mean and rstd (one value per row: x's
 * leading shape, size-1 dimensions aside) and the weight (NULL: none; the normalised shape), as torch's
 * native_layer_norm_backward: dx = r (g - sum_j g_j / n - xhat sum_j g_j xhat_j / n) with g = w dy,
 * xhat = (x - mean) r; dweight = sum over rows of dy xhat; dbias = sum over rows of dy. Three outputs: dx (x's
 * shape), dweight and dbias (the normalised shape). Standard: any_order in a compute format holding every input's
 * values (depth= bounds the sums' trees); the set holds every evaluation of those formulas in any association, each
 * operation rounded to nearest or fused (docs/algorithms/norm-backward.md). The views must outlive the reference. */
ER_API er_status er_layer_norm_backward(er_ref **out, const er_tensor *dy, const er_tensor *x, int normalized_ndim,
                                        const er_tensor *mean, const er_tensor *rstd, const er_tensor *weight);
/* rmsnorm's backward pass over x's last dimension, from dy, x, the saved rstd (one per row) and the weight (NULL:
 * none): dx = r (g - xhat sum_j g_j xhat_j / n) with g = w dy, xhat = x r; dweight = sum over rows of dy xhat. Two
 * outputs, dx and dweight; the standard as er_layer_norm_backward's. rstd NULL: the kernel computed its own rstd,
 * any value rmsnorm's forward standard allows with this eps (options rsqrt_ulps=, mean=, variance=, math=triton, as
 * er_rmsnorm's; compute formats of at most 26 bits), the exact result taking the exact 1/sqrt(mean(x^2) + eps);
 * eps is used only then, and must be finite and nonnegative (ER_ERR_INVALID). */
ER_API er_status er_rmsnorm_backward(er_ref **out, const er_tensor *dy, const er_tensor *x, const er_tensor *rstd,
                                     const er_tensor *weight, double eps);
/* How cross_entropy reduces the row losses (torch's reduction=). */
typedef enum er_reduction {
    ER_REDUCTION_MEAN = 0, /* their sum over the rows not ignored (0 / 0 = NaN when every row is ignored) */
    ER_REDUCTION_SUM = 1,  /* their sum */
    ER_REDUCTION_NONE = 2  /* one loss per row (0 for an ignored row) */
} er_reduction;
/* Cross-entropy of logits (N x C, or one row of C) against target classes (ntarget = N integers, each in [0, C) or
 * equal to ignore_index), with label smoothing eps in [0, 1], as torch's F.cross_entropy and fused cross-entropy
 * kernels compute it: row loss L - (1 - eps) x_t - (eps / C) sum_j x_j with L = log sum_j exp(x_j), reduced as
 * `reduction` says, and its gradient dlogits = (softmax(x) - (1 - eps) onehot(t) - eps / C) / W (W: the rows not
 * ignored for ER_REDUCTION_MEAN, else 1; an ignored row's gradient is 0). Two outputs: loss ((1), or (N) for
 * ER_REDUCTION_NONE) and dlogits (the logits' shape). Standard: any_order in a compute format holding the logits'
 * values, with softmax's options (exp_ulps=, log_ulps=, div=, div_ulps=, math=fast|triton, online=, max=,
 * subnormals=flush) and depth= bounding every sum's tree; the set holds every kernel whose probabilities and
 * log-sum-exp lie in softmax's and log_softmax's sets and that combines them with at most 8 roundings in the
 * compute format and, as torch's composition does, 3 (gradient) or 4 (loss) in the logits' format on each term's
 * path; products=compute states a kernel that rounds nothing to the logits' format (fused kernels)
 * (docs/algorithms/cross-entropy.md). The targets are
 * copied; the logits must outlive the reference. ER_ERR_INVALID for a target out of range, a reduction or an eps
 * outside theirs. */
ER_API er_status er_cross_entropy(er_ref **out, const er_tensor *logits, const int64_t *target, int64_t ntarget,
                                  int reduction, int64_t ignore_index, double label_smoothing);
/* rmsnorm over x's last dimension: x_i w_i / sqrt(mean_j x_j^2 + eps), weight NULL (none) or a vector of that
 * length. Options: compute (it must hold x's values), mean (divide, reciprocal, either), rsqrt_ulps (default 2). */
ER_API er_status er_rmsnorm(er_ref **out, const er_tensor *x, const er_tensor *weight, double eps);
/* layernorm over x's last `normalized_ndim` dimensions (n elements per row): y = (x - mean) / sqrt(var + eps) * w + b
 * with the biased variance, weight and bias NULL (none) or of the normalised shape. Three outputs: y (x's shape),
 * and mean and rstd = 1/sqrt(var + eps), one per row (x's leading shape; trailing size-1 dimensions accepted).
 * Options: compute (it must hold x's values), variance (two_pass, welford, either), mean (the two divisions by n:
 * divide, reciprocal, either), rsqrt_ulps (default 2). Check them together with er_covers_outputs; er_covers checks
 * y alone. An empty normalised shape is refused. */
ER_API er_status er_layernorm(er_ref **out, const er_tensor *x, int normalized_ndim, const er_tensor *weight,
                              const er_tensor *bias, double eps);
ER_API void er_ref_free(er_ref *ref);
/* The ops (the table of op modules): how many, and op i's name ("matmul", "softmax", ...; NULL out of range). */
ER_API int er_op_count(void);
ER_API const char *er_op_name(int i);
/* The options and values of the standard that only some ops take which the op `name` takes, as a list such as
 * "depth=, mean=" (mean), from its module: the standard's other options apply to every op (their rules are the
 * order's). ER_ERR_INVALID for an unknown op; ER_ERR_BUFFER with a NUL-terminated prefix when cap is too small,
 * *needed (may be NULL) getting the full length. */
ER_API er_status er_op_options(const char *name, char *buf, size_t cap, size_t *needed);
/* 1 when the matmul reference took the fast path (OpenBLAS present, at least 2^18 products or EXACTREF_FAST=1,
 * operands of at most 24 significant bits, all finite, EXACTREF_FAST not 0): covers() then decides most elements from
 * two GEMMs and recomputes the rest
 * exactly, with reports identical to the exact engine's (docs/algorithms/fast-path.md). For a chain (er_chain), 1 when
 * its base and its stages' references are such matmuls or tensors (er_tensor_ref): covers() then decides most
 * elements from witnesses without their sets (docs/algorithms/chains.md, The fast decision). 0 otherwise. */
ER_API int er_ref_fast(const er_ref *ref);
/* The number of outputs of the op (3 for layernorm: y, mean, rstd; 1 otherwise) and the name of output i
 * ("y", "mean", "rstd"; "out" for single-output ops; NULL out of range). */
ER_API int er_ref_num_outputs(const er_ref *ref);
ER_API const char *er_ref_output_name(const er_ref *ref, int i);
/* The shape of the op's output. shape must have room for ER_MAX_DIMS entries. */
ER_API er_status er_ref_shape(const er_ref *ref, int *ndim, int64_t *shape);
/* The shape of output `output` (0 to er_ref_num_outputs - 1; ER_ERR_INVALID otherwise, nothing written): the shape
 * covers, er_covers_outputs and er_ref_enclosure take for it (quantize's amax and scale: one element per group, the
 * number of groups as the library counts them). shape must have room for ER_MAX_DIMS entries. Bindings size their
 * arrays from this, never from a count of their own. */
ER_API er_status er_ref_output_shape(const er_ref *ref, int output, int *ndim, int64_t *shape);
/* The exact result at `index` rounded to double (NaN or +-inf for special results), and correctly rounded to
 * `f` under the standard's output overflow rule. Either output pointer may be NULL. */
ER_API er_status er_ref_exact(const er_ref *ref, const int64_t *index, er_format f, double *exact, double *rounded);

/* Writes the exact result of every element, correctly rounded to out's format (its default overflow rule), into
 * `out` (the op's output shape, any strides, writable, no repeated elements): the best output any kernel can
 * produce. matmul, sum, mean and max; ER_ERR_UNSUPPORTED for softmax, log_softmax and rmsnorm. */
ER_API er_status er_ref_rounded(er_tensor *out, const er_ref *ref);
/* Classifies every element of `out` (same shape as the op's output, any supported format) against the set
 * the standard allows. On success *rep is overwritten without being read (clear it before reuse); on refusal
 * it records the refusal (er_report_status, er_report_message) and fails. */
ER_API er_status er_covers(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std);
/* Classifies every output of a multi-output op at once: outs[i] (NULL: not checked) against output i's set, into
 * reps[i] (an empty report for a NULL output). nout must be er_ref_num_outputs(ref). A case passes when every
 * report passes. On refusal each of the nout reports records the refusal and fails. */
ER_API er_status er_covers_outputs(er_report *reps, const er_ref *ref, const er_tensor *const *outs, int nout,
                                   const er_standard *std);
/* er_covers, and each element's set: lo[i] and hi[i] (n doubles each, row-major over the output) get the least and
 * greatest finite values of the output format the set allows, NaN and NaN where it allows none (only infinities or
 * NaN); slack[i] (slack may be NULL) the distance from the output to the nearer of them in ulps of the output format
 * at the output, negative outside, NaN for a non-finite output or a set without finite values. ER_ERR_NULL for a NULL
 * lo or hi; ER_ERR_OUTPUT where an array shares memory with an input, the output or another array. */
ER_API er_status er_covers_sets(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std,
                                double *lo, double *hi, double *slack);
/* ---- chains: elementwise stages after an op, as fused kernels evaluate them (docs/algorithms/chains.md) ---- */
typedef enum er_stage_kind {
    ER_STAGE_ADD = 1, ER_STAGE_MUL = 2, ER_STAGE_RELU = 3, ER_STAGE_CAST = 4, ER_STAGE_GELU = 5, ER_STAGE_SILU = 6,
    ER_STAGE_EXP = 7, ER_STAGE_EXP2 = 8, ER_STAGE_LOG = 9, ER_STAGE_TANH = 10, ER_STAGE_SIGMOID = 11, ER_STAGE_ERF = 12,
    ER_STAGE_RSQRT = 13, ER_STAGE_GELU_TANH = 14
} er_stage_kind;
typedef struct er_stage {
    er_stage_kind kind;
    /* add, mul: a view of the op's output shape (stride 0 over broadcast dimensions); NULL: scalar */
    const er_tensor *t;
    double scalar;      /* add, mul with t NULL; gelu, gelu_tanh, silu: the ulps of erf, tanh or exp (0: 2); exp
                         * to rsqrt: the function's ulps (0: CUDA's table, 1 for log, 2 for the others) */
    er_format format;   /* cast: the storage format, rounded to nearest even */
    const er_ref *ref;  /* add, mul: another reference of one output of the op's output shape (t NULL): its values are
                         * any its standard allows (the same standard, in the compute format), as a fused kernel's
                         * second accumulator (SwiGLU's x W3, a residual from another op); NULL: t or scalar */
} er_stage;
/* The reference of a tensor's own values: exact, so covers() checks an output equal to x rounded to nearest into
 * the output's format, and the base of elementwise chains (er_chain: er.gelu(x) in Python). x must outlive it. */
ER_API er_status er_tensor_ref(er_ref **out, const er_tensor *x);
/* The reference of `base` (a matmul, scaled matmul, sum or er_tensor_ref) followed by `nstages` elementwise stages,
 * as a kernel evaluates them after the reduction (docs/algorithms/chains.md): add and mul each rounded once to the
 * compute format of the standard given at covers, their operand a number, a tensor (first rounded to that format)
 * or another reference (any value its standard allows); relu exact (a NaN may become 0, as max instructions do);
 * cast a rounding to nearest even into its format (the format's default overflow rule); gelu as torch's CUDA kernel
 * evaluates it, (x / 2)(1 + erf(x fl(1/sqrt 2))); gelu_tanh as (x / 2)(1 + tanh(fl(sqrt(2/pi))(x + fl(0.044715) x^3)))
 * (the cube in any order, the sum fused or not) or as x sigmoid(2u), its argument doubled; silu as x / (1 + exp(-x)) or
 * x * sigmoid(x); exp, exp2, log, tanh,
 * erf and rsqrt; sigmoid as 1 / (1 + exp(-x)). Each function within `scalar` ulps (0: CUDA's table); a subnormal
 * argument or result may be flushed to zero. With math=triton (compute=fp32), Triton's lowering: exp is ex2.approx
 * of fl(x fl(log2 e)) and a division (sigmoid's, silu's) within 2 ulps. The standard's order applies to base and
 * to the stages' references. base, the stages' views and references must outlive the chain (the views themselves
 * are copied). */
ER_API er_status er_chain(er_ref **out, const er_ref *base, const er_stage *stages, int nstages);
/* For FFI binding writers: a stage kind's name ("add", "mul", "relu", "cast", "gelu", "silu", "exp", "exp2", "log",
 * "tanh", "sigmoid", "erf", "rsqrt", "gelu_tanh"; NULL for a value that is no kind) and sizeof(er_stage), so that
 * bindings check the values and the layout they copy instead of trusting them. */
ER_API const char *er_stage_kind_name(er_stage_kind kind);
ER_API size_t er_stage_sizeof(void);

/* ---- quantisation with an amax (docs/algorithms/quantize.md) ---- */
/* ER_GRAN_TILE: square tiles of block x block elements over the last two dimensions (Transformer Engine's 2-D
 * NVFP4 weights: 16 x 16). */
typedef enum er_granularity {
    ER_GRAN_TENSOR = 0,
    ER_GRAN_ROW = 1,
    ER_GRAN_BLOCK = 2,
    ER_GRAN_TILE = 3
} er_granularity;
typedef enum er_scale_recipe {
    ER_RECIPE_AMAX = 0,
    ER_RECIPE_POW2 = 1,
    ER_RECIPE_INV = 2,
    /* OCP Microscaling (MX v1.0): the scale output is X = 2^e, q = RN_q(x / X) saturated. The shared exponent e is
     * floor(log2 amax) - emax_q (the spec's, MX), ceil(log2 amax) - emax_q (MX_CEIL), floor(log2 amax rounded to q's
     * precision, ties up) - emax_q (MX_EVEN), or ceil(log2(amax / qmax)) from a division within div_ulps (MX_RCEIL:
     * cuBLAS and cvt.rp.ue8m0), each held to e8m0's range (docs/algorithms/quantize.md, Lemma Q5). */
    ER_RECIPE_MX = 3,
    ER_RECIPE_MX_CEIL = 4,
    ER_RECIPE_MX_EVEN = 5,
    ER_RECIPE_MX_RCEIL = 6,
    /* NVFP4 (blocks, usually of 16, of an fp4 q): the scale output is each block's e4m3 decode scale
     * RN_e4m3(amax_b S / qmax) for the tensor's encode scale S = 448 qmax / max |x|, and q = RN_q(x S / scale)
     * saturated, each product and quotient in fp32 as Transformer Engine and torchao compute them (Lemma Q7). */
    ER_RECIPE_NVFP4 = 7
} er_scale_recipe;
/* The reference of quantising x to format q (fp8, or any float format narrower than the compute format), as
 * Transformer Engine and torch recipes do: three outputs, q (x's shape), amax and scale, one per group (the whole
 * tensor: shape [1]; each row along the last dimension: x's leading shape; blocks of `block` elements along the last
 * dimension: x's leading shape and ceil(cols / block); tiles of block x block over the last two dimensions, x of 2 or
 * more dimensions: its shape but the last two, then ceil(rows / block) and ceil(cols / block)). amax = max |x| over
 * the group, exact; scale = qmax / amax (ER_RECIPE_AMAX) or the power of two at or below it (ER_RECIPE_POW2),
 * computed in the compute format within div_ulps (default 2: a correctly rounded division, a reciprocal then a
 * product, div.full.f32); amax 0 or not finite
 * gives scale 1 or the plain quotient; q = RN_q(RN(x scale)), saturated or with q's overflow rule. ER_RECIPE_INV:
 * the scale output is scale_inv = amax / qmax (0 or 1 where amax is 0) and q = RN_q(x / scale_inv), each division
 * within div_ulps (DeepSeek-style blockwise kernels). The MX recipes: the scale output is the power of two X (an
 * e8m0 tensor, or any format holding it) and q = RN_q(x / X) saturated; an all-zero group allows every X, a group
 * holding an infinity or NaN requires X = NaN and leaves q free (the spec's NaN block), and one holding a NaN but no
 * infinity also allows the other elements' X (a max that skips NaN), a NaN element's q free. Checked together
 * (er_covers_outputs), q is judged against the kernel's own scale where that scale is in its set. x must outlive
 * the reference; er_quantize_ref takes the MX and NVFP4 recipes too (quantize.md, Lemmas Q8 and Q9). */
ER_API er_status er_quantize(er_ref **out, const er_tensor *x, er_format q, er_granularity granularity, int64_t block,
                             er_scale_recipe recipe);
/* Scaled dot-product attention (er_attention): the mask and the scale. A zero-initialised struct (or NULL) asks for
 * no mask and the scale 1/sqrt(D). */
typedef struct er_attention_opts {
    double scale;            /* 0: 1/sqrt(D), the real number; else this double, exactly */
    int causal;              /* 1: key j is masked for query i when j > i + offset */
    int bottom_right;        /* the offset of causal and the window: 0 (top-left, torch's is_causal) or Sk - Sq
                                (bottom-right, FlashAttention 2.1 and later) */
    int window;              /* 1: keys outside [i + offset - window_left, i + offset + window_right] are masked too */
    int64_t window_left, window_right; /* with window = 1: nonnegative */
    int enable_gqa;          /* 1: H may be a multiple of Hkv; query head h reads kv head h / (H / Hkv) */
} er_attention_opts;
/* Attention forward (SDPA, flash attention): q [..., H, Sq, D], k [..., Hkv, Sk, D], v [..., Hkv, Sk, Dv] (the
 * leading dimensions equal; 2-dimensional q, k, v are one head), each of at most 24 significant bits (fp32, bf16,
 * fp16, fp8). Two outputs: O [..., H, Sq, Dv] = softmax(scale q k^T + mask) v and LSE [..., H, Sq], the natural
 * log of each row's sum of exp(scale q k^T) over its unmasked keys. A fully masked row's exact O is 0 and its LSE
 * -inf. Standard any_order (compute fp32 or tf32) with exp_ulps (default 2), log_ulps and kv_block (default 16):
 * every flash-style evaluation (docs/algorithms/attention.md). Check both with er_covers_outputs, O alone with
 * er_covers. q, k and v must outlive the reference. */
ER_API er_status er_attention(er_ref **out, const er_tensor *q, const er_tensor *k, const er_tensor *v,
                              const er_attention_opts *opts);
/* sizeof(er_attention_opts), for bindings that lay the struct out themselves. */
ER_API size_t er_attention_opts_sizeof(void);
/* fp8 attention's scales (er_attention_fp8), as cuDNN's and FlashAttention-3's fp8 kernels take them. A zero field is
 * 1 (descale_s: 1 / scale_s, the real number); every other value must be positive and finite. */
typedef struct er_attention_fp8_scales {
    double descale_q, descale_k; /* the scores are scale descale_q descale_k (q . k) */
    double descale_v;            /* O is descale_v softmax(s) v */
    double scale_s;              /* P is quantised to v's format as RN(p scale_s) before P V ... */
    double descale_s;            /* ... and P V is multiplied by descale_s (0: exactly 1 / scale_s) */
    double scale_o;              /* the output is O scale_o in O's format (the amax_o is of O before it) */
} er_attention_fp8_scales;
/* fp8 attention forward (cuDNN's fp8 SDPA, FlashAttention-3's fp8 path): q, k, v and opts as er_attention takes them
 * (typically fp8 e4m3), with the scales above. Four outputs: O [..., H, Sq, Dv] = scale_o descale_v softmax(scale
 * descale_q descale_k q k^T + mask) v, LSE [..., H, Sq] of those scores, amax_s [1] (the largest P before scale_s,
 * normalised by the row's sum or not: either is in the set) and amax_o [1] (max |descale_v softmax(s) v| before
 * scale_o); the amax outputs are never called exact. Standards and options as er_attention's; P rounded to v's format
 * after its scale_s, the kernel's descales each rounded in fp32 (docs/algorithms/attention.md, Theorem A4). A
 * scale_s that could take P past v's largest value is refused. q, k and v must outlive the reference. */
ER_API er_status er_attention_fp8(er_ref **out, const er_tensor *q, const er_tensor *k, const er_tensor *v,
                                  const er_attention_opts *opts, const er_attention_fp8_scales *scales);
/* sizeof(er_attention_fp8_scales), for bindings. */
ER_API size_t er_attention_fp8_scales_sizeof(void);
/* Attention's backward pass (FlashAttention-2/3's backward, torch SDPA's): q, k, v as er_attention takes them, o
 * [..., H, Sq, Dv] and lse [..., H, Sq] the forward's saved outputs as the backward kernel read them (lse NULL: a
 * kernel that recomputes it, any value Theorem A3's set allows), dout (O's shape) the gradient of O. Three outputs:
 * dq (q's shape), dk (k's) and dv (v's): with P = exp(scale q k^T - lse) over the unmasked keys (the exact softmax
 * when lse is NULL), D = rowsum(dout o) (the exact O's when lse is NULL), dS = P (dout v^T - D): dq = scale dS k,
 * dk = scale dS^T q, dv = P^T dout, GQA's kv heads summed over their query heads. A fully masked row gives zero
 * gradients. Standard any_order or mma:<arch> in fp32 (or compute=tf32) with exp_ulps, qk_scale=input and
 * products=compute (docs/algorithms/attention-backward.md). The tensors must outlive the reference. */
ER_API er_status er_attention_backward(er_ref **out, const er_tensor *q, const er_tensor *k, const er_tensor *v,
                                       const er_tensor *o, const er_tensor *lse, const er_tensor *dout,
                                       const er_attention_opts *opts);
/* The same with x the output of a reference of one output with exact values (a matmul, a reduction, a tensor, a
 * chain: a GEMM whose epilogue quantises its accumulator): x's values are any the base's standard allows in the
 * compute format (its enclosure), amax's set is every max |x| they give, the scale follows the kernel's amax and q
 * the kernel's scale where each is in its set. covers() takes the base's standard, with div_ulps for the scale.
 * Every recipe (an MX block, or an NVFP4 tensor, whose base set allows an infinity or NaN: every scale, q free).
 * base must outlive the reference. */
ER_API er_status er_quantize_ref(er_ref **out, const er_ref *base, er_format q, er_granularity granularity,
                                 int64_t block, er_scale_recipe recipe);

/* The enclosure of a reference under a standard: each element's set for output `output` (0 for one-output ops; y,
 * mean, rstd for layernorm) of format `format`, materialised without an output to check. lo[i] and hi[i] (n doubles
 * each, row-major) get the least and greatest finite values the set allows (NaN and NaN where it allows none);
 * flags[i] (n bytes) the special values: ER_ENCLOSURE_NAN (NaN allowed), ER_ENCLOSURE_NAN_ONLY (NaN required: every
 * correct implementation gives NaN; lo, hi are then NaN), ER_ENCLOSURE_PINF, ER_ENCLOSURE_NINF (an infinity allowed).
 * An output y passes er_covers exactly when it lies in [lo, hi] or is a special value its flags allow
 * (docs/reference/classes.md). The arrays must not share memory with the inputs or each other (ER_ERR_OUTPUT). */
#define ER_ENCLOSURE_NAN 1u
#define ER_ENCLOSURE_NAN_ONLY 2u
#define ER_ENCLOSURE_PINF 4u
#define ER_ENCLOSURE_NINF 8u
ER_API er_status er_ref_enclosure(const er_ref *ref, int output, const er_standard *std, er_format format, double *lo,
                                  double *hi, uint8_t *flags);
/* er_covers_outputs with each output's sets: lo[i], hi[i] (both NULL: not wanted) and slack[i] (slack or its entries
 * may be NULL) sized as output i. */
ER_API er_status er_covers_outputs_sets(er_report *reps, const er_ref *ref, const er_tensor *const *outs, int nout,
                                        const er_standard *std, double *const *lo, double *const *hi,
                                        double *const *slack);
/* The exact output a correct implementation of a fully fixed standard produces (er_standard_is_fixed), written
 * into `out` (the op's output shape, any format and strides; out->data must be writable and its elements
 * distinct). covers() under the same standard accepts exactly these values. ER_ERR_STANDARD for a standard
 * that leaves choices free. */
ER_API er_status er_emulate(const er_ref *ref, er_tensor *out, const er_standard *std);
/* Parses the standard, builds the matmul reference, classifies, frees the reference: one call for unit tests. */
ER_API er_status er_matmul_covers(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *C,
                                  const char *standard, const char *options);

#ifdef __cplusplus
}
#endif
#endif
