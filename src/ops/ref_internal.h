/* ref_internal.h: the reference object and the per-element exact summary the covers engine reads. */
#ifndef ER_REF_INTERNAL_H
#define ER_REF_INTERNAL_H

#include "core/internal.h"

enum { ER_SPECIAL_NAN = 1, ER_SPECIAL_PINF = 2, ER_SPECIAL_NINF = 4 };

/* One output element of a reduction of n products p_k: the exact sum S of the finite products as
 * (-1)^neg (m + frac) 2^e (frac in [0,1), nonzero iff sticky; m = 0 for S = 0), upper bounds of the sums of
 * the positive products and of the magnitudes of the negative ones, and the special terms present
 * (a NaN or inf*0 product, +inf and -inf products). 32 bytes. */
typedef struct er_sum {
    uint64_t m;
    int32_t e;
    uint8_t neg, sticky, special, pad;
    double pos, negs;
} er_sum;
_Static_assert(sizeof(er_sum) == 32, "er_sum layout");

typedef enum er_op { ER_OP_MATMUL = 1 } er_op;

struct er_ref {
    er_op op;
    er_tensor A, B;     /* the operands' views (not copies) */
    int ndim;
    int64_t shape[ER_MAX_DIMS];
    int64_t n;          /* output elements */
    int64_t K;          /* products per element */
    er_sum *sums;       /* n summaries, row-major */
};

/* The exact sum at linear position idx as an MPFR value of sufficient precision (recomputed exactly). */
ER_INTERNAL er_status er__matmul_exact_mpfr(const er_ref *r, int64_t idx, void *mpfr_out);
ER_INTERNAL er_status er__ref_index(const er_ref *r, const int64_t *index, int64_t *idx);

#endif
