/* accum.h: a long fixed-point accumulator (Kulisch style, carry-save) for exact sums of products.
 *
 * Digits are int64_t, digit i weighing 2^(base + 32 i). Adding a term adds values below 2^32 into a few
 * digits without propagating carries, so up to 2^30 terms are absorbed before a carry pass is due
 * (|digit| < 2^30 * 2^32 + 2^32 < 2^63). The accumulator is exact: its value is the exact sum. */
#ifndef ER_ACCUM_H
#define ER_ACCUM_H

#include "core/internal.h"
#include "format/format.h"

typedef struct er_acc {
    int64_t *d;
    int64_t *d2;     /* a second bank of nd digits: two interleaved streams of additions do not wait on
                        each other's read-modify-writes; er__acc_summary folds it into d */
    int nd;
    int64_t base;
    int64_t pending; /* terms added since the last carry pass */
} er_acc;

#define ER_ACC_PASS_EVERY (INT64_C(1) << 30)

enum { ER_SPECIAL_NAN = 1, ER_SPECIAL_PINF = 2, ER_SPECIAL_NINF = 4 };

/* One reduction of n products p_k, summarised: the exact sum S of the finite products as
 * (-1)^neg (m + frac) 2^e (frac in [0,1), nonzero iff sticky; m = 0 for S = 0), upper bounds of the sums of
 * the positive products and of the magnitudes of the negative ones, and the special terms present
 * (a NaN or inf*0 product, +inf and -inf products). 32 bytes. */
typedef struct er_dotsum {
    uint64_t m;
    int32_t e;
    uint8_t neg, sticky, special, pad;
    double pos, negs;
} er_dotsum;
_Static_assert(sizeof(er_dotsum) == 32, "er_dotsum layout");

/* The digit range a dot product of vectors with these exponent ranges needs (see er__dot_summary). */
typedef struct er_dot_env {
    int64_t base, top;
    int wide;          /* some operand is fp64: products need 106 bits */
    int special;       /* rmsnorm rows: the row holds a NaN or an infinity */
    int ipath;         /* both operands are integers times 2^qa and 2^qb below 2^40: 128-bit integer path */
    int qa, qb;
} er_dot_env;

/* The summary of sum_k a[k] b[k] (a, b decoded doubles; NaN and infinities allowed when special_path). */
ER_INTERNAL void er__dot_summary(er_dotsum *s, er_acc *acc, const double *a, const double *b, int64_t K,
                                 const er_dot_env *env, int special_path);
/* The same, and where dd is not NULL the exact sum S of the finite products as S = dd[0] + dd[1] + r, |r| <= dd[2]
 * (its leading 106 bits, exact, and a bound of the rest below 2^-105 |S|, 0 where S has no more bits); dd[0] NaN
 * where the pieces would leave
 * double's normal range (fp64 operands). */
ER_INTERNAL void er__dot_summary_dd(er_dotsum *s, er_acc *acc, const double *a, const double *b, int64_t K,
                                    const er_dot_env *env, int special_path, double *dd);
/* The summary's last step from sums in double of the positive products and of the negative ones' magnitudes (pos,
 * negs: K products, each sum to nearest in some order), the special terms, and the exact sum of the finite products
 * as er__acc_summary gives it (neg, m, e, sticky). */
ER_INTERNAL void er__dotsum_finish(er_dotsum *s, double pos, double negs, int64_t K, uint8_t special, int neg,
                                   uint64_t m, int64_t e, int sticky);
/* Whether operands of these formats take the 128-bit integer path, and their quanta (log2 of the last bit). */
ER_INTERNAL int er__dot_ipath(const er_fmt_info *fa, const er_fmt_info *fb, int64_t K, int *qa, int *qb);

/* Digits for every bit position in [base, top), plus headroom. ER_ERR_NOMEM if the span is absurd. */
ER_INTERNAL er_status er__acc_init(er_acc *a, int64_t base, int64_t top);
ER_INTERNAL void er__acc_free(er_acc *a);
ER_INTERNAL void er__acc_reset(er_acc *a);
ER_INTERNAL void er__acc_carry(er_acc *a);
/* Adds (-1)^neg * m * 2^e with e >= base and m < 2^106 (any term that fits the span). */
ER_INTERNAL void er__acc_add_u128(er_acc *a, int neg, unsigned __int128 m, int64_t e);
/* The exact value as (-1)^neg * (m + frac) * 2^e with m's top bit set and frac in [0,1) nonzero iff *sticky;
 * m = 0 for a zero sum. Destroys the accumulator's contents (reset it before reuse). */
ER_INTERNAL void er__acc_summary(er_acc *a, int *neg, uint64_t *m, int64_t *e, int *sticky);
/* The same with 128 bits: (-1)^neg * (m + frac) * 2^e with m's top bit set (m = 0 for a zero sum). */
ER_INTERNAL void er__acc_summary128(er_acc *a, int *neg, unsigned __int128 *m, int64_t *e, int *sticky);

/* Adds a finite double p exactly. Requires p's exponent minus 52 (its ulp position) to be at least base. */
static inline void er__acc_add_double(er_acc *a, double p) {
    uint64_t b = er__bits(p);
    uint64_t mant = b & ((UINT64_C(1) << 52) - 1);
    int64_t ex = (int64_t)((b >> 52) & 0x7ff);
    if (ex) mant |= UINT64_C(1) << 52; else ex = 1;
    int64_t off = ex - 1075 - a->base;
    int64_t i = off >> 5;
    unsigned __int128 v = (unsigned __int128)mant << (off & 31);
    int64_t d0 = (int64_t)(uint32_t)v, d1 = (int64_t)(uint32_t)(v >> 32), d2 = (int64_t)(uint64_t)(v >> 64);
    int64_t *d = a->d + i;
    if (b >> 63) { d[0] -= d0; d[1] -= d1; d[2] -= d2; }
    else { d[0] += d0; d[1] += d1; d[2] += d2; }
    if (++a->pending >= ER_ACC_PASS_EVERY) er__acc_carry(a);
}

/* Adds a finite double p exactly into the digit bank d (with the accumulator's base), without the carry
 * bookkeeping: the caller runs a carry pass at least every ER_ACC_PASS_EVERY additions per bank. p = 0 adds
 * nothing. Requires p's ulp position (exponent - 52) to be at least base when p != 0. Branch-free, so the
 * random signs of products cost no mispredictions. */
static inline void er__acc_add_double_bank(int64_t *d, int64_t base, double p) {
    uint64_t b = er__bits(p);
    int64_t ex = (int64_t)((b >> 52) & 0x7ff);
    uint64_t mant = (b & ((UINT64_C(1) << 52) - 1)) | ((uint64_t)(ex != 0) << 52);
    int64_t off = ex - 1075 - base;
    off = off < 0 ? 0 : off; /* only a zero p (ex = 0, mant = 0) lands here */
    unsigned __int128 v = (unsigned __int128)mant << (off & 31);
    int64_t s = -(int64_t)(b >> 63); /* 0 or -1: x ^ s - s negates when s = -1 */
    int64_t d0 = (int64_t)(uint32_t)v, d1 = (int64_t)(uint32_t)(v >> 32), d2 = (int64_t)(uint64_t)(v >> 64);
    d += off >> 5;
    d[0] += (d0 ^ s) - s;
    d[1] += (d1 ^ s) - s;
    d[2] += (d2 ^ s) - s;
}

#endif
