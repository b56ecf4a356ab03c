"""Linear algebra: ``matmul`` (``a @ b``, ``b`` of rank 2), ``einsum`` (``jnp.einsum`` of two operands:
a dot_general with batch and contracting dims anywhere), ``transpose`` (all dims reversed) and ``conv``
(``lax.conv_general_dilated`` along one dim with a seeded kernel) and ``conv_nc`` (``lax.conv_general_dilated``
of an (N, C, spatial...) operand in place: features, groups, one or two spatial dims).

Dtypes: ``matmul`` of two float32, bfloat16, float16 or int32 operands of one dtype, the
result in that dtype (jnp.matmul without ``preferred_element_type``). XLA CPU computes a
bfloat16 dot in float32 and rounds the result once (compiled HLO measured on jax 0.10.2:
converts around an f32 dot), as the NumPy reference does (:func:`fuzz.ops.base.compute`);
int32 accumulates in int32, wrapping, in both. ``transpose`` moves any dtype.

``conv`` is a one-channel convolution of a float32 value along dim ``axis`` with the kernel
``weights(seed, (window,))`` (fuzz.values.weights): the dim is moved last, the others
folded into the batch dim, and ``lax.conv_general_dilated`` computes, per XLA's Conv
(https://openxla.org/xla/operation_semantics#conv, a correlation: the kernel is not flipped),
``out[k] = sum_j w[j] * x'[k * stride + j * rhs_dilation]`` where ``x'`` is ``x`` with
``lhs_dilation - 1`` zeros between elements and ``lo`` / ``hi`` zeros around them: the windows
of ``reduce_window_sum`` (fuzz/ops/scans.py), weighted. XLA's SPMD partitioner splits a
convolution's spatial dim with halo exchanges of its own (``PartitionConvolution``).
"""
from __future__ import annotations

import math

import numpy as np

from hypothesis import strategies as st

from fuzz.ops.base import (NUMERIC, SEED, VALUE_DTYPES, ExprOp, ProgramError, Ty, compute, int_schema, require, same_dtype,
                           sharding_spec)
from fuzz.ops.scans import Windowed


class Matmul(ExprOp):
    name = "matmul"
    family = "matmul"
    n_args = 2
    dtypes = NUMERIC

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """``a``'s dims but the last, then ``b``'s last; not with a split contracting dim ("Contracting
        dimensions are sharded and it is ambiguous how the output should be sharded", jax 0.10.2)."""
        a, b = args
        require(not a.dims[-1] and not b.dims[0], "matmul with a split contracting dim (JAX asks for out_sharding)")
        return [sharding_spec(a.dims[:-1] + b.dims[1:])]

    def types(self, eqn, args, ctx):
        a, b = args
        dt = same_dtype(self.name, args, self.dtypes)
        require(a.rank >= 1 and b.rank == 2 and a.shape[-1] == b.shape[0], f"matmul of {a.shape} and {b.shape}")
        return [Ty(a.shape[:-1] + (b.shape[1],), a.vma | b.vma, dt)]

    def draw(self, draw, ctx, scope):
        vis = scope.visible
        xs = scope.values(self.dtypes)
        pairs = [(a, b) for a in xs for b in xs
                 if vis[b].rank == 2 and vis[a].rank >= 1 and vis[a].shape[-1] == vis[b].shape[0]
                 and vis[a].dtype == vis[b].dtype]
        if not pairs:
            return None
        a, b = draw(st.sampled_from(pairs))
        return {"op": self.name, "args": [a, b], "outs": [scope.new_var()]}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        a, b = xs
        dt = ts[0].dtype
        if ts[0].rank == 1:
            return [compute(r, dt, lambda u, v: r.xp.einsum("...k,...kn->...n", u, v), a, b)]
        b = b.reshape(b.shape[:K] + (1,) * (ts[0].rank - 2) + b.shape[K:])
        return [compute(r, dt, r.xp.matmul, a, b)]

    def expr(self, rr, eqn, a, ctx):
        return f"{a[0]} @ {a[1]}"


LETTERS = "abcdefghijklmnop"  # einsum's labels: label k is LETTERS[k]
LABELS = {"type": "array", "items": int_schema(0, len(LETTERS) - 1), "maxItems": 8}


class Einsum(ExprOp):
    """``jnp.einsum("lhs,rhs->out", a, b)``: one label per dim (``lhs``, ``rhs``, ``out``: lists of ints,
    label k written as the letter ``LETTERS[k]``). A label in both operands and the result is a batch
    dim, in both operands only a contracting dim (summed), in one operand and the result a free dim;
    every label of an operand is in the other operand or the result (no dim summed alone), none
    twice in one operand or the result. The result has the labels' sizes in ``out``'s order and
    ``a``'s dtype (float32, bfloat16, float16 or int32, both operands alike; computed as ``matmul``
    is, see the module docstring).

    Semantics: ``numpy.einsum`` (jax.numpy.einsum's docstring: "Einstein summation", NumPy's
    conventions); JAX lowers it to one ``lax.dot_general`` (batch and contracting dims in any
    position, jax/_src/numpy/einsum.py) and transposes. XLA's SPMD partitioner has rules of its
    own for a dot whose batch, contracting or free dims are split (``PartitionDot``: an all-reduce
    of partial sums for a split contracting dim, windowed einsums, ...), which ``matmul`` (one
    contracting dim, last of ``a``, first of a rank-2 ``b``) reaches only in part.
    """

    name = "einsum"
    family = "matmul"
    n_args = 2
    dtypes = NUMERIC
    explicit_ok = False  # (its sharding types on an Explicit mesh are not modelled)
    params = {"lhs": LABELS, "rhs": LABELS, "out": LABELS}
    feature_names = ("einsum",)

    def types(self, eqn, args, ctx):
        a, b = args
        dt = same_dtype(self.name, args, self.dtypes)
        lhs, rhs, out = eqn["lhs"], eqn["rhs"], eqn["out"]
        require(len(lhs) == a.rank and len(rhs) == b.rank,
                f"einsum labels {lhs}, {rhs} for operands of ranks {a.rank} and {b.rank}")
        for name, labels in (("lhs", lhs), ("rhs", rhs), ("out", out)):
            require(len(set(labels)) == len(labels), f"einsum {name} labels {labels} repeat one")
        size: dict = {}
        for labels, ty in ((lhs, a), (rhs, b)):
            for k, n in zip(labels, ty.shape):
                require(size.setdefault(k, n) == n, f"einsum label {k} of sizes {size[k]} and {n}")
        require(set(out) <= set(size), f"einsum result labels {out} not in its operands' {sorted(size)}")
        for labels, other in ((lhs, rhs), (rhs, lhs)):
            require(all(k in other or k in out for k in labels), "einsum with a dim summed in one operand alone")
        return [Ty(tuple(size[k] for k in out), a.vma | b.vma, dt)]

    def along(self, eqn):
        """``a``'s first dim shared with ``b`` (a batch or contracting dim), and where it is in the
        result (None for a contracting dim): the dims whose split the partitioner handles by the
        dot's own rules."""
        lhs, rhs, out = eqn.get("lhs"), eqn.get("rhs"), eqn.get("out")
        if not (isinstance(lhs, list) and isinstance(rhs, list) and isinstance(out, list)):
            return None, None
        for d, k in enumerate(lhs):
            if k in rhs:
                return d, (out.index(k) if k in out else None)
        return None, None

    def draw(self, draw, ctx, scope):
        vis = scope.visible
        xs = scope.values(self.dtypes, min_rank=1)
        if not xs:
            return None
        a = scope.pick(draw, xs)
        ta = vis[a]
        bs = [v for v in scope.values((ta.dtype,), min_rank=1)
              if set(vis[v].shape) & set(ta.shape)]  # (a dim of a size in both: one to pair)
        if not bs:
            return None
        b = scope.sample(draw, bs)
        tb = vis[b]
        lhs = list(range(ta.rank))
        rhs, free, paired = [], ta.rank, set()
        for n in tb.shape:  # each dim of b: paired with a dim of a of its size, or free
            cands = [d for d in range(ta.rank) if ta.shape[d] == n and d not in paired]
            if cands and draw(st.booleans()):
                d = draw(st.sampled_from(cands))
                paired.add(d)
                rhs.append(d)
            else:
                rhs.append(free)
                free += 1
        # paired labels: batch (kept) or contracting (summed); the result: batch, a's free, b's free
        batch = [k for k in sorted(paired) if draw(st.booleans())]
        out = batch + [k for k in lhs if k not in paired] + [k for k in rhs if k >= ta.rank]
        size = dict(zip(lhs, ta.shape)) | dict(zip(rhs, tb.shape))
        if len(out) > scope.max_rank or math.prod(size[k] for k in out) > scope.max_elements:
            return None
        if len(out) > 1 and draw(st.booleans()):
            out = draw(st.permutations(out))
        return {"op": self.name, "args": [a, b], "outs": [scope.new_var()], "lhs": lhs, "rhs": rhs,
                "out": list(out)}

    def subscripts(self, eqn, lead: str = "") -> str:
        """The einsum subscripts, each operand and the result prefixed by ``lead`` (``...`` in the
        reference, for the named axes' leading dims); ProgramError for a label out of range."""
        def word(labels):
            if not all(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(LETTERS) for k in labels):
                raise ProgramError(f"einsum labels {str(labels)[:40]} are not integers in [0, {len(LETTERS)})")
            return lead + "".join(LETTERS[k] for k in labels)
        return f"{word(eqn['lhs'])},{word(eqn['rhs'])}->{word(eqn['out'])}"

    def reference(self, r, eqn, xs, ts, ctx):
        spec = self.subscripts(eqn, "...")
        return [compute(r, ts[0].dtype, lambda u, v: r.xp.einsum(spec, u, v), *xs)]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.einsum({self.subscripts(eqn)!r}, {a[0]}, {a[1]})"


class Transpose(ExprOp):
    name = "transpose"
    family = "transpose"
    dtypes = VALUE_DTYPES

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Its operand's, dims reversed (jax 0.10.2)."""
        return [sharding_spec(tuple(reversed(args[0].dims)))]

    def types(self, eqn, args, ctx):
        return [Ty(tuple(reversed(args[0].shape)), args[0].vma, args[0].dtype)]

    def draw(self, draw, ctx, scope):
        xs = scope.values(self.dtypes, min_rank=2)
        if not xs:
            return None
        return {"op": self.name, "args": [scope.pick(draw, xs)], "outs": [scope.new_var()]}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        n = ts[0].rank
        return [r.xp.transpose(xs[0], tuple(range(K)) + tuple(K + n - 1 - i for i in range(n)))]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.transpose({a[0]})"


class Conv(Windowed):
    """``conv`` (see the module docstring): float32 ``x`` of rank >= 1 without empty dims; the result has
    ``x``'s shape but dim ``axis``, whose length :class:`fuzz.ops.scans.Windowed` gives (at least 1)."""

    name = "conv"
    family = "matmul"
    dilations = ("lhs_dilation", "rhs_dilation")
    params = {**{k: v for k, v in Windowed.params.items() if k not in Windowed.dilations},
              "lhs_dilation": int_schema(1, 3), "rhs_dilation": int_schema(1, 3), "seed": SEED}
    feature_names = ("conv_general_dilated",)

    explicit_rule = False  # (not measured on an Explicit mesh)

    def types(self, eqn, args, ctx):
        require(0 not in args[0].shape, f"conv of an empty array {args[0].shape}")  # (the batch dim is folded)
        return super().types(eqn, args, ctx)

    def draw_more(self, draw):
        return {"seed": draw(st.integers(0, 255))}

    def fall_back(self, e, n):
        e.update(window=1, rhs_dilation=1)

    def reference(self, r, eqn, xs, ts, ctx):
        from fuzz.values import weights

        x = xs[0]
        pos = len(ctx.axes) + eqn["axis"]
        y = self.gather(r.xp, x, pos, self.positions(x.shape[pos], eqn), 0.0)
        w = weights(eqn["seed"], (eqn["window"],)).reshape((eqn["window"],) + (1,) * (x.ndim - pos - 1))
        return [r.xp.sum(y * w, axis=pos + 1)]

    def expr(self, rr, eqn, a, ctx):
        # rank-polymorphic (one function's source serves calls under vmap): the render helper
        # conv_along moves the dim last and folds the others into the batch dim, and back
        rr.helpers.update({"weights", "conv"})
        k = rr.int(eqn["window"])
        dil = "".join(f", {key}=({rr.int(eqn[key])},)" for key in ("lhs_dilation", "rhs_dilation")
                      if rr.int(eqn[key]) != "1")  # (1: conv_general_dilated's default)
        return (f"conv_along({a[0]}, {rr.int(eqn['axis'])}, weights({rr.int(eqn['seed'])}, ({k},)), "
                f"{rr.int(eqn['stride'])}, ({rr.int(eqn['lo'])}, {rr.int(eqn['hi'])}){dil})")


class ConvNC(Windowed):
    """``conv_nc``: ``lax.conv_general_dilated`` of a float32 ``x`` of shape (N, C, S1[, S2]) in its own
    layout (batch dim 0, feature dim 1, one or two spatial dims; JAX's default dimension numbers
    NCH / NCHW, OIH / OIHW) with ``feature_group_count=groups`` and the kernel either the seeded
    constant ``weights(seed, (features, C // groups, window, ...))`` or a second float32 operand of
    that shape (then the derivative reaches the kernel too: JAX's transpose rule for it is a
    convolution with ``batch_group_count``); every spatial dim has the window, stride, padding
    ``(lo, hi)`` and dilations of :class:`fuzz.ops.scans.Windowed`. The result is (N, features,
    O1[, O2]) and varies wherever ``x`` or the kernel does.

    Semantics (XLA's Conv, https://openxla.org/xla/operation_semantics#conv, a correlation):
    with ``g = groups``, input features and output features are cut into g groups in order, and
    output feature ``o`` of group ``o // (features // g)`` sums, over the input features ``c`` of its
    group and the window positions, ``w[o, c % (C // g), j...] * x'[n, c, k * stride + j * rhs_dilation]``
    (``x'`` padded and lhs-dilated as ``conv`` says). Unlike ``conv``, no dim is folded or moved:
    splits of the batch, feature and spatial dims reach XLA's convolution partitioner
    (``PartitionConvolution``: batch, feature-group, halo and window-dilated cases) as they are.
    """

    name = "conv_nc"
    family = "matmul"
    n_args = frozenset({1, 2})
    along_param = None
    dilations = ("lhs_dilation", "rhs_dilation")
    params = {**{k: v for k, v in Windowed.params.items() if k not in Windowed.dilations and k != "axis"},
              "window": int_schema(1, 64),  # (a kernel operand's, up to an input dim)
              "lhs_dilation": int_schema(1, 3), "rhs_dilation": int_schema(1, 3), "features": int_schema(1, 64),
              "groups": int_schema(1, 64), "seed": SEED}
    feature_names = ("conv_general_dilated",)
    explicit_ok = False
    explicit_rule = False

    def features(self, eqn):
        return set(self.feature_names) | ({"feature_group_count"} if eqn.get("groups", 1) > 1 else set())

    def along(self, eqn):
        """The first spatial dim, kept in place: the partitioner exchanges halos along it."""
        return 2, 2

    channels_last = False  # the layout: (N, C, S...) and kernels (O, I, k...); see ConvNWC

    def canon(self, shape: tuple) -> tuple:
        """An operand's shape in the (N, C, S...) order."""
        return (shape[0], shape[-1]) + tuple(shape[1:-1]) if self.channels_last else tuple(shape)

    def kernel_canon(self, shape: tuple) -> tuple:
        """A kernel's shape in the (O, C // groups, k...) order."""
        return (shape[-1], shape[-2]) + tuple(shape[:-2]) if self.channels_last else tuple(shape)

    def uncanon(self, shape: tuple) -> tuple:
        """A result's shape from the (N, O, S...) order to the op's layout."""
        return (shape[0],) + tuple(shape[2:]) + (shape[1],) if self.channels_last else tuple(shape)

    def kernel_shape(self, eqn, channels: int, spatial: int) -> tuple:
        """The kernel's shape for an operand of ``channels`` input features and ``spatial`` spatial dims:
        (features, channels // groups, window, ...), or (window, ..., channels // groups, features) for
        channels last."""
        k, i = (eqn["window"],) * spatial, channels // eqn["groups"]
        return k + (i, eqn["features"]) if self.channels_last else (eqn["features"], i) + k

    def types(self, eqn, args, ctx):
        x = Ty(self.canon(args[0].shape)) if args[0].rank in (3, 4) else args[0]
        g, o = eqn["groups"], eqn["features"]
        require(x.rank in (3, 4), f"conv_nc of rank {x.rank} (N, C and one or two spatial dims)")
        require(0 not in x.shape, f"conv_nc of an empty array {x.shape}")
        require(g >= 1 and x.shape[1] % g == 0 and o % g == 0,
                f"conv_nc groups {g} must divide its {x.shape[1]} input and {o} output features")
        want = self.kernel_shape(eqn, x.shape[1], x.rank - 2)
        require(len(args) == 1 or args[1].shape == want, f"conv_nc kernel of shape {args[-1].shape} for {want}")
        out = x.shape[:1] + (o,)
        for d in range(2, x.rank):
            out += super().types({**eqn, "axis": d}, [Ty(x.shape)], ctx)[0].shape[d:d + 1]
        return [Ty(self.uncanon(out), frozenset().union(*(a.vma for a in args)))]

    def draw(self, draw, ctx, scope):
        vis = scope.visible
        xs = [v for v in scope.floats(min_rank=3) if vis[v].rank <= 4 and 0 not in vis[v].shape]
        if not xs:
            return None
        x = scope.pick(draw, xs)
        shape = self.canon(vis[x].shape)
        e = {"op": self.name, "args": [x], "window": draw(st.integers(1, 3)), "stride": draw(st.integers(1, 2)),
             "lo": draw(st.integers(0, 2)), "hi": draw(st.integers(0, 2)),
             "lhs_dilation": draw(st.sampled_from([1, 1, 2])), "rhs_dilation": draw(st.sampled_from([1, 1, 2]))}
        if any(len(self.positions(n, e)) == 0 for n in shape[2:]):  # the window fits every spatial dim
            self.fall_back(e, min(shape[2:]))
        g = draw(st.sampled_from([k for k in (1, 2, 3, 4) if shape[1] % k == 0]))
        e.update(groups=g, features=g * draw(st.integers(1, max(1, 4 // g))), seed=draw(st.integers(0, 255)))
        # or a kernel in scope: (O, C // g, k, ...) for some g dividing C and O (x itself, say, with g = 1)
        ks = {v: self.kernel_canon(vis[v].shape) for v in scope.floats(min_rank=3) if vis[v].rank == len(shape)}
        kernels = [(v, shape[1] // k[1]) for v, k in ks.items()
                   if len(set(k[2:])) == 1 and k[1] and shape[1] % k[1] == 0 and k[0] % (shape[1] // k[1]) == 0]
        tries = [e]
        if kernels and draw(st.booleans()):
            k, kg = scope.sample(draw, kernels, var=lambda c: c[0])
            tries.insert(0, {**e, "args": [x, k], "groups": kg, "features": ks[k][0], "window": ks[k][2]})
            if any(len(self.positions(n, tries[0])) == 0 for n in shape[2:]):
                tries[0].update(lo=0, hi=0, lhs_dilation=1, rhs_dilation=1)
        for e in tries:  # (the kernel in scope, when it fits; else the constant one)
            try:
                (ty,) = self.types(e, [vis[a] for a in e["args"]], ctx)
            except ProgramError:
                continue
            return {**e, "outs": [scope.new_var()]} if ty.size <= scope.max_elements else None
        return None

    def fall_back(self, e, n):
        e.update(window=min(e["window"], n), lo=0, hi=0, rhs_dilation=1, lhs_dilation=1)

    def reference(self, r, eqn, xs, ts, ctx):
        from fuzz.values import weights

        xp = r.xp
        K = len(ctx.axes)
        x = xp.moveaxis(xs[0], -1, K + 1) if self.channels_last else xs[0]  # (..., N, C, S...)
        spatial = x.ndim - K - 2
        y = x
        for d in range(spatial):  # (..., N, C, O1, k1, O2, k2): each spatial dim's windows
            pos = K + 2 + 2 * d
            y = self.gather(xp, y, pos, self.positions(y.shape[pos], eqn), 0.0)
        g, o = eqn["groups"], eqn["features"]
        n, c = x.shape[K], x.shape[K + 1]
        y = y.reshape(x.shape[:K] + (n, g, c // g) + y.shape[K + 2:])
        w = xs[1] if len(xs) > 1 else weights(eqn["seed"], self.kernel_shape(eqn, c, spatial))  # (in the op's layout)
        if self.channels_last:  # (..., k..., C // g, O) -> (..., O, C // g, k...)
            lead = w.ndim - spatial - 2
            w = xp.transpose(w, tuple(range(lead)) + (w.ndim - 1, w.ndim - 2) + tuple(range(lead, lead + spatial)))
        w = w.reshape(w.shape[:w.ndim - spatial - 2] + (g, o // g, c // g) + (eqn["window"],) * spatial)
        win = "PpQq"[:2 * spatial]
        out = xp.einsum(f"...nGc{win},...GOc{win[1::2]}->...nGO{win[0::2]}", y, w)
        out = out.reshape(out.shape[:K + 1] + (o,) + out.shape[K + 3:])
        return [xp.moveaxis(out, K + 1, -1) if self.channels_last else out]

    def expr(self, rr, eqn, a, ctx):
        # rank-polymorphic (one function's source serves calls under vmap): the render helper
        # conv_nc gives every spatial dim of x (those after N and C) the same window parameters
        rr.helpers.add("conv_nc")
        dil = "".join(f", {k}={rr.int(eqn[k])}" for k in self.dilations if rr.int(eqn[k]) != "1")
        f, g, k = rr.int(eqn["features"]), rr.int(eqn["groups"]), rr.int(eqn["window"])
        if len(a) > 1:
            kernel = a[1]
        elif self.channels_last:
            rr.helpers.add("weights")
            kernel = f"weights({rr.int(eqn['seed'])}, ({k},) * ({a[0]}.ndim - 2) + ({a[0]}.shape[-1] // {g}, {f}))"
        else:
            rr.helpers.add("weights")
            kernel = f"weights({rr.int(eqn['seed'])}, ({f}, {a[0]}.shape[1] // {g}) + ({k},) * ({a[0]}.ndim - 2))"
        last = ", channels_last=True" if self.channels_last else ""
        return (f"conv_nc({a[0]}, {kernel}, {rr.int(eqn['stride'])}, ({rr.int(eqn['lo'])}, {rr.int(eqn['hi'])}), "
                f"{g}{last}{dil})")


class ConvNWC(ConvNC):
    """``conv_nwc``: :class:`ConvNC` in the channels-last layout most models use (Flax's ``nn.Conv``):
    ``x`` of shape (N, S1[, S2], C), the kernel (window, ..., C // groups, features), the result
    (N, O1[, O2], features): ``dimension_numbers`` ("NWC", "WIO", "NWC") or ("NHWC", "HWIO",
    "NHWC") (jax.lax.conv_general_dilated's docstring). The same convolution as ``conv_nc`` of the
    transposed operands; XLA's partitioner sees the feature dim last."""

    name = "conv_nwc"
    channels_last = True
    feature_names = ("conv_general_dilated", "channels_last")

    def along(self, eqn):
        """The first spatial dim (dim 1), kept in place."""
        return 1, 1



OPS = (Matmul(), Einsum(), Transpose(), Conv(), ConvNC(), ConvNWC())
