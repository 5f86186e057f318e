"""More fused forms for chains and quantisation (docs/algorithms/chains.md, Lemma C9; quantize.md, Lemma Q4):
- a Triton GEMM with bias then gelu's tanh form written as acc * tl.sigmoid(2 sqrt(2/pi) (acc + 0.044715 acc^3))
  and as acc / (1 + tl.exp(-...)), fp16 and bf16 stores; two planted bugs with the stages they leave out: bias and
  relu with relu left out, bias and gelu (tanh form) with the bias left out;
- blockwise fp8 quantisation in the inverse recipe (DeepSeek-style act_quant: per block of 128 along the row,
  s = amax / 448 stored, q = x / s), a Triton kernel and torch, fp32 and bf16 inputs; a planted bug, x * s;
- the inputs that tell them from their neighbours: gelu's three tanh forms elementwise with an fp32 output on a
  sweep with |x| in the hundreds and beyond (x^3 overflowing), subnormals and specials; the quantisation on exact
  fp8 midpoints (s = 1), an all-zero block, subnormal and huge values and an infinity.
Writes OUT/fused_forms.npz (each group's inputs once, gNN__in__...; each case's outputs cNNNN__out__...) and
OUT/fused_forms.txt (id kind dtype M N K group). Run: OUT=/some/dir python3 capture_fused_forms.py"""
import os

import torch
import triton
import triton.language as tl

from capture_common import new_group, store_case, torch_header, write_case_files
from triton_gemm import gemm_bias_inputs, gemm_tile

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


@triton.jit
def gemm_bias_form(A, B, BIAS, C, M, N, K, ACT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = gemm_tile(A, B, M, N, K, rm, rn, BM, BN, BK)
    bias = tl.load(BIAS + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if ACT == 3:    # planted bug: the bias left out of bias + gelu (tanh form)
        x = acc
    else:
        x = acc + bias
    if ACT == 0:
        y = x * tl.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))
    elif ACT == 1:
        y = x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))
    elif ACT == 2:  # planted bug: relu left out of bias + relu
        y = x
    else:
        y = 0.5 * x * (1.0 + tl.extra.cuda.libdevice.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    tl.store(C + rm[:, None] * N + rn[None, :], y.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def act_quant(X, Q, S, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """One program per block of BLOCK along a row of N: s = max |x| / 448, q = x / s (x * s: the planted bug)."""
    row = tl.program_id(0)
    cb = tl.program_id(1)
    offs = cb * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + row * N + offs, mask=offs < N, other=0.0).to(tl.float32)
    s = tl.max(tl.abs(x)) / 448.0
    if BUG:
        y = x * s
    else:
        y = x / s
    tl.store(Q + row * N + offs, y.to(Q.dtype.element_ty), mask=offs < N)
    tl.store(S + row * tl.cdiv(N, BLOCK) + cb, s)


def add(kind, dtype, gid, M, N, K, outs):
    cid = "c%04d" % len(lines)
    store_case(arrays, cid, {}, outs)
    lines.append("%s %s %s %d %d %d %s" % (cid, kind, dtype, M, N, K, gid))


g = torch.Generator(device="cuda").manual_seed(23)
for dt, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
    for (M, N, K), scale in (((64, 48, 256), 3.0), ((96, 80, 1000), 8.0)):
        A, B, bias = gemm_bias_inputs(g, dt, M, N, K, scale)
        gid = new_group(arrays, {"A": A, "B": B, "bias": bias})
        for act, kind in ((0, "triton_gelu_sigmoid_mul"), (1, "triton_gelu_sigmoid_div"), (2, "bug_relu_left_out"),
                          (3, "bug_bias_left_out")):
            y = torch.empty(M, N, device="cuda", dtype=dt)
            gemm_bias_form[(triton.cdiv(M, 32), triton.cdiv(N, 32))](A, B, bias, y, M, N, K, ACT=act, BM=32, BN=32, BK=32)
            torch.cuda.synchronize()
            add(kind, name, gid, M, N, K, {"y": y})

# blockwise quantisation, inverse recipe: rows x 128-blocks, inputs with rows of very different magnitudes, a row of
# zeros left out (x / 0 is NaN in every recipe of this kind), a partial last block
for dt, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
    for rows, cols in ((32, 512), (24, 1000)):
        x = (torch.randn(rows, cols, device="cuda", generator=g) *
             torch.exp2(torch.randint(-12, 12, (rows, 1), device="cuda", generator=g).float())).to(dt)
        gid = new_group(arrays, {"x": x})
        nb = triton.cdiv(cols, 128)
        for bug, kind in ((0, "triton_act_quant"), (1, "bug_triton_times_s")):
            q = torch.empty(rows, cols, device="cuda", dtype=torch.float8_e4m3fn)
            s = torch.empty(rows, nb, device="cuda", dtype=torch.float32)
            act_quant[(rows, nb)](x, q, s, cols, BLOCK=128, BUG=bug)
            torch.cuda.synchronize()
            add(kind, name, gid, rows, cols, 128, {"q": q, "s": s})
        xf = torch.nn.functional.pad(x.float(), (0, nb * 128 - cols)).view(rows, nb, 128)
        s = xf.abs().amax(dim=2) / 448.0
        q = (xf / s[:, :, None]).view(rows, nb * 128)[:, :cols].to(torch.float8_e4m3fn)
        add("torch_act_quant", name, gid, rows, cols, 128, {"q": q, "s": s})

# the inputs that tell the forms and recipes apart, not only randn: gelu's tanh form as tanh, x sigmoid(2u) and
# x / (1 + exp(-2u)) elementwise with an fp32 output (where the forms differ by ulps), on a dense sweep, |x| in the
# hundreds and far beyond (x^3 overflows past 1e13), subnormals, signed zeros and specials
@triton.jit
def gelu_tanh_forms(X, Y, n, FORM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.0)
    if FORM == 0:
        y = 0.5 * x * (1.0 + tl.extra.cuda.libdevice.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    elif FORM == 1:
        y = x * tl.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))
    else:
        y = x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))
    tl.store(Y + offs, y, mask=offs < n)


edge = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-45, -1e-45, 1e-40, -1e-40, 1.1754944e-38, -1.1754944e-38,
        100.0, -100.0, 300.0, -300.0, 1e5, -1e5, 3e12, -3e12, 1e13, -1e13, 1e30, -1e30, 3.4e38, -3.4e38]
x = torch.cat([torch.linspace(-12, 12, 24001, dtype=torch.float64), torch.tensor(edge, dtype=torch.float64)]).float().cuda()
gid = new_group(arrays, {"x": x})
for form, kind in ((0, "triton_gelu_tanh_form"), (1, "triton_gelu_sigmoid_mul_form"), (2, "triton_gelu_sigmoid_div_form")):
    y = torch.empty_like(x)
    gelu_tanh_forms[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), FORM=form, BLOCK=1024)
    torch.cuda.synchronize()
    add(kind, "float32", gid, 1, x.numel(), 0, {"y": y})

# blockwise quantisation on the edges: a block whose amax is 448 (s = 1) with values on e4m3 midpoints (q must round
# to even), an all-zero block (s = 0: q = 0 / 0), subnormal values, values near 1e30, a block holding an infinity
xe = torch.zeros(4, 256, dtype=torch.float64)
k = torch.arange(1, 128, dtype=torch.float64)
xe[0, 0] = 448.0
xe[0, 1:128] = torch.ldexp(1.0 + (2 * (k % 7) + 1) / 16.0, (k % 9 - 4).long()) * torch.where(k % 2 == 1, -1.0, 1.0)
xe[1, :128] = torch.linspace(-1e-38, 1e-38, 128) * torch.tensor([1.0, 1e-3]).repeat(64)
xe[1, 128:] = 1e-42 * torch.arange(128, dtype=torch.float64)
xe[2, :] = 1e30 * torch.linspace(-1, 1, 256)
xe[3, :128] = torch.linspace(-3, 3, 128)
xe[3, 130] = float("inf")
xe = xe.float().cuda()
gid = new_group(arrays, {"x": xe})
q = torch.empty(4, 256, device="cuda", dtype=torch.float8_e4m3fn)
s = torch.empty(4, 2, device="cuda", dtype=torch.float32)
act_quant[(4, 2)](xe, q, s, 256, BLOCK=128, BUG=0)
torch.cuda.synchronize()
add("triton_act_quant_edges", "float32", gid, 4, 256, 128, {"q": q, "s": s})
s = xe.view(4, 2, 128).abs().amax(dim=2) / 448.0
q = (xe.view(4, 2, 128) / s[:, :, None]).view(4, 256).to(torch.float8_e4m3fn)
add("torch_act_quant_edges", "float32", gid, 4, 256, 128, {"q": q, "s": s})
write_case_files(OUT, "fused_forms", arrays, lines, torch_header(), compressed=True)
print("captured %d cases" % len(lines))
