"""fp8 quantisation with an amax on the GPU, for quantize (docs/algorithms/quantize.md): torch per tensor and per row
(amax = x.abs().amax(), scale = 448.0 / amax, q = (x * scale).clamp(-448, 448).to(float8_e4m3fn); e5m2 with 57344),
a Triton per-row kernel (tl.max(tl.abs(x)), 448.0 / amax as div.full.f32, (x * scale).to(tl.float8e4nv), which
saturates), the pow2 recipe in torch, inputs whose scaled values sit on exact midpoints of the fp8 grid, a row of
zeros; and planted bugs: the scale inverted, amax over the wrong axis, a truncating conversion. Writes
OUT/quantize.npz (each group's x once, gNN__in__x; each case's outputs cNNNN__out__q/amax/scale, fp8 as uint8
patterns) and OUT/quantize.txt (id kernel qdtype granularity rows cols group). Run: OUT=/some/dir python3 capture_quantize.py"""
import os

import torch
import triton
import triton.language as tl

from capture_common import new_group, store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


@triton.jit
def quant_rows(X, Q, AMAX, SCALE, cols, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = i < cols
    x = tl.load(X + r * cols + i, mask=m, other=0.0)
    amax = tl.max(tl.abs(x), axis=0)
    scale = 448.0 / amax
    tl.store(AMAX + r, amax)
    tl.store(SCALE + r, scale)
    tl.store(Q + r * cols + i, (x * scale).to(tl.float8e4nv), mask=m)


def add(kind, qname, gran, x, q, amax, scale):
    cid = "c%04d" % len(lines)
    store_case(arrays, cid, {}, {"q": q, "amax": amax.reshape(-1), "scale": scale.reshape(-1)})
    lines.append("%s %s %s %s %d %d %s" % (cid, kind, qname, gran, x.shape[0], x.shape[1], gid))


def torch_quant(x, qdt, qmax, rows, pow2=False, bug=None):
    a = x.abs().amax(dim=1, keepdim=True) if rows else x.abs().amax()
    if bug == "wrong_axis":
        a = x.abs().amax(dim=0, keepdim=True)[:, : x.shape[0]].T if rows else a
    scale = qmax / a
    if pow2:
        scale = torch.exp2(torch.floor(torch.log2(scale)))
    if bug == "inverted":
        scale = a / qmax
    y = (x * scale).clamp(-qmax, qmax)
    if bug == "truncate":
        y = y.to(torch.float64)
        q = y.to(qdt)
        up = q.to(torch.float64).abs() > y.abs()           # rounded away from zero: step back toward it
        q = torch.where(up, (q.view(torch.uint8) - 1).view(qdt), q)
        return q, a, scale
    return y.to(qdt), a, scale


g = torch.Generator(device="cuda").manual_seed(5)
for rows, cols, s in ((64, 512, 1.0), (32, 1000, 300.0), (48, 257, 1e-3)):
    x = torch.randn(rows, cols, device="cuda", generator=g) * s
    x[3] = 0.0                                                # a row of zeros
    # midpoints of the e4m3 grid once scaled: the row's amax 448 gives scale 1
    x[5, 0] = 448.0
    k = torch.arange(1, cols, device="cuda")
    x[5, 1:] = torch.ldexp(1.0 + (2 * (k % 7) + 1).float() / 16.0, (k % 9 - 4)) * torch.where(k % 2 == 1, -1.0, 1.0)
    gid = new_group(arrays, {"x": x})
    for qdt, qname, qmax in ((torch.float8_e4m3fn, "float8_e4m3fn", 448.0), (torch.float8_e5m2, "float8_e5m2", 57344.0)):
        for rows_gran in (False, True):
            q, a, sc = torch_quant(x, qdt, qmax, rows_gran)
            add("torch", qname, "row" if rows_gran else "tensor", x, q, a, sc)
        q, a, sc = torch_quant(x, qdt, qmax, True, pow2=True)
        add("torch_pow2", qname, "row", x, q, a, sc)
    q = torch.empty(rows, cols, device="cuda", dtype=torch.float8_e4m3fn)
    a = torch.empty(rows, device="cuda")
    sc = torch.empty(rows, device="cuda")
    quant_rows[(rows,)](x, q, a, sc, cols, BLOCK=triton.next_power_of_2(cols))
    torch.cuda.synchronize()
    add("triton", "float8_e4m3fn", "row", x, q, a, sc)
    for bug in ("inverted", "wrong_axis", "truncate"):
        q, a, sc = torch_quant(x, torch.float8_e4m3fn, 448.0, True, bug=bug)
        add("bug_" + bug, "float8_e4m3fn", "row", x, q, a, sc)
write_case_files(OUT, "quantize", arrays, lines, torch_header(), compressed=True)
print("captured %d cases" % len(lines))
