/* anyorder.c: constants of the any-order bound, computed with MPFR rounding upward so that every constant
 * is an upper bound of the real number the proof names (docs/algorithms/any-order.md). */
#include <math.h>
#include <mpfr.h>
#include "enclose/anyorder.h"

int er__products_exact(const er_fmt_info *fa, const er_fmt_info *fb, const er_fmt_info *F) {
    /* Lemma 3: a*b = Ma Mb 2^(ea+eb) with Ma Mb < 2^(pa+pb) and 2^(ea+eb) >= eta_a eta_b. It is a value of F
     * when pa + pb <= pF, eta_a eta_b is a multiple of eta_F, and |a b| <= max_F. */
    if (fa->p + fb->p > F->p) return 0;
    if (fa->min_sub * fb->min_sub < F->min_sub) return 0;
    if (fa->max * fb->max > F->max) return 0; /* products of maxima are exact in double: no rounding here */
    return 1;
}

er_status er__anyorder_bound(er_anyorder_bound *b, const er_fmt_info *fa, const er_fmt_info *fb,
                             const er_fmt_info *F, int64_t n) {
    if (n < 0) return er__fail(ER_ERR_INTERNAL, "negative reduction length");
    int exact = er__products_exact(fa, fb, F);
    int64_t m = exact ? (n > 0 ? n - 1 : 0) : n;
    mpfr_t onepu, t;
    mpfr_inits2(128, onepu, t, (mpfr_ptr)0);
    mpfr_set_ui_2exp(onepu, 1, -F->p, MPFR_RNDN); /* u = 2^-p, exact */
    mpfr_add_ui(onepu, onepu, 1, MPFR_RNDU);      /* 1 + u, exact at 128 bits */
    mpfr_pow_ui(t, onepu, (unsigned long)m, MPFR_RNDU);
    mpfr_sub_ui(t, t, 1, MPFR_RNDU);
    b->c1 = mpfr_get_d(t, MPFR_RNDU);
    if (exact || n == 0) {
        b->c2 = 0;
    } else {
        mpfr_pow_ui(t, onepu, (unsigned long)(n - 1), MPFR_RNDU);
        mpfr_mul_ui(t, t, (unsigned long)n, MPFR_RNDU);
        /* eta/2 as an exponent shift: as a double, fp64's eta/2 = 2^-1075 would underflow to 0. */
        mpfr_mul_2si(t, t, (long)F->emin - F->p, MPFR_RNDU);
        b->c2 = mpfr_get_d(t, MPFR_RNDU);
    }
    mpfr_pow_ui(t, onepu, (unsigned long)n, MPFR_RNDU);
    b->g = mpfr_get_d(t, MPFR_RNDU);
    mpfr_clears(onepu, t, (mpfr_ptr)0);
    /* Rounding to nearest overflows exactly when |z| >= max + ulp(max)/2 = 2^emax (2 - 2^-p). For fp64 that
     * is not a double: DBL_MAX is a lower bound, which only reports overflow as possible more often. */
    b->thr = F->p < 53 ? F->max + ldexp(1.0, F->emax - F->p) : F->max;
    return ER_OK;
}
