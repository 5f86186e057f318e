/* attn_bwd.c: the sets of attention's backward pass (docs/algorithms/attention-backward.md).
 *
 * For each query row and unmasked key the exact P, dP - D and dS are enclosed in double (centres and radii), and
 * Theorem B1 bounds how far a FlashAttention-style backward kernel's dS (and the P it multiplies dO by) may lie from
 * them: R per key, from the score's error, the exp's ulps, the saved LSE (or the forward's LSE set), the dots dP and
 * D in the compute format, their difference's and the product's roundings and the rounding of P and dS to the
 * inputs' format. The module (src/ops/abwdmod.c) sums these per element: a centre, the exact enclosure's weights
 * and the kernel's, the exact value within the first sum of the centre and the kernel's within the second of the
 * exact value (Lemma B2). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "enclose/attn_bwd.h"
#include "enclose/ival.h"

/* ||x||_2 of n values (at most 24 significant bits: squares exact in double), rounded up. */
static double er_norm_up(const double *x, int64_t n) {
    double ss = 0;
    for (int64_t d = 0; d < n; d++) ss += x[d] * x[d];
    return er__up(sqrt(er__up(ss * (1 + (double)(n + 2) * 0x1p-52))));
}

int er__abwd_row(const er_abwd_plan *pl, const er_attn_kv *kv, const double *vn, const er_abwd_row *row,
                 er_attn_work *w, er_abwd_keys *out) {
    int64_t n = row->n, j0 = row->j0, Dv = pl->fwd.Dv;
    const double u = pl->u, *g = row->g, *o = row->o;
    int bad = pl->has_lse && !isfinite(row->lse);
    for (int64_t d = 0; d < Dv; d++) bad |= !isfinite(g[d]) || !isfinite(o[d]);
    if (bad) return 0;
    double gn = er_norm_up(g, Dv), on = er_norm_up(o, Dv);
    /* the exact LSE in [X0, X1]; the kernel's in [L0, L1] */
    double X0, X1, L0, L1;
    er_attn_rowq rq;
    if (pl->has_lse) {
        X0 = X1 = L0 = L1 = row->lse;
        if (!er__attn_scores(&pl->fwd, kv, row->q, j0, n, w, &rq)) return 0;
    } else {
        double b[4];
        if (!er__attn_lse_bounds(&pl->fwd, kv, row->q, j0, n, w, b, &rq)) return 0; /* the scores with it */
        X0 = b[0];
        X1 = b[1];
        /* Theorem A3's set before the rounding to fp32, and that rounding: half an ulp of fp32 */
        L0 = er__dn(b[2] - er__up(fabs(b[2]) * 0x1p-23 + 0x1p-149));
        L1 = er__up(b[3] + er__up(fabs(b[3]) * 0x1p-23 + 0x1p-149));
    }
    double delta = rq.delta, lab = fmax(fabs(L0), fabs(L1)), vmax = 0;
    for (int64_t t = 0; t < n; t++) vmax = fmax(vmax, vn[j0 + t]);
    /* Theorem B1 (i): the exp's argument, its roundings and the exp's ulps. The argument is s - lambda (lambda the
     * LSE) or, on torch's math path, s - m with m the computed maximum (|m| <= Mabs + delta) */
    double amag = er__up(rq.Mabs + delta + fmax(lab, rq.Mabs + delta));
    double U = pl->fwd.exp_fast ? fmax(pl->fwd.U, 2 + 1.173 * (amag + 1)) : pl->fwd.U;
    double th = er__up(delta + 4 * u * (amag + delta) * (1 + 0x1p-20) + 2 * u * (U + 0.5) * (1 + 2 * u) + 4 * u);
    double hi_arg = er__up(er__up(X1 - L0) + th), lo_arg = er__dn(er__dn(X0 - L1) - th);
    /* beyond these the kernel's P, dP or D may overflow fp32, or the premises fail: the row claims nothing */
    if (!(er__up(rq.smax - L0) + th <= 64) || !(gn * fmax(vmax, on) <= 0x1p100) || !(hi_arg <= 1)) return 0;
    double kappa = er__up(fmax(expm1(hi_arg), -expm1(lo_arg)) * (1 + 0x1p-30));
    double alpha = (U + 2) * 0x1p-126;
    double gdD = (double)(Dv + 2) * 0x1p-53 * (1 + 0x1p-40);
    /* P, dP and their bounds per key */
    double *pm = out->pm, *dp = out->ds, *exdp = out->dsa, *edp = out->w, *phi = out->wv;
    er__attn_dots(pl->fwd.simd, g, kv->v + j0 * Dv, Dv, n, dp);
    for (int64_t t = 0; t < n; t++) {
        w->e0[t] = er__dn(w->slo[t] - X1);
        w->e1[t] = er__up(w->shi[t] - X0);
    }
    int simd = pl->fwd.simd;
    er__exp_bounds_run(simd, n, w->e0, pm, w->e2); /* er__exp_bounds's values: P's lower bounds into pm first */
    er__exp_bounds_run(simd, n, w->e1, w->e2, phi);
    for (int64_t t = 0; t < n; t++) {
        double plo = pm[t], ph = phi[t];
        pm[t] = 0.5 * (plo + ph);
        phi[t] = ph;
        double nu = er__up(gn * vn[j0 + t]);
        exdp[t] = er__up(gdD * nu + (double)Dv * 0x1p-1074);
        edp[t] = er__up(pl->gP * nu + (double)Dv * 0x1p-126);
    }
    /* D: the exact one (Dc, within Dr) and how far the kernel's may lie from it (ED) */
    double Dc, Dr, ED;
    double Do = er__attn_dot(g, o, Dv), Dor = er__up(gdD * gn * on + (double)Dv * 0x1p-1074),
           Eo = er__up(pl->gP * gn * on + (double)Dv * 0x1p-126);
    if (pl->has_lse) {
        Dc = Do;
        Dr = Dor;
        ED = Eo;
    } else {
        /* the exact D = sum_j P_j dP_j (the true gradient's); the kernel's from the saved o (dO . o) or as that sum
         * of its own P and dP in the compute format (torch's softmax backward) */
        double c = 0, r = 0, m = 0, es = 0, ms = 0;
        for (int64_t t = 0; t < n; t++) {
            double pr = er__up(er__up(phi[t] - pm[t]) + er__up(pm[t] * 0x1p-52)); /* >= |P - pm| */
            double a = er__up(fabs(dp[t]) + exdp[t]), pk = er__up(phi[t] * (1 + kappa) + alpha);
            c += pm[t] * dp[t];
            r += pr * a + pm[t] * exdp[t];
            m += pm[t] * fabs(dp[t]);
            es += (kappa * phi[t] + alpha) * a + pk * edp[t];
            ms += pk * (a + edp[t]);
        }
        double gn2 = (double)(n + 2) * 0x1p-53 * (1 + 0x1p-40);
        double gs = (pl->fwd.cp * (double)n + 2 * pl->fwd.cg) * u * (1 + 0x1p-20);
        Dc = c;
        Dr = er__up((r * (1 + gn2) + gn2 * m) * (1 + 0x1p-40) + (double)n * 0x1p-1074);
        double e_o = er__up(er__up(fabs(Do - Dc) * (1 + 0x1p-52)) + Dor + Dr + Eo);
        double e_s = er__up((es * (1 + gn2) + gs * ms * (1 + gn2)) * (1 + 0x1p-40) + (double)n * 0x1p-126);
        ED = fmax(e_o, e_s);
    }
    /* Theorem B1 (ii)-(iv) per key: x = dP - D, dS = P x, and the weights (Lemma B2) */
    double up = pl->up, hp = 0.5 * pl->etap;
    /* dS's absolute errors (its rounding's below the format's normal range, a flush in fp32) in dS's units: a kernel
     * that scales dS before rounding it makes them in scaled units, 1 / |scale| times larger in these */
    double isc = fmax(1.0, er__up(1.0 / fabs(pl->fwd.sc))), hs = er__up((hp + 0x1p-126) * isc);
    for (int64_t t = 0; t < n; t++) {
        double ph = phi[t], pmt = pm[t];
        double pr = er__up(er__up(ph - pmt) + er__up(pmt * 0x1p-52)); /* >= |P - pm| */
        double xc = dp[t] - Dc;
        double xr = er__up(er__up(exdp[t] + Dr) + er__up(fabs(xc) * 0x1p-52));
        double xa = er__up(fabs(xc) + xr);
        double ex = er__up(edp[t] + ED), ex1 = er__up(ex + er__up(u * er__up(xa + ex) * (1 + 0x1p-40)));
        /* P as the kernel multiplies x by it: P, or P rounded to the inputs' format (a kernel reusing the P it
         * rounded for dV: within rp of P*, at most pka) */
        double pk = er__up(ph * (1 + kappa) + alpha);
        double rp = er__up((kappa * ph + alpha + up * pk + hp) * (1 + 0x1p-40)),
               pka = er__up((pk * (1 + up) + hp) * (1 + 0x1p-40));
        double m1 = er__up(pka * er__up(xa + ex1));
        double R = er__up((rp * xa + pka * ex1 + (u + up * (1 + u)) * m1 + hs) * (1 + 0x1p-40));
        double ds = pmt * xc;
        double rex = er__up((pr * xa + pmt * xr + fabs(ds) * 0x1p-52) * (1 + 0x1p-40) + 0x1p-1060);
        double dsa = er__up(ph * xa + R);
        out->ds[t] = ds;
        out->dsa[t] = dsa;
        out->ex[t] = er__up((rex + pl->gd * fabs(ds)) * (1 + 0x1p-40));
        out->w[t] = er__up(R + pl->gS * dsa * (1 + 0x1p-40));
        out->exv[t] = er__up((pr + pl->gd * pmt) * (1 + 0x1p-40));
        out->wv[t] = er__up(rp + pl->gV * pka * (1 + 0x1p-40));
        out->pa[t] = pka;
        /* dS (scaled or not) rounded to the inputs' format may overflow it: its infinities may meet in the sums (NaN),
         * and the row claims nothing */
        if (!(er__mul_up(dsa, fmax(1.0, fabs(pl->fwd.sc))) < pl->pmax)) return 0;
    }
    return 1;
}

/* Intervals [lo, hi] of MPFR numbers, each operation rounded outward. */
typedef struct er_mi {
    mpfr_t lo, hi;
} er_mi;
static void er_mi_init(er_mi *a, mpfr_prec_t p) { mpfr_inits2(p, a->lo, a->hi, (mpfr_ptr)0); }
static void er_mi_clear(er_mi *a) { mpfr_clears(a->lo, a->hi, (mpfr_ptr)0); }
static void er_mi_set_d(er_mi *a, double x) {
    mpfr_set_d(a->lo, x, MPFR_RNDD);
    mpfr_set_d(a->hi, x, MPFR_RNDU);
}
static void er_mi_add(er_mi *r, const er_mi *a, const er_mi *b) {
    mpfr_add(r->lo, a->lo, b->lo, MPFR_RNDD);
    mpfr_add(r->hi, a->hi, b->hi, MPFR_RNDU);
}
/* r = a - b (r may be a but not b) */
static void er_mi_sub(er_mi *r, const er_mi *a, const er_mi *b) {
    mpfr_sub(r->lo, a->lo, b->hi, MPFR_RNDD);
    mpfr_sub(r->hi, a->hi, b->lo, MPFR_RNDU);
}
/* a = a m for a double m */
static void er_mi_scale(er_mi *a, double m) {
    if (m < 0) mpfr_swap(a->lo, a->hi); /* the ends trade places */
    mpfr_mul_d(a->lo, a->lo, m, MPFR_RNDD);
    mpfr_mul_d(a->hi, a->hi, m, MPFR_RNDU);
}
/* r = a b through the four corners (r distinct from a and b; t scratch) */
static void er_mi_mul(er_mi *r, const er_mi *a, const er_mi *b, mpfr_t t) {
    mpfr_ptr x[2] = {(mpfr_ptr)a->lo, (mpfr_ptr)a->hi}, y[2] = {(mpfr_ptr)b->lo, (mpfr_ptr)b->hi};
    mpfr_mul(r->lo, x[0], y[0], MPFR_RNDD);
    mpfr_mul(r->hi, x[0], y[0], MPFR_RNDU);
    for (int c = 1; c < 4; c++) {
        mpfr_mul(t, x[c >> 1], y[c & 1], MPFR_RNDD);
        mpfr_min(r->lo, r->lo, t, MPFR_RNDD);
        mpfr_mul(t, x[c >> 1], y[c & 1], MPFR_RNDU);
        mpfr_max(r->hi, r->hi, t, MPFR_RNDU);
    }
}

/* sum_i a_i b_i of exact double products (at most 24-bit values) between lo and hi (pr: n scratch numbers). */
static void er_mi_dot(er_mi *r, const double *a, const double *b, int64_t n, mpfr_t *pr, mpfr_ptr *pp) {
    for (int64_t d = 0; d < n; d++) {
        mpfr_set_d(pr[d], a[d] * b[d], MPFR_RNDN);
        pp[d] = pr[d];
    }
    mpfr_sum(r->lo, pp, (unsigned long)n, MPFR_RNDD);
    mpfr_sum(r->hi, pp, (unsigned long)n, MPFR_RNDU);
}

/* A row's exact quantities at one precision: the LSE, D and the scale; uniform: a row without a saved LSE whose
 * scores are all equal, where P = 1/n exactly (pn), not exp of a difference of enclosures. */
typedef struct er_mrow {
    er_mi lam, D, sc, s, p, x, t, pn;
    int uniform;
    mpfr_t tmp;
    mpfr_t *pr;
    mpfr_ptr *pp;
} er_mrow;

/* P_j = exp(scale q . k_j - lam) of key j into m->p. */
static void er_mrow_p(const er_abwd_plan *pl, const er_attn_kv *kv, const double *q, int64_t j, er_mrow *m) {
    int64_t D = pl->fwd.D;
    if (m->uniform) {
        mpfr_set(m->p.lo, m->pn.lo, MPFR_RNDD);
        mpfr_set(m->p.hi, m->pn.hi, MPFR_RNDU);
        return;
    }
    er_mi_dot(&m->t, q, kv->k + j * D, D, m->pr, m->pp);
    er_mi_mul(&m->s, &m->t, &m->sc, m->tmp);
    er_mi_sub(&m->s, &m->s, &m->lam);
    mpfr_exp(m->p.lo, m->s.lo, MPFR_RNDD);
    mpfr_exp(m->p.hi, m->s.hi, MPFR_RNDU);
}

/* The row's LSE (m->lam) and D (m->D). */
static void er_mrow_start(const er_abwd_plan *pl, const er_attn_kv *kv, const er_abwd_row *rw, er_mrow *m) {
    int64_t Dv = pl->fwd.Dv;
    m->uniform = 0;
    if (pl->has_lse) {
        er_mi_set_d(&m->lam, rw->lse);
        er_mi_dot(&m->D, rw->g, rw->o, Dv, m->pr, m->pp);
        return;
    }
    /* every score equal (each dot exact and the same): P = 1/n exactly (P_j = 1 / sum_k exp(s_k - s_j)), a rational
     * number, where exp of an enclosure of -log n would never be exact */
    int64_t D = pl->fwd.D;
    er_mi_dot(&m->x, rw->q, kv->k + rw->j0 * D, D, m->pr, m->pp);
    m->uniform = rw->n > 0 && mpfr_equal_p(m->x.lo, m->x.hi);
    for (int64_t t = 1; t < rw->n && m->uniform; t++) {
        er_mi_dot(&m->t, rw->q, kv->k + (rw->j0 + t) * D, D, m->pr, m->pp);
        m->uniform = mpfr_equal_p(m->t.lo, m->x.lo) && mpfr_equal_p(m->t.hi, m->x.lo);
    }
    if (m->uniform) {
        mpfr_set_ui(m->pn.lo, 1, MPFR_RNDN);
        mpfr_set_ui(m->pn.hi, 1, MPFR_RNDN);
        mpfr_div_ui(m->pn.lo, m->pn.lo, (unsigned long)rw->n, MPFR_RNDD);
        mpfr_div_ui(m->pn.hi, m->pn.hi, (unsigned long)rw->n, MPFR_RNDU);
    }
    /* lam = c + log sum_j exp(s_j - c), c the first key's score rounded (exp's arguments stay moderate) */
    er_mi_dot(&m->t, rw->q, kv->k + rw->j0 * pl->fwd.D, pl->fwd.D, m->pr, m->pp);
    er_mi_mul(&m->s, &m->t, &m->sc, m->tmp);
    double c = mpfr_get_d(m->s.lo, MPFR_RNDN);
    er_mi_set_d(&m->lam, c);
    er_mi L;
    er_mi_init(&L, mpfr_get_prec(m->tmp));
    mpfr_set_zero(L.lo, 1);
    mpfr_set_zero(L.hi, 1);
    for (int64_t t = 0; t < rw->n; t++) {
        er_mrow_p(pl, kv, rw->q, rw->j0 + t, m);
        er_mi_add(&L, &L, &m->p);
    }
    mpfr_log(m->lam.lo, L.lo, MPFR_RNDD);
    mpfr_log(m->lam.hi, L.hi, MPFR_RNDU);
    mpfr_add_d(m->lam.lo, m->lam.lo, c, MPFR_RNDD);
    mpfr_add_d(m->lam.hi, m->lam.hi, c, MPFR_RNDU);
    mpfr_set_zero(m->D.lo, 1);
    mpfr_set_zero(m->D.hi, 1);
    for (int64_t t = 0; t < rw->n; t++) {
        er_mrow_p(pl, kv, rw->q, rw->j0 + t, m);
        er_mi_dot(&m->t, rw->g, kv->v + (rw->j0 + t) * Dv, Dv, m->pr, m->pp);
        er_mi_mul(&L, &m->p, &m->t, m->tmp);
        er_mi_add(&m->D, &m->D, &L);
    }
    er_mi_clear(&L);
}

/* The term of key j in row rw into m->x: dS_j = P_j (dP_j - D) (which 0, 1) or P_j (which 2). */
static void er_mrow_term(const er_abwd_plan *pl, const er_attn_kv *kv, const er_abwd_row *rw, int64_t j, int which,
                         er_mrow *m) {
    er_mrow_p(pl, kv, rw->q, j, m);
    if (which == 2) {
        mpfr_set(m->x.lo, m->p.lo, MPFR_RNDD);
        mpfr_set(m->x.hi, m->p.hi, MPFR_RNDU);
        return;
    }
    er_mi_dot(&m->t, rw->g, kv->v + j * pl->fwd.Dv, pl->fwd.Dv, m->pr, m->pp);
    er_mi_sub(&m->t, &m->t, &m->D);
    er_mi_mul(&m->x, &m->p, &m->t, m->tmp);
}

/* The terms of one sum at one precision: x[t] times the coefficient of column d, summed in t, is the element; the
 * coefficient of term t is k[key[t] D + d] (which 0) or row[t]'s q[d] (1) or g[d] (2). */
typedef struct er_abwd_mslot {
    int valid, which;
    int64_t a, n, cap;
    mpfr_prec_t pw;
    er_mi sc, *x;
    int64_t *idx; /* the key (which 0) or the row of each term */
    int failed;   /* no memory for the row's scratch: the element is anything */
    /* each row's LSE, D and 1/n (er_mrow_start) once enclosed: rstate 0 not yet, 1 enclosed, 2 enclosed and uniform */
    int64_t nrows;
    er_mi *rlam, *rD, *rpn;
    signed char *rstate;
} er_abwd_mslot;

static void er_mslot_free(er_abwd_mslot *s) {
    if (!s) return;
    for (int64_t t = 0; t < s->cap; t++) er_mi_clear(&s->x[t]);
    free(s->x);
    free(s->idx);
    for (int64_t i = 0; i < (s->rstate ? s->nrows : 0); i++) {
        er_mi_clear(&s->rlam[i]);
        er_mi_clear(&s->rD[i]);
        er_mi_clear(&s->rpn[i]);
    }
    free(s->rlam);
    free(s->rD);
    free(s->rpn);
    free(s->rstate);
    er_mi_clear(&s->sc);
    free(s);
}

void er__abwd_mcache_forget(er_abwd_mcache *mc) {
    for (int k = 0; k < 3; k++)
        if (mc->slot[k]) {
            mc->slot[k]->valid = 0;
            if (mc->slot[k]->rstate) memset(mc->slot[k]->rstate, 0, (size_t)mc->slot[k]->nrows);
        }
}

/* The row store of s for nrows rows; 0 without memory (the rows are then enclosed afresh each time). */
static int er_mslot_rows(er_abwd_mslot *s, int64_t nrows) {
    if (s->rstate) return s->nrows == nrows;
    size_t n = (size_t)(nrows ? nrows : 1);
    s->rlam = malloc(sizeof(er_mi) * n);
    s->rD = malloc(sizeof(er_mi) * n);
    s->rpn = malloc(sizeof(er_mi) * n);
    s->rstate = calloc(n, 1);
    if (!s->rlam || !s->rD || !s->rpn || !s->rstate) {
        free(s->rlam);
        free(s->rD);
        free(s->rpn);
        free(s->rstate);
        s->rlam = s->rD = s->rpn = NULL;
        s->rstate = NULL;
        return 0;
    }
    s->nrows = nrows;
    for (int64_t i = 0; i < nrows; i++) {
        er_mi_init(&s->rlam[i], s->pw);
        er_mi_init(&s->rD[i], s->pw);
        er_mi_init(&s->rpn[i], s->pw);
    }
    return 1;
}

static void er_mi_copy(er_mi *r, const er_mi *a) {
    mpfr_set(r->lo, a->lo, MPFR_RNDD);
    mpfr_set(r->hi, a->hi, MPFR_RNDU);
}

/* er_mrow_start of row i, from s's row store where it was enclosed before at this precision (the same values). */
static void er_mslot_start(const er_abwd_plan *pl, const er_attn_kv *kv, const er_abwd_head *hd, int64_t i,
                           er_abwd_mslot *s, er_mrow *m) {
    int kept = er_mslot_rows(s, hd->nrows);
    if (kept && s->rstate[i]) {
        er_mi_copy(&m->lam, &s->rlam[i]);
        er_mi_copy(&m->D, &s->rD[i]);
        er_mi_copy(&m->pn, &s->rpn[i]);
        m->uniform = s->rstate[i] == 2;
        return;
    }
    er_mrow_start(pl, kv, &hd->rows[i], m);
    if (!kept) return;
    er_mi_copy(&s->rlam[i], &m->lam);
    er_mi_copy(&s->rD[i], &m->D);
    er_mi_copy(&s->rpn[i], &m->pn);
    s->rstate[i] = m->uniform ? 2 : 1;
}

void er__abwd_mcache_free(er_abwd_mcache *mc) {
    for (int k = 0; k < 3; k++) {
        er_mslot_free(mc->slot[k]);
        mc->slot[k] = NULL;
    }
}

/* Room for n terms at working precision pw in s (its terms beyond those kept); 0 without memory. */
static int er_mslot_reserve(er_abwd_mslot *s, int64_t n) {
    if (n <= s->cap) return 1;
    int64_t cap = n > 2 * s->cap ? n : 2 * s->cap;
    er_mi *x = realloc(s->x, sizeof(er_mi) * (size_t)cap);
    if (!x) return 0;
    s->x = x;
    int64_t *idx = realloc(s->idx, sizeof(int64_t) * (size_t)cap);
    if (!idx) return 0;
    s->idx = idx;
    for (int64_t t = s->cap; t < cap; t++) er_mi_init(&s->x[t], s->pw);
    s->cap = cap;
    return 1;
}

/* The terms of element (which, a)'s sum at working precision s->pw into s. */
static void er_mslot_fill(const er_abwd_plan *pl, const er_abwd_head *hd, int which, int64_t a, er_abwd_mslot *s) {
    int64_t D = pl->fwd.D, Dv = pl->fwd.Dv, nmax = D > Dv ? D : Dv;
    mpfr_prec_t pw = s->pw;
    er_mrow m;
    er_mi *iv[8] = {&m.lam, &m.D, &m.sc, &m.s, &m.p, &m.x, &m.t, &m.pn};
    for (int i = 0; i < 8; i++) er_mi_init(iv[i], pw);
    m.uniform = 0;
    mpfr_init2(m.tmp, pw);
    m.pr = malloc(sizeof(mpfr_t) * (size_t)nmax);
    m.pp = malloc(sizeof(mpfr_ptr) * (size_t)nmax);
    s->valid = 1;
    s->which = which;
    s->a = a;
    s->n = 0;
    s->failed = !m.pr || !m.pp;
    if (s->failed) goto done;
    for (int64_t i = 0; i < nmax; i++) mpfr_init2(m.pr[i], 64);
    if (pl->fwd.sc_default) {
        mpfr_set_si(m.tmp, (long)D, MPFR_RNDN);
        mpfr_rec_sqrt(m.sc.lo, m.tmp, MPFR_RNDD);
        mpfr_rec_sqrt(m.sc.hi, m.tmp, MPFR_RNDU);
    } else {
        er_mi_set_d(&m.sc, pl->fwd.sc);
    }
    er_mi_copy(&s->sc, &m.sc);
    const er_attn_kv *kv = hd->kv;
    if (which == 0) {
        const er_abwd_row *rw = &hd->rows[a];
        s->failed = !er_mslot_reserve(s, rw->n);
        if (s->failed) goto clear;
        er_mslot_start(pl, kv, hd, a, s, &m);
        for (int64_t t = 0; t < rw->n; t++) {
            er_mrow_term(pl, kv, rw, rw->j0 + t, 0, &m);
            er_mi_copy(&s->x[t], &m.x);
            s->idx[t] = rw->j0 + t;
        }
        s->n = rw->n;
    } else {
        for (int64_t i = 0; i < hd->nrows; i++) {
            const er_abwd_row *rw = &hd->rows[i];
            if (a < rw->j0 || a >= rw->j0 + rw->n) continue;
            s->failed = !er_mslot_reserve(s, s->n + 1);
            if (s->failed) goto clear;
            er_mslot_start(pl, kv, hd, i, s, &m);
            er_mrow_term(pl, kv, rw, a, which, &m);
            er_mi_copy(&s->x[s->n], &m.x);
            s->idx[s->n++] = i;
        }
    }
clear:
    for (int64_t i = 0; i < nmax; i++) mpfr_clear(m.pr[i]);
done:
    free(m.pr);
    free(m.pp);
    for (int i = 0; i < 8; i++) er_mi_clear(iv[i]);
    mpfr_clear(m.tmp);
}

/* A new slot at working precision pw; NULL without memory. */
static er_abwd_mslot *er_mslot_new(mpfr_prec_t pw) {
    er_abwd_mslot *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->pw = pw;
    er_mi_init(&s->sc, pw);
    return s;
}

void er__abwd_exact_mpfr(const er_abwd_plan *pl, const er_abwd_head *hd, er_abwd_mcache *mc, int which, int64_t a,
                         int64_t d, mpfr_prec_t p, mpfr_t lo, mpfr_t hi) {
    mpfr_prec_t pw = p + 64;
    int k = p <= 128 ? 0 : p <= 512 ? 1 : 2;
    er_abwd_mslot *s = mc ? mc->slot[k] : NULL;
    if (s && s->pw != pw) { /* another precision in this slot: start it afresh */
        er_mslot_free(s);
        s = mc->slot[k] = NULL;
    }
    int own = 0;
    if (!s) {
        s = er_mslot_new(pw);
        if (mc) mc->slot[k] = s;
        else own = 1;
    }
    if (!s) { /* no memory: nothing is claimed about the exact value */
        mpfr_set_inf(lo, -1);
        mpfr_set_inf(hi, 1);
        return;
    }
    if (!s->valid || s->which != which || s->a != a) er_mslot_fill(pl, hd, which, a, s);
    if (s->failed) {
        mpfr_set_inf(lo, -1);
        mpfr_set_inf(hi, 1);
        s->valid = 0;
    } else {
        int64_t D = pl->fwd.D;
        er_mi acc, x;
        er_mi_init(&acc, pw);
        er_mi_init(&x, pw);
        mpfr_set_zero(acc.lo, 1);
        mpfr_set_zero(acc.hi, 1);
        for (int64_t t = 0; t < s->n; t++) {
            const er_abwd_row *rw = which ? &hd->rows[s->idx[t]] : NULL;
            double coef = which == 0 ? hd->kv->k[s->idx[t] * D + d] : which == 1 ? rw->q[d] : rw->g[d];
            er_mi_copy(&x, &s->x[t]);
            er_mi_scale(&x, coef);
            er_mi_add(&acc, &acc, &x);
        }
        if (which != 2) {
            mpfr_t tmp;
            mpfr_init2(tmp, pw);
            er_mi_mul(&x, &acc, &s->sc, tmp);
            mpfr_clear(tmp);
            er_mi_copy(&acc, &x);
        }
        mpfr_set(lo, acc.lo, MPFR_RNDD);
        mpfr_set(hi, acc.hi, MPFR_RNDU);
        er_mi_clear(&acc);
        er_mi_clear(&x);
    }
    if (own) er_mslot_free(s);
}
