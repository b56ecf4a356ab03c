"""The parts every op declaration is made of: value types, the typing context, and :class:`Op`.

This module holds what the typing rules (:mod:`fuzz.typecheck`), the ops of the registry
(:mod:`fuzz.ops`) and the generator share, so that the ops need not import the modules
that use them: :class:`Ty` (shape, dtype and varying axes of a value), :class:`Axis` and
:class:`Ctx` (named axes in scope), :class:`ProgramError`, and the :class:`Op` base class
whose subclasses are the registry's entries. :mod:`fuzz.typecheck` re-exports the types.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from fuzz.errors import ProgramError  # noqa: F401 (the ops' typing rules raise it; imported from here too)

FLOAT = "float32"
INT = "int32"
DTYPES = (FLOAT, INT)  # dtypes a program input may have (fuzz.typecheck.input_types)
BF16 = "bfloat16"
F16 = "float16"
PRED = "bool"
FLOATS = (FLOAT, BF16, F16)  # floating dtypes, most precise first
NUMERIC = FLOATS + (INT,)
VALUE_DTYPES = NUMERIC + (PRED,)  # dtypes a value inside a function may have (fuzz/ops/elementwise.py: astype)
# A release rule (fuzz.typecheck.release_rules): no collective over a mesh axis inside a
# partial-manual shard_map (jax 0.4.28 cannot lower one there: see Ctx.collective_axes)
NO_PARTIAL_COLLECTIVES = "no_partial_collectives"
# A rule of the context inside a transform that does not keep an Explicit mesh's sharding types
# (fuzz.typecheck.SPEC_THROUGH, enter): no op there reads a value split in its sharding type
OPAQUE = "opaque_sharding_types"
# A rule of the context under jax.jacfwd / jax.jacrev: they vmap the derivative (jacfwd a jvp
# over the input basis), so what is underneath is batched as under vmap (a campaign found
# "IO effect not supported in vmap-of-cond" from jacfwd(cond(f)) with an io_callback in f).
JACOBIAN = "under_jacobian"
# A release rule (fuzz.typecheck.release_rules): unreduced_psum only under jit (fuzz/ops/collectives.py)
UNREDUCED_NEEDS_JIT = "unreduced_needs_jit"
# A release rule (fuzz.typecheck.release_rules): a ppermute names its mesh axes in the mesh's
# order (jax >= 0.11.1 raises otherwise; fuzz/ops/collectives.py Ppermute)
PPERMUTE_MESH_ORDER = "ppermute_mesh_order"


class OneOf(str):
    """An argument dtype constraint of :meth:`Op.arg_dtypes` met by any of several dtypes.

    :func:`fuzz.typecheck.eqn_types` checks ``arg.dtype == want``: a ``str`` subclass on the
    right of ``==`` has its ``__eq__`` tried first (Python's data model, "If the operands
    are of different types, and the right operand's type is a direct or indirect subclass
    of the left operand's type, the reflected method of the right operand has priority"),
    so a value of any listed dtype passes. Its text (``float32|bfloat16``) names them in
    the error message. The op's :meth:`Op.types` then checks how the dtypes combine
    (:func:`same_dtype`).
    """

    def __new__(cls, dtypes):
        obj = super().__new__(cls, "|".join(dtypes))
        obj.dtypes = tuple(dtypes)
        return obj

    def __eq__(self, other):
        return other in self.dtypes if isinstance(other, str) and not isinstance(other, OneOf) \
            else str.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


def np_dtype(name: str):
    """The NumPy dtype of a dtype name ("bfloat16": ``ml_dtypes.bfloat16``, which is ``jnp.bfloat16``)."""
    if name == BF16:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def same_dtype(name: str, args: list, allowed: tuple) -> str:
    """The dtype all ``args`` (Ty) share, one of ``allowed``; ProgramError otherwise.

    The program model only combines operands of one dtype (JAX's promotion of two equal
    dtypes is that dtype: jax.numpy's type promotion lattice, docs "Type promotion
    semantics"), so no mixed promotion needs modelling.
    """
    dts = {a.dtype for a in args}
    require(len(dts) == 1, f"{name} of mixed dtypes {sorted(dts)} (operands share one dtype)")
    (dt,) = dts
    require(dt in allowed, f"{name} of {dt} (allowed: {', '.join(allowed)})")
    return dt


def compute(r, dtype: str, fn, *xs):
    """``fn(*xs)`` for operands of ``dtype``, as JAX computes it; ``r`` is the reference.

    Under a derivative (``r.xp`` is jax.numpy) ``fn`` runs as it is: eager JAX is the
    reference there. In NumPy a bfloat16 / float16 op is computed in float32 and rounded
    to ``dtype`` once, as XLA CPU does (its compiled HLO converts bf16 operands to f32 and
    the result back, measured on jax 0.10.2 for elementwise ops, dot, reduce and psum;
    jax.numpy's sum and mean themselves upcast to float32: ``_upcast_f16_for_computation``
    in jax/_src/numpy/reductions.py); for add, sub and mul that is also the correctly
    rounded result (float32 has more than 2p+2 bits of a p-bit format). int32 wraps on
    overflow in both (two's complement), without NumPy's scalar overflow warning.
    """
    if r.xp is not np:
        return fn(*xs)
    if dtype in (BF16, F16):
        return np.asarray(fn(*(np.asarray(x, np.float32) for x in xs))).astype(np_dtype(dtype))
    with np.errstate(all="ignore"):
        return fn(*xs)


@dataclass(frozen=True)
class Ty:
    """Type of one value: ``shape`` (tuple of ints), ``vma`` (axis names it varies over), ``dtype``.

    ``dtype`` is one of :data:`VALUE_DTYPES`: "float32" (inputs, function results,
    (co)tangents and every op's default), "int32" (scalar start indices, see
    ``fuzz/ops/indices.py``, and values converted by ``astype``), and "bfloat16",
    "float16", "bool" (values converted by ``astype``, fuzz/ops/elementwise.py).
    """

    shape: tuple
    vma: frozenset = frozenset()
    dtype: str = FLOAT
    # the sharding type on an Explicit mesh outside shard_map bodies (jax.typeof(x).sharding.spec,
    # the "Explicit sharding" doc page): one tuple of mesh axis names per dim, () for a value
    # that is replicated (every dim unsplit). Set by fuzz.typecheck.eqn_types and call_types
    # only; elsewhere (Auto meshes, shard_map bodies, auto_axes) always (). See Op.sharding_types.
    spec: tuple = field(default=(), compare=False)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def dims(self) -> tuple:
        """``spec`` with one entry (a tuple of axis names, () if unsplit) per dim."""
        return self.spec if self.spec else ((),) * len(self.shape)

    @property
    def sharded(self) -> bool:
        """Whether some dim is split over mesh axes (in its sharding type)."""
        return any(self.spec)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


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
    - ``rules``: restrictions of the worker's JAX release (:func:`fuzz.typecheck.release_rules`).
    - ``top``: the context of a program's call itself, before its first transform (its
      arguments are the program's inputs); :func:`fuzz.typecheck.enter` and function
      bodies clear it.
    """

    mesh: dict
    explicit: bool = False
    axes: tuple = ()
    reserved: frozenset = frozenset()
    grad_at: int | None = None
    n_vmap: int = 0  # vmaps enclosing this body (names the unnamed ones)
    jit: bool = False
    rules: frozenset = frozenset()
    top: bool = False

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
    def batched(self) -> bool:
        """Under a batching rule: inside a vmap or lax.map (typed as one) or a Jacobian (which vmaps)."""
        return self.in_vmap or JACOBIAN in self.rules

    @property
    def in_grad(self) -> bool:
        return self.grad_at is not None

    def collective_axes(self) -> list:
        """Axis names a collective may use here: visible, not reserved, not across a grad it cannot
        cross, and no mesh axis inside a partial-manual shard_map under :data:`NO_PARTIAL_COLLECTIVES`."""
        out = []
        partial = self.manual != frozenset(self.mesh)
        for i, a in enumerate(self.axes):
            if not a.visible or a.name in self.reserved:
                continue
            # (a release whose partial-manual shard_map lowers no collective over a mesh axis:
            # NO_PARTIAL_COLLECTIVES; vmap axes are batched away before lowering)
            if a.kind == "mesh" and partial and NO_PARTIAL_COLLECTIVES in self.rules:
                continue
            # across a derivative: vmap axes (each index its own copy of the arguments, the loss
            # summed over them: JAX's vmap-of-grad, measured on 0.10.2) and checked manual axes
            if self.grad_at is not None and i < self.grad_at and not (a.kind == "vmap" or (a.kind == "mesh" and a.check_vma)):
                continue
            out.append(a.name)
        return out


def require(cond: bool, msg: str) -> None:
    """Raise ProgramError(msg) unless ``cond``."""
    if not cond:
        raise ProgramError(msg)


def broadcast_shapes(*shapes: tuple) -> tuple:
    """NumPy broadcasting of shapes (trailing alignment); ProgramError when incompatible."""
    out = []
    for i in range(1, max(map(len, shapes)) + 1):
        ds = {s[-i] for s in shapes if i <= len(s)} - {1}
        require(len(ds) <= 1, f"shapes {' and '.join(map(str, shapes))} do not broadcast")
        out.append(ds.pop() if ds else 1)
    return tuple(reversed(out))


def spec_size(spec_entry, mesh: dict) -> int:
    """Number of blocks a PartitionSpec entry (None or list of axis names) splits a dim into."""
    return 1 if spec_entry is None else math.prod(mesh[a] for a in spec_entry)


def sharding_spec(dims: list) -> tuple:
    """A sharding type from per-dim entries (tuples of axis names), () when nothing is split;
    ProgramError when one axis splits two dims (JAX: "incompatible shardings")."""
    used = [a for d in dims for a in d]
    require(len(used) == len(set(used)), f"a sharding type naming an axis twice: {dims}")
    return tuple(tuple(d) for d in dims) if used else ()


def spec_type(spec: list | None, rank: int) -> tuple:
    """The sharding type (:attr:`Ty.spec`) of a value of ``rank`` dims split as ``spec`` says
    (a program's PartitionSpec: one null or list of axis names per leading dim)."""
    return sharding_spec([tuple(e or ()) for e in spec or ()] + [()] * (rank - len(spec or ())))


def checked_axes(ctx: Ctx) -> frozenset:
    """The manual axes of ``ctx`` whose shard_map has check_vma (check_rep) on: JAX types varying
    axes there."""
    return frozenset(a.name for a in ctx.axes if a.kind == "mesh" and a.check_vma)


def vmap_axes(ctx: Ctx) -> frozenset:
    """The names of the vmap axes of ``ctx`` (internal ones of unnamed vmaps included)."""
    return frozenset(a.name for a in ctx.axes if a.kind == "vmap")


def keep_along(name: str, a: Ty, d: int, out_len: int, ctx: Ctx) -> tuple:
    """The sharding type of an op's result that keeps ``a``'s dims but resizes dim ``d`` to
    ``out_len``: a split dim must stay divisible by its shards (ShardingTypeError "... on sharded
    dims where out dim (n) is not divisible by mesh axes (k)", jax 0.10.2)."""
    k = spec_size(a.dims[d], ctx.mesh)
    require(out_len % k == 0, f"{name} of a dim split {k} ways to {out_len} elements (not divisible)")
    return a.spec


def alike(name: str, args: list) -> tuple:
    """The sharding type of operands that must be split alike (concatenate: "All operands should
    have the same sharding"; dynamic_update_slice: "operand sharding must be equal to update
    sharding"; select: "select cases must have the same shardings", jax 0.10.2): the first's;
    ProgramError when another's differs."""
    require(all(a.dims == args[0].dims for a in args), f"{name} of operands split differently: "
            f"{[a.dims for a in args]}")
    return args[0].spec


def unsplit_along(name: str, a: Ty, d: int) -> None:
    """ProgramError when ``a``'s dim ``d`` is split (JAX refuses the op along a split dim on an
    Explicit mesh: "Input should be unsharded over the axis being reduced", "Arguments to sort must
    be unsharded over the sorting dimension", jax 0.10.2)."""
    require(not a.dims[d], f"{name} along dim {d}, split over {a.dims[d]} in its sharding type")


def version_tuple(version: str) -> tuple:
    """(major, minor, patch) of a version string such as "0.4.38" or "0.10.2.dev2025"; () if none."""
    return tuple(int(x) for x in re.findall(r"\d+", str(version))[:3])


# JSON Schema pieces of equation parameters ("#/$defs/name": an identifier).
AXES = {"type": "array", "items": {"$ref": "#/$defs/name"}, "minItems": 1, "maxItems": 4}
ONE_AXIS = {**AXES, "maxItems": 1}
DIM = {"type": "integer", "minimum": 0, "maximum": 8}
OPTIONAL_DIM = {"oneOf": [{"type": "null"}, DIM]}
BOOL = {"type": "boolean"}
SEED = {"type": "integer", "minimum": 0, "maximum": 255}
# a ppermute's [[source, destination], ...] over an axis of at most 64 devices
PERM = {"type": "array", "maxItems": 64,
        "items": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 63},
                  "minItems": 2, "maxItems": 2}}


def int_schema(lo: int, hi: int) -> dict:
    """JSON Schema of an integer parameter in [lo, hi]."""
    return {"type": "integer", "minimum": lo, "maximum": hi}


class Scope:
    """What an op's ``draw`` sees: the values in scope and the generator's services.

    - ``visible``: {variable: Ty} readable here; ``order``: their names, most recent first
      (the generator's preference: recent values first, so that programs chain);
    - ``caps``: the worker's capabilities (fuzz/worker.py); ``disabled``: op and transform
      names the generator must not draw in this program (swarm testing);
    - ``new_var()``: a fresh variable name; ``new_tag()``: a fresh callback tag;
    - ``max_elements``, ``max_rank``: the generator's size limits;
    - ``types(eqn)``: the result types of an equation by the typing rules (ProgramError if invalid).
    """

    def __init__(self, visible: dict, order: list, caps: dict, disabled: frozenset, new_var, new_tag, types,
                 max_elements: int, max_rank: int):
        self.visible = visible
        self.order = order
        self.caps = caps
        self.disabled = disabled
        self.new_var = new_var
        self.new_tag = new_tag
        self.types = types
        self.max_elements = max_elements
        self.max_rank = max_rank
        self.chained = False  # the generator draws the last op again on its own output (see pick)
        # under a derivative: the values the derivative reaches (its active values: the
        # differentiated parameters, active captures and what is computed from them; see
        # strategies.programs._Gen.function and pick)
        self.local: frozenset | None = None

    def pick(self, draw, names: list):
        """One of ``names`` (most recent first, as :meth:`floats` and :meth:`values` give them):
        the most recent one half of the time, any one otherwise; always the most recent one
        when the generator draws an op again on its own output (``chained``).

        Uniform picks rarely chain: an op fed by the one just drawn (``x.at[a:b].set(u)``
        then ``.at[i].set(c)``, a sharding constraint then a cumsum) needs the last value
        among all the visible ones (measured: 0 chains of two ``.at[]`` in 2 x 3000 drawn
        programs, seeds 0 and 1; 25 and 0 with this and the focus ops of programs()).
        Shrinking goes to the most recent one too (the first of ``names``).

        Under a derivative (``local`` set), the uniform pick is 3 times in 4 among the
        active values, those the derivative reaches: a value computed from captured ones only
        is a constant to the derivative, so an op on it is never differentiated (its JVP and
        transpose rules never run): silent programs with a seeded mutant of ppermute's
        transpose permuted captured values (2026-12-03@c112f03), of psum_scatter's computed ones
        (2026-12-06@a5cb656).
        """
        if self.chained:
            return names[0]  # (the value just made, when this op may read it)
        return names[0] if not draw(st.booleans()) else self.sample(draw, names)

    def sample(self, draw, cands: list, var=lambda c: c):
        """One of ``cands`` (variables, or what ``var`` maps to one): under a derivative
        (``local`` set) 3 times in 4 among the active values when both kinds are there (see
        :meth:`pick`), else uniformly."""
        own = [c for c in cands if var(c) in self.local] if self.local is not None else []
        if own and len(own) < len(cands) and draw(st.integers(0, 3)) > 0:
            return draw(st.sampled_from(own))
        return draw(st.sampled_from(cands))

    def floats(self, min_rank: int = 0) -> list:
        """float32 values of rank >= ``min_rank``, most recent first."""
        return [v for v in self.order if self.visible[v].dtype == FLOAT and self.visible[v].rank >= min_rank]

    def values(self, dtypes: tuple = VALUE_DTYPES, min_rank: int = 0) -> list:
        """Values whose dtype is one of ``dtypes`` and rank >= ``min_rank``, most recent first.

        int32 scalars are start indices (``fuzz/ops/indices.py``) unless an ``astype`` made
        them; both count here.
        """
        return [v for v in self.order if self.visible[v].dtype in dtypes and self.visible[v].rank >= min_rank]

    def ints(self) -> list:
        """int32 scalars (start indices), most recent first."""
        return [v for v in self.order if self.visible[v].dtype == INT and self.visible[v].rank == 0]

    def small(self, factor: int = 2) -> list:
        """float32 values that may grow by ``factor`` within ``max_elements``."""
        return [v for v in self.floats() if self.visible[v].size * factor <= self.max_elements]

    def valid(self, eqn: dict) -> bool:
        """Whether ``eqn`` type-checks here."""
        try:
            self.types(eqn)
        except ProgramError:
            return False
        return True


class Op:
    """One primitive of the program model, declared once: the registry's entry (:mod:`fuzz.ops`).

    Class attributes:

    - ``name``: the equation's ``op``; ``family``: the generator's group (its weight is
      :data:`fuzz.ops.FAMILY_WEIGHTS`); ``n_args`` (int, frozenset of ints, or None: any)
      and ``n_outs`` (frozenset); ``params``: {parameter: JSON Schema} (the program
      schema's equation entry is built from it, fuzz.program);
    - ``grad_ok``: whether it may appear under grad / vjp / jvp (``no_grad_reason`` says
      why not); ``explicit_ok``: whether it may appear on an Explicit mesh outside
      shard_map bodies, where values carry sharding types whose rules (ShardingTypeError:
      "operand sharding must be equal to update sharding", "Input should be unsharded over
      the axis being reduced", measured on jax 0.10.2) the typing rules do not model yet;
      ``since``: the first JAX release that has it (older releases' workers
      refuse it: :func:`fuzz.typecheck.release_rules` adds the rule ``no_op:<name>``);
    - ``dtypes``: the dtypes its arguments may have (:data:`FLOATS`, :data:`NUMERIC`, ...;
      default float32 only): an op opting in computes its result dtype in :meth:`types`,
      draws operands with :meth:`Scope.values` and evaluates in that dtype;
    - ``feature_names``: names it adds to a campaign report's ``features`` (JAX's name);
      ``preludes``: ops its draw may put before it (e.g. a start index), when enabled;
    - ``random_loss``: whether its :meth:`as_loss` is a random linear functional (its
      cotangent differs element by element), not a plain sum (an all-ones cotangent, under
      which a transpose rule that permutes or reorders the wrong way gives the right result).

    Methods (each subclass defines every one; tests/test_registry.py checks it):

    - :meth:`types` (typing rule), :meth:`draw` (a valid equation in a context),
      :meth:`reference` (unsharded, lock-step over named axes), :meth:`render` (JAX source),
      :meth:`features`; :meth:`arg_dtypes` when an argument is not float32.
    """

    name: str = ""
    family: str = ""
    n_args = 1
    n_outs = frozenset({1})
    params: dict = {}
    grad_ok: bool = True
    no_grad_reason = "has ambiguous derivatives at ties"
    explicit_ok: bool = True
    explicit_rule: bool = False  # sharding_types is modelled (see there)
    dtypes: tuple = (FLOAT,)  # dtypes its (data) arguments may have: see arg_dtypes
    since: str = "0.4.26"
    feature_names: tuple = ()
    preludes: tuple = ()
    random_loss: bool = False
    # the parameter naming the dim of the first operand the op moves data along (see along)
    along_param: str | None = None
    along_keeps: bool = True  # whether the result keeps that dim at the same position

    def signature(self) -> tuple:
        """(n_args, n_outs, params) as :data:`fuzz.typecheck.EQN_SIGNATURES` holds it."""
        return self.n_args, self.n_outs, self.params

    def arg_dtypes(self, eqn: dict) -> tuple:
        """The dtype each argument must have: ``dtypes`` for each (default: float32 only).

        With more than one dtype in ``dtypes`` each entry is a :class:`OneOf`, and the op's
        :meth:`types` says how they combine (most ops: :func:`same_dtype`).
        """
        want = FLOAT if self.dtypes == (FLOAT,) else OneOf(self.dtypes)
        return (want,) * len(eqn["args"])

    def types(self, eqn: dict, args: list, ctx: Ctx) -> list:
        """Result types from the argument types (list of Ty), parameters and context; ProgramError if invalid."""
        raise NotImplementedError

    def sharding_types(self, eqn: dict, args: list, outs: list, ctx: Ctx) -> list:
        """The sharding types (``Ty.spec``) of the results ``outs`` when some argument is split in
        its sharding type on an Explicit mesh (outside shard_map bodies); ProgramError where JAX
        refuses the op (a ShardingTypeError) or where the rule is not modelled (the default).

        Rules measured on jax 0.10.2 with ``jax.typeof(y).sharding.spec``, eager and under jit
        (the "Explicit sharding" doc page, https://docs.jax.dev/en/latest/notebooks/explicit-sharding.html,
        describes the model). The default: replicated results of replicated operands, and a
        split operand refused. An op that declares one sets ``explicit_rule`` (then it is asked
        on replicated operands too, where types are tracked); an op with
        ``explicit_ok`` False may then appear on an Explicit mesh where sharding types are tracked
        (:func:`fuzz.typecheck.context_refusal`).
        """
        require(not any(a.sharded for a in args), f"{self.name} of a value split in its sharding type (the rule is not modelled)")
        return [()] * len(outs)

    def draw(self, draw, ctx: Ctx, scope: Scope):
        """A valid equation here (dict), a list of equations (the last one this op's), or None when not applicable.

        ``draw`` is Hypothesis' draw function; list the simplest choices first.
        """
        raise NotImplementedError

    def reference(self, r, eqn: dict, xs: list, ts: list, ctx: Ctx) -> list:
        """Result arrays: ``xs`` are lock-step arrays (one leading dim per axis of ``ctx.axes``).

        ``r`` is the :class:`fuzz.reference.Reference`: ``r.xp`` is NumPy, or ``jax.numpy``
        under a derivative; ``r.jax``, ``r.record(tag, x)``.
        """
        raise NotImplementedError

    def render(self, rr, eqn: dict, args: list, outs: list, ctx: Ctx, ind: str) -> list:
        """Source lines (indented by ``ind``) computing ``outs`` from ``args`` (identifiers, checked).

        One function's source serves every call of it, and a call under vmap sees lower
        ranks: the source may not depend on the arguments' shapes (name dims by ``axis``
        from the left, as the typing rules do).

        ``rr`` is the renderer: ``rr.int``, ``rr.bool``, ``rr.id``, ``rr.axes_source``,
        ``rr.spec_source``, ``rr.helpers`` (helpers the module must define).
        """
        raise NotImplementedError

    def features(self, eqn: dict) -> set:
        """Feature names this equation adds to a report's ``features``."""
        return set(self.feature_names)

    def along(self, eqn: dict) -> tuple:
        """(dim of the first operand this equation moves data along, the same dim in its first
        result), each None when there is none: e.g. ``(axis, axis)`` for a cumsum or a slice,
        ``(axis, None)`` for a reduction that removes it, ``(None, None)`` for elementwise ops.

        The generator may split that dim over the mesh around the equation (a sharding
        annotation before or after it, :meth:`as_constraint`): XLA's SPMD partitioner handles
        each such op along a split dim by a rule of its own (halos for pads and slices,
        windowed exchanges for cumulative ops, per-shard clamping for dynamic slices), the
        code a sharding bug lives in, and an op's dim is otherwise split in few programs.
        Declared by ``along_param`` (the parameter holding the dim; None: no such dim) and
        ``along_keeps``; an op with another rule overrides this. ``(None, d)``: an op that makes
        its result's dim ``d`` without an operand along it (a random draw, fuzz/ops/random.py):
        annotated after it only.
        """
        d = eqn.get(self.along_param) if self.along_param else None
        if not isinstance(d, int) or isinstance(d, bool):
            return None, None
        return d, (d if self.along_keeps else None)

    # Optional roles the generator gives some ops (the first enabled one that applies):
    def as_loss(self, draw, arg: str, out: str) -> dict:
        """An equation of this op reducing ``arg`` to the scalar ``out``: a grad's loss (not every op)."""
        raise NotImplementedError

    def as_rank1(self, arg: str, out: str) -> dict:
        """An equation of this op making the rank-0 ``arg`` the rank-1 ``out`` (not every op), so that
        a function result can be named by any out_specs."""
        raise NotImplementedError

    def as_sum(self, a: str, b: str, out: str) -> dict:
        """An equation of this op adding the float32 scalars ``a`` and ``b`` into ``out`` (not every
        op): a grad's loss summing the losses of several results."""
        raise NotImplementedError

    def as_product(self, a: str, b: str, out: str) -> dict:
        """An equation of this op multiplying the float32 scalars ``a`` and ``b`` into ``out`` (not
        every op): a grad's loss where a term the function's parameters do not reach scales
        one they do, as d + d * c (added alone, its value could not reach the gradient)."""
        raise NotImplementedError

    def as_varying(self, arg: str, out: str, axes: list) -> dict:
        """An equation of this op making the float32 scalar ``arg`` into ``out``, which varies over
        the named ``axes`` (not every op): a grad's loss L inside a shard_map body or a named vmap
        becomes L * (L + index), so that the cotangent differs from device to device (example to
        example) along the axes; a uniform one hides a wrong permutation in a transpose rule."""
        raise NotImplementedError

    def as_float32(self, arg: str, out: str) -> dict:
        """An equation of this op converting ``arg`` (any dtype but float32) to the float32 ``out``,
        keeping its shape (not every op): a body's value of another dtype that nothing reads
        becomes a result that way (function results are float32)."""
        raise NotImplementedError

    def as_constraint(self, draw, ctx: Ctx, arg: str, ty: Ty, dim: int, out: str) -> dict | None:
        """An equation of this op annotating ``arg`` (of type ``ty``) as split along ``dim`` over
        some mesh axes, into ``out``, or None where no axes can split that dim here (not every op):
        see :meth:`along`."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<op {self.name}>"


class ExprOp(Op):
    """An op with one result whose source is one expression: define :meth:`expr`."""

    def expr(self, rr, eqn: dict, a: list, ctx: Ctx) -> str:
        raise NotImplementedError

    def render(self, rr, eqn, args, outs, ctx, ind):
        return [f"{ind}{outs[0]} = {self.expr(rr, eqn, args, ctx)}"]


class AlongAxis(ExprOp):
    """A shape-preserving op along one dim ``axis`` of one float operand (roll, cumsum, cummax, sort).

    Subclasses set ``params`` (with ``axis``: ``DIM``) and may add to :meth:`draw_along`'s equation.
    """

    explicit_ok = False
    explicit_rule = True
    along_param = "axis"

    def types(self, eqn, args, ctx):
        (a,) = args
        require(0 <= eqn["axis"] < a.rank, f"{self.name} axis {eqn['axis']} out of range for rank {a.rank}")
        return [a]

    def sharding_types(self, eqn, args, outs, ctx):
        """Not along a split dim (cumsum, cummax, sort, roll: ShardingTypeError on jax 0.10.2); the
        other dims keep their splits."""
        unsplit_along(self.name, args[0], eqn["axis"])
        return [args[0].spec]

    def draw_along(self, draw, scope, nonempty: bool = False):
        """An equation of this op on a drawn operand of rank >= 1 (with ``nonempty``: no dim of
        size 0) and a drawn axis, or None (no operand)."""
        xs = [v for v in scope.floats(min_rank=1) if not nonempty or 0 not in scope.visible[v].shape]
        if not xs:
            return None
        a = scope.pick(draw, xs)
        return {"op": self.name, "args": [a], "outs": [scope.new_var()],
                "axis": draw(st.integers(0, scope.visible[a].rank - 1))}


def lead(K: int) -> tuple:
    """Index prefix selecting everything along the ``K`` leading named dims of a lock-step array."""
    return (slice(None),) * K


def align(xp, xs: list, ranks: list, K: int) -> list:
    """Lock-step arrays of different ranks padded with size-1 dims after the K named dims (NumPy broadcasting)."""
    n = max(ranks)
    return [x.reshape(x.shape[:K] + (1,) * (n - r) + x.shape[K:]) for x, r in zip(xs, ranks)]


def fits(shape: tuple, *others: tuple) -> bool:
    """Whether the shapes broadcast together."""
    try:
        broadcast_shapes(shape, *others)
    except ProgramError:
        return False
    return True
