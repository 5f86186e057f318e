"""OCP Microscaling (MX) quantisation on the GPU, for quantize's MX recipes (docs/algorithms/quantize.md, Lemma Q5):
a Triton MXFP8 kernel (blocks of 32 per program: tl.max(tl.abs(x)), the shared exponent from amax's fp32 exponent
field, floor or ceiling, held to [-127, 127], x times 2^-e built from its bits, .to(tl.float8e4nv / tl.float8e5),
which saturates; the scale stored as e8m0 bytes) and torch implementations of torchao's four scale modes (floor,
ceil, even, rceil: amax * (1 / qmax) in fp32 rounded up to a power of two) for every MX element format, fp4 and fp6
rounded to nearest even on their grids with torch ops. Inputs fp32 and bf16, 64 x 512: blocks 2^-20 to 2^20 apart,
an all-zero block, block maxima just below a power of two, fp32 subnormals, a NaN in one block and an infinity in
another. Planted bugs: the ceiling's exponent claimed as the spec's floor, the next block's scale, an exponent off by
one (q from the right one), e4m3 without saturation where torch's cast then differs. NVFP4 (blocks of 16): Transformer
Engine's and torchao's forms in torch fp32 and a Triton kernel whose divisions are div.full.f32; bugs: the per-tensor
scale left out, q from the unrounded block scale (torch and Triton). Writes OUT/mx.npz (gNN__in__x;
cNNNN__out__q as uint8 patterns for fp8 and fp32 values for fp4 and fp6, cNNNN__out__scale as e8m0 bytes) and
OUT/mx.txt (id kernel recipe qdtype rows cols group). Run: OUT=/some/dir python3 capture_mx.py"""
import os

import torch
import triton
import triton.language as tl

from capture_common import new_group, store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []
# element formats: (torch dtype or None, exponent bits, fraction bits, bias, largest value, emax)
ELEMS = {
    "float8_e4m3fn": (torch.float8_e4m3fn, 4, 3, 7, 448.0, 8),
    "float8_e5m2": (torch.float8_e5m2, 5, 2, 15, 57344.0, 15),
    "float6_e2m3fn": (None, 2, 3, 1, 7.5, 2),
    "float6_e3m2fn": (None, 3, 2, 3, 28.0, 4),
    "float4_e2m1fn": (None, 2, 1, 1, 6.0, 2),
}


@triton.jit
def mx_fp8(X, Q, S, EMAX: tl.constexpr, E5: tl.constexpr, CEIL: tl.constexpr):
    b = tl.program_id(0)
    i = tl.arange(0, 32)
    x = tl.load(X + b * 32 + i).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=0)
    bits = amax.to(tl.int32, bitcast=True)
    field = (bits >> 23) & 0xFF
    e = field - 127
    if CEIL:
        e += ((bits & 0x7FFFFF) != 0).to(tl.int32)
    e = tl.minimum(tl.maximum(e - EMAX, -127), 127)
    sbyte = tl.where(field == 255, 255, e + 127)
    ib = 127 - e  # 2^-e's biased exponent; 0 is 2^-127, an fp32 subnormal
    inv = tl.where(ib == 0, 0x00400000, ib << 23).to(tl.float32, bitcast=True)
    y = x * inv
    if E5:
        tl.store(Q + b * 32 + i, y.to(tl.float8e5))
    else:
        tl.store(Q + b * 32 + i, y.to(tl.float8e4nv))
    tl.store(S + b, sbyte.to(tl.uint8))


def grid_round(v, ebits, mbits, bias, vmax):
    """v (fp32) rounded to nearest even on the grid of a format without infinity or NaN, saturated: the binade's
    quantum 2^(e - mbits), e = max(floor(log2 |v|), 1 - bias), and torch.round (half to even) of |v| / quantum."""
    a = v.abs().clamp(max=vmax)
    _, ex = torch.frexp(torch.where(a > 0, a, torch.ones_like(a)))
    e = torch.clamp(ex - 1, min=1 - bias)
    quantum = torch.ldexp(torch.ones_like(a), (e - mbits).to(torch.int32))
    r = torch.round(a / quantum) * quantum
    return torch.where(v < 0, -r, r).clamp(-vmax, vmax)


def torch_mx(x, elem, mode, bug=None):
    """torchao's to_mx in torch ops (FLOOR, CEIL, EVEN, RCEIL), blocks of 32 along the last dimension."""
    tdt, eb, mb, bias, vmax, emax = ELEMS[elem]
    xb = x.float().reshape(x.shape[0], -1, 32)
    amax = xb.abs().amax(-1)
    if mode == "rceil":
        d = amax * (1.0 / vmax)
        dbits = d.view(torch.int32)
        field = (dbits >> 23) & 0xFF
        mant = dbits & 0x7FFFFF
        up = torch.where(field == 0, mant > 0x400000, mant != 0)
        ebyte = torch.where(torch.isfinite(d), field + up.to(torch.int32), torch.full_like(field, 255))
        e = ebyte - 127
    else:
        a = amax
        if mode == "even":
            a = ((a.view(torch.int32) + (1 << (23 - mb - 1))) & 0x7F800000).view(torch.float32)
        abits = a.view(torch.int32)
        e = ((abits >> 23) & 0xFF) - 127
        if mode == "ceil":
            e = e + ((abits & 0x7FFFFF) != 0).to(torch.int32)
        e = torch.clamp(e - emax, -127, 128)
        ebyte = torch.where(torch.isfinite(amax), e + 127, torch.full_like(e, 255))
    if bug == "next_block":
        e = torch.roll(e, 1, dims=-1)
        ebyte = torch.roll(ebyte, 1, dims=-1)
    ib = 127 - e
    inv = torch.where(ib == 0, torch.full_like(ib, 0x00400000), ib.clamp(min=0) << 23).view(torch.float32)
    y = (xb * inv[..., None]).reshape(x.shape)
    if tdt is not None:
        q = (y if bug == "no_saturation" else y.clamp(-vmax, vmax)).to(tdt).view(torch.uint8)
    else:
        q = grid_round(y, eb, mb, bias, vmax)
    if bug == "scale_off":
        ebyte = torch.where(ebyte < 254, ebyte + 1, ebyte)
    return q, ebyte.to(torch.uint8)


@triton.jit
def nvfp4_triton(X, V, S, G, UNROUNDED: tl.constexpr):
    """NVFP4 in Triton's fp32: S = 2688 / amax and amax_b S / 6 with Triton's `/` (div.full.f32), the e4m3 block scale
    by .to(tl.float8e4nv) (saturating), v = x (S / scale) (the bug: the unrounded scale); v is stored and rounded to
    e2m1 on the host's grid (Triton has no e2m1 conversion on sm90)."""
    b = tl.program_id(0)
    i = tl.arange(0, 16)
    x = tl.load(X + b * 16 + i).to(tl.float32)
    g = tl.load(G)
    s_enc = 2688.0 / g
    s_enc = tl.where(g == 0.0, 1.0, s_enc)
    dec = tl.max(tl.abs(x), axis=0) * s_enc / 6.0
    sf8 = tl.minimum(dec, 448.0).to(tl.float8e4nv)
    sf = dec if UNROUNDED else sf8.to(tl.float32)
    enc = tl.where(sf > 0.0, s_enc / sf, 3.4028234663852886e38)
    tl.store(V + b * 16 + i, x * enc)
    tl.store(S + b, sf8)


def te_nvfp4(x, bug=None):
    """Transformer Engine's reference form in torch fp32: S = 2688 / amax, the block scale RN_e4m3(amax_b (S * (1 /
    6))) clamped at 448, q = RN_e2m1(x * (1 / (scale * (1 / S)))) saturated; torchao's form with bug="torchao"
    (P = amax / 2688, the scale from amax_b / 6 / P clamped to [2^-6, 448], q from x / P / scale)."""
    xb = x.float().reshape(x.shape[0], -1, 16)
    g = x.float().abs().amax()
    ab = xb.abs().amax(-1)
    if bug == "torchao":
        p = g / 2688.0
        sf = ((ab / 6.0) / p).clamp(2.0 ** -6, 448.0).to(torch.float8_e4m3fn)
        q = grid_round((xb / p) / sf.float()[..., None], 2, 1, 1, 6.0)
        return q.reshape(x.shape), sf.view(torch.uint8)
    s_enc = torch.where(g > 0, 2688.0 / g, torch.ones_like(g)).clamp(max=3.4028234663852886e38)
    if bug == "no_global":
        s_enc = torch.ones_like(s_enc)
    dec = (ab * (s_enc * (1.0 / 6.0))).clamp(max=448.0)
    sf = dec.to(torch.float8_e4m3fn)
    use = dec if bug == "unrounded" else sf.float()
    enc = torch.where(use > 0, 1.0 / (use * (1.0 / s_enc)), torch.full_like(use, 3.4028234663852886e38))
    q = grid_round(xb * enc[..., None], 2, 1, 1, 6.0)
    return q.reshape(x.shape), sf.view(torch.uint8)


def add(kind, recipe, elem, x, q, s):
    cid = "c%04d" % len(lines)
    store_case(arrays, cid, {}, {"q": q, "scale": s})
    lines.append("%s %s %s %s %d %d %s" % (cid, kind, recipe, elem, x.shape[0], x.shape[1], gid))


g = torch.Generator(device="cuda").manual_seed(11)
R, C = 64, 512
for xdt in (torch.float32, torch.bfloat16):
    x = torch.randn(R, C, device="cuda", generator=g)
    x *= torch.exp2(torch.randint(-20, 21, (R, C // 32), device="cuda", generator=g).float()).repeat_interleave(32, 1)
    x[1, 32:64] = 0.0  # an all-zero block
    k = torch.randint(-8, 9, (R, C // 32), device="cuda", generator=g).float()
    x[2:10, ::32] = (1.9990234375 * torch.exp2(k))[2:10]  # block maxima just below a power of two
    if xdt == torch.float32:
        x[10] = torch.randn(C, device="cuda", generator=g) * 2.0 ** -140  # fp32 subnormals
    x[11, 5] = float("nan")
    x[12, 70] = float("inf")
    x = x.to(xdt)
    gid = new_group(arrays, {"x": x.float()})
    for elem, (tdt, eb, mb, bias, vmax, emax) in ELEMS.items():
        for mode in ("floor", "ceil", "even", "rceil"):
            q, s = torch_mx(x, elem, mode)
            add("torch", mode, elem, x, q, s)
        for bug in ("next_block", "scale_off"):
            q, s = torch_mx(x, elem, "floor", bug=bug)
            add("bug_" + bug, "floor", elem, x, q, s)
        q, s = torch_mx(x, elem, "ceil")
        add("bug_ceil_as_floor", "floor", elem, x, q, s)
        if tdt is not None:
            qn, s = torch_mx(x, elem, "floor", bug="no_saturation")
            qc, _ = torch_mx(x, elem, "floor")
            if not torch.equal(qn, qc):
                add("bug_no_saturation", "floor", elem, x, qn, s)
            for ceil in (0, 1):
                q = torch.empty(R, C, device="cuda", dtype=tdt)
                s = torch.empty(R, C // 32, device="cuda", dtype=torch.uint8)
                mx_fp8[(R * C // 32,)](x, q, s, EMAX=emax, E5=elem == "float8_e5m2", CEIL=ceil)
                torch.cuda.synchronize()
                add("triton", "ceil" if ceil else "floor", elem, x, q.view(torch.uint8), s)
# NVFP4: blocks of 16, fp4 elements, e4m3 block scales (fp32 and bf16 x; an all-zero block, blocks 2^-20 below
# the tensor's amax, e2m1 midpoints once scaled)
for xdt in (torch.float32, torch.bfloat16):
    x = torch.randn(R, C, device="cuda", generator=g)
    x *= torch.exp2(torch.randint(-6, 7, (R, C // 16), device="cuda", generator=g).float()).repeat_interleave(16, 1)
    x[1, 16:48] = 0.0
    x[3:6] *= 2.0 ** -20
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], device="cuda")
    amax = float(x.float().abs().max())
    sfv = 0.5  # rows 6 and 7: block scale 0.5 exactly, x S / scale on the midpoints
    x[6:8] = (mids[torch.randint(0, 7, (2, C), device="cuda", generator=g)] * sfv * amax / 2688.0)
    x[6:8, ::16] = 6 * sfv * amax / 2688.0
    x = x.to(xdt)
    gid = new_group(arrays, {"x": x.float()})
    for kind, bug in (("torch_te", None), ("torch_torchao", "torchao"), ("bug_no_global", "no_global"),
                      ("bug_unrounded", "unrounded")):
        q, s = te_nvfp4(x, bug)
        add(kind, "nvfp4", "float4_e2m1fn", x, q, s)
    for unrounded in (0, 1):
        v = torch.empty(R, C, device="cuda")
        s = torch.empty(R, C // 16, device="cuda", dtype=torch.float8_e4m3fn)
        gmax = x.float().abs().amax().reshape(1)
        nvfp4_triton[(R * C // 16,)](x, v, s, gmax, UNROUNDED=unrounded)
        torch.cuda.synchronize()
        add("bug_triton_unrounded" if unrounded else "triton", "nvfp4", "float4_e2m1fn", x, grid_round(v, 2, 1, 1, 6.0),
            s.view(torch.uint8))
write_case_files(OUT, "mx", arrays, lines, torch_header(), compressed=True)
print("captured %d cases" % len(lines))
