"""layer_norm compiled by torch.compile (Inductor), correct and with the variance divided by n - 1, for the row ops'
note that a classic bug may pass (docs/reference/classes.md, Resolution): F.layer_norm, a two-pass decomposition
((x - mean)^2 summed, over n) and the same over n - 1, each compiled, on N(0, 1) and on shifted rows (N(0, 1) + 3), fp32,
16 rows of n = 768, 2048 and 8192. Writes OUT/ln_blind.npz (each group's x once, gNN__in__x; each case's y) and
OUT/ln_blind.txt (id kernel family n group). Run: OUT=/some/dir python3 capture_ln_blind.py"""
import os

import torch
import torch.nn.functional as F

from capture_common import new_group, store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


def two_pass(x, ddof):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).sum(-1, keepdim=True) / (x.shape[-1] - ddof)
    return (x - m) * torch.rsqrt(v + 1e-5)


kernels = {
    "inductor_layer_norm": torch.compile(lambda x: F.layer_norm(x, (x.shape[-1],), eps=1e-5)),
    "inductor_two_pass": torch.compile(lambda x: two_pass(x, 0)),
    "bug_inductor_n_minus_1": torch.compile(lambda x: two_pass(x, 1)),
}
g = torch.Generator(device="cuda").manual_seed(41)
for family, shift in (("normal", 0.0), ("shifted", 3.0)):
    for n in (768, 2048, 8192):
        x = torch.randn(16, n, device="cuda", generator=g) + shift
        gid = new_group(arrays, {"x": x})
        for kind, fn in kernels.items():
            y = fn(x)
            torch.cuda.synchronize()
            cid = "c%04d" % len(lines)
            store_case(arrays, cid, {}, {"y": y})
            lines.append("%s %s %s %d %s" % (cid, kind, family, n, gid))
write_case_files(OUT, "ln_blind", arrays, lines, torch_header(), compressed=True)
print("captured %d cases" % len(lines))
