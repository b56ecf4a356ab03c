"""Render a program to standalone Python source that uses only JAX's public API.

The source is what the worker executes and what ``shardfuzz export`` writes as a repro:
one code path, so a repro that does not reproduce cannot be written by construction.

The rendered module defines ``mesh``, the inputs, the functions, a list
``CALLS = [(label, callable, args), ...]`` and ``CALLBACK_LOG`` (what each io_callback
host function received, as ``(tag, numpy array, rank)``); run as a script it executes the
calls in order and prints their results.

API differences between JAX releases are taken from ``caps`` (the capabilities a worker
reports, see ``fuzz/worker.py``):
- ``shard_map``: ``"jax"`` (``jax.shard_map``, jax >= 0.6.1) or ``"experimental"``
  (``jax.experimental.shard_map.shard_map``);
- ``check_kw``: ``"check_vma"`` (jax >= 0.6.1) or ``"check_rep"``;
- ``partial_manual``: ``"axis_names"`` (manual axes named) or ``"auto"`` (the
  complement named, older experimental shard_map) or ``None``;
- ``explicit``: whether ``jax.sharding.AxisType.Explicit`` and ``reshard`` exist.
- ``pvary``: ``"pcast"`` (``jax.lax.pcast(..., to='varying')``, jax >= 0.9.0) or ``"pvary"``
  (``jax.lax.pvary``, 0.6.1 ... 0.9.x): the explicit cast of the ``pvary`` op;
- ``all_gather_invariant``: ``"to"`` (``jax.lax.all_gather(..., to='invarying')``, jax >= 0.9.0)
  or ``"function"`` (``jax.lax.all_gather_invariant``, 0.6.2 ... 0.8.x).
"""
from __future__ import annotations

from fuzz import ops as O
from fuzz.typecheck import (CONTEXT_MESH, ProgramError, check_identifier, check_program, note_callback_rank, root_ctx,
                             shard_map_typed, transform_name)

NEWEST_CAPS = {"shard_map": "jax", "check_kw": "check_vma", "partial_manual": "axis_names", "explicit": True,
               "auto_axes": True, "pvary": "pcast", "all_gather_invariant": "to", "smap": True, "set_mesh": True}


def release_caps(version) -> dict:
    """The capabilities to type a program of a release known only by its version string (a
    report's or corpus entry's ``jax_version``): :data:`NEWEST_CAPS` with that version, so that
    the typing rules keyed on the version (``fuzz.typecheck.release_rules``: no sharding types
    before jax 0.9.0, ops added later, ...) are that release's. A worker's measured caps are
    better where there is one. A version that is not a string: the newest release's rules."""
    return {**NEWEST_CAPS, "jax_version": version} if isinstance(version, str) else dict(NEWEST_CAPS)

# Helpers of the seeded linear functionals (wsum, vjp, jvp), emitted only when used; the
# same lines in render() and fuzz.repro.render_repro(). ``weights`` is fuzz.reference.weights.
_WEIGHTS_SRC = [
    "def weights(seed, shape):  # multiples of 1/8 in [-1, 1] without 0, never all equal, drawn from seed",
    "    w = np.random.default_rng(seed).integers(-8, 8, size=tuple(shape))",
    "    w = (w + (w >= 0)).astype(np.float32) / 8",
    "    if w.size > 1 and (w == w.flat[0]).all():",
    "        w.flat[0] = -w.flat[0]",
    "    return w"]
_VJP_SRC = [
    "def tuple_vjp(f, seed):  # outputs, then the pullback to every argument of cotangents weights(seed + k)",
    "    def g(*a):",
    "        outs, pullback = jax.vjp(f, *a)",
    "        cts = tuple(jnp.asarray(weights(seed + k, jnp.shape(o))) for k, o in enumerate(outs))",
    "        return (*outs, *pullback(cts))",
    "    return g"]
_LINEARIZE_SRC = [
    "def tuple_linearize(f, seed):  # outputs, then the linearized f at the tangents weights(seed + k) of arguments",
    "    def g(*a):",
    "        outs, f_jvp = jax.linearize(f, *a)",
    "        tangents = tuple(jnp.asarray(weights(seed + k, jnp.shape(x))) for k, x in enumerate(a))",
    "        return (*outs, *f_jvp(*tangents))",
    "    return g"]
_JVP_SRC = [
    "def tuple_jvp(f, seed):  # outputs, then their tangents for the tangents weights(seed + k) of the arguments",
    "    def g(*a):",
    "        tangents = tuple(jnp.asarray(weights(seed + k, jnp.shape(x))) for k, x in enumerate(a))",
    "        outs, out_tangents = jax.jvp(f, a, tangents)",
    "        return (*outs, *out_tangents)",
    "    return g"]

# jax.lax.map takes one pytree of mapped arrays: the arguments whose in_axes entry is None
# are passed through by closing over them (the program model's ``map`` transform).
_LAX_MAP_SRC = [
    "def lax_map(f, in_axes):  # jax.lax.map over dim 0 of the arguments whose in_axes entry is 0; the others "
    "are closed over",
    "    def g(*a):",
    "        def body(xs):",
    "            xs = iter(xs)",
    "            return f(*[next(xs) if ax is not None else x for x, ax in zip(a, in_axes)])",
    "        return jax.lax.map(body, tuple(x for x, ax in zip(a, in_axes) if ax is not None))",
    "    return g"]
# jax.lax.scan takes one carry and one pytree of scanned arrays: an argument with a carry entry k
# starts the carry and takes f's result k after each step; those with in_axes None and no carry
# entry are closed over. Its value is the stacked results (the final carry is their last entry).
_LAX_SCAN_SRC = [
    "def lax_scan(f, in_axes, carry):  # jax.lax.scan over dim 0 of the arguments whose in_axes entry is 0",
    "    def g(*a):",
    "        def body(c, xs):",
    "            c, xs = iter(c), iter(xs)",
    "            ys = tuple(f(*[next(c) if k is not None else next(xs) if ax is not None else x",
    "                           for x, ax, k in zip(a, in_axes, carry)]))",
    "            return tuple(ys[k] for k in carry if k is not None), ys",
    "        init = tuple(x for x, k in zip(a, carry) if k is not None)",
    "        return jax.lax.scan(body, init, tuple(x for x, ax in zip(a, in_axes) if ax is not None))[1]",
    "    return g"]
# jax.jacrev / jax.jacfwd with one int argnums: a tuple of Jacobians, one per output of f.
_JAC_SRC = [
    "def tuple_jac(jac, f, argnums):  # every output's Jacobian w.r.t. argument argnums (out.shape + arg.shape)",
    "    return lambda *a: tuple(jac(f, argnums=argnums)(*a))"]
# jax.lax.cond on the signs of the first argument (exact, so the reference takes the same branch):
# f's outputs, or their negation (both branches have f's types).
_COND_SRC = [
    "def tuple_cond(f):  # lax.cond(sum(sign(first argument)) >= 0, f, -f)",
    "    def g(*a):",
    "        pred = jnp.sum(jnp.sign(a[0])) >= 0",
    "        return jax.lax.cond(pred, lambda *b: tuple(f(*b)), lambda *b: tuple(-y for y in f(*b)), *a)",
    "    return g"]
# Loops with a static trip count n: the carry starts at f's outputs (so it has their types and
# varying axes) and adds f's outputs n times; f runs inside the loop body.
_FORI_SRC = [
    "def tuple_fori(f, n):  # lax.fori_loop(0, n): the carry f(*a) plus f(*a) n times",
    "    def g(*a):",
    "        return jax.lax.fori_loop(0, n, lambda i, c: tuple(ci + yi for ci, yi in zip(c, f(*a))), tuple(f(*a)))",
    "    return g"]
_WHILE_SRC = [
    "def tuple_while(f, n):  # lax.while_loop on a counter: the carry f(*a) plus f(*a) n times",
    "    def g(*a):",
    "        def body(s):",
    "            return s[0] + 1, tuple(ci + yi for ci, yi in zip(s[1], f(*a)))",
    "        return jax.lax.while_loop(lambda s: s[0] < n, body, (0, tuple(f(*a))))[1]",
    "    return g"]
# jax.sharding.auto_axes on an Explicit mesh: f sees Auto axes, its results get out_sharding and
# are then resharded to P(), as every value outside a shard_map on an Explicit mesh is here.
_AUTO_AXES_SRC = [
    "def auto_axes_replicated(f, out_specs):  # auto_axes(f, out_sharding=out_specs), results then resharded to P()",
    "    def g(*a):",
    "        ys = jax.sharding.auto_axes(lambda *b: tuple(f(*b)), out_sharding=out_specs)(*a)",
    "        return tuple(jax.sharding.reshard(y, P()) for y in ys)",
    "    return g"]
# a window's parameters on one dim of any rank (fuzz/ops/scans.py: one function's source serves calls
# under vmap, which see lower ranks)
_ALONG_SRC = [
    "def along(x, axis, v, other=1):  # v for dim `axis` of x, `other` for its other dims",
    "    return tuple(v if d == axis else other for d in range(jnp.ndim(x)))"]
# a one-channel convolution along one dim of any rank (fuzz/ops/linalg.py: conv)
_CONV_SRC = [
    "def conv_along(x, axis, kernel, stride, padding, **dilations):  # lax.conv_general_dilated along dim `axis`",
    "    y = jnp.moveaxis(x, axis, -1)  # (the other dims are the batch)",
    "    out = jax.lax.conv_general_dilated(y.reshape(-1, 1, y.shape[-1]), jnp.reshape(kernel, (1, 1, -1)),",
    "                                       (stride,), [padding], **dilations)",
    "    return jnp.moveaxis(out.reshape(y.shape[:-1] + (-1,)), -1, axis)"]
# a part of a discrete Fourier transform on the grid of 1/8, its derivative the transform's (fuzz/ops/scans.py: fft)
_FFT_SRC = [
    "def fft_part(x, axis, part):  # jnp.fft.fft's real or imaginary part, rounded to the grid (k + 1/3) / 8",
    "    y = getattr(jnp.fft.fft(x, axis=axis), part)",
    "    return (jnp.round(y * 8 - 1 / 3) + 1 / 3) / 8 + (y - jax.lax.stop_gradient(y))  # (the gradient of y)"]
# a convolution of an (N, C, spatial...) operand, every spatial dim alike (fuzz/ops/linalg.py: conv_nc)
_CONV_NC_SRC = [
    "def conv_nc(x, kernel, stride, padding, groups, channels_last=False, **dilations):  # N C spatial... or N spatial... C",
    "    nd = jnp.ndim(x) - 2",
    "    dilations = {k: (v,) * nd for k, v in dilations.items()}",
    "    dims = ((\"NWC\", \"WIO\", \"NWC\") if nd == 1 else (\"NHWC\", \"HWIO\", \"NHWC\")) if channels_last else None",
    "    return jax.lax.conv_general_dilated(x, kernel, (stride,) * nd, [padding] * nd, dimension_numbers=dims,",
    "                                        feature_group_count=groups, **dilations)"]
# A shard_map on an Explicit mesh: JAX wants its inputs sharded as in_specs say (else ValueError
# "in_specs passed to shard_map ... does not match the specs of the input", jax 0.10.2) and types
# its results by out_specs; where the typing does not track sharding types (fuzz.typecheck.
# shard_map_typed) they are resharded to P(), as every value there is.
_RESHARDED_SRC = [
    "def resharded(f, in_specs, replicate=True):  # Explicit axes: inputs resharded to in_specs; results to P()",
    "    def g(*a):",
    "        ys = f(*(jax.sharding.reshard(x, s) for x, s in zip(a, in_specs)))",
    "        return tuple(jax.sharding.reshard(y, P()) for y in ys) if replicate else tuple(ys)",
    "    return g"]
# the helpers _linear_helpers emits, in order: (helper names that need it, its source)
_HELPER_SOURCES = (({"weights", "vjp", "jvp", "linearize"}, _WEIGHTS_SRC), ({"vjp"}, _VJP_SRC), ({"jvp"}, _JVP_SRC),
                   ({"linearize"}, _LINEARIZE_SRC), ({"lax_map"}, _LAX_MAP_SRC), ({"lax_scan"}, _LAX_SCAN_SRC),
                   ({"jac"}, _JAC_SRC),
                   ({"cond"}, _COND_SRC), ({"fori_loop"}, _FORI_SRC), ({"while_loop"}, _WHILE_SRC),
                   ({"auto_axes"}, _AUTO_AXES_SRC), ({"along"}, _ALONG_SRC), ({"conv"}, _CONV_SRC), ({"conv_nc"}, _CONV_NC_SRC), ({"fft_part"}, _FFT_SRC),
                   ({"reshard"}, _RESHARDED_SRC))
_HELPERS = frozenset().union(*(names for names, _ in _HELPER_SOURCES))


def _linear_helpers(helpers: set) -> list:
    """Source lines (each preceded by two blank lines) of the helpers used (wsum, vjp, jvp, lax.map, jac*, cond, loops)."""
    return [line for names, src in _HELPER_SOURCES if helpers & names for line in ["", ""] + src]


def spec_source(spec) -> str:
    """``P(...)`` source for a spec list (None or list of axis names per dim); trailing Nones dropped."""
    entries = list(spec)
    while entries and entries[-1] is None:
        entries.pop()
    parts = []
    for e in entries:
        if e is None:
            parts.append("None")
        elif len(e) == 1:
            parts.append(repr(_id(e[0])))
        else:
            parts.append("(" + ", ".join(repr(_id(a)) for a in e) + ")")
    return "P(" + ", ".join(parts) + ")"


def _id(name) -> str:
    """An identifier checked again at the point it is pasted into source (untrusted input)."""
    return check_identifier(name, "identifier")


def _int(x) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != int(x):
        raise ProgramError(f"expected an integer, got {str(x)[:40]!r}")
    return str(int(x))


def _bool(x) -> str:
    if not isinstance(x, bool):
        raise ProgramError(f"expected a boolean, got {str(x)[:40]!r}")
    return repr(x)


VALUES = ("seeded", "arange", "ones")  # an input's "values" (program schema $defs/input; default seeded)


def _values(inp: dict) -> str:
    """An input's ``values`` kind, checked (it reaches the source)."""
    v = inp.get("values", "seeded")
    if v not in VALUES:
        raise ProgramError(f"input values {str(v)[:40]!r} is not one of {', '.join(VALUES)}")
    return v


def _int_input_line(inp: dict, ind: str) -> str:
    """Source of an int32 scalar input (a start index): its value as a literal."""
    from fuzz.values import make_input

    if inp.get("dtype") != "int32" or inp["shape"]:
        raise ProgramError(f"input {str(inp.get('name'))[:40]!r}: only int32 scalars besides float32 arrays")
    v = int(make_input(int(_int(inp["seed"])), (), _values(inp), "int32"))
    if inp["spec"] is None:
        return f"{ind}{_id(inp['name'])} = jnp.int32({v})"
    return f"{ind}{_id(inp['name'])} = jax.device_put(np.int32({v}), NamedSharding(mesh, {spec_source(inp['spec'])}))"


def call_args(call: dict) -> list:
    """Source of a program call's arguments (list of str): its input names, each one its jit
    donates as ``jnp.copy(name)``, so that the input itself stays alive for later calls and
    lowerings (JAX deletes a donated array: https://docs.jax.dev/en/latest/faq.html#buffer-donation;
    the copy keeps the input's sharding and committedness, measured on jax 0.10.2)."""
    first = call["transforms"][0] if call["transforms"] else {}
    donated = set(first.get("donate_argnums") or []) if first.get("kind") == "jit" else set()
    return [f"jnp.copy({_id(a)})" if k in donated else _id(a) for k, a in enumerate(call["args"])]


def _smap_source(t: dict, f: str) -> str:
    """``jax.smap`` of ``f`` for a shard_map over one axis (fuzz.typecheck.smap_refusal): each
    spec that splits dim d by the axis is in_axes / out_axes d (``d - rank`` with
    ``negative_axes``; a spec has one entry per dim), one that splits nothing None."""
    (name,) = t["axis_names"]

    def axis(spec: list) -> str:
        split = [d for d, s in enumerate(spec) if s]
        if not split:
            return "None"
        if len(split) != 1 or spec[split[0]] != [name]:
            raise ProgramError(f"smap spec {str(spec)[:60]!r} splits more than one dim by {name!r}")
        return str(split[0] - len(spec) if t.get("negative_axes") else split[0])

    return (f"jax.smap({f}, in_axes={_tuple_source(axis(s) for s in t['in_specs'])}, "
            f"out_axes={_tuple_source(axis(s) for s in t['out_specs'])}, axis_name={_id(name)!r})")


def _tuple_source(items) -> str:
    items = list(items)
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


class _Renderer:
    def __init__(self, program: dict, caps: dict):
        self.p = program
        self.caps = caps
        self.n_fn = 0
        self.explicit = program["mesh"]["axis_type"] == "explicit"
        # calls run under jax.set_mesh(mesh) (fuzz.typecheck.root_ctx: an Explicit mesh, or set_mesh)
        self.context_mesh = CONTEXT_MESH in root_ctx(program).rules
        self.helpers: set = set()

    # -- transforms ---------------------------------------------------------------
    def wrap(self, transforms: list, fn_name: str, ctx=None) -> str:
        """Source of ``fn_name`` under ``transforms`` (outermost first), called in ``ctx`` (None: a top-level call)."""
        ctx = ctx if ctx is not None else root_ctx(self.p, self.caps)
        expr = fn_name
        for i in reversed(range(len(transforms))):
            nested = bool(ctx.manual) or any(t["kind"] == "shard_map" for t in transforms[:i])
            expr = self.transform(transforms[i], expr, nested, typed=shard_map_typed(ctx, transforms, i))
        return expr

    def transform(self, t: dict, f: str, nested: bool = False, typed: bool = False) -> str:
        """Source of ``f`` under transform ``t``; ``nested``: inside a shard_map; ``typed``: a
        shard_map's results keep the sharding types of its out_specs (:func:`shard_map_typed`)."""
        from fuzz.transforms import lookup

        tr = lookup(t["kind"])
        if tr is None:
            raise ValueError(f"unknown transform {t['kind']!r}")
        return tr.render(self, t, f, nested, typed)

    def shard_map_source(self, t: dict, f: str, nested: bool) -> str:
        """``jax.shard_map`` (or the experimental one) of ``f`` for shard_map transform ``t``."""
        fn = "jax.shard_map" if self.caps["shard_map"] == "jax" else "shard_map"
        # a nested shard_map takes its (partly manual) mesh from the context
        kw = [] if nested or t.get("infer") else ["mesh=mesh"]
        if not t.get("infer"):  # (else inferred from the arguments' shardings and the context mesh)
            kw.append(f"in_specs={_tuple_source(spec_source(s) for s in t['in_specs'])}")
        kw.append(f"out_specs={_tuple_source(spec_source(s) for s in t['out_specs'])}")
        if not t["check_vma"]:
            kw.append(f"{self.caps['check_kw']}=False")
        names = t["axis_names"]
        if names is not None and set(names) != set(self.p["mesh"]["axis_names"]):
            if self.caps["partial_manual"] == "axis_names":
                kw.append("axis_names={" + ", ".join(repr(_id(a)) for a in names) + "}")
            elif self.caps["partial_manual"] == "auto":
                auto = [a for a in self.p["mesh"]["axis_names"] if a not in names]
                kw.append("auto=frozenset({" + ", ".join(repr(_id(a)) for a in auto) + "})")
            else:
                raise ValueError("this JAX release has no partial-manual shard_map")
        return f"{fn}({f}, {', '.join(kw)})"

    # -- functions ----------------------------------------------------------------
    def function(self, name: str, fn: dict, indent: str) -> list:
        lines = [f"{indent}def {name}({', '.join(map(_id, fn['params']))}):"]
        body = indent + "    "
        for eqn in fn["eqns"]:
            lines.extend(self.eqn(eqn, body))
        lines.append(f"{body}return {_tuple_source(map(_id, fn['results']))}")
        return lines

    def eqn(self, e: dict, ind: str) -> list:
        """Source lines of one equation: a nested call here, an op by its registry entry (fuzz/ops/)."""
        a, outs = [_id(v) for v in e["args"]], [_id(v) for v in e["outs"]]
        if e["op"] == "call":
            self.n_fn += 1
            name = f"g{self.n_fn}"
            lines = self.function(name, e["fn"], ind)
            lines.append(f"{ind}{_tuple_source(outs) if len(outs) != 1 else outs[0] + ','} = "
                         f"{self.wrap(e['transforms'], name, self.ctx_of[id(e)])}({', '.join(a)})")
            return lines
        return O.get(e["op"]).render(self, e, a, outs, self.ctx_of[id(e)], ind)

    # -- what ops use to render themselves (each checks what it pastes: untrusted input) --
    @staticmethod
    def int(x) -> str:
        """An integer as source; ProgramError for anything else."""
        return _int(x)

    @staticmethod
    def bool(x) -> str:
        """A boolean as source; ProgramError for anything else."""
        return _bool(x)

    @staticmethod
    def id(name) -> str:
        """An identifier, checked again where it is pasted."""
        return _id(name)

    @staticmethod
    def axes_source(names: list) -> str:
        """Axis names as a collective takes them: ``'x'`` for one, ``('x', 'y')`` for several."""
        names = [_id(n) for n in names]
        return repr(names[0]) if len(names) == 1 else _tuple_source(map(repr, names))

    @staticmethod
    def spec_source(spec) -> str:
        """``P(...)`` of a spec list."""
        return spec_source(spec)

    @staticmethod
    def ints_source(values) -> str:
        """A tuple of integers as source (``(2,)``, ``(2, 4)``, ``()``); ProgramError for anything else."""
        return _tuple_source(_int(v) for v in values)

    record = True  # the host functions keep what they receive (a repro of another oracle: no-ops)

    def callback_host(self, tag: str, returns: bool) -> str:
        """Source of the host function of an io_callback (``tag``: an identifier, already checked)."""
        return f"log_callback({tag!r}{', returns=True' if returns else ''}{self._rank(tag)})"

    def _rank(self, tag: str) -> str:
        """``, rank=N`` for a tag whose argument has N > 0 dims (fuzz.typecheck.note_callback_rank)."""
        rank = self.ranks.get(tag, 0)
        return f", rank={int(rank)}" if rank else ""

    def prepare(self) -> None:
        """Type-check the program; note each equation's context (ppermute needs its axis size) and
        each callback argument's rank (what its host function logs is compared by position)."""
        self.ctx_of, self.ranks = {}, {}

        def note(e, ctx, args):
            self.ctx_of[id(e)] = ctx
            note_callback_rank(self.ranks, e, args)

        check_program(self.p, on_eqn=note, caps=self.caps)

    # -- module -------------------------------------------------------------------
    def module(self) -> str:
        self.prepare()
        m = self.p["mesh"]
        body = []
        for fname, fn in self.p["functions"].items():
            body.extend(self.function(_id(fname), fn, ""))
            body.append("")
        calls = []
        for c in self.p["calls"]:
            label = _label(c)
            calls.append(f"    ({label!r}, {self.wrap(c['transforms'], _id(c['function']))}, "
                         f"{_tuple_source(call_args(c))}),")

        head = [
            "# Generated by shardfuzz: runs as is with jax and numpy on 8 host CPU devices.",
            "import contextlib",
            "import os",
            "# 8 host CPU devices, whatever XLA_FLAGS / JAX_PLATFORMS say (set before JAX is imported)",
            'os.environ["XLA_FLAGS"] = " ".join([f for f in os.environ.get("XLA_FLAGS", "").split()',
            '                                    if "force_host_platform_device_count" not in f]',
            '                                   + ["--xla_force_host_platform_device_count=8"])',
            'os.environ["JAX_PLATFORMS"] = "cpu"',
            "import jax",
            "import jax.numpy as jnp",
            "import numpy as np",
            "from jax.experimental import io_callback",
            "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P",
        ]
        if self.caps["shard_map"] != "jax":
            head.append("from jax.experimental.shard_map import shard_map")
        if self.p.get("checks"):  # https://docs.jax.dev/en/latest/_autosummary/jax.enable_checks.html
            head.append('jax.config.update("jax_enable_checks", True)')
        n_dev = 1
        for s in m["axis_sizes"]:
            n_dev *= s
        shape = _tuple_source(map(_int, m["axis_sizes"]))
        names = _tuple_source(repr(_id(n)) for n in m["axis_names"])
        head.append("")
        if m["axis_type"] == "explicit":
            types = _tuple_source(["jax.sharding.AxisType.Explicit"] * len(m["axis_names"]))
            head.append(f"mesh = Mesh(np.array(jax.devices()[:{n_dev}]).reshape({shape}), {names}, axis_types={types})")
            head.append("mesh_context = lambda: jax.set_mesh(mesh)  # Explicit axes: calls run under the mesh")
        else:
            head.append(f"mesh = Mesh(np.array(jax.devices()[:{n_dev}]).reshape({shape}), {names})")
            head.append("mesh_context = lambda: jax.set_mesh(mesh)  # calls run under the mesh" if self.context_mesh
                        else "mesh_context = contextlib.nullcontext")
        head += [
            "CALLBACK_LOG = []  # (tag, value, rank of its local dims) for every value a host function receives",
            "",
            "",
            "def make_input(seed, shape, spec, values=\"seeded\"):",
            "    # seeded: multiples of 1/8 in [-1, 1], exact in float32; arange: k / n for the n elements; ones",
            "    n = int(np.prod(shape))",
            "    if values == \"ones\":",
            "        x = np.ones(shape, np.float32)",
            "    elif values == \"arange\":",
            "        x = np.arange(n, dtype=np.float32).reshape(shape) / n",
            "    else:",
            "        x = np.random.default_rng(seed).integers(-8, 9, size=shape).astype(np.float32) / 8",
            "    return jnp.asarray(x) if spec is None else jax.device_put(x, NamedSharding(mesh, spec))",
            "",
            "",
            "def log_callback(tag, returns=False, rank=0):",
            "    def host(x):",
            "        CALLBACK_LOG.append((tag, np.array(x), rank))",
            "        return np.array(x) if returns else None",
            "    return host",
            "",
        ]
        if "grad" in self.helpers:
            head += ["", "def tuple_grad(f, argnums):  # grad of the first (scalar) result, as a tuple",
                     "    return lambda *a: tuple(jax.grad(lambda *b: f(*b)[0], argnums=argnums)(*a))", ""]
        if "value_and_grad" in self.helpers:
            head += ["", "def tuple_value_and_grad(f, argnums):",
                     "    def g(*a):",
                     "        v, gs = jax.value_and_grad(lambda *b: f(*b)[0], argnums=argnums)(*a)",
                     "        return (v, *gs)",
                     "    return g", ""]
        head += _linear_helpers(self.helpers)[1:] + ([""] if self.helpers & _HELPERS else [])
        head.append("")
        for i in self.p["inputs"]:
            spec = "None" if i["spec"] is None else spec_source(i["spec"])
            values = _values(i)
            if i.get("dtype", "float32") != "float32":
                head.append(_int_input_line(i, ""))
                continue
            extra = "" if values == "seeded" else f", {values!r}"
            head.append(f"{_id(i['name'])} = make_input({_int(i['seed'])}, {_tuple_source(map(_int, i['shape']))}, "
                        f"{spec}{extra})")
        head += ["", ""]
        tail = [
            "CALLS = [",
            *calls,
            "]",
            "",
            'if __name__ == "__main__":',
            "    for label, fn, args in CALLS:",
            "        with mesh_context():",
            "            print(label, jax.tree_util.tree_map(np.asarray, fn(*args)))",
            "    jax.effects_barrier()",
            "",
        ]
        return "\n".join(head + body + [""] + tail)


def _label(call: dict) -> str:
    expr = call["function"]
    for t in reversed(call["transforms"]):
        expr = f"{transform_name(t)}({expr})"
    return expr


def render(program: dict, caps: dict | None = None) -> str:
    """Python source of a program (str). ``caps`` defaults to the newest JAX's API.

    Raises ValueError for a program this JAX release cannot express, and
    fuzz.typecheck.ProgramError for an invalid program.
    """
    return _Renderer(program, caps or NEWEST_CAPS).module()
