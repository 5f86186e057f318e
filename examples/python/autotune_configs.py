"""An autotuned Triton matmul with a config the autotuner picks only for large outputs (M N >= 2^20), and that config
skips the partial last K block (a planted bug). exactref.testing.check over the fast tier passes it under the
autotuner's own choice (no fast shape is that large) and fails it with configs= (every case under every config).
Needs CUDA, torch and Triton.
Run: RUNS=/some/dir PYTHONPATH=bindings/python python3 examples/python/autotune_configs.py"""

import os
import tempfile

import torch
import triton
import triton.language as tl

import exactref as er


def large_only(configs, named_args, **kwargs):
    """The buggy config (TAIL=0) for outputs of 2^20 elements or more, the other below."""
    big = named_args["M"] * named_args["N"] >= 1 << 20
    return [c for c in configs if (c.kwargs["TAIL"] == 0) == big]


@triton.autotune(
    configs=[triton.Config({"BK": 32, "TAIL": 1}), triton.Config({"BK": 64, "TAIL": 0})],
    key=["M", "N", "K"],
    prune_configs_by={"early_config_prune": large_only},
)
@triton.jit
def mm_kernel(A, B, C, M, N, K, sam, sak, sbk, sbn, BK: tl.constexpr, TAIL: tl.constexpr):
    rm = tl.program_id(0) * 16 + tl.arange(0, 16)
    rn = tl.program_id(1) * 16 + tl.arange(0, 16)
    rk = tl.arange(0, BK)
    acc = tl.zeros((16, 16), dtype=tl.float32)
    kend = K if TAIL else (K // BK) * BK   # TAIL=0: the partial last block is skipped
    for k0 in range(0, kend, BK):
        a = tl.load(
            A + rm[:, None] * sam + (k0 + rk)[None, :] * sak,
            mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            B + (k0 + rk)[:, None] * sbk + rn[None, :] * sbn,
            mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    tl.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def my_mm(A, B):
    M, K = A.shape
    N = B.shape[1]
    C = torch.empty(M, N, device=A.device, dtype=torch.float32)
    mm_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](
        A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1)
    )
    return C


if __name__ == "__main__":
    runs = os.environ.get("RUNS") or tempfile.mkdtemp()
    std = dict(standard="mma:sm90", outer="any")
    print(er.testing.check(my_mm, "matmul", dtypes=("float16", "bfloat16"), standard=std, device="cuda", runs_dir=runs))
    print(er.testing.check(my_mm, "matmul", dtypes=("float16", "bfloat16"), standard=std, device="cuda", runs_dir=runs,
                           configs=mm_kernel))
