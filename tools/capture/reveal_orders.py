"""Reveals the summation orders of real GPU kernels with exactref.testing.reveal_order and prints what it found:
Triton's tl.sum over one block, torch.sum on CUDA, a torch.compile'd (Inductor) sum, and cuBLAS matmuls in fp32
(TF32 off) and fp16 (tensor cores). Each line is the Order; where a standard was found, the kernel's outputs on fresh
random rows of the probes' shape are checked under it (reveal_order has already checked them on its own rows), and
where it is fixed (a named order or the tree written out), its emulation is compared with them bit for bit. Needs a CUDA device,
torch and Triton; run with EXACTREF_LIBRARY pointing at a built library.

    python3 tools/capture/reveal_orders.py > reveal.txt
"""
import sys

import numpy as np
import torch
import triton
import triton.language as tl

import exactref as er
from exactref.testing import family, reveal_order


@triton.jit
def _row_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def triton_sum(block, warps):
    def kernel(x):
        out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
        _row_sum[(x.shape[0],)](x.contiguous(), out, x.shape[1], BLOCK=block, num_warps=warps)
        return out
    return kernel


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    compiled = torch.compile(lambda x: x.sum(-1))
    cases = []
    for n in (1000, 4096):
        b = triton.next_power_of_2(n)
        for w in (4, 8):
            cases.append(("triton tl.sum BLOCK=%d num_warps=%d" % (b, w), triton_sum(b, w), "sum", n, "float32"))
        cases.append(("torch.sum cuda", lambda x: x.sum(-1), "sum", n, "float32"))
        cases.append(("torch.compile sum (Inductor)", compiled, "sum", n, "float32"))
    for k in (256, 4096):
        cases.append(("torch.matmul fp32 (cuBLAS, TF32 off)", lambda a, b: a @ b, "matmul", k, "float32"))
        cases.append(("torch.matmul fp16 (cuBLAS)", lambda a, b: (a @ b).float(), "matmul", k, "float16"))
    for name, kernel, op, n, dtype in cases:
        try:
            o = reveal_order(kernel, op, n=n, dtype=dtype, device="cuda")
        except Exception as e:  # a refusal is printed, the run goes on
            print("%s, n=%d: %s: %s" % (name, n, type(e).__name__, e))
            continue
        line = "%s, n=%d: %s" % (name, n, o)
        if o.depth is not None or o.fixed:
            x = family("normal", (o.rows, n), dtype, seed=11)  # the probes' shape: the kernel may pick its order by it
            xt = torch.from_numpy(x.view(np.uint16) if dtype == "float16" else x).view(
                torch.float16 if dtype == "float16" else torch.float32).cuda()
            if op == "sum":
                out, ref = kernel(xt).cpu().numpy(), er.sum(x)
            else:
                bm = family("normal", (n, 16), dtype, seed=12)
                bt = torch.from_numpy(bm).cuda()
                out, ref = kernel(xt, bt).cpu().numpy(), er.matmul(x, bm)
            line += "\n  fresh rows under it: %r; under any_order: %r" % (ref.covers(out, **o.standard),
                                                                       ref.covers(out))
            if o.fixed:
                em = ref.emulate(**o.standard, dtype=np.dtype(out.dtype).name)
                same = np.array_equal(em.view(np.uint8), np.ascontiguousarray(out).view(np.uint8))
                line += "\n  emulated under it: %s" % ("bit for bit" if same else "DIFFERENT in %d of %d" % (
                    int((em != out).sum()), out.size))
        print(line)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
