/* t-toolchain.c: what real toolchains do, against the standards that name them (tools/capture/capture_toolchains.py).
 *
 * - tests/data/ulps.txt: the ulp error of each PTX approximation over all 2^32 fp32 inputs on an H200. The budgets
 *   the standards assume (exp 2, rsqrt 2, log 1, division 2, __expf 2 + floor(1.173 |x|)) hold under the reading
 *   exactref takes (the smaller of the error from the exact value and from the correctly rounded one), and the exps
 *   flush subnormal results, which every softmax set allows.
 * - tests/data/tcrow.*: Triton softmax, log_softmax, rmsnorm and layernorm kernels (large arguments, masked lanes,
 *   subnormal exps and squares) and a CUDA softmax built with --use_fast_math: every case covered under the options
 *   its line names; where a line names wrong options, its kernel has a case outside them.
 * - tests/data/tcdepth.*: Triton layernorm, rmsnorm and softmax kernels at n = 256 .. 8192 (capture_depth.py),
 *   correct and with planted bugs, under math=triton and depth= the depth of their tl.sum (er_depth_triton): every
 *   correct output covered; the unbiased variance and eps outside the square root (randn data) caught at every n,
 *   where any order misses them at large n.
 * - tests/data/tlsum.*: Triton's tl.sum over one row per program (capture_tlsum.py), emulated bit for bit under
 *   triton:BLOCK. */
#include "../common/er_test.h"
#include "../common/npz.h"

#ifndef ER_TEST_DATA_DIR
#define ER_TEST_DATA_DIR "tests/data"
#endif

/* One measured function of ulps.txt: its worst error under each reading, and its subnormal results. */
typedef struct measured { double exact, cr, excess; long long flushed, subnormal; } measured;

static measured find_measured(const char *fn, const char *build) {
    FILE *f = fopen(ER_TEST_DATA_DIR "/ulps.txt", "r");
    ck_assert_msg(f != NULL, "cannot open ulps.txt");
    char line[512], name[64], b[64];
    measured m = {-1, -1, 0, 0, 0};
    while (fgets(line, sizeof line, f)) {
        double sub;
        if (line[0] == '#') continue;
        if (sscanf(line, "%63s %63s %lf %lf %lf %lld %lld %lf", name, b, &m.exact, &m.cr, &sub, &m.flushed, &m.subnormal,
                   &m.excess) >= 4 && strcmp(name, fn) == 0 && strcmp(b, build) == 0) {
            fclose(f);
            return m;
        }
    }
    fclose(f);
    ck_abort_msg("%s (%s) is not in ulps.txt", fn, build);
    return m;
}

START_TEST(measured_ulps_meet_the_budgets) {
    struct { const char *fn, *build; double budget; } rows[] = {
        {"ex2.approx.f32", "default", 2.0},    /* tl.exp, math=triton */
        {"rsqrt.approx.ftz.f32", "default", 2.0}, /* tl.math.rsqrt, rsqrt_ulps default */
        {"logf", "ftz", 1.0},                 /* tl.log, log_ulps default */
        {"logf", "default", 1.0},
        {"expf", "default", 2.0},             /* exp_ulps default */
        {"div.full.f32", "sampled_536870912_pairs", 2.0}, /* x / y in Triton: div_ulps=2 */
        {"sqrt.approx.ftz.f32", "default", 1.0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        measured m = find_measured(rows[i].fn, rows[i].build);
        double seen = m.exact < m.cr ? m.exact : m.cr;
        ck_assert_msg(seen <= rows[i].budget, "%s: %.4f ulps measured, budget %g", rows[i].fn, seen, rows[i].budget);
        printf("%s (%s): %.4f ulps from the exact value, %.4f from the correctly rounded one; budget %g\n", rows[i].fn,
               rows[i].build, m.exact, m.cr, rows[i].budget);
    }
    /* the exact-value reading alone is not enough: ex2.approx and div.full exceed 2 ulps from the exact value */
    ck_assert(find_measured("ex2.approx.f32", "default").exact > 2.0);
    /* __expf within 2 + floor(1.173 |x|) (the excess column is at most 0); expf and ex2 flush subnormal results */
    ck_assert(find_measured("__expf", "default").excess <= 0.0);
    measured e = find_measured("expf", "default"), x2 = find_measured("ex2.approx.f32", "default");
    ck_assert(e.subnormal > 0 && e.flushed == e.subnormal && x2.flushed == x2.subnormal);
}
END_TEST

static int covers_case(npz_file *z, const char *id, const char *op, double eps, const char *options, char *text, size_t cap);

START_TEST(row_kernels_at_their_depth) {
    npz_file z;
    FILE *f = open_cases(&z, ER_TEST_DATA_DIR "/tcdepth.npz", ER_TEST_DATA_DIR "/tcdepth.txt");
    char line[512], id[32], op[32], kernel[96], verdict[16];
    int n, block, warps, cases = 0, bugs = 0, caught_depth = 0, caught_any = 0, promised = 0;
    double eps;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        ck_assert_int_eq(sscanf(line, "%31s %31s %95s %15s %d %lf %d %d", id, op, kernel, verdict, &n, &eps, &block, &warps), 8);
        int64_t D;
        ck_assert_int_eq(er_depth_triton(&D, block, warps, 3, 6), ER_OK);
        char opts[96], anyo[96], text[4096] = "";
        int ln = strcmp(op, "layernorm") == 0;
        snprintf(opts, sizeof opts, "math=triton depth=%lld%s", (long long)D, ln ? " variance=two_pass" : "");
        snprintf(anyo, sizeof anyo, "math=triton%s", ln ? " variance=two_pass" : "");
        int at_depth = covers_case(&z, id, op, eps, opts, text, sizeof text), any = covers_case(&z, id, op, eps, anyo, NULL, 0);
        cases++;
        if (strcmp(verdict, "correct") == 0) {
            ck_assert_msg(at_depth, "case %s (%s, n %d) is not covered under %s:\n%s", id, kernel, n, opts, text);
            ck_assert_msg(any, "case %s (%s, n %d) is not covered under %s", id, kernel, n, anyo);
            continue;
        }
        bugs++;
        caught_depth += !at_depth;
        caught_any += !any;
        ck_assert_msg(!at_depth || any, "case %s (%s): caught under any order but not at depth %lld", id, kernel, (long long)D);
        if (strstr(kernel, "unbiased_randn") || strstr(kernel, "layernorm_eps_outside_sqrt_randn")) {
            promised++;
            ck_assert_msg(!at_depth, "case %s (%s, n %d) is not caught under %s", id, kernel, n, opts);
        }
    }
    fclose(f);
    npz_free(&z);
    printf("H200 Triton row kernels at n = 256 .. 8192: %d correct cases covered at their tl.sum depth; %d planted bugs, "
           "%d caught at that depth, %d under any order (%d promised catches, all made)\n", cases - bugs, bugs, caught_depth,
           caught_any, promised);
    ck_assert_int_eq(cases, 140);
}
END_TEST

static int covers_case(npz_file *z, const char *id, const char *op, double eps, const char *options, char *text, size_t cap) {
    char key[96];
    const npy_array *arr[4] = {NULL, NULL, NULL, NULL};
    const char *names[4] = {"in__x", "out__y", "out__mean", "out__rstd"};
    er_tensor t[4];
    int nlayer = strcmp(op, "layernorm") == 0 ? 4 : 2;
    for (int i = 0; i < nlayer; i++) {
        snprintf(key, sizeof key, "%s__%s", id, names[i]);
        arr[i] = npz_find(z, key);
        ck_assert_msg(arr[i] && npz_view(&t[i], arr[i]), "case %s: %s", id, names[i]);
    }
    er_ref *ref = NULL;
    er_status st;
    if (strcmp(op, "softmax") == 0) st = er_softmax(&ref, &t[0], -1);
    else if (strcmp(op, "log_softmax") == 0) st = er_log_softmax(&ref, &t[0], -1);
    else if (strcmp(op, "rmsnorm") == 0) {
        snprintf(key, sizeof key, "%s__in__weight", id);
        const npy_array *w = npz_find(z, key); /* none: no weight */
        er_tensor tw;
        ck_assert_msg(!w || npz_view(&tw, w), "case %s: weight", id);
        st = er_rmsnorm(&ref, &t[0], w ? &tw : NULL, eps);
    } else st = er_layernorm(&ref, &t[0], 1, NULL, NULL, eps);
    ck_assert_msg(st == ER_OK, "case %s: %s", id, er_last_error());
    er_standard std;
    ck_assert_msg(er_standard_parse(&std, "any_order", strcmp(options, "default") == 0 ? NULL : options) == ER_OK, "%s",
                  er_last_error());
    er_report reps[3];
    int ok = 1;
    if (nlayer == 4) {
        /* mean and rstd are one per row: [rows] against the reference's [rows, 1] */
        er_tensor m2 = t[2], r2 = t[3];
        m2.ndim = r2.ndim = 2;
        m2.shape[1] = r2.shape[1] = 1;
        m2.strides[1] = r2.strides[1] = 1;
        const er_tensor *outs[3] = {&t[1], &m2, &r2};
        ck_assert_msg(er_covers_outputs(reps, ref, outs, 3, &std) == ER_OK, "case %s: %s", id, er_last_error());
        for (int o = 0; o < 3; o++) {
            if (!er_report_all(&reps[o]) && ok && text) er_report_text(&reps[o], text, cap, NULL);
            ok &= er_report_all(&reps[o]);
            er_report_clear(&reps[o]);
        }
    } else {
        ck_assert_msg(er_covers(&reps[0], ref, &t[1], &std) == ER_OK, "case %s: %s", id, er_last_error());
        ok = er_report_all(&reps[0]);
        if (!ok && text) er_report_text(&reps[0], text, cap, NULL);
        er_report_clear(&reps[0]);
    }
    er_ref_free(ref);
    return ok;
}

START_TEST(row_kernels_on_h200) {
    npz_file z;
    FILE *f = open_cases(&z, ER_TEST_DATA_DIR "/tcrow.npz", ER_TEST_DATA_DIR "/tcrow.txt");
    char line[512], id[32], op[32], kernel[96], claim[128], wrong[128];
    char kernels[64][96];
    int expect_wrong[64] = {0}, caught_wrong[64] = {0}, nk = 0, cases = 0;
    double eps;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        ck_assert_int_eq(sscanf(line, "%31s %31s %95s %lf %127s %127s", id, op, kernel, &eps, claim, wrong), 6);
        char text[4096] = "";
        if (!covers_case(&z, id, op, eps, claim, text, sizeof text))
            ck_abort_msg("case %s (%s, eps %g) is not covered under %s:\n%s", id, kernel, eps, claim, text);
        int k = 0;
        while (k < nk && strcmp(kernels[k], kernel) != 0) k++;
        if (k == nk) { ck_assert_int_lt(nk, 64); snprintf(kernels[nk++], sizeof kernels[0], "%s", kernel); }
        if (strcmp(wrong, "-") != 0) {
            expect_wrong[k] = 1;
            caught_wrong[k] += !covers_case(&z, id, op, eps, wrong, NULL, 0);
        }
        cases++;
    }
    fclose(f);
    npz_free(&z);
    int families = 0;
    for (int k = 0; k < nk; k++) {
        if (!expect_wrong[k]) continue;
        ck_assert_msg(caught_wrong[k] > 0, "every case of %s is covered under the options that do not describe it", kernels[k]);
        families++;
    }
    printf("H200 row kernels: %d cases of %d kernels covered under their standard; %d kernels with cases outside the "
           "standard that does not describe them\n", cases, nk, families);
    ck_assert_int_eq(cases, 110);
}
END_TEST

/* splitmix64's output for the state seed + (i + 1) * golden: the draws capture_tlsum.py makes for its rows */
static uint64_t tl_draw(uint64_t seed, uint64_t i) {
    const uint64_t g = UINT64_C(0x9E3779B97F4A7C15);
    uint64_t z = seed * g + (i + 1) * g;
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* er_emulate of er_sum under standard into a rows-long fp32 vector; returns the rows whose bits equal want's. */
static int tl_emulate_rows(er_ref *ref, int rows, const char *order, const char *options, const float *want) {
    float got[64] = {0};
    er_tensor t;
    er_tensor_view(&t, ER_FP32, 1, (int64_t[]){rows}, NULL, got);
    er_standard st;
    ck_assert_msg(er_standard_parse(&st, order, options) == ER_OK, "%s", er_last_error());
    ck_assert_msg(er_emulate(ref, &t, &st) == ER_OK, "%s %s: %s", order, options, er_last_error());
    int same = 0;
    for (int r = 0; r < rows; r++) same += memcmp(&got[r], &want[r], 4) == 0;
    return same;
}

/* tests/data/tlsum.*: Triton 3.6's tl.sum over one row per program on an H200 (capture_tlsum.py: fp32, bf16 and fp16
 * rows converted to fp32, BLOCK 32 .. 16384, 1 to 16 warps, n = BLOCK, BLOCK - 1 and 3 BLOCK / 4 + 16; then subnormal
 * fp32 rows and tie-rich fp32 and bf16 rows on 18 configurations each), 474 cases of 16 rows: er_emulate under triton:BLOCK warps=W gives every sum bit for bit with the vector width exactref derives (the
 * vec= of the layout Triton chose, read from its TTGIR, gives the same), and covers() passes them. Any order covers
 * them; a sequential sum, or the tree of twice the warps, differs in most. */
START_TEST(triton_sum_bit_for_bit) {
    npz_file z;
    FILE *f = open_cases(&z, ER_TEST_DATA_DIR "/tlsum.npz", ER_TEST_DATA_DIR "/tlsum.txt");
    char line[512], id[32], dt[16], layout[256], kind[16];
    /* the sanitizer runs (ER_TEST_MULTIPLIER below 1) emulate every k-th capture (er_test_stride); every line is read
     * and counted */
    int stride = er_test_stride(), lines = 0;
    int cases = 0, seq_differs = 0, warps_differs = 0, multi_warp = 0, subnormal = 0, ties = 0;
    long long exact = 0;
    static uint16_t h[64 * 16384];
    static float x32[64 * 16384];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        int block, warps, n, rows;
        unsigned long long seed;
        ck_assert_int_eq(sscanf(line, "%31s %15s %d %d %d %d %llu %255s %15s", id, dt, &block, &warps, &n, &rows, &seed, layout,
                                kind), 9);
        /* capture_common.tlsum_values: "subnormal" rows are 24-bit values of exponents in [-10, 10] times 2^-136,
         * "ties" rows +-2^e (p = 1, e in [-13, 13], times 2^12) */
        int sub = strcmp(kind, "subnormal") == 0, tie = strcmp(kind, "ties") == 0;
        subnormal += sub;
        ties += tie;
        if (lines++ % stride) continue;
        ck_assert(rows <= 64 && n <= 16384);
        int fp32 = strcmp(dt, "fp32") == 0, bf16 = strcmp(dt, "bf16") == 0;
        er_format F = fp32 ? ER_FP32 : bf16 ? ER_BF16 : ER_FP16;
        int p = sub ? 24 : tie ? 1 : fp32 ? 24 : bf16 ? 8 : 11, E = sub ? 10 : tie ? 13 : strcmp(dt, "fp16") == 0 ? 10 : 20;
        double scale = sub ? 0x1p-136 : tie ? 0x1p12 : 1.0;
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < n; i++) {
                uint64_t d = tl_draw(seed + (uint64_t)r, (uint64_t)i);
                uint64_t m = (d >> 11) & ((UINT64_C(1) << (p - 1)) - 1);
                int e = (int)((d >> 40) % (uint64_t)(2 * E + 1)) - E;
                double v = ((d >> 63) ? -1.0 : 1.0) * ldexp(1.0 + ldexp((double)m, -(p - 1)), e) * scale;
                if (fp32) x32[r * n + i] = (float)v; /* rounded to nearest, as numpy's cast (subnormal rows) */
                else { /* bf16 or fp16: a normal value, exact: its sign, biased exponent and top fraction bits */
                    int fb = bf16 ? 7 : 10, ee;
                    double fr = frexp(fabs(v), &ee); /* |v| = fr 2^ee, fr in [0.5, 1) */
                    uint64_t frac = (uint64_t)ldexp(fr * 2.0 - 1.0, fb);
                    h[r * n + i] = (uint16_t)(((uint64_t)(v < 0) << 15) | ((uint64_t)(ee - 1 + (bf16 ? 127 : 15)) << fb) | frac);
                }
            }
        er_tensor tx, ts;
        er_tensor_view(&tx, F, 2, (int64_t[]){rows, n}, NULL, fp32 ? (void *)x32 : (void *)h);
        char key[64];
        snprintf(key, sizeof key, "%s__out__s", id);
        const npy_array *a = npz_find(&z, key);
        ck_assert_msg(a != NULL, "%s is missing", key);
        ck_assert_int_eq(npz_view(&ts, a), 1);
        const float *want = (const float *)ts.data;
        er_ref *ref;
        ck_assert_int_eq(er_sum(&ref, &tx, 1), ER_OK);
        char order[32], opts[32], vopts[48];
        snprintf(order, sizeof order, "triton:%d", block);
        snprintf(opts, sizeof opts, "warps=%d", warps);
        int vec = atoi(strstr(layout, "sizePerThread=[") + 15);
        snprintf(vopts, sizeof vopts, "warps=%d vec=%d", warps, vec);
        ck_assert_msg(tl_emulate_rows(ref, rows, order, opts, want) == rows, "case %s (%s): er_emulate under %s %s differs",
                      id, line, order, opts);
        ck_assert_msg(tl_emulate_rows(ref, rows, order, vopts, want) == rows, "case %s: under %s %s", id, order, vopts);
        er_standard st;
        er_report rep;
        ck_assert_int_eq(er_standard_parse(&st, order, opts), ER_OK);
        ck_assert_int_eq(er_covers(&rep, ref, &ts, &st), ER_OK);
        ck_assert_msg(er_report_all(&rep), "case %s: not covered under %s %s", id, order, opts);
        exact += er_report_count(&rep, ER_CLASS_EXACT);
        er_report_clear(&rep);
        ck_assert_int_eq(er_standard_parse(&st, "any_order", NULL), ER_OK);
        ck_assert_int_eq(er_covers(&rep, ref, &ts, &st), ER_OK);
        ck_assert_msg(er_report_all(&rep), "case %s: not covered under any order", id);
        er_report_clear(&rep);
        seq_differs += tl_emulate_rows(ref, rows, "sequential", "fma=never", want) < rows;
        if (warps < 16 && (int64_t)block >= 64 * warps) {
            snprintf(opts, sizeof opts, "warps=%d", 2 * warps);
            multi_warp++;
            warps_differs += tl_emulate_rows(ref, rows, order, opts, want) < rows;
        }
        er_ref_free(ref);
        cases++;
    }
    fclose(f);
    npz_free(&z);
    printf("Triton's tl.sum on H200: %d of %d cases (16 rows each) emulated bit for bit under triton:BLOCK warps=W (%lld "
           "sums correctly rounded; the file's %d of subnormal rows, %d of tie-rich rows); a sequential sum differs in %d, "
           "twice the warps in %d of %d\n", cases, lines, exact, subnormal, ties, seq_differs, warps_differs, multi_warp);
    ck_assert_int_eq(lines, 474);
    ck_assert_int_eq(cases, (474 + stride - 1) / stride);
    ck_assert(subnormal == 18 && ties == 36);
    ck_assert(seq_differs > cases * 9 / 10 && warps_differs > multi_warp * 9 / 10);
}
END_TEST

int main(void) {
    Suite *s = suite_create("toolchain");
    TCase *tc = tcase_create("toolchain");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, measured_ulps_meet_the_budgets);
    tcase_add_test(tc, row_kernels_on_h200);
    tcase_add_test(tc, row_kernels_at_their_depth);
    tcase_add_test(tc, triton_sum_bit_for_bit);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
