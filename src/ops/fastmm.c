/* fastmm.c: the certified fast path of the matmul reference (docs/algorithms/fast-path.md).
 *
 * With a CBLAS, er_matmul computes S_hat = A B in fp64 (dgemm) instead of the exact per-element summaries, and keeps
 * the operands as floats with bounds of their vectors' 2-norms. For operands of at most 24 significant bits every
 * product is exact in fp64, so |S_hat - S| <= gamma_K P whatever order the BLAS adds in, with P = sum |a b| bounded
 * by the norms (Cauchy-Schwarz) or, where that does not decide, by a dot product of the floats. covers() decides
 * from these only what holds for every S and P in the brackets; every other element is recomputed exactly from the
 * floats. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include "format/format.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

#ifdef ER_HAVE_BLAS
/* The CBLAS interface (row-major = 101, no transpose = 111, transpose = 112), 32-bit integers as OpenBLAS builds it
 * by default. */
void cblas_dgemm(int order, int ta, int tb, int M, int N, int K, double alpha, const double *A, int lda,
                 const double *B, int ldb, double beta, double *C, int ldc);

/* One thread's share of the operand work: rows [r0, r1) of the [batches * R] rows of C values. */
typedef struct er_fjob {
    const er_tensor *t;
    const double *lut;      /* every pattern's value (8- and 16-bit formats), or NULL */
    int64_t R, C, r0, r1;
    double *d;              /* row-major doubles */
    float *f;               /* floats: the same rows (A) or the transposed columns (B) */
    double *norm;           /* bounds of the rows' (or columns') 2-norms */
    er_dense_stats st;
    int ok;
} er_fjob;

/* The least nonzero and the largest of the magnitudes of n doubles (*lo +inf where none is nonzero), in four lanes
 * that vectorise: 1 where every value is finite (else the ends mean nothing). */
ER_ALWAYS_INLINE int er_row_ends_body(const double *restrict x, int64_t n, double *lo, double *hi) {
    double l[4] = {INFINITY, INFINITY, INFINITY, INFINITY}, h[4] = {0, 0, 0, 0};
    int64_t fin[4] = {1, 1, 1, 1}, k = 0;
#define ER_ROW_ENDS_STEP(q, v)                                                                                        \
    do {                                                                                                              \
        double a = fabs(v), al = a > 0 ? a : INFINITY;                                                                \
        fin[q] &= a <= DBL_MAX;                                                                                       \
        h[q] = a > h[q] ? a : h[q];                                                                                   \
        l[q] = al < l[q] ? al : l[q];                                                                                 \
    } while (0)
    for (; k + 3 < n; k += 4)
        for (int q = 0; q < 4; q++) ER_ROW_ENDS_STEP(q, x[k + q]);
    for (; k < n; k++) ER_ROW_ENDS_STEP(0, x[k]);
#undef ER_ROW_ENDS_STEP
    double l01 = l[0] < l[1] ? l[0] : l[1], l23 = l[2] < l[3] ? l[2] : l[3], h01 = h[0] > h[1] ? h[0] : h[1],
           h23 = h[2] > h[3] ? h[2] : h[3];
    *lo = l01 < l23 ? l01 : l23;
    *hi = h01 > h23 ? h01 : h23;
    return (int)(fin[0] & fin[1] & fin[2] & fin[3]);
}
ER_SIMD_BUILDS_RET(int, er_row_ends, (const double *restrict x, int64_t n, double *lo, double *hi), (x, n, lo, hi),
                   er_row_ends_body)

/* Decodes rows [r0, r1) into doubles, noting the statistics; ok = 0 at a value that is not finite. A 16-bit
 * format along contiguous rows goes through the table, marking each pattern seen; the statistics and the
 * finiteness then come from the patterns seen. */
static void *er_fjob_load(void *arg) {
    er_fjob *j = arg;
    const er_tensor *t = j->t;
    const er_fmt_info *fi = er__fmt(t->format);
    er__dense_stats_init(&j->st);
    j->ok = 1;
    int simd = er__simd(); /* once a job, not a row */
    int nbd = t->ndim - 2;
    int64_t sr = t->strides[t->ndim - 2], sc = t->strides[t->ndim - 1];
    uint64_t *seen = j->lut && fi->bits == 16 && sc == 1 ? calloc(1024, sizeof(uint64_t)) : NULL;
    for (int64_t rr = j->r0; rr < j->r1 && j->ok; rr++) {
        int64_t b = rr / j->R, r = rr % j->R, rem = b, base = 0;
        for (int i = nbd - 1; i >= 0; i--) { base += (rem % t->shape[i]) * t->strides[i]; rem /= t->shape[i]; }
        double *drow = j->d + rr * j->C;
        if (seen) {
            const char *src = (const char *)t->data + 2 * (base + r * sr);
            for (int64_t c = 0; c < j->C; c++) {
                uint16_t v;
                memcpy(&v, src + 2 * c, 2); /* a view's data need not be aligned */
                drow[c] = j->lut[v];
                seen[v >> 6] |= UINT64_C(1) << (v & 63);
            }
            continue;
        }
        /* a contiguous row of fp32, fp16 or bf16 in a loop without a call (er__load_contig), else value by value */
        const char *row = (const char *)t->data + (base + r * sr) * (int64_t)(fi->bits / 8);
        int done = sc == 1 && !j->lut && er__load_contig(simd, t->format, row, j->C, drow);
        for (int64_t c = 0; c < j->C && !done; c++) {
            int64_t off = base + r * sr + c * sc;
            double x;
            /* loads through memcpy: a view's data need not be aligned */
            if (j->lut && fi->bits == 16) { uint16_t v; memcpy(&v, (const char *)t->data + 2 * off, 2); x = j->lut[v]; }
            else if (j->lut && fi->bits == 8) x = j->lut[((const uint8_t *)t->data)[off]];
            else x = er__load(t, off);
            drow[c] = x;
        }
        /* the statistics depend on the exponents alone, which grow with |x|: those of the least and the largest
         * nonzero magnitudes of the row give them all */
        double lo, hi;
        if (!er_row_ends(simd, drow, j->C, &lo, &hi)) { j->ok = 0; break; }
        if (hi > 0) {
            er__dense_stats_add(&j->st, lo, fi->p);
            er__dense_stats_add(&j->st, hi, fi->p);
        }
    }
    for (uint32_t wd = 0; seen && wd < 1024 && j->ok; wd++) /* the patterns seen, a word of 64 at a time */
        for (uint64_t bits = seen[wd]; bits; bits &= bits - 1) {
            double x = j->lut[(wd << 6) | (uint32_t)__builtin_ctzll(bits)];
            if (!isfinite(x)) { j->ok = 0; break; }
            er__dense_stats_add(&j->st, x, fi->p);
        }
    free(seen);
    return NULL;
}

/* An upper bound of the 2-norm of n float values from their squares' sum to nearest (each square an exact double,
 * at least 2^-298): times 1 + 4 n 2^-53 (Lemma D4 of double-bounds.md), then the root, each stepped up. */
static double er_norm_up(double sumsq, int64_t n) {
    return er__next_up(sqrt(er__next_up(sumsq * er__next_up(1.0 + 4.0 * (double)n * 0x1p-53))));
}

/* A's rows [r0, r1) into floats (exact: at most 24 bits), with their norms. */
static void *er_fjob_rows(void *arg) {
    er_fjob *j = arg;
    for (int64_t r = j->r0; r < j->r1; r++) {
        const double *x = j->d + r * j->C;
        float *y = j->f + r * j->C;
        double s0 = 0, s1 = 0;
        int64_t k = 0;
        for (; k + 1 < j->C; k += 2) {
            y[k] = (float)x[k];
            y[k + 1] = (float)x[k + 1];
            s0 += x[k] * x[k];
            s1 += x[k + 1] * x[k + 1];
        }
        for (; k < j->C; k++) { y[k] = (float)x[k]; s0 += x[k] * x[k]; }
        j->norm[r] = er_norm_up(s0 + s1, j->C);
    }
    return NULL;
}

/* B [batches][K][N] (R = K rows of C = N): the columns of this job's range [r0, r1) of the batches * N columns into
 * [batches][N][K] floats, in 32 x 32 tiles, with their norms. */
static void *er_fjob_cols(void *arg) {
    er_fjob *j = arg;
    int64_t K = j->R, N = j->C;
    for (int64_t c0 = j->r0; c0 < j->r1; c0 += 32) {
        int64_t c1 = c0 + 32 < j->r1 ? c0 + 32 : j->r1;
        for (int64_t k0 = 0; k0 < K; k0 += 32) {
            int64_t k1 = k0 + 32 < K ? k0 + 32 : K;
            for (int64_t c = c0; c < c1; c++) {
                int64_t b = c / N, n = c % N;
                const double *src = j->d + b * K * N + n;
                float *dst = j->f + c * K;
                for (int64_t k = k0; k < k1; k++) dst[k] = (float)src[k * N];
            }
        }
        for (int64_t c = c0; c < c1; c++) {
            const float *y = j->f + c * K;
            double s0 = 0, s1 = 0;
            int64_t k = 0;
            for (; k + 1 < K; k += 2) { s0 += (double)y[k] * y[k]; s1 += (double)y[k + 1] * y[k + 1]; }
            for (; k < K; k++) s0 += (double)y[k] * y[k];
            j->norm[c] = er_norm_up(s0 + s1, K);
        }
    }
    return NULL;
}

/* Runs fn over the rows [0, rows) in nt jobs; returns the jobs' merged ok and (into st, if given) statistics. */
static int er_fjobs(er_fjob proto, int64_t rows, int nt, void *(*fn)(void *), er_dense_stats *st) {
    er_fjob jobs[ER_MAX_THREADS];
    if (nt > rows) nt = rows > 0 ? (int)rows : 1;
    for (int t = 0; t < nt; t++) {
        jobs[t] = proto;
        jobs[t].r0 = rows * t / nt;
        jobs[t].r1 = rows * (t + 1) / nt;
        jobs[t].ok = 1;
    }
    er__run_jobs(jobs, sizeof jobs[0], nt, fn);
    int ok = 1;
    if (st) er__dense_stats_init(st);
    for (int t = 0; t < nt; t++) {
        ok &= jobs[t].ok;
        if (!st) continue;
        const er_dense_stats *q = &jobs[t].st;
        if (!q->any_nonzero) continue;
        st->any_nonzero = 1;
        if (q->emin_lsb < st->emin_lsb) st->emin_lsb = q->emin_lsb;
        if (q->qmin < st->qmin) st->qmin = q->qmin;
        if (q->emin < st->emin) st->emin = q->emin;
        if (q->emax > st->emax) st->emax = q->emax;
    }
    return ok;
}

/* Every pattern's value, for 8- and 16-bit formats used often enough (NULL otherwise or without memory). */
static double *er_lut(const er_tensor *t, int64_t count) {
    const er_fmt_info *fi = er__fmt(t->format);
    if (fi->bits > 16 || count <= ((int64_t)1 << fi->bits) / 4) return NULL;
    size_t cnt = (size_t)1 << fi->bits;
    double *lut = malloc(sizeof(double) * cnt);
    if (lut) for (size_t i = 0; i < cnt; i++) lut[i] = er__decode(fi, i);
    return lut;
}
#endif

int er__fast_enabled(int64_t products) {
#ifdef ER_HAVE_BLAS
    /* EXACTREF_FAST=0: never; =1: always; unset: from 2^18 products, where two GEMMs beat the exact engine */
    const char *e = getenv("EXACTREF_FAST");
    if (e && e[0] == '0') return 0;
    if (e && e[0] == '1') return 1;
    return products >= (INT64_C(1) << 18);
#else
    (void)products;
    return 0;
#endif
}

#ifdef ER_HAVE_BLAS
/* The fast path's state taken by r (fs, the floats and norms: its own now) with the operands' statistics sa, sb. */
static void er_fast_keep(er_ref *r, double *fs, float *af, float *bt, double *an, double *bn, const er_dense_stats *sa,
                         const er_dense_stats *sb) {
    er__dot(r)->fs = fs;
    er__dot(r)->af = af;
    er__dot(r)->bt = bt;
    er__dot(r)->an = an;
    er__dot(r)->bn = bn;
    er__matmul_env(r, -1, sa, sb, &er__dot(r)->env);
    pthread_mutex_init(&er__dot(r)->pmu, NULL);
    er__dot(r)->fast = 1;
}

/* The fast path's state wholly from g (its GEMM taken): nothing decoded on the host. Memory short: the
 * exact path (fast stays 0), as er__fast_build's. */
static er_status er_fast_from_gemm(er_ref *r, const er_fast_gemm *g) {
    const er_mm_plan *pl = &er__dot(r)->plan;
    int64_t na = pl->a_batches * pl->M * pl->K, nbv = pl->b_batches * pl->K * pl->N;
    double *fs = malloc(sizeof(double) * (size_t)r->n), *an = malloc(sizeof(double) * (size_t)(pl->a_batches * pl->M)),
           *bn = malloc(sizeof(double) * (size_t)(pl->b_batches * pl->N));
    float *af = malloc(sizeof(float) * (size_t)na), *bt = malloc(sizeof(float) * (size_t)nbv);
    er_dense_stats sa, sb;
    er_fast_ops ops = {af, bt, an, bn, &sa, &sb};
    int ok = fs && an && bn && af && bt;
    er_status st = g->finish(g->ctx, ok ? fs : NULL, ok ? &ops : NULL);
    if (!ok || st != ER_OK) {
        free(fs);
        free(af);
        free(bt);
        free(an);
        free(bn);
        return st;
    }
    er_fast_keep(r, fs, af, bt, an, bn, &sa, &sb);
    return ER_OK;
}
#endif

er_status er__fast_build(er_ref *r, const er_fast_gemm *g) {
    er__dot(r)->fast = 0;
#ifndef ER_HAVE_BLAS
    (void)g;
#else
    const er_mm_plan *pl = &er__dot(r)->plan;
    const er_fmt_info *fa = er__fmt(er__dot(r)->A.format), *fb = er__fmt(er__dot(r)->B.format);
    if (!er__fast_enabled(r->n * pl->K) || fa->p > 24 || fb->p > 24 || pl->K < 1 || pl->M < 1 || pl->N < 1)
        return ER_OK;
    if (pl->M >= INT32_MAX || pl->N >= INT32_MAX || pl->K >= INT32_MAX) return ER_OK;
    int taken = 0; /* the GEMM queued by g, which gives the operands too */
    if (g) ER_RETURN_IF_ERROR(g->start(g->ctx, r, &taken));
    if (taken) return er_fast_from_gemm(r, g);
    int64_t na = pl->a_batches * pl->M * pl->K, nbv = pl->b_batches * pl->K * pl->N, n = r->n;
    int nt = er__num_threads(na + nbv);
    double *A = malloc(sizeof(double) * (size_t)na), *B = malloc(sizeof(double) * (size_t)nbv);
    double *fs = malloc(sizeof(double) * (size_t)n), *lut_a = er_lut(&er__dot(r)->A, na),
           *lut_b = er_lut(&er__dot(r)->B, nbv);
    float *af = NULL, *bt = NULL;
    double *an = NULL, *bn = NULL;
    er_dense_stats sa, sb;
    int ok = A && B && fs;
    if (ok)
        ok = er_fjobs((er_fjob){ &er__dot(r)->A, lut_a, pl->M, pl->K, 0, 0, A, NULL, NULL, { 0 }, 1 },
                      pl->a_batches * pl->M, nt, er_fjob_load, &sa);
    if (ok)
        ok = er_fjobs((er_fjob){ &er__dot(r)->B, lut_b, pl->K, pl->N, 0, 0, B, NULL, NULL, { 0 }, 1 },
                      pl->b_batches * pl->K, nt, er_fjob_load, &sb);
    free(lut_a);
    free(lut_b);
    int64_t MN = pl->M * pl->N;
    for (int64_t bi = 0; ok && bi < pl->nbatch; bi++) {
        int64_t ia, ib;
        er__matmul_batch_of(r, bi, &ia, &ib);
        cblas_dgemm(101, 111, 111, (int)pl->M, (int)pl->N, (int)pl->K, 1.0, A + ia * pl->M * pl->K, (int)pl->K,
                    B + ib * pl->K * pl->N, (int)pl->N, 0.0, fs + bi * MN, (int)pl->N);
    }
    /* the operands as floats (exact: at most 24 bits), one at a time to keep the peak low */
    if (ok) {
        af = malloc(sizeof(float) * (size_t)na);
        an = malloc(sizeof(double) * (size_t)(pl->a_batches * pl->M));
        ok = af && an;
        if (ok)
            er_fjobs((er_fjob){ NULL, NULL, pl->M, pl->K, 0, 0, A, af, an, { 0 }, 1 }, pl->a_batches * pl->M, nt,
                     er_fjob_rows, NULL);
    }
    free(A);
    if (ok) {
        bt = malloc(sizeof(float) * (size_t)nbv);
        bn = malloc(sizeof(double) * (size_t)(pl->b_batches * pl->N));
        ok = bt && bn;
        if (ok)
            er_fjobs((er_fjob){ NULL, NULL, pl->K, pl->N, 0, 0, B, bt, bn, { 0 }, 1 }, pl->b_batches * pl->N, nt,
                     er_fjob_cols, NULL);
    }
    free(B);
    if (!ok) {
        free(fs);
        free(af);
        free(bt);
        free(an);
        free(bn);
        return ER_OK;
    } /* no memory or a special value: exact path */
    er_fast_keep(r, fs, af, bt, an, bn, &sa, &sb);
#endif
    return ER_OK;
}

double *er__fast_absprod(const er_ref *r) {
#ifdef ER_HAVE_BLAS
    const er_mm_plan *pl = &er__dot(r)->plan;
    if (!er__dot(r)->fast) return NULL;
    int64_t na = pl->a_batches * pl->M * pl->K, nb = pl->b_batches * pl->N * pl->K, MN = pl->M * pl->N;
    if (!er__mem_fits(8.0 * ((double)na + (double)nb + (double)r->n))) return NULL; /* P from the floats instead */
    double *A = malloc(sizeof(double) * (size_t)(na ? na : 1)), *B = malloc(sizeof(double) * (size_t)(nb ? nb : 1));
    double *P = malloc(sizeof(double) * (size_t)(r->n ? r->n : 1));
    if (!A || !B || !P) { free(A); free(B); free(P); return NULL; }
    for (int64_t i = 0; i < na; i++) A[i] = fabs((double)er__dot(r)->af[i]);
    for (int64_t i = 0; i < nb; i++) B[i] = fabs((double)er__dot(r)->bt[i]); /* B's columns: [b_batches][N][K] */
    for (int64_t bi = 0; bi < pl->nbatch; bi++) {
        int64_t ia, ib;
        er__matmul_batch_of(r, bi, &ia, &ib);
        cblas_dgemm(101, 111, 112, (int)pl->M, (int)pl->N, (int)pl->K, 1.0, A + ia * pl->M * pl->K, (int)pl->K,
                    B + ib * pl->N * pl->K, (int)pl->K, 0.0, P + bi * MN, (int)pl->N);
    }
    free(A);
    free(B);
    return P;
#else
    (void)r;
    return NULL;
#endif
}

