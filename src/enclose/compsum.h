/* compsum.h: compensated sums with a rigorous radius (Lemma N6 of docs/algorithms/norm-backward.md). A sum of n
 * main terms a_j, each with a small companion b_j (the rounding errors a caller already holds exactly or nearly),
 * is kept as s, the main terms added in a cascade of Knuth's two-sums, and b, the two-sums' errors and the
 * companions added in double. The exact sum of the a_j + b_j lies within er__csum_radius of fl(s + b). */
#ifndef ER_ENCLOSE_COMPSUM_H
#define ER_ENCLOSE_COMPSUM_H

#include <math.h>
#include <stdint.h>
#include "core/internal.h"

typedef struct er_csum {
    double s, b;
} er_csum;

/* Knuth's two-sum: *s + *e = a + b exactly (no overflow), *s = fl(a + b). */
static inline void er__two_sum(double a, double b, double *s, double *e) {
    double t = a + b, bb = t - a;
    *s = t;
    *e = (a - (t - bb)) + (b - bb);
}

/* Adds a main term a and its companion small (their sum stands for the exact term). */
static inline void er__csum_add(er_csum *c, double a, double small) {
    double e;
    er__two_sum(c->s, a, &c->s, &e);
    c->b += e + small;
}

/* Adds the exact product g (x - m) (doubles with g (x - m)'s parts' products at least 2^-1022 in magnitude, as for
 * values of formats of at most 26 bits and g a product of two of them): x - m = d + dl exactly (Knuth's two-sum),
 * g d = a + fma's error exactly, and g dl rounded once (|g dl| <= 2^-53 |g d|). Returns a = fl(g d), the main term
 * (its magnitudes' sum is the caller's to keep). */
static inline double er__csum_add_prod(er_csum *c, double g, double x, double m) {
    double d, dl;
    er__two_sum(x, -m, &d, &dl);
    double a = g * d;
    er__csum_add(c, a, fma(g, d, -a) + g * dl);
    return a;
}

/* A bound on |sum_j (a_j + b_j) - fl(s + b)| (Lemma N6) for n main terms whose magnitudes sum to at most sabs,
 * with companions of at most lambda |a_j| each (er__csum_add_prod's: lambda = 2^-50 covers them and the rounding of
 * g dl), nsmall leaves a term in b (er__csum_add: 2 with a companion; add_prod: 3), rounded up. */
static inline double er__csum_radius(int64_t n, int nsmall, double lambda, double sabs, double centre) {
    double K = (double)(n + 4) * 0x1p-52, Kb = (double)(nsmall * n + 4) * 0x1p-52;
    return er__add_up(er__mul_up(er__mul_up(Kb, er__add_up(K, lambda)), sabs), er__mul_up(0x1p-52, fabs(centre)));
}

#endif
