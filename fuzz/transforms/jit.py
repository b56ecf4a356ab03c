"""jax.jit (with in_shardings / out_shardings, donate_argnums, inline)."""
from __future__ import annotations

from dataclasses import replace

from fuzz import typecheck as T
from fuzz.transforms.base import Transform

_SPECS = {"oneOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#/$defs/spec"}}]}


def draw_out_specs(g, t: dict, outer, results: list) -> None:
    """A jit's or auto_axes' out_specs, when left to be drawn (``[]``), one PartitionSpec per result."""
    from strategies.programs import partition_specs

    if t.get("out_specs") == []:
        axes = [a for a in outer.mesh if a not in outer.reserved]
        t["out_specs"] = [g.draw(partition_specs(r.shape, axes, outer.mesh)) for r in results]


class Jit(Transform):
    maps_outputs = True
    nullable = ("in_specs", "out_specs", "donate_argnums")
    kind = "jit"
    api = ("jit",)
    doc = "https://docs.jax.dev/en/latest/_autosummary/jax.jit.html"
    schema = {"properties": {"kind": {"const": "jit"}, "in_specs": _SPECS, "out_specs": _SPECS,
                             "donate_argnums": {"type": "array", "items": {"type": "integer", "minimum": 0,
                                                                           "maximum": 63},
                                                "maxItems": 64, "uniqueItems": True},
                             "inline": {"type": "boolean"}},
              "additionalProperties": False}
    feature_names = ("in_shardings", "out_shardings", "donate_argnums", "jit_inline")

    def enter(self, t, ctx, args, top):
        T._jit_shardings(t, "in_specs", args, ctx)
        # an eager jit's arguments are concrete arrays: a committed one whose sharding differs
        # from in_shardings raises ValueError ("Sharding passed to jit does not match the
        # sharding on the respective arg", jax 0.10.2, also under grad). Traced arguments (inside
        # jit) are only constrained. At a program's call the inputs' specs are known
        # (check_program compares them); in an eager body they are not: refused there.
        T._require(t.get("in_specs") is None or ctx.jit or top,
                   "a jit with in_shardings in an eager function body (its arguments are committed arrays)")
        # donate_argnums (https://docs.jax.dev/en/latest/faq.html#buffer-donation): only on a
        # program's call, whose arguments are concrete arrays (fuzz.render passes copies of the
        # donated inputs, which stay for later calls); a traced argument's donation means nothing
        donate = t.get("donate_argnums") or []
        T._require(not donate or top, "donate_argnums on a jit that is not a program call's first transform")
        T._require(all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(args) for i in donate)
                   and len(set(donate)) == len(donate), "donate_argnums must be distinct argument positions")
        # jax.jit(f, inline=True) traces f into the enclosing jaxpr, so f runs however that
        # jaxpr runs: a checkpoint called eagerly evaluates its jaxpr op by op, and a shard_map
        # there is an eager one ("Eager shard_map cannot return a `jax.Ref`", jax 0.10.2, a
        # default campaign's finding of 2026-12-05@9d2d504 under checkpoint): an inlined jit does not
        # make its body traced-under-jit
        return replace(ctx, jit=ctx.jit or not t.get("inline")), list(args)

    def exit(self, t, outer, inner, args, results):
        T._jit_shardings(t, "out_specs", results, outer)
        return list(results)

    def render(self, r, t, f, nested, typed):
        from fuzz.render import _int, _tuple_source, spec_source

        kw = "".join(f", {name}={_tuple_source(f'NamedSharding(mesh, {spec_source(s)})' for s in t[key])}"
                     for key, name in (("in_specs", "in_shardings"), ("out_specs", "out_shardings"))
                     if t.get(key) is not None)
        if t.get("donate_argnums"):
            kw += f", donate_argnums={_tuple_source(map(_int, t['donate_argnums']))}"
        if t.get("inline"):
            kw += ", inline=True"
        return f"jax.jit({f}{kw})"

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        return r.call(rest, fn, inner_ctx, xs, inner_ts, env)

    def features(self, t, out, mesh, manual):
        out.update(name for key, name in (("in_specs", "in_shardings"), ("out_specs", "out_shardings"))
                   if t.get(key) is not None)
        if t.get("donate_argnums"):
            out.add("donate_argnums")
        if t.get("inline"):
            out.add("jit_inline")
        return manual

    def draw(self, g, ctx, args, pools):
        return g.jit_in(ctx, args)

    def draw_out(self, g, t, outer, inner, results, inner_args):
        draw_out_specs(g, t, outer, results)


TRANSFORMS = (Jit(),)
