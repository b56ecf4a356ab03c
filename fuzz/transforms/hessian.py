"""jax.hessian: the Hessian of each output w.r.t. one argument, ``jacfwd(jacrev(f, k), k)``.

``jax.hessian(fun, argnums)`` is ``jacfwd(jacrev(fun, argnums), argnums)`` (its docstring and
jax/_src/api.py, jax 0.4.26 to 0.10.2), for any output shape (of a scalar-valued function
its matrix of second derivatives): per output r a result of shape ``r.shape + a.shape +
a.shape``. It is typed, and evaluated by the reference, as that composition of the
registry's Jacobians, so it inherits their rules (a float argument, one int argnums, the
context of both forward and reverse mode).
"""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz import typecheck as T
from fuzz.transforms.base import Transform


def _parts(t: dict) -> tuple:
    """(jacfwd entry, jacrev entry) that ``t`` is ``jacfwd(jacrev(f))`` of."""
    argnums = list(t["argnums"])
    return {"kind": "jacfwd", "argnums": argnums}, {"kind": "jacrev", "argnums": argnums}


class Hessian(Transform):
    kind = "hessian"
    api = ("hessian",)
    doc = "https://docs.jax.dev/en/latest/_autosummary/jax.hessian.html"
    schema = {"description": "jax.hessian with argnums=argnums[0] (one int), jacfwd(jacrev(f)): for every output of "
                             "the function its Hessian w.r.t. that argument, shape out.shape + arg.shape + arg.shape.",
              "properties": {"kind": {"const": "hessian"},
                             "argnums": {"type": "array", "items": {"type": "integer", "minimum": 0},
                                         "minItems": 1, "maxItems": 1}},
              "required": ["argnums"], "additionalProperties": False}
    differentiates = True
    draw_family = "jac"

    def enter(self, t, ctx, args, top):
        from fuzz.transforms import REGISTRY

        T._require(isinstance(t["argnums"], list) and len(t["argnums"]) == 1, "hessian takes one argnums entry (an int)")
        fwd, rev = _parts(t)
        mid, mid_args = REGISTRY["jacfwd"].enter(fwd, ctx, args, top)
        return REGISTRY["jacrev"].enter(rev, mid, mid_args, False)

    def exit(self, t, outer, inner, args, results):
        from fuzz.transforms import REGISTRY

        fwd, rev = _parts(t)
        mid, mid_args = REGISTRY["jacfwd"].enter(fwd, outer, args, False)
        jacobians = REGISTRY["jacrev"].exit(rev, mid, inner, mid_args, results)
        return REGISTRY["jacfwd"].exit(fwd, outer, mid, args, jacobians)

    def render(self, r, t, f, nested, typed):
        from fuzz.render import _int

        if len(t["argnums"]) != 1:
            raise T.ProgramError("hessian takes one argnums entry")
        r.helpers.add("jac")
        return f"tuple_jac(jax.hessian, {f}, argnums={_int(t['argnums'][0])})"

    def reference(self, r, t, rest, fn, ctx, xs, ts, env):
        T.enter(t, ctx, ts)  # (its typing rule refuses what it refuses)
        fwd, rev = _parts(t)
        return r.call([fwd, rev] + list(rest), fn, ctx, xs, ts, env)

    def draw(self, g, ctx, args, pools):
        return {"kind": "hessian", "argnums": [g.draw(st.sampled_from(pools["jac_args"]))]}

    def added_rank(self, t, args):
        return 2 * args[t["argnums"][0]].rank


TRANSFORMS = (Hessian(),)
