/* verdicts.c: exactref's verdicts next to the tolerance rules peers use, on the same outputs: outputs of correct
 * implementations (any verdict against them is a false alarm) and of classic kernel bugs (a verdict against them
 * is a catch). Implementations are plain C written here, in the kernels' own arithmetic (fp32 and fp16
 * accumulators, fused or not, in several orders, and the tensor-core block). Rules: exactref under the standard
 * the correct kernel states; torch.testing.assert_close defaults; TileLang (atol = rtol = 1e-2, 1% of elements may
 * mismatch); the cuDNN frontend matmul fuzzer (rtol 1e-2, atol 2e-2, both times max(1, sqrt(K/128))); numpy
 * allclose defaults; Transformer Engine's fp8 rule (rtol 0.125, atol 0.0675; amax compared exactly where there is
 * one); cuDNN's SDPA tests (atol = rtol = 2e-2), TritonBench's attention check (atol 2e-2, rtol 1e-2) and, for attention
 * only, FlashAttention's (O's error at most twice that of a low-precision implementation). Peers compare with the
 * exact result rounded to the output format (matmul) or a float64 implementation (the other ops: softmax, the norms,
 * a GEMM epilogue with bias and gelu, fp8 quantisation, attention's O), as a test would.
 *
 * For each bug case the program also checks a trigger, a sufficient condition, computed here without exactref,
 * under which the bug puts some element outside everything the standard allows (see docs/verdicts.md); exactref
 * must catch every triggered case.
 *
 * Usage: verdicts [--quick] [--json FILE] [--seed N]. --quick (the version `make test` runs) exits 1 when exactref
 * raises a false alarm, misses a triggered bug, or a bug class is never triggered. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/exactref.h>
#include "bench_util.h"

/* ---------------------------------------------------------------- inputs */
static uint64_t rs = 1;
static double unif(void) { rs = rs * 6364136223846793005u + 1442695040888963407u; return (double)(rs >> 11) * 0x1p-53; }
static double gauss(void) { double s = 0; for (int i = 0; i < 6; i++) s += unif(); return (s - 3.0) * 1.41; }
static double to_fmt(er_format f, double x) { double y; er_round_double(&y, f, x, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE); return y; }
/* a kernel's store to its output format: IEEE conversion (overflow gives infinity) */
static double to_out(er_format f, double x) { double y; er_round_double(&y, f, x, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); return y; }

/* input families: normal, all-positive, cancellation, wide exponent range, near overflow, subnormal, inf/NaN */
enum { D_NORMAL, D_POSITIVE, D_CANCEL, D_WIDE, D_NEAR_MAX, D_SUBNORMAL, D_SPECIAL, D_COUNT };

static double draw(int dist, er_format f, int k, int K) {
    switch (dist) {
    case D_POSITIVE: return to_fmt(f, unif() + 0.01);
    case D_CANCEL: return to_fmt(f, (k < K / 2 ? 1 : -1) * (8 + unif()));
    case D_WIDE: return to_fmt(f, gauss() * ldexp(1.0, (int)(unif() * 24) - 12));
    case D_NEAR_MAX: return to_fmt(f, (unif() + 0.5) * (f == ER_FP16 ? 200.0 : 1e18));
    case D_SUBNORMAL: return to_fmt(f, gauss() * (f == ER_FP16 ? 1e-6 : 1e-40));
    case D_SPECIAL: { double u = unif(); return u < 0.01 ? INFINITY : u < 0.02 ? NAN : to_fmt(f, gauss()); }
    default: return to_fmt(f, gauss());
    }
}

/* ---------------------------------------------------------------- verdict bookkeeping */
enum { R_EXACTREF, R_TORCH, R_TILELANG, R_CUDNN, R_NUMPY, R_TE, R_SDPA, R_TRITONBENCH, R_FA2X, R_COUNT };
static const char *const rnames[R_COUNT] = {"exactref", "torch.assert_close", "TileLang 1e-2/1%", "cuDNN fuzzer", "numpy.allclose",
                                            "TE fp8 .125/.0675", "cuDNN SDPA 2e-2", "TritonBench", "FlashAttn 2x"};

typedef struct klass { const char *name, *trigger; int bug, attn; long cases, triggered, flagged[R_COUNT], trig_caught_exactref; } klass;
enum { K_SEQ, K_FMA, K_BLOCKED, K_SPLITK, K_TREE, K_MMA, K_TF32_RNE, K_TF32_TRUNC, K_TF32X3, K_SOFTMAX, K_SOFTMAX_TRITON,
       K_ONLINE, K_LN_TWO, K_LN_TREE, K_LN_WELFORD, K_RMS, K_EPI_GELU, K_QUANT, K_ATT, K_ATT_SPLIT, K_SOFTMAX_TORCH, K_LN_WELFORD_TORCH,
       K_CE_FUSED, K_CE_TORCH, K_LNB_TORCH, K_LNB_TRITON, K_MX, K_NVFP4, K_ABWD_FA2, K_ABWD_FP32, K_ATT8, N_CORRECT };
enum { B_TAIL = N_CORRECT, B_OFF1, B_ROW, B_COL, B_FP16ACC, B_TF32, B_SCALE2, B_NORESET, B_SPLITLOST, B_BIAS2, B_PAD, B_NOMAX,
       B_UNBIASED, B_ONEPASS, B_UNBIASED_TREE, B_EPS_TREE, B_RSQRT, B_CAUSAL, B_ACT_FIRST, B_QSCALE_INV, B_QAMAX_AXIS, B_QTRUNC,
       B_ATT_CAUSAL, B_ATT_PAD, B_ATT_NORESCALE, B_ATT_LSE2, B_ATT_SCALE, B_ATT_GQA, B_DROP_ANY, B_DROP_DEPTH, B_UNBIASED_WELFORD,
       B_CE_NOW, B_CE_EPS, B_CE_TAIL, B_LNB_NOMEAN, B_LNB_RSTD2, B_LNB_DW_NORSTD, B_LNB_DB_LAST, B_MX_CEIL, B_MX_NEXT,
       B_NV_UNROUNDED, B_NV_NOGLOBAL, B_ABWD_DK_SCALE, B_ABWD_DQ_BLOCK, B_ABWD_D_ZERO, B_ATT8_AMAX0, B_ATT8_AMAX_SCALED,
       B_ATT8_NOSS, N_KLASS };
static klass KL[N_KLASS] = {
    {.name = "matmul fp32 sequential", .trigger = ""}, {.name = "matmul fp32 sequential, fma", .trigger = ""}, {.name = "matmul fp32 blocked (32)", .trigger = ""},
    {.name = "matmul fp32 split-K (4)", .trigger = ""}, {.name = "matmul fp32 random tree", .trigger = ""}, {.name = "matmul tensor-core chain (sm90)", .trigger = ""},
    {.name = "matmul tf32, ties to even (cuBLAS)", .trigger = ""}, {.name = "matmul tf32, truncated (Triton tf32)", .trigger = ""},
    {.name = "matmul tf32x3 (Triton)", .trigger = ""},
    {.name = "softmax fp32", .trigger = ""}, {.name = "softmax, Triton's ex2.approx exp", .trigger = ""}, {.name = "softmax online (blocks of 32)", .trigger = ""}, {.name = "layernorm two-pass", .trigger = ""},
    {.name = "layernorm two-pass, tl.sum trees (at depth)", .trigger = ""}, {.name = "layernorm Welford", .trigger = ""}, {.name = "rmsnorm", .trigger = ""},
    {.name = "GEMM + bias + gelu, fp32 epilogue, fp16", .trigger = ""}, {.name = "fp8 e4m3 quantize per row (amax)", .trigger = ""},
    {.name = "attention flash (fp16, blocks of 64)", .trigger = "", .attn = 1}, {.name = "attention split-KV (3 splits)", .trigger = "", .attn = 1},
    {.name = "softmax, torch's trees (at depth)", .trigger = ""},
    {.name = "layernorm Welford, torch's tree (at depth)", .trigger = ""},
    {.name = "cross-entropy fused (Liger's form), fp32", .trigger = ""},
    {.name = "cross-entropy, torch's composition, fp32", .trigger = ""},
    {.name = "layer_norm backward, torch's CUDA form, fp32", .trigger = ""},
    {.name = "layer_norm backward, Triton tutorial's form", .trigger = ""},
    {.name = "MXFP8 quantize (the OCP spec's recipe), fp32", .trigger = ""},
    {.name = "NVFP4 quantize (Transformer Engine's form)", .trigger = ""},
    {.name = "attention bwd, FA2 (P, dS to fp16), fp16", .trigger = "", .attn = 1},
    {.name = "attention bwd, P and dS in fp32, fp16", .trigger = "", .attn = 1},
    {.name = "fp8 attention (e4m3, descales, scale_s 448)", .trigger = ""},
    {.name = "dropped K tail", .trigger = "an element moves by more than W", .bug = 1}, {.name = "off-by-one K", .trigger = "an element moves by more than W", .bug = 1},
    {.name = "last row never stored", .trigger = "an element moves by more than W", .bug = 1}, {.name = "last column never stored", .trigger = "an element moves by more than W", .bug = 1},
    {.name = "fp16 accumulation, fp32 claimed", .trigger = "an element moves by more than W", .bug = 1}, {.name = "tf32 inputs, fp32 claimed", .trigger = "an element moves by more than W", .bug = 1},
    {.name = "scale applied twice", .trigger = "an element moves by more than W", .bug = 1}, {.name = "accumulator not reset between tiles", .trigger = "an element moves by more than W", .bug = 1},
    {.name = "one split-K partial lost", .trigger = "an element moves by more than W", .bug = 1}, {.name = "bias added twice", .trigger = "an element moves by more than W", .bug = 1},
    {.name = "padding lanes in the softmax denominator", .trigger = "an output moves by more than 1%", .bug = 1},
    {.name = "no max subtraction (exp overflows)", .trigger = "exp(max x) overflows fp32", .bug = 1},
    {.name = "unbiased variance", .trigger = "rstd moves beyond the two-pass margin", .bug = 1}, {.name = "one-pass variance", .trigger = "rstd moves beyond the two-pass margin", .bug = 1},
    {.name = "unbiased variance, tl.sum trees (at depth)", .trigger = "rstd moves beyond the two-pass margin at depth D", .bug = 1},
    {.name = "eps outside sqrt, tl.sum trees (at depth)", .trigger = "rstd moves beyond the two-pass margin at depth D", .bug = 1},
    {.name = "rsqrt beyond its ulp budget (256 ulps)", .trigger = "y moves by more than (n + 8) 2^-24 relative", .bug = 1},
    {.name = "causal mask off by one", .trigger = "an output moves by more than 1%", .bug = 1},
    {.name = "epilogue: gelu before the bias", .trigger = "an element moves by more than W_epi", .bug = 1},
    {.name = "quantize: scale inverted (amax / 448)", .trigger = "a scale moves by more than 2^-20 relative", .bug = 1},
    {.name = "quantize: amax over the wrong axis", .trigger = "an amax differs from its row's max |x|", .bug = 1},
    {.name = "quantize: q truncated, not rounded", .trigger = "a q differs from RN(RN(x scale))", .bug = 1},
    {.name = "attention: causal mask off by one", .trigger = "O or LSE moves beyond W_att", .bug = 1, .attn = 1},
    {.name = "attention: padded keys unmasked", .trigger = "O or LSE moves beyond W_att", .bug = 1, .attn = 1},
    {.name = "attention: no rescale of O and l", .trigger = "O or LSE moves beyond W_att", .bug = 1, .attn = 1},
    {.name = "attention: LSE in base 2", .trigger = "O or LSE moves beyond W_att", .bug = 1, .attn = 1},
    {.name = "attention: scale 1/D", .trigger = "O or LSE moves beyond W_att", .bug = 1, .attn = 1},
    {.name = "attention: GQA head h % Hkv", .trigger = "O or LSE moves beyond W_att", .bug = 1, .attn = 1},
    {.name = "softmax sum misses its last element", .trigger = "an output moves by more than (n + 16) 2^-23 relative", .bug = 1},
    {.name = "the same, torch's trees (at depth)", .trigger = "an output moves by more than (D + 16) 2^-23 relative", .bug = 1},
    {.name = "unbiased var., torch's Welford (at depth)", .trigger = "rstd moves beyond the two-pass margin at depth D", .bug = 1},
    {.name = "cross-entropy: gradient not divided by W", .trigger = "a dlogits element moves beyond W_ce", .bug = 1},
    {.name = "cross-entropy: smoothing eps, not eps / C", .trigger = "a dlogits element moves beyond W_ce", .bug = 1},
    {.name = "cross-entropy: sum misses its last class", .trigger = "a dlogits element moves beyond W_ce", .bug = 1},
    {.name = "layer_norm bwd: dx without its mean term", .trigger = "an output moves beyond W_lnb", .bug = 1},
    {.name = "layer_norm bwd: rstd applied twice", .trigger = "an output moves beyond W_lnb", .bug = 1},
    {.name = "layer_norm bwd: dweight without rstd", .trigger = "an output moves beyond W_lnb", .bug = 1},
    {.name = "layer_norm bwd: dbias misses its last row", .trigger = "an output moves beyond W_lnb", .bug = 1},
    {.name = "MXFP8: shared exponent rounded up", .trigger = "a scale differs from the spec's", .bug = 1},
    {.name = "MXFP8: the next block's scale", .trigger = "a scale differs from the spec's", .bug = 1},
    {.name = "NVFP4: q from the unrounded block scale", .trigger = "a q differs from TE's", .bug = 1},
    {.name = "NVFP4: per-tensor scale left out", .trigger = "a q or scale differs from TE's", .bug = 1},
    {.name = "attention bwd: dK without its scale", .trigger = "a gradient moves beyond W_ab", .bug = 1, .attn = 1},
    {.name = "attention bwd: one key block's dQ lost", .trigger = "a gradient moves beyond W_ab", .bug = 1, .attn = 1},
    {.name = "attention bwd: D left out of dS", .trigger = "a gradient moves beyond W_ab", .bug = 1, .attn = 1},
    {.name = "fp8 attention: amax_o written 0", .trigger = "O is not all 0", .bug = 1},
    {.name = "fp8 attention: amax_o after scale_o", .trigger = "scale_o is not 1", .bug = 1},
    {.name = "fp8 attention: P without scale_s", .trigger = "O moves beyond W_8", .bug = 1},
};

/* Peer rules on outputs y against references r (n elements, K the reduction length). */
static void peer_rules(const double *y, const double *r, int64_t n, er_format fo, double Kred, int flags[R_COUNT]) {
    double rt = fo == ER_FP16 ? 1e-3 : fo == ER_BF16 ? 1.6e-2 : 1.3e-6, at = 1e-5;
    double sc = fmax(1.0, sqrt(Kred / 128.0));
    int64_t tl_bad = 0;
    flags[R_TORCH] = flags[R_CUDNN] = flags[R_NUMPY] = flags[R_TE] = flags[R_SDPA] = flags[R_TRITONBENCH] = flags[R_FA2X] = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = y[i], b = r[i];
        int nan = isnan(a) || isnan(b), same_inf = isinf(a) && a == b, d_ok;
        double d = fabs(a - b);
        d_ok = !nan && (same_inf || d <= at + rt * fabs(b));
        if (!d_ok) flags[R_TORCH] = 1;
        if (!(!nan && (same_inf || d <= 2e-2 * sc + 1e-2 * sc * fabs(b)))) flags[R_CUDNN] = 1;
        if (!(!nan && (same_inf || d <= 1e-8 + 1e-5 * fabs(b)))) flags[R_NUMPY] = 1;
        if (!(!nan && (same_inf || d <= 1e-2 + 1e-2 * fabs(b)))) tl_bad++;
        if (!(!nan && (same_inf || d <= 0.0675 + 0.125 * fabs(b)))) flags[R_TE] = 1;
        if (!(!nan && (same_inf || d <= 2e-2 + 2e-2 * fabs(b)))) flags[R_SDPA] = 1;
        if (!(!nan && (same_inf || d <= 2e-2 + 1e-2 * fabs(b)))) flags[R_TRITONBENCH] = 1;
    }
    flags[R_TILELANG] = tl_bad > n / 100;
}

static void record(int kl, const int flags[R_COUNT], int triggered) {
    klass *k = &KL[kl];
    k->cases++;
    for (int r = 0; r < R_COUNT; r++) k->flagged[r] += flags[r];
    if (triggered) { k->triggered++; k->trig_caught_exactref += flags[R_EXACTREF]; }
}

static int all_pass(er_report *rep, int n) { int ok = 1; for (int i = 0; i < n; i++) { ok &= er_report_all(&rep[i]); er_report_clear(&rep[i]); } return ok; }

/* ---------------------------------------------------------------- matmul implementations */
static float dotf_seq(const double *a, const double *b, int K, int stride, int fma_) {
    float s = 0;
    for (int k = 0; k < K; k++) s = fma_ ? fmaf((float)a[k], (float)b[k * stride], s) : s + (float)a[k] * (float)b[k * stride];
    return s;
}

/* The sm90 tensor-core block: E from the operands' exponents, terms truncated to 2^(E-25), toward zero to fp32. */
static float mma_block(float c, const double *a, const double *b, int n, int stride) {
    int special = !isfinite(c);
    for (int j = 0; j < n; j++) special |= !isfinite(a[j]) || !isfinite(b[j * stride]);
    if (special) { double s = c; for (int j = 0; j < n; j++) s += a[j] * b[j * stride]; return (float)s; }
    int E = INT32_MIN;
    if (c != 0) E = ilogb(c);
    for (int j = 0; j < n; j++) if (a[j] != 0 && b[j * stride] != 0) { int e = ilogb(a[j]) + ilogb(b[j * stride]); if (e > E) E = e; }
    if (E == INT32_MIN) return 0.0f;
    long long S = (long long)trunc(ldexp(c, 25 - E));
    for (int j = 0; j < n; j++) S += (long long)trunc(ldexp(a[j] * b[j * stride], 25 - E));
    double v = ldexp((double)S, E - 25); /* exact: |S| < 2^30 */
    float f = (float)v;
    if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f); /* toward zero */
    return f;
}

/* fp32 x to tf32: 0 truncated (raw bits to the tensor core), 1 to nearest ties away (cvt.rna), 2 ties to even
 * (cvt.rn); the low 13 bits of the pattern, which for subnormals is tf32's subnormal grid too. */
static double tf32_of(double x, int mode) {
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (!isfinite(f)) return f;
    if (mode == 1) u += 0x1000u;
    if (mode == 2) u += 0xfffu + ((u >> 13) & 1u);
    u &= ~0x1fffu;
    memcpy(&f, &u, 4);
    return f;
}

/* The tensor-core chain over operands converted to tf32 (mode as tf32_of; 3: tf32x3, each split into big + small
 * by cvt.rna and three dots per block of 8, small x small dropped). */
static double mm_tf32(const double *a, const double *b, int K, int stride, int mode) {
    double *p = malloc(sizeof(double) * 4 * (size_t)(K ? K : 1)), *a1 = p, *a2 = p + K, *b1 = p + 2 * K, *b2 = p + 3 * K;
    for (int k = 0; k < K; k++) {
        a1[k] = tf32_of(a[k], mode == 3 ? 1 : mode);
        b1[k] = tf32_of(b[(size_t)k * stride], mode == 3 ? 1 : mode);
        a2[k] = tf32_of(a[k] - a1[k], 1);
        b2[k] = tf32_of(b[(size_t)k * stride] - b1[k], 1);
    }
    float c = 0;
    for (int k0 = 0; k0 < K; k0 += 8) {
        int n = K - k0 < 8 ? K - k0 : 8;
        if (mode == 3) {
            c = mma_block(c, a2 + k0, b1 + k0, n, 1);
            c = mma_block(c, a1 + k0, b2 + k0, n, 1);
        }
        c = mma_block(c, a1 + k0, b1 + k0, n, 1);
    }
    free(p);
    return c;
}

static double mm_impl(int kl, const double *a, const double *b, int K, int stride) {
    switch (kl) {
    case K_TF32_RNE: return mm_tf32(a, b, K, stride, 2);
    case K_TF32_TRUNC: return mm_tf32(a, b, K, stride, 0);
    case K_TF32X3: return mm_tf32(a, b, K, stride, 3);
    case K_SEQ: return dotf_seq(a, b, K, stride, 0);
    case K_FMA: return dotf_seq(a, b, K, stride, 1);
    case K_BLOCKED: { float s = 0; for (int k0 = 0; k0 < K; k0 += 32) s += dotf_seq(a + k0, b + (size_t)k0 * stride, K - k0 < 32 ? K - k0 : 32, stride, 0); return s; }
    case K_SPLITK: case B_SPLITLOST: {
        int ch = (K + 3) / 4;
        float p[4] = {0, 0, 0, 0};
        for (int c = 0; c < 4; c++) { int k0 = c * ch; if (k0 < K) p[c] = dotf_seq(a + k0, b + (size_t)k0 * stride, K - k0 < ch ? K - k0 : ch, stride, 1); }
        if (kl == B_SPLITLOST && K > ch) p[1] = 0; /* the second partial never arrives */
        return ((p[3] + p[1]) + p[0]) + p[2];
    }
    case K_TREE: {
        float *v = malloc(sizeof(float) * (size_t)K);
        for (int k = 0; k < K; k++) v[k] = (float)a[k] * (float)b[(size_t)k * stride];
        int n = K;
        while (n > 1) { int x = (int)(unif() * n), y = (int)(unif() * (n - 1)); if (y >= x) y++; v[x] += v[y]; v[y] = v[n - 1]; if (x == n - 1) v[y] = v[x]; n--; }
        float r = K ? v[0] : 0;
        free(v);
        return r;
    }
    case K_MMA: { float c = 0; for (int k0 = 0; k0 < K; k0 += 16) c = mma_block(c, a + k0, b + (size_t)k0 * stride, K - k0 < 16 ? K - k0 : 16, stride); return c; }
    case B_TAIL: { int Kd = K % 32 ? K - K % 32 : K - 32; return dotf_seq(a, b, Kd > 0 ? Kd : 0, stride, 1); }
    case B_OFF1: return dotf_seq(a, b, K - 1, stride, 1);
    case B_FP16ACC: { _Float16 s = 0; for (int k = 0; k < K; k++) s = (_Float16)((float)s + (float)a[k] * (float)b[(size_t)k * stride]); return (double)s; }
    case B_TF32: { float s = 0; for (int k = 0; k < K; k++) { float x = (float)a[k], y = (float)b[(size_t)k * stride]; uint32_t u, w; memcpy(&u, &x, 4); memcpy(&w, &y, 4); u &= 0xFFFFE000u; w &= 0xFFFFE000u; memcpy(&x, &u, 4); memcpy(&y, &w, 4); s = fmaf(x, y, s); } return s; }
    default: return dotf_seq(a, b, K, stride, 1);
    }
}

/* One matmul case: M x K x N inputs of format fx from distribution dist; implementation kl; output format fo. */
static void matmul_case(int kl, int M, int Kd, int N, er_format fx, er_format fo, int dist) {
    int bias = kl == B_BIAS2, K = Kd + bias; /* bias: A gets a column of ones, B a row of biases */
    double *a = malloc(sizeof(double) * (size_t)M * K), *b = malloc(sizeof(double) * (size_t)K * N);
    for (int i = 0; i < M; i++) for (int k = 0; k < K; k++) a[(size_t)i * K + k] = bias && k == Kd ? 1.0 : draw(dist, fx, k, K);
    for (int k = 0; k < K; k++) for (int j = 0; j < N; j++) b[(size_t)k * N + j] = draw(dist == D_CANCEL ? D_POSITIVE : dist, fx, k, K);
    int tf32 = kl == K_TF32_RNE || kl == K_TF32_TRUNC || kl == K_TF32X3;
    for (int64_t i = 0; tf32 && i < (int64_t)M * K + (int64_t)K * N; i++) { /* half the operands exact tf32 ties */
        double *v = i < (int64_t)M * K ? &a[i] : &b[i - (int64_t)M * K];
        if (unif() < 0.5 || !isfinite(*v)) continue;
        float f = (float)*v;
        uint32_t u;
        memcpy(&u, &f, 4);
        u = (u & ~0x1fffu) | 0x1000u;
        memcpy(&f, &u, 4);
        if (isfinite(f)) *v = f;
    }
    double scale = kl == B_SCALE2 ? 0.5 : 1.0;
    double *y = malloc(sizeof(double) * (size_t)M * N), *ref = malloc(sizeof(double) * (size_t)M * N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double v = mm_impl(kl, a + (size_t)i * K, b + j, K, N);
            if (bias) v = (float)(v + b[(size_t)Kd * N + j]); /* the bias added once more */
            if (kl == B_SCALE2) v = (float)((float)(v * scale) * scale); /* the scale applied twice */
            else if (scale != 1.0) v = (float)(v * scale);
            if (kl == B_NORESET && j % 16 != 0) v = (float)(v + y[(size_t)i * N + j - 1]); /* the previous element's total stays */
            y[(size_t)i * N + j] = to_out(fo, v);
        }
    if (kl == B_ROW) for (int j = 0; j < N; j++) y[(size_t)(M - 1) * N + j] = 0.0;
    if (kl == B_COL) for (int i = 0; i < M; i++) y[(size_t)i * N + N - 1] = 0.0;
    /* the reference and the standard */
    uint64_t *A = malloc(8 * (size_t)M * K), *B = malloc(8 * (size_t)K * N), *Y = malloc(8 * (size_t)M * N);
    for (int64_t i = 0; i < (int64_t)M * K; i++) { uint64_t bits; er_encode(&bits, fx, a[i], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); memcpy((char *)A + i * (er_format_storage_bits(fx) / 8), &bits, er_format_storage_bits(fx) / 8); }
    for (int64_t i = 0; i < (int64_t)K * N; i++) { uint64_t bits; er_encode(&bits, fx, b[i], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); memcpy((char *)B + i * (er_format_storage_bits(fx) / 8), &bits, er_format_storage_bits(fx) / 8); }
    for (int64_t i = 0; i < (int64_t)M * N; i++) { uint64_t bits; er_encode(&bits, fo, y[i], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); memcpy((char *)Y + i * (er_format_storage_bits(fo) / 8), &bits, er_format_storage_bits(fo) / 8); }
    er_tensor tA, tB, tY, tR;
    er_tensor_view(&tA, fx, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, fx, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&tY, fo, 2, (int64_t[]){M, N}, NULL, Y);
    er_ref *r;
    int scaled = scale != 1.0;
    if ((scaled ? er_scaled_matmul(&r, &tA, &tB, scale, 1.0) : er_matmul(&r, &tA, &tB)) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    double *rd = malloc(sizeof(double) * (size_t)M * N);
    er_tensor_view(&tR, ER_FP64, 2, (int64_t[]){M, N}, NULL, rd);
    er_ref_rounded(&tR, r);
    for (int64_t i = 0; i < (int64_t)M * N; i++) ref[i] = to_out(fo, rd[i]);
    const char *order = kl == K_MMA || tf32 ? "mma:sm90" : "any_order";
    const char *opts = kl == K_MMA ? "outer=any" : kl == K_TF32_RNE ? "outer=any compute=tf32 tf32=rne"
                     : kl == K_TF32_TRUNC ? "outer=any compute=tf32 tf32=truncate" : kl == K_TF32X3 ? "outer=any compute=tf32x3" : "compute=fp32";
    er_standard st;
    er_standard_parse(&st, order, opts);
    er_report rep;
    if (er_covers(&rep, r, &tY, &st) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    int flags[R_COUNT];
    flags[R_EXACTREF] = !all_pass(&rep, 1);
    peer_rules(y, ref, (int64_t)M * N, fo, K, flags);
    /* trigger: |y - S| > W = 2 K 2^-24 P + 2 ulp_O(|S| + K 2^-24 P) for some element away from overflow (the
     * any-order set lies within K 2^-24 P (1 + small) of S, the tensor-core set within less, and the output conversion
     * moves either by at most an ulp) */
    int trig = 0;
    for (int i = 0; i < M && !trig; i++)
        for (int j = 0; j < N && !trig; j++) {
            double S = rd[(size_t)i * N + j], P = 0;
            for (int k = 0; k < K; k++) P += fabs(a[(size_t)i * K + k] * b[(size_t)k * N + j]);
            P *= scale;
            double W = 2.0 * K * 0x1p-24 * P * 1.01 + 2.0 * er_format_ulp(fo, fabs(S) + K * 0x1p-24 * P);
            double v = y[(size_t)i * N + j];
            /* where a partial sum or the output may overflow, the standard allows infinities: no trigger there */
            if (!isfinite(S) || !isfinite(P) || 2.0 * P >= er_format_max(ER_FP32) / 4 || fabs(S) + W >= er_format_max(fo) / 2) continue;
            if (isnan(v) || fabs(v - S) > W) trig = 1;
        }
    record(kl, flags, KL[kl].bug && trig);
    er_ref_free(r);
    free(a); free(b); free(y); free(ref); free(A); free(B); free(Y); free(rd);
}

/* ---------------------------------------------------------------- softmax, layernorm, rmsnorm (fp32 rows) */
/* Triton's exp and division (math=triton): ex2 of the rounded product d fl(log2 e), exp2f moved by up to one ulp
 * (libm's exp2f is within one ulp, so the result stays within 2 ulps of the correctly rounded value), a subnormal
 * result flushed; the quotient moved by up to one ulp. */
static float ex2_like(float d) {
    float e = exp2f(d * 0x1.715476p+0f), u = unif();
    if (u < 0.3) e = nextafterf(e, 0.0f);
    else if (u < 0.6) e = nextafterf(e, INFINITY);
    return e < 0x1p-126f ? 0.0f : e;
}
static float div_like(float e, float s) {
    float q = e / s, u = unif();
    if (u < 0.3) q = nextafterf(q, 0.0f);
    else if (u < 0.6 && q != 0) q = nextafterf(q, INFINITY);
    return q < 0x1p-126f ? 0.0f : q;
}

/* The verdicts on softmax outputs y (yd as doubles) of rows x n fp32 inputs x: exactref under any_order with opts,
 * the peers against the float64 softmax rf; recorded under class kl (a triggered bug case where trig). */
static void softmax_verdict(int kl, int trig, const float *x, const float *y, const double *yd, const double *rf, int rows, int n,
                            const char *opts) {
    er_tensor tx, ty;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){rows, n}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){rows, n}, NULL, y);
    er_ref *ref;
    er_softmax(&ref, &tx, 1);
    er_standard st;
    er_standard_parse(&st, "any_order", opts);
    er_report rep;
    er_covers(&rep, ref, &ty, &st);
    int flags[R_COUNT];
    flags[R_EXACTREF] = !all_pass(&rep, 1);
    peer_rules(yd, rf, (int64_t)rows * n, ER_FP32, n, flags);
    record(kl, flags, KL[kl].bug && trig);
    er_ref_free(ref);
}

static void softmax_case(int kl, int rows, int n, int dist) {
    float *x = calloc((size_t)rows * n, sizeof(float)), *y = malloc(sizeof(float) * (size_t)rows * n);
    double *yd = malloc(sizeof(double) * (size_t)rows * n), *rf = malloc(sizeof(double) * (size_t)rows * n);
    int causal = kl == B_CAUSAL;
    for (int64_t i = 0; i < (int64_t)rows * n; i++) x[i] = (float)(kl == B_NOMAX ? 90 + 4 * gauss() : (kl == K_SOFTMAX_TRITON ? 30 : 3) * draw(dist == D_SPECIAL ? D_NORMAL : dist, ER_FP32, 0, 1));
    if (causal) for (int r = 0; r < rows; r++) for (int j = 0; j < n; j++) if (j > r % n) x[(size_t)r * n + j] = -INFINITY;
    int trig = 0;
    for (int r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * n;
        float xb[4096];
        for (int j = 0; j < n; j++) xb[j] = xr[j];
        if (causal) { int j = r % n + 1; if (j < n) xb[j] = 0.25f; } /* one future position let through */
        int pad = kl == B_PAD ? (n & (n - 1) ? 1 : 0) : 0, P2 = 1;
        while (P2 < n) P2 *= 2;
        float m = -INFINITY, s = 0;
        if (kl != B_NOMAX) for (int j = 0; j < n; j++) m = fmaxf(m, xb[j]);
        else m = 0;
        if (pad) m = fmaxf(m, 0.0f);
        if (kl == K_ONLINE) {
            float mm = -INFINITY;
            for (int j0 = 0; j0 < n; j0 += 32) {
                float mb = mm, bs = 0;
                for (int j = j0; j < n && j < j0 + 32; j++) mb = fmaxf(mb, xb[j]);
                for (int j = j0; j < n && j < j0 + 32; j++) bs += expf(xb[j] - mb);
                s = (mm == -INFINITY ? 0 : s * expf(mm - mb)) + bs;
                mm = mb;
            }
            m = mm;
        } else if (kl == K_SOFTMAX_TRITON) {
            float e[4096];
            for (int j = 0; j < n; j++) { e[j] = ex2_like(xb[j] - m); s += e[j]; }
            for (int j = 0; j < n; j++) y[(size_t)r * n + j] = div_like(e[j], s);
        } else {
            for (int j = 0; j < n; j++) s += expf(xb[j] - m);
            if (pad) s += (float)(P2 - n) * expf(0.0f - m); /* lanes past n hold 0, not -inf */
        }
        for (int j = 0; j < n && kl != K_SOFTMAX_TRITON; j++) y[(size_t)r * n + j] = expf(xb[j] - m) / s;
        /* the float64 softmax of the row */
        double md = -INFINITY, sd = 0;
        for (int j = 0; j < n; j++) md = fmax(md, xr[j]);
        for (int j = 0; j < n; j++) sd += exp((double)xr[j] - md);
        for (int j = 0; j < n; j++) {
            double v = exp((double)xr[j] - md) / sd;
            rf[(size_t)r * n + j] = (float)v;
            double got = y[(size_t)r * n + j];
            if (isnan(got) || fabs(got - v) > 0.01 * v + 1e-30) trig = 1;
        }
    }
    if (kl == B_NOMAX) { trig = 0; for (int64_t i = 0; i < (int64_t)rows * n; i++) trig |= expf(x[i]) == INFINITY; }
    for (int64_t i = 0; i < (int64_t)rows * n; i++) yd[i] = y[i];
    softmax_verdict(kl, trig, x, y, yd, rf, rows, n, kl == K_ONLINE ? "online=yes" : kl == K_SOFTMAX_TRITON ? "math=triton" : "");
    free(x); free(y); free(yd); free(rf);
}

/* torch's CUDA softmax sum over a row (er_depth_torch_softmax's trees): rows up to 1024 on the persistent path (W =
 * min(P, 32) lanes, lane t chaining t, t + W, ..., then an xor butterfly), longer ones on the block path (1024
 * threads chaining 4-element loads from t, then two 5-level shfl_down trees); `skip` leaves element n - 1 out. */
static float torch_softmax_sum(const float *e, int n, int skip) {
    static float part[1024];
    int m = skip ? n - 1 : n;
    if (n <= 1024) {
        int P = 1;
        while (P < n) P *= 2;
        int W = P < 32 ? P : 32;
        for (int t = 0; t < W; t++) { part[t] = 0; for (int j = t; j < P; j += W) part[t] += j < m ? e[j] : 0.0f; }
        for (int o = W / 2; o >= 1; o /= 2) {
            float np[32];
            for (int t = 0; t < W; t++) np[t] = part[t] + part[t ^ o];
            memcpy(part, np, sizeof(float) * (size_t)W);
        }
        return part[0];
    }
    for (int t = 0; t < 1024; t++) {
        part[t] = 0;
        for (int off = t; off * 4 < n; off += 1024)
            for (int j = 0; j < 4; j++) part[t] += off * 4 + j < m ? e[off * 4 + j] : 0.0f;
    }
    for (int level = 0; level < 2; level++) {
        int lanes = level ? 32 : 1024;
        for (int w = 0; w < lanes; w += 32)
            for (int o = 16; o >= 1; o /= 2)
                for (int l = 0; l + o < 32; l++) part[w + l] += part[w + l + o];
        if (!level) for (int w = 0; w < 32; w++) part[w] = part[w * 32];
    }
    return part[0];
}

/* softmax rows summed by torch's trees (K_SOFTMAX_TORCH: checked at er_depth_torch_softmax's depth), or missing the
 * last element of the sum (B_DROP_DEPTH at that depth; B_DROP_ANY under any order). */
static void softmax_tree_case(int kl, int rows, int n) {
    float *x = malloc(sizeof(float) * (size_t)rows * n), *y = malloc(sizeof(float) * (size_t)rows * n), *e = malloc(sizeof(float) * (size_t)n);
    double *yd = malloc(sizeof(double) * (size_t)rows * n), *rf = malloc(sizeof(double) * (size_t)rows * n);
    for (int64_t i = 0; i < (int64_t)rows * n; i++) x[i] = (float)(2 * gauss());
    int64_t D;
    er_depth_torch_softmax(&D, n);
    double W = ((kl == B_DROP_ANY ? (double)n : (double)D) + 16) * 0x1p-23;
    int trig = 0;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        float m = -INFINITY;
        for (int j = 0; j < n; j++) m = fmaxf(m, xr[j]);
        for (int j = 0; j < n; j++) e[j] = expf(xr[j] - m);
        float s = torch_softmax_sum(e, n, kl != K_SOFTMAX_TORCH);
        double sd = 0;
        for (int j = 0; j < n; j++) sd += exp((double)xr[j] - m);
        for (int j = 0; j < n; j++) {
            size_t k = (size_t)r * n + j;
            y[k] = e[j] / s;
            double v = exp((double)xr[j] - m) / sd;
            rf[k] = v;
            yd[k] = y[k];
            if (fabs(yd[k] - v) > W * v + 2 * er_format_ulp(ER_FP32, v)) trig = 1;
        }
    }
    char opts[32];
    snprintf(opts, sizeof opts, "depth=%lld", (long long)D);
    softmax_verdict(kl, trig, x, y, yd, rf, rows, n, kl == B_DROP_ANY ? "" : opts);
    free(x); free(y); free(e); free(yd); free(rf);
}

/* Triton's tl.sum over n floats (BLOCK = the power of two at or above n, 4 warps, Triton 3.6): each of the 128
 * lanes chains its BLOCK/128 elements (the lanes past n hold 0), then a butterfly over the lanes; *depth gets
 * er_depth_triton's depth. */
static float tl_sum(const float *v, int n, int64_t *depth) {
    int block = 1;
    while (block < n) block *= 2;
    int lanes = block < 128 ? block : 128, R = block / lanes;
    float part[128];
    for (int t = 0; t < lanes; t++) {
        float s = t * R < n ? v[t * R] : 0.0f;
        for (int i = 1; i < R; i++) s += t * R + i < n ? v[t * R + i] : 0.0f;
        part[t] = s;
    }
    for (int step = 1; step < lanes; step *= 2) {
        float np[128];
        for (int t = 0; t < lanes; t++) np[t] = part[t] + part[t ^ step];
        memcpy(part, np, sizeof(float) * (size_t)lanes);
    }
    if (er_depth_triton(depth, block, 4, 3, 6) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    return part[0];
}

static void norm_case(int kl, int rows, int n, int offset) {
    float *x = malloc(sizeof(float) * (size_t)rows * n), *y = malloc(sizeof(float) * (size_t)rows * n), mean[64], rstd[64];
    double *yd = malloc(sizeof(double) * (size_t)rows * (n + 2)), *rf = malloc(sizeof(double) * (size_t)rows * (n + 2));
    int rms = kl == K_RMS || kl == B_RSQRT, tree = kl == K_LN_TREE || kl == B_UNBIASED_TREE || kl == B_EPS_TREE;
    int twelf = kl == K_LN_WELFORD_TORCH || kl == B_UNBIASED_WELFORD;
    int64_t depth = 0;
    for (int64_t i = 0; i < (int64_t)rows * n; i++) x[i] = (float)((offset ? 1024.0 : 0.0) + gauss());
    int trig = 0;
    int64_t c = 0;
    for (int r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * n, m = 0, v = 0;
        double md = 0, vd = 0;
        for (int j = 0; j < n; j++) md += xr[j];
        md /= n;
        for (int j = 0; j < n; j++) vd += rms ? (double)xr[j] * xr[j] : ((double)xr[j] - md) * ((double)xr[j] - md);
        vd /= n;
        double rd = 1.0 / sqrt(vd + (double)1e-5f);
        if (rms) {
            for (int j = 0; j < n; j++) v += xr[j] * xr[j];
            float rr = 1.0f / sqrtf(v / n + 1e-5f);
            if (kl == B_RSQRT) rr = (float)(rr * (1.0 + 256 * 0x1p-24));
            for (int j = 0; j < n; j++) { y[(size_t)r * n + j] = xr[j] * rr; double e = xr[j] * rd; rf[c] = (float)e; yd[c++] = y[(size_t)r * n + j];
                if (fabs(y[(size_t)r * n + j] - e) > (n + 8) * 0x1p-24 * fabs(e) * 1.01) trig = 1; }
            continue;
        }
        if (twelf) {
            float m2;
            torch_welford(xr, n, &m, &m2);
            v = m2 / (float)(kl == B_UNBIASED_WELFORD ? n - 1 : n);
            if (er_depth_torch_layer_norm(&depth, n) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
        } else if (kl == K_LN_WELFORD) {
            float mw = 0, m2 = 0;
            for (int j = 0; j < n; j++) { float d = xr[j] - mw; mw += d / (float)(j + 1); m2 += d * (xr[j] - mw); }
            m = mw;
            v = m2 / (float)n;
        } else if (tree) {
            float dv[4096];
            m = tl_sum(xr, n, &depth) / (float)n;
            for (int j = 0; j < n; j++) dv[j] = (xr[j] - m) * (xr[j] - m);
            v = tl_sum(dv, n, &depth) / (float)(kl == B_UNBIASED_TREE ? n - 1 : n);
        } else {
            for (int j = 0; j < n; j++) m += xr[j];
            m /= (float)n;
            if (kl == B_ONEPASS) { float q = 0; for (int j = 0; j < n; j++) q += xr[j] * xr[j]; v = q / (float)n - m * m; }
            else { for (int j = 0; j < n; j++) v += (xr[j] - m) * (xr[j] - m); v /= (float)(kl == B_UNBIASED ? n - 1 : n); }
        }
        float rs_ = kl == B_EPS_TREE ? 1.0f / (sqrtf(v) + 1e-5f) : 1.0f / sqrtf(v + 1e-5f);
        mean[r] = m;
        rstd[r] = rs_;
        for (int j = 0; j < n; j++) { y[(size_t)r * n + j] = (xr[j] - m) * rs_; rf[c] = (float)((xr[j] - md) * rd); yd[c++] = y[(size_t)r * n + j]; }
        rf[c] = (float)md; yd[c++] = m;
        rf[c] = (float)rd; yd[c++] = rs_;
        double X = 0;
        for (int j = 0; j < n; j++) X = fmax(X, fabs(xr[j]));
        double Dn = tree || twelf ? (double)depth : (double)n; /* the sums' depth (n: any order) */
        double dm = (tree ? Dn + 1 : Dn) * 0x1p-24 * X, margin = 2.0 * (Dn + 4) * 0x1p-24 + 8 * 0x1p-24 + dm * dm / vd;
        if (!(fabs(rs_ / rd - 1) <= margin)) trig = 1;
    }
    er_tensor tx, ty, tm, tr;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){rows, n}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){rows, n}, NULL, y);
    er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){rows}, NULL, mean);
    er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){rows}, NULL, rstd);
    er_ref *ref;
    er_standard st;
    er_report rep[3];
    int flags[R_COUNT];
    if (rms) {
        er_rmsnorm(&ref, &tx, NULL, 1e-5);
        er_standard_init(&st);
        er_covers(&rep[0], ref, &ty, &st);
        flags[R_EXACTREF] = !all_pass(rep, 1);
    } else {
        er_layernorm(&ref, &tx, 1, NULL, NULL, 1e-5);
        char opts[96];
        int64_t C = 0;
        if (twelf) er_combine_depth_torch_layer_norm(&C, n);
        if (twelf) snprintf(opts, sizeof opts, "variance=either depth=%lld combine_depth=%lld", (long long)depth, (long long)C);
        else snprintf(opts, sizeof opts, kl == K_LN_WELFORD ? "variance=welford" : tree ? "variance=two_pass depth=%lld" : "variance=two_pass",
                      (long long)depth);
        er_standard_parse(&st, "any_order", opts);
        const er_tensor *outs[3] = {&ty, &tm, &tr};
        er_covers_outputs(rep, ref, outs, 3, &st);
        flags[R_EXACTREF] = !all_pass(rep, 3);
    }
    peer_rules(yd, rf, c, ER_FP32, n, flags);
    record(kl, flags, KL[kl].bug && trig);
    er_ref_free(ref);
    free(x); free(y); free(yd); free(rf);
}

/* ---------------------------------------------------------------- a GEMM epilogue and fp8 quantisation */
static float gelu_f(float t) { return (t * 0.5f) * (1.0f + erff(t * 0.70710677f)); }

/* fp16 A (M x K) and B (K x N), an fp16 bias per column; the kernel: a sequential fp32 accumulator (fused or not),
 * then t = acc + bias and gelu(t) in fp32 (libm's erff), stored in fp16; the bug applies gelu before the bias. */
static void epilogue_case(int kl, int M, int K, int N, int dist) {
    double *a = malloc(sizeof(double) * (size_t)M * K), *b = malloc(sizeof(double) * (size_t)K * N), *bias = malloc(sizeof(double) * (size_t)N);
    for (int i = 0; i < M * K; i++) a[i] = draw(dist, ER_FP16, i % K, K);
    for (int i = 0; i < K * N; i++) b[i] = draw(dist == D_CANCEL ? D_POSITIVE : dist, ER_FP16, i / N, K);
    for (int j = 0; j < N; j++) bias[j] = to_fmt(ER_FP16, gauss());
    double *y = malloc(sizeof(double) * (size_t)M * N), *ref = malloc(sizeof(double) * (size_t)M * N), *rd = malloc(sizeof(double) * (size_t)M * N);
    int fused = unif() < 0.5;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = dotf_seq(a + (size_t)i * K, b + j, K, N, fused), v;
            v = kl == B_ACT_FIRST ? gelu_f(acc) + (float)bias[j] : gelu_f(acc + (float)bias[j]);
            y[(size_t)i * N + j] = to_out(ER_FP16, v);
        }
    uint16_t *A = malloc(2 * (size_t)M * K), *B = malloc(2 * (size_t)K * N), *Bi = malloc(2 * (size_t)N), *Y = malloc(2 * (size_t)M * N);
    uint64_t bits;
    for (int i = 0; i < M * K; i++) { er_encode(&bits, ER_FP16, a[i], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); A[i] = (uint16_t)bits; }
    for (int i = 0; i < K * N; i++) { er_encode(&bits, ER_FP16, b[i], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); B[i] = (uint16_t)bits; }
    for (int j = 0; j < N; j++) { er_encode(&bits, ER_FP16, bias[j], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); Bi[j] = (uint16_t)bits; }
    for (int i = 0; i < M * N; i++) { er_encode(&bits, ER_FP16, y[i], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); Y[i] = (uint16_t)bits; }
    er_tensor tA, tB, tBi, tY, tR;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&tBi, ER_FP16, 2, (int64_t[]){M, N}, (int64_t[]){0, 1}, Bi);
    er_tensor_view(&tY, ER_FP16, 2, (int64_t[]){M, N}, NULL, Y);
    er_ref *r, *ch;
    er_stage st[3] = {{ER_STAGE_ADD, &tBi, 0, 0, NULL}, {ER_STAGE_GELU, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}};
    if (er_matmul(&r, &tA, &tB) != ER_OK || er_chain(&ch, r, st, 3) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    er_tensor_view(&tR, ER_FP64, 2, (int64_t[]){M, N}, NULL, rd);
    er_ref_rounded(&tR, r);
    er_standard std;
    er_standard_parse(&std, "any_order", "compute=fp32");
    er_report rep;
    if (er_covers(&rep, ch, &tY, &std) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    int flags[R_COUNT];
    flags[R_EXACTREF] = !all_pass(&rep, 1);
    /* peers: gelu(S + b) in float64 (S the exact product), rounded to fp16; trigger: |y - g(v)| > W_epi, v = S + b,
     * W_epi = 1.2 (2 K 2^-24 P + 4 2^-24 (|S| + |b|)) + 2^-20 |v| + 3 ulp_fp16(|g| + that): the accumulator's
     * any-order freedom and the fp32 steps through a slope below 1.2, erf's 2 ulps, the fp16 store */
    int trig = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double S = rd[(size_t)i * N + j], P = 0, v = S + bias[j], g = 0.5 * v * erfc(-v * 0.70710678118654752440);
            for (int k = 0; k < K; k++) P += fabs(a[(size_t)i * K + k] * b[(size_t)k * N + j]);
            ref[(size_t)i * N + j] = to_out(ER_FP16, g);
            double w = 1.2 * (2.0 * K * 0x1p-24 * P * 1.01 + 4 * 0x1p-24 * (fabs(S) + fabs(bias[j]))) + 0x1p-20 * fabs(v);
            double W = w + 3 * er_format_ulp(ER_FP16, fabs(g) + w), yv = y[(size_t)i * N + j];
            if (!isfinite(S) || !isfinite(P) || fabs(g) + W >= er_format_max(ER_FP16) / 2) continue;
            if (isnan(yv) || fabs(yv - g) > W) trig = 1;
        }
    peer_rules(y, ref, (int64_t)M * N, ER_FP16, K, flags);
    record(kl, flags, KL[kl].bug && trig);
    er_ref_free(ch);
    er_ref_free(r);
    free(a); free(b); free(bias); free(y); free(ref); free(rd); free(A); free(B); free(Bi); free(Y);
}

/* fp32 x (rows x cols); the kernel: amax per row, scale = 448 / amax in fp32 (a division or a reciprocal then a
 * product), q = RN_e4m3(RN(x scale)) saturated. Bugs: the scale inverted; amax over columns; q truncated. Peers compare q with
 * RN_e4m3(x 448 / amax) in double (Transformer Engine's rule also the amax, exactly). */
static void quant_case(int kl, int rows, int cols, int dist) {
    float *x = malloc(sizeof(float) * (size_t)rows * cols), *am = malloc(sizeof(float) * (size_t)rows), *sc = malloc(sizeof(float) * (size_t)rows);
    double mag = ldexp(1.0, (int)(unif() * 40) - 20);
    for (int i = 0; i < rows * cols; i++) x[i] = (float)(draw(dist, ER_FP32, i % cols, cols) * mag);
    for (int i = 0; i < rows; i++) {
        float m = 0;
        for (int j = 0; j < cols; j++) m = fmaxf(m, fabsf(kl == B_QAMAX_AXIS ? x[(size_t)j % rows * cols + i % cols] : x[(size_t)i * cols + j]));
        am[i] = m;
        sc[i] = kl == B_QSCALE_INV ? m / 448.0f : unif() < 0.5 ? 448.0f / m : 448.0f * (1.0f / m);
    }
    uint8_t *Q = malloc((size_t)rows * cols);
    double *y = malloc(sizeof(double) * (size_t)rows * cols), *ref = malloc(sizeof(double) * (size_t)rows * cols);
    int trig = 0;
    for (int i = 0; i < rows; i++) {
        double m = 0;
        for (int j = 0; j < cols; j++) m = fmax(m, fabs((double)x[(size_t)i * cols + j]));
        if (kl == B_QAMAX_AXIS && (double)am[i] != m) trig = 1;
        if (kl == B_QSCALE_INV && m > 0 && fabs(sc[i] - 448.0 / m) > 0x1p-20 * (448.0 / m)) trig = 1;
        for (int j = 0; j < cols; j++) {
            size_t e = (size_t)i * cols + j;
            uint64_t bits;
            double qv;
            er_round_double(&qv, ER_FP8_E4M3FN, (double)(x[e] * sc[i]), kl == B_QTRUNC ? ER_ROUND_ZERO : ER_ROUND_NEAREST,
                            ER_OVERFLOW_SATURATE);
            if (kl == B_QTRUNC) { /* q is determined by the kernel's (correct) scale: any other value is outside */
                double rnv;
                er_round_double(&rnv, ER_FP8_E4M3FN, (double)(x[e] * sc[i]), ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
                if (rnv != qv) trig = 1;
            }
            y[e] = qv;
            er_encode(&bits, ER_FP8_E4M3FN, qv, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            Q[e] = (uint8_t)bits;
            er_round_double(&ref[e], ER_FP8_E4M3FN, m > 0 ? x[e] * 448.0 / m : 0.0, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
        }
    }
    er_tensor tx, tq, ta, ts;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){rows, cols}, NULL, x);
    er_tensor_view(&tq, ER_FP8_E4M3FN, 2, (int64_t[]){rows, cols}, NULL, Q);
    er_tensor_view(&ta, ER_FP32, 1, (int64_t[]){rows}, NULL, am);
    er_tensor_view(&ts, ER_FP32, 1, (int64_t[]){rows}, NULL, sc);
    er_ref *r;
    if (er_quantize(&r, &tx, ER_FP8_E4M3FN, ER_GRAN_ROW, 0, ER_RECIPE_AMAX) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    const er_tensor *outs[3] = {&tq, &ta, &ts};
    er_standard std;
    er_standard_parse(&std, "any_order", NULL);
    er_report rep[3];
    if (er_covers_outputs(rep, r, outs, 3, &std) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    int flags[R_COUNT];
    flags[R_EXACTREF] = !all_pass(rep, 3);
    peer_rules(y, ref, (int64_t)rows * cols, ER_FP8_E4M3FN, 1, flags);
    for (int i = 0; i < rows; i++) { /* Transformer Engine compares amax exactly */
        double m = 0;
        for (int j = 0; j < cols; j++) m = fmax(m, fabs((double)x[(size_t)i * cols + j]));
        if ((double)am[i] != m) flags[R_TE] = 1;
    }
    record(kl, flags, KL[kl].bug && trig);
    er_ref_free(r);
    free(x); free(am); free(sc); free(Q); free(y); free(ref);
}

/* ---------------------------------------------------------------- MX and NVFP4 */
/* MXFP8: blocks of 32 along each row, X = 2^(floor(log2 amax) - 8) held to [2^-127, 2^127] (the ceiling for
 * B_MX_CEIL, the next block's for B_MX_NEXT), q = RN_e4m3(x / X) saturated, the scale stored as e8m0. NVFP4
 * (Transformer Engine's fp32 form): S = 2688 / max |x|, each block of 16's e4m3 scale RN(amax_b (S RN(1/6))), q =
 * RN_e2m1(x RN(1 / (scale RN(1 / S)))) saturated (q from amax_b S / 6 unrounded for B_NV_UNROUNDED, S = 1 for
 * B_NV_NOGLOBAL). Peers compare q with the recipe computed in double. */
static double q_rn(er_format f, double v) { double y; er_round_double(&y, f, v, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE); return y; }
static float rn32(double v) { return (float)v; }

static void mx_case(int kl, int rows, int cols, int dist) {
    int nv = kl == K_NVFP4 || kl == B_NV_UNROUNDED || kl == B_NV_NOGLOBAL, bs = nv ? 16 : 32, nb = cols / bs;
    er_format qf = nv ? ER_FP4_E2M1FN : ER_FP8_E4M3FN, sf = nv ? ER_FP8_E4M3FN : ER_FP8_E8M0FNU;
    size_t n = (size_t)rows * cols;
    float *x = malloc(sizeof(float) * n);
    uint8_t *Q = malloc(n), *Sb = malloc((size_t)rows * nb);
    double *y = malloc(sizeof(double) * n), *ref = malloc(sizeof(double) * n), *sc = malloc(sizeof(double) * rows * nb),
           *am = malloc(sizeof(double) * rows * nb); /* each block's amax */
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(draw(dist, ER_FP32, (int)(i % cols), cols) * ldexp(1.0, (int)(unif() * 16) - 8 + (int)(i / bs % 5)));
    double G = 0;
    for (size_t i = 0; i < n; i++) G = fmax(G, fabs((double)x[i]));
    float S = G > 0 ? rn32(2688.0 / G) : 1.0f;
    if (kl == B_NV_NOGLOBAL) S = 1.0f;
    int trig = 0;
    for (int b = 0; b < rows * nb; b++) { /* each block's scale, as the kernel computes and stores it */
        double a = 0;
        for (int j = 0; j < bs; j++) a = fmax(a, fabs((double)x[(size_t)b * bs + j]));
        am[b] = a;
        if (nv) { sc[b] = q_rn(ER_FP8_E4M3FN, rn32((double)rn32(a) * (double)rn32((double)S * (double)rn32(1.0 / 6.0)))); continue; }
        int ex;
        double m = frexp(a, &ex);
        int e = a > 0 ? ex - 1 - 8 + (kl == B_MX_CEIL && m != 0.5) : -127;
        sc[b] = ldexp(1.0, e < -127 ? -127 : e > 127 ? 127 : e);
        double espec = a > 0 ? ex - 1 - 8 : -127;
        if (sc[b] != ldexp(1.0, espec < -127 ? -127 : (int)espec)) trig = 1;
    }
    if (kl == B_MX_NEXT) { /* block b takes block b + 1's scale (the last its own) */
        for (int b = 0; b + 1 < rows * nb; b++) { if (sc[b] != sc[b + 1]) trig = 1; sc[b] = sc[b + 1]; }
    }
    for (size_t i = 0; i < n; i++) {
        int b = (int)(i / bs);
        double a = am[b];
        if (nv) {
            double s = kl == B_NV_UNROUNDED ? (double)rn32((double)rn32(a) * (double)rn32((double)S / 6.0)) : sc[b];
            float enc = s > 0 ? rn32(1.0 / (double)rn32(s * (double)rn32(1.0 / (double)S))) : FLT_MAX;
            y[i] = q_rn(qf, rn32((double)x[i] * (double)enc));
            /* the recipe in double, with the rounded block scale (for peers and the trigger) */
            double Sd = G > 0 ? 2688.0 / G : 1.0, sd = q_rn(ER_FP8_E4M3FN, a * Sd / 6.0);
            ref[i] = sd > 0 ? q_rn(qf, x[i] * Sd / sd) : 0.0;
            double sk = q_rn(ER_FP8_E4M3FN, rn32((double)rn32(a) * (double)rn32((double)rn32(2688.0 / G) * (double)rn32(1.0 / 6.0))));
            float enck = sk > 0 ? rn32(1.0 / (double)rn32(sk * (double)rn32(1.0 / (double)rn32(2688.0 / G)))) : FLT_MAX;
            if (y[i] != q_rn(qf, rn32((double)x[i] * (double)enck)) || (kl == B_NV_NOGLOBAL && sc[b] != sk)) trig = 1;
        } else {
            y[i] = q_rn(qf, (double)x[i] / sc[b]);
            int ex;
            frexp(a, &ex);
            ref[i] = a > 0 ? q_rn(qf, ldexp((double)x[i], -(ex - 1 - 8 < -127 ? -127 : ex - 1 - 8))) : 0.0;
        }
        uint64_t bits;
        er_encode(&bits, qf, y[i], ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
        Q[i] = (uint8_t)bits;
    }
    for (int b = 0; b < rows * nb; b++) {
        uint64_t bits;
        er_encode(&bits, sf, sc[b] > 0 || !nv ? sc[b] : 0.0, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
        Sb[b] = (uint8_t)bits;
    }
    er_tensor tx, tq, ts;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){rows, cols}, NULL, x);
    er_tensor_view(&tq, qf, 2, (int64_t[]){rows, cols}, NULL, Q);
    er_tensor_view(&ts, sf, 2, (int64_t[]){rows, nb}, NULL, Sb);
    er_ref *r;
    if (er_quantize(&r, &tx, qf, ER_GRAN_BLOCK, bs, nv ? ER_RECIPE_NVFP4 : ER_RECIPE_MX) != ER_OK) {
        fprintf(stderr, "%s\n", er_last_error());
        exit(2);
    }
    const er_tensor *outs[3] = {&tq, NULL, &ts};
    er_standard std;
    er_standard_parse(&std, "any_order", NULL);
    er_report rp[3];
    if (er_covers_outputs(rp, r, outs, 3, &std) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    int flags[R_COUNT];
    flags[R_EXACTREF] = !er_report_all(&rp[0]) || !er_report_all(&rp[2]);
    er_report_clear(&rp[0]);
    er_report_clear(&rp[2]);
    peer_rules(y, ref, (int64_t)n, qf, 1, flags);
    record(kl, flags, KL[kl].bug && trig);
    er_ref_free(r);
    free(x); free(Q); free(Sb); free(y); free(ref); free(sc); free(am);
}

/* ---------------------------------------------------------------- attention */
/* A flash-attention forward over H = 4 query heads and Hkv = 2 kv heads, fp16 inputs, in fp32: key blocks of 64
 * (K_ATT) or 3 splits of blocks of 32 combined through their LSEs (K_ATT_SPLIT); the scale folded into exp2's
 * argument, P rounded to fp16 before P V, l from the fp32 p; O stored in fp16, LSE in fp32. The bugs change one
 * thing each. Peers compare O with a float64 attention; FlashAttention's rule with twice the error of a
 * low-precision implementation (scores rounded to fp16, softmax in fp32, P rounded to fp16, P V rounded to fp16). */
enum { AH = 4, AHKV = 2 };

static void attn_split(int kl, const double *q, const double *k, const double *v, int D, int j0, int j1, int jend, int blk,
                       double sc, float *m_out, float *l_out, float *acc) {
    float c = (float)((kl == B_ATT_SCALE ? 1.0 / D : sc) * 1.4426950408889634), m = -INFINITY, l = 0;
    for (int d = 0; d < D; d++) acc[d] = 0;
    for (int b0 = j0; b0 <= jend; b0 += blk) {
        float t[64], mb = m;
        int nb = 0;
        for (int j = b0; j < b0 + blk && j <= jend; j++, nb++) {
            float s = 0;
            if (j <= j1) for (int d = 0; d < D; d++) s += (float)q[d] * (float)k[(size_t)j * D + d];
            t[nb] = s * c; /* keys past j1 are padding (k = 0): masked unless the bug lets them in */
            if (j > j1 && kl != B_ATT_PAD) t[nb] = -INFINITY;
            mb = fmaxf(mb, t[nb]);
        }
        float alpha = m == -INFINITY ? 0.0f : kl == B_ATT_NORESCALE ? 1.0f : exp2f(m - mb), bs = 0, pv[128] = {0};
        for (int x = 0; x < nb; x++) {
            float p = exp2f(t[x] - mb), pr = (float)to_fmt(ER_FP16, p);
            bs += p;
            if (b0 + x <= j1) for (int d = 0; d < D; d++) pv[d] += pr * (float)v[(size_t)(b0 + x) * D + d];
        }
        l = l * alpha + bs;
        for (int d = 0; d < D; d++) acc[d] = acc[d] * alpha + pv[d];
        m = mb;
    }
    *m_out = m;
    *l_out = l;
}

static void attn_case(int kl, int Sq, int Sk, int D, int causal) {
    size_t nq = (size_t)AH * Sq * D, nk = (size_t)AHKV * Sk * D;
    double *q = malloc(sizeof(double) * nq), *k = malloc(sizeof(double) * nk), *v = malloc(sizeof(double) * nk);
    uint16_t *qb = malloc(2 * nq), *kb = malloc(2 * nk), *vb = malloc(2 * nk), *ob = malloc(2 * nq);
    double *o = malloc(sizeof(double) * nq), *r = malloc(sizeof(double) * nq), *lo = malloc(sizeof(double) * nq);
    float *lse = malloc(sizeof(float) * AH * Sq);
    double *a[3] = {q, k, v};
    uint16_t *b[3] = {qb, kb, vb};
    size_t cnt[3] = {nq, nk, nk};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < cnt[t]; i++) {
            uint64_t bits;
            a[t][i] = to_fmt(ER_FP16, gauss());
            er_encode(&bits, ER_FP16, a[t][i], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            b[t][i] = (uint16_t)bits;
        }
    double sc = 1.0 / sqrt((double)D), eps_max = 0;
    int trig = 0;
    for (int h = 0; h < AH; h++)
        for (int i = 0; i < Sq; i++) {
            int g = kl == B_ATT_GQA ? h % AHKV : h / (AH / AHKV), gt = h / (AH / AHKV);
            int j1 = causal ? i + (kl == B_ATT_CAUSAL) : Sk - 1, jt = causal ? i : Sk - 1;
            if (j1 > Sk - 1) j1 = Sk - 1;
            const double *qi = q + ((size_t)h * Sq + i) * D;
            float acc[128], O[128], L;
            if (kl == K_ATT_SPLIT) {
                float Os[3][128], Ls[3], lmax = -INFINITY, den = 0, w[3];
                int ns = j1 + 1 < 3 ? j1 + 1 : 3;
                for (int s2 = 0; s2 < ns; s2++) {
                    float m, l;
                    int a0 = (j1 + 1) * s2 / ns, a1 = (j1 + 1) * (s2 + 1) / ns - 1;
                    attn_split(kl, qi, k + (size_t)g * Sk * D, v + (size_t)g * Sk * D, D, a0, a1, a1, 32, sc, &m, &l, acc);
                    for (int d = 0; d < D; d++) Os[s2][d] = acc[d] / l;
                    Ls[s2] = (m + log2f(l)) * 0.6931472f;
                    lmax = fmaxf(lmax, Ls[s2]);
                }
                for (int s2 = 0; s2 < ns; s2++) { w[s2] = expf(Ls[s2] - lmax); den += w[s2]; }
                for (int d = 0; d < D; d++) { float x = 0; for (int s2 = 0; s2 < ns; s2++) x += w[s2] * Os[s2][d]; O[d] = x / den; }
                L = lmax + logf(den);
            } else {
                float m, l;
                int jend = kl == B_ATT_PAD ? ((j1 + 64) / 64) * 64 - 1 : j1; /* the padded last block */
                attn_split(kl, qi, k + (size_t)g * Sk * D, v + (size_t)g * Sk * D, D, 0, j1, jend, 64, sc, &m, &l, acc);
                for (int d = 0; d < D; d++) O[d] = acc[d] / l;
                L = kl == B_ATT_LSE2 ? m + log2f(l) : (m + log2f(l)) * 0.6931472f;
            }
            /* the float64 attention of the row, and the low-precision one of FlashAttention's rule */
            double s64[4096], mx = -INFINITY, sum = 0, lp[4096], mlp = -INFINITY, slp = 0, vmax = 0, qn = 0, knmax = 0;
            for (int j = 0; j <= jt; j++) {
                double s = 0, kn = 0;
                float sl = 0;
                for (int d = 0; d < D; d++) {
                    s += qi[d] * k[((size_t)gt * Sk + j) * D + d];
                    sl += (float)qi[d] * (float)k[((size_t)gt * Sk + j) * D + d];
                    kn += k[((size_t)gt * Sk + j) * D + d] * k[((size_t)gt * Sk + j) * D + d];
                }
                s64[j] = s * sc;
                lp[j] = (float)(to_fmt(ER_FP16, sl) * (float)sc);
                mx = fmax(mx, s64[j]);
                mlp = fmax(mlp, lp[j]);
                knmax = fmax(knmax, sqrt(kn));
            }
            for (int d = 0; d < D; d++) qn += qi[d] * qi[d];
            double smin = INFINITY;
            for (int j = 0; j <= jt; j++) { sum += exp(s64[j] - mx); lp[j] = expf((float)(lp[j] - mlp)); slp += lp[j]; smin = fmin(smin, s64[j]); }
            double L64 = mx + log(sum);
            /* W_att: at least the set's half-width (Theorem A2 with its dominant terms, and an ulp of the store) */
            int n = jt + 1;
            double u = 0x1p-24, G = ceil(Sk / 16.0) + 2, delta = (2.0 * D + 20) * u * sc * sqrt(qn) * knmax;
            double eps = 0x1p-11 + (2.0 * n + 25 * G + 4) * u + delta + 8 * u * (mx - smin + fmax(fabs(mx), fabs(smin)) + 3 * delta) +
                         (G + 2) * 6 * u + 0x1p-19;
            if (eps > eps_max) eps_max = eps;
            for (int d = 0; d < D; d++) {
                double x = 0, xl = 0;
                for (int j = 0; j <= jt; j++) {
                    x += exp(s64[j] - mx) * v[((size_t)gt * Sk + j) * D + d];
                    xl += (float)to_fmt(ER_FP16, lp[j] / slp) * (float)v[((size_t)gt * Sk + j) * D + d];
                    vmax = fmax(vmax, fabs(v[((size_t)gt * Sk + j) * D + d]));
                }
                size_t e = ((size_t)h * Sq + i) * D + d;
                r[e] = x / sum;
                lo[e] = to_fmt(ER_FP16, xl);
                o[e] = to_fmt(ER_FP16, O[d]);
                uint64_t bits;
                er_encode(&bits, ER_FP16, o[e], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
                ob[e] = (uint16_t)bits;
            }
            lse[h * Sq + i] = L;
            for (int d = 0; d < D; d++) {
                size_t e = ((size_t)h * Sq + i) * D + d;
                if (fabs(o[e] - r[e]) > 2.5 * eps * vmax + 2 * er_format_ulp(ER_FP16, fabs(r[e]) + 2.5 * eps * vmax)) trig = 1;
            }
            if (fabs((double)L - L64) > 3 * eps + 1e-4) trig = 1;
        }
    er_tensor tq, tk, tv, to, tl;
    er_tensor_view(&tq, ER_FP16, 3, (int64_t[]){AH, Sq, D}, NULL, qb);
    er_tensor_view(&tk, ER_FP16, 3, (int64_t[]){AHKV, Sk, D}, NULL, kb);
    er_tensor_view(&tv, ER_FP16, 3, (int64_t[]){AHKV, Sk, D}, NULL, vb);
    er_tensor_view(&to, ER_FP16, 3, (int64_t[]){AH, Sq, D}, NULL, ob);
    er_tensor_view(&tl, ER_FP32, 2, (int64_t[]){AH, Sq}, NULL, lse);
    er_attention_opts ao = {0, causal, 0, 0, 0, 0, 1};
    er_ref *ref;
    if (er_attention(&ref, &tq, &tk, &tv, &ao) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    const er_tensor *outs[2] = {&to, &tl};
    er_standard std;
    er_standard_parse(&std, "any_order", NULL);
    er_report rep[2];
    if (er_covers_outputs(rep, ref, outs, 2, &std) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    int flags[R_COUNT];
    flags[R_EXACTREF] = !all_pass(rep, 2);
    peer_rules(o, r, (int64_t)nq, ER_FP16, D, flags);
    double err = 0, errl = 0;
    for (size_t e = 0; e < nq; e++) { err = fmax(err, fabs(o[e] - r[e])); errl = fmax(errl, fabs(lo[e] - r[e])); }
    flags[R_FA2X] = !(err <= 2 * errl);
    record(kl, flags, KL[kl].bug && trig);
    er_ref_free(ref);
    free(q); free(k); free(v); free(qb); free(kb); free(vb); free(ob); free(o); free(r); free(lo); free(lse);
}

/* ---------------------------------------------------------------- fp8 attention (cuDNN's and FlashAttention-3's form) */
/* q, k, v gaussian (k spread by 3, so that many p are small) quantised to e4m3 with per-tensor descales amax / 448;
 * a flash kernel in fp32 (blocks of 64, exp2 of the folded constant fl(fl(fl(1/sqrt(D)) dq) dk) log2 e, P times
 * scale_s 448 to e4m3 before P V, l from the fp32 p, O = acc / l (descale_s descale_v), stored in bf16 after scale_o
 * 16), LSE, amax_s of p and amax_o of |O| before scale_o; the bugs change one thing. The peers compare the stored O
 * divided by scale_o with the float64 attention (and Transformer Engine's rule also amax_o, with its rtol and atol);
 * cuDNN's harnesses compare O alone. exactref checks all four outputs under any_order p_sum=fp32 (the kernel adds in fp32 and sums p
 * before its quantisation). P without scale_s gets rows built to show it: most of their weights at 1.5 of e4m3's least
 * subnormal step, which unscaled round up by a third. */
static void attn8_case(int kl, int Sq, int Sk, int D) {
    const int H = 2;
    const double ss = 448.0, so = 16.0;
    size_t nq = (size_t)H * Sq * D, nk = (size_t)H * Sk * D;
    double *a[3], dsc[3], amx[3] = {0, 0, 0};
    uint8_t *b[3];
    size_t cnt[3] = {nq, nk, nk};
    for (int t = 0; t < 3; t++) {
        a[t] = malloc(sizeof(double) * cnt[t]);
        b[t] = malloc(cnt[t]);
        for (size_t i = 0; i < cnt[t]; i++) {
            a[t][i] = gauss() * (t == 1 ? 3.0 : 1.0);
            if (kl == B_ATT8_NOSS) { /* q e_0; key 0 at score 0 and the rest at -5.827, p = 1.51 e4m3 subnormal steps */
                size_t j = (i / (size_t)D) % (size_t)(t ? Sk : Sq);
                a[t][i] = t == 0 ? (i % (size_t)D == 0) : t == 1 ? (i % (size_t)D == 0 && j ? -5.827 * sqrt((double)D) : 0.0)
                                                        : (j ? 1.25 : 1.0);
            }
            amx[t] = fmax(amx[t], fabs(a[t][i]));
        }
        dsc[t] = (double)(float)(amx[t] / 448.0);
        for (size_t i = 0; i < cnt[t]; i++) {
            uint64_t bits;
            a[t][i] = to_fmt(ER_FP8_E4M3FN, a[t][i] / dsc[t]);
            er_encode(&bits, ER_FP8_E4M3FN, a[t][i], ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            b[t][i] = (uint8_t)bits;
        }
    }
    const double *q = a[0], *k = a[1], *v = a[2];
    double *y = malloc(sizeof(double) * nq), *r = malloc(sizeof(double) * nq);
    uint16_t *ob = malloc(2 * nq);
    float *lse = malloc(sizeof(float) * H * Sq), amax_s = 0, amax_o = 0;
    double sc = 1.0 / sqrt((double)D), amax64 = 0;
    float c = (float)((float)((float)sc * (float)dsc[0]) * (float)dsc[1]) * (float)1.4426950408889634;
    float ssf = (float)ss, dsdv = (1.0f / ssf) * (float)dsc[2];
    int trig = kl == B_ATT8_AMAX_SCALED; /* scale_o is 16 */
    for (int h = 0; h < H; h++)
        for (int i = 0; i < Sq; i++) {
            const double *qi = q + ((size_t)h * Sq + i) * D;
            const double *kh = k + (size_t)h * Sk * D, *vh = v + (size_t)h * Sk * D;
            float m = -INFINITY, l = 0, acc[128] = {0};
            for (int b0 = 0; b0 < Sk; b0 += 64) {
                int nb = Sk - b0 < 64 ? Sk - b0 : 64;
                float t[64], mb = m;
                for (int x = 0; x < nb; x++) {
                    float s = 0;
                    for (int d = 0; d < D; d++) s += (float)qi[d] * (float)kh[(size_t)(b0 + x) * D + d];
                    t[x] = s * c;
                    mb = fmaxf(mb, t[x]);
                }
                float alpha = m == -INFINITY ? 0.0f : exp2f(m - mb), bs = 0, pv[128] = {0};
                for (int x = 0; x < nb; x++) {
                    float p = exp2f(t[x] - mb);
                    amax_s = fmaxf(amax_s, p);
                    bs += p;
                    float pr = kl == B_ATT8_NOSS ? (float)to_fmt(ER_FP8_E4M3FN, p) * ssf : (float)to_fmt(ER_FP8_E4M3FN, p * ssf);
                    for (int d = 0; d < D; d++) pv[d] += pr * (float)vh[(size_t)(b0 + x) * D + d];
                }
                l = l * alpha + bs;
                for (int d = 0; d < D; d++) acc[d] = acc[d] * alpha + pv[d];
                m = mb;
            }
            lse[h * Sq + i] = (m + log2f(l)) * 0.6931472f;
            /* the float64 attention of the row, and W_8: P's rounding to e4m3 (2^-4 relative) on every term */
            double s64[4096], mx = -INFINITY, sum = 0;
            for (int j = 0; j < Sk; j++) {
                double s = 0;
                for (int d = 0; d < D; d++) s += qi[d] * kh[(size_t)j * D + d];
                s64[j] = s * sc * dsc[0] * dsc[1];
                mx = fmax(mx, s64[j]);
            }
            for (int j = 0; j < Sk; j++) sum += exp(s64[j] - mx);
            for (int d = 0; d < D; d++) {
                double x = 0, A = 0, B = 0;
                for (int j = 0; j < Sk; j++) {
                    double w = exp(s64[j] - mx) / sum, vj = vh[(size_t)j * D + d] * dsc[2];
                    x += w * vj;
                    A += w * fabs(vj);
                    B += fabs(vj) / sum;
                }
                size_t e = ((size_t)h * Sq + i) * D + d;
                float o = acc[d] / l * dsdv;
                amax_o = fmaxf(amax_o, fabsf(kl == B_ATT8_AMAX_SCALED ? o * (float)so : o));
                amax64 = fmax(amax64, fabs(x));
                r[e] = x * so;
                y[e] = to_out(ER_BF16, (double)(o * (float)so));
                uint64_t bits;
                er_encode(&bits, ER_BF16, y[e], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
                ob[e] = (uint16_t)bits;
                /* every P rounded to e4m3 after scale_s: 2^-4 relative, or half e4m3's least subnormal 2^-9 over
                 * scale_s absolute, on each term */
                double W8 = 1.25 * (0x1p-4 * A + 0x1p-10 / ss * B) * so + 2 * er_format_ulp(ER_BF16, fabs(r[e]));
                if (kl == B_ATT8_NOSS && fabs(y[e] - r[e]) > W8) trig = 1;
            }
        }
    if (kl == B_ATT8_AMAX0) { amax_o = 0; trig = amax64 > 0; }
    er_tensor tq, tk, tv, to, tl, tas, tao;
    er_tensor_view(&tq, ER_FP8_E4M3FN, 3, (int64_t[]){H, Sq, D}, NULL, b[0]);
    er_tensor_view(&tk, ER_FP8_E4M3FN, 3, (int64_t[]){H, Sk, D}, NULL, b[1]);
    er_tensor_view(&tv, ER_FP8_E4M3FN, 3, (int64_t[]){H, Sk, D}, NULL, b[2]);
    er_tensor_view(&to, ER_BF16, 3, (int64_t[]){H, Sq, D}, NULL, ob);
    er_tensor_view(&tl, ER_FP32, 2, (int64_t[]){H, Sq}, NULL, lse);
    er_tensor_view(&tas, ER_FP32, 1, (int64_t[]){1}, NULL, &amax_s);
    er_tensor_view(&tao, ER_FP32, 1, (int64_t[]){1}, NULL, &amax_o);
    er_attention_fp8_scales f8 = {dsc[0], dsc[1], dsc[2], ss, 0, so};
    er_ref *ref;
    if (er_attention_fp8(&ref, &tq, &tk, &tv, NULL, &f8) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    const er_tensor *outs[4] = {&to, &tl, &tas, &tao};
    er_standard std;
    er_standard_parse(&std, "any_order", "p_sum=fp32");
    er_report rep[4];
    if (er_covers_outputs(rep, ref, outs, 4, &std) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(2); }
    int flags[R_COUNT];
    flags[R_EXACTREF] = !all_pass(rep, 4);
    for (size_t e = 0; e < nq; e++) { y[e] /= so; r[e] /= so; } /* the peers compare the dequantised O */
    peer_rules(y, r, (int64_t)nq, ER_BF16, D, flags);
    if (fabs(amax_o - amax64) > 0.0675 + 0.125 * amax64) flags[R_TE] = 1; /* Transformer Engine compares amax too */
    record(kl, flags, KL[kl].bug && trig);
    er_ref_free(ref);
    for (int t = 0; t < 3; t++) { free(a[t]); free(b[t]); }
    free(y); free(r); free(ob); free(lse);
}

/* ---------------------------------------------------------------- cross-entropy (fp32 logits, reduction mean) */
/* rows x C logits (2 gauss), targets uniform, the last row ignored when there are more than two; label smoothing eps.
 * The kernels in fp32: the fused form (m, s = sum expf(x - m), lse = m + logf(s), the row loss with its smoothing
 * terms over W; the gradient (e / s - eps / C) / W, minus (1 - eps) / W at the target) or torch's composition
 * (lp = (x - m) - log s; g = -(1 - eps) / W at the target plus -(eps / C) / W; dx = g - expf(lp) sum g), and the
 * bugs on the fused form. The peers compare the loss and dlogits with a float64 cross-entropy. */
static void ce_case(int kl, int rows, int C, double eps) {
    size_t nn = (size_t)rows * C;
    float *x = calloc(nn, sizeof(float)), *g = calloc(nn, sizeof(float)), loss = 0;
    double *y = calloc(nn + 1, sizeof(double)), *r = calloc(nn + 1, sizeof(double));
    int64_t *t = calloc((size_t)rows, sizeof(int64_t));
    for (size_t i = 0; i < nn; i++) x[i] = (float)(2 * gauss());
    int W = 0, trig = 0;
    for (int i = 0; i < rows; i++) {
        t[i] = i == rows - 1 && rows > 2 ? -100 : (int64_t)(unif() * C) % C;
        W += t[i] != -100;
    }
    float epsf = (float)eps, epsC = (float)(kl == B_CE_EPS ? eps : eps / C), om = 1.0f - epsf;
    float Wg = kl == B_CE_NOW ? 1.0f : (float)W;
    double loss64 = 0;
    for (int i = 0; i < rows; i++) {
        const float *xr = x + (size_t)i * C;
        float *gr = g + (size_t)i * C;
        double *rr = r + 1 + (size_t)i * C;
        if (t[i] == -100) continue; /* an ignored row: zeros */
        int ti = (int)t[i], Cs = kl == B_CE_TAIL ? C - 1 : C;
        float m = -INFINITY, s = 0;
        for (int j = 0; j < C; j++) m = fmaxf(m, xr[j]);
        for (int j = 0; j < Cs; j++) s += expf(xr[j] - m);
        float l = logf(s), lse = m + l, lo = lse - xr[ti];
        if (eps > 0) {
            float sx = 0;
            for (int j = 0; j < C; j++) sx += -epsC * xr[j];
            lo = lo * om + (sx + epsf * lse);
        }
        loss += lo / (float)W;
        if (kl == K_CE_TORCH) {
            float gt = -om / Wg, gs = -epsC / Wg, sg = 0;
            for (int j = 0; j < C; j++) sg += (j == ti ? gt : 0.0f) + gs;
            for (int j = 0; j < C; j++) gr[j] = ((j == ti ? gt : 0.0f) + gs) - expf((xr[j] - m) - l) * sg;
        } else {
            for (int j = 0; j < C; j++) {
                float v = (expf(xr[j] - m) / s - epsC) / Wg;
                gr[j] = j == ti ? v - om / Wg : v;
            }
        }
        /* float64 */
        double md = -INFINITY, sd = 0, sxd = 0;
        for (int j = 0; j < C; j++) { md = fmax(md, xr[j]); sxd += xr[j]; }
        for (int j = 0; j < C; j++) sd += exp((double)xr[j] - md);
        double lse64 = md + log(sd);
        loss64 += (lse64 - (1 - eps) * xr[ti] - eps / C * sxd) / W;
        for (int j = 0; j < C; j++) {
            double p = exp(xr[j] - lse64), v = (p - eps / C - (j == ti ? 1 - eps : 0)) / W;
            rr[j] = v;
            /* the trigger: beyond the set's half-width (Theorem X1: P within 1% of p for C <= 1000, gamma M within
             * (C + 16) 2^-23 (1.2 p + eps / C) / W), an ulp of fp32 and the underflow term */
            double wce = (0.01 * p + (C + 16) * 0x1p-23 * (1.2 * p + eps / C)) / W + 0x1p-22 * fabs(v) + 1e-30;
            if (j != ti && fabs((double)gr[j] - v) > wce) trig = 1;
        }
    }
    r[0] = loss64;
    y[0] = loss;
    for (size_t i = 0; i < nn; i++) y[1 + i] = g[i];
    er_tensor tx, tl, tg;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){rows, C}, NULL, x);
    er_tensor_view(&tl, ER_FP32, 1, (int64_t[]){1}, NULL, &loss);
    er_tensor_view(&tg, ER_FP32, 2, (int64_t[]){rows, C}, NULL, g);
    er_ref *ref;
    er_standard st;
    er_standard_init(&st);
    er_report rep[2];
    const er_tensor *outs[2] = {&tl, &tg};
    int flags[R_COUNT];
    if (er_cross_entropy(&ref, &tx, t, rows, ER_REDUCTION_MEAN, -100, eps) != ER_OK ||
        er_covers_outputs(rep, ref, outs, 2, &st) != ER_OK) {
        fprintf(stderr, "%s\n", er_last_error());
        exit(2);
    }
    flags[R_EXACTREF] = !all_pass(rep, 2);
    peer_rules(y, r, (int64_t)nn + 1, ER_FP32, C, flags);
    record(kl, flags, KL[kl].bug && trig);
    er_ref_free(ref);
    free(x); free(g); free(y); free(r); free(t);
}

/* ---------------------------------------------------------------- layer_norm backward (fp32) */
/* rows x n inputs (x = 1 + gauss, dy gauss, weight 1 + gauss / 4) with the forward's saved mean and rstd in fp32. The
 * kernels in fp32: torch's CUDA form (s1 = sum dy w, s2 = sum dy w (x - m) r; dx = (n w dy - (x - m) r s2 - s1) (r /
 * n)) or Triton's tutorial (xhat = (x - m) r, c1 = sum xhat w dy / n, c2 = sum w dy / n; dx = (w dy - (xhat c1 +
 * c2)) r); dweight = sum dy xhat and dbias = sum dy over the rows in order; the bugs on the Triton form. The peers
 * compare dx, dweight and dbias with a float64 backward of the same saved statistics. The trigger W_lnb: an element
 * beyond (n + 16) 2^-23 times its terms' magnitudes (dx: |r g| + r sum|g| / n + r |xhat| sum|g xhat| / n; a column:
 * sum |terms|) plus an ulp of fp32, about the set's half-width. */
static void lnb_case(int kl, int rows, int n) {
    size_t nn = (size_t)rows * n, no = nn + 2 * (size_t)n;
    float *x = calloc(nn, sizeof(float)), *dy = calloc(nn, sizeof(float)), *w = calloc((size_t)n, sizeof(float));
    float *m = calloc((size_t)rows, sizeof(float)), *rs_ = calloc((size_t)rows, sizeof(float));
    float *out = calloc(no, sizeof(float));
    double *y = calloc(no, sizeof(double)), *r = calloc(no, sizeof(double));
    for (size_t i = 0; i < nn; i++) { x[i] = (float)(1 + gauss()); dy[i] = (float)gauss(); }
    for (int j = 0; j < n; j++) w[j] = (float)(1 + gauss() / 4);
    int trig = 0;
    for (int i = 0; i < rows; i++) {
        const float *xr = x + (size_t)i * n, *gr = dy + (size_t)i * n;
        float s = 0, q = 0;
        for (int j = 0; j < n; j++) s += xr[j];
        float mi = s / (float)n;
        for (int j = 0; j < n; j++) q += (xr[j] - mi) * (xr[j] - mi);
        float ri = 1.0f / sqrtf(q / (float)n + 1e-5f);
        m[i] = mi;
        rs_[i] = ri;
        float s1 = 0, s2 = 0, c1 = 0, c2 = 0;
        for (int j = 0; j < n; j++) {
            float g = gr[j] * w[j], xh = (xr[j] - mi) * ri;
            s1 += g;
            s2 += g * (xr[j] - mi) * ri;
            c1 += xh * g;
            c2 += g;
        }
        c1 /= (float)n;
        c2 /= (float)n;
        double B = 0, C = 0, aB = 0, aC = 0;
        for (int j = 0; j < n; j++) {
            double g = (double)gr[j] * w[j], d = (double)xr[j] - mi;
            B += g; C += g * d * ri; aB += fabs(g); aC += fabs(g * d * ri);
        }
        for (int j = 0; j < n; j++) {
            float g = gr[j] * w[j], xh = (xr[j] - mi) * ri, v;
            if (kl == K_LNB_TORCH) v = ((float)n * w[j] * gr[j] - (xr[j] - mi) * ri * s2 - s1) * (ri / (float)n);
            else if (kl == B_LNB_NOMEAN) v = (g - xh * c1) * ri;
            else if (kl == B_LNB_RSTD2) v = (g - (xh * c1 + c2)) * ri * ri;
            else v = (g - (xh * c1 + c2)) * ri;
            double gd = (double)gr[j] * w[j], xd = ((double)xr[j] - mi) * ri;
            double e = ri * (gd - B / n - xd * C / n);
            size_t k = (size_t)i * n + j;
            out[k] = v;
            r[k] = e;
            double W = (n + 16) * 0x1p-23 * (ri * fabs(gd) + ri * aB / n + ri * fabs(xd) * aC / n) + 0x1p-23 * fabs(e);
            if (fabs(v - e) > W) trig = 1;
        }
    }
    for (int j = 0; j < n; j++) {
        float sw = 0, sb = 0;
        double ew = 0, eb = 0, aw = 0, ab = 0;
        for (int i = 0; i < rows; i++) {
            size_t k = (size_t)i * n + j;
            float xh = (x[k] - m[i]) * rs_[i];
            sw += dy[k] * (kl == B_LNB_DW_NORSTD ? x[k] - m[i] : xh);
            if (!(kl == B_LNB_DB_LAST && i == rows - 1)) sb += dy[k];
            double t = (double)dy[k] * ((double)x[k] - m[i]) * rs_[i];
            ew += t; aw += fabs(t); eb += dy[k]; ab += fabs(dy[k]);
        }
        out[nn + j] = sw;
        out[nn + n + j] = sb;
        r[nn + j] = ew;
        r[nn + n + j] = eb;
        if (fabs(sw - ew) > (rows + 4) * 0x1p-23 * aw + 0x1p-23 * fabs(ew) ||
            fabs(sb - eb) > (rows + 4) * 0x1p-23 * ab + 0x1p-23 * fabs(eb))
            trig = 1;
    }
    for (size_t k = 0; k < no; k++) y[k] = out[k];
    er_tensor tdy, tx, tm, tr, tw, tdx, tdw, tdb;
    er_tensor_view(&tdy, ER_FP32, 2, (int64_t[]){rows, n}, NULL, dy);
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){rows, n}, NULL, x);
    er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){rows}, NULL, m);
    er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){rows}, NULL, rs_);
    er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){n}, NULL, w);
    er_tensor_view(&tdx, ER_FP32, 2, (int64_t[]){rows, n}, NULL, out);
    er_tensor_view(&tdw, ER_FP32, 1, (int64_t[]){n}, NULL, out + nn);
    er_tensor_view(&tdb, ER_FP32, 1, (int64_t[]){n}, NULL, out + nn + n);
    er_ref *ref;
    er_standard st;
    er_standard_init(&st);
    er_report rep[3];
    const er_tensor *outs[3] = {&tdx, &tdw, &tdb};
    int flags[R_COUNT];
    if (er_layer_norm_backward(&ref, &tdy, &tx, 1, &tm, &tr, &tw) != ER_OK ||
        er_covers_outputs(rep, ref, outs, 3, &st) != ER_OK) {
        fprintf(stderr, "%s\n", er_last_error());
        exit(2);
    }
    flags[R_EXACTREF] = !all_pass(rep, 3);
    peer_rules(y, r, (int64_t)no, ER_FP32, n, flags);
    record(kl, flags, KL[kl].bug && trig);
    er_ref_free(ref);
    free(x); free(dy); free(w); free(m); free(rs_); free(out); free(y); free(r);
}

/* ---------------------------------------------------------------- attention backward (fp16 inputs) */
/* H = 4 query heads over Hkv = 2 kv heads, fp16 q, k, v, dO, the saved o (the float64 forward's O rounded to fp16)
 * and LSE (to fp32). The kernels in fp32: D = sum dO o in order; per key, s = q . k in order, P = expf(scale s - lse),
 * dP = dO . v in order, dS = P (dP - D); FA2 rounds P and dS to fp16 for its products, the other keeps them in fp32
 * (checked under products=compute); dV = sum P dO and dK = scale sum dS q over the queries and the group's heads in
 * order, dQ = scale sum dS k over key blocks of 64 taken last block first (as atomics may arrive); the gradients
 * stored in fp16. The bugs change the FA2 form. The peers compare the three gradients with a float64 backward of the
 * same saved tensors; FlashAttention's rule with twice the error of an fp16 backward (scores, P, dP, D, dS and each
 * gradient rounded to fp16, the sums in fp32). The trigger W_ab: an element beyond 2^-7 times its terms' magnitudes
 * (dQ, dK: scale sum P (|dP| + |D| + ||dO|| ||v||) |k| or |q|; dV: sum P |dO|) plus two ulps of fp16, above the
 * set's half-width (Theorem B1 and Lemma B2 of docs/algorithms/attention-backward.md: P's and dS's fp16 roundings,
 * 2^-11 each, dominate it). */
static double f16v(double x) { return to_fmt(ER_FP16, x); }
static uint16_t f16b(double x) { uint64_t b; er_encode(&b, ER_FP16, x, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); return (uint16_t)b; }

static void abwd_case(int kl, int Sq, int Sk, int D, int causal) {
    enum { G = AH / AHKV };
    size_t nq = (size_t)AH * Sq * D, nk = (size_t)AHKV * Sk * D, no = nq + 2 * nk;
    double *q = malloc(sizeof(double) * nq), *k = malloc(sizeof(double) * nk), *v = malloc(sizeof(double) * nk),
           *g = malloc(sizeof(double) * nq), *o = malloc(sizeof(double) * nq);
    float *lse = malloc(sizeof(float) * AH * Sq), *acc = calloc(no, sizeof(float)), *lacc = calloc(no, sizeof(float));
    double *y = malloc(sizeof(double) * no), *r = calloc(no, sizeof(double)), *yl = malloc(sizeof(double) * no),
           *W = calloc(no, sizeof(double)), *P = malloc(sizeof(double) * Sk);
    uint16_t *bits = malloc(2 * (2 * nq + 2 * nk + nq + no));
    double sc = 1.0 / sqrt((double)D);
    float scf = (float)sc;
    for (size_t i = 0; i < nq; i++) { q[i] = f16v(gauss()); g[i] = f16v(gauss()); }
    for (size_t i = 0; i < nk; i++) { k[i] = f16v(gauss()); v[i] = f16v(gauss()); }
    float *dq = acc, *dk = acc + nq, *dv = acc + nq + nk, *lq = lacc, *lk = lacc + nq, *lv = lacc + nq + nk;
    double *rq = r, *rk = r + nq, *rv = r + nq + nk, *Wq = W, *Wk = W + nq, *Wv = W + nq + nk;
    for (int h = 0; h < AH; h++) {
        int hk = h / G;
        const double *kh = k + (size_t)hk * Sk * D, *vh = v + (size_t)hk * Sk * D;
        for (int i = 0; i < Sq; i++) {
            const double *qi = q + ((size_t)h * Sq + i) * D, *gi = g + ((size_t)h * Sq + i) * D;
            double *oi = o + ((size_t)h * Sq + i) * D;
            int j1 = causal ? (i < Sk - 1 ? i : Sk - 1) : Sk - 1;
            /* the forward in double: o rounded to fp16, lse to fp32 */
            double mx = -INFINITY, l = 0, gn = 0;
            for (int j = 0; j <= j1; j++) {
                double s = 0;
                for (int d = 0; d < D; d++) s += qi[d] * kh[(size_t)j * D + d];
                P[j] = s * sc;
                mx = fmax(mx, P[j]);
            }
            for (int j = 0; j <= j1; j++) l += exp(P[j] - mx);
            for (int d = 0; d < D; d++) {
                double x = 0;
                for (int j = 0; j <= j1; j++) x += exp(P[j] - mx) * vh[(size_t)j * D + d];
                oi[d] = f16v(x / l);
                gn += gi[d] * gi[d];
            }
            lse[h * Sq + i] = (float)(mx + log(l));
            gn = sqrt(gn);
            /* the kernel's D, the float64 one, the fp16 one */
            float Dk = 0;
            double D64 = 0, Dl;
            for (int d = 0; d < D; d++) { Dk += (float)gi[d] * (float)oi[d]; D64 += gi[d] * oi[d]; }
            Dl = f16v(Dk);
            if (kl == B_ABWD_D_ZERO) Dk = 0;
            float dqrow[128] = {0};
            int nb = (j1 + 64) / 64;
            for (int b = nb - 1; b >= 0; b--) { /* dQ's key blocks, last first */
                float part[128] = {0};
                for (int j = 64 * b; j <= j1 && j < 64 * b + 64; j++) {
                    const double *kj = kh + (size_t)j * D, *vj = vh + (size_t)j * D;
                    float s = 0, dp = 0;
                    double s64 = 0, vn = 0;
                    for (int d = 0; d < D; d++) {
                        s += (float)qi[d] * (float)kj[d];
                        dp += (float)gi[d] * (float)vj[d];
                        s64 += qi[d] * kj[d];
                        vn += vj[d] * vj[d];
                    }
                    float p = expf(s * scf - lse[h * Sq + i]), ds = p * (dp - Dk);
                    float pr = kl == K_ABWD_FP32 ? p : (float)f16v(p), dsr = kl == K_ABWD_FP32 ? ds : (float)f16v(ds);
                    double p64 = exp(s64 * sc - (double)lse[h * Sq + i]), dp64 = 0;
                    for (int d = 0; d < D; d++) dp64 += gi[d] * vj[d];
                    double ds64 = p64 * (dp64 - D64), mag = p64 * (fabs(dp64) + fabs(D64) + gn * sqrt(vn));
                    /* the fp16 backward of FlashAttention's rule */
                    float pl = (float)f16v(expf((float)f16v(s) * scf - lse[h * Sq + i])), dpl = (float)f16v(dp);
                    float dsl = (float)f16v(pl * (dpl - (float)Dl));
                    for (int d = 0; d < D; d++) {
                        size_t ek = ((size_t)hk * Sk + j) * D + d, eq = ((size_t)h * Sq + i) * D + d;
                        part[d] += dsr * (float)kj[d];
                        dk[ek] += dsr * (float)qi[d];
                        dv[ek] += pr * (float)gi[d];
                        lq[eq] += dsl * (float)kj[d];
                        lk[ek] += dsl * (float)qi[d];
                        lv[ek] += pl * (float)gi[d];
                        rq[eq] += sc * ds64 * kj[d];
                        rk[ek] += sc * ds64 * qi[d];
                        rv[ek] += p64 * gi[d];
                        Wq[eq] += 0x1p-7 * sc * mag * fabs(kj[d]);
                        Wk[ek] += 0x1p-7 * sc * mag * fabs(qi[d]);
                        Wv[ek] += 0x1p-7 * p64 * fabs(gi[d]);
                    }
                }
                if (kl == B_ABWD_DQ_BLOCK && b == 1) continue;
                for (int d = 0; d < D; d++) dqrow[d] += part[d];
            }
            for (int d = 0; d < D; d++) dq[((size_t)h * Sq + i) * D + d] = dqrow[d] * scf;
        }
    }
    for (size_t e = 0; e < nk; e++) if (kl != B_ABWD_DK_SCALE) dk[e] *= scf;
    for (size_t e = 0; e < no; e++) {
        y[e] = f16v(acc[e]);
        yl[e] = f16v(e < nq + nk ? lacc[e] * scf : lacc[e]);
    }
    int trig = 0;
    for (size_t e = 0; e < no; e++)
        if (fabs(y[e] - r[e]) > W[e] + 2 * er_format_ulp(ER_FP16, fabs(r[e]) + W[e])) trig = 1;
    /* the tensors: q, k, v, o, dO, then the gradients */
    uint16_t *qb = bits, *kb = qb + nq, *vb = kb + nk, *ob = vb + nk, *gb = ob + nq, *yb = gb + nq;
    for (size_t i = 0; i < nq; i++) { qb[i] = f16b(q[i]); ob[i] = f16b(o[i]); gb[i] = f16b(g[i]); }
    for (size_t i = 0; i < nk; i++) { kb[i] = f16b(k[i]); vb[i] = f16b(v[i]); }
    for (size_t e = 0; e < no; e++) yb[e] = f16b(y[e]);
    er_tensor tq, tk, tv, to, tl, tg, tdq, tdk, tdv;
    er_tensor_view(&tq, ER_FP16, 3, (int64_t[]){AH, Sq, D}, NULL, qb);
    er_tensor_view(&tk, ER_FP16, 3, (int64_t[]){AHKV, Sk, D}, NULL, kb);
    er_tensor_view(&tv, ER_FP16, 3, (int64_t[]){AHKV, Sk, D}, NULL, vb);
    er_tensor_view(&to, ER_FP16, 3, (int64_t[]){AH, Sq, D}, NULL, ob);
    er_tensor_view(&tl, ER_FP32, 2, (int64_t[]){AH, Sq}, NULL, lse);
    er_tensor_view(&tg, ER_FP16, 3, (int64_t[]){AH, Sq, D}, NULL, gb);
    er_tensor_view(&tdq, ER_FP16, 3, (int64_t[]){AH, Sq, D}, NULL, yb);
    er_tensor_view(&tdk, ER_FP16, 3, (int64_t[]){AHKV, Sk, D}, NULL, yb + nq);
    er_tensor_view(&tdv, ER_FP16, 3, (int64_t[]){AHKV, Sk, D}, NULL, yb + nq + nk);
    er_attention_opts ao = {0, causal, 0, 0, 0, 0, 1};
    er_ref *ref;
    er_standard std;
    er_report rep[3];
    const er_tensor *outs[3] = {&tdq, &tdk, &tdv};
    if (er_attention_backward(&ref, &tq, &tk, &tv, &to, &tl, &tg, &ao) != ER_OK ||
        er_standard_parse(&std, kl == K_ABWD_FP32 ? "any_order,products=compute" : "any_order", NULL) != ER_OK ||
        er_covers_outputs(rep, ref, outs, 3, &std) != ER_OK) {
        fprintf(stderr, "%s\n", er_last_error());
        exit(2);
    }
    int flags[R_COUNT];
    flags[R_EXACTREF] = !all_pass(rep, 3);
    peer_rules(y, r, (int64_t)no, ER_FP16, Sk, flags);
    int fa_ok = 1; /* per gradient: the largest error at most twice the fp16 backward's */
    size_t lo3[3] = {0, nq, nq + nk}, hi3[3] = {nq, nq + nk, no};
    for (int t = 0; t < 3; t++) {
        double err = 0, errl = 0;
        for (size_t e = lo3[t]; e < hi3[t]; e++) { err = fmax(err, fabs(y[e] - r[e])); errl = fmax(errl, fabs(yl[e] - r[e])); }
        fa_ok &= err <= 2 * errl;
    }
    flags[R_FA2X] = !fa_ok;
    record(kl, flags, KL[kl].bug && trig);
    er_ref_free(ref);
    free(q); free(k); free(v); free(g); free(o); free(lse); free(acc); free(lacc); free(y); free(r); free(yl); free(W);
    free(P); free(bits);
}

int main(int argc, char **argv) {
    int quick = 0;
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) rs = strtoull(argv[++i], NULL, 10);
        else { fprintf(stderr, "usage: verdicts [--quick] [--json FILE] [--seed N]\n"); return 2; }
    }
    static const int shapes_q[][3] = {{8, 64, 8}, {5, 300, 3}, {17, 97, 16}, {1, 1025, 1}};
    static const int shapes_f[][3] = {{8, 64, 8}, {5, 300, 3}, {17, 97, 16}, {1, 1025, 1}, {33, 1025, 32}, {3, 4099, 5},
                                      {1, 65536, 1}, {127, 251, 2}, {1, 1, 1}};
    int nsh = quick ? 4 : 9, reps = quick ? 1 : 3;
    for (int rep = 0; rep < reps; rep++)
        for (int s = 0; s < nsh; s++) {
            const int *sh = quick ? shapes_q[s] : shapes_f[s];
            for (int d = 0; d < D_COUNT; d++) {
                if (quick && d != D_NORMAL && d != D_POSITIVE && d != D_CANCEL) continue;
                for (int kl = 0; kl < N_KLASS; kl++) {
                    if (kl == K_SOFTMAX || kl == K_SOFTMAX_TRITON || kl == K_ONLINE || kl >= B_PAD || kl == K_LN_TWO || kl == K_LN_TREE ||
                        kl == K_LN_WELFORD || kl == K_RMS || kl == K_EPI_GELU || kl == K_QUANT || kl == K_ATT || kl == K_ATT_SPLIT || kl == K_SOFTMAX_TORCH ||
                        kl == K_LN_WELFORD_TORCH || kl == K_CE_FUSED || kl == K_CE_TORCH || kl == K_LNB_TORCH ||
                        kl == K_LNB_TRITON || kl == K_MX || kl == K_NVFP4 || kl == K_ABWD_FA2 || kl == K_ABWD_FP32 || kl == K_ATT8) continue;
                    if (kl == B_TF32 || kl == K_TF32_RNE || kl == K_TF32_TRUNC || kl == K_TF32X3) {
                        matmul_case(kl, sh[0], sh[1], sh[2], ER_FP32, ER_FP32, d);
                        continue;
                    }
                    if (kl == K_MMA && sh[1] > 4096) continue;
                    matmul_case(kl, sh[0], sh[1], sh[2], ER_FP16, kl == B_FP16ACC || d == D_NEAR_MAX ? ER_FP16 : ER_FP32, d);
                }
            }
        }
    static const int rowsn[][2] = {{4, 100}, {6, 1000}, {8, 333}, {3, 2048}};
    for (int rep = 0; rep < (quick ? 2 : 6); rep++)
        for (int s = 0; s < 4; s++) {
            int rows = rowsn[s][0], n = rowsn[s][1];
            softmax_case(K_SOFTMAX, rows, n, D_NORMAL);
            softmax_case(K_SOFTMAX_TRITON, rows, n, D_NORMAL);
            softmax_case(K_ONLINE, rows, n, D_NORMAL);
            softmax_case(B_PAD, rows, n, D_NORMAL);
            softmax_case(B_NOMAX, rows, n, D_NORMAL);
            softmax_case(B_CAUSAL, 8, n < 64 ? n : 64, D_NORMAL);
            norm_case(K_LN_TWO, rows, n, rep & 1);
            norm_case(K_LN_WELFORD, rows, n, rep & 1);
            norm_case(K_RMS, rows, n, 0);
            norm_case(B_UNBIASED, rows, n < 512 ? n : 256, 0);
            norm_case(B_ONEPASS, rows, n, 1);
            norm_case(K_LN_TREE, rows, n, rep & 1);
            norm_case(B_UNBIASED_TREE, rows, n, 0);
            norm_case(B_EPS_TREE, rows, n, 0);
            norm_case(B_RSQRT, rows, 64, 0);
        }
    static const int treen[][2] = {{4, 1000}, {2, 4096}, {2, 8192}, {1, 16384}};
    for (int rep = 0; rep < (quick ? 1 : 3); rep++)
        for (int s = 0; s < 4; s++) {
            softmax_tree_case(K_SOFTMAX_TORCH, treen[s][0], treen[s][1]);
            softmax_tree_case(B_DROP_ANY, treen[s][0], treen[s][1]);
            softmax_tree_case(B_DROP_DEPTH, treen[s][0], treen[s][1]);
        }
    static const int epi[][3] = {{8, 64, 8}, {5, 300, 3}, {17, 97, 16}, {4, 1025, 6}};
    for (int rep = 0; rep < (quick ? 1 : 4); rep++)
        for (int s = 0; s < 4; s++)
            for (int d = 0; d < 3; d++) { /* normal, all-positive, cancellation */
                epilogue_case(K_EPI_GELU, epi[s][0], epi[s][1], epi[s][2], d);
                epilogue_case(B_ACT_FIRST, epi[s][0], epi[s][1], epi[s][2], d);
                quant_case(K_QUANT, epi[s][0] + 8, epi[s][1], d);
                quant_case(B_QSCALE_INV, epi[s][0] + 8, epi[s][1], d);
                quant_case(B_QAMAX_AXIS, epi[s][0] + 8, epi[s][1], d);
                quant_case(B_QTRUNC, epi[s][0] + 8, epi[s][1], d);
            }
    static const int att[][4] = {{64, 64, 64, 0}, {100, 300, 64, 0}, {1, 500, 128, 0}, {96, 96, 64, 1}, {128, 1000, 64, 0}};
    for (int rep = 0; rep < (quick ? 1 : 3); rep++)
        for (int s = 0; s < (quick ? 4 : 5); s++)
            for (int kl = K_ATT; kl <= B_ATT_GQA; kl = kl == K_ATT_SPLIT ? B_ATT_CAUSAL : kl + 1) {
                if (kl == B_ATT_CAUSAL && !att[s][3]) continue; /* the mask's bug needs a mask */
                attn_case(kl, att[s][0], att[s][1], att[s][2], kl == B_ATT_CAUSAL || att[s][3]);
            }
    /* torch's layer_norm at n = 1000 .. 8192 (at 16384, depth 134, the Welford set is wider than the bug's move); last,
     * so that the classes above draw the same inputs as before these were added */
    static const int welfn[][2] = {{4, 1000}, {2, 2048}, {2, 4096}, {1, 8192}};
    for (int rep = 0; rep < (quick ? 1 : 3); rep++)
        for (int s = 0; s < 4; s++) {
            norm_case(K_LN_WELFORD_TORCH, welfn[s][0], welfn[s][1], rep & 1);
            norm_case(B_UNBIASED_WELFORD, welfn[s][0], welfn[s][1], 0);
        }
    /* cross-entropy, last for the same reason */
    static const int cen[][2] = {{4, 100}, {8, 1000}, {3, 517}};
    for (int rep = 0; rep < (quick ? 1 : 3); rep++)
        for (int s = 0; s < 3; s++)
            for (int e = 0; e < 2; e++)
                for (int kl = K_CE_FUSED; kl <= B_CE_TAIL; kl = kl == K_CE_TORCH ? B_CE_NOW : kl + 1) {
                    if (kl == B_CE_EPS && e == 0) continue; /* the bug needs smoothing */
                    ce_case(kl, cen[s][0], cen[s][1], e ? 0.1 : 0.0);
                }
    /* layer_norm backward, after the others (their inputs unchanged) */
    static const int lnbn[][2] = {{4, 100}, {16, 1000}, {3, 4099}};
    for (int rep = 0; rep < (quick ? 1 : 3); rep++)
        for (int sh = 0; sh < 3; sh++)
            for (int kl = K_LNB_TORCH; kl <= B_LNB_DB_LAST; kl = kl == K_LNB_TRITON ? B_LNB_NOMEAN : kl + 1)
                lnb_case(kl, lnbn[sh][0], lnbn[sh][1]);
    /* MX and NVFP4 quantisation, after the others */
    static const int mxn[][2] = {{4, 64}, {8, 256}, {3, 1024}};
    for (int rep = 0; rep < (quick ? 1 : 3); rep++)
        for (int sh = 0; sh < 3; sh++)
            for (int d = 0; d < 3; d++) /* normal, all-positive, cancellation */
                for (int kl = K_MX; kl <= B_NV_NOGLOBAL; kl = kl == K_NVFP4 ? B_MX_CEIL : kl + 1)
                    mx_case(kl, mxn[sh][0], mxn[sh][1], d);
    /* attention backward, after the others */
    static const int abn[][4] = {{64, 64, 64, 0}, {100, 200, 64, 0}, {96, 96, 64, 1}, {16, 300, 128, 0}};
    for (int rep = 0; rep < (quick ? 1 : 3); rep++)
        for (int sh = 0; sh < (quick ? 3 : 4); sh++)
            for (int kl = K_ABWD_FA2; kl <= B_ABWD_D_ZERO; kl = kl == K_ABWD_FP32 ? B_ABWD_DK_SCALE : kl + 1)
                abwd_case(kl, abn[sh][0], abn[sh][1], abn[sh][2], abn[sh][3]);
    /* fp8 attention, after the others */
    static const int a8n[][3] = {{32, 256, 64}, {16, 500, 64}, {8, 1024, 128}};
    for (int rep = 0; rep < (quick ? 1 : 3); rep++)
        for (int sh = 0; sh < 3; sh++)
            for (int kl = K_ATT8; kl <= B_ATT8_NOSS; kl = kl == K_ATT8 ? B_ATT8_AMAX0 : kl + 1)
                attn8_case(kl, a8n[sh][0], a8n[sh][1], a8n[sh][2]);
    /* the table */
    printf("%-42s %6s %6s", "class", "cases", "trig");
    for (int r = 0; r < R_COUNT; r++) printf(" %18s", rnames[r]);
    printf("\n");
    int bad = 0;
    long fa[R_COUNT] = {0}, correct = 0, caught[R_COUNT] = {0}, bugs = 0;
    for (int kl = 0; kl < N_KLASS; kl++) {
        klass *k = &KL[kl];
        printf("%-42s %6ld %6s", k->name, k->cases, k->bug ? "" : "-");
        if (k->bug) printf("\b\b\b\b\b\b%6ld", k->triggered);
        for (int r = 0; r < R_COUNT; r++) {
            if (r == R_FA2X && !k->attn) { printf(" %18s", "-"); continue; } /* FlashAttention's rule: attention only */
            printf(" %12ld (%3.0f%%)", k->flagged[r], k->cases ? 100.0 * k->flagged[r] / k->cases : 0.0);
        }
        printf("\n");
        if (!k->bug) { correct += k->cases; for (int r = 0; r < R_COUNT; r++) fa[r] += k->flagged[r]; if (k->flagged[R_EXACTREF]) bad = 1; }
        else {
            bugs += k->cases;
            for (int r = 0; r < R_COUNT; r++) caught[r] += k->flagged[r];
            if (k->trig_caught_exactref != k->triggered || k->triggered == 0) bad = 1;
        }
    }
    printf("\nfalse alarms on %ld correct cases:", correct);
    for (int r = 0; r < R_COUNT; r++) printf("  %s %ld", rnames[r], fa[r]);
    printf("\nbugs caught of %ld buggy cases:", bugs);
    for (int r = 0; r < R_COUNT; r++) printf("  %s %ld", rnames[r], caught[r]);
    printf("\n");
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) { fprintf(stderr, "cannot write %s\n", json); return 2; }
        fprintf(f, "{\"rules\": [");
        for (int r = 0; r < R_COUNT; r++) fprintf(f, "%s\"%s\"", r ? ", " : "", rnames[r]);
        fprintf(f, "],\n \"classes\": [\n");
        for (int kl = 0; kl < N_KLASS; kl++) {
            klass *k = &KL[kl];
            fprintf(f, "  {\"name\": \"%s\", \"bug\": %s, \"cases\": %ld, \"triggered\": %ld, \"triggered_caught_by_exactref\": %ld, "
                    "\"trigger\": \"%s\", \"flagged\": [", k->name, k->bug ? "true" : "false", k->cases, k->triggered,
                    k->trig_caught_exactref, k->trigger);
            for (int r = 0; r < R_COUNT; r++) {
                if (r == R_FA2X && !k->attn) fprintf(f, "%snull", r ? ", " : "");
                else fprintf(f, "%s%ld", r ? ", " : "", k->flagged[r]);
            }
            fprintf(f, "]}%s\n", kl + 1 < N_KLASS ? "," : "");
        }
        fprintf(f, " ]}\n");
        fclose(f);
    }
    long missed = 0;
    for (int kl = N_CORRECT; kl < N_KLASS; kl++) missed += KL[kl].triggered - KL[kl].trig_caught_exactref;
    printf("exactref missed %ld of the triggered bug cases\n", missed);
    if (bad && (quick || fa[R_EXACTREF] || missed)) {
        fprintf(stderr, "verdicts: exactref raised a false alarm, missed a triggered bug, or a class was never triggered\n");
        return 1;
    }
    return 0;
}
