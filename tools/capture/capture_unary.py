"""Unary functions on the GPU, for the unary stages of chains (docs/algorithms/chains.md, Lemmas C6 to C8): torch's
CUDA exp, exp2, log, tanh, sigmoid, erf and rsqrt on fp32, fp16 and bf16; the same in a Triton kernel (tl.exp,
tl.exp2, tl.log, tl.sigmoid, tl.math.rsqrt, tl.erf, libdevice tanh; masked lanes past the end) and in a CUDA kernel
calling expf, exp2f, logf, tanhf, erff and rsqrtf (CuPy, default options). Inputs that tell models apart: arguments
whose results sit at and around powers of two (k ln 2, integers, exp(2^j), 4^k), near overflow and underflow,
subnormals, signed zeros, infinities and NaN, and a sweep. Writes OUT/unary.npz (each dtype's inputs once,
gNN__in__x; each case's output cNNNN__out__y) and OUT/unary.txt (id source function dtype n group).
Run: OUT=/some/dir python3 capture_unary.py"""
import math
import os

import cupy as cp
import numpy as np
import torch
import triton
import triton.language as tl

from capture_common import store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []
FUNCS = ("exp", "exp2", "log", "tanh", "sigmoid", "erf", "rsqrt")


def neighbours(v, k=2):
    """float32 values v and k floats either side of each."""
    v = np.asarray(v, np.float32)
    out = [v]
    up, dn = v.copy(), v.copy()
    for _ in range(k):
        up = np.nextafter(up, np.float32(np.inf))
        dn = np.nextafter(dn, np.float32(-np.inf))
        out += [up, dn]
    return np.concatenate(out)


def inputs32():
    ln2 = math.log(2)
    parts = [np.linspace(-30, 30, 4001),
             neighbours([k * ln2 for k in range(-150, 129)]),                  # exp at powers of two
             neighbours(np.arange(-150, 129, dtype=np.float64)),                 # exp2 at powers of two
             neighbours([math.exp(2.0 ** j) for j in range(-20, 7)] + [math.exp(-(2.0 ** j)) for j in range(-20, 7)]),
             neighbours([4.0 ** k for k in range(-74, 64)] + [2 * 4.0 ** k for k in range(-74, 63)]),  # rsqrt
             [math.atanh(1 - 2.0 ** -j) for j in range(1, 12)] + [math.atanh(2.0 ** -j) for j in range(1, 40)],
             [88.72, 88.7228, 88.73, -87.33, -87.34, -100.0, -103.2, -104.0, -110.0, 1e-30, -1e-30, 1e-40, -1e-40,
              1.17549435e-38, 3.4028235e38, -3.4028235e38, 1e-45, 0.0, -0.0, np.inf, -np.inf, np.nan]]
    x = np.concatenate([np.asarray(p, np.float64).astype(np.float32) for p in parts])
    return x[np.isfinite(x) | np.isnan(x) | np.isinf(x)]


@triton.jit
def unary_kernel(X, Y, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(X + i, mask=m, other=0.0)
    if FN == 0:
        y = tl.exp(x)
    elif FN == 1:
        y = tl.exp2(x)
    elif FN == 2:
        y = tl.log(x)
    elif FN == 3:
        y = tl.extra.cuda.libdevice.tanh(x)
    elif FN == 4:
        y = tl.sigmoid(x)
    elif FN == 5:
        y = tl.erf(x)
    else:
        y = tl.math.rsqrt(x)
    tl.store(Y + i, y, mask=m)


CUDA_SRC = r'''
extern "C" __global__ void un(const float* x, float* y, int n, int fn) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    y[i] = fn == 0 ? expf(v) : fn == 1 ? exp2f(v) : fn == 2 ? logf(v) : fn == 3 ? tanhf(v) : fn == 4 ? 1.0f / (1.0f + expf(-v))
         : fn == 5 ? erff(v) : rsqrtf(v);
}
'''


def add(source, fn, dt, gid, y):
    cid = "c%04d" % len(lines)
    store_case(arrays, cid, {}, {"y": y})
    lines.append("%s %s %s %s %d %s" % (cid, source, fn, dt, y.numel(), gid))


x32 = torch.from_numpy(inputs32()).cuda()
groups = {}
for dt, name in ((torch.float32, "float32"), (torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
    x = x32.to(dt)
    gid = "g%02d" % len(groups)
    groups[name] = (gid, x)
    store_case(arrays, gid, {"x": x}, {})
    for fn in FUNCS:
        y = getattr(torch, fn)(x)
        torch.cuda.synchronize()
        add("torch", fn, name, gid, y)

gid, x = groups["float32"]
n = x.numel()
for k, fn in enumerate(FUNCS):
    y = torch.empty_like(x)
    unary_kernel[(triton.cdiv(n, 1024),)](x, y, n, FN=k, BLOCK=1024)
    torch.cuda.synchronize()
    add("triton", fn, "float32", gid, y)

mod = cp.RawModule(code=CUDA_SRC)
kern = mod.get_function("un")
xc = cp.asarray(x)
for k, fn in enumerate(FUNCS):
    yc = cp.empty_like(xc)
    kern(((n + 255) // 256,), (256,), (xc, yc, np.int32(n), np.int32(k)))
    cp.cuda.Device().synchronize()
    add("cuda", fn, "float32", gid, torch.as_tensor(yc, device="cuda"))

write_case_files(OUT, "unary", arrays, lines, torch_header(), compressed=True)
print("captured %d cases of %d elements" % (len(lines), n))
