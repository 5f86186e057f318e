"""Revealing a kernel's summation order from outside (docs/algorithms/reveal.md): exactref.testing.reveal_order.

A probe puts +M on element i, -M on element j and a unit u on every other element, M so large that u and any
count of units vanish against it in the accumulator. Every addition below the lowest common ancestor of i and j
swamps its units into +-M; there the two cancel exactly, and every unit outside that subtree survives. So the
kernel returns (n - L) u, L the number of leaves under the ancestor (Lemma V1). The leaves j that meet a fixed leaf
a at the same L are one sibling subtree of a's path, the subtrees are revealed the same way, one batch of rows per
level of the tree, and every answer is checked against the binary-tree structure it must have.
"""
import numpy as np

from . import _api as er
from . import _check
from . import _ffi
from ._arrays import numpy_dtype
from ._errors import ExactrefError, ExactrefNotImplementedError, ExactrefValueError

#: Row ops whose sum has positive terms only (exps, squares): revealed by triplet probes (reveal.md, Lemma V3).
_POSITIVE_OPS = ("softmax", "log_softmax", "rmsnorm")
_OPS = ("sum", "matmul", "layer_norm") + _POSITIVE_OPS
#: The most elements a tree: standard may have (src/standard/tree.h).
_TREE_MAX = 1 << 18
#: The precision of the accumulator the probes must swamp, by name.
_ACCUMULATORS = {"float32": 24, "float64": 53}


class Order:
    """What reveal_order found. `standard`: the covers() keywords to check the kernel under (a fixed order where the
    probes pinned one down: a family exactref names, else the tree itself as tree:TEXT; else any_order with the
    tree's depth, else any_order alone);
    `fixed`: whether that standard is fully fixed (then emulate() reproduces the kernel); `depth`: the revealed
    tree's depth (None where none was revealed); `tree`: the tree as nested pairs of element indices (n <= 64);
    `leaf_depths`: each element's number of additions; `reason`: why the order was not revealed or not named (None
    when it was); `calls` and `probes`: the kernel calls and probe rows spent; `rows`: the rows of every call;
    `wrong`: where the probes stopped at outputs no correct kernel gives (softmax, log_softmax, and rmsnorm with eps
    stated), the Result of those probe rows under the default standard, which fails; else None."""

    def __init__(self, op, n, dtype):
        self.op, self.n, self.dtype = op, n, dtype
        self.standard = {"standard": "any_order"}
        self.fixed, self.depth, self.tree, self.leaf_depths, self.reason = False, None, None, None, None
        self.wrong = None
        self.family_matches = []
        self.calls = self.probes = self.rows = 0

    def to_dict(self):
        return {"op": self.op, "n": self.n, "rows": self.rows, "dtype": self.dtype, "standard": dict(self.standard),
                "fixed": self.fixed, "depth": self.depth, "reason": self.reason, "calls": self.calls,
                "probes": self.probes, "wrong": self.wrong is not None}

    def __str__(self):
        std = " ".join("%s=%s" % (k, v) for k, v in self.standard.items() if k != "standard")
        head = "%s n=%d %s (%d rows a call): %s%s" % (
            self.op, self.n, self.dtype, self.rows, self.standard["standard"], " " + std if std else "")
        what = "fixed" if self.fixed else ("depth %d" % self.depth if self.depth is not None else "not revealed")
        line = "%s (%s; %d kernel calls, %d probes)" % (head, what, self.calls, self.probes)
        return line if self.reason is None else line + "\n  " + self.reason

    __repr__ = __str__


class _Unrevealed(Exception):
    """The probes contradict every binary tree of round-to-nearest additions: the reason is the message."""


def _finfo(dtype):
    dt = np.dtype(numpy_dtype(dtype))
    if dt.name in ("float16", "float32", "float64"):
        return np.finfo(dt)
    import ml_dtypes  # numpy_dtype has already required it for the other formats
    return ml_dtypes.finfo(dt)


def _units(dtype, n, p_acc):
    """The unit u and the big value M = 2^E for rows of n elements of dtype swamped in a p_acc-bit accumulator:
    n u < 2^(E - p_acc - 2) (Lemma V1), both values of dtype, u as large as the format allows."""
    fi = _finfo(dtype)
    u = 1.0
    need = p_acc + 2 + int(np.ceil(np.log2(n)))  # E - log2(u)
    emax = int(np.log2(float(fi.max)))
    if need > emax:  # the unit goes below 1: down to the least subnormal
        u = 2.0 ** (emax - need)
        if u < float(fi.smallest_subnormal):
            raise ExactrefNotImplementedError(
                "ER_ERR_UNSUPPORTED",
                "exactref: reveal_order: %s cannot hold both a unit and a value that swamps %d of them in a %d-bit "
                "accumulator (n <= %d for this dtype)" % (dtype, n, p_acc,
                                                           2 ** max(0, int(np.log2(float(fi.max) /
                                                                    float(fi.smallest_subnormal))) - p_acc - 2)))
    return u, u * 2.0 ** need


class _Prober:
    """Runs batches of probes (i, j) through the kernel: L(i, j) for each, checked to be a count."""

    def __init__(self, kernel, op, n, dtype, ncols, device, rows, p_acc, order):
        self.kernel, self.op, self.n, self.dtype, self.ncols, self.device = kernel, op, n, dtype, ncols, device
        self.rows = rows
        self.u, self.M = _units(dtype, n, p_acc)
        self.order = order
        self.out_dtype = None
        self.max_calls = None

    def _call(self, X):
        from .testing import _place, _to_host
        if self.max_calls is not None and self.order.calls >= self.max_calls:
            raise _Unrevealed("revealing the order at %d rows of %d takes more than max_calls=%d kernel calls (about "
                              "n log2(n) / (2 rows) for a balanced tree)" % (self.rows, self.n, self.max_calls))
        self.order.calls += 1
        x = _place(X, "contiguous", self.device)
        if self.op == "layer_norm":
            return self._layer_norm_sums(X, self.kernel(x))
        if self.op == "sum":
            out = _to_host(self.kernel(x))
            want = (X.shape[0],)
        else:
            B = _place(np.ones((self.n, self.ncols), numpy_dtype(self.dtype)), "contiguous", self.device)
            out = _to_host(self.kernel(x, B))
            want = (X.shape[0], self.ncols)
        if tuple(out.shape) != want:
            raise ExactrefValueError("ER_ERR_SHAPE", "exactref: reveal_order: the kernel returned shape %s for %s "
                                     "input rows; expected %s" % (tuple(out.shape), X.shape[0], want))
        self.out_dtype = out.dtype
        if out.dtype.kind == "f" or np.dtype(out.dtype).name.startswith(("bfloat", "float8", "float6", "float4")):
            # an answer is (n - L) u with 2 <= L <= n: every one is exact only where the output's precision holds
            # n - 2; a rounded answer could still fit some tree, so none is trusted
            p_out = int(_finfo(np.dtype(out.dtype).name).nmant) + 1
            if self.n - 2 > 2 ** p_out:
                raise _Unrevealed("the kernel's output format (%s, %d bits) holds whole counts of units only up to "
                                  "%d, and the probes' answers reach n - 2 = %d: they could be rounded"
                                  % (np.dtype(out.dtype).name, p_out, 2 ** p_out, self.n - 2))
        v = out.astype(np.float64)
        if self.op == "matmul":
            if not np.array_equal(v, np.repeat(v[:, :1], self.ncols, axis=1), equal_nan=True):
                raise _Unrevealed("the kernel's columns differ on a probe whose columns are all alike: its order "
                                  "depends on the column")
            v = v[:, 0]
        return v

    def _layer_norm_sums(self, X, res):
        """A layer_norm kernel's row sums S = (n - L) u on probe rows (Lemma V1 for its mean's sum), from the mean it
        returns (n mean) or, without one, from y: the unit elements' (u - mean) rstd over +M's (M - mean) rstd is
        L u / (n M) up to a few roundings. An answer further than 1/4 from a whole count is not one."""
        from .testing import _to_host
        outs = res if isinstance(res, (tuple, list)) else (res,)
        y = _to_host(outs[0])
        mean = _to_host(outs[1]) if len(outs) > 1 and outs[1] is not None else None
        if tuple(y.shape) != tuple(X.shape) or (mean is not None and mean.size != X.shape[0]):
            raise ExactrefValueError("ER_ERR_SHAPE", "exactref: reveal_order: the layer_norm kernel returned shapes "
                                     "%s%s for input rows of shape %s; expected y of that shape (and a mean per row)"
                                     % (tuple(y.shape), "" if mean is None else " and %s" % (tuple(mean.shape),),
                                        tuple(X.shape)))
        src = y if mean is None else mean
        self.out_dtype = src.dtype
        if np.dtype(src.dtype).name not in ("float32", "float64"):
            raise _Unrevealed("the layer_norm kernel's %s is %s: its rounding could hide a count (reveal_order reads "
                              "a float32 or float64 y, or mean)" % ("y" if mean is None else "mean",
                                                                     np.dtype(src.dtype).name))
        u, M, n = self.u, self.M, self.n
        if n > (1 << (21 if mean is not None else 19)):
            raise _Unrevealed("a layer_norm row of %d: the count is read within 1/4 from %s only up to %s (reveal.md, "
                              "Lemma V2)" % (n, "the mean" if mean is not None else "y", "2^21" if mean is not None
                                             else "2^19"))
        if mean is not None:
            S = mean.reshape(-1).astype(np.float64) * n / u
        elif n < 3:  # +M and -M alone: one tree, and no unit for y to show a count by
            return np.zeros(X.shape[0])
        else:
            big, neg = self.ij  # the rows' +M and -M
            r = np.arange(X.shape[0])
            ref = np.where((big != 0) & (neg != 0), 0, np.where((big != 1) & (neg != 1), 1, 2))  # a unit per row
            yy = np.array(y)
            yy[r, big] = yy[r, neg] = yy[r, ref]  # the row's units alone decide its least and greatest output
            lo, hi = yy.min(axis=1).astype(np.float64), yy.max(axis=1).astype(np.float64)
            if not np.array_equal(lo, hi):
                raise _Unrevealed("the layer_norm kernel's outputs differ between equal elements of a probe row")
            S = n - n * (lo / y[r, big].astype(np.float64)) * (M / u)
        k = np.round(S)
        bad = ~(np.abs(S - k) <= 0.25)
        if bad.any():
            raise _Unrevealed("the layer_norm kernel's %s on a probe row gives a sum %.4g units, not a whole count: "
                              "its mean is not one tree of round-to-nearest additions (a Welford mean, or a sum in "
                              "another accumulator)" % ("mean" if mean is not None else "y", float(S[np.argmax(bad)])))
        return k * u

    def counts(self, pairs):
        """L(i, j) for each pair, in batches of at most self.rows rows."""
        res = np.empty(len(pairs), np.int64)
        for s in range(0, len(pairs), self.rows):
            chunk = pairs[s:s + self.rows]
            # every call has the same rows (the last probe repeated): a kernel may pick its order by shape
            full = chunk + [chunk[-1]] * (self.rows - len(chunk))
            X = np.full((self.rows, self.n), self.u, numpy_dtype(self.dtype))  # u and M are values of the dtype
            r = np.arange(self.rows)
            ii, jj = np.array([p[0] for p in full]), np.array([p[1] for p in full])
            X[r, ii], X[r, jj] = self.M, -self.M
            self.ij = (ii, jj)
            v = (self._call(X) / self.u)[:len(chunk)]
            self.order.probes += len(chunk)
            bad = ~((v == np.round(v)) & (v >= 0) & (v <= self.n - 2))
            if bad.any():
                k = int(np.argmax(bad))
                raise _Unrevealed(
                    "probe (%d, %d): the kernel returned %r, not a count of units times %g: it does not add every "
                    "element once in round-to-nearest additions (it may drop or repeat an element, or add more than "
                    "two terms at once%s)" % (chunk[k][0], chunk[k][1], float(v[k] * self.u), self.u,
                                              "; a layer_norm's mean may be Welford's, no tree of additions"
                                              if self.op == "layer_norm" else ""))
            res[s:s + len(chunk)] = self.n - v.astype(np.int64)
        return res


class _TripletProber:
    """Triplet probes (b; x, y) through a row op whose sum has positive terms only (softmax's and log_softmax's exps,
    rmsnorm's squares): the anchor's term T at b, a unit of about 3/8 of ulp(T) at x and at y, zero elsewhere. The
    row's sum is T + ulp(T) where x and y meet before either meets b, else T (Lemma V3); the anchor's output shows
    which, once calibrated on rows whose sum is known whatever the tree."""

    def __init__(self, kernel, op, n, dtype, device, rows, p_acc, order, rng):
        self.kernel, self.op, self.n, self.dtype, self.device = kernel, op, n, dtype, device
        self.rows, self.p_acc, self.order, self.rng = rows, p_acc, order, rng
        self.max_calls = None
        self.out_dtype = None
        self.lo = self.hi = self.last = None
        ulp1 = 2.0 ** (1 - p_acc)  # the accumulator's spacing above 1
        if op == "rmsnorm":
            # anchors A with A^2 exact and A^2 + 2 ulp(A^2) below the next power of two; 0 for the zero terms
            self.zero = 0.0
            cands = [1.0 + k / 64.0 for k in (0, 21, 37, 53, 11, 29, 45, 61, 5, 17)]
            self.anchors = [(a, self._square_units(a, ulp1)) for a in cands]
        else:
            # exp(0) = 1 at the anchor (it is the row's maximum); exp(-10000) = 0 elsewhere
            self.zero = float(np.array(-1e4, numpy_dtype(dtype)).astype(np.float64))
            cast = lambda v: float(np.array(v, numpy_dtype(dtype)).astype(np.float64))  # noqa: E731
            unit, double = cast(np.log(0.375 * ulp1)), cast(np.log(0.75 * ulp1))
            self.anchors = [(0.0, (unit, double, np.exp(unit) / ulp1, np.exp(double) / ulp1))]
        self.anchors = [(a, u) for a, u in self.anchors
                        if 0.3 <= u[2] <= 0.45 and 0.6 <= u[3] <= 0.9]  # Lemma V3's margins, after the cast
        self.anchor = self.unit = None

    def _square_units(self, a, ulp1):
        """The unit and double unit for anchor a of rmsnorm: x with x^2 about 3/8 and 3/4 of ulp(a^2), in the input
        format, and their squares in ulps of a^2."""
        ulp = ulp1 * 2.0 ** np.floor(np.log2(a * a))
        cast = lambda v: float(np.array(v, numpy_dtype(self.dtype)).astype(np.float64))  # noqa: E731
        u, d = cast(np.sqrt(0.375 * ulp)), cast(np.sqrt(0.75 * ulp))
        return u, d, u * u / ulp, d * d / ulp

    def _call(self, X, anchors):
        """The kernel's output at each row's anchor."""
        from .testing import _place, _to_host
        if self.max_calls is not None and self.order.calls >= self.max_calls:
            raise _Unrevealed("revealing the order at %d rows of %d takes more than max_calls=%d kernel calls"
                              % (self.rows, self.n, self.max_calls))
        self.order.calls += 1
        res = self.kernel(_place(X, "contiguous", self.device))
        y = _to_host(res[0] if isinstance(res, (tuple, list)) else res)
        if tuple(y.shape) != X.shape:
            raise ExactrefValueError("ER_ERR_SHAPE", "exactref: reveal_order: the %s kernel returned shape %s for "
                                     "input rows of shape %s; expected y of that shape"
                                     % (self.op, tuple(y.shape), X.shape))
        self.out_dtype = y.dtype
        self.last = (X, y)
        return np.asarray(y[np.arange(X.shape[0]), anchors], np.float64)

    def _rows(self, rows):
        """Runs rows given as (anchor, [(index, value), ...]), in calls of exactly self.rows rows (the last row
        repeated: a kernel may pick its order by shape); the anchor's output of each."""
        out = np.empty(len(rows))
        dt = numpy_dtype(self.dtype)
        for s in range(0, len(rows), self.rows):
            chunk = rows[s:s + self.rows]
            full = chunk + [chunk[-1]] * (self.rows - len(chunk))
            X = np.full((self.rows, self.n), self.zero, dt)  # every value already one of dt's
            b = np.array([r[0] for r in full])
            X[np.arange(self.rows), b] = self.anchor
            ii = [i for i, (_, extra) in enumerate(full) for _ in extra]
            if ii:
                kk, vv = zip(*[kv for _, extra in full for kv in extra])
                X[ii, list(kk)] = np.array(vv).astype(dt)
            out[s:s + len(chunk)] = self._call(X, b)[:len(chunk)]
        return out

    def calibrate(self):
        """Picks an anchor whose output tells the row sum T from T + ulp(T): rows of the anchor alone (sum T), with
        one unit (sum T: the unit is swamped in any tree) and with one double unit (sum T + ulp(T) in any tree), at
        four places; the same output at every place, alone and with a unit, another with the double unit."""
        if not self.anchors:
            raise _Unrevealed("%s cannot hold units small enough for the probes in a %d-bit accumulator"
                              % (self.dtype, self.p_acc))
        places = sorted({0, self.n - 1, self.n // 2, int(self.rng.integers(self.n))})
        rows = []
        for a, (unit, double, _, _) in self.anchors:
            for b in places:
                k = (b + 1 + int(self.rng.integers(self.n - 1))) % self.n
                rows += [(b, []), (b, [(k, unit)]), (b, [(k, double)])]
        for i, (a, (unit, double, _, _)) in enumerate(self.anchors):
            self.anchor = a
            got = self._rows(rows[3 * len(places) * i:3 * len(places) * (i + 1)]).reshape(len(places), 3)
            if not (got == got[0]).all():
                raise _Unrevealed("the kernel's output at the anchor differs between rows that differ only in where "
                                  "the anchor is (%s)" % ", ".join("%.9g" % v for v in got[:, 0]))
            if got[0, 0] == got[0, 1] and got[0, 0] != got[0, 2]:
                self.lo, self.hi, self.unit = got[0, 0], got[0, 2], unit
                return
            if got[0, 0] != got[0, 1]:
                raise _Unrevealed("one term of 3/8 of an ulp changed the %s kernel's output: its sum is not swamped "
                                  "as a %d-bit accumulator's would be (pass accumulate=\"float64\" for a kernel "
                                  "that adds in double)" % (self.op, self.p_acc))
        raise _Unrevealed("the %s kernel's output (%s) does not show a change of one ulp in its %s: its %s cannot "
                          "tell the probes' two answers apart" % (
                              self.op, np.dtype(self.out_dtype).name,
                              "sum of squares" if self.op == "rmsnorm" else "denominator",
                              "precision" if self.op != "rmsnorm" else "rounding of the mean and rsqrt"))

    def bits(self, triples):
        """For each (b, x, y): whether x and y meet before either meets b."""
        if len(triples) == 0:
            return np.zeros(0, bool)
        v = self._rows([(b, [(x, self.unit), (y, self.unit)]) for b, x, y in triples])
        self.order.probes += len(triples)
        bad = (v != self.lo) & (v != self.hi)
        if bad.any():
            k = int(np.argmax(bad))
            raise _Unrevealed("probe (%d; %d, %d): the kernel's output at the anchor is %.9g, neither %.9g (a sum of "
                              "the anchor's term) nor %.9g (one ulp more): its sum is not one tree of round-to-nearest "
                              "additions" % (triples[k] + (v[k], self.lo, self.hi)))
        return v == self.hi


def _place_group(g, gbase, depth, built, nxt):
    """A sibling group g of a task's chain, its root at depth gbase: a leaf gets its depth; a subtree becomes a task
    of the next level, its chain filled into the list appended to built."""
    if len(g) == 1:
        depth[int(g[0])] = gbase
        built.append(int(g[0]))
    else:
        child = []
        built.append(child)
        nxt.append((g, gbase, child))


def _reveal_tree_triplets(prober, n, rng):
    """The binary tree triplet probes show, in _reveal_tree's form (leaf depths, None, the tasks' chains). A task is
    a subtree and its first leaf a; its other leaves fall into groups, the sibling subtrees that meet a's path one
    after another, sorted by a three-way quicksort: against a pivot p, k is in p's group when k and p meet before
    either meets a (probe (a; k, p)) and in a group met earlier when a and k meet before either meets p (probe
    (p; a, k)); all of a level's tasks and buckets go in one batch a round. Raises _Unrevealed where the answers fit
    no binary tree."""
    depth = np.zeros(n, np.int64)
    tasks = [(np.arange(n), 0, None)]
    root = []
    path = [[] for _ in range(n)]  # per leaf: (task id, place) down the tasks; place 0 the task's first leaf
    uid = 0
    while tasks:
        asked = []  # (triple, answer) of this level, for the sample asked again
        # each task's buckets in the order they meet its first leaf's path: (leaves, resolved as one group)
        buckets = [[(t[0][1:], False)] if len(t[0]) > 1 else [] for t in tasks]
        while any(not done for bs in buckets for _, done in bs):
            trip, work = [], []
            for ti, bs in enumerate(buckets):
                a = int(tasks[ti][0][0])
                for bi, (leaves, done) in enumerate(bs):
                    if done:
                        continue
                    if len(leaves) == 1:
                        bs[bi] = (leaves, True)
                        continue
                    p = int(leaves[int(rng.integers(len(leaves)))])
                    others = leaves[leaves != p]
                    work.append((ti, bi, p, others, len(trip)))
                    trip += [(a, int(k), p) for k in others] + [(p, a, int(k)) for k in others]
            ans = prober.bits(trip)
            asked += list(zip(trip, ans))
            for ti, bi, p, others, s in reversed(work):  # from the back: a bucket's index stays valid
                m = len(others)
                same, early = ans[s:s + m], ans[s + m:s + 2 * m]
                if (same & early).any():
                    k = int(others[int(np.argmax(same & early))])
                    raise _Unrevealed("element %d is in element %d's group of element %d's subtree and also meets %d "
                                      "before it: the answers fit no binary tree (the kernel adds more than two "
                                      "terms at once, or its order is not one tree)" % (k, p, int(tasks[ti][0][0]), p))
                parts = [(others[early], False), (np.sort(np.concatenate(([p], others[same]))), True),
                         (others[~same & ~early], False)]
                buckets[ti][bi:bi + 1] = [q for q in parts if len(q[0])]
        nxt = []
        for ti, (leaves, base, slot) in enumerate(tasks):
            gs = [g for g, _ in buckets[ti]]
            k, a = len(gs), int(leaves[0])
            depth[a] = base + k
            path[a].append((uid, 0))
            built = []
            for m, g in enumerate(gs):
                for leaf in g:
                    path[int(leaf)].append((uid, m + 1))
                _place_group(g, base + k - m, depth, built, nxt)
            (root if slot is None else slot).append((a, built))
            uid += 1
        tasks = nxt
        if asked:  # a sample of this level's probes again, the two units exchanged and in other rows
            pick = rng.choice(len(asked), size=min(32, len(asked)), replace=False)
            was = np.array([asked[k][1] for k in pick], bool)
            again = prober.bits([(asked[k][0][0], asked[k][0][2], asked[k][0][1]) for k in pick])
            if not np.array_equal(again, was):
                k = pick[int(np.argmax(again != was))]
                raise _Unrevealed("probe %s answered %s and, repeated with its units exchanged in another row, the "
                                  "opposite: the kernel's order changes with the data or the row"
                                  % (asked[k][0], bool(asked[k][1])))
    # the tree, asked about triplets it was not built from: every answer as it predicts
    trip = [tuple(int(v) for v in rng.choice(n, 3, replace=False)) for _ in range(64)] if n >= 3 else []
    want = np.array([_meets_first(path, b, x, y) for b, x, y in trip], bool)
    got = prober.bits(trip)
    if not np.array_equal(got, want):
        k = int(np.argmax(got != want))
        raise _Unrevealed("probe %s answered %s where the tree the other probes show says %s: the order is not one "
                          "tree" % (trip[k], bool(got[k]), bool(want[k])))
    return depth, None, root


def _meets_first(path, b, x, y):
    """Whether, in the tree of the tasks' paths, x and y meet strictly below where x meets b."""
    def node(p, q):  # the node where the leaves of paths p and q meet: (task level, place of the later one)
        lvl = 0
        while p[lvl] == q[lvl]:
            lvl += 1
        return lvl, max(p[lvl][1], q[lvl][1])
    lxy, lxb = node(path[x], path[y]), node(path[x], path[b])
    return lxy[0] > lxb[0] or (lxy[0] == lxb[0] and lxy[1] < lxb[1])


def _reveal_tree(prober, n, rng):
    """The binary tree the probes show: (leaf depths, clusters as a set of (size, hash), children per task for
    building the tree). Raises _Unrevealed where an answer contradicts every binary tree."""
    keys = rng.integers(0, 2 ** 63, n, dtype=np.int64).astype(np.uint64)
    depth = np.zeros(n, np.int64)
    clusters = set()
    tasks = [(np.arange(n), 0, None)]  # (leaves, base depth, slot of the parent's list to fill)
    root = []
    while tasks:
        pairs = [(int(t[0][0]), int(j)) for t in tasks for j in t[0][1:]]
        L = prober.counts(pairs)
        if tasks[0][2] is None and len(pairs) > 1 and (L == 2).all():
            raise _Unrevealed("every pair met in a subtree of 2 elements: no probe's units were swamped, so the kernel "
                              "accumulates wider than the probes assumed (pass accumulate=\"float64\" for a kernel "
                              "that adds in double)")
        # a sample again, with i and j exchanged (so the signs too) and in other rows: the same answers
        if len(pairs):
            pick = rng.choice(len(pairs), size=min(32, len(pairs)), replace=False)[::-1]
            again = prober.counts([(pairs[k][1], pairs[k][0]) for k in pick])
            if not np.array_equal(again, L[pick]):
                k = int(pick[int(np.argmax(again != L[pick]))])
                raise _Unrevealed("probe (%d, %d) answered %d and, repeated with i and j exchanged in another row, %d: "
                                  "the kernel's order changes with the data or the row" % (
                                      pairs[k][0], pairs[k][1], L[k], again[int(np.argmax(again != L[pick]))]))
        nxt, pos = [], 0
        for leaves, base, slot in tasks:
            a, rest = int(leaves[0]), leaves[1:]
            vals = L[pos:pos + len(rest)]
            pos += len(rest)
            order = np.argsort(vals, kind="stable")
            sv, sr = vals[order], rest[order]
            cuts = np.flatnonzero(np.diff(sv)) + 1
            groups = np.split(sr, cuts)
            gvals = [int(sv[0])] + [int(sv[c]) for c in cuts] if len(sv) else []
            size, h = 1, int(keys[a])
            k = len(groups)
            depth[a] = base + k
            built = []
            for m, (g, val) in enumerate(zip(groups, gvals)):
                size += len(g)
                if val != size:
                    raise _Unrevealed(
                        "elements %d and %d meet in a subtree of %d elements, where a binary tree of the other "
                        "answers has %d: the kernel adds more than two terms at once (a tensor-core MMA, a multi-"
                        "operand adder) or its order is not one tree" % (a, int(g[0]), val, size))
                h = (h + int(keys[g].sum(dtype=np.uint64))) % 2 ** 64
                clusters.add((size, h))
                _place_group(np.sort(g), base + k - m, depth, built, nxt)
            if size != len(leaves):
                raise _Unrevealed("the answers for element %d cover %d of the %d elements of its subtree" % (
                    a, size, len(leaves)))
            (root if slot is None else slot).append((a, built))
        tasks = nxt
    return depth, clusters, root


def _build(root):
    """Nested pairs from the tasks' chains: leaf a joined with each sibling subtree in turn."""
    def chain(item):
        a, built = item
        node = a
        for b in built:
            node = (node, chain(b[0]) if isinstance(b, list) else b)
        return node
    return chain(root[0])


def _tree_text(root):
    """The revealed tree as the text of a tree: standard: each task's first element, then its sibling subtrees in
    turn, "(a g1 g2 ...)", the chain ((a + g1) + g2) + ... (built without recursion: a chain's tasks nest deep)."""
    out, stack = [], [root[0]]
    while stack:
        it = stack.pop()
        if isinstance(it, str):
            out.append(it)
        elif isinstance(it, (int, np.integer)):
            out.append(str(int(it)))
        else:
            a, built = it
            if not built:
                out.append(str(a))
                continue
            stack.append(")")
            stack.extend(b[0] if isinstance(b, list) else b for b in reversed(built))
            stack.append(a)
            stack.append("(")
    return " ".join(out)


def _canonical_tree(text):
    """The tree: standard's canonical text for a tree's text (er_standard_format): short for the trees kernels use."""
    return _ffi.rendered(_ffi.lib.er_standard_format, _ffi.standard("tree:" + text, "")).split(" ", 1)[0]


def _same_outputs(op, X, got, std, out_dtype, ncols, rows):
    """Whether std's emulation reproduces the kernel's outputs bit for bit: on 8 rows first, then on every row."""
    try:
        return all(np.array_equal(_emulate(op, X[:k], std, out_dtype, ncols).view(np.uint8), got[:k].view(np.uint8))
                   for k in (min(8, rows), rows))
    except ExactrefError:
        return False


def _random_rows(kernel, op, n, rows, ncols, dtype, device, seed):
    """Rows of the `wide` family and the kernel's outputs on them (against columns of ones for a matmul)."""
    from .testing import _place, _to_host, family
    X = family("normal" if op == "layer_norm" or op in _POSITIVE_OPS else "wide", (rows, n), dtype, seed=seed)
    x = _place(X, "contiguous", device)
    if op == "layer_norm":
        res = kernel(x)
        return X, tuple(_to_host(t) for t in res) if isinstance(res, (tuple, list)) else _to_host(res)
    if op in _POSITIVE_OPS:  # y, the first of the outputs
        res = kernel(x)
        return X, _to_host(res[0] if isinstance(res, (tuple, list)) else res)
    if op == "sum":
        return X, _to_host(kernel(x))
    return X, _to_host(kernel(x, _place(np.ones((n, ncols), X.dtype), "contiguous", device)))


def _covers(op, X, got, standard, ncols, eps=None):
    if op == "layer_norm":  # the outputs the kernel gave: y, or (y, mean, rstd)
        ref = er.layer_norm(X, X.shape[1], **({} if eps is None else {"eps": eps}))
        return ref.covers(tuple(got) + (None,) * (3 - len(got)) if isinstance(got, tuple) else got, **standard)
    if op == "rmsnorm":
        return er.rmsnorm(X, **({} if eps is None else {"eps": eps})).covers(got, **standard)
    if op in _POSITIVE_OPS:
        return getattr(er, op)(X).covers(got, **standard)
    ref = er.sum(X) if op == "sum" else er.matmul(X, np.ones((X.shape[1], ncols), X.dtype))
    return ref.covers(got, **standard)


def _candidates(op, n, dtype):
    """Fully fixed standards exactref can emulate that a kernel of this op and n may follow."""
    c = ["sequential", "pairwise"]
    b = 1
    while b < n:
        b *= 2
    if op == "sum":
        for blk in (b, 2 * b, 4 * b):
            for w in (1, 2, 4, 8, 16, 32):
                if blk >= 32 * w:
                    c.append("triton:%d warps=%d" % (blk, w))
    bb = 2
    while bb < n:
        c.append("blocked:%d" % bb)
        bb *= 2
    return c


def _emulate(op, X, std, out_dtype, ncols):
    """The candidate's output on rows X (a matmul's against columns of ones: exact products, so fma=never stands
    for every fusion)."""
    head, _, opts = std.partition(" ")
    if op == "sum":
        return er.sum(X).emulate(head, dtype=out_dtype, options=opts or None)
    opts = (opts + " fma=never").strip() if head != "pairwise" else opts
    return er.matmul(X, np.ones((X.shape[1], ncols), X.dtype)).emulate(head, dtype=out_dtype, options=opts or None)


def _matmul_fma(order, kernel, A, n, ncols, dtype, device, out_dtype, seed):
    """The probes' products are exact (B is all ones), so they cannot show whether each product is fused into its
    addition: random operands do. Where exactly one of fma=never and fma=always reproduces the kernel, that is the
    standard; else fma stays "either" and the standard is not fully fixed."""
    from .testing import _place, _to_host, family
    B = family("wide", (n, ncols), dtype, seed=seed + 1)
    got = _to_host(kernel(_place(A, "contiguous", device), _place(B, "contiguous", device)))
    order.calls += 1
    ref = er.matmul(A, B)
    same = []
    for fma in ("never", "always"):
        try:
            em = ref.emulate(order.standard["standard"], dtype=out_dtype, options="fma=%s" % fma)
        except ExactrefError:
            continue
        if np.array_equal(em.view(np.uint8), np.ascontiguousarray(got).view(np.uint8)):
            same.append(fma)
    if len(same) == 1:
        order.standard["fma"] = same[0]
    else:
        order.fixed = False
        order.reason = ("the order is revealed; whether each product is fused into its addition is not (%s): "
                        "checked with fma=either" % ("both fma=never and fma=always reproduce the kernel" if same
                                                     else "neither fma=never nor fma=always reproduces the kernel"))


def _row_op_depth(order, X, got, ncols, eps):
    """A row op's standard from its sum's tree: depth D (for layer_norm, D of its mean's tree for both of its sums,
    the variance taken to be added in the mean's tree, as two-pass kernels do). The kernel's outputs on random rows
    are checked under it; where they fail, the depth is kept and the reason says so: a wrong kernel (a variance over
    n - 1, a denominator short of a term) fails there, and so would one whose other numerics the default standard
    does not hold (another eps; for layer_norm, a variance added in a deeper tree than its mean, which the probes
    cannot see)."""
    res = _covers(order.op, X, got, order.standard, ncols, eps)
    if not res.all():
        what = {"layer_norm": "for the mean", "rmsnorm": "for the sum of squares"}.get(order.op, "for the denominator")
        bugs = {"layer_norm": "a variance over n - 1, a wrong mean), or one whose variance is added in a deeper tree "
                              "than its mean, or another eps",
                "rmsnorm": "a mean square over n - 1, eps outside the square root), or one of another eps"}.get(
                    order.op, "a denominator short of a term), or one whose exp the default standard does not "
                              "hold (math=triton)")
        order.reason = ("the probes show a tree of depth %d %s, and the kernel's outputs on random rows lie outside "
                        "that depth's set (%s): a wrong kernel (%s; checked under the depth"
                        % (order.depth, what, repr(res), bugs))
    return order


def reveal_order(kernel, op="sum", n=None, dtype="float32", ncols=16, rows=None, device=None, accumulate="float32",
                 max_elements=1 << 22, seed=0, max_calls=None, eps=None):
    """Reveals the order in which `kernel` adds, from its outputs on probe inputs (docs/algorithms/reveal.md):
    op "sum" (kernel(x) for x of shape (rows, n), the sums along the last dimension) or "matmul" (kernel(A, B) for
    A (rows, n) and B (n, ncols), each output a dot product of length n) or "layer_norm" (kernel(x) returning y, or
    (y, mean, rstd), of each row normalised with weight 1 and bias 0: the tree of its mean's sum, read from the mean
    or from y, gives depth= for both of its sums; a Welford kernel is reported as not revealed) or "softmax",
    "log_softmax", "rmsnorm" (kernel(x) returning y, or a tuple whose first element is y, of the op along each row,
    rmsnorm with weight 1: the tree of its sum of exps or squares, by triplet probes (reveal.md, Lemma V3), gives
    depth=; where the probes stop at outputs outside the default standard's set, Order.wrong holds them). `eps`:
    layer_norm's or rmsnorm's eps for the check of the kernel's outputs on random rows (default exactref's; with
    it, rmsnorm's probe rows are checked too). Returns an Order: its `standard` holds the
    covers() keywords to check this kernel at this n under (a fixed order, where the probes pin the tree down and
    exactref's emulation of it reproduces the kernel bit for bit on random rows: a family exactref names, else the
    revealed tree written out as tree:TEXT; else any_order with the revealed tree's depth; else any_order, with the
    reason). The kernel may take numpy arrays (device None) or
    torch tensors on `device`, always with `rows` rows (default n - 1, at most max_elements / n: a kernel may choose
    its order by shape, so the order found is the order at that shape). `accumulate`: the accumulator the probes
    must swamp ("float32", or "float64" for kernels that add in double). `max_calls`: past that many kernel calls
    the order is reported as not revealed (a shape of few long rows takes many)."""
    if op not in _OPS:
        raise ValueError("exactref: reveal_order: op %r: expected %s" % (op, " or ".join(_OPS)))
    if not callable(kernel):
        raise TypeError("exactref: reveal_order: kernel must be callable, not %s" % type(kernel).__name__)
    n = _check.integer(n, "reveal_order", "n", 2, 1 << 24)
    ncols = _check.integer(ncols, "reveal_order", "ncols", 1, 1 << 16)
    max_elements = _check.integer(max_elements, "reveal_order", "max_elements", 1, 1 << 31)
    seed = _check.integer(seed, "reveal_order", "seed", 0, 2 ** 63 - 1)
    if accumulate not in _ACCUMULATORS:
        raise ValueError("exactref: reveal_order: accumulate %r: expected %s" % (accumulate,
                                                                                 " or ".join(_ACCUMULATORS)))
    dtype = np.dtype(numpy_dtype(dtype)).name
    order = Order(op, n, dtype)
    rows = max(1, min(n - 1, max_elements // n)) if rows is None else _check.integer(rows, "reveal_order", "rows", 1,
                                                                                          1 << 31)
    order.rows = rows
    if eps is not None:
        eps = _check.real(eps, "reveal_order", "eps", lo=0)
    rng = np.random.default_rng(seed)
    if op in _POSITIVE_OPS:
        prober = _TripletProber(kernel, op, n, dtype, device, rows, _ACCUMULATORS[accumulate], order, rng)
    else:
        prober = _Prober(kernel, op, n, dtype, ncols, device, rows, _ACCUMULATORS[accumulate], order)
    prober.max_calls = None if max_calls is None else _check.integer(max_calls, "reveal_order", "max_calls", 1,
                                                                     1 << 62)
    try:
        if op in _POSITIVE_OPS:
            prober.calibrate()
            depth, clusters, root = _reveal_tree_triplets(prober, n, rng)
        else:
            depth, clusters, root = _reveal_tree(prober, n, rng)
    except _Unrevealed as e:
        order.reason = "not revealed: " + str(e) + "; checked under any_order"
        if op in _POSITIVE_OPS and prober.last is not None and (op != "rmsnorm" or eps is not None):
            # the probe rows are inputs like any other: outputs outside the default standard's set are wrong ones
            res = _covers(op, prober.last[0], prober.last[1], {"standard": "any_order"}, ncols, eps)
            if not res.all():
                order.wrong = res
                order.reason += ("; and the kernel is wrong: its outputs on the last call's probe rows lie outside "
                                 "the default standard's set (%s)" % repr(res))
        return order
    order.depth = int(depth.max())
    order.leaf_depths = depth
    order.standard = {"standard": "any_order", "depth": order.depth}
    if n <= 64:
        order.tree = _build(root)
    # a named fixed order: the same outputs on random rows, then the same tree through exactref's own emulation
    X, got = _random_rows(kernel, op, n, rows, ncols, dtype, device, seed)
    order.calls += 1
    if op == "layer_norm" or op in _POSITIVE_OPS:
        return _row_op_depth(order, X, got, ncols, eps)
    out_dtype = np.dtype(got.dtype).name
    got = np.ascontiguousarray(got)
    # the families exactref names first; then the revealed tree itself, written out as a tree: standard
    tree = _canonical_tree(_tree_text(root)) if n <= _TREE_MAX else None
    for std in _candidates(op, n, dtype) + ([tree] if tree else []):
        if not _same_outputs(op, X, got, std, out_dtype, ncols, rows):
            continue
        if std != tree:
            order.family_matches.append(std)
        twin = _Prober(lambda a, *b: _emulate(op, a, std, out_dtype, ncols), op, n, dtype, ncols, None,
                       rows, _ACCUMULATORS[accumulate], Order(op, n, dtype))
        try:
            _, cl2, _ = _reveal_tree(twin, n, np.random.default_rng(seed))
        except _Unrevealed:
            continue
        if cl2 == clusters:
            head, _, opts = std.partition(" ")
            order.standard = {"standard": head}
            for kv in opts.split():
                k, _, v = kv.partition("=")
                order.standard[k] = int(v) if v.isdigit() else v
            order.fixed = True
            if op == "matmul":
                _matmul_fma(order, kernel, X, n, ncols, dtype, device, out_dtype, seed)
            return order
    # the depth's set must hold the kernel's own outputs on the random rows (a kernel that is no such tree, one that
    # compensates its sums or adds more than two terms at once where the probes could not see it, fails here)
    res = _covers(op, X, got, order.standard, ncols)
    if not res.all():
        order.reason = ("not revealed: the probes show a tree of depth %d, but the kernel's outputs on random rows lie "
                        "outside that depth's set (%s): it is not a tree of round-to-nearest additions; checked under "
                        "any_order" % (order.depth, repr(res)))
        order.standard = {"standard": "any_order"}
        order.depth = None
        return order
    others = (", ".join(order.family_matches) + " gave the same outputs but another tree" if order.family_matches
              else "no order exactref names reproduces them")
    if tree:
        order.reason = ("the revealed tree, written out as %s, does not reproduce the kernel's outputs on random rows "
                        "(%s): checked under any_order with its depth"
                        % (tree if len(tree) <= 80 else tree[:77] + "...", others))
    else:
        order.reason = ("the revealed tree has more than the %d elements a tree: standard holds (%s): checked under "
                        "any_order with its depth" % (_TREE_MAX, others))
    return order
