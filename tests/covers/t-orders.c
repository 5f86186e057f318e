/* t-orders.c: the standards against independent emulations of correct implementations.
 * Each trial draws a standard (sequential, blocked:B, split:S, pairwise, and any_order with the options the
 * any-order fuzz does not draw: tf32 inputs, faithful rounding; fma never/always/either; inner and
 * outer orders; fp16/bf16/fp32 partials; compute fp32/fp16/bf16/fp64/tf32 with truncation or rna; round to
 * nearest or faithful), draws inputs from the adversarial families, and runs an implementation of that
 * standard in the test's own emulator (every operation rounded by MPFR; every choice the standard leaves
 * free drawn at random). exactref must cover it, and for a fully fixed standard er_emulate must return the
 * implementation's output bit for bit. */
#include "../common/er_gen.h"

static const er_format computes[] = {ER_FP32, ER_FP16, ER_BF16, ER_FP64, ER_TF32};
static const er_format inputs[] = {ER_FP16, ER_BF16, ER_FP32, ER_FP8_E4M3FN, ER_FP64};
static const er_format outputs[] = {ER_FP32, ER_FP16, ER_BF16, ER_FP64};
static const er_format partials[] = {ER_FP16, ER_BF16, ER_FP32};

static double pw(emu *e, const double *p, int n);

typedef struct trial {
    er_standard std;
    er_format acc;      /* accumulator format (fp32 for tf32) */
    int fma_mode;       /* 0 never, 1 always, 2 either */
} trial;

/* The test's own implementation of the standard on a, b (already converted for tf32). */
static double implement(const trial *t, emu *e, emu *ep, const double *a, const double *b, int K) {
    const er_standard *s = &t->std;
    if (s->order == ER_ORDER_ANY) return emu_dot_random(e, a, b, K, t->fma_mode);
    if (s->order == ER_ORDER_SEQUENTIAL) {
        double acc = 0.0;
        for (int k = 0; k < K; k++) acc = emu_step(e, acc, a[k], b[k], t->fma_mode);
        return acc;
    }
    if (s->order == ER_ORDER_PAIRWISE) {
        double *p = malloc(sizeof(double) * (size_t)(K ? K : 1));
        for (int k = 0; k < K; k++) p[k] = emu_mul(e, a[k], b[k]);
        double r = pw(e, p, K); /* numpy's pairwise sum, written from its description */
        free(p);
        return r;
    }
    int64_t chunk = s->order == ER_ORDER_BLOCKED ? s->block : (K + s->split - 1) / s->split;
    if (chunk < 1) chunk = 1;
    if (s->carry_fused) { /* the running total is one more term of each block's sum */
        double acc = 0.0;
        for (int k0 = 0; k0 < K; k0 += (int)chunk) {
            int n = (int)(K - k0 < chunk ? K - k0 : chunk);
            if (s->inner == ER_SUB_ANY) acc = emu_dot_random_init(e, a + k0, b + k0, n, t->fma_mode, 1, acc);
            else for (int k = 0; k < n; k++) acc = emu_step(e, acc, a[k0 + k], b[k0 + k], t->fma_mode);
        }
        return acc;
    }
    int nparts = K ? (int)((K + chunk - 1) / chunk) : 0;
    double *parts = malloc(sizeof(double) * (size_t)(nparts ? nparts : 1));
    for (int j = 0; j < nparts; j++) {
        int k0 = (int)(j * chunk), n = (int)(K - k0 < chunk ? K - k0 : chunk);
        if (s->inner == ER_SUB_ANY) parts[j] = emu_dot_random(e, a + k0, b + k0, n, t->fma_mode);
        else {
            double acc = 0.0;
            for (int k = 0; k < n; k++) acc = emu_step(e, acc, a[k0 + k], b[k0 + k], t->fma_mode);
            parts[j] = acc;
        }
        if (s->order == ER_ORDER_SPLIT && s->partial != ER_FORMAT_INVALID && s->partial != t->acc) {
            mpfr_set_d(ep->t, parts[j], MPFR_RNDN);
            parts[j] = isnan(parts[j]) ? NAN : emu_round(ep, ep->t);
        }
    }
    emu *g = s->order == ER_ORDER_SPLIT ? ep : e; /* partials are combined in their own format */
    double r;
    if (s->outer == ER_SUB_ANY) r = emu_sum_random(g, parts, nparts);
    else {
        r = 0.0;
        for (int j = 0; j < nparts; j++) r = emu_add(g, r, parts[j]);
    }
    free(parts);
    return r;
}

static double pw(emu *e, const double *p, int n) {
    if (n < 8) {
        double res = 0.0;
        for (int i = 0; i < n; i++) res = emu_add(e, res, p[i]);
        return res;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; j++) r[j] = p[j];
        int i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] = emu_add(e, r[j], p[i + j]);
        double res = emu_add(e, emu_add(e, emu_add(e, r[0], r[1]), emu_add(e, r[2], r[3])),
                             emu_add(e, emu_add(e, r[4], r[5]), emu_add(e, r[6], r[7])));
        for (; i < n; i++) res = emu_add(e, res, p[i]);
        return res;
    }
    int n2 = n / 2;
    n2 -= n2 % 8;
    double x = pw(e, p, n2);
    double y = pw(e, p + n2, n - n2);
    return emu_add(e, x, y);
}

static void draw(trial *t) {
    er_standard *s = &t->std;
    er_standard_init(s);
    int kind = (int)(er_rand64() % 5);
    s->order = kind == 0 ? ER_ORDER_SEQUENTIAL : kind == 1 ? ER_ORDER_BLOCKED : kind == 2 ? ER_ORDER_SPLIT
             : kind == 3 ? ER_ORDER_PAIRWISE : ER_ORDER_ANY;
    s->compute = computes[er_rand64() % 5];
    if (s->compute == ER_TF32) s->tf32 = (er_tf32_conv)(er_rand64() & 1);
    t->acc = s->compute == ER_TF32 ? ER_FP32 : s->compute;
    t->fma_mode = (int)(er_rand64() % 3);
    if (s->order == ER_ORDER_PAIRWISE && t->fma_mode == 1) t->fma_mode = 0;
    s->fma = t->fma_mode == 0 ? ER_FMA_NEVER : t->fma_mode == 1 ? ER_FMA_ALWAYS : ER_FMA_EITHER;
    if (s->order == ER_ORDER_PAIRWISE) t->fma_mode = 0; /* pairwise adds finished products */
    s->rounding = er_rand64() % 4 == 0 ? ER_RND_FAITHFUL : ER_RND_NEAREST;
    if (s->order == ER_ORDER_BLOCKED) s->block = er_rand_int(1, 40);
    if (s->order == ER_ORDER_SPLIT) {
        s->split = er_rand_int(1, 9);
        if (er_rand64() % 3 == 0) s->partial = partials[er_rand64() % 3];
    }
    if (s->order == ER_ORDER_BLOCKED || s->order == ER_ORDER_SPLIT) {
        s->inner = (er_suborder)(er_rand64() % 3 == 0);
        s->outer = (er_suborder)(er_rand64() % 3 == 0);
    }
    if (s->order == ER_ORDER_BLOCKED && er_rand64() % 3 == 0) {
        s->carry_fused = 1;
        s->outer = ER_SUB_SEQUENTIAL;
        if (er_rand64() & 1) s->inner = ER_SUB_ANY;
    }
}

START_TEST(fixed_orders_are_sound_and_emulated) {
    er_test_reseed(300);
    long trials = (long)(20000 * er_test_multiplier());
    long fixed = 0, matched = 0, counts[ER_CLASS_COUNT] = {0};
    for (long tr = 0; tr < trials; tr++) {
        trial t;
        draw(&t);
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
        /* tf32: the implementation converts wide operands first (the test's own MPFR rounding) */
        mpfr_t x;
        mpfr_init2(x, 64);
        for (int k = 0; k < K; k++) {
            ca[k] = a[k];
            cb[k] = b[k];
            if (t.std.compute != ER_TF32) continue;
            mpfr_rnd_t r = t.std.tf32 == ER_TF32_RNA ? MPFR_RNDNA : MPFR_RNDZ;
            if (er_format_precision(fa) > 11) { mpfr_set_d(x, a[k], MPFR_RNDN); ca[k] = er_oracle_round(ER_TF32, x, r, ER_OVERFLOW_IEEE); }
            if (er_format_precision(fb) > 11) { mpfr_set_d(x, b[k], MPFR_RNDN); cb[k] = er_oracle_round(ER_TF32, x, r, ER_OVERFLOW_IEEE); }
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

int main(void) {
    Suite *s = suite_create("orders");
    TCase *tc = tcase_create("orders");
    tcase_set_timeout(tc, 3600);
    tcase_add_test(tc, fixed_orders_are_sound_and_emulated);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
