"""Unsharded reference evaluation of a program: NumPy, and JAX's autodiff for derivatives.

Derivatives are JAX's (``jax.grad`` ... of the reference written with single-device
``jax.numpy``), traced once to a jaxpr and evaluated with NumPy by :mod:`fuzz.jaxpr_numpy`
(:meth:`Reference.derive`): no XLA compilation per op, no jit.

No jit, vmap, shard_map, collective or sharding API of JAX is used: the transforms under
test must not judge themselves. Instead every value is held *lock-step* over the named
axes in scope: a value inside ``k`` named axes (manual mesh axes of enclosing shard_maps,
enclosing vmap axes) is one array of shape ``(size_1, ..., size_k) + shape``.

- shard_map: inputs are cut into blocks per in_specs (major-to-minor over the mesh
  axes of a dim), the body runs on the stacked blocks, outputs are reassembled per
  out_specs (an axis an output does not name contributes its index-0 copy, which the
  typing rules make identical to the others).
- vmap: the batch dim becomes a named axis; out_axes=None takes index 0 (invariant).
- map (``jax.lax.map``): the vmap of :func:`fuzz.typecheck.as_vmap` (in_axes 0 or None,
  out_axes 0): each iteration of the loop is one index of an unnamed axis.
- scan (``jax.lax.scan``): f applied step by step to the slices of the scanned arguments
  (dim 0 of each, after the named dims), a carried argument replaced by f's result named
  by its ``carry`` entry after each step; the results stacked along a new dim 0.
- auto_axes (``jax.sharding.auto_axes``, results resharded to P()): the identity (shardings
  change where values live, not what they are).
- checkpoint (``jax.checkpoint``): the identity, whatever the policy (a policy only
  chooses which residuals are saved for the backward pass, not values).
- collectives: explicit reductions, stacks, rolls and reshapes over the named dims.
- grad: ``jax.grad`` of the reference. Inside a shard_map body with ``check_vma=True``
  the loss is the *global* loss (summed over the devices it varies over, counted once
  along axes it is unvarying over) and an argument unvarying over a manual axis is a
  single variable, so its gradient comes back summed over that axis: JEP 17111
  ("Efficient transposition of replication-inducing collectives") and the shard_map
  tutorial's autodiff section; measured on jax 0.10.2: a body computing
  ``grad(lambda w: (sin(w) * x_block).sum())(w)`` returns the same total on every device with
  the check on, each device's local value with it off (docs/program.md).
  Along vmap axes and ``check_vma=False`` manual axes every index is independent.
- vjp / jvp / linearize: ``jax.vjp`` / ``jax.jvp`` of the reference (linearize: as jvp) with the seeded cotangents /
  tangents of :func:`weights` (per-value shapes, the same at every index of the named
  axes); every index is independent (no manual axis is in scope: fuzz.typecheck.enter).
- jacrev / jacfwd: ``jax.jacrev`` / ``jax.jacfwd`` of the reference (see
  :meth:`Reference.jacobian` for the lock-step contraction, manual axes included).
- fori_loop / while_loop: f's outputs added to themselves n times, in the loop's order.
- cond: f's outputs where ``sum(sign(args[0])) >= 0`` (per index of the named axes), their
  negation elsewhere.
- wsum: ``sum(x * weights(seed, shape))`` over a value's own dims.
- io_callback: the values the host function would receive are recorded per tag.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from fuzz import jaxpr_numpy
from fuzz import ops as O
from fuzz import typecheck as T
from fuzz.values import make_input, weights  # noqa: F401 (the reference's inputs and weights; imported from here too)
from fuzz.worker import callback_cells, unique_cells


class Reference:
    """Evaluates a program's calls; see the module docstring for the semantics.

    ``evaluate()`` returns ``{"results": [[np.ndarray, ...] per call], "callbacks":
    [{tag: (n, 2) float64 array of distinct (position, value) rows} per call]}``
    (``fuzz.worker.callback_cells``). Raises ProgramError for
    an invalid program.

    ``caps``: the capabilities of the JAX the program was drawn for (fuzz/worker.py; None: the
    newest release's, ``fuzz.render.NEWEST_CAPS``). The program is typed under that release's
    rules (``fuzz.typecheck.release_rules``), as the generator and the runner typed it: a
    release that tracks no sharding types (jax < 0.9.0) lets an io_callback or custom_jvp read a
    shard_map's result on an Explicit mesh that the newest rules call split.
    """

    def __init__(self, program: dict, caps: dict | None = None):
        import jax
        import jax.numpy as jnp

        self.jax, self.jnp = jax, jnp
        self.xp = np  # NumPy outside grad (no compilation); jax.numpy inside jax.grad
        self.p = program
        self.caps = caps
        self.log: dict = {}
        self.ranks = None  # {tag: rank}: fuzz.typecheck.callback_ranks, on the first record
        self.staged = None  # [(tag, traced value)] recorded while derive traces (see record)
        self.jaxpr_numpy = True  # derivatives traced once and evaluated with NumPy (see derive)
        self.nudge = 0.0  # relative change of every float32 result of an op (see ``nudged``)

    # ------------------------------------------------------------------ helpers
    def _lift(self, x, k: int, ctx: T.Ctx):
        """Broadcast a value defined under ``k`` named axes to all axes of ``ctx``."""
        K = len(ctx.axes)
        if k == K:
            return x
        sizes = tuple(a.size for a in ctx.axes)
        x = x.reshape(x.shape[:k] + (1,) * (K - k) + x.shape[k:])
        return self.xp.broadcast_to(x, sizes + x.shape[K:])

    def record(self, tag: str, x) -> None:
        """Note that an io_callback host function ``tag`` receives ``x`` (lock-step: every index).

        ``x``: the named axes in scope, then the argument's local dims; its cells
        (``fuzz.worker.callback_cells``) are keyed by the position within the trailing local
        dims, as the worker keys what JAX's host functions receive.
        """
        if self.xp is not np:
            x = self.jax.lax.stop_gradient(x)
            if self.staged is not None:  # traced by derive: the value becomes an output of the jaxpr
                self.staged.append((tag, x))
                return
        if self.ranks is None:
            self.ranks = T.callback_ranks(self.p, self.caps)
        self.log.setdefault(tag, []).append(callback_cells(np, np.asarray(x), self.ranks.get(tag, 0)))

    # ------------------------------------------------------------------ functions
    def function(self, fn: dict, ctx: T.Ctx, args: list, arg_types: list, env: dict):
        env = dict(env)
        K = len(ctx.axes)
        for name, x, t in zip(fn["params"], args, arg_types):
            env[name] = (x, t, K)
        for e in fn["eqns"]:
            xs = [self._lift(env[v][0], env[v][2], ctx) for v in e["args"]]
            ts = [env[v][1] for v in e["args"]]
            if e["op"] == "call":
                outs, out_types = self.call(e["transforms"], e["fn"], ctx, xs, ts, env)
            else:
                out_types = T.eqn_types(e, ts, ctx)
                outs = self.primitive(e, xs, ts, ctx)
                if self.nudge:
                    outs = [o * np.float32(1 + self.nudge) if str(o.dtype) == "float32" else o for o in outs]
            for v, x, t in zip(e["outs"], outs, out_types):
                env[v] = (x, t, K)
        return ([self._lift(env[v][0], env[v][2], ctx) for v in fn["results"]],
                [env[v][1] for v in fn["results"]])

    def call(self, transforms: list, fn: dict, ctx: T.Ctx, xs: list, ts: list, env: dict):
        if not transforms:
            return self.function(fn, ctx, xs, ts, env)
        from fuzz.transforms import lookup

        t, rest = transforms[0], transforms[1:]
        tr = lookup(t["kind"])
        if tr is None:
            T.enter(t, ctx, ts)  # (the typing rules refuse it first)
            raise T.ProgramError(f"unknown transform {str(t['kind'])[:40]!r}")
        return tr.reference(self, t, rest, fn, ctx, xs, ts, env)

    # ------------------------------------------------------------------ transforms
    def shard_map(self, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        xp = self.xp
        K = len(ctx.axes)
        new = inner_ctx.axes[K:]
        L = len(new)
        slot = {a.name: K + i for i, a in enumerate(new)}
        mesh = inner_ctx.mesh
        inner_xs = []
        for x, spec in zip(xs, t["in_specs"]):
            # one singleton slot per new named axis; then, last dim first, split each dim
            # (major to minor) and swap its pieces into the slots of their mesh axes
            y = x.reshape(x.shape[:K] + (1,) * L + x.shape[K:])
            for d in reversed(range(len(spec))):
                names = spec[d] or []
                if not names:
                    continue
                pos = K + L + d
                n = y.shape[pos]
                pieces = tuple(mesh[a] for a in names)
                y = y.reshape(y.shape[:pos] + pieces + (n // math.prod(pieces),) + y.shape[pos + 1:])
                for i, a in enumerate(names):
                    y = xp.swapaxes(y, pos + i, slot[a])
                y = y.reshape(y.shape[:pos] + y.shape[pos + len(names):])
            inner_xs.append(xp.broadcast_to(y, x.shape[:K] + tuple(a.size for a in new) + y.shape[K + L:]))
        outs, out_ts = self.call(rest, fn, inner_ctx, inner_xs, inner_ts, env)
        results = []
        for r, spec in zip(outs, t["out_specs"]):
            named = {a for s in spec if s for a in s}
            # an axis the output does not name contributes its index-0 copy
            y = r[tuple(slice(None) if (j < K or new[j - K].name in named) else slice(0, 1) for j in range(K + L))]
            for d in reversed(range(len(spec))):
                names = spec[d] or []
                if not names:
                    continue
                pos = K + L + d
                y = y.reshape(y.shape[:pos] + (1,) * len(names) + y.shape[pos:])
                for i, a in enumerate(names):
                    y = xp.swapaxes(y, pos + i, slot[a])
                m = len(names)
                y = y.reshape(y.shape[:pos] + (math.prod(y.shape[pos:pos + m + 1]),) + y.shape[pos + m + 1:])
            results.append(y.reshape(y.shape[:K] + y.shape[K + L:]))
        return results, out_ts

    def vmap(self, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        """A vmap, or a map as the vmap it is typed as (fuzz.typecheck.as_vmap): the batch dim becomes a named axis."""
        jnp = self.xp
        K = len(ctx.axes)
        b = inner_ctx.axes[-1].size
        inner_xs = []
        for x, ax in zip(xs, t["in_axes"]):
            if ax is None:
                x = jnp.expand_dims(x, K)
                inner_xs.append(jnp.broadcast_to(x, x.shape[:K] + (b,) + x.shape[K + 1:]))
            else:
                inner_xs.append(jnp.moveaxis(x, K + ax, K))
        outs, out_ts = self.call(rest, fn, inner_ctx, inner_xs, inner_ts, env)
        out_axes = t["out_axes"] if t["kind"] == "vmap" else T.as_vmap(t, len(outs))["out_axes"]
        results = []
        for r, ax in zip(outs, out_axes):
            results.append(r[(slice(None),) * K + (0,)] if ax is None else jnp.moveaxis(r, K, K + ax))
        return results, out_ts

    def scan(self, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        """A lax.scan, step by step: slice k of each scanned argument, the carried ones updated after each step."""
        K = len(ctx.axes)
        n = next(x.shape[K] for x, ax in zip(xs, t["in_axes"]) if ax == 0)
        cur, steps, out_ts = list(xs), [], []
        for i in range(n):
            step = [x[(slice(None),) * K + (i,)] if ax == 0 else c for x, ax, c in zip(xs, t["in_axes"], cur)]
            ys, out_ts = self.call(rest, fn, inner_ctx, step, inner_ts, env)
            steps.append(ys)
            cur = [c if k is None else ys[k] for c, k in zip(cur, t["carry"])]
        return [self.xp.stack([s[j] for s in steps], axis=K) for j in range(len(out_ts))], out_ts

    def derive(self, fun, args: list):
        """``fun(*args)``: a derivative by JAX's autodiff of this reference run with jax.numpy.

        Outermost (NumPy outside): traced once with ``jax.make_jaxpr`` and evaluated by
        :mod:`fuzz.jaxpr_numpy` (NumPy, op by op), not run eagerly (every eager jax.numpy
        function compiles for its shapes); the values an io_callback receives inside (``record``)
        become outputs of the jaxpr, recorded once it is evaluated. When the trace fails (a
        reference step that needs a concrete value, or a recorded value inside a vmap of the
        derivative) or its evaluation raises, eagerly as before (counted in
        ``fuzz.jaxpr_numpy.STATS.eager``). Nested (jax.numpy outside: a derivative of a derivative):
        ``fun(*args)`` on the outer one's tracers. Results as ``fun`` gives them, NumPy arrays
        when outermost.
        """
        jax = self.jax
        outer = self.xp
        self.xp = self.jnp

        def eager(why: str = ""):
            if why:
                jaxpr_numpy.STATS.eager[why] += 1
            out = fun(*[self.jnp.asarray(x) for x in args])
            return jax.tree_util.tree_map(np.asarray, out) if outer is np else out

        try:
            if outer is not np or not self.jaxpr_numpy:
                return eager()
            staged = self.staged = []

            def traced(*a):
                return fun(*a), [x for _, x in staged]

            try:
                closed, shapes = jax.make_jaxpr(traced, return_shape=True)(*args)
            except Exception as e:
                return eager(type(e).__name__)
            finally:
                self.staged = None
            try:
                flat = jaxpr_numpy.evaluate(closed, [np.asarray(x) for x in args])
            except Exception as e:  # (a rule's own failure: JAX's eager evaluation stays the judge)
                return eager(f"evaluate: {type(e).__name__}")
            out, received = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shapes), flat)
            self.xp = np
            for (tag, _), x in zip(staged, received):
                self.record(tag, x)
            return out
        finally:
            self.xp = outer

    def host(self, fn, shape: tuple, dtype, *xs):
        """``fn(*xs)`` computed with NumPy from values that are never differentiated (an int32
        index), an array of ``shape`` and ``dtype``: at once when ``xs`` are concrete; inside a
        trace of :meth:`derive` through ``jax.pure_callback``, which :mod:`fuzz.jaxpr_numpy`
        calls on the host (a release without ``vmap_method`` fails the trace: then eagerly)."""
        if self.staged is None:
            out = fn(*[np.asarray(x) for x in xs])
            return out if self.xp is np else self.xp.asarray(out)
        return self.jax.pure_callback(lambda *a: np.asarray(fn(*a), dtype), self.jax.ShapeDtypeStruct(shape, dtype),
                                      *xs, vmap_method="sequential")

    def grad(self, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        jax, jnp = self.jax, self.jnp
        # Manual axes with check_vma=True: an unvarying argument is one variable and the
        # loss is counted once along axes it is unvarying over. Other axes: independent.
        collapse = [j for j, a in enumerate(ctx.axes) if a.kind == "mesh" and a.check_vma]

        def one_copy(x, vma):
            idx = tuple(slice(0, 1) if (j in collapse and ctx.axes[j].name not in vma) else slice(None)
                        for j in range(len(ctx.axes)))
            return x[idx]

        argnums = t["argnums"]
        reduced = [one_copy(xs[i], inner_ts[i].vma) for i in argnums]
        loss_info = {}

        def F(*red):
            full = list(xs)
            for i, r in zip(argnums, red):
                full[i] = jnp.broadcast_to(r, xs[i].shape)
            outs, out_ts = self.call(rest, fn, inner_ctx, full, inner_ts, env)
            loss_info["type"] = out_ts[0]
            return one_copy(outs[0], out_ts[0].vma).sum(), outs[0]

        outer_xp = self.xp
        grads, loss = self.derive(jax.grad(F, argnums=tuple(range(len(argnums))), has_aux=True), reduced)
        grads = [outer_xp.broadcast_to(g, xs[i].shape) for g, i in zip(grads, argnums)]
        value = [loss] if t["kind"] == "value_and_grad" else []
        return value + grads, [loss_info["type"]]

    def linearized(self, t, rest, fn, inner_ctx, xs, inner_ts, env):
        """vjp: outputs then the pullback of seeded cotangents (seed + k for output k) to every
        argument; jvp: outputs then their tangents for seeded tangents (seed + k for argument k).

        No manual axis is in scope (fuzz.typecheck.enter), so every index of the named axes
        is independent: the (co)tangents are the per-value weights broadcast over them.
        """
        jax, jnp = self.jax, self.jnp
        types = {}

        def F(*args):
            outs, out_ts = self.call(rest, fn, inner_ctx, list(args), inner_ts, env)
            types["outs"] = out_ts
            return tuple(outs)

        def seeded(k, ty, like):
            return jnp.broadcast_to(jnp.asarray(weights(t["seed"] + k, ty.shape)), like.shape)

        def G(*xs):
            if t["kind"] == "vjp":
                outs, pullback = jax.vjp(F, *xs)
                cts = tuple(seeded(k, ty, o) for k, (ty, o) in enumerate(zip(types["outs"], outs)))
                return outs, pullback(cts)
            tangents = tuple(seeded(k, ty, x) for k, (ty, x) in enumerate(zip(inner_ts, xs)))
            return jax.jvp(F, tuple(xs), tangents)

        outs, extra = self.derive(G, xs)
        values = list(outs) + list(extra)
        return values, types["outs"]

    def cond(self, x, outs: list, out_ts: list, K: int) -> list:
        """lax.cond(sum(sign(x)) >= 0, f, -f): each output, negated at the indices of the named axes
        where the predicate (over x's own dims) is false. The sum of signs is an exact integer,
        so the branch differs from JAX's only where an element of x is a rounding error away from 0."""
        xp = self.xp
        pred = xp.sign(x).sum(axis=tuple(range(K, x.ndim))) >= 0
        return [xp.where(pred.reshape(pred.shape + (1,) * ty.rank), o, -o) for o, ty in zip(outs, out_ts)]

    def jacobian(self, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        """jacrev / jacfwd: per output its Jacobian w.r.t. argument ``argnums[0]`` at every index of the named axes.

        With ``J[A, i, B, j]`` the derivative of output element ``i`` at index ``A`` of the
        named axes by argument element ``j`` at index ``B`` (lock-step copies):
        - jacfwd pushes the basis tangent ``e_j``, the same at every index:
          ``R[A, i, j] = sum_B J[A, i, B, j]`` (``jax.jacfwd`` of the output as a function of
          one per-index displacement ``u`` added at every index);
        - jacrev pulls back the basis cotangent ``e_i`` from every index, once along a checked
          manual axis the output is unvarying over (one value there, as grad's loss):
          ``R[B, i, j] = sum_A J[A, i, B, j]``, then summed along checked axes the argument is
          unvarying over (one variable there: the transpose of pvary is psum).
        Along vmap and unchecked axes J is diagonal (no collective there crosses the
        derivative: Ctx.collective_axes), so both are each index's own Jacobian. Measured
        against jax 0.10.2 inside shard_map bodies (psum, ppermute, axis_index; tests/test_control_flow.py).
        """
        jax, jnp = self.jax, self.jnp
        K = len(ctx.axes)
        (k,) = t["argnums"]
        checked = [j for j, a in enumerate(ctx.axes) if a.kind == "mesh" and a.check_vma]
        types = {}

        def F(xk):
            full = list(xs)
            full[k] = xk
            outs, out_ts = self.call(rest, fn, inner_ctx, full, inner_ts, env)
            types["outs"] = out_ts
            return outs

        def one_copy(x, vma):
            return x[tuple(slice(0, 1) if (j in checked and ctx.axes[j].name not in vma) else slice(None)
                           for j in range(K))]

        def G(x):
            if t["kind"] == "jacrev":
                def H(xk):
                    return tuple(one_copy(o, ty.vma).sum(axis=tuple(range(K)))
                                 for o, ty in zip(F(xk), types["outs"]))

                jacs = []
                for J, ty in zip(jax.jacrev(H)(x), types["outs"]):  # out.shape + sizes + arg.shape
                    J = jnp.moveaxis(J, tuple(range(ty.rank, ty.rank + K)), tuple(range(K)))
                    for j in checked:
                        if ctx.axes[j].name not in inner_ts[k].vma:
                            J = jnp.broadcast_to(J.sum(axis=j, keepdims=True), J.shape)
                    jacs.append(J)
                return jacs

            def H(u):
                return tuple(F(x + u))

            return list(jax.jacfwd(H)(jnp.zeros(x.shape[K:], x.dtype)))  # sizes + out.shape + arg.shape

        jacs = self.derive(G, [xs[k]])
        return jacs, types["outs"]

    # ------------------------------------------------------------------ primitives
    def primitive(self, e: dict, xs: list, ts: list, ctx: T.Ctx) -> list:
        """An op's results by its registry entry (fuzz/ops/); ProgramError for an unknown op."""
        op = O.get(e["op"])
        if op.family == "collective":
            x = xs[0]
            return [self.collective(e, x, ctx)]
        return list(op.reference(self, e, xs, ts, ctx))

    def collective(self, e: dict, x, ctx: T.Ctx):
        """A collective's result (fuzz/ops/collectives.py): one seam where a test plants a wrong one."""
        return O.get(e["op"]).reference(self, e, [x], None, ctx)[0]

    # ------------------------------------------------------------------ entry
    def evaluate(self) -> dict:
        ctx = T.root_ctx(self.p, self.caps)
        inputs = {i["name"]: make_input(i["seed"], i["shape"], i.get("values", "seeded"), i.get("dtype", "float32"))
                  for i in self.p["inputs"]}
        in_types = T.input_types(self.p)
        env = {n: (x, in_types[n], 0) for n, x in inputs.items()}
        results, callbacks = [], []
        for call in self.p["calls"]:
            self.log = {}
            fn = self.p["functions"][call["function"]]
            outs, _ = self.call(call["transforms"], fn, ctx, [inputs[a] for a in call["args"]],
                                [in_types[a] for a in call["args"]], env)
            results.append([np.asarray(o) for o in outs])
            callbacks.append({tag: unique_cells(np, v) for tag, v in self.log.items()})
        return {"results": results, "callbacks": callbacks, "nudged": self.nudged}

    def __deepcopy__(self, memo):
        # a copied result of evaluate() (e.g. a test's planted wrong value) keeps its "nudged"
        # function bound to this reference: it holds modules, which do not copy
        return self

    def nudged(self, nudge: float) -> list:
        """The results of every call again, every float32 result of an op multiplied by ``1 + nudge``.

        2**-22 is about two units in the last place: rounding noise of the size by which XLA's ops
        may differ from NumPy's (a transcendental function's last bits, the order of a sum). How far
        the results move says how much the program amplifies such noise (a scan carrying
        ``sum(sin(x + c))`` over 8 steps multiplies it by up to 16 per step):
        :func:`oracles.differential.ill_conditioned` uses it to tell an ill-conditioned output from
        a wrong one. Evaluated by a copy of this reference, so that a test's planted bug stays planted.
        """
        other = copy.copy(self)
        other.nudge, other.log, other.xp = nudge, {}, np
        return other.evaluate()["results"]


def evaluate(program: dict, caps: dict | None = None) -> dict:
    """Reference results of every call: see :class:`Reference` (``caps``: the release the program
    is typed for, None for the newest). Raises ProgramError if invalid under its rules.

    The result's ``"nudged"``: :meth:`Reference.nudged` of the reference that computed it.
    """
    return Reference(program, caps).evaluate()
