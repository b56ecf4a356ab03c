"""Hypothesis strategies for meshes, PartitionSpecs, shapes and whole programs.

Programs are valid by construction: every choice is drawn from the options that the
typing rules of :mod:`fuzz.typecheck` accept in the current context (shapes, named axes in
scope, varying manual axes, divisibility), so nothing is generated and then thrown
away. Structure is drawn first (mesh, inputs, transform chain), leaves last, and every
``sampled_from`` lists the simplest option first, so shrinking moves toward small
programs: fewer axes, size-1 dims, no transforms, ``jit`` before the others.

The grammar (see ``docs/program.md``): a call applies a chain of transforms (jit,
shard_map, vmap, grad, value_and_grad, vjp, jvp) to a function; a function body is a list
of equations: elementwise, broadcasting, reductions (a seeded weighted sum ``wsum``
among them, also as the loss of a grad), matmul, transpose, collectives over
any axis name in scope, io_callback (ordered or not), and nested calls whose bodies
may capture any variable of the enclosing scopes.
"""
from __future__ import annotations

import math

from hypothesis import strategies as st

from fuzz import typecheck as T
from fuzz.render import NEWEST_CAPS

AXIS_NAMES = ("x", "y", "z")
VMAP_AXIS_NAMES = ("i", "j", "k", "l", "m")
DIMS = (1, 2, 4, 8, 16)
MAX_ELEMENTS = 4096
MAX_RANK = 4


@st.composite
def meshes(draw, caps: dict = NEWEST_CAPS, n_devices: int | None = None):
    """A mesh record: 1-3 axes named x, y, z, sizes in {1, 2, 4, 8} with product <= n_devices.

    ``n_devices`` defaults to the worker's (``caps["n_devices"]``), at most 8. Axis type
    "explicit" only where ``caps["explicit"]``.
    """
    n_devices = n_devices or min(8, caps.get("n_devices", 8))
    n = draw(st.integers(1, 3))
    sizes, left = [], n_devices
    for _ in range(n):
        s = draw(st.sampled_from([s for s in (1, 2, 4, 8) if s <= left]))
        sizes.append(s)
        left //= s
    kind = draw(st.sampled_from(["auto", "auto", "auto", "explicit"])) if caps.get("explicit") else "auto"
    return {"axis_names": list(AXIS_NAMES[:n]), "axis_sizes": sizes, "axis_type": kind}


def spec_entries(dim: int, axes: list, sizes: dict, used=()) -> list:
    """PartitionSpec entries that may split a dim of size ``dim``: None, one axis, or two axes (major first)."""
    out = [None]
    free = [a for a in axes if a not in used]
    out += [[a] for a in free if dim % sizes[a] == 0]
    out += [[a, b] for a in free for b in free if a != b and dim % (sizes[a] * sizes[b]) == 0]
    return out


@st.composite
def partition_specs(draw, shape: tuple, axes: list, sizes: dict):
    """A spec (list of None / list of axis names per dim) whose splits divide ``shape``."""
    spec, used = [], set()
    for d in shape:
        e = draw(st.sampled_from(spec_entries(d, axes, sizes, used)))
        spec.append(e)
        used.update(e or ())
    return spec


class _Gen:
    """One program's generation state: the draw function, name counters, capabilities."""

    def __init__(self, draw, caps: dict, max_depth: int, max_eqns: int):
        self.draw = draw
        self.caps = caps
        self.max_depth = max_depth
        self.max_eqns = max_eqns
        self.n_var = 0
        self.n_param = 0
        self.n_cb = 0

    def var(self) -> str:
        self.n_var += 1
        return f"v{self.n_var}"

    def param(self) -> str:
        self.n_param += 1
        return f"a{self.n_param}"

    # ---------------------------------------------------------------- transforms
    def transform_in(self, ctx: T.Ctx, args: list, after_grad: bool, scalar_ok: bool) -> dict:
        """Draw a transform and its input-side parameters, valid for ``args`` in ``ctx``."""
        draw = self.draw
        kinds = ["jit"]
        if not after_grad:
            if any(a.rank >= 1 for a in args):
                kinds += ["vmap", "vmap"]
            free = [a for a in ctx.mesh if a not in ctx.manual]
            nested_ok = not ctx.manual or (self.caps.get("shard_map") == "jax" and not ctx.explicit)
            if free and nested_ok:
                kinds += ["shard_map", "shard_map"]
            # directly under a shard_map a rank-0 result may vary (a gradient with
            # check_vma off): no out_specs could name the axis, so only rank >= 1 there
            grad_args = [i for i, a in enumerate(args) if scalar_ok or a.rank >= 1]
            if grad_args:
                kinds.append("grad")
            if args and scalar_ok:
                kinds.append("value_and_grad")
            if args and not ctx.manual:  # seeded (co)tangents: not inside a shard_map body (fuzz.typecheck.enter)
                kinds += ["vjp", "jvp"]
        kind = draw(st.sampled_from(kinds))
        if kind == "jit":
            return {"kind": "jit"}
        if kind in ("grad", "value_and_grad"):
            pool = grad_args if kind == "grad" else list(range(len(args)))
            argnums = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=len(pool), unique=True))
            return {"kind": kind, "argnums": sorted(argnums)}
        if kind in ("vjp", "jvp"):
            return {"kind": kind, "seed": draw(st.integers(0, 255))}
        if kind == "vmap":
            cands = [(i, d) for i, a in enumerate(args) for d in range(a.rank)]
            i0, d0 = draw(st.sampled_from(cands))
            b = args[i0].shape[d0]
            in_axes = []
            for i, a in enumerate(args):
                if i == i0:
                    in_axes.append(d0)
                else:
                    in_axes.append(draw(st.sampled_from([None] + [d for d in range(a.rank) if a.shape[d] == b])))
            taken = {a.name for a in ctx.axes}
            name = draw(st.sampled_from([None] + [n for n in VMAP_AXIS_NAMES if n not in taken][:1]))
            spmd_opts = [a for a in ctx.mesh
                         if a not in ctx.manual and a not in ctx.reserved and b % ctx.mesh[a] == 0]
            spmd = draw(st.sampled_from([None] + spmd_opts))
            return {"kind": "vmap", "in_axes": in_axes, "out_axes": [], "axis_name": name, "spmd_axis_name": spmd}
        # shard_map
        free = [a for a in ctx.mesh if a not in ctx.manual]
        names = None
        partial_ok = self.caps.get("partial_manual") and (ctx.jit or "partial_manual_needs_jit" not in ctx.rules)
        if partial_ok and not ctx.explicit and len(free) > 1 and draw(st.booleans()):
            names = draw(st.lists(st.sampled_from(free), min_size=1, max_size=len(free) - 1, unique=True))
            names = [a for a in ctx.mesh if a in names]
        manual = names if names is not None else free
        usable = [a for a in manual if a not in ctx.reserved]
        in_specs = [draw(partition_specs(a.shape, usable, ctx.mesh)) for a in args]
        outer = [a.check_vma for a in ctx.axes if a.kind == "mesh"]
        # a nested shard_map keeps the enclosing one's check_vma (see fuzz.typecheck.enter)
        check = outer[0] if outer else draw(st.booleans().map(lambda b: not b))  # True (the default) first
        return {"kind": "shard_map", "in_specs": in_specs, "out_specs": [], "check_vma": check, "axis_names": names}

    def transform_out(self, t: dict, outer: T.Ctx, inner: T.Ctx, results: list) -> None:
        """Fill out_specs / out_axes once the inner results are known."""
        draw = self.draw
        if t["kind"] == "shard_map":
            mine = sorted(inner.manual - outer.manual, key=list(outer.mesh).index)
            usable = [a for a in mine if a not in inner.reserved]
            specs = []
            for r in results:
                need = [a for a in mine if a in r.vma]
                spec = [None] * r.rank
                # every axis the result varies over must be named; others may be (tiling copies)
                extra = draw(st.lists(st.sampled_from(usable), unique=True, max_size=len(usable))) if usable else []
                for a in need + [a for a in extra if a not in need]:
                    if r.rank == 0:
                        break
                    d = draw(st.integers(0, r.rank - 1))
                    spec[d] = (spec[d] or []) + [a]
                specs.append(spec)
            t["out_specs"] = specs
        elif t["kind"] == "vmap":
            name = inner.axes[-1].name
            axes = []
            for r in results:
                opts = list(range(r.rank + 1))
                # None: an unbatched result; not for a rank-0 one that varies over a manual
                # axis, which an enclosing shard_map's out_specs could not name
                if name not in r.vma and (r.rank >= 1 or not (r.vma & inner.manual)):
                    opts = opts[:1] + [None] + opts[1:]
                axes.append(draw(st.sampled_from(opts)))
            t["out_axes"] = axes

    def chain_call(self, ctx: T.Ctx, args: list, env: dict, depth: int, n: int,
                   after_grad=False, scalar_ok=True, in_grad_chain=False):
        """Draw ``n`` transforms outside-in, the function, then the output sides inside-out.

        Returns (transforms, function, result types).
        """
        if n == 0:
            fn, results = self.function(ctx, args, env, depth, want_scalar=in_grad_chain)
            return [], fn, results
        t = self.transform_in(ctx, args, after_grad, scalar_ok)
        inner_ctx, inner_args = T.enter(t, ctx, args)
        if t["kind"] == "shard_map" and ctx.explicit:
            env = {}  # no capture into shard_map over Explicit axes (see fuzz.typecheck.call_types)
        is_grad = t["kind"] in ("grad", "value_and_grad")
        rest, fn, inner_results = self.chain_call(
            inner_ctx, inner_args, env, depth + (t["kind"] != "jit"), n - 1,
            after_grad=after_grad or is_grad,
            scalar_ok=(scalar_ok and t["kind"] != "shard_map") or t["kind"] == "vmap",
            in_grad_chain=in_grad_chain or is_grad)
        self.transform_out(t, ctx, inner_ctx, inner_results)
        return [t] + rest, fn, T.exit_(t, ctx, inner_ctx, args, inner_results)

    # ---------------------------------------------------------------- functions
    def function(self, ctx: T.Ctx, param_types: list, env: dict, depth: int, want_scalar: bool):
        """A function body in ``ctx``; ``env`` maps captured names to types. Returns (fn, result types)."""
        draw = self.draw
        params = [self.param() for _ in param_types]
        local = dict(zip(params, param_types))
        eqns = []
        new_vars: list = []
        for _ in range(draw(st.integers(1, self.max_eqns))):
            visible = {**env, **local}
            order = list(reversed(new_vars)) + params + [v for v in env if v not in local]
            e, outs = self.equation(ctx, visible, order, depth)
            eqns.append(e)
            for v, t in outs:
                local[v] = t
                new_vars.append(v)
        pool = list(reversed(new_vars)) + params
        if want_scalar:
            r = draw(st.sampled_from(pool))
            if local[r].rank:
                # a plain sum (all-ones cotangent) or a seeded weighted sum (a random one)
                s = self.var()
                if draw(st.sampled_from(["sum", "wsum"])) == "sum":
                    eqns.append({"op": "sum", "args": [r], "outs": [s], "axis": None})
                else:
                    eqns.append({"op": "wsum", "args": [r], "outs": [s], "seed": draw(st.integers(0, 255))})
                local[s] = T.Ty((), local[r].vma)
                r = s
            results = [r]
        else:
            results = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2, unique=True))
            for k, r in enumerate(results):
                if local[r].rank == 0:  # rank >= 1 so that any out_specs can name a varying axis
                    s = self.var()
                    eqns.append({"op": "broadcast", "args": [r], "outs": [s], "size": 1})
                    local[s] = T.Ty((1,), local[r].vma)
                    results[k] = s
        fn = {"params": params, "eqns": eqns, "results": results}
        return fn, [local[r] for r in results]

    def equation(self, ctx: T.Ctx, visible: dict, order: list, depth: int):
        """One equation over visible variables (``order``: most recent first). Returns (eqn, [(var, Ty)])."""
        draw = self.draw
        small = [v for v in order if math.prod(visible[v].shape) * 2 <= MAX_ELEMENTS]
        kinds = ["unary", "binary", "reduce"]
        if any(visible[v].rank >= 2 for v in order):
            kinds.append("transpose")
        mm = [(a, b) for a in order for b in order
              if visible[b].rank == 2 and visible[a].rank >= 1 and visible[a].shape[-1] == visible[b].shape[0]]
        if mm:
            kinds.append("matmul")
        if any(visible[v].rank < MAX_RANK for v in small):
            kinds.append("broadcast")
        axes = ctx.collective_axes()
        if axes:
            kinds += ["collective"] * 3
        if (not ctx.manual or ctx.manual == set(ctx.mesh)) and not (  # (see fuzz.typecheck)
                ctx.in_grad and "no_callback_under_grad" in ctx.rules):
            kinds.append("io_callback")
        if depth < self.max_depth:
            kinds += ["call", "call"]
        kind = draw(st.sampled_from(kinds))
        out = self.var()

        if kind == "unary":
            a = draw(st.sampled_from(order))
            return {"op": draw(st.sampled_from(T.UNARY)), "args": [a], "outs": [out]}, [(out, visible[a])]
        if kind == "binary":
            a = draw(st.sampled_from(order))
            partners = [b for b in order if _broadcasts(visible[a].shape, visible[b].shape)]
            b = draw(st.sampled_from(partners))
            ops = [o for o in T.BINARY if not (ctx.in_grad and o in T.TIE_OPS)]
            e = {"op": draw(st.sampled_from(ops)), "args": [a, b], "outs": [out]}
            return e, [(out, T.eqn_types(e, [visible[a], visible[b]], ctx)[0])]
        if kind == "reduce":
            a = draw(st.sampled_from(order))
            ops = [o for o in T.REDUCE if not (ctx.in_grad and o in T.TIE_OPS)] + list(T.WEIGHTED)
            op = draw(st.sampled_from(ops))
            if op in T.WEIGHTED:
                e = {"op": op, "args": [a], "outs": [out], "seed": draw(st.integers(0, 255))}
            else:
                e = {"op": op, "args": [a], "outs": [out],
                     "axis": draw(st.sampled_from([None] + list(range(visible[a].rank))))}
            return e, [(out, T.eqn_types(e, [visible[a]], ctx)[0])]
        if kind == "transpose":
            a = draw(st.sampled_from([v for v in order if visible[v].rank >= 2]))
            e = {"op": "transpose", "args": [a], "outs": [out]}
            return e, [(out, T.eqn_types(e, [visible[a]], ctx)[0])]
        if kind == "matmul":
            a, b = draw(st.sampled_from(mm))
            e = {"op": "matmul", "args": [a, b], "outs": [out]}
            return e, [(out, T.eqn_types(e, [visible[a], visible[b]], ctx)[0])]
        if kind == "broadcast":
            a = draw(st.sampled_from([v for v in small if visible[v].rank < MAX_RANK]))
            e = {"op": "broadcast", "args": [a], "outs": [out], "size": draw(st.sampled_from([1, 2]))}
            return e, [(out, T.eqn_types(e, [visible[a]], ctx)[0])]
        if kind == "collective":
            return self.collective(ctx, visible, order, small, axes, out)
        if kind == "io_callback":
            a = draw(st.sampled_from(order))
            self.n_cb += 1
            can_return = not (visible[a].vma & ctx.manual)
            e = {"op": "io_callback", "args": [a], "outs": [], "tag": f"cb{self.n_cb}",
                 "ordered": draw(st.booleans()) if not ctx.in_vmap else False,
                 "returns": draw(st.booleans()) if can_return else False,
                 "stop_gradient": ctx.in_grad}
            if e["returns"]:
                e["outs"] = [out]
                return e, [(out, visible[a])]
            return e, []
        # nested call: 1-2 arguments, 1-2 transforms, the body may capture anything visible
        args = draw(st.lists(st.sampled_from(order), min_size=1, max_size=2, unique=True))
        n = draw(st.integers(1, min(2, self.max_depth - depth)))
        transforms, fn, results = self.chain_call(ctx, [visible[a] for a in args], visible, depth, n)
        outs = [out] + [self.var() for _ in results[1:]]
        e = {"op": "call", "args": args, "outs": outs, "transforms": transforms, "fn": fn}
        return e, list(zip(outs, results))

    def collective(self, ctx, visible, order, small, axes, out):
        draw = self.draw
        ops = ["psum", "pmean", "pmax", "pmin", "axis_index", "all_gather", "ppermute", "psum_scatter", "all_to_all"]
        if ctx.in_grad:
            ops = [o for o in ops if o not in T.TIE_OPS]
        # Releases with check_rep (the experimental shard_map) have no replication rule for
        # pmax/pmin and refuse a psum of a value replicated over the axis: keep clear of both.
        checked = {a.name for a in ctx.axes if a.kind == "mesh" and a.check_vma}
        old = self.caps.get("check_kw") == "check_rep" and checked
        if old:
            ops = [o for o in ops if o not in ("pmax", "pmin")]
        op = draw(st.sampled_from(ops))
        size = {a.name: a.size for a in ctx.axes}
        if op in ("psum", "pmean", "pmax", "pmin", "axis_index"):
            a = draw(st.sampled_from(order))
            names_ok = axes
            if old and op != "axis_index":
                names_ok = [n for n in axes if n in visible[a].vma or n not in checked]
                if not names_ok:
                    op, names_ok = "axis_index", axes
            names = draw(st.lists(st.sampled_from(names_ok), min_size=1, max_size=2, unique=True))
            e = {"op": op, "args": [a], "outs": [out], "axes": names}
        elif op == "ppermute":
            a = draw(st.sampled_from(order))
            name = draw(st.sampled_from(axes))
            e = {"op": op, "args": [a], "outs": [out], "axes": [name],
                 "shift": draw(st.integers(1, max(1, size[name] - 1))) % size[name]}
        elif op == "all_gather":
            name = draw(st.sampled_from(axes))
            cands = [v for v in order if math.prod(visible[v].shape) * size[name] <= MAX_ELEMENTS]
            if not cands:
                return self._psum_fallback(order, axes, out, visible, bool(old))
            a = draw(st.sampled_from(cands))
            tiled = visible[a].rank >= 1 and draw(st.booleans())
            if not tiled and visible[a].rank >= MAX_RANK:
                tiled = True
            axis = draw(st.integers(0, visible[a].rank - 1 if tiled else visible[a].rank))
            e = {"op": op, "args": [a], "outs": [out], "axes": [name], "axis": axis, "tiled": tiled}
        else:  # psum_scatter, all_to_all: need a dim divisible by the axis size
            name = draw(st.sampled_from(axes))
            n = size[name]
            cands = [(v, d) for v in order for d in range(visible[v].rank) if visible[v].shape[d] % n == 0]
            if not cands:
                return self._psum_fallback(order, axes, out, visible, bool(old))
            a, d = draw(st.sampled_from(cands))
            if op == "psum_scatter":
                e = {"op": op, "args": [a], "outs": [out], "axes": [name], "axis": d}
            else:
                c = draw(st.integers(0, visible[a].rank - 1))
                if math.prod(visible[a].shape) > MAX_ELEMENTS:
                    c = d
                e = {"op": op, "args": [a], "outs": [out], "axes": [name], "split_axis": d, "concat_axis": c}
        return e, [(out, T.eqn_types(e, [visible[a] for a in e["args"]], ctx)[0])]

    def _psum_fallback(self, order, axes, out, visible, check_rep=False):
        a = self.draw(st.sampled_from(order))
        if check_rep:  # a psum of a replicated value is refused there: axis_index is always valid
            e = {"op": "axis_index", "args": [a], "outs": [out], "axes": [axes[0]]}
            return e, [(out, T.Ty(visible[a].shape, visible[a].vma | {axes[0]}))]
        e = {"op": "psum", "args": [a], "outs": [out], "axes": [axes[0]]}
        return e, [(out, T.Ty(visible[a].shape, visible[a].vma - {axes[0]}))]


def _broadcasts(a: tuple, b: tuple) -> bool:
    try:
        T.broadcast_shapes(a, b)
    except T.ProgramError:
        return False
    return True


def chain_variants(program: dict, call: dict, caps: dict | None = None) -> list:
    """Other wrappings of a call's function that type-check on the same inputs.

    Toggling the outer jit, spmd_axis_name on a vmap, check_vma on a shard_map, and
    dropping a shard_map (the function then sees global shapes: seed-A-like pairs).
    """
    chain = call["transforms"]
    cands = []
    if chain and chain[0]["kind"] == "jit":
        cands.append(chain[1:])
    else:
        cands.append([{"kind": "jit"}] + chain)
    for i, t in enumerate(chain):
        if t["kind"] == "vmap" and t["spmd_axis_name"] is not None:
            cands.append(chain[:i] + [{**t, "spmd_axis_name": None}] + chain[i + 1:])
        if t["kind"] == "shard_map":
            cands.append(chain[:i] + chain[i + 1:])
    if any(t["kind"] == "shard_map" for t in chain):  # nested shard_maps keep one check_vma: toggle all
        cands.append([{**t, "check_vma": not t["check_vma"]} if t["kind"] == "shard_map" else t for t in chain])
    ok = []
    ctx = T.root_ctx(program, caps)
    inputs = T.input_types(program)
    fn = program["functions"][call["function"]]
    for c in cands:
        try:
            T.call_types(c, fn, ctx, [inputs[a] for a in call["args"]], inputs)
        except T.ProgramError:
            continue
        ok.append(c)
    return ok


@st.composite
def programs(draw, caps: dict = NEWEST_CAPS, max_depth: int = 4, max_eqns: int = 5, max_calls: int = 3):
    """A whole valid program (dict in the schema of ``fuzz/schemas/program.schema.json``).

    ``caps``: the worker's capabilities (``fuzz.render.NEWEST_CAPS`` by default).
    ``max_depth``: transforms on any path from a call to the innermost body.
    """
    g = _Gen(draw, caps, max_depth, max_eqns)
    mesh = draw(meshes(caps))
    sizes = dict(zip(mesh["axis_names"], mesh["axis_sizes"]))
    inputs = []
    for k in range(draw(st.integers(1, 3))):
        rank = draw(st.integers(0, 3))
        shape = [draw(st.sampled_from(DIMS)) for _ in range(rank)]
        spec = None
        if mesh["axis_type"] == "auto" and draw(st.booleans()):
            spec = draw(partition_specs(tuple(shape), mesh["axis_names"], sizes))
        inputs.append({"name": f"x{k}", "shape": shape, "dtype": "float32", "spec": spec,
                       "seed": draw(st.integers(0, 255))})
    program = {"format": "shardfuzz-program", "version": 1, "mesh": mesh, "inputs": inputs,
               "functions": {}, "calls": []}
    ctx = T.root_ctx(program, caps)
    in_types = T.input_types(program)
    n_calls = draw(st.integers(1, max_calls))
    for _ in range(n_calls):
        previous = program["calls"]
        if previous and draw(st.booleans()):
            base = draw(st.sampled_from(previous))
            variants = chain_variants(program, base, caps)
            if variants:
                program["calls"].append({**base, "transforms": draw(st.sampled_from(variants))})
                continue
        names = draw(st.lists(st.sampled_from([i["name"] for i in inputs]), min_size=1,
                              max_size=len(inputs), unique=True))
        n = draw(st.integers(0, 3))
        transforms, fn, _ = g.chain_call(ctx, [in_types[a] for a in names], dict(in_types), 0, n)
        fname = f"f{len(program['functions'])}"
        program["functions"][fname] = fn
        program["calls"].append({"function": fname, "transforms": transforms, "args": names})
    return program
