/* t-cuda.c: a real CUDA split-K kernel (examples/cuda/splitk_kernel.cu) checked from device memory with
 * er_covers_device: the correct kernel is covered under its split standard and any_order; the kernel with the
 * dropped-tail bug is not; er_matmul_covers_device (the reference on the GPU) gives, for operands and outputs in
 * device memory, exactly the report er_matmul and er_covers give on host copies. Without a CUDA device the test is
 * skipped (exit 77) with a message; the refusals of the device API are checked everywhere. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "../common/er_gen.h"
#include "../common/npz.h"
#include <cuda_runtime_api.h>
#include <mpfr.h>
#include <exactref/cuda.h>
#include "splitk.h"

#ifndef ER_TEST_DATA_DIR
#define ER_TEST_DATA_DIR "tests/data"
#endif

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

static void *to_device(const void *h, size_t bytes) {
    void *d = NULL;
    ck_assert_int_eq(cudaMalloc(&d, bytes ? bytes : 1), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static void require_kept_same_in(const er_report *rh, er_report *rk, er_status st, const char *what, long *kept);
/* The matmul reports marked er_report_keep_on_device that kept their classes on the device; those of them that passed
 * with elements the host decided (their classes scattered over the GPU's there), and those with an output outside
 * (the whole array copied back up). */
static long kept_mm, kept_mm_scattered, kept_mm_outside;

/* The host's report of ref on host views tA, tB, tC under std against er_matmul_covers_device's on device copies of
 * their data (ab and c bytes per operand element and output storage, na, nb and nc elements stored): the same; and
 * the device's report into a report marked to keep its classes on the device the same, field for field and in its
 * JSON. Returns the device report's elements decided without their sets (n_unseen). */
static int64_t require_device_equals_host(const er_ref *ref, const er_tensor *tA, const er_tensor *tB,
                                          const er_tensor *tC, int64_t na, int64_t nb, int64_t nc, int ab, int c,
                                          const er_standard *std, const char *what) {
    void *dA = to_device(tA->data, (size_t)(na * ab)), *dB = to_device(tB->data, (size_t)(nb * ab)),
         *dC = to_device(tC->data, (size_t)(nc * c));
    er_tensor vA = *tA, vB = *tB, vC = *tC;
    vA.data = dA;
    vB.data = dB;
    vC.data = dC;
    er_report rh, rd;
    ER_REQUIRE(er_covers(&rh, ref, tC, std) == ER_OK, "host: %s", er_last_error());
    ER_REQUIRE(er_matmul_covers_device(&rd, &vA, &vB, &vC, std, NULL) == ER_OK, "device: %s", er_last_error());
    er_require_same_report(&rh, &rd, what);
    er_report rk;
    ER_REQUIRE(er_report_keep_on_device(&rk) == ER_OK, "keep: %s", er_last_error());
    er_status st = er_matmul_covers_device(&rk, &vA, &vB, &vC, std, NULL);
    if (st == ER_OK && !rk.classes && rh.counts[ER_CLASS_OUTSIDE]) kept_mm_outside++;
    else if (st == ER_OK && !rk.classes && rk.n_unseen < rk.n) kept_mm_scattered++;
    require_kept_same_in(&rd, &rk, st, what, &kept_mm); /* the device's (n_unseen: its JSON not the host's) */
    int64_t unseen = rd.n_unseen;
    er_report_clear(&rh);
    er_report_clear(&rd);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    return unseen;
}

/* The GPU path against the host: every input family, fp16, bf16, fp32 and fp8 operands, fp32, fp16 and bf16
 * outputs spread from the correctly rounded result out to 2^20 ulps (some NaN or infinite), broadcast batches,
 * sizes up to a few hundred, the any-order (also with faithful rounding) and mma outer=any standards; and paths it
 * hands to the host (compute=tf32, an operand holding NaN, an output with padded rows). */
START_TEST(matmul_on_the_gpu_equals_the_host) {
    er_test_reseed(710);
    long trials = (long)(60 * er_test_multiplier());
    static const er_format ins[] = {ER_FP16, ER_BF16, ER_FP32, ER_FP8_E4M3FN}, outs[] = {ER_FP32, ER_FP16, ER_BF16};
    long device_elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = ins[er_rand64() % 4], fo = outs[er_rand64() % 3];
        int fam = (int)(er_rand64() % FAM_COUNT), big = tr % 10 == 9, batched = tr % 4 == 1;
        int M = big ? (int)er_rand_int(200, 300) : (int)er_rand_int(1, 40), N = big ? (int)er_rand_int(200, 300) : (int)er_rand_int(1, 40);
        int K = big ? (int)er_rand_int(64, 256) : (int)er_rand_int(1, 600), GA = batched ? 2 : 1, GB = batched ? 3 : 1;
        int64_t na = (int64_t)GA * M * K, nb = (int64_t)GB * K * N, nc = (int64_t)GA * GB * M * N;
        double *a = malloc(sizeof(double) * (size_t)na), *b = malloc(sizeof(double) * (size_t)nb);
        uint64_t *A = malloc(8 * (size_t)na), *B = malloc(8 * (size_t)nb), *C = malloc(8 * (size_t)nc);
        gen_batched(fam, fx, GA, GB, M, K, N, a, b);
        int nan_case = tr % 13 == 5;
        for (int64_t i = 0; i < na; i++) er_store(A, fx, i, nan_case && i == na / 2 ? NAN : a[i]);
        for (int64_t i = 0; i < nb; i++) er_store(B, fx, i, b[i]);
        er_tensor tA, tB, tC;
        view_batched(&tA, &tB, &tC, fx, fo, batched, GA, GB, M, K, N, A, B, C);
        er_ref *ref;
        ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
        gen_outputs_near(ref, fo, nc, 1, C);
        int bx = er_format_storage_bits(fx) / 8, bo = er_format_storage_bits(fo) / 8;
        int padded = !batched && tr % 7 == 3; /* rows of N + 3 elements: a layout the GPU path hands to the host */
        int64_t ld = padded ? N + 3 : N, nstore = padded ? (int64_t)M * ld : nc;
        if (padded) {
            uint64_t *P = calloc((size_t)nstore, 8);
            for (int64_t e = 0; e < nc; e++) er_store(P, fo, e / N * ld + e % N, er_load(C, fo, e));
            free(C);
            C = P;
            er_tensor_view(&tC, fo, 2, (int64_t[]){M, N}, (int64_t[]){ld, 1}, C);
        }
        static const char *const stds[][2] = {{"any_order", ""}, {"mma:sm90", "outer=any"}, {"any_order", "compute=tf32"}, {"any_order", "rounding=faithful"}};
        int si = (int)(er_rand64() % 4);
        if (si == 1 && fx == ER_FP32) si = 0; /* fp32 operands need compute=tf32 for mma */
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, stds[si][0], stds[si][1]), ER_OK);
        char what[200];
        snprintf(what, sizeof what, "trial %ld (%s -> %s, %d x %d x %d%s, %s, '%s %s'%s%s)", tr, er_format_name(fx), er_format_name(fo), M, K,
                 N, batched ? ", batched" : "", fam_names[fam], stds[si][0], stds[si][1], nan_case ? ", a NaN operand" : "",
                 padded ? ", padded rows" : "");
        require_device_equals_host(ref, &tA, &tB, &tC, na, nb, nstore, bx, bo, &std, what);
        device_elems += nc;
        er_ref_free(ref);
        free(a); free(b); free(A); free(B); free(C);
    }
    printf("t-cuda: er_matmul_covers_device gave the host's report on %ld matrices (%ld elements)\n", trials, device_elems);
    printf("t-cuda: so far %ld matmul reports kept their classes on the device: %ld passed with elements the host "
           "decided, %ld had outputs outside\n", kept_mm, kept_mm_scattered, kept_mm_outside);
}
END_TEST

/* Outputs outside their sets, most or all of them (a kernel with a bug), as t-fast.c's fast_path_outputs_outside
 * draws them: each moved beyond one of its set's edges by 1 to 2^19 output ulps, or by 1 to 3 (the worst among many
 * equals), a few left inside in half the trials. The GPU's report is the host's, and the GPU decides most failing
 * elements itself (fast-path.md, Lemma F3): they count as unseen. */
START_TEST(matmul_outputs_outside_on_the_gpu) {
    er_test_reseed(720);
    long trials = (long)(12 * er_test_multiplier()) + 1; /* one at least, at any multiplier */
    static const er_format ins[] = {ER_FP16, ER_BF16, ER_FP32}, outs[] = {ER_FP32, ER_FP16, ER_BF16};
    int64_t outside = 0, unseen = 0;
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = ins[tr % 3], fo = outs[(tr / 3) % 3];
        int fam = (int)(er_rand64() % FAM_COUNT), M = (int)er_rand_int(100, 300), N = (int)er_rand_int(100, 300);
        int K = (int)er_rand_int(1, 600), ties = tr % 3 == 2, mixed = tr % 2 == 1;
        int64_t nc = (int64_t)M * N;
        double *a = malloc(sizeof(double) * (size_t)(M * K)), *b = malloc(sizeof(double) * (size_t)(K * N));
        uint64_t *A = malloc(8 * (size_t)(M * K)), *B = malloc(8 * (size_t)(K * N)), *C = malloc(8 * (size_t)nc);
        double *lo = malloc(sizeof(double) * (size_t)nc), *hi = malloc(sizeof(double) * (size_t)nc);
        gen_batched(fam, fx, 1, 1, M, K, N, a, b);
        for (int i = 0; i < M * K; i++) er_store(A, fx, i, a[i]);
        for (int i = 0; i < K * N; i++) er_store(B, fx, i, b[i]);
        er_tensor tA, tB, tC;
        view_batched(&tA, &tB, &tC, fx, fo, 0, 1, 1, M, K, N, A, B, C);
        er_ref *ref;
        ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
        er_standard std;
        er_standard_init(&std);
        gen_outputs_outside(ref, &tC, &std, fo, nc, ties, mixed, lo, hi, C);
        er_report r;
        ck_assert_int_eq(er_covers(&r, ref, &tC, &std), ER_OK);
        int64_t out_here = r.counts[ER_CLASS_OUTSIDE];
        er_report_clear(&r);
        char what[200];
        snprintf(what, sizeof what, "trial %ld (%s -> %s, %d x %d x %d, %s%s%s)", tr, er_format_name(fx),
                 er_format_name(fo), M, K, N, fam_names[fam], ties ? ", distances 1 to 3 ulps" : "",
                 mixed ? ", some passing" : "");
        int bx = er_format_storage_bits(fx) / 8, bo = er_format_storage_bits(fo) / 8;
        int64_t u = require_device_equals_host(ref, &tA, &tB, &tC, (int64_t)M * K, (int64_t)K * N, nc, bx, bo, &std,
                                               what);
        outside += out_here;
        unseen += u < out_here ? u : out_here;
        er_ref_free(ref);
        free(a); free(b); free(A); free(B); free(C); free(lo); free(hi);
    }
    ck_assert_int_gt(outside, trials * 5000);
    ER_REQUIRE(unseen > outside / 2, "the GPU decided only %lld of %lld outside elements itself", (long long)unseen,
               (long long)outside);
    printf("t-cuda: %lld outputs outside their sets, the GPU's reports the host's (at most %lld decided on the GPU)\n",
           (long long)outside, (long long)unseen);
}
END_TEST

/* One reference's checks of outputs C (format fo, nc elements) under std: its report, then (sets non-NULL) its sets'
 * report and every element's set into sets (3 nc doubles: lo, hi, slack). */
static void ref_checks(const er_ref *ref, const er_tensor *tC, const er_standard *std, er_report *rep, er_report *srep,
                       double *sets, int64_t nc) {
    ER_REQUIRE(er_covers(rep, ref, tC, std) == ER_OK, "covers: %s", er_last_error());
    if (!sets) return;
    ER_REQUIRE(er_covers_sets(srep, ref, tC, std, sets, sets + nc, sets + 2 * nc) == ER_OK, "sets: %s", er_last_error());
}

/* er_matmul_device (the reference of operands in device memory, its GEMM on the GPU) against er_matmul on host
 * copies: fp16, bf16, fp32 and fp8 operands, broadcast batches, sizes on both sides of the fast path's threshold,
 * operands with padded rows (the host's GEMM on the copies) and with a NaN; fp32, fp16 and bf16 outputs spread from
 * the correctly rounded result out to 2^20 ulps; the same fast path, the same reports and sets, and the same reports
 * of a GEMM epilogue over each (a bias row, gelu's tanh form, an fp16 store: the chain's epilogue pass). */
START_TEST(matmul_reference_of_device_operands_equals_the_host) {
    er_test_reseed(733);
    long trials = (long)(32 * er_test_multiplier()), fast = 0;
    static const er_format ins[] = {ER_FP16, ER_BF16, ER_FP32, ER_FP8_E4M3FN}, outs[] = {ER_FP32, ER_FP16, ER_BF16};
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = ins[er_rand64() % 4], fo = outs[er_rand64() % 3];
        int fam = (int)(er_rand64() % FAM_COUNT), batched = tr % 3 == 1, small = tr % 8 == 7;
        int padded = !batched && tr % 5 == 2, nan_case = tr % 11 == 5;
        int M = small ? (int)er_rand_int(1, 30) : (int)er_rand_int(64, 160);
        int N = small ? (int)er_rand_int(1, 30) : (int)er_rand_int(64, 160);
        int K = small ? (int)er_rand_int(1, 60) : (int)er_rand_int(64, 200), GA = batched ? 2 : 1, GB = batched ? 3 : 1;
        int64_t na = (int64_t)GA * M * K, nb = (int64_t)GB * K * N, nc = (int64_t)GA * GB * M * N;
        int64_t lda = padded ? K + 3 : K, nas = padded ? (int64_t)M * lda : na;
        double *a = malloc(sizeof(double) * (size_t)na), *b = malloc(sizeof(double) * (size_t)nb);
        uint64_t *A = calloc((size_t)nas, 8), *B = malloc(8 * (size_t)nb), *C = malloc(8 * (size_t)nc),
                 *Y = malloc(8 * (size_t)nc), *bias = malloc(8 * (size_t)N);
        gen_batched(fam, fx, GA, GB, M, K, N, a, b);
        for (int64_t i = 0; i < na; i++)
            er_store(A, fx, padded ? i / K * lda + i % K : i, nan_case && i == na / 2 ? NAN : a[i]);
        for (int64_t i = 0; i < nb; i++) er_store(B, fx, i, b[i]);
        for (int j = 0; j < N; j++) er_store(bias, ER_FP32, j, (double)(float)((double)(er_rand64() % 2001) / 1000 - 1));
        er_tensor tA, tB, tC, tY, tbias;
        view_batched(&tA, &tB, &tC, fx, fo, batched, GA, GB, M, K, N, A, B, C);
        if (padded) er_tensor_view(&tA, fx, 2, (int64_t[]){M, K}, (int64_t[]){lda, 1}, A);
        tY = tC;
        tY.format = ER_FP16;
        tY.data = Y;
        int nd = batched ? 4 : 2;
        int64_t bshape[4] = {GA, GB, M, N}, bstr[4] = {0, 0, 0, 1};
        er_tensor_view(&tbias, ER_FP32, nd, batched ? bshape : bshape + 2, batched ? bstr : bstr + 2, bias);
        int bx = er_format_storage_bits(fx) / 8;
        void *dA = to_device(A, (size_t)(nas * bx)), *dB = to_device(B, (size_t)(nb * bx));
        er_tensor vA = tA, vB = tB;
        vA.data = dA;
        vB.data = dB;
        er_ref *rh, *rd;
        ck_assert_int_eq(er_matmul(&rh, &tA, &tB), ER_OK);
        ER_REQUIRE(er_matmul_device(&rd, &vA, &vB, NULL) == ER_OK, "er_matmul_device: %s", er_last_error());
        cudaFree(dA); /* the reference keeps host copies */
        cudaFree(dB);
        ck_assert_int_eq(er_ref_fast(rd), er_ref_fast(rh));
        fast += er_ref_fast(rd);
        gen_outputs_near(rh, fo, nc, 1, C);
        static const char *const stds[][2] = {{"any_order", ""}, {"mma:sm90", "outer=any"}, {"any_order", "rounding=faithful"}};
        int si = (int)(er_rand64() % 3);
        if (si == 1 && fx == ER_FP32) si = 0; /* fp32 operands need compute=tf32 for mma */
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, stds[si][0], stds[si][1]), ER_OK);
        char what[200];
        snprintf(what, sizeof what, "trial %ld (%s -> %s, %d x %d x %d%s%s%s, %s, '%s %s')", tr, er_format_name(fx),
                 er_format_name(fo), M, K, N, batched ? ", batched" : "", padded ? ", padded rows" : "",
                 nan_case ? ", a NaN operand" : "", fam_names[fam], stds[si][0], stds[si][1]);
        double *sh = malloc(sizeof(double) * (size_t)(3 * nc)), *sd = malloc(sizeof(double) * (size_t)(3 * nc));
        er_report rh1, rd1, rh2, rd2;
        ref_checks(rh, &tC, &std, &rh1, &rh2, sh, nc);
        ref_checks(rd, &tC, &std, &rd1, &rd2, sd, nc);
        er_require_same_report(&rh1, &rd1, what);
        er_require_same_report(&rh2, &rd2, what);
        for (int64_t e = 0; e < 3 * nc; e++)
            ER_REQUIRE(memcmp(&sh[e], &sd[e], sizeof sh[e]) == 0, "%s: set value %lld: %a on the host, %a", what,
                       (long long)e, sh[e], sd[e]);
        er_report_clear(&rh1); er_report_clear(&rd1); er_report_clear(&rh2); er_report_clear(&rd2);
        /* the epilogue: bias, gelu's tanh form, an fp16 store */
        er_stage st[3] = {{ER_STAGE_ADD, &tbias, 0, ER_FP32, NULL}, {ER_STAGE_GELU_TANH, NULL, 0, ER_FP32, NULL},
                          {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}};
        er_ref *ch, *cd;
        ck_assert_int_eq(er_chain(&ch, rh, st, 3), ER_OK);
        ck_assert_int_eq(er_chain(&cd, rd, st, 3), ER_OK);
        gen_outputs_near(ch, ER_FP16, nc, 0, Y);
        ck_assert_int_eq(er_standard_parse(&std, stds[si][0], stds[si][1]), ER_OK);
        ref_checks(ch, &tY, &std, &rh1, NULL, NULL, nc);
        ref_checks(cd, &tY, &std, &rd1, NULL, NULL, nc);
        strncat(what, ", the epilogue", sizeof what - strlen(what) - 1);
        er_require_same_report(&rh1, &rd1, what);
        er_report_clear(&rh1); er_report_clear(&rd1);
        er_ref_free(ch); er_ref_free(cd); er_ref_free(rh); er_ref_free(rd);
        free(sh); free(sd); free(a); free(b); free(A); free(B); free(C); free(Y); free(bias);
    }
    ck_assert_int_gt(fast, trials / 2);
    printf("t-cuda: er_matmul_device gave the host's reference on %ld operand pairs (%ld on the fast path)\n", trials,
           fast);
}
END_TEST

/* Products that cancel in pairs across a warp's lanes (k and k + 16 of each 32: the same a, opposite b), of
 * exponents -8 to 14 and full fp16 mantissas, then 32 small products (about 2^-9 each) that make S: P / |S| in the
 * millions, where S_hat's bound cannot settle S's rounding and the double-double sum can (on an H200, a sum moved
 * by 2^-22 of itself in that step changed 19 of one case's exact elements to covered). */
static void gen_lane_pairs(int M, int K, int N, double *a, double *b) {
    int Kb = K - 32;
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            int q = k < Kb ? k / 32 * 16 + k % 16 : k;
            double m = (double)(1024 + (int)((i * 131 + q * 977) % 1024));
            a[(int64_t)i * K + k] = k < Kb ? ldexp(m, (int)((i * 7 + q * 5) % 12) - 4 - 10) : ldexp(m, -10);
        }
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) {
            int q = k < Kb ? k / 32 * 16 + k % 16 : k;
            double m = (double)(1024 + (int)((j * 337 + q * 613) % 1024));
            double sg = k < Kb && k % 32 >= 16 ? -1.0 : 1.0;
            b[(int64_t)k * N + j] = k < Kb ? sg * ldexp(m, (int)((j * 3 + q * 11) % 12) - 4 - 10) : ldexp(m, -20);
        }
}

/* Long sums (K = 2048 to 8192), where S_hat's error bound (K 2^-52 P) leaves outputs at rounding boundaries to
 * stage 2's double-double sum (fast-path.md, Lemma F2): small M and N, outputs next to the exact result, the
 * report the host's; every other trial of lane pairs (gen_lane_pairs). */
START_TEST(long_sums_on_the_gpu_equal_the_host) {
    er_test_reseed(711);
    long trials = (long)(12 * er_test_multiplier());
    static const int fams[] = {FAM_CANCEL, FAM_NORMAL, FAM_TIES};
    long device_elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = tr % 2 ? ER_BF16 : ER_FP16, fo = tr % 3 == 2 ? ER_FP16 : ER_FP32;
        int fam = fams[tr % 3], M = (int)er_rand_int(4, 16), N = (int)er_rand_int(4, 16), K = (int)er_rand_int(2048, 8192);
        int64_t na = (int64_t)M * K, nb = (int64_t)K * N, nc = (int64_t)M * N;
        double *a = malloc(sizeof(double) * (size_t)na), *b = malloc(sizeof(double) * (size_t)nb);
        uint64_t *A = malloc(8 * (size_t)na), *B = malloc(8 * (size_t)nb), *C = malloc(8 * (size_t)nc);
        int pairs = tr % 2 == 0;
        if (pairs) {
            fx = ER_FP16;
            K = K / 32 * 32 + 32;
            na = (int64_t)M * K;
            nb = (int64_t)K * N;
            a = realloc(a, sizeof(double) * (size_t)na);
            b = realloc(b, sizeof(double) * (size_t)nb);
            A = realloc(A, 8 * (size_t)na);
            B = realloc(B, 8 * (size_t)nb);
            gen_lane_pairs(M, K, N, a, b);
        } else {
            gen_batched(fam, fx, 1, 1, M, K, N, a, b);
        }
        for (int64_t i = 0; i < na; i++) er_store(A, fx, i, a[i]);
        for (int64_t i = 0; i < nb; i++) er_store(B, fx, i, b[i]);
        er_tensor tA, tB, tC;
        view_batched(&tA, &tB, &tC, fx, fo, 0, 1, 1, M, K, N, A, B, C);
        er_ref *ref;
        ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
        gen_outputs_near(ref, fo, nc, 1, C);
        int bx = er_format_storage_bits(fx) / 8, bo = er_format_storage_bits(fo) / 8;
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
        char what[160];
        snprintf(what, sizeof what, "long trial %ld (%s -> %s, %d x %d x %d, %s)", tr, er_format_name(fx),
                 er_format_name(fo), M, K, N, pairs ? "lane pairs" : fam_names[fam]);
        require_device_equals_host(ref, &tA, &tB, &tC, na, nb, nc, bx, bo, &std, what);
        device_elems += nc;
        er_ref_free(ref);
        free(a); free(b); free(A); free(B); free(C);
    }
    printf("t-cuda: long sums: er_matmul_covers_device gave the host's report on %ld matrices (%ld elements)\n", trials,
           device_elems);    printf("t-cuda: so far %ld matmul reports kept their classes on the device: %ld passed with elements the host "
           "decided, %ld had outputs outside\n", kept_mm, kept_mm_scattered, kept_mm_outside);
}
END_TEST

/* Sums whose exact value the DGEMM's bracket and stage 2's double-double cannot place against a rounding boundary,
 * as t-fast.c's fast_path_sums_on_a_tie builds them: on an fp32 tie (t = 0, the even float or the other one as the
 * output) and a hair (2^-80) to either side of one. The GPU's report is the host's; the ties the GPU decides itself,
 * its TwoSums finding the sum exact (fast-path.md, Lemma F5), so the host takes fewer than the 12 M sums of columns 1
 * to 12 (the 8 M hairs, and no more than the widest set adds). Then bf16 operands of random normal values (their
 * products of 16 bits add up exactly, and on an fp32 tie where a sum needs 25 bits), each output the sum's correct
 * rounding or a float beside it. */
START_TEST(matmul_sums_on_a_tie_on_the_gpu) {
    enum { M = ER_TIE_M, K = ER_TIE_K, N = ER_TIE_N };
    float A[M * K], B[K * N], C[M * N];
    gen_tie_sums(A, B, C);
    er_tensor tA, tB, tC;
    view_batched(&tA, &tB, &tC, ER_FP32, ER_FP32, 0, 1, 1, M, K, N, A, B, C);
    er_ref *ref;
    ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
    er_standard std;
    er_standard_init(&std);
    int64_t unseen = require_device_equals_host(ref, &tA, &tB, &tC, M * K, K * N, M * N, 4, 4, &std, "sums on a tie");
    er_ref_free(ref);
    printf("t-cuda: sums on a tie: the host took %lld of %d elements (the hairs: %d)\n", (long long)(M * N - unseen),
           M * N, 8 * M);
    ER_REQUIRE(M * N - unseen < 12 * M, "the host took %lld elements: the GPU decided no tie", (long long)(M * N - unseen));

    er_test_reseed(712);
    long trials = (long)(4 * er_test_multiplier()), taken = 0, elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        int m = 64, k = 512, n = 64;
        double *a = malloc(sizeof(double) * (size_t)(m * k)), *b = malloc(sizeof(double) * (size_t)(k * n));
        uint16_t *hA = malloc(2 * (size_t)(m * k)), *hB = malloc(2 * (size_t)(k * n));
        float *hC = malloc(4 * (size_t)(m * n));
        gen_batched(FAM_NORMAL, ER_BF16, 1, 1, m, k, n, a, b);
        for (int64_t i = 0; i < m * k; i++) er_store(hA, ER_BF16, i, a[i]);
        for (int64_t i = 0; i < k * n; i++) er_store(hB, ER_BF16, i, b[i]);
        view_batched(&tA, &tB, &tC, ER_BF16, ER_FP32, 0, 1, 1, m, k, n, hA, hB, hC);
        ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
        for (int64_t e = 0; e < m * n; e++) { /* the correct rounding, or a float beside it */
            double r;
            ck_assert_int_eq(er_ref_exact(ref, (int64_t[]){e / n, e % n}, ER_FP32, NULL, &r), ER_OK);
            hC[e] = nextafterf((float)r, (er_rand64() % 3 == 0 ? -INFINITY : er_rand64() % 2 ? INFINITY : (float)r));
        }
        char what[80];
        snprintf(what, sizeof what, "bf16 sums, trial %ld", tr);
        taken += m * n - require_device_equals_host(ref, &tA, &tB, &tC, m * k, k * n, m * n, 2, 4, &std, what);
        elems += m * n;
        er_ref_free(ref);
        free(a); free(b); free(hA); free(hB); free(hC);
    }
    printf("t-cuda: bf16 sums of 512 products: the host took %ld of %ld elements\n", taken, elems);
}
END_TEST

/* One softmax row family: x values of row r (n of them) in format fx. */
static void gen_softmax_rows(int fam, er_format fx, int64_t rows, int64_t n, void *X) {
    double scale = fam == 1 ? 30.0 : fam == 2 ? 1e-3 : 1.0;
    for (int64_t r = 0; r < rows; r++) {
        int masked = fam == 3 && r % 3 == 1, allinf = fam == 3 && r % 7 == 4, nanrow = fam == 4 && r % 5 == 2;
        for (int64_t j = 0; j < n; j++) {
            double v = er_rand_normal() * scale;
            if (fam == 5) v = (double)(er_rand64() % 3); /* ties: many equal maxima, exact exps */
            if (fam == 6) v = j % 2 ? 3e38 : -3e38;     /* x_j - m beyond fp32: the kernel's exp of -inf */
            if ((masked && er_rand64() % 2) || allinf) v = -INFINITY;
            if (nanrow && j == n / 2) v = er_rand64() % 2 ? NAN : INFINITY;
            er_store(X, fx, r * n + j, v);
        }
    }
}

/* Outputs at and around each element's set under std: in half the rows inside it alone (its ends, its middle, the
 * op in long double, mid[], rounded to fo), in the others also one to four ulps beyond its ends and rarely 2^20 ulps
 * off, NaN or +inf. all_inside 1: every row inside; 2: mid[] rounded alone, never a set's end, so that a set computed
 * narrower than the host's still holds its outputs (and its width shows in the report's widest and coarsest sets). */
static void gen_outputs_around(const er_ref *ref, const er_standard *std, const double *mid, er_format fo,
                               int64_t rows, int64_t n, int all_inside, void *C) {
    int64_t nc = rows * n;
    double *lo = malloc(sizeof(double) * (size_t)nc), *hi = malloc(sizeof(double) * (size_t)nc);
    uint8_t *fl = malloc((size_t)nc);
    ck_assert_int_eq(er_ref_enclosure(ref, 0, std, fo, lo, hi, fl), ER_OK);
    free(fl);
    for (int64_t r = 0; r < rows; r++) {
        int inside = all_inside || er_rand64() % 2;
        for (int64_t j = 0; j < n; j++) {
            int64_t e = r * n + j;
            double y = mid[e], l = lo[e], h = hi[e];
            int pick = (int)(er_rand64() % 16), k = 1 + (int)(er_rand64() % 4);
            if (inside && pick >= 6 && pick < 10) pick = 10 + pick % 2; /* its middle or the long double */
            if (all_inside == 2) pick = 11; /* mid[] */
            if (l == l && pick < 3) y = l;
            else if (l == l && pick < 6) y = h;
            else if (l == l && pick < 8) y = l - k * er_format_ulp(fo, l);
            else if (l == l && pick < 10) y = h + k * er_format_ulp(fo, h);
            else if (l == l && pick < 11) y = 0.5 * l + 0.5 * h;
            else if (pick == 15 && !inside && er_rand64() % 8 == 0)
                y = er_rand64() % 3 == 0 ? NAN : er_rand64() % 2 ? INFINITY : y + 0x1p20 * er_format_ulp(fo, y);
            er_round_double(&y, fo, y, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            er_store(C, fo, e, y);
        }
    }
    free(lo);
    free(hi);
}

/* gen_outputs_around softmax's sets, about the softmax in long double. */
static void gen_softmax_outputs(const er_ref *ref, const er_standard *std, er_format fx, const void *X, er_format fo,
                                int64_t rows, int64_t n, int all_inside, void *C) {
    double *mid = malloc(sizeof(double) * (size_t)(rows * n));
    for (int64_t r = 0; r < rows; r++) {
        long double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < n; j++) if (er_load(X, fx, r * n + j) > m) m = er_load(X, fx, r * n + j);
        for (int64_t j = 0; j < n; j++) s += expl((long double)er_load(X, fx, r * n + j) - m);
        for (int64_t j = 0; j < n; j++) mid[r * n + j] = (double)(expl((long double)er_load(X, fx, r * n + j) - m) / s);
    }
    gen_outputs_around(ref, std, mid, fo, rows, n, all_inside, C);
    free(mid);
}

/* The host's report rh and the device path's rd the same, field for field and in their JSON; both cleared. */
static void require_same_reports(er_report *rh, er_report *rd, const char *what) {
    er_require_same_report(rh, rd, what);
    er_require_same_json(rh, rd, what);
    er_report_clear(rh);
    er_report_clear(rd);
}

/* The reports whose classes a row path left on the device (er_report_keep_on_device), over the run. */
static long kept_reports;

/* A device call's report rk, made into a report marked er_report_keep_on_device (status st), against the host's rh:
 * where its classes stayed on the device (rk->classes NULL), er_report_classes gives NULL until
 * er_report_fetch_classes (twice: the second does nothing) brings them; then the same report, field for field and in
 * its JSON. rk is cleared. */
static void require_kept_same_in(const er_report *rh, er_report *rk, er_status st, const char *what, long *kept) {
    ER_REQUIRE(st == ER_OK, "device, kept: %s", er_last_error());
    if (!rk->classes) {
        ER_REQUIRE(rk->device_classes && er_report_classes(rk) == NULL && rk->n > 0,
                   "%s: a kept report has neither host nor device classes", what);
        (*kept)++;
    } else {
        ER_REQUIRE(!rk->device_classes, "%s: a report has both host and device classes", what);
    }
    ER_REQUIRE(er_report_fetch_classes(rk) == ER_OK, "%s: fetch: %s", what, er_last_error());
    ER_REQUIRE(rk->classes && !rk->device_classes && er_report_classes(rk) == rk->classes, "%s: fetch left no classes",
               what);
    ER_REQUIRE(er_report_fetch_classes(rk) == ER_OK, "%s: second fetch: %s", what, er_last_error());
    er_require_same_report(rh, rk, what);
    er_require_same_json(rh, rk, what);
    er_report_clear(rk);
}
/* The same, counting the kept reports in kept_reports (the row ops'). */
static void require_kept_same(const er_report *rh, er_report *rk, er_status st, const char *what) {
    require_kept_same_in(rh, rk, st, what, &kept_reports);
}

static void require_rows_device_equals_host(const er_ref *ref, int log, const er_tensor *tx, const er_tensor *tc,
                                            int dim, const er_standard *std, const char *what);

/* The host's report of softmax ref (of host views tx, tc) under std against er_softmax_covers_device's on device
 * copies of their data: the same, field for field and in their JSON. */
static void require_softmax_device_equals_host(const er_ref *ref, const er_tensor *tx, const er_tensor *tc, int dim,
                                               const er_standard *std, const char *what) {
    require_rows_device_equals_host(ref, 0, tx, tc, dim, std, what);
}

/* The same for softmax (log 0) or log_softmax (log 1). */
static void require_rows_device_equals_host(const er_ref *ref, int log, const er_tensor *tx, const er_tensor *tc,
                                            int dim, const er_standard *std, const char *what) {
    int64_t nc = er_tensor_numel(tx);
    void *dx = to_device(tx->data, (size_t)(nc * (er_format_storage_bits(tx->format) / 8)));
    void *dc = to_device(tc->data, (size_t)(nc * (er_format_storage_bits(tc->format) / 8)));
    er_tensor vx = *tx, vc = *tc;
    vx.data = dx;
    vc.data = dc;
    er_report rh, rd;
    ER_REQUIRE(er_covers(&rh, ref, tc, std) == ER_OK, "host: %s", er_last_error());
    er_status st = log ? er_log_softmax_covers_device(&rd, &vx, dim, &vc, std, NULL)
                       : er_softmax_covers_device(&rd, &vx, dim, &vc, std, NULL);
    ER_REQUIRE(st == ER_OK, "device: %s", er_last_error());
    er_report rk;
    ER_REQUIRE(er_report_keep_on_device(&rk) == ER_OK, "keep: %s", er_last_error());
    st = log ? er_log_softmax_covers_device(&rk, &vx, dim, &vc, std, NULL)
             : er_softmax_covers_device(&rk, &vx, dim, &vc, std, NULL);
    require_kept_same(&rh, &rk, st, what);
    require_same_reports(&rh, &rd, what);
    cudaFree(dx);
    cudaFree(dc);
}

/* softmax on the GPU against the host: inputs of fp32, fp16 and bf16 from six families (spread rows, rows of tiny
 * or huge exps, masked rows and rows of -inf alone, NaN and +inf, exact ties, differences beyond fp32), fp32, fp16
 * and bf16 outputs spread from the correctly rounded result out to 2^20 ulps (some NaN or infinite), rows of 1 to a
 * few thousand; the standards the GPU takes (exp_ulps=, div=, depth=, __expf's bound) and some it hands to the host
 * (online=, max=optional, subnormals=flush, a softmax along the first dimension). The reports must agree in every
 * field and in their JSON. */
START_TEST(softmax_on_the_gpu_equals_the_host) {
    er_test_reseed(730);
    long trials = (long)(60 * er_test_multiplier());
    static const er_format ins[] = {ER_FP32, ER_FP16, ER_BF16}, outs[] = {ER_FP32, ER_FP16, ER_BF16};
    static const char *const opts[] = {"",         "exp_ulps=1",           "exp_ulps=2.5", "div=divide",
                                       "div=reciprocal", "depth=12",   "math=fast div=divide", "online=yes",
                                       "max=optional",   "subnormals=flush"};
    long elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = ins[er_rand64() % 3], fo = outs[er_rand64() % 3];
        int fam = (int)(er_rand64() % 7), big = tr % 10 == 9, first_dim = tr % 17 == 8, ties = tr % 20 == 3;
        int64_t rows = big ? er_rand_int(100, 300) : er_rand_int(1, 40);
        int64_t n = big ? er_rand_int(1000, 3000) : er_rand_int(1, 300), nc = rows * n;
        if (ties) { /* rows of equal sets inside one GPU thread's elements: the widest set's first element wins */
            fam = 5;
            first_dim = 0;
            n = er_rand_int(600, 900);
            nc = rows * n;
        }
        void *X = malloc(8 * (size_t)nc), *C = malloc(8 * (size_t)nc);
        gen_softmax_rows(fam, fx, rows, n, X);
        er_tensor tx, tc;
        er_tensor_view(&tx, fx, 2, (int64_t[]){rows, n}, NULL, X);
        er_tensor_view(&tc, fo, 2, (int64_t[]){rows, n}, NULL, C);
        int dim = first_dim ? 0 : 1;
        er_ref *ref;
        ck_assert_int_eq(er_softmax(&ref, &tx, dim), ER_OK);
        er_standard std;
        const char *o = opts[er_rand64() % 10];
        if (strstr(o, "depth") && n > 4096) o = "";
        if (ties) o = "";
        ck_assert_int_eq(er_standard_parse(&std, "any_order", o), ER_OK);
        gen_softmax_outputs(ref, &std, fx, X, fo, rows, n, ties, C);
        char what[160];
        snprintf(what, sizeof what, "softmax %lld x %lld (dim %d), family %d, %s -> %s, '%s'", (long long)rows,
                 (long long)n, dim, fam, er_format_name(fx), er_format_name(fo), o);
        require_softmax_device_equals_host(ref, &tx, &tc, dim, &std, what);
        elems += nc;
        er_ref_free(ref);
        free(X);
        free(C);
    }
    printf("t-cuda: er_softmax_covers_device gave the host's report on %ld softmaxes (%ld elements)\n", trials, elems);    printf("t-cuda: %ld of the softmax reports marked to keep their classes on the device kept them there\n",
           kept_reports);
    ER_REQUIRE(kept_reports > 0, "no softmax report kept its classes on the device");
}
END_TEST

/* Rows of 2^17 elements, 200 of them: fewer blocks than rows (each block's scratch holds two doubles per element of
 * its row, at most 256 MiB in all), each block taking several rows in turn. */
START_TEST(long_softmax_rows_on_the_gpu_equal_the_host) {
    er_test_reseed(740);
    int64_t rows = 200, n = INT64_C(1) << 17, nc = rows * n;
    void *X = malloc(2 * (size_t)nc), *C = malloc(4 * (size_t)nc);
    gen_softmax_rows(0, ER_FP16, rows, n, X);
    er_tensor tx, tc;
    er_tensor_view(&tx, ER_FP16, 2, (int64_t[]){rows, n}, NULL, X);
    er_tensor_view(&tc, ER_FP32, 2, (int64_t[]){rows, n}, NULL, C);
    er_ref *ref;
    ck_assert_int_eq(er_softmax(&ref, &tx, 1), ER_OK);
    er_standard std;
    er_standard_init(&std);
    gen_softmax_outputs(ref, &std, ER_FP16, X, ER_FP32, rows, n, 0, C);
    require_softmax_device_equals_host(ref, &tx, &tc, 1, &std, "softmax 200 x 131072");
    printf("t-cuda: long rows: er_softmax_covers_device gave the host's report on %lld rows of %lld\n", (long long)rows,
           (long long)n);
    er_ref_free(ref);
    free(X);
    free(C);
}
END_TEST

/* Rows whose element 5 lies within 2^-49 of a midpoint of fp32 neighbours (three knobs moved until e_5 / S is there,
 * as t-ival's softmax_open_elements_in_double_double builds them; half the rows with tiny logits against a maximum of
 * 1, whose differences x_j - m are inexact): the enclosures in double leave such elements open, and Lemma S7's pass
 * decides them on the GPU as on the host. Outputs: the correct roundings (MPFR at 300 bits), so a rounding decided
 * the other way changes a class. The reports must agree in every field. */
START_TEST(softmax_open_elements_on_the_gpu_equal_the_host) {
    er_test_reseed(745);
    int64_t rows = (int64_t)(48 * er_test_multiplier()) + 2, n = 1000, nc = rows * n;
    float *X = malloc(sizeof(float) * (size_t)nc), *C = malloc(sizeof(float) * (size_t)nc);
    mpfr_t S, e, g, d;
    mpfr_inits2(300, S, e, g, d, (mpfr_ptr)0);
    long near = 0;
    for (int64_t r = 0; r < rows; r++) {
        float *x = X + r * n;
        int tiny = (int)(r % 2);
        double m = tiny ? 1.0 : 0.0;
        for (int64_t k = 0; k < n; k++) x[k] = (float)(m - 8.0 * er_rand_unit());
        x[0] = (float)m;
        for (int k = 1; k <= 3; k++) x[k] = (float)(m - 2.0 - 10.0 * (k - 1) + er_rand_unit());
        if (tiny)
            for (int64_t k = 6; k < n; k += 7) x[k] = (float)ldexp(er_rand_unit() - 0.5, -(int)er_rand_int(30, 120));
        for (int knob = 1; knob <= 4; knob++) {
            mpfr_set_zero(S, 1);
            for (int64_t k = 0; k < n; k++) {
                mpfr_set_flt(e, x[k], MPFR_RNDN);
                mpfr_sub_d(e, e, m, MPFR_RNDN); /* exact at 300 bits */
                mpfr_exp(e, e, MPFR_RNDN);
                mpfr_add(S, S, e, MPFR_RNDN);
            }
            mpfr_set_flt(e, x[5], MPFR_RNDN);
            mpfr_sub_d(e, e, m, MPFR_RNDN);
            mpfr_exp(e, e, MPFR_RNDN);
            mpfr_div(g, e, S, MPFR_RNDN);
            double q = mpfr_get_d(g, MPFR_RNDN);
            float f = (float)q;
            double mid = q < f || knob == 1 ? 0.5 * ((double)nextafterf(f, 0) + f) : 0.5 * ((double)f + nextafterf(f, 1));
            mpfr_sub_d(d, g, mid, MPFR_RNDN);
            mpfr_div_d(d, d, mid, MPFR_RNDN);
            if (knob == 4) {
                near += fabs(mpfr_get_d(d, MPFR_RNDN)) < 0x1p-49;
                break;
            }
            x[knob] = er_gen_knob_to_mid(x[knob], m, S, e, mid, d, e);
        }
        for (int64_t k = 0; k < n; k++) { /* the outputs: e_k / S correctly rounded, with S of the final row */
            mpfr_set_flt(e, x[k], MPFR_RNDN);
            mpfr_sub_d(e, e, m, MPFR_RNDN);
            mpfr_exp(e, e, MPFR_RNDN);
            mpfr_div(g, e, S, MPFR_RNDN);
            C[r * n + k] = mpfr_get_flt(g, MPFR_RNDN);
        }
    }
    mpfr_clears(S, e, g, d, (mpfr_ptr)0);
    ck_assert_int_ge(near, rows * 3 / 4);
    er_tensor tx, tc;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){rows, n}, NULL, X);
    er_tensor_view(&tc, ER_FP32, 2, (int64_t[]){rows, n}, NULL, C);
    er_ref *ref;
    ck_assert_int_eq(er_softmax(&ref, &tx, 1), ER_OK);
    er_standard std;
    er_standard_init(&std);
    require_softmax_device_equals_host(ref, &tx, &tc, 1, &std, "softmax rows with an element near a midpoint");
    printf("t-cuda: open elements: %ld of %lld rows with an element within 2^-49 of a midpoint of fp32, the GPU's "
           "report the host's\n", near, (long long)rows);
    er_ref_free(ref);
    free(X);
    free(C);
}
END_TEST

/* log_softmax on the GPU against the host: the inputs of the softmax test's families, outputs spread around each
 * element's set and the log_softmax in long double; the standards the GPU takes (exp_ulps=, log_ulps=, depth=,
 * math=fast) and some it hands to the host (subnormals=flush, along the first dimension). The reports must agree in
 * every field and in their JSON. */
START_TEST(log_softmax_on_the_gpu_equals_the_host) {
    er_test_reseed(760);
    long trials = (long)(40 * er_test_multiplier());
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    static const char *const opts[] = {"", "exp_ulps=1", "log_ulps=2", "depth=12", "math=fast", "exp_ulps=fast",
                                       "subnormals=flush"};
    long elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = fmts[er_rand64() % 3], fo = fmts[er_rand64() % 3];
        int fam = (int)(er_rand64() % 7), big = tr % 10 == 9, first_dim = tr % 13 == 6;
        int64_t rows = big ? er_rand_int(100, 300) : er_rand_int(1, 40);
        int64_t n = big ? er_rand_int(1000, 3000) : er_rand_int(1, 300), nc = rows * n;
        void *X = malloc(8 * (size_t)nc), *C = malloc(8 * (size_t)nc);
        gen_softmax_rows(fam, fx, rows, n, X);
        er_tensor tx, tc;
        er_tensor_view(&tx, fx, 2, (int64_t[]){rows, n}, NULL, X);
        er_tensor_view(&tc, fo, 2, (int64_t[]){rows, n}, NULL, C);
        int dim = first_dim ? 0 : 1;
        er_ref *ref;
        ck_assert_int_eq(er_log_softmax(&ref, &tx, dim), ER_OK);
        er_standard std;
        const char *o = opts[er_rand64() % 7];
        if (strstr(o, "depth") && n > 4096) o = "";
        ck_assert_int_eq(er_standard_parse(&std, "any_order", o), ER_OK);
        double *mid = malloc(sizeof(double) * (size_t)nc);
        int64_t len = dim ? n : rows, count = dim ? rows : n, step = dim ? 1 : n, stride = dim ? n : 1;
        for (int64_t r = 0; r < count; r++) {
            long double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < len; j++) m = fmaxl(m, er_load(X, fx, r * stride + j * step));
            for (int64_t j = 0; j < len; j++) sum += expl((long double)er_load(X, fx, r * stride + j * step) - m);
            for (int64_t j = 0; j < len; j++) {
                int64_t e = r * stride + j * step;
                mid[e] = (double)((long double)er_load(X, fx, e) - m - logl(sum));
            }
        }
        gen_outputs_around(ref, &std, mid, fo, rows, n, 0, C);
        free(mid);
        char what[160];
        snprintf(what, sizeof what, "log_softmax %lld x %lld (dim %d), family %d, %s -> %s, '%s'", (long long)rows,
                 (long long)n, dim, fam, er_format_name(fx), er_format_name(fo), o);
        require_rows_device_equals_host(ref, 1, &tx, &tc, dim, &std, what);
        elems += nc;
        er_ref_free(ref);
        free(X);
        free(C);
    }
    printf("t-cuda: er_log_softmax_covers_device gave the host's report on %ld log_softmaxes (%ld elements)\n", trials,
           elems);    printf("t-cuda: %ld of the log_softmax reports marked to keep their classes on the device kept them there\n",
           kept_reports);
    ER_REQUIRE(kept_reports > 0, "no log_softmax report kept its classes on the device");
}
END_TEST

/* One rmsnorm or layernorm row family: x values of row r (n of them) in format fx. 0: normal values of a random scale
 * per row (offset: half the rows moved by 8 times it times a normal value); 1: values spread over 2^-60 .. 2^20
 * (squares far below the largest: the window's tail; rows too wide for layernorm's integers); 2: zeros among them,
 * and rows of zeros alone; 3: a NaN or an infinity in some rows; 4: rows of one value; 5: huge values (sums of
 * squares beyond fp32: rstd's set down to 0, layernorm's no claim). */
static void gen_norm_rows(int fam, er_format fx, int64_t rows, int64_t n, int offset, void *X) {
    for (int64_t r = 0; r < rows; r++) {
        double scale = ldexp(1.0, (int)er_rand_int(-12, 12)), off = 0;
        if (offset) off = er_rand64() % 2 ? 0 : 8 * scale * er_rand_normal();
        double one = er_rand_normal();
        int zrow = fam == 2 && r % 4 == 1, special = fam == 3 && r % 3 == 2;
        for (int64_t j = 0; j < n; j++) {
            double v = off + er_rand_normal() * scale;
            if (fam == 1) v = ldexp(er_rand_unit() + 0.5, (int)er_rand_int(-60, 20)) * (er_rand64() % 2 ? 1 : -1);
            if ((fam == 2 && er_rand64() % 3 == 0) || zrow) v = 0;
            if (special && j == n / 2) v = er_rand64() % 2 ? NAN : -INFINITY;
            if (fam == 4) v = one;
            if (fam == 5) v = er_rand_normal() * 1e30;
            er_store(X, fx, r * n + j, v);
        }
    }
}

/* The host's report of rmsnorm ref (host views tx, tw, tc) against er_rmsnorm_covers_device's on device copies. */
static void require_rmsnorm_device_equals_host(const er_ref *ref, const er_tensor *tx, const er_tensor *tw, double eps,
                                               const er_tensor *tc, const er_standard *std, const char *what) {
    int64_t nc = er_tensor_numel(tx), nw = tw ? er_tensor_numel(tw) : 0;
    void *dx = to_device(tx->data, (size_t)(nc * (er_format_storage_bits(tx->format) / 8)));
    void *dc = to_device(tc->data, (size_t)(nc * (er_format_storage_bits(tc->format) / 8)));
    void *dw = tw ? to_device(tw->data, (size_t)(nw * (er_format_storage_bits(tw->format) / 8))) : NULL;
    er_tensor vx = *tx, vc = *tc, vw;
    vx.data = dx;
    vc.data = dc;
    if (tw) { vw = *tw; vw.data = dw; }
    er_report rh, rd;
    ER_REQUIRE(er_covers(&rh, ref, tc, std) == ER_OK, "host: %s", er_last_error());
    ER_REQUIRE(er_rmsnorm_covers_device(&rd, &vx, tw ? &vw : NULL, eps, &vc, std, NULL) == ER_OK, "device: %s",
               er_last_error());
    er_report rk;
    ER_REQUIRE(er_report_keep_on_device(&rk) == ER_OK, "keep: %s", er_last_error());
    require_kept_same(&rh, &rk, er_rmsnorm_covers_device(&rk, &vx, tw ? &vw : NULL, eps, &vc, std, NULL), what);
    require_same_reports(&rh, &rd, what);
    cudaFree(dx);
    cudaFree(dc);
    if (dw) cudaFree(dw);
}

/* dy and y rows for softmax's backward pass (rows x n, formats fd, fy): y a softmax of random logits (spread 1, 10 or
 * 60 wide: tiny probabilities, some exact zeros), dy from six families: normal of several scales, on a grid of eighths
 * (ties), each dy_i near D (dy_i - D cancels: a constant plus 2^-20 noise), huge among tiny, a NaN or an infinity in
 * one row in eight, zeros. */
static void gen_sbwd_rows(int fam, er_format fd, er_format fy, int64_t rows, int64_t n, void *DY, void *Y) {
    double *lg = malloc(sizeof(double) * (size_t)n);
    for (int64_t r = 0; r < rows; r++) {
        double w = (double[]){1, 10, 60}[er_rand64() % 3], m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; j++) {
            lg[j] = w * er_rand_normal();
            m = lg[j] > m ? lg[j] : m;
        }
        for (int64_t j = 0; j < n; j++) sum += exp(lg[j] - m);
        double c = er_rand_normal(), scale = ldexp(1.0, (int)er_rand_int(-12, 12));
        for (int64_t j = 0; j < n; j++) {
            double y = j % 13 == 7 && fam == 5 ? 0.0 : exp(lg[j] - m) / sum, d = er_rand_normal() * scale;
            if (fam == 1) d = (double)er_rand_int(-64, 64) / 8;
            if (fam == 2) d = c + ldexp(er_rand_normal(), -20);
            if (fam == 3) d = j % 11 == 2 ? 3e4 * er_rand_normal() : 1e-6 * er_rand_normal();
            if (fam == 4 && r % 8 == 5 && j == n / 2) d = er_rand64() % 2 ? NAN : INFINITY;
            if (fam == 5 && er_rand64() % 4 == 0) d = 0;
            er_store(DY, fd, r * n + j, d);
            er_store(Y, fy, r * n + j, y);
        }
    }
    free(lg);
}

/* The host's report of softmax_backward or log_softmax_backward ref (host views tdy, ty, tc) under std against
 * er_softmax_backward_covers_device's (log: er_log_softmax_backward_covers_device's) on device copies: the same, field
 * for field and in their JSON (also with the classes kept on the device). */
static void require_sbwd_device_equals_host(int logop, const er_ref *ref, const er_tensor *tdy, const er_tensor *ty,
                                            const er_tensor *tc, int dim, const er_standard *std, const char *what) {
    const er_tensor *hv[3] = {tdy, ty, tc};
    er_tensor dv[3];
    void *dp[3];
    for (int i = 0; i < 3; i++) {
        dp[i] = to_device(hv[i]->data, (size_t)(er_tensor_numel(hv[i]) * (er_format_storage_bits(hv[i]->format) / 8)));
        dv[i] = *hv[i];
        dv[i].data = dp[i];
    }
    er_status (*dev)(er_report *, const er_tensor *, const er_tensor *, int, const er_tensor *, const er_standard *,
                     void *) = logop ? er_log_softmax_backward_covers_device : er_softmax_backward_covers_device;
    er_report rh, rd, rk;
    ER_REQUIRE(er_covers(&rh, ref, tc, std) == ER_OK, "host: %s", er_last_error());
    ER_REQUIRE(dev(&rd, &dv[0], &dv[1], dim, &dv[2], std, NULL) == ER_OK, "device: %s", er_last_error());
    ER_REQUIRE(er_report_keep_on_device(&rk) == ER_OK, "keep: %s", er_last_error());
    require_kept_same(&rh, &rk, dev(&rk, &dv[0], &dv[1], dim, &dv[2], std, NULL), what);
    require_same_reports(&rh, &rd, what);
    for (int i = 0; i < 3; i++) cudaFree(dp[i]);
}

/* softmax_backward (logop: log_softmax_backward) on the GPU against the host, `trials` checks: dy and y of fp32, fp16
 * and bf16 (gen_sbwd_rows' families; log: y the logs of its probabilities, 0 giving -inf or in every other row -1e9
 * (fp16: -1e4) as a mask, in some rows one value above 2^10, which no log_softmax gives, and in two families one dy
 * per row where its dx cancels, or nearly: up to 2^10 of dy's ulps away), fp32, fp16 and bf16 outputs spread from the
 * correctly rounded result out to 2^20 ulps (some NaN or infinite; in a third of the trials the long double result
 * alone), rows of 1 to a few thousand; the standards opts[0 .. 5) (the GPU takes the first four, and rows along the first dimension go to the
 * host). The reports must agree in every field and in their JSON. Returns the elements checked. */
static long sbwd_on_the_gpu(int logop, long trials, const char *const opts[5]) {
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    const char *op = logop ? "log_softmax_backward" : "softmax_backward";
    long elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        er_format fd = fmts[er_rand64() % 3], fy = er_rand64() % 2 ? fd : fmts[er_rand64() % 3],
                  fo = fmts[er_rand64() % 3];
        int fam = (int)(er_rand64() % 6), big = tr % 10 == 9, first_dim = tr % 17 == 8;
        int64_t rows = big ? er_rand_int(100, 300) : er_rand_int(1, 40);
        int64_t n = big ? er_rand_int(1000, 3000) : er_rand_int(1, 600), nc = rows * n;
        void *DY = malloc(8 * (size_t)nc), *Y = malloc(8 * (size_t)nc), *C = malloc(8 * (size_t)nc);
        gen_sbwd_rows(fam, fd, fy, rows, n, DY, Y);
        for (int64_t e = 0; logop && e < nc; e++) {
            double y = log(er_load(Y, fy, e));
            if (fam == 4 && e % 997 == 3) y = 1500;
            if (fam == 5 && y == -INFINITY && (e / n) % 2) y = fy == ER_FP16 ? -1e4 : -1e9; /* masked by a constant */
            er_store(Y, fy, e, y);
        }
        for (int64_t r = 0; logop && (fam == 0 || fam == 2) && r < rows; r++) { /* one dx cancelling in each row, */
            int64_t i = r * n + er_rand_int(0, n - 1); /* to its dy's rounding or by up to 2^10 of dy's ulps */
            long double so = 0, e = expl(er_load(Y, fy, i));
            for (int64_t j = r * n; j < (r + 1) * n; j++) so += j == i ? 0 : er_load(DY, fd, j);
            double g = (double)(so * e / (1 - e));
            g += er_rand64() % 4 ? (double)er_rand_int(-1024, 1024) * er_format_ulp(fd, g) : 0.0;
            if (e < 1) er_store(DY, fd, i, g);
        }
        er_tensor tdy, ty, tc;
        er_tensor_view(&tdy, fd, 2, (int64_t[]){rows, n}, NULL, DY);
        er_tensor_view(&ty, fy, 2, (int64_t[]){rows, n}, NULL, Y);
        er_tensor_view(&tc, fo, 2, (int64_t[]){rows, n}, NULL, C);
        int dim = first_dim ? 0 : 1;
        er_ref *ref;
        ck_assert_int_eq((logop ? er_log_softmax_backward : er_softmax_backward)(&ref, &tdy, &ty, dim), ER_OK);
        er_standard std;
        const char *o = opts[er_rand64() % 5];
        ck_assert_int_eq(er_standard_parse(&std, "any_order", o), ER_OK);
        double *mid = malloc(sizeof(double) * (size_t)nc);
        int64_t R = dim ? rows : n, L = dim ? n : rows; /* the rows along dim, their length */
        for (int64_t r = 0; r < R; r++) {
            long double D = 0; /* sum dy_j y_j (logop: sum dy_j) */
            for (int64_t j = 0; j < L; j++) {
                int64_t e = dim ? r * n + j : j * n + r;
                D += (long double)er_load(DY, fd, e) * (logop ? 1.0 : er_load(Y, fy, e));
            }
            for (int64_t j = 0; j < L; j++) {
                int64_t e = dim ? r * n + j : j * n + r;
                long double dy = er_load(DY, fd, e), y = er_load(Y, fy, e);
                mid[e] = (double)(logop ? dy - expl(y) * D : y * (dy - D));
            }
        }
        gen_outputs_around(ref, &std, mid, fo, rows, n, tr % 3 == 0 ? 2 : 0, C);
        free(mid);
        char what[200];
        snprintf(what, sizeof what, "%s %lld x %lld (dim %d), family %d, %s, %s -> %s, '%s'", op, (long long)rows,
                 (long long)n, dim, fam, er_format_name(fd), er_format_name(fy), er_format_name(fo), o);
        require_sbwd_device_equals_host(logop, ref, &tdy, &ty, &tc, dim, &std, what);
        elems += nc;
        er_ref_free(ref);
        free(DY);
        free(Y);
        free(C);
    }
    return elems;
}

START_TEST(softmax_backward_on_the_gpu_equals_the_host) {
    er_test_reseed(770);
    long trials = (long)(80 * er_test_multiplier()), kept0 = kept_reports;
    static const char *const opts[] = {"", "products=compute", "depth=12", "products=either", "compute=fp64"};
    long elems = sbwd_on_the_gpu(0, trials, opts);
    printf("t-cuda: er_softmax_backward_covers_device gave the host's report on %ld checks (%ld elements); %ld of its "
           "reports marked to keep their classes on the device kept them there\n", trials, elems,
           kept_reports - kept0);
    ER_REQUIRE(kept_reports > kept0, "no softmax_backward report kept its classes on the device");
}
END_TEST

START_TEST(log_softmax_backward_on_the_gpu_equals_the_host) {
    er_test_reseed(790);
    long trials = (long)(80 * er_test_multiplier()), kept0 = kept_reports;
    static const char *const opts[] = {"", "exp_ulps=4", "depth=12", "exp_ulps=1", "exp_ulps=fast"};
    long elems = sbwd_on_the_gpu(1, trials, opts);
    printf("t-cuda: er_log_softmax_backward_covers_device gave the host's report on %ld checks (%ld elements); %ld of "
           "its reports marked to keep their classes on the device kept them there\n", trials, elems,
           kept_reports - kept0);
    ER_REQUIRE(kept_reports > kept0, "no log_softmax_backward report kept its classes on the device");
}
END_TEST

/* rmsnorm on the GPU against the host: inputs of fp32, fp16 and bf16 from six families (gen_norm_rows), weights of
 * the three formats (some zero, negative or huge) or none, eps 0 or small, fp32, fp16 and bf16 outputs spread from
 * the correctly rounded result out to 2^20 ulps (some NaN or infinite), rows of 1 to a few thousand, 2-D and 3-D; the
 * standards the GPU takes (rsqrt_ulps=, mean=, depth=, math=triton, variance=two_pass) and some it hands to the host
 * (variance=welford or either, compute=fp64). The reports must agree in every field and in their JSON. */
START_TEST(rmsnorm_on_the_gpu_equals_the_host) {
    er_test_reseed(750);
    long trials = (long)(60 * er_test_multiplier());
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    static const char *const opts[] = {"",           "rsqrt_ulps=1", "rsqrt_ulps=4", "mean=divide",
                                       "mean=reciprocal", "depth=12", "math=triton",  "variance=two_pass",
                                       "variance=welford", "variance=either", "compute=fp64"};
    long elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = fmts[er_rand64() % 3], fo = fmts[er_rand64() % 3], fw = fmts[er_rand64() % 3];
        int fam = (int)(er_rand64() % 6), big = tr % 10 == 9, three = tr % 7 == 3, weight = er_rand64() % 4 != 0;
        int64_t rows = big ? er_rand_int(100, 300) : er_rand_int(1, 40);
        int64_t n = big ? er_rand_int(1000, 3000) : er_rand_int(1, 300), nc = rows * n;
        void *X = malloc(8 * (size_t)nc), *C = malloc(8 * (size_t)nc), *W = malloc(8 * (size_t)n);
        gen_norm_rows(fam, fx, rows, n, 0, X);
        for (int64_t j = 0; j < n; j++) {
            int k = (int)(er_rand64() % 16);
            er_store(W, fw, j, k == 0 ? 0.0 : k == 1 ? -er_rand_unit() : k == 2 ? 3e4 : 1 + 0.25 * er_rand_normal());
        }
        double eps = er_rand64() % 3 == 0 ? 0.0 : 1e-5;
        er_tensor tx, tc, tw;
        if (three) {
            er_tensor_view(&tx, fx, 3, (int64_t[]){rows, 1, n}, NULL, X);
            er_tensor_view(&tc, fo, 3, (int64_t[]){rows, 1, n}, NULL, C);
        } else {
            er_tensor_view(&tx, fx, 2, (int64_t[]){rows, n}, NULL, X);
            er_tensor_view(&tc, fo, 2, (int64_t[]){rows, n}, NULL, C);
        }
        er_tensor_view(&tw, fw, 1, (int64_t[]){n}, NULL, W);
        er_ref *ref;
        ck_assert_int_eq(er_rmsnorm(&ref, &tx, weight ? &tw : NULL, eps), ER_OK);
        er_standard std;
        const char *o = opts[er_rand64() % 11];
        ck_assert_int_eq(er_standard_parse(&std, "any_order", o), ER_OK);
        double *mid = malloc(sizeof(double) * (size_t)nc);
        for (int64_t r = 0; r < rows; r++) {
            long double q = 0;
            for (int64_t j = 0; j < n; j++) q += (long double)er_load(X, fx, r * n + j) * er_load(X, fx, r * n + j);
            long double rs = 1 / sqrtl(q / n + eps);
            for (int64_t j = 0; j < n; j++)
                mid[r * n + j] = (double)(er_load(X, fx, r * n + j) * rs * (weight ? er_load(W, fw, j) : 1.0));
        }
        gen_outputs_around(ref, &std, mid, fo, rows, n, 0, C);
        free(mid);
        char what[160];
        snprintf(what, sizeof what, "rmsnorm %lld x %lld, family %d, %s -> %s, weight %s, eps %g, '%s'",
                 (long long)rows, (long long)n, fam, er_format_name(fx), er_format_name(fo),
                 weight ? er_format_name(fw) : "none", eps, o);
        require_rmsnorm_device_equals_host(ref, &tx, weight ? &tw : NULL, eps, &tc, &std, what);
        elems += nc;
        er_ref_free(ref);
        free(X);
        free(C);
        free(W);
    }
    printf("t-cuda: er_rmsnorm_covers_device gave the host's report on %ld rmsnorms (%ld elements)\n", trials, elems);    printf("t-cuda: %ld of the rmsnorm reports marked to keep their classes on the device kept them there\n",
           kept_reports);
    ER_REQUIRE(kept_reports > 0, "no rmsnorm report kept its classes on the device");
}
END_TEST

/* layernorm in long double into mid (rows x n; weight W and bias B of format fw, NULL: none). */
static void ln_mid(const void *X, er_format fx, const void *W, const void *B, er_format fw, int64_t rows, int64_t n,
                   double eps, double *mid) {
    for (int64_t r = 0; r < rows; r++) {
        long double s = 0, q = 0;
        for (int64_t j = 0; j < n; j++) s += er_load(X, fx, r * n + j);
        long double m = s / n;
        for (int64_t j = 0; j < n; j++) q += (er_load(X, fx, r * n + j) - m) * (er_load(X, fx, r * n + j) - m);
        long double rs = 1 / sqrtl(q / n + eps);
        for (int64_t j = 0; j < n; j++)
            mid[r * n + j] = (double)((er_load(X, fx, r * n + j) - m) * rs * (W ? er_load(W, fw, j) : 1.0) +
                                      (B ? er_load(B, fw, j) : 0.0));
    }
}

/* The host's report of layernorm ref (host views tx, tw, tb, tc; y alone) against er_layernorm_covers_device's on
 * device copies. */
static void require_layernorm_device_equals_host(const er_ref *ref, const er_tensor *tx, int nd, const er_tensor *tw,
                                                 const er_tensor *tb, double eps, const er_tensor *tc,
                                                 const er_standard *std, const char *what) {
    const er_tensor *hv[4] = {tx, tw, tb, tc};
    er_tensor dv[4];
    void *dp[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 4; i++) {
        if (!hv[i]) continue;
        dp[i] = to_device(hv[i]->data, (size_t)(er_tensor_numel(hv[i]) * (er_format_storage_bits(hv[i]->format) / 8)));
        dv[i] = *hv[i];
        dv[i].data = dp[i];
    }
    er_report rh, rd;
    ER_REQUIRE(er_covers(&rh, ref, tc, std) == ER_OK, "host: %s", er_last_error());
    ER_REQUIRE(er_layernorm_covers_device(&rd, &dv[0], nd, tw ? &dv[1] : NULL, tb ? &dv[2] : NULL, eps, &dv[3], std,
                                          NULL) == ER_OK,
               "device: %s", er_last_error());
    er_report rk;
    ER_REQUIRE(er_report_keep_on_device(&rk) == ER_OK, "keep: %s", er_last_error());
    require_kept_same(&rh, &rk,
                      er_layernorm_covers_device(&rk, &dv[0], nd, tw ? &dv[1] : NULL, tb ? &dv[2] : NULL, eps, &dv[3],
                                                 std, NULL),
                      what);
    require_same_reports(&rh, &rd, what);
    for (int i = 0; i < 4; i++)
        if (dp[i]) cudaFree(dp[i]);
}

/* layernorm on the GPU against the host: inputs of fp32, fp16 and bf16 from six families (gen_norm_rows, with
 * offsets), weights and biases of the three formats (some zero, negative or huge; one NaN in some trials) or none
 * (each pair in turn), eps 0 or small, fp32 (half the trials), fp16 and bf16 outputs spread from the correctly rounded
 * result out to 2^20 ulps (some NaN or infinite; in a third of the trials the long double result alone), rows of 1 to
 * a few thousand, normalised over the last one or two dimensions; the standards the GPU takes (variance=, rsqrt_ulps=,
 * mean=, depth=, combine_depth=, math=triton) and one it hands to the host (compute=fp64). The reports must agree in
 * every field and in their JSON. */
START_TEST(layernorm_on_the_gpu_equals_the_host) {
    er_test_reseed(790);
    long trials = (long)(60 * er_test_multiplier());
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    static const char *const opts[] = {"",
                                       "rsqrt_ulps=1",
                                       "rsqrt_ulps=4",
                                       "mean=divide",
                                       "mean=reciprocal",
                                       "depth=12",
                                       "math=triton variance=two_pass",
                                       "variance=two_pass",
                                       "variance=welford",
                                       "variance=welford combine_depth=3 depth=12",
                                       "compute=fp64"};
    long elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = fmts[er_rand64() % 3], fo = fmts[er_rand64() % 4 % 3], fw = fmts[er_rand64() % 3];
        int fam = (int)(er_rand64() % 6), big = tr % 10 == 9, two = tr % 5 == 2;
        int weight = tr % 2, bias = tr / 2 % 2, badw = tr % 17 == 5; /* each pair in turn */
        int64_t rows = big ? er_rand_int(100, 300) : er_rand_int(1, 40);
        int64_t n = big ? er_rand_int(1000, 3000) : er_rand_int(1, 300), nc = rows * n, n2 = two ? 2 : 1;
        n += n % n2; /* two dimensions: n2 x n / n2 */
        nc = rows * n;
        void *X = malloc(8 * (size_t)nc), *C = malloc(8 * (size_t)nc), *W = malloc(8 * (size_t)n),
             *B = malloc(8 * (size_t)n);
        gen_norm_rows(fam, fx, rows, n, 1, X);
        for (int64_t j = 0; j < n; j++) {
            int k = (int)(er_rand64() % 16);
            er_store(W, fw, j, k == 0 ? 0.0 : k == 1 ? -er_rand_unit() : k == 2 ? 3e4 : 1 + 0.25 * er_rand_normal());
            er_store(B, fw, j, k == 3 ? 0.0 : k == 4 ? 2e4 : 0.5 * er_rand_normal());
        }
        bias |= badw && !weight;
        if (badw) er_store(weight ? W : B, fw, n / 2, NAN);
        double eps = er_rand64() % 3 == 0 ? 0.0 : 1e-5;
        er_tensor tx, tc, tw, tb;
        int64_t xs[3] = {rows, n2, n / n2}, ws[2] = {n2, n / n2};
        er_tensor_view(&tx, fx, two ? 3 : 2, two ? xs : (int64_t[]){rows, n}, NULL, X);
        er_tensor_view(&tc, fo, two ? 3 : 2, two ? xs : (int64_t[]){rows, n}, NULL, C);
        er_tensor_view(&tw, fw, two ? 2 : 1, two ? ws : (int64_t[]){n}, NULL, W);
        er_tensor_view(&tb, fw, two ? 2 : 1, two ? ws : (int64_t[]){n}, NULL, B);
        int nd = two ? 2 : 1;
        er_ref *ref;
        ck_assert_int_eq(er_layernorm(&ref, &tx, nd, weight ? &tw : NULL, bias ? &tb : NULL, eps), ER_OK);
        er_standard std;
        const char *o = opts[er_rand64() % 11];
        ck_assert_int_eq(er_standard_parse(&std, "any_order", o), ER_OK);
        double *mid = malloc(sizeof(double) * (size_t)nc);
        ln_mid(X, fx, weight ? W : NULL, bias ? B : NULL, fw, rows, n, eps, mid);
        gen_outputs_around(ref, &std, mid, fo, rows, n, tr % 3 == 1 ? 2 : 0, C);
        free(mid);
        char what[200];
        snprintf(what, sizeof what, "layernorm %lld x %lld (%d dims), family %d, %s -> %s, weight %s, bias %s%s, "
                 "eps %g, '%s'", (long long)rows, (long long)n, nd, fam, er_format_name(fx), er_format_name(fo),
                 weight ? er_format_name(fw) : "none", bias ? er_format_name(fw) : "none", badw ? " (a NaN)" : "",
                 eps, o);
        require_layernorm_device_equals_host(ref, &tx, nd, weight ? &tw : NULL, bias ? &tb : NULL, eps, &tc, &std,
                                             what);
        elems += nc;
        er_ref_free(ref);
        free(X);
        free(C);
        free(W);
        free(B);
    }
    printf("t-cuda: er_layernorm_covers_device gave the host's report on %ld layernorms (%ld elements)\n", trials,
           elems);    printf("t-cuda: %ld of the layernorm reports marked to keep their classes on the device kept them there\n",
           kept_reports);
    ER_REQUIRE(kept_reports > 0, "no layernorm report kept its classes on the device");
}
END_TEST

/* More rows than blocks (3000 rows; 8 blocks per multiprocessor, 1056 on an H200): each block takes several rows in
 * turn, reusing its shared memory, for softmax, log_softmax, rmsnorm and layernorm, with outputs around their sets. */
START_TEST(many_rows_on_the_gpu_equal_the_host) {
    er_test_reseed(770);
    int64_t rows = 3000, n = 97, nc = rows * n;
    void *X = malloc(4 * (size_t)nc), *C = malloc(4 * (size_t)nc), *W = malloc(4 * (size_t)n);
    double *mid = malloc(sizeof(double) * (size_t)nc);
    gen_softmax_rows(0, ER_FP32, rows, n, X);
    for (int64_t j = 0; j < n; j++) er_store(W, ER_FP32, j, 1 + 0.25 * er_rand_normal());
    er_tensor tx, tc, tw;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){rows, n}, NULL, X);
    er_tensor_view(&tc, ER_FP32, 2, (int64_t[]){rows, n}, NULL, C);
    er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){n}, NULL, W);
    er_standard std;
    er_standard_init(&std);
    for (int op = 0; op < 4; op++) {
        er_ref *ref;
        if (op == 3) {
            ck_assert_int_eq(er_layernorm(&ref, &tx, 1, &tw, &tw, 1e-6), ER_OK);
            ln_mid(X, ER_FP32, W, W, ER_FP32, rows, n, 1e-6, mid);
            gen_outputs_around(ref, &std, mid, ER_FP32, rows, n, 0, C);
            require_layernorm_device_equals_host(ref, &tx, 1, &tw, &tw, 1e-6, &tc, &std, "layernorm 3000 x 97");
            er_ref_free(ref);
            continue;
        }
        if (op == 2) ck_assert_int_eq(er_rmsnorm(&ref, &tx, &tw, 1e-6), ER_OK);
        else ck_assert_int_eq(op ? er_log_softmax(&ref, &tx, 1) : er_softmax(&ref, &tx, 1), ER_OK);
        for (int64_t r = 0; r < rows; r++) { /* the middle of each set is enough for a central value here */
            long double m = -INFINITY, sum = 0, q = 0;
            for (int64_t j = 0; j < n; j++) m = fmaxl(m, er_load(X, ER_FP32, r * n + j));
            for (int64_t j = 0; j < n; j++) {
                long double v = er_load(X, ER_FP32, r * n + j);
                sum += expl(v - m);
                q += v * v;
            }
            for (int64_t j = 0; j < n; j++) {
                long double v = er_load(X, ER_FP32, r * n + j);
                mid[r * n + j] = (double)(op == 0   ? expl(v - m) / sum
                                          : op == 1 ? v - m - logl(sum)
                                                    : v / sqrtl(q / n + 1e-6L) * er_load(W, ER_FP32, j));
            }
        }
        gen_outputs_around(ref, &std, mid, ER_FP32, rows, n, 0, C);
        const char *what = op == 0 ? "softmax 3000 x 97" : op == 1 ? "log_softmax 3000 x 97" : "rmsnorm 3000 x 97";
        if (op == 2) require_rmsnorm_device_equals_host(ref, &tx, &tw, 1e-6, &tc, &std, what);
        else require_rows_device_equals_host(ref, op, &tx, &tc, 1, &std, what);
        er_ref_free(ref);
    }
    printf("t-cuda: 3000 rows on fewer blocks: softmax, log_softmax, rmsnorm and layernorm gave the host's reports\n");
    free(X);
    free(C);
    free(W);
    free(mid);
}
END_TEST

/* The path of tests/data's file `name` (under the environment's ER_TEST_DATA, else ER_TEST_DATA_DIR) in buf. */
static const char *data_path(char *buf, size_t size, const char *name) {
    const char *dir = getenv("ER_TEST_DATA") ? getenv("ER_TEST_DATA") : ER_TEST_DATA_DIR;
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

/* A copy of t's elements (malloc'd) with a tenth of them moved by 1 to 4 ulps of t's format either way. */
static void *nudged_copy(const er_tensor *t) {
    int64_t nc = er_tensor_numel(t);
    int bo = er_format_storage_bits(t->format) / 8;
    void *moved = malloc((size_t)(nc * bo));
    memcpy(moved, t->data, (size_t)(nc * bo));
    for (int64_t e = 0; e < nc; e++) {
        if (er_rand64() % 10) continue;
        double y = er_load(moved, t->format, e);
        int k = 1 + (int)(er_rand64() % 4);
        y += (er_rand64() % 2 ? k : -k) * er_format_ulp(t->format, y);
        er_round_double(&y, t->format, y, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        er_store(moved, t->format, e, y);
    }
    return moved;
}

/* The H200 captures of torch's softmax, log_softmax, rms_norm and layer_norm (tests/data/norm.npz, 90 cases of fp32,
 * fp16 and bf16) through the GPU paths against the host: as captured, and with a tenth of the outputs nudged by 1 to 4
 * ulps of their format either way; under the default standard and a standard of torch's own kernel (softmax and
 * log_softmax: its sums' depth; rms_norm: variance=two_pass; layer_norm: variance=welford at its tree's depth). The
 * reports must agree in every field and in their JSON, and the outputs as captured must pass. The data directory is
 * ER_TEST_DATA_DIR or the environment's ER_TEST_DATA. */
START_TEST(h200_captures_on_the_gpu_equal_the_host) {
    er_test_reseed(810);
    char npz[512], list[512];
    npz_file z;
    FILE *f = open_cases(&z, data_path(npz, sizeof npz, "norm.npz"), data_path(list, sizeof list, "norm_cases.txt"));
    char line[256], id[32], op[32], dtype[32], dist[32];
    int cases = 0;
    long elems = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%31s %31s %31s %31s", id, op, dtype, dist) != 4) continue;
        int kind = strcmp(op, "softmax") == 0       ? 0
                   : strcmp(op, "log_softmax") == 0 ? 1
                   : strcmp(op, "rmsnorm") == 0     ? 2
                   : strcmp(op, "layernorm") == 0   ? 3
                                                    : -1;
        ck_assert_msg(kind >= 0, "case %s: op %s", id, op);
        static const char *const parts[4] = {"in__x", "in__weight", "in__bias", "out__y"};
        er_tensor t[4];
        const er_tensor *pt[4];
        for (int i = 0; i < 4; i++) {
            char key[96];
            snprintf(key, sizeof key, "%s__%s", id, parts[i]);
            const npy_array *a = npz_find(&z, key);
            pt[i] = a && npz_view(&t[i], a) ? &t[i] : NULL;
        }
        ck_assert_msg(pt[0] && pt[3] && (kind != 2 || pt[1]), "case %s incomplete", id);
        er_ref *ref;
        double eps = kind == 2 ? 1e-6 : 1e-5;
        if (kind == 3) ck_assert_int_eq(er_layernorm(&ref, pt[0], 1, pt[1], pt[2], eps), ER_OK);
        else if (kind == 2) ck_assert_int_eq(er_rmsnorm(&ref, pt[0], pt[1], eps), ER_OK);
        else ck_assert_int_eq(kind ? er_log_softmax(&ref, pt[0], -1) : er_softmax(&ref, pt[0], -1), ER_OK);
        int64_t n = pt[0]->shape[pt[0]->ndim - 1], nc = er_tensor_numel(pt[3]), D;
        if (kind < 2) ck_assert_int_eq(er_depth_torch_softmax(&D, n), ER_OK);
        else ck_assert_int_eq(er_depth_torch_layer_norm(&D, n), ER_OK);
        /* the output as captured, then nudged (a copy) */
        void *moved = nudged_copy(pt[3]);
        er_tensor tm = *pt[3];
        tm.data = moved;
        for (int v = 0; v < 4; v++) {
            er_standard std;
            char opts[96] = "";
            if (v >= 2 && kind == 2) snprintf(opts, sizeof opts, "variance=two_pass");
            if (v >= 2 && kind == 3) snprintf(opts, sizeof opts, "variance=welford depth=%lld", (long long)D);
            if (v >= 2 && kind < 2) snprintf(opts, sizeof opts, "depth=%lld", (long long)D);
            ck_assert_int_eq(er_standard_parse(&std, "any_order", opts), ER_OK);
            const er_tensor *y = v % 2 ? &tm : pt[3];
            char what[160];
            snprintf(what, sizeof what, "capture %s (%s %s %s), %s, '%s'", id, op, dtype, dist,
                     v % 2 ? "nudged" : "as captured", opts);
            if (v == 0) {
                er_report rh;
                ck_assert_msg(er_covers(&rh, ref, y, &std) == ER_OK, "%s", er_last_error());
                ER_REQUIRE_PASS(&rh, "%s: not covered on the host:", what);
                er_report_clear(&rh);
            }
            if (kind == 3) require_layernorm_device_equals_host(ref, pt[0], 1, pt[1], pt[2], eps, y, &std, what);
            else if (kind == 2) require_rmsnorm_device_equals_host(ref, pt[0], pt[1], eps, y, &std, what);
            else require_rows_device_equals_host(ref, kind, pt[0], y, (int)pt[0]->ndim - 1, &std, what);
        }
        free(moved);
        er_ref_free(ref);
        cases++;
        elems += nc;
    }
    fclose(f);
    npz_free(&z);
    ck_assert_int_eq(cases, 90);
    printf("t-cuda: the GPU paths gave the host's reports on the %d H200 captures of norm.npz (%ld elements), as "
           "captured and nudged, under two standards each\n", cases, elems);
}
END_TEST

/* A matmul capture file of tests/data (name) into *z, failing the test where it is missing. */
static void mm_capture_load(npz_file *z, const char *name) {
    const char *dir = getenv("ER_TEST_DATA") ? getenv("ER_TEST_DATA") : ER_TEST_DATA_DIR;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const char *err = NULL;
    ck_assert_msg(npz_load(z, path, &err) == 0, "%s: %s", path, err);
}

/* Entry i of a matmul capture file: where it is a case's output (<id>__out__C), its id into id and the views of its
 * A, B and C into t; 0 for any other entry. */
static int mm_capture_case(const npz_file *z, int i, char id[64], er_tensor t[3]) {
    const char *tag = strstr(z->arr[i].name, "__out__C");
    if (!tag) return 0;
    char key[96];
    snprintf(id, 64, "%.*s", (int)(tag - z->arr[i].name), z->arr[i].name);
    static const char *const parts[2] = {"in__A", "in__B"};
    for (int k = 0; k < 2; k++) {
        snprintf(key, sizeof key, "%s__%s", id, parts[k]);
        const npy_array *a = npz_find(z, key);
        ck_assert_msg(a && npz_view(&t[k], a), "case %s lacks %s", id, parts[k]);
    }
    ck_assert(npz_view(&t[2], &z->arr[i]));
    return 1;
}

/* The H200 captures of cuBLAS's fp16 matmuls with fp32 accumulation (tests/data/mm16.npz) through
 * er_matmul_covers_device against the host: as captured (each passing on the host) and with a tenth of the outputs
 * moved by 1 to 4 ulps of their format either way, under `any_order compute=fp32` and `mma:sm90 outer=any`. */
START_TEST(h200_matmul_captures_on_the_gpu_equal_the_host) {
    er_test_reseed(830);
    npz_file z;
    mm_capture_load(&z, "mm16.npz");
    int cases = 0;
    long elems = 0;
    for (int i = 0; i < z.n; i++) {
        char id[64];
        er_tensor t[3];
        if (!mm_capture_case(&z, i, id, t)) continue;
        int64_t na = er_tensor_numel(&t[0]), nb = er_tensor_numel(&t[1]), nc = er_tensor_numel(&t[2]);
        int bx = er_format_storage_bits(t[0].format) / 8, bo = er_format_storage_bits(t[2].format) / 8;
        void *moved = malloc((size_t)(nc * bo));
        memcpy(moved, t[2].data, (size_t)(nc * bo));
        for (int64_t e = 0; e < nc; e++) {
            if (er_rand64() % 10) continue;
            double y = er_load(moved, t[2].format, e);
            y += (er_rand64() % 2 ? 1 : -1) * (1 + (int)(er_rand64() % 4)) * er_format_ulp(t[2].format, y);
            er_round_double(&y, t[2].format, y, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
            er_store(moved, t[2].format, e, y);
        }
        er_tensor tm = t[2];
        tm.data = moved;
        er_ref *ref;
        ck_assert_int_eq(er_matmul(&ref, &t[0], &t[1]), ER_OK);
        for (int v = 0; v < 4; v++) {
            er_standard std;
            ck_assert_int_eq(v < 2 ? er_standard_parse(&std, "any_order", "compute=fp32")
                                   : er_standard_parse(&std, "mma:sm90", "outer=any"),
                             ER_OK);
            char what[128];
            snprintf(what, sizeof what, "capture %s, %s, %s", id, v % 2 ? "nudged" : "as captured",
                     v < 2 ? "any_order" : "mma:sm90 outer=any");
            if (v == 0) {
                er_report rh;
                ck_assert_msg(er_covers(&rh, ref, &t[2], &std) == ER_OK, "%s", er_last_error());
                ER_REQUIRE_PASS(&rh, "%s: not covered on the host:", what);
                er_report_clear(&rh);
            }
            require_device_equals_host(ref, &t[0], &t[1], v % 2 ? &tm : &t[2], na, nb, nc, bx, bo, &std, what);
        }
        er_ref_free(ref);
        free(moved);
        cases++;
        elems += nc;
    }
    npz_free(&z);
    ck_assert_int_ge(cases, 10);
    printf("t-cuda: er_matmul_covers_device gave the host's reports on the %d cuBLAS captures of mm16.npz (%ld "
           "elements), as captured and nudged, under two standards each\n", cases, elems);    printf("t-cuda: so far %ld matmul reports kept their classes on the device: %ld passed with elements the host "
           "decided, %ld had outputs outside\n", kept_mm, kept_mm_scattered, kept_mm_outside);
}
END_TEST

/* Products whose fast bracket on the GPU decides no set's width (tests/data/mm_nodecide.npz: 96 x 80 x 64, fp16
 * operands, outputs of torch's fp32 matmul of them on an H100, three seeds): the widest set's search still leaves the
 * elements it decided to the GPU, so the report is the host's, text and all: the resolution line (shown only where
 * every set's width was seen) absent from both. In turn through a report keeping its classes on the device (Python's
 * first device call) and a plain one. */
START_TEST(matmul_sets_none_decided_give_the_host_report) {
    npz_file z;
    mm_capture_load(&z, "mm_nodecide.npz");
    int cases = 0;
    for (int i = 0; i < z.n; i++) {
        char id[64];
        er_tensor t[3];
        if (!mm_capture_case(&z, i, id, t)) continue;
        int64_t na = er_tensor_numel(&t[0]), nb = er_tensor_numel(&t[1]), nc = er_tensor_numel(&t[2]);
        void *d[3] = {to_device(t[0].data, (size_t)na * 2), to_device(t[1].data, (size_t)nb * 2),
                      to_device(t[2].data, (size_t)nc * 4)};
        er_tensor v[3];
        for (int k = 0; k < 3; k++) {
            v[k] = t[k];
            v[k].data = d[k];
        }
        er_ref *ref;
        ck_assert_int_eq(er_matmul(&ref, &t[0], &t[1]), ER_OK);
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, "any_order", "compute=fp32"), ER_OK);
        er_report rh, rd;
        ER_REQUIRE(er_covers(&rh, ref, &t[2], &std) == ER_OK, "host: %s", er_last_error());
        ER_REQUIRE_PASS(&rh, "capture %s: not covered on the host:", id);
        for (int keep = 1; keep >= 0; keep--) {
            char what[160];
            snprintf(what, sizeof what, "capture %s, %s", id, keep ? "classes kept on the device" : "plain report");
            if (keep) ck_assert_int_eq(er_report_keep_on_device(&rd), ER_OK);
            ER_REQUIRE(er_matmul_covers_device(&rd, &v[0], &v[1], &v[2], &std, NULL) == ER_OK, "device: %s",
                       er_last_error());
            if (keep) ck_assert_int_eq(er_report_fetch_classes(&rd), ER_OK);
            er_require_same_report(&rh, &rd, what);
            er_require_same_text(&rh, &rd, what);
            ER_REQUIRE(rd.n_unseen > 0, "%s: the GPU decided no element", what);
            er_report_clear(&rd);
        }
        er_report_clear(&rh);
        er_ref_free(ref);
        for (int k = 0; k < 3; k++) cudaFree(d[k]);
        cases++;
    }
    npz_free(&z);
    ck_assert_int_eq(cases, 3);
    printf("t-cuda: the %d products whose bracket decides no width gave the host's report, text and all\n", cases);
}
END_TEST

/* Attention in long double (O, rows x Dv, and LSE, rows) of q [B, H, Sq, D], k, v [B, Hkv, Sk, D or Dv] held as
 * doubles, with the mask's keys (er_attention's rules); a row without keys 0 and -inf. */
static void attn_mid(const double *q, const double *k, const double *v, int64_t B, int64_t H, int64_t Hkv, int64_t Sq,
                     int64_t Sk, int64_t D, int64_t Dv, double scale, const er_attention_opts *ao, double *mid,
                     double *lse) {
    long double *w = malloc(sizeof(long double) * (size_t)Sk);
    long double sc = scale != 0 ? (long double)scale : 1 / sqrtl((long double)D);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < Sq; i++) {
                int64_t g = h / (H / Hkv), ii = i + (ao->bottom_right ? Sk - Sq : 0), lo = 0, hi = Sk - 1;
                if (ao->causal && ii < hi) hi = ii;
                if (ao->window) {
                    if (ii - lo > ao->window_left) lo = ii - ao->window_left;
                    if (hi - ii > ao->window_right) hi = ii + ao->window_right;
                }
                const double *qi = q + ((b * H + h) * Sq + i) * D;
                double *o = mid + ((b * H + h) * Sq + i) * Dv;
                long double m = -INFINITY, L = 0;
                for (int64_t j = lo; j <= hi; j++) {
                    long double s = 0;
                    for (int64_t d = 0; d < D; d++) s += (long double)qi[d] * k[((b * Hkv + g) * Sk + j) * D + d];
                    w[j] = s * sc;
                    if (w[j] > m) m = w[j];
                }
                for (int64_t j = lo; j <= hi; j++) L += (w[j] = expl(w[j] - m));
                for (int64_t d = 0; d < Dv; d++) {
                    long double a = 0;
                    for (int64_t j = lo; j <= hi; j++) a += w[j] * v[((b * Hkv + g) * Sk + j) * Dv + d];
                    o[d] = hi >= lo ? (double)(a / L) : 0.0;
                }
                lse[(b * H + h) * Sq + i] = hi >= lo ? (double)(m + logl(L)) : -INFINITY;
            }
    free(w);
}

/* n values of format f drawn into x (as doubles, rounded to f) from family fam: 0 normal, 1 integers in [-2, 2], 2
 * normal times 8, 3 zeros, 4 normal with one value in 50 NaN or infinite. */
static void attn_values(int fam, er_format f, int64_t n, double *x) {
    for (int64_t e = 0; e < n; e++) {
        double y = fam == 1 ? (double)er_rand_int(-2, 2) : fam == 2 ? 8 * er_rand_normal() : fam == 3 ? 0.0
                                                                                                       : er_rand_normal();
        if (fam == 4 && er_rand64() % 50 == 0) y = er_rand64() % 2 ? NAN : -INFINITY;
        er_round_double(&x[e], f, y, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    }
}

/* A tensor [B, Hh, S, Dd] of values x (format f) in device memory, laid out [B, Hh, S, Dd] or, transposed, as
 * [B, S, Hh, Dd] (torch's layout of a transposed projection); *t its device view, the buffer returned. */
static void *attn_to_device(const double *x, er_format f, int64_t B, int64_t Hh, int64_t S, int64_t Dd, int tr,
                            er_tensor *t) {
    int64_t n = B * Hh * S * Dd;
    size_t es = (size_t)er_format_storage_bits(f) / 8;
    void *h = malloc(es * (size_t)n);
    int64_t st[4] = {Hh * S * Dd, S * Dd, Dd, 1};
    if (tr) { st[0] = S * Hh * Dd; st[1] = Dd; st[2] = Hh * Dd; }
    for (int64_t b = 0; b < B; b++)
        for (int64_t hh = 0; hh < Hh; hh++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t d = 0; d < Dd; d++)
                    er_store(h, f, b * st[0] + hh * st[1] + s * st[2] + d, x[((b * Hh + hh) * S + s) * Dd + d]);
    void *dp = to_device(h, es * (size_t)n);
    free(h);
    er_tensor_view(t, f, 4, (int64_t[]){B, Hh, S, Dd}, st, dp);
    return dp;
}

/* The host's report of attention ref on host output tc under std against er_attention_covers_device's on device
 * views dq, dk, dv and dc of the same values. */
static void require_attention_device_equals_host(const er_ref *ref, const er_tensor *dq, const er_tensor *dk,
                                                 const er_tensor *dv, const er_attention_opts *ao,
                                                 const er_tensor *tc, const er_tensor *dc, const er_standard *std,
                                                 const char *what) {
    er_report rh, rd;
    ER_REQUIRE(er_covers(&rh, ref, tc, std) == ER_OK, "host: %s: %s", what, er_last_error());
    ER_REQUIRE(er_attention_covers_device(&rd, dq, dk, dv, ao, dc, std, NULL) == ER_OK, "device: %s: %s", what,
               er_last_error());
    require_same_reports(&rh, &rd, what);
}

/* The same for O and LSE together (host views tc, tl; device views dc, dl; either pair NULL: not checked). */
static void require_attention_outputs_equal(const er_ref *ref, const er_tensor *dq, const er_tensor *dk,
                                            const er_tensor *dv, const er_attention_opts *ao, const er_tensor *tc,
                                            const er_tensor *tl, const er_tensor *dc, const er_tensor *dl,
                                            const er_standard *std, const char *what) {
    er_report rh[2], rd[2];
    const er_tensor *ho[2] = {tc, tl}, *dO[2] = {dc, dl};
    ER_REQUIRE(er_covers_outputs(rh, ref, ho, 2, std) == ER_OK, "host: %s: %s", what, er_last_error());
    ER_REQUIRE(er_attention_covers_device_outputs(rd, dq, dk, dv, ao, dO, std, NULL) == ER_OK, "device: %s: %s", what,
               er_last_error());
    for (int o = 0; o < 2; o++) {
        char w2[300];
        snprintf(w2, sizeof w2, "%s (%s)", what, o ? "lse" : "out");
        if (ho[o]) require_same_reports(&rh[o], &rd[o], w2);
    }
}

/* Attention on the GPU against the host: q, k and v of fp32, fp16 and bf16 from five families (integers with the
 * scale ln 2 give equal scores and weights on rounding boundaries; zeros give every score the maximum; NaN and
 * infinities give rows that claim nothing), head dimensions from 1 to 160 (not multiples of 4 too: the dot's last
 * chain), GQA, every mask (causal, bottom-right, windows; rows without keys), the scale given or not, contiguous and
 * transposed layouts, rows in chunks of one to three tiles in some trials (EXACTREF_ATTN_TILES), outputs of the three
 * formats around their sets (a third of the trials the long double result alone), and the standards' options. The
 * reports must agree in every field and in their JSON. */
START_TEST(attention_on_the_gpu_equals_the_host) {
    er_test_reseed(810);
    long trials = (long)(60 * er_test_multiplier());
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    static const char *const stds[][2] = {{"any_order", ""},
                                          {"any_order", "exp_ulps=fast"},
                                          {"any_order", "compute=tf32"},
                                          {"any_order", "p_sum=fp32 kv_block=64"},
                                          {"any_order", "qk_scale=input"},
                                          {"mma:sm90", ""},
                                          {"any_order", "log_ulps=2 exp_ulps=4"}};
    long elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = fmts[er_rand64() % 3], fo = fmts[er_rand64() % 4 % 3];
        int big = tr % 8 == 7, fam = (int)(er_rand64() % 5), gqa = tr % 3 == 1, trn = tr % 4 == 2;
        int64_t B = er_rand_int(1, 2), Hkv = er_rand_int(1, 3), H = gqa ? Hkv * er_rand_int(2, 3) : Hkv;
        int64_t Sq = big ? er_rand_int(60, 140) : er_rand_int(1, 40), Sk = big ? er_rand_int(100, 400) : er_rand_int(1, 90);
        int64_t D = er_rand64() % 4 == 0 ? 128 : er_rand_int(1, 70), Dv = er_rand64() % 5 == 0 ? er_rand_int(129, 160) : er_rand_int(1, 70);
        er_attention_opts ao = {0};
        int mask = (int)(er_rand64() % 5);
        ao.causal = mask == 1 || mask == 2;
        ao.bottom_right = mask == 2 || mask == 4;
        ao.window = mask >= 3;
        ao.window_left = er_rand_int(0, 20);
        ao.window_right = er_rand_int(0, 5);
        ao.enable_gqa = gqa;
        ao.scale = fam == 1 ? 0.6931471805599453 : er_rand64() % 4 == 0 ? 0.3 : 0.0;
        int64_t nq = B * H * Sq * D, nk = B * Hkv * Sk * D, nv = B * Hkv * Sk * Dv, no = B * H * Sq * Dv;
        int64_t rows = B * H * Sq;
        double *q = malloc(8 * (size_t)nq), *k = malloc(8 * (size_t)nk), *v = malloc(8 * (size_t)nv),
               *mid = malloc(8 * (size_t)no), *lmid = malloc(8 * (size_t)rows);
        attn_values(fam == 3 ? 3 : fam, fx, nq, q); /* zeros: q alone */
        attn_values(fam == 3 ? 0 : fam, fx, nk, k);
        attn_values(fam == 3 || fam == 1 ? 0 : fam, fx, nv, v);
        attn_mid(q, k, v, B, H, Hkv, Sq, Sk, D, Dv, ao.scale, &ao, mid, lmid);
        /* LSE's outputs (fp32): the long double result rounded, a third of them moved 1 to 4 ulps either way */
        float *Lh = malloc(4 * (size_t)rows);
        for (int64_t r = 0; r < rows; r++) {
            double y = lmid[r];
            if (isfinite(y) && er_rand64() % 3 == 0)
                y += (er_rand64() % 2 ? 1 : -1) * (double)(1 + er_rand64() % 4) * er_format_ulp(ER_FP32, y);
            Lh[r] = (float)y;
        }
        er_tensor tq, tk, tv, tc, dq, dk, dv, dc;
        void *Q = malloc(4 * (size_t)nq), *K = malloc(4 * (size_t)nk), *V = malloc(4 * (size_t)nv),
             *C = malloc(4 * (size_t)no);
        for (int64_t e = 0; e < nq; e++) er_store(Q, fx, e, q[e]);
        for (int64_t e = 0; e < nk; e++) er_store(K, fx, e, k[e]);
        for (int64_t e = 0; e < nv; e++) er_store(V, fx, e, v[e]);
        er_tensor_view(&tq, fx, 4, (int64_t[]){B, H, Sq, D}, NULL, Q);
        er_tensor_view(&tk, fx, 4, (int64_t[]){B, Hkv, Sk, D}, NULL, K);
        er_tensor_view(&tv, fx, 4, (int64_t[]){B, Hkv, Sk, Dv}, NULL, V);
        er_tensor_view(&tc, fo, 4, (int64_t[]){B, H, Sq, Dv}, NULL, C);
        er_tensor tl, dl;
        er_tensor_view(&tl, ER_FP32, 3, (int64_t[]){B, H, Sq}, NULL, Lh);
        void *pl = to_device(Lh, 4 * (size_t)rows);
        dl = tl;
        dl.data = pl;
        er_ref *ref;
        ck_assert_int_eq(er_attention(&ref, &tq, &tk, &tv, &ao), ER_OK);
        er_standard std;
        int si = (int)(er_rand64() % 7);
        /* mma:sm90 takes fp32 operands as tf32 alone: asked of fp32 without it (half such trials), both refuse */
        int refused = si == 5 && fx == ER_FP32 && tr % 2;
        const char *so = si == 5 && fx == ER_FP32 && !refused ? "compute=tf32" : stds[si][1];
        ck_assert_int_eq(er_standard_parse(&std, stds[si][0], so), ER_OK);
        if (refused)
            for (int64_t e = 0; e < no; e++) er_store(C, fo, e, mid[e]);
        else
            gen_outputs_around(ref, &std, mid, fo, B * H * Sq, Dv, tr % 3 == 1 ? 2 : 0, C);
        void *pq = attn_to_device(q, fx, B, H, Sq, D, trn, &dq), *pk = attn_to_device(k, fx, B, Hkv, Sk, D, trn, &dk),
             *pv = attn_to_device(v, fx, B, Hkv, Sk, Dv, trn, &dv);
        void *pc = to_device(C, (size_t)(no * (er_format_storage_bits(fo) / 8)));
        dc = tc;
        dc.data = pc;
        int tiles = tr % 3 == 0 ? (int)er_rand_int(1, 3) : 0;
        char tb[8];
        snprintf(tb, sizeof tb, "%d", tiles);
        if (tiles) setenv("EXACTREF_ATTN_TILES", tb, 1);
        else unsetenv("EXACTREF_ATTN_TILES");
        char what[240];
        snprintf(what, sizeof what, "attention B %lld H %lld/%lld Sq %lld Sk %lld D %lld Dv %lld, family %d, %s -> %s, "
                 "mask %d (%lld, %lld), scale %g, %s, %d tiles a chunk, %s '%s'", (long long)B, (long long)H,
                 (long long)Hkv, (long long)Sq, (long long)Sk, (long long)D, (long long)Dv, fam, er_format_name(fx),
                 er_format_name(fo), mask, (long long)ao.window_left, (long long)ao.window_right, ao.scale,
                 trn ? "transposed" : "contiguous", tiles, stds[si][0], so);
        if (refused) {
            er_report rh, rd;
            ck_assert_int_eq(er_covers(&rh, ref, &tc, &std), ER_ERR_STANDARD);
            ER_REQUIRE(er_attention_covers_device(&rd, &dq, &dk, &dv, &ao, &dc, &std, NULL) == ER_ERR_STANDARD,
                       "device: %s: %s", what, er_last_error());
            er_report_clear(&rh);
            er_report_clear(&rd);
        } else if (tr % 2) { /* O alone */
            require_attention_device_equals_host(ref, &dq, &dk, &dv, &ao, &tc, &dc, &std, what);
        } else { /* O and LSE, or (in a third of these) LSE alone */
            int lonly = tr % 3 == 0;
            require_attention_outputs_equal(ref, &dq, &dk, &dv, &ao, lonly ? NULL : &tc, &tl, lonly ? NULL : &dc, &dl,
                                            &std, what);
        }
        elems += no;
        unsetenv("EXACTREF_ATTN_TILES");
        er_ref_free(ref);
        cudaFree(pq);
        cudaFree(pk);
        cudaFree(pv);
        cudaFree(pc);
        cudaFree(pl);
        free(q); free(k); free(v); free(mid); free(lmid); free(Lh); free(Q); free(K); free(V); free(C);
    }
    printf("t-cuda: er_attention_covers_device(_outputs) gave the host's reports on %ld attentions (%ld elements of O)\n",
           trials, elems);
}
END_TEST

/* Long rows of fp32 attention with fp32 outputs, the long double result rounded and a tenth moved an ulp: double's
 * enclosure leaves roundings open in many rows, which the GPU path finishes on the host from the keys
 * (er__attn_row_mpfr: Lemma A5's first enclosure without Lemma A1's weights) and the host path after computing
 * them; the reports must be the same. */
START_TEST(long_fp32_rows_on_the_gpu_equal_the_host) {
    er_test_reseed(1650);
    long trials = (long)(2 * er_test_multiplier()) + 1, elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        int64_t B = 1, Hkv = 1, H = 2, Sq = 48, Sk = 1024 * (1 + tr % 2), D = 128, Dv = 64;
        int64_t nq = B * H * Sq * D, nk = B * Hkv * Sk * D, nv = B * Hkv * Sk * Dv, no = B * H * Sq * Dv;
        er_attention_opts ao = {0};
        ao.enable_gqa = 1;
        ao.causal = tr % 2;
        double *q = malloc(8 * (size_t)nq), *k = malloc(8 * (size_t)nk), *v = malloc(8 * (size_t)nv),
               *mid = malloc(8 * (size_t)no), *lmid = malloc(8 * (size_t)(B * H * Sq));
        attn_values(0, ER_FP32, nq, q);
        attn_values(0, ER_FP32, nk, k);
        attn_values(0, ER_FP32, nv, v);
        attn_mid(q, k, v, B, H, Hkv, Sq, Sk, D, Dv, 0.0, &ao, mid, lmid);
        float *Q = malloc(4 * (size_t)nq), *K = malloc(4 * (size_t)nk), *V = malloc(4 * (size_t)nv),
              *C = malloc(4 * (size_t)no);
        for (int64_t e = 0; e < nq; e++) Q[e] = (float)q[e];
        for (int64_t e = 0; e < nk; e++) K[e] = (float)k[e];
        for (int64_t e = 0; e < nv; e++) V[e] = (float)v[e];
        for (int64_t e = 0; e < no; e++) {
            C[e] = (float)mid[e];
            if (er_rand64() % 10 == 0) C[e] = nextafterf(C[e], er_rand64() % 2 ? INFINITY : -INFINITY);
        }
        er_tensor tq, tk, tv, tc, dq, dk, dv, dc;
        er_tensor_view(&tq, ER_FP32, 4, (int64_t[]){B, H, Sq, D}, NULL, Q);
        er_tensor_view(&tk, ER_FP32, 4, (int64_t[]){B, Hkv, Sk, D}, NULL, K);
        er_tensor_view(&tv, ER_FP32, 4, (int64_t[]){B, Hkv, Sk, Dv}, NULL, V);
        er_tensor_view(&tc, ER_FP32, 4, (int64_t[]){B, H, Sq, Dv}, NULL, C);
        void *pq = attn_to_device(q, ER_FP32, B, H, Sq, D, 0, &dq), *pk = attn_to_device(k, ER_FP32, B, Hkv, Sk, D, 0, &dk);
        void *pv = attn_to_device(v, ER_FP32, B, Hkv, Sk, Dv, 0, &dv), *pc = to_device(C, 4 * (size_t)no);
        dc = tc;
        dc.data = pc;
        er_ref *ref;
        ck_assert_int_eq(er_attention(&ref, &tq, &tk, &tv, &ao), ER_OK);
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
        char what[120];
        snprintf(what, sizeof what, "fp32 attention H %lld/%lld Sq %lld Sk %lld D %lld Dv %lld%s", (long long)H,
                 (long long)Hkv, (long long)Sq, (long long)Sk, (long long)D, (long long)Dv, ao.causal ? " causal" : "");
        require_attention_device_equals_host(ref, &dq, &dk, &dv, &ao, &tc, &dc, &std, what);
        elems += no;
        er_ref_free(ref);
        cudaFree(pq);
        cudaFree(pk);
        cudaFree(pv);
        cudaFree(pc);
        free(q); free(k); free(v); free(mid); free(lmid); free(Q); free(K); free(V); free(C);
    }
    printf("t-cuda: long fp32 rows: er_attention_covers_device gave the host's reports on %ld attentions (%ld elements "
           "of O)\n", trials, elems);
}
END_TEST

/* The H200 attention captures (tests/data/attention.npz: torch's SDPA on its four backends, a Triton flash kernel, GQA,
 * both causal alignments, and kernels with planted bugs) through er_attention_covers_device against the host: as
 * captured and with a tenth of the outputs moved by 1 to 4 ulps, under any_order and mma:sm90. */
START_TEST(h200_attention_captures_on_the_gpu_equal_the_host) {
    er_test_reseed(850);
    char npz[512], list[512];
    npz_file z;
    FILE *f = open_cases(&z, data_path(npz, sizeof npz, "attention.npz"), data_path(list, sizeof list, "attention.txt"));
    char line[256], cid[32], kind[48], dtype[32], align[32], gid[32];
    long long Sq, Sk, D, H, Hkv;
    int causal, cases = 0, lses = 0;
    long elems = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%31s %47s %31s %lld %lld %lld %lld %lld %d %31s %31s", cid, kind, dtype, &Sq, &Sk, &D, &H,
                   &Hkv, &causal, align, gid) != 11)
            continue; /* the header */
        static const char *const parts[3] = {"in__q", "in__k", "in__v"};
        er_tensor t[4];
        int ok = 1;
        for (int i = 0; i < 4; i++) {
            char key[96];
            snprintf(key, sizeof key, i < 3 ? "%s__%s" : "%s__out__o", i < 3 ? gid : cid, i < 3 ? parts[i] : "");
            const npy_array *a = npz_find(&z, key);
            ok &= a && npz_view(&t[i], a);
        }
        ck_assert_msg(ok, "case %s incomplete", cid);
        er_attention_opts ao = {0, causal, strcmp(align, "bottom_right") == 0, 0, 0, 0, H != Hkv};
        er_ref *ref;
        ck_assert_int_eq(er_attention(&ref, &t[0], &t[1], &t[2], &ao), ER_OK);
        int64_t nc = er_tensor_numel(&t[3]);
        int bo = er_format_storage_bits(t[3].format) / 8;
        void *moved = nudged_copy(&t[3]);
        void *dp[4];
        er_tensor dv[4];
        for (int i = 0; i < 4; i++) {
            dv[i] = t[i];
            dv[i].data = dp[i] = to_device(t[i].data, (size_t)(er_tensor_numel(&t[i]) *
                                                               (er_format_storage_bits(t[i].format) / 8)));
        }
        void *dm = to_device(moved, (size_t)(nc * bo));
        /* the capture's LSE, where its kernel gave one (checked with O as captured) */
        char lkey[96];
        snprintf(lkey, sizeof lkey, "%s__out__lse", cid);
        const npy_array *la = npz_find(&z, lkey);
        er_tensor tl, dl;
        int haslse = la && npz_view(&tl, la);
        void *plse = NULL;
        if (haslse) {
            dl = tl;
            dl.data = plse = to_device(tl.data, (size_t)(er_tensor_numel(&tl) * (er_format_storage_bits(tl.format) / 8)));
        }
        for (int v = 0; v < 4; v++) {
            er_standard std;
            const char *so = v >= 2 && t[0].format == ER_FP32 ? "compute=tf32" : NULL; /* mma: fp32 as tf32 */
            ck_assert_int_eq(er_standard_parse(&std, v < 2 ? "any_order" : "mma:sm90", so), ER_OK);
            er_tensor th = t[3], td = dv[3];
            if (v % 2) th.data = moved, td.data = dm;
            char what[200];
            snprintf(what, sizeof what, "capture %s (%s %s, causal %d %s), %s, %s", cid, kind, dtype, causal, align,
                     v % 2 ? "nudged" : "as captured", v < 2 ? "any_order" : so ? "mma:sm90 compute=tf32" : "mma:sm90");
            if (v % 2 == 0 && haslse)
                require_attention_outputs_equal(ref, &dv[0], &dv[1], &dv[2], &ao, &th, &tl, &td, &dl, &std, what);
            else
                require_attention_device_equals_host(ref, &dv[0], &dv[1], &dv[2], &ao, &th, &td, &std, what);
        }
        for (int i = 0; i < 4; i++) cudaFree(dp[i]);
        cudaFree(dm);
        if (plse) cudaFree(plse);
        lses += haslse;
        free(moved);
        er_ref_free(ref);
        cases++;
        elems += nc;
    }
    fclose(f);
    npz_free(&z);
    ck_assert_int_eq(cases, 121);
    printf("t-cuda: er_attention_covers_device gave the host's reports on the %d H200 captures of attention.npz (%ld "
           "elements), as captured and nudged, under two standards each; with their LSE on %d\n", cases, elems, lses);
}
END_TEST

/* Outputs of a chain (nc elements, format fo, into C): its correctly rounded result moved by 0 to 4 ulps (half of
 * them), else gen_outputs_near's spread out to 2^20 ulps. */
static void gen_chain_outputs(const er_ref *ch, er_format fo, int64_t nc, void *C) {
    int nd;
    int64_t shape[ER_MAX_DIMS], coord[ER_MAX_DIMS];
    gen_outputs_near(ch, fo, nc, 0, C);
    ck_assert_int_eq(er_ref_shape(ch, &nd, shape), ER_OK);
    for (int64_t e = 0; e < nc; e++) {
        if (er_rand64() % 2) continue;
        int64_t rem = e;
        for (int d = nd - 1; d >= 0; d--) { coord[d] = rem % shape[d]; rem /= shape[d]; }
        double r;
        ck_assert_int_eq(er_ref_exact(ch, coord, fo, NULL, &r), ER_OK);
        if (isfinite(r)) r += (double)((int)(er_rand64() % 9) - 4) * er_format_ulp(fo, r);
        er_round_double(&r, fo, r, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
        er_store(C, fo, e, r);
    }
}

/* er_covers_device of a chain (a GEMM epilogue over er_matmul's or er_matmul_device's reference, or elementwise
 * stages over a tensor) against er_covers on a host copy of the output: every stage list the epilogue pass takes
 * (adds and muls of numbers, bias rows and whole tensors of fp32, fp16, bf16 and fp64, relu, casts, and each of exp,
 * tanh, sigmoid, silu and gelu's tanh form, with 1 or 2 ulps, under math=triton too), fp32, fp16 and bf16 outputs
 * 0 to 4 ulps and out to 2^20 ulps from the correctly rounded result, and a tensor of midpoints between neighbours
 * of the output's format (the bracket straddles each): the same report, field for field and in its
 * JSON, with the classes kept on the device (the pass ran there), and a chain it does not take (a stage's operand
 * another reference) kept nowhere. */
START_TEST(chain_epilogue_on_the_gpu_equals_the_host) {
    er_test_reseed(741);
    long trials = (long)(28 * er_test_multiplier()), kept0 = kept_reports, elems = 0, declined = 0;
    static const er_format ins[] = {ER_FP16, ER_BF16, ER_FP32, ER_FP8_E4M3FN}, outs[] = {ER_FP32, ER_FP16, ER_BF16},
                          ops[] = {ER_FP32, ER_FP16, ER_BF16, ER_FP64};
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = ins[er_rand64() % 4], fo = outs[er_rand64() % 3], fb = ops[er_rand64() % 4];
        int fam = (int)(er_rand64() % 3), batched = tr % 4 == 1, tens = tr % 5 == 3, on_dev = tr % 3 == 0;
        /* a tensor of midpoints between neighbours of a narrower output format, times 1: the bracket straddles each
         * (the class of an output at one end is the engine's, never the bracket's) */
        int ties = tens && tr % 10 == 8;
        if (ties && fo == ER_FP32) fo = ER_FP16;
        /* (at least 2^18 products: the matmul's fast path) */
        int M = (int)er_rand_int(batched ? 32 : 48, batched ? 48 : 80), N = (int)er_rand_int(batched ? 32 : 48, batched ? 48 : 80);
        int K = (int)er_rand_int(128, 192), GA = batched ? 2 : 1, GB = batched ? 2 : 1;
        int64_t na = (int64_t)GA * M * K, nb = (int64_t)GB * K * N, nc = (int64_t)GA * GB * M * N;
        double *a = malloc(sizeof(double) * (size_t)na), *b = malloc(sizeof(double) * (size_t)nb);
        uint64_t *A = malloc(8 * (size_t)na), *B = malloc(8 * (size_t)nb), *C = malloc(8 * (size_t)nc),
                 *Y = malloc(8 * (size_t)nc), *bias = malloc(8 * (size_t)N), *res = malloc(8 * (size_t)nc);
        gen_batched(fam, fx, GA, GB, M, K, N, a, b);
        for (int64_t i = 0; i < na; i++) er_store(A, fx, i, a[i]);
        for (int64_t i = 0; i < nb; i++) er_store(B, fx, i, b[i]);
        for (int j = 0; j < N; j++) er_store(bias, fb, j, (double)((int64_t)(er_rand64() % 4001) - 2000) / 1024);
        for (int64_t i = 0; i < nc; i++) er_store(res, fb, i, (double)((int64_t)(er_rand64() % 4001) - 2000) / 512);
        er_tensor tA, tB, tC, tY, tbias, tres;
        view_batched(&tA, &tB, &tC, fx, fo, batched, GA, GB, M, K, N, A, B, C);
        int nd = batched ? 4 : 2;
        int64_t bshape[4] = {GA, GB, M, N}, bstr[4] = {0, 0, 0, 1};
        er_tensor_view(&tbias, fb, nd, batched ? bshape : bshape + 2, batched ? bstr : bstr + 2, bias);
        er_tensor_view(&tres, fb, nd, batched ? bshape : bshape + 2, NULL, res);
        er_ref *base, *other = NULL;
        if (tens) { /* elementwise stages over a tensor: the matmul's output values as the tensor */
            er_ref *mm;
            ck_assert_int_eq(er_matmul(&mm, &tA, &tB), ER_OK);
            gen_outputs_near(mm, ER_FP32, nc, 0, C);
            er_ref_free(mm);
            for (int64_t i = 0; ties && i < nc; i++) {
                double lo, hi;
                er_round_double(&lo, fo, er_load(C, ER_FP32, i), ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
                er_round_double(&hi, fo, nextafter(lo, INFINITY), ER_ROUND_UP, ER_OVERFLOW_IEEE);
                er_store(C, ER_FP32, i, lo + (hi - lo) / 2); /* (exact: 12 bits at most) */
            }
            tC.format = ER_FP32;
            ck_assert_int_eq(er_tensor_ref(&base, &tC), ER_OK);
        } else if (on_dev) {
            int bx = er_format_storage_bits(fx) / 8;
            void *dA = to_device(A, (size_t)(na * bx)), *dB = to_device(B, (size_t)(nb * bx));
            er_tensor vA = tA, vB = tB;
            vA.data = dA;
            vB.data = dB;
            ER_REQUIRE(er_matmul_device(&base, &vA, &vB, NULL) == ER_OK, "er_matmul_device: %s", er_last_error());
            cudaFree(dA);
            cudaFree(dB);
        } else {
            ck_assert_int_eq(er_matmul(&base, &tA, &tB), ER_OK);
        }
        int form = ties ? 10 : (int)(er_rand64() % 10), ulps = 1 + (int)(er_rand64() % 2), nst = 0;
        double scale = tens ? 1.0 : 4.0 / sqrt((double)K); /* pre-activations of a few units */
        er_stage st[4];
        memset(st, 0, sizeof st);
#define STAGE(k, t, x, f) (st[nst++] = (er_stage){(k), (t), (x), (f), NULL})
        if (form != 9) STAGE(ER_STAGE_MUL, NULL, scale, ER_FP32);
        switch (form) {
        case 0: STAGE(ER_STAGE_ADD, &tbias, 0, ER_FP32); STAGE(ER_STAGE_GELU_TANH, NULL, ulps, ER_FP32); break;
        case 1: STAGE(ER_STAGE_ADD, &tbias, 0, ER_FP32); STAGE(ER_STAGE_SILU, NULL, ulps, ER_FP32); break;
        case 2: STAGE(ER_STAGE_SIGMOID, NULL, ulps, ER_FP32); STAGE(ER_STAGE_CAST, NULL, 0, ER_BF16); break;
        case 3: STAGE(ER_STAGE_TANH, NULL, ulps, ER_FP32); STAGE(ER_STAGE_MUL, NULL, 3.0, ER_FP32); break;
        case 4: STAGE(ER_STAGE_ADD, NULL, -0.75, ER_FP32); STAGE(ER_STAGE_EXP, NULL, ulps, ER_FP32); break;
        case 5: STAGE(ER_STAGE_ADD, &tres, 0, ER_FP32); STAGE(ER_STAGE_RELU, NULL, 0, ER_FP32);
                STAGE(ER_STAGE_CAST, NULL, 0, ER_FP16); break;
        case 6: STAGE(ER_STAGE_ADD, &tbias, 0, ER_FP32); STAGE(ER_STAGE_CAST, NULL, 0, ER_FP16);
                STAGE(ER_STAGE_GELU_TANH, NULL, ulps, ER_FP32); break;
        case 7: STAGE(ER_STAGE_MUL, &tres, 0, ER_FP32); STAGE(ER_STAGE_SILU, NULL, ulps, ER_FP32); break;
        case 8: STAGE(ER_STAGE_GELU_TANH, NULL, ulps, ER_FP32); STAGE(ER_STAGE_ADD, &tres, 0, ER_FP32); break;
        case 10: break; /* (ties: the scale 1 alone) */
        default: /* a stage's operand another reference: not the pass's */
            ck_assert_int_eq(er_tensor_ref(&other, &tres), ER_OK);
            st[nst++] = (er_stage){ER_STAGE_ADD, NULL, 0, ER_FP32, other};
            STAGE(ER_STAGE_SIGMOID, NULL, ulps, ER_FP32);
            break;
        }
#undef STAGE
        er_ref *ch;
        ck_assert_int_eq(er_chain(&ch, base, st, nst), ER_OK);
        static const char *const opts[] = {"", "math=triton"};
        int tri = form != 9 && er_rand64() % 4 == 0;
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, "any_order", opts[tri]), ER_OK);
        gen_chain_outputs(ch, fo, nc, Y);
        tY = tC;
        tY.format = fo;
        tY.data = Y;
        char what[200];
        snprintf(what, sizeof what, "chain trial %ld (%s -> %s, %d x %d x %d%s, form %d, %d ulps, operands %s%s%s)", tr,
                 er_format_name(fx), er_format_name(fo), M, K, N, batched ? ", batched" : "", form, ulps,
                 er_format_name(fb),
                 ties ? ", over midpoints" : tens ? ", over a tensor" : on_dev ? ", er_matmul_device" : "",
                 tri ? ", math=triton" : "");
        er_report rh, rd, rk;
        ER_REQUIRE(er_covers(&rh, ch, &tY, &std) == ER_OK, "%s: host: %s", what, er_last_error());
        void *dY = to_device(Y, (size_t)(nc * er_format_storage_bits(fo) / 8));
        er_tensor vY = tY;
        vY.data = dY;
        ER_REQUIRE(er_covers_device(&rd, ch, &vY, &std, NULL) == ER_OK, "%s: device: %s", what, er_last_error());
        er_require_same_report(&rh, &rd, what);
        er_require_same_json(&rh, &rd, what);
        ck_assert_int_eq(er_report_keep_on_device(&rk), ER_OK);
        long k0 = kept_reports;
        require_kept_same(&rh, &rk, er_covers_device(&rk, ch, &vY, &std, NULL), what);
        int pass = form != 9 && (tens || er_ref_fast(base)); /* the GPU's pass takes it */
        ER_REQUIRE((kept_reports > k0) == pass, "%s: the classes were %skept on the device", what, pass ? "not " : "");
        declined += form == 9;
        elems += nc;
        er_report_clear(&rh);
        er_report_clear(&rd);
        cudaFree(dY);
        er_ref_free(ch);
        er_ref_free(other);
        er_ref_free(base);
        free(a); free(b); free(A); free(B); free(C); free(Y); free(bias); free(res);
    }
    ER_REQUIRE(kept_reports - kept0 > trials / 2, "%ld of %ld chains decided on the GPU", kept_reports - kept0, trials);
    printf("t-cuda: chains: er_covers_device gave the host's report on %ld chains (%ld elements), %ld decided on the "
           "GPU, %ld not the GPU pass's\n", trials, elems, kept_reports - kept0, declined);
}
END_TEST

/* A cross-entropy kernel in fp32 on logits X (N x C, doubles of their format): m, e_j = expf(x_j - m), s added in
 * order, the gradient (e_j / s - [j = t]) / W (W: the rows not ignored for the mean, else 1) and the mean, sum or each
 * row's loss m + log(s) - x_t; each gradient stored in format fg, and with probability 1 / nudge moved by 1 to 4 ulps of
 * fg (by 2^12 where far), so that some rows hold outputs outside their sets; an ignored row's gradient 0. */
static void xe_fp32_kernel(const double *X, const int64_t *t, int64_t N, int64_t C, int reduction, er_format fg,
                           int nudge, int far, double *loss, double *G) {
    int64_t W = 0;
    for (int64_t i = 0; i < N; i++) W += t[i] != -100;
    float Wf = reduction == ER_REDUCTION_MEAN ? (float)W : 1.0f, acc = 0;
    for (int64_t i = 0; i < N; i++) {
        const double *x = X + i * C;
        float m = -INFINITY, s = 0;
        for (int64_t j = 0; j < C; j++) m = (float)x[j] > m ? (float)x[j] : m;
        for (int64_t j = 0; j < C; j++) s += expf((float)x[j] - m);
        float row = t[i] == -100 ? 0.0f : (m + logf(s)) - (float)x[t[i]];
        if (reduction == ER_REDUCTION_NONE) loss[i] = row;
        else acc += reduction == ER_REDUCTION_MEAN ? row / Wf : row;
        for (int64_t j = 0; j < C; j++) {
            float g = t[i] == -100 ? 0.0f : (expf((float)x[j] - m) / s - (j == t[i] ? 1.0f : 0.0f)) / Wf;
            double v = er_oracle_round_d(fg, g);
            if (nudge && er_rand64() % (uint64_t)nudge == 0) {
                int k = far ? 4096 : (int)er_rand_int(1, 4);
                double u = ldexp(1.0, (v != 0 ? ilogb(v) : -126) - (fg == ER_FP32 ? 23 : fg == ER_FP16 ? 10 : 7));
                v = er_oracle_round_d(fg, v + (er_rand64() % 2 ? k : -k) * u);
            }
            G[i * C + j] = v;
        }
    }
    if (reduction != ER_REDUCTION_NONE) loss[0] = acc;
}

/* The dlogits reports whose classes the GPU path left on the device, over the run. */
static long kept_xent;

/* Cross-entropy on the GPU against the host: logits of fp32, fp16 and bf16 (normal, a target near probability 1,
 * flat, wide, rows holding -inf, NaN or +inf; one row as a 1-d view), ignored rows, the three reductions, dlogits of
 * the three formats near their correct roundings (some moved 1 to 4 ulps, some far), loss and dlogits checked together
 * or alone; the standards the GPU takes (exp_ulps=, div=, math=fast's exp, subnormals=flush) and some it hands to the
 * host (label smoothing, online=, depth=).
 * The reports must agree in every field and in their JSON, and those marked to keep dlogits' classes on the device
 * too; such reports kept them in the checks the GPU path took. */
START_TEST(cross_entropy_on_the_gpu_equals_the_host) {
    er_test_reseed(830);
    kept_xent = 0;
    long trials = (long)(40 * er_test_multiplier()), elems = 0;
    static const er_format fmts[] = {ER_FP32, ER_FP16, ER_BF16};
    static const char *const opts[] = {"", "exp_ulps=1", "exp_ulps=4 log_ulps=2", "div=reciprocal",
                                       "math=fast div=divide", "subnormals=flush", "online=yes", "depth=12"};
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = fmts[er_rand64() % 3], fg = fmts[er_rand64() % 3];
        int fam = (int)(er_rand64() % 6), big = tr % 8 == 7, red = (int)(er_rand64() % 3), which = (int)(tr % 3);
        int64_t N = big ? er_rand_int(50, 120) : tr % 10 == 3 ? 1 : er_rand_int(1, 12);
        int64_t C = big ? er_rand_int(2000, 40000) : er_rand_int(1, 700);
        double eps = tr % 9 == 4 ? 0.1 : 0.0;
        const char *o = opts[er_rand64() % 8];
        if (strstr(o, "depth") && C > 4096) o = ""; /* a tree of depth 12 adds at most 4096 terms */
        double *X = malloc(sizeof(double) * (size_t)(N * C)), *G = malloc(sizeof(double) * (size_t)(N * C));
        double *L = malloc(sizeof(double) * (size_t)N);
        int64_t *t = malloc(sizeof(int64_t) * (size_t)N);
        for (int64_t i = 0; i < N; i++) {
            t[i] = N > 1 && er_rand64() % 6 == 0 ? -100 : er_rand_int(0, C - 1);
            double base = 3 * er_rand_normal();
            for (int64_t j = 0; j < C; j++) {
                double v = base + er_rand_normal();
                if (fam == 1 && t[i] >= 0) v = j == t[i] ? base + 14 + 6 * er_rand_unit() : v;
                if (fam == 2) v = 0.5;
                if (fam == 3) v = 30 * er_rand_normal();
                if (fam == 4 && i % 3 == 1 && j != t[i] && er_rand64() % 4 == 0) v = -INFINITY;
                if (fam == 5 && i % 4 == 2 && j == C / 2) v = er_rand64() % 2 ? NAN : INFINITY;
                X[i * C + j] = isfinite(v) ? er_oracle_round_d(fx, v) : v;
            }
        }
        xe_fp32_kernel(X, t, N, C, red, fg, tr % 4 == 0 ? 0 : tr % 4 == 1 ? 50 : 5000, tr % 5 == 2, L, G);
        int64_t nl = red == ER_REDUCTION_NONE ? N : 1;
        void *hX = malloc(4 * (size_t)(N * C)), *hG = malloc(4 * (size_t)(N * C)), *hL = malloc(4 * (size_t)nl);
        for (int64_t e = 0; e < N * C; e++) {
            er_store(hX, fx, e, X[e]);
            er_store(hG, fg, e, G[e]);
        }
        for (int64_t e = 0; e < nl; e++) er_store(hL, ER_FP32, e, L[e]);
        er_tensor tx, tl, tg;
        int row = N == 1 && tr % 2; /* one row of C logits, a 1-d view */
        er_tensor_view(&tx, fx, row ? 1 : 2, row ? (int64_t[]){C} : (int64_t[]){N, C}, NULL, hX);
        er_tensor_view(&tl, ER_FP32, 1, (int64_t[]){nl}, NULL, hL);
        er_tensor_view(&tg, fg, row ? 1 : 2, row ? (int64_t[]){C} : (int64_t[]){N, C}, NULL, hG);
        size_t bx = (size_t)(N * C) * (size_t)(er_format_storage_bits(fx) / 8);
        size_t bg = (size_t)(N * C) * (size_t)(er_format_storage_bits(fg) / 8);
        er_tensor dx = tx, dl = tl, dg = tg;
        void *px = to_device(hX, bx), *pl = to_device(hL, 4 * (size_t)nl), *pg = to_device(hG, bg);
        dx.data = px;
        dl.data = pl;
        dg.data = pg;
        er_ref *ref;
        ck_assert_int_eq(er_cross_entropy(&ref, &tx, t, N, red, -100, eps), ER_OK);
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, "any_order", o), ER_OK);
        const er_tensor *ho[2] = {which != 2 ? &tl : NULL, which != 1 ? &tg : NULL};
        const er_tensor *dO[2] = {which != 2 ? &dl : NULL, which != 1 ? &dg : NULL};
        er_report rh[2], rd[2];
        char what[200];
        snprintf(what, sizeof what, "cross_entropy %lld x %lld, family %d, %s -> %s, reduction %d, eps %g, '%s'",
                 (long long)N, (long long)C, fam, er_format_name(fx), er_format_name(fg), red, eps, o);
        ER_REQUIRE(er_covers_outputs(rh, ref, ho, 2, &std) == ER_OK, "host: %s: %s", what, er_last_error());
        if (tr % 3 == 1) setenv("EXACTREF_XENT_GATHER", "0", 1); /* the rows the host takes copied one by one */
        else unsetenv("EXACTREF_XENT_GATHER");
        ER_REQUIRE(er_cross_entropy_covers_device(rd, &dx, t, N, red, -100, eps, dO, &std, NULL) == ER_OK,
                   "device: %s: %s", what, er_last_error());
        if (ho[1]) { /* dlogits' classes kept on the device, where the GPU path took the check */
            er_report rk[2];
            ER_REQUIRE(er_report_keep_on_device(&rk[1]) == ER_OK, "keep: %s", er_last_error());
            er_status st = er_cross_entropy_covers_device(rk, &dx, t, N, red, -100, eps, dO, &std, NULL);
            char w2[260];
            snprintf(w2, sizeof w2, "%s (dlogits, kept)", what);
            require_kept_same_in(&rh[1], &rk[1], st, w2, &kept_xent);
            er_report_clear(&rk[0]);
        }
        for (int k = 0; k < 2; k++) {
            char w2[260];
            snprintf(w2, sizeof w2, "%s (%s)", what, k ? "dlogits" : "loss");
            if (ho[k]) require_same_reports(&rh[k], &rd[k], w2);
        }
        elems += N * C;
        er_ref_free(ref);
        cudaFree(px);
        cudaFree(pl);
        cudaFree(pg);
        free(X); free(G); free(L); free(t); free(hX); free(hG); free(hL);
    }
    unsetenv("EXACTREF_XENT_GATHER");
    printf("t-cuda: er_cross_entropy_covers_device gave the host's reports on %ld checks (%ld logits); %ld of the "
           "dlogits reports marked to keep their classes on the device kept them there\n", trials, elems, kept_xent);
    ER_REQUIRE(kept_xent > trials / 8, "%ld cross_entropy reports kept their classes on the device", kept_xent);
}
END_TEST

START_TEST(device_api_refusals) {
    er_tensor v;
    void *h = (void *)1;
    ck_assert_int_eq(er_tensor_from_device(NULL, &h, ER_FP32, 1, (int64_t[]){4}, NULL, (void *)16, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_tensor_from_device(&v, &h, ER_FP32, 1, (int64_t[]){-4}, NULL, (void *)16, NULL), ER_ERR_SIZE);
    ck_assert_ptr_eq(h, (void *)1);
    ck_assert_int_eq(er_tensor_from_device(&v, &h, ER_FP32, 1, (int64_t[]){4}, NULL, NULL, NULL), ER_ERR_NULL);
    er_report rep;
    er_standard std;
    er_standard_init(&std);
    er_tensor a;
    er_tensor_view(&a, ER_FP16, 2, (int64_t[]){2, 2}, NULL, (void *)16);
    ck_assert_int_eq(er_matmul_covers_device(NULL, &a, &a, &a, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_matmul_covers_device(&rep, &a, NULL, &a, &std, NULL), ER_ERR_NULL);
    er_tensor b3;
    er_tensor_view(&b3, ER_FP16, 2, (int64_t[]){3, 2}, NULL, (void *)16);
    ck_assert_int_eq(er_matmul_covers_device(&rep, &a, &b3, &a, &std, NULL), ER_ERR_SHAPE); /* before any device access */
    er_ref *mref = (er_ref *)&v; /* untouched on refusal */
    ck_assert_int_eq(er_matmul_device(NULL, &a, &a, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_matmul_device(&mref, &a, NULL, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_matmul_device(&mref, &a, &b3, NULL), ER_ERR_SHAPE); /* before any device access */
    if (!er_cuda_available()) ck_assert_int_eq(er_matmul_device(&mref, &a, &a, NULL), ER_ERR_UNSUPPORTED);
    ck_assert_ptr_eq(mref, (er_ref *)&v);
    if (!er_cuda_available()) ck_assert_int_eq(er_matmul_covers_device(&rep, &a, &a, &a, &std, NULL), ER_ERR_UNSUPPORTED);
    ck_assert_int_eq(er_softmax_covers_device(NULL, &a, 1, &a, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_softmax_covers_device(&rep, &a, 1, NULL, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_softmax_covers_device(&rep, &a, 2, &a, &std, NULL), ER_ERR_INVALID); /* before any device access */
    ck_assert_int_eq(er_softmax_covers_device(&rep, &a, 1, &b3, &std, NULL), ER_ERR_OUTPUT);
    if (!er_cuda_available()) ck_assert_int_eq(er_softmax_covers_device(&rep, &a, 1, &a, &std, NULL), ER_ERR_UNSUPPORTED);
    er_tensor w3;
    er_tensor_view(&w3, ER_FP16, 1, (int64_t[]){3}, NULL, (void *)16);
    ck_assert_int_eq(er_log_softmax_covers_device(NULL, &a, 1, &a, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_log_softmax_covers_device(&rep, &a, 2, &a, &std, NULL), ER_ERR_INVALID);
    ck_assert_int_eq(er_log_softmax_covers_device(&rep, &a, 1, &b3, &std, NULL), ER_ERR_OUTPUT);
    ck_assert_int_eq(er_softmax_backward_covers_device(NULL, &a, &a, 1, &a, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_softmax_backward_covers_device(&rep, &a, NULL, 1, &a, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_softmax_backward_covers_device(&rep, &a, &a, 1, NULL, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_softmax_backward_covers_device(&rep, &a, &a, 2, &a, &std, NULL), ER_ERR_INVALID);
    ck_assert_int_eq(er_softmax_backward_covers_device(&rep, &a, &b3, 1, &a, &std, NULL), ER_ERR_SHAPE);
    ck_assert_int_eq(er_softmax_backward_covers_device(&rep, &a, &a, 1, &b3, &std, NULL), ER_ERR_OUTPUT);
    if (!er_cuda_available())
        ck_assert_int_eq(er_softmax_backward_covers_device(&rep, &a, &a, 1, &a, &std, NULL), ER_ERR_UNSUPPORTED);
    ck_assert_int_eq(er_log_softmax_backward_covers_device(NULL, &a, &a, 1, &a, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_log_softmax_backward_covers_device(&rep, NULL, &a, 1, &a, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_log_softmax_backward_covers_device(&rep, &a, &a, 1, &a, NULL, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_log_softmax_backward_covers_device(&rep, &a, &a, -3, &a, &std, NULL), ER_ERR_INVALID);
    ck_assert_int_eq(er_log_softmax_backward_covers_device(&rep, &b3, &a, 1, &a, &std, NULL), ER_ERR_SHAPE);
    ck_assert_int_eq(er_log_softmax_backward_covers_device(&rep, &a, &a, 1, &b3, &std, NULL), ER_ERR_OUTPUT);
    if (!er_cuda_available())
        ck_assert_int_eq(er_log_softmax_backward_covers_device(&rep, &a, &a, 1, &a, &std, NULL), ER_ERR_UNSUPPORTED);
    ck_assert_int_eq(er_rmsnorm_covers_device(NULL, &a, NULL, 1e-5, &a, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_rmsnorm_covers_device(&rep, &a, NULL, 1e-5, NULL, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_rmsnorm_covers_device(&rep, &a, &w3, 1e-5, &a, &std, NULL), ER_ERR_SHAPE); /* no device access */
    ck_assert_int_eq(er_rmsnorm_covers_device(&rep, &a, NULL, -1.0, &a, &std, NULL), ER_ERR_INVALID);
    ck_assert_int_eq(er_rmsnorm_covers_device(&rep, &a, NULL, 1e-5, &b3, &std, NULL), ER_ERR_OUTPUT);
    if (!er_cuda_available())
        ck_assert_int_eq(er_rmsnorm_covers_device(&rep, &a, NULL, 1e-5, &a, &std, NULL), ER_ERR_UNSUPPORTED);
    ck_assert_int_eq(er_layernorm_covers_device(NULL, &a, 1, NULL, NULL, 1e-5, &a, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_layernorm_covers_device(&rep, &a, 1, NULL, NULL, 1e-5, NULL, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_layernorm_covers_device(&rep, &a, 1, NULL, &w3, 1e-5, &a, &std, NULL), ER_ERR_SHAPE);
    ck_assert_int_eq(er_layernorm_covers_device(&rep, &a, 3, NULL, NULL, 1e-5, &a, &std, NULL), ER_ERR_SHAPE);
    ck_assert_int_eq(er_layernorm_covers_device(&rep, &a, 1, NULL, NULL, -1.0, &a, &std, NULL), ER_ERR_INVALID);
    ck_assert_int_eq(er_layernorm_covers_device(&rep, &a, 1, NULL, NULL, 1e-5, &b3, &std, NULL), ER_ERR_OUTPUT);
    if (!er_cuda_available())
        ck_assert_int_eq(er_layernorm_covers_device(&rep, &a, 1, NULL, NULL, 1e-5, &a, &std, NULL), ER_ERR_UNSUPPORTED);
    er_tensor k3;
    er_tensor_view(&k3, ER_FP16, 2, (int64_t[]){2, 3}, NULL, (void *)16);
    ck_assert_int_eq(er_attention_covers_device(NULL, &a, &a, &a, NULL, &a, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_attention_covers_device(&rep, &a, NULL, &a, NULL, &a, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_attention_covers_device(&rep, &a, &a, &a, NULL, NULL, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_attention_covers_device(&rep, &a, &k3, &a, NULL, &a, &std, NULL), ER_ERR_SHAPE);
    er_attention_opts bad = {INFINITY, 0, 0, 0, 0, 0, 0};
    ck_assert_int_eq(er_attention_covers_device(&rep, &a, &a, &a, &bad, &a, &std, NULL), ER_ERR_INVALID);
    ck_assert_int_eq(er_attention_covers_device(&rep, &a, &a, &a, NULL, &b3, &std, NULL), ER_ERR_OUTPUT);
    er_tensor f32;
    er_tensor_view(&f32, ER_FP32, 2, (int64_t[]){2, 2}, NULL, (void *)16);
    er_standard mma;
    ck_assert_int_eq(er_standard_parse(&mma, "mma:sm90", NULL), ER_OK); /* fp32 operands only as tf32 */
    ck_assert_int_eq(er_attention_covers_device(&rep, &f32, &f32, &f32, NULL, &a, &mma, NULL), ER_ERR_STANDARD);
    if (!er_cuda_available())
        ck_assert_int_eq(er_attention_covers_device(&rep, &a, &a, &a, NULL, &a, &std, NULL), ER_ERR_UNSUPPORTED);
    er_report reps[2];
    er_tensor l2, l3;
    er_tensor_view(&l2, ER_FP32, 1, (int64_t[]){2}, NULL, (void *)16);
    er_tensor_view(&l3, ER_FP32, 1, (int64_t[]){3}, NULL, (void *)16);
    const er_tensor *none[2] = {NULL, NULL}, *badl[2] = {&a, &l3}, *both[2] = {&a, &l2};
    ck_assert_int_eq(er_attention_covers_device_outputs(NULL, &a, &a, &a, NULL, both, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_attention_covers_device_outputs(reps, &a, &a, &a, NULL, NULL, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_attention_covers_device_outputs(reps, &a, &a, &a, NULL, none, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_attention_covers_device_outputs(reps, &a, &a, &a, NULL, badl, &std, NULL), ER_ERR_OUTPUT);
    if (!er_cuda_available())
        ck_assert_int_eq(er_attention_covers_device_outputs(reps, &a, &a, &a, NULL, both, &std, NULL),
                         ER_ERR_UNSUPPORTED);
    /* cross_entropy: 2 x 3 logits; the loss (1), dlogits (2 x 3); a target out of range, a wrong shape */
    er_tensor z, zl, zg, zb;
    er_tensor_view(&z, ER_FP32, 2, (int64_t[]){2, 3}, NULL, (void *)16);
    er_tensor_view(&zl, ER_FP32, 1, (int64_t[]){1}, NULL, (void *)16);
    er_tensor_view(&zg, ER_FP32, 2, (int64_t[]){2, 3}, NULL, (void *)16);
    er_tensor_view(&zb, ER_FP32, 2, (int64_t[]){3, 2}, NULL, (void *)16);
    int64_t tg[2] = {0, 2}, tbad[2] = {0, 3};
    const er_tensor *xo[2] = {&zl, &zg}, *xbad[2] = {&zl, &zb};
    ck_assert_int_eq(er_cross_entropy_covers_device(NULL, &z, tg, 2, 0, -100, 0.0, xo, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_cross_entropy_covers_device(reps, NULL, tg, 2, 0, -100, 0.0, xo, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_cross_entropy_covers_device(reps, &z, NULL, 2, 0, -100, 0.0, xo, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_cross_entropy_covers_device(reps, &z, tg, 2, 0, -100, 0.0, none, &std, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_cross_entropy_covers_device(reps, &z, tg, 2, 0, -100, 0.0, xo, NULL, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_cross_entropy_covers_device(reps, &z, tbad, 2, 0, -100, 0.0, xo, &std, NULL), ER_ERR_INVALID);
    ck_assert_int_eq(er_cross_entropy_covers_device(reps, &z, tg, 1, 0, -100, 0.0, xo, &std, NULL), ER_ERR_SHAPE);
    ck_assert_int_eq(er_cross_entropy_covers_device(reps, &z, tg, 2, 0, -100, 0.0, xbad, &std, NULL), ER_ERR_OUTPUT);
    if (!er_cuda_available())
        ck_assert_int_eq(er_cross_entropy_covers_device(reps, &z, tg, 2, 0, -100, 0.0, xo, &std, NULL),
                         ER_ERR_UNSUPPORTED);
}
END_TEST

/* The device calls' memory pool: a check's buffers stay with it afterwards (the device's free memory lower by most of
 * them), er_cuda_trim gives them back (free memory as before the check, within 4 MiB), and a check after the trim
 * gives the same report; a report's classes kept on the device go back to it when the report is cleared. */
START_TEST(device_memory_kept_and_trimmed) {
    enum { n = 1024 }; /* fp16 operands, an fp32 output of zeros (outside): about 80 MB of buffers on the device */
    er_test_reseed(720);
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n);
    uint64_t *A = malloc(8 * (size_t)n * n), *B = malloc(8 * (size_t)n * n), *C = calloc((size_t)n * n, 8);
    gen_batched(0, ER_FP16, 1, 1, n, n, n, a, b);
    for (int64_t i = 0; i < (int64_t)n * n; i++) {
        er_store(A, ER_FP16, i, a[i]);
        er_store(B, ER_FP16, i, b[i]);
    }
    er_tensor tA, tB, tC;
    view_batched(&tA, &tB, &tC, ER_FP16, ER_FP32, 0, 1, 1, n, n, n, A, B, C);
    void *dA = to_device(tA.data, 2 * (size_t)n * n), *dB = to_device(tB.data, 2 * (size_t)n * n),
         *dC = to_device(tC.data, 4 * (size_t)n * n);
    er_tensor vA = tA, vB = tB, vC = tC;
    vA.data = dA;
    vB.data = dB;
    vC.data = dC;
    er_standard std;
    er_standard_init(&std);
    er_report r1, r2;
    ck_assert_int_eq(er_matmul_covers_device(&r1, &vA, &vB, &vC, &std, NULL), ER_OK); /* cuBLAS's handle made */
    er_report_clear(&r1);
    size_t f0, f1, f2, total;
    ck_assert_int_eq(er_cuda_trim(), ER_OK);
    ck_assert_int_eq(cudaMemGetInfo(&f0, &total), cudaSuccess);
    ck_assert_int_eq(er_matmul_covers_device(&r1, &vA, &vB, &vC, &std, NULL), ER_OK);
    ck_assert_int_eq(cudaMemGetInfo(&f1, &total), cudaSuccess);
    ck_assert_int_eq(er_cuda_trim(), ER_OK);
    ck_assert_int_eq(cudaMemGetInfo(&f2, &total), cudaSuccess);
    printf("t-cuda: a 1024^3 check kept %.1f MiB of the device's memory in the library's pool; er_cuda_trim gave back "
           "%.1f MiB\n", ((double)f0 - (double)f1) / 1048576, ((double)f2 - (double)f1) / 1048576);
    ER_REQUIRE(f1 + ((size_t)32 << 20) <= f0, "the pool kept %.1f MiB of the check's buffers",
               ((double)f0 - (double)f1) / 1048576);
    ER_REQUIRE(f2 + ((size_t)4 << 20) >= f0, "er_cuda_trim left %.1f MiB kept", ((double)f0 - (double)f2) / 1048576);
    ck_assert_int_eq(er_matmul_covers_device(&r2, &vA, &vB, &vC, &std, NULL), ER_OK);
    er_require_same_report(&r1, &r2, "the check after the trim");
    er_report_clear(&r1);
    er_report_clear(&r2);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    free(a); free(b); free(A); free(B); free(C);
    /* a report that keeps its classes on the device holds them (from the pool) until it is cleared: 4096 x 4096 x 8,
     * 16 MiB of classes; once the device has passed their free, er_cuda_trim returns them too */
    enum { m = 4096, k = 8 };
    a = malloc(sizeof(double) * m * k);
    b = malloc(sizeof(double) * k * m);
    A = malloc(8 * (size_t)m * k);
    B = malloc(8 * (size_t)k * m);
    C = calloc((size_t)m * m, 8);
    gen_batched(0, ER_FP16, 1, 1, m, k, m, a, b);
    for (int64_t i = 0; i < (int64_t)m * k; i++) {
        er_store(A, ER_FP16, i, a[i]);
        er_store(B, ER_FP16, i, b[i]);
    }
    view_batched(&tA, &tB, &tC, ER_FP16, ER_FP32, 0, 1, 1, m, k, m, A, B, C);
    vA = tA, vB = tB, vC = tC;
    vA.data = dA = to_device(tA.data, 2 * (size_t)m * k);
    vB.data = dB = to_device(tB.data, 2 * (size_t)k * m);
    vC.data = dC = to_device(tC.data, 4 * (size_t)m * m);
    er_report rk;
    ck_assert_int_eq(er_report_keep_on_device(&rk), ER_OK);
    ck_assert_int_eq(er_matmul_covers_device(&rk, &vA, &vB, &vC, &std, NULL), ER_OK);
    ER_REQUIRE(rk.device_classes && !rk.classes, "the kept report has no device classes");
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_int_eq(er_cuda_trim(), ER_OK);
    size_t g1, g2;
    ck_assert_int_eq(cudaMemGetInfo(&g1, &total), cudaSuccess);
    er_report_clear(&rk);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_int_eq(er_cuda_trim(), ER_OK);
    ck_assert_int_eq(cudaMemGetInfo(&g2, &total), cudaSuccess);
    printf("t-cuda: clearing a report that kept 16.0 MiB of classes on the device and trimming gave back %.1f MiB\n",
           ((double)g2 - (double)g1) / 1048576);
    ER_REQUIRE(g2 >= g1 + ((size_t)12 << 20), "clearing the kept report gave back %.1f MiB",
               ((double)g2 - (double)g1) / 1048576);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    free(a); free(b); free(A); free(B); free(C);
}
END_TEST

/* er_report_keep_on_device's mark lasts for one call: a refusal zeroes the report, a host call fills its classes in
 * host memory; er_report_fetch_classes does nothing where the classes are there or absent. */
START_TEST(kept_classes_mark_lasts_one_call) {
    ck_assert_int_eq(er_report_keep_on_device(NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_report_fetch_classes(NULL), ER_ERR_NULL);
    er_report rep, stray;
    memset(&rep, 0x5a, sizeof rep); /* stray bytes: cleared, nothing freed */
    memcpy(&stray, &rep, sizeof rep);
    if (!er_cuda_available()) { /* refused, the report untouched */
        ck_assert_int_eq(er_report_keep_on_device(&rep), ER_ERR_UNSUPPORTED);
        ck_assert_int_eq(memcmp(&rep, &stray, sizeof rep), 0);
        er_report_clear(&rep);
    } else {
        ck_assert_int_eq(er_report_keep_on_device(&rep), ER_OK);
    }
    ck_assert_ptr_null(rep.classes);
    ck_assert_ptr_null(rep.device_classes);
    ck_assert_int_eq(er_report_fetch_classes(&rep), ER_OK); /* an empty report: nothing to bring */
    ck_assert_ptr_null(er_report_classes(&rep));
    er_standard std;
    er_standard_init(&std);
    er_tensor a;
    er_tensor_view(&a, ER_FP16, 2, (int64_t[]){2, 2}, NULL, (void *)16);
    ck_assert_int_eq(er_softmax_covers_device(&rep, &a, 2, &a, &std, NULL), ER_ERR_INVALID);
    ck_assert_int_eq(rep.keep, 0);
    ck_assert_ptr_null(rep.device_classes);
    float x[4] = {1, 2, 3, 4}, y[4] = {0.0320586f, 0.0871443f, 0.2368828f, 0.6439142f};
    er_tensor tx, ty;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, 4}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){1, 4}, NULL, y);
    er_ref *ref;
    ck_assert_int_eq(er_softmax(&ref, &tx, 1), ER_OK);
    if (er_cuda_available()) ck_assert_int_eq(er_report_keep_on_device(&rep), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &ty, &std), ER_OK);
    ck_assert_ptr_nonnull(rep.classes);
    ck_assert_ptr_null(rep.device_classes);
    ck_assert_int_eq(rep.keep, 0);
    const uint8_t *before = er_report_classes(&rep);
    ck_assert_int_eq(er_report_fetch_classes(&rep), ER_OK);
    ck_assert_ptr_eq(er_report_classes(&rep), before);
    er_report_clear(&rep);
    er_ref_free(ref);
}
END_TEST

/* The GPU paths' host buffers in ordinary memory (EXACTREF_PINNED=0), as where CUDA gives no pinned memory: the tests
 * of the paths that take such buffers (layernorm's row sums and constants, attention's chunks, the rows and matmul
 * elements left to the host) run again so. */
static void unpinned_setup(void) { setenv("EXACTREF_PINNED", "0", 1); }
static void unpinned_teardown(void) { unsetenv("EXACTREF_PINNED"); }

int main(void) {
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, device_api_refusals);
    tcase_add_test(tc, kept_classes_mark_lasts_one_call);
    int have = er_cuda_available() && splitk_device_count() > 0;
    if (have) tcase_add_test(tc, splitk_on_the_gpu);
    if (have) tcase_add_test(tc, matmul_on_the_gpu_equals_the_host);
    if (have) tcase_add_test(tc, device_memory_kept_and_trimmed);
    if (have) tcase_add_test(tc, matmul_outputs_outside_on_the_gpu);
    if (have) tcase_add_test(tc, matmul_reference_of_device_operands_equals_the_host);
    if (have) tcase_add_test(tc, chain_epilogue_on_the_gpu_equals_the_host);
    if (have) tcase_add_test(tc, long_sums_on_the_gpu_equal_the_host);
    if (have) tcase_add_test(tc, matmul_sums_on_a_tie_on_the_gpu);
    if (have) tcase_add_test(tc, softmax_on_the_gpu_equals_the_host);
    if (have) tcase_add_test(tc, long_softmax_rows_on_the_gpu_equal_the_host);
    if (have) tcase_add_test(tc, softmax_open_elements_on_the_gpu_equal_the_host);
    if (have) tcase_add_test(tc, rmsnorm_on_the_gpu_equals_the_host);
    if (have) tcase_add_test(tc, log_softmax_on_the_gpu_equals_the_host);
    if (have) tcase_add_test(tc, layernorm_on_the_gpu_equals_the_host);
    if (have) tcase_add_test(tc, many_rows_on_the_gpu_equal_the_host);
    if (have) tcase_add_test(tc, h200_captures_on_the_gpu_equal_the_host);
    if (have) tcase_add_test(tc, h200_matmul_captures_on_the_gpu_equal_the_host);
    if (have) tcase_add_test(tc, attention_on_the_gpu_equals_the_host);
    if (have) tcase_add_test(tc, long_fp32_rows_on_the_gpu_equal_the_host);
    if (have) tcase_add_test(tc, h200_attention_captures_on_the_gpu_equal_the_host);
    if (have) tcase_add_test(tc, cross_entropy_on_the_gpu_equals_the_host);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("cuda, backward rows"); /* CK_RUN_CASE runs the backward passes' checks alone */
    tcase_set_timeout(tb, 300);
    if (have) tcase_add_test(tb, softmax_backward_on_the_gpu_equals_the_host);
    if (have) tcase_add_test(tb, log_softmax_backward_on_the_gpu_equals_the_host);
    if (have) suite_add_tcase(s, tb);
    TCase *td = tcase_create("cuda, matmul sets none decided"); /* its own case: CK_RUN_CASE runs it alone */
    tcase_set_timeout(td, 300);
    if (have) tcase_add_test(td, matmul_sets_none_decided_give_the_host_report);
    if (have) suite_add_tcase(s, td);
    TCase *tu = tcase_create("cuda, host buffers in ordinary memory");
    tcase_set_timeout(tu, 300);
    tcase_add_checked_fixture(tu, unpinned_setup, unpinned_teardown);
    if (have) tcase_add_test(tu, long_sums_on_the_gpu_equal_the_host);
    if (have) tcase_add_test(tu, layernorm_on_the_gpu_equals_the_host);
    if (have) tcase_add_test(tu, many_rows_on_the_gpu_equal_the_host);
    if (have) tcase_add_test(tu, attention_on_the_gpu_equals_the_host);
    if (have) tcase_add_test(tu, cross_entropy_on_the_gpu_equals_the_host);
    if (have) suite_add_tcase(s, tu);
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
