"""Custom derivative rules: ``custom_vjp`` (``jax.custom_vjp``) and ``custom_jvp`` (``jax.custom_jvp``).

Each equation defines, inline in the rendered function body, a function with a chosen
elementwise primal ``p`` (``sin``, ``tanh`` or ``square``) and a chosen derivative rule,
then applies it (JAX docs: "Custom derivative rules for JAX-transformable Python functions",
https://docs.jax.dev/en/latest/notebooks/Custom_derivative_rules_for_Python_code.html; the
``jax.custom_vjp.defvjp`` and ``jax.custom_jvp.defjvp`` docstrings, jax/_src/custom_derivatives.py):

- ``custom_vjp(x)`` = ``p(x)``; ``fwd`` returns the function itself at ``x`` and the residual
  ``x`` (so that a derivative of a derivative uses the rule again, as the docs' examples do);
  ``bwd`` returns, for the output cotangent ``g``: ``true`` ``g * p'(x)``; ``zero``
  ``jnp.zeros_like(g)``; ``none`` ``None`` (JAX's shorthand for a zero cotangent, jax-ml/jax
  PR #4595; returning it under grad of an eager shard_map raised an empty AssertionError in
  ``shard_shape`` on jax 0.8.1, fixed by 0.10.2: measured; jax-ml/jax#34211); ``scaled``
  ``2 * g * p'(x)`` (a deliberately "wrong" but well-defined derivative: the reference must
  give the same).
- ``custom_jvp(x)`` = ``p(x)``, or ``custom_jvp(x, y)`` = ``p(x) * y`` (NumPy broadcasting, as
  ``mul``); the rule returns the function itself at the primals and the tangent ``true``
  ``p'(x) * tx [* y] [+ p(x) * ty]``, ``zero`` ``jnp.zeros_like(out)`` or ``scaled`` (twice the
  true one). ``symbolic_zeros`` (``defjvp(..., symbolic_zeros=True)``, present on jax 0.4.26
  to 0.10.2: checked) passes a ``jax.custom_derivatives.SymbolicZero`` for the tangent of an
  operand that is not differentiated (the second operand under ``grad`` with ``argnums``
  leaving it out, a captured value, ...); the rule then leaves its term out (jax-ml/jax#26763:
  symbolic zeros inside shard_map, fixed in PR #27886).

Typing: elementwise (``custom_jvp`` with two operands broadcasts as ``mul`` and varies where
either does); both may sit under grad / vjp / jvp, inside shard_map bodies and under vmap
(measured on jax 0.10.2, check_vma on and off, jit or not, on Auto and Explicit meshes,
outside and inside shard_map). ``custom_vjp`` is refused under forward-mode differentiation
(jvp, anywhere outside it: "can't apply forward-mode autodiff (jvp) to a custom_vjp
function", a documented limitation; forward over reverse, ``jvp(grad(f))``, runs when the op's
operand is differentiated by the grad, but not when it is a value the grad does not
differentiate, so the rule refuses every enclosing jvp).

Reference: NumPy ``p`` outside derivatives; under a derivative (``r.xp`` is ``jax.numpy``) the
same ``jax.custom_vjp`` / ``jax.custom_jvp`` built in Python from this module's tables (not from
the rendered source), with ``none`` as explicit zeros and without symbolic zeros (whose values
are the same by definition).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fuzz.ops.base import BOOL, Op, Ty, align, broadcast_shapes, fits, require

# Elementwise primals: (source of p(x), source of p'(x)) with "{x}" for the operand, simplest first.
PRIMALS = {
    "sin": ("jnp.sin({x})", "jnp.cos({x})"),
    "tanh": ("jnp.tanh({x})", "(1 - jnp.tanh({x}) ** 2)"),
    "square": ("{x} * {x}", "2 * {x}"),
}
VJP_RULES = ("true", "zero", "none", "scaled")  # custom_vjp's backward rules, simplest first
JVP_RULES = ("true", "zero", "scaled")  # custom_jvp's tangent rules, simplest first
SCALE = {"true": 1, "scaled": 2}

# The rule (an entry of Ctx.rules) fuzz.typecheck.enter adds inside a jvp (and every
# forward-mode transform), however deep: no custom_vjp there.
FORWARD_MODE = "forward_mode"


def primal(xp, name: str, x):
    """p(x) of the primal ``name`` in ``xp`` (NumPy or jax.numpy)."""
    if name == "sin":
        return xp.sin(x)
    if name == "tanh":
        return xp.tanh(x)
    return x * x


def derivative(xp, name: str, x):
    """p'(x) of the primal ``name`` in ``xp``."""
    if name == "sin":
        return xp.cos(x)
    if name == "tanh":
        return 1 - xp.tanh(x) ** 2
    return 2 * x


def under_forward_mode(ctx) -> bool:
    """Whether ``ctx`` may be inside a jvp (a forward-mode derivative), however deep.

    The typing rules (``fuzz.typecheck.enter``: jvp, jacfwd, linearize) mark it with
    :data:`FORWARD_MODE` in ``ctx.rules``.
    """
    return FORWARD_MODE in ctx.rules


def _check_params(eqn: dict, rules: tuple) -> None:
    require(eqn["primal"] in PRIMALS, f"unknown primal {str(eqn['primal'])[:40]!r}")
    require(eqn["rule"] in rules, f"unknown derivative rule {str(eqn['rule'])[:40]!r}")


class CustomVjp(Op):
    """``jax.custom_vjp`` of one float operand: ``p(x)`` with the backward rule ``rule`` (module docstring)."""

    name = "custom_vjp"
    family = "custom"
    params = {"primal": {"enum": list(PRIMALS)}, "rule": {"enum": list(VJP_RULES)}}

    def types(self, eqn, args, ctx):
        _check_params(eqn, VJP_RULES)
        require(not under_forward_mode(ctx), "custom_vjp under jvp (\"can't apply forward-mode autodiff (jvp) to a "
                                             "custom_vjp function\")")
        return [args[0]]

    def draw(self, draw, ctx, scope):
        xs = scope.floats()
        if not xs or under_forward_mode(ctx):
            return None
        return {"op": self.name, "args": [scope.pick(draw, xs)], "outs": [scope.new_var()],
                "primal": draw(st.sampled_from(list(PRIMALS))), "rule": draw(st.sampled_from(VJP_RULES))}

    def reference(self, r, eqn, xs, ts, ctx):
        name, rule = eqn["primal"], eqn["rule"]
        if r.xp is np:
            return [primal(np, name, xs[0])]
        jax, jnp = r.jax, r.jnp

        @jax.custom_vjp
        def f(x):
            return primal(jnp, name, x)

        def fwd(x):
            return f(x), x

        def bwd(x, g):
            if rule in ("zero", "none"):
                return (jnp.zeros_like(g),)
            return (SCALE[rule] * g * derivative(jnp, name, x),)

        f.defvjp(fwd, bwd)
        return [f(xs[0])]

    def render(self, rr, eqn, args, outs, ctx, ind):
        _check_params(eqn, VJP_RULES)
        v = rr.id(outs[0])
        f, fwd, bwd = f"_cvjp_{v}", f"_fwd_{v}", f"_bwd_{v}"  # (no program identifier starts with "_")
        p, dp = PRIMALS[eqn["primal"]]
        rule = eqn["rule"]
        ct = {"true": f"g * {dp.format(x='x')}", "zero": "jnp.zeros_like(g)", "none": "None",
              "scaled": f"2 * g * {dp.format(x='x')}"}[rule]
        return [f"{ind}@jax.custom_vjp",
                f"{ind}def {f}(x):  # primal {eqn['primal']}, backward rule {rule}",
                f"{ind}    return {p.format(x='x')}",
                f"{ind}def {fwd}(x):",
                f"{ind}    return {f}(x), x",
                f"{ind}def {bwd}(x, g):",
                f"{ind}    return ({ct},)",
                f"{ind}{f}.defvjp({fwd}, {bwd})",
                f"{ind}{outs[0]} = {f}({args[0]})"]

    def features(self, eqn):
        variant = {"zero": "custom_vjp_zero_cotangent", "none": "custom_vjp_none_cotangent",
                   "scaled": "custom_vjp_scaled"}.get(eqn["rule"])
        return {"custom_vjp"} | ({variant} if variant else set())


class CustomJvp(Op):
    """``jax.custom_jvp`` of ``p(x)`` or ``p(x) * y`` with the tangent rule ``rule`` (module docstring)."""

    name = "custom_jvp"
    family = "custom"
    n_args = frozenset({1, 2})
    params = {"primal": {"enum": list(PRIMALS)}, "rule": {"enum": list(JVP_RULES)}, "symbolic_zeros": BOOL}

    def types(self, eqn, args, ctx):
        _check_params(eqn, JVP_RULES)
        require(isinstance(eqn["symbolic_zeros"], bool), "symbolic_zeros is a boolean")
        if len(args) == 1:
            return [args[0]]
        a, b = args
        return [Ty(broadcast_shapes(a.shape, b.shape), a.vma | b.vma)]

    def draw(self, draw, ctx, scope):
        xs = scope.floats()
        if not xs:
            return None
        a = scope.pick(draw, xs)
        args = [a]
        if draw(st.booleans()):  # a second operand (a multiplier), broadcasting as mul's
            args.append(draw(st.sampled_from([b for b in xs if fits(scope.visible[a].shape, scope.visible[b].shape)])))
        return {"op": self.name, "args": args, "outs": [scope.new_var()],
                "primal": draw(st.sampled_from(list(PRIMALS))), "rule": draw(st.sampled_from(JVP_RULES)),
                "symbolic_zeros": draw(st.booleans())}

    def reference(self, r, eqn, xs, ts, ctx):
        name, rule = eqn["primal"], eqn["rule"]
        if len(xs) == 2:
            xs = align(r.xp, xs, [t.rank for t in ts], len(ctx.axes))
        if r.xp is np:
            out = primal(np, name, xs[0])
            return [out * xs[1] if len(xs) == 2 else out]
        jax, jnp = r.jax, r.jnp

        @jax.custom_jvp
        def f(*a):
            out = primal(jnp, name, a[0])
            return out * a[1] if len(a) == 2 else out

        def rule_fn(primals, tangents):
            out = f(*primals)
            if rule == "zero":
                return out, jnp.zeros_like(out)
            x, tx = primals[0], tangents[0]
            dt = derivative(jnp, name, x) * tx
            if len(primals) == 2:
                y, ty = primals[1], tangents[1]
                dt = dt * y + primal(jnp, name, x) * ty
            return out, SCALE[rule] * dt

        f.defjvp(rule_fn)
        return [f(*xs)]

    def render(self, rr, eqn, args, outs, ctx, ind):
        _check_params(eqn, JVP_RULES)
        sz = rr.bool(eqn["symbolic_zeros"]) == "True"
        v = rr.id(outs[0])
        f, jvp = f"_cjvp_{v}", f"_jvprule_{v}"  # (no program identifier starts with "_")
        p, dp = PRIMALS[eqn["primal"]]
        p, dp = p.format(x="x"), dp.format(x="x")
        two = len(args) == 2
        rule = eqn["rule"]
        names, tangents = ("x, y", "tx, ty") if two else ("x,", "tx,")
        note = f"primal {eqn['primal']}{' * y' if two else ''}, tangent rule {rule}{', symbolic zeros' if sz else ''}"
        lines = [f"{ind}@jax.custom_jvp",
                 f"{ind}def {f}({names.rstrip(',')}):  # {note}",
                 f"{ind}    return {p}{' * y' if two else ''}",
                 f"{ind}def {jvp}(primals, tangents):",
                 f"{ind}    ({names}), ({tangents}) = primals, tangents",
                 f"{ind}    out = {f}({names.rstrip(',')})"]
        terms = [(f"{dp} * tx * y" if two else f"{dp} * tx", "tx")] + ([(f"{p} * ty", "ty")] if two else [])
        if rule == "zero":
            lines.append(f"{ind}    return out, jnp.zeros_like(out)")
        elif not sz:
            dt = " + ".join(t for t, _ in terms)
            lines.append(f"{ind}    return out, {'2 * (' + dt + ')' if rule == 'scaled' else dt}")
        else:  # a symbolic zero tangent (an operand not differentiated) contributes no term
            lines.append(f"{ind}    dt = jnp.zeros_like(out)")
            for t, tv in terms:
                lines += [f"{ind}    if not isinstance({tv}, jax.custom_derivatives.SymbolicZero):",
                          f"{ind}        dt = dt + {t}"]
            lines.append(f"{ind}    return out, {'2 * dt' if rule == 'scaled' else 'dt'}")
        lines += [f"{ind}{f}.defjvp({jvp}{', symbolic_zeros=True' if sz else ''})",
                  f"{ind}{outs[0]} = {f}({', '.join(args)})"]
        return lines

    def features(self, eqn):
        out = {"custom_jvp"}
        if eqn["rule"] == "zero":
            out.add("custom_jvp_zero_tangent")
        if eqn["rule"] == "scaled":
            out.add("custom_jvp_scaled")
        if eqn["symbolic_zeros"]:
            out.add("custom_jvp_symbolic_zeros")
        return out


OPS = (CustomVjp(), CustomJvp())
