/* t-threads.c: the thread-safety promises of docs/conventions.md. Several threads classify against one
 * reference at once (any order, fixed orders, emulation) and must get exactly the single-threaded reports;
 * er_last_error is per thread. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <pthread.h>
#include <time.h>
#include "../common/er_test.h"
#include "../common/er_refuse.h"

enum { M = 24, K = 200, N = 16, THREADS = 4, ROUNDS = 6 };
static uint16_t A[M * K], B[K * N];
static float C[M * N];
static er_ref *ref;
static const char *const orders[] = {"any_order", "sequential", "blocked:16", "split:3"};
static const char *const opts[] = {"compute=fp32", "fma=never", "inner=any", "outer=any"};
static er_report expect[4];

typedef struct job { int id, failures; char msg[256]; } job;

static void *worker(void *arg) {
    job *j = arg;
    for (int r = 0; r < ROUNDS; r++)
        for (int s = 0; s < 4; s++) {
            int k = (s + j->id) % 4;
            er_standard std;
            er_tensor tC;
            er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){M, N}, NULL, C);
            er_standard_parse(&std, orders[k], opts[k]);
            er_report rep;
            if (er_covers(&rep, ref, &tC, &std) != ER_OK) { j->failures++; continue; }
            if (memcmp(rep.counts, expect[k].counts, sizeof rep.counts) != 0 || memcmp(rep.classes, expect[k].classes, M * N) != 0) {
                j->failures++;
                snprintf(j->msg, sizeof j->msg, "thread %d: %s differs from the single-threaded report", j->id, orders[k]);
            }
            er_report_clear(&rep);
            /* a refusal in this thread leaves its own message, not another thread's */
            double d;
            er_decode(&d, (er_format)(90 + j->id), 0);
            char want[64];
            snprintf(want, sizeof want, "invalid format value %d", 90 + j->id);
            if (!strstr(er_last_error(), want)) { j->failures++; snprintf(j->msg, sizeof j->msg, "thread %d: message '%s'", j->id, er_last_error()); }
        }
    return NULL;
}

START_TEST(covers_from_many_threads) {
    er_test_reseed(600);
    for (int i = 0; i < M * K; i++) { uint64_t b; er_encode(&b, ER_FP16, er_rand_normal(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); A[i] = (uint16_t)b; }
    for (int i = 0; i < K * N; i++) { uint64_t b; er_encode(&b, ER_FP16, er_rand_normal(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); B[i] = (uint16_t)b; }
    er_tensor tA, tB, tC;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    ck_assert_int_eq(er_matmul(&ref, &tA, &tB), ER_OK);
    /* the output: the sequential fp32 emulation, so some standards cover it and others do not */
    er_standard seq;
    er_standard_parse(&seq, "sequential", "fma=never");
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){M, N}, NULL, C);
    ck_assert_int_eq(er_emulate(ref, &tC, &seq), ER_OK);
    C[5] = nextafterf(C[5], 100.0f);
    for (int k = 0; k < 4; k++) {
        er_standard std;
        er_standard_parse(&std, orders[k], opts[k]);
        ck_assert_int_eq(er_covers(&expect[k], ref, &tC, &std), ER_OK);
    }
    pthread_t th[THREADS];
    job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) { memset(&jobs[i], 0, sizeof jobs[i]); jobs[i].id = i; pthread_create(&th[i], NULL, worker, &jobs[i]); }
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++) ck_assert_msg(jobs[i].failures == 0, "%s", jobs[i].msg);
    ck_assert(!er_report_all(&expect[1])); /* the altered element fails the sequential claim */
    for (int k = 0; k < 4; k++) er_report_clear(&expect[k]);
    er_ref_free(ref);
}
END_TEST

/* er_matmul shares its elements out among threads: the results are the same for any thread count. */
START_TEST(same_results_for_any_thread_count) {
    enum { MM = 37, KK = 3000, NN = 29 };
    static float a[MM * KK], b[KK * NN];
    er_test_reseed(601);
    for (int i = 0; i < MM * KK; i++) a[i] = (float)(er_rand_normal() * ldexp(1.0, (int)er_rand_int(-20, 20)));
    for (int i = 0; i < KK * NN; i++) b[i] = (float)er_rand_normal();
    er_tensor tA, tB;
    er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){MM, KK}, NULL, a);
    er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){KK, NN}, NULL, b);
    static double first[MM * NN];
    static float out[MM * NN], emu0[MM * NN], emu1[MM * NN];
    static uint8_t cls0[3][MM * NN];
    static er_report rep0[3];
    const char *counts[] = {"1", "2", "3", "7"};
    static const char *const ord[3] = {"any_order", "sequential", "blocked:64"}, *const opt[3] = {NULL, "fma=never", "inner=any"};
    /* an output with a spread of verdicts: a sequential result, some elements moved */
    {
        setenv("EXACTREF_THREADS", "1", 1);
        er_ref *r;
        er_standard st;
        er_tensor to;
        ck_assert_int_eq(er_matmul(&r, &tA, &tB), ER_OK);
        er_standard_parse(&st, "sequential", "fma=never");
        er_tensor_view(&to, ER_FP32, 2, (int64_t[]){MM, NN}, NULL, out);
        ck_assert_int_eq(er_emulate(r, &to, &st), ER_OK);
        for (int i = 0; i < MM * NN; i += 5) out[i] = nextafterf(out[i], INFINITY);
        for (int i = 3; i < MM * NN; i += 97) out[i] *= 1.5f;
        er_ref_free(r);
    }
    for (int c = 0; c < 4; c++) {
        setenv("EXACTREF_THREADS", counts[c], 1);
        er_ref *r;
        ck_assert_int_eq(er_matmul(&r, &tA, &tB), ER_OK);
        for (int i = 0; i < MM; i++)
            for (int j = 0; j < NN; j++) {
                double e;
                er_ref_exact(r, (int64_t[]){i, j}, ER_FP64, NULL, &e);
                if (c == 0) first[i * NN + j] = e;
                else ER_REQUIRE(e == first[i * NN + j], "%s threads: element (%d, %d) differs", counts[c], i, j);
            }
        /* covers and emulate: the same reports and outputs for any thread count */
        er_tensor to, te;
        er_tensor_view(&to, ER_FP32, 2, (int64_t[]){MM, NN}, NULL, out);
        er_tensor_view(&te, ER_FP32, 2, (int64_t[]){MM, NN}, NULL, c == 0 ? emu0 : emu1);
        for (int k = 0; k < 3; k++) {
            er_standard st;
            er_standard_parse(&st, ord[k], opt[k]);
            er_report rep;
            ck_assert_int_eq(er_covers(&rep, r, &to, &st), ER_OK);
            if (c == 0) { rep0[k] = rep; memcpy(cls0[k], rep.classes, MM * NN); continue; }
            ER_REQUIRE(memcmp(rep.counts, rep0[k].counts, sizeof rep.counts) == 0 && memcmp(rep.classes, cls0[k], MM * NN) == 0 &&
                       rep.n_first == rep0[k].n_first && rep.worst.index == rep0[k].worst.index &&
                       rep.first[rep.n_first - 1].index == rep0[k].first[rep0[k].n_first - 1].index,
                       "%s threads: the %s report differs", counts[c], ord[k]);
            er_report_clear(&rep);
        }
        er_standard st;
        er_standard_parse(&st, "blocked:64", "fma=never");
        ck_assert_int_eq(er_emulate(r, &te, &st), ER_OK);
        if (c > 0) ER_REQUIRE(memcmp(emu0, emu1, sizeof emu0) == 0, "%s threads: emulate differs", counts[c]);
        er_ref_free(r);
    }
    for (int k = 0; k < 3; k++) {
        ck_assert(rep0[k].n_failed > 0); /* the comparison covered failing elements, worst and first ones */
        er_report_clear(&rep0[k]);
    }
    unsetenv("EXACTREF_THREADS");
}
END_TEST

/* Every op's covers (with its sets), on problems large enough that each path runs on several threads: the same
 * report, sets and slacks with 1 thread and with 4 (and, built with EXACTREF_TSAN, no data race: make tsan). */
static void require_same_for_threads(const er_ref *r, const er_tensor *out, const char *order, const char *options, const char *what) {
    er_standard st;
    ck_assert_int_eq(er_standard_parse(&st, order, options), ER_OK);
    int64_t n = 1;
    for (int i = 0; i < out->ndim; i++) n *= out->shape[i];
    double *s[2][3];
    er_report rep[2];
    for (int c = 0; c < 2; c++) {
        setenv("EXACTREF_THREADS", c ? "4" : "1", 1);
        for (int k = 0; k < 3; k++) s[c][k] = malloc(sizeof(double) * (size_t)n);
        ER_REQUIRE(er_covers_sets(&rep[c], r, out, &st, s[c][0], s[c][1], s[c][2]) == ER_OK, "%s: %s", what, er_last_error());
    }
    unsetenv("EXACTREF_THREADS");
    er_require_same_report(&rep[0], &rep[1], what);
    /* the resolution's counts and widths, and the classic bug's note, merged from the threads' shares */
    const er_report *a = &rep[0], *b = &rep[1];
    ER_REQUIRE(a->n_away == b->n_away && a->n_unseen == b->n_unseen && (!a->n_away || (a->coarsest_rel == b->coarsest_rel &&
               a->finest_rel == b->finest_rel)) && a->blind_rel == b->blind_rel && strcmp(a->blind_bug, b->blind_bug) == 0 &&
               a->n_bug_tried == b->n_bug_tried && a->n_bug_seen == b->n_bug_seen,
               "%s: resolution differs (%lld away, %lld unseen, %.17g to %.17g, bug seen at %lld of %lld; against %lld, %lld, "
               "%.17g to %.17g, %lld of %lld)", what, (long long)a->n_away, (long long)a->n_unseen, a->finest_rel,
               a->coarsest_rel, (long long)a->n_bug_seen, (long long)a->n_bug_tried, (long long)b->n_away,
               (long long)b->n_unseen, b->finest_rel, b->coarsest_rel, (long long)b->n_bug_seen, (long long)b->n_bug_tried);
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < n; i++)
            ER_REQUIRE(s[0][k][i] == s[1][k][i] || (isnan(s[0][k][i]) && isnan(s[1][k][i])), "%s: set %d of element %lld differs", what, k,
                       (long long)i);
    for (int c = 0; c < 2; c++) {
        er_report_clear(&rep[c]);
        for (int k = 0; k < 3; k++) free(s[c][k]);
    }
}

START_TEST(every_op_same_for_any_thread_count) {
    enum { R = 64, L = 256, KK = 192, RR = 2048, LL = 64 };
    static float x[R * L], w[L], bias[L], b[L * KK], out[R * L], outk[R * KK], xr[RR * LL], red[RR];
    er_test_reseed(603);
    for (int i = 0; i < R * L; i++) x[i] = (float)(er_rand_normal() * 3);
    for (int i = 0; i < L; i++) w[i] = (float)er_rand_normal(), bias[i] = (float)er_rand_normal();
    for (int i = 0; i < L * KK; i++) b[i] = (float)er_rand_normal();
    for (int i = 0; i < RR * LL; i++) xr[i] = (float)(er_rand_normal() * ldexp(1.0, (int)er_rand_int(-8, 8)));
    er_tensor tx, tw, tb, tB, to, tk, txr, tr;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, L}, NULL, x);
    er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){L}, NULL, w);
    er_tensor_view(&tb, ER_FP32, 1, (int64_t[]){L}, NULL, bias);
    er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){L, KK}, NULL, b);
    er_tensor_view(&to, ER_FP32, 2, (int64_t[]){R, L}, NULL, out);
    er_tensor_view(&tk, ER_FP32, 2, (int64_t[]){R, KK}, NULL, outk);
    er_tensor_view(&txr, ER_FP32, 2, (int64_t[]){RR, LL}, NULL, xr);
    er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){RR}, NULL, red);
    er_ref *r;
    /* matmul: the outputs its exact values give, some moved; any order (the BLAS fast path where built, forced),
     * a fixed order, tf32=nearest's two passes */
    static const char *const fast[2] = {"0", "1"};
    for (int f = 0; f < 2; f++) {
        setenv("EXACTREF_FAST", fast[f], 1);
        ck_assert_int_eq(er_matmul(&r, &tx, &tB), ER_OK);
        unsetenv("EXACTREF_FAST");
        ck_assert_int_eq(er_ref_rounded(&tk, r), ER_OK);
        for (int i = 0; i < R * KK; i += 7) outk[i] = nextafterf(outk[i], INFINITY);
        require_same_for_threads(r, &tk, "any_order", NULL, f ? "matmul any_order (fast path)" : "matmul any_order");
        require_same_for_threads(r, &tk, "blocked:32", "fma=never", "matmul blocked:32");
        require_same_for_threads(r, &tk, "any_order", "compute=tf32 tf32=nearest", "matmul tf32=nearest");
        /* a chain over it: scale, bias broadcast over the rows, relu, a cast */
        static float biasv[KK];
        for (int j = 0; j < KK; j++) biasv[j] = (float)er_rand_normal();
        er_tensor tbias;
        er_tensor_view(&tbias, ER_FP32, 2, (int64_t[]){R, KK}, (int64_t[]){0, 1}, biasv);
        er_stage st[4] = {{ER_STAGE_MUL, NULL, 0.3, 0, NULL}, {ER_STAGE_ADD, &tbias, 0, 0, NULL}, {ER_STAGE_RELU, NULL, 0, 0, NULL}, {ER_STAGE_CAST, NULL, 0, ER_FP16, NULL}};
        er_ref *ch;
        ck_assert_int_eq(er_chain(&ch, r, st, 4), ER_OK);
        require_same_for_threads(ch, &tk, "any_order", NULL, f ? "chain (fast path)" : "chain");
        er_ref_free(ch);
        /* unary stages and a second reference (SwiGLU's shape: silu, times another matmul, then exp of it), and the
         * matmul quantised per row (q alone: every scale of the set) */
        er_ref *r2, *qr;
        ck_assert_int_eq(er_matmul(&r2, &tx, &tB), ER_OK);
        er_stage sw[4] = {{ER_STAGE_SILU, NULL, 0, 0, NULL}, {ER_STAGE_MUL, NULL, 0, 0, r2}, {ER_STAGE_TANH, NULL, 0, 0, NULL},
                          {ER_STAGE_CAST, NULL, 0, ER_BF16, NULL}};
        ck_assert_int_eq(er_chain(&ch, r, sw, 4), ER_OK);
        require_same_for_threads(ch, &tk, "any_order", NULL, f ? "chain of two references (fast path)" : "chain of two references");
        er_ref_free(ch);
        ck_assert_int_eq(er_quantize_ref(&qr, r, ER_FP8_E4M3FN, ER_GRAN_ROW, 0, ER_RECIPE_AMAX), ER_OK);
        require_same_for_threads(qr, &tk, "any_order", NULL, f ? "quantize after a matmul (fast path)" : "quantize after a matmul");
        er_ref_free(qr);
        er_ref_free(r2);
        er_ref_free(r);
    }
    /* the reductions (2048 rows: several threads) */
    for (int op = 0; op < 3; op++) {
        er_status st = op == 0 ? er_sum(&r, &txr, 1) : op == 1 ? er_mean(&r, &txr, 1) : er_max(&r, &txr, 1);
        ck_assert_int_eq(st, ER_OK);
        ck_assert_int_eq(er_ref_rounded(&tr, r), ER_OK);
        for (int i = 0; i < RR; i += 5) red[i] = nextafterf(red[i], -INFINITY);
        require_same_for_threads(r, &tr, "any_order", NULL, op == 0 ? "sum" : op == 1 ? "mean" : "max");
        er_ref_free(r);
    }
    /* the row ops, against an output of zeros (most elements fail: first failures, worst element) */
    memset(out, 0, sizeof out);
    ck_assert_int_eq(er_softmax(&r, &tx, 1), ER_OK);
    require_same_for_threads(r, &to, "any_order", NULL, "softmax");
    er_ref_free(r);
    ck_assert_int_eq(er_log_softmax(&r, &tx, 1), ER_OK);
    require_same_for_threads(r, &to, "any_order", NULL, "log_softmax");
    er_ref_free(r);
    ck_assert_int_eq(er_rmsnorm(&r, &tx, &tw, 1e-5), ER_OK);
    require_same_for_threads(r, &to, "any_order", NULL, "rmsnorm");
    er_ref_free(r);
    ck_assert_int_eq(er_layernorm(&r, &tx, 1, &tw, &tb, 1e-5), ER_OK);
    require_same_for_threads(r, &to, "any_order", NULL, "layernorm");
    er_ref_free(r);
    /* layer_norm's backward, whose module classifies dx itself where no sets are asked for: dx from a float64
     * backward rounded to fp32, every seventh element moved by an ulp and every 61st by 2^-10 relative; dweight and
     * dbias zero (most fail); the same reports for 1 and 4 threads, with and without the sets */
    static float dyv[R * L], mv[R], rv[R], dw[L], db[L];
    for (int i = 0; i < R * L; i++) dyv[i] = (float)er_rand_normal();
    for (int i = 0; i < R; i++) {
        double m = 0, v = 0, sb = 0, sc = 0;
        for (int j = 0; j < L; j++) m += x[i * L + j];
        mv[i] = (float)(m / L);
        for (int j = 0; j < L; j++) v += ((double)x[i * L + j] - mv[i]) * ((double)x[i * L + j] - mv[i]);
        rv[i] = (float)(1 / sqrt(v / L + 1e-5));
        for (int j = 0; j < L; j++) {
            double g = (double)dyv[i * L + j] * w[j];
            sb += g;
            sc += g * ((double)x[i * L + j] - mv[i]) * rv[i];
        }
        for (int j = 0; j < L; j++) {
            double g = (double)dyv[i * L + j] * w[j], xh = ((double)x[i * L + j] - mv[i]) * rv[i];
            float d = (float)(rv[i] * (g - sb / L - xh * sc / L));
            int e = i * L + j;
            out[e] = e % 7 == 0 ? nextafterf(d, INFINITY) : e % 61 == 0 ? d * (1 + 0x1p-10f) : d;
        }
    }
    er_tensor tdy, tm, trs, tdw, tdb;
    er_tensor_view(&tdy, ER_FP32, 2, (int64_t[]){R, L}, NULL, dyv);
    er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){R}, NULL, mv);
    er_tensor_view(&trs, ER_FP32, 1, (int64_t[]){R}, NULL, rv);
    er_tensor_view(&tdw, ER_FP32, 1, (int64_t[]){L}, NULL, dw);
    er_tensor_view(&tdb, ER_FP32, 1, (int64_t[]){L}, NULL, db);
    ck_assert_int_eq(er_layer_norm_backward(&r, &tdy, &tx, 1, &tm, &trs, &tw), ER_OK);
    require_same_for_threads(r, &to, "any_order", NULL, "layer_norm_backward");
    er_standard sa;
    ck_assert_int_eq(er_standard_parse(&sa, "any_order", NULL), ER_OK);
    const er_tensor *outs[3] = {&to, &tdw, &tdb};
    er_report rep[2][3];
    for (int c = 0; c < 2; c++) {
        setenv("EXACTREF_THREADS", c ? "4" : "1", 1);
        ER_REQUIRE(er_covers_outputs(rep[c], r, outs, 3, &sa) == ER_OK, "%s", er_last_error());
    }
    unsetenv("EXACTREF_THREADS");
    ER_REQUIRE(rep[0][0].counts[ER_CLASS_EXACT] > 0 && rep[0][0].counts[ER_CLASS_COVERED] > 0 &&
                   rep[0][0].counts[ER_CLASS_OUTSIDE] > 0,
               "dx's classes: %lld exact, %lld covered, %lld outside", (long long)rep[0][0].counts[ER_CLASS_EXACT],
               (long long)rep[0][0].counts[ER_CLASS_COVERED], (long long)rep[0][0].counts[ER_CLASS_OUTSIDE]);
    for (int o = 0; o < 3; o++) {
        er_require_same_report(&rep[0][o], &rep[1][o], "layer_norm_backward, classes decided by its module");
        er_report_clear(&rep[0][o]);
        er_report_clear(&rep[1][o]);
    }
    er_ref_free(r);
}
END_TEST

/* A long fp16 matmul check's inputs: rows x inner and inner x cols operands of fp16 values in [2^-3, 2^-1) of either sign, an
 * fp32 output of zeros (not covered: the check runs every element), and the reference. */
typedef struct long_mm { uint16_t *a, *b; float *c; er_tensor C; er_ref *r; } long_mm;

static void long_mm_make(long_mm *m, int rows, int inner, int cols, uint64_t seed) {
    m->a = malloc(2 * (size_t)rows * inner);
    m->b = malloc(2 * (size_t)inner * cols);
    m->c = calloc((size_t)rows * cols, sizeof(float));
    er_test_reseed(seed);
    for (int i = 0; i < rows * inner; i++) m->a[i] = (uint16_t)(0x3000 + er_rand_int(0, 0x0fff)) | (uint16_t)(er_rand64() & 0x8000);
    for (int i = 0; i < inner * cols; i++) m->b[i] = (uint16_t)(0x3000 + er_rand_int(0, 0x0fff)) | (uint16_t)(er_rand64() & 0x8000);
    er_tensor tA, tB;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){rows, inner}, NULL, m->a);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){inner, cols}, NULL, m->b);
    er_tensor_view(&m->C, ER_FP32, 2, (int64_t[]){rows, cols}, NULL, m->c);
    ck_assert_int_eq(er_matmul(&m->r, &tA, &tB), ER_OK);
}

static void long_mm_free(long_mm *m) {
    er_ref_free(m->r);
    free(m->a);
    free(m->b);
    free(m->c);
}

/* er_cancel from another thread stops a long check (blocked:64 on 256 x 4096 x 256, about 2.5 s on 2 cores) within
 * a poll, and a long emulation (mma:sm90, about 1.6 s): ER_ERR_CANCELLED, its message, a report recording it as a
 * refusal's does; a request that stands cancels a new call at once; after er_cancel_reset the same calls run to the
 * end. "Within a poll" is measured against the same call on a 64th of the elements (32 x 4096 x 32), run to its end
 * just before: the cancelled call must return within the delay plus 16 times that (a quarter of the whole call's
 * cost) or half a second, whichever is longer, so that a loaded machine or a sanitizer slows both alike. Nothing
 * leaks (the ASan build). */
static void *cancel_after(void *arg) {
    struct timespec ts = {0, *(long *)arg};
    nanosleep(&ts, NULL);
    er_cancel();
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

START_TEST(cancel_stops_a_long_check) {
    long_mm lm;
    long_mm_make(&lm, 256, 4096, 256, 91);
    er_ref *r = lm.r;
    er_tensor tC = lm.C;
    uint16_t *a = lm.a, *b = lm.b;
    float *c = lm.c;
    er_standard blocked, fixed;
    er_standard_parse(&blocked, "blocked:64", NULL);
    er_standard_parse(&fixed, "mma:sm90", NULL); /* the emulated tensor-core chain: about 1.6 s here */
    static const long delays[2] = {100000000L, 100000000L};
    long_mm sm; /* a 64th of the elements */
    long_mm_make(&sm, 32, 4096, 32, 93);
    for (int k = 0; k < 2; k++) { /* covers, then emulate */
        double s0 = now_s();
        er_report srep;
        ck_assert_int_eq(k == 0 ? er_covers(&srep, sm.r, &sm.C, &blocked) : er_emulate(sm.r, &sm.C, &fixed), ER_OK);
        if (k == 0) er_report_clear(&srep);
        double bound = (double)delays[k] * 1e-9 + fmax(0.5, 16.0 * (now_s() - s0));
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, cancel_after, (void *)&delays[k]), 0);
        double t0 = now_s();
        er_report rep = sentinel_report();
        er_status st = k == 0 ? er_covers(&rep, r, &tC, &blocked) : er_emulate(r, &tC, &fixed);
        double dt = now_s() - t0;
        pthread_join(th, NULL);
        ck_assert_int_eq(st, ER_ERR_CANCELLED);
        ck_assert_ptr_nonnull(strstr(er_last_error(), "cancelled (er_cancel)"));
        ck_assert_msg(dt < bound, "cancelled after %.3f s (bound %.3f s)", dt, bound);
        if (k == 0) { /* the report records the cancellation, as a refusal's does: it fails and holds no classes */
            ck_assert(refused_report(&rep, ER_ERR_CANCELLED));
            er_report_clear(&rep);
        }
        ck_assert_int_eq(er_cancel_requested(), 1);
        er_cancel_reset();
    }
    /* a standing request cancels a new call at its first poll; reset, the call runs */
    er_tensor sA, sB, sC;
    er_tensor_view(&sA, ER_FP16, 2, (int64_t[]){8, 64}, NULL, a);
    er_tensor_view(&sB, ER_FP16, 2, (int64_t[]){64, 8}, NULL, b);
    er_tensor_view(&sC, ER_FP32, 2, (int64_t[]){8, 8}, NULL, c);
    er_ref *small;
    ck_assert_int_eq(er_matmul(&small, &sA, &sB), ER_OK);
    er_cancel_on_signal(2);
    er_report rep;
    ck_assert_int_eq(er_covers(&rep, small, &sC, &blocked), ER_ERR_CANCELLED);
    er_cancel_reset();
    ck_assert_int_eq(er_cancel_requested(), 0);
    ck_assert_int_eq(er_emulate(small, &sC, &fixed), ER_OK);
    ck_assert_int_eq(er_covers(&rep, small, &sC, &fixed), ER_OK);
    ck_assert_int_eq(rep.n_failed, 0);
    er_report_clear(&rep);
    er_ref_free(small);
    long_mm_free(&lm);
    long_mm_free(&sm);
}
END_TEST

/* er_set_progress: on a 0.4-second check (blocked:64 on 128 x 2048 x 128) with a delay of 0.05 s, the callback runs
 * (from any of the workers, one at a time), done grows and stays within total, and the last call has done == total;
 * with the delay beyond the call's length it never runs; turned off, never. A row op (softmax) reports its rows. */
typedef struct prog { int calls, bad; int64_t last, total, want; } prog;
static void on_progress(int64_t done, int64_t total, void *user) {
    prog *p = user;
    p->bad += done < p->last || done > total || total != p->want;
    p->calls++;
    p->last = done;
    p->total = total;
}

START_TEST(progress_of_a_long_check) {
    /* a sanitizer run's share of the rows (each check still several times the progress delays there) */
    const int PM = (int)er_test_trials(128, 32), PN = 128;
    long_mm lm;
    long_mm_make(&lm, PM, 2048, PN, 92);
    er_ref *r = lm.r;
    er_tensor tC = lm.C;
    er_standard blocked;
    er_standard_parse(&blocked, "blocked:64", NULL);
    static const double delays[3] = {0.05, 1000.0, -1.0}; /* -1: turned off */
    for (int k = 0; k < 3; k++) {
        prog p = {0, 0, 0, 0, PM * PN};
        if (delays[k] < 0) er_set_progress(NULL, NULL, 0);
        else er_set_progress(on_progress, &p, delays[k]);
        er_report rep;
        ck_assert_int_eq(er_covers(&rep, r, &tC, &blocked), ER_OK);
        er_report_clear(&rep);
        if (k == 0) {
            ck_assert_msg(p.calls >= 2 && p.bad == 0 && p.last == PM * PN && p.total == PM * PN,
                          "calls %d, bad %d, last %lld of %lld", p.calls, p.bad, (long long)p.last, (long long)p.total);
        } else {
            ck_assert_int_eq(p.calls, 0);
        }
    }
    /* a row op reports rows: softmax over 4096 rows of 4096 (about 0.6 s on 2 cores; a sanitizer run's share) */
    const int SR = (int)er_test_trials(4096, 512), SN = 4096;
    float *x = malloc(sizeof(float) * (size_t)SR * SN), *y = malloc(sizeof(float) * (size_t)SR * SN);
    for (int i = 0; i < SR * SN; i++) { x[i] = (float)(4 * er_rand_unit() - 2); y[i] = 1.0f / SN; }
    er_tensor tx, ty;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){SR, SN}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){SR, SN}, NULL, y);
    er_ref *sm;
    ck_assert_int_eq(er_softmax(&sm, &tx, 1), ER_OK);
    prog p = {0, 0, 0, 0, SR};
    er_set_progress(on_progress, &p, 0.01);
    er_standard any;
    er_standard_init(&any);
    er_report rep;
    ck_assert_int_eq(er_covers(&rep, sm, &ty, &any), ER_OK);
    er_report_clear(&rep);
    ck_assert_msg(p.calls >= 2 && p.bad == 0 && p.last == SR && p.total == SR,
                  "softmax: calls %d, bad %d, last %lld of %lld", p.calls, p.bad, (long long)p.last,
                  (long long)p.total);
    er_ref_free(sm);
    free(x);
    free(y);
    er_set_progress(NULL, NULL, 0);
    long_mm_free(&lm);
}
END_TEST

/* A standing er_cancel request stops the row loops of attention, attention_backward, cross_entropy, softmax_backward,
 * layer_norm_backward, softmax, layernorm, rmsnorm, quantize and a chain at their first poll (each refused with ER_ERR_CANCELLED and its message), and after the
 * reset the same checks run. */
START_TEST(cancel_polled_by_the_row_ops) {
    enum { R = 4, NC = 16 };
    float x[R * NC], y[R * NC], g[R * NC], m[R], rs[R], w[NC], o32[R * NC], l32[R], loss[1];
    uint16_t q[R * NC];
    int64_t tgt[R] = {0, 3, 5, 15};
    er_test_reseed(93);
    for (int i = 0; i < R * NC; i++) {
        x[i] = (float)(er_rand_unit() - 0.5);
        g[i] = (float)(er_rand_unit() - 0.5);
        y[i] = 1.0f / NC;
        q[i] = (uint16_t)(0x3000 + er_rand_int(0, 0x03ff));
        o32[i] = 0;
    }
    for (int i = 0; i < R; i++) { m[i] = 0; rs[i] = 1; l32[i] = 0; }
    for (int i = 0; i < NC; i++) w[i] = 1;
    er_tensor tx, ty, tg, tm, tr, tw, tq, to, tl, tloss, tdq;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){R, NC}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){R, NC}, NULL, y);
    er_tensor_view(&tg, ER_FP32, 2, (int64_t[]){R, NC}, NULL, g);
    er_tensor_view(&tm, ER_FP32, 1, (int64_t[]){R}, NULL, m);
    er_tensor_view(&tr, ER_FP32, 1, (int64_t[]){R}, NULL, rs);
    er_tensor_view(&tw, ER_FP32, 1, (int64_t[]){NC}, NULL, w);
    er_tensor_view(&tq, ER_FP16, 2, (int64_t[]){R, NC}, NULL, q);
    er_tensor_view(&to, ER_FP32, 2, (int64_t[]){R, NC}, NULL, o32);
    er_tensor_view(&tl, ER_FP32, 1, (int64_t[]){R}, NULL, l32);
    er_tensor_view(&tloss, ER_FP32, 1, (int64_t[]){1}, NULL, loss);
    er_tensor_view(&tdq, ER_FP32, 2, (int64_t[]){R, NC}, NULL, o32);
    er_attention_opts ao = {0};
    uint8_t q8[R * NC];
    float amax[R], scl[R];
    er_tensor tq8, tam, tsc;
    er_tensor_view(&tq8, ER_FP8_E4M3FN, 2, (int64_t[]){R, NC}, NULL, q8);
    er_tensor_view(&tam, ER_FP32, 1, (int64_t[]){R}, NULL, amax);
    er_tensor_view(&tsc, ER_FP32, 1, (int64_t[]){R}, NULL, scl);
    memset(q8, 0, sizeof q8);
    for (int i = 0; i < R; i++) amax[i] = scl[i] = 1;
    er_ref *refs[10], *base;
    ck_assert_int_eq(er_attention(&refs[0], &tq, &tq, &tq, &ao), ER_OK);
    ck_assert_int_eq(er_attention_backward(&refs[1], &tq, &tq, &tq, &tq, &tl, &tq, &ao), ER_OK);
    ck_assert_int_eq(er_cross_entropy(&refs[2], &tx, tgt, R, ER_REDUCTION_MEAN, -100, 0.0), ER_OK);
    ck_assert_int_eq(er_softmax_backward(&refs[3], &tg, &ty, 1), ER_OK);
    ck_assert_int_eq(er_layer_norm_backward(&refs[4], &tg, &tx, 1, &tm, &tr, &tw), ER_OK);
    ck_assert_int_eq(er_softmax(&refs[5], &tx, 1), ER_OK);
    ck_assert_int_eq(er_layernorm(&refs[6], &tx, 1, NULL, NULL, 1e-5), ER_OK);
    ck_assert_int_eq(er_rmsnorm(&refs[7], &tx, NULL, 1e-6), ER_OK);
    ck_assert_int_eq(er_quantize(&refs[8], &tx, ER_FP8_E4M3FN, ER_GRAN_ROW, 0, ER_RECIPE_AMAX), ER_OK);
    er_stage ex = {0};
    ex.kind = ER_STAGE_EXP;
    ck_assert_int_eq(er_tensor_ref(&base, &tx), ER_OK);
    ck_assert_int_eq(er_chain(&refs[9], base, &ex, 1), ER_OK);
    const er_tensor *outs[10][3] = {{&to, &tl, NULL}, {&tdq, NULL, NULL}, {&tloss, &tdq, NULL}, {&tdq, NULL, NULL},
                                    {&tdq, NULL, NULL}, {&tdq, NULL, NULL}, {&tdq, NULL, NULL}, {&tdq, NULL, NULL},
                                    {&tq8, &tam, &tsc}, {&tdq, NULL, NULL}};
    const int nout[10] = {2, 3, 2, 1, 3, 1, 3, 1, 3, 1};
    er_standard std;
    er_standard_init(&std);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0) er_cancel();
        for (int k = 0; k < 10; k++) {
            er_report reps[3];
            er_status st = er_covers_outputs(reps, refs[k], outs[k], nout[k], &std);
            ck_assert_msg(st == (pass ? ER_OK : ER_ERR_CANCELLED), "op %d pass %d: %s", k, pass, er_last_error());
            if (pass == 0) ck_assert_ptr_nonnull(strstr(er_last_error(), "cancelled (er_cancel)"));
            for (int o = 0; o < nout[k]; o++) er_report_clear(&reps[o]);
        }
        er_cancel_reset();
    }
    for (int k = 0; k < 10; k++) er_ref_free(refs[k]);
    er_ref_free(base);
}
END_TEST

int main(void) {
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, covers_from_many_threads);
    tcase_add_test(tc, same_results_for_any_thread_count);
    tcase_add_test(tc, every_op_same_for_any_thread_count);
    tcase_add_test(tc, cancel_stops_a_long_check);
    tcase_add_test(tc, progress_of_a_long_check);
    tcase_add_test(tc, cancel_polled_by_the_row_ops);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}
