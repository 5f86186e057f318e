"""The Python package against the C library: verdicts, dtypes, layouts, emulation, errors, installation."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import exactref as er
from exactref import _ffi as _lib

from conftest import ROOT, arrays, captures

ml_dtypes = pytest.importorskip("ml_dtypes")


def ints(rng, shape, lo=-8, hi=8):
    """Small integers: every product and sum is exact in fp16/bf16/fp32, so the exact result is known."""
    return rng.integers(lo, hi, size=shape).astype(np.float64)


def test_covers_pass_and_fail():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((6, 40)).astype(np.float16)
    B = rng.standard_normal((40, 5)).astype(np.float16)
    out = A.astype(np.float32) @ B.astype(np.float32)
    ref = er.matmul(A, B)
    res = ref.covers(out, standard="any_order", compute="float32")
    assert res.all() and res.n_failed == 0
    assert res.classes.shape == (6, 5) and res.classes.dtype == np.uint8
    assert set(np.unique(res.classes)) <= {0, 1}
    assert res.counts["exact"] + res.counts["covered"] == 30
    assert "PASS" in str(res) and res.worst is None
    res.assert_all()
    bad = out.copy()
    bad[2, 3] += 1.0
    res = ref.covers(bad)
    assert not res.all() and res.n_failed == 1
    assert res.classes[2, 3] == er.CLASSES.index("outside")
    assert res.worst["coord"] == [2, 3] and res.worst["class"] == "outside"
    assert res.worst["lo"] <= res.worst["exact"] <= res.worst["hi"]
    with pytest.raises(AssertionError, match=r"\[2, 3\] = .* is outside"):
        res.assert_all()


@pytest.mark.parametrize("din", ["float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("dout", ["float16", "bfloat16", "float32", "float64"])
def test_dtypes_exact(din, dout):
    rng = np.random.default_rng(2)
    A64, B64 = ints(rng, (4, 9), -4, 4), ints(rng, (9, 3), -4, 4)
    exact = A64 @ B64  # exact: small integers
    dt_in = np.dtype(getattr(ml_dtypes, din)) if din in ("bfloat16", "float8_e4m3fn", "float8_e5m2") else np.dtype(din)
    dt_out = np.dtype(getattr(ml_dtypes, dout)) if dout == "bfloat16" else np.dtype(dout)
    opts = {"compute": "fp64"} if din == "float64" else {}  # fp32 does not hold float64 inputs
    res = er.matmul(A64.astype(dt_in), B64.astype(dt_in)).covers(exact.astype(dt_out), **opts)
    assert res.counts["exact"] == 12, str(res)
    wrong = exact.copy()
    wrong[0, 0] += 1
    assert not er.matmul(A64.astype(dt_in), B64.astype(dt_in)).covers(wrong.astype(dt_out), **opts).all()


def test_inputs_wider_than_the_accumulator_refused():
    """float64 arrays for a kernel that computes in fp32 (it read float32 values): the check refuses them and says
    what to pass, rather than judging the kernel on values it never read (a correct kernel then fails)."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((8, 300))
    B = rng.standard_normal((300, 6))
    out = A.astype(np.float32) @ B.astype(np.float32)  # a correct fp32 kernel on the converted inputs
    for op, args in (("matmul", (A, B)), ("sum", (A,)), ("mean", (A,))):
        ref = getattr(er, op)(*args)
        with pytest.raises(er.ExactrefValueError,
                           match=r"of (operand A|the input x) fp64 needs a compute format holding it \(compute=fp32 "
                                 r"does not\): pass the values the kernel read"):
            ref.covers(out if op == "matmul" else out[:, 0])
    assert er.matmul(A.astype(np.float32), B.astype(np.float32)).covers(out).all()
    assert er.matmul(A, B).covers((A @ B).astype(np.float32), compute="fp64").all()
    with pytest.raises(er.ExactrefValueError, match="bf16 needs a compute format holding it \\(compute=fp16"):
        er.matmul(A.astype(ml_dtypes.bfloat16), B.astype(ml_dtypes.bfloat16)).covers(out, compute="fp16")


def test_layouts_zero_copy_and_strided():
    rng = np.random.default_rng(3)
    big = ints(rng, (20, 30)).astype(np.float32)
    A = big[2:8, ::2]          # strided rows and columns
    B = ints(rng, (4, 15)).astype(np.float32).T   # transposed
    Bc = np.ascontiguousarray(B)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    out_big = np.zeros((8, 12), np.float32)
    out = out_big[1:7, ::3]     # strided output
    out[...] = exact
    assert er.matmul(A, B).covers(out).counts["exact"] == 24
    assert er.matmul(A[:, ::-1], Bc[::-1]).covers(out).counts["exact"] == 24  # negative strides: copied
    assert er.matmul(np.asfortranarray(A), Bc).covers(np.asfortranarray(out)).all()


def test_batched_and_vectors():
    rng = np.random.default_rng(4)
    A = ints(rng, (2, 1, 3, 5)).astype(np.float16)
    B = ints(rng, (4, 5, 2)).astype(np.float16)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    assert exact.shape == (2, 4, 3, 2)
    ref = er.matmul(A, B)
    assert ref.shape == exact.shape
    assert ref.covers(exact.astype(np.float32)).counts["exact"] == exact.size
    v = ints(rng, (5,)).astype(np.float32)
    assert er.matmul(v, v).covers(np.float32(v @ v)).all()
    assert er.matmul(A[0, 0], v).covers((A[0, 0].astype(np.float64) @ v).astype(np.float32)).all()
    assert er.matmul(v, B[0]).shape == (2,)


def test_emulate_bit_for_bit():
    rng = np.random.default_rng(5)
    A = rng.standard_normal((7, 300)).astype(np.float32)
    B = rng.standard_normal((300, 6)).astype(np.float32)
    acc = np.zeros((7, 6), np.float32)
    for k in range(300):              # numpy's float32 ops round once each: a sequential loop without FMA
        acc = acc + A[:, k, None] * B[None, k, :]
    ref = er.matmul(A, B)
    got = ref.emulate("sequential", compute="float32", fma="never", dtype="float32")
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), acc.view(np.uint32))
    assert ref.covers(acc, standard="sequential", compute="float32", fma=False).all()
    assert not ref.covers(acc, standard="sequential", compute="float32", fma=True).all()
    got16 = ref.emulate("blocked:32", fma="never", dtype="bfloat16")
    assert got16.dtype.name == "bfloat16"


def test_errors():
    A = np.ones((3, 4), np.float32)
    B = np.ones((4, 2), np.float32)
    with pytest.raises(TypeError, match="unsupported dtype int32"):
        er.matmul(A.astype(np.int32), B)
    with pytest.raises(ValueError, match="A has 4 columns but B has 3 rows"):
        er.matmul(A, np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match="scalar"):
        er.matmul(np.float32(1), B)
    ref = er.matmul(A, B)
    with pytest.raises(ValueError, match=r"out has shape \(2, 3\) but matmul produces \(3, 2\)"):
        ref.covers(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError) as e:
        ref.covers(np.zeros((3, 2), np.float32), standard="blocked:0")
    assert e.value.status == "ER_ERR_STANDARD" and "positive integer" in str(e.value)
    with pytest.raises(ValueError, match="unknown option 'acc'"):
        ref.covers(np.zeros((3, 2), np.float32), acc="fp32")
    with pytest.raises(ValueError, match="fully fixed"):
        ref.emulate("any_order")
    with pytest.raises(TypeError, match="standard must be a string"):
        ref.covers(np.zeros((3, 2), np.float32), standard=3)
    with pytest.raises(TypeError, match="must be a numpy array or a torch tensor"):
        er.matmul(object(), B)


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    A = torch.randint(-4, 4, (3, 8)).to(torch.bfloat16)
    B = torch.randint(-4, 4, (8, 2)).to(torch.bfloat16)
    exact = (A.double() @ B.double()).float()
    assert er.matmul(A, B).covers(exact).counts["exact"] == 6
    assert er.matmul(A.t().contiguous().t(), B).covers(exact.to(torch.float16)).all()
    # a dtype numpy has no equivalent of: exactref's list of formats, not torch's own error
    for dt in ("float8_e4m3fnuz", "float8_e5m2fnuz"):
        if hasattr(torch, dt):
            with pytest.raises(TypeError, match="A has unsupported dtype %s \\(supported: float64, float32" % dt):
                er.matmul(A.to(getattr(torch, dt)), B)


def test_library_errors_are_clear():
    env = dict(os.environ, EXACTREF_LIBRARY="/nonexistent/libexactref.so")
    r = subprocess.run([sys.executable, "-c", "import exactref"], env=env, capture_output=True, text=True,
                       cwd=os.path.join(ROOT, "bindings", "python"))
    assert r.returncode != 0 and "cannot load libexactref" in r.stderr and "EXACTREF_LIBRARY" in r.stderr


def test_pip_install(tmp_path):
    import shutil
    src, target = tmp_path / "src", tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "bindings", "python"), src,
                    ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--target", str(target), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    code = "import exactref, numpy as np; print(exactref.__file__); print(exactref.version())"
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(target)),
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(str(target)) and re.search(r"\d+\.\d+\.\d+", r.stdout)


@pytest.mark.parametrize("example", ["splitk_matmul.py", "fused_epilogue.py"])
def test_guide_output(example):
    """The Python guide shows what each of its examples prints."""
    # the probe stays alive while its pointer is read
    probe = er.matmul(np.zeros((64, 256), np.float16), np.zeros((256, 48), np.float16))
    if example == "fused_epilogue.py" and not _lib.lib.er_ref_fast(probe._ptr):
        # the chain's fast decision builds the sets of fewer elements, so its widest set differs from the engine's
        pytest.skip("the guide shows a build with OpenBLAS (make test installs it); this library has no fast path")
    _shows_output(os.path.join("guides", "test-a-custom-kernel-python.md"), example)


def _shows_output(doc, example):
    """The doc (under docs/) shows, after <!-- output of: example -->, what examples/python/example prints."""
    text = open(os.path.join(ROOT, "docs", doc)).read()
    block = text.split("<!-- output of: %s -->" % example, 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python", example)],
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python")),
                       capture_output=True, text=True, cwd=ROOT)  # run from the repository, as the docs say
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip("\n") == block.rstrip("\n")


def test_reductions():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 300)).astype(np.float32)
    acc = np.zeros(5, np.float32)
    for k in range(300):                       # a sequential float32 sum
        acc = acc + x[:, k]
    ref = er.sum(x, dim=1)
    assert ref.shape == (5,)
    assert ref.covers(acc).all()
    assert np.array_equal(ref.emulate("sequential", dtype="float32"), acc)
    assert not ref.covers(acc + np.float32(1e-3), standard="sequential").all()   # the any-order set is wider
    assert not ref.covers(acc + np.float32(0.1)).all()
    m = er.mean(x, dim=-1)
    assert m.covers(acc / np.float32(300), mean="divide").all()
    assert np.array_equal(m.emulate("sequential", mean="divide"), acc / np.float32(300))
    assert er.max(x, 1).covers(x.max(axis=1)).counts["exact"] == 5
    v = x[0].astype(np.float16)
    assert er.sum(v).shape == () and er.sum(v).covers(np.float32(v.astype(np.float64).sum())).all()
    with pytest.raises(ValueError, match="out of range"):
        er.sum(x, dim=2)
    with pytest.raises(ValueError, match="empty dimension"):
        er.max(np.zeros((3, 0), np.float32), 1)
    with pytest.raises(ValueError, match="mean= applies to mean,"):
        ref.covers(acc, mean="divide")


def test_max_refuses_arithmetic_options():
    """max adds and multiplies nothing: compute= and fma= are refused in every form they may be given (the default
    values too), and overflow= is taken."""
    x = np.random.default_rng(4).standard_normal((5, 7)).astype(np.float32)
    m = er.max(x, 1)
    assert m.covers(x.max(axis=1), overflow="ieee").all()
    for kw in ({"compute": "fp32"}, {"compute": "fp16"}, {"fma": "either"}, {"fma": "never"},
               {"options": "compute=fp32"}, {"standard": "any_order fma=always"}):
        with pytest.raises(er.ExactrefValueError, match="max adds and multiplies nothing"):
            m.covers(x.max(axis=1), **kw)
        with pytest.raises(er.ExactrefValueError, match="max adds and multiplies nothing"):
            m.enclosure(**kw)
    with pytest.raises(er.ExactrefValueError, match="max adds and multiplies nothing"):
        m.emulate("any_order", compute="fp32")


def test_softmax():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((4, 50)) * 3).astype(np.float16)
    xf = x.astype(np.float32)
    e = np.exp(xf - xf.max(axis=1, keepdims=True))
    y = e / e.sum(axis=1, keepdims=True)            # float32, as a kernel would
    ref = er.softmax(x, dim=1)
    assert ref.covers(y).all()
    assert ref.covers(y.astype(np.float16)).all()
    bad = y.copy()
    bad[:, 0] *= np.float32(1.01)
    assert not ref.covers(bad).all()
    with pytest.raises(ValueError, match="fully fixed"):
        ref.emulate("any_order")
    d = xf - xf.max(axis=1, keepdims=True)
    ly = d - np.log(np.exp(d).sum(axis=1, keepdims=True))
    assert er.log_softmax(x, dim=1).covers(ly).all()
    assert not er.log_softmax(x, dim=1).covers(ly + np.float32(0.01)).all()


def test_rmsnorm():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((6, 64)).astype(np.float16)
    w = (1 + rng.standard_normal(64) / 4).astype(np.float16)
    xf = x.astype(np.float32)
    r = 1 / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + np.float32(1e-6))
    y = ((xf * r).astype(np.float16) * w).astype(np.float16)   # torch's composite: cast, then weight
    ref = er.rmsnorm(x, w, eps=1e-6)
    assert ref.covers(y).all()
    assert not ref.covers((y.astype(np.float32) * 1.01).astype(np.float16)).all()
    assert er.rmsnorm(x).covers((xf * r).astype(np.float32)).all()
    with pytest.raises(ValueError, match="weight must be a vector of length 64"):
        er.rmsnorm(x, w[:3])


def test_softmax_options():
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((3, 40)) * 3).astype(np.float32)
    e = np.exp(x)                                                    # no max subtraction: exp(x) directly
    y = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    ref = er.softmax(x)
    assert ref.covers(y, max="optional").all()
    assert ref.covers(y, math="fast").all() and ref.covers(y, online="yes").all()
    with pytest.raises(ValueError, match="online=yes rescales"):
        ref.covers(y, online="yes", max="optional")


def test_mma_and_scaled_matmul():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(12)
    A = rng.standard_normal((4, 64)).astype(np.float16)
    B = rng.standard_normal((64, 3)).astype(np.float16)
    ref = er.matmul(A, B)
    chain = ref.emulate("mma:sm90")                                 # the tensor-core chain, fp32 output
    assert ref.covers(chain, standard="mma:sm90").counts["outside"] == 0
    assert ref.covers(chain, standard="mma:sm90", outer="any").all()
    a8 = (rng.random((4, 64)) * 8 + 1).astype(ml_dtypes.float8_e4m3fn)
    b8 = (rng.random((64, 3)) * 8 + 1).astype(ml_dtypes.float8_e4m3fn)
    exact = a8.astype(np.float64) @ b8.astype(np.float64) * 0.5 * 0.25
    sref = er.scaled_matmul(a8, b8, 0.5, 0.25)
    assert sref.covers(exact.astype(np.float32), standard="mma:sm90", outer="any", promote=4).all()
    assert not sref.covers((exact * 1.05).astype(np.float32), standard="mma:sm90", outer="any", promote=4).all()
    with pytest.raises(ValueError, match="not a value of fp32"):
        er.scaled_matmul(a8, b8, 0.1, 1.0)


def test_layer_norm():
    rng = np.random.default_rng(10)
    x = (rng.standard_normal((5, 96)) + 3).astype(np.float16)
    w = (1 + rng.standard_normal(96) / 4).astype(np.float16)
    b = (rng.standard_normal(96) / 4).astype(np.float16)
    xf = x.astype(np.float32)
    mean = xf.mean(axis=1, keepdims=True, dtype=np.float32)          # numpy: pairwise sum, then divide
    d = xf - mean
    var = (d * d).mean(axis=1, keepdims=True, dtype=np.float32)      # the two-pass variance
    rstd = (1 / np.sqrt(var + np.float32(1e-5))).astype(np.float32)
    y = (d * rstd * w.astype(np.float32) + b.astype(np.float32)).astype(np.float16)
    ref = er.layer_norm(x, 96, w, b, eps=1e-5)
    res = ref.covers((y, mean, rstd), variance="two_pass")
    assert res.all() and res.y.all() and res.rstd.all(), str(res)
    assert ref.covers(y).all()                                       # y alone: a Result
    unbiased = (1 / np.sqrt(var * np.float32(96 / 95) + np.float32(1e-5))).astype(np.float32)
    res = ref.covers((None, None, unbiased), variance="two_pass")
    assert not res.all() and list(res.results) == ["rstd"]
    with pytest.raises(AssertionError, match="layernorm.rstd"):
        res.assert_all()
    with pytest.raises(ValueError, match="normalized_shape"):
        er.layer_norm(x, (5, 96, 1))
    with pytest.raises(ValueError, match="mean must have"):
        ref.covers((y, mean[:2], rstd))


def test_exact_output():
    rng = np.random.default_rng(9)
    A = rng.integers(-8, 8, (5, 7)).astype(np.float16)
    B = rng.integers(-8, 8, (7, 3)).astype(np.float16)
    ref = er.matmul(A, B)
    want = A.astype(np.float64) @ B.astype(np.float64)        # small integers: exact in float64
    assert np.array_equal(ref.exact("float64"), want)
    got = ref.exact("bfloat16")
    assert got.dtype.name == "bfloat16" and np.array_equal(
        got.astype(np.float64), want.astype(got.dtype).astype(np.float64)
    )
    assert ref.covers(ref.exact("float32")).counts["exact"] == 15
    x = rng.standard_normal((4, 9)).astype(np.float32)
    assert np.array_equal(er.max(x, 1).exact("float32"), x.max(axis=1))
    with pytest.raises(NotImplementedError):
        er.softmax(x).exact()


def test_matmul_covers_device_equals_host():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not er.cuda_available():
        pytest.skip("needs a CUDA device and an exactref built with CUDA")
    gen = torch.Generator(device="cpu").manual_seed(5)
    for dtype, shape_a, shape_b in (
        (torch.float16, (64, 300), (300, 48)),
        (torch.bfloat16, (2, 1, 33, 70), (3, 70, 17)),
        (torch.float32, (40, 129), (129, 40)),
    ):
        A = torch.randn(shape_a, generator=gen).to(dtype).cuda()
        B = torch.randn(shape_b, generator=gen).to(dtype).cuda()
        good = torch.matmul(A.float(), B.float())       # an fp32 GEMM on the GPU
        out = good.clone()
        out.view(-1)[0] += 1.0                          # one element far outside
        dev = er.matmul_covers_device(A, B, out)
        host = er.matmul(A.cpu(), B.cpu()).covers(out.cpu())
        auto = er.matmul(A, B).covers(out)              # CUDA tensors: the device path, chosen by covers()
        for r in (dev, auto):
            assert r.counts == host.counts and r.n_failed == host.n_failed == 1
            assert (r.classes == host.classes).all()
            assert r.worst == host.worst
        assert np.array_equal(auto.lo, host.lo, equal_nan=True)  # the sets, from the host's pass when asked
        er.cuda_trim()                                  # the pools' memory returned: the next check maps it afresh
        passing = er.matmul(A, B).covers(good)          # classes kept on the GPU until read
        host = er.matmul(A.cpu(), B.cpu()).covers(good.cpu())
        assert passing.n_failed == host.n_failed == 0 and (passing.classes == host.classes).all()


def test_matmul_reference_of_cuda_tensors_equals_the_hosts():
    """er.matmul of CUDA tensors used on the host (a GEMM epilogue's chain, sets, an enclosure): its host reference
    copies the operands and computes the fast path's fp64 GEMM on the GPU (er_matmul_device), and the chain's CUDA
    output is copied by the library (er_covers_device); every report and set is the one of er.matmul on host
    copies."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not er.cuda_available():
        pytest.skip("needs a CUDA device and an exactref built with CUDA")
    gen = torch.Generator(device="cpu").manual_seed(8)
    for dtype, shape_a, shape_b in (
        (torch.float16, (256, 128), (128, 96)),
        (torch.bfloat16, (2, 1, 70, 130), (3, 130, 66)),
        (torch.float32, (96, 200), (200, 80)),
    ):
        A = torch.randn(shape_a, generator=gen).to(dtype).cuda()
        B = torch.randn(shape_b, generator=gen).to(dtype).cuda()
        bias = torch.randn(shape_b[-1], generator=gen).cuda()
        acc = torch.matmul(A.float(), B.float())
        out = torch.nn.functional.gelu(acc + bias, approximate="tanh").half()
        out.view(-1)[3] = -out.view(-1)[3] - 1                  # one element far outside
        dev = er.matmul(A, B)
        host = er.matmul(A.cpu(), B.cpu())
        assert _lib.ref_fast(dev._ptr) and _lib.ref_fast(host._ptr)
        r_dev = dev.add(bias).gelu(approximate="tanh").cast("float16").covers(out)
        r_host = host.add(bias.cpu()).gelu(approximate="tanh").cast("float16").covers(out.cpu())
        assert r_dev.counts == r_host.counts and r_dev.n_failed == r_host.n_failed >= 1
        assert (r_dev.classes == r_host.classes).all() and str(r_dev) == str(r_host)
        assert np.array_equal(r_dev.hi, r_host.hi, equal_nan=True)  # out copied by the library, sets from a host copy
        s_dev, s_host = dev.covers(acc.cpu()), host.covers(acc.cpu())
        assert str(s_dev) == str(s_host) and s_dev.all()
        for x, y in ((s_dev.lo, s_host.lo), (s_dev.hi, s_host.hi), (s_dev.slack, s_host.slack)):
            assert np.array_equal(x, y, equal_nan=True)
        e_dev, e_host = dev.enclosure(), host.enclosure()
        assert np.array_equal(e_dev.lo, e_host.lo) and np.array_equal(e_dev.hi, e_host.hi)


def test_softmax_covers_device_equals_host():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not er.cuda_available():
        pytest.skip("needs a CUDA device and an exactref built with CUDA")
    gen = torch.Generator(device="cpu").manual_seed(6)
    for dtype, shape, dim, options in (
        (torch.float32, (64, 300), -1, {}),
        (torch.bfloat16, (2, 5, 129), -1, {"div": "divide"}),
        (torch.float16, (33, 70), 0, {}),               # along the first dimension: the host's path
        (torch.float32, (16, 40), -1, {"online": "yes"}),  # online=: the host's path
    ):
        x = (torch.randn(shape, generator=gen) * 4).to(dtype).cuda()
        x.view(-1)[3] = float("-inf")                   # a masked element
        out = torch.softmax(x.float(), dim)             # the GPU's softmax, in fp32
        out.view(-1)[1] += 0.25                         # one element far outside
        dev = er.softmax_covers_device(x, out, dim, **options)
        host = er.softmax(x.cpu(), dim).covers(out.cpu(), **options)
        auto = er.softmax(x, dim).covers(out, **options)  # CUDA tensors: the device path, chosen by covers()
        for r in (dev, auto):
            assert r.counts == host.counts and r.n_failed == host.n_failed == 1
            assert (r.classes == host.classes).all()
            assert r.worst == host.worst and str(r) == str(host)
        assert np.array_equal(auto.hi, host.hi, equal_nan=True)


def test_log_softmax_covers_device_equals_host():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not er.cuda_available():
        pytest.skip("needs a CUDA device and an exactref built with CUDA")
    gen = torch.Generator(device="cpu").manual_seed(8)
    for dtype, shape, dim, options in (
        (torch.float32, (64, 300), -1, {}),
        (torch.bfloat16, (2, 5, 129), -1, {"log_ulps": 2}),
        (torch.float16, (33, 70), 0, {}),               # along the first dimension: the host's path
        (torch.float32, (16, 40), -1, {"subnormals": "flush"}),  # subnormals=flush: the host's path
    ):
        x = (torch.randn(shape, generator=gen) * 4).to(dtype).cuda()
        out = torch.log_softmax(x.float(), dim)         # the GPU's log_softmax, in fp32
        out.view(-1)[1] += 0.25                         # one element far outside
        dev = er.log_softmax_covers_device(x, out, dim, **options)
        host = er.log_softmax(x.cpu(), dim).covers(out.cpu(), **options)
        auto = er.log_softmax(x, dim).covers(out, **options)  # CUDA tensors: the device path, chosen by covers()
        for r in (dev, auto):
            assert r.counts == host.counts and r.n_failed == host.n_failed == 1
            assert (r.classes == host.classes).all()
            assert r.worst == host.worst and str(r) == str(host)


@pytest.mark.parametrize("op", ["softmax_backward", "log_softmax_backward"])
def test_softmax_backward_covers_device_equals_host(op):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not er.cuda_available():
        pytest.skip("needs a CUDA device and an exactref built with CUDA")
    log = op == "log_softmax_backward"
    gen = torch.Generator(device="cpu").manual_seed(11)
    for dtype, shape, dim, options in (
        (torch.float32, (64, 300), -1, {}),
        (torch.bfloat16, (2, 5, 129), -1, {"exp_ulps": 4} if log else {}),  # softmax: the rounded products' sum too
        (torch.float16, (8, 1000), -1, {} if log else {"products": "compute"}),
        (torch.float32, (33, 70), 0, {}),                # along the first dimension: the host's path
        (torch.float32, (4, 50), -1, {"exp_ulps": "fast"} if log else {"depth": 12}),  # log: the host's path
    ):
        x = torch.randn(shape, generator=gen) * 3
        y = (torch.log_softmax(x, dim) if log else torch.softmax(x, dim)).to(dtype).cuda()
        dy = torch.randn(shape, generator=gen).to(dtype).cuda()
        bwd = torch._log_softmax_backward_data if log else torch._softmax_backward_data
        out = bwd(dy.float(), y.float(), dim, torch.float32)  # the GPU's, in fp32
        out.view(-1)[1] += 0.25                         # one element far outside
        dev = getattr(er, op + "_covers_device")(dy, y, out, dim, **options)
        host = getattr(er, op)(dy.cpu(), y.cpu(), dim).covers(out.cpu(), **options)
        auto = getattr(er, op)(dy, y, dim).covers(out, **options)  # CUDA tensors: the device path
        for r in (dev, auto):
            assert r.counts == host.counts and r.n_failed == host.n_failed == 1
            assert (r.classes == host.classes).all()
            assert r.worst == host.worst and str(r) == str(host)
        assert np.array_equal(auto.hi, host.hi, equal_nan=True)


def test_rmsnorm_covers_device_equals_host():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not er.cuda_available():
        pytest.skip("needs a CUDA device and an exactref built with CUDA")
    gen = torch.Generator(device="cpu").manual_seed(7)
    for dtype, shape, wdtype, eps, options in (
        (torch.float32, (64, 300), torch.float32, 1e-6, {}),
        (torch.bfloat16, (2, 5, 129), torch.bfloat16, 1e-5, {"rsqrt_ulps": 1}),
        (torch.float16, (33, 70), None, 0.0, {"mean": "divide"}),
        (torch.float32, (16, 40), torch.float32, 1e-6, {"variance": "welford"}),  # Welford's: the host's path
    ):
        x = (torch.randn(shape, generator=gen) * 4).to(dtype).cuda()
        w = None if wdtype is None else (1 + torch.randn(shape[-1], generator=gen) / 4).to(wdtype).cuda()
        x.view(-1)[5] = 0.0
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1 if w is None else w.float())
        out.view(-1)[1] += 0.25                         # one element far outside
        dev = er.rmsnorm_covers_device(x, out, w, eps, **options)
        host = er.rmsnorm(x.cpu(), None if w is None else w.cpu(), eps).covers(out.cpu(), **options)
        auto = er.rmsnorm(x, w, eps).covers(out, **options)  # CUDA tensors: the device path, chosen by covers()
        for r in (dev, auto):
            assert r.counts == host.counts and r.n_failed == host.n_failed == 1
            assert (r.classes == host.classes).all()
            assert r.worst == host.worst and str(r) == str(host)
        assert np.array_equal(auto.hi, host.hi, equal_nan=True)


def test_layer_norm_covers_device_equals_host():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not er.cuda_available():
        pytest.skip("needs a CUDA device and an exactref built with CUDA")
    gen = torch.Generator(device="cpu").manual_seed(11)
    for dtype, shape, ns, wdtype, bias, eps, options in (
        (torch.float32, (64, 300), (300,), torch.float32, True, 1e-5, {}),
        (torch.bfloat16, (2, 5, 129), (129,), torch.bfloat16, False, 1e-5, {"variance": "welford"}),
        (torch.float16, (6, 4, 35), (4, 35), None, True, 0.0, {"rsqrt_ulps": 4}),
        (torch.float32, (16, 40), (40,), torch.float32, True, 1e-6, {"compute": "fp64"}),  # the host's path
    ):
        x = (torch.randn(shape, generator=gen) * 4 + 1).to(dtype).cuda()
        w = None if wdtype is None else (1 + torch.randn(ns, generator=gen) / 4).to(wdtype).cuda()
        b = (torch.randn(ns, generator=gen) / 2).to(dtype).cuda() if bias else None
        x.view(-1)[5] = 0.0
        out = torch.nn.functional.layer_norm(x.float(), ns, None if w is None else w.float(),
                                             None if b is None else b.float(), eps)
        out.view(-1)[1] += 0.25                         # one element far outside
        dev = er.layer_norm_covers_device(x, out, ns, w, b, eps, **options)
        host = er.layer_norm(x.cpu(), ns, None if w is None else w.cpu(), None if b is None else b.cpu(),
                             eps).covers(out.cpu(), **options)
        auto = er.layer_norm(x, ns, w, b, eps).covers(out, **options)  # CUDA tensors: the device path
        assert host.n_failed >= 1 and er.CLASSES[host.classes.reshape(-1)[1]] == "outside", str(host)
        for r in (dev, auto):
            assert r.counts == host.counts and r.n_failed == host.n_failed
            assert (r.classes == host.classes).all()
            assert r.worst == host.worst and str(r) == str(host)
        assert np.array_equal(auto.hi, host.hi, equal_nan=True)
        # torch's three outputs: y on the device path, mean and rstd on the host, as the host checks all three
        outs = torch.native_layer_norm(x, ns, w, b, eps)
        three = er.layer_norm(x, ns, w, b, eps).covers(outs, **options)
        host3 = er.layer_norm(x.cpu(), ns, None if w is None else w.cpu(), None if b is None else b.cpu(),
                              eps).covers(tuple(o.cpu() for o in outs), **options)
        assert list(three.results) == list(host3.results) == ["y", "mean", "rstd"]
        for name in ("y", "mean", "rstd"):
            r, h = three.results[name], host3.results[name]
            assert r.counts == h.counts and (r.classes == h.classes).all() and str(r) == str(h), name


def test_attention_covers_device_equals_host():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not er.cuda_available():
        pytest.skip("needs a CUDA device and an exactref built with CUDA")
    gen = torch.Generator(device="cpu").manual_seed(12)
    for dtype, (B, H, Hkv, Sq, Sk, D, Dv), opts, options in (
        (torch.float16, (1, 4, 4, 70, 90, 64, 64), {"causal": True}, {}),
        (torch.bfloat16, (2, 4, 2, 33, 33, 40, 24), {"enable_gqa": True, "scale": 0.2}, {"exp_ulps": "fast"}),
        (torch.float32, (1, 2, 2, 40, 130, 67, 150), {"window": (20, 3), "causal_alignment": "bottom_right"},
         {"compute": "tf32"}),
    ):
        # q, k, v transposed from [B, S, H, D] as a projection's output is: strided views
        q = torch.randn((B, Sq, H, D), generator=gen).to(dtype).cuda().transpose(1, 2)
        k = torch.randn((B, Sk, Hkv, D), generator=gen).to(dtype).cuda().transpose(1, 2)
        v = torch.randn((B, Sk, Hkv, Dv), generator=gen).to(dtype).cuda().transpose(1, 2)
        kk, vv = (k, v) if H == Hkv else (k.repeat_interleave(H // Hkv, 1), v.repeat_interleave(H // Hkv, 1))
        mask = None
        if "window" in opts:
            i = torch.arange(Sq, device="cuda")[:, None] + (Sk - Sq)
            j = torch.arange(Sk, device="cuda")[None, :]
            mask = (j >= i - 20) & (j <= i + 3)
        out = torch.nn.functional.scaled_dot_product_attention(
            q.float(), kk.float(), vv.float(), attn_mask=mask, is_causal=opts.get("causal", False),
            scale=opts.get("scale"))
        out = out.transpose(1, 2).contiguous().transpose(1, 2)  # a strided output too
        out[0, 0, 0, 7] += 0.25                         # one element far outside
        dev = er.attention_covers_device(q, k, v, out, **opts, **options)
        host = er.attention(q.cpu(), k.cpu(), v.cpu(), **opts).covers(out.cpu(), **options)
        auto = er.attention(q, k, v, **opts).covers(out, **options)  # CUDA tensors: the device path
        assert host.n_failed >= 1 and er.CLASSES[host.classes[0, 0, 0, 7]] == "outside", str(host)
        for r in (dev, auto):
            assert r.counts == host.counts and r.n_failed == host.n_failed
            assert (r.classes == host.classes).all()
            assert r.worst == host.worst and str(r) == str(host)
        assert np.array_equal(auto.hi, host.hi, equal_nan=True)
        # LSE too, from the scores in float64 (one element far off), with out and alone
        s = (q.double() @ kk.double().transpose(-1, -2)) * opts.get("scale", D ** -0.5)
        allowed = (mask if mask is not None else torch.ones((Sq, Sk), dtype=torch.bool, device="cuda")
                   if not opts.get("causal") else
                   torch.arange(Sk, device="cuda")[None, :] <= torch.arange(Sq, device="cuda")[:, None])
        lse = torch.logsumexp(s.masked_fill(~allowed, float("-inf")), -1).float()
        lse[0, 0, 1] += 0.5
        hostb = er.attention(q.cpu(), k.cpu(), v.cpu(), **opts).covers((out.cpu(), lse.cpu()), **options)
        assert er.CLASSES[hostb.lse.classes[0, 0, 1]] == "outside", str(hostb.lse)
        for both in (er.attention_covers_device(q, k, v, out, lse=lse, **opts, **options),
                     er.attention(q, k, v, **opts).covers((out, lse), **options)):
            for name in ("out", "lse"):
                r, h = both.results[name], hostb.results[name]
                assert r.counts == h.counts and (r.classes == h.classes).all() and str(r) == str(h), name
        alone = er.attention(q, k, v, **opts).covers((None, lse), **options)
        assert list(alone.results) == ["lse"] and str(alone.lse) == str(hostb.lse)
        assert np.array_equal(alone.lse.hi, hostb.lse.hi, equal_nan=True)


def test_a_reference_made_later_is_built_once_on_first_use():
    """Reference._later (the references of CUDA tensors): nothing is built when made; the first use that needs the
    library's reference builds it once, threads asking together included, and the result is the eager reference's."""
    import threading
    import time
    rng = np.random.default_rng(12)
    A = rng.standard_normal((40, 30)).astype(np.float16)
    B = rng.standard_normal((30, 20)).astype(np.float16)
    out = A.astype(np.float32) @ B.astype(np.float32)
    out[3, 4] += 0.5
    built = []

    def build():  # slow enough that the threads below all ask while it runs
        built.append(1)
        time.sleep(0.05)
        return er.matmul(A, B)
    later = er.Reference._later(build, (None, None, A, B), (40, 20), "matmul")
    assert later._p is None and not built
    results = [None] * 4

    def use(i):
        results[i] = str(later.covers(out))
    threads = [threading.Thread(target=use, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    eager = er.matmul(A, B).covers(out)
    assert len(built) == 1 and later._p is not None
    assert all(r == str(eager) for r in results) and not eager.all()
    assert later.enclosure().hi.shape == (40, 20)  # later uses reuse what was built
    assert len(built) == 1


def test_cross_entropy_covers_device_equals_host():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not er.cuda_available():
        pytest.skip("needs a CUDA device and an exactref built with CUDA")
    gen = torch.Generator(device="cpu").manual_seed(13)
    F = torch.nn.functional
    for dtype, N, C, reduction in ((torch.float32, 7, 3000, "mean"), (torch.bfloat16, 5, 1000, "sum"),
                                   (torch.float16, 4, 700, "none")):
        z = (2 * torch.randn((N, C), generator=gen)).to(dtype).cuda()
        t = torch.randint(0, C, (N,), generator=gen).cuda()
        t[1] = -100  # an ignored row
        zr = z.clone().requires_grad_(True)
        loss = F.cross_entropy(zr.float(), t, reduction=reduction)
        loss.sum().backward()
        g = zr.grad.detach().clone()
        g[2, 5] += 0.25  # one element far outside
        loss = loss.detach()
        dev = er.cross_entropy_covers_device(z, t, loss, g, reduction=reduction)
        host = er.cross_entropy(z.cpu(), t.cpu(), reduction=reduction).covers((loss.cpu(), g.cpu()))
        if dtype != torch.float16:  # fp16 logits: Theorem X1's underflow term (half fp16's least subnormal) is wide
            assert er.CLASSES[host.dlogits.classes[2, 5]] == "outside", str(host.dlogits)
        ref = er.cross_entropy(z, t, reduction=reduction)  # CUDA tensors: the device path, no host reference made
        auto = ref.covers((loss, g))
        assert ref._p is None
        for res in (dev, auto):
            for name in ("loss", "dlogits"):
                r, h = res.results[name], host.results[name]
                assert r.counts == h.counts and (r.classes == h.classes).all() and str(r) == str(h), name
        assert np.array_equal(auto.dlogits.hi, host.dlogits.hi, equal_nan=True)  # the sets from the host's pass
        alone = er.cross_entropy_covers_device(z, t, dlogits=g, reduction=reduction)
        assert list(alone.results) == ["dlogits"] and str(alone.dlogits) == str(host.dlogits)


def test_device_references_build_their_host_reference_on_first_host_use():
    """A reference of CUDA tensors is checked, not built, when made: the device paths never need the host's copies
    and reference (er.matmul's copies of A and B, its fp64 GEMM and floats on the GPU); a host use builds them once."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not er.cuda_available():
        pytest.skip("needs a CUDA device and an exactref built with CUDA")
    torch.manual_seed(21)  # a product whose bracket on the GPU decides no set's width: the report is the host's still
    A = torch.randn(96, 80, device="cuda").half()
    B = torch.randn(80, 64, device="cuda").half()
    C = A.float() @ B.float()
    x = torch.randn(32, 100, device="cuda")
    w, b = torch.ones(100, device="cuda"), torch.zeros(100, device="cuda")
    for ref, out in ((er.matmul(A, B), C), (er.softmax(x), torch.softmax(x, -1)),
                     (er.rmsnorm(x, w), torch.nn.functional.rms_norm(x, (100,), w, 1e-6)),
                     (er.layer_norm(x, 100, w, b), torch.nn.functional.layer_norm(x, (100,), w, b, 1e-5))):
        assert ref._p is None
        dev = ref.covers(out)  # the device path
        assert ref._p is None and dev.all(), ref.op
        host = ref.covers(out.cpu())  # a host use: the host reference, once
        assert ref._p is not None and str(host) == str(dev), ref.op
    with pytest.raises(ValueError, match="columns"):  # checked when made, as for host arrays
        er.matmul(A, A)
    with pytest.raises(ValueError, match="normalized shape"):
        er.layer_norm(x, 100, torch.ones(99, device="cuda"))


def test_matmul_covers_device_refuses_host_tensors():
    if not er.cuda_available():
        pytest.skip("exactref built without CUDA")
    with pytest.raises(TypeError, match="must be a CUDA torch tensor"):
        er.matmul_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="must be a CUDA torch tensor"):
        er.softmax_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="must be a CUDA torch tensor"):
        er.rmsnorm_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="must be a CUDA torch tensor"):
        er.log_softmax_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="must be a CUDA torch tensor"):
        er.softmax_backward_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32),
                                          np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="must be a CUDA torch tensor"):
        er.log_softmax_backward_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32),
                                              np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="eps"):  # checked before the tensors
        er.rmsnorm_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), eps=-1.0)
    with pytest.raises(TypeError, match="must be a CUDA torch tensor"):
        er.layer_norm_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), 2)
    with pytest.raises(ValueError, match="eps"):  # checked before the tensors
        er.layer_norm_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), 2, eps=-1.0)
    with pytest.raises(TypeError, match="normalized_shape"):
        er.layer_norm_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), 2.5)
    a = np.ones((2, 2), np.float32)
    with pytest.raises(TypeError, match="must be a CUDA torch tensor"):
        er.attention_covers_device(a, a, a, a)
    with pytest.raises(ValueError, match="both None"):
        er.attention_covers_device(a, a, a, None)
    with pytest.raises(er.ExactrefValueError, match="window"):  # the options before the tensors
        er.attention_covers_device(a, a, a, a, window=(1, -5))
    with pytest.raises(er.ExactrefValueError, match="causal_alignment"):
        er.attention_covers_device(a, a, a, a, causal_alignment="middle")
    t = np.array([0, 1])
    with pytest.raises(TypeError, match="must be a CUDA torch tensor"):
        er.cross_entropy_covers_device(a, t, a, a)
    with pytest.raises(ValueError, match="both None"):
        er.cross_entropy_covers_device(a, t)
    with pytest.raises(er.ExactrefValueError, match="reduction"):  # the numbers and options before the tensors
        er.cross_entropy_covers_device(a, t, a, a, reduction="avg")
    with pytest.raises(TypeError, match="ignore_index"):
        er.cross_entropy_covers_device(a, t, a, a, ignore_index=1.5)
    with pytest.raises(er.ExactrefValueError, match="label_smoothing"):
        er.cross_entropy_covers_device(a, t, a, a, label_smoothing=1.5)
    for bad in (5, "stream", object()):  # checked before the tensors, so without a GPU too
        with pytest.raises(TypeError, match="stream must be a torch.cuda.Stream"):
            er.cross_entropy_covers_device(a, t, a, a, stream=bad)
        with pytest.raises(TypeError, match="stream must be a torch.cuda.Stream"):
            er.rmsnorm_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), stream=bad)
        with pytest.raises(TypeError, match="stream must be a torch.cuda.Stream"):
            er.log_softmax_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), stream=bad)
        with pytest.raises(TypeError, match="stream must be a torch.cuda.Stream"):
            er.layer_norm_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), 2, stream=bad)
        with pytest.raises(TypeError, match="stream must be a torch.cuda.Stream"):
            er.softmax_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), stream=bad)
        with pytest.raises(TypeError, match="stream must be a torch.cuda.Stream"):
            er.softmax_backward_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32),
                                              np.ones((2, 2), np.float32), stream=bad)
        with pytest.raises(TypeError, match="stream must be a torch.cuda.Stream"):
            er.log_softmax_backward_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32),
                                                  np.ones((2, 2), np.float32), stream=bad)
        with pytest.raises(TypeError, match="stream must be a torch.cuda.Stream"):
            er.attention_covers_device(a, a, a, a, stream=bad)
        with pytest.raises(TypeError, match="stream must be a torch.cuda.Stream"):
            er.matmul_covers_device(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32),
                                    np.ones((2, 2), np.float32), stream=bad)


def test_standard_as_the_docs_write_it_and_option_types():
    A = np.float16(np.arange(24).reshape(4, 6) % 5 - 2)
    B = np.float16(np.arange(18).reshape(6, 3) % 3 - 1)
    out = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    ref = er.matmul(A, B)
    assert ref.covers(out, standard="mma:sm90 outer=any").all()
    assert ref.covers(out, standard="any_order", compute=np.float32).all()
    assert (
        ref.covers(out, standard="any_order", compute=np.dtype("float32"))
        .json["standard"]
        .startswith("any_order compute=fp32")
    )
    sm = er.softmax(np.float32([[0.0, 1.0, 2.0]]))
    assert sm.covers(np.float32([[0.09003057, 0.24472848, 0.66524094]]), exp_ulps=3).all()
    with pytest.raises(er.ExactrefValueError):
        ref.covers(out, standard="mma:sm90 outer=any", outer="sequential")  # given twice
    with pytest.raises(er.ExactrefTypeError, match="outer"):
        ref.covers(out, standard="mma:sm90", outer=True)
    with pytest.raises(er.ExactrefTypeError, match="compute"):
        ref.covers(out, compute=object())
    with pytest.raises(er.ExactrefValueError, match="NUL"):
        ref.covers(out, compute="fp32\0fma=never")
    with pytest.raises(er.ExactrefValueError, match="mma:smNN"):
        ref.covers(out, standard="forest:4")


def test_depth_of_triton_sum():
    assert er.depth.triton(4096, num_warps=4, version="3.6") == 38
    assert er.depth.triton(4096, num_warps=4, version=(3, 8)) == 12
    with pytest.raises(er.ExactrefValueError):
        er.depth.triton(1000, version="3.6")
    with pytest.raises(er.ExactrefTypeError):
        er.depth.triton(4096.0, version="3.6")
    x = (1 + np.arange(4096, dtype=np.float32) / 4096)[None]
    s = float(np.sum(x.astype(np.float64)))
    moved = np.float32([s * (1 + 2.0 ** -14)])
    d = er.depth.triton(4096, num_warps=4, version="3.8")
    assert er.sum(x, dim=1).covers(moved).all() and not er.sum(x, dim=1).covers(moved, depth=d).all()
    assert er.depth.cub_block_reduce(4, 256) == 15 and er.depth.cub_block_reduce(1, 1) == 1
    assert er.depth.torch_layer_norm(4096) == 38 and er.depth.torch_layer_norm(4099) == 18
    with pytest.raises(er.ExactrefTypeError):
        er.depth.torch_layer_norm(4096.0)
    with pytest.raises(er.ExactrefNotImplementedError):
        er.depth.torch_layer_norm(0)
    assert er.depth.torch_layer_norm_combines(4096) == 10
    with pytest.raises(er.ExactrefTypeError):
        er.depth.torch_layer_norm_combines(4096.0)
    with pytest.raises(er.ExactrefNotImplementedError):
        er.depth.torch_layer_norm_combines(0)
    # Theorem L8: at torch's depth and combine depth the unbiased variance leaves the Welford set too
    n = 4096
    xl = np.random.default_rng(3).standard_normal((4, n)).astype(np.float32)
    x64 = xl.astype(np.float64)
    opts = dict(
        variance="either", depth=er.depth.torch_layer_norm(n), combine_depth=er.depth.torch_layer_norm_combines(n)
    )
    ln = er.layer_norm(xl, n)
    for ddof, ok in ((0, True), (1, False)):
        rstd = (1 / np.sqrt(x64.var(1, ddof=ddof) + 1e-5)).astype(np.float32)
        assert ln.covers((None, None, rstd), **opts).rstd.all() == ok
    with pytest.raises(er.ExactrefValueError):
        er.sum(xl, dim=1).covers(xl.sum(1), combine_depth=10)
    with pytest.raises(er.ExactrefValueError):
        er.depth.cub_block_reduce(4, 2048)
    with pytest.raises(er.ExactrefTypeError):
        er.depth.cub_block_reduce(4.0, 256)


def test_sets_and_slack():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((20, 300)).astype(np.float32)
    B = rng.standard_normal((300, 10)).astype(np.float32)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    out = (exact * (1 + rng.integers(-8, 9, exact.shape) * 2.0 ** -10)).astype(np.float32)
    res = er.matmul(A, B).covers(out)
    inside = (out >= res.lo) & (out <= res.hi)
    passes = np.isin(res.classes, [0, 1, 2])
    assert (inside == passes).all() and 0 < inside.sum() < out.size
    assert ((res.slack >= 0) == inside).all()
    # layernorm at n = 4096 under the default: rstd may move far (the slack says so); two_pass is narrow
    x = rng.standard_normal((1, 4096)).astype(np.float32)
    xd = x.astype(np.float64)
    rstd = np.float32([[1 / np.sqrt(xd.var() + np.float32(1e-5))]])
    wide = er.layer_norm(x, 4096).covers((None, None, rstd))
    narrow = er.layer_norm(x, 4096).covers((None, None, rstd), variance="two_pass")
    assert wide.rstd.widest()[1] > 10 * narrow.rstd.widest()[1]   # Welford's sets (Theorem L7) stay wider
    assert narrow.rstd.slack.min() >= 0


def test_reference_outlives_its_inputs_names():
    """A reference built from temporaries (no Python name left for the inputs) keeps them alive: after the
    temporaries' names are gone, the garbage collector has run and new arrays have taken fresh memory, its checks
    and exact values are those of a reference whose inputs are held by name."""
    import gc
    rng = np.random.default_rng(7)
    A = rng.standard_normal((40, 24)).astype(np.float32)
    B = rng.standard_normal((24, 32)).astype(np.float32)
    x = rng.standard_normal((16, 48)).astype(np.float32)
    w = rng.standard_normal(48).astype(np.float32)
    held = {"mm": er.matmul(A, B), "sm": er.softmax(x), "rms": er.rmsnorm(x, w, eps=1e-5),
            "ln": er.layer_norm(x, 48, weight=w, bias=w * 0.5, eps=1e-5)}
    temp = {"mm": er.matmul(A.copy(), B.copy().T.copy().T), "sm": er.softmax(x.copy()),
            "rms": er.rmsnorm(x.copy(), w.copy(), eps=1e-5),
            "ln": er.layer_norm(x.copy(), 48, weight=w.copy(), bias=(w * 0.5).copy(), eps=1e-5)}
    gc.collect()
    clobber = [np.full(n, np.nan, np.float32) for n in (40 * 24, 24 * 32, 16 * 48, 48, 48) for _ in range(8)]
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    y = np.zeros_like(x)
    outs = {"mm": (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32),
            "sm": (e / e.sum(axis=1, keepdims=True)).astype(np.float32), "rms": y, "ln": (y, None, None)}
    for k in ("mm", "sm", "rms", "ln"):
        r_held, r_temp = held[k].covers(outs[k]), temp[k].covers(outs[k])
        assert str(r_held) == str(r_temp)
    assert held["mm"].covers(outs["mm"]).all() and held["sm"].covers(outs["sm"]).all()
    assert np.array_equal(held["mm"].exact("float32"), temp["mm"].exact("float32"))
    del clobber


def test_enclosure():
    """Reference.enclosure: the sets covers() uses, without an output: an output passes exactly where the enclosure
    contains it, and lo and hi are those of Result.lo and Result.hi; layernorm's outputs by name."""
    rng = np.random.default_rng(11)
    A = rng.standard_normal((20, 48)).astype(np.float16)
    B = rng.standard_normal((48, 24)).astype(np.float16)
    ref = er.matmul(A, B)
    enc = ref.enclosure(standard="mma:sm90 outer=any", dtype="float16")
    assert enc.lo.shape == (20, 24) and enc.flags.dtype == np.uint8
    out = ref.exact("float16")
    out[::3] = enc.hi[::3].astype(np.float16)
    out[1::5] = np.nextafter(enc.hi[1::5].astype(np.float16), np.float16(np.inf))
    out[0, 0] = np.nan
    res = ref.covers(out, standard="mma:sm90 outer=any")
    passes = np.isin(res.classes, [er.CLASSES.index(c) for c in ("exact", "covered", "overflow")])
    assert np.array_equal(enc.contains(out), passes)
    assert not passes.all() and passes.any()
    assert np.array_equal(enc.lo, res.lo, equal_nan=True) and np.array_equal(enc.hi, res.hi, equal_nan=True)
    x = (rng.standard_normal((5, 64)) * 3).astype(np.float32)
    ln = er.layer_norm(x, 64)
    for name, shape in (("y", (5, 64)), ("mean", (5,)), ("rstd", (5,))):
        e = ln.enclosure(dtype="float32", output=name, variance="two_pass")
        assert e.lo.shape == shape and np.all(e.lo <= e.hi)
    with pytest.raises(ValueError):
        ln.enclosure(output="var")
    with pytest.raises(ValueError):
        ref.enclosure(output=1)


def test_chains():
    """GEMM epilogues as chains: the fused kernel's order (fp32 accumulator, bias and relu in fp32, one fp16 store)
    and the unfused one (every stage stored in fp16) are covered; the bias added twice is caught; the stages check
    their operands."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((48, 64)).astype(np.float16)
    B = rng.standard_normal((64, 40)).astype(np.float16)
    bias = (rng.standard_normal(40) * 2).astype(np.float16)
    acc = A.astype(np.float32) @ B.astype(np.float32)          # exact products, fp32 sums in the BLAS's order
    fused = np.maximum(acc + bias.astype(np.float32), np.float32(0)).astype(np.float16)
    ref = er.matmul(A, B).add(bias).relu().cast("float16")
    ref.covers(fused, standard="any_order").assert_all()
    h = acc.astype(np.float16)
    unfused = np.maximum((h.astype(np.float32) + bias.astype(np.float32)).astype(np.float16), np.float16(0))
    er.matmul(A, B).cast("float16").add(bias).cast("float16").relu().cast("float16").covers(unfused).assert_all()
    twice = np.maximum(acc + 2 * bias.astype(np.float32), np.float32(0)).astype(np.float16)
    assert not ref.covers(twice, standard="any_order").all()
    scaled = er.matmul(A, B).mul(0.5).add(1.25)
    scaled.covers(((acc * np.float32(0.5)) + np.float32(1.25))).assert_all()
    with pytest.raises(ValueError):
        er.matmul(A, B).add(np.ones(7, np.float32))
    with pytest.raises(TypeError):
        er.matmul(A, B).add("1")
    with pytest.raises(er.ExactrefError):
        er.softmax(acc).relu()


def test_chain_captures():
    """H200 captures (tools/capture/capture_chains.py: Triton GEMMs with the epilogue fused, torch unfused and addmm,
    fp16 and bf16, K = 256, 1000, 2051, and exact ties of the store at K = 8): every correct kernel covered (on the
    ties, every element decided exact), every planted bug caught (a store rounding toward zero among them).
    torch.addmm in bf16 at K = 2051 gives outputs consistent with partial results rounded to bf16 inside cuBLAS (82%
    of them equal RN(RN_bf16(S) + bias)), which the fp32-accumulator chain does not allow; it is checked with bf16
    accumulation (docs/hardware/toolchains.md)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    z, rows = captures("chains")

    def arr(key, dt):
        return z[key].view(ml_dtypes.bfloat16) if dt == "bfloat16" else z[key]
    seen = 0
    for cid, kind, dt, M, N, K, alpha, gid in rows:
        A, B, bias, y = (arr(gid + "__in__A", dt), arr(gid + "__in__B", dt), arr(gid + "__in__bias", dt),
                         arr(cid + "__out__y", dt))
        mm = er.matmul(A, B)
        opts = {}
        if kind.startswith("triton"):
            ch = (mm.mul(float(alpha)) if float(alpha) != 1.0 else mm).add(bias).relu().cast(dt)
        elif kind.startswith("torch_unfused"):
            ch = mm.cast(dt).add(bias).cast(dt).relu().cast(dt)
        else:
            ch = mm.add(bias).cast(dt)
            if dt == "bfloat16" and K == "2051":
                opts = {"compute": "bfloat16"}
        res = ch.covers(y, standard="mma:sm90 outer=any" if not opts else "any_order", **opts)
        assert res.all() != ("bug" in kind), "%s %s %s K=%s: %s" % (cid, kind, dt, K, res.report)
        if "ties" in kind:
            S = A.astype(np.float64) @ B.astype(np.float64) + bias.astype(np.float64)
            assert np.sum(S % 2 == 1) > 400 and res.counts["exact"] == y.size  # about half the sums are ties
        seen += 1
    assert seen == 44


def test_gelu_and_silu_chains():
    """gelu and silu epilogues evaluated as a fused fp32 kernel does (torch's formulas, float32 erf and exp from
    numpy's float64 ones rounded: within CUDA's 2 ulps) are covered; the other activation is caught."""
    import math
    rng = np.random.default_rng(8)
    A = rng.standard_normal((24, 64)).astype(np.float16)
    B = rng.standard_normal((64, 20)).astype(np.float16)
    bias = rng.standard_normal(20).astype(np.float16)
    acc = A.astype(np.float32) @ B.astype(np.float32) + bias.astype(np.float32)
    erf32 = np.vectorize(lambda v: np.float32(math.erf(float(v))), otypes=[np.float32])
    gelu = (acc * np.float32(0.5)) * (np.float32(1) + erf32(acc * np.float32(0.70710677)))
    silu = acc / (np.float32(1) + np.exp(-acc.astype(np.float64)).astype(np.float32))
    mm = er.matmul(A, B).add(bias)
    mm.gelu().cast("float16").covers(gelu.astype(np.float16)).assert_all()
    mm.silu().cast("float16").covers(silu.astype(np.float16)).assert_all()
    assert not mm.gelu().cast("float16").covers(silu.astype(np.float16)).all()
    with pytest.raises(TypeError):
        mm.gelu(ulps="2")


def test_activation_captures():
    """H200 captures (tools/capture/capture_activations.py): a Triton GEMM with bias and gelu (tl.math.erf) fused,
    torch's gelu and silu on the stored product plus bias, fp16 and bf16: every correct kernel covered; torch's tanh
    approximation where the erf form is claimed caught."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    z, rows = captures("acts")
    seen = 0
    for cid, kind, dt, M, N, K, gid in rows:
        A, B, bias, y = arrays(z, dt, gid + "__in__A", gid + "__in__B", gid + "__in__bias", cid + "__out__y")
        mm = er.matmul(A, B)
        if kind == "triton_bias_gelu":
            ch = mm.add(bias).gelu().cast(dt)
        else:
            stored = mm.cast(dt).add(bias).cast(dt)
            ch = (stored.silu() if kind == "torch_silu" else stored.gelu()).cast(dt)
        res = ch.covers(y, standard="mma:sm90 outer=any")
        assert res.all() != ("bug" in kind), "%s %s %s K=%s: %s" % (cid, kind, dt, K, res.report)
        seen += 1
    assert seen == 16


def test_single_elementwise_ops():
    """er.gelu(x), er.silu(x), er.relu(x) on any float tensor, as a kernel computes them in fp32 and stores them in
    x's dtype; er.tensor(x) accepts exactly x's values."""
    import math
    rng = np.random.default_rng(9)
    x = (rng.standard_normal(2000) * 4).astype(np.float16)
    x32 = x.astype(np.float32)
    erf32 = np.vectorize(lambda v: np.float32(math.erf(float(v))), otypes=[np.float32])
    gelu = ((x32 * np.float32(0.5)) * (np.float32(1) + erf32(x32 * np.float32(0.70710677)))).astype(np.float16)
    silu = (x32 / (np.float32(1) + np.exp(-x32.astype(np.float64)).astype(np.float32))).astype(np.float16)
    er.gelu(x).cast("float16").covers(gelu).assert_all()
    er.silu(x).cast("float16").covers(silu).assert_all()
    er.relu(x).covers(np.maximum(x, np.float16(0))).assert_all()
    assert not er.gelu(x).cast("float16").covers(silu).all()
    er.tensor(x).covers(x.astype(np.float32)).assert_all()
    assert not er.tensor(x).covers(x.astype(np.float32) * np.float32(1.001)).all()


def test_elementwise_captures():
    """H200 captures (tools/capture/capture_elementwise.py): torch's CUDA F.gelu, F.silu and F.relu on fp32, fp16 and
    bf16 sweeps over [-20, 20], near each format's maximum, subnormals, signed zeros, infinities and NaN, covered as
    single elementwise ops; F.gelu(approximate="tanh") claimed as the erf form caught."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    z, rows = captures("elementwise")
    seen = 0
    for cid, fn, dt, n, gid in rows:
        x, y = arrays(z, dt, gid + "__in__x", cid + "__out__y")
        base = er.tensor(x)
        ch = base.silu() if fn == "silu" else base.relu() if fn == "relu" else base.gelu()
        if dt != "float32":
            ch = ch.cast(dt)
        res = ch.covers(y)
        assert res.all() != ("bug" in fn), "%s %s %s: %s" % (cid, fn, dt, res.report)
        if fn == "bug_gelu_tanh":   # the tanh form, claimed as such
            tanh_form = base.gelu(approximate="tanh")
            res = (tanh_form.cast(dt) if dt != "float32" else tanh_form).covers(y)
            assert res.all(), "%s gelu tanh %s: %s" % (cid, dt, res.report)
        seen += 1
    assert seen == 12


def test_unary_ops():
    """er.exp, exp2, log, tanh, sigmoid, erf and rsqrt on a tensor, after a matmul, and cast: each function within
    its ulps (CUDA's table by default), Triton's lowering with math="triton"; a wrong function is caught."""
    import math
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(3000) * 5).astype(np.float32)
    pos = np.abs(x) + np.float32(1e-3)
    f64 = {"exp": np.exp, "exp2": np.exp2, "tanh": np.tanh, "sigmoid": lambda t: 1 / (1 + np.exp(-t)),
           "erf": np.vectorize(math.erf), "log": np.log, "rsqrt": lambda t: 1 / np.sqrt(t)}
    for name, f in f64.items():
        arg = pos if name in ("log", "rsqrt") else x
        y = f(arg.astype(np.float64)).astype(np.float32)            # correctly rounded but for double rounding
        res = getattr(er, name)(arg).covers(y)
        assert res.all(), res.report
        assert res.counts["exact"] > 0.99 * arg.size
        assert not getattr(er, name)(arg).covers(y * np.float32(1 + 2 ** -20)).all()
    A = rng.standard_normal((8, 16)).astype(np.float16)
    B = rng.standard_normal((16, 4)).astype(np.float16)
    acc = A.astype(np.float32) @ B.astype(np.float32)
    er.matmul(A, B).sigmoid().cast("float16").covers(
        (1 / (1 + np.exp(-acc.astype(np.float64)))).astype(np.float16)
    ).assert_all()
    er.exp(x).covers(np.exp(x.astype(np.float64)).astype(np.float32), math="triton").assert_all()
    with pytest.raises(TypeError):
        er.exp(x, ulps="2")
    with pytest.raises(er.ExactrefError):
        er.exp(x, ulps=100).covers(np.exp(x))
    with pytest.raises(er.ExactrefError):
        er.exp(x).covers(np.exp(x), math="fast")


def test_unary_captures():
    """H200 captures (tools/capture/capture_unary.py): torch's CUDA exp, exp2, log, tanh, sigmoid, erf and rsqrt on
    fp32, fp16 and bf16, a CUDA kernel calling expf, exp2f, logf, tanhf, erff and rsqrtf, and a Triton kernel, on
    arguments at and around results that are powers of two, near overflow and underflow, subnormals, zeros,
    infinities and NaN. torch and CUDA are covered under the default standard, Triton under math=triton; Triton's
    tl.exp and tl.sigmoid (ex2.approx of a rounded product) fall outside the default one."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    z, rows = captures("unary")
    seen = 0
    for cid, src, fn, dt, n, gid in rows:
        x, y = arrays(z, dt, gid + "__in__x", cid + "__out__y")
        ch = getattr(er.tensor(x), fn)()
        if dt != "float32":
            ch = ch.cast(dt)
        res = ch.covers(y, math="triton") if src == "triton" else ch.covers(y)
        assert res.all(), "%s %s %s %s: %s" % (cid, src, fn, dt, res.report)
        if src == "triton":
            assert ch.covers(y).all() == (fn not in ("exp", "sigmoid")), "%s %s without math=triton" % (cid, fn)
        seen += 1
    assert seen == 35


def test_act_form_captures():
    """H200 captures (tools/capture/capture_act_forms.py): a Triton GEMM with bias then gelu's tanh form (libdevice
    tanh), silu as acc * tl.sigmoid(acc) and as acc / (1 + tl.exp(-acc)), fused before an fp16 or bf16 store, and
    torch's F.gelu(approximate="tanh") on the stored product plus bias: covered, with and without math="triton"; the
    activation applied before the bias caught."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    z, rows = captures("act_forms")
    seen = 0
    for cid, kind, dt, M, N, K, gid in rows:
        A, B, bias, y = arrays(z, dt, gid + "__in__A", gid + "__in__B", gid + "__in__bias", cid + "__out__y")
        mm = er.matmul(A, B)
        if kind.startswith("triton"):
            fused = mm.add(bias)
            ch = (fused.silu() if "silu" in kind else fused.gelu(approximate="tanh")).cast(dt)
            results = [ch.covers(y, standard="mma:sm90 outer=any", math=m) for m in ("precise", "triton")]
        else:
            ch = mm.cast(dt).add(bias).cast(dt).gelu(approximate="tanh").cast(dt)
            results = [ch.covers(y, standard="mma:sm90 outer=any")]
        for res in results:
            assert res.all() != ("bug" in kind), "%s %s %s K=%s: %s" % (cid, kind, dt, K, res.report)
        seen += 1
    assert seen == 20


def test_fused_form_captures():
    """H200 captures (tools/capture/capture_fused_forms.py): a Triton GEMM with bias and gelu's tanh form written as
    acc * tl.sigmoid(2b (acc + k acc^3)) and as acc / (1 + tl.exp(-...)), fp16 and bf16 stores: covered under both
    math models; relu left out of bias + relu (its worst element named as matching the set after the bias) and the
    bias left out of bias + gelu caught. The three tanh forms elementwise with an fp32 output, on a sweep with |x| in
    the hundreds and beyond, subnormals and specials: covered under math="triton"; the two through tl.sigmoid and
    tl.exp have elements outside the default (libm-accurate exp) model. Blockwise fp8 quantisation in the inverse
    recipe (per 128 along the row, s = amax / 448 stored, q = x / s), Triton's and torch's from fp32 and bf16, and on
    exact fp8 midpoints, an all-zero block, subnormal and huge values and an infinity: covered with the kernel's s
    alone; q = x * s caught."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    z, rows = captures("fused_forms")
    seen = 0
    for cid, kind, dt, M, N, K, gid in rows:
        if "quant" in kind or "times_s" in kind:
            x, = arrays(z, dt, gid + "__in__x")
            q, s = z[cid + "__out__q"].view(ml_dtypes.float8_e4m3fn), z[cid + "__out__s"]
            res = er.quantize(x, "float8_e4m3fn", ("block", 128), recipe="inverse").covers((q, None, s))
            assert res.all() != kind.startswith("bug"), "%s %s %s: %s" % (cid, kind, dt, res)
        elif kind.endswith("_form"):
            x, y = arrays(z, dt, gid + "__in__x", cid + "__out__y")
            ref = er.gelu(x, approximate="tanh")
            assert ref.covers(y, math="triton").all(), "%s %s" % (cid, kind)
            assert ref.covers(y).all() == (kind == "triton_gelu_tanh_form"), "%s %s" % (cid, kind)
        else:
            A, B, bias, y = arrays(z, dt, gid + "__in__A", gid + "__in__B", gid + "__in__bias", cid + "__out__y")
            fused = er.matmul(A, B).add(bias)
            ch = (fused.relu() if "relu" in kind else fused.gelu(approximate="tanh")).cast(dt)
            for m in ("precise", "triton"):
                res = ch.covers(y, standard="mma:sm90 outer=any", math=m)
                assert res.all() != kind.startswith("bug"), "%s %s %s K=%s: %s" % (cid, kind, dt, K, res)
                if "relu" in kind:
                    assert res.worst["stage"] == 1 and "the output lies in the set after matmul+add (stage 1)" in str(
                        res
                    )
        seen += 1
    assert seen == 33


def test_quantize():
    """er.quantize: per tensor, per row and per block, the scale as torch computes it, q judged against it; the
    scale inverted and amax over the wrong axis caught; a 0-d amax accepted; bad arguments refused."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    f8 = ml_dtypes.float8_e4m3fn
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((16, 96)) * 3).astype(np.float32)
    amax = np.abs(x).max()
    scale = np.float32(448) / amax
    q = np.clip(x * scale, -448, 448).astype(f8)
    res = er.quantize(x, "float8_e4m3fn").covers((q, np.float32(amax), scale))
    assert res.all(), str(res)
    assert res.q.counts["exact"] == x.size
    am = np.abs(x).max(axis=1)
    sc = (np.float32(448) / am).astype(np.float32)
    er.quantize(x, "float8_e4m3fn", "row").covers((np.clip(x * sc[:, None], -448, 448).astype(f8), am, sc)).assert_all()
    inv = (am / np.float32(448)).astype(np.float32)
    assert (
        not er.quantize(x, "float8_e4m3fn", "row")
        .covers((np.clip(x * inv[:, None], -448, 448).astype(f8), am, inv))
        .all()
    )
    amb = np.abs(x.reshape(16, 3, 32)).max(axis=2)
    scb = (np.float32(448) / amb).astype(np.float32)
    qb = np.clip(x.reshape(16, 3, 32) * scb[:, :, None], -448, 448).astype(f8).reshape(16, 96)
    er.quantize(x, "float8_e4m3fn", ("block", 32)).covers((qb, amb, scb)).assert_all()
    assert not er.quantize(x, "float8_e4m3fn", ("block", 32)).covers((qb, amb.T.copy().reshape(16, 3), scb)).all()
    # the inverse recipe, as DeepSeek-style blockwise kernels store it: scale_inv = amax / 448, q = x / scale_inv
    sinv = (amb / np.float32(448)).astype(np.float32)
    qi = np.clip(x.reshape(16, 3, 32) / sinv[:, :, None], -448, 448).astype(f8).reshape(16, 96)
    er.quantize(x, "float8_e4m3fn", ("block", 32), recipe="inverse").covers((qi, amb, sinv)).assert_all()
    qm = np.clip(x.reshape(16, 3, 32) * sinv[:, :, None], -448, 448).astype(f8).reshape(16, 96)  # multiplied instead
    assert not er.quantize(x, "float8_e4m3fn", ("block", 32), recipe="inverse").covers((qm, amb, sinv)).all()
    with pytest.raises(ValueError):
        er.quantize(x, "float8_e4m3fn", recipe="inv")
    with pytest.raises(ValueError):
        er.quantize(x, "float8_e4m3fn", "column")
    with pytest.raises(er.ExactrefError):
        er.quantize(x, "float8_e4m3fn", ("block", 0))
    with pytest.raises(TypeError):
        er.quantize(x, "float8_e4m3fn", ("block", 2.5))


def test_quantize_captures():
    """H200 captures (tools/capture/capture_quantize.py): torch per tensor and per row (e4m3fn and e5m2), the pow2
    recipe, a Triton per-row kernel (div.full scale, saturating conversion), inputs on exact fp8 midpoints and a row
    of zeros: covered; the scale inverted, amax over the wrong axis and a truncating conversion caught."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    z, rows = captures("quantize")
    seen = 0
    for cid, kind, qn, gran, rows, cols, gid in rows:
        x = z[gid + "__in__x"]
        q = z[cid + "__out__q"].view(getattr(ml_dtypes, qn))
        res = er.quantize(x, qn, gran, "pow2" if "pow2" in kind else "amax").covers(
            (q, z[cid + "__out__amax"], z[cid + "__out__scale"]))
        assert res.all() != kind.startswith("bug"), "%s %s %s %s: %s" % (cid, kind, qn, gran, res)
        seen += 1
    assert seen == 30


def test_gemm_quantize_captures():
    """H200 captures (tools/capture/capture_gemm_quant.py): a Triton GEMM quantising its fp32 accumulators to fp8 per
    row in its epilogue, checked as er.matmul(A, B).quantize(...) under mma:sm90 outer=any; torch's unfused recipe on
    its stored fp16 product as er.quantize(h) and as er.matmul(A, B).cast("float16").quantize(...); the scale inverted
    and the unfused output claimed as the fused kernel caught; a multi-output base refused."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    z, rows = captures("gemm_quant")
    seen = 0
    for cid, kind, M, N, K, gid in rows:
        A, B = z[gid + "__in__A"], z[gid + "__in__B"]
        outs = (z[cid + "__out__q"].view(ml_dtypes.float8_e4m3fn), z[cid + "__out__amax"], z[cid + "__out__scale"])
        if kind == "torch_unfused":
            res = er.quantize(z[cid + "__in__h"], "float8_e4m3fn", "row").covers(outs)
        else:
            res = er.matmul(A, B).quantize("float8_e4m3fn", "row").covers(outs, standard="mma:sm90 outer=any")
        assert res.all() != kind.startswith("bug"), "%s %s K=%s: %s" % (cid, kind, K, res)
        seen += 1
        if kind == "torch_unfused":  # the whole pipeline from A and B: the fp16 product, then the recipe
            res = (
                er.matmul(A, B)
                .cast("float16")
                .quantize("float8_e4m3fn", "row")
                .covers(outs, standard="mma:sm90 outer=any")
            )
            assert res.all(), "%s %s K=%s as a chain: %s" % (cid, kind, K, res)
    assert seen == 12
    with pytest.raises(er.ExactrefNotImplementedError):
        er.quantize(A, "float8_e4m3fn").quantize("float8_e4m3fn")   # a multi-output base


def test_chain_of_two_references():
    """SwiGLU as a chain of two matmuls, silu(x W1) * (x W3), an fp32 epilogue stored in fp16: covered; the wrong
    operand caught; another reference of the wrong shape refused."""
    rng = np.random.default_rng(14)
    x = rng.standard_normal((16, 128)).astype(np.float16)
    W1 = (rng.standard_normal((128, 48)) / 11).astype(np.float16)
    W3 = (rng.standard_normal((128, 48)) / 11).astype(np.float16)
    a1 = x.astype(np.float32) @ W1.astype(np.float32)
    a3 = x.astype(np.float32) @ W3.astype(np.float32)
    silu = a1 / (np.float32(1) + np.exp(-a1.astype(np.float64)).astype(np.float32))
    ref = er.matmul(x, W1).silu().mul(er.matmul(x, W3)).cast("float16")
    ref.covers((silu * a3).astype(np.float16)).assert_all()
    assert not ref.covers((silu * a1).astype(np.float16)).all()
    assert np.mean(ref.exact("float16") == (silu * a3).astype(np.float16)) > 0.9
    with pytest.raises(ValueError):
        er.matmul(x, W1).add(er.matmul(x, W1[:, :8]))


def test_torch_softmax_depth_captures():
    """H200 captures (tools/capture/capture_torch_softmax.py): torch's CUDA softmax on rows of 3 to 1024 elements (wide,
    offset, flat and half-masked rows), covered under depth=er.depth.torch_softmax(n), whose sets are narrower than
    any_order's (at n = 1024, the widest over 15 times narrower)."""
    z, rows = captures("torch_softmax")
    seen = 0
    for cid, fam, rows, n in rows:
        x, y = z[cid + "__in__x"], z[cid + "__out__y"]
        d = er.depth.torch_softmax(int(n))
        res = er.softmax(x).covers(y, depth=d)
        assert res.all(), "%s %s n=%s depth=%d: %s" % (cid, fam, n, d, res.report)
        if int(n) == 1024:
            assert er.softmax(x).covers(y).widest()[1] > 15 * res.widest()[1]
        seen += 1
    assert seen == 44
    with pytest.raises(er.ExactrefNotImplementedError):
        er.depth.torch_softmax(2 ** 31 + 1)


def test_torch_softmax_block_depth_captures():
    """H200 captures (tools/capture/capture_torch_softmax_block.py): torch's CUDA softmax on its block path (rows of
    2048 elements, the shared-memory kernel, and 13000, ilpReduce), wide, offset and flat rows, covered under
    depth=er.depth.torch_softmax(n) (17 and 25), whose sets are narrower than any_order's (on the offset and flat
    rows, over 40 times)."""
    z, rows = captures("torch_softmax_block")
    assert er.depth.torch_softmax(2048) == 17 and er.depth.torch_softmax(13000) == 25
    seen = 0
    for cid, fam, nrows, n in rows:
        x, y = z[cid + "__in__x"], z[cid + "__out__y"]
        res = er.softmax(x).covers(y, depth=er.depth.torch_softmax(int(n)))
        assert res.all(), "%s %s n=%s: %s" % (cid, fam, n, res.report)
        if fam != "wide":
            assert er.softmax(x).covers(y).widest()[1] > 40 * res.widest()[1]
        seen += 1
    assert seen == 6


def test_input_families():
    """exactref.testing.family: the C library's values (the checksums t-families.c pins), every family in every
    dtype, the properties of two of them; bad arguments refused."""
    def fnv(b):
        h = 0xcbf29ce484222325
        for c in b:
            h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        return h
    pinned = open(os.path.join(ROOT, "tests", "api", "families_pinned.inc")).read()
    for name in er.testing.FAMILIES:
        a = er.testing.family(name, (24, 33), "float32", seed=12345)
        assert "0x%016x), /* %s */" % (fnv(a.tobytes()), name) in pinned, name
        assert np.array_equal(a, er.testing.family(name, (24, 33), "float32", seed=12345), equal_nan=True)
    pytest.importorskip("ml_dtypes")
    for dt in ("float64", "float32", "bfloat16", "float16", "float8_e5m2"):
        for name in er.testing.FAMILIES:
            x = er.testing.family(name, (5, 7), dt, seed=1)
            assert x.shape == (5, 7) and x.dtype == er._arrays.numpy_dtype(dt)
    assert (er.testing.family("positive", 1000, "float16", 2).astype(np.float32) > 0).all()
    m = er.testing.family("masked", (64, 9), seed=3)
    assert np.isneginf(m).all(axis=1).any() and np.isfinite(m).all(axis=1).any()
    with pytest.raises(er.ExactrefError, match="unknown family 'gaussian'"):
        er.testing.family("gaussian", (3,))
    with pytest.raises(er.ExactrefError, match="masked rows need -inf"):
        er.testing.family("masked", (3, 4), "float8_e4m3fn")
    with pytest.raises(ValueError):
        er.testing.family("normal", (3,), seed=-1)
    with pytest.raises(TypeError):
        er.testing.family(3, (3,))
    with pytest.raises(TypeError):
        er.testing.family("normal", (3,), "int8")


def test_testing_guide_output():
    """docs/guides/test-across-shapes.md shows what examples/python/harness.py prints."""
    _shows_output(os.path.join("guides", "test-across-shapes.md"), "harness.py")


def test_check_harness(tmp_path):
    """exactref.testing.check: a correct matmul, softmax and exp pass every fast case; a matmul dropping its last
    product above K = 1024, a softmax whose sum misses its last element and a kernel that raises fail, with the
    minimal failing case re-run by reproduce(); the JSON record holds the run; timing only after a pass;
    parametrize gives one id per case."""
    import json

    def mm(A, B):
        return A.astype(np.float32) @ B.astype(np.float32)

    def mm_tail(A, B):
        k = A.shape[1] - (A.shape[1] > 1024)
        return A[:, :k].astype(np.float32) @ B[:k].astype(np.float32)

    def softmax(x):
        e = np.exp(x.astype(np.float32) - x.max(axis=-1, keepdims=True).astype(np.float32))
        return e / e.sum(axis=-1, keepdims=True)

    def softmax_short(x):
        e = np.exp(x.astype(np.float32) - x.max(axis=-1, keepdims=True).astype(np.float32))
        return e / (e[..., :-1].sum(axis=-1, keepdims=True) if x.shape[-1] > 1 else e)

    def broken(A, B):
        raise RuntimeError("launch failed")

    ok = er.testing.check(mm, "matmul", dtypes=("float16",), runs_dir=str(tmp_path), timing=True)
    assert ok.passed and len(ok.cases) == 64 and ok.minimal is None
    assert str(ok) == "PASS  mm    64 of 64 cases passed"
    assert ok.timing and all(t["median_s"] > 0 for t in ok.timing)
    rec = json.load(open(ok.path))
    assert rec["library_version"] == er.version() and rec["n_cases"] == 64 and rec["passed"] and rec["timestamp"]
    bad = er.testing.check(mm_tail, "matmul", dtypes=("float16",), runs_dir=str(tmp_path), timing=True)
    assert not bad.passed and bad.timing is None and bad.minimal["shape"] == [2, 2049, 2]
    assert "reproduce: exactref.testing.reproduce('mm_tail'" in str(bad)
    m = bad.minimal
    assert not er.testing.reproduce("mm_tail", tuple(m["shape"]), m["dtype"], m["family"], m["seed"], m["layout"]).all()
    assert er.testing.reproduce(
        mm, tuple(m["shape"]), m["dtype"], m["family"], m["seed"], m["layout"], op="matmul"
    ).all()
    assert er.testing.check(softmax, "softmax", record=False).passed
    short = er.testing.check(softmax_short, "softmax", record=False)
    assert not short.passed and short.minimal["shape"] == [2, 3]   # the smallest shape with more than one lane
    def exp(x):
        with np.errstate(over="ignore"):
            return np.exp(x)
    assert er.testing.check(exp, "exp", record=False).passed
    err = er.testing.check(broken, "matmul", families=("normal",), record=False)
    assert not err.passed and all(c["verdict"] == "error" and "launch failed" in c["error"] for c in err.cases)
    assert str(err).startswith("FAIL  broken    16 of 16 cases failed (16 raised in the kernel)")
    assert "      raised: RuntimeError: launch failed" in str(err)

    def mm_transposed(A, B):  # the output's shape is wrong wherever M != N: those cases fail, the run goes on
        return (A.astype(np.float32) @ B.astype(np.float32)).T.copy()

    tr = er.testing.check(mm_transposed, "matmul", families=("normal",), runs_dir=str(tmp_path))
    wrong = [c for c in tr.failed() if "error" in c]
    assert tr.path and wrong and all("produces" in c["error"] and c["verdict"] == "FAIL" for c in wrong)
    assert str(tr).startswith("FAIL  mm_transposed    %d of 16 cases failed" % len(tr.failed()))
    assert "its output: ValueError: exactref: out has shape" in str(tr)
    with pytest.raises(er.ExactrefError):  # a standard the library refuses is the caller's error, not the kernel's
        er.testing.check(mm, "matmul", families=("normal",), standard="no_such_order", record=False)
    mark = er.testing.parametrize("matmul", dtypes=("float16",), families=("ties",))
    ids = mark.kwargs["ids"]
    assert len(ids) == 16 and ids[2] == "(17,1025,9)-float16-ties-transposed" and ids[3].endswith("-strided")
    case = mark.args[1][2]
    A, B = case.inputs()
    case.assert_covers(mm(A, B))
    with pytest.raises(AssertionError, match="reproduce: exactref.testing.reproduce"):
        case.assert_covers(mm_tail(A, B) + np.float32(1), name="mm_tail")
    with pytest.raises(ValueError):
        er.testing.shapes("conv2d")
    with pytest.raises(ValueError):
        er.testing.reproduce("never_checked", (1, 1, 1), "float16", "normal", 0)


def test_check_triton_configs_on_gpu():
    """exactref.testing on CUDA: an @triton.autotune matmul with two configs, one of which skips the partial last K
    block (a planted bug) and is picked only for outputs of 2^20 elements or more: the fast tier passes under the
    autotuner's choice; under every config (configs=) that config fails wherever K is not a multiple of its block
    and the other passes every case; torch's matmul passes and is timed with triton.testing.do_bench."""
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "autotune_configs", os.path.join(ROOT, "examples", "python", "autotune_configs.py")
    )
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)   # the example's kernel (its checks run only as a script)
    mm_kernel, my_mm = ex.mm_kernel, ex.my_mm

    assert [c.kwargs for c in er.testing.configs(mm_kernel)] == [{"BK": 32, "TAIL": 1}, {"BK": 64, "TAIL": 0}]
    assert er.testing.configs(mm_kernel.fn) == ["BK", "TAIL"]
    std = dict(standard="mma:sm90", outer="any")
    assert er.testing.check(my_mm, "matmul", dtypes=("float16",), families=("normal",), standard=std, device="cuda",
                            record=False).passed   # the autotuner's own choice: the buggy config never runs
    rec = er.testing.check(my_mm, "matmul", dtypes=("float16",), families=("normal",), standard=std, device="cuda",
                           configs=mm_kernel, record=False)
    good = [c for c in rec.cases if "TAIL=1" in c["config"]]
    bad = [c for c in rec.cases if "TAIL=0" in c["config"]]
    assert len(good) == len(bad) == 16 and all(c["verdict"] == "pass" for c in good)
    assert [c["verdict"] == "pass" for c in bad] == [c["shape"][1] % 64 == 0 for c in bad]
    assert "TAIL=0" in rec.minimal["config"] and "config BK=64, TAIL=0" in str(rec) and "config=1)" in str(rec)
    m = rec.minimal
    assert not er.testing.reproduce(my_mm, tuple(m["shape"]), m["dtype"], m["family"], m["seed"], m["layout"],
                                    op="matmul", standard=std, device="cuda", config=1, configs=mm_kernel).all()
    assert er.testing.reproduce(my_mm, tuple(m["shape"]), m["dtype"], m["family"], m["seed"], m["layout"],
                                op="matmul", standard=std, device="cuda").all()   # the autotuner's own choice
    timed = er.testing.check(lambda A, B: A.float() @ B.float(), "matmul", dtypes=("float16",), families=("normal",),
                             standard="any_order", device="cuda", record=False, timing=True)
    assert timed.passed and len(timed.timing) == 3 and all(t["median_s"] > 0 for t in timed.timing)


def test_check_catches_kernel_bugs():
    """exactref.testing.check with CPU kernels in numpy: a blocked matmul (fp32 accumulators over blocks of 32 of K)
    passes every fast and exhaustive case; a dropped K tail, an off-by-one mask in the last K block, a lost last row
    tile, fp16 accumulation where fp32 is claimed, and a softmax over rows padded with zeros each fail exactly on
    the shapes their bug touches, the minimal failing case is the smallest of those, and reproduce() fails it the
    same way."""
    def blocked(A, B, bk=32, mask_off=0, last_row=True, acc=np.float32):
        a, b = A.astype(np.float32), B.astype(np.float32)
        M, K = a.shape
        out = np.zeros((M, b.shape[1]), acc)
        for k0 in range(0, K, bk):
            k1 = min(k0 + bk, K)
            if k1 - k0 < bk:
                k1 -= mask_off                       # the last partial block's mask off by mask_off
            out = (out + (a[:, k0:k1] @ b[k0:k1]).astype(acc)).astype(acc)
        if not last_row and M > 16 and M % 16:
            out[-1] = 0                              # the grid's last row tile never launched
        return out.astype(np.float32)

    def padded_softmax(x):
        n = x.shape[-1]
        p = 1 << (n - 1).bit_length()
        xp = np.zeros(x.shape[:-1] + (p,), np.float32)   # padding with 0 instead of -inf
        xp[..., :n] = x
        e = np.exp(xp - xp.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True))[..., :n]

    for tier in ("fast", "exhaustive"):
        rec = er.testing.check(
            blocked, "matmul", dtypes=("float16",), tier=tier, families=("normal", "cancellation"), record=False
        )
        assert rec.passed, str(rec)
    bugs = (
        ("tail", lambda A, B: A[:, :-1].astype(np.float32) @ B[:-1].astype(np.float32) if A.shape[1] > 1024
         else A.astype(np.float32) @ B.astype(np.float32), lambda s: s[1] > 1024),
        ("mask", lambda A, B: blocked(A, B, mask_off=1), lambda s: s[1] % 32 != 0),
        ("last_row", lambda A, B: blocked(A, B, last_row=False), lambda s: s[0] > 16 and s[0] % 16 != 0),
        ("fp16_acc", lambda A, B: blocked(A, B, acc=np.float16), None),
    )
    for name, kernel, touched in bugs:
        rec = er.testing.check(kernel, "matmul", dtypes=("float16",), families=("normal",), name=name, record=False)
        failing = [tuple(c["shape"]) for c in rec.cases if c["verdict"] != "pass"]
        if touched is not None:
            assert failing == [s for s in er.testing.shapes("matmul") if touched(s)], (name, failing)
        assert failing and tuple(rec.minimal["shape"]) == min(failing, key=lambda s: (np.prod(s), failing.index(s)))
        m = rec.minimal
        again = er.testing.reproduce(name, tuple(m["shape"]), m["dtype"], m["family"], m["seed"], m["layout"])
        assert not again.all() and again.n_failed == m["n_failed"], name
    rec = er.testing.check(padded_softmax, "softmax", families=("normal",), record=False)
    failing = [tuple(c["shape"]) for c in rec.cases if c["verdict"] != "pass"]
    assert failing == [s for s in er.testing.shapes("softmax") if s[1] & (s[1] - 1)]


def test_triton_sum_order():
    """triton:BLOCK reproduces Triton's tl.sum from the H200 captures bit for bit (every eighth case and some of the
    subnormal and tie-rich ones here; t-toolchain runs all 474), and refuses a row longer than its block."""
    import ml_dtypes
    sys.path.insert(0, os.path.join(ROOT, "tools", "capture"))
    from capture_common import tlsum_values
    z, cases = captures("tlsum")
    fmts = {"fp32": (24, 20, np.float32), "bf16": (8, 20, ml_dtypes.bfloat16), "fp16": (11, 10, np.float16)}
    for c in cases[::8] + [c for c in cases if c[8] != "wide"][::6]:
        cid, dt, block, warps, n, rows, seed = c[0], c[1], *map(int, c[2:7])
        p, e_max, np_dt = fmts[dt]
        x = tlsum_values(c[8], seed, rows, n, p, e_max).astype(np_dt)
        want = z[cid + "__out__s"]
        ref = er.sum(x, dim=1)
        got = ref.emulate("triton:%d" % block, warps=warps, dtype="float32")
        assert got.tobytes() == want.tobytes(), c
        assert ref.covers(want, "triton:%d" % block, warps=warps).all()
    with pytest.raises(er.ExactrefValueError, match="sums one block"):
        er.sum(np.ones((2, 100), np.float32), dim=1).covers(np.full(2, 100, np.float32), "triton:64")


def test_standard_struct_documented():
    """docs/reference/standard.md lists er_standard's fields in the header's order."""
    def fields(path):
        with open(os.path.join(ROOT, path)) as f:
            text = f.read()
        body = text[text.index("typedef struct er_standard {"):text.index("} er_standard;")]
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        return re.findall(r"^\s*[a-z_0-9]+\s+([a-z_0-9, ]+);", body, flags=re.M)
    assert fields("docs/reference/standard.md") == fields("include/exactref/standard.h")
