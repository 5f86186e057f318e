/* rmsnorm.c: the set of an rmsnorm row (docs/algorithms/rmsnorm.md).
 *
 * The model: q = sum_j x_j^2 in F in any order (products rounded or fused), ms = q / n (divide or reciprocal),
 * v = fl(ms + eps), r = rsqrt(v) within U ulps, and y_i from x_i, r and w_i by any of three compositions:
 * fl(fl(x_i r) w_i), fl_out(fl_out(fl(x_i r)) w_i) (the product cast to the output format before the weight,
 * as torch's composite rms_norm does), or fl(x_i fl(r w_i)). Each composition is monotone in r for a fixed sign
 * of x_i w_i, so y_i lies between its values at the two ends of r's interval (Theorem R1). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <mpfr.h>
#include "format/format.h"
#include "format/vecround.h"
#include "enclose/approx.h"
#include "enclose/ival.h"
#include "enclose/rmsnorm.h"
#include "core/sqwin.h"
#include "enclose/layernorm.h"

/* fl(q / n) or fl(q * fl(1/n)) (mode 1, 2; 0 either) for q in [qlo, qhi]: both are monotone in q. With Udiv > 0 the
 * quotient may also be any value within Udiv ulps of q / n (Lemma U1 over [qlo / n, qhi / n]). */
void er__div_n_set(const er_fmt_info *F, double qlo, double qhi, int64_t n, int mode, double Udiv, double *lo,
                   double *hi) {
    double rn = er__round_quotient(F, 1.0, n, ER_ROUND_NEAREST);
    double a = er__round_quotient(F, qlo, n, ER_ROUND_NEAREST), b = er__round_prod(F, qlo, rn, 1, ER_ROUND_NEAREST);
    double c = er__round_quotient(F, qhi, n, ER_ROUND_NEAREST), d = er__round_prod(F, qhi, rn, 1, ER_ROUND_NEAREST);
    if (mode == 1) { b = a; d = c; }
    if (mode == 2) { a = b; c = d; }
    *lo = a < b ? a : b;
    *hi = c > d ? c : d;
    if (Udiv > 0 && qlo <= qhi) {
        double l, h;
        er__approx_ends(F, Udiv, er__dn(qlo / (double)n), er__up(qhi / (double)n), &l, &h);
        if (qlo >= 0 && !(l >= 0)) l = 0; /* a nonnegative quotient stays nonnegative */
        if (l < *lo) *lo = l;
        if (h > *hi) *hi = h;
    }
}

/* rsqrt(v) within U ulps of F for v in [vlo, vhi] (decreasing in v): [*rlo, *rhi], values of F; *rhi is +inf
 * when vlo <= 0 (rsqrt(0) is +inf). The exact values lie in [rsqrt(vhi), rsqrt(vlo)]; the slack is taken over that
 * whole interval, at the larger spacing where it crosses a power of two (ulp-slack.md, Lemma U1). */
void er__rsqrt_set(const er_fmt_info *F, double U, int ftz, double vlo, double vhi, double *rlo, double *rhi) {
    /* rsqrt(vhi) rounded down and rsqrt(vlo) up: in doubles where v is positive and finite (Lemma D12), else MPFR */
    double a = 0, b = INFINITY, other;
    if (vhi != INFINITY && !er__rsqrt_dirs(vhi, &a, &other)) {
        mpfr_t t;
        mpfr_init2(t, 128);
        mpfr_set_d(t, vhi, MPFR_RNDN);
        mpfr_rec_sqrt(t, t, MPFR_RNDD);
        a = mpfr_get_d(t, MPFR_RNDD);
        mpfr_clear(t);
    }
    if (vlo > 0 && !(ftz && vlo < F->min_normal) && !er__rsqrt_dirs(vlo, &other, &b)) b = 0.0; /* rsqrt(+inf) */
    er__approx_ends(F, U, a, b, rlo, rhi);
    if (!(*rlo > 0)) *rlo = 0; /* rsqrt is positive */
}

/* The three compositions at one value of r; NaN where one of them is NaN. With F and the output fp32 and every
 * operand a float, the hardware's float operations are the single roundings (the second composition is then the
 * first). */
static void er_compose(const er_rmsnorm_plan *pl, double x, double r, double w, double out[3]) {
    const er_fmt_info *F = pl->F, *O = pl->O;
    if (F->id == ER_FP32 && O->id == ER_FP32 && er__is_float(x) && er__is_float(r) && er__is_float(w)) {
        float xr = (float)x * (float)r, rw = (float)r * (float)w;
        out[0] = out[1] = xr * (float)w;
        out[2] = (float)x * rw;
        return;
    }
    double xr = er__round_prod(F, x, r, 1, ER_ROUND_NEAREST);
    out[0] = er__round_prod(F, xr, w, 1, ER_ROUND_NEAREST);
    out[1] = er__round_prod(O, er__round_double(O, xr, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE), w, 1, ER_ROUND_NEAREST);
    out[2] = er__round_prod(F, x, er__round_prod(F, r, w, 1, ER_ROUND_NEAREST), 1, ER_ROUND_NEAREST);
}

/* The exact y = x w / sqrt(S/n + eps) of one element in MPFR: rs[big] the row's enclosures at the two ends of S's
 * bracket (rz: a zero radicand), then S exactly and growing precision while the ends round apart. */
static void er_rms_exact_mpfr(const er_rmsnorm_plan *pl, const double *xs, int64_t n, double x, double wi,
                              const er_rms_row *row, double *exact, double *rounded) {
    mpfr_t s, y;
    mpfr_inits2(256, s, y, (mpfr_ptr)0);
    double rr[2] = {0, 0};
    for (int up = 0; up < 2; up++) {
        /* sqrt(S/n + eps) grows with S: the smallest y magnitude comes from the largest S */
        int big = up ^ (x * wi < 0);
        if (row->rz[big]) { rr[up] = NAN; break; }
        mpfr_set_d(y, x, MPFR_RNDN);
        mpfr_mul_d(y, y, wi, MPFR_RNDN); /* exact at 256 bits */
        mpfr_mul(y, y, row->rs[big], up ? MPFR_RNDD : MPFR_RNDU);
        rr[up] = er__round_mpfr(pl->O, y, ER_ROUND_NEAREST, pl->ov_out);
        if (!up) *exact = mpfr_get_d(y, MPFR_RNDN);
    }
    if (!isnan(rr[0]) && rr[0] != rr[1]) {
        /* the summary does not decide: S exactly (squares of doubles are exact at 106 bits, their sum at 4500) */
        mpfr_t S, p2;
        mpfr_init2(S, 4500);
        mpfr_init2(p2, 128);
        mpfr_set_zero(S, 1);
        for (int64_t j = 0; j < n; j++) {
            mpfr_set_d(p2, xs[j], MPFR_RNDN);
            mpfr_sqr(p2, p2, MPFR_RNDN);
            mpfr_add(S, S, p2, MPFR_RNDN);
        }
        for (mpfr_prec_t pr = 256; pr <= 4096 && rr[0] != rr[1]; pr *= 4) {
            mpfr_set_prec(s, pr);
            mpfr_set_prec(y, pr);
            for (int up = 0; up < 2; up++) {
                int big = up ^ (x * wi < 0);
                mpfr_div_ui(s, S, (unsigned long)n, big ? MPFR_RNDU : MPFR_RNDD);
                mpfr_add_d(s, s, pl->eps, big ? MPFR_RNDU : MPFR_RNDD);
                mpfr_rec_sqrt(s, s, big ? MPFR_RNDD : MPFR_RNDU);
                mpfr_set_d(y, x, MPFR_RNDN);
                mpfr_mul_d(y, y, wi, up ? MPFR_RNDD : MPFR_RNDU);
                mpfr_mul(y, y, s, up ? MPFR_RNDD : MPFR_RNDU);
                rr[up] = er__round_mpfr(pl->O, y, ER_ROUND_NEAREST, pl->ov_out);
            }
        }
        mpfr_clear(S);
        mpfr_clear(p2);
    }
    mpfr_clears(s, y, (mpfr_ptr)0);
    if (isnan(rr[0])) { *exact = *rounded = NAN; return; }
    *rounded = rr[0]; /* rr[0] == rr[1] but for a value within 2^-4096 of a midpoint (never seen) */
}

er_status er__rmsnorm_rstd_set(const er_rmsnorm_plan *pl, er_acc *acc, const er_dot_env *env, const double *x,
                               int64_t n, er_dotsum *smp, int *qspecial, double *rlo, double *rhi) {
    er__dot_summary(smp, acc, x, x, n, env, env->special);
    /* the squares' sum to nearest in the rows' one order (er_sqwin_pos), which the GPU path keeps too, where each
     * square is exact (values of at most 24 bits) and the row holds no NaN or infinity */
    if (!env->special && !env->wide && !smp->special)
        er__dotsum_finish(smp, er_sqwin_pos(x, n), 0.0, n, 0, smp->neg, smp->m, smp->e, smp->sticky);
    return er__rmsnorm_rstd_of(pl, smp, x, n, qspecial, rlo, rhi);
}

er_status er__rmsnorm_rstd_of(const er_rmsnorm_plan *pl, const er_dotsum *smp, const double *x, int64_t n,
                              int *qspecial, double *rlo, double *rhi) {
    const er_fmt_info *F = pl->F;
    er_dotsum sm = *smp;
    /* q's set (any order; the plan's bound for rows of n), then ms = q/n, v = fl(ms + eps) */
    ER_ASSERT_OR_FAIL(n == pl->n);
    er_edge_scratch ws;
    er__edge_scratch_init(&ws);
    er_cval q;
    er__anyorder_cval(&q, &pl->bq, F, &sm, &ws);
    er__edge_scratch_clear(&ws);
    double vlo, vhi;
    int special = q.nan || q.nan_req || q.lo > q.hi;
    *qspecial = special;
    if (!special) {
        double mlo, mhi;
        er__div_n_set(F, q.lo, q.hi, n, pl->mean, pl->Udiv_n, &mlo, &mhi);
        if (q.pinf) mhi = INFINITY;
        if (pl->variance >= 2) {
            /* Welford's mean square fl(fl(M2 / n) + fl(m m)) (rmsnorm.md, Theorem R2): alone, or joined to the sum's */
            double wlo, whi;
            if (!er__welford_ms_set(&pl->wk, F, x, n, pl->mean, pl->Udiv_n, &wlo, &whi)) {
                wlo = 0;
                whi = INFINITY;
            }
            if (pl->variance == 2) { mlo = wlo; mhi = whi; }
            else { mlo = fmin(mlo, wlo); mhi = fmax(mhi, whi); }
        }
        vlo = er__round_sum(F, mlo, pl->eps, ER_ROUND_NEAREST);
        vhi = er__round_sum(F, mhi, pl->eps, ER_ROUND_NEAREST);
    } else {
        vlo = 0;
        vhi = INFINITY;
    }
    er__rsqrt_set(F, pl->U, pl->rsqrt_ftz, vlo, vhi, rlo, rhi);
    return ER_OK;
}

/* The row's 1/sqrt(S/n + eps) at the two ends of S's bracket from its summary r->sm, at 256 bits (r->rs, initialised;
 * r->rz: the radicand is 0); for an output of at most 24 bits, their enclosure in doubles [r->r_lo, r->r_hi], and
 * whether the exact results can be taken in double (r->dbl = 1) or need MPFR (0). */
static void er_rms_rs(const er_rmsnorm_plan *pl, int64_t n, er_rms_row *r) {
    const er_dotsum *sm = &r->sm;
    mpfr_t re;
    mpfr_init2(re, 64);
    r->rz[0] = r->rz[1] = 0;
    for (int big = 0; big < 2 && !sm->special; big++) {
        mpfr_ptr v = r->rs[big];
        mpfr_set_uj_2exp(v, sm->m, sm->e, MPFR_RNDN);
        if (big && sm->sticky) { mpfr_set_ui_2exp(re, 1, sm->e, MPFR_RNDN); mpfr_add(v, v, re, MPFR_RNDN); }
        mpfr_div_ui(v, v, (unsigned long)n, big ? MPFR_RNDU : MPFR_RNDD);
        mpfr_add_d(v, v, pl->eps, big ? MPFR_RNDU : MPFR_RNDD);
        if (mpfr_zero_p(v)) { r->rz[big] = 1; continue; }
        mpfr_rec_sqrt(v, v, big ? MPFR_RNDD : MPFR_RNDU);
    }
    mpfr_clear(re);
    /* the exact results in double for an output of at most 24 bits (r's enclosure widened to doubles) */
    int dbl = pl->O->p <= 24 && !sm->special && !r->rz[0] && !r->rz[1];
    r->r_lo = dbl ? mpfr_get_d(r->rs[1], MPFR_RNDD) : 0;
    r->r_hi = dbl ? mpfr_get_d(r->rs[0], MPFR_RNDU) : 0;
    if (!(r->r_lo > 0) || !(r->r_hi < INFINITY)) dbl = 0;
    r->dbl = dbl;
}

er_status er__rmsnorm_row_begin(const er_rmsnorm_plan *pl, er_acc *acc, const er_dot_env *env, const double *x,
                                 int64_t n, er_rms_row *r) {
    ER_RETURN_IF_ERROR(er__rmsnorm_rstd_set(pl, acc, env, x, n, &r->sm, &r->special, &r->rlo, &r->rhi));
    mpfr_inits2(256, r->rs[0], r->rs[1], (mpfr_ptr)0);
    er_rms_rs(pl, n, r);
    return ER_OK;
}

void er__rmsnorm_row_end(er_rms_row *r) { mpfr_clears(r->rs[0], r->rs[1], (mpfr_ptr)0); }

void er__rmsnorm_elem(const er_rmsnorm_plan *pl, const er_rms_row *r, const double *x, double wi, int64_t n, int64_t i,
                      er_cval *cv, double *exact, double *rounded) {
    double a[3], b[3], xi = x[i];
    er_compose(pl, xi, r->rlo, wi, a);
    er_compose(pl, xi, r->rhi, wi, b);
    double lo = INFINITY, hi = -INFINITY;
    int nan = r->special && (isnan(xi) || isinf(xi) || r->sm.special);
    for (int k = 0; k < 3; k++) {
        if (isnan(a[k]) || isnan(b[k])) { nan = 1; continue; }
        double l = a[k] < b[k] ? a[k] : b[k], h = a[k] > b[k] ? a[k] : b[k];
        if (l < lo) lo = l;
        if (h > hi) hi = h;
    }
    if (nan && lo > hi) { lo = NAN; hi = NAN; }              /* NaN for every r */
    else if (nan) { lo = -INFINITY; hi = INFINITY; }        /* NaN possible: keep everything */
    er__cval_from_interval(cv, lo, hi, nan, pl->O);
    /* exact: x_i w_i / sqrt(S/n + eps), from S's summary bracket [S_lo, S_hi] */
    if (r->sm.special || !isfinite(xi) || !isfinite(wi)) {
        *exact = *rounded = NAN;
        return;
    }
    if (r->dbl) {
        /* in double (docs/algorithms/double-bounds.md): r in [r_lo, r_hi] > 0, p = x w in [p_lo, p_hi]; the lowest
         * y at p_lo and the highest at p_hi, each at one end of r */
        double p = xi * wi, pl_ = er__dn(p), ph = er__up(p);
        double a0 = pl_ * r->r_lo, a1 = pl_ * r->r_hi, b0 = ph * r->r_lo, b1 = ph * r->r_hi;
        double yl = er__dn(a0 < a1 ? a0 : a1), yh = er__up(b0 > b1 ? b0 : b1);
        double ol = er__round_double(pl->O, yl, ER_ROUND_NEAREST, pl->ov_out),
               oh = er__round_double(pl->O, yh, ER_ROUND_NEAREST, pl->ov_out);
        if (ol == oh) {
            *exact = 0.5 * yl + 0.5 * yh;
            *rounded = ol;
            return;
        }
    }
    er_rms_exact_mpfr(pl, x, n, xi, wi, r, exact, rounded);
}

er_status er__rmsnorm_row(const er_rmsnorm_plan *pl, er_acc *acc, const er_dot_env *env, const double *x,
                          const double *w, int64_t n, er_cval *cv, double *exact, double *rounded) {
    if (n == 0) return ER_OK;
    er_rms_row r;
    ER_RETURN_IF_ERROR(er__rmsnorm_row_begin(pl, acc, env, x, n, &r));
    for (int64_t i = 0; i < n; i++) er__rmsnorm_elem(pl, &r, x, w ? w[i] : 1.0, n, i, &cv[i], &exact[i], &rounded[i]);
    er__rmsnorm_row_end(&r);
    return ER_OK;
}

/* One element of er__rmsnorm_row_run (with devrms.cu's er_rms_element, operation for operation): rstd's set [rl, rh]
 * (floats), 1/sqrt(S/n + eps) in [cl, ch]; lo NaN where the element needs er__rmsnorm_elem. */
ER_ALWAYS_INLINE void er_rms_run_body(int64_t n, const double *restrict x, const double *restrict w, float rl,
                                      float rh, double cl, double ch, er_vec_fmt f, int narrow, double *restrict lo,
                                      double *restrict hi, double *restrict ex, double *restrict rd) {
    for (int64_t q = 0; q < n; q++) {
        double wd = w[q];
        float xf = (float)x[q], wf = (float)wd;
        float xl = xf * rl, xh = xf * rh;
        double o0 = (double)(xl * wf), o1 = (double)(xf * (rl * wf));
        double o2 = (double)(xh * wf), o3 = (double)(xf * (rh * wf));
        /* fl_O(fl_O(fl(x r)) w): the product of two values of at most 24 bits is exact in double */
        double ul = er_vec_rn_fmt(xl, f, narrow), uh = er_vec_rn_fmt(xh, f, narrow), pl = ul * wd, ph = uh * wd;
        int64_t ok = er_vec_rn_ok(xl, ul, f, narrow) & er_vec_rn_ok(xh, uh, f, narrow);
        double o4 = narrow ? er_vec_rn_fmt(pl, f, narrow) : o0, o5 = narrow ? er_vec_rn_fmt(ph, f, narrow) : o2;
        if (narrow) ok &= er_vec_rn_ok(pl, o4, f, narrow) & er_vec_rn_ok(ph, o5, f, narrow); /* a constant */
        ok &= (fabs(o0) <= f.maxv) & (fabs(o1) <= f.maxv) & (fabs(o2) <= f.maxv) & (fabs(o3) <= f.maxv) &
              (fabs(o4) <= f.maxv) & (fabs(o5) <= f.maxv);
        double l = o0 < o1 ? o0 : o1, h = o0 > o1 ? o0 : o1;
        l = o2 < l ? o2 : l;
        h = o2 > h ? o2 : h;
        l = o3 < l ? o3 : l;
        h = o3 > h ? o3 : h;
        l = o4 < l ? o4 : l;
        h = o4 > h ? o4 : h;
        l = o5 < l ? o5 : l;
        h = o5 > h ? o5 : h;
        double L = er_vec_rn_fmt(l, f, narrow), H = er_vec_rn_fmt(h, f, narrow);
        /* the exact result: p = x w in [p_lo, p_hi]; the lowest y at p_lo and the highest at p_hi, each at one end */
        double p = x[q] * wd, pd = er__dn_finite(p), pu = er__up_finite(p);
        double a0 = pd * cl, a1 = pd * ch, b0 = pu * cl, b1 = pu * ch;
        double yl = er__dn_finite(a0 < a1 ? a0 : a1), yh = er__up_finite(b0 > b1 ? b0 : b1);
        double ol = er_vec_rn_fmt(yl, f, narrow), oh = er_vec_rn_fmt(yh, f, narrow);
        ok &= er_vec_rn_ok(yl, ol, f, narrow) & er_vec_rn_ok(yh, oh, f, narrow) & (ol == oh);
        ex[q] = 0.5 * yl + 0.5 * yh;
        rd[q] = ol;
        lo[q] = ok ? (ol < L ? ol : L) : NAN;
        hi[q] = ol > H ? ol : H;
    }
}
#define ER_RMS_RUN_ARGS                                                                                               \
    int64_t n, const double *restrict x, const double *restrict w, float rl, float rh, double cl, double ch,          \
        er_vec_fmt f, double *restrict lo, double *restrict hi, double *restrict ex, double *restrict rd
#define ER_RMS_RUN_CALLS                                                                                              \
    if (f.narrow) er_rms_run_body(n, x, w, rl, rh, cl, ch, f, 1, lo, hi, ex, rd);                                    \
    else er_rms_run_body(n, x, w, rl, rh, cl, ch, f, 0, lo, hi, ex, rd)
ER_ALWAYS_INLINE void er_rms_run_any(ER_RMS_RUN_ARGS) { ER_RMS_RUN_CALLS; }
ER_SIMD_BUILDS(er_rms_run, (ER_RMS_RUN_ARGS), (n, x, w, rl, rh, cl, ch, f, lo, hi, ex, rd), er_rms_run_any)

int er__rmsnorm_row_run(const er_rmsnorm_plan *pl, const er_rms_row *r, const double *x, const double *w, int64_t n,
                        int simd, double *lo, double *hi, double *exact, double *rounded) {
    er_format o = pl->O->id;
    if (pl->F->id != ER_FP32 || (o != ER_FP32 && o != ER_FP16 && o != ER_BF16) || pl->variance >= 2 || !r->dbl ||
        r->special || r->sm.special || !(r->rlo > 0) || !(r->rhi < INFINITY) || pl->X->p > 24 ||
        pl->X->emax > 127 || pl->X->emin < -126)
        return 0;
    float rl = (float)r->rlo, rh = (float)r->rhi;
    er_vec_fmt f = er_vec_fmt_of(pl->O);
    er_rms_run(simd, n, x, w, rl, rh, r->r_lo, r->r_hi, f, lo, hi, exact, rounded);
    return 1;
}

int er__rmsnorm_dev_row(const er_rmsnorm_plan *pl, const er_dotsum *sm, int64_t n, double c[4]) {
    int special = 1; /* set by er__rmsnorm_rstd_of where it returns ER_OK */
    if (pl->variance >= 2 || sm->special || er__rmsnorm_rstd_of(pl, sm, NULL, n, &special, &c[0], &c[1]) != ER_OK ||
        special)
        return 0;
    er_rms_row r;
    r.sm = *sm;
    mpfr_inits2(256, r.rs[0], r.rs[1], (mpfr_ptr)0);
    er_rms_rs(pl, n, &r);
    mpfr_clears(r.rs[0], r.rs[1], (mpfr_ptr)0);
    c[2] = r.r_lo;
    c[3] = r.r_hi;
    return r.dbl;
}
