"""What a program exercises: for the campaign report's ``features`` counts."""
from __future__ import annotations

from fuzz import ops as O
from fuzz.transforms import lookup
from fuzz.typecheck import DIFFERENTIATING, transform_name

# Transform kinds whose feature name differs: JAX's name (``jax.lax.map``), not the IR's.
KIND_FEATURES = {"map": "lax_map"}


def _walk_function(fn: dict, outer: set, out: set, depth: int, mesh: tuple = (), manual: frozenset = frozenset()) -> int:
    """Collect features of a function body (``manual``: the mesh axes manual there); returns the
    deepest transform nesting below it."""
    defined = set(fn["params"])
    deepest = depth
    for e in fn["eqns"]:
        if any(a not in defined for a in e["args"]):
            out.add("capture")
        if e["op"] == "call":
            deepest = max(deepest, _walk_chain(e["transforms"], e["fn"], outer | defined, out, depth, mesh, manual))
        else:
            out |= O.get(e["op"]).features(e)
        defined.update(e["outs"])
    if any(r not in defined for r in fn["results"]):
        out.add("capture")
    return deepest


def _walk_chain(transforms: list, fn: dict, outer: set, out: set, depth: int, mesh: tuple = (),
                manual: frozenset = frozenset()) -> int:
    for t in transforms:
        name = transform_name(t)
        out.add(KIND_FEATURES.get(name, name))
        tr = lookup(t["kind"])
        if tr is not None:
            manual = tr.features(t, out, mesh, manual)
    return _walk_function(fn, outer, out, depth + len(transforms), mesh, manual)


def features(program: dict) -> tuple:
    """(set of feature names, nesting depth) of a program.

    Names: transform kinds (jit, shard_map, vmap, grad, value_and_grad, vjp, jvp,
    checkpoint, jacrev, jacfwd, cond, fori_loop, while_loop, linearize, scan, lax_map for a
    ``map`` and pmap for a vmap with ``pmap: true``: JAX's names), scan_carry (a scan whose carry is not empty), checkpoint_policy:<name> (a checkpoint's policy,
    ``jax.checkpoint_policies.<name>``), in_shardings / out_shardings / donate_argnums (a jit's), jit_inline (a jit with inline=True),
    spmd_axis_name, vmap_axis_name, check_vma_off,
    partial_manual (a shard_map that leaves a mesh axis automatic), infer_in_specs (a shard_map without in_specs and mesh), smap (a shard_map
    written as ``jax.smap``), negative_axes (its in_axes / out_axes counted from the end), capture (a function reads a variable of an enclosing
    scope), multi_call, explicit_mesh, set_mesh (an Auto mesh whose calls run under ``jax.set_mesh``), enable_checks (the program runs with ``jax_enable_checks``), and what each op
    of the registry names (:meth:`fuzz.ops.base.Op.features`: each collective, wsum,
    io_callback_ordered, io_callback_unordered, io_callback_result, and the data
    movement ops under their JAX names). Depth: the most transforms on one path from a
    call to a function body.
    """
    out: set = set()
    depth = 0
    for call in program["calls"]:
        fn = program["functions"][call["function"]]
        depth = max(depth, _walk_chain(call["transforms"], fn, set(), out, 0, tuple(program["mesh"]["axis_names"])))
    if len(program["calls"]) > 1:
        out.add("multi_call")
    if program["mesh"]["axis_type"] == "explicit":
        out.add("explicit_mesh")
    if program["mesh"].get("set_mesh"):
        out.add("set_mesh")
    if program.get("checks"):
        out.add("enable_checks")
    return out, depth


def op_names(program: dict) -> frozenset:
    """The registry names (``fuzz.ops``) of the ops a program's functions use, those of
    nested functions included (a call's body, a custom rule's functions); ``call`` (a
    nested transform chain) is not an op. ``program``: a program dict
    (``fuzz/schemas/program.schema.json``)."""
    from fuzz.walk import scopes

    return frozenset(e["op"] for _, fn in scopes(program) for e in fn["eqns"]) - {"call"}


def names_read(eqns: list) -> set:
    """The variable names the equations ``eqns`` (a function body's, program dict format) read,
    nested calls' bodies (their captures and results) included. Raises nothing."""
    out = set()
    for e in eqns:
        out.update(e["args"])
        if e["op"] == "call":
            out |= names_read(e["fn"]["eqns"]) | set(e["fn"]["results"])
    return out


def active_through(t: dict, flags: list) -> list:
    """Per argument of the function under transform ``t`` (a program dict's transform), whether
    a derivative reaches it, given ``flags`` for the arguments of ``t`` itself: a derivative
    (fuzz.typecheck.DIFFERENTIATING) adds its ``argnums`` (every argument without them: jvp,
    vjp, linearize); every other transform passes its arguments through in order (each keeps
    their count: fuzz.typecheck.enter). Raises nothing."""
    if t["kind"] not in DIFFERENTIATING:
        return list(flags)
    wrt = t.get("argnums", range(len(flags)))
    return [a or i in wrt for i, a in enumerate(flags)]


def active_values(program: dict) -> frozenset:
    """The variables of ``program`` (a program dict, ``fuzz/schemas/program.schema.json``) that a
    derivative reaches, its *active* values as automatic differentiation calls them.

    A static walk of the program's calls: a derivative in a transform chain (grad,
    value_and_grad, jacrev, jacfwd: their ``argnums``; jvp, vjp, linearize: every argument)
    makes those arguments active, every other transform passes its arguments through in order;
    in a body the active parameters and captures are active, and so are an equation's results
    when it reads an active value visible there (a nested call's active captures included,
    not values active only inside it) and is not a ``stop_gradient``. A function called under several chains counts as active where any
    chain makes it so. Raises nothing on a valid program; KeyError on a call of an undefined
    function. Used by the generator's tests (strategies/programs.py tracks the same while it
    draws) and by benchmarks/seeded.py (a transpose mutant's operand must be active).
    """
    active: set = set()

    def through(transforms: list, flags: list) -> list:
        for t in transforms:
            flags = active_through(t, flags)
        return flags

    def walk(fn: dict, flags: list, outer: frozenset) -> None:
        # ``here``: the active values visible in this body (a nested body's own values are not:
        # a derivative taken inside a nested call of constants gives a constant)
        here = set(outer) | {p for p, a in zip(fn["params"], flags) if a}
        for e in fn["eqns"]:
            if e["op"] == "call":
                walk(e["fn"], through(e["transforms"], [a in here for a in e["args"]]), frozenset(here))
            if e.get("stop_gradient") is not True and names_read([e]) & here:
                here.update(e["outs"])
        active.update(here)

    for c in program["calls"]:
        walk(program["functions"][c["function"]], through(c["transforms"], [False] * len(c["args"])), frozenset())
    return frozenset(active)
