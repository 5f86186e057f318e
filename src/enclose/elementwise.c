/* elementwise.c: interval images of the elementwise functions (src/enclose/elementwise.h; docs/algorithms/chains.md,
 * Lemmas C5 to C11). */
#include <math.h>
#include <string.h>
#include "format/format.h"
#include "enclose/elementwise.h"
#include "enclose/approx.h"

/* v's finite part given as the images l <= h of its ends (each a value of E or an infinity from overflow): an end
 * beyond the largest finite value makes that infinity possible and cuts the interval there. */
void er__set_ends(er_cval *v, const er_fmt_info *E, double l, double h) {
    if (l == INFINITY) { v->pinf = 1; v->lo = INFINITY; v->hi = -INFINITY; return; }
    if (h == -INFINITY) { v->ninf = 1; v->lo = INFINITY; v->hi = -INFINITY; return; }
    if (l == -INFINITY) { v->ninf = 1; l = -E->max; }
    if (h == INFINITY) { v->pinf = 1; h = E->max; }
    v->lo = l;
    v->hi = h;
}

/* f(a) into r; MPFR's ternary value (0: exact). */
int er__mpfr_fn(int kind, mpfr_ptr r, mpfr_srcptr a, mpfr_rnd_t rnd) {
    switch (kind) {
    case ER_FN_ERF: return mpfr_erf(r, a, rnd);
    case ER_FN_EXP: return mpfr_exp(r, a, rnd);
    case ER_FN_EXP2: return mpfr_exp2(r, a, rnd);
    case ER_FN_LOG: return mpfr_log(r, a, rnd);
    case ER_FN_TANH: return mpfr_tanh(r, a, rnd);
    default: return mpfr_rec_sqrt(r, a, rnd);
    }
}

/* The relative margin around libm's values (chains.md, Lemma C10): far beyond any libm's error for these functions
 * (glibc's are within 2 double ulps, 2^-52), far below a compute format's ulp (2^-23 for fp32). */
#define ER_LIBM_MARGIN 0x1p-36

/* f(x) from libm for a compute format of at most 24 bits: NAN where the margin does not apply (a result that is 0,
 * subnormal or beyond the doubles, or an exact case MPFR settles). 1/sqrt(x) is two correctly rounded operations. */
static double er_libm_fn(int kind, double x) {
    double v;
    switch (kind) {
    case ER_FN_ERF: v = erf(x); break;
    case ER_FN_EXP: v = exp(x); break;
    case ER_FN_EXP2: v = exp2(x); break;
    case ER_FN_LOG: v = log(x); break;
    case ER_FN_TANH: v = tanh(x); break;
    default: v = 1.0 / sqrt(x); break;
    }
    return fabs(v) >= 0x1p-1000 && fabs(v) <= 0x1p1000 && x != 0 ? v : NAN;
}

/* Bounds of an exact function value as doubles: f(x) rounded down and up (the value at one point, x in f's domain).
 * For a compute format E of at most 24 bits, libm's value widened by ER_LIBM_MARGIN; else (or where that does not
 * apply) one MPFR evaluation at 64 bits rounded down, r <= f(x) < r's successor (or r = f(x) exactly). */
void er__exact_fn(const er_fmt_info *E, int kind, double x, double *dn, double *up) {
    if (E->p <= 24) {
        double v = er_libm_fn(kind, x);
        if (v == v) {
            double m = fabs(v) * ER_LIBM_MARGIN;
            *dn = -er__next_up(-(v - m));
            *up = er__next_up(v + m);
            return;
        }
    }
    mpfr_t a, r;
    mpfr_init2(a, 53);
    mpfr_init2(r, 64);
    mpfr_set_d(a, x, MPFR_RNDN); /* exact */
    int inexact = er__mpfr_fn(kind, r, a, MPFR_RNDD) != 0;
    *dn = mpfr_get_d(r, MPFR_RNDD);
    if (inexact) mpfr_nextabove(r);
    *up = mpfr_get_d(r, MPFR_RNDU);
    mpfr_clear(a);
    mpfr_clear(r);
}

/* v's join with w: every value either allows. */
void er__cval_join(er_cval *v, const er_cval *w) {
    if (w->lo <= w->hi) {
        if (v->lo > v->hi) { v->lo = w->lo; v->hi = w->hi; }
        else { v->lo = fmin(v->lo, w->lo); v->hi = fmax(v->hi, w->hi); }
    }
    v->nan_req = v->nan_req && w->nan_req;
    v->nan |= w->nan | w->nan_req;
    v->pinf |= w->pinf;
    v->ninf |= w->ninf;
}

/* Lemma U1 over f's exact values, f least at p and greatest at q (p = q: one point): [*lo, *hi], and bounds a of
 * f(p) below and b of f(q) above. From libm's brackets where they decide the ends: the true ends lie between those
 * over the outer values [a, b] and those over the inner ones (Lemma C10), and where these agree they are the true
 * ends; else from MPFR's. */
static void er_fn_approx(const er_fmt_info *E, int fn, double U, double p, double q, double *lo, double *hi, double *a,
                         double *b) {
    double a2, b1;
    for (int pass = 0; pass < 2; pass++) {
        const er_fmt_info *G = pass ? er__fmt(ER_FP64) : E; /* pass 1: MPFR (er_exact_fn takes libm below 25 bits) */
        er__exact_fn(G, fn, p, a, &a2);
        if (p == q) { b1 = *a; *b = a2; }
        else er__exact_fn(G, fn, q, &b1, b);
        er__approx_ends(E, U, *a, *b, lo, hi);
        if (pass || E->p > 24) return;
        double l1, h1, l2, h2;
        if (p == q) {
            /* one point, somewhere in [a, a2]: the ends at both of them */
            er__approx_ends(E, U, *a, *a, &l1, &h1);
            er__approx_ends(E, U, a2, a2, &l2, &h2);
            if (l1 == *lo && l2 == *lo && h1 == *hi && h2 == *hi) return;
        } else if (a2 <= b1) {
            er__approx_ends(E, U, a2, b1, &l1, &h1);
            if (l1 == *lo && h1 == *hi) return;
        }
    }
}

/* The hull of RN_E(p q) over p in [p0, p1], q in [q0, q1] (a bilinear function: its extremes are at corners). */
static void er_prod_hull(const er_fmt_info *E, double p0, double p1, double q0, double q1, int div, double *lo,
                         double *hi) {
    double c[4] = {div ? p0 / q0 : p0 * q0, div ? p0 / q1 : p0 * q1, div ? p1 / q0 : p1 * q0, div ? p1 / q1 : p1 * q1};
    double mn = c[0], mx = c[0];
    for (int k = 1; k < 4; k++) { if (c[k] < mn) mn = c[k]; if (c[k] > mx) mx = c[k]; }
    /* each corner rounded to nearest in double first: step outward, then to E (RN_E is monotone) */
    *lo = er__round_double(E, nextafter(mn, -INFINITY), ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    *hi = er__round_double(E, nextafter(mx, INFINITY), ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
}

/* A unary function's default accuracy in ulps, CUDA's table (expf, exp2f, tanhf, erff and rsqrtf 2, logf 1;
 * sigmoid's is its exp's). */

static double er_unary_default(er_stage_kind k) { return k == ER_STAGE_LOG ? 1.0 : 2.0; }

/* An empty set. */
void er__cval_empty(er_cval *v) {
    memset(v, 0, sizeof *v);
    v->lo = INFINITY;
    v->hi = -INFINITY;
}

/* Adds the value w (of E, or an infinity) to v. */
void er__cval_put(er_cval *v, double w) {
    er_cval p;
    er__cval_empty(&p);
    if (w == INFINITY) p.pinf = 1;
    else if (w == -INFINITY) p.ninf = 1;
    else p.lo = p.hi = w;
    er__cval_join(v, &p);
}

/* Adds to v the values an implementation of f within U ulps returns for the arguments in [l, h] (l <= h, f's domain,
 * f monotone: increasing, or decreasing where dec; chains.md, Lemma C6): Lemma U1 over the bounds of f's exact values
 * at the ends; a result whose exact value is below the smallest normal may be flushed to a zero. */
static void er_fn_image(er_cval *v, const er_fmt_info *E, int fn, int dec, double U, double l, double h) {
    double a, b, lo, hi;
    er_fn_approx(E, fn, U, dec ? h : l, dec ? l : h, &lo, &hi, &a, &b);
    er_cval p;
    er__cval_empty(&p);
    if (a == INFINITY) { p.pinf = 1; er__cval_join(v, &p); return; } /* beyond every double: overflow */
    if (a < E->min_normal && b > -E->min_normal) { lo = fmin(lo, 0.0); hi = fmax(hi, 0.0); }
    er__set_ends(&p, E, lo, hi);
    er__cval_join(v, &p);
}

/* exp(x) for x in [l, h]: within U ulps of e^x, or (math=triton: tl.exp) of 2^RN(x RN(log2 e)), ex2.approx of the
 * rounded product; exp2(x) within U ulps of 2^x. */
static void er_exp_image(er_cval *v, const er_fmt_info *E, int two, int tri, double U, double l, double h) {
    if (two || !tri) { er_fn_image(v, E, two ? ER_FN_EXP2 : ER_FN_EXP, 0, U, l, h); return; }
    double c = er__round_double(E, 1.44269504088896340736, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    double t0 = er__round_prod(E, l, c, 1, ER_ROUND_NEAREST), t1 = er__round_prod(E, h, c, 1, ER_ROUND_NEAREST);
    if (t0 == INFINITY) { er__cval_put(v, INFINITY); return; }
    if (t1 == -INFINITY) { er__cval_put(v, 0.0); return; }
    if (t0 == -INFINITY) { er__cval_put(v, 0.0); t0 = -E->max; }
    if (t1 == INFINITY) { er__cval_put(v, INFINITY); t1 = E->max; }
    er_fn_image(v, E, ER_FN_EXP2, 0, U, t0, t1);
}

/* d = RN(1 + e) for e = exp~(-x), x in [l, h], as er_exp_image gives e: [*d0, *d1] (d1 may be +inf). */
static void er_denominator(const er_fmt_info *E, int tri, double U, double l, double h, double *d0, double *d1) {
    er_cval e;
    er__cval_empty(&e);
    er_exp_image(&e, E, 0, tri, U, -h, -l);
    double e0 = e.lo <= e.hi ? e.lo : INFINITY, e1 = e.pinf ? INFINITY : e.hi;
    *d0 = er__round_sum(E, 1.0, e0, ER_ROUND_NEAREST);
    *d1 = e1 == INFINITY ? INFINITY : er__round_sum(E, 1.0, e1, ER_ROUND_NEAREST);
}

/* A division's results whose exact quotients lie in [qa, qb] (bounds of them): correctly rounded, or (math=triton:
 * div.full.f32) within 2 ulps; a subnormal quotient may be flushed (CUDA's 1.0f / d does for d above 2^126,
 * measured on the H200). */
static void er_quotient_ends(const er_fmt_info *E, int tri, double qa, double qb, double *lo, double *hi) {
    if (tri) {
        er__approx_ends(E, 2.0, qa, qb, lo, hi);
    } else {
        *lo = er__round_double(E, qa, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        *hi = er__round_double(E, qb, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    }
    if (qa < E->min_normal && qb > -E->min_normal) { *lo = fmin(*lo, 0.0); *hi = fmax(*hi, 0.0); }
}

/* RN(1 / d) for d in [d0, d1] (d0 >= 1/2: e0 is at least a few ulps below 0; d1 may be +inf): decreasing in d. */
static void er_recip_ends(const er_fmt_info *E, int tri, double d0, double d1, double *lo, double *hi) {
    double qa = d1 == INFINITY ? 0.0 : nextafter(1.0 / d1, -INFINITY), qb = nextafter(1.0 / d0, INFINITY);
    er_quotient_ends(E, tri, qa, qb, lo, hi);
}

/* sigmoid(x) = RN(1 / RN(1 + e)), e = exp(-x) as er_exp_image gives it, for x in [l, h]. Increasing in x (each step
 * is monotone), so the quotient's ends come from e's. */
static void er_sigmoid_image(er_cval *v, const er_fmt_info *E, int tri, double U, double l, double h) {
    double d0, d1, lo, hi;
    er_denominator(E, tri, U, l, h, &d0, &d1);
    er_recip_ends(E, tri, d0, d1, &lo, &hi);
    er_cval p;
    er__cval_empty(&p);
    er__set_ends(&p, E, lo, hi);
    er__cval_join(v, &p);
}

/* gelu's tanh form: the argument RN(b RN(x + k x^3)), b = RN(sqrt(2/pi)), k = RN(0.044715), in every form Lemma C9
 * lists, at x: the least (upper = 0) or the greatest of them. */
static double er_gelu_tanh_arg(const er_fmt_info *E, double x, int upper, double c) {
    const er_round N = ER_ROUND_NEAREST;
    double b = er__round_double(E, c, N, ER_OVERFLOW_IEEE), k = er__round_double(E, 0.044715, N, ER_OVERFLOW_IEEE);
    double xx = er__round_prod(E, x, x, 1, N), kx = er__round_prod(E, k, x, 1, N);
    double cube = er__round_prod(E, xx, x, 1, N), kxx = er__round_prod(E, kx, x, 1, N),
           k_xx = er__round_prod(E, k, xx, 1, N);
    double s[6] = {
        er__round_sum(E, x, er__round_prod(E, k, cube, 1, N), N), er__round_fma(E, k, cube, x, 1, N), /* k (x x x) */
        er__round_sum(E, x, er__round_prod(E, kxx, x, 1, N), N),  er__round_fma(E, kxx, x, x, 1, N),  /* ((k x) x) x */
        er__round_sum(E, x, er__round_prod(E, k_xx, x, 1, N), N), er__round_fma(E, k_xx, x, x, 1, N), /* (k (x x)) x */
    };
    double m = s[0];
    for (int i = 1; i < 6; i++) m = upper ? fmax(m, s[i]) : fmin(m, s[i]);
    return er__round_prod(E, b, m, 1, N);
}

/* gelu (erf and tanh forms) and silu over the finite interval [l, h] (docs/algorithms/chains.md, Lemmas C5 and
 * C9): each step's interval, the transcendental's by Lemma U1, the last product or quotient over the corners. silu
 * is both x / d and x RN(1 / d), d = RN(1 + exp~(-x)), joined. */
/* x sigmoid(z) for x in [l, h] and z in [z0, z1]: x / d and x RN(1 / d), d = RN(1 + exp~(-z)), joined, over the box
 * (silu: z = x). */
static void er_x_sigmoid(const er_fmt_info *E, int tri, double U, double l, double h, double z0, double z1, double *lo,
                         double *hi) {
    double d0, d1, q0, q1, lo2, hi2;
    er_denominator(E, tri, U, z0, z1, &d0, &d1);
    /* x / d: the exact quotients lie between the corners (a box of constant signs in d > 0) */
    double c[4] = {l / d0, l / d1, h / d0, h / d1}, mn = c[0], mx = c[0];
    for (int i = 1; i < 4; i++) { mn = fmin(mn, c[i]); mx = fmax(mx, c[i]); }
    er_quotient_ends(E, tri, nextafter(mn, -INFINITY), nextafter(mx, INFINITY), lo, hi);
    /* x RN(1 / d) */
    er_recip_ends(E, tri, d0, d1, &q0, &q1);
    er_prod_hull(E, l, h, q0, q1, 0, &lo2, &hi2);
    *lo = fmin(*lo, lo2);
    *hi = fmax(*hi, hi2);
}

void er__act_interval(const er_fmt_info *E, er_stage_kind kind, int tri, double U, double l, double h, double *lo,
                      double *hi) {
    if (kind == ER_STAGE_SILU) { er_x_sigmoid(E, tri, U, l, h, l, h, lo, hi); return; }
    double t0, t1, a, b, e0, e1;
    int fn = kind == ER_STAGE_GELU ? ER_FN_ERF : ER_FN_TANH;
    if (kind == ER_STAGE_GELU) {
        double alpha = er__round_double(E, 0.70710678118654752440, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        t0 = er__round_prod(E, l, alpha, 1, ER_ROUND_NEAREST);
        t1 = er__round_prod(E, h, alpha, 1, ER_ROUND_NEAREST);
    } else {
        t0 = er_gelu_tanh_arg(E, l, 0, 0.79788456080286535588);
        t1 = er_gelu_tanh_arg(E, h, 1, 0.79788456080286535588);
    }
    /* within U ulps of an exact value near -1 (or 1) lies beyond it: an implementation at the edge of its budget
     * may return that, so no cut at [-1, 1] */
    er_fn_approx(E, fn, U, t0, t1, &e0, &e1, &a, &b);
    double s0 = er__round_sum(E, 1.0, e0, ER_ROUND_NEAREST), s1 = er__round_sum(E, 1.0, e1, ER_ROUND_NEAREST);
    double x0 = er__round_prod(E, l, 0.5, 1, ER_ROUND_NEAREST), x1 = er__round_prod(E, h, 0.5, 1, ER_ROUND_NEAREST);
    er_prod_hull(E, x0, x1, s0, s1, 0, lo, hi);
    if (kind == ER_STAGE_GELU_TANH) {
        /* 1 + tanh(u) = 2 sigmoid(2 u): x sigmoid(z), z = RN(RN(2 sqrt(2/pi)) m) or 2 RN(RN(sqrt(2/pi)) m) for the
         * argument's sum m in each form; z is increasing in x, so z in [z0, z1] (chains.md, Lemma C9) */
        double z0 = fmin(er_gelu_tanh_arg(E, l, 0, 1.59576912160573071176), 2.0 * t0);
        double z1 = fmax(er_gelu_tanh_arg(E, h, 1, 1.59576912160573071176), 2.0 * t1);
        double lo2, hi2;
        er_x_sigmoid(E, tri, U, l, h, z0, z1, &lo2, &hi2);
        *lo = fmin(*lo, lo2);
        *hi = fmax(*hi, hi2);
    }
}

/* A unary stage (chains.md, Lemmas C6 and C7): its image of v's finite interval, and of the special values. A
 * subnormal argument may be flushed to a zero of its sign first (CUDA's erff, logf and rsqrtf do, measured on the
 * H200): where the interval holds one, the image of a zero joins. */
void er__unary_image(er_cval *v, er_stage_kind kind, double ulps, const er_fmt_info *E, int tri) {
    double U = ulps > 0 ? ulps : er_unary_default(kind), l = v->lo, h = v->hi;
    int finite = l <= h, pinf = v->pinf, ninf = v->ninf;
    er_cval r;
    er__cval_empty(&r);
    if (finite && l < E->min_normal && h > -E->min_normal && !(l == 0 && h == 0)) {
        r.lo = r.hi = 0.0;
        er__unary_image(&r, kind, ulps, E, tri);
    }
    r.nan |= v->nan;
    switch (kind) {
    case ER_STAGE_EXP:
    case ER_STAGE_EXP2:
        if (pinf) er__cval_put(&r, INFINITY);
        if (ninf) er__cval_put(&r, 0.0);
        if (finite) er_exp_image(&r, E, kind == ER_STAGE_EXP2, tri, U, l, h);
        break;
    case ER_STAGE_TANH:
    case ER_STAGE_ERF:
        if (pinf) er__cval_put(&r, 1.0);
        if (ninf) er__cval_put(&r, -1.0);
        if (finite) er_fn_image(&r, E, kind == ER_STAGE_TANH ? ER_FN_TANH : ER_FN_ERF, 0, U, l, h);
        break;
    case ER_STAGE_SIGMOID:
        if (pinf) er__cval_put(&r, 1.0);
        if (ninf) er__cval_put(&r, 0.0);
        if (finite) er_sigmoid_image(&r, E, tri, U, l, h);
        break;
    default: { /* log (increasing) and rsqrt (decreasing): NaN below 0; at a zero -inf (log) or an infinity of the
                * zero's sign (rsqrt) */
        int lg = kind == ER_STAGE_LOG;
        if (pinf) er__cval_put(&r, lg ? INFINITY : 0.0);
        if (ninf) r.nan = 1;
        if (!finite) break;
        if (l < 0) r.nan = 1;
        if (l <= 0 && h >= 0) {
            er__cval_put(&r, lg ? -INFINITY : INFINITY);
            if (!lg) er__cval_put(&r, -INFINITY);
        }
        if (h >= E->min_sub) er_fn_image(&r, E, lg ? ER_FN_LOG : ER_FN_RSQRT, !lg, U, fmax(l, E->min_sub), h);
    }
    }
    *v = r;
}

/* An add or mul of v and a set w (a reference's values; chains.md, Lemma C11): x + y and x y are monotone in each
 * argument on a box of constant signs, and RN_E is monotone, so the finite part lies between the least and the
 * greatest of the corner values rounded (x y cut at 0 in neither: its extremes are at corners); where either holds a
 * special value, NaN and both infinities join. */
void er__set_op(er_cval *v, const er_cval *w, int mul, const er_fmt_info *E) {
    if (v->nan_req || w->nan_req) { er__cval_empty(v); v->nan = v->nan_req = 1; return; }
    int special = v->nan || w->nan || v->pinf || v->ninf || w->pinf || w->ninf;
    er_cval r;
    er__cval_empty(&r);
    if (v->lo <= v->hi && w->lo <= w->hi) {
        double c[4], mn = INFINITY, mx = -INFINITY;
        for (int k = 0; k < 4; k++) {
            double x = k & 1 ? v->hi : v->lo, y = k & 2 ? w->hi : w->lo;
            c[k] = mul ? er__round_prod(E, x, y, 1, ER_ROUND_NEAREST) : er__round_sum(E, x, y, ER_ROUND_NEAREST);
            mn = fmin(mn, c[k]);
            mx = fmax(mx, c[k]);
        }
        er__set_ends(&r, E, mn, mx);
    }
    if (special) { r.nan = 1; r.pinf = 1; r.ninf = 1; }
    *v = r;
}
