/* norm_bwd.h: the sets of layer_norm's and rmsnorm's backward passes from the forward pass's saved statistics,
 * dx = r (g - sum_j g_j / n - xhat sum_j g_j xhat_j / n) with g = w dy, xhat = (x - m) r, and the column sums
 * dweight = sum_rows dy xhat and dbias = sum_rows dy (docs/algorithms/norm-backward.md). */
#ifndef ER_ENCLOSE_NORM_BWD_H
#define ER_ENCLOSE_NORM_BWD_H

#include <math.h>
#include "core/internal.h"
#include "format/format.h"
#include <stdint.h> /* before mpfr.h: the intmax_t functions */
#include <mpfr.h>
#include "enclose/anyorder.h" /* er_cval */

/* The standard of one output: the compute format F (holding every input's values), the output format O and its
 * overflow rule, the sums' depth bound (0: any tree); centered: layer_norm (d = x - m and the term sum_j g_j),
 * else rmsnorm (d = x). */
typedef struct er_nbwd_plan {
    const er_fmt_info *F, *O;
    er_overflow ov;
    int64_t depth;
    int centered;
    /* rmsnorm without a saved rstd (own): the kernel's rstd is any value of the forward model's set, the exact one
     * 1/sqrt(S/n + eps) with S the row's exact sum of squares and eps as F holds it; the columns read each row's
     * exact S (Sx, MPFR numbers) and its rstd's enclosure in double (rxl, rxh) */
    int own;
    double eps;
    int64_t n; /* own: the rows' length */
    const double *rxl, *rxh;
    const mpfr_t *Sx;
    int simd; /* the AVX2 loops (er__simd, read once a call) */
} er_nbwd_plan;

/* Row x's exact sum of squares into S (an initialised MPFR number; 0 for a row holding a NaN or an infinity) and
 * 1/sqrt(S/n + eps) enclosed in doubles [*lo, *hi] (+inf above where S/n + eps may be 0). */
ER_INTERNAL er_status er__nbwd_own_rstd(const double *x, int64_t n, double eps, mpfr_t S, double *lo, double *hi);

/* Roundings a monomial of the model may pass through outside the sums' additions: dx's (Theorem N1) and dweight's
 * terms' (Theorem N2). */
#define ER_NBWD_DX_ROUNDINGS 16
#define ER_NBWD_DW_ROUNDINGS 4

/* The class er__nbwd_row leaves to the output set (cls). */
#define ER_NBWD_PENDING 0xFF

/* The widest-set screen of a row's dx (nbwdmod.c): mark[q] = 1 for a decided element whose output set may be wider
 * than `wide` (er__nbwd_wider; a pending element, class ER_NBWD_PENDING, is examined whatever its mark). done:
 * whether er__nbwd_row wrote mark (its fp32 pass, which screens as it classes); else the caller screens. */
typedef struct er_nbwd_marks {
    double vrel, vabs, wide;
    uint8_t *mark;
    double *code; /* scratch of the row's length */
    int done;
} er_nbwd_marks;
/* Whether an element's output set may be wider than `wide`: it lies in [lo - v, hi + v] joined with rd, v = vrel |end|
 * + vabs (the rounding into F, then into O), and a one-signed set's relative width grows with its ends (any set's
 * is at most 2), so 0 where that bound, with a margin of 2^-40, is below `wide`. */
static inline uint8_t er__nbwd_wider(double lo, double hi, double rd, double vrel, double vabs, double wide) {
    double L = lo - (fabs(lo) * vrel + vabs), H = hi + (fabs(hi) * vrel + vabs);
    L = rd < L ? rd : L;
    H = rd > H ? rd : H;
    double M = fabs(L) > fabs(H) ? fabs(L) : fabs(H);
    int narrow = ((L > 0) | (H < 0)) & ((H - L) * (1.0 + 0x1p-40) < wide * M);
    return (uint8_t)!narrow;
}

/* dx along one row of n: dy, x and w (NULL: no weight) decoded, the row's saved mean m (unused for rmsnorm) and rstd
 * in [rlo, rhi] (the saved value: rlo = rhi; own: the forward model's set): each element's set in F (cv), its exact
 * value to double (ex) and correctly rounded into O (rd). A row holding a NaN or an infinity, or whose intermediate
 * values may overflow F, claims nothing. cls (NULL: none) gets the class of the kernel's output y (decoded) where
 * the set decides it without its output conversion: 0 exact, 1 covered, ER_NBWD_PENDING else (always where
 * er__nbwd_decides is 0); the output set of every element is then er__cset_build's of cv, ex, rd as for any other
 * set. lo, hi (n each): where cls is given and an element's class is 0 or 1, its set is the values of F in
 * [lo, hi] (er__nbwd_set) and cv is not written; for the other elements of a row with a saved rstd, lo and hi are
 * the same double ends cv came from. mk (NULL: none; used with cls): the row's widest-set screen, written where
 * mk->done is set on return. */
ER_INTERNAL er_status er__nbwd_row(const er_nbwd_plan *pl, const double *dy, const double *x, const double *w, double m,
                                   double rlo, double rhi, int64_t n, const double *y, uint8_t *cls, er_cval *cv,
                                   double *ex, double *rd, double *lo, double *hi, er_nbwd_marks *mk);
/* The values of F in [lo, hi] (lo, hi doubles) into c, as a set (the outward neighbours where none lies inside);
 * no claim where an end is beyond F's range or NaN (0 then, else 1). */
ER_INTERNAL int er__nbwd_set(er_cval *c, const er_fmt_info *F, double lo, double hi);
/* Whether sums of products of F's values take Lemma N6's compensated enclosures (norm-backward.md): F of at most 26
 * bits whose least exponent of a last bit is at least -300 and whose largest exponent is at most 300, so that every
 * part of a product of up to three of its values is exact in double and no sum of 2^63 of them overflows. */
static inline int er__nbwd_compensated(const er_fmt_info *F) {
    return F->p <= 26 && F->emin - F->p >= -300 && F->emax <= 300;
}
/* Whether er__nbwd_row decides classes under the plan: a saved rstd and every value of O a value of F (the output
 * conversion then keeps the set's ends). */
ER_INTERNAL int er__nbwd_decides(const er_nbwd_plan *pl);

/* One element of dweight (bias 0: sum_i dy_i (x_i - m_i) r_i, m NULL for rmsnorm) or of dbias (bias 1: sum_i dy_i)
 * over `rows` rows, r_i in [rlo_i, rhi_i] (equal for saved values): its set in F, exact value and correct rounding
 * into O. */
ER_INTERNAL er_status er__nbwd_col(const er_nbwd_plan *pl, int bias, const double *dy, const double *x, const double *m,
                                   const double *rlo, const double *rhi, int64_t rows, er_cval *cv, double *ex,
                                   double *rd);

/* The same element's set from its sums in double: S0 the sum of its terms (Lemma N4, any order), sa the sum of their
 * magnitudes, mul (dweight) a bound on max(1,|dy|) max(1,|x - m|) max(1,|r|)^2 over the rows; with joins >= 0 (a
 * compute format of at most 26 bits), S0 is the main terms' two-sum tree of Lemma N6 (cascades of rows joined by at
 * most `joins` more two-sums) and b the sum of its errors and the terms' companions (er__csum_add_prod's for dweight,
 * none for dbias), the exact sum within Lemma N6's radius of fl(S0 + b). 2 when the exact value is decided too (*ex,
 * *rd), 1 when er__nbwd_col_exact must give it, 0 when a sum is not finite (cv then claims nothing, and er__nbwd_col
 * on the column's values gives the element). */
ER_INTERNAL int er__nbwd_col_sums(const er_nbwd_plan *pl, int bias, double S0, double b, int64_t joins, double sa,
                                  double mul, int64_t rows, er_cval *cv, double *ex, double *rd);
/* The element's exact value (*ex, rounded to double) and its correct rounding into O (*rd), from its column's values
 * (r: the rows' saved rstd). */
ER_INTERNAL er_status er__nbwd_col_exact(const er_nbwd_plan *pl, int bias, const double *dy, const double *x,
                                         const double *m, const double *r, int64_t rows, double *ex, double *rd);

#endif
