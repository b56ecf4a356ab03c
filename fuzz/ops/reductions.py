"""Reductions: ``sum mean max`` over one dim or all (``axis`` null), ``argmax argmin``, and ``wsum``.

``wsum`` is a seeded weighted sum of all elements, ``sum(x * weights(seed, x.shape))``
(fuzz.values.weights): a random linear functional, so that a grad's cotangent is not
all ones. ``max`` picks one element at ties: never under grad. ``mean`` and ``max`` of
no element (an empty extent, from an empty slice) are refused: NaN / an error in NumPy.

Dtypes: ``sum`` and ``max`` take float32, bfloat16, float16 and int32, ``mean`` the
floating dtypes, ``wsum`` float32 (its weights are float32); the result has the
operand's dtype (jnp.sum keeps int32 with x64 off; jnp.mean of a float keeps it).
jax.numpy sums and averages bfloat16 / float16 in float32 and rounds the result once
(``_upcast_f16_for_computation``, jax/_src/numpy/reductions.py; jaxpr measured on jax
0.10.2): so does the NumPy reference (:func:`fuzz.ops.base.compute`). NumPy's own sum of
int32 would widen to int64: the reference asks for int32 (wrapping as XLA does).

``argmax`` / ``argmin`` (``jnp.argmax`` / ``jnp.argmin``) give the int32 index of the first
occurrence of the extremum along one dim, or in the row-major flattening of the whole value
(``axis`` null): the first occurrence at ties is documented
(https://docs.jax.dev/en/latest/_autosummary/jax.numpy.argmax.html) and NumPy's. Inputs are
multiples of 1/8, so ties are common: a sharded argmax must still return the first index.
No element, no index: refused over an empty extent. Their results are integers (a zero
derivative), so they may appear under grad.
"""
from __future__ import annotations

from hypothesis import strategies as st

import numpy as np

from fuzz.ops.base import FLOATS, INT, NUMERIC, OPTIONAL_DIM, SEED, ExprOp, Ty, compute, require, same_dtype, sharding_spec


class Reduce(ExprOp):
    family = "reduce"
    params = {"axis": OPTIONAL_DIM}
    dtypes = NUMERIC
    needs_elements = False  # refused over an empty extent
    along_param, along_keeps = "axis", False  # (None: over all dims, no dim of its own)

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Its operand's without the reduced dim (over a split dim too: XLA reduces across
        shards); over all dims a replicated scalar (jax 0.10.2)."""
        ax = eqn.get("axis")
        return [() if ax is None else sharding_spec(args[0].dims[:ax] + args[0].dims[ax + 1:])]

    def types(self, eqn, args, ctx):
        (a,) = args
        dt = same_dtype(self.name, args, self.dtypes)
        ax = eqn.get("axis")
        if ax is None:
            require(not self.needs_elements or a.size > 0, f"{self.name} of an empty array")
            return [Ty((), a.vma, dt)]
        require(0 <= ax < a.rank, f"{self.name} axis {ax} out of range for rank {a.rank}")
        require(not self.needs_elements or a.shape[ax] > 0, f"{self.name} over an empty dim")
        return [Ty(a.shape[:ax] + a.shape[ax + 1:], a.vma, dt)]

    def draw(self, draw, ctx, scope):
        xs = scope.values(self.dtypes)
        if self.needs_elements:
            xs = [v for v in xs if scope.visible[v].size > 0]
        if not xs:
            return None
        a = scope.pick(draw, xs)
        shape = scope.visible[a].shape
        axis = draw(st.sampled_from([None] + [d for d in range(len(shape))
                                              if shape[d] > 0 or not self.needs_elements]))
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axis": axis}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        x = xs[0]
        axis = tuple(range(K, x.ndim)) if eqn.get("axis") is None else K + eqn["axis"]
        fn = getattr(r.xp, self.name)
        if r.xp is np and ts[0].dtype == INT and self.name == "sum":
            return [compute(r, INT, lambda v: np.sum(v, axis=axis, dtype=np.int32), x)]
        return [compute(r, ts[0].dtype, lambda v: fn(v, axis=axis), x)]

    def expr(self, rr, eqn, a, ctx):
        axis = "" if eqn.get("axis") is None else f", axis={rr.int(eqn['axis'])}"
        return f"jnp.{self.name}({a[0]}{axis})"


class Sum(Reduce):
    name = "sum"

    def as_loss(self, draw, arg, out):
        return {"op": self.name, "args": [arg], "outs": [out], "axis": None}


class Mean(Reduce):
    name = "mean"
    dtypes = FLOATS
    needs_elements = True


class Max(Reduce):
    name = "max"
    needs_elements = True
    grad_ok = False


class ArgReduce(Reduce):
    """``jnp.<name>(x, axis=axis)``: int32 of ``x``'s shape without dim ``axis`` (rank 0 when ``axis`` is null)."""

    needs_elements = True
    dtypes = NUMERIC

    def types(self, eqn, args, ctx):
        (t,) = super().types(eqn, args, ctx)
        return [Ty(t.shape, t.vma, INT)]

    def sharding_types(self, eqn, args, outs, ctx):
        """As :class:`Reduce`'s; but over all dims (``axis`` null) jnp ravels the operand first, a
        reshape that JAX's sharding types refuse when a dim after the first is split
        (ShardingTypeError "This reshape is not supported", jax 0.10.2, a size-1 axis too)."""
        require(eqn.get("axis") is not None or not any(args[0].dims[1:]),
                f"{self.name} over all dims of a value split along a dim after the first")
        return super().sharding_types(eqn, args, outs, ctx)

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        x = xs[0]
        if r.xp is np and x.dtype != np.int32:
            x = x.astype(np.float32)  # (bfloat16 / float16 values are exact in float32)
        if eqn.get("axis") is None:  # the value's own dims flattened, row-major
            x = x.reshape(x.shape[:K] + (-1,))
            axis = K
        else:
            axis = K + eqn["axis"]
        return [getattr(r.xp, self.name)(x, axis=axis).astype(r.xp.int32)]


class Argmax(ArgReduce):
    """``jnp.argmax``: see :class:`ArgReduce`."""

    name = "argmax"
    feature_names = ("argmax",)


class Argmin(ArgReduce):
    """``jnp.argmin``: see :class:`ArgReduce`."""

    name = "argmin"
    feature_names = ("argmin",)


class WeightedSum(ExprOp):
    name = "wsum"
    family = "reduce"
    params = {"seed": SEED}
    feature_names = ("wsum",)
    random_loss = True

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """A replicated scalar (jax 0.10.2)."""
        return [()]

    def types(self, eqn, args, ctx):
        return [Ty((), args[0].vma)]

    def draw(self, draw, ctx, scope):
        xs = scope.floats()
        if not xs:
            return None
        return {"op": self.name, "args": [scope.pick(draw, xs)], "outs": [scope.new_var()],
                "seed": draw(st.integers(0, 255))}

    def as_loss(self, draw, arg, out):
        return {"op": self.name, "args": [arg], "outs": [out], "seed": draw(st.integers(0, 255))}

    def reference(self, r, eqn, xs, ts, ctx):
        from fuzz.values import weights

        K = len(ctx.axes)
        x = xs[0]
        return [r.xp.sum(x * weights(eqn["seed"], ts[0].shape), axis=tuple(range(K, x.ndim)))]

    def expr(self, rr, eqn, a, ctx):
        rr.helpers.add("weights")
        return f"jnp.sum({a[0]} * weights({rr.int(eqn['seed'])}, jnp.shape({a[0]})))"


OPS = (Sum(), Mean(), Max(), Argmax(), Argmin(), WeightedSum())
