/* fuzz_quantize.c: any bytes as a quantisation: x's format (fp32, bf16, fp16), shape and values (every bit pattern:
 * NaN, inf, subnormals, ties of the fp8 grid), q's format (any value, valid or not), the granularity (tensor, row,
 * blocks of any size up to INT64_MAX, or an invalid value) and the recipe (amax, pow2, inverse, the four MX recipes,
 * or invalid). What is accepted must cover the outputs of a kernel written here from docs/algorithms/quantize.md
 * alone (amax = max |x| exact, the scale correctly rounded in fp32, q = RN_q(RN_fp32(x scale)) saturated; MX: the
 * recipe's power of two from amax's exponent, stored as e8m0, q = RN_q(RN_fp32(x 2^-e)) saturated, 0 in a NaN block),
 * with each output's shape from er_ref_output_shape; what is refused writes nothing. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/exactref.h>
#include "harness.h"

static const char *const kinds[] = {"amax", "pow2", "inverse", "mx", "mx_ceil", "mx_even", "mx_rceil", "nvfp4"};
REACH_TARGET(kinds)


static double rn(er_format f, double v, er_overflow ov) {
    double r;
    if (er_round_double(&r, f, v, ER_ROUND_NEAREST, ov) != ER_OK) abort();
    return r;
}
/* v, a value of f already (x's with its infinities: IEEE; q's, saturated: either rule) */
static void store(void *buf, er_format f, int64_t i, double v, er_overflow ov) {
    uint64_t bits;
    if (isnan(v) && er_format_value_bits(f) < 8) v = 0; /* fp4 and fp6 have no NaN: a NaN x's q is free */
    if (er_encode(&bits, f, v, ER_ROUND_NEAREST, ov) != ER_OK) abort();
    switch (er_format_storage_bits(f)) {
    case 8: ((uint8_t *)buf)[i] = (uint8_t)bits; break;
    case 16: ((uint16_t *)buf)[i] = (uint16_t)bits; break;
    default: ((uint32_t *)buf)[i] = (uint32_t)bits; break;
    }
}

enum { MAXN = 256 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rd r = {data, size};
    reach_input();
    static const er_format xfmts[3] = {ER_FP32, ER_BF16, ER_FP16};
    er_format xf = xfmts[byte(&r) % 3], qf = (er_format)(byte(&r) % 13);
    int rows = 1 + (int)(byte(&r) % 6), cols = (int)(byte(&r) % 40);
    unsigned g = byte(&r), rb = byte(&r);
    er_granularity gran = (er_granularity)(g % 5); /* 4: refused */
    int64_t block = (g >> 2) % 8 == 7 ? INT64_MAX : (g >> 2) % 8 == 6 ? 0 : 1 + (int64_t)((g >> 2) % 8) * 3;
    er_scale_recipe recipe = (er_scale_recipe)(rb % 9); /* 8: refused */
    int mx = recipe >= ER_RECIPE_MX && recipe <= ER_RECIPE_MX_RCEIL;
    int64_t n = (int64_t)rows * cols;
    static uint32_t xb[MAXN];
    static double xv[MAXN];
    for (int64_t i = 0; i < n; i++) {
        unsigned a = byte(&r), b = byte(&r);
        uint32_t bits = (uint32_t)a << 8 | b;
        if (xf == ER_FP32) bits = bits << 16 | (uint32_t)(a ^ b) << 4;
        double v;
        if (er_decode(&v, xf, bits) != ER_OK) abort();
        if (rb & 0x80) v = ldexp((double)((int)(a % 17) - 8), (int)(b % 7) - 3); /* small integers: fp8 grid ties */
        xv[i] = rn(xf, v, ER_OVERFLOW_IEEE);
        store(xb, xf, i, xv[i], ER_OVERFLOW_IEEE);
    }
    er_tensor X;
    if (er_tensor_view(&X, xf, 2, (int64_t[]){rows, cols}, NULL, xb) != ER_OK) abort();
    er_ref *ref = NULL;
    if ((unsigned)recipe < 8) reach_call((int)recipe);
    er_status st = er_quantize(&ref, &X, qf, gran, block, recipe);
    if (st != ER_OK) {
        if (ref) abort();
        return 0;
    }
    int tiled = gran == ER_GRAN_BLOCK || gran == ER_GRAN_TILE;
    if ((unsigned)gran > 3 || (unsigned)recipe > 7 || (tiled && block < 1) || qf == ER_FP8_E8M0FNU ||
        (recipe == ER_RECIPE_NVFP4 && !tiled))
        abort(); /* must refuse */
    reach_accept((int)recipe);
    int nd;
    int64_t gs[ER_MAX_DIMS];
    if (er_ref_output_shape(ref, 1, &nd, gs) != ER_OK) abort();
    int64_t ngroups = 1;
    for (int i = 0; i < nd; i++) ngroups *= gs[i];
    int64_t gpr = tiled ? (cols ? (cols - 1) / block + 1 : 0) : 1, tpr = tiled ? (rows - 1) / block + 1 : 1;
    if (ngroups != (gran == ER_GRAN_TENSOR ? 1 : gran == ER_GRAN_ROW ? rows : gran == ER_GRAN_TILE ? tpr * gpr
                                                                                                   : rows * gpr))
        abort();
    /* the kernel */
    double qmax = er_format_max(qf);
    static float amax[MAXN], scale[MAXN];
    static uint8_t q[4 * MAXN];
    for (int64_t k = 0; k < ngroups; k++) amax[k] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t row = i / (cols ? cols : 1), c = i % (cols ? cols : 1);
        int64_t k = gran == ER_GRAN_TENSOR ? 0 : gran == ER_GRAN_ROW ? row
                  : gran == ER_GRAN_TILE ? (row / block) * gpr + c / block : row * gpr + c / block;
        double a = fabs(xv[i]);
        if (isnan(a) || isnan(amax[k])) amax[k] = NAN;
        else if (a > amax[k]) amax[k] = (float)a;
    }
    for (int64_t k = 0; k < ngroups && mx; k++) { /* the MX scale X = 2^e (NaN: no value) */
        double a = amax[k];
        int e = -127, ex;
        if (!isfinite(a)) { scale[k] = NAN; continue; }
        if (a > 0) {
            if (recipe == ER_RECIPE_MX_RCEIL) { /* amax RN(1 / qmax) in fp32, then rounded up to a power of two */
                double d = rn(ER_FP32, a * rn(ER_FP32, 1.0 / qmax, ER_OVERFLOW_IEEE), ER_OVERFLOW_IEEE);
                double m = frexp(d, &ex);
                e = d <= 0x1p-127 ? -127 : m == 0.5 ? ex - 1 : ex;
            } else {
                double m = frexp(a, &ex);
                e = ex - 1 - er_format_emax(qf);
                if (recipe == ER_RECIPE_MX_CEIL && m != 0.5) e++;
                if (recipe == ER_RECIPE_MX_EVEN && m >= 1.0 - ldexp(1.0, -(er_format_precision(qf) + 1))) e++;
            }
        }
        scale[k] = e > 127 ? NAN : (float)ldexp(1.0, e < -127 ? -127 : e);
    }
    /* NVFP4, as Transformer Engine computes it in fp32: S = 448 qmax / G (1 where G is 0), each block's e4m3 scale
     * RN(amax_b (S RN(1 / qmax))) saturated, q = RN_q(x RN(1 / (scale RN(1 / S)))) saturated (x times FLT_MAX where
     * the scale is 0) */
    int nv = recipe == ER_RECIPE_NVFP4;
    double G = 0, Senc = 1;
    for (int64_t k = 0; k < ngroups && nv; k++) G = isnan(amax[k]) || isnan(G) ? NAN : fmax(G, amax[k]);
    if (nv && G > 0) Senc = fmin(rn(ER_FP32, 448.0 * qmax / G, ER_OVERFLOW_IEEE), FLT_MAX);
    if (nv && Senc == 0) Senc = 1;
    for (int64_t k = 0; k < ngroups && nv; k++) {
        double d = rn(ER_FP32, amax[k] * rn(ER_FP32, Senc * rn(ER_FP32, 1.0 / qmax, ER_OVERFLOW_IEEE), ER_OVERFLOW_IEEE),
                      ER_OVERFLOW_IEEE);
        scale[k] = (float)rn(ER_FP8_E4M3FN, fmin(d, FLT_MAX), ER_OVERFLOW_SATURATE);
    }
    for (int64_t k = 0; k < ngroups && !mx && !nv; k++) {
        double a = amax[k];
        double s = recipe == ER_RECIPE_INV ? a / qmax : qmax / a;
        if (a == 0 || !isfinite(a)) s = recipe == ER_RECIPE_INV && a == 0 ? 1.0 : 1.0; /* the recipes' scale 1 */
        s = rn(ER_FP32, s, ER_OVERFLOW_IEEE);
        if (recipe == ER_RECIPE_POW2 && s > 0 && isfinite(s)) { int e; frexp(s, &e); s = ldexp(1.0, e - 1); }
        scale[k] = (float)s;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t row = i / (cols ? cols : 1), c = i % (cols ? cols : 1);
        int64_t k = gran == ER_GRAN_TENSOR ? 0 : gran == ER_GRAN_ROW ? row
                  : gran == ER_GRAN_TILE ? (row / block) * gpr + c / block : row * gpr + c / block;
        double enc = nv ? (scale[k] > 0 ? rn(ER_FP32, 1.0 / rn(ER_FP32, scale[k] * rn(ER_FP32, 1.0 / Senc, ER_OVERFLOW_IEEE),
                                                                 ER_OVERFLOW_IEEE), ER_OVERFLOW_IEEE)
                                         : FLT_MAX)
                        : 0;
        if (nv) enc = fmin(enc, FLT_MAX);
        double v = nv                      ? rn(ER_FP32, xv[i] * enc, ER_OVERFLOW_IEEE)
                 : recipe == ER_RECIPE_INV ? rn(ER_FP32, xv[i] / (double)scale[k], ER_OVERFLOW_IEEE)
                   : mx                    ? rn(ER_FP32, xv[i] * (1.0 / (double)scale[k]), ER_OVERFLOW_IEEE)
                                           : rn(ER_FP32, xv[i] * (double)scale[k], ER_OVERFLOW_IEEE);
        if ((mx || nv) && isnan(v)) v = 0; /* a NaN block (or element): q is free, and fp4 and fp6 have no NaN */
        store(q, qf, i, rn(qf, v, ER_OVERFLOW_SATURATE), ER_OVERFLOW_SATURATE);
    }
    static uint8_t sbytes[MAXN]; /* the MX scales as e8m0 */
    for (int64_t k = 0; k < ngroups && mx; k++) {
        uint64_t bits;
        if (er_encode(&bits, ER_FP8_E8M0FNU, scale[k], ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT) != ER_OK) abort();
        sbytes[k] = (uint8_t)bits;
    }
    er_tensor Q, A, S;
    er_standard std;
    if (er_tensor_view(&Q, qf, 2, (int64_t[]){rows, cols}, NULL, q) != ER_OK ||
        er_tensor_view(&A, ER_FP32, nd, gs, NULL, amax) != ER_OK || er_tensor_view(&S, ER_FP32, nd, gs, NULL, scale) != ER_OK ||
        (mx && er_tensor_view(&S, ER_FP8_E8M0FNU, nd, gs, NULL, sbytes) != ER_OK) ||
        er_standard_parse(&std, "any_order", NULL) != ER_OK)
        abort();
    const er_tensor *outs[3] = {&Q, &A, &S};
    er_report reps[3];
    st = nobug(er_covers_outputs(reps, ref, outs, 3, &std));
    if (st == ER_OK) {
        /* a correct kernel is never outside; NaN x makes NaN amax and scale, whose q the set may or may not hold */
        int any_nan = 0;
        for (int64_t i = 0; i < n && !mx && !nv; i++) any_nan |= isnan(xv[i]); /* MX, NVFP4: NaN blocks too */
        for (int o = 0; o < 3 && !any_nan; o++)
            if (!er_report_all(&reps[o])) {
                if (getenv("ER_FUZZ_VERBOSE")) for (int k = 0; k < 3; k++) er_report_fprint(stderr, &reps[k]);
                abort();
            }
    } else {
        for (int o = 0; o < 3; o++) if (er_report_all(&reps[o])) abort();
    }
    for (int o = 0; o < 3; o++) er_report_clear(&reps[o]);
    er_ref_free(ref);
    return 0;
}
