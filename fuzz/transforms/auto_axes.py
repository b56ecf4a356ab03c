"""jax.sharding.auto_axes: an Explicit mesh's axes made Auto for the body."""
from __future__ import annotations

from dataclasses import replace

from fuzz import typecheck as T
from fuzz.transforms.base import Transform
from fuzz.transforms.jit import draw_out_specs


class AutoAxes(Transform):
    maps_outputs = True
    kind = "auto_axes"
    api = ("auto_axes",)
    doc = "https://docs.jax.dev/en/latest/notebooks/explicit-sharding.html"
    schema = {"description": "auto_axes: jax.sharding.auto_axes(f, out_sharding=...) on an Explicit mesh (f sees "
                             "Auto axes); its results are then resharded to P()",
              "properties": {"kind": {"const": "auto_axes"},
                             "out_specs": {"type": "array", "items": {"$ref": "#/$defs/spec"}}},
              "required": ["out_specs"], "additionalProperties": False}

    def enter(self, t, ctx, args, top):
        # jax.sharding.auto_axes(f, out_sharding=...): f sees the mesh's axes as Auto; its
        # results get out_sharding and are then resharded to P() (fuzz.render), so that the
        # values outside stay replicated as every value on an Explicit mesh is here
        T._require("no_auto_axes" not in ctx.rules, "this JAX release has no jax.sharding.auto_axes")
        T._require(ctx.explicit and not ctx.manual, "auto_axes outside an Explicit mesh's top level")
        return replace(ctx, explicit=False, rules=ctx.rules | {T.AUTO_BODY}), list(args)

    def exit(self, t, outer, inner, args, results):
        T._require(len(t["out_specs"]) == len(results), "out_specs and results differ in length")
        for spec, r in zip(t["out_specs"], results):
            T._check_spec(spec, r.rank, [a for a in outer.mesh if a not in outer.reserved], outer, "a mesh axis",
                          shape=r.shape)
        return list(results)

    def render(self, r, t, f, nested, typed):
        from fuzz.render import _tuple_source, spec_source

        r.helpers.add("auto_axes")
        return f"auto_axes_replicated({f}, {_tuple_source(spec_source(s) for s in t['out_specs'])})"

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        return r.call(rest, fn, inner_ctx, xs, inner_ts, env)

    def draw(self, g, ctx, args, pools):
        return {"kind": "auto_axes", "out_specs": []}  # drawn once the results are known (draw_out)

    def draw_out(self, g, t, outer, inner, results, inner_args):
        draw_out_specs(g, t, outer, results)


TRANSFORMS = (AutoAxes(),)
