/* t-memcap.c: the memory cap (docs/conventions.md, Memory). Under a small EXACTREF_MAX_BYTES every entry point that
 * plans a large allocation refuses with ER_ERR_NOMEM before allocating, names what needed the memory and the cap,
 * and writes nothing (a report records the refusal); a malformed value is ER_ERR_INVALID; the suffixes scale; and
 * unset, the same calls run. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "../common/er_test.h"
#include "../common/er_refuse.h"

static float a[64 * 64], b[64 * 64], c[64 * 64];
static er_tensor A, B, C;

static void setup(void) {
    for (int i = 0; i < 64 * 64; i++) a[i] = (float)(i % 7) - 3, b[i] = (float)(i % 5) - 2, c[i] = 0;
    er_tensor_view(&A, ER_FP32, 2, (int64_t[]){64, 64}, NULL, a);
    er_tensor_view(&B, ER_FP32, 2, (int64_t[]){64, 64}, NULL, b);
    er_tensor_view(&C, ER_FP32, 2, (int64_t[]){64, 64}, NULL, c);
}

static void teardown(void) { unsetenv("EXACTREF_MAX_BYTES"); }

/* er_matmul: a 64 x 64 x 64 reference needs more than 100 KB; the reference pointer stays as it was. */
START_TEST(matmul_refused_under_the_cap) {
    setenv("EXACTREF_MAX_BYTES", "100K", 1);
    er_ref *ref = (er_ref *)(uintptr_t)0x5EAD;
    ck_assert_int_eq(er_matmul(&ref, &A, &B), ER_ERR_NOMEM);
    ck_assert_ptr_eq(ref, (er_ref *)(uintptr_t)0x5EAD);
    ck_assert_msg(strstr(er_last_error(), "the matmul reference needs about") && strstr(er_last_error(), "EXACTREF_MAX_BYTES"), "%s",
                  er_last_error());
    setenv("EXACTREF_MAX_BYTES", "1M", 1);
    ck_assert_int_eq(er_matmul(&ref, &A, &B), ER_OK);
    er_ref_free(ref);
}
END_TEST

/* er_covers on a reference built without a cap: under a cap below its classes (4096 bytes) the report records the
 * refusal; er_covers_sets writes no set. */
START_TEST(covers_refused_under_the_cap) {
    er_ref *ref;
    ck_assert_int_eq(er_matmul(&ref, &A, &B), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "blocked:16", NULL), ER_OK);
    setenv("EXACTREF_MAX_BYTES", "4000", 1);
    er_report rep = sentinel_report();
    ck_assert_int_eq(er_covers(&rep, ref, &C, &std), ER_ERR_NOMEM);
    ck_assert_msg(strstr(er_last_error(), "the report's classes"), "%s", er_last_error());
    ck_assert(refused_report(&rep, ER_ERR_NOMEM));
    static double lo[64 * 64], hi[64 * 64];
    for (int i = 0; i < 64 * 64; i++) lo[i] = hi[i] = 7;
    ck_assert_int_eq(er_covers_sets(&rep, ref, &C, &std, lo, hi, NULL), ER_ERR_NOMEM);
    for (int i = 0; i < 64 * 64; i++) ck_assert(lo[i] == 7 && hi[i] == 7);
    /* a fixed order decodes the operands again: 9 bytes per input element */
    setenv("EXACTREF_MAX_BYTES", "20000", 1);
    ck_assert_int_eq(er_covers(&rep, ref, &C, &std), ER_ERR_NOMEM);
    ck_assert_msg(strstr(er_last_error(), "decoding an operand"), "%s", er_last_error());
    unsetenv("EXACTREF_MAX_BYTES");
    ck_assert_int_eq(er_covers(&rep, ref, &C, &std), ER_OK);
    er_report_clear(&rep);
    er_ref_free(ref);
}
END_TEST

/* A softmax's rows need working memory per thread: refused under a cap that holds the classes but not a row's. */
START_TEST(rows_refused_under_the_cap) {
    er_ref *ref;
    ck_assert_int_eq(er_softmax(&ref, &A, 1), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    setenv("EXACTREF_MAX_BYTES", "10000", 1);
    er_report rep = sentinel_report();
    ck_assert_int_eq(er_covers(&rep, ref, &C, &std), ER_ERR_NOMEM);
    ck_assert_msg(strstr(er_last_error(), "the rows' working sets"), "%s", er_last_error());
    ck_assert(refused_report(&rep, ER_ERR_NOMEM));
    er_ref_free(ref);
}
END_TEST

/* A malformed cap is refused with what was given; upper- and lower-case suffixes scale alike. */
START_TEST(malformed_cap) {
    static const char *const bad[] = {"lots", "12X", "-5", "1e40", "3 G"};
    for (int i = 0; i < 5; i++) {
        setenv("EXACTREF_MAX_BYTES", bad[i], 1);
        er_ref *ref = NULL;
        ck_assert_int_eq(er_matmul(&ref, &A, &B), ER_ERR_INVALID);
        ck_assert_ptr_null(ref);
        ck_assert_msg(strstr(er_last_error(), "EXACTREF_MAX_BYTES") && strstr(er_last_error(), bad[i]), "%s", er_last_error());
    }
    static const char *const good[] = {"1g", "1G", "2048m", "1073741824", "0.5T"};
    for (int i = 0; i < 5; i++) {
        setenv("EXACTREF_MAX_BYTES", good[i], 1);
        er_ref *ref;
        ck_assert_int_eq(er_matmul(&ref, &A, &B), ER_OK);
        er_ref_free(ref);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("memcap");
    TCase *tc = tcase_create("memcap");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, matmul_refused_under_the_cap);
    tcase_add_test(tc, covers_refused_under_the_cap);
    tcase_add_test(tc, rows_refused_under_the_cap);
    tcase_add_test(tc, malformed_cap);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
