"""Linear algebra: ``matmul`` (``a @ b``, ``b`` of rank 2) and ``transpose`` (all dims reversed)."""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz.ops.base import ExprOp, Ty, require


class Matmul(ExprOp):
    name = "matmul"
    family = "matmul"
    n_args = 2

    def types(self, eqn, args, ctx):
        a, b = args
        require(a.rank >= 1 and b.rank == 2 and a.shape[-1] == b.shape[0], f"matmul of {a.shape} and {b.shape}")
        return [Ty(a.shape[:-1] + (b.shape[1],), a.vma | b.vma)]

    def draw(self, draw, ctx, scope):
        vis = scope.visible
        xs = scope.floats()
        pairs = [(a, b) for a in xs for b in xs
                 if vis[b].rank == 2 and vis[a].rank >= 1 and vis[a].shape[-1] == vis[b].shape[0]]
        if not pairs:
            return None
        a, b = draw(st.sampled_from(pairs))
        return {"op": self.name, "args": [a, b], "outs": [scope.new_var()]}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        a, b = xs
        if ts[0].rank == 1:
            return [r.xp.einsum("...k,...kn->...n", a, b)]
        b = b.reshape(b.shape[:K] + (1,) * (ts[0].rank - 2) + b.shape[K:])
        return [r.xp.matmul(a, b)]

    def expr(self, rr, eqn, a, ctx):
        return f"{a[0]} @ {a[1]}"


class Transpose(ExprOp):
    name = "transpose"
    family = "transpose"

    def types(self, eqn, args, ctx):
        return [Ty(tuple(reversed(args[0].shape)), args[0].vma)]

    def draw(self, draw, ctx, scope):
        xs = scope.floats(min_rank=2)
        if not xs:
            return None
        return {"op": self.name, "args": [draw(st.sampled_from(xs))], "outs": [scope.new_var()]}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        n = ts[0].rank
        return [r.xp.transpose(xs[0], tuple(range(K)) + tuple(K + n - 1 - i for i in range(n)))]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.transpose({a[0]})"


OPS = (Matmul(), Transpose())
