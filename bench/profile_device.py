"""Where the time of a GPU check goes: er.matmul(A, B).covers(out) on CUDA tensors (N x N x N fp16 operands, out the
fp32 result of torch's fp16 GEMM), the GEMM epilogue of bench_device_rows.py (bias, gelu's tanh form, an fp16
store), the row checks of bench_device_rows.py on N x N fp32 (softmax, layer_norm with weight and bias;
softmax_bf16: softmax of the input in bf16; log_softmax_backward: torch's, of a log_softmax of it and a randn
gradient) and attention on 1 x 32 x N x N x 128 bf16 (torch's SDPA, no mask),
each once under torch.profiler after a warm call, as a timeline of the GPU's kernels and copies and the CUDA runtime
calls of the host that took 0.1 ms or more (start and duration in ms from the first of them); a gap in it is the
host's own work.

python3 bench/profile_device.py [N] [matmul|epilogue|softmax|softmax_bf16|layer_norm|log_softmax_backward|
                                     attention ...]
(N 8192 unless told; matmul and epilogue unless told)
The profiler's own cost lengthens the timeline: the bench programs give the times."""
import json
import os
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile

import exactref as er


def timeline(f):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        f()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        p.export_chrome_trace(path)
        with open(path) as fh:
            ev = json.load(fh)["traceEvents"]
    keep = ("kernel", "cuda_runtime", "gpu_memcpy", "gpu_memset", "cuda_driver")
    ev = sorted((e for e in ev if e.get("ph") == "X" and e.get("dur", 0) >= 100 and e.get("cat") in keep),
                key=lambda e: e["ts"])
    t0 = ev[0]["ts"] if ev else 0
    for e in ev:
        print("%9.3f ms %8.3f ms %-12s %s" % ((e["ts"] - t0) / 1e3, e["dur"] / 1e3, e["cat"], e["name"][:100]))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    which = sys.argv[2:] or ["matmul", "epilogue"]
    gen = torch.Generator(device="cpu").manual_seed(9)

    def matmul_checks():
        A = torch.randn((n, n), generator=gen).half().cuda()
        B = (torch.randn((n, n), generator=gen) / n ** 0.5).half().cuda()
        bias = torch.randn(n, generator=gen).cuda()
        acc = A.float() @ B.float()
        out = (A @ B).float()
        epi = torch.nn.functional.gelu(acc + bias, approximate="tanh").half()
        return {"matmul": lambda: er.matmul(A, B).covers(out),
                "epilogue": lambda: er.matmul(A, B).add(bias).gelu(approximate="tanh").cast("float16").covers(epi)}

    def row_checks():
        x = (torch.randn((n, n), generator=gen) * 3).cuda()
        w = (1 + torch.randn(n, generator=gen) / 4).cuda()
        b = (torch.randn(n, generator=gen) / 4).cuda()
        sm = torch.softmax(x, -1)
        ln = torch.nn.functional.layer_norm(x, (n,), w, b, 1e-6)
        xb = x.bfloat16()
        smb = torch.softmax(xb, -1)
        y = torch.log_softmax(x, -1)
        dy = torch.randn((n, n), generator=gen).cuda()
        dx = torch._log_softmax_backward_data(dy, y, -1, torch.float32)
        return {"softmax": lambda: er.softmax_covers_device(x, sm),
                "log_softmax_backward": lambda: er.log_softmax_backward_covers_device(dy, y, dx),
                "softmax_bf16": lambda: er.softmax_covers_device(xb, smb),
                "layer_norm": lambda: er.layer_norm_covers_device(x, ln, n, w, b, 1e-6)}

    def attention_checks():
        q, k, v = (torch.randn((1, 32, n, 128), generator=gen).bfloat16().cuda() for _ in range(3))
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return {"attention": lambda: er.attention_covers_device(q, k, v, o)}

    makers = {"matmul": matmul_checks, "epilogue": matmul_checks, "softmax": row_checks, "softmax_bf16": row_checks,
              "layer_norm": row_checks, "log_softmax_backward": row_checks,
              "attention": attention_checks}
    checks = {}
    for name in which:
        if name not in checks:
            checks.update(makers[name]())
        f = checks[name]
        f()
        torch.cuda.synchronize()
        t = time.perf_counter()
        res = f()
        torch.cuda.synchronize()
        rows = ("softmax", "softmax_bf16", "layer_norm", "log_softmax_backward")
        shape = ("%dx%d" % (n, n) if name in rows else "1x32x%dx%dx128" % (n, n) if name == "attention"
                 else "%dx%dx%d" % (n, n, n))
        print("== %s %s: %.4f s unprofiled, %s" % (name, shape, time.perf_counter() - t,
                                                  "pass" if res.all() else "FAIL"))
        timeline(f)


if __name__ == "__main__":
    main()
