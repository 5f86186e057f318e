"""fp8 attention on an H200: a Triton flash-attention forward in FlashAttention-3's and cuDNN's fp8 form (q, k, v in
fp8 e4m3 with their descales folded into the exp2 constant, the online softmax in fp32, P times scale_s converted to
e4m3 for the P V product on fp8 tensor cores, P V times descale_s and descale_v, O times scale_o stored in e4m3 or
bf16, LSE, and amax_s (the largest p before scale_s) and amax_o (max |O| before scale_o) reduced by atomics), and the
same kernel with planted bugs; then q = 0 (exact ties) and scores in the hundreds over mostly subnormal v with a
masked tail. Writes OUT/attention_fp8.npz and .txt for test_attention_fp8.py's
test_attention_fp8_captures. Needs a CUDA device, torch and Triton.

    python3 tools/capture/capture_attention_fp8.py OUT
"""
import sys

import torch
import triton
import triton.language as tl

from capture_common import new_group, store_case, write_case_files

BUGS = {"none": 0, "amax_o_zero": 1, "no_descale_v": 2, "no_scale_s": 3, "no_descale_k": 4}


@triton.jit
def _fwd(Q, K, V, O, LSE, AMS, AMO, qk_scale, dv, ss, ds, so, Sq, Sk, D: tl.constexpr, BM: tl.constexpr,
         BN: tl.constexpr, BUG: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    rows = pid * BM + tl.arange(0, BM)
    dd = tl.arange(0, D)
    q = tl.load(Q + bh * Sq * D + rows[:, None] * D + dd[None, :], mask=rows[:, None] < Sq, other=0.0)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    pmax = tl.zeros([BM], tl.float32)
    for start in range(0, Sk, BN):
        cols = start + tl.arange(0, BN)
        kt = tl.load(K + bh * Sk * D + cols[None, :] * D + dd[:, None], mask=cols[None, :] < Sk, other=0.0)
        s = tl.dot(q, kt) * qk_scale
        s = tl.where(cols[None, :] < Sk, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        pmax = tl.maximum(pmax, tl.max(p, 1))
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + bh * Sk * D + cols[:, None] * D + dd[None, :], mask=cols[:, None] < Sk, other=0.0)
        if BUG == 3:
            p8 = p.to(tl.float8e4nv)
            pv = tl.dot(p8, v) * ss
        else:
            p8 = (p * ss).to(tl.float8e4nv)
            pv = tl.dot(p8, v)
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    if BUG == 2:
        o = acc / l_i[:, None] * ds
    else:
        o = acc / l_i[:, None] * (ds * dv)
    valid = rows < Sq
    amo = tl.max(tl.where(valid[:, None], tl.abs(o), 0.0))
    if BUG == 1:
        amo = amo * 0.0
    tl.atomic_max(AMO, amo)
    tl.atomic_max(AMS, tl.max(tl.where(valid, pmax, 0.0)))
    out = o * so
    tl.store(O + bh * Sq * D + rows[:, None] * D + dd[None, :], out.to(O.dtype.element_ty), mask=valid[:, None])
    tl.store(LSE + bh * Sq + rows, (m_i + tl.math.log2(l_i)) * 0.6931471805599453, mask=valid)


def quantise(x):
    """x (fp32) to e4m3 with a per-tensor descale amax / 448, as Transformer Engine's current scaling does."""
    d = float(x.abs().max().float() / 448.0)
    if d == 0:  # an all-zero tensor: its descale is 1
        return x.to(torch.float8_e4m3fn), 1.0
    return (x / d).to(torch.float8_e4m3fn), d


def run(q8, k8, v8, dq, dk, dv, ss, so, out_dtype, bug):
    H, Sq, D = q8.shape
    Sk = k8.shape[1]
    o = torch.empty((H, Sq, D), dtype=out_dtype, device="cuda")
    lse = torch.empty((H, Sq), dtype=torch.float32, device="cuda")
    ams = torch.zeros(1, dtype=torch.float32, device="cuda")
    amo = torch.zeros(1, dtype=torch.float32, device="cuda")
    dk_used = 1.0 if bug == 4 else dk
    qk_scale = (1.0 / D ** 0.5) * dq * dk_used * 1.4426950408889634
    BM, BN = 64, 64
    _fwd[(triton.cdiv(Sq, BM), H)](q8, k8, v8, o, lse, ams, amo, qk_scale, dv, ss, 1.0 / ss, so, Sq, Sk, D=D, BM=BM,
                                   BN=BN, BUG=bug, num_warps=4)
    torch.cuda.synchronize()
    return o, lse, ams, amo


def main(out):
    torch.manual_seed(0)
    arrays, lines = {}, []
    shapes = ((4, 128, 256, 64), (2, 100, 200, 64), (2, 64, 512, 128))
    for si, (H, Sq, Sk, D) in enumerate(shapes):
        q = torch.randn(H, Sq, D, device="cuda")
        k = torch.randn(H, Sk, D, device="cuda") * (0.5 + si)
        v = torch.randn(H, Sk, D, device="cuda")
        q8, dq = quantise(q)
        k8, dk = quantise(k)
        v8, dv = quantise(v)
        gid = new_group(arrays, {"q": q8, "k": k8, "v": v8})
        for ss, so, out_dtype in ((448.0, 1.0, torch.bfloat16), (448.0, 64.0, torch.float8_e4m3fn),
                                  (1.0, 1.0, torch.bfloat16)):
            for bug, code in BUGS.items():
                if code == 3 and ss == 1.0:
                    continue  # the same kernel without a scale: no bug
                o, lse, ams, amo = run(q8, k8, v8, dq, dk, dv, ss, so, out_dtype, code)
                cid = "c%03d" % len(lines)
                store_case(arrays, cid, {}, {"o": o, "lse": lse, "amax_s": ams, "amax_o": amo})
                odt = "bfloat16" if out_dtype == torch.bfloat16 else "float8_e4m3fn"
                lines.append("%s %s %s %d %d %d %d %s %r %r %r %r %r" % (cid, gid, bug, H, Sq, Sk, D, odt, dq, dk, dv,
                                                                         ss, so))
    # inputs that tell the models apart: q = 0 (every weight exactly 1, O the mean of small-integer v: exact ties of
    # the output), and scores in the hundreds (k times 40) over v of exponents 2^-10 .. 1 (many e4m3 subnormals) with a
    # masked tail (200 keys); the correct kernel and two bugs each
    edge = (("ties", 2, 64, 256, 64), ("wide_subnormal", 2, 64, 200, 64))
    for kind, H, Sq, Sk, D in edge:
        if kind == "ties":
            q = torch.zeros(H, Sq, D, device="cuda")
            k = torch.randn(H, Sk, D, device="cuda")
            v = torch.randint(-8, 9, (H, Sk, D), device="cuda").float()
        else:
            q = torch.randn(H, Sq, D, device="cuda")
            k = torch.randn(H, Sk, D, device="cuda") * 40
            v = torch.randn(H, Sk, D, device="cuda") * torch.exp2(-torch.randint(0, 11, (H, Sk, D), device="cuda").float())
        q8, dq = quantise(q)
        k8, dk = quantise(k)
        v8, dv = quantise(v)
        gid = new_group(arrays, {"q": q8, "k": k8, "v": v8})
        for bug in ("none", "amax_o_zero", "no_descale_v"):
            o, lse, ams, amo = run(q8, k8, v8, dq, dk, dv, 448.0, 1.0, torch.bfloat16, BUGS[bug])
            cid = "c%03d" % len(lines)
            store_case(arrays, cid, {}, {"o": o, "lse": lse, "amax_s": ams, "amax_o": amo})
            lines.append("%s %s %s %d %d %d %d %s %r %r %r %r %r" % (cid, gid, bug, H, Sq, Sk, D, "bfloat16", dq, dk, dv,
                                                                     448.0, 1.0))
    write_case_files(out, "attention_fp8", arrays, lines,
                     "id group bug H Sq Sk D out_dtype descale_q descale_k descale_v scale_s scale_o (Triton %s, torch %s, %s)"
                     % (triton.__version__, torch.__version__, torch.cuda.get_device_name()))
    print("%d cases" % len(lines))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
