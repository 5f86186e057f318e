/* exactref/families.h: seeded input families for testing kernels (docs/reference/testing.md).
 *
 * Kernel bugs live where random normal inputs never go: cancellation, the top and the bottom of the format,
 * rounding ties, special values, offsets, masked lanes. er_fill writes one family's values into a view's memory,
 * deterministically: element i (its row-major position) gets a value that depends only on the family, the seed, i
 * and the view's shape (the last dimension is a row), never on the strides, the machine or the thread count. */
#ifndef EXACTREF_FAMILIES_H
#define EXACTREF_FAMILIES_H

#include <stdint.h>
#include <exactref/export.h>
#include <exactref/status.h>
#include <exactref/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum er_family {
    ER_FAMILY_NORMAL = 0,   /* N(0, 1) */
    ER_FAMILY_POSITIVE = 1, /* |N(0, 1)| + 1/16: every value positive (sums without cancellation) */
    ER_FAMILY_CANCEL = 2,   /* pairs along each row, a and -a (1 + t 2^-ceil(p/2)), |t| < 1: sums cancel to a residue */
    ER_FAMILY_WIDE = 3,     /* random signs, significands in [1, 2), exponents uniform over +-min(emax / 4, 60) */
    ER_FAMILY_NEAR_MAX = 4, /* magnitudes in [max / 4, max], random signs: a sum of two of one sign may overflow */
    ER_FAMILY_SUBNORMAL = 5,/* magnitudes about 2^(emin / 2) (products near the subnormal range), one in 8 subnormal */
    ER_FAMILY_TIES = 6,     /* signed powers of two 2^e, e in [-(p + 1), 2]: exact sums land on rounding midpoints */
    ER_FAMILY_SPECIALS = 7, /* N(0, 1) with one element in 16 +inf, -inf or NaN (NaN only where no infinity) */
    ER_FAMILY_OFFSET = 8,   /* 2^ceil(p/2) + N(0, 1): the variance killer */
    ER_FAMILY_INTEGERS = 9, /* small integers in [-4, 4], three in five zero: exact in every format */
    ER_FAMILY_MASKED = 10,  /* N(0, 1) rows whose tail from a random lane on is -inf (one row in 8 all -inf) */
    ER_FAMILY_COUNT = 11
} er_family;

/* Writes the family's values for `seed` into every element of t (rounded to nearest into t's format, saturating
 * at its largest finite value); t->data must point to writable memory the view describes, with distinct elements.
 * ER_ERR_INVALID for an unknown family, ER_ERR_FORMAT for masked rows in a format without -inf (the fp8 e4m3fn),
 * ER_ERR_OUTPUT for a view that repeats elements; nothing is written then. */
ER_API er_status er_fill(const er_tensor *t, er_family family, uint64_t seed);
/* "normal", "positive", "cancellation", "wide", "near_max", "subnormal", "ties", "specials", "offset", "integers",
 * "masked"; NULL for an unknown family. */
ER_API const char *er_family_name(er_family family);
/* The family of that name: ER_ERR_INVALID (with a message listing the names) for another. */
ER_API er_status er_family_parse(er_family *family, const char *name);

#ifdef __cplusplus
}
#endif
#endif
