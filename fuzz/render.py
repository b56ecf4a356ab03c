"""Render a program to standalone Python source that uses only JAX's public API.

The source is what the worker executes and what ``shardfuzz export`` writes as a repro:
one code path, so a repro that does not reproduce cannot be written by construction.

The rendered module defines ``mesh``, the inputs, the functions, a list
``CALLS = [(label, callable, args), ...]`` and ``CALLBACK_LOG`` (what each io_callback
host function received, as ``(tag, numpy array)``); run as a script it executes the
calls in order and prints their results.

API differences between JAX releases are taken from ``caps`` (the capabilities a worker
reports, see ``fuzz/worker.py``):
- ``shard_map``: ``"jax"`` (``jax.shard_map``, jax >= 0.6.1) or ``"experimental"``
  (``jax.experimental.shard_map.shard_map``);
- ``check_kw``: ``"check_vma"`` (jax >= 0.6.1) or ``"check_rep"``;
- ``partial_manual``: ``"axis_names"`` (manual axes named) or ``"auto"`` (the
  complement named, older experimental shard_map) or ``None``;
- ``explicit``: whether ``jax.sharding.AxisType.Explicit`` and ``reshard`` exist.
"""
from __future__ import annotations

from fuzz.typecheck import ProgramError, check_identifier, check_program

NEWEST_CAPS = {"shard_map": "jax", "check_kw": "check_vma", "partial_manual": "axis_names", "explicit": True}

_UNARY = {"sin": "jnp.sin({})", "cos": "jnp.cos({})", "tanh": "jnp.tanh({})", "neg": "-{}"}
_BINARY = {"add": "{} + {}", "sub": "{} - {}", "mul": "{} * {}", "maximum": "jnp.maximum({}, {})"}


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


def _tuple_source(items) -> str:
    items = list(items)
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


class _Renderer:
    def __init__(self, program: dict, caps: dict):
        self.p = program
        self.caps = caps
        self.n_fn = 0
        self.explicit = program["mesh"]["axis_type"] == "explicit"
        self.helpers: set = set()

    # -- transforms ---------------------------------------------------------------
    def wrap(self, transforms: list, fn_name: str, ctx=None) -> str:
        outer_manual = bool(ctx is not None and ctx.manual)
        expr = fn_name
        for i in reversed(range(len(transforms))):
            nested = outer_manual or any(t["kind"] == "shard_map" for t in transforms[:i])
            expr = self.transform(transforms[i], expr, nested)
        return expr

    def transform(self, t: dict, f: str, nested: bool = False) -> str:
        k = t["kind"]
        if k == "jit":
            return f"jax.jit({f})"
        if k == "grad":
            self.helpers.add("grad")
            return f"tuple_grad({f}, argnums={_tuple_source(map(_int, t['argnums']))})"
        if k == "value_and_grad":
            self.helpers.add("value_and_grad")
            return f"tuple_value_and_grad({f}, argnums={_tuple_source(map(_int, t['argnums']))})"
        if k == "vmap":
            axes = lambda xs: _tuple_source("None" if a is None else _int(a) for a in xs)  # noqa: E731
            kw = [f"in_axes={axes(t['in_axes'])}", f"out_axes={axes(t['out_axes'])}"]
            if t["axis_name"] is not None:
                kw.append(f"axis_name={_id(t['axis_name'])!r}")
            if t["spmd_axis_name"] is not None:
                kw.append(f"spmd_axis_name={_id(t['spmd_axis_name'])!r}")
            return f"jax.vmap({f}, {', '.join(kw)})"
        if k == "shard_map":
            fn = "jax.shard_map" if self.caps["shard_map"] == "jax" else "shard_map"
            # a nested shard_map takes its (partly manual) mesh from the context
            kw = [] if nested else ["mesh=mesh"]
            kw += [
                f"in_specs={_tuple_source(spec_source(s) for s in t['in_specs'])}",
                f"out_specs={_tuple_source(spec_source(s) for s in t['out_specs'])}",
            ]
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
            expr = f"{fn}({f}, {', '.join(kw)})"
            if self.explicit:
                self.helpers.add("reshard")
                expr = f"resharded({expr}, {_tuple_source(spec_source(s) for s in t['in_specs'])})"
            return expr
        raise ValueError(f"unknown transform {k!r}")

    # -- functions ----------------------------------------------------------------
    def function(self, name: str, fn: dict, indent: str) -> list:
        lines = [f"{indent}def {name}({', '.join(map(_id, fn['params']))}):"]
        body = indent + "    "
        for eqn in fn["eqns"]:
            lines.extend(self.eqn(eqn, body))
        lines.append(f"{body}return {_tuple_source(map(_id, fn['results']))}")
        return lines

    def eqn(self, e: dict, ind: str) -> list:
        op, a, outs = e["op"], [_id(v) for v in e["args"]], [_id(v) for v in e["outs"]]
        lhs = outs[0] if len(outs) == 1 else None
        if op in _UNARY:
            return [f"{ind}{lhs} = {_UNARY[op].format(*a)}"]
        if op in _BINARY:
            return [f"{ind}{lhs} = {_BINARY[op].format(*a)}"]
        if op in ("sum", "mean", "max"):
            axis = "" if e.get("axis") is None else f", axis={_int(e['axis'])}"
            return [f"{ind}{lhs} = jnp.{op}({a[0]}{axis})"]
        if op == "matmul":
            return [f"{ind}{lhs} = {a[0]} @ {a[1]}"]
        if op == "transpose":
            return [f"{ind}{lhs} = jnp.transpose({a[0]})"]
        if op == "broadcast":
            return [f"{ind}{lhs} = jnp.broadcast_to({a[0]}, ({_int(e['size'])},) + {a[0]}.shape)"]
        names = [_id(n) for n in e.get("axes") or []]
        axes = repr(names[0]) if len(names) == 1 else _tuple_source(map(repr, names))
        if op in ("psum", "pmax", "pmin", "pmean"):
            return [f"{ind}{lhs} = jax.lax.{op}({a[0]}, {axes})"]
        if op == "axis_index":
            return [f"{ind}{lhs} = {a[0]} + jax.lax.axis_index({axes}).astype({a[0]}.dtype)"]
        if op == "all_gather":
            return [f"{ind}{lhs} = jax.lax.all_gather({a[0]}, {axes}, axis={_int(e['axis'])}, tiled={_bool(e['tiled'])})"]
        if op == "psum_scatter":
            return [f"{ind}{lhs} = jax.lax.psum_scatter({a[0]}, {axes}, scatter_dimension={_int(e['axis'])}, tiled=True)"]
        if op == "ppermute":
            n = self.ctx_of[id(e)].axis(names[0]).size
            perm = [(i, (i + int(_int(e["shift"]))) % n) for i in range(n)]
            return [f"{ind}{lhs} = jax.lax.ppermute({a[0]}, {axes}, perm={perm})"]
        if op == "all_to_all":
            return [f"{ind}{lhs} = jax.lax.all_to_all({a[0]}, {axes}, {_int(e['split_axis'])}, "
                    f"{_int(e['concat_axis'])}, tiled=True)"]
        if op == "io_callback":
            arg = f"jax.lax.stop_gradient({a[0]})" if e["stop_gradient"] else a[0]
            tag = repr(_id(e["tag"]))
            ordered = _bool(e["ordered"])
            if e["returns"]:
                return [f"{ind}{lhs} = io_callback(log_callback({tag}, returns=True), "
                        f"jax.ShapeDtypeStruct({a[0]}.shape, {a[0]}.dtype), {arg}, ordered={ordered})"]
            return [f"{ind}io_callback(log_callback({tag}), None, {arg}, ordered={ordered})"]
        if op == "call":
            self.n_fn += 1
            name = f"g{self.n_fn}"
            lines = self.function(name, e["fn"], ind)
            lines.append(f"{ind}{_tuple_source(outs) if len(outs) != 1 else outs[0] + ','} = "
                         f"{self.wrap(e['transforms'], name, self.ctx_of[id(e)])}({', '.join(a)})")
            return lines
        raise ValueError(f"unknown op {op!r}")


    # -- module -------------------------------------------------------------------
    def module(self) -> str:
        # The context of each equation (ppermute needs its axis size for the permutation).
        self.ctx_of = {}
        check_program(self.p, on_eqn=lambda e, ctx, args: self.ctx_of.__setitem__(id(e), ctx))
        m = self.p["mesh"]
        body = []
        for fname, fn in self.p["functions"].items():
            body.extend(self.function(_id(fname), fn, ""))
            body.append("")
        calls = []
        for c in self.p["calls"]:
            label = _label(c)
            calls.append(f"    ({label!r}, {self.wrap(c['transforms'], _id(c['function']))}, "
                         f"{_tuple_source(map(_id, c['args']))}),")

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
            head.append("mesh_context = contextlib.nullcontext")
        head += [
            "CALLBACK_LOG = []  # (tag, value) for every value an io_callback host function receives",
            "",
            "",
            "def make_input(seed, shape, spec):",
            "    # Multiples of 1/8 in [-1, 1]: exact in float32, well conditioned.",
            "    x = np.random.default_rng(seed).integers(-8, 9, size=shape).astype(np.float32) / 8",
            "    return jnp.asarray(x) if spec is None else jax.device_put(x, NamedSharding(mesh, spec))",
            "",
            "",
            "def log_callback(tag, returns=False):",
            "    def host(x):",
            "        CALLBACK_LOG.append((tag, np.array(x)))",
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
        if "reshard" in self.helpers:
            head += ["", "def resharded(f, in_specs):  # Explicit axes: shard_map wants inputs sharded as in_specs say",
                     "    def g(*a):",
                     "        a = [jax.sharding.reshard(x, s) for x, s in zip(a, in_specs)]",
                     "        return tuple(jax.sharding.reshard(y, P()) for y in f(*a))",
                     "    return g", ""]
        head.append("")
        for i in self.p["inputs"]:
            spec = "None" if i["spec"] is None else spec_source(i["spec"])
            head.append(f"{_id(i['name'])} = make_input({_int(i['seed'])}, {_tuple_source(map(_int, i['shape']))}, {spec})")
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
        expr = f"{t['kind']}({expr})"
    return expr


def render(program: dict, caps: dict | None = None) -> str:
    """Python source of a program (str). ``caps`` defaults to the newest JAX's API.

    Raises ValueError for a program this JAX release cannot express, and
    fuzz.typecheck.ProgramError for an invalid program.
    """
    return _Renderer(program, caps or NEWEST_CAPS).module()
