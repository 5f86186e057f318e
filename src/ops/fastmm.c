/* fastmm.c: the certified fast path of the matmul reference (docs/algorithms/fast-path.md).
 *
 * With a CBLAS, er_matmul computes S_hat = A B in fp64 (dgemm) and P_f = |A| |B| in fp32 (sgemm) instead of the
 * exact per-element summaries. For operands of at most 24 significant bits every product is exact in fp64, so
 * |S_hat - S| <= gamma_K P whatever order the BLAS adds in, and P_f brackets P = sum |a b|. covers() decides from
 * these only what holds for every S and P in the brackets; every other element is recomputed exactly. */
#include <math.h>
#include <stdlib.h>
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

#ifdef ER_HAVE_BLAS
/* The CBLAS interface (row-major = 101, no transpose = 111), 32-bit integers as OpenBLAS builds it by default. */
void cblas_dgemm(int order, int ta, int tb, int M, int N, int K, double alpha, const double *A, int lda, const double *B,
                 int ldb, double beta, double *C, int ldc);
void cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc);

/* Loads an operand as row-major [batches][R][C] doubles (|x| as floats when f is set); 0 if a value is not finite.
 * 8- and 16-bit formats decode through a table of every pattern. */
static int er_load_dense(const er_tensor *t, int64_t batches, int64_t R, int64_t C, double *d, float *f) {
    const er_fmt_info *fi = er__fmt(t->format);
    double *lut = NULL;
    if (fi->bits <= 16 && batches * R * C > ((int64_t)1 << fi->bits) / 4) {
        size_t cnt = (size_t)1 << fi->bits;
        lut = malloc(sizeof(double) * cnt);
        if (!lut) return 0;
        for (size_t i = 0; i < cnt; i++) lut[i] = er__decode(fi, i);
    }
    int nbd = t->ndim - 2, ok = 1;
    int64_t sr = t->strides[t->ndim - 2], sc = t->strides[t->ndim - 1];
    for (int64_t b = 0; b < batches && ok; b++) {
        int64_t rem = b, base = 0;
        for (int i = nbd - 1; i >= 0; i--) { base += (rem % t->shape[i]) * t->strides[i]; rem /= t->shape[i]; }
        for (int64_t r = 0; r < R && ok; r++) {
            double *drow = d ? d + (b * R + r) * C : NULL;
            float *frow = f ? f + (b * R + r) * C : NULL;
            for (int64_t c = 0; c < C; c++) {
                int64_t off = base + r * sr + c * sc;
                double x;
                /* loads through memcpy: a view's data need not be aligned */
                if (lut && fi->bits == 16) { uint16_t v; memcpy(&v, (const char *)t->data + 2 * off, 2); x = lut[v]; }
                else if (lut && fi->bits == 8) x = lut[((const uint8_t *)t->data)[off]];
                else if (fi->bits == 32 && t->format == ER_FP32) { float v; memcpy(&v, (const char *)t->data + 4 * off, 4); x = v; }
                else x = er__load(t, off);
                if (!isfinite(x)) { ok = 0; break; }
                if (drow) drow[c] = x;
                if (frow) frow[c] = (float)fabs(x); /* exact: at most 24 significant bits */
            }
        }
    }
    free(lut);
    return ok;
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

er_status er__fast_build(er_ref *r) {
    r->fast = 0;
#ifdef ER_HAVE_BLAS
    const er_mm_plan *pl = &r->plan;
    const er_fmt_info *fa = er__fmt(r->A.format), *fb = er__fmt(r->B.format);
    if (!er__fast_enabled(r->n * pl->K) || fa->p > 24 || fb->p > 24 || pl->K < 1 || pl->M < 1 || pl->N < 1) return ER_OK;
    if (pl->M >= INT32_MAX || pl->N >= INT32_MAX || pl->K >= INT32_MAX) return ER_OK;
    int64_t na = pl->a_batches * pl->M * pl->K, nbv = pl->b_batches * pl->K * pl->N, n = r->n;
    double *A = malloc(sizeof(double) * (size_t)na), *B = malloc(sizeof(double) * (size_t)nbv);
    double *fs = malloc(sizeof(double) * (size_t)n);
    if (!A || !B || !fs) { free(A); free(B); free(fs); return ER_OK; } /* no memory for the fast path: exact path */
    int ok = er_load_dense(&r->A, pl->a_batches, pl->M, pl->K, A, NULL) && er_load_dense(&r->B, pl->b_batches, pl->K, pl->N, B, NULL);
    int64_t MN = pl->M * pl->N;
    for (int64_t bi = 0; ok && bi < pl->nbatch; bi++) {
        int64_t ia, ib;
        er__matmul_batch_of(r, bi, &ia, &ib);
        cblas_dgemm(101, 111, 111, (int)pl->M, (int)pl->N, (int)pl->K, 1.0, A + ia * pl->M * pl->K, (int)pl->K,
                    B + ib * pl->K * pl->N, (int)pl->N, 0.0, fs + bi * MN, (int)pl->N);
    }
    free(A);
    free(B);
    float *Af = ok ? malloc(sizeof(float) * (size_t)na) : NULL, *Bf = ok ? malloc(sizeof(float) * (size_t)nbv) : NULL;
    float *fp = ok ? malloc(sizeof(float) * (size_t)n) : NULL;
    ok = ok && Af && Bf && fp && er_load_dense(&r->A, pl->a_batches, pl->M, pl->K, NULL, Af) &&
         er_load_dense(&r->B, pl->b_batches, pl->K, pl->N, NULL, Bf);
    for (int64_t bi = 0; ok && bi < pl->nbatch; bi++) {
        int64_t ia, ib;
        er__matmul_batch_of(r, bi, &ia, &ib);
        cblas_sgemm(101, 111, 111, (int)pl->M, (int)pl->N, (int)pl->K, 1.0f, Af + ia * pl->M * pl->K, (int)pl->K,
                    Bf + ib * pl->K * pl->N, (int)pl->N, 0.0f, fp + bi * MN, (int)pl->N);
    }
    free(Af);
    free(Bf);
    if (!ok) { free(fs); free(fp); return ER_OK; }
    r->fs = fs;
    r->fp = fp;
    r->fast = 1;
#endif
    return ER_OK;
}
