/* splitk_matmul.c: check a split-K matmul "kernel" with exactref.
 *
 * The kernel multiplies fp16 matrices the way a split-K GPU kernel does: it cuts K into blocks of 32, adds
 * each block's products in fp32, then adds the block partial sums. That order is not the order of any
 * framework reference, so a tight tolerance may reject it; exactref checks it against the set of every
 * summation order with fp32 accumulation. A variant with a classic bug (the last K block is dropped) is
 * then shown not covered, with the report of its worst element. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <exactref/exactref.h>

#define BLOCK_K 32

/* A fixed generator, so that the printed output is the same on every machine. */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static double uniform(void) {
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

/* The "kernel": C[m][n] = sum over blocks of (fp32 sum of 32 products). drop_last_block plants the bug. */
static void splitk_kernel(const uint16_t *A, const uint16_t *B, float *C, int M, int K, int N, int drop_last_block) {
    int nblocks = (K + BLOCK_K - 1) / BLOCK_K;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float total = 0.0f;
            for (int blk = 0; blk < nblocks - (drop_last_block && nblocks > 1); blk++) {
                float partial = 0.0f;
                for (int k = blk * BLOCK_K; k < K && k < (blk + 1) * BLOCK_K; k++) {
                    double a, b;
                    er_decode(&a, ER_FP16, A[i * K + k]);
                    er_decode(&b, ER_FP16, B[k * N + j]);
                    partial += (float)a * (float)b;
                }
                total += partial;
            }
            C[i * N + j] = total;
        }
}

/* Runs the kernel on one shape and checks it; prints "(m, k, n) covered: True". Returns 1 if covered. */
static int check_shape(int M, int K, int N, int buggy, int print_report) {
    uint16_t *A = malloc(sizeof *A * (size_t)M * K), *B = malloc(sizeof *B * (size_t)K * N);
    float *C = malloc(sizeof *C * (size_t)M * N);
    if (!A || !B || !C) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (int i = 0; i < M * K; i++) { uint64_t bits; er_encode(&bits, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); A[i] = (uint16_t)bits; }
    for (int i = 0; i < K * N; i++) { uint64_t bits; er_encode(&bits, ER_FP16, uniform(), ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); B[i] = (uint16_t)bits; }
    splitk_kernel(A, B, C, M, K, N, buggy);

    er_tensor tA, tB, tC;
    er_tensor_view(&tA, ER_FP16, 2, (int64_t[]){M, K}, NULL, A);
    er_tensor_view(&tB, ER_FP16, 2, (int64_t[]){K, N}, NULL, B);
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){M, N}, NULL, C);
    er_report rep;
    er_status s = er_matmul_covers(&rep, &tA, &tB, &tC, "any_order", "compute=fp32");
    if (s != ER_OK) { fprintf(stderr, "exactref: %s\n", er_last_error()); exit(1); }
    int ok = er_report_all(&rep);
    printf("(%d, %d, %d)%s covered: %s\n", M, K, N, buggy ? " with the last K block dropped," : "", ok ? "True" : "False");
    if (print_report) er_report_fprint(stdout, &rep);
    er_report_clear(&rep);
    free(A); free(B); free(C);
    return ok;
}

int main(void) {
    static const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {64, 256, 32}, {17, 300, 9}};
    int failures = 0;
    printf("split-K kernel, BLOCK_K = %d, fp16 inputs, fp32 accumulation and output:\n", BLOCK_K);
    for (int i = 0; i < 4; i++) failures += !check_shape(shapes[i][0], shapes[i][1], shapes[i][2], 0, 0);
    printf("\nthe same kernel with a bug:\n");
    int caught = !check_shape(17, 300, 9, 1, 1);
    return failures == 0 && caught ? 0 : 1;
}
