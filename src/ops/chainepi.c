/* chainepi.c: the chain's epilogue pass (docs/algorithms/chains.md, "The epilogue pass"): a chain whose base gives
 * single sets (a matmul on the fast path, a tensor) and whose stages are adds, muls, relu, casts and at most one
 * function (exp, tanh, sigmoid, silu, gelu's tanh form), decided 4096 elements at a time where the per-element
 * decision's first witness is the output: the witness from the base's inner value, each function correctly rounded
 * from exp's bounds (double-bounds.md, Theorem D1 and Lemma D6) instead of libm and MPFR; the class from the chain's
 * enclosure over the base's bracket, built from the same bounds (Lemma C13). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/chainvec.h"
#include "enclose/ival.h"
#include "format/format.h"

static int er_epi_is_fn(er_stage_kind k) {
    return k == ER_STAGE_EXP || k == ER_STAGE_TANH || k == ER_STAGE_SIGMOID || k == ER_STAGE_SILU ||
           k == ER_STAGE_GELU_TANH;
}

int er__epi_plan(er_epi *p, const er_stage *st, int ns, const er_standard *std, const er_tensor *out,
                 const er_fmt_info *O, const er_op_module *const *mods, void *const *curs) {
    const char *env = getenv("EXACTREF_BATCH");
    if ((env && env[0] == '0') || std->fast_math == 1 || ns > 12) return 0;
    er_format of = out->format;
    if ((of != ER_FP32 && of != ER_FP16 && of != ER_BF16) || O != er__fmt(of) || !er__row_major(out)) return 0;
    int fns = 0;
    memset(p, 0, sizeof *p);
    p->fn = -1;
    for (int i = 0; i < ns; i++) {
        er_stage_kind k = st[i].kind;
        if (st[i].ref && !(mods[i + 1] && curs[i + 1])) return 0; /* a reference operand: its cursor's values */
        p->rmod[i] = st[i].ref ? mods[i + 1] : NULL;
        p->rcur[i] = st[i].ref ? curs[i + 1] : NULL;
        if (k == ER_STAGE_ADD || k == ER_STAGE_MUL) {
            /* a mul then an add fused under fma=always: the per-element decision's */
            if (k == ER_STAGE_MUL && i + 1 < ns && st[i + 1].kind == ER_STAGE_ADD && std->fma == ER_FMA_ALWAYS)
                return 0;
            p->wop[i] = (float)st[i].scalar; /* RN to fp32 (an infinity beyond its range, as er_stage_operand) */
        } else if (k == ER_STAGE_CAST) {
            if (st[i].format != ER_FP32 && st[i].format != ER_FP16 && st[i].format != ER_BF16) return 0;
            p->cast[i] = er_vec_fmt_of(er__fmt(st[i].format));
        } else if (er_epi_is_fn(k)) {
            if (++fns > 1) return 0;
            p->fn = i;
            p->ulps = st[i].scalar > 0 ? st[i].scalar : 2.0; /* er_chain_witness's U */
            /* its variants as the per-element decision's (gelu's x / d forms take exp: not under math=triton) */
            p->nvar = k == ER_STAGE_GELU_TANH || k == ER_STAGE_SILU ? 4 : 2;
            p->tri = std->fast_math == 2; /* exp as 2^RN(x RN(log2 e)) in the witnesses (er_wit_exp) */
        } else if (k != ER_STAGE_RELU) {
            return 0;
        }
    }
    p->st = st;
    p->ns = ns;
    p->o = er_vec_fmt_of(O);
    p->out = out;
    p->simd = er__simd();
    er__exp_init();
    return 1;
}

/* Bounds below and above the exact value of an operation that rounded to nearest to a finite x: x moved outward by
 * max(|x|, 2^-960) 2^-52, at least an ulp of x (the product is a normal double: no operation here takes or gives a
 * subnormal, for which x86 cores take microcode assists). */
ER_ALWAYS_INLINE double er_epi_up(double x) {
    double a = fabs(x);
    return x + (a > 0x1p-960 ? a : 0x1p-960) * 0x1p-52;
}
ER_ALWAYS_INLINE double er_epi_dn(double x) {
    double a = fabs(x);
    return x - (a > 0x1p-960 ? a : 0x1p-960) * 0x1p-52;
}

/* gelu's tanh form in the witness's fp32 constants (er_chain_witness) and the enclosure's doubles */
#define ER_GT_K32 ((float)0.79788456080286535588)
#define ER_GT_C32 ((float)0.044715)
#define ER_GT_M2K (-2.0 * 0.79788456080286535588)
#define ER_GT_C 0.044715

/* The argument of exp for a function stage at x (double; gelu's tanh form: t^ = RN(M2K RN(x + RN(C RN(RN(x x) x)))),
 * within 2^-50 |t^| of -2 sqrt(2 / pi)(x + 0.044715 x^3) for x = 0 or 2^-300 <= |x| <= 2^16, Lemma C13). */
ER_ALWAYS_INLINE double er_epi_arg(er_stage_kind k, double x) {
    if (k == ER_STAGE_EXP) return x;
    if (k == ER_STAGE_TANH) return 2.0 * fabs(x);
    if (k == ER_STAGE_GELU_TANH) return ER_GT_M2K * (x + ER_GT_C * ((x * x) * x));
    return -x;
}

/* exp's argument for the witness x (float): gelu's tanh form takes tanh(u) from exp(2 |u|); under math=triton (tri)
 * exp(v) is 2^p correctly rounded, p = RN_f32(v RN_f32(log2 e)), and its argument RN(p RN(ln 2)) (er_epi_widen). */
#define ER_L2E32 ((float)1.44269504088896340736)
#define ER_LN2 0.69314718055994530942
ER_ALWAYS_INLINE double er_epi_earg(int tri, float v) { return tri ? (double)(v * ER_L2E32) * ER_LN2 : v; }
ER_ALWAYS_INLINE double er_epi_warg(er_stage_kind k, int tri, float x) {
    if (k == ER_STAGE_GELU_TANH) return 2.0 * fabs((double)(ER_GT_K32 * (x + ER_GT_C32 * ((x * x) * x))));
    if (k == ER_STAGE_TANH) return 2.0 * fabs((double)x);
    return er_epi_earg(tri, k == ER_STAGE_EXP ? x : -x);
}

/* Theorem D1's bounds [*el, *eh] at z = RN(p RN(ln 2)) widened to hold 2^p = exp(p ln 2) (Lemma C13): |z - p ln 2|
 * <= 2.01 2^-53 |z| < d, so [el RN(1 - 2d), eh RN(1 + 2d)], each moved outward, the lower end at least 0; 0 where
 * |z| > 1000 (no witness: 2^p overflows or underflows fp32 there). */
ER_ALWAYS_INLINE int64_t er_epi_widen(double z, double *el, double *eh) {
    double d = fabs(z) * 0x1p-51 + 0x1p-52, l = er_epi_dn(*el * (1.0 - 2.0 * d));
    *el = l > 0 ? l : 0.0;
    *eh = er_epi_up(*eh * (1.0 + 2.0 * d));
    return fabs(z) <= 1000.0;
}

/* A bound of function stage k at the point p, below (up 0) or above (up 1), from exp's bounds [elo, ehi] at
 * er_epi_arg(k, p); *good cleared where the bounds do not apply. */
ER_ALWAYS_INLINE double er_epi_fn_bound(er_stage_kind k, double p, double elo, double ehi, int up, int64_t *good) {
    double t = er_epi_arg(k, p);
    if (k == ER_STAGE_GELU_TANH || k == ER_STAGE_SILU || k == ER_STAGE_SIGMOID) {
        /* c / (1 + e) with exp(t) below 2^-1000 (t below -700, gelu's widening below included): e in [0, 2^-1000],
         * no subnormal bound; above 2^1000 (t above 700: e^700 > 2^1009): e in [2^1000, +inf] */
        int64_t tiny = t < -700.0, huge = t > 700.0;
        elo = tiny ? 0.0 : huge ? 0x1p1000 : elo;
        ehi = tiny ? 0x1p-1000 : huge ? INFINITY : ehi;
    }
    if (k == ER_STAGE_GELU_TANH) { /* exp at t^ -+ d (Lemma C13): [elo f, ehi g], f <= 1 - d, g >= 1 + 2 d */
        double d = fabs(t) * 0x1p-49 + 0x1p-52, f = 1.0 - 2.0 * d, g = 1.0 + 2.0 * d, lf = er_epi_dn(elo * f);
        *good &= (p == 0) | ((fabs(p) >= 0x1p-300) & (fabs(p) <= 0x1p16));
        elo = lf > 0 ? lf : 0.0;
        ehi = er_epi_up(ehi * g);
    }
    if (k == ER_STAGE_EXP) return up ? ehi : elo;
    if (k == ER_STAGE_TANH) {
        double l, h;
        *good &= er__tanh_any_bounds(p, elo, ehi, &l, &h);
        return up ? h : l;
    }
    /* c / (1 + e), c = 1 (sigmoid) or p (silu, gelu's tanh form); a quotient in the doubles' subnormals errs by
     * 2^-1074 at most (Lemma C13) */
    double q = er__quot_1p_bound(k == ER_STAGE_SIGMOID ? 1.0 : p, elo, ehi, up);
    return up ? q + 0x1p-1000 : q - 0x1p-1000;
}

/* The function stage k over [lo[i], hi[i]], enclosed from exp's bounds at its ends' arguments: el, eh at lo's, el1,
 * eh1 at hi's. Where the function is increasing on the bracket, its lower bound at lo and
 * upper at hi; decreasing, the reverse; else (gelu's and silu's minimum) both at lo, within 1.25 (hi - lo) of f(lo)
 * (|f'| < 1.2). */
ER_ALWAYS_INLINE void er_epi_fn_enclose(er_stage_kind k, int64_t m, const double *restrict el,
                                        const double *restrict eh, const double *restrict el1,
                                        const double *restrict eh1, double *restrict lo, double *restrict hi,
                                        int64_t *restrict ok) {
    for (int64_t i = 0; i < m; i++) {
        double a = lo[i], b = hi[i];
        /* gelu and silu each have one minimum (near -0.752 and -1.278): decreasing below -2 and increasing above
         * -0.4 (silu: -0.9); the others are increasing */
        int64_t two = k == ER_STAGE_GELU_TANH || k == ER_STAGE_SILU, good = 1,
                inc = !two | (a > (k == ER_STAGE_SILU ? -0.9 : -0.4)), dec = two & (b < -2.0);
        int64_t lb = dec, hb = inc; /* the end each bound is taken at (1: hi) */
        double l = er_epi_fn_bound(k, lb ? b : a, lb ? el1[i] : el[i], lb ? eh1[i] : eh[i], 0, &good),
               h = er_epi_fn_bound(k, hb ? b : a, hb ? el1[i] : el[i], hb ? eh1[i] : eh[i], 1, &good),
               w = inc | dec ? 0.0 : 1.25 * (b - a);
        l = er_epi_dn(l - w);
        h = er_epi_up(h + w);
        lo[i] = l;
        hi[i] = h;
        ok[i] = (ok[i] != 0) & good & (fabs(l) <= DBL_MAX) & (fabs(h) <= DBL_MAX);
    }
}

/* v moved one float up (up 1) or down, where a function's budget allows it (can: U >= 1.5) and v is a normal
 * float; else v (er_wit_step without a call or a branch). */
ER_ALWAYS_INLINE float er_epi_step1(float v, int up, int64_t can) {
    uint32_t b, neg;
    memcpy(&b, &v, sizeof b);
    neg = b >> 31;
    b = up ? b + 1 - 2 * neg : b - 1 + 2 * neg;
    float r;
    memcpy(&r, &b, sizeof r);
    return (can & (fabsf(v) >= 0x1p-126f) & (fabsf(v) <= FLT_MAX)) ? r : v;
}

/* The function stage k on end e's witnesses (s->w[e], from the base's inner value l or h), each function correctly
 * rounded to fp32 where exp's bounds at its argument (el, eh) decide it, then gelu's and silu's last steps in fp32
 * (er_chain_witness's var 0), and its variants 1 to nvar into s->w[2 + 2 (v - 1) + e]: the function's value moved one
 * float up and down, gelu's tanh form as x / d and x RN(1 / d) with d = 1 + exp(-2 u) (exp's bounds at -2 u in el2,
 * eh2), silu as x / d and x RN(1 / d). A witness whose function the bounds do not decide, or that is not finite, is
 * not ok. */
ER_ALWAYS_INLINE void er_epi_fn_witness(er_stage_kind k, int nvar, int64_t can, int64_t m, const double *restrict el,
                                        const double *restrict eh, const double *restrict el2,
                                        const double *restrict eh2, er_epi_scratch *restrict s, int e) {
    for (int64_t i = 0; i < m; i++) {
        float x = s->w[e][i], r, v[4] = {0, 0, 0, 0};
        int64_t good, good34 = 1, in0 = s->okw[e][i] != 0;
        if (k == ER_STAGE_TANH || k == ER_STAGE_GELU_TANH) {
            float u = k == ER_STAGE_TANH ? x : ER_GT_K32 * (x + ER_GT_C32 * ((x * x) * x));
            double tl, th;
            int64_t in = er__tanh_any_bounds(u, el[i], eh[i], &tl, &th); /* a float u: 0 or at least 2^-149 */
            float t = (float)tl, tu = er_epi_step1(t, 1, can), td = er_epi_step1(t, 0, can);
            /* (gelu: |x| <= 2^16, no step overflows) */
            good = in & (t == (float)th) & ((k == ER_STAGE_TANH) | (fabsf(x) <= 0x1p16f));
            r = k == ER_STAGE_TANH ? t : (x * 0.5f) * (1.0f + t);
            v[0] = k == ER_STAGE_TANH ? tu : (x * 0.5f) * (1.0f + tu);
            v[1] = k == ER_STAGE_TANH ? td : (x * 0.5f) * (1.0f + td);
            if (k == ER_STAGE_GELU_TANH && nvar == 4) {
                float a2 = (float)el2[i], d = 1.0f + a2;
                good34 = (a2 == (float)eh2[i]) & (fabsf(a2) <= FLT_MAX);
                v[2] = x / d;
                v[3] = x * (1.0f / d);
            }
        } else {
            float a = (float)el[i], au = er_epi_step1(a, 1, can), ad = er_epi_step1(a, 0, can); /* exp(x) or exp(-x) */
            good = (a == (float)eh[i]) & (fabsf(a) <= FLT_MAX);
            r = k == ER_STAGE_EXP ? a : k == ER_STAGE_SIGMOID ? 1.0f / (1.0f + a) : x / (1.0f + a);
            v[0] = k == ER_STAGE_EXP ? au : k == ER_STAGE_SIGMOID ? 1.0f / (1.0f + au) : x / (1.0f + au);
            v[1] = k == ER_STAGE_EXP ? ad : k == ER_STAGE_SIGMOID ? 1.0f / (1.0f + ad) : x / (1.0f + ad);
            v[2] = r;
            v[3] = x * (1.0f / (1.0f + a));
        }
        s->w[e][i] = r;
        s->okw[e][i] = in0 & good & (fabsf(r) <= FLT_MAX);
        /* (written out: nvar is a constant of each copy, and the loop vectorises) */
        if (nvar >= 2) {
            s->w[2 + e][i] = v[0];
            s->okw[2 + e][i] = in0 & good & (fabsf(v[0]) <= FLT_MAX);
            s->w[4 + e][i] = v[1];
            s->okw[4 + e][i] = in0 & good & (fabsf(v[1]) <= FLT_MAX);
        }
        if (nvar == 4) {
            s->w[6 + e][i] = v[2];
            s->okw[6 + e][i] = in0 & good & good34 & (fabsf(v[2]) <= FLT_MAX);
            s->w[8 + e][i] = v[3];
            s->okw[8 + e][i] = in0 & good & good34 & (fabsf(v[3]) <= FLT_MAX);
        }
    }
}

/* The function stage k on nb witnesses (0: none, the bracket alone; 1: the first alone; 2: both): exp's bounds at
 * the witnesses' arguments, at the bracket's lo's (one run, in rows of m: the first witness's, lo's, the second
 * witness's, gelu's variants' at -2 u at each witness), at hi's from lo's (row 5), then the witnesses, their variants
 * and the bracket through it. */
ER_ALWAYS_INLINE void er_epi_fn(er_stage_kind k, int nvar, int tri, int nb, int64_t can, int simd, int64_t m,
                                er_epi_scratch *s) {
    int g34 = k == ER_STAGE_GELU_TANH && nvar == 4, ex = k != ER_STAGE_TANH && k != ER_STAGE_GELU_TANH;
    for (int64_t i = 0; i < m; i++) {
        float x0 = s->w[0][i], x1 = nb == 2 ? s->w[1][i] : 0.0f;
        if (nb) s->t[i] = er_epi_warg(k, tri, x0);
        s->t[m + i] = er_epi_arg(k, s->lo[i]);
        if (nb == 2) s->t[2 * m + i] = er_epi_warg(k, tri, x1);
        s->t[5 * m + i] = er_epi_arg(k, s->hi[i]) - s->t[m + i]; /* hi's argument less lo's */
        if (g34) { /* exp(-2 u), -2 u a float (exact) */
            s->t[3 * m + i] = er_epi_earg(tri, -2.0f * (ER_GT_K32 * (x0 + ER_GT_C32 * ((x0 * x0) * x0))));
            s->t[4 * m + i] = er_epi_earg(tri, -2.0f * (ER_GT_K32 * (x1 + ER_GT_C32 * ((x1 * x1) * x1))));
        }
    }
    if (nb) er__exp_bounds_run(simd, (g34 ? 5 : nb + 1) * m, s->t, s->elo, s->ehi);
    else er__exp_bounds_run(simd, m, s->t + m, s->elo + m, s->ehi + m); /* lo's alone */
    if (tri && nb) /* the witnesses' exps are 2^p: their bounds widened, or no witness */
        for (int r = 0; r < (g34 ? 5 : nb + 1); r++) {
            int wit = r == 0 || r == 2; /* a witness's own (okw[r / 2]) */
            if ((wit && !ex) || r == 1) continue; /* tanh's own; the bracket's */
            for (int64_t i = 0; i < m; i++) {
                int64_t in = er_epi_widen(s->t[r * m + i], &s->elo[r * m + i], &s->ehi[r * m + i]);
                if (wit) s->okw[r / 2][i] = (s->okw[r / 2][i] != 0) & in;
                else s->elo[r * m + i] = in ? s->elo[r * m + i] : NAN; /* gelu's x / d forms: not formed */
            }
        }
    for (int64_t i = 0; i < m; i++) {
        /* exp's bounds at hi's argument from lo's (Lemma D7: the shift v, within 2^-71 of the exact difference where
         * |v| <= 2^-18); lo's replaced by [0, 2^-1000] below -700 first where the function is a quotient (no
         * subnormal bound: er_epi_fn_bound) */
        double t = s->t[m + i], v = s->t[5 * m + i], dl = s->elo[m + i], dh = s->ehi[m + i];
        int64_t tiny = (k == ER_STAGE_GELU_TANH || k == ER_STAGE_SILU || k == ER_STAGE_SIGMOID) & (t < -700.0);
        dl = tiny ? 0.0 : dl;
        dh = tiny ? 0x1p-1000 : dh;
        s->elo[m + i] = dl;
        s->ehi[m + i] = dh;
        er__exp_shift_run1(dl, dh, v, &s->elo[5 * m + i], &s->ehi[5 * m + i]);
        /* the shift holds for |v| <= 2^-18; where hi's own argument is below -700 or above 700, er_epi_fn_bound
         * takes [0, 2^-1000] or [2^1000, +inf] at hi and reads no shifted bound (a wide bracket in a quotient's
         * tails). v is hi's argument less t rounded once, so for |v| <= 2^40 t + v is within 2^-13 of hi's argument
         * and RN(t + v) within a relative 2^-53 more: beyond -701 or 701, hi's own is beyond -700 or 700 */
        double th = t + v;
        int64_t tail_hi = (k == ER_STAGE_GELU_TANH || k == ER_STAGE_SILU || k == ER_STAGE_SIGMOID) &
                          ((th < -701.0) | (th > 701.0)) & (fabs(v) <= 0x1p40);
        s->oke[i] = (s->oke[i] != 0) & ((fabs(v) <= 0x1p-18) | tail_hi);
    }
    for (int e = 0; e < nb; e++)
        er_epi_fn_witness(k, nvar, can, m, s->elo + 2 * e * m, s->ehi + 2 * e * m, s->elo + (3 + e) * m,
                          s->ehi + (3 + e) * m, s, e);
    er_epi_fn_enclose(k, m, s->elo + m, s->ehi + m, s->elo + 5 * m, s->ehi + 5 * m, s->lo, s->hi, s->oke);
}

/* An add or mul stage by a number (src 0: c0, wc0 its fp32 rounding), a tensor (src 1: op[i]) or another reference
 * (src 2). The nw witnesses take the operand rounded to fp32 (er_stage_operand), a reference's inner value rl with
 * the witnesses from l and rh with those from h (er_chain_witness's opw; each variant with its end's). The bracket
 * takes the operand's value, or a reference's bracket [rbl, rbh] (Lemma C11: a sum's ends add the ends, a product's
 * are the least and greatest of the four corners; for a value the corners are two), each end moved outward. Where a
 * reference's cursor gives no values (okr 0), nothing here is formed. */
ER_ALWAYS_INLINE void er_epi_addmul(int add, int src, int nw, int64_t m, double c0, float wc0,
                                    er_epi_scratch *restrict s) {
    for (int q = 0; q < nw; q++) {
        const double *rw = q & 1 ? s->rh : s->rl;
        for (int64_t i = 0; i < m; i++) {
            float wc = src == 2 ? (float)rw[i] : src == 1 ? (float)s->op[i] : wc0,
                  w = add ? s->w[q][i] + wc : s->w[q][i] * wc;
            s->w[q][i] = w;
            s->okw[q][i] = (s->okw[q][i] != 0) & (src != 2 || s->okr[i] != 0) & (fabsf(w) <= FLT_MAX);
        }
    }
    for (int64_t i = 0; i < m; i++) {
        double a = s->lo[i], b = s->hi[i], cl = src == 2 ? s->rbl[i] : src == 1 ? s->op[i] : c0,
               ch = src == 2 ? s->rbh[i] : cl, l, h;
        if (add) {
            l = a + cl;
            h = b + ch;
        } else {
            double p1 = a * cl, p2 = a * ch, p3 = b * cl, p4 = b * ch, n1 = p1 < p2 ? p1 : p2, n2 = p3 < p4 ? p3 : p4,
                   x1 = p1 < p2 ? p2 : p1, x2 = p3 < p4 ? p4 : p3;
            l = n1 < n2 ? n1 : n2;
            h = x1 < x2 ? x2 : x1;
        }
        l = er_epi_dn(l);
        h = er_epi_up(h);
        s->lo[i] = l;
        s->hi[i] = h;
        s->oke[i] = (s->oke[i] != 0) & (src != 2 || s->okr[i] != 0) & (fabs(l) <= DBL_MAX) & (fabs(h) <= DBL_MAX);
    }
}

/* Stage j over the chunk's m elements on nb witnesses (0: none, the bracket alone; 1: the first alone; 2: both), the
 * function's nv variants formed (0: none; only with both): nw witnesses live (the variants after the function). */
ER_ALWAYS_INLINE void er_epi_stage_body(const er_epi *p, int j, int nv, int nb, int64_t m,
                                        er_epi_scratch *restrict s) {
    const er_stage *st = &p->st[j];
    er_vec_fmt cf = p->cast[j];
    int nw = p->fn >= 0 && j > p->fn ? nb + 2 * nv : nb;
    int64_t can = p->ulps >= 1.5;
#define ER_EPI_FN(k, own)                                                                                             \
    do {                                                                                                              \
        if (nv && p->tri) er_epi_fn(k, own, 1, 2, can, p->simd, m, s);                                                \
        else if (nv) er_epi_fn(k, own, 0, 2, can, p->simd, m, s);                                                     \
        else if (p->tri) er_epi_fn(k, 0, 1, nb, can, p->simd, m, s);                                                  \
        else if (nb == 2) er_epi_fn(k, 0, 0, 2, can, p->simd, m, s);                                                  \
        else if (nb == 1) er_epi_fn(k, 0, 0, 1, can, p->simd, m, s);                                                  \
        else er_epi_fn(k, 0, 0, 0, can, p->simd, m, s);                                                               \
    } while (0)
    switch (st->kind) {
    case ER_STAGE_ADD:
        if (st->ref) er_epi_addmul(1, 2, nw, m, 0, 0, s);
        else if (st->t) er_epi_addmul(1, 1, nw, m, 0, 0, s);
        else er_epi_addmul(1, 0, nw, m, st->scalar, p->wop[j], s);
        break;
    case ER_STAGE_MUL:
        if (st->ref) er_epi_addmul(0, 2, nw, m, 0, 0, s);
        else if (st->t) er_epi_addmul(0, 1, nw, m, 0, 0, s);
        else er_epi_addmul(0, 0, nw, m, st->scalar, p->wop[j], s);
        break;
    case ER_STAGE_RELU:
        for (int q = 0; q < nw; q++)
            for (int64_t i = 0; i < m; i++) s->w[q][i] = s->w[q][i] > 0 ? s->w[q][i] : 0.0f;
        for (int64_t i = 0; i < m; i++) {
            s->lo[i] = s->lo[i] > 0 ? s->lo[i] : 0.0;
            s->hi[i] = s->hi[i] > 0 ? s->hi[i] : 0.0;
        }
        break;
    case ER_STAGE_CAST: /* the kernel's storage rounding: the witnesses', not the real function's */
        for (int q = 0; q < nw && cf.narrow; q++) /* (to fp32: the witnesses are fp32's, finite) */
            for (int64_t i = 0; i < m; i++) {
                double r = er_vec_rn_fmt(s->w[q][i], cf, 1);
                s->okw[q][i] = (s->okw[q][i] != 0) & er_vec_rn_ok(s->w[q][i], r, cf, 1);
                s->w[q][i] = (float)r;
            }
        break;
    /* each function with its number of variants a constant: none, or its own (er__epi_plan: 2, or 4 for gelu's
     * tanh form and silu) */
    case ER_STAGE_EXP: ER_EPI_FN(ER_STAGE_EXP, 2); break;
    case ER_STAGE_TANH: ER_EPI_FN(ER_STAGE_TANH, 2); break;
    case ER_STAGE_SIGMOID: ER_EPI_FN(ER_STAGE_SIGMOID, 2); break;
    case ER_STAGE_SILU: ER_EPI_FN(ER_STAGE_SILU, 4); break;
    default: ER_EPI_FN(ER_STAGE_GELU_TANH, 4); break;
    }
#undef ER_EPI_FN
}

/* The classes as er_chain_fast_class gives them: exact where the bracket rounds to y alone (the exact result
 * correctly rounded, which every chain's set holds; no witness needed, and the set's hull is [y, y]). Else the
 * witnesses rounded to the output: y the first's rounding (f1), or between the two's (f2), or between the least and
 * the greatest of them and their nvar variants at both ends (f4: where every variant is formed: the per-element
 * decision skips one it cannot form, this pass leaves such an element to it); y is then covered where the bracket
 * rounds to another value alone or y lies outside its rounding. nb 0: the bracket alone (exact or open). rel[i]: a
 * covered element's hull's er_set_rel, as the per-element decision's (-1 for one value). */
ER_ALWAYS_INLINE void er_epi_classes_body(const er_epi *p, int narrow, int nvar, int nb, int64_t m,
                                          er_epi_scratch *restrict s, uint8_t *restrict dec) {
    er_vec_fmt o = p->o;
    for (int64_t i = 0; i < m; i++) {
        double y = s->y[i], o1 = er_vec_rn_fmt(s->w[0][i], o, narrow),
               o2 = nb == 2 ? er_vec_rn_fmt(s->w[1][i], o, narrow) : o1, ra = er_vec_rn_fmt(s->lo[i], o, narrow),
               rb = er_vec_rn_fmt(s->hi[i], o, narrow);
        int64_t g1 = nb ? (s->okw[0][i] != 0) & er_vec_rn_ok(s->w[0][i], o1, o, narrow) : 0,
                g2 = nb == 2 ? (s->okw[1][i] != 0) & er_vec_rn_ok(s->w[1][i], o2, o, narrow) : 0,
                ge = (s->oke[i] != 0) & er_vec_rn_ok(s->lo[i], ra, o, narrow) & er_vec_rn_ok(s->hi[i], rb, o, narrow) &
                     (fabs(y) <= DBL_MAX);
        double wl = o1 < o2 ? o1 : o2, wh = o1 < o2 ? o2 : o1, vl = wl, vh = wh;
        int64_t gv = nvar > 0;
#define ER_EPI_VARIANT(q)                                                                                             \
    do {                                                                                                              \
        double ov = er_vec_rn_fmt(s->w[q][i], o, narrow);                                                             \
        gv &= (s->okw[q][i] != 0) & er_vec_rn_ok(s->w[q][i], ov, o, narrow);                                         \
        vl = ov < vl ? ov : vl;                                                                                       \
        vh = ov > vh ? ov : vh;                                                                                       \
    } while (0)
        if (nvar >= 2) { /* (written out: nvar is a constant of each copy, and the loop vectorises) */
            ER_EPI_VARIANT(2);
            ER_EPI_VARIANT(3);
            ER_EPI_VARIANT(4);
            ER_EPI_VARIANT(5);
        }
        if (nvar == 4) {
            ER_EPI_VARIANT(6);
            ER_EPI_VARIANT(7);
            ER_EPI_VARIANT(8);
            ER_EPI_VARIANT(9);
        }
#undef ER_EPI_VARIANT
        /* (the first witness alone: f1 or left open, the second witness's tests not taken) */
        int64_t one = ra == rb, f1 = g1 & (y == o1), f2 = g1 & g2 & (y >= wl) & (y <= wh),
                f4 = g1 & g2 & gv & (y >= vl) & (y <= vh);
        /* exact (0), covered (1) or open (255), without a branch */
        int64_t exact = ge & one & (y == ra), covered = ge & (f1 | f2 | f4) & ((one & (y != ra)) | (y < ra) | (y > rb));
        dec[i] = (uint8_t)(255 - 255 * exact - 254 * covered);
        /* er_set_rel of a covered element's hull, without its branch: [wl, wh] (f2), [vl, vh] (f4 alone); none
         * where y is the first witness's rounding (f1), nor on the first witness alone (what it decides, it decides
         * by f1) */
        double hl = f2 ? wl : vl, hh = f2 ? wh : vh, al = fabs(hl), ah = fabs(hh), mx = al > ah ? al : ah;
        double rel = nb == 2 ? (hh - hl) / (mx > 0 ? mx : 1.0) : -1.0;
        s->rel[i] = (covered & !f1 & (hl < hh) & (mx > 0) & (rel <= DBL_MAX)) ? rel : -1.0;
    }
}

#define ER_EPI_CLASSES(nv, nb)                                                                                        \
    do {                                                                                                              \
        if (p->o.narrow) er_epi_classes_body(p, 1, nv, nb, m, s, dec);                                                \
        else er_epi_classes_body(p, 0, nv, nb, m, s, dec);                                                            \
    } while (0)
#define ER_EPI_ARGS                                                                                                   \
    const er_epi *p, int j, int nv, int nb, int64_t m, er_epi_scratch *restrict s, uint8_t *restrict dec
#define ER_EPI_BODY                                                                                                   \
    {                                                                                                                 \
        if (j < p->ns) er_epi_stage_body(p, j, nv, nb, m, s);                                                         \
        else if (nv == 4) ER_EPI_CLASSES(4, 2);                                                                       \
        else if (nv == 2) ER_EPI_CLASSES(2, 2);                                                                       \
        else if (nb == 2) ER_EPI_CLASSES(0, 2);                                                                       \
        else if (nb == 1) ER_EPI_CLASSES(0, 1);                                                                       \
        else ER_EPI_CLASSES(0, 0);                                                                                    \
    }
ER_ALWAYS_INLINE void er_epi_step_any(ER_EPI_ARGS) ER_EPI_BODY
ER_SIMD_BUILDS(er_epi_step, (ER_EPI_ARGS), (p, j, nv, nb, m, s, dec), er_epi_step_any)

/* The stages and the classes over the scratch's m elements (their inner values, bracket and output set), on nb
 * witnesses (1: the one from l alone; 2: both) with nv variants; the operands of element k at begin + ix[k] (ix NULL:
 * at begin + k). */
static void er_epi_run(const er_epi *p, int nv, int nb, int64_t begin, const int32_t *ix, int64_t m,
                       er_epi_scratch *s, uint8_t *dec) {
    for (int64_t i = 0; i < m; i++) { /* the inner values, of fp32: the witnesses' start */
        s->w[0][i] = (float)s->wl[i];
        s->w[1][i] = (float)s->wh[i];
        s->okw[0][i] = s->okw[1][i] = s->oke[i] = s->okc[i];
    }
    /* gathered elements' operands: from one run over their span where they are at least a quarter of it (the runs'
     * values are the cursor's and the loads' own), else element by element */
    int64_t at = ix ? ix[0] : 0, span = ix && m ? ix[m - 1] - at + 1 : m;
    int whole = !ix || span <= 4 * m;
    for (int j = 0; j <= p->ns; j++) { /* each stage, then the classes */
        const er_tensor *t = j < p->ns ? p->st[j].t : NULL;
        const er_op_module *rm = j < p->ns ? p->rmod[j] : NULL;
        if (t && whole) er__load_run(p->simd, t, begin + at, span, s->op);
        for (int64_t k = 0; t && ix && whole && k < m; k++) s->op[k] = s->op[ix[k] - at]; /* (ix[k] - at >= k) */
        for (int64_t k = 0; t && !whole && k < m; k++) s->op[k] = er__load(t, er__offset(t, begin + ix[k]));
        if (rm && whole) er__cursor_inner_run(rm, p->rcur[j], begin + at, span, s->rl, s->rh, s->rbl, s->rbh, s->okr);
        for (int64_t k = 0; rm && ix && whole && k < m; k++) {
            int64_t i = ix[k] - at;
            s->rl[k] = s->rl[i];
            s->rh[k] = s->rh[i];
            s->rbl[k] = s->rbl[i];
            s->rbh[k] = s->rbh[i];
            s->okr[k] = s->okr[i];
        }
        for (int64_t k = 0; rm && !whole && k < m; k++)
            s->okr[k] = (uint8_t)rm->cursor_inner(p->rcur[j], begin + ix[k], 0, &s->rl[k], &s->rh[k], &s->rbl[k],
                                                  &s->rbh[k]);
        er_epi_step(p->simd, p, j, nv, nb, m, s, dec);
    }
}

/* The widest hull decided among elements k < m (at begin + ix[k], or begin + k, increasing in k; the least index
 * among equals): the largest rel first (a loop that vectorises), then its first element. */
static void er_epi_widest(const er_epi_scratch *s, int64_t begin, const int32_t *ix, int64_t m, double *wrel,
                          int64_t *widx) {
    double mx = -1;
    for (int64_t k = 0; k < m; k++) mx = s->rel[k] > mx ? s->rel[k] : mx;
    if (mx < 0 || mx < *wrel) return;
    int64_t k = 0;
    while (s->rel[k] != mx) k++;
    int64_t idx = begin + (ix ? ix[k] : k);
    if (mx > *wrel || idx < *widx) {
        *wrel = mx;
        *widx = idx;
    }
}

/* The elements k < m that dec leaves open gathered in place (their index in the chunk into s->ix: k itself in the
 * first run, else s->ix[k]; their inner values, the base's bracket and output), and their count. */
static int64_t er_epi_gather(er_epi_scratch *s, const uint8_t *dec, int64_t m, int first) {
    int64_t n = 0;
    for (int64_t i = 0; i < m; i++)
        if (dec[i] == ER_VEC_OPEN) {
            s->ix[n] = first ? (int32_t)i : s->ix[i];
            s->wl[n] = s->wl[i];
            s->wh[n] = s->wh[i];
            s->lo[n] = s->blo[n] = s->blo[i];
            s->hi[n] = s->bhi[n] = s->bhi[i];
            s->okc[n] = s->okc[i];
            s->y[n++] = s->y[i];
        }
    return n;
}

void er__epi_decide(const er_epi *p, const er_op_module *mod, void *cur, int64_t begin, int64_t end,
                    er_epi_scratch *s, uint8_t *dec, double *wrel, int64_t *widx) {
    int64_t m = end - begin;
    er__cursor_inner_run(mod, cur, begin, m, s->wl, s->wh, s->blo, s->bhi, s->okc);
    er__load_run(p->simd, p->out, begin, m, s->y);
    memcpy(s->lo, s->blo, sizeof(double) * (size_t)m);
    memcpy(s->hi, s->bhi, sizeof(double) * (size_t)m);
    /* Run 0, the bracket alone: the outputs it rounds to alone are exact, and most outputs of a kernel are the exact
     * result correctly rounded. Run 1, the elements left open (gathered) on the witness from l alone, where most
     * outputs are its rounding (f1); run 2, those left open on both witnesses; run 3, those left open with the
     * variants, which few elements need. A run decides an element as one run with both witnesses and the variants
     * would (the witnesses and the bracket are the same values in each run; an exact element's hull is [y, y], and
     * where y is the first witness's rounding the class is the bracket's and the hull is no set's, -1). Runs 0 and 1
     * save a function's witnesses, which cost most; without a function stage the pass starts at run 2. Where run 0
     * left more than a quarter of its chunk open (a kernel whose outputs are seldom correctly rounded), the thread's
     * next chunks skip it, and where run 1 did (SwiGLU's outputs, say), they skip it too; each is tried again every
     * 16th chunk. The order changes the cost, not the classes. */
    int again = s->runs++ % 16 == 0;
    int first = p->fn < 0 ? 2 : !s->skip[0] || again ? 0 : !s->skip[1] || again ? 1 : 2;
    int64_t n = m;
    uint8_t *d = NULL; /* the last run's classes (NULL: no run yet) */
    for (int run = first; run < (p->nvar ? 4 : 3); run++) {
        if (d && !(n = er_epi_gather(s, d, n, d == dec))) {
            if (run <= 2) s->skip[run - 1] = 0;
            return;
        }
        if (d && run <= 2) s->skip[run - 1] = n > m / 4;
        uint8_t *out = d ? s->dec2 : dec;
        er_epi_run(p, run == 3 ? p->nvar : 0, run < 2 ? run : 2, begin, d ? s->ix : NULL, n, s, out);
        er_epi_widest(s, begin, d ? s->ix : NULL, n, wrel, widx);
        for (int64_t k = 0; d && k < n; k++) dec[s->ix[k]] = s->dec2[k];
        d = out;
    }
}
