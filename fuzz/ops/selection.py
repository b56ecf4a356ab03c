"""Selection: ``where``, ``jnp.where(a > b, x, y)`` (or ``<``), all four broadcast together (NumPy rules).

The condition compares two values; the result takes ``x`` where it holds and ``y``
elsewhere. Differentiable in ``x`` and ``y`` (the comparison has no derivative); varies
wherever any argument does.

Dtypes: ``a`` and ``b`` share one dtype of any (a bool condition is ``a > b`` of two bools:
``a and not b``; bfloat16 / float16 compare exactly in both), ``x`` and ``y`` share one,
the result's (jnp.where of two equal dtypes).
"""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz.ops.base import VALUE_DTYPES, ExprOp, Ty, alike, align, broadcast_shapes, fits, require, same_dtype

COMPARISONS = {"gt": ">", "lt": "<"}


class Where(ExprOp):
    name = "where"
    family = "select"
    explicit_ok = False
    n_args = 4
    params = {"cmp": {"enum": list(COMPARISONS)}}
    feature_names = ("where",)
    dtypes = VALUE_DTYPES

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """All four operands of the result's shape (none broadcast) and split alike
        (:func:`fuzz.ops.base.alike`); the result as they are."""
        require(all(a.shape == outs[0].shape for a in args), "where of a broadcast operand split in its type")
        return [alike(self.name, args)]

    def types(self, eqn, args, ctx):
        same_dtype("where's comparison", args[:2], self.dtypes)
        dt = same_dtype("where's choice", args[2:], self.dtypes)
        return [Ty(broadcast_shapes(*(a.shape for a in args)), frozenset().union(*(a.vma for a in args)), dt)]

    def draw(self, draw, ctx, scope):
        vis = scope.visible
        xs = scope.values(self.dtypes)
        if not xs:
            return None
        chosen = []
        for k in range(4):
            shapes = [vis[v].shape for v in chosen]
            cands = [v for v in xs if fits(vis[v].shape, *shapes)] if shapes else xs
            if k % 2:  # b has a's dtype, y x's
                cands = [v for v in cands if vis[v].dtype == vis[chosen[-1]].dtype]
            chosen.append(draw(st.sampled_from(cands)))
        return {"op": self.name, "args": chosen, "outs": [scope.new_var()],
                "cmp": draw(st.sampled_from(list(COMPARISONS)))}

    def reference(self, r, eqn, xs, ts, ctx):
        a, b, x, y = align(r.xp, xs, [t.rank for t in ts], len(ctx.axes))
        cond = a > b if eqn["cmp"] == "gt" else a < b
        return [r.xp.where(cond, x, y)]

    def expr(self, rr, eqn, a, ctx):
        cmp = COMPARISONS.get(eqn["cmp"])
        if cmp is None:
            from fuzz.ops.base import ProgramError

            raise ProgramError(f"where compares with {str(eqn['cmp'])[:20]!r}, not gt or lt")
        return f"jnp.where({a[0]} {cmp} {a[1]}, {a[2]}, {a[3]})"


OPS = (Where(),)
