"""Sharding annotations: ``with_sharding_constraint`` (``lax.with_sharding_constraint(x,
NamedSharding(mesh, P(...)))``) and ``device_put`` (``jax.device_put(x, NamedSharding(mesh,
P(...)))``, under jit a sharding annotation too: https://docs.jax.dev/en/latest/_autosummary/jax.device_put.html).

The mesh axes ``axes`` (major to minor) split dim ``dim``; the other dims are not split.
Its value is ``x`` (the reference is the identity). Rules (measured on jax 0.10.2): not
inside a shard_map body (only outside, under jit or eagerly); not on an Explicit mesh
("with_sharding_constraint acts as an assert when all axes of mesh are of type Explicit"
-- reshard is the API there); no axis an enclosing vmap's spmd_axis_name takes ("vmap
spmd_axis_name ... cannot appear in with_sharding_constraint spec"); the axes divide the
dim (eagerly, an uneven split raises IndivisibleError). ``device_put`` follows the same
rules (it runs eagerly, under jit, vmap with or without spmd_axis_name and grad alike on
jax 0.4.26 and 0.10.2, measured).

``reshard`` is the annotation of Explicit meshes (``jax.sharding.reshard``, the "Explicit
sharding" doc page: https://docs.jax.dev/en/latest/notebooks/explicit-sharding.html): a
round trip ``reshard(reshard(x, P(...)), P())`` that splits dim ``dim`` over ``axes`` and
goes back to replicated, since values outside shard_map on an Explicit mesh are replicated
here and sharding types are not modelled. Its reshard primitive still meets jit's
partitioner, grad's transpose (to the operand's sharding, jax/_src/pjit.py) and vmap's
batching rule. Rules (measured on jax 0.10.2): only on an Explicit mesh, outside a shard_map
body; the axes divide the dim ("does not evenly divide the dimension size" otherwise); it
runs eagerly, under jit, grad and vmap, with spmd_axis_name naming the same axis or another.
Explicit meshes need ``jax.sharding.reshard`` (fuzz/worker.py caps), in jax 0.7.0 and later.

Two compiler annotations that leave values as they are, with rules of their own in every
transform: ``shard_alike`` (``jax.experimental.shard_alike.shard_alike(x, y)``: x and y get
one sharding, whichever the partitioner picks; a sharding group in Shardy) and
``optimization_barrier`` (``jax.lax.optimization_barrier((x, ...))``: no computation moves
across it; remat and scan code use it). See their classes for the rules measured.
"""
from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import strategies as st

from fuzz.ops.base import (AXES, DIM, FLOAT, NUMERIC, OPAQUE, ExprOp, Op, OneOf, checked_axes, require, spec_type,
                           vmap_axes)


def splits(n: int, axes: list, mesh: dict, uneven: bool = False) -> list:
    """The lists of one or two of ``axes`` (major first) whose sizes divide a dim of size ``n``
    (``uneven``: the others, whose sizes do not divide it)."""
    sizes = [([x], mesh[x]) for x in axes] + [([x, y], mesh[x] * mesh[y]) for x in axes for y in axes if x != y]
    return [names for names, k in sizes if (n % k != 0) == uneven]


def draw_split(draw, n: int, axes: list, mesh: dict, uneven_ok: bool) -> list | None:
    """Mesh axes to split a dim of size ``n`` over: evenly when some split divides it, and
    (``uneven_ok``) one time in three, or when none does, unevenly; None when neither is allowed."""
    even = splits(n, axes, mesh)
    odd = splits(n, axes, mesh, uneven=True) if uneven_ok and n > 0 else []
    if odd and (not even or draw(st.integers(0, 2)) == 2):
        return draw(st.sampled_from(odd))
    return draw(st.sampled_from(even)) if even else None


class WithShardingConstraint(ExprOp):
    """``lax.with_sharding_constraint(x, NamedSharding(mesh, P(...)))``: dim ``dim`` split over
    ``axes``; the value is ``x``. See the module docstring for the rules.

    Under jit the split may be uneven (the axes' sizes need not divide the dim: XLA's SPMD
    partitioner pads the last shards), measured on jax 0.4.26, 0.6.1 and 0.10.2 (under jit,
    grad and vmap with and without spmd_axis_name; 3 elements over 4 devices included); the
    padding is where the partitioner's halo and clamping rules change (0.4.26's cumsum over a
    padded split is wrong, jax-ml/jax#21403's bug). Eagerly, and for ``device_put`` even under
    jit, JAX raises IndivisibleError (ValueError before 0.7): evenly only there.
    """

    name = "with_sharding_constraint"
    family = "sharding"
    params = {"axes": AXES, "dim": DIM}
    feature_names = ("with_sharding_constraint",)
    refusal = "on an Explicit mesh (reshard is the API there)"  # why not here, when not applies()
    uneven_ok = True  # (under jit: see the class docstring)

    def applies(self, ctx) -> bool:
        """Whether it may appear here: outside shard_map bodies, not on an Explicit mesh."""
        return not ctx.manual and not ctx.explicit

    def usable(self, ctx) -> list:
        """The mesh axes it may name here: not an enclosing vmap's spmd_axis_name."""
        return [n for n in ctx.mesh if n not in ctx.reserved]

    def types(self, eqn, args, ctx):
        (a,) = args
        names, d = eqn["axes"], eqn["dim"]
        require(not ctx.manual, f"{self.name} inside a shard_map body")
        require(self.applies(ctx), f"{self.name} {self.refusal}")
        require(len(set(names)) == len(names), f"{self.name} names an axis twice")
        usable = self.usable(ctx)
        for n in names:
            require(n in ctx.mesh, f"{self.name} over {n!r}, not a mesh axis")
            require(n in usable, f"{self.name} over {n!r}, an enclosing spmd_axis_name")
        require(0 <= d < a.rank, f"{self.name} dim {d} out of range for rank {a.rank}")
        k = math.prod(ctx.mesh[n] for n in names)
        require(a.shape[d] % k == 0 or self.uneven(ctx), f"{self.name} splits dim {a.shape[d]} into {k} "
                "(unevenly: only with_sharding_constraint under jit)")
        return [a]

    def uneven(self, ctx) -> bool:
        """Whether a split here may be uneven (see the class docstring)."""
        return self.uneven_ok and ctx.jit

    def draw(self, draw, ctx, scope):
        if not self.applies(ctx):
            return None
        axes = self.usable(ctx)
        vis = scope.visible
        uneven = self.uneven(ctx)
        cands = [(v, d) for v in scope.floats(min_rank=1) for d, n in enumerate(vis[v].shape)
                 if splits(n, axes, ctx.mesh) or (uneven and n > 0 and axes)]
        if not cands:
            return None
        a, d = draw(st.sampled_from(cands))
        return {"op": self.name, "args": [a], "outs": [scope.new_var()],
                "axes": draw_split(draw, vis[a].shape[d], axes, ctx.mesh, uneven), "dim": d}

    def as_constraint(self, draw, ctx, arg, ty, dim, out):
        # where it applies, over the axes it may name here; a real split: axes of size >= 2 only
        # (a size-1 axis splits nothing)
        if not self.applies(ctx) or ty.dtype != FLOAT or not 0 <= dim < ty.rank or ty.shape[dim] == 0:
            return None
        axes = [n for n in self.usable(ctx) if ctx.mesh[n] > 1]
        split = draw_split(draw, ty.shape[dim], axes, ctx.mesh, self.uneven(ctx))
        if split is None:
            return None
        return {"op": self.name, "args": [arg], "outs": [out], "axes": split, "dim": dim}

    def reference(self, r, eqn, xs, ts, ctx):
        return [xs[0]]

    def expr(self, rr, eqn, a, ctx):
        spec = [None] * int(rr.int(eqn["dim"])) + [list(eqn["axes"])]
        return f"jax.lax.with_sharding_constraint({a[0]}, NamedSharding(mesh, {rr.spec_source(spec)}))"


class DevicePut(WithShardingConstraint):
    name = "device_put"
    feature_names = ("device_put",)
    uneven_ok = False  # (IndivisibleError even under jit, measured on 0.4.26, 0.6.1, 0.10.2)

    def expr(self, rr, eqn, a, ctx):
        spec = [None] * int(rr.int(eqn["dim"])) + [list(eqn["axes"])]
        return f"jax.device_put({a[0]}, NamedSharding(mesh, {rr.spec_source(spec)}))"


class Reshard(WithShardingConstraint):
    name = "reshard"
    feature_names = ("reshard",)
    since = "0.7.0"
    refusal = "outside an Explicit mesh (with_sharding_constraint is the API there)"
    uneven_ok = False  # ("does not evenly divide the dimension size")

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Replicated: the round trip ends in ``P()`` (from any split: jax 0.10.2)."""
        return [()]

    def applies(self, ctx) -> bool:
        """Only on an Explicit mesh, outside shard_map bodies."""
        return ctx.explicit and not ctx.manual

    def usable(self, ctx) -> list:
        """Every mesh axis (an enclosing spmd_axis_name's too: measured on jax 0.10.2)."""
        return list(ctx.mesh)

    # not an annotator (a round trip: the op after it would see a replicated value); the base
    # class's placeholder tells the generator so (an override returning None made it pick reshard
    # for a third of its annotations around ops on Auto meshes, and annotate nothing)
    as_constraint = Op.as_constraint

    def expr(self, rr, eqn, a, ctx):
        spec = [None] * int(rr.int(eqn["dim"])) + [list(eqn["axes"])]
        return f"jax.sharding.reshard(jax.sharding.reshard({a[0]}, {rr.spec_source(spec)}), P())"


class ReshardSplit(Reshard):
    """``jax.sharding.reshard(x, P(...))`` one way: dim ``dim`` split over ``axes`` in the
    result's sharding type (the other dims unsplit), where the typing rules track sharding
    types (an Explicit mesh outside shard_map bodies and outside the transforms that lose
    them: fuzz.typecheck.SPEC_THROUGH). The annotation of Explicit meshes: the generator puts
    it before an op to split the dim the op moves data along, as with_sharding_constraint on
    Auto meshes (:meth:`as_constraint`), so that the op's own sharding rule and XLA's
    partitioning of it meet a split operand. Rules measured on jax 0.10.2 (any split to any).
    """

    name = "reshard_split"
    feature_names = ("reshard",)
    refusal = "outside the places an Explicit mesh's sharding types are tracked"

    def applies(self, ctx) -> bool:
        """On an Explicit mesh outside shard_map bodies, where sharding types are tracked."""
        return ctx.explicit and not ctx.manual and OPAQUE not in ctx.rules

    def sharding_types(self, eqn, args, outs, ctx):
        """``dim`` split over ``axes``, the other dims unsplit (its PartitionSpec)."""
        return [spec_type([None] * eqn["dim"] + [eqn["axes"]], args[0].rank)]

    # an annotator again (Reshard, a round trip, is none), over every mesh axis (Reshard.usable)
    as_constraint = WithShardingConstraint.as_constraint

    def expr(self, rr, eqn, a, ctx):
        spec = [None] * int(rr.int(eqn["dim"])) + [list(eqn["axes"])]
        return f"jax.sharding.reshard({a[0]}, {rr.spec_source(spec)})"


class _Identity(Op):
    """An op whose results are its operands (numeric, each of its own dtype) unchanged: the
    reference returns them; subclasses give the typing rule, draw and rendering."""

    dtypes = NUMERIC

    def arg_dtypes(self, eqn):
        return (OneOf(self.dtypes),) * len(eqn["args"])  # (each operand keeps its own dtype)

    def reference(self, r, eqn, xs, ts, ctx):
        return list(xs)


class ShardAlike(_Identity):
    """``x2, y2 = shard_alike(x, y)`` (``jax.experimental.shard_alike``): ``x`` and ``y`` of one
    shape (any numeric dtypes, each its own), results equal to them, each with its operand's
    type (varying axes included: ``jax.typeof`` in a checked shard_map body, jax 0.10.2), but
    under vmap both vary over the vmap axes either operand does (see :meth:`types`).

    Semantics: https://docs.jax.dev/en/latest/jax.experimental.shard_alike.html (the two
    values get the same sharding; values unchanged). Rules measured on jax 0.10.2 (and 0.4.26,
    0.4.38, 0.5.3, 0.6.1 where they differ): eagerly, under jit, grad, vmap (one operand batched
    and the other not included) and spmd_axis_name, in shard_map bodies with check_vma on and
    off, on Auto and Explicit meshes; the shapes JAX compares are the per-example / per-block
    ones, which the typing rules see. On releases with the experimental shard_map's
    replication check (release rule ``check_rep``: 0.4.26-0.5.3) a checked shard_map body
    refuses it: NotImplementedError "No replication rule for shard_alike".
    """

    name = "shard_alike"
    family = "sharding"
    n_args = 2
    n_outs = frozenset({2})
    feature_names = ("shard_alike",)

    @staticmethod
    def _refusal(ctx) -> str | None:
        if "check_rep" in ctx.rules and checked_axes(ctx):
            return "shard_alike in a shard_map body with check_rep on (no replication rule on this release)"
        return None

    def types(self, eqn, args, ctx):
        a, b = args
        require(a.shape == b.shape, f"shard_alike of shapes {a.shape} and {b.shape} (they must be equal)")
        why = self._refusal(ctx)
        require(why is None, why or "")
        # under vmap JAX broadcasts an unbatched operand to the other's batch (_shard_alike_batcher,
        # jax/_src/shard_alike.py, 0.4.26-0.10.2): both results vary over the vmap axes either does
        joined = (a.vma | b.vma) & vmap_axes(ctx)
        return [replace(a, vma=a.vma | joined), replace(b, vma=b.vma | joined)]

    def draw(self, draw, ctx, scope):
        if self._refusal(ctx) is not None:
            return None
        xs = scope.values(self.dtypes)
        if not xs:
            return None
        a = scope.pick(draw, xs)
        partners = [b for b in xs if scope.visible[b].shape == scope.visible[a].shape]
        b = draw(st.sampled_from(partners))  # (a itself is one)
        return {"op": self.name, "args": [a, b], "outs": [scope.new_var(), scope.new_var()]}

    def render(self, rr, eqn, args, outs, ctx, ind):
        return [f"{ind}from jax.experimental.shard_alike import shard_alike",
                f"{ind}{outs[0]}, {outs[1]} = shard_alike({args[0]}, {args[1]})"]


class OptimizationBarrier(_Identity):
    """``(x2, ...) = jax.lax.optimization_barrier((x, ...))`` of one or two operands (any numeric
    dtypes and shapes): results equal to them, with their types.

    Semantics: https://docs.jax.dev/en/latest/_autosummary/jax.lax.optimization_barrier.html
    (the identity; it keeps XLA from moving computation across it). Rules measured on jax
    0.10.2: eagerly, under jit, grad, vmap with and without spmd_axis_name, in shard_map bodies
    with check_vma on and off (eager and jit), on Auto and Explicit meshes. Since 0.5.3 here:
    ``jax.lax.optimization_barrier`` is missing on 0.4.29 and 0.4.31, and 0.4.38 has no
    differentiation rule for it ("Differentiation rule for 'optimization_barrier' not
    implemented"); 0.5.3 runs all of the above (measured).
    """

    name = "optimization_barrier"
    family = "sharding"
    n_args = frozenset({1, 2})
    n_outs = frozenset({1, 2})
    since = "0.5.3"
    feature_names = ("optimization_barrier",)

    explicit_rule = True

    def sharding_types(self, eqn, args, outs, ctx):
        """Each result its operand's (jax 0.10.2)."""
        return [a.spec for a in args]

    def types(self, eqn, args, ctx):
        """Its operands' types; in a shard_map body with check_vma on, each result varies over
        the checked manual axes any operand does: its abstract eval asks
        ``core.standard_vma_rule`` (jax/_src/lax/lax.py, since jax 0.6.0), so the operands are
        cast to vary alike (measured on 0.10.2: a barrier of an unvarying and an x-varying value
        under out_specs (P(), P('x')) raises "out_specs which require replication ...")."""
        require(len(eqn["outs"]) == len(args), "optimization_barrier has one result per operand")
        joined = frozenset().union(*(a.vma for a in args)) & checked_axes(ctx)
        return [replace(a, vma=a.vma | joined) for a in args]

    def draw(self, draw, ctx, scope):
        xs = scope.values(self.dtypes)
        if not xs:
            return None
        args = [scope.pick(draw, xs)]
        if draw(st.booleans()):
            args.append(draw(st.sampled_from(xs)))
        return {"op": self.name, "args": args, "outs": [scope.new_var() for _ in args]}

    def render(self, rr, eqn, args, outs, ctx, ind):
        lhs = outs[0] + "," if len(outs) == 1 else ", ".join(outs)
        return [f"{ind}{lhs} = jax.lax.optimization_barrier(({', '.join(args)}{',' if len(args) == 1 else ''}))"]


OPS = (WithShardingConstraint(), DevicePut(), Reshard(), ReshardSplit(), ShardAlike(), OptimizationBarrier())
