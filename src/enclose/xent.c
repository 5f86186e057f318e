/* xent.c: the sets of cross-entropy's loss and gradient (src/enclose/xent.h; docs/algorithms/cross-entropy.md).
 *
 * A kernel's probabilities lie in softmax's set, or are exp of a log-probability in log_softmax's set (rounded to the
 * logits' format or not); its log-sum-exp in log_softmax's computed m + log(s). The loss and the gradient are then
 * expansions into monomials of those leaves, each perturbed by the roundings on its path (Lemma N1 of
 * norm-backward.md): the set is the range of the expansion over the leaves, plus and minus gamma(k) times the
 * monomials' magnitudes and the underflow term. The exact results are enclosed in double (exp by Theorem D1, the sums
 * in fixed point, the logs with MPFR) and, where that cannot decide a rounding, with MPFR at growing precision. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "enclose/xent.h"
#include "enclose/approx.h"
#include "enclose/ival.h"
#include "enclose/elementwise.h"

/* Interval arithmetic on doubles, each end rounded outward (Lemma D0). */
static void er_imul(double al, double ah, double bl, double bh, double *lo, double *hi) {
    double p[4] = { al * bl, al * bh, ah * bl, ah * bh };
    *lo = *hi = p[0];
    for (int i = 1; i < 4; i++) {
        if (p[i] < *lo) *lo = p[i];
        if (p[i] > *hi) *hi = p[i];
    }
    *lo = er__dn(*lo);
    *hi = er__up(*hi);
}

/* log(v) (er__log_dir) or log1p(v) (MPFR at 64 bits) rounded down (dir < 0) or up, as a double on the same side;
 * v >= 0. */
static double er_log_dir(double v, int one_p, int dir) {
    if (!one_p) return er__log_dir(v, dir > 0);
    mpfr_t a;
    mpfr_init2(a, 64);
    mpfr_rnd_t r = dir < 0 ? MPFR_RNDD : MPFR_RNDU;
    mpfr_set_d(a, v, MPFR_RNDN);
    mpfr_log1p(a, a, r);
    double d = mpfr_get_d(a, r);
    mpfr_clear(a);
    return d;
}

/* The values of F within the exp model's ulps of exp(v) (or 2^fl(v fl(log2 e)) under math=triton) for every v in
 * [a, b]; 0 joins below F's least normal (every exp may flush, softmax.md Theorem S6). */
static void er_exp_set(const er_xent_plan *pl, double a, double b, double *lo, double *hi) {
    const er_fmt_info *F = pl->F;
    if (b == -INFINITY) { *lo = *hi = 0; return; }
    double al, ah, bl, bh;
    double U = pl->sm.exp_fast ? 2.0 + floor(er__mul_up(1.1730001, fabs(a))) : pl->sm.U; /* __expf at the widest */
    if (pl->sm.exp2_triton) {
        /* t = fl(v c2) is monotone in v; 2^t = exp(t ln 2), ln 2 between two doubles */
        static const double ln2_lo = 0x1.62e42fefa39efp-1, ln2_hi = 0x1.62e42fefa39f0p-1;
        double c2 = er__log2e(F);
        double ta = a == -INFINITY ? -INFINITY : er__round_double(F, a * c2, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        double tb = er__round_double(F, b * c2, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        double x1, x2;
        er_imul(ta, ta, ln2_lo, ln2_hi, &x1, &x2);
        a = x1;
        er_imul(tb, tb, ln2_lo, ln2_hi, &x1, &x2);
        b = x2;
    }
    er__exp_bounds(a, &al, &ah);
    er__exp_bounds(b, &bl, &bh);
    er__approx_ends(F, U, al, bh, lo, hi);
    if (!(*lo >= F->min_normal)) *lo = 0;
}

/* The row sums in double: S and R (every term but t's) of exp(x_j - m) enclosed, sum x_j and sum |x_j| bounded. */
typedef struct er_xent_sums { double Sl, Sh, Rl, Rh, sxl, sxh, sabs, xmax; } er_xent_sums;

void er__xent_sums_finish(const er_fxsum *S, double tlo, double thi, double s, double sa, double xm, int64_t C,
                          double *z8) {
    /* R: S less t's parts, which it added exactly */
    er_fxsum R = *S;
    unsigned __int128 tl, th;
    er__fxsum_terms(tlo, thi, &tl, &th);
    R.lo -= tl;
    R.hi -= th;
    /* sum x_j and sum |x_j| from their sums in double, in any order (Lemma N4 of norm-backward.md, exact terms: K = (C
     * + 4) 2^-52 bounds sum |x| by sa (1 + K) and the sum's error by K times that); a logit that is not finite: no
     * bound */
    double K = (double)(C + 4) * 0x1p-52, a = er__mul_up(sa, er__up(1.0 + K)), e = er__mul_up(K, a);
    int fin = isfinite(a) && (double)C <= 0x1p40;
    double z[8] = { er__fxsum_lo(S), er__fxsum_hi(S), er__fxsum_lo(&R), er__fxsum_hi(&R),
                    fin ? er__dn(s - e) : -INFINITY, fin ? er__up(s + e) : INFINITY, fin ? a : INFINITY, xm };
    memcpy(z8, z, sizeof z);
}

static void er_xent_sums_fill(const er_exps *ex, const double *x, int64_t C, int64_t t, er_xent_sums *z) {
    er_fxsum S = { 0, 0 };
    double ps[ER_XENT_LANES] = { 0 }, pa[ER_XENT_LANES] = { 0 }, s = 0, sa = 0, xm = 0;
    for (int64_t j = 0; j < C; j++) { /* the lanes' order (xent.h) */
        er__fxsum_add(&S, ex->lo[j], ex->hi[j]);
        ps[j % ER_XENT_LANES] += x[j];
        pa[j % ER_XENT_LANES] += fabs(x[j]);
        xm = fabs(x[j]) > xm ? fabs(x[j]) : xm;
    }
    for (int l = 0; l < ER_XENT_LANES; l++) {
        s += ps[l];
        sa += pa[l];
    }
    double z8[8];
    er__xent_sums_finish(&S, ex->lo[t], ex->hi[t], s, sa, xm, C, z8);
    *z = (er_xent_sums){ z8[0], z8[1], z8[2], z8[3], z8[4], z8[5], z8[6], z8[7] };
}

/* The exact row loss (1 - eps) A + eps B with A = log(S / e_t) = log1p(R / e_t) and B = log S + m - sum x / C,
 * enclosed in double. */
static void er_xent_exact_loss(const er_xent_plan *pl, double tlo, double thi, const er_xent_sums *z, double xt,
                               double m, double *lo, double *hi) {
    double Al, Ah;
    if (tlo > 0) { /* e_t in [tlo, thi] */
        Al = er_log_dir(er__dn(z->Rl / thi), 1, -1);
        Ah = er_log_dir(er__up(z->Rh / tlo), 1, 1);
    } else { /* e_t may underflow double: A = (m - x_t) + log S */
        Al = er__dn(er__dn(m - xt) + er_log_dir(z->Sl, 0, -1));
        Ah = er__up(er__up(m - xt) + er_log_dir(z->Sh, 0, 1));
    }
    double eps = pl->eps, oml = er__dn(1.0 - eps), omh = er__up(1.0 - eps);
    er_imul(oml, omh, Al, Ah, lo, hi);
    if (eps == 0) return;
    double C = (double)pl->C;
    double Bl = er__dn(er__dn(er_log_dir(z->Sl, 0, -1) + m) - er__up(z->sxh / C));
    double Bh = er__up(er__up(er_log_dir(z->Sh, 0, 1) + m) - er__dn(z->sxl / C));
    double bl, bh;
    er_imul(eps, eps, Bl, Bh, &bl, &bh);
    *lo = er__dn(*lo + bl);
    *hi = er__up(*hi + bh);
}

/* gamma of k roundings in F and kS in S: (1 + gamma_k(F)) (1 + gamma_kS(S)) - 1, rounded up. */
static double er_gamma2(const er_xent_plan *pl, double k, double kS) {
    double g = er__gamma(pl->F, k), gs = kS > 0 ? er__gamma(pl->S, kS) : 0.0;
    return er__up(er__up(er__up(1.0 + g) * er__up(1.0 + gs)) - 1.0);
}

/* The underflow term: every rounding's eta (half F's least subnormal, F's least normal under flush, half S's least
 * subnormal) for at most 12 roundings on each of the C + 3 kinds of monomial, times at most 11 multipliers of at
 * most 4 x mult each (Theorems X1, X2). */
static double er_xent_eta(const er_xent_plan *pl, double mult) {
    double e = pl->sm.flush ? pl->F->min_normal : pl->F->min_sub / 2;
    if (pl->S->min_sub / 2 > e) e = pl->S->min_sub / 2;
    return er__mul_up(er__mul_up(e * 12.0 * 0x1p22, (double)pl->C + 3.0), mult > 1 ? mult : 1.0);
}

/* The loss set of a finite row (Theorem X2): the hull of form I, the expansion l + m - (1 - eps) x_t - (eps / C) sum x
 * over the leaves l (the computed log of the sum), m and x_j, rounded in F alone, and form II, -(1 - eps) lp_t - (eps /
 * C) sum lp over the leaves lp_j in log_softmax's set or its rounding to S (lcv), rounded in F and S. lse: the bounds
 * of m + l and of l. In both, the monomials eps / C times a leaf may pass the sum over the classes too; the others
 * (1 - eps times a leaf, and eps l where it is kept apart) the row's roundings and the sum over the rows only. */
static void er_xent_loss_set(const er_xent_plan *pl, double xt, int64_t t, double m, const double *lse,
                             const er_cval *lct, const er_cval *lcv, const er_xent_sums *z, er_xent_loss *ls) {
    const er_fmt_info *F = pl->F, *S = pl->S;
    double eps = pl->eps, C = (double)pl->C, oml = er__dn(1.0 - eps), omh = er__up(1.0 - eps);
    double ecl = er__dn(eps / C), ech = er__up(eps / C);
    double k0 = ER_XENT_ROUNDINGS + (double)pl->dN, kC = k0 + (eps > 0 ? (double)pl->dC : 0.0);
    double kS = S->p < F->p && !pl->compute_only ? ER_XENT_LOSS_ROUNDINGS_S : 0;
    /* form I */
    double Bl, Bh, sl, sh;
    er_imul(oml, omh, xt, xt, &Bl, &Bh);
    if (eps > 0) {
        er_imul(ecl, ech, z->sxl, z->sxh, &sl, &sh);
        Bl = er__dn(Bl + sl);
        Bh = er__up(Bh + sh);
    }
    /* l and m 1 + eps times ((1 - eps) expanded) and eps times (C copies of eps / C, or eps lse), x_t 1 + eps times,
     * x_j eps / C */
    double lm = er__up(fabs(m) + (fabs(lse[2]) > fabs(lse[3]) ? fabs(lse[2]) : fabs(lse[3])));
    double mag0 = er__up(er__mul_up(er__up(1.0 + eps), lm) + er__mul_up(er__up(1.0 + eps), fabs(xt)));
    double magC = er__up(er__mul_up(eps, lm) + er__mul_up(ech, z->sabs));
    double w1 = er__up(er__up(er__mul_up(er_gamma2(pl, k0, 0), mag0) + er__mul_up(er_gamma2(pl, kC, 0), magC)) +
                       er_xent_eta(pl, lm > z->xmax ? lm : z->xmax));
    double a1 = er__dn(er__dn(lse[0] - Bh) - w1), b1 = er__up(er__up(lse[1] - Bl) + w1);
    /* form II */
    double lpmax = 0, Tl = 0, Th = 0, mt = 0, ma = 0;
    for (int64_t j = eps > 0 ? 0 : t; j < (eps > 0 ? pl->C : t + 1); j++) { /* without smoothing, t's alone */
        const er_cval *c = j == t ? lct : &lcv[j];
        double a = c->lo, b = c->hi, l, h;
        double as = er__round_double(S, a, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE),
               bs = er__round_double(S, b, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        if (as < a && !pl->compute_only) a = as;
        if (bs > b && !pl->compute_only) b = bs;
        double mg = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
        if (mg > lpmax) lpmax = mg;
        if (j == t) {
            er_imul(oml, omh, -b, -a, &l, &h);
            Tl = er__dn(Tl + l);
            Th = er__up(Th + h);
            mt = mg;
        }
        if (eps > 0) {
            er_imul(ecl, ech, -b, -a, &l, &h);
            Tl = er__dn(Tl + l);
            Th = er__up(Th + h);
            ma = er__up(ma + mg);
        }
    }
    double w2 = er__up(er__up(er__mul_up(er_gamma2(pl, k0, kS), er__mul_up(er__up(1.0 + eps), mt)) +
                              er__mul_up(er_gamma2(pl, kC, kS), er__mul_up(ech, ma))) +
                       er_xent_eta(pl, lpmax));
    double a2 = er__dn(Tl - w2), b2 = er__up(Th + w2);
    ls->lo = a1 < a2 ? a1 : a2;
    ls->hi = b1 > b2 ? b1 : b2;
    if (isnan(ls->lo) || isnan(ls->hi)) { ls->lo = -INFINITY; ls->hi = INFINITY; }
}

/* MPFR scratch of a row at one precision: the sums S and R of exp(x_j - m) enclosed, sum x exact. */
typedef struct er_xent_mp { mpfr_t tl, th, el, eh, Sl, Sh, Rl, Rh, sx, a, b, c; } er_xent_mp;

static void er_xent_mp_init(er_xent_mp *z, mpfr_prec_t prec) {
    mpfr_init2(z->sx, 2300); /* sum x exactly for fewer than 2^90 doubles */
    mpfr_inits2(prec, z->tl, z->th, z->el, z->eh, z->Sl, z->Sh, z->Rl, z->Rh, z->a, z->b, z->c, (mpfr_ptr)0);
}

static void er_xent_mp_clear(er_xent_mp *z) {
    mpfr_clears(z->tl, z->th, z->sx, z->el, z->eh, z->Sl, z->Sh, z->Rl, z->Rh, z->a, z->b, z->c, (mpfr_ptr)0);
}

/* exp(x_j - m) into [el, eh]: the difference rounded down and up, exp monotone. Where the difference is exact, one
 * exp rounded to nearest and its neighbour on the side its ternary value names: the exact value lies between them. */
static void er_xent_mp_exp(er_xent_mp *z, double xj, double m) {
    if (xj == -INFINITY) { mpfr_set_zero(z->el, 1); mpfr_set_zero(z->eh, 1); return; }
    mpfr_set_d(z->tl, xj, MPFR_RNDN); /* exact: the precision is at least 128 bits */
    if (mpfr_sub_d(z->tl, z->tl, m, MPFR_RNDD) == 0) {
        int t = mpfr_exp(z->el, z->tl, MPFR_RNDN);
        mpfr_set(z->eh, z->el, MPFR_RNDN);
        if (t > 0) mpfr_nextbelow(z->el);
        else if (t < 0) mpfr_nextabove(z->eh);
        return;
    }
    mpfr_set_d(z->th, xj, MPFR_RNDN);
    mpfr_sub_d(z->th, z->th, m, MPFR_RNDU);
    mpfr_exp(z->el, z->tl, MPFR_RNDD);
    mpfr_exp(z->eh, z->th, MPFR_RNDU);
}

static void er_xent_mp_row(er_xent_mp *z, const double *x, int64_t C, int64_t t, double m) {
    mpfr_set_zero(z->Sl, 1);
    mpfr_set_zero(z->Sh, 1);
    mpfr_set_zero(z->Rl, 1);
    mpfr_set_zero(z->Rh, 1);
    mpfr_set_zero(z->sx, 1);
    for (int64_t j = 0; j < C; j++) {
        er_xent_mp_exp(z, x[j], m);
        mpfr_add(z->Sl, z->Sl, z->el, MPFR_RNDD);
        mpfr_add(z->Sh, z->Sh, z->eh, MPFR_RNDU);
        if (j != t) {
            mpfr_add(z->Rl, z->Rl, z->el, MPFR_RNDD);
            mpfr_add(z->Rh, z->Rh, z->eh, MPFR_RNDU);
        }
        mpfr_add_d(z->sx, z->sx, x[j], MPFR_RNDN);
    }
}

/* Gradient element j's exact value enclosed into [a, b] (the row's sums set). */
static void er_xent_mp_grad(const er_xent_plan *pl, er_xent_mp *z, const double *x, int64_t j, int64_t t, double m) {
    double C = (double)pl->C;
    if (j == t) { /* (eps (C - 1) / C - R / S) / W */
        mpfr_div(z->a, z->Rh, z->Sl, MPFR_RNDU);
        mpfr_div(z->b, z->Rl, z->Sh, MPFR_RNDD);
        mpfr_set_d(z->c, pl->eps, MPFR_RNDN);
        mpfr_mul_d(z->el, z->c, C - 1.0, MPFR_RNDD);
        mpfr_div_d(z->el, z->el, C, MPFR_RNDD);
        mpfr_mul_d(z->eh, z->c, C - 1.0, MPFR_RNDU);
        mpfr_div_d(z->eh, z->eh, C, MPFR_RNDU);
        mpfr_sub(z->a, z->el, z->a, MPFR_RNDD);
        mpfr_sub(z->b, z->eh, z->b, MPFR_RNDU);
    } else { /* (e_j / S - eps / C) / W */
        er_xent_mp_exp(z, x[j], m);
        mpfr_div(z->a, z->el, z->Sh, MPFR_RNDD);
        mpfr_div(z->b, z->eh, z->Sl, MPFR_RNDU);
        mpfr_set_d(z->c, pl->eps, MPFR_RNDN);
        mpfr_div_d(z->el, z->c, C, MPFR_RNDU);
        mpfr_div_d(z->eh, z->c, C, MPFR_RNDD);
        mpfr_sub(z->a, z->a, z->el, MPFR_RNDD);
        mpfr_sub(z->b, z->b, z->eh, MPFR_RNDU);
    }
    mpfr_div_d(z->a, z->a, pl->W, MPFR_RNDD);
    mpfr_div_d(z->b, z->b, pl->W, MPFR_RNDU);
}

static double er_xent_max(const double *x, int64_t C) {
    double m = -INFINITY;
    for (int64_t j = 0; j < C; j++) if (x[j] > m) m = x[j];
    return m;
}

void er__xent_loss_mp(const er_xent_plan *pl, const double *x, int64_t t, mpfr_prec_t prec, mpfr_t lo, mpfr_t hi) {
    double m = er_xent_max(x, pl->C);
    er_xent_mp z;
    er_xent_mp_init(&z, prec);
    er_xent_mp_row(&z, x, pl->C, t, m);
    /* A = log1p(R / e_t) */
    er_xent_mp_exp(&z, x[t], m);
    mpfr_div(z.a, z.Rl, z.eh, MPFR_RNDD);
    mpfr_log1p(z.a, z.a, MPFR_RNDD);
    mpfr_div(z.b, z.Rh, z.el, MPFR_RNDU);
    mpfr_log1p(z.b, z.b, MPFR_RNDU);
    mpfr_t om;
    mpfr_init2(om, 1100);
    mpfr_set_d(om, pl->eps, MPFR_RNDN);
    mpfr_ui_sub(om, 1, om, MPFR_RNDN); /* 1 - eps exactly at 1100 bits */
    mpfr_mul(lo, z.a, om, MPFR_RNDD);
    mpfr_mul(hi, z.b, om, MPFR_RNDU);
    mpfr_clear(om);
    if (pl->eps > 0) { /* + eps (log S + m - sum x / C) */
        mpfr_div_d(z.el, z.sx, (double)pl->C, MPFR_RNDU);
        mpfr_div_d(z.eh, z.sx, (double)pl->C, MPFR_RNDD);
        mpfr_log(z.a, z.Sl, MPFR_RNDD);
        mpfr_add_d(z.a, z.a, m, MPFR_RNDD);
        mpfr_sub(z.a, z.a, z.el, MPFR_RNDD);
        mpfr_mul_d(z.a, z.a, pl->eps, MPFR_RNDD);
        mpfr_add(lo, lo, z.a, MPFR_RNDD);
        mpfr_log(z.b, z.Sh, MPFR_RNDU);
        mpfr_add_d(z.b, z.b, m, MPFR_RNDU);
        mpfr_sub(z.b, z.b, z.eh, MPFR_RNDU);
        mpfr_mul_d(z.b, z.b, pl->eps, MPFR_RNDU);
        mpfr_add(hi, hi, z.b, MPFR_RNDU);
    }
    er_xent_mp_clear(&z);
}

/* The gradient's elements not decided in double (done[j] == 0): MPFR at 128, 512 and 2048 bits. An element still
 * undecided (an exact value on a rounding boundary, which only a rational one can be: equal logits, P = 1/C) gets
 * its lower candidate in grd, both candidates in its set gcv and cls ER_XENT_OPEN: it is never called exact. */
static void er_xent_grad_mp(const er_xent_plan *pl, const double *x, int64_t t, double m, char *done, double *gex,
                            double *grd, er_cval *gcv, uint8_t *cls) {
    int64_t todo = 1;
    for (mpfr_prec_t prec = 128; prec <= 2048 && todo; prec *= 4) {
        er_xent_mp z;
        er_xent_mp_init(&z, prec);
        er_xent_mp_row(&z, x, pl->C, t, m);
        todo = 0;
        for (int64_t j = 0; j < pl->C; j++) {
            if (done[j]) continue;
            er_xent_mp_grad(pl, &z, x, j, t, m);
            double r1 = er__round_mpfr(pl->G, z.a, ER_ROUND_NEAREST, pl->gov),
                   r2 = er__round_mpfr(pl->G, z.b, ER_ROUND_NEAREST, pl->gov);
            gex[j] = mpfr_get_d(z.a, MPFR_RNDN);
            grd[j] = r1;
            done[j] = r1 == r2 || prec == 2048;
            todo += !done[j];
            if (r1 != r2 && prec == 2048) {
                cls[j] = ER_XENT_OPEN;
                er__cval_put(&gcv[j], r1);
                er__cval_put(&gcv[j], r2);
            }
        }
        er_xent_mp_clear(&z);
    }
}

/* Gradient element j's exact value enclosed in double: (e_j / S - eps / C) / W, at the target (eps (C - 1) / C - R / S)
 * / W; its midpoint into *ex and its lower end's rounding into G into *rd (the upper end's into *rd2 unless NULL);
 * whether both ends round alike. */
static int er_xent_exact_grad2(const er_xent_plan *pl, const er_exps *ex, const er_xent_sums *z, int64_t j, int64_t t,
                               double *exv, double *rd, double *rd2) {
    double eps = pl->eps, C = (double)pl->C, W = pl->W, el, eh;
    if (j == t) {
        double e1l = er__dn(er__dn(eps * (C - 1.0)) / C), e1h = er__up(er__up(eps * (C - 1.0)) / C);
        el = er__dn(er__dn(e1l - er__up(z->Rh / z->Sl)) / W);
        eh = er__up(er__up(e1h - er__dn(z->Rl / z->Sh)) / W);
    } else {
        el = er__dn(er__dn(er__dn(ex->lo[j] / z->Sh) - er__up(eps / C)) / W);
        eh = er__up(er__up(er__up(ex->hi[j] / z->Sl) - er__dn(eps / C)) / W);
    }
    double r1 = er__round_double(pl->G, el, ER_ROUND_NEAREST, pl->gov),
           r2 = er__round_double(pl->G, eh, ER_ROUND_NEAREST, pl->gov);
    *exv = el + (eh - el) / 2;
    *rd = r1;
    if (rd2) *rd2 = r2;
    return r1 == r2;
}
static int er_xent_exact_grad(const er_xent_plan *pl, const er_exps *ex, const er_xent_sums *z, int64_t j, int64_t t,
                              double *exv, double *rd) {
    return er_xent_exact_grad2(pl, ex, z, j, t, exv, rd, NULL);
}

/* The gradients the double enclosures left open in a row without label smoothing, fp32 dlogits and every x_k - m a
 * double (Lemma X4): exp(x_k - m) to 2^-65 (Lemma D8), S and R summed exactly in fixed point, and for each open
 * element the side of the midpoint between its two candidates. Marks those it decides done (their rounding in grd);
 * returns the elements left open. */
static int64_t er_xent_grad_dd(const er_xent_plan *pl, const er_exps *ex, const er_xent_sums *z, int64_t t,
                               char *done, double *grd, int64_t todo) {
    int64_t C = pl->C;
    if (pl->eps != 0 || pl->G->id != ER_FP32 || C > (INT64_C(1) << 26)) return todo;
    for (int64_t k = 0; k < C; k++)
        if (ex->e[k] != 0 || ex->t[k] > 0) return todo;
    er__exp_init();
    __int128 SL = 0, SU = 0, tL = 0, tU = 0;
    for (int64_t k = 0; k < C; k++) {
        __int128 L = 0, U = 1; /* exp(t) < 2^-995 below -690 (and at -inf) */
        if (ex->t[k] >= -690.0) {
            double h, l;
            er__exp_dd(ex->t[k], &h, &l);
            er__dd_fx_term(h, l, &L, &U);
        }
        SL += L;
        SU += U;
        if (k == t) tL = L, tU = U;
    }
    double s[4][2]; /* S below and above, R below and above */
    er__dd_fx_pair(SL, 0, &s[0][0], &s[0][1]);
    er__dd_fx_pair(SU, 1, &s[1][0], &s[1][1]);
    er__dd_fx_pair(SL - tL, 0, &s[2][0], &s[2][1]);
    er__dd_fx_pair(SU - tU, 1, &s[3][0], &s[3][1]);
    for (int64_t j = 0; j < C; j++) {
        if (done[j]) continue;
        double exv, r1, r2;
        er_xent_exact_grad2(pl, ex, z, j, t, &exv, &r1, &r2);
        float f1 = (float)r1, f2 = (float)r2;
        if (!(r1 < r2) || nextafterf(f1, INFINITY) != f2 || !(ex->t[j] >= -690.0)) continue;
        double mu = 0.5 * (r1 + r2), kh = fabs(mu) * pl->W, kl = fma(fabs(mu), pl->W, -kh); /* |mu| W = kh + kl */
        int lo, hi;
        if (j != t) { /* g = e_j / (S W) > mu iff e_j - |mu| W S > 0 */
            double h, l;
            er__exp_dd(ex->t[j], &h, &l);
            lo = er__dd_sign(h, er__dn(l - h * 0x1p-64), kh, kl, s[1][0], s[1][1]);
            hi = er__dd_sign(h, er__up(l + h * 0x1p-64), kh, kl, s[0][0], s[0][1]);
        } else { /* g = -R / (S W) > mu iff R - |mu| W S < 0 */
            lo = -er__dd_sign(s[3][0], s[3][1], kh, kl, s[0][0], s[0][1]);
            hi = -er__dd_sign(s[2][0], s[2][1], kh, kl, s[1][0], s[1][1]);
        }
        if (lo > 0 || hi < 0) {
            grd[j] = lo > 0 ? r2 : r1;
            done[j] = 1;
            todo--;
        }
    }
    return todo;
}

/* Gradient sets and exact values of a finite row (Theorem X1). */
static void er_xent_grad(const er_xent_plan *pl, const double *x, int64_t t, double m, const er_exps *ex,
                         const er_xent_sums *z, const er_cval *cv, const er_cval *lcv, uint8_t *cls, char *done,
                         er_cval *gcv, double *gex, double *grd) {
    const er_fmt_info *F = pl->F, *S = pl->S;
    double eps = pl->eps, C = (double)pl->C, W = pl->W;
    double ecl = er__dn(eps / C), ech = er__up(eps / C), oml = er__dn(1.0 - eps), omh = er__up(1.0 - eps);
    double g = er_gamma2(pl, ER_XENT_ROUNDINGS + (eps > 0 ? (double)pl->dC : 0.0),
                         S->p < F->p && !pl->compute_only ? ER_XENT_GRAD_ROUNDINGS_S : 0);
    double H = er_xent_eta(pl, 1.0);
    int64_t todo = 0;
    for (int64_t j = 0; j < pl->C; j++) {
        done[j] = cls[j] != ER_PENDING; /* decided by er_xent_grad_fast */
        if (done[j]) continue;
        /* P: softmax's set, exp of log_softmax's set, exp of its rounding to S */
        double a = lcv[j].lo, b = lcv[j].hi, pl1, ph1, pl2, ph2;
        if (lcv[j].ninf && a > b) a = b = -INFINITY;
        er_exp_set(pl, a, b, &pl1, &ph1);
        pl2 = pl1, ph2 = ph1;
        if (S->p < F->p && !pl->compute_only) /* the log-probability stored in the logits' narrower format */
            er_exp_set(pl, er__round_double(S, a, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE),
                       er__round_double(S, b, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE), &pl2, &ph2);
        double Pl = cv[j].lo, Ph = cv[j].hi;
        if (pl1 < Pl) Pl = pl1;
        if (pl2 < Pl) Pl = pl2;
        if (ph1 > Ph) Ph = ph1;
        if (ph2 > Ph) Ph = ph2;
        int tj = j == t;
        double cl = tj ? er__dn(oml + ecl) : ecl, ch = tj ? er__up(omh + ech) : ech;
        if (cv[j].nan || cv[j].pinf || lcv[j].nan || lcv[j].pinf || !(Ph <= 2.0) || isinf(g)) {
            er__cval_anything(&gcv[j], F);
        } else {
            double mag = er__up(er__up(er__mul_up(Ph, 1.0 + 2.0 * eps) + (tj ? 1.0 + eps : 0.0)) + ech) / W;
            double hw = er__up(er__mul_up(g, er__up(mag)) + H);
            double lo = er__dn(er__dn(er__dn(Pl - ch) / W) - hw), hi = er__up(er__up(er__up(Ph - cl) / W) + hw);
            er__cval_from_interval(&gcv[j], er__round_double(F, lo, ER_ROUND_UP, ER_OVERFLOW_IEEE),
                                   er__round_double(F, hi, ER_ROUND_DOWN, ER_OVERFLOW_IEEE), 0, F);
        }
        done[j] = er_xent_exact_grad(pl, ex, z, j, t, &gex[j], &grd[j]) && !pl->mp_only;
        todo += !done[j];
    }
    if (todo && !pl->mp_only) todo = er_xent_grad_dd(pl, ex, z, t, done, grd, todo);
    if (todo) er_xent_grad_mp(pl, x, t, m, done, gex, grd, gcv, cls);
}

int er__xent_fast_ok(const er_xent_plan *pl) {
    const er_fmt_info *F = pl->F, *G = pl->G;
    return G && F->p == 24 && F->max == (double)FLT_MAX && F->min_sub == 0x1p-149 && G->p <= F->p &&
           G->max <= F->max && G->min_sub >= F->min_sub && !pl->sm.exp2_triton && !pl->sm.online && !pl->sm.depth &&
           (pl->sm.U >= 1 || pl->sm.exp_fast) && !pl->mp_only;
}

/* The fast decision of a finite row's gradient (Theorem X3): a witness kernel in fp32 (d = fl(x - m), e = RN(exp d),
 * s = e summed in order, p = fl(e / s) or fl(e fl(1 / s))) gives a value p_w of softmax's set, and the interval of
 * Theorem X1 built on p_w alone lies inside the element's set. y: the kernel's outputs; cls: EXACT where y is the
 * correct rounding, COVERED where y lies in that interval, ER_PENDING else (and where the double enclosure cannot
 * decide the rounding). Returns the elements left pending. */
/* er_xent_grad_fast's loop for a non-target class whose output format G is fp32, in one pass that vectorises (no call,
 * no branch): the class, and grd, as the scalar step writes them, or ER_XENT_REDO where the enclosure does not decide
 * the rounding (the scalar step then asks er_xent_exact_grad). */
#define ER_XENT_REDO 0xFD
/* An element whose correct rounding is decided and is not y, and y outside the first witness's interval: the second
 * witnesses' step (er_xent_grad_fast) makes it covered or pending. */
#define ER_XENT_NEXT 0xFC
typedef struct er_xent_fastk {
    float s, inv;                  /* the witness's sum and its reciprocal */
    int div2;                      /* div=reciprocal */
    double rSl, rSh, rWl, rWh;     /* bounds of 1/S and 1/W */
    double ecl, ech, eps, g;       /* eps / C's bounds, eps, gamma */
} er_xent_fastk;
/* Theorem X3's two computations, shared by the pass and the scalar step. A non-target class's exact gradient
 * (e_j / S - eps / C) / W enclosed in [*el, *eh] from e_j in [lo, hi], each bound moved outward without a branch
 * (er__dn_wide); an enclosure too wide to decide goes to the exact one. */
ER_ALWAYS_INLINE void er_xent_fast_encl(const er_xent_fastk *k, double lo, double hi, double *el, double *eh) {
    double al = er__dn_wide(er__dn_wide(lo * k->rSl) - k->ech);
    double ah = er__up_wide(er__up_wide(hi * k->rSh) - k->ecl);
    *el = er__dn_wide(al * (al < 0 ? k->rWh : k->rWl));
    *eh = er__up_wide(ah * (ah < 0 ? k->rWl : k->rWh));
}
/* The interval of Theorem X1 over P = {p} (inside [lo, hi] of the set, ends rounded inward), for c in [cl, ch] and
 * the target's 1 + eps term tt (0 elsewhere). */
ER_ALWAYS_INLINE void er_xent_fast_iv(const er_xent_fastk *k, double p, double cl, double ch, double tt, double *il,
                                      double *ih) {
    double mw = er__dn_wide(er__dn_wide(er__dn_wide(er__dn_wide(p * (1.0 + 2.0 * k->eps)) + tt) + k->ecl) * k->rWl);
    double B = er__dn_wide(k->g * mw);
    double vl = er__up_wide(p - ch), vh = er__dn_wide(p - cl);
    *il = er__up_wide(er__up_wide(vl * (vl < 0 ? k->rWl : k->rWh)) - B);
    *ih = er__dn_wide(er__dn_wide(vh * (vh < 0 ? k->rWh : k->rWl)) + B);
}
ER_ALWAYS_INLINE void er_xent_fast_body(int64_t n, const er_xent_fastk *kp, const double *restrict gex,
                                        const double *restrict lo, const double *restrict hi,
                                        const double *restrict y, double *restrict grd, uint8_t *restrict cls) {
    const er_xent_fastk k = *kp;
    for (int64_t j = 0; j < n; j++) {
        float p = k.div2 ? (float)gex[j] * k.inv : (float)gex[j] / k.s;
        double el, eh, il, ih;
        er_xent_fast_encl(&k, lo[j], hi[j], &el, &eh);
        double r1 = (double)(float)el, r2 = (double)(float)eh; /* er__round_double in fp32, to nearest */
        er_xent_fast_iv(&k, (double)p, k.ecl, k.ech, 0.0, &il, &ih);
        double yj = y[j];
        grd[j] = r1;
        cls[j] = r1 != r2     ? ER_XENT_REDO
                 : yj == r1   ? ER_CLASS_EXACT
                 : ((yj >= il) & (yj <= ih)) ? ER_CLASS_COVERED
                                           : ER_XENT_NEXT;
    }
}
#define ER_XENT_FAST_ARGS                                                                                             \
    int64_t n, const er_xent_fastk *kp, const double *restrict gex, const double *restrict lo,                        \
        const double *restrict hi, const double *restrict y, double *restrict grd, uint8_t *restrict cls
#define ER_XENT_FAST_BODY { er_xent_fast_body(n, kp, gex, lo, hi, y, grd, cls); }
static void er_xent_fast_pass(ER_XENT_FAST_ARGS) ER_XENT_FAST_BODY
#if ER_HAVE_AVX2
ER_AVX2 static void er_xent_fast_pass_avx2(ER_XENT_FAST_ARGS) ER_XENT_FAST_BODY
#endif

int er__xent_log_ends(const er_xent_plan *pl, double esl, double esh, float *l) {
    double ll, lh;
    if (pl->sm.flush || er__log_softmax_log_ends(&pl->sm, pl->C, esl, esh, &ll, &lh) != ER_OK) return 0;
    if (!(fabs(ll) <= FLT_MAX && fabs(lh) <= FLT_MAX) || (double)(float)ll != ll || (double)(float)lh != lh) return 0;
    l[0] = (float)ll;
    l[1] = (float)lh;
    return 1;
}

/* An fp32 value within an ulp of exp(v): RN of a lower bound 2^-49 from it (as the witness's e_j). */
static double er_xent_exp_witness(float v) {
    double lo, hi;
    er__exp_bounds((double)v, &lo, &hi);
    return (double)(float)lo;
}

int er__xent_in(const er_fmt_info *F, const er_fmt_info *G, double y, double lo, double hi) {
    if (G->p >= F->p) return y >= lo && y <= hi;
    double a = er__round_double(F, lo, ER_ROUND_UP, ER_OVERFLOW_IEEE);
    double b = er__round_double(F, hi, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
    return a <= b && y >= er__round_double(G, a, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE) &&
           y <= er__round_double(G, b, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
}

void er__xent_fast_consts(const er_xent_plan *pl, er_xent_fastc *q) {
    double eps = pl->eps, C = (double)pl->C, W = pl->W, iw = 1.0 / W;
    int wexact = (er__bits(W) & ((UINT64_C(1) << 52) - 1)) == 0;
    q->g = er_gamma2(pl, ER_XENT_ROUNDINGS + (eps > 0 ? (double)pl->dC : 0.0),
                     pl->S->p < pl->F->p && !pl->compute_only ? ER_XENT_GRAD_ROUNDINGS_S : 0);
    q->ecl = er__dn(eps / C);
    q->ech = er__up(eps / C);
    q->oml = er__dn(1.0 - eps);
    q->omh = er__up(1.0 - eps);
    q->rWl = wexact ? iw : er__dn(iw);
    q->rWh = wexact ? iw : er__up(iw);
    q->e1l = er__dn(er__dn(eps * (C - 1.0)) / C);
    q->e1h = er__up(er__up(eps * (C - 1.0)) / C);
}

static int64_t er_xent_grad_fast(const er_xent_plan *pl, const double *x, double m, int64_t t, const er_exps *ex,
                                 const er_xent_sums *z, const double *y, uint8_t *cls, double *gex, double *grd) {
    er_xent_fastc q;
    er__xent_fast_consts(pl, &q);
    double eps = pl->eps, ecl = q.ecl, ech = q.ech, oml = q.oml, omh = q.omh, g = q.g;
    float pw[ER_XENT_LANES] = { 0 }, s = 0;
    for (int64_t j = 0; j < pl->C; j++) { /* e_j within an ulp of exp(d_j): RN of a bound 2^-49 from it */
        gex[j] = (float)ex->dlo[j]; /* d_j = fl(x_j - m) in fp32, F */
        pw[j % ER_XENT_LANES] += (float)gex[j]; /* added in the lanes' order (xent.h) */
    }
    for (int l = 0; l < ER_XENT_LANES; l++) s += pw[l];
    float inv = 1.0f / s;
    /* the second witnesses' ends of the kernel's log of its sum */
    float lw[2] = { 0, 0 };
    int second = er__xent_log_ends(pl, ex->esl, ex->esh, lw);
    /* bounds of 1/S and of 1/W (exact where W is a power of two), so that the exact gradient's enclosure and the
     * interval's ends take products instead of quotients: each product by the bound that keeps its side */
    double rSl = er__dn(1.0 / z->Sh), rSh = er__up(1.0 / z->Sl), rWl = q.rWl, rWh = q.rWh;
    int64_t pending = 0;
    int pass = pl->G->id == ER_FP32; /* the classes but the target's, then the scalar step where it redoes them */
    er_xent_fastk k = { s, inv, pl->sm.div == 2, rSl, rSh, rWl, rWh, ecl, ech, eps, g };
    if (pass) {
#if ER_HAVE_AVX2
        if (pl->simd) er_xent_fast_pass_avx2(pl->C, &k, gex, ex->lo, ex->hi, y, grd, cls);
        else
#endif
            er_xent_fast_pass(pl->C, &k, gex, ex->lo, ex->hi, y, grd, cls);
    }
    for (int64_t j = 0; j < pl->C; j++) {
        if (pass && j != t && cls[j] != ER_XENT_REDO) {
            pending += cls[j] == ER_XENT_NEXT;
            continue;
        }
        float p = pl->sm.div == 2 ? (float)gex[j] * inv : (float)gex[j] / s;
        int tj = j == t, decided = 0;
        double rdj = 0;
        if (!tj && !pass) { /* the target's form is er_xent_exact_grad's */
            double el, eh;
            er_xent_fast_encl(&k, ex->lo[j], ex->hi[j], &el, &eh);
            rdj = er__round_double(pl->G, el, ER_ROUND_NEAREST, pl->gov);
            decided = rdj == er__round_double(pl->G, eh, ER_ROUND_NEAREST, pl->gov);
        }
        if (!decided) decided = er_xent_exact_grad(pl, ex, z, j, t, &gex[j], &rdj);
        grd[j] = rdj;
        cls[j] = ER_PENDING;
        if (decided && y[j] == rdj) cls[j] = ER_CLASS_EXACT;
        else if (decided) {
            double cl = tj ? er__dn(oml + ecl) : ecl, ch = tj ? er__up(omh + ech) : ech, lo, hi;
            er_xent_fast_iv(&k, (double)p, cl, ch, tj ? 1.0 + eps : 0.0, &lo, &hi);
            cls[j] = er__xent_in(pl->F, pl->G, y[j], lo, hi) ? ER_CLASS_COVERED : ER_XENT_NEXT;
        }
        pending += cls[j] == ER_PENDING || cls[j] == ER_XENT_NEXT;
    }
    /* the elements left: the hull of the witnesses exp(v) for v = fl(d_j - l) and fl(x_j - fl(m + l)) at both ends of
     * the kernel's log l, and their roundings to the logits' format where it is narrower (Theorem X3, its second
     * witnesses) */
    float mf = (float)m;
    for (int64_t j = 0; pending && j < pl->C; j++) {
        if (cls[j] != ER_XENT_NEXT) continue;
        cls[j] = ER_PENDING;
        if (!second) continue;
        float xj = (float)x[j], dj = xj - mf, v[4], vmin, vmax;
        for (int i = 0; i < 2; i++) {
            v[2 * i] = dj - lw[i];
            v[2 * i + 1] = xj - (mf + lw[i]);
        }
        vmin = vmax = v[0];
        for (int i = 1; i < 4; i++) {
            vmin = v[i] < vmin ? v[i] : vmin;
            vmax = v[i] > vmax ? v[i] : vmax;
        }
        if (pl->S->p < pl->F->p && !pl->compute_only) { /* the log-probabilities stored in S */
            float a = (float)er__round_double(pl->S, vmin, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE),
                  b = (float)er__round_double(pl->S, vmax, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            vmin = a < vmin ? a : vmin;
            vmax = b > vmax ? b : vmax;
        }
        double qlo = er_xent_exp_witness(vmin), qhi = er_xent_exp_witness(vmax);
        int tj = j == t;
        double cl = tj ? er__dn(oml + ecl) : ecl, ch = tj ? er__up(omh + ech) : ech, lo, hi, unused;
        er_xent_fast_iv(&k, qlo, cl, ch, tj ? 1.0 + eps : 0.0, &lo, &unused);
        er_xent_fast_iv(&k, qhi, cl, ch, tj ? 1.0 + eps : 0.0, &unused, &hi);
        if (er__xent_in(pl->F, pl->G, y[j], lo, hi)) {
            cls[j] = ER_CLASS_COVERED;
            pending--;
        }
    }
    return pending;
}

int er__xent_sums_path(const er_xent_plan *pl) {
    const er_softmax_plan *sm = &pl->sm;
    return pl->eps == 0 && !sm->online && !sm->exp2_triton && !sm->max_optional && sm->F->p <= 24 && sm->O->p <= 24;
}

er_status er__xent_loss_of_sums(const er_xent_plan *pl, const er_xent_rowsum *rs, int64_t t, er_xent_loss *ls) {
    er_softmax_plan lp = pl->sm;
    double lse[4] = { INFINITY, -INFINITY, INFINITY, -INFINITY };
    lp.log = 1;
    lp.lse = lse;
    lp.only = &t;
    lp.sets_only = 1;
    er_cval lct;
    ER_RETURN_IF_ERROR(er__log_softmax_one_of_sums(&lp, pl->C, rs->m, rs->esl, rs->esh, rs->xt, &lct));
    const double *q = rs->z;
    er_xent_sums z = { q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7] };
    memset(ls, 0, sizeof *ls);
    er_xent_loss_set(pl, rs->xt, t, rs->m, lse, &lct, NULL, &z, ls);
    er_xent_exact_loss(pl, rs->tlo, rs->thi, &z, rs->xt, rs->m, &ls->elo, &ls->ehi);
    return ER_OK;
}

er_status er__xent_row(const er_xent_plan *pl, const double *x, int64_t t, er_xent_work *w, er_xent_loss *ls,
                       const double *y, uint8_t *cls, er_cval *gcv, double *gex, double *grd) {
    int64_t C = pl->C;
    const er_fmt_info *F = pl->F;
    memset(ls, 0, sizeof *ls);
    int nan = 0, ninf = 0;
    for (int64_t j = 0; j < C; j++) {
        nan |= isnan(x[j]) || x[j] == INFINITY;
        ninf |= x[j] == -INFINITY;
    }
    double m = er_xent_max(x, C);
    if (nan || m == -INFINITY) { /* softmax's NaN rows: every output NaN */
        ls->special = 1;
        ls->lo = ls->elo = INFINITY;
        ls->hi = ls->ehi = -INFINITY;
        for (int64_t j = 0; pl->G && j < C; j++) {
            er__cval_from_interval(&gcv[j], NAN, NAN, 1, F);
            gex[j] = grd[j] = NAN;
            cls[j] = ER_PENDING;
        }
        return ER_OK;
    }
    double *d = w->d;
    er_exps ex = { d, d + C, d + 2 * C, d + 3 * C, d + 6 * C, d + 7 * C, 0, 0, 0 };
    double *ex0 = d + 4 * C, *rd0 = d + 5 * C;
    er_cval *cv = w->cv, *lcv = w->cv + C;
    er_softmax_plan sp = pl->sm, lp = pl->sm;
    double lse[4] = { INFINITY, -INFINITY, INFINITY, -INFINITY };
    lp.log = 1;
    lp.lse = lse;
    sp.lse = NULL;
    sp.sets_only = lp.sets_only = 1; /* their exact results are not this op's */
    sp.pre = lp.pre = &ex;           /* the exps of x_j - m, filled below */
    er__exp_init();
    if (pl->sm.online) { /* the online sum's bounds read the exact exps: Theorem D1's, as softmax's */
        er__exps_fill(&ex, x, C, m, pl->simd);
        er__exps_fill_rounded(&ex, pl->sm.F, x, C, m);
    } else {
        /* the kernel's d_j (the witness's and the sets'), then x_j - m; ex0, rd0 and cls serve as scratch */
        er_exps_scratch sc = { ex0, rd0, cls, pl->simd };
        er__exps_fill_kernel(&ex, &pl->sm, x, C, m, cls ? &sc : NULL);
    }
    er_xent_sums z;
    er_xent_sums_fill(&ex, x, C, t, &z);
    int64_t pending = C;
    if (pl->G && y && !ninf && er__xent_fast_ok(pl))
        pending = er_xent_grad_fast(pl, x, m, t, &ex, &z, y, cls, gex, grd);
    else if (pl->G) memset(cls, ER_PENDING, (size_t)C);
    int grads = pl->G && pending > 0;
    int by_sums = !grads && er__xent_sums_path(pl); /* the loss from the row's sums (the GPU's rows' way) */
    if (!grads && pl->eps == 0) lp.only = &t; /* the loss reads the target's log-probability alone */
    er_status st = grads ? er__softmax_row(&sp, x, C, cv, ex0, rd0) : ER_OK;
    if (st == ER_OK && (grads || pl->want_loss) && !by_sums) st = er__softmax_row(&lp, x, C, lcv, ex0, rd0);
    if (st != ER_OK) return st;
    if (x[t] == -INFINITY || (ninf && pl->eps > 0)) { /* the exact row loss is +inf */
        ls->special = 2;
        ls->lo = ls->elo = ls->hi = ls->ehi = INFINITY;
    } else if (pl->want_loss && by_sums) {
        er_xent_rowsum rs = { m, ex.esl, ex.esh, x[t], ex.lo[t], ex.hi[t],
                              { z.Sl, z.Sh, z.Rl, z.Rh, z.sxl, z.sxh, z.sabs, z.xmax } };
        st = er__xent_loss_of_sums(pl, &rs, t, ls);
    } else if (pl->want_loss) {
        er_xent_loss_set(pl, x[t], t, m, lse, &lcv[t], lcv, &z, ls);
        er_xent_exact_loss(pl, ex.lo[t], ex.hi[t], &z, x[t], m, &ls->elo, &ls->ehi);
    }
    if (st != ER_OK) return st;
    if (grads) {
        char *done = malloc((size_t)C);
        if (!done) return er__fail(ER_ERR_NOMEM, "cannot allocate a cross_entropy row of %lld", (long long)C);
        er_xent_grad(pl, x, t, m, &ex, &z, cv, lcv, cls, done, gcv, gex, grd);
        free(done);
    }
    return ER_OK;
}
