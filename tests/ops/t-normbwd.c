#define _POSIX_C_SOURCE 200809L /* setenv */
/* t-normbwd.c: layer_norm's and rmsnorm's backward passes. Correct fp32 kernels written from their sources' formulas
 * (torch's CUDA kernel, Triton's tutorial, torch's decomposition that Inductor compiles, each with its sums in a
 * sequential, reversed, pairwise, random-tree or fused order, and with fused multiply-adds), on rows built to push
 * the sets to their edges (dy in the span of 1 and xhat, so that dx cancels to nothing; a mean far from zero; wide
 * exponents; ties), stored to fp32, fp16 or bf16, are covered in dx, dweight and dbias; the correctly rounded exact
 * results (an MPFR oracle at 4000 bits, written here) are classified exact; planted bugs are caught. */
#include "../common/er_gen.h"

enum { NB_NORMAL, NB_CANCEL, NB_OFFSET, NB_WIDE, NB_TIES, NB_POSITIVE, NB_ALIGNED, NB_SUBNORMAL, NB_FAMS };
static const char *const nb_fams[NB_FAMS] = {"normal", "cancellation", "mean far from 0", "wide exponents", "ties",
                                             "dy positive", "dy of xhat's sign", "subnormal dy"};

/* A case: R rows of n, the inputs as fp32 values (x and dy values of fx), the saved statistics in fp32. */
typedef struct nb_case {
    int64_t R, n;
    int centered, has_w;
    float *x, *dy, *w, *m, *r;
} nb_case;

static void nb_free(nb_case *c) {
    free(c->x); free(c->dy); free(c->w); free(c->m); free(c->r);
}

/* The forward statistics in fp32 (two-pass mean and variance, then 1/sqrt(v + eps)), as a kernel saves them. */
static void nb_stats(nb_case *c) {
    for (int64_t i = 0; i < c->R; i++) {
        const float *x = c->x + i * c->n;
        float s = 0, q = 0;
        for (int64_t j = 0; j < c->n; j++) s += x[j];
        float m = c->centered ? s / (float)c->n : 0.0f;
        for (int64_t j = 0; j < c->n; j++) q += (x[j] - m) * (x[j] - m);
        c->m[i] = m;
        c->r[i] = 1.0f / sqrtf(q / (float)c->n + 1e-5f);
    }
}

static void nb_make(nb_case *c, int fam, int64_t R, int64_t n, int centered, er_format fx) {
    c->R = R;
    c->n = n;
    c->centered = centered;
    c->has_w = (int)(er_rand64() % 4) != 0;
    size_t N = (size_t)(R * n);
    c->x = malloc(sizeof(float) * N);
    c->dy = malloc(sizeof(float) * N);
    c->w = malloc(sizeof(float) * (size_t)n);
    c->m = malloc(sizeof(float) * (size_t)R);
    c->r = malloc(sizeof(float) * (size_t)R);
    for (int64_t j = 0; j < n; j++)
        c->w[j] = c->has_w ? (float)er_oracle_round_d(fx, fam == NB_TIES ? (double)er_rand_int(1, 8) / 4
                                                                         : 1 + 0.3 * er_rand_normal())
                           : 1.0f;
    for (size_t e = 0; e < N; e++) {
        double x = er_rand_normal(), g = er_rand_normal();
        if (fam == NB_OFFSET) x = 1000 + x;
        if (fam == NB_WIDE) { x = ldexp(x, (int)er_rand_int(-10, 10)); g = ldexp(g, (int)er_rand_int(-20, 20)); }
        if (fam == NB_TIES) { x = (double)er_rand_int(-16, 16) / 4; g = (double)er_rand_int(-8, 8) / 8; }
        c->x[e] = (float)er_oracle_round_d(fx, x);
        if (fam == NB_SUBNORMAL) /* deep in fp32's subnormals (a few bits): the products and sums underflow */
            g = ldexp(g, fx == ER_FP32 ? -140 : -128);
        if (fam == NB_POSITIVE) g = 1 + fabs(g); /* every sum g_j and column sum of dy of one sign: the sums' errors
                                                      grow as the partial sums, to the bound's order */
        c->dy[e] = (float)er_oracle_round_d(fx, g);
    }
    nb_stats(c);
    if (fam == NB_ALIGNED) /* every term g_j xhat_j and dy xhat of one sign */
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < n; j++) {
                float *g = &c->dy[i * n + j];
                *g = (c->x[i * n + j] - c->m[i] < 0) == (*g < 0) ? *g : -*g;
            }
    if (fam == NB_CANCEL) /* dy w = a + b xhat: the exact dx is (nearly) zero; the kernels' terms cancel */
        for (int64_t i = 0; i < R; i++) {
            double a = er_rand_normal(), b = er_rand_normal();
            for (int64_t j = 0; j < n; j++) {
                double xh = ((double)c->x[i * n + j] - c->m[i]) * c->r[i];
                c->dy[i * n + j] = (float)er_oracle_round_d(fx, (a + b * xh) / c->w[j]);
            }
        }
}

/* ---- correct kernels in fp32 ---- */

enum { SUM_SEQ, SUM_REV, SUM_PAIR, SUM_TREE, SUM_COUNT };
enum { K_TORCH, K_TRITON, K_DECOMP, K_TRITON_FMA, K_TORCH_FMA, K_COUNT };
static const char *const k_names[K_COUNT] = {"torch CUDA", "Triton tutorial", "decomposition", "Triton with fma",
                                              "torch CUDA with fma"};

static float nb_pair(const float *t, int64_t K) {
    if (K == 0) return 0.0f;
    if (K == 1) return t[0];
    return nb_pair(t, K / 2) + nb_pair(t + K / 2, K - K / 2);
}

/* The K terms t (overwritten) added in `order`. */
static float nb_sum(int order, float *t, int64_t K) {
    float s = 0.0f;
    switch (order) {
    case SUM_SEQ: for (int64_t j = 0; j < K; j++) s = s + t[j]; return s;
    case SUM_REV: for (int64_t j = K - 1; j >= 0; j--) s = s + t[j]; return s;
    case SUM_PAIR: return nb_pair(t, K);
    default:
        for (int64_t k = K; k > 1; k--) { /* a random binary tree */
            int64_t i = (int64_t)(er_rand64() % (uint64_t)(k - 1));
            t[i] = t[i] + t[i + 1];
            memmove(t + i + 1, t + i + 2, sizeof(float) * (size_t)(k - i - 2));
        }
        return K ? t[0] : 0.0f;
    }
}

/* dx of row i by kernel k with sums in `order` (torch: stats_x1 = sum dy w, stats_x2 = sum dy w (x - m) r;
 * Triton: c1 = sum xhat wdy / n, c2 = sum wdy / n; decomposition: a - b - xhat c2, times rstd / n). */
static void nb_dx(const nb_case *c, int k, int order, int64_t i, float *scratch, double *dx) {
    int64_t n = c->n;
    const float *x = c->x + i * n, *dy = c->dy + i * n, *w = c->w;
    float m = c->m[i], r = c->r[i], fn = (float)n;
    for (int64_t j = 0; j < n; j++) scratch[j] = c->centered ? dy[j] * w[j] : 0.0f;
    float b = nb_sum(order, scratch, n);
    for (int64_t j = 0; j < n; j++) {
        float g = dy[j] * w[j], d = x[j] - m;
        scratch[j] = k == K_TORCH || k == K_TORCH_FMA ? g * d * r : (d * r) * g;
    }
    float s2 = nb_sum(order, scratch, n);
    for (int64_t j = 0; j < n; j++) {
        float g = dy[j] * w[j], d = x[j] - m, xh = d * r, v;
        switch (k) {
        case K_TORCH: v = (fn * w[j] * dy[j] - d * r * s2 - b) * ((1.0f / fn) * r); break;
        case K_TORCH_FMA: v = (fmaf(-(d * r), s2, fn * w[j] * dy[j]) - b) * ((1.0f / fn) * r); break;
        case K_TRITON: v = (g - (xh * (s2 / fn) + b / fn)) * r; break;
        case K_TRITON_FMA: v = (g - fmaf(xh, s2 / fn, b / fn)) * r; break;
        default: v = (r / fn) * ((g * fn - b) - xh * s2); break;
        }
        dx[j] = v;
    }
}

/* dweight (bias 0) or dbias (bias 1) column j over the rows, summed in `order`. */
static double nb_col(const nb_case *c, int bias, int order, int64_t j, float *scratch) {
    for (int64_t i = 0; i < c->R; i++) {
        int64_t e = i * c->n + j;
        scratch[i] = bias ? c->dy[e] : c->dy[e] * ((c->x[e] - c->m[i]) * c->r[i]);
    }
    return nb_sum(order, scratch, c->R);
}

/* ---- the exact results (MPFR at 4000 bits) ---- */

static void nb_exact(const nb_case *c, er_format fo, double *dx, double *dw, double *db) {
    int64_t n = c->n, R = c->R;
    mpfr_t B, C, t, v;
    mpfr_inits2(4000, B, C, t, v, (mpfr_ptr)0);
    for (int64_t i = 0; i < R; i++) {
        mpfr_set_zero(B, 1);
        mpfr_set_zero(C, 1);
        for (int64_t j = 0; j < n; j++) {
            int64_t e = i * n + j;
            mpfr_set_flt(t, c->dy[e], MPFR_RNDN);
            mpfr_mul_d(t, t, c->w[j], MPFR_RNDN);
            if (c->centered) mpfr_add(B, B, t, MPFR_RNDN);
            mpfr_set_flt(v, c->x[e], MPFR_RNDN);
            mpfr_sub_d(v, v, c->m[i], MPFR_RNDN);
            mpfr_mul_d(v, v, c->r[i], MPFR_RNDN);
            mpfr_mul(t, t, v, MPFR_RNDN);
            mpfr_add(C, C, t, MPFR_RNDN); /* sum g xhat */
        }
        for (int64_t j = 0; j < n; j++) {
            int64_t e = i * n + j;
            mpfr_set_flt(v, c->x[e], MPFR_RNDN);
            mpfr_sub_d(v, v, c->m[i], MPFR_RNDN);
            mpfr_mul_d(v, v, c->r[i], MPFR_RNDN);
            mpfr_mul(v, v, C, MPFR_RNDN); /* xhat C */
            mpfr_add(v, v, B, MPFR_RNDN);
            mpfr_div_si(v, v, (long)n, MPFR_RNDN);
            mpfr_set_flt(t, c->dy[e], MPFR_RNDN);
            mpfr_mul_d(t, t, c->w[j], MPFR_RNDN);
            mpfr_sub(v, t, v, MPFR_RNDN);
            mpfr_mul_d(v, v, c->r[i], MPFR_RNDN);
            dx[e] = er_oracle_round(fo, v, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
        }
    }
    for (int64_t j = 0; j < n; j++) {
        mpfr_set_zero(B, 1);
        mpfr_set_zero(C, 1);
        for (int64_t i = 0; i < R; i++) {
            int64_t e = i * n + j;
            mpfr_add_d(B, B, c->dy[e], MPFR_RNDN);
            mpfr_set_flt(v, c->x[e], MPFR_RNDN);
            mpfr_sub_d(v, v, c->m[i], MPFR_RNDN);
            mpfr_mul_d(v, v, c->r[i], MPFR_RNDN);
            mpfr_mul_d(v, v, c->dy[e], MPFR_RNDN);
            mpfr_add(C, C, v, MPFR_RNDN);
        }
        dw[j] = er_oracle_round(fo, C, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
        db[j] = er_oracle_round(fo, B, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
    }
    mpfr_clears(B, C, t, v, (mpfr_ptr)0);
}

/* ---- the check ---- */

/* rmsnorm_backward without the saved rstd (the kernel's own, eps 1e-6): nb_check passes rstd NULL. */
static int nb_own;

/* Covers (dx, dweight, dbias) stored to fo against the backward pass of case c: the reports of the outputs. */
static void nb_check(const nb_case *c, const double *dx, const double *dw, const double *db, er_format fo,
                     const char *options, er_report reps[3]) {
    int64_t R = c->R, n = c->n;
    uint64_t *X = malloc(8 * (size_t)(R * n)), *W = malloc(8 * (size_t)n), *Bb = malloc(8 * (size_t)n);
    for (int64_t e = 0; e < R * n; e++) er_store(X, fo, e, dx[e]);
    for (int64_t j = 0; j < n; j++) {
        er_store(W, fo, j, dw[j]);
        er_store(Bb, fo, j, db[j]);
    }
    er_tensor tdy, tx, tm, tr, tw, tdx, tdw, tdb;
    ck_assert_int_eq(er_tensor_view(&tdy, ER_FP32, 2, (int64_t[]){R, n}, NULL, c->dy), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, n}, NULL, c->x), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tm, ER_FP32, 2, (int64_t[]){R, 1}, NULL, c->m), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){R}, NULL, c->r), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){n}, NULL, c->w), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tdx, fo, 2, (int64_t[]){R, n}, NULL, X), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tdw, fo, 1, (int64_t[]){n}, NULL, W), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tdb, fo, 1, (int64_t[]){n}, NULL, Bb), ER_OK);
    er_ref *ref;
    const er_tensor *w = c->has_w ? &tw : NULL;
    if (c->centered) ck_assert_int_eq(er_layer_norm_backward(&ref, &tdy, &tx, 1, &tm, &tr, w), ER_OK);
    else ck_assert_int_eq(er_rmsnorm_backward(&ref, &tdy, &tx, nb_own ? NULL : &tr, w, 1e-6), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", options), ER_OK);
    const er_tensor *outs[3] = {&tdx, &tdw, &tdb};
    int k = er_ref_num_outputs(ref);
    ck_assert_int_eq(k, c->centered ? 3 : 2);
    ck_assert_msg(er_covers_outputs(reps, ref, outs, k, &std) == ER_OK, "%s", er_last_error());
    /* asked for the sets too, the module puts every element (no class decided before its output set): the same
     * reports */
    double *lo[3], *hi[3];
    int64_t sz[3] = {R * n, n, n};
    for (int o = 0; o < k; o++) {
        lo[o] = malloc(sizeof(double) * (size_t)sz[o]);
        hi[o] = malloc(sizeof(double) * (size_t)sz[o]);
    }
    er_report sets[3];
    ck_assert_msg(er_covers_outputs_sets(sets, ref, outs, k, &std, lo, hi, NULL) == ER_OK, "%s", er_last_error());
    for (int o = 0; o < k; o++) {
        er_require_same_report(&reps[o], &sets[o], "dx, dweight, dbias with and without their sets");
        er_report_clear(&sets[o]);
    }
    /* the loops for the baseline ISA (EXACTREF_SIMD=0) and the AVX2 ones (EXACTREF_SIMD=1, where the processor has
     * AVX-512 and the default takes those) give the same reports and the same sets, bit for bit */
    static const char *const levels[2] = {"0", "1"};
    for (int lv = 0; lv < 2; lv++) {
        setenv("EXACTREF_SIMD", levels[lv], 1);
        er_report base[3], bsets[3];
        double *blo[3], *bhi[3];
        for (int o = 0; o < k; o++) {
            blo[o] = malloc(sizeof(double) * (size_t)sz[o]);
            bhi[o] = malloc(sizeof(double) * (size_t)sz[o]);
        }
        ck_assert_msg(er_covers_outputs(base, ref, outs, k, &std) == ER_OK, "%s", er_last_error());
        ck_assert_msg(er_covers_outputs_sets(bsets, ref, outs, k, &std, blo, bhi, NULL) == ER_OK, "%s",
                      er_last_error());
        unsetenv("EXACTREF_SIMD");
        for (int o = 0; o < k; o++) {
            er_require_same_report(&reps[o], &base[o], "dx, dweight, dbias with the default loops and EXACTREF_SIMD's");
            ck_assert_msg(memcmp(lo[o], blo[o], sizeof(double) * (size_t)sz[o]) == 0 &&
                              memcmp(hi[o], bhi[o], sizeof(double) * (size_t)sz[o]) == 0,
                          "output %d: the sets differ with the default loops and EXACTREF_SIMD=%s's", o, levels[lv]);
            er_report_clear(&base[o]);
            er_report_clear(&bsets[o]);
            free(blo[o]);
            free(bhi[o]);
        }
    }
    for (int o = 0; o < k; o++) {
        free(lo[o]);
        free(hi[o]);
    }
    if (k == 2) memset(&reps[2], 0, sizeof reps[2]);
    er_ref_free(ref);
    free(X); free(W); free(Bb);
}

static void nb_clear(er_report reps[3], int k) {
    for (int o = 0; o < k; o++) er_report_clear(&reps[o]);
}

static const int64_t nb_lens[] = {1, 2, 7, 64, 1000, 2049};

START_TEST(norm_backward_correct_kernels_covered) {
    er_test_reseed(1201);
    static const er_format outs[] = {ER_FP32, ER_FP16, ER_BF16};
    long trials = (long)(28 * er_test_multiplier()), exact = 0, elems = 0, kernels = 0;
    for (long tr = 0; tr < trials; tr++) {
        int fam = (int)(tr % NB_FAMS), centered = (int)(tr / NB_FAMS % 2 == 0);
        int64_t n = nb_lens[er_rand64() % (sizeof nb_lens / sizeof nb_lens[0])], R = 1 + (int64_t)(er_rand64() % 5);
        int fo_long = 0;
        if (tr % 3 == 2) { /* long columns: dweight's and dbias's sums */
            n = er_rand64() % 2 ? 7 : 64;
            R = 1000;
            fo_long = 1;
        }
        er_format fo = fo_long ? ER_FP32 : outs[er_rand64() % 3], fx = er_rand64() & 1 ? ER_BF16 : ER_FP32;
        nb_case c;
        nb_make(&c, fam, R, n, centered, fx);
        int64_t L = R > n ? R : n;
        float *scratch = malloc(sizeof(float) * (size_t)L);
        double *dx = malloc(sizeof(double) * (size_t)(R * n)), *dw = malloc(sizeof(double) * (size_t)n),
               *db = malloc(sizeof(double) * (size_t)n);
        /* every form with a random order, and every order of one form */
        int kall = (int)(er_rand64() % K_COUNT), oone[K_COUNT];
        for (int k = 0; k < K_COUNT; k++) oone[k] = (int)(er_rand64() % SUM_COUNT);
        for (int k = 0; k < K_COUNT; k++)
            for (int order = 0; order < SUM_COUNT; order++) {
                if (k != kall && order != oone[k]) continue;
                for (int64_t i = 0; i < R; i++) nb_dx(&c, k, order, i, scratch, dx + i * n);
                for (int64_t j = 0; j < n; j++) {
                    dw[j] = nb_col(&c, 0, order, j, scratch);
                    db[j] = nb_col(&c, 1, order, j, scratch);
                }
                er_report reps[3];
                nb_check(&c, dx, dw, db, fo, NULL, reps);
                for (int o = 0; o < 2 + centered; o++)
                    ER_REQUIRE_PASS(&reps[o],
                                    "trial %ld output %d (%s, %s, n = %lld, R = %lld, kernel %s, sum %d, "
                                    "out %s) " ER_SEED_MSG_FMT ":",
                                    tr, o, centered ? "layer_norm" : "rmsnorm", nb_fams[fam], (long long)n,
                                    (long long)R, k_names[k], order, er_format_name(fo), ER_SEED_ARGS);
                nb_clear(reps, 3);
                kernels++;
            }
        nb_exact(&c, fo, dx, dw, db);
        er_report reps[3];
        nb_check(&c, dx, dw, db, fo, NULL, reps);
        int64_t want[3] = {R * n, n, centered ? n : 0};
        for (int o = 0; o < 2 + centered; o++) {
            ck_assert_msg(reps[o].counts[ER_CLASS_EXACT] == want[o], "trial %ld output %d: %lld of %lld exact", tr, o,
                          (long long)reps[o].counts[ER_CLASS_EXACT], (long long)want[o]);
            exact += (long)reps[o].counts[ER_CLASS_EXACT];
            elems += (long)want[o];
        }
        nb_clear(reps, 3);
        free(scratch); free(dx); free(dw); free(db);
        nb_free(&c);
    }
    printf("t-normbwd: %ld kernels (of %d forms x %d orders) covered over %ld trials; %ld of %ld exact results exact\n",
           kernels, K_COUNT, SUM_COUNT, trials, exact, elems);
}
END_TEST

/* Planted bugs: each must fail the check in every trial where it moves an output. */
enum { BUG_NO_MEAN_TERM, BUG_NO_XHAT_TERM, BUG_RSTD_TWICE, BUG_DW_NO_RSTD, BUG_DB_LAST_ROW, BUG_HALF_SUM, BUG_COUNT };
static const char *const bug_names[BUG_COUNT] = {"sum g dropped", "xhat sum dropped", "rstd applied twice",
                                                 "dweight without rstd", "dbias without its last row",
                                                 "the xhat sum accumulated in fp16"};

START_TEST(norm_backward_bugs_caught) {
    er_test_reseed(1202);
    long trials = (long)(12 * er_test_multiplier()), caught[BUG_COUNT] = {0}, tried[BUG_COUNT] = {0};
    for (long tr = 0; tr < trials; tr++) {
        int64_t n = 256, R = 4;
        nb_case c;
        nb_make(&c, NB_NORMAL, R, n, 1, ER_FP32);
        float *scratch = malloc(sizeof(float) * (size_t)n);
        double *dx = malloc(sizeof(double) * (size_t)(R * n)), *dw = malloc(sizeof(double) * (size_t)n),
               *db = malloc(sizeof(double) * (size_t)n);
        for (int bug = 0; bug < BUG_COUNT; bug++) {
            for (int64_t i = 0; i < R; i++) nb_dx(&c, K_TRITON, SUM_SEQ, i, scratch, dx + i * n);
            for (int64_t j = 0; j < n; j++) {
                dw[j] = nb_col(&c, 0, SUM_SEQ, j, scratch);
                db[j] = nb_col(&c, 1, SUM_SEQ, j, scratch);
            }
            for (int64_t i = 0; i < R; i++) {
                float m = c.m[i], r = c.r[i], b = 0, s2 = 0;
                _Float16 h = 0;
                for (int64_t j = 0; j < n; j++) {
                    int64_t e = i * n + j;
                    b += c.dy[e] * c.w[j];
                    s2 += (c.x[e] - m) * r * c.dy[e] * c.w[j];
                    h = (_Float16)(h + (_Float16)((c.x[e] - m) * r * c.dy[e] * c.w[j]));
                }
                for (int64_t j = 0; j < n && bug <= BUG_RSTD_TWICE; j++) {
                    int64_t e = i * n + j;
                    float g = c.dy[e] * c.w[j], xh = (c.x[e] - m) * r;
                    if (bug == BUG_NO_MEAN_TERM) dx[e] = (g - xh * (s2 / n)) * r;
                    if (bug == BUG_NO_XHAT_TERM) dx[e] = (g - b / n) * r;
                    if (bug == BUG_RSTD_TWICE) dx[e] = (g - (xh * (s2 / n) + b / n)) * r * r;
                }
                for (int64_t j = 0; j < n && bug == BUG_HALF_SUM; j++) {
                    int64_t e = i * n + j;
                    float g = c.dy[e] * c.w[j], xh = (c.x[e] - m) * r;
                    dx[e] = (g - (xh * ((float)h / n) + b / n)) * r;
                }
            }
            for (int64_t j = 0; j < n; j++) {
                if (bug == BUG_DW_NO_RSTD) {
                    float s = 0;
                    for (int64_t i = 0; i < R; i++) s += c.dy[i * n + j] * (c.x[i * n + j] - c.m[i]);
                    dw[j] = s;
                }
                if (bug == BUG_DB_LAST_ROW) db[j] -= c.dy[(R - 1) * n + j];
            }
            er_report reps[3];
            nb_check(&c, dx, dw, db, ER_FP32, NULL, reps);
            int fails = 0;
            for (int o = 0; o < 3; o++) fails += !er_report_all(&reps[o]);
            tried[bug]++;
            caught[bug] += fails > 0;
            nb_clear(reps, 3);
        }
        free(scratch); free(dx); free(dw); free(db);
        nb_free(&c);
    }
    for (int bug = 0; bug < BUG_COUNT; bug++) {
        printf("t-normbwd: bug '%s' caught in %ld of %ld trials\n", bug_names[bug], caught[bug], tried[bug]);
        ck_assert_msg(caught[bug] == tried[bug], "bug '%s' passed in %ld of %ld trials", bug_names[bug],
                      tried[bug] - caught[bug], tried[bug]);
    }
}
END_TEST

/* Gradients in fp32's subnormal range, at 2^-128 (the products underflow) and at 2^-140 (a few bits left: the
 * underflow term of Theorem N1 decides; with it set to 0 correct kernels fail there): every form covered and the exact
 * results exact; at 2^-128 the sum of g dropped is caught (the underflow term does not swallow it). */
START_TEST(norm_backward_subnormal_gradients) {
    er_test_reseed(1205);
    long caught = 0, trials = 8;
    for (long tr = 0; tr < trials; tr++) {
        int64_t R = 4, n = tr % 4 < 2 ? 256 : 33;
        int deep = (int)(tr % 2);
        nb_case c;
        nb_make(&c, NB_NORMAL, R, n, 1, ER_FP32);
        for (int64_t e = 0; e < R * n; e++)
            c.dy[e] = (float)er_oracle_round_d(ER_FP32, ldexp(c.dy[e], deep ? -140 : -128));
        float *scratch = malloc(sizeof(float) * (size_t)n);
        double *dx = malloc(sizeof(double) * (size_t)(R * n)), *dw = malloc(sizeof(double) * (size_t)n),
               *db = malloc(sizeof(double) * (size_t)n);
        er_report reps[3];
        for (int k = 0; k < K_COUNT; k++) {
            for (int64_t i = 0; i < R; i++) nb_dx(&c, k, (int)(tr % SUM_COUNT), i, scratch, dx + i * n);
            for (int64_t j = 0; j < n; j++) {
                dw[j] = nb_col(&c, 0, SUM_SEQ, j, scratch);
                db[j] = nb_col(&c, 1, SUM_SEQ, j, scratch);
            }
            nb_check(&c, dx, dw, db, ER_FP32, NULL, reps);
            for (int o = 0; o < 3; o++)
                ER_REQUIRE_PASS(&reps[o], "subnormal trial %ld, kernel %s, output %d:", tr, k_names[k], o);
            nb_clear(reps, 3);
        }
        for (int64_t i = 0; i < R; i++) { /* the sum of g dropped */
            float m = c.m[i], r = c.r[i], s2 = 0;
            for (int64_t j = 0; j < n; j++) s2 += (c.x[i * n + j] - m) * r * c.dy[i * n + j] * c.w[j];
            for (int64_t j = 0; j < n; j++)
                dx[i * n + j] = (c.dy[i * n + j] * c.w[j] - (c.x[i * n + j] - m) * r * (s2 / (float)n)) * r;
        }
        nb_check(&c, dx, dw, db, ER_FP32, NULL, reps);
        caught += !deep && !er_report_all(&reps[0]);
        nb_clear(reps, 3);
        nb_exact(&c, ER_FP32, dx, dw, db);
        nb_check(&c, dx, dw, db, ER_FP32, NULL, reps);
        for (int o = 0; o < 3; o++)
            ck_assert_msg(reps[o].counts[ER_CLASS_EXACT] == (o ? n : R * n),
                          "subnormal trial %ld output %d: %lld exact", tr, o,
                          (long long)reps[o].counts[ER_CLASS_EXACT]);
        nb_clear(reps, 3);
        free(scratch); free(dx); free(dw); free(db);
        nb_free(&c);
    }
    printf("t-normbwd: subnormal gradients: every form covered; the sum of g dropped caught in %ld of %ld trials at "
           "2^-128\n", caught, trials / 2);
    ck_assert_msg(caught == trials / 2, "the sum of g dropped passed in %ld of %ld subnormal trials",
                  trials / 2 - caught, trials / 2);
}
END_TEST

/* The exact dx and dweight of rmsnorm with the exact rstd 1/sqrt(sum x^2 / n + eps), eps = 1e-6 as fp32 holds it
 * (MPFR at 4000 bits). */
static void nb_exact_own(const nb_case *c, er_format fo, double *dx, double *dw) {
    int64_t n = c->n, R = c->R;
    mpfr_t *r = malloc(sizeof(mpfr_t) * (size_t)R), C, t, v;
    mpfr_inits2(4000, C, t, v, (mpfr_ptr)0);
    for (int64_t i = 0; i < R; i++) {
        mpfr_init2(r[i], 4000);
        mpfr_set_zero(r[i], 1);
        for (int64_t j = 0; j < n; j++) {
            mpfr_set_flt(t, c->x[i * n + j], MPFR_RNDN);
            mpfr_sqr(t, t, MPFR_RNDN);
            mpfr_add(r[i], r[i], t, MPFR_RNDN);
        }
        mpfr_div_si(r[i], r[i], (long)n, MPFR_RNDN);
        mpfr_add_d(r[i], r[i], (double)1e-6f, MPFR_RNDN);
        mpfr_rec_sqrt(r[i], r[i], MPFR_RNDN);
        mpfr_set_zero(C, 1);
        for (int64_t j = 0; j < n; j++) {
            mpfr_set_flt(t, c->dy[i * n + j], MPFR_RNDN);
            mpfr_mul_d(t, t, (double)c->w[j] * c->x[i * n + j], MPFR_RNDN);
            mpfr_add(C, C, t, MPFR_RNDN); /* sum g x */
        }
        for (int64_t j = 0; j < n; j++) { /* r g - r^3 x C / n */
            mpfr_pow_ui(v, r[i], 3, MPFR_RNDN);
            mpfr_mul(v, v, C, MPFR_RNDN);
            mpfr_mul_d(v, v, c->x[i * n + j], MPFR_RNDN);
            mpfr_div_si(v, v, (long)n, MPFR_RNDN);
            mpfr_set_flt(t, c->dy[i * n + j], MPFR_RNDN);
            mpfr_mul_d(t, t, c->w[j], MPFR_RNDN);
            mpfr_mul(t, t, r[i], MPFR_RNDN);
            mpfr_sub(v, t, v, MPFR_RNDN);
            dx[i * n + j] = er_oracle_round(fo, v, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
        }
    }
    for (int64_t j = 0; j < n; j++) {
        mpfr_set_zero(C, 1);
        for (int64_t i = 0; i < R; i++) {
            mpfr_set_flt(t, c->dy[i * n + j], MPFR_RNDN);
            mpfr_mul_d(t, t, c->x[i * n + j], MPFR_RNDN);
            mpfr_mul(t, t, r[i], MPFR_RNDN);
            mpfr_add(C, C, t, MPFR_RNDN);
        }
        dw[j] = er_oracle_round(fo, C, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
    }
    for (int64_t i = 0; i < R; i++) mpfr_clear(r[i]);
    free(r);
    mpfr_clears(C, t, v, (mpfr_ptr)0);
}

/* rmsnorm_backward without a saved rstd: fp32 kernels that compute their own rstd (the sum of squares in four orders,
 * divided by n or multiplied by fl(1/n), plus eps, 1/sqrtf, moved by -2 to 2 ulps: rsqrt's budget) and dx and
 * dweight from it are covered; the exact results (MPFR at 4000 bits, with the exact rstd) are exact; a kernel whose
 * rstd comes from the unbiased variance is caught. */
START_TEST(rmsnorm_backward_own_rstd) {
    er_test_reseed(1206);
    static const int64_t lens[] = {1, 7, 64, 1000};
    long trials = (long)(12 * er_test_multiplier()), caught = 0, tried = 0, exact = 0, elems = 0;
    nb_own = 1;
    for (long tr = 0; tr < trials; tr++) {
        int64_t n = lens[tr % 4], R = n <= 7 ? 200 : 4;
        int fam = (int)(tr / 4 % 3 == 0 ? NB_NORMAL : tr / 4 % 3 == 1 ? NB_WIDE : NB_TIES);
        nb_case c;
        nb_make(&c, fam, R, n, 0, ER_FP32);
        float *scratch = malloc(sizeof(float) * (size_t)(R > n ? R : n));
        double *dx = malloc(sizeof(double) * (size_t)(R * n)), *dw = malloc(sizeof(double) * (size_t)n),
               *db = calloc((size_t)n, sizeof(double));
        for (int v = 0; v < 6; v++) {
            int order = v % SUM_COUNT, unbiased = v == 5 && n >= 64;
            for (int64_t i = 0; i < R; i++) { /* the kernel's own rstd */
                for (int64_t j = 0; j < n; j++) scratch[j] = c.x[i * n + j] * c.x[i * n + j];
                float q = nb_sum(order, scratch, n);
                float ms = unbiased ? q / (float)(n - 1) : v % 2 ? q * (1.0f / (float)n) : q / (float)n;
                float r = 1.0f / sqrtf(ms + 1e-6f);
                for (int k = (int)(er_rand64() % 5) - 2; k != 0; k += k > 0 ? -1 : 1)
                    r = nextafterf(r, k > 0 ? INFINITY : 0); /* rsqrt within 2 ulps */
                c.r[i] = r;
            }
            for (int64_t i = 0; i < R; i++) nb_dx(&c, v % 2 ? K_TORCH : K_TRITON, order, i, scratch, dx + i * n);
            for (int64_t j = 0; j < n; j++) dw[j] = nb_col(&c, 0, order, j, scratch);
            er_report reps[3];
            nb_check(&c, dx, dw, db, ER_FP32, NULL, reps);
            if (unbiased) {
                tried++;
                caught += !er_report_all(&reps[0]);
            } else {
                for (int o = 0; o < 2; o++)
                    ER_REQUIRE_PASS(&reps[o], "own rstd trial %ld variant %d output %d (n = %lld, %s) " ER_SEED_MSG_FMT
                                    ":", tr, v, o, (long long)n, nb_fams[fam], ER_SEED_ARGS);
            }
            nb_clear(reps, 3);
        }
        nb_exact_own(&c, ER_FP32, dx, dw);
        er_report reps[3];
        nb_check(&c, dx, dw, db, ER_FP32, NULL, reps);
        for (int o = 0; o < 2; o++) {
            int64_t want = o ? n : R * n;
            ck_assert_msg(reps[o].counts[ER_CLASS_EXACT] == want, "own rstd trial %ld output %d: %lld of %lld exact",
                          tr, o, (long long)reps[o].counts[ER_CLASS_EXACT], (long long)want);
            exact += (long)want;
            elems += (long)want;
        }
        nb_clear(reps, 3);
        free(scratch); free(dx); free(dw); free(db);
        nb_free(&c);
    }
    nb_own = 0;
    printf("t-normbwd: rmsnorm_backward without rstd: %ld trials covered, %ld of %ld exact results exact; the unbiased "
           "rstd caught in %ld of %ld\n", trials, exact, elems, caught, tried);
    ck_assert_msg(caught == tried && tried > 0, "the unbiased rstd passed in %ld of %ld", tried - caught, tried);
}
END_TEST

/* compute=fp64 (the sums exact with MPFR, not in the accumulator): a kernel computing in double, stored to fp32, is
 * covered and the exact results are exact. */
START_TEST(norm_backward_compute_fp64) {
    er_test_reseed(1204);
    for (int tr = 0; tr < 6; tr++) {
        nb_case c;
        int64_t R = 3, n = tr % 2 ? 300 : 17;
        nb_make(&c, tr % NB_FAMS, R, n, tr < 3, ER_FP32);
        double *dx = malloc(sizeof(double) * (size_t)(R * n)), *dw = malloc(sizeof(double) * (size_t)n),
               *db = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < R; i++) { /* Triton's form in double, sums sequential */
            double b = 0, s2 = 0, m = c.m[i], r = c.r[i];
            for (int64_t j = 0; j < n; j++) {
                int64_t e = i * n + j;
                double g = (double)c.dy[e] * c.w[j];
                b += c.centered ? g : 0;
                s2 += ((c.x[e] - m) * r) * g;
            }
            for (int64_t j = 0; j < n; j++) {
                int64_t e = i * n + j;
                double g = (double)c.dy[e] * c.w[j], xh = ((double)c.x[e] - m) * r;
                dx[e] = (g - (xh * (s2 / (double)n) + b / (double)n)) * r;
            }
        }
        for (int64_t j = 0; j < n; j++) {
            double sw = 0, sb = 0;
            for (int64_t i = 0; i < R; i++) {
                sw += (double)c.dy[i * n + j] * (((double)c.x[i * n + j] - c.m[i]) * c.r[i]);
                sb += c.dy[i * n + j];
            }
            dw[j] = sw;
            db[j] = sb;
        }
        er_report reps[3];
        nb_check(&c, dx, dw, db, ER_FP32, "compute=fp64", reps);
        for (int o = 0; o < 2 + c.centered; o++) ER_REQUIRE_PASS(&reps[o], "compute=fp64 trial %d output %d:", tr, o);
        nb_clear(reps, 3);
        nb_exact(&c, ER_FP32, dx, dw, db);
        nb_check(&c, dx, dw, db, ER_FP32, "compute=fp64", reps);
        for (int o = 0; o < 2 + c.centered; o++)
            ck_assert_msg(reps[o].counts[ER_CLASS_EXACT] == (o ? n : R * n), "compute=fp64 trial %d output %d: %lld "
                          "exact", tr, o, (long long)reps[o].counts[ER_CLASS_EXACT]);
        nb_clear(reps, 3);
        free(dx); free(dw); free(db);
        nb_free(&c);
    }
}
END_TEST

/* A depth-10 pairwise tree over 1000 elements is covered under depth=10; arguments refused with their messages. */
START_TEST(norm_backward_depth_and_refusals) {
    er_test_reseed(1203);
    nb_case c;
    nb_make(&c, NB_NORMAL, 3, 1000, 1, ER_FP32);
    float *scratch = malloc(sizeof(float) * 1000);
    double *dx = malloc(sizeof(double) * 3000), dw[1000], db[1000];
    for (int64_t i = 0; i < 3; i++) nb_dx(&c, K_TRITON, SUM_PAIR, i, scratch, dx + i * 1000);
    for (int64_t j = 0; j < 1000; j++) {
        dw[j] = nb_col(&c, 0, SUM_PAIR, j, scratch);
        db[j] = nb_col(&c, 1, SUM_PAIR, j, scratch);
    }
    er_report reps[3];
    nb_check(&c, dx, dw, db, ER_FP32, "depth=10", reps);
    for (int o = 0; o < 3; o++) ER_REQUIRE_PASS(&reps[o], "depth=10, output %d:", o);
    nb_clear(reps, 3);
    /* refusals */
    er_tensor tdy, tx, tm, tr, tbad;
    ck_assert_int_eq(er_tensor_view(&tdy, ER_FP32, 2, (int64_t[]){3, 1000}, NULL, c.dy), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){3, 1000}, NULL, c.x), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){3}, NULL, c.m), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){3}, NULL, c.r), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tbad, ER_FP32, 1, (int64_t[]){2}, NULL, c.r), ER_OK);
    er_ref *ref = NULL;
    ck_assert_int_eq(er_layer_norm_backward(&ref, &tdy, &tx, 1, &tbad, &tr, NULL), ER_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "mean must hold one value per row"));
    ck_assert_int_eq(er_layer_norm_backward(&ref, &tdy, &tx, 1, NULL, &tr, NULL), ER_ERR_NULL);
    ck_assert_int_eq(er_layer_norm_backward(&ref, &tdy, &tx, 3, &tm, &tr, NULL), ER_ERR_SHAPE);
    ck_assert_int_eq(er_rmsnorm_backward(&ref, &tdy, &tx, &tr, &tbad, 1e-6), ER_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "weight must have the normalised shape"));
    ck_assert_ptr_null(ref);
    ck_assert_int_eq(er_layer_norm_backward(&ref, &tdy, &tx, 1, &tm, &tr, NULL), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "compute=fp16"), ER_OK);
    er_report rep;
    ck_assert_int_eq(er_covers(&rep, ref, &tdy, &std), ER_ERR_STANDARD);
    ck_assert_ptr_nonnull(strstr(er_last_error(), "needs a compute format holding it"));
    er_report_clear(&rep);
    ck_assert_int_eq(er_standard_parse(&std, "sequential", NULL), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &tdy, &std), ER_ERR_UNSUPPORTED);
    er_report_clear(&rep);
    er_ref_free(ref);
    free(scratch); free(dx);
    nb_free(&c);
}
END_TEST

/* A row holding a NaN or an infinity claims nothing (norm-backward.md, Theorem N1): each special as the only one of
 * its row (dy infinite, dy NaN, x infinite where dy is 0, x NaN, dy infinite where the weight is 0), then a weight
 * infinite in a column whose dy is 0 in every row. Every element of such a row allows every value (NaN and both
 * infinities included), a dx of 0 there is covered, not exact, and the finite row's sets stay finite. */
START_TEST(norm_backward_nonfinite_rows) {
    er_test_reseed(1205);
    for (int run = 0; run < 4; run++) {
        int centered = run % 2 == 0, wcol = run >= 2;
        int64_t R = 6, n = 64;
        nb_case c;
        nb_make(&c, NB_NORMAL, R, n, centered, ER_FP32);
        c.has_w = 1;
        if (wcol) {
            c.w[13] = INFINITY;
            for (int64_t i = 0; i < R; i++) c.dy[i * n + 13] = 0.0f;
        } else {
            c.dy[0 * n + 5] = INFINITY;
            c.dy[1 * n + 7] = NAN;
            c.x[2 * n + 3] = -INFINITY;
            c.dy[2 * n + 3] = 0.0f;
            c.x[3 * n + 9] = NAN;
            c.w[11] = 0.0f;
            c.dy[4 * n + 11] = INFINITY;
        }
        int64_t special = wcol ? R : 5; /* rows 0 .. special - 1 hold a special value */
        er_tensor tdy, tx, tm, tr, tw, tdx;
        float *dx = calloc((size_t)(R * n), sizeof(float));
        ck_assert_int_eq(er_tensor_view(&tdy, ER_FP32, 2, (int64_t[]){R, n}, NULL, c.dy), ER_OK);
        ck_assert_int_eq(er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, n}, NULL, c.x), ER_OK);
        ck_assert_int_eq(er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){R}, NULL, c.m), ER_OK);
        ck_assert_int_eq(er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){R}, NULL, c.r), ER_OK);
        ck_assert_int_eq(er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){n}, NULL, c.w), ER_OK);
        ck_assert_int_eq(er_tensor_view(&tdx, ER_FP32, 2, (int64_t[]){R, n}, NULL, dx), ER_OK);
        er_ref *ref;
        if (centered) ck_assert_int_eq(er_layer_norm_backward(&ref, &tdy, &tx, 1, &tm, &tr, &tw), ER_OK);
        else ck_assert_int_eq(er_rmsnorm_backward(&ref, &tdy, &tx, &tr, &tw, 1e-6), ER_OK);
        er_standard std;
        er_standard_init(&std);
        double *lo = malloc(sizeof(double) * (size_t)(R * n)), *hi = malloc(sizeof(double) * (size_t)(R * n));
        uint8_t *fl = malloc((size_t)(R * n));
        ck_assert_msg(er_ref_enclosure(ref, 0, &std, ER_FP32, lo, hi, fl) == ER_OK, "%s", er_last_error());
        const uint8_t all = ER_ENCLOSURE_NAN | ER_ENCLOSURE_PINF | ER_ENCLOSURE_NINF;
        for (int64_t e = 0; e < R * n; e++) {
            int sp = e / n < special;
            ck_assert_msg(sp ? (fl[e] & all) == all : fl[e] == 0 && isfinite(lo[e]) && isfinite(hi[e]),
                          "run %d, %s, dx element %lld (row %lld): flags %d, set [%g, %g]", run,
                          centered ? "layer_norm" : "rmsnorm", (long long)e, (long long)(e / n), fl[e], lo[e], hi[e]);
        }
        er_report rep;
        ck_assert_msg(er_covers(&rep, ref, &tdx, &std) == ER_OK, "%s", er_last_error());
        ck_assert_msg(rep.counts[ER_CLASS_COVERED] >= special * n && rep.counts[ER_CLASS_EXACT] == 0,
                      "run %d: %lld covered, %lld exact of dx = 0", run, (long long)rep.counts[ER_CLASS_COVERED],
                      (long long)rep.counts[ER_CLASS_EXACT]);
        er_report_clear(&rep);
        er_ref_free(ref);
        free(lo); free(hi); free(fl); free(dx);
        nb_free(&c);
    }
}
END_TEST

/* The column sums' compensated enclosures (norm-backward.md, Lemma N6 over the chunks): columns whose sums cancel
 * down to just above an fp32 midpoint, 1 + 2^-24, by less than their plain sums in double can see. dweight's column 0:
 * a term dy r x of 72 bits whose rounding error (about 2^-36) is the whole margin, its main part cancelled by three
 * rows, then 1 + 2^-24 - 2^-37; dbias's column 1: 2^40 + 1 + (2^-24 + 2^-47) - 2^40, where the small term vanishes
 * from the double sum. Both correct roundings are 1 + 2^-23, and both outputs must be classed exact. */
START_TEST(norm_backward_column_sums_compensated) {
    enum { R = 5, N = 2 };
    const float dy0 = 0x1.9c3e6p+10f, r0 = 0x1.e6a16ap-1f, x0 = 0x1.164d2ep+10f, h1 = 0x1.a9f346p+20f,
                h2 = 0x1.8ec558p-7f;
    float dy[R * N] = {dy0, 0x1p40f, -h1, 1.0f, -h2, 0x1p-24f + 0x1p-47f, 1.0f, -0x1p40f, 0x1p-24f - 0x1p-37f, 0.0f};
    float x[R * N] = {x0, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f}, m[R] = {0}, r[R] = {r0, 1, 1, 1, 1};
    float dx[R * N] = {0}, dw[N] = {1.0f + 0x1p-23f, 0.0f}, db[N] = {0.0f, 1.0f + 0x1p-23f};
    er_tensor tdy, tx, tm, tr, tdx, tdw, tdb;
    ck_assert_int_eq(er_tensor_view(&tdy, ER_FP32, 2, (int64_t[]){R, N}, NULL, dy), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, N}, NULL, x), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){R}, NULL, m), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){R}, NULL, r), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tdx, ER_FP32, 2, (int64_t[]){R, N}, NULL, dx), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tdw, ER_FP32, 1, (int64_t[]){N}, NULL, dw), ER_OK);
    ck_assert_int_eq(er_tensor_view(&tdb, ER_FP32, 1, (int64_t[]){N}, NULL, db), ER_OK);
    er_ref *ref;
    ck_assert_int_eq(er_layer_norm_backward(&ref, &tdy, &tx, 1, &tm, &tr, NULL), ER_OK);
    er_standard std;
    er_standard_init(&std);
    const er_tensor *outs[3] = {&tdx, &tdw, &tdb};
    er_report reps[3];
    ck_assert_msg(er_covers_outputs(reps, ref, outs, 3, &std) == ER_OK, "%s", er_last_error());
    ck_assert_msg(reps[1].counts[ER_CLASS_EXACT] == 1 && reps[2].counts[ER_CLASS_EXACT] == 1,
                  "dweight[0] and dbias[1] = 1 + 2^-23: %lld and %lld exact", (long long)reps[1].counts[ER_CLASS_EXACT],
                  (long long)reps[2].counts[ER_CLASS_EXACT]);
    nb_clear(reps, 3);
    er_ref_free(ref);
}
END_TEST

int main(void) {
    Suite *s = suite_create("normbwd");
    TCase *tc = tcase_create("norm_backward");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, norm_backward_correct_kernels_covered);
    tcase_add_test(tc, norm_backward_bugs_caught);
    tcase_add_test(tc, norm_backward_depth_and_refusals);
    tcase_add_test(tc, norm_backward_compute_fp64);
    tcase_add_test(tc, norm_backward_subnormal_gradients);
    tcase_add_test(tc, rmsnorm_backward_own_rstd);
    tcase_add_test(tc, norm_backward_nonfinite_rows);
    tcase_add_test(tc, norm_backward_column_sums_compensated);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
