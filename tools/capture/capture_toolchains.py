"""Capture what real toolchains do where models fitted on random data cannot tell them apart.

1. The ulp error of each PTX approximation Triton and CUDA lower fp32 math to, over every fp32 input (2^32 per
   function; exhaustive, so for this GPU the bound is a fact, not a sample): ex2.approx(.ftz), lg2.approx(.ftz),
   rsqrt.approx(.ftz), sqrt.approx(.ftz), CUDA's logf and expf (with and without -ftz), __expf; and div.full.f32 on
   random and extreme pairs. Each error is measured both ways: against the exact value (ulp of the format at the
   exact value) and against the correctly rounded value (CUDA's table's reading); and how subnormal results come
   out (flushed to zero or not). Written to OUT/ulps.txt.
2. Matmuls on fp32 operands rich in exact tf32 ties (low 13 bits 0x1000): cuBLAS with TF32 on, Triton tl.dot with
   input_precision "tf32" (raw bits), "tf32x3", and Triton tl.dot fed operands converted by cvt.rn.tf32.f32 and by
   cvt.rna.tf32.f32 (CUTLASS on sm90 and below sm90). K = 1, 2, 3, 16, 64 and 1031.
   OUT/tcmm.npz and OUT/tcmm.txt in the format of orders.txt:  id kernel order opts wrong-order wrong-opts emulate.
3. Row kernels: Triton softmax (tl.exp), log_softmax (tl.log), rmsnorm (tl.math.rsqrt) and layernorm on inputs
   scaled to |x| up to 300, on rows with masked (-inf) lanes and padded blocks, and on rows whose exps or squares
   are subnormal; a CUDA softmax built with --use_fast_math. OUT/tcrow.npz and OUT/tcrow.txt, one case a line:
   id  op  kernel  eps  standard-options  wrong-options: every case is covered under its standard's options, and
   each kernel has a case outside the wrong options ("default": the default standard; "-": none).

Run on a machine with an NVIDIA GPU, torch, Triton and CuPy:  OUT=/some/dir python3 capture_toolchains.py [ulps]
"""
import os
import sys

import numpy as np
import torch
import triton
import triton.language as tl
from capture_common import cuda_row_softmax, store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
g = torch.Generator().manual_seed(2027)


# ---------------------------------------------------------------- 1. exhaustive ulp errors
def measure_ulps():
    import cupy as cp
    src = r'''
    __device__ __forceinline__ double ulp32(double r) {      /* spacing of fp32 upward from |r|'s power of two */
        double a = fabs(r);
        if (a < 0x1p-125) return 0x1p-149;
        int e; frexp(a, &e);
        return ldexp(1.0, e - 24);
    }
    __device__ __forceinline__ float fn(int f, float x) {
        float y;
        switch (f) {
        case 0: asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); break;
        case 1: asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); break;
        case 2: asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); break;
        case 3: asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); break;
        case 4: asm("rsqrt.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); break;
        case 5: asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); break;
        case 6: asm("sqrt.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); break;
        case 7: asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); break;
        case 8: y = logf(x); break;
        case 9: y = expf(x); break;
        default: y = __expf(x); break;
        }
        return y;
    }
    __device__ __forceinline__ double ref(int f, double x) {
        if (f <= 1 || f == 9 || f == 10) return f <= 1 ? exp2(x) : exp(x);
        if (f <= 3) return log2(x);
        if (f <= 5) return rsqrt(x);
        if (f <= 7) return sqrt(x);
        return log(x);
    }
    /* stats: [0] max ulps vs exact, [1] max ulps vs correctly rounded (normal results), [2] max |y - r| in units
     * of 2^-149 for subnormal exact results, [3] count of subnormal results flushed to zero, [4] count of
     * subnormal results, [5] for expf and __expf: max of the smaller reading's error less 2 + floor(1.173 |x|),
     * CUDA's __expf bound */
    extern "C" __global__ void sweep(int f, unsigned long long start, unsigned long long count, unsigned long long *st) {
        unsigned long long i = start + blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
        unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
        float m0 = 0, m1 = 0, m2 = 0, m5 = -1e30f; unsigned long long flushed = 0, subn = 0;
        for (; i < start + count; i += step) {
            float x = __uint_as_float((unsigned)i);
            if (!isfinite(x)) continue;
            double r = ref(f, (double)x);
            if (!isfinite(r) || isnan(r)) continue;
            float y = fn(f, x);
            if (fabs(r) > 0x1.fffffep127) continue;
            if (fabs(r) < 0x1p-126) {
                if (r == 0) continue;
                subn++;
                if (y == 0.0f) { flushed++; continue; }
                float d = (float)(fabs((double)y - r) / 0x1p-149);
                m2 = fmaxf(m2, d);
                continue;
            }
            if (!isfinite(y)) { m0 = m1 = 1e30f; continue; }
            double e0 = fabs((double)y - r) / ulp32(r);
            float c = __double2float_rn(r);
            double e1 = fabs((double)y - (double)c) / ulp32((double)c);
            m0 = fmaxf(m0, (float)e0);
            m1 = fmaxf(m1, (float)e1);
            if (f >= 9) m5 = fmaxf(m5, (float)(fmin(e0, e1) - 2.0 - floor(1.173 * fabs((double)x))));
        }
        atomicMax(&st[0], (unsigned long long)__float_as_uint(m0));
        atomicMax(&st[1], (unsigned long long)__float_as_uint(m1));
        atomicMax(&st[2], (unsigned long long)__float_as_uint(m2));
        atomicAdd(&st[3], flushed);
        atomicAdd(&st[4], subn);
        /* m5 may be negative: stored shifted so that the order of the bits is the order of the values */
        if (f >= 9) atomicMax(&st[5], (unsigned long long)__float_as_uint(m5 + 1e6f));
    }
    /* div.full.f32 on pairs (a, b) */
    extern "C" __global__ void divs(const float *a, const float *b, long n, unsigned long long *st) {
        long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
        if (i >= n) return;
        float y;
        asm("div.full.f32 %0, %1, %2;" : "=f"(y) : "f"(a[i]), "f"(b[i]));
        double r = (double)a[i] / (double)b[i];
        if (!isfinite(r) || fabs(r) < 0x1p-126 || fabs(r) > 0x1.fffffep127 || !isfinite(y)) return;
        double e0 = fabs((double)y - r) / ulp32(r);
        float c = __double2float_rn(r);
        double e1 = fabs((double)y - (double)c) / ulp32((double)c);
        atomicMax(&st[0], (unsigned long long)__float_as_uint((float)e0));
        atomicMax(&st[1], (unsigned long long)__float_as_uint((float)e1));
    }
    '''
    names = ["ex2.approx.f32", "ex2.approx.ftz.f32", "lg2.approx.f32", "lg2.approx.ftz.f32", "rsqrt.approx.f32",
             "rsqrt.approx.ftz.f32", "sqrt.approx.f32", "sqrt.approx.ftz.f32", "logf", "expf", "__expf"]
    out = ["# exhaustive over the 2^32 fp32 inputs whose exact result is finite and nonzero in fp32's range; %s"
           % torch_header(),
           "# function  build  max_ulps_vs_exact  max_ulps_vs_correctly_rounded  max_subnormal_err_in_2^-149  "
           "subnormal_results_flushed  subnormal_results  max(min(err_exact, err_cr) - 2 - floor(1.173|x|))"]
    for opts, tag in (((), "default"), (("--ftz=true",), "ftz")):
        mod = cp.RawModule(code=src, options=("-std=c++17",) + opts)
        sweep = mod.get_function("sweep")
        for f, name in enumerate(names):
            if tag == "ftz" and f not in (8, 9, 10):
                continue
            st = cp.zeros(6, dtype=cp.uint64)
            chunk = 1 << 30
            for s in range(0, 1 << 32, chunk):
                sweep((4096,), (256,), (np.int32(f), np.uint64(s), np.uint64(chunk), st))
            cp.cuda.runtime.deviceSynchronize()
            v = st.get()
            fl = [np.array([v[k]], dtype=np.uint64).astype(np.uint32).view(np.float32)[0] for k in (0, 1, 2, 5)]
            out.append("%s %s %.6f %.6f %.3f %d %d %.4f" % (name, tag, fl[0], fl[1], fl[2], v[3], v[4], fl[3] - 1e6))
        if tag == "default":
            divs = mod.get_function("divs")
            rng = np.random.default_rng(7)
            n = 1 << 26
            st = cp.zeros(2, dtype=cp.uint64)
            for rep in range(8):
                bits = rng.integers(0, 1 << 32, size=(2, n), dtype=np.uint64).astype(np.uint32)
                a = bits[0].view(np.float32).copy()
                b = bits[1].view(np.float32).copy()
                if rep >= 4:  # quotients near 1 and powers of two: mantissas near each other
                    b = (a * np.float32(2.0) ** rng.integers(-3, 4, size=n).astype(np.float32)
                         * (1 + rng.standard_normal(n).astype(np.float32) * 1e-6)).astype(np.float32)
                da, db = cp.asarray(a), cp.asarray(b)
                divs(((n + 255) // 256,), (256,), (da, db, np.int64(n), st))
            cp.cuda.runtime.deviceSynchronize()
            v = st.get()
            fl = [np.array([v[k]], dtype=np.uint64).astype(np.uint32).view(np.float32)[0] for k in (0, 1)]
            out.append("div.full.f32 sampled_%d_pairs %.6f %.6f - - - -" % (8 * n, fl[0], fl[1]))
    with open(os.path.join(OUT, "ulps.txt"), "w") as fh:
        fh.write("\n".join(out) + "\n")
    print("\n".join(out))


# ---------------------------------------------------------------- 2. tf32 matmuls on tie-rich operands
@triton.jit
def mm_k(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr, CVT: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(A + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(B + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if CVT == 1:
            a = tl.inline_asm_elementwise("cvt.rn.tf32.f32 $0, $1;", "=r,f", [a], dtype=tl.int32, is_pure=True,
                                          pack=1).to(tl.float32, bitcast=True)
            b = tl.inline_asm_elementwise("cvt.rn.tf32.f32 $0, $1;", "=r,f", [b], dtype=tl.int32, is_pure=True,
                                          pack=1).to(tl.float32, bitcast=True)
        if CVT == 2:
            a = tl.inline_asm_elementwise("cvt.rna.tf32.f32 $0, $1;", "=r,f", [a], dtype=tl.int32, is_pure=True,
                                          pack=1).to(tl.float32, bitcast=True)
            b = tl.inline_asm_elementwise("cvt.rna.tf32.f32 $0, $1;", "=r,f", [b], dtype=tl.int32, is_pure=True,
                                          pack=1).to(tl.float32, bitcast=True)
        if PREC == 0:
            acc += tl.dot(a, b, input_precision="tf32")
        else:
            acc += tl.dot(a, b, input_precision="tf32x3")
    tl.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def ties(x, frac):
    u = x.view(torch.int32)
    t = (u & ~0x1FFF) | 0x1000
    pick = torch.rand(x.shape, generator=g) < frac
    return torch.where(pick, t, u).view(torch.float32)


def matmuls():
    arrays, lines = {}, []

    def add(kernel, A, B, C, cov, wrong):
        cid = "tc%04d" % len(lines)
        store_case(arrays, cid, {"A": A, "B": B}, {"C": C})
        lines.append("\t".join([cid, kernel, cov[0], cov[1], wrong[0], wrong[1], "0"]))

    shapes = ((16, 1, 16), (16, 2, 16), (16, 3, 16), (32, 16, 32), (64, 64, 64), (32, 1031, 48))
    for (M, K, N) in shapes:
        for frac in (0.5, 1.0):
            A = ties(torch.randn(M, K, generator=g), frac)
            B = ties(torch.randn(K, N, generator=g), frac)
            Ad, Bd = A.cuda(), B.cuda()
            torch.backends.cuda.matmul.allow_tf32 = True
            C = Ad @ Bd
            torch.backends.cuda.matmul.allow_tf32 = False
            if K == 1:  # cuBLAS computes K = 1 in fp32, TF32 on or not (seen here: outside every tf32 standard)
                add("cublas_tf32_ties%g" % frac, A, B, C, ("any_order", "compute=fp32"),
                    ("mma:sm90", "outer=any,compute=tf32,tf32=rne"))
            else:
                add("cublas_tf32_ties%g" % frac, A, B, C, ("mma:sm90", "outer=any,compute=tf32,tf32=rne"),
                    ("mma:sm90", "outer=any,compute=tf32,tf32=rna"))
            for prec, cvt, name, cov, wrong in (
                    (0, 0, "triton_tf32", "tf32=truncate", "tf32=rne"),
                    (0, 1, "triton_cvt_rn_tf32", "tf32=rne", "tf32=rna"),
                    (0, 2, "triton_cvt_rna_tf32", "tf32=rna", "tf32=rne"),
                    (1, 0, "triton_tf32x3", "-", "-")):
                C = torch.empty(M, N, device="cuda", dtype=torch.float32)
                mm_k[(triton.cdiv(M, 16), triton.cdiv(N, 16))](Ad, Bd, C, M, N, K, BM=16, BN=16, BK=16, PREC=prec, CVT=cvt)
                if prec == 1:  # below K = 4 the dropped small x small term leaves the fp32 set
                    add(name, A, B, C, ("mma:sm90", "outer=any,compute=tf32x3"),
                        ("any_order", "compute=fp32") if K <= 3 else ("-", "-"))
                else:
                    add(name, A, B, C, ("mma:sm90", "outer=any,compute=tf32," + cov), ("mma:sm90", "outer=any,compute=tf32," + wrong))
    torch.cuda.synchronize()
    write_case_files(OUT, "tcmm", arrays, lines, torch_header())
    print("tcmm cases:", len(lines))


# ---------------------------------------------------------------- 3. row kernels
@triton.jit
def softmax_k(X, Y, n, BLOCK: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(X + row * n + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    if LOG:
        y = (x - m) - tl.log(s)
    else:
        y = e / s
    tl.store(Y + row * n + cols, y, mask=mask)


@triton.jit
def rmsnorm_k(X, W, Y, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(X + row * n + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / n
    r = tl.math.rsqrt(ms + eps)
    tl.store(Y + row * n + cols, x * r * w, mask=mask)


@triton.jit
def layernorm_k(X, Y, Mean, Rstd, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xm = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xm * xm, axis=0) / N
    rstd = tl.math.rsqrt(var + eps)
    tl.store(Y + row * N + cols, (x - mean) * rstd, mask=mask)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)


def rows_kernels():
    arrays, lines = {}, []

    def add(op, kernel, eps, ins, outs, cov, wrong):
        cid = "tr%04d" % len(lines)
        store_case(arrays, cid, ins, outs)
        lines.append("\t".join([cid, op, kernel, "%g" % eps, cov, wrong]))

    R = 8

    def inputs(n, kind):
        if kind.startswith("scale"):
            s = float(kind[5:])
            return torch.randn(R, n, generator=g) * s
        if kind == "masked":
            x = torch.randn(R, n, generator=g) * 8
            x[torch.rand(R, n, generator=g) < 0.3] = -float("inf")
            x[0, :] = -float("inf")      # a fully masked row
            x[1, 1:] = -float("inf")     # one live lane
            return x
        if kind == "subnormal_exps":   # x - max from -80 to -104: exps at and below fp32's least normal
            x = -80 - torch.rand(R, n, generator=g) * 24
            x[:, 0] = 0
            return x
        raise ValueError(kind)

    for op, log in (("softmax", 0), ("log_softmax", 1)):
        for n in (7, 100, 1000):
            for kind in ("scale1", "scale10", "scale30", "scale100", "scale300", "masked", "subnormal_exps"):
                x = inputs(n, kind).float().cuda()
                y = torch.empty_like(x)
                softmax_k[(R,)](x, y, n, BLOCK=triton.next_power_of_2(n), LOG=log)
                add(op, "triton_%s_%s" % (op, kind), 0, {"x": x}, {"y": y}, "math=triton",
                    "default" if op == "softmax" and kind != "scale1" else "-")
    # rmsnorm and layernorm: scaled, tiny (squares subnormal), offset
    for n in (3, 100, 1000):
        for kind, scale, off in (("randn", 1.0, 0.0), ("tiny", 1e-20, 0.0), ("subnormal", 1e-39, 0.0), ("large", 1e15, 0.0),
                                 ("offset", 1.0, 300.0)):
            x = (torch.randn(R, n, generator=g) * scale + off).float().cuda()
            w = (1 + torch.randn(n, generator=g) / 4).float().cuda()
            for eps in (1e-6, 0.0):
                y = torch.empty_like(x)
                rmsnorm_k[(R,)](x, w, y, n, eps, BLOCK=triton.next_power_of_2(n))
                add("rmsnorm", "triton_rmsnorm_%s" % kind, eps, {"x": x, "weight": w}, {"y": y}, "math=triton",
                    "default" if kind == "tiny" else "-")
                y = torch.empty_like(x)
                mean = torch.empty(R, device="cuda", dtype=torch.float32)
                rstd = torch.empty(R, device="cuda", dtype=torch.float32)
                layernorm_k[(R,)](x, y, mean, rstd, n, eps, BLOCK=triton.next_power_of_2(n))
                add("layernorm", "triton_layernorm_%s" % kind, eps, {"x": x}, {"y": y, "mean": mean, "rstd": rstd},
                    "math=triton,variance=two_pass", "variance=two_pass" if kind == "tiny" else "-")
    # CUDA softmax built with --use_fast_math (expf -> __expf, x / y approximate, ftz)
    try:
        import cupy as cp
        k = cuda_row_softmax("expf", "{e} / {s}", ("--use_fast_math",))
        for n in (100, 1000):
            for kind in ("scale1", "scale10", "scale100", "subnormal_exps"):
                x = inputs(n, kind).float().cuda()
                y = torch.empty_like(x)
                k((1,), (R,), (cp.asarray(x), cp.asarray(y), np.int32(n), np.int32(R)))
                cp.cuda.runtime.deviceSynchronize()
                add("softmax", "cuda_softmax_use_fast_math_%s" % kind, 0, {"x": x}, {"y": y}, "math=fast,subnormals=flush", "-")
    except Exception as exc:
        lines.append("# cupy kernel skipped: %s" % exc)
    torch.cuda.synchronize()
    write_case_files(OUT, "tcrow", arrays, lines, torch_header())
    print("tcrow cases:", len(lines))


def ptx_lines():
    """The math instructions in the PTX Triton generates for the row kernels (OUT/ptx.txt)."""
    import re
    out = ["# %s" % torch_header()]
    x = torch.randn(2, 100, device="cuda")
    y = torch.empty_like(x)
    w = torch.ones(100, device="cuda")
    m = torch.empty(2, device="cuda")
    r = torch.empty(2, device="cuda")
    ks = (("softmax", softmax_k[(2,)](x, y, 100, BLOCK=128, LOG=0)), ("log_softmax", softmax_k[(2,)](x, y, 100, BLOCK=128, LOG=1)),
          ("rmsnorm", rmsnorm_k[(2,)](x, w, y, 100, 1e-6, BLOCK=128)),
          ("layernorm", layernorm_k[(2,)](x, y, m, r, 100, 1e-6, BLOCK=128)))
    for name, k in ks:
        ptx = k.asm["ptx"]
        ops = sorted(set(re.findall(r"\b(ex2\.[a-z0-9.]+|lg2\.[a-z0-9.]+|rsqrt\.[a-z0-9.]+|sqrt\.[a-z0-9.]+|div\.[a-z0-9.]+|"
                                    r"rcp\.[a-z0-9.]+|fma\.[a-z0-9.]+|mul\.[a-z]*\.?f32)", ptx)))
        consts = sorted(set(re.findall(r"0f3FB8AA3B|0f3F317218", ptx)))
        out.append("%s: %s %s" % (name, " ".join(ops), " ".join(consts)))
    with open(os.path.join(OUT, "ptx.txt"), "w") as fh:
        fh.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    what = sys.argv[1:] or ["ulps", "mm", "rows", "ptx"]
    if "ptx" in what:
        ptx_lines()
    if "ulps" in what:
        measure_ulps()
    if "mm" in what:
        matmuls()
    if "rows" in what:
        rows_kernels()
