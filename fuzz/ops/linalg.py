"""Linear algebra: ``matmul`` (``a @ b``, ``b`` of rank 2) and ``transpose`` (all dims reversed).

Dtypes: ``matmul`` of two float32, bfloat16, float16 or int32 operands of one dtype, the
result in that dtype (jnp.matmul without ``preferred_element_type``). XLA CPU computes a
bfloat16 dot in float32 and rounds the result once (compiled HLO measured on jax 0.10.2:
converts around an f32 dot), as the NumPy reference does (:func:`fuzz.ops.base.compute`);
int32 accumulates in int32, wrapping, in both. ``transpose`` moves any dtype.
"""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz.ops.base import NUMERIC, VALUE_DTYPES, ExprOp, Ty, compute, require, same_dtype


class Matmul(ExprOp):
    name = "matmul"
    family = "matmul"
    n_args = 2
    dtypes = NUMERIC

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


OPS = (Matmul(), Transpose())
