/* anyorder.c: constants of the any-order bound, computed with MPFR rounding upward so that every constant
 * is an upper bound of the real number the proof names (docs/algorithms/any-order.md). */
#include <math.h>
#include <stdint.h> /* before mpfr.h: enables the intmax_t functions */
#include <mpfr.h>
#include "format/format.h"
#include "enclose/anyorder.h"
#include "enclose/ival.h"

/* depth: every term passes through at most depth additions (0: any tree, depth n - 1); Theorem 7. */
static er_status er_bound(er_anyorder_bound *b, const er_fmt_info *F, int64_t n, int64_t depth, int exact,
                          int faithful) {
    if (n < 0) return er__fail(ER_ERR_INTERNAL, "negative reduction length");
    if (depth > 0 && depth < 62 && n > (INT64_C(1) << depth))
        return er__fail(ER_ERR_STANDARD,
                        "depth=%lld cannot add %lld terms: a tree of that depth has at most 2^%lld leaves",
                        (long long)depth, (long long)n, (long long)depth);
    int64_t d = n > 0 ? n - 1 : 0; /* the additions a term passes through */
    if (depth > 0 && depth < d) d = depth;
    int64_t m = exact ? d : d + 1; /* and its product's rounding */
    mpfr_t onepu, t;
    mpfr_inits2(128, onepu, t, (mpfr_ptr)0);
    mpfr_set_ui_2exp(onepu, 1, -F->p + (faithful ? 1 : 0), MPFR_RNDN); /* u = 2^-p (2u when faithful), exact */
    mpfr_add_ui(onepu, onepu, 1, MPFR_RNDU);      /* 1 + u, exact at 128 bits */
    mpfr_pow_ui(t, onepu, (unsigned long)m, MPFR_RNDU);
    mpfr_sub_ui(t, t, 1, MPFR_RNDU);
    b->c1 = mpfr_get_d(t, MPFR_RNDU);
    if (exact || n == 0) {
        b->c2 = 0;
    } else {
        mpfr_pow_ui(t, onepu, (unsigned long)d, MPFR_RNDU);
        mpfr_mul_ui(t, t, (unsigned long)n, MPFR_RNDU);
        /* eta/2 (eta when faithful) as an exponent shift: as a double, fp64's eta/2 = 2^-1075 would underflow. */
        mpfr_mul_2si(t, t, (long)F->emin - F->p + (faithful ? 1 : 0), MPFR_RNDU);
        b->c2 = mpfr_get_d(t, MPFR_RNDU);
    }
    mpfr_pow_ui(t, onepu, (unsigned long)(n > 0 ? d + 1 : 0), MPFR_RNDU);
    b->g = mpfr_get_d(t, MPFR_RNDU);
    mpfr_clears(onepu, t, (mpfr_ptr)0);
    /* Rounding to nearest overflows exactly when |z| >= max + ulp(max)/2 = 2^emax (2 - 2^-p). For fp64 that
     * is not a double: DBL_MAX is a lower bound, which only reports overflow as possible more often. */
    b->thr = F->p < 53 && !faithful ? F->max + ldexp(1.0, F->emax - F->p) : F->max;
    b->faithful = faithful;
    /* Faithful rounding may overflow anything beyond the largest finite value: thr = max is then a lower
     * bound of the threshold, as required. */
    return ER_OK;
}

er_status er__anyorder_bound(er_anyorder_bound *b, const er_fmt_info *fa, const er_fmt_info *fb,
                             const er_fmt_info *F, int64_t n, int faithful) {
    return er_bound(b, F, n, 0, er__products_exact(fa, fb, F), faithful);
}

er_status er__anyorder_bound_depth(er_anyorder_bound *b, const er_fmt_info *fa, const er_fmt_info *fb,
                                   const er_fmt_info *F, int64_t n, int64_t depth, int faithful) {
    return er_bound(b, F, n, depth, er__products_exact(fa, fb, F), faithful);
}

er_status er__anyorder_bound_terms(er_anyorder_bound *b, const er_fmt_info *F, int64_t n, int faithful) {
    return er_bound(b, F, n, 0, 1, faithful);
}

er_status er__anyorder_bound_terms_depth(er_anyorder_bound *b, const er_fmt_info *F, int64_t n, int64_t depth,
                                         int faithful) {
    return er_bound(b, F, n, depth, 1, faithful);
}

void er__edge_scratch_init(er_edge_scratch *w) {
    mpfr_inits2(66, w->s, w->b, (mpfr_ptr)0);
    mpfr_init2(w->x, 128);
}

void er__edge_scratch_clear(er_edge_scratch *w) { mpfr_clears(w->s, w->b, w->x, (mpfr_ptr)0); }

/* up = 0: RU_F(S_lo - B); up = 1: RD_F(S_hi + B), where S_lo <= S <= S_hi come from the summary. The
 * difference is rounded outward at 128 bits before the rounding to F: by monotonicity the result can only
 * be further out than RU_F(S - B) (resp. RD_F(S + B)), never inside it (any-order.md, Lemma 4). */
static double er_edge(er_edge_scratch *w, const er_fmt_info *F, const er_dotsum *sm, double B, int up) {
    if (sm->m == 0) {
        mpfr_set_zero(w->s, 1);
    } else {
        mpfr_set_uj_2exp(w->s, sm->m, sm->e, MPFR_RNDN); /* exact: 64 bits into 66 */
        /* |S| is in [m, m+1) 2^e when sticky: move to the far end on the side being bounded. */
        if (sm->sticky && (up != sm->neg)) {
            mpfr_set_ui_2exp(w->b, 1, sm->e, MPFR_RNDN);
            mpfr_add(w->s, w->s, w->b, MPFR_RNDN); /* exact: m + 1 <= 2^64 */
        }
        if (sm->neg) mpfr_neg(w->s, w->s, MPFR_RNDN);
    }
    mpfr_set_d(w->b, B, MPFR_RNDN); /* exact */
    if (up) mpfr_add(w->x, w->s, w->b, MPFR_RNDU);
    else mpfr_sub(w->x, w->s, w->b, MPFR_RNDD);
    return er__round_mpfr(F, w->x, up ? ER_ROUND_DOWN : ER_ROUND_UP, ER_OVERFLOW_IEEE);
}

void er__cval_from_interval(er_cval *c, double lo, double hi, int nan, const er_fmt_info *F) {
    memset(c, 0, sizeof *c);
    c->nan = (uint8_t)(nan != 0);
    if (isnan(lo) && isnan(hi)) { c->nan = c->nan_req = 1; c->lo = INFINITY; c->hi = -INFINITY; return; }
    if (isnan(lo) || isnan(hi)) { c->nan = 1; lo = -INFINITY; hi = INFINITY; }
    c->pinf = hi == INFINITY;
    c->ninf = lo == -INFINITY;
    c->lo = lo < -F->max ? -F->max : lo;
    c->hi = hi > F->max ? F->max : hi;
    if (lo == INFINITY || hi == -INFINITY) { c->lo = INFINITY; c->hi = -INFINITY; } /* only infinities */
}

void er__cval_from_ival(er_cval *c, double lo, double hi, const er_fmt_info *F) {
    if (lo != lo) er__cval_from_interval(c, -INFINITY, INFINITY, 1, F);
    else er__cval_from_interval(c, lo, hi, 0, F);
}

void er__anyorder_cval(er_cval *c, const er_anyorder_bound *bd, const er_fmt_info *F, const er_dotsum *sm,
                       er_edge_scratch *w) {
    memset(c, 0, sizeof *c);
    c->lo = INFINITY;
    c->hi = -INFINITY;
    int nan_term = sm->special & ER_SPECIAL_NAN, pinf_term = sm->special & ER_SPECIAL_PINF,
        ninf_term = sm->special & ER_SPECIAL_NINF;
    /* Overflow of the finite terms' partial sums (Theorem 5): possible only beyond the threshold. */
    double P = er__add_up(er__mul_up(bd->g, sm->pos), bd->c2);
    double N = er__add_up(er__mul_up(bd->g, sm->negs), bd->c2);
    int pov = P >= bd->thr, nov = N >= bd->thr;
    if (nan_term || (pinf_term && ninf_term)) {
        c->nan = c->nan_req = 1;
        return;
    }
    if (pinf_term || ninf_term) {
        /* Every order yields that infinity, unless the finite part overflows the other way first (NaN). */
        if (pinf_term) c->pinf = 1; else c->ninf = 1;
        if (pinf_term ? nov : pov) c->nan = 1;
        return;
    }
    double B = er__add_up(er__mul_up(bd->c1, er__add_up(sm->pos, sm->negs)), bd->c2);
    double lo = isinf(B) ? -F->max : er_edge(w, F, sm, B, 0);
    double hi = isinf(B) ? F->max : er_edge(w, F, sm, B, 1);
    c->pinf = (uint8_t)pov;
    c->ninf = (uint8_t)nov;
    if (bd->faithful && (pov || nov)) {
        /* Faithful rounding of a value beyond the largest finite one may give that finite value: a partial sum
         * saturates and loses mass, and the bound no longer holds (Theorem 6). Any finite value is possible. */
        c->lo = -F->max;
        c->hi = F->max;
    } else if (lo == INFINITY || hi == -INFINITY) { /* every order overflows */
        if (lo == INFINITY) c->pinf = 1; else c->ninf = 1;
    } else {
        c->lo = lo;
        c->hi = hi;
    }
    if (c->pinf && c->ninf) c->nan = 1;
}

void er__cval_anything(er_cval *c, const er_fmt_info *F) {
    memset(c, 0, sizeof *c);
    c->lo = -F->max;
    c->hi = F->max;
    c->nan = c->pinf = c->ninf = 1;
}

double er__gamma(const er_fmt_info *F, double k) {
    double ku = er__mul_up(k, ldexp(1.0, -F->p));
    if (!(ku < 0.5)) return INFINITY;
    return er__up(ku / er__dn(1.0 - ku));
}
