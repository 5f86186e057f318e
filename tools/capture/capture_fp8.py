"""Triton fp8 (e4m3) tl.dot chains over one 64 x 64 tile on an H200, fp32 accumulator, for the fp8 entry of the
mma:sm90 model (k = 32, F = 13, e8m13 accumulator). Writes OUT/fp8.npz and OUT/fp8.txt, one case a line:
id  kernel  K  BLOCK_K  max_num_imprecise_acc  dist.  Run: OUT=/some/dir python3 capture_fp8.py"""
import os
import torch
import triton
import triton.language as tl
from capture_common import torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


@triton.jit
def mm8(A, B, C, K, BK: tl.constexpr, IMPRECISE: tl.constexpr):
    rm = tl.arange(0, 64)
    rn = tl.arange(0, 64)
    rk = tl.arange(0, BK)
    acc = tl.zeros((64, 64), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(A + rm[:, None] * K + (k0 + rk)[None, :])
        b = tl.load(B + (k0 + rk)[:, None] * 64 + rn[None, :])
        acc = tl.dot(a, b, acc, max_num_imprecise_acc=IMPRECISE)
    tl.store(C + rm[:, None] * 64 + rn[None, :], acc)


g = torch.Generator().manual_seed(91)
for K, BK in ((32, 32), (64, 64), (128, 64), (512, 128), (2048, 128)):
    for imp in (0, 1 << 30):
        for dist in ("uniform_pos", "randn"):
            if dist == "randn":
                a, bt = torch.randn(64, K, generator=g) * 8, torch.randn(64, K, generator=g) * 8
            else:
                a, bt = torch.rand(64, K, generator=g) * 16 + 1, torch.rand(64, K, generator=g) * 16 + 1
            A8 = a.to(torch.float8_e4m3fn).cuda()
            B8 = bt.t().contiguous().to(torch.float8_e4m3fn).cuda()
            C = torch.empty(64, 64, device="cuda", dtype=torch.float32)
            try:
                mm8[(1,)](A8, B8, C, K, BK=BK, IMPRECISE=imp)
            except Exception as exc:
                lines.append("# K %d BK %d imprecise %d failed: %s" % (K, BK, imp, str(exc).splitlines()[0][:200]))
                continue
            torch.cuda.synchronize()
            cid = "f8%04d" % (len(arrays) // 3)
            arrays[cid + "__in__A"] = A8.cpu().view(torch.uint8).numpy()
            arrays[cid + "__in__B"] = B8.cpu().view(torch.uint8).numpy()
            arrays[cid + "__out__C"] = C.cpu().numpy()
            lines.append("%s triton_fp8_tl.dot_chain %d %d %d %s" % (cid, K, BK, imp, dist))
write_case_files(OUT, "fp8", arrays, lines, torch_header())
print("fp8 cases:", len(arrays) // 3)
