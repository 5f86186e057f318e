/* bench_device.c: er_matmul_covers_device (the matmul reference on the GPU, any order over fp16 inputs, the
 * standard mma:sm90 outer=any) on the output of cuBLAS's fp16 GEMM with fp32 accumulation (tensor cores), next to
 * cuBLAS's fp64 GEMM of the same shape on the same GPU, both from device memory; three alternating rounds, medians;
 * the check with its classes copied to the host, and kept on the device (er_report_keep_on_device). Then the check of
 * a failing output (the last 16 products of each sum dropped) against the check of the correct one. Prints `name: X s
 * vs baseline Y s = Rx`. Usage: bench_device [N ...] (default 2048 4096 8192). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include <exactref/exactref.h>
#include "bench_util.h"
#include <exactref/cuda.h>

static uint64_t rng = 5;
static double uniform(void) {
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    return (double)(rng >> 11) * 0x1p-53 * 2.0 - 1.0;
}

#define CHECK(x) do { if ((x) != 0) { fprintf(stderr, "%s failed at line %d\n", #x, __LINE__); exit(1); } } while (0)

static void run(cublasHandle_t h, int n) {
    size_t nn = (size_t)n * n;
    uint16_t *A = malloc(2 * nn), *B = malloc(2 * nn);
    double *ad = malloc(8 * nn), *bd = malloc(8 * nn);
    for (size_t i = 0; i < nn; i++) {
        uint64_t bits;
        er_encode(&bits, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        A[i] = (uint16_t)bits;
        er_decode(&ad[i], ER_FP16, bits);
        er_encode(&bits, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
        B[i] = (uint16_t)bits;
        er_decode(&bd[i], ER_FP16, bits);
    }
    void *dA, *dB, *dC, *dAd, *dBd, *dCd;
    CHECK(cudaMalloc(&dA, 2 * nn));
    CHECK(cudaMalloc(&dB, 2 * nn));
    CHECK(cudaMalloc(&dC, 4 * nn));
    CHECK(cudaMalloc(&dAd, 8 * nn));
    CHECK(cudaMalloc(&dBd, 8 * nn));
    CHECK(cudaMalloc(&dCd, 8 * nn));
    CHECK(cudaMemcpy(dA, A, 2 * nn, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB, B, 2 * nn, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dAd, ad, 8 * nn, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dBd, bd, 8 * nn, cudaMemcpyHostToDevice));
    /* the kernel under test: fp16 GEMM, fp32 accumulation and output (row-major C = A B as column-major C^T = B^T A^T) */
    const float one = 1.0f, zero = 0.0f;
    CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, dB, CUDA_R_16F, n, dA, CUDA_R_16F, n, &zero, dC, CUDA_R_32F, n,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CHECK(cudaDeviceSynchronize());
    er_tensor tA, tB, tC;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){n, n}, NULL, dA);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){n, n}, NULL, dB);
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){n, n}, NULL, dC);
    er_standard std;
    CHECK(er_standard_parse(&std, "mma:sm90", "outer=any"));
    double tx[3], tk[3], tb[3];
    er_report rep;
    int pass = 0, kpass = 0;
    long long exact = 0, covered = 0;
    for (int r = 0; r < 3; r++) {
        const double d1 = 1.0, d0 = 0.0;
        double t0 = now();
        CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &d1, dBd, n, dAd, n, &d0, dCd, n));
        CHECK(cudaDeviceSynchronize());
        double t1 = now();
        if (er_matmul_covers_device(&rep, &tA, &tB, &tC, &std, NULL) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
        double t2 = now();
        tb[r] = t1 - t0;
        tx[r] = t2 - t1;
        pass = er_report_all(&rep);
        exact = (long long)rep.counts[ER_CLASS_EXACT];
        covered = (long long)rep.counts[ER_CLASS_COVERED];
        er_report_clear(&rep);
        /* the same check into a report that keeps its classes on the device (as Python's check of CUDA tensors) */
        CHECK(er_report_keep_on_device(&rep));
        t0 = now();
        if (er_matmul_covers_device(&rep, &tA, &tB, &tC, &std, NULL) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
        tk[r] = now() - t0;
        kpass = er_report_all(&rep) && rep.classes == NULL && rep.counts[ER_CLASS_EXACT] == exact;
        er_report_clear(&rep);
    }
    double x = median3(tx), y = median3(tb), xk = median3(tk);
    printf("matmul_covers_device_fp16_%dx%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: cuBLAS fp64 GEMM of the same shape on the "
           "same GPU; medians of 3 alternating rounds; output of cuBLAS's fp16 GEMM with fp32 accumulation under mma:sm90 outer=any: "
           "verdict %s, exact %lld, covered %lld; the classes copied to the host)\n", n, n, n, x, y, x / y, pass ? "pass" : "FAIL",
           exact, covered);
    printf("matmul_covers_device_kept_fp16_%dx%dx%d: %.4f s vs baseline %.4f s = %.2fx  (the same check into a report that keeps its "
           "classes on the device, er_report_keep_on_device, as Python's check of CUDA tensors: verdict %s)\n", n, n, n, xk, y, xk / y,
           kpass ? "pass, classes on the device" : "FAIL");
    /* a kernel with a bug: the same GEMM with the last 16 products of each sum dropped; its check against the check
     * of the correct output, alternating */
    void *dX;
    CHECK(cudaMalloc(&dX, 4 * nn));
    CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n - 16, &one, dB, CUDA_R_16F, n, dA, CUDA_R_16F, n, &zero, dX,
                       CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CHECK(cudaDeviceSynchronize());
    er_tensor tX;
    er_tensor_view(&tX, ER_FP32, 2, (int64_t[]){n, n}, NULL, dX);
    long long outside = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        if (er_matmul_covers_device(&rep, &tA, &tB, &tC, &std, NULL) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
        double t1 = now();
        er_report_clear(&rep);
        if (er_matmul_covers_device(&rep, &tA, &tB, &tX, &std, NULL) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
        double t2 = now();
        outside = (long long)rep.counts[ER_CLASS_OUTSIDE];
        er_report_clear(&rep);
        tb[r] = t1 - t0;
        tx[r] = t2 - t1;
    }
    x = median3(tx);
    y = median3(tb);
    printf("matmul_covers_device_failing_fp16_%dx%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: the check of the correct "
           "output; the failing output drops the last 16 products of each sum: %lld of %lld elements outside)\n", n, n, n, x, y,
           x / y, outside, (long long)nn);
    cudaFree(dX);
    cudaFree(dA); cudaFree(dB); cudaFree(dC); cudaFree(dAd); cudaFree(dBd); cudaFree(dCd);
    free(A); free(B); free(ad); free(bd);
}

int main(int argc, char **argv) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { printf("bench_device: no CUDA device here\n"); return 0; }
    cublasHandle_t h;
    CHECK(cublasCreate(&h));
    if (argc > 1) for (int i = 1; i < argc; i++) run(h, atoi(argv[i]));
    else { run(h, 2048); run(h, 4096); run(h, 8192); }
    cublasDestroy(h);
    return 0;
}
