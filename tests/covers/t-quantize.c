/* t-quantize.c: quantisation with an amax (docs/algorithms/quantize.md). Implementations in the kernel's own
 * arithmetic (amax = max |x| per tensor, row or block; scale = qmax / amax in fp32 correctly rounded, as a reciprocal
 * then a product, or at either edge of a 2-ulp division, and the pow2 recipe; q = RN_q(RN_fp32(x scale)) saturated;
 * the inverse recipe, scale_inv = amax / qmax and q = RN_q(x / scale_inv), both divisions correctly rounded or at
 * an edge of 2 ulps)
 * are covered with q judged against their own scale; q on exact ties of the fp8 grid must round to even; degenerate
 * groups follow the stated rules; planted bugs (the scale inverted, amax over the wrong axis, another group's scale,
 * q truncated) are caught; bad calls are refused. */
#include <mpfr.h>
#include "../common/er_test.h"

enum { R = 16, C = 96, BLK = 32 };
static float x[R * C];
static uint8_t q[R * C];
static float amax[R * C], scale[R * C]; /* one per group: at most R * C */

static double rnd(er_format f, double v, er_round m, er_overflow ov) { double r; er_round_double(&r, f, v, m, ov); return r; }
static double rn(er_format f, double v, er_overflow ov) { return rnd(f, v, ER_ROUND_NEAREST, ov); }

static int64_t group_of(int gran, int64_t i) { return gran == 0 ? 0 : gran == 1 ? i / C : (i / C) * (C / BLK) + (i % C) / BLK; }
static int64_t groups(int gran) { return gran == 0 ? 1 : gran == 1 ? R : R * (C / BLK); }

/* A value within 2 ulps of the exact v and of its correct rounding, as far down (up = 0) or up as they allow: the
 * edges of a 2-ulp division. */
static float edge2(double v, int up) {
    float cr = (float)v, s = cr;
    for (int k = 0; k < 2; k++) {
        float t = nextafterf(s, up ? INFINITY : -INFINITY);
        double u = fabs((double)t - v), ulp = ldexp(1.0, ilogb(v) - 23);
        if (u <= 2 * ulp && fabs((double)t - cr) <= 2 * ldexp(1.0, ilogb(cr) - 23)) s = t;
    }
    return s;
}

/* scale = qmax / a as a kernel computes it: how 0 correctly rounded, 1 reciprocal then product, 2 and 3 the lower and
 * upper edges of a 2-ulp division (within 2 ulps of the exact quotient and of the correctly rounded one), 4 pow2.
 * The inverse recipe, scale_inv = a / qmax: how 5 correctly rounded, 6 a times RN(1 / qmax), 7 and 8 the edges of a
 * 2-ulp division (and q's division x / scale_inv at the same edge). */
static float kernel_scale(double qmax, float a, int how) {
    if (how >= 5) {
        if (how == 6) return a * (float)(1.0 / qmax);
        return how >= 7 ? edge2(a / qmax, how == 8) : (float)(a / qmax);
    }
    float cr = (float)(qmax / a);
    if (how == 1) return (float)qmax * (1.0f / a);
    if (how == 4) { int e; frexp(cr, &e); return ldexpf(1.0f, e - 1); }
    if (how >= 2) return edge2(qmax / a, how == 3);
    return cr;
}

/* One kernel: amax, scale (how), q; bug 0 none, 1 scale inverted, 2 amax over columns, 3 the next group's scale for
 * q, 4 q truncated toward zero, 5 (the inverse recipe) x multiplied by scale_inv instead of divided. */
static void kernel(er_format qf, int gran, int how, int bug) {
    double qmax = qf == ER_FP8_E4M3FN ? 448.0 : 57344.0;
    int64_t G = groups(gran);
    for (int64_t g = 0; g < G; g++) amax[g] = 0;
    for (int64_t i = 0; i < R * C; i++) {
        int64_t g = bug == 2 && gran == 1 ? i % R : group_of(gran, i);
        amax[g] = fmaxf(amax[g], fabsf(x[i]));
    }
    for (int64_t g = 0; g < G; g++) scale[g] = bug == 1 ? (float)(amax[g] / qmax) : kernel_scale(qmax, amax[g], how);
    for (int64_t i = 0; i < R * C; i++) {
        int64_t g = group_of(gran, i);
        if (bug == 3) g = (g + 1) % G;
        float p = x[i] * scale[g];
        if (how >= 5 && bug != 5) p = how >= 7 ? edge2((double)x[i] / scale[g], how == 8) : (float)((double)x[i] / scale[g]);
        double v = rnd(qf, p, bug == 4 ? ER_ROUND_ZERO : ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
        er_store(q, qf, i, v);
    }
}

static void check(er_report reps[3], er_format qf, int gran, int recipe) {
    er_tensor tx, tq, ta, ts;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, C}, NULL, x);
    er_tensor_view(&tq, qf, 2, (int64_t[]){R, C}, NULL, q);
    int64_t gs[2] = {R, C / BLK};
    if (gran == 0) { er_tensor_view(&ta, ER_FP32, 1, (int64_t[]){1}, NULL, amax); er_tensor_view(&ts, ER_FP32, 1, (int64_t[]){1}, NULL, scale); }
    else if (gran == 1) { er_tensor_view(&ta, ER_FP32, 1, gs, NULL, amax); er_tensor_view(&ts, ER_FP32, 1, gs, NULL, scale); }
    else { er_tensor_view(&ta, ER_FP32, 2, gs, NULL, amax); er_tensor_view(&ts, ER_FP32, 2, gs, NULL, scale); }
    er_ref *ref;
    ck_assert_int_eq(er_quantize(&ref, &tx, qf, (er_granularity)gran, BLK, (er_scale_recipe)recipe), ER_OK);
    const er_tensor *outs[3] = {&tq, &ta, &ts};
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 3, &std), ER_OK);
    er_ref_free(ref);
}

static int all3(er_report reps[3]) { return er_report_all(&reps[0]) && er_report_all(&reps[1]) && er_report_all(&reps[2]); }
static void clear3(er_report reps[3]) { for (int k = 0; k < 3; k++) er_report_clear(&reps[k]); }

static void fill(int tr) {
    er_test_reseed(1800 + (uint64_t)tr);
    double s = ldexp(1.0, (int)er_rand_int(-20, 20));
    for (int i = 0; i < R * C; i++) x[i] = (float)(er_rand_normal() * s * (tr % 3 == 2 ? er_rand_unit() * er_rand_unit() : 1.0));
}

START_TEST(kernels_are_covered) {
    static const er_format qfs[2] = {ER_FP8_E4M3FN, ER_FP8_E5M2};
    int trials = (int)(6 * er_test_multiplier());
    for (int tr = 0; tr < trials; tr++) {
        fill(tr);
        for (int f = 0; f < 2; f++)
            for (int gran = 0; gran < 3; gran++)
                for (int how = 0; how < 9; how++) {
                    kernel(qfs[f], gran, how, 0);
                    er_report reps[3];
                    check(reps, qfs[f], gran, how == 4 ? ER_RECIPE_POW2 : how >= 5 ? ER_RECIPE_INV : ER_RECIPE_AMAX);
                    for (int k = 0; k < 3; k++)
                        ER_REQUIRE_PASS(&reps[k], "trial %d, %s, granularity %d, scale %d: output %d", tr, f ? "e5m2" : "e4m3fn", gran, how, k);
                    /* q is determined by the kernel's scale: every element exact or covered, none merely allowed by
                     * another scale */
                    ER_REQUIRE(reps[0].counts[ER_CLASS_EXACT] + reps[0].counts[ER_CLASS_COVERED] == R * C, "q classes");
                    if (how == 0 || how == 5) ER_REQUIRE(reps[2].counts[ER_CLASS_EXACT] == groups(gran), "a correctly rounded scale is exact");
                    clear3(reps);
                }
    }
}
END_TEST

/* x scale on an exact midpoint of the fp8 grid: q is the even neighbour; the other one fails. */
START_TEST(ties_round_to_even) {
    /* amax = 448 gives scale 1: q = RN(x); x on midpoints of e4m3fn (3 mantissa bits): 1 + 1/16, 3 + 1/8, ... */
    for (int i = 0; i < R * C; i++) {
        int k = i % 7, e = i % 9 - 4;
        x[i] = ldexpf(1.0f + (2 * k + 1) / 16.0f, e) * (i % 2 ? -1.0f : 1.0f);
    }
    x[0] = 448.0f;
    kernel(ER_FP8_E4M3FN, 0, 0, 0);
    ck_assert(scale[0] == 1.0f);
    er_report reps[3];
    check(reps, ER_FP8_E4M3FN, 0, 0);
    ER_REQUIRE_PASS(&reps[0], "ties to even");
    clear3(reps);
    for (int i = 1; i < R * C; i++) { /* the odd neighbour: away from the even one */
        double even = rn(ER_FP8_E4M3FN, x[i], ER_OVERFLOW_SATURATE), odd = 2.0 * x[i] - even;
        er_store(q, ER_FP8_E4M3FN, i, odd);
    }
    check(reps, ER_FP8_E4M3FN, 0, 0);
    ck_assert_int_eq(reps[0].n_failed, R * C - 1);
    clear3(reps);
}
END_TEST

/* amax 0 (an all-zero group): scale 1 and q 0, or the plain quotient inf and q NaN; a NaN element: amax NaN and q
 * NaN. */
START_TEST(degenerate_groups) {
    fill(0);
    for (int j = 0; j < C; j++) x[j] = 0.0f;   /* row 0: zeros */
    x[C + 5] = NAN;                             /* row 1: a NaN */
    kernel(ER_FP8_E4M3FN, 1, 0, 0);
    for (int pass = 0; pass < 2; pass++) {
        scale[0] = pass ? INFINITY : 1.0f;
        for (int j = 0; j < C; j++) er_store(q, ER_FP8_E4M3FN, j, pass ? NAN : 0.0);
        amax[1] = NAN;
        scale[1] = 1.0f;
        for (int j = 0; j < C; j++) er_store(q, ER_FP8_E4M3FN, C + j, j == 5 ? NAN : rn(ER_FP8_E4M3FN, x[C + j], ER_OVERFLOW_SATURATE));
        er_report reps[3];
        check(reps, ER_FP8_E4M3FN, 1, 0);
        for (int k = 0; k < 3; k++) ER_REQUIRE_PASS(&reps[k], "degenerate groups, pass %d, output %d", pass, k);
        clear3(reps);
    }
    scale[0] = 2.0f; /* neither 1 nor the quotient */
    er_report reps[3];
    check(reps, ER_FP8_E4M3FN, 1, 0);
    ck_assert(!er_report_all(&reps[2]));
    clear3(reps);
}
END_TEST

START_TEST(planted_bugs_are_caught) {
    int trials = (int)(4 * er_test_multiplier());
    for (int tr = 0; tr < trials; tr++) {
        fill(tr);
        for (int bug = 1; bug <= 5; bug++) {
            kernel(ER_FP8_E4M3FN, 1, bug == 5 ? 5 : 0, bug);
            er_report reps[3];
            check(reps, ER_FP8_E4M3FN, 1, bug == 5 ? ER_RECIPE_INV : ER_RECIPE_AMAX);
            ER_REQUIRE(!all3(reps), "trial %d: bug %d passed", tr, bug);
            clear3(reps);
        }
    }
}
END_TEST

/* A GEMM whose epilogue quantises its accumulator per row (er_quantize_ref): fp16 A and B, each fp32 accumulator
 * its products in a random order, amax over the row's accumulators, the scale, q. Covered under any_order with
 * the kernel's amax and scale; the scale inverted and the amax of another row caught. */
START_TEST(gemm_epilogue_quantize) {
    enum { M = 12, K = 200, N = 40 };
    static uint16_t A[M * K], B[K * N];
    static double a[M * K], b[K * N], p[K];
    static float acc[M * N];
    static uint8_t qq[M * N];
    static float am[M], sc[M];
    int trials = (int)(4 * er_test_multiplier());
    for (int tr = 0; tr < trials; tr++) {
        er_test_reseed(1850 + (uint64_t)tr);
        for (int i = 0; i < M * K; i++) { a[i] = rn(ER_FP16, er_rand_normal(), ER_OVERFLOW_IEEE); er_store(A, ER_FP16, i, a[i]); }
        for (int i = 0; i < K * N; i++) { b[i] = rn(ER_FP16, er_rand_normal(), ER_OVERFLOW_IEEE); er_store(B, ER_FP16, i, b[i]); }
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                for (int k = 0; k < K; k++) p[k] = a[i * K + k] * b[k * N + j];
                for (int k = K - 1; k > 0; k--) { int r = (int)er_rand_int(0, k); double t = p[k]; p[k] = p[r]; p[r] = t; }
                float s = 0;
                for (int k = 0; k < K; k++) s += (float)p[k];
                acc[i * N + j] = s;
            }
        er_tensor tA, tB, tq, ta, ts;
        er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
        er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
        er_tensor_view(&tq, ER_FP8_E4M3FN, 2, (int64_t[]){M, N}, NULL, qq);
        er_tensor_view(&ta, ER_FP32, 1, (int64_t[]){M}, NULL, am);
        er_tensor_view(&ts, ER_FP32, 1, (int64_t[]){M}, NULL, sc);
        er_ref *mm, *ref;
        ck_assert_int_eq(er_matmul(&mm, &tA, &tB), ER_OK);
        ck_assert_int_eq(er_quantize_ref(&ref, mm, ER_FP8_E4M3FN, ER_GRAN_ROW, 0, ER_RECIPE_AMAX), ER_OK);
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
        for (int bug = 0; bug < 3; bug++) {
            for (int i = 0; i < M; i++) {
                float m = 0;
                for (int j = 0; j < N; j++) m = fmaxf(m, fabsf(acc[(bug == 2 ? (i + 1) % M : i) * N + j]));
                am[i] = m;
                sc[i] = bug == 1 ? m / 448.0f : 448.0f / m;
            }
            for (int i = 0; i < M * N; i++) er_store(qq, ER_FP8_E4M3FN, i, rn(ER_FP8_E4M3FN, acc[i] * sc[i / N], ER_OVERFLOW_SATURATE));
            const er_tensor *outs[3] = {&tq, &ta, &ts};
            er_report reps[3];
            ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 3, &std), ER_OK);
            if (bug == 0) for (int k = 0; k < 3; k++) ER_REQUIRE_PASS(&reps[k], "trial %d: output %d", tr, k);
            else ER_REQUIRE(!all3(reps), "trial %d: bug %d passed", tr, bug);
            clear3(reps);
        }
        /* the amax and scale the exact accumulators give, correctly rounded (max |S| and 448 / max |S| in MPFR):
         * exact on every row, so each row's exact amax is the library's (its candidates run on the threads) */
        mpfr_t S, mx;
        mpfr_inits2(256, S, mx, (mpfr_ptr)0);
        for (int i = 0; i < M; i++) {
            mpfr_set_zero(mx, 1);
            for (int j = 0; j < N; j++) {
                ck_assert_int_eq(er_ref_exact_mpfr(S, mm, (int64_t[]){i, j}), ER_OK);
                mpfr_abs(S, S, MPFR_RNDN);
                if (mpfr_cmp(S, mx) > 0) mpfr_set_prec(mx, mpfr_get_prec(S)), mpfr_set(mx, S, MPFR_RNDN);
            }
            am[i] = mpfr_get_flt(mx, MPFR_RNDN);
            mpfr_set_prec(S, mpfr_get_prec(mx) + 64);
            mpfr_ui_div(S, 448, mx, MPFR_RNDN);
            sc[i] = mpfr_get_flt(S, MPFR_RNDN);
        }
        mpfr_clears(S, mx, (mpfr_ptr)0);
        for (int i = 0; i < M * N; i++) er_store(qq, ER_FP8_E4M3FN, i, rn(ER_FP8_E4M3FN, acc[i] * sc[i / N], ER_OVERFLOW_SATURATE));
        const er_tensor *outs[3] = {&tq, &ta, &ts};
        er_report reps[3];
        ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 3, &std), ER_OK);
        for (int k = 0; k < 3; k++) ER_REQUIRE_PASS(&reps[k], "trial %d: output %d, exact amax", tr, k);
        ER_REQUIRE(reps[1].counts[ER_CLASS_EXACT] == M && reps[2].counts[ER_CLASS_EXACT] == M,
                   "trial %d: exact amax and scale %lld, %lld of %d", tr, (long long)reps[1].counts[ER_CLASS_EXACT],
                   (long long)reps[2].counts[ER_CLASS_EXACT], M);
        clear3(reps);
        er_ref_free(ref);
        er_ref_free(mm);
    }
}
END_TEST

START_TEST(refusals) {
    er_tensor tx, tq;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, C}, NULL, x);
    er_ref *ref = NULL;
    ck_assert_int_eq(er_quantize(&ref, &tx, ER_FP64, ER_GRAN_TENSOR, 0, ER_RECIPE_AMAX), ER_ERR_FORMAT);
    ck_assert_int_eq(er_quantize(&ref, &tx, ER_FP8_E4M3FN, ER_GRAN_BLOCK, 0, ER_RECIPE_AMAX), ER_ERR_INVALID);
    ck_assert_int_eq(er_quantize(&ref, &tx, ER_FP8_E4M3FN, (er_granularity)3, 0, ER_RECIPE_AMAX), ER_ERR_INVALID);
    ck_assert_int_eq(er_quantize(&ref, &tx, ER_FP8_E4M3FN, ER_GRAN_ROW, 0, (er_scale_recipe)8), ER_ERR_INVALID);
    ck_assert_int_eq(er_quantize(&ref, &tx, ER_FP4_E2M1FN, ER_GRAN_ROW, 0, ER_RECIPE_NVFP4), ER_ERR_INVALID);
    ck_assert_int_eq(er_quantize(&ref, NULL, ER_FP8_E4M3FN, ER_GRAN_ROW, 0, ER_RECIPE_AMAX), ER_ERR_NULL);
    ck_assert(ref == NULL);
    ck_assert_int_eq(er_quantize(&ref, &tx, ER_FP16, ER_GRAN_ROW, 0, ER_RECIPE_AMAX), ER_OK);
    er_standard std;
    er_report rep;
    er_tensor_view(&tq, ER_FP16, 2, (int64_t[]){R, C}, NULL, q);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "compute=bf16"), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &tq, &std), ER_ERR_STANDARD); /* fp32 x in bf16 */
    er_report_clear(&rep);
    ck_assert_int_eq(er_standard_parse(&std, "sequential", NULL), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &tq, &std), ER_ERR_STANDARD);
    er_report_clear(&rep);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "variance=welford"), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &tq, &std), ER_ERR_STANDARD);
    er_report_clear(&rep);
    /* an amax of the wrong shape */
    er_tensor ta;
    er_tensor_view(&ta, ER_FP32, 1, (int64_t[]){R + 1}, NULL, amax);
    const er_tensor *outs[3] = {NULL, &ta, NULL};
    er_report reps[3];
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 3, &std), ER_ERR_OUTPUT);
    ck_assert(!er_report_all(&reps[1]));
    clear3(reps);
    er_ref_free(ref);
}
END_TEST

/* The MX recipe through the C API (the spec's kernel in C: X = 2^(floor(log2 amax) - 2) stored as e8m0 bytes, q =
 * RN_e2m1(x / X) saturated, one byte per element): covered, and q exact; the ceiling's scale (a kernel rounding the
 * shared exponent up) caught; MX and NVFP4 on a reference's output taken. test_mx.py has the full families. */
START_TEST(mx_recipe_in_c) {
    enum { MR = 3, MC = 64, MB = 32 };
    float xs[MR * MC];
    uint8_t qb[MR * MC], sb[2][MR * MC / MB];
    er_test_reseed(31);
    for (int i = 0; i < MR * MC; i++) xs[i] = (float)(er_rand_normal() * ldexp(1.0, (int)er_rand_int(-30, 30)));
    for (int g = 0; g < MR * MC / MB; g++) {
        double a = 0;
        for (int i = 0; i < MB; i++) a = fmax(a, fabs(xs[g * MB + i]));
        int ex;
        double m = frexp(a, &ex);
        for (int up = 0; up < 2; up++) {
            int e = ex - 1 + (up && m != 0.5) - 2; /* e2m1: emax 2 */
            uint64_t bits;
            ck_assert_int_eq(er_encode(&bits, ER_FP8_E8M0FNU, ldexp(1.0, e), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT),
                             ER_OK);
            sb[up][g] = (uint8_t)bits;
            if (up) continue;
            for (int i = 0; i < MB; i++) {
                ck_assert_int_eq(er_encode(&bits, ER_FP4_E2M1FN, ldexp(xs[g * MB + i], -e), ER_ROUND_NEAREST,
                                           ER_OVERFLOW_SATURATE),
                                 ER_OK);
                qb[g * MB + i] = (uint8_t)bits;
            }
        }
    }
    er_tensor tx, tq, ts;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){MR, MC}, NULL, xs);
    er_tensor_view(&tq, ER_FP4_E2M1FN, 2, (int64_t[]){MR, MC}, NULL, qb);
    er_ref *ref;
    ck_assert_int_eq(er_quantize(&ref, &tx, ER_FP4_E2M1FN, ER_GRAN_BLOCK, MB, ER_RECIPE_MX), ER_OK);
    er_standard std;
    er_standard_init(&std);
    for (int up = 0; up < 2; up++) {
        er_tensor_view(&ts, ER_FP8_E8M0FNU, 2, (int64_t[]){MR, MC / MB}, NULL, sb[up]);
        const er_tensor *outs[3] = {&tq, NULL, &ts};
        er_report reps[3];
        ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 3, &std), ER_OK);
        if (!up) {
            ck_assert(er_report_all(&reps[0]) && er_report_all(&reps[2]));
            ck_assert_int_eq(reps[0].counts[ER_CLASS_EXACT], MR * MC);
        } else ck_assert(!er_report_all(&reps[2]));
        clear3(reps);
    }
    er_ref_free(ref);
    /* MX and NVFP4 on a reference's output are taken (test_mx.py judges them: Lemmas Q8 and Q9) */
    er_ref *mm = NULL, *qr = NULL;
    er_tensor ta, tb;
    er_tensor_view(&ta, ER_FP32, 2, (int64_t[]){2, 4}, NULL, xs);
    er_tensor_view(&tb, ER_FP32, 2, (int64_t[]){4, 2}, NULL, xs);
    ck_assert_int_eq(er_matmul(&mm, &ta, &tb), ER_OK);
    ck_assert_int_eq(er_quantize_ref(&qr, mm, ER_FP8_E4M3FN, ER_GRAN_ROW, 0, ER_RECIPE_MX), ER_OK);
    er_ref_free(qr);
    qr = NULL;
    ck_assert_int_eq(er_quantize_ref(&qr, mm, ER_FP4_E2M1FN, ER_GRAN_BLOCK, 16, ER_RECIPE_NVFP4), ER_OK);
    er_ref_free(qr);
    er_ref_free(mm);
}
END_TEST

/* Inputs the fuzzer found (docs/reliability.md): an accumulator whose set holds 0 and both infinities (values near
 * fp32's largest, which overflow in some orders) makes five corners for q's set; a block size near INT64_MAX gives one
 * block a row, not a count that wrapped to zero groups (and an all-zero q, which passed). */
/* One row of a GEMM epilogue quantised per row to e4m3fn: A (1 x k) and B (k x 2) of format f, the matmul and its
 * quantisation, and the views of the kernel's q (2 values), amax and scale. */
typedef struct row_q { er_tensor tA, tB, tq, ta, ts; er_ref *mm, *ref; } row_q;
static void row_q_make(row_q *r, er_format f, int64_t k, void *a, void *b, uint8_t *qq, float *am, float *sc) {
    er_tensor_view(&r->tA, f, 2, (int64_t[]){1, k}, NULL, a);
    er_tensor_view(&r->tB, f, 2, (int64_t[]){k, 2}, NULL, b);
    er_tensor_view(&r->tq, ER_FP8_E4M3FN, 2, (int64_t[]){1, 2}, NULL, qq);
    er_tensor_view(&r->ta, ER_FP32, 1, (int64_t[]){1}, NULL, am);
    er_tensor_view(&r->ts, ER_FP32, 1, (int64_t[]){1}, NULL, sc);
    ck_assert_int_eq(er_matmul(&r->mm, &r->tA, &r->tB), ER_OK);
    ck_assert_int_eq(er_quantize_ref(&r->ref, r->mm, ER_FP8_E4M3FN, ER_GRAN_ROW, 0, ER_RECIPE_AMAX), ER_OK);
}
static void row_q_free(row_q *r) {
    er_ref_free(r->ref);
    er_ref_free(r->mm);
}

/* A GEMM epilogue whose q comes from another order of the sum than its amax (a kernel that recomputes the
 * accumulator): 2^25 + 3 - 2^25 in fp32 gives 3 or 4, so amax 3 and x 4 are both the standard's, and 4 (448 / 3)
 * = 597 overflows e4m3fn. Each conversion's rule is in q's set: NaN (a cast without saturation) and 448
 * (cvt.satfinite) are covered. */
START_TEST(overflowing_q_takes_each_rule) {
    _Float16 a[3] = {2048, 1, -2048}, b[6] = {16384, 0, 3, 1, 16384, 0};
    float am = 3, sc = (float)(448.0 / 3.0);
    uint8_t qq[2];
    row_q r;
    row_q_make(&r, ER_FP16, 3, a, b, qq, &am, &sc);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "compute=fp32"), ER_OK);
    for (int sat = 0; sat < 2; sat++) {
        qq[0] = sat ? 0x7e : 0x7f; /* 448, or NaN */
        uint64_t bits;
        er_encode(&bits, ER_FP8_E4M3FN, 1.0 * sc, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
        qq[1] = (uint8_t)bits;
        const er_tensor *outs[3] = {&r.tq, &r.ta, &r.ts};
        er_report reps[3];
        ck_assert_int_eq(er_covers_outputs(reps, r.ref, outs, 3, &std), ER_OK);
        for (int k = 0; k < 3; k++) ER_REQUIRE_PASS(&reps[k], "%s: output %d", sat ? "448" : "NaN", k);
        clear3(reps);
    }
    row_q_free(&r);
}
END_TEST

/* q's exactness where the exact quotient lies a hair from a midpoint of e4m3's grid and the base's brackets are
 * tight (a matmul below the fast path's size: RN64(S) and a double's ulp either side). Amax A = 4 - 0x1.f9fcdp-32 -
 * 2^-60 (RN64(A) 0x1.fffffffbe0cp+1 with A just under half an ulp above it), S = 0x1.5b6db6p-2 + 0x1.b58414p-27 +
 * 0x1.c02p-53 just over half an ulp below RN64(S): S 448 / A is 38 (1 - 1.4e-17), so q's correct rounding is 36 (38
 * the midpoint of 36 and 40). The brackets' corners, each two roundings from its quotient, all lie at or above 38
 * and round to 40: only the moved ends (Lemma Q3) reach below 38 and send the element to MPFR. 36 is exact. */
START_TEST(quotient_a_hair_below_a_midpoint_is_exact) {
    float a[6] = {4.0f, -0x1.f9fcdp-32f, -0x1p-60f, 0x1.5b6db6p-2f, 0x1.b58414p-27f, 0x1.c02p-53f};
    float b[12] = {1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1};
    float am = 4.0f, sc = 112.0f;
    uint8_t qq[2];
    uint64_t bits;
    er_encode(&bits, ER_FP8_E4M3FN, 448.0, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
    qq[0] = (uint8_t)bits;
    er_encode(&bits, ER_FP8_E4M3FN, 36.0, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
    qq[1] = (uint8_t)bits;
    row_q r;
    row_q_make(&r, ER_FP32, 6, a, b, qq, &am, &sc);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "compute=fp32"), ER_OK);
    const er_tensor *outs[3] = {&r.tq, &r.ta, &r.ts};
    er_report reps[3];
    ck_assert_int_eq(er_covers_outputs(reps, r.ref, outs, 3, &std), ER_OK);
    for (int k = 0; k < 3; k++) ER_REQUIRE_PASS(&reps[k], "output %d", k);
    ER_REQUIRE(er_report_count(&reps[0], ER_CLASS_EXACT) == 2, "q = 36 exact: %lld of 2 exact",
               (long long)er_report_count(&reps[0], ER_CLASS_EXACT));
    clear3(reps);
    row_q_free(&r);
}
END_TEST

START_TEST(fuzz_findings) {
    float a[6] = {3e38f, 3e38f, -3e38f, -3e38f, 1, -1}, b[6] = {1, 1, 1, 1, 1, 1}, am1 = 1, sc1 = 448;
    uint8_t q1 = 0;
    er_tensor tA, tB, tq, ta, ts;
    er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){1, 6}, NULL, a);
    er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){6, 1}, NULL, b);
    er_tensor_view(&tq, ER_FP8_E4M3FN, 2, (int64_t[]){1, 1}, NULL, &q1);
    er_tensor_view(&ta, ER_FP32, 1, (int64_t[]){1}, NULL, &am1);
    er_tensor_view(&ts, ER_FP32, 1, (int64_t[]){1}, NULL, &sc1);
    er_ref *mm, *ref;
    ck_assert_int_eq(er_matmul(&mm, &tA, &tB), ER_OK);
    ck_assert_int_eq(er_quantize_ref(&ref, mm, ER_FP8_E4M3FN, ER_GRAN_TENSOR, 0, ER_RECIPE_AMAX), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    const er_tensor *outs[3] = {&tq, &ta, &ts};
    er_report reps[3];
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 3, &std), ER_OK);
    ck_assert_int_eq(er_report_numel(&reps[0]), 1);
    clear3(reps);
    er_ref_free(ref);
    er_ref_free(mm);

    for (int i = 0; i < R * C; i++) x[i] = (float)(i % 7) - 3.0f;
    memset(q, 0, sizeof q);
    er_tensor tx, tqq;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, C}, NULL, x);
    er_tensor_view(&tqq, ER_FP8_E4M3FN, 2, (int64_t[]){R, C}, NULL, q);
    ck_assert_int_eq(er_quantize(&ref, &tx, ER_FP8_E4M3FN, ER_GRAN_BLOCK, INT64_MAX, ER_RECIPE_AMAX), ER_OK);
    int nd;
    int64_t shape[ER_MAX_DIMS];
    ck_assert_int_eq(er_ref_output_shape(ref, 1, &nd, shape), ER_OK);
    ck_assert_int_eq(nd, 2);
    ck_assert_int_eq(shape[0], R);
    ck_assert_int_eq(shape[1], 1);
    er_report rep;
    ck_assert_int_eq(er_covers(&rep, ref, &tqq, &std), ER_OK);
    ER_REQUIRE(!er_report_all(&rep), "an all-zero q passed");
    er_report_clear(&rep);
    er_ref_free(ref);

    /* groups of no element (fuzz_quantize): rows of 0 columns, and a tensor of none: amax is 0, max |x| over
     * nothing (the set held no value at all), and the scale the recipes' 1 */
    for (int gran = 0; gran < 2; gran++) {
        float am4[4] = {0, 0, 0, 0}, sc4[4] = {1, 1, 1, 1};
        er_tensor te, tqe, tae, tse;
        er_tensor_view(&te, ER_FP32, 2, (int64_t[]){4, 0}, NULL, x);
        er_tensor_view(&tqe, ER_FP8_E4M3FN, 2, (int64_t[]){4, 0}, NULL, q);
        er_tensor_view(&tae, ER_FP32, 1, (int64_t[]){gran ? 4 : 1}, NULL, am4);
        er_tensor_view(&tse, ER_FP32, 1, (int64_t[]){gran ? 4 : 1}, NULL, sc4);
        ck_assert_int_eq(er_quantize(&ref, &te, ER_FP8_E4M3FN, (er_granularity)gran, 0, ER_RECIPE_AMAX), ER_OK);
        const er_tensor *eo[3] = {&tqe, &tae, &tse};
        ck_assert_int_eq(er_covers_outputs(reps, ref, eo, 3, &std), ER_OK);
        for (int k = 0; k < 3; k++) ER_REQUIRE_PASS(&reps[k], "empty groups (granularity %d): output %d", gran, k);
        ck_assert_int_eq(reps[1].counts[ER_CLASS_EXACT], (gran ? 4 : 1));
        clear3(reps);
        am4[0] = 1;
        ck_assert_int_eq(er_covers_outputs(reps, ref, eo, 3, &std), ER_OK);
        ER_REQUIRE(!er_report_all(&reps[1]), "an amax of 1 over no element passed");
        clear3(reps);
        er_ref_free(ref);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("quantize");
    TCase *tc = tcase_create("quantize");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, kernels_are_covered);
    tcase_add_test(tc, ties_round_to_even);
    tcase_add_test(tc, degenerate_groups);
    tcase_add_test(tc, planted_bugs_are_caught);
    tcase_add_test(tc, gemm_epilogue_quantize);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, mx_recipe_in_c);
    tcase_add_test(tc, overflowing_q_takes_each_rule);
    tcase_add_test(tc, quotient_a_hair_below_a_midpoint_is_exact);
    tcase_add_test(tc, fuzz_findings);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
