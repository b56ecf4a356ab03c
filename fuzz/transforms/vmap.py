"""jax.vmap, and jax.pmap (a vmap entry with ``pmap: true``)."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from fuzz import typecheck as T
from fuzz.transforms.base import Transform


def draw_mapped(g, kind: str, ctx, args: list) -> dict:
    """A vmap's, map's or scan's entry with its in_axes (``kind``): a map is a vmap over dim 0 of
    each mapped argument (fuzz.typecheck.as_vmap); a scan takes its in_axes the same way (its
    carry is drawn in draw_out). Out_axes are left to draw_out."""
    from strategies.programs import VMAP_AXIS_NAMES

    draw = g.draw
    dims = (lambda a: range(a.rank)) if kind == "vmap" else (lambda a: range(min(a.rank, 1)))
    cands = [(i, d) for i, a in enumerate(args) for d in dims(a) if a.shape[d] > 0]
    # one vmap in two where a pmap may sit is a jax.pmap (the same values, one device per
    # index; since jax 0.8.0 a jit of a shard_map over a mesh of its own), over a dim of the
    # mesh's device count (fuzz.typecheck.pmap_refusal and enter; at a program's call,
    # uncommitted inputs only: fuzz.typecheck.check_committed)
    n_dev = T.pmap_size(ctx)
    pmap = (kind == "vmap" and "pmap" not in g.disabled and T.pmap_refusal(ctx, ctx.top) is None
            and not (ctx.top and any(c is not None for c in g.committed[:len(args)]))
            and any(args[i].shape[d] == n_dev for i, d in cands) and draw(st.booleans()))
    if pmap:
        cands = [(i, d) for i, d in cands if args[i].shape[d] == n_dev]
    i0, d0 = draw(st.sampled_from(cands))
    b = args[i0].shape[d0]
    in_axes = []
    for i, a in enumerate(args):
        if i == i0:
            in_axes.append(d0)
        else:
            in_axes.append(draw(st.sampled_from([None] + [d for d in dims(a) if a.shape[d] == b])))
    if kind == "map":
        return {"kind": "map", "in_axes": in_axes}
    if kind == "scan":
        return {"kind": "scan", "in_axes": in_axes, "carry": []}
    taken = {a.name for a in ctx.axes}
    names = [] if "vmap_axis_name" in g.disabled else [n for n in VMAP_AXIS_NAMES if n not in taken][:1]
    # named two times in three: a collective over the vmap's axis needs the name
    name = draw(st.sampled_from([None] + names * 2))
    spmd_opts = [] if pmap else [a for a in ctx.mesh if "spmd_axis_name" not in g.disabled
                 and a not in ctx.manual and a not in ctx.reserved and b % ctx.mesh[a] == 0]
    # 3 times in 4 among the mesh axes of size >= 2 when there are any: over a size-1 axis
    # spmd_axis_name shards nothing, and its batching rules do no work (as for the
    # collectives, fuzz.ops.collectives._exchanging_first)
    wide = [a for a in spmd_opts if ctx.mesh[a] >= 2]
    if wide and len(wide) < len(spmd_opts) and draw(st.integers(0, 3)) > 0:
        spmd_opts = wide
    spmd = draw(st.sampled_from([None] + spmd_opts))
    t = {"kind": "vmap", "in_axes": in_axes, "out_axes": [], "axis_name": name, "spmd_axis_name": spmd}
    if pmap:
        t["pmap"] = True
    return t


class Vmap(Transform):
    maps_outputs = True
    kind = "vmap"
    api = ("vmap", "pmap")
    doc = "https://docs.jax.dev/en/latest/_autosummary/jax.vmap.html"
    schema = {"properties": {"kind": {"const": "vmap"},
                             "in_axes": {"type": "array", "items": {"type": ["integer", "null"], "minimum": 0}},
                             "out_axes": {"type": "array", "items": {"type": ["integer", "null"], "minimum": 0}},
                             "axis_name": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/name"}]},
                             "spmd_axis_name": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/name"}]},
                             "pmap": {"type": "boolean"}},
              "required": ["in_axes", "out_axes", "axis_name", "spmd_axis_name"], "additionalProperties": False}
    feature_names = ("spmd_axis_name", "vmap_axis_name", "pmap")

    def enter(self, t, ctx, args, top):
        T._require(len(t["in_axes"]) == len(args), "in_axes and args differ in length")
        sizes = {args[i].shape[ax] for i, ax in enumerate(t["in_axes"]) if ax is not None and ax < args[i].rank}
        T._require(any(ax is not None for ax in t["in_axes"]), "vmap with no batched argument")
        for i, ax in enumerate(t["in_axes"]):
            T._require(ax is None or ax < args[i].rank, "in_axes out of range")
        T._require(len(sizes) == 1, f"vmap batch sizes differ: {sorted(sizes)}")
        T._require(min(sizes) >= 1, "vmap over an empty dim (a size-0 named axis)")
        (b,) = sizes
        name = T.vmap_axis_name(t, ctx)
        if t["axis_name"] is not None:
            T._require(t["axis_name"] not in ctx.mesh and all(a.name != name for a in ctx.axes),
                       f"vmap axis_name {name!r} clashes")
        reserved = ctx.reserved
        spmd = t["spmd_axis_name"]
        if spmd is not None:
            T._require(spmd in ctx.mesh and spmd not in ctx.manual and spmd not in reserved,
                       f"spmd_axis_name {spmd!r} is not a free mesh axis")
            T._require(b % ctx.mesh[spmd] == 0, "batch size not divisible by the spmd_axis_name axis")
            reserved = reserved | {spmd}
        rules = ctx.rules
        if t.get("pmap"):
            why = T.pmap_refusal(ctx, top)
            T._require(why is None, why or "")
            T._require(spmd is None, "pmap has no spmd_axis_name")
            T._require(b == T.pmap_size(ctx), f"pmap over {b} devices on a mesh of another count (pmap_size)")
            rules = rules | {T.PMAP_BODY}
        axis = T.Axis(name, b, "vmap", visible=t["axis_name"] is not None)
        inner = []
        for i, ax in enumerate(t["in_axes"]):
            a = args[i]
            if ax is None:
                inner.append(a)
            else:
                inner.append(replace(a, shape=a.shape[:ax] + a.shape[ax + 1:], vma=a.vma | {name}))
        return replace(ctx, axes=ctx.axes + (axis,), reserved=reserved, n_vmap=ctx.n_vmap + 1, rules=rules), inner

    def exit(self, t, outer, inner, args, results):
        name = inner.axes[-1].name
        b = inner.axes[-1].size
        T._require(len(t["out_axes"]) == len(results), "out_axes and results differ in length")
        out = []
        for ax, r in zip(t["out_axes"], results):
            if ax is None:
                T._require(name not in r.vma, "out_axes None for a result that varies over the batch")
                out.append(r)
            else:
                T._require(0 <= ax <= r.rank, "out_axes out of range")
                out.append(replace(r, shape=r.shape[:ax] + (b,) + r.shape[ax:], vma=r.vma - {name}))
        return out

    def render(self, r, t, f, nested, typed):
        from fuzz.render import _id, _int, _tuple_source

        axes = lambda xs: _tuple_source("None" if a is None else _int(a) for a in xs)  # noqa: E731
        kw = [f"in_axes={axes(t['in_axes'])}", f"out_axes={axes(t['out_axes'])}"]
        if t["axis_name"] is not None:
            kw.append(f"axis_name={_id(t['axis_name'])!r}")
        if t["spmd_axis_name"] is not None:
            kw.append(f"spmd_axis_name={_id(t['spmd_axis_name'])!r}")
        # jax.pmap maps as vmap does, one device per index (its docstring: "Semantically it
        # is comparable to vmap"); its axis_name is positional-or-keyword, as vmap's
        return f"jax.{T.transform_name(t)}({f}, {', '.join(kw)})"

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        return r.vmap(t, rest, fn, ctx, inner_ctx, xs, inner_ts, env)

    def features(self, t, out, mesh, manual):
        if t["spmd_axis_name"]:
            out.add("spmd_axis_name")
        if t["axis_name"]:
            out.add("vmap_axis_name")
        return manual

    def draw(self, g, ctx, args, pools):
        return draw_mapped(g, "vmap", ctx, args)

    def draw_out(self, g, t, outer, inner, results, inner_args):
        name = inner.axes[-1].name
        axes = []
        for r in results:
            opts = list(range(r.rank + 1))
            # None: an unbatched result; not for a rank-0 one that varies over a manual
            # axis, which an enclosing shard_map's out_specs could not name
            if name not in r.vma and (r.rank >= 1 or not (r.vma & inner.manual)):
                opts = opts[:1] + [None] + opts[1:]
            axes.append(g.draw(st.sampled_from(opts)))
        t["out_axes"] = axes


TRANSFORMS = (Vmap(),)
