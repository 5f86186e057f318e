/* exactref/format.h: number formats: descriptors, exact decoding, correctly rounded conversion, encoding.
 *
 * Every value of every supported format is exactly representable as a C double, so decoded values are
 * doubles. Conversions are correctly rounded in the four IEEE directions, with gradual underflow, and
 * apply the format's overflow rule. See docs/reference/formats.md. */
#ifndef EXACTREF_FORMAT_H
#define EXACTREF_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <exactref/export.h>
#include <exactref/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum er_format {
    ER_FORMAT_INVALID = 0,
    ER_FP64 = 1,         /* IEEE binary64 */
    ER_FP32 = 2,         /* IEEE binary32 */
    ER_TF32 = 3,         /* 1/8/10, stored in a 32-bit binary32 container (low 13 bits ignored on decode) */
    ER_BF16 = 4,         /* bfloat16, 1/8/7 */
    ER_FP16 = 5,         /* IEEE binary16 */
    ER_FP8_E4M3FN = 6,   /* OCP fp8 E4M3 "fn": no infinity, NaN only S.1111.111, max 448 */
    ER_FP8_E5M2 = 7,     /* OCP fp8 E5M2, IEEE-like with infinities */
    /* The OCP Microscaling (MX v1.0) element and scale formats. Each element takes one byte, its pattern in the low
     * bits (ml_dtypes' layout); a load ignores the bits above them. */
    ER_FP4_E2M1FN = 8,   /* 1/2/1, bias 1: 0, 0.5, 1, 1.5, 2, 3, 4, 6; no infinity, no NaN */
    ER_FP6_E2M3FN = 9,   /* 1/2/3, bias 1, max 7.5; no infinity, no NaN */
    ER_FP6_E3M2FN = 10,  /* 1/3/2, bias 3, max 28; no infinity, no NaN */
    ER_FP8_E8M0FNU = 11  /* the MX scale: 2^(E - 127) for E = 0..254, NaN = 0xFF; no sign, no zero, no infinity */
} er_format;
#define ER_FORMAT_COUNT 12

typedef enum er_round {
    ER_ROUND_NEAREST = 0, /* to nearest, ties to even */
    ER_ROUND_ZERO = 1,    /* toward zero */
    ER_ROUND_UP = 2,      /* toward +infinity */
    ER_ROUND_DOWN = 3,    /* toward -infinity */
    ER_ROUND_NEAREST_AWAY = 4 /* to nearest, ties away from zero (PTX cvt.rna) */
} er_round;

/* What a conversion does with a value beyond the format's largest finite number. */
typedef enum er_overflow {
    ER_OVERFLOW_DEFAULT = 0, /* the format's own rule: IEEE formats follow IEEE 754, e4m3fn saturates */
    ER_OVERFLOW_IEEE = 1,    /* IEEE 754: infinity, or the largest finite number where the rounding direction says so */
    ER_OVERFLOW_SATURATE = 2, /* clamp to the largest finite number (PTX cvt .satfinite); NaN stays NaN */
    ER_OVERFLOW_NAN = 3       /* NaN (PyTorch's CPU cast to float8_e4m3fn) */
} er_overflow;

/* Descriptor getters. Each returns 0 (or NULL, or NaN) for an invalid format. */
ER_API const char *er_format_name(er_format f);        /* "fp16", "bf16", "fp8_e4m3fn", ... */
ER_API int er_format_storage_bits(er_format f);       /* 64, 32, 32 (tf32), 16, 16, 8, 8; 8 for the MX formats */
ER_API int er_format_value_bits(er_format f);         /* the pattern's bits: storage bits, but 4 (fp4), 6 (fp6) */
ER_API int er_format_precision(er_format f);          /* significand bits including the implicit one */
ER_API int er_format_emin(er_format f);               /* exponent of the smallest normal number */
ER_API int er_format_emax(er_format f);               /* exponent of the largest finite number */
ER_API double er_format_max(er_format f);             /* largest finite value */
ER_API double er_format_min_normal(er_format f);
ER_API double er_format_min_subnormal(er_format f);
ER_API double er_format_unit_roundoff(er_format f);   /* 2^-precision */
ER_API int er_format_has_inf(er_format f);
/* Parses "fp16", "float16", "half", "bf16", "bfloat16", "fp32", "float32", "float", "tf32", "fp64",
 * "float64", "double", "fp8_e4m3fn", "e4m3fn", "float8_e4m3fn", "fp8_e5m2", "e5m2", "float8_e5m2", "fp4_e2m1fn",
 * "float4_e2m1fn", "e2m1", "fp6_e2m3fn", "float6_e2m3fn", "e2m3", "fp6_e3m2fn", "float6_e3m2fn", "e3m2",
 * "fp8_e8m0fnu", "float8_e8m0fnu", "e8m0". */
ER_API er_status er_format_from_name(er_format *out, const char *name);

/* The exact value of one stored pattern (the low value_bits bits of `bits`, higher bits set is ER_ERR_INVALID; for
 * tf32 the 32-bit container). */
ER_API er_status er_decode(double *out, er_format f, uint64_t bits);
/* x rounded to f in direction `mode`, with gradual underflow and the overflow rule `ov`. The result is a double
 * holding a value of f (or +-inf or NaN). NaN in gives NaN; an infinity is kept where f has one, else `ov` applies.
 * fp4 and fp6 have no NaN: ER_OVERFLOW_NAN is refused for them. e8m0 holds positive powers of two: a negative
 * value, zero or NaN gives NaN, a value below 2^-127 gives 2^-127 (it has no zero) in every mode, ties to nearest
 * go to the greater power (as ml_dtypes rounds), and overflow gives NaN by default. */
ER_API er_status er_round_double(double *out, er_format f, double x, er_round mode, er_overflow ov);
/* x rounded as er_round_double does, then encoded as f's bit pattern (NaN encodes as the canonical quiet NaN; a
 * rounded NaN into fp4 or fp6, which have none, is ER_ERR_INVALID and nothing is written). */
ER_API er_status er_encode(uint64_t *bits, er_format f, double x, er_round mode, er_overflow ov);
/* The spacing of f's values at |x|: 2^(max(exponent(x), emin) - precision + 1). x must be finite. */
ER_API double er_format_ulp(er_format f, double x);

#ifdef __cplusplus
}
#endif
#endif
