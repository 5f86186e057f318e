// splitk_kernel.cu: a split-K matmul kernel in CUDA, and the host calls a C test or example uses to run it.
//
// C[i][j] = sum over S chunks of ceil(K/S) products: each chunk is summed with fma from zero by one thread
// (blockIdx.z picks the chunk), then added to C with atomicAdd. The atomics arrive in any order: the standard
// describing the kernel is `split:S fma=always outer=any` (any_order covers it too). With `buggy` set, the
// last chunk stops one product short: the classic dropped-tail bug.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void splitk_f16(const __half *A, const __half *B, float *C, int M, int N, int K, int S, int buggy) {
    int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x, z = blockIdx.z;
    if (i >= M || j >= N) return;
    int c = (K + S - 1) / S, k0 = z * c, k1 = min(K, k0 + c);
    if (buggy && z == S - 1) k1 -= 1;
    if (k0 >= k1) return;
    float acc = 0.0f;
    for (int k = k0; k < k1; k++) acc = __fmaf_rn(__half2float(A[(long)i * K + k]), __half2float(B[(long)k * N + j]), acc);
    atomicAdd(&C[(long)i * N + j], acc);
}

extern "C" int splitk_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
}

// Uploads A (M x K) and B (K x N) fp16 patterns, zeroes C, runs the kernel on `stream` (not synchronised: the
// caller's exactref call copies C back on the same stream). Returns a cudaError_t; *C_device is the output.
extern "C" int splitk_run(const uint16_t *A, const uint16_t *B, int M, int N, int K, int S, int buggy, float **C_device,
                          void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    __half *dA = 0, *dB = 0;
    float *dC = 0;
    cudaError_t e = cudaMalloc(&dA, sizeof(__half) * (size_t)M * K);
    if (!e) e = cudaMalloc(&dB, sizeof(__half) * (size_t)K * N);
    if (!e) e = cudaMalloc(&dC, sizeof(float) * (size_t)M * N);
    if (!e) e = cudaMemcpyAsync(dA, A, sizeof(__half) * (size_t)M * K, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaMemcpyAsync(dB, B, sizeof(__half) * (size_t)K * N, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaMemsetAsync(dC, 0, sizeof(float) * (size_t)M * N, s);
    if (!e) {
        dim3 block(16, 16, 1), grid((N + 15) / 16, (M + 15) / 16, S);
        splitk_f16<<<grid, block, 0, s>>>(dA, dB, dC, M, N, K, S, buggy);
        e = cudaGetLastError();
    }
    if (!e) e = cudaStreamSynchronize(s);  // the inputs can go; C stays
    cudaFree(dA);
    cudaFree(dB);
    if (e) { cudaFree(dC); return (int)e; }
    *C_device = dC;
    return 0;
}

extern "C" void splitk_free(float *C_device) { cudaFree(C_device); }
