"""Host callbacks: ``io_callback`` (``jax.experimental.io_callback``), ordered or not, with or without a result.

Typing (JAX docs and messages): not ordered under vmap ("Cannot `vmap` ordered IO
callback"); not inside a partial-manual shard_map ("callbacks are only supported in spmd
computations when all mesh axes are partitioned manually", jax/_src/callback.py); under
grad the argument is under ``stop_gradient`` ("IO callbacks do not support JVP"), and not
at all on releases with the rule ``no_callback_under_grad`` (jax 0.4.28); a result only
on an unvarying argument (JAX types a callback's result inside shard_map as unvarying).
The reference records the values each host function receives, per tag.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fuzz.ops.base import BOOL, Op, require


class IoCallback(Op):
    name = "io_callback"
    family = "io_callback"
    n_outs = frozenset({0, 1})
    params = {"tag": {"$ref": "#/$defs/name"}, "ordered": BOOL, "returns": BOOL, "stop_gradient": BOOL}

    def types(self, eqn, args, ctx):
        (a,) = args
        if eqn["ordered"]:
            require(not ctx.in_vmap, "an ordered io_callback cannot be batched by vmap")
        require(not ctx.manual or ctx.manual == set(ctx.mesh), "io_callback inside a partial-manual shard_map")
        if ctx.in_grad:
            require(eqn["stop_gradient"], "io_callback under grad needs stop_gradient (no JVP rule)")
            require("no_callback_under_grad" not in ctx.rules,
                    "this JAX release has no io_callback under grad (\"IO callbacks do not support JVP\")")
        if eqn["returns"]:
            require(not (a.vma & ctx.manual), "io_callback with a result on a value varying over a manual axis")
            return [a]
        return []

    def draw(self, draw, ctx, scope):
        xs = scope.floats()
        if not xs or (ctx.manual and ctx.manual != set(ctx.mesh)) or (
                ctx.in_grad and "no_callback_under_grad" in ctx.rules):
            return None
        a = draw(st.sampled_from(xs))
        can_return = not (scope.visible[a].vma & ctx.manual)
        e = {"op": self.name, "args": [a], "outs": [], "tag": scope.new_tag(),
             "ordered": draw(st.booleans()) if not ctx.in_vmap else False,
             "returns": draw(st.booleans()) if can_return else False,
             "stop_gradient": ctx.in_grad}
        if e["returns"]:
            e["outs"] = [scope.new_var()]
        return e

    def reference(self, r, eqn, xs, ts, ctx):
        x = xs[0]
        r.record(eqn["tag"], x)
        if eqn["returns"]:
            return [r.jax.lax.stop_gradient(x) if r.xp is not np else x]
        return []

    def render(self, rr, eqn, args, outs, ctx, ind):
        a = args[0]
        arg = f"jax.lax.stop_gradient({a})" if eqn["stop_gradient"] else a
        ordered = rr.bool(eqn["ordered"])
        host = rr.callback_host(rr.id(eqn["tag"]), rr.bool(eqn["returns"]) == "True")  # (rr.bool checks the type)
        if eqn["returns"]:
            return [f"{ind}{outs[0]} = io_callback({host}, jax.ShapeDtypeStruct({a}.shape, {a}.dtype), {arg}, "
                    f"ordered={ordered})"]
        return [f"{ind}io_callback({host}, None, {arg}, ordered={ordered})"]

    def features(self, eqn):
        out = {"io_callback_ordered" if eqn["ordered"] else "io_callback_unordered"}
        if eqn["returns"]:
            out.add("io_callback_result")
        return out


OPS = (IoCallback(),)
