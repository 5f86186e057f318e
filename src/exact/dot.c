/* dot.c: the exact summary of a dot product (see er_dotsum in accum.h): the products added into the long
 * accumulator, and rounded-up sums of the positive and negative products (docs/algorithms/any-order.md,
 * Lemma 4). Products of two non-fp64 values are exact doubles (precision 2*24 <= 53, exponents within
 * [-298, 256]); fp64 operands take a 106-bit integer path. */
#include <math.h>
#include "format/format.h"
#include "exact/accum.h"

/* Adds a*b (finite, nonzero) exactly as a 106-bit integer product: the fp64 path. */
static void er_add_product_u128(er_acc *acc, double a, double b) {
    uint64_t ba = er__bits(a), bb = er__bits(b);
    int64_t ea = (int64_t)((ba >> 52) & 0x7ff), eb = (int64_t)((bb >> 52) & 0x7ff);
    uint64_t ma = ba & ((UINT64_C(1) << 52) - 1), mb = bb & ((UINT64_C(1) << 52) - 1);
    if (ea) ma |= UINT64_C(1) << 52; else ea = 1;
    if (eb) mb |= UINT64_C(1) << 52; else eb = 1;
    er__acc_add_u128(acc, (int)((ba ^ bb) >> 63), (unsigned __int128)ma * mb, ea - 1075 + eb - 1075);
}

/* The summary of one dot product: a and b walk K contiguously. */
int er__dot_ipath(const er_fmt_info *fa, const er_fmt_info *fb, int64_t K, int *qa, int *qb) {
    /* a = A 2^qa with A an integer: qa is the exponent of the smallest subnormal; |A| < max / eta. fp16 and the
     * fp8 formats give |A| < 2^40; the constant 1 of a reduction (precision 0) is 1 * 2^0. Products are below
     * 2^80, so K <= 2^47 of them sum exactly in 128 bits. */
    const er_fmt_info *f[2] = {fa, fb};
    int q[2];
    for (int i = 0; i < 2; i++) {
        if (f[i]->p == 0) { q[i] = 0; continue; }
        if (f[i]->bits > 16 || f[i]->ebits > 5) return 0;
        q[i] = f[i]->emin - f[i]->p + 1;
    }
    if (K > (INT64_C(1) << 47)) return 0;
    *qa = q[0];
    *qb = q[1];
    return 1;
}

/* The sum's leading 106 bits as two doubles, exactly, and a bound of the rest, from its 128 leading bits m (top bit
 * set, or m = 0 for a zero sum): the sum is (-1)^neg (m + frac) 2^e, frac in [0, 1) and nonzero iff sticky, so the
 * bits of m below the 106th and frac weigh less than 2^(e + 22), and nothing where they are all zero. NaN in dd[0]
 * where a piece would leave double's normal range. */
static void er_dd_of(int neg, unsigned __int128 m, int64_t e, int sticky, double *dd) {
    double sg = neg ? -1.0 : 1.0;
    if (m && (e + 22 < -1000 || e + 128 > 1000)) {
        dd[0] = dd[1] = dd[2] = NAN;
        return;
    }
    dd[0] = sg * ldexp((double)(uint64_t)(m >> 75), (int)(e + 75));
    dd[1] = sg * ldexp((double)((uint64_t)(m >> 22) & ((UINT64_C(1) << 53) - 1)), (int)(e + 22));
    dd[2] = sticky || (m & ((UINT64_C(1) << 22) - 1)) ? ldexp(1.0, (int)(e + 22)) : 0.0;
}

/* The 128-bit integer path: exact sum and exact sums of positive and negative products. */
static void er_dot_int(er_dotsum *s, const double *a, const double *b, int64_t K, int qa, int qb, double *dd) {
    __int128 sum = 0, pos = 0, neg = 0;
    double sa = ldexp(1.0, -qa), sb = ldexp(1.0, -qb);
    for (int64_t k = 0; k < K; k++) {
        int64_t x = (int64_t)(a[k] * sa), y = (int64_t)(b[k] * sb); /* exact: integers below 2^40 */
        __int128 p = (__int128)x * y;
        __int128 m = p >> 127; /* all ones for a negative product */
        sum += p;
        pos += p & ~m;
        neg -= p & m;
    }
    int q = qa + qb;
    /* magnitudes below 2^127 as unsigned; doubles rounded to nearest, then one step up: upper bounds */
    s->pos = er__next_up(ldexp((double)(unsigned __int128)pos, q));
    s->negs = er__next_up(ldexp((double)(unsigned __int128)neg, q));
    s->special = 0;
    s->pad = 0;
    s->neg = sum < 0;
    unsigned __int128 u = sum < 0 ? (unsigned __int128)(-sum) : (unsigned __int128)sum;
    if (u == 0) { s->m = 0; s->e = 0; s->sticky = 0; if (dd) dd[0] = dd[1] = dd[2] = 0; return; }
    uint64_t hi = (uint64_t)(u >> 64);
    int bits = hi ? 128 - __builtin_clzll(hi) : 64 - __builtin_clzll((uint64_t)u);
    if (dd) er_dd_of(s->neg, u << (128 - bits), (int64_t)q - (128 - bits), 0, dd); /* u whole in m: exact */
    int drop = bits > 64 ? bits - 64 : 0;
    s->sticky = drop ? (u & (((unsigned __int128)1 << drop) - 1)) != 0 : 0;
    uint64_t m = (uint64_t)(u >> drop);
    int lz = __builtin_clzll(m);
    s->m = m << lz;
    s->e = (int32_t)(q + drop - lz);
}

void er__dot_summary(er_dotsum *s, er_acc *acc, const double *a, const double *b, int64_t K,
                     const er_dot_env *env, int special_path) {
    er__dot_summary_dd(s, acc, a, b, K, env, special_path, NULL);
}

void er__dot_summary_dd(er_dotsum *s, er_acc *acc, const double *a, const double *b, int64_t K,
                        const er_dot_env *env, int special_path, double *dd) {
    int wide = env->wide;
    if (env->ipath && !special_path) { er_dot_int(s, a, b, K, env->qa, env->qb, dd); return; }
    double pos = 0, negs = 0;
    uint8_t special = 0;
    er__acc_reset(acc);
    if (!wide && !special_path) {
        /* Two interleaved streams (even k into bank d, odd k into bank d2, each with its own partial sums of
         * positive and negative products), branch-free; a carry pass at least every 2^30 additions per bank. */
        double pos1 = 0, negs1 = 0;
        int64_t base = acc->base;
        for (int64_t k0 = 0; k0 < K; k0 += ER_ACC_PASS_EVERY) {
            int64_t kend = K - k0 < ER_ACC_PASS_EVERY ? K : k0 + ER_ACC_PASS_EVERY, k = k0;
            for (; k + 1 < kend; k += 2) {
                double p = a[k] * b[k], q = a[k + 1] * b[k + 1]; /* exact: see the file comment */
                pos += p > 0 ? p : 0.0;
                negs += p < 0 ? -p : 0.0;
                pos1 += q > 0 ? q : 0.0;
                negs1 += q < 0 ? -q : 0.0;
                er__acc_add_double_bank(acc->d, base, p);
                er__acc_add_double_bank(acc->d2, base, q);
            }
            if (k < kend) {
                double p = a[k] * b[k];
                pos += p > 0 ? p : 0.0;
                negs += p < 0 ? -p : 0.0;
                er__acc_add_double_bank(acc->d, base, p);
            }
            er__acc_carry(acc);
        }
        pos += pos1;
        negs += negs1;
    } else {
        for (int64_t k = 0; k < K; k++) {
            double x = a[k], y = b[k];
            if (isnan(x) || isnan(y)) { special |= ER_SPECIAL_NAN; continue; }
            if (isinf(x) || isinf(y)) {
                if (x == 0 || y == 0) special |= ER_SPECIAL_NAN; /* inf * 0 */
                else special |= (signbit(x) != signbit(y)) ? ER_SPECIAL_NINF : ER_SPECIAL_PINF;
                continue;
            }
            if (x == 0 || y == 0) continue;
            if (wide) {
                /* |fl(x*y)| may be below |x*y| by half an ulp (or underflow to 0): step up one double. */
                double p = er__next_up(fabs(x * y));
                if (signbit(x) == signbit(y)) pos += p; else negs += p;
                er_add_product_u128(acc, x, y);
            } else {
                double p = x * y;
                if (p > 0) pos += p; else negs -= p;
                er__acc_add_double(acc, p);
            }
        }
    }
    int neg, sticky;
    unsigned __int128 m;
    int64_t e;
    er__acc_summary128(acc, &neg, &m, &e, &sticky);
    er__dotsum_finish(s, pos, negs, K, special, neg, (uint64_t)(m >> 64), m ? e + 64 : 0, sticky | ((uint64_t)m != 0));
    if (dd) er_dd_of(neg, m, e, sticky, dd);
}

void er__dotsum_finish(er_dotsum *s, double pos, double negs, int64_t K, uint8_t special, int neg, uint64_t m,
                       int64_t e, int sticky) {
    /* pos and negs were summed in double (in some order): the exact sums T satisfy T <= s/(1-(K-1)2^-53)
     * <= s (1 + K 2^-52) for K <= 2^52 (any-order.md, Lemma 4). 1 + K 2^-52 is exact for K < 2^52. */
    double f = 1.0 + (double)K * 0x1p-52;
    s->pos = er__mul_up(pos, f);
    s->negs = er__mul_up(negs, f);
    s->special = special;
    s->m = m;
    s->e = (int32_t)e;
    s->neg = (uint8_t)neg;
    s->sticky = (uint8_t)sticky;
    s->pad = 0;
}

