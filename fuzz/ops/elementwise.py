"""Elementwise ops: ``sin cos tanh neg`` (unary), ``add sub mul maximum`` (NumPy broadcasting)
and the conversion ``astype``.

Typing: a unary op keeps its argument's type; a binary one broadcasts the shapes
(trailing alignment) and varies where either argument does (jax 0.10: elementwise ops
take the union of the varying manual axes). ``maximum`` picks one argument at ties, so
its derivative there is a convention: never under grad.

Dtypes: unary ops take float32, bfloat16 or float16; ``add sub mul`` any numeric dtype
(int32 too); ``maximum`` bool too (logical or). Both operands of a binary op share one
dtype, which is the result's (JAX promotes two equal dtypes to that dtype). Values of
other dtypes than float32 are made by ``astype`` (see :class:`Astype`) and, as function
results must be float32, its draw prefers turning them back.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fuzz.ops.base import (BF16, F16, FLOAT, FLOATS, INT, NUMERIC, PRED, ExprOp, OneOf, Ty, broadcast_shapes,
                           compute, np_dtype, require, same_dtype, sharding_spec)


class Unary(ExprOp):
    family = "unary"
    dtypes = FLOATS
    source = ""  # format string of the expression, "{}" for the argument
    numpy = ""   # name of the NumPy / jax.numpy function

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Its operand's (jax 0.10.2)."""
        return [args[0].spec]

    def types(self, eqn, args, ctx):
        same_dtype(self.name, args, self.dtypes)
        return [args[0]]

    def draw(self, draw, ctx, scope):
        xs = scope.values(self.dtypes)
        if not xs:
            return None
        return {"op": self.name, "args": [scope.pick(draw, xs)], "outs": [scope.new_var()]}

    def reference(self, r, eqn, xs, ts, ctx):
        return [compute(r, ts[0].dtype, getattr(r.xp, self.numpy), xs[0])]

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
    dtypes = NUMERIC
    source = ""
    numpy = ""

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Broadcasting's: dims aligned from the right; a dim split in one operand and unsplit
        in the other keeps the split; two different splits of one dim, or one axis splitting
        two dims of the result, are refused ("add got incompatible shardings for broadcasting",
        jax 0.10.2)."""
        return [broadcast_specs(self.name, args, outs[0].rank)]

    def types(self, eqn, args, ctx):
        a, b = args
        dt = same_dtype(self.name, args, self.dtypes)
        return [Ty(broadcast_shapes(a.shape, b.shape), a.vma | b.vma, dt)]

    def draw(self, draw, ctx, scope):
        xs = scope.values(self.dtypes)
        if not xs:
            return None
        a = scope.pick(draw, xs)
        ta = scope.visible[a]
        partners = [b for b in xs if scope.visible[b].dtype == ta.dtype and _broadcasts(ta.shape, scope.visible[b].shape)]
        b = draw(st.sampled_from(partners))
        return {"op": self.name, "args": [a, b], "outs": [scope.new_var()]}

    def reference(self, r, eqn, xs, ts, ctx):
        K = len(ctx.axes)
        a, b = xs
        ra, rb = ts[0].rank, ts[1].rank
        n = max(ra, rb)
        a = a.reshape(a.shape[:K] + (1,) * (n - ra) + a.shape[K:])
        b = b.reshape(b.shape[:K] + (1,) * (n - rb) + b.shape[K:])
        return [compute(r, ts[0].dtype, getattr(r.xp, self.numpy), a, b)]

    def expr(self, rr, eqn, a, ctx):
        return self.source.format(*a)


def broadcast_specs(name: str, args: list, rank: int) -> tuple:
    """The sharding type of an elementwise result of ``rank`` from its broadcast operands (see Binary)."""
    dims = []
    for k in range(rank):
        got = {a.dims[a.rank - rank + k] for a in args if a.rank - rank + k >= 0} - {()}
        require(len(got) <= 1, f"{name} of operands split differently along one dim: {sorted(got)}")
        dims.append(got.pop() if got else ())
    return sharding_spec(dims)


def _broadcasts(a: tuple, b: tuple) -> bool:
    from fuzz.ops.base import ProgramError

    try:
        broadcast_shapes(a, b)
    except ProgramError:
        return False
    return True


class Add(Binary):
    name, source, numpy = "add", "{} + {}", "add"

    def as_sum(self, a, b, out):
        return {"op": self.name, "args": [a, b], "outs": [out]}


class Sub(Binary):
    name, source, numpy = "sub", "{} - {}", "subtract"


class Mul(Binary):
    name, source, numpy = "mul", "{} * {}", "multiply"

    def as_product(self, a, b, out):
        return {"op": self.name, "args": [a, b], "outs": [out]}


class Maximum(Binary):
    name, source, numpy = "maximum", "jnp.maximum({}, {})", "maximum"
    grad_ok = False
    dtypes = NUMERIC + (PRED,)


# Conversions of astype: the rendered expression and the NumPy reference of each target dtype.
CONVERSIONS = {
    FLOAT: "{}.astype(jnp.float32)",
    BF16: "{}.astype(jnp.bfloat16)",
    F16: "{}.astype(jnp.float16)",
    INT: "jnp.sign({}).astype(jnp.int32)",
    PRED: "({} > 0)",
}
LOW = tuple(d for d in CONVERSIONS if d != FLOAT)  # the dtypes a float32 value converts to


class Astype(ExprOp):
    """``astype``: a dtype conversion (``lax.convert_element_type``), parameter ``dtype``.

    From float32 to another dtype, or from another dtype back to float32 (function
    results, (co)tangents and grad losses stay float32, so a value of another dtype
    reaches a result only through the conversion back):

    - ``bfloat16`` / ``float16``: ``x.astype(jnp.bfloat16)``: round to nearest even, in
      JAX and in NumPy (ml_dtypes), float16 overflowing to inf and keeping subnormals in
      both (measured on jax 0.10.2, under jit too);
    - ``int32``: ``jnp.sign(x).astype(jnp.int32)``, -1, 0 or 1: exact in both. Not
      ``round(x * 8)``: under jit XLA CPU keeps excess precision (``xla_allow_excess_precision``,
      on by default) and drops the rounding of a bf16 op's result when it is converted to
      float32 right away (measured: ``jit(lambda x, y: (x.astype(bf16) * y.astype(bf16)).astype(f32))``
      differs from eager by a bf16 half-ulp), so a value derived from bfloat16 lands on the
      other side of a rounding boundary of ``round(x * 8)`` in a few percent of elements;
      the sign's only boundary is 0, which no rounding crosses. A NaN converts to 0, as
      XLA's convert does (measured);
    - ``bool``: ``x > 0`` (the same boundary), not ``x != 0``;
    - back to ``float32``: ``x.astype(jnp.float32)`` (exact from bf16, f16, bool and
      int32 below 2**24; above, round to nearest in both).

    Under grad: allowed. The derivative through a float conversion is the conversion of
    the cotangent; through int32 or bool it is zero (``jnp.sign`` and comparisons have
    none; JAX carries a float0 tangent), as the reference (eager JAX) gives.
    """

    name = "astype"
    family = "convert"
    params = {"dtype": {"enum": list(CONVERSIONS)}}

    def arg_dtypes(self, eqn):
        return (OneOf(LOW) if eqn["dtype"] == FLOAT else FLOAT,)

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Its operand's (jax 0.10.2)."""
        return [args[0].spec]

    def types(self, eqn, args, ctx):
        (a,) = args
        dt = eqn["dtype"]
        require(isinstance(dt, str) and dt in CONVERSIONS, f"astype to {str(dt)[:20]!r}, not one of {', '.join(CONVERSIONS)}")
        require((a.dtype == FLOAT) != (dt == FLOAT), f"astype from {a.dtype} to {dt} (float32 to another dtype or back)")
        return [Ty(a.shape, a.vma, dt)]

    def draw(self, draw, ctx, scope):
        back = scope.values(LOW)
        xs = scope.floats()
        if back and (not xs or draw(st.integers(0, 3)) > 0):  # 3 in 4: back to float32, so that it reaches a result
            return {"op": self.name, "args": [draw(st.sampled_from(back))], "outs": [scope.new_var()], "dtype": FLOAT}
        if not xs:
            return None
        return {"op": self.name, "args": [scope.pick(draw, xs)], "outs": [scope.new_var()],
                "dtype": draw(st.sampled_from(LOW))}

    def as_float32(self, arg, out):
        return {"op": self.name, "args": [arg], "outs": [out], "dtype": FLOAT}

    def reference(self, r, eqn, xs, ts, ctx):
        x, dt = xs[0], eqn["dtype"]
        xp = r.xp
        if dt == INT:
            s = xp.sign(x)
            if xp is np:
                s = np.where(np.isnan(s), 0, s)  # XLA converts NaN to 0 (measured); NumPy leaves it undefined
            return [s.astype(xp.int32)]
        if dt == PRED:
            return [x > 0]
        return [x.astype(np_dtype(dt))]

    def expr(self, rr, eqn, a, ctx):
        src = CONVERSIONS.get(eqn["dtype"]) if isinstance(eqn["dtype"], str) else None
        if src is None:
            from fuzz.ops.base import ProgramError

            raise ProgramError(f"astype to {str(eqn['dtype'])[:20]!r}, not one of {', '.join(CONVERSIONS)}")
        return src.format(a[0])

    def features(self, eqn):
        return {self.name} | ({eqn["dtype"]} if eqn["dtype"] != FLOAT else set())


OPS = (Sin(), Cos(), Tanh(), Neg(), Add(), Sub(), Mul(), Maximum(), Astype())
