"""torch's CUDA elementwise activations on a sweep, for single elementwise ops (docs/algorithms/chains.md): F.gelu,
F.silu and F.relu on fp32, fp16 and bf16 inputs spanning [-20, 20] densely, large arguments near each format's
maximum, subnormals, signed zeros, infinities and NaN; and F.gelu(approximate="tanh") as a planted bug where the erf
form is claimed. Writes OUT/elementwise.npz (each dtype's inputs once, gNN__in__x; each case's output
cNNNN__out__y) and OUT/elementwise.txt (id function dtype n group). Run: OUT=/some/dir python3 capture_elementwise.py"""
import os

import torch
import torch.nn.functional as F

from capture_common import new_group, store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []

for dt, name in ((torch.float32, "float32"), (torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
    fi = torch.finfo(dt)
    dense = torch.linspace(-20, 20, 40001, dtype=torch.float64)
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), fi.max, -fi.max, fi.max / 3, -fi.max / 3,
                            fi.tiny, -fi.tiny, fi.tiny / 8, -fi.tiny / 8, -5.9, -6.0, -6.1, -7.5, -10.0, -30.0, 30.0,
                            -88.0, -89.0, 88.0, 89.0], dtype=torch.float64)
    x = torch.cat([dense, special]).to(dt).cuda()
    gid = new_group(arrays, {"x": x})
    for fn, f in (("gelu", F.gelu), ("silu", F.silu), ("relu", F.relu),
                  ("bug_gelu_tanh", lambda t: F.gelu(t, approximate="tanh"))):
        y = f(x)
        torch.cuda.synchronize()
        cid = "c%04d" % len(lines)
        store_case(arrays, cid, {}, {"y": y})
        lines.append("%s %s %s %d %s" % (cid, fn, name, x.numel(), gid))
write_case_files(OUT, "elementwise", arrays, lines, torch_header(), compressed=True)
