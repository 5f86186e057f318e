/* fuzz_chain.c: any bytes as an elementwise chain over a tensor's values, as a fused epilogue evaluates it: x in
 * fp32, fp16 or bf16 (every bit pattern, or values near the activations' turns), then up to 5 stages (add and mul of
 * scalars valid or not, relu, casts to fp16 and bf16, exp, exp2, log, tanh, sigmoid, erf, rsqrt, silu, gelu) with
 * ulps valid or not. What is accepted must cover the chain evaluated here in fp32 with the C library's float
 * functions (glibc's expf, logf, tanhf, erff within 1 ulp, inside the default budgets of 1 and 2), each step rounded
 * once as docs/algorithms/chains.md states, and its enclosure must hold exactly what covers passes. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/exactref.h>
#include "harness.h"

static const char *const kinds[] = {"add", "mul", "relu", "cast", "exp", "exp2", "log", "tanh", "sigmoid", "erf", "rsqrt",
                                    "silu", "gelu"};
REACH_TARGET(kinds)

enum { N = 64 };
static const er_stage_kind kind_of[13] = {ER_STAGE_ADD, ER_STAGE_MUL, ER_STAGE_RELU, ER_STAGE_CAST, ER_STAGE_EXP,
                                          ER_STAGE_EXP2, ER_STAGE_LOG, ER_STAGE_TANH, ER_STAGE_SIGMOID, ER_STAGE_ERF,
                                          ER_STAGE_RSQRT, ER_STAGE_SILU, ER_STAGE_GELU};

static float rnd(er_format f, float v) {
    double r;
    if (er_round_double(&r, f, v, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE) != ER_OK) abort();
    return (float)r;
}

/* One stage in fp32 as a kernel evaluates it (chains.md's table). */
static float stage(const er_stage *s, float x) {
    switch (s->kind) {
    case ER_STAGE_ADD: return x + (float)s->scalar;
    case ER_STAGE_MUL: return x * (float)s->scalar;
    case ER_STAGE_RELU: return x > 0 ? x : 0.0f;
    case ER_STAGE_CAST: return rnd(s->format, x);
    case ER_STAGE_EXP: return expf(x);
    case ER_STAGE_EXP2: return exp2f(x);
    case ER_STAGE_LOG: return logf(x);
    case ER_STAGE_TANH: return tanhf(x);
    case ER_STAGE_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ER_STAGE_ERF: return erff(x);
    case ER_STAGE_RSQRT: return 1.0f / sqrtf(x);
    case ER_STAGE_SILU: return x / (1.0f + expf(-x));
    default: { float h = x * 0.5f, t = erff(x * 0.70710678f); return h * (1.0f + t); } /* gelu, erf form */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rd r = {data, size};
    reach_input();
    static const er_format xfmts[3] = {ER_FP32, ER_FP16, ER_BF16};
    er_format xf = xfmts[byte(&r) % 3];
    int n = 1 + (int)(byte(&r) % N), ns = 1 + (int)(byte(&r) % 5);
    static float x[N], y[N], lo_out[N];
    static uint32_t xb[N];
    for (int i = 0; i < n; i++) {
        unsigned a = byte(&r), b = byte(&r);
        uint64_t bits = (uint64_t)a << 8 | b;
        if (xf == ER_FP32) bits = bits << 16 | (uint64_t)(a * 40503u + b) % 65536u;
        double v;
        if (er_decode(&v, xf, bits) != ER_OK) abort();
        if ((a & 0xc0) == 0xc0) v = ldexp((double)((int)(b % 41) - 20), -3); /* near the turns: -2.5 to 2.5 */
        x[i] = rnd(xf, (float)v);
        uint64_t e;
        if (er_encode(&e, xf, x[i], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE) != ER_OK) abort();
        if (xf == ER_FP32) xb[i] = (uint32_t)e; else ((uint16_t *)xb)[i] = (uint16_t)e;
    }
    static const double scalars[8] = {0.5, -3.0, 1e-3, 1e30, NAN, INFINITY, 0.0, -0.044715};
    er_stage st[5];
    int kinds_used[5];
    for (int k = 0; k < ns; k++) {
        int kd = (int)(byte(&r) % 13);
        unsigned u = byte(&r);
        kinds_used[k] = kd;
        st[k] = (er_stage){kind_of[kd], NULL, 0, ER_FP32, NULL};
        if (kd <= 1) st[k].scalar = scalars[u % 8];
        else if (kd == 3) st[k].format = (u & 1) ? ER_FP16 : ER_BF16;
        else if (kd >= 4) st[k].scalar = u % 16 == 15 ? 70 : u % 16 == 14 ? -1 : 0; /* ulps: default, or refused */
    }
    er_tensor X, Y;
    if (er_tensor_view(&X, xf, 1, (int64_t[]){n}, NULL, xb) != ER_OK || er_tensor_view(&Y, ER_FP32, 1, (int64_t[]){n}, NULL, y) != ER_OK)
        abort();
    er_ref *base = NULL, *ch = NULL;
    if (er_tensor_ref(&base, &X) != ER_OK) abort();
    for (int k = 0; k < ns; k++) reach_call(kinds_used[k]);
    er_status s = nobug(er_chain(&ch, base, st, ns));
    if (s != ER_OK) {
        if (ch) abort();
        for (int k = 0; k < ns; k++)
            if (kinds_used[k] <= 1 ? !isfinite(st[k].scalar) : kinds_used[k] >= 4 && st[k].scalar != 0) goto refused;
        abort(); /* nothing wrong with it, yet refused */
    refused:
        er_ref_free(base);
        return 0;
    }
    for (int k = 0; k < ns; k++) {
        if (kinds_used[k] <= 1 && !isfinite(st[k].scalar)) abort(); /* must refuse */
        if (kinds_used[k] >= 4 && st[k].scalar != 0) abort();
        reach_accept(kinds_used[k]);
    }
    for (int i = 0; i < n; i++) {
        float v = x[i];
        for (int k = 0; k < ns; k++) v = stage(&st[k], v);
        y[i] = v;
    }
    er_standard std;
    er_report rep;
    if (er_standard_parse(&std, "any_order", NULL) != ER_OK) abort();
    if (nobug(er_covers(&rep, ch, &Y, &std)) != ER_OK) abort();
    if (!er_report_all(&rep)) {
        if (getenv("ER_FUZZ_VERBOSE")) er_report_fprint(stderr, &rep);
        abort(); /* a correct evaluation outside its set */
    }
    er_report_clear(&rep);
    /* the enclosure is the set covers uses: the kernel's values inside, each value one ulp past an end outside */
    static double lo[N], hi[N];
    static uint8_t fl[N];
    if (nobug(er_ref_enclosure(ch, 0, &std, ER_FP32, lo, hi, fl)) != ER_OK) abort();
    for (int i = 0; i < n; i++) {
        if (isnan(lo[i])) { lo_out[i] = 1.0f; continue; }
        lo_out[i] = nextafterf((float)lo[i], -INFINITY);
        if (isfinite(y[i]) && !(y[i] >= lo[i] && y[i] <= hi[i])) abort();
    }
    er_tensor L;
    if (er_tensor_view(&L, ER_FP32, 1, (int64_t[]){n}, NULL, lo_out) != ER_OK) abort();
    if (nobug(er_covers(&rep, ch, &L, &std)) != ER_OK) abort();
    for (int i = 0; i < n; i++) {
        double v = lo_out[i];
        int in = isnan(v) ? (fl[i] & ER_ENCLOSURE_NAN) != 0
               : (fl[i] & ER_ENCLOSURE_NAN_ONLY) ? 0
               : isinf(v) ? (fl[i] & (v > 0 ? ER_ENCLOSURE_PINF : ER_ENCLOSURE_NINF)) != 0 : v >= lo[i] && v <= hi[i];
        if (in != er_class_passes((er_class)rep.classes[i])) abort();
    }
    er_report_clear(&rep);
    er_ref_free(ch);
    er_ref_free(base);
    return 0;
}
