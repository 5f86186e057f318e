/* attention.c: the sets of an attention row (docs/algorithms/attention.md).
 *
 * The exact O and LSE of a row are enclosed in double arithmetic (Lemma A1): every score q.k_j as a double with the
 * any-order bound of its dot product, each weight exp(s_j - M) between the bounds of er__exp_bounds, the weights'
 * sum as a fixed-point sum (er_fxsum), the numerators from the lower weights with the bound of the difference.
 * Theorem A2 widens these by what a flash-style kernel may do to each key's weight and to the sums; Theorem A3 does
 * the same for LSE. Elements whose correct rounding the double enclosure leaves open are enclosed again with MPFR
 * at 64 to 4096 bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include "format/format.h"
#include "format/vecround.h"
#include "enclose/attention.h"
#include "enclose/ival.h"
#include "enclose/elementwise.h"

er_status er__attn_work_init(er_attn_work *w, int64_t Sk, int64_t Dv) {
    memset(w, 0, sizeof *w);
    size_t n = (size_t)(Sk > 0 ? Sk : 1), d = (size_t)(Dv > 0 ? Dv : 1);
    w->s = malloc(8 * n * sizeof(double));
    w->N = malloc(9 * d * sizeof(double));
    w->open = malloc(2 * d + 1);
    if (!w->s || !w->N || !w->open) {
        er__attn_work_free(w);
        return er__fail(ER_ERR_NOMEM, "cannot allocate an attention row of %lld keys", (long long)Sk);
    }
    w->slo = w->s + n;
    w->shi = w->slo + n;
    w->wlo = w->shi + n;
    w->whi = w->wlo + n;
    w->e0 = w->whi + n;
    w->e1 = w->e0 + n;
    w->e2 = w->e1 + n;
    w->A = w->N + d;
    w->B = w->A + d;
    w->T = w->B + d;
    w->tok = w->open + d + 1;
    return ER_OK;
}

void er__attn_work_free(er_attn_work *w) {
    free(w->s);
    free(w->N);
    free(w->open);
    memset(w, 0, sizeof *w);
}

/* er__up and er__dn with selects in place of branches (the same values), for the loops that vectorise. */
ER_ALWAYS_INLINE double er_attn_up(double x) {
    uint64_t b = er__bits(x);
    double y = er__from_bits(b + 1 - ((b >> 63) << 1)); /* +1 unit above 0, -1 below */
    y = x == 0 ? 4.9406564584124654e-324 : y;
    return x != x || x == INFINITY ? x : y;
}
ER_ALWAYS_INLINE double er_attn_dn(double x) { return -er_attn_up(-x); }

double er__attn_dot(const double *a, const double *b, int64_t n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* er__attn_dots: four keys at a time, each with its own four chains (the same operations in the same order as
 * er__attn_dot, so the same bits), which keeps sixteen independent sums in flight where one key's four wait on each
 * other. Built for the baseline, AVX2 and AVX-512. */
ER_ALWAYS_INLINE void er_attn_dots_body(const double *restrict q, const double *restrict k, int64_t D, int64_t n,
                                        double *restrict S) {
    int64_t t = 0, D4 = D & ~(int64_t)3;
    for (; t + 4 <= n; t += 4) {
        const double *k0 = k + t * D, *k1 = k0 + D, *k2 = k1 + D, *k3 = k2 + D;
        double a0[4] = {0, 0, 0, 0}, a1[4] = {0, 0, 0, 0}, a2[4] = {0, 0, 0, 0}, a3[4] = {0, 0, 0, 0};
        for (int64_t i = 0; i < D4; i += 4)
            for (int c = 0; c < 4; c++) {
                double qc = q[i + c];
                a0[c] += qc * k0[i + c];
                a1[c] += qc * k1[i + c];
                a2[c] += qc * k2[i + c];
                a3[c] += qc * k3[i + c];
            }
        for (int64_t i = D4; i < D; i++) { /* the rest into the first chain */
            a0[0] += q[i] * k0[i];
            a1[0] += q[i] * k1[i];
            a2[0] += q[i] * k2[i];
            a3[0] += q[i] * k3[i];
        }
        S[t] = (a0[0] + a0[1]) + (a0[2] + a0[3]);
        S[t + 1] = (a1[0] + a1[1]) + (a1[2] + a1[3]);
        S[t + 2] = (a2[0] + a2[1]) + (a2[2] + a2[3]);
        S[t + 3] = (a3[0] + a3[1]) + (a3[2] + a3[3]);
    }
    for (; t < n; t++) S[t] = er__attn_dot(q, k + t * D, D);
}
ER_SIMD_BUILDS(er_attn_dots,
               (const double *restrict q, const double *restrict k, int64_t D, int64_t n, double *restrict S),
               (q, k, D, n, S), er_attn_dots_body)
void er__attn_dots(int simd, const double *q, const double *k, int64_t D, int64_t n, double *S) {
    er_attn_dots(simd, q, k, D, n, S);
}

/* Every value, NaN and the infinities included: the row claims nothing (inputs that are not finite, or scores
 * beyond what the standard's bounds hold). */
static void er_attn_anything(const er_attn_plan *pl, er_cval *ocv, double *oex, double *ord, er_cval *lcv, double *lex,
                             double *lrd) {
    for (int64_t d = 0; d < pl->Dv; d++) {
        er__cval_from_interval(&ocv[d], -INFINITY, INFINITY, 1, er__fmt(ER_FP32));
        oex[d] = ord[d] = NAN;
    }
    er__cval_from_interval(lcv, -INFINITY, INFINITY, 1, er__fmt(ER_FP32));
    *lex = *lrd = NAN;
}

/* Lemma A5: sums of exact terms enclosed in double. ER_ATTN_LANES chains of TwoSum leave the exact sum equal to the
 * chains' sums s plus their exact errors; those errors summed in double (c), with their magnitudes (a), bound c's own
 * error by (m + ER_ATTN_LANES) 2^-52 a for m terms. */
#define ER_ATTN_LANES 8
typedef struct er_attn_dd { double s[ER_ATTN_LANES], c[ER_ATTN_LANES], a[ER_ATTN_LANES]; } er_attn_dd;

ER_ALWAYS_INLINE void er_attn_dd_add(er_attn_dd *z, int l, double x) {
    double t = z->s[l] + x, bb = t - z->s[l], e = (z->s[l] - (t - bb)) + (x - bb);
    z->s[l] = t;
    z->c[l] += e;
    z->a[l] += fabs(e);
}

/* The sum of the m terms added to z between *lo and *hi (a point where every partial sum was exact); 0 where a sum is
 * not finite. */
ER_ALWAYS_INLINE int er_attn_dd_close(const er_attn_dd *z, int64_t m, double *lo, double *hi) {
    double S = z->s[0], C = 0, A = 0;
    for (int l = 0; l < ER_ATTN_LANES; l++) {
        if (l > 0) {
            double t = S + z->s[l], bb = t - S, e = (S - (t - bb)) + (z->s[l] - bb);
            S = t;
            C += e;
            A += fabs(e);
        }
        C += z->c[l];
        A += z->a[l];
    }
    if (!isfinite(S) || !isfinite(C) || !isfinite(A)) return 0;
    if (A == 0) {
        *lo = *hi = S;
        return 1;
    }
    double E = er__mul_up(A, (double)(m + ER_ATTN_LANES) * 0x1p-52);
    *lo = er__dn(S + er__dn(C - E));
    *hi = er__up(S + er__up(C + E));
    return 1;
}

/* Nonzero unless x is 0 or has at most 26 significant bits and |x| >= 2^-400 (infinities pass: their sums are not
 * finite); integer operations that vectorise. Two such values multiply exactly. */
ER_ALWAYS_INLINE uint64_t er_attn_dd_bad(double x) {
    uint64_t b = er__bits(x) & ~(UINT64_C(1) << 63);
    return (b & ((UINT64_C(1) << 27) - 1)) | ((((b >> 52) - 623) >> 63) & ((0 - b) >> 63));
}

/* S_j = sum_d q_d k_d between *Slo and *Shi, q's values checked (er_attn_dd_bad); 0 where a value of k fails the same
 * check or a sum is not finite. */
ER_ALWAYS_INLINE int er_attn_score_dd(const double *q, const double *k, int64_t D, double *Slo, double *Shi) {
    er_attn_dd z = {{0}, {0}, {0}};
    uint64_t bad[ER_ATTN_LANES] = {0}, any = 0;
    int64_t d = 0;
    for (; d + ER_ATTN_LANES <= D; d += ER_ATTN_LANES)
        for (int l = 0; l < ER_ATTN_LANES; l++) {
            bad[l] |= er_attn_dd_bad(k[d + l]);
            er_attn_dd_add(&z, l, q[d + l] * k[d + l]);
        }
    for (; d < D; d++) {
        any |= er_attn_dd_bad(k[d]);
        er_attn_dd_add(&z, 0, q[d] * k[d]);
    }
    for (int l = 0; l < ER_ATTN_LANES; l++) any |= bad[l];
    return !any && er_attn_dd_close(&z, D, Slo, Shi);
}

/* N_d's ends (Lemma A5): sum_t w_t v_t with w_t = wlo_t where v_t >= 0 (lo; else whi_t), and the other way (hi), for
 * the column v (n values checked by er_attn_dd_bad), each weight split exactly into two halves of 26 bits
 * (w1, w2: Veltkamp's), a key whose lower weight is below 2^-400 bounded by whi_t |v_t| instead (no split or
 * product underflows then); 0 where a sum is not finite. */
ER_ALWAYS_INLINE int er_attn_numer_dd(int64_t n, const double *v, const double *wlo, const double *whi, double *Nlo,
                                     double *Nhi) {
    er_attn_dd zl = {{0}, {0}, {0}}, zh = {{0}, {0}, {0}};
    double tiny[ER_ATTN_LANES] = {0};
    int64_t t = 0;
    for (; t + ER_ATTN_LANES <= n; t += ER_ATTN_LANES)
        for (int l = 0; l < ER_ATTN_LANES; l++) {
            double vt = v[t + l], a = vt >= 0 ? wlo[t + l] : whi[t + l], b = vt >= 0 ? whi[t + l] : wlo[t + l];
            int small = wlo[t + l] < 0x1p-400; /* wlo <= whi: both halves of each weight taken above 2^-400 */
            tiny[l] += small ? whi[t + l] * fabs(vt) : 0.0;
            a = small ? 0.0 : a;
            b = small ? 0.0 : b;
            double ca = a * 134217729.0, a1 = ca - (ca - a), cb = b * 134217729.0, b1 = cb - (cb - b);
            er_attn_dd_add(&zl, l, a1 * vt);
            er_attn_dd_add(&zl, l, (a - a1) * vt);
            er_attn_dd_add(&zh, l, b1 * vt);
            er_attn_dd_add(&zh, l, (b - b1) * vt);
        }
    for (; t < n; t++) {
        double vt = v[t], a = vt >= 0 ? wlo[t] : whi[t], b = vt >= 0 ? whi[t] : wlo[t];
        if (wlo[t] < 0x1p-400) {
            tiny[0] += whi[t] * fabs(vt);
            continue;
        }
        double ca = a * 134217729.0, a1 = ca - (ca - a), cb = b * 134217729.0, b1 = cb - (cb - b);
        er_attn_dd_add(&zl, 0, a1 * vt);
        er_attn_dd_add(&zl, 0, (a - a1) * vt);
        er_attn_dd_add(&zh, 0, b1 * vt);
        er_attn_dd_add(&zh, 0, (b - b1) * vt);
    }
    /* the small weights' products: their sum in double, times 2, and 2^-1020 a product for those that underflow */
    double T = 0;
    for (int l = 0; l < ER_ATTN_LANES; l++) T += tiny[l];
    T = er__up(2 * T + (double)n * 0x1p-1020);
    double l0, h0, l1, h1;
    if (!er_attn_dd_close(&zl, 2 * n, &l0, &h0) || !er_attn_dd_close(&zh, 2 * n, &l1, &h1)) return 0;
    *Nlo = er__dn(l0 - T);
    *Nhi = er__up(h1 + T);
    return 1;
}

static void er_attn_weights(const er_attn_plan *pl, const er_attn_kv *kv, int64_t j0, int64_t n, er_attn_work *w,
                            er_attn_rowq *rq, int values);

/* The scores of keys k_0 .. k_(n-1) (rows of D values at k) between lo[t] and hi[t] (er_attn_score_dd; NaN where it
 * does not take the key), and N's ends for column v (er_attn_numer_dd), each built for the baseline and AVX2. */
#define ER_ATTN_DD_SCORES_ARGS const double *q, const double *k, int64_t D, int64_t n, double *lo, double *hi
#define ER_ATTN_DD_SCORES_BODY                                                                                        \
    {                                                                                                                 \
        for (int64_t t = 0; t < n; t++)                                                                               \
            if (!er_attn_score_dd(q, k + t * D, D, &lo[t], &hi[t])) lo[t] = hi[t] = NAN;                              \
    }
#define ER_ATTN_DD_NUMER_ARGS                                                                                         \
    int64_t n, const double *v, const double *wlo, const double *whi, double *Nlo, double *Nhi
#define ER_ATTN_DD_NUMER_BODY { return er_attn_numer_dd(n, v, wlo, whi, Nlo, Nhi); }
static void er_attn_scores_dd(ER_ATTN_DD_SCORES_ARGS) ER_ATTN_DD_SCORES_BODY
static int er_attn_numer(ER_ATTN_DD_NUMER_ARGS) ER_ATTN_DD_NUMER_BODY
#if ER_HAVE_AVX2
ER_AVX2 static void er_attn_scores_dd_avx2(ER_ATTN_DD_SCORES_ARGS) ER_ATTN_DD_SCORES_BODY
ER_AVX2 static int er_attn_numer_avx2(ER_ATTN_DD_NUMER_ARGS) ER_ATTN_DD_NUMER_BODY
#endif

/* The first enclosure of O's open elements (The exact results; Lemma A5), in double alone: each key's weight bounds
 * from its score's enclosure in two doubles where its values allow (into w->wlo, w->whi; else Lemma A1's, which
 * w->wok says the row holds, computed here where it does not), L's bounds from their fixed-point sum, each open N_d's
 * ends in two doubles, the quotients rounded outward; where both ends round alike, the correct rounding (ord[d],
 * w->open[d] cleared, oex[d] the lower end). Returns how many it decided. */
static int er_attn_first(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0, int64_t n,
                         double Mt, er_attn_work *w, double *oex, double *ord) {
    int64_t D = pl->D, Dv = pl->Dv;
    /* the scale between c0 and c1: 1/sqrt(D) rounded down and up, or the double itself (fp8's scale takes its
     * descales' roundings: Lemma A1's weights there) */
    double c0 = pl->sc, c1 = pl->sc;
    if (pl->sc_default) {
        mpfr_t c0m, c1m, x;
        mpfr_inits2(64, c0m, c1m, x, (mpfr_ptr)0);
        mpfr_set_si(x, (long)D, MPFR_RNDN);
        mpfr_rec_sqrt(c0m, x, MPFR_RNDD);
        mpfr_rec_sqrt(c1m, x, MPFR_RNDU);
        c0 = mpfr_get_d(c0m, MPFR_RNDD);
        c1 = mpfr_get_d(c1m, MPFR_RNDU);
        mpfr_clears(c0m, c1m, x, (mpfr_ptr)0);
    }
    double *al = malloc(sizeof(double) * 5 * (size_t)n), *ah = al + n, *lo = ah + n, *hi = lo + n, *col = hi + n;
    if (!al) return 0; /* no memory: MPFR's levels */
    /* the exps' arguments (NaN: the key keeps Lemma A1's weights), then their bounds in one run */
    int exact = !pl->fp8;
    for (int64_t d = 0; exact && d < D; d++) exact = !er_attn_dd_bad(q[d]) && isfinite(q[d]);
    int simd = pl->simd;
    if (exact) {
#if ER_HAVE_AVX2
        if (simd) er_attn_scores_dd_avx2(q, kv->k + j0 * D, D, n, al, ah);
        else
#endif
            er_attn_scores_dd(q, kv->k + j0 * D, D, n, al, ah);
        for (int64_t t = 0; t < n; t++) {
            double Sl = al[t], Sh = ah[t]; /* NaN stays NaN */
            double a = er__dn(Sl * c0), b = er__dn(Sl * c1), c = er__dn(Sh * c0), e = er__dn(Sh * c1);
            double sl = fmin(fmin(a, b), fmin(c, e));
            a = er__up(Sl * c0), b = er__up(Sl * c1), c = er__up(Sh * c0), e = er__up(Sh * c1);
            double sh = fmax(fmax(a, b), fmax(c, e));
            al[t] = isnan(Sl) ? NAN : er__dn(sl - Mt);
            ah[t] = isnan(Sl) ? NAN : er__up(sh - Mt);
        }
        er__exp_bounds_run(simd, n, al, lo, col); /* col: scratch here */
        er__exp_bounds_run(simd, n, ah, col, hi);
    }
    int a1 = !exact; /* a key keeps Lemma A1's weights: w->wok says whether the row has them */
    for (int64_t t = 0; !a1 && t < n; t++) a1 = isnan(al[t]);
    if (a1 && !w->wok) {
        er_attn_rowq rq;
        if (!er__attn_scores(pl, kv, q, j0, n, w, &rq)) {
            free(al);
            return 0;
        }
        er_attn_weights(pl, kv, j0, n, w, &rq, 0);
    }
    for (int64_t t = 0; exact && t < n; t++)
        if (!isnan(al[t])) {
            w->wlo[t] = lo[t];
            w->whi[t] = hi[t];
        }
    er_fxsum Ls = {0, 0};
    for (int64_t t = 0; t < n; t++) er__fxsum_add(&Ls, w->wlo[t], w->whi[t]);
    double Llo = er__fxsum_lo(&Ls), Lhi = er__fxsum_hi(&Ls);
    int done = 0;
    for (int64_t d = 0; d < Dv && Llo > 0; d++) {
        if (!w->open[d]) continue;
        uint64_t bad = 0;
        for (int64_t t = 0; t < n; t++) {
            col[t] = kv->v[(j0 + t) * Dv + d];
            bad |= er_attn_dd_bad(col[t]);
        }
        double Nlo, Nhi;
        if (bad) continue;
#if ER_HAVE_AVX2
        int ok = simd ? er_attn_numer_avx2(n, col, w->wlo, w->whi, &Nlo, &Nhi)
                      : er_attn_numer(n, col, w->wlo, w->whi, &Nlo, &Nhi);
        if (!ok) continue;
#else
        if (!er_attn_numer(n, col, w->wlo, w->whi, &Nlo, &Nhi)) continue;
#endif
        double xlo = Nlo >= 0 ? er__dn(Nlo / Lhi) : er__dn(Nlo / Llo),
               xhi = Nhi >= 0 ? er__up(Nhi / Llo) : er__up(Nhi / Lhi);
        if (pl->fp8) {
            xlo = er__dn(er__dn(xlo * pl->dv) * pl->so);
            xhi = er__up(er__up(xhi * pl->dv) * pl->so);
        }
        double rl = er__round_double(pl->O, xlo, ER_ROUND_NEAREST, pl->ov_o),
               rh = er__round_double(pl->O, xhi, ER_ROUND_NEAREST, pl->ov_o);
        oex[d] = xlo;
        if (rl == rh) {
            ord[d] = rl;
            w->open[d] = 0;
            done++;
        }
    }
    free(al);
    return done;
}

/* O's open elements (w->open) from weights wl[t] <= exp(s*_j - Mt) <= wh[t] and L between Ll and Lh: N's ends summed
 * with directed roundings into Nl and Nh (x a scratch), the quotients rounded outward, both ends rounded to O into
 * rl[d] and rh[d] (the lower one's double into oex[d]); where they agree, the correct rounding: ord[d], open[d]
 * cleared. Returns how many it decided. */
static int er_attn_open_quotients(const er_attn_plan *pl, const er_attn_kv *kv, int64_t j0, int64_t n, mpfr_t *wl,
                                  mpfr_t *wh, mpfr_srcptr Ll, mpfr_srcptr Lh, mpfr_ptr Nl, mpfr_ptr Nh, mpfr_ptr x,
                                  er_attn_work *w, double *oex, double *ord, double *rl, double *rh) {
    int64_t Dv = pl->Dv;
    int done = 0;
    for (int64_t d = 0; d < Dv; d++) {
        if (!w->open[d]) continue;
        mpfr_set_zero(Nl, 1);
        mpfr_set_zero(Nh, 1);
        for (int64_t t = 0; t < n; t++) {
            double v = kv->v[(j0 + t) * Dv + d];
            mpfr_mul_d(x, v >= 0 ? wl[t] : wh[t], v, MPFR_RNDD);
            mpfr_add(Nl, Nl, x, MPFR_RNDD);
            mpfr_mul_d(x, v >= 0 ? wh[t] : wl[t], v, MPFR_RNDU);
            mpfr_add(Nh, Nh, x, MPFR_RNDU);
        }
        mpfr_div(x, Nl, mpfr_sgn(Nl) >= 0 ? Lh : Ll, MPFR_RNDD);
        if (pl->fp8) { mpfr_mul_d(x, x, pl->dv, MPFR_RNDD); mpfr_mul_d(x, x, pl->so, MPFR_RNDD); }
        double lo = er__round_mpfr(pl->O, x, ER_ROUND_NEAREST, pl->ov_o);
        oex[d] = mpfr_get_d(x, MPFR_RNDN);
        mpfr_div(x, Nh, mpfr_sgn(Nh) >= 0 ? Ll : Lh, MPFR_RNDU);
        if (pl->fp8) { mpfr_mul_d(x, x, pl->dv, MPFR_RNDU); mpfr_mul_d(x, x, pl->so, MPFR_RNDU); }
        double hi = er__round_mpfr(pl->O, x, ER_ROUND_NEAREST, pl->ov_o);
        rl[d] = lo;
        rh[d] = hi;
        if (lo == hi) { ord[d] = lo; w->open[d] = 0; done++; }
    }
    return done;
}

/* The correctly rounded values that the double enclosure left open (w->open[d], and the LSE when w->open[Dv]),
 * from enclosures in MPFR at 64, 256, 1024 and 4096 bits. An element still open at 4096 bits (an exact value on a
 * rounding boundary, which only a rational one can be) keeps w->open set, its lower candidate in ord, and both
 * candidates join its set: it is never called exact. */
static void er_attn_mpfr(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0, int64_t n,
                         double Mt, er_attn_work *w, er_cval *ocv, double *oex, double *ord, er_cval *lcv,
                         double *lex, double *lrd) {
    int lse_open = w->open[pl->Dv];
    int64_t D = pl->D, Dv = pl->Dv;
    mpfr_t *pr = malloc(sizeof(mpfr_t) * (size_t)D), *wl = malloc(sizeof(mpfr_t) * (size_t)n),
           *wh = malloc(sizeof(mpfr_t) * (size_t)n);
    mpfr_ptr *pp = malloc(sizeof(mpfr_ptr) * (size_t)D);
    double *rl = malloc(sizeof(double) * (size_t)(Dv + 1));
    double *rh = rl ? malloc(sizeof(double) * (size_t)(Dv + 1)) : NULL;
    if (!pr || !wl || !wh || !pp || !rl || !rh) { /* no memory: left open, the estimates' roundings join the sets */
        free(pr); free(wl); free(wh); free(pp); free(rl); free(rh);
        for (int64_t d = 0; d < Dv; d++)
            if (w->open[d]) {
                ord[d] = er__round_double(pl->O, oex[d], ER_ROUND_NEAREST, pl->ov_o);
                er__cval_put(&ocv[d], ord[d]);
            }
        if (lse_open) {
            *lrd = er__round_double(pl->L, *lex, ER_ROUND_NEAREST, pl->ov_l);
            er__cval_put(lcv, *lrd);
        }
        return;
    }
    for (int64_t d = 0; d < D; d++) { mpfr_init2(pr[d], 53); pp[d] = pr[d]; }
    int todo = lse_open;
    for (int64_t d = 0; d < Dv; d++) todo += w->open[d];
    if (todo > lse_open) /* the first enclosure, in double */
        todo -= er_attn_first(pl, kv, q, j0, n, Mt, w, oex, ord);
    for (mpfr_prec_t p = 64; p <= 4096 && todo > 0; p *= 4) {
        mpfr_prec_t pw = p + 64;
        mpfr_t Sl, Sh, c0, c1, t0, t1, sl, sh, Ll, Lh, Nl, Nh, x;
        mpfr_inits2(pw + 64, Sl, Sh, c0, c1, t0, t1, sl, sh, x, (mpfr_ptr)0);
        mpfr_inits2(pw, Ll, Lh, Nl, Nh, (mpfr_ptr)0);
        /* the scale: 1/sqrt(D) between its roundings down and up, or the double exactly */
        if (pl->sc_default) {
            mpfr_set_si(x, (long)D, MPFR_RNDN);
            mpfr_rec_sqrt(c0, x, MPFR_RNDD);
            mpfr_rec_sqrt(c1, x, MPFR_RNDU);
        } else {
            mpfr_set_d(c0, pl->fp8 ? pl->sbase : pl->sc, MPFR_RNDN);
            mpfr_set_d(c1, pl->fp8 ? pl->sbase : pl->sc, MPFR_RNDN);
        }
        if (pl->fp8) { /* times descale_q descale_k (positive), rounded outward */
            mpfr_mul_d(c0, c0, pl->dq, MPFR_RNDD);
            mpfr_mul_d(c0, c0, pl->dk, MPFR_RNDD);
            mpfr_mul_d(c1, c1, pl->dq, MPFR_RNDU);
            mpfr_mul_d(c1, c1, pl->dk, MPFR_RNDU);
        }
        mpfr_set_zero(Ll, 1);
        mpfr_set_zero(Lh, 1);
        for (int64_t t = 0; t < n; t++) {
            const double *kj = kv->k + (j0 + t) * D;
            for (int64_t d = 0; d < D; d++) mpfr_set_d(pr[d], q[d] * kj[d], MPFR_RNDN); /* exact: 48-bit products */
            mpfr_sum(Sl, pp, (unsigned long)D, MPFR_RNDD);
            mpfr_sum(Sh, pp, (unsigned long)D, MPFR_RNDU);
            /* s = S scale: the least and the greatest of the four corner products */
            mpfr_mul(sl, Sl, c0, MPFR_RNDD);
            mpfr_mul(t0, Sl, c1, MPFR_RNDD); mpfr_min(sl, sl, t0, MPFR_RNDD);
            mpfr_mul(t0, Sh, c0, MPFR_RNDD); mpfr_min(sl, sl, t0, MPFR_RNDD);
            mpfr_mul(t0, Sh, c1, MPFR_RNDD); mpfr_min(sl, sl, t0, MPFR_RNDD);
            mpfr_mul(sh, Sl, c0, MPFR_RNDU);
            mpfr_mul(t1, Sl, c1, MPFR_RNDU); mpfr_max(sh, sh, t1, MPFR_RNDU);
            mpfr_mul(t1, Sh, c0, MPFR_RNDU); mpfr_max(sh, sh, t1, MPFR_RNDU);
            mpfr_mul(t1, Sh, c1, MPFR_RNDU); mpfr_max(sh, sh, t1, MPFR_RNDU);
            mpfr_sub_d(sl, sl, Mt, MPFR_RNDD);
            mpfr_sub_d(sh, sh, Mt, MPFR_RNDU);
            mpfr_init2(wl[t], pw);
            mpfr_init2(wh[t], pw);
            mpfr_exp(wl[t], sl, MPFR_RNDD);
            mpfr_exp(wh[t], sh, MPFR_RNDU);
            mpfr_add(Ll, Ll, wl[t], MPFR_RNDD);
            mpfr_add(Lh, Lh, wh[t], MPFR_RNDU);
        }
        todo -= er_attn_open_quotients(pl, kv, j0, n, wl, wh, Ll, Lh, Nl, Nh, x, w, oex, ord, rl, rh);
        if (lse_open) {
            mpfr_log(x, Ll, MPFR_RNDD);
            mpfr_add_d(x, x, Mt, MPFR_RNDD);
            double lo = er__round_mpfr(pl->L, x, ER_ROUND_NEAREST, pl->ov_l);
            *lex = mpfr_get_d(x, MPFR_RNDN);
            mpfr_log(x, Lh, MPFR_RNDU);
            mpfr_add_d(x, x, Mt, MPFR_RNDU);
            double hi = er__round_mpfr(pl->L, x, ER_ROUND_NEAREST, pl->ov_l);
            rl[Dv] = lo;
            rh[Dv] = hi;
            if (lo == hi) { *lrd = lo; lse_open = w->open[Dv] = 0; todo--; }
        }
        for (int64_t t = 0; t < n; t++) mpfr_clears(wl[t], wh[t], (mpfr_ptr)0);
        mpfr_clears(Sl, Sh, c0, c1, t0, t1, sl, sh, x, Ll, Lh, Nl, Nh, (mpfr_ptr)0);
    }
    for (int64_t d = 0; d < Dv; d++)
        if (w->open[d]) {
            ord[d] = rl[d];
            er__cval_put(&ocv[d], rl[d]);
            er__cval_put(&ocv[d], rh[d]);
        }
    if (lse_open) {
        *lrd = rl[Dv];
        er__cval_put(lcv, rl[Dv]);
        er__cval_put(lcv, rh[Dv]);
    }
    for (int64_t d = 0; d < D; d++) mpfr_clear(pr[d]);
    free(pr); free(wl); free(wh); free(pp); free(rl); free(rh);
}

/* er_attn_qnorm with the keys' part given (keys_bad): whether q or a key holds a value that is not finite; *qn the
 * bound of ||q|| (Lemma A1: q^2 exact in double, the sum of D of them within (D + 2) 2^-53 of itself). */
static int er_attn_qnorm_of(const er_attn_plan *pl, const double *q, int keys_bad, double *qn) {
    int64_t D = pl->D;
    double qss = 0;
    int bad = keys_bad;
    for (int64_t d = 0; d < D; d++) { bad |= !isfinite(q[d]); qss += q[d] * q[d]; }
    *qn = er__up(sqrt(er__up(qss * (1 + (double)(D + 2) * 0x1p-52))));
    return bad;
}

/* Whether query row q (D values) or its keys j0 .. j0 + n - 1 hold a value that is not finite (the row then claims
 * nothing); *qn the bound of ||q||_2 the scores' bounds take (Lemma A1). */
static int er_attn_qnorm(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0, int64_t n,
                          double *qn) {
    return er_attn_qnorm_of(pl, q, kv->bad[j0 + n] - kv->bad[j0] > 0, qn);
}

/* Lemma A1's bounds of n keys' scores from their dots S (in s, replaced by s = S sc): nu >= sum_d |q_d k_jd|
 * (Cauchy-Schwarz, from the norms' bounds kn), the error err, [slo, shi]; the operations of the scalar code, er__up
 * and er__dn by er_attn_up and er_attn_dn (the same values). Built for the baseline, AVX2 and AVX-512. */
ER_ALWAYS_INLINE void er_attn_sbounds_body(int64_t n, double qn, const double *restrict kn, const er_attn_sconst *skp,
                                           double sc, double *restrict s, double *restrict slo,
                                           double *restrict shi, double *restrict nu, double *restrict er) {
    const er_attn_sconst sk = *skp;
    for (int64_t t = 0; t < n; t++) {
        double S = s[t], u = er_attn_up(qn * kn[t]), e = sk.gD * u * (1 + 0x1p-50);
        double err = (e + (fabs(S) + e) * sk.screl + fabs(S) * 0x1p-52) * sk.asc * (1 + 0x1p-40), v = S * sc;
        s[t] = v;
        slo[t] = er_attn_dn(v - err);
        shi[t] = er_attn_up(v + err);
        nu[t] = u;
        er[t] = err;
    }
}
ER_SIMD_BUILDS(er_attn_sbounds,
               (int64_t n, double qn, const double *restrict kn, const er_attn_sconst *skp, double sc,
                double *restrict s, double *restrict slo, double *restrict shi, double *restrict nu,
                double *restrict er),
               (n, qn, kn, skp, sc, s, slo, shi, nu, er), er_attn_sbounds_body)

/* The scores of query row q against keys j0 .. j0 + n - 1 into w (s, slo, shi) and the row's quantities into rq; 0
 * where the row claims nothing (a special value, or bounds whose premises fail). */
int er__attn_scores(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0, int64_t n,
                      er_attn_work *w, er_attn_rowq *rq) {
    int64_t D = pl->D;
    double qn;
    if (er_attn_qnorm(pl, kv, q, j0, n, &qn)) return 0;
    /* Lemma A1: the scores. q k is exact in double (at most 24-bit values); each sum of D of them in er__attn_dot's
     * chains is within gD (its longest chain's additions) of the sum of their magnitudes */
    er_attn_sconst sk = er__attn_sconst(pl);
    er_attn_raw raw = {-INFINITY, INFINITY, -INFINITY, 0, 0, 0};
    er__attn_dots(pl->simd, q, kv->k + j0 * D, D, n, w->s); /* S of each key, then s in its place */
    /* each key's nu (e0), err (e1), s and bounds in a loop that vectorises, then the maxima in the keys' order */
    er_attn_sbounds(pl->simd, n, qn, kv->kn + j0, &sk, pl->sc, w->s, w->slo, w->shi, w->e0, w->e1);
    for (int64_t t = 0; t < n; t++) {
        double s = w->s[t], nu = w->e0[t], err = w->e1[t];
        if (s > raw.Mt) raw.Mt = s;
        if (w->slo[t] < raw.smin) raw.smin = w->slo[t];
        if (w->shi[t] > raw.smax) raw.smax = w->shi[t];
        if (nu > raw.numax) raw.numax = nu;
        if (kv->kn[j0 + t] > raw.kmax) raw.kmax = kv->kn[j0 + t];
        if (err > raw.errmax) raw.errmax = err;
    }
    return er__attn_rowq_finish(pl, qn, &raw, rq);
}

er_attn_sconst er__attn_sconst(const er_attn_plan *pl) {
    /* er__attn_dot's longest chain: D / 4 terms, the first D / 4 + D % 4 (Lemma A1) */
    double m = (double)(pl->D / 4 + pl->D % 4);
    return (er_attn_sconst){.gD = (m + 2) * 0x1p-53 * (1 + 0x1p-40), .asc = fabs(pl->sc),
                            .screl = (pl->sc_default ? 0x1.1p-52 : 0.0) +
                                     (pl->fp8 ? 0x1.1p-52 : 0.0)}; /* fp8: fl(fl(sbase dq) dk) */
}

int er__attn_rowq_finish(const er_attn_plan *pl, double qn, const er_attn_raw *raw, er_attn_rowq *rq) {
    int64_t D = pl->D;
    double asc = fabs(pl->sc), Mt = raw->Mt, smin = raw->smin, smax = raw->smax, numax = raw->numax,
           errmax = raw->errmax, kmax = raw->kmax;
    double u = pl->u, uin = pl->uin;
    /* Theorem A2's score error: the kernel's dot in the compute format, its scale, tf32 operands */
    /* fp8: the kernel's constant takes descale_q and descale_k, two roundings more */
    double gq = (pl->cp * (double)D + pl->cg + 8 + (pl->fp8 ? 2 : 0)) * u * (1 + 0x1p-10) * (1 + uin) * (1 + uin) +
                2 * uin + uin * uin;
    double delta = er__up(asc * numax * gq * (1 + 0x1p-40));
    if (pl->uq > 0) {
        /* qk_scale=input: q_d c and k_jd c (c = sqrt(scale) in fp32) each rounded to its format, relative u_q and u_k
         * or absolute eta / 2 below its normal range: (q c + e_q)(k c + e_k) moves from q k c^2 by at most
         * ((1 + u_q)(1 + u_k)(1 + u)^2 - 1) |q k| c^2 (c^2 within (1 + u)^2 of the scale) and c (|q| eta_k + |k|
         * eta_q) / 2 + eta_q eta_k / 4; the sums of |k_jd| and |q_d| are at most sqrt(D) times their 2-norms. The
         * score may then be rounded to q's format (torch's math path in fp16 and bf16): one more (1 + u_q), and an
         * absolute eta_q / 2 */
        double rel = (1 + pl->uq) * (1 + pl->uq) * (1 + pl->uk) * (1 + u) * (1 + u) * (1 + 0x1p-40) -
                     1; /* and S in q's format */
        double c = sqrt(asc) * (1 + 0x1p-20), l1 = sqrt((double)D) * (1 + 0x1p-40);
        double ca = pl->qk_cabs > 0 ? fmax(c, pl->qk_cabs) : c; /* a pre-scaled operand's rounding, in score units */
        double ab = pl->etaq * 0.5 * kmax * l1 * ca + pl->etak * 0.5 * qn * l1 * ca +
                    pl->etaq * pl->etak * 0.25 * (double)D + pl->etaq * 0.5;
        delta = er__up(delta + asc * numax * rel * (1 + 0x1p-40) + ab * (1 + 0x1p-30));
        /* scaled operands or scores that may overflow their format: the row claims nothing */
        double smag = fmax(fabs(smin), fabs(smax)) + delta;
        if (!(fmax(qn, kmax) * c < 0.5 * pl->qkmax) || !(smag < 0.5 * pl->qkmax)) {
            return 0;
        }
    }
    double Mabs = fmax(fabs(smin), fabs(smax));
    /* beyond these the fp32 scores may overflow, or the bounds' premises fail: the row claims nothing */
    if (!(errmax <= 0.25) || !(delta <= 0.25) || !(Mabs <= 0x1p60) || !(numax * asc <= 0x1p100) ||
        !(numax <= 0x1p120)) {
        return 0;
    }
    *rq = (er_attn_rowq){.u = u, .uin = uin, .qn = qn, .Mt = Mt, .smin = smin, .smax = smax, .numax = numax,
                         .errmax = errmax, .kmax = kmax, .delta = delta, .Mabs = Mabs};
    return 1;
}

/* One key's term of N (its addition's error into *c where comp: TwoSum, N + p = s + e exactly; else a fused
 * multiply-add), A (a fused multiply-add) and B (where withb) in one value dimension. */
ER_ALWAYS_INLINE void er_attn_nab_term(int comp, int withb, double a, double b, double x, double *restrict nd,
                                       double *restrict c, double *restrict ad, double *restrict bd) {
    double av = fabs(x);
    if (comp) {
        double p = a * x, s = *nd + p, bb = s - *nd;
        *c += (*nd - (s - bb)) + (p - bb);
        *nd = s;
    } else {
        *nd = fma(a, x, *nd);
    }
    *ad = fma(b, av, *ad);
    if (withb) *bd += av;
}

/* The terms of N, A and B (B NULL: not summed) of n keys (weights wl, wh; values v as floats, Dv a key), key after
 * key: two keys a pass over the value dimensions, each dimension's sums taking the first key's terms and then the
 * second's, the operations and their order those of one key at a time. Built for the baseline, AVX2 and AVX-512,
 * with and without N's errors, with and without B. */
ER_ALWAYS_INLINE void er_attn_nab_body(int comp, int withb, int64_t Dv, int64_t n, const double *restrict wl,
                                       const double *restrict wh, const float *restrict v, double *restrict N,
                                       double *restrict Nc, double *restrict A, double *restrict B) {
    int64_t t = 0;
    for (; t + 1 < n; t += 2) {
        const float *v0 = v + t * Dv, *v1 = v0 + Dv;
        double a0 = wl[t], b0 = wh[t], a1 = wl[t + 1], b1 = wh[t + 1];
        for (int64_t d = 0; d < Dv; d++) {
            double nd = N[d], c = comp ? Nc[d] : 0, ad = A[d], bd = withb ? B[d] : 0;
            er_attn_nab_term(comp, withb, a0, b0, v0[d], &nd, &c, &ad, &bd);
            er_attn_nab_term(comp, withb, a1, b1, v1[d], &nd, &c, &ad, &bd);
            N[d] = nd;
            if (comp) Nc[d] = c;
            A[d] = ad;
            if (withb) B[d] = bd;
        }
    }
    for (; t < n; t++)
        for (int64_t d = 0; d < Dv; d++) {
            double bd = withb ? B[d] : 0;
            er_attn_nab_term(comp, withb, wl[t], wh[t], v[t * Dv + d], &N[d], &Nc[d], &A[d], &bd);
            if (withb) B[d] = bd;
        }
}
ER_ALWAYS_INLINE void er_attn_nab_any(int comp, int64_t Dv, int64_t n, const double *restrict wl,
                                      const double *restrict wh, const float *restrict v, double *restrict N,
                                      double *restrict Nc, double *restrict A, double *restrict B) {
    if (comp && B) er_attn_nab_body(1, 1, Dv, n, wl, wh, v, N, Nc, A, B);
    else if (comp) er_attn_nab_body(1, 0, Dv, n, wl, wh, v, N, Nc, A, B);
    else if (B) er_attn_nab_body(0, 1, Dv, n, wl, wh, v, N, Nc, A, B);
    else er_attn_nab_body(0, 0, Dv, n, wl, wh, v, N, Nc, A, B);
}
ER_SIMD_BUILDS(er_attn_nab,
               (int comp, int64_t Dv, int64_t n, const double *restrict wl, const double *restrict wh,
                const float *restrict v, double *restrict N, double *restrict Nc, double *restrict A,
                double *restrict B),
               (comp, Dv, n, wl, wh, v, N, Nc, A, B), er_attn_nab_any)

/* The weights exp(s_j - Mt) (wlo, whi), their sum's bounds and width (rq), and per value dimension N, A and B. */
static void er_attn_weights(const er_attn_plan *pl, const er_attn_kv *kv, int64_t j0, int64_t n, er_attn_work *w,
                            er_attn_rowq *rq, int values) {
    int64_t Dv = pl->Dv;
    double Mt = rq->Mt;
    /* the weights exp(s_j - Mt) and their sum */
    er_fxsum Ls = {0, 0};
    double rho = 0;
    for (int64_t t = 0; t < n; t++) {
        w->e0[t] = er__dn(w->slo[t] - Mt);
        w->e1[t] = er__up(w->shi[t] - Mt);
    }
    er__exp_bounds_run(pl->simd, n, w->e0, w->wlo, w->e2); /* er__exp_bounds's values */
    er__exp_bounds_run(pl->simd, n, w->e1, w->e2, w->whi);
    for (int64_t t = 0; t < n; t++) {
        double lo = w->wlo[t], hi = w->whi[t];
        er__fxsum_add(&Ls, lo, hi);
        if (hi > 0) { /* the largest ratio, whatever the keys' order (the GPU's sums take them in another) */
            double r = (hi - lo) / hi;
            if (r > rho) rho = r;
        }
    }
    er__attn_sums_finish(&Ls, rho, rq);
    w->wok = 1;
    if (!values) return;
    /* N_d = sum_j w_j v_jd from the lower weights; A_d = sum_j whi_j |v_jd|; B_d = sum_j |v_jd|, the head's sums at
     * the row's last key where its keys start at the first (the same additions in the same order) */
    double *N = w->N, *A = w->A, *B = w->B, *Nc = w->T; /* Nc: N's additions' errors (pl->ncomp) */
    const double *bs = kv->bsum && j0 == 0 && n > 0 ? kv->bsum + (n - 1) * Dv : NULL;
    for (int64_t d = 0; d < Dv; d++) {
        N[d] = A[d] = Nc[d] = 0;
        B[d] = bs ? bs[d] : 0;
    }
    er_attn_nab(pl->simd, pl->ncomp, Dv, n, w->wlo, w->whi, kv->vf + j0 * Dv, N, Nc, A, bs ? NULL : B);
    if (pl->ncomp)
        for (int64_t d = 0; d < Dv; d++) N[d] += Nc[d];
}

void er__attn_sums_finish(const er_fxsum *Ls, double rho, er_attn_rowq *rq) {
    rq->Llo = er__fxsum_lo(Ls);
    rq->Lhi = er__fxsum_hi(Ls);
    rq->rho = er__up(rho * (1 + 0x1p-50));
}

/* A fully masked row: O = 0 (exact) or NaN; LSE = -inf (exact), +inf or NaN. */
static void er_attn_masked(const er_attn_plan *pl, er_cval *ocv, double *oex, double *ord, er_cval *lcv, double *lex,
                           double *lrd) {
    int64_t Dv = pl->Dv;
    for (int64_t d = 0; d < Dv; d++) {
        er__cval_from_interval(&ocv[d], 0.0, 0.0, 1, er__fmt(ER_FP32));
        oex[d] = ord[d] = 0.0;
    }
    er__cval_from_interval(lcv, INFINITY, -INFINITY, 1, er__fmt(ER_FP32));
    lcv->pinf = lcv->ninf = 1;
    *lex = -INFINITY;
    *lrd = er__round_double(pl->L, -INFINITY, ER_ROUND_NEAREST, pl->ov_l);
}

/* Theorem A2's and A3's widths of a row of n keys: how far a flash-style kernel may move each key's weight and the
 * sums (eps; the denominator's [Lklo, Lkhi]; the absolute parts abs1 per key, abs0 per element) and its LSE's own
 * roundings (Els). 0 where the denominator's lower bound is not positive (the row claims nothing). */
typedef struct er_attn_wide {
    double eps, abs1, abs0, Lklo, Lkhi, Els;
    double th_arg, U; /* the arguments' error (in the exponent) and the exps' ulps */
} er_attn_wide;

static int er_attn_widen(const er_attn_plan *pl, int64_t n, const er_attn_rowq *rq, er_attn_wide *wd) {
    double u = rq->u, uin = rq->uin, smin = rq->smin, smax = rq->smax, delta = rq->delta, Mabs = rq->Mabs;
    double Llo = rq->Llo, Lhi = rq->Lhi;
    /* Theorem A2: how far a flash-style kernel may move each key's weight (Theta, in the exponent) and the sums */
    double ulog = 2 * u * fmax(pl->Ulog, 4.0);
    double G = (double)((pl->Sk + pl->kv_block - 1) / pl->kv_block) + 2,
           T = pl->cp * (double)n + 2 * pl->cg + 2 * G + 4;
    double R = er__up(smax - smin), lnn = log((double)n) + 1;
    /* every exp argument is at most R + 2 delta in magnitude (up to its rounding) */
    double U = pl->exp_fast ? fmax(pl->U, 2 + 1.173 * (R + 2 * delta + 1)) : pl->U;
    double Uc = fmax(U, 2 + 1.173 * (R + lnn + 2 * delta + 1));
    double th_arg = 8 * u * (R + Mabs + 3 * delta);
    double th_split = 0x1p-20 + ulog * (lnn + delta) + 2 * u * (Mabs + lnn + 2 + delta) +
                      u * (R + lnn + 2 + 2 * delta) + 2 * u * (Uc + 0.5) + 10 * u;
    double theta = delta + th_arg + (G + 2) * (2 * u * (U + 0.5) * (1 + 2 * u) + u) + 6 * u + th_split;
    /* (1 - b) >= exp(-b (1 + b)) and b <= u_V for every relative factor: the (1 + u_V) covers the lower side. The
     * numerator's terms meet P's rounding (and tf32's of v); the denominator's only when it may sum the rounded P */
    double eps = expm1((theta + pl->uv + uin + T * u) * (1 + pl->uv) * (1 + 0x1p-40)) * (1 + 0x1p-30);
    double epsl = pl->psum_fp32 ? expm1((theta + T * u) * (1 + pl->uv) * (1 + 0x1p-40)) * (1 + 0x1p-30) : eps;
    double abs1 = pl->etav + (G + 2) * (U + 2) * 0x1p-126, abs0 = (G + (double)n + 4) * 0x1p-125;
    double absl = pl->psum_fp32 ? (G + 2) * (U + 2) * 0x1p-126 : abs1;
    double EL = er__up(2 * (double)n * absl * (1 + 0x1p-40) + abs0);
    double Lklo = er__dn(er__dn(Llo * er__dn(1 - epsl)) - EL), Lkhi = er__up(er__up(Lhi * er__up(1 + epsl)) + EL);
    /* Theorem A3: the kernel's LSE within eps of L and Els of its own roundings */
    double Els =
        er__up(2 * (0x1p-20 + ulog * (lnn + 2 * delta + 1)) + 8 * u * (Mabs + delta + lnn + 2) + 4 * u * (Uc + 0.5));
    *wd = (er_attn_wide){eps, abs1, abs0, Lklo, Lkhi, Els, th_arg, U};
    return Lklo > 0;
}

/* a x for a positive x in [flo, fhi]: the lower (up = 0) or upper end, rounded outward. */
static double er_scale_end(double a, double flo, double fhi, int up) {
    return up ? er__up(a * (a >= 0 ? fhi : flo)) : er__dn(a * (a >= 0 ? flo : fhi));
}

/* fp8 (Theorem A4): the kernel's O in [klo, khi] and the exact one in [xlo, xhi], both in softmax(s) v's units, become
 * the output's, times descale_v and scale_o: the kernel's with its descales' roundings (o_rel) and scale_o's (u) on
 * the way; the row's |O dv| bounds go to w->am for amax_o. */
static void er_attn_fp8_out(const er_attn_plan *pl, er_attn_work *w, double *klo, double *khi, double *xlo,
                            double *xhi, double *ex) {
    double u = pl->u, rel = er__up(pl->o_rel * (1 + 0x1p-40));
    double alo = er_scale_end(*klo, pl->dv, pl->dv, 0), ahi = er_scale_end(*khi, pl->dv, pl->dv, 1);
    alo = er__dn(er__dn(alo - er__up(fabs(alo) * rel)) - 0x1p-125);
    ahi = er__up(er__up(ahi + er__up(fabs(ahi) * rel)) + 0x1p-125);
    double mlo = alo > 0 ? alo : ahi < 0 ? -ahi : 0.0, mhi = fmax(fabs(alo), fabs(ahi));
    if (mlo > w->am.o_lo) w->am.o_lo = mlo;
    if (mhi > w->am.o_hi) w->am.o_hi = mhi;
    if (fabs(*ex * pl->dv) > w->am.o_ex) w->am.o_ex = fabs(*ex * pl->dv);
    double blo = er_scale_end(alo, pl->so, pl->so, 0), bhi = er_scale_end(ahi, pl->so, pl->so, 1);
    *klo = er__dn(er__dn(blo - er__up(fabs(blo) * u * (1 + 0x1p-40))) - 0x1p-125);
    *khi = er__up(er__up(bhi + er__up(fabs(bhi) * u * (1 + 0x1p-40))) + 0x1p-125);
    *xlo = er_scale_end(*xlo, pl->of_lo, pl->of_hi, 0);
    *xhi = er_scale_end(*xhi, pl->of_lo, pl->of_hi, 1);
    *ex *= pl->dv * pl->so;
}

/* The largest unnormalised p of a row (the key at its block's running maximum: exp of an argument within th_arg of
 * 0, within U ulps): between *lo and *hi. */
static void er_attn_pmax(const er_attn_wide *wd, double *lo, double *hi) {
    double th = er__up(wd->th_arg * (1 + 0x1p-20)), e = er__up((wd->U + 1) * 0x1p-23);
    *lo = er__dn(er__dn(1 - e) * er__dn(exp(-th) * (1 - 0x1p-50)));
    *hi = er__up(er__up(1 + e) * er__up(exp(th) * (1 + 0x1p-50)));
}

/* fp8 (Theorem A4): the row's largest P, normalised (the largest weight over the kernel's denominator) or not (the
 * weight of the key at its block's running maximum, exp of an argument within th_arg of 0), into w->am. */
static void er_attn_amax_s(const er_attn_plan *pl, int64_t n, er_attn_work *w, const er_attn_rowq *rq,
                           const er_attn_wide *wd) {
    double wl = 0, wh = 0;
    for (int64_t t = 0; t < n; t++) {
        if (w->wlo[t] > wl) wl = w->wlo[t];
        if (w->whi[t] > wh) wh = w->whi[t];
    }
    double u = pl->u, ab = er__up(2 * wd->abs1 * (1 + 0x1p-40));
    double nlo = er__dn(er__dn(er__dn(wl * er__dn(1 - wd->eps)) - ab) / wd->Lkhi);
    double nhi = er__up(er__up(er__up(wh * er__up(1 + wd->eps)) + ab) / wd->Lklo);
    nlo = er__dn(nlo * er__dn(1 - 4 * u));
    nhi = er__up(nhi * er__up(1 + 4 * u));
    double ulo, uhi;
    er_attn_pmax(wd, &ulo, &uhi);
    w->am.s_lo = fmin(nlo > 0 ? nlo : 0.0, ulo);
    w->am.s_hi = fmax(nhi, uhi);
    w->am.s_ex = wl / (0.5 * (rq->Llo + rq->Lhi));
}

/* er_attn_mpfr now with the keys (kv), or later by er__attn_row_mpfr (kv NULL). */
static void er_attn_mpfr_or_later(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0,
                                  int64_t n, double Mt, er_attn_work *w, er_cval *ocv, double *oex, double *ord,
                                  er_cval *lcv, double *lex, double *lrd) {
    w->Mt = Mt;
    if (kv) er_attn_mpfr(pl, kv, q, j0, n, Mt, w, ocv, oex, ord, lcv, lex, lrd);
    else w->mpfr_pending = 1;
}

er_status er__attn_row(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0, int64_t n,
                       er_attn_work *w, int lse, er_cval *ocv, double *oex, double *ord, er_cval *lcv, double *lex,
                       double *lrd) {
    memset(w->open, 0, (size_t)pl->Dv + 1); /* no rounding left open (er_attn_mpfr sets those it leaves) */
    memset(&w->am, 0, sizeof w->am);
    w->wok = 0;
    if (n <= 0) { /* O = 0 or NaN; every P 0 */
        er_attn_masked(pl, ocv, oex, ord, lcv, lex, lrd);
        w->am.nan = 1;
        return ER_OK;
    }
    er_attn_rowq rq;
    if (!er__attn_scores(pl, kv, q, j0, n, w, &rq)) {
        er_attn_anything(pl, ocv, oex, ord, lcv, lex, lrd);
        w->am.any = 1;
        return ER_OK;
    }
    er_attn_weights(pl, kv, j0, n, w, &rq, 1);
    return er__attn_row_tail(pl, kv, q, j0, n, w, &rq, lse, ocv, oex, ord, lcv, lex, lrd);
}

er_status er__attn_row_given(const er_attn_plan *pl, const double *q, int64_t j0, int64_t n, int keys_bad,
                             er_attn_work *w, const er_attn_raw *raw, const er_fxsum *Ls, double rho, int lse,
                             er_cval *ocv, double *oex, double *ord, er_cval *lcv, double *lex, double *lrd) {
    memset(w->open, 0, (size_t)pl->Dv + 1);
    memset(&w->am, 0, sizeof w->am);
    w->mpfr_pending = w->wok = 0;
    if (n <= 0) { /* O = 0 or NaN */
        er_attn_masked(pl, ocv, oex, ord, lcv, lex, lrd);
        w->am.nan = 1;
        return ER_OK;
    }
    double qn;
    er_attn_rowq rq;
    if (er_attn_qnorm_of(pl, q, keys_bad, &qn) || !er__attn_rowq_finish(pl, qn, raw, &rq)) {
        er_attn_anything(pl, ocv, oex, ord, lcv, lex, lrd);
        w->am.any = 1;
        return ER_OK;
    }
    er__attn_sums_finish(Ls, rho, &rq);
    return er__attn_row_tail(pl, NULL, q, j0, n, w, &rq, lse, ocv, oex, ord, lcv, lex, lrd);
}

void er__attn_row_mpfr(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0, int64_t n,
                       er_attn_work *w, er_cval *ocv, double *oex, double *ord, er_cval *lcv, double *lex,
                       double *lrd) {
    w->mpfr_pending = 0;
    w->wok = 0; /* Lemma A1's weights (the GPU's bits) are computed again on the host only where a key needs them */
    er_attn_mpfr(pl, kv, q, j0, n, w->Mt, w, ocv, oex, ord, lcv, lex, lrd);
}

/* A row's constants for its elements' bounds (er__attn_row_tail). */
typedef struct er_attn_tail_k {
    double gn, gnN, rho, u, eps, abs1, abs0, Llo, Lhi, Lklo, Lkhi, Lmid, tiny;
} er_attn_tail_k;

/* Theorem A2's bounds of every element of a row: the exact O in [xlo, xhi], the kernel's in [klo, khi], the
 * estimate N / Lmid (oex). With rd (an output of fp32, narrow 0, or of fp16 or bf16, narrow 1; f its er_vec_fmt), also
 * xlo's and xhi's roundings to the output to nearest, rd[d] and rd[Dv + d], where ok[d]: both ends within the output's
 * range and klo, khi finite within fp32's (the common case, which the scalar loop after takes from these). */
ER_ALWAYS_INLINE void er_attn_tail_body(int64_t Dv, const er_attn_tail_k *kp, const double *restrict N,
                                        const double *restrict A, const double *restrict B, double *restrict xl,
                                        double *restrict xh, double *restrict kl, double *restrict kh,
                                        double *restrict oex, double *restrict rd, uint8_t *restrict ok, er_vec_fmt f,
                                        int narrow) {
    const er_attn_tail_k k = *kp;
    for (int64_t d = 0; d < Dv; d++) {
        double Aup = er_attn_up(A[d] * (1 + k.gn) * (1 + 0x1p-50)), Bup = er_attn_up(B[d] * (1 + k.gn) * (1 + 0x1p-50));
        double E = er_attn_up((k.rho + k.gnN) * Aup * (1 + 0x1p-40) + k.tiny);
        double Nlo = er_attn_dn(N[d] - E), Nhi = er_attn_up(N[d] + E);
        double xlo = er_attn_dn(Nlo / (Nlo >= 0 ? k.Lhi : k.Llo)), xhi = er_attn_up(Nhi / (Nhi >= 0 ? k.Llo : k.Lhi));
        xl[d] = xlo;
        xh[d] = xhi;
        double wide = er_attn_up(er_attn_up(k.eps * Aup) + er_attn_up(2 * Bup * k.abs1 * (1 + 0x1p-40) + k.abs0));
        double Nklo = er_attn_dn(Nlo - wide), Nkhi = er_attn_up(Nhi + wide);
        double klo = er_attn_dn(Nklo / (Nklo >= 0 ? k.Lkhi : k.Lklo)),
               khi = er_attn_up(Nkhi / (Nkhi >= 0 ? k.Lklo : k.Lkhi));
        klo = er_attn_dn(er_attn_dn(klo - er_attn_up(fabs(klo) * 6 * k.u)) - 0x1p-125);
        khi = er_attn_up(er_attn_up(khi + er_attn_up(fabs(khi) * 6 * k.u)) + 0x1p-125);
        kl[d] = klo;
        kh[d] = khi;
        oex[d] = N[d] / k.Lmid;
        if (rd) {
            rd[d] = er_vec_rn_fmt(xlo, f, narrow);
            rd[Dv + d] = er_vec_rn_fmt(xhi, f, narrow);
            ok[d] = (uint8_t)((fabs(xlo) <= f.maxv) & (fabs(xhi) <= f.maxv) & (fabs(klo) <= FLT_MAX) &
                              (fabs(khi) <= FLT_MAX));
        }
    }
}
ER_ALWAYS_INLINE void er_attn_tail_any(int64_t Dv, const er_attn_tail_k *kp, const double *restrict N,
                                       const double *restrict A, const double *restrict B, double *restrict xl,
                                       double *restrict xh, double *restrict kl, double *restrict kh,
                                       double *restrict oex, double *restrict rd, uint8_t *restrict ok,
                                       er_vec_fmt f) {
    if (!rd) er_attn_tail_body(Dv, kp, N, A, B, xl, xh, kl, kh, oex, NULL, NULL, f, 0);
    else if (f.narrow) er_attn_tail_body(Dv, kp, N, A, B, xl, xh, kl, kh, oex, rd, ok, f, 1);
    else er_attn_tail_body(Dv, kp, N, A, B, xl, xh, kl, kh, oex, rd, ok, f, 0);
}
ER_SIMD_BUILDS(er_attn_tail,
               (int64_t Dv, const er_attn_tail_k *kp, const double *restrict N, const double *restrict A,
                const double *restrict B, double *restrict xl, double *restrict xh, double *restrict kl,
                double *restrict kh, double *restrict oex, double *restrict rd, uint8_t *restrict ok, er_vec_fmt f),
               (Dv, kp, N, A, B, xl, xh, kl, kh, oex, rd, ok, f), er_attn_tail_any)

er_status er__attn_row_tail(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0, int64_t n,
                            er_attn_work *w, const er_attn_rowq *rqp, int lse, er_cval *ocv, double *oex, double *ord,
                            er_cval *lcv, double *lex, double *lrd) {
    int64_t Dv = pl->Dv;
    er_attn_rowq rq = *rqp;
    memset(w->open, 0, (size_t)pl->Dv + 1);
    double u = rq.u, Mt = rq.Mt, Llo = rq.Llo, Lhi = rq.Lhi, rho = rq.rho;
    double gn = (double)(n + 2) * 0x1p-53 * (1 + 0x1p-40);
    er_attn_wide wd;
    if (!er_attn_widen(pl, n, &rq, &wd)) {
        er_attn_anything(pl, ocv, oex, ord, lcv, lex, lrd);
        w->am.any = 1;
        return ER_OK;
    }
    double eps = wd.eps, abs1 = wd.abs1, abs0 = wd.abs0, Lklo = wd.Lklo, Lkhi = wd.Lkhi;
    if (pl->fp8) {
        double plo, phi;
        er_attn_pmax(&wd, &plo, &phi);
        if (!(er__up(phi * pl->ss) < pl->vmax)) { /* p scale_s may saturate: not modelled, the row claims nothing */
            er_attn_anything(pl, ocv, oex, ord, lcv, lex, lrd);
            w->am.any = 1;
            return ER_OK;
        }
    }
    if (pl->amax) er_attn_amax_s(pl, n, w, &rq, &wd);

    int open = 0;
    double Lmid = 0.5 * (Llo + Lhi);
    /* the exact O in [xlo, xhi] and the kernel's in [klo, khi], each element in one loop that vectorises (the
     * bounds' operations and er__up's and er__dn's values as the scalar code gives them), then the roundings */
    /* N's error relative to A: (n + 2) 2^-53 for its double sum, (3 + n^2 2^-52) 2^-53 with its errors kept */
    double gnN = pl->ncomp ? (3 + (double)n * (double)n * 0x1p-52) * 0x1p-53 * (1 + 0x1p-40) : gn;
    er_attn_tail_k tk = {gn, gnN, rho, u, eps, abs1, abs0, Llo, Lhi, Lklo, Lkhi, Lmid, (double)n * 0x1p-1074};
    double *xl = w->T, *xh = xl + Dv, *kl = xh + Dv, *kh = kl + Dv, *rd = kh + Dv;
    /* the roundings in the loop for an output of fp32, fp16 or bf16 (not fp8 attention's, which scales the bounds
     * first) */
    int vec = !pl->fp8 && (pl->O->id == ER_FP32 || pl->O->id == ER_FP16 || pl->O->id == ER_BF16);
    er_vec_fmt f = er_vec_fmt_of(vec ? pl->O : er__fmt(ER_FP32));
    er_attn_tail(pl->simd, Dv, &tk, w->N, w->A, w->B, xl, xh, kl, kh, oex, vec ? rd : NULL, w->tok, f);
    const er_fmt_info *F32 = er__fmt(ER_FP32);
    for (int64_t d = 0; d < Dv; d++) {
        double xlo = xl[d], xhi = xh[d], klo = kl[d], khi = kh[d], rl, rh;
        if (vec && w->tok[d]) { /* er__cval_from_interval's and er__round_double's values there */
            ocv[d] = (er_cval){ .lo = klo, .hi = khi };
            rl = rd[d];
            rh = rd[Dv + d];
        } else {
            if (pl->fp8) er_attn_fp8_out(pl, w, &klo, &khi, &xlo, &xhi, &oex[d]);
            er__cval_from_interval(&ocv[d], klo, khi, 0, F32);
            rl = er__round_double(pl->O, xlo, ER_ROUND_NEAREST, pl->ov_o);
            rh = er__round_double(pl->O, xhi, ER_ROUND_NEAREST, pl->ov_o);
        }
        w->open[d] = !(rl == rh);
        if (rl == 0) rl = copysign(0.0, w->N[d]); /* both ends round to a zero: the sign of the estimate (+0 for 0) */
        ord[d] = w->open[d] ? NAN : rl;
        open |= w->open[d];
    }

    if (!lse) { /* LSE not asked for: its set and the MPFR work it may need are skipped */
        w->open[Dv] = 0;
        if (open) er_attn_mpfr_or_later(pl, kv, q, j0, n, Mt, w, ocv, oex, ord, lcv, lex, lrd);
        return ER_OK;
    }
    /* Theorem A3: LSE = Mt + log L */
    double Els = wd.Els;
    double xlo = er__dn(Mt + er__log_dir(Llo, 0)), xhi = er__up(Mt + er__log_dir(Lhi, 1));
    double klo = er__dn(er__dn(Mt + er__log_dir(Lklo, 0)) - Els),
           khi = er__up(er__up(Mt + er__log_dir(Lkhi, 1)) + Els);
    er__cval_from_interval(lcv, klo, khi, 0, er__fmt(ER_FP32));
    *lex = Mt + log(Lmid);
    double rl = er__round_double(pl->L, xlo, ER_ROUND_NEAREST, pl->ov_l),
           rh = er__round_double(pl->L, xhi, ER_ROUND_NEAREST, pl->ov_l);
    int lse_open = !(rl == rh);
    *lrd = lse_open ? NAN : rl;
    w->open[Dv] = (uint8_t)lse_open;
    if (open || lse_open) er_attn_mpfr_or_later(pl, kv, q, j0, n, Mt, w, ocv, oex, ord, lcv, lex, lrd);
    return ER_OK;
}

int er__attn_lse_bounds(const er_attn_plan *pl, const er_attn_kv *kv, const double *q, int64_t j0, int64_t n,
                        er_attn_work *w, double b[4], er_attn_rowq *rqo) {
    er_attn_rowq rq;
    er_attn_wide wd;
    if (n <= 0 || !er__attn_scores(pl, kv, q, j0, n, w, &rq)) return 0;
    if (rqo) *rqo = rq;
    er_attn_weights(pl, kv, j0, n, w, &rq, 0);
    if (!er_attn_widen(pl, n, &rq, &wd)) return 0;
    b[0] = er__dn(rq.Mt + er__log_dir(rq.Llo, 0));
    b[1] = er__up(rq.Mt + er__log_dir(rq.Lhi, 1));
    b[2] = er__dn(er__dn(rq.Mt + er__log_dir(wd.Lklo, 0)) - wd.Els);
    b[3] = er__up(er__up(rq.Mt + er__log_dir(wd.Lkhi, 1)) + wd.Els);
    return 1;
}
