"""Typing rules of the program model: shapes, named axes in scope, and varying manual axes.

Every value of a program has a :class:`Ty`: its shape, its dtype (float32; int32 only for
scalar start indices) and its *vma*, the set of named axes of the context over which it
varies (manual mesh axes of enclosing ``shard_map`` bodies and axes of enclosing ``vmap``
bodies). The rules here are the single source of truth for what a *valid* program is:
the strategies only choose options these rules accept, :func:`fuzz.reference.evaluate`
evaluates under them, and :func:`check_program` rejects anything else with
:class:`ProgramError`. Each op's own rule lives with its declaration in the op registry
(:mod:`fuzz.ops`, :meth:`fuzz.ops.base.Op.types`); this module holds the rules every op
shares (:func:`eqn_types`), the transforms (:func:`enter`, :func:`exit_`) and the
structure of a program. Function results and (co)tangents are float32.

Semantics follow JAX's documentation:
- shard_map (docs: "Manual parallelism with shard_map", ``notebooks/shard_map``):
  in_specs split global dims over mesh axes (major to minor); an output must name in
  its out_specs every manual axis it varies over; values closed over are replicated.
- varying manual axes (``jax.typeof(x).manual_axis_type.varying`` in jax 0.10,
  measured): psum/pmax/pmin/pmean remove the named axes; all_gather, psum_scatter,
  ppermute, all_to_all and axis_index add theirs; elementwise ops take the union.
- vmap (``jax.vmap`` docstring): in_axes/out_axes, ``axis_name`` for collectives,
  ``spmd_axis_name`` adds a mesh axis to the sharding of the batch dim; an ordered
  io_callback cannot be batched ("Cannot `vmap` ordered IO callback").
- grad (``jax.grad``): a scalar-valued function; io_callback has no JVP
  ("IO callbacks do not support JVP"), so callback arguments under grad are wrapped
  in ``stop_gradient``.
- vjp / jvp (``jax.vjp``, ``jax.jvp``) with seeded cotangents / tangents: typed as grad
  underneath, any number of outputs; not inside a shard_map body (measured on jax 0.10.2:
  a constant cotangent of a varying output is refused, "unexpected JAX type ... expected
  float32[2]{V:x}").
- checkpoint (``jax.checkpoint``, with a ``policy`` of ``jax.checkpoint_policies``): the
  identity on values and types; under grad / vjp / jvp no io_callback inside (measured on
  jax 0.4.26 and 0.10.2: "Effects not supported in partial-eval of `checkpoint`/`remat`",
  a NotImplementedError under grad and vjp).
- map (``jax.lax.map``, a scan over the leading axis): typed as a vmap without axis_name
  or spmd_axis_name whose in_axes are 0 or None and whose out_axes are all 0.
- jacrev / jacfwd (``jax.jacrev`` / ``jax.jacfwd`` with one int ``argnums``): typed as grad
  underneath, any number of outputs; for each output its Jacobian w.r.t. the argument,
  shape out.shape + arg.shape. Allowed inside shard_map bodies, check_vma on and off
  (measured on jax 0.10.2; jax-ml/jax#29832, jacrev inside shard_map raising on 0.6.1, is
  fixed there): along a checked manual axis jacrev's result varies where the argument does
  (the pullback of an unvarying argument is summed over the axis, as grad's) and jacfwd's
  where the output does (``jax.typeof`` of both, measured); along vmap and unchecked axes
  every index is independent and the result varies where either does.
"""
from __future__ import annotations

import builtins
import functools
import keyword
import math
import re
from dataclasses import replace

from fuzz import ops as O
from fuzz.jax_api import missing_users
from fuzz.ops.base import (DTYPES, FLOAT, JACOBIAN, NO_PARTIAL_COLLECTIVES, OPAQUE, UNREDUCED_NEEDS_JIT, Axis,  # noqa: F401
                           Ctx, ProgramError, Ty, broadcast_shapes, checked_axes, spec_size, spec_type,
                           version_tuple)
from fuzz.ops.base import PPERMUTE_MESH_ORDER
from fuzz.ops.base import require as _require

NO_INFER_IN_SPECS = "no_infer_in_specs"  # release rule: a shard_map's in_specs cannot be left out
NO_SMAP = "no_smap"  # release rule: no jax.smap (jax < 0.7.0)
NO_SET_MESH = "no_set_mesh"  # release rule: no jax.set_mesh (jax < 0.7.1)
CONTEXT_MESH = "context_mesh"  # the program's calls run under jax.set_mesh(mesh) (an Explicit mesh, or set_mesh)

# Op families, from the registry (fuzz/ops/): kept for the modules that name them.
UNARY = O.names("unary")
BINARY = O.names("binary")
REDUCE = tuple(n for n in O.names("reduce") if "axis" in O.get(n).params)
WEIGHTED = tuple(n for n in O.names("reduce") if "seed" in O.get(n).params)
REDUCING_COLLECTIVES = ("psum", "pmax", "pmin", "pmean")
COLLECTIVES = O.names("collective")
# Ops whose derivative is a convention (ties): never under grad.
TIE_OPS = tuple(n for n, op in O.REGISTRY.items() if not op.grad_ok)
# A rule of the context inside ``jax.sharding.auto_axes`` (an Explicit mesh's axes made Auto
# for the body): no shard_map, no sharding annotation (jit shardings, with_sharding_constraint,
# device_put: they name the program's mesh, whose axis types the body does not have) and no
# nested auto_axes there. Not modelled rather than guessed.
AUTO_BODY = "auto_axes_body"
# A rule of the context inside a ``jax.pmap`` (a vmap transform with ``pmap: true``). Since
# jax 0.8.0 pmap is ``jax.jit(jax.shard_map(f))`` over a mesh of its own, ('name': size), of the
# first ``size`` devices (jax/_src/pmap.py; https://docs.jax.dev/en/latest/migrate_pmap.html):
# its body is a manual context of that mesh, so nothing there may name the program's mesh
# (no shard_map: "The context mesh ... should match the mesh passed to shard_map", the guide's
# nested-pmap error; no sharding annotation or jit shardings), and no pmap nests in it.
PMAP_BODY = "pmap_body"
# Transforms with seeded (co)tangents: typed (and evaluated) as jvp or vjp. linearize is jvp's
# values through jax.linearize.
LINEARIZED = ("vjp", "jvp", "linearize")
# Loops (a static trip count n): the carry starts at f's outputs and adds them n times.
LOOPS = ("fori_loop", "while_loop")
LOOP_MAX = 3  # the largest trip count the program model names
# A rule of the context under a reverse-mode derivative (grad, value_and_grad, vjp, jacrev):
# no while_loop there ("Reverse-mode differentiation does not work for lax.while_loop", measured).
REVERSE = "reverse_mode"
# A rule of the context under a forward-mode derivative (jvp, jacfwd, linearize), however deep:
# no custom_vjp there (fuzz/ops/custom.py; "can't apply forward-mode autodiff (jvp) to a
# custom_vjp function", TypeError, measured on jax 0.10.2 under jvp, jacfwd and linearize).
FORWARD_MODE = O.custom.FORWARD_MODE  # declared with the op it keeps out
# Jacobians (jax.jacrev / jax.jacfwd with one int argnums): typed as grad underneath.
JACOBIANS = ("jacrev", "jacfwd")
# DIFFERENTIATING: the transforms that take a derivative of the function under them, with
# respect to their ``argnums`` (grad, value_and_grad, the Jacobians) or every argument
# (LINEARIZED): the registry's kinds with ``differentiates`` (fuzz/transforms/; see __getattr__)
# jax.checkpoint's policies the program model names (jax.checkpoint_policies.<name>, present on
# jax 0.4.26 to 0.10.2, checked); None: no policy (remat everything).
CHECKPOINT_POLICIES = (None, "everything_saveable", "nothing_saveable", "dots_saveable")
# A rule of the context (Ctx.rules) inside a checkpoint under grad / vjp / jvp: no effect
# there (fuzz.typecheck.enter; "Effects not supported in partial-eval of `checkpoint`/`remat`").
NO_EFFECTS = "no_effects_in_remat"
# A rule of the context inside a lax.cond inside a vmap (or map): no io_callback there
# ("IO effect not supported in vmap-of-cond", NotImplementedError, measured on jax 0.10.2,
# batched predicate or not, ordered or not; jax.debug.callback / print and pure_callback run).
NO_IO_COND = "no_io_in_vmap_of_cond"
# Op families whose ops have an effect remat refuses (io_callback; not the debug callbacks,
# measured): refused where NO_EFFECTS holds.
EFFECT_FAMILIES = ("io_callback",)
# Sharding types on an Explicit mesh (Ty.spec) are tracked through these transforms, whose body
# sees its arguments' very types and whose results are typed from them (a jit's body; a
# gradient has its argument's type; a jvp's output tangents their outputs'; checkpoint is the
# identity; measured with jax.typeof on 0.10.2, where jax.vjp and jax.linearize refuse the
# rendered replicated cotangents / tangents of a split value eagerly); inside any other transform
# they are not (OPAQUE), and an argument split in its type may enter only these and shard_map
# (whose in_specs reshard it: fuzz/render.py ``resharded``). See :func:`call_types`.
SPEC_THROUGH = ("jit", "grad", "value_and_grad", "jvp", "checkpoint")
NO_SHARDING_TYPES = "no_sharding_types"  # release rule (see release_rules)

# Identifiers of a program (function, parameter, variable, input and mesh/vmap axis
# names, callback tags) reach the rendered Python source: they must match this pattern
# and not be a Python keyword, a builtin, or a name the rendered module defines itself.
# Corpus entries and reports are untrusted input (they arrive by pull request or mail).
IDENTIFIER = re.compile(r"[a-z][a-z0-9_]{0,15}")
RENDER_NAMES = frozenset({
    "jax", "jnp", "np", "os", "contextlib", "io_callback", "shard_map", "mesh", "mesh_context", "Mesh",
    "NamedSharding", "P", "CALLS", "CALLBACK_LOG", "make_input", "log_callback", "tuple_grad", "lax_scan",
    "tuple_value_and_grad", "resharded", "weights", "tuple_vjp", "tuple_jvp", "lax_map", "tuple_jac", "tuple_cond",
    "tuple_fori", "tuple_while", "tuple_linearize", "expected", "check", "main",
    # names of the repro scripts (fuzz.repro.REPRO_NAMES; a test keeps the two in step)
    "sys", "subprocess", "difflib", "re", "tempfile", "faulthandler", "base64", "seeded", "run_earlier", "record",
    "received", "check_outputs", "check_callbacks", "canonical", "lowering", "lowering_in", "out", "first",
    "again", "diff", "f", "threading", "time", "watch_memory", "donated"})
RESERVED = frozenset(keyword.kwlist) | frozenset(getattr(keyword, "softkwlist", ())) | frozenset(dir(builtins)) \
    | RENDER_NAMES
NESTED_FUNCTION = re.compile(r"g\d+")  # the renderer names nested functions g1, g2, ...
MAX_NESTING = 12  # nested calls inside one function: deeper is not a program the generator makes

# Equation signatures: number of arguments (int, set of ints, or None: any) and of outputs
# (a set), and the parameters each op requires, built from the op registry (fuzz/ops/)
# plus the structural ``call``. The program schema's equation entries are built from this
# table (fuzz.program.schema), so the two cannot drift.
EQN_SIGNATURES = {
    **{name: op.signature() for name, op in O.REGISTRY.items()},
    "call": (None, None, {"transforms": {"type": "array", "maxItems": 8, "items": {"$ref": "#/$defs/transform"}},
                          "fn": {"$ref": "#/$defs/function"}}),
}


def eqn_types(eqn: dict, args: list, ctx: Ctx) -> list:
    """Result types of a primitive equation (not ``call``) given its argument types; ProgramError if invalid.

    The op's own rule (:meth:`fuzz.ops.base.Op.types`) after the rules every op shares:
    known op, argument dtypes, the release gate (``no_op:<name>``), grad and Explicit meshes.
    """
    op = O.get(eqn["op"])
    why = context_refusal(op, ctx)
    _require(why is None, why)
    want = op.arg_dtypes(eqn)
    _require(len(want) == len(args), f"{op.name} takes {len(want)} argument(s), not {len(args)}")
    for k, (a, dt) in enumerate(zip(args, want)):
        _require(a.dtype == dt, f"{op.name} argument {k} must be {dt}, not {a.dtype}")
    outs = list(op.types(eqn, args, ctx))
    specs = [()] * len(outs)
    split = any(a.sharded for a in args)
    if ctx.explicit and not ctx.manual and (split or (op.explicit_rule and OPAQUE not in ctx.rules)):
        # (an op with a rule is asked on replicated operands too: reshard_split makes a split)
        _require(OPAQUE not in ctx.rules, f"{op.name} of a value split in its sharding type inside a transform "
                                          "that does not keep sharding types (see SPEC_THROUGH)")
        specs = list(op.sharding_types(eqn, args, outs, ctx))
    return [replace(o, spec=sp) if o.spec != sp else o for o, sp in zip(outs, specs)]


def context_refusal(op, ctx: Ctx) -> str | None:
    """Why ``op`` (a registry entry) may not appear in ``ctx`` whatever its arguments, or None.

    Grad (ops whose derivative is a convention), the release gate (``no_op:<name>``),
    auto_axes bodies (no sharding annotation: AUTO_BODY), effects where remat or vmap-of-cond
    refuse them (:func:`effect_refused`) and Explicit meshes outside shard_map (``explicit_ok``).
    The generator asks this before drawing an op; :func:`eqn_types` checks it.
    """
    if not op.grad_ok and ctx.in_grad:
        return f"{op.name} {op.no_grad_reason}: not under grad"
    if f"no_op:{op.name}" in ctx.rules:
        return f"this JAX release has no {op.name} (it came in {op.since})"
    if f"no_api:op:{op.name}" in ctx.rules:
        return f"this JAX release lacks an API {op.name} renders to (fuzz/jax_api.py)"
    if op.family == "sharding" and AUTO_BODY in ctx.rules:
        return f"{op.name} inside auto_axes is not generated"
    if op.family == "sharding" and PMAP_BODY in ctx.rules:
        return f"{op.name} inside a pmap body (pmap's own mesh is the context there)"
    if effect_refused(op, ctx):
        if NO_EFFECTS in ctx.rules:
            return (f"{op.name} inside a checkpoint under grad / vjp / jvp "
                    "(\"Effects not supported in partial-eval of `checkpoint`/`remat`\")")
        return f"{op.name} inside a lax.cond under vmap (\"IO effect not supported in vmap-of-cond\")"
    if not (op.explicit_ok or not ctx.explicit or ctx.manual or (op.explicit_rule and OPAQUE not in ctx.rules)):
        return f"{op.name} on an Explicit mesh outside shard_map (sharding types: not modelled here)"
    return None


def effect_refused(op, ctx: Ctx) -> bool:
    """Whether ``op`` (a registry entry) has a side effect and ``ctx`` is inside a checkpoint under a
    derivative or inside a lax.cond under vmap (NO_IO_COND).

    jax.checkpoint's partial evaluation (under grad and vjp) raises NotImplementedError
    "Effects not supported in partial-eval of `checkpoint`/`remat`" for an io_callback,
    ordered or not (measured on jax 0.4.26 and 0.10.2); under jvp it runs, but the rule
    holds under every derivative (Ctx does not tell them apart). jax.debug.callback,
    jax.debug.print and pure_callback run there (measured on both releases): not refused.
    """
    return op.family in EFFECT_FAMILIES and bool({NO_EFFECTS, NO_IO_COND} & ctx.rules)


def carry_fits(arg: Ty, result: Ty, ctx: Ctx) -> bool:
    """Whether a scan's ``result`` may become the carried ``arg`` of the next step in ``ctx``.

    Shape and dtype equal, and the varying axes equal over the manual axes with
    check_vma on (:func:`checked_axes`): jax.lax.scan raises "scan body function carry input and
    carry output must have equal types" otherwise (jax/_src/lax/control_flow/loops.py,
    ``_check_carry_type``, which suggests a pcast of the initial carry). Along vmap axes
    JAX batches a carry that comes back batched, so they may differ (see :func:`exit_`).
    """
    checked = checked_axes(ctx)
    return result.shape == arg.shape and result.dtype == arg.dtype and result.vma & checked == arg.vma & checked


def as_vmap(t: dict, n_results: int = 0) -> dict:
    """The vmap a ``map`` transform is typed and evaluated as: its in_axes (0 or None), out_axes all 0.

    ``jax.lax.map(f, xs)`` applies ``f`` to each slice of ``xs`` along dim 0 and stacks the
    results along dim 0 (the ``jax.lax.map`` docstring): a vmap with no axis_name.
    ``n_results``: the number of out_axes entries (the body's results).
    """
    return {"kind": "vmap", "in_axes": list(t["in_axes"]), "out_axes": [0] * n_results, "axis_name": None,
            "spmd_axis_name": None}


def vmap_axis_name(t: dict, ctx: Ctx) -> str:
    """The name of the axis a vmap binds: its axis_name, or an internal one (never valid in a program)."""
    return t["axis_name"] or f"_vmap{ctx.n_vmap}"


def enter(t: dict, ctx: Ctx, args: list) -> tuple:
    """(inner context, inner argument types) of transform ``t`` applied in ``ctx`` to ``args``
    (:func:`_enter`), with the sharding types of an Explicit mesh: kept through the transforms
    of :data:`SPEC_THROUGH`; inside any other the context is :data:`OPAQUE` (no op reads a value
    split in its sharding type) and an argument split in its type may enter only a shard_map
    (whose in_specs reshard it). ProgramError if invalid."""
    why = split_refusal(t["kind"], ctx, args)
    _require(why is None, why)
    _require(f"no_api:transform:{transform_name(t)}" not in ctx.rules,
             f"this JAX release lacks an API {transform_name(t)} renders to (fuzz/jax_api.py)")
    inner_ctx, inner_args = _enter(t, ctx, args)
    if ctx.explicit and not ctx.manual and t["kind"] not in SPEC_THROUGH:
        inner_args = [replace(a, spec=()) if a.spec else a for a in inner_args]
        inner_ctx = replace(inner_ctx, rules=inner_ctx.rules | {OPAQUE})
    return inner_ctx, inner_args


def split_refusal(kind: str, ctx: Ctx, args: list) -> str | None:
    """Why a transform of ``kind`` in ``ctx`` may not take ``args`` because some is split in its
    sharding type (see :func:`enter`), or None; the generator asks this before drawing a kind."""
    if not any(a.sharded for a in args):
        return None
    if OPAQUE in ctx.rules:
        return "a value split in its sharding type read inside a transform that does not keep sharding types"
    if ctx.explicit and not ctx.manual and kind not in SPEC_THROUGH and kind != "shard_map":
        return f"a value split in its sharding type into {kind} (sharding types are not tracked there)"
    return None


def keeps_types(ctx: Ctx) -> bool:
    """Whether the values of ``ctx`` carry sharding types the typing tracks (:attr:`Ty.spec`): an
    Explicit mesh, outside shard_map bodies, not inside a transform outside :data:`SPEC_THROUGH`."""
    return ctx.explicit and not ctx.manual and OPAQUE not in ctx.rules


def shard_map_typed(ctx: Ctx, transforms: list, i: int) -> bool:
    """Whether the shard_map ``transforms[i]`` of a call in ``ctx`` gives results typed by its
    out_specs (:func:`exit_`), which the renderer then leaves as they are; else it reshards them
    to P() (fuzz/render.py ``resharded``). The transforms before it are entered first
    (:func:`enter`): any outside :data:`SPEC_THROUGH` makes the context :data:`OPAQUE`."""
    return keeps_types(ctx) and all(t["kind"] in SPEC_THROUGH for t in transforms[:i])


def exit_(t: dict, outer: Ctx, inner: Ctx, args: list, results: list) -> list:
    """Outer result types of transform ``t`` from its inner result types (:func:`_exit`), with
    their sharding types: through :data:`SPEC_THROUGH` as they were; a shard_map's split as its
    out_specs say where ``outer`` keeps types (:func:`keeps_types`; on an Explicit mesh JAX types
    a shard_map's results by out_specs, partial-manual ones too: ``jax.typeof`` on jax 0.10.2
    gives ``float32[16@x,2]`` for out_specs P('x')), else replicated (the renderer reshards
    them to P()); other transforms' results replicated (a vmap with spmd_axis_name's come out
    replicated in their types, measured with ``jax.typeof`` on jax 0.10.2)."""
    out = _exit(t, outer, inner, args, results)
    if t["kind"] in SPEC_THROUGH:
        return out
    if t["kind"] == "shard_map" and keeps_types(outer):
        return [replace(r, spec=spec_type(spec, r.rank)) for spec, r in zip(t["out_specs"], out)]
    return [replace(r, spec=()) if r.spec else r for r in out]


def _enter(t: dict, ctx: Ctx, args: list) -> tuple:
    """Apply one transform's input side: (inner Ctx, inner param types), by the transform's
    registry entry (fuzz/transforms/). ProgramError if invalid."""
    from fuzz.transforms import lookup

    kind = t["kind"]
    top, ctx = ctx.top, (replace(ctx, top=False) if ctx.top else ctx)
    tr = lookup(kind)
    if tr is None:
        raise ProgramError(f"unknown transform {kind!r}")
    return tr.enter(t, ctx, args, top)


def transform_name(t: dict) -> str:
    """The JAX transform a transform entry runs: its ``kind``, but ``pmap`` for a vmap with
    ``pmap: true`` (the labels of render, export and the oracles' messages, and the features)."""
    return "pmap" if t["kind"] == "vmap" and t.get("pmap") else t["kind"]


def pmap_size(ctx: Ctx) -> int:
    """The size a pmap in ``ctx`` maps over: the mesh's device count. pmap runs on the first
    ``size`` devices, and a jit around it takes the mesh's devices from its other values
    ("Received incompatible devices for jitted computation", the migration guide)."""
    return math.prod(ctx.mesh.values())


def pmap_refusal(ctx: Ctx, top: bool = False) -> str | None:
    """Why a ``jax.pmap`` (a vmap with ``pmap: true``: the same values, one device per index)
    may not sit in ``ctx`` whatever its arguments, or None. ``top``: a program call's first
    transform (its arguments are the program's inputs, see :func:`check_committed`).

    pmap builds a mesh of its own (PMAP_BODY), so not inside a shard_map or pmap body, not on
    an Explicit mesh or under ``set_mesh`` (whose context mesh it would meet: the same "context
    mesh" ValueError on jax 0.10.2) and not under a vmap with spmd_axis_name (a mesh axis pmap's mesh lacks:
    KeyError on 0.10.2, not generated). Eager, pmap refuses arguments sharded otherwise than
    its own split ("jax.pmap no longer silently reshards inputs", the migration guide): its
    arguments must be traced (under jit, a derivative or a vmap) or, at a program's call,
    uncommitted inputs.
    """
    if ctx.manual or PMAP_BODY in ctx.rules:
        return "pmap inside a shard_map or pmap body"
    if "no_api:transform:pmap" in ctx.rules:
        return "this JAX release lacks an API pmap renders to (fuzz/jax_api.py)"
    if CONTEXT_MESH in ctx.rules or AUTO_BODY in ctx.rules:
        return "pmap under jax.set_mesh or on an Explicit mesh (its context mesh is not pmap's)"
    if ctx.reserved:
        return "pmap under a vmap with spmd_axis_name"
    if not (top or ctx.jit or ctx.axes or ctx.in_grad):
        return "pmap of concrete arrays in an eager function body (their shardings are not known here)"
    return None


def _jit_shardings(t: dict, key: str, types: list, ctx: Ctx) -> None:
    """Check a jit's ``in_specs`` / ``out_specs`` (its in_shardings / out_shardings: one
    PartitionSpec over the mesh per argument / result, or null for none) against ``types``.

    Rules (measured on jax 0.10.2): not inside a shard_map body (a jit's sharding there
    may not name manual axes) and not on an Explicit mesh (whose values carry shardings
    the typing rules do not model); no axis an enclosing vmap's spmd_axis_name takes;
    every split divides its dim. ProgramError otherwise.
    """
    specs = t.get(key)
    if specs is None:
        return
    why = shardings_refusal(ctx)
    _require(why is None, why)
    _require(isinstance(specs, list) and len(specs) == len(types),
             f"jit {key} and {'arguments' if key == 'in_specs' else 'results'} differ in length")
    for spec, ty in zip(specs, types):
        _check_spec(spec, ty.rank, list(ctx.mesh), ctx, "a mesh axis", shape=ty.shape)


def transform_refusal(kind: str, ctx: Ctx) -> str | None:
    """Why a ``cond`` or loop transform may not sit in ``ctx`` whatever its arguments, or None;
    for any kind, the API rule ``no_api:transform:<kind>`` (:func:`api_rules`).

    jax.lax.while_loop has no transpose ("Reverse-mode differentiation does not work for
    lax.while_loop or lax.fori_loop with dynamic start/stop values", ValueError, measured
    on jax 0.10.2 under grad, vjp, jacrev and grad of a checkpoint); jvp, jacfwd and
    linearize run. fori_loop with static bounds lowers to a scan: reverse mode runs. The
    release rules ``no_checked_cond`` / ``no_checked_while`` (:func:`release_rules`) refuse
    them inside a shard_map with the replication check on.
    """
    if f"no_api:transform:{kind}" in ctx.rules:  # (any kind: api_rules)
        return f"this JAX release lacks an API {kind} renders to (fuzz/jax_api.py)"
    if kind == "while_loop" and REVERSE in ctx.rules:
        return "while_loop under grad / vjp / jacrev (reverse mode: refused by JAX)"
    if kind in ("cond", "while_loop") and f"no_checked_{kind.split('_')[0]}" in ctx.rules and checked_axes(ctx):
        return f"this JAX release has no replication rule for {kind} inside a checked shard_map"
    return None


def partial_manual_refusal(ctx: Ctx) -> str | None:
    """Why this release refuses a partial-manual shard_map in ``ctx`` (the release rules), or None."""
    if "no_partial_manual" in ctx.rules:
        return "this JAX release has no partial-manual shard_map"
    if "partial_manual_needs_jit" in ctx.rules and not ctx.jit:
        return "this JAX release runs a partial-manual shard_map only under jit"
    # its transpose psums cotangents over the manual axes, which such a release cannot lower
    # there (NO_PARTIAL_COLLECTIVES, measured on jax 0.4.28 under vjp)
    if NO_PARTIAL_COLLECTIVES in ctx.rules and REVERSE in ctx.rules:
        return "this JAX release lowers no collective in a partial-manual shard_map: none under reverse mode"
    return None


def infer_refusal(ctx: Ctx) -> str | None:
    """Why a shard_map in ``ctx`` may not leave out in_specs and mesh (``infer``), or None.

    shard_map then infers in_specs from its arguments' shardings and takes the context mesh,
    on a mesh whose axes are all Explicit (jax/_src/shard_map.py: ``in_specs is Infer``, since
    jax 0.7.2: release rule :data:`NO_INFER_IN_SPECS`); the renderer reshards the arguments to
    the in_specs first, so the inferred ones are the program's.
    """
    if not ctx.explicit:
        return "in_specs inferred on a mesh whose axes are not Explicit"
    if NO_INFER_IN_SPECS in ctx.rules:
        return "this JAX release cannot infer a shard_map's in_specs (jax < 0.7.2)"
    return None


def smap_refusal(ctx: Ctx, t: dict) -> str | None:
    """Why shard_map ``t`` in ``ctx`` may not be written as ``jax.smap`` (``smap``), or None.

    ``jax.smap(f, in_axes, out_axes, axis_name)`` is a shard_map over the one mesh axis
    ``axis_name`` of the context mesh (``mesh=None``), ``check_vma=True``, whose in_specs /
    out_specs split at most one dim by that axis: in_axes / out_axes ``d`` is
    ``P(*[None] * d + [axis_name])``, None is ``P()`` (jax/_src/shard_map.py ``smap`` and
    ``_axes_to_pspec``, jax 0.7.0 to 0.10.2: release rule :data:`NO_SMAP` before). The
    context mesh is there inside a shard_map body and, on an Explicit mesh, around every call
    and on an Auto mesh with ``set_mesh`` (the worker runs calls under ``jax.set_mesh``:
    :data:`CONTEXT_MESH`). ``negative_axes``: in_axes / out_axes
    written as ``d - rank``, which smap's docstring allows ("Axis integers must be in the
    range [-ndim, ndim)"); it needs ``smap``.
    """
    if not t.get("smap"):
        return "negative_axes without smap"
    if NO_SMAP in ctx.rules:
        return "this JAX release has no jax.smap (jax < 0.7.0)"
    if not (ctx.manual or CONTEXT_MESH in ctx.rules):
        return "smap takes the context mesh: only in a shard_map body or where calls run under jax.set_mesh"
    names = t.get("axis_names")
    if not (isinstance(names, list) and len(names) == 1):
        return "smap maps over exactly one mesh axis, named in axis_names"
    if not t.get("check_vma"):
        return "smap always checks vma (check_vma=True)"
    if t.get("infer"):
        return "smap with in_axes inferred is not generated"
    return None


def shardings_refusal(ctx: Ctx) -> str | None:
    """Why a jit in ``ctx`` may not carry in_shardings / out_shardings, or None (the generator
    asks this before drawing them; :func:`_jit_shardings` checks it)."""
    if ctx.manual:
        return "a jit with shardings inside a shard_map body"
    if ctx.explicit:
        return "a jit with shardings on an Explicit mesh"
    if AUTO_BODY in ctx.rules:
        return "a jit with shardings inside auto_axes"
    if PMAP_BODY in ctx.rules:
        return "a jit with shardings inside a pmap body"
    return None


def _check_spec(spec: list, rank: int, names: list, ctx: Ctx, where: str = "manual in this shard_map",
                shape: tuple | None = None) -> None:
    """A PartitionSpec (None or list of axis names per dim) of ``rank`` over axes ``names``; with
    ``shape``, each split divides its dim (an argument's spec; a result's multiplies its dims)."""
    _require(isinstance(spec, list) and len(spec) == rank, f"spec {str(spec)[:60]!r} does not match rank {rank}")
    used = [x for s in spec if s for x in s]
    _require(len(used) == len(set(used)), f"spec {str(spec)[:60]!r} names an axis twice")
    for x in used:
        _require(x in names, f"spec axis {x!r} is not {where}")
        _require(x not in ctx.reserved, f"spec axis {x!r} is taken by an enclosing spmd_axis_name")
    for d, s in zip(shape or (), spec):
        _require(d % spec_size(s, ctx.mesh) == 0, f"dim {d} not divisible by {s} (an uneven split)")


def _exit(t: dict, outer: Ctx, inner: Ctx, args: list, results: list) -> list:
    """Apply one transform's output side: outer result types from inner result types, by the
    transform's registry entry (fuzz/transforms/)."""
    from fuzz.transforms import lookup

    kind = t["kind"]
    tr = lookup(kind)
    if tr is None:
        raise ProgramError(f"unknown transform {kind!r}")
    return tr.exit(t, outer, inner, args, results)


def release_rules(caps: dict | None) -> frozenset:
    """Restrictions of one JAX release, from the capabilities its worker measured (fuzz/worker.py).

    - ``partial_manual_needs_jit``: a partial-manual shard_map runs only under jit
      (``eager_partial_manual`` false: NotImplementedError eagerly, jax 0.4.26-0.6.1);
    - ``no_partial_manual``: no partial-manual shard_map at all;
    - ``no_callback_under_grad``: no io_callback under grad, even on a stop_gradient
      argument (``callback_under_grad`` false: "IO callbacks do not support JVP", jax 0.4.28);
    - ``check_rep``: the experimental shard_map's replication check (check_rep, not
      check_vma) refuses pmax/pmin over a checked axis and a psum/pmean of a value that is
      replicated over it ("Collective psum must be applied to a device-varying replication
      type", measured on 0.4.26);
    - ``no_explicit``: no Explicit axis types (``jax.sharding.AxisType`` is missing);
    - ``no_partial_collectives`` (:data:`fuzz.ops.base.NO_PARTIAL_COLLECTIVES`): no collective
      over a mesh axis inside a partial-manual shard_map (``partial_manual_collectives``
      false: NotImplementedError "Collectives in manually partitioned computations are only
      supported when all mesh axes are partitioned manually", jax 0.4.28; see
      :meth:`fuzz.ops.base.Ctx.collective_axes`);
    - ``no_checked_cond`` / ``no_checked_while``: no ``cond`` / ``while_loop`` inside a shard_map
      body with the replication check on (``checked_cond`` / ``checked_while`` false:
      NotImplementedError "No replication rule for cond", jax 0.4.26 and 0.4.28; while also
      0.4.38);
    - ``no_nested_shard_map``: the experimental shard_map cannot be nested (jax 0.4.26 and
      0.4.38, measured: AttributeError "'RewriteTrace' object has no attribute
      'process_shard_map'"; the renderer also passes no mesh to a nested one);
    - ``no_infer_in_specs``: no shard_map without in_specs (jax < 0.7.2: in_specs required);
    - ``no_smap``: no shard_map written as ``jax.smap`` (``caps["smap"]`` false: jax < 0.7.0);
    - ``no_set_mesh``: no Auto mesh with ``set_mesh`` (``caps["set_mesh"]`` false: jax < 0.7.1);
    - ``unreduced_needs_jit``: ``unreduced_psum`` only under jit (``eager_unreduced`` false:
      NotImplementedError "Eager shard_map with unreduced/reduced is not implemented", jax 0.9.2);
    - ``ppermute_mesh_order``: a ppermute names its mesh axes (those of size >= 2) in the mesh's
      order (``ppermute_any_order`` false: RuntimeError "Make sure that the axis_name passed to
      jax.lax.ppermute is in the same order as the axis_names declared on the mesh", the config
      option ``jax_raise_on_ppermute_sort_diff``, jax >= 0.11.1; fuzz.ops.collectives.Ppermute);
    - ``no_sharding_types``: an Explicit mesh's sharding types are not tracked (jax < 0.9.0;
      the rules of ``Op.sharding_types`` were measured on 0.9.0 and 0.10.2, and 0.8.1 differs:
      a dynamic_update_slice of replicated values under jit raised ShardingTypeError): the root
      context is :data:`OPAQUE` (no input split in its type, no op of ``explicit_rule`` only);
    - ``no_op:<name>``: the op ``name`` of the registry (fuzz/ops/) came in a later
      release than ``caps["jax_version"]`` (its ``since``).
    No caps (None): the newest release's rules, i.e. none of these.
    """
    if not caps:
        return frozenset()
    rules = set()
    version = version_tuple(caps.get("jax_version", ""))
    if version:
        rules.update(f"no_op:{n}" for n, op in O.REGISTRY.items() if version < version_tuple(op.since))
    if not caps.get("partial_manual"):
        rules.add("no_partial_manual")
    elif caps.get("eager_partial_manual") is False:
        rules.add("partial_manual_needs_jit")
    if caps.get("partial_manual") and caps.get("partial_manual_collectives") is False:
        rules.add(NO_PARTIAL_COLLECTIVES)
    for kind in ("cond", "while"):
        if caps.get(f"checked_{kind}") is False:
            rules.add(f"no_checked_{kind}")
    if caps.get("eager_unreduced") is False:
        rules.add(UNREDUCED_NEEDS_JIT)
    if caps.get("ppermute_any_order") is False:
        rules.add(PPERMUTE_MESH_ORDER)
    if caps.get("callback_under_grad") is False:
        rules.add("no_callback_under_grad")
    if caps.get("shard_map") == "experimental":
        rules.add("no_nested_shard_map")
    if caps.get("check_kw") == "check_rep":
        rules.add("check_rep")
    if caps.get("explicit") is False:
        rules.add("no_explicit")
    if not caps.get("auto_axes"):
        rules.add("no_auto_axes")
    if not caps.get("smap") or (version and version < (0, 7, 0)):
        rules.add(NO_SMAP)
    if not caps.get("set_mesh") or (version and version < (0, 7, 1)):
        rules.add(NO_SET_MESH)
    if version and version < (0, 7, 2):
        rules.add(NO_INFER_IN_SPECS)
    if version and version < (0, 9, 0):
        rules.add(NO_SHARDING_TYPES)
    rules.update(api_rules(caps))
    return frozenset(rules)


# transforms whose missing API maps to an existing release rule (see api_rules)
_API_RULES = {"transform:smap": NO_SMAP, "transform:set_mesh": NO_SET_MESH, "transform:explicit": "no_explicit",
              "transform:auto_axes": "no_auto_axes"}


def api_rules(caps: dict) -> set:
    """Release rules from the APIs this JAX lacks (``caps["missing_apis"]``, measured by the
    worker: fuzz/worker.py ``api_probes``; their users from the declarations of fuzz/jax_api.py):
    ``no_api:op:<name>`` (:func:`context_refusal`), ``no_api:transform:<name>`` (:func:`enter`,
    :func:`pmap_refusal`), ``no_api:program`` (:func:`root_ctx`: nothing runs), or the rule a
    transform already has (no jax.smap: :data:`NO_SMAP`, ...). None missing: no rule."""
    return set(_api_rules(tuple(caps.get("missing_apis") or ())))


@functools.lru_cache(maxsize=16)
def _api_rules(missing: tuple) -> frozenset:
    return frozenset(_API_RULES.get(user, f"no_api:{user}") for user in missing_users(missing))


def root_ctx(program: dict, caps: dict | None = None) -> Ctx:
    """The context of a top-level call: no axes in scope; ``caps``: the worker's, for its release's rules."""
    m = program["mesh"]
    rules = release_rules(caps)
    _require("no_api:program" not in rules, "this JAX release lacks an API every program uses (fuzz/jax_api.py)")
    _require(not (m["axis_type"] == "explicit" and "no_explicit" in rules), "this JAX release has no Explicit axes")
    if NO_SHARDING_TYPES in rules and m["axis_type"] == "explicit":
        rules |= {OPAQUE}
        _require(not any(i.get("spec") and any(i["spec"]) for i in program["inputs"]),
                 "an input split on an Explicit mesh (sharding types are tracked from jax 0.9.0 on)")
    if m.get("set_mesh"):
        _require(m["axis_type"] == "auto", "set_mesh on an Explicit mesh (its calls run under jax.set_mesh anyway)")
        _require(NO_SET_MESH not in rules, "this JAX release has no jax.set_mesh (jax < 0.7.1)")
    if m["axis_type"] == "explicit" or m.get("set_mesh"):
        rules |= {CONTEXT_MESH}
    return Ctx(mesh=dict(zip(m["axis_names"], m["axis_sizes"])), explicit=m["axis_type"] == "explicit", rules=rules,
               top=True)


def input_types(program: dict) -> dict:
    """{input name: Ty} for the program's global inputs (an int32 input is a scalar: a start index)."""
    out = {}
    for i in program["inputs"]:
        dtype = i.get("dtype", FLOAT)
        _require(dtype in DTYPES, f"input dtype {str(dtype)[:40]!r} is not one of {', '.join(DTYPES)}")
        _require(dtype == FLOAT or not i["shape"], f"the int32 input {i['name']!r} is not a scalar")
        _check_input_spec(i, program["mesh"])
        spec = i.get("spec") if program["mesh"]["axis_type"] == "explicit" else None
        out[i["name"]] = Ty(tuple(i["shape"]), dtype=dtype, spec=spec_type(spec, len(i["shape"])))
    return out


def _check_input_spec(inp: dict, m: dict) -> None:
    """An input's ``spec`` (its PartitionSpec for ``jax.device_put``) must fit its shape and the mesh.

    ``jax.device_put(x, NamedSharding(mesh, P(...)))`` needs every named axis in the mesh,
    at most once, and each dim divisible by the product of the sizes of its axes
    (jax._src.pjit.pjit_check_aval_sharding: "implies that the global size of its
    dimension ... should be divisible by"). On an Explicit mesh the spec is the input's
    sharding type (``Ty.spec``: jax.typeof(x).sharding.spec), tracked by the typing rules.
    """
    spec = inp.get("spec")
    if spec is None:
        return
    mesh = dict(zip(m["axis_names"], m["axis_sizes"]))
    name = inp["name"]
    _require(len(spec) == len(inp["shape"]), f"input {name!r}: spec has {len(spec)} entries for rank {len(inp['shape'])}")
    used = [x for e in spec if e for x in e]
    _require(len(used) == len(set(used)), f"input {name!r}: spec names an axis twice")
    for x in used:
        _require(x in mesh, f"input {name!r}: spec axis {x!r} is not a mesh axis")
    for d, e in zip(inp["shape"], spec):
        _require(d % spec_size(e, mesh) == 0, f"input {name!r}: dim {d} is not divisible by the axes {e}")


def function_types(fn: dict, ctx: Ctx, params: list, env: dict, on_eqn=None) -> list:
    """Type-check a function body; ``env`` holds the captured variables visible from outside.

    ``on_eqn(eqn, ctx, arg_types)``, when given, is called for every equation, nested ones too.
    """
    _require(len(fn["params"]) == len(params), "wrong number of arguments")
    ctx = replace(ctx, top=False) if ctx.top else ctx  # (a body's values are not the program's inputs)
    env = dict(env)
    env.update(zip(fn["params"], params))
    for eqn in fn["eqns"]:
        try:
            args = [env[v] for v in eqn["args"]]
        except KeyError as e:
            raise ProgramError(f"variable {e.args[0]} is not in scope") from None
        if on_eqn is not None:
            on_eqn(eqn, ctx, args)
        if eqn["op"] == "call":
            outs = call_types(eqn["transforms"], eqn["fn"], ctx, args, env, on_eqn)
        else:
            outs = eqn_types(eqn, args, ctx)
        _require(len(outs) == len(eqn["outs"]), f"{eqn['op']} gives {len(outs)} results, not {len(eqn['outs'])}")
        for v, t in zip(eqn["outs"], outs):
            _require(v not in env, f"variable {v} assigned twice")
            env[v] = t
    try:
        return [env[v] for v in fn["results"]]
    except KeyError as e:
        raise ProgramError(f"result {e.args[0]} is not defined") from None


def sealed(t: dict, ctx: Ctx) -> bool:
    """Whether the body under transform ``t`` in ``ctx`` sees only its arguments (no capture).

    On an Explicit mesh: a shard_map ("Closing over inputs to shard_map where the input is
    sharded on `Explicit` axes is not implemented", jax 0.10) and an auto_axes (a captured
    array keeps its Explicit mesh inside the Auto body: "context mesh ... should match the
    aval mesh", ValueError, measured on jax 0.10.2).
    """
    return ctx.explicit and t["kind"] in ("shard_map", "auto_axes")


def call_types(transforms: list, fn: dict, ctx: Ctx, args: list, env: dict, on_eqn=None) -> list:
    """Types of ``transforms[0](transforms[1](...fn))(*args)``; ProgramError if invalid."""
    if not transforms:
        results = function_types(fn, ctx, args, env, on_eqn)
        _require(all(r.dtype == FLOAT for r in results), "a function returns an int32 value (results are float32)")
        return results
    t = transforms[0]
    inner_ctx, inner_args = enter(t, ctx, args)
    if sealed(t, ctx):
        env = {}
    results = call_types(transforms[1:], fn, inner_ctx, inner_args, env, on_eqn)
    return exit_(t, ctx, inner_ctx, args, results)


def check_identifier(name, what: str) -> str:
    """``name`` if it may appear in rendered source as a Python identifier, else ProgramError.

    Allowed: ``[a-z][a-z0-9_]{0,15}``, not a Python keyword or builtin, not a name the
    rendered module defines (:data:`RENDER_NAMES`) nor a nested-function name (g1, g2, ...).
    """
    _require(isinstance(name, str) and IDENTIFIER.fullmatch(name) is not None,
             f"{what} {str(name)[:40]!r} is not a plain identifier ([a-z][a-z0-9_]{{0,15}})")
    _require(name not in RESERVED and not NESTED_FUNCTION.fullmatch(name),
             f"{what} {name!r} is a reserved name (a Python keyword or builtin, or used by the rendered module)")
    return name


def _check_eqn_signature(eqn: dict) -> None:
    op = eqn.get("op")
    _require(op in EQN_SIGNATURES, f"unknown primitive {str(op)[:40]!r}")
    n_args, n_outs, params = EQN_SIGNATURES[op]
    if isinstance(n_args, int):
        _require(len(eqn["args"]) == n_args, f"{op} takes {n_args} argument(s), not {len(eqn['args'])}")
    elif n_args is not None:
        _require(len(eqn["args"]) in n_args, f"{op} takes {sorted(n_args)} argument(s), not {len(eqn['args'])}")
    if n_outs is not None:
        _require(len(eqn["outs"]) in n_outs, f"{op} has {sorted(n_outs)} output(s), not {len(eqn['outs'])}")
    extra = sorted(set(eqn) - {"op", "args", "outs"} - set(params))
    if extra:
        raise ProgramError(f"{op} takes no parameter {extra[0][:40]!r}")
    missing = sorted(set(params) - set(eqn))
    if missing:
        raise ProgramError(f"{op} needs the parameter {missing[0]!r}")


def check_structure(program: dict) -> None:
    """Checks that do not need types: identifiers, equation signatures, nesting, unused functions.

    Raises ProgramError (one line). Every function is checked, used or not, and a
    function no call uses is refused, so that everything in a program is type-checked.
    """
    m = program["mesh"]
    _require(len(m["axis_names"]) == len(m["axis_sizes"]), "mesh axis_names and axis_sizes differ in length")
    _require(len(set(m["axis_names"])) == len(m["axis_names"]), "a mesh axis name repeats")
    for n in m["axis_names"]:
        check_identifier(n, "mesh axis name")
    names = [i["name"] for i in program["inputs"]]
    _require(len(set(names)) == len(names), "an input name repeats")
    for n in names:
        check_identifier(n, "input name")
    for n in program["functions"]:
        check_identifier(n, "function name")
        _require(n not in names, f"function name {n!r} is also an input name")
    used = {c["function"] for c in program["calls"]}
    unused = sorted(set(program["functions"]) - used)
    if unused:
        raise ProgramError(f"function {unused[0]!r} is never called: remove it")

    def walk(fn: dict, depth: int) -> None:
        _require(depth <= MAX_NESTING, f"calls nested deeper than {MAX_NESTING}")
        _require(len(set(fn["params"])) == len(fn["params"]), "a function parameter repeats")
        for v in fn["params"] + fn["results"]:
            check_identifier(v, "variable")
        for e in fn["eqns"]:
            _check_eqn_signature(e)
            for v in e["args"] + e["outs"]:
                check_identifier(v, "variable")
            if "tag" in e:
                check_identifier(e["tag"], "callback tag")
            if e["op"] == "call":
                for t in e["transforms"]:
                    _check_transform_names(t)
                walk(e["fn"], depth + 1)

    for c in program["calls"]:
        for t in c["transforms"]:
            _check_transform_names(t)
    for fn in program["functions"].values():
        walk(fn, 0)


def _check_transform_names(t: dict) -> None:
    if t["kind"] == "vmap":
        for key in ("axis_name", "spmd_axis_name"):
            if t.get(key) is not None:
                check_identifier(t[key], f"vmap {key}")


def check_committed(program: dict, transforms: list, args: list) -> None:
    """ProgramError when a program's call (``transforms`` over the inputs named ``args``)
    starts with a jit whose in_shardings differ from the spec an input is committed to
    (JAX raises ValueError, see :func:`enter`), or with a pmap of a committed input (see
    :func:`pmap_refusal`); an input without a spec is uncommitted."""
    first = transforms[0] if transforms else {}
    specs = {i["name"]: i["spec"] for i in program["inputs"]}
    if first and transform_name(first) == "pmap":
        _require(all(specs.get(a) is None for a in args),
                 "an eager pmap of a committed input (pmap does not reshard its inputs, ValueError in JAX)")
    if first.get("kind") == "jit" and isinstance(first.get("in_specs"), list):
        _require(all(specs.get(a) is None or specs[a] == s for a, s in zip(args, first["in_specs"])),
                 "a jit's in_shardings differ from the sharding of an input it takes (ValueError in JAX)")


def nesting_recorder(seen: dict, on_eqn=None):
    """An ``on_eqn`` that refuses a nested shard_map typed both inside and outside a shard_map.

    A top-level function may be called by several calls (e.g. with and without its outer
    shard_map: :func:`strategies.programs.chain_variants`) but is rendered once; a shard_map
    in its body renders ``mesh=mesh`` outside a shard_map and takes the partly manual mesh
    from the context inside one (jax 0.10.2 ``shard_map._shmap_checks`` refuses a concrete
    mesh whose axis types differ from the context's). ``seen`` ({id(eqn): inside}) is
    shared by the calls to compare; ``on_eqn`` is called after the check.
    """
    def note(eqn, ctx, args):
        if eqn["op"] == "call" and any(t.get("kind") == "shard_map" for t in eqn["transforms"]):
            inside = bool(ctx.manual)
            _require(seen.setdefault(id(eqn), inside) == inside,
                     "a function whose body has a shard_map is called both inside and outside a shard_map")
        if on_eqn is not None:
            on_eqn(eqn, ctx, args)
    return note


def note_callback_rank(ranks: dict, eqn: dict, arg_types: list) -> None:
    """Note in ``ranks`` ({tag: int}) the rank of the argument a tagged callback equation logs.

    A callback's host function receives its argument's *local* value (one device's block in
    a shard_map, one example under a sequential vmap) with any batch dims leading (the
    External callbacks guide, https://docs.jax.dev/en/latest/external-callbacks.html, and
    ``vmap_method`` in the ``jax.pure_callback`` docstring): the trailing ``rank`` dims
    index the same elements in JAX's calls and in the reference's, which the callbacks
    oracle compares position by position. A tag met with two ranks gets 0 (values only).
    """
    tag = eqn.get("tag")
    if tag is None or not arg_types:
        return
    rank = len(arg_types[0].shape)
    ranks[tag] = rank if ranks.get(tag, rank) == rank else 0


def callback_ranks(program: dict, caps: dict | None = None) -> dict:
    """{tag: rank} of every tagged callback's argument (:func:`note_callback_rank`); ProgramError if invalid."""
    ranks: dict = {}
    check_program(program, on_eqn=lambda e, ctx, args: note_callback_rank(ranks, e, args), caps=caps)
    return ranks


def check_program(program: dict, on_eqn=None, caps: dict | None = None) -> list:
    """Type-check every call of a program; returns each call's result types.

    Raises ProgramError (a one-line message) for any violated rule, structural ones
    first (:func:`check_structure`). ``on_eqn`` as in :func:`function_types`; ``caps``:
    a worker's capabilities, to apply its release's rules too (:func:`release_rules`).
    """
    check_structure(program)
    ctx = root_ctx(program, caps)
    inputs = input_types(program)
    out = []
    on_eqn = nesting_recorder({}, on_eqn)
    for call in program["calls"]:
        fn = program["functions"].get(call["function"])
        _require(fn is not None, f"call of unknown function {str(call['function'])[:40]!r}")
        _require(all(a in inputs for a in call["args"]), "a call names an unknown input")
        args = [inputs[a] for a in call["args"]]
        check_committed(program, call["transforms"], call["args"])
        # Top-level functions may close over the program's inputs (module-level arrays).
        out.append(call_types(call["transforms"], fn, ctx, args, inputs, on_eqn))
    return out


def __getattr__(name: str):
    """``TRANSFORMS``: the transform kinds, in the order of the registry (fuzz/transforms/), which
    imports this module: looked up on first use (PEP 562); ``DIFFERENTIATING``: those that take a
    derivative (``Transform.differentiates``)."""
    if name == "TRANSFORMS":
        from fuzz.transforms import REGISTRY

        return tuple(REGISTRY)
    if name == "DIFFERENTIATING":
        from fuzz.transforms import REGISTRY

        return tuple(k for k, t in REGISTRY.items() if t.differentiates)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
