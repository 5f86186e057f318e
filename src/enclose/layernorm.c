/* layernorm.c: the sets of a layernorm row (docs/algorithms/layernorm.md).
 *
 * The model: the statistics (mean m and variance v) come from one of two algorithms, each rounded in F:
 *  - two_pass: m = S/n with S = sum x_j in any order; Q = sum fl(x_j - m)^2 in any order (products rounded or
 *    fused); v = Q/n (Theorem L2).
 *  - welford: Welford updates and Chan combines in any tree; v = M2/n (Theorems L3 and L4).
 * Each division by n is fl(q / n) or fl(q * fl(1/n)). Then r = rsqrt(fl(v + eps)) within U ulps, and
 * y_i = g(fl(x_i - m), r, w_i, b_i) by one of four compositions (Theorem L5), each monotone in m and in r, so
 * y_i's set is spanned by the four corners of the box m in [m_lo, m_hi], r in [r_lo, r_hi]. The exact results
 * come from the exact sums S and sum x_j^2 (MPFR, exact at the row's precision). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include "format/format.h"
#include "format/vecround.h"
#include "enclose/ival.h"
#include "enclose/layernorm.h"
#include "enclose/rmsnorm.h"
#include "core/lnsums.h"

enum { LN_Y = 0, LN_MEAN = 1, LN_RSTD = 2 };

/* Theorems L3, L4, L6 to L8 evaluated in doubles (layernorm.md, Evaluating Welford's bounds): each row's part from
 * the constants of er__welford_k_init, every operation rounded to nearest and moved one double up (Lemma D0 of
 * double-bounds.md); every operand an upper bound and every formula nondecreasing in it, but for the divisor 1 - D b,
 * a lower bound. */
static inline double er_wk_div_up(double a, double b) { return er__next_up(a / b); }
static inline double er_wk_sqrt_up(double a) { return er__next_up(sqrt(a)); }

void er__welford_k_init(er_welford_k *k, const er_fmt_info *F, int64_t n, int64_t depth, int64_t cdepth) {
    int p = F->p;
    memset(k, 0, sizeof *k);
    k->n = n;
    k->dd = depth > 0 && depth < n - 1 ? depth : 0;
    if (n < 1 || n >= (INT64_C(1) << (p - 1))) return; /* no bound: counts not exact in F */
    int64_t H1 = (k->dd ? k->dd : n - 1) - 1;           /* levels of non-root inner nodes (Theorem L8) */
    int64_t C1 = cdepth > 0 && cdepth < H1 ? cdepth : H1;
    k->H1 = H1 < 0 ? 0 : H1;
    k->C1 = C1 < 0 ? 0 : C1;
    for (int64_t v = n; v; v >>= 1) k->bl++;
    mpfr_t u, g, D, b, t, m;
    mpfr_inits2(128, u, g, D, b, t, m, (mpfr_ptr)0);
    mpfr_set_ui_2exp(u, 1, (mpfr_exp_t)-p, MPFR_RNDN);
    k->u = mpfr_get_d(u, MPFR_RNDU);
    k->eta = F->min_sub;
    mpfr_add_ui(t, u, 1, MPFR_RNDU);
    k->u1 = mpfr_get_d(t, MPFR_RNDU);
    /* gamma_k = (1 + u)^k - 1 rounded up: gamma_3, gamma_4, gamma_7 and G (each correction rounds at most twice per
     * ancestor) */
    double *gs[4] = { &k->g3, &k->g4, &k->g7, &k->G };
    unsigned long ks[4] = { 3, 4, 7, 2 * (unsigned long)(k->dd ? k->dd : n) };
    for (int i = 0; i < 4; i++) {
        mpfr_set_ui_2exp(g, 1, (mpfr_exp_t)-p, MPFR_RNDU);
        mpfr_add_ui(g, g, 1, MPFR_RNDU);
        mpfr_pow_ui(g, g, ks[i], MPFR_RNDU);
        mpfr_sub_ui(g, g, 1, MPFR_RNDU);
        *gs[i] = mpfr_get_d(g, MPFR_RNDU);
        if (i == 0) mpfr_set(b, g, MPFR_RNDU); /* gamma_3, for b */
        if (i == 1) mpfr_set(t, g, MPFR_RNDU); /* gamma_4 */
    }
    mpfr_set_d(g, k->G, MPFR_RNDU);
    mpfr_add_ui(g, g, 1, MPFR_RNDU);
    k->G1 = mpfr_get_d(g, MPFR_RNDU);
    /* b = max(2 (1 + u) gamma_3 + u, gamma_4) (Theorem L3) */
    mpfr_mul_2ui(b, b, 1, MPFR_RNDU);
    mpfr_add_ui(g, u, 1, MPFR_RNDU);
    mpfr_mul(b, b, g, MPFR_RNDU);
    mpfr_add(b, b, u, MPFR_RNDU);
    mpfr_max(b, b, t, MPFR_RNDU);
    k->b = mpfr_get_d(b, MPFR_RNDU);
    /* D = (n(n-1)/2 + n - 1) / n bounds sum_v n_v / n over the inner nodes (Lemma L1), at most the depth */
    mpfr_set_si(D, n, MPFR_RNDN);
    mpfr_mul_si(D, D, n - 1, MPFR_RNDU);
    mpfr_div_2ui(D, D, 1, MPFR_RNDU);
    mpfr_add_si(D, D, n - 1, MPFR_RNDU);
    mpfr_div_si(D, D, n, MPFR_RNDU);
    if (k->dd && mpfr_cmp_si(D, k->dd) > 0) mpfr_set_si(D, k->dd, MPFR_RNDU);
    k->D = mpfr_get_d(D, MPFR_RNDU);
    /* 1 - D b rounded down (kappa's denominator) */
    mpfr_mul(t, D, b, MPFR_RNDU);
    mpfr_ui_sub(t, 1, t, MPFR_RNDD);
    k->t0 = mpfr_get_d(t, MPFR_RNDD);
    /* Mt = (n/2) bitlen(n) + n >= sum_v max(m_v, 1) (Lemma L1), and its square root */
    mpfr_set_si(m, n, MPFR_RNDN);
    mpfr_mul_si(m, m, k->bl, MPFR_RNDU);
    mpfr_div_2ui(m, m, 1, MPFR_RNDU);
    mpfr_add_si(m, m, n, MPFR_RNDU);
    k->Mt = mpfr_get_d(m, MPFR_RNDU);
    mpfr_sqrt(t, m, MPFR_RNDU);
    k->sqMt = mpfr_get_d(t, MPFR_RNDU);
    /* Theorem L4's n(n - 1) + (n/2) bitlen(n) + 2n */
    mpfr_set_si(t, n, MPFR_RNDN);
    mpfr_mul_si(t, t, n - 1, MPFR_RNDU);
    mpfr_add(t, t, m, MPFR_RNDU);
    mpfr_add_si(t, t, n, MPFR_RNDU);
    k->f4 = mpfr_get_d(t, MPFR_RNDU);
    /* Theorem L7's sqrt(2 (n + 2) (n(n - 1) + n bitlen(n) + 3(n - 1))) */
    mpfr_set_si(t, n, MPFR_RNDN);
    mpfr_mul_si(t, t, n - 1, MPFR_RNDU);
    mpfr_set_si(g, n, MPFR_RNDN);
    mpfr_mul_si(g, g, k->bl, MPFR_RNDU);
    mpfr_add(t, t, g, MPFR_RNDU);
    mpfr_add_si(t, t, 3 * (n - 1), MPFR_RNDU);
    mpfr_mul_si(t, t, 2 * (n + 2), MPFR_RNDU);
    mpfr_sqrt(t, t, MPFR_RNDU);
    k->f7 = mpfr_get_d(t, MPFR_RNDU);
    mpfr_clears(u, g, D, b, t, m, (mpfr_ptr)0);
    k->ok = k->t0 > 0;
}

void er__welford_bounds(const er_welford_k *k, double A, double X, double R, double Thi, double *EM, double *ES) {
    if (!k->ok) {
        *EM = *ES = INFINITY;
        return;
    }
    double n = (double)k->n, u = k->u, u1 = k->u1, eta = k->eta, g3 = k->g3, t0 = k->t0;
    /* Theorem L3: a = max((1 + u)(gamma_3 R + eta/2) + u X, gamma_4 X + (1 + u) eta), E = D a / (1 - D b) */
    double a = er__add_up(er__mul_up(er__add_up(er__mul_up(g3, R), er__mul_up(0.5, eta)), u1), er__mul_up(u, X));
    a = fmax(a, er__add_up(er__mul_up(k->g4, X), er__mul_up(u1, eta)));
    double E = er_wk_div_up(er__mul_up(k->D, a), t0);
    *EM = E;
    /* Theorem L4's second-order part: Mt (4 E^2 + gamma_7 (R + 2E)^2) */
    double E2 = er__add_up(E, E), r2e = er__add_up(E2, R);
    double B = er__mul_up(er__add_up(4.0 * er__mul_up(E, E), er__mul_up(k->g7, er__mul_up(r2e, r2e))), k->Mt);
    /* the first-order part: Theorem L4's 2 R kappa a (n(n-1) + (n/2) bitlen(n) + 2n), at depth (Theorem L6)
     * 4 R kappa a D Mt; Theorem L7's sqrt(T) kappa a f7, at depth sqrt(T) 4 kappa a D sqrt(Mt): the least */
    double ka = er_wk_div_up(a, t0), kad = er_wk_div_up(er__mul_up(a, k->D), t0), rt = er_wk_sqrt_up(Thi);
    double F1 = er__mul_up(er__mul_up(k->f4, ka), 2.0 * R);
    F1 = fmin(F1, er__mul_up(er__mul_up(k->f7, ka), rt));
    if (k->dd) {
        F1 = fmin(F1, er__mul_up(er__mul_up(kad, 4.0 * R), k->Mt));
        F1 = fmin(F1, er__mul_up(er__mul_up(4.0 * kad, k->sqMt), rt));
    }
    /* Theorem L8: alpha = u (A + E) + (1 + u) eta / 2, beta = (1 + u) gamma_3 (R + 2E), L_c = a + b E;
     * F8 = 2 [(alpha H1 + L_c C1) sqrt(n T) + u H1 T + beta sqrt(0.645 n H1 T)]
     *      + sqrt(2 (n - 1) T) (alpha + u R + beta / 2) */
    double H1 = (double)k->H1, C1 = (double)k->C1;
    double al = er__add_up(er__mul_up(er__add_up(A, E), u), er__mul_up(0.5, er__mul_up(u1, eta)));
    double be = er__mul_up(er__mul_up(r2e, g3), u1), lc = er__add_up(er__mul_up(k->b, E), a);
    double s = er__mul_up(er__add_up(er__mul_up(al, H1), er__mul_up(lc, C1)), er_wk_sqrt_up(er__mul_up(n, Thi)));
    s = er__add_up(s, er__mul_up(er__mul_up(u, Thi), H1));
    s = er__add_up(s, er__mul_up(er_wk_sqrt_up(er__mul_up(er__mul_up(er__mul_up(Thi, n), H1), 0.645)), be));
    s = 2.0 * s;
    double r8 = er__add_up(er__add_up(er__mul_up(u, R), al), er__mul_up(0.5, be));
    s = er__add_up(s, er__mul_up(er_wk_sqrt_up(er__mul_up(Thi, 2.0 * (k->n > 1 ? n - 1 : 1))), r8));
    F1 = fmin(F1, s);
    /* and its second-order part: 4 E^2 Mt + gamma_7 (sqrt(T) + 2 E sqrt(Mt))^2 */
    double q = er__add_up(2.0 * er__mul_up(k->sqMt, E), rt);
    B = fmin(B, er__add_up(er__mul_up(4.0 * er__mul_up(E, E), k->Mt), er__mul_up(er__mul_up(q, q), k->g7)));
    /* E_S = (1 + G)(first + second order + (n - 1)(n + 2) eta) + G T */
    B = er__add_up(er__add_up(B, F1), er__mul_up(er__mul_up(eta, n - 1), n + 2));
    *ES = er__add_up(er__mul_up(B, k->G1), er__mul_up(k->G, Thi));
}

/* The four compositions of y from m, r, w, b in F (Theorem L5); *nan when one of them is NaN. */
static void er_ln_compose(const er_fmt_info *F, double x, double m, double r, double w, double b, double out[4]) {
    double d = er__round_sum(F, x, -m, ER_ROUND_NEAREST);
    double t = er__round_prod(F, d, r, 1, ER_ROUND_NEAREST);
    double s = er__round_prod(F, r, w, 1, ER_ROUND_NEAREST);
    out[0] = er__round_sum(F, er__round_prod(F, t, w, 1, ER_ROUND_NEAREST), b, ER_ROUND_NEAREST);
    out[1] = er__round_fma(F, t, w, b, 1, ER_ROUND_NEAREST);
    out[2] = er__round_sum(F, er__round_prod(F, d, s, 1, ER_ROUND_NEAREST), b, ER_ROUND_NEAREST);
    out[3] = er__round_fma(F, d, s, b, 1, ER_ROUND_NEAREST);
}

/* y's sets for F = fp32 with every operand a float, as intervals (er_ln_out's lo, hi): the four compositions of
 * Theorem L5 at the four corners of the box as the hardware's float operations (single roundings, no contraction;
 * fmaf is IEEE's fused operation); without weight and bias all four are fl(fl(x - m) r), and as fl(x - m) falls
 * while m rises and r > 0, the lowest is at m_hi and the highest at m_lo, each at one end of r. lo NaN where a
 * composition is NaN. Vectorised (core/internal.h); devln.cu's er_ln_element computes the same values. */
#define ER_LN_CORNER(m, r)                                                                                            \
    do {                                                                                                              \
        float d = xf - (m), t = d * (r), s = (r) * wf, tw = t * wf, ds = d * s;                                       \
        float v0 = tw + bf, v1 = fmaf(t, wf, bf), v2 = ds + bf, v3 = fmaf(d, s, bf);                                  \
        bad |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3);                                                     \
        l = v0 < l ? v0 : l;                                                                                          \
        l = v1 < l ? v1 : l;                                                                                          \
        l = v2 < l ? v2 : l;                                                                                          \
        l = v3 < l ? v3 : l;                                                                                          \
        h = v0 > h ? v0 : h;                                                                                          \
        h = v1 > h ? v1 : h;                                                                                          \
        h = v2 > h ? v2 : h;                                                                                          \
        h = v3 > h ? v3 : h;                                                                                          \
    } while (0)
ER_ALWAYS_INLINE void er_ln_y_f32_body(int64_t n, const double *restrict x, const double *restrict w,
                                       const double *restrict b, int plain, float m0, float m1, float r0, float r1,
                                       double *restrict lo, double *restrict hi) {
    for (int64_t i = 0; i < n; i++) {
        float xf = (float)x[i], l, h;
        int bad;
        if (plain) {
            float d0 = xf - m0, d1 = xf - m1, t0 = d0 * r0, t1 = d0 * r1, t2 = d1 * r0, t3 = d1 * r1;
            bad = (t0 != t0) | (t1 != t1) | (t2 != t2) | (t3 != t3);
            l = t2 < t3 ? t2 : t3;
            h = t0 > t1 ? t0 : t1;
        } else {
            float wf = w ? (float)w[i] : 1.0f, bf = b ? (float)b[i] : 0.0f;
            bad = 0;
            l = INFINITY;
            h = -INFINITY;
            ER_LN_CORNER(m0, r0);
            ER_LN_CORNER(m0, r1);
            ER_LN_CORNER(m1, r0);
            ER_LN_CORNER(m1, r1);
        }
        lo[i] = bad ? NAN : (double)l;
        hi[i] = (double)h;
    }
}
#define ER_LN_Y_ARGS                                                                                                  \
    int64_t n, const double *restrict x, const double *restrict w, const double *restrict b, float m0, float m1,      \
        float r0, float r1, double *restrict lo, double *restrict hi
#define ER_LN_Y_CALLS                                                                                                 \
    if (!w && !b) er_ln_y_f32_body(n, x, w, b, 1, m0, m1, r0, r1, lo, hi);                                            \
    else if (w && b) er_ln_y_f32_body(n, x, w, b, 0, m0, m1, r0, r1, lo, hi);                                         \
    else if (w) er_ln_y_f32_body(n, x, w, NULL, 0, m0, m1, r0, r1, lo, hi);                                           \
    else er_ln_y_f32_body(n, x, NULL, b, 0, m0, m1, r0, r1, lo, hi)
ER_ALWAYS_INLINE void er_ln_y_f32_any(ER_LN_Y_ARGS) { ER_LN_Y_CALLS; }
ER_SIMD_BUILDS(er_ln_y_f32_run, (ER_LN_Y_ARGS), (n, x, w, b, m0, m1, r0, r1, lo, hi), er_ln_y_f32_any)

/* A row's exact quantities as doubles, each the real rounded once, from the row's integer sums (er_ln_dsums_of):
 * S = sum x_j, the mean mu = S/n and T = sum (x_j - mu)^2 rounded down ([0]) and up ([1]); A = sum |x_j| and |mu|
 * rounded up. */
typedef struct er_ln_dsums {
    double S[2], M[2], T[2], V[2], A, Ma; /* V: T/n rounded down and up */
} er_ln_dsums;

/* The exact row: S = sum x, A = sum |x| and num = n sum x^2 - S^2 = n T, all exact; then enclosures at a precision.
 * dok: d holds the row's quantities as doubles (the row's sums were integers and each rounding fell in double's
 * normal range). */
typedef struct er_ln_exact {
    mpfr_t S, A, num;
    int64_t n;
    double eps;
    er_ln_dsums d;
    int dok;
} er_ln_exact;

/* ---- the row's quantities in integers and doubles (layernorm.md, The box in doubles) ---- */

/* A nonnegative integer of 256 bits: four 64-bit limbs, the least significant first. */
typedef struct er_ln_u256 {
    uint64_t w[4];
} er_ln_u256;

static int er_u256_bitlen(const er_ln_u256 *a) {
    for (int i = 3; i >= 0; i--)
        if (a->w[i]) return 64 * i + 64 - __builtin_clzll(a->w[i]);
    return 0;
}

/* a 2^k, 0 <= k < 256 (the bits shifted beyond 2^256 are lost: the callers' values stay below) */
static er_ln_u256 er_u256_shl(const er_ln_u256 *a, int k) {
    er_ln_u256 r = {{0, 0, 0, 0}};
    int q = k / 64, b = k % 64;
    for (int i = 3; i >= q; i--) {
        uint64_t v = a->w[i - q] << b;
        if (b && i - q >= 1) v |= a->w[i - q - 1] >> (64 - b);
        r.w[i] = v;
    }
    return r;
}

/* a / d into a (truncated), 1 <= d: the remainder (each step divides a 128-bit value below d 2^64 by d, so its
 * quotient is a limb) */
static uint64_t er_u256_divmod(er_ln_u256 *a, uint64_t d) {
    er_ln_u128 rem = 0;
    for (int i = 3; i >= 0; i--) {
        er_ln_u128 cur = (rem << 64) | a->w[i];
        a->w[i] = (uint64_t)(cur / d);
        rem = cur % d;
    }
    return (uint64_t)rem;
}

/* floor(a / 2^s) for a < 2^(s + 64), 0 <= s < 256; *sticky: whether a's bits below 2^s are not all zero */
static uint64_t er_u256_shr(const er_ln_u256 *a, int s, int *sticky) {
    int q = s / 64, b = s % 64, st = b && (a->w[q] & ((UINT64_C(1) << b) - 1));
    uint64_t v = a->w[q] >> b;
    if (b && q < 3) v |= a->w[q + 1] << (64 - b);
    for (int i = 0; i < q; i++) st |= a->w[i] != 0;
    *sticky = st;
    return v;
}

/* a b, a < 2^128 and b < 2^128 */
static er_ln_u256 er_u256_mul(er_ln_u128 a, er_ln_u128 b) {
    const uint64_t x[2] = {(uint64_t)a, (uint64_t)(a >> 64)}, y[2] = {(uint64_t)b, (uint64_t)(b >> 64)};
    er_ln_u256 r = {{0, 0, 0, 0}};
    for (int i = 0; i < 2; i++) {
        er_ln_u128 carry = 0;
        for (int j = 0; j < 2; j++) {
            er_ln_u128 t = (er_ln_u128)x[i] * y[j] + r.w[i + j] + carry;
            r.w[i + j] = (uint64_t)t;
            carry = t >> 64;
        }
        r.w[i + 2] = (uint64_t)carry;
    }
    return r;
}

/* a - b into a; 0 where b > a (a left as the wrapped difference) */
static int er_u256_sub(er_ln_u256 *a, const er_ln_u256 *b) {
    unsigned borrow = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t x = a->w[i], y = b->w[i], d = x - y - borrow;
        borrow = x < y || (x == y && borrow);
        a->w[i] = d;
    }
    return !borrow;
}

/* N 2^e / d rounded to a double toward zero (up = 0) or away from zero (up = 1), exactly (layernorm.md, Lemma L10):
 * N < 2^192, 1 <= d < 2^64. 0 where the result is neither 0 nor a normal double (left to MPFR). */
static int er_ln_qround(er_ln_u256 N, uint64_t d, long e, int up, double *r) {
    int L = er_u256_bitlen(&N);
    if (L == 0) { *r = 0.0; return 1; }
    int bd = 64 - __builtin_clzll(d), k = bd + 55 - L; /* N 2^k of at least bitlen(d) + 55 bits */
    if (k < 0) k = 0;
    N = er_u256_shl(&N, k);
    int st = er_u256_divmod(&N, d) != 0, low;            /* the quotient q >= 2^54: 55 bits or more */
    int sh = er_u256_bitlen(&N) - 53;
    uint64_t m = er_u256_shr(&N, sh, &low);               /* q's leading 53 bits */
    m += (uint64_t)(up && (st | low));                    /* 2^53 at most: a double */
    long E = (long)sh + e - k;                            /* the result m 2^E, m in [2^52, 2^53] */
    if (E < -1074 || E > 970) return 0;
    *r = ldexp((double)m, (int)E);
    return 1;
}

/* The signed S (two's complement) over d, times 2^e, rounded down (up = 0) or up (up = 1). */
static int er_ln_qround_signed(er_ln_u128 S, uint64_t d, long e, int up, double *r) {
    int neg = (int)(S >> 127);
    er_ln_u128 a = neg ? -S : S;
    er_ln_u256 N = {{(uint64_t)a, (uint64_t)(a >> 64), 0, 0}};
    int ok = er_ln_qround(N, d, e, neg ? !up : up, r);
    if (neg) *r = -*r;
    return ok;
}

/* The row's quantities as doubles from its integer sums (s->fits, n < 2^32): 0 where one falls outside double's
 * normal range or n T = n Q - S^2 came out negative (never). */
static int er_ln_dsums_of(const er_ln_sums *s, int64_t n, er_ln_dsums *d) {
    er_ln_u128 S = ((er_ln_u128)s->s_hi << 64) | s->s_lo, Q = ((er_ln_u128)s->q_hi << 64) | s->q_lo,
               A = ((er_ln_u128)s->a_hi << 64) | s->a_lo;
    if (n < 1 || n >= (INT64_C(1) << 32)) return 0;
    er_ln_u128 Sa = (S >> 127) ? -S : S;
    er_ln_u256 num = er_u256_mul(Q, (er_ln_u128)(uint64_t)n), s2 = er_u256_mul(Sa, Sa);
    er_ln_u256 Au = {{(uint64_t)A, (uint64_t)(A >> 64), 0, 0}}, Su = {{(uint64_t)Sa, (uint64_t)(Sa >> 64), 0, 0}};
    long l = s->lsb;
    int ok = er_u256_sub(&num, &s2);                                    /* n T in units of 2^(2 lsb) */
    for (int up = 0; up < 2 && ok; up++) {
        ok = er_ln_qround_signed(S, 1, l, up, &d->S[up]) && er_ln_qround_signed(S, (uint64_t)n, l, up, &d->M[up]) &&
             er_ln_qround(num, (uint64_t)n, 2 * l, up, &d->T[up]) &&
             er_ln_qround(num, (uint64_t)n * (uint64_t)n, 2 * l, up, &d->V[up]);
    }
    return ok && er_ln_qround(Au, 1, l, 1, &d->A) && er_ln_qround(Su, (uint64_t)n, l, 1, &d->Ma);
}

/* The doubles below and above the exact mean and rstd = 1/sqrt(T/n + eps) (layernorm.md, The box in doubles), into
 * e[4]: 0 where T/n + eps's lower end is not positive (left to MPFR). */
static int er_ln_dsums_ends(const er_ln_dsums *d, double eps, double e[4]) {
    double vlo = er__sum_dir(d->V[0], eps, 0), vhi = er__sum_dir(d->V[1], eps, 1);
    if (!(vlo > 0) || !(vhi < INFINITY)) return 0;
    e[0] = d->M[0];
    e[1] = d->M[1];
    double other;
    return er__rsqrt_dirs(vhi, &e[2], &other) && er__rsqrt_dirs(vlo, &other, &e[3]);
}

/* v (a 128-bit integer, signed where sgn) times 2^e into r, exactly (r holds at least the integer's bits). */
static void er_mpfr_set_i128(mpfr_t r, er_ln_u128 v, int sgn, long e, mpfr_t t) {
    int neg = sgn && (v >> 127);
    er_ln_u128 a = neg ? -v : v;
    mpfr_set_ui(t, (unsigned long)(uint64_t)(a >> 64), MPFR_RNDN); /* 64-bit unsigned long (LP64) */
    mpfr_mul_2ui(t, t, 64, MPFR_RNDN);
    mpfr_add_ui(t, t, (unsigned long)(uint64_t)a, MPFR_RNDN);      /* exact: t has 130 bits */
    if (neg) mpfr_neg(t, t, MPFR_RNDN);
    mpfr_mul_2si(r, t, e, MPFR_RNDN);                              /* exact: r spans the row */
}

/* The row's sums as integers (core/lnsums.h) into *s where they fit (s->fits; lsb, the integers); X, xmin and xmax
 * are not read here. */
static void er_ln_sums_of(const double *x, int64_t n, er_ln_sums *s) {
    int lsb = 100000, top = -100000;
    for (int64_t j = 0; j < n; j++) {
        int lo, hi;
        if (!er_ln_bits(x[j], &lo, &hi)) continue;
        if (lo < lsb) lsb = lo;
        if (hi > top) top = hi;
    }
    memset(s, 0, sizeof *s);
    s->fits = (uint8_t)er_ln_fits(lsb, top, n);
    if (!s->fits || top < lsb) return; /* too wide, or all zero */
    er_ln_u128 S = 0, Q = 0, A = 0;
    for (int64_t j = 0; j < n; j++) er_ln_add(x[j], er_ln_units(x[j], lsb), &S, &Q, &A);
    s->lsb = lsb;
    s->s_lo = (uint64_t)S;
    s->s_hi = (uint64_t)(S >> 64);
    s->q_lo = (uint64_t)Q;
    s->q_hi = (uint64_t)(Q >> 64);
    s->a_lo = (uint64_t)A;
    s->a_hi = (uint64_t)(A >> 64);
}

/* num = n Q - S^2 from S and Q (exact: ps and pq bits hold them), then n and eps. */
static void er_ln_exact_num(er_ln_exact *ex, mpfr_t Q, mpfr_t t, mpfr_prec_t ps, mpfr_prec_t pq, int64_t n,
                            double eps) {
    long bl = 0;
    for (int64_t k = n; k; k >>= 1) bl++;
    mpfr_prec_t pn = (pq > 2 * ps ? pq : 2 * ps) + (mpfr_prec_t)bl + 4;
    mpfr_init2(ex->num, pn);
    mpfr_set_prec(t, 2 * ps);
    mpfr_sqr(t, ex->S, MPFR_RNDN);                 /* exact */
    mpfr_mul_si(ex->num, Q, n, MPFR_RNDN);        /* exact */
    mpfr_sub(ex->num, ex->num, t, MPFR_RNDN);     /* exact */
    if (mpfr_sgn(ex->num) < 0) mpfr_set_zero(ex->num, 1); /* never: n sum x^2 >= S^2 */
    ex->n = n;
    ex->eps = eps;
}

/* The exact row from its integer sums (s->fits). */
static void er_ln_exact_from(er_ln_exact *ex, const er_ln_sums *s, int64_t n, double eps) {
    mpfr_t Q, t;
    mpfr_inits2(130, ex->S, ex->A, Q, t, (mpfr_ptr)0);
    er_ln_u128 S = ((er_ln_u128)s->s_hi << 64) | s->s_lo, q = ((er_ln_u128)s->q_hi << 64) | s->q_lo,
               A = ((er_ln_u128)s->a_hi << 64) | s->a_lo;
    er_mpfr_set_i128(ex->S, S, 1, s->lsb, t);
    er_mpfr_set_i128(ex->A, A, 0, s->lsb, t);
    er_mpfr_set_i128(Q, q, 0, 2L * s->lsb, t);
    er_ln_exact_num(ex, Q, t, 130, 130, n, eps);
    mpfr_clears(Q, t, (mpfr_ptr)0);
    ex->dok = er_ln_dsums_of(s, n, &ex->d);
}

static void er_ln_exact_init(er_ln_exact *ex, const double *x, int64_t n, double eps) {
    er_ln_sums s;
    er_ln_sums_of(x, n, &s);
    if (s.fits) { er_ln_exact_from(ex, &s, n, eps); return; }
    /* the row's bit span: every double x has its last bit at or above 2^(exponent - 53) */
    long bl = 0, top = -100000, low = 100000;
    for (int64_t k = n; k; k >>= 1) bl++;
    for (int64_t j = 0; j < n; j++) {
        if (x[j] == 0) continue;
        int e;
        frexp(x[j], &e);
        if (e > top) top = e;
        if (e - 53 < low) low = e - 53;
    }
    long span = top > low ? top - low : 1;
    mpfr_prec_t ps = (mpfr_prec_t)(span + bl + 4), pq = (mpfr_prec_t)(2 * span + bl + 4);
    mpfr_t Q, t;
    mpfr_inits2(ps, ex->S, ex->A, (mpfr_ptr)0);
    mpfr_init2(Q, pq);
    mpfr_init2(t, 130);
    mpfr_set_zero(ex->S, 1);
    mpfr_set_zero(ex->A, 1);
    mpfr_set_zero(Q, 1);
    for (int64_t j = 0; j < n; j++) {
        mpfr_add_d(ex->S, ex->S, x[j], MPFR_RNDN);       /* exact: the precision spans the row */
        mpfr_add_d(ex->A, ex->A, fabs(x[j]), MPFR_RNDN); /* exact */
        mpfr_set_d(t, x[j], MPFR_RNDN);
        mpfr_sqr(t, t, MPFR_RNDN);                      /* exact at 106 bits */
        mpfr_add(Q, Q, t, MPFR_RNDN);
    }
    er_ln_exact_num(ex, Q, t, ps, pq, n, eps);
    mpfr_clears(Q, t, (mpfr_ptr)0);
    ex->dok = 0;
}

static void er_ln_exact_clear(er_ln_exact *ex) { mpfr_clears(ex->S, ex->A, ex->num, (mpfr_ptr)0); }

static double er_to_f(const er_fmt_info *F, mpfr_t x, er_round mode);

int er__welford_ms_set(const er_welford_k *k, const er_fmt_info *F, const double *x, int64_t n, int mean_mode,
                       double Udiv, double *lo, double *hi) {
    double X = 0, xmin = INFINITY, xmax = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        if (!isfinite(x[j])) return 0;
        X = fmax(X, fabs(x[j]));
        xmin = fmin(xmin, x[j]);
        xmax = fmax(xmax, x[j]);
    }
    if (n < 1 || (double)n * X > F->max / 4 || 8.0 * (double)n * X * X > F->max / 4) return 0;
    er_ln_exact ex;
    er_ln_exact_init(&ex, x, n, 0.0);
    mpfr_t t, T0, T1;
    mpfr_inits2(128, t, T0, T1, (mpfr_ptr)0);
    mpfr_div_si(T0, ex.num, (long)n, MPFR_RNDD);
    mpfr_div_si(T1, ex.num, (long)n, MPFR_RNDU);
    mpfr_div_si(t, ex.S, (long)n, MPFR_RNDA);
    double EM, ES, R = er__next_up(xmax - xmin);
    er__welford_bounds(k, fabs(mpfr_get_d(t, MPFR_RNDA)), X, R, mpfr_get_d(T1, MPFR_RNDU), &EM, &ES);
    int ok = !(isinf(EM) || isinf(ES));
    if (ok) {
        /* m within EM of the exact mean, M2 within ES of T (values of F, rounded outward) */
        mpfr_div_si(t, ex.S, (long)n, MPFR_RNDD);
        mpfr_sub_d(t, t, EM, MPFR_RNDD);
        double m0 = er_to_f(F, t, ER_ROUND_DOWN);
        mpfr_div_si(t, ex.S, (long)n, MPFR_RNDU);
        mpfr_add_d(t, t, EM, MPFR_RNDU);
        double m1 = er_to_f(F, t, ER_ROUND_UP);
        mpfr_sub_d(t, T0, ES, MPFR_RNDD);
        double s0 = er_to_f(F, t, ER_ROUND_DOWN);
        mpfr_add_d(t, T1, ES, MPFR_RNDU);
        double s1 = er_to_f(F, t, ER_ROUND_UP);
        double v0, v1;
        er__div_n_set(F, s0, s1, n, mean_mode, Udiv, &v0, &v1);
        /* fl(m m) is monotone in |m|; fl(v + m m) in each operand */
        double a0 = m0 <= 0 && m1 >= 0 ? 0.0 : fmin(fabs(m0), fabs(m1)), a1 = fmax(fabs(m0), fabs(m1));
        double q0 = er__round_prod(F, a0, a0, 0, ER_ROUND_NEAREST), q1 = er__round_prod(F, a1, a1, 0, ER_ROUND_NEAREST);
        *lo = er__round_sum(F, v0, q0, ER_ROUND_NEAREST);
        *hi = er__round_sum(F, v1, q1, ER_ROUND_NEAREST);
        ok = isfinite(*lo) && isfinite(*hi);
    }
    mpfr_clears(t, T0, T1, (mpfr_ptr)0);
    er_ln_exact_clear(&ex);
    return ok;
}

/* Enclosures at precision prec: mean [m0, m1], rstd [r0, r1] (r1 = +inf when T/n + eps is 0). */
static void er_ln_stats(const er_ln_exact *ex, mpfr_t m0, mpfr_t m1, mpfr_t r0, mpfr_t r1) {
    long n = (long)ex->n;
    mpfr_div_si(m0, ex->S, n, MPFR_RNDD);
    mpfr_div_si(m1, ex->S, n, MPFR_RNDU);
    /* v = num / n^2 + eps */
    mpfr_div_si(r0, ex->num, n, MPFR_RNDU);
    mpfr_div_si(r0, r0, n, MPFR_RNDU);
    mpfr_add_d(r0, r0, ex->eps, MPFR_RNDU);
    mpfr_div_si(r1, ex->num, n, MPFR_RNDD);
    mpfr_div_si(r1, r1, n, MPFR_RNDD);
    mpfr_add_d(r1, r1, ex->eps, MPFR_RNDD);
    mpfr_rec_sqrt(r0, r0, MPFR_RNDD);
    mpfr_rec_sqrt(r1, r1, MPFR_RNDU); /* +inf at 0 */
}

/* y = (x - m) r w + b over the enclosures, into [y0, y1]; 0 when y is NaN (0 * inf). */
static int er_ln_y(mpfr_t y0, mpfr_t y1, double x, double w, double b, mpfr_t m0, mpfr_t m1, mpfr_t r0, mpfr_t r1,
                   mpfr_t d0, mpfr_t d1) {
    mpfr_d_sub(d0, x, m1, MPFR_RNDD);
    mpfr_d_sub(d1, x, m0, MPFR_RNDU);
    if (mpfr_inf_p(r1) && mpfr_sgn(d0) <= 0 && mpfr_sgn(d1) >= 0) return 0;
    /* d r with r > 0: the ends of d against the ends of r */
    if (mpfr_sgn(d0) >= 0) { mpfr_mul(y0, d0, r0, MPFR_RNDD); mpfr_mul(y1, d1, r1, MPFR_RNDU); }
    else if (mpfr_sgn(d1) <= 0) { mpfr_mul(y0, d0, r1, MPFR_RNDD); mpfr_mul(y1, d1, r0, MPFR_RNDU); }
    else { mpfr_mul(y0, d0, r1, MPFR_RNDD); mpfr_mul(y1, d1, r1, MPFR_RNDU); }
    if (w < 0) { mpfr_swap(y0, y1); mpfr_mul_d(y0, y0, w, MPFR_RNDD); mpfr_mul_d(y1, y1, w, MPFR_RNDU); }
    else { mpfr_mul_d(y0, y0, w, MPFR_RNDD); mpfr_mul_d(y1, y1, w, MPFR_RNDU); }
    mpfr_add_d(y0, y0, b, MPFR_RNDD);
    mpfr_add_d(y1, y1, b, MPFR_RNDU);
    return 1;
}

/* The enclosures [m0, m1] of the mean and [r0, r1] of rstd widened to doubles, into e[4]; 0 where r1 is +inf (left
 * to MPFR). */
static int er_ln_dbl_ends(mpfr_t m0, mpfr_t m1, mpfr_t r0, mpfr_t r1, double e[4]) {
    e[0] = mpfr_get_d(m0, MPFR_RNDD);
    e[1] = mpfr_get_d(m1, MPFR_RNDU);
    e[2] = mpfr_get_d(r0, MPFR_RNDD);
    e[3] = mpfr_get_d(r1, MPFR_RNDU);
    return e[3] < INFINITY && e[2] > 0;
}

/* The exact outputs of a finite row: rounded to double and correctly rounded to each output format. The
 * enclosures tighten with the precision until both ends round alike. */
/* y's exact values in double arithmetic (docs/algorithms/double-bounds.md) for an output format of at most 24
 * bits: the statistics' enclosures [m0, m1], [r0, r1] widened to doubles, then y = (x - m) r w + b with a bound on
 * each side of each operation. An element whose enclosure rounds to one value is done, with exact[i] its midpoint;
 * returns how many (the others' exact and rounded are written too, and replaced by er_ln_exact_outputs). A loop that
 * vectorises for an output of fp32, fp16 or bf16 (er__dn and er__up without a branch where the values are finite; an
 * infinite one rounds to no value of O the loop takes, so its element is not done); narrow = 2: another format,
 * through er__round_double. */
ER_ALWAYS_INLINE int64_t er_ln_dbl_body(int64_t n, const double *restrict x, const double *restrict w,
                                        const double *restrict b, double ml, double mh, double rl, double rh,
                                        er_vec_fmt f, int narrow, const er_fmt_info *O, er_overflow ov,
                                        double *restrict ex, double *restrict rd, char *restrict done) {
    int64_t decided = 0;
    for (int64_t i = 0; i < n; i++) {
        double dl = er__dn_finite(x[i] - mh), dh = er__up_finite(x[i] - ml), yl, yh;
        /* d r over the box, r > 0: the lowest at dl, the highest at dh, each at one end of r (rounding to nearest is
         * monotone, so the rounded products order as the exact ones) */
        double p0 = dl * rl, p1 = dl * rh, p2 = dh * rl, p3 = dh * rh;
        yl = er__dn_finite(p0 < p1 ? p0 : p1);
        yh = er__up_finite(p2 > p3 ? p2 : p3);
        if (w) {
            double wi = w[i], a = wi < 0 ? yh : yl, c = wi < 0 ? yl : yh;
            yl = er__dn_finite(a * wi);
            yh = er__up_finite(c * wi);
        }
        if (b) {
            yl = er__dn_finite(yl + b[i]);
            yh = er__up_finite(yh + b[i]);
        }
        double lo, hi;
        int64_t ok;
        if (narrow == 2) {
            lo = er__round_double(O, yl, ER_ROUND_NEAREST, ov);
            hi = er__round_double(O, yh, ER_ROUND_NEAREST, ov);
            ok = lo == hi;
        } else {
            /* both ends within O's range, rounding alike (written so that GCC 12 vectorises it) */
            lo = er_vec_rn_fmt(yl, f, narrow);
            hi = er_vec_rn_fmt(yh, f, narrow);
            lo = fabs(yl) <= f.maxv ? lo : NAN;
            ok = (lo == hi) & (fabs(yh) <= f.maxv);
        }
        ex[i] = 0.5 * yl + 0.5 * yh;
        rd[i] = lo;
        done[i] = (char)ok;
        decided += ok;
    }
    return decided;
}
#define ER_LN_DBL_ARGS                                                                                                \
    int64_t n, const double *restrict x, const double *restrict w, const double *restrict b, double ml, double mh,    \
        double rl, double rh, er_vec_fmt f, int nw, const er_fmt_info *O, er_overflow ov, double *restrict ex,      \
        double *restrict rd, char *restrict done
#define ER_LN_DBL_CALL(W, B, nw)                                                                                      \
    er_ln_dbl_body(n, x, W, B, ml, mh, rl, rh, f, nw, O, ov, ex, rd, done)
#define ER_LN_DBL_CALLS_NW(nw)                                                                                        \
    return w && b ? ER_LN_DBL_CALL(w, b, nw) : w ? ER_LN_DBL_CALL(w, NULL, nw)                                       \
                                             : b ? ER_LN_DBL_CALL(NULL, b, nw) : ER_LN_DBL_CALL(NULL, NULL, nw)
#define ER_LN_DBL_CALLS                                                                                               \
    if (nw == 2) ER_LN_DBL_CALLS_NW(2);                                                                               \
    if (nw == 1) ER_LN_DBL_CALLS_NW(1);                                                                               \
    ER_LN_DBL_CALLS_NW(0)
ER_ALWAYS_INLINE int64_t er_ln_dbl_any(ER_LN_DBL_ARGS) { ER_LN_DBL_CALLS; }
ER_SIMD_BUILDS_RET(int64_t, er_ln_dbl, (ER_LN_DBL_ARGS), (n, x, w, b, ml, mh, rl, rh, f, nw, O, ov, ex, rd, done),
                   er_ln_dbl_any)
/* The doubles around the exact mean and rstd that the double case takes (the GPU path's too): from the row's
 * doubles where they give them, else the 128-bit enclosures [m0, m1] and [r0, r1] widened; 0 where neither does. */
static int er_ln_ends_of(const er_ln_exact *ex, mpfr_t m0, mpfr_t m1, mpfr_t r0, mpfr_t r1, double e[4]) {
    return (ex->dok && er_ln_dsums_ends(&ex->d, ex->eps, e)) || er_ln_dbl_ends(m0, m1, r0, r1, e);
}

static int64_t er_ln_exact_dbl(const er_layernorm_plan *pl, const er_ln_exact *ex, mpfr_t m0, mpfr_t m1, mpfr_t r0,
                               mpfr_t r1, const double *x, const double *w, const double *b, int64_t n,
                               const er_ln_out *oy, char *done, int simd) {
    double e[4];
    if (!er_ln_ends_of(ex, m0, m1, r0, r1, e)) return 0;
    const er_fmt_info *O = pl->O[LN_Y];
    er_vec_fmt f = er_vec_fmt_of(O);
    int nw = O->id == ER_FP32 ? 0 : O->id == ER_FP16 || O->id == ER_BF16 ? 1 : 2;
    er_overflow ov = pl->ov[LN_Y];
    return er_ln_dbl(simd, n, x, w, b, e[0], e[1], e[2], e[3], f, nw, O, ov, oy->exact, oy->rounded, done);
}

static er_status er_ln_exact_outputs(const er_layernorm_plan *pl, const er_ln_exact *ex, const double *x,
                                     const double *w, const double *b, int64_t n, const er_ln_out out[3], char *done,
                                     int dbl, int simd) {
    /* the row's statistics once per precision; each output at the next precision only while its enclosure's ends
     * round apart (a value within 2^-pr of a midpoint). done: y elements, then mean and rstd, already decided. dbl:
     * y first in double from the 128-bit statistics */
    mpfr_t m0, m1, r0, r1, y0, y1, d0, d1;
    mpfr_inits2(128, m0, m1, r0, r1, y0, y1, d0, d1, (mpfr_ptr)0);
    int64_t todo = 0;
    for (int o = 0; o < 3; o++) {
        if (!pl->O[o]) continue;
        if (o != LN_Y) todo += !done[n + o - 1];
        for (int64_t i = 0; o == LN_Y && i < n; i++) todo += !done[i];
    }
    for (mpfr_prec_t pr = 128; pr <= 8192 && todo > 0; pr *= 4) {
        mpfr_set_prec(m0, pr); mpfr_set_prec(m1, pr); mpfr_set_prec(r0, pr); mpfr_set_prec(r1, pr);
        mpfr_set_prec(y0, pr); mpfr_set_prec(y1, pr); mpfr_set_prec(d0, pr); mpfr_set_prec(d1, pr);
        er_ln_stats(ex, m0, m1, r0, r1);
        if (pr == 128 && dbl) todo -= er_ln_exact_dbl(pl, ex, m0, m1, r0, r1, x, w, b, n, &out[LN_Y], done, simd);
        int last = pr * 4 > 8192;
        for (int o = 0; o < 3; o++) {
            if (!pl->O[o]) continue;
            int64_t cnt = o == LN_Y ? n : 1;
            for (int64_t i = 0; i < cnt; i++) {
                char *dn = &done[o == LN_Y ? i : n + o - 1];
                if (*dn) continue;
                double lo, hi, e;
                mpfr_ptr a = o == LN_MEAN ? m0 : o == LN_RSTD ? r0 : y0, c = o == LN_MEAN ? m1 : o == LN_RSTD ? r1 : y1;
                if (o == LN_Y && !er_ln_y(y0, y1, x[i], w ? w[i] : 1.0, b ? b[i] : 0.0, m0, m1, r0, r1, d0, d1)) {
                    lo = hi = e = NAN;
                } else {
                    lo = er__round_mpfr(pl->O[o], a, ER_ROUND_NEAREST, pl->ov[o]);
                    hi = er__round_mpfr(pl->O[o], c, ER_ROUND_NEAREST, pl->ov[o]);
                    e = mpfr_inf_p(c) ? mpfr_get_d(c, MPFR_RNDN) : mpfr_get_d(a, MPFR_RNDN);
                }
                out[o].exact[i] = e;
                out[o].rounded[i] = lo; /* lo == hi but for a value within 2^-8192 of a midpoint */
                if (lo == hi || (isnan(lo) && isnan(hi)) || last) { *dn = 1; todo--; }
            }
        }
    }
    mpfr_clears(m0, m1, r0, r1, y0, y1, d0, d1, (mpfr_ptr)0);
    return ER_OK;
}

/* A value of F at or above (up) / at or below (down) the real x. */
static double er_to_f(const er_fmt_info *F, mpfr_t x, er_round mode) {
    return er__round_mpfr(F, x, mode, ER_OVERFLOW_IEEE);
}

er_status er__layernorm_prepare(er_layernorm_plan *pl, int64_t n) {
    /* Welford's constants for rows of n, where the variance may be Welford's (else wk stays zero: no bound) */
    memset(&pl->wk, 0, sizeof pl->wk);
    if (pl->variance != 1) er__welford_k_init(&pl->wk, pl->F, n, pl->depth, pl->combine_depth);
    /* two_pass's sums S and Q: any tree, or one of depth at most pl->depth (any-order.md, Theorem 7) */
    ER_RETURN_IF_ERROR(er__anyorder_bound_depth(&pl->bs, pl->X, er__fmt_one(), pl->F, n, pl->depth, 0));
    return er__anyorder_bound_depth(&pl->bq, pl->F, pl->F, pl->F, n, pl->depth, 0);
}

/* rstd's set [*rlo, *rhi] from the variance's [vlo, vhi]: v = fl(var + eps), r = rsqrt(v) within U ulps; 1 where a
 * negative v (Welford's lower end) allows NaN. */
static int er_ln_rstd(const er_layernorm_plan *pl, double vlo, double vhi, double *rlo, double *rhi) {
    const er_fmt_info *F = pl->F;
    double v0 = er__round_sum(F, vlo, pl->eps, ER_ROUND_NEAREST), v1 = er__round_sum(F, vhi, pl->eps, ER_ROUND_NEAREST);
    er__rsqrt_set(F, pl->U, pl->rsqrt_ftz, v0, v1, rlo, rhi);
    return v0 < 0;
}

/* The box of a finite row (the exact ex, max |x| = X, least and greatest value xmin and xmax): the mean's set
 * [b[0], b[1]] and the variance's [b[2], b[3]] (Theorems L2 to L4), values of F. 0 where a sum may overflow F or
 * Welford's bound does not hold (no claim). */
static int er_ln_box(const er_layernorm_plan *pl, const er_ln_exact *ex, int64_t n, double X, double xmin,
                     double xmax, double b[4]) {
    const er_fmt_info *F = pl->F;
    const er_anyorder_bound bs = pl->bs, bq = pl->bq;
    /* beyond these magnitudes a sum or a square may overflow F: no claim (everything allowed) */
    int unbounded = (double)n * X > F->max / 4 || 8.0 * (double)n * X * X > F->max / 4;
    mpfr_t t, T0, T1, mu;
    mpfr_inits2(128, t, T0, T1, mu, (mpfr_ptr)0);
    /* T = num / n enclosed; mu the exact mean rounded down */
    mpfr_div_si(T0, ex->num, (long)n, MPFR_RNDD);
    mpfr_div_si(T1, ex->num, (long)n, MPFR_RNDU);
    mpfr_div_si(mu, ex->S, (long)n, MPFR_RNDD);
    double mlo = INFINITY, mhi = -INFINITY, vlo = INFINITY, vhi = -INFINITY;
    if (!unbounded && pl->variance != 2) {
        /* Theorem L2: S in any order, m = S/n; Q = sum fl(x - m)^2 in any order */
        double A = mpfr_get_d(ex->A, MPFR_RNDU); /* sum |x| rounded up */
        double bnd = er__add_up(er__mul_up(bs.c1, A), bs.c2);
        mpfr_sub_d(t, ex->S, bnd, MPFR_RNDD);
        double slo = er_to_f(F, t, ER_ROUND_UP);
        mpfr_add_d(t, ex->S, bnd, MPFR_RNDU);
        double shi = er_to_f(F, t, ER_ROUND_DOWN);
        double a, c;
        er__div_n_set(F, slo, shi, n, pl->mean, pl->Udiv_n, &a, &c);
        mlo = a;
        mhi = c;
        /* T(m) = T + n (m - mu)^2 over m in [a, c]: bounds of |m - mu| from mu's enclosure [mu0, mu1] */
        mpfr_t dmin, dmax, mu1;
        mpfr_inits2(128, dmin, dmax, mu1, (mpfr_ptr)0);
        mpfr_div_si(mu1, ex->S, (long)n, MPFR_RNDU);
        mpfr_d_sub(dmax, c, mu, MPFR_RNDU);       /* mu holds the lower end mu0 here */
        mpfr_d_sub(t, a, mu1, MPFR_RNDD);
        mpfr_neg(t, t, MPFR_RNDU);                /* mu1 - a, rounded up */
        mpfr_max(dmax, dmax, t, MPFR_RNDU);
        mpfr_d_sub(dmin, a, mu1, MPFR_RNDD);
        mpfr_sub_d(t, mu, c, MPFR_RNDD);
        mpfr_max(dmin, dmin, t, MPFR_RNDD);
        if (mpfr_sgn(dmin) < 0) mpfr_set_zero(dmin, 1);
        mpfr_t q0, q1, one;
        mpfr_inits2(128, q0, q1, one, (mpfr_ptr)0);
        mpfr_sqr(q0, dmin, MPFR_RNDD);
        mpfr_mul_si(q0, q0, (long)n, MPFR_RNDD);
        mpfr_add(q0, q0, T0, MPFR_RNDD);
        mpfr_sqr(q1, dmax, MPFR_RNDU);
        mpfr_mul_si(q1, q1, (long)n, MPFR_RNDU);
        mpfr_add(q1, q1, T1, MPFR_RNDU);
        /* sum of p_j = fl(x_j - m)^2 lies in [(1-u)^2 T(m), (1+u)^2 T(m)]; Q within c1 sum p + c2 of it */
        mpfr_set_ui_2exp(one, 1, (mpfr_exp_t)-F->p, MPFR_RNDN);
        mpfr_ui_sub(t, 1, one, MPFR_RNDD);
        mpfr_sqr(t, t, MPFR_RNDD);
        mpfr_mul(q0, q0, t, MPFR_RNDD);
        mpfr_add_ui(t, one, 1, MPFR_RNDU);
        mpfr_sqr(t, t, MPFR_RNDU);
        mpfr_mul(q1, q1, t, MPFR_RNDU);
        mpfr_set_d(t, bq.c1, MPFR_RNDU);
        mpfr_ui_sub(t, 1, t, MPFR_RNDD);
        mpfr_mul(q0, q0, t, MPFR_RNDD);
        mpfr_sub_d(q0, q0, bq.c2, MPFR_RNDD);
        mpfr_set_d(t, bq.c1, MPFR_RNDU);
        mpfr_add_ui(t, t, 1, MPFR_RNDU);
        mpfr_mul(q1, q1, t, MPFR_RNDU);
        mpfr_add_d(q1, q1, bq.c2, MPFR_RNDU);
        double qlo = mpfr_sgn(q0) > 0 ? er_to_f(F, q0, ER_ROUND_UP) : 0.0; /* Q >= 0: a sum of squares */
        double qhi = er_to_f(F, q1, ER_ROUND_DOWN);
        er__div_n_set(F, qlo, qhi, n, pl->mean, pl->Udiv_n, &a, &c);
        vlo = a;
        vhi = c;
        mpfr_clears(dmin, dmax, mu1, q0, q1, one, (mpfr_ptr)0);
    }
    if (!unbounded && pl->variance != 1) {
        /* Theorems L3, L4: Welford in any tree */
        double R = er__next_up(xmax - xmin), EM, ES;
        mpfr_div_si(t, ex->S, (long)n, MPFR_RNDA);
        er__welford_bounds(&pl->wk, fabs(mpfr_get_d(t, MPFR_RNDA)), X, R, mpfr_get_d(T1, MPFR_RNDU), &EM, &ES);
        if (isinf(EM) || isinf(ES)) unbounded = 1;
        else {
            mpfr_div_si(t, ex->S, (long)n, MPFR_RNDD);
            mpfr_sub_d(t, t, EM, MPFR_RNDD);
            double a = er_to_f(F, t, ER_ROUND_UP);
            mpfr_div_si(t, ex->S, (long)n, MPFR_RNDU);
            mpfr_add_d(t, t, EM, MPFR_RNDU);
            double c = er_to_f(F, t, ER_ROUND_DOWN);
            if (a < mlo) mlo = a;
            if (c > mhi) mhi = c;
            mpfr_sub_d(t, T0, ES, MPFR_RNDD);
            double s0 = er_to_f(F, t, ER_ROUND_UP);
            mpfr_add_d(t, T1, ES, MPFR_RNDU);
            double s1 = er_to_f(F, t, ER_ROUND_DOWN);
            er__div_n_set(F, s0, s1, n, pl->mean, 0.0, &a, &c);
            if (a < vlo) vlo = a;
            if (c > vhi) vhi = c;
        }
    }
    mpfr_clears(t, T0, T1, mu, (mpfr_ptr)0);
    b[0] = mlo;
    b[1] = mhi;
    b[2] = vlo;
    b[3] = vhi;
    return !unbounded;
}

/* The value of F that every real of [lo, hi] rounds to (up or down): 1 and *r where they all give one, else 0. */
static int er_ln_f_of(const er_fmt_info *F, double lo, double hi, er_round mode, double *r) {
    double a = er__round_double(F, lo, mode, ER_OVERFLOW_IEEE), b = er__round_double(F, hi, mode, ER_OVERFLOW_IEEE);
    *r = a;
    return isfinite(lo) && isfinite(hi) && er__bits(a) == er__bits(b);
}

/* (n d^2 + T) (1 + g u)^2 (1 + g c1) + g c2 for g = -1 (er_ln_box's q0) or +1 (q1), each operation rounded down
 * (up = 0) or up (up = 1): with d >= 0, T >= 0 and 1 + g c1 > 0 every operand is nonnegative, so each product is
 * monotone in it, and the result is at or below (above) the value from any operands at or above (below) these. */
static double er_ln_q(double d, double nd, double T, double u, double c1, double c2, double g, int up) {
    double k = er__sum_dir(1.0, g * u, up);
    double q = er__sum_dir(er__prod_dir(er__prod_dir(d, d, up), nd, up), T, up);
    q = er__prod_dir(er__prod_dir(q, er__prod_dir(k, k, up), up), er__sum_dir(1.0, g * c1, up), up);
    return er__sum_dir(q, g * c2, up);
}

/* er_ln_box in doubles from the row's quantities d (layernorm.md, The box in doubles, Theorem L11): each of
 * er_ln_box's MPFR values is held between two doubles, the lower end of each operation's result rounded down from
 * its operands' ends and the upper end up; where both ends give one value of F that is er_ln_box's value, and the
 * doubles er_ln_box takes from the exact row (A, |mu| and T's upper end rounded up) are d's. Returns er_ln_box's
 * result with b[4] its values, or -1 where an end is undecided (then er_ln_box decides). */
static int er_ln_box_fast(const er_layernorm_plan *pl, const er_ln_dsums *d, int64_t n, double X, double xmin,
                          double xmax, double b[4]) {
    const er_fmt_info *F = pl->F;
    int unbounded = (double)n * X > F->max / 4 || 8.0 * (double)n * X * X > F->max / 4;
    double mlo = INFINITY, mhi = -INFINITY, vlo = INFINITY, vhi = -INFINITY, nd = (double)n, a, c;
    const double *M = d->M, *T = d->T;
    if (!unbounded && pl->variance != 2) {
        const er_anyorder_bound bs = pl->bs, bq = pl->bq;
        double bnd = er__add_up(er__mul_up(bs.c1, d->A), bs.c2), slo, shi;
        if (!er_ln_f_of(F, er__sum_dir(d->S[0], -bnd, 0), er__sum_dir(d->S[1], -bnd, 1), ER_ROUND_UP, &slo) ||
            !er_ln_f_of(F, er__sum_dir(d->S[0], bnd, 0), er__sum_dir(d->S[1], bnd, 1), ER_ROUND_DOWN, &shi))
            return -1;
        er__div_n_set(F, slo, shi, n, pl->mean, pl->Udiv_n, &a, &c);
        mlo = a;
        mhi = c;
        /* er_ln_box's dmin and dmax (both >= 0 there), mu's 128-bit ends within [M0, M1] */
        double dn0 = fmax(fmax(er__sum_dir(a, -M[1], 0), er__sum_dir(M[0], -c, 0)), 0.0);
        double dn1 = fmax(fmax(er__sum_dir(a, -M[0], 1), er__sum_dir(M[1], -c, 1)), 0.0);
        double dx0 = fmax(fmax(er__sum_dir(c, -M[1], 0), er__sum_dir(M[0], -a, 0)), 0.0);
        double dx1 = fmax(fmax(er__sum_dir(c, -M[0], 1), er__sum_dir(M[1], -a, 1)), 0.0);
        double u = ldexp(1.0, -F->p), qlo = 0.0, qhi;
        /* q0 (qlo's MPFR value) and q1 (qhi's) held between two doubles; where 1 - c1 <= 0 (F's counts too long
         * for the bound) q0 < 0 and qlo is 0 */
        if (er__sum_dir(1.0, -bq.c1, 0) > 0) {
            double q0lo = er_ln_q(dn0, nd, T[0], u, bq.c1, bq.c2, -1.0, 0);
            double q0hi = er_ln_q(dn1, nd, T[1], u, bq.c1, bq.c2, -1.0, 1);
            if (q0lo > 0) { if (!er_ln_f_of(F, q0lo, q0hi, ER_ROUND_UP, &qlo)) return -1; }
            else if (q0hi > 0) return -1;
        } else if (er__sum_dir(1.0, -bq.c1, 1) > 0) return -1;
        if (!er_ln_f_of(F, er_ln_q(dx0, nd, T[0], u, bq.c1, bq.c2, 1.0, 0),
                        er_ln_q(dx1, nd, T[1], u, bq.c1, bq.c2, 1.0, 1), ER_ROUND_DOWN, &qhi))
            return -1;
        er__div_n_set(F, qlo, qhi, n, pl->mean, pl->Udiv_n, &a, &c);
        vlo = a;
        vhi = c;
    }
    if (!unbounded && pl->variance != 1) {
        double R = er__next_up(xmax - xmin), EM, ES;
        er__welford_bounds(&pl->wk, d->Ma, X, R, T[1], &EM, &ES);
        if (isinf(EM) || isinf(ES)) unbounded = 1;
        else {
            double s0, s1;
            if (!er_ln_f_of(F, er__sum_dir(M[0], -EM, 0), er__sum_dir(M[1], -EM, 1), ER_ROUND_UP, &a) ||
                !er_ln_f_of(F, er__sum_dir(M[0], EM, 0), er__sum_dir(M[1], EM, 1), ER_ROUND_DOWN, &c) ||
                !er_ln_f_of(F, er__sum_dir(T[0], -ES, 0), er__sum_dir(T[1], -ES, 1), ER_ROUND_UP, &s0) ||
                !er_ln_f_of(F, er__sum_dir(T[0], ES, 0), er__sum_dir(T[1], ES, 1), ER_ROUND_DOWN, &s1))
                return -1;
            if (a < mlo) mlo = a;
            if (c > mhi) mhi = c;
            er__div_n_set(F, s0, s1, n, pl->mean, 0.0, &a, &c);
            if (a < vlo) vlo = a;
            if (c > vhi) vhi = c;
        }
    }
    b[0] = mlo;
    b[1] = mhi;
    b[2] = vlo;
    b[3] = vhi;
    return !unbounded;
}

/* The box of a finite row: in doubles where they decide it, else in MPFR (the same values). */
static int er_ln_box_of(const er_layernorm_plan *pl, const er_ln_exact *ex, int64_t n, double X, double xmin,
                        double xmax, double b[4]) {
    int r = ex->dok ? er_ln_box_fast(pl, &ex->d, n, X, xmin, xmax, b) : -1;
    return r >= 0 ? r : er_ln_box(pl, ex, n, X, xmin, xmax, b);
}

er_status er__layernorm_row(const er_layernorm_plan *pl, const double *x, const double *w, const double *b, int64_t n,
                            er_ln_out out[3], int simd) {
    const er_fmt_info *F = pl->F;
    int nan = 0, pinf = 0, ninf = 0;
    double X = 0, xmin = INFINITY, xmax = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        double v = x[j];
        if (isnan(v)) nan = 1;
        else if (isinf(v)) { if (v > 0) pinf = 1; else ninf = 1; }
        else {
            if (fabs(v) > X) X = fabs(v);
            if (v < xmin) xmin = v;
            if (v > xmax) xmax = v;
        }
    }
    int wide = 0; /* a weight or bias NaN or infinite: y's set is unrestricted */
    for (int64_t j = 0; j < n; j++) wide |= (w && !isfinite(w[j])) || (b && !isfinite(b[j]));
    if (nan || pinf || ninf) {
        /* special rows (docs/algorithms/layernorm.md, Special values): NaN in: mean and y NaN; an infinity in: the
         * mean that infinity or NaN (NaN for both signs), y NaN or infinite; rstd unrestricted */
        er_cval *cm = out[LN_MEAN].cv, *cr = out[LN_RSTD].cv;
        double me = nan || (pinf && ninf) ? NAN : pinf ? INFINITY : -INFINITY;
        if (pl->O[LN_MEAN]) {
            er__cval_from_interval(cm, me, me, 1, F);
            out[LN_MEAN].exact[0] = me;
            out[LN_MEAN].rounded[0] = er__round_double(pl->O[LN_MEAN], me, ER_ROUND_NEAREST, pl->ov[LN_MEAN]);
        }
        if (pl->O[LN_RSTD]) {
            er__cval_from_interval(cr, -INFINITY, INFINITY, 1, F);
            out[LN_RSTD].exact[0] = out[LN_RSTD].rounded[0] = NAN;
        }
        for (int64_t i = 0; pl->O[LN_Y] && i < n; i++) {
            if (nan) er__cval_from_interval(&out[LN_Y].cv[i], NAN, NAN, 1, F);
            else
                er__cval_from_interval(&out[LN_Y].cv[i], -INFINITY, INFINITY, 1, F), out[LN_Y].cv[i].lo = INFINITY,
                                                                                     out[LN_Y].cv[i].hi = -INFINITY;
            out[LN_Y].exact[i] = out[LN_Y].rounded[i] = NAN;
        }
        return ER_OK;
    }
    er_ln_exact ex;
    er_ln_exact_init(&ex, x, n, pl->eps);
    char *done = calloc((size_t)(n + 2), 1); /* y elements, then mean and rstd */
    if (!done) { er_ln_exact_clear(&ex); return er__fail(ER_ERR_NOMEM, "cannot allocate a row of %lld", (long long)n); }
    er_status est =
        er_ln_exact_outputs(pl, &ex, x, w, b, n, out, done, pl->O[LN_Y] && pl->O[LN_Y]->p <= 24 && !wide, simd);
    free(done);
    if (est != ER_OK) { er_ln_exact_clear(&ex); return est; }

    double box[4];
    int bounded = er_ln_box_of(pl, &ex, n, X, xmin, xmax, box);
    er_ln_exact_clear(&ex);
    er_ln_out *oy = &out[LN_Y];
    int ival = pl->O[LN_Y] && oy->lo; /* y's sets as intervals */
    if (ival) oy->ival = 1;
    if (!bounded) {
        for (int o = 0; o < 3; o++) {
            if (!pl->O[o]) continue;
            for (int64_t i = 0; i < (o == LN_Y ? n : 1); i++) {
                if (o == LN_Y && ival) oy->lo[i] = NAN;
                else er__cval_from_interval(&out[o].cv[i], -INFINITY, INFINITY, 1, F);
            }
        }
        return ER_OK;
    }
    double mlo = box[0], mhi = box[1], rlo, rhi;
    int rnan = er_ln_rstd(pl, box[2], box[3], &rlo, &rhi);
    if (pl->O[LN_MEAN]) er__cval_from_interval(out[LN_MEAN].cv, mlo, mhi, 0, F);
    if (pl->O[LN_RSTD]) er__cval_from_interval(out[LN_RSTD].cv, rlo, rhi, rnan, F);
    /* fp32 with every operand a float, the sets as intervals: the compositions as float operations in a loop (m, r
     * are values of F; x, w, b checked) */
    int f32 = ival && F->id == ER_FP32 && !rnan && !wide;
    for (int64_t i = 0; f32 && i < n; i++)
        f32 = er__is_float(x[i]) && (!w || er__is_float(w[i])) && (!b || er__is_float(b[i]));
    if (f32) {
        er_ln_y_f32_run(simd, n, x, w, b, (float)mlo, (float)mhi, (float)rlo, (float)rhi, oy->lo, oy->hi);
        return ER_OK;
    }
    for (int64_t i = 0; pl->O[LN_Y] && i < n; i++) {
        double wi = w ? w[i] : 1.0, bi = b ? b[i] : 0.0, lo = INFINITY, hi = -INFINITY, ys[4];
        int ynan = rnan || wide;
        const double ms[2] = {mlo, mhi}, rs[2] = {rlo, rhi};
        for (int k = 0; k < 4 && !ynan; k++) {
            er_ln_compose(F, x[i], ms[k >> 1], rs[k & 1], wi, bi, ys);
            for (int c = 0; c < 4; c++) {
                if (isnan(ys[c])) { ynan = 1; break; }
                if (ys[c] < lo) lo = ys[c];
                if (ys[c] > hi) hi = ys[c];
            }
        }
        if (ival) {
            oy->lo[i] = ynan ? NAN : lo;
            oy->hi[i] = hi;
        } else if (ynan) er__cval_from_interval(&oy->cv[i], -INFINITY, INFINITY, 1, F);
        else er__cval_from_interval(&oy->cv[i], lo, hi, 0, F);
    }
    return ER_OK;
}

int er__layernorm_dev_row_how(const er_layernorm_plan *pl, const er_ln_sums *s, int64_t n, int how, double c[8]) {
    if (s->special || !s->fits) return 0;
    /* the box and the exact mean's and rstd's doubles as er__layernorm_row takes them: in doubles where they decide
     * (how 1: only there, -1 where not), else from the exact row in MPFR (how 0: always) */
    er_ln_dsums d;
    double box[4];
    int dok = how != 0 && er_ln_dsums_of(s, n, &d);
    int bounded = dok ? er_ln_box_fast(pl, &d, n, s->X, s->xmin, s->xmax, box) : -1;
    int ends = dok && er_ln_dsums_ends(&d, pl->eps, c + 4);
    if (how == 1 && (bounded < 0 || !ends)) return -1;
    if (bounded < 0 || !ends) {
        er_ln_exact ex;
        er_ln_exact_from(&ex, s, n, pl->eps);
        if (how == 0) ex.dok = 0;
        mpfr_t m0, m1, r0, r1;
        mpfr_inits2(128, m0, m1, r0, r1, (mpfr_ptr)0);
        er_ln_stats(&ex, m0, m1, r0, r1);
        ends = er_ln_ends_of(&ex, m0, m1, r0, r1, c + 4);
        if (bounded < 0) bounded = er_ln_box(pl, &ex, n, s->X, s->xmin, s->xmax, box);
        mpfr_clears(m0, m1, r0, r1, (mpfr_ptr)0);
        er_ln_exact_clear(&ex);
    }
    if (!ends || !bounded || er_ln_rstd(pl, box[2], box[3], &c[2], &c[3])) return 0;
    c[0] = box[0];
    c[1] = box[1];
    return 1;
}

int er__layernorm_dev_row(const er_layernorm_plan *pl, const er_ln_sums *s, int64_t n, double c[8]) {
    return er__layernorm_dev_row_how(pl, s, n, 2, c);
}
