/* setwidth.h: the width of a covering set relative to its size, as the report's widest set counts it; one copy for
 * the engine, the op modules and the GPU kernels (plain C, no library header). */
#ifndef ER_SETWIDTH_H
#define ER_SETWIDTH_H

#include <math.h>

#ifdef __CUDACC__
#define ER_SW_HD __host__ __device__
#else
#define ER_SW_HD
#endif

/* The set's width relative to its size, (hi - lo) / max(|lo|, |hi|), when the report's widest-set rule counts it:
 * a finite set of more than one value away from 0 (-1 otherwise). The same operations on the host and the GPU. */
ER_SW_HD static inline double er_set_rel(double lo, double hi) {
    if (!(lo < hi)) return -1; /* before the division: on the GPU a zero quotient takes division's slow path */
    double al = fabs(lo), ah = fabs(hi), m = al > ah ? al : ah, rel = (hi - lo) / m;
    return m > 0 && rel <= 1.7976931348623157e308 ? rel : -1;
}

/* The relative width (hi - lo) / max(|lo|, |hi|) of a finite set of one sign, away from 0 (a single value: 0), which
 * the resolution counts; -1 for an empty set, one holding 0, or one with an end not finite. */
ER_SW_HD static inline double er_set_away_rel(double lo, double hi) {
    double al = fabs(lo), ah = fabs(hi), m = al > ah ? al : ah;
    if (!(lo <= hi && (lo > 0 || hi < 0) && m <= 1.7976931348623157e308)) return -1;
    return lo == hi ? 0.0 : (hi - lo) / m; /* a single value: (hi - lo) / m is +0, without the division */
}

/* Both at once, er_set_rel's into *rel and er_set_away_rel's into *away, bit for bit, from at most one division
 * (they share it; none for a single value or an empty set, where a zero quotient would take the GPU's slow path). */
ER_SW_HD static inline void er_set_rels(double lo, double hi, double *rel, double *away) {
    double al = fabs(lo), ah = fabs(hi), m = al > ah ? al : ah, w = lo < hi ? (hi - lo) / m : 0.0;
    *rel = lo < hi && m > 0 && w <= 1.7976931348623157e308 ? w : -1;
    *away = lo <= hi && (lo > 0 || hi < 0) && m <= 1.7976931348623157e308 ? w : -1;
}

#endif
