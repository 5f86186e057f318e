"""Attention forward on an H200: torch's SDPA backends through the aten ops that return LSE (flash, efficient, cudnn;
the math path returns O alone), fp16 and bf16 (fp32 through efficient and math), causal or not, Sq != Sk, Sq = 1,
D = 64 and 128; GQA through F.scaled_dot_product_attention(enable_gqa=True) under each backend that takes it; and a
Triton flash-attention kernel (tl.dot, exp2 of the folded scale, P in v's dtype) with causal masks in both
alignments, GQA, fully masked rows, correct and with planted bugs: scale 1/D, causal off by one, no rescale of O and
l, padded keys unmasked, GQA head h % Hkv, LSE in base 2.

Writes OUT/attention.npz and OUT/attention.txt: a line per case, "cid kind dtype Sq Sk D H Hkv causal align gid",
kind naming the backend (and the bug); O in cid__out__o, LSE in cid__out__lse (absent for the math path and GQA
through the public function). Usage: python3 tools/capture/capture_attention.py OUT"""
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from capture_common import new_group, store_case, write_case_files


@triton.jit
def _attn_fwd(Q, K, V, O, LSE, qk_scale, Sq, Sk, H, HKV, sqh, sqm, skh, skn, svh, svn, soh, som,
              D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, BR: tl.constexpr,
              BUG: tl.constexpr):
    pid_m = tl.program_id(0)
    h = tl.program_id(1)
    if BUG == 5:
        g = h % HKV
    else:
        g = h // (H // HKV)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + h * sqh + offs_m[:, None] * sqm + offs_d[None, :], mask=offs_m[:, None] < Sq, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    off = Sk - Sq if BR else 0
    for start_n in range(0, Sk, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + g * skh + cols[None, :] * skn + offs_d[:, None], mask=cols[None, :] < Sk, other=0.0)
        qk = tl.dot(q, k) * qk_scale
        if BUG == 4:
            keep = cols[None, :] >= 0
        else:
            keep = cols[None, :] < Sk
        if CAUSAL:
            if BUG == 2:
                keep = keep & (cols[None, :] <= offs_m[:, None] + off + 1)
            else:
                keep = keep & (cols[None, :] <= offs_m[:, None] + off)
        qk = tl.where(keep, qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        m_safe = tl.where(m_ij == float("-inf"), 0.0, m_ij)
        p = tl.math.exp2(qk - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        if BUG == 3:
            alpha = tl.where(m_i == float("-inf"), 0.0, 1.0)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + g * svh + cols[:, None] * svn + offs_d[None, :], mask=cols[:, None] < Sk, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    empty = l_i == 0.0
    o = acc / tl.where(empty, 1.0, l_i)[:, None]
    o = tl.where(empty[:, None], 0.0, o)
    lse2 = m_i + tl.math.log2(tl.where(empty, 1.0, l_i))
    if BUG == 6:
        lse = lse2
    else:
        lse = lse2 * 0.6931471805599453
    lse = tl.where(empty, float("-inf"), lse)
    tl.store(O + h * soh + offs_m[:, None] * som + offs_d[None, :], o.to(O.dtype.element_ty), mask=offs_m[:, None] < Sq)
    tl.store(LSE + h * Sq + offs_m, lse, mask=offs_m < Sq)


def triton_attention(q, k, v, causal, br, bug=0, block_n=64, scale=None):
    """q [H, Sq, D], k, v [Hkv, Sk, D]: O [H, Sq, D] in q's dtype and LSE [H, Sq] in fp32 (scale: 1/sqrt(D) if None)."""
    H, Sq, D = q.shape
    Hkv, Sk, _ = k.shape
    scale = 1.0 / D if bug == 1 else D ** -0.5 if scale is None else scale
    o = torch.empty_like(q)
    lse = torch.empty((H, Sq), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(Sq, 64), H)
    _attn_fwd[grid](q, k, v, o, lse, scale * 1.4426950408889634, Sq, Sk, H, Hkv, q.stride(0), q.stride(1), k.stride(0),
                    k.stride(1), v.stride(0), v.stride(1), o.stride(0), o.stride(1), D=D, BLOCK_M=64, BLOCK_N=block_n,
                    CAUSAL=causal, BR=br, BUG=bug)
    return o, lse


def sdpa_with_lse(backend, q, k, v, causal, scale=None):
    """(O, LSE) from the aten op of a backend (LSE None for the math path); q, k, v [B, H, S, D]."""
    a = torch.ops.aten
    if backend == "flash":
        r = a._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
    elif backend == "efficient":
        r = a._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, causal, scale=scale)
    elif backend == "cudnn":
        r = a._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False, scale=scale)
    else:
        r = a._scaled_dot_product_attention_math(q, k, v, None, 0.0, causal, scale=scale)
        return r[0], None
    o, lse = r[0], r[1]
    Sq = q.shape[2]
    lse = lse.reshape(lse.shape[0], lse.shape[1], -1)[:, :, :Sq].float()
    return o, lse


def main(out):
    torch.manual_seed(20261201)
    dev = "cuda"
    arrays, lines, log = {}, [], []
    n = 0

    def add(kind, dt, Sq, Sk, D, H, Hkv, causal, align, gid, o, lse):
        nonlocal n
        cid = "c%03d" % n
        n += 1
        outs = {"o": o}
        if lse is not None:
            outs["lse"] = lse
        store_case(arrays, cid, {}, outs)
        lines.append("%s %s %s %d %d %d %d %d %d %s %s" % (cid, kind, dt, Sq, Sk, D, H, Hkv, int(causal), align, gid))

    dts = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    # torch's backends with LSE: B = 1, H = 2
    for dt in ("float16", "bfloat16", "float32"):
        for Sq, Sk, D in ((128, 128, 64), (64, 192, 128), (1, 256, 64)):
            q = torch.randn(1, 2, Sq, D, device=dev, dtype=dts[dt])
            k = torch.randn(1, 2, Sk, D, device=dev, dtype=dts[dt])
            v = torch.randn(1, 2, Sk, D, device=dev, dtype=dts[dt])
            gid = new_group(arrays, {"q": q, "k": k, "v": v})
            for causal in (False, True):
                for be in ("flash", "efficient", "cudnn", "math"):
                    if dt == "float32" and be == "cudnn" and (Sq != 128 or causal):
                        continue  # one case shows what the op returns for fp32
                    try:
                        o, lse = sdpa_with_lse(be, q, k, v, causal)
                        torch.cuda.synchronize()
                    except Exception as e:  # a backend that does not take this case
                        log.append("%s %s %s causal=%d: %s" % (be, dt, (Sq, Sk, D), causal, str(e).split("\n")[0][:120]))
                        continue
                    add("torch_" + be, dt, Sq, Sk, D, 2, 2, causal, "top_left", gid, o, lse)
    # decoding: one query against 2048 keys, one head (FlashAttention's split-KV heuristic takes one block per SM)
    for dt in ("float16", "bfloat16"):
        q = torch.randn(1, 1, 1, 64, device=dev, dtype=dts[dt])
        k = torch.randn(1, 1, 2048, 64, device=dev, dtype=dts[dt])
        v = torch.randn(1, 1, 2048, 64, device=dev, dtype=dts[dt])
        gid = new_group(arrays, {"q": q, "k": k, "v": v})
        for be in ("flash", "efficient", "cudnn"):
            try:
                o, lse = sdpa_with_lse(be, q, k, v, False)
                torch.cuda.synchronize()
            except Exception as e:
                log.append("decode %s %s: %s" % (be, dt, str(e).split("\n")[0][:120]))
                continue
            add("torch_" + be, dt, 1, 2048, 64, 1, 1, False, "top_left", gid, o, lse)
    # GQA through the public function, O only: H = 4, Hkv = 2
    from torch.nn.attention import SDPBackend, sdpa_kernel
    bes = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
           "math": SDPBackend.MATH}
    for dt in ("float16", "bfloat16"):
        Sq, Sk, D = 64, 128, 64
        q = torch.randn(1, 4, Sq, D, device=dev, dtype=dts[dt])
        k = torch.randn(1, 2, Sk, D, device=dev, dtype=dts[dt])
        v = torch.randn(1, 2, Sk, D, device=dev, dtype=dts[dt])
        gid = new_group(arrays, {"q": q, "k": k, "v": v})
        for causal in (False, True):
            for be, b in bes.items():
                try:
                    with sdpa_kernel(b):
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                    torch.cuda.synchronize()
                except Exception as e:
                    log.append("gqa %s %s causal=%d: %s" % (be, dt, causal, str(e).split("\n")[0][:120]))
                    continue
                add("gqa_" + be, dt, Sq, Sk, D, 4, 2, causal, "top_left", gid, o, None)
    # the Triton kernel: q [H, Sq, D]
    bugs = {1: "scale_1_over_d", 2: "causal_off_by_one", 3: "no_rescale", 4: "padded_keys", 5: "gqa_modulo", 6: "lse_base2"}
    for dt in ("float16", "bfloat16"):
        for Sq, Sk, D, H, Hkv, causal, br in ((64, 200, 128, 2, 2, False, False), (128, 128, 64, 2, 2, True, False),
                                               (64, 200, 64, 2, 2, True, True), (96, 64, 64, 2, 2, True, True),
                                               (64, 150, 64, 4, 2, False, False), (1, 300, 128, 2, 2, False, False)):
            q = torch.randn(H, Sq, D, device=dev, dtype=dts[dt])
            k = torch.randn(Hkv, Sk, D, device=dev, dtype=dts[dt])
            v = torch.randn(Hkv, Sk, D, device=dev, dtype=dts[dt])
            gid = new_group(arrays, {"q": q, "k": k, "v": v})
            align = "bottom_right" if br else "top_left"
            o, lse = triton_attention(q, k, v, causal, br)
            add("triton", dt, Sq, Sk, D, H, Hkv, causal, align, gid, o, lse)
            for b, name in bugs.items():
                if b == 2 and not causal or b == 4 and (causal or Sk % 64 == 0) or b == 5 and H == Hkv:
                    continue
                if dt == "bfloat16" and b not in (2, 4, 5):
                    continue  # bf16: the bugs that depend on masks and heads
                o, lse = triton_attention(q, k, v, causal, br, bug=b)
                add("bug_" + name, dt, Sq, Sk, D, H, Hkv, causal, align, gid, o, lse)
    torch.cuda.synchronize()
    write_case_files(out, "attention", arrays, lines, "cid kind dtype Sq Sk D H Hkv causal align gid")
    print("%d cases" % n)
    print("\n".join(log))


if __name__ == "__main__":
    main(sys.argv[1])
