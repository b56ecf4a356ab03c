"""Scans, windowed reductions and sorts along one dim: ``cumsum`` (``jnp.cumsum``), ``cumprod``
(``jnp.cumprod``), ``cummax`` (``lax.cummax``), ``reduce_window_sum`` / ``reduce_window_max``
(``lax.reduce_window`` with ``lax.add`` / ``lax.max``), ``sort`` (``jnp.sort``), ``top_k``
(``lax.top_k``'s values), ``fft`` (``jnp.fft.fft``'s real or imaginary part).

``cumprod``'s derivative is JAX's (``jax.lax.cumprod``, jax/_src/lax/control_flow/loops.py:
the JVP of an associative scan of ``mul``, defined at zero elements too, which inputs in
multiples of 1/8 have); the reference differentiates ``jnp.cumprod`` eagerly on one device.

The windowed reductions follow XLA's ReduceWindow (https://openxla.org/xla/operation_semantics#reducewindow,
and ``lax.reduce_window``'s docstring): along dim ``axis`` the operand is dilated (``base_dilation`` - 1
init values between elements), padded (``lo`` / ``hi`` init values), and window ``k`` reduces the
``window`` elements at ``k * stride + j * window_dilation``; every other dim has a window of 1.
The init value is the reduction's identity (0 for the sum, -inf for the max), so JAX picks the
``reduce_window_sum`` / ``reduce_window_max`` primitive (jax/_src/lax/windowed_reductions.py,
``_get_monoid_window_reducer``), whose transpose (the sum's) is a padded, strided reduce_window.
XLA's SPMD partitioner exchanges halos between shards for a window along a split dim.

``cummax`` picks one element at ties, so its derivative there is a convention: never
under grad (as ``max``). ``sort`` is stable (``jnp.sort``'s default), so its derivative (a
permutation of the cotangent) is defined at ties too, as is ``top_k``'s: "If two elements are
equal, the lower-index element appears first" (``jax.lax.top_k``'s docstring, from jax 0.7.2;
its ``axis`` argument from 0.8.1, the op's ``since``).

``fft`` is linear, a complex64 transform between float32 values: XLA's SPMD partitioner runs
an FFT along a split dim as a distributed transform of its own (exchanges between shards),
the code a sharding bug in it would live in. Its result is rounded to the nearest point of
the grid ``(k + 1/3) / 8``: a real input's spectrum has equal parts (``Re y[m] == Re y[n - m]``)
that each algorithm (NumPy's, XLA's, a distributed one) computes a few ulps apart, and an
``argmax``, a comparison, an ``astype(int32)`` or a sort's derivative after it would break
those ties each its own way. Rounded, they are equal again, unless a part lies within a few
ulps of the middle between two grid points, ``(6k + 5) / 48``: no multiple of a power of 1/2
does (inputs are multiples of 1/8, and ``cos`` of a multiple of 2 pi / n is rational only at
0, +-1/2, +-1), and no irrational part but by a chance of about 1e-5. The result is
``s + (y - stop_gradient(y))``, exactly the grid point ``s`` with the transform's derivative. ``top_k`` along a split dim is XLA's partitioned
TopK (a top-k per shard, then a merge).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fuzz.ops.base import BOOL, DIM, AlongAxis, Ty, int_schema, require


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


class Windowed(AlongAxis):
    """An op over windows along dim ``axis`` (the windowed reductions here, ``conv`` in linalg.py): ``window``
    elements ``dilations[1]`` apart, every ``stride``, over the operand with ``dilations[0] - 1`` holes
    between elements and ``lo`` / ``hi`` around them; the dim's length becomes ``(lo + hi + (n - 1) * d0 + 1
    - ((window - 1) * d1 + 1)) // stride + 1`` (at least 1). Subclasses name the two dilations as their JAX
    API does (``dilations``) and may add parameters."""

    dilations = ("base_dilation", "window_dilation")
    params = {"axis": DIM, "window": int_schema(1, 4), "stride": int_schema(1, 3), "lo": int_schema(0, 3),
              "hi": int_schema(0, 3), "base_dilation": int_schema(1, 3), "window_dilation": int_schema(1, 3)}

    def positions(self, n: int, e: dict) -> np.ndarray:
        """int array (windows, window): the operand index each window element reads, -1 for a hole or padding."""
        base, step = (e[k] for k in self.dilations)
        padded = e["lo"] + e["hi"] + (n - 1) * base + 1
        extent = (e["window"] - 1) * step + 1
        out = (padded - extent) // e["stride"] + 1 if padded >= extent else 0
        p = (np.arange(out)[:, None] * e["stride"] + np.arange(e["window"])[None, :] * step) - e["lo"]
        real = (p >= 0) & (p % base == 0) & (p // base < n)
        return np.where(real, p // base, -1).reshape(out, e["window"])

    def types(self, eqn, args, ctx):
        (a,) = args
        d = eqn["axis"]
        require(0 <= d < a.rank, f"{self.name} axis {d} out of range for rank {a.rank}")
        require(a.shape[d] >= 1, f"{self.name} along an empty dim")
        require(min(eqn[k] for k in ("window", "stride") + self.dilations) >= 1
                and min(eqn["lo"], eqn["hi"]) >= 0, f"{self.name} with a window, stride or dilation < 1 or padding < 0")
        pos = self.positions(a.shape[d], eqn)
        require(len(pos) >= 1, f"{self.name}'s window is longer than the padded dim {a.shape[d]}")
        require(self.windows_ok(pos), f"{self.name} has a window of init values only")
        return [Ty(a.shape[:d] + (len(pos),) + a.shape[d + 1:], a.vma)]

    def draw(self, draw, ctx, scope):
        e = self.draw_along(draw, scope, nonempty=True)
        if e is None:
            return None
        shape = scope.visible[e["args"][0]].shape
        base, step = self.dilations
        e.update({"window": draw(st.integers(1, 3)), "stride": draw(st.integers(1, 2)), "lo": draw(st.integers(0, 2)),
                  "hi": draw(st.integers(0, 2)), base: draw(st.sampled_from([1, 1, 2])),
                  step: draw(st.sampled_from([1, 1, 2]))})
        e.update(self.draw_more(draw))
        pos = self.positions(shape[e["axis"]], e)
        if len(pos) == 0 or not self.windows_ok(pos):
            self.fall_back(e, shape[e["axis"]])
        return e

    def draw_more(self, draw) -> dict:
        """The subclass's own parameters (none here)."""
        return {}

    def fall_back(self, e: dict, n: int) -> None:
        """Make the drawn window ``e`` valid on a dim of ``n`` (when it is longer than the padded dim, or holds
        no operand element where that is refused): a plain window of at most ``n`` elements."""
        e.update(window=min(e["window"], n), lo=0, hi=0, **{k: 1 for k in self.dilations})

    def windows_ok(self, pos: np.ndarray) -> bool:
        """Whether these windows are valid (all: a hole or padding is a 0 like any other element)."""
        return True

    @staticmethod
    def gather(xp, x, pos: int, idx: np.ndarray, init: float):
        """The windows of ``x`` along dim ``pos``: shape ``x.shape[:pos] + idx.shape + x.shape[pos + 1:]``,
        ``init`` where ``idx`` (:meth:`positions`) is -1."""
        n = x.shape[pos]
        fill = xp.full(x.shape[:pos] + (1,) + x.shape[pos + 1:], init, x.dtype)
        y = xp.take(xp.concatenate([x, fill], axis=pos), np.where(idx < 0, n, idx).reshape(-1), axis=pos)
        return y.reshape(x.shape[:pos] + idx.shape + x.shape[pos + 1:])


class ReduceWindow(Windowed):
    """A windowed reduction along dim ``axis`` (see the module docstring and :class:`Windowed`); float32."""

    family = "scan"
    init = 0.0  # the reduction's identity, and its source
    init_source = "0.0"
    lax_fn = "jax.lax.add"

    def reference(self, r, eqn, xs, ts, ctx):
        x = xs[0]
        pos = len(ctx.axes) + eqn["axis"]
        y = self.gather(r.xp, x, pos, self.positions(x.shape[pos], eqn), self.init)
        return [self.reduce(r.xp, y, pos + 1)]

    def reduce(self, xp, y, axis):
        return xp.sum(y, axis=axis)

    def expr(self, rr, eqn, a, ctx):
        # rank-polymorphic (one function's source serves calls under vmap): the render helper
        # along(x, axis, v) gives v for dim `axis` and 1 (or (0, 0)) for the others
        rr.helpers.add("along")
        d, x = rr.int(eqn["axis"]), a[0]

        def per_dim(key):
            v = rr.int(eqn[key])
            return f"along({x}, {d}, {v})" if v != "1" else f"(1,) * {x}.ndim"

        lo, hi = rr.int(eqn["lo"]), rr.int(eqn["hi"])
        pad = f"along({x}, {d}, ({lo}, {hi}), (0, 0))" if (lo, hi) != ("0", "0") else "'VALID'"
        dil = "".join(f", {k}={per_dim(k)}" for k in ("base_dilation", "window_dilation") if rr.int(eqn[k]) != "1")
        return (f"jax.lax.reduce_window({x}, {self.init_source}, {self.lax_fn}, {per_dim('window')}, "
                f"{per_dim('stride')}, {pad}{dil})")


class ReduceWindowSum(ReduceWindow):
    name = "reduce_window_sum"
    feature_names = ("reduce_window_sum",)


class ReduceWindowMax(ReduceWindow):
    """The max of each window; never under a derivative (ties), and every window holds an operand element
    (a window of init values only would be -inf, which later ops turn into NaN)."""

    name = "reduce_window_max"
    feature_names = ("reduce_window_max",)
    grad_ok = False
    init = -np.inf
    init_source = "-jnp.inf"
    lax_fn = "jax.lax.max"

    def windows_ok(self, pos):
        return bool((pos >= 0).any(axis=1).all())

    def reduce(self, xp, y, axis):
        return xp.max(y, axis=axis)


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


class TopK(AlongAxis):
    """``jax.lax.top_k(x, k, axis=axis)[0]``: the ``k`` largest elements along dim ``axis`` in
    descending order, float32 of x's shape with dim ``axis`` of length ``k`` (1 <= k <= its length).

    Semantics: ``jax.lax.top_k`` (https://docs.jax.dev/en/latest/_autosummary/jax.lax.top_k.html);
    at ties the lower index first, so its derivative (the cotangent scattered to the chosen
    positions) is defined there too. On an Explicit mesh as :class:`fuzz.ops.base.AlongAxis`:
    JAX refuses a split ``axis`` ("The input should be unsharded over the axis along which to
    compute the top_k values", jax/_src/lax/lax.py, jax 0.10.2) and keeps the other dims' splits.
    """

    name = "top_k"
    family = "scan"
    params = {"axis": DIM, "k": int_schema(1, 64)}
    since = "0.8.1"
    feature_names = ("top_k",)

    def types(self, eqn, args, ctx):
        (a,) = args
        d, k = eqn["axis"], eqn["k"]
        require(0 <= d < a.rank, f"top_k axis {d} out of range for rank {a.rank}")
        require(1 <= k <= a.shape[d], f"top_k of {k} along a dim of {a.shape[d]}")
        return [Ty(a.shape[:d] + (k,) + a.shape[d + 1:], a.vma)]

    def draw(self, draw, ctx, scope):
        e = self.draw_along(draw, scope, nonempty=True)
        if e is not None:
            e["k"] = draw(st.integers(1, scope.visible[e["args"][0]].shape[e["axis"]]))
        return e

    def reference(self, r, eqn, xs, ts, ctx):
        x, k = xs[0], eqn["k"]
        pos = len(ctx.axes) + eqn["axis"]
        if r.xp is np:  # descending, ties in index order: a stable sort of -x
            idx = np.take(np.argsort(-x, axis=pos, kind="stable"), np.arange(k), axis=pos)
            return [np.take_along_axis(x, idx, axis=pos)]
        # under a derivative: JAX's own top_k on one device (its documented ties) gives the rule
        v = r.jax.lax.top_k(r.xp.moveaxis(x, pos, -1), k)[0]
        return [r.xp.moveaxis(v, -1, pos)]

    def expr(self, rr, eqn, a, ctx):
        return f"jax.lax.top_k({a[0]}, {rr.int(eqn['k'])}, axis={rr.int(eqn['axis'])})[0]"


class Fft(AlongAxis):
    """``fft_part(x, axis, part)``: ``jnp.fft.fft(x, axis=axis).real`` (``part`` "real") or
    ``.imag``, one part of the discrete Fourier transform along dim ``axis`` (complex64 inside),
    rounded to the grid ``(k + 1/3) / 8`` with the transform's derivative (see the module docstring);
    float32 of x's shape; not along an empty dim.

    Semantics: ``jax.numpy.fft.fft`` (https://docs.jax.dev/en/latest/_autosummary/jax.numpy.fft.fft.html),
    NumPy's ``numpy.fft.fft``: ``y[m] = sum_n x[n] exp(-2 pi i m n / N)``. On an Explicit mesh
    along any dim, split or not: the result has the operand's sharding type (:meth:`sharding_types`).
    """

    name = "fft"
    family = "scan"
    parts = ("real", "imag")
    params = {"axis": DIM, "part": {"enum": list(parts)}}
    feature_names = ("fft",)

    def types(self, eqn, args, ctx):
        (a,) = args
        require(0 <= eqn["axis"] < a.rank, f"fft axis {eqn['axis']} out of range for rank {a.rank}")
        require(a.shape[eqn["axis"]] >= 1, "fft along an empty dim")
        require(eqn["part"] in self.parts, f"fft part {str(eqn['part'])[:20]!r} is not one of {self.parts}")
        return [a]

    def sharding_types(self, eqn, args, outs, ctx):
        """The operand's, whichever dims are split, ``axis`` included (``lax.fft``'s abstract
        evaluation keeps the sharding: measured eagerly and under jit, every spec of a (4, 8) value
        on a (2, 2) Explicit mesh, both axes, jax 0.9.0, 0.9.2 and 0.10.2)."""
        return [args[0].spec]

    def draw(self, draw, ctx, scope):
        e = self.draw_along(draw, scope, nonempty=True)
        if e is not None:
            e["part"] = draw(st.sampled_from(self.parts))
        return e

    def reference(self, r, eqn, xs, ts, ctx):
        xp, third = r.xp, np.float32(1 / 3)
        y = xp.fft.fft(xs[0], axis=len(ctx.axes) + eqn["axis"])
        y = (y.real if eqn["part"] == "real" else y.imag).astype(np.float32)
        s = (xp.round(y * np.float32(8) - third) + third) / np.float32(8)  # (float32 steps, as the source's)
        return [s if xp is np else s + (y - r.jax.lax.stop_gradient(y))]

    def expr(self, rr, eqn, a, ctx):
        rr.helpers.add("fft_part")
        return f"fft_part({a[0]}, {rr.int(eqn['axis'])}, {eqn['part']!r})"  # (a part of self.parts: types)


OPS = (Cumsum(), Cumprod(), Cummax(), ReduceWindowSum(), ReduceWindowMax(), Sort(), TopK(), Fft())
