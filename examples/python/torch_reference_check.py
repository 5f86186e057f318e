"""Two kernels checked through the torch reference functions a kernel engineer already has (the guide
docs/guides/from-a-torch-reference.md shows what this prints). The kernels are torch stand-ins on the CPU, written as
their GPU versions compute: a GEMM accumulating in fp32 with bias and gelu's tanh form fused, stored in fp16; and a
layer_norm computing in fp32 from bf16 inputs, stored in bf16. Each runs correct and with planted bugs, judged by
exactref.torch.assert_close and by torch.testing.assert_close against the same reference function."""
import numpy as np
import torch
import torch.nn.functional as F

import exactref.torch as ert


def gemm_reference(x, w, b):
    return F.gelu(F.linear(x, w, b), approximate="tanh").to(torch.float16)


def gemm_kernel(x, w, b, bug=None):
    """Each step an fp32 operation of torch's, rounded once (no BLAS, no vectorised approximations: the same bits
    on every machine); tanh and erf correctly rounded to fp32 from float64."""
    K = x.shape[1]
    keep = K - 32 if bug == "last K block dropped" else K
    xf, wf = x.float(), w.float()
    acc = torch.zeros(x.shape[0], w.shape[0])
    for k in range(keep):                                   # the fp32 accumulator, in order
        acc = acc + xf[:, k:k + 1] * wf[:, k]
    if bug != "bias left out":
        acc = acc + b.float()
    half = acc * 0.5
    if bug == "erf form for tanh":
        e = torch.erf((acc * 0.7071067811865476).double()).float()
    else:                                                   # tanh(sqrt(2/pi) (x + 0.044715 x^3))
        u = (acc + 0.044715 * (acc * acc * acc)) * 0.7978845608028654
        e = torch.tanh(u.double()).float()
    return (half * (1 + e)).to(torch.float16)


def layer_norm_reference(x, weight, bias):
    return F.layer_norm(x.float(), x.shape[-1:], weight, bias, eps=1e-5).to(torch.bfloat16)


def tree_sum(v):
    """A row's sum as a balanced tree, as tl.sum reduces one block of 1024: depth 10."""
    while v.shape[-1] > 1:
        v = v[..., 0::2] + v[..., 1::2]
    return v


def layer_norm_kernel(x, weight, bias, bug=None):
    v = x.float()
    n = v.shape[-1]
    mean = tree_sum(v) / n
    d = v - mean
    var = tree_sum(d * d) / (n - 1 if bug == "variance over n - 1" else n)   # two passes
    if bug == "eps outside the square root":
        rstd = 1 / torch.sqrt(var) + 1e-5
    else:
        rstd = (1 / torch.sqrt((var + 1e-5).double())).float()   # rsqrt correctly rounded
    return (d * rstd * weight + bias).to(torch.bfloat16)


def judge(name, kernel, reference, inputs, **standard):
    """exactref.torch.assert_close (under the default standard, and under the kernel's own where one is given) and
    torch.testing.assert_close, on the same kernel output and reference function."""
    out = kernel(*inputs)
    verdicts = []
    for std in ({}, standard) if standard else ({},):
        try:
            ert.assert_close(out, reference, *inputs, **std)
            verdicts.append("PASS")
        except AssertionError:
            verdicts.append("FAIL")
    try:
        torch.testing.assert_close(out, reference(*inputs))
        tolerance = "passes"
    except AssertionError:
        tolerance = "fails"
    counts = ert.reference(reference)(*inputs).covers(out, **standard).counts
    print("%-28s exactref %s (exact %d, covered %d, outside %d); assert_close %s"
          % (name, " / ".join(verdicts), counts["exact"], counts["covered"], counts["outside"], tolerance))


def randn(rng, *shape):
    """Inputs from numpy's generator: the same values on every machine."""
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


def main():
    rng = np.random.default_rng(0)
    x, w, b = (randn(rng, 128, 512) / 4).half(), (randn(rng, 256, 512) / 8).half(), randn(rng, 256).half()
    print("GEMM + bias + gelu (tanh) -> fp16, 128 x 256 x 512:", ert.reference(gemm_reference)(x, w, b).expr)
    for bug in (None, "last K block dropped", "bias left out", "erf form for tanh"):
        judge(bug or "correct", lambda *a: gemm_kernel(*a, bug=bug), gemm_reference, (x, w, b))
    xs, g, beta = (randn(rng, 64, 1024) * 2 + 1).bfloat16(), randn(rng, 1024), randn(rng, 1024)
    print("layer_norm, bf16 in and out, 64 x 1024:", ert.reference(layer_norm_reference)(xs, g, beta).expr)
    print("(exactref under the default standard / under depth=10, variance=\"two_pass\")")
    for bug in (None, "variance over n - 1", "eps outside the square root"):
        judge(bug or "correct", lambda *a: layer_norm_kernel(*a, bug=bug), layer_norm_reference, (xs, g, beta),
              depth=10, variance="two_pass")


if __name__ == "__main__":
    main()
