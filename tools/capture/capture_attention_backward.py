"""Captures attention's backward pass on the GPU and judges it with exactref: torch's SDPA backward through autograd
under the flash, efficient, cudnn and math backends (the saved LSE read from the backend's aten forward op, which
gives the same O; the math path, and GQA through F.scaled_dot_product_attention(enable_gqa=True), judged without a
saved LSE), flex_attention compiled by torch.compile (its returned LSE), and a Triton backward kernel written in the
form of Triton's fused-attention tutorial (D = rowsum(o dO) first; a dK/dV program per key block over the query
blocks of every query head of its kv head, a dQ program per query block over the key blocks; k pre-scaled by
scale / ln 2 and rounded to fp16 or bf16, P = exp2 of the scaled score minus the base-2 LSE, P and dS rounded to the
inputs' format for their tl.dot products, dQ times ln 2 and dK times the scale at the end), correct and with
planted bugs: dK without its scale, D from the unrounded O (the fp32 output of the same forward), one key block's dQ
contribution lost, the causal mask off by one. fp16 and bf16, causal or not, Sq = Sk and Sq != Sk, D = 64 and 128,
GQA; families: normal (randn), peaked (q and k of 3 randn: near one-hot P), cancel (value rows near one common row,
so dP - D cancels), zeroq (q = 0: every score 0, P uniform, exact ties), tinydo (dO of 2^-20 randn: subnormal in
fp16, products and dS near underflow), large (q and k of 4 randn: scores in the tens). Causal masks top-left (torch's
is_causal, Sq != Sk too) and bottom-right (flex_attention's mask and the Triton kernel with flex's O and LSE; Sq > Sk
leaves the first rows with no key: dQ 0). Env AB_DTYPES (float16,bfloat16), AB_FAMILIES, AB_SHAPES (BxHxHkvxSqxSkxD),
AB_BUDGET (seconds, then the rest is left out and said).

With EXACTREF_LIBRARY set it judges every case and prints the verdicts by kernel; cases that fail are written to
OUT/attention_backward.npz (cid__in__q, k, v, o, lse, do; cid__out__dq, dk, dv; bfloat16 as uint16) with
OUT/attention_backward.txt. Run: OUT=/some/dir python3 capture_attention_backward.py"""
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from capture_common import write_case_files

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _bwd_pre(O, DO, DELTA, N, D: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    d = tl.arange(0, D)
    m = r[:, None] < N
    o = tl.load(O + r[:, None] * D + d[None, :], mask=m, other=0.0).to(tl.float32)
    do = tl.load(DO + r[:, None] * D + d[None, :], mask=m, other=0.0).to(tl.float32)
    tl.store(DELTA + r, tl.sum(o * do, 1), mask=r < N)


@triton.jit
def _bwd_dkdv(Q, KS, V, DO, M2, DELTA, DK, DV, sm_scale, Sq, Sk, off, GRP: tl.constexpr, D: tl.constexpr,
              BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr, SHIFT: tl.constexpr, KSCALE: tl.constexpr):
    jb = tl.program_id(0)
    g = tl.program_id(1)
    offs_n = jb * BN + tl.arange(0, BN)
    d = tl.arange(0, D)
    nm = offs_n[:, None] < Sk
    ks = tl.load(KS + g * Sk * D + offs_n[:, None] * D + d[None, :], mask=nm, other=0.0)
    v = tl.load(V + g * Sk * D + offs_n[:, None] * D + d[None, :], mask=nm, other=0.0)
    dk = tl.zeros([BN, D], tl.float32)
    dv = tl.zeros([BN, D], tl.float32)
    for hh in range(GRP):
        h = g * GRP + hh
        for i0 in range(0, Sq, BM):
            offs_m = i0 + tl.arange(0, BM)
            mm = offs_m[:, None] < Sq
            q = tl.load(Q + h * Sq * D + offs_m[:, None] * D + d[None, :], mask=mm, other=0.0)
            do = tl.load(DO + h * Sq * D + offs_m[:, None] * D + d[None, :], mask=mm, other=0.0)
            m2 = tl.load(M2 + h * Sq + offs_m, mask=offs_m < Sq, other=float("inf"))
            di = tl.load(DELTA + h * Sq + offs_m, mask=offs_m < Sq, other=0.0)
            qkT = tl.dot(ks, tl.trans(q))
            pT = tl.math.exp2(qkT - m2[None, :])
            ok = (offs_n[:, None] < Sk) & (offs_m[None, :] < Sq)
            if CAUSAL:
                ok = ok & (offs_n[:, None] <= offs_m[None, :] + off + SHIFT)
            pT = tl.where(ok, pT, 0.0)
            dv += tl.dot(pT.to(do.dtype), do)
            dpT = tl.dot(v, tl.trans(do)).to(tl.float32)
            dsT = pT * (dpT - di[None, :])
            dk += tl.dot(dsT.to(q.dtype), q)
    if KSCALE:
        dk *= sm_scale
    tl.store(DK + g * Sk * D + offs_n[:, None] * D + d[None, :], dk.to(DK.dtype.element_ty), mask=nm)
    tl.store(DV + g * Sk * D + offs_n[:, None] * D + d[None, :], dv.to(DV.dtype.element_ty), mask=nm)


@triton.jit
def _bwd_dq(Q, KS, V, DO, M2, DELTA, DQ, Sq, Sk, off, GRP: tl.constexpr, D: tl.constexpr, BM: tl.constexpr,
            BN: tl.constexpr, CAUSAL: tl.constexpr, SHIFT: tl.constexpr, LOST: tl.constexpr):
    ib = tl.program_id(0)
    h = tl.program_id(1)
    g = h // GRP
    offs_m = ib * BM + tl.arange(0, BM)
    d = tl.arange(0, D)
    mm = offs_m[:, None] < Sq
    q = tl.load(Q + h * Sq * D + offs_m[:, None] * D + d[None, :], mask=mm, other=0.0)
    do = tl.load(DO + h * Sq * D + offs_m[:, None] * D + d[None, :], mask=mm, other=0.0)
    m2 = tl.load(M2 + h * Sq + offs_m, mask=offs_m < Sq, other=float("inf"))
    di = tl.load(DELTA + h * Sq + offs_m, mask=offs_m < Sq, other=0.0)
    dq = tl.zeros([BM, D], tl.float32)
    for j0 in range(0, Sk, BN):
        if not (LOST and j0 == BN):
            offs_n = j0 + tl.arange(0, BN)
            nm = offs_n[:, None] < Sk
            ks = tl.load(KS + g * Sk * D + offs_n[:, None] * D + d[None, :], mask=nm, other=0.0)
            v = tl.load(V + g * Sk * D + offs_n[:, None] * D + d[None, :], mask=nm, other=0.0)
            qk = tl.dot(q, tl.trans(ks))
            p = tl.math.exp2(qk - m2[:, None])
            ok = (offs_m[:, None] < Sq) & (offs_n[None, :] < Sk)
            if CAUSAL:
                ok = ok & (offs_n[None, :] <= offs_m[:, None] + off + SHIFT)
            p = tl.where(ok, p, 0.0)
            dp = tl.dot(do, tl.trans(v)).to(tl.float32)
            ds = p * (dp - di[:, None])
            dq += tl.dot(ds.to(ks.dtype), ks)
    dq *= 0.6931471805599453
    tl.store(DQ + h * Sq * D + offs_m[:, None] * D + d[None, :], dq.to(DQ.dtype.element_ty), mask=mm)


def triton_backward(q, k, v, o, lse, do, causal, bug=None, o_unrounded=None, off=0):
    """The tutorial-form backward: q, o, do [H, Sq, D], k, v [Hkv, Sk, D], lse [H, Sq] natural (fp32); off: the
    causal mask's diagonal offset (key j of query i when j <= i + off: 0 top-left, Sk - Sq bottom-right)."""
    H, Sq, D = q.shape
    Hkv, Sk = k.shape[0], k.shape[1]
    sc = D ** -0.5
    ks = (k * (sc / LN2)).to(k.dtype)
    m2 = (lse * LOG2E).contiguous()
    delta = torch.empty((H, Sq), device=q.device, dtype=torch.float32)
    src = o_unrounded if bug == "d_from_unrounded_o" else o
    _bwd_pre[(triton.cdiv(H * Sq, 64),)](src.contiguous(), do, delta, H * Sq, D=D, BLOCK=64)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    shift = 1 if bug == "causal_off_by_one" else 0
    BM, BN = 32, 32
    _bwd_dkdv[(triton.cdiv(Sk, BN), Hkv)](q, ks, v, do, m2, delta, dk, dv, sc, Sq, Sk, off, GRP=H // Hkv, D=D, BM=BM,
                                          BN=BN, CAUSAL=causal, SHIFT=shift, KSCALE=bug != "dk_without_scale")
    _bwd_dq[(triton.cdiv(Sq, BM), H)](q, ks, v, do, m2, delta, dq, Sq, Sk, off, GRP=H // Hkv, D=D, BM=BM, BN=BN,
                                      CAUSAL=causal, SHIFT=shift, LOST=bug == "dq_block_lost")
    return dq, dk, dv


def aten_forward(be, q, k, v, causal):
    """(O, LSE [B, H, Sq] fp32) from the backend's aten forward op."""
    a = torch.ops.aten
    if be == "flash":
        r = a._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)
    elif be == "efficient":
        r = a._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, causal)
    else:
        r = a._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False)
    Sq = q.shape[2]
    lse = r[1].reshape(r[1].shape[0], r[1].shape[1], -1)[:, :, :Sq].float()
    return r[0], lse


def autograd_backward(be, q, k, v, do, causal, gqa):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
         "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[be]
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(b):
        o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal, enable_gqa=gqa)
        o.backward(do)
    return o.detach(), qq.grad, kk.grad, vv.grad


_FLEX = {}


def flex_backward(q, k, v, do, causal, align="top_left"):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    if "fn" not in _FLEX:
        _FLEX["fn"] = torch.compile(flex_attention)
    Sq, Sk = q.shape[2], k.shape[2]
    bm, sh = None, (Sk - Sq if align == "bottom_right" else 0)
    if causal:
        bm = create_block_mask(lambda b, h, i, j: j <= i + sh, None, None, Sq, Sk, device=q.device)
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    o, lse = _FLEX["fn"](qq, kk, vv, block_mask=bm, return_lse=True)
    o.backward(do)
    return o.detach(), lse.detach().float(), qq.grad, kk.grad, vv.grad


def inputs(family, B, H, Hkv, Sq, Sk, D, dtype):
    def g(*s):
        return torch.randn(*s, device="cuda", dtype=torch.float32)
    sq = {"peaked": 3.0, "large": 4.0}.get(family, 1.0)
    q, k = (g(B, H, Sq, D) * sq).to(dtype), (g(B, Hkv, Sk, D) * sq).to(dtype)
    if family == "zeroq":
        q = torch.zeros_like(q)
    if family == "cancel":
        v = (16 * g(1, 1, 1, D) + g(B, Hkv, Sk, D) / 512).to(dtype)
    else:
        v = g(B, Hkv, Sk, D).to(dtype)
    do = (g(B, H, Sq, D) * (2.0 ** -20 if family == "tinydo" else 1.0)).to(dtype)
    return q, k, v, do


def stored(t):
    t = t.detach().cpu().contiguous()
    return t.view(torch.uint16).numpy() if t.dtype == torch.bfloat16 else t.numpy()


def main():
    out = os.environ.get("OUT", ".")
    torch.manual_seed(20261202)
    torch._dynamo.config.recompile_limit = 10000
    er = None
    if os.environ.get("EXACTREF_LIBRARY"):
        import ml_dtypes
        import exactref as er
    env = os.environ.get
    families = env("AB_FAMILIES", "normal,peaked,cancel").split(",")
    shapes = [tuple(int(x) for x in s.split("x")) for s in
              env("AB_SHAPES", "1x4x4x128x128x64,1x4x4x256x256x128,2x2x2x64x256x64,1x8x2x128x128x64").split(",")]
    verdicts, counts, arrays, lines, cid, total = {}, {}, {}, [], 0, 0
    t0 = time.time()

    def view(a):
        return a.view(ml_dtypes.bfloat16) if a.dtype == np.uint16 else a

    def judge(name, family, dtype, shp, causal, ins, lse, outs, visible=True, options=None, align="top_left"):
        nonlocal cid, total
        total += 1
        if er is None:
            return
        q, k, v, o, do = (stored(t) for t in ins)
        gq = q.shape[-3] != k.shape[-3]
        lh = None if lse is None else stored(lse)
        oh = [stored(t) for t in outs]
        try:
            ref = er.attention_backward(view(q), view(k), view(v), view(o), lh, view(do), causal=causal,
                                        causal_alignment=align, enable_gqa=gq)
            res = ref.covers(tuple(view(a) for a in oh), options=options)
        except Exception as e:  # said, never a verdict
            print("REFUSED %s %s %s causal=%s: %s" % (name, family, shp, align if causal else 0, e), flush=True)
            return
        ok = tuple(bool(res.results[n].all()) for n in ("dq", "dk", "dv"))
        if visible:
            verdicts.setdefault(name, []).append(ok)
        if not name.startswith("bug"):
            for n, r in res.results.items():
                c = counts.setdefault((name, n), [0, 0])
                c[0] += r.counts["exact"]
                c[1] += r.classes.size
        print("%s %s %s %s causal=%s lse=%s: %s%s (%.0f s)" % (name, str(dtype).split(".")[1], family, shp,
              align if causal else 0,
              "yes" if lse is not None else "no", " ".join(str(int(x)) for x in ok),
              "" if visible else " (invisible)", time.time() - t0), flush=True)
        if not name.startswith("bug") and not all(ok):
            if cid < 3:
                print("FALSE ALARM %s\n%s" % (name, res))
            key = "c%03d" % cid
            for n, a in zip(("q", "k", "v", "o", "do"), (q, k, v, o, do)):
                arrays[key + "__in__" + n] = a
            if lh is not None:
                arrays[key + "__in__lse"] = lh
            for n, a in zip(("dq", "dk", "dv"), oh):
                arrays[key + "__out__" + n] = a
            lines.append("%s %s %s %s %s %s" % (key, name, str(dtype).split(".")[1], family, "x".join(map(str, shp)),
                                              align if causal else "0"))
            cid += 1

    dtypes = [getattr(torch, n) for n in env("AB_DTYPES", "float16,bfloat16").split(",")]
    for dtype in dtypes:
        for family in families:
            for shp in shapes:
                B, H, Hkv, Sq, Sk, D = shp
                for causal in (False, True):
                    if time.time() - t0 > float(env("AB_BUDGET", "1e9")):  # the rest left out, said below
                        print("budget spent: %s %s %s causal=%d and after not run" % (dtype, family, shp, causal))
                        continue
                    q, k, v, do = inputs(family, B, H, Hkv, Sq, Sk, D, dtype)
                    gqa = H != Hkv
                    for be in ("flash", "efficient", "cudnn", "math"):
                        try:
                            o, dq, dk, dv = autograd_backward(be, q, k, v, do, causal, gqa)
                            lse = None
                            if be != "math" and not gqa:
                                o2, lse2 = aten_forward(be, q, k, v, causal)
                                lse = lse2 if torch.equal(o2, o) else None
                        except Exception as e:
                            print("skip %s %s %s: %s" % (be, dtype, shp, str(e).splitlines()[0][:120]))
                            continue
                        judge("torch_" + be, family, dtype, shp, causal, (q, k, v, o, do), lse, (dq, dk, dv))
                        if lse is not None:  # the same outputs judged as a kernel that recomputes its LSE
                            judge("torch_" + be + "_nolse", family, dtype, shp, causal, (q, k, v, o, do), None,
                                  (dq, dk, dv))
                    if not gqa:
                        try:
                            o, lse, dq, dk, dv = flex_backward(q, k, v, do, causal)
                            judge("flex", family, dtype, shp, causal, (q, k, v, o, do), lse, (dq, dk, dv))
                        except Exception as e:
                            print("skip flex %s %s: %s" % (dtype, shp, str(e).splitlines()[0][:120]))
                    # the Triton kernel, one batch at a time ([H, S, D] layout)
                    for b in range(B):
                        qb, kb, vb, dob = (t[b].contiguous() for t in (q, k, v, do))
                        o, lse = aten_forward("flash", qb[None], kb.repeat_interleave(H // Hkv, 0)[None],
                                              vb.repeat_interleave(H // Hkv, 0)[None], causal)
                        o, lse = o[0].contiguous(), lse[0].contiguous()
                        o32 = F.scaled_dot_product_attention(
                            qb.float()[None], kb.float().repeat_interleave(H // Hkv, 0)[None],
                            vb.float().repeat_interleave(H // Hkv, 0)[None], is_causal=causal)[0]
                        good = triton_backward(qb, kb, vb, o, lse, dob, causal)
                        ins = (qb, kb, vb, o, dob)
                        judge("triton", family, dtype, shp, causal, ins, lse, good, options="qk_scale=input")
                        for bug in ("dk_without_scale", "d_from_unrounded_o", "dq_block_lost", "causal_off_by_one"):
                            if bug == "causal_off_by_one" and not causal:
                                continue
                            outs = triton_backward(qb, kb, vb, o, lse, dob, causal, bug, o32)
                            vis = not all(torch.equal(a, c) for a, c in zip(outs, good))
                            judge("bug_" + bug, family, dtype, shp, causal, ins, lse, outs, visible=vis,
                                  options="qk_scale=input")
                    if causal and not gqa and Sq != Sk:  # bottom-right: flex's mask, and the Triton kernel on flex's O and LSE
                        try:
                            o, lse, dq, dk, dv = flex_backward(q, k, v, do, True, "bottom_right")
                            judge("flex", family, dtype, shp, True, (q, k, v, o, do), lse, (dq, dk, dv),
                                  align="bottom_right")
                        except Exception as e:
                            print("skip flex bottom_right %s %s: %s" % (dtype, shp, str(e).splitlines()[0][:120]))
                            continue
                        for b in range(B):
                            qb, kb, vb, dob = (t[b].contiguous() for t in (q, k, v, do))
                            ob, lb = o[b].contiguous(), lse[b].contiguous()
                            good = triton_backward(qb, kb, vb, ob, lb, dob, True, off=Sk - Sq)
                            judge("triton", family, dtype, shp, True, (qb, kb, vb, ob, dob), lb, good,
                                  options="qk_scale=input", align="bottom_right")
    print("ran %d cases" % total)
    if lines:
        write_case_files(out, "attention_backward", arrays, lines, "# id kernel dtype family B_H_Hkv_Sq_Sk_D causal")
    for name, v in sorted(verdicts.items()):
        print("%s: dq %d, dk %d, dv %d, all %d of %d covered" % (
            name, sum(a for a, _, _ in v), sum(b for _, b, _ in v), sum(c for _, _, c in v),
            sum(a and b and c for a, b, c in v), len(v)))
    for (name, o), (e, n) in sorted(counts.items()):
        print("%s %s: %d of %d elements exact" % (name, o, e, n))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
