"""Seeded wrong-value bugs ("mutants") in JAX 0.10.2's own rules, for ``benchmarks/seeded.py``.

Each :class:`Mutant` is a small monkeypatch of one rule table of JAX (a batching rule in
``jax._src.interpreters.batching.fancy_primitive_batchers``, a transpose rule in
``jax._src.interpreters.ad.primitive_transposes``, a lowering in
``jax._src.interpreters.mlir._lowerings``, a DCE rule in
``jax._src.interpreters.partial_eval.dce_rules``), wrong only under one composition of
transforms, as real bugs are. Every patch *wraps* JAX's own rule (it changes the rule's
inputs or outputs) rather than copying it, and ``apply()`` returns a function that puts
the original entry back, so a process can apply and undo mutants in turn.

Each mutant has a *tiny check*: a few lines of JAX whose value differs with the mutant
applied (``check()``), and the NumPy value JAX gives without it (``expected()``).
``python benchmarks/mutants.py --check`` runs every check unpatched, patched and unpatched
again in this one process and prints one JSON line per mutant; tests/test_seeded.py runs
it.

This module is also imported by the worker wrapper of ``benchmarks/seeded.py`` inside the
shardfuzz worker process, so it imports only the standard library and (lazily) NumPy and
JAX, never shardfuzz. The rules it patches are those of jax 0.10.2
(``jax/_src/lax/parallel.py``, ``jax/_src/shard_map.py``, ``jax/_src/callback.py``,
``jax/_src/interpreters/partial_eval.py``); on another release ``apply()`` may raise
AttributeError or KeyError.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Mutant:
    """One seeded bug.

    ``name``: identifier; ``kind``: batching, transpose, lowering, vma, shard_map or
    callback; ``rule``: the JAX rule patched (module and table); ``breaks``: what goes
    wrong, one line; ``composition``: the programs under which it is wrong (elsewhere the
    rule behaves); ``apply()``: patch JAX (already imported), return an undo function;
    ``check()`` / ``expected()``: the tiny check's value (a float32 NumPy array) and the
    value unpatched JAX gives; ``control()`` / ``control_expected()``: the same op in another
    composition, whose value the mutant leaves right (it is wrong only where it says).
    """

    name: str
    kind: str
    rule: str
    breaks: str
    composition: str
    apply: Callable[[], Callable[[], None]]
    check: Callable[[], "object"]
    expected: Callable[[], "object"]
    control: Callable[[], "object"]
    control_expected: Callable[[], "object"]


# ------------------------------------------------------------------ patch helpers

def _swap(table: dict, key, value) -> Callable[[], None]:
    """Set ``table[key] = value``; return a function that restores the old entry."""
    missing = key not in table
    old = table.get(key)
    table[key] = value

    def undo() -> None:
        if missing:
            table.pop(key, None)
        else:
            table[key] = old
    return undo


def _undo_all(undos: list) -> Callable[[], None]:
    def undo() -> None:
        for u in reversed(undos):
            u()
    return undo


def _names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _inverse(perm) -> tuple:
    return tuple((dst, src) for src, dst in perm)


def _swap_lowering(prim, make_rule) -> Callable[[], None]:
    """Replace the platform-independent lowering of ``prim`` by ``make_rule(original rule)``."""
    from jax._src.interpreters import mlir

    entry = mlir._lowerings[prim]
    new = mlir.LoweringRuleEntry(make_rule(entry.rule), entry.inline)
    return _swap(mlir._lowerings, prim, new)


def _swap_transpose(prim, make_rule) -> Callable[[], None]:
    """Replace the transpose rule of a linear primitive (``ad.deflinear2``) by a wrapped one.

    ``make_rule(original)`` gets JAX's ``transpose_rule(cts, *args, **params)`` (the
    function ``deflinear2`` was given) and returns the mutated one.
    """
    from jax._src.interpreters import ad

    entry = ad.primitive_transposes[prim]
    original = entry.args[0]  # partial(linear_transpose2, transpose_rule)
    return _swap(ad.primitive_transposes, prim, type(entry)(entry.func, make_rule(original)))


def _interleave(x, axis: int, n: int):
    """``x`` with its dim ``axis`` (n blocks of size c, block-major) reordered element-major.

    (n, c) -> (c, n): the order a transposed fold gives. A no-op when n == 1 or c == 1.
    """
    from jax import lax

    shape = tuple(x.shape)
    c = shape[axis] // n
    y = lax.reshape(x, shape[:axis] + (n, c) + shape[axis + 1:])
    perm = list(range(y.ndim))
    perm[axis], perm[axis + 1] = perm[axis + 1], perm[axis]
    return lax.reshape(lax.transpose(y, perm), shape)


# ------------------------------------------------------------------ the mutants

def _apply_ppermute_batch_inverse():
    from jax._src.interpreters import batching
    from jax._src.lax import parallel as par

    orig = batching.fancy_primitive_batchers[par.ppermute_p]

    def rule(axis_data, vals_in, dims_in, *, axis_name, perm):
        if _names(axis_name) == (axis_data.name,):  # a ppermute over the vmap axis alone
            perm = _inverse(perm)
        return orig(axis_data, vals_in, dims_in, axis_name=axis_name, perm=perm)
    return _swap(batching.fancy_primitive_batchers, par.ppermute_p, rule)


def _check_ppermute_batch_inverse():
    import jax
    import numpy as np

    perm = [(j, (j + 1) % 4) for j in range(4)]
    f = jax.vmap(lambda x: jax.lax.ppermute(x, "i", perm=perm), axis_name="i")
    return np.asarray(f(np.arange(4, dtype=np.float32)))


def _apply_ppermute_transpose_forward():
    from jax._src.lax import parallel as par

    def make(orig):
        def rule(t, x, perm, axis_name):
            # JAX's rule inverts the permutation; handing it the inverse makes it send the
            # cotangent the forward way
            return orig(t, x, perm=_inverse(perm), axis_name=axis_name)
        return rule
    return _swap_transpose(par.ppermute_p, make)


def _check_ppermute_transpose_forward():
    import jax
    import numpy as np

    perm = [(j, (j + 1) % 4) for j in range(4)]

    def loss(x, w):
        return w * jax.lax.ppermute(x, "i", perm=perm)
    g = jax.vmap(jax.grad(loss), axis_name="i")
    return np.asarray(g(np.ones(4, np.float32), np.arange(1, 5, dtype=np.float32)))


def _apply_all_gather_batch_interleave():
    from jax._src.interpreters import batching
    from jax._src.lax import parallel as par

    orig = batching.fancy_primitive_batchers[par.all_gather_p]

    def rule(axis_data, vals_in, dims_in, *, all_gather_dimension, axis_name, axis_index_groups, axis_size,
             tiled):
        out, d = orig(axis_data, vals_in, dims_in, all_gather_dimension=all_gather_dimension,
                      axis_name=axis_name, axis_index_groups=axis_index_groups, axis_size=axis_size, tiled=tiled)
        if tiled and _names(axis_name) == (axis_data.name,) and d is None:
            out = _interleave(out, all_gather_dimension, axis_data.size)  # folds (chunk, example), not (example, chunk)
        return out, d
    return _swap(batching.fancy_primitive_batchers, par.all_gather_p, rule)


def _check_all_gather_batch_interleave():
    import jax
    import numpy as np

    f = jax.vmap(lambda x: jax.lax.all_gather(x, "i", axis=0, tiled=True), axis_name="i")
    return np.asarray(f(np.arange(8, dtype=np.float32).reshape(4, 2)))


def _apply_all_gather_transpose_mean():
    from jax._src.lax import parallel as par

    def make(orig):
        def rule(cts, x, *, all_gather_dimension, axis_name, axis_index_groups, axis_size, tiled):
            out = orig(cts, x, all_gather_dimension=all_gather_dimension, axis_name=axis_name,
                       axis_index_groups=axis_index_groups, axis_size=axis_size, tiled=tiled)
            if not tiled:  # a stacked (untiled) all_gather: the cotangents are averaged, not summed
                out = tuple(o / axis_size for o in out)
            return out
        return rule
    return _swap_transpose(par.all_gather_p, make)


def _check_all_gather_transpose_mean():
    import jax
    import jax.numpy as jnp
    import numpy as np

    def loss(x, w):
        return jnp.sum(w * jax.lax.all_gather(x, "i", axis=0, tiled=False))
    g = jax.vmap(jax.grad(loss), axis_name="i")
    return np.asarray(g(np.ones(4, np.float32), np.arange(16, dtype=np.float32).reshape(4, 4)))


def _apply_psum_scatter_transpose_axis0():
    from jax._src.lax import parallel as par

    def make(orig):
        def rule(cts, x, *, axis_name, scatter_dimension, axis_index_groups, axis_size, tiled):
            if scatter_dimension == 0 or not tiled:
                return orig(cts, x, axis_name=axis_name, scatter_dimension=scatter_dimension,
                            axis_index_groups=axis_index_groups, axis_size=axis_size, tiled=tiled)
            # gathers the cotangent along dim 0 and reshapes, instead of gathering along the
            # scatter dimension: right only when every dim before it has size 1
            g, = orig(cts, x, axis_name=axis_name, scatter_dimension=0, axis_index_groups=axis_index_groups,
                      axis_size=axis_size, tiled=tiled)
            return (g.reshape(x.aval.shape),)
        return rule
    return _swap_transpose(par.reduce_scatter_p, make)


def _check_psum_scatter_transpose_axis0():
    import jax
    import jax.numpy as jnp
    import numpy as np

    def loss(x, w):
        return jnp.sum(w * jax.lax.psum_scatter(x, "i", scatter_dimension=1, tiled=True))
    g = jax.vmap(jax.grad(loss), axis_name="i")
    return np.asarray(g(np.ones((4, 2, 4), np.float32), np.arange(8, dtype=np.float32).reshape(4, 2, 1)))


def _apply_ppermute_lowering_multigroup():
    from jax._src.lax import parallel as par

    def make(orig):
        def rule(ctx, x, *, axis_name, perm):
            groups = par._replica_groups(ctx.module_context.axis_context, axis_name, None)
            if len(groups) > 1:  # the mesh has other (non-trivial) axes: several replica groups
                perm = _inverse(perm)
            return orig(ctx, x, axis_name=axis_name, perm=perm)
        return rule
    return _swap_lowering(par.ppermute_p, make)


def _mesh(shape: tuple, names: tuple):
    import jax
    import numpy as np

    return jax.sharding.Mesh(np.array(jax.devices()[:math.prod(shape)]).reshape(shape), names)


def _check_ppermute_lowering_multigroup():
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    mesh = _mesh((2, 4), ("a", "b"))
    perm = [(j, (j + 1) % 4) for j in range(4)]
    f = jax.jit(jax.shard_map(lambda x: jax.lax.ppermute(x, "b", perm=perm), mesh=mesh,
                              in_specs=P("a", "b"), out_specs=P("a", "b")))
    return np.asarray(f(np.arange(8, dtype=np.float32).reshape(2, 4)))


def _apply_psum_lowering_two_axes():
    from jax._src.lax import parallel as par

    def drop_minor(axes: tuple) -> tuple:
        named = [a for a in axes if not isinstance(a, int)]
        return tuple(a for a in axes if a != named[-1]) if len(named) >= 2 else axes

    def make_psum(orig):
        def rule(ctx, arg, *, axes, axis_index_groups):
            return orig(ctx, arg, axes=drop_minor(tuple(axes)), axis_index_groups=axis_index_groups)
        return rule

    def make_invariant(orig):
        def rule(ctx, arg, *, axes):
            return orig(ctx, arg, axes=drop_minor(tuple(axes)))
        return rule
    return _undo_all([_swap_lowering(par.psum_p, make_psum),
                      _swap_lowering(par.psum_invariant_p, make_invariant)])


def _check_psum_lowering_two_axes():
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    mesh = _mesh((2, 4), ("a", "b"))
    f = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, ("a", "b")), mesh=mesh,
                              in_specs=P("a", "b"), out_specs=P()))
    return np.asarray(f(np.arange(8, dtype=np.float32).reshape(2, 4)))


def _apply_psum_batch_unbatched_multi():
    from jax._src.interpreters import batching
    from jax._src.lax import parallel as par

    undos = []
    for prim in (par.psum_p, par.psum_invariant_p):
        orig = batching.fancy_primitive_batchers[prim]

        def rule(axis_data, vals_in, dims_in, *, axes, _orig=orig, **params):
            out, d = _orig(axis_data, vals_in, dims_in, axes=axes, **params)
            if dims_in[0] is None and axis_data.name in axes and len(axes) > 1:
                out = out / axis_data.size  # forgets the vmap axis' size for an unbatched operand
            return out, d
        undos.append(_swap(batching.fancy_primitive_batchers, prim, rule))
    return _undo_all(undos)


def _check_psum_batch_unbatched_multi():
    import jax
    import numpy as np

    def outer(x):
        inner = jax.vmap(lambda y: jax.lax.psum(x, ("i", "j")) + 0 * y, axis_name="j")
        return inner(np.zeros(4, np.float32))
    return np.asarray(jax.vmap(outer, axis_name="i")(np.arange(1, 3, dtype=np.float32)))


def _apply_all_to_all_batch_interleave():
    from jax._src.interpreters import batching
    from jax._src.lax import parallel as par

    orig = batching.fancy_primitive_batchers[par.all_to_all_p]

    def rule(axis_data, vals_in, dims_in, *, axis_name, split_axis, concat_axis, axis_index_groups, tiled):
        out, d = orig(axis_data, vals_in, dims_in, axis_name=axis_name, split_axis=split_axis,
                      concat_axis=concat_axis, axis_index_groups=axis_index_groups, tiled=tiled)
        if _names(axis_name) == (axis_data.name,) and split_axis == concat_axis and d is not None:
            axis = split_axis + (d <= split_axis)  # the split (= concat) dim in the batched output
            out = _interleave(out, axis, axis_data.size)
        return out, d
    return _swap(batching.fancy_primitive_batchers, par.all_to_all_p, rule)


def _check_all_to_all_batch_interleave():
    import jax
    import numpy as np

    f = jax.vmap(lambda x: jax.lax.all_to_all(x, "i", 0, 0, tiled=True), axis_name="i")
    return np.asarray(f(np.arange(8, dtype=np.float32).reshape(2, 4)))


def _apply_shard_map_transpose_nodiv():
    from jax._src import dtypes
    from jax._src import shard_map as sm
    from jax._src.interpreters import ad

    orig = ad.primitive_transposes[sm.shard_map_p]

    def rule(out_cts, *args, jaxpr, mesh, in_specs, out_specs, check_vma, newly_manual_axes):
        if not check_vma:
            # pre-multiply what JAX divides by: the cotangent of an output replicated over
            # unmentioned manual axes is no longer divided by their size
            scaled = []
            for sp, x in zip(out_specs, out_cts):
                if type(x) is not ad.Zero and dtypes.dtype(x) != dtypes.float0:
                    n = math.prod(mesh.shape[a] for a in sm._unmentioned2(mesh, sp.to_ct_spec(), newly_manual_axes))
                    x = x * n if n != 1 else x
                scaled.append(x)
            out_cts = scaled
        return orig(out_cts, *args, jaxpr=jaxpr, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                    check_vma=check_vma, newly_manual_axes=newly_manual_axes)
    return _swap(ad.primitive_transposes, sm.shard_map_p, rule)


def _check_shard_map_transpose_nodiv():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    mesh = _mesh((4,), ("a",))
    f = jax.shard_map(lambda b: jax.lax.psum(b * b, "a"), mesh=mesh, in_specs=P("a"), out_specs=P(),
                      check_vma=False)
    return np.asarray(jax.grad(lambda x: jnp.sum(f(x)))(np.arange(4, dtype=np.float32)))


def _apply_pvary_transpose_mean():
    from jax._src import core

    def make(orig):
        def rule(cts, arg, *, axes):
            out, = orig(cts, arg, axes=axes)
            n = math.prod(core.get_axis_env().axis_size(a) for a in axes)
            return (out / n,)  # the mean of the cotangents over the axes, not their sum
        return rule
    return _swap_transpose(core.pvary_p, make)


def _check_pvary_transpose_mean():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    mesh = _mesh((4,), ("a",))
    f = jax.shard_map(lambda w, b: w * b, mesh=mesh, in_specs=(P(), P("a")), out_specs=P("a"))
    g = jax.grad(lambda w, x: jnp.sum(f(w, x)))
    return np.asarray(g(np.ones(1, np.float32), np.arange(4, dtype=np.float32)))


def _apply_io_callback_batch_reversed():
    from jax import lax
    from jax._src import callback
    from jax._src.interpreters import batching

    orig = batching.fancy_primitive_batchers[callback.io_callback_p]

    def rule(axis_data, vals, dims, **params):
        outs, out_dims = orig(axis_data, vals, dims, **params)
        if params["result_avals"] and any(d is not None for d in dims):
            # the results of the looped callback come back in reverse example order
            outs = [lax.rev(o, (d,)) if d is not None else o for o, d in zip(outs, out_dims)]
        return outs, out_dims
    return _swap(batching.fancy_primitive_batchers, callback.io_callback_p, rule)


def _check_io_callback_batch_reversed():
    import jax
    import numpy as np
    from jax.experimental import io_callback

    def f(x):
        return io_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return np.asarray(jax.vmap(f)(np.arange(4, dtype=np.float32)))


def _apply_io_callback_dce_unordered():
    from jax._src import callback
    from jax._src.interpreters import partial_eval as pe

    def rule(used_outs, eqn):
        if not any(used_outs) and not eqn.params["ordered"]:  # an unordered callback nobody reads: dropped
            return [False] * len(eqn.invars), None
        return [True] * len(eqn.invars), eqn
    return _swap(pe.dce_rules, callback.io_callback_p, rule)


def _check_io_callback_dce_unordered():
    import jax
    import numpy as np
    from jax.experimental import io_callback

    seen = []

    def f(x):
        io_callback(lambda v: seen.append(float(np.sum(v))), None, x)
        return x + 1
    jax.block_until_ready(jax.jit(f)(np.arange(4, dtype=np.float32)))
    jax.effects_barrier()
    return np.asarray(seen, np.float32)


# ------------------------------------------------------------------ controls: the same ops, other compositions

def _control_ppermute_batch_inverse():  # a ppermute over a mesh axis in shard_map: no batching rule
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    perm = [(j, (j + 1) % 4) for j in range(4)]
    f = jax.jit(jax.shard_map(lambda x: jax.lax.ppermute(x, "a", perm=perm), mesh=_mesh((4,), ("a",)),
                              in_specs=P("a"), out_specs=P("a")))
    return np.asarray(f(np.arange(4, dtype=np.float32)))


def _control_ppermute_transpose_forward():  # a shift of 2 on 4 is its own inverse
    import jax
    import numpy as np

    perm = [(j, (j + 2) % 4) for j in range(4)]
    g = jax.vmap(jax.grad(lambda x, w: w * jax.lax.ppermute(x, "i", perm=perm)), axis_name="i")
    return np.asarray(g(np.ones(4, np.float32), np.arange(1, 5, dtype=np.float32)))


def _control_all_gather_batch_interleave():  # an untiled (stacking) all_gather over the vmap axis
    import jax
    import numpy as np

    f = jax.vmap(lambda x: jax.lax.all_gather(x, "i", axis=0, tiled=False), axis_name="i")
    return np.asarray(f(np.arange(8, dtype=np.float32).reshape(4, 2)))


def _control_all_gather_transpose_mean():  # the transpose of a tiled all_gather
    import jax
    import jax.numpy as jnp
    import numpy as np

    g = jax.vmap(jax.grad(lambda x, w: jnp.sum(w * jax.lax.all_gather(x, "i", axis=0, tiled=True))),
                 axis_name="i")
    return np.asarray(g(np.ones((4, 1), np.float32), np.arange(16, dtype=np.float32).reshape(4, 4)))


def _control_psum_scatter_transpose_axis0():  # scatter_dimension 0
    import jax
    import jax.numpy as jnp
    import numpy as np

    g = jax.vmap(jax.grad(lambda x, w: jnp.sum(w * jax.lax.psum_scatter(x, "i", scatter_dimension=0, tiled=True))),
                 axis_name="i")
    return np.asarray(g(np.ones((4, 4, 2), np.float32), np.arange(8, dtype=np.float32).reshape(4, 1, 2)))


def _control_ppermute_lowering_multigroup():  # a one-axis mesh: one replica group
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    perm = [(j, (j + 1) % 4) for j in range(4)]
    f = jax.jit(jax.shard_map(lambda x: jax.lax.ppermute(x, "a", perm=perm), mesh=_mesh((4,), ("a",)),
                              in_specs=P("a"), out_specs=P("a")))
    return np.asarray(f(np.arange(4, dtype=np.float32)))


def _control_psum_lowering_two_axes():  # a psum over one of two mesh axes
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    f = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, "b"), mesh=_mesh((2, 4), ("a", "b")),
                              in_specs=P("a", "b"), out_specs=P("a")))
    return np.asarray(f(np.arange(8, dtype=np.float32).reshape(2, 4)))


def _control_psum_batch_unbatched_multi():  # the same unbatched value, psum over the vmap axis alone
    import jax
    import numpy as np

    def outer(x):
        inner = jax.vmap(lambda y: jax.lax.psum(x, "j") + 0 * y, axis_name="j")
        return inner(np.zeros(4, np.float32))
    return np.asarray(jax.vmap(outer, axis_name="i")(np.arange(1, 3, dtype=np.float32)))


def _control_all_to_all_batch_interleave():  # split_axis 0, concat_axis 1
    import jax
    import numpy as np

    f = jax.vmap(lambda x: jax.lax.all_to_all(x, "i", 0, 1, tiled=True), axis_name="i")
    return np.asarray(f(np.arange(8, dtype=np.float32).reshape(2, 2, 2)))


def _control_shard_map_transpose_nodiv():  # the same shard_map with check_vma on
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    f = jax.shard_map(lambda b: jax.lax.psum(b * b, "a"), mesh=_mesh((4,), ("a",)), in_specs=P("a"),
                      out_specs=P(), check_vma=True)
    return np.asarray(jax.grad(lambda x: jnp.sum(f(x)))(np.arange(4, dtype=np.float32)))


def _control_pvary_transpose_mean():  # both arguments varying: no pvary to transpose
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    f = jax.shard_map(lambda w, b: w * b, mesh=_mesh((4,), ("a",)), in_specs=(P("a"), P("a")), out_specs=P("a"))
    g = jax.grad(lambda w, x: jnp.sum(f(w, x)))
    return np.asarray(g(np.ones(4, np.float32), np.arange(4, dtype=np.float32)))


def _control_io_callback_batch_reversed():  # a returning io_callback under jit, not vmap
    import jax
    import numpy as np
    from jax.experimental import io_callback

    def f(x):
        return io_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return np.asarray(jax.jit(f)(np.arange(4, dtype=np.float32)))


def _control_io_callback_dce_unordered():  # an ordered io_callback without a result under jit
    import jax
    import numpy as np
    from jax.experimental import io_callback

    seen = []

    def f(x):
        io_callback(lambda v: seen.append(float(np.sum(v))), None, x, ordered=True)
        return x + 1
    jax.block_until_ready(jax.jit(f)(np.arange(4, dtype=np.float32)))
    jax.effects_barrier()
    return np.asarray(seen, np.float32)


def _expect(values) -> Callable:
    def expected():
        import numpy as np

        return np.asarray(values, np.float32)
    return expected


MUTANTS = [
    Mutant("ppermute_batch_inverse", "batching", "lax/parallel.py _ppermute_batcher (fancy_primitive_batchers)",
           "a ppermute over a vmap axis moves each example the inverse way",
           "vmap(axis_name=i) with ppermute over 'i' alone, a full permutation that is not its own inverse",
           _apply_ppermute_batch_inverse, _check_ppermute_batch_inverse, _expect([3, 0, 1, 2]),
           _control_ppermute_batch_inverse, _expect([3, 0, 1, 2])),
    Mutant("ppermute_transpose_forward", "transpose", "lax/parallel.py _ppermute_transpose_rule (primitive_transposes)",
           "the transpose of ppermute sends the cotangent along the forward permutation, not its inverse",
           "grad / vjp through a ppermute (over a mesh or vmap axis) whose permutation is not its own "
           "inverse, and a cotangent that differs between devices / examples",
           _apply_ppermute_transpose_forward, _check_ppermute_transpose_forward, _expect([2, 3, 4, 1]),
           _control_ppermute_transpose_forward, _expect([3, 4, 1, 2])),
    Mutant("all_gather_batch_interleave", "batching",
           "lax/parallel.py _all_gather_batched_collective (fancy_primitive_batchers)",
           "a tiled all_gather over a vmap axis interleaves the examples' elements instead of concatenating blocks",
           "vmap(axis_name=i) with all_gather(tiled=True) over 'i' of a value whose gathered dim is > 1",
           _apply_all_gather_batch_interleave, _check_all_gather_batch_interleave,
           _expect([list(range(8))] * 4),
           _control_all_gather_batch_interleave, _expect([[[0, 1], [2, 3], [4, 5], [6, 7]]] * 4)),
    Mutant("all_gather_transpose_mean", "transpose",
           "lax/parallel.py _all_gather_transpose_rule (primitive_transposes)",
           "the transpose of an untiled all_gather averages the cotangents instead of summing them",
           "grad / vjp through all_gather(tiled=False) over an axis of size >= 2",
           _apply_all_gather_transpose_mean, _check_all_gather_transpose_mean, _expect([24, 28, 32, 36]),
           _control_all_gather_transpose_mean, _expect([[24], [28], [32], [36]])),
    Mutant("psum_scatter_transpose_axis0", "transpose",
           "lax/parallel.py _reduce_scatter_transpose_rule (primitive_transposes)",
           "the transpose of psum_scatter gathers the cotangent along dim 0 and reshapes, instead of along the "
           "scatter dimension",
           "grad / vjp through psum_scatter with scatter_dimension >= 1 and a dim > 1 before it, axis size >= 2",
           _apply_psum_scatter_transpose_axis0, _check_psum_scatter_transpose_axis0,
           _expect([[[0, 2, 4, 6], [1, 3, 5, 7]]] * 4),
           _control_psum_scatter_transpose_axis0, _expect([[[0, 1], [2, 3], [4, 5], [6, 7]]] * 4)),
    Mutant("ppermute_lowering_multigroup", "lowering", "lax/parallel.py _ppermute_lowering (mlir._lowerings)",
           "ppermute lowers with the inverse permutation when there are several replica groups",
           "ppermute inside shard_map over one axis of a mesh whose other axes make >= 2 groups, a "
           "permutation that is not its own inverse",
           _apply_ppermute_lowering_multigroup, _check_ppermute_lowering_multigroup,
           _expect([[3, 0, 1, 2], [7, 4, 5, 6]]),
           _control_ppermute_lowering_multigroup, _expect([3, 0, 1, 2])),
    Mutant("psum_lowering_two_axes", "lowering",
           "lax/parallel.py _allreduce_lowering for psum_p and psum_invariant_p (mlir._lowerings)",
           "a psum over two or more mesh axes lowers to an all-reduce over all but the last of them",
           "psum / pmean over two manual mesh axes, the last of size >= 2, inside shard_map",
           _apply_psum_lowering_two_axes, _check_psum_lowering_two_axes, _expect([[28.0]]),
           _control_psum_lowering_two_axes, _expect([[6], [22]])),
    Mutant("psum_batch_unbatched_multi", "batching",
           "lax/parallel.py _constant_reduction via _batched_reduction_collective (fancy_primitive_batchers)",
           "a psum over a vmap axis and another axis of a value the vmap does not batch forgets the vmap axis' size",
           "psum / pmean over ('vmap axis', another axis) of a value unbatched by that vmap (in_axes=None or a "
           "capture), vmap size >= 2",
           _apply_psum_batch_unbatched_multi, _check_psum_batch_unbatched_multi, _expect([[12] * 4] * 2),
           _control_psum_batch_unbatched_multi, _expect([[4] * 4, [8] * 4])),
    Mutant("all_to_all_batch_interleave", "batching",
           "lax/parallel.py _all_to_all_batched_collective (fancy_primitive_batchers)",
           "a tiled all_to_all over a vmap axis with split_axis == concat_axis interleaves the received chunks",
           "vmap(axis_name=i) with all_to_all over 'i', split_axis == concat_axis, split dim > the axis size",
           _apply_all_to_all_batch_interleave, _check_all_to_all_batch_interleave,
           _expect([[0, 1, 4, 5], [2, 3, 6, 7]]),
           _control_all_to_all_batch_interleave, _expect([[[0, 1, 4, 5]], [[2, 3, 6, 7]]])),
    Mutant("shard_map_transpose_nodiv", "shard_map", "shard_map.py _shard_map_transpose (primitive_transposes)",
           "with check_vma=False the cotangent of an output replicated over unmentioned manual axes is not divided "
           "by their size",
           "grad / vjp through shard_map(check_vma=False) whose out_specs leave a manual axis of size >= 2 "
           "unmentioned",
           _apply_shard_map_transpose_nodiv, _check_shard_map_transpose_nodiv, _expect([0, 2, 4, 6]),
           _control_shard_map_transpose_nodiv, _expect([0, 2, 4, 6])),
    Mutant("pvary_transpose_mean", "vma", "lax/parallel.py _pvary_transpose_rule (primitive_transposes)",
           "the transpose of pvary (the implicit unvarying->varying cast) averages over the axes instead of summing",
           "grad / vjp through shard_map(check_vma=True) where a value unvarying over a manual axis of size >= 2 "
           "meets a varying one",
           _apply_pvary_transpose_mean, _check_pvary_transpose_mean, _expect([6.0]),
           _control_pvary_transpose_mean, _expect([0, 1, 2, 3])),
    Mutant("io_callback_batch_reversed", "callback", "callback.py io_callback_batching_rule (fancy_primitive_batchers)",
           "under vmap, the results of a returning io_callback come back in reverse example order",
           "vmap (batch >= 2) of an io_callback that returns a value, examples that differ",
           _apply_io_callback_batch_reversed, _check_io_callback_batch_reversed, _expect([0, 2, 4, 6]),
           _control_io_callback_batch_reversed, _expect([0, 2, 4, 6])),
    Mutant("io_callback_dce_unordered", "callback", "interpreters/partial_eval.py dce_rules[io_callback_p]",
           "an unordered io_callback whose results nobody uses is removed by dead-code elimination",
           "jit (or another staging that runs DCE) around an unordered io_callback without a result",
           _apply_io_callback_dce_unordered, _check_io_callback_dce_unordered, _expect([6.0]),
           _control_io_callback_dce_unordered, _expect([6.0])),
]
BY_NAME = {m.name: m for m in MUTANTS}


def apply(name: str) -> Callable[[], None]:
    """Apply the mutant called ``name`` to the JAX imported in this process; return its undo.

    Raises KeyError (unknown name; the message lists the names).
    """
    if name not in BY_NAME:
        raise KeyError(f"unknown mutant {name!r}; known: {', '.join(BY_NAME)}")
    return BY_NAME[name].apply()


def run_checks(names=None) -> list:
    """Every tiny check unpatched, patched, and unpatched again (after undo), in this process.

    Then the control check, patched. Returns one dict per mutant: ``name``, ``expected``,
    ``unpatched``, ``patched``, ``undone``, ``control_expected``, ``control_patched`` (nested
    lists of floats, or ``{"error": message}`` where a check raised).
    JAX caches are cleared around each patch (``jax.clear_caches``) so a compiled
    function from one state is not reused in the other.
    """
    import jax
    import numpy as np

    def value(fn):
        try:
            return np.asarray(fn(), np.float32).tolist()
        except Exception as e:  # a mutant may make its check raise: report it, go on
            return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]}

    rows = []
    for m in MUTANTS:
        if names and m.name not in names:
            continue
        row = {"name": m.name, "expected": value(m.expected), "unpatched": value(m.check)}
        undo = m.apply()
        jax.clear_caches()
        try:
            row["patched"] = value(m.check)
        finally:
            undo()
            jax.clear_caches()
        row["undone"] = value(m.check)
        row["control_expected"] = value(m.control_expected)
        undo = m.apply()
        jax.clear_caches()
        try:
            row["control_patched"] = value(m.control)
        finally:
            undo()
            jax.clear_caches()
        rows.append(row)
    return rows


def main() -> None:
    import argparse
    import json

    ap = argparse.ArgumentParser(description="Run the mutants' tiny checks (unpatched, patched, undone).")
    ap.add_argument("--check", action="store_true", help="run the tiny checks; one JSON line per mutant")
    ap.add_argument("--list", action="store_true", help="list the mutants")
    ap.add_argument("names", nargs="*", help="only these mutants")
    args = ap.parse_args()
    if args.list or not args.check:
        for m in MUTANTS:
            print(f"{m.name:32s} {m.kind:10s} {m.breaks}")
        return
    unknown = [n for n in args.names if n not in BY_NAME]
    if unknown:
        print(f"unknown mutant(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}", file=sys.stderr)
        sys.exit(2)
    os.environ["XLA_FLAGS"] = " ".join(
        [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
        + ["--xla_force_host_platform_device_count=8"])
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    for row in run_checks(args.names):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
