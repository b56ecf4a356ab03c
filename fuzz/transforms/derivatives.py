"""Derivatives: jax.grad, jax.value_and_grad, jax.vjp, jax.jvp, jax.linearize, jax.jacrev, jax.jacfwd."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from fuzz import typecheck as T
from fuzz.transforms.base import Transform

_GRAD_SCHEMA = {"properties": {"kind": {"enum": ["grad", "value_and_grad"]},
                               "argnums": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1}},
                "required": ["argnums"], "additionalProperties": False}
_LINEARIZED_SCHEMA = {
    "description": "vjp: outputs, then the pullback to every argument of the cotangents weights(seed + k) of output k; "
                   "jvp: outputs, then their tangents for the tangents weights(seed + k) of argument k "
                   "(fuzz/reference.py weights). linearize: jvp's values through jax.linearize (f's outputs, then "
                   "the linear map applied to the same tangents).",
    "properties": {"kind": {"enum": ["vjp", "jvp", "linearize"]}, "seed": {"type": "integer", "minimum": 0,
                                                                           "maximum": 255}},
    "required": ["seed"], "additionalProperties": False}
_JACOBIAN_SCHEMA = {
    "description": "jax.jacrev / jax.jacfwd with argnums=argnums[0] (one int): for every output of the function its "
                   "Jacobian w.r.t. that argument, shape out.shape + arg.shape.",
    "properties": {"kind": {"enum": ["jacrev", "jacfwd"]},
                   "argnums": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1,
                               "maxItems": 1}},
    "required": ["argnums"], "additionalProperties": False}


class Grad(Transform):
    """jax.grad / jax.value_and_grad with respect to ``argnums`` (a scalar loss)."""

    maps_outputs = True
    api_doc = "https://docs.jax.dev/en/latest/_autosummary/jax.{}.html"
    schema = _GRAD_SCHEMA
    differentiates = True

    def __init__(self, kind: str):
        self.kind, self.api, self.doc = kind, (kind,), self.api_doc.format(kind)

    def enter(self, t, ctx, args, top):
        kind = self.kind
        T._require(len(t["argnums"]) == len(set(t["argnums"])), "argnums repeat")
        T._require(all(0 <= i < len(args) for i in t["argnums"]), "argnums out of range")
        T._require(all(args[i].dtype == T.FLOAT for i in t["argnums"]), f"{kind} with respect to an int32 argument")
        return replace(ctx, grad_at=len(ctx.axes), rules=ctx.rules | {T.REVERSE}), list(args)

    def exit(self, t, outer, inner, args, results):
        T._require(len(results) == 1 and results[0].shape == (), "grad needs exactly one scalar result")
        loss = results[0]
        # Along a manual axis with check_vma=True the gradient of an unvarying argument is
        # summed over the axis (unvarying); along vmap axes and unchecked manual axes each
        # index has its own gradient, which varies wherever the loss does.
        independent = frozenset(a.name for a in outer.axes if a.kind == "vmap" or not a.check_vma)
        # a collective inside over a named vmap axis outside moves cotangents between examples:
        # the gradient may vary along it even where the loss and the argument do not
        crossing = frozenset(a.name for a in outer.axes if a.kind == "vmap" and a.visible)
        grads = [replace(args[i], vma=args[i].vma | (loss.vma & independent) | crossing) for i in t["argnums"]]
        return ([loss] if self.kind == "value_and_grad" else []) + grads

    def render(self, r, t, f, nested, typed):
        from fuzz.render import _int, _tuple_source

        r.helpers.add(self.kind)
        return f"tuple_{self.kind}({f}, argnums={_tuple_source(map(_int, t['argnums']))})"

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        return r.grad(t, rest, fn, ctx, inner_ctx, xs, inner_ts, env)

    def draw(self, g, ctx, args, pools):
        floats = pools["floats"]
        pool = pools["grad_args"] if self.kind == "grad" else [i for i in range(len(args)) if floats[i]]
        argnums = g.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=len(pool), unique=True))
        return {"kind": self.kind, "argnums": sorted(argnums)}


class Linearized(Transform):
    """jax.vjp / jax.jvp / jax.linearize with seeded (co)tangents (typed as jvp or vjp)."""

    schema = _LINEARIZED_SCHEMA
    differentiates = True

    def __init__(self, kind: str):
        self.kind, self.api = kind, (kind,)
        self.doc = f"https://docs.jax.dev/en/latest/_autosummary/jax.{kind}.html"

    def enter(self, t, ctx, args, top):
        kind = self.kind
        # Inside a shard_map body (check_vma on) jax.vjp refuses a constant cotangent for a
        # varying output ("unexpected JAX type ... expected float32[2]{V:x}", jax 0.10.2), and
        # the semantics of seeded (co)tangents of unvarying arguments there are not pinned
        # down: refused rather than guessed. Anywhere else they are typed like grad.
        T._require(not ctx.manual, f"{kind} inside a shard_map body is not generated")
        T._require(len(args) >= 1, f"{kind} of a function without arguments")
        T._require(all(a.dtype == T.FLOAT for a in args), f"{kind} of a function with an int32 argument")
        mode = T.REVERSE if kind == "vjp" else T.FORWARD_MODE
        return replace(ctx, grad_at=len(ctx.axes), rules=ctx.rules | {mode}), list(args)

    def exit(self, t, outer, inner, args, results):
        if self.kind == "vjp":
            # outputs, then one cotangent per argument. A cotangent varies where its argument
            # does and, along vmap axes (the only independent axes here: no manual axis is in
            # scope, see enter), wherever an output does, and along every named vmap axis outside
            # (a collective inside over it moves cotangents between examples).
            independent = frozenset(a.name for a in outer.axes if a.kind == "vmap" or not a.check_vma)
            crossing = frozenset(a.name for a in outer.axes if a.kind == "vmap" and a.visible)
            varying = (frozenset().union(*(r.vma for r in results)) & independent) | crossing
            return list(results) + [replace(a, vma=a.vma | varying) for a in args]
        # outputs, then their tangents: a tangent has its output's type (the seeded input
        # tangents are unvarying, and the linearized ops follow the same vma rules)
        return list(results) + list(results)

    def render(self, r, t, f, nested, typed):
        from fuzz.render import _int

        r.helpers.add(self.kind)
        return f"tuple_{self.kind}({f}, {_int(t['seed'])})"

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        return r.linearized(t, rest, fn, inner_ctx, xs, inner_ts, env)

    def draw(self, g, ctx, args, pools):
        return {"kind": self.kind, "seed": g.draw(st.integers(0, 255))}


class Jacobian(Transform):
    """jax.jacrev / jax.jacfwd with one int argnums: typed as grad underneath."""

    schema = _JACOBIAN_SCHEMA
    differentiates = True
    draw_family = "jac"

    def __init__(self, kind: str):
        self.kind, self.api = kind, (kind,)
        self.doc = f"https://docs.jax.dev/en/latest/_autosummary/jax.{kind}.html"

    def enter(self, t, ctx, args, top):
        kind = self.kind
        # measured on jax 0.10.2: both run inside shard_map bodies (check_vma on and off),
        # under vmap and jit; typed as grad underneath (grad_at: the same collective rules)
        T._require(len(t["argnums"]) == 1, f"{kind} takes one argnums entry (an int)")
        (k,) = t["argnums"]
        T._require(type(k) is int and 0 <= k < len(args), "argnums out of range")
        T._require(args[k].dtype == T.FLOAT, f"{kind} with respect to an int32 argument")
        mode = T.REVERSE if kind == "jacrev" else T.FORWARD_MODE
        return replace(ctx, grad_at=len(ctx.axes), rules=ctx.rules | {mode, T.JACOBIAN}), list(args)

    def exit(self, t, outer, inner, args, results):
        # Per output r its Jacobian w.r.t. argument a: shape r.shape + a.shape. Along a
        # checked manual axis jacrev's result varies where a does (the cotangent basis
        # reaches an unvarying argument through a pvary, whose transpose is a psum) and
        # jacfwd's where r does (the tangent basis flows forward); along independent axes
        # (vmap, unchecked) both vary where either does (measured with jax.typeof, 0.10.2).
        a = args[t["argnums"][0]]
        independent = frozenset(x.name for x in outer.axes if x.kind == "vmap" or not x.check_vma)
        crossing = frozenset(x.name for x in outer.axes if x.kind == "vmap" and x.visible)
        if self.kind == "jacrev":
            return [T.Ty(r.shape + a.shape, a.vma | (r.vma & independent) | crossing) for r in results]
        return [T.Ty(r.shape + a.shape, r.vma | (a.vma & independent) | crossing) for r in results]

    def render(self, r, t, f, nested, typed):
        from fuzz.render import _int

        if len(t["argnums"]) != 1:
            raise T.ProgramError(f"{self.kind} takes one argnums entry")
        r.helpers.add("jac")
        return f"tuple_jac(jax.{self.kind}, {f}, argnums={_int(t['argnums'][0])})"

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        return r.jacobian(t, rest, fn, ctx, inner_ctx, xs, inner_ts, env)

    def draw(self, g, ctx, args, pools):
        return {"kind": self.kind, "argnums": [g.draw(st.sampled_from(pools["jac_args"]))]}

    def added_rank(self, t, args):
        return args[t["argnums"][0]].rank  # (the argument's dims follow each result's)


TRANSFORMS = (Grad("grad"), Grad("value_and_grad"), Linearized("vjp"), Linearized("jvp"), Jacobian("jacrev"),
              Jacobian("jacfwd"), Linearized("linearize"))
