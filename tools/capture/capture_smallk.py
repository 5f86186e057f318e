"""Small-K fp32 outputs of tensor-core GEMMs (cuBLAS through torch.mm with out_dtype=float32, and Triton tl.dot)
on inputs built so that round-toward-zero and round-to-nearest differ: per output, one product 1 (or -1) plus
small products whose sum falls just above half an fp32 ulp of it. Writes OUT/smallk.npz and OUT/smallk.txt
(id kernel K). Run: OUT=/some/dir python3 capture_smallk.py"""
import os
import torch
import triton
import triton.language as tl
from capture_common import torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


def adversarial(M, N, K, seed):
    g = torch.Generator().manual_seed(seed)
    A = torch.zeros(M, K, dtype=torch.float32)
    B = torch.zeros(K, N, dtype=torch.float32)
    A[:, 0] = torch.where(torch.rand(M, generator=g) < 0.5, -1.0, 1.0) * torch.exp2(torch.randint(-3, 4, (M,), generator=g).float())
    B[0, :] = 1.0
    for k in range(1, K):
        # small products: 2^-12 * (1 + j/4) times 2^-12 * (1 + l/4): about 2^-24, just above half an ulp of 1
        A[:, k] = torch.exp2(torch.tensor(-12.0)) * (1 + torch.randint(0, 4, (M,), generator=g).float() / 4)
        B[k, :] = torch.exp2(torch.tensor(-12.0)) * (1 + torch.randint(0, 4, (N,), generator=g).float() / 4) * \
            torch.where(torch.rand(N, generator=g) < 0.8, 1.0, -1.0)
    return A.half().cuda(), B.half().cuda()


@triton.jit
def dot_kernel(A, B, C, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(A + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(B + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    c = tl.dot(a, b)
    tl.store(C + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))


def add(kind, A, B, C, K):
    cid = "sk%04d" % len(lines)
    for name, t in (("A", A), ("B", B)):
        arrays["%s__in__%s" % (cid, name)] = t.detach().contiguous().cpu().numpy()
    arrays["%s__out__C" % cid] = C.detach().contiguous().cpu().numpy()
    lines.append("%s %s %d" % (cid, kind, K))


M, N = 32, 32
for K in (2, 3, 4, 5, 8, 9, 16, 17, 32):
    A, B = adversarial(M, N, K, 1000 + K)
    C = torch.mm(A, B, out_dtype=torch.float32)
    torch.cuda.synchronize()
    add("cublas_mm_out_fp32", A, B, C, K)
    Ct = torch.empty(M, N, device="cuda", dtype=torch.float32)
    dot_kernel[(1,)](A, B, Ct, M, N, K=K, BM=32, BN=32, BK=max(16, triton.next_power_of_2(K)))
    torch.cuda.synchronize()
    add("triton_tl.dot_fp32", A, B, Ct, K)
write_case_files(OUT, "smallk", arrays, lines, torch_header())
print("cases:", len(lines))
