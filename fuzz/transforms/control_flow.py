"""Control flow: jax.lax.map, jax.lax.scan, jax.lax.cond, jax.lax.fori_loop, jax.lax.while_loop."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from fuzz import typecheck as T
from fuzz.transforms.base import Transform
from fuzz.transforms.vmap import draw_mapped

_LEADING = {"type": "array", "items": {"oneOf": [{"type": "null"}, {"type": "integer", "const": 0}]}, "minItems": 1}
_LAX = "https://docs.jax.dev/en/latest/_autosummary/jax.lax.{}.html"


def _in_axes_source(t: dict, what: str) -> str:
    from fuzz.render import _int, _tuple_source

    if not all(a is None or _int(a) == "0" for a in t["in_axes"]):
        raise T.ProgramError(f"{what}'s in_axes are 0 or None")
    return _tuple_source('None' if a is None else '0' for a in t['in_axes'])


class Map(Transform):
    """jax.lax.map over dim 0 of the arguments whose in_axes entry is 0: typed and evaluated as
    the vmap it is (fuzz.typecheck.as_vmap)."""

    maps_outputs = True
    kind = "map"
    api = ("map",)
    doc = _LAX.format("map")
    schema = {"properties": {"kind": {"const": "map"}, "in_axes": _LEADING}, "required": ["in_axes"],
              "additionalProperties": False}

    def enter(self, t, ctx, args, top):
        from fuzz.transforms import REGISTRY

        T._require(all(ax is None or (type(ax) is int and ax == 0) for ax in t["in_axes"]),
                   "map's in_axes are 0 (mapped over the leading dim) or None (passed through)")
        return REGISTRY["vmap"].enter(T.as_vmap(t), ctx, args, False)

    def exit(self, t, outer, inner, args, results):
        from fuzz.transforms import REGISTRY

        return REGISTRY["vmap"].exit(T.as_vmap(t, len(results)), outer, inner, args, results)

    def render(self, r, t, f, nested, typed):
        in_axes = _in_axes_source(t, "map")
        r.helpers.add("lax_map")
        return f"lax_map({f}, in_axes={in_axes})"

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        return r.vmap(t, rest, fn, ctx, inner_ctx, xs, inner_ts, env)

    def draw(self, g, ctx, args, pools):
        return draw_mapped(g, "map", ctx, args)


class Scan(Transform):
    maps_outputs = True
    kind = "scan"
    api = ("scan",)
    doc = _LAX.format("scan")
    schema = {"description": "jax.lax.scan over dim 0 of the arguments whose in_axes entry is 0; an argument whose "
                             "carry entry is k (in_axes null) starts the carry and takes f's result k after each step, "
                             "the others are closed over; the results stacked along a new dim 0 (fuzz/render.py "
                             "lax_scan).",
              "properties": {"kind": {"const": "scan"}, "in_axes": _LEADING,
                             "carry": {"type": "array",
                                       "items": {"oneOf": [{"type": "null"},
                                                           {"type": "integer", "minimum": 0, "maximum": 64}]},
                                       "minItems": 1}},
              "required": ["in_axes", "carry"], "additionalProperties": False}
    feature_names = ("scan_carry",)

    def enter(self, t, ctx, args, top):
        # jax.lax.scan over dim 0 of the arguments whose in_axes entry is 0; an argument whose
        # carry entry is k starts the carry and takes f's result k after each step (fuzz.render,
        # docs/program.md). No named axis: the steps run in order, so collectives inside see
        # the enclosing axes only.
        T._require(len(t["in_axes"]) == len(args), "in_axes and args differ in length")
        T._require(all(ax is None or (type(ax) is int and ax == 0) for ax in t["in_axes"]),
                   "scan's in_axes are 0 (scanned over the leading dim) or None (carried or closed over)")
        scanned = [a for a, ax in zip(args, t["in_axes"]) if ax == 0]
        T._require(bool(scanned) and all(a.rank >= 1 for a in scanned), "scan over no argument, or a rank-0 one")
        lengths = {a.shape[0] for a in scanned}
        T._require(len(lengths) == 1, f"scan over leading dims that differ: {sorted(lengths)}")
        T._require(min(lengths) >= 1, "scan over an empty dim")
        return ctx, [replace(a, shape=a.shape[1:]) if ax == 0 else a for a, ax in zip(args, t["in_axes"])]

    def exit(self, t, outer, inner, args, results):
        carry = t["carry"]
        T._require(isinstance(carry, list) and len(carry) == len(args), "carry and args differ in length")
        taken = [k for k in carry if k is not None]
        T._require(all(type(k) is int and 0 <= k < len(results) for k in taken) and len(set(taken)) == len(taken),
                   "a carry entry names no result, or one result twice")
        extra = frozenset()
        for a, ax, k in zip(args, t["in_axes"], carry):
            if k is not None:
                T._require(ax is None, "a carried argument is scanned over")
                T._require(T.carry_fits(a, results[k], outer), f"scan carry {a} becomes {results[k]}")
                extra |= results[k].vma - a.vma
        # Along vmap and unchecked manual axes a carry may start unvarying and come back
        # varying (JAX batches it from the first step): from the second step on, anything
        # may vary where a carried result does, so every result is typed as varying there.
        results = [replace(r, vma=r.vma | extra) for r in results]
        n = next(a.shape[0] for a, ax in zip(args, t["in_axes"]) if ax == 0)
        return [replace(r, shape=(n,) + r.shape) for r in results]

    def render(self, r, t, f, nested, typed):
        from fuzz.render import _int, _tuple_source

        in_axes = _in_axes_source(t, "scan")
        r.helpers.add("lax_scan")
        return (f"lax_scan({f}, in_axes={in_axes}, "
                f"carry={_tuple_source('None' if c is None else _int(c) for c in t['carry'])})")

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        return r.scan(t, rest, fn, ctx, inner_ctx, xs, inner_ts, env)

    def features(self, t, out, mesh, manual):
        if any(k is not None for k in t["carry"]):
            out.add("scan_carry")
        return manual

    def draw(self, g, ctx, args, pools):
        return draw_mapped(g, "scan", ctx, args)

    def draw_out(self, g, t, outer, inner, results, inner_args):
        # an argument not scanned over may carry a result of its very type (fuzz.typecheck.exit_)
        carry, taken = [], set()
        for a, ax in zip(inner_args, t["in_axes"]):
            opts = [k for k, r in enumerate(results) if ax is None and T.carry_fits(a, r, outer) and k not in taken]
            k = g.draw(st.sampled_from([None] + opts * 2)) if opts else None  # a carry two times in three
            carry.append(k)
            taken.add(k)
        t["carry"] = carry


class Cond(Transform):
    maps_outputs = True
    kind = "cond"
    api = ("cond",)
    doc = _LAX.format("cond")
    schema = {"description": "jax.lax.cond(sum(sign(args[0])) >= 0, f, g, *args) where g returns f's outputs negated.",
              "properties": {"kind": {"const": "cond"}}, "additionalProperties": False}

    def enter(self, t, ctx, args, top):
        # The predicate is derived from argument 0 (its signs: fuzz.reference, docs/program.md).
        # With check_vma on, jax 0.10.2 types cond's outputs without the predicate's varying
        # axes (jax-ml/jax#40823, open: "lax.cond can mark an array as replicated when it is
        # not"), so a predicate varying over a checked manual axis is refused rather than
        # made to rediscover that bug everywhere; over unchecked and vmap axes it may vary
        # (measured: collectives inside both branches run and agree, devices diverging).
        T._require(len(args) >= 1, "cond of a function without arguments")
        why = T.transform_refusal(self.kind, ctx)
        T._require(why is None, why or "")
        T._require(not (args[0].vma & T.checked_axes(ctx)),
                   "cond's predicate varies over a checked manual axis (jax-ml/jax#40823: not generated)")
        batched = ctx.batched
        return (replace(ctx, rules=ctx.rules | {T.NO_IO_COND}) if batched else ctx), list(args)

    def exit(self, t, outer, inner, args, results):
        # f's outputs or their negation, chosen per index where the predicate varies
        return [replace(r, vma=r.vma | args[0].vma) for r in results]

    def render(self, r, t, f, nested, typed):
        r.helpers.add("cond")
        return f"tuple_cond({f})"

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        outs, out_ts = r.call(rest, fn, inner_ctx, xs, inner_ts, env)
        return r.cond(xs[0], outs, out_ts, len(ctx.axes)), out_ts


class Loop(Transform):
    """jax.lax.fori_loop / jax.lax.while_loop with a static trip count ``n``: the carry starts at
    f's outputs and adds them n times."""

    maps_outputs = True
    shrinkable = ("n",)
    schema = {"description": "jax.lax.fori_loop(0, n, ...) / jax.lax.while_loop with a counter: the carry starts at "
                             "f's outputs and adds f's outputs n times, (n + 1) * f(*args).",
              "properties": {"kind": {"enum": ["fori_loop", "while_loop"]},
                             "n": {"type": "integer", "minimum": 0, "maximum": 3}},
              "required": ["n"], "additionalProperties": False}
    draw_family = "loop"

    def __init__(self, kind: str):
        self.kind, self.api, self.doc = kind, (kind,), _LAX.format(kind)

    def enter(self, t, ctx, args, top):
        kind = self.kind
        n = t["n"]
        T._require(type(n) is int and 0 <= n <= T.LOOP_MAX, f"{kind}'s trip count n is an int in 0..{T.LOOP_MAX}")
        why = T.transform_refusal(kind, ctx)  # (no while_loop under reverse mode, release rules)
        T._require(why is None, why or "")
        return ctx, list(args)

    def exit(self, t, outer, inner, args, results):
        return list(results)

    def render(self, r, t, f, nested, typed):
        from fuzz.render import _int

        k = self.kind
        n = _int(t["n"])
        if not 0 <= int(n) <= T.LOOP_MAX:
            raise T.ProgramError(f"{k}'s trip count is in 0..{T.LOOP_MAX}")
        r.helpers.add(k)
        return f"tuple_{k.split('_')[0]}({f}, {n})"

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        outs, out_ts = r.call(rest, fn, inner_ctx, xs, inner_ts, env)
        carry = list(outs)
        for _ in range(t["n"]):  # the loop's additions, in its order
            carry = [c + y for c, y in zip(carry, outs)]
        return carry, out_ts

    def draw(self, g, ctx, args, pools):
        return {"kind": self.kind, "n": g.draw(st.integers(0, T.LOOP_MAX))}


TRANSFORMS = (Map(), Cond(), Loop("fori_loop"), Loop("while_loop"), Scan())
