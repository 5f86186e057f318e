"""Where the time of a GPU check goes: er.matmul(A, B).covers(out) on CUDA tensors (N x N x N fp16 operands, out the
fp32 result of torch's fp16 GEMM) and the GEMM epilogue of bench_device_rows.py (bias, gelu's tanh form, an fp16
store), each once under torch.profiler after a warm call, as a timeline of the GPU's kernels and copies and the CUDA
runtime calls of the host that took 0.1 ms or more (start and duration in ms from the first of them).

python3 bench/profile_device.py [N] [matmul|epilogue ...]   (N 8192 unless told; both checks unless told)
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
    A = torch.randn((n, n), generator=gen).half().cuda()
    B = (torch.randn((n, n), generator=gen) / n ** 0.5).half().cuda()
    bias = torch.randn(n, generator=gen).cuda()
    acc = A.float() @ B.float()
    out = (A @ B).float()
    epi = torch.nn.functional.gelu(acc + bias, approximate="tanh").half()
    checks = {"matmul": lambda: er.matmul(A, B).covers(out),
              "epilogue": lambda: er.matmul(A, B).add(bias).gelu(approximate="tanh").cast("float16").covers(epi)}
    for name in which:
        f = checks[name]
        f()
        torch.cuda.synchronize()
        t = time.perf_counter()
        res = f()
        torch.cuda.synchronize()
        print("== %s %dx%dx%d: %.4f s unprofiled, %s" % (name, n, n, n, time.perf_counter() - t,
                                                        "pass" if res.all() else "FAIL"))
        timeline(f)


if __name__ == "__main__":
    main()
