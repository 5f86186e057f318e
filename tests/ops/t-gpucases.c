/* t-gpucases.c: real H200 outputs. Every element of every cuBLAS float16 matmul in tests/data/mm16.npz
 * (correct kernels, fp32 accumulation) must be covered under any_order compute=fp32. As a control that the
 * harness can see a wrong value, each case's outputs shifted by 64 fp16 ulps must be caught in most cases. */
#include "../common/er_test.h"
#include "../common/npz.h"

#ifndef ER_TEST_DATA_DIR
#define ER_TEST_DATA_DIR "tests/data"
#endif

START_TEST(cublas_fp16_all_covered) {
    npz_file z;
    const char *err = NULL;
    const char *path = ER_TEST_DATA_DIR "/mm16.npz";
    ck_assert_msg(npz_load(&z, path, &err) == 0, "%s: %s", path, err);
    int cases = 0, caught = 0;
    long long total[ER_CLASS_COUNT] = {0};
    for (int i = 0; i < z.n; i++) {
        const char *name = z.arr[i].name;
        const char *tag = strstr(name, "__out__C");
        if (!tag) continue;
        char id[64], key[96];
        snprintf(id, sizeof id, "%.*s", (int)(tag - name), name);
        snprintf(key, sizeof key, "%s__in__A", id);
        const npy_array *a = npz_find(&z, key);
        snprintf(key, sizeof key, "%s__in__B", id);
        const npy_array *b = npz_find(&z, key);
        ck_assert_msg(a && b, "case %s lacks an input", id);
        er_tensor tA, tB, tC;
        ck_assert_msg(npz_view(&tA, a), "unsupported dtype");
        ck_assert_msg(npz_view(&tB, b), "unsupported dtype");
        ck_assert_msg(npz_view(&tC, &z.arr[i]), "unsupported dtype");
        er_report rep;
        ck_assert_int_eq(er_matmul_covers(&rep, &tA, &tB, &tC, "any_order", "compute=fp32"), ER_OK);
        ER_REQUIRE_PASS(&rep, "case %s: a correct cuBLAS output is not covered:", id);
        for (int c = 0; c < ER_CLASS_COUNT; c++) total[c] += rep.counts[c];
        er_report_clear(&rep);
        /* control: every output moved 64 fp16 ulps up (finite values only) */
        int64_t n = er_tensor_numel(&tC);
        uint16_t *moved = malloc(sizeof(uint16_t) * (size_t)(n ? n : 1));
        memcpy(moved, z.arr[i].data, sizeof(uint16_t) * (size_t)n);
        for (int64_t k = 0; k < n; k++) {
            double v, w;
            er_decode(&v, ER_FP16, moved[k]);
            if (!isfinite(v)) continue;
            uint64_t bits;
            w = v + 64 * er_format_ulp(ER_FP16, v);
            er_encode(&bits, ER_FP16, w, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
            moved[k] = (uint16_t)bits;
        }
        tC.data = moved;
        ck_assert_int_eq(er_matmul_covers(&rep, &tA, &tB, &tC, "any_order", "compute=fp32"), ER_OK);
        caught += !er_report_all(&rep);
        er_report_clear(&rep);
        free(moved);
        cases++;
    }
    printf("mm16: %d cuBLAS cases covered (exact %lld, covered %lld, overflow %lld elements); "
           "outputs moved by 64 ulps caught in %d of %d cases\n", cases, total[0], total[1], total[2], caught, cases);
    ck_assert_int_eq(cases, 32);
    ck_assert_int_ge(caught, cases * 3 / 4);
    npz_free(&z);
}
END_TEST

int main(void) {
    Suite *s = suite_create("gpucases");
    TCase *tc = tcase_create("gpucases");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, cublas_fp16_all_covered);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
