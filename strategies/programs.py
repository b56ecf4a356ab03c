"""Hypothesis strategies for meshes, PartitionSpecs, shapes and whole programs.

Programs are valid by construction: every choice is drawn from the options that the
typing rules of :mod:`fuzz.typecheck` accept in the current context (shapes, named axes in
scope, varying manual axes, divisibility), so nothing is generated and then thrown
away. Structure is drawn first (mesh, inputs, transform chain), leaves last, and every
``sampled_from`` lists the simplest option first, so shrinking moves toward small
programs: fewer axes, size-1 dims, no transforms, ``jit`` before the others.

The grammar (see ``docs/program.md``): a call applies a chain of transforms (jit,
shard_map, vmap, grad, value_and_grad, vjp, jvp, checkpoint, map, jacrev, jacfwd, cond, fori_loop,
while_loop, linearize) to a function; a
function body is a list of equations: elementwise, broadcasting, reductions (a seeded
weighted sum ``wsum`` among them, also as the loss of a grad), matmul, transpose,
collectives over any axis name in scope, io_callback (ordered or not), and nested calls whose bodies
may capture any variable of the enclosing scopes.
"""
from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from fuzz import ops as O
from fuzz import transforms as TR
from fuzz import typecheck as T
from fuzz.features import active_through, names_read
from fuzz.ops.base import FLOATS, INT, Op, Scope
from fuzz.render import NEWEST_CAPS

AXIS_NAMES = ("x", "y", "z", "w")  # real models use up to four: data, fsdp, tensor, sequence
VMAP_AXIS_NAMES = ("i", "j", "k", "l", "m")
DIMS = (1, 2, 4, 8, 16)
# Options a program may be drawn without (swarm testing, avoidance of known bugs), named as
# fuzz.features names them: an Explicit mesh, a vmap's spmd_axis_name and axis_name, a
# partial-manual shard_map, check_vma=False, a function reading an enclosing scope's variable,
# a program run with jax_enable_checks, and a collective over a vmap axis of an operand that
# vmap does not batch (see unbatched_collective; not a report feature: judged on the typed program);
# then the later ones: infer_in_specs ... set_mesh, and a ppermute over two axes (ppermute_multi_axis)
OPTIONS = ("explicit_mesh", "spmd_axis_name", "vmap_axis_name", "partial_manual", "check_vma_off", "capture",
           "enable_checks", "unbatched_collective", "infer_in_specs", "donate_argnums", "jit_inline",
           "pmap", "smap", "negative_axes", "set_mesh", "ppermute_multi_axis")
# the mission's core grammar (strategies.swarm.swarm_programs draws some programs from it alone): jit, shard_map, vmap (spmd_axis_name, axis_name),
# grad, io_callback and the collectives over elementwise, reduction and matmul ops, float32
CORE = frozenset({"jit", "shard_map", "vmap", "grad", "call", "spmd_axis_name", "vmap_axis_name", "partial_manual",
                  "check_vma_off", "capture", "enable_checks", "unbatched_collective", "io_callback", "sum", "mean", "max", "wsum",
                  "sin", "cos", "tanh", "neg", "add", "sub", "mul", "maximum", "matmul", "transpose", "broadcast",
                  "psum", "pmean", "pmax", "pmin", "axis_index", "all_gather", "ppermute", "psum_scatter",
                  "all_to_all"})
MAX_ELEMENTS = 4096
MAX_RANK = 4
RARE_KINDS = ("jac", "cond", "linearize", "loop", "scan")  # one entry of the transform draw (see _Gen.transform_in)
# results of a function body at most (the most recent sinks): eight made programs 23% larger
# (8.9 equations against 7.2: a rank-1 glue, a loss term and a conversion per extra result)
# and slower per program, for few more live equations (see _Gen.function)
MAX_SINKS = 4
JAC_MAX_ARG = 16  # elements of the argument a Jacobian is drawn for (the result has out.size * arg.size)
# the largest rank of a Jacobian's results (the schema's specs have at most 8 dims; room for two
# enclosing vmaps or maps, each adding one)
JAC_MAX_RANK = 6


@st.composite
def meshes(draw, caps: dict = NEWEST_CAPS, n_devices: int | None = None, set_mesh: bool = True):
    """A mesh record: 1-4 axes named x, y, z, w, sizes in {1, 2, 4, 8} with product <= n_devices.

    ``n_devices`` defaults to the worker's (``caps["n_devices"]``), at most 8. Axis type
    "explicit" only where ``caps["explicit"]``. An Auto mesh has ``set_mesh`` (its calls run
    under ``jax.set_mesh(mesh)``, as an Explicit mesh's do: JAX's recommended way to give a
    program its mesh, and the context mesh ``jax.smap`` and a shard_map without ``mesh``
    take) one time in two where the release has it and ``set_mesh``.
    """
    n_devices = n_devices or min(8, caps.get("n_devices", 8))
    n = draw(st.integers(1, 4))
    sizes, left = [], n_devices
    for _ in range(n):
        s = draw(st.sampled_from([s for s in (1, 2, 4, 8) if s <= left]))
        sizes.append(s)
        left //= s
    kind = draw(st.sampled_from(["auto", "auto", "auto", "explicit"])) if caps.get("explicit") else "auto"
    m = {"axis_names": list(AXIS_NAMES[:n]), "axis_sizes": sizes, "axis_type": kind}
    if (kind == "auto" and set_mesh and T.NO_SET_MESH not in T.release_rules(caps)
            and draw(st.booleans())):
        m["set_mesh"] = True
    return m


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
    """One program's generation state: the draw function, name counters, capabilities, disabled names."""

    def __init__(self, draw, caps: dict, max_depth: int, max_eqns: int, disabled: frozenset = frozenset()):
        self.draw = draw
        self.caps = caps
        self.max_depth = max_depth
        self.max_eqns = max_eqns
        self.disabled = disabled
        self.n_var = 0
        self.n_param = 0
        self.n_cb = 0
        self.nest = 0  # nested calls around the body being drawn
        # the variables a derivative reaches (program-wide; variable names are unique): the
        # differentiated parameters and what is computed from them, as automatic
        # differentiation calls them active (see function())
        self.active: set = set()
        # Jacobians replaced by a jit after their body was drawn (see chain_call): that body was
        # drawn as a differentiated one, its picks among values the final program does not
        # differentiate (tests/test_derivatives.py counts them apart)
        self.replaced_jacobians = 0
        self.focus: tuple = ()  # the ops this program favours, in registry order (see programs())
        self.committed: list = []  # the input spec (or None) of each argument of the call being drawn
        # ops that make a grad's loss (sum first: shrinking goes there) and ops that make a
        # rank-0 result rank 1 (Op.as_loss, Op.as_rank1), in registry order, not disabled
        self.losses = [op for op in O.REGISTRY.values() if _defines(op, "as_loss") and op.name not in disabled]
        self.glues = [op for op in O.REGISTRY.values() if _defines(op, "as_rank1") and op.name not in disabled]
        # ops that add two scalar losses (Op.as_sum): a grad's loss over several results
        self.adders = [op for op in O.REGISTRY.values() if _defines(op, "as_sum") and op.name not in disabled]
        # ops that multiply two scalar losses (Op.as_product): a term the arguments do not reach scales one they do
        self.scalers = [op for op in O.REGISTRY.values() if _defines(op, "as_product") and op.name not in disabled]
        # ops that make a scalar loss vary over named axes (Op.as_varying): see _Gen.vary_loss
        self.indexers = [op for op in O.REGISTRY.values() if _defines(op, "as_varying") and op.name not in disabled]
        # ops that annotate a value as split along a dim (Op.as_constraint): around an op that
        # moves data along a dim (Op.along), see _Gen.annotate
        self.annotators = [op for op in O.REGISTRY.values() if _defines(op, "as_constraint") and op.name not in disabled]
        self.drawn_op = None  # the op of the equation equation() drew last (None: a nested call)
        self.drawn_eqn = None  # ... and its equation (reading the annotated operand, see annotate)
        # some glue is valid everywhere: a call's arguments need not be safe values (see _safe)
        self.glue_always = any(op.grad_ok and op.explicit_ok for op in self.glues)
        # ops that convert a value of another dtype to float32 (Op.as_float32): see function
        self.floaters = [op for op in O.REGISTRY.values() if _defines(op, "as_float32") and op.name not in disabled]

    def var(self) -> str:
        self.n_var += 1
        return f"v{self.n_var}"

    def param(self) -> str:
        self.n_param += 1
        return f"a{self.n_param}"

    def tag(self) -> str:
        self.n_cb += 1
        return f"cb{self.n_cb}"

    # ---------------------------------------------------------------- transforms
    def transform_in(self, ctx: T.Ctx, args: list, after_grad: bool, scalar_ok: bool) -> dict | None:
        """Draw a transform and its input-side parameters, valid for ``args`` in ``ctx`` (None: none is allowed)."""
        draw = self.draw
        kinds = ["jit"]
        floats = [a.dtype == T.FLOAT for a in args]
        grad_args = []  # (drawn below where a grad may sit)
        if not after_grad:
            # (no vmap over an empty dim: a size-0 named axis.) vmap is of the mission's core as
            # shard_map is, three entries: with two, as the grammar grew, a named vmap was in 11%
            # of the programs and the batching rules of the collectives over its axis, which the
            # seeded-bug benchmark's batching mutants live in, in 6% (1000 programs, seed 0)
            if any(d > 0 for a in args for d in a.shape):
                kinds += ["vmap"] * 3
            if any(a.rank >= 1 and a.shape[0] > 0 for a in args):  # lax.map / lax.scan: over a leading dim, not empty
                kinds += ["map", "scan"]
            free = [a for a in ctx.mesh if a not in ctx.manual]
            nested_ok = not ctx.manual or (self.caps.get("shard_map") == "jax" and not ctx.explicit)
            if free and nested_ok and not {T.AUTO_BODY, T.PMAP_BODY} & ctx.rules:  # the mission's core: three entries (the rare kinds share one)
                kinds += ["shard_map"] * 3
            # directly under a shard_map a rank-0 result may vary (a gradient with
            # check_vma off): no out_specs could name the axis, so only rank >= 1 there
            grad_args = [i for i, a in enumerate(args) if floats[i] and (scalar_ok or a.rank >= 1)]
            if grad_args and self.losses:
                kinds.append("grad")
            if any(floats) and scalar_ok and self.losses:
                kinds.append("value_and_grad")
            # seeded (co)tangents: not inside a shard_map body (fuzz.typecheck.enter), float arguments only
            if args and all(floats) and not ctx.manual:
                kinds += ["vjp", "jvp"]
        # the identity on types, so also inside a grad's chain. Hypothesis favours the first
        # entries of a sampled_from: the new kinds come late (measured over 300 derandomized
        # programs: a checkpoint in 67, a map in 42; shard_map 123 -> 98, vmap 90 -> 98)
        kinds.append("checkpoint")
        # jax.sharding.auto_axes: an Explicit mesh's axes made Auto for the body (fuzz.typecheck.enter)
        if ctx.explicit and not ctx.manual and "no_auto_axes" not in ctx.rules:
            kinds.append("auto_axes")
        # the control-flow and Jacobian kinds come after it (shrinking moves away from them), one
        # entry per family: a Jacobian w.r.t. one small float argument (its size bounds the result)
        jac_args = [i for i, a in enumerate(args) if floats[i] and (scalar_ok or a.rank >= 1) and a.size <= JAC_MAX_ARG]
        families = {"jac": self.family("jac", ctx)}
        if not after_grad and jac_args:
            kinds.append("jac")
        # lax.cond keeps its body's types (so also in a grad's chain); its predicate (from the
        # first argument) may not vary over a checked manual axis (fuzz.typecheck.enter); where
        # a rank-0 result may not vary (scalar_ok false) it may not vary over a manual axis either
        if args and not args[0].vma & T.checked_axes(ctx) and (scalar_ok or not args[0].vma & ctx.manual) \
                and T.transform_refusal("cond", ctx) is None:
            kinds.append("cond")
        # jvp's values through jax.linearize: where jvp is drawn (fuzz.typecheck.enter)
        if not after_grad and args and all(floats) and not ctx.manual:
            kinds.append("linearize")
        # loops keep their body's types too; no while_loop under reverse mode (fuzz.typecheck.enter)
        families["loop"] = self.family("loop", ctx)
        kinds.append("loop")
        kinds = [k for k in kinds if k not in self.disabled and families.get(k, True)
                 and f"no_api:transform:{k}" not in ctx.rules]  # (an API this JAX lacks: fuzz.typecheck.api_rules)
        # an argument split in its sharding type enters only the transforms that keep sharding
        # types, and shard_map (fuzz.typecheck.split_refusal; "jac" and "loop" stand for families
        # none of whose kinds keeps them)
        kinds = [k for k in kinds if T.split_refusal(k, ctx, args) is None]
        # the Jacobian, cond, linearize, loop and scan kinds share one entry: each costs several
        # times a plain program (JAX compiles a Jacobian's batched pullback, the reference
        # runs it op by op, each op compiled), and as four entries they took the draws of
        # the core kinds: programs/s fell by a quarter and shard_map went from 38% of the
        # programs to 27% (measured side by side on jax 0.10.2, 300 programs / 240 s). Two
        # entries were right while Hypothesis' mutants held programs near the simplest; drawn
        # afresh (strategies.fresh), one entry gave more distinct signatures on 3 seeds of 3
        # and x1.12 programs/s (2026-12-06@b554ed7, benchmarks/campaigns.py revs, docs/measurements.md)
        rare = [k for k in kinds if k in RARE_KINDS]
        if rare:
            kinds = [k for k in kinds if k not in RARE_KINDS] + ["rare"]
        if not kinds:
            return None
        kind = draw(st.sampled_from(kinds))
        if kind == "rare":
            kind = draw(st.sampled_from(rare))
        if kind in families:
            kind = draw(st.sampled_from(families[kind]))
        pools = {"floats": floats, "grad_args": grad_args, "jac_args": jac_args}
        return TR.REGISTRY[kind].draw(self, ctx, args, pools)

    def family(self, name: str, ctx: T.Ctx) -> list:
        """The kinds of the transform registry's draw family ``name`` ("jac", "loop": one entry of
        the draw) that are enabled and that ``ctx`` allows (fuzz.typecheck.transform_refusal)."""
        return [k for k, tr in TR.REGISTRY.items()
                if tr.draw_family == name and k not in self.disabled and T.transform_refusal(k, ctx) is None]

    def jit_in(self, ctx: T.Ctx, args: list) -> dict:
        """A jit, three in five with in_shardings and/or out_shardings where the typing rules
        allow them (fuzz.typecheck._jit_shardings; none first, so that shrinking drops them).

        An argument of a program's call (``ctx.top``) that is an input committed to a spec
        gets that spec (JAX raises for another); traced arguments (inside a jit) any spec.
        """
        draw = self.draw
        t = {"kind": "jit"}
        # a traced jit (not a program call's first transform) is inlined into the enclosing
        # trace one time in four (jax.jit's inline=True: no pjit equation, so the transforms
        # around it meet its body's equations instead of pjit's own rules)
        if not ctx.top and "jit_inline" not in self.disabled and draw(st.integers(0, 3)) == 3:
            t["inline"] = True
        if T.shardings_refusal(ctx):
            return t
        mode = draw(st.sampled_from([None, None, "out", "in", "in+out"]))
        if mode is None:
            return t
        if "in" in mode and (ctx.jit or ctx.top):
            axes = [a for a in ctx.mesh if a not in ctx.reserved]
            t["in_specs"] = [self.committed[i] if ctx.top and self.committed[i] is not None
                             else draw(partition_specs(a.shape, axes, ctx.mesh)) for i, a in enumerate(args)]
        if "out" in mode:
            t["out_specs"] = []  # drawn once the results are known (transform_out)
        return t

    def transform_out(self, t: dict, outer: T.Ctx, inner: T.Ctx, results: list, inner_args: list) -> None:
        """Fill out_specs / out_axes / a scan's carry once the inner results are known."""
        TR.REGISTRY[t["kind"]].draw_out(self, t, outer, inner, results, inner_args)

    def chain_call(self, ctx: T.Ctx, args: list, env: dict, depth: int, n: int,
                   after_grad=False, scalar_ok=True, in_grad_chain=False, scan_body=None, jit_first=False,
                   differentiated=False, active=None):
        """Draw ``n`` transforms outside-in, the function, then the output sides inside-out.

        ``jit_first``: the first of the ``n`` is a jit. ``active``: per argument, whether a
        derivative taken outside reaches it (default: none does); a derivative in the chain
        makes its argnums active (all arguments for jvp / vjp / linearize), every other
        transform passes its arguments through in order. Returns (transforms, function, result types).
        """
        active = list(active) if active is not None else [False] * len(args)
        if n > 0:
            t = self.jit_in(ctx, args) if jit_first else self.transform_in(ctx, args, after_grad, scalar_ok)
        else:
            t = None
        if t is None:
            fn, results = self.function(ctx, args, env, depth, want_scalar=in_grad_chain, scan_body=scan_body,
                                        differentiated=differentiated, active=active)
            return [], fn, results
        inner_ctx, inner_args = T.enter(t, ctx, args)
        active = active_through(t, active)
        if T.sealed(t, ctx):
            env = {}  # no capture into shard_map or auto_axes on an Explicit mesh (fuzz.typecheck.sealed)
        is_grad = t["kind"] in ("grad", "value_and_grad")
        tr = TR.REGISTRY[t["kind"]]
        added = tr.added_rank(t, args)  # (a Jacobian's: its argument's dims follow each result's)
        rest, fn, inner_results = self.chain_call(
            inner_ctx, inner_args, env, depth + (t["kind"] != "jit"), n - 1,
            after_grad=after_grad or is_grad,
            scalar_ok=(scalar_ok and t["kind"] != "shard_map") or t["kind"] in ("vmap", "map", "scan")
            or (added is not None and added >= 1),
            in_grad_chain=in_grad_chain or is_grad,
            differentiated=differentiated or tr.differentiates, active=active,
            scan_body=[a for a, ax in zip(inner_args, t["in_axes"]) if ax is None] if t["kind"] == "scan" else None)
        if added is not None and max((r.rank for r in inner_results), default=0) + added > JAC_MAX_RANK:
            # a Jacobian adds its argument's dims to every result: nested ones (a Hessian of a
            # Jacobian) passed the schema's 8 dims of a spec (a campaign's test drew
            # jacrev(jit(jacrev(jacrev(f)))) with results of rank 9); a jit, which keeps the
            # body's types and refuses nothing a Jacobian's body may hold, takes its place
            t = {"kind": "jit"}
            self.replaced_jacobians += 1
            inner_ctx, inner_args = T.enter(t, ctx, args)
        self.transform_out(t, ctx, inner_ctx, inner_results, inner_args)
        return [t] + rest, fn, T.exit_(t, ctx, inner_ctx, args, inner_results)

    # ---------------------------------------------------------------- functions
    def function(self, ctx: T.Ctx, param_types: list, env: dict, depth: int, want_scalar: bool, scan_body=None,
                 differentiated: bool = False, active=None):
        """A function body in ``ctx``; ``env`` maps captured names to types. Returns (fn, result types).

        ``scan_body`` (the body of a scan, no transform in between): the types the scan may
        carry (its arguments not scanned over). For each that no result has, a value of
        that type, if any, is added as a result (otherwise a scan could rarely carry
        anything: measured, 2 scans with a carry in 1000 drawn programs). A scan stacks its
        body's results, so any value is a safe result there (see :func:`_safe`).

        ``differentiated``: the body of a function a derivative is taken of (a grad, vjp,
        jvp, linearize or Jacobian in the chain above it). Half of the time its first
        equation is a nested call, on its most recent value half of the time (the first
        parameter): a loss applies a model to its parameters, so the derivative goes
        through the model's transforms (grad through a shard_map, a vmap, a loop), where
        reverse mode transposes their rules. Without it, a call that the parameters reach
        was one equation of many: measured over 1000 drawn programs (seed 1, jax 0.4.28's
        capabilities), a reverse-mode derivative went through a shard_map in 12, and seed
        B (benchmarks/rediscover.py) showed in 7 of 30 such programs.

        ``active``: per parameter, whether a derivative reaches it (see chain_call). Under a
        derivative the operands are drawn 3 times in 4 among the *active* values (Scope.local,
        Scope.pick): those parameters, the active values captured, and what the body computes
        from them except through a stop_gradient. Drawn among the body's own values instead, ops
        often read values computed from captured constants only (a captured input through a
        vmap argument, a constant through a nested call's parameter), which the derivative never
        reaches: their transpose rules never run. Of 9 drawn programs with a seeded wrong
        transpose of psum_scatter (benchmarks/seeded.py --hit-rate, 2026-12-06@a5cb656), 4 of the 6
        silent ones scattered such a constant.

        At least one parameter is float32 (the caller's duty), so a float result always exists.
        """
        draw = self.draw
        if T.OPAQUE in ctx.rules:  # no value split in its sharding type is read here (fuzz.typecheck.enter)
            env = {k: t for k, t in env.items() if not t.sharded}
        ctx = replace(ctx, top=False) if ctx.top else ctx  # (see fuzz.typecheck.function_types)
        if "capture" in self.disabled:
            env = {}  # the body reads its parameters only
        params = [self.param() for _ in param_types]
        local = dict(zip(params, param_types))
        act = {p for p, a in zip(params, active or ()) if a} | (set(env) & self.active)
        self.active |= act
        eqns = []
        new_vars: list = []
        last = last_eqn = None  # the op of the equation just drawn and its equation (None after a nested call)
        call_first = differentiated and draw(st.booleans())
        for k in range(draw(st.integers(1, self.max_eqns))):
            visible = {**env, **local}
            order = list(reversed(new_vars)) + params + [v for v in env if v not in local]
            drawn = self.equation(ctx, visible, order, depth, last, call_first=call_first and k == 0,
                                  local=frozenset(act) if ctx.in_grad else None, last_eqn=last_eqn)
            if not drawn:
                break  # nothing this program may draw applies here: the identity path
            for e, outs in drawn:
                eqns.append(e)
                reached = e.get("stop_gradient") is not True and bool(names_read([e]) & act)
                for v, t in outs:
                    local[v] = t
                    new_vars.append(v)
                    if reached:
                        act.add(v)
                        self.active.add(v)
            last, last_eqn = self.drawn_op, self.drawn_eqn  # (not an annotation put after it: see annotate)
        # results are the values nothing here reads yet (the sinks), the MAX_SINKS most recent,
        # so that every equation feeds a result: dead code hides the bugs of the values it
        # computes (mutants of the seeded-bug benchmark stayed silent that way). A sink of
        # another dtype (bfloat16, int32, bool...) goes back to float32 first, as function
        # results are float32. Up to three sinks, and one time in four one or two drawn, left
        # 38% of the collectives and 27% of all ops dead (68% of the conversions, 85% of
        # argmax / argmin); now 8% and 4% (benchmarks/seeded.py live_equations over 2000
        # drawn programs, seed 1, jax 0.10.2's capabilities)
        read = names_read(eqns)
        for v in [v for v in new_vars if local[v].dtype != T.FLOAT and v not in read]:
            got = self.as_float32(ctx, v, local[v])
            if got is not None:
                e, ty = got
                eqns.append(e)
                read.add(v)
                local[e["outs"][0]] = ty
                new_vars.append(e["outs"][0])
        pool = [v for v in list(reversed(new_vars)) + params if local[v].dtype == T.FLOAT]
        # a value varying over a manual axis that an enclosing vmap's spmd_axis_name takes
        # cannot leave that axis' shard_map (no out_specs entry may name the axis): e.g. a
        # pure_callback's result, which varies over every manual axis. The body's own
        # parameters never do, so the enclosing shard_map body always has a result.
        pool = [v for v in pool if not local[v].vma & ctx.manual & ctx.reserved] or pool

        def sinks(vs: list) -> list:
            return [v for v in vs if v not in read] or vs

        if want_scalar:
            if not self.losses:
                pool = [v for v in pool if local[v].rank == 0] or pool
            cands = sinks(pool)
            if self.adders and len(cands) > 1:
                chosen = cands[:MAX_SINKS]  # the sinks reach the loss: no dead code under grad
            else:
                chosen = [draw(st.sampled_from(cands))]
            # the float values the parameters reach (not through a stop_gradient): a loss term
            # of the others (captured values only) is a constant under grad; added to the
            # loss, its value cannot reach the gradient (a ppermute mutant stayed silent so).
            # Such a term c joins a reached one d as d + d * c: the gradient is scaled by
            # 1 + c (d * c alone would erase it where c is 0). A conservative structural
            # rule: a grad over some of the parameters only still counts the others.
            reached = {p for p, t in zip(params, param_types) if t.dtype == T.FLOAT}
            for e in eqns:
                if e.get("stop_gradient") is not True and names_read([e]) & reached:
                    reached.update(o for o in e["outs"] if local[o].dtype in FLOATS)
            total = None
            for r in chosen:
                on_params = r in reached
                if local[r].rank:
                    # e.g. a plain sum (all-ones cotangent) or a seeded weighted sum (a random one)
                    s = self.var()
                    e = self.loss_op(draw).as_loss(draw, r, s)
                    eqns.append(e)
                    (local[s],) = T.eqn_types(e, [local[r]], ctx)
                    r = s
                if total is not None:  # the losses of the sinks added up (or scaled, see above)
                    a = total
                    if self.scalers and on_params != (total in reached):
                        a, c = (r, total) if on_params else (total, r)
                        s = self.var()
                        e = self.scalers[0].as_product(a, c, s)
                        eqns.append(e)
                        (local[s],) = T.eqn_types(e, [local[a], local[c]], ctx)
                        r = s
                    s = self.var()
                    e = self.adders[0].as_sum(a, r, s)
                    eqns.append(e)
                    (local[s],) = T.eqn_types(e, [local[a], local[r]], ctx)
                    r = s
                if on_params or total in reached:
                    reached.add(r)
                total = r
            results = [self.vary_loss(draw, ctx, total, local, eqns)]
        else:
            glue = self.glue(ctx)
            if glue is None and scan_body is None:  # no rank-0 result can be made rank 1 here: only safe ones
                # (none when every glue op is disabled and a nested call inside a shard_map body
                # got an unsafe argument: its results go back to that body, where they may be)
                pool = [v for v in pool if _safe(local[v], ctx)] or pool
            cands = sinks(pool)
            if len(cands) > 1:
                results = cands[:MAX_SINKS]  # the sinks are results: no dead code
            else:
                results = draw(st.lists(st.sampled_from(cands), min_size=1, max_size=2, unique=True))
            for k, r in enumerate(results):
                if local[r].rank == 0 and glue is not None:  # rank >= 1: any out_specs can name a varying axis
                    s = self.var()
                    e = glue.as_rank1(r, s)
                    eqns.append(e)
                    (local[s],) = T.eqn_types(e, [local[r]], ctx)
                    results[k] = s
            for want in scan_body or ():  # (a scan stacks its body's results: a rank-0 one may stay rank 0)
                fit = [v for v in list(reversed(new_vars)) + params
                       if local[v].dtype == T.FLOAT and T.carry_fits(want, local[v], ctx)]
                if fit and not any(T.carry_fits(want, local[r], ctx) for r in results):
                    results.append(fit[0])
        fn = {"params": params, "eqns": eqns, "results": results}
        return fn, [local[r] for r in results]

    def loss_op(self, draw):
        """The op making a loss term (one of ``self.losses``): 3 times in 4 one whose loss is a
        random linear functional (Op.random_loss) when both kinds are enabled, else any (the
        first, a plain sum, is where shrinking goes).

        A plain sum sends an all-ones cotangent back: a transpose rule that permutes it the
        wrong way gives the right gradient. Of 5 programs with a ppermute transposed the wrong
        way (a seeded mutant) none showed it, 2 of them because the permuted value was summed
        plainly (jax.test_util.check_grads uses random cotangents for this reason).
        """
        weighted = [op for op in self.losses if op.random_loss]
        if weighted and len(weighted) < len(self.losses) and draw(st.integers(0, 3)) > 0:
            return draw(st.sampled_from(weighted))
        return draw(st.sampled_from(self.losses))

    def vary_loss(self, draw, ctx: T.Ctx, r: str, local: dict, eqns: list) -> str:
        """The scalar loss ``r``, or 3 times in 4 where named axes of size >= 2 are usable here,
        ``r * (r + index)`` with the linear index over all of them (Op.as_varying, then
        Op.as_product), appended to ``eqns``; returns the variable of the loss.

        The weights of a loss (and the cotangent seeded at it) are the same on every device of
        a shard_map body and every example of a vmap, so the cotangent reaching a collective
        over that axis is uniform along it unless a varying value multiplies it afterwards: a
        transpose rule that permutes it the wrong way gives the right gradient. A seeded mutant
        of ppermute's transpose stayed silent so in 6 of 6 programs that drew it (2026-12-03@1a9d34a),
        and in 6 of 6 again when each loss term was scaled so over one drawn axis (a term left
        plain, or the index over another axis than the permuted one): hence the whole loss,
        and every axis (the linear index varies along each).
        """
        if not (self.indexers and self.scalers) or T.context_refusal(self.indexers[0], ctx):
            return r
        axes = [n for n in ctx.collective_axes() if ctx.axis(n).size >= 2]
        if not axes or draw(st.integers(0, 3)) == 0:
            return r
        s, t = self.var(), self.var()
        e = self.indexers[0].as_varying(r, s, axes[:4])
        f = self.scalers[0].as_product(r, s, t)
        try:
            (local[s],) = T.eqn_types(e, [local[r]], ctx)
            (local[t],) = T.eqn_types(f, [local[r], local[s]], ctx)
        except T.ProgramError:
            local.pop(s, None)
            return r
        eqns += [e, f]
        return t

    def as_float32(self, ctx: T.Ctx, v: str, ty: T.Ty):
        """(equation, type) converting ``v`` to float32 by the first op that may here
        (Op.as_float32), or None."""
        for op in self.floaters:
            if T.context_refusal(op, ctx):
                continue
            e = op.as_float32(v, self.var())
            try:
                (out,) = T.eqn_types(e, [ty], ctx)
            except T.ProgramError:
                continue
            return e, out
        return None

    def glue(self, ctx: T.Ctx):
        """The first op that may make a rank-0 value rank 1 here (Op.as_rank1), or None."""
        for op in self.glues:
            try:
                T.eqn_types(op.as_rank1("a", "b"), [T.Ty(())], ctx)
            except T.ProgramError:
                continue
            return op
        return None

    def equation(self, ctx: T.Ctx, visible: dict, order: list, depth: int, last=None, call_first=False,
                 local: frozenset | None = None, last_eqn: dict | None = None) -> list:
        """Equations over visible variables (``order``: most recent first): [(eqn, [(var, Ty)])].

        Usually one (an op may put a prelude first, e.g. a start index); [] when no op or
        nested call this program may draw applies here. A family is drawn by its weight
        (fuzz.ops.FAMILY_WEIGHTS), then an op of it; an op whose draw is not applicable
        here (None) is dropped and another drawn.

        ``last``: the op of the equation just drawn. One time in four it is drawn again on
        the value it just made (``Scope.chained``): the chains real code writes, such as
        ``x.at[a:b].set(u).at[i].set(c)``, ``x[1:][:, :2]``, ``cumsum(cumsum(x))``, where
        one op's sharding rule meets its own output (otherwise a chain of one op is
        about one equation pair in 2,000, the op's share squared).

        ``last_eqn``: that op's equation. One time in eight a *twin* of it is drawn instead:
        another op of its family with the same parameters (:func:`twins`) on the same operands,
        as real code computes a sum and a max pooling, or a sin and a cos, of one value. A
        compiler keys what it shares between ops (a common subexpression, the SPMD
        partitioner's padded halo of a windowed op) by the ops' parameters, and two ops that
        agree in all but one are where such a key can be too coarse (a reduce_window_sum and
        a reduce_window_max of one split operand share one padded halo: corpus/differential-d2dab0ade064.json).

        ``call_first``: a nested call where one may be drawn (see :meth:`function`).
        ``local``: under a derivative, the function's own values (``Scope.local``, see Scope.pick).
        """
        draw = self.draw
        scope = Scope(visible, order, self.caps, self.disabled, self.var, self.tag,
                      lambda e: T.eqn_types(e, [scope.visible[a] for a in e["args"]], ctx), MAX_ELEMENTS, MAX_RANK)
        scope.local = local
        if last_eqn is not None and draw(st.integers(0, 7)) == 7:
            sibs = [op for op in twins(last) if op.name not in self.disabled and not T.context_refusal(op, ctx)]
            if sibs:
                op = draw(st.sampled_from(sibs))
                e = {**last_eqn, "op": op.name, "outs": [self.var() for _ in last_eqn["outs"]]}
                if scope.valid(e) and not self._refused(op, [e], ctx, scope.visible):
                    self.drawn_op, self.drawn_eqn = op, e
                    return self._typed([e], ctx, scope.visible)
        if last is not None and last.name not in self.disabled and not T.context_refusal(last, ctx) \
                and draw(st.integers(0, 3)) == 3:
            scope.chained = True
            got = last.draw(draw, ctx, scope)
            scope.chained = False
            typed = self._use(last, got, ctx, scope)
            if typed:
                return typed
        families = {}
        for op in O.REGISTRY.values():
            if op.name in self.disabled or T.context_refusal(op, ctx):
                continue
            families.setdefault(op.family, []).append(op)
        if depth < self.max_depth and self.nest < self.max_depth and "call" not in self.disabled and scope.floats():
            if call_first:
                return [self._call(ctx, scope, depth)]
            families["call"] = None
        # collectives 3 times their weight where an axis of size >= 2 is in scope (a shard_map
        # or named vmap body): the only places they can be drawn at all
        boost = 3 if any(ctx.axis(n).size >= 2 for n in ctx.collective_axes()) else 1
        # half of the op equations first try one of the program's focus ops that applies here
        # (nested calls keep their weight: the transforms' compositions stay as frequent)
        focused = [op for op in self.focus if op in families.get(op.family, ())]
        weighted = [f for f, w in O.FAMILY_WEIGHTS.items() if f in families
                    for _ in range(w * (boost if f == "collective" else 1))]
        while weighted:
            fam = draw(st.sampled_from(weighted))
            if fam == "call":
                return [self._call(ctx, scope, depth)]
            if focused and draw(st.booleans()):
                op = draw(st.sampled_from(focused))
                typed = self._use(op, op.draw(draw, ctx, scope), ctx, scope)
                if typed:
                    return typed
            ops = families[fam]
            while ops:
                op = draw(st.sampled_from(ops))
                typed = self._use(op, op.draw(draw, ctx, scope), ctx, scope)
                if typed:
                    return typed
                ops = [o for o in ops if o is not op]
            weighted = [f for f in weighted if f != fam]
        return []

    def _call(self, ctx: T.Ctx, scope: Scope, depth: int):
        """A nested call (:meth:`nested_call`); after it, no op is the one just drawn (its body's
        equations set ``drawn_op`` while they are drawn)."""
        e = self.nested_call(ctx, scope, depth)
        self.drawn_op = self.drawn_eqn = None
        return e

    def _use(self, op, got, ctx: T.Ctx, scope: Scope) -> list | None:
        """The typed, annotated equations of ``op``'s draw ``got`` (:meth:`_drawn`), or None when
        it did not apply (None) or breaks an option this program is drawn without (:meth:`_refused`)."""
        if got is None:
            return None
        eqns = got if isinstance(got, list) else [got]
        if ctx.explicit and not ctx.manual:
            # an op's draw is valid by shapes and dtypes; on an Explicit mesh the operands'
            # sharding types may still refuse it (Op.sharding_types): then it does not apply
            try:
                self._typed(eqns, ctx, scope.visible)
            except T.ProgramError:
                return None
        return None if self._refused(op, eqns, ctx, scope.visible) else self._drawn(op, eqns, ctx, scope)

    def _refused(self, op, eqns: list, ctx: T.Ctx, visible: dict) -> bool:
        """Whether ``eqns`` (an op's draw, its equation last) break an option this program is drawn
        without: with "unbatched_collective" left out, a collective over a vmap axis its operand
        does not vary over (:func:`unbatched_collective`)."""
        if "unbatched_collective" not in self.disabled or op.family != "collective":
            return False
        seen = self._before(eqns, ctx, visible)
        return unbatched_collective(eqns[-1], [seen[a] for a in eqns[-1]["args"]], ctx)

    def _before(self, eqns: list, ctx: T.Ctx, visible: dict) -> dict:
        """{variable: Ty} the last of ``eqns`` may read: ``visible`` and what the others make."""
        seen = dict(visible)
        for _, outs in self._typed(eqns[:-1], ctx, visible):
            seen.update(outs)
        return seen

    def _drawn(self, op, eqns: list, ctx: T.Ctx, scope: Scope) -> list:
        """The typed equations of ``op``'s draw (its equation last), annotated (:meth:`annotate`)."""
        self.drawn_op = op
        eqns = self.annotate(op, eqns, ctx, scope)
        self.drawn_eqn = [e for e in eqns if e["op"] == op.name][-1]
        return self._typed(eqns, ctx, scope.visible)

    def annotate(self, op, eqns: list, ctx: T.Ctx, scope: Scope) -> list:
        """``eqns`` (an op's draw, the op's equation last), half of the time with a sharding
        annotation that splits the dim the op moves data along (:meth:`Op.along`) over mesh
        axes: on its operand before it or on its result after it.

        XLA's SPMD partitioner has a rule of its own for each op along a split dim (a slice
        or pad needs halos, a cumsum a windowed exchange, a dynamic slice a global start, an
        .at[] update its scatter), and an op's dim is split only when the program happens
        to split it: measured over 2000 drawn programs (seed 0, jax 0.10.2), a sharding
        annotation on the dim of a dynamic_slice 0 times, two chained .at[] updates under
        jit once. Outside shard_map bodies: on Auto meshes a with_sharding_constraint or
        device_put, on Explicit meshes a one-way reshard (``reshard_split``, where sharding types
        are tracked); no annotation first, so that shrinking drops it.
        """
        main = eqns[-1]
        d_in, d_out = op.along(main)
        if (d_in is None and d_out is None) or not self.annotators or ctx.manual:
            return eqns
        where = self.draw(st.sampled_from([None, None, "before", "after"]))
        if where is None:
            return eqns
        usable = [a for a in self.annotators if T.context_refusal(a, ctx) is None and a.applies(ctx)]
        if not usable:
            return eqns
        ann = self.draw(st.sampled_from(usable))
        seen = self._before(eqns, ctx, scope.visible)
        if where == "before":
            if d_in is None:  # (an op that makes its result's dim, as a random draw: after it only)
                return eqns
            a = main["args"][0]
            e = ann.as_constraint(self.draw, ctx, a, seen[a], d_in, self.var())
            if e is None:
                return eqns
            got = eqns[:-1] + [e, {**main, "args": [e["outs"][0]] + main["args"][1:]}]
            if ctx.explicit:  # the op's sharding rule may refuse its split operand (Op.sharding_types)
                try:
                    self._typed(got, ctx, scope.visible)
                except T.ProgramError:
                    return eqns
            return got
        if d_out is None:
            return eqns
        (out_ty, *_) = T.eqn_types(main, [seen[a] for a in main["args"]], ctx)
        e = ann.as_constraint(self.draw, ctx, main["outs"][0], out_ty, d_out, self.var())
        return eqns if e is None else eqns + [e]

    def _typed(self, eqns: list, ctx: T.Ctx, visible: dict) -> list:
        """[(eqn, [(var, Ty)])] for equations drawn in a row (each may read the ones before)."""
        seen = dict(visible)
        out = []
        for e in eqns:
            types = T.eqn_types(e, [seen[a] for a in e["args"]], ctx)
            seen.update(zip(e["outs"], types))
            out.append((e, list(zip(e["outs"], types))))
        return out

    def nested_call(self, ctx: T.Ctx, scope: Scope, depth: int):
        """A call of a nested function: 1-2 arguments (the first float32), 1-2 transforms; the body
        may capture anything visible."""
        draw = self.draw
        visible = scope.visible
        floats = scope.floats()
        if not self.glue_always:  # arguments are safe values, so the body has a safe result (see _safe)
            floats = [v for v in floats if _safe(visible[v], ctx)] or floats
        first = scope.pick(draw, floats)  # (the most recent value half of the time, as an op's operand)
        others = [v for v in scope.order if v != first and (self.glue_always or _safe(visible[v], ctx))]
        args = [first] + _some(draw, others, 1)
        n = draw(st.integers(1, min(2, self.max_depth - depth)))
        self.nest += 1  # (a chain of jits adds no depth: the nesting of calls is bounded too)
        try:
            transforms, fn, results = self.chain_call(ctx, [visible[a] for a in args], visible, depth, n,
                                                      active=[a in self.active for a in args])
        finally:
            self.nest -= 1
        outs = [self.var() for _ in results]
        e = {"op": "call", "args": args, "outs": outs, "transforms": transforms, "fn": fn}
        return e, list(zip(outs, results))


def small_first(draw, lo: int, hi: int) -> int:
    """A count in [lo, hi], the smaller of two draws: P(lo) about twice the uniform share and
    P(hi) about a quarter of it (1-3: 5/9, 3/9, 1/9), so that most programs are small.

    Hypothesis' own generate phase used to make most programs small as a side effect: it
    followed each draw with mutants of it that copy a smaller part of the choices over a
    larger one. Drawn anew (strategies/fresh.py), programs with a uniform count of calls and
    of transforms per call had 60% more transforms and cost 2.4 times as much to run (jax
    0.10.2, benchmarks/throughput.py); with these two counts drawn so (the equations per body
    stay uniform) the means come back to the old mix's: 1.56 calls, 2.2 transforms and 9.8
    equations per program against 1.66, 2.4 and 9.5 (300 draws). Raises nothing."""
    return min(draw(st.integers(lo, hi)), draw(st.integers(lo, hi)))


def _some(draw, items: list, max_size: int) -> list:
    """Up to ``max_size`` distinct items (none first, so that shrinking drops them)."""
    return draw(st.lists(st.sampled_from(items), max_size=max_size, unique=True)) if items else []


def unbatched_collective(eqn: dict, args: list, ctx: T.Ctx) -> bool:
    """Whether ``eqn`` is a collective (but ``axis_index``, which reads no operand) naming a vmap
    axis that its first operand (``args``: the argument types) does not vary over: a value the
    vmap does not batch, such as one a shard_map body or a derivative closes over.

    That composition is where two of the known JAX bugs of 0.10.2 hit most often, in their
    forward form (corpus entries differential-83bfe5218ca5: all_to_all of a closed-over value;
    internal-error-d0aa84fa2c68: all_gather, the AssertionError in core.pvary; together 103 of
    2102 and 47 of 1130 programs in two 2026-12-05@3a4e10b campaigns), so it is an option that swarm
    testing and the avoidance of known bugs can leave out (strategies.swarm), finer than
    leaving out ``capture`` or ``vmap_axis_name``. Not covered: the same bugs reached through
    a derivative (an unbatched cotangent or tangent meets the collective: 83bfe5218ca5's grad
    faces), which only the typed forward program cannot see, and bugs of the same family
    without a collective (internal-error-2c2958f6ed07, a closure over a batched value).
    """
    op = O.REGISTRY.get(eqn.get("op"))
    if op is None or op.family != "collective" or op.name == "axis_index" or not args:
        return False
    vmap_axes = {a.name for a in ctx.axes if a.kind == "vmap"}
    return any(n in vmap_axes and n not in args[0].vma for n in eqn.get("axes", ()))


def twins(op) -> list:
    """The other ops of ``op``'s family with the same arguments and parameters (their names and
    schemas), in registry order: e.g. sin, cos, tanh, neg; add, sub, mul, maximum; psum, pmax,
    pmin, pmean; reduce_window_sum, reduce_window_max. [] for None (a nested call) and for an op
    without parameters of a family of one."""
    if op is None:
        return []
    return [o for o in O.family(op.family)
            if o is not op and o.n_args == op.n_args and o.n_outs == op.n_outs and o.params == op.params]


def _defines(op, method: str) -> bool:
    """Whether an op's class defines ``method`` (not the Op base class's placeholder)."""
    return getattr(type(op), method) is not getattr(Op, method)


def _safe(ty: T.Ty, ctx: T.Ctx) -> bool:
    """Whether a function may return ``ty`` as it is, without making a rank-0 value rank 1.

    A rank-0 value varying over a manual axis cannot leave that axis' shard_map (no
    out_specs entry could name the axis) unless a vmap in between gives it a dim: so it
    is safe when every such axis has a vmap axis after it in ``ctx.axes`` (the vmap's
    out_axes then cannot be None for it, see _Gen.transform_out). Parameters of a body
    whose call's arguments are safe are safe, so a body always has a safe result.
    """
    if ty.rank >= 1:
        return True
    names = [a.name for a in ctx.axes]
    kinds = [a.kind for a in ctx.axes]
    return all("vmap" in kinds[names.index(m) + 1:] for m in ty.vma & ctx.manual)


def chain_variants(program: dict, call: dict, caps: dict | None = None, disabled: frozenset = frozenset()) -> list:
    """Other wrappings of a call's function that type-check on the same inputs.

    Toggling the outer jit (adding it only when "jit" is not ``disabled``), spmd_axis_name
    on a vmap, check_vma on a shard_map, dropping a shard_map (the function then sees
    global shapes: seed-A-like pairs; not when its body has a shard_map, see
    ``T.nesting_recorder``) and dropping a checkpoint (the identity on values:
    the differential oracle judges both calls).
    """
    chain = call["transforms"]
    cands = []
    if chain and chain[0]["kind"] == "jit":
        cands.append(chain[1:])
    elif "jit" not in disabled:
        cands.append([{"kind": "jit"}] + chain)
    for i, t in enumerate(chain):
        if t["kind"] == "vmap" and t["spmd_axis_name"] is not None:
            cands.append(chain[:i] + [{**t, "spmd_axis_name": None}] + chain[i + 1:])
        if t["kind"] in ("shard_map", "checkpoint"):
            cands.append(chain[:i] + chain[i + 1:])
    checked = all(t["check_vma"] for t in chain if t["kind"] == "shard_map")
    if any(t["kind"] == "shard_map" for t in chain) and not (checked and "check_vma_off" in disabled):
        # nested shard_maps keep one check_vma: toggle all
        cands.append([{**t, "check_vma": not t["check_vma"]} if t["kind"] == "shard_map" else t for t in chain])
    # a call's first jit is not inlined (the generator inlines traced jits only: jit_in); a
    # variant that drops what came before a nested inlined jit gets a plain one
    cands = [[{k: v for k, v in c[0].items() if k != "inline"}] + c[1:] if c and c[0].get("inline") else c
             for c in cands]
    ok = []
    ctx = T.root_ctx(program, caps)
    inputs = T.input_types(program)
    fn = program["functions"][call["function"]]
    args = [inputs[a] for a in call["args"]]
    # the function is rendered once for all its calls: a shard_map in its body must stay
    # inside (or outside) a shard_map in every one (T.nesting_recorder)
    seen: dict = {}
    T.call_types(chain, fn, ctx, args, inputs, T.nesting_recorder(seen))
    for c in cands:
        try:
            T.check_committed(program, c, call["args"])
            T.call_types(c, fn, ctx, args, inputs, T.nesting_recorder(dict(seen)))
        except T.ProgramError:
            continue
        ok.append(c)
    return ok


def check_disabled(disabled) -> frozenset:
    """``disabled`` as a frozenset of names the generator knows; ValueError (one line) for another name.

    Known names: the ops of the registry (fuzz/ops/), the transforms
    (fuzz.typecheck.TRANSFORMS), "call" (nested calls) and the :data:`OPTIONS`.
    """
    disabled = frozenset(disabled)
    unknown = sorted(disabled - set(O.REGISTRY) - set(T.TRANSFORMS) - {"call"} - set(OPTIONS))
    if unknown:
        raise ValueError(f"cannot disable {unknown[0][:40]!r}: not an op, a transform, 'call' or an option")
    return disabled


@st.composite
def programs(draw, caps: dict = NEWEST_CAPS, max_depth: int = 4, max_eqns: int = 5, max_calls: int = 3,
             disabled: frozenset = frozenset()):
    """A whole valid program (dict in the schema of ``fuzz/schemas/program.schema.json``).

    ``caps``: the worker's capabilities (``fuzz.render.NEWEST_CAPS`` by default).
    ``max_depth``: transforms on any path from a call to the innermost body.
    ``disabled``: op and transform names, "call" and :data:`OPTIONS` the generator must not draw in this
    program (swarm testing; known bugs' features). Whatever is disabled, the program is
    valid: the simplest path (a function with fewer equations, no transform, an identity
    body) stays available. ValueError for a name that is none of these.
    """
    disabled = check_disabled(disabled)
    g = _Gen(draw, caps, max_depth, max_eqns, disabled)
    # up to 3 ops this program favours: half of its equations try one of them first, so
    # that some programs are dense in ops the others rarely combine (x.at[...] chains, a
    # sharding constraint then a cumsum: each op is ~1 equation in 200 otherwise). Like
    # swarm testing (Groce et al. 2012) it varies the mix per program, but no op is left
    # out. None first: shrinking drops the focus.
    allowed = sorted(n for n, op in O.REGISTRY.items() if n not in disabled and O.FAMILY_WEIGHTS.get(op.family, 0) > 0)
    chosen = set(draw(st.lists(st.sampled_from(allowed), max_size=3, unique=True))) if allowed else set()
    g.focus = tuple(op for op in O.REGISTRY.values() if op.name in chosen)
    mesh = draw(meshes({**caps, "explicit": False} if "explicit_mesh" in disabled else caps,
                       set_mesh="set_mesh" not in disabled))
    sizes = dict(zip(mesh["axis_names"], mesh["axis_sizes"]))
    inputs = []
    # on an Explicit mesh an input's spec is its sharding type, tracked from jax 0.9.0 on
    split_ok = mesh["axis_type"] == "auto" or T.NO_SHARDING_TYPES not in T.release_rules(caps)
    for k in range(draw(st.integers(1, 3))):
        rank = draw(st.integers(0, 3))
        shape = [draw(st.sampled_from(DIMS)) for _ in range(rank)]
        spec = None
        # committed to a sharding half of the time; on an Explicit mesh that spec is the input's
        # sharding type, which the typing rules follow through the ops (Op.sharding_types)
        if split_ok and draw(st.booleans()):
            spec = draw(partition_specs(tuple(shape), mesh["axis_names"], sizes))
        inputs.append({"name": f"x{k}", "shape": shape, "dtype": "float32", "spec": spec,
                       "seed": draw(st.integers(0, 255))})
    # an int32 scalar input, 3 programs in 4: a start index that jit traces (for the ops that
    # take one); without it every start under jit is a constant that XLA folds (0 of 250
    # dynamic_slice starts in 5000 drawn programs were traced, jitted and their result split
    # over the mesh, seeds 1-5, with one program in 2)
    if any(op.preludes and n not in disabled for n, op in O.REGISTRY.items()) and draw(st.integers(0, 3)) > 0:
        spec = draw(st.sampled_from([None, []])) if mesh["axis_type"] == "auto" else None
        inputs.append({"name": f"x{len(inputs)}", "shape": [], "dtype": "int32", "spec": spec,
                       "seed": draw(st.integers(0, 255))})
    program = {"format": "shardfuzz-program", "version": 1, "mesh": mesh, "inputs": inputs,
               "functions": {}, "calls": []}
    ctx = T.root_ctx(program, caps)
    in_types = T.input_types(program)
    floats = [i["name"] for i in inputs if i["dtype"] == T.FLOAT]
    n_calls = small_first(draw, 1, max_calls)
    for _ in range(n_calls):
        previous = program["calls"]
        if previous and draw(st.booleans()):
            base = draw(st.sampled_from(previous))
            variants = chain_variants(program, base, caps, disabled)
            if variants:
                program["calls"].append({**base, "transforms": draw(st.sampled_from(variants))})
                continue
        # at least one float32 argument, first (so the function has a float32 result)
        first = draw(st.sampled_from(floats))
        names = [first] + _some(draw, [i["name"] for i in inputs if i["name"] != first], len(inputs) - 1)
        n = small_first(draw, 0, 3)
        # half of the calls are a jit of the rest, as most JAX code runs: XLA's sharding
        # propagation and SPMD partitioner see the whole function only then (an eager call
        # runs op by op, each op its own computation); otherwise a jit came first in ~1 call
        # in 5 (365 of 1736 calls of 1000 drawn programs, seed 0) and 35% of calls were eager
        jit_first = "jit" not in disabled and draw(st.booleans())
        # an int32 input is an argument of every fresh call (jit(f)(x, pos)): only captured, it is
        # a StableHLO constant under jit and XLA folds the start index, so a start clamped at
        # run time (per shard by the SPMD partitioner) was rare; the body may still capture it
        names += [i["name"] for i in inputs if i["dtype"] == INT and i["name"] not in names]
        g.committed = [next(i["spec"] for i in inputs if i["name"] == a) for a in names]
        transforms, fn, _ = g.chain_call(ctx, [in_types[a] for a in names], dict(in_types), 0, n + jit_first,
                                         jit_first=jit_first)
        # one jitted call in four donates some of its arguments, as a training step donates its
        # parameters and optimizer state: XLA then aliases an argument's buffers (per shard) to
        # results of its shape and sharding (https://docs.jax.dev/en/latest/faq.html#buffer-donation)
        if (transforms and transforms[0]["kind"] == "jit" and "donate_argnums" not in disabled
                and draw(st.integers(0, 3)) == 3):
            transforms[0]["donate_argnums"] = sorted(draw(st.lists(st.integers(0, len(names) - 1), min_size=1,
                                                                   max_size=len(names), unique=True)))
        fname = f"f{len(program['functions'])}"
        program["functions"][fname] = fn
        program["calls"].append({"function": fname, "transforms": transforms, "args": names})
    # some programs (one option of four: 21 of 200 derandomized draws) run with JAX's
    # internal invariant checks (jax_enable_checks, as JAX's own tests do): a jaxpr that a
    # transform builds ill-typed fails there even when the values come out right. Drawn
    # last, off first (shrinking turns it off when the finding does not need it); ~9%
    # slower per program when on (every program checked: 311 against 341 programs in 240 s,
    # jax 0.10.2, seed 1, JAX_ENABLE_CHECKS=1 in the worker against none).
    if "enable_checks" not in disabled and draw(st.sampled_from([False, False, False, True])):
        program["checks"] = True
    return program
