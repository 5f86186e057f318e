"""A torch reference function traced into exactref references (docs/guides/from-a-torch-reference.md).

    import exactref.torch as ert
    ref = lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh").to(torch.float16)
    ert.reference(ref)(x, w, b).covers(kernel(x, w, b)).assert_all()
    ert.assert_close(kernel(x, w, b), ref, x, w, b)

The function is traced with torch's own tracer (make_fx with pre_dispatch=True: ATen ops above autograd, so
F.linear, F.layer_norm and scaled_dot_product_attention stay whole), once per signature (the inputs' shapes, dtypes
and devices), and each ATen op of the trace is mapped to exactref's: the reductions (matmul, sum, softmax,
layer_norm, attention, ...) become references of the values they read, the elementwise ops after a matmul, a sum or
an input become a chain's stages, views are views, and `.to(dtype)` is a storage rounding (a cast stage). An op
exactref has no set for stops the trace with an error naming it and its line in the function: never a fallback to a
tolerance. supported_ops() lists what traces and what each op becomes."""
import inspect
import linecache
import math
import operator
import os
import sys
from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np

try:
    import torch
    from torch.fx.experimental import proxy_tensor as _proxy
    from torch.overrides import TorchFunctionMode
except ImportError:  # pragma: no cover - the message is the point
    raise ImportError("exactref.torch needs torch (pip install torch)") from None

from . import _api, _check
from ._api import Result, Results
from ._reveal import _OPS as _REVEAL_OPS
from ._api import _dtype_name
from ._arrays import numpy_dtype, to_numpy
from ._errors import ExactrefNotImplementedError, ExactrefTypeError, ExactrefValueError

__all__ = ["reference", "assert_close", "standard_for", "supported_ops", "TracedFunction", "TracedReference",
           "UnsupportedOpError"]

_INTERMEDIATES = ("compute", "stored")
# make_fx's keyword for tracing with fake tensors while fn captures real ones (torch 2.x); without it, real tracing
_FAKE_WITH_CAPTURES = "_allow_non_fake_inputs" in inspect.signature(_proxy.make_fx).parameters


class UnsupportedOpError(ExactrefNotImplementedError):
    """An op of the traced function that exactref has no set for (or a composition it does not model): `op` is the
    ATen op's name, `place` the line of the function that called it ("file:line: source"), or None."""

    def __init__(self, op, place, why):
        where = " at %s" % place if place else ""
        super().__init__("ER_ERR_UNSUPPORTED", "exactref.torch: %s%s: %s (exactref.torch.supported_ops() lists what "
                                               "traces)" % (op, where, why))
        self.op = op
        self.place = place


# ---- what traces: the ATen ops (their overload packets) and what each becomes ----

_VIEWS = {  # a bijective rearrangement: a view of a reference's output too
    "aten.view": "a view", "aten.reshape": "a view", "aten._unsafe_view": "a view", "aten.flatten": "a view",
    "aten.unflatten": "a view", "aten.unsqueeze": "a view", "aten.squeeze": "a view", "aten.t": "a view",
    "aten.transpose": "a view", "aten.permute": "a view", "aten.numpy_T": "a view", "aten.mT": "a view",
    "aten.contiguous": "the same values", "aten.clone": "the same values", "aten.alias": "the same values",
    "aten.detach": "the same values", "aten.detach_": "the same values", "aten.lift_fresh_copy": "the same values",
}
_SELECTS = {  # of an input's values only: a reference is checked whole
    "aten.expand": "a broadcast view of an input", "aten.slice": "a slice of an input",
    "aten.select": "an element row of an input", "aten.narrow": "a slice of an input",
}
_CASTS = {
    "aten.to": "a storage rounding to nearest even (a cast stage); exact where it widens",
    "aten._to_copy": "a storage rounding to nearest even (a cast stage); exact where it widens",
    "aten.type_as": "a storage rounding to nearest even (a cast stage); exact where it widens",
}
_REDUCTIONS = {  # references of the values they read (inputs, their views and casts)
    "aten.matmul": "er.matmul(A, B)", "aten.mm": "er.matmul(A, B)", "aten.bmm": "er.matmul(A, B)",
    "aten.linear": "er.matmul(x, w.T), then .add(b): the bias added to the product, one rounding",
    "aten.addmm": "er.matmul(m1, m2).add(bias) (beta = alpha = 1)",
    "aten.baddbmm": "er.matmul(b1, b2).add(input) (beta = alpha = 1)",
    "aten.sum": "er.sum(x, dim) (adjacent dimensions merged; all of them flattened)",
    "aten.mean": "er.mean(x, dim)", "aten.amax": "er.max(x, dim)",
    "aten.softmax": "er.softmax(x, dim)", "aten._softmax": "er.softmax(x, dim)",
    "aten.log_softmax": "er.log_softmax(x, dim)", "aten._log_softmax": "er.log_softmax(x, dim)",
    "aten.layer_norm": "er.layer_norm(x, normalized_shape, weight, bias, eps)",
    "aten.rms_norm": "er.rmsnorm(x, weight, eps) (eps=None: torch's finfo(dtype).eps)",
    "aten.scaled_dot_product_attention": "er.attention(q, k, v, scale, causal, enable_gqa=...) (no attn_mask, "
                                         "dropout_p 0)",
}
_CHAINABLE = ("aten.matmul", "aten.mm", "aten.bmm", "aten.linear", "aten.addmm", "aten.baddbmm", "aten.sum")
_UNARY = {  # torch op -> (chain stage, its keyword arguments)
    "aten.relu": "relu", "aten.gelu": "gelu", "aten.silu": "silu", "aten.sigmoid": "sigmoid", "aten.tanh": "tanh",
    "aten.exp": "exp", "aten.exp2": "exp2", "aten.log": "log", "aten.erf": "erf", "aten.rsqrt": "rsqrt",
}
_BINARY = {
    "aten.add": "a chain's add stage (alpha 1, or a number operand)",
    "aten.sub": "add of the negated operand (negation is exact)",
    "aten.rsub": "the negation, then add",
    "aten.mul": "a chain's mul stage",
    "aten.div": "mul by 1/d for a power-of-two number d (then exact)",
    "aten.neg": "mul by -1 (exact)",
}


def supported_ops() -> Dict[str, str]:
    """The ATen ops (overload packets, as the trace names them) that trace, each with what it becomes in exactref.
    Elementwise ops apply after a matmul, linear, addmm, bmm or sum, or to inputs; the other reductions (mean, amax,
    softmax, layer_norm, rms_norm, attention) end a value: only views and casts may follow them."""
    ops = {}
    for table in (_VIEWS, _SELECTS, _CASTS, _REDUCTIONS, _BINARY):
        ops.update(table)
    for op, stage in _UNARY.items():
        ops[op] = "a chain's %s stage (Reference.%s)" % (stage, stage)
    return dict(sorted(ops.items()))


# ---- values while a trace is read ----

class _Concrete:
    """A tensor whose values are known when the reference is built: an input, a tensor fn captured (a module's
    parameter), or their views and casts. t is None while the trace is only checked. Where t is an exact widening
    (fp16 to fp32, say) of a narrower tensor, `narrow` is that tensor (viewed as t is), `narrow_dtype` its dtype and
    `narrow_expr` its expression: a matmul of widened operands is the matmul of the narrow ones, whose format the
    standard reads (mma:sm90 takes fp16 operands)."""

    def __init__(self, t, expr, narrow=None, narrow_dtype=None, narrow_expr=None):
        self.t = t
        self.expr = expr
        self.narrow = narrow
        self.narrow_dtype = narrow_dtype
        self.narrow_expr = narrow_expr


class _Ref:
    """An exactref reference's output with views after it. ref is None while the trace is only checked; views are the
    (op, args) rearrangements applied to the reference's output, in order; chainable: elementwise stages may follow
    (a matmul, sum or tensor base, or a chain)."""

    def __init__(self, ref, expr, base_shape, chainable, views=(), casts=(), pending=None):
        self.ref = ref
        self.expr = expr
        self.base_shape = tuple(base_shape)
        self.chainable = chainable
        self.views = tuple(views)
        self.casts = tuple(casts)   # the roundings after a value that is not chainable (folded into the output's)
        # a chain's cast not yet made a stage: made one when a stage follows; a last cast to the output's dtype is
        # the output's own rounding, so that covers()'s overflow= applies to it (torch's CPU .to(float8_e4m3fn)
        # saturates, where a cast stage would give e4m3fn's NaN)
        self.pending = pending

    def but(self, **kw):
        v = _Ref(self.ref, self.expr, self.base_shape, self.chainable, self.views, self.casts, self.pending)
        for k, x in kw.items():
            setattr(v, k, x)
        return v


def _packet(target):
    return str(target.overloadpacket) if hasattr(target, "overloadpacket") else getattr(target, "__name__", str(target))


def _bind(node, env):
    """The node's arguments by their schema's names, defaults filled in, each argument's value read from env."""
    def value(a):
        if isinstance(a, torch.fx.Node):
            return env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(value(x) for x in a)
        return a
    schema = node.target._schema
    args, kwargs = list(node.args), dict(node.kwargs)
    bound = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(args) and not arg.kwarg_only:
            bound[arg.name] = value(args[i])
        elif arg.name in kwargs:
            bound[arg.name] = value(kwargs[arg.name])
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
        else:
            bound[arg.name] = None
    return bound


def _narrow(dt):
    """A storage format narrower than the compute formats (float32, float64): rounding into it is a cast stage."""
    return dt.is_floating_point and dt.itemsize < 4


class _Place(TorchFunctionMode):
    """While fn is traced: for each graph node, the line of fn (outside torch and this module) whose torch call
    created it, read from the tracer's graph before and after each call."""

    _SKIP = (os.path.dirname(torch.__file__), os.path.abspath(__file__))

    def __init__(self):
        super().__init__()
        self.places = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        mode = _proxy.get_proxy_mode() if hasattr(_proxy, "get_proxy_mode") else None
        graph = getattr(getattr(mode, "tracer", None), "graph", None)
        before = len(graph.nodes) if graph is not None else None
        out = func(*args, **(kwargs or {}))
        if graph is not None:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith(self._SKIP):
                frame = frame.f_back
            if frame is not None:
                source = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
                place = "%s:%d%s" % (os.path.basename(frame.f_code.co_filename), frame.f_lineno,
                                     ": " + source if source else "")
                new = len(graph.nodes) - before
                for i, node in enumerate(reversed(graph.nodes)):
                    if i >= new:
                        break
                    self.places.setdefault(node, place)
        return out


# ---- the interpreter: one pass checks the trace (no values), each later pass builds the references ----

class _Reader:
    def __init__(self, traced, build, intermediates, ulps):
        self.t = traced
        self.build = build
        self.stored = intermediates == "stored"
        self.ulps = ulps

    def fail(self, node, why):
        raise UnsupportedOpError(_packet(node.target), self.t.places.get(node), why)

    def run(self, inputs):
        env = {}
        ins = iter(zip(inputs, self.t.names))
        for node in self.t.graph.nodes:
            if node.op == "placeholder":
                x, name = next(ins)
                env[node] = _Concrete(x if self.build else None, name) if isinstance(x, torch.Tensor) else x
            elif node.op == "get_attr":
                env[node] = _Concrete(getattr(self.t.gm, node.target) if self.build else None, node.target)
            elif node.op == "call_function":
                env[node] = self.call(node, env)
            elif node.op == "output":
                return self.outputs(node.args[0], env)
        raise ExactrefValueError("ER_ERR_INTERNAL", "exactref.torch: the trace has no output")

    # -- helpers --

    def meta(self, node):
        return node.meta["val"]

    def concrete_op(self, node, env):
        """The node evaluated by torch on known values (views, casts): exact, or the deterministic rounding of a
        cast, as torch computes it."""
        if not self.build:
            return None
        def value(a):
            if isinstance(a, torch.fx.Node):
                v = env[a]
                return v.t if isinstance(v, _Concrete) else v
            if isinstance(a, (list, tuple)):
                return type(a)(value(x) for x in a)
            return a
        return node.target(*value(list(node.args)), **{k: value(v) for k, v in node.kwargs.items()})

    def array(self, v):
        return to_numpy(v.t, v.expr) if self.build else None

    def need_concrete(self, node, v, what):
        if not isinstance(v, _Concrete):
            self.fail(node, "%s of a computed value (%s): exactref's %s takes the values the kernel reads (inputs, "
                            "their views and casts)" % (what, v.expr if isinstance(v, _Ref) else repr(v), what))
        return v

    def make(self, fn):
        return fn() if self.build else None

    def cast_after(self, node, r):
        """intermediates="stored": the op's result rounded to its traced dtype where that is narrower than the
        compute format (a cast stage; for an op that ends a value, a rounding before any later cast)."""
        dt = self.meta(node).dtype
        if not (self.stored and _narrow(dt)):
            return r
        if not r.chainable:
            return r.but(casts=r.casts + (dt,))
        return self.settled(r).but(pending=dt, expr="%s.cast(%r)" % (r.expr, _dtype_name(dt)))

    def settled(self, r):
        """r with its pending cast made a stage."""
        if r.pending is None:
            return r
        name = _dtype_name(r.pending)
        return r.but(ref=self.make(lambda: r.ref.cast(name)), pending=None)

    def as_chain_base(self, node, v):
        """v as a value elementwise stages may follow: a chainable reference, or a known tensor as er.tensor()
        broadcast to the node's shape."""
        if isinstance(v, _Ref):
            if not v.chainable:
                self.fail(node, "an elementwise op after %s: exactref chains elementwise stages after a matmul, "
                                "linear, addmm, bmm, sum or an input, not after this op" % v.expr)
            return self.settled(v)
        shape = tuple(self.meta(node).shape)
        expr = "er.tensor(%s)" % v.expr
        ref = self.make(lambda: _api.tensor(np.broadcast_to(self.array(v), shape) if shape else
                                            self.array(v).reshape(1)))
        return _Ref(ref, expr, shape if shape else (1,), True, views=() if shape else (("0d", (), {}),))

    # -- the ops --

    def call(self, node, env):
        op = _packet(node.target)
        if node.target is operator.getitem:
            self.fail(node, "a tuple's element (an op with several outputs)")
        if op in _VIEWS or op in _SELECTS:
            return self.view(node, op, env)
        if op in _CASTS:
            return self.cast(node, env)
        if op in _REDUCTIONS:
            return self.reduction(node, op, _bind(node, env))
        if op in _UNARY:
            return self.unary(node, op, _bind(node, env))
        if op in _BINARY:
            return self.binary(node, op, _bind(node, env))
        if op.endswith("_") and not op.endswith("__"):
            self.fail(node, "an in-place op: write it out of place (y = y + b for y += b), and exactref traces it")
        self.fail(node, "exactref has no set for this op")

    def view(self, node, op, env):
        src = env[node.args[0]]
        rest = tuple(node.args[1:])
        if isinstance(src, _Concrete):
            if any(isinstance(a, torch.fx.Node) for a in rest) or any(isinstance(a, torch.fx.Node)
                                                                       for a in node.kwargs.values()):
                self.fail(node, "a view whose arguments are tensors")
            narrow = None
            if self.build and src.narrow is not None:
                narrow = node.target(src.narrow, *rest, **node.kwargs)
            return _Concrete(self.concrete_op(node, env), _view_expr(src.expr, op, rest, node.kwargs), narrow,
                             src.narrow_dtype, None if src.narrow_expr is None else
                             _view_expr(src.narrow_expr, op, rest, node.kwargs))
        if op in _SELECTS:
            self.fail(node, "%s of a computed value (%s): exactref checks a reference's whole output"
                      % (_SELECTS[op].replace(" of an input", ""), src.expr))
        return src.but(views=src.views + ((node.target, rest, dict(node.kwargs)),),
                       expr=_view_expr(src.expr, op, rest, node.kwargs))

    def cast(self, node, env):
        src = env[node.args[0]]
        dt = self.meta(node).dtype
        if isinstance(src, _Concrete):
            t = self.concrete_op(node, env)
            expr = "%s.to(%s)" % (src.expr, _dtype_name(dt))
            was = self.meta(node.args[0]).dtype
            if src.narrow_dtype is not None and dt.is_floating_point and dt.itemsize >= was.itemsize:
                return _Concrete(t, expr, src.narrow, src.narrow_dtype, src.narrow_expr)   # wider still
            if was.is_floating_point and _narrow(was) and dt in (torch.float32, torch.float64):
                return _Concrete(t, expr, src.t, was, src.expr)   # an exact widening
            return _Concrete(t, expr)
        if not src.chainable:
            return src.but(casts=src.casts + (dt,))
        if _narrow(dt):   # elementwise: it commutes with the views
            return self.settled(src).but(pending=dt, expr="%s.cast(%r)" % (src.expr, _dtype_name(dt)))
        return src   # a widening: the value is already held in the compute format

    def operands(self, x, y):
        """A matmul's operands: the narrow tensors where both are exact widenings of the same format."""
        if x.narrow_dtype is not None and x.narrow_dtype == y.narrow_dtype:
            return (_Concrete(x.narrow, x.narrow_expr), _Concrete(y.narrow, y.narrow_expr))
        return x, y

    def reduction(self, node, op, a):
        name = op.split(".")[1]
        if op in ("aten.matmul", "aten.mm", "aten.bmm"):
            x, y = self.operands(*(self.need_concrete(node, a[k], name)
                                   for k in ("self", "other" if op == "aten.matmul" else "mat2")))
            r = _Ref(self.make(lambda: _api.matmul(self.array(x), self.array(y))),
                     "er.matmul(%s, %s)" % (x.expr, y.expr), self.meta(node).shape, True)
            return self.cast_after(node, r)
        if op == "aten.linear":
            x, w = self.operands(self.need_concrete(node, a["input"], name),
                                 self.need_concrete(node, a["weight"], name))
            r = _Ref(self.make(lambda: _api.matmul(self.array(x), self.array(w).T)),
                     "er.matmul(%s, %s.T)" % (x.expr, w.expr), self.meta(node).shape, True)
            if a["bias"] is not None:
                b = self.need_concrete(node, a["bias"], "linear's bias")
                r = r.but(ref=self.make(lambda: r.ref.add(self.array(b))), expr="%s.add(%s)" % (r.expr, b.expr))
            return self.cast_after(node, r)
        if op in ("aten.addmm", "aten.baddbmm"):
            if a["beta"] != 1 or a["alpha"] != 1:
                self.fail(node, "beta=%r, alpha=%r: only beta = alpha = 1 (a product plus a bias) traces"
                          % (a["beta"], a["alpha"]))
            m1, m2 = self.operands(*(self.need_concrete(node, a[k], name)
                                     for k in (("mat1", "mat2") if op == "aten.addmm" else ("batch1", "batch2"))))
            b = self.need_concrete(node, a["self"], name + "'s bias")
            return self.cast_after(node, _Ref(
                self.make(lambda: _api.matmul(self.array(m1), self.array(m2)).add(self.array(b))),
                "er.matmul(%s, %s).add(%s)" % (m1.expr, m2.expr, b.expr), self.meta(node).shape, True))
        x = self.need_concrete(node, a.get("self", a.get("input", a.get("query"))), name)
        if op in ("aten.sum", "aten.mean", "aten.amax"):
            return self.along(node, op, x, a)
        if op in ("aten.softmax", "aten._softmax", "aten.log_softmax", "aten._log_softmax"):
            fn = _api.softmax if "log" not in op else _api.log_softmax
            dim = a["dim"]
            return self.cast_after(node, _Ref(self.make(lambda: fn(self.widened(x, a, node), dim)),
                                              "er.%s(%s, %d)" % (fn.__name__, x.expr, dim), self.meta(node).shape,
                                              False))
        if op == "aten.layer_norm":
            ns = tuple(a["normalized_shape"])
            w, b = (None if a[k] is None else self.need_concrete(node, a[k], "layer_norm's " + k)
                    for k in ("weight", "bias"))
            return self.cast_after(node, _Ref(
                self.make(lambda: _api.layer_norm(self.array(x), ns, None if w is None else self.array(w),
                                                  None if b is None else self.array(b), a["eps"])),
                "er.layer_norm(%s, %s, eps=%r)" % (x.expr, ns, a["eps"]), self.meta(node).shape, False))
        if op == "aten.rms_norm":
            return self.rms_norm(node, x, a)
        return self.attention(node, a)

    def widened(self, x, a, node):
        """softmax's input, widened to the dtype= torch was given (exact)."""
        arr = self.array(x)
        dt = a.get("dtype")
        if dt is None and a.get("half_to_float"):
            dt = torch.float32
        return arr if dt is None else to_numpy(x.t.to(dt), x.expr)

    def along(self, node, op, x, a):
        fn = {"aten.sum": _api.sum, "aten.mean": _api.mean, "aten.amax": _api.max}[op]
        shape = tuple(self.meta(node).shape)
        src = tuple(x.t.shape) if self.build else tuple(self.meta(node.args[0]).shape)
        nd = len(src)
        dims = a.get("dim")
        dims = list(range(nd)) if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0) else dims
        dims = sorted(d % nd for d in ([dims] if isinstance(dims, int) else dims)) if nd else []
        if dims and dims != list(range(dims[0], dims[-1] + 1)):
            self.fail(node, "%s over dimensions %s that are not adjacent" % (op.split(".")[1], dims))
        if a.get("dtype") is not None and op != "aten.amax":
            x = _Concrete(x.t.to(a["dtype"]) if self.build else None, "%s.to(%s)" % (x.expr, _dtype_name(a["dtype"])))
        merged = src[:dims[0]] + (int(np.prod([src[d] for d in dims])),) + src[dims[-1] + 1:] if dims else (1,)
        d0 = dims[0] if dims else 0
        base_shape = merged[:d0] + merged[d0 + 1:]

        def build():
            arr = self.array(x).reshape(merged)
            return fn(arr, d0)
        expr = "er.%s(%s, %s)" % (fn.__name__, x.expr, d0 if len(dims) == 1 else "dims %s merged" % dims)
        r = _Ref(self.make(build), expr, base_shape if base_shape else (), op == "aten.sum")
        if tuple(base_shape) != shape:   # keepdim, or a sum to a scalar
            r = r.but(views=(("reshape", (shape,), {}),))
        return self.cast_after(node, r)

    def rms_norm(self, node, x, a):
        ns = tuple(a["normalized_shape"])
        shape = tuple(self.meta(node).shape)
        if len(ns) != 1 or ns[0] != shape[-1]:
            self.fail(node, "normalized_shape %s: exactref's rmsnorm normalises the last dimension alone" % (ns,))
        eps = a["eps"] if a["eps"] is not None else torch.finfo(self.meta(node.args[0]).dtype).eps
        w = None if a["weight"] is None else self.need_concrete(node, a["weight"], "rms_norm's weight")
        return self.cast_after(node, _Ref(
            self.make(lambda: _api.rmsnorm(self.array(x), None if w is None else self.array(w), eps)),
            "er.rmsnorm(%s, eps=%r)" % (x.expr, eps), shape, False))

    def attention(self, node, a):
        q, k, v = (self.need_concrete(node, a[n], "scaled_dot_product_attention") for n in ("query", "key", "value"))
        if a["attn_mask"] is not None:
            self.fail(node, "attn_mask: exactref's attention takes is_causal (top-left), not a mask tensor")
        if a["dropout_p"] != 0:
            self.fail(node, "dropout_p=%r: dropout draws random numbers; trace with dropout_p=0" % a["dropout_p"])
        scale, causal, gqa = a["scale"], bool(a["is_causal"]), bool(a["enable_gqa"])
        return self.cast_after(node, _Ref(
            self.make(lambda: _api.attention(self.array(q), self.array(k), self.array(v), scale=scale, causal=causal,
                                             enable_gqa=gqa)),
            "er.attention(%s, %s, %s, scale=%r, causal=%r%s)" % (q.expr, k.expr, v.expr, scale, causal,
                                                                 ", enable_gqa=True" if gqa else ""),
            self.meta(node).shape, False))

    def unary(self, node, op, a):
        stage = _UNARY[op]
        src = a.get("self")
        r = self.as_chain_base(node, src)
        kw = {}
        if stage == "gelu" and a.get("approximate", "none") == "tanh":
            kw["approximate"] = "tanh"
        if stage != "relu" and self.ulps.get(stage) is not None:
            kw["ulps"] = self.ulps[stage]
        expr = "%s.%s(%s)" % (r.expr, stage, ", ".join("%s=%r" % i for i in kw.items()))
        return self.cast_after(node, r.but(ref=self.make(lambda: getattr(r.ref, stage)(**kw)), expr=expr))

    def scalar(self, node, v, what):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(node, "%s %r: a number or a tensor is expected" % (what, v))
        return float(v)

    def binary(self, node, op, a):
        x, y = a.get("self"), a.get("other")
        if op == "aten.neg":
            y, op = -1.0, "aten.mul"
        if op == "aten.div":
            if a.get("rounding_mode") is not None or isinstance(y, (_Ref, _Concrete)):
                self.fail(node, "division by a tensor: exactref's stages multiply; a kernel multiplying by a "
                                "reciprocal is mul(1/d)")
            d = self.scalar(node, y, "a divisor")
            m, e = math.frexp(d)
            if abs(m) != 0.5:
                self.fail(node, "division by %r, which is not a power of two: RN(x / d) is not RN(x * fl(1/d)); a "
                                "kernel multiplying by the reciprocal is x * (1 / d)" % d)
            y, op = 1.0 / d, "aten.mul"
        if a.get("alpha", 1) != 1:
            self.fail(node, "alpha=%r: alpha * other is another rounding; write the product out" % (a["alpha"],))
        if op == "aten.rsub":
            x, y, op = y, x, "aten.sub"
        kind = "mul" if op == "aten.mul" else "add"
        negate = op == "aten.sub"
        # the chain's base: the reference operand where there is one, else the left operand's values
        if not isinstance(x, (_Ref, _Concrete)):
            x, y = y, x
            if negate:   # c - ref: -(ref) + c
                base = self.negated(node, self.as_chain_base(node, x))
                return self.stage(node, base, "add", y, False)
        elif isinstance(y, _Ref) and isinstance(x, _Concrete):
            if negate:
                return self.stage(node, self.negated(node, self.as_chain_base(node, y)), "add", x, False)
            x, y = y, x
        return self.stage(node, self.as_chain_base(node, x), kind, y, negate)

    def negated(self, node, r):
        return r.but(ref=self.make(lambda: r.ref.mul(-1.0)), expr="%s.mul(-1)" % r.expr)

    def stage(self, node, r, kind, y, negate):
        """r.add(y) or r.mul(y) (y negated first for a subtraction), y a number, known values or a reference."""
        shape = tuple(self.meta(node).shape)
        if shape != tuple(_views_shape(r) if r.views else r.base_shape):
            self.fail(node, "a broadcast of a reference's output to %s" % (shape,))
        if isinstance(y, _Ref):
            other = self.as_chain_base(node, y)
            if other.views != r.views or other.base_shape != r.base_shape:
                self.fail(node, "%s of %s and %s, whose elements are arranged differently" % (kind, r.expr, y.expr))
            if negate:
                other = self.negated(node, other)
            out = r.but(ref=self.make(lambda: getattr(r.ref, kind)(other.ref)),
                        expr="%s.%s(%s)" % (r.expr, kind, other.expr))
        elif isinstance(y, _Concrete):
            def operand():
                arr = self.array(y)
                return self.to_base(r, -arr if negate else arr, shape)
            out = r.but(ref=self.make(lambda: getattr(r.ref, kind)(operand())),
                        expr="%s.%s(%s%s)" % (r.expr, kind, "-" if negate else "", y.expr))
        else:
            c = self.scalar(node, y, "an operand")
            c = -c if negate else c
            out = r.but(ref=self.make(lambda: getattr(r.ref, kind)(c)), expr="%s.%s(%r)" % (r.expr, kind, c))
        return self.cast_after(node, out)

    def to_base(self, r, arr, shape):
        """An operand broadcast to the function's shape, rearranged into the reference's own order."""
        if not r.views:
            return arr
        idx = _index_map(r)
        full = np.empty(int(np.prod(r.base_shape, dtype=np.int64)), arr.dtype)
        full[idx.ravel()] = np.broadcast_to(arr, shape).ravel()
        return full.reshape(r.base_shape)

    def outputs(self, out, env):
        many = isinstance(out, (list, tuple))
        vals = []
        for i, n in enumerate(out if many else [out]):
            v = env[n] if isinstance(n, torch.fx.Node) else n
            meta = n.meta["val"] if isinstance(n, torch.fx.Node) else None
            if not isinstance(v, (_Ref, _Concrete)):
                raise ExactrefTypeError("ER_ERR_INVALID", "exactref.torch: output %d of the function is %r, not a "
                                                          "tensor" % (i, v))
            if isinstance(v, _Concrete):
                arr = self.array(v)
                v = _Ref(self.make(lambda arr=arr: _api.tensor(arr if arr.ndim else arr.reshape(1))),
                         "er.tensor(%s)" % v.expr, tuple(meta.shape) or (1,), True,
                         views=() if meta.dim() else (("reshape", ((),), {}),))
            if v.pending is not None and v.pending != meta.dtype:
                v = self.settled(v)
            for c in v.casts:
                if c.itemsize < meta.dtype.itemsize:
                    raise UnsupportedOpError("aten.to", None, "output %d is rounded to %s, then widened to %s after "
                                                              "%s: the widened output's set would not hold the "
                                                              "rounding" % (i, _dtype_name(c), _dtype_name(meta.dtype),
                                                                            v.expr))
            overflow = None
            if v.pending is not None and meta.dtype == torch.float8_e4m3fn and self.build:
                overflow = _e4m3fn_overflow(self.t.device)
            vals.append(TracedReference(v, meta, overflow) if self.build else None)
        return tuple(vals) if many else vals[0]


def _view_expr(expr, op, args, kwargs):
    """How a view is written in torch: x.T, x.t(), x.reshape(2, 3)."""
    name = op.split(".", 1)[1]
    if name in ("numpy_T", "mT"):
        return "%s.%s" % (expr, "T" if name == "numpy_T" else "mT")
    shown = [", ".join(repr(v) for v in a) if isinstance(a, (list, tuple)) else repr(a) for a in args]
    shown += ["%s=%r" % kv for kv in kwargs.items()]
    return "%s.%s(%s)" % (expr, name.lstrip("_"), ", ".join(shown))


def _views_shape(r):
    t = torch.empty(r.base_shape, device="meta")
    return tuple(_apply_views(r, t).shape)


def _apply_views(r, t):
    for target, args, kwargs in r.views:
        if target == "reshape":
            t = t.reshape(args[0])
        elif target == "0d":
            t = t.reshape(())
        else:
            t = target(t, *args, **kwargs)
    return t


def _index_map(r):
    """For each element of the function's output, its flat index in the reference's output (the views are
    bijective: reshapes and transpositions)."""
    n = int(np.prod(r.base_shape, dtype=np.int64))
    return _apply_views(r, torch.arange(n, dtype=torch.int64).reshape(r.base_shape)).contiguous().numpy()


class TracedReference:
    """One output of a traced function: the exactref reference built from the trace (`reference`), the exactref
    expression it stands for (`expr`), and covers() taking the kernel's output in the function's shape and dtype."""

    def __init__(self, v, meta, overflow=None):
        self.reference = v.ref
        self.expr = v.expr
        self.shape = tuple(meta.shape)
        self.dtype = meta.dtype
        #: the overflow rule of the function's last cast where it is to float8_e4m3fn: torch's own on the inputs'
        #: device ("saturate" in torch 2.15, "nan" where .to() returns NaN beyond 448), covers()'s default then
        self.overflow = overflow
        self._v = v
        self._device_matmul = None
        self._index = None

    def __bool__(self):
        raise TypeError("exactref.torch: a TracedReference has no truth value (it is not a verdict): assert "
                        "ref.covers(out) or ref.covers(out).assert_all()")

    def __repr__(self):
        return "<exactref.torch.TracedReference %s %s: %s>" % (_dtype_name(self.dtype), self.shape, self.expr)

    def _base_output(self, out):
        """The kernel's output rearranged into the reference's own shape and order (the function's views undone)."""
        if isinstance(out, torch.Tensor):
            if out.dtype != self.dtype:
                raise ExactrefValueError("ER_ERR_FORMAT", "exactref.torch: the output is %s but the function returns "
                                                          "%s" % (_dtype_name(out.dtype), _dtype_name(self.dtype)))
            arr = to_numpy(out, "out")
        else:
            arr = to_numpy(out, "out")
            if arr.dtype != numpy_dtype(_dtype_name(self.dtype)):
                raise ExactrefValueError("ER_ERR_FORMAT", "exactref.torch: the output is %s but the function returns "
                                                          "%s" % (arr.dtype, _dtype_name(self.dtype)))
        if tuple(arr.shape) != self.shape:
            raise ExactrefValueError("ER_ERR_SHAPE", "exactref.torch: the output has shape %s but the function "
                                                     "returns %s" % (tuple(arr.shape), self.shape))
        v = self._v
        if not v.views:
            return arr
        if self._index is None:    # once: a check repeated on new outputs rearranges them the same way
            self._index = _index_map(v).ravel()
        idx = self._index
        base = np.empty(idx.size, arr.dtype)
        base[idx] = arr.ravel()
        return base.reshape(self.reference.shape)

    def covers(self, out: Any, standard: str = "any_order", options: Optional[str] = None,
               **kwargs: Any) -> Union[Result, Results]:
        """Classifies the kernel's output (a torch tensor or an array of the function's shape and dtype) against the
        set of the traced reference under `standard` and its options (as Reference.covers). The result's elements
        are in the reference op's own shape where the function rearranged its output (a transpose, a reshape)."""
        if self.overflow and "overflow" not in kwargs and "overflow" not in (options or "") + standard:
            kwargs = dict(kwargs, overflow=self.overflow)
        device = self._device_matmul
        if device is not None and isinstance(out, torch.Tensor) and out.is_cuda and _api.cuda_available():
            return _api.matmul_covers_device(device[0], device[1], out, standard, options, **kwargs)
        return self.reference.covers(self._base_output(out), standard, options, **kwargs)


class TracedFunction:
    """A torch function traced into exactref references (reference(fn)): call it with the inputs to get the
    references of its outputs on those values. The trace is made once per signature (shapes, dtypes, devices and
    the numbers passed) and checked then: an op exactref has no set for is refused at the first call."""

    def __init__(self, fn, intermediates="compute", ulps=None):
        if not callable(fn):
            raise ExactrefTypeError("ER_ERR_INVALID", "exactref.torch.reference: fn must be callable, not %s"
                                    % type(fn).__name__)
        if intermediates not in _INTERMEDIATES:
            raise ExactrefValueError("ER_ERR_INVALID", "exactref.torch.reference: intermediates must be 'compute' "
                                                       "or 'stored'; got %r" % (intermediates,))
        ulps = dict(ulps or {})
        for k, u in ulps.items():
            if k not in _UNARY.values() or k == "relu":
                raise ExactrefValueError("ER_ERR_INVALID", "exactref.torch.reference: ulps takes %s; got %r"
                                         % (", ".join(s for s in _UNARY.values() if s != "relu"), k))
            _check.ulps(u, "exactref.torch.reference", "ulps[%r]" % k)
        self.fn = fn
        self.intermediates = intermediates
        self.ulps = ulps
        self._traces = {}

    @staticmethod
    def _signature(inputs):
        key = []
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                key.append(("tensor", tuple(x.shape), x.dtype, x.device.type))
            elif isinstance(x, (bool, int, float)):
                key.append(("number", type(x).__name__, x))
            else:
                raise ExactrefTypeError("ER_ERR_INVALID", "exactref.torch: input %d is %s; the inputs are torch "
                                                          "tensors and numbers" % (i, type(x).__name__))
        return tuple(key)

    def trace(self, *inputs):
        """The trace for these inputs' signature: made (and checked) on first use."""
        key = self._signature(inputs)
        t = self._traces.get(key)
        if t is None:
            t = _Trace(self.fn, inputs)
            _Reader(t, False, self.intermediates, self.ulps).run(inputs)
            if t.fake:   # a real trace may hold a branch taken on these inputs' values: not reused
                self._traces[key] = t
        return t

    def graph(self, *inputs) -> str:
        """The traced ATen graph for these inputs, as torch prints it."""
        return str(self.trace(*inputs).graph)

    def __call__(self, *inputs) -> Union[TracedReference, Tuple[TracedReference, ...]]:
        t = self.trace(*inputs)
        refs = _Reader(t, True, self.intermediates, self.ulps).run(inputs)
        for r in refs if isinstance(refs, tuple) else (refs,):
            r._device_matmul = _device_operands(t, r, inputs)
        return refs


class _Trace:
    def __init__(self, fn, inputs):
        place = _Place()

        def traced(*args):
            with place:
                return fn(*args)
        # each input its own tensor object: the tracer maps a tensor to the last input that is it, so a trace of
        # f(q, q) would read one input for both, wrong for a later f(q, k) of the same signature
        inputs = [x.detach() if isinstance(x, torch.Tensor) else x for x in inputs]
        # fake tensors: nothing is computed (a real trace runs fn once: 0.5 s for a 2048^3 fp16 GEMM on the CPU), the
        # tensors fn captures (a module's parameters) stay real in the graph, and control flow on the values is an
        # error instead of the branch of the first inputs. Where torch lacks the keyword, a real trace each call.
        self.fake = _FAKE_WITH_CAPTURES
        with torch.no_grad():
            if not self.fake:
                self.gm = _proxy.make_fx(traced, pre_dispatch=True, tracing_mode="real")(*inputs)
            else:
                try:
                    self.gm = _proxy.make_fx(traced, pre_dispatch=True, tracing_mode="fake",
                                             _allow_non_fake_inputs=True)(*inputs)
                except Exception as e:
                    if "data-dependent" not in str(e) and "DataDependent" not in type(e).__name__:
                        raise
                    raise ExactrefNotImplementedError(
                        "ER_ERR_UNSUPPORTED", "exactref.torch: fn's control flow or an op's shape depends on the "
                        "values of its inputs (%s); a reference is traced once per signature, so write the branch "
                        "outside fn" % str(e).split("\n", 1)[0]) from e
        self.graph = self.gm.graph
        self.places = place.places
        self.device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))
        self.names = _input_names(fn, len(inputs))


def _input_names(fn, n):
    """The names fn gives its positional inputs (for the expressions shown), x0, x1, ... where it gives none."""
    names = []
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            names += ["%s[%d]" % (p.name, i) for i in range(n - len(names))]
    return (names + ["x%d" % i for i in range(len(names), n)])[:n]


_E4M3FN_OVERFLOW = {}


def _e4m3fn_overflow(device):
    """What torch's .to(float8_e4m3fn) does beyond 448 on a device: "saturate" (448) or "nan", asked once."""
    rule = _E4M3FN_OVERFLOW.get(device)
    if rule is None:
        v = torch.tensor([1000.0], device=device).to(torch.float8_e4m3fn).float().item()
        rule = _E4M3FN_OVERFLOW[device] = "nan" if math.isnan(v) else "saturate"
    return rule


def _device_operands(t, r, inputs):
    """For a function that is one matmul of two CUDA inputs: those inputs, for the GPU path."""
    nodes = [n for n in t.graph.nodes if n.op == "call_function"]
    if len(nodes) != 1 or _packet(nodes[0].target) not in ("aten.matmul", "aten.mm", "aten.bmm") or r._v.views:
        return None
    ph = [n for n in t.graph.nodes if n.op == "placeholder"]
    args = nodes[0].args
    if not all(isinstance(a, torch.fx.Node) and a in ph for a in args[:2]):
        return None
    A, B = (inputs[ph.index(a)] for a in args[:2])
    return (A, B) if A.is_cuda and B.is_cuda and A.dim() >= 2 and B.dim() >= 2 else None


def reference(fn: Callable[..., Any], intermediates: str = "compute",
              ulps: Optional[Dict[str, float]] = None) -> TracedFunction:
    """fn, a torch function (or module) computing a reference, traced into exactref references: call the result
    with the inputs to get a TracedReference per output (a tuple where fn returns several).

    intermediates="compute" (the default): an op's result is held in the compute format of the standard given at
    covers() until an explicit `.to(dtype)` (or `.half()`, `.bfloat16()`) or the output rounds it, as a fused kernel
    holds its accumulator; "stored": every op's result is also rounded to the dtype torch gives it (fp16 inputs give
    fp16 results), as a kernel that stores each op's result does. ulps: per-function ulps for the chain's stages
    ({"exp": 1, "tanh": 2}; defaults as Reference.exp etc.)."""
    return TracedFunction(fn, intermediates, ulps)


def assert_close(actual: Any, fn: Callable[..., Any], *inputs: Any, standard: str = "any_order",
                 options: Optional[str] = None, intermediates: str = "compute",
                 ulps: Optional[Dict[str, float]] = None, **kwargs: Any) -> None:
    """The drop-in for torch.testing.assert_close(actual, fn(*inputs)): traces fn, builds its references on
    `inputs`, and raises AssertionError with exactref's report (the worst element and the first failing ones) where
    `actual` (a tensor, or a tuple for a function of several outputs) is not covered under `standard` and its
    options. CUDA tensors are accepted (a function that is one matmul is checked on the GPU where the library was
    built with CUDA)."""
    traced = _traced(fn, intermediates, ulps)
    refs = traced(*inputs)
    many = isinstance(refs, tuple)
    outs = tuple(actual) if many and isinstance(actual, (tuple, list)) else (actual,)
    refs = refs if many else (refs,)
    if len(outs) != len(refs):
        raise ExactrefValueError("ER_ERR_INVALID", "exactref.torch.assert_close: the function returns %d outputs; "
                                                   "got %d" % (len(refs), len(outs)))
    failed = []
    for i, (r, out) in enumerate(zip(refs, outs)):
        res = r.covers(out, standard, options, **kwargs)
        if not res.all():
            head = "output %d (%s)" % (i, r.expr) if many else r.expr
            failed.append("%s\n%s" % (head, res.report))
    if failed:
        raise AssertionError("exactref: the kernel's output is not covered by the traced reference under %s\n%s"
                             % (standard, "\n".join(failed)))


_REVEAL_DTYPES = {torch.float64: "float64", torch.float32: "float32", torch.float16: "float16",
                  torch.bfloat16: "bfloat16"}


def standard_for(fn: Callable[..., Any], *example_args: Any, op: Optional[str] = None,
                 accumulate: Optional[str] = None, max_calls: Optional[int] = None, seed: int = 0,
                 eps: Optional[float] = None):
    """Reveals the order in which the torch function `fn` adds, where it runs: on the device, dtype and shape of
    `example_args` (eager, torch.compile'd or a custom op alike; exactref.testing.reveal_order's probes,
    docs/algorithms/reveal.md). One 2-D tensor x (rows, n): fn(x) is its row sums (op "sum"); two, A (M, K) and
    B (K, N): fn(A, B) is their product (op "matmul"); op="layer_norm" with one 2-D tensor: fn(x) is x normalised
    along its rows with weight 1 and bias 0, y or (y, mean, rstd) (its mean's tree gives depth= for both of its
    sums; a Welford mean is reported as not revealed); op="softmax", "log_softmax" or "rmsnorm" with one 2-D tensor:
    fn(x) is that op along the rows (rmsnorm with weight 1; y, or a tuple whose first element is y), its sum's tree
    revealed by triplet probes (depth=). `eps`: layer_norm's or rmsnorm's eps, for the check of fn's outputs on
    random rows (default exactref's: 1e-5 and 1e-6). Returns an Order whose `standard` holds the covers() keywords
    for fn's outputs at that shape: a fixed order where the probes pin one exactref names, else any_order with the
    revealed tree's depth, else any_order with the reason. Every call has the example's shape, since a kernel may
    pick its order by shape. `accumulate`: the accumulator the probes must swamp ("float32"; "float64" for float64
    inputs by default)."""
    where = "exactref.torch.standard_for"
    if not callable(fn):
        raise ExactrefTypeError("ER_ERR_INVALID", "%s: fn must be callable, not %s" % (where, type(fn).__name__))
    if op is None:
        op = {1: "sum", 2: "matmul"}.get(len(example_args))
    if op not in _REVEAL_OPS or len(example_args) != (2 if op == "matmul" else 1):
        raise ExactrefValueError("ER_ERR_INVALID", "%s: expected one example tensor (rows, n) for op %s, or two, "
                                 "(M, K) and (K, N), for op 'matmul'; got %d argument(s) and op %r"
                                 % (where, ", ".join("'%s'" % o for o in _REVEAL_OPS if o != "matmul"),
                                    len(example_args), op))
    for i, t in enumerate(example_args):
        if not isinstance(t, torch.Tensor):
            raise ExactrefTypeError("ER_ERR_INVALID", "%s: example argument %d must be a torch.Tensor, not %s"
                                    % (where, i, type(t).__name__))
        if t.dim() != 2:
            raise ExactrefValueError("ER_ERR_SHAPE", "%s: example argument %d must be 2-D; got shape %s"
                                     % (where, i, tuple(t.shape)))
        if t.dtype not in _REVEAL_DTYPES:
            raise ExactrefValueError("ER_ERR_FORMAT", "%s: example argument %d has dtype %s; the probes take %s"
                                     % (where, i, t.dtype, ", ".join(str(d) for d in _REVEAL_DTYPES)))
    x = example_args[0]
    if op == "matmul":
        b = example_args[1]
        if b.shape[0] != x.shape[1] or b.dtype != x.dtype or b.device != x.device:
            raise ExactrefValueError("ER_ERR_SHAPE", "%s: A %s %s on %s and B %s %s on %s: expected B (K, N) of A's "
                                     "dtype and device for A (M, K)" % (where, tuple(x.shape), x.dtype, x.device,
                                                                        tuple(b.shape), b.dtype, b.device))
    rows, n = int(x.shape[0]), int(x.shape[1])
    if n < 2 or rows < 1:
        raise ExactrefValueError("ER_ERR_SHAPE", "%s: the example's rows (%d) must hold at least two terms (n = %d)"
                                 % (where, rows, n))
    dtype = _REVEAL_DTYPES[x.dtype]
    if accumulate is None:
        accumulate = "float64" if dtype == "float64" else "float32"

    def kernel(*a):
        with torch.no_grad():
            out = fn(*a)
        if op == "sum" and isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[1] == 1:
            out = out[:, 0]  # keepdim=True
        return out

    from ._reveal import reveal_order
    return reveal_order(kernel, op, n=n, dtype=dtype, ncols=int(example_args[1].shape[1]) if op == "matmul" else 16,
                        rows=rows, device=str(x.device), accumulate=accumulate, max_calls=max_calls, seed=seed,
                        eps=eps)


_TRACED = {}


def _traced(fn, intermediates, ulps):
    """The TracedFunction of fn (kept per fn and options, so that assert_close traces each signature once)."""
    key = (id(fn), intermediates, tuple(sorted((ulps or {}).items())))
    hit = _TRACED.get(key)
    if hit is None or hit[0] is not fn:
        hit = (fn, TracedFunction(fn, intermediates, ulps))
        if len(_TRACED) > 256:
            _TRACED.clear()
        _TRACED[key] = hit
    return hit[1]
