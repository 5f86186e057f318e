/* fuzz_attention.c: any bytes as an attention call: batch, heads and kv heads (GQA when they differ, with
 * enable_gqa given or not), Sq and Sk (0 included, Sq above Sk), head dims, formats, values (every bit pattern, or
 * small integers on a grid where sums tie), the scale (0, negative, NaN, inf, tiny, huge) and the mask: causal in
 * both alignments, windows of any width up to INT64_MAX keys, negative sides. What is refused writes nothing; what
 * is accepted must cover its own exact O correctly rounded (er_ref_rounded) under any_order, must give a window wider
 * than every row the same sets as no window, and its enclosures (O and LSE) must hold exactly what covers passes.
 * With a flag, the fp8 call with scales from the bytes (0, negative, NaN, tiny, huge, 448, 470): what it accepts
 * covers its own correctly rounded O, and its four outputs' enclosures hold exactly what covers passes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/exactref.h>
#include "harness.h"

static const char *const kinds[] = {"no_mask", "causal", "causal_bottom_right", "window", "gqa", "fp8"};
REACH_TARGET(kinds)


enum { MAXE = 2 * 4 * 9 * 8 };
static uint32_t qb[MAXE], kb[MAXE], vb[MAXE];
static float o[MAXE], l[MAXE], o2[MAXE];
static double lo0[MAXE], hi0[MAXE], lo1[MAXE], hi1[MAXE];
static uint8_t f0[MAXE], f1[MAXE];

static int fill(rd *r, uint32_t *buf, er_format f, int64_t n, int grid) {
    int special = 0;
    for (int64_t i = 0; i < n; i++) {
        unsigned a = byte(r), b = byte(r);
        uint64_t bits = (uint64_t)a << 8 | b;
        if (f == ER_FP32) bits = bits << 16 | (uint64_t)(a * 131u + b) % 65536u;
        double v;
        if (er_decode(&v, f, bits) != ER_OK) abort();
        if (grid) v = ldexp((double)((int)(a % 9) - 4), (int)(b % 4) - 2);
        special |= !isfinite(v);
        uint64_t e;
        if (er_encode(&e, f, v, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE) != ER_OK) abort();
        if (f == ER_FP32) buf[i] = (uint32_t)e; else ((uint16_t *)buf)[i] = (uint16_t)e;
    }
    return special;
}

static int same_sets(int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (f0[i] != f1[i] || !((lo0[i] == lo1[i]) || (isnan(lo0[i]) && isnan(lo1[i]))) ||
            !((hi0[i] == hi1[i]) || (isnan(hi0[i]) && isnan(hi1[i]))))
            return 0;
    return 1;
}

/* Each output's enclosure holds exactly the values covers passed (reps, then cleared): outputs vals of n[w] elements. */
static void enclosures_agree(const er_ref *ref, const er_standard *std, er_report *reps, const float *const *vals,
                             const int64_t *n, int nout) {
    for (int w = 0; w < nout; w++) {
        if (er_ref_enclosure(ref, w, std, ER_FP32, lo0, hi0, f0) != ER_OK) abort();
        for (int64_t i = 0; i < n[w]; i++) {
            double y = vals[w][i];
            int in = isnan(y) ? (f0[i] & ER_ENCLOSURE_NAN) != 0
                   : (f0[i] & ER_ENCLOSURE_NAN_ONLY) ? 0
                   : isinf(y) ? (f0[i] & (y > 0 ? ER_ENCLOSURE_PINF : ER_ENCLOSURE_NINF)) != 0 : y >= lo0[i] && y <= hi0[i];
            if (in != er_class_passes((er_class)reps[w].classes[i])) abort();
        }
        er_report_clear(&reps[w]);
    }
}

/* The fp8 call on the same inputs (kind 5). */
static void fuzz_fp8(rd *r, const er_tensor *Q, const er_tensor *K, const er_tensor *V, const er_attention_opts *ao,
                     int special, int64_t no, int64_t nl, const int64_t *oshape) {
    static const double vals[10] = {0, 1, 0.5, 448, 470, -1, NAN, 1e-30, 3.7, 0x1p127};
    er_attention_fp8_scales sc = {vals[byte(r) % 10], vals[byte(r) % 10], vals[byte(r) % 10],
                                  vals[byte(r) % 10], vals[byte(r) % 10], vals[byte(r) % 10]};
    const double *f = &sc.descale_q;
    reach_call(5);
    er_ref *ref = NULL;
    er_status st = er_attention_fp8(&ref, Q, K, V, ao, &sc);
    int ok = 1;
    for (int i = 0; i < 6; i++) ok &= f[i] >= 0 && f[i] <= 0x1p126;
    if (st != ER_OK) {
        if (ref || (ok && st == ER_ERR_INVALID && strstr(er_last_error(), "must be positive"))) abort();
        return;
    }
    if (!ok) abort(); /* must refuse */
    reach_accept(5);
    er_standard std;
    if (er_standard_parse(&std, "any_order", NULL) != ER_OK) abort();
    er_tensor O, O2, L, AS, AO;
    float as[1], amo[1];
    if (er_tensor_view(&O, ER_FP32, 4, oshape, NULL, o) != ER_OK) abort();
    er_report rep;
    if (!special && er_ref_rounded(&O, ref) == ER_OK) { /* the exact O, correctly rounded, is a correct output */
        if (er_covers(&rep, ref, &O, &std) == ER_OK && !er_report_all(&rep)) abort();
        er_report_clear(&rep);
    }
    for (int64_t i = 0; i < no; i++) { uint32_t b = (uint32_t)byte(r) * 0x01000193u; memcpy(&o2[i], &b, 4); }
    for (int64_t i = 0; i < nl; i++) { uint32_t b = (uint32_t)byte(r) * 0x01000193u; memcpy(&l[i], &b, 4); }
    for (int i = 0; i < 2; i++) { uint32_t b = (uint32_t)byte(r) * 0x01000193u; memcpy(i ? amo : as, &b, 4); }
    if (er_tensor_view(&O2, ER_FP32, 4, oshape, NULL, o2) != ER_OK ||
        er_tensor_view(&L, ER_FP32, 3, oshape, NULL, l) != ER_OK ||
        er_tensor_view(&AS, ER_FP32, 1, (int64_t[]){1}, NULL, as) != ER_OK ||
        er_tensor_view(&AO, ER_FP32, 1, (int64_t[]){1}, NULL, amo) != ER_OK)
        abort();
    const er_tensor *outs[4] = {&O2, &L, &AS, &AO};
    er_report reps[4];
    st = er_covers_outputs(reps, ref, outs, 4, &std);
    if (st != ER_OK) { /* only a scale_s that may round P past the format's largest value */
        if (st != ER_ERR_UNSUPPORTED || !strstr(er_last_error(), "scale_s")) abort();
        er_ref_free(ref);
        return;
    }
    const float *v4[4] = {o2, l, as, amo};
    enclosures_agree(ref, &std, reps, v4, (int64_t[]){no, nl, 1, 1}, 4);
    er_ref_free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rd r = {data, size};
    reach_input();
    static const er_format fmts[3] = {ER_FP32, ER_FP16, ER_BF16};
    er_format f = fmts[byte(&r) % 3];
    int Bt = 1 + (int)(byte(&r) % 2), Hkv = 1 + (int)(byte(&r) % 2), H = Hkv * (1 + (int)(byte(&r) % 2));
    int Sq = (int)(byte(&r) % 10), Sk = (int)(byte(&r) % 10), D = 1 + (int)(byte(&r) % 8), Dv = 1 + (int)(byte(&r) % 8);
    unsigned fl = byte(&r), ws = byte(&r), wt = byte(&r), sc = byte(&r);
    static const double scales[8] = {0, 0.5, -0.25, NAN, INFINITY, 1e-30, 1e30, 0.3535533905932738};
    er_attention_opts ao = {scales[sc % 8], (int)(fl & 1), (int)((fl >> 1) & 1), (int)((fl >> 2) & 1),
                            ws == 0xff ? INT64_MAX : ws == 0xfe ? -1 : (int64_t)(ws % 12),
                            wt == 0xff ? INT64_MAX : wt == 0xfe ? -3 : (int64_t)(wt % 12), (int)((fl >> 3) & 1)};
    int grid = (fl >> 4) & 1;
    int64_t nq = (int64_t)Bt * H * Sq * D, nk = (int64_t)Bt * Hkv * Sk * D, nv = (int64_t)Bt * Hkv * Sk * Dv;
    int special = fill(&r, qb, f, nq, grid) | fill(&r, kb, f, nk, grid) | fill(&r, vb, f, nv, grid);
    er_tensor Q, K, V, O, L;
    if (er_tensor_view(&Q, f, 4, (int64_t[]){Bt, H, Sq, D}, NULL, qb) != ER_OK ||
        er_tensor_view(&K, f, 4, (int64_t[]){Bt, Hkv, Sk, D}, NULL, kb) != ER_OK ||
        er_tensor_view(&V, f, 4, (int64_t[]){Bt, Hkv, Sk, Dv}, NULL, vb) != ER_OK)
        abort();
    int kind = H != Hkv ? 4 : ao.window ? 3 : ao.causal ? 1 + ao.bottom_right : 0;
    reach_call(kind);
    er_ref *ref = NULL;
    er_status st = er_attention(&ref, &Q, &K, &V, &ao);
    if (st != ER_OK) {
        if (ref) abort();
        return 0;
    }
    if (ao.window && (ao.window_left < 0 || ao.window_right < 0)) abort(); /* must refuse */
    if (!(isfinite(ao.scale))) abort();
    reach_accept(kind);
    int64_t no = (int64_t)Bt * H * Sq * Dv, nl = (int64_t)Bt * H * Sq;
    er_standard std;
    if (er_standard_parse(&std, "any_order", NULL) != ER_OK) abort();
    if (er_tensor_view(&O, ER_FP32, 4, (int64_t[]){Bt, H, Sq, Dv}, NULL, o) != ER_OK ||
        er_tensor_view(&L, ER_FP32, 3, (int64_t[]){Bt, H, Sq}, NULL, l) != ER_OK)
        abort();
    er_report rep;
    /* the exact O, correctly rounded, is a correct output */
    if (!special && er_ref_rounded(&O, ref) == ER_OK) {
        if (er_covers(&rep, ref, &O, &std) != ER_OK) abort();
        if (!er_report_all(&rep)) abort();
        er_report_clear(&rep);
    }
    /* bytes as outputs: the enclosures hold exactly what covers passes */
    for (int64_t i = 0; i < no; i++) { uint32_t b = (uint32_t)byte(&r) * 0x01000193u; memcpy(&o2[i], &b, 4); }
    for (int64_t i = 0; i < nl; i++) { uint32_t b = (uint32_t)byte(&r) * 0x01000193u; memcpy(&l[i], &b, 4); }
    er_tensor O2;
    if (er_tensor_view(&O2, ER_FP32, 4, (int64_t[]){Bt, H, Sq, Dv}, NULL, o2) != ER_OK) abort();
    const er_tensor *outs[2] = {&O2, &L};
    er_report reps[2];
    if (er_covers_outputs(reps, ref, outs, 2, &std) != ER_OK) abort();
    const float *vals[2] = {o2, l};
    enclosures_agree(ref, &std, reps, vals, (int64_t[]){no, nl}, 2);
    /* a window wider than every row masks nothing more than no window */
    er_attention_opts wide = ao;
    wide.window = 1;
    wide.window_left = (byte(&r) & 1) ? INT64_MAX : Sq + Sk;
    wide.window_right = (byte(&r) & 1) ? INT64_MAX : Sq + Sk;
    er_attention_opts none = ao;
    none.window = 0;
    er_ref *rw = NULL, *rn = NULL;
    if (er_attention(&rw, &Q, &K, &V, &wide) != ER_OK || er_attention(&rn, &Q, &K, &V, &none) != ER_OK) abort();
    for (int w = 0; w < 2; w++) {
        if (er_ref_enclosure(rw, w, &std, ER_FP32, lo0, hi0, f0) != ER_OK || er_ref_enclosure(rn, w, &std, ER_FP32, lo1, hi1, f1) != ER_OK)
            abort();
        if (!same_sets(w ? nl : no)) abort();
    }
    er_ref_free(rw);
    er_ref_free(rn);
    er_ref_free(ref);
    if ((fl >> 5) & 1) fuzz_fp8(&r, &Q, &K, &V, &ao, special, no, nl, (int64_t[]){Bt, H, Sq, Dv});
    return 0;
}
