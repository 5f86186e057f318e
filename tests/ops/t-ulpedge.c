/* t-ulpedge.c: approximate functions at the edge of their ulp budget (docs/algorithms/ulp-slack.md).
 *
 * Implementations in float32 arithmetic (every step one correctly rounded operation) whose rsqrt, log, exp or
 * division returns the lowest or the highest value its budget allows, under either reading of "within U ulps":
 * U ulps of the format at the exact value, or U ulps of the correctly rounded value (CUDA's accuracy table).
 * The inputs put the function's result at and around powers of two, where the ulp halves below: short rows
 * (n = 1, 2, 3), rows of equal values, log_softmax sums just above e^0.25, e^0.5, e, e^2 and e^4, softmax
 * exps just below 1 and quotients at 1/2 and 1/4. Every output must be covered. */
#include <float.h>
#include "../common/er_gen.h"

/* The extreme values of fp32 an approximation of the real t within U ulps may return: which 0 and 1, the lowest
 * and highest reading ulps at t; 2 and 3, the lowest and highest reading ulps of the correctly rounded c = RN(t)
 * (ulp(c) its spacing upward, so a power of two c may step 2U values of the binade below); 4, c itself. */
static double edge(mpfr_srcptr t, double U, int which) {
    mpfr_t v;
    mpfr_init2(v, 300);
    double c = er_oracle_round(ER_FP32, t, MPFR_RNDN, ER_OVERFLOW_IEEE), y;
    if (which == 4) { mpfr_clear(v); return c; }
    if (which < 2) mpfr_set(v, t, MPFR_RNDN);
    else mpfr_set_d(v, c, MPFR_RNDN);
    double ulp = er_format_ulp(ER_FP32, mpfr_get_d(v, MPFR_RNDZ)); /* RNDZ keeps |v|'s binade */
    if (which & 1) { mpfr_add_d(v, v, U * ulp, MPFR_RNDN); y = er_oracle_round(ER_FP32, v, MPFR_RNDD, ER_OVERFLOW_IEEE); }
    else { mpfr_sub_d(v, v, U * ulp, MPFR_RNDN); y = er_oracle_round(ER_FP32, v, MPFR_RNDU, ER_OVERFLOW_IEEE); }
    mpfr_clear(v);
    return y;
}

/* f(x) for f = rsqrt (0), log (1), exp (2), exp2 (3), at 300 bits, then its edge value. */
static float fn_edge(int f, double x, double U, int which) {
    mpfr_t t;
    mpfr_init2(t, 300);
    mpfr_set_d(t, x, MPFR_RNDN);
    if (f == 0) mpfr_rec_sqrt(t, t, MPFR_RNDN);
    else if (f == 1) mpfr_log(t, t, MPFR_RNDN);
    else if (f == 2) mpfr_exp(t, t, MPFR_RNDN);
    else mpfr_exp2(t, t, MPFR_RNDN);
    double y = edge(t, U, which);
    mpfr_clear(t);
    return (float)y;
}

/* Covers one output (fp32, shape {1, n} or {1}) of a reference; the report's text on failure. */
static void require_covered(er_ref *ref, int out, const float *y, int n, const char *options, const char *what) {
    er_tensor ty;
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){1, n}, NULL, (void *)y);
    er_standard std;
    ER_REQUIRE(er_standard_parse(&std, "any_order", options) == ER_OK, "%s", er_last_error());
    er_report reps[3];
    if (er_ref_num_outputs(ref) == 1) {
        ER_REQUIRE(er_covers(&reps[0], ref, &ty, &std) == ER_OK, "%s", er_last_error());
    } else {
        const er_tensor *outs[3] = {NULL, NULL, NULL};
        er_tensor tr;
        er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){1}, NULL, (void *)y);
        outs[out] = out == 0 ? &ty : &tr;
        ER_REQUIRE(er_covers_outputs(reps, ref, outs, 3, &std) == ER_OK, "%s", er_last_error());
        if (out != 0) { reps[0] = reps[out]; reps[out].classes = NULL; }
        for (int o = 1; o < 3; o++) er_report_clear(&reps[o]);
    }
    ER_REQUIRE_PASS(&reps[0], "%s (under '%s') was called wrong:", what, options);
    er_report_clear(&reps[0]);
}

static er_ref *row_ref(int op, const float *x, int n, double eps) {
    er_tensor tx;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, n}, NULL, (void *)x);
    er_ref *ref = NULL;
    er_status st = op == 0 ? er_rmsnorm(&ref, &tx, NULL, eps) : op == 1 ? er_layernorm(&ref, &tx, 1, NULL, NULL, eps)
                 : op == 2 ? er_log_softmax(&ref, &tx, 1) : er_softmax(&ref, &tx, 1);
    ER_REQUIRE(st == ER_OK, "%s", er_last_error());
    return ref;
}

/* One row of op (2 log_softmax, 3 softmax) and its output y, which must be covered under `options`. */
static void require_row_covered(int op, const float *x, int n, const float *y, const char *options, const char *what) {
    er_ref *ref = row_ref(op, x, n, 0);
    require_covered(ref, 0, y, n, options, what);
    er_ref_free(ref);
}

/* The three rows of the bug report, each failing before the slack was taken at the larger spacing. */
START_TEST(reported_rows) {
    /* rmsnorm, x = [1, 1], eps = 0: rsqrt(1) returned 2 ulps of 1 low, y = 0.99999976 */
    float x[3] = {1, 1}, y[3];
    float r = 1.0f - 0x1p-22f;
    y[0] = y[1] = 1.0f * r;
    er_ref *ref = row_ref(0, x, 2, 0.0);
    require_covered(ref, 0, y, 2, "", "rmsnorm [1, 1] with rsqrt 2 ulps low");
    er_ref_free(ref);
    /* layernorm two_pass, x = [1, -1], eps = 0, the same rsqrt */
    x[1] = -1;
    ref = row_ref(1, x, 2, 0.0);
    require_covered(ref, 2, &r, 1, "variance=two_pass", "layernorm [1, -1] rstd with rsqrt 2 ulps low");
    y[0] = r;
    y[1] = -r;
    require_covered(ref, 0, y, 2, "variance=two_pass", "layernorm [1, -1] y with rsqrt 2 ulps low");
    er_ref_free(ref);
    /* log_softmax, log_ulps=2: s the float just above e from exps within 2 ulps, log(s) 1.98 ulps low */
    float z[3] = {0, 0, -0.3308922052383423f}, s_target = nextafterf((float)2.718281828459045, 3.0f), s = 0;
    for (int a = -4; a <= 2 && s != s_target; a++)
        for (int b = -4; b <= 2 && s != s_target; b++)
            for (int c = 0; c < 4 && s != s_target; c++) {
                float e0 = 1.0f + a * (a < 0 ? 0x1p-24f : 0x1p-23f), e1 = 1.0f + b * (b < 0 ? 0x1p-24f : 0x1p-23f);
                float e2 = fn_edge(2, z[2], 2.0, c);
                s = (e0 + e1) + e2;
            }
    ck_assert_msg(s == s_target, "no sum of exps within 2 ulps lands just above e");
    float l = fn_edge(1, s, 2.0, 0); /* 1.981 ulps of 2^-23 below log(s) = 1 + 0.48 2^-23 */
    ck_assert_msg(l == 0x1.fffffap-1f, "l = %a", (double)l);
    for (int i = 0; i < 3; i++) y[i] = z[i] - l;
    require_row_covered(2, z, 3, y, "log_ulps=2", "log_softmax with s just above e and log 1.98 ulps low");
}
END_TEST

/* rmsnorm and layernorm rows of 1 to 3 equal values a = 2^j (1 + d), so that the radicand and rsqrt sit at and
 * around powers of two; rsqrt at each of its budget's extremes; each composition. */
START_TEST(rsqrt_at_powers_of_two) {
    long cases = 0;
    static const double deltas[] = {-0x1p-22, -0x1p-23, -0x1p-24, 0, 0x1p-23, 0x1p-22};
    for (int op = 0; op < 2; op++)
        for (int n = 1; n <= 3; n++)
            for (int j = -4; j <= 4; j++)
                for (int di = 0; di < 6; di++)
                    for (int ei = 0; ei < 2; ei++)
                        for (int which = 0; which < 5; which++) {
                            double eps = ei ? 1e-6 : 0.0;
                            float a = (float)ldexp(1.0 + deltas[di], j), x[3], y[3];
                            for (int k = 0; k < n; k++) x[k] = op == 1 && (k & 1) ? -a : a;
                            if (op == 1 && n == 1) continue; /* a one-element row has variance 0 */
                            /* the statistics in float, then rsqrt at the edge */
                            float q = 0, mean = 0;
                            if (op == 1) {
                                for (int k = 0; k < n; k++) mean += x[k];
                                mean = mean / (float)n;
                            }
                            for (int k = 0; k < n; k++) q += (x[k] - mean) * (x[k] - mean);
                            float v = q / (float)n + (float)eps;
                            float r = fn_edge(0, v, 2.0, which);
                            for (int k = 0; k < n; k++) y[k] = (x[k] - mean) * r;
                            const char *opt = op == 1 ? "variance=two_pass" : "";
                            char what[160];
                            snprintf(what, sizeof what, "%s n %d a %a eps %g rsqrt edge %d", op ? "layernorm" : "rmsnorm", n,
                                     (double)a, eps, which);
                            er_ref *ref = row_ref(op, x, n, eps);
                            require_covered(ref, 0, y, n, opt, what);
                            if (op == 1) {
                                require_covered(ref, 2, &r, 1, opt, what);
                                require_covered(ref, 2, &r, 1, "", what);
                            }
                            er_ref_free(ref);
                            cases++;
                        }
    printf("rsqrt at the edges of 2 ulps around powers of two: %ld rows covered\n", cases);
}
END_TEST

/* log_softmax rows [0 x k, c] whose sum lands just above or below e^h, log(s) crossing 2^-2 .. 2^2; exps and
 * log at random extremes of their budgets; both compositions. */
START_TEST(log_at_powers_of_two) {
    er_test_reseed(2001);
    static const double hs[] = {0.25, 0.5, 1.0, 2.0, 4.0};
    long cases = 0, per = (long)(4 * er_test_multiplier());
    for (int hi = 0; hi < 5; hi++) {
        double eh = exp(hs[hi]);
        int k = (int)floor(eh);
        if (eh - k < 0.05) k--;
        float c0 = (float)log(eh - k);
        for (int step = -12; step <= 12; step++)
            for (int lu = 1; lu <= 2; lu++)
                for (long t = 0; t < per; t++) {
                    float x[64], y[64], e[64];
                    int n = k + 1;
                    for (int j = 0; j < k; j++) x[j] = 0;
                    x[k] = c0;
                    for (int s = 0; s < abs(step); s++) x[k] = nextafterf(x[k], step > 0 ? 1.0f : -1.0f);
                    for (int j = 0; j < n; j++) e[j] = fn_edge(2, x[j], 2.0, (int)(er_rand64() % 5));
                    double ed[64];
                    for (int j = 0; j < n; j++) ed[j] = e[j];
                    emu em;
                    emu_init(&em, ER_FP32);
                    float s = (float)emu_sum_random(&em, ed, n);
                    emu_clear(&em);
                    float l = fn_edge(1, s, (double)lu, (int)(er_rand64() % 5));
                    int assoc = (int)(er_rand64() & 1);
                    for (int i = 0; i < n; i++) y[i] = assoc ? x[i] - (0.0f + l) : (x[i] - 0.0f) - l;
                    char opt[32], what[160];
                    snprintf(opt, sizeof opt, "log_ulps=%d", lu);
                    snprintf(what, sizeof what, "log_softmax n %d c %a s %a l %a", n, (double)x[k], (double)s, (double)l);
                    require_row_covered(2, x, n, y, opt, what);
                    cases++;
                }
    }
    printf("log at the edges of its budget around e^(2^k): %ld rows covered\n", cases);
}
END_TEST

/* softmax rows [0, -d] with d a few units of 2^-24 (exp just below 1, whose correct rounding is 1) and rows of
 * equal values (quotients 1/2, 1/4, 1/3); exps at their extremes, the division exact or at the extremes of 2 ulps. */
START_TEST(exp_and_division_at_powers_of_two) {
    long cases = 0;
    for (int n = 2; n <= 4; n++)
        for (int d = 0; d <= 6; d++)
            for (int we = 0; we < 5; we++)
                for (int wd = 0; wd < 6; wd++) {
                    float x[4] = {0, -d * 0x1p-25f, 0, -d * 0x1p-24f}, e[4], y[4], s = 0;
                    for (int j = 0; j < n; j++) e[j] = fn_edge(2, x[j], 2.0, (we + j) % 5);
                    for (int j = 0; j < n; j++) s += e[j];
                    for (int i = 0; i < n; i++) {
                        if (wd == 5) { y[i] = e[i] / s; continue; }
                        mpfr_t t;
                        mpfr_init2(t, 300);
                        mpfr_set_d(t, e[i], MPFR_RNDN);
                        mpfr_div_d(t, t, s, MPFR_RNDN);
                        y[i] = (float)edge(t, 2.0, wd);
                        mpfr_clear(t);
                    }
                    const char *opt = wd == 5 ? "" : "div_ulps=2";
                    char what[160];
                    snprintf(what, sizeof what, "softmax n %d d %d exp edges %d division edge %d", n, d, we, wd);
                    require_row_covered(3, x, n, y, opt, what);
                    cases++;
                }
    printf("exp and division at the edges of 2 ulps: %ld rows covered\n", cases);
}
END_TEST

/* A value flushed to zero of its sign when it is subnormal in fp32 (ftz hardware), else itself. */
static float ftz(float v) { return fabsf(v) < 0x1p-126f ? copysignf(0.0f, v) : v; }

/* Triton's fp32 lowering (math=triton, tests/data/ptx.txt): e = ex2.approx(fl(d * fl(log2 e))) at the extremes of
 * 2 ulps and flushed below the least normal, the sum in a random order, y = e / s by div.full.f32 at the extremes of
 * 2 ulps (flushed below the least normal), log_softmax y = d - logf(s) at the extremes of 1 ulp; and rmsnorm with
 * its division by n at the extremes of 2 ulps and rsqrt.approx.ftz (a subnormal mean square is 0, its rsqrt +inf). Rows of large arguments (|x| up to 300), masked
 * lanes, exps in the subnormal range, and mean squares in the subnormal range. Also subnormals=flush: a softmax
 * whose every operation flushes (exp within 2 + floor(1.173 |d|) ulps, the sum's partials flushed). */
START_TEST(triton_lowering_and_flush) {
    er_test_reseed(2002);
    long trials = (long)(300 * er_test_multiplier()), per[4] = {0, 0, 0, 0};
    const float c = 0x1.715476p+0f; /* fl(log2 e) = 0x3FB8AA3B */
    for (long tr = 0; tr < trials; tr++) {
        int kind = (int)(tr % 4), n = (int)er_rand_int(1, 64);
        float x[64], y[64], e[64];
        double ed[64];
        int fam = (int)er_rand_int(0, 2);
        for (int j = 0; j < n; j++) {
            x[j] = fam == 0 ? (float)(er_rand_normal() * ldexp(1.0, (int)er_rand_int(0, 8)))
                 : fam == 1 ? (float)(-80.0 - 30.0 * er_rand_unit()) : (float)(er_rand_normal() * 4);
            if (fam == 2 && er_rand64() % 5 == 0) x[j] = -INFINITY;
        }
        if (fam == 1) x[0] = 0;
        if (kind == 3) {
            /* rmsnorm with rsqrt.approx.ftz; values whose squares are at and below the least normal */
            float sc = (float)ldexp(1.0, -(int)er_rand_int(60, 75)), q = 0;
            for (int j = 0; j < n; j++) { x[j] = (float)(er_rand_normal() * sc); q += x[j] * x[j]; }
            mpfr_t qt;
            mpfr_init2(qt, 200);
            mpfr_set_d(qt, q, MPFR_RNDN);
            mpfr_div_ui(qt, qt, (unsigned long)n, MPFR_RNDN);
            float v = (float)edge(qt, 2.0, (int)(er_rand64() % 5)); /* div.full.f32: within 2 ulps */
            mpfr_clear(qt);
            float r = v < 0x1p-126f ? INFINITY : fn_edge(0, v, 2.0, (int)(er_rand64() % 5));
            for (int j = 0; j < n; j++) y[j] = x[j] * r;
            er_ref *ref = row_ref(0, x, n, 0.0);
            require_covered(ref, 0, y, n, "math=triton", "a Triton rmsnorm (rsqrt.approx.ftz)");
            er_ref_free(ref);
            per[3]++;
            continue;
        }
        float m = -INFINITY;
        for (int j = 0; j < n; j++) if (x[j] > m) m = x[j];
        if (m == -INFINITY) { x[0] = 0; m = 0; }
        for (int j = 0; j < n; j++) {
            float d = x[j] - m;
            if (kind == 2) e[j] = ftz(x[j] == -INFINITY ? 0.0f : fn_edge(2, d, 2.0 + floor(1.173 * fabs((double)d)), (int)(er_rand64() % 5)));
            else e[j] = x[j] == -INFINITY ? 0.0f : ftz(fn_edge(3, d * c, 2.0, (int)(er_rand64() % 5)));
            ed[j] = e[j];
        }
        float s;
        if (kind == 2) { /* every partial flushed */
            s = 0;
            for (int j = 0; j < n; j++) s = ftz(s + e[j]);
        } else {
            emu em;
            emu_init(&em, ER_FP32);
            s = (float)emu_sum_random(&em, ed, n);
            emu_clear(&em);
        }
        const char *opt = kind == 2 ? "math=fast subnormals=flush" : "math=triton";
        if (kind == 1) {
            float l = fn_edge(1, s, 1.0, (int)(er_rand64() % 5));
            for (int i = 0; i < n; i++) y[i] = (x[i] - m) - l;
        } else {
            for (int i = 0; i < n; i++) {
                mpfr_t t;
                mpfr_init2(t, 300);
                mpfr_set_d(t, e[i], MPFR_RNDN);
                mpfr_div_d(t, t, s, MPFR_RNDN);
                y[i] = ftz((float)edge(t, 2.0, (int)(er_rand64() % 5)));
                mpfr_clear(t);
            }
        }
        char what[128];
        snprintf(what, sizeof what, "trial %ld: a %s (family %d, n %d)", tr, kind == 1 ? "Triton log_softmax" : kind == 2 ?
                 "flushing fast-math softmax" : "Triton softmax", fam, n);
        require_row_covered(kind == 1 ? 2 : 3, x, n, y, opt, what);
        per[kind]++;
    }
    /* the division by n is div.full.f32 too: x = [3], ms = 9 at the top of its 2 ulps, rsqrt at the bottom of its */
    {
        float x[1] = {3.0f}, y[1];
        mpfr_t q;
        mpfr_init2(q, 200);
        mpfr_set_ui(q, 9, MPFR_RNDN);
        float ms = (float)edge(q, 2.0, 3);
        mpfr_clear(q);
        y[0] = 3.0f * fn_edge(0, ms, 2.0, 2);
        er_ref *ref = row_ref(0, x, 1, 0.0);
        require_covered(ref, 0, y, 1, "math=triton", "a Triton rmsnorm whose division by n is 2 ulps off");
        er_ref_free(ref);
    }
    printf("Triton lowering and flush to zero at the edges: %ld softmax, %ld log_softmax, %ld flushing softmax, %ld rmsnorm "
           "rows covered\n", per[0], per[1], per[2], per[3]);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ulpedge");
    TCase *tc = tcase_create("edges");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, reported_rows);
    tcase_add_test(tc, rsqrt_at_powers_of_two);
    tcase_add_test(tc, log_at_powers_of_two);
    tcase_add_test(tc, exp_and_division_at_powers_of_two);
    tcase_add_test(tc, triton_lowering_and_flush);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
