/* norm_bwd.c: the sets of layer_norm's and rmsnorm's backward passes (src/enclose/norm_bwd.h;
 * docs/algorithms/norm-backward.md).
 *
 * Every kernel of the model computes dx as the expansion r g_i - sum_j r g_j / n - sum_j r^3 d_i g_j d_j / n (g =
 * w dy, d = x - m) with each monomial perturbed by the roundings on its path (Lemma N1): its set is the exact value
 * plus and minus gamma(k) times the sum of the monomials' magnitudes, k the roundings a monomial may pass through.
 * The sums are exact in the fixed-point accumulator (compute formats of at most 26 bits) or with MPFR, the bounds
 * in double rounded outward. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h> /* before mpfr.h: the intmax_t functions */
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include "enclose/norm_bwd.h"
#include "enclose/ival.h"
#include "enclose/compsum.h"
#include "exact/accum.h"

/* t = a (x - m) c exactly: x - m spans at most max - min + 54 bits of the two exponents, each product 53 more. */
static void er_term(mpfr_t t, double a, double x, double m, double c) {
    if (a == 0 || c == 0 || x == m) {
        mpfr_set_prec(t, 2);
        mpfr_set_zero(t, 1);
        return;
    }
    long pd = 55;
    if (x != 0 && m != 0) {
        long ex = ilogb(x), em = ilogb(m);
        pd = (ex > em ? ex - em : em - ex) + 55;
    }
    mpfr_set_prec(t, (mpfr_prec_t)(pd + 106));
    mpfr_set_d(t, x, MPFR_RNDN);
    mpfr_sub_d(t, t, m, MPFR_RNDN); /* exact: the precision spans both */
    mpfr_mul_d(t, t, a, MPFR_RNDN); /* exact */
    mpfr_mul_d(t, t, c, MPFR_RNDN); /* exact */
}

/* The exact sum of the n numbers t (any precisions) into s, at a precision that holds it. */
static void er_exact_sum(mpfr_t s, mpfr_t *t, mpfr_ptr *p, int64_t n) {
    long top = LONG_MIN, low = LONG_MAX;
    int64_t k = 0;
    for (int64_t j = 0; j < n; j++) {
        if (mpfr_zero_p(t[j])) continue;
        long e = (long)mpfr_get_exp(t[j]);
        if (e > top) top = e;
        if (e - (long)mpfr_get_prec(t[j]) < low) low = e - (long)mpfr_get_prec(t[j]);
        p[k++] = t[j];
    }
    int lg = 0;
    while ((INT64_C(1) << lg) <= k && lg < 62) lg++;
    mpfr_set_prec(s, k ? (mpfr_prec_t)(top - low + lg + 2) : 2);
    if (k) mpfr_sum(s, p, (unsigned long)k, MPFR_RNDN); /* exact: the precision holds the sum */
    else mpfr_set_zero(s, 1);
}

/* Terms' scratch: n numbers and their pointers. */
typedef struct er_terms {
    mpfr_t *t;
    mpfr_ptr *p;
    int64_t n;
} er_terms;

static er_status er_terms_init(er_terms *T, int64_t n) {
    size_t k = (size_t)(n ? n : 1);
    T->t = malloc(sizeof(mpfr_t) * k);
    T->p = malloc(sizeof(mpfr_ptr) * k);
    T->n = 0;
    if (!T->t || !T->p) {
        free(T->t);
        free(T->p);
        return er__fail(ER_ERR_NOMEM, "cannot allocate the exact terms of a row of %lld", (long long)n);
    }
    for (int64_t j = 0; j < n; j++) mpfr_init2(T->t[j], 2);
    T->n = n;
    return ER_OK;
}

static void er_terms_clear(er_terms *T) {
    for (int64_t j = 0; j < T->n; j++) mpfr_clear(T->t[j]);
    free(T->t);
    free(T->p);
}

/* Whether dy, x and w (NULL: none) hold finite values alone; vectorised (core/internal.h). */
ER_ALWAYS_INLINE int er_nbwd_finite_body(const double *restrict dy, const double *restrict x,
                                         const double *restrict w, int64_t n) {
    int ok = 1;
    for (int64_t j = 0; j < n; j++) ok &= (fabs(dy[j]) <= DBL_MAX) & (fabs(x[j]) <= DBL_MAX);
    for (int64_t j = 0; w && j < n; j++) ok &= fabs(w[j]) <= DBL_MAX;
    return ok;
}
static int er_nbwd_finite_base(const double *dy, const double *x, const double *w, int64_t n) {
    return er_nbwd_finite_body(dy, x, w, n);
}
#if ER_HAVE_AVX2
ER_AVX2 static int er_nbwd_finite_avx2(const double *dy, const double *x, const double *w, int64_t n) {
    return er_nbwd_finite_body(dy, x, w, n);
}
#endif
static int er_nbwd_finite(int simd, const double *dy, const double *x, const double *w, int64_t n) {
#if ER_HAVE_AVX2
    if (simd) return er_nbwd_finite_avx2(dy, x, w, n);
#else
    (void)simd;
#endif
    return er_nbwd_finite_base(dy, x, w, n);
}

/* norm_bwd.h. */
int er__nbwd_set(er_cval *c, const er_fmt_info *F, double lo, double hi) {
    if (!(lo >= -F->max && hi <= F->max)) {
        er__cval_anything(c, F);
        return 0;
    }
    memset(c, 0, sizeof *c);
    c->lo = er__round_double(F, lo, ER_ROUND_UP, ER_OVERFLOW_IEEE);
    c->hi = er__round_double(F, hi, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
    if (c->lo > c->hi) { /* no value of F between them: the outward neighbours (never reached by the bound) */
        c->lo = er__round_double(F, lo, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
        c->hi = er__round_double(F, hi, ER_ROUND_UP, ER_OVERFLOW_IEEE);
    }
    return 1;
}

/* An interval of reals with double ends, and its operations rounded outward (ival.h's bounds). */
typedef struct er_iv {
    double lo, hi;
} er_iv;
static inline er_iv er_iv_sub(er_iv a, er_iv b) { return (er_iv){ er__dn(a.lo - b.hi), er__up(a.hi - b.lo) }; }
static inline double er_lo2(double a, double b) { return a < b ? a : b; } /* finite operands: no NaN rule */
static inline double er_hi2(double a, double b) { return a > b ? a : b; }
static inline er_iv er_iv_mul(er_iv a, er_iv b) {
    double p0 = a.lo * b.lo, p1 = a.lo * b.hi, p2 = a.hi * b.lo, p3 = a.hi * b.hi;
    return (er_iv){ er__dn(er_lo2(er_lo2(p0, p1), er_lo2(p2, p3))), er__up(er_hi2(er_hi2(p0, p1), er_hi2(p2, p3))) };
}
static er_iv er_iv_mpfr(mpfr_srcptr x) { return (er_iv){ mpfr_get_d(x, MPFR_RNDD), mpfr_get_d(x, MPFR_RNDU) }; }
static double er_max1(double a) { return a > 1 ? a : 1; }

/* A row's sums B = sum g_j and C = sum g_j d_j: enclosures (from sums in double, Lemma N4; `tight`: from the exact
 * accumulator, within 2^-63; `exact`: from the exact values Bx, Cx), the same as centres and radii (|B - B0| <= Bk),
 * and the sums of |g_j| and |g_j d_j| and the largest |g|, |d|, |w|, |dy|, all rounded up. */
typedef struct er_nbwd_rowsum {
    er_iv B, C;
    double B0, Bk, C0, Ck;
    int tight, exact;
    mpfr_t Bx, Cx;
    double sb, sc, gm, dm, wm, ym;
} er_nbwd_rowsum;

/* An interval as a centre c (its midpoint in double) and a radius k >= max(c - lo, hi - c). */
static void er_iv_cr(er_iv a, double *c, double *k) {
    *c = 0.5 * a.lo + 0.5 * a.hi;
    *k = er_hi2(er__up(*c - a.lo), er__up(a.hi - *c));
}

/* The accumulator for sums of products of up to three values of F (F of at most 26 bits: a product of two is a
 * double): every such product is a multiple of 2^(3 q), q = F's least exponent of a last bit, and below
 * 2^(3 (emax + 2)). */
static er_status er_nbwd_acc(er_acc *a, const er_fmt_info *F) {
    int64_t q = F->emin - F->p + 1;
    return er__acc_init(a, 3 * q - 64, 3 * (int64_t)(F->emax + 2) + 128);
}

/* Adds a b exactly (doubles whose product's last set bit is at least the accumulator's base): the 106-bit product
 * of their significands, its trailing zeros shifted out (the significands' unit lies up to 52 bits below their last
 * set bit each, which may be below the base). */
static void er_acc_add_prod(er_acc *acc, double a, double b) {
    if (a == 0 || b == 0) return;
    uint64_t ba = er__bits(a), bb = er__bits(b);
    int64_t ea = (int64_t)((ba >> 52) & 0x7ff), eb = (int64_t)((bb >> 52) & 0x7ff);
    uint64_t ma = (ba & ((UINT64_C(1) << 52) - 1)) | ((uint64_t)(ea != 0) << 52),
             mb = (bb & ((UINT64_C(1) << 52) - 1)) | ((uint64_t)(eb != 0) << 52);
    int za = __builtin_ctzll(ma), zb = __builtin_ctzll(mb);
    er__acc_add_u128(acc, (int)((ba ^ bb) >> 63), (unsigned __int128)(ma >> za) * (mb >> zb),
                     (ea ? ea : 1) - 1075 + za + (eb ? eb : 1) - 1075 + zb);
}


/* The accumulator's exact sum as an enclosure in double (its summary: 64 bits and a sticky bit); *xs, when not NULL,
 * gets the 64 bits as a number of MPFR (initialised here) and *st the sticky bit. */
static er_iv er_acc_iv(er_acc *acc, mpfr_t *xs, int *st) {
    int neg, sticky;
    uint64_t m;
    int64_t e;
    er__acc_summary(acc, &neg, &m, &e, &sticky);
    er__acc_reset(acc);
    if (xs) {
        mpfr_init2(*xs, 64);
        mpfr_set_uj_2exp(*xs, m, (intmax_t)e, MPFR_RNDN); /* exact */
        if (neg) mpfr_neg(*xs, *xs, MPFR_RNDN);
        *st = sticky;
    }
    double lo = er__dn(ldexp((double)m, (int)e)), hi = er__up(ldexp((double)m + (double)sticky, (int)e));
    if (m == 0) lo = hi = 0;
    return neg ? (er_iv){ -hi, -lo } : (er_iv){ lo, hi };
}

/* The exact B and C with MPFR (the fallback: fp64 data, or an element whose rounding the enclosures leave open). */
static er_status er_nbwd_exact_sums(const er_nbwd_plan *pl, const double *dy, const double *x, const double *w,
                                    double m, int64_t n, er_nbwd_rowsum *rs) {
    er_terms T;
    ER_RETURN_IF_ERROR(er_terms_init(&T, n));
    mpfr_inits2(2, rs->Bx, rs->Cx, (mpfr_ptr)0);
    for (int64_t j = 0; j < n && pl->centered; j++) er_term(T.t[j], w ? w[j] : 1.0, dy[j], 0.0, 1.0);
    if (pl->centered) er_exact_sum(rs->Bx, T.t, T.p, n);
    else mpfr_set_zero(rs->Bx, 1);
    for (int64_t j = 0; j < n; j++) er_term(T.t[j], dy[j], x[j], m, w ? w[j] : 1.0);
    er_exact_sum(rs->Cx, T.t, T.p, n);
    er_terms_clear(&T);
    rs->exact = 1;
    return ER_OK;
}

/* The compensated sums of a row for F of at most 26 bits (Lemma N6): B's terms g_j = w_j dy_j (exact) and C's
 * g_j (x_j - m) (er__csum_add_prod), each in four cascades of two-sums over j mod 4 joined by two-sums at the end (a
 * tree of two-sums, as Lemma N6 allows), with the sums of |g| and of C's main terms' magnitudes and the largest |g|,
 * |x - m|, |w| and |dy|. Four independent cascades vectorise (core/internal.h). */
typedef struct er_nbwd_csums {
    er_csum B, C;
    double sb, sc, gm, dm, wm, ym;
} er_nbwd_csums;
#define ER_NBWD_LANE(l, j)                                                                                            \
    do {                                                                                                              \
        double wj = hasw ? w[j] : 1.0, g = wj * dy[j], d, dl, e, ag = fabs(g), aw = fabs(wj), ay = fabs(dy[j]);       \
        er__two_sum(x[j], -m, &d, &dl); /* x - m = d + dl: er__csum_add_prod's terms, in lanes of their own */        \
        double a = g * d, small = fma(g, d, -a) + g * dl, ad = fabs(d);                                               \
        er__two_sum(Bs[l], g, &Bs[l], &e);                                                                            \
        Bb[l] += e + 0.0;                                                                                             \
        er__two_sum(Cs[l], a, &Cs[l], &e);                                                                            \
        Cb[l] += e + small;                                                                                           \
        sc[l] += fabs(a);                                                                                             \
        sb[l] += ag;                                                                                                  \
        gm[l] = ag > gm[l] ? ag : gm[l];                                                                              \
        dm[l] = ad > dm[l] ? ad : dm[l];                                                                              \
        wm[l] = aw > wm[l] ? aw : wm[l];                                                                              \
        ym[l] = ay > ym[l] ? ay : ym[l];                                                                              \
    } while (0)
ER_ALWAYS_INLINE void er_nbwd_csum_body(const double *restrict dy, const double *restrict x,
                                        const double *restrict w, int hasw, double m, int64_t n, er_nbwd_csums *o) {
    double Bs[4] = { 0 }, Bb[4] = { 0 }, Cs[4] = { 0 }, Cb[4] = { 0 };
    double sb[4] = { 0 }, sc[4] = { 0 }, gm[4] = { 0 }, dm[4] = { 0 }, wm[4] = { 0 }, ym[4] = { 0 };
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
        for (int l = 0; l < 4; l++) ER_NBWD_LANE(l, j + l);
    for (; j < n; j++) ER_NBWD_LANE(0, j);
    o->B = (er_csum){ Bs[0], Bb[0] };
    o->C = (er_csum){ Cs[0], Cb[0] };
    o->sb = sb[0];
    o->sc = sc[0];
    o->gm = gm[0];
    o->dm = dm[0];
    o->wm = wm[0];
    o->ym = ym[0];
    for (int l = 1; l < 4; l++) {
        er__csum_add(&o->B, Bs[l], Bb[l]);
        er__csum_add(&o->C, Cs[l], Cb[l]);
        o->sb += sb[l];
        o->sc += sc[l];
        o->gm = gm[l] > o->gm ? gm[l] : o->gm;
        o->dm = dm[l] > o->dm ? dm[l] : o->dm;
        o->wm = wm[l] > o->wm ? wm[l] : o->wm;
        o->ym = ym[l] > o->ym ? ym[l] : o->ym;
    }
}
#undef ER_NBWD_LANE
ER_ALWAYS_INLINE void er_nbwd_csum_any(const double *restrict dy, const double *restrict x, const double *restrict w,
                                      double m, int64_t n, er_nbwd_csums *o) {
    if (w) er_nbwd_csum_body(dy, x, w, 1, m, n, o);
    else er_nbwd_csum_body(dy, x, w, 0, m, n, o);
}
ER_SIMD_BUILDS(er_nbwd_csum_row,
               (const double *restrict dy, const double *restrict x, const double *restrict w, double m, int64_t n,
                er_nbwd_csums *o),
               (dy, x, w, m, n, o), er_nbwd_csum_any)

/* The row's bounds, and B's and C's enclosures from sums in double (Lemma N4): each term passes through at most
 * n + 2 roundings to nearest (g, d, g d and n - 1 additions), so the sums are within gamma_{n+2} of the sums of the
 * magnitudes, and gamma_{n+2} <= K = (n + 4) 2^-52. For F of at most 26 bits (g = w dy exact, every part of
 * g (x - m) at least 2^-900) the centres are compensated sums with Lemma N6's radii, far narrower. Returns whether
 * dy, x and w hold finite values alone: with compensated sums, whether the sums of |g| and |g d| are finite (a NaN or
 * an infinity among the inputs makes g or g d one, inf 0 included; finite values of such an F keep every sum below
 * 2^967); else from the values themselves. */
static int er_nbwd_rowsums(const er_nbwd_plan *pl, const double *dy, const double *x, const double *w, double m,
                            int64_t n, er_nbwd_rowsum *rs) {
    double B0 = 0, C0 = 0, sb = 0, sc = 0, gm = 0, dm = 0, wm = 0, ym = 0;
    er_csum Bc = { 0, 0 }, Cc = { 0, 0 };
    int comp = er__nbwd_compensated(pl->F), finite = 1;
    if (comp) {
        er_nbwd_csums o;
        er_nbwd_csum_row(pl->simd, dy, x, w, m, n, &o);
        Bc = o.B;
        Cc = o.C;
        sb = o.sb;
        sc = o.sc;
        gm = o.gm;
        dm = o.dm;
        wm = o.wm;
        ym = o.ym;
        finite = (fabs(sb) <= DBL_MAX) & (fabs(sc) <= DBL_MAX);
    } else {
        finite = er_nbwd_finite(pl->simd, dy, x, w, n);
        for (int64_t j = 0; j < n && finite; j++) {
            double wj = w ? w[j] : 1.0, g = wj * dy[j], d = x[j] - m, gd = g * d;
            double ag = fabs(g), ad = fabs(d), aw = fabs(wj), ay = fabs(dy[j]);
            B0 += g;
            C0 += gd;
            sb += ag;
            sc += fabs(gd);
            gm = ag > gm ? ag : gm;
            dm = ad > dm ? ad : dm;
            wm = aw > wm ? aw : wm;
            ym = ay > ym ? ay : ym;
        }
    }
    /* an underflowing product (g, g d: a compute format wider than 26 bits) is off by at most 2^-1075 more, g's then
     * multiplied by d */
    double K = (double)(n + 4) * 0x1p-52;
    rs->dm = er__up(dm * (1.0 + 0x1p-52));
    double U = er__mul_up((double)n * 0x1p-1073, er__add_up(1.0, rs->dm));
    rs->sb = er__add_up(er__up(sb * (1.0 + K)), U);
    rs->sc = er__add_up(er__up(sc * (1.0 + K)), U);
    rs->gm = er__add_up(er__up(gm * (1.0 + 0x1p-52)), 0x1p-1074); /* g and d rounded once each */
    rs->wm = wm;
    rs->ym = ym;
    if (comp) { /* Lemma N6: B's terms exact (no companion), C's by er__csum_add_prod */
        B0 = Bc.s + Bc.b;
        C0 = Cc.s + Cc.b;
        rs->Bk = er__csum_radius(n, 2, 0.0, rs->sb, B0);
        rs->Ck = er__csum_radius(n, 3, 0x1p-50, rs->sc, C0);
    } else {
        rs->Bk = er__add_up(er__mul_up(K, rs->sb), U);
        rs->Ck = er__add_up(er__mul_up(K, rs->sc), U);
    }
    rs->B0 = pl->centered ? B0 : 0.0;
    rs->Bk = pl->centered ? rs->Bk : 0.0;
    rs->C0 = C0;
    rs->B = (er_iv){ er__dn(rs->B0 - rs->Bk), er__up(rs->B0 + rs->Bk) };
    rs->C = (er_iv){ er__dn(rs->C0 - rs->Ck), er__up(rs->C0 + rs->Ck) };
    rs->tight = rs->exact = 0;
    return finite;
}

/* B's and C's enclosures narrowed for the exact results: from the exact accumulator for F of at most 26 bits (within
 * 2^-63), else from the exact sums. */
static er_status er_nbwd_tighten(const er_nbwd_plan *pl, const double *dy, const double *x, const double *w, double m,
                                 int64_t n, er_nbwd_rowsum *rs) {
    rs->tight = 1;
    if (pl->F->p > 26) {
        if (!rs->exact) ER_RETURN_IF_ERROR(er_nbwd_exact_sums(pl, dy, x, w, m, n, rs));
        rs->B = er_iv_mpfr(rs->Bx);
        rs->C = er_iv_mpfr(rs->Cx);
    } else {
        er_acc acc;
        ER_RETURN_IF_ERROR(er_nbwd_acc(&acc, pl->F));
        for (int64_t j = 0; j < n && pl->centered; j++) er_acc_add_prod(&acc, w ? w[j] : 1.0, dy[j]);
        rs->B = er_acc_iv(&acc, NULL, NULL);
        for (int64_t j = 0; j < n; j++) {
            double hi, lo, g = (w ? w[j] : 1.0) * dy[j]; /* exact: two values of at most 26 bits */
            er__two_sum(x[j], -m, &hi, &lo); /* x - m = hi + lo exactly */
            er_acc_add_prod(&acc, g, hi);
            er_acc_add_prod(&acc, g, lo);
        }
        rs->C = er_acc_iv(&acc, NULL, NULL);
        er__acc_free(&acc);
    }
    er_iv_cr(rs->B, &rs->B0, &rs->Bk);
    er_iv_cr(rs->C, &rs->C0, &rs->Ck);
    return ER_OK;
}

/* dx_i's exact value n dx_i = r (n g_i - B) - r^3 d_i C, divided by n: Ziv's loop on the quotient's directed
 * roundings (exact at once when n is a power of two; else the quotient is not a midpoint of O, so the two ends
 * round alike at some precision). */
static void er_nbwd_exact(const er_nbwd_plan *pl, const er_nbwd_rowsum *rs, double dy, double x, double w, double m,
                          double r, int64_t n, double *ex, double *rd) {
    mpfr_t t[3], y, q[2];
    mpfr_ptr p[3];
    for (int k = 0; k < 3; k++) mpfr_init2(t[k], 2);
    er_term(t[0], w, dy, 0.0, r); /* r g_i */
    mpfr_prec_round(t[0], mpfr_get_prec(t[0]) + 64, MPFR_RNDN);
    mpfr_mul_si(t[0], t[0], (long)n, MPFR_RNDN); /* exact: n < 2^63 */
    mpfr_set_prec(t[1], mpfr_get_prec(rs->Bx) + 54);
    mpfr_mul_d(t[1], rs->Bx, -r, MPFR_RNDN); /* exact */
    er_term(t[2], r, x, m, r);               /* r^2 d_i */
    mpfr_prec_round(t[2], mpfr_get_prec(t[2]) + 54 + mpfr_get_prec(rs->Cx), MPFR_RNDN);
    mpfr_mul_d(t[2], t[2], -r, MPFR_RNDN);   /* exact */
    mpfr_mul(t[2], t[2], rs->Cx, MPFR_RNDN); /* exact: the precision holds both factors */
    mpfr_init2(y, 2);
    er_exact_sum(y, t, p, 3);
    for (mpfr_prec_t pr = pl->O->p + 64;; pr *= 2) {
        mpfr_inits2(pr, q[0], q[1], (mpfr_ptr)0);
        mpfr_div_si(q[0], y, (long)n, MPFR_RNDD);
        mpfr_div_si(q[1], y, (long)n, MPFR_RNDU);
        double a = er__round_mpfr(pl->O, q[0], ER_ROUND_NEAREST, pl->ov),
               b = er__round_mpfr(pl->O, q[1], ER_ROUND_NEAREST, pl->ov);
        double da = mpfr_get_d(q[0], MPFR_RNDN), db = mpfr_get_d(q[1], MPFR_RNDN);
        mpfr_clears(q[0], q[1], (mpfr_ptr)0);
        if ((a == b && da == db && signbit(a) == signbit(b)) || pr > 65536) {
            *rd = a;
            *ex = da;
            break;
        }
    }
    for (int k = 0; k < 3; k++) mpfr_clear(t[k]);
    mpfr_clear(y);
}

er_status er__nbwd_own_rstd(const double *x, int64_t n, double eps, mpfr_t S, double *lo, double *hi) {
    er_terms T;
    mpfr_set_prec(S, 2);
    mpfr_set_zero(S, 1);
    *lo = 0;
    *hi = INFINITY;
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(x[j])) return ER_OK; /* no exact value (the row claims nothing) */
    ER_RETURN_IF_ERROR(er_terms_init(&T, n));
    for (int64_t j = 0; j < n; j++) er_term(T.t[j], x[j], x[j], 0.0, 1.0);
    er_exact_sum(S, T.t, T.p, n);
    er_terms_clear(&T);
    mpfr_t v;
    mpfr_init2(v, 128);
    for (int up = 0; up < 2; up++) { /* rsqrt decreases in v: the upper end from v rounded down */
        mpfr_div_si(v, S, (long)(n ? n : 1), up ? MPFR_RNDD : MPFR_RNDU);
        mpfr_add_d(v, v, eps, up ? MPFR_RNDD : MPFR_RNDU);
        if (mpfr_zero_p(v)) {
            *hi = INFINITY;
            continue;
        }
        mpfr_rec_sqrt(v, v, up ? MPFR_RNDU : MPFR_RNDD);
        if (up) *hi = mpfr_get_d(v, MPFR_RNDU);
        else *lo = mpfr_get_d(v, MPFR_RNDD);
    }
    mpfr_clear(v);
    return ER_OK;
}

/* rstd = 1/sqrt(S/n + eps) at precision p enclosed in [lo, hi] (MPFR numbers initialised by the caller; S/n + eps
 * > 0). */
static void er_own_r_at(const mpfr_t S, int64_t n, double eps, mpfr_prec_t p, mpfr_t lo, mpfr_t hi) {
    mpfr_set_prec(lo, p);
    mpfr_set_prec(hi, p);
    mpfr_div_si(lo, S, (long)n, MPFR_RNDU);
    mpfr_add_d(lo, lo, eps, MPFR_RNDU);
    mpfr_rec_sqrt(lo, lo, MPFR_RNDD);
    mpfr_div_si(hi, S, (long)n, MPFR_RNDD);
    mpfr_add_d(hi, hi, eps, MPFR_RNDD);
    mpfr_rec_sqrt(hi, hi, MPFR_RNDU);
}

/* Rounds [lo, hi] into O; 1 (and *rd, *ex) when both ends round alike. */
static int er_ends_alike(const er_nbwd_plan *pl, const mpfr_t lo, const mpfr_t hi, double *ex, double *rd) {
    double a = er__round_mpfr(pl->O, lo, ER_ROUND_NEAREST, pl->ov),
           b = er__round_mpfr(pl->O, hi, ER_ROUND_NEAREST, pl->ov);
    double da = mpfr_get_d(lo, MPFR_RNDN), db = mpfr_get_d(hi, MPFR_RNDN);
    *rd = a;
    *ex = da;
    return a == b && da == db && signbit(a) == signbit(b);
}

/* rmsnorm's own-rstd dx_i exactly: dx = r^3 Q / n with Q = g (S + n eps) - x C exact (r^2 = 1/v, v = S/n + eps);
 * Q = 0 is an exact zero, else Ziv's loop on rstd's enclosures (an irrational r never ties; a rational one is exact
 * at some precision). */
static void er_nbwd_exact_own(const er_nbwd_plan *pl, const er_nbwd_rowsum *rs, const mpfr_t S, double dy, double x,
                              double w, int64_t n, double *ex, double *rd) {
    if (mpfr_zero_p(S) && pl->eps == 0) { /* rstd = 1/0: no exact value */
        *ex = *rd = NAN;
        return;
    }
    mpfr_t t[2], q, ne, lo, hi;
    mpfr_ptr p[2];
    mpfr_inits2(2, t[0], t[1], q, (mpfr_ptr)0);
    mpfr_init2(ne, 64 + 64);
    mpfr_set_d(ne, pl->eps, MPFR_RNDN);
    mpfr_mul_si(ne, ne, (long)n, MPFR_RNDN); /* exact: 53 + 63 bits */
    mpfr_t tt[2];
    mpfr_ptr tp[2];
    mpfr_init2(tt[0], mpfr_get_prec(S));
    mpfr_set(tt[0], S, MPFR_RNDN);
    mpfr_init2(tt[1], mpfr_get_prec(ne));
    mpfr_set(tt[1], ne, MPFR_RNDN);
    mpfr_t T;
    mpfr_init2(T, 2);
    er_exact_sum(T, tt, tp, 2);     /* S + n eps */
    er_term(t[0], w, dy, 0.0, 1.0); /* g */
    mpfr_prec_round(t[0], mpfr_get_prec(t[0]) + mpfr_get_prec(T), MPFR_RNDN);
    mpfr_mul(t[0], t[0], T, MPFR_RNDN); /* exact */
    mpfr_set_prec(t[1], mpfr_get_prec(rs->Cx) + 54);
    mpfr_mul_d(t[1], rs->Cx, -x, MPFR_RNDN); /* exact */
    er_exact_sum(q, t, p, 2);
    if (mpfr_zero_p(q)) {
        *ex = 0.0;
        *rd = er__round_double(pl->O, 0.0, ER_ROUND_NEAREST, pl->ov);
    } else {
        mpfr_inits2(2, lo, hi, (mpfr_ptr)0);
        mpfr_t a, b;
        for (mpfr_prec_t pr = pl->O->p + 64;; pr *= 2) {
            er_own_r_at(S, n, pl->eps, pr, lo, hi);
            mpfr_inits2(pr + 8, a, b, (mpfr_ptr)0);
            mpfr_pow_ui(a, lo, 3, MPFR_RNDD);
            mpfr_pow_ui(b, hi, 3, MPFR_RNDU);
            if (mpfr_sgn(q) > 0) { /* Q a <= n dx <= Q b */
                mpfr_mul(a, a, q, MPFR_RNDD);
                mpfr_mul(b, b, q, MPFR_RNDU);
            } else { /* Q b <= n dx <= Q a */
                mpfr_mul(a, a, q, MPFR_RNDU);
                mpfr_mul(b, b, q, MPFR_RNDD);
                mpfr_swap(a, b);
            }
            mpfr_div_si(a, a, (long)n, MPFR_RNDD);
            mpfr_div_si(b, b, (long)n, MPFR_RNDU);
            int done = er_ends_alike(pl, a, b, ex, rd) || pr > 65536;
            mpfr_clears(a, b, (mpfr_ptr)0);
            if (done) break;
        }
        mpfr_clears(lo, hi, (mpfr_ptr)0);
    }
    mpfr_clears(t[0], t[1], q, ne, tt[0], tt[1], T, (mpfr_ptr)0);
}

/* Theorem N1's half-width of a row, W_i = g0 |r g_i| + wb + wc |d_i| + H: its row parts for |r| <= ar; 0 when the
 * row claims nothing (a bound not finite, or an intermediate that may overflow F). */
typedef struct er_nbwd_width {
    double g0, wb, wc, H;
} er_nbwd_width;

static int er_nbwd_width_of(const er_nbwd_plan *pl, const er_nbwd_rowsum *rs, double ar, int64_t n, er_nbwd_width *W) {
    const er_fmt_info *F = pl->F;
    double nd = (double)n, r3 = er__mul_up(er__mul_up(ar, ar), ar);
    double gs = er__gamma(F, ER_NBWD_DX_ROUNDINGS + (double)(pl->depth ? pl->depth : n - 1));
    W->g0 = er__gamma(F, ER_NBWD_DX_ROUNDINGS);
    /* the half-widths' row parts: gamma(16 + s) r sum|g| / n and gamma(16 + s) r^3 sum|g d| / n */
    W->wb = pl->centered ? er__mul_up(gs, er__up(er__mul_up(ar, rs->sb) / nd)) : 0.0;
    W->wc = er__mul_up(gs, er__up(er__mul_up(r3, rs->sc) / nd));
    /* underflow (Lemma N1's eta terms, Theorem N1): at most 5 n roundings inside the sums and 48 outside may
     * underflow, each by at most eta/2, then multiplied by a cofactor: some of r (up to five times), d (twice), g, w,
     * dy (Pt) and, outside the sums, B~, C~ and n with 1/n (Pe), each computed value within (1 + gamma_{16+s}) of
     * its bound, thirteen such factors at most */
    double grow = 1.0, g1 = er__add_up(1.0, gs), neta = er__mul_up(nd, F->min_sub);
    for (int k = 0; k < 13; k++) grow = er__mul_up(grow, g1);
    double Pt = 1.0, fac[9] = { ar, ar, ar, ar, rs->dm, rs->dm, rs->gm, rs->wm, rs->ym };
    for (int k = 0; k < 9; k++) Pt = er__mul_up(Pt, er_max1(fac[k]));
    double Pe = er__mul_up(er__mul_up(Pt, er_max1(ar)), er_max1(er__add_up(rs->sb, neta)));
    Pe = er__mul_up(Pe, er_max1(er__mul_up(er__add_up(rs->sc, neta), er_max1(ar))));
    W->H = er__mul_up(er__mul_up(0.5 * F->min_sub, grow), er__add_up(er__mul_up(5.0 * nd, Pt), er__mul_up(96.0, Pe)));
    /* every intermediate of the model's forms below F's largest value (no overflow) */
    double big1 = er__add_up(er__add_up(er__mul_up(nd, rs->gm), rs->sb),
                             er__mul_up(er__mul_up(rs->dm, er__mul_up(ar, ar)), rs->sc)),
           big = fmax(big1, er__mul_up(er__mul_up(r3, er_max1(rs->sc)), er_max1(rs->dm)));
    return isfinite(W->H) && isfinite(W->wb) && isfinite(W->wc) && er__mul_up(4.0, big) <= F->max;
}

/* A row with a saved rstd r: B/n and r^3 C/n as centres and radii, and the coefficients of E_i = a |g_i| + b |d_i| +
 * c, which bounds |c_i - dx_i| for the centre c_i = r (g_i - B/n~) - d_i (r^3 C/n)~ computed in double (Lemma N5). */
typedef struct er_nbwd_ctr {
    double bnm, rcm, a, b, c;
} er_nbwd_ctr;

#define ER_NBWD_INFLATE (1.0 + 0x1p-48) /* a coefficient's margin over the roundings of the sum it enters */

static void er_nbwd_ctr_of(const er_nbwd_rowsum *rs, double r, int64_t n, er_nbwd_ctr *k) {
    er_iv invn = { er__dn(1.0 / (double)n), er__up(1.0 / (double)n) }, riv = { r, r };
    double bnr, rcr, ar = fabs(r);
    er_iv_cr(er_iv_mul(rs->B, invn), &k->bnm, &bnr);
    er_iv_cr(er_iv_mul(er_iv_mul(er_iv_mul(er_iv_mul(riv, riv), riv), rs->C), invn), &k->rcm, &rcr);
    k->a = er__mul_up(er__mul_up(0x1p-50, ar), ER_NBWD_INFLATE);
    k->b = er__mul_up(er__add_up(er__mul_up(rcr, 1.0 + 0x1p-52), er__mul_up(0x1p-51, fabs(k->rcm))), ER_NBWD_INFLATE);
    k->c = er__add_up(
        er__mul_up(er__add_up(er__mul_up(ar, bnr), er__mul_up(er__mul_up(0x1p-51, ar), fabs(k->bnm))), ER_NBWD_INFLATE),
        er__add_up(0x1p-1068, er__mul_up(ar, 0x1p-1073)));
}

/* The exact result from its enclosure [lo, hi] where both ends round alike into O (and it holds no zero); 0 when
 * they do not. */
static int er_nbwd_decided(const er_nbwd_plan *pl, double lo, double hi, double *ex, double *rd) {
    double a = er__round_double(pl->O, lo, ER_ROUND_NEAREST, pl->ov),
           b = er__round_double(pl->O, hi, ER_ROUND_NEAREST, pl->ov);
    if (!(isfinite(lo) && isfinite(hi) && a == b && (lo > 0 || hi < 0))) return 0;
    *rd = a;
    *ex = 0.5 * lo + 0.5 * hi;
    return 1;
}

/* The fp32 pass over a row (sets and outputs fp32, the row's bounds finite): for each element its set's double ends
 * [lo, hi] (c_i -+ T_i, each moved outward by er__dn_wide and er__up_wide), the rounding rd of its exact value's
 * enclosure [c_i - E_i, c_i + E_i] and, where that enclosure decides it (both ends round alike, no zero inside) and
 * the set is within fp32's range, the midpoint in ex (else NaN) and the class of y: 0 where y is rd, 1 where y lies
 * in [lo, hi], ER_NBWD_PENDING else, plus 256 times the widest-set screen's mark (er__nbwd_wider, for wide), in
 * code (codes in double: bytes would make GCC take 32 elements a step, their doubles spilled, and integers of
 * another width keep it from vectorising; er_nbwd_unpack splits them). Written to vectorise: no call and no branch
 * on the data. */
ER_ALWAYS_INLINE void er_nbwd_f32_body(int64_t n, const double *restrict dy, const double *restrict x,
                                       const double *restrict w, int hasw, double m, double r, const er_nbwd_ctr *kp,
                                       double A1, double A2, double A3, const double *restrict y, int hascls,
                                       double *restrict lo, double *restrict hi, double *restrict ex,
                                       double *restrict rd, double *restrict code, double vrel, double vabs,
                                       double wide) {
    const er_nbwd_ctr k = *kp;
    for (int64_t i = 0; i < n; i++) {
        double g = (hasw ? w[i] : 1.0) * dy[i], d = x[i] - m, ag = fabs(g), ad = fabs(d);
        double c = r * (g - k.bnm) - d * k.rcm, T = A1 * ag + A2 * ad + A3;
        double l = er__dn_wide(c - T), h = er__up_wide(c + T);
        double E = k.a * ag + k.b * ad + k.c, el = er__dn_wide(c - E), eh = er__up_wide(c + E);
        int ok = (fabs(l) <= FLT_MAX) & (fabs(h) <= FLT_MAX);
        el = ok ? el : 0.0; /* out of range: left to the loop after the pass (and never converted) */
        eh = ok ? eh : 0.0;
        double a = (double)(float)el, b = (double)(float)eh; /* to nearest in fp32: within range */
        ok &= (a == b) & ((el > 0) | (eh < 0));
        lo[i] = l;
        hi[i] = h;
        rd[i] = a;
        ex[i] = ok ? 0.5 * el + 0.5 * eh : NAN;
        if (hascls) {
            double yi = y[i];
            /* nested selects on the comparisons (GCC vectorises this form, not ints combined first) */
            code[i] = (ok ? (yi == a ? 0.0 : ((yi >= l) & (yi <= h)) ? 1.0 : ER_NBWD_PENDING) : ER_NBWD_PENDING) +
                      (er__nbwd_wider(l, h, a, vrel, vabs, wide) ? 256.0 : 0.0);
        }
    }
}
#define ER_NBWD_F32_ARGS                                                                                              \
    int64_t n, const double *restrict dy, const double *restrict x, const double *restrict w, double m, double r,     \
        const er_nbwd_ctr *k, double A1, double A2, double A3, const double *restrict y, double *restrict lo,         \
        double *restrict hi, double *restrict ex, double *restrict rd, double *restrict code, double vrel,          \
        double vabs, double wide
#define ER_NBWD_F32_CALL(hw, hc)                                                                                      \
    er_nbwd_f32_body(n, dy, x, w, hw, m, r, k, A1, A2, A3, y, hc, lo, hi, ex, rd, code, vrel, vabs, wide)
#define ER_NBWD_F32_BODY                                                                                              \
    {                                                                                                                 \
        if (w && code) ER_NBWD_F32_CALL(1, 1);                                                                        \
        else if (w) ER_NBWD_F32_CALL(1, 0);                                                                           \
        else if (code) ER_NBWD_F32_CALL(0, 1);                                                                        \
        else ER_NBWD_F32_CALL(0, 0);                                                                                  \
    }
ER_ALWAYS_INLINE void er_nbwd_f32_any(ER_NBWD_F32_ARGS) ER_NBWD_F32_BODY
ER_SIMD_BUILDS(er_nbwd_f32, (ER_NBWD_F32_ARGS),
               (n, dy, x, w, m, r, k, A1, A2, A3, y, lo, hi, ex, rd, code, vrel, vabs, wide), er_nbwd_f32_any)

/* The fp32 pass's codes (small integers, exact in double) split into the classes and the marks; returns the count of
 * pending elements (in runs of at most 2^20, so that the count vectorises). */
ER_ALWAYS_INLINE int64_t er_nbwd_unpack_body(int64_t n, const double *restrict code, uint8_t *restrict cls,
                                             uint8_t *restrict mark) {
    int64_t left = 0;
    for (int64_t i0 = 0; i0 < n; i0 += INT64_C(1) << 20) {
        int32_t c = 0;
        int64_t i1 = n - i0 < (INT64_C(1) << 20) ? n : i0 + (INT64_C(1) << 20);
        for (int64_t i = i0; i < i1; i++) {
            int32_t v = (int32_t)code[i], k = v & 0xFF;
            cls[i] = (uint8_t)k;
            mark[i] = (uint8_t)(v >> 8);
            c += k == ER_NBWD_PENDING;
        }
        left += c;
    }
    return left;
}
ER_SIMD_BUILDS_RET(int64_t, er_nbwd_unpack, (int64_t n, const double *code, uint8_t *cls, uint8_t *mark),
                   (n, code, cls, mark), er_nbwd_unpack_body)

/* dx of a row with a saved rstd r: each element's set [c_i - T_i, c_i + T_i], T_i = E_i + W_i (Lemma N5, Theorem
 * N1), and its exact value from [c_i - E_i, c_i + E_i], else from B's and C's narrower enclosures, else exactly. */
static er_status er_nbwd_row_saved(const er_nbwd_plan *pl, er_nbwd_rowsum *rs, const double *dy, const double *x,
                                   const double *w, double m, double r, int64_t n, const double *y, uint8_t *cls,
                                   er_cval *cv, double *ex, double *rd, double *lo, double *hi, er_nbwd_marks *mk) {
    const er_fmt_info *F = pl->F;
    er_nbwd_width W;
    er_nbwd_ctr k, kx; /* the sets' constants; the exact values' (narrowed when a row needs it) */
    double ar = fabs(r);
    int fin = er_nbwd_width_of(pl, rs, ar, n, &W);
    er_nbwd_ctr_of(rs, r, n, &k);
    kx = k;
    /* T_i = A1 |g_i| + A2 |d_i| + A3: E_i's coefficients with W_i's (|g| and |d| exact within a rounding) */
    double A1 = er__mul_up(er__add_up(k.a, er__mul_up(er__mul_up(W.g0, ar), 1.0 + 0x1p-52)), ER_NBWD_INFLATE),
           A2 = er__mul_up(er__add_up(k.b, er__mul_up(W.wc, 1.0 + 0x1p-52)), ER_NBWD_INFLATE),
           A3 = er__add_up(er__mul_up(er__add_up(k.c, er__add_up(W.wb, W.H)), ER_NBWD_INFLATE), 0x1p-1068);
    er_status st = ER_OK;
    /* fp32 sets and outputs: every element whose set is within fp32's range and whose exact value its double
     * enclosure decides, in one pass (er_nbwd_f32); the others (ex NaN) in the loop below. Classes wanted: a decided
     * element's cv is left to er__nbwd_set on [lo, hi] */
    int f32 = fin && F->id == ER_FP32 && pl->O->id == ER_FP32;
    int64_t left = n; /* elements the loop below must see: all but the pass's classed ones */
    if (f32) {
        double vrel = mk ? mk->vrel : 0, vabs = mk ? mk->vabs : 0, wide = mk ? mk->wide : 0;
        double *code = cls && mk ? mk->code : NULL;
        if (cls && !(mk && mk->mark && mk->code))
            return er__fail(ER_ERR_INTERNAL, "the fp32 pass of a row with classes needs its marks");
        er_nbwd_f32(pl->simd, n, dy, x, w, m, r, &k, A1, A2, A3, y, lo, hi, ex, rd, code, vrel, vabs, wide);
        if (cls) left = er_nbwd_unpack(pl->simd, n, code, cls, mk->mark);
        if (mk) mk->done = cls != NULL;
    }
    for (int64_t i = 0; i < n && st == ER_OK && left > 0; i++) {
        if (f32 && ex[i] == ex[i]) {
            if (!cls || cls[i] == ER_NBWD_PENDING) {
                er__nbwd_set(&cv[i], F, lo[i], hi[i]);
                left--;
            }
            continue;
        }
        left--;
        double wi = w ? w[i] : 1.0, g = wi * dy[i], d = x[i] - m, ag = fabs(g), ad = fabs(d);
        double c = r * (g - k.bnm) - d * k.rcm, T = A1 * ag + A2 * ad + A3;
        lo[i] = er__dn(c - T);
        hi[i] = er__up(c + T);
        int finite = fin ? er__nbwd_set(&cv[i], F, lo[i], hi[i]) : (er__cval_anything(&cv[i], F), 0);
        double E = k.a * ag + k.b * ad + k.c;
        if (!er_nbwd_decided(pl, er__dn(c - E), er__up(c + E), &ex[i], &rd[i])) {
            if (!rs->tight) {
                st = er_nbwd_tighten(pl, dy, x, w, m, n, rs);
                er_nbwd_ctr_of(rs, r, n, &kx);
            }
            double cx = r * (g - kx.bnm) - d * kx.rcm, Ex = kx.a * ag + kx.b * ad + kx.c;
            if (st == ER_OK && !er_nbwd_decided(pl, er__dn(cx - Ex), er__up(cx + Ex), &ex[i], &rd[i])) {
                if (!rs->exact) st = er_nbwd_exact_sums(pl, dy, x, w, m, n, rs);
                if (st == ER_OK) er_nbwd_exact(pl, rs, dy[i], x[i], wi, m, r, n, &ex[i], &rd[i]);
            }
        }
        /* the output's class where the set decides it: the output set is [lo, hi]'s values of O joined with rd, O's
         * values being F's */
        if (cls)
            cls[i] = !finite || !(y[i] == y[i]) ? ER_NBWD_PENDING
                     : y[i] == rd[i]            ? 0
                     : y[i] >= lo[i] && y[i] <= hi[i] ? 1
                                                      : ER_NBWD_PENDING;
    }
    return st;
}

/* dx of a row without a saved rstd (rmsnorm, Theorem N3): r anywhere in [rlo, rhi], the sets by interval arithmetic
 * over it; the exact values from the exact rstd's enclosure, else exactly. */
static er_status er_nbwd_row_own(const er_nbwd_plan *pl, er_nbwd_rowsum *rs, const double *dy, const double *x,
                                 const double *w, double rlo, double rhi, int64_t n, er_cval *cv, double *ex,
                                 double *rd) {
    const er_fmt_info *F = pl->F;
    er_nbwd_width W;
    double ar = fmax(fabs(rlo), fabs(rhi));
    int fin = er_nbwd_width_of(pl, rs, ar, n, &W);
    er_iv invn = { er__dn(1.0 / (double)n), er__up(1.0 / (double)n) }, riv = { rlo, rhi };
    er_iv rc = er_iv_mul(er_iv_mul(er_iv_mul(er_iv_mul(riv, riv), riv), rs->C), invn); /* r^3 C / n */
    /* the exact rstd's enclosure (the sets above hold every r of the forward model's set) */
    mpfr_t S;
    er_iv rx;
    mpfr_init2(S, 2);
    er_status st = er__nbwd_own_rstd(x, n, pl->eps, S, &rx.lo, &rx.hi);
    er_iv rxc = er_iv_mul(er_iv_mul(er_iv_mul(er_iv_mul(rx, rx), rx), rs->C), invn);
    for (int64_t i = 0; i < n && st == ER_OK; i++) {
        double wi = w ? w[i] : 1.0, g = wi * dy[i], dd = x[i];
        er_iv giv = { er__dn(g), er__up(g) }, div = { dd, dd };
        er_iv e = er_iv_sub(er_iv_mul(riv, giv), er_iv_mul(div, rc)); /* dx_i over r's set */
        if (fin) {
            double hw = er__add_up(er__add_up(er__mul_up(W.g0, er__mul_up(ar, fmax(fabs(giv.lo), fabs(giv.hi)))), W.wb),
                                   er__add_up(er__mul_up(W.wc, fabs(dd)), W.H));
            er__nbwd_set(&cv[i], F, er__dn(e.lo - hw), er__up(e.hi + hw));
        } else {
            er__cval_anything(&cv[i], F);
        }
        /* the exact result: from its enclosure where both ends round alike into O, else exactly */
        e = er_iv_sub(er_iv_mul(rx, giv), er_iv_mul(div, rxc));
        if (er_nbwd_decided(pl, e.lo, e.hi, &ex[i], &rd[i])) continue;
        if (!rs->tight) {
            st = er_nbwd_tighten(pl, dy, x, w, 0.0, n, rs);
            rxc = er_iv_mul(er_iv_mul(er_iv_mul(er_iv_mul(rx, rx), rx), rs->C), invn);
            e = er_iv_sub(er_iv_mul(rx, giv), er_iv_mul(div, rxc));
            if (st != ER_OK || er_nbwd_decided(pl, e.lo, e.hi, &ex[i], &rd[i])) continue;
        }
        if (!rs->exact) st = er_nbwd_exact_sums(pl, dy, x, w, 0.0, n, rs);
        if (st == ER_OK) er_nbwd_exact_own(pl, rs, S, dy[i], x[i], wi, n, &ex[i], &rd[i]);
    }
    mpfr_clear(S);
    return st;
}

int er__nbwd_decides(const er_nbwd_plan *pl) {
    const er_fmt_info *F = pl->F, *O = pl->O;
    return !pl->own && O->p <= F->p && O->emax <= F->emax && O->emin - O->p >= F->emin - F->p;
}

er_status er__nbwd_row(const er_nbwd_plan *pl, const double *dy, const double *x, const double *w, double m, double rlo,
                       double rhi, int64_t n, const double *y, uint8_t *cls, er_cval *cv, double *ex, double *rd,
                       double *lo, double *hi, er_nbwd_marks *mk) {
    const er_fmt_info *F = pl->F;
    if (mk) mk->done = 0;
    if (cls) memset(cls, ER_NBWD_PENDING, (size_t)n);
    if (!er__nbwd_decides(pl)) cls = NULL;
    if (!pl->centered) m = 0;
    er_nbwd_rowsum rs;
    int ok = isfinite(m) && isfinite(rlo) && isfinite(rhi) && er_nbwd_rowsums(pl, dy, x, w, m, n, &rs);
    if (!ok) {
        for (int64_t i = 0; i < n; i++) {
            er__cval_anything(&cv[i], F);
            ex[i] = rd[i] = NAN;
            lo[i] = hi[i] = 0;
        }
        return ER_OK;
    }
    er_status st = pl->own ? er_nbwd_row_own(pl, &rs, dy, x, w, rlo, rhi, n, cv, ex, rd)
                           : er_nbwd_row_saved(pl, &rs, dy, x, w, m, rlo, n, y, cls, cv, ex, rd, lo, hi, mk);
    if (rs.exact) mpfr_clears(rs.Bx, rs.Cx, (mpfr_ptr)0);
    return st;
}

/* rmsnorm's dweight without a saved rstd: sum_i dy_i x_i r_i with r_i anywhere in [rlo_i, rhi_i] (Theorem N3): the
 * least and greatest exact sums over those boxes, widened by Theorem N2's bound at the largest r; the exact value from
 * the rows' exact rstd, enclosed in double (rxl, rxh), else at growing precision from their exact sums of squares. */
static er_status er_nbwd_col_own(const er_nbwd_plan *pl, const double *dy, const double *x, const double *rlo,
                                 const double *rhi, int64_t rows, er_cval *cv, double *ex, double *rd) {
    const er_fmt_info *F = pl->F;
    double sa = 0, mul = 1.0;
    er_acc acc[4]; /* the set's lower and upper ends; the exact value's lower and upper enclosures */
    int na = 0;
    er_status st = ER_OK;
    for (; na < 4 && st == ER_OK; na++) st = er_nbwd_acc(&acc[na], F);
    if (st != ER_OK) na--;
    for (int64_t i = 0; i < rows && st == ER_OK; i++) {
        double q = dy[i] * x[i]; /* exact: two values of at most 26 bits */
        sa = er__add_up(sa, er__mul_up(fabs(q), rhi[i]));
        mul = fmax(mul, er__mul_up(er__mul_up(er_max1(fabs(dy[i])), er_max1(fabs(x[i]))),
                                   er__mul_up(er_max1(rhi[i]), er_max1(rhi[i]))));
        int neg = q < 0;
        er_acc_add_prod(&acc[0], q, neg ? rhi[i] : rlo[i]);
        er_acc_add_prod(&acc[1], q, neg ? rlo[i] : rhi[i]);
        er_acc_add_prod(&acc[2], q, neg ? pl->rxh[i] : pl->rxl[i]);
        er_acc_add_prod(&acc[3], q, neg ? pl->rxl[i] : pl->rxh[i]);
    }
    if (st != ER_OK) {
        for (int k = 0; k < na; k++) er__acc_free(&acc[k]);
        return st;
    }
    er_iv lo = er_acc_iv(&acc[0], NULL, NULL), hi = er_acc_iv(&acc[1], NULL, NULL);
    mpfr_t xs[2];
    int sticky[2];
    er_acc_iv(&acc[2], &xs[0], &sticky[0]);
    er_acc_iv(&acc[3], &xs[1], &sticky[1]);
    for (int k = 0; k < 4; k++) er__acc_free(&acc[k]);
    double sd = (double)(pl->depth ? pl->depth : (rows ? rows - 1 : 0));
    double H = er__mul_up(er__mul_up((double)rows + ER_NBWD_DW_ROUNDINGS, F->min_sub), er__mul_up(16.0, mul));
    double hw = er__add_up(er__mul_up(er__gamma(F, ER_NBWD_DW_ROUNDINGS + sd), sa), H);
    if (isfinite(hw) && er__mul_up(4.0, er__add_up(sa, hw)) <= F->max)
        er__nbwd_set(cv, F, er__dn(lo.lo - hw), er__up(hi.hi + hw));
    else er__cval_anything(cv, F);
    /* the exact value */
    double a = er__round_mpfr_sticky(pl->O, xs[0], sticky[0], ER_ROUND_NEAREST, pl->ov),
           b = er__round_mpfr_sticky(pl->O, xs[1], sticky[1], ER_ROUND_NEAREST, pl->ov);
    *ex = er__round_mpfr_sticky(er__fmt(ER_FP64), xs[0], sticky[0], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    double exh = er__round_mpfr_sticky(er__fmt(ER_FP64), xs[1], sticky[1], ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    *rd = a;
    mpfr_clears(xs[0], xs[1], (mpfr_ptr)0);
    int lg = 0;
    while ((INT64_C(1) << lg) <= rows && lg < 62) lg++;
    for (mpfr_prec_t pr = 128; (a != b || *ex != exh || signbit(a) != signbit(b)) && pr <= 65536; pr *= 2) {
        mpfr_t sl, sh, rl, rh, t;
        mpfr_inits2(pr + lg + 64, sl, sh, t, (mpfr_ptr)0);
        mpfr_inits2(2, rl, rh, (mpfr_ptr)0);
        mpfr_set_zero(sl, 1);
        mpfr_set_zero(sh, 1);
        for (int64_t i = 0; i < rows; i++) {
            double q = dy[i] * x[i];
            if (q == 0) continue;
            if (mpfr_zero_p(pl->Sx[i]) && pl->eps == 0) {
                a = b = NAN;
                break;
            }
            er_own_r_at(pl->Sx[i], pl->n, pl->eps, pr, rl, rh);
            mpfr_mul_d(t, q > 0 ? rl : rh, q, MPFR_RNDD);
            mpfr_add(sl, sl, t, MPFR_RNDD);
            mpfr_mul_d(t, q > 0 ? rh : rl, q, MPFR_RNDU);
            mpfr_add(sh, sh, t, MPFR_RNDU);
        }
        if (!isnan(a)) {
            int alike = er_ends_alike(pl, sl, sh, ex, rd);
            a = *rd;
            b = alike ? a : NAN;
            exh = *ex;
        }
        mpfr_clears(sl, sh, rl, rh, t, (mpfr_ptr)0);
        if (isnan(a)) {
            *ex = *rd = NAN;
            break;
        }
    }
    return ER_OK;
}

/* A column sum's exact value: in the accumulator for F of at most 26 bits (its 64 leading bits and sticky bit round
 * exactly into any format of at most 53), else with MPFR; *ex rounded to double, *rd into O. */
er_status er__nbwd_col_exact(const er_nbwd_plan *pl, int bias, const double *dy, const double *x, const double *m,
                             const double *r, int64_t rows, double *ex, double *rd) {
    mpfr_t s;
    int sticky = 0;
    if (pl->F->p <= 26) {
        er_acc acc;
        ER_RETURN_IF_ERROR(er_nbwd_acc(&acc, pl->F));
        for (int64_t i = 0; i < rows; i++) {
            if (bias) {
                if (dy[i] != 0) er__acc_add_double(&acc, dy[i]); /* a zero has no ulp position in range */
                continue;
            }
            double hi, lo, q = dy[i] * r[i]; /* exact: two values of at most 26 bits */
            er__two_sum(x[i], m ? -m[i] : 0.0, &hi, &lo); /* x - m = hi + lo exactly */
            er_acc_add_prod(&acc, q, hi);
            er_acc_add_prod(&acc, q, lo);
        }
        er_acc_iv(&acc, &s, &sticky);
        er__acc_free(&acc);
    } else {
        er_terms T;
        ER_RETURN_IF_ERROR(er_terms_init(&T, rows));
        for (int64_t i = 0; i < rows; i++) {
            if (bias) er_term(T.t[i], 1.0, dy[i], 0.0, 1.0);
            else er_term(T.t[i], dy[i], x[i], m ? m[i] : 0.0, r[i]);
        }
        mpfr_init2(s, 2);
        er_exact_sum(s, T.t, T.p, rows);
        er_terms_clear(&T);
    }
    *ex = er__round_mpfr_sticky(er__fmt(ER_FP64), s, sticky, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    *rd = er__round_mpfr_sticky(pl->O, s, sticky, ER_ROUND_NEAREST, pl->ov);
    mpfr_clear(s);
    return ER_OK;
}

/* Whether a column's inputs are finite. */
static int er_nbwd_col_finite(int bias, const double *dy, const double *x, const double *m, const double *rlo,
                              const double *rhi, int64_t rows) {
    int ok = 1;
    for (int64_t i = 0; i < rows && ok; i++)
        ok = isfinite(dy[i]) &&
             (bias || (isfinite(x[i]) && isfinite(rlo[i]) && isfinite(rhi[i]) && (!m || isfinite(m[i]))));
    return ok;
}

er_status er__nbwd_col(const er_nbwd_plan *pl, int bias, const double *dy, const double *x, const double *m,
                       const double *rlo, const double *rhi, int64_t rows, er_cval *cv, double *ex, double *rd) {
    const er_fmt_info *F = pl->F;
    const double *r = rlo;
    if (pl->own && !bias) {
        if (!er_nbwd_col_finite(bias, dy, x, m, rlo, rhi, rows)) {
            er__cval_anything(cv, F);
            *ex = *rd = NAN;
            return ER_OK;
        }
        return er_nbwd_col_own(pl, dy, x, rlo, rhi, rows, cv, ex, rd);
    }
    /* the sum in double and the sum of the terms' magnitudes (Lemma N4: each term t_i = dy_i r_i d_i passes through
     * at most rows + 2 roundings, dy r, d, the product and the additions), and the largest max(1,|dy|) max(1,|d|)
     * max(1,|r|)^2 (four roundings, d's included) */
    double S0 = 0, sa = 0, mul = 1.0;
    if (bias) {
        for (int64_t i = 0; i < rows; i++) {
            S0 += dy[i];
            sa += fabs(dy[i]);
        }
    } else {
        for (int64_t i = 0; i < rows; i++) {
            double d = x[i] - (m ? m[i] : 0.0), t = dy[i] * r[i] * d, ad = fabs(d), ay = fabs(dy[i]), ar = fabs(r[i]);
            ad = ad > 1.0 ? ad : 1.0;
            ay = ay > 1.0 ? ay : 1.0;
            ar = ar > 1.0 ? ar : 1.0;
            double f = ay * ad * (ar * ar);
            S0 += t;
            sa += fabs(t);
            mul = f > mul ? f : mul;
        }
    }
    /* a NaN or an infinity among the inputs reaches sa (or an overflow of a wider compute format's products) */
    if (!(sa <= DBL_MAX && mul <= DBL_MAX) && !er_nbwd_col_finite(bias, dy, x, m, rlo, rhi, rows)) {
        er__cval_anything(cv, F);
        *ex = *rd = NAN;
        return ER_OK;
    }
    if (er__nbwd_col_sums(pl, bias, S0, 0.0, -1, sa, bias ? 1.0 : mul, rows, cv, ex, rd) == 2) return ER_OK;
    return er__nbwd_col_exact(pl, bias, dy, x, m, r, rows, ex, rd);
}

int er__nbwd_col_sums(const er_nbwd_plan *pl, int bias, double S0, double b, int64_t joins, double sa, double mul,
                      int64_t rows, er_cval *cv, double *ex, double *rd) {
    const er_fmt_info *F = pl->F;
    if (!(sa <= DBL_MAX && mul <= DBL_MAX)) {
        er__cval_anything(cv, F);
        return 0;
    }
    mul = er__up(mul * (1.0 + 0x1p-50));
    /* an underflowing product (dy r, the term: a compute format wider than 26 bits) is off by at most 2^-1075 more,
     * dy r's then multiplied by d: at most rows 2^-1074 (1 + |d|) <= rows 2^-1073 mul in all */
    double K = (double)(rows + 4) * 0x1p-52, U = er__mul_up((double)rows * 0x1p-1073, mul),
           sau = er__add_up(er__up(sa * (1.0 + K)), U), Sk = er__add_up(er__mul_up(K, sau), U);
    if (joins >= 0) { /* Lemma N6: rows main terms and at most `joins` more two-sums, each adding one error to b */
        S0 += b;
        Sk = er__csum_radius(rows + joins, bias ? 2 : 3, bias ? 0.0 : 0x1p-50, sau, S0);
    }
    er_iv e = { er__dn(S0 - Sk), er__up(S0 + Sk) };
    double k = bias ? 0 : ER_NBWD_DW_ROUNDINGS, sd = (double)(pl->depth ? pl->depth : (rows ? rows - 1 : 0));
    /* dbias: terms of F added in F, no underflow error; dweight: 2 rows products may underflow by eta/2, each then
     * multiplied by at most 2 |r|: (rows + 4) eta 16 mul bounds it */
    double H = bias ? 0 : er__mul_up(er__mul_up((double)rows + k, F->min_sub), er__mul_up(16.0, mul));
    double hw = er__add_up(er__mul_up(er__gamma(F, k + sd), sau), H);
    if (isfinite(hw) && er__mul_up(4.0, er__add_up(sau, hw)) <= F->max)
        er__nbwd_set(cv, F, er__dn(e.lo - hw), er__up(e.hi + hw));
    else er__cval_anything(cv, F);
    return er_nbwd_decided(pl, e.lo, e.hi, ex, rd) ? 2 : 1;
}
