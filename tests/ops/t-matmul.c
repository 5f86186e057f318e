/* t-matmul.c: the exact matmul reference against an independent MPFR computation (exact sums at 4500 bits,
 * rounded by the MPFR oracle), on random formats, families, batch broadcasting and strided views; the
 * special-value rules; the classification of known-wrong values. */
#include "../common/er_gen.h"

static const er_format fmts[] = {ER_FP16, ER_BF16, ER_FP32, ER_FP8_E4M3FN, ER_FP8_E5M2, ER_FP64, ER_TF32};

/* Exact sum of products of two strided vectors, at 4500 bits (products of doubles span < 4300 bits). */
static int oracle_dot(mpfr_t s, const er_tensor *A, const int64_t *ia, int adim, const er_tensor *B, const int64_t *ib, int bdim, int64_t K) {
    mpfr_t p;
    mpfr_init2(p, 4500);
    mpfr_set_zero(s, 1);
    int64_t ca[ER_MAX_DIMS], cb[ER_MAX_DIMS];
    memcpy(ca, ia, sizeof ca);
    memcpy(cb, ib, sizeof cb);
    int nan = 0, pinf = 0, ninf = 0;
    for (int64_t k = 0; k < K; k++) {
        ca[adim] = k;
        cb[bdim] = k;
        double a, b;
        er_tensor_get(&a, A, ca);
        er_tensor_get(&b, B, cb);
        if (isnan(a) || isnan(b) || (isinf(a) && b == 0) || (isinf(b) && a == 0)) { nan = 1; continue; }
        if (isinf(a) || isinf(b)) { if ((a < 0) != (b < 0)) ninf = 1; else pinf = 1; continue; }
        mpfr_set_d(p, a, MPFR_RNDN);
        mpfr_mul_d(p, p, b, MPFR_RNDN);
        mpfr_add(s, s, p, MPFR_RNDN);
    }
    mpfr_clear(p);
    if (nan || (pinf && ninf)) { mpfr_set_nan(s); return 0; }
    if (pinf) mpfr_set_inf(s, 1);
    if (ninf) mpfr_set_inf(s, -1);
    return 1;
}

START_TEST(exact_agrees_with_mpfr) {
    er_test_reseed(200);
    long cases = (long)(400 * er_test_multiplier());
    mpfr_t s, t;
    mpfr_init2(s, 4500);
    mpfr_init2(t, 64);
    long checked = 0;
    for (long c = 0; c < cases; c++) {
        er_format fa = fmts[er_rand64() % 7], fb = fmts[er_rand64() % 7];
        int fam = (int)(er_rand64() % FAM_COUNT);
        int64_t M = er_rand_int(1, 6), K = er_rand_int(0, 40), N = er_rand_int(1, 6);
        if (c % 10 == 0) K = er_rand_int(100, 700);
        /* batch: A [ba, M, K] or [M, K]; B [bb, K, N]; broadcasting when one of them is 1 or absent */
        int batched = (int)(er_rand64() % 3);
        int64_t ba = batched ? er_rand_int(1, 3) : 1, bb = batched == 2 ? (er_rand64() & 1 ? 1 : ba) : ba;
        if (batched == 2 && ba == 1) ba = er_rand_int(1, 3);
        /* A stored transposed (K-major) half the time, B with a row gap: strided views */
        int transA = (int)(er_rand64() & 1);
        int64_t gap = er_rand_int(0, 2);
        int64_t nA = ba * M * K, ldb = N + gap, nB = bb * K * ldb;
        double *va = malloc(sizeof(double) * (size_t)(K * (M > N ? M : N) * 2 + 1));
        double *vb = malloc(sizeof(double) * (size_t)(K * (M > N ? M : N) * 2 + 1));
        void *A = calloc((size_t)(nA ? nA : 1), 8), *B = calloc((size_t)(nB ? nB : 1), 8);
        for (int64_t q = 0; q < ba; q++)
            for (int64_t i = 0; i < M; i++) {
                gen_vectors(fam, fa, fb, ER_FP32, (int)K, va, vb);
                for (int64_t k = 0; k < K; k++) {
                    int64_t off = transA ? q * M * K + k * M + i : q * M * K + i * K + k;
                    if (fam == FAM_NORMAL && er_rand64() % 50 == 0) va[k] = (er_rand64() & 1) ? INFINITY : NAN;
                    er_store(A, fa, off, va[k]);
                }
            }
        for (int64_t q = 0; q < bb; q++)
            for (int64_t j = 0; j < N; j++) {
                gen_vectors(fam, fa, fb, ER_FP32, (int)K, va, vb);
                for (int64_t k = 0; k < K; k++) er_store(B, fb, q * K * ldb + k * ldb + j, vb[k]);
            }
        er_tensor tA, tB;
        int an = batched ? 3 : 2, bn = batched ? 3 : 2;
        int64_t shA[3], stA[3], shB[3], stB[3];
        if (batched) {
            shA[0] = ba; stA[0] = M * K; shA[1] = M; shA[2] = K;
            stA[1] = transA ? 1 : K; stA[2] = transA ? M : 1;
            shB[0] = bb; stB[0] = K * ldb; shB[1] = K; stB[1] = ldb; shB[2] = N; stB[2] = 1;
        } else {
            shA[0] = M; shA[1] = K; stA[0] = transA ? 1 : K; stA[1] = transA ? M : 1;
            shB[0] = K; stB[0] = ldb; shB[1] = N; stB[1] = 1;
        }
        ck_assert_int_eq(er_tensor_view(&tA, fa, an, shA, stA, A), ER_OK);
        ck_assert_int_eq(er_tensor_view(&tB, fb, bn, shB, stB, B), ER_OK);
        er_ref *ref;
        ER_REQUIRE(er_matmul(&ref, &tA, &tB) == ER_OK, "er_matmul: %s", er_last_error());
        int nd;
        int64_t shape[ER_MAX_DIMS];
        er_ref_shape(ref, &nd, shape);
        int64_t nb = batched ? (ba > bb ? ba : bb) : 1;
        ER_REQUIRE(nd == (batched ? 3 : 2) && shape[nd - 2] == M && shape[nd - 1] == N && (!batched || shape[0] == nb), "shape");
        /* Output: the oracle's correctly rounded result in fp32; every element must be EXACT. */
        float *C = malloc(sizeof(float) * (size_t)(nb * M * N));
        for (int64_t q = 0; q < nb; q++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    int64_t ia[ER_MAX_DIMS] = {0}, ib[ER_MAX_DIMS] = {0}, io[ER_MAX_DIMS] = {0};
                    if (batched) { ia[0] = ba == 1 ? 0 : q; ib[0] = bb == 1 ? 0 : q; io[0] = q; }
                    ia[an - 2] = i; ib[bn - 1] = j; io[nd - 2] = i; io[nd - 1] = j;
                    oracle_dot(s, &tA, ia, an - 1, &tB, ib, bn - 2, K);
                    /* exact value through the MPFR API */
                    mpfr_t x;
                    mpfr_init2(x, 2);
                    ER_REQUIRE(er_ref_exact_mpfr(x, ref, io) == ER_OK, "exact_mpfr");
                    ER_REQUIRE((mpfr_nan_p(s) && mpfr_nan_p(x)) || mpfr_equal_p(s, x),
                               "exact value differs at case %ld (%s x %s, K %lld, family %s); " ER_SEED_MSG_FMT, c,
                               er_format_name(fa), er_format_name(fb), (long long)K, fam_names[fam], ER_SEED_ARGS);
                    mpfr_clear(x);
                    for (int fo = 0; fo < 7; fo++) {
                        double want = er_oracle_round(fmts[fo], s, MPFR_RNDN, ER_OVERFLOW_DEFAULT), got;
                        ER_REQUIRE(er_ref_exact(ref, io, fmts[fo], NULL, &got) == ER_OK, "exact");
                        ER_REQUIRE(er_same(got, want) || (got == 0 && want == 0),
                                   "correctly rounded %s value %a, oracle %a, case %ld; " ER_SEED_MSG_FMT,
                                   er_format_name(fmts[fo]), got, want, c, ER_SEED_ARGS);
                    }
                    C[(q * M + i) * N + j] = (float)er_oracle_round(ER_FP32, s, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
                    checked++;
                }
        er_tensor tC;
        int64_t shC[3] = {nb, M, N};
        er_tensor_view(&tC, ER_FP32, nd, batched ? shC : shC + 1, NULL, C);
        /* er_ref_rounded writes the same correctly rounded values */
        {
            float *R = malloc(sizeof(float) * (size_t)(nb * M * N) + 1);
            er_tensor tR = tC;
            tR.data = R;
            ER_REQUIRE(er_ref_rounded(&tR, ref) == ER_OK, "er_ref_rounded: %s", er_last_error());
            for (int64_t q = 0; q < nb * M * N; q++)
                ER_REQUIRE(er_same(R[q], C[q]) || (R[q] == 0 && C[q] == 0) || (isnan(R[q]) && isnan(C[q])),
                           "er_ref_rounded %a vs %a at %lld", R[q], C[q], (long long)q);
            free(R);
        }
        er_standard std;
        er_standard_init(&std);
        if (fa == ER_FP64 || fb == ER_FP64) std.compute = ER_FP64; /* fp32 does not hold them */
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &tC, &std) == ER_OK, "covers: %s", er_last_error());
        ER_REQUIRE(rep.counts[ER_CLASS_EXACT] == rep.n, "the correctly rounded output is not all EXACT in case %ld; " ER_SEED_MSG_FMT, c, ER_SEED_ARGS);
        er_report_clear(&rep);
        er_ref_free(ref);
        free(va); free(vb); free(A); free(B); free(C);
    }
    mpfr_clears(s, t, (mpfr_ptr)0);
    ck_assert_int_gt(checked, 1000);
}
END_TEST

/* A 1 x K times K x 1 product with given values; output fp32 value y; returns the class. */
static er_class classify1(const double *a, const double *b, int K, er_format fin, er_format fout, double y,
                          const char *opts, er_report *keep) {
    uint64_t A[64], B[64], C[1];
    for (int k = 0; k < K; k++) { er_store(A, fin, k, a[k]); er_store(B, fin, k, b[k]); }
    er_store(C, fout, 0, y);
    er_tensor tA, tB, tC;
    er_tensor_view(&tA, fin, 2, (int64_t[]){1, K}, NULL, A);
    er_tensor_view(&tB, fin, 2, (int64_t[]){K, 1}, NULL, B);
    er_tensor_view(&tC, fout, 2, (int64_t[]){1, 1}, NULL, C);
    er_report rep;
    ck_assert_int_eq(er_matmul_covers(&rep, &tA, &tB, &tC, "any_order", opts), ER_OK);
    er_class c = (er_class)rep.classes[0];
    if (keep) *keep = rep; else er_report_clear(&rep);
    return c;
}

START_TEST(special_values) {
    double one[2] = {1, 1};
    double a[2], b[2];
    /* NaN input: NaN for every order */
    a[0] = NAN; a[1] = 1; b[0] = 1; b[1] = 1;
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP32, NAN, NULL, NULL), ER_CLASS_EXACT);
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP32, 2.0, NULL, NULL), ER_CLASS_NAN_MISSING);
    /* inf * 0 */
    a[0] = INFINITY; b[0] = 0;
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP32, NAN, NULL, NULL), ER_CLASS_EXACT);
    /* +inf and -inf terms */
    a[0] = INFINITY; b[0] = 1; a[1] = -INFINITY; b[1] = 1;
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP32, NAN, NULL, NULL), ER_CLASS_EXACT);
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP32, INFINITY, NULL, NULL), ER_CLASS_NAN_MISSING);
    /* +inf term alone: +inf required */
    a[1] = 5;
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP32, INFINITY, NULL, NULL), ER_CLASS_EXACT);
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP32, 1e30, NULL, NULL), ER_CLASS_INF_MISSING);
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP32, -INFINITY, NULL, NULL), ER_CLASS_INF_UNEXPECTED);
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP32, NAN, NULL, NULL), ER_CLASS_NAN_UNEXPECTED);
    /* finite inputs: NaN or inf where no order makes them */
    ck_assert_int_eq(classify1(one, one, 2, ER_FP32, ER_FP32, NAN, NULL, NULL), ER_CLASS_NAN_UNEXPECTED);
    ck_assert_int_eq(classify1(one, one, 2, ER_FP32, ER_FP32, INFINITY, NULL, NULL), ER_CLASS_INF_UNEXPECTED);
    ck_assert_int_eq(classify1(one, one, 2, ER_FP32, ER_FP32, 2.0, NULL, NULL), ER_CLASS_EXACT);
    ck_assert_int_eq(classify1(one, one, 2, ER_FP16, ER_FP32, 2.0 + 0x1p-22, NULL, NULL), ER_CLASS_OUTSIDE);
    /* fp16 output of an exact value beyond 65504: +inf is the correctly rounded result */
    a[0] = 60000; a[1] = 60000; b[0] = 1; b[1] = 1;
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP16, INFINITY, NULL, NULL), ER_CLASS_EXACT);
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP16, 65504, NULL, NULL), ER_CLASS_INF_MISSING);
    /* fp16 accumulation: 60000 + 60000 overflows in every order; opposite overflows can make NaN */
    a[0] = 60000; a[1] = 60000;
    ck_assert_int_eq(classify1(a, b, 2, ER_FP16, ER_FP16, INFINITY, "compute=fp16", NULL), ER_CLASS_EXACT);
    {
        double x[4] = {60000, 60000, -60000, -60000}, y[4] = {1, 1, 1, 1};
        /* exact 0; but an order adding the positive pair first overflows to +inf, then -inf: NaN */
        ck_assert_int_eq(classify1(x, y, 4, ER_FP16, ER_FP16, 0.0, "compute=fp16", NULL), ER_CLASS_EXACT);
        ck_assert_int_eq(classify1(x, y, 4, ER_FP16, ER_FP16, NAN, "compute=fp16", NULL), ER_CLASS_OVERFLOW);
        ck_assert_int_eq(classify1(x, y, 4, ER_FP16, ER_FP16, INFINITY, "compute=fp16", NULL), ER_CLASS_OVERFLOW);
        /* fp32 accumulation: no order overflows */
        ck_assert_int_eq(classify1(x, y, 4, ER_FP16, ER_FP16, NAN, "compute=fp32", NULL), ER_CLASS_NAN_UNEXPECTED);
    }
    /* e4m3fn output: saturating by default; the nan rule on request */
    a[0] = 300; a[1] = 300; b[0] = 1; b[1] = 1;
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP8_E4M3FN, 448, NULL, NULL), ER_CLASS_EXACT);
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP8_E4M3FN, NAN, "overflow=nan", NULL), ER_CLASS_EXACT);
    /* signed zero is not checked */
    a[0] = 1; a[1] = -1; b[0] = 1; b[1] = 1;
    ck_assert_int_eq(classify1(a, b, 2, ER_FP32, ER_FP32, -0.0, NULL, NULL), ER_CLASS_EXACT);
}
END_TEST

/* The exact sum of a[k] b[k] (formats fa, fb, K values) from er_matmul equals MPFR's: as a summary (er_ref_exact_mpfr,
 * in the bits it needs) and rounded to double. */
static void require_exact_dot(er_format fa, er_format fb, const double *a, const double *b, int K, const char *what) {
    uint64_t *A = malloc(8 * (size_t)K), *B = malloc(8 * (size_t)K);
    mpfr_t s, t, x;
    mpfr_inits2(300, s, t, (mpfr_ptr)0);
    mpfr_set_zero(s, 1);
    for (int k = 0; k < K; k++) {
        er_store(A, fa, k, a[k]);
        er_store(B, fb, k, b[k]);
        mpfr_set_d(t, a[k], MPFR_RNDN);
        mpfr_mul_d(t, t, b[k], MPFR_RNDN);
        mpfr_add(s, s, t, MPFR_RNDN); /* exact at 300 bits */
    }
    er_tensor tA, tB;
    er_tensor_view(&tA, fa, 2, (int64_t[]){1, K}, NULL, A);
    er_tensor_view(&tB, fb, 2, (int64_t[]){K, 1}, NULL, B);
    er_ref *r;
    ck_assert_int_eq(er_matmul(&r, &tA, &tB), ER_OK);
    mpfr_init2(x, 2);
    ck_assert_int_eq(er_ref_exact_mpfr(x, r, (int64_t[]){0, 0}), ER_OK);
    ck_assert_msg(mpfr_equal_p(x, s), "%s: the exact sum differs", what);
    double got;
    er_ref_exact(r, (int64_t[]){0, 0}, ER_FP64, NULL, &got);
    ck_assert_msg(got == mpfr_get_d(s, MPFR_RNDN), "%s: %a vs %a", what, got, mpfr_get_d(s, MPFR_RNDN));
    er_ref_free(r);
    mpfr_clears(s, t, x, (mpfr_ptr)0);
    free(A);
    free(B);
}

/* The extremes of the 128-bit integer path (fp16 and fp8 operands): the largest and smallest products, long K. */
START_TEST(integer_path_extremes) {
    enum { KK = 4097 };
    static double a[KK], b[KK];
    for (int trial = 0; trial < 3; trial++) {
        for (int k = 0; k < KK; k++) {
            a[k] = trial == 0 ? 65504.0 : trial == 1 ? 0x1p-24 : (k % 3 ? -65504.0 : 0x1p-24);
            b[k] = trial == 0 ? (k % 2 ? -65504.0 : 65504.0) : trial == 1 ? -0x1p-24 : 65504.0;
        }
        require_exact_dot(ER_FP16, ER_FP16, a, b, KK, trial == 0 ? "fp16 largest" : trial == 1 ? "fp16 smallest" : "fp16 mixed");
    }
    /* fp8: e5m2 extremes times e4m3 extremes */
    for (int k = 0; k < KK; k++) {
        a[k] = k % 2 ? 57344.0 : 0x1p-16;
        b[k] = k % 5 ? -448.0 : 0x1p-9;
    }
    require_exact_dot(ER_FP8_E5M2, ER_FP8_E4M3FN, a, b, KK, "fp8 extremes");
}
END_TEST

START_TEST(empty_and_degenerate) {
    /* K = 0: every element is an empty sum, exactly 0 */
    float C[6] = {0, 0, 0, 0, 0, 0};
    float dummy = 1;
    er_tensor tA, tB, tC;
    ck_assert_int_eq(er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){2, 0}, NULL, &dummy), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){0, 3}, NULL, &dummy), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){2, 3}, NULL, C), ER_OK);
    er_report rep;
    ck_assert_int_eq(er_matmul_covers(&rep, &tA, &tB, &tC, "any_order", NULL), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_EXACT], 6);
    er_report_clear(&rep);
    C[4] = 1e-30f;
    ck_assert_int_eq(er_matmul_covers(&rep, &tA, &tB, &tC, "any_order", NULL), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_OUTSIDE], 1);
    ck_assert_int_eq(rep.worst.coord[0], 1);
    ck_assert_int_eq(rep.worst.coord[1], 1);
    er_report_clear(&rep);
    /* M = 0: an empty output passes */
    ck_assert_int_eq(er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){0, 4}, NULL, NULL), ER_OK);
    float B12[12] = {0};
    ck_assert_int_eq(er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){4, 3}, NULL, B12), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){0, 3}, NULL, NULL), ER_OK);
    ck_assert_int_eq(er_matmul_covers(&rep, &tA, &tB, &tC, "any_order", NULL), ER_OK);
    ck_assert(er_report_all(&rep));
    ck_assert_int_eq(rep.n, 0);
    er_report_clear(&rep);
}
END_TEST

START_TEST(worst_and_report) {
    /* Three rows with errors of 1, 3 and 2 ulps beyond exact-product sets (K = 1, products exact in fp32). */
    uint16_t A[3], B[1];
    float C[3];
    double av[3] = {1.5, 3.25, -0.75};
    for (int i = 0; i < 3; i++) { uint64_t bits; er_encode(&bits, ER_FP16, av[i], ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); A[i] = (uint16_t)bits; }
    { uint64_t bits; er_encode(&bits, ER_FP16, 1.0, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); B[0] = (uint16_t)bits; }
    C[0] = nextafterf(1.5f, 2.0f);
    C[1] = nextafterf(nextafterf(nextafterf(3.25f, 4.0f), 4.0f), 4.0f);
    C[2] = nextafterf(nextafterf(-0.75f, -1.0f), -1.0f);
    er_tensor tA, tB, tC;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){3, 1}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){1, 1}, NULL, B);
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){3, 1}, NULL, C);
    er_report rep;
    ck_assert_int_eq(er_matmul_covers(&rep, &tA, &tB, &tC, "any_order", NULL), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_OUTSIDE], 3);
    ck_assert(!er_report_all(&rep));
    ck_assert_int_eq(rep.worst.index, 1);
    ck_assert(rep.worst.distance_ulps == 3.0);
    ck_assert(rep.worst.lo == 3.25 && rep.worst.hi == 3.25);
    ck_assert_int_eq(rep.n_first, 3);
    char text[4096], json[4096];
    size_t need;
    ck_assert_int_eq(er_report_text(&rep, text, sizeof text, &need), ER_OK);
    ck_assert_uint_eq(need, strlen(text));
    ck_assert_ptr_nonnull(strstr(text, "FAIL"));
    ck_assert_ptr_nonnull(strstr(text, "[1, 0] = 3.25000072 is outside: allowed [3.25, 3.25], 3 ulp beyond the edge"));
    ck_assert_int_eq(er_report_json(&rep, json, sizeof json, NULL), ER_OK);
    ck_assert_ptr_nonnull(strstr(json, "\"pass\": false"));
    ck_assert_ptr_nonnull(strstr(json, "\"outside\": 3"));
    /* too small a buffer: ER_ERR_BUFFER, the needed size, a NUL-terminated prefix */
    char small[16];
    ck_assert_int_eq(er_report_text(&rep, small, sizeof small, &need), ER_ERR_BUFFER);
    ck_assert_uint_eq(strlen(small), 15);
    ck_assert_uint_eq(need, strlen(text));
    ck_assert_int_eq(er_report_text(&rep, NULL, 0, &need), ER_ERR_BUFFER);
    er_report_clear(&rep);
    ck_assert_ptr_null(rep.classes);
    ck_assert(!er_report_all(&rep)); /* a cleared report is no call's verdict: it fails */
    er_report_clear(NULL);
}
END_TEST

int main(void) {
    Suite *s = suite_create("matmul");
    TCase *tc = tcase_create("matmul");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, exact_agrees_with_mpfr);
    tcase_add_test(tc, special_values);
    tcase_add_test(tc, empty_and_degenerate);
    tcase_add_test(tc, integer_path_extremes);
    tcase_add_test(tc, worst_and_report);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
