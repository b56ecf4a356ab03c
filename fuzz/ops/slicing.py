"""Slices and updates along one dim: ``slice``, ``dynamic_slice``, ``dynamic_update_slice``, ``at_set``, ``at_add``.

Semantics (JAX docs):

- ``slice``: ``x[..., start:stop]`` on dim ``axis``, Python slice rules (negative bounds
  count from the end, out-of-range bounds clamp, ``start >= stop`` is empty).
- ``dynamic_slice`` (``lax.dynamic_slice_in_dim(x, i, size, axis)``) and
  ``dynamic_update_slice`` (``lax.dynamic_update_slice_in_dim(x, u, i, axis)``): the start
  ``i`` is a traced int32 scalar; a negative start counts from the end once
  (``allow_negative_indices``, the default), then the start is clamped so that the
  window fits ("the start index is adjusted to return a slice of the requested size",
  ``lax.dynamic_slice`` docstring).
- ``at_set`` / ``at_add`` (``x.at[idx].set(u)`` / ``.add(u)``) on the first dim: ``index``
  a static int, null (a traced int32 scalar, the third argument) or a static slice
  ``[start, stop]`` (null: open). An integer index counts from the end once when
  negative; out of bounds, the update is dropped (``jax.numpy.ndarray.at``: "update
  functions ... out-of-bound indices are dropped"). ``u`` broadcasts to the indexed shape.
  Not on an empty first dim (JAX raises IndexError, measured on 0.10.2).

All are differentiable with respect to their float operands (never the start index).
Reference: windows and masks over the lock-step arrays (``take_along_axis`` and
``where``), not JAX's scatter or gather.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fuzz.ops.base import DIM, INT, ExprOp, Ty, alike, broadcast_shapes, fits, int_schema, keep_along, require
from fuzz.ops.indices import start_index

BOUND = int_schema(-64, 64)
OPTIONAL_BOUND = {"oneOf": [{"type": "null"}, BOUND]}


def python_slice(n: int, start, stop) -> tuple:
    """(first index, length) of ``range(n)[start:stop]``."""
    r = range(n)[slice(start, stop)]
    return (r.start if len(r) else 0), len(r)


PROPER_SLICES = 3  # of 4 static slices: non-empty and within the dim (the rest: any bounds, see slice_bounds)


def slice_bounds(draw, n: int, optional: bool = False) -> tuple:
    """Static bounds (start, stop) of ``x[start:stop]`` along a dim of ``n`` (Python's slice rules).

    ``PROPER_SLICES`` times in 4 a non-empty slice within the dim (the whole dim first, so that
    shrinking goes there), each bound written from the start, from the end (negative) or, where
    it is the dim's end and ``optional``, as None; otherwise any bounds within the schema's limits
    (BOUND), so empty and out-of-range slices stay in the grammar. Independent bounds in
    [-n - 1, n + 1] made 50-67% of the static slices empty (2026-12-07@0005e80: an empty
    ``.at[3:2].set(u)`` is a no-op, an empty ``x[3:2]`` a zero-size array every later op computes
    nothing from), where real code slices rows it means to use.
    """
    if n > 0 and draw(st.integers(0, 3)) < PROPER_SLICES:
        m = min(n, 64)  # (BOUND's limits: a longer dim is sliced within its first 64 rows, written plainly)
        start = draw(st.integers(0, m - 1))
        stop = m - draw(st.integers(0, m - 1 - start))  # rows left out at the end (0 first)
        spell = draw(st.sampled_from(["plain"] if n > 64 else ["plain", "negative", "none"] if optional
                                     else ["plain", "negative"]))
        if spell == "negative":
            return start - n, (stop - n if stop < n else n)
        if spell == "none":
            return (None if start == 0 else start), (None if stop == n else stop)
        return start, stop
    any_bound = range(max(-n - 1, -64), min(n + 2, 65))
    none = [None] if optional else []
    lo = draw(st.sampled_from(none + list(any_bound)))
    hi = draw(st.sampled_from(none + [min(n, 64)] + [v for v in any_bound if v != min(n, 64)]))  # the whole dim first
    return lo, hi


def wrapped(xp, i, n: int):
    """A start index counted from the end once when negative (JAX's default for dynamic indices)."""
    return xp.where(i < 0, i + n, i)


def take_window(xp, x, start, size: int, pos: int, K: int):
    """``x[..., start:start + size, ...]`` along dim ``pos`` of a lock-step array, per index of the K named dims.

    ``start``: an int array of shape ``x.shape[:K]`` (in range: start + size <= n).
    """
    idx = start[..., None] + xp.arange(size, dtype=np.int32)  # (named..., size)
    idx = idx.reshape(idx.shape[:K] + (1,) * (pos - K) + (size,) + (1,) * (x.ndim - pos - 1))
    idx = xp.broadcast_to(idx, x.shape[:pos] + (size,) + x.shape[pos + 1:])
    return xp.take_along_axis(x, idx, axis=pos)


def place(xp, x, u, start, pos: int, K: int, add: bool = False):
    """``x`` with ``u`` written (or added) at ``start .. start + len`` along dim ``pos`` (lock-step).

    ``u`` has x's shape except ``len`` along ``pos``; ``start``: int array of shape
    ``x.shape[:K]``; positions outside ``[0, n)`` are dropped.
    """
    n, m = x.shape[pos], u.shape[pos]
    if m == 0 or n == 0:
        return x
    rel = xp.arange(n, dtype=np.int32) - start[..., None]  # (named..., n)
    inside = (rel >= 0) & (rel < m)
    shape = rel.shape[:K] + (1,) * (pos - K) + (n,) + (1,) * (x.ndim - pos - 1)
    rel, inside = rel.reshape(shape), inside.reshape(shape)
    idx = xp.broadcast_to(xp.clip(rel, 0, m - 1), x.shape)
    got = xp.take_along_axis(u, idx, axis=pos)
    if add:
        return x + xp.where(inside, got, xp.zeros_like(got))
    return xp.where(inside, got, x)


def window_size(draw, ctx, n: int) -> int:
    """A window length in 1..n (0 for an empty dim): half of the time one that a mesh axis
    of size >= 2 divides, when there is such a length below n.

    A window that an axis divides can stay split over it: the SPMD partitioner then slices
    each device's part with a start it must clamp globally, not per shard (a uniform draw
    made 2 of 156 dynamic_slice results in 2000 programs splittable, seeds 1 and 2). The
    uniform draw comes first, so that shrinking goes to 1.
    """
    sizes = {m for m in ctx.mesh.values() if m > 1}
    even = [m for m in range(2, n) if any(m % k == 0 for k in sizes)]
    if even and draw(st.booleans()):
        return draw(st.sampled_from(even))
    return draw(st.integers(min(1, n), n))


def named_shape(ctx) -> tuple:
    return tuple(a.size for a in ctx.axes)


def lifted(xp, i, ctx):
    """An int32 start (lock-step array or Python int) as an array of the named dims' shape."""
    return xp.broadcast_to(xp.asarray(i, dtype=np.int32), named_shape(ctx))


class Slice(ExprOp):
    """``x[..., start:stop]`` on dim ``axis`` (static bounds, Python rules: may be empty)."""

    name = "slice"
    family = "movement"
    explicit_ok = False
    along_param = "axis"
    params = {"axis": DIM, "start": BOUND, "stop": BOUND}
    feature_names = ("slice",)

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Its operand's. Along a split dim: the whole dim, or under jit a length its shards
        divide; eagerly JAX refuses a part ("Use `.at[...].get(out_sharding=)`", jax 0.10.2)."""
        a, d = args[0], eqn["axis"]
        n = outs[0].shape[d]
        if a.dims[d] and n != a.shape[d]:
            require(ctx.jit, "an eager slice of part of a split dim (JAX asks for out_sharding)")
            require(n > 0, "an empty slice of a split dim")
        return [keep_along(self.name, a, d, n, ctx)]

    def types(self, eqn, args, ctx):
        (a,) = args
        d = eqn["axis"]
        require(0 <= d < a.rank, f"slice axis {d} out of range for rank {a.rank}")
        _, length = python_slice(a.shape[d], eqn["start"], eqn["stop"])
        return [Ty(a.shape[:d] + (length,) + a.shape[d + 1:], a.vma)]

    def draw(self, draw, ctx, scope):
        xs = scope.floats(min_rank=1)
        if not xs:
            return None
        a = scope.pick(draw, xs)
        shape = scope.visible[a].shape
        d = draw(st.integers(0, len(shape) - 1))
        n = shape[d]
        start, stop = slice_bounds(draw, n)
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axis": d, "start": start, "stop": stop}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        return [xs[0][(slice(None),) * (K + eqn["axis"]) + (slice(eqn["start"], eqn["stop"]),)]]

    def expr(self, rr, eqn, a, ctx):
        d = int(rr.int(eqn["axis"]))
        bounds = f"{rr.int(eqn['start'])}:{rr.int(eqn['stop'])}"
        return f"{a[0]}[{', '.join([':'] * d + [bounds])}]"


class DynamicSlice(ExprOp):
    """``lax.dynamic_slice_in_dim(x, i, size, axis)``: a traced start (wrapped once, then clamped)."""

    name = "dynamic_slice"
    family = "movement"
    explicit_ok = False
    along_param = "axis"
    n_args = 2
    params = {"axis": DIM, "size": int_schema(0, 64)}
    feature_names = ("dynamic_slice",)
    preludes = ("index",)

    def arg_dtypes(self, eqn):
        return ("float32", INT)

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Its operand's; along a split dim the window's length divisible by the shards
        ("dynamic_slice on sharded dims where out dim ... is not divisible", jax 0.10.2)."""
        d = eqn["axis"]
        return [keep_along(self.name, args[0], d, eqn["size"], ctx)]

    def types(self, eqn, args, ctx):
        a, i = args
        d, size = eqn["axis"], eqn["size"]
        require(i.rank == 0, "a start index is a scalar")
        require(0 <= d < a.rank, f"dynamic_slice axis {d} out of range for rank {a.rank}")
        require(0 <= size <= a.shape[d], f"dynamic_slice size {size} larger than dim {a.shape[d]}")
        return [Ty(a.shape[:d] + (size,) + a.shape[d + 1:], a.vma | i.vma)]

    def draw(self, draw, ctx, scope):
        xs = scope.floats(min_rank=1)
        if not xs:
            return None
        got = start_index(draw, ctx, scope)
        if got is None:
            return None
        prelude, i = got
        a = scope.pick(draw, xs)
        shape = scope.visible[a].shape
        d = draw(st.integers(0, len(shape) - 1))
        size = window_size(draw, ctx, shape[d])
        return prelude + [{"op": self.name, "args": [a, i], "outs": [scope.new_var()], "axis": d, "size": size}]

    def reference(self, r, eqn, xs, ts, ctx):
        xp = r.xp
        K = len(ctx.axes)
        x, i = xs
        pos = K + eqn["axis"]
        n, size = x.shape[pos], eqn["size"]
        start = xp.clip(wrapped(xp, lifted(xp, i, ctx), n), 0, n - size)
        return [take_window(xp, x, start, size, pos, K)]

    def expr(self, rr, eqn, a, ctx):
        return f"jax.lax.dynamic_slice_in_dim({a[0]}, {a[1]}, {rr.int(eqn['size'])}, axis={rr.int(eqn['axis'])})"


class DynamicUpdateSlice(ExprOp):
    """``lax.dynamic_update_slice_in_dim(x, u, i, axis)``: ``u`` written at a traced, clamped start."""

    name = "dynamic_update_slice"
    family = "movement"
    explicit_ok = False
    along_param = "axis"
    n_args = 3
    params = {"axis": DIM}
    feature_names = ("dynamic_update_slice",)
    preludes = ("index",)

    def arg_dtypes(self, eqn):
        return ("float32", "float32", INT)

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """The update split as the operand (:func:`fuzz.ops.base.alike`); the result as the operand."""
        return [alike(self.name, args[:2])]

    def types(self, eqn, args, ctx):
        a, u, i = args
        d = eqn["axis"]
        require(i.rank == 0, "a start index is a scalar")
        require(0 <= d < a.rank and u.rank == a.rank, f"dynamic_update_slice of {u.shape} into {a.shape}")
        require(all(u.shape[k] == a.shape[k] for k in range(a.rank) if k != d) and u.shape[d] <= a.shape[d],
                f"dynamic_update_slice of {u.shape} into {a.shape} along {d}")
        return [Ty(a.shape, a.vma | u.vma | i.vma)]

    def draw(self, draw, ctx, scope):
        vis = scope.visible
        pairs = [(a, u, d) for a in scope.floats(min_rank=1) for u in scope.floats(min_rank=1)
                 for d in range(vis[a].rank) if vis[u].rank == vis[a].rank and vis[u].shape[d] <= vis[a].shape[d]
                 and all(vis[u].shape[k] == vis[a].shape[k] for k in range(vis[a].rank) if k != d)]
        if not pairs:
            return None
        got = start_index(draw, ctx, scope)
        if got is None:
            return None
        prelude, i = got
        a, u, d = draw(st.sampled_from(pairs))
        return prelude + [{"op": self.name, "args": [a, u, i], "outs": [scope.new_var()], "axis": d}]

    def reference(self, r, eqn, xs, ts, ctx):
        xp = r.xp
        K = len(ctx.axes)
        x, u, i = xs
        pos = K + eqn["axis"]
        n, m = x.shape[pos], u.shape[pos]
        start = xp.clip(wrapped(xp, lifted(xp, i, ctx), n), 0, n - m)
        return [place(xp, x, u, start, pos, K)]

    def expr(self, rr, eqn, a, ctx):
        return f"jax.lax.dynamic_update_slice_in_dim({a[0]}, {a[1]}, {a[2]}, axis={rr.int(eqn['axis'])})"


class At(ExprOp):
    """``x.at[index].set(u)`` / ``.add(u)`` on the first dim (see the module docstring)."""

    family = "movement"
    explicit_ok = False
    n_args = frozenset({2, 3})
    params = {"index": {"oneOf": [{"type": "null"}, BOUND,
                                  {"type": "array", "items": OPTIONAL_BOUND, "minItems": 2, "maxItems": 2}]}}
    preludes = ("index", "slice")
    method = ""

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """The operand's, its first dim unsplit and the update unsplit (a scatter into a split
        operand: "Use `.at[...].set/add/mul/...(out_sharding=)`", jax 0.10.2)."""
        a, u = args[:2]
        require(not a.dims[0] and not u.sharded, f"{self.name} into a split first dim or of a split update")
        return [a.spec]

    def along(self, eqn):
        return 0, 0  # (the first dim: the rows an index names)

    def arg_dtypes(self, eqn):
        return ("float32", "float32") + ((INT,) if eqn["index"] is None else ())

    def target(self, eqn, a: Ty) -> tuple:
        idx = eqn["index"]
        if isinstance(idx, list):
            return (python_slice(a.shape[0], *idx)[1],) + a.shape[1:]
        return a.shape[1:]

    def types(self, eqn, args, ctx):
        idx = eqn["index"]
        require(idx is None or type(idx) is int or (isinstance(idx, list) and len(idx) == 2 and all(
            b is None or type(b) is int for b in idx)), f"{self.name} index {str(idx)[:40]} (null, int or [start, stop])")
        require(len(args) == (3 if idx is None else 2),
                f"{self.name} takes a traced index (a third argument) exactly when its index is null")
        a, u = args[:2]
        require(a.rank >= 1 and a.shape[0] > 0, f"{self.name} needs a non-empty first dim, not {a.shape}")
        if len(args) == 3:
            require(args[2].rank == 0, "an index is a scalar")
        want = self.target(eqn, a)
        require(u.rank <= len(want) and broadcast_shapes(u.shape, want) == want,
                f"{self.name} of {u.shape} into {want}")
        return [Ty(a.shape, frozenset().union(*(t.vma for t in args)))]

    def draw(self, draw, ctx, scope):
        vis = scope.visible
        xs = [a for a in scope.floats(min_rank=1) if vis[a].shape[0] > 0]
        if not xs:
            return None
        a = scope.pick(draw, xs)
        n = vis[a].shape[0]
        kind = draw(st.sampled_from(["static", "traced", "slice"]))
        prelude, extra = [], []
        if kind == "static":
            idx = draw(st.integers(max(-n - 2, -64), min(n + 1, 64)))  # (BOUND's limits)
        elif kind == "slice":
            idx = list(slice_bounds(draw, n, optional=True))
        else:
            got = start_index(draw, ctx, scope)
            if got is None:
                idx = 0
            else:
                prelude, i = got
                idx, extra = None, [i]
        e = {"op": self.name, "args": [a], "outs": [], "index": idx}
        want = self.target(e, vis[a])
        us = [u for u in scope.floats() if vis[u].rank <= len(want) and _fits(vis[u].shape, want)]
        u = draw(st.sampled_from(us)) if us else None
        if kind == "slice" and "slice" not in scope.disabled and 0 < want[0] < n and draw(st.booleans()):
            # the update a shifted window of the operand itself, x.at[a:b].set(x[c:d]): the
            # idiom of shift registers, rolling buffers and caches
            start, m = python_slice(n, *idx)
            s = draw(st.sampled_from([k for k in range(n - m + 1) if k != start]))
            view = {"op": "slice", "args": [a], "outs": [scope.new_var()], "axis": 0, "start": s, "stop": s + m}
            prelude, u = prelude + [view], view["outs"][0]
        if u is None:
            return None
        e["args"] = [a, u] + extra
        e["outs"] = [scope.new_var()]
        return prelude + [e]

    def reference(self, r, eqn, xs, ts, ctx):
        xp = r.xp
        K = len(ctx.axes)
        x, u = xs[:2]
        n = x.shape[K]
        idx = eqn["index"]
        want = self.target(eqn, ts[0])
        sizes = named_shape(ctx)
        if isinstance(idx, list):
            start, _ = python_slice(n, *idx)
            start = lifted(xp, start, ctx)
        else:
            want = (1,) + want  # one row
            i = xs[2] if idx is None else idx
            start = wrapped(xp, lifted(xp, i, ctx), n)  # out of [0, n) after that: dropped
        # u broadcast to the indexed shape, per index of the named dims
        ub = u.reshape(u.shape[:K] + (1,) * (len(want) - ts[1].rank) + u.shape[K:])
        ub = xp.broadcast_to(ub, sizes + want)
        return [place(xp, x, ub, start, K, K, add=self.method == "add")]

    def expr(self, rr, eqn, a, ctx):
        idx = eqn["index"]
        if idx is None:
            where = a[2]
        elif isinstance(idx, list):
            where = ":".join("" if b is None else rr.int(b) for b in idx)
        else:
            where = rr.int(idx)
        return f"{a[0]}.at[{where}].{self.method}({a[1]}{self.keywords(a)})"

    def keywords(self, a: list) -> str:
        """Keyword arguments of the ``.set`` / ``.add`` call after the update (source text)."""
        return ""

    def features(self, eqn):
        return {f"at_{self.method}"}


class AtOutSharding(At):
    """``x.at[index].set(u, out_sharding=jax.typeof(x).sharding.spec)`` / ``.add(...)``: an update
    on an Explicit mesh (outside shard_map bodies) that names its output's sharding, as JAX asks
    for an operand split along the updated dim or a split update ("Use
    `.at[...].set/add/mul/...(out_sharding=)` to provide output PartitionSpec for the scatter
    update", ShardingTypeError, jax 0.10.2). The keyword came in jax 0.7.2
    (jax/_src/numpy/array_methods.py, ``_IndexUpdateRef.set``). The result has the operand's
    sharding type whatever the update's (measured on 0.8.1 and 0.10.2, eager and under jit, under
    vmap and grad); values as :class:`At`.
    """

    since = "0.7.2"
    feature_names = ("at_out_sharding",)

    def sharding_types(self, eqn, args, outs, ctx):
        return [args[0].spec]

    def types(self, eqn, args, ctx):
        require(ctx.explicit and not ctx.manual,
                f"{self.name} on an Explicit mesh outside shard_map bodies only (out_sharding names its sharding type)")
        return super().types(eqn, args, ctx)

    def draw(self, draw, ctx, scope):
        return super().draw(draw, ctx, scope) if ctx.explicit and not ctx.manual else None

    def keywords(self, a: list) -> str:
        return f", out_sharding=jax.typeof({a[0]}).sharding.spec"

    def features(self, eqn):
        return {f"at_{self.method}", "at_out_sharding"}


def _fits(shape: tuple, want: tuple) -> bool:
    return fits(shape, want) and broadcast_shapes(shape, want) == want


class AtSet(At):
    name, method = "at_set", "set"


class AtAdd(At):
    name, method = "at_add", "add"


class AtSetOutSharding(AtOutSharding):
    name, method = "at_set_out_sharding", "set"


class AtAddOutSharding(AtOutSharding):
    name, method = "at_add_out_sharding", "add"


OPS = (Slice(), DynamicSlice(), DynamicUpdateSlice(), AtSet(), AtAdd(), AtSetOutSharding(), AtAddOutSharding())
