"""Linear algebra: ``matmul`` (``a @ b``, ``b`` of rank 2), ``transpose`` (all dims reversed) and ``conv``
(``lax.conv_general_dilated`` along one dim with a seeded kernel).

Dtypes: ``matmul`` of two float32, bfloat16, float16 or int32 operands of one dtype, the
result in that dtype (jnp.matmul without ``preferred_element_type``). XLA CPU computes a
bfloat16 dot in float32 and rounds the result once (compiled HLO measured on jax 0.10.2:
converts around an f32 dot), as the NumPy reference does (:func:`fuzz.ops.base.compute`);
int32 accumulates in int32, wrapping, in both. ``transpose`` moves any dtype.

``conv`` is a one-channel convolution of a float32 value along dim ``axis`` with the kernel
``weights(seed, (window,))`` (fuzz.reference.weights): the dim is moved last, the others
folded into the batch dim, and ``lax.conv_general_dilated`` computes, per XLA's Conv
(https://openxla.org/xla/operation_semantics#conv, a correlation: the kernel is not flipped),
``out[k] = sum_j w[j] * x'[k * stride + j * rhs_dilation]`` where ``x'`` is ``x`` with
``lhs_dilation - 1`` zeros between elements and ``lo`` / ``hi`` zeros around them: the windows
of ``reduce_window_sum`` (fuzz/ops/scans.py), weighted. XLA's SPMD partitioner splits a
convolution's spatial dim with halo exchanges of its own (``PartitionConvolution``).
"""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz.ops.base import NUMERIC, SEED, VALUE_DTYPES, ExprOp, Ty, compute, int_schema, require, same_dtype, sharding_spec
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
        from fuzz.reference import weights

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


OPS = (Matmul(), Transpose(), Conv())
