/* t-backward.c: the backward passes' sets. softmax_backward: correct fp32 kernels of every form the standard names
 * (y (dy - D), dy y - y D, and both with a fused multiply-add), each with its sum D in a sequential, reverse,
 * pairwise, random-tree or fused order, stored to fp32, fp16 or bf16, on rows built to push the sets to their edges
 * (cancellation of dy_i against D, zeros of y, wide exponents, ties), are covered; the correctly rounded exact result
 * (an MPFR oracle at 3000 bits, independent of the library's) is classified exact; planted bugs are caught.
 * log_softmax_backward: fp32 kernels with exp at the edges of its 2-ulp budget (one and two ulps below, two above
 * the correctly rounded exp, and libm's expf), the sum in four orders, plain or fused, covered; the exact result
 * (MPFR at 1000 bits) exact; bugs caught. */
#include "../common/er_gen.h"

/* ---- the inputs ---- */

enum { SB_NORMAL, SB_CANCEL, SB_ZEROS, SB_WIDE, SB_TIES, SB_FAMS };
static const char *const sb_fams[SB_FAMS] = {"normal", "cancellation", "zeros of y", "wide exponents", "ties"};

/* A softmax output row y (fp32 values, sum near 1) and a gradient row dy (values of fmt_dy) of family fam. */
static void sb_row(int fam, int64_t K, float *y, float *dy, er_format fmt_dy) {
    double s = 0, *x = malloc(sizeof(double) * (size_t)K);
    for (int64_t j = 0; j < K; j++) {
        x[j] = fam == SB_WIDE ? er_rand_normal() * 20 : er_rand_normal() * 2;
        if (fam == SB_ZEROS && er_rand64() % 3 == 0) x[j] = -INFINITY; /* masked lanes: y = 0 */
    }
    double m = -INFINITY;
    for (int64_t j = 0; j < K; j++) m = x[j] > m ? x[j] : m;
    if (m == -INFINITY) { x[0] = 0; m = 0; }
    for (int64_t j = 0; j < K; j++) s += exp(x[j] - m);
    for (int64_t j = 0; j < K; j++) y[j] = (float)(exp(x[j] - m) / s);
    double D = 0;
    for (int64_t j = 0; j < K; j++) {
        double g = fam == SB_TIES ? (double)er_rand_int(-8, 8) / 8 : er_rand_normal();
        if (fam == SB_WIDE) g = ldexp(g, (int)(fmt_dy == ER_FP16 ? er_rand_int(-12, 12) : er_rand_int(-30, 30)));
        dy[j] = (float)er_oracle_round_d(fmt_dy, g);
        D += (double)dy[j] * y[j];
    }
    if (fam == SB_CANCEL) /* dy_j within a few ulps of D: dy - D cancels */
        for (int64_t j = 0; j < K; j++)
            dy[j] = (float)er_oracle_round_d(fmt_dy, D * (1 + (double)er_rand_int(-4, 4) * 0x1p-23));
    free(x);
}

/* ---- correct kernels in fp32 ---- */

enum { SUM_SEQ, SUM_REV, SUM_PAIR, SUM_TREE, SUM_FMA, SUM_COUNT };
enum { FORM_FACTORED, FORM_EXPANDED, FORM_FMA_D, FORM_FMA_P, FORM_COUNT };

/* Adds the K terms t in a random binary tree (each merge of two partial sums, rounded in fp32). */
static float sb_tree(float *t, int64_t K) {
    int64_t n = K;
    while (n > 1) {
        int64_t i = (int64_t)(er_rand64() % (uint64_t)(n - 1));
        t[i] = t[i] + t[i + 1];
        memmove(t + i + 1, t + i + 2, sizeof(float) * (size_t)(n - i - 2));
        n--;
    }
    return K ? t[0] : 0.0f;
}

static float sb_pair(const float *t, int64_t K) {
    if (K == 0) return 0.0f;
    if (K == 1) return t[0];
    return sb_pair(t, K / 2) + sb_pair(t + K / 2, K - K / 2);
}

static float sb_sum(int order, const float *dy, const float *y, int64_t K, float *scratch) {
    float D = 0.0f;
    for (int64_t j = 0; j < K; j++) scratch[j] = dy[j] * y[j];
    switch (order) {
    case SUM_SEQ: for (int64_t j = 0; j < K; j++) D = D + scratch[j]; return D;
    case SUM_REV: for (int64_t j = K - 1; j >= 0; j--) D = D + scratch[j]; return D;
    case SUM_PAIR: return sb_pair(scratch, K);
    case SUM_TREE: return sb_tree(scratch, K);
    default: for (int64_t j = 0; j < K; j++) D = fmaf(dy[j], y[j], D); return D;
    }
}

static float sb_dx(int form, float dy, float y, float D) {
    switch (form) {
    case FORM_FACTORED: return y * (dy - D);
    case FORM_EXPANDED: return dy * y - y * D;
    case FORM_FMA_D: return fmaf(-y, D, dy * y);
    default: return fmaf(dy, y, -(y * D));
    }
}

/* ---- the exact result (MPFR at 3000 bits: every value here is exact at that precision) ---- */

/* dx_i = y_i (dy_i - D) correctly rounded to fo for each i of a row, D summed once. */
static void sb_exact_rounded(const float *dy, const float *y, int64_t K, er_format fo, double *out) {
    mpfr_t D, t, x;
    mpfr_inits2(3000, D, t, x, (mpfr_ptr)0);
    mpfr_set_zero(D, 1);
    for (int64_t j = 0; j < K; j++) {
        mpfr_set_flt(t, dy[j], MPFR_RNDN);
        mpfr_mul_d(t, t, y[j], MPFR_RNDN);
        mpfr_add(D, D, t, MPFR_RNDN);
    }
    for (int64_t i = 0; i < K; i++) {
        mpfr_set_flt(x, dy[i], MPFR_RNDN);
        mpfr_sub(x, x, D, MPFR_RNDN);
        mpfr_mul_d(x, x, y[i], MPFR_RNDN);
        out[i] = er_oracle_round(fo, x, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
    }
    mpfr_clears(D, t, x, (mpfr_ptr)0);
}

/* Covers dx (R rows of K values, stored to fo) against the backward pass `make` of (dy, y) under `options`: the
 * report. */
typedef er_status (*bwd_make_fn)(er_ref **, const er_tensor *, const er_tensor *, int);
static void bwd_check(bwd_make_fn make, er_report *rep, const float *dy, const float *y, int64_t R, int64_t K,
                      const double *dx, er_format fo, const char *options) {
    uint64_t *C = malloc(8 * (size_t)(R * K));
    for (int64_t e = 0; e < R * K; e++) er_store(C, fo, e, dx[e]);
    er_tensor tdy, ty, tdx;
    ck_assert_int_eq(er_tensor_view(&tdy, ER_FP32, 2, (int64_t[]){R, K}, NULL, dy), ER_OK);
    ck_assert_int_eq(er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){R, K}, NULL, y), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tdx, fo, 2, (int64_t[]){R, K}, NULL, C), ER_OK);
    er_ref *ref;
    ck_assert_int_eq(make(&ref, &tdy, &ty, -1), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", options), ER_OK);
    ck_assert_msg(er_covers(rep, ref, &tdx, &std) == ER_OK, "%s", er_last_error());
    er_ref_free(ref);
    free(C);
}

static void sb_check(er_report *rep, const float *dy, const float *y, int64_t R, int64_t K, const double *dx,
                     er_format fo, const char *options) {
    bwd_check(er_softmax_backward, rep, dy, y, R, K, dx, fo, options);
}

static const int64_t sb_lens[] = {1, 2, 3, 17, 128, 1000, 4097};

/* Every one of the n elements of a report of correctly rounded results is exact; the counts added up; cleared. */
static void sb_all_exact(er_report *rep, long tr, int64_t n, long *exact, long *elems) {
    ck_assert_msg(rep->counts[ER_CLASS_EXACT] == n, "trial %ld: %lld of %lld exact", tr,
                  (long long)rep->counts[ER_CLASS_EXACT], (long long)n);
    *exact += (long)rep->counts[ER_CLASS_EXACT];
    *elems += (long)n;
    er_report_clear(rep);
}

START_TEST(softmax_backward_correct_kernels_covered) {
    er_test_reseed(1101);
    static const er_format outs[] = {ER_FP32, ER_FP16, ER_BF16};
    long trials = (long)(40 * er_test_multiplier()), exact = 0, elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        int fam = (int)(tr % SB_FAMS);
        int64_t K = sb_lens[er_rand64() % (sizeof sb_lens / sizeof sb_lens[0])], R = 3;
        er_format fo = outs[er_rand64() % 3];
        float *y = malloc(sizeof(float) * (size_t)(R * K)), *dy = malloc(sizeof(float) * (size_t)(R * K));
        float *scratch = malloc(sizeof(float) * (size_t)K);
        double *dx = malloc(sizeof(double) * (size_t)(R * K));
        for (int64_t r = 0; r < R; r++) sb_row(fam, K, y + r * K, dy + r * K, er_rand64() & 1 ? ER_FP16 : ER_FP32);
        for (int order = 0; order < SUM_COUNT; order++)
            for (int form = 0; form < FORM_COUNT; form++) {
                for (int64_t r = 0; r < R; r++) {
                    float D = sb_sum(order, dy + r * K, y + r * K, K, scratch);
                    for (int64_t i = 0; i < K; i++) dx[r * K + i] = sb_dx(form, dy[r * K + i], y[r * K + i], D);
                }
                er_report rep;
                sb_check(&rep, dy, y, R, K, dx, fo, NULL);
                ER_REQUIRE_PASS(&rep, "trial %ld (%s, K = %lld, sum %d, form %d, out %s) " ER_SEED_MSG_FMT ":", tr,
                                sb_fams[fam], (long long)K, order, form, er_format_name(fo), ER_SEED_ARGS);
                er_report_clear(&rep);
            }
        /* the correctly rounded exact result: every element exact */
        for (int64_t r = 0; r < R; r++) sb_exact_rounded(dy + r * K, y + r * K, K, fo, dx + r * K);
        er_report rep;
        sb_check(&rep, dy, y, R, K, dx, fo, NULL);
        sb_all_exact(&rep, tr, R * K, &exact, &elems);
        free(y); free(dy); free(scratch); free(dx);
    }
    printf("t-backward: softmax_backward: %ld trials of 5 orders x 4 forms covered; %ld of %ld exact results exact\n",
           trials, exact, elems);
}
END_TEST

/* torch's CUDA kernel for fp16 and bf16 (as measured on the H200: tools/capture/capture_softmax_backward.py): the
 * products dy y rounded to the inputs' format by a separate multiplication, their sum in fp32, dx = t - y S in fp32,
 * stored to the inputs' format. Covered under the default products=either; products=compute excludes it. */
START_TEST(softmax_backward_products_in_the_input_format) {
    er_test_reseed(1107);
    static const er_format fmts[] = {ER_FP16, ER_BF16};
    long excluded = 0, trials = (long)(16 * er_test_multiplier());
    for (long tr = 0; tr < trials; tr++) {
        er_format fi = fmts[tr % 2];
        int64_t K = tr % 4 < 2 ? 128 : 1000, R = 3;
        float *y = malloc(sizeof(float) * (size_t)(R * K)), *dy = malloc(sizeof(float) * (size_t)(R * K));
        double *dx = malloc(sizeof(double) * (size_t)(R * K));
        uint64_t *Y = malloc(8 * (size_t)(R * K)), *G = malloc(8 * (size_t)(R * K)), *C = malloc(8 * (size_t)(R * K));
        for (int64_t r = 0; r < R; r++) sb_row(SB_NORMAL, K, y + r * K, dy + r * K, fi);
        for (int64_t e = 0; e < R * K; e++) y[e] = (float)er_oracle_round_d(fi, y[e]); /* the saved y, in fi */
        for (int64_t r = 0; r < R; r++) {
            float S = 0.0f;
            for (int64_t j = 0; j < K; j++) S = S + (float)er_oracle_round_d(fi, (double)dy[r * K + j] * y[r * K + j]);
            for (int64_t i = 0; i < K; i++) {
                float t = (float)er_oracle_round_d(fi, (double)dy[r * K + i] * y[r * K + i]);
                dx[r * K + i] = t - y[r * K + i] * S;
            }
        }
        for (int64_t e = 0; e < R * K; e++) {
            er_store(Y, fi, e, y[e]);
            er_store(G, fi, e, dy[e]);
            er_store(C, fi, e, dx[e]);
        }
        er_tensor ty, tg, tc;
        ck_assert_int_eq(er_tensor_view(&ty, fi, 2, (int64_t[]){R, K}, NULL, Y), ER_OK);
        ck_assert_int_eq(er_tensor_view(&tg, fi, 2, (int64_t[]){R, K}, NULL, G), ER_OK);
        ck_assert_int_eq(er_tensor_view(&tc, fi, 2, (int64_t[]){R, K}, NULL, C), ER_OK);
        er_ref *ref;
        ck_assert_int_eq(er_softmax_backward(&ref, &tg, &ty, -1), ER_OK);
        er_standard std;
        er_standard_init(&std);
        er_report rep;
        ck_assert_int_eq(er_covers(&rep, ref, &tc, &std), ER_OK);
        ER_REQUIRE_PASS(&rep, "trial %ld (%s, K = %lld) " ER_SEED_MSG_FMT ":", tr, er_format_name(fi), (long long)K,
                        ER_SEED_ARGS);
        er_report_clear(&rep);
        ck_assert_int_eq(er_standard_parse(&std, "any_order", "products=compute"), ER_OK);
        ck_assert_int_eq(er_covers(&rep, ref, &tc, &std), ER_OK);
        excluded += !er_report_all(&rep);
        er_report_clear(&rep);
        er_ref_free(ref);
        free(y); free(dy); free(dx); free(Y); free(G); free(C);
    }
    printf("t-backward: softmax_backward: torch's fp16/bf16 form covered in %ld trials; products=compute excludes it "
           "in %ld\n",
           trials, excluded);
    ck_assert_int_gt(excluded, 0);
}
END_TEST

/* A pairwise tree of depth ceil(log2 K) is covered under depth= of that depth. */
START_TEST(softmax_backward_depth) {
    er_test_reseed(1102);
    int64_t K = 1000, R = 4;
    float *y = malloc(sizeof(float) * (size_t)(R * K)), *dy = malloc(sizeof(float) * (size_t)(R * K));
    float *scratch = malloc(sizeof(float) * (size_t)K);
    double *dx = malloc(sizeof(double) * (size_t)(R * K));
    for (int64_t r = 0; r < R; r++) sb_row(SB_CANCEL, K, y + r * K, dy + r * K, ER_FP32);
    for (int64_t r = 0; r < R; r++) {
        float D = sb_sum(SUM_PAIR, dy + r * K, y + r * K, K, scratch);
        for (int64_t i = 0; i < K; i++) dx[r * K + i] = sb_dx(FORM_FACTORED, dy[r * K + i], y[r * K + i], D);
    }
    er_report rep;
    sb_check(&rep, dy, y, R, K, dx, ER_FP32, "depth=10");
    ER_REQUIRE_PASS(&rep, "pairwise sum of 1000 under depth=10:");
    er_report_clear(&rep);
    free(y); free(dy); free(scratch); free(dx);
}
END_TEST

enum { BUG_NO_D, BUG_NO_Y, BUG_SUM_DY, BUG_FP16_SUM, BUG_LAST_ZERO, BUG_COUNT };
static const char *const bug_names[BUG_COUNT] = { "D dropped (y dy)", "y dropped (dy - D)", "D = sum dy",
                                                  "D summed in fp16", "last element never stored" };

START_TEST(softmax_backward_bugs_caught) {
    er_test_reseed(1103);
    long trials = (long)(30 * er_test_multiplier()), caught[BUG_COUNT] = {0}, tried[BUG_COUNT] = {0};
    for (long tr = 0; tr < trials; tr++) {
        int64_t K = tr % 2 ? 1000 : 128, R = 2;
        float *y = malloc(sizeof(float) * (size_t)(R * K)), *dy = malloc(sizeof(float) * (size_t)(R * K));
        double *dx = malloc(sizeof(double) * (size_t)(R * K));
        for (int64_t r = 0; r < R; r++) sb_row(SB_NORMAL, K, y + r * K, dy + r * K, ER_FP32);
        for (int bug = 0; bug < BUG_COUNT; bug++) {
            for (int64_t r = 0; r < R; r++) {
                const float *g = dy + r * K, *p = y + r * K;
                float D = 0.0f;
                for (int64_t j = 0; j < K; j++) {
                    if (bug == BUG_SUM_DY) D = D + g[j];
                    else if (bug == BUG_FP16_SUM) D = (float)er_oracle_round_d(ER_FP16, D + g[j] * p[j]);
                    else D = D + g[j] * p[j];
                }
                for (int64_t i = 0; i < K; i++) {
                    float v = bug == BUG_NO_D ? g[i] * p[i] : bug == BUG_NO_Y ? g[i] - D : p[i] * (g[i] - D);
                    dx[r * K + i] = bug == BUG_LAST_ZERO && i == K - 1 ? 0.0 : v;
                }
            }
            er_report rep;
            sb_check(&rep, dy, y, R, K, dx, ER_FP32, NULL);
            tried[bug]++;
            caught[bug] += !er_report_all(&rep);
            er_report_clear(&rep);
        }
        free(y); free(dy); free(dx);
    }
    for (int bug = 0; bug < BUG_COUNT; bug++) {
        printf("t-backward: softmax_backward bug '%s' caught in %ld of %ld trials\n", bug_names[bug], caught[bug],
               tried[bug]);
        ck_assert_msg(caught[bug] == tried[bug], "bug '%s' passed in %ld of %ld trials", bug_names[bug],
                      tried[bug] - caught[bug], tried[bug]);
    }
}
END_TEST

/* Rows along a dimension other than the last, and refusals. */
START_TEST(softmax_backward_dims_and_refusals) {
    er_test_reseed(1104);
    int64_t K = 33, R = 5;
    float y[5 * 33], dy[5 * 33], yt[33 * 5], dyt[33 * 5];
    float scratch[33];
    for (int64_t r = 0; r < R; r++) sb_row(SB_NORMAL, K, y + r * K, dy + r * K, ER_FP32);
    for (int64_t r = 0; r < R; r++)
        for (int64_t k = 0; k < K; k++) { yt[k * R + r] = y[r * K + k]; dyt[k * R + r] = dy[r * K + k]; }
    float dxt[33 * 5];
    for (int64_t r = 0; r < R; r++) {
        float D = sb_sum(SUM_SEQ, dy + r * K, y + r * K, K, scratch);
        for (int64_t k = 0; k < K; k++) dxt[k * R + r] = sb_dx(FORM_FACTORED, dy[r * K + k], y[r * K + k], D);
    }
    er_tensor tdy, ty, tdx;
    ck_assert_int_eq(er_tensor_view(&tdy, ER_FP32, 2, (int64_t[]){K, R}, NULL, dyt), ER_OK);
    ck_assert_int_eq(er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){K, R}, NULL, yt), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tdx, ER_FP32, 2, (int64_t[]){K, R}, NULL, dxt), ER_OK);
    er_ref *ref;
    ck_assert_int_eq(er_softmax_backward(&ref, &tdy, &ty, 0), ER_OK);
    er_standard std;
    er_standard_init(&std);
    er_report rep;
    ck_assert_int_eq(er_covers(&rep, ref, &tdx, &std), ER_OK);
    ER_REQUIRE_PASS(&rep, "rows along dim 0:");
    er_report_clear(&rep);
    dxt[7 * R + 2] = -dxt[7 * R + 2] + 1.0f;
    ck_assert_int_eq(er_covers(&rep, ref, &tdx, &std), ER_OK);
    ck_assert_int_eq(er_report_failed(&rep), 1);
    ck_assert_int_eq(er_report_classes(&rep)[7 * R + 2], ER_CLASS_OUTSIDE);
    er_report_clear(&rep);
    ck_assert_int_eq(er_standard_parse(&std, "sequential", NULL), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &tdx, &std), ER_ERR_UNSUPPORTED);
    er_report_clear(&rep);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "compute=fp16"), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &tdx, &std), ER_ERR_STANDARD);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "needs a compute format holding it"));
    er_report_clear(&rep);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "exp_ulps=2"), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &tdx, &std), ER_ERR_STANDARD);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "not to softmax_backward"));
    er_report_clear(&rep);
    er_ref_free(ref);
    /* products beyond the inputs' format (fp16: 60000 x 2): that path claims nothing, and nothing breaks (fuzz_ops
     * found its sum's summary taken of an infinity) */
    uint64_t g16[2], y16[2], o16[2]; /* room for any format, as er_store writes */
    double gv[2] = {60000, 1}, yv[2] = {2, 0.5}, ov[2] = {-3, 7};
    for (int i = 0; i < 2; i++) {
        er_store(g16, ER_FP16, i, gv[i]);
        er_store(y16, ER_FP16, i, yv[i]);
        er_store(o16, ER_FP16, i, ov[i]);
    }
    er_tensor vg, vy, vo;
    ck_assert_int_eq(er_tensor_view(&vg, ER_FP16, 1, (int64_t[]){2}, NULL, g16), ER_OK);
    ck_assert_int_eq(er_tensor_view(&vy, ER_FP16, 1, (int64_t[]){2}, NULL, y16), ER_OK);
    ck_assert_int_eq(er_tensor_view(&vo, ER_FP16, 1, (int64_t[]){2}, NULL, o16), ER_OK);
    ck_assert_int_eq(er_softmax_backward(&ref, &vg, &vy, 0), ER_OK);
    er_standard_init(&std);
    ck_assert_int_eq(er_covers(&rep, ref, &vo, &std), ER_OK);
    ck_assert(er_report_all(&rep));
    er_report_clear(&rep);
    er_ref_free(ref);
    er_tensor small;
    ck_assert_int_eq(er_tensor_view(&small, ER_FP32, 2, (int64_t[]){K, R - 1}, NULL, yt), ER_OK);
    ck_assert_int_eq(er_softmax_backward(&ref, &tdy, &small, 0), ER_ERR_SHAPE);
    ck_assert_int_eq(er_softmax_backward(&ref, &tdy, &ty, 2), ER_ERR_INVALID);
    ck_assert_int_eq(er_softmax_backward(&ref, NULL, &ty, 0), ER_ERR_NULL);
    ck_assert_int_eq(er_softmax_backward(NULL, &tdy, &ty, 0), ER_ERR_NULL);
}
END_TEST

/* ---- log_softmax_backward ---- */

/* A log_softmax output row y (fp32) and a gradient row dy. */
static void lsb_row(int64_t K, float *y, float *dy) {
    double *x = malloc(sizeof(double) * (size_t)K), m = -INFINITY, s = 0;
    for (int64_t j = 0; j < K; j++) { x[j] = er_rand_normal() * 3; m = x[j] > m ? x[j] : m; }
    for (int64_t j = 0; j < K; j++) s += exp(x[j] - m);
    for (int64_t j = 0; j < K; j++) {
        y[j] = (float)(x[j] - m - log(s));
        dy[j] = (float)er_rand_normal();
    }
    free(x);
}

/* exp(y) as a kernel's expf may return it: the correctly rounded value moved k ulps (k in -2..2), or libm's. */
static float lsb_exp(float y, int k) {
    if (k == 3) return expf(y);
    float e = (float)er_oracle_round_d(ER_FP32, exp((double)y)); /* exp in double is within 2^-52: the float is
                                                                    its correct rounding but at rare ties */
    for (int i = 0; i < (k < 0 ? -k : k); i++) e = nextafterf(e, k < 0 ? 0.0f : INFINITY);
    return e;
}

static void lsb_check(er_report *rep, const float *dy, const float *y, int64_t R, int64_t K, const double *dx,
                      er_format fo) {
    bwd_check(er_log_softmax_backward, rep, dy, y, R, K, dx, fo, NULL);
}

START_TEST(log_softmax_backward_covered_and_exact) {
    er_test_reseed(1105);
    long trials = (long)(12 * er_test_multiplier()), exact = 0, elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        int64_t K = sb_lens[er_rand64() % (sizeof sb_lens / sizeof sb_lens[0])], R = 2;
        er_format fo = tr % 3 == 0 ? ER_FP16 : ER_FP32;
        float *y = malloc(sizeof(float) * (size_t)(R * K)), *dy = malloc(sizeof(float) * (size_t)(R * K));
        float *scratch = malloc(sizeof(float) * (size_t)K), ones[1] = {1.0f};
        double *dx = malloc(sizeof(double) * (size_t)(R * K));
        for (int64_t r = 0; r < R; r++) lsb_row(K, y + r * K, dy + r * K);
        /* odd trials: the second half of each row masked by a constant (-1e4, or -1e9, whose exp lies below MPFR's
         * default exponent range), and under fp16 outputs a third of those dy on a midpoint of fp16 (12 bits: a
         * float), which S's sign breaks */
        for (int64_t e = 0; tr % 2 && e < R * K; e++) {
            if (e % K < K / 2) continue;
            y[e] = (e / K) % 2 ? -1e9f : -1e4f;
            double h = er_oracle_round_d(ER_FP16, dy[e]);
            if (fo == ER_FP16 && e % 3 == 0 && fabs(h) >= 0x1p-14 && fabs(h) < 60000)
                dy[e] = (float)(h + ldexp(1.0, ilogb(h) - 11));
        }
        for (int order = 0; order < SUM_COUNT - 1; order++)
            for (int k = -2; k <= 3; k += k == 0 ? 2 : 1) /* -2, -1, 0, 2, 3: the budget's edges, libm */
                for (int fused = 0; fused < 2; fused++) {
                    for (int64_t r = 0; r < R; r++) {
                        const float *g = dy + r * K, *p = y + r * K;
                        float *ys = malloc(sizeof(float) * (size_t)K);
                        for (int64_t j = 0; j < K; j++) ys[j] = ones[0];
                        float S = sb_sum(order, g, ys, K, scratch); /* sum dy in that order (products by 1: exact) */
                        free(ys);
                        for (int64_t i = 0; i < K; i++) {
                            float e = lsb_exp(p[i], k);
                            dx[r * K + i] = fused ? fmaf(-e, S, g[i]) : g[i] - e * S;
                        }
                    }
                    er_report rep;
                    lsb_check(&rep, dy, y, R, K, dx, fo);
                    ER_REQUIRE_PASS(&rep,
                                    "trial %ld (K = %lld, sum %d, exp %+d ulps, fused %d, out %s) " ER_SEED_MSG_FMT ":",
                                    tr, (long long)K, order, k, fused, er_format_name(fo), ER_SEED_ARGS);
                    er_report_clear(&rep);
                }
        /* the exact result, from MPFR at 1000 bits, in its widest exponent range (exp(-1e9) is 2^-1.44e9); where it
         * is a normal value of the output format, dy - exp(y) S rounded once at that format's precision (MPFR rounds
         * the exact difference: a masked lane's tiny term, far below 1000 bits of dy, still breaks a tie) */
        mpfr_exp_t emin = mpfr_get_emin();
        mpfr_set_emin(mpfr_get_emin_min());
        for (int64_t r = 0; r < R; r++) {
            mpfr_t S, t, x, xp;
            mpfr_init2(xp, fo == ER_FP16 ? 11 : 24);
            mpfr_inits2(1000, S, t, x, (mpfr_ptr)0); /* S exact; dx far closer than fp32's rounding needs */
            mpfr_set_zero(S, 1);
            for (int64_t j = 0; j < K; j++) mpfr_add_d(S, S, dy[r * K + j], MPFR_RNDN);
            for (int64_t i = 0; i < K; i++) {
                mpfr_set_flt(t, y[r * K + i], MPFR_RNDN);
                mpfr_exp(t, t, MPFR_RNDN);
                mpfr_mul(t, t, S, MPFR_RNDN);
                mpfr_set_flt(x, dy[r * K + i], MPFR_RNDN);
                mpfr_sub(xp, x, t, MPFR_RNDN);
                mpfr_sub(x, x, t, MPFR_RNDN);
                double once = mpfr_get_d(xp, MPFR_RNDN), lo = fo == ER_FP16 ? 0x1p-14 : 0x1p-126,
                       hi = fo == ER_FP16 ? 65504 : FLT_MAX;
                dx[r * K + i] = fabs(once) >= lo && fabs(once) <= hi
                                    ? once
                                    : er_oracle_round(fo, x, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
            }
            mpfr_clears(S, t, x, xp, (mpfr_ptr)0);
        }
        mpfr_set_emin(emin);
        er_report rep;
        lsb_check(&rep, dy, y, R, K, dx, fo);
        sb_all_exact(&rep, tr, R * K, &exact, &elems);
        free(y); free(dy); free(scratch); free(dx);
    }
    printf("t-backward: log_softmax_backward: %ld trials of 4 orders x 5 exps x 2 forms covered; %ld of %ld exact\n",
           trials, exact, elems);
}
END_TEST

enum { LBUG_SOFTMAX, LBUG_NO_EXP, LBUG_NO_S, LBUG_FP16_SUM, LBUG_COUNT };
static const char *const lbug_names[LBUG_COUNT] = {"softmax's formula", "exp dropped (dy - y S)", "S dropped (dy)",
                                                   "S summed in fp16"};

START_TEST(log_softmax_backward_bugs_caught) {
    er_test_reseed(1106);
    long trials = (long)(20 * er_test_multiplier()), caught[LBUG_COUNT] = {0};
    int64_t K = 500, R = 2;
    for (long tr = 0; tr < trials; tr++) {
        float *y = malloc(sizeof(float) * (size_t)(R * K)), *dy = malloc(sizeof(float) * (size_t)(R * K));
        double *dx = malloc(sizeof(double) * (size_t)(R * K));
        for (int64_t r = 0; r < R; r++) lsb_row(K, y + r * K, dy + r * K);
        for (int bug = 0; bug < LBUG_COUNT; bug++) {
            for (int64_t r = 0; r < R; r++) {
                const float *g = dy + r * K, *p = y + r * K;
                float S = 0.0f;
                for (int64_t j = 0; j < K; j++)
                    S = bug == LBUG_FP16_SUM ? (float)er_oracle_round_d(ER_FP16, S + g[j]) : S + g[j];
                for (int64_t i = 0; i < K; i++) {
                    float e = expf(p[i]);
                    dx[r * K + i] = bug == LBUG_SOFTMAX ? e * (g[i] - S)
                                    : bug == LBUG_NO_EXP ? g[i] - p[i] * S
                                    : bug == LBUG_NO_S   ? g[i]
                                                         : g[i] - e * S;
                }
            }
            er_report rep;
            lsb_check(&rep, dy, y, R, K, dx, ER_FP32);
            caught[bug] += !er_report_all(&rep);
            er_report_clear(&rep);
        }
        free(y); free(dy); free(dx);
    }
    for (int bug = 0; bug < LBUG_COUNT; bug++) {
        printf("t-backward: log_softmax_backward bug '%s' caught in %ld of %ld trials\n", lbug_names[bug], caught[bug],
               trials);
        ck_assert_msg(caught[bug] == trials, "bug '%s' passed in %ld of %ld trials", lbug_names[bug],
                      trials - caught[bug], trials);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("backward");
    TCase *tc = tcase_create("softmax_backward");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, softmax_backward_correct_kernels_covered);
    tcase_add_test(tc, softmax_backward_depth);
    tcase_add_test(tc, softmax_backward_products_in_the_input_format);
    tcase_add_test(tc, softmax_backward_bugs_caught);
    tcase_add_test(tc, softmax_backward_dims_and_refusals);
    tcase_add_test(tc, log_softmax_backward_covered_and_exact);
    tcase_add_test(tc, log_softmax_backward_bugs_caught);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
