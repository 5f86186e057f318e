/* bench_softmax.c: er_softmax + er_covers (fp32 inputs and output, default standard) next to a float64
 * softmax of the same rows computed in the same run (max, exp, sum, divide in double), every baseline's rows on as
 * many threads as exactref uses (EXACTREF_THREADS, else every core), one untimed round then three alternating; and er_layernorm +
 * er_covers_outputs (y, mean, rstd) next to a float64 layernorm of the same rows, and rows through torch's Welford tree
 * checked at its depth and combine depth next to the default standard.
 * Also er_rmsnorm (fp32 weights) + er_covers next to a float64 rmsnorm. Prints `name: X s vs baseline Y s = Rx`.
 * And er_layer_norm_backward + er_covers_outputs next to a float64 layer_norm backward (run_layernorm_backward).
 * And er_cross_entropy + er_covers_outputs next to a float64 cross-entropy forward and backward (run_cross_entropy).
 * And er_softmax_backward / er_log_softmax_backward + er_covers_outputs next to a float64 backward (run_softmax_backward).
 * Usage: bench_softmax [softmax|layernorm|rmsnorm|layer_norm_backward|softmax_backward|log_softmax_backward] [N ...]
 * (default the first four, 1024 and 4096), N x N inputs; bench_softmax cross_entropy [ROWS C] (default 256 x 32000). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <exactref/exactref.h>
#include "bench_util.h"

static uint64_t rng = 7;
static double normalish(void) {
    double s = 0;
    for (int i = 0; i < 4; i++) { rng = rng * 6364136223846793005u + 1442695040888963407u; s += (double)(rng >> 11) * 0x1p-53; }
    return (s - 2.0) * 1.7;
}

/* er_covers_outputs of ref's outputs under a and under b, alternating, three rounds: the median times (*ta, *tb) and
 * whether every output passed in the last round (*pa, *pb). */
static void time_two_standards(er_ref *ref, const er_tensor **outs, int nout, const er_standard *a, const er_standard *b,
                               double *ta, double *tb, int *pa, int *pb) {
    double t[2][3];
    er_report reps[3];
    for (int rnd = 0; rnd < 3; rnd++)
        for (int k = 0; k < 2; k++) {
            double t0 = now();
            if (er_covers_outputs(reps, ref, outs, nout, k ? b : a) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
            t[k][rnd] = now() - t0;
            int ok = 1;
            for (int o = 0; o < nout; o++) { ok &= er_report_all(&reps[o]); er_report_clear(&reps[o]); }
            *(k ? pb : pa) = ok;
        }
    *ta = median3(t[0]);
    *tb = median3(t[1]);
}

/* A check next to its float64 baseline: one untimed round of each, then three alternating rounds of each, medians.
 * The baseline's rows run on exactref's threads (bench_threads: EXACTREF_THREADS, else every core), as exactref's do.
 * Prints `name: X s vs baseline Y s = Rx (baseline: what, on N threads as exactref; ...)` with the verdict of the
 * last round. */
typedef struct check_bench {
    bench_rows_fn baseline; /* one share of the baseline's rows (thread t of bench_threads()) */
    int64_t rows;
    void *ctx;
    er_status (*make)(void *ctx, er_ref **ref);
    const er_tensor *const *outs;
    int nout;
} check_bench;

/* The forward baselines' context: x (n x n), the weight, the float64 outputs and statistics, the views. */
typedef struct rows_ctx {
    int n;
    const float *x, *w;
    double *d, *dm, *dr;
    const er_tensor *tx, *tw;
} rows_ctx;

/* ... with finish(ctx) after the baseline's rows, inside its time (the threads' partials added; NULL: none). */
static void time_check_fin(const check_bench *b, const char *name, const char *what, void (*finish)(void *ctx)) {
    er_standard std;
    er_standard_init(&std);
    double te[3], tb[3];
    int ok = 1, nt = bench_threads();
    for (int rnd = -1; rnd < 3; rnd++) { /* round -1: warm, untimed */
        double t0 = now();
        bench_rows(nt, b->rows, b->baseline, b->ctx);
        if (finish) finish(b->ctx);
        double t1 = now();
        er_ref *ref;
        er_report reps[3];
        if (b->make(b->ctx, &ref) != ER_OK || er_covers_outputs(reps, ref, b->outs, b->nout, &std) != ER_OK) {
            fprintf(stderr, "%s\n", er_last_error());
            exit(1);
        }
        double t2 = now();
        ok = 1;
        for (int o = 0; o < b->nout; o++) { ok &= er_report_all(&reps[o]); er_report_clear(&reps[o]); }
        er_ref_free(ref);
        if (rnd >= 0) { tb[rnd] = t1 - t0; te[rnd] = t2 - t1; }
    }
    const char *th = getenv("EXACTREF_THREADS");
    printf("%s: %.4f s vs baseline %.4f s = %.1fx  (baseline: %s, on %d thread%s as exactref (%s); medians of 3 "
           "alternating rounds after a warm one; verdict %s)\n", name, median3(te), median3(tb), median3(te) / median3(tb),
           what, nt, nt > 1 ? "s" : "", th ? "EXACTREF_THREADS" : "every core", ok ? "pass" : "FAIL");
}
static void time_check(const check_bench *b, const char *name, const char *what) { time_check_fin(b, name, what, NULL); }

/* The forward baselines, a share of rows each: float64 softmax, layernorm, rmsnorm. */
static void softmax_rows(void *v, int64_t r0, int64_t r1, int t) {
    const rows_ctx *c = v;
    int n = c->n;
    (void)t;
    for (int64_t r = r0; r < r1; r++) {
        double m = -INFINITY, s = 0;
        const float *xr = c->x + (size_t)r * n;
        double *dr = c->d + (size_t)r * n;
        for (int j = 0; j < n; j++) m = fmax(m, xr[j]);
        for (int j = 0; j < n; j++) s += (dr[j] = exp(xr[j] - m));
        for (int j = 0; j < n; j++) dr[j] /= s;
    }
}
static er_status softmax_make(void *v, er_ref **ref) { return er_softmax(ref, ((rows_ctx *)v)->tx, 1); }
static void layernorm_rows(void *v, int64_t r0, int64_t r1, int t) {
    const rows_ctx *c = v;
    int n = c->n;
    (void)t;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = c->x + (size_t)r * n;
        double s = 0, q = 0;
        for (int j = 0; j < n; j++) s += xr[j];
        double m = s / n;
        for (int j = 0; j < n; j++) q += (xr[j] - m) * (xr[j] - m);
        double rs = 1.0 / sqrt(q / n + 1e-5);
        for (int j = 0; j < n; j++) c->d[(size_t)r * n + j] = (xr[j] - m) * rs;
        c->dm[r] = m;
        c->dr[r] = rs;
    }
}
static er_status layernorm_make(void *v, er_ref **ref) {
    return er_layernorm(ref, ((rows_ctx *)v)->tx, 1, NULL, NULL, 1e-5);
}
static void rmsnorm_rows(void *v, int64_t r0, int64_t r1, int t) {
    const rows_ctx *c = v;
    int n = c->n;
    (void)t;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = c->x + (size_t)r * n;
        double q = 0;
        for (int j = 0; j < n; j++) q += (double)xr[j] * xr[j];
        double rs = 1.0 / sqrt(q / n + 1e-6);
        for (int j = 0; j < n; j++) c->d[(size_t)r * n + j] = xr[j] * rs * c->w[j];
    }
}
static er_status rmsnorm_make(void *v, er_ref **ref) {
    rows_ctx *c = v;
    return er_rmsnorm(ref, c->tx, c->tw, 1e-6);
}

static void run(int n) {
    float *x = malloc(sizeof(float) * (size_t)n * n), *y = malloc(sizeof(float) * (size_t)n * n);
    double *d = malloc(sizeof(double) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) x[i] = (float)(3 * normalish());
    /* the kernel under test: float32 softmax */
    for (int r = 0; r < n; r++) {
        float m = -INFINITY, s = 0;
        for (int j = 0; j < n; j++) m = fmaxf(m, x[(size_t)r * n + j]);
        for (int j = 0; j < n; j++) s += expf(x[(size_t)r * n + j] - m);
        for (int j = 0; j < n; j++) y[(size_t)r * n + j] = expf(x[(size_t)r * n + j] - m) / s;
    }
    er_tensor tx, ty;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){n, n}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){n, n}, NULL, y);
    const er_tensor *outs[1] = {&ty};
    rows_ctx c = {n, x, NULL, d, NULL, NULL, &tx, NULL};
    check_bench bb = {softmax_rows, n, &c, softmax_make, outs, 1};
    char name[64];
    snprintf(name, sizeof name, "softmax_covers_%dx%d", n, n);
    time_check(&bb, name, "float64 softmax of the same rows");
    er_ref *ref;
    er_standard std;
    er_standard_init(&std);
    if (er_softmax(&ref, &tx, 1) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
    /* depth=: the same rows summed by a balanced tree (depth ceil(log2 n)), checked under depth= that depth and under
     * any order, alternating, medians of 3 */
    float *v = malloc(sizeof(float) * (size_t)n);
    int lg = 0;
    while ((1 << lg) < n) lg++;
    for (int r = 0; r < n; r++) {
        float m = -INFINITY;
        for (int j = 0; j < n; j++) m = fmaxf(m, x[(size_t)r * n + j]);
        for (int j = 0; j < n; j++) v[j] = expf(x[(size_t)r * n + j] - m);
        for (int w = n; w > 1;) { /* neighbours in pairs, the odd one carried: depth ceil(log2 n) */
            int h = 0;
            for (int j = 0; j + 1 < w; j += 2) v[h++] = v[j] + v[j + 1];
            if (w & 1) v[h++] = v[w - 1];
            w = h;
        }
        for (int j = 0; j < n; j++) y[(size_t)r * n + j] = expf(x[(size_t)r * n + j] - m) / v[0];
    }
    free(v);
    char opt[32];
    snprintf(opt, sizeof opt, "depth=%d", lg);
    er_standard sd;
    if (er_standard_parse(&sd, "any_order", opt) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
    double md, ma;
    int pass_d, pass_a;
    time_two_standards(ref, outs, 1, &sd, &std, &md, &ma, &pass_d, &pass_a);
    printf("softmax_covers_depth%d_%dx%d: %.3f s vs baseline %.3f s = %.2fx  (baseline: the same covers under any order; rows "
           "summed by a balanced tree; medians of 3 alternating rounds; verdicts %s, %s)\n", lg, n, n, md, ma, md / ma,
           pass_d ? "pass" : "FAIL", pass_a ? "pass" : "FAIL");
    er_ref_free(ref);
    free(x); free(y); free(d);
}

static void run_layernorm(int n) {
    size_t nn = (size_t)n * n;
    float *x = malloc(sizeof(float) * nn), *y = malloc(sizeof(float) * nn), *mean = malloc(sizeof(float) * (size_t)n),
          *rstd = malloc(sizeof(float) * (size_t)n);
    double *d = malloc(sizeof(double) * nn), *dm = malloc(sizeof(double) * (size_t)n), *dr = malloc(sizeof(double) * (size_t)n);
    for (size_t i = 0; i < nn; i++) x[i] = (float)(normalish() + 1.0);
    /* the kernel under test: float32 two-pass layernorm */
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * n;
        float s = 0, q = 0;
        for (int j = 0; j < n; j++) s += xr[j];
        float m = s / (float)n;
        for (int j = 0; j < n; j++) q += (xr[j] - m) * (xr[j] - m);
        float rs = 1.0f / sqrtf(q / (float)n + 1e-5f);
        for (int j = 0; j < n; j++) y[(size_t)r * n + j] = (xr[j] - m) * rs;
        mean[r] = m;
        rstd[r] = rs;
    }
    er_tensor tx, ty, tm, tr;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){n, n}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){n, n}, NULL, y);
    er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){n}, NULL, mean);
    er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){n}, NULL, rstd);
    const er_tensor *outs[3] = {&ty, &tm, &tr};
    rows_ctx c = {n, x, NULL, d, dm, dr, &tx, NULL};
    check_bench bb = {layernorm_rows, n, &c, layernorm_make, outs, 3};
    char name[64];
    snprintf(name, sizeof name, "layernorm_covers_%dx%d", n, n);
    time_check(&bb, name, "float64 layernorm of the same rows");
    er_ref *ref;
    er_standard std;
    er_standard_init(&std);
    if (er_layernorm(&ref, &tx, 1, NULL, NULL, 1e-5) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
    /* depth=: the same rows through torch's Welford tree (n a multiple of 4), checked under variance=either at torch's
     * depth and combine depth and under the default, alternating, medians of 3 */
    if (n % 4 == 0) {
        for (int r = 0; r < n; r++) {
            const float *xr = x + (size_t)r * n;
            float m, m2;
            torch_welford(xr, n, &m, &m2);
            float rs = 1.0f / sqrtf(m2 / (float)n + 1e-5f);
            for (int j = 0; j < n; j++) y[(size_t)r * n + j] = (xr[j] - m) * rs;
            mean[r] = m;
            rstd[r] = rs;
        }
        int64_t D, C;
        er_depth_torch_layer_norm(&D, n);
        er_combine_depth_torch_layer_norm(&C, n);
        char opt[96];
        snprintf(opt, sizeof opt, "variance=either depth=%lld combine_depth=%lld", (long long)D, (long long)C);
        er_standard sd;
        if (er_standard_parse(&sd, "any_order", opt) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
        double md, ma;
        int pass_d, pass_a;
        time_two_standards(ref, outs, 3, &sd, &std, &md, &ma, &pass_d, &pass_a);
        printf("layernorm_covers_torchdepth%lld_%dx%d: %.3f s vs baseline %.3f s = %.2fx  (baseline: the same covers under the "
               "default standard; rows through torch's Welford tree, checked under %s; medians of 3 alternating rounds; "
               "verdicts %s, %s)\n", (long long)D, n, n, md, ma, md / ma, opt, pass_d ? "pass" : "FAIL", pass_a ? "pass" : "FAIL");
    }
    er_ref_free(ref);
    free(x); free(y); free(mean); free(rstd); free(d); free(dm); free(dr);
}

static void run_rmsnorm(int n) {
    size_t nn = (size_t)n * n;
    float *x = malloc(sizeof(float) * nn), *y = malloc(sizeof(float) * nn), *w = malloc(sizeof(float) * (size_t)n);
    double *d = malloc(sizeof(double) * nn);
    for (size_t i = 0; i < nn; i++) x[i] = (float)normalish();
    for (int j = 0; j < n; j++) w[j] = (float)(1.0 + normalish() / 8);
    /* the kernel under test: float32 rmsnorm */
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * n;
        float q = 0;
        for (int j = 0; j < n; j++) q += xr[j] * xr[j];
        float rs = 1.0f / sqrtf(q / (float)n + 1e-6f);
        for (int j = 0; j < n; j++) y[(size_t)r * n + j] = xr[j] * rs * w[j];
    }
    er_tensor tx, ty, tw;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){n, n}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){n, n}, NULL, y);
    er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){n}, NULL, w);
    const er_tensor *outs[1] = {&ty};
    rows_ctx c = {n, x, w, d, NULL, NULL, &tx, &tw};
    check_bench bb = {rmsnorm_rows, n, &c, rmsnorm_make, outs, 1};
    char name[64];
    snprintf(name, sizeof name, "rmsnorm_covers_%dx%d", n, n);
    time_check(&bb, name, "float64 rmsnorm of the same rows");
    free(x); free(y); free(w); free(d);
}

/* er_layer_norm_backward + er_covers_outputs (dx, dweight, dbias) of an fp32 kernel's gradients next to a float64
 * layer_norm backward of the same rows (dx, dweight, dbias from the saved mean and rstd): one untimed pass of each
 * first, then three alternating rounds, medians (time_check: the baseline's rows on exactref's threads, each with its
 * own column partials, added after). */
static void lnb_baseline(int n, int64_t r0, int64_t r1, const float *x, const float *dy, const float *w,
                         const float *mean, const float *rstd, double *dx, double *dw, double *db) {
    for (int j = 0; j < n; j++) dw[j] = db[j] = 0;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + (size_t)r * n, *gr = dy + (size_t)r * n;
        double b = 0, c = 0, m = mean[r], rs = rstd[r];
        for (int j = 0; j < n; j++) {
            double g = (double)gr[j] * w[j], xh = (xr[j] - m) * rs;
            b += g;
            c += g * xh;
            dw[j] += gr[j] * xh;
            db[j] += gr[j];
        }
        b /= n;
        c /= n;
        for (int j = 0; j < n; j++) dx[(size_t)r * n + j] = rs * ((double)gr[j] * w[j] - b - (xr[j] - m) * rs * c);
    }
}

typedef struct lnb_ctx {
    int n;
    const float *x, *dy, *w, *mean, *rstd;
    double *dx, *dw, *db; /* dw and db: each thread's column partials, 64 x n */
    const er_tensor *tdy, *tx, *tm, *tr, *tw;
} lnb_ctx;
static void lnb_rows(void *v, int64_t r0, int64_t r1, int t) {
    lnb_ctx *c = v;
    lnb_baseline(c->n, r0, r1, c->x, c->dy, c->w, c->mean, c->rstd, c->dx, c->dw + (size_t)t * c->n,
                 c->db + (size_t)t * c->n);
}
static void lnb_finish(void *v) { /* the threads' column partials added into the first's */
    lnb_ctx *c = v;
    for (int t = 1; t < bench_threads(); t++)
        for (int j = 0; j < c->n; j++) {
            c->dw[j] += c->dw[(size_t)t * c->n + j];
            c->db[j] += c->db[(size_t)t * c->n + j];
        }
}
static er_status lnb_make(void *v, er_ref **ref) {
    lnb_ctx *c = v;
    return er_layer_norm_backward(ref, c->tdy, c->tx, 1, c->tm, c->tr, c->tw);
}

static void run_layernorm_backward(int n) {
    size_t nn = (size_t)n * n;
    float *x = calloc(nn, sizeof(float)), *dy = calloc(nn, sizeof(float)), *w = calloc((size_t)n, sizeof(float));
    float *mean = calloc((size_t)n, sizeof(float)), *rstd = calloc((size_t)n, sizeof(float));
    float *dxf = malloc(sizeof(float) * nn), *dwf = malloc(sizeof(float) * (size_t)n),
          *dbf = malloc(sizeof(float) * (size_t)n);
    double *dx = malloc(sizeof(double) * nn), *dw = malloc(sizeof(double) * 64 * (size_t)n),
           *db = malloc(sizeof(double) * 64 * (size_t)n);
    for (size_t i = 0; i < nn; i++) { x[i] = (float)normalish(); dy[i] = (float)normalish(); }
    for (int j = 0; j < n; j++) w[j] = (float)(1.0 + normalish() / 8);
    for (int r = 0; r < n; r++) { /* the forward's statistics in fp32, two-pass */
        const float *xr = x + (size_t)r * n;
        float s = 0, q = 0;
        for (int j = 0; j < n; j++) s += xr[j];
        mean[r] = s / (float)n;
        for (int j = 0; j < n; j++) q += (xr[j] - mean[r]) * (xr[j] - mean[r]);
        rstd[r] = 1.0f / sqrtf(q / (float)n + 1e-5f);
    }
    lnb_baseline(n, 0, n, x, dy, w, mean, rstd, dx, dw, db); /* the kernel under test: the same in fp64, to fp32 */
    for (size_t i = 0; i < nn; i++) dxf[i] = (float)dx[i];
    for (int j = 0; j < n; j++) { dwf[j] = (float)dw[j]; dbf[j] = (float)db[j]; }
    er_tensor tx, tdy, tw, tm, tr, tdx, tdw, tdb;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){n, n}, NULL, x);
    er_tensor_view(&tdy, ER_FP32, 2, (int64_t[]){n, n}, NULL, dy);
    er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){n}, NULL, w);
    er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){n}, NULL, mean);
    er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){n}, NULL, rstd);
    er_tensor_view(&tdx, ER_FP32, 2, (int64_t[]){n, n}, NULL, dxf);
    er_tensor_view(&tdw, ER_FP32, 1, (int64_t[]){n}, NULL, dwf);
    er_tensor_view(&tdb, ER_FP32, 1, (int64_t[]){n}, NULL, dbf);
    const er_tensor *outs[3] = {&tdx, &tdw, &tdb};
    lnb_ctx c = {n, x, dy, w, mean, rstd, dx, dw, db, &tdy, &tx, &tm, &tr, &tw};
    check_bench bb = {lnb_rows, n, &c, lnb_make, outs, 3};
    char name[64];
    snprintf(name, sizeof name, "layer_norm_backward_covers_%dx%d", n, n);
    time_check_fin(&bb, name, "float64 layer_norm backward of the same rows", lnb_finish);
    free(x); free(dy); free(w); free(mean); free(rstd); free(dxf); free(dwf); free(dbf); free(dx); free(dw); free(db);
}

/* er_softmax_backward (or er_log_softmax_backward) + er_covers_outputs (dx) of an fp32 kernel's gradient next to a
 * float64 backward of the same rows from the saved output (dx = y (dy - sum dy y), or dy - exp(y) sum dy): one untimed
 * pass of each first, then three alternating rounds, medians (time_check). */
typedef struct sbw_ctx {
    int n, log;
    const float *y, *dy;
    double *dx;
    const er_tensor *tdy, *ty;
} sbw_ctx;
static void sbw_rows(void *v, int64_t r0, int64_t r1, int t) {
    const sbw_ctx *c = v;
    (void)t;
    for (int64_t r = r0; r < r1; r++) {
        const float *yr = c->y + (size_t)r * c->n, *gr = c->dy + (size_t)r * c->n;
        double *o = c->dx + (size_t)r * c->n, D = 0;
        for (int j = 0; j < c->n; j++) D += c->log ? (double)gr[j] : (double)gr[j] * yr[j];
        for (int j = 0; j < c->n; j++)
            o[j] = c->log ? (double)gr[j] - exp((double)yr[j]) * D : (double)yr[j] * ((double)gr[j] - D);
    }
}
static er_status sbw_make(void *v, er_ref **ref) {
    const sbw_ctx *c = v;
    return (c->log ? er_log_softmax_backward : er_softmax_backward)(ref, c->tdy, c->ty, 1);
}

static void run_softmax_backward(int n, int lg) {
    size_t nn = (size_t)n * n;
    float *y = malloc(sizeof(float) * nn), *dy = malloc(sizeof(float) * nn), *dxf = malloc(sizeof(float) * nn);
    double *dx = malloc(sizeof(double) * nn);
    for (int r = 0; r < n; r++) { /* y: a softmax (or log_softmax) output of normal logits, in fp32 */
        float *yr = y + (size_t)r * n;
        double m = -INFINITY, s = 0;
        for (int j = 0; j < n; j++) { yr[j] = (float)normalish(); m = yr[j] > m ? yr[j] : m; }
        for (int j = 0; j < n; j++) s += exp(yr[j] - m);
        for (int j = 0; j < n; j++) yr[j] = (float)(lg ? yr[j] - m - log(s) : exp(yr[j] - m) / s);
    }
    for (size_t i = 0; i < nn; i++) dy[i] = (float)normalish();
    sbw_ctx c = {n, lg, y, dy, dx, NULL, NULL};
    sbw_rows(&c, 0, n, 0); /* the kernel under test: the same in fp64, to fp32 */
    for (size_t i = 0; i < nn; i++) dxf[i] = (float)dx[i];
    er_tensor ty, tdy, tdx;
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){n, n}, NULL, y);
    er_tensor_view(&tdy, ER_FP32, 2, (int64_t[]){n, n}, NULL, dy);
    er_tensor_view(&tdx, ER_FP32, 2, (int64_t[]){n, n}, NULL, dxf);
    c.tdy = &tdy;
    c.ty = &ty;
    const er_tensor *outs[1] = {&tdx};
    check_bench bb = {sbw_rows, n, &c, sbw_make, outs, 1};
    char name[64];
    snprintf(name, sizeof name, "%ssoftmax_backward_covers_%dx%d", lg ? "log_" : "", n, n);
    time_check(&bb, name, lg ? "float64 log_softmax backward of the same rows" : "float64 softmax backward of the same rows");
    free(y); free(dy); free(dxf); free(dx);
}

/* er_cross_entropy + er_covers_outputs (loss, dlogits) of an fp32 kernel's mean loss and gradient next to a float64
 * cross-entropy forward and backward of the same logits (lse, the row losses' mean, the gradient (p - onehot) / N):
 * one untimed pass of each first, then three alternating rounds, medians (time_check: the baseline's rows on
 * exactref's threads, the mean loss from their parts). */
static double ce_baseline(int rows, int64_t r0, int64_t r1, int C, const float *x, const int64_t *t, double *g) {
    double loss = 0;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + (size_t)r * C;
        double *gr = g + (size_t)r * C, m = -INFINITY, s = 0;
        for (int j = 0; j < C; j++) m = fmax(m, xr[j]);
        for (int j = 0; j < C; j++) s += (gr[j] = exp(xr[j] - m));
        double lse = m + log(s);
        loss += lse - xr[t[r]];
        for (int j = 0; j < C; j++) gr[j] = gr[j] / s / rows;
        gr[t[r]] -= 1.0 / rows;
    }
    return loss / rows; /* this share's part of the mean */
}

typedef struct ce_ctx {
    int rows, C;
    const float *x;
    const int64_t *t;
    double *g;
    const er_tensor *tx;
    double part[64], loss; /* each thread's part of the mean loss, and their sum */
} ce_ctx;
static void ce_rows(void *v, int64_t r0, int64_t r1, int t) {
    ce_ctx *c = v;
    c->part[t] = ce_baseline(c->rows, r0, r1, c->C, c->x, c->t, c->g);
}
static void ce_finish(void *v) {
    ce_ctx *c = v;
    c->loss = 0;
    for (int t = 0; t < bench_threads(); t++) c->loss += c->part[t];
}
static er_status ce_make(void *v, er_ref **ref) {
    ce_ctx *c = v;
    return er_cross_entropy(ref, c->tx, c->t, c->rows, ER_REDUCTION_MEAN, -100, 0.0);
}

static void run_cross_entropy(int rows, int C) {
    size_t nn = (size_t)rows * C;
    float *x = calloc(nn, sizeof(float)), *gf = malloc(sizeof(float) * nn), lf;
    double *g = malloc(sizeof(double) * nn);
    int64_t *t = calloc((size_t)rows, sizeof(int64_t));
    if (!x || !gf || !g || !t) { fprintf(stderr, "cannot allocate %d x %d\n", rows, C); exit(1); }
    for (size_t i = 0; i < nn; i++) x[i] = (float)(2 * normalish());
    for (int r = 0; r < rows; r++) t[r] = (int64_t)((uint64_t)r * 2654435761u % (uint64_t)C);
    lf = (float)ce_baseline(rows, 0, rows, C, x, t, g); /* the kernel under test: the same in fp64, to fp32 */
    for (size_t i = 0; i < nn; i++) gf[i] = (float)g[i];
    er_tensor tx, tl, tg;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){rows, C}, NULL, x);
    er_tensor_view(&tl, ER_FP32, 1, (int64_t[]){1}, NULL, &lf);
    er_tensor_view(&tg, ER_FP32, 2, (int64_t[]){rows, C}, NULL, gf);
    const er_tensor *outs[2] = {&tl, &tg};
    ce_ctx c = {rows, C, x, t, g, &tx, {0}, 0};
    check_bench bb = {ce_rows, rows, &c, ce_make, outs, 2};
    char name[64];
    snprintf(name, sizeof name, "cross_entropy_covers_%dx%d", rows, C);
    time_check_fin(&bb, name, "float64 cross-entropy forward and backward of the same logits", ce_finish);
    free(x); free(gf); free(g); free(t);
}

int main(int argc, char **argv) {
    /* optional first argument: softmax, layernorm or rmsnorm alone */
    int which = 15, first = 1;
    if (argc > 1 && strcmp(argv[1], "softmax") == 0) { which = 1; first = 2; }
    else if (argc > 1 && strcmp(argv[1], "layernorm") == 0) { which = 2; first = 2; }
    else if (argc > 1 && strcmp(argv[1], "rmsnorm") == 0) { which = 4; first = 2; }
    else if (argc > 1 && strcmp(argv[1], "layer_norm_backward") == 0) { which = 8; first = 2; }
    else if (argc > 1 && strcmp(argv[1], "softmax_backward") == 0) { which = 16; first = 2; }
    else if (argc > 1 && strcmp(argv[1], "log_softmax_backward") == 0) { which = 32; first = 2; }
    else if (argc > 1 && strcmp(argv[1], "cross_entropy") == 0) { /* cross_entropy ROWS C (default 256 32000) */
        run_cross_entropy(argc > 2 ? atoi(argv[2]) : 256, argc > 3 ? atoi(argv[3]) : 32000);
        return 0;
    }
    int sizes[16], ns = 0;
    for (int i = first; i < argc && ns < 16; i++) sizes[ns++] = atoi(argv[i]);
    if (ns == 0) { sizes[0] = 1024; sizes[1] = 4096; ns = 2; }
    for (int i = 0; i < ns; i++) {
        if (which & 1) run(sizes[i]);
        if (which & 2) run_layernorm(sizes[i]);
        if (which & 4) run_rmsnorm(sizes[i]);
        if (which & 8) run_layernorm_backward(sizes[i]);
        if (which & 16) run_softmax_backward(sizes[i], 0);
        if (which & 32) run_softmax_backward(sizes[i], 1);
    }
    return 0;
}
