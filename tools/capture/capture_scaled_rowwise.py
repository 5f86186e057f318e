"""torch._scaled_mm with rowwise scales on an H200 (the float8 rowwise recipe: A quantised per row, B per column, each
to e4m3 with scale amax / 448; the GEMM takes scale_a of shape (M, 1) and scale_b of shape (1, N), fp32), for
er_scaled_matmul_rowwise. bf16 and fp32 outputs where torch takes them, use_fast_accum True and False, K from 32 to
4096, normal inputs with rows and columns 2^-8 to 2^8 apart. Planted bugs: scale_b reversed (the kernel scales
column j by column N - 1 - j's value) and scale_a applied twice. Writes OUT/scaled_rowwise.npz (cNNNN__in__A / B as
uint8 patterns, __in__sa / sb, __out__C; bf16 as uint16 patterns) and OUT/scaled_rowwise.txt (id kernel M K N
out_dtype fast). Run: OUT=/some/dir python3 capture_scaled_rowwise.py"""
import os

import torch

from capture_common import store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []
g = torch.Generator(device="cuda").manual_seed(23)


def rowwise(x, dim):
    """x quantised to e4m3 along `dim` (1: per row, 0: per column): scale = amax / 448, q = x / scale saturated."""
    s = (x.abs().amax(dim=dim, keepdim=True) / 448.0).clamp(min=1e-12)
    return (x / s).clamp(-448, 448).to(torch.float8_e4m3fn), s.float()


for M, K, N in ((64, 32, 48), (128, 256, 64), (96, 1024, 80), (32, 4096, 16)):
    A = torch.randn(M, K, device="cuda", generator=g) * torch.exp2(torch.randint(-8, 9, (M, 1), device="cuda", generator=g).float())
    B = torch.randn(K, N, device="cuda", generator=g) * torch.exp2(torch.randint(-8, 9, (1, N), device="cuda", generator=g).float())
    A8, sa = rowwise(A, 1)
    B8, sb = rowwise(B, 0)
    Bt = B8.t().contiguous().t()  # column-major, as _scaled_mm wants its second operand
    for odt in (torch.bfloat16, torch.float32):
        for fast in (True, False):
            for kind in ("torch", "bug_sb_reversed", "bug_sa_twice"):
                ka, kb = sa, sb
                if kind == "bug_sb_reversed":
                    kb = sb.flip(1).contiguous()
                if kind == "bug_sa_twice":
                    ka = sa * sa
                try:
                    C = torch._scaled_mm(A8, Bt, scale_a=ka, scale_b=kb, out_dtype=odt, use_fast_accum=fast)
                except Exception as e:  # a configuration torch refuses: say so, keep going
                    print("refused: %s %s fast=%s: %s" % ((M, K, N), odt, fast, str(e).splitlines()[0]))
                    continue
                torch.cuda.synchronize()
                cid = "c%04d" % len(lines)
                store_case(arrays, cid, {"A": A8, "B": B8, "sa": sa.reshape(-1), "sb": sb.reshape(-1)}, {"C": C})
                lines.append("%s %s %d %d %d %s %d" % (cid, kind, M, K, N, str(odt).replace("torch.", ""), fast))
write_case_files(OUT, "scaled_rowwise", arrays, lines, torch_header(), compressed=True)
print("captured %d cases" % len(lines))
