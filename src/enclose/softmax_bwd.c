/* softmax_bwd.c: the sets of softmax's backward pass (src/enclose/softmax_bwd.h; docs/algorithms/softmax-backward.md).
 *
 * A kernel computes D~, the sum of the products dy_j y_j in F in some order (each product rounded or fused into its
 * addition), then each dx_i in one of the forms of Lemma B2, each monotone in D~: the set of dx_i is within the least
 * and the greatest of the forms' values at the ends of D~'s any-order set (Theorem B1). The exact D is summed in the
 * long accumulator (its summary gives the set); dx_i's exact value comes from D's leading 106 bits in double-double
 * (Lemma B3), and from D summed with MPFR for an element that leaves open. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h> /* before mpfr.h: the intmax_t functions */
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include "enclose/softmax_bwd.h"
#include "enclose/approx.h"
#include "enclose/elementwise.h"
#include "enclose/ival.h"
#include "enclose/softmax.h"
#include "exact/accum.h"
#include "format/vecround.h"

/* The forms of Lemma B2 at D~ = d, for dy and y (values of F), and with t the product dy y rounded to the inputs'
 * format (NaN: not rounded), the forms of Theorem B1's products=either: their least and greatest into *lo, *hi; 0
 * when one of them is not finite. */
static int er_sbwd_forms(const er_fmt_info *F, double dy, double y, double t, double d, int wide, double *lo,
                         double *hi) {
    const er_round N = ER_ROUND_NEAREST;
    double a = er__round_prod(F, dy, y, wide, N), b = er__round_prod(F, y, d, wide, N);
    double f[6] = {
        er__round_prod(F, y, er__round_sum(F, dy, -d, N), wide, N), /* y (dy - D) */
        er__round_sum(F, a, -b, N),                                 /* dy y - y D */
        er__round_fma(F, -y, d, a, wide, N),                        /* fma(-y, D, dy y) */
        er__round_fma(F, dy, y, -b, wide, N),                       /* fma(dy, y, -y D) */
        t == t ? er__round_sum(F, t, -b, N) : NAN,                  /* t - y D, t = RN_P(dy y) */
        t == t ? er__round_fma(F, -y, d, t, wide, N) : NAN,         /* fma(-y, D, t) */
    };
    for (int k = 0; k < (t == t ? 6 : 4); k++) {
        if (!isfinite(f[k])) return 0;
        if (f[k] < *lo) *lo = f[k];
        if (f[k] > *hi) *hi = f[k];
    }
    return 1;
}

/* Whether a format's values are all floats: the products of two of them are exact doubles of at least 2^-298, and the
 * forms of Lemma B2 in fp32 are float operations. */
static int er_sbwd_floats(const er_fmt_info *f) {
    return f->p <= 24 && f->max <= FLT_MAX && f->min_sub >= 0x1p-149 && !f->e8m0;
}

/* The summary of sum_j a_j b_j (b NULL: sum_j a_j; a, b values of Fa, Fb) for the any-order set, exact
 * (er__dot_summary's long accumulator), and where dd is not NULL the sum's leading 106 bits (er__dot_summary_dd);
 * the bounds of the sums of |terms| from the rows' one order, which the GPU path's rows keep too. */
static er_status er_sbwd_summary(const er_fmt_info *Fa, const er_fmt_info *Fb, const double *a, const double *b,
                                 int64_t n, er_dotsum *sm, double *dd) {
    const er_fmt_info *Fo = b ? Fb : er__fmt_one();
    er_dot_env env;
    memset(&env, 0, sizeof env);
    /* a product's last bit: at or above the least subnormals' (fp64's 106-bit products: 2^-2148); its top below
     * 2^(e_max a + e_max b + 2), n of them below 2^64 times that */
    env.wide = Fa->p > 26 || Fo->p > 26;
    env.base = env.wide ? -2148 : (int64_t)ilogb(Fa->min_sub) + ilogb(Fo->min_sub) - 52;
    env.top = (int64_t)ilogb(Fa->max) + ilogb(Fo->max) + 2 + 64;
    env.ipath = er__dot_ipath(Fa, Fo, n, &env.qa, &env.qb);
    const double *b0 = b;
    double *ones = NULL;
    if (!b) {
        ones = malloc(sizeof(double) * (size_t)(n ? n : 1));
        if (!ones) return er__fail(ER_ERR_NOMEM, "cannot allocate a row of %lld", (long long)n);
        for (int64_t j = 0; j < n; j++) ones[j] = 1.0;
        b = ones;
    }
    er_acc acc;
    er_status st = er__acc_init(&acc, env.base, env.top);
    if (st == ER_OK) er__dot_summary_dd(sm, &acc, a, b, n, &env, 0, dd);
    er__acc_free(&acc);
    free(ones);
    if (st == ER_OK && !env.wide) {
        /* the bounds of the sums of |terms| from the rows' one order, which the GPU's rows keep too (core/pwin.h) */
        double pos, negs;
        er_pwin_lanes(a, b0, n, &pos, &negs);
        er__dotsum_finish(sm, pos, negs, n, sm->special, sm->neg, sm->m, sm->e, sm->sticky);
    }
    return st;
}

/* The inputs' format P the products may be rounded to first (products=either, P narrower than F), else NULL. */
static const er_fmt_info *er_sbwd_rounded_products(const er_sbwd_plan *pl) {
    const er_fmt_info *P = pl->Fdy->p >= pl->Fy->p ? pl->Fdy : pl->Fy;
    return !pl->products_compute && P->p < pl->F->p ? P : NULL;
}

/* The any-order bounds of D's sum of n products (bd) and, where P is not NULL, of the rounded products' sum (bd2). */
static er_status er_sbwd_bounds(const er_sbwd_plan *pl, int64_t n, const er_fmt_info *P, er_anyorder_bound *bd,
                                er_anyorder_bound *bd2) {
    ER_RETURN_IF_ERROR(er__anyorder_bound_depth(bd, pl->Fdy, pl->Fy, pl->F, n, pl->depth, 0));
    return P ? er__anyorder_bound_terms_depth(bd2, pl->F, n, pl->depth, 0) : ER_OK;
}

/* D~'s set [*dlo, *dhi] from the summary of sum_j dy_j y_j (sm, bound bd) and, where the products may be rounded to
 * the inputs' format first, of the rounded products' sum (sm2, bound bd2; NULL: not); 0 where it is not a finite
 * interval. */
static int er_sbwd_dset(const er_sbwd_plan *pl, const er_anyorder_bound *bd, const er_anyorder_bound *bd2,
                        const er_dotsum *sm, const er_dotsum *sm2, double *dlo, double *dhi) {
    const er_fmt_info *F = pl->F;
    er_edge_scratch w;
    er__edge_scratch_init(&w);
    er_cval dset;
    er__anyorder_cval(&dset, bd, F, sm, &w);
    int dfin = !dset.nan && !dset.nan_req && !dset.pinf && !dset.ninf && dset.lo <= dset.hi;
    if (sm2) {
        /* products=either: the products may first be rounded to the inputs' format P (where narrower than F), then
         * summed in any order in F (terms of F: Lemma 3 of any-order.md): the union with that sum's set */
        er_cval d2 = {0};
        er__anyorder_cval(&d2, bd2, F, sm2, &w);
        dfin = dfin && !d2.nan && !d2.nan_req && !d2.pinf && !d2.ninf && d2.lo <= d2.hi;
        if (dfin) {
            dset.lo = fmin(dset.lo, d2.lo);
            dset.hi = fmax(dset.hi, d2.hi);
        }
    }
    er__edge_scratch_clear(&w);
    *dlo = dset.lo;
    *dhi = dset.hi;
    return dfin;
}

/* D = sum_j dy_j y_j (y NULL: sum_j dy_j) exactly into D (initialised here; the caller clears it), with MPFR at a
 * precision that holds every partial sum. */
static void er_sbwd_mpfr_sum(const er_sbwd_plan *pl, const double *dy, const double *y, int64_t n, mpfr_t D) {
    long emax = LONG_MIN, lsb = LONG_MAX;
    for (int64_t j = 0; j < n; j++) {
        double yj = y ? y[j] : 1.0;
        if (dy[j] == 0 || yj == 0) continue;
        long ea = ilogb(dy[j]), eb = ilogb(yj), lb = y ? eb - (pl->Fy->p - 1) : 0;
        if (ea + eb + 2 > emax) emax = ea + eb + 2;
        if (ea - (pl->Fdy->p - 1) + lb < lsb) lsb = ea - (pl->Fdy->p - 1) + lb;
    }
    int lg = 0;
    while ((INT64_C(1) << lg) <= n && lg < 62) lg++;
    mpfr_prec_t P = emax == LONG_MIN ? 2 : (mpfr_prec_t)(emax - lsb + lg + 2);
    mpfr_init2(D, P);
    mpfr_set_zero(D, 1);
    mpfr_t a, t;
    mpfr_inits2(128, a, t, (mpfr_ptr)0);
    for (int64_t j = 0; j < n; j++) {
        if (dy[j] == 0 || (y && y[j] == 0)) continue;
        mpfr_set_d(a, dy[j], MPFR_RNDN);
        mpfr_mul_d(t, a, y ? y[j] : 1.0, MPFR_RNDN); /* exact: 106 bits at most */
        mpfr_add(D, D, t, MPFR_RNDN);      /* exact: P holds every partial sum */
    }
    mpfr_clears(a, t, (mpfr_ptr)0);
}

/* The exact dx_i = y_i (dy_i - D) (D exact, in MPFR), at a precision that holds it, rounded to double (ex) and into O
 * (rd); x is scratch. */
static void er_sbwd_exact(const er_sbwd_plan *pl, mpfr_srcptr D, mpfr_ptr x, double dy, double y, double *ex,
                          double *rd) {
    long top = mpfr_zero_p(D) ? LONG_MIN : (long)mpfr_get_exp(D);
    long low = top == LONG_MIN ? LONG_MAX : top - (long)mpfr_get_prec(D);
    if (dy != 0) {
        long e = ilogb(dy) + 1;
        if (e > top) top = e;
        if (e - 1 - (pl->Fdy->p - 1) < low) low = e - 1 - (pl->Fdy->p - 1);
    }
    mpfr_prec_t pt = top == LONG_MIN ? 2 : (mpfr_prec_t)(top - low + 2);
    mpfr_set_prec(x, pt + 64);
    mpfr_set_d(x, dy, MPFR_RNDN);
    mpfr_sub(x, x, D, MPFR_RNDN); /* exact */
    mpfr_mul_d(x, x, y, MPFR_RNDN); /* exact: y has at most 53 significant bits */
    *ex = mpfr_get_d(x, MPFR_RNDN);
    *rd = er__round_mpfr(pl->O, x, ER_ROUND_NEAREST, pl->ov);
}

/* ---- the fast pass (softmax-backward.md, "The fast pass"): F fp32, dy's and y's values floats ---- */

/* The forms of Lemma B2 in fp32 at D~ = d0 and d1 (and with t the products rounded to the inputs' format, where hast)
 * for each element: their least and greatest into lo and hi, lo NaN where one is not finite; each form the float
 * operations er_sbwd_forms rounds to F (one rounding each), so the same values. Written to vectorise. */
ER_ALWAYS_INLINE float er_sbwd_min(float a, float b) { return a < b ? a : b; }
ER_ALWAYS_INLINE float er_sbwd_max(float a, float b) { return a > b ? a : b; }
/* The least and greatest of eight forms' values into *l and *h, and into *z 0 where all are finite, NaN else
 * (inf - inf, NaN - NaN), without a branch. */
ER_ALWAYS_INLINE void er_sbwd_ends8(const float f[8], float *l, float *h, float *z) {
    *l = er_sbwd_min(er_sbwd_min(er_sbwd_min(f[0], f[1]), er_sbwd_min(f[2], f[3])),
                     er_sbwd_min(er_sbwd_min(f[4], f[5]), er_sbwd_min(f[6], f[7])));
    *h = er_sbwd_max(er_sbwd_max(er_sbwd_max(f[0], f[1]), er_sbwd_max(f[2], f[3])),
                     er_sbwd_max(er_sbwd_max(f[4], f[5]), er_sbwd_max(f[6], f[7])));
    *z = ((f[0] - f[0]) + (f[1] - f[1])) + ((f[2] - f[2]) + (f[3] - f[3])) + ((f[4] - f[4]) + (f[5] - f[5])) +
         ((f[6] - f[6]) + (f[7] - f[7]));
}
ER_ALWAYS_INLINE void er_sbwd_forms_body(int64_t n, const double *restrict dy, const double *restrict y,
                                         const double *restrict t, int hast, float d0, float d1, double *restrict lo,
                                         double *restrict hi) {
    for (int64_t i = 0; i < n; i++) {
        float g = (float)dy[i], v = (float)y[i], a = g * v, b0 = v * d0, b1 = v * d1;
        float f[8] = {v * (g - d0), a - b0, fmaf(-v, d0, a), fmaf(g, v, -b0),
                      v * (g - d1), a - b1, fmaf(-v, d1, a), fmaf(g, v, -b1)}, l, h, z;
        er_sbwd_ends8(f, &l, &h, &z);
        if (hast) {
            float p = (float)t[i], e0 = p - b0, e1 = fmaf(-v, d0, p), e2 = p - b1, e3 = fmaf(-v, d1, p);
            l = er_sbwd_min(l, er_sbwd_min(er_sbwd_min(e0, e1), er_sbwd_min(e2, e3)));
            h = er_sbwd_max(h, er_sbwd_max(er_sbwd_max(e0, e1), er_sbwd_max(e2, e3)));
            z += ((e0 - e0) + (e1 - e1)) + ((e2 - e2) + (e3 - e3));
        }
        lo[i] = z == 0 ? (double)l : NAN;
        hi[i] = h;
    }
}
#define ER_SBWD_FORMS_ARGS                                                                                            \
    int64_t n, const double *restrict dy, const double *restrict y, const double *restrict t, float d0, float d1,    \
        double *restrict lo, double *restrict hi
ER_ALWAYS_INLINE void er_sbwd_forms_any(ER_SBWD_FORMS_ARGS) {
    if (t) er_sbwd_forms_body(n, dy, y, t, 1, d0, d1, lo, hi);
    else er_sbwd_forms_body(n, dy, y, t, 0, d0, d1, lo, hi);
}
ER_SIMD_BUILDS(er_sbwd_forms_run, (ER_SBWD_FORMS_ARGS), (n, dy, y, t, d0, d1, lo, hi), er_sbwd_forms_any)

/* Lemma B3: the exact dx_i from D = Dh + Dl + delta (|delta| <= Derr) in double-double, its enclosure's ends rounded
 * into O (f) and to double: where each pair agrees (and the enclosure keeps away from zero; for y_i = 0, where the
 * sign of dy_i - D is certain), rd[i] and ex[i] are the correct roundings, else ex[i] is NaN. Where every step is
 * exact (Derr = 0, the rounding errors of t, y_i ul and pl + q zero), dx_i = c + ce and c is its rounding to double
 * (Lemma B3's exact case): dx_i lies between c and c's neighbour on ce's side. Written to vectorise. */
ER_ALWAYS_INLINE void er_sbwd_exact_body(int64_t n, const double *restrict dy, const double *restrict y, double Dh,
                                         double Dl, double Derr, er_vec_fmt f, int narrow, double *restrict ex,
                                         double *restrict rd) {
    for (int64_t i = 0; i < n; i++) {
        double yi = y[i], s, se, uh, ul, c, ce, t, te, xl, xe;
        er__two_sum(dy[i], -Dh, &s, &se);
        er__two_sum(se, -Dl, &t, &te); /* t = RN(se - Dl), te its error */
        er__two_sum(s, t, &uh, &ul); /* dy_i - D = uh + ul + e, |e| <= e1 */
        double e1 = fabs(t) * 0x1p-52 + Derr;
        double ph = yi * uh, pl = fma(yi, uh, -ph), q = yi * ul, qe = fma(yi, ul, -q);
        er__two_sum(pl, q, &xl, &xe); /* xl = RN(pl + q) */
        er__two_sum(ph, xl, &c, &ce); /* dx_i = c + ce + e', |e'| <= E */
        double E = ((fabs(q) + fabs(xl)) * 0x1p-52 + fabs(yi) * e1) * (1 + 0x1p-48) + 0x1p-1070;
        double wl = er__dn_wide(ce - E), wh = er__up_wide(ce + E);
        /* the exact case: pl and qe are the products' errors (no product below 2^-969), all of them zero */
        int64_t exact = (Derr == 0) & (te == 0) & (qe == 0) & (xe == 0) & ((uh == 0) | (fabs(ph) >= 0x1p-969)) &
                        ((ul == 0) | (fabs(q) >= 0x1p-969));
        double L = exact ? (ce < 0 ? er__dn_finite(c) : c) : er__dn_wide(c + wl),
               H = exact ? (ce > 0 ? er__up_finite(c) : c) : er__up_wide(c + wh);
        double a = er_vec_rn_fmt(L, f, narrow), b = er_vec_rn_fmt(H, f, narrow);
        int64_t okr = er_vec_rn_ok(L, a, f, narrow) & er_vec_rn_ok(H, b, f, narrow) & (a == b) & ((L > 0) | (H < 0));
        /* c is dx_i's rounding to double where dx_i - c lies strictly inside half the spacings below and above c */
        double hu = (er__up_finite(c) - c) * 0.5, hd = (c - er__dn_finite(c)) * 0.5;
        int64_t oke = exact | ((wl > -hd) & (wh < hu));
        int64_t z = yi == 0, okz = fabs(uh) > 2 * (fabs(ul) + e1 * (1 + 0x1p-48));
        double zero = copysign(0.0, copysign(1.0, yi) * uh);
        ex[i] = z ? (okz ? zero : NAN) : ((okr & oke) ? c : NAN);
        rd[i] = z ? zero : a;
    }
}
#define ER_SBWD_EXACT_ARGS                                                                                            \
    int64_t n, const double *restrict dy, const double *restrict y, double Dh, double Dl, double Derr, er_vec_fmt f, \
        double *restrict ex, double *restrict rd
ER_ALWAYS_INLINE void er_sbwd_exact_any(ER_SBWD_EXACT_ARGS) {
    if (f.narrow) er_sbwd_exact_body(n, dy, y, Dh, Dl, Derr, f, 1, ex, rd);
    else er_sbwd_exact_body(n, dy, y, Dh, Dl, Derr, f, 0, ex, rd);
}
ER_SIMD_BUILDS(er_sbwd_exact_run, (ER_SBWD_EXACT_ARGS), (n, dy, y, Dh, Dl, Derr, f, ex, rd), er_sbwd_exact_any)

void er__sbwd_exact_dd(int64_t n, const double *dy, const double *y, double Dh, double Dl, double Derr,
                       const er_fmt_info *O, double *ex, double *rd) {
    er_sbwd_exact_run(er__simd(), n, dy, y, Dh, Dl, Derr, er_vec_fmt_of(O), ex, rd);
}

/* Whether the fast pass takes a row of this plan: the forms (F fp32, inputs floats), the exact results (O fp32, fp16
 * or bf16: er_vec_rn_fmt's), each a bit. */
static int er_sbwd_fast_forms(const er_sbwd_plan *pl) {
    return pl->F->id == ER_FP32 && er_sbwd_floats(pl->Fdy) && er_sbwd_floats(pl->Fy);
}
static int er_sbwd_fast_exact(const er_sbwd_plan *pl) {
    er_format o = pl->O->id;
    return er_sbwd_fast_forms(pl) && (o == ER_FP32 || o == ER_FP16 || o == ER_BF16);
}

int er__sbwd_dev_takes(const er_sbwd_plan *pl) { return er_sbwd_fast_exact(pl) && !pl->no_fast; }
const er_fmt_info *er__sbwd_dev_rounds(const er_sbwd_plan *pl) { return er_sbwd_rounded_products(pl); }

/* A summary from a window of the GPU's (0 where the window does not decide it or the row is special). */
static int er_sbwd_win_summary(const er_pwin_row *w, int64_t n, er_dotsum *sm) {
    int neg, sticky;
    uint64_t m;
    int64_t e;
    er_pw_i128 W = (er_pw_i128)(((er_pw_u128)w->whi << 64) | w->wlo);
    if (w->special || !er_pwin_summary(W, w->b, w->tail, n, &neg, &m, &e, &sticky)) return 0;
    er__dotsum_finish(sm, w->pos, w->negs, n, 0, neg, m, e, sticky);
    return 1;
}

er_status er__sbwd_dev_setup(const er_sbwd_plan *pl, int64_t n, er_sbwd_dev *d) {
    d->P = er_sbwd_rounded_products(pl);
    return er_sbwd_bounds(pl, n, d->P, &d->bd, &d->bd2);
}

int er__sbwd_dev_row(const er_sbwd_plan *pl, const er_sbwd_dev *d, const er_pwin_row *w, int64_t n, double *c) {
    er_dotsum sm, sm2;
    double dlo, dhi;
    if (!er_sbwd_win_summary(&w[0], n, &sm) || (d->P && !er_sbwd_win_summary(&w[1], n, &sm2))) return 0;
    if (!er_sbwd_dset(pl, &d->bd, &d->bd2, &sm, d->P ? &sm2 : NULL, &dlo, &dhi)) return 0;
    er_pwin_dd((er_pw_i128)(((er_pw_u128)w->whi << 64) | w->wlo), w->b, w->tail, n, c + 2);
    c[0] = dlo;
    c[1] = dhi;
    return c[2] == c[2];
}

int er__lsbwd_dev_takes(const er_sbwd_plan *pl) {
    er_format o = pl->O->id;
    return pl->F->id == ER_FP32 && er_sbwd_floats(pl->Fdy) && er_sbwd_floats(pl->Fy) && !pl->exp_fast && pl->U >= 0 &&
           pl->U <= 0x1p30 && (double)(int64_t)pl->U == pl->U && !pl->no_fast &&
           (o == ER_FP32 || o == ER_FP16 || o == ER_BF16);
}

er_status er__lsbwd_dev_setup(const er_sbwd_plan *pl, int64_t n, er_sbwd_dev *d) {
    d->P = NULL;
    return er__anyorder_bound_terms_depth(&d->bd, pl->F, n, pl->depth, 0);
}

/* |S|'s parts from its summary (|S| = (m + f) 2^e, 0 <= f < 1, f > 0 iff sticky; m != 0): |S| in [s[0] + s[1],
 * s[0] + s[2]], s[0] = m's top 53 bits, s[1] = its last 11 bits, s[2] = those plus 1 where the summary is sticky,
 * each times 2^e, exact where 2^(e + 11) and 2^(e + 64) lie within double's normal range (1; else 0). Lemma B5 takes
 * them as they are, the double step as er_lsbwd_sbounds's bounds. */
static int er_lsbwd_sparts(const er_dotsum *sm, double s[3]) {
    if (sm->m == 0 || (int64_t)sm->e + 11 < -1000 || (int64_t)sm->e + 64 > 1000) return 0;
    uint64_t lo = sm->m & 0x7ff;
    s[0] = ldexp((double)(sm->m - lo), sm->e);
    s[1] = ldexp((double)lo, sm->e);
    s[2] = ldexp((double)(lo + (sm->sticky != 0)), sm->e);
    return 1;
}

/* S's bounds [*Sl, *Sh] in double from its summary: s[0] and, where any bit below m's top 53 or f is not zero, the
 * next multiple of 2^(e + 11) (er_lsbwd_sparts's s; exact where they are, 0 elsewhere; both 0 where S = 0). The same
 * bits on the host and the GPU path, whose window gives the same summary (Lemma B4). */
static int er_lsbwd_sbounds(const er_dotsum *sm, double *Sl, double *Sh) {
    double s[3];
    if (sm->m == 0) {
        *Sl = *Sh = 0;
        return 1;
    }
    if (!er_lsbwd_sparts(sm, s)) return 0;
    /* exact: a multiple of 2^(e + 11) at most 2^(e + 64) */
    double l = s[0], h = s[2] > 0 ? s[0] + ldexp(1.0, sm->e + 11) : l;
    *Sl = sm->neg ? -h : l;
    *Sh = sm->neg ? -l : h;
    return 1;
}

int er__lsbwd_dev_row(const er_sbwd_plan *pl, const er_sbwd_dev *d, const er_pwin_row *w, int64_t n, double *c) {
    er_dotsum sm;
    if (!er_sbwd_win_summary(w, n, &sm)) return 0;
    er_edge_scratch ws;
    er__edge_scratch_init(&ws);
    er_cval sset;
    er__anyorder_cval(&sset, &d->bd, pl->F, &sm, &ws);
    er__edge_scratch_clear(&ws);
    if (sset.nan || sset.nan_req || sset.pinf || sset.ninf || !(sset.lo <= sset.hi)) return 0;
    c[0] = sset.lo;
    c[1] = sset.hi;
    c[4] = sm.m == 0;
    double sp[3] = {0, 0, 0};
    if (sm.m != 0 && !er_lsbwd_sparts(&sm, sp)) return 0;
    c[5] = sp[1];
    c[6] = sp[2];
    return er_lsbwd_sbounds(&sm, &c[2], &c[3]);
}

er_status er__sbwd_row(const er_sbwd_plan *pl, const double *dy, const double *y, int64_t n, double *lo, double *hi,
                       double *ex, double *rd) {
    const er_fmt_info *F = pl->F;
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(dy[j]) || !isfinite(y[j])) {
            for (int64_t i = 0; i < n; i++) lo[i] = hi[i] = ex[i] = rd[i] = NAN;
            return ER_OK;
        }
    er_dotsum sm, sm2;
    double dd[3], dlo, dhi;
    ER_RETURN_IF_ERROR(er_sbwd_summary(pl->Fdy, pl->Fy, dy, y, n, &sm, dd));
    int wide = F->p > 26, dfin = 0;
    /* products=either: each product rounded to the inputs' format P, whose sum in F is the other half of D~'s set */
    const er_fmt_info *P = er_sbwd_rounded_products(pl);
    double *t = P ? malloc(sizeof(double) * (size_t)(n ? n : 1)) : NULL;
    if (P && !t) return er__fail(ER_ERR_NOMEM, "cannot allocate a softmax_backward row of %lld", (long long)n);
    int fin2 = 1; /* a product beyond P's range: no claim (every value and the specials) */
    for (int64_t j = 0; t && j < n; j++) {
        t[j] = er__round_prod(P, dy[j], y[j], wide, ER_ROUND_NEAREST);
        fin2 = fin2 && isfinite(t[j]);
    }
    er_anyorder_bound bd, bd2;
    er_status st = t && fin2 ? er_sbwd_summary(P, NULL, t, NULL, n, &sm2, NULL) : ER_OK;
    if (st == ER_OK) st = er_sbwd_bounds(pl, n, P, &bd, &bd2);
    if (st == ER_OK) dfin = er_sbwd_dset(pl, &bd, &bd2, &sm, t && fin2 ? &sm2 : NULL, &dlo, &dhi) && fin2;
    if (st != ER_OK) {
        free(t);
        return st;
    }
    int fast = er_sbwd_fast_forms(pl) && !pl->no_fast, simd = er__simd();
    /* each element's set: the forms at D~'s ends (the fast pass: their float operations, the same values) */
    if (fast && dfin) er_sbwd_forms_run(simd, n, dy, y, t, (float)dlo, (float)dhi, lo, hi);
    for (int64_t i = 0; i < n && !(fast && dfin); i++) {
        double ti = t ? t[i] : NAN;
        lo[i] = INFINITY;
        hi[i] = -INFINITY;
        if (!(dfin && er_sbwd_forms(F, dy[i], y[i], ti, dlo, wide, &lo[i], &hi[i]) &&
              er_sbwd_forms(F, dy[i], y[i], ti, dhi, wide, &lo[i], &hi[i])))
            lo[i] = hi[i] = NAN;
    }
    free(t);
    /* the exact results: in double-double from D's leading 106 bits (Lemma B3), and with MPFR where that leaves one
     * open (or the fast pass does not apply) */
    if (fast && er_sbwd_fast_exact(pl) && dd[0] == dd[0]) er_sbwd_exact_run(simd, n, dy, y, dd[0], dd[1], dd[2],
                                                                            er_vec_fmt_of(pl->O), ex, rd);
    else
        for (int64_t i = 0; i < n; i++) ex[i] = NAN;
    mpfr_t D, x;
    int haveD = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ex[i] == ex[i]) continue;
        if (!haveD) { /* D with MPFR, once a row */
            er_sbwd_mpfr_sum(pl, dy, y, n, D);
            mpfr_init2(x, 2);
            haveD = 1;
        }
        er_sbwd_exact(pl, D, x, dy[i], y[i], &ex[i], &rd[i]);
        if (pl->mpfr_elems) ++*pl->mpfr_elems;
    }
    if (haveD) mpfr_clears(D, x, (mpfr_ptr)0);
    return ER_OK;
}

/* ---- log_softmax: dx_i = dy_i - exp(y_i) S, S = sum_j dy_j (Theorem B2) ---- */

/* The forms of Theorem B2 at e (an exp of y_i) and s (a sum): their least and greatest into *lo, *hi; 0 when one is
 * not finite. */
static int er_lsbwd_forms(const er_fmt_info *F, double dy, double e, double s, int wide, double *lo, double *hi) {
    const er_round N = ER_ROUND_NEAREST;
    double f[2] = {
        er__round_sum(F, dy, -er__round_prod(F, e, s, wide, N), N), /* dy - exp(y) S */
        er__round_fma(F, -e, s, dy, wide, N),                       /* fma(-exp(y), S, dy) */
    };
    for (int k = 0; k < 2; k++) {
        if (!isfinite(f[k])) return 0;
        if (f[k] < *lo) *lo = f[k];
        if (f[k] > *hi) *hi = f[k];
    }
    return 1;
}

/* The first step of dx_i = dy_i - exp(y_i) S's roundings, in double, for each element: exp(y_i) in [zl_i, zh_i]
 * (Theorem D1's bounds), S in [Sl, Sh] (doubles of one strict sign), each product and difference moved one double
 * outward; where both ends round alike into O (f), keep one strict sign and lie within 2^-40 of each other relative to
 * either, that is the correct rounding (in rd) and the report's exact value is their midpoint (within 2^-41 relative,
 * in ex); ex NaN elsewhere. zl and zh are read
 * from ex and rd and overwritten. Written to vectorise. */
ER_ALWAYS_INLINE void er_lsbwd_exact_body(int64_t n, const double *restrict dy, double Sl, double Sh, er_vec_fmt f,
                                          int narrow, double *restrict ex, double *restrict rd) {
    int64_t sok = (fabs(Sl) >= 0x1p-500) & (fabs(Sh) <= 0x1p500) & ((Sl > 0) == (Sh > 0));
    for (int64_t i = 0; i < n; i++) {
        double zl = ex[i], zh = rd[i], d = dy[i];
        double c0 = zl * Sl, c1 = zl * Sh, c2 = zh * Sl, c3 = zh * Sh;
        double pmin = c0 < c1 ? c0 : c1, pmax = c0 > c1 ? c0 : c1;
        pmin = c2 < pmin ? c2 : pmin;
        pmax = c2 > pmax ? c2 : pmax;
        pmin = c3 < pmin ? c3 : pmin;
        pmax = c3 > pmax ? c3 : pmax;
        double xl = er__dn_finite(d - er__up_finite(pmax)), xh = er__up_finite(d - er__dn_finite(pmin));
        double a = er_vec_rn_fmt(xl, f, narrow), b = er_vec_rn_fmt(xh, f, narrow);
        /* every factor and product normal (the outward steps then bound each rounding) */
        int64_t ok = sok & (zl >= 0x1p-500) & (zh <= 0x1p500) & er_vec_rn_ok(xl, a, f, narrow) &
                     er_vec_rn_ok(xh, b, f, narrow) & (a == b) & ((xl > 0) | (xh < 0)) &
                     (xh - xl <= 0x1p-40 * fabs(xl));
        ex[i] = ok ? 0.5 * xl + 0.5 * xh : NAN;
        rd[i] = a;
    }
}
#define ER_LSBWD_EXACT_ARGS                                                                                           \
    int64_t n, const double *restrict dy, double Sl, double Sh, er_vec_fmt f, double *restrict ex, double *restrict rd
ER_ALWAYS_INLINE void er_lsbwd_exact_any(ER_LSBWD_EXACT_ARGS) {
    if (f.narrow) er_lsbwd_exact_body(n, dy, Sl, Sh, f, 1, ex, rd);
    else er_lsbwd_exact_body(n, dy, Sl, Sh, f, 0, ex, rd);
}
ER_SIMD_BUILDS(er_lsbwd_exact_run, (ER_LSBWD_EXACT_ARGS), (n, dy, Sl, Sh, f, ex, rd), er_lsbwd_exact_any)

/* The forms of Theorem B2 in fp32 at the corners (e, s) of [elo_i, ehi_i] x [s0, s1] for each element: their least
 * and greatest into lo and hi (lo NaN where one is not finite or ehi_i is not); each form the float operations
 * er_lsbwd_forms rounds to F, so the same values. elo and ehi are read from lo and hi and overwritten. Written to
 * vectorise. */
ER_ALWAYS_INLINE void er_lsbwd_forms_body(int64_t n, const double *restrict dy, float s0, float s1, double *restrict lo,
                                          double *restrict hi) {
    for (int64_t i = 0; i < n; i++) {
        float g = (float)dy[i], e0 = (float)lo[i], e1 = (float)hi[i];
        float f[8] = {g - e0 * s0, fmaf(-e0, s0, g), g - e0 * s1, fmaf(-e0, s1, g),
                      g - e1 * s0, fmaf(-e1, s0, g), g - e1 * s1, fmaf(-e1, s1, g)}, l, h, z;
        er_sbwd_ends8(f, &l, &h, &z);
        z += e1 - e1; /* NaN where e_hi is not finite */
        lo[i] = z == 0 ? (double)l : NAN;
        hi[i] = h;
    }
}
ER_SIMD_BUILDS(er_lsbwd_forms_run,
               (int64_t n, const double *restrict dy, float s0, float s1, double *restrict lo, double *restrict hi),
               (n, dy, s0, s1, lo, hi), er_lsbwd_forms_body)

/* dy - exp(y) S correctly rounded into O (rd) and to double (ex), S exact (MPFR): y = 0 or S = 0 exactly, else Ziv's
 * loop on an enclosure of the exact value at doubling precisions (exp(y) for y != 0 is irrational, so the two ends
 * round alike at some precision). */
static void er_lsbwd_exact_mpfr(const er_sbwd_plan *pl, double dy, double y, mpfr_srcptr S, double *ex, double *rd) {
    if (mpfr_zero_p(S) || y == 0) {
        /* exp(0) = 1: x = dy - S, exact at a precision spanning both (S = 0: x = dy) */
        long top = mpfr_zero_p(S) ? LONG_MIN : (long)mpfr_get_exp(S);
        long low = top == LONG_MIN ? LONG_MAX : top - (long)mpfr_get_prec(S);
        if (dy != 0) {
            if (ilogb(dy) + 1 > top) top = ilogb(dy) + 1;
            if (ilogb(dy) - 52 < low) low = ilogb(dy) - 52;
        }
        mpfr_t x;
        mpfr_init2(x, top == LONG_MIN ? 64 : (mpfr_prec_t)(top - low + 66));
        mpfr_set_d(x, dy, MPFR_RNDN);
        mpfr_sub(x, x, S, MPFR_RNDN);
        *ex = mpfr_get_d(x, MPFR_RNDN);
        *rd = er__round_mpfr(pl->O, x, ER_ROUND_NEAREST, pl->ov);
        mpfr_clear(x);
        return;
    }
    if (y < -5e8) { /* exp(y) S below MPFR's exponent range: dx = dy - delta, |delta| < 2^-7e8 */
        /* any value of delta's sign below all of dy's bits rounds alike (no value of O, and no midpoint, lies
         * between dy and dx): dy moved by 2^-1200 of itself (2^-3000 at 0) away from S's sign, exact at 1400 bits */
        mpfr_t x;
        mpfr_init2(x, 1400);
        mpfr_set_ui_2exp(x, 1, dy != 0 ? ilogb(dy) - 1200 : -3000, MPFR_RNDN);
        if (mpfr_sgn(S) > 0) mpfr_neg(x, x, MPFR_RNDN);
        mpfr_add_d(x, x, dy, MPFR_RNDN);
        *ex = mpfr_get_d(x, MPFR_RNDN);
        *rd = er__round_mpfr(pl->O, x, ER_ROUND_NEAREST, pl->ov);
        mpfr_clear(x);
        return;
    }
    for (mpfr_prec_t p = 128;; p *= 2) {
        mpfr_t el, eh, lo, hi, t;
        mpfr_inits2(p, el, eh, (mpfr_ptr)0);
        mpfr_inits2(p + mpfr_get_prec(S) + 1200, lo, hi, t, (mpfr_ptr)0);
        mpfr_set_d(t, y, MPFR_RNDN);
        mpfr_exp(el, t, MPFR_RNDD);
        mpfr_exp(eh, t, MPFR_RNDU);
        /* exp(y) S between el S and eh S (S's sign orders them); then dy minus it, exact at this precision */
        int pos = mpfr_sgn(S) > 0;
        mpfr_mul(lo, pos ? eh : el, S, MPFR_RNDN); /* exact: the precision holds both factors' bits */
        mpfr_mul(hi, pos ? el : eh, S, MPFR_RNDN);
        mpfr_set_d(t, dy, MPFR_RNDN);
        mpfr_sub(lo, t, lo, MPFR_RNDD);
        mpfr_sub(hi, t, hi, MPFR_RNDU);
        double a = er__round_mpfr(pl->O, lo, ER_ROUND_NEAREST, pl->ov),
               b = er__round_mpfr(pl->O, hi, ER_ROUND_NEAREST, pl->ov);
        double da = mpfr_get_d(lo, MPFR_RNDN), db = mpfr_get_d(hi, MPFR_RNDN);
        mpfr_clears(el, eh, lo, hi, t, (mpfr_ptr)0);
        if ((a == b && da == db && signbit(a) == signbit(b)) || p > 65536) {
            *rd = a;
            *ex = da;
            return;
        }
    }
}

/* dy - exp(y) S's correct rounding into O (at most 24 bits) and its report value by Lemma B5 (S's parts s, of sign
 * neg): 1 and *ex, *rd where it decides, else 0. */
static int er_lsbwd_dd(const er_fmt_info *O, const double s[3], int neg, double dy, double y, double *ex,
                       double *rd) {
    if (y < -600) { /* (b): exp(y) S below 2^-665 */
        double r = er__round_double(O, dy, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        if (!(r != 0 && fabs(r) < O->max && er_lsb_dd_tiny(dy, y, s[0], neg, r, O->p, O->emin, rd))) return 0;
        *ex = dy;
        return 1;
    }
    er_lsb_dd d;
    double v;
    if (!er_lsb_dd_value(dy, y, s[0], s[1], s[2], neg, er__exp_lh, er__exp_ll, er__exp_t1, er__exp_t2, &d, &v))
        return 0;
    double r = er__round_double(O, v, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    if (!(r != 0 && fabs(r) < O->max && er_lsb_dd_rounds_to(&d, dy, r, O->p, O->emin))) return 0;
    *ex = v;
    *rd = r;
    return 1;
}

er_status er__lsbwd_row(const er_sbwd_plan *pl, const double *dy, const double *y, int64_t n, double *lo, double *hi,
                        double *ex, double *rd) {
    const er_fmt_info *F = pl->F;
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(dy[j]) || !(y[j] <= 0x1p10) || isnan(y[j])) {
            for (int64_t i = 0; i < n; i++) lo[i] = hi[i] = ex[i] = rd[i] = NAN;
            return ER_OK;
        }
    er_anyorder_bound bd;
    ER_RETURN_IF_ERROR(er__anyorder_bound_terms_depth(&bd, F, n, pl->depth, 0));
    uint8_t *slow = malloc((size_t)(n ? n : 1));
    if (!slow) return er__fail(ER_ERR_NOMEM, "cannot allocate a log_softmax_backward row of %lld", (long long)n);
    mpfr_t S;
    int haveS = 0;
    er_dotsum sm;
    er_status st = er_sbwd_summary(pl->Fdy, NULL, dy, NULL, n, &sm, NULL);
    if (st != ER_OK) {
        free(slow);
        return st;
    }
    /* S's bounds in double from its summary, or from MPFR's S where those are not doubles */
    double Sl, Sh;
    if (!er_lsbwd_sbounds(&sm, &Sl, &Sh)) {
        er_sbwd_mpfr_sum(pl, dy, NULL, n, S);
        haveS = 1;
        Sl = mpfr_get_d(S, MPFR_RNDD);
        Sh = mpfr_get_d(S, MPFR_RNDU);
    }
    er_edge_scratch w;
    er__edge_scratch_init(&w);
    er_cval sset;
    er__anyorder_cval(&sset, &bd, F, &sm, &w);
    er__edge_scratch_clear(&w);
    int sfin = !sset.nan && !sset.nan_req && !sset.pinf && !sset.ninf && sset.lo <= sset.hi;
    int wide = F->p > 26, simd = er__simd();
    er__exp_init(); /* Theorem D1's tables */
    /* exp(y_i)'s values within U ulps (__expf: 2 + floor(1.173 |y|)) from Theorem D1's bounds, never below 0, 0 where
     * it may be flushed: into lo and hi; for fp32 with an integer U, in a loop that vectorises, except where it
     * leaves an element to the scalar code (slow) */
    int vec = F->id == ER_FP32 && er_sbwd_floats(pl->Fdy) && !pl->exp_fast && pl->U >= 0 && pl->U <= 0x1p30 &&
              (double)(int64_t)pl->U == pl->U && !pl->no_fast;
    er_format o = pl->O->id;
    int vex = (o == ER_FP32 || o == ER_FP16 || o == ER_BF16) && !pl->no_fast; /* the exact results' double step */
    if (vec || vex) er__exp_bounds_run(simd, n, y, ex, rd); /* exp(y_i)'s bounds, read by both loops */
    if (vec) er__exp_ends_f32_of(simd, n, y, ex, rd, pl->U, lo, hi, slow);
    for (int64_t i = 0; i < n; i++) {
        if (vec && !slow[i]) continue;
        lo[i] = hi[i] = 0; /* exp(-inf) = 0 */
        if (y[i] == -INFINITY) continue;
        double zl, zh, U = pl->exp_fast ? 2.0 + floor(er__mul_up(1.1730001, fabs(y[i]))) : pl->U;
        er__exp_bounds(y[i], &zl, &zh);
        er__approx_ends(F, U, zl, zh, &lo[i], &hi[i]);
        if (!(lo[i] >= F->min_normal)) lo[i] = 0;
    }
    /* the sets: the forms at the corners of [e_lo, e_hi] x S~'s set */
    if (vec && sfin) {
        er_lsbwd_forms_run(simd, n, dy, (float)sset.lo, (float)sset.hi, lo, hi);
    } else {
        for (int64_t i = 0; i < n; i++) {
            double elo = lo[i], ehi = hi[i];
            lo[i] = INFINITY;
            hi[i] = -INFINITY;
            int ok = sfin && isfinite(ehi);
            for (int c = 0; c < 4 && ok; c++)
                ok = er_lsbwd_forms(F, dy[i], c & 1 ? ehi : elo, c & 2 ? sset.hi : sset.lo, wide, &lo[i], &hi[i]);
            if (!ok) lo[i] = hi[i] = NAN;
        }
    }
    /* the exact results: in double from exp(y_i)'s and S's bounds, else in double-double (Lemma B5), else with MPFR
     * (S summed once a row) */
    double sp[3] = {0, 0, 0};
    int dd = vex && er_lsbwd_sparts(&sm, sp);
    if (vex) {
        er_lsbwd_exact_run(simd, n, dy, Sl, Sh, er_vec_fmt_of(pl->O), ex, rd);
    } else {
        for (int64_t i = 0; i < n; i++) ex[i] = NAN;
    }
    for (int64_t i = 0; i < n; i++) {
        if (ex[i] == ex[i]) continue;
        if (y[i] == -INFINITY || sm.m == 0) { /* exp(-inf) = 0, or S = 0: dx = dy */
            ex[i] = dy[i];
            rd[i] = er__round_double(pl->O, dy[i], ER_ROUND_NEAREST, pl->ov);
            continue;
        }
        if (dd && er_lsbwd_dd(pl->O, sp, sm.neg, dy[i], y[i], &ex[i], &rd[i])) continue;
        if (pl->mpfr_elems) ++*pl->mpfr_elems;
        if (!haveS) {
            er_sbwd_mpfr_sum(pl, dy, NULL, n, S);
            haveS = 1;
        }
        er_lsbwd_exact_mpfr(pl, dy[i], y[i], S, &ex[i], &rd[i]);
    }
    if (haveS) mpfr_clear(S);
    free(slow);
    return ER_OK;
}
