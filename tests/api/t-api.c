#define _POSIX_C_SOURCE 200809L /* setenv */
/* t-api.c: bad input is refused with the right status and a message, and a refused call's report records the
 * refusal and fails; statuses have names and messages; standards parse, validate and render; version and
 * thread-safety queries. */
#include "../common/er_test.h"
#include "../common/er_refuse.h"

static float Abuf[12], Bbuf[12], Cbuf[12];

/* Calls er_matmul_covers and checks it is refused with `want`, a message that contains `needle`, and no write. */
static void refused(er_status want, const char *needle, const er_tensor *A, const er_tensor *B, const er_tensor *C,
                    const char *std, const char *opts) {
    er_report r = sentinel_report();
    er_status st = er_matmul_covers(&r, A, B, C, std, opts);
    ck_assert_msg(st == want, "got %s (%s), want %s", er_status_name(st), er_last_error(), er_status_name(want));
    ck_assert_msg(strstr(er_last_error(), needle) != NULL, "message '%s' does not mention '%s'", er_last_error(), needle);
    ck_assert_msg(refused_report(&r, want), "a refused call (%s) did not record its refusal in the report", needle);
}

START_TEST(bad_matmul_inputs) {
    er_tensor A, B, C, X;
    ck_assert_int_eq(er_tensor_view(&A, ER_FP32, 2, (int64_t[]){3, 4}, NULL, Abuf), ER_OK);
    ck_assert_int_eq(er_tensor_view(&B, ER_FP32, 2, (int64_t[]){4, 2}, NULL, Bbuf), ER_OK);
    ck_assert_int_eq(er_tensor_view(&C, ER_FP32, 2, (int64_t[]){3, 2}, NULL, Cbuf), ER_OK);
    er_report r;
    ck_assert_int_eq(er_matmul_covers(&r, &A, &B, &C, "any_order", NULL), ER_OK);
    er_report_clear(&r);
    refused(ER_ERR_NULL, "is NULL", NULL, NULL, NULL, NULL, NULL);
    { er_status st = er_matmul_covers(NULL, &A, &B, &C, "any_order", NULL); ck_assert_int_eq(st, ER_ERR_NULL); }
    refused(ER_ERR_NULL, "A", NULL, &B, &C, "any_order", NULL);
    refused(ER_ERR_NULL, "C", &A, &B, NULL, "any_order", NULL);
    /* shape mismatch */
    X = B; X.shape[0] = 5;
    refused(ER_ERR_SHAPE, "A's columns (4) must equal B's rows (5)", &A, &X, &C, "any_order", NULL);
    /* output of the wrong shape */
    X = C; X.shape[1] = 3;
    refused(ER_ERR_OUTPUT, "the output has shape [3, 3] but the matmul produces [3, 2]", &A, &B, &X, "any_order", NULL);
    X = C; X.ndim = 3; X.shape[2] = 1; X.strides[2] = 1;
    refused(ER_ERR_OUTPUT, "shape", &A, &B, &X, "any_order", NULL);
    /* unsupported format */
    X = A; X.format = (er_format)99;
    refused(ER_ERR_FORMAT, "invalid format", &X, &B, &C, "any_order", NULL);
    X = C; X.format = ER_FORMAT_INVALID;
    refused(ER_ERR_FORMAT, "out", &A, &B, &X, "any_order", NULL);
    /* negative size, negative stride, overflowing sizes and strides */
    X = A; X.shape[0] = -1;
    refused(ER_ERR_SIZE, "negative size", &X, &B, &C, "any_order", NULL);
    X = A; X.strides[1] = -1;
    refused(ER_ERR_SIZE, "negative stride", &X, &B, &C, "any_order", NULL);
    X = A; X.shape[0] = INT64_C(1) << 40; X.shape[1] = INT64_C(1) << 40;
    refused(ER_ERR_SIZE, "int64", &X, &B, &C, "any_order", NULL);
    X = A; X.strides[0] = INT64_MAX / 2;
    refused(ER_ERR_SIZE, "strides reach", &X, &B, &C, "any_order", NULL);
    /* strides reaching exactly INT64_MAX: one element more than an int64 counts (found by tests/fuzz/fuzz_ops,
     * corpus/ops/regress-stride-extent-overflow) */
    X = A; X.shape[0] = 2; X.shape[1] = 1; X.strides[0] = INT64_MAX; X.strides[1] = 1;
    refused(ER_ERR_SIZE, "bytes", &X, &B, &C, "any_order", NULL);
    X = A; X.ndim = 0;
    refused(ER_ERR_SIZE, "ndim", &X, &B, &C, "any_order", NULL);
    X = A; X.ndim = 1;
    refused(ER_ERR_SHAPE, "at least 2 dimensions", &X, &B, &C, "any_order", NULL);
    /* NULL data with elements */
    X = A; X.data = NULL;
    refused(ER_ERR_NULL, "data pointer is NULL", &X, &B, &C, "any_order", NULL);
    /* batch dims that do not broadcast */
    {
        er_tensor A3, B3;
        ck_assert_int_eq(er_tensor_view(&A3, ER_FP32, 3, (int64_t[]){2, 3, 2}, NULL, Abuf), ER_OK);
        ck_assert_int_eq(er_tensor_view(&B3, ER_FP32, 3, (int64_t[]){3, 2, 1}, NULL, Bbuf), ER_OK);
        refused(ER_ERR_SHAPE, "does not broadcast", &A3, &B3, &C, "any_order", NULL);
    }
    /* unknown standard, unknown option, bad value, repeated key, overflow=ieee on e4m3fn output */
    refused(ER_ERR_STANDARD, "unknown order 'tree'", &A, &B, &C, "tree", NULL);
    refused(ER_ERR_STANDARD, "'blocked:0': expected a positive integer", &A, &B, &C, "blocked:0", NULL);
    refused(ER_ERR_STANDARD, "'split:x'", &A, &B, &C, "split:x", NULL);
    refused(ER_ERR_STANDARD, "'blocked:4x'", &A, &B, &C, "blocked:4x", NULL);
    refused(ER_ERR_STANDARD, "inner= and outer= apply to blocked, split and (outer=) mma", &A, &B, &C, "sequential",
            "inner=any");
    refused(ER_ERR_STANDARD, "partial= applies to split only", &A, &B, &C, "blocked:8", "partial=fp16");
    refused(ER_ERR_STANDARD, "partial=fp8_e4m3fn", &A, &B, &C, "split:2", "partial=e4m3fn");
    refused(ER_ERR_STANDARD, "fma=always does not apply", &A, &B, &C, "pairwise", "fma=always");
    refused(ER_ERR_STANDARD, "tf32= applies to compute=tf32 only", &A, &B, &C, "sequential", "tf32=rna");
    refused(ER_ERR_STANDARD, "inner=sometimes", &A, &B, &C, "split:2", "inner=sometimes");
    refused(ER_ERR_STANDARD, "unknown option 'acc'", &A, &B, &C, "any_order", "acc=fp32");
    refused(ER_ERR_STANDARD, "unknown option 'varaince'; did you mean 'variance'?", &A, &B, &C, "any_order", "varaince=welford");
    refused(ER_ERR_STANDARD, "did you mean 'warps'?", &A, &B, &C, "triton:8", "warp=4");
    refused(ER_ERR_STANDARD, "compute=fp12", &A, &B, &C, "any_order", "compute=fp12");
    refused(ER_ERR_STANDARD, "compute=fp8_e4m3fn is not an accumulator format", &A, &B, &C, "any_order", "compute=e4m3fn");
    refused(ER_ERR_STANDARD, "given twice", &A, &B, &C, "any_order", "compute=fp32, compute=fp16");
    refused(ER_ERR_STANDARD, "key=value", &A, &B, &C, "any_order", "fp32");
    refused(ER_ERR_STANDARD, "rounding=truncate", &A, &B, &C, "any_order", "rounding=truncate");
    {
        uint8_t c8[6] = {0};
        er_tensor C8;
        ck_assert_int_eq(er_tensor_view(&C8, ER_FP8_E4M3FN, 2, (int64_t[]){3, 2}, NULL, c8), ER_OK);
        refused(ER_ERR_STANDARD, "no infinity", &A, &B, &C8, "any_order", "overflow=ieee");
    }
}
END_TEST

START_TEST(views_and_refs) {
    er_tensor t;
    memset(&t, 0x5A, sizeof t);
    er_tensor keep = t;
    ck_assert_int_eq(er_tensor_view(&t, ER_FP32, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, NULL, Abuf), ER_ERR_SIZE);
    ck_assert_int_eq(er_tensor_view(&t, ER_FP32, 2, NULL, NULL, Abuf), ER_ERR_NULL);
    ck_assert_int_eq(er_tensor_view(&t, ER_FP32, 2, (int64_t[]){2, -3}, NULL, Abuf), ER_ERR_SIZE);
    ck_assert_int_eq(er_tensor_view(&t, ER_FP32, 2, (int64_t[]){INT64_MAX, 3}, NULL, Abuf), ER_ERR_SIZE);
    ck_assert(memcmp(&t, &keep, sizeof t) == 0);
    ck_assert_int_eq(er_tensor_view(&t, ER_FP32, 2, (int64_t[]){3, 4}, (int64_t[]){1, 3}, Abuf), ER_OK);
    ck_assert_int_eq(er_tensor_numel(&t), 12);
    Abuf[3 * 2 + 1] = 42; /* element (1, 2) of the column-major view */
    double v;
    ck_assert_int_eq(er_tensor_get(&v, &t, (int64_t[]){1, 2}), ER_OK);
    ck_assert(v == 42);
    ck_assert_int_eq(er_tensor_get(&v, &t, (int64_t[]){3, 0}), ER_ERR_INVALID);
    ck_assert_uint_eq(er_tensor_sizeof(), sizeof(er_tensor));
    er_ref *ref = (er_ref *)&keep;
    er_tensor B;
    er_tensor_view(&B, ER_FP32, 2, (int64_t[]){5, 2}, NULL, Bbuf);
    ck_assert_int_eq(er_matmul(&ref, &t, &B), ER_ERR_SHAPE);
    ck_assert_ptr_eq(ref, (er_ref *)&keep); /* untouched */
    ck_assert_int_eq(er_matmul(NULL, &t, &B), ER_ERR_NULL);
    er_tensor_view(&B, ER_FP16, 2, (int64_t[]){4, 2}, NULL, Bbuf);
    ck_assert_int_eq(er_matmul(&ref, &t, &B), ER_OK);
    int nd;
    int64_t shape[ER_MAX_DIMS];
    ck_assert_int_eq(er_ref_shape(ref, &nd, shape), ER_OK);
    ck_assert_int_eq(nd, 2);
    ck_assert_int_eq(shape[0], 3);
    ck_assert_int_eq(shape[1], 2);
    double e = 9, rd = 9;
    ck_assert_int_eq(er_ref_exact(ref, (int64_t[]){3, 0}, ER_FP32, &e, &rd), ER_ERR_INVALID);
    ck_assert(e == 9 && rd == 9);
    ck_assert_int_eq(er_ref_exact(ref, (int64_t[]){0, 0}, (er_format)77, &e, &rd), ER_ERR_FORMAT);
    er_standard st;
    er_standard_init(&st);
    er_report r = sentinel_report();
    ck_assert_int_eq(er_covers(&r, ref, NULL, &st), ER_ERR_NULL);
    st.compute = ER_FP8_E5M2;
    er_tensor C;
    er_tensor_view(&C, ER_FP32, 2, (int64_t[]){3, 2}, NULL, Cbuf);
    ck_assert_int_eq(er_covers(&r, ref, &C, &st), ER_ERR_STANDARD);
    ck_assert(refused_report(&r, ER_ERR_STANDARD));
    /* Triton's lowering is a row-op standard; flush to zero is modelled for softmax and log_softmax */
    er_standard_parse(&st, "any_order", "math=triton");
    ck_assert_int_eq(er_covers(&r, ref, &C, &st), ER_ERR_STANDARD);
    er_standard_parse(&st, "any_order", "subnormals=flush");
    ck_assert_int_eq(er_covers(&r, ref, &C, &st), ER_ERR_UNSUPPORTED);
    ck_assert(refused_report(&r, ER_ERR_UNSUPPORTED));
    /* emulate: only fully fixed standards, only views with distinct elements; nothing written on refusal */
    for (int i = 0; i < 6; i++) Cbuf[i] = -7;
    er_standard_parse(&st, "sequential", NULL); /* fma=either with fp32 x fp16 products: not exact in fp32 */
    ck_assert_int_eq(er_emulate(ref, &C, &st), ER_ERR_STANDARD);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "fma=either"));
    er_standard_parse(&st, "blocked:2", "inner=any fma=never");
    ck_assert_int_eq(er_emulate(ref, &C, &st), ER_ERR_STANDARD);
    er_standard_parse(&st, "any_order", NULL);
    ck_assert_int_eq(er_emulate(ref, &C, &st), ER_ERR_STANDARD);
    er_standard_parse(&st, "sequential", "fma=never");
    er_tensor Cb = C;
    Cb.strides[0] = 0;
    ck_assert_int_eq(er_emulate(ref, &Cb, &st), ER_ERR_OUTPUT);
    for (int i = 0; i < 6; i++) ck_assert(Cbuf[i] == -7);
    ck_assert_int_eq(er_emulate(ref, &C, &st), ER_OK);
    ck_assert(Cbuf[0] != -7);
    er_ref_free(ref);
    er_ref_free(NULL);
}
END_TEST

START_TEST(standards) {
    er_standard s, keep;
    memset(&s, 0x11, sizeof s);
    keep = s;
    ck_assert_int_eq(er_standard_parse(&s, "any_order", "compute=bogus"), ER_ERR_STANDARD);
    ck_assert(memcmp(&s, &keep, sizeof s) == 0);
    ck_assert_int_eq(er_standard_parse(&s, "any_order", NULL), ER_OK);
    ck_assert_int_eq(s.compute, ER_FP32);
    ck_assert_int_eq(s.fma, ER_FMA_EITHER);
    ck_assert_int_eq(er_standard_parse(&s, "any", " compute=bfloat16  fma=never,overflow=saturate "), ER_OK);
    ck_assert_int_eq(s.compute, ER_BF16);
    ck_assert_int_eq(s.fma, ER_FMA_NEVER);
    ck_assert_int_eq(s.out_overflow, ER_OVERFLOW_SATURATE);
    char buf[128];
    size_t need;
    ck_assert_int_eq(er_standard_format(&s, buf, sizeof buf, &need), ER_OK);
    ck_assert_str_eq(buf, "any_order compute=bf16 fma=never overflow=saturate");
    ck_assert_uint_eq(need, strlen(buf));
    ck_assert_int_eq(er_standard_format(&s, buf, 5, &need), ER_ERR_BUFFER);
    ck_assert_str_eq(buf, "any_");
    ck_assert_int_eq(er_standard_parse(&s, NULL, NULL), ER_ERR_NULL);
    s.order = (er_order)9;
    ck_assert_int_eq(er_standard_validate(&s), ER_ERR_STANDARD);
    ck_assert_int_eq(er_standard_parse(&s, "split:4", "inner=any,outer=any,partial=fp16,compute=tf32,tf32=rna,rounding=faithful"), ER_OK);
    ck_assert_int_eq(er_standard_format(&s, buf, sizeof buf, NULL), ER_OK);
    ck_assert_str_eq(buf, "split:4 compute=tf32 tf32=rna fma=either inner=any outer=any partial=fp16 rounding=faithful");
    ck_assert_int_eq(s.split, 4);
    /* a standard as the docs write it: options after the order, in one string, with more options or none */
    ck_assert_int_eq(er_standard_parse(&s, "mma:sm90 outer=any", NULL), ER_OK);
    ck_assert_int_eq(er_standard_format(&s, buf, sizeof buf, NULL), ER_OK);
    ck_assert_str_eq(buf, "mma:sm90 compute=fp32 fma=either outer=any");
    ck_assert_int_eq(er_standard_parse(&s, "mma:sm90,outer=any", "compute=tf32 tf32=rne"), ER_OK);
    ck_assert_int_eq(er_standard_format(&s, buf, sizeof buf, NULL), ER_OK);
    ck_assert_str_eq(buf, "mma:sm90 compute=tf32 tf32=rne fma=either outer=any");
    ck_assert_int_eq(er_standard_parse(&s, "mma:sm90 outer=any", "outer=sequential"), ER_ERR_STANDARD); /* given twice */
    ck_assert_int_eq(er_standard_parse(&s, "mma:sm_90", NULL), ER_ERR_STANDARD);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "sm70"));
    ck_assert_int_eq(er_standard_parse(&s, "forest:4", NULL), ER_ERR_STANDARD);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "mma:smNN"));
    /* toolchain options: Triton's lowering, flush to zero, tf32x3 (rendered as written) */
    ck_assert_int_eq(er_standard_parse(&s, "any_order", "math=triton subnormals=flush"), ER_OK);
    ck_assert_int_eq(er_standard_format(&s, buf, sizeof buf, NULL), ER_OK);
    ck_assert_str_eq(buf, "any_order compute=fp32 fma=either math=triton subnormals=flush");
    ck_assert_int_eq(er_standard_parse(&s, "mma:sm90 outer=any compute=tf32x3", NULL), ER_OK);
    ck_assert_int_eq(er_standard_format(&s, buf, sizeof buf, NULL), ER_OK);
    ck_assert_str_eq(buf, "mma:sm90 compute=tf32x3 fma=either outer=any");
    ck_assert_int_eq(er_standard_parse(&s, "any_order", "compute=tf32x3 tf32=rne"), ER_ERR_STANDARD);
    ck_assert_int_eq(er_standard_parse(&s, "sequential", "compute=tf32x3"), ER_ERR_STANDARD);
    ck_assert_int_eq(er_standard_parse(&s, "any_order", "math=triton exp_ulps=fast"), ER_ERR_STANDARD);
    ck_assert_int_eq(er_standard_parse(&s, "any_order", "subnormals=sometimes"), ER_ERR_STANDARD);
    ck_assert_int_eq(er_standard_parse(&s, "blocked:32", "fma=never"), ER_OK);
    ck_assert(er_standard_is_fixed(&s, ER_FP32, ER_FP32));
    ck_assert_int_eq(er_standard_parse(&s, "blocked:32", NULL), ER_OK);
    ck_assert(er_standard_is_fixed(&s, ER_FP16, ER_FP16));  /* fp16 products are exact in fp32 */
    ck_assert(!er_standard_is_fixed(&s, ER_FP32, ER_FP16));
    ck_assert(!er_standard_is_fixed(&s, ER_BF16, ER_BF16)); /* bf16 products can round below fp32's range */
    ck_assert_uint_eq(er_standard_sizeof(), sizeof(er_standard));
}
END_TEST

/* The option table and each op's options, as the library states them for bindings and documentation. */
START_TEST(option_tables) {
    int n = er_standard_option_count();
    ck_assert_int_eq(n, 31);
    ck_assert_str_eq(er_standard_option_name(0), "compute");
    ck_assert_str_eq(er_standard_option_values(1), "either, never (no, false) or always (yes, true)");
    ck_assert_ptr_null(er_standard_option_name(n));
    ck_assert_ptr_null(er_standard_option_values(-1));
    er_standard s;
    for (int i = 0; i < n; i++) {
        /* every option the table names is the parser's: a bad value is refused as a value, never as an unknown key */
        char opt[64];
        snprintf(opt, sizeof opt, "%s=@", er_standard_option_name(i));
        ck_assert_int_eq(er_standard_parse(&s, "triton:64", opt), ER_ERR_STANDARD);
        ck_assert_ptr_null(strstr(er_last_error(), "unknown option"));
    }
    ck_assert_int_eq(er_op_count(), 19);
    ck_assert_str_eq(er_op_name(0), "matmul");
    ck_assert_ptr_null(er_op_name(er_op_count()));
    char buf[128];
    size_t need = 0;
    ck_assert_int_eq(er_op_options("mean", buf, sizeof buf, &need), ER_OK);
    ck_assert_str_eq(buf, "depth=, mean=");
    ck_assert_int_eq((int)need, 13);
    ck_assert_int_eq(er_op_options("max", buf, sizeof buf, NULL), ER_OK);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(er_op_options("mean", buf, 6, &need), ER_ERR_BUFFER);
    ck_assert_str_eq(buf, "depth");
    ck_assert_int_eq((int)need, 13);
    ck_assert_int_eq(er_op_options("conv2d", buf, sizeof buf, NULL), ER_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "unknown op 'conv2d'"));
    ck_assert_int_eq(er_op_options(NULL, buf, sizeof buf, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_op_options("mean", NULL, 4, NULL), ER_ERR_NULL);
    /* what each op's options say is what its check does: an option it takes passes the op-option rule */
    ck_assert_int_eq(er_op_options("softmax", buf, sizeof buf, NULL), ER_OK);
    ck_assert_ptr_nonnull(strstr(buf, "exp_ulps="));
    ck_assert_ptr_null(strstr(buf, "rsqrt_ulps="));
}
END_TEST

START_TEST(statuses_and_version) {
    static const er_status all[] = {ER_OK, ER_ERR_NULL, ER_ERR_INVALID, ER_ERR_FORMAT, ER_ERR_SHAPE, ER_ERR_SIZE,
                                    ER_ERR_STANDARD, ER_ERR_OUTPUT, ER_ERR_NOMEM, ER_ERR_UNSUPPORTED, ER_ERR_BUFFER,
                                    ER_ERR_INTERNAL};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        ck_assert(strncmp(er_status_name(all[i]), "ER_", 3) == 0);
        ck_assert(strlen(er_strerror(all[i])) > 5);
        ck_assert_str_ne(er_status_name(all[i]), "ER_UNKNOWN_STATUS");
    }
    ck_assert_str_eq(er_status_name((er_status)-99), "ER_UNKNOWN_STATUS");
    ck_assert_str_eq(er_version(), ER_VERSION_STRING);
    ck_assert_int_eq(er_mpfr_thread_safe(), 1); /* Debian's MPFR is built with TLS */
    /* a success clears the last message */
    double d;
    er_decode(&d, (er_format)50, 0);
    ck_assert(strlen(er_last_error()) > 0);
    er_decode(&d, ER_FP16, 0x3c00);
    ck_assert_str_eq(er_last_error(), "");
    ck_assert_str_eq(er_class_name(ER_CLASS_INF_MISSING), "inf_missing");
    ck_assert_str_eq(er_class_name((er_class)40), "unknown");
    ck_assert(er_class_passes(ER_CLASS_OVERFLOW) && !er_class_passes(ER_CLASS_OUTSIDE));
    ck_assert_uint_eq(er_report_sizeof(), sizeof(er_report));
    ck_assert_uint_eq(er_element_sizeof(), sizeof(er_element));
}
END_TEST

/* er_covers_sets: each element's set, consistent with its class (a finite output passes exactly when it lies in
 * [lo, hi]), the same sets on the fast path as off it, and layernorm's three outputs through er_covers_outputs_sets. */
START_TEST(covers_sets) {
    enum { M = 40, K = 300, N = 30 };
    static float a[M * K], b[K * N], c[M * N];
    static double lo[M * N], hi[M * N], lo2[M * N], hi2[M * N];
    er_test_reseed(77);
    for (int i = 0; i < M * K; i++) a[i] = (float)er_rand_normal();
    for (int i = 0; i < K * N; i++) b[i] = (float)er_rand_normal();
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)a[i * K + k] * b[k * N + j];
            c[i * N + j] = (float)(s * (1 + er_rand_int(-8, 8) * 0x1p-10)); /* some inside, some outside */
        }
    er_tensor tA, tB, tC;
    er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){M, K}, NULL, a);
    er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){K, N}, NULL, b);
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){M, N}, NULL, c);
    er_standard std;
    er_standard_init(&std);
    er_report rep;
    for (int fast = 0; fast < 2; fast++) {
        setenv("EXACTREF_FAST", fast ? "1" : "0", 1);
        er_ref *ref;
        ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
        ck_assert(!er_ref_fast(ref) || fast); /* fast only where OpenBLAS is there */
        ck_assert_int_eq(er_covers_sets(&rep, ref, &tC, &std, fast ? lo2 : lo, fast ? hi2 : hi, NULL), ER_OK);
        int inside = 0;
        for (int i = 0; i < M * N; i++) {
            double l = fast ? lo2[i] : lo[i], h = fast ? hi2[i] : hi[i];
            int in = c[i] >= l && c[i] <= h;
            ck_assert_msg(in == er_class_passes((er_class)rep.classes[i]), "element %d: %a in [%a, %a] but class %s", i, (double)c[i],
                          l, h, er_class_name((er_class)rep.classes[i]));
            inside += in;
        }
        ck_assert_msg(inside > 0 && inside < M * N, "fast %d: %d of %d inside", fast, inside, M * N);
        er_report_clear(&rep);
        ck_assert_int_eq(er_covers_sets(&rep, ref, &tC, &std, NULL, hi, NULL), ER_ERR_NULL);
        er_ref_free(ref);
    }
    unsetenv("EXACTREF_FAST");
    ck_assert(memcmp(lo, lo2, sizeof lo) == 0 && memcmp(hi, hi2, sizeof hi) == 0);
    /* layernorm: y, mean and rstd sets */
    float x[2 * 8], y[2 * 8], mean[2], rstd[2];
    for (int i = 0; i < 16; i++) x[i] = (float)(i % 5) - 1.5f;
    for (int r = 0; r < 2; r++) {
        double m = 0, v = 0;
        for (int j = 0; j < 8; j++) m += x[r * 8 + j];
        m /= 8;
        for (int j = 0; j < 8; j++) v += (x[r * 8 + j] - m) * (x[r * 8 + j] - m);
        v /= 8;
        mean[r] = (float)m;
        rstd[r] = (float)(1 / sqrt(v + 1e-5));
        for (int j = 0; j < 8; j++) y[r * 8 + j] = (float)((x[r * 8 + j] - m) * rstd[r]);
    }
    er_tensor tx, ty, tm, tr;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){2, 8}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){2, 8}, NULL, y);
    er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){2}, NULL, mean);
    er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){2}, NULL, rstd);
    er_ref *ln;
    ck_assert_int_eq(er_layernorm(&ln, &tx, 1, NULL, NULL, 1e-5), ER_OK);
    double ylo[16], yhi[16], rlo[2], rhi[2], ysl[16];
    double *los[3] = {ylo, NULL, rlo}, *his[3] = {yhi, NULL, rhi}, *sls[3] = {ysl, NULL, NULL};
    const er_tensor *outs[3] = {&ty, &tm, &tr};
    er_report reps[3];
    ck_assert_int_eq(er_covers_outputs_sets(reps, ln, outs, 3, &std, los, his, sls), ER_OK);
    for (int o = 0; o < 3; o++) { ck_assert(er_report_all(&reps[o])); er_report_clear(&reps[o]); }
    for (int i = 0; i < 16; i++) {
        ck_assert(y[i] >= ylo[i] && y[i] <= yhi[i] && ylo[i] < yhi[i] && ysl[i] >= 0);
        ck_assert(ysl[i] == fmin(y[i] - ylo[i], yhi[i] - y[i]) / er_format_ulp(ER_FP32, y[i]));
    }
    for (int r = 0; r < 2; r++) ck_assert(rstd[r] >= rlo[r] && rstd[r] <= rhi[r]);
    er_ref_free(ln);
}
END_TEST

/* The resolution r: from the largest relative width c among the sets away from 0, r = c / (1 - c), read from the
 * sets er_covers_sets gives; an output farther than r |v| from an end v of its set, in either direction, is outside
 * at every such element; NaN on the fast path (elements decided without their sets), for NULL, an unfilled and a
 * refused report; the text's line and the JSON's field. */
START_TEST(resolution) {
    enum { M = 24, K = 200, N = 20 };
    static float a[M * K], b[K * N], c[M * N], y[M * N];
    static double lo[M * N], hi[M * N];
    er_test_reseed(78);
    for (int i = 0; i < M * K; i++) a[i] = i < K ? 0 : (float)er_rand_normal(); /* row 0: sets {0}, not away */
    for (int i = 0; i < K * N; i++) b[i] = (float)er_rand_normal();
    for (int i = 0; i < M * N; i++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += (double)a[i / N * K + k] * b[k * N + i % N];
        c[i] = (float)s;
    }
    er_tensor tA, tB, tC, tY;
    er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){M, K}, NULL, a);
    er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){K, N}, NULL, b);
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){M, N}, NULL, c);
    er_tensor_view(&tY, ER_FP32, 2, (int64_t[]){M, N}, NULL, y);
    er_standard std;
    er_standard_init(&std);
    er_report rep;
    setenv("EXACTREF_FAST", "0", 1);
    er_ref *ref;
    ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
    unsetenv("EXACTREF_FAST");
    ck_assert_int_eq(er_covers_sets(&rep, ref, &tC, &std, lo, hi, NULL), ER_OK);
    double cmax = -1;
    int64_t away = 0;
    for (int i = 0; i < M * N; i++)
        if (lo[i] <= hi[i] && (lo[i] > 0 || hi[i] < 0)) {
            away++;
            cmax = fmax(cmax, (hi[i] - lo[i]) / fmax(fabs(lo[i]), fabs(hi[i])));
        }
    double r = er_report_resolution(&rep);
    ck_assert_msg(away > M * N / 2 && away < M * N && rep.n_away == away && !rep.n_unseen, "%lld sets away from 0",
                  (long long)away);
    ck_assert_msg(cmax > 0 && r == cmax / (1 - cmax), "resolution %.17g, sets' %.17g", r, cmax / (1 - cmax));
    char text[2048];
    ck_assert_int_eq(er_report_text(&rep, text, sizeof text, NULL), ER_OK);
    char line[160];
    snprintf(line, sizeof line, "  resolution %.3g: an output off by more than that, relative to any value its set "
                                "allows, fails (at the %lld of %d elements", r, (long long)away, M * N);
    ck_assert_msg(strstr(text, line) != NULL, "%s", text);
    ck_assert_int_eq(er_report_json(&rep, text, sizeof text, NULL), ER_OK);
    ck_assert_msg(strstr(text, "\"resolution\": ") && !strstr(text, "\"resolution\": null"), "%s", text);
    er_report_clear(&rep);
    /* beyond r from either end, in either direction: outside wherever the set lies away from 0 */
    for (int end = 0; end < 2; end++)
        for (int dir = -1; dir <= 1; dir += 2) {
            for (int i = 0; i < M * N; i++) {
                double v = end ? hi[i] : lo[i];
                if (!(lo[i] <= hi[i] && (lo[i] > 0 || hi[i] < 0))) { y[i] = c[i]; continue; }
                float t = (float)(v + dir * r * fabs(v));
                y[i] = nextafterf(nextafterf(t, dir * INFINITY), dir * INFINITY);
            }
            ck_assert_int_eq(er_covers(&rep, ref, &tY, &std), ER_OK);
            for (int i = 0; i < M * N; i++)
                if (lo[i] <= hi[i] && (lo[i] > 0 || hi[i] < 0))
                    ck_assert_msg(rep.classes[i] == ER_CLASS_OUTSIDE, "element %d: %a from %a (r %g) is %s", i, (double)y[i],
                                  end ? hi[i] : lo[i], r, er_class_name((er_class)rep.classes[i]));
            er_report_clear(&rep);
        }
    er_ref_free(ref);
    /* the fast path decides elements without their sets: not known there */
    setenv("EXACTREF_FAST", "1", 1);
    ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
    unsetenv("EXACTREF_FAST");
    ck_assert_int_eq(er_covers(&rep, ref, &tC, &std), ER_OK);
    if (er_ref_fast(ref)) {
        ck_assert(isnan(er_report_resolution(&rep)) && rep.n_unseen > 0);
        ck_assert_int_eq(er_report_text(&rep, text, sizeof text, NULL), ER_OK);
        ck_assert_msg(strstr(text, "resolution") == NULL, "%s", text);
    }
    er_report_clear(&rep);
    ck_assert_int_eq(er_matmul_covers(&rep, &tA, &tB, &tC, "mma:sm_90", NULL), ER_ERR_STANDARD);
    ck_assert(isnan(er_report_resolution(&rep)) && isnan(er_report_resolution(NULL)));
    er_report_clear(&rep);
    er_report_init(&rep);
    ck_assert(isnan(er_report_resolution(&rep)));
    er_ref_free(ref);
}
END_TEST

/* er_report_clear on a report no call has filled: zeroed (er_report_init, or = {0}) it frees nothing; holding
 * whatever bytes the stack left (a report declared and cleared on an early exit) it frees nothing either, since it
 * frees the classes array only where the report's guard says the library allocated it. A filled report is freed
 * (LeakSanitizer in the sanitizer build), twice cleared is safe. */
START_TEST(clear_unfilled_reports) {
    er_report rep;
    er_report_init(&rep);
    er_report_clear(&rep);
    ck_assert(!er_report_all(&rep));
    for (int pattern = 0; pattern < 3; pattern++) {
        memset(&rep, pattern == 0 ? 0x5c : pattern == 1 ? 0xff : 0x01, sizeof rep);
        static uint8_t not_heap[16];
        if (pattern == 2) rep.classes = not_heap;
        er_report_clear(&rep); /* free() of these pointers aborts (glibc) or fails under ASan */
        ck_assert(rep.classes == NULL);
        ck_assert(!er_report_all(&rep));
    }
    float a[4] = {1, 2, 3, 4}, c[4] = {7, 10, 15, 22};
    er_tensor A, C;
    er_tensor_view(&A, ER_FP32, 2, (int64_t[]){2, 2}, NULL, a);
    er_tensor_view(&C, ER_FP32, 2, (int64_t[]){2, 2}, NULL, c);
    ck_assert_int_eq(er_matmul_covers(&rep, &A, &A, &C, "any_order", NULL), ER_OK);
    ck_assert(er_report_all(&rep));
    er_report_clear(&rep);
    er_report_clear(&rep);
    ck_assert(!er_report_all(&rep));
    /* a refusal's text names its status once: "refused (ER_ERR_STANDARD): unknown order ..." */
    ck_assert_int_eq(er_matmul_covers(&rep, &A, &A, &C, "mma:sm_90", NULL), ER_ERR_STANDARD);
    char text[512];
    ck_assert_int_eq(er_report_text(&rep, text, sizeof text, NULL), ER_OK);
    ck_assert_msg(strncmp(text, "refused (ER_ERR_STANDARD): ", 27) == 0 && strstr(text + 27, "ER_ERR_STANDARD") == NULL, "%s", text);
    er_report_clear(&rep);
}
END_TEST

/* er_report_keep_on_device and er_report_fetch_classes in every build: NULL refused; without the CUDA toolkit the mark
 * refused with the report untouched (nothing cleared or lost); a fetch on a zeroed report, or on one of stray bytes
 * whose guard does not match, does nothing (no device pointer of stray bytes is freed or read). */
START_TEST(kept_classes_calls_in_every_build) {
    ck_assert_int_eq(er_report_keep_on_device(NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_report_fetch_classes(NULL), ER_ERR_NULL);
    er_report rep, stray;
    memset(&rep, 0x5c, sizeof rep);
    memcpy(&stray, &rep, sizeof rep);
    if (!er_cuda_available()) {
        ck_assert_int_eq(er_report_keep_on_device(&rep), ER_ERR_UNSUPPORTED);
        ck_assert_int_eq(memcmp(&rep, &stray, sizeof rep), 0);
    }
    ck_assert_int_eq(er_report_fetch_classes(&stray), ER_OK);
    ck_assert_int_eq(memcmp(&rep, &stray, sizeof rep), 0);
    er_report_clear(&rep);
    ck_assert_int_eq(er_report_fetch_classes(&rep), ER_OK);
    ck_assert_ptr_null(er_report_classes(&rep));
}
END_TEST

int main(void) {
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, bad_matmul_inputs);
    tcase_add_test(tc, views_and_refs);
    tcase_add_test(tc, standards);
    tcase_add_test(tc, covers_sets);
    tcase_add_test(tc, statuses_and_version);
    tcase_add_test(tc, option_tables);
    tcase_add_test(tc, clear_unfilled_reports);
    tcase_add_test(tc, kept_classes_calls_in_every_build);
    tcase_add_test(tc, resolution);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
