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
    ER_ORDER_ANY = 1 /* every summation order (any tree, blocking, split-K), with or without FMA */
} er_order;

typedef enum er_fma {
    ER_FMA_EITHER = 0, /* each product may or may not be fused into its addition */
    ER_FMA_NEVER = 1,  /* products are rounded to the compute format, then added */
    ER_FMA_ALWAYS = 2  /* every product is fused into an addition (fma) */
} er_fma;

typedef enum er_rounding {
    ER_RND_NEAREST = 0 /* every operation rounds to nearest, ties to even */
} er_rounding;

typedef enum er_subnormals {
    ER_SUBNORMALS_GRADUAL = 0 /* IEEE gradual underflow */
} er_subnormals;

typedef struct er_standard {
    er_order order;
    er_format compute;       /* accumulator format: ER_FP32 (default), ER_FP16, ER_BF16, ER_FP64 */
    er_fma fma;
    er_rounding rounding;
    er_subnormals subnormals;
    er_overflow out_overflow; /* overflow rule of the final conversion to the output format */
} er_standard;

/* The default standard: any_order, compute fp32, FMA either, round to nearest, gradual underflow,
 * the output format's own overflow rule. */
ER_API er_status er_standard_init(er_standard *s);
/* Parses an order ("any_order", alias "any") and options, a comma- or space-separated list of key=value:
 *   compute=fp32|fp16|bf16|fp64 (format names as er_format_from_name), fma=either|never|always,
 *   rounding=nearest, subnormals=gradual, overflow=default|ieee|inf|saturate|nan.
 * options may be NULL or "". An unknown order, key or value, or a repeated key, is ER_ERR_STANDARD with a
 * message naming it. On refusal *s is untouched. */
ER_API er_status er_standard_parse(er_standard *s, const char *order, const char *options);
/* Checks a standard built by hand (ER_ERR_STANDARD if it names something unknown or unsupported). */
ER_API er_status er_standard_validate(const er_standard *s);
/* Renders s as "any_order compute=fp32 fma=either" into buf (always NUL-terminated when cap > 0). *needed
 * (if not NULL) receives the length without the NUL. ER_ERR_BUFFER if it did not fit. */
ER_API er_status er_standard_format(const er_standard *s, char *buf, size_t cap, size_t *needed);
ER_API size_t er_standard_sizeof(void);

#ifdef __cplusplus
}
#endif
#endif
