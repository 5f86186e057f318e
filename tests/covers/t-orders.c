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
        if (t.std.compute != ER_TF32) { /* inputs the accumulator holds: a wider one is refused */
            if (!er_gen_held(fa, t.acc)) fa = er_gen_held(ER_FP16, t.acc) ? ER_FP16 : ER_FP8_E4M3FN;
            if (!er_gen_held(fb, t.acc)) fb = er_gen_held(ER_FP16, t.acc) ? ER_FP16 : ER_FP8_E4M3FN;
        }
        er_format fo = er_rand64() % 2 ? t.acc : outputs[er_rand64() % 4];
        int fam = (int)(er_rand64() % FAM_COUNT);
        int K = er_rand64() % 6 == 0 ? (int)er_rand_int(129, 400) : (int)er_rand_int(1, 80);
        draw_tree(&t, K);
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
 * The fp64 accumulator overflows to +inf on products of 1e310, then a product of about -1e400 is fused into it.
 * (An fp16 accumulator over these fp64 operands, which reached the same sum by the exact-rounding path, is refused:
 * it does not hold them.) */
START_TEST(fma_of_a_huge_product_into_an_infinity) {
    double a[3] = {1e300, 1e300, 1e200}, b[3] = {1e10, 1e10, -1e200};
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
    ck_assert_int_eq(er_emulate(r, &tE, &st), ER_ERR_STANDARD);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "needs a compute format holding it (compute=fp16 does not"));
    ck_assert_int_eq(er_standard_parse(&st, "sequential", "compute=fp64 fma=always"), ER_OK);
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

/* A random tree over the products a[lo..hi) (leaves permuted by perm) in which every leaf meets at most d additions:
 * each split leaves at most 2^(d-1) leaves on either side. A leaf beside a subtree may be fused into its addition. */
static double depth_tree(emu *e, const double *a, const double *b, const int *perm, int lo, int hi, int d, int fma_mode) {
    if (hi - lo == 1) return emu_mul(e, a[perm[lo]], b[perm[lo]]);
    int64_t cap = d - 1 >= 40 ? INT64_C(1) << 40 : INT64_C(1) << (d - 1);
    int mlo = (int)(hi - cap > lo + 1 ? hi - cap : lo + 1), mhi = (int)(lo + cap < hi - 1 ? lo + cap : hi - 1);
    int m = (int)er_rand_int(mlo, mhi);
    if (m - lo == 1 && fma_mode && (er_rand64() & 1))
        return emu_fma(e, a[perm[lo]], b[perm[lo]], depth_tree(e, a, b, perm, m, hi, d - 1, fma_mode));
    double l = depth_tree(e, a, b, perm, lo, m, d - 1, fma_mode), r = depth_tree(e, a, b, perm, m, hi, d - 1, fma_mode);
    return emu_add(e, l, r);
}

/* depth=D (any-order.md, Theorem 7): dot products and sums evaluated by random trees whose leaves meet at most D
 * additions (from the least depth a tree of n leaves allows to that plus 8, and Triton's (R - 1) + 5 + log2 W), in
 * fp32, fp16 and bf16 accumulators, fused or not, on every input family, are covered under any_order depth=D; the
 * bound is tighter than any_order's: an output moved by 2^-14 relative is caught under depth=13 at n = 4096 and
 * passes any_order. */
START_TEST(depth_bounded_trees) {
    er_test_reseed(310);
    long trials = (long)(3000 * er_test_multiplier()), counts[ER_CLASS_COUNT] = {0};
    static const er_format accs[3] = {ER_FP32, ER_FP16, ER_BF16};
    for (long tr = 0; tr < trials; tr++) {
        int K = er_rand64() % 4 == 0 ? (int)er_rand_int(200, 2000) : (int)er_rand_int(1, 100), fam = (int)(er_rand64() % FAM_COUNT);
        er_format acc = accs[er_rand64() % 3], fx = acc == ER_FP32 ? (er_rand64() & 1 ? ER_FP32 : ER_FP16) : acc;
        int lg = 0;
        while ((1 << lg) < K) lg++;
        /* Triton 3.7's tl.sum over a block of K with 4 warps: R = ceil(K / 128) per thread, (R - 1) + 5 + 2 */
        int D = er_rand64() % 3 == 0 && K >= 128 ? (K + 127) / 128 + 6 : lg + (int)er_rand_int(0, 8);
        if (D < lg) D = lg;
        if (D < 1) D = 1;
        double *a = malloc(sizeof(double) * (size_t)K), *b = malloc(sizeof(double) * (size_t)K);
        int *perm = malloc(sizeof(int) * (size_t)K);
        gen_vectors(fam, fx, fx, acc, K, a, b);
        for (int k = 0; k < K; k++) perm[k] = k;
        for (int k = K - 1; k > 0; k--) { int j = (int)(er_rand64() % (uint64_t)(k + 1)), t = perm[k]; perm[k] = perm[j]; perm[j] = t; }
        emu e;
        emu_init(&e, acc);
        int fma_mode = (int)(er_rand64() % 2);
        double r = depth_tree(&e, a, b, perm, 0, K, D, fma_mode);
        emu_clear(&e);
        uint64_t A[2000], B[2000], C[1];
        for (int k = 0; k < K; k++) { er_store(A, fx, k, a[k]); er_store(B, fx, k, b[k]); }
        er_store(C, acc, 0, r);
        er_tensor tA, tB, tC;
        er_tensor_view(&tA, fx, 2, (int64_t[]){1, K}, NULL, A);
        er_tensor_view(&tB, fx, 2, (int64_t[]){K, 1}, NULL, B);
        er_tensor_view(&tC, acc, 2, (int64_t[]){1, 1}, NULL, C);
        char opts[64];
        snprintf(opts, sizeof opts, "compute=%s depth=%d", er_format_name(acc), D);
        er_report rep;
        ER_REQUIRE(er_matmul_covers(&rep, &tA, &tB, &tC, "any_order", opts) == ER_OK, "%s", er_last_error());
        er_class c = (er_class)rep.classes[0];
        counts[c]++;
        if (!er_class_passes(c)) {
            char text[2048];
            er_report_text(&rep, text, sizeof text, NULL);
            ck_abort_msg("trial %ld: a tree of depth %d was called %s (K %d, %s, %s)\n%s" ER_SEED_MSG_FMT, tr, D, er_class_name(c), K,
                         fam_names[fam], er_format_name(acc), text, ER_SEED_ARGS);
        }
        er_report_clear(&rep);
        free(a); free(b); free(perm);
    }
    printf("depth-bounded trees: %ld trials: exact %ld, covered %ld, overflow %ld\n", trials, counts[0], counts[1], counts[2]);
    /* softmax and rmsnorm rows whose sums are depth-bounded trees */
    for (long tr = 0; tr < trials / 10; tr++) {
        int n = (int)er_rand_int(1, 600), lg = 0;
        while ((1 << lg) < n) lg++;
        int D = lg + (int)er_rand_int(0, 4);
        if (D < 1) D = 1;
        float x[600], y[600];
        double e[600], one[600], sq[600];
        int perm[600];
        for (int j = 0; j < n; j++) { x[j] = (float)(er_rand_normal() * 3); one[j] = 1; perm[j] = j; }
        emu em;
        emu_init(&em, ER_FP32);
        double m = -INFINITY;
        for (int j = 0; j < n; j++) m = fmax(m, x[j]);
        mpfr_t t;
        mpfr_init2(t, 200);
        for (int j = 0; j < n; j++) {
            mpfr_set_d(t, emu_add(&em, x[j], -m), MPFR_RNDN);
            mpfr_exp(t, t, MPFR_RNDN);
            e[j] = emu_round(&em, t);
        }
        int rms = tr & 1;
        double s;
        if (rms) { /* q by the tree, ms = fl(q / n), v = fl(ms + fl(1e-5)), r = rsqrt(v) correctly rounded */
            for (int j = 0; j < n; j++) sq[j] = x[j];
            s = depth_tree(&em, sq, sq, perm, 0, n, D, (int)(er_rand64() & 1));
            mpfr_set_d(t, s, MPFR_RNDN);
            mpfr_div_ui(t, t, (unsigned long)n, MPFR_RNDN);
            double ms = emu_round(&em, t);
            mpfr_set_d(t, emu_add(&em, ms, (double)1e-5f), MPFR_RNDN);
            mpfr_rec_sqrt(t, t, MPFR_RNDN);
            double r = emu_round(&em, t);
            for (int j = 0; j < n; j++) y[j] = (float)emu_mul(&em, x[j], r);
        } else {
            s = depth_tree(&em, e, one, perm, 0, n, D, 0);
            for (int j = 0; j < n; j++) {
                mpfr_set_d(t, e[j], MPFR_RNDN);
                mpfr_div_d(t, t, s, MPFR_RNDN);
                y[j] = (float)emu_round(&em, t);
            }
        }
        mpfr_clear(t);
        emu_clear(&em);
        er_tensor tx, ty;
        er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, n}, NULL, x);
        er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){1, n}, NULL, y);
        er_ref *ref;
        ck_assert_int_eq(rms ? er_rmsnorm(&ref, &tx, NULL, 1e-5) : er_softmax(&ref, &tx, 1), ER_OK);
        char opts[32];
        snprintf(opts, sizeof opts, "depth=%d", D);
        er_standard st;
        ck_assert_int_eq(er_standard_parse(&st, "any_order", opts), ER_OK);
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &ty, &st) == ER_OK, "%s", er_last_error());
        ER_REQUIRE_PASS(&rep, "trial %ld: a %s row (n %d) summed by a tree of depth %d was called wrong:" ER_SEED_MSG_FMT, tr,
                        rms ? "rmsnorm" : "softmax", n, D, ER_SEED_ARGS);
        er_report_clear(&rep);
        er_ref_free(ref);
    }
    /* tighter: 4096 positive terms, their exact sum moved by 2^-14 relative */
    static float x[4096];
    double s = 0;
    for (int k = 0; k < 4096; k++) { x[k] = 1.0f + (float)k * 0x1p-12f; s += x[k]; }
    float y = (float)(s * (1 + 0x1p-14));
    er_tensor tx, ty;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, 4096}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 1, (int64_t[]){1}, NULL, &y);
    er_ref *ref;
    ck_assert_int_eq(er_sum(&ref, &tx, 1), ER_OK);
    er_standard st;
    er_report rep;
    ck_assert_int_eq(er_standard_parse(&st, "any_order", NULL), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &ty, &st), ER_OK);
    ck_assert_msg(er_report_all(&rep), "any_order should allow a 2^-14 move at n = 4096");
    er_report_clear(&rep);
    ck_assert_int_eq(er_standard_parse(&st, "any_order", "depth=13"), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &ty, &st), ER_OK);
    ck_assert_msg(!er_report_all(&rep), "depth=13 must catch a 2^-14 move at n = 4096");
    er_report_clear(&rep);
    /* no tree of depth 11 adds 4096 terms; depth= does not apply to max, fixed orders or layernorm */
    ck_assert_int_eq(er_standard_parse(&st, "any_order", "depth=11"), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &ty, &st), ER_ERR_STANDARD);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "2^11"));
    er_ref_free(ref);
    ck_assert_int_eq(er_standard_parse(&st, "sequential", "depth=3"), ER_ERR_STANDARD);
    ck_assert_int_eq(er_max(&ref, &tx, 1), ER_OK);
    ck_assert_int_eq(er_standard_parse(&st, "any_order", "depth=13"), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &ty, &st), ER_ERR_STANDARD);
    er_ref_free(ref);
}
END_TEST

/* A tree's sum of v[0 .. n) (fp32), its terms through at most D additions: covered under depth=D. */
static void require_sum_at_depth(const float *v, int64_t n, float total, int64_t D, const char *who) {
    er_tensor tx, ty;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, n}, NULL, v);
    er_tensor_view(&ty, ER_FP32, 1, (int64_t[]){1}, NULL, &total);
    er_ref *ref;
    ck_assert_int_eq(er_sum(&ref, &tx, 1), ER_OK);
    char opts[32];
    snprintf(opts, sizeof opts, "depth=%lld", (long long)D);
    er_standard st;
    ck_assert_int_eq(er_standard_parse(&st, "any_order", opts), ER_OK);
    er_report rep;
    ck_assert_int_eq(er_covers(&rep, ref, &ty, &st), ER_OK);
    ck_assert_msg(er_report_all(&rep), "%s's tree over %lld elements called wrong under depth=%lld", who, (long long)n, (long long)D);
    er_report_clear(&rep);
    er_ref_free(ref);
}

/* er_depth_triton against an emulation of Triton's tl.sum tree: each of the 32 W threads holds R = BLOCK / (32 W)
 * consecutive elements, combined in a chain (Triton <= 3.7) or a balanced tree (3.8+), then the warp's xor butterfly
 * (5 levels) and a butterfly over the W warp partials, in fp32, every addition counted on the terms it carries. The
 * deepest count equals the helper's depth, and the sum is covered under depth= that depth. */
START_TEST(triton_sum_depth) {
    er_test_reseed(340);
    for (int lb = 5; lb <= 14; lb++)
        for (int lw = 0; lw <= 3; lw++)
            for (int ver = 0; ver < 2; ver++) {
                int64_t block = INT64_C(1) << lb, W = INT64_C(1) << lw, lanes = 32 * W, R = block / lanes;
                if (R < 1) continue; /* fewer elements than lanes: idle lanes add zeros, which round nothing */
                static float v[1 << 14], part[1024];
                static int dep[1024];
                for (int64_t i = 0; i < block; i++) v[i] = (float)(er_rand_normal() * ldexp(1.0, (int)er_rand_int(-8, 8)));
                for (int64_t t = 0; t < lanes; t++) {
                    float *e = v + t * R;
                    if (ver == 0) { /* chain */
                        float s = e[0];
                        for (int64_t i = 1; i < R; i++) s += e[i];
                        part[t] = s;
                        dep[t] = (int)(R - 1);
                    } else { /* balanced tree, in place */
                        float tmp[1 << 14];
                        for (int64_t i = 0; i < R; i++) tmp[i] = e[i];
                        int d = 0;
                        for (int64_t w = R; w > 1; w /= 2, d++)
                            for (int64_t i = 0; i < w / 2; i++) tmp[i] = tmp[2 * i] + tmp[2 * i + 1];
                        part[t] = tmp[0];
                        dep[t] = d;
                    }
                }
                /* xor butterflies: within each warp (5 levels), then over the warps (lw levels) */
                for (int64_t step = 1; step < lanes; step *= 2) {
                    static float np[1024];
                    static int nd[1024];
                    for (int64_t t = 0; t < lanes; t++) {
                        int64_t o = t ^ step;
                        np[t] = part[t] + part[o];
                        nd[t] = (dep[t] > dep[o] ? dep[t] : dep[o]) + 1;
                    }
                    memcpy(part, np, sizeof(float) * (size_t)lanes);
                    memcpy(dep, nd, sizeof(int) * (size_t)lanes);
                }
                int64_t D;
                ck_assert_int_eq(er_depth_triton(&D, block, (int)W, 3, ver ? 8 : 6), ER_OK);
                ck_assert_msg(D == dep[0], "block %lld, %lld warps, Triton 3.%d: helper %lld, emulated tree %d", (long long)block,
                              (long long)W, ver ? 8 : 6, (long long)D, dep[0]);
                require_sum_at_depth(v, block, part[0], D, "Triton");
            }
    int64_t D;
    ck_assert_int_eq(er_depth_triton(&D, 4096, 4, 3, 6), ER_OK);
    ck_assert_int_eq(D, 38);
    ck_assert_int_eq(er_depth_triton(&D, 4096, 4, 3, 8), ER_OK);
    ck_assert_int_eq(D, 12);
    ck_assert_int_eq(er_depth_triton(&D, 1000, 4, 3, 6), ER_ERR_INVALID);
    ck_assert_int_eq(er_depth_triton(&D, 1024, 3, 3, 6), ER_ERR_INVALID);
    ck_assert_int_eq(er_depth_triton(NULL, 1024, 4, 3, 6), ER_ERR_NULL);
}
END_TEST

/* er_depth_cub_block_reduce against an emulation of CUB's BlockReduce (warp reductions): each thread's items in a
 * chain, each warp's lanes by shuffle-down (lane i adds lane i + offset, offsets 16, 8, ... 1, lanes past the block
 * idle), thread 0 adding the warp totals in order; every addition counted on the terms it carries. The deepest count
 * equals the helper's depth, and the sum is covered under depth= that depth. */
START_TEST(cub_block_reduce_depth) {
    er_test_reseed(342);
    static const int threads[] = {1, 7, 32, 33, 64, 96, 128, 250, 256, 512, 1024};
    static const int items[] = {1, 2, 4, 7, 16};
    for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++)
        for (size_t ii = 0; ii < sizeof items / sizeof items[0]; ii++) {
            int T = threads[ti], I = items[ii], n = T * I;
            static float v[1024 * 16], part[1024];
            static int dep[1024];
            for (int i = 0; i < n; i++) v[i] = (float)(er_rand_normal() * ldexp(1.0, (int)er_rand_int(-8, 8)));
            for (int t = 0; t < T; t++) { /* blocked arrangement: thread t holds items t I .. t I + I - 1 */
                float s = v[t * I];
                for (int i = 1; i < I; i++) s += v[t * I + i];
                part[t] = s;
                dep[t] = I - 1;
            }
            float total = 0;
            int tdep = 0;
            for (int w = 0; w * 32 < T; w++) {
                int L = T - w * 32 < 32 ? T - w * 32 : 32, full = T < 32 ? T : 32, off = 1;
                while (off * 2 < full) off *= 2;
                for (; off >= 1; off /= 2) /* lane i takes lane i + off where that lane exists */
                    for (int i = 0; i + off < L; i++) {
                        part[w * 32 + i] += part[w * 32 + i + off];
                        int a = dep[w * 32 + i], b = dep[w * 32 + i + off];
                        dep[w * 32 + i] = (a > b ? a : b) + 1;
                    }
                if (w == 0) { total = part[0]; tdep = dep[0]; }
                else { total += part[w * 32]; tdep = (tdep > dep[w * 32] ? tdep : dep[w * 32]) + 1; }
            }
            int64_t D;
            ck_assert_int_eq(er_depth_cub_block_reduce(&D, I, T), ER_OK);
            ck_assert_msg(D == (tdep > 1 ? tdep : 1), "%d threads, %d items: helper %lld, emulated tree %d", T, I, (long long)D, tdep);
            require_sum_at_depth(v, n, total, D, "CUB");
        }
    int64_t D;
    ck_assert_int_eq(er_depth_cub_block_reduce(&D, 4, 256), ER_OK);
    ck_assert_int_eq(D, 3 + 5 + 7);
    ck_assert_int_eq(er_depth_cub_block_reduce(&D, 0, 256), ER_ERR_INVALID);
    ck_assert_int_eq(er_depth_cub_block_reduce(&D, 4, 2048), ER_ERR_INVALID);
    ck_assert_int_eq(er_depth_cub_block_reduce(NULL, 4, 256), ER_ERR_NULL);
}
END_TEST

/* er_depth_torch_softmax against an emulation of torch's persistent softmax sum: W = min(P, 32) lanes (P = n rounded
 * up to a power of two), lane t adding elements t, t + W, ... in a chain from zero (0 past n), then the xor
 * butterfly; every addition that can round counted on the terms it carries (a first addition to zero is exact). The
 * deepest count equals the helper's depth, and the sum is covered under depth= that depth. */
START_TEST(torch_softmax_depth) {
    er_test_reseed(341);
    for (int64_t n = 1; n <= 1024; n = n < 40 ? n + 1 : n * 2 + (n % 3)) {
        int64_t P = 1;
        while (P < n) P *= 2;
        int64_t W = P < 32 ? P : 32, R = P / W;
        static float v[1024], part[32];
        static int dep[32];
        for (int64_t i = 0; i < n; i++) v[i] = (float)(er_rand_unit() * ldexp(1.0, (int)er_rand_int(-8, 0)));
        for (int64_t t = 0; t < W; t++) {
            float s = 0;
            int d = -1; /* the first addition, to zero, is exact */
            for (int64_t it = 0; it < R; it++) { s += t + it * W < n ? v[t + it * W] : 0.0f; d++; }
            part[t] = s;
            dep[t] = d;
        }
        for (int64_t step = W / 2; step >= 1; step /= 2) {
            static float np[32];
            static int nd[32];
            for (int64_t t = 0; t < W; t++) {
                int64_t o = t ^ step;
                np[t] = part[t] + part[o];
                nd[t] = (dep[t] > dep[o] ? dep[t] : dep[o]) + 1;
            }
            memcpy(part, np, sizeof(float) * (size_t)W);
            memcpy(dep, nd, sizeof(int) * (size_t)W);
        }
        int64_t D;
        ck_assert_int_eq(er_depth_torch_softmax(&D, n), ER_OK);
        ck_assert_msg(D == (dep[0] > 1 ? dep[0] : 1), "n %lld: helper %lld, emulated tree %d", (long long)n, (long long)D, dep[0]);
        require_sum_at_depth(v, n, part[0], D, "torch");
    }
    int64_t D;
    ck_assert_int_eq(er_depth_torch_softmax(&D, 1024), ER_OK);
    ck_assert_int_eq(D, 36);
    ck_assert_int_eq(er_depth_torch_softmax(&D, 100), ER_OK);
    ck_assert_int_eq(D, 8);
    ck_assert_int_eq(er_depth_torch_softmax(&D, 0), ER_ERR_UNSUPPORTED);
    ck_assert_int_eq(er_depth_torch_softmax(NULL, 8), ER_ERR_NULL);
}
END_TEST

/* One variant of torch's block softmax sum (SoftMax.cu, rows above 1024: 1024 threads) over v[0..n): each thread's
 * chain from zero (ILP consecutive elements per vector load; smem = 1: the shared-memory kernel, else ilpReduce with
 * the input `shift` elements past 16-byte alignment: one element first, the vectors, then a tail), then
 * cuda_utils::BlockReduce (a 5-level shfl_down tree in each warp, then one over the 32 warp sums). Returns the sum
 * and sets *depth to the deepest addition count a term meets (a first addition to zero is exact). */
static float torch_block_sum(const float *v, int64_t n, int ILP, int smem, int shift, int *depth) {
    enum { B = 1024 };
    static float part[B];
    static int dep[B];
    for (int t = 0; t < B; t++) {
        float s = 0;
        int d = -1, seen = 0;
        const float *data = v;
        int64_t size = n, off = t;
#define ER_ADD(x) do { s += (x); d++; seen = 1; } while (0)
        if (smem) {
            for (; off * ILP < n; off += B)
                for (int j = 0; j < ILP; j++) ER_ADD(v[off * ILP + j]);
        } else {
            if (shift > 0) { /* the first B - shift elements, one per thread from thread `shift` */
                data -= shift;
                size += shift;
                if (t >= shift) ER_ADD(data[t]);
                size -= B;
                data += B;
            }
            int64_t last = size % ((int64_t)ILP * B);
            for (; off * ILP < size - last; off += B)
                for (int j = 0; j < ILP; j++) ER_ADD(data[off * ILP + j]);
            for (off = size - last + t; off < size; off += B) ER_ADD(data[off]);
        }
#undef ER_ADD
        part[t] = s;
        dep[t] = seen ? d : 0;
    }
    for (int level = 0; level < 2; level++) {
        int lanes = level ? B / 32 : B;
        for (int w = 0; w < lanes; w += 32)
            for (int o = 16; o >= 1; o /= 2)
                for (int l = 0; l + o < 32; l++) { /* lane l takes lane l + o's value: lanes in increasing order read old values */
                    part[w + l] += part[w + l + o];
                    dep[w + l] = (dep[w + l] > dep[w + l + o] ? dep[w + l] : dep[w + l + o]) + 1;
                }
        if (!level)
            for (int w = 0; w < B / 32; w++) { part[w] = part[w * 32]; dep[w] = dep[w * 32]; }
    }
    *depth = dep[0];
    return part[0];
}

/* er_depth_torch_softmax above 1024 elements against the emulation of torch's block path: every variant (fp32's 4
 * and fp16's 8 elements per load, the shared-memory kernel where n is a multiple of them and fits, ilpReduce at every
 * misalignment) meets at most the helper's depth, and the deepest is within one of it; each variant's sum is covered
 * under depth= that depth. */
START_TEST(torch_softmax_block_depth) {
    er_test_reseed(342);
    static float v[65536];
    static const int64_t ns[] = {1025, 1500, 2048, 3000, 4096, 5000, 8192, 12000, 16384, 24576, 30000, 65536};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int64_t n = ns[k], D;
        for (int64_t i = 0; i < n; i++) v[i] = (float)(er_rand_unit() * ldexp(1.0, (int)er_rand_int(-8, 0)));
        ck_assert_msg(er_depth_torch_softmax(&D, n) == ER_OK, "n %lld: %s", (long long)n, er_last_error());
        int deepest = 0;
        for (int ILP = 4; ILP <= 8; ILP *= 2)
            for (int smem = 0; smem <= 1; smem++)
                for (int shift = 0; shift < (smem ? 1 : ILP); shift++) {
                    /* the shared-memory kernel: n a multiple of ILP below 48 KiB of shared memory (less the warp sums) */
                    if (smem && (n % ILP || n >= (49152 - 32 * 4) / (16 / ILP))) continue;
                    int d;
                    float total = torch_block_sum(v, n, ILP, smem, shift, &d);
                    ck_assert_msg(d <= D, "n %lld, ILP %d, smem %d, shift %d: the tree's depth %d above the helper's %lld",
                                  (long long)n, ILP, smem, shift, d, (long long)D);
                    if (d > deepest) deepest = d;
                    if (shift == 0) require_sum_at_depth(v, n, total, D, "torch's block path");
                }
        ck_assert_msg(D <= deepest + 1, "n %lld: helper %lld, deepest emulated tree %d", (long long)n, (long long)D, deepest);
    }
}
END_TEST

/* rows x n fp32 layernorm outputs (y, mean, rstd, eps 1e-5, no weight): 1 when all three pass under options. */
static int layernorm_rows_pass(const float *x, const float *y, const float *mean, const float *rstd, int rows, int n,
                               const char *options) {
    er_tensor tx, ty, tm, tr;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){rows, n}, NULL, (void *)x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){rows, n}, NULL, (void *)y);
    er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){rows}, NULL, (void *)mean);
    er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){rows}, NULL, (void *)rstd);
    er_ref *ref;
    ck_assert_int_eq(er_layernorm(&ref, &tx, 1, NULL, NULL, 1e-5), ER_OK);
    er_standard st;
    ck_assert_msg(er_standard_parse(&st, "any_order", options) == ER_OK, "%s", er_last_error());
    er_report reps[3];
    const er_tensor *outs[3] = {&ty, &tm, &tr};
    ck_assert_msg(er_covers_outputs(reps, ref, outs, 3, &st) == ER_OK, "%s", er_last_error());
    int ok = 1;
    for (int o = 0; o < 3; o++) { ok &= er_report_all(&reps[o]); er_report_clear(&reps[o]); }
    er_ref_free(ref);
    return ok;
}

/* A two-pass layernorm (rows of n, fp32) with both sums in a tree of depth D and the given variance divisor and
 * rstd form (0: 1/sqrt(v + eps) correctly rounded; 1: 1/(sqrt(v) + eps), a bug); 1 when its y, mean and rstd pass
 * under options. */
static int layernorm_depth_case(int n, int D, int unbiased, int rstd_bug, const char *options) {
    enum { ROWS = 4 };
    static float x[ROWS * 4096], y[ROWS * 4096];
    static double one[4096], d[4096];
    static int perm[4096];
    float mean[ROWS], rstd[ROWS];
    emu e;
    emu_init(&e, ER_FP32);
    mpfr_t t;
    mpfr_init2(t, 200);
    for (int r = 0; r < ROWS; r++) {
        double xd[4096];
        for (int j = 0; j < n; j++) { x[r * n + j] = (float)(er_rand_normal() + 0.5); xd[j] = x[r * n + j]; one[j] = 1; perm[j] = j; }
        for (int j = n - 1; j > 0; j--) { int k = (int)(er_rand64() % (uint64_t)(j + 1)), s = perm[j]; perm[j] = perm[k]; perm[k] = s; }
        double S = depth_tree(&e, xd, one, perm, 0, n, D, 0);
        mpfr_set_d(t, S, MPFR_RNDN);
        mpfr_div_ui(t, t, (unsigned long)n, MPFR_RNDN);
        double m = emu_round(&e, t);
        for (int j = 0; j < n; j++) d[j] = emu_add(&e, xd[j], -m);
        double Q = depth_tree(&e, d, d, perm, 0, n, D, (int)(er_rand64() & 1));
        mpfr_set_d(t, Q, MPFR_RNDN);
        mpfr_div_ui(t, t, (unsigned long)(unbiased ? n - 1 : n), MPFR_RNDN);
        double v = emu_round(&e, t), rs;
        if (rstd_bug) {
            mpfr_set_d(t, v, MPFR_RNDN);
            mpfr_sqrt(t, t, MPFR_RNDN);
            double sq = emu_round(&e, t);
            mpfr_set_d(t, emu_add(&e, sq, (double)1e-5f), MPFR_RNDN);
            mpfr_ui_div(t, 1, t, MPFR_RNDN);
        } else {
            mpfr_set_d(t, emu_add(&e, v, (double)1e-5f), MPFR_RNDN);
            mpfr_rec_sqrt(t, t, MPFR_RNDN);
        }
        rs = emu_round(&e, t);
        for (int j = 0; j < n; j++) y[r * n + j] = (float)emu_mul(&e, d[j], rs);
        mean[r] = (float)m;
        rstd[r] = (float)rs;
    }
    mpfr_clear(t);
    emu_clear(&e);
    return layernorm_rows_pass(x, y, mean, rstd, ROWS, n, options);
}

/* A Welford row's outputs from its final mean M and M2 = S in fp32: var = S / div, rstd = 1/sqrt(var + eps) rounded
 * (eps 1e-5 as fp32 holds it), y = (x - mean) rstd. */
static void welford_row_out(emu *e, mpfr_t t, const float *x, int n, double M, double S, int div, float *y, float *mean,
                            float *rstd) {
    mpfr_set_d(t, S, MPFR_RNDN);
    mpfr_div_ui(t, t, (unsigned long)div, MPFR_RNDN);
    double v = emu_round(e, t);
    mpfr_set_d(t, emu_add(e, v, (double)1e-5f), MPFR_RNDN);
    mpfr_rec_sqrt(t, t, MPFR_RNDN);
    double rs = emu_round(e, t);
    for (int j = 0; j < n; j++) y[j] = (float)emu_mul(e, emu_add(e, x[j], -M), rs);
    *mean = (float)M;
    *rstd = (float)rs;
}

/* A Welford layernorm as torch's CUDA kernel shapes it: T threads (a power of two) each run Welford updates over
 * its strided elements (mean += delta / k or delta * fl(1/k); m2 += delta (x - mean)), then the partials combine by
 * Chan's formula (or torch's weighted form) in a butterfly. Every operation rounded in fp32 (fused at random where
 * a product meets an addition). Depth: ceil(n / T) - 1 updates, then log2 T combines. 1 when y, mean and rstd pass. */
static int welford_depth_case(int n, int T, int offset, int unbiased, const char *options) {
    enum { ROWS = 2 };
    static float x[ROWS * 4096], y[ROWS * 4096];
    float mean[ROWS], rstd[ROWS];
    emu e;
    emu_init(&e, ER_FP32);
    mpfr_t t;
    mpfr_init2(t, 200);
    for (int r = 0; r < ROWS; r++) {
        for (int j = 0; j < n; j++) x[r * n + j] = (float)(er_rand_normal() + (offset ? 300.0 : 0.25));
        double M[256], S[256], C[256];
        int fuse = (int)(er_rand64() & 1), torch_form = (int)(er_rand64() & 1);
        for (int th = 0; th < T; th++) {
            M[th] = S[th] = C[th] = 0;
            for (int j = th; j < n; j += T) {
                double xv = x[r * n + j];
                C[th] += 1;
                double delta = emu_add(&e, xv, -M[th]), q;
                if (fuse) { mpfr_set_d(t, delta, MPFR_RNDN); mpfr_div_d(t, t, C[th], MPFR_RNDN); q = emu_round(&e, t); }
                else { mpfr_set_ui(t, 1, MPFR_RNDN); mpfr_div_d(t, t, C[th], MPFR_RNDN); q = emu_mul(&e, delta, emu_round(&e, t)); }
                M[th] = emu_add(&e, M[th], q);
                double d2 = emu_add(&e, xv, -M[th]);
                S[th] = fuse ? emu_fma(&e, delta, d2, S[th]) : emu_add(&e, S[th], emu_mul(&e, delta, d2));
            }
        }
        for (int step = 1; step < T; step *= 2)
            for (int th = 0; th < T; th += 2 * step) {
                int o = th + step;
                if (C[o] == 0) continue;
                if (C[th] == 0) { M[th] = M[o]; S[th] = S[o]; C[th] = C[o]; continue; }
                double na = C[th], nb = C[o], nn = na + nb, delta = emu_add(&e, M[o], -M[th]);
                mpfr_set_d(t, nb, MPFR_RNDN);
                mpfr_div_d(t, t, nn, MPFR_RNDN);
                double wb = emu_round(&e, t), Mn;
                if (torch_form) {
                    mpfr_set_d(t, na, MPFR_RNDN);
                    mpfr_div_d(t, t, nn, MPFR_RNDN);
                    double wa = emu_round(&e, t);
                    Mn = emu_add(&e, emu_mul(&e, wa, M[th]), emu_mul(&e, wb, M[o]));
                } else {
                    Mn = emu_add(&e, M[th], emu_mul(&e, delta, wb));
                }
                double corr = emu_mul(&e, emu_mul(&e, emu_mul(&e, delta, delta), na), wb);
                S[th] = emu_add(&e, emu_add(&e, S[th], S[o]), corr);
                M[th] = Mn;
                C[th] = nn;
            }
        welford_row_out(&e, t, x + r * n, n, M[0], S[0], unbiased ? n - 1 : n, y + r * n, &mean[r], &rstd[r]);
    }
    mpfr_clear(t);
    emu_clear(&e);
    return layernorm_rows_pass(x, y, mean, rstd, ROWS, n, options);
}

/* Welford trees at bounded depth (layernorm.md, Theorems L3 and L4 with depth): correct ones covered under
 * variance=welford and either with depth= their depth; the unbiased variance counted where caught. */
START_TEST(welford_depth) {
    er_test_reseed(335);
    long trials = (long)(12 * er_test_multiplier());
    int caught = 0, tried = 0;
    for (long tr = 0; tr < trials; tr++) {
        static const int ns[4] = {64, 256, 1024, 4096}, Ts[4] = {1, 8, 32, 128};
        int n = ns[tr % 4], T = Ts[(tr / 4) % 4], offset = (int)((tr / 16) & 1), lt = 0;
        while ((1 << lt) < T) lt++;
        int D = (n + T - 1) / T - 1 + lt;
        if (D < 1) D = 1;
        char opts[64];
        for (int v = 0; v < 2; v++) {
            snprintf(opts, sizeof opts, "variance=%s depth=%d", v ? "either" : "welford", D);
            ck_assert_msg(welford_depth_case(n, T, offset, 0, opts), "trial %ld: a correct Welford layernorm (n %d, %d threads, depth %d) "
                          "was called wrong under %s" ER_SEED_MSG_FMT, tr, n, T, D, opts, ER_SEED_ARGS);
        }
        tried++;
        caught += !welford_depth_case(n, T, offset, 1, opts);
    }
    printf("Welford trees at bounded depth covered; the unbiased variance caught in %d of %d trials under variance=either "
           "depth=D\n", caught, tried);
}
END_TEST

/* triton:BLOCK against a float loop written as the hardware runs it: every one of the 32 W threads chains its
 * elements (its vectors t, t + 32 W, ... of S elements, past K the masked +0, threads past the block's vectors holding
 * copies), every lane of every warp runs the xor butterfly (offsets 16 .. 1) over all 32 lanes, lane 0 of each warp
 * stores its total, and lanes 0 .. W - 1 of one warp run a butterfly over them. Random blocks, warps, vector widths
 * (the default and vec=), K from 1 to the block and values of wide range: er_emulate equals it bit for bit, and its
 * sums are covered under depth= er_depth_triton's depth where the block fills every thread. */
START_TEST(triton_order_matches_a_float_loop) {
    er_test_reseed(346);
    static float x[8192], part[1024], tmp[1024];
    long trials = (long)(300 * er_test_multiplier());
    for (long tr = 0; tr < trials; tr++) {
        int lb = (int)er_rand_int(0, 13), lw = (int)er_rand_int(0, 4), ls = (int)er_rand_int(0, 4);
        int64_t B = INT64_C(1) << lb, W = INT64_C(1) << lw, K = er_rand_int(1, B);
        int S = 1 << ls, use_vec = (int)(er_rand64() & 1) && S <= B;
        if (!use_vec) { /* the default: 4 fp32 elements where K is a multiple of 16, at most B / (32 W) */
            int64_t cap = B / (32 * W), v = K % 16 == 0 ? 4 : 1;
            S = (int)(v < cap ? v : cap < 1 ? 1 : cap);
        }
        for (int64_t i = 0; i < K; i++) x[i] = (float)(er_rand_normal() * ldexp(1.0, (int)er_rand_int(-20, 20)));
        int64_t T = 32 * W, E = B / S;
        for (int64_t t = 0; t < T; t++) {
            float acc = 0;
            int first = 1;
            for (int64_t vcur = t % E; ; vcur += T) {
                for (int j = 0; j < S; j++) {
                    int64_t k = vcur * S + j;
                    float v = k < K ? x[k] : 0.0f;
                    acc = first ? v : acc + v;
                    first = 0;
                }
                if (vcur + T >= E) break;
            }
            part[t] = acc;
        }
        for (int64_t o = 16; o >= 1; o /= 2) {
            for (int64_t t = 0; t < T; t++) tmp[t] = part[t] + part[(t & ~INT64_C(31)) | ((t & 31) ^ o)];
            memcpy(part, tmp, sizeof(float) * (size_t)T);
        }
        float wt[32];
        for (int64_t w = 0; w < W; w++) wt[w] = part[32 * w];
        /* warps past the block's vectors hold copies: the reduction counts distinct warps only */
        int64_t Wd = E / 32 < W ? (E / 32 < 1 ? 1 : E / 32) : W;
        for (int64_t o = Wd / 2; o >= 1; o /= 2) {
            float nt[32];
            for (int64_t w = 0; w < Wd; w++) nt[w] = wt[w] + wt[w ^ o];
            memcpy(wt, nt, sizeof(float) * (size_t)Wd);
        }
        float want = wt[0];
        if (E < 32) { /* lanes past the block's vectors hold copies too: the butterfly over all 32 would count them */
            float acc[32];
            for (int64_t l = 0; l < E; l++) {
                float a = 0;
                for (int j = 0; j < S; j++) { int64_t k = l * S + j; float v = k < K ? x[k] : 0.0f; a = j ? a + v : v; }
                acc[l] = a;
            }
            for (int64_t o = E / 2; o >= 1; o /= 2) for (int64_t l = 0; l < o; l++) acc[l] += acc[l + o];
            want = acc[0];
        }
        er_tensor tx, to;
        float got;
        er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, K}, NULL, x);
        er_tensor_view(&to, ER_FP32, 1, (int64_t[]){1}, NULL, &got);
        er_ref *ref;
        ck_assert_int_eq(er_sum(&ref, &tx, 1), ER_OK);
        char order[32], opts[48];
        snprintf(order, sizeof order, "triton:%lld", (long long)B);
        snprintf(opts, sizeof opts, use_vec ? "warps=%lld vec=%d" : "warps=%lld", (long long)W, S);
        er_standard st;
        ck_assert_msg(er_standard_parse(&st, order, opts) == ER_OK, "%s %s: %s", order, opts, er_last_error());
        ck_assert_msg(er_emulate(ref, &to, &st) == ER_OK, "%s", er_last_error());
        ck_assert_msg(memcmp(&got, &want, 4) == 0, "trial %ld: %s %s, K %lld: emulated %a, the loop %a" ER_SEED_MSG_FMT, tr, order,
                      opts, (long long)K, (double)got, (double)want, ER_SEED_ARGS);
        if (E >= 32 * W) { /* every thread holds B / (32 W) elements: the depth er_depth_triton gives for 3.6 */
            int64_t D;
            ck_assert_int_eq(er_depth_triton(&D, B, (int)W, 3, 6), ER_OK);
            char dopt[32];
            snprintf(dopt, sizeof dopt, "depth=%lld", (long long)(D < 1 ? 1 : D));
            er_report rep;
            ck_assert_int_eq(er_standard_parse(&st, "any_order", dopt), ER_OK);
            ck_assert_int_eq(er_covers(&rep, ref, &to, &st), ER_OK);
            ck_assert_msg(er_report_all(&rep), "trial %ld: %s %s not covered at %s", tr, order, opts, dopt);
            er_report_clear(&rep);
        }
        er_ref_free(ref);
    }
}
END_TEST

/* The most leaves a Welford tree reaches with at most h inner nodes on a leaf's path, c of them combines (an update
 * adds one leaf: f(h - 1, c) + 1; a combine joins two subtrees: 2 f(h - 1, c - 1)); capped at 2^40. */
static int64_t welford_reach(int h, int c) {
    enum { HMAX = 4200, CMAX = 16 };
    static int64_t memo[HMAX][CMAX];
    if (h <= 0) return 1;
    if (h >= HMAX || c >= CMAX || c < 0) return INT64_C(1) << 40;
    if (memo[h][c]) return memo[h][c];
    int64_t up = welford_reach(h - 1, c) + 1, co = c > 0 ? 2 * welford_reach(h - 1, c - 1) : 0;
    int64_t m = up > co ? up : co;
    return memo[h][c] = m > (INT64_C(1) << 40) ? INT64_C(1) << 40 : m;
}

typedef struct { double M, S, n; } wstate;

static int welford_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A random Welford tree over x[lo..hi) with at most h inner nodes on each leaf's path, c of them combines, every
 * operation rounded in fp32: updates (b one value: delta = x - M, M += delta / n or delta fl(1/n), S += delta (x - M),
 * fused or not) and combines (Chan's M_a + delta fl(n_b/n) with either side as a, the smaller one too, so a single
 * value may be a and the product's weight near 1; or torch's fl(n_a c) M_a + fl(n_b c) M_b), split anywhere from
 * one leaf to the middle. */
static wstate welford_tree(emu *e, mpfr_t t, const double *x, int lo, int hi, int h, int c) {
    int k = hi - lo;
    if (k == 1) return (wstate){x[lo], 0, 1};
    int can_up = welford_reach(h - 1, c) >= k - 1, can_co = c > 0 && 2 * welford_reach(h - 1, c - 1) >= k;
    if (can_up && (!can_co || (er_rand64() % 3) != 0)) {
        int last = (int)(er_rand64() & 1); /* the added value: the range's last or first */
        wstate a = last ? welford_tree(e, t, x, lo, hi - 1, h - 1, c) : welford_tree(e, t, x, lo + 1, hi, h - 1, c);
        double xv = last ? x[hi - 1] : x[lo], nn = a.n + 1, delta = emu_add(e, xv, -a.M), q;
        if (er_rand64() & 1) { mpfr_set_d(t, delta, MPFR_RNDN); mpfr_div_d(t, t, nn, MPFR_RNDN); q = emu_round(e, t); }
        else { mpfr_set_ui(t, 1, MPFR_RNDN); mpfr_div_d(t, t, nn, MPFR_RNDN); q = emu_mul(e, delta, emu_round(e, t)); }
        double M = emu_add(e, a.M, q), d2 = emu_add(e, xv, -M);
        double S = (er_rand64() & 1) ? emu_fma(e, delta, d2, a.S) : emu_add(e, a.S, emu_mul(e, delta, d2));
        return (wstate){M, S, nn};
    }
    int64_t cap = welford_reach(h - 1, c - 1);
    int kmin = (int)(k - cap > 1 ? k - cap : 1), kmax = k / 2, ka;
    switch (er_rand64() % 3) {
    case 0: ka = kmin; break;                 /* as unbalanced as the budget allows */
    case 1: ka = kmax; break;                 /* balanced */
    default: ka = kmin + (int)(er_rand64() % (uint64_t)(kmax - kmin + 1));
    }
    wstate L = welford_tree(e, t, x, lo, lo + ka, h - 1, c - 1), Rt = welford_tree(e, t, x, lo + ka, hi, h - 1, c - 1);
    int swap = (int)(er_rand64() & 1);
    wstate a = swap ? Rt : L, b = swap ? L : Rt;
    double nn = a.n + b.n, delta = emu_add(e, b.M, -a.M), M;
    mpfr_set_d(t, b.n, MPFR_RNDN);
    mpfr_div_d(t, t, nn, MPFR_RNDN);
    double wb = emu_round(e, t);
    if (er_rand64() & 1) {
        mpfr_set_ui(t, 1, MPFR_RNDN);
        mpfr_div_d(t, t, nn, MPFR_RNDN);
        double co = emu_round(e, t), wa = emu_mul(e, a.n, co), wbt = emu_mul(e, b.n, co);
        M = (er_rand64() & 1) ? emu_fma(e, wa, a.M, emu_mul(e, wbt, b.M)) : emu_add(e, emu_mul(e, wa, a.M), emu_mul(e, wbt, b.M));
        wb = wbt;
    } else {
        M = (er_rand64() & 1) ? emu_fma(e, delta, wb, a.M) : emu_add(e, a.M, emu_mul(e, delta, wb));
    }
    double corr = emu_mul(e, emu_mul(e, emu_mul(e, delta, delta), a.n), wb);
    return (wstate){M, emu_add(e, emu_add(e, a.S, b.S), corr), nn};
}

/* Theorem L8 against trees that push it: random Welford trees at depth D with at most C combines per leaf (C from 1
 * to D), rows of randn, offset randn, sorted randn (subtrees over runs of sorted values have means far from the row's)
 * and sorted with a far outlier at one end; each row's outputs covered under variance=welford depth=D combine_depth=C.
 * The unbiased variance is counted where caught. */
START_TEST(welford_l8_trees) {
    er_test_reseed(345);
    long trials = (long)(24 * er_test_multiplier());
    enum { ROWS = 2 };
    static float x[ROWS * 4096], y[ROWS * 4096];
    static double xd[4096];
    int caught = 0;
    emu e;
    emu_init(&e, ER_FP32);
    mpfr_t t;
    mpfr_init2(t, 200);
    for (long tr = 0; tr < trials; tr++) {
        static const int ns[4] = {64, 256, 1024, 4096};
        int n = ns[tr % 4], kind = (int)((tr / 4) % 4), C = 1 + (int)(er_rand64() % 12), D = 1;
        while (welford_reach(D, C) < n) D++;
        D += (int)(er_rand64() % 40);
        if (C > D) C = D;
        for (int r = 0; r < ROWS; r++) {
            for (int j = 0; j < n; j++) xd[j] = (float)(er_rand_normal() + (kind == 1 ? 300.0 : 0.25));
            if (kind >= 2) qsort(xd, (size_t)n, sizeof xd[0], welford_cmp);
            if (kind == 3) xd[n - 1] = 64.0;
            for (int j = 0; j < n; j++) x[r * n + j] = (float)xd[j];
        }
        uint64_t seed = er_rand64();
        for (int bug = 0; bug < 2; bug++) {
            float mean[ROWS], rstd[ROWS];
            for (int r = 0; r < ROWS; r++) {
                for (int j = 0; j < n; j++) xd[j] = x[r * n + j];
                uint64_t keep = er_rng;
                er_rng = seed + (uint64_t)r; /* the same tree for the correct and the buggy row */
                wstate w = welford_tree(&e, t, xd, 0, n, D, C);
                er_rng = keep;
                welford_row_out(&e, t, x + r * n, n, w.M, w.S, bug ? n - 1 : n, y + r * n, &mean[r], &rstd[r]);
            }
            char opts[80];
            snprintf(opts, sizeof opts, "variance=welford depth=%d combine_depth=%d", D, C);
            int pass = layernorm_rows_pass(x, y, mean, rstd, ROWS, n, opts);
            if (bug) caught += !pass;
            else ck_assert_msg(pass, "trial %ld: a correct Welford tree (n %d, rows of kind %d) called wrong under %s" ER_SEED_MSG_FMT,
                               tr, n, kind, opts, ER_SEED_ARGS);
        }
    }
    mpfr_clear(t);
    emu_clear(&e);
    printf("Welford trees at depth D with C combines covered; the unbiased variance caught in %d of %ld\n", caught, trials);
}
END_TEST

/* rmsnorm from Welford's statistics, as torch's rowwise kernel computes it (rmsnorm.md, Theorem R2): random Welford
 * trees at depth D with C combines (welford_tree) give m and M2; ms = fl(fl(M2 / n) + fl(m m)), r = rsqrt(fl(ms + eps))
 * rounded, y = fl(x r). Rows of randn, randn offset by 300, sorted randn and sorted offset rows: every row covered under
 * variance=welford and either at depth=D combine_depth=C. The option was refused for rmsnorm before. */
START_TEST(rmsnorm_welford_form) {
    er_test_reseed(347);
    enum { ROWS = 2 };
    static float x[ROWS * 4096], y[ROWS * 4096];
    static double xd[4096];
    emu e;
    emu_init(&e, ER_FP32);
    mpfr_t t;
    mpfr_init2(t, 200);
    long trials = (long)(16 * er_test_multiplier());
    for (long tr = 0; tr < trials; tr++) {
        static const int ns[4] = {64, 256, 1023, 4096};
        int n = ns[tr % 4], kind = (int)((tr / 4) % 4), C = 1 + (int)(er_rand64() % 12), D = 1;
        while (welford_reach(D, C) < n) D++;
        D += (int)(er_rand64() % 20);
        if (C > D) C = D;
        for (int r = 0; r < ROWS; r++) {
            for (int j = 0; j < n; j++) xd[j] = (float)(er_rand_normal() + (kind & 1 ? 300.0 : 0.0));
            if (kind >= 2) qsort(xd, (size_t)n, sizeof xd[0], welford_cmp);
            wstate w = welford_tree(&e, t, xd, 0, n, D, C);
            mpfr_set_d(t, w.S, MPFR_RNDN);
            mpfr_div_ui(t, t, (unsigned long)n, MPFR_RNDN);
            double ms = emu_add(&e, emu_round(&e, t), emu_mul(&e, w.M, w.M));
            mpfr_set_d(t, emu_add(&e, ms, (double)1e-6f), MPFR_RNDN);
            mpfr_rec_sqrt(t, t, MPFR_RNDN);
            double rs = emu_round(&e, t);
            for (int j = 0; j < n; j++) { x[r * n + j] = (float)xd[j]; y[r * n + j] = (float)emu_mul(&e, xd[j], rs); }
        }
        er_tensor tx, ty;
        er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){ROWS, n}, NULL, x);
        er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){ROWS, n}, NULL, y);
        er_ref *ref;
        ck_assert_int_eq(er_rmsnorm(&ref, &tx, NULL, 1e-6), ER_OK);
        for (int v = 0; v < 2; v++) {
            char opts[96];
            snprintf(opts, sizeof opts, "variance=%s depth=%d combine_depth=%d", v ? "either" : "welford", D, C);
            er_standard st;
            ck_assert_msg(er_standard_parse(&st, "any_order", opts) == ER_OK, "%s", er_last_error());
            er_report rep;
            ck_assert_msg(er_covers(&rep, ref, &ty, &st) == ER_OK, "%s", er_last_error());
            ck_assert_msg(er_report_all(&rep), "trial %ld: an rmsnorm from Welford's statistics (n %d, rows of kind %d) called wrong "
                          "under %s" ER_SEED_MSG_FMT, tr, n, kind, opts, ER_SEED_ARGS);
            er_report_clear(&rep);
        }
        er_ref_free(ref);
    }
    mpfr_clear(t);
    emu_clear(&e);
}
END_TEST

/* torch's vectorized CUDA layer_norm (layer_norm_kernel.cu; rows of a multiple of 4 elements): 128 threads as 4
 * warps of 32, thread t updating its Welford state over the 4 elements of each vector t, t + 128, ... (mean +=
 * delta fl(1/count), m2 += delta (x - mean)), then torch's combines (coef = fl(1/count), mean = nA meanA + nB meanB,
 * m2 = m2A + m2B + delta^2 countA nB) in each warp's 5-level shfl_down tree and a 2-level tree over the warps; var =
 * m2 / n, rstd = 1/sqrt(var + eps) rounded, y = rstd (x - mean). Every fp32 operation rounded (the emulator); each
 * leaf's inner nodes counted (its first update, from an empty state, is exact). Returns the deepest count, and 1 in
 * *pass when y, mean and rstd pass under variance= and depth= the helper's depth, plus `more` options. The variance is
 * m2 / div (div n; n - 1 for the unbiased variance, a bug). */
static int torch_layer_norm_case(int n, int offset, const char *variance, int div, const char *more, int *pass) {
    enum { ROWS = 2, T = 128 };
    static float x[ROWS * 8192], y[ROWS * 8192];
    float mean[ROWS], rstd[ROWS];
    emu e;
    emu_init(&e, ER_FP32);
    mpfr_t t;
    mpfr_init2(t, 200);
    int deepest = 0;
    for (int r = 0; r < ROWS; r++) {
        for (int j = 0; j < n; j++) x[r * n + j] = (float)(er_rand_normal() + (offset ? 300.0 : 0.25));
        double M[T], S[T], C[T];
        int dep[T];
        for (int th = 0; th < T; th++) {
            M[th] = S[th] = C[th] = 0;
            dep[th] = -1;
            for (int v = th; v < n / 4; v += T)
                for (int k = 0; k < 4; k++) {
                    double xv = x[r * n + 4 * v + k];
                    double delta = emu_add(&e, xv, -M[th]);
                    C[th] += 1;
                    mpfr_set_ui(t, 1, MPFR_RNDN);
                    mpfr_div_d(t, t, C[th], MPFR_RNDN);
                    M[th] = emu_add(&e, M[th], emu_mul(&e, delta, emu_round(&e, t)));
                    S[th] = emu_add(&e, S[th], emu_mul(&e, delta, emu_add(&e, xv, -M[th])));
                    dep[th]++;
                }
            if (dep[th] < 0) dep[th] = 0;
        }
        /* combine(b, a) as torch writes it: the state b absorbs a */
#define ER_COMBINE(b, a) do {                                                                                        \
            double cnt = C[b] + C[a], d = emu_add(&e, M[b], -M[a]);                                                  \
            if (cnt > 0) {                                                                                           \
                mpfr_set_ui(t, 1, MPFR_RNDN);                                                                        \
                mpfr_div_d(t, t, cnt, MPFR_RNDN);                                                                    \
                double coef = emu_round(&e, t), nA = emu_mul(&e, C[a], coef), nB = emu_mul(&e, C[b], coef);          \
                double mn = emu_add(&e, emu_mul(&e, nA, M[a]), emu_mul(&e, nB, M[b]));                               \
                S[b] = emu_add(&e, emu_add(&e, S[a], S[b]), emu_mul(&e, emu_mul(&e, emu_mul(&e, d, d), C[a]), nB));  \
                M[b] = mn;                                                                                           \
            } else { M[b] = S[b] = 0; }                                                                              \
            C[b] = cnt;                                                                                              \
            dep[b] = (dep[b] > dep[a] ? dep[b] : dep[a]) + 1;                                                        \
        } while (0)
        for (int o = 16; o >= 1; o /= 2)
            for (int w = 0; w < T; w += 32)
                for (int l = 0; l + o < 32; l++) ER_COMBINE(w + l, w + l + o); /* lanes read old values in increasing order */
        for (int o = 2; o >= 1; o /= 2)
            for (int w = 0; w < o; w++) ER_COMBINE(w * 32, (w + o) * 32);
#undef ER_COMBINE
        if (dep[0] > deepest) deepest = dep[0];
        welford_row_out(&e, t, x + r * n, n, M[0], S[0], div, y + r * n, &mean[r], &rstd[r]);
    }
    mpfr_clear(t);
    emu_clear(&e);
    int64_t D;
    ck_assert_int_eq(er_depth_torch_layer_norm(&D, n), ER_OK);
    char opts[128];
    snprintf(opts, sizeof opts, "variance=%s depth=%lld %s", variance, (long long)D, more);
    *pass = layernorm_rows_pass(x, y, mean, rstd, ROWS, n, opts);
    return deepest;
}

/* er_depth_torch_layer_norm against the emulation of torch's vectorized kernel: the deepest leaf's count equals the
 * helper's depth (the vectorized kernel is the deeper of torch's two where n is a multiple of 4), and the rows are
 * covered under variance=welford and either at that depth; the helper's rowwise kernel (512 threads, then two
 * 5-level trees) where n is not a multiple of 4. */
START_TEST(torch_layer_norm_depth) {
    er_test_reseed(343);
    static const int ns[] = {8, 64, 512, 768, 1024, 2048, 4096};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
        for (int offset = 0; offset < 2; offset++)
            for (int v = 0; v < 2; v++) {
                int pass, d = torch_layer_norm_case(ns[k], offset, v ? "either" : "welford", ns[k], "", &pass);
                int64_t D;
                ck_assert_int_eq(er_depth_torch_layer_norm(&D, ns[k]), ER_OK);
                ck_assert_msg(d == D, "n %d: emulated depth %d, helper %lld", ns[k], d, (long long)D);
                ck_assert_msg(pass, "n %d, offset %d: torch's layer_norm called wrong under variance=%s depth=%lld", ns[k], offset,
                              v ? "either" : "welford", (long long)D);
            }
    int64_t D;
    ck_assert_int_eq(er_depth_torch_layer_norm(&D, 4096), ER_OK);
    ck_assert_int_eq(D, 38);
    ck_assert_int_eq(er_depth_torch_layer_norm(&D, 4099), ER_OK); /* rowwise: ceil(4099 / 512) - 1 + 10 */
    ck_assert_int_eq(D, 18);
    ck_assert_int_eq(er_depth_torch_layer_norm(&D, 0), ER_ERR_UNSUPPORTED);
    ck_assert_int_eq(er_depth_torch_layer_norm(NULL, 8), ER_ERR_NULL);
}
END_TEST

/* Theorem L8 (layernorm.md) at torch's shape: its correct rows covered, and the unbiased variance (which moves rstd by
 * about 1/(2n)) caught in every row under variance=either at the helper's depth and combine_depth (n up to 8192), and
 * at its depth alone up to n = 4096, as a two-pass kernel's is at the same depth. */
START_TEST(torch_layer_norm_tight) {
    er_test_reseed(344);
    static const int ns[] = {256, 1024, 2048, 4096, 8192};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int n = ns[k], pass;
        int64_t C;
        ck_assert_int_eq(er_combine_depth_torch_layer_norm(&C, n), ER_OK);
        char more[48];
        snprintf(more, sizeof more, "combine_depth=%lld", (long long)C);
        for (int offset = 0; offset < 2; offset++) {
            torch_layer_norm_case(n, offset, "either", n, more, &pass);
            ck_assert_msg(pass, "n %d, offset %d: torch's layer_norm called wrong under %s", n, offset, more);
        }
        torch_layer_norm_case(n, 0, "either", n - 1, more, &pass);
        ck_assert_msg(!pass, "n %d: the unbiased variance passed under variance=either %s", n, more);
        if (n <= 4096) {
            torch_layer_norm_case(n, 0, "either", n - 1, "", &pass);
            ck_assert_msg(!pass, "n %d: the unbiased variance passed under variance=either at torch's depth", n);
        }
    }
    int64_t C;
    ck_assert_int_eq(er_combine_depth_torch_layer_norm(&C, 4096), ER_OK);
    ck_assert_int_eq(C, 10);
    ck_assert_int_eq(er_combine_depth_torch_layer_norm(&C, 0), ER_ERR_UNSUPPORTED);
    ck_assert_int_eq(er_combine_depth_torch_layer_norm(NULL, 8), ER_ERR_NULL);
}
END_TEST

/* layernorm two_pass with depth=D: Triton-shaped trees (4 warps: depth n/128 + 6) are covered; the unbiased
 * variance and rstd = 1/(sqrt(v) + eps), which any_order's two-pass set allows at n = 4096, are caught. */
START_TEST(layernorm_depth) {
    er_test_reseed(330);
    long trials = er_test_trials(6, 3); /* n = 4096 once at least */
    int caught_unb = 0, caught_rstd = 0, missed_any = 0;
    for (long tr = 0; tr < trials; tr++) {
        static const int ns[3] = {256, 1024, 4096};
        int n = ns[tr % 3], D = n / 128 + 6;
        char opts[64];
        snprintf(opts, sizeof opts, "variance=two_pass depth=%d", D);
        ck_assert_msg(layernorm_depth_case(n, D, 0, 0, opts), "trial %ld: a correct two-pass layernorm (n %d, depth %d) was called wrong"
                      ER_SEED_MSG_FMT, tr, n, D, ER_SEED_ARGS);
        if (n == 4096) {
            caught_unb += !layernorm_depth_case(n, D, 1, 0, opts);
            caught_rstd += !layernorm_depth_case(n, D, 0, 1, opts);
            missed_any += layernorm_depth_case(n, D, 1, 0, "variance=two_pass") + layernorm_depth_case(n, D, 0, 1, "variance=two_pass");
        }
    }
    printf("layernorm two_pass with depth: correct trees covered; at n = 4096 the unbiased variance caught %d times, "
           "1/(sqrt(v) + eps) %d times, both passing any_order's two-pass set %d times of %d\n", caught_unb, caught_rstd,
           missed_any, 2 * caught_unb);
    ck_assert_int_eq(caught_unb, (int)((trials + 2) / 3));
    ck_assert_int_eq(caught_rstd, (int)((trials + 2) / 3));
}
END_TEST

/* The sign of a zero result (orders.md, "Zeros"): er_emulate starts each accumulator at +0 (init=zero) or at its first
 * term (init=first, the same as -0), as a C loop does with `float acc = 0.0f` or `-0.0f`. Operands drawn from zeros of
 * both signs, tiny values whose products underflow to a signed zero, and small integers that cancel; sequential,
 * blocked:B and split:S, fused or not: bit for bit, the sign of zero included. */
START_TEST(zero_sign_conventions) {
    er_test_reseed(320);
    static const float vals[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1.0f, -1.0f, 2.0f, 0x1p-140f};
    long trials = (long)(2000 * er_test_multiplier()), neg = 0;
    for (long tr = 0; tr < trials; tr++) {
        int K = (int)er_rand_int(1, 12), order = (int)(er_rand64() % 3), first = (int)(er_rand64() & 1), fused = (int)(er_rand64() & 1);
        int B = (int)er_rand_int(1, 4);
        float a[12], b[12];
        for (int k = 0; k < K; k++) { a[k] = vals[er_rand64() % 8]; b[k] = vals[er_rand64() % 8]; }
        float z = first ? -0.0f : 0.0f, want;
        if (order == 0) {
            float acc = z;
            for (int k = 0; k < K; k++) acc = fused ? fmaf(a[k], b[k], acc) : acc + a[k] * b[k];
            want = acc;
        } else {
            int chunk = order == 1 ? B : (K + B - 1) / B;
            float tot = z;
            for (int k0 = 0; k0 < K; k0 += chunk) {
                float part = z;
                for (int k = k0; k < K && k < k0 + chunk; k++) part = fused ? fmaf(a[k], b[k], part) : part + a[k] * b[k];
                tot = tot + part;
            }
            want = tot;
        }
        er_tensor tA, tB, tE;
        float got = 7;
        er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){1, K}, NULL, a);
        er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){K, 1}, NULL, b);
        er_tensor_view(&tE, ER_FP32, 2, (int64_t[]){1, 1}, NULL, &got);
        char ord[32], opts[64];
        snprintf(ord, sizeof ord, order == 0 ? "sequential" : order == 1 ? "blocked:%d" : "split:%d", B);
        snprintf(opts, sizeof opts, "fma=%s init=%s", fused ? "always" : "never", first ? "first" : "zero");
        er_ref *ref;
        ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
        er_standard st;
        ck_assert_int_eq(er_standard_parse(&st, ord, opts), ER_OK);
        ER_REQUIRE(er_emulate(ref, &tE, &st) == ER_OK, "%s", er_last_error());
        ER_REQUIRE(memcmp(&got, &want, 4) == 0, "trial %ld (%s %s, K %d): emulate %a, the loop %a" ER_SEED_MSG_FMT, tr, ord, opts,
                   K, (double)got, (double)want, ER_SEED_ARGS);
        neg += want == 0 && signbit(want);
        er_ref_free(ref);
    }
    printf("zero signs: %ld emulations equal C loops bit for bit, %ld of them -0\n", trials, neg);
    ck_assert_int_gt(neg, 0);
    er_standard st;
    ck_assert_int_eq(er_standard_parse(&st, "any_order", "init=first"), ER_ERR_STANDARD);
    ck_assert_int_eq(er_standard_parse(&st, "sequential", "init=later"), ER_ERR_STANDARD);
}
END_TEST


/* ---- tree: a written tree against the kernel's own float arithmetic ---- */

/* The tree's value in float: mode 0 a sum of x (b NULL), 1 products rounded then added, 2 fused by tree:'s rule (an
 * addition of a product and a subtree fuses the product; of two products, the lower element's is rounded and the
 * other fused). */
static float tree_eval(const tnode *nd, int K, int v, const float *a, const float *b, int mode) {
    if (v < K) return b ? (float)((double)a[v] * b[v]) : a[v];
    int l = nd[v - K].l, r = nd[v - K].r;
    if (mode == 2 && (l < K || r < K)) {
        if (l < K && r < K) {
            int lo = l < r ? l : r, hi = l < r ? r : l;
            return fmaf(a[hi], b[hi], (float)((double)a[lo] * b[lo]));
        }
        int e = l < K ? l : r;
        return fmaf(a[e], b[e], tree_eval(nd, K, l < K ? r : l, a, b, mode));
    }
    volatile float x = tree_eval(nd, K, l, a, b, mode), y = tree_eval(nd, K, r, a, b, mode);
    return x + y;
}

/* The one output of a row's sum (mode 0, shape [1]) or of a 1 x K by K x 1 matmul ([1, 1]). */
static void out_view(er_tensor *t, int mode, float *y) {
    if (mode) er_tensor_view(t, ER_FP32, 2, (int64_t[]){1, 1}, NULL, y);
    else er_tensor_view(t, ER_FP32, 1, (int64_t[]){1}, NULL, y);
}

/* Random trees over 1 to 300 elements (random splits, chains both ways, balanced; elements permuted), written out:
 * er_emulate gives the float loop's sum bit for bit, and the matmul's dot product under fma=never and fma=always; under
 * fma=either both are covered; the next float up is not covered; the canonical rendering parses back to the same
 * outputs, and a chain renders as (0*K+1) and emulates as sequential does. */
START_TEST(tree_order_matches_a_float_loop) {
    er_test_reseed(347);
    enum { KMAX = 300 };
    static tnode nd[KMAX];
    static int perm[KMAX];
    static float a[KMAX], b[KMAX];
    static char text[16 * KMAX + 16], order[16 * KMAX + 32], canon[16 * KMAX + 128];
    long trials = (long)(400 * er_test_multiplier()), shapes[4] = {0};
    for (long tr = 0; tr < trials; tr++) {
        int K = (int)er_rand_int(1, tr % 7 == 0 ? KMAX : 40), shape = (int)(er_rand64() % 4), nn = 0;
        for (int i = 0; i < K; i++) perm[i] = i;
        if (er_rand64() % 3)
            for (int i = K - 1; i > 0; i--) { int j = (int)er_rand_int(0, i), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
        int root = tree_build(nd, &nn, K, perm, 0, K, shape);
        shapes[shape]++;
        size_t len = 0;
        text[0] = '\0';
        tree_text(nd, K, root, text, &len);
        snprintf(order, sizeof order, "tree:%s", text);
        for (int i = 0; i < K; i++) {
            a[i] = (float)(er_rand_normal() * ldexp(1.0, (int)er_rand_int(-20, 20)));
            b[i] = (float)(er_rand_normal() * ldexp(1.0, (int)er_rand_int(-8, 8)));
        }
        er_tensor tx, tA, tB, to;
        float got, want;
        er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, K}, NULL, a);
        er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){1, K}, NULL, a);
        er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){K, 1}, NULL, b);
        er_ref *sum, *mm;
        ck_assert_int_eq(er_sum(&sum, &tx, 1), ER_OK);
        ck_assert_int_eq(er_matmul(&mm, &tA, &tB), ER_OK);
        er_standard st;
        for (int mode = 0; mode < 3; mode++) {
            er_ref *ref = mode ? mm : sum;
            want = tree_eval(nd, K, root, a, mode ? b : NULL, mode);
            ER_REQUIRE(er_standard_parse(&st, order, mode == 2 ? "fma=always" : "fma=never") == ER_OK, "%s: %s", order,
                       er_last_error());
            out_view(&to, mode, &got);
            ER_REQUIRE(er_emulate(ref, &to, &st) == ER_OK, "%s", er_last_error());
            ER_REQUIRE(memcmp(&got, &want, 4) == 0, "trial %ld mode %d, %s: emulated %a, the loop %a" ER_SEED_MSG_FMT, tr,
                       mode, order, (double)got, (double)want, ER_SEED_ARGS);
            /* the canonical text names the same tree */
            size_t need;
            ck_assert_int_eq(er_standard_format(&st, canon, sizeof canon, &need), ER_OK);
            er_standard st2;
            ER_REQUIRE(er_standard_parse(&st2, canon, NULL) == ER_OK, "%s: %s", canon, er_last_error());
            ck_assert_int_eq(er_emulate(ref, &to, &st2), ER_OK);
            ER_REQUIRE(memcmp(&got, &want, 4) == 0, "trial %ld: %s renders as %s, which emulates %a, not %a", tr, order,
                       canon, (double)got, (double)want);
            /* the kernel's output is covered under fma=either, its neighbour is not under its own fma */
            float outs[2] = {want, nextafterf(want, INFINITY)};
            out_view(&to, mode, outs);
            er_report rep;
            ck_assert_int_eq(er_standard_parse(&st2, order, "fma=either"), ER_OK);
            ck_assert_int_eq(er_covers(&rep, ref, &to, &st2), ER_OK);
            ER_REQUIRE(er_report_all(&rep), "trial %ld mode %d: %s fma=either does not cover %a", tr, mode, order,
                       (double)want);
            er_report_clear(&rep);
            out_view(&to, mode, outs + 1);
            ck_assert_int_eq(er_covers(&rep, ref, &to, &st), ER_OK);
            ER_REQUIRE(!er_report_all(&rep), "trial %ld mode %d: %s covers %a beside the kernel's %a", tr, mode, order,
                       (double)outs[1], (double)want);
            er_report_clear(&rep);
        }
        if (shape == 1 && perm[0] == 0 && K > 2) { /* unpermuted chains: (0*K+1), as sequential adds */
            int sorted = 1;
            for (int i = 0; i < K; i++) sorted &= perm[i] == i;
            char want_text[64];
            snprintf(want_text, sizeof want_text, "tree:(0*%d+1) ", K);
            ck_assert_int_eq(er_standard_format(&st, canon, sizeof canon, NULL), ER_OK);
            if (sorted) {
                ER_REQUIRE(strncmp(canon, want_text, strlen(want_text)) == 0, "%s renders as %s", order, canon);
                float seq;
                er_standard sq;
                ck_assert_int_eq(er_standard_parse(&sq, "sequential", "fma=never"), ER_OK);
                out_view(&to, 0, &seq);
                ck_assert_int_eq(er_emulate(sum, &to, &sq), ER_OK);
                want = tree_eval(nd, K, root, a, NULL, 0);
                ER_REQUIRE(memcmp(&seq, &want, 4) == 0, "%s and sequential differ", canon);
            }
        }
        er_ref_free(sum);
        er_ref_free(mm);
    }
    printf("tree: %ld trees (%ld random, %ld chains, %ld reversed chains, %ld balanced) emulated bit for bit\n", trials,
           shapes[0], shapes[1], shapes[2], shapes[3]);
    for (int k = 0; k < 4; k++) ck_assert_int_gt(shapes[k], 0);
}
END_TEST

/* A tree's text: what it refuses, and where. */
START_TEST(tree_refusals) {
    static const char *const bad[][2] = {
        {"tree:(0)", "two items or more"},
        {"tree:(0 0)", "named twice"},
        {"tree:(0 2)", "element 2 named, but the tree has 2"},
        {"tree:0*2+1", "inside ( )"},
        {"tree:(0 1", "expected an element's index"},
        {"tree:(0 1)x", "ends before it"},
        {"tree:(0*3)", "sign is missing"},
        {"tree:(0*0+1)", "a count from 1"},
        {"tree:(0*2000000+1)", "a count from 1"},
        {"tree:((0*512+1)*513+512)", "more than 2^18 elements"},
        {"tree:(1*2-2)", "out of 0 .. 2^18 - 1"},
        {"tree:(0 1) init=first", "init= applies"},
        {"tree:(0 1) depth=2", "depth= bounds the tree of any_order"},
        {"tree:", "expected an element's index or '('"},
        {"tree:(9999999 1)", "at most 2^18 - 1"},
    };
    er_standard st, keep;
    memset(&st, 0x5c, sizeof st);
    keep = st;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(er_standard_parse(&st, bad[i][0], NULL), ER_ERR_STANDARD);
        ER_REQUIRE(strstr(er_last_error(), bad[i][1]) != NULL, "%s: '%s' does not say '%s'", bad[i][0], er_last_error(),
                   bad[i][1]);
        ck_assert_int_eq(memcmp(&st, &keep, sizeof st), 0);
    }
    /* a tree of K elements against a reduction of another length */
    float x[5] = {1, 2, 3, 4, 5}, y;
    er_tensor tx, to;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, 5}, NULL, x);
    er_tensor_view(&to, ER_FP32, 1, (int64_t[]){1}, NULL, &y);
    er_ref *ref;
    ck_assert_int_eq(er_sum(&ref, &tx, 1), ER_OK);
    ck_assert_int_eq(er_standard_parse(&st, "tree:(0*4+1)", NULL), ER_OK);
    ck_assert_int_eq(er_emulate(ref, &to, &st), ER_ERR_STANDARD);
    ER_REQUIRE(strstr(er_last_error(), "the tree has 4 elements; the reduction has K = 5") != NULL, "%s", er_last_error());
    /* a hand-built standard: the text is required for tree: and refused elsewhere */
    ck_assert_int_eq(er_standard_init(&st), ER_OK);
    st.order = ER_ORDER_TREE;
    ck_assert_int_eq(er_standard_validate(&st), ER_ERR_STANDARD);
    st.tree = "(0*5+1)";
    ck_assert_int_eq(er_standard_validate(&st), ER_OK);
    ck_assert_int_eq(er_emulate(ref, &to, &st), ER_OK);
    ck_assert(y == 15.0f);
    st.order = ER_ORDER_SEQUENTIAL;
    ck_assert_int_eq(er_standard_validate(&st), ER_ERR_STANDARD);
    er_ref_free(ref);
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
    tcase_add_test(tc, depth_bounded_trees);
    tcase_add_test(tc, zero_sign_conventions);
    tcase_add_test(tc, layernorm_depth);
    tcase_add_test(tc, welford_depth);
    tcase_add_test(tc, triton_sum_depth);
    tcase_add_test(tc, torch_softmax_depth);
    tcase_add_test(tc, torch_softmax_block_depth);
    tcase_add_test(tc, torch_layer_norm_depth);
    tcase_add_test(tc, torch_layer_norm_tight);
    tcase_add_test(tc, welford_l8_trees);
    tcase_add_test(tc, triton_order_matches_a_float_loop);
    tcase_add_test(tc, rmsnorm_welford_form);
    tcase_add_test(tc, cub_block_reduce_depth);
    tcase_add_test(tc, tree_order_matches_a_float_loop);
    tcase_add_test(tc, tree_refusals);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
