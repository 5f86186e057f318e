"""Capture Triton's tl.sum over one row per program, to pin its reduction order bit for bit: a kernel loads BLOCK
elements of a row of n (masked, other=0), converts them to fp32 and stores tl.sum(x, axis=0). fp32, bf16 and fp16
rows; BLOCK = 32 .. 16384; num_warps = 1 .. 16; n = BLOCK, BLOCK - 1 and 3 BLOCK / 4 + 16. The rows are not stored:
every element comes from splitmix64 (row seed, index), as tests/ops/t-toolchain.c regenerates them
(capture_common.tlsum_values): kind "wide", a sign, a mantissa of the format's precision and an exponent in [-E, E]
(E = 20, or 10 for fp16), so that different orders round differently; then, on BLOCK 128, 1024, 4096, 1, 4 and 8 warps
and n = BLOCK and BLOCK - 1, kind "subnormal" (fp32 rows mostly below 2^-126: an adder that flushed them would differ)
and kind "ties" (fp32 and bf16 rows of +-2^e, e in [-1, 25], whose partial sums meet exact midpoints). The layout
Triton chose (the #blocked line of the kernel's TTGIR) is recorded with each case.
Writes OUT/tlsum.npz and OUT/tlsum.txt, one case a line:  id dtype block num_warps n rows seed layout kind

Run on a machine with an NVIDIA GPU, torch and Triton:  OUT=/some/dir python3 capture_tlsum.py
"""
import os
import re

import torch
import triton
import triton.language as tl
from capture_common import store_case, tlsum_values, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


@triton.jit
def rowsum_k(X, S, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(S + row, tl.sum(x, axis=0))


FMT = {"fp32": (torch.float32, 24, 20), "bf16": (torch.bfloat16, 8, 20), "fp16": (torch.float16, 11, 10)}
ROWS = 16


def capture(dname, block, nw, n, kind):
    dt, p, E = FMT[dname]
    seed = 1000 * len(lines) + 7
    x = torch.tensor(tlsum_values(kind, seed, ROWS, n, p, E), dtype=torch.float64).to(dt).cuda()
    s = torch.empty(ROWS, dtype=torch.float32, device="cuda")
    h = rowsum_k[(ROWS,)](x, s, n, BLOCK=block, num_warps=nw)
    torch.cuda.synchronize()
    lay = re.findall(r"#blocked\d* = #ttg\.blocked<\{([^}]*)\}>", h.asm["ttgir"])
    layout = ";".join(l.replace(" ", "") for l in lay) or "?"
    cid = "ts%04d" % len(lines)
    store_case(arrays, cid, {}, {"s": s})
    lines.append("%s %s %d %d %d %d %d %s %s" % (cid, dname, block, nw, n, ROWS, seed, layout, kind))
    if dname == "fp32" and block == 1024 and nw == 4 and n in (1023, 1024) and kind == "wide":
        with open(os.path.join(OUT, "ptx_%d.txt" % n), "w") as f:
            f.write(h.asm["ptx"])


for dname in FMT:
    for lb in range(5, 15):
        block = 1 << lb
        for nw in (1, 2, 4, 8, 16):
            for n in sorted({block, max(block - 1, 1), 3 * block // 4 + 16} - {0}):
                if n <= block:
                    capture(dname, block, nw, n, "wide")
for dname, kind in (("fp32", "subnormal"), ("fp32", "ties"), ("bf16", "ties")):
    for block in (128, 1024, 4096):
        for nw in (1, 4, 8):
            for n in (block - 1, block):
                capture(dname, block, nw, n, kind)
write_case_files(OUT, "tlsum", arrays, lines, torch_header())
print(len(lines), "cases")
print("\n".join(lines[:40]))
