"""torch's CUDA softmax on rows of more than 1024 elements (its block path, SoftMax.cu), for the depth helper
er_depth_torch_softmax: one row of 2048 fp32 elements (the shared-memory kernel) and one of 13000 (too long for 48 KiB
of shared memory: ilpReduce), each with wide, offset and flat data, fp32 in and out. Writes
OUT/torch_softmax_block.npz (cNNNN__in__x, cNNNN__out__y) and OUT/torch_softmax_block.txt (id family rows n).
Run: OUT=/some/dir python3 capture_torch_softmax_block.py"""
import os

import torch

from capture_common import store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []
g = torch.Generator(device="cuda").manual_seed(22)
for n in (2048, 13000):
    for family in ("wide", "offset", "flat"):
        x = torch.randn(1, n, device="cuda", generator=g)
        x = x * 12 if family == "wide" else x + 80 if family == "offset" else x * 1e-3
        y = torch.softmax(x, dim=-1)
        torch.cuda.synchronize()
        cid = "c%04d" % len(lines)
        store_case(arrays, cid, {"x": x}, {"y": y})
        lines.append("%s %s %d %d" % (cid, family, 1, n))
write_case_files(OUT, "torch_softmax_block", arrays, lines, torch_header())
print("captured %d cases" % len(lines))
