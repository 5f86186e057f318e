"""Attention on the inputs that tell the standards apart, on an H200: q = 0 (every weight exactly 1, O the mean of v
on fp16 and bf16 midpoints: exact ties of the store), small-integer q and k with the scale ln 2 (every exp2 argument
of a kernel that folds the scale an integer: p exact powers of two), q and k six times larger (scores in the
hundreds, nearly every weight underflowing, LSE in the hundreds) and subnormal v (O subnormal). torch's aten flash,
efficient and cudnn ops (with LSE) and math path (O), and the Triton kernel of capture_attention.py; causal or not.

Writes OUT/attention_edges.npz and OUT/attention_edges.txt, a line per case, "cid kind dtype family causal scale
gid" (scale 0: 1/sqrt(D)). Usage: python3 tools/capture/capture_attention_edges.py OUT"""
import math
import sys

import torch

from capture_attention import sdpa_with_lse, triton_attention
from capture_common import new_group, store_case, write_case_files


def inputs(family, dt, g):
    H, Sq, Sk, D = 2, 32, 96, 64
    if family == "zero_q":
        q = torch.zeros(1, H, Sq, D)
        k = torch.randn(1, H, Sk, D, generator=g)
        # two values a fp16 (bf16) spacing apart, half the keys each: the mean is a midpoint of the output format
        spacing = 2.0 ** -10 if dt == torch.float16 else 2.0 ** -7
        v = torch.where(torch.arange(Sk).view(1, 1, Sk, 1) % 2 == 0, 1.0, 1.0 + spacing).expand(1, H, Sk, D).clone()
        v = v * torch.where(torch.arange(D) % 3 == 0, -1.0, 1.0)
    elif family == "integers":
        q = torch.randint(-2, 3, (1, H, Sq, D), generator=g).float()
        k = torch.randint(-2, 3, (1, H, Sk, D), generator=g).float()
        v = torch.randn(1, H, Sk, D, generator=g)
    elif family == "large":
        q = torch.randn(1, H, Sq, D, generator=g) * 6
        k = torch.randn(1, H, Sk, D, generator=g) * 6
        v = torch.randn(1, H, Sk, D, generator=g)
    else:  # subnormal v
        q = torch.randn(1, H, Sq, D, generator=g)
        k = torch.randn(1, H, Sk, D, generator=g)
        v = torch.randn(1, H, Sk, D, generator=g) * (2.0 ** -20 if dt == torch.float16 else 2.0 ** -130)
    return [t.to(dt).cuda() for t in (q, k, v)]


def main(out):
    g = torch.Generator().manual_seed(20261202)
    arrays, lines, log = {}, [], []
    for dt_name, dt in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
        for family in ("zero_q", "integers", "large", "subnormal"):
            q, k, v = inputs(family, dt, g)
            gid = new_group(arrays, {"q": q, "k": k, "v": v})
            scale = math.log(2.0) if family == "integers" else None
            for causal in (False, True):
                for be in ("flash", "efficient", "cudnn", "math", "triton"):
                    try:
                        if be == "triton":
                            o, lse = triton_attention(q[0], k[0], v[0], causal, False, scale=scale)
                            o, lse = o[None], lse[None]
                        else:
                            o, lse = sdpa_with_lse(be, q, k, v, causal, scale=scale)
                        torch.cuda.synchronize()
                    except Exception as e:
                        log.append("%s %s %s causal=%d: %s" % (be, dt_name, family, causal, str(e).split("\n")[0][:100]))
                        continue
                    cid = "c%03d" % len(lines)
                    store_case(arrays, cid, {}, {"o": o} if lse is None else {"o": o, "lse": lse})
                    lines.append("%s %s %s %s %d %r %s" % (cid, be, dt_name, family, causal, scale or 0.0, gid))
    write_case_files(out, "attention_edges", arrays, lines, "cid kind dtype family causal scale gid")
    print("%d cases" % len(lines))
    print("\n".join(log))


if __name__ == "__main__":
    main(sys.argv[1])
