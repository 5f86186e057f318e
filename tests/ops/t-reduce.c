/* t-reduce.c: sum, mean and max over one dimension. Exact results against MPFR (any dimension of strided
 * 1- to 3-D tensors, every input format, special values); soundness and bit-exact emulation of random
 * standards against the test's own implementations (the sum as a dot product with ones, the mean dividing
 * by n or multiplying by fl(1/n)); the rules for empty dimensions; refusals. */
#include "../common/er_impl.h"

static const er_format fmts[] = {ER_FP16, ER_BF16, ER_FP32, ER_FP8_E4M3FN, ER_FP8_E5M2, ER_FP64};

/* x of shape (d0, d1, d2) (ndim of them used), filled from a family; the vector reduced is along `dim`. */
typedef struct tcase { er_format f; int ndim, dim; int64_t shape[3]; double *v; void *buf; er_tensor t; } tcase;

static void make_case(tcase *c, int fam) {
    c->f = fmts[er_rand64() % 6];
    c->ndim = (int)er_rand_int(1, 3);
    int64_t n = 1;
    for (int i = 0; i < c->ndim; i++) { c->shape[i] = er_rand_int(1, i == 0 ? 40 : 6); n *= c->shape[i]; }
    c->dim = (int)er_rand_int(0, c->ndim - 1);
    c->v = malloc(sizeof(double) * (size_t)n);
    double *ones = malloc(sizeof(double) * (size_t)n);
    gen_vectors(fam, c->f, c->f, ER_FP32, (int)n, c->v, ones);
    if (fam == FAM_NORMAL && er_rand64() % 8 == 0) c->v[er_rand64() % (uint64_t)n] = (er_rand64() & 1) ? NAN : -INFINITY;
    free(ones);
    c->buf = malloc(8 * (size_t)n);
    for (int64_t i = 0; i < n; i++) { er_store(c->buf, c->f, i, c->v[i]); c->v[i] = er_load(c->buf, c->f, i); }
    ck_assert_int_eq(er_tensor_view(&c->t, c->f, c->ndim, c->shape, NULL, c->buf), ER_OK);
}

/* The values along the reduced dimension for output element idx (row-major over the other dims). */
static int64_t gather(const tcase *c, int64_t idx, double *out) {
    int64_t coord[3] = {0, 0, 0}, rem = idx;
    for (int i = c->ndim - 1; i >= 0; i--) { if (i == c->dim) continue; coord[i] = rem % c->shape[i]; rem /= c->shape[i]; }
    int64_t K = c->shape[c->dim];
    for (int64_t k = 0; k < K; k++) {
        coord[c->dim] = k;
        int64_t off = 0, st = 1;
        for (int i = c->ndim - 1; i >= 0; i--) { off += coord[i] * st; st *= c->shape[i]; }
        out[k] = c->v[off];
    }
    return K;
}

START_TEST(exact_sum_mean_max) {
    er_test_reseed(400);
    long cases = (long)(300 * er_test_multiplier());
    mpfr_t s, q;
    mpfr_init2(s, 4500);
    mpfr_init2(q, 4600);
    for (long cc = 0; cc < cases; cc++) {
        tcase c;
        make_case(&c, (int)(er_rand64() % FAM_COUNT));
        er_ref *rs, *rm, *rx;
        ck_assert_int_eq(er_sum(&rs, &c.t, c.dim - (er_rand64() & 1 ? c.ndim : 0)), ER_OK); /* negative dims too */
        ck_assert_int_eq(er_mean(&rm, &c.t, c.dim), ER_OK);
        ck_assert_int_eq(er_max(&rx, &c.t, c.dim), ER_OK);
        int nd;
        int64_t shape[ER_MAX_DIMS], n = 1;
        er_ref_shape(rs, &nd, shape);
        for (int i = 0; i < nd; i++) n *= shape[i];
        ER_REQUIRE(nd == (c.ndim > 1 ? c.ndim - 1 : 1), "reduced shape");
        double *vec = malloc(sizeof(double) * 64);
        float *out = malloc(sizeof(float) * (size_t)n * 3);
        for (int64_t idx = 0; idx < n; idx++) {
            int64_t K = gather(&c, idx, vec), index[ER_MAX_DIMS], rem = idx;
            for (int i = nd - 1; i >= 0; i--) { index[i] = rem % shape[i]; rem /= shape[i]; }
            int nan = 0, pinf = 0, ninf = 0;
            double mx = vec[0];
            mpfr_set_zero(s, 1);
            for (int64_t k = 0; k < K; k++) {
                if (isnan(vec[k])) nan = 1; else if (vec[k] == INFINITY) pinf = 1; else if (vec[k] == -INFINITY) ninf = 1;
                else mpfr_add_d(s, s, vec[k], MPFR_RNDN);
                if (!isnan(vec[k]) && (isnan(mx) || vec[k] > mx)) mx = vec[k];
            }
            double want_sum, want_mean, got;
            if (nan || (pinf && ninf)) want_sum = want_mean = NAN;
            else if (pinf || ninf) want_sum = want_mean = pinf ? INFINITY : -INFINITY;
            else {
                want_sum = er_oracle_round(ER_FP32, s, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
                mpfr_div_ui(q, s, (unsigned long)K, MPFR_RNDN);
                want_mean = er_oracle_round(ER_FP32, q, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
            }
            double want_max = nan ? NAN : er_oracle_round_d(ER_FP32, mx);
            er_ref_exact(rs, index, ER_FP32, NULL, &got);
            ER_REQUIRE(er_same(got, want_sum) || (got == 0 && want_sum == 0), "sum %a vs %a (case %ld) " ER_SEED_MSG_FMT, got, want_sum, cc, ER_SEED_ARGS);
            er_ref_exact(rm, index, ER_FP32, NULL, &got);
            ER_REQUIRE(er_same(got, want_mean) || (got == 0 && want_mean == 0), "mean %a vs %a (case %ld) " ER_SEED_MSG_FMT, got, want_mean, cc, ER_SEED_ARGS);
            er_ref_exact(rx, index, ER_FP32, NULL, &got);
            ER_REQUIRE(er_same(got, er_oracle_round_d(ER_FP32, nan ? NAN : mx)) || (isnan(got) && nan), "max %a vs %a (case %ld) " ER_SEED_MSG_FMT, got, mx, cc, ER_SEED_ARGS);
            out[idx] = (float)want_sum;
            out[n + idx] = (float)want_mean;
            out[2 * n + idx] = (float)want_max;
        }
        er_tensor to;
        er_standard std;
        er_standard_init(&std);
        er_report rep;
        er_ref *refs[3] = {rs, rm, rx};
        for (int w = 0; w < 3; w++) {
            er_tensor_view(&to, ER_FP32, nd, shape, NULL, out + w * n);
            std.compute = c.f == ER_FP64 && w < 2 ? ER_FP64 : ER_FP32; /* fp32 does not hold fp64 inputs */
            ER_REQUIRE(er_covers(&rep, refs[w], &to, &std) == ER_OK, "covers: %s", er_last_error());
            if (rep.counts[ER_CLASS_EXACT] != n) {
                char text[2048];
                er_report_text(&rep, text, sizeof text, NULL);
                ck_abort_msg("case %ld: the correctly rounded %s is not EXACT everywhere:\n%s" ER_SEED_MSG_FMT, cc,
                             rep.op, text, ER_SEED_ARGS);
            }
            er_report_clear(&rep);
        }
        er_ref_free(rs); er_ref_free(rm); er_ref_free(rx);
        free(vec); free(out); free(c.v); free(c.buf);
    }
    mpfr_clear(s);
    mpfr_clear(q);
}
END_TEST

START_TEST(reductions_are_sound_and_emulated) {
    er_test_reseed(401);
    long trials = (long)(10000 * er_test_multiplier()), fixed = 0;
    for (long tr = 0; tr < trials; tr++) {
        trial t;
        draw(&t, 0);
        int mean = (int)(er_rand64() & 1);
        if (mean) t.std.mean = (int)er_rand_int(0, 2);
        er_format fx = fmts[er_rand64() % 6], fo = er_rand64() % 2 ? t.acc : ER_FP32;
        if (t.std.compute != ER_TF32 && !er_gen_held(fx, t.acc)) /* the accumulator holds its inputs */
            fx = er_gen_held(ER_FP16, t.acc) ? ER_FP16 : ER_FP8_E4M3FN;
        int fam = (int)(er_rand64() % FAM_COUNT), K = (int)er_rand_int(1, 300);
        draw_tree(&t, K);
        double *x = malloc(sizeof(double) * (size_t)K), *one = malloc(sizeof(double) * (size_t)K);
        gen_vectors(fam, fx, fx, t.acc, K, x, one);
        for (int k = 0; k < K; k++) one[k] = 1.0;
        uint64_t X[300], C[1], E[1];
        for (int k = 0; k < K; k++) er_store(X, fx, k, x[k]);
        emu e, ep;
        emu_init(&e, t.acc);
        emu_init(&ep, t.std.partial != ER_FORMAT_INVALID ? t.std.partial : t.acc);
        e.faithful = ep.faithful = t.std.rounding == ER_RND_FAITHFUL;
        double r = implement(&t, &e, &ep, x, one, K);
        if (mean) { /* fl(s / K) or fl(s * fl(1/K)) in the accumulator */
            int by_div = t.std.mean == 1 || (t.std.mean == 0 && (er_rand64() & 1));
            mpfr_set_d(e.t, r, MPFR_RNDN);
            if (by_div) { mpfr_div_ui(e.u, e.t, (unsigned long)K, MPFR_RNDN); mpfr_set_prec(e.t, 4400); }
            else {
                mpfr_set_ui(e.u, 1, MPFR_RNDN);
                mpfr_div_ui(e.u, e.u, (unsigned long)K, MPFR_RNDN);
                double rk = emu_round(&e, e.u);
                mpfr_mul_d(e.u, e.t, rk, MPFR_RNDN);
            }
            r = isfinite(r) ? emu_round(&e, e.u) : r / K;
        }
        mpfr_set_d(e.t, r, MPFR_RNDN);
        double y = isnan(r) ? NAN : er_oracle_round(fo, e.t, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
        emu_clear(&e);
        emu_clear(&ep);
        er_store(C, fo, 0, y);
        er_tensor tx, tc, te;
        er_tensor_view(&tx, fx, 1, (int64_t[]){K}, NULL, X);
        er_tensor_view(&tc, fo, 1, (int64_t[]){1}, NULL, C);
        er_tensor_view(&te, fo, 1, (int64_t[]){1}, NULL, E);
        er_ref *ref;
        ER_REQUIRE((mean ? er_mean(&ref, &tx, 0) : er_sum(&ref, &tx, 0)) == ER_OK, "reduce: %s", er_last_error());
        er_report rep;
        ER_REQUIRE(er_covers(&rep, ref, &tc, &t.std) == ER_OK, "covers: %s", er_last_error());
        ER_REQUIRE_PASS(&rep, "trial %ld: a correct %s was called wrong (x %s, out %s, K %d, family %s):" ER_SEED_MSG_FMT,
                         tr, mean ? "mean" : "sum", er_format_name(fx), er_format_name(fo), K, fam_names[fam], ER_SEED_ARGS);
        er_report_clear(&rep);
        if (er_emulate(ref, &te, &t.std) == ER_OK) {
            double got = er_load(E, fo, 0);
            ER_REQUIRE(er_same(got, y) || (isnan(got) && isnan(y)), "trial %ld: emulate %a, implementation %a " ER_SEED_MSG_FMT,
                       tr, got, y, ER_SEED_ARGS);
            fixed++;
        }
        er_ref_free(ref);
        free(x); free(one);
    }
    printf("reductions: %ld trials covered; %ld fully fixed, emulated bit for bit\n", trials, fixed);
    ck_assert_int_gt(fixed, trials / 10);
}
END_TEST

START_TEST(empty_and_refused) {
    float x[6] = {1, 2, 3, 4, 5, 6}, out[3];
    er_tensor t, o;
    er_ref *r;
    ck_assert_int_eq(er_tensor_view(&t, ER_FP32, 2, (int64_t[]){3, 0}, NULL, x), ER_OK);
    ck_assert_int_eq(er_tensor_view(&o, ER_FP32, 1, (int64_t[]){3}, NULL, out), ER_OK);
    er_standard std;
    er_standard_init(&std);
    er_report rep;
    /* empty sum: 0; empty mean: NaN (0/0); empty max: refused */
    out[0] = out[1] = out[2] = 0;
    ck_assert_int_eq(er_sum(&r, &t, 1), ER_OK);
    ck_assert_int_eq(er_covers(&rep, r, &o, &std), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_EXACT], 3);
    er_report_clear(&rep);
    er_ref_free(r);
    out[0] = out[1] = out[2] = NAN;
    ck_assert_int_eq(er_mean(&r, &t, 1), ER_OK);
    ck_assert_int_eq(er_covers(&rep, r, &o, &std), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_EXACT], 3);
    er_report_clear(&rep);
    er_ref_free(r);
    ck_assert_int_eq(er_max(&r, &t, 1), ER_ERR_SHAPE);
    /* an empty view whose strides are huge (no element is addressed, so the view is valid): the sum over its empty
     * dimension is 0 everywhere, found without computing an offset (the fuzzer found a signed overflow there) */
    {
        static float z[80];
        er_tensor e, oz;
        ck_assert_int_eq(er_tensor_view(&e, ER_FP32, 4, (int64_t[]){4, 5, 0, 4}, (int64_t[]){7, 0, 0, INT64_MAX / 3}, x), ER_OK);
        ck_assert_int_eq(er_tensor_view(&oz, ER_FP32, 3, (int64_t[]){4, 5, 4}, NULL, z), ER_OK);
        ck_assert_int_eq(er_sum(&r, &e, -2), ER_OK);
        ck_assert_int_eq(er_covers(&rep, r, &oz, &std), ER_OK);
        ck_assert_int_eq(rep.counts[ER_CLASS_EXACT], 80);
        er_report_clear(&rep);
        er_ref_free(r);
        /* the same for the bytes a view spans, summed over its dimensions before its empty one is seen (fuzz_ops:
         * a softmax input {4, 3, 3, 0}, its first stride INT64_MAX / 3, checked against an output written) */
        er_tensor e2, oe;
        ck_assert_int_eq(er_tensor_view(&e2, ER_FP8_E4M3FN, 4, (int64_t[]){4, 3, 3, 0}, (int64_t[]){INT64_MAX / 3, 0, 5, 3}, x),
                         ER_OK);
        ck_assert_int_eq(er_tensor_view(&oe, ER_FP32, 4, (int64_t[]){4, 3, 3, 0}, NULL, z), ER_OK);
        ck_assert_int_eq(er_softmax(&r, &e2, -1), ER_OK);
        ck_assert_int_eq(er_ref_rounded(&oe, r), ER_ERR_UNSUPPORTED);
        ck_assert_int_eq(er_covers(&rep, r, &oe, &std), ER_OK);
        ck_assert_int_eq(er_report_numel(&rep), 0);
        er_report_clear(&rep);
        er_ref_free(r);
        /* and for an element's operand offsets: a matmul over K = 0 whose B has a batch stride near INT64_MAX / 3
         * (fuzz_ops: its exact value asked for through a quantised reference) is 0, no offset computed */
        er_tensor a0, b0, q0;
        static uint8_t qz[48];
        ck_assert_int_eq(er_tensor_view(&a0, ER_FP32, 3, (int64_t[]){4, 3, 0}, NULL, x), ER_OK);
        ck_assert_int_eq(er_tensor_view(&b0, ER_FP32, 3, (int64_t[]){4, 0, 4}, (int64_t[]){INT64_MAX / 3, 1, 2}, x), ER_OK);
        ck_assert_int_eq(er_tensor_view(&q0, ER_FP8_E4M3FN, 3, (int64_t[]){4, 3, 4}, NULL, qz), ER_OK);
        er_ref *mm0, *qr;
        ck_assert_int_eq(er_matmul(&mm0, &a0, &b0), ER_OK);
        ck_assert_int_eq(er_quantize_ref(&qr, mm0, ER_FP8_E4M3FN, ER_GRAN_ROW, 0, ER_RECIPE_AMAX), ER_OK);
        mpfr_t e0;
        mpfr_init2(e0, 16);
        ck_assert_int_eq(er_ref_exact_mpfr(e0, mm0, (int64_t[]){3, 2, 3}), ER_OK);
        ck_assert(mpfr_zero_p(e0));
        mpfr_clear(e0);
        ck_assert_int_eq(er_covers(&rep, qr, &q0, &std), ER_OK);
        ER_REQUIRE_PASS(&rep, "q of an empty sum");
        er_report_clear(&rep);
        er_ref_free(qr);
        er_ref_free(mm0);
    }
    ck_assert_int_eq(er_sum(&r, &t, 2), ER_ERR_INVALID);
    ck_assert_int_eq(er_sum(&r, &t, -3), ER_ERR_INVALID);
    ck_assert_int_eq(er_sum(NULL, &t, 0), ER_ERR_NULL);
    /* a reduction is not a matmul: tf32 inputs and mean= on a sum are refused */
    ck_assert_int_eq(er_tensor_view(&t, ER_FP32, 2, (int64_t[]){3, 2}, NULL, x), ER_OK);
    ck_assert_int_eq(er_sum(&r, &t, 1), ER_OK);
    er_standard_parse(&std, "any_order", "compute=tf32");
    ck_assert_int_eq(er_covers(&rep, r, &o, &std), ER_ERR_STANDARD);
    er_standard_parse(&std, "any_order", "mean=divide");
    ck_assert_int_eq(er_covers(&rep, r, &o, &std), ER_ERR_STANDARD);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "mean= applies to mean,"));
    /* output shape */
    er_tensor o2;
    er_tensor_view(&o2, ER_FP32, 1, (int64_t[]){2}, NULL, out);
    er_standard_init(&std);
    ck_assert_int_eq(er_covers(&rep, r, &o2, &std), ER_ERR_OUTPUT);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "but the sum produces [3]"));
    /* a sum of fp16 values into fp32 is exact for small K: 1+2 is the only value */
    out[0] = 3; out[1] = 7; out[2] = 11;
    ck_assert_int_eq(er_covers(&rep, r, &o, &std), ER_OK);
    ck_assert_int_eq(rep.counts[ER_CLASS_EXACT], 3);
    ck_assert_str_eq(rep.op, "sum");
    er_report_clear(&rep);
    er_ref_free(r);
    /* max: NaN propagates; emulate writes it */
    x[3] = NAN;
    ck_assert_int_eq(er_max(&r, &t, 1), ER_OK);
    out[0] = 2; out[1] = 0; out[2] = 6;
    ck_assert_int_eq(er_emulate(r, &o, &std), ER_OK);
    ck_assert(out[0] == 2 && isnan(out[1]) && out[2] == 6);
    /* max adds nothing: an accumulator or an fma rule is refused, not ignored, and the output is untouched */
    static const char *const arith[] = {"compute=fp16", "compute=fp64", "fma=never", "fma=always"};
    for (int i = 0; i < 4; i++) {
        er_standard_parse(&std, "any_order", arith[i]);
        ck_assert_int_eq(er_covers(&rep, r, &o, &std), ER_ERR_STANDARD);
        ck_assert_ptr_nonnull(strstr(er_last_error(), "compute= and fma= do not apply to it"));
        ck_assert_int_eq(er_emulate(r, &o, &std), ER_ERR_STANDARD);
        ck_assert(out[0] == 2 && isnan(out[1]) && out[2] == 6);
    }
    er_ref_free(r);
}
END_TEST

/* The class of a failing element names what is allowed there (classes.md): a number where only NaN is allowed is
 * nan_missing, also when NaN comes from the output conversion (e4m3fn under overflow=nan) rather than from every
 * order; a number where an infinity (or NaN) is the only thing allowed is inf_missing. */
static er_class one_class(er_ref *ref, er_format fo, double y, const char *options) {
    uint64_t Y[1];
    er_store(Y, fo, 0, y);
    er_tensor ty;
    int nd;
    int64_t shape[ER_MAX_DIMS];
    ER_REQUIRE(er_ref_shape(ref, &nd, shape) == ER_OK, "%s", er_last_error());
    er_tensor_view(&ty, fo, nd, shape, NULL, Y);
    er_standard std;
    ER_REQUIRE(er_standard_parse(&std, "any_order", options) == ER_OK, "%s", er_last_error());
    er_report rep;
    ER_REQUIRE(er_covers(&rep, ref, &ty, &std) == ER_OK, "%s", er_last_error());
    er_class c = (er_class)rep.classes[0];
    er_report_clear(&rep);
    return c;
}

START_TEST(special_value_labels) {
    /* sum([1000]) into e4m3fn with overflow=nan: NaN is the only value; 448 is nan_missing */
    float x[3] = {1000.0f};
    er_tensor tx;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, 1}, NULL, x);
    er_ref *ref;
    ck_assert_int_eq(er_sum(&ref, &tx, 1), ER_OK);
    ck_assert_str_eq(er_class_name(one_class(ref, ER_FP8_E4M3FN, 448.0, "overflow=nan")), "nan_missing");
    ck_assert_str_eq(er_class_name(one_class(ref, ER_FP8_E4M3FN, NAN, "overflow=nan")), "exact");
    er_ref_free(ref);
    /* [inf, 1] . [1, 1] into e4m3fn: inf converts to NaN, the only value */
    float a[2] = {INFINITY, 1.0f}, b[2] = {1.0f, 1.0f};
    er_tensor tA, tB;
    er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){1, 2}, NULL, a);
    er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){2, 1}, NULL, b);
    ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
    ck_assert_str_eq(er_class_name(one_class(ref, ER_FP8_E4M3FN, 448.0, "overflow=nan")), "nan_missing");
    er_ref_free(ref);
    /* sum([inf, -3e38, -3e38]): +inf in some orders, NaN in others (the negative partial overflowing first); a
     * number is inf_missing */
    float z[3] = {INFINITY, -3e38f, -3e38f};
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, 3}, NULL, z);
    ck_assert_int_eq(er_sum(&ref, &tx, 1), ER_OK);
    ck_assert_str_eq(er_class_name(one_class(ref, ER_FP32, 1.0, "")), "inf_missing");
    ck_assert_str_eq(er_class_name(one_class(ref, ER_FP32, NAN, "")), "overflow");
    er_ref_free(ref);
    /* [3e38 x 4, -3e38 x 2]: the exact sum is 6e38 (> max), yet an order overflowing negatively first gives -inf
     * or NaN; +inf, -inf and NaN all pass, a number does not */
    float w[6] = {3e38f, 3e38f, 3e38f, 3e38f, -3e38f, -3e38f};
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){1, 6}, NULL, w);
    ck_assert_int_eq(er_sum(&ref, &tx, 1), ER_OK);
    ck_assert_int_eq(er_class_passes(one_class(ref, ER_FP32, -INFINITY, "")), 1);
    ck_assert_int_eq(er_class_passes(one_class(ref, ER_FP32, NAN, "")), 1);
    ck_assert_str_eq(er_class_name(one_class(ref, ER_FP32, INFINITY, "")), "exact");
    ck_assert_str_eq(er_class_name(one_class(ref, ER_FP32, 3e38, "")), "inf_missing");
    er_ref_free(ref);
}
END_TEST

int main(void) {
    Suite *s = suite_create("reduce");
    TCase *tc = tcase_create("reduce");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, exact_sum_mean_max);
    tcase_add_test(tc, reductions_are_sound_and_emulated);
    tcase_add_test(tc, empty_and_refused);
    tcase_add_test(tc, special_value_labels);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
