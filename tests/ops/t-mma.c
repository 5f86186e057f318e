/* t-mma.c: the mma:<arch> standards against real H200 tensor-core outputs (tools/capture/capture_mma.py,
 * tests/data/mma.*). Triton's acc += tl.dot chains (fp16, bf16, tf32) are reproduced bit for bit by the
 * mma:sm90 emulation; cuBLAS outputs, whose block order is unknown, lie in the mma:sm90 outer=any set. The block
 * model is also checked against an independent implementation in this file (exact rational arithmetic in MPFR),
 * and the any-order set against random chains and splits of blocks. */
#include "../common/er_gen.h"
#include "../common/npz.h"

#ifndef ER_TEST_DATA_DIR
#define ER_TEST_DATA_DIR "tests/data"
#endif

typedef struct mma_case { char id[16], kernel[48], dtype[8], extra[48]; int K, BK; } mma_case;

static int next_case(FILE *f, mma_case *c) {
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        if (sscanf(line, "%15s %47s %7s %d %d %47s", c->id, c->kernel, c->dtype, &c->K, &c->BK, c->extra) == 6) return 1;
    }
    return 0;
}

static const npy_array *arr(const npz_file *z, const char *id, const char *part) {
    char key[64];
    snprintf(key, sizeof key, "%s__%s", id, part);
    const npy_array *a = npz_find(z, key);
    ck_assert_msg(a != NULL, "missing %s", key);
    return a;
}

/* covers A @ B against C under `order options`; returns the report (caller clears). */
static er_report check(const er_tensor *A, const er_tensor *B, const er_tensor *C, const char *order, const char *options) {
    er_report rep;
    ck_assert_msg(er_matmul_covers(&rep, A, B, C, order, options) == ER_OK, "%s %s: %s", order, options, er_last_error());
    return rep;
}

/* er_emulate of ref under std into C's format and shape: how many outputs equal C's bit for bit. */
static long long emulate_same(er_ref *ref, const er_tensor *C, const er_standard *std) {
    int64_t n = C->shape[0] * C->shape[1];
    size_t isz = (size_t)(er_format_storage_bits(C->format) / 8);
    char *em = calloc((size_t)n, isz);
    er_tensor E;
    er_tensor_view(&E, C->format, 2, C->shape, NULL, em);
    ck_assert_msg(er_emulate(ref, &E, std) == ER_OK, "%s", er_last_error());
    long long same = 0;
    for (int64_t i = 0; i < n; i++) same += memcmp(em + i * isz, (const char *)C->data + i * isz, isz) == 0;
    free(em);
    return same;
}

START_TEST(h200_tensor_core_outputs) {
    npz_file z;
    FILE *f = open_cases(&z, ER_TEST_DATA_DIR "/mma.npz", ER_TEST_DATA_DIR "/mma.txt");
    mma_case c;
    int chains = 0, cublas = 0, rn_fail = 0, faithful_fail = 0, stride = er_test_stride(), cases = 0;
    long long emulated = 0, identical = 0, cub_elems = 0;
    while (next_case(f, &c)) {
        if (strncmp(c.kernel, "scaled_mm", 9) == 0) continue; /* t-scaled.c */
        int is_chain = strcmp(c.kernel, "triton_tl.dot_chain") == 0;
        chains += is_chain;
        cublas += !is_chain;
        if (cases++ % stride) continue; /* counted; a sanitizer run checks every stride-th case */
        er_tensor A, B, C;
        ck_assert(npz_view(&A, arr(&z, c.id, "in__A")) && npz_view(&B, arr(&z, c.id, "in__B")) && npz_view(&C, arr(&z, c.id, "out__C")));
        int tf32 = strcmp(c.dtype, "tf32") == 0;
        const char *opts = tf32 ? "compute=tf32 tf32=truncate" : "";
        if (is_chain) {
            /* the one chain in K order: emulate it and compare bit for bit */
            er_ref *ref;
            ck_assert_int_eq(er_matmul(&ref, &A, &B), ER_OK);
            er_standard std;
            ck_assert_int_eq(er_standard_parse(&std, "mma:sm90", opts), ER_OK);
            ck_assert(er_standard_is_fixed(&std, A.format, B.format));
            int64_t n = C.shape[0] * C.shape[1];
            long long same = emulate_same(ref, &C, &std);
            ck_assert_msg(same == n, "%s (%s, K %d, BK %d, %s): the mma:sm90 chain reproduces %lld of %lld outputs", c.id,
                          c.dtype, c.K, c.BK, c.extra, same, (long long)n);
            emulated += n;
            identical += same;
            er_report rep;
            ck_assert_int_eq(er_covers(&rep, ref, &C, &std), ER_OK);
            ck_assert(er_report_all(&rep));
            er_report_clear(&rep);
            er_ref_free(ref);
        } else {
            cub_elems += C.shape[0] * C.shape[1];
        }
        /* every tensor-core output lies in the mma:sm90 outer=any set */
        er_report rep = check(&A, &B, &C, "mma:sm90", tf32 ? "outer=any compute=tf32 tf32=truncate" : "outer=any");
        if (!er_report_all(&rep)) {
            char text[4096];
            er_report_text(&rep, text, sizeof text, NULL);
            ck_abort_msg("%s (%s, %s, K %d, %s) outside mma:sm90 outer=any:\n%s", c.id, c.kernel, c.dtype, c.K, c.extra, text);
        }
        er_report_clear(&rep);
        /* how the round-to-nearest and faithful any-order sets fare on the same outputs (measured, printed) */
        rep = check(&A, &B, &C, "any_order", opts);
        rn_fail += !er_report_all(&rep);
        er_report_clear(&rep);
        rep = check(&A, &B, &C, "any_order", tf32 ? "rounding=faithful compute=tf32 tf32=truncate" : "rounding=faithful");
        faithful_fail += !er_report_all(&rep);
        er_report_clear(&rep);
    }
    fclose(f);
    npz_free(&z);
    printf("H200 tensor cores: %d Triton tl.dot chains reproduced bit for bit by mma:sm90 (%lld of %lld outputs); %d cuBLAS "
           "cases (%lld outputs) and the chains all inside mma:sm90 outer=any; outside the round-to-nearest any-order "
           "set: %d cases, outside the faithful one: %d\n", chains, identical, emulated, cublas, cub_elems, rn_fail, faithful_fail);
    ck_assert_int_eq(chains, 72);
    ck_assert_int_eq(cublas, 24);
}
END_TEST

/* The earlier captures (tests/data/orders.*): Triton acc += tl.dot with fp32 and with fp16 accumulators are the
 * mma:sm90 chain (compute=fp16 for the latter) bit for bit, over masked K tails too; cuBLAS fp32 with TF32 on lies in
 * mma:sm90 outer=any compute=tf32 tf32=rne, and mostly not with tf32=truncate. */
START_TEST(h200_orders_under_mma) {
    npz_file z;
    FILE *f = open_cases(&z, ER_TEST_DATA_DIR "/orders.npz", ER_TEST_DATA_DIR "/orders.txt");
    char line[512], id[32], kernel[64];
    int chains = 0, tf32 = 0, trunc_outside = 0, fp16_vs_fp32 = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%31s %63s", id, kernel) != 2) continue;
        int acc16 = strcmp(kernel, "triton_tl.dot_acc_fp16") == 0, acc32 = strcmp(kernel, "triton_tl.dot_acc_fp32_bk32") == 0;
        int tf = strcmp(kernel, "cublas_fp32_tf32") == 0;
        if (!acc16 && !acc32 && !tf) continue;
        er_tensor A, B, C;
        ck_assert(npz_view(&A, arr(&z, id, "in__A")) && npz_view(&B, arr(&z, id, "in__B")) && npz_view(&C, arr(&z, id, "out__C")));
        if (tf) {
            er_report rep = check(&A, &B, &C, "mma:sm90", "outer=any compute=tf32 tf32=rne");
            ck_assert_msg(er_report_all(&rep), "%s: cuBLAS TF32 outside mma:sm90 outer=any compute=tf32 tf32=rne", id);
            er_report_clear(&rep);
            rep = check(&A, &B, &C, "mma:sm90", "outer=any compute=tf32 tf32=truncate");
            trunc_outside += !er_report_all(&rep);
            er_report_clear(&rep);
            tf32++;
            continue;
        }
        er_ref *ref;
        ck_assert_int_eq(er_matmul(&ref, &A, &B), ER_OK);
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, "mma:sm90", acc16 ? "compute=fp16" : ""), ER_OK);
        ck_assert_msg(emulate_same(ref, &C, &std) == C.shape[0] * C.shape[1], "%s (%s): not the mma:sm90 chain", id, kernel);
        if (acc16) {
            er_report rep = check(&A, &B, &C, "mma:sm90", "outer=any compute=fp16");
            ck_assert(er_report_all(&rep));
            er_report_clear(&rep);
            rep = check(&A, &B, &C, "mma:sm90", "outer=any");
            fp16_vs_fp32 += !er_report_all(&rep);
            er_report_clear(&rep);
        }
        er_ref_free(ref);
        chains++;
    }
    fclose(f);
    npz_free(&z);
    printf("earlier H200 captures: %d Triton chains (fp32 and fp16 accumulators) equal to the mma:sm90 chain; %d cuBLAS TF32 "
           "cases inside mma:sm90 outer=any tf32=rne (%d outside with tf32=truncate); %d fp16-accumulator cases caught "
           "under the fp32-accumulator claim\n", chains, tf32, trunc_outside, fp16_vs_fp32);
    ck_assert_int_eq(chains, 32);
    ck_assert_int_eq(tf32, 12);
    ck_assert_int_gt(trunc_outside, 0);
}
END_TEST

/* torch._scaled_mm on e4m3 inputs (per-tensor scales 0.5 and 0.125): use_fast_accum=True keeps the whole K chain in
 * the tensor core's e8m13 accumulator, covered by mma:sm90 outer=any; use_fast_accum=False adds into fp32 every few
 * blocks, covered by promote=4. Neither is covered by an fp32 any-order set on all-positive data. */
START_TEST(h200_scaled_mm) {
    npz_file z;
    FILE *f = open_cases(&z, ER_TEST_DATA_DIR "/mma.npz", ER_TEST_DATA_DIR "/mma.txt");
    mma_case c;
    int cases = 0, fp32_outside[2] = {0, 0}, promote_outside_fast = 0, per[2] = {0, 0};
    double worst_fp32[2] = {0, 0};
    while (next_case(f, &c)) {
        if (strncmp(c.kernel, "scaled_mm", 9) != 0) continue;
        int fast = strstr(c.kernel, "fast_accum_1") != NULL;
        const npy_array *a = arr(&z, c.id, "in__A"), *bt = arr(&z, c.id, "in__B"), *o = arr(&z, c.id, "out__C");
        er_tensor A, B, C;
        int64_t M = a->shape[0], K = a->shape[1], N = bt->shape[0];
        ck_assert_int_eq(er_tensor_view(&A, ER_FP8_E4M3FN, 2, (int64_t[]){M, K}, NULL, a->data), ER_OK);
        ck_assert_int_eq(er_tensor_view(&B, ER_FP8_E4M3FN, 2, (int64_t[]){K, N}, (int64_t[]){1, K}, bt->data), ER_OK);
        ck_assert(npz_view(&C, o));
        er_ref *ref;
        ck_assert_int_eq(er_scaled_matmul(&ref, &A, &B, 0.5, 0.125), ER_OK);
        er_standard std;
        er_report rep;
        ck_assert_int_eq(er_standard_parse(&std, "mma:sm90", fast ? "outer=any" : "outer=any promote=4"), ER_OK);
        ck_assert_int_eq(er_covers(&rep, ref, &C, &std), ER_OK);
        if (!er_report_all(&rep)) {
            char text[4096];
            er_report_text(&rep, text, sizeof text, NULL);
            ck_abort_msg("%s (%s, K %d, %s) not covered:\n%s", c.id, c.kernel, c.K, c.extra, text);
        }
        er_report_clear(&rep);
        if (fast) { /* the fast-accumulation outputs under the promoted standard: how many leave it */
            ck_assert_int_eq(er_standard_parse(&std, "mma:sm90", "outer=any promote=4"), ER_OK);
            ck_assert_int_eq(er_covers(&rep, ref, &C, &std), ER_OK);
            promote_outside_fast += !er_report_all(&rep);
            er_report_clear(&rep);
        }
        er_standard_init(&std);
        ck_assert_int_eq(er_covers(&rep, ref, &C, &std), ER_OK);
        if (!er_report_all(&rep)) {
            fp32_outside[fast]++;
            if (rep.has_worst && rep.worst.distance_ulps > worst_fp32[fast]) worst_fp32[fast] = rep.worst.distance_ulps;
        }
        er_report_clear(&rep);
        er_ref_free(ref);
        per[fast]++;
        cases++;
    }
    fclose(f);
    npz_free(&z);
    /* Triton's fp8 tl.dot (max_num_imprecise_acc=0): inside outer=any; not the e8m13 chain, which is refused */
    f = open_cases(&z, ER_TEST_DATA_DIR "/fp8.npz", ER_TEST_DATA_DIR "/fp8.txt");
    char line[256], id[32];
    int triton8 = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%31s", id) != 1) continue;
        const npy_array *a = arr(&z, id, "in__A"), *b = arr(&z, id, "in__B");
        er_tensor A, B, C;
        ck_assert_int_eq(er_tensor_view(&A, ER_FP8_E4M3FN, 2, a->shape, NULL, a->data), ER_OK);
        ck_assert_int_eq(er_tensor_view(&B, ER_FP8_E4M3FN, 2, b->shape, NULL, b->data), ER_OK);
        ck_assert(npz_view(&C, arr(&z, id, "out__C")));
        er_report rep = check(&A, &B, &C, "mma:sm90", "outer=any");
        ck_assert_msg(er_report_all(&rep), "%s: Triton fp8 outside mma:sm90 outer=any", id);
        er_report_clear(&rep);
        ck_assert_int_eq(er_matmul_covers(&rep, &A, &B, &C, "mma:sm90", ""), ER_ERR_UNSUPPORTED);
        triton8++;
    }
    fclose(f);
    npz_free(&z);
    printf("Triton fp8 tl.dot on H200: %d cases inside mma:sm90 outer=any\n", triton8);
    ck_assert_int_eq(triton8, 10);
    printf("torch._scaled_mm e4m3 on H200: %d fast-accumulation cases inside mma:sm90 outer=any (%d of them outside promote=4), "
           "%d promoted cases inside mma:sm90 outer=any promote=4; outside fp32 any_order: %d fast (worst %.3g ulps beyond), "
           "%d promoted (worst %.3g ulps beyond)\n", per[1], promote_outside_fast, per[0], fp32_outside[1], worst_fp32[1],
           fp32_outside[0], worst_fp32[0]);
    ck_assert_int_eq(cases, 24);
    ck_assert_int_gt(fp32_outside[1], 0);
}
END_TEST

/* The small-K study (tools/capture/capture_smallk.py): fp32 outputs at K = 2 to 32 on inputs where truncation and
 * rounding to nearest differ. Triton's are reproduced bit for bit; all lie in mma:sm90 outer=any, the proved set
 * that replaces rounding=faithful for tensor cores. */
START_TEST(h200_small_k) {
    npz_file z;
    FILE *f = open_cases(&z, ER_TEST_DATA_DIR "/smallk.npz", ER_TEST_DATA_DIR "/smallk.txt");
    char line[256], id[32], kind[64];
    int K, cases = 0, triton = 0, rn_outside = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%31s %63s %d", id, kind, &K) != 3) continue;
        er_tensor A, B, C;
        ck_assert(npz_view(&A, arr(&z, id, "in__A")) && npz_view(&B, arr(&z, id, "in__B")) && npz_view(&C, arr(&z, id, "out__C")));
        er_report rep = check(&A, &B, &C, "mma:sm90", "outer=any");
        ck_assert_msg(er_report_all(&rep), "%s (%s, K %d) outside mma:sm90 outer=any", id, kind, K);
        er_report_clear(&rep);
        rep = check(&A, &B, &C, "any_order", "");
        rn_outside += !er_report_all(&rep);
        er_report_clear(&rep);
        if (strstr(kind, "triton")) {
            rep = check(&A, &B, &C, "mma:sm90", "");
            ck_assert_msg(er_report_all(&rep), "%s (K %d): the Triton output is not the mma:sm90 chain", id, K);
            er_report_clear(&rep);
            triton++;
        }
        cases++;
    }
    fclose(f);
    npz_free(&z);
    printf("small K on H200: %d cases inside mma:sm90 outer=any (%d of them outside the round-to-nearest any-order set); "
           "%d Triton cases equal to the mma:sm90 chain\n", cases, rn_outside, triton);
    ck_assert_int_eq(cases, 18);
    ck_assert_int_gt(rn_outside, 0);
}
END_TEST

/* The block FMA written again from its definition, with MPFR: E from the operands' exponents, each term truncated
 * to a multiple of 2^(E - F), the exact sum rounded toward zero to acc_p bits. */
static double ref_block(int F, int acc_p, double c, const double *a, const double *b, int n) {
    int fp16_acc = acc_p == 11; /* an fp16 accumulator: the block rounds to nearest in fp16 */
    int E = INT32_MIN;
    if (c != 0) E = ilogb(c);
    for (int j = 0; j < n; j++) if (a[j] != 0 && b[j] != 0 && ilogb(a[j]) + ilogb(b[j]) > E) E = ilogb(a[j]) + ilogb(b[j]);
    if (E == INT32_MIN) return 0.0;
    mpfr_t s, t;
    mpfr_inits2(400, s, t, (mpfr_ptr)0);
    mpfr_set_d(t, c, MPFR_RNDN);
    mpfr_mul_2si(t, t, F - E, MPFR_RNDN);
    mpfr_trunc(s, t);
    for (int j = 0; j < n; j++) {
        mpfr_set_d(t, a[j], MPFR_RNDN);
        mpfr_mul_d(t, t, b[j], MPFR_RNDN);
        mpfr_mul_2si(t, t, F - E, MPFR_RNDN);
        mpfr_trunc(t, t);
        mpfr_add(s, s, t, MPFR_RNDN);
    }
    mpfr_mul_2si(s, s, E - F, MPFR_RNDN);
    double r;
    if (fp16_acc) r = er_oracle_round(ER_FP16, s, MPFR_RNDN, ER_OVERFLOW_IEEE);
    else {
        mpfr_set_prec(t, acc_p);
        mpfr_set(t, s, MPFR_RNDZ);
        r = er_oracle_round(ER_FP32, t, MPFR_RNDZ, ER_OVERFLOW_IEEE);
    }
    mpfr_clears(s, t, (mpfr_ptr)0);
    return r;
}

/* Random chains against the independent block; random block orders and splits against outer=any (Theorem M1); groups of
 * at most N blocks against promote=N (Theorem M2), and the scaled matmul of such a result. */
START_TEST(block_model_and_any_order_set) {
    er_test_reseed(930);
    long trials = (long)(300 * er_test_multiplier());
    static const er_format fmts[3] = {ER_FP16, ER_BF16, ER_FP8_E4M3FN};
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = fmts[tr % 3];
        int acc16 = fx == ER_FP16 && (tr / 3) % 2; /* every other fp16 trial: an fp16 accumulator */
        int k = fx == ER_FP8_E4M3FN ? 32 : 16, F = fx == ER_FP8_E4M3FN ? 13 : 25, accp = fx == ER_FP8_E4M3FN ? 14 : acc16 ? 11 : 24;
        const char *cmp = acc16 ? "compute=fp16" : "";
        int K = (int)er_rand_int(1, 300), fam = (int)(er_rand64() % FAM_COUNT);
        double a[300], b[300];
        gen_vectors(fam, fx, fx, ER_FP32, K, a, b);
        int special = 0;
        for (int j = 0; j < K; j++) special |= !isfinite(a[j]) || !isfinite(b[j]);
        uint64_t A[300], B[300];
        for (int j = 0; j < K; j++) { er_store(A, fx, j, a[j]); er_store(B, fx, j, b[j]); }
        er_tensor ta, tb;
        er_tensor_view(&ta, fx, 2, (int64_t[]){1, K}, NULL, A);
        er_tensor_view(&tb, fx, 2, (int64_t[]){K, 1}, NULL, B);
        /* 1. the chain, by the independent block */
        double c = 0;
        for (int k0 = 0; k0 < K; k0 += k) c = special ? NAN : ref_block(F, accp, c, a + k0, b + k0, K - k0 < k ? K - k0 : k);
        float out = (float)c, em;
        er_ref *ref;
        ck_assert_int_eq(er_matmul(&ref, &ta, &tb), ER_OK);
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, "mma:sm90", cmp), ER_OK);
        er_tensor to, te;
        er_tensor_view(&to, ER_FP32, 2, (int64_t[]){1, 1}, NULL, &out);
        er_tensor_view(&te, ER_FP32, 2, (int64_t[]){1, 1}, NULL, &em);
        if (fx == ER_FP8_E4M3FN) { /* no fixed fp8 chain is claimed */
            ER_REQUIRE(er_emulate(ref, &te, &std) == ER_ERR_UNSUPPORTED, "the fp8 chain must be refused");
        } else {
            ER_REQUIRE(er_emulate(ref, &te, &std) == ER_OK, "%s", er_last_error());
        }
        if (!special && fx != ER_FP8_E4M3FN) ER_REQUIRE(memcmp(&em, &out, 4) == 0, "trial %ld (%s, K %d, %s): emulate %.9g, block model %.9g" ER_SEED_MSG_FMT,
                                 tr, er_format_name(fx), K, fam_names[fam], em, out, ER_SEED_ARGS);
        /* 2. blocks in a random order, in 1 to 4 chains, the chains added in fp32 in a random order */
        int nb = (K + k - 1) / k, order[64], chains = (int)er_rand_int(1, 4);
        for (int i = 0; i < nb; i++) order[i] = i;
        for (int i = nb - 1; i > 0; i--) { int j = (int)(er_rand64() % (uint64_t)(i + 1)), t = order[i]; order[i] = order[j]; order[j] = t; }
        double part[4] = {0, 0, 0, 0};
        for (int i = 0; i < nb; i++) {
            int blk = order[i], k0 = blk * k, ch = (int)(er_rand64() % (uint64_t)chains);
            part[ch] = special ? NAN : ref_block(F, accp, part[ch], a + k0, b + k0, K - k0 < k ? K - k0 : k);
        }
        emu e;
        emu_init(&e, acc16 ? ER_FP16 : ER_FP32);
        double tot = emu_sum_random(&e, part, chains);
        emu_clear(&e);
        out = (float)tot;
        ck_assert_int_eq(er_standard_parse(&std, "mma:sm90", acc16 ? "outer=any compute=fp16" : "outer=any"), ER_OK);
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &to, &std) == ER_OK, "%s", er_last_error());
        if (!special) ER_REQUIRE_PASS(&rep, "trial %ld (%s, K %d, %s, %d chains): a reordered mma result was called wrong:" ER_SEED_MSG_FMT,
                                      tr, er_format_name(fx), K, fam_names[fam], chains, ER_SEED_ARGS);
        er_report_clear(&rep);
        /* 3. promotion (Theorem M2): groups of at most N blocks, each chained from 0, added into the fp32 (fp16)
         * accumulator in a random order; then a scaled matmul of that result, scaled in one of its two ways */
        int N = (int)er_rand_int(1, 4);
        double grp[64];
        int ng = 0;
        for (int i = 0; i < nb; i += N) {
            double gc = 0;
            for (int t = i; t < nb && t < i + N; t++) {
                int k0 = order[t] * k;
                gc = special ? NAN : ref_block(F, accp, gc, a + k0, b + k0, K - k0 < k ? K - k0 : k);
            }
            grp[ng++] = gc;
        }
        emu_init(&e, acc16 ? ER_FP16 : ER_FP32);
        tot = emu_sum_random(&e, grp, ng);
        static const float scales[][2] = {{0.5f, 0.125f}, {3.0f, 0.1f}, {-1.5f, 7.0f}};
        const float *sc = scales[er_rand64() % 3];
        double scaled = (er_rand64() & 1) ? emu_mul(&e, emu_mul(&e, tot, sc[0]), sc[1]) : emu_mul(&e, tot, emu_mul(&e, sc[0], sc[1]));
        emu_clear(&e);
        char popt[64];
        snprintf(popt, sizeof popt, "outer=any promote=%d%s", N, acc16 ? " compute=fp16" : "");
        ck_assert_int_eq(er_standard_parse(&std, "mma:sm90", popt), ER_OK);
        out = (float)tot;
        ER_REQUIRE(er_covers(&rep, ref, &to, &std) == ER_OK, "%s", er_last_error());
        if (!special) ER_REQUIRE_PASS(&rep, "trial %ld (%s, K %d, %s, promote=%d): a promoted mma result was called wrong:" ER_SEED_MSG_FMT,
                                      tr, er_format_name(fx), K, fam_names[fam], N, ER_SEED_ARGS);
        er_report_clear(&rep);
        er_ref *sref;
        ck_assert_int_eq(er_scaled_matmul(&sref, &ta, &tb, sc[0], sc[1]), ER_OK);
        out = (float)scaled;
        ER_REQUIRE(er_covers(&rep, sref, &to, &std) == ER_OK, "%s", er_last_error());
        if (!special && !acc16)
            ER_REQUIRE_PASS(&rep, "trial %ld (%s, K %d, %s, scales %g %g): a scaled mma result was called wrong:" ER_SEED_MSG_FMT,
                            tr, er_format_name(fx), K, fam_names[fam], sc[0], sc[1], ER_SEED_ARGS);
        er_report_clear(&rep);
        er_ref_free(sref);
        er_ref_free(ref);
    }
    /* refusals */
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "mma:sm91", ""), ER_ERR_STANDARD);
    ck_assert_int_eq(er_standard_parse(&std, "mma:sm90", "compute=bf16"), ER_ERR_STANDARD);
    ck_assert_int_eq(er_standard_parse(&std, "mma:sm90", "fma=never"), ER_ERR_STANDARD);
    float x[4] = {1, 2, 3, 4}, y[1];
    er_tensor tx, ty;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, 4}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){1, 1}, NULL, y);
    er_tensor tb;
    er_tensor_view(&tb, ER_FP32, 2, (int64_t[]){4, 1}, NULL, x);
    er_report rep;
    ck_assert_int_eq(er_matmul_covers(&rep, &tx, &tb, &ty, "mma:sm90", ""), ER_ERR_STANDARD); /* fp32 without tf32 */
    ck_assert_msg(strstr(er_last_error(), "compute=tf32") != NULL, "%s", er_last_error());
}
END_TEST

/* Triton's tf32x3 (orders.md, Theorem X1), implemented here with the independent block: each fp32 operand split by
 * ties-away rounding into big + small tf32 parts, three dots per block of 8 (small x big, big x small, big x big,
 * small x small dropped), blocks in Triton's order in one chain, or in a random order over 1 to 4 chains added in
 * fp32. Operands from every family, half of them exact tf32 ties. Covered under mma:sm90 outer=any compute=tf32x3;
 * outside fp32 any_order somewhere at K <= 3. */
START_TEST(tf32x3_implementations_are_covered) {
    er_test_reseed(931);
    long trials = (long)(400 * er_test_multiplier()), outside_fp32 = 0;
    for (long tr = 0; tr < trials; tr++) {
        int K = er_rand64() % 3 ? (int)er_rand_int(1, 4) : (int)er_rand_int(5, 200), fam = (int)(er_rand64() % FAM_COUNT);
        double a[200], b[200], ab[3][2][208];
        gen_vectors(fam, ER_FP32, ER_FP32, ER_FP32, K, a, b);
        int special = 0;
        for (int j = 0; j < K; j++) special |= !isfinite(a[j]) || !isfinite(b[j]);
        if (special) continue;
        mpfr_t t;
        mpfr_init2(t, 200);
        int nb = (K + 7) / 8;
        memset(ab, 0, sizeof ab);
        for (int j = 0; j < K; j++) {
            double *v[2] = {&a[j], &b[j]};
            for (int o = 0; o < 2; o++) {
                if (er_rand64() & 1) { /* an exact tie of tf32: low 13 bits 0x1000 */
                    float f = (float)*v[o];
                    uint32_t u;
                    memcpy(&u, &f, 4);
                    u = (u & ~0x1fffu) | 0x1000u;
                    memcpy(&f, &u, 4);
                    if (isfinite(f)) *v[o] = f;
                }
                mpfr_set_d(t, *v[o], MPFR_RNDN);
                double big = er_oracle_round(ER_TF32, t, MPFR_RNDNA, ER_OVERFLOW_IEEE);
                mpfr_sub_d(t, t, big, MPFR_RNDN);
                double small = er_oracle_round(ER_TF32, t, MPFR_RNDNA, ER_OVERFLOW_IEEE);
                ab[0][o][j] = o == 0 ? small : big; /* small_a x big_b */
                ab[1][o][j] = o == 0 ? big : small; /* big_a x small_b */
                ab[2][o][j] = big;                  /* big_a x big_b */
            }
        }
        mpfr_clear(t);
        float A[200], B[200], out;
        for (int j = 0; j < K; j++) { A[j] = (float)a[j]; B[j] = (float)b[j]; }
        int chains = (int)er_rand_int(1, 4), order[75];
        for (int i = 0; i < 3 * nb; i++) order[i] = i;
        if (chains > 1)
            for (int i = 3 * nb - 1; i > 0; i--) { int j = (int)(er_rand64() % (uint64_t)(i + 1)), s = order[i]; order[i] = order[j]; order[j] = s; }
        double part[4] = {0, 0, 0, 0};
        for (int i = 0; i < 3 * nb; i++) {
            int blk = order[i] / 3, dot = order[i] % 3, ch = chains > 1 ? (int)(er_rand64() % (uint64_t)chains) : 0;
            part[ch] = ref_block(25, 24, part[ch], ab[dot][0] + 8 * blk, ab[dot][1] + 8 * blk, 8);
        }
        emu e;
        emu_init(&e, ER_FP32);
        out = (float)emu_sum_random(&e, part, chains);
        emu_clear(&e);
        er_tensor ta, tb, to;
        er_tensor_view(&ta, ER_FP32, 2, (int64_t[]){1, K}, NULL, A);
        er_tensor_view(&tb, ER_FP32, 2, (int64_t[]){K, 1}, NULL, B);
        er_tensor_view(&to, ER_FP32, 2, (int64_t[]){1, 1}, NULL, &out);
        er_report rep = check(&ta, &tb, &to, "mma:sm90", "outer=any compute=tf32x3");
        ER_REQUIRE_PASS(&rep, "trial %ld (K %d, %s, %d chains): a tf32x3 result was called wrong:" ER_SEED_MSG_FMT, tr, K,
                        fam_names[fam], chains, ER_SEED_ARGS);
        er_report_clear(&rep);
        rep = check(&ta, &tb, &to, "any_order", "compute=fp32");
        outside_fp32 += !er_report_all(&rep) && K <= 3;
        er_report_clear(&rep);
    }
    printf("tf32x3 implementations covered under mma:sm90 outer=any compute=tf32x3; %ld of them (K <= 3) outside fp32 "
           "any_order\n", outside_fp32);
    ck_assert_int_gt(outside_fp32, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("mma");
    TCase *tc = tcase_create("mma");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, h200_tensor_core_outputs);
    tcase_add_test(tc, block_model_and_any_order_set);
    tcase_add_test(tc, tf32x3_implementations_are_covered);
    tcase_add_test(tc, h200_small_k);
    tcase_add_test(tc, h200_scaled_mm);
    tcase_add_test(tc, h200_orders_under_mma);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
