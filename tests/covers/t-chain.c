/* t-chain.c: chains (docs/algorithms/chains.md). Implementations in the kernel's own arithmetic (a GEMM adding its
 * exact fp16 products in fp32 in a random order, then the epilogue in fp32 with each stage rounded, casts rounding
 * to nearest even) are never outside the chain's set, fused (scale and bias, with or without a fused multiply-add,
 * relu, cast) or unfused as torch runs it (every
 * stage stored in fp16); planted bugs (the bias added twice, relu left out, the scale applied twice) are caught; a
 * NaN operand makes NaN required; bad chains are refused. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <mpfr.h>
#include <exactref/mpfr.h>
#include <pthread.h>
#include "../common/er_test.h"

enum { M = 12, K = 96, N = 10 };
static uint16_t A[M * K], B[K * N], BIAS[N];
static float biasf[N];
static double a[M * K], b[K * N];

/* The reduction as a kernel does it: the exact products (fp16 x fp16 is exact in fp32) added in fp32 in a random
 * order. */
static float gemm_elem_of(const double *bm, int i, int j) { return er_random_order_dot_f32(a + i * K, 1, bm + j, N, K); }
static float gemm_elem(int i, int j) { return gemm_elem_of(b, i, j); }

static float to_half(float x) { double r; er_round_double(&r, ER_FP16, x, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); return (float)r; }

static void build(int tr) {
    for (int i = 0; i < M * K; i++) { er_round_double(&a[i], ER_FP16, er_rand_normal() * (tr % 3 ? 1 : 64), ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); er_store(A, ER_FP16, i, a[i]); }
    for (int i = 0; i < K * N; i++) { er_round_double(&b[i], ER_FP16, er_rand_normal(), ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); er_store(B, ER_FP16, i, b[i]); }
    for (int j = 0; j < N; j++) {
        double v;
        er_round_double(&v, ER_FP16, er_rand_normal() * 4, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        er_store(BIAS, ER_FP16, j, v);
        biasf[j] = (float)v;
    }
}

/* covers of a chain over matmul(A, B) with `out` (fp16 [M, N]): the report. */
static void chain_covers(er_report *rep, const er_stage *st, int ns, const uint16_t *out, const char *order, const char *opts) {
    er_tensor tA, tB, tO;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&tO, ER_FP16, 2, (int64_t[]){M, N}, NULL, out);
    er_ref *mm, *ch;
    ck_assert_int_eq(er_matmul(&mm, &tA, &tB), ER_OK);
    ER_REQUIRE(er_chain(&ch, mm, st, ns) == ER_OK, "%s", er_last_error());
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, order, opts), ER_OK);
    ER_REQUIRE(er_covers(rep, ch, &tO, &std) == ER_OK, "%s", er_last_error());
    er_ref_free(ch);
    er_ref_free(mm);
}

START_TEST(correct_implementations_are_covered) {
    er_test_reseed(1600);
    er_tensor tBias;
    er_tensor_view(&tBias, ER_FP16, 2, (int64_t[]){M, N}, (int64_t[]){0, 1}, BIAS); /* broadcast over the rows */
    static uint16_t out[M * N];
    int64_t exact = 0;
    for (int tr = 0; tr < (int)(40 * er_test_multiplier()); tr++) {
        build(tr);
        float alpha = tr % 2 ? 0.3f : (float)(tr % 4 == 0 ? 0.125 : 1.0); /* 0.3: a scale whose product rounds */
        /* fused: y = half(relu(alpha acc + bias)), each fp32 operation rounded once, or alpha acc + bias in one */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                /* the scale and the bias as two roundings, or contracted into one fused multiply-add */
                float acc = gemm_elem(i, j), y = tr % 2 ? fmaf(alpha, acc, biasf[j]) : alpha * acc + biasf[j];
                y = y > 0 ? y : 0;
                er_store(out, ER_FP16, i * N + j, to_half(y));
            }
        er_stage fused[4] = {{ER_STAGE_MUL, NULL, alpha, 0, NULL}, {ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_RELU, NULL, 0, 0, NULL},
                             {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}};
        er_report rep;
        chain_covers(&rep, fused, 4, out, "any_order", NULL);
        ER_REQUIRE_PASS(&rep, "trial %d: fused mul, bias, relu, cast", tr);
        exact += rep.counts[ER_CLASS_EXACT];
        er_report_clear(&rep);
        /* unfused, as torch runs it: matmul stored in fp16, then bias added in fp32 and stored, then relu */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float h = to_half(gemm_elem(i, j));
                float y = to_half(h + biasf[j]);
                er_store(out, ER_FP16, i * N + j, y > 0 ? y : 0);
            }
        er_stage unfused[5] = {{ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}, {ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL},
                               {ER_STAGE_RELU, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}};
        chain_covers(&rep, unfused, 5, out, "any_order", NULL);
        ER_REQUIRE_PASS(&rep, "trial %d: unfused cast, bias, cast, relu", tr);
        er_report_clear(&rep);
    }
    ck_assert_int_gt(exact, 0);
}
END_TEST

/* The base's freedom pushed to its ends: accumulators at the ends of the matmul's set, then the scale and the bias
 * in one fused multiply-add or two roundings, output in fp32 (no cast to hide an ulp). */
START_TEST(extreme_accumulators_fused_or_not) {
    er_test_reseed(1603);
    er_tensor tBias, tA, tB, tO;
    er_tensor_view(&tBias, ER_FP16, 2, (int64_t[]){M, N}, (int64_t[]){0, 1}, BIAS);
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    static float out[M * N];
    static double lo[M * N], hi[M * N];
    static uint8_t fl[M * N];
    er_tensor_view(&tO, ER_FP32, 2, (int64_t[]){M, N}, NULL, out);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    for (int tr = 0; tr < (int)(30 * er_test_multiplier()); tr++) {
        build(tr);
        float alpha = (float)(0.1 + er_rand_unit()) * (tr % 2 ? 1.0f : -1.0f);
        er_ref *mm, *ch;
        ck_assert_int_eq(er_matmul(&mm, &tA, &tB), ER_OK);
        ck_assert_int_eq(er_ref_enclosure(mm, 0, &std, ER_FP32, lo, hi, fl), ER_OK);
        er_stage st[2] = {{ER_STAGE_MUL, NULL, alpha, 0, NULL}, {ER_STAGE_ADD, &tBias, 0, 0, NULL}};
        ck_assert_int_eq(er_chain(&ch, mm, st, 2), ER_OK);
        for (int v = 0; v < 4; v++) {
            for (int i = 0; i < M * N; i++) {
                float acc = (float)(v % 2 ? hi[i] : lo[i]);
                out[i] = v < 2 ? fmaf(alpha, acc, biasf[i % N]) : alpha * acc + biasf[i % N];
            }
            er_report rep;
            ck_assert_int_eq(er_covers(&rep, ch, &tO, &std), ER_OK);
            ER_REQUIRE_PASS(&rep, "trial %d, %s, the %s end", tr, v < 2 ? "fused" : "two roundings", v % 2 ? "upper" : "lower");
            er_report_clear(&rep);
        }
        er_ref_free(ch);
        er_ref_free(mm);
    }
}
END_TEST

/* The chain's correctly rounded result is decided exactly: an output is `exact` where it equals relu(alpha S + b),
 * computed here in MPFR from the exact S, rounded to fp16, on the exact engine and on the fast path. */
START_TEST(exact_class_is_the_correct_rounding) {
    er_test_reseed(1604);
    er_tensor tBias, tA, tB, tO;
    er_tensor_view(&tBias, ER_FP16, 2, (int64_t[]){M, N}, (int64_t[]){0, 1}, BIAS);
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    static uint16_t out[M * N];
    er_tensor_view(&tO, ER_FP16, 2, (int64_t[]){M, N}, NULL, out);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    mpfr_t x;
    mpfr_init2(x, 64);
    int64_t exact = 0, covered = 0;
    for (int tr = 0; tr < (int)(20 * er_test_multiplier()); tr++) {
        build(tr);
        float alpha = 0.3f;
        setenv("EXACTREF_FAST", tr % 2 ? "1" : "0", 1);
        er_ref *mm, *ch;
        ck_assert_int_eq(er_matmul(&mm, &tA, &tB), ER_OK);
        unsetenv("EXACTREF_FAST");
        er_stage st[4] = {{ER_STAGE_MUL, NULL, alpha, 0, NULL}, {ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_RELU, NULL, 0, 0, NULL},
                          {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}};
        ck_assert_int_eq(er_chain(&ch, mm, st, 4), ER_OK);
        double oracle[M * N];
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                mpfr_set_prec(x, 64);
                ck_assert_int_eq(er_ref_exact_mpfr(x, mm, (int64_t[]){i, j}), ER_OK);
                mpfr_prec_round(x, mpfr_get_prec(x) + 2400, MPFR_RNDN); /* exact below */
                mpfr_mul_d(x, x, alpha, MPFR_RNDN);
                mpfr_add_d(x, x, biasf[j], MPFR_RNDN);
                if (mpfr_sgn(x) < 0) mpfr_set_zero(x, 1);
                double r;
                er_round_double(&r, ER_FP16, mpfr_get_d(x, MPFR_RNDN), ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
                oracle[i * N + j] = r;
                /* the chain's own exact value (er_ref_exact: the module's MPFR path) agrees */
                double ce, cr;
                ck_assert_int_eq(er_ref_exact(ch, (int64_t[]){i, j}, ER_FP16, &ce, &cr), ER_OK);
                ER_REQUIRE(cr == r, "trial %d (%d, %d): er_ref_exact gives %.9g, the oracle %.9g", tr, i, j, cr, r);
                /* the output: the correctly rounded result, or one fp16 step from it */
                double y = r;
                if (er_rand64() % 2) y = r + (er_rand64() % 2 ? 1 : -1) * er_format_ulp(ER_FP16, r);
                er_store(out, ER_FP16, i * N + j, y);
            }
        er_report rep;
        ck_assert_int_eq(er_covers(&rep, ch, &tO, &std), ER_OK);
        for (int i = 0; i < M * N; i++) {
            double y = er_load(out, ER_FP16, i);
            ER_REQUIRE((y == oracle[i]) == (rep.classes[i] == ER_CLASS_EXACT), "trial %d element %d: y %.9g, correctly rounded %.9g, class %s",
                       tr, i, y, oracle[i], er_class_name((er_class)rep.classes[i]));
            exact += rep.classes[i] == ER_CLASS_EXACT;
            covered += rep.classes[i] == ER_CLASS_COVERED;
        }
        er_report_clear(&rep);
        er_ref_free(ch);
        er_ref_free(mm);
    }
    mpfr_clear(x);
    ck_assert(exact > 0 && covered > 0);
}
END_TEST

/* gelu (torch's form, (x / 2)(1 + erf(x / sqrt 2)) in fp32 with glibc's erff) and silu (x / (1 + exp(-x)) with
 * expf) after a bias: covered fused with an fp16 store, and at the ends of the matmul's set with an fp32 output; a
 * kernel computing the other activation is caught. */
static float gelu_f(float x) { return (x * 0.5f) * (1.0f + erff(x * 0.70710677f)); }
static float silu_f(float x) { return x / (1.0f + expf(-x)); }

START_TEST(gelu_and_silu) {
    er_test_reseed(1605);
    er_tensor tBias, tA, tB, tO, t32;
    er_tensor_view(&tBias, ER_FP16, 2, (int64_t[]){M, N}, (int64_t[]){0, 1}, BIAS);
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    static uint16_t out[M * N];
    static float o32[M * N];
    static double lo[M * N], hi[M * N];
    static uint8_t fl[M * N];
    er_tensor_view(&tO, ER_FP16, 2, (int64_t[]){M, N}, NULL, out);
    er_tensor_view(&t32, ER_FP32, 2, (int64_t[]){M, N}, NULL, o32);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    int caught = 0, trials = (int)(12 * er_test_multiplier());
    for (int tr = 0; tr < trials; tr++) {
        build(tr);
        int silu = tr % 2;
        er_ref *mm, *ch, *ch32;
        ck_assert_int_eq(er_matmul(&mm, &tA, &tB), ER_OK);
        er_stage st[3] = {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {silu ? ER_STAGE_SILU : ER_STAGE_GELU, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}};
        ck_assert_int_eq(er_chain(&ch, mm, st, 3), ER_OK);
        ck_assert_int_eq(er_chain(&ch32, mm, st, 2), ER_OK);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float x = gemm_elem(i, j) + biasf[j];
                er_store(out, ER_FP16, i * N + j, to_half(silu ? silu_f(x) : gelu_f(x)));
            }
        er_report rep;
        ck_assert_int_eq(er_covers(&rep, ch, &tO, &std), ER_OK);
        ER_REQUIRE_PASS(&rep, "trial %d: %s fused", tr, silu ? "silu" : "gelu");
        er_report_clear(&rep);
        /* the accumulator at the ends of its set, the bias, the activation, an fp32 output */
        ck_assert_int_eq(er_ref_enclosure(mm, 0, &std, ER_FP32, lo, hi, fl), ER_OK);
        for (int e = 0; e < 2; e++) {
            for (int i = 0; i < M * N; i++) {
                float x = (float)(e ? hi[i] : lo[i]) + biasf[i % N];
                o32[i] = silu ? silu_f(x) : gelu_f(x);
            }
            ck_assert_int_eq(er_covers(&rep, ch32, &t32, &std), ER_OK);
            ER_REQUIRE_PASS(&rep, "trial %d: %s at the %s ends", tr, silu ? "silu" : "gelu", e ? "upper" : "lower");
            er_report_clear(&rep);
        }
        /* the other activation */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float x = gemm_elem(i, j) + biasf[j];
                er_store(out, ER_FP16, i * N + j, to_half(silu ? gelu_f(x) : silu_f(x)));
            }
        ck_assert_int_eq(er_covers(&rep, ch, &tO, &std), ER_OK);
        caught += !er_report_all(&rep);
        er_report_clear(&rep);
        er_ref_free(ch32);
        er_ref_free(ch);
        er_ref_free(mm);
    }
    ck_assert_int_eq(caught, trials);
}
END_TEST

/* The exact class of gelu (both forms) and silu decided through their double enclosure, which takes the values at a
 * bracket's ends where the function is monotone (chains.md, Lemma C13: below -2, above -0.4, silu above -0.9). The
 * base is a matmul on its fast path whose exact value is x (rows [x, 2^38, -2^38] times ones) but whose bracket is
 * about 2^-11 wide (the fl64 sum loses x's low bits), so that the enclosure's claim matters near the functions' turns:
 * on arguments around the thresholds, the minima and far into the tails, the correctly rounded results
 * (er_ref_rounded: MPFR at 256 bits, not the enclosure) are classified exact by covers, in fp32 and fp16. It fails
 * when the enclosure calls the functions monotone over their minima. */
START_TEST(activation_exact_class_near_their_turns) {
    enum { L = 6000 };
    static float rows[L * 3], ones[3] = {1.0f, 1.0f, 1.0f}, y32[L];
    static uint16_t y16[L];
    int n = 0;
    static const double at[] = {-2.0, -0.4, -0.9, -0.752, -1.278, -6.0, -12.0, -20.0, 0.0};
    for (size_t ai = 0; ai < sizeof at / sizeof at[0]; ai++)
        for (int d = -200; d <= 200; d++) rows[3 * n++] = (float)at[ai] + (float)d * 0x1p-12f; /* steps of 2^-12 around each */
    for (int i = 0; n < L; i++) rows[3 * n++] = -40.0f + 80.0f * (float)i / 2400.0f;
    for (int i = 0; i < L; i++) { rows[3 * i + 1] = 0x1p38f; rows[3 * i + 2] = -0x1p38f; }
    er_tensor tA, tB, t32, t16;
    er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){L, 3}, NULL, rows);
    er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){3, 1}, NULL, ones);
    er_tensor_view(&t32, ER_FP32, 2, (int64_t[]){L, 1}, NULL, y32);
    er_tensor_view(&t16, ER_FP16, 2, (int64_t[]){L, 1}, NULL, y16);
    er_ref *mm;
    setenv("EXACTREF_FAST", "1", 1);
    ck_assert_int_eq(er_matmul(&mm, &tA, &tB), ER_OK);
    unsetenv("EXACTREF_FAST");
    ck_assert_int_eq(er_ref_fast(mm), 1);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    static const er_stage_kind kinds[3] = {ER_STAGE_GELU, ER_STAGE_GELU_TANH, ER_STAGE_SILU};
    for (int k = 0; k < 3; k++) {
        er_stage st = {kinds[k], NULL, 0, 0, NULL};
        er_ref *ch;
        ck_assert_int_eq(er_chain(&ch, mm, &st, 1), ER_OK);
        for (int o = 0; o < 2; o++) {
            er_tensor *out = o ? &t16 : &t32;
            ck_assert_int_eq(er_ref_rounded(out, ch), ER_OK);
            er_report rep;
            ck_assert_int_eq(er_covers(&rep, ch, out, &std), ER_OK);
            ER_REQUIRE(rep.counts[ER_CLASS_EXACT] == L, "activation %d, %s output: %lld of %d correctly rounded results exact",
                       k, o ? "fp16" : "fp32", (long long)rep.counts[ER_CLASS_EXACT], L);
            er_report_clear(&rep);
        }
        er_ref_free(ch);
    }
    er_ref_free(mm);
}
END_TEST

/* Near x = -6, 1 + erf(x / sqrt 2) cancels: an fp32 gelu is far from the true gelu there, and still covered. */
START_TEST(gelu_where_one_plus_erf_cancels) {
    enum { R = 64, L = 4 };
    static float x[R * L], o[R];
    er_test_reseed(1606);
    for (int i = 0; i < R; i++)
        for (int k = 0; k < L; k++) x[i * L + k] = (float)((-5.0 - 2.0 * er_rand_unit()) / L);
    er_tensor tx, to;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, L}, NULL, x);
    er_tensor_view(&to, ER_FP32, 1, (int64_t[]){R}, NULL, o);
    double far = 0;
    for (int i = 0; i < R; i++) {
        float s = 0;
        for (int k = 0; k < L; k++) s += x[i * L + k];
        o[i] = gelu_f(s);
        double truth = 0.5 * s * erfc(-s / sqrt(2.0)), ulps = fabs(o[i] - truth) / er_format_ulp(ER_FP32, truth);
        if (ulps > far) far = ulps;
    }
    er_ref *sum, *ch;
    ck_assert_int_eq(er_sum(&sum, &tx, 1), ER_OK);
    er_stage st[1] = {{ER_STAGE_GELU, NULL, 0, 0, NULL}};
    ck_assert_int_eq(er_chain(&ch, sum, st, 1), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    er_report rep;
    ck_assert_int_eq(er_covers(&rep, ch, &to, &std), ER_OK);
    ER_REQUIRE_PASS(&rep, "gelu near -6 (the kernel up to %.0f ulps from the true gelu)", far);
    ck_assert_msg(far > 50, "the fp32 gelu came within %.1f ulps of the true one: no cancellation tested", far);
    er_report_clear(&rep);
    er_ref_free(ch);
    er_ref_free(sum);
}
END_TEST

/* Single elementwise ops on a tensor (er_tensor_ref): gelu and silu of fp16 values computed in fp32 and stored in
 * fp16, covered; relu of NaN as NaN or 0; the tensor alone accepts exactly its values rounded to the output. */
START_TEST(elementwise_on_a_tensor) {
    enum { L = 4096 };
    static uint16_t x[L], y[L];
    static float yf[L];
    er_test_reseed(1607);
    for (int i = 0; i < L; i++) {
        double v;
        er_round_double(&v, ER_FP16, er_rand_normal() * (i % 4 == 0 ? 8 : 2), ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        er_store(x, ER_FP16, i, i == 5 ? NAN : i == 6 ? INFINITY : v);
    }
    er_tensor tx, ty, tf;
    er_tensor_view(&tx, ER_FP16, 1, (int64_t[]){L}, NULL, x);
    er_tensor_view(&ty, ER_FP16, 1, (int64_t[]){L}, NULL, y);
    er_tensor_view(&tf, ER_FP32, 1, (int64_t[]){L}, NULL, yf);
    er_ref *t, *ch;
    ck_assert_int_eq(er_tensor_ref(&t, &tx), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    er_report rep;
    for (int act = 0; act < 2; act++) {
        er_stage st[2] = {{act ? ER_STAGE_SILU : ER_STAGE_GELU, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}};
        ck_assert_int_eq(er_chain(&ch, t, st, 2), ER_OK);
        for (int i = 0; i < L; i++) {
            float v = (float)er_load(x, ER_FP16, i);
            er_store(y, ER_FP16, i, to_half(act ? silu_f(v) : gelu_f(v)));
        }
        ck_assert_int_eq(er_covers(&rep, ch, &ty, &std), ER_OK);
        ER_REQUIRE_PASS(&rep, "%s of an fp16 tensor", act ? "silu" : "gelu");
        er_report_clear(&rep);
        er_ref_free(ch);
    }
    /* the tensor alone: its values as fp32 pass, one moved fails */
    for (int i = 0; i < L; i++) yf[i] = (float)er_load(x, ER_FP16, i);
    ck_assert_int_eq(er_covers(&rep, t, &tf, &std), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_EXACT], L);
    er_report_clear(&rep);
    yf[100] = nextafterf(yf[100], INFINITY);
    ck_assert_int_eq(er_covers(&rep, t, &tf, &std), ER_OK);
    ck_assert_int_eq(rep.n_failed, 1);
    er_report_clear(&rep);
    er_standard seq;
    ck_assert_int_eq(er_standard_parse(&seq, "sequential", NULL), ER_OK);
    ck_assert_int_eq(er_covers(&rep, t, &tf, &seq), ER_ERR_STANDARD);
    er_ref_free(t);
}
END_TEST

/* erf, exp and tanh at the edge of their 2-ulp budget, both readings (ulp-slack.md): the correctly rounded value
 * moved by two of its ulps (CUDA's table), and the exact value moved by two ulps of its binade, then rounded;
 * arguments where erf(t) and exp(-x) sit at and around powers of two (erf(t) = 1/2, 1/4, 1/8, -1/2, ...; x = k ln 2),
 * and spread. gelu (both forms, the tanh form's argument in every order Lemma C9 lists) and silu (both forms) of
 * those, fp32 in and out, are covered. */
static float f32_steps(float f, int n) { for (int i = 0; i < abs(n); i++) f = nextafterf(f, n > 0 ? INFINITY : -INFINITY); return f; }
static float edge_fn(int fn, double t, int reading, int dir) { /* fn: 0 erf, 1 exp, 2 tanh */
    double v = fn == 1 ? exp(t) : fn == 2 ? tanh(t) : erf(t), c = (float)v; /* c: the correctly rounded value (libm's double, rounded) */
    double target = reading == 0 ? c + dir * 2 * er_format_ulp(ER_FP32, c) : v + dir * 2 * er_format_ulp(ER_FP32, v);
    float y = (float)target; /* the float farthest out that stays within the two ulps: rounded back toward v */
    if (dir < 0 && y < target) y = f32_steps(y, 1);
    if (dir > 0 && y > target) y = f32_steps(y, -1);
    return y;
}

START_TEST(activations_at_the_edge_of_their_ulps) {
    enum { L = 2048 };
    static float x[L], y[L];
    er_test_reseed(1608);
    int n = 0;
    static const double erf_targets[] = {0.5, 0.25, 0.125, 0.0625, -0.5, -0.25, 0.75, 0.96875, -0.9375};
    for (int i = 0; i < 9; i++)
        for (int d = -3; d <= 3; d++) { /* t with erf(t) at the target: Newton from a guess, then neighbours */
            double t = erf_targets[i];
            for (int it = 0; it < 60; it++) t -= (erf(t) - erf_targets[i]) / (1.1283791670955126 * exp(-t * t));
            x[n++] = f32_steps((float)(t * sqrt(2.0)), d);
        }
    for (int k = -20; k <= 20; k++)
        for (int d = -2; d <= 2; d++) x[n++] = f32_steps((float)(k * 0.69314718055994531), d);
    while (n < L) x[n++] = (float)(er_rand_normal() * 4);
    er_tensor tx, ty;
    er_tensor_view(&tx, ER_FP32, 1, (int64_t[]){L}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 1, (int64_t[]){L}, NULL, y);
    er_ref *t;
    ck_assert_int_eq(er_tensor_ref(&t, &tx), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    /* act 0: gelu; 1: silu as x / d; 2: silu as x * sigmoid(x); 3 to 8: gelu's tanh form, its argument in each of
     * the cube's orders, the sum fused or not (chains.md, Lemma C9) */
    static const er_stage_kind kinds[12] = {ER_STAGE_GELU, ER_STAGE_SILU, ER_STAGE_SILU, ER_STAGE_GELU_TANH, ER_STAGE_GELU_TANH,
                                            ER_STAGE_GELU_TANH, ER_STAGE_GELU_TANH, ER_STAGE_GELU_TANH, ER_STAGE_GELU_TANH,
                                            ER_STAGE_GELU_TANH, ER_STAGE_GELU_TANH, ER_STAGE_GELU_TANH};
    static const char *const names[12] = {"gelu", "silu x / d", "silu x sigmoid(x)", "gelu tanh k (x x x)", "gelu tanh fma(k, x x x, x)",
                                          "gelu tanh ((k x) x) x", "gelu tanh fma((k x) x, x, x)", "gelu tanh (k (x x)) x",
                                          "gelu tanh fma(k (x x), x, x)", "gelu tanh as x / (1 + exp(-2b' u))",
                                          "gelu tanh as x sigmoid(2 (b u))", "gelu tanh as x sigmoid(2b' fma(k x x, x, x))"};
    const float beta = 0.797884583f, k = 0.044715f, beta2 = 1.59576917f; /* RN(sqrt(2 / pi)), RN(0.044715), RN(2 sqrt(2 / pi)) */
    for (int act = 0; act < 12; act++) {
        er_stage st[1] = {{kinds[act], NULL, 0, 0, NULL}};
        er_ref *ch;
        ck_assert_int_eq(er_chain(&ch, t, st, 1), ER_OK);
        for (int reading = 0; reading < 2; reading++)
            for (int dir = -1; dir <= 1; dir += 2) {
                for (int i = 0; i < L; i++) {
                    float v = x[i], u;
                    if (act == 1) { y[i] = v / (1.0f + edge_fn(1, -(double)v, reading, dir)); continue; }
                    if (act == 2) { y[i] = v * (1.0f / (1.0f + edge_fn(1, -(double)v, reading, -dir))); continue; }
                    if (act == 0) { y[i] = (v * 0.5f) * (1.0f + edge_fn(0, (double)(v * 0.70710677f), reading, dir)); continue; }
                    if (act >= 9) { /* 1 + tanh(u) = 2 sigmoid(2 u): x sigmoid(2 u), the 2 folded into the constant or not */
                        float z = act == 9 ? beta2 * (v + k * ((v * v) * v)) : act == 10 ? 2.0f * (beta * (v + k * ((v * v) * v)))
                                                                                        : beta2 * fmaf(k * v * v, v, v);
                        float e = -(double)z > 88.8 ? INFINITY : edge_fn(1, -(double)z, reading, act == 9 ? dir : -dir); /* expf overflows */
                        y[i] = act == 9 ? v / (1.0f + e) : v * (1.0f / (1.0f + e));
                        continue;
                    }
                    switch (act) {
                    case 3: u = v + k * ((v * v) * v); break;
                    case 4: u = fmaf(k, (v * v) * v, v); break;
                    case 5: u = ((k * v) * v) * v + v; break;
                    case 6: u = fmaf((k * v) * v, v, v); break;
                    case 7: u = (k * (v * v)) * v + v; break;
                    default: u = fmaf(k * (v * v), v, v); break;
                    }
                    y[i] = (v * 0.5f) * (1.0f + edge_fn(2, (double)(beta * u), reading, dir));
                }
                er_report rep;
                ck_assert_int_eq(er_covers(&rep, ch, &ty, &std), ER_OK);
                ER_REQUIRE_PASS(&rep, "%s, %s reading, %s edge", names[act], reading ? "exact-value" : "rounded-value",
                                dir > 0 ? "upper" : "lower");
                er_report_clear(&rep);
            }
        er_ref_free(ch);
    }
    er_ref_free(t);
}
END_TEST

/* Two references in one chain (Lemma C11): SwiGLU, silu(x W1) * (x W3), each accumulator adding its fp16 products
 * in fp32 in a random order, silu with expf, the product in fp32, an fp16 store; and a scaled accumulator plus a
 * second GEMM's, contracted into an FMA or not. Covered; silu(x W1) * (x W1) and the operands swapped caught. */
START_TEST(two_references) {
    static uint16_t B3[K * N], out[M * N];
    static double b3[K * N];
    er_tensor tA, tB, tB3, tO;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&tB3, ER_FP16, 2, (int64_t[]){K, N}, NULL, B3);
    er_tensor_view(&tO, ER_FP16, 2, (int64_t[]){M, N}, NULL, out);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    int caught[2] = {0, 0}, trials = (int)(6 * er_test_multiplier());
    for (int tr = 0; tr < trials; tr++) {
        er_test_reseed(1610 + (uint64_t)tr);
        build(tr);
        for (int i = 0; i < K * N; i++) { er_round_double(&b3[i], ER_FP16, er_rand_normal(), ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); er_store(B3, ER_FP16, i, b3[i]); }
        er_ref *m1, *m3, *ch, *ch2;
        ck_assert_int_eq(er_matmul(&m1, &tA, &tB), ER_OK);
        ck_assert_int_eq(er_matmul(&m3, &tA, &tB3), ER_OK);
        er_stage sw[3] = {{ER_STAGE_SILU, NULL, 0, 0, NULL}, {ER_STAGE_MUL, NULL, 0, 0, m3}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}};
        er_stage fm[3] = {{ER_STAGE_MUL, NULL, 0.75, 0, NULL}, {ER_STAGE_ADD, NULL, 0, 0, m3}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}};
        ck_assert_int_eq(er_chain(&ch, m1, sw, 3), ER_OK);
        ck_assert_int_eq(er_chain(&ch2, m1, fm, 3), ER_OK);
        static float a1[M * N], a3[M * N];
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                a1[i * N + j] = gemm_elem(i, j);
                a3[i * N + j] = gemm_elem_of(b3, i, j);
            }
        for (int bug = 0; bug < 3; bug++) {
            for (int i = 0; i < M * N; i++) {
                float u = bug == 2 ? a3[i] : a1[i], w = bug == 1 ? a1[i] : bug == 2 ? a1[i] : a3[i];
                er_store(out, ER_FP16, i, to_half((u / (1.0f + expf(-u))) * w));
            }
            er_report rep;
            ck_assert_int_eq(er_covers(&rep, ch, &tO, &std), ER_OK);
            if (bug == 0) ER_REQUIRE_PASS(&rep, "SwiGLU, trial %d", tr);
            else caught[bug - 1] += !er_report_all(&rep);
            er_report_clear(&rep);
        }
        for (int fused = 0; fused < 2; fused++) {
            for (int i = 0; i < M * N; i++) er_store(out, ER_FP16, i, to_half(fused ? fmaf(a1[i], 0.75f, a3[i]) : a1[i] * 0.75f + a3[i]));
            er_report rep;
            ck_assert_int_eq(er_covers(&rep, ch2, &tO, &std), ER_OK);
            ER_REQUIRE_PASS(&rep, "scale and a second accumulator, %s, trial %d", fused ? "fused" : "separate", tr);
            er_report_clear(&rep);
        }
        er_ref_free(ch2);
        er_ref_free(ch);
        er_ref_free(m3);
        er_ref_free(m1);
    }
    ck_assert_msg(caught[0] == trials && caught[1] == trials, "caught %d and %d of %d", caught[0], caught[1], trials);
}
END_TEST

/* The fast decision (chains.md, The fast decision) gives every element the engine's class: chains over a matmul on
 * its fast path (EXACTREF_FAST=1 at er_matmul) and over tensors, under the default model and math=triton, with outputs
 * of a kernel in fp32 moved by up to 3 ulps of the output either way, so that many lie at and beyond the sets' ends;
 * covers with the fast decision (the default) and without it (EXACTREF_FAST=0 at covers) report the same classes,
 * counts and worst element. */
/* x (an fp16 value) moved by n fp16 values up (n > 0) or down. */
static float half_steps(float x, int n) {
    uint16_t h[4];
    for (int k = 0; k < abs(n); k++) {
        er_store(h, ER_FP16, 0, x);
        int up = n > 0, neg = h[0] >> 15;
        if (h[0] == 0x0000 && !up) h[0] = 0x8001;
        else if (h[0] == 0x8000 && up) h[0] = 0x0001;
        else h[0] = (uint16_t)(h[0] + (up != neg ? 1 : -1));
        x = (float)er_load(h, ER_FP16, 0);
    }
    return x;
}

static float gelu_tanh_f(float x) { return (x * 0.5f) * (1.0f + tanhf(0.7978846f * (x + 0.044715f * (x * x * x)))); }

static void same_as_engine(const er_ref *ch, const er_tensor *out, const er_standard *std, const char *what, int tr) {
    er_report fast, slow;
    ck_assert_int_eq(er_ref_fast(ch), 1);
    ER_REQUIRE(er_covers(&fast, ch, out, std) == ER_OK, "%s", er_last_error());
    setenv("EXACTREF_FAST", "0", 1);
    ER_REQUIRE(er_covers(&slow, ch, out, std) == ER_OK, "%s", er_last_error());
    unsetenv("EXACTREF_FAST");
    const uint8_t *cf = er_report_classes(&fast), *cs = er_report_classes(&slow);
    for (int64_t i = 0; i < fast.n; i++)
        ER_REQUIRE(cf[i] == cs[i], "%s, trial %d: element %lld is %s on the fast decision, %s by the engine", what, tr, (long long)i,
                   er_class_name((er_class)cf[i]), er_class_name((er_class)cs[i]));
    for (int c = 0; c < ER_CLASS_COUNT; c++) ck_assert_int_eq(fast.counts[c], slow.counts[c]);
    ck_assert_int_eq(fast.has_worst, slow.has_worst);
    if (fast.has_worst) ck_assert_int_eq(fast.worst.index, slow.worst.index);
    er_report_clear(&fast);
    er_report_clear(&slow);
}

START_TEST(fast_decision_agrees_with_the_engine) {
    static uint16_t B3[K * N], out[M * N];
    static float out32[M * N];
    static double b3[K * N];
    er_tensor tA, tB, tB3, tO, tO32, tBias;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&tB3, ER_FP16, 2, (int64_t[]){K, N}, NULL, B3);
    er_tensor_view(&tO, ER_FP16, 2, (int64_t[]){M, N}, NULL, out);
    er_tensor_view(&tO32, ER_FP32, 2, (int64_t[]){M, N}, NULL, out32);
    er_tensor_view(&tBias, ER_FP16, 2, (int64_t[]){M, N}, (int64_t[]){0, 1}, BIAS);
    er_standard std[2];
    ck_assert_int_eq(er_standard_parse(&std[0], "any_order", NULL), ER_OK);
    ck_assert_int_eq(er_standard_parse(&std[1], "any_order", "math=triton"), ER_OK);
    int trials = (int)(8 * er_test_multiplier());
    for (int tr = 0; tr < trials; tr++) {
        er_test_reseed(1630 + (uint64_t)tr);
        build(tr);
        for (int i = 0; i < K * N; i++) { er_round_double(&b3[i], ER_FP16, er_rand_normal(), ER_ROUND_NEAREST, ER_OVERFLOW_IEEE); er_store(B3, ER_FP16, i, b3[i]); }
        setenv("EXACTREF_FAST", "1", 1);
        er_ref *m1, *m3, *t;
        ck_assert_int_eq(er_matmul(&m1, &tA, &tB), ER_OK);
        ck_assert_int_eq(er_matmul(&m3, &tA, &tB3), ER_OK);
        unsetenv("EXACTREF_FAST");
        static float a1[M * N], a3[M * N];
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) { a1[i * N + j] = gemm_elem(i, j); a3[i * N + j] = gemm_elem_of(b3, i, j); }
        ck_assert_int_eq(er_tensor_ref(&t, &tO32), ER_OK); /* over out32's values, set below */
        enum { NCH = 6 };
        static const char *names[NCH] = {"bias, gelu (tanh form), fp16", "scale, bias, silu, fp16", "bias, relu, fp16",
                                         "sigmoid times a second matmul, fp16", "gelu (erf form) of a tensor, fp32",
                                         "exp, log, rsqrt of a tensor, fp32"};
        for (int c = 0; c < NCH; c++) {
            er_stage st[4];
            int ns = 0;
            const er_ref *base = c >= 4 ? t : m1;
            if (c == 0) { st[ns++] = (er_stage){ER_STAGE_ADD, &tBias, 0, 0, NULL}; st[ns++] = (er_stage){ER_STAGE_GELU_TANH, NULL, 0, 0, NULL}; }
            if (c == 1) { st[ns++] = (er_stage){ER_STAGE_MUL, NULL, 0.3, 0, NULL}; st[ns++] = (er_stage){ER_STAGE_ADD, &tBias, 0, 0, NULL}; st[ns++] = (er_stage){ER_STAGE_SILU, NULL, 0, 0, NULL}; }
            if (c == 2) { st[ns++] = (er_stage){ER_STAGE_ADD, &tBias, 0, 0, NULL}; st[ns++] = (er_stage){ER_STAGE_RELU, NULL, 0, 0, NULL}; }
            if (c == 3) { st[ns++] = (er_stage){ER_STAGE_SIGMOID, NULL, 0, 0, NULL}; st[ns++] = (er_stage){ER_STAGE_MUL, NULL, 0, 0, m3}; }
            if (c == 4) st[ns++] = (er_stage){ER_STAGE_GELU, NULL, 0, 0, NULL};
            if (c == 5) { st[ns++] = (er_stage){ER_STAGE_EXP, NULL, 0, 0, NULL}; st[ns++] = (er_stage){ER_STAGE_LOG, NULL, 0, 0, NULL}; st[ns++] = (er_stage){ER_STAGE_RSQRT, NULL, 0, 0, NULL}; }
            if (c < 4) st[ns++] = (er_stage){ER_STAGE_CAST, NULL, 0, ER_FP16, NULL};
            for (int i = 0; i < M * N; i++) { /* the tensor's values: accumulators, spread, some subnormal */
                float v = a1[i] * (i % 7 == 0 ? 0x1p-140f : i % 3 ? 1.0f : 0.25f);
                out32[i] = c == 5 ? fabsf(v) * 0.1f : v;
            }
            er_ref *ch;
            ck_assert_int_eq(er_chain(&ch, base, st, ns), ER_OK);
            for (int m = 0; m < 2; m++) {
                for (int i = 0; i < M * N && c < 4; i++) {
                    float x = a1[i], bi = biasf[i % N], y;
                    int move = (int)er_rand_int(0, 6) - 3;
                    if (er_rand_int(0, 1)) move = 0;
                    if (c == 0) y = gelu_tanh_f(x + bi);
                    else if (c == 1) { float u = x * 0.3f + bi; y = u / (1.0f + expf(-u)); }
                    else if (c == 2) y = fmaxf(x + bi, 0.0f);
                    else y = (1.0f / (1.0f + expf(-x))) * a3[i];
                    er_store(out, ER_FP16, i, half_steps(to_half(y), move));
                }
                if (c >= 4) {
                    /* fp32 outputs of a tensor chain: into a second array, the base's values stay */
                    static float y32[M * N];
                    er_tensor tY;
                    er_tensor_view(&tY, ER_FP32, 2, (int64_t[]){M, N}, NULL, y32);
                    for (int i = 0; i < M * N; i++) {
                        float x = out32[i], y = c == 4 ? gelu_f(x) : 1.0f / sqrtf(logf(expf(x)));
                        int move = er_rand_int(0, 1) ? 0 : (int)er_rand_int(0, 6) - 3;
                        y32[i] = f32_steps(y, move);
                    }
                    same_as_engine(ch, &tY, &std[m], names[c], tr);
                } else {
                    same_as_engine(ch, &tO, &std[m], names[c], tr);
                }
            }
            er_ref_free(ch);
        }
        er_ref_free(t);
        er_ref_free(m3);
        er_ref_free(m1);
    }
}
END_TEST

START_TEST(planted_bugs_are_caught) {
    er_test_reseed(1601);
    er_tensor tBias;
    er_tensor_view(&tBias, ER_FP16, 2, (int64_t[]){M, N}, (int64_t[]){0, 1}, BIAS);
    static uint16_t out[M * N];
    int caught[4] = {0, 0, 0, 0}, named[4] = {0, 0, 0, 0}, trials = (int)(10 * er_test_multiplier());
    for (int tr = 0; tr < trials; tr++) {
        build(tr);
        er_stage st[3] = {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_RELU, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}};
        for (int bug = 0; bug < 4; bug++) {
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    float acc = gemm_elem(i, j), y;
                    if (bug == 0) y = (acc + biasf[j]) + biasf[j];   /* the bias added twice */
                    else if (bug == 1) y = acc + biasf[j];           /* relu left out */
                    else if (bug == 2) y = 2.0f * acc + biasf[j];    /* a scale applied twice (alpha = 2 applied, chain has none) */
                    else y = acc;                                    /* the bias left out */
                    if (bug != 1) y = y > 0 ? y : 0;
                    er_store(out, ER_FP16, i * N + j, to_half(y));
                }
            er_report rep;
            chain_covers(&rep, st, 3, out, "any_order", NULL);
            caught[bug] += !er_report_all(&rep);
            /* the stages the output still matches: relu left out matches the set after the bias (stage 1) at every
             * failing element; the bias left out matches the matmul's own set (stage 0) where the accumulator is
             * positive, no set where relu cut it */
            for (int f = 0; f < rep.n_first && bug == 1; f++)
                ER_REQUIRE(rep.first[f].stage == 1, "relu left out, trial %d: stage %d", tr, rep.first[f].stage);
            for (int f = 0; f < rep.n_first && bug == 3; f++)
                ER_REQUIRE(rep.first[f].stage == 0 || rep.first[f].stage == -1, "bias left out, trial %d: stage %d", tr, rep.first[f].stage);
            if (rep.has_worst && rep.worst.stage == (bug == 1 ? 1 : 0)) {
                char text[4096];
                ck_assert_int_eq(er_report_text(&rep, text, sizeof text, NULL), ER_OK);
                named[bug] += strstr(text, bug == 1 ? "the output lies in the set after matmul+add (stage 1)"
                                                    : "the output lies in the set after matmul (stage 0)") != NULL;
            }
            er_report_clear(&rep);
        }
    }
    for (int bug = 0; bug < 4; bug++) ck_assert_msg(caught[bug] == trials, "bug %d caught in %d of %d", bug, caught[bug], trials);
    ck_assert_msg(named[1] == trials && named[3] > 0, "named %d and %d of %d", named[1], named[3], trials);
}
END_TEST

/* A NaN in the bias: NaN required there (a finite output fails); relu after it allows NaN or 0. */
START_TEST(nan_operand) {
    er_test_reseed(1602);
    build(1);
    uint64_t nan_bits;
    er_encode(&nan_bits, ER_FP16, NAN, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    BIAS[3] = (uint16_t)nan_bits;
    er_tensor tBias;
    er_tensor_view(&tBias, ER_FP16, 2, (int64_t[]){M, N}, (int64_t[]){0, 1}, BIAS);
    static uint16_t out[M * N];
    for (int i = 0; i < M * N; i++) er_store(out, ER_FP16, i, i % N == 3 ? NAN : 0.0);
    er_stage st[1] = {{ER_STAGE_ADD, &tBias, 0, 0, NULL}};
    er_report rep;
    chain_covers(&rep, st, 1, out, "any_order", NULL);
    for (int i = 0; i < M; i++) ck_assert(er_class_passes((er_class)rep.classes[i * N + 3]));
    er_report_clear(&rep);
    for (int i = 0; i < M; i++) er_store(out, ER_FP16, i * N + 3, 1.0);
    chain_covers(&rep, st, 1, out, "any_order", NULL);
    for (int i = 0; i < M; i++) ck_assert_int_eq(rep.classes[i * N + 3], ER_CLASS_NAN_MISSING);
    er_report_clear(&rep);
    er_stage st2[2] = {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_RELU, NULL, 0, 0, NULL}};
    for (int i = 0; i < M; i++) er_store(out, ER_FP16, i * N + 3, i % 2 ? NAN : 0.0);
    chain_covers(&rep, st2, 2, out, "any_order", NULL);
    for (int i = 0; i < M; i++) ck_assert(er_class_passes((er_class)rep.classes[i * N + 3]));
    er_report_clear(&rep);
}
END_TEST

START_TEST(bad_chains_are_refused) {
    float x[12] = {0};
    er_tensor tx, tw;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){3, 4}, NULL, x);
    er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){4}, NULL, x);
    er_ref *sm, *mm, *ch = (er_ref *)(uintptr_t)0x5EAD;
    ck_assert_int_eq(er_softmax(&sm, &tx, 1), ER_OK);
    er_stage relu = {ER_STAGE_RELU, NULL, 0, 0, NULL};
    ck_assert_int_eq(er_chain(&ch, sm, &relu, 1), ER_ERR_UNSUPPORTED);
    ck_assert_ptr_eq(ch, (er_ref *)(uintptr_t)0x5EAD);
    er_tensor tA, tB;
    er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){3, 4}, NULL, x);
    er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){4, 3}, NULL, x);
    ck_assert_int_eq(er_matmul(&mm, &tA, &tB), ER_OK);
    er_stage add = {ER_STAGE_ADD, &tw, 0, 0, NULL};
    ck_assert_int_eq(er_chain(&ch, mm, &add, 1), ER_ERR_SHAPE);
    er_stage addnan = {ER_STAGE_ADD, NULL, NAN, 0, NULL};
    ck_assert_int_eq(er_chain(&ch, mm, &addnan, 1), ER_ERR_INVALID);
    er_stage many[13];
    for (int i = 0; i < 13; i++) many[i] = relu;
    ck_assert_int_eq(er_chain(&ch, mm, many, 13), ER_ERR_INVALID);
    er_stage wide = {ER_STAGE_CAST, NULL, 0, ER_FP64, NULL};
    ck_assert_int_eq(er_chain(&ch, mm, &wide, 1), ER_OK);
    float o[9];
    er_tensor to;
    er_tensor_view(&to, ER_FP32, 2, (int64_t[]){3, 3}, NULL, o);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    er_report rep;
    ck_assert_int_eq(er_covers(&rep, ch, &to, &std), ER_ERR_STANDARD);
    ck_assert_msg(strstr(er_last_error(), "casts to fp64, wider than the compute format fp32"), "%s", er_last_error());
    er_ref_free(ch);
    er_ref_free(mm);
    er_ref_free(sm);
}
END_TEST

/* Exact values far outside every format (fuzz_ops): exp2 of 66312 or of 10^6, plus 1, then rsqrt. The exact
 * intermediate 2^66312 + 1 needs 66313 bits, and MPFR's rsqrt there overflowed a 1 MiB stack (GMP's multiplications
 * allocate on it; 10^6 bits took 13 s an element); kept rounded to odd at 16384 bits (chains.md, Lemma C14) the
 * check runs on a thread with a 1 MiB stack, and the exact result, about 2^-33156, rounds to 0 as it must. */
typedef struct far_job { er_status st; int pass; int64_t exact; } far_job;
static void *far_run(void *arg) {
    far_job *j = arg;
    static float xs[3] = {66312.0f, 1e6f, 130.0f}, out[3] = {0, 0, 0};
    er_tensor X, O;
    er_tensor_view(&X, ER_FP32, 1, (int64_t[]){3}, NULL, xs);
    er_tensor_view(&O, ER_FP32, 1, (int64_t[]){3}, NULL, out);
    er_ref *base, *ch;
    er_stage st[3] = {{ER_STAGE_EXP2, NULL, 0, ER_FP32, NULL}, {ER_STAGE_ADD, NULL, 1.0, ER_FP32, NULL},
                      {ER_STAGE_RSQRT, NULL, 0, ER_FP32, NULL}};
    j->st = er_tensor_ref(&base, &X);
    if (j->st != ER_OK) return NULL;
    j->st = er_chain(&ch, base, st, 3);
    if (j->st == ER_OK) {
        er_standard std;
        er_report rep;
        er_standard_parse(&std, "any_order", NULL);
        j->st = er_covers(&rep, ch, &O, &std);
        j->pass = er_report_all(&rep);
        j->exact = rep.counts[ER_CLASS_EXACT];
        er_report_clear(&rep);
        er_ref_free(ch);
    }
    er_ref_free(base);
    return NULL;
}

START_TEST(far_beyond_every_format) {
    pthread_attr_t at;
    pthread_attr_init(&at);
    /* 1 MiB in a plain build; the sanitizers' instrumented frames take several times that (ThreadSanitizer's overflowed
     * 1 MiB on the capped value too) */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    pthread_attr_setstacksize(&at, 8 * 1024 * 1024);
#else
    pthread_attr_setstacksize(&at, 1024 * 1024);
#endif
    pthread_t th;
    far_job j = {ER_ERR_INTERNAL, 0, 0};
    ck_assert_int_eq(pthread_create(&th, &at, far_run, &j), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&at);
    ck_assert_int_eq(j.st, ER_OK);
    ck_assert(j.pass);
    ck_assert_int_eq(j.exact, 2); /* the third, rsqrt(2^130 + 1) = 2^-65 (1 - 2^-131 ...), rounds to 2^-65, not 0 */
}
END_TEST

int main(void) {
    Suite *s = suite_create("chain");
    TCase *tc = tcase_create("chain");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, correct_implementations_are_covered);
    tcase_add_test(tc, extreme_accumulators_fused_or_not);
    tcase_add_test(tc, exact_class_is_the_correct_rounding);
    tcase_add_test(tc, gelu_and_silu);
    tcase_add_test(tc, gelu_where_one_plus_erf_cancels);
    tcase_add_test(tc, activation_exact_class_near_their_turns);
    tcase_add_test(tc, elementwise_on_a_tensor);
    tcase_add_test(tc, activations_at_the_edge_of_their_ulps);
    tcase_add_test(tc, two_references);
    tcase_add_test(tc, fast_decision_agrees_with_the_engine);
    tcase_add_test(tc, planted_bugs_are_caught);
    tcase_add_test(tc, nan_operand);
    tcase_add_test(tc, bad_chains_are_refused);
    tcase_add_test(tc, far_beyond_every_format);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
