/* fuzz_ops.c: any bytes as an op call: the op, formats (valid or not), ranks, shapes and strides (zero, negative,
 * overflowing), scalars (eps, scales: NaN, inf, negative), a standard, the operand and output contents (every bit
 * pattern: NaN, inf, subnormals; or an input family, er_fill, which writes nothing when it refuses). What the library accepts it must then cover, emulate (where fixed), give exact
 * and rounded values for, without crashing, leaking or reading outside the views; what it refuses it refuses with a
 * status. Views are built inside one buffer, so a view the library accepts is memory the caller owns; a view whose
 * extent overflows must be refused. Sizes stay small so that each input runs in microseconds. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include <exactref/exactref.h>
#include <exactref/mpfr.h>
#include "harness.h"

/* The kinds of call counted (harness.h): the ops by their number in the input, then the chain and the quantised
 * reference built over an accepted op. */
enum { NOPS = 18, KIND_CHAIN = NOPS, KIND_QUANTIZE_REF = NOPS + 1, KIND_ROWWISE = NOPS + 2 };
static const char *const kinds[] = {"matmul",    "scaled_matmul", "sum",       "mean",
                                    "max",       "softmax",       "log_softmax", "rmsnorm",
                                    "layernorm", "tensor",        "quantize",  "attention",
                                    "softmax_backward", "log_softmax_backward", "layer_norm_backward",
                                    "rmsnorm_backward", "cross_entropy", "attention_backward", "chain",
                                    "quantize_ref", "scaled_matmul_rowwise"};

REACH_TARGET(kinds)


#define SLOTS 4096
static uint64_t pool[3][SLOTS]; /* operand A (or x), operand B (or weight), bias; 8 bytes a slot */

static const char *const standards[][2] = {
    {"any_order", NULL}, {"any_order", "compute=fp16"}, {"any_order", "compute=bf16 rounding=faithful"},
    {"any_order", "compute=fp64"}, {"any_order", "depth=3"}, {"any_order", "compute=tf32 tf32=nearest"},
    {"any_order", "compute=tf32x3"}, {"sequential", "fma=never"}, {"sequential", "fma=always init=first"},
    {"blocked:4", "fma=never"}, {"blocked:3", "inner=any carry=fused rounding=faithful"}, {"split:2", "partial=fp16 fma=always"},
    {"pairwise", NULL}, {"mma:sm90", NULL}, {"mma:sm90 outer=any compute=tf32 tf32=rne", NULL}, {"mma:sm80", "outer=any promote=2"},
    {"any_order", "math=triton"}, {"any_order", "math=fast subnormals=flush"}, {"any_order", "exp_ulps=fast div_ulps=2"},
    {"any_order", "online=yes"}, {"any_order", "max=optional"}, {"any_order", "variance=welford mean=reciprocal"},
    {"any_order", "rsqrt_ulps=3 log_ulps=2"}, {"any_order", "overflow=saturate"}, {"any_order", "overflow=nan"},
    {"triton:8", "warps=1"}, {"triton:4", "vec=2 fma=never"}, {"any_order", "variance=either depth=4 combine_depth=2"},
};

/* A view of rank nd over pool[which] with shape and strides from the input; 0 when it cannot be placed (skipped),
 * -1 when its extent overflows (the library must refuse it). */
static int make_view(rd *r, er_tensor *t, int which, er_format f, int nd, int64_t *shape_out) {
    int64_t shape[ER_MAX_DIMS], strides[ER_MAX_DIMS];
    int contiguous = byte(r) & 1, huge = 0;
    for (int i = 0; i < nd; i++) shape[i] = byte(r) % 6;
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        if (contiguous) { strides[i] = s; s *= shape[i] ? shape[i] : 1; continue; }
        unsigned b = byte(r);
        strides[i] = b == 0x7f ? INT64_MAX / 3 : b == 0x80 ? INT64_MIN / 3 : (int64_t)(int8_t)b % 9;
        huge |= b == 0x7f || b == 0x80;
    }
    /* the extent: the least and greatest element offsets (nothing when a dimension is 0) */
    int empty = 0;
    for (int i = 0; i < nd; i++) empty |= shape[i] == 0;
    if (huge && !empty) {
        er_status st = er_tensor_view(t, f, nd, shape, strides, pool[which]);
        (void)st; /* refused, or accepted as a view the library must not read blindly: not used */
        return -1;
    }
    int64_t lo = 0, hi = 0;
    for (int i = 0; i < nd && !empty; i++) {
        int64_t d = (shape[i] - 1) * strides[i];
        if (d < 0) lo += d; else hi += d;
    }
    int64_t base = SLOTS / 2;
    if (base + lo < 0 || base + hi >= SLOTS) return 0; /* elements of up to 8 bytes: offsets in slots of 8 bytes */
    char *p = (char *)pool[which] + base * 8;
    if (er_tensor_view(t, f, nd, shape, strides, p) != ER_OK) return 0;
    for (int i = 0; i < nd; i++) shape_out[i] = shape[i];
    return 1;
}

/* A format from a byte: b % 9 (0 and 8 invalid) as inputs had it before the MX formats; 8 spread over the MX formats
 * and an invalid 12, so that the stored inputs keep their formats. */
static er_format fmt_of(unsigned b) { return (er_format)(b % 9 == 8 ? 8 + (b / 9) % 5 : b % 9); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rd r = {data, size};
    reach_input();
    /* the op: the first byte modulo 17 below 238 (the numbering inputs had before attention_backward), 17 above */
    unsigned ob = byte(&r);
    int op = ob >= 238 ? 17 : (int)(ob % 17);
    er_format fa = fmt_of(byte(&r)), fb = fmt_of(byte(&r)), fo = fmt_of(byte(&r));
    int nda = (int)(byte(&r) % 5), ndb = (int)(byte(&r) % 5);
    unsigned sidx = byte(&r) % (sizeof standards / sizeof standards[0]);
    static const double scalars[] = {1e-5, 0.0, -1.0, NAN, INFINITY, 0.5, -2.0, 1e-40};
    double eps = scalars[byte(&r) % 8], sa = scalars[byte(&r) % 8], sb = scalars[byte(&r) % 8];
    int dim = (int)(byte(&r) % 7) - 3;
    /* operand contents: the rest of the input, repeated */
    for (int w = 0; w < 3; w++)
        for (size_t i = 0; i < SLOTS; i++) pool[w][i] = size ? (uint64_t)data[(i * 7 + (size_t)w * 13) % size] * UINT64_C(0x0101010101010101) ^ i : 0;
    er_tensor A, B, C;
    int64_t sha[ER_MAX_DIMS], shb[ER_MAX_DIMS];
    int va = make_view(&r, &A, 0, fa, nda, sha), vb = make_view(&r, &B, 1, fb, ndb, shb);
    if ((op == 11 || op == 17) && va > 0 && nda >= 2) {
        /* attention: k = v shaped as q but for the number of keys (and the heads, for GQA), so that shapes that fit
         * are common; contiguous in pool[1] */
        int64_t shk[ER_MAX_DIMS];
        for (int i = 0; i < nda; i++) shk[i] = sha[i];
        shk[nda - 2] = byte(&r) % 6;
        if (nda >= 3 && (byte(&r) & 1) && sha[nda - 3] % 2 == 0) shk[nda - 3] = sha[nda - 3] / 2;
        vb = er_tensor_view(&B, fb, nda, shk, NULL, pool[1]) == ER_OK;
    }
    if (op == 16 && va > 0 && nda > 2 && (byte(&r) & 3)) {
        /* cross_entropy takes one or two dimensions: most logits of more are viewed as their first and last */
        int64_t sh2[2] = {sha[0], sha[nda - 1]};
        va = er_tensor_view(&A, fa, 2, sh2, NULL, pool[0]) == ER_OK;
        nda = 2;
        sha[1] = sh2[1];
    }
    (void)make_view(&r, &C, 2, fb, 1, shb);
    if (va <= 0) return 0;
    unsigned fill = byte(&r);
    if (fill < 64) { /* A's contents from a family (12: an unknown one); a refusal writes nothing */
        static uint64_t before[SLOTS];
        memcpy(before, pool[0], sizeof before);
        er_status fs = er_fill(&A, (er_family)(fill % 13), (uint64_t)byte(&r) * 0x9e3779b9u);
        if (fs != ER_OK && memcmp(before, pool[0], sizeof before)) abort();
        if (fs == ER_OK && fill % 13 >= ER_FAMILY_COUNT) abort();
    }
    er_ref *ref = NULL;
    er_status st;
    reach_call(op);
    switch (op) {
    case 0: st = vb > 0 ? er_matmul(&ref, &A, &B) : ER_ERR_INVALID; break;
    case 1: /* with eps NaN (one input in 8), rowwise scales from the third view (refused unless it holds M = N
             * finite fp32 values) */
        st = vb <= 0      ? ER_ERR_INVALID
           : isnan(eps) ? er_scaled_matmul_rowwise(&ref, &A, &B, &C, &C)
                        : er_scaled_matmul(&ref, &A, &B, sa, sb);
        if (isnan(eps) && vb > 0) reach_call(KIND_ROWWISE);
        if (isnan(eps) && st == ER_OK) reach_accept(KIND_ROWWISE);
        break;
    case 2: st = er_sum(&ref, &A, dim); break;
    case 3: st = er_mean(&ref, &A, dim); break;
    case 4: st = er_max(&ref, &A, dim); break;
    case 5: st = er_softmax(&ref, &A, dim); break;
    case 6: st = er_log_softmax(&ref, &A, dim); break;
    case 7: st = er_rmsnorm(&ref, &A, vb > 0 ? &B : NULL, eps); break;
    case 9: st = er_tensor_ref(&ref, &A); break;
    case 12: /* dy = A or B (another shape: refused), y = A */
        st = er_softmax_backward(&ref, vb > 0 && (byte(&r) & 1) ? &B : &A, &A, dim);
        break;
    case 13: st = er_log_softmax_backward(&ref, vb > 0 && (byte(&r) & 1) ? &B : &A, &A, dim); break;
    case 10: /* granularity 3, recipe 8 and blocks below 1 are refused (3 to 6 are MX's, 7 NVFP4's) */
        st = er_quantize(&ref, &A, fo, (er_granularity)((dim + 3) % 4), (int64_t)dim + 2, (er_scale_recipe)(byte(&r) % 9));
        break;
    case 11: { /* attention: q = A, k = v = B; the mask's flags and sizes from the input (values other than 0 and 1,
                * negative windows and scales that are not finite are refused) */
        unsigned fl = byte(&r);
        unsigned wb = byte(&r); /* 0x7f: the widest window, INT64_MAX keys */
        er_attention_opts ao = {sa, (int)(fl & 3) - 1 + 1, (int)((fl >> 2) & 1), (int)((fl >> 3) & 3), dim,
                                wb == 0x7f ? INT64_MAX : (int64_t)(int8_t)wb,
                                (int)((fl >> 5) & 1)};
        st = vb > 0 ? er_attention(&ref, &A, &B, &B, (fl >> 6) ? &ao : NULL) : ER_ERR_INVALID;
        break;
    }
    case 14: case 15: { /* dy = A or B (another shape: refused), x = A, mean and rstd one per row over pool[2] (or a
                         * shape from the input), weight B or none */
        int k = op == 15 || nda == 0 ? 1 : 1 + (dim + 3) % nda, lead = nda - k > 0 ? nda - k : 0;
        int64_t one = 1, sh[ER_MAX_DIMS];
        for (int i = 0; i < lead; i++) sh[i] = sha[i];
        if (byte(&r) % 8 == 0 && lead > 0) sh[0] = byte(&r) % 6; /* another number of rows: refused unless equal */
        static uint64_t stats[2][256];
        for (int w = 0; w < 2; w++) memcpy(stats[w], pool[2] + 128 * w, sizeof stats[w]);
        er_tensor M, Rs;
        int ok = er_tensor_view(&M, (er_format)(byte(&r) % 9), lead ? lead : 1, lead ? sh : &one, NULL, stats[0]) ==
                     ER_OK &&
                 er_tensor_view(&Rs, ER_FP32, lead ? lead : 1, lead ? sh : &one, NULL, stats[1]) == ER_OK;
        const er_tensor *dy = vb > 0 && (byte(&r) & 1) ? &B : &A, *w = vb > 0 && (byte(&r) & 1) ? &B : NULL;
        if (!ok) st = ER_ERR_INVALID;
        else if (op == 14) st = er_layer_norm_backward(&ref, dy, &A, k, byte(&r) % 16 ? &M : NULL, &Rs, w);
        else st = er_rmsnorm_backward(&ref, dy, &A, byte(&r) % 4 ? &Rs : NULL, w, eps);
        break;
    }
    case 16: { /* logits A, a target per row (or one more or fewer: refused) from the input, one in sixteen -1 or C
                * (out of range unless it is ignore_index), reduction 0..2 or 3 (refused), eps in [0, 1] or not */
        static int64_t tg[16];
        int64_t rows = nda == 2 ? sha[0] : 1, ncls = nda >= 1 ? sha[nda - 1] : 0;
        unsigned nb = byte(&r);
        int64_t nt = rows + (nb % 16 == 0) - (nb % 16 == 1 && rows > 0);
        int64_t ign = byte(&r) % 3 == 0 ? -1 : -100;
        for (int64_t i = 0; i < nt && i < 16; i++) {
            unsigned b = byte(&r);
            tg[i] = b % 16 == 0 ? (b & 16 ? -1 : ncls) : ncls ? (int64_t)(b / 16 % (unsigned)ncls) : 0;
        }
        static const double smooth[] = {0.0, 0.1, 1.0, 0.5, 1e-40, NAN, -1.0, 2.0};
        unsigned rb = byte(&r);
        st = nt <= 16 ? er_cross_entropy(&ref, &A, tg, nt, (int)(rb % 8 < 7 ? rb % 3 : 3), ign, smooth[rb / 8 % 8])
                      : ER_ERR_INVALID;
        break;
    }
    case 17: { /* attention_backward: q = A, k = v = B as for attention; o = A or a view of A's shape over pool[2];
                * dout the other; lse one per row over pool[2]'s tail (fp32 or another format), of another shape
                * (refused), or none */
        unsigned fl = byte(&r);
        er_attention_opts ao = {sa, (int)(fl & 1), (int)((fl >> 1) & 1), 0, 0, 0, (int)((fl >> 2) & 1)};
        er_tensor O2, L;
        int64_t shl[ER_MAX_DIMS];
        for (int i = 0; i + 1 < nda; i++) shl[i] = sha[i];
        if (nda >= 2 && (fl >> 3) % 8 == 0) shl[nda - 2] += 1;
        static uint64_t lse_slots[256];
        memcpy(lse_slots, pool[2] + SLOTS - 256, sizeof lse_slots);
        int ok = vb > 0 && nda >= 2 && er_tensor_view(&O2, fa, nda, sha, NULL, pool[2]) == ER_OK &&
                 er_tensor_view(&L, (fl >> 6) ? ER_FP32 : (er_format)(byte(&r) % 9), nda - 1, shl, NULL,
                                lse_slots) == ER_OK;
        const er_tensor *o = (fl >> 4) & 1 ? &A : &O2, *dout = o == &A ? &O2 : &A;
        st = ok ? er_attention_backward(&ref, &A, &B, &B, o, (fl >> 5) & 1 ? &L : NULL, dout, &ao) : ER_ERR_INVALID;
        break;
    }
    default: st = er_layernorm(&ref, &A, dim < 0 ? -dim : dim, vb > 0 ? &B : NULL, NULL, eps); break;
    }
    if (st != ER_OK) { if (ref) abort(); return 0; }
    reach_accept(op);
    int nd;
    int64_t shape[ER_MAX_DIMS], n = 1;
    if (er_ref_shape(ref, &nd, shape) != ER_OK) abort();
    for (int i = 0; i < nd; i++) n *= shape[i];
    if (n <= 1024) {
        static uint64_t out[1024], emu[1024];
        for (int64_t i = 0; i < n; i++) out[i] = pool[2][i];
        er_tensor O, E, R;
        if (er_tensor_view(&O, fo, nd, shape, NULL, out) == ER_OK) {
            er_standard s;
            if (er_standard_parse(&s, standards[sidx][0], standards[sidx][1]) == ER_OK) {
                er_report rep[3];
                int nout = er_ref_num_outputs(ref);
                if (nout == 3 || (nout == 2 && op != 11)) {
                    /* the other outputs at the shapes the library states (layernorm's mean and rstd, quantize's amax
                     * and scale, the backward passes' dweight and dbias), contents from the pools, each checked or
                     * not */
                    static uint64_t more[2][1024];
                    er_tensor M[2];
                    const er_tensor *outs[3] = {&O, NULL, NULL};
                    for (int o = 1; o < nout; o++) {
                        int ndo;
                        int64_t sho[ER_MAX_DIMS], cnt = 1;
                        if (er_ref_output_shape(ref, o, &ndo, sho) != ER_OK) abort();
                        for (int i = 0; i < ndo; i++) cnt *= sho[i];
                        memcpy(more[o - 1], pool[o - 1], sizeof more[o - 1]);
                        if (cnt <= 1024 && byte(&r) % 4 &&
                            er_tensor_view(&M[o - 1], ER_FP32, ndo, sho, NULL, more[o - 1]) == ER_OK)
                            outs[o] = &M[o - 1];
                    }
                    if (nobug(er_covers_outputs(rep, ref, outs, nout, &s)) == ER_OK) {
                        for (int o = 0; o < nout; o++) {
                            if (rep[o].classes == NULL && rep[o].n > 0) abort();
                            er_report_clear(&rep[o]);
                        }
                    } else {
                        for (int o = 0; o < nout; o++) if (er_report_all(&rep[o])) abort(); /* a refusal never passes */
                    }
                } else if (nobug(er_covers(&rep[0], ref, &O, &s)) == ER_OK) {
                    int64_t tot = 0;
                    for (int c = 0; c < ER_CLASS_COUNT; c++) tot += rep[0].counts[c];
                    if (tot != n) abort();
                    er_report_clear(&rep[0]);
                } else if (er_report_all(&rep[0])) {
                    abort();
                }
                if (er_tensor_view(&E, fo, nd, shape, NULL, emu) == ER_OK && nobug(er_emulate(ref, &E, &s)) == ER_OK) {
                    /* the emulated output lies in the set covers gives under the same standard */
                    if (nobug(er_covers(&rep[0], ref, &E, &s)) != ER_OK || !er_report_all(&rep[0])) abort();
                    er_report_clear(&rep[0]);
                }
            }
        }
        /* a chain over the reductions that take one: stages from the input (every kind and one past them, scalars
         * valid or not, a broadcast tensor, a cast to any format); what is accepted is covered, its enclosure agrees
         * with covers */
        er_ref *chain = NULL;
        if (op <= 2 || op == 9) {
            er_stage stg[4];
            int ns = (int)(byte(&r) % 5);
            int64_t zero[ER_MAX_DIMS] = {0};
            er_tensor T;
            int tv = er_tensor_view(&T, fb, nd, shape, zero, pool[2]) == ER_OK;
            for (int k = 0; k < ns; k++) {
                unsigned kind = byte(&r) % 15; /* 14: one past the last kind, refused */
                stg[k] = (er_stage){(er_stage_kind)(kind + 1), NULL, scalars[byte(&r) % 8], (er_format)(byte(&r) % 10), NULL};
                unsigned how = byte(&r) % 4; /* add and mul: a broadcast tensor, the reference itself, or both (refused) */
                if (kind <= 1 && tv && how % 2) stg[k].t = &T;
                if (kind <= 1 && how >= 2) stg[k].ref = ref;
            }
            reach_call(KIND_CHAIN);
            if (er_chain(&chain, ref, stg, ns) != ER_OK) {
                if (chain) abort();
            } else {
                reach_accept(KIND_CHAIN);
            }
        }
        /* the reference (or the chain) quantised, its three outputs checked together: a refusal never passes */
        if ((op <= 2 || op == 9) && n <= 1024) {
            er_ref *qr = NULL;
            const er_ref *qbase = chain && byte(&r) % 2 ? chain : ref;
            reach_call(KIND_QUANTIZE_REF);
            /* NVFP4 takes fp4 blocks of 16 (anything else is refused at once): drawn as such, so its sets are reached */
            er_scale_recipe qrc = (er_scale_recipe)(byte(&r) % 8);
            er_format qfo = qrc == ER_RECIPE_NVFP4 ? ER_FP4_E2M1FN : fo;
            er_granularity qgr = qrc == ER_RECIPE_NVFP4 ? ER_GRAN_BLOCK : (er_granularity)(byte(&r) % 4);
            int64_t qbl = qrc == ER_RECIPE_NVFP4 ? 16 : (int64_t)(byte(&r) % 5);
            if (er_quantize_ref(&qr, qbase, qfo, qgr, qbl, qrc) == ER_OK) {
                reach_accept(KIND_QUANTIZE_REF);
                static uint64_t qo[1024], ao[1024], so[1024];
                er_standard sq;
                er_tensor Q, Am, Sc;
                int64_t one = 1;
                memcpy(qo, pool[2], sizeof qo);
                memcpy(ao, pool[1], sizeof ao);
                memcpy(so, pool[0], sizeof so);
                if (er_standard_parse(&sq, standards[sidx][0], standards[sidx][1]) == ER_OK &&
                    er_tensor_view(&Q, qfo, nd, shape, NULL, qo) == ER_OK && er_tensor_view(&Am, ER_FP32, 1, &one, NULL, ao) == ER_OK &&
                    er_tensor_view(&Sc, ER_FP32, 1, &one, NULL, so) == ER_OK) {
                    const er_tensor *outs[3] = {&Q, byte(&r) % 2 ? &Am : NULL, byte(&r) % 2 ? &Sc : NULL};
                    er_report rq[3];
                    if (nobug(er_covers_outputs(rq, qr, outs, 3, &sq)) == ER_OK) {
                        int64_t tot = 0;
                        for (int k = 0; k < ER_CLASS_COUNT; k++) tot += rq[0].counts[k];
                        if (tot != n) abort();
                    } else {
                        for (int o = 0; o < 3; o++) if (er_report_all(&rq[o])) abort();
                    }
                    for (int o = 0; o < 3; o++) er_report_clear(&rq[o]);
                }
                er_ref_free(qr);
            } else if (qr) {
                abort();
            }
        }
        er_ref *encl_refs[2] = {ref, chain};
        for (int c = 0; c < 2 && n <= 1024; c++) {
            const er_ref *q = encl_refs[c];
            er_standard sq;
            er_tensor Oq;
            if (!q || er_ref_num_outputs(q) != 1 || er_standard_parse(&sq, standards[sidx][0], standards[sidx][1]) != ER_OK ||
                er_tensor_view(&Oq, fo, nd, shape, NULL, out) != ER_OK)
                continue;
            static double lo[1024], hi[1024];
            static uint8_t fl[1024];
            er_report rep;
            int enc = nobug(er_ref_enclosure(q, 0, &sq, fo, lo, hi, fl)) == ER_OK;
            if (nobug(er_covers(&rep, q, &Oq, &sq)) != ER_OK) { if (er_report_all(&rep)) abort(); continue; }
            int64_t tot = 0;
            for (int k = 0; k < ER_CLASS_COUNT; k++) tot += rep.counts[k];
            if (tot != n) abort();
            for (int64_t i = 0; enc && i < n; i++) {
                double y;
                if (er_decode(&y, fo, er_format_storage_bits(fo) == 64 ? out[i] : ((er_format_storage_bits(fo) == 32) ? ((uint32_t *)out)[i]
                              : er_format_storage_bits(fo) == 16 ? ((uint16_t *)out)[i]
                              : ((uint8_t *)out)[i] & ((1u << er_format_value_bits(fo)) - 1))) != ER_OK) /* fp4, fp6: low bits */
                    abort();
                int in = isnan(y) ? (fl[i] & ER_ENCLOSURE_NAN) != 0
                       : (fl[i] & ER_ENCLOSURE_NAN_ONLY) ? 0
                       : isinf(y) ? (fl[i] & (y > 0 ? ER_ENCLOSURE_PINF : ER_ENCLOSURE_NINF)) != 0 : y >= lo[i] && y <= hi[i];
                if (in != er_class_passes((er_class)rep.classes[i])) abort(); /* the enclosure is the set covers uses */
            }
            er_report_clear(&rep);
        }
        er_ref_free(chain);
        static double rd64[1024];
        if (er_tensor_view(&R, ER_FP64, nd, shape, NULL, rd64) == ER_OK) (void)nobug(er_ref_rounded(&R, ref));
        int64_t idx[ER_MAX_DIMS] = {0};
        double e, rr;
        if (n > 0) (void)nobug(er_ref_exact(ref, idx, fo, &e, &rr));
        /* differential: the exact value from the accumulator's summary against MPFR's sum of the products, for the
         * first and the last element of a matmul or a sum */
        for (int w = 0; (op == 0 || op == 2) && n > 0 && w < 2; w++) {
            int64_t rem = w ? n - 1 : 0;
            for (int i = nd - 1; i >= 0; i--) { idx[i] = rem % shape[i]; rem /= shape[i]; }
            double d64;
            mpfr_t x;
            mpfr_init2(x, 2);
            if (nobug(er_ref_exact(ref, idx, ER_FP64, NULL, &d64)) == ER_OK && er_ref_exact_mpfr(x, ref, idx) == ER_OK) {
                double m = mpfr_get_d(x, MPFR_RNDN); /* x is exact: this is its correct rounding */
                if (!(m == d64 || (isnan(m) && isnan(d64)))) abort();
            }
            mpfr_clear(x);
        }
    }
    er_ref_free(ref);
    return 0;
}
