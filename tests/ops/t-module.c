/* t-module.c: the op-module interface (src/ops/module.h; docs/design.md, "Adding an op") with toy ops built in this
 * test exactly as a real op is: a state of its own, a module, and one line in the table of modules. The test is
 * linked with the engine, the generic reference code and what they need (not the real ops), and this table stands in
 * for src/ops/table.c. It checks what the engine promises any module: any number of outputs, each read and reported
 * on its own; the state made zeroed and released once; an element a module never puts is an internal error, never a
 * pass; and every module of the table keeps the interface's contract. */
#include "common/er_test.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

/* ---- the toy ops: out_o = x + o (o = 0 .. nout-1), exact for the small integers the tests give ---- */

typedef struct toy_state {
    er_tensor x;
    int skip_last; /* a faulty module: never puts the last element */
    int decline;   /* a module that declines the check (as the GPU path does for what it does not take) */
} toy_state;
static toy_state *toy(const er_ref *r) { return (toy_state *)r->priv; }

static int toy_destroyed;
static void toy_destroy(er_ref *r) {
    (void)r;
    toy_destroyed++;
}

static int toy_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap) {
    (void)cap;
    names[0] = "the input x";
    views[0] = &toy(r)->x;
    return 1;
}

static er_status toy_check(const er_ref *ref, const er_standard *std) {
    if (std->order != ER_ORDER_ANY) return er__fail(ER_ERR_STANDARD, "%s takes any_order", er__op_name(ref));
    return er__standard_takes(ref, std);
}

/* Two shares, each a contiguous half of the elements, as a threaded module splits its work. */
static er_status toy_covers(const er_ref *ref, const er_standard *std, er_sinks *sk) {
    (void)std;
    const toy_state *s = toy(ref);
    int64_t n = ref->n, end = s->skip_last ? n - 1 : n;
    if (s->decline) {
        er__sinks_decline(sk);
        return ER_OK;
    }
    ER_RETURN_IF_ERROR(er__sinks_open(sk, 2));
    for (int t = 0; t < 2; t++)
        for (int o = 0; o < ref->mod->nout; o++) {
            er_sink *snk = er__sinks_at(sk, t, o);
            if (!snk) continue;
            for (int64_t idx = n * t / 2; idx < n * (t + 1) / 2 && idx < end; idx++) {
                double v = er__load(&s->x, er__offset(&s->x, idx)) + o;
                er_cval cv = {.lo = v, .hi = v};
                er_cset c;
                er__cset_build(&c, snk->O, snk->ov, 0, &cv, v, er__round_double(snk->O, v, ER_ROUND_NEAREST, snk->ov));
                er__sink_put(snk, idx, &c);
            }
        }
    return ER_OK;
}

static const char *const toy_names[5] = {"out", "plus1", "plus2", "plus3", "plus4"};
#define TOY_MODULE(op, n)                                                                                      \
    {                                                                                                          \
        .name = op, .nout = n, .out_names = toy_names, .priv_size = sizeof(toy_state), .destroy = toy_destroy, \
        .out_shape = er__out_shape_same, .check = toy_check, .covers = toy_covers, .inputs = toy_inputs        \
    }
static const er_op_module toy_one_module = TOY_MODULE("toy_one", 1), toy_five_module = TOY_MODULE("toy_five", 5),
                          toy_unlisted_module = TOY_MODULE("toy_unlisted", 1);

/* The table of this build's modules (src/ops/table.c's place). */
const er_op_module *const er__modules[] = {&toy_one_module, &toy_five_module, NULL};

/* A toy reference on x (a view kept, not copied). */
static er_ref *toy_ref(const er_op_module *m, const er_tensor *x, int skip_last) {
    er_ref *r = NULL;
    ck_assert_int_eq(er__ref_alloc(&r, m), ER_OK);
    ck_assert_int_eq(toy(r)->skip_last, 0); /* the state comes zeroed */
    toy(r)->x = *x;
    toy(r)->skip_last = skip_last;
    r->ndim = x->ndim;
    r->n = 1;
    for (int i = 0; i < x->ndim; i++) { r->shape[i] = x->shape[i]; r->n *= x->shape[i]; }
    return r;
}

#define R 7
#define C 9
static float xs[R * C], outs[5][R * C];
static const int64_t shape[2] = {R, C};

static void fill(void) {
    er_test_reseed(41);
    for (int i = 0; i < R * C; i++) {
        xs[i] = (float)er_rand_int(-100, 100);
        for (int o = 0; o < 5; o++) outs[o][i] = xs[i] + (float)o;
    }
}

START_TEST(five_outputs_each_judged_alone) {
    fill();
    er_tensor x, out[5];
    ck_assert_int_eq(er_tensor_view(&x, ER_FP32, 2, shape, NULL, xs), ER_OK);
    for (int o = 0; o < 5; o++) ck_assert_int_eq(er_tensor_view(&out[o], ER_FP32, 2, shape, NULL, outs[o]), ER_OK);
    er_ref *r = toy_ref(&toy_five_module, &x, 0);
    ck_assert_int_eq(er_ref_num_outputs(r), 5);
    ck_assert_str_eq(er_ref_output_name(r, 4), "plus4");
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    er_report reps[5];
    for (int o = 0; o < 5; o++) er_report_init(&reps[o]);
    const er_tensor *ptrs[5] = {&out[0], &out[1], NULL, &out[3], &out[4]};
    outs[4][17] += 1; /* one wrong element of the fifth output */
    ck_assert_int_eq(er_covers_outputs(reps, r, ptrs, 5, &std), ER_OK);
    for (int o = 0; o < 4; o++) ck_assert_int_eq(er_report_failed(&reps[o]), 0);
    ck_assert_int_eq(er_report_numel(&reps[2]), 0); /* not checked: an empty report */
    ck_assert_int_eq(er_report_count(&reps[0], ER_CLASS_EXACT), R * C);
    ck_assert_int_eq(er_report_failed(&reps[4]), 1);
    ck_assert_int_eq(er_report_classes(&reps[4])[17], ER_CLASS_OUTSIDE);
    for (int o = 0; o < 5; o++) er_report_clear(&reps[o]);
    /* the fifth output's sets alone */
    double lo[R * C], hi[R * C];
    uint8_t fl[R * C];
    ck_assert_int_eq(er_ref_enclosure(r, 4, &std, ER_FP32, lo, hi, fl), ER_OK);
    for (int i = 0; i < R * C; i++) ck_assert(lo[i] == xs[i] + 4.0 && hi[i] == xs[i] + 4.0 && fl[i] == 0);
    /* a count that is not the op's is refused, naming both */
    ck_assert_int_eq(er_covers_outputs(reps, r, ptrs, 3, &std), ER_ERR_OUTPUT);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "toy_five has 5 outputs (got 3)"));
    for (int o = 0; o < 3; o++) er_report_clear(&reps[o]);
    er_ref_free(r);
}
END_TEST

START_TEST(state_released_once) {
    fill();
    er_tensor x;
    ck_assert_int_eq(er_tensor_view(&x, ER_FP32, 2, shape, NULL, xs), ER_OK);
    toy_destroyed = 0;
    er_ref *r = toy_ref(&toy_one_module, &x, 0);
    ck_assert_ptr_eq(er__module_of(r), &toy_one_module);
    ck_assert_str_eq(er__op_name(r), "toy_one");
    er_ref_free(r);
    ck_assert_int_eq(toy_destroyed, 1);
    er_ref_free(NULL);
    ck_assert_int_eq(toy_destroyed, 1);
}
END_TEST

START_TEST(an_element_never_put_is_an_internal_error) {
    fill();
    er_tensor x, out;
    ck_assert_int_eq(er_tensor_view(&x, ER_FP32, 2, shape, NULL, xs), ER_OK);
    ck_assert_int_eq(er_tensor_view(&out, ER_FP32, 2, shape, NULL, outs[0]), ER_OK);
    er_ref *r = toy_ref(&toy_one_module, &x, 1);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    er_report rep;
    er_report_init(&rep);
    ck_assert_int_eq(er_covers(&rep, r, &out, &std), ER_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "toy_one classified 62 of the 63 elements of its output out"));
    ck_assert(!er_report_all(&rep));
    er_report_clear(&rep);
    er_ref_free(r);
}
END_TEST

START_TEST(declining_only_through_covers_module) {
    fill();
    er_tensor x, out;
    ck_assert_int_eq(er_tensor_view(&x, ER_FP32, 2, shape, NULL, xs), ER_OK);
    ck_assert_int_eq(er_tensor_view(&out, ER_FP32, 2, shape, NULL, outs[0]), ER_OK);
    er_ref *r = toy_ref(&toy_one_module, &x, 0);
    toy(r)->decline = 1;
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    er_report rep;
    er_report_init(&rep);
    /* a module of the table may not decline: the elements would pass unchecked */
    ck_assert_int_eq(er_covers(&rep, r, &out, &std), ER_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "toy_one declined its check outside er__covers_module"));
    er_report_clear(&rep);
    /* through er__covers_module (the GPU path's way) it may: nothing classified, an empty report, and the caller
     * checks another way */
    int flag = 0;
    ck_assert_int_eq(er__covers_module(&rep, &toy_one_module, r, &out, &std, &flag), ER_OK);
    ck_assert_int_eq(er_report_numel(&rep), 0);
    er_report_clear(&rep);
    er_ref_free(r);
}
END_TEST

/* Every module of the table: a name of its own, at least one output, each named, and the callbacks the engine calls
 * without asking; a module outside the table makes no reference. */
START_TEST(table_keeps_the_contract) {
    int n = 0;
    for (const er_op_module *const *m = er__modules; *m; m++, n++) {
        ck_assert_ptr_nonnull((*m)->name);
        for (const er_op_module *const *k = er__modules; k < m; k++) ck_assert_str_ne((*k)->name, (*m)->name);
        ck_assert_int_ge((*m)->nout, 1);
        for (int o = 0; o < (*m)->nout; o++) ck_assert_ptr_nonnull((*m)->out_names[o]);
        ck_assert(((*m)->out_shape && (*m)->check && (*m)->covers && (*m)->inputs) != 0);
        ck_assert(!(*m)->cursor_open || ((*m)->cursor_inner && (*m)->cursor_set && (*m)->cursor_close));
    }
    ck_assert_int_eq(n, 2);
    /* a module the table does not list makes no reference */
    er_ref *r = NULL;
    ck_assert_int_eq(er__ref_alloc(&r, &toy_unlisted_module), ER_ERR_INTERNAL);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "op module toy_unlisted is not in the table of modules"));
}
END_TEST

int main(void) {
    Suite *s = suite_create("module");
    TCase *tc = tcase_create("toy");
    tcase_add_test(tc, five_outputs_each_judged_alone);
    tcase_add_test(tc, state_released_once);
    tcase_add_test(tc, an_element_never_put_is_an_internal_error);
    tcase_add_test(tc, declining_only_through_covers_module);
    tcase_add_test(tc, table_keeps_the_contract);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
