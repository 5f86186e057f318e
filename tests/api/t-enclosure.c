/* t-enclosure.c: er_ref_enclosure gives the sets er_covers classifies against: for each op (matmul exact and on the
 * BLAS fast path, scaled matmul, sum, mean, max, softmax, log_softmax, rmsnorm, layernorm's three outputs) and
 * several standards and output formats, lo and hi equal er_covers_sets', and an output passes er_covers exactly when
 * the enclosure contains it (its finite part, or a special value its flags allow), for outputs drawn around the
 * exact results, far from them, and special. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "../common/er_gen.h"

/* Whether the enclosure of one element contains y. */
static int contains(double lo, double hi, uint8_t f, double y) {
    if (isnan(y)) return (f & ER_ENCLOSURE_NAN) != 0;
    if (f & ER_ENCLOSURE_NAN_ONLY) return 0;
    if (isinf(y)) return (f & (y > 0 ? ER_ENCLOSURE_PINF : ER_ENCLOSURE_NINF)) != 0;
    return y >= lo && y <= hi;
}

/* Output `o` of ref in the contiguous view out (some of its elements moved to the enclosure's edges): the enclosure
 * against er_covers_sets and the report. */
static void require_enclosure_matches(const er_ref *ref, int o, const er_tensor *out, const char *order, const char *opts,
                                      const char *what) {
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, order, opts), ER_OK);
    int64_t n = 1;
    for (int i = 0; i < out->ndim; i++) n *= out->shape[i];
    double *lo = malloc(sizeof(double) * (size_t)n), *hi = malloc(sizeof(double) * (size_t)n);
    double *slo = malloc(sizeof(double) * (size_t)n), *shi = malloc(sizeof(double) * (size_t)n);
    uint8_t *fl = malloc((size_t)n);
    ER_REQUIRE(er_ref_enclosure(ref, o, &std, out->format, lo, hi, fl) == ER_OK, "%s: %s", what, er_last_error());
    /* every third output at an edge of its enclosure (an output of the set, where it has a finite part) */
    for (int64_t i = 0; i < n; i += 3)
        if (!isnan(lo[i])) er_store((void *)(uintptr_t)out->data, out->format, i, i % 2 ? lo[i] : hi[i]);
    int nout = er_ref_num_outputs(ref);
    er_report reps[3];
    const er_tensor *outs[3] = {NULL, NULL, NULL};
    double *los[3] = {NULL, NULL, NULL}, *his[3] = {NULL, NULL, NULL};
    outs[o] = out;
    los[o] = slo;
    his[o] = shi;
    ER_REQUIRE(er_covers_outputs_sets(reps, ref, outs, nout, &std, los, his, NULL) == ER_OK, "%s: %s", what, er_last_error());
    for (int64_t i = 0; i < n; i++) {
        ER_REQUIRE((lo[i] == slo[i] || (isnan(lo[i]) && isnan(slo[i]))) && (hi[i] == shi[i] || (isnan(hi[i]) && isnan(shi[i]))),
                   "%s: element %lld: enclosure [%.17g, %.17g], covers_sets [%.17g, %.17g]", what, (long long)i, lo[i], hi[i], slo[i], shi[i]);
        double y = er_load(out->data, out->format, i); /* the views here are contiguous */
        ER_REQUIRE(contains(lo[i], hi[i], fl[i], y) == er_class_passes((er_class)reps[o].classes[i]),
                   "%s: element %lld = %.17g: enclosure [%.17g, %.17g] flags %u, class %s", what, (long long)i, y, lo[i], hi[i],
                   fl[i], er_class_name((er_class)reps[o].classes[i]));
    }
    for (int k = 0; k < nout; k++) er_report_clear(&reps[k]);
    free(lo); free(hi); free(slo); free(shi); free(fl);
}

/* Outputs of format fo around the exact results of `ref` (output 0): 0 to 2^12 ulps away, some NaN or infinite. */
static void fill_around(const er_ref *ref, uint64_t *buf, er_format fo, const er_tensor *out, int exact_values) {
    int64_t n = 1, idx[ER_MAX_DIMS] = {0};
    for (int i = 0; i < out->ndim; i++) n *= out->shape[i];
    for (int64_t i = 0; i < n; i++) {
        double r = 0.25;
        if (exact_values) er_ref_exact(ref, idx, fo, NULL, &r);
        if (isfinite(r)) r += (er_rand64() & 1 ? 1 : -1) * (double)(er_rand64() % 3 == 0 ? 0 : er_rand64() % 4096) * er_format_ulp(fo, r);
        if (er_rand64() % 40 == 0) r = er_rand64() & 1 ? NAN : -INFINITY;
        er_round_double(&r, fo, r, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        er_store(buf, fo, i, r);
        for (int d = out->ndim - 1; d >= 0; d--) { if (++idx[d] < out->shape[d]) break; idx[d] = 0; }
    }
}

START_TEST(enclosure_is_the_set_covers_uses) {
    er_test_reseed(1500);
    enum { M = 9, K = 70, N = 11, R = 6, L = 33 };
    static double a[M * K], b[K * N], x[R * L], w[L];
    static uint64_t A[M * K], B[K * N], X[R * L], W[L], C[M * N], Y[R * L], S[R]; /* room for 8 bytes an element */
    for (int tr = 0; tr < (int)(4 * er_test_multiplier()); tr++) {
        int fam = tr % FAM_COUNT;
        er_format fx = tr % 2 ? ER_BF16 : ER_FP16, fo = tr % 3 == 0 ? ER_FP16 : ER_FP32;
        double col[K], row[K];
        for (int i = 0; i < M; i++) { gen_vectors(fam, fx, fx, ER_FP32, K, row, col); for (int k = 0; k < K; k++) a[i * K + k] = row[k]; }
        for (int j = 0; j < N; j++) { gen_vectors(fam, fx, fx, ER_FP32, K, row, col); for (int k = 0; k < K; k++) b[k * N + j] = col[k]; }
        for (int i = 0; i < M * K; i++) er_store(A, fx, i, a[i]);
        for (int i = 0; i < K * N; i++) er_store(B, fx, i, b[i]);
        for (int i = 0; i < R * L; i++) { x[i] = er_rand_normal() * 4; er_store(X, ER_FP32, i, x[i]); }
        for (int i = 0; i < L; i++) { w[i] = er_rand_normal(); er_store(W, ER_FP32, i, w[i]); }
        er_tensor tA, tB, tC, tX, tW, tY, tS;
        er_tensor_view(&tA, fx, 2, (int64_t[]){M, K}, NULL, A);
        er_tensor_view(&tB, fx, 2, (int64_t[]){K, N}, NULL, B);
        er_tensor_view(&tC, fo, 2, (int64_t[]){M, N}, NULL, C);
        er_tensor_view(&tX, ER_FP32, 2, (int64_t[]){R, L}, NULL, X);
        er_tensor_view(&tW, ER_FP32, 1, (int64_t[]){L}, NULL, W);
        er_tensor_view(&tY, ER_FP32, 2, (int64_t[]){R, L}, NULL, Y);
        er_tensor_view(&tS, ER_FP32, 1, (int64_t[]){R}, NULL, S);
        er_ref *r;
        static const char *const fast[2] = {"0", "1"};
        for (int f = 0; f < 2; f++) {
            setenv("EXACTREF_FAST", fast[f], 1);
            ck_assert_int_eq(er_matmul(&r, &tA, &tB), ER_OK);
            unsetenv("EXACTREF_FAST");
            fill_around(r, C, fo, &tC, 1);
            require_enclosure_matches(r, 0, &tC, "any_order", NULL, f ? "matmul any_order (fast)" : "matmul any_order");
            require_enclosure_matches(r, 0, &tC, "mma:sm90", "outer=any", "matmul mma:sm90 outer=any");
            require_enclosure_matches(r, 0, &tC, "blocked:16", "fma=never", "matmul blocked:16");
            require_enclosure_matches(r, 0, &tC, "any_order", "compute=tf32 tf32=nearest", "matmul tf32=nearest");
            er_ref_free(r);
        }
        ck_assert_int_eq(er_scaled_matmul(&r, &tA, &tB, 0.5, 3.0), ER_OK);
        fill_around(r, C, fo, &tC, 1);
        require_enclosure_matches(r, 0, &tC, "any_order", NULL, "scaled matmul");
        er_ref_free(r);
        for (int op = 0; op < 3; op++) {
            ck_assert_int_eq(op == 0 ? er_sum(&r, &tX, 1) : op == 1 ? er_mean(&r, &tX, 1) : er_max(&r, &tX, 1), ER_OK);
            fill_around(r, S, ER_FP32, &tS, 1);
            require_enclosure_matches(r, 0, &tS, "any_order", NULL, op == 0 ? "sum" : op == 1 ? "mean" : "max");
            er_ref_free(r);
        }
        for (int op = 0; op < 4; op++) {
            ck_assert_int_eq(op == 0 ? er_softmax(&r, &tX, 1) : op == 1 ? er_log_softmax(&r, &tX, 1) : op == 2 ? er_rmsnorm(&r, &tX, &tW, 1e-5)
                             : er_layernorm(&r, &tX, 1, &tW, NULL, 1e-5), ER_OK);
            fill_around(r, Y, ER_FP32, &tY, 0);
            static const char *const names[4] = {"softmax", "log_softmax", "rmsnorm", "layernorm y"};
            require_enclosure_matches(r, 0, &tY, "any_order", NULL, names[op]);
            if (op == 3) {
                fill_around(r, S, ER_FP32, &tS, 0);
                require_enclosure_matches(r, 1, &tS, "any_order", NULL, "layernorm mean");
                for (int i = 0; i < R; i++) er_store(S, ER_FP32, i, 1.0 / (er_rand_normal() * 0.1 + 4.0));
                require_enclosure_matches(r, 2, &tS, "any_order", "variance=two_pass", "layernorm rstd");
            }
            er_ref_free(r);
        }
    }
}
END_TEST

/* Refusals: no output index beyond the op's, a valid format, arrays apart from the inputs and each other. */
START_TEST(enclosure_refusals) {
    float a[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, b[12] = {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
    er_tensor tA, tB;
    er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){3, 4}, NULL, a);
    er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){4, 3}, NULL, b);
    er_ref *r;
    ck_assert_int_eq(er_matmul(&r, &tA, &tB), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    double lo[9], hi[9];
    uint8_t fl[9];
    ck_assert_int_eq(er_ref_enclosure(r, 1, &std, ER_FP32, lo, hi, fl), ER_ERR_INVALID);
    ck_assert_msg(strstr(er_last_error(), "output 1: matmul has 1 output"), "%s", er_last_error());
    ck_assert_int_eq(er_ref_enclosure(r, 0, &std, (er_format)77, lo, hi, fl), ER_ERR_FORMAT);
    ck_assert_int_eq(er_ref_enclosure(r, 0, &std, ER_FP32, NULL, hi, fl), ER_ERR_NULL);
    ck_assert_int_eq(er_ref_enclosure(r, 0, &std, ER_FP32, lo, lo + 4, fl), ER_ERR_OUTPUT);
    ck_assert_int_eq(er_ref_enclosure(r, 0, &std, ER_FP32, lo, hi, (uint8_t *)hi), ER_ERR_OUTPUT);
    ck_assert_int_eq(er_ref_enclosure(r, 0, &std, ER_FP32, (double *)(void *)b, hi, fl), ER_ERR_OUTPUT);
    ck_assert_msg(strstr(er_last_error(), "lo shares memory with operand B"), "%s", er_last_error());
    ck_assert_int_eq(er_ref_enclosure(r, 0, &std, ER_FP32, lo, hi, fl), ER_OK);
    er_ref_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("enclosure");
    TCase *tc = tcase_create("enclosure");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, enclosure_is_the_set_covers_uses);
    tcase_add_test(tc, enclosure_refusals);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
