"""Gather: ``take``, ``jnp.take(x, i, axis=axis, mode=mode)`` with int32 indices ``i`` (rank 0-2).

Semantics (``jax.numpy.take`` docstring and ``jax.numpy.ndarray.at``; measured on jax 0.10.2):
the result is ``x.shape[:axis] + i.shape + x.shape[axis + 1:]``, element ``x[..., j, ...]`` for
each index ``j`` of ``i`` along dim ``axis`` of size n, where out-of-bounds indices follow ``mode``:

- ``"clip"``: ``j`` clamped to ``[0, n - 1]``, negative indices included (-1 gives 0);
- ``"wrap"``: ``j mod n`` (Python's modulo: -1 gives n - 1);
- ``"fill"``: a negative ``j >= -n`` counts from the end once; any other ``j`` outside
  ``[0, n)`` gives the fill value: NaN for floating dtypes, the smallest int32 for int32,
  True for bool.

It lowers to XLA's gather, whose SPMD partitioning (sharded operand, sharded indices)
has its own code paths. The indices are any int32 value in scope (an ``argmax`` result, an
``astype``, an int32 input) or, when there is none, a start ``index`` drawn before it.
Differentiable with respect to ``x`` (a scatter-add of the cotangent; the reference
differentiates NumPy-style advanced indexing in jax.numpy), never the indices.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from fuzz.ops.base import DIM, FLOATS, INT, VALUE_DTYPES, ExprOp, OneOf, Ty, require, sharding_spec
from fuzz.ops.indices import start_index

MODES = ("clip", "wrap", "fill")
MAX_INDEX_RANK = 2


def fill_value(dtype: str):
    """``jnp.take``'s default fill value for ``dtype``: NaN, the smallest int32, or True."""
    if dtype in FLOATS:
        return float("nan")
    if dtype == INT:
        return np.iinfo(np.int32).min
    return True


class Take(ExprOp):
    """``jnp.take(x, i, axis=axis, mode=mode)``: ``x`` of any value dtype (rank >= 1), ``i`` int32 of
    rank 0-2; the result has ``x``'s dtype and shape ``x.shape[:axis] + i.shape + x.shape[axis + 1:]``
    and varies wherever ``x`` or ``i`` does. Semantics of the modes: the module docstring."""

    name = "take"
    family = "movement"
    explicit_ok = False
    n_args = 2
    params = {"axis": DIM, "mode": {"enum": list(MODES)}}
    dtypes = VALUE_DTYPES
    feature_names = ("take",)
    preludes = ("index",)
    along_param, along_keeps = "axis", False  # (the indices' dims replace it)

    def arg_dtypes(self, eqn):
        return (OneOf(self.dtypes), INT)

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Not from a split dim ("Use `.at[...].get(out_sharding=)`", jax 0.10.2); the other dims
        keep their splits, the indices' dims unsplit."""
        x, i = args
        ax = eqn["axis"]
        require(not x.dims[ax] and not i.sharded, "take from a split dim or with split indices")
        return [sharding_spec(x.dims[:ax] + ((),) * i.rank + x.dims[ax + 1:])]

    def types(self, eqn, args, ctx):
        x, i = args
        require(eqn["mode"] in MODES, f"take mode {str(eqn['mode'])[:20]!r} is not clip, wrap or fill")
        require(0 <= eqn["axis"] < x.rank, f"take axis {eqn['axis']} out of range for rank {x.rank}")
        require(i.rank <= MAX_INDEX_RANK, f"take indices of rank {i.rank} (at most {MAX_INDEX_RANK})")
        require(eqn["mode"] == "fill" or x.shape[eqn["axis"]] > 0, f"take mode {eqn['mode']} from an empty dim")
        # (jax.numpy.take raises IndexError "Cannot do a non-empty jnp.take() from an empty axis"
        # whatever the mode: jax/_src/numpy/indexing.py, 0.4.26-0.10.2)
        require(x.shape[eqn["axis"]] > 0 or i.size == 0, "take of a non-empty index from an empty dim")
        ax = eqn["axis"]
        return [Ty(x.shape[:ax] + i.shape + x.shape[ax + 1:], x.vma | i.vma, x.dtype)]

    def draw(self, draw, ctx, scope):
        vis = scope.visible
        xs = scope.values(self.dtypes, min_rank=1)
        if not xs:
            return None
        x = scope.pick(draw, xs)
        shape = vis[x].shape
        axis = draw(st.integers(0, len(shape) - 1))
        rest = math.prod(shape) // shape[axis] if shape[axis] else 0
        idx = [v for v in scope.values((INT,)) if vis[v].rank <= MAX_INDEX_RANK
               and rest * vis[v].size <= scope.max_elements and len(shape) - 1 + vis[v].rank <= scope.max_rank
               and (shape[axis] or vis[v].size == 0)]
        if not shape[axis] and not idx:  # (only an empty index may be taken from an empty dim)
            return None
        prelude = []
        pick = draw(st.sampled_from(idx + [None] * bool(shape[axis]))) if idx else None
        if pick is None:
            got = start_index(draw, ctx, scope)
            if got is None:
                return None
            prelude, pick = got
        modes = list(MODES) if shape[axis] else ["fill"]
        e = {"op": self.name, "args": [x, pick], "outs": [scope.new_var()], "axis": axis,
             "mode": draw(st.sampled_from(modes))}
        return prelude + [e]

    def reference(self, r, eqn, xs, ts, ctx):
        xp = r.xp
        K = len(ctx.axes)
        x, i = xs
        ax, mode = K + eqn["axis"], eqn["mode"]
        n = x.shape[ax]
        i = xp.asarray(i, dtype=np.int32)
        if mode == "clip":
            j, valid = xp.clip(i, 0, n - 1), None
        elif mode == "wrap":
            j, valid = i % n, None
        else:
            j = xp.where(i < 0, i + n, i)
            valid = (j >= 0) & (j < n)
            j = xp.clip(j, 0, max(n - 1, 0))
        named = x.shape[:K]
        m = math.prod(named)
        xm = xp.moveaxis(x, ax, K)  # (named..., n, before..., after...)
        rest = xm.shape[K + 1:]
        flat = xm.reshape((m, n) + rest)
        jf = j.reshape((m, -1))
        if n == 0:  # (fill from an empty dim: every index is out of bounds)
            got = xp.zeros((m, jf.shape[1]) + rest, x.dtype)
        else:
            got = flat[xp.arange(m)[:, None], jf]  # (m, p, before..., after...)
        ishape = ts[1].shape
        nb = ax - K  # dims before the axis
        got = got.reshape(named + ishape + rest)
        # (named..., i..., before..., after...) -> (named..., before..., i..., after...)
        ni = len(ishape)
        order = (list(range(K)) + list(range(K + ni, K + ni + nb)) + list(range(K, K + ni))
                 + list(range(K + ni + nb, got.ndim)))
        got = xp.transpose(got, order)
        if valid is not None:
            v = valid.reshape(named + (1,) * nb + ishape + (1,) * (got.ndim - K - nb - ni))
            fill = xp.asarray(fill_value(ts[0].dtype), dtype=got.dtype)
            got = xp.where(v, got, fill)
        return [got]

    def expr(self, rr, eqn, a, ctx):
        if eqn["mode"] not in MODES:
            from fuzz.ops.base import ProgramError

            raise ProgramError(f"take mode {str(eqn['mode'])[:20]!r} is not clip, wrap or fill")
        return f"jnp.take({a[0]}, {a[1]}, axis={rr.int(eqn['axis'])}, mode={eqn['mode']!r})"


OPS = (Take(),)
