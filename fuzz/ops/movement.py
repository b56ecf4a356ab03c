"""Data movement: ``broadcast`` (a new leading dim of ``size`` copies)."""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz.ops.base import ExprOp, Ty, int_schema


class Broadcast(ExprOp):
    name = "broadcast"
    family = "broadcast"
    params = {"size": int_schema(1, 64)}

    def types(self, eqn, args, ctx):
        return [Ty((eqn["size"],) + args[0].shape, args[0].vma)]

    def draw(self, draw, ctx, scope):
        xs = [v for v in scope.small() if scope.visible[v].rank < scope.max_rank]
        if not xs:
            return None
        return {"op": self.name, "args": [draw(st.sampled_from(xs))], "outs": [scope.new_var()],
                "size": draw(st.sampled_from([1, 2]))}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        y = r.xp.expand_dims(xs[0], K)
        return [r.xp.broadcast_to(y, y.shape[:K] + (eqn["size"],) + y.shape[K + 1:])]

    def expr(self, rr, eqn, a, ctx):
        return f"jnp.broadcast_to({a[0]}, ({rr.int(eqn['size'])},) + {a[0]}.shape)"


OPS = (Broadcast(),)
