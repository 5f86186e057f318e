#define _POSIX_C_SOURCE 200809L /* setenv */
/* t-layernorm.c: layernorm sets (y, mean, rstd). Real H200 outputs of torch.native_layer_norm (tests/data/norm.npz)
 * are covered under the default standard; random correct implementations run by the test (two-pass in random
 * orders, Welford updates and Chan combines in random trees, each rounding in F) are covered under their
 * standard; the correctly rounded exact results are EXACT; special rows follow the stated rules; the
 * unbiased-variance and one-pass-variance bugs are caught. */
#include "../common/er_gen.h"
#include "../common/npz.h"

#ifndef ER_TEST_DATA_DIR
#define ER_TEST_DATA_DIR "tests/data"
#endif

/* Every report passes, else fail with the first failing one. */
static void require_all(er_report reps[3], const char *what, long trial) {
    for (int o = 0; o < 3; o++) {
        if (er_report_all(&reps[o])) continue;
        char text[4096];
        er_report_text(&reps[o], text, sizeof text, NULL);
        ck_abort_msg("%s (trial %ld): output %d not covered:\n%s" ER_SEED_MSG_FMT, what, trial, o, text, ER_SEED_ARGS);
    }
}

static void clear3(er_report reps[3]) { for (int o = 0; o < 3; o++) er_report_clear(&reps[o]); }

START_TEST(torch_layernorm_on_h200_is_covered) {
    npz_file z;
    FILE *f = open_cases(&z, ER_TEST_DATA_DIR "/norm.npz", ER_TEST_DATA_DIR "/norm_cases.txt");
    char line[256], id[32], op[32], dtype[32], dist[32];
    int cases = 0, tight = 0;
    long long counts[3][ER_CLASS_COUNT] = {{0}};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%31s %31s %31s %31s", id, op, dtype, dist) != 4 || strcmp(op, "layernorm") != 0) continue;
        static const char *const parts[6] = {"in__x", "in__weight", "in__bias", "out__y", "out__mean", "out__rstd"};
        er_tensor t[6];
        const er_tensor *pt[6];
        for (int i = 0; i < 6; i++) {
            char key[96];
            snprintf(key, sizeof key, "%s__%s", id, parts[i]);
            const npy_array *a = npz_find(&z, key);
            pt[i] = a && npz_view(&t[i], a) ? &t[i] : NULL;
        }
        ck_assert_msg(pt[0] && pt[3] && pt[4] && pt[5], "case %s incomplete", id);
        er_ref *ref;
        ck_assert_int_eq(er_layernorm(&ref, pt[0], 1, pt[1], pt[2], 1e-5), ER_OK);
        er_standard std;
        er_standard_init(&std);
        er_report reps[3];
        ck_assert_msg(er_covers_outputs(reps, ref, pt + 3, 3, &std) == ER_OK, "%s", er_last_error());
        require_all(reps, id, 0);
        for (int o = 0; o < 3; o++)
            for (int c = 0; c < ER_CLASS_COUNT; c++) counts[o][c] += reps[o].counts[c];
        clear3(reps);
        /* the two-pass sets, tighter, hold these Welford outputs too (measured, not claimed) */
        ck_assert_int_eq(er_standard_parse(&std, "any_order", "variance=two_pass"), ER_OK);
        ck_assert_int_eq(er_covers_outputs(reps, ref, pt + 3, 3, &std), ER_OK);
        tight += er_report_all(&reps[0]) && er_report_all(&reps[1]) && er_report_all(&reps[2]);
        clear3(reps);
        /* torch's Welford tree at its depth (er_depth_torch_layer_norm), and at its combine depth too */
        int64_t D, C;
        ck_assert_int_eq(er_depth_torch_layer_norm(&D, pt[0]->shape[pt[0]->ndim - 1]), ER_OK);
        ck_assert_int_eq(er_combine_depth_torch_layer_norm(&C, pt[0]->shape[pt[0]->ndim - 1]), ER_OK);
        for (int v = 0; v < 4; v++) {
            char opts[96];
            snprintf(opts, sizeof opts, "variance=%s depth=%lld", v & 1 ? "either" : "welford", (long long)D);
            if (v & 2) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), " combine_depth=%lld", (long long)C);
            ck_assert_int_eq(er_standard_parse(&std, "any_order", opts), ER_OK);
            ck_assert_msg(er_covers_outputs(reps, ref, pt + 3, 3, &std) == ER_OK, "%s", er_last_error());
            require_all(reps, id, 0);
            clear3(reps);
        }
        er_ref_free(ref);
        cases++;
    }
    fclose(f);
    printf("torch.native_layer_norm on H200: %d cases covered, and under variance=welford and either at "
           "er_depth_torch_layer_norm's depth, with and without its combine depth (y: exact %lld, covered %lld; mean: exact %lld, covered %lld; "
           "rstd: exact %lld, covered %lld); %d also inside the two-pass sets\n", cases, counts[0][0], counts[0][1],
           counts[1][0], counts[1][1], counts[2][0], counts[2][1], tight);
    ck_assert_int_eq(cases, 33);
    npz_free(&z);
}
END_TEST

/* ---- implementations run by the test, every operation rounded in F by MPFR (er_gen.h) ---- */

typedef struct ln_impl {
    int welford;     /* 0 two-pass, 1 Welford */
    int div_mode;    /* 1 divide, 2 reciprocal, 0 at random per division */
    int unbiased;    /* bug: divide M2 by n - 1 */
    int one_pass;    /* bug: var = E[x^2] - mean^2 */
    int chain;       /* Welford: serial updates only (data order) */
} ln_impl;

static double div_n(emu *e, double q, int n, int mode) {
    if (mode == 0) mode = 1 + (int)(er_rand64() & 1);
    mpfr_set_d(e->u, q, MPFR_RNDN);
    if (mode == 1) { mpfr_div_si(e->u, e->u, n, MPFR_RNDN); return emu_round(e, e->u); }
    mpfr_set_ui(e->t, 1, MPFR_RNDN);
    mpfr_div_si(e->t, e->t, n, MPFR_RNDN);
    double rn = emu_round(e, e->t);
    return emu_mul(e, q, rn);
}

/* One Welford state per item of the tree. */
typedef struct wstate { double m, m2; int c; } wstate;

static wstate w_combine(emu *e, wstate a, wstate b) {
    wstate r;
    r.c = a.c + b.c;
    int form = (int)(er_rand64() % 3), fuse = (int)(er_rand64() & 1);
    if (b.c == 1 && form == 0) {
        /* Welford's update with b's single value: delta = x - m; m += delta * fl(1/k) or delta / k; m2 += delta (x - m') */
        double x = b.m, delta = emu_add(e, x, -a.m), inc;
        if (er_rand64() & 1) { mpfr_set_d(e->u, delta, MPFR_RNDN); mpfr_div_si(e->u, e->u, r.c, MPFR_RNDN); inc = emu_round(e, e->u); r.m = emu_add(e, a.m, inc); }
        else {
            mpfr_set_ui(e->t, 1, MPFR_RNDN); mpfr_div_si(e->t, e->t, r.c, MPFR_RNDN);
            double q = emu_round(e, e->t);
            r.m = fuse ? emu_fma(e, delta, q, a.m) : emu_add(e, a.m, emu_mul(e, delta, q));
        }
        double d2 = emu_add(e, x, -r.m);
        r.m2 = fuse ? emu_fma(e, delta, d2, a.m2) : emu_add(e, a.m2, emu_mul(e, delta, d2));
        return r;
    }
    double delta = emu_add(e, b.m, -a.m), cnt = (double)r.c;
    double corr = emu_mul(e, emu_mul(e, delta, delta), (double)a.c), nb;
    if (form == 1) {
        /* Chan: m = ma + delta * fl(nb/n) */
        mpfr_set_si(e->t, b.c, MPFR_RNDN); mpfr_div_d(e->t, e->t, cnt, MPFR_RNDN);
        nb = emu_round(e, e->t);
        r.m = fuse ? emu_fma(e, delta, nb, a.m) : emu_add(e, a.m, emu_mul(e, delta, nb));
    } else {
        /* torch's combine: coef = fl(1/n), m = fl(na coef) ma + fl(nb coef) mb */
        mpfr_set_ui(e->t, 1, MPFR_RNDN); mpfr_div_d(e->t, e->t, cnt, MPFR_RNDN);
        double coef = emu_round(e, e->t), na = emu_mul(e, (double)a.c, coef);
        nb = emu_mul(e, (double)b.c, coef);
        r.m = fuse ? emu_fma(e, na, a.m, emu_mul(e, nb, b.m)) : emu_add(e, emu_mul(e, na, a.m), emu_mul(e, nb, b.m));
    }
    double s = emu_add(e, a.m2, b.m2);
    r.m2 = fuse ? emu_fma(e, corr, nb, s) : emu_add(e, s, emu_mul(e, corr, nb));
    return r;
}

/* The statistics of a row: mean and variance in F. */
static void stats(emu *e, const ln_impl *im, const double *x, int n, double *mean, double *var) {
    double *v = calloc((size_t)n, sizeof(double));
    if (im->one_pass) {
        for (int j = 0; j < n; j++) v[j] = x[j];
        double s = emu_sum_random(e, v, n), q = emu_dot_random(e, x, x, n, 2);
        *mean = div_n(e, s, n, im->div_mode);
        *var = emu_add(e, div_n(e, q, n, im->div_mode), -emu_mul(e, *mean, *mean));
    } else if (!im->welford) {
        for (int j = 0; j < n; j++) v[j] = x[j];
        double s = emu_sum_random(e, v, n);
        *mean = div_n(e, s, n, im->div_mode);
        for (int j = 0; j < n; j++) v[j] = emu_add(e, x[j], -*mean);
        double q = emu_dot_random(e, v, v, n, 2);
        *var = div_n(e, q, im->unbiased && n > 1 ? n - 1 : n, im->div_mode);
    } else {
        wstate *w = malloc(sizeof(wstate) * (size_t)n);
        for (int j = 0; j < n; j++) w[j] = (wstate){x[j], 0.0, 1};
        int k = n;
        if (im->chain) {
            for (int j = 1; j < n; j++) w[0] = w_combine(e, w[0], w[j]);
        } else {
            while (k > 1) {
                int i = (int)(er_rand64() % (uint64_t)k), j = (int)(er_rand64() % (uint64_t)(k - 1));
                if (j >= i) j++;
                w[i] = w_combine(e, w[i], w[j]);
                w[j] = w[k - 1];
                k--;
                if (i == k) w[j] = w[i]; /* i was the moved last item */
            }
        }
        *mean = w[0].m;
        *var = div_n(e, w[0].m2, im->unbiased && n > 1 ? n - 1 : n, im->div_mode);
        free(w);
    }
    free(v);
}

/* rsqrt(v) within 2 ulps of F: a neighbour of the exact value, moved one more ulp at random. */
static double rsqrt_2ulp(emu *e, double v) {
    if (v <= 0) return v == 0 ? INFINITY : NAN;
    mpfr_set_d(e->t, v, MPFR_RNDN);
    mpfr_rec_sqrt(e->t, e->t, MPFR_RNDN);
    double r = er_oracle_round(e->F, e->t, (er_rand64() & 1) ? MPFR_RNDU : MPFR_RNDD, ER_OVERFLOW_IEEE);
    if (er_rand64() % 3 == 0) {
        mpfr_set_d(e->u, r, MPFR_RNDN);
        if (er_rand64() & 1) mpfr_nextabove(e->u); else mpfr_nextbelow(e->u);
        /* a step of one ulp of F (MPFR at F's precision) */
        mpfr_t s;
        mpfr_init2(s, er_format_precision(e->F));
        mpfr_set_d(s, r, MPFR_RNDN);
        if (er_rand64() & 1) mpfr_nextabove(s); else mpfr_nextbelow(s);
        r = mpfr_get_d(s, MPFR_RNDN);
        mpfr_clear(s);
    }
    return r;
}

/* y from x, mean, r, w, b by one of the four compositions at random. */
static double compose(emu *e, double x, double m, double r, double w, double b) {
    double d = emu_add(e, x, -m);
    switch (er_rand64() % 4) {
    case 0: return emu_add(e, emu_mul(e, emu_mul(e, d, r), w), b);
    case 1: return emu_fma(e, emu_mul(e, d, r), w, b);
    case 2: return emu_add(e, emu_mul(e, d, emu_mul(e, r, w)), b);
    default: return emu_fma(e, d, emu_mul(e, r, w), b);
    }
}

/* Runs one implementation: y (F values), mean, rstd. */
static void run_impl(const ln_impl *im, er_format F, const double *x, const double *w, const double *b, int n, double eps,
                     double *y, double *mean, double *rstd) {
    emu e;
    emu_init(&e, F);
    double var, epsF;
    er_round_double(&epsF, F, eps, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    stats(&e, im, x, n, mean, &var);
    *rstd = rsqrt_2ulp(&e, emu_add(&e, var, epsF));
    for (int i = 0; i < n; i++) y[i] = compose(&e, x[i], *mean, *rstd, w ? w[i] : 1.0, b ? b[i] : 0.0);
    emu_clear(&e);
}

/* Data of a row: normal, offset (mean far from 0 against the spread), sorted offset (the adversarial order for
 * running means), wide, or far offset (mean 2^6 to 2^11 times the spread). */
static void gen_row(er_format fx, int n, int kind, double *x) {
    double off = kind == 1 || kind == 2 ? ldexp(1.0, (int)er_rand_int(2, 9)) * (er_rand64() & 1 ? 1 : -1) : 0.0;
    if (kind == 4) off = ldexp(1.0, (int)er_rand_int(6, 11)) * (er_rand64() & 1 ? 1 : -1);
    if (kind == 4) kind = 0;
    double sc = kind == 3 ? ldexp(1.0, (int)er_rand_int(-20, 20)) : ldexp(1.0, (int)er_rand_int(-3, 3));
    for (int j = 0; j < n; j++) er_round_double(&x[j], fx, off + er_rand_normal() * sc, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
    if (kind == 2)
        for (int i = 1; i < n; i++) for (int j = i; j > 0 && x[j - 1] > x[j]; j--) { double t = x[j]; x[j] = x[j - 1]; x[j - 1] = t; }
}

typedef struct ln_case {
    er_format fx, fo;
    int n, affine;
    double eps;
    double x[2048], w[2048], b[2048], y[2048];
    uint64_t X[2048], W[2048], B[2048], Y[2048];
    float mean, rstd;
} ln_case;

/* Stores the case's inputs and the implementation's outputs; checks them under `standard`. */
static void check_case(ln_case *c, const char *options, er_report reps[3]) {
    int n = c->n;
    for (int j = 0; j < n; j++) {
        er_store(c->X, c->fx, j, c->x[j]);
        er_store(c->W, c->fx, j, c->w[j]);
        er_store(c->B, c->fx, j, c->b[j]);
        double v;
        er_round_double(&v, c->fo, c->y[j], ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        er_store(c->Y, c->fo, j, v);
    }
    er_tensor tx, tw, tb, ty, tm, tr;
    er_tensor_view(&tx, c->fx, 2, (int64_t[]){1, n}, NULL, c->X);
    er_tensor_view(&tw, c->fx, 1, (int64_t[]){n}, NULL, c->W);
    er_tensor_view(&tb, c->fx, 1, (int64_t[]){n}, NULL, c->B);
    er_tensor_view(&ty, c->fo, 2, (int64_t[]){1, n}, NULL, c->Y);
    er_tensor_view(&tm, ER_FP32, 2, (int64_t[]){1, 1}, NULL, &c->mean);
    er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){1}, NULL, &c->rstd);
    er_ref *ref;
    ER_REQUIRE(er_layernorm(&ref, &tx, 1, c->affine ? &tw : NULL, c->affine ? &tb : NULL, c->eps) == ER_OK, "%s", er_last_error());
    er_standard std;
    ER_REQUIRE(er_standard_parse(&std, "any_order", options) == ER_OK, "%s", er_last_error());
    const er_tensor *outs[3] = {&ty, &tm, &tr};
    ER_REQUIRE(er_covers_outputs(reps, ref, outs, 3, &std) == ER_OK, "%s", er_last_error());
    er_ref_free(ref);
}

static ln_case *new_case(int kind, int maxn) {
    static const er_format ins[] = {ER_FP16, ER_BF16, ER_FP32};
    ln_case *c = calloc(1, sizeof *c);
    c->fx = ins[er_rand64() % 3];
    c->fo = er_rand64() % 2 ? ER_FP32 : c->fx;
    c->n = er_rand64() % 8 == 0 ? (int)er_rand_int(1, 4) : (int)er_rand_int(1, maxn);
    c->affine = (int)(er_rand64() % 3 != 0);
    c->eps = er_rand64() % 4 == 0 ? 0.0 : 1e-5;
    gen_row(c->fx, c->n, kind, c->x);
    for (int j = 0; j < c->n; j++) {
        er_round_double(&c->w[j], c->fx, 1.0 + 0.5 * er_rand_normal(), ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
        er_round_double(&c->b[j], c->fx, 0.5 * er_rand_normal(), ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
    }
    return c;
}

START_TEST(random_implementations_are_covered) {
    er_test_reseed(700);
    long trials = (long)(400 * er_test_multiplier());
    long per[2] = {0, 0};
    for (long tr = 0; tr < trials; tr++) {
        /* every 20th trial a long row (up to 2048), where Welford's first-order error term is largest */
        ln_case *c = new_case((int)(tr % 4), tr % 20 == 19 ? 2048 : 300);
        ln_impl im = {.welford = (int)(tr & 1), .div_mode = (int)(er_rand64() % 3), .chain = er_rand64() % 3 == 0};
        double mean, rstd;
        run_impl(&im, ER_FP32, c->x, c->affine ? c->w : NULL, c->affine ? c->b : NULL, c->n, c->eps, c->y, &mean, &rstd);
        c->mean = (float)mean;
        c->rstd = (float)rstd;
        const char *opts = (tr / 2) % 2 ? "" : im.welford ? "variance=welford" : "variance=two_pass";
        er_report reps[3];
        check_case(c, opts, reps);
        char what[160];
        snprintf(what, sizeof what, "a correct %s layernorm (x %s, out %s, n %d, eps %g, standard '%s')",
                 im.welford ? (im.chain ? "serial Welford" : "Welford-tree") : "two-pass", er_format_name(c->fx),
                 er_format_name(c->fo), c->n, c->eps, opts);
        require_all(reps, what, tr);
        clear3(reps);
        per[im.welford]++;
        free(c);
    }
    printf("layernorm: %ld two-pass and %ld Welford implementations covered (y, mean and rstd)\n", per[0], per[1]);
}
END_TEST

/* The bugs: the unbiased variance (n - 1) and the one-pass variance E[x^2] - mean^2 on offset data. Each is
 * caught under variance=two_pass whenever it moves rstd by more than its stated margin. */
START_TEST(variance_bugs_are_caught) {
    er_test_reseed(800);
    long trials = (long)(200 * er_test_multiplier());
    long ub = 0, ub_trig = 0, ub_caught = 0, op = 0, op_trig = 0, op_caught = 0, op_welford = 0;
    for (long tr = 0; tr < trials; tr++) {
        int one = (int)(tr & 1);
        ln_case *c = new_case(0, one ? 1024 : 256);
        c->fo = ER_FP32;
        if (c->n < 2) c->n = 2;
        gen_row(c->fx, c->n, one ? 4 : 0, c->x);
        ln_impl im = {.welford = 0, .div_mode = (int)(er_rand64() % 3), .unbiased = !one, .one_pass = one};
        double mean, rstd;
        run_impl(&im, ER_FP32, c->x, c->affine ? c->w : NULL, c->affine ? c->b : NULL, c->n, c->eps, c->y, &mean, &rstd);
        c->mean = (float)mean;
        c->rstd = (float)rstd;
        /* the exact rstd, for the bug's size */
        mpfr_t s, q, t;
        mpfr_inits2(4000, s, q, t, (mpfr_ptr)0);
        mpfr_set_zero(s, 1);
        mpfr_set_zero(q, 1);
        for (int j = 0; j < c->n; j++) { mpfr_add_d(s, s, c->x[j], MPFR_RNDN); mpfr_set_d(t, c->x[j], MPFR_RNDN); mpfr_sqr(t, t, MPFR_RNDN); mpfr_add(q, q, t, MPFR_RNDN); }
        mpfr_sqr(t, s, MPFR_RNDN);
        mpfr_div_si(t, t, c->n, MPFR_RNDN);
        mpfr_sub(q, q, t, MPFR_RNDN);
        mpfr_div_si(q, q, c->n, MPFR_RNDN);
        double epsf = (double)(float)c->eps, var = mpfr_get_d(q, MPFR_RNDN), exact = 1.0 / sqrt(var + epsf);
        mpfr_clears(s, q, t, (mpfr_ptr)0);
        double moved = rstd == exact ? 0.0 : isnan(rstd) || isinf(rstd) || isinf(exact) ? INFINITY : fabs(rstd / exact - 1);
        er_report reps[3];
        check_case(c, "variance=two_pass", reps);
        int caught = !(er_report_all(&reps[0]) && er_report_all(&reps[1]) && er_report_all(&reps[2]));
        clear3(reps);
        if (one) {
            /* margin: the two-pass set's width for rstd is below 2 (n + 4) u + 3 ulps at n <= 1024 (layernorm.md) */
            op++;
            op_caught += caught;
            /* the two-pass set's relative width: about 2(n + 2)u from the sums, plus (dm / sigma)^2 from a mean
             * off by dm <= n u max|x| (layernorm.md, Theorem L2); beyond it with room to spare, the bug is caught */
            double X = 0;
            for (int j = 0; j < c->n; j++) X = fmax(X, fabs(c->x[j]));
            double dm = c->n * ldexp(1.0, -24) * X, margin = 1e-3 + dm * dm / var;
            if (moved > margin) {
                op_trig++;
                ER_REQUIRE(caught, "trial %ld: one-pass variance moving rstd by %.3g was not caught (n %d)" ER_SEED_MSG_FMT, tr, moved, c->n, ER_SEED_ARGS);
            }
            check_case(c, "variance=welford", reps);
            op_welford += !(er_report_all(&reps[0]) && er_report_all(&reps[1]) && er_report_all(&reps[2]));
            clear3(reps);
        } else {
            /* the n/(n-1) factor moves rstd by about 1/(2n): above the set's width for n <= 256 when var >> eps */
            ub++;
            ub_caught += caught;
            if (var > 1e3 * epsf && moved > 1e-3) {
                ub_trig++;
                ER_REQUIRE(caught, "trial %ld: the unbiased variance moving rstd by %.3g was not caught (n %d)" ER_SEED_MSG_FMT, tr, moved, c->n, ER_SEED_ARGS);
            }
        }
        free(c);
    }
    printf("layernorm bugs under variance=two_pass: unbiased variance caught in %ld of %ld (all %ld where it moves rstd by "
           "more than 0.1%%); one-pass variance on offset data caught in %ld of %ld (all %ld where it moves rstd by more "
           "than 0.1%% + (n u max|x| / sigma)^2), under variance=welford in %ld\n", ub_caught, ub, ub_trig, op_caught, op, op_trig, op_welford);
    ck_assert_int_gt(ub_trig, ub / 4);
    ck_assert_int_gt(op_trig, op / 4);
}
END_TEST

START_TEST(exact_special_and_refused) {
    /* x = 1, 2, 3, 4, eps 0: mean 2.5, var 1.25; the correctly rounded outputs are EXACT */
    float x[4] = {1, 2, 3, 4}, y[4], mean = 2.5f, rstd;
    mpfr_t t, r;
    mpfr_inits2(200, t, r, (mpfr_ptr)0);
    mpfr_set_d(r, 1.25, MPFR_RNDN);
    mpfr_rec_sqrt(r, r, MPFR_RNDN);
    rstd = mpfr_get_flt(r, MPFR_RNDN);
    for (int i = 0; i < 4; i++) { mpfr_mul_d(t, r, x[i] - 2.5, MPFR_RNDN); y[i] = mpfr_get_flt(t, MPFR_RNDN); }
    mpfr_clears(t, r, (mpfr_ptr)0);
    er_tensor tx, ty, tm, tr;
    er_tensor_view(&tx, ER_FP32, 1, (int64_t[]){4}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 1, (int64_t[]){4}, NULL, y);
    er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){1}, NULL, &mean);
    er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){1}, NULL, &rstd);
    const er_tensor *outs[3] = {&ty, &tm, &tr};
    er_ref *ref;
    er_standard std;
    er_standard_init(&std);
    er_report reps[3];
    ck_assert_int_eq(er_layernorm(&ref, &tx, 1, NULL, NULL, 0.0), ER_OK);
    ck_assert_int_eq(er_ref_num_outputs(ref), 3);
    ck_assert_str_eq(er_ref_output_name(ref, 2), "rstd");
    ck_assert_ptr_null(er_ref_output_name(ref, 3));
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 3, &std), ER_OK);
    ck_assert_int_eq(reps[0].counts[ER_CLASS_EXACT], 4);
    ck_assert_int_eq(reps[1].counts[ER_CLASS_EXACT], 1);
    ck_assert_int_eq(reps[2].counts[ER_CLASS_EXACT], 1);
    ck_assert_str_eq(reps[2].op, "layernorm.rstd");
    clear3(reps);
    /* a mean off by 1% and an rstd off by 1% are caught, each in its own report */
    mean = 2.525f;
    rstd *= 1.01f;
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 3, &std), ER_OK);
    ck_assert(er_report_all(&reps[0]) && !er_report_all(&reps[1]) && !er_report_all(&reps[2]));
    clear3(reps);
    /* a NULL output is not checked: its report is empty and passes */
    outs[1] = NULL;
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 3, &std), ER_OK);
    ck_assert(er_report_numel(&reps[1]) == 0 && er_report_all(&reps[1]) && !er_report_all(&reps[2]));
    clear3(reps);
    /* refusals: wrong output count, a wrong mean shape, options of other ops; each report records the refusal */
    outs[1] = &tm;
    memset(reps, 0x5a, sizeof reps);
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 1, &std), ER_ERR_OUTPUT);
    er_tensor bad;
    er_tensor_view(&bad, ER_FP32, 1, (int64_t[]){2}, NULL, y);
    outs[1] = &bad;
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 3, &std), ER_ERR_OUTPUT);
    ck_assert_msg(strstr(er_last_error(), "mean") != NULL, "%s", er_last_error());
    outs[1] = &tm;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "exp_ulps=4"), ER_OK);
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 3, &std), ER_ERR_STANDARD);
    for (int o = 0; o < 3; o++) ck_assert(!er_report_all(&reps[o]) && er_report_status(&reps[o]) == ER_ERR_STANDARD && reps[o].classes == NULL);
    er_standard_init(&std);
    er_ref_free(ref);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "variance=three_pass"), ER_ERR_STANDARD);
    er_standard_init(&std);
    er_tensor empty;
    er_tensor_view(&empty, ER_FP32, 2, (int64_t[]){3, 0}, NULL, NULL);
    ck_assert_int_eq(er_layernorm(&ref, &empty, 1, NULL, NULL, 1e-5), ER_ERR_SHAPE);
    ck_assert_int_eq(er_layernorm(&ref, &tx, 2, NULL, NULL, 1e-5), ER_ERR_SHAPE);
    ck_assert_int_eq(er_layernorm(&ref, &tx, 1, &tm, NULL, 1e-5), ER_ERR_SHAPE);
    ck_assert_int_eq(er_layernorm(&ref, &tx, 1, NULL, NULL, -1.0), ER_ERR_INVALID);
    /* sum's options are refused on layernorm and variance= on sum */
    ck_assert_int_eq(er_sum(&ref, &tx, 0), ER_OK);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "variance=welford"), ER_OK);
    ck_assert_int_eq(er_covers(reps, ref, &tm, &std), ER_ERR_STANDARD);
    er_ref_free(ref);

    /* special rows: NaN in gives NaN mean and y; a constant row with eps 0 has rstd +inf and y NaN exactly */
    float s[8] = {1, NAN, 3, 4, 1.5f, 1.5f, 1.5f, 1.5f}, sy[8], sm[2], sr[2];
    er_tensor ts, tsy, tsm, tsr;
    er_tensor_view(&ts, ER_FP32, 2, (int64_t[]){2, 4}, NULL, s);
    er_tensor_view(&tsy, ER_FP32, 2, (int64_t[]){2, 4}, NULL, sy);
    er_tensor_view(&tsm, ER_FP32, 2, (int64_t[]){2, 1}, NULL, sm);
    er_tensor_view(&tsr, ER_FP32, 1, (int64_t[]){2}, NULL, sr);
    const er_tensor *so[3] = {&tsy, &tsm, &tsr};
    for (int i = 0; i < 8; i++) sy[i] = NAN;
    sm[0] = NAN; sm[1] = 1.5f;
    sr[0] = 7.0f; sr[1] = INFINITY;
    er_standard_init(&std);
    ck_assert_int_eq(er_layernorm(&ref, &ts, 1, NULL, NULL, 0.0), ER_OK);
    ck_assert_int_eq(er_covers_outputs(reps, ref, so, 3, &std), ER_OK);
    ck_assert_int_eq(reps[0].counts[ER_CLASS_EXACT], 8);
    ck_assert_int_eq(reps[1].counts[ER_CLASS_EXACT], 2);
    ck_assert(er_report_all(&reps[2]) && reps[2].counts[ER_CLASS_EXACT] == 1); /* rstd of a NaN row: unrestricted */
    clear3(reps);
    sy[0] = 0.0f; /* a number where NaN is required */
    sm[0] = 2.0f;
    ck_assert_int_eq(er_covers_outputs(reps, ref, so, 3, &std), ER_OK);
    ck_assert_int_eq(reps[0].counts[ER_CLASS_NAN_MISSING], 1);
    ck_assert_int_eq(reps[1].counts[ER_CLASS_NAN_MISSING], 1);
    clear3(reps);
    er_ref_free(ref);
    /* an infinity in the row: the mean is that infinity or NaN, y NaN or infinite, never finite */
    float u[3] = {1, INFINITY, 2}, uy[3] = {NAN, NAN, 5.0f}, um = INFINITY, ur = NAN;
    er_tensor tu, tuy, tum, tur;
    er_tensor_view(&tu, ER_FP32, 1, (int64_t[]){3}, NULL, u);
    er_tensor_view(&tuy, ER_FP32, 1, (int64_t[]){3}, NULL, uy);
    er_tensor_view(&tum, ER_FP32, 1, (int64_t[]){1}, NULL, &um);
    er_tensor_view(&tur, ER_FP32, 1, (int64_t[]){1}, NULL, &ur);
    const er_tensor *uo[3] = {&tuy, &tum, &tur};
    ck_assert_int_eq(er_layernorm(&ref, &tu, 1, NULL, NULL, 1e-5), ER_OK);
    ck_assert_int_eq(er_covers_outputs(reps, ref, uo, 3, &std), ER_OK);
    ck_assert_int_eq(reps[0].counts[ER_CLASS_INF_MISSING], 1);
    ck_assert_int_eq(reps[0].n_failed, 1);
    ck_assert(er_report_all(&reps[1]) && er_report_all(&reps[2]));
    clear3(reps);
    er_ref_free(ref);
}
END_TEST

/* Rows are shared among threads: the three reports are the same for any thread count. */
START_TEST(same_reports_for_any_thread_count) {
    er_test_reseed(810);
    enum { R = 83, N = 67 };
    static float x[R * N], y[R * N], mean[R], rstd[R];
    for (int i = 0; i < R * N; i++) x[i] = (float)(er_rand_normal() + 2);
    for (int r = 0; r < R; r++) {
        double m = 0, v = 0;
        for (int j = 0; j < N; j++) m += x[r * N + j];
        m /= N;
        for (int j = 0; j < N; j++) v += (x[r * N + j] - m) * (x[r * N + j] - m);
        v /= N;
        double rs = 1 / sqrt(v + 1e-5);
        mean[r] = (float)(r % 9 == 0 ? m * 1.001 : m);
        rstd[r] = (float)(r % 13 == 0 ? rs * 1.01 : rs);
        for (int j = 0; j < N; j++) y[r * N + j] = (float)((x[r * N + j] - m) * rs * ((r * N + j) % 7 == 0 ? 1.01 : 1.0));
    }
    er_tensor tx, ty, tm, tr;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, N}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){R, N}, NULL, y);
    er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){R}, NULL, mean);
    er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){R}, NULL, rstd);
    const er_tensor *outs[3] = {&ty, &tm, &tr};
    er_ref *ref;
    ck_assert_int_eq(er_layernorm(&ref, &tx, 1, NULL, NULL, 1e-5), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "variance=two_pass"), ER_OK);
    er_report rep[3][3];
    static const char *const th[3] = {"1", "2", "6"};
    for (int t = 0; t < 3; t++) {
        setenv("EXACTREF_THREADS", th[t], 1);
        ck_assert_int_eq(er_covers_outputs(rep[t], ref, outs, 3, &std), ER_OK);
    }
    unsetenv("EXACTREF_THREADS");
    for (int o = 0; o < 3; o++) {
        ck_assert_int_gt(rep[0][o].n_failed, 0);
        for (int t = 1; t < 3; t++) {
            ck_assert(memcmp(rep[0][o].counts, rep[t][o].counts, sizeof rep[0][o].counts) == 0);
            ck_assert(memcmp(rep[0][o].classes, rep[t][o].classes, (size_t)rep[0][o].n) == 0);
            ck_assert_int_eq(rep[0][o].n_first, rep[t][o].n_first);
            for (int i = 0; i < rep[0][o].n_first; i++) ck_assert_int_eq(rep[0][o].first[i].index, rep[t][o].first[i].index);
            ck_assert_int_eq(rep[0][o].worst.index, rep[t][o].worst.index);
        }
    }
    for (int t = 0; t < 3; t++) clear3(rep[t]);
    er_ref_free(ref);
}
END_TEST

/* y's EXACT is decided exactly: the correctly rounded layernorm (MPFR at 600 bits from the exact sums, eps as the
 * compute format holds it, rounded by the test's oracle) is EXACT in every element, and one ulp above never is.
 * Rows with weight and bias or without, offset data, symmetric rows whose mean is one of their elements (y = 0
 * there), rows whose y falls exactly on midpoints of the output format (the double enclosure straddles them and
 * the MPFR fallback decides ties to even), and rows of values a few of their ulps apart (the mean not a double, x - m
 * cancelling: y's double enclosure is then a few ulps of the mean wide, relative to y). */
START_TEST(exact_y_is_exact) {
    er_test_reseed(570);
    long trials = (long)(200 * er_test_multiplier());
    static const er_format ins[] = {ER_FP16, ER_BF16, ER_FP32}, outs[] = {ER_FP32, ER_FP16, ER_BF16};
    mpfr_t S, t, v, r, q;
    mpfr_inits2(600, S, t, v, r, q, (mpfr_ptr)0);
    long elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        int n = (int)er_rand_int(1, 150), affine = tr % 2, kind = (int)(tr / 2 % 5);
        er_format fx = ins[er_rand64() % 3], fo = outs[er_rand64() % 3];
        double x[150], w[150], b[150], y[150], eps = tr % 5 == 0 || kind == 3 ? 0.0 : 1e-5;
        if (kind == 3) { n = n < 2 ? 2 : n - n % 2; affine = 1; } /* even, at most 150 */
        uint64_t X[150], W[150], B[150], Y[150];
        double off = kind == 1 ? 100.0 : 0.0;
        for (int j = 0; j < n; j++) {
            double val = off + er_rand_normal() * (kind == 1 ? 0.1 : 1.0);
            if (kind == 2) val = j < n / 2 ? 1.0 + ldexp((double)er_rand_int(1, 64), -8) : 1.0; /* mirrored below: mean 1 */
            if (kind == 2 && j >= n - n / 2 && j >= n / 2) val = 2.0 - x[n - 1 - j];
            if (kind == 4) val = 1.0 + ldexp((double)er_rand_int(-8, 8), 1 - er_format_precision(fx));
            er_round_double(&x[j], fx, val, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            er_round_double(&w[j], ER_FP32, er_rand_normal(), ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE); /* either sign */
            er_round_double(&b[j], ER_FP32, er_rand_normal() / 4, ER_ROUND_NEAREST, ER_OVERFLOW_SATURATE);
            if (kind == 3) {
                /* x = 1 -+ 1/2: mean 1, rstd 2, y = -+w + b, with b chosen to put y on a midpoint of the output format */
                x[j] = j % 2 ? 1.5 : 0.5;
                int p = er_format_precision(fo);
                double mid = 1.0 + ldexp(2.0 * (double)er_rand_int(0, 20) + 1.0, -p);
                w[j] = ldexp((double)er_rand_int(1, 7), -3);
                b[j] = mid - (j % 2 ? w[j] : -w[j]);
            }
            er_store(X, fx, j, x[j]);
            er_store(W, ER_FP32, j, w[j]);
            er_store(B, ER_FP32, j, b[j]);
            b[j] = er_load(B, ER_FP32, j); /* the value the reference reads (kind 3 builds b in double) */
        }
        double epsf;
        er_round_double(&epsf, ER_FP32, eps, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        mpfr_set_zero(S, 1);
        for (int j = 0; j < n; j++) mpfr_add_d(S, S, x[j], MPFR_RNDN);
        mpfr_div_ui(S, S, (unsigned long)n, MPFR_RNDN); /* the mean */
        mpfr_set_zero(v, 1);
        for (int j = 0; j < n; j++) { mpfr_d_sub(t, x[j], S, MPFR_RNDN); mpfr_sqr(t, t, MPFR_RNDN); mpfr_add(v, v, t, MPFR_RNDN); }
        mpfr_div_ui(v, v, (unsigned long)n, MPFR_RNDN);
        mpfr_add_d(v, v, epsf, MPFR_RNDN);
        if (mpfr_zero_p(v)) continue; /* constant row with eps 0: y is NaN (checked elsewhere) */
        mpfr_rec_sqrt(r, v, MPFR_RNDN);
        for (int j = 0; j < n; j++) {
            mpfr_d_sub(q, x[j], S, MPFR_RNDN);
            mpfr_mul(q, q, r, MPFR_RNDN);
            if (affine) { mpfr_mul_d(q, q, w[j], MPFR_RNDN); mpfr_add_d(q, q, b[j], MPFR_RNDN); }
            y[j] = er_oracle_round(fo, q, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
            er_store(Y, fo, j, y[j]);
        }
        er_tensor tx, ty, tw, tb;
        er_tensor_view(&tx, fx, 1, (int64_t[]){n}, NULL, X);
        er_tensor_view(&ty, fo, 1, (int64_t[]){n}, NULL, Y);
        er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){n}, NULL, W);
        er_tensor_view(&tb, ER_FP32, 1, (int64_t[]){n}, NULL, B);
        const er_tensor *outs3[3] = {&ty, NULL, NULL};
        er_ref *ref;
        ck_assert_int_eq(er_layernorm(&ref, &tx, 1, affine ? &tw : NULL, affine ? &tb : NULL, eps), ER_OK);
        er_standard std;
        er_standard_init(&std);
        er_report reps[3];
        ER_REQUIRE(er_covers_outputs(reps, ref, outs3, 3, &std) == ER_OK, "covers: %s", er_last_error());
        for (int j = 0; j < n; j++)
            ER_REQUIRE(reps[0].classes[j] == ER_CLASS_EXACT, "trial %ld (%s in, %s out, kind %d, affine %d): element %d, the "
                       "correctly rounded %a, is class %d " ER_SEED_MSG_FMT, tr, er_format_name(fx), er_format_name(fo), kind,
                       affine, j, y[j], reps[0].classes[j], ER_SEED_ARGS);
        clear3(reps);
        int j = (int)er_rand_int(0, n - 1);
        double up = nextafter(y[j], INFINITY);
        er_round_double(&up, fo, up, ER_ROUND_UP, ER_OVERFLOW_SATURATE);
        er_store(Y, fo, j, up);
        ER_REQUIRE(er_covers_outputs(reps, ref, outs3, 3, &std) == ER_OK, "covers: %s", er_last_error());
        ER_REQUIRE(reps[0].classes[j] != ER_CLASS_EXACT, "trial %ld: %a above the correctly rounded %a is EXACT " ER_SEED_MSG_FMT,
                   tr, up, y[j], ER_SEED_ARGS);
        clear3(reps);
        elems += n;
        er_ref_free(ref);
    }
    mpfr_clears(S, t, v, r, q, (mpfr_ptr)0);
    printf("layernorm: %ld correctly rounded y elements of %ld rows are EXACT\n", elems, trials);
}
END_TEST

int main(void) {
    Suite *s = suite_create("layernorm");
    TCase *tc = tcase_create("layernorm");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, torch_layernorm_on_h200_is_covered);
    tcase_add_test(tc, random_implementations_are_covered);
    tcase_add_test(tc, variance_bugs_are_caught);
    tcase_add_test(tc, exact_special_and_refused);
    tcase_add_test(tc, exact_y_is_exact);
    tcase_add_test(tc, same_reports_for_any_thread_count);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
