"""Scans and sorts along one dim: ``cumsum`` (``jnp.cumsum``), ``cumprod`` (``jnp.cumprod``), ``cummax``
(``lax.cummax``), ``sort`` (``jnp.sort``).

``cumprod``'s derivative is JAX's (``jax.lax.cumprod``, jax/_src/lax/control_flow/loops.py:
the JVP of an associative scan of ``mul``, defined at zero elements too, which inputs in
multiples of 1/8 have); the reference differentiates ``jnp.cumprod`` eagerly on one device.

``cummax`` picks one element at ties, so its derivative there is a convention: never
under grad (as ``max``). ``sort`` is stable (``jnp.sort``'s default), so its derivative (a
permutation of the cotangent) is defined at ties too.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fuzz.ops.base import BOOL, DIM, AlongAxis


class Scan(AlongAxis):
    family = "scan"
    params = {"axis": DIM}

    def draw(self, draw, ctx, scope):
        e = self.draw_along(draw, scope)
        if e is not None and "reverse" in self.params:
            e["reverse"] = draw(st.booleans())
        return e


class Cumulative(Scan):
    """A running reduction along dim ``axis`` named as NumPy and jax.numpy name it (``jnp.<name>``)."""

    def reference(self, r, eqn, xs, ts, ctx):
        return [getattr(r.xp, self.name)(xs[0], axis=len(ctx.axes) + eqn["axis"])]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.{self.name}({a[0]}, axis={rr.int(eqn['axis'])})"


class Cumsum(Cumulative):
    name = "cumsum"
    feature_names = ("cumsum",)


class Cumprod(Cumulative):
    """``jnp.cumprod(x, axis=axis)``: running products along dim ``axis``, float32 of ``x``'s shape.

    Semantics: ``jax.numpy.cumprod`` (https://docs.jax.dev/en/latest/_autosummary/jax.numpy.cumprod.html),
    as NumPy's; not on an Explicit mesh outside shard_map (AlongAxis): over a sharded dim JAX
    refuses it ("Input should be unsharded over the axis being reduced", ShardingTypeError,
    measured on jax 0.10.2), and the typing rules do not know which dims are sharded there.
    """

    name = "cumprod"
    feature_names = ("cumprod",)


class Cummax(Scan):
    name = "cummax"
    params = {"axis": DIM, "reverse": BOOL}
    grad_ok = False
    feature_names = ("cummax",)

    def reference(self, r, eqn, xs, ts, ctx):
        x = xs[0]
        pos = len(ctx.axes) + eqn["axis"]
        if r.xp is not np:  # (not reached: never under a derivative)
            return [r.jax.lax.cummax(x, axis=pos, reverse=eqn["reverse"])]
        if eqn["reverse"]:
            return [np.flip(np.maximum.accumulate(np.flip(x, pos), axis=pos), pos)]
        return [np.maximum.accumulate(x, axis=pos)]

    def expr(self, rr, eqn, a, ctx):
        return f"jax.lax.cummax({a[0]}, axis={rr.int(eqn['axis'])}, reverse={rr.bool(eqn['reverse'])})"


class Sort(Scan):
    name = "sort"
    feature_names = ("sort",)

    def reference(self, r, eqn, xs, ts, ctx):
        pos = len(ctx.axes) + eqn["axis"]
        if r.xp is np:
            return [np.sort(xs[0], axis=pos, kind="stable")]
        return [r.xp.sort(xs[0], axis=pos, stable=True)]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.sort({a[0]}, axis={rr.int(eqn['axis'])})"


OPS = (Cumsum(), Cumprod(), Cummax(), Sort())
