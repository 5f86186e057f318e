/* elementwise.h: interval images of the elementwise functions of chains' stages (docs/algorithms/chains.md): the
 * values an implementation within its ulps budget, or in Triton's lowering (tri), returns over an interval of
 * arguments, and the exact functions' bounds they start from. */
#ifndef ER_ENCLOSE_ELEMENTWISE_H
#define ER_ENCLOSE_ELEMENTWISE_H

#include <stdint.h> /* before mpfr.h: the intmax_t functions */
#include <mpfr.h>
#include "core/internal.h"
#include "format/format.h"
#include "enclose/anyorder.h" /* er_cval */

/* The functions whose exact values the sets and the exact results need. */
enum { ER_FN_ERF, ER_FN_EXP, ER_FN_EXP2, ER_FN_LOG, ER_FN_TANH, ER_FN_RSQRT };

/* f(a) into r by MPFR, rounded in rnd; MPFR's ternary value (0: exact). */
ER_INTERNAL int er__mpfr_fn(int kind, mpfr_ptr r, mpfr_srcptr a, mpfr_rnd_t rnd);
/* Bounds of f(x) as doubles: *dn <= f(x) <= *up (libm's value widened by a margin for formats of at most 24 bits,
 * else MPFR; chains.md, Lemma C10). */
ER_INTERNAL void er__exact_fn(const er_fmt_info *E, int kind, double x, double *dn, double *up);
/* An empty set; v joined with w (every value either allows); the value w (of E, or an infinity) added to v. */
ER_INTERNAL void er__cval_empty(er_cval *v);
ER_INTERNAL void er__cval_join(er_cval *v, const er_cval *w);
ER_INTERNAL void er__cval_put(er_cval *v, double w);
/* v's finite part given as the images l <= h of its ends (values of E or infinities from overflow). */
ER_INTERNAL void er__set_ends(er_cval *v, const er_fmt_info *E, double l, double h);
/* gelu (both forms) and silu over the finite interval [l, h] (Lemmas C5 and C9): [*lo, *hi]. */
ER_INTERNAL void er__act_interval(const er_fmt_info *E, er_stage_kind kind, int tri, double U, double l, double h,
                                  double *lo, double *hi);
/* A unary function's (exp, exp2, log, tanh, sigmoid, erf, rsqrt) image of the set v, within ulps (0: CUDA's
 * default), its special values included (Lemmas C6 and C7). */
ER_INTERNAL void er__unary_image(er_cval *v, er_stage_kind kind, double ulps, const er_fmt_info *E, int tri);
/* x + y (mul = 0) or x y of the sets v and w, rounded to nearest in E, into v (Lemma C11). */
ER_INTERNAL void er__set_op(er_cval *v, const er_cval *w, int mul, const er_fmt_info *E);

#endif
