"""exactref.torch: torch reference functions traced into exactref references. Each traced reference is judged
against the hand-written exactref reference of the same computation on the same outputs (the same class for every
element), on torch CPU outputs nudged by an ulp and by much more, and on the H200 captures of tests/data."""
import math
import os

import numpy as np
import pytest

import exactref as er

torch = pytest.importorskip("torch")
F = torch.nn.functional
ert = pytest.importorskip("exactref.torch")


def t(a):
    """A numpy (or ml_dtypes bfloat16) array as a torch tensor."""
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def nudged(out):
    """out, and out with its first element one ulp up and its last element doubled plus one: the three classes."""
    variants = [out]
    a = out.detach().clone().reshape(-1)
    b = a.clone()
    a[0] = torch.nextafter(a[0:1].float(), torch.tensor([math.inf])).to(a.dtype)[0] if a.dtype != torch.float64 \
        else torch.nextafter(a[0:1], torch.tensor([math.inf], dtype=torch.float64))[0]
    b[-1] = b[-1] * 2 + 1
    return variants + [a.reshape(out.shape), b.reshape(out.shape)]


def same_classes(traced, hand, out, hand_out=None, **std):
    """The traced reference and the hand-written one give every element the same class on out (hand_out: out as the
    hand-written reference takes it, where the function rearranged it)."""
    res_t = traced.covers(out, **std)
    res_h = hand.covers(out if hand_out is None else hand_out(out), **std)
    assert np.array_equal(res_t.classes.reshape(-1), res_h.classes.reshape(-1)), (traced.expr, str(res_t), str(res_h))
    return res_t


rng = np.random.default_rng(31)


def randn(*shape, dtype=torch.float32, scale=1.0):
    return torch.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32)).to(dtype)


A, B, C = randn(6, 40), randn(40, 24), randn(40, 24)
bias, row = randn(24), randn(6, 24)
X = randn(5, 7, 32, scale=3)
g, beta = randn(32), randn(32)
A16, B16, bias16 = A.half(), B.half(), bias.half()


def to_np(x):
    from exactref._arrays import to_numpy
    return to_numpy(x, "x")


CASES = [
    # (id, fn, inputs, hand-written reference built on the numpy inputs, options, out rearranged for the hand one)
    ("matmul", lambda a, b: a @ b, (A, B), lambda a, b: er.matmul(a, b), {}, None),
    ("mm", lambda a, b: torch.mm(a, b), (A, B), lambda a, b: er.matmul(a, b), {}, None),
    ("bmm", lambda a, b: torch.bmm(a[None], b[None]), (A, B), lambda a, b: er.matmul(a[None], b[None]), {}, None),
    ("linear", lambda x, w: F.linear(x, w), (A, B.T.contiguous()), lambda x, w: er.matmul(x, w.T), {}, None),
    ("linear_bias", lambda x, w, b: F.linear(x, w, b), (A, B.T.contiguous(), bias),
     lambda x, w, b: er.matmul(x, w.T).add(b), {}, None),
    ("addmm", lambda b, x, w: torch.addmm(b, x, w), (bias, A, B), lambda b, x, w: er.matmul(x, w).add(b), {}, None),
    ("baddbmm", lambda b, x, w: torch.baddbmm(b, x[None], w[None]), (row, A, B),
     lambda b, x, w: er.matmul(x[None], w[None]).add(b), {}, None),
    ("gemm_bias_gelu_tanh_fp16", lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh").to(torch.float16),
     (A16, B16.T.contiguous(), bias16),
     lambda x, w, b: er.matmul(x, w.T).add(b).gelu(approximate="tanh").cast("float16"), {}, None),
    ("scale_sub_relu", lambda a, b, c: F.relu((a @ b) * 0.5 - c), (A, B, row),
     lambda a, b, c: er.matmul(a, b).mul(0.5).add(-c).relu(), {}, None),
    ("rsub_div", lambda a, b: 2 - (a @ b) / 4, (A, B), lambda a, b: er.matmul(a, b).mul(0.25).mul(-1.0).add(2.0),
     {}, None),
    ("neg", lambda a, b: -(a @ b), (A, B), lambda a, b: er.matmul(a, b).mul(-1.0), {}, None),
    ("swiglu", lambda x, w1, w3: F.silu(x @ w1) * (x @ w3), (A, B, C),
     lambda x, w1, w3: er.matmul(x, w1).silu().mul(er.matmul(x, w3)), {}, None),
    ("difference", lambda x, w1, w3: (x @ w1) - (x @ w3), (A, B, C),
     lambda x, w1, w3: er.matmul(x, w1).add(er.matmul(x, w3).mul(-1.0)), {}, None),
    ("sigmoid_tanh", lambda a, b: torch.tanh(torch.sigmoid(a @ b)), (A, B),
     lambda a, b: er.matmul(a, b).sigmoid().tanh(), {}, None),
    ("exp_log", lambda a, b: torch.log(torch.exp(a @ b / 8) + 1), (A, B),
     lambda a, b: er.matmul(a, b).mul(0.125).exp().add(1.0).log(), {}, None),
    ("exp2_erf_rsqrt", lambda a, b: torch.rsqrt(torch.erf(torch.exp2(a @ b)) + 2), (A, B),
     lambda a, b: er.matmul(a, b).exp2().erf().add(2.0).rsqrt(), {}, None),
    ("input_gelu_bf16", lambda x: F.gelu(x.float()).to(torch.bfloat16), (X,),
     lambda x: er.tensor(x).gelu().cast("bfloat16"), {}, None),
    ("input_sum_of_two", lambda x, y: x + y, (A, randn(6, 40)), lambda x, y: er.tensor(x).add(y), {}, None),
    ("transposed_output", lambda a, b: (a @ b).t() + 1, (A, B), lambda a, b: er.matmul(a, b).add(1.0), {},
     lambda out: out.T),
    ("transposed_bias", lambda a, b, c: (a @ b).t() * c, (A, B, randn(24, 1)),
     lambda a, b, c: er.matmul(a, b).mul(c.T), {}, lambda out: out.T),
    ("sum", lambda x: x.sum(-1), (X,), lambda x: er.sum(x, -1), {}, None),
    ("sum_keepdim_scaled", lambda x: x.sum(1, keepdim=True) * 3, (X,), lambda x: er.sum(x, 1).mul(3.0), {},
     lambda out: out.reshape(5, 32)),
    ("sum_all", lambda x: x.sum(), (X,), lambda x: er.sum(x.reshape(-1), 0), {}, None),
    ("sum_two_dims", lambda x: x.sum((1, 2)), (X,), lambda x: er.sum(x.reshape(5, -1), 1), {}, None),
    ("mean", lambda x: x.mean(-1), (X,), lambda x: er.mean(x, -1), {}, None),
    ("amax_keepdim", lambda x: x.amax(-1, keepdim=True), (X,), lambda x: er.max(x, -1), {},
     lambda out: out.reshape(5, 7)),
    ("softmax_fp16", lambda x: torch.softmax(x.float(), -1).half(), (X.half(),), lambda x: er.softmax(x.astype(
        np.float32), -1), {}, None),
    ("softmax_dtype", lambda x: F.softmax(x, dim=1, dtype=torch.float32), (X.half(),),
     lambda x: er.softmax(x.astype(np.float32), 1), {}, None),
    ("log_softmax", lambda x: F.log_softmax(x, -1), (X,), lambda x: er.log_softmax(x, -1), {}, None),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (32,), w, b, 1e-5), (X, g, beta),
     lambda x, w, b: er.layer_norm(x, 32, w, b, 1e-5), {}, None),
    ("layer_norm_bf16", lambda x: F.layer_norm(x.float(), (32,)).bfloat16(), (X.bfloat16(),),
     lambda x: er.layer_norm(x.astype(np.float32), 32), {}, None),
    ("rms_norm", lambda x, w: F.rms_norm(x, (32,), w, 1e-6), (X, g), lambda x, w: er.rmsnorm(x, w, 1e-6), {}, None),
    ("rms_norm_default_eps", lambda x: F.rms_norm(x, (32,)), (X,),
     lambda x: er.rmsnorm(x, None, float(np.finfo(np.float32).eps)), {}, None),
    ("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     (randn(1, 2, 9, 16), randn(1, 2, 12, 16), randn(1, 2, 12, 8)),
     lambda q, k, v: er.attention(q, k, v, causal=True), {}, None),
    ("sdpa_gqa_scaled", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3, enable_gqa=True),
     (randn(1, 4, 8, 16), randn(1, 2, 8, 16), randn(1, 2, 8, 16)),
     lambda q, k, v: er.attention(q, k, v, scale=0.3, enable_gqa=True), {}, None),
    ("sdpa_heads_merged", lambda q, k, v: F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, 8, 32),
     (randn(1, 2, 8, 16), randn(1, 2, 8, 16), randn(1, 2, 8, 16)),
     lambda q, k, v: er.attention(q, k, v), {}, lambda out: out.reshape(1, 8, 2, 16).transpose(0, 2, 1, 3)),
    ("view_of_input", lambda x: x.t(), (A,), lambda x: er.tensor(x.T), {}, lambda out: out),
]


# kernels other than the function's eager run: the fused GEMM's epilogue in fp32, stored once in fp16
def gelu_cuda_form(x):
    """gelu in CUDA's form, each step in fp32, erf correctly rounded: (x / 2)(1 + erf(x fl(1/sqrt 2)))."""
    x = x.float()
    e = torch.erf((x * 0.7071067811865476).double()).float()
    return (x * 0.5) * (1 + e)


# kernels other than the function's eager run: the fused GEMM's epilogue in fp32, stored once in fp16; gelu in CUDA's
# form (torch's CPU gelu is another approximation)
KERNELS = {"gemm_bias_gelu_tanh_fp16": lambda x, w, b: F.gelu(F.linear(x.float(), w.float(), b.float()),
                                                              approximate="tanh").half(),
           "input_gelu_bf16": lambda x: gelu_cuda_form(x).bfloat16()}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_traced_equals_hand_written(case):
    """For each op that traces: the traced reference and the hand-written one agree on every element's class, on
    torch's own output (covered) and on it nudged by an ulp and by far (caught)."""
    name, fn, inputs, hand, std, rearrange = case
    traced = ert.reference(fn)(*inputs)
    ref = hand(*[to_np(x) for x in inputs])
    out = KERNELS.get(name, fn)(*inputs)
    classes = set()
    for k, o in enumerate(nudged(out)):
        ho = None if rearrange is None else (lambda o_: rearrange(to_np(o_)))
        res = same_classes(traced, ref, o, ho, **std)
        classes |= {int(c) for c in np.unique(res.classes)}
        if k == 0:
            assert res.all(), (name, traced.expr, str(res))
        if k == 2:
            assert not res.all(), (name, traced.expr)


def test_expressions_name_the_inputs():
    """The traced expression is the exactref call it stands for, with the function's own parameter names."""
    ref = ert.reference(lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh").to(torch.float16))
    r = ref(A16, B16.T.contiguous(), bias16)
    assert r.expr == "er.matmul(x, w.T).add(b).gelu(approximate='tanh').cast('float16')"
    assert r.dtype == torch.float16 and r.shape == (6, 24)
    assert "TracedReference float16 (6, 24)" in repr(r)
    with pytest.raises(TypeError):
        bool(r)


def test_intermediates_stored():
    """intermediates="stored": every op's result rounded to its traced dtype, as torch's eager fp16 ops store them:
    the same classes as the hand-written unfused chain on torch's own fp16 CPU output (relu: torch's CPU gelu is
    another approximation than the CUDA form the stage models, and fails it on torch 2.11's CPU kernels);
    "compute" holds them in fp32."""
    def fn(x, w, b):
        return F.relu(x @ w + b)
    stored = ert.reference(fn, intermediates="stored")(A16, B16, bias16)
    assert stored.expr == "er.matmul(x, w).cast('float16').add(b).cast('float16').relu().cast('float16')"
    hand = er.matmul(to_np(A16), to_np(B16)).cast("float16").add(to_np(bias16)).cast("float16").relu().cast("float16")
    out = fn(A16, B16, bias16)
    for o in nudged(out):
        same_classes(stored, hand, o)
    assert stored.covers(out).all()
    fused = ert.reference(fn)(A16, B16, bias16)
    assert fused.expr == "er.matmul(x, w).add(b).relu()"
    gelu = ert.reference(lambda x, w, b: F.gelu(x @ w + b), intermediates="stored")(A16, B16, bias16)
    assert gelu.expr == "er.matmul(x, w).cast('float16').add(b).cast('float16').gelu().cast('float16')"
    with pytest.raises(er.ExactrefValueError, match="'compute' or 'stored'"):
        ert.reference(fn, intermediates="fused")


def test_stored_rounding_then_widening_refused():
    """A softmax stored in fp16 (intermediates="stored") then widened to fp32: the fp32 output's set would not hold
    the fp16 rounding, so the trace refuses it instead of judging it."""
    def fn(x):
        return torch.softmax(x, -1).float()
    with pytest.raises(ert.UnsupportedOpError, match="rounded to float16, then widened to float32"):
        ert.reference(fn, intermediates="stored")(X.half())
    r = ert.reference(fn)(X.half())     # held in the compute format: one rounding, to fp32
    assert r.covers(torch.softmax(X.half().float(), -1)).all()


def test_aliased_inputs():
    """A trace made with one tensor passed twice stays right for two different tensors of the same signature (the
    tracer maps a tensor object to one input)."""
    q, k = randn(4, 8), randn(4, 8)
    tf = ert.reference(lambda a, b: a @ b.T)
    assert tf(q, q).covers(q @ q.T).all()
    assert tf(q, k).covers(q @ k.T).all()
    assert tf(q, k).expr == "er.matmul(a, b.T)"


def test_module_reference():
    """A module as the reference: its parameters are read when the reference is built (a changed weight counts)."""
    torch.manual_seed(3)
    mod = torch.nn.Sequential(torch.nn.Linear(40, 24), torch.nn.GELU(approximate="tanh"))
    tf = ert.reference(mod)
    with torch.no_grad():
        out = mod(A)
        assert tf(A).covers(out).all()
        mod[0].weight[0, 0] += 1
        assert not tf(A).covers(out).all()
        assert tf(A).covers(mod(A)).all()
    ln = torch.nn.LayerNorm(32)
    with torch.no_grad():
        assert ert.reference(ln)(X).covers(ln(X)).all()


def test_ulps_option():
    """ulps= sets a stage function's budget: the expression shows it, and a tighter budget gives narrower sets."""
    fn = lambda a, b: torch.exp(a @ b / 8)  # noqa: E731
    wide = ert.reference(fn, ulps={"exp": 64})(A, B)
    assert wide.expr == "er.matmul(a, b).mul(0.125).exp(ulps=64)"
    out = fn(A, B)
    assert wide.covers(out).widest()[1] > ert.reference(fn)(A, B).covers(out).widest()[1]
    with pytest.raises(er.ExactrefValueError, match="ulps takes"):
        ert.reference(fn, ulps={"cumsum": 1})
    with pytest.raises(er.ExactrefValueError, match="None or a number in"):
        ert.reference(fn, ulps={"exp": 100})     # refused when given, not when a reference is first built


def test_assert_close():
    """assert_close: silent on a correct output; an AssertionError with the report, the worst element and the first
    failing ones on a wrong one; tuples for several outputs, their count checked."""
    fn = lambda x, w, b: F.relu(F.linear(x, w, b)).half()  # noqa: E731
    w = B.T.contiguous()
    out = fn(A, w, bias)
    ert.assert_close(out, fn, A, w, bias)
    bad = out.clone()
    bad[2, 3] = bad[2, 3] + 1
    with pytest.raises(AssertionError) as e:
        ert.assert_close(bad, fn, A, w, bias)
    text = str(e.value)
    assert "er.matmul(x, w.T).add(b).relu().cast('float16')" in text
    assert "worst: [2, 3]" in text and "first failing: [2, 3]" in text
    two = lambda x: (x.sum(-1), torch.softmax(x, -1))  # noqa: E731
    s, p = two(X)
    ert.assert_close((s, p), two, X)
    with pytest.raises(AssertionError, match="output 1"):
        ert.assert_close((s, p * 1.01), two, X)
    with pytest.raises(er.ExactrefValueError, match="returns 2 outputs"):
        ert.assert_close((s,), two, X)


def test_outputs_checked_for_dtype_and_shape():
    tf = ert.reference(lambda a, b: (a @ b).half())(A, B)
    with pytest.raises(er.ExactrefValueError, match="the output is float32 but the function returns float16"):
        tf.covers((A @ B))
    with pytest.raises(er.ExactrefValueError, match="shape"):
        tf.covers((A @ B).half().t())
    assert tf.covers(to_np((A @ B).half())).all()    # a numpy array of the right dtype is taken too


def _raises(fn, inputs, match, **kw):
    with pytest.raises(ert.UnsupportedOpError, match=match) as e:
        ert.reference(fn, **kw)(*inputs)
    return e.value


def test_unsupported_ops_refused_by_name_and_line():
    """An op exactref has no set for stops the trace, naming the op and the line of the function that called it."""
    def fn(x):
        y = x * 2
        return torch.cumsum(y, 0)
    err = _raises(fn, (A,), "aten.cumsum")
    assert err.op == "aten.cumsum"
    assert err.place.startswith("test_torch_trace.py:") and err.place.endswith("return torch.cumsum(y, 0)")
    assert "supported_ops()" in str(err)


@pytest.mark.parametrize("fn,inputs,match", [
    (lambda x: F.gelu(torch.softmax(x, -1)), (X,), "elementwise op after er.softmax"),
    (lambda x, w: (x @ w).sum(-1), (A, B), "sum of a computed value"),
    (lambda x, w, v: (x @ w) @ v, (A, B, B.T.contiguous()), "matmul of a computed value"),
    (lambda x, w: torch.softmax(x @ w, -1), (A, B), "softmax of a computed value"),
    (lambda x, w: (x @ w) / 3, (A, B), "division by 3.0"),
    (lambda x, w, c: (x @ w) / c, (A, B, row), "division by a tensor"),
    (lambda x, w, c: torch.add(x @ w, c, alpha=2), (A, B, row), "alpha=2"),
    (lambda x: F.scaled_dot_product_attention(x, x, x, attn_mask=torch.ones(7, 7, dtype=torch.bool)), (X[None],),
     "attn_mask"),
    (lambda x: F.scaled_dot_product_attention(x, x, x, dropout_p=0.1), (X[None],), "dropout_p"),
    (lambda x, w: (x @ w)[:, :3], (A, B), "slice of a computed value"),
    (lambda x, w, c: (x @ w) + c, (A, B, randn(2, 6, 24)), "broadcast of a reference"),
    (lambda x, w, y: (x @ w).t() + (w.t() @ y), (A, B, randn(40, 6)), "arranged differently"),
    (lambda x, w: torch.addmm(x, x, w, beta=2), (A[:, :6].contiguous(), randn(6, 6)), "beta=2"),
    (lambda x: x.sum((0, 2)), (X,), "not adjacent"),
    (lambda x: F.rms_norm(x, (7, 32)), (X,), "last dimension alone"),
])
def test_compositions_refused(fn, inputs, match):
    """Compositions exactref has no set for are refused with the reason, never judged with a wider or wrong set."""
    _raises(fn, inputs, match)


def test_bad_arguments():
    with pytest.raises(er.ExactrefTypeError, match="callable"):
        ert.reference(3)
    with pytest.raises(er.ExactrefTypeError, match="input 1 is str"):
        ert.reference(lambda a, b: a)(A, "x")
    with pytest.raises(er.ExactrefTypeError, match="not a tensor"):
        ert.reference(lambda a: (a, 3))(A)


def test_supported_ops():
    ops = ert.supported_ops()
    for op in ("aten.linear", "aten.scaled_dot_product_attention", "aten.gelu", "aten.to", "aten.layer_norm",
               "aten.rms_norm", "aten.permute", "aten.sub"):
        assert op in ops, op
    assert "aten.cumsum" not in ops
    assert list(ops) == sorted(ops)


# ---- the H200 captures of tests/data, judged through torch references ----

def _same_judgment(fn, inputs, hand, y, std, intermediates="compute"):
    traced = ert.reference(fn, intermediates=intermediates)(*inputs)
    rt, rh = traced.covers(y, **std), hand.covers(to_np(y), **std)
    assert np.array_equal(rt.classes, rh.classes) and rt.all() == rh.all(), (traced.expr, str(rt), str(rh))
    return rt


def _dtype(name):
    return {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[name]


def test_chain_and_activation_captures_through_torch_references():
    """The fused GEMM epilogues captured on the H200 (tests/data/chains, acts, act_forms, fused_forms): each torch
    reference (upcast inputs for the fused Triton kernels; the eager fp16 / bf16 program under
    intermediates="stored" for torch's unfused ones) gives the hand-written tests' classes on every output, bugs
    included."""
    from conftest import arrays, captures
    pytest.importorskip("ml_dtypes")
    seen = 0
    for name in ("chains", "acts", "act_forms", "fused_forms"):
        z, rows = captures(name)
        for r in rows:
            cid, kind, dt = r[0], r[1], r[2]
            if "quant" in kind or "times_s" in kind or kind.endswith("_form"):
                continue
            gid = r[-1]
            K = r[5]
            Am, Bm, bm, ym = arrays(z, dt, gid + "__in__A", gid + "__in__B", gid + "__in__bias", cid + "__out__y")
            a, b, bias_, y = t(Am), t(Bm), t(bm), t(ym)
            td = _dtype(dt)
            std = {"standard": "mma:sm90 outer=any"}
            mm = er.matmul(Am, Bm)
            alpha = float(r[6]) if name == "chains" else 1.0
            if name == "chains" and kind.startswith("triton"):
                if alpha != 1:
                    fn = lambda a, b, c, s=alpha: F.relu((a.float() @ b.float()) * s + c.float()).to(td)  # noqa
                else:
                    fn = lambda a, b, c: F.relu(a.float() @ b.float() + c.float()).to(td)  # noqa: E731
                hand = (mm.mul(alpha) if alpha != 1 else mm).add(bm).relu().cast(dt)
                mode = "compute"
            elif name == "chains" and kind.startswith("torch_unfused"):
                fn, mode = (lambda a, b, c: F.relu(a @ b + c)), "stored"
                hand = mm.cast(dt).add(bm).cast(dt).relu().cast(dt)
            elif name == "chains":
                fn, mode = (lambda a, b, c: torch.addmm(c, a, b)), "stored"
                hand = mm.add(bm).cast(dt)
                if dt == "bfloat16" and K == "2051":
                    std = {"standard": "any_order", "compute": "bfloat16"}
            elif name == "acts" and kind == "triton_bias_gelu":
                fn, mode = (lambda a, b, c: F.gelu(a.float() @ b.float() + c.float()).to(td)), "compute"
                hand = mm.add(bm).gelu().cast(dt)
            elif name == "acts":
                act = F.silu if kind == "torch_silu" else F.gelu
                fn, mode = (lambda a, b, c, act=act: act(a @ b + c)), "stored"
                stored = mm.cast(dt).add(bm).cast(dt)
                hand = (stored.silu() if kind == "torch_silu" else stored.gelu()).cast(dt)
            elif name == "act_forms" and kind.startswith("triton"):
                act = (lambda v: F.silu(v)) if "silu" in kind else (lambda v: F.gelu(v, approximate="tanh"))
                fn, mode = (lambda a, b, c, act=act: act(a.float() @ b.float() + c.float()).to(td)), "compute"
                fused = mm.add(bm)
                hand = (fused.silu() if "silu" in kind else fused.gelu(approximate="tanh")).cast(dt)
            elif name == "act_forms":
                fn, mode = (lambda a, b, c: F.gelu(a @ b + c, approximate="tanh")), "stored"
                hand = mm.cast(dt).add(bm).cast(dt).gelu(approximate="tanh").cast(dt)
            else:
                act = F.relu if "relu" in kind else (lambda v: F.gelu(v, approximate="tanh"))
                fn, mode = (lambda a, b, c, act=act: act(a.float() @ b.float() + c.float()).to(td)), "compute"
                fused = mm.add(bm)
                hand = (fused.relu() if "relu" in kind else fused.gelu(approximate="tanh")).cast(dt)
            for m in ("precise", "triton") if kind.startswith("triton") else ("precise",):
                res = _same_judgment(fn, (a, b, bias_), hand, y, dict(std, math=m), mode)
                assert res.all() != ("bug" in kind), (name, cid, kind)
            seen += 1
    assert seen == 44 + 16 + 20 + 16


def test_attention_captures_through_torch_references():
    """The H200 attention captures (tests/data/attention.npz): F.scaled_dot_product_attention traced gives the
    hand-written er.attention's classes on every output of the top-left causal and non-causal cases."""
    from conftest import arrays, captures
    pytest.importorskip("ml_dtypes")
    z, rows = captures("attention")
    seen = 0
    for cid, kind, dt, Sq, Sk, D, H, Hkv, causal, align, gid in rows:
        if align != "top_left" or (kind == "torch_flash" and causal == "1" and Sq != Sk):
            continue
        q, k, v, o = arrays(z, dt, gid + "__in__q", gid + "__in__k", gid + "__in__v", cid + "__out__o")
        c, gqa = causal == "1", H != Hkv
        fn = lambda q, k, v, c=c, gqa=gqa: F.scaled_dot_product_attention(q, k, v, is_causal=c, enable_gqa=gqa)  # noqa
        hand = er.attention(q, k, v, causal=c, enable_gqa=gqa)
        res = _same_judgment(fn, (t(q), t(k), t(v)), hand, t(o), {"standard": "any_order"})
        if not (kind == "torch_cudnn" and dt == "float32") and not kind.startswith("bug"):
            assert res.all(), (cid, kind)
        seen += 1
    assert seen == 103   # the 121 cases less the bottom-right ones and torch flash's shifted causal ones


def test_supported_ops_table_in_the_docs():
    """docs/reference/python.md's table of what traces is supported_ops(), row for row."""
    import os
    from conftest import ROOT
    text = open(os.path.join(ROOT, "docs", "reference", "python.md")).read()
    rows = text.split("<!-- supported_ops -->", 1)[1].split("|---|---|\n", 1)[1].split("\n\n", 1)[0].split("\n")
    assert rows == ["| `%s` | %s |" % kv for kv in ert.supported_ops().items()]


def test_guide_output():
    """docs/guides/from-a-torch-reference.md shows what examples/python/torch_reference_check.py prints."""
    from test_exactref import _shows_output
    _shows_output("guides/from-a-torch-reference.md", "torch_reference_check.py")


def test_control_flow_on_values_refused():
    """A function that branches on its inputs' values is refused: a trace is reused for every input of the same
    signature, so it must not hold the branch the first inputs took."""
    def fn(x):
        if x.sum() > 0:
            return x * 2
        return x * 4
    with pytest.raises(er.ExactrefNotImplementedError, match="depends on the values of its inputs"):
        ert.reference(fn)(A)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors():
    """CUDA inputs and outputs: the traced reference of torch's own CUDA kernels (cuBLAS in fp32 with TF32 off, the
    bias and gelu's tanh form, an fp16 store) covers them and catches a changed element; a function that is one
    matmul of two CUDA inputs is checked on the GPU where the library has CUDA, with the host check's classes."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    dev = torch.device("cuda")
    x, w, b = A16.to(dev), B16.T.contiguous().to(dev), bias16.to(dev)

    def fn(x, w, b):
        return F.gelu(F.linear(x.float(), w.float(), b.float()), approximate="tanh").to(torch.float16)
    out = fn(x, w, b)
    ert.assert_close(out, fn, x, w, b)
    bad = out.clone()
    bad[1, 1] += 1
    with pytest.raises(AssertionError, match="worst: \\[1, 1\\]"):
        ert.assert_close(bad, fn, x, w, b)
    a, m = randn(256, 512).half().to(dev), randn(512, 128).half().to(dev)
    mm = lambda a, m: a @ m  # noqa: E731
    y = mm(a, m)
    traced = ert.reference(mm)(a, m)
    assert traced._device_matmul is not None  # both inputs on the GPU
    res = traced.covers(y)
    host = er.matmul(to_np(a), to_np(m)).covers(to_np(y))
    assert res.all() and np.array_equal(res.classes.reshape(-1), host.classes.reshape(-1))
    y2 = y.clone()
    y2[3, 4] = y2[3, 4] * 2 + 1
    assert not traced.covers(y2).all()
    print("cuda_available", er.cuda_available())


def test_constants_and_in_place_ops():
    """A tensor constant made inside fn is read as a value; an in-place op is refused with what to write instead."""
    fn = lambda x: (x @ x.T) * torch.tensor(2.0)  # noqa: E731
    r = ert.reference(fn)(A)
    assert r.covers(fn(A)).all() and not r.covers(A @ A.T).all()

    def in_place(x, w):
        y = x @ w
        y += 1
        return y
    _raises(in_place, (A, B), "aten.add_.*in-place op: write it out of place")


def test_a_last_cast_is_the_outputs_rounding():
    """A last .to(dtype) is the output's own rounding, so covers()'s overflow= applies to it; for float8_e4m3fn its
    default is what torch's .to() does beyond 448 on the inputs' device (torch 2.15 saturates: 1000 becomes 448;
    earlier versions return NaN), and the other rule calls torch's output wrong. An earlier cast is a stage (fp16,
    then widened: the fp32 output holds fp16 values)."""
    fn = lambda x, w: ((x.float() @ w.float()) * 64).to(torch.float8_e4m3fn)  # noqa: E731
    x, w = A16, B16
    r = ert.reference(fn)(x, w)
    assert r.expr == "er.matmul(x, w).mul(64.0).cast('float8_e4m3fn')"
    out = fn(x, w)
    over = ((x.float() @ w.float()) * 64).abs() >= 480
    assert over.any()
    sat = bool((out.float()[over].abs() == 448).all())
    assert sat or bool(out.float()[over].isnan().all())
    assert r.overflow == ("saturate" if sat else "nan")
    assert r.covers(out).all()
    assert not r.covers(out, overflow="nan" if sat else "saturate").all()
    back = ert.reference(lambda x, w: (x @ w).half().float())(A, B)
    y = (A @ B).half().float()
    assert back.covers(y).all() and not back.covers(A @ B).all()


def test_norm_captures_through_torch_references():
    """torch's CUDA softmax, log_softmax, layer_norm and rms_norm captured on the H200 (tests/data/norm.npz): the
    traced F.softmax / F.log_softmax / F.layer_norm / F.rms_norm give the hand-written references' classes on every
    output, and cover each (as the C suites find with the hand-written ones)."""
    from conftest import ROOT, arrays
    pytest.importorskip("ml_dtypes")
    z = np.load(os.path.join(ROOT, "tests", "data", "norm.npz"))
    with open(os.path.join(ROOT, "tests", "data", "norm_cases.txt")) as f:
        rows = [ln.split() for ln in f if ln.strip() and not ln.startswith("#")]
    seen = 0
    for cid, op, dt, _ in rows:
        x, y = arrays(z, dt, cid + "__in__x", cid + "__out__y")
        if op in ("softmax", "log_softmax"):
            fn = (lambda x: F.softmax(x, -1)) if op == "softmax" else (lambda x: F.log_softmax(x, -1))
            hand = (er.softmax if op == "softmax" else er.log_softmax)(x, -1)
            inputs = (t(x),)
        elif op == "layernorm":
            w, b = (arrays(z, dt, cid + k)[0] if cid + k in z else None for k in ("__in__weight", "__in__bias"))
            fn = lambda x, *wb: F.layer_norm(x, x.shape[-1:], *wb, eps=1e-5)  # noqa: E731
            hand = er.layer_norm(x, x.shape[-1], w, b, 1e-5)
            inputs = (t(x),) + tuple(t(v) for v in (w, b) if v is not None)
            assert (w is None) == (b is None), cid
        else:
            w = arrays(z, dt, cid + "__in__weight")[0] if cid + "__in__weight" in z else None
            fn = lambda x, *w: F.rms_norm(x, x.shape[-1:], *w, eps=1e-6)  # noqa: E731
            hand = er.rmsnorm(x, w, 1e-6)
            inputs = (t(x),) + (() if w is None else (t(w),))
        res = _same_judgment(fn, inputs, hand, t(y), {})
        assert res.all(), (cid, op, dt)
        seen += 1
    assert seen == len(rows) == 90
