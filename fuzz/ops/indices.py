"""Start indices: ``index``, an int32 scalar (the only int32 values of a program, with int32 inputs).

``index`` with ``axes`` [] is the constant ``jnp.int32(offset)``; with axes it is
``lax.axis_index(axes) * scale + offset`` (the linear index over the axes, first name
major), which varies over those axes: a per-device or per-example start, possibly past
the end (JAX clamps starts, see fuzz/ops/slicing.py). It is never drawn on its own: ops
that take a start index draw one before them (their ``preludes``).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fuzz.ops.base import INT, ExprOp, Ty, int_schema, require


class Index(ExprOp):
    name = "index"
    family = "index"
    n_args = 0
    params = {"axes": {"type": "array", "items": {"$ref": "#/$defs/name"}, "minItems": 0, "maxItems": 2},
              "scale": int_schema(-8, 8), "offset": int_schema(-64, 64)}

    def types(self, eqn, args, ctx):
        names = eqn["axes"]
        allowed = ctx.collective_axes()
        for n in names:
            require(n in allowed, f"index over axis {n!r}, which is not usable here (in scope: {allowed})")
        require(len(set(names)) == len(names), "index names an axis twice")
        return [Ty((), frozenset(names), INT)]

    def draw(self, draw, ctx, scope):
        axes = ctx.collective_axes()
        names = draw(st.lists(st.sampled_from(axes), max_size=2, unique=True)) if axes else []
        scale = draw(st.sampled_from([1, 2, 3, -1])) if names else 1
        return {"op": self.name, "args": [], "outs": [scope.new_var()], "axes": names, "scale": scale,
                "offset": draw(st.integers(-4, 20))}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        idx = np.zeros((1,) * K, np.int32)
        for n in eqn["axes"]:  # linear index, first name major
            j = next(k for k, a in enumerate(ctx.axes) if a.name == n)
            shape = [1] * K
            shape[j] = ctx.axes[j].size
            idx = idx * ctx.axes[j].size + np.arange(ctx.axes[j].size, dtype=np.int32).reshape(shape)
        if eqn["axes"]:
            idx = idx * np.int32(eqn["scale"])
        out = np.broadcast_to(idx + np.int32(eqn["offset"]), tuple(a.size for a in ctx.axes)).astype(np.int32)
        return [out if r.xp is np else r.xp.asarray(out)]

    def expr(self, rr, eqn, a, ctx):
        if not eqn["axes"]:
            return f"jnp.int32({rr.int(eqn['offset'])})"
        return f"jax.lax.axis_index({rr.axes_source(eqn['axes'])}) * {rr.int(eqn['scale'])} + {rr.int(eqn['offset'])}"

    def features(self, eqn):
        return {"axis_index"} if eqn["axes"] else set()


OPS = (Index(),)


def start_index(draw, ctx, scope):
    """(prelude equations, name of an int32 scalar) to use as a start index, or None.

    An int32 value in scope (a parameter, an input, an earlier index), or a new ``index``
    equation when "index" is not disabled.
    """
    ints, fresh = scope.ints(), "index" not in scope.disabled
    if not ints and not fresh:
        return None
    # an int in scope 3 times in 4, picked as operands are (Scope.pick): under jit a new index is a
    # constant that XLA folds, while a parameter is a start clamped at run time (by the SPMD
    # partitioner, per device); a new index was 101 of 156 dynamic_slice starts in 2000
    # drawn programs (seeds 1 and 2), a traced parameter 10
    if ints and (not fresh or draw(st.integers(0, 3)) > 0):
        return [], scope.pick(draw, ints)
    e = OPS[0].draw(draw, ctx, scope)
    return [e], e["outs"][0]
