"""Host callbacks: ``io_callback``, ``pure_callback``, ``jax.debug.callback`` and ``jax.debug.print``.

Facts from JAX (the External callbacks guide, https://docs.jax.dev/en/latest/external-callbacks.html;
the ``jax.pure_callback`` and ``jax.debug.callback`` docstrings; jax/_src/callback.py and
jax/_src/debugging.py), measured on jax 0.4.26, 0.4.28, 0.4.34, 0.4.35, 0.4.38, 0.6.0 and
0.10.2 where said:

- ``io_callback``: not ordered under vmap ("Cannot `vmap` ordered IO callback"); under grad
  the argument is under ``stop_gradient`` ("IO callbacks do not support JVP"), and not at
  all on releases with the rule ``no_callback_under_grad`` (jax 0.4.28).
- ``pure_callback``: always has a result here, ``2 * x + 1`` of its argument (the host
  function logs ``x``, then computes that in NumPy: a result that differs from the
  argument shows a callback's result mixed up with its operand). ``vmap_method``
  "sequential" (one call per batch element, through ``lax.map``), "expand_dims" or
  "broadcast_all" (one call on the batched argument: with a single argument the two are
  the same); releases before 0.4.35 have ``vectorized=`` instead (caps
  ``pure_callback_kw``): "sequential" is rendered ``vectorized=False``, the others
  ``vectorized=True`` (the callback is called on the batched argument, batch dims
  leading; measured to give the same calls on 0.4.26 / 0.4.28 / 0.4.34). Its JVP rule
  raises ("Pure callbacks do not support JVP"), so under grad / vjp / jvp its argument is
  under ``stop_gradient`` (measured to run on every release above, 0.4.28 included).
  Not on an Explicit mesh under vmap with "sequential" outside shard_map: ``lax.map``
  refuses a sharded leading dim there ("0th dimension of all xs should be replicated",
  measured on 0.6.0 and 0.10.2, an Explicit-sharding rule).
- ``jax.debug.callback`` (no result; the host function logs what it receives) and
  ``jax.debug.print("{x}", x=...)``: allowed under grad / vjp / jvp without stop_gradient
  (its JVP rule calls it on the primal values: jax/_src/debugging.py; the guide's table says
  grad works), and inside a partial-manual shard_map (it gathers over the automatic axes;
  measured on 0.4.26 and 0.10.2). Never ``ordered``: an ordered debug effect is refused on
  a computation over more than one device ("The following ordered effects are not supported
  for more than 1 device", measured on 0.4.26 and 0.10.2), and whether a call spans one
  device is not in the typing context.

Rules all callbacks with a result share:

- not inside a partial-manual shard_map ("callbacks are only supported in spmd
  computations when all mesh axes are partitioned manually", jax/_src/callback.py);
- inside a shard_map body a result only on an argument that does not vary over a manual
  axis with ``check_vma`` on: JAX types a callback's result there as unvarying
  (``pure_callback_abstract_eval`` returns the declared shapes, with no varying axes), so a
  varying one would be typed wrong; under ``check_vma=False`` nothing is typed and the
  result varies as its argument does;
- on releases with the experimental shard_map's ``check_rep`` (release rule ``check_rep``,
  jax 0.4.26 to 0.5.x) the result varies over every checked manual axis: that check cannot
  infer a callback's result replicated (an out_specs ``P()`` raises "out_specs which require
  replication which can't be statically inferred", measured on 0.4.26 and 0.4.38).

The reference records the values each host function receives, per tag (``r.record``);
``oracles/callbacks.py`` says what is compared for each kind of callback.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fuzz.ops.base import BOOL, Op, Ty, checked_axes, require

# pure_callback's vmap_method values the program model draws (simplest first).
VMAP_METHODS = ("sequential", "expand_dims", "broadcast_all")


def _full_manual_or_none(ctx) -> bool:
    """Whether a callback may sit here: outside shard_map bodies or inside a fully manual one."""
    return not ctx.manual or ctx.manual == set(ctx.mesh)


def result_type(a: Ty, ctx) -> Ty:
    """Type of a callback's result on the argument ``a`` (see the module docstring; ProgramError if none).

    Refused on an argument varying over a manual axis with ``check_vma`` on; under the
    ``check_rep`` release rule the result varies over every checked manual axis.
    """
    checked = checked_axes(ctx)
    require(not (a.vma & checked), "a callback result on a value varying over a manual axis with check_vma on "
                                   "(JAX types the result unvarying)")
    vma = a.vma | checked if "check_rep" in ctx.rules else a.vma
    return Ty(a.shape, frozenset(vma), a.dtype)


def _may_return(t: Ty, ctx) -> bool:
    return not (t.vma & checked_axes(ctx))


class IoCallback(Op):
    name = "io_callback"
    family = "io_callback"
    n_outs = frozenset({0, 1})
    params = {"tag": {"$ref": "#/$defs/name"}, "ordered": BOOL, "returns": BOOL, "stop_gradient": BOOL}

    def types(self, eqn, args, ctx):
        (a,) = args
        if eqn["ordered"]:
            require(not ctx.in_vmap, "an ordered io_callback cannot be batched by vmap")
        require(_full_manual_or_none(ctx), "io_callback inside a partial-manual shard_map")
        if ctx.in_grad:
            require(eqn["stop_gradient"], "io_callback under grad needs stop_gradient (no JVP rule)")
            require("no_callback_under_grad" not in ctx.rules,
                    "this JAX release has no io_callback under grad (\"IO callbacks do not support JVP\")")
        if eqn["returns"]:
            return [result_type(a, ctx)]
        return []

    def draw(self, draw, ctx, scope):
        xs = scope.floats()
        if not xs or not _full_manual_or_none(ctx) or (ctx.in_grad and "no_callback_under_grad" in ctx.rules):
            return None
        a = scope.pick(draw, xs)
        can_return = _may_return(scope.visible[a], ctx)
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


class PureCallback(Op):
    """``jax.pure_callback(host, ShapeDtypeStruct like x, x, vmap_method=...)``: the result is ``2 * x + 1``.

    float32 argument and result of the argument's shape; ``tag`` names the host function
    (whose log the callbacks oracle reads); ``stop_gradient`` wraps the argument (required
    under grad / vjp / jvp). See the module docstring for the typing rules.
    """

    name = "pure_callback"
    family = "callback"
    params = {"tag": {"$ref": "#/$defs/name"}, "vmap_method": {"enum": list(VMAP_METHODS)}, "stop_gradient": BOOL}

    def types(self, eqn, args, ctx):
        (a,) = args
        require(eqn["vmap_method"] in VMAP_METHODS, f"unknown vmap_method {str(eqn['vmap_method'])[:40]!r}")
        require(_full_manual_or_none(ctx), "pure_callback inside a partial-manual shard_map")
        if ctx.in_grad:
            require(eqn["stop_gradient"], "pure_callback under grad needs stop_gradient (no JVP rule)")
        if ctx.explicit and not ctx.manual and ctx.in_vmap:
            require(eqn["vmap_method"] != "sequential",
                    "a sequential pure_callback under vmap on an Explicit mesh (lax.map over a sharded dim)")
        return [result_type(a, ctx)]

    def draw(self, draw, ctx, scope):
        if not _full_manual_or_none(ctx):
            return None
        xs = [v for v in scope.floats() if _may_return(scope.visible[v], ctx)]
        if not xs:
            return None
        methods = VMAP_METHODS
        if ctx.explicit and not ctx.manual and ctx.in_vmap:
            methods = VMAP_METHODS[1:]
        return {"op": self.name, "args": [scope.pick(draw, xs)], "outs": [scope.new_var()],
                "tag": scope.new_tag(), "vmap_method": draw(st.sampled_from(methods)),
                "stop_gradient": ctx.in_grad}

    def reference(self, r, eqn, xs, ts, ctx):
        x = xs[0]
        r.record(eqn["tag"], x)
        if r.xp is not np:
            x = r.jax.lax.stop_gradient(x)
        return [x * np.float32(2) + np.float32(1)]

    def render(self, rr, eqn, args, outs, ctx, ind):
        a = args[0]
        tag = rr.id(eqn["tag"])
        arg = f"jax.lax.stop_gradient({a})" if rr.bool(eqn["stop_gradient"]) == "True" else a
        method = eqn["vmap_method"]
        if method not in VMAP_METHODS:
            raise ValueError(f"unknown vmap_method {str(method)[:40]!r}")
        if (rr.caps or {}).get("pure_callback_kw", "vmap_method") == "vectorized":  # jax < 0.4.35
            how = f"vectorized={method != 'sequential'}"
        else:
            how = f"vmap_method={method!r}"
        host = f"_host_{tag}"  # (a leading underscore: no program identifier can take this name)
        logs = rr.record  # (a repro that checks no callback has no log to call)
        return [f"{ind}def {host}(x):  # pure_callback's host function: {'logs x, ' if logs else ''}returns 2 * x + 1",
                *([f"{ind}    {rr.callback_host(tag, False)}(x)"] if logs else []),
                f"{ind}    return np.asarray(x) * 2 + 1",
                f"{ind}{outs[0]} = jax.pure_callback({host}, jax.ShapeDtypeStruct({a}.shape, {a}.dtype), {arg}, "
                f"{how})"]

    def features(self, eqn):
        return {f"pure_callback_{eqn['vmap_method']}"}


class DebugCallback(Op):
    """``jax.debug.callback(host, x)``: no result; the host function logs ``x`` under ``tag``."""

    name = "debug_callback"
    family = "callback"
    n_outs = frozenset({0})
    params = {"tag": {"$ref": "#/$defs/name"}}
    feature_names = ("debug_callback",)

    def types(self, eqn, args, ctx):
        return []

    def draw(self, draw, ctx, scope):
        xs = scope.floats()
        if not xs:
            return None
        return {"op": self.name, "args": [scope.pick(draw, xs)], "outs": [], **self.drawn_params(scope)}

    def drawn_params(self, scope) -> dict:
        return {"tag": scope.new_tag()}

    def reference(self, r, eqn, xs, ts, ctx):
        r.record(eqn["tag"], xs[0])
        return []

    def render(self, rr, eqn, args, outs, ctx, ind):
        return [f"{ind}jax.debug.callback({rr.callback_host(rr.id(eqn['tag']), False)}, {args[0]})"]


class DebugPrint(DebugCallback):
    """``jax.debug.print("{x}", x=x)``: no result; prints ``x`` on the worker's stdout (which goes to stderr).

    Typed and drawn as ``jax.debug.callback`` without a tag. What it prints is not
    checked (the text mixes with every other line the process writes, and NumPy's print
    options shape it); it must run without raising.
    """

    name = "debug_print"
    params = {}
    feature_names = ("debug_print",)

    def drawn_params(self, scope) -> dict:
        return {}

    def reference(self, r, eqn, xs, ts, ctx):
        return []

    def render(self, rr, eqn, args, outs, ctx, ind):
        return [f'{ind}jax.debug.print("{{x}}", x={args[0]})']


OPS = (IoCallback(), PureCallback(), DebugCallback(), DebugPrint())
