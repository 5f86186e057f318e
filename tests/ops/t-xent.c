/* t-xent.c: cross_entropy's loss and gradient. Correct fp32 kernels written from their sources' formulas (a fused
 * Liger-style kernel: max, sum of exp, lse = m + log(d), the smoothing terms summed over the classes, each row's
 * loss divided by W before the rows' sum; torch's composition: log_softmax stored in the logits' format, nll_loss and
 * the smoothing loss reduced separately and combined in that format, the gradient through log_softmax's backward;
 * an Unsloth-style kernel: p = exp(x - lse)), each exp at the edge of a 2-ulp budget and each log of a 1-ulp one, the
 * sums in random orders, on rows built to push the sets to their edges (a target of probability near 1, so that
 * p_t - 1 cancels; flat rows; wide logits; masked -inf logits; ignored rows), with fp32 and bf16 logits, are covered in
 * the loss and dlogits; the correctly rounded exact results (an MPFR oracle at 600 bits, written here) are classified
 * exact; planted bugs are caught; bad arguments are refused. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "../common/er_gen.h"
#include "../common/er_refuse.h"

enum { XF_NORMAL, XF_PEAKED, XF_FLAT, XF_WIDE, XF_MASKED, XF_FAMS };
static const char *const xf_names[XF_FAMS] = { "normal", "target near 1", "flat", "wide", "masked -inf" };

typedef struct xe_case {
    int64_t N, C, W, ignore;
    int reduction;
    double eps;
    er_format fx;  /* the logits' format (and both outputs') */
    double *x;     /* N x C logits, values of fx */
    int64_t *t;
} xe_case;

static void xe_make(xe_case *c, int fam, int64_t N, int64_t C, er_format fx, double eps, int reduction) {
    c->N = N;
    c->C = C;
    c->fx = fx;
    c->eps = eps;
    c->reduction = reduction;
    c->ignore = -100;
    c->x = malloc(sizeof(double) * (size_t)(N * C));
    c->t = malloc(sizeof(int64_t) * (size_t)N);
    c->W = 0;
    for (int64_t i = 0; i < N; i++) {
        c->t[i] = N > 1 && er_rand64() % 5 == 0 ? c->ignore : er_rand_int(0, C - 1);
        c->W += c->t[i] != c->ignore;
        double base = er_rand_normal() * 3;
        for (int64_t j = 0; j < C; j++) {
            double v = er_rand_normal();
            if (fam == XF_PEAKED) v = j == c->t[i] ? 12 + 8 * er_rand_unit() : v;
            if (fam == XF_FLAT) v = 0.5;
            if (fam == XF_WIDE) v = 30 * er_rand_normal();
            if (fam == XF_MASKED && j != c->t[i] && er_rand64() % 3 == 0 && eps == 0) v = -INFINITY;
            c->x[i * C + j] = isinf(v) ? v : er_oracle_round_d(fx, base + v);
        }
    }
}

static void xe_free(xe_case *c) {
    free(c->x);
    free(c->t);
}

/* The correctly rounded fp32 exp and log (MPFR at 200 bits, then the oracle's rounding), and a value k ulps of fp32
 * away from it (never below 0 for exp). */
static float xe_fn(double v, int lg, int k) {
    mpfr_t a;
    mpfr_init2(a, 200);
    mpfr_set_d(a, v, MPFR_RNDN);
    if (lg) mpfr_log(a, a, MPFR_RNDN);
    else mpfr_exp(a, a, MPFR_RNDN);
    float r = (float)er_oracle_round(ER_FP32, a, MPFR_RNDN, ER_OVERFLOW_IEEE);
    mpfr_clear(a);
    for (; k > 0; k--) r = nextafterf(r, INFINITY);
    for (; k < 0 && (lg || r > 0); k++) r = nextafterf(r, -INFINITY);
    return r;
}
static int xe_ulps(int budget) { return er_rand64() % 2 ? (er_rand64() % 2 ? budget : -budget) : (int)er_rand_int(-budget, budget); }
static float xe_exp(float d) { return d == -INFINITY ? 0.0f : xe_fn(d, 0, xe_ulps(2)); }
static float xe_log(float s) { return xe_fn(s, 1, xe_ulps(1)); }

/* Terms summed in fp32 in a random order: sequential, reversed or a random pairing tree. */
static float xe_sum(float *v, int64_t n) {
    int how = (int)(er_rand64() % 3);
    if (how < 2) {
        float s = 0;
        for (int64_t j = 0; j < n; j++) s += v[how ? n - 1 - j : j];
        return s;
    }
    while (n > 1) {
        int64_t k = er_rand_int(0, n - 2);
        v[k] = v[k] + v[k + 1];
        memmove(v + k + 1, v + k + 2, sizeof(float) * (size_t)(n - k - 2));
        n--;
    }
    return n ? v[0] : 0.0f;
}

static float xe_s(er_format f, float v) { return (float)er_oracle_round_d(f, v); }

/* Planted bugs. */
enum { XB_NONE, XB_NO_W, XB_EPS_NOT_C, XB_MEAN_N, XB_IGNORED_GRAD, XB_LSE_NO_MAX, XB_TAIL, XB_COUNT };
static const char *const xb_names[XB_COUNT] = { "none", "gradient not divided by W", "smoothing eps not over C",
                                                "mean over N rows", "ignored rows' gradient kept", "lse without m",
                                                "last class dropped from the sum" };

/* One kernel of form `form` (0 fused, 1 torch's composition, 2 exp(x - lse), 3 fused with the online sum) with bug
 * `bug`: loss (1 or N values) and
 * dlogits (N x C), as doubles of fx. */
static void xe_kernel(const xe_case *c, int form, int bug, double *loss, double *dx) {
    int64_t N = c->N, C = c->C;
    er_format S = c->fx;
    float eps = (float)c->eps, epsC = eps / (float)C, om = 1.0f - eps;
    float Wf = c->reduction == ER_REDUCTION_MEAN ? (float)(bug == XB_MEAN_N ? N : c->W) : 1.0f;
    float Wg = bug == XB_NO_W ? 1.0f : c->reduction == ER_REDUCTION_MEAN ? (float)c->W : 1.0f;
    float *v = malloc(sizeof(float) * (size_t)(C + N) * 2), *e = v + C + N, *rowl = malloc(sizeof(float) * (size_t)N),
          *rows2 = malloc(sizeof(float) * (size_t)N);
    float *lp = malloc(sizeof(float) * (size_t)C);
    if (bug == XB_EPS_NOT_C) epsC = eps;
    for (int64_t i = 0; i < N; i++) {
        const double *x = c->x + i * C;
        int64_t t = c->t[i];
        rowl[i] = rows2[i] = 0;
        if (t == c->ignore) {
            for (int64_t j = 0; j < C; j++) dx[i * C + j] = bug == XB_IGNORED_GRAD ? 1.0 / (double)C / Wg : 0.0;
            continue;
        }
        float m = -INFINITY;
        for (int64_t j = 0; j < C; j++) m = (float)x[j] > m ? (float)x[j] : m;
        int64_t Cs = bug == XB_TAIL && C > 1 ? C - 1 : C;
        for (int64_t j = 0; j < C; j++) e[j] = xe_exp((float)x[j] - m);
        for (int64_t j = 0; j < Cs; j++) v[j] = e[j];
        float s = xe_sum(v, Cs);
        if (form == 3) { /* online (Liger): blocks of B, the running sum rescaled by exp(m_old - m_new) */
            int64_t B = er_rand_int(1, 64);
            float mr = -INFINITY;
            s = 0;
            for (int64_t b0 = 0; b0 < Cs; b0 += B) {
                float bm = -INFINITY;
                for (int64_t j = b0; j < b0 + B && j < Cs; j++) bm = (float)x[j] > bm ? (float)x[j] : bm;
                float mn = bm > mr ? bm : mr;
                s = mr == -INFINITY ? 0.0f : s * xe_exp(mr - mn);
                for (int64_t j = b0; j < b0 + B && j < Cs; j++) s += xe_exp((float)x[j] - mn);
                mr = mn;
            }
        }
        float l = xe_log(s);
        float lse = bug == XB_LSE_NO_MAX ? l : m + l;
        if (form == 1) { /* torch: log_softmax stored in S; nll and smoothing reduced separately */
            for (int64_t j = 0; j < C; j++) lp[j] = xe_s(S, ((float)x[j] - m) - l);
            if (bug == XB_LSE_NO_MAX) lp[t] = xe_s(S, (float)x[t] - l);
            rowl[i] = -lp[t];
            for (int64_t j = 0; j < C; j++) v[j] = lp[j];
            rows2[i] = xe_s(S, -xe_sum(v, C));
            /* gradient: g_j = (1 - eps)-part and smoothing part, each in S; dx = g - exp(lp) sum g */
            float gt = xe_s(S, -xe_s(S, om) / Wg), gs = xe_s(S, -xe_s(S, epsC) / Wg);
            for (int64_t j = 0; j < C; j++) v[j] = xe_s(S, (j == t ? gt : 0.0f) + gs);
            float sg = xe_sum(v, C);
            for (int64_t j = 0; j < C; j++) {
                float g = xe_s(S, (j == t ? gt : 0.0f) + gs);
                dx[i * C + j] = xe_s(S, g - xe_exp(lp[j]) * sg);
            }
            continue;
        }
        /* fused forms: loss = (1 - eps)(lse - x_t) + eps lse - sum (eps / C) x_j, over W */
        float lo = lse - (float)x[t];
        if (eps > 0) {
            for (int64_t j = 0; j < C; j++) v[j] = -epsC * (float)x[j];
            lo = lo * om + (xe_sum(v, C) + eps * lse);
        }
        rowl[i] = c->reduction == ER_REDUCTION_MEAN ? lo / Wf : lo;
        for (int64_t j = 0; j < C; j++) {
            float p = form != 2 ? e[j] / s : xe_exp((float)x[j] - lse);
            float g = (p - epsC) / Wg;
            if (j == t) g = g - om / Wg;
            dx[i * C + j] = xe_s(S, g);
        }
    }
    float *acc = malloc(sizeof(float) * (size_t)(N ? N : 1));
    int64_t k = 0;
    if (c->reduction == ER_REDUCTION_NONE) {
        for (int64_t i = 0; i < N; i++)
            loss[i] = form == 1 && eps > 0 ? xe_s(S, xe_s(S, om * rowl[i]) + xe_s(S, epsC * rows2[i]))
                                           : xe_s(S, rowl[i]);
    } else if (form == 1) {
        for (int64_t i = 0; i < N; i++) if (c->t[i] != c->ignore) acc[k++] = rowl[i];
        float nll = xe_s(S, xe_sum(acc, k) / Wf);
        k = 0;
        for (int64_t i = 0; i < N; i++) if (c->t[i] != c->ignore) acc[k++] = rows2[i];
        float sm = xe_s(S, xe_sum(acc, k) / Wf);
        loss[0] = eps > 0 ? xe_s(S, xe_s(S, om * nll) + xe_s(S, epsC * sm)) : nll; /* torch skips a zero smoothing */
    } else {
        for (int64_t i = 0; i < N; i++) if (c->t[i] != c->ignore) acc[k++] = rowl[i];
        loss[0] = xe_s(S, xe_sum(acc, k));
    }
    free(acc);
    free(v);
    free(lp);
    free(rowl);
    free(rows2);
}

/* Checks loss and dlogits of a kernel (doubles of fx) under `options`: the two reports. */
static void xe_check(const xe_case *c, const double *loss, const double *dx, const char *options, er_report reps[2]) {
    int64_t N = c->N, C = c->C, nl = c->reduction == ER_REDUCTION_NONE ? N : 1;
    uint64_t *X = malloc(8 * (size_t)(N * C)), *D = malloc(8 * (size_t)(N * C)), *L = malloc(8 * (size_t)nl);
    for (int64_t e = 0; e < N * C; e++) {
        er_store(X, c->fx, e, c->x[e]);
        er_store(D, c->fx, e, dx[e]);
    }
    for (int64_t i = 0; i < nl; i++) er_store(L, c->fx, i, loss[i]);
    er_tensor tx, tl, td;
    ck_assert_int_eq(er_tensor_view(&tx, c->fx, 2, (int64_t[]){ N, C }, NULL, X), ER_OK);
    ck_assert_int_eq(er_tensor_view(&td, c->fx, 2, (int64_t[]){ N, C }, NULL, D), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tl, c->fx, 1, (int64_t[]){ nl }, NULL, L), ER_OK);
    er_ref *ref;
    ck_assert_msg(er_cross_entropy(&ref, &tx, c->t, N, c->reduction, c->ignore, c->eps) == ER_OK, "%s",
                  er_last_error());
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", options), ER_OK);
    const er_tensor *outs[2] = { &tl, &td };
    ck_assert_msg(er_covers_outputs(reps, ref, outs, 2, &std) == ER_OK, "%s", er_last_error());
    er_ref_free(ref);
    free(X);
    free(D);
    free(L);
}

static const int64_t xe_lens[] = { 1, 2, 7, 100, 1000, 3000 };

START_TEST(cross_entropy_correct_kernels_covered) {
    er_test_reseed(1301);
    long trials = (long)(80 * er_test_multiplier()), exact = 0, elems = 0, torch_bf16 = 0, torch_bf16_out = 0;
    for (long tr = 0; tr < trials; tr++) {
        int fam = (int)(tr % XF_FAMS), form = (int)(tr / XF_FAMS % 4), red = (int)(er_rand64() % 3);
        int64_t C = xe_lens[er_rand64() % 6], N = 1 + (int64_t)(er_rand64() % (C > 100 ? 4 : 12));
        er_format fx = er_rand64() % 2 ? ER_BF16 : ER_FP32;
        double eps = er_rand64() % 2 ? 0.0 : 0.1;
        xe_case c;
        xe_make(&c, fam, N, C, fx, eps, red);
        int64_t nl = red == ER_REDUCTION_NONE ? N : 1;
        double *loss = malloc(sizeof(double) * (size_t)nl), *dx = malloc(sizeof(double) * (size_t)(N * C));
        xe_kernel(&c, form, XB_NONE, loss, dx);
        er_report reps[2];
        xe_check(&c, loss, dx, form == 3 ? "online=yes" : NULL, reps);
        for (int o = 0; o < 2; o++) {
            ck_assert_msg(er_report_failed(&reps[o]) == 0,
                          "trial %ld: %s, form %d, %s logits, N %lld C %lld eps %g reduction %d: %s not covered (%lld "
                          "of %lld; worst %g, set [%g, %g])",
                          tr, xf_names[fam], form, er_format_name(fx), (long long)N, (long long)C, eps, red,
                          o ? "dlogits" : "loss", (long long)er_report_failed(&reps[o]), (long long)reps[o].n,
                          reps[o].worst.value, reps[o].worst.lo, reps[o].worst.hi);
            exact += er_report_count(&reps[o], ER_CLASS_EXACT);
            elems += reps[o].n;
            er_report_clear(&reps[o]);
        }
        /* products=compute: nothing rounded to the logits' format; the fused forms stay covered, torch's bf16
         * composition (log-probabilities stored in bf16) leaves it */
        xe_check(&c, loss, dx, form == 3 ? "online=yes products=compute" : "products=compute", reps);
        int fails = er_report_failed(&reps[0]) + er_report_failed(&reps[1]) > 0;
        ck_assert_msg(form == 1 || !fails, "trial %ld: form %d not covered under products=compute", tr, form);
        torch_bf16 += form == 1 && fx == ER_BF16;
        torch_bf16_out += form == 1 && fx == ER_BF16 && fails;
        er_report_clear(&reps[0]);
        er_report_clear(&reps[1]);
        free(loss);
        free(dx);
        xe_free(&c);
    }
    printf("cross_entropy: %ld kernels covered (%ld elements, %ld exact); under products=compute, %ld of %ld torch "
           "bf16 kernels outside\n", trials, elems, exact, torch_bf16_out, torch_bf16);
    ck_assert_int_gt(torch_bf16_out, 0);
}
END_TEST

/* The oracle: the exact loss and gradient at 600 bits, rounded to fx. */
static void xe_oracle(const xe_case *c, double *loss, double *dx) {
    int64_t N = c->N, C = c->C;
    mpfr_t s, a, b, tot, lse;
    mpfr_inits2(600, s, a, b, tot, lse, (mpfr_ptr)0);
    mpfr_set_zero(tot, 1);
    for (int64_t i = 0; i < N; i++) {
        const double *x = c->x + i * C;
        int64_t t = c->t[i];
        if (t == c->ignore) {
            for (int64_t j = 0; j < C; j++) dx[i * C + j] = 0;
            if (c->reduction == ER_REDUCTION_NONE) loss[i] = 0;
            continue;
        }
        mpfr_set_zero(s, 1);
        for (int64_t j = 0; j < C; j++) {
            mpfr_set_d(a, x[j], MPFR_RNDN);
            mpfr_exp(a, a, MPFR_RNDN);
            mpfr_add(s, s, a, MPFR_RNDN);
        }
        mpfr_log(lse, s, MPFR_RNDN);
        /* row loss: lse - (1 - eps) x_t - (eps / C) sum x */
        mpfr_set_zero(b, 1);
        for (int64_t j = 0; j < C && c->eps > 0; j++) mpfr_add_d(b, b, x[j], MPFR_RNDN);
        mpfr_mul_d(b, b, c->eps, MPFR_RNDN);
        mpfr_div_si(b, b, (long)C, MPFR_RNDN);
        mpfr_set_d(a, x[t], MPFR_RNDN);
        mpfr_mul_d(a, a, 1.0 - c->eps, MPFR_RNDN);
        mpfr_add(b, b, a, MPFR_RNDN);
        mpfr_sub(a, lse, b, MPFR_RNDN);
        if (c->reduction == ER_REDUCTION_NONE) loss[i] = er_oracle_round(c->fx, a, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
        mpfr_add(tot, tot, a, MPFR_RNDN);
        double W = c->reduction == ER_REDUCTION_MEAN ? (double)c->W : 1.0;
        for (int64_t j = 0; j < C; j++) {
            mpfr_set_d(a, x[j], MPFR_RNDN);
            mpfr_sub(a, a, lse, MPFR_RNDN);
            mpfr_exp(a, a, MPFR_RNDN);
            mpfr_set_d(b, c->eps, MPFR_RNDN);
            mpfr_div_si(b, b, (long)C, MPFR_RNDN);
            mpfr_sub(a, a, b, MPFR_RNDN);
            if (j == t) mpfr_sub_d(a, a, 1.0 - c->eps, MPFR_RNDN);
            mpfr_div_d(a, a, W, MPFR_RNDN);
            dx[i * C + j] = er_oracle_round(c->fx, a, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
        }
    }
    if (c->reduction == ER_REDUCTION_MEAN) mpfr_div_si(tot, tot, (long)c->W, MPFR_RNDN);
    if (c->reduction != ER_REDUCTION_NONE) loss[0] = er_oracle_round(c->fx, tot, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
    mpfr_clears(s, a, b, tot, lse, (mpfr_ptr)0);
}

START_TEST(cross_entropy_exact_results_exact) {
    er_test_reseed(1302);
    long trials = (long)(30 * er_test_multiplier()), elems = 0;
    for (long tr = 0; tr < trials; tr++) {
        int fam = (int)(tr % XF_FAMS), red = (int)(er_rand64() % 3);
        int64_t C = xe_lens[er_rand64() % 5], N = 1 + (int64_t)(er_rand64() % 6);
        er_format fx = er_rand64() % 2 ? ER_BF16 : ER_FP32;
        xe_case c;
        xe_make(&c, fam, N, C, fx, er_rand64() % 2 ? 0.0 : 0.25, red);
        if (c.W == 0 && red == ER_REDUCTION_MEAN) { xe_free(&c); continue; }
        int64_t nl = red == ER_REDUCTION_NONE ? N : 1;
        double *loss = malloc(sizeof(double) * (size_t)nl), *dx = malloc(sizeof(double) * (size_t)(N * C));
        xe_oracle(&c, loss, dx);
        er_report reps[2];
        if (tr % 2) setenv("EXACTREF_FAST", "0", 1); /* MPFR alone: its path, which the double one rarely needs */
        xe_check(&c, loss, dx, NULL, reps);
        unsetenv("EXACTREF_FAST");
        for (int o = 0; o < 2; o++) {
            ck_assert_msg(er_report_count(&reps[o], ER_CLASS_EXACT) == reps[o].n,
                          "trial %ld (%s, %s, N %lld C %lld, reduction %d): %s: %lld of %lld exact; worst %g, exact "
                          "%.17g",
                          tr, xf_names[fam], er_format_name(fx), (long long)N, (long long)C, red,
                          o ? "dlogits" : "loss", (long long)er_report_count(&reps[o], ER_CLASS_EXACT),
                          (long long)reps[o].n, reps[o].worst.value, reps[o].worst.exact);
            elems += reps[o].n;
            er_report_clear(&reps[o]);
        }
        free(loss);
        free(dx);
        xe_free(&c);
    }
    printf("cross_entropy: %ld correctly rounded elements classed exact\n", elems);
}
END_TEST

/* An exact tie: flat rows of 4 bf16 logits with eps = 2^-9 and reduction sum: dlogits' other elements are exactly
 * (1 - 2^-9) / 4, the midpoint of two bf16 values, which the double enclosure cannot decide and MPFR rounds to even. */
/* Gradients within 2^-49 of a midpoint of fp32, where no double enclosure decides the rounding and the row goes to
 * Lemma X4's fixed-point sums of Lemma D8's exps: a row of C logits, one element (the target or not) brought to a
 * midpoint by two knob logits near -12 and -25 (each moved to the float whose exp leaves the sum nearest to what the
 * midpoint needs, the second's step about 2^-55 of the sum). The kernel outputs the correct roundings, and at the
 * element either its correct rounding or the neighbour across the midpoint; the classes equal those of the MPFR path
 * (EXACTREF_FAST=0), the first is exact and the second covered. Counts the rows whose distance lies where Lemma X4
 * decides (2^-61 to 2^-49): most must. */
static void xe_near_sum(const double *x, int64_t C, mpfr_t S) {
    mpfr_t a;
    mpfr_init2(a, 300);
    mpfr_set_zero(S, 1);
    for (int64_t k = 0; k < C; k++) {
        mpfr_set_d(a, x[k], MPFR_RNDN);
        mpfr_exp(a, a, MPFR_RNDN);
        mpfr_add(S, S, a, MPFR_RNDN);
    }
    mpfr_clear(a);
}
START_TEST(cross_entropy_near_midpoints) {
    er_test_reseed(1306);
    long trials = (long)(24 * er_test_multiplier()), inrange = 0;
    mpfr_t S, e, g, mu, d;
    mpfr_inits2(300, S, e, g, mu, d, (mpfr_ptr)0);
    for (long tr = 0; tr < trials; tr++) {
        int64_t C = tr % 3 == 0 ? 64 : 300, j = 5, t = tr % 2 ? 5 : 0;
        double *x = malloc(sizeof(double) * (size_t)C);
        for (int64_t k = 0; k < C; k++) x[k] = (double)(float)(-8.0 * er_rand_unit() - (j == t ? 4.0 : 0.0));
        x[j == t ? j : 0] = 0; /* the maximum; at the target, a probability near 1/2, so that p - 1 keeps its bits */
        x[1] = (double)(float)(-12.0 + er_rand_unit());
        x[2] = (double)(float)(-25.0 + er_rand_unit());
        double m1 = 0, m2 = 0;
        for (int knob = 1; knob <= 3; knob++) {
            xe_near_sum(x, C, S);
            mpfr_set_d(e, x[j], MPFR_RNDN);
            mpfr_exp(e, e, MPFR_RNDN);
            mpfr_div(g, e, S, MPFR_RNDN);
            if (j == t) mpfr_sub_ui(g, g, 1, MPFR_RNDN);
            float f = mpfr_get_flt(g, MPFR_RNDN), fa = nextafterf(f, -INFINITY), fb = nextafterf(f, INFINITY);
            m1 = 0.5 * ((double)fa + f), m2 = 0.5 * ((double)f + fb); /* the midpoints either side */
            mpfr_sub_d(d, g, m1, MPFR_RNDN);
            mpfr_abs(d, d, MPFR_RNDN);
            mpfr_sub_d(mu, g, m2, MPFR_RNDN);
            mpfr_abs(mu, mu, MPFR_RNDN);
            double mid = mpfr_cmp(d, mu) < 0 ? m1 : m2;
            if (knob == 3) {
                mpfr_sub_d(d, g, mid, MPFR_RNDN);
                mpfr_div_d(d, d, mid, MPFR_RNDN);
                double rel = fabs(mpfr_get_d(d, MPFR_RNDN));
                ck_assert_msg(rel < 0x1p-49 && rel > 0, "trial %ld: the element lies 2^%.1f from a midpoint", tr,
                              log2(rel));
                inrange += rel > 0x1p-61;
                m1 = mid;
                break;
            }
            /* the sum the midpoint needs: e_j / mid, or e_t / (mid + 1) at the target; the knob takes the difference */
            mpfr_set_d(mu, mid, MPFR_RNDN);
            if (j == t) mpfr_add_ui(mu, mu, 1, MPFR_RNDN);
            mpfr_div(d, e, mu, MPFR_RNDN);
            mpfr_sub(d, d, S, MPFR_RNDN);
            mpfr_set_d(e, x[knob], MPFR_RNDN);
            mpfr_exp(e, e, MPFR_RNDN);
            mpfr_add(e, e, d, MPFR_RNDN);
            mpfr_log(e, e, MPFR_RNDN);
            x[knob] = (double)mpfr_get_flt(e, MPFR_RNDN);
        }
        xe_case c = { 1, C, 1, -100, ER_REDUCTION_SUM, 0.0, ER_FP32, x, (int64_t[]){ t } };
        double loss, *dx = malloc(sizeof(double) * (size_t)C);
        xe_oracle(&c, &loss, dx);
        double other = dx[j] < m1 ? (double)nextafterf((float)dx[j], INFINITY)
                                  : (double)nextafterf((float)dx[j], -INFINITY);
        for (int wrong = 0; wrong < 2; wrong++) {
            double keep = dx[j];
            if (wrong) dx[j] = other;
            er_report a[2], b[2];
            xe_check(&c, &loss, dx, NULL, a);
            setenv("EXACTREF_FAST", "0", 1);
            xe_check(&c, &loss, dx, NULL, b);
            unsetenv("EXACTREF_FAST");
            ck_assert_msg(memcmp(a[1].classes, b[1].classes, (size_t)C) == 0, "trial %ld (%s): classes differ", tr,
                          wrong ? "the other neighbour" : "correct");
            ck_assert_int_eq(a[1].classes[j], wrong ? ER_CLASS_COVERED : ER_CLASS_EXACT);
            for (int o = 0; o < 2; o++) {
                er_report_clear(&a[o]);
                er_report_clear(&b[o]);
            }
            dx[j] = keep;
        }
        free(dx);
        free(x);
    }
    mpfr_clears(S, e, g, mu, d, (mpfr_ptr)0);
    printf("cross_entropy: %ld rows with an element within 2^-49 of a midpoint, %ld of them beyond 2^-61\n", trials,
           inrange);
    ck_assert_int_ge(inrange, trials * 3 / 4);
}
END_TEST

START_TEST(cross_entropy_exact_tie) {
    xe_case c = { 2, 4, 2, -100, ER_REDUCTION_SUM, 0x1p-9, ER_BF16, (double[]){ 1, 1, 1, 1, -3, -3, -3, -3 },
                  (int64_t[]){ 0, 3 } };
    double loss, dx[8];
    xe_oracle(&c, &loss, dx);
    ck_assert(dx[1] == 0.25); /* the tie rounded to even */
    er_report reps[2];
    xe_check(&c, &loss, dx, NULL, reps);
    ck_assert_int_eq(er_report_count(&reps[1], ER_CLASS_EXACT), 8);
    er_report_clear(&reps[0]);
    er_report_clear(&reps[1]);
    dx[1] = 0.25 - 0x1p-10; /* the other bf16 neighbour of the tie: correct, not exact */
    xe_check(&c, &loss, dx, NULL, reps);
    ck_assert_int_eq(er_report_count(&reps[1], ER_CLASS_EXACT), 7);
    ck_assert_int_eq(er_report_failed(&reps[1]), 0);
    er_report_clear(&reps[0]);
    er_report_clear(&reps[1]);
    /* fp32 outputs (the fast decision's vectorised pass): 1/4 - 2^-25/4 is the midpoint of 1/4 - 2^-26 and 1/4, which
     * no double enclosure decides; the pass leaves it to the exact one */
    xe_case c32 = c;
    c32.eps = 0x1p-25;
    c32.fx = ER_FP32;
    xe_oracle(&c32, &loss, dx);
    ck_assert(dx[1] == 0.25 && dx[2] == 0.25);
    xe_check(&c32, &loss, dx, NULL, reps);
    ck_assert_int_eq(er_report_count(&reps[1], ER_CLASS_EXACT), 8);
    er_report_clear(&reps[0]);
    er_report_clear(&reps[1]);
    dx[2] = 0.25 - 0x1p-26;
    xe_check(&c32, &loss, dx, NULL, reps);
    ck_assert_int_eq(er_report_count(&reps[1], ER_CLASS_EXACT), 7);
    ck_assert_int_eq(er_report_failed(&reps[1]), 0);
    er_report_clear(&reps[0]);
    er_report_clear(&reps[1]);
}
END_TEST

START_TEST(cross_entropy_bugs_caught) {
    er_test_reseed(1303);
    long caught[XB_COUNT] = { 0 }, tried[XB_COUNT] = { 0 };
    long trials = (long)(12 * er_test_multiplier());
    for (long tr = 0; tr < trials; tr++) {
        for (int bug = 1; bug < XB_COUNT; bug++) {
            int red = bug == XB_MEAN_N || bug == XB_NO_W ? ER_REDUCTION_MEAN : (int)(er_rand64() % 3);
            double eps = bug == XB_EPS_NOT_C ? 0.1 : er_rand64() % 2 ? 0.0 : 0.1;
            int64_t C = bug == XB_TAIL ? 100 : xe_lens[2 + er_rand64() % 3], N = 3 + (int64_t)(er_rand64() % 6);
            xe_case c;
            xe_make(&c, XF_NORMAL, N, C, er_rand64() % 2 ? ER_BF16 : ER_FP32, eps, red);
            /* the bug's trigger: W >= 2 for the gradient's divisor, an ignored row beside counted ones for the mean
             * and the ignored rows' gradient */
            for (int64_t i = 0; i < N; i++) if (c.t[i] == c.ignore) c.t[i] = er_rand_int(0, C - 1);
            if (bug == XB_MEAN_N || bug == XB_IGNORED_GRAD) c.t[0] = c.ignore;
            c.W = 0;
            for (int64_t i = 0; i < N; i++) c.W += c.t[i] != c.ignore;
            if (bug == XB_TAIL) /* the last class holds a fair share of the row's mass: its loss moves every element */
                for (int64_t i = 0; i < N; i++) {
                    double mx = -INFINITY;
                    for (int64_t j = 0; j < C; j++) mx = fmax(mx, c.x[i * C + j]);
                    c.x[i * C + C - 1] = er_oracle_round_d(c.fx, mx + 1);
                }
            if (bug == XB_LSE_NO_MAX) for (int64_t e = 0; e < N * C; e++) c.x[e] = er_oracle_round_d(c.fx, c.x[e] + 4);
            int64_t nl = red == ER_REDUCTION_NONE ? N : 1;
            double *loss = malloc(sizeof(double) * (size_t)nl), *dx = malloc(sizeof(double) * (size_t)(N * C));
            xe_kernel(&c, (int)(er_rand64() % 3), bug, loss, dx);
            er_report reps[2];
            xe_check(&c, loss, dx, NULL, reps);
            tried[bug]++;
            caught[bug] += er_report_failed(&reps[0]) + er_report_failed(&reps[1]) > 0;
            er_report_clear(&reps[0]);
            er_report_clear(&reps[1]);
            free(loss);
            free(dx);
            xe_free(&c);
        }
    }
    for (int bug = 1; bug < XB_COUNT; bug++) {
        printf("cross_entropy bug '%s': caught in %ld of %ld\n", xb_names[bug], caught[bug], tried[bug]);
        ck_assert_msg(caught[bug] == tried[bug], "bug '%s' caught in %ld of %ld", xb_names[bug], caught[bug],
                      tried[bug]);
    }
}
END_TEST

/* The fast decision of dlogits (Theorem X3) classes every element as the sets do (EXACTREF_FAST=0 builds every set):
 * correct kernels of every form and planted bugs, fp32 and bf16 outputs. */
START_TEST(cross_entropy_fast_same_classes) {
    er_test_reseed(1304);
    long trials = (long)(40 * er_test_multiplier()), elems = 0, failing = 0;
    for (long tr = 0; tr < trials; tr++) {
        int fam = (int)(tr % XF_FAMS), form = (int)(er_rand64() % 3), red = (int)(er_rand64() % 3);
        int bug = tr % 3 == 2 ? 1 + (int)(er_rand64() % (XB_COUNT - 1)) : XB_NONE;
        int64_t C = xe_lens[1 + er_rand64() % 5], N = 2 + (int64_t)(er_rand64() % 6);
        xe_case c;
        xe_make(&c, fam, N, C, er_rand64() % 2 ? ER_BF16 : ER_FP32, er_rand64() % 2 ? 0.0 : 0.1, red);
        int64_t nl = red == ER_REDUCTION_NONE ? N : 1;
        double *loss = malloc(sizeof(double) * (size_t)nl), *dx = malloc(sizeof(double) * (size_t)(N * C));
        xe_kernel(&c, form, bug, loss, dx);
        er_report a[2], b[2];
        xe_check(&c, loss, dx, NULL, a);
        setenv("EXACTREF_FAST", "0", 1);
        xe_check(&c, loss, dx, NULL, b);
        unsetenv("EXACTREF_FAST");
        for (int o = 0; o < 2; o++) {
            for (int k = 0; k < ER_CLASS_COUNT; k++)
                ck_assert_msg(a[o].counts[k] == b[o].counts[k], "trial %ld output %d class %d: %lld fast, %lld not", tr,
                              o, k, (long long)a[o].counts[k], (long long)b[o].counts[k]);
            ck_assert_int_eq(memcmp(a[o].classes, b[o].classes, (size_t)a[o].n), 0);
            elems += a[o].n;
            failing += er_report_failed(&a[o]);
            er_report_clear(&a[o]);
            er_report_clear(&b[o]);
        }
        free(loss);
        free(dx);
        xe_free(&c);
    }
    printf("cross_entropy: the fast decision classes %ld elements as the sets do (%ld failing)\n", elems, failing);
    ck_assert_int_gt(failing, 0);
}
END_TEST

/* A kernel's dlogits (dx) classed by the fast decision and with every set built (EXACTREF_FAST=0): the same counts
 * and classes (trial tr, `what` for the message); its elements and failing ones added to *elems and *failing. */
static void xe_fast_like_sets(const xe_case *c, const double *loss, const double *dx, long tr, const char *what,
                              long *elems, long *failing) {
    er_report a[2], b[2];
    xe_check(c, loss, dx, NULL, a);
    setenv("EXACTREF_FAST", "0", 1);
    xe_check(c, loss, dx, NULL, b);
    unsetenv("EXACTREF_FAST");
    for (int k = 0; k < ER_CLASS_COUNT; k++)
        ck_assert_msg(a[1].counts[k] == b[1].counts[k], "trial %ld (%s) class %d: %lld fast, %lld not", tr, what, k,
                      (long long)a[1].counts[k], (long long)b[1].counts[k]);
    ck_assert_int_eq(memcmp(a[1].classes, b[1].classes, (size_t)a[1].n), 0);
    *elems += a[1].n;
    *failing += er_report_failed(&a[1]);
    for (int o = 0; o < 2; o++) {
        er_report_clear(&a[o]);
        er_report_clear(&b[o]);
    }
}

/* The fast decision's second witnesses (Theorem X3: the hull of exp(v) for the log-probabilities v of a witness
 * log-sum-exp) class every element as the sets do at their edges: torch's composition with fp32 logits (dlogits from
 * exp of the stored log-probabilities) on long rows, each gradient moved by up to K ulps of fp32 (K 16, 1024 or 16384) or
 * left; some elements end outside their sets and most inside. */
START_TEST(cross_entropy_fast_edges_same_classes) {
    er_test_reseed(1308);
    long trials = (long)(12 * er_test_multiplier()), elems = 0, failing = 0;
    for (long tr = 0; tr < trials; tr++) {
        int fam = tr % 2 ? XF_NORMAL : XF_WIDE, red = (int)(er_rand64() % 3);
        int64_t C = xe_lens[4 + er_rand64() % 2], N = 2 + (int64_t)(er_rand64() % 3);
        xe_case c;
        xe_make(&c, fam, N, C, ER_FP32, 0.0, red);
        int64_t nl = red == ER_REDUCTION_NONE ? N : 1;
        double *loss = malloc(sizeof(double) * (size_t)nl), *dx = malloc(sizeof(double) * (size_t)(N * C));
        xe_kernel(&c, 1, XB_NONE, loss, dx);
        int K = tr % 3 == 0 ? 16 : tr % 3 == 1 ? 1024 : 16384;
        for (int64_t e = 0; e < N * C; e++) {
            int64_t k = er_rand64() % 4 ? er_rand_int(-K, K) : 0;
            uint32_t b;
            float y = (float)dx[e];
            memcpy(&b, &y, 4);
            if ((int64_t)(b & 0x7FFFFFFFu) < K) k = 0; /* not across 0 */
            b = (uint32_t)((int64_t)b + (y < 0 ? -k : k)); /* k ulps of fp32 toward +inf */
            memcpy(&y, &b, 4);
            dx[e] = y;
        }
        char what[40];
        snprintf(what, sizeof what, "K %d", K);
        xe_fast_like_sets(&c, loss, dx, tr, what, &elems, &failing);
        free(loss);
        free(dx);
        xe_free(&c);
    }
    printf("cross_entropy: the fast decision classes %ld moved torch gradients as the sets do (%ld outside)\n", elems,
           failing);
    ck_assert_int_gt(failing, 0);
    ck_assert_int_lt(failing, elems / 2);
}
END_TEST

/* The fast decision with gradients of a format narrower than fp32 (Theorem X3: an output covered where it is the
 * rounding of an fp32 value of the witness's interval): bf16 and fp16 logits and gradients (the fused kernel and
 * torch's composition, each storing its gradient in the logits' format), each gradient moved by 1 to 3 ulps of that
 * format or left; the classes are the sets' (EXACTREF_FAST=0), some elements outside and most inside. */
START_TEST(cross_entropy_fast_narrow_outputs_same_classes) {
    er_test_reseed(1312);
    long trials = (long)(16 * er_test_multiplier()), elems = 0, failing = 0;
    for (long tr = 0; tr < trials; tr++) {
        er_format fx = tr % 2 ? ER_BF16 : ER_FP16;
        int fam = tr % 4 < 2 ? XF_NORMAL : XF_PEAKED, red = (int)(er_rand64() % 3), form = tr % 3 == 2 ? 0 : 1;
        int64_t C = xe_lens[3 + er_rand64() % 3], N = 2 + (int64_t)(er_rand64() % 3);
        xe_case c;
        xe_make(&c, fam, N, C, fx, 0.0, red);
        int64_t nl = red == ER_REDUCTION_NONE ? N : 1;
        double *loss = malloc(sizeof(double) * (size_t)nl), *dx = malloc(sizeof(double) * (size_t)(N * C));
        xe_kernel(&c, form, XB_NONE, loss, dx);
        int p = fx == ER_BF16 ? 8 : 11;
        for (int64_t e = 0; e < N * C; e++) {
            int64_t k = er_rand64() % 3 ? 0 : er_rand_int(-3, 3);
            double v = dx[e], u = ldexp(1.0, (v != 0 ? ilogb(v) : -24) - (p - 1));
            if (k && fabs(v) > 4 * u) dx[e] = er_oracle_round_d(fx, v + (double)k * u);
        }
        xe_fast_like_sets(&c, loss, dx, tr, er_format_name(fx), &elems, &failing);
        free(loss);
        free(dx);
        xe_free(&c);
    }
    printf("cross_entropy: the fast decision classes %ld moved bf16 and fp16 gradients as the sets do (%ld outside)\n",
           elems, failing);
    ck_assert_int_gt(failing, 0);
    ck_assert_int_lt(failing, elems / 2);
}
END_TEST

START_TEST(cross_entropy_refusals) {
    double x[6] = { 1, 2, 3, 4, 5, 6 };
    int64_t t[2] = { 0, 2 }, bad[2] = { 0, 3 };
    er_tensor tx, t3;
    ck_assert_int_eq(er_tensor_view(&tx, ER_FP64, 2, (int64_t[]){ 2, 3 }, NULL, x), ER_OK);
    ck_assert_int_eq(er_tensor_view(&t3, ER_FP64, 3, (int64_t[]){ 1, 2, 3 }, NULL, x), ER_OK);
    er_ref *ref = (er_ref *)&ref;
    ck_assert_int_eq(er_cross_entropy(&ref, &tx, bad, 2, ER_REDUCTION_MEAN, -100, 0), ER_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "target[1] = 3 is outside [0, 3)"));
    ck_assert_int_eq(er_cross_entropy(&ref, &tx, t, 1, ER_REDUCTION_MEAN, -100, 0), ER_ERR_SHAPE);
    ck_assert_int_eq(er_cross_entropy(&ref, &tx, t, 2, 3, -100, 0), ER_ERR_INVALID);
    ck_assert_int_eq(er_cross_entropy(&ref, &tx, t, 2, ER_REDUCTION_SUM, -100, 1.5), ER_ERR_INVALID);
    ck_assert_int_eq(er_cross_entropy(&ref, &tx, t, 2, ER_REDUCTION_SUM, -100, NAN), ER_ERR_INVALID);
    ck_assert_int_eq(er_cross_entropy(&ref, &t3, t, 2, ER_REDUCTION_SUM, -100, 0), ER_ERR_SHAPE);
    ck_assert_int_eq(er_cross_entropy(&ref, &tx, NULL, 2, ER_REDUCTION_SUM, -100, 0), ER_ERR_NULL);
    ck_assert_ptr_eq(ref, (er_ref *)&ref); /* nothing written on a refusal */
    ck_assert_int_eq(er_cross_entropy(&ref, &tx, t, 2, ER_REDUCTION_MEAN, -100, 0), ER_OK);
    er_standard std;
    er_report rep = sentinel_report();
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "compute=fp32"), ER_OK);
    double out[1] = { 0 };
    er_tensor tl;
    ck_assert_int_eq(er_tensor_view(&tl, ER_FP64, 1, (int64_t[]){ 1 }, NULL, out), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &tl, &std), ER_ERR_STANDARD); /* fp32 cannot hold fp64 logits */
    ck_assert(refused_report(&rep, ER_ERR_STANDARD));
    er_report_clear(&rep);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "compute=fp64,online=yes,depth=4"), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &tl, &std), ER_ERR_UNSUPPORTED);
    er_report_clear(&rep);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "compute=fp64,rsqrt_ulps=2"), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &tl, &std), ER_ERR_STANDARD);
    er_report_clear(&rep);
    er_ref_free(ref);
}
END_TEST

/* NaN and +inf rows give NaN everywhere; a masked target gives a +inf loss; an ignored row gives zeros. */
START_TEST(cross_entropy_special_rows) {
    float x[12] = { 1, NAN, 2, 3, 1, 2, 3, 4, -INFINITY, 0, 1, 2 };
    int64_t t[3] = { 0, 0, 2 };
    er_tensor tx;
    ck_assert_int_eq(er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){ 3, 4 }, NULL, x), ER_OK);
    er_ref *ref;
    ck_assert_int_eq(er_cross_entropy(&ref, &tx, t, 3, ER_REDUCTION_NONE, 2, 0), ER_OK);
    /* row 0: NaN; row 1: finite; row 2: target 2 is ignore_index */
    float L[3] = { NAN, 0, 0 }, D[12] = { NAN, NAN, NAN, NAN, 0, 0, 0, 0, 0, 0, 0, 0 };
    er_tensor tl, td;
    ck_assert_int_eq(er_tensor_view(&tl, ER_FP32, 1, (int64_t[]){ 3 }, NULL, L), ER_OK);
    ck_assert_int_eq(er_tensor_view(&td, ER_FP32, 2, (int64_t[]){ 3, 4 }, NULL, D), ER_OK);
    /* row 1's exact results, from the oracle */
    xe_case c = { 1, 4, 1, -100, ER_REDUCTION_NONE, 0.0, ER_FP32, (double[]){ 1, 2, 3, 4 }, (int64_t[]){ 0 } };
    double l1, d1[4];
    xe_oracle(&c, &l1, d1);
    L[1] = (float)l1;
    for (int j = 0; j < 4; j++) D[4 + j] = (float)d1[j];
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    er_report reps[2];
    const er_tensor *outs[2] = { &tl, &td };
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 2, &std), ER_OK);
    ck_assert_int_eq(er_report_failed(&reps[0]), 0);
    ck_assert_int_eq(er_report_failed(&reps[1]), 0);
    ck_assert_int_eq(er_report_count(&reps[1], ER_CLASS_EXACT), 12);
    er_report_clear(&reps[0]);
    er_report_clear(&reps[1]);
    D[8] = 1e-9f; /* an ignored row's gradient must be 0 */
    L[0] = 0;     /* a NaN row's loss must be NaN */
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 2, &std), ER_OK);
    ck_assert_int_eq(er_report_failed(&reps[0]), 1);
    ck_assert_int_eq(er_report_failed(&reps[1]), 1);
    er_report_clear(&reps[0]);
    er_report_clear(&reps[1]);
    er_ref_free(ref);
    /* a masked target: +inf */
    int64_t t2[3] = { 0, 0, 0 };
    x[1] = 5;
    ck_assert_int_eq(er_cross_entropy(&ref, &tx, t2, 3, ER_REDUCTION_SUM, -100, 0), ER_OK);
    float s[1] = { INFINITY };
    ck_assert_int_eq(er_tensor_view(&tl, ER_FP32, 1, (int64_t[]){ 1 }, NULL, s), ER_OK);
    ck_assert_int_eq(er_covers(&reps[0], ref, &tl, &std), ER_OK); /* row 2's target logit is -inf */
    ck_assert_int_eq(er_report_failed(&reps[0]), 0);
    er_report_clear(&reps[0]);
    s[0] = 1e30f;
    ck_assert_int_eq(er_covers(&reps[0], ref, &tl, &std), ER_OK);
    ck_assert_int_eq(er_report_failed(&reps[0]), 1);
    er_report_clear(&reps[0]);
    er_ref_free(ref);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cross_entropy");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, cross_entropy_correct_kernels_covered);
    tcase_add_test(tc, cross_entropy_exact_results_exact);
    tcase_add_test(tc, cross_entropy_near_midpoints);
    tcase_add_test(tc, cross_entropy_exact_tie);
    tcase_add_test(tc, cross_entropy_bugs_caught);
    tcase_add_test(tc, cross_entropy_fast_same_classes);
    tcase_add_test(tc, cross_entropy_fast_edges_same_classes);
    tcase_add_test(tc, cross_entropy_fast_narrow_outputs_same_classes);
    tcase_add_test(tc, cross_entropy_refusals);
    tcase_add_test(tc, cross_entropy_special_rows);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
