/* t-soundness.c: the soundness fuzz. Random correct implementations of the any_order standard (random
 * summation trees, FMA never / always / mixed, every compute format) on adversarial inputs (normal,
 * all-positive, cancellation, wide exponent range, subnormal, near overflow, exact ties): exactref must
 * never call their output anything but EXACT, COVERED or OVERFLOW. 10^5 trials by default, times
 * ER_TEST_MULTIPLIER; the seed is printed on failure. */
#include "../common/er_gen.h"

static const er_format computes[] = {ER_FP32, ER_FP16, ER_BF16, ER_FP64};
static const er_format inputs[] = {ER_FP16, ER_BF16, ER_FP32, ER_FP8_E4M3FN, ER_FP8_E5M2, ER_TF32, ER_FP64};
static const er_format held_fp16[] = {ER_FP16, ER_FP8_E4M3FN, ER_FP8_E5M2};
static const er_format held_bf16[] = {ER_BF16, ER_FP8_E4M3FN, ER_FP8_E5M2};
static const er_format outputs[] = {ER_FP32, ER_FP16, ER_BF16, ER_FP64, ER_FP8_E4M3FN};

START_TEST(any_order_is_sound) {
    er_test_reseed(100);
    long trials = (long)(100000 * er_test_multiplier());
    const int M = 8; /* rows per matmul call: each row is one trial */
    long done = 0, counts[ER_CLASS_COUNT] = {0};
    long fam_count[FAM_COUNT] = {0};
    while (done < trials) {
        er_format F = computes[er_rand64() % 4];
        /* inputs the accumulator holds (a wider input is refused: a kernel would convert it first) */
        int nin = F == ER_FP64 ? 7 : F == ER_FP32 ? 6 : 3;
        const er_format *held = F == ER_FP16 ? held_fp16 : F == ER_BF16 ? held_bf16 : inputs;
        er_format fa = held[er_rand64() % (uint64_t)nin], fb = held[er_rand64() % (uint64_t)nin];
        er_format fo = er_rand64() % 2 ? F : outputs[er_rand64() % 5];
        int fam = (int)(er_rand64() % FAM_COUNT);
        int K = er_rand64() % 8 == 0 ? (int)er_rand_int(65, 300) : (int)er_rand_int(1, 64);
        int fma_mode = (int)(er_rand64() % 3);
        double *a = malloc(sizeof(double) * (size_t)(M * K)), *bcol = malloc(sizeof(double) * (size_t)(M * K));
        void *A = malloc(8 * (size_t)(M * K)), *B = malloc(8 * (size_t)(K * M)), *C = malloc(8 * (size_t)(M * M));
        for (int i = 0; i < M; i++) gen_vectors(fam, fa, fb, F, K, a + i * K, bcol + i * K);
        for (int i = 0; i < M; i++)
            for (int k = 0; k < K; k++) { er_store(A, fa, i * K + k, a[i * K + k]); er_store(B, fb, k * M + i, bcol[i * K + k]); }
        emu e;
        emu_init(&e, F);
        double got[8];
        for (int i = 0; i < M; i++) {
            double r = emu_dot_random(&e, a + i * K, bcol + i * K, K, fma_mode);
            mpfr_t t;
            mpfr_init2(t, 64);
            mpfr_set_d(t, r, MPFR_RNDN);
            got[i] = isnan(r) ? NAN : er_oracle_round(fo, t, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
            mpfr_clear(t);
        }
        emu_clear(&e);
        /* Trial i is row i of A times column i of B, its result stored at C[i][i]: views pick them out. */
        for (int i = 0; i < M; i++) er_store(C, fo, i * (M + 1), got[i]);
        for (int i = 0; i < M; i++) {
            er_tensor ta_i, tb_i, tc_i;
            er_tensor_view(&ta_i, fa, 2, (int64_t[]){1, K}, NULL, (const char *)A + (size_t)i * K * (er_format_storage_bits(fa) / 8));
            er_tensor_view(&tb_i, fb, 2, (int64_t[]){K, 1}, (int64_t[]){M, 1}, (const char *)B + (size_t)i * (er_format_storage_bits(fb) / 8));
            er_tensor_view(&tc_i, fo, 2, (int64_t[]){1, 1}, NULL, (const char *)C + (size_t)i * (M + 1) * (er_format_storage_bits(fo) / 8));
            er_report rep;
            er_status st = er_matmul_covers(&rep, &ta_i, &tb_i, &tc_i, "any_order",
                                            F == ER_FP32 ? "compute=fp32" : F == ER_FP16 ? "compute=fp16" : F == ER_BF16 ? "compute=bf16" : "compute=fp64");
            ER_REQUIRE(st == ER_OK, "covers failed: %s", er_last_error());
            er_class c = (er_class)rep.classes[0];
            counts[c]++;
            if (!er_class_passes(c)) {
                char text[2048];
                er_report_text(&rep, text, sizeof text, NULL);
                ck_abort_msg("a correct %s-accumulated implementation (fma mode %d) was called %s: family %s, A %s, B %s, "
                             "out %s, K %d, row %d\n%s" ER_SEED_MSG_FMT, er_format_name(F), fma_mode, er_class_name(c),
                             fam_names[fam], er_format_name(fa), er_format_name(fb), er_format_name(fo), K, i, text, ER_SEED_ARGS);
            }
            er_report_clear(&rep);
        }
        fam_count[fam] += M;
        done += M;
        free(a); free(bcol); free(A); free(B); free(C);
    }
    printf("soundness: %ld trials: exact %ld, covered %ld, overflow %ld (seed %llu)\n", done, counts[0], counts[1],
           counts[2], (unsigned long long)er_test_seed_value);
    /* The fuzz must exercise every class that passes, or it proves less than it claims. */
    ck_assert_msg(counts[ER_CLASS_EXACT] > 0 && counts[ER_CLASS_COVERED] > 0 && counts[ER_CLASS_OVERFLOW] > 0,
                  "the fuzz did not reach every passing class");
}
END_TEST

int main(void) {
    Suite *s = suite_create("soundness");
    TCase *tc = tcase_create("soundness");
    tcase_set_timeout(tc, 3600);
    tcase_add_test(tc, any_order_is_sound);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
