"""Reductions: ``sum mean max`` over one dim or all (``axis`` null), and ``wsum``.

``wsum`` is a seeded weighted sum of all elements, ``sum(x * weights(seed, x.shape))``
(fuzz.reference.weights): a random linear functional, so that a grad's cotangent is not
all ones. ``max`` picks one element at ties: never under grad. ``mean`` and ``max`` of
no element (an empty extent, from an empty slice) are refused: NaN / an error in NumPy.
"""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz.ops.base import OPTIONAL_DIM, SEED, ExprOp, Ty, require


class Reduce(ExprOp):
    family = "reduce"
    params = {"axis": OPTIONAL_DIM}
    needs_elements = False  # refused over an empty extent

    def types(self, eqn, args, ctx):
        (a,) = args
        ax = eqn.get("axis")
        if ax is None:
            require(not self.needs_elements or a.size > 0, f"{self.name} of an empty array")
            return [Ty((), a.vma)]
        require(0 <= ax < a.rank, f"{self.name} axis {ax} out of range for rank {a.rank}")
        require(not self.needs_elements or a.shape[ax] > 0, f"{self.name} over an empty dim")
        return [Ty(a.shape[:ax] + a.shape[ax + 1:], a.vma)]

    def draw(self, draw, ctx, scope):
        xs = scope.floats()
        if self.needs_elements:
            xs = [v for v in xs if scope.visible[v].size > 0]
        if not xs:
            return None
        a = draw(st.sampled_from(xs))
        shape = scope.visible[a].shape
        axis = draw(st.sampled_from([None] + [d for d in range(len(shape))
                                              if shape[d] > 0 or not self.needs_elements]))
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axis": axis}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        x = xs[0]
        axis = tuple(range(K, x.ndim)) if eqn.get("axis") is None else K + eqn["axis"]
        return [getattr(r.xp, self.name)(x, axis=axis)]

    def expr(self, rr, eqn, a, ctx):
        axis = "" if eqn.get("axis") is None else f", axis={rr.int(eqn['axis'])}"
        return f"jnp.{self.name}({a[0]}{axis})"


class Sum(Reduce):
    name = "sum"

    def as_loss(self, draw, arg, out):
        return {"op": self.name, "args": [arg], "outs": [out], "axis": None}


class Mean(Reduce):
    name = "mean"
    needs_elements = True


class Max(Reduce):
    name = "max"
    needs_elements = True
    grad_ok = False


class WeightedSum(ExprOp):
    name = "wsum"
    family = "reduce"
    params = {"seed": SEED}
    feature_names = ("wsum",)

    def types(self, eqn, args, ctx):
        return [Ty((), args[0].vma)]

    def draw(self, draw, ctx, scope):
        xs = scope.floats()
        if not xs:
            return None
        return {"op": self.name, "args": [draw(st.sampled_from(xs))], "outs": [scope.new_var()],
                "seed": draw(st.integers(0, 255))}

    def as_loss(self, draw, arg, out):
        return {"op": self.name, "args": [arg], "outs": [out], "seed": draw(st.integers(0, 255))}

    def reference(self, r, eqn, xs, ts, ctx):
        from fuzz.reference import weights

        K = len(ctx.axes)
        x = xs[0]
        return [r.xp.sum(x * weights(eqn["seed"], ts[0].shape), axis=tuple(range(K, x.ndim)))]

    def expr(self, rr, eqn, a, ctx):
        rr.helpers.add("weights")
        return f"jnp.sum({a[0]} * weights({rr.int(eqn['seed'])}, jnp.shape({a[0]})))"


OPS = (Sum(), Mean(), Max(), WeightedSum())
