"""Capture real H200 outputs of kernels whose summation order and accumulator are known, for the standards
of docs/reference/standard.md: cuBLAS fp32 with TF32 on, Triton matmuls accumulating in fp16 and in fp32 over
BLOCK_K chunks, CUDA-core loops adding one product at a time (with and without FMA), and a split-K kernel that
adds its partials with atomics. Writes OUT/orders.npz (deflated) and OUT/orders.txt, one case a
line:  id  kernel  covered-order  covered-options  not-covered-order  not-covered-options  emulate(0/1)
("-" where a column does not apply). tests/ops/t-gpuorders.c checks every line.

Run on a machine with an NVIDIA GPU, torch, Triton and CuPy:  OUT=/some/dir python3 capture_orders.py
"""
import os
import numpy as np
import torch
from capture_common import store_case, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
dev = "cuda"
arrays = {}
lines = []
counter = [0]


def gen(dist, shape, dtype, g):
    f32 = torch.float32
    if dist == "randn":
        x = torch.randn(shape, generator=g, dtype=f32)
    elif dist == "uniform_pos":
        x = torch.rand(shape, generator=g, dtype=f32) + 0.01
    elif dist == "cancel":
        x = torch.randn(shape, generator=g, dtype=f32) * 64.0
        half = shape[-1] // 2
        x[..., half:2 * half] = -x[..., :half] + torch.randn(x[..., :half].shape, generator=g) * 1e-3
    elif dist == "rounding_probe":
        e = torch.randint(-14, 1, shape, generator=g).to(f32)
        x = torch.sign(torch.randn(shape, generator=g)) * torch.exp2(e)
    elif dist == "fullbits":  # fp32 values with all 24 bits used: exposes tf32 input conversion
        x = torch.randn(shape, generator=g, dtype=f32) * (1 + 2.0 ** -20)
    else:
        raise ValueError(dist)
    return x.to(dtype).to(dev)


def add(kernel, A, B, C, covered, not_covered, emulate):
    cid = "ord%04d" % counter[0]
    counter[0] += 1
    store_case(arrays, cid, {"A": A, "B": B}, {"C": C})
    cov = covered if covered else ("-", "-")
    nco = not_covered if not_covered else ("-", "-")
    lines.append("\t".join([cid, kernel, cov[0], cov[1] or "-", nco[0], nco[1] or "-", "1" if emulate else "0"]))


# ------------------------------------------------------------------ cuBLAS fp32 with TF32
def cublas_tf32(M, N, K, dist, seed):
    g = torch.Generator().manual_seed(seed)
    A, B = gen(dist, (M, K), torch.float32, g), gen(dist, (K, N), torch.float32, g)
    torch.backends.cuda.matmul.allow_tf32 = True
    C = A @ B
    torch.cuda.synchronize()
    torch.backends.cuda.matmul.allow_tf32 = False
    # cuBLAS rounds fp32 operands to tf32 to nearest, ties away (seen on the H200: truncation is not covered);
    # the tensor cores' accumulation truncates, hence rounding=faithful. With K >= 1025 and these data the fp32
    # any-order set is as wide as the tf32 error, so only the smaller K are expected outside it.
    add("cublas_fp32_tf32", A, B, C, ("any_order", "compute=tf32,tf32=rne,rounding=faithful"),
        ("any_order", "compute=fp32") if K <= 300 else None, False)


# ------------------------------------------------------------------ Triton matmuls
import triton
import triton.language as tl


@triton.jit
def mm_kernel(A, B, C, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ACC16: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    if ACC16:
        acc = tl.zeros((BM, BN), dtype=tl.float16)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(A + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(B + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if ACC16:
            acc = tl.dot(a, b, acc, out_dtype=tl.float16)
        else:
            acc += tl.dot(a, b)
    tl.store(C + rm[:, None] * scm + rn[None, :] * scn, acc.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def triton_mm(M, N, K, dist, seed, acc16, BK=32):
    g = torch.Generator().manual_seed(seed)
    A, B = gen(dist, (M, K), torch.float16, g), gen(dist, (K, N), torch.float16, g)
    C = torch.empty((M, N), device=dev, dtype=torch.float16 if acc16 else torch.float32)
    BM, BN = 64, 64
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    mm_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
                    BM=BM, BN=BN, BK=BK, ACC16=acc16)
    torch.cuda.synchronize()
    if acc16:
        add("triton_tl.dot_acc_fp16", A, B, C, ("any_order", "compute=fp16,rounding=faithful"),
            ("any_order", "compute=fp32") if K >= 300 else None, False)
    else:
        # acc += tl.dot(a, b) feeds the running total into the tensor-core sum of each BK chunk: carry=fused
        add("triton_tl.dot_acc_fp32_bk%d" % BK, A, B, C, ("blocked:%d" % BK, "inner=any,carry=fused,rounding=faithful"),
            ("blocked:%d" % BK, "inner=any,rounding=faithful") if dist == "uniform_pos" and K >= 1025 else None, False)


# ------------------------------------------------------------------ CUDA-core loops and split-K atomics (CuPy)
import cupy as cp

SRC = r'''
#include <cuda_fp16.h>
template <typename T> __device__ float ld(const T *p, long i);
template <> __device__ float ld<float>(const float *p, long i) { return p[i]; }
template <> __device__ float ld<__half>(const __half *p, long i) { return __half2float(p[i]); }

template <typename T, bool FMA>
__device__ void seq(const T *A, const T *B, float *C, int M, int N, int K) {
    int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M || j >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        float a = ld(A, (long)i * K + k), b = ld(B, (long)k * N + j);
        acc = FMA ? __fmaf_rn(a, b, acc) : __fadd_rn(acc, __fmul_rn(a, b));
    }
    C[(long)i * N + j] = acc;
}
extern "C" __global__ void seq_f32_fma(const float *A, const float *B, float *C, int M, int N, int K) { seq<float, true>(A, B, C, M, N, K); }
extern "C" __global__ void seq_f32_nofma(const float *A, const float *B, float *C, int M, int N, int K) { seq<float, false>(A, B, C, M, N, K); }
extern "C" __global__ void seq_f16_fma(const __half *A, const __half *B, float *C, int M, int N, int K) { seq<__half, true>(A, B, C, M, N, K); }
extern "C" __global__ void seq_f16_nofma(const __half *A, const __half *B, float *C, int M, int N, int K) { seq<__half, false>(A, B, C, M, N, K); }

/* split-K: blockIdx.z takes chunk z of ceil(K/S) products, adds it with fma from zero, then atomicAdd */
extern "C" __global__ void splitk_atomic(const float *A, const float *B, float *C, int M, int N, int K, int S) {
    int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x, z = blockIdx.z;
    if (i >= M || j >= N) return;
    int c = (K + S - 1) / S, k0 = z * c, k1 = min(K, k0 + c);
    if (k0 >= k1) return;
    float acc = 0.0f;
    for (int k = k0; k < k1; k++) acc = __fmaf_rn(A[(long)i * K + k], B[(long)k * N + j], acc);
    atomicAdd(&C[(long)i * N + j], acc);
}
'''
mod = cp.RawModule(code=SRC, options=("--std=c++14",))


def cuda_seq(M, N, K, dist, seed, half, fma):
    g = torch.Generator().manual_seed(seed)
    dt = torch.float16 if half else torch.float32
    A, B = gen(dist, (M, K), dt, g), gen(dist, (K, N), dt, g)
    C = torch.empty((M, N), device=dev, dtype=torch.float32)
    name = "seq_%s_%s" % ("f16" if half else "f32", "fma" if fma else "nofma")
    f = mod.get_function(name)
    f(((N + 15) // 16, (M + 15) // 16), (16, 16),
      (cp.asarray(A), cp.asarray(B), cp.asarray(C), np.int32(M), np.int32(N), np.int32(K)))
    cp.cuda.Device().synchronize()
    add("cuda_" + name, A, B, C, ("sequential", "fma=%s" % ("always" if fma else "never")),
        None if half or K < 300 or dist == "rounding_probe" else ("sequential", "fma=%s" % ("never" if fma else "always")), True)


def cuda_splitk(M, N, K, S, dist, seed):
    g = torch.Generator().manual_seed(seed)
    A, B = gen(dist, (M, K), torch.float32, g), gen(dist, (K, N), torch.float32, g)
    C = torch.zeros((M, N), device=dev, dtype=torch.float32)
    f = mod.get_function("splitk_atomic")
    f(((N + 15) // 16, (M + 15) // 16, S), (16, 16, 1),
      (cp.asarray(A), cp.asarray(B), cp.asarray(C), np.int32(M), np.int32(N), np.int32(K), np.int32(S)))
    cp.cuda.Device().synchronize()
    add("cuda_splitk%d_atomic" % S, A, B, C, ("split:%d" % S, "fma=always,outer=any"),
        ("split:%d" % (9 - S), "fma=always,outer=any") if K >= 300 else None, False)


def main():
    seed = 100
    for (M, N, K) in [(17, 9, 300), (33, 20, 1025), (3, 7, 5), (16, 16, 2048)]:
        for dist in ("randn", "cancel", "fullbits"):
            seed += 1; cublas_tf32(M, N, K, dist, seed)
        for dist in ("randn", "cancel", "uniform_pos", "rounding_probe"):
            for acc16 in (True, False):
                seed += 1; triton_mm(M, N, K, dist, seed, acc16)
        for dist in ("randn", "cancel", "rounding_probe"):
            for half in (False, True):
                for fma in (True, False):
                    seed += 1; cuda_seq(M, N, K, dist, seed, half, fma)
        for S in (2, 7):
            for dist in ("randn", "cancel"):
                seed += 1; cuda_splitk(M, N, K, S, dist, seed)
    env = "# torch %s, triton %s, cupy %s, %s, capability %s\n" % (
        torch.__version__, triton.__version__, cp.__version__, torch.cuda.get_device_name(), torch.cuda.get_device_capability())
    write_case_files(OUT, "orders", arrays, lines, env)
    print("cases:", len(lines), "errors: 0")


if __name__ == "__main__":
    main()
