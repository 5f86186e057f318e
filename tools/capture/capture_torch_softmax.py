"""torch's CUDA softmax on rows of 1 to 1024 elements (its persistent path, PersistentSoftmax.cuh), for the depth
helper er_depth_torch_softmax: inputs that make the sum's order visible (a wide dynamic range, a large offset, many
near-equal values, rows with -inf lanes), fp32 in and out. Writes OUT/torch_softmax.npz (cNNNN__in__x,
cNNNN__out__y) and OUT/torch_softmax.txt (id family rows n). Run: OUT=/some/dir python3 capture_torch_softmax.py"""
import os

import torch

from capture_common import store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []
g = torch.Generator(device="cuda").manual_seed(21)
rows = 16
for n in (3, 17, 32, 33, 100, 128, 255, 511, 777, 1000, 1024):
    for family in ("wide", "offset", "flat", "masked"):
        if family == "wide":
            x = torch.randn(rows, n, device="cuda", generator=g) * 12
        elif family == "offset":
            x = torch.randn(rows, n, device="cuda", generator=g) + 80
        elif family == "flat":
            x = torch.randn(rows, n, device="cuda", generator=g) * 1e-3
        else:
            x = torch.randn(rows, n, device="cuda", generator=g) * 4
            x[:, n // 2:] = -float("inf")
        y = torch.softmax(x, dim=-1)
        torch.cuda.synchronize()
        cid = "c%04d" % len(lines)
        store_case(arrays, cid, {"x": x}, {"y": y})
        lines.append("%s %s %d %d" % (cid, family, rows, n))
write_case_files(OUT, "torch_softmax", arrays, lines, torch_header())
print("captured %d cases" % len(lines))
