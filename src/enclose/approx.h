/* approx.h: the values an approximate function within U ulps may return (docs/algorithms/ulp-slack.md). */
#ifndef ER_APPROX_H
#define ER_APPROX_H

#include "core/internal.h"
#include "format/format.h"

/* [*lo, *hi]: values of F covering every value of F that lies within U ulps of f(v), for every argument v whose
 * exact f(v) is in [a, b] (a <= b, bounds of the exact values; -inf and +inf allowed). Both readings of "within U
 * ulps" are covered: U ulps of F at the exact value, and U ulps of the correctly rounded value (CUDA's accuracy
 * table); the ulp is the spacing of F upward from |x|'s power of two, so the slack at a power of two is the larger
 * one (Lemma U1). An end beyond F's range is an infinity. */
ER_INTERNAL void er__approx_ends(const er_fmt_info *F, double U, double a, double b, double *lo, double *hi);

#endif
