"""Typing rules of the program model: shapes, named axes in scope, and varying manual axes.

Every value of a program has a :class:`Ty`: its shape (float32 only for now) and its
*vma*, the set of named axes of the context over which it varies (manual mesh axes of
enclosing ``shard_map`` bodies and axes of enclosing ``vmap`` bodies). The rules here
are the single source of truth for what a *valid* program is: the strategies only
choose options these rules accept, :func:`fuzz.reference.evaluate` evaluates under
them, and :func:`check_program` rejects anything else with :class:`ProgramError`.

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
"""
from __future__ import annotations

import builtins
import keyword
import math
import re
from dataclasses import dataclass, replace

UNARY = ("sin", "cos", "tanh", "neg")
BINARY = ("add", "sub", "mul", "maximum")
REDUCE = ("sum", "mean", "max")
WEIGHTED = ("wsum",)  # sum(x * W), W seeded like inputs (fuzz.reference.weights): a random linear functional
REDUCING_COLLECTIVES = ("psum", "pmax", "pmin", "pmean")
COLLECTIVES = REDUCING_COLLECTIVES + ("all_gather", "psum_scatter", "ppermute", "all_to_all", "axis_index")
# Ops whose derivative is ambiguous at ties (equal inputs): never under grad.
TIE_OPS = ("maximum", "max", "pmax", "pmin")
TRANSFORMS = ("jit", "shard_map", "vmap", "grad", "value_and_grad", "vjp", "jvp")

# Identifiers of a program (function, parameter, variable, input and mesh/vmap axis
# names, callback tags) reach the rendered Python source: they must match this pattern
# and not be a Python keyword, a builtin, or a name the rendered module defines itself.
# Corpus entries and reports are untrusted input (they arrive by pull request or mail).
IDENTIFIER = re.compile(r"[a-z][a-z0-9_]{0,15}")
RENDER_NAMES = frozenset({
    "jax", "jnp", "np", "os", "contextlib", "io_callback", "shard_map", "mesh", "mesh_context", "Mesh",
    "NamedSharding", "P", "CALLS", "CALLBACK_LOG", "make_input", "log_callback", "tuple_grad",
    "tuple_value_and_grad", "resharded", "weights", "tuple_vjp", "tuple_jvp", "expected", "check", "main",
    # names of the repro scripts (fuzz.render.REPRO_NAMES; a test keeps the two in step)
    "sys", "subprocess", "difflib", "re", "tempfile", "faulthandler", "base64", "seeded", "run_earlier", "record",
    "received", "check_outputs", "check_callbacks", "canonical", "lowering", "lowering_in", "out", "first",
    "again", "diff", "f"})
RESERVED = frozenset(keyword.kwlist) | frozenset(getattr(keyword, "softkwlist", ())) | frozenset(dir(builtins)) \
    | RENDER_NAMES
NESTED_FUNCTION = re.compile(r"g\d+")  # the renderer names nested functions g1, g2, ...
MAX_NESTING = 12  # nested calls inside one function: deeper is not a program the generator makes

# Equation signatures: number of arguments (None: any) and of outputs (a set), and
# the parameters each op requires. The program schema's equation entries are built
# from this table (fuzz.program.schema), so the two cannot drift.
_AXES = {"type": "array", "items": {"$ref": "#/$defs/name"}, "minItems": 1, "maxItems": 4}
_ONE_AXIS = {**_AXES, "maxItems": 1}
_DIM = {"type": "integer", "minimum": 0, "maximum": 8}
_OPTIONAL_DIM = {"oneOf": [{"type": "null"}, _DIM]}
_BOOL = {"type": "boolean"}
_SEED = {"type": "integer", "minimum": 0, "maximum": 255}
EQN_SIGNATURES = {
    **{op: (1, {1}, {}) for op in UNARY},
    **{op: (2, {1}, {}) for op in BINARY},
    **{op: (1, {1}, {"axis": _OPTIONAL_DIM}) for op in REDUCE},
    **{op: (1, {1}, {"seed": _SEED}) for op in WEIGHTED},
    "matmul": (2, {1}, {}),
    "transpose": (1, {1}, {}),
    "broadcast": (1, {1}, {"size": {"type": "integer", "minimum": 1, "maximum": 64}}),
    **{op: (1, {1}, {"axes": _AXES}) for op in REDUCING_COLLECTIVES + ("axis_index",)},
    "all_gather": (1, {1}, {"axes": _ONE_AXIS, "axis": _DIM, "tiled": _BOOL}),
    "psum_scatter": (1, {1}, {"axes": _ONE_AXIS, "axis": _DIM}),
    "ppermute": (1, {1}, {"axes": _ONE_AXIS, "shift": {"type": "integer", "minimum": -64, "maximum": 64}}),
    "all_to_all": (1, {1}, {"axes": _ONE_AXIS, "split_axis": _DIM, "concat_axis": _DIM}),
    "io_callback": (1, {0, 1}, {"tag": {"$ref": "#/$defs/name"}, "ordered": _BOOL, "returns": _BOOL,
                                "stop_gradient": _BOOL}),
    "call": (None, None, {"transforms": {"type": "array", "maxItems": 8, "items": {"$ref": "#/$defs/transform"}},
                          "fn": {"$ref": "#/$defs/function"}}),
}


class ProgramError(ValueError):
    """A program breaks a typing rule: the generator or a hand edit made it invalid."""


@dataclass(frozen=True)
class Ty:
    """Type of one value: ``shape`` (tuple of ints, float32) and ``vma`` (axis names it varies over)."""

    shape: tuple
    vma: frozenset = frozenset()

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Axis:
    """A named axis in scope: a manual mesh axis (``kind='mesh'``) or a vmap axis (``kind='vmap'``).

    ``check_vma`` is the enclosing shard_map's setting (mesh axes only); ``visible``
    is False for a vmap without ``axis_name`` (no collective may name it).
    """

    name: str
    size: int
    kind: str
    check_vma: bool = True
    visible: bool = True


@dataclass(frozen=True)
class Ctx:
    """Typing context of a function body.

    - ``mesh``: {axis name: size} of the program's mesh; ``explicit``: Explicit axis types.
    - ``axes``: named axes in scope, outermost first.
    - ``reserved``: mesh axes taken by an enclosing vmap's ``spmd_axis_name``.
    - ``grad_at``: number of ``axes`` outside the innermost enclosing grad (None: no grad).
    - ``jit``: inside a ``jit`` (traced, not run eagerly).
    - ``rules``: restrictions of the worker's JAX release (:func:`release_rules`).
    """

    mesh: dict
    explicit: bool = False
    axes: tuple = ()
    reserved: frozenset = frozenset()
    grad_at: int | None = None
    n_vmap: int = 0  # vmaps enclosing this body (names the unnamed ones)
    jit: bool = False
    rules: frozenset = frozenset()

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name:
                return a
        raise ProgramError(f"axis {name!r} is not in scope")

    @property
    def manual(self) -> frozenset:
        return frozenset(a.name for a in self.axes if a.kind == "mesh")

    @property
    def in_vmap(self) -> bool:
        return any(a.kind == "vmap" for a in self.axes)

    @property
    def in_grad(self) -> bool:
        return self.grad_at is not None

    def collective_axes(self) -> list:
        """Axis names a collective may use here: visible, not reserved, and not across a grad it cannot cross."""
        out = []
        for i, a in enumerate(self.axes):
            if not a.visible or a.name in self.reserved:
                continue
            if self.grad_at is not None and i < self.grad_at and not (a.kind == "mesh" and a.check_vma):
                continue
            out.append(a.name)
        return out


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise ProgramError(msg)


def broadcast_shapes(a: tuple, b: tuple) -> tuple:
    """NumPy broadcasting of two shapes (trailing alignment); ProgramError when incompatible."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        _require(da == db or da == 1 or db == 1, f"shapes {a} and {b} do not broadcast")
        out.append(max(da, db))
    return tuple(reversed(out))


def spec_size(spec_entry, mesh: dict) -> int:
    """Number of blocks a PartitionSpec entry (None or list of axis names) splits a dim into."""
    return 1 if spec_entry is None else math.prod(mesh[a] for a in spec_entry)


def eqn_types(eqn: dict, args: list, ctx: Ctx) -> list:
    """Result types of a primitive equation (not ``call``) given its argument types; ProgramError if invalid."""
    op = eqn["op"]
    if op in TIE_OPS:
        _require(not ctx.in_grad, f"{op} has ambiguous derivatives at ties: not under grad")
    if op in UNARY:
        return [args[0]]
    if op in BINARY:
        a, b = args
        return [Ty(broadcast_shapes(a.shape, b.shape), a.vma | b.vma)]
    if op in REDUCE:
        (a,) = args
        ax = eqn.get("axis")
        if ax is None:
            return [Ty((), a.vma)]
        _require(0 <= ax < a.rank, f"{op} axis {ax} out of range for rank {a.rank}")
        return [Ty(a.shape[:ax] + a.shape[ax + 1:], a.vma)]
    if op in WEIGHTED:
        return [Ty((), args[0].vma)]
    if op == "matmul":
        a, b = args
        _require(a.rank >= 1 and b.rank == 2 and a.shape[-1] == b.shape[0], f"matmul of {a.shape} and {b.shape}")
        return [Ty(a.shape[:-1] + (b.shape[1],), a.vma | b.vma)]
    if op == "transpose":
        return [Ty(tuple(reversed(args[0].shape)), args[0].vma)]
    if op == "broadcast":
        return [Ty((eqn["size"],) + args[0].shape, args[0].vma)]
    if op in COLLECTIVES:
        return [_collective_type(eqn, args[0], ctx)]
    if op == "io_callback":
        (a,) = args
        if eqn["ordered"]:
            _require(not ctx.in_vmap, "an ordered io_callback cannot be batched by vmap")
        # "callbacks are only supported in spmd computations when all mesh axes are
        # partitioned manually (no partial automatic sharding)" (jax/_src/callback.py)
        _require(not ctx.manual or ctx.manual == set(ctx.mesh), "io_callback inside a partial-manual shard_map")
        if ctx.in_grad:
            _require(eqn["stop_gradient"], "io_callback under grad needs stop_gradient (no JVP rule)")
            _require("no_callback_under_grad" not in ctx.rules,
                     "this JAX release has no io_callback under grad (\"IO callbacks do not support JVP\")")
        if eqn["returns"]:
            # JAX types an io_callback result inside shard_map as unvarying whatever its input:
            # only a callback on an unvarying value returns what its type says.
            _require(not (a.vma & ctx.manual), "io_callback with a result on a value varying over a manual axis")
            return [a]
        return []
    raise ProgramError(f"unknown primitive {op!r}")


def _collective_type(eqn: dict, a: Ty, ctx: Ctx) -> Ty:
    op = eqn["op"]
    names = eqn["axes"]
    allowed = ctx.collective_axes()
    for n in names:
        _require(n in allowed, f"{op} over axis {n!r}, which is not usable here (in scope: {allowed})")
    _require(len(set(names)) == len(names), f"{op} names an axis twice")
    if op in REDUCING_COLLECTIVES:
        if "check_rep" in ctx.rules:
            for n in names:
                ax = ctx.axis(n)
                if ax.kind == "mesh" and ax.check_vma:
                    _require(op not in ("pmax", "pmin"), f"{op} has no replication rule under check_rep")
                    _require(n in a.vma, f"under check_rep {op} needs a value varying over {n!r}")
        return Ty(a.shape, a.vma - frozenset(names))
    if op == "axis_index":
        return Ty(a.shape, a.vma | frozenset(names))
    _require(len(names) == 1, f"{op} takes one axis name here")
    n = ctx.axis(names[0]).size
    vma = a.vma | frozenset(names)
    if op == "ppermute":
        return Ty(a.shape, vma)
    if op == "all_gather":
        d = eqn["axis"]
        if eqn["tiled"]:
            _require(a.rank >= 1 and 0 <= d < a.rank, "tiled all_gather needs a dim")
            return Ty(a.shape[:d] + (a.shape[d] * n,) + a.shape[d + 1:], vma)
        _require(0 <= d <= a.rank, "all_gather axis out of range")
        return Ty(a.shape[:d] + (n,) + a.shape[d:], vma)
    if op == "psum_scatter":
        d = eqn["axis"]
        _require(a.rank >= 1 and 0 <= d < a.rank and a.shape[d] % n == 0, "psum_scatter dim must divide")
        return Ty(a.shape[:d] + (a.shape[d] // n,) + a.shape[d + 1:], vma)
    if op == "all_to_all":
        s, c = eqn["split_axis"], eqn["concat_axis"]
        _require(a.rank >= 1 and 0 <= s < a.rank and 0 <= c < a.rank, "all_to_all axes out of range")
        _require(a.shape[s] % n == 0, "all_to_all split dim must divide")
        shape = list(a.shape)
        shape[s] //= n
        shape[c] *= n
        return Ty(tuple(shape), vma)
    raise ProgramError(f"unknown collective {op!r}")


def vmap_axis_name(t: dict, ctx: Ctx) -> str:
    """The name of the axis a vmap binds: its axis_name, or an internal one (never valid in a program)."""
    return t["axis_name"] or f"_vmap{ctx.n_vmap}"


def enter(t: dict, ctx: Ctx, args: list) -> tuple:
    """Apply one transform's input side: (inner Ctx, inner param types). ProgramError if invalid."""
    kind = t["kind"]
    if kind == "jit":
        return replace(ctx, jit=True), list(args)
    if kind in ("grad", "value_and_grad"):
        _require(len(t["argnums"]) == len(set(t["argnums"])), "argnums repeat")
        _require(all(0 <= i < len(args) for i in t["argnums"]), "argnums out of range")
        return replace(ctx, grad_at=len(ctx.axes)), list(args)
    if kind in ("vjp", "jvp"):
        # Inside a shard_map body (check_vma on) jax.vjp refuses a constant cotangent for a
        # varying output ("unexpected JAX type ... expected float32[2]{V:x}", jax 0.10.2), and
        # the semantics of seeded (co)tangents of unvarying arguments there are not pinned
        # down: refused rather than guessed. Anywhere else they are typed like grad.
        _require(not ctx.manual, f"{kind} inside a shard_map body is not generated")
        _require(len(args) >= 1, f"{kind} of a function without arguments")
        return replace(ctx, grad_at=len(ctx.axes)), list(args)
    if kind == "shard_map":
        mesh = ctx.mesh
        names = t["axis_names"] if t["axis_names"] is not None else [a for a in mesh if a not in ctx.manual]
        _require(len(names) > 0, "shard_map with no manual axis")
        for n in names:
            _require(n in mesh and n not in ctx.manual, f"shard_map axis {n!r} is not a free mesh axis")
        _require(not (ctx.explicit and ctx.manual), "nested shard_map over an Explicit mesh is not generated")
        _require(not (ctx.explicit and set(names) != set(mesh)), "partial-manual shard_map over an Explicit mesh")
        # jax/_src/shard_map.py (ShardMapTrace.process_shard_map): "Check consistency between
        # outer and inner shmaps on ... check_vma" -- a nested shard_map must keep the enclosing
        # one's check_vma (eager: a bare `raise Exception`; "TODO: add check in jit path").
        _require(not ctx.manual or "no_nested_shard_map" not in ctx.rules,
                 "this JAX release cannot nest shard_maps")
        if set(names) | ctx.manual != set(mesh):  # partial-manual
            _require("no_partial_manual" not in ctx.rules, "this JAX release has no partial-manual shard_map")
            _require("partial_manual_needs_jit" not in ctx.rules or ctx.jit,
                     "this JAX release runs a partial-manual shard_map only under jit")
        outer_checks = {a.check_vma for a in ctx.axes if a.kind == "mesh"}
        _require(not outer_checks or outer_checks == {t["check_vma"]},
                 "a nested shard_map must keep the enclosing shard_map's check_vma")
        _require(len(t["in_specs"]) == len(args), "in_specs and args differ in length")
        inner = []
        for spec, a in zip(t["in_specs"], args):
            _check_spec(spec, a.rank, names, ctx)
            shape = tuple(d // spec_size(s, mesh) for d, s in zip(a.shape, spec))
            for d, s in zip(a.shape, spec):
                _require(d % spec_size(s, mesh) == 0, f"dim {d} not divisible by {s}")
            inner.append(Ty(shape, a.vma | frozenset(x for s in spec if s for x in s)))
        new_axes = tuple(Axis(n, mesh[n], "mesh", t["check_vma"]) for n in mesh if n in names)
        return replace(ctx, axes=ctx.axes + new_axes), inner
    if kind == "vmap":
        _require(len(t["in_axes"]) == len(args), "in_axes and args differ in length")
        sizes = {args[i].shape[ax] for i, ax in enumerate(t["in_axes"]) if ax is not None and ax < args[i].rank}
        _require(any(ax is not None for ax in t["in_axes"]), "vmap with no batched argument")
        for i, ax in enumerate(t["in_axes"]):
            _require(ax is None or ax < args[i].rank, "in_axes out of range")
        _require(len(sizes) == 1, f"vmap batch sizes differ: {sorted(sizes)}")
        (b,) = sizes
        name = vmap_axis_name(t, ctx)
        if t["axis_name"] is not None:
            _require(t["axis_name"] not in ctx.mesh and all(a.name != name for a in ctx.axes),
                     f"vmap axis_name {name!r} clashes")
        reserved = ctx.reserved
        spmd = t["spmd_axis_name"]
        if spmd is not None:
            _require(spmd in ctx.mesh and spmd not in ctx.manual and spmd not in reserved,
                     f"spmd_axis_name {spmd!r} is not a free mesh axis")
            _require(b % ctx.mesh[spmd] == 0, "batch size not divisible by the spmd_axis_name axis")
            reserved = reserved | {spmd}
        axis = Axis(name, b, "vmap", visible=t["axis_name"] is not None)
        inner = []
        for i, ax in enumerate(t["in_axes"]):
            a = args[i]
            if ax is None:
                inner.append(a)
            else:
                inner.append(Ty(a.shape[:ax] + a.shape[ax + 1:], a.vma | {name}))
        return replace(ctx, axes=ctx.axes + (axis,), reserved=reserved, n_vmap=ctx.n_vmap + 1), inner
    raise ProgramError(f"unknown transform {kind!r}")


def _check_spec(spec: list, rank: int, names: list, ctx: Ctx) -> None:
    _require(len(spec) == rank, f"spec {spec} does not match rank {rank}")
    used = [x for s in spec if s for x in s]
    _require(len(used) == len(set(used)), f"spec {spec} names an axis twice")
    for x in used:
        _require(x in names, f"spec axis {x!r} is not manual in this shard_map")
        _require(x not in ctx.reserved, f"spec axis {x!r} is taken by an enclosing spmd_axis_name")


def exit_(t: dict, outer: Ctx, inner: Ctx, args: list, results: list) -> list:
    """Apply one transform's output side: outer result types from inner result types."""
    kind = t["kind"]
    if kind == "jit":
        return list(results)
    if kind in ("grad", "value_and_grad"):
        _require(len(results) == 1 and results[0].shape == (), "grad needs exactly one scalar result")
        loss = results[0]
        # Along a manual axis with check_vma=True the gradient of an unvarying argument is
        # summed over the axis (unvarying); along vmap axes and unchecked manual axes each
        # index has its own gradient, which varies wherever the loss does.
        independent = frozenset(a.name for a in outer.axes if a.kind == "vmap" or not a.check_vma)
        grads = [Ty(args[i].shape, args[i].vma | (loss.vma & independent)) for i in t["argnums"]]
        return ([loss] if kind == "value_and_grad" else []) + grads
    if kind == "vjp":
        # outputs, then one cotangent per argument. A cotangent varies where its argument
        # does and, along vmap axes (the only independent axes here: no manual axis is in
        # scope, see enter), wherever an output does: no collective inside may reduce over
        # an axis bound outside (Ctx.collective_axes), so anything varying that feeds the
        # pullback feeds an output too.
        independent = frozenset(a.name for a in outer.axes if a.kind == "vmap" or not a.check_vma)
        varying = frozenset().union(*(r.vma for r in results)) & independent
        return list(results) + [Ty(a.shape, a.vma | varying) for a in args]
    if kind == "jvp":
        # outputs, then their tangents: a tangent has its output's type (the seeded input
        # tangents are unvarying, and the linearized ops follow the same vma rules)
        return list(results) + list(results)
    if kind == "shard_map":
        mine = inner.manual - outer.manual
        _require(len(t["out_specs"]) == len(results), "out_specs and results differ in length")
        out = []
        for spec, r in zip(t["out_specs"], results):
            _check_spec(spec, r.rank, sorted(mine), inner)
            named = {x for s in spec if s for x in s}
            missing = (r.vma & mine) - named
            _require(not missing, f"out_specs {spec} omit axes {sorted(missing)} the result varies over")
            shape = tuple(d * spec_size(s, outer.mesh) for d, s in zip(r.shape, spec))
            out.append(Ty(shape, r.vma - mine))
        return out
    if kind == "vmap":
        name = inner.axes[-1].name
        b = inner.axes[-1].size
        _require(len(t["out_axes"]) == len(results), "out_axes and results differ in length")
        out = []
        for ax, r in zip(t["out_axes"], results):
            if ax is None:
                _require(name not in r.vma, "out_axes None for a result that varies over the batch")
                out.append(r)
            else:
                _require(0 <= ax <= r.rank, "out_axes out of range")
                out.append(Ty(r.shape[:ax] + (b,) + r.shape[ax:], r.vma - {name}))
        return out
    raise ProgramError(f"unknown transform {kind!r}")


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
    - ``no_nested_shard_map``: the experimental shard_map cannot be nested (jax 0.4.26 and
      0.4.38, measured: AttributeError "'RewriteTrace' object has no attribute
      'process_shard_map'"; the renderer also passes no mesh to a nested one).
    No caps (None): the newest release's rules, i.e. none of these.
    """
    if not caps:
        return frozenset()
    rules = set()
    if not caps.get("partial_manual"):
        rules.add("no_partial_manual")
    elif caps.get("eager_partial_manual") is False:
        rules.add("partial_manual_needs_jit")
    if caps.get("callback_under_grad") is False:
        rules.add("no_callback_under_grad")
    if caps.get("shard_map") == "experimental":
        rules.add("no_nested_shard_map")
    if caps.get("check_kw") == "check_rep":
        rules.add("check_rep")
    if caps.get("explicit") is False:
        rules.add("no_explicit")
    return frozenset(rules)


def root_ctx(program: dict, caps: dict | None = None) -> Ctx:
    """The context of a top-level call: no axes in scope; ``caps``: the worker's, for its release's rules."""
    m = program["mesh"]
    rules = release_rules(caps)
    _require(not (m["axis_type"] == "explicit" and "no_explicit" in rules), "this JAX release has no Explicit axes")
    return Ctx(mesh=dict(zip(m["axis_names"], m["axis_sizes"])), explicit=m["axis_type"] == "explicit", rules=rules)


def input_types(program: dict) -> dict:
    """{input name: Ty} for the program's global inputs."""
    return {i["name"]: Ty(tuple(i["shape"])) for i in program["inputs"]}


def function_types(fn: dict, ctx: Ctx, params: list, env: dict, on_eqn=None) -> list:
    """Type-check a function body; ``env`` holds the captured variables visible from outside.

    ``on_eqn(eqn, ctx, arg_types)``, when given, is called for every equation, nested ones too.
    """
    _require(len(fn["params"]) == len(params), "wrong number of arguments")
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


def call_types(transforms: list, fn: dict, ctx: Ctx, args: list, env: dict, on_eqn=None) -> list:
    """Types of ``transforms[0](transforms[1](...fn))(*args)``; ProgramError if invalid."""
    if not transforms:
        return function_types(fn, ctx, args, env, on_eqn)
    t = transforms[0]
    inner_ctx, inner_args = enter(t, ctx, args)
    if t["kind"] == "shard_map" and ctx.explicit:
        # "Closing over inputs to shard_map where the input is sharded on `Explicit` axes
        # is not implemented" (jax 0.10): such bodies see only their arguments.
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
    if n_args is not None:
        _require(len(eqn["args"]) == n_args, f"{op} takes {n_args} argument(s), not {len(eqn['args'])}")
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
    for call in program["calls"]:
        fn = program["functions"].get(call["function"])
        _require(fn is not None, f"call of unknown function {str(call['function'])[:40]!r}")
        _require(all(a in inputs for a in call["args"]), "a call names an unknown input")
        args = [inputs[a] for a in call["args"]]
        # Top-level functions may close over the program's inputs (module-level arrays).
        out.append(call_types(call["transforms"], fn, ctx, args, inputs, on_eqn))
    return out
