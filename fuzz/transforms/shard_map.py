"""jax.shard_map (the experimental one on old releases), also written as jax.smap."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from fuzz import typecheck as T
from fuzz.transforms.base import Transform


class ShardMap(Transform):
    maps_outputs = True
    kind = "shard_map"
    api = ("shard_map", "smap")
    doc = "https://docs.jax.dev/en/latest/notebooks/shard_map.html"
    schema = {"properties": {"kind": {"const": "shard_map"},
                             "in_specs": {"type": "array", "items": {"$ref": "#/$defs/spec"}},
                             "out_specs": {"type": "array", "items": {"$ref": "#/$defs/spec"}},
                             "check_vma": {"type": "boolean"}, "infer": {"type": "boolean"},
                             "smap": {"type": "boolean"}, "negative_axes": {"type": "boolean"},
                             "axis_names": {"oneOf": [{"type": "null"},
                                                      {"type": "array", "items": {"$ref": "#/$defs/name"},
                                                       "minItems": 1}]}},
              "required": ["in_specs", "out_specs", "check_vma", "axis_names"], "additionalProperties": False}
    feature_names = ("check_vma_off", "partial_manual", "infer_in_specs", "smap", "negative_axes")

    def enter(self, t, ctx, args, top):
        _require = T._require
        _require(T.AUTO_BODY not in ctx.rules, "shard_map inside auto_axes is not generated")
        _require(T.PMAP_BODY not in ctx.rules, "shard_map inside a pmap body (the context mesh is pmap's own)")
        mesh = ctx.mesh
        names = t["axis_names"] if t["axis_names"] is not None else [a for a in mesh if a not in ctx.manual]
        _require(len(names) > 0, "shard_map with no manual axis")
        for n in names:
            _require(n in mesh and n not in ctx.manual, f"shard_map axis {n!r} is not a free mesh axis")
        _require(not (ctx.explicit and ctx.manual), "nested shard_map over an Explicit mesh is not generated")
        _require(not (ctx.explicit and set(names) != set(mesh)), "partial-manual shard_map over an Explicit mesh")
        if t.get("infer"):
            why = T.infer_refusal(ctx)
            _require(why is None, why or "")
        if t.get("smap") or t.get("negative_axes"):
            why = T.smap_refusal(ctx, t)
            _require(why is None, why or "")
        # jax/_src/shard_map.py (ShardMapTrace.process_shard_map): "Check consistency between
        # outer and inner shmaps on ... check_vma" -- a nested shard_map must keep the enclosing
        # one's check_vma (eager: a bare `raise Exception`; "TODO: add check in jit path").
        _require(not ctx.manual or "no_nested_shard_map" not in ctx.rules,
                 "this JAX release cannot nest shard_maps")
        if set(names) | ctx.manual != set(mesh):  # partial-manual
            why = T.partial_manual_refusal(ctx)
            _require(why is None, why or "")
        outer_checks = {a.check_vma for a in ctx.axes if a.kind == "mesh"}
        _require(not outer_checks or outer_checks == {t["check_vma"]},
                 "a nested shard_map must keep the enclosing shard_map's check_vma")
        _require(len(t["in_specs"]) == len(args), "in_specs and args differ in length")
        inner = []
        for spec, a in zip(t["in_specs"], args):
            T._check_spec(spec, a.rank, names, ctx, shape=a.shape)
            shape = tuple(d // T.spec_size(s, mesh) for d, s in zip(a.shape, spec))
            inner.append(replace(a, shape=shape, vma=a.vma | frozenset(x for s in spec if s for x in s)))
        new_axes = tuple(T.Axis(n, mesh[n], "mesh", t["check_vma"]) for n in mesh if n in names)
        return replace(ctx, axes=ctx.axes + new_axes), inner

    def exit(self, t, outer, inner, args, results):
        mine = inner.manual - outer.manual
        T._require(len(t["out_specs"]) == len(results), "out_specs and results differ in length")
        out = []
        for spec, r in zip(t["out_specs"], results):
            T._check_spec(spec, r.rank, sorted(mine), inner)
            named = {x for s in spec if s for x in s}
            missing = (r.vma & mine) - named
            T._require(not missing, f"out_specs {spec} omit axes {sorted(missing)} the result varies over")
            shape = tuple(d * T.spec_size(s, outer.mesh) for d, s in zip(r.shape, spec))
            out.append(replace(r, shape=shape, vma=r.vma - mine))
        return out

    def render(self, r, t, f, nested, typed):
        from fuzz.render import _smap_source, _tuple_source, spec_source

        expr = _smap_source(t, f) if t.get("smap") else r.shard_map_source(t, f, nested)
        if r.explicit:
            r.helpers.add("reshard")
            expr = (f"resharded({expr}, {_tuple_source(spec_source(s) for s in t['in_specs'])}"
                    f"{', replicate=False' if typed else ''})")
        return expr

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        return r.shard_map(t, rest, fn, ctx, inner_ctx, xs, inner_ts, env)

    def features(self, t, out, mesh, manual):
        if not t["check_vma"]:
            out.add("check_vma_off")
        # partial-manual: some mesh axis stays automatic inside (as fuzz.typecheck.enter types it;
        # an smap names its one axis even when it is the last free one)
        names = frozenset(t["axis_names"] if t["axis_names"] is not None else set(mesh) - manual)
        if t["axis_names"] is not None and names | manual != set(mesh):
            out.add("partial_manual")
        manual = manual | names
        if t.get("infer"):
            out.add("infer_in_specs")
        if t.get("smap"):
            out.add("smap")
        if t.get("negative_axes"):
            out.add("negative_axes")
        return manual

    def draw(self, g, ctx, args, pools):
        from strategies.programs import partition_specs

        draw = g.draw
        free = [a for a in ctx.mesh if a not in ctx.manual]
        names = None
        partial_ok = T.partial_manual_refusal(ctx) is None and "partial_manual" not in g.disabled
        if partial_ok and not ctx.explicit and len(free) > 1 and draw(st.booleans()):
            names = draw(st.lists(st.sampled_from(free), min_size=1, max_size=len(free) - 1, unique=True))
            names = [a for a in ctx.mesh if a in names]
        manual = names if names is not None else free
        usable = [a for a in manual if a not in ctx.reserved]
        in_specs = [draw(partition_specs(a.shape, usable, ctx.mesh)) for a in args]
        outer = [a.check_vma for a in ctx.axes if a.kind == "mesh"]
        # a nested shard_map keeps the enclosing one's check_vma (see fuzz.typecheck.enter)
        check = outer[0] if outer else ("check_vma_off" in g.disabled or draw(st.booleans().map(lambda b: not b)))
        t = {"kind": "shard_map", "in_specs": in_specs, "out_specs": [], "check_vma": check, "axis_names": names}
        # on an Explicit mesh, half of the time without in_specs and mesh: inferred from the
        # (resharded) arguments and the context mesh, JAX's other path (fuzz.typecheck.enter)
        if "infer_in_specs" not in g.disabled and T.infer_refusal(ctx) is None and draw(st.booleans()):
            t["infer"] = True
        # over one axis, with a context mesh (a shard_map body, set_mesh, an Explicit mesh):
        # written as jax.smap three times in four (fuzz.typecheck.smap_refusal: it is rarely
        # allowed), with its in_axes / out_axes counted from the end in a third of those (one
        # draw: a second boolean after the first came out True in 2 of 40 smaps drawn)
        if "smap" not in g.disabled and len(manual) == 1:
            as_smap = {**t, "axis_names": list(manual), "smap": True}
            if T.smap_refusal(ctx, as_smap) is None:
                forms = ["shard_map", "smap", "smap"] + ([] if "negative_axes" in g.disabled else ["negative"])
                form = draw(st.sampled_from(forms))
                if form != "shard_map":
                    t = {**as_smap, "negative_axes": True} if form == "negative" else as_smap
        return t

    def draw_out(self, g, t, outer, inner, results, inner_args):
        draw = g.draw
        mine = sorted(inner.manual - outer.manual, key=list(outer.mesh).index)
        usable = [a for a in mine if a not in inner.reserved]
        specs = []
        for r in results:
            need = [a for a in mine if a in r.vma]
            spec = [None] * r.rank
            # every axis the result varies over must be named; others may be (tiling copies)
            extra = draw(st.lists(st.sampled_from(usable), unique=True, max_size=len(usable))) if usable else []
            for a in need + [a for a in extra if a not in need]:
                if r.rank == 0:
                    break
                d = draw(st.integers(0, r.rank - 1))
                spec[d] = (spec[d] or []) + [a]
            specs.append(spec)
        t["out_specs"] = specs


TRANSFORMS = (ShardMap(),)
