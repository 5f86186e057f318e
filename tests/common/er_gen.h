/* er_gen.h: adversarial input families and an emulator of correct implementations (random summation
 * trees, FMA or not, rounding every operation to the compute format with MPFR's own subnormal emulation). */
#ifndef ER_GEN_H
#define ER_GEN_H

#include "er_test.h"

enum { FAM_NORMAL, FAM_POSITIVE, FAM_CANCEL, FAM_WIDE, FAM_SUBNORMAL, FAM_NEAR_OVERFLOW, FAM_TIES, FAM_COUNT };
static const char *const fam_names[FAM_COUNT] = {"normal", "positive", "cancellation", "wide_exponent", "subnormal",
                                                 "near_overflow", "ties"};

/* x rounded to nearest into f, saturating (the generators want finite values). */
static inline double gen_to(er_format f, double x) {
    double r;
    er_round_double(&r, f, x, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
    return r;
}

/* Fills a[0..K) (format fa) and b[0..K) (format fb) with one family, scaled for compute format F. */
static inline void gen_vectors(int fam, er_format fa, er_format fb, er_format F, int K, double *a, double *b) {
    int pF = er_format_precision(F);
    for (int k = 0; k < K; k++) {
        double x = er_rand_normal(), y = er_rand_normal();
        switch (fam) {
        case FAM_POSITIVE: x = fabs(x); y = fabs(y); break;
        case FAM_CANCEL:
            if (k % 2 == 1) { x = -a[k - 1] * (1 + ldexp(er_rand_normal(), -(int)er_rand_int(8, 30))); y = b[k - 1]; }
            else if (k == K - 1) { x = ldexp(x, -20); }
            break;
        case FAM_WIDE: {
            int span = er_format_emax(fa) - er_format_emin(fa);
            x = ldexp(1 + er_rand_unit(), er_format_emin(fa) + (int)er_rand_int(0, span)) * (er_rand64() & 1 ? -1 : 1);
            span = er_format_emax(fb) - er_format_emin(fb);
            y = ldexp(1 + er_rand_unit(), er_format_emin(fb) + (int)er_rand_int(0, span)) * (er_rand64() & 1 ? -1 : 1);
            break;
        }
        case FAM_SUBNORMAL: {
            /* products near F's underflow threshold: a around 2^ea, b around 2^(emin_F - ea + small) */
            int ea = (er_format_emin(fa) + er_format_emax(fa)) / 2 + (int)er_rand_int(-3, 3);
            int eb = er_format_emin(F) - ea + (int)er_rand_int(-er_format_precision(F) - 2, 2);
            if (eb < er_format_emin(fb) - er_format_precision(fb) + 1) eb = er_format_emin(fb);
            x = ldexp(x, ea);
            y = ldexp(y, eb);
            break;
        }
        case FAM_NEAR_OVERFLOW: {
            double target = er_format_max(F) / K * ldexp(1.0, (int)er_rand_int(-1, 1)) * (0.6 + er_rand_unit());
            int e = (int)floor(log2(target) / 2);
            x = ldexp(fabs(x) + 0.5, e) * (er_rand64() % 4 == 0 ? -1 : 1);
            y = ldexp(fabs(y) + 0.5, (int)floor(log2(target)) - e);
            break;
        }
        case FAM_TIES: {
            /* power-of-two multiples around the compute format's last bit: partial sums land on ties */
            static const double m[] = {1, 1, 3, -1, 0.5, -3};
            x = ldexp(m[er_rand64() % 6], (int)er_rand_int(-2, 2));
            y = er_rand64() % 3 ? ldexp(1.0, (int)er_rand_int(-pF - 1, 0)) : 1.0;
            break;
        }
        default: break;
        }
        a[k] = gen_to(fa, x);
        b[k] = gen_to(fb, y);
    }
}

/* One node of an evaluation: the exact value being rounded is computed with MPFR at a precision that makes
 * it exact; the rounding to F is the test oracle's (MPFR + mpfr_subnormalize), not exactref's code. */
typedef struct emu {
    er_format F;
    int faithful; /* each rounding picks down or up at random */
    mpfr_t t, u;
} emu;

static inline void emu_init(emu *e, er_format F) {
    e->F = F;
    e->faithful = 0;
    mpfr_init2(e->t, 4400);
    mpfr_init2(e->u, 4400);
}
static inline void emu_clear(emu *e) { mpfr_clear(e->t); mpfr_clear(e->u); }

/* The rounding of one operation: to nearest, or for faithful rounding down or up at random. */
static inline double emu_round(emu *e, mpfr_srcptr t) {
    mpfr_rnd_t r = e->faithful ? ((er_rand64() & 1) ? MPFR_RNDU : MPFR_RNDD) : MPFR_RNDN;
    return er_oracle_round(e->F, t, r, ER_OVERFLOW_IEEE);
}

/* fl_F(x + y) for F-values (doubles) x, y; IEEE special values follow. */
static inline double emu_add(emu *e, double x, double y) {
    if (!isfinite(x) || !isfinite(y)) return x + y; /* inf + inf, inf - inf = NaN, NaN */
    mpfr_set_d(e->t, x, MPFR_RNDN);
    mpfr_add_d(e->t, e->t, y, MPFR_RNDN); /* exact at 4400 bits */
    if (mpfr_zero_p(e->t)) return (signbit(x) && signbit(y)) ? -0.0 : 0.0;
    return emu_round(e, e->t);
}
/* fl_F(a*b) */
static inline double emu_mul(emu *e, double a, double b) {
    if (!isfinite(a) || !isfinite(b)) return a * b;
    mpfr_set_d(e->t, a, MPFR_RNDN);
    mpfr_mul_d(e->t, e->t, b, MPFR_RNDN);
    if (mpfr_zero_p(e->t)) return (signbit(a) != signbit(b)) ? -0.0 : 0.0;
    return emu_round(e, e->t);
}
/* fl_F(a*b + y) */
static inline double emu_fma(emu *e, double a, double b, double y) {
    if (isfinite(a) && isfinite(b) && isinf(y)) return y; /* a finite product plus an infinity (IEEE fma) */
    if (!isfinite(a) || !isfinite(b) || !isfinite(y)) return a * b + y;
    mpfr_set_d(e->t, a, MPFR_RNDN);
    mpfr_mul_d(e->t, e->t, b, MPFR_RNDN);
    mpfr_add_d(e->t, e->t, y, MPFR_RNDN);
    if (mpfr_zero_p(e->t)) return (signbit(a) != signbit(b) && signbit(y)) ? -0.0 : 0.0;
    return emu_round(e, e->t);
}

/* A random correct evaluation of sum a_k b_k: products are taken in a random order and combined by a random
 * binary tree; with fma_mode 0 every product is rounded first, 1 every product is fused into an addition
 * when it meets a computed partial sum, 2 each choice at random. Returns the compute-format result. */
static inline double emu_dot_random_init(emu *e, const double *a, const double *b, int K, int fma_mode, int has_init,
                                         double init);
static inline double emu_dot_random(emu *e, const double *a, const double *b, int K, int fma_mode) {
    return emu_dot_random_init(e, a, b, K, fma_mode, 0, 0.0);
}
/* The same with one more item, an already computed value `init` (a running total fused into the sum). */
static inline double emu_dot_random_init(emu *e, const double *a, const double *b, int K, int fma_mode, int has_init,
                                         double init) {
    if (K == 0) return has_init ? init : 0.0;
    double *val = malloc(sizeof(double) * (size_t)(K + 1));
    int *prod = malloc(sizeof(int) * (size_t)(K + 1));
    int n = K + (has_init != 0);
    for (int k = 0; k < K; k++) prod[k] = k;
    for (int k = 0; k < n; k++) val[k] = NAN;
    if (has_init) { prod[K] = -1; val[K] = init; }
    /* shuffle */
    for (int k = n - 1; k > 0; k--) {
        int j = (int)(er_rand64() % (uint64_t)(k + 1)), t = prod[k];
        double v = val[k];
        prod[k] = prod[j]; prod[j] = t;
        val[k] = val[j]; val[j] = v;
    }
    while (n > 1) {
        int i = (int)(er_rand64() % (uint64_t)n), j = (int)(er_rand64() % (uint64_t)(n - 1));
        if (j >= i) j++;
        if (i > j) { int t = i; i = j; j = t; }
        double r;
        int fuse = fma_mode == 1 || (fma_mode == 2 && (er_rand64() & 1));
        /* make item i a computed value when fusing needs one */
        if (prod[i] >= 0 && prod[j] >= 0) {
            if (fuse) { val[i] = emu_mul(e, a[prod[i]], b[prod[i]]); prod[i] = -1; }
        }
        if (prod[i] >= 0 && prod[j] < 0 && fuse) r = emu_fma(e, a[prod[i]], b[prod[i]], val[j]);
        else if (prod[j] >= 0 && prod[i] < 0 && fuse) r = emu_fma(e, a[prod[j]], b[prod[j]], val[i]);
        else {
            double x = prod[i] >= 0 ? emu_mul(e, a[prod[i]], b[prod[i]]) : val[i];
            double y = prod[j] >= 0 ? emu_mul(e, a[prod[j]], b[prod[j]]) : val[j];
            r = emu_add(e, x, y);
        }
        val[i] = r;
        prod[i] = -1;
        val[j] = val[n - 1];
        prod[j] = prod[n - 1];
        n--;
    }
    double r = prod[0] >= 0 ? emu_mul(e, a[prod[0]], b[prod[0]]) : val[0];
    free(val);
    free(prod);
    return r;
}

/* fl_F(acc + a*b): fused (fma_mode 1), rounded product then added (0), or either at random (2). */
static inline double emu_step(emu *e, double acc, double a, double b, int fma_mode) {
    int fuse = fma_mode == 1 || (fma_mode == 2 && (er_rand64() & 1));
    return fuse ? emu_fma(e, a, b, acc) : emu_add(e, acc, emu_mul(e, a, b));
}

/* A random binary tree over finished values v[0..n) (adds only): any order. */
static inline double emu_sum_random(emu *e, double *v, int n) {
    if (n == 0) return 0.0;
    while (n > 1) {
        int i = (int)(er_rand64() % (uint64_t)n), j = (int)(er_rand64() % (uint64_t)(n - 1));
        if (j >= i) j++;
        double r = emu_add(e, v[i], v[j]);
        if (i > j) { int t = i; i = j; j = t; }
        v[i] = r;
        v[j] = v[n - 1];
        n--;
    }
    return v[0];
}

/* The operands of a broadcast batched matmul drawn from a family: a as [GA][M][K] and b as [GB][K][N], each row of a
 * and each column of b one gen_vectors draw (format fx, scaled for an fp32 accumulator). */
static inline void gen_batched(int fam, er_format fx, int GA, int GB, int M, int K, int N, double *a, double *b) {
    double *row = malloc(sizeof(double) * (size_t)K), *col = malloc(sizeof(double) * (size_t)K);
    for (int64_t r = 0; r < (int64_t)GA * M; r++) {
        gen_vectors(fam, fx, fx, ER_FP32, K, row, col);
        for (int k = 0; k < K; k++) a[r * K + k] = row[k];
    }
    for (int64_t c = 0; c < (int64_t)GB * N; c++) {
        gen_vectors(fam, fx, fx, ER_FP32, K, row, col);
        for (int k = 0; k < K; k++) b[(c / N * K + k) * N + c % N] = col[k];
    }
    free(row);
    free(col);
}

/* Views over A, B and C of a batched matmul: [GA, 1, M, K] x [GB, K, N] -> [GA, GB, M, N] when batched, else 2-D. */
static inline void view_batched(er_tensor *tA, er_tensor *tB, er_tensor *tC, er_format fx, er_format fo, int batched, int GA,
                                int GB, int M, int K, int N, void *A, void *B, void *C) {
    if (batched) {
        er_tensor_view(tA, fx, 4, (int64_t[]){GA, 1, M, K}, NULL, A);
        er_tensor_view(tB, fx, 3, (int64_t[]){GB, K, N}, NULL, B);
        er_tensor_view(tC, fo, 4, (int64_t[]){GA, GB, M, N}, NULL, C);
    } else {
        er_tensor_view(tA, fx, 2, (int64_t[]){M, K}, NULL, A);
        er_tensor_view(tB, fx, 2, (int64_t[]){K, N}, NULL, B);
        er_tensor_view(tC, fo, 2, (int64_t[]){M, N}, NULL, C);
    }
}

/* Outputs for a reference's elements (row-major, nc of them, format fo, stored into C): the correctly rounded result
 * moved by 0 to about 2^20 ulps, and with `specials` one in 50 NaN or infinite. */
static inline void gen_outputs_near(const er_ref *ref, er_format fo, int64_t nc, int specials, void *C) {
    int nd;
    int64_t shape[ER_MAX_DIMS], coord[ER_MAX_DIMS];
    ck_assert_int_eq(er_ref_shape(ref, &nd, shape), ER_OK);
    for (int64_t e = 0; e < nc; e++) {
        int64_t rem = e;
        for (int d = nd - 1; d >= 0; d--) { coord[d] = rem % shape[d]; rem /= shape[d]; }
        double r;
        ck_assert_int_eq(er_ref_exact(ref, coord, fo, NULL, &r), ER_OK);
        int steps = er_rand64() % 3 == 0 ? 0 : (int)(er_rand64() % (1u << (er_rand64() % 21)));
        if (isfinite(r)) r += (er_rand64() & 1 ? 1 : -1) * steps * er_format_ulp(fo, r);
        if (specials && er_rand64() % 50 == 0) r = er_rand64() & 1 ? NAN : INFINITY;
        er_round_double(&r, fo, r, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        er_store(C, fo, e, r);
    }
}

/* Outputs of a kernel with a bug for a matmul's elements (outputs tC over C, nc of them, format fo): drawn by
 * gen_outputs_near, their sets read into lo and hi (er_covers_sets under std), then each moved beyond one of its set's
 * ends by 1 to 2^19 output ulps, or by 1 to 3 with ties (the worst among many equals); with mixed, a tenth left as
 * drawn (and those whose set has no finite part). */
static inline void gen_outputs_outside(const er_ref *ref, const er_tensor *tC, const er_standard *std, er_format fo,
                                       int64_t nc, int ties, int mixed, double *lo, double *hi, void *C) {
    gen_outputs_near(ref, fo, nc, 0, C);
    er_report r;
    ck_assert_int_eq(er_covers_sets(&r, ref, tC, std, lo, hi, NULL), ER_OK);
    er_report_clear(&r);
    for (int64_t e = 0; e < nc; e++) {
        if (isnan(lo[e]) || (mixed && er_rand64() % 10 == 0)) continue;
        int up = er_rand64() & 1;
        double d = ties ? (double)er_rand_int(1, 3) : (double)(1 + er_rand64() % (1u << (er_rand64() % 20))), y;
        er_round_double(&y, fo, up ? hi[e] + d * er_format_ulp(fo, hi[e]) : lo[e] - d * er_format_ulp(fo, lo[e]),
                        ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        er_store(C, fo, e, y);
    }
}


/* Whether every value of format x is one of acc (the accumulator holds the inputs: matmul, sum and mean refuse
 * inputs it does not hold, as a kernel converts them first). */
static inline int er_gen_held(er_format x, er_format acc) {
    return er_format_precision(x) <= er_format_precision(acc) && er_format_max(x) <= er_format_max(acc) &&
           er_format_min_subnormal(x) >= er_format_min_subnormal(acc);
}

/* Sums on an fp32 rounding tie and a hair either side of one (fast-path.md, Lemma F5), A [16 x 5], B [5 x 13], C
 * [16 x 13] as floats: element (i, j) for j >= 1 sums 1 + i 2^-20, 2^-24 (together the midpoint between two floats)
 * and t_j 2^-80 with t_j in {1, 0, -1} (columns 1, 2, 3, then again), which a sum in double loses; the output is the
 * float below the midpoint in columns 1 to 3, 7 to 9, the one above it in 4 to 6, 10 to 12. Column 0 cancels
 * 1 + i 2^-20 against itself and adds 2^-10, its output that: a set about 2^-10 wide relative to its size, met first,
 * so that the others' sets cannot be the widest. */
enum { ER_TIE_M = 16, ER_TIE_K = 5, ER_TIE_N = 13 };
static inline void gen_tie_sums(float *A, float *B, float *C) {
    enum { M = ER_TIE_M, K = ER_TIE_K, N = ER_TIE_N };
    for (int i = 0; i < M; i++) {
        A[i * K + 0] = A[i * K + 3] = 1.0f + (float)i * 0x1p-20f;
        A[i * K + 1] = 0x1p-24f;
        A[i * K + 2] = 0x1p-80f;
        A[i * K + 4] = 0x1p-10f;
    }
    for (int j = 0; j < N; j++) {
        float col[K] = {1.0f, 1.0f, (float)(1 - (j - 1) % 3), 0.0f, 0.0f}; /* t: 1, 0, -1 */
        if (j == 0) col[1] = col[2] = 0.0f, col[3] = -1.0f, col[4] = 1.0f;
        for (int k = 0; k < K; k++) B[k * N + j] = col[k];
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) /* the float below the midpoint, or the one above it */
            C[i * N + j] = j == 0 ? 0x1p-10f : 1.0f + (float)i * 0x1p-20f + (((j - 1) / 3) % 2 ? 0x1p-23f : 0.0f);
}

/* The logit x_k moved so that exp(x_j - m) / S lies nearest mid (the rows of the tests of softmax's open elements,
 * softmax.md, Lemma S7): S (s: the row's sum of exp(x_i - m) before the move) must become e_j / mid (ej: exp(x_j - m)),
 * and x_k's exp takes the difference. t and u: scratch at s's precision (u may be ej). Returns the new x_k rounded to
 * fp32. */
static inline float er_gen_knob_to_mid(double xk, double m, mpfr_srcptr s, mpfr_srcptr ej, double mid, mpfr_ptr t,
                                       mpfr_ptr u) {
    mpfr_div_d(t, ej, mid, MPFR_RNDN);
    mpfr_sub(t, t, s, MPFR_RNDN);
    mpfr_set_d(u, xk, MPFR_RNDN);
    mpfr_sub_d(u, u, m, MPFR_RNDN);
    mpfr_exp(u, u, MPFR_RNDN);
    mpfr_add(u, u, t, MPFR_RNDN);
    mpfr_log(u, u, MPFR_RNDN);
    mpfr_add_d(u, u, m, MPFR_RNDN);
    return mpfr_get_flt(u, MPFR_RNDN);
}

#endif
