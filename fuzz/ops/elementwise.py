"""Elementwise ops: ``sin cos tanh neg`` (unary) and ``add sub mul maximum`` (NumPy broadcasting).

Typing: a unary op keeps its argument's type; a binary one broadcasts the shapes
(trailing alignment) and varies where either argument does (jax 0.10: elementwise ops
take the union of the varying manual axes). ``maximum`` picks one argument at ties, so
its derivative there is a convention: never under grad.
"""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz.ops.base import ExprOp, Ty, broadcast_shapes


class Unary(ExprOp):
    family = "unary"
    source = ""  # format string of the expression, "{}" for the argument
    numpy = ""   # name of the NumPy / jax.numpy function

    def types(self, eqn, args, ctx):
        return [args[0]]

    def draw(self, draw, ctx, scope):
        xs = scope.floats()
        if not xs:
            return None
        return {"op": self.name, "args": [draw(st.sampled_from(xs))], "outs": [scope.new_var()]}

    def reference(self, r, eqn, xs, ts, ctx):
        return [getattr(r.xp, self.numpy)(xs[0])]

    def expr(self, rr, eqn, a, ctx):
        return self.source.format(*a)


class Sin(Unary):
    name, source, numpy = "sin", "jnp.sin({})", "sin"


class Cos(Unary):
    name, source, numpy = "cos", "jnp.cos({})", "cos"


class Tanh(Unary):
    name, source, numpy = "tanh", "jnp.tanh({})", "tanh"


class Neg(Unary):
    name, source, numpy = "neg", "-{}", "negative"


class Binary(ExprOp):
    family = "binary"
    n_args = 2
    source = ""
    numpy = ""

    def types(self, eqn, args, ctx):
        a, b = args
        return [Ty(broadcast_shapes(a.shape, b.shape), a.vma | b.vma)]

    def draw(self, draw, ctx, scope):
        xs = scope.floats()
        if not xs:
            return None
        a = draw(st.sampled_from(xs))
        partners = [b for b in xs if _broadcasts(scope.visible[a].shape, scope.visible[b].shape)]
        b = draw(st.sampled_from(partners))
        return {"op": self.name, "args": [a, b], "outs": [scope.new_var()]}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        a, b = xs
        ra, rb = ts[0].rank, ts[1].rank
        n = max(ra, rb)
        a = a.reshape(a.shape[:K] + (1,) * (n - ra) + a.shape[K:])
        b = b.reshape(b.shape[:K] + (1,) * (n - rb) + b.shape[K:])
        return [getattr(r.xp, self.numpy)(a, b)]

    def expr(self, rr, eqn, a, ctx):
        return self.source.format(*a)


def _broadcasts(a: tuple, b: tuple) -> bool:
    from fuzz.ops.base import ProgramError

    try:
        broadcast_shapes(a, b)
    except ProgramError:
        return False
    return True


class Add(Binary):
    name, source, numpy = "add", "{} + {}", "add"


class Sub(Binary):
    name, source, numpy = "sub", "{} - {}", "subtract"


class Mul(Binary):
    name, source, numpy = "mul", "{} * {}", "multiply"


class Maximum(Binary):
    name, source, numpy = "maximum", "jnp.maximum({}, {})", "maximum"
    grad_ok = False


OPS = (Sin(), Cos(), Tanh(), Neg(), Add(), Sub(), Mul(), Maximum())
