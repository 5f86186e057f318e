/* t-orders.c: the standards against independent emulations of correct implementations.
 * Each trial draws a standard (sequential, blocked:B, split:S, pairwise, and any_order with the options the
 * any-order fuzz does not draw: tf32 inputs, faithful rounding; fma never/always/either; inner and
 * outer orders; fp16/bf16/fp32 partials; compute fp32/fp16/bf16/fp64/tf32 with truncation, rna, rne or either
 * tie rule (the operands then rich in exact tf32 ties, where the rules differ); round to
 * nearest or faithful), draws inputs from the adversarial families, and runs an implementation of that
 * standard in the test's own emulator (every operation rounded by MPFR; every choice the standard leaves
 * free drawn at random). exactref must cover it, and for a fully fixed standard er_emulate must return the
 * implementation's output bit for bit. */
#include "../common/er_impl.h"

static const er_format inputs[] = {ER_FP16, ER_BF16, ER_FP32, ER_FP8_E4M3FN, ER_FP64};
static const er_format outputs[] = {ER_FP32, ER_FP16, ER_BF16, ER_FP64};

START_TEST(fixed_orders_are_sound_and_emulated) {
    er_test_reseed(300);
    long trials = (long)(20000 * er_test_multiplier());
    long fixed = 0, matched = 0, counts[ER_CLASS_COUNT] = {0};
    for (long tr = 0; tr < trials; tr++) {
        trial t;
        draw(&t, 1);
        if (er_standard_validate(&t.std) != ER_OK) ck_abort_msg("drew an invalid standard: %s", er_last_error());
        er_format fa = inputs[er_rand64() % 5], fb = inputs[er_rand64() % 5];
        er_format fo = er_rand64() % 2 ? t.acc : outputs[er_rand64() % 4];
        int fam = (int)(er_rand64() % FAM_COUNT);
        int K = er_rand64() % 6 == 0 ? (int)er_rand_int(129, 400) : (int)er_rand_int(1, 80);
        double *a = malloc(sizeof(double) * (size_t)K), *b = malloc(sizeof(double) * (size_t)K);
        double *ca = malloc(sizeof(double) * (size_t)K), *cb = malloc(sizeof(double) * (size_t)K);
        gen_vectors(fam, fa, fb, t.acc, K, a, b);
        uint64_t A[400], B[400], C[1], E[1];
        for (int k = 0; k < K; k++) { er_store(A, fa, k, a[k]); er_store(B, fb, k, b[k]); }
        /* tf32: the implementation converts wide operands first (the test's own MPFR rounding); half the fp32
         * operands are made exact ties of tf32 (low 13 bits 0x1000), where ties to even and away differ */
        mpfr_t x;
        mpfr_init2(x, 64);
        mpfr_rnd_t cr = t.std.tf32 == ER_TF32_RNA ? MPFR_RNDNA : t.std.tf32 == ER_TF32_RNE ? MPFR_RNDN
                     : t.std.tf32 == ER_TF32_NEAREST ? (er_rand64() & 1 ? MPFR_RNDN : MPFR_RNDNA) : MPFR_RNDZ;
        int ties = t.std.compute == ER_TF32 && (er_rand64() & 1);
        for (int k = 0; k < K && ties; k++) {
            float f;
            uint32_t u;
            if (fa == ER_FP32 && isfinite(a[k])) { f = (float)a[k]; memcpy(&u, &f, 4); u = (u & ~0x1fffu) | 0x1000u; memcpy(&f, &u, 4); if (isfinite(f)) { a[k] = f; er_store(A, fa, k, f); } }
            if (fb == ER_FP32 && isfinite(b[k])) { f = (float)b[k]; memcpy(&u, &f, 4); u = (u & ~0x1fffu) | 0x1000u; memcpy(&f, &u, 4); if (isfinite(f)) { b[k] = f; er_store(B, fb, k, f); } }
        }
        for (int k = 0; k < K; k++) {
            ca[k] = a[k];
            cb[k] = b[k];
            if (t.std.compute != ER_TF32) continue;
            if (er_format_precision(fa) > 11) { mpfr_set_d(x, a[k], MPFR_RNDN); ca[k] = er_oracle_round(ER_TF32, x, cr, ER_OVERFLOW_IEEE); }
            if (er_format_precision(fb) > 11) { mpfr_set_d(x, b[k], MPFR_RNDN); cb[k] = er_oracle_round(ER_TF32, x, cr, ER_OVERFLOW_IEEE); }
        }
        emu e, ep;
        emu_init(&e, t.acc);
        emu_init(&ep, t.std.partial != ER_FORMAT_INVALID ? t.std.partial : t.acc);
        e.faithful = ep.faithful = t.std.rounding == ER_RND_FAITHFUL;
        double r = implement(&t, &e, &ep, ca, cb, K);
        mpfr_set_d(x, r, MPFR_RNDN);
        double y = isnan(r) ? NAN : er_oracle_round(fo, x, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
        mpfr_clear(x);
        emu_clear(&e);
        emu_clear(&ep);
        er_store(C, fo, 0, y);
        er_tensor tA, tB, tC, tE;
        er_tensor_view(&tA, fa, 2, (int64_t[]){1, K}, NULL, A);
        er_tensor_view(&tB, fb, 2, (int64_t[]){K, 1}, NULL, B);
        er_tensor_view(&tC, fo, 2, (int64_t[]){1, 1}, NULL, C);
        er_tensor_view(&tE, fo, 2, (int64_t[]){1, 1}, NULL, E);
        er_ref *ref;
        ER_REQUIRE(er_matmul(&ref, &tA, &tB) == ER_OK, "matmul: %s", er_last_error());
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &tC, &t.std) == ER_OK, "covers: %s", er_last_error());
        er_class c = (er_class)rep.classes[0];
        counts[c]++;
        if (!er_class_passes(c)) {
            char text[2048];
            er_report_text(&rep, text, sizeof text, NULL);
            ck_abort_msg("trial %ld: a correct implementation was called %s: family %s, A %s, B %s, out %s, K %d\n%s"
                         ER_SEED_MSG_FMT, tr, er_class_name(c), fam_names[fam], er_format_name(fa), er_format_name(fb),
                         er_format_name(fo), K, text, ER_SEED_ARGS);
        }
        er_report_clear(&rep);
        if (er_standard_is_fixed(&t.std, fa, fb)) {
            fixed++;
            ER_REQUIRE(er_emulate(ref, &tE, &t.std) == ER_OK, "emulate: %s", er_last_error());
            double got = er_load(E, fo, 0);
            if (!(er_same(got, y) || (isnan(got) && isnan(y)))) {
                char name[200];
                er_standard_format(&t.std, name, sizeof name, NULL);
                ck_abort_msg("trial %ld: emulate(%s) gave %a, the implementation %a (family %s, A %s, B %s, out %s, K %d); "
                             ER_SEED_MSG_FMT, tr, name, got, y, fam_names[fam], er_format_name(fa), er_format_name(fb),
                             er_format_name(fo), K, ER_SEED_ARGS);
            }
            matched++;
        }
        er_ref_free(ref);
        free(a); free(b); free(ca); free(cb);
    }
    printf("orders: %ld trials: exact %ld, covered %ld, overflow %ld; %ld fully fixed, emulated bit for bit (seed %llu)\n",
           trials, counts[0], counts[1], counts[2], matched, (unsigned long long)er_test_seed_value);
    ck_assert_int_gt(fixed, trials / 10);
}
END_TEST

/* IEEE fma: a finite product, however far beyond double's range, plus an infinity is that infinity (not NaN).
 * fp16 accumulation takes the exact-rounding path; the accumulator overflows to +inf, then a product of about
 * -1e400 is fused into it. */
START_TEST(fma_of_a_huge_product_into_an_infinity) {
    double a[3] = {60000, 60000, 1e200}, b[3] = {1, 1, -1e200};
    uint64_t A[3], B[3], E[1];
    for (int k = 0; k < 3; k++) { er_store(A, ER_FP64, k, a[k]); er_store(B, ER_FP64, k, b[k]); }
    er_tensor tA, tB, tE;
    er_tensor_view(&tA, ER_FP64, 2, (int64_t[]){1, 3}, NULL, A);
    er_tensor_view(&tB, ER_FP64, 2, (int64_t[]){3, 1}, NULL, B);
    er_tensor_view(&tE, ER_FP64, 2, (int64_t[]){1, 1}, NULL, E);
    er_ref *r;
    ck_assert_int_eq(er_matmul(&r, &tA, &tB), ER_OK);
    er_standard st;
    ck_assert_int_eq(er_standard_parse(&st, "sequential", "compute=fp16 fma=always"), ER_OK);
    ck_assert_int_eq(er_emulate(r, &tE, &st), ER_OK);
    double y = er_load(E, ER_FP64, 0);
    ck_assert_msg(y == INFINITY, "emulate gave %g, IEEE fma gives +inf", y);
    er_ref_free(r);
}
END_TEST

/* er_emulate on whole matrices (the float tile loop, 16 columns at a time, and its remainder) gives, bit for bit, the
 * test's own float loop of the same order: sequential, blocked:B and split:S with sequential blocks added in order
 * to a total from +0, and blocked carry=fused; fp16, bf16 and fp32 operands, broadcast batches, every family. */
static float tile_ref(const float *a, const float *b, int K, int kind, int B) {
    if (kind == 0 || kind == 3) { float acc = 0.0f; for (int k = 0; k < K; k++) acc = acc + a[k] * b[k]; return acc; }
    float tot = 0.0f;
    for (int k0 = 0; k0 < K; k0 += B) {
        float part = 0.0f;
        for (int k = k0; k < k0 + B && k < K; k++) part = part + a[k] * b[k];
        tot = tot + part;
    }
    return tot;
}

START_TEST(emulate_tiles_match_a_float_loop) {
    er_test_reseed(130);
    long trials = (long)(150 * er_test_multiplier()), elems = 0;
    static const er_format ins[] = {ER_FP16, ER_BF16, ER_FP32};
    for (long tr = 0; tr < trials; tr++) {
        int kind = (int)(tr % 4), M = (int)er_rand_int(1, 5), N = (int)er_rand_int(1, 50), K = (int)er_rand_int(1, 300);
        int GA = tr % 3 == 0 ? 2 : 1, GB = tr % 3 == 0 ? 3 : 1, fam = (int)(er_rand64() % FAM_COUNT), Bk = (int)er_rand_int(1, 40);
        int S = (int)er_rand_int(1, 8);
        er_format fx = ins[er_rand64() % 3];
        int64_t na = (int64_t)GA * M * K, nb = (int64_t)GB * K * N, nc = (int64_t)GA * GB * M * N;
        double *a = malloc(sizeof(double) * (size_t)na), *b = malloc(sizeof(double) * (size_t)nb);
        float *af = malloc(sizeof(float) * (size_t)K), *bf = malloc(sizeof(float) * (size_t)K), *E = malloc(sizeof(float) * (size_t)nc);
        uint64_t *A = malloc(8 * (size_t)na), *B = malloc(8 * (size_t)nb);
        gen_batched(fam, fx, GA, GB, M, K, N, a, b);
        for (int64_t i = 0; i < na; i++) { er_store(A, fx, i, a[i]); a[i] = er_load(A, fx, i); }
        for (int64_t i = 0; i < nb; i++) { er_store(B, fx, i, b[i]); b[i] = er_load(B, fx, i); }
        er_tensor tA, tB, tE;
        view_batched(&tA, &tB, &tE, fx, ER_FP32, GA > 1, GA, GB, M, K, N, A, B, E);
        er_standard std;
        char order[32], opts[96];
        static const char *const base = "compute=fp32 fma=never";
        if (kind == 0) { snprintf(order, sizeof order, "sequential"); snprintf(opts, sizeof opts, "%s", base); }
        else if (kind == 1) { snprintf(order, sizeof order, "blocked:%d", Bk); snprintf(opts, sizeof opts, "%s inner=sequential outer=sequential", base); }
        else if (kind == 2) { snprintf(order, sizeof order, "split:%d", S); snprintf(opts, sizeof opts, "%s inner=sequential outer=sequential", base); }
        else { snprintf(order, sizeof order, "blocked:%d", Bk); snprintf(opts, sizeof opts, "%s inner=sequential carry=fused", base); }
        ck_assert_msg(er_standard_parse(&std, order, opts) == ER_OK, "%s %s: %s", order, opts, er_last_error());
        er_ref *ref;
        ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
        ER_REQUIRE(er_emulate(ref, &tE, &std) == ER_OK, "emulate: %s", er_last_error());
        int chunk = kind == 2 ? (K + S - 1) / S : Bk;
        for (int64_t e = 0; e < nc; e++) {
            int64_t g = e / ((int64_t)M * N), ga = g / GB, gb = g % GB, i = e / N % M, j = e % N;
            for (int k = 0; k < K; k++) { af[k] = (float)a[(ga * M + i) * K + k]; bf[k] = (float)b[(gb * K + k) * N + j]; }
            float want = tile_ref(af, bf, K, kind, chunk);
            ER_REQUIRE(memcmp(&want, &E[e], 4) == 0 || (want != want && E[e] != E[e]), "trial %ld (%s %s, %s, %d x %d x %d, %s): "
                       "element %lld is %a, the float loop gives %a" ER_SEED_MSG_FMT, tr, order, opts, er_format_name(fx), M, K, N,
                       fam_names[fam], (long long)e, E[e], want, ER_SEED_ARGS);
        }
        elems += nc;
        er_ref_free(ref);
        free(a); free(b); free(af); free(bf); free(E); free(A); free(B);
    }
    printf("emulate tiles: %ld elements of %ld matrices equal a float loop of the same order bit for bit\n", elems, trials);
}
END_TEST

/* The tie rules of the tf32 conversion (FACTS.md section 8): a = 1 + 2^-11 + 2^-13 k is a tie for k = 0 (cuBLAS
 * gives 1, ties to even; cvt.rna gives 1 + 2^-10) and not for k = 1. Each rule's output is covered under its own
 * option and under tf32=nearest, and the other rule's output at a tie is not. */
static er_class tf32_class(float a, float y, const char *order, const char *tf32) {
    float b = 1.0f;
    er_tensor tA, tB, tC;
    er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){1, 1}, NULL, &a);
    er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){1, 1}, NULL, &b);
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){1, 1}, NULL, &y);
    char opts[64];
    snprintf(opts, sizeof opts, "compute=tf32 tf32=%s", tf32);
    er_report rep;
    ER_REQUIRE(er_matmul_covers(&rep, &tA, &tB, &tC, order, opts) == ER_OK, "%s", er_last_error());
    er_class c = (er_class)rep.classes[0];
    er_report_clear(&rep);
    return c;
}

START_TEST(tf32_tie_rules) {
    const char *orders[3] = {"any_order", "sequential", "mma:sm90"};
    for (int o = 0; o < 3; o++) {
        float tie = 1.0f + 0x1p-11f, rne = 1.0f, rna = 1.0f + 0x1p-10f;
        ck_assert_int_eq(er_class_passes(tf32_class(tie, rne, orders[o], "rne")), 1);
        ck_assert_int_eq(er_class_passes(tf32_class(tie, rna, orders[o], "rne")), 0);
        ck_assert_int_eq(er_class_passes(tf32_class(tie, rna, orders[o], "rna")), 1);
        ck_assert_int_eq(er_class_passes(tf32_class(tie, rne, orders[o], "rna")), 0);
        ck_assert_int_eq(er_class_passes(tf32_class(tie, rne, orders[o], "nearest")), 1);
        ck_assert_int_eq(er_class_passes(tf32_class(tie, rna, orders[o], "nearest")), 1);
        ck_assert_int_eq(er_class_passes(tf32_class(tie, rne, orders[o], "truncate")), 1);
        ck_assert_int_eq(er_class_passes(tf32_class(tie, rna, orders[o], "truncate")), 0);
        /* not a tie: both rules round up, and nearest allows only that */
        float up = 1.0f + 0x1p-11f + 0x1p-13f;
        ck_assert_int_eq(er_class_passes(tf32_class(up, rna, orders[o], "nearest")), 1);
        ck_assert_int_eq(er_class_passes(tf32_class(up, rne, orders[o], "nearest")), 0);
    }
    /* either tie rule is not a fixed standard: emulate refuses it */
    er_standard s;
    ck_assert_int_eq(er_standard_parse(&s, "sequential", "compute=tf32 tf32=nearest fma=never"), ER_OK);
    ck_assert_int_eq(er_standard_is_fixed(&s, ER_FP32, ER_FP32), 0);
    ck_assert_int_eq(er_standard_parse(&s, "sequential", "compute=tf32 tf32=rne fma=never"), ER_OK);
    ck_assert_int_eq(er_standard_is_fixed(&s, ER_FP32, ER_FP32), 1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("orders");
    TCase *tc = tcase_create("orders");
    tcase_set_timeout(tc, 3600);
    tcase_add_test(tc, fixed_orders_are_sound_and_emulated);
    tcase_add_test(tc, fma_of_a_huge_product_into_an_infinity);
    tcase_add_test(tc, emulate_tiles_match_a_float_loop);
    tcase_add_test(tc, tf32_tie_rules);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
