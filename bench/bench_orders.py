"""Fixed-order standards: er_emulate of a 512 x 512 x 512 fp16 matmul under `sequential fma=never` (fp32), next to
a numpy float32 loop that adds the products in the same order (vectorised over the output) in the same run; and a
written tree (`tree:`, a balanced tree of 4096) on 1024 rows of fp32, emulated and checked, next to numpy's
float32 halving of the same rows and to covers under `any_order depth=12`. Prints `name: X s vs baseline Y s =
Rx`. And reveal_order on row ops of 8192 (exactref.testing; numpy float32 kernels whose sums halve the row): the
time exactref spends beside the kernel's own calls, measured in the same run. Run: make bench."""
import time

import numpy as np

import exactref as er


def main(n=512):
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    B = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    a, b = A.astype(np.float32), B.astype(np.float32)
    t0 = time.perf_counter()
    acc = np.zeros((n, n), np.float32)
    for k in range(n):                      # the baseline: the same order in float32
        acc += np.outer(a[:, k], b[k, :])
    t1 = time.perf_counter()
    ref = er.matmul(A, B)
    t2 = time.perf_counter()
    out = ref.emulate("sequential", compute="float32", fma="never", dtype="float32")
    t3 = time.perf_counter()
    assert np.array_equal(out, acc)
    print("emulate_sequential_%d: %.3f s vs baseline %.3f s = %.1fx  (baseline: numpy float32 loop of the same order; "
          "er_matmul %.3f s more; bit-identical: yes)" % (n, t3 - t2, t1 - t0, (t3 - t2) / (t1 - t0), t2 - t1))
    t4 = time.perf_counter()
    res = ref.covers(out, standard="blocked:32", inner="any")
    t5 = time.perf_counter()
    print("covers_blocked32_inner_any_%d: %.3f s vs baseline %.3f s = %.1fx  (baseline: the same numpy loop; %s)"
          % (n, t5 - t4, t1 - t0, (t5 - t4) / (t1 - t0), "pass" if res.all() else "FAIL"))



def tree(rows=1024, n=4096):
    """A balanced tree of n written out (tree:), emulated and checked on rows of fp32."""
    x = np.random.default_rng(1).standard_normal((rows, n)).astype(np.float32)
    text, s = "(0,1)", 2
    while s < n:
        text, s = "(%s*2+%d)" % (text, s), 2 * s
    std = "tree:" + text
    t0 = time.perf_counter()
    v = x
    while v.shape[1] > 1:                   # the baseline: the same tree, halving in float32
        v = v[:, 0::2] + v[:, 1::2]
    want = v[:, 0]
    t1 = time.perf_counter()
    ref = er.sum(x)
    t2 = time.perf_counter()
    got = ref.emulate(std, dtype="float32")
    t3 = time.perf_counter()
    assert np.array_equal(got, want)
    res = ref.covers(want, standard=std)
    t4 = time.perf_counter()
    rd = ref.covers(want, standard="any_order", depth=12)
    t5 = time.perf_counter()
    base = t1 - t0
    print("emulate_tree_balanced_%dx%d: %.3f s vs baseline %.4f s = %.1fx  (baseline: numpy float32 halving of the "
          "same rows; er_sum %.3f s more; bit-identical: yes)" % (rows, n, t3 - t2, base, (t3 - t2) / base, t2 - t1))
    print("covers_tree_balanced_%dx%d: %.3f s vs covers under any_order depth=12 %.3f s = %.1fx  (%s, %s)"
          % (rows, n, t4 - t3, t5 - t4, (t4 - t3) / (t5 - t4), "pass" if res.all() else "FAIL",
             "pass" if rd.all() else "FAIL"))


def _halve(v):
    while v.shape[1] > 1:
        v = v[:, 0::2] + v[:, 1::2]
    return v[:, 0]


def _row_kernels():
    """softmax, rmsnorm and a two-pass layer_norm in numpy float32, each sum halving the row."""
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / _halve(e)[:, None]

    def rmsnorm(x):
        return x / np.sqrt(_halve(x * x) / np.float32(x.shape[1]) + np.float32(1e-6))[:, None]

    def layer_norm(x):
        d = x - (_halve(x) / np.float32(x.shape[1]))[:, None]
        return d / np.sqrt(_halve(d * d) / np.float32(x.shape[1]) + np.float32(1e-5))[:, None]
    return {"softmax": softmax, "rmsnorm": rmsnorm, "layer_norm": layer_norm}


def reveal(n=8192):
    """reveal_order on each row op at n: the whole call's time less the kernel's calls' time, against the latter."""
    from exactref.testing import reveal_order
    for op, fn in _row_kernels().items():
        spent = [0.0]

        def kernel(x, fn=fn):
            t = time.perf_counter()
            y = fn(x)
            spent[0] += time.perf_counter() - t
            return y
        t0 = time.perf_counter()
        o = reveal_order(kernel, op, n=n)
        total = time.perf_counter() - t0
        print("reveal_%s_%d: exactref %.3f s vs the kernel's calls %.3f s = %.2fx  (depth %s; %d calls of %d rows, "
              "%d probes)" % (op, n, total - spent[0], spent[0], (total - spent[0]) / spent[0], o.depth, o.calls,
                              o.rows, o.probes))


if __name__ == "__main__":
    main()
    tree()
    reveal()
