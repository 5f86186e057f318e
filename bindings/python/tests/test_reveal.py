"""exactref.testing.reveal_order: kernels written here in float32 numpy, each adding in a known order, revealed from
their outputs alone (docs/algorithms/reveal.md)."""
import numpy as np
import pytest

import exactref as er
from exactref.testing import reveal_order, family


def f32(v):
    return np.asarray(v, np.float32)


def sequential(x):
    acc = np.zeros(x.shape[0], np.float32)
    for k in range(x.shape[1]):
        acc = f32(acc + x[:, k])
    return acc


def numpy_pairwise(x):
    return np.add.reduce(x, axis=-1, dtype=np.float32)


def balanced(x):
    v = [x[:, k] for k in range(x.shape[1])]
    while len(v) > 1:
        w = [f32(v[i] + v[i + 1]) for i in range(0, len(v) - 1, 2)]
        v = w + [v[-1]] if len(v) % 2 else w
    return v[0]


def halving(x):
    """A balanced tree in numpy's vector operations: the row padded with +0 to a power of two, then halved (adding +0
    is exact, so the tree over the real elements is a balanced one's)."""
    n = 1 << (x.shape[1] - 1).bit_length()
    v = np.zeros((x.shape[0], n), np.float32)
    v[:, :x.shape[1]] = x
    while v.shape[1] > 1:
        v = f32(v[:, 0::2] + v[:, 1::2])
    return v[:, 0]


def cumulative(x):
    """A loop, through numpy's cumulative sum (which adds in order)."""
    return np.cumsum(x, axis=-1, dtype=np.float32)[:, -1]


def triton_like(block, warps):
    """Triton 3.6's tl.sum over one block (orders.md): each of 32 warps threads chains its elements t, t + 32 warps,
    ... (one element per load: n not a multiple of 16), masked ones as +0; a butterfly over each warp's lanes, then
    over the warps. Written from the model, not from exactref's emulation."""
    def kernel(x):
        rows, n = x.shape
        full = np.zeros((rows, block), np.float32)
        full[:, :n] = x
        T = 32 * warps
        part = [None] * T
        for t in range(T):
            acc = full[:, t]
            for r in range(t + T, block, T):
                acc = f32(acc + full[:, r])
            part[t] = acc
        for w in range(warps):
            lanes = part[32 * w:32 * w + 32]
            o = 16
            while o:
                lanes = [f32(lanes[i] + lanes[i + o]) if i < o else lanes[i] for i in range(32)]
                o //= 2
            part[w] = lanes[0]
        tot = part[:warps]
        o = warps // 2
        while o:
            tot = [f32(tot[i] + tot[i + o]) if i < o else tot[i] for i in range(len(tot))]
            o //= 2
        return tot[0]
    return kernel


def test_sequential_is_named_and_emulated_bit_for_bit():
    o = reveal_order(sequential, "sum", n=100)
    assert o.standard == {"standard": "sequential"} and o.fixed and o.depth == 99 and o.reason is None
    x = family("wide", (16, 100), "float32", seed=9)
    assert np.array_equal(er.sum(x).emulate(**o.standard), sequential(x))


@pytest.mark.parametrize("n, name", [(7, "sequential"), (128, "pairwise"), (1000, "pairwise")])
def test_numpy_pairwise_is_named(n, name):
    o = reveal_order(numpy_pairwise, "sum", n=n)  # below 8 elements numpy's pairwise sum is a loop
    assert o.standard == {"standard": name} and o.fixed, str(o)


def test_triton_block_sum_with_a_masked_tail():
    o = reveal_order(triton_like(256, 2), "sum", n=200)
    assert o.standard == {"standard": "triton:256", "warps": 2} and o.fixed, str(o)
    # another warp count is another tree
    o4 = reveal_order(triton_like(256, 4), "sum", n=200)
    assert o4.standard == {"standard": "triton:256", "warps": 4}, str(o4)


def test_balanced_tree_is_written_out_and_catches_what_any_order_lets_through():
    n = 4096
    o = reveal_order(halving, "sum", n=n)
    pairs = "(0,1)"
    for s in range(1, 12):
        pairs = "(%s*2+%d)" % (pairs, 2 ** s)
    assert o.standard == {"standard": "tree:" + pairs} and o.fixed and o.depth == 12 and o.reason is None, str(o)
    assert o.leaf_depths.min() == 12
    x = np.abs(family("normal", (32, n), "float32", seed=4))
    good = halving(x)
    assert np.array_equal(er.sum(x).emulate(**o.standard), good)
    bad = f32(good * (1 + 2.0 ** -17))  # 2^-17 relative: inside any order's set and depth 12's, outside the tree's
    assert er.sum(x).covers(bad).all()
    assert er.sum(x).covers(good, standard="any_order", depth=o.depth).all()
    assert not er.sum(x).covers(bad, standard="any_order", depth=o.depth).all()
    assert not er.sum(x).covers(bad, **o.standard).all()
    assert not er.sum(x).covers(np.nextafter(good, np.float32(np.inf)), **o.standard).all()


def random_tree(n, seed):
    """A binary tree over n elements exactref names no family for: random splits, operands in random order, the
    elements permuted; as nested pairs."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)

    def build(lo, hi):
        if hi - lo == 1:
            return int(perm[lo])
        k = int(rng.integers(lo + 1, hi))
        a, b = build(lo, k), build(k, hi)
        return (a, b) if rng.integers(2) else (b, a)
    return build(0, n)


def tree_kernel(tree, product=None):
    """The sum of each row in that tree in float32 (a matmul's with B: each product rounded, then added)."""
    def value(node, x):
        if isinstance(node, int):
            return x[:, node]
        return f32(value(node[0], x) + value(node[1], x))

    if product is None:
        return lambda x: value(tree, x)
    return lambda A, B: np.stack([value(tree, f32(A * B[:, j])) for j in range(B.shape[1])], axis=1)


def test_a_tree_no_family_names_is_written_out_and_emulated_bit_for_bit():
    n = 300
    tree = random_tree(n, 5)
    o = reveal_order(tree_kernel(tree), "sum", n=n)
    assert o.fixed and o.standard["standard"].startswith("tree:") and o.reason is None, str(o)
    x = family("wide", (64, n), "float32", seed=11)
    want = tree_kernel(tree)(x)
    assert np.array_equal(er.sum(x).emulate(**o.standard).view(np.uint32), want.view(np.uint32))
    assert er.sum(x).covers(want, **o.standard).all()
    # another tree over the same elements, and an element dropped: each caught where any_order lets it pass
    other = tree_kernel(random_tree(n, 6))(x)
    assert er.sum(x).covers(other).all() and not er.sum(x).covers(other, **o.standard).all()
    dropped = tree_kernel(tree)(np.where(np.arange(n) == 7, np.float32(0), x))
    assert not er.sum(x).covers(dropped, **o.standard).all()
    # a matmul kernel adding its rounded products in a tree: the tree and fma=never
    om = reveal_order(tree_kernel(random_tree(40, 7), product=True), "matmul", n=40)
    assert om.fixed and om.standard["standard"].startswith("tree:") and om.standard["fma"] == "never", str(om)


def test_small_tree_is_shown():
    o = reveal_order(balanced, "sum", n=10)
    assert o.tree == ((((0, 1), (2, 3)), ((4, 5), (6, 7))), (8, 9))
    assert list(o.leaf_depths) == [4] * 8 + [2, 2]


def test_matmul_order_and_fusion():
    def seq_mm(A, B):
        acc = np.zeros((A.shape[0], B.shape[1]), np.float32)
        for k in range(A.shape[1]):
            acc = f32(acc + f32(A[:, k:k + 1] * B[k:k + 1, :]))
        return acc
    o = reveal_order(seq_mm, "matmul", n=64)
    assert o.standard == {"standard": "sequential", "fma": "never"} and o.fixed, str(o)


@pytest.mark.parametrize("kernel, words", [
    (lambda x: sequential(x[:, :-1]), "drop or repeat an element"),
    (lambda x: sequential(np.take_along_axis(x, np.argsort(np.abs(x), axis=-1), -1)), "not one tree"),
    (lambda x: f32(x.astype(np.float64).sum(-1)), 'accumulate="float64"'),
])
def test_what_is_no_tree_is_reported_never_guessed(kernel, words):
    o = reveal_order(kernel, "sum", n=50)
    assert o.standard == {"standard": "any_order"} and o.depth is None and not o.fixed
    assert words in o.reason, o.reason


def test_a_kernel_adding_in_double():
    o = reveal_order(lambda x: f32(x.astype(np.float64).sum(-1)), "sum", n=50, accumulate="float64")
    assert o.depth is not None, str(o)


def test_arguments_checked_before_any_call():
    calls = []

    def k(x):
        calls.append(1)
        return sequential(x)
    for bad, exc in [(dict(op="mean", n=8), ValueError), (dict(n=8.0), TypeError), (dict(n=1), ValueError),
                     (dict(n=8, accumulate="float16"), ValueError), (dict(n=8, ncols=0), ValueError),
                     (dict(n=8, max_elements=2 ** 40), ValueError),
                     (dict(n=8, rows=0), ValueError), (dict(n=8, rows=2.5), TypeError)]:
        with pytest.raises(exc):
            reveal_order(k, **bad)
    with pytest.raises(TypeError):
        reveal_order(None, n=8)
    assert not calls
    with pytest.raises(er.ExactrefError, match="float16 cannot hold"):
        reveal_order(k, n=1 << 15, dtype="float16")
    assert not calls


def test_wrong_shape_is_an_error():
    with pytest.raises(er.ExactrefError, match="returned shape"):
        reveal_order(lambda x: x, "sum", n=8)


def test_check_reveals_each_shape(tmp_path):
    rec = er.testing.check(halving, "sum", standard="reveal", record=False)
    assert rec.passed, str(rec)
    by_shape = {tuple(c["shape"]): c for c in rec.cases}
    # a balanced tree of 1024, then element 1024 (the padding's +0 additions are exact): written out
    pairs = "(0,1)"
    for s in range(1, 9):
        pairs = "(%s*2+%d)" % (pairs, 2 ** s)
    tree = "tree:(%s*2+512,1024)" % pairs
    assert by_shape[(3, 1025)]["standard"] == {"standard": tree}
    assert by_shape[(2, 3)]["standard"] == {"standard": "sequential"}  # ((0, 1), 2) is a loop's tree
    assert "standard={'standard': '%s'}" % tree in by_shape[(3, 1025)]["reproduce"]


def test_check_reveal_sees_an_order_chosen_by_shape():
    def by_rows(x):  # a loop for few rows, a balanced tree for many (as kernels that pick a config by shape)
        return cumulative(x) if x.shape[0] < 4 else halving(x)
    rec = er.testing.check(by_rows, "sum", standard="reveal", record=False)
    assert rec.passed, str(rec)
    by_shape = {tuple(c["shape"]): c for c in rec.cases}
    assert by_shape[(3, 1025)]["standard"] == {"standard": "sequential"}, by_shape[(3, 1025)]["revealed"]
    assert by_shape[(17, 33)]["standard"] == {"standard": "tree:(((((0,1)*2+2)*2+4)*2+8)*2+16,32)"}
    # a few long rows would take n log2(n) / (2 rows) calls: past 2000 the case is checked under any_order
    assert by_shape[(5, 4097)]["standard"] == {"standard": "any_order"}
    assert "max_calls=2000" in by_shape[(5, 4097)]["revealed"]


def test_check_reveal_refuses_other_ops():
    with pytest.raises(ValueError, match="'sum', 'matmul', 'layer_norm', 'softmax', 'log_softmax', 'rmsnorm' kernels; "
                                         "op 'exp' is not one"):
        er.testing.check(balanced, "exp", standard="reveal", record=False)


# exactref.torch.standard_for: a torch function's order, revealed where it runs (the CPU here)

def _torch():
    return pytest.importorskip("torch")


def test_standard_for_a_known_tree():
    """Adjacent pairs halved in torch ops: a balanced tree of depth 6 at n = 64, with keepdim undone, at the
    example's own rows; its set holds the function's outputs on fresh rows."""
    torch = _torch()
    import exactref.torch as ert

    def adjacent(x):
        while x.shape[-1] > 1:
            x = x[:, 0::2] + x[:, 1::2]
        return x

    o = ert.standard_for(adjacent, torch.zeros(31, 64))
    assert o.op == "sum" and o.rows == 31 and o.depth == 6 and o.fixed
    assert o.standard == {"standard": "tree:((((((0,1)*2+2)*2+4)*2+8)*2+16)*2+32)"}
    assert set(o.leaf_depths.tolist()) == {6}
    X = family("normal", (31, 64), "float32", seed=3)
    want = adjacent(torch.from_numpy(X))[:, 0].numpy()
    assert er.sum(X).covers(want, **o.standard).all()
    assert np.array_equal(er.sum(X).emulate(**o.standard), want)


@pytest.mark.parametrize("compiled", [False, True])
def test_standard_for_torch_sum(compiled):
    """torch's own row sum, eager and torch.compile'd (Inductor's C++ on the CPU): an order is revealed at the
    example's shape and the function's outputs on random rows lie in its set."""
    torch = _torch()
    import exactref.torch as ert
    fn = lambda x: x.sum(-1)  # noqa: E731
    if compiled:
        try:
            fn = torch.compile(fn)
            fn(torch.ones(4, 8))
        except Exception as e:  # pragma: no cover - a machine without a C++ compiler for Inductor
            pytest.skip("torch.compile does not run here: %s" % e)
    o = ert.standard_for(fn, torch.zeros(255, 256))
    assert o.rows == 255 and o.depth is not None and o.calls > 0, str(o)
    for seed in range(3):
        X = family("wide", (255, 256), "float32", seed=seed)
        assert er.sum(X).covers(fn(torch.from_numpy(X)).numpy(), **o.standard).all()


def test_standard_for_matmul():
    """torch.matmul on the CPU: the order found holds its outputs on random operands, and where it is fixed,
    exactref's emulation is the product bit for bit."""
    torch = _torch()
    import exactref.torch as ert
    o = ert.standard_for(torch.matmul, torch.zeros(63, 64), torch.zeros(64, 16))
    assert o.op == "matmul" and o.n == 64 and o.rows == 63
    A = family("normal", (63, 64), "float32", seed=1)
    B = family("normal", (64, 16), "float32", seed=2)
    got = torch.matmul(torch.from_numpy(A), torch.from_numpy(B)).numpy()
    assert er.matmul(A, B).covers(got, **o.standard).all()
    if o.fixed:
        assert np.array_equal(er.matmul(A, B).emulate(**o.standard).view(np.uint32), got.view(np.uint32))


def test_standard_for_refuses_before_any_call():
    torch = _torch()
    import exactref.torch as ert
    calls = []

    def fn(*a):
        calls.append(1)
        return a[0].sum(-1)
    for args, err in (((np.zeros((4, 8), np.float32),), TypeError),
                      ((torch.zeros(2, 4, 8),), ValueError),
                      ((torch.zeros(4, 8, dtype=torch.int32),), ValueError),
                      ((torch.zeros(4, 1),), ValueError),
                      ((torch.zeros(4, 8), torch.zeros(7, 2)), ValueError),
                      ((torch.zeros(4, 8), torch.zeros(8, 2, dtype=torch.float16)), ValueError),
                      ((torch.zeros(4, 8),) * 3, ValueError)):
        with pytest.raises(err):
            ert.standard_for(fn, *args)
    with pytest.raises(TypeError):
        ert.standard_for(None, torch.zeros(4, 8))
    assert not calls


def test_an_output_format_too_narrow_for_the_counts_is_named():
    """A kernel that adds in float32 and stores float16 (torch's fp16 sum on CUDA): its answers at n = 4096 reach
    4094 units, which float16 does not hold; the reason says so, and at n = 1024 the order is revealed."""
    def stored_half(x):
        with np.errstate(over="ignore"):  # the wide family's sums pass float16's range, as a kernel's would
            return balanced(x).astype(np.float16)
    o = reveal_order(stored_half, "sum", n=4096, rows=63)
    assert o.depth is None and o.standard == {"standard": "any_order"}
    assert "float16" in o.reason and "4094" in o.reason and o.calls == 1, o.reason
    o = reveal_order(stored_half, "sum", n=1024, rows=63)
    assert o.depth == 10, str(o)


# layer_norm: the tree of its mean's sum, read from its outputs

def two_pass_layer_norm(x, n_minus_1=False, stats=False):
    """A two-pass layer_norm in float32 whose sums are `halving`'s balanced tree: the mean, then the variance of the
    centred row (over n, or n - 1 as a planted bug); weight 1, bias 0, eps 1e-5."""
    n = x.shape[1]
    mean = f32(halving(x) / f32(n))
    d = f32(x - mean[:, None])
    var = f32(halving(f32(d * d)) / f32(n - 1 if n_minus_1 else n))
    rstd = f32(f32(1) / np.sqrt(f32(var + f32(1e-5))))
    y = f32(d * rstd[:, None])
    return (y, mean, rstd) if stats else y


def welford_layer_norm(x):
    """The same normalisation with Welford's running mean (one update per element, in order)."""
    m = np.zeros(x.shape[0], np.float32)
    s = np.zeros(x.shape[0], np.float32)
    for k in range(x.shape[1]):
        d = f32(x[:, k] - m)
        m = f32(m + d / f32(k + 1))
        s = f32(s + d * f32(x[:, k] - m))
    rstd = f32(f32(1) / np.sqrt(f32(s / f32(x.shape[1]) + f32(1e-5))))
    return f32(f32(x - m[:, None]) * rstd[:, None])


@pytest.mark.parametrize("stats", [False, True])
def test_layer_norm_mean_tree_catches_the_unbiased_variance(stats):
    """n = 4096: the variance over n - 1 passes the default standard; the depth revealed from the kernel's outputs
    (y alone, or its mean) catches it, and the correct kernel passes under it."""
    n = 4096
    o = reveal_order(lambda x: two_pass_layer_norm(x, stats=stats), "layer_norm", n=n)
    assert o.standard == {"standard": "any_order", "depth": 12} and o.reason is None, str(o)
    x = family("normal", (16, n), "float32", seed=3)
    ref = er.layer_norm(x, n)
    good, bad = two_pass_layer_norm(x), two_pass_layer_norm(x, n_minus_1=True)
    assert ref.covers(good).all() and ref.covers(bad).all()  # the default set is too wide to see the bug
    assert ref.covers(good, **o.standard).all()
    assert not ref.covers(bad, **o.standard).all()


def test_layer_norm_welford_mean_is_not_revealed():
    o = reveal_order(welford_layer_norm, "layer_norm", n=256)
    assert o.standard == {"standard": "any_order"} and o.depth is None
    assert "Welford" in o.reason, o.reason


def test_check_reveals_layer_norm():
    """check(standard="reveal") on layer_norm kernels: the correct two-pass kernel passes every case; its variance
    over n - 1 fails cases at n of 129 to 2049 that the default standard passes (a few long rows are left to
    any_order: past max_calls)."""
    good = er.testing.check(lambda x: two_pass_layer_norm(x, stats=True), "layer_norm", standard="reveal",
                            record=False)
    assert good.passed, str(good)
    bug = lambda x: two_pass_layer_norm(x, n_minus_1=True, stats=True)  # noqa: E731
    with np.errstate(divide="ignore", invalid="ignore"):
        rev = er.testing.check(bug, "layer_norm", standard="reveal", record=False)
        dflt = er.testing.check(bug, "layer_norm", record=False)
    fr = {(tuple(c["shape"]), c["seed"]) for c in rev.failed()}
    fd = {(tuple(c["shape"]), c["seed"]) for c in dflt.failed()}
    assert fd < fr, (sorted(fr - fd), sorted(fd - fr))
    assert all(1 < s[1] <= 2049 for s, _ in fr - fd)


def test_standard_for_layer_norm():
    """A two-pass layer_norm in torch ops (halving sums): depth 6 at n = 64, from its mean; torch's own F.layer_norm
    on the CPU (a Welford mean) not revealed."""
    torch = _torch()
    import exactref.torch as ert

    def halve(t):
        while t.shape[-1] > 1:
            t = t[:, 0::2] + t[:, 1::2]
        return t[:, 0]

    def two_pass(x, nm1=False):
        n = x.shape[1]
        mean = halve(x) / n
        d = x - mean[:, None]
        rstd = torch.rsqrt(halve(d * d) / (n - 1 if nm1 else n) + 1e-5)
        return d * rstd[:, None], mean, rstd

    assert two_pass(torch.ones(2, 4))[0].shape == (2, 4)
    o = ert.standard_for(two_pass, torch.zeros(63, 64), op="layer_norm")
    assert o.standard == {"standard": "any_order", "depth": 6} and o.reason is None, str(o)
    w = ert.standard_for(lambda x: torch.nn.functional.layer_norm(x, (x.shape[1],)), torch.zeros(63, 64),
                         op="layer_norm")
    assert w.depth is None and w.standard == {"standard": "any_order"}, str(w)


# softmax, log_softmax and rmsnorm: sums of positive terms, revealed by triplet probes (reveal.md, Lemma V3)

def softmax_kernel(sumf, drop_last=False, out=np.float32):
    """softmax in float32: exp(x - max), its sum by sumf (without the last term: a planted bug), then a division."""
    def kernel(x):
        x = x.astype(np.float32)
        e = np.exp(f32(x - x.max(axis=1, keepdims=True))).astype(np.float32)
        return f32(e / sumf(e[:, :-1] if drop_last else e)[:, None]).astype(out)
    return kernel


def log_softmax_kernel(sumf):
    def kernel(x):
        x = x.astype(np.float32)
        d = f32(x - x.max(axis=1, keepdims=True))
        return f32(d - np.log(sumf(np.exp(d).astype(np.float32))).astype(np.float32)[:, None])
    return kernel


def rmsnorm_kernel(sumf, n_minus_1=False, eps=1e-6, stats=False, accumulate=np.float32):
    """rmsnorm in float32: the sum of squares by sumf over n (or n - 1: a planted bug), eps, 1 / sqrt, a product."""
    def kernel(x):
        x = x.astype(np.float32)
        n = x.shape[1]
        ms = f32(sumf(f32(x * x).astype(accumulate)) / f32(n - 1 if n_minus_1 else n))
        r = f32(f32(1) / np.sqrt(f32(ms + f32(eps))))
        y = f32(x * r[:, None])
        return (y, r) if stats else y
    return kernel


def leaf_depths(tree, n):
    """Each element's number of additions in a tree of nested pairs."""
    d, stack = np.zeros(n, np.int64), [(tree, 0)]
    while stack:
        node, k = stack.pop()
        if isinstance(node, int):
            d[node] = k
        else:
            stack += [(node[0], k + 1), (node[1], k + 1)]
    return d


POSITIVE_KERNELS = {"softmax": softmax_kernel, "log_softmax": log_softmax_kernel,
                    "rmsnorm": lambda s: rmsnorm_kernel(s, stats=True)}


@pytest.mark.parametrize("op", sorted(POSITIVE_KERNELS))
def test_positive_sums_reveal_the_tree(op):
    """Random trees of 3 to 200 elements and Triton's tl.sum model: the triplet probes through the row op give each
    element's depth in the tree its sum adds in, and to 64 elements the tree the +-M probes give through that sum."""
    rng = np.random.default_rng(1)
    for seed in range(6):
        n = int(rng.integers(3, 200)) if seed else 40
        tree = random_tree(n, seed)
        o = reveal_order(POSITIVE_KERNELS[op](tree_kernel(tree)), op, n=n, seed=seed)
        assert o.reason is None and o.standard == {"standard": "any_order", "depth": o.depth}, str(o)
        assert np.array_equal(o.leaf_depths, leaf_depths(tree, n)), (seed, n)
        if n <= 64:
            assert o.tree == reveal_order(tree_kernel(tree), "sum", n=n).tree
    o = reveal_order(POSITIVE_KERNELS[op](triton_like(1024, 4)), op, n=1000)
    assert o.depth == reveal_order(triton_like(1024, 4), "sum", n=1000).depth == 14, str(o)


def test_rmsnorm_sum_tree_catches_the_mean_over_n_minus_1():
    """n = 4096, rows of the `wide` family: rmsnorm over n - 1 passes the default standard and fails under the
    revealed depth; the correct kernel passes under it."""
    n = 4096
    o = reveal_order(rmsnorm_kernel(halving), "rmsnorm", n=n)
    assert o.standard == {"standard": "any_order", "depth": 12} and o.reason is None, str(o)
    x = family("wide", (32, n), "float32", seed=3)
    ref = er.rmsnorm(x)
    good, bad = rmsnorm_kernel(halving)(x), rmsnorm_kernel(halving, n_minus_1=True)(x)
    assert ref.covers(good).all() and ref.covers(bad).all()
    assert ref.covers(good, **o.standard).all() and not ref.covers(bad, **o.standard).all()


def test_a_denominator_short_of_a_term_is_wrong_on_the_probe_rows():
    """softmax without the last term of its sum: the probes stop (a row with the anchor last has no sum), and the
    outputs on those rows fail the default standard: the Order says the kernel is wrong, and check(standard="reveal")
    fails every case the default standard fails and more."""
    bug = softmax_kernel(halving, drop_last=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = reveal_order(bug, "softmax", n=1024)
        assert o.depth is None and o.wrong is not None and not o.wrong.all(), str(o)
        assert "the kernel is wrong" in o.reason, o.reason
        rev = er.testing.check(bug, "softmax", standard="reveal", record=False)
        dflt = er.testing.check(bug, "softmax", record=False)
    fr = {(tuple(c["shape"]), c["seed"]) for c in rev.failed()}
    fd = {(tuple(c["shape"]), c["seed"]) for c in dflt.failed()}
    assert fd < fr, (sorted(fr - fd), sorted(fd - fr))
    good = er.testing.check(softmax_kernel(halving), "softmax", standard="reveal", record=False)
    assert good.passed, str(good)


@pytest.mark.parametrize("kernel, op, kw, words", [
    (softmax_kernel(halving, out=np.float16), "softmax", {}, "float16"),
    (log_softmax_kernel(lambda e: e.astype(np.float64).sum(axis=1)), "log_softmax", {}, 'accumulate="float64"'),
    (softmax_kernel(halving), "softmax", {"accumulate": "float64"}, "does not show a change of one ulp"),
    (softmax_kernel(lambda e: f32(f32(e[:, 0::3].astype(np.float64) + e[:, 1::3] + e[:, 2::3]).sum(axis=1))),
     "softmax", {}, "fit no binary tree"),
])
def test_what_positive_probes_cannot_read_is_reported(kernel, op, kw, words):
    """An output too narrow to show one ulp of the denominator, a kernel adding in double (then probes sized for
    double the output cannot read), and three terms added at once: not revealed, the reason named."""
    o = reveal_order(kernel, op, n=96, **kw)
    assert o.depth is None and o.standard == {"standard": "any_order"} and o.wrong is None, str(o)
    assert words in o.reason, o.reason


def test_standard_for_positive_row_ops():
    """torch's own softmax, log_softmax and rms_norm on the CPU: each revealed (depth), its outputs on random rows
    covered under it."""
    torch = _torch()
    import exactref.torch as ert
    for op, fn in (("softmax", lambda x: torch.softmax(x, -1)), ("log_softmax", lambda x: torch.log_softmax(x, -1)),
                   ("rmsnorm", lambda x: torch.nn.functional.rms_norm(x, (x.shape[1],), eps=1e-6))):
        o = ert.standard_for(fn, torch.zeros(63, 256), op=op)
        assert o.depth is not None and o.reason is None, str(o)
        x = family("normal", (8, 256), "float32", seed=2)
        y = fn(torch.from_numpy(x)).numpy()
        assert getattr(er, op)(x).covers(y, **o.standard).all()


def test_log_softmax_stored_in_bfloat16_is_still_read():
    """-log S near 0 shows one ulp of S in any format (softmax's 1/S near 1 does not): bfloat16 inputs and outputs,
    the sum in float32 by halving, revealed at depth 8 for n = 256; the same softmax is not."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    o = reveal_order(lambda x: log_softmax_kernel(halving)(x.astype(np.float32)).astype(bf16), "log_softmax", n=256,
                     dtype="bfloat16")
    assert o.standard == {"standard": "any_order", "depth": 8} and o.reason is None, str(o)
    s = reveal_order(lambda x: softmax_kernel(halving)(x.astype(np.float32)).astype(bf16), "softmax", n=256,
                     dtype="bfloat16")
    assert s.depth is None and "bfloat16" in s.reason, str(s)
