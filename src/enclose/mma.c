/* mma.c: the tensor-core block FMA (docs/hardware/mma.md).
 *
 * One block: E = the largest of ilogb(a_j) + ilogb(b_j) over the nonzero products and ilogb(c); every term (c
 * included) truncated toward zero to a multiple of 2^(E - F); the terms added exactly; the sum rounded toward zero
 * to acc_p bits (fp32's range). The product exponent is the sum of the operands' exponents, not the exponent of
 * the product itself: this is what the H200 computes (tests/ops/t-mma.c reproduces its outputs bit for bit). */
#include <math.h>
#include <stdint.h>
#include <mpfr.h>
#include "format/format.h"
#include "enclose/mma.h"

static void er_mma_kf(er_mma_params *o, int k, int F) {
    o->k = k;
    o->F = F;
}

er_status er__mma_params(int arch, const er_fmt_info *fa, const er_fmt_info *fb, int fp16_acc, er_mma_params *out) {
    er_format a = fa->id, b = fb->id;
    int half = (a == ER_FP16 && b == ER_FP16) || (a == ER_BF16 && b == ER_BF16);
    int tf32 = a == ER_TF32 && b == ER_TF32;
    int fp8 = (a == ER_FP8_E4M3FN || a == ER_FP8_E5M2) && (b == ER_FP8_E4M3FN || b == ER_FP8_E5M2);
    if (!half && !tf32 && !fp8)
        return er__fail(ER_ERR_STANDARD,
                        "mma:sm%d takes fp16 x fp16, bf16 x bf16, tf32 (fp32 operands with compute=tf32) or "
                        "fp8 operands, not %s x %s",
                        arch, fa->name, fb->name);
    *out = (er_mma_params){0, 0, 24, fp16_acc, fp8};
    if (fp16_acc && !(a == ER_FP16 && b == ER_FP16))
        return er__fail(ER_ERR_STANDARD, "an fp16 accumulator (compute=fp16) takes fp16 x fp16 operands, not %s x %s",
                        fa->name, fb->name);
    /* products per block (k) and the block sum's bits (F): docs/hardware/mma.md's table */
    switch (arch) {
    case 70: if (half && a == ER_FP16) er_mma_kf(out, 4, 23); break;
    case 80: if (half) er_mma_kf(out, 8, 24); else if (tf32) er_mma_kf(out, 4, 24); break;
    case 89: if (half) er_mma_kf(out, 8, 24); else if (tf32) er_mma_kf(out, 4, 24); else er_mma_kf(out, 16, 13); break;
    case 90:
        if (half) er_mma_kf(out, 16, 25);
        else if (tf32) er_mma_kf(out, 8, 25);
        else { er_mma_kf(out, 32, 13); out->acc_p = 14; }
        break;
    case 100:
        if (half) er_mma_kf(out, 16, 25);
        else if (tf32) er_mma_kf(out, 8, 25);
        else er_mma_kf(out, 32, 25);
        break;
    default:
        return er__fail(ER_ERR_STANDARD, "mma:sm%d: known architectures are sm70, sm80, sm89, sm90 and sm100", arch);
    }
    if (!out->k)
        return er__fail(ER_ERR_STANDARD, "mma:sm%d has no tensor-core MMA for %s x %s", arch, fa->name, fb->name);
    return ER_OK;
}

double er__mma_block(const er_mma_params *mp, double c, const double *a, const double *b, int64_t n) {
    int special = !isfinite(c);
    for (int64_t j = 0; j < n; j++) special |= !isfinite(a[j]) || !isfinite(b[j]);
    if (special) { /* IEEE: infinities and NaN propagate (inf - inf and 0 * inf are NaN) */
        double s = c;
        for (int64_t j = 0; j < n; j++) s += a[j] * b[j];
        return s;
    }
    int E = INT32_MIN;
    if (c != 0) E = ilogb(c);
    for (int64_t j = 0; j < n; j++)
        if (a[j] != 0 && b[j] != 0 && ilogb(a[j]) + ilogb(b[j]) > E) E = ilogb(a[j]) + ilogb(b[j]);
    if (E == INT32_MIN) return 0.0;
    int q = E - mp->F;
    /* |c| < 2^(E+1) and |a b| < 2^(E+2): each truncated term is an integer below 2^(F+2) */
    int64_t S = 0;
    double t = trunc(ldexp(fabs(c), -q));
    S += c < 0 ? -(int64_t)t : (int64_t)t;
    for (int64_t j = 0; j < n; j++) {
        double p = a[j] * b[j]; /* exact: at most 24 significant bits */
        t = trunc(ldexp(fabs(p), -q));
        S += p < 0 ? -(int64_t)t : (int64_t)t;
    }
    if (S == 0) return 0.0;
    int neg = S < 0;
    uint64_t m = neg ? (uint64_t)(-S) : (uint64_t)S;
    int bl = 64 - __builtin_clzll(m);
    if (mp->fp16_acc) return er__round_core(er__fmt(ER_FP16), neg, m, q, 0, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    if (bl > mp->acc_p) { m >>= bl - mp->acc_p; q += bl - mp->acc_p; } /* toward zero to acc_p bits */
    return er__round_core(er__fmt(ER_FP32), neg, m, q, 0, ER_ROUND_ZERO, ER_OVERFLOW_IEEE);
}

double er__mma_chain(const er_mma_params *mp, const double *a, const double *b, int64_t K) {
    double c = 0.0;
    for (int64_t k0 = 0; k0 < K; k0 += mp->k) c = er__mma_block(mp, c, a + k0, b + k0, K - k0 < mp->k ? K - k0 : mp->k);
    return c;
}

void er__mma_bound(er_anyorder_bound *bd, const er_mma_params *mp, int64_t K, int promote) {
    /* Theorems M1 and M2: nb blocks, chains of at most N blocks in the tensor core (N = nb without promotion);
     * beta = (k+1) 2^-F + 2^(1-acc_p) (1 + (k+1) 2^-F); G = (1+beta)^N (1+u)^nb;
     * c1 = (N beta + (1+u)^nb - 1) G; c2 = 2 nb eta G (eta the accumulator's least subnormal). */
    /* with an fp16 accumulator every block rounds to nearest in fp16: 2^(1-acc_p) becomes u = 2^-11, the chains add
     * in fp16, 2^-149 becomes fp16's 2^-25, and overflow gives infinities (no saturation) */
    int64_t nb = K ? (K + mp->k - 1) / mp->k : 0, N = promote > 0 && promote < nb ? promote : nb;
    const er_fmt_info *A = er__fmt(mp->fp16_acc ? ER_FP16 : ER_FP32);
    int rel = mp->fp16_acc ? -A->p : 1 - mp->acc_p;
    mpfr_t beta, t, G, up, c1;
    mpfr_inits2(128, beta, t, G, up, c1, (mpfr_ptr)0);
    mpfr_set_ui_2exp(beta, (unsigned long)(mp->k + 1), -mp->F, MPFR_RNDU);
    mpfr_add_ui(t, beta, 1, MPFR_RNDU);
    mpfr_mul_2si(t, t, rel, MPFR_RNDU);
    mpfr_add(beta, beta, t, MPFR_RNDU);
    mpfr_add_ui(G, beta, 1, MPFR_RNDU);
    mpfr_pow_ui(G, G, (unsigned long)N, MPFR_RNDU);
    mpfr_set_ui_2exp(up, 1, -A->p, MPFR_RNDN);
    mpfr_add_ui(up, up, 1, MPFR_RNDU);
    mpfr_pow_ui(up, up, (unsigned long)nb, MPFR_RNDU);  /* (1+u)^nb */
    mpfr_mul(G, G, up, MPFR_RNDU);
    mpfr_mul_si(c1, beta, (long)N, MPFR_RNDU);
    mpfr_sub_ui(t, up, 1, MPFR_RNDU);
    mpfr_add(c1, c1, t, MPFR_RNDU);
    mpfr_mul(c1, c1, G, MPFR_RNDU);
    bd->c1 = mpfr_get_d(c1, MPFR_RNDU);
    mpfr_mul_si(t, G, 2 * (long)nb, MPFR_RNDU);
    mpfr_mul_2si(t, t, A->emin - A->p + 1, MPFR_RNDU); /* the least subnormal of the accumulator */
    bd->c2 = mpfr_get_d(t, MPFR_RNDU);
    bd->g = mpfr_get_d(G, MPFR_RNDU);
    if (mp->fp16_acc) { /* round to nearest: overflow only beyond max + half an ulp */
        bd->thr = A->max + ldexp(1.0, A->emax - A->p);
        bd->faithful = 0;
    } else {
        bd->thr = A->max; /* toward zero saturates; the fp32 additions of chains may overflow */
        bd->faithful = 1;
    }
    mpfr_clears(beta, t, G, up, c1, (mpfr_ptr)0);
}
