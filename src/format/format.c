/* format.c: format descriptors, exact decoding and encoding of stored patterns.
 * The field layouts are those of IEEE 754 and the OCP 8-bit floating point specification
 * (docs/reference/formats.md). */
#include <math.h>
#include <string.h>
#include <strings.h>
#include "core/internal.h"
#include "format/format.h"

#define P2(e) (ldexp(1.0, (e)))

/* Built once at first use would need a lock; a constant table needs none. Values are exact powers of two
 * or sums of them, written as hexadecimal floating constants. */
static const er_fmt_info er_formats[ER_FORMAT_COUNT] = {
    [ER_FP64] = { ER_FP64, "fp64", 64, 11, 52, 1023, 53, -1022, 1023, 1, 0, 0x1.fffffffffffffp+1023, 0x1p-1022,
                  0x1p-1074, ER_OVERFLOW_IEEE, 64, 0, 0 },
    [ER_FP32] = { ER_FP32, "fp32", 32, 8, 23, 127, 24, -126, 127, 1, 0, 0x1.fffffep+127, 0x1p-126, 0x1p-149,
                  ER_OVERFLOW_IEEE, 32, 0, 0 },
    [ER_TF32] = { ER_TF32, "tf32", 32, 8, 10, 127, 11, -126, 127, 1, 0, 0x1.ffcp+127, 0x1p-126, 0x1p-136,
                  ER_OVERFLOW_IEEE, 32, 0, 0 },
    [ER_BF16] = { ER_BF16, "bf16", 16, 8, 7, 127, 8, -126, 127, 1, 0, 0x1.fep+127, 0x1p-126, 0x1p-133,
                  ER_OVERFLOW_IEEE, 16, 0, 0 },
    [ER_FP16] = { ER_FP16, "fp16", 16, 5, 10, 15, 11, -14, 15, 1, 0, 0x1.ffcp+15, 0x1p-14, 0x1p-24, ER_OVERFLOW_IEEE,
                  16, 0, 0 },
    [ER_FP8_E4M3FN] = { ER_FP8_E4M3FN, "fp8_e4m3fn", 8, 4, 3, 7, 4, -6, 8, 0, 1, 0x1.cp+8, 0x1p-6, 0x1p-9,
                        ER_OVERFLOW_SATURATE, 8, 0, 0 },
    [ER_FP8_E5M2] = { ER_FP8_E5M2, "fp8_e5m2", 8, 5, 2, 15, 3, -14, 15, 1, 0, 0x1.cp+15, 0x1p-14, 0x1p-16,
                      ER_OVERFLOW_IEEE, 8, 0, 0 },
    [ER_FP4_E2M1FN] = { ER_FP4_E2M1FN, "fp4_e2m1fn", 8, 2, 1, 1, 2, 0, 2, 0, 0, 0x1.8p+2, 0x1p+0, 0x1p-1,
                        ER_OVERFLOW_SATURATE, 4, 1, 0 },
    [ER_FP6_E2M3FN] = { ER_FP6_E2M3FN, "fp6_e2m3fn", 8, 2, 3, 1, 4, 0, 2, 0, 0, 0x1.ep+2, 0x1p+0, 0x1p-3,
                        ER_OVERFLOW_SATURATE, 6, 1, 0 },
    [ER_FP6_E3M2FN] = { ER_FP6_E3M2FN, "fp6_e3m2fn", 8, 3, 2, 3, 3, -2, 4, 0, 0, 0x1.cp+4, 0x1p-2, 0x1p-4,
                        ER_OVERFLOW_SATURATE, 6, 1, 0 },
    /* no subnormals: with p = 1 the least value 2^-127 is emin's, and 2^(emin - p + 1) too */
    [ER_FP8_E8M0FNU] = { ER_FP8_E8M0FNU, "fp8_e8m0fnu", 8, 8, 0, 127, 1, -127, 127, 0, 0, 0x1p+127, 0x1p-127,
                         0x1p-127, ER_OVERFLOW_NAN, 8, 0, 1 },
};

static const er_fmt_info er_one = { ER_FORMAT_INVALID,   "one", 8, 0, 0, 0, 0, 0, 0, 0, 0, 1.0, 1.0, 1.0,
                                    ER_OVERFLOW_SATURATE, 8, 0, 0 };
const er_fmt_info *er__fmt_one(void) { return &er_one; }

const er_fmt_info *er__fmt(er_format f) {
    if ((int)f <= 0 || (int)f >= ER_FORMAT_COUNT) return NULL;
    return &er_formats[f];
}

const char *er_format_name(er_format f) { const er_fmt_info *fi = er__fmt(f); return fi ? fi->name : NULL; }
int er_format_storage_bits(er_format f) { const er_fmt_info *fi = er__fmt(f); return fi ? fi->bits : 0; }
int er_format_value_bits(er_format f) { const er_fmt_info *fi = er__fmt(f); return fi ? fi->vbits : 0; }
int er_format_precision(er_format f) { const er_fmt_info *fi = er__fmt(f); return fi ? fi->p : 0; }
int er_format_emin(er_format f) { const er_fmt_info *fi = er__fmt(f); return fi ? fi->emin : 0; }
int er_format_emax(er_format f) { const er_fmt_info *fi = er__fmt(f); return fi ? fi->emax : 0; }
double er_format_max(er_format f) { const er_fmt_info *fi = er__fmt(f); return fi ? fi->max : NAN; }
double er_format_min_normal(er_format f) { const er_fmt_info *fi = er__fmt(f); return fi ? fi->min_normal : NAN; }
double er_format_min_subnormal(er_format f) { const er_fmt_info *fi = er__fmt(f); return fi ? fi->min_sub : NAN; }
double er_format_unit_roundoff(er_format f) { const er_fmt_info *fi = er__fmt(f); return fi ? P2(-fi->p) : NAN; }
int er_format_has_inf(er_format f) { const er_fmt_info *fi = er__fmt(f); return fi ? fi->has_inf : 0; }

static const struct { const char *name; er_format f; } er_format_names[] = {
    {"fp64", ER_FP64}, {"float64", ER_FP64}, {"double", ER_FP64},
    {"fp32", ER_FP32}, {"float32", ER_FP32}, {"float", ER_FP32},
    {"tf32", ER_TF32}, {"tensorfloat32", ER_TF32},
    {"bf16", ER_BF16}, {"bfloat16", ER_BF16},
    {"fp16", ER_FP16}, {"float16", ER_FP16}, {"half", ER_FP16},
    {"fp8_e4m3fn", ER_FP8_E4M3FN}, {"e4m3fn", ER_FP8_E4M3FN}, {"float8_e4m3fn", ER_FP8_E4M3FN}, {"e4m3", ER_FP8_E4M3FN},
    {"fp8_e5m2", ER_FP8_E5M2}, {"e5m2", ER_FP8_E5M2}, {"float8_e5m2", ER_FP8_E5M2},
    {"fp4_e2m1fn", ER_FP4_E2M1FN}, {"float4_e2m1fn", ER_FP4_E2M1FN}, {"e2m1", ER_FP4_E2M1FN},
    {"fp6_e2m3fn", ER_FP6_E2M3FN}, {"float6_e2m3fn", ER_FP6_E2M3FN}, {"e2m3", ER_FP6_E2M3FN},
    {"fp6_e3m2fn", ER_FP6_E3M2FN}, {"float6_e3m2fn", ER_FP6_E3M2FN}, {"e3m2", ER_FP6_E3M2FN},
    {"fp8_e8m0fnu", ER_FP8_E8M0FNU}, {"float8_e8m0fnu", ER_FP8_E8M0FNU}, {"e8m0", ER_FP8_E8M0FNU},
};

er_status er_format_from_name(er_format *out, const char *name) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(name, "name");
    const char *s = name;
    if (strncmp(s, "torch.", 6) == 0) s += 6;
    for (size_t i = 0; i < sizeof er_format_names / sizeof er_format_names[0]; i++)
        if (strcasecmp(s, er_format_names[i].name) == 0) { *out = er_format_names[i].f; return ER_OK; }
    return er__fail(ER_ERR_FORMAT,
                    "unknown format name '%s' (known: fp64, fp32, tf32, bf16, fp16, fp8_e4m3fn, fp8_e5m2, "
                    "fp4_e2m1fn, fp6_e2m3fn, fp6_e3m2fn, fp8_e8m0fnu)",
                    name);
}

/* The fraction field of tf32 sits in the top 10 of binary32's 23 fraction bits. */
static int er_frac_shift(const er_fmt_info *fi) { return fi == &er_formats[ER_TF32] ? 13 : 0; }

double er__decode(const er_fmt_info *fi, uint64_t bits) {
    if (fi->e8m0) {
        unsigned E = (unsigned)(bits & 0xFF);
        return E == 0xFF ? NAN : ldexp(1.0, (int)E - 127);
    }
    int shift = er_frac_shift(fi);
    int mfield = fi->mbits + shift;
    uint64_t sign = (bits >> (fi->vbits - 1)) & 1;
    uint64_t E = (bits >> mfield) & ((1u << fi->ebits) - 1);
    uint64_t M = (bits >> shift) & ((UINT64_C(1) << fi->mbits) - 1);
    uint64_t Eall = (1u << fi->ebits) - 1;
    double v;
    if (fi->e4m3fn && E == Eall && M == (UINT64_C(1) << fi->mbits) - 1) return NAN;
    if (!fi->e4m3fn && !fi->no_nan && E == Eall) {
        if (M != 0) return NAN;
        v = INFINITY;
    } else if (E == 0) {
        v = (double)M * fi->min_sub;
    } else {
        /* a normal value of every format is a normal double: its fields placed directly */
        v = er__from_bits(((uint64_t)((int)E - fi->bias + 1023) << 52) | (M << (52 - fi->mbits)));
    }
    return sign ? -v : v;
}

er_status er_decode(double *out, er_format f, uint64_t bits) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    const er_fmt_info *fi = er__fmt(f);
    if (!fi) return er__fail(ER_ERR_FORMAT, "invalid format value %d", (int)f);
    if (fi->vbits < 64 && (bits >> fi->vbits) != 0)
        return er__fail(ER_ERR_INVALID, "pattern 0x%llx has bits above the %d value bits of %s",
                        (unsigned long long)bits, fi->vbits, fi->name);
    *out = er__decode(fi, bits);
    return ER_OK;
}

/* Encodes v, which must already be a value of the format (or +-inf where it has one, or NaN). */
static uint64_t er_encode_value(const er_fmt_info *fi, double v) {
    int shift = er_frac_shift(fi);
    int mfield = fi->mbits + shift;
    uint64_t Eall = (1u << fi->ebits) - 1;
    if (fi->e8m0) { /* a value of e8m0 is 2^k, -127 <= k <= 127 */
        if (isnan(v)) return 0xFF;
        int ex;
        frexp(v, &ex);
        return (uint64_t)(ex - 1 + 127);
    }
    uint64_t sign = (uint64_t)(signbit(v) ? 1 : 0) << (fi->vbits - 1);
    if (isnan(v)) {
        if (fi->e4m3fn) return 0x7F;
        return (Eall << mfield) | (UINT64_C(1) << (mfield - 1));
    }
    if (isinf(v)) return sign | (Eall << mfield);
    double a = fabs(v);
    if (a == 0) return sign;
    uint64_t E, M;
    if (a < fi->min_normal) {
        E = 0;
        M = (uint64_t)(a / fi->min_sub);
    } else {
        int ex;
        frexp(a, &ex);
        int e = ex - 1;
        E = (uint64_t)(e + fi->bias);
        M = (uint64_t)ldexp(a, fi->mbits - e) - (UINT64_C(1) << fi->mbits);
    }
    return sign | (E << mfield) | (M << shift);
}

er_overflow er__overflow_rule(const er_fmt_info *fi, er_overflow ov) {
    return ov == ER_OVERFLOW_DEFAULT ? fi->ov_default : ov;
}

static er_status er_check_round_args(const er_fmt_info *fi, er_format f, er_round mode, er_overflow ov) {
    if (!fi) return er__fail(ER_ERR_FORMAT, "invalid format value %d", (int)f);
    if ((int)mode < 0 || (int)mode > 4) return er__fail(ER_ERR_INVALID, "invalid rounding mode %d", (int)mode);
    if ((int)ov < 0 || (int)ov > 3) return er__fail(ER_ERR_INVALID, "invalid overflow rule %d", (int)ov);
    if (ov == ER_OVERFLOW_IEEE && !fi->has_inf)
        return er__fail(ER_ERR_INVALID, "%s has no infinity: its overflow rule is %s, not ieee", fi->name,
                        fi->no_nan ? "saturate" : "saturate or nan");
    if (ov == ER_OVERFLOW_NAN && fi->no_nan)
        return er__fail(ER_ERR_INVALID, "%s has no NaN: its overflow rule is saturate, not nan", fi->name);
    return ER_OK;
}

er_status er_round_double(double *out, er_format f, double x, er_round mode, er_overflow ov) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    const er_fmt_info *fi = er__fmt(f);
    ER_RETURN_IF_ERROR(er_check_round_args(fi, f, mode, ov));
    *out = er__round_double(fi, x, mode, ov);
    return ER_OK;
}

er_status er_encode(uint64_t *bits, er_format f, double x, er_round mode, er_overflow ov) {
    er__ok();
    ER_CHECK_NULL(bits, "bits");
    const er_fmt_info *fi = er__fmt(f);
    ER_RETURN_IF_ERROR(er_check_round_args(fi, f, mode, ov));
    double v = er__round_double(fi, x, mode, ov);
    if (isnan(v) && fi->no_nan) return er__fail(ER_ERR_INVALID, "%s has no NaN to encode %g as", fi->name, x);
    *bits = er_encode_value(fi, v);
    return ER_OK;
}

double er_format_ulp(er_format f, double x) {
    const er_fmt_info *fi = er__fmt(f);
    if (!fi || !isfinite(x)) return NAN;
    double a = fabs(x);
    if (a < fi->min_normal) return fi->min_sub;
    int ex;
    frexp(a, &ex);
    return ldexp(1.0, ex - 1 - fi->p + 1);
}

int er__products_exact(const er_fmt_info *fa, const er_fmt_info *fb, const er_fmt_info *F) {
    /* Lemma 3: a*b = Ma Mb 2^(ea+eb) with Ma Mb < 2^(pa+pb) and 2^(ea+eb) >= eta_a eta_b. It is a value of F
     * when pa + pb <= pF, eta_a eta_b is a multiple of eta_F, and |a b| <= max_F. */
    if (fa->p + fb->p > F->p) return 0;
    if (fa->min_sub * fb->min_sub < F->min_sub) return 0;
    if (fa->max * fb->max > F->max) return 0; /* products of maxima are exact in double: no rounding here */
    return 1;
}
