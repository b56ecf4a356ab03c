"""Data movement: ``broadcast`` (a new leading dim of ``size`` copies), ``roll``, ``flip``, ``pad``, ``concatenate``,
``reshape``, ``split``, ``insert``.

Semantics (JAX docs): ``jnp.roll(x, shift, axis)`` as NumPy (any shift, taken modulo the
dim); ``jnp.flip(x, axis)`` as NumPy (JAX's ``rev`` primitive, which XLA's SPMD
partitioner moves between shards when the dim is split); ``pad`` on one dim with ``lo`` / ``hi`` zeros before / after and ``interior`` zeros
between elements, negative ``lo`` / ``hi`` cropping (``lax.pad``: "negative padding
removes elements"; rendered as ``jnp.pad`` when nothing is negative or interior);
``jnp.concatenate([a, b], axis)``; ``jnp.insert(x, index, v, axis)`` with a static
``index`` (``jax/_src/numpy/lax_numpy.py``, the same from 0.4.26 to 0.10.2: a negative
index counts from the end, then it is clipped to ``[0, n]``, where NumPy would raise);
``jnp.split(x, 2, axis)`` (two outputs, the halves of an
even dim). Each is linear in its float operands (differentiable
under grad) and varies wherever an operand does.
"""
from __future__ import annotations

import math

from hypothesis import strategies as st

from fuzz.ops.base import DIM, AlongAxis, ExprOp, Op, Ty, alike, int_schema, keep_along, require, sharding_spec


class Broadcast(ExprOp):
    name = "broadcast"
    family = "broadcast"
    params = {"size": int_schema(1, 64)}

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Its operand's after an unsplit new dim (jax 0.10.2)."""
        return [sharding_spec(((),) + args[0].dims)]

    def types(self, eqn, args, ctx):
        return [Ty((eqn["size"],) + args[0].shape, args[0].vma)]

    def draw(self, draw, ctx, scope):
        xs = [v for v in scope.small() if scope.visible[v].rank < scope.max_rank]
        if not xs:
            return None
        return {"op": self.name, "args": [scope.pick(draw, xs)], "outs": [scope.new_var()],
                "size": draw(st.sampled_from([1, 2]))}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        y = r.xp.expand_dims(xs[0], K)
        return [r.xp.broadcast_to(y, y.shape[:K] + (eqn["size"],) + y.shape[K + 1:])]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.broadcast_to({a[0]}, ({rr.int(eqn['size'])},) + {a[0]}.shape)"

    def as_rank1(self, arg, out):
        return {"op": self.name, "args": [arg], "outs": [out], "size": 1}


class Roll(AlongAxis):
    """``jnp.roll(x, shift, axis=axis)``."""

    name = "roll"
    family = "movement"
    params = {"axis": DIM, "shift": int_schema(-64, 64)}
    feature_names = ("roll",)

    def draw(self, draw, ctx, scope):
        e = self.draw_along(draw, scope)
        if e is not None:
            n = scope.visible[e["args"][0]].shape[e["axis"]]
            e["shift"] = draw(st.integers(max(-2 * n - 1, -64), min(2 * n + 1, 64)))  # (the schema's bounds)
        return e

    def reference(self, r, eqn, xs, ts, ctx):
        return [r.xp.roll(xs[0], eqn["shift"], axis=len(ctx.axes) + eqn["axis"])]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.roll({a[0]}, {rr.int(eqn['shift'])}, axis={rr.int(eqn['axis'])})"


class Flip(AlongAxis):
    """``jnp.flip(x, axis=axis)``: the elements of dim ``axis`` in reverse order (lax.rev), float32 of ``x``'s shape."""

    name = "flip"
    family = "movement"
    params = {"axis": DIM}
    feature_names = ("flip",)

    def sharding_types(self, eqn, args, outs, ctx):
        """Its operand's, along a split dim too (XLA exchanges the shards: jax 0.10.2)."""
        return [args[0].spec]

    def draw(self, draw, ctx, scope):
        return self.draw_along(draw, scope)

    def reference(self, r, eqn, xs, ts, ctx):
        return [r.xp.flip(xs[0], axis=len(ctx.axes) + eqn["axis"])]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.flip({a[0]}, axis={rr.int(eqn['axis'])})"


class Pad(ExprOp):
    """Zeros around (``lo``, ``hi``, negative: crop) and between (``interior``) the elements of dim ``axis``."""

    name = "pad"
    family = "movement"
    explicit_ok = False
    along_param = "axis"
    params = {"axis": DIM, "lo": int_schema(-64, 64), "hi": int_schema(-64, 64), "interior": int_schema(0, 4)}
    feature_names = ("pad",)

    @staticmethod
    def length(n: int, e: dict) -> int:
        return e["lo"] + e["hi"] + n + max(n - 1, 0) * e["interior"]

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Its operand's; a split dim must stay divisible ("padding on sharded dims where out dim
        ... is not divisible", jax 0.10.2; negative padding included)."""
        d = eqn["axis"]
        return [keep_along(self.name, args[0], d, outs[0].shape[d], ctx)]

    def types(self, eqn, args, ctx):
        (a,) = args
        d = eqn["axis"]
        require(0 <= d < a.rank, f"pad axis {d} out of range for rank {a.rank}")
        n = self.length(a.shape[d], eqn)
        require(n >= 0, f"pad {eqn['lo']}, {eqn['hi']} removes more than dim {a.shape[d]} has")
        return [Ty(a.shape[:d] + (n,) + a.shape[d + 1:], a.vma)]

    def draw(self, draw, ctx, scope):
        xs = [v for v in scope.small(factor=4) if scope.visible[v].rank >= 1]
        if not xs:
            return None
        a = scope.pick(draw, xs)
        shape = scope.visible[a].shape
        d = draw(st.integers(0, len(shape) - 1))
        n = shape[d]
        lo = draw(st.integers(max(-n, -64), 3))  # (the schema's bounds)
        hi = draw(st.integers(max(-n, -64), 3))
        interior = draw(st.sampled_from([0, 0, 1, 2]))
        e = {"op": self.name, "args": [a], "outs": [scope.new_var()], "axis": d, "lo": lo, "hi": hi,
             "interior": interior}
        if self.length(n, e) < 0:
            e["lo"], e["hi"] = max(lo, 0), max(hi, 0)
        return e

    def reference(self, r, eqn, xs, ts, ctx):
        xp = r.xp
        x = xs[0]
        pos = len(ctx.axes) + eqn["axis"]
        n, k = x.shape[pos], eqn["interior"]

        def zeros(m):
            return xp.zeros(x.shape[:pos] + (m,) + x.shape[pos + 1:], x.dtype)

        if k and n:  # interior: each element followed by k zeros, the last k dropped
            y = xp.stack([x] + [zeros(n)] * k, axis=pos + 1)
            x = y.reshape(x.shape[:pos] + (n * (k + 1),) + x.shape[pos + 1:])
            x = x[(slice(None),) * pos + (slice(0, n + (n - 1) * k),)]
        lo, hi = eqn["lo"], eqn["hi"]
        x = xp.concatenate([zeros(max(lo, 0)), x, zeros(max(hi, 0))], axis=pos)
        end = x.shape[pos] + min(hi, 0)
        return [x[(slice(None),) * pos + (slice(-min(lo, 0), end),)]]

    def expr(self, rr, eqn, a, ctx):
        # rank-polymorphic: one function may be called on values of other ranks (under vmap)
        d = rr.int(eqn["axis"])
        lo, hi, k = rr.int(eqn["lo"]), rr.int(eqn["hi"]), rr.int(eqn["interior"])
        if int(lo) >= 0 and int(hi) >= 0 and int(k) == 0:
            return f"jnp.pad({a[0]}, [({lo}, {hi}) if _d == {d} else (0, 0) for _d in range({a[0]}.ndim)])"
        return f"jax.lax.pad({a[0]}, 0.0, [({lo}, {hi}, {k}) if _d == {d} else (0, 0, 0) for _d in range({a[0]}.ndim)])"


class Concatenate(ExprOp):
    """``jnp.concatenate([a, b], axis=axis)``."""

    name = "concatenate"
    family = "movement"
    explicit_ok = False
    along_param = "axis"
    n_args = 2
    params = {"axis": DIM}
    feature_names = ("concatenate",)

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Both operands split alike (:func:`fuzz.ops.base.alike`); the result as they are."""
        return [alike(self.name, args)]

    def types(self, eqn, args, ctx):
        a, b = args
        d = eqn["axis"]
        require(a.rank == b.rank and 0 <= d < a.rank, f"concatenate of {a.shape} and {b.shape} along {d}")
        require(all(a.shape[k] == b.shape[k] for k in range(a.rank) if k != d),
                f"concatenate of {a.shape} and {b.shape} along {d}")
        return [Ty(a.shape[:d] + (a.shape[d] + b.shape[d],) + a.shape[d + 1:], a.vma | b.vma)]

    def draw(self, draw, ctx, scope):
        vis = scope.visible
        xs = scope.floats(min_rank=1)
        triples = [(a, b, d) for a in xs for b in xs for d in range(vis[a].rank)
                   if vis[a].rank == vis[b].rank and vis[a].size + vis[b].size <= scope.max_elements
                   and all(vis[a].shape[k] == vis[b].shape[k] for k in range(vis[a].rank) if k != d)]
        if not triples:
            return None
        a, b, d = draw(st.sampled_from(triples))
        return {"op": self.name, "args": [a, b], "outs": [scope.new_var()], "axis": d}

    def reference(self, r, eqn, xs, ts, ctx):
        return [r.xp.concatenate(xs, axis=len(ctx.axes) + eqn["axis"])]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.concatenate([{a[0]}, {a[1]}], axis={rr.int(eqn['axis'])})"


class Reshape(ExprOp):
    """``jnp.reshape(x, dims)``: the same elements in row-major order; one entry of ``dims`` may be -1
    (inferred, not for an empty array). Linear; not on an Explicit mesh outside shard_map ("This
    reshape is not supported. Please specify the sharding of the output", jax 0.10.2)."""

    name = "reshape"
    family = "movement"
    explicit_ok = False
    params = {"dims": {"type": "array", "items": int_schema(-1, 4096), "maxItems": 6}}
    feature_names = ("reshape",)

    @staticmethod
    def resolved(a: Ty, dims: list) -> tuple:
        require(all(isinstance(d, int) and d >= -1 for d in dims) and list(dims).count(-1) <= 1,
                f"reshape dims {dims} (sizes, and at most one -1)")
        known = math.prod(d for d in dims if d != -1)
        if -1 in dims:
            require(a.size > 0 and known > 0 and a.size % known == 0, f"reshape of {a.shape} to {dims}")
            return tuple(a.size // known if d == -1 else d for d in dims)
        require(known == a.size, f"reshape of {a.shape} to {dims}")
        return tuple(dims)

    explicit_rule = True  # (replicated operands only: the default rule refuses a split one)

    def types(self, eqn, args, ctx):
        return [Ty(self.resolved(args[0], eqn["dims"]), args[0].vma)]

    def draw(self, draw, ctx, scope):
        xs = scope.floats()
        if not xs:
            return None
        a = scope.pick(draw, xs)
        shape = list(scope.visible[a].shape)
        options = [[-1]] if math.prod(shape) > 0 else [[0]]  # flatten first
        options += [shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:] for d in range(len(shape) - 1)]  # merge
        options += [shape[:d] + [f, shape[d] // f] + shape[d + 1:]  # split
                    for d in range(len(shape)) for f in (2, 4) if shape[d] % f == 0 and shape[d] > f]
        if len(shape) < scope.max_rank:
            options += [shape[:d] + [1] + shape[d:] for d in range(len(shape) + 1)]  # a unit dim
        options += [shape[:d] + shape[d + 1:] for d in range(len(shape)) if shape[d] == 1]  # drop one
        max_dims = self.params["dims"]["maxItems"]  # (a Jacobian's result may have more dims than that)
        dims = list(draw(st.sampled_from([o for o in options if len(o) <= max_dims])))
        if len(dims) > 1 and math.prod(shape) > 0 and draw(st.booleans()):
            dims[draw(st.integers(0, len(dims) - 1))] = -1
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "dims": dims}

    def reference(self, r, eqn, xs, ts, ctx):
        x = xs[0]
        return [x.reshape(x.shape[:len(ctx.axes)] + self.resolved(ts[0], eqn["dims"]))]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.reshape({a[0]}, {rr.ints_source(eqn['dims'])})"

    def as_rank1(self, arg, out):
        return {"op": self.name, "args": [arg], "outs": [out], "dims": [1]}


class Split(Op):
    """``jnp.split(x, 2, axis=axis)``: two outputs, the first and second halves of dim ``axis``.

    float32 operand of rank >= 1 whose dim ``axis`` is even (0 included: two empty halves);
    each output has that dim halved and varies where ``x`` does. Semantics:
    ``jax.numpy.split`` (https://docs.jax.dev/en/latest/_autosummary/jax.numpy.split.html), as
    NumPy's with an integer number of equal sections. Linear. Not on an Explicit mesh outside
    shard_map, as ``slice`` (sharding types: not modelled), although it ran there on jax 0.10.2
    (a (4, 8) value sharded P('x'), P(None, 'y'), P('x', 'y') or P() over a 2x2 mesh, split
    along either dim, eagerly and under jit, and its gradient): a measurement the generator has
    not yet tried more widely.
    """

    name = "split"
    family = "movement"
    explicit_ok = False
    along_param = "axis"
    n_outs = frozenset({2})
    params = {"axis": DIM}
    feature_names = ("split",)

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Its operand's for each half; a split dim's halves stay divisible (jax 0.10.2)."""
        d = eqn["axis"]
        return [keep_along(self.name, args[0], d, o.shape[d], ctx) for o in outs]

    def types(self, eqn, args, ctx):
        (a,) = args
        d = eqn["axis"]
        require(0 <= d < a.rank, f"split axis {d} out of range for rank {a.rank}")
        require(a.shape[d] % 2 == 0, f"split of dim {d} of {a.shape} in two: the dim is odd")
        half = a.shape[:d] + (a.shape[d] // 2,) + a.shape[d + 1:]
        return [Ty(half, a.vma), Ty(half, a.vma)]

    def draw(self, draw, ctx, scope):
        pairs = [(v, d) for v in scope.floats(min_rank=1) for d, n in enumerate(scope.visible[v].shape) if n % 2 == 0]
        if not pairs:
            return None
        a, d = draw(st.sampled_from(pairs))
        return {"op": self.name, "args": [a], "outs": [scope.new_var(), scope.new_var()], "axis": d}

    def reference(self, r, eqn, xs, ts, ctx):
        return list(r.xp.split(xs[0], 2, axis=len(ctx.axes) + eqn["axis"]))

    def render(self, rr, eqn, args, outs, ctx, ind):
        return [f"{ind}{outs[0]}, {outs[1]} = jnp.split({args[0]}, 2, axis={rr.int(eqn['axis'])})"]


class Insert(ExprOp):
    """``jnp.insert(x, index, v, axis=axis)``: one new slice ``v`` before position ``index`` of dim ``axis``.

    ``x``: float32 of rank >= 1, dim ``axis`` of size n; ``v``: float32 of x's shape
    without dim ``axis``, or a scalar (the new slice filled with it); result: x's shape
    with n + 1 at ``axis``. ``index`` is static and may be out of range: JAX adds n to a
    negative one and clips to ``[0, n]`` (module docstring).
    """

    name = "insert"
    family = "movement"
    explicit_ok = False
    along_param = "axis"
    n_args = 2
    params = {"axis": DIM, "index": int_schema(-64, 64)}
    feature_names = ("insert",)

    explicit_rule = True  # (replicated operands only: on a split one "Incompatible types for broadcasting", jax 0.10.2)

    @staticmethod
    def slice_shape(shape: tuple, d: int) -> tuple:
        return shape[:d] + shape[d + 1:]

    def types(self, eqn, args, ctx):
        a, v = args
        d = eqn["axis"]
        require(0 <= d < a.rank, f"insert axis {d} out of range for rank {a.rank}")
        require(v.rank == 0 or v.shape == self.slice_shape(a.shape, d),
                f"insert of a {v.shape} slice into {a.shape} along {d}")
        return [Ty(a.shape[:d] + (a.shape[d] + 1,) + a.shape[d + 1:], a.vma | v.vma)]

    def draw(self, draw, ctx, scope):
        vis = scope.visible
        xs = scope.floats(min_rank=1)
        if not xs:
            return None
        a = scope.pick(draw, xs)
        d = draw(st.integers(0, vis[a].rank - 1))
        slices = [v for v in scope.floats() if vis[v].rank == 0 or vis[v].shape == self.slice_shape(vis[a].shape, d)]
        if not slices:
            return None
        n = vis[a].shape[d]
        return {"op": self.name, "args": [a, draw(st.sampled_from(slices))], "outs": [scope.new_var()], "axis": d,
                "index": draw(st.integers(0, min(n, 64)) | st.integers(max(-n - 2, -64), min(n + 2, 64)))}

    def reference(self, r, eqn, xs, ts, ctx):
        xp = r.xp
        x, v = xs
        K = len(ctx.axes)
        pos = K + eqn["axis"]
        n = x.shape[pos]
        i = eqn["index"] + n if eqn["index"] < 0 else eqn["index"]
        i = min(max(i, 0), n)
        if v.ndim == K:  # a scalar per example: the whole slice
            v = v.reshape(v.shape + (1,) * (x.ndim - K))
        v = xp.broadcast_to(xp.expand_dims(v, pos) if v.ndim < x.ndim else v,
                            x.shape[:pos] + (1,) + x.shape[pos + 1:])
        head, tail = (slice(None),) * pos + (slice(0, i),), (slice(None),) * pos + (slice(i, n),)
        return [xp.concatenate([x[head], v, x[tail]], axis=pos)]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.insert({a[0]}, {rr.int(eqn['index'])}, {a[1]}, axis={rr.int(eqn['axis'])})"


OPS = (Broadcast(), Roll(), Flip(), Pad(), Concatenate(), Reshape(), Split(), Insert())
