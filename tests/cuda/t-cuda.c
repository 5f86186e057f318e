/* t-cuda.c: a real CUDA split-K kernel (examples/cuda/splitk_kernel.cu) checked from device memory with
 * er_covers_device: the correct kernel is covered under its split standard and any_order; the kernel with the
 * dropped-tail bug is not. Without a CUDA device the test is skipped (exit 77) with a message; the refusals of
 * the device API are checked everywhere. */
#include "../common/er_test.h"
#include <exactref/cuda.h>
#include "splitk.h"

static int run_case(int M, int K, int N, int S, int buggy, const char *order, const char *opts) {
    uint16_t *A = malloc(2 * (size_t)M * K), *B = malloc(2 * (size_t)K * N);
    for (int i = 0; i < M * K; i++) er_store(A, ER_FP16, i, er_rand_normal());
    for (int i = 0; i < K * N; i++) er_store(B, ER_FP16, i, er_rand_normal());
    float *dC;
    ck_assert_int_eq(splitk_run(A, B, M, N, K, S, buggy, &dC, NULL), 0);
    er_tensor tA, tB, tC;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){M, N}, NULL, dC);
    er_ref *ref;
    ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, order, opts), ER_OK);
    er_report rep;
    ck_assert_msg(er_covers_device(&rep, ref, &tC, &std, NULL) == ER_OK, "%s", er_last_error());
    int ok = er_report_all(&rep);
    er_report_clear(&rep);
    er_ref_free(ref);
    splitk_free(dC);
    free(A);
    free(B);
    return ok;
}

START_TEST(splitk_on_the_gpu) {
    er_test_reseed(700);
    static const int shapes[][4] = {{1, 1, 1, 1}, {3, 5, 7, 2}, {64, 256, 32, 4}, {17, 300, 9, 7}, {33, 1025, 20, 8}};
    for (int i = 0; i < 5; i++) {
        char order[32];
        snprintf(order, sizeof order, "split:%d", shapes[i][3]);
        ck_assert_msg(run_case(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], 0, order, "fma=always outer=any"),
                      "a correct kernel was not covered (shape %d)", i);
        ck_assert(run_case(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], 0, "any_order", NULL));
        if (shapes[i][1] >= 256) /* the dropped product matters at every element of these shapes */
            ck_assert_msg(!run_case(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], 1, "any_order", NULL),
                          "the tail bug was not caught (shape %d)", i);
    }
    printf("t-cuda: the split-K kernel ran on the GPU: covered where correct, caught with the tail bug\n");
}
END_TEST

START_TEST(device_api_refusals) {
    er_tensor v;
    void *h = (void *)1;
    ck_assert_int_eq(er_tensor_from_device(NULL, &h, ER_FP32, 1, (int64_t[]){4}, NULL, (void *)16, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_tensor_from_device(&v, &h, ER_FP32, 1, (int64_t[]){-4}, NULL, (void *)16, NULL), ER_ERR_SIZE);
    ck_assert_ptr_eq(h, (void *)1);
    ck_assert_int_eq(er_tensor_from_device(&v, &h, ER_FP32, 1, (int64_t[]){4}, NULL, NULL, NULL), ER_ERR_NULL);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, device_api_refusals);
    int have = er_cuda_available() && splitk_device_count() > 0;
    if (have) tcase_add_test(tc, splitk_on_the_gpu);
    suite_add_tcase(s, tc);
    /* CUDA was initialised above; a forked child cannot use that context: run the tests in this process */
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int rc = srunner_ntests_failed(sr) ? EXIT_FAILURE : EXIT_SUCCESS;
    srunner_free(sr);
    if (!have) {
        printf("t-cuda: no CUDA device here: the GPU part is skipped (its kernel was compiled; run it on a GPU machine)\n");
        return rc == EXIT_SUCCESS ? 77 : rc;
    }
    return rc;
}
