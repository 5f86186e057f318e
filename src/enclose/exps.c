/* exps.c: a row's exponentials enclosed in double (docs/algorithms/double-bounds.md): exp(x_j - m) and the
 * kernel's exp(d_j), d_j = fl(x_j - m), for softmax's and cross_entropy's sets and exact results (softmax.h). */
#include <math.h>
#include <stdint.h>
#include "format/format.h"
#include "enclose/approx.h"
#include "enclose/ival.h"
#include "enclose/softmax.h"

/* exp(t + e) from the bounds [lo, hi] of exp(t) (|e| <= 2^-30): exp(t + e) within exp(t) e^(+-|e|), which 1 - 2|e|
 * and 1 + 2|e| bound; for larger |e| (t <= -2^23, as |e| <= 2^-53 |t|) exp(x_j - m) < 2^-1074. */
static void er_exps_shift(double e, double *lo, double *hi) {
    if (e != 0 && fabs(e) <= 0x1p-30) {
        *lo = er__dn(*lo * er__dn(1.0 - 2.0 * fabs(e)));
        *hi = er__up(*hi * er__up(1.0 + 2.0 * fabs(e)));
        if (*lo < 0) *lo = 0;
    } else if (e != 0) {
        *lo = 0;
        *hi = 4.9406564584124654e-324;
    }
}

/* x_j - m as t + e (TwoSum; t = -inf and e = 0 at a -inf logit), without a branch. */
ER_ALWAYS_INLINE void er_exps_diff_body(int64_t n, const double *restrict x, double m, double *restrict tt,
                                        double *restrict ee) {
    for (int64_t j = 0; j < n; j++) {
        double t = x[j] - m, bb = t - x[j], e = (x[j] - (t - bb)) + (-m - bb);
        tt[j] = t;
        ee[j] = x[j] == -INFINITY ? 0.0 : e;
    }
}
static void er_exps_diff(int64_t n, const double *restrict x, double m, double *restrict tt, double *restrict ee) {
    er_exps_diff_body(n, x, m, tt, ee);
}
#if ER_HAVE_AVX2
ER_AVX2 static void er_exps_diff_avx2(int64_t n, const double *restrict x, double m, double *restrict tt,
                                      double *restrict ee) {
    er_exps_diff_body(n, x, m, tt, ee);
}
#endif

void er__exps_fill(er_exps *ex, const double *x, int64_t n, double m, int simd) {
#if ER_HAVE_AVX2
    if (simd) er_exps_diff_avx2(n, x, m, ex->t, ex->e);
    else
#endif
        er_exps_diff(n, x, m, ex->t, ex->e);
    er__exp_bounds_run(simd, n, ex->t, ex->lo, ex->hi); /* [0, 0] at -inf */
    for (int64_t j = 0; j < n; j++)
        if (ex->e[j] != 0) er_exps_shift(ex->e[j], &ex->lo[j], &ex->hi[j]);
}

/* One element of er__exps_fill_kernel (x_j a double or -inf): ex's arrays at j, and the ends of the kernel's exp
 * of d_j in *el, *eh (0 where d_j is -inf). */
static void er_exps_kernel_one(er_exps *ex, const er_softmax_plan *pl, const double *x, int64_t j, double m,
                               double *el, double *eh) {
    *el = *eh = 0;
    if (x[j] == -INFINITY) {
        ex->lo[j] = ex->hi[j] = ex->dlo[j] = ex->dhi[j] = ex->e[j] = 0;
        ex->t[j] = -INFINITY;
        return;
    }
    double t = x[j] - m, bb = t - x[j], e = (x[j] - (t - bb)) + (-m - bb); /* TwoSum: t + e = x_j - m */
    double dj = er__round_sum(pl->F, x[j], -m, ER_ROUND_NEAREST), dl, dh, lo, hi;
    ex->t[j] = t;
    ex->e[j] = e;
    if (dj == -INFINITY) {
        ex->dlo[j] = ex->dhi[j] = 0;
        er__exp_bounds(t, &lo, &hi);
        er_exps_shift(e, &lo, &hi);
    } else {
        er__exp_bounds(dj, &dl, &dh);
        ex->dlo[j] = dl;
        ex->dhi[j] = dh;
        er__exp_ends(pl, dj, dl, dh, el, eh); /* the sets' sums, added as er_softmax_sets_dbl adds them */
        /* x_j - m = d_j + v* with v* = (t - d_j) + e; the double v below is within 2^-53 (|t - d_j| + |v|) of it
         * (two roundings), below 2^-60 where |v| <= 2^-18 */
        double v = (t - dj) + e;
        if (dj == t && e == 0) {
            lo = dl;
            hi = dh;
        } else if (fabs(v) <= 0x1p-18) {
            er__exp_shift(dl, dh, v, &lo, &hi);
        } else {
            er__exp_bounds(t, &lo, &hi);
            er_exps_shift(e, &lo, &hi);
        }
    }
    ex->lo[j] = lo;
    ex->hi[j] = hi;
}

/* er_exps_kernel_one's common case in passes that vectorise (no call, no branch): F = fp32, m a float, x_j a float
 * with d_j >= -690, the exp within an integer U <= 2^30 ulps where er__approx_ends takes its common case (Lemma U2),
 * and |v| <= 2^-18 (Lemma D7) or v = 0. The values written are er_exps_kernel_one's; an element outside that case is
 * marked in slow (its values are then garbage). Runs of ER_EXPS_RUN: the kernel's d_j, exp(d_j)'s bounds from
 * er__exp_bounds_run (Theorem D1, the same values as er__exp_bounds), then the rest. */
#define ER_EXPS_RUN 256
ER_ALWAYS_INLINE void er_exps_f32_dj_body(int64_t n, const double *restrict x, float mf, double *restrict d) {
    for (int64_t j = 0; j < n; j++) d[j] = (double)((float)x[j] + mf); /* er__round_sum's fp32 sum */
}
/* er__exp_ends's values in fp32 with an integer U <= 2^30 (not __expf's bound) from exp(d_j)'s bounds [dl, dh], where
 * er__approx_ends takes its common case (Lemma U2): both ends in one binade of normals, the spacing sp there. Returns
 * whether it is that case (*el and *eh are then er__exp_ends's lower end, 0 below the least normal, and upper end). */
ER_ALWAYS_INLINE int er_exp_ends_f32(double dl, double dh, double U, double *el, double *eh) {
    uint64_t ea = er__bits(dl) >> 52, eb = er__bits(dh) >> 52;
    double ca = (float)dl, cb = (float)dh, top = er__from_bits((ea + 1) << 52), sp = er__from_bits((ea - 23) << 52);
    double ml = ca < dl ? ca : dl, mh = cb > dh ? cb : dh, us = U * sp;
    double l = er__round_f32(ml - us, ER_ROUND_UP), h = er__round_f32(mh + us, ER_ROUND_DOWN);
    *el = l >= 0x1p-126 ? l : 0.0;
    *eh = h;
    return (dl >= 0x1p-125) & (ea == eb) & (cb < top) & (us <= 0.125 * ml);
}

ER_ALWAYS_INLINE void er_exps_f32_rest_body(int64_t n, const double *restrict x, double m, float mf, double U,
                                            double *restrict tt, double *restrict ee, double *restrict dlo,
                                            double *restrict dhi, double *restrict lo, double *restrict hi,
                                            double *restrict elo, double *restrict ehi, uint8_t *restrict slow) {
    for (int64_t j = 0; j < n; j++) {
        double xj = x[j], t = xj - m, bb = t - xj, e = (xj - (t - bb)) + (-m - bb); /* TwoSum: t + e = x_j - m */
        double dj = (double)((float)xj + mf), dl = dlo[j], dh = dhi[j];
        int ok = ((double)(float)xj == xj) & (dj >= -690.0);
        double el, eh;
        ok &= er_exp_ends_f32(dl, dh, U, &el, &eh);
        double v = (t - dj) + e, l, h;
        er__exp_shift_run1(dl, dh, v, &l, &h);
        int same = (dj == t) & (e == 0);
        ok &= same | (fabs(v) <= 0x1p-18);
        tt[j] = t;
        ee[j] = e;
        lo[j] = same ? dl : l;
        hi[j] = same ? dh : h;
        elo[j] = el;
        ehi[j] = eh;
        slow[j] = (uint8_t)!ok;
    }
}
#define ER_EXPS_REST_ARGS                                                                                             \
    int64_t n, const double *restrict x, double m, float mf, double U, double *restrict tt, double *restrict ee,      \
        double *restrict dlo, double *restrict dhi, double *restrict lo, double *restrict hi, double *restrict elo,   \
        double *restrict ehi, uint8_t *restrict slow
#define ER_EXPS_REST_CALL er_exps_f32_rest_body(n, x, m, mf, U, tt, ee, dlo, dhi, lo, hi, elo, ehi, slow)
static void er_exps_f32_dj(int64_t n, const double *restrict x, float mf, double *restrict d) {
    er_exps_f32_dj_body(n, x, mf, d);
}
static void er_exps_f32_rest(ER_EXPS_REST_ARGS) { ER_EXPS_REST_CALL; }
#if ER_HAVE_AVX2
ER_AVX2 static void er_exps_f32_dj_avx2(int64_t n, const double *restrict x, float mf, double *restrict d) {
    er_exps_f32_dj_body(n, x, mf, d);
}
ER_AVX2 static void er_exps_f32_rest_avx2(ER_EXPS_REST_ARGS) { ER_EXPS_REST_CALL; }
#endif
/* A run's kernel differences d_j = fl(x_j + mf) in fp32 into d, and exp(d_j)'s bounds (Theorem D1) into dl, dh. */
static void er_exps_f32_head(int simd, int64_t k, const double *x, float mf, double *d, double *dl, double *dh) {
#if ER_HAVE_AVX2
    if (simd) er_exps_f32_dj_avx2(k, x, mf, d);
    else
#endif
        er_exps_f32_dj(k, x, mf, d);
    er__exp_bounds_run(simd, k, d, dl, dh);
}
static void er_exps_f32(int simd, int64_t n, const double *x, double m, double U, er_exps *ex,
                        const er_exps_scratch *w) {
    float mf = (float)-m;
    for (int64_t j0 = 0; j0 < n; j0 += ER_EXPS_RUN) {
        int64_t k = n - j0 < ER_EXPS_RUN ? n - j0 : ER_EXPS_RUN;
        double *tt = ex->t + j0, *dl = ex->dlo + j0, *dh = ex->dhi + j0; /* t holds d_j until the rest writes it */
        er_exps_f32_head(simd, k, x + j0, mf, tt, dl, dh);
#if ER_HAVE_AVX2
        if (simd)
            er_exps_f32_rest_avx2(k, x + j0, m, mf, U, tt, ex->e + j0, dl, dh, ex->lo + j0, ex->hi + j0, w->el + j0,
                                  w->eh + j0, w->slow + j0);
        else
#endif
            er_exps_f32_rest(k, x + j0, m, mf, U, tt, ex->e + j0, dl, dh, ex->lo + j0, ex->hi + j0, w->el + j0,
                             w->eh + j0, w->slow + j0);
    }
}

/* er__exp_ends_f32_run's loop over a run (d: the kernel's d_j, then [dl, dh] exp(d_j)'s bounds). */
ER_ALWAYS_INLINE void er_exp_ends_f32_body(int64_t n, const double *restrict x, const double *restrict d,
                                           const double *restrict dl, const double *restrict dh, double U,
                                           double *restrict elo, double *restrict ehi, uint8_t *restrict slow) {
    for (int64_t j = 0; j < n; j++) {
        int ok = ((double)(float)x[j] == x[j]) & (d[j] >= -690.0);
        ok &= er_exp_ends_f32(dl[j], dh[j], U, &elo[j], &ehi[j]);
        slow[j] = (uint8_t)!ok;
    }
}
#define ER_EXP_ENDS_ARGS                                                                                              \
    int64_t n, const double *restrict x, const double *restrict d, const double *restrict dl,                        \
        const double *restrict dh, double U, double *restrict elo, double *restrict ehi, uint8_t *restrict slow
ER_SIMD_BUILDS(er_exp_ends_f32_run, (ER_EXP_ENDS_ARGS), (n, x, d, dl, dh, U, elo, ehi, slow), er_exp_ends_f32_body)

void er__exp_ends_f32_of(int simd, int64_t n, const double *x, const double *dl, const double *dh, double U,
                          double *elo, double *ehi, uint8_t *slow) {
    er_exp_ends_f32_run(simd, n, x, x, dl, dh, U, elo, ehi, slow);
}

void er__exp_ends_f32_run(int simd, int64_t n, const double *x, double m, double U, double *elo, double *ehi,
                          uint8_t *slow) {
    double d[ER_EXPS_RUN], dl[ER_EXPS_RUN], dh[ER_EXPS_RUN];
    float mf = (float)-m;
    for (int64_t j0 = 0; j0 < n; j0 += ER_EXPS_RUN) {
        int64_t k = n - j0 < ER_EXPS_RUN ? n - j0 : ER_EXPS_RUN;
        er_exps_f32_head(simd, k, x + j0, mf, d, dl, dh);
        er_exp_ends_f32_run(simd, k, x + j0, d, dl, dh, U, elo + j0, ehi + j0, slow + j0);
    }
}

/* er__sums32's last step: the 32 partial sums added in turn from the 0th. */
static void er_sums32_join(const double *pa, const double *pb, double *sa, double *sb) {
    double a = 0, b = 0;
    for (int l = 0; l < 32; l++) {
        a += pa[l];
        b += pb[l];
    }
    *sa = a;
    *sb = b;
}
/* er__sums32's partial sums (pa, pb: 32 each, from 0): a loop over the lanes that vectorises. */
ER_ALWAYS_INLINE void er_sums32_body(const double *restrict a, const double *restrict b, int64_t n,
                                     double *restrict pa, double *restrict pb) {
    int64_t j = 0;
    for (; j + 32 <= n; j += 32)
        for (int l = 0; l < 32; l++) {
            pa[l] += a[j + l];
            pb[l] += b[j + l];
        }
    for (int l = 0; j + l < n; l++) {
        pa[l] += a[j + l];
        pb[l] += b[j + l];
    }
}
#define ER_SUMS32_ARGS                                                                                                \
    const double *restrict a, const double *restrict b, int64_t n, double *restrict pa, double *restrict pb
ER_SIMD_BUILDS(er_sums32_run, (ER_SUMS32_ARGS), (a, b, n, pa, pb), er_sums32_body)

void er__sums32(int simd, const double *a, const double *b, int64_t n, double *sa, double *sb) {
    double pa[32] = {0}, pb[32] = {0};
    er_sums32_run(simd, a, b, n, pa, pb);
    er_sums32_join(pa, pb, sa, sb);
}

void er__exps_fill_kernel(er_exps *ex, const er_softmax_plan *pl, const double *x, int64_t n, double m,
                          const er_exps_scratch *w) {
    double U = pl->U;
    int fast = w && pl->F->id == ER_FP32 && !pl->exp_fast && U >= 0 && U <= 0x1p30 && (double)(int64_t)U == U &&
               (double)(float)m == m;
    if (fast) er_exps_f32(w->simd, n, x, m, U, ex, w);
    if (w) { /* the ends into w's arrays, then their sums */
        for (int64_t j = 0; j < n; j++)
            if (!fast || w->slow[j]) er_exps_kernel_one(ex, pl, x, j, m, &w->el[j], &w->eh[j]);
        er__sums32(w->simd, w->el, w->eh, n, &ex->esl, &ex->esh);
    } else { /* the same order, each end added to its partial sum as it comes */
        double pa[32] = {0}, pb[32] = {0};
        for (int64_t j = 0; j < n; j++) {
            double el, eh;
            er_exps_kernel_one(ex, pl, x, j, m, &el, &eh);
            pa[j % 32] += el;
            pb[j % 32] += eh;
        }
        er_sums32_join(pa, pb, &ex->esl, &ex->esh);
    }
    ex->sums = 1;
}

void er__exps_fill_rounded(er_exps *ex, const er_fmt_info *F, const double *x, int64_t n, double m) {
    for (int64_t j = 0; j < n; j++) {
        double dj = x[j] == -INFINITY ? -INFINITY : er__round_sum(F, x[j], -m, ER_ROUND_NEAREST);
        if (dj == -INFINITY) ex->dlo[j] = ex->dhi[j] = 0;
        else if (dj == ex->t[j] && ex->e[j] == 0) { ex->dlo[j] = ex->lo[j]; ex->dhi[j] = ex->hi[j]; }
        else er__exp_bounds(dj, &ex->dlo[j], &ex->dhi[j]);
    }
}
