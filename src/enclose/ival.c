/* ival.c: exp(t) enclosed in double arithmetic (docs/algorithms/double-bounds.md, Theorem D1).
 *
 * t = k L + r with L = ln 2 / 64, k the nearest integer to t / L and |r| <= 0.0056; exp(t) = 2^q 2^(j/64) exp(r)
 * with k = 64 q + j. The constants come from MPFR once: 2^(j/64) as the doubles below and above it, L as lh (36
 * bits) plus ll, and 2^(j/64) as a double-double for Lemma D8. The evaluation is inline in ival.h. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <mpfr.h>
#include "enclose/ival.h"

double er__exp_tlo[64], er__exp_thi[64]; /* 2^(j/64) in [tlo, thi] */
double er__exp_t1[64], er__exp_t2[64];   /* 2^(j/64) as t1 + t2 within 2^-106 of it (Lemma D8) */
double er__exp_lh, er__exp_ll; /* lh: L to 36 bits; ll: L - lh to nearest */
static pthread_once_t er_exp_once = PTHREAD_ONCE_INIT;

static void er_exp_init(void) {
    mpfr_t a, b;
    mpfr_inits2(200, a, b, (mpfr_ptr)0);
    for (int j = 0; j < 64; j++) {
        mpfr_set_si(a, j, MPFR_RNDN);
        mpfr_div_2ui(a, a, 6, MPFR_RNDN); /* exact */
        mpfr_exp2(b, a, MPFR_RNDD);       /* below 2^(j/64), then below that */
        er__exp_tlo[j] = mpfr_get_d(b, MPFR_RNDD);
        mpfr_exp2(b, a, MPFR_RNDU);
        er__exp_thi[j] = mpfr_get_d(b, MPFR_RNDU);
        if (j == 0) er__exp_tlo[j] = er__exp_thi[j] = 1.0;
        mpfr_exp2(b, a, MPFR_RNDN);       /* within 2^-199 relative */
        er__exp_t1[j] = mpfr_get_d(b, MPFR_RNDN);
        mpfr_sub_d(b, b, er__exp_t1[j], MPFR_RNDN); /* exact */
        er__exp_t2[j] = mpfr_get_d(b, MPFR_RNDN);
    }
    mpfr_const_log2(a, MPFR_RNDN);
    mpfr_div_2ui(a, a, 6, MPFR_RNDN);     /* L within 2^-205 */
    mpfr_set_prec(b, 36);
    mpfr_set(b, a, MPFR_RNDN);
    er__exp_lh = mpfr_get_d(b, MPFR_RNDN);     /* exact: 36 bits */
    mpfr_set_prec(b, 200);
    mpfr_sub_d(b, a, er__exp_lh, MPFR_RNDN);   /* exact */
    er__exp_ll = mpfr_get_d(b, MPFR_RNDN);     /* within 2^-96 of L - lh (|L - lh| <= 2^-43) */
    mpfr_clears(a, b, (mpfr_ptr)0);
}

void er__exp_init(void) { pthread_once(&er_exp_once, er_exp_init); }
