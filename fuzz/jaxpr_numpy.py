"""Evaluate a jaxpr with NumPy: the reference's derivatives without compiling every eager op.

The unsharded reference (fuzz/reference.py) takes derivatives with JAX's own autodiff
(``jax.grad``, ``jax.vjp``, ...) of jax.numpy code. Run eagerly, every jax.numpy function
and every primitive of the backward pass is compiled by XLA for its shapes: about 28
compilations of ~18 ms per program with a derivative, 42% of a campaign's CPU time (one job,
jax 0.10.2; see docs/measurements.md). Instead the reference traces the derivative once
(``jax.make_jaxpr``: JAX's autodiff, no XLA) and this module evaluates the jaxpr with NumPy,
one equation at a time, no jit and no XLA fusion: the same op-by-op semantics as eager.

A primitive this module has no NumPy rule for, or whose operands or results are not
float32, int32 or bool (bfloat16, float16: XLA rounds those as it fuses), is bound with JAX
eagerly (``primitive.bind``: JAX's own implementation, compiled once per shape as before).
Rules follow the semantics of ``jax.lax`` (https://docs.jax.dev/en/latest/jax.lax.html):
``dynamic_slice`` / ``dynamic_update_slice`` clamp their starts so that the window fits,
``pad`` takes negative low / high padding as cropping and interior padding between
elements, ``select_n`` picks case ``pred`` (False/0 the first), ``clamp(lo, x, hi)``.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

EXACT = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_))


def _unary(f):
    return lambda x, **_: f(x)


def _binary(f):
    return lambda x, y, **_: f(x, y)


def _broadcast_in_dim(x, *dyn, shape, broadcast_dimensions, **_):
    if dyn:
        raise NotImplementedError("dynamic shapes")
    out = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        out[d] = x.shape[i]
    return np.broadcast_to(np.reshape(x, out), shape)


def _reshape(x, *dyn, new_sizes, dimensions=None, **_):
    if dyn or dimensions is not None:
        raise NotImplementedError("reshape with dimensions")
    return np.reshape(x, new_sizes)


def _pad(x, value, *, padding_config):
    for d, (lo, hi, interior) in enumerate(padding_config):
        n = x.shape[d]
        if interior and n > 1:
            shape = list(x.shape)
            shape[d] = n + (n - 1) * interior
            y = np.full(shape, value, x.dtype)
            idx = [slice(None)] * x.ndim
            idx[d] = slice(None, None, interior + 1)
            y[tuple(idx)] = x
            x = y
        if lo > 0 or hi > 0:  # positive padding first: a negative one crops the padded array's end
            widths = [(0, 0)] * x.ndim
            widths[d] = (max(lo, 0), max(hi, 0))
            x = np.pad(x, widths, constant_values=value)
        n = x.shape[d]
        if n - max(-lo, 0) - max(-hi, 0) < 0:
            raise NotImplementedError("negative size")
        idx = [slice(None)] * x.ndim
        idx[d] = slice(max(-lo, 0), n - max(-hi, 0))
        x = x[tuple(idx)]
    return x


def _slice(x, *, start_indices, limit_indices, strides=None, **_):
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(s, e, k) for s, e, k in zip(start_indices, limit_indices, strides))]


def _starts(x_shape, win_shape, idx):
    return [int(min(max(int(i), 0), n - m)) for i, n, m in zip(idx, x_shape, win_shape)]


def _dynamic_slice(x, *idx, slice_sizes):
    if len(idx) != x.ndim:
        raise NotImplementedError("dynamic sizes")
    s = _starts(x.shape, slice_sizes, idx)
    return x[tuple(slice(a, a + m) for a, m in zip(s, slice_sizes))]


def _dynamic_update_slice(x, u, *idx, **_):
    s = _starts(x.shape, u.shape, idx)
    y = np.array(x)
    y[tuple(slice(a, a + m) for a, m in zip(s, u.shape))] = u
    return y


def _iota(*dyn, dtype, shape, dimension, **_):
    if dyn:
        raise NotImplementedError("dynamic shapes")
    r = np.arange(shape[dimension], dtype=dtype)
    return np.broadcast_to(r.reshape([-1 if d == dimension else 1 for d in range(len(shape))]), shape)


def _reduce(f):
    return lambda x, *, axes, **_: f(x, axis=tuple(axes))


def _cumulative(f):
    def rule(x, *, axis, reverse=False, **_):
        if reverse:
            return np.flip(f(np.flip(x, axis), axis=axis), axis)
        return f(x, axis=axis)
    return rule


def _dot_general(lhs, rhs, *, dimension_numbers, preferred_element_type=None, **_):
    (lc, rc), (lb, rb) = dimension_numbers
    if preferred_element_type is not None:  # (the products and sums in that dtype: bool counts, int32 in float32)
        lhs, rhs = lhs.astype(preferred_element_type), rhs.astype(preferred_element_type)
    lf = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    size = lambda x, ds: int(np.prod([x.shape[d] for d in ds], dtype=np.int64))
    a = np.transpose(lhs, list(lb) + lf + list(lc)).reshape(
        size(lhs, lb), size(lhs, lf), size(lhs, lc))
    b = np.transpose(rhs, list(rb) + list(rc) + rf).reshape(
        size(rhs, rb), size(rhs, rc), size(rhs, rf))
    out = np.matmul(a, b)
    shape = [lhs.shape[d] for d in lb] + [lhs.shape[d] for d in lf] + [rhs.shape[d] for d in rf]
    return out.reshape(shape)


def _select_n(pred, *cases):
    if len(cases) == 1:
        return cases[0]
    if pred.dtype == np.bool_:
        return np.where(pred, cases[1], cases[0])
    return np.choose(pred, cases)


def _convert(x, *, new_dtype, **_):
    src, dst = np.dtype(x.dtype), np.dtype(new_dtype)
    if src.kind == "f" and dst.kind in "iub":
        raise NotImplementedError("float to int or bool")  # (XLA's rounding and saturation)
    return x.astype(dst)


def _split(x, *, sizes, axis):
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _concatenate(*xs, dimension):
    return np.concatenate(xs, axis=dimension)


def _logistic(x, **_):
    with np.errstate(over="ignore"):
        return np.float32(1) / (np.float32(1) + np.exp(-x))


def _float_only(f):
    def rule(*xs, **params):
        if any(np.dtype(x.dtype).kind != "f" for x in xs):
            raise NotImplementedError("integer operands")
        return f(*xs, **params)
    return rule


def _div(x, y, **_):
    if np.dtype(x.dtype).kind != "f":
        raise NotImplementedError("integer division")  # (rounds toward zero, unlike //)
    return x / y


def _rem(x, y, **_):
    if np.dtype(x.dtype).kind != "f":
        raise NotImplementedError("integer remainder")
    return np.fmod(x, y)


def _integer_pow(x, *, y):
    """x ** y as lax computes it: repeated squaring, then 1 / acc for y < 0 (``_integer_pow`` in
    jax/_src/lax/lax.py; powf rounds otherwise, up to ~20 ulp apart for y near 100)."""
    acc, base, n = None, x, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else acc * base
        n >>= 1
        if n:
            base = base * base
    acc = np.ones_like(x) if acc is None else acc
    return np.ones_like(x) / acc if y < 0 else acc


def _max(x, y, **_):
    return np.maximum(x, y)


def _min(x, y, **_):
    return np.minimum(x, y)


RULES = {
    "neg": _unary(np.negative), "sin": _unary(np.sin), "cos": _unary(np.cos), "tan": _unary(np.tan),
    "tanh": _unary(np.tanh), "exp": _unary(np.exp), "log": _unary(np.log), "log1p": _unary(np.log1p),
    "expm1": _unary(np.expm1), "abs": _unary(np.abs), "sign": _float_only(_unary(np.sign)),
    "floor": _unary(np.floor), "ceil": _unary(np.ceil), "sqrt": _unary(np.sqrt),
    "rsqrt": _unary(lambda x: np.float32(1) / np.sqrt(x)), "square": _unary(np.square),
    "logistic": _logistic, "is_finite": _unary(np.isfinite), "copy": _unary(np.array), "stop_gradient": _unary(np.array),
    "copy_p": _unary(np.array), "integer_pow": _integer_pow,
    "add": _binary(np.add), "add_any": _binary(np.add), "sub": _binary(np.subtract),
    "mul": _binary(np.multiply), "div": _div, "rem": _rem, "max": _max, "min": _min,
    "pow": _float_only(_binary(np.power)), "atan2": _binary(np.arctan2),
    "and": _binary(np.bitwise_and), "or": _binary(np.bitwise_or), "xor": _binary(np.bitwise_xor),
    "not": _unary(np.invert),
    "eq": _binary(np.equal), "ne": _binary(np.not_equal), "lt": _binary(np.less),
    "le": _binary(np.less_equal), "gt": _binary(np.greater), "ge": _binary(np.greater_equal),
    "select_n": _select_n, "clamp": lambda lo, x, hi: np.clip(x, lo, hi),
    "convert_element_type": _convert,
    "broadcast_in_dim": _broadcast_in_dim, "reshape": _reshape,
    "transpose": lambda x, *, permutation: np.transpose(x, permutation),
    "squeeze": lambda x, *, dimensions: np.squeeze(x, tuple(dimensions)),
    "rev": lambda x, *, dimensions: np.flip(x, tuple(dimensions)),
    "concatenate": _concatenate, "pad": _pad, "slice": _slice, "split": _split,
    "dynamic_slice": _dynamic_slice, "dynamic_update_slice": _dynamic_update_slice, "iota": _iota,
    "reduce_sum": _reduce(np.sum), "reduce_max": _reduce(np.max), "reduce_min": _reduce(np.min),
    "reduce_prod": _reduce(np.prod), "reduce_and": _reduce(np.bitwise_and.reduce),
    "reduce_or": _reduce(np.bitwise_or.reduce),
    "cumsum": _cumulative(np.cumsum), "cumprod": _cumulative(np.cumprod),
    "cummax": _cumulative(np.maximum.accumulate), "cummin": _cumulative(np.minimum.accumulate),
    "dot_general": _dot_general,
}

# primitives whose value is that of a jaxpr in their params: {primitive: the param holding it}
CALLS = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
         "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
         "custom_vjp_call_jaxpr": "fun_jaxpr", "checkpoint": "jaxpr", "remat": "jaxpr"}


class Stats:
    """Equations evaluated by a NumPy rule and bound with JAX instead, by primitive name; derivatives
    run eagerly because their trace failed, by exception type (counters, see fuzz.reference.Reference.derive)."""

    def __init__(self):
        self.numpy = Counter()
        self.bound = Counter()
        self.eager = Counter()


STATS = Stats()


def _var_kinds() -> tuple:
    """(Literal, DropVar) of this JAX (imported here: JAX is imported only once a reference needs it)."""
    try:  # jax >= 0.4.36
        from jax.extend.core import DropVar, Literal
    except ImportError:  # older releases
        from jax.core import DropVar, Literal
    return Literal, DropVar


def _exact(avals) -> bool:
    return all(getattr(a, "dtype", None) is not None and np.dtype(a.dtype) in EXACT for a in avals)


def evaluate(closed, args: list, bind_all: bool = False) -> list:
    """The outputs (NumPy arrays) of the ClosedJaxpr ``closed`` (``jax.make_jaxpr``) at ``args``.

    ``args``: one array per input variable of the jaxpr, of its shape and dtype. Equations run
    in order, each by its NumPy rule (:data:`RULES`) when it has one and its operands and
    results are float32, int32 or bool, else by ``primitive.bind`` on jax arrays (JAX's eager
    implementation); a call primitive (``pjit``, ``custom_jvp_call``, ...) runs its jaxpr.
    ``bind_all``: bind every primitive with JAX (for the tests that check the rules against
    JAX). Raises whatever a bound primitive raises; AssertionError when a rule's result has
    another shape than JAX's typing gives it (a wrong rule).
    """
    return _run(closed.jaxpr, list(closed.consts), list(args), bind_all, _var_kinds())


def _run(jaxpr, consts: list, args: list, bind_all: bool, kinds: tuple) -> list:
    literal, drop = kinds
    env = {}

    def read(v):
        if isinstance(v, literal):
            return np.asarray(v.val, dtype=v.aval.dtype)
        return env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        xs = [read(v) for v in eqn.invars]
        outs = _equation(eqn, xs, bind_all, kinds)
        for v, x in zip(eqn.outvars, outs):
            if not isinstance(v, drop):
                env[v] = x
    return [read(v) for v in jaxpr.outvars]


def _equation(eqn, xs: list, bind_all: bool, kinds: tuple) -> list:
    name = eqn.primitive.name
    param = CALLS.get(name)
    sub = eqn.params.get(param) if param else None
    if sub is not None and not bind_all:
        if hasattr(sub, "consts"):  # a ClosedJaxpr
            return _run(sub.jaxpr, list(sub.consts), xs, bind_all, kinds)
        if hasattr(sub, "eqns") and not sub.constvars:  # an open Jaxpr (checkpoint)
            return _run(sub, [], xs, bind_all, kinds)
    if name == "pure_callback" and not bind_all:  # host code: its callback on NumPy values
        outs = [np.asarray(o) for o in eqn.params["callback"](*[np.asarray(x) for x in xs])]
        if len(outs) != len(eqn.outvars) or any(o.shape != tuple(v.aval.shape) for o, v in zip(outs, eqn.outvars)):
            raise ValueError(f"pure_callback returned shapes {[o.shape for o in outs]}, declared "
                             f"{[tuple(v.aval.shape) for v in eqn.outvars]}")
        STATS.numpy[name] += 1
        return [o.astype(v.aval.dtype) for o, v in zip(outs, eqn.outvars)]
    rule = None if bind_all else RULES.get(name)
    avals = [v.aval for v in eqn.outvars]
    if rule is not None and _exact(avals) and all(np.dtype(np.asarray(x).dtype) in EXACT for x in xs):
        try:
            with np.errstate(all="ignore"):
                got = rule(*[np.asarray(x) for x in xs], **eqn.params)
        except Exception:  # (NotImplementedError: a case the rule leaves to JAX; NumPy's own errors alike)
            got = None
        if got is not None:
            outs = list(got) if eqn.primitive.multiple_results else [got]
            results = []
            for o, a in zip(outs, avals):
                o = np.asarray(o, dtype=a.dtype)
                assert o.shape == tuple(a.shape), f"{name}: NumPy rule gave {o.shape}, JAX types {tuple(a.shape)}"
                results.append(o)
            STATS.numpy[name] += 1
            return results
    STATS.bound[name] += 1
    got = eqn.primitive.bind(*xs, **eqn.params)
    outs = list(got) if eqn.primitive.multiple_results else [got]
    return [np.asarray(o) for o in outs]
