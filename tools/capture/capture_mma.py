"""Capture real H200 tensor-core outputs for the mma standards and the fp8 scaled matmul:
- Triton tl.dot over one 64 x 64 tile, K consumed in BLOCK_K chunks (acc += tl.dot(a, b)): fp16, bf16 and tf32
  inputs, fp32 output. The wgmma chain runs the 16-deep (8 for tf32) blocks in order, so these are the fixed-order
  cases the mma emulation must reproduce bit for bit.
- cuBLAS (torch.mm with out_dtype=float32) on the same kind of inputs, K up to 4096: its order is unknown, so
  these must lie in the "MMA blocks in any order" set.
- torch._scaled_mm on e4m3 inputs with per-tensor fp32 scales, use_fast_accum True and False, fp32 and bf16
  outputs.
Inputs are built to make truncation visible: wide exponent ranges, cancellation, and one large product beside
many small ones. Writes OUT/mma.npz and OUT/mma.txt, one case a line:  id  kernel  dtype  K  BLOCK_K  extra
Run: OUT=/some/dir python3 capture_mma.py
"""
import os
import torch
import triton
import triton.language as tl
from capture_common import host, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


def add(kernel, dtype, K, BK, extra, tensors):
    cid = "mma%04d" % len(lines)
    for k, v in tensors.items():
        arrays["%s__%s" % (cid, k)] = host(v)
    lines.append("%s %s %s %d %d %s" % (cid, kernel, dtype, K, BK, extra))


def gen(dist, shape, g):
    if dist == "randn":
        return torch.randn(shape, generator=g)
    if dist == "wide":   # sign * 2^[-12, 4] * (1 + random fraction): partial sums of very different magnitudes
        e = torch.randint(-12, 5, shape, generator=g).float()
        return torch.sign(torch.randn(shape, generator=g)) * torch.exp2(e) * (1 + torch.rand(shape, generator=g))
    if dist == "cancel":  # pairs that nearly cancel: the block's largest exponent is far above its result
        x = torch.randn(shape, generator=g) * 16
        h = shape[-1] // 2 if len(shape) == 2 and shape[-1] > 1 else 0
        if h:
            x[:, h:2 * h] = -x[:, :h] + torch.randn(shape[0], h, generator=g) * 2 ** -6
        return x
    if dist == "probe":  # one product near 1, the rest near 2^-24: below the truncation point of the block
        x = torch.exp2(torch.full(shape, -12.0)) * (1 + torch.randint(0, 8, shape, generator=g).float() / 8)
        x[..., 0] = torch.where(torch.rand(shape[:-1], generator=g) < 0.5, -1.0, 1.0)
        return x
    raise ValueError(dist)


@triton.jit
def mm_k(A, B, C, K, BK: tl.constexpr, TF32: tl.constexpr):
    rm = tl.arange(0, 64)
    rn = tl.arange(0, 64)
    rk = tl.arange(0, BK)
    acc = tl.zeros((64, 64), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(A + rm[:, None] * K + (k0 + rk)[None, :])
        b = tl.load(B + (k0 + rk)[:, None] * 64 + rn[None, :])
        if TF32:
            acc += tl.dot(a, b, input_precision="tf32")
        else:
            acc += tl.dot(a, b)
    tl.store(C + rm[:, None] * 64 + rn[None, :], acc)


g = torch.Generator().manual_seed(90)
for dt, name in ((torch.float16, "fp16"), (torch.bfloat16, "bf16"), (torch.float32, "tf32")):
    for K, BK in ((16, 16), (32, 16), (32, 32), (64, 64), (128, 32), (512, 64)):
        for dist in ("wide", "cancel", "probe", "randn"):
            A = gen(dist, (64, K), g).to(dt).cuda()
            Bt = gen(dist, (64, K), g)
            if dist == "probe":
                Bt[:, 0] = 1.0
            B = Bt.t().contiguous().to(dt).cuda()
            C = torch.empty(64, 64, device="cuda", dtype=torch.float32)
            mm_k[(1,)](A, B, C, K, BK=BK, TF32=dt == torch.float32)
            add("triton_tl.dot_chain", name, K, BK, dist, {"in__A": A, "in__B": B, "out__C": C})
for dt, name in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
    for K in (16, 48, 256, 4096):
        for dist in ("wide", "cancel", "probe"):
            A = gen(dist, (64, K), g).to(dt).cuda()
            Bt = gen(dist, (48, K), g)
            if dist == "probe":
                Bt[:, 0] = 1.0
            B = Bt.t().contiguous().to(dt).cuda()
            C = torch.mm(A, B, out_dtype=torch.float32)
            add("cublas_mm_out_fp32", name, K, 0, dist, {"in__A": A, "in__B": B, "out__C": C})
# fp8 scaled matmul: A (M, K) row-major, B (K, N) column-major, per-tensor scales
for K in (64, 512, 4096):
    for dist in ("uniform_pos", "randn"):
        for fast in (True, False):
            for odt, oname in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
                if dist == "randn":
                    a = torch.randn(64, K, generator=g) * 8
                    bt = torch.randn(32, K, generator=g) * 8
                else:
                    a = torch.rand(64, K, generator=g) * 16 + 1
                    bt = torch.rand(32, K, generator=g) * 16 + 1
                A8 = a.to(torch.float8_e4m3fn).cuda()
                B8 = bt.to(torch.float8_e4m3fn).cuda().t()      # column-major (K, N)
                sa = torch.tensor(0.5, device="cuda")
                sb = torch.tensor(0.125, device="cuda")
                C = torch._scaled_mm(A8, B8, sa, sb, out_dtype=odt, use_fast_accum=fast)
                add("scaled_mm_fast_accum_%d" % int(fast), "e4m3", K, 0, "%s,%s,0.5,0.125" % (dist, oname),
                    {"in__A": A8, "in__B": B8.t(), "out__C": C})
torch.cuda.synchronize()
write_case_files(OUT, "mma", arrays, lines, torch_header())
print("mma cases:", len(lines))
