#define _POSIX_C_SOURCE 200809L /* setenv */
/* t-softmax.c: softmax sets. Real H200 outputs of torch.softmax (tests/data/norm.npz) are covered under the
 * default standard; random correct implementations (exp within the ulp budget, any summation order, division
 * or reciprocal) run by the test are covered; the correctly rounded exact softmax (MPFR at 400 bits) is EXACT;
 * special rows follow the stated rules; an implementation that lets padding lanes into the denominator is
 * caught. */
#include <float.h>
#include "../common/er_gen.h"
#include "../common/npz.h"

#ifndef ER_TEST_DATA_DIR
#define ER_TEST_DATA_DIR "tests/data"
#endif

static void h200_cases(const char *which, int expect) {
    npz_file z;
    FILE *f = open_cases(&z, ER_TEST_DATA_DIR "/norm.npz", ER_TEST_DATA_DIR "/norm_cases.txt");
    char line[256], id[32], op[32], dtype[32], dist[32];
    int cases = 0;
    long long counts[ER_CLASS_COUNT] = {0};
    int log = strcmp(which, "log_softmax") == 0, rms = strcmp(which, "rmsnorm") == 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%31s %31s %31s %31s", id, op, dtype, dist) != 4 || strcmp(op, which) != 0) continue;
        char key[96];
        snprintf(key, sizeof key, "%s__in__x", id);
        const npy_array *x = npz_find(&z, key);
        snprintf(key, sizeof key, "%s__out__y", id);
        const npy_array *y = npz_find(&z, key);
        ck_assert_msg(x && y, "case %s incomplete", id);
        er_tensor tx, ty, tw;
        ck_assert(npz_view(&tx, x) && npz_view(&ty, y));
        er_ref *ref;
        if (rms) {
            snprintf(key, sizeof key, "%s__in__weight", id);
            const npy_array *w = npz_find(&z, key);
            ck_assert(w && npz_view(&tw, w));
            ck_assert_int_eq(er_rmsnorm(&ref, &tx, &tw, 1e-6), ER_OK);
        } else {
            ck_assert_int_eq(log ? er_log_softmax(&ref, &tx, -1) : er_softmax(&ref, &tx, -1), ER_OK);
        }
        er_standard std;
        er_standard_init(&std);
        er_report rep;
        ck_assert_msg(er_covers(&rep, ref, &ty, &std) == ER_OK, "%s", er_last_error());
        ER_REQUIRE_PASS(&rep, "case %s (%s, %s) not covered:", id, dtype, dist);
        for (int c = 0; c < ER_CLASS_COUNT; c++) counts[c] += rep.counts[c];
        er_report_clear(&rep);
        if (rms) {
            /* torch's rms_norm runs layer_norm's kernels: at their depth and combine depth, either statistic */
            int64_t D, C;
            ck_assert_int_eq(er_depth_torch_layer_norm(&D, tx.shape[tx.ndim - 1]), ER_OK);
            ck_assert_int_eq(er_combine_depth_torch_layer_norm(&C, tx.shape[tx.ndim - 1]), ER_OK);
            char opts[96];
            snprintf(opts, sizeof opts, "variance=either depth=%lld combine_depth=%lld", (long long)D, (long long)C);
            ck_assert_int_eq(er_standard_parse(&std, "any_order", opts), ER_OK);
            ck_assert_msg(er_covers(&rep, ref, &ty, &std) == ER_OK, "%s", er_last_error());
            ER_REQUIRE_PASS(&rep, "case %s (%s, %s) not covered under %s:", id, dtype, dist, opts);
            er_report_clear(&rep);
        }
        er_ref_free(ref);
        cases++;
    }
    fclose(f);
    printf("torch.%s on H200: %d cases covered (exact %lld, covered %lld elements)%s\n", which, cases, counts[0], counts[1],
           rms ? "; and under variance=either at torch's layer_norm depth and combine depth" : "");
    ck_assert_int_eq(cases, expect);
    npz_free(&z);
}

START_TEST(torch_softmax_on_h200_is_covered) {
    h200_cases("softmax", 24);
    h200_cases("log_softmax", 3);
    h200_cases("rmsnorm", 30);
}
END_TEST

/* One correct implementation of a softmax row in F: exp within U = 2 ulps (a neighbour of the exact exp, moved
 * one more ulp at random), the sum in a random order, division or multiplication by the rounded reciprocal. */
static void implement(er_format F, const double *x, int n, double *y, int pad_lanes) {
    emu e;
    emu_init(&e, F);
    double m = -INFINITY;
    for (int j = 0; j < n; j++) if (x[j] > m) m = x[j];
    double *ev = malloc(sizeof(double) * (size_t)(n + pad_lanes)), *sv = malloc(sizeof(double) * (size_t)(n + pad_lanes));
    mpfr_t t;
    mpfr_init2(t, 200);
    for (int j = 0; j < n + pad_lanes; j++) {
        double xj = j < n ? x[j] : 0.0; /* a padding lane holds 0 instead of -inf */
        double d = emu_add(&e, xj, -m);
        mpfr_set_d(t, d, MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN);
        double v = er_oracle_round(F, t, (er_rand64() & 1) ? MPFR_RNDU : MPFR_RNDD, ER_OVERFLOW_IEEE);
        if (er_rand64() % 3 == 0) v = er_rand64() & 1 ? nextafter(v, INFINITY) : nextafter(v, 0); /* still within 2 ulps */
        double back;
        er_round_double(&back, F, v, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); /* nextafter stepped in double: snap */
        if (back != v) v = er_rand64() & 1 ? er_oracle_round(F, t, MPFR_RNDU, ER_OVERFLOW_IEEE) : er_oracle_round(F, t, MPFR_RNDD, ER_OVERFLOW_IEEE);
        ev[j] = v;
        sv[j] = v;
    }
    double s = emu_sum_random(&e, sv, n + pad_lanes);
    int recip = (int)(er_rand64() & 1);
    mpfr_set_ui(t, 1, MPFR_RNDN);
    mpfr_div_d(t, t, s, MPFR_RNDN);
    double r = er_oracle_round(F, t, MPFR_RNDN, ER_OVERFLOW_IEEE);
    for (int i = 0; i < n; i++) {
        mpfr_set_d(t, ev[i], MPFR_RNDN);
        if (recip) mpfr_mul_d(t, t, r, MPFR_RNDN); else mpfr_div_d(t, t, s, MPFR_RNDN);
        y[i] = er_oracle_round(F, t, MPFR_RNDN, ER_OVERFLOW_IEEE);
    }
    mpfr_clear(t);
    free(ev);
    free(sv);
    emu_clear(&e);
}

START_TEST(random_implementations_are_covered) {
    er_test_reseed(500);
    long trials = (long)(600 * er_test_multiplier());
    static const er_format ins[] = {ER_FP16, ER_BF16, ER_FP32};
    long caught = 0, padded = 0, triggered = 0;
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = ins[er_rand64() % 3], fo = er_rand64() % 2 ? ER_FP32 : fx;
        int n = (int)er_rand_int(1, 300), pad = tr % 4 == 3 ? (int)er_rand_int(1, 32) : 0;
        double *x = malloc(sizeof(double) * (size_t)n), *tmp = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
        uint64_t X[300], Y[300];
        double scale = ldexp(1.0, (int)er_rand_int(-4, 5));
        for (int j = 0; j < n; j++) {
            double v;
            er_round_double(&v, fx, er_rand_normal() * scale, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            if (er_rand64() % 10 == 0) v = -INFINITY; /* masked lanes */
            x[j] = v;
            er_store(X, fx, j, v);
        }
        implement(ER_FP32, x, n, tmp, pad);
        mpfr_t t;
        mpfr_init2(t, 64);
        for (int j = 0; j < n; j++) {
            mpfr_set_d(t, tmp[j], MPFR_RNDN);
            y[j] = isnan(tmp[j]) ? NAN : er_oracle_round(fo, t, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
            er_store(Y, fo, j, y[j]);
        }
        mpfr_clear(t);
        er_tensor tx, ty;
        er_tensor_view(&tx, fx, 1, (int64_t[]){n}, NULL, X);
        er_tensor_view(&ty, fo, 1, (int64_t[]){n}, NULL, Y);
        er_ref *ref;
        ck_assert_int_eq(er_softmax(&ref, &tx, 0), ER_OK);
        er_standard std;
        er_standard_init(&std);
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &ty, &std) == ER_OK, "covers: %s", er_last_error());
        if (!pad && !er_report_all(&rep)) {
            char text[4096];
            er_report_text(&rep, text, sizeof text, NULL);
            ck_abort_msg("trial %ld: a correct softmax (x %s, out %s, n %d) was called wrong:\n%s" ER_SEED_MSG_FMT, tr,
                         er_format_name(fx), er_format_name(fo), n, text, ER_SEED_ARGS);
        }
        if (pad) {
            /* the bug adds pad * exp(0 - max) to the denominator: it moves every output by that share of the sum */
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < n; j++) if (x[j] > mx) mx = x[j];
            for (int j = 0; j < n; j++) if (x[j] != -INFINITY) sum += exp(x[j] - mx);
            double share = mx == -INFINITY ? 0 : pad * exp(-mx) / (sum + pad * exp(-mx));
            padded++;
            caught += !er_report_all(&rep);
            if (share > 1e-2) {
                triggered++;
                ER_REQUIRE(!er_report_all(&rep), "trial %ld: padding lanes moving the outputs by %.3g were not caught " ER_SEED_MSG_FMT,
                           tr, share, ER_SEED_ARGS);
            }
        }
        er_report_clear(&rep);
        er_ref_free(ref);
        free(x); free(tmp); free(y);
    }
    printf("softmax: %ld correct implementations covered; padding lanes in the denominator caught in %ld of %ld "
           "(all %ld where they move the outputs by more than 1%%)\n", trials - padded, caught, padded, triggered);
    ck_assert_int_gt(triggered, padded / 4);
}
END_TEST

START_TEST(exact_and_special_rows) {
    /* a row whose exact softmax is known: equal values give 1/n; one element gives 1 */
    float x[4] = {0.5f, 0.5f, 0.5f, 0.5f}, y[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    er_tensor tx, ty;
    er_tensor_view(&tx, ER_FP32, 1, (int64_t[]){4}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 1, (int64_t[]){4}, NULL, y);
    er_ref *r;
    er_standard std;
    er_standard_init(&std);
    er_report rep;
    ck_assert_int_eq(er_softmax(&r, &tx, 0), ER_OK);
    ck_assert_int_eq(er_covers(&rep, r, &ty, &std), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_EXACT], 4);
    er_report_clear(&rep);
    /* 0.26 is far from 1/4 */
    y[2] = 0.26f;
    ck_assert_int_eq(er_covers(&rep, r, &ty, &std), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_OUTSIDE], 1);
    er_report_clear(&rep);
    er_ref_free(r);
    /* fully masked row: NaN everywhere; a +inf element: NaN; masked lanes give exactly 0 */
    float m[6] = {-INFINITY, -INFINITY, -INFINITY, 1.0f, INFINITY, 2.0f}, o[6];
    er_tensor tm, to;
    er_tensor_view(&tm, ER_FP32, 2, (int64_t[]){2, 3}, NULL, m);
    er_tensor_view(&to, ER_FP32, 2, (int64_t[]){2, 3}, NULL, o);
    for (int i = 0; i < 6; i++) o[i] = NAN;
    ck_assert_int_eq(er_softmax(&r, &tm, 1), ER_OK);
    ck_assert_int_eq(er_covers(&rep, r, &to, &std), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_EXACT], 6);
    er_report_clear(&rep);
    o[0] = 0;
    ck_assert_int_eq(er_covers(&rep, r, &to, &std), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_NAN_MISSING], 1);
    er_report_clear(&rep);
    er_ref_free(r);
    /* masking with the most negative float: those lanes are exactly 0 (their exps are far below 2^-1074, and x - max is
     * not a double: the bounds of exp(x - max) must stay [0, 2^-1074]) */
    {
        float xm[4] = {0.5f, -FLT_MAX, 1.0f, -FLT_MAX}, ym[4];
        mpfr_t e1, e2, sden;
        mpfr_inits2(200, e1, e2, sden, (mpfr_ptr)0);
        mpfr_set_d(e1, -0.5, MPFR_RNDN);
        mpfr_exp(e1, e1, MPFR_RNDN);      /* exp(0.5 - 1) */
        mpfr_add_ui(sden, e1, 1, MPFR_RNDN);
        mpfr_div(e2, e1, sden, MPFR_RNDN);
        ym[0] = (float)er_oracle_round(ER_FP32, e2, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
        mpfr_ui_div(e2, 1, sden, MPFR_RNDN);
        ym[2] = (float)er_oracle_round(ER_FP32, e2, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
        ym[1] = ym[3] = 0.0f;
        mpfr_clears(e1, e2, sden, (mpfr_ptr)0);
        er_tensor tmx, tmy;
        er_tensor_view(&tmx, ER_FP32, 1, (int64_t[]){4}, NULL, xm);
        er_tensor_view(&tmy, ER_FP32, 1, (int64_t[]){4}, NULL, ym);
        ck_assert_int_eq(er_softmax(&r, &tmx, 0), ER_OK);
        ck_assert_int_eq(er_covers(&rep, r, &tmy, &std), ER_OK);
        ck_assert_int_eq(rep.counts[ER_CLASS_EXACT], 4);
        er_report_clear(&rep);
        er_ref_free(r);
    }
    float p[3] = {-INFINITY, 0.0f, 0.0f}, q[3] = {0.0f, 0.5f, 0.5f};
    er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){3}, NULL, p);
    er_tensor_view(&to, ER_FP32, 1, (int64_t[]){3}, NULL, q);
    ck_assert_int_eq(er_softmax(&r, &tm, -1), ER_OK);
    ck_assert_int_eq(er_covers(&rep, r, &to, &std), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_EXACT], 3);
    er_report_clear(&rep);
    /* standards that do not apply */
    er_standard_parse(&std, "sequential", NULL);
    ck_assert_int_eq(er_covers(&rep, r, &to, &std), ER_ERR_UNSUPPORTED);
    er_standard_parse(&std, "any_order", "compute=fp16");
    ck_assert_int_eq(er_covers(&rep, r, &to, &std), ER_ERR_STANDARD);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "needs a compute format holding them"));
    er_standard_parse(&std, "any_order", "exp_ulps=1");
    ck_assert_int_eq(er_emulate(r, &to, &std), ER_ERR_STANDARD);
    double e;
    ck_assert_int_eq(er_ref_exact(r, (int64_t[]){0}, ER_FP32, &e, NULL), ER_ERR_UNSUPPORTED);
    er_ref_free(r);
    ck_assert_int_eq(er_softmax(&r, &tm, 1), ER_ERR_INVALID);
}
END_TEST

/* log_softmax: correct implementations (exp within 2 ulps, log within 1 ulp, any order, either association)
 * covered; special rows. */
START_TEST(log_softmax_implementations) {
    er_test_reseed(501);
    long trials = (long)(400 * er_test_multiplier());
    for (long tr = 0; tr < trials; tr++) {
        int n = (int)er_rand_int(1, 200);
        er_format fx = (er_rand64() & 1) ? ER_FP16 : ER_FP32;
        uint64_t X[200];
        float Y[200];
        double x[200];
        for (int j = 0; j < n; j++) {
            double v;
            er_round_double(&v, fx, er_rand_normal() * 4, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            if (er_rand64() % 12 == 0) v = -INFINITY;
            x[j] = v;
            er_store(X, fx, j, v);
        }
        emu e;
        emu_init(&e, ER_FP32);
        double m = -INFINITY, sv[200];
        for (int j = 0; j < n; j++) if (x[j] > m) m = x[j];
        mpfr_t t;
        mpfr_init2(t, 200);
        for (int j = 0; j < n; j++) {
            double d = emu_add(&e, x[j], -m);
            mpfr_set_d(t, d, MPFR_RNDN);
            mpfr_exp(t, t, MPFR_RNDN);
            sv[j] = er_oracle_round(ER_FP32, t, (er_rand64() & 1) ? MPFR_RNDU : MPFR_RNDD, ER_OVERFLOW_IEEE);
        }
        double s = emu_sum_random(&e, sv, n);
        mpfr_set_d(t, s, MPFR_RNDN);
        mpfr_log(t, t, MPFR_RNDN);
        double l = er_oracle_round(ER_FP32, t, (er_rand64() & 1) ? MPFR_RNDU : MPFR_RNDD, ER_OVERFLOW_IEEE);
        int assoc = (int)(er_rand64() & 1);
        for (int i = 0; i < n; i++)
            Y[i] = (float)(assoc ? emu_add(&e, x[i], -emu_add(&e, m, l)) : emu_add(&e, emu_add(&e, x[i], -m), -l));
        mpfr_clear(t);
        emu_clear(&e);
        er_tensor tx, ty;
        er_tensor_view(&tx, fx, 1, (int64_t[]){n}, NULL, X);
        er_tensor_view(&ty, ER_FP32, 1, (int64_t[]){n}, NULL, Y);
        er_ref *ref;
        ck_assert_int_eq(er_log_softmax(&ref, &tx, 0), ER_OK);
        er_standard std;
        er_standard_init(&std);
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &ty, &std) == ER_OK, "covers: %s", er_last_error());
        ER_REQUIRE_PASS(&rep, "trial %ld: a correct log_softmax (n %d) was called wrong:" ER_SEED_MSG_FMT, tr, n, ER_SEED_ARGS);
        er_report_clear(&rep);
        er_ref_free(ref);
    }
    /* special rows: masked lanes are -inf; a NaN row is NaN; softmax options do not apply */
    float p[3] = {-INFINITY, 0.0f, 0.0f}, q[3] = {-INFINITY, -0.693147182f, -0.693147182f};
    er_tensor tp, tq;
    er_tensor_view(&tp, ER_FP32, 1, (int64_t[]){3}, NULL, p);
    er_tensor_view(&tq, ER_FP32, 1, (int64_t[]){3}, NULL, q);
    er_ref *r;
    er_standard std;
    er_standard_init(&std);
    er_report rep;
    ck_assert_int_eq(er_log_softmax(&r, &tp, 0), ER_OK);
    ck_assert_int_eq(er_covers(&rep, r, &tq, &std), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_EXACT], 3);
    er_report_clear(&rep);
    q[0] = -100.0f;
    ck_assert_int_eq(er_covers(&rep, r, &tq, &std), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_INF_MISSING], 1);
    er_report_clear(&rep);
    er_standard_parse(&std, "any_order", "div=divide");
    ck_assert_int_eq(er_covers(&rep, r, &tq, &std), ER_ERR_STANDARD);
    er_ref_free(r);
}
END_TEST

/* rmsnorm: correct implementations (squares rounded, any order, either division, rsqrt within 2 ulps, any of the
 * three compositions with the weight) covered; an all-zero row with eps = 0 is NaN. */
START_TEST(rmsnorm_implementations) {
    er_test_reseed(502);
    long trials = (long)(400 * er_test_multiplier());
    for (long tr = 0; tr < trials; tr++) {
        int n = (int)er_rand_int(1, 200);
        er_format fx = (er_rand64() & 1) ? ER_FP16 : ER_FP32, fo = (er_rand64() & 1) ? fx : ER_FP32;
        double eps = (er_rand64() & 1) ? 1e-6 : 1e-5;
        uint64_t X[200], W[200], Y[200];
        double x[200], w[200];
        double scale = ldexp(1.0, (int)er_rand_int(-6, 6)) * ((er_rand64() % 4 == 0) ? 100 : 1);
        for (int j = 0; j < n; j++) {
            er_round_double(&x[j], fx, er_rand_normal() * scale + ((er_rand64() % 3 == 0) ? 300 * scale : 0), ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            er_round_double(&w[j], fx, 1 + er_rand_normal() / 4, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            er_store(X, fx, j, x[j]);
            er_store(W, fx, j, w[j]);
        }
        emu e;
        emu_init(&e, ER_FP32);
        double sq[200];
        for (int j = 0; j < n; j++) sq[j] = emu_mul(&e, x[j], x[j]);
        double q = emu_sum_random(&e, sq, n);
        mpfr_t t;
        mpfr_init2(t, 200);
        double ms;
        if (er_rand64() & 1) { mpfr_set_d(t, q, MPFR_RNDN); mpfr_div_ui(t, t, (unsigned long)n, MPFR_RNDN); ms = emu_round(&e, t); }
        else { mpfr_set_ui(t, 1, MPFR_RNDN); mpfr_div_ui(t, t, (unsigned long)n, MPFR_RNDN); double rn = emu_round(&e, t); ms = emu_mul(&e, q, rn); }
        double epsF = er_oracle_round_d(ER_FP32, eps);
        double v = emu_add(&e, ms, epsF);
        mpfr_set_d(t, v, MPFR_RNDN);
        mpfr_rec_sqrt(t, t, MPFR_RNDN);
        double r = er_oracle_round(ER_FP32, t, (er_rand64() & 1) ? MPFR_RNDU : MPFR_RNDD, ER_OVERFLOW_IEEE);
        int comp = (int)(er_rand64() % 3);
        for (int i = 0; i < n; i++) {
            double y;
            if (comp == 0) y = emu_mul(&e, emu_mul(&e, x[i], r), w[i]);
            else if (comp == 2) y = emu_mul(&e, x[i], emu_mul(&e, r, w[i]));
            else {
                double xr = er_oracle_round_d(fo, emu_mul(&e, x[i], r));
                mpfr_set_d(t, xr, MPFR_RNDN);
                mpfr_mul_d(t, t, w[i], MPFR_RNDN);
                y = er_oracle_round(fo, t, MPFR_RNDN, ER_OVERFLOW_IEEE);
            }
            er_store(Y, fo, i, er_oracle_round_d(fo, y));
        }
        mpfr_clear(t);
        emu_clear(&e);
        er_tensor tx, tw, ty;
        er_tensor_view(&tx, fx, 1, (int64_t[]){n}, NULL, X);
        er_tensor_view(&tw, fx, 1, (int64_t[]){n}, NULL, W);
        er_tensor_view(&ty, fo, 1, (int64_t[]){n}, NULL, Y);
        er_ref *ref;
        ck_assert_int_eq(er_rmsnorm(&ref, &tx, &tw, eps), ER_OK);
        er_standard std;
        er_standard_init(&std);
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &ty, &std) == ER_OK, "covers: %s", er_last_error());
        ER_REQUIRE_PASS(&rep, "trial %ld: a correct rmsnorm (x %s, out %s, n %d, composition %d) was called wrong:" ER_SEED_MSG_FMT,
                         tr, er_format_name(fx), er_format_name(fo), n, comp, ER_SEED_ARGS);
        er_report_clear(&rep);
        er_ref_free(ref);
    }
    /* a zero row with eps = 0: 0 * rsqrt(0) = 0 * inf = NaN; refusals */
    float z[4] = {0, 0, 0, 0}, o[4] = {NAN, NAN, NAN, NAN};
    er_tensor tz, to;
    er_tensor_view(&tz, ER_FP32, 1, (int64_t[]){4}, NULL, z);
    er_tensor_view(&to, ER_FP32, 1, (int64_t[]){4}, NULL, o);
    er_ref *r;
    er_standard std;
    er_standard_init(&std);
    er_report rep;
    ck_assert_int_eq(er_rmsnorm(&r, &tz, NULL, 0.0), ER_OK);
    ck_assert_int_eq(er_covers(&rep, r, &to, &std), ER_OK);
    ck_assert_msg(er_report_all(&rep), "a zero row with eps = 0 must allow NaN");
    er_report_clear(&rep);
    er_ref_free(r);
    ck_assert_int_eq(er_rmsnorm(&r, &tz, NULL, -1.0), ER_ERR_INVALID);
    ck_assert_int_eq(er_rmsnorm(&r, &tz, &tz, 1e-6), ER_OK);
    er_ref_free(r);
    er_tensor t3;
    er_tensor_view(&t3, ER_FP32, 1, (int64_t[]){3}, NULL, z);
    ck_assert_int_eq(er_rmsnorm(&r, &tz, &t3, 1e-6), ER_ERR_SHAPE);
}
END_TEST

/* A value of F within U ulps (of F at the exact value) of the real t: the exact value moved by a random real
 * in [-U, U] ulps, then rounded toward it. U >= 1. */
static double within_ulps(er_format F, mpfr_t t, double U) {
    double ex = mpfr_get_d(t, MPFR_RNDN), ulp = er_format_ulp(F, fabs(ex));
    double r = (2.0 * (double)(er_rand64() >> 11) * 0x1p-53 - 1.0) * U;
    mpfr_t v;
    mpfr_init2(v, 200);
    mpfr_set(v, t, MPFR_RNDN);
    mpfr_add_d(v, v, r * ulp, MPFR_RNDN);
    double y = er_oracle_round(F, v, r > 0 ? MPFR_RNDD : MPFR_RNDU, ER_OVERFLOW_IEEE);
    mpfr_clear(v);
    return y;
}

/* exp(d) within the standard's bound: U ulps, or 2 + floor(1.173 |d|) for the fast bound. */
static double exp_impl(er_format F, double d, int fast, double U) {
    if (d == -INFINITY) return 0.0;
    mpfr_t t;
    mpfr_init2(t, 200);
    mpfr_set_d(t, d, MPFR_RNDN);
    mpfr_exp(t, t, MPFR_RNDN);
    double y = within_ulps(F, t, fast ? 2.0 + floor(1.173 * fabs(d)) : U);
    mpfr_clear(t);
    return y;
}

/* softmax rows by the option standards: the fast exp bound, division within 2 ulps, the maximum left out, and the
 * online sum over random blocks with rescaling. Each is covered under the standard that states it. */
START_TEST(option_implementations_are_covered) {
    er_test_reseed(520);
    long trials = (long)(300 * er_test_multiplier()), per[4] = {0, 0, 0, 0};
    const er_format F = ER_FP32;
    for (long tr = 0; tr < trials; tr++) {
        int kind = (int)(tr % 4), n = (int)er_rand_int(1, 400);
        er_format fx = er_rand64() & 1 ? ER_FP16 : ER_FP32;
        double x[400], y[400], ev[400];
        uint64_t X[400], Y[400];
        double sc = kind == 2 ? 2.0 : ldexp(1.0, (int)er_rand_int(-2, 3));
        for (int j = 0; j < n; j++) {
            er_round_double(&x[j], fx, er_rand_normal() * sc, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            if (kind != 2 && er_rand64() % 16 == 0) x[j] = -INFINITY;
            er_store(X, fx, j, x[j]);
        }
        emu e;
        emu_init(&e, F);
        double m = -INFINITY;
        for (int j = 0; j < n; j++) if (x[j] > m) m = x[j];
        if (kind == 2) m = 0.0; /* the maximum left out */
        int fast = kind == 0 || kind == 3, online = kind == 3;
        double s = 0.0;
        if (online && m != -INFINITY) {
            /* random blocks; s = s * exp(m_old - m_new) + sum of the block's exps */
            double mr = -INFINITY;
            int j = 0;
            while (j < n) {
                int len = (int)er_rand_int(1, 64);
                if (j + len > n) len = n - j;
                double mb = mr;
                for (int k = j; k < j + len; k++) if (x[k] > mb) mb = x[k];
                double bs[64];
                for (int k = 0; k < len; k++) bs[k] = mb == -INFINITY ? 0.0 : exp_impl(F, emu_add(&e, x[j + k], -mb), fast, 2.0);
                double blk = emu_sum_random(&e, bs, len);
                double r = mr == -INFINITY ? 0.0 : exp_impl(F, emu_add(&e, mr, -mb), fast, 2.0);
                s = emu_add(&e, emu_mul(&e, s, r), blk);
                mr = mb;
                j += len;
            }
        }
        for (int j = 0; j < n; j++) ev[j] = m == -INFINITY ? NAN : exp_impl(F, emu_add(&e, x[j], -m), fast, 2.0);
        if (!online) {
            double tmp[400];
            memcpy(tmp, ev, sizeof(double) * (size_t)n);
            s = emu_sum_random(&e, tmp, n);
        }
        mpfr_t t;
        mpfr_init2(t, 200);
        for (int i = 0; i < n; i++) {
            if (kind == 1 && ev[i] != 0) { /* e / s within 2 ulps (0 / s stays 0) */
                mpfr_set_d(t, ev[i], MPFR_RNDN);
                mpfr_div_d(t, t, s, MPFR_RNDN);
                y[i] = within_ulps(F, t, 2.0);
            } else {
                mpfr_set_d(t, ev[i], MPFR_RNDN);
                mpfr_div_d(t, t, s, MPFR_RNDN);
                y[i] = er_oracle_round(F, t, MPFR_RNDN, ER_OVERFLOW_IEEE);
            }
            if (m == -INFINITY || isnan(ev[i])) y[i] = NAN;
            er_store(Y, ER_FP32, i, y[i]);
        }
        mpfr_clear(t);
        emu_clear(&e);
        static const char *const opts[4] = {"exp_ulps=fast", "div_ulps=2", "max=optional", "online=yes exp_ulps=fast"};
        er_tensor tx, ty;
        er_tensor_view(&tx, fx, 1, (int64_t[]){n}, NULL, X);
        er_tensor_view(&ty, ER_FP32, 1, (int64_t[]){n}, NULL, Y);
        er_ref *ref;
        ck_assert_int_eq(er_softmax(&ref, &tx, 0), ER_OK);
        er_standard std;
        ER_REQUIRE(er_standard_parse(&std, "any_order", opts[kind]) == ER_OK, "%s", er_last_error());
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &ty, &std) == ER_OK, "covers: %s", er_last_error());
        ER_REQUIRE_PASS(&rep, "trial %ld: a correct softmax under '%s' (x %s, n %d) was called wrong:" ER_SEED_MSG_FMT, tr,
                        opts[kind], er_format_name(fx), n, ER_SEED_ARGS);
        er_report_clear(&rep);
        er_ref_free(ref);
        per[kind]++;
    }
    printf("softmax options: %ld fast-exp, %ld 2-ulp-division, %ld no-max and %ld online implementations covered\n",
           per[0], per[1], per[2], per[3]);
    /* contradictions are refused */
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "exp_ulps=fast exp_ulps=3"), ER_ERR_STANDARD);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "div_ulps=2 div=divide"), ER_ERR_STANDARD);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "online=maybe"), ER_ERR_STANDARD);
}
END_TEST

/* EXACT is decided exactly: the correctly rounded softmax and log_softmax (MPFR at 400 bits, rounded by the test's
 * own oracle) are EXACT in every element, and the value one ulp above is never EXACT. Rows of every kind: normal,
 * wide, masked lanes, and a dominant element (log_softmax within 2^-40 of 0, which the double bounds cannot
 * decide). */
START_TEST(exact_results_are_exact) {
    er_test_reseed(560);
    long trials = (long)(300 * er_test_multiplier());
    static const er_format ins[] = {ER_FP16, ER_BF16, ER_FP32}, outs[] = {ER_FP32, ER_FP16, ER_BF16};
    mpfr_t t, s, q;
    mpfr_inits2(400, t, s, q, (mpfr_ptr)0);
    long elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        int log = tr % 2, kind = (int)(tr / 2 % 4), n = (int)er_rand_int(1, 200);
        er_format fx = ins[er_rand64() % 3], fo = outs[er_rand64() % 3];
        double x[200], y[200];
        uint64_t X[200], Y[200];
        double scale = kind == 1 ? 30.0 : 3.0;
        for (int j = 0; j < n; j++) {
            double v = er_rand_normal() * scale;
            if (kind == 2 && er_rand64() % 5 == 0) v = -INFINITY;
            if (kind == 3) v = j == 0 ? 0.0 : -(double)er_rand_int(28, 60) - er_rand_unit();
            er_round_double(&x[j], fx, v, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            er_store(X, fx, j, x[j]);
        }
        double m = -INFINITY;
        for (int j = 0; j < n; j++) m = fmax(m, x[j]);
        if (m == -INFINITY) { x[0] = 0; er_store(X, fx, 0, 0); m = 0; }
        mpfr_set_zero(s, 1);
        for (int j = 0; j < n; j++) {
            if (x[j] == -INFINITY) continue;
            mpfr_set_d(t, x[j], MPFR_RNDN);
            mpfr_sub_d(t, t, m, MPFR_RNDN);
            mpfr_exp(t, t, MPFR_RNDN);
            mpfr_add(s, s, t, MPFR_RNDN);
        }
        for (int j = 0; j < n; j++) {
            if (x[j] == -INFINITY) { y[j] = log ? -INFINITY : 0.0; er_store(Y, fo, j, y[j]); continue; }
            mpfr_set_d(t, x[j], MPFR_RNDN);
            mpfr_sub_d(t, t, m, MPFR_RNDN);
            if (log) { mpfr_log(q, s, MPFR_RNDN); mpfr_sub(q, t, q, MPFR_RNDN); }
            else { mpfr_exp(t, t, MPFR_RNDN); mpfr_div(q, t, s, MPFR_RNDN); }
            y[j] = er_oracle_round(fo, q, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
            er_store(Y, fo, j, y[j]);
        }
        er_tensor tx, ty;
        er_tensor_view(&tx, fx, 1, (int64_t[]){n}, NULL, X);
        er_tensor_view(&ty, fo, 1, (int64_t[]){n}, NULL, Y);
        er_ref *ref;
        ck_assert_int_eq(log ? er_log_softmax(&ref, &tx, 0) : er_softmax(&ref, &tx, 0), ER_OK);
        er_standard std;
        er_standard_init(&std);
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &ty, &std) == ER_OK, "covers: %s", er_last_error());
        for (int j = 0; j < n; j++)
            ER_REQUIRE(rep.classes[j] == ER_CLASS_EXACT, "trial %ld (%s, %s in, %s out, row kind %d): element %d, the correctly "
                       "rounded %a, is class %d " ER_SEED_MSG_FMT, tr, log ? "log_softmax" : "softmax", er_format_name(fx),
                       er_format_name(fo), kind, j, y[j], rep.classes[j], ER_SEED_ARGS);
        er_report_clear(&rep);
        /* one ulp above: never EXACT */
        int j = (int)er_rand_int(0, n - 1);
        if (isfinite(y[j])) {
            double up;
            er_round_double(&up, fo, y[j] + er_format_ulp(fo, y[j]) * (y[j] < 0 ? 0.5 : 1.0), ER_ROUND_UP, ER_OVERFLOW_SATURATE);
            if (up == y[j]) up = nextafter(y[j], INFINITY);
            er_store(Y, fo, j, up);
            ER_REQUIRE(er_covers(&rep, ref, &ty, &std) == ER_OK, "covers: %s", er_last_error());
            ER_REQUIRE(rep.classes[j] != ER_CLASS_EXACT, "trial %ld: %a one ulp above the correctly rounded %a is EXACT " ER_SEED_MSG_FMT,
                       tr, up, y[j], ER_SEED_ARGS);
            er_report_clear(&rep);
        }
        elems += n;
        er_ref_free(ref);
    }
    mpfr_clears(t, s, q, (mpfr_ptr)0);
    printf("softmax and log_softmax: %ld correctly rounded elements of %ld rows are EXACT\n", elems, trials);
}
END_TEST

/* rmsnorm's EXACT is decided exactly: the correctly rounded x w / sqrt(mean(x^2) + eps) (MPFR at 600 bits, eps as fp32
 * holds it, the test's oracle) is EXACT in every element and one ulp above never is; rows of fp16, bf16 and fp32, with
 * weights or without, and rows whose y falls on midpoints of the output format (x = +-1/2 with eps = 0 gives
 * rstd 2 exactly, y = +-w, with w chosen on a midpoint): the double enclosure straddles those and MPFR decides. */
START_TEST(rmsnorm_exact_results_are_exact) {
    er_test_reseed(580);
    long trials = (long)(200 * er_test_multiplier()), elems = 0;
    static const er_format ins[] = {ER_FP16, ER_BF16, ER_FP32}, outs[] = {ER_FP32, ER_FP16, ER_BF16};
    mpfr_t S, t, r, q;
    mpfr_inits2(600, S, t, r, q, (mpfr_ptr)0);
    for (long tr = 0; tr < trials; tr++) {
        int n = (int)er_rand_int(1, 150), kind = (int)(tr % 3), weighted = kind == 2 || tr % 2;
        er_format fx = ins[er_rand64() % 3], fo = outs[er_rand64() % 3];
        double x[150], w[150], y[150], eps = kind == 2 ? 0.0 : 1e-6;
        uint64_t X[150], W[150], Y[150];
        for (int j = 0; j < n; j++) {
            er_round_double(&x[j], fx, er_rand_normal() * (kind == 1 ? 100.0 : 1.0), ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            er_round_double(&w[j], ER_FP32, er_rand_normal(), ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE); /* either sign */
            if (kind == 2) { /* x = +-1/2: mean square 1/4, rstd 2; y = +-w on a midpoint of the output */
                x[j] = j % 2 ? 0.5 : -0.5;
                w[j] = 0.5 * (1.0 + ldexp(2.0 * (double)er_rand_int(0, 20) + 1.0, -er_format_precision(fo)));
            }
            er_store(X, fx, j, x[j]);
            er_store(W, ER_FP32, j, w[j]);
        }
        double epsf;
        er_round_double(&epsf, ER_FP32, eps, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        mpfr_set_zero(S, 1);
        for (int j = 0; j < n; j++) { mpfr_set_d(t, x[j], MPFR_RNDN); mpfr_sqr(t, t, MPFR_RNDN); mpfr_add(S, S, t, MPFR_RNDN); }
        mpfr_div_ui(S, S, (unsigned long)n, MPFR_RNDN);
        mpfr_add_d(S, S, epsf, MPFR_RNDN);
        if (mpfr_zero_p(S)) continue; /* an all-zero row with eps 0: NaN (checked elsewhere) */
        mpfr_rec_sqrt(r, S, MPFR_RNDN);
        for (int j = 0; j < n; j++) {
            mpfr_mul_d(q, r, x[j], MPFR_RNDN);
            if (weighted) mpfr_mul_d(q, q, w[j], MPFR_RNDN);
            y[j] = er_oracle_round(fo, q, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
            er_store(Y, fo, j, y[j]);
        }
        er_tensor tx, ty, tw;
        er_tensor_view(&tx, fx, 1, (int64_t[]){n}, NULL, X);
        er_tensor_view(&ty, fo, 1, (int64_t[]){n}, NULL, Y);
        er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){n}, NULL, W);
        er_ref *ref;
        ck_assert_int_eq(er_rmsnorm(&ref, &tx, weighted ? &tw : NULL, eps), ER_OK);
        er_standard std;
        er_standard_init(&std);
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &ty, &std) == ER_OK, "covers: %s", er_last_error());
        for (int j = 0; j < n; j++)
            ER_REQUIRE(rep.classes[j] == ER_CLASS_EXACT, "trial %ld (%s in, %s out, kind %d): element %d, the correctly rounded "
                       "%a, is class %d " ER_SEED_MSG_FMT, tr, er_format_name(fx), er_format_name(fo), kind, j, y[j], rep.classes[j],
                       ER_SEED_ARGS);
        er_report_clear(&rep);
        int j = (int)er_rand_int(0, n - 1);
        double up = nextafter(y[j], INFINITY);
        er_round_double(&up, fo, up, ER_ROUND_UP, ER_OVERFLOW_SATURATE);
        er_store(Y, fo, j, up);
        ER_REQUIRE(er_covers(&rep, ref, &ty, &std) == ER_OK, "covers: %s", er_last_error());
        ER_REQUIRE(rep.classes[j] != ER_CLASS_EXACT, "trial %ld: %a above the correctly rounded %a is EXACT " ER_SEED_MSG_FMT, tr, up,
                   y[j], ER_SEED_ARGS);
        er_report_clear(&rep);
        elems += n;
        er_ref_free(ref);
    }
    mpfr_clears(S, t, r, q, (mpfr_ptr)0);
    printf("rmsnorm: %ld correctly rounded elements of %ld rows are EXACT\n", elems, trials);
}
END_TEST

/* compute=fp16: a softmax whose exps, sum and division round to fp16 (exps within 2 ulps, any order, division or
 * reciprocal) is covered, on fp16 rows wide enough that exps fall into fp16's subnormals and to zero. */
START_TEST(fp16_compute_softmax_is_covered) {
    er_test_reseed(590);
    long trials = (long)(300 * er_test_multiplier());
    for (long tr = 0; tr < trials; tr++) {
        int n = (int)er_rand_int(1, 200);
        er_format fo = tr % 2 ? ER_FP16 : ER_FP32;
        double x[200], y[200], scale = ldexp(1.0, (int)er_rand_int(-2, 4));
        uint64_t X[200], Y[200];
        for (int j = 0; j < n; j++) {
            er_round_double(&x[j], ER_FP16, er_rand_normal() * scale, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            if (er_rand64() % 10 == 0) x[j] = -INFINITY;
            er_store(X, ER_FP16, j, x[j]);
        }
        implement(ER_FP16, x, n, y, 0);
        for (int j = 0; j < n; j++) er_store(Y, fo, j, y[j]); /* fp16 values: exact in either output */
        er_tensor tx, ty;
        er_tensor_view(&tx, ER_FP16, 1, (int64_t[]){n}, NULL, X);
        er_tensor_view(&ty, fo, 1, (int64_t[]){n}, NULL, Y);
        er_ref *ref;
        ck_assert_int_eq(er_softmax(&ref, &tx, 0), ER_OK);
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, "any_order", "compute=fp16"), ER_OK);
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &ty, &std) == ER_OK, "covers: %s", er_last_error());
        if (!er_report_all(&rep)) {
            char text[4096];
            er_report_text(&rep, text, sizeof text, NULL);
            ck_abort_msg("trial %ld: a correct fp16 softmax (n %d, out %s) was called wrong:\n%s" ER_SEED_MSG_FMT, tr, n,
                         er_format_name(fo), text, ER_SEED_ARGS);
        }
        er_report_clear(&rep);
        er_ref_free(ref);
    }
    printf("softmax: %ld fp16-compute implementations covered\n", trials);
}
END_TEST

/* Rows are shared among threads: the reports are the same for any thread count (softmax and log_softmax along the
 * last dimension, rmsnorm), with failing elements in several rows. */
START_TEST(row_ops_same_report_for_any_thread_count) {
    er_test_reseed(540);
    enum { R = 97, N = 61 };
    static float x[R * N], y[R * N], w[N];
    for (int i = 0; i < R * N; i++) x[i] = (float)(3 * er_rand_normal());
    for (int j = 0; j < N; j++) w[j] = (float)(1 + er_rand_normal() / 4);
    er_tensor tx, ty, tw;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, N}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){R, N}, NULL, y);
    er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){N}, NULL, w);
    for (int op = 0; op < 3; op++) {
        er_ref *ref;
        if (op == 0) ck_assert_int_eq(er_softmax(&ref, &tx, 1), ER_OK);
        else if (op == 1) ck_assert_int_eq(er_log_softmax(&ref, &tx, -1), ER_OK);
        else ck_assert_int_eq(er_rmsnorm(&ref, &tx, &tw, 1e-6), ER_OK);
        /* the output: float64 results rounded to fp32, every 7th moved by 1%, every 11th by 2^-20 relative */
        for (int r = 0; r < R; r++) {
            double m = -INFINITY, s = 0, q = 0;
            for (int j = 0; j < N; j++) { m = fmax(m, x[r * N + j]); q += (double)x[r * N + j] * x[r * N + j]; }
            for (int j = 0; j < N; j++) s += exp((double)x[r * N + j] - m);
            for (int j = 0; j < N; j++) {
                double v = op == 0 ? exp(x[r * N + j] - m) / s : op == 1 ? x[r * N + j] - m - log(s) : x[r * N + j] * w[j] / sqrt(q / N + 1e-6);
                if ((r * N + j) % 7 == 0) v *= 1.01;
                if ((r * N + j) % 11 == 0) v *= 1 + 0x1p-20;
                y[r * N + j] = (float)v;
            }
        }
        er_standard std;
        er_standard_init(&std);
        er_report rep[3];
        static const char *const th[3] = {"1", "2", "5"};
        for (int t = 0; t < 3; t++) {
            setenv("EXACTREF_THREADS", th[t], 1);
            ck_assert_int_eq(er_covers(&rep[t], ref, &ty, &std), ER_OK);
        }
        unsetenv("EXACTREF_THREADS");
        ck_assert_int_gt(rep[0].n_failed, 0);
        for (int t = 1; t < 3; t++) {
            ck_assert(memcmp(rep[0].counts, rep[t].counts, sizeof rep[0].counts) == 0);
            ck_assert(memcmp(rep[0].classes, rep[t].classes, (size_t)(R * N)) == 0);
            ck_assert_int_eq(rep[0].n_first, rep[t].n_first);
            for (int i = 0; i < rep[0].n_first; i++) ck_assert_int_eq(rep[0].first[i].index, rep[t].first[i].index);
            ck_assert_int_eq(rep[0].worst.index, rep[t].worst.index);
            ck_assert(rep[0].worst.distance_ulps == rep[t].worst.distance_ulps);
        }
        for (int t = 0; t < 3; t++) er_report_clear(&rep[t]);
        er_ref_free(ref);
    }
}
END_TEST

/* The report of the row ops' per-element path (EXACTREF_FAST=0: every set put into the report) under the default
 * standard (compared with er_require_same_tally). */
static void covers_per_element(er_report *a, er_ref *ref, const er_tensor *ty) {
    er_standard std;
    er_standard_init(&std);
    setenv("EXACTREF_FAST", "0", 1);
    ck_assert_int_eq(er_covers(a, ref, ty, &std), ER_OK);
    unsetenv("EXACTREF_FAST");
}
/* The row ops (and layernorm's y) keep the record of each output inside its set as a tally and its widest set
 * (rowmods.c, er__row_put); with EXACTREF_FAST=0 they put every set into the report. Both reports must agree in every field: counts, classes,
 * failing lists, the widest set, the resolution's widths, the classic bug's tests and note, unbounded sets; on rows
 * of 61 and of 4096 (where rmsnorm's bug of n - 1 may pass), with rows of equal values (equal sets: the first of the
 * widest), outputs moved by 1% or 2^-20, and NaN. */
START_TEST(row_ops_same_report_with_or_without_the_tally) {
    er_test_reseed(550);
    static const int64_t shapes[2][2] = {{97, 61}, {6, 4096}};
    for (int sh = 0; sh < 2; sh++) {
        int64_t R = shapes[sh][0], N = shapes[sh][1];
        float *x = malloc(sizeof(float) * (size_t)(R * N)), *y = malloc(sizeof(float) * (size_t)(R * N));
        float *w = malloc(sizeof(float) * (size_t)N);
        for (int64_t i = 0; i < R * N; i++) x[i] = (float)(3 * er_rand_normal());
        for (int64_t j = 0; j < N; j++) { x[2 * N + j] = x[2 * N]; w[j] = (float)(1 + er_rand_normal() / 4); }
        er_tensor tx, ty, tw;
        er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, N}, NULL, x);
        er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){R, N}, NULL, y);
        er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){N}, NULL, w);
        for (int op = 0; op < 6; op++) {
            er_ref *ref;
            if (op == 0) ck_assert_int_eq(er_softmax(&ref, &tx, 1), ER_OK);
            else if (op == 1) ck_assert_int_eq(er_log_softmax(&ref, &tx, -1), ER_OK);
            else if (op >= 4) ck_assert_int_eq(er_layernorm(&ref, &tx, 1, op == 5 ? &tw : NULL, &tw, 1e-6), ER_OK);
            else ck_assert_int_eq(er_rmsnorm(&ref, &tx, op == 3 ? &tw : NULL, 1e-6), ER_OK);
            for (int64_t r = 0; r < R; r++) {
                double m = -INFINITY, s = 0, q = 0, mu = 0, d2 = 0;
                for (int64_t j = 0; j < N; j++) { m = fmax(m, x[r * N + j]); q += (double)x[r * N + j] * x[r * N + j]; }
                for (int64_t j = 0; j < N; j++) s += exp((double)x[r * N + j] - m);
                for (int64_t j = 0; j < N; j++) mu += x[r * N + j] / (double)N;
                for (int64_t j = 0; j < N; j++) d2 += (x[r * N + j] - mu) * (x[r * N + j] - mu);
                for (int64_t j = 0; j < N; j++) {
                    int64_t e = r * N + j;
                    double v = op == 0   ? exp(x[e] - m) / s
                               : op == 1 ? x[e] - m - log(s)
                               : op >= 4 ? (x[e] - mu) / sqrt(d2 / N + 1e-6) * (op == 5 ? w[j] : 1) + w[j]
                                         : x[e] * (op == 3 ? w[j] : 1) / sqrt(q / N + 1e-6);
                    if (e % 97 == 5) v *= 1.01;
                    if (e % 89 == 3) v *= 1 + 0x1p-20;
                    y[e] = e % 1013 == 7 ? NAN : (float)v;
                }
            }
            er_standard std;
            er_standard_init(&std);
            er_report a, b;
            covers_per_element(&a, ref, &ty);
            ck_assert_int_eq(er_covers(&b, ref, &ty, &std), ER_OK);
            char what[64];
            snprintf(what, sizeof what, "op %d, %lld x %lld", op, (long long)R, (long long)N);
            er_require_same_tally(&a, &b, what);
            ck_assert_int_gt(b.n_failed, 0);
            ck_assert_int_gt(b.counts[ER_CLASS_COVERED], 0);
            er_report_clear(&a);
            er_report_clear(&b);
            er_ref_free(ref);
        }
        free(x);
        free(y);
        free(w);
    }
}
END_TEST

/* The same agreement where the rows are decided in runs (er__sink_tally_run): fp16, bf16 and fp32 outputs, stored
 * row-major or transposed, x and the weights scaled so that outputs reach past the output format's largest value
 * (sets with an infinity: elements the runs leave to the per-element record), a few weights so small that fp16 outputs
 * are a few subnormals, flat rows (every set the same: the widest set tied), weights in fp64 and x of -0 and +0
 * and a tiny negative x (whose products round to -0 in fp16) with outputs a few subnormals off (failing elements whose
 * sets are zeros of either sign), every op of the tally. */
START_TEST(row_ops_same_report_in_runs) {
    er_test_reseed(551);
    const int64_t R = 7, N = 1000;
    static const er_format fmts[3] = {ER_FP16, ER_BF16, ER_FP32};
    float *x = malloc(sizeof(float) * (size_t)(R * N)), *w = malloc(sizeof(float) * (size_t)N);
    double *w64 = malloc(sizeof(double) * (size_t)N);
    double *v = malloc(sizeof(double) * (size_t)(R * N)), *z = malloc(sizeof(double) * (size_t)(R * N));
    void *y = malloc(sizeof(float) * (size_t)(R * N));
    int64_t past = 0;
    for (int of = 0; of < 3; of++)
        for (int kind = 0; kind < 3; kind++)
            for (int tr = 0; tr < 2; tr++) {
                er_format f = fmts[of];
                int big = kind == 1, flat = kind == 2; /* flat: every x and every weight equal, so every set */
                double top = f == ER_FP16 ? 65504.0 : f == ER_BF16 ? 0x1.fep127 : 0x1.fffffep127;
                /* big: the weights (and log_softmax's x) scaled so that the largest outputs lie past top */
                double ws = big ? top / 2 : 1, xb = big ? (f == ER_FP16 ? 1e4 : 1e37) : 3;
                for (int64_t i = 0; i < R * N; i++) z[i] = flat ? 0.5 : i % N == 1 ? -0.0 : i % N == 2 ? 0.0 : i % N == 3 ? -1e-20 : er_rand_normal();
                /* every 50th weight 2^-27: fp16 outputs of a few of fp16's least subnormal (tied widest sets) */
                for (int64_t j = 0; j < N; j++) {
                    w64[j] = flat ? 1.125 : j % 50 == 3 ? 0x1p-27 : ws * (1 + er_rand_normal() / 4);
                    w[j] = (float)w64[j];
                }
                er_tensor tx, ty, tw;
                er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, N}, NULL, x);
                er_tensor_view(&ty, f, 2, (int64_t[]){R, N}, tr ? (int64_t[]){1, R} : NULL, y);
                /* the transposed outputs' weights in fp64, most of them not floats */
                er_tensor_view(&tw, tr ? ER_FP64 : ER_FP32, 1, (int64_t[]){N}, NULL, tr ? (void *)w64 : (void *)w);
                for (int op = 0; op < 6; op++) {
                    er_ref *ref;
                    double xs = op == 1 ? xb : 3;
                    for (int64_t i = 0; i < R * N; i++) x[i] = (float)(xs * z[i]);
                    if (op == 0) ck_assert_int_eq(er_softmax(&ref, &tx, 1), ER_OK);
                    else if (op == 1) ck_assert_int_eq(er_log_softmax(&ref, &tx, -1), ER_OK);
                    else if (op >= 4)
                        ck_assert_int_eq(er_layernorm(&ref, &tx, 1, op == 5 ? &tw : NULL, &tw, 1e-6), ER_OK);
                    else ck_assert_int_eq(er_rmsnorm(&ref, &tx, op == 3 ? &tw : NULL, 1e-6), ER_OK);
                    for (int64_t r = 0; r < R; r++) {
                        double m = -INFINITY, s = 0, q = 0, mu = 0, d2 = 0;
                        for (int64_t j = 0; j < N; j++) {
                            m = fmax(m, x[r * N + j]);
                            q += ((double)x[r * N + j] / xs) * ((double)x[r * N + j] / xs);
                            mu += x[r * N + j] / (double)N;
                        }
                        for (int64_t j = 0; j < N; j++) {
                            s += exp((double)x[r * N + j] - m);
                            d2 += ((x[r * N + j] - mu) / xs) * ((x[r * N + j] - mu) / xs);
                        }
                        for (int64_t j = 0; j < N; j++) {
                            int64_t e = r * N + j;
                            double wj = tr ? w64[j] : w[j], sc = op == 3 || op == 5 ? wj : 1;
                            v[e] = op == 0   ? exp(x[e] - m) / s
                                   : op == 1 ? x[e] - m - log(s)
                                   : op >= 4 ? (x[e] - mu) / xs / sqrt(d2 / N + 1e-6 / (xs * xs)) * sc + wj
                                             : x[e] / xs * sc / sqrt(q / N + 1e-6 / (xs * xs));
                            if (e % 97 == 5) v[e] *= 1.01;
                            if (e % 89 == 3) v[e] *= 1 + 0x1p-9;
                            if (e % 1013 == 7) v[e] = NAN;
                            if (fabs(z[e]) < 1e-19) v[e] = ldexp(4, f == ER_FP16 ? -24 : f == ER_BF16 ? -133 : -149);
                            er_store(y, f, tr ? (e % N) * R + e / N : e, v[e]);
                        }
                    }
                    er_standard std;
                    er_standard_init(&std);
                    er_report a, b;
                    covers_per_element(&a, ref, &ty);
                    /* the runs' loops at each level: the baseline ISA's, AVX2's and the processor's (EXACTREF_SIMD) */
                    static const char *const levels[3] = {"0", "1", NULL};
                    for (int lv = 0; lv < 3; lv++) {
                        if (levels[lv]) setenv("EXACTREF_SIMD", levels[lv], 1);
                        ck_assert_int_eq(er_covers(&b, ref, &ty, &std), ER_OK);
                        unsetenv("EXACTREF_SIMD");
                        char what[112];
                        snprintf(what, sizeof what, "op %d, %s output%s%s, EXACTREF_SIMD=%s", op, er_format_name(f),
                                 big ? ", scaled" : flat ? ", flat" : "", tr ? ", transposed" : "",
                                 levels[lv] ? levels[lv] : "unset");
                        er_require_same_tally(&a, &b, what);
                        ck_assert_msg(b.n_failed > 0, "%s: nothing fails", what);
                        er_report_clear(&b);
                    }
                    for (int64_t e = 0; e < R * N; e++) past += fabs(v[e]) > top;
                    er_report_clear(&a);
                    er_ref_free(ref);
                }
            }
    /* the scaled rows reached past the format's range */
    ck_assert_int_gt(past, 100);
    free(x);
    free(w);
    free(w64);
    free(v);
    free(z);
    free(y);
}
END_TEST

int main(void) {
    Suite *s = suite_create("softmax");
    TCase *tc = tcase_create("softmax");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, torch_softmax_on_h200_is_covered);
    tcase_add_test(tc, random_implementations_are_covered);
    tcase_add_test(tc, exact_and_special_rows);
    tcase_add_test(tc, exact_results_are_exact);
    tcase_add_test(tc, rmsnorm_exact_results_are_exact);
    tcase_add_test(tc, fp16_compute_softmax_is_covered);
    tcase_add_test(tc, log_softmax_implementations);
    tcase_add_test(tc, rmsnorm_implementations);
    tcase_add_test(tc, option_implementations_are_covered);
    tcase_add_test(tc, row_ops_same_report_for_any_thread_count);
    tcase_add_test(tc, row_ops_same_report_with_or_without_the_tally);
    tcase_add_test(tc, row_ops_same_report_in_runs);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
