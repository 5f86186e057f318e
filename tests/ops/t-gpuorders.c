/* t-gpuorders.c: real H200 outputs of kernels with a known order and accumulator (tests/data/orders.txt and
 * orders.npz, captured by tools/capture/capture_orders.py). Each line names the standard that must cover the
 * case, optionally one that must not, and whether er_emulate must reproduce it bit for bit. */
#include "../common/er_test.h"
#include "../common/npz.h"

#ifndef ER_TEST_DATA_DIR
#define ER_TEST_DATA_DIR "tests/data"
#endif

static int passes(const er_tensor *A, const er_tensor *B, const er_tensor *C, const char *order, const char *opts,
                  char *text, size_t cap) {
    er_report rep;
    er_status st = er_matmul_covers(&rep, A, B, C, order, strcmp(opts, "-") == 0 ? NULL : opts);
    ck_assert_msg(st == ER_OK, "%s %s: %s", order, opts, er_last_error());
    int ok = er_report_all(&rep);
    if (text) er_report_text(&rep, text, cap, NULL);
    er_report_clear(&rep);
    return ok;
}

/* Every case of a listing in the orders.txt format: covered under its standard, outside the wrong one where one is
 * named, reproduced by er_emulate where marked. Returns the number of cases. */
static int check_listing(const char *npz_path, const char *txt_path, int *n_not_covered, int *n_emulated) {
    npz_file z;
    FILE *f = open_cases(&z, npz_path, txt_path);
    char line[512];
    int cases = 0, not_covered = 0, emulated = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char id[32], kernel[64], cord[32], copt[128], nord[32], nopt[128];
        int emu;
        ck_assert_int_eq(sscanf(line, "%31s %63s %31s %127s %31s %127s %d", id, kernel, cord, copt, nord, nopt, &emu), 7);
        char key[96];
        snprintf(key, sizeof key, "%s__in__A", id);
        const npy_array *a = npz_find(&z, key);
        snprintf(key, sizeof key, "%s__in__B", id);
        const npy_array *b = npz_find(&z, key);
        snprintf(key, sizeof key, "%s__out__C", id);
        const npy_array *c = npz_find(&z, key);
        ck_assert_msg(a && b && c, "case %s is incomplete", id);
        er_tensor tA, tB, tC;
        ck_assert_msg(npz_view(&tA, a), "unsupported dtype");
        ck_assert_msg(npz_view(&tB, b), "unsupported dtype");
        ck_assert_msg(npz_view(&tC, c), "unsupported dtype");
        char text[4096];
        if (!passes(&tA, &tB, &tC, cord, copt, text, sizeof text))
            ck_abort_msg("case %s (%s, %lld x %lld x %lld) is not covered under %s %s:\n%s", id, kernel,
                         (long long)a->shape[0], (long long)a->shape[1], (long long)b->shape[1], cord, copt, text);
        if (strcmp(nord, "-") != 0) {
            if (passes(&tA, &tB, &tC, nord, nopt, NULL, 0))
                ck_abort_msg("case %s (%s) is covered under %s %s, which does not describe it", id, kernel, nord, nopt);
            not_covered++;
        }
        if (emu) {
            er_ref *ref;
            ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
            er_standard st;
            ck_assert_int_eq(er_standard_parse(&st, cord, copt), ER_OK);
            int64_t n = er_tensor_numel(&tC);
            float *out = malloc(sizeof(float) * (size_t)n);
            er_tensor tE = tC;
            tE.data = out;
            ck_assert_msg(er_emulate(ref, &tE, &st) == ER_OK, "emulate: %s", er_last_error());
            ck_assert_msg(memcmp(out, c->data, sizeof(float) * (size_t)n) == 0, "case %s (%s): emulate differs from the GPU", id, kernel);
            free(out);
            er_ref_free(ref);
            emulated++;
        }
        cases++;
    }
    fclose(f);
    npz_free(&z);
    *n_not_covered = not_covered;
    *n_emulated = emulated;
    return cases;
}

START_TEST(known_orders_on_h200) {
    int not_covered, emulated;
    int cases = check_listing(ER_TEST_DATA_DIR "/orders.npz", ER_TEST_DATA_DIR "/orders.txt", &not_covered, &emulated);
    printf("H200 orders: %d cases covered under their standard, %d not covered under a standard that does not describe "
           "them, %d reproduced bit for bit by er_emulate\n", cases, not_covered, emulated);
    ck_assert_int_eq(cases, 108);
}
END_TEST

/* tf32 conversions on operands rich in exact ties (tools/capture/capture_toolchains.py, tests/data/tcmm.*): cuBLAS
 * with TF32 on rounds ties to even (outside tf32=rna), Triton "tf32" truncates, Triton fed cvt.rn / cvt.rna
 * operands follows each rule (outside the other), Triton "tf32x3" lies in compute=tf32x3 (outside fp32 any_order at
 * K <= 3), and cuBLAS computes K = 1 in fp32 (outside the tf32 standard). */
START_TEST(tf32_conversions_on_h200) {
    int not_covered, emulated;
    int cases = check_listing(ER_TEST_DATA_DIR "/tcmm.npz", ER_TEST_DATA_DIR "/tcmm.txt", &not_covered, &emulated);
    printf("H200 tf32 conversions on tie-rich operands: %d cases covered under their standard, %d not covered under the "
           "other rule or a standard that does not describe them\n", cases, not_covered);
    ck_assert_int_eq(cases, 60);
    ck_assert_int_ge(not_covered, 50);
}
END_TEST

/* Tensor cores truncate: small-K fp32 outputs (K = 2..32, inputs built so that truncation and rounding to nearest
 * differ) fall outside the round-to-nearest any-order set at K = 2 and 3, and are covered by rounding=faithful. */
START_TEST(tensor_core_small_k) {
    npz_file z;
    FILE *f = open_cases(&z, ER_TEST_DATA_DIR "/smallk.npz", ER_TEST_DATA_DIR "/smallk.txt");
    char line[256], id[32], kernel[64];
    int K, cases = 0, outside_nearest = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%31s %63s %d", id, kernel, &K) != 3) continue;
        char key[96];
        const npy_array *arr[3];
        const char *names[3] = {"in__A", "in__B", "out__C"};
        er_tensor t[3];
        for (int i = 0; i < 3; i++) {
            snprintf(key, sizeof key, "%s__%s", id, names[i]);
            arr[i] = npz_find(&z, key);
            ck_assert_msg(arr[i] && npz_view(&t[i], arr[i]), "case %s", id);
        }
        char text[4096];
        if (!passes(&t[0], &t[1], &t[2], "any_order", "compute=fp32,rounding=faithful", text, sizeof text))
            ck_abort_msg("case %s (%s, K %d) not covered under rounding=faithful:\n%s", id, kernel, K, text);
        int near = passes(&t[0], &t[1], &t[2], "any_order", "compute=fp32", NULL, 0);
        if (K <= 3) ck_assert_msg(!near, "case %s (%s, K %d): expected outside the round-to-nearest set", id, kernel, K);
        outside_nearest += !near;
        cases++;
    }
    fclose(f);
    printf("H200 tensor cores, small K: %d cases covered under rounding=faithful; %d outside the round-to-nearest set\n",
           cases, outside_nearest);
    ck_assert_int_eq(cases, 18);
    npz_free(&z);
}
END_TEST

int main(void) {
    Suite *s = suite_create("gpuorders");
    TCase *tc = tcase_create("gpuorders");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, known_orders_on_h200);
    tcase_add_test(tc, tf32_conversions_on_h200);
    tcase_add_test(tc, tensor_core_small_k);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
