/* t-chainepi.c: the chain's epilogue pass (docs/algorithms/chains.md, "The epilogue pass", Lemma C13). On a GEMM
 * (fp16 operands, fp32 accumulation) followed by a bias, gelu's tanh form, silu, sigmoid, tanh, exp or relu, more
 * stages after the function, and casts to fp16 or bf16, with outputs in fp32, fp16 and bf16, the pass gives every
 * element the class the per-element fast decision gives (EXACTREF_BATCH=0) and the exact engine gives
 * (EXACTREF_FAST=0), and the same report as the per-element decision (its widest set included), at every SIMD level
 * (EXACTREF_SIMD=0 and 1: the baseline and AVX2 builds of its loops) and the exact engine's report (each element
 * named holding the exact result rounded to double); also silu times a
 * second GEMM (SwiGLU), a second GEMM added after the activation (a reference operand), and a tensor of midpoints
 * between neighbours of fp16 (the bracket straddles each: an output at its lower end is exact only where that end
 * is even). The operands put the
 * pre-activations at the functions' edges: gelu's and silu's minima and the ends of the ranges where they are
 * monotone, tanh's argument at 1/4, results below fp16's and bf16's least normal and zero, exp below -700 and above
 * 709 in the bracket, gelu's exp at the bracket's ends far apart in both tails, fp16 overflow; the outputs are the kernel's own (a random order of fp32 adds, libm's float
 * functions), the correctly rounded result, and each moved 1 to 3 ulps. The output spans two chunks of the pass, the
 * second starting inside a row. The outputs the pass leaves open and finds outside their sets are decided without the
 * exact engine (most of those outside count as unseen), and the report stays the engine's. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "../common/er_test.h"

enum { M = 70, K = 32, N = 90, MN = M * N };

static uint16_t A[M * K], B[K * N], B2[K * N], BIAS[N];
static double a[M * K], b[K * N], b2[K * N];
static float biasf[N];

static double to_fmt(er_format f, double x) {
    double r;
    er_round_double(&r, f, x, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    return r;
}

/* The pre-activations' spread by row (as multiples of the operands' scale) and the biases by column, at the points
 * where the pass's cases change. */
static void build(void) {
    static const double edges[] = {0,     -0.75244, -2.0, -0.4, -0.9,  -1.27846, 0.31090, -0.31090, 0.25, -0.25,
                                   4.0,   -4.0,     25.0, -25.0, -9.5, -17.0,    0.5,     1.41849, 60.0, -60.0};
    static const double scale[7] = {0x1p-10, 0.02, 0.1, 0.5, 2.0, 8.0, 1.0};
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            double v = er_rand_normal() * scale[i % 7];
            if (i % 7 == 6 && k == 0) v = (er_rand_int(0, 1) ? 1 : -1) * (40000 + 25000 * er_rand_unit()); /* overflow */
            /* pre-activations of a few thousand, whose bracket's ends take gelu's exp at arguments far apart (their
             * difference above 2^-18): the quotients' tails past -700 and 700 at both ends */
            if (i % 7 == 4 && k == 1) v = (er_rand_int(0, 1) ? 1 : -1) * (15000 + 10000 * er_rand_unit());
            a[i * K + k] = to_fmt(ER_FP16, v);
            er_store(A, ER_FP16, i * K + k, a[i * K + k]);
        }
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) {
            b[k * N + j] = to_fmt(ER_FP16, k == 0 ? 1 + j / 128.0 : er_rand_normal() * 0.25);
            er_store(B, ER_FP16, k * N + j, b[k * N + j]);
            b2[k * N + j] = to_fmt(ER_FP16, er_rand_normal() * (k % 5 ? 0.5 : 4.0)); /* a second GEMM's */
            er_store(B2, ER_FP16, k * N + j, b2[k * N + j]);
        }
    for (int j = 0; j < N; j++) {
        double v = to_fmt(ER_FP16, edges[j % 20] + er_rand_normal() * (j % 3 ? 0.01 : 0.0));
        er_store(BIAS, ER_FP16, j, v);
        biasf[j] = (float)v;
    }
}


/* v moved k steps of format f (k < 0: down), or v where that leaves the finite values. */
static double steps(er_format f, double v, int k) {
    for (; k != 0; k += k > 0 ? -1 : 1) {
        double u = nextafter(v, k > 0 ? INFINITY : -INFINITY), r;
        er_round_double(&r, f, u, k > 0 ? ER_ROUND_UP : ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
        if (!isfinite(r)) break;
        v = r;
    }
    return v;
}

enum { NCH = 14 };
typedef struct chain_case {
    const char *name;
    er_format out;
    int ns;
    er_stage st[5];
    int tensor_base; /* over a tensor of the kernel's accumulators instead of the matmul (1), or of midpoints (2) */
} chain_case;

/* The kernel's epilogue in fp32 (each step rounded; libm's float functions; casts rounding to nearest even); x2 the
 * second GEMM's accumulator, a reference operand's value. */
static float kernel_stages(const chain_case *c, float x, float x2, int j) {
    for (int s = 0; s < c->ns; s++) {
        const er_stage *st = &c->st[s];
        float u, o = st->ref ? x2 : st->t ? biasf[j] : (float)st->scalar;
        switch (st->kind) {
        case ER_STAGE_ADD: x = x + o; break;
        case ER_STAGE_MUL: x = x * o; break;
        case ER_STAGE_RELU: x = x > 0 ? x : 0.0f; break;
        case ER_STAGE_CAST: x = (float)to_fmt(st->format, x); break;
        case ER_STAGE_EXP: x = expf(x); break;
        case ER_STAGE_TANH: x = tanhf(x); break;
        case ER_STAGE_SIGMOID: x = 1.0f / (1.0f + expf(-x)); break;
        case ER_STAGE_SILU: x = x / (1.0f + expf(-x)); break;
        case ER_STAGE_GELU_TANH:
            u = 0.7978846f * (x + 0.044715f * ((x * x) * x));
            x = (x * 0.5f) * (1.0f + tanhf(u));
            break;
        default: ck_abort_msg("stage %d", (int)st->kind);
        }
    }
    return x;
}

static void covers_with(er_report *rep, const er_ref *ch, const er_tensor *out, const er_standard *std,
                        const char *fast, const char *batch) {
    setenv("EXACTREF_FAST", fast, 1);
    setenv("EXACTREF_BATCH", batch, 1);
    ER_REQUIRE(er_covers(rep, ch, out, std) == ER_OK, "%s", er_last_error());
    unsetenv("EXACTREF_FAST");
    unsetenv("EXACTREF_BATCH");
}

START_TEST(the_epilogue_pass_decides_as_each_element_alone) {
    static uint32_t outbuf[MN];
    static float acc[MN], acc2[MN], mids[MN];
    static double rounded[MN];
    er_tensor tA, tB, tB2, tBias, tAcc, tMids;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&tB2, ER_FP16, 2, (int64_t[]){K, N}, NULL, B2);
    /* the second GEMM: a reference operand (er_chain's stage ref), made before the cases that name it */
    static er_ref *mm2;
    er_tensor_view(&tBias, ER_FP16, 2, (int64_t[]){M, N}, (int64_t[]){0, 1}, BIAS);
    er_tensor_view(&tAcc, ER_FP32, 2, (int64_t[]){M, N}, NULL, acc);
    er_tensor_view(&tMids, ER_FP32, 2, (int64_t[]){M, N}, NULL, mids);
    const chain_case cases[NCH] = {
        {"bias, gelu (tanh form), fp16", ER_FP16, 3,
         {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_GELU_TANH, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}}, 0},
        {"bias, gelu (tanh form), fp32", ER_FP32, 2, {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_GELU_TANH, NULL, 0, 0, NULL}}, 0},
        {"bias, gelu (tanh form), bf16", ER_BF16, 3,
         {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_GELU_TANH, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_BF16, NULL}}, 0},
        {"scale, bias, silu, fp16", ER_FP16, 4,
         {{ER_STAGE_MUL, NULL, 0.3, 0, NULL}, {ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_SILU, NULL, 0, 0, NULL},
          {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}}, 0},
        {"bias, sigmoid, fp32", ER_FP32, 2, {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_SIGMOID, NULL, 0, 0, NULL}}, 0},
        {"bias, tanh, bf16", ER_BF16, 3,
         {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_TANH, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_BF16, NULL}}, 0},
        {"scale, exp, fp32", ER_FP32, 2, {{ER_STAGE_MUL, NULL, 0.125, 0, NULL}, {ER_STAGE_EXP, NULL, 0, 0, NULL}}, 0},
        {"bias, relu, fp16", ER_FP16, 3,
         {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_RELU, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}}, 0},
        {"bias, gelu (tanh form), times 2, bias again, fp32", ER_FP32, 4,
         {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_GELU_TANH, NULL, 0, 0, NULL}, {ER_STAGE_MUL, NULL, 2.0, 0, NULL},
          {ER_STAGE_ADD, &tBias, 0, 0, NULL}}, 0},
        {"a tensor, bias, gelu (tanh form), fp16", ER_FP16, 3,
         {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_GELU_TANH, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}}, 1},
        {"silu times a second GEMM (SwiGLU), fp16", ER_FP16, 3,
         {{ER_STAGE_SILU, NULL, 0, 0, NULL}, {ER_STAGE_MUL, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}}, 0},
        {"silu times a second GEMM (SwiGLU), bf16", ER_BF16, 3,
         {{ER_STAGE_SILU, NULL, 0, 0, NULL}, {ER_STAGE_MUL, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_BF16, NULL}}, 0},
        {"bias, gelu (tanh form), plus a second GEMM, fp32", ER_FP32, 3,
         {{ER_STAGE_ADD, &tBias, 0, 0, NULL}, {ER_STAGE_GELU_TANH, NULL, 0, 0, NULL}, {ER_STAGE_ADD, NULL, 0, 0, NULL}}, 0},
        /* each exact result a midpoint between neighbours of fp16: the bracket straddles it, and an output equal to
         * its lower end is exact only where that end is even */
        {"a tensor of fp16 midpoints, times 1, fp16", ER_FP16, 1, {{ER_STAGE_MUL, NULL, 1.0, 0, NULL}}, 2},
    };
    er_standard std[2];
    ck_assert_int_eq(er_standard_parse(&std[0], "any_order", NULL), ER_OK);
    ck_assert_int_eq(er_standard_parse(&std[1], "any_order", "math=triton"), ER_OK);
    int trials = (int)er_test_trials(3, 1);
    int64_t outside = 0, out_unseen[2] = {0, 0};
    for (int tr = 0; tr < trials; tr++) {
        er_test_reseed(2400 + (uint64_t)tr);
        build();
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                acc[i * N + j] = er_random_order_dot_f32(a + i * K, 1, b + j, N, K);
                acc2[i * N + j] = er_random_order_dot_f32(a + i * K, 1, b2 + j, N, K);
                double lo, hi;
                er_round_double(&lo, ER_FP16, acc[i * N + j], ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
                er_round_double(&hi, ER_FP16, nextafter(lo, INFINITY), ER_ROUND_UP, ER_OVERFLOW_IEEE);
                mids[i * N + j] = isfinite(hi) ? (float)(lo + (hi - lo) / 2) : acc[i * N + j]; /* (12 bits: exact) */
            }
        setenv("EXACTREF_FAST", "1", 1);
        er_ref *mm, *t, *tm;
        ck_assert_int_eq(er_matmul(&mm, &tA, &tB), ER_OK);
        ck_assert_int_eq(er_matmul(&mm2, &tA, &tB2), ER_OK);
        unsetenv("EXACTREF_FAST");
        ck_assert_int_eq(er_tensor_ref(&t, &tAcc), ER_OK);
        ck_assert_int_eq(er_tensor_ref(&tm, &tMids), ER_OK);
        for (int c = 0; c < NCH; c++) {
            const chain_case *cc = &cases[c];
            er_ref *ch;
            er_tensor tOut, tR;
            er_stage st[5];
            for (int k = 0; k < cc->ns; k++) { /* a stage of neither tensor nor number takes the second GEMM */
                st[k] = cc->st[k];
                if ((st[k].kind == ER_STAGE_ADD || st[k].kind == ER_STAGE_MUL) && !st[k].t && st[k].scalar == 0)
                    st[k].ref = mm2;
            }
            ER_REQUIRE(er_chain(&ch, cc->tensor_base == 2 ? tm : cc->tensor_base ? t : mm, st, cc->ns) == ER_OK, "%s",
                       er_last_error());
            ck_assert_int_eq(er_ref_fast(ch), 1);
            er_tensor_view(&tOut, cc->out, 2, (int64_t[]){M, N}, NULL, outbuf);
            er_tensor_view(&tR, ER_FP64, 2, (int64_t[]){M, N}, NULL, rounded);
            ck_assert_int_eq(er_ref_rounded(&tR, ch), ER_OK); /* into fp64: the exact result to double */
            for (int i = 0; i < MN; i++) {
                /* the kernel's, or the correctly rounded result; a third moved 1 to 3 ulps */
                chain_case k1 = *cc;
                memcpy(k1.st, st, sizeof st);
                float x = cc->tensor_base == 2 ? mids[i] : acc[i];
                double v = er_rand_int(0, 2) ? kernel_stages(&k1, x, acc2[i], i % N) : rounded[i];
                v = to_fmt(cc->out, v);
                if (er_rand_int(0, 2) == 0) v = steps(cc->out, v, (int)er_rand_int(1, 3) * (er_rand_int(0, 1) ? 1 : -1));
                er_store(outbuf, cc->out, i, v);
            }
            for (int m = 0; m < 2; m++) {
                er_report pass, alone, engine;
                char what[160];
                snprintf(what, sizeof what, "%s, %s, trial %d", cc->name, m ? "math=triton" : "any_order", tr);
                covers_with(&pass, ch, &tOut, &std[m], "1", "1");
                covers_with(&alone, ch, &tOut, &std[m], "1", "0");
                covers_with(&engine, ch, &tOut, &std[m], "0", "1");
                er_require_same_report(&pass, &alone, what);
                /* the outside elements the witnesses leave open are decided without the engine, with the pass and
                 * without: they count as unseen (at least n_unseen less the passing elements of them) */
                outside += pass.counts[ER_CLASS_OUTSIDE];
                int64_t u0 = pass.n_unseen - (MN - pass.n_failed), u1 = alone.n_unseen - (MN - alone.n_failed);
                out_unseen[0] += u0 > 0 ? u0 : 0; /* (a lower bound: below 0 where most elements pass) */
                out_unseen[1] += u1 > 0 ? u1 : 0;
                for (int lv = 0; lv < 2 && m == 0; lv++) { /* the baseline and AVX2 builds of the pass's loops */
                    er_report at;
                    char w2[200];
                    setenv("EXACTREF_SIMD", lv ? "1" : "0", 1);
                    covers_with(&at, ch, &tOut, &std[m], "1", "1");
                    unsetenv("EXACTREF_SIMD");
                    snprintf(w2, sizeof w2, "%s, EXACTREF_SIMD=%d", what, lv);
                    er_require_same_report(&pass, &at, w2);
                    er_report_clear(&at);
                }
                const uint8_t *cp = er_report_classes(&pass), *ce = er_report_classes(&engine);
                for (int64_t i = 0; i < MN; i++)
                    ER_REQUIRE(cp[i] == ce[i], "%s: element %lld (output %a) is %s on the fast decision, %s by the engine",
                               what, (long long)i, er_load(outbuf, cc->out, i), er_class_name((er_class)cp[i]),
                               er_class_name((er_class)ce[i]));
                /* the report whole but its widest set (the widest of the sets built: chains.md, The fast decision):
                 * its elements' exact values are the exact results rounded to double, whatever bracket (fl64(A B) on
                 * the fast path) the sets came from */
                engine.has_widest = pass.has_widest;
                engine.widest = pass.widest;
                engine.widest_rel = pass.widest_rel;
                er_require_same_report(&pass, &engine, what);
                const er_element *els[ER_REPORT_FIRST + 2];
                int ne = 0;
                for (int i = 0; i < pass.n_first; i++) els[ne++] = &pass.first[i];
                if (pass.has_worst) els[ne++] = &pass.worst;
                if (pass.has_widest) els[ne++] = &pass.widest;
                for (int i = 0; i < ne; i++)
                    ER_REQUIRE(els[i]->exact == rounded[els[i]->index] ||
                                   (isnan(els[i]->exact) && isnan(rounded[els[i]->index])),
                               "%s: element %lld of the report: exact %a, the exact result to double %a", what,
                               (long long)els[i]->index, els[i]->exact, rounded[els[i]->index]);
                er_report_clear(&pass);
                er_report_clear(&alone);
                er_report_clear(&engine);
            }
            er_ref_free(ch);
        }
        er_ref_free(t);
        er_ref_free(tm);
        er_ref_free(mm2);
        er_ref_free(mm);
    }
    ER_REQUIRE(outside > 10000 && out_unseen[0] > outside / 2 && out_unseen[1] > outside / 2,
               "%lld outputs outside their sets, at least %lld decided without the engine with the pass, %lld without",
               (long long)outside, (long long)out_unseen[0], (long long)out_unseen[1]);
    printf("t-chainepi: %lld outputs outside their sets, at least %lld decided without the engine with the pass, "
           "%lld without\n", (long long)outside, (long long)out_unseen[0], (long long)out_unseen[1]);
}
END_TEST

int main(void) {
    Suite *s = suite_create("chainepi");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, the_epilogue_pass_decides_as_each_element_alone);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
