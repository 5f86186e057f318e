/* t-refusals.c: the bad-input table. One row per refusal the reference docs promise (docs/reference/errors.md):
 * a NULL for each pointer argument, wrong shapes, sizes and dims, format and standard mismatches, non-finite
 * scalars, outputs sharing memory with inputs. Each row is checked for its status, its message, and that nothing
 * was written: the inputs hold what setup put there, and every output the call could write starts as a sentinel
 * and must still hold it, except a report, which must hold either its sentinel or a record of the refusal. */
#include "../common/er_test.h"
#include "../common/er_refuse.h"

#define SENT_REF ((er_ref *)(uintptr_t)0x5EAD)

/* The inputs, built once: A [3,4], B [4,3], a matmul and a softmax reference, an any_order standard. */
static float a[12], b[12], w5[5];
static er_tensor A, B, V1, W5, C8, CoverA, CoverB, E40, A3; /* A3: [2, 3, 2], a batch of two matrices */ /* E40: [4, 0], rows of no element */ /* CoverA, CoverB: [3, 3] outputs over A's and B's memory */
static er_ref *mm, *sm;
static er_standard any, fixed, seq; /* seq: fully fixed (sequential, fma=never) */
static uint8_t c8[9];

/* The outputs, reset to sentinels before each row. */
static struct {
    er_ref *ref;
    er_tensor view;
    float cbuf[9];
    er_tensor C, Cwide;
    double d, e, lo[9], hi[9];
    uint64_t bits;
    er_format fmt;
    int64_t depth, shape[ER_MAX_DIMS];
    int ndim;
    char text[8];
    size_t need;
    er_standard s;
    er_report rep;
} o, sentinel;

static void reset(void) {
    memset(&o, 0, sizeof o);
    o.ref = SENT_REF;
    memset(&o.view, 0xAB, sizeof o.view);
    for (int i = 0; i < 9; i++) o.cbuf[i] = -1234.5f, o.lo[i] = o.hi[i] = 7;
    er_tensor_view(&o.C, ER_FP32, 2, (int64_t[]){3, 3}, NULL, o.cbuf);
    er_tensor_view(&o.Cwide, ER_FP32, 2, (int64_t[]){3, 4}, NULL, o.cbuf); /* the wrong shape for A.B */
    o.d = o.e = 7;
    o.bits = 0x5555;
    o.fmt = (er_format)99;
    o.depth = o.ndim = -5;
    for (int i = 0; i < ER_MAX_DIMS; i++) o.shape[i] = -5;
    memcpy(o.text, "zzzzzzz", 8);
    o.need = 12345;
    memset(&o.s, 0xCD, sizeof o.s);
    o.rep = sentinel_report();
}

/* The rows: name, status, a phrase the message must contain, the call. */
#define ROWS(X)                                                                                                       \
    X(view_t_null, ER_ERR_NULL, "t is NULL", er_tensor_view(NULL, ER_FP32, 1, (int64_t[]){1}, NULL, a))              \
    X(view_format, ER_ERR_FORMAT, "invalid format value 0", er_tensor_view(&o.view, (er_format)0, 1, (int64_t[]){1}, NULL, a)) \
    X(view_ndim, ER_ERR_SIZE, "ndim is 9", er_tensor_view(&o.view, ER_FP32, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, NULL, a)) \
    X(view_ndim_zero, ER_ERR_SIZE, "ndim is 0", er_tensor_view(&o.view, ER_FP32, 0, (int64_t[]){1}, NULL, a))        \
    X(view_shape_null, ER_ERR_NULL, "shape is NULL", er_tensor_view(&o.view, ER_FP32, 1, NULL, NULL, a))              \
    X(view_negative_size, ER_ERR_SIZE, "negative size", er_tensor_view(&o.view, ER_FP32, 2, (int64_t[]){2, -3}, NULL, a)) \
    X(view_size_overflow, ER_ERR_SIZE, "int64", er_tensor_view(&o.view, ER_FP32, 2, (int64_t[]){INT64_MAX, 3}, NULL, a)) \
    X(view_negative_stride, ER_ERR_SIZE, "negative stride", er_tensor_view(&o.view, ER_FP32, 1, (int64_t[]){4}, (int64_t[]){-1}, a)) \
    X(matmul_out_null, ER_ERR_NULL, "out is NULL", er_matmul(NULL, &A, &B))                                          \
    X(matmul_A_null, ER_ERR_NULL, "A is NULL", er_matmul(&o.ref, NULL, &B))                                         \
    X(matmul_B_null, ER_ERR_NULL, "B is NULL", er_matmul(&o.ref, &A, NULL))                                         \
    X(matmul_inner, ER_ERR_SHAPE, "A's columns (4) must equal B's rows (3)", er_matmul(&o.ref, &A, &A))             \
    X(matmul_vector, ER_ERR_SHAPE, "at least 2 dimensions", er_matmul(&o.ref, &V1, &B))                             \
    X(scaled_nan, ER_ERR_INVALID, "the scales must be finite (got nan and 1)", er_scaled_matmul(&o.ref, &A, &B, NAN, 1)) \
    X(scaled_inf, ER_ERR_INVALID, "the scales must be finite (got 1 and inf)", er_scaled_matmul(&o.ref, &A, &B, 1, INFINITY)) \
    X(rowwise_sa_null, ER_ERR_NULL, "scale_a is NULL", er_scaled_matmul_rowwise(&o.ref, &A, &B, NULL, &W5)) \
    X(rowwise_sa_count, ER_ERR_SHAPE, "scale_a holds 5 scales; it needs 3, one per row of A", \
      er_scaled_matmul_rowwise(&o.ref, &A, &B, &W5, &W5)) \
    X(rowwise_sa_batched, ER_ERR_SHAPE, "scale_a has 1 dimensions and 5 scales; it needs one per row of A: A's batch " \
      "shape, then [M] or [M, 1]", er_scaled_matmul_rowwise(&o.ref, &A3, &A3, &W5, &W5)) \
    X(sum_x_null, ER_ERR_NULL, "x is NULL", er_sum(&o.ref, NULL, 0))                                                \
    X(sum_dim, ER_ERR_INVALID, "dim 5 is out of range for a tensor of 2 dimensions", er_sum(&o.ref, &A, 5))        \
    X(mean_dim, ER_ERR_INVALID, "dim -3 is out of range", er_mean(&o.ref, &A, -3))                                  \
    X(max_out_null, ER_ERR_NULL, "out is NULL", er_max(NULL, &A, 0))                                                \
    X(softmax_dim, ER_ERR_INVALID, "dim 2 is out of range", er_softmax(&o.ref, &A, 2))                              \
    X(log_softmax_x_null, ER_ERR_NULL, "x is NULL", er_log_softmax(&o.ref, NULL, 0))                                \
    X(rmsnorm_eps_nan, ER_ERR_INVALID, "eps must be finite and nonnegative (got nan)", er_rmsnorm(&o.ref, &A, NULL, NAN)) \
    X(rmsnorm_eps_inf, ER_ERR_INVALID, "eps must be finite and nonnegative (got inf)", er_rmsnorm(&o.ref, &A, NULL, INFINITY)) \
    X(rmsnorm_eps_negative, ER_ERR_INVALID, "(got -1)", er_rmsnorm(&o.ref, &A, NULL, -1))                           \
    X(rmsnorm_weight, ER_ERR_SHAPE, "weight", er_rmsnorm(&o.ref, &A, &W5, 1e-5))                                    \
    X(rmsnorm_empty_rows, ER_ERR_SHAPE, "rmsnorm over an empty last dimension", er_rmsnorm(&o.ref, &E40, NULL, 1e-5)) \
    X(layernorm_eps_nan, ER_ERR_INVALID, "eps must be finite", er_layernorm(&o.ref, &A, 1, NULL, NULL, NAN))      \
    X(layernorm_ndim_zero, ER_ERR_SHAPE, "normalized_ndim must be between 1 and x's 2 dimensions (got 0)",         \
      er_layernorm(&o.ref, &A, 0, NULL, NULL, 1e-5))                                                                  \
    X(layernorm_ndim_big, ER_ERR_SHAPE, "(got 3)", er_layernorm(&o.ref, &A, 3, NULL, NULL, 1e-5))                  \
    X(layernorm_bias, ER_ERR_SHAPE, "bias", er_layernorm(&o.ref, &A, 1, NULL, &W5, 1e-5))                           \
    X(covers_report_null, ER_ERR_NULL, "report is NULL", er_covers(NULL, mm, &o.C, &any))                           \
    X(covers_ref_null, ER_ERR_NULL, "ref is NULL", er_covers(&o.rep, NULL, &o.C, &any))                             \
    X(covers_out_null, ER_ERR_NULL, "out is NULL", er_covers(&o.rep, mm, NULL, &any))                               \
    X(covers_standard_null, ER_ERR_NULL, "standard is NULL", er_covers(&o.rep, mm, &o.C, NULL))                     \
    X(covers_shape, ER_ERR_OUTPUT, "the output has shape [3, 4] but the matmul produces [3, 3]", er_covers(&o.rep, mm, &o.Cwide, &any)) \
    X(covers_fp8_ieee, ER_ERR_STANDARD, "no infinity", er_matmul_covers(&o.rep, &A, &B, &C8, "any_order", "overflow=ieee")) \
    X(covers_softmax_option, ER_ERR_STANDARD, "exp_ulps= applies to softmax, log_softmax, attention",             \
      er_matmul_covers(&o.rep, &A, &B, &o.C, "any_order", "exp_ulps=2"))                                              \
    X(covers_accumulator, ER_ERR_STANDARD, "is not an accumulator format",                                         \
      er_matmul_covers(&o.rep, &A, &B, &o.C, "any_order", "compute=fp8_e4m3fn"))                                      \
    X(covers_depth_zero, ER_ERR_STANDARD, "depth=0", er_matmul_covers(&o.rep, &A, &B, &o.C, "any_order", "depth=0"))\
    X(covers_inputs_wider, ER_ERR_STANDARD, "matmul of operand A fp32 needs a compute format holding it (compute=fp16", \
      er_matmul_covers(&o.rep, &A, &B, &o.C, "any_order", "compute=fp16"))                                          \
    X(covers_triton_short_block, ER_ERR_STANDARD, "triton:2 sums one block; K = 4 is longer",                      \
      er_matmul_covers(&o.rep, &A, &B, &o.C, "triton:2", NULL))                                                        \
    X(covers_triton_block, ER_ERR_STANDARD, "power of two", er_matmul_covers(&o.rep, &A, &B, &o.C, "triton:6", NULL))  \
    X(covers_triton_warps, ER_ERR_STANDARD, "warps=3", er_matmul_covers(&o.rep, &A, &B, &o.C, "triton:8", "warps=3"))  \
    X(covers_vec_sequential, ER_ERR_STANDARD, "vec= applies to triton:BLOCK only",                                     \
      er_matmul_covers(&o.rep, &A, &B, &o.C, "sequential", "vec=4"))                                                  \
    X(covers_combine_depth_zero, ER_ERR_STANDARD, "combine_depth=0",                                              \
      er_matmul_covers(&o.rep, &A, &B, &o.C, "any_order", "combine_depth=0"))                                         \
    X(covers_combine_depth_matmul, ER_ERR_STANDARD, "combine_depth= bounds a Welford tree (rmsnorm, layernorm and rmsnorm_backward), not matmul",\
      er_matmul_covers(&o.rep, &A, &B, &o.C, "any_order", "combine_depth=4"))                                         \
    X(covers_combine_depth_two_pass, ER_ERR_STANDARD, "variance=two_pass has none",                                 \
      er_matmul_covers(&o.rep, &A, &B, &o.C, "any_order", "variance=two_pass combine_depth=4"))                       \
    X(covers_combine_depth_order, ER_ERR_STANDARD, "combine_depth= bounds the Welford tree of any_order",           \
      er_matmul_covers(&o.rep, &A, &B, &o.C, "sequential", "combine_depth=4"))                                        \
    X(covers_split_negative, ER_ERR_STANDARD, "'split:-2'", er_matmul_covers(&o.rep, &A, &B, &o.C, "split:-2", NULL)) \
    X(covers_sets_lo_null, ER_ERR_NULL, "NULL", er_covers_sets(&o.rep, mm, &o.C, &any, NULL, o.hi, NULL))          \
    X(emulate_ref_null, ER_ERR_NULL, "ref is NULL", er_emulate(NULL, &o.C, &fixed))                                 \
    X(emulate_out_null, ER_ERR_NULL, "out is NULL", er_emulate(mm, NULL, &fixed))                                   \
    X(emulate_free_choices, ER_ERR_STANDARD, "", er_emulate(mm, &o.C, &any))                                        \
    X(emulate_shape, ER_ERR_OUTPUT, "shape", er_emulate(mm, &o.Cwide, &fixed))                                      \
    X(emulate_out_aliases_a, ER_ERR_OUTPUT, "the output shares memory with operand A", er_emulate(mm, &CoverA, &seq))   \
    X(rounded_out_aliases_b, ER_ERR_OUTPUT, "the output shares memory with operand B", er_ref_rounded(&CoverB, mm))     \
    X(covers_sets_hi_aliases_lo, ER_ERR_OUTPUT, "hi shares memory with lo",                                            \
      er_covers_sets(&o.rep, mm, &o.C, &any, o.lo, o.lo + 4, NULL))                                                   \
    X(exact_index_null, ER_ERR_NULL, "index is NULL", er_ref_exact(mm, NULL, ER_FP32, &o.d, &o.e))                  \
    X(exact_index_range, ER_ERR_INVALID, "index 5 is out of range [0, 3) in dimension 0",                          \
      er_ref_exact(mm, (int64_t[]){5, 0}, ER_FP32, &o.d, &o.e))                                                       \
    X(exact_format, ER_ERR_FORMAT, "invalid format value 77", er_ref_exact(mm, (int64_t[]){0, 0}, (er_format)77, &o.d, &o.e)) \
    X(rounded_out_null, ER_ERR_NULL, "out is NULL", er_ref_rounded(NULL, mm))                                       \
    X(rounded_shape, ER_ERR_OUTPUT, "the output has shape [3, 4]", er_ref_rounded(&o.Cwide, mm))                    \
    X(rounded_softmax, ER_ERR_UNSUPPORTED, "", er_ref_rounded(&o.Cwide, sm))                                        \
    X(ref_shape_null, ER_ERR_NULL, "ref is NULL", er_ref_shape(NULL, &o.ndim, o.shape))                             \
    X(parse_null, ER_ERR_NULL, "standard is NULL", er_standard_parse(NULL, "any_order", NULL))                      \
    X(parse_order, ER_ERR_STANDARD, "unknown order 'tree'", er_standard_parse(&o.s, "tree", NULL))                  \
    X(parse_twice, ER_ERR_STANDARD, "given twice", er_standard_parse(&o.s, "any_order", "compute=fp32 compute=fp16")) \
    X(parse_form, ER_ERR_STANDARD, "option 'fma' is not of the form key=value", er_standard_parse(&o.s, "any_order", "fma")) \
    X(format_null, ER_ERR_NULL, "standard is NULL", er_standard_format(NULL, o.text, sizeof o.text, &o.need))       \
    X(report_text_null, ER_ERR_NULL, "report is NULL", er_report_text(NULL, o.text, sizeof o.text, &o.need))       \
    X(decode_null, ER_ERR_NULL, "out is NULL", er_decode(NULL, ER_FP32, 0))                                         \
    X(decode_format, ER_ERR_FORMAT, "invalid format value 99", er_decode(&o.d, (er_format)99, 0))                   \
    X(encode_null, ER_ERR_NULL, "bits is NULL", er_encode(NULL, ER_FP32, 1.0, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE))  \
    X(round_mode, ER_ERR_INVALID, "invalid rounding mode 9", er_round_double(&o.d, ER_FP32, 1.0, (er_round)9, ER_OVERFLOW_IEEE)) \
    X(round_fp8_ieee, ER_ERR_INVALID, "fp8_e4m3fn has no infinity",                                                \
      er_encode(&o.bits, ER_FP8_E4M3FN, 1.0, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE))                                     \
    X(format_name_null, ER_ERR_NULL, "out is NULL", er_format_from_name(NULL, "fp32"))                              \
    X(format_name_unknown, ER_ERR_FORMAT, "unknown format name 'fp31'", er_format_from_name(&o.fmt, "fp31"))        \
    X(depth_triton_version, ER_ERR_INVALID, "Triton 1.0: expected 2.0 or later", er_depth_triton(&o.depth, 4096, 4, 1, 0))

#define DEFINE_CALL(name, st, msg, expr) \
    static er_status call_##name(void) { return expr; }
ROWS(DEFINE_CALL)

static const struct row {
    const char *name;
    er_status want;
    const char *needle;
    er_status (*call)(void);
} rows[] = {
#define ROW_ENTRY(name, st, msg, expr) {#name, st, msg, call_##name},
    ROWS(ROW_ENTRY)
};
#define NROWS ((int)(sizeof rows / sizeof rows[0]))

static void setup(void) {
    for (int i = 0; i < 12; i++) a[i] = (float)(i + 1), b[i] = (float)(12 - i) / 4;
    er_tensor_view(&A, ER_FP32, 2, (int64_t[]){3, 4}, NULL, a);
    er_tensor_view(&B, ER_FP32, 2, (int64_t[]){4, 3}, NULL, b);
    er_tensor_view(&V1, ER_FP32, 1, (int64_t[]){4}, NULL, a);
    er_tensor_view(&E40, ER_FP32, 2, (int64_t[]){4, 0}, NULL, a);
    er_tensor_view(&W5, ER_FP32, 1, (int64_t[]){5}, NULL, w5);
    er_tensor_view(&A3, ER_FP32, 3, (int64_t[]){2, 3, 2}, NULL, a);
    er_tensor_view(&C8, ER_FP8_E4M3FN, 2, (int64_t[]){3, 3}, NULL, c8);
    er_tensor_view(&CoverA, ER_FP32, 2, (int64_t[]){3, 3}, NULL, a + 2);
    er_tensor_view(&CoverB, ER_FP32, 2, (int64_t[]){3, 3}, NULL, b + 3);
    ck_assert_int_eq(er_matmul(&mm, &A, &B), ER_OK);
    ck_assert_int_eq(er_softmax(&sm, &A, -1), ER_OK);
    ck_assert_int_eq(er_standard_parse(&any, "any_order", NULL), ER_OK);
    ck_assert_int_eq(er_standard_parse(&fixed, "sequential", NULL), ER_OK);
    ck_assert_int_eq(er_standard_parse(&seq, "sequential", "fma=never"), ER_OK);
    reset();
    sentinel = o;
}
static void teardown(void) {
    er_ref_free(mm);
    er_ref_free(sm);
}

START_TEST(each_row) {
    const struct row *r = &rows[_i];
    reset();
    er_status st = r->call();
    ck_assert_msg(st == r->want, "%s: got %s (%s), want %s", r->name, er_status_name(st), er_last_error(),
                  er_status_name(r->want));
    ck_assert_msg(strstr(er_last_error(), er_status_name(r->want)) == er_last_error(), "%s: message '%s' does not start with the status",
                  r->name, er_last_error());
    ck_assert_msg(strstr(er_last_error(), r->needle) != NULL, "%s: message '%s' does not mention '%s'", r->name,
                  er_last_error(), r->needle);
    /* nothing written: the inputs hold what setup put there, every output still holds its sentinel (the report: its
     * sentinel or the refusal) */
    for (int i = 0; i < 12; i++)
        ck_assert_msg(a[i] == (float)(i + 1) && b[i] == (float)(12 - i) / 4, "%s: an input was written", r->name);
    ck_assert_msg(o.ref == SENT_REF, "%s: *out was written", r->name);
    ck_assert_msg(memcmp(&o.view, &sentinel.view, sizeof o.view) == 0, "%s: the view was written", r->name);
    ck_assert_msg(memcmp(o.cbuf, sentinel.cbuf, sizeof o.cbuf) == 0, "%s: the output tensor was written", r->name);
    ck_assert_msg(memcmp(o.lo, sentinel.lo, sizeof o.lo) == 0 && memcmp(o.hi, sentinel.hi, sizeof o.hi) == 0,
                  "%s: the sets were written", r->name);
    ck_assert_msg(o.d == 7 && o.e == 7 && o.bits == 0x5555 && o.fmt == (er_format)99 && o.depth == -5 && o.ndim == -5,
                  "%s: a scalar output was written", r->name);
    ck_assert_msg(memcmp(o.shape, sentinel.shape, sizeof o.shape) == 0, "%s: the shape was written", r->name);
    ck_assert_msg(memcmp(o.text, "zzzzzzz", 8) == 0 && o.need == 12345, "%s: the text buffer was written", r->name);
    ck_assert_msg(memcmp(&o.s, &sentinel.s, sizeof o.s) == 0, "%s: the standard was written", r->name);
    if (memcmp(&o.rep, &sentinel.rep, sizeof o.rep) != 0)
        ck_assert_msg(refused_report(&o.rep, r->want), "%s: the report was written but does not record the refusal", r->name);
}
END_TEST

/* Each row's call is a distinct refusal: the table holds no duplicate names or calls by construction, and every
 * status the reference promises for bad input appears in it. */
START_TEST(every_status_has_a_row) {
    static const er_status promised[] = {ER_ERR_NULL, ER_ERR_INVALID, ER_ERR_FORMAT, ER_ERR_SHAPE, ER_ERR_SIZE,
                                         ER_ERR_STANDARD, ER_ERR_OUTPUT, ER_ERR_UNSUPPORTED};
    for (size_t k = 0; k < sizeof promised / sizeof promised[0]; k++) {
        int found = 0;
        for (int i = 0; i < NROWS; i++) found |= rows[i].want == promised[k];
        ck_assert_msg(found, "no row for %s", er_status_name(promised[k]));
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("refusals");
    TCase *tc = tcase_create("table");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, each_row, 0, NROWS);
    tcase_add_test(tc, every_status_has_a_row);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
