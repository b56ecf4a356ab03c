"""Collectives over named axes in scope (manual mesh axes, named vmap axes).

Typing (jax 0.10, ``jax.typeof(x).manual_axis_type.varying``, measured): ``psum pmax pmin
pmean`` remove the named axes from the varying set; ``all_gather psum_scatter ppermute
all_to_all axis_index`` add theirs. A psum over an axis a value does not vary over
multiplies it by the axis size. The experimental shard_map's ``check_rep`` (release rule
``check_rep``) refuses pmax / pmin over a checked axis and a psum / pmean of a value
replicated over it ("Collective psum must be applied to a device-varying replication
type", measured on jax 0.4.26).

``axis_index`` is rendered as ``x + lax.axis_index(axes)`` (a value of x's dtype that varies
over the axes).

Dtypes (measured on jax 0.10.2, jit of shard_map on 8 CPU devices): psum / pmax / pmin /
psum_scatter / axis_index keep int32 and the float dtypes (a bfloat16 psum is the float32
sum rounded once); pmean takes float dtypes (of int32 it divides as an integer); ppermute,
all_gather and all_to_all move any dtype, bool included (a psum of bool gives int32: not
drawn). Reference: reductions, stacks, gathers and reshapes over the lock-step
named dims (fuzz.reference).
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from fuzz.ops.base import (AXES, BOOL, DIM, FLOATS, INT, NUMERIC, ONE_AXIS, PERM, PPERMUTE_MESH_ORDER,
                           UNREDUCED_NEEDS_JIT, VALUE_DTYPES, ExprOp, Ty, checked_axes, compute, require)


def checked_usable(ctx) -> list:
    """Checked manual axes a collective may name here (sorted): what the casts pvary and
    unreduced_psum act on."""
    return sorted(checked_axes(ctx) & frozenset(ctx.collective_axes()))


def require_checked(op: str, ctx, names) -> None:
    """ProgramError unless every axis of ``names`` is a manual mesh axis with check_vma on."""
    for n in names:
        ax = ctx.axis(n)
        require(ax.kind == "mesh" and ax.check_vma, f"{op} over {n!r}, which is not a checked manual mesh axis")


def check_rep(ctx, caps) -> bool:
    """Whether the experimental shard_map's check_rep rules apply here (some axis is checked)."""
    return (caps.get("check_kw") == "check_rep" or "check_rep" in ctx.rules) and bool(checked_axes(ctx))


class Collective(ExprOp):
    family = "collective"
    params = {"axes": ONE_AXIS}
    dtypes = VALUE_DTYPES  # what it moves keeps its dtype; the reducing ones narrow this
    least_size = 2  # one_axis draws axes at least this large 3 times in 4 (see _exchanging_first)

    def types(self, eqn, args, ctx):
        (a,) = args
        names = eqn["axes"]
        allowed = ctx.collective_axes()
        for n in names:
            require(n in allowed, f"{self.name} over axis {n!r}, which is not usable here (in scope: {allowed})")
        require(len(set(names)) == len(names), f"{self.name} names an axis twice")
        return [self.result(eqn, a, ctx, names)]

    def result(self, eqn, a: Ty, ctx, names: list) -> Ty:
        raise NotImplementedError

    def axes_js(self, eqn, ctx) -> tuple:
        return tuple(next(j for j, a in enumerate(ctx.axes) if a.name == n) for n in eqn["axes"])

    def features(self, eqn):
        return set(self.feature_names) or {self.name}

    def one_axis(self, draw, ctx, scope=None, usable=None) -> str | None:
        """The axis of a one-axis collective, or None when no axis is usable here.

        ``usable``: a test of an axis name (e.g. some operand's dim divides by its size);
        only the axes that pass it are drawn. With ``scope``: 3 times in 4 among the axes
        some value in scope it takes varies over (when there are any; see
        :func:`_varying_first`), then 3 times in 4 among those of size >= ``least_size``
        (:func:`_exchanging_first`).
        """
        axes = [n for n in ctx.collective_axes() if usable is None or usable(n)]
        if not axes:
            return None
        if scope is not None:
            varied = frozenset().union(*(scope.visible[v].vma for v in scope.values(self.dtypes)))
            axes = _preferred(draw, axes, [n for n in axes if n in varied])
        return draw(st.sampled_from(_exchanging_first(draw, ctx, axes, self.least_size)))


def _preferred(draw, names: list, better: list) -> list:
    """``better`` 3 times in 4 when it is a non-empty proper part of ``names``, else ``names``."""
    if better and len(better) < len(names) and draw(st.integers(0, 3)) > 0:
        return better
    return names


def _exchanging_first(draw, ctx, names: list, least: int = 2) -> list:
    """``names``, or 3 times in 4 only those of size >= ``least`` when there are any.

    A collective over a size-1 axis exchanges nothing (it is the identity, or a copy): its
    batching, transpose and lowering rules do their work only over an axis of size >= 2.
    Meshes and vmaps have size-1 axes often (programs shrink toward them): without this,
    half of the collectives drawn were over one (60 of 115 over 600 drawn programs, seed
    1). Size-1 axes stay in a quarter of the draws. When no axis is ``least`` large (a
    ppermute asks for 3, and a body's axes are often all of size 1 or 2), those of size >= 2
    are preferred instead: before, such a ppermute took a size-1 axis as often as a size-2 one.
    """
    better = [n for n in names if ctx.axis(n).size >= least]
    if not better and least > 2:
        better = [n for n in names if ctx.axis(n).size >= 2]
    return _preferred(draw, names, better)


def _varying_first(draw, scope, cands: list, names) -> object:
    """One of ``cands`` (variables, or (variable, dim) pairs), drawn among those that vary over
    one of the axes ``names`` 3 times in 4 when there are any.

    A collective's batching and transpose rules do their work on a value that differs along
    its axes; on an unvarying one most mistakes cancel out (the seeded-bug benchmark's
    batching mutants stayed silent while every drawn operand was unvarying).
    """
    def var(c):
        return c[0] if isinstance(c, tuple) else c

    varying = [c for c in cands if scope.visible[var(c)].vma & set(names)]
    if varying and draw(st.integers(0, 3)) > 0:
        return scope.sample(draw, varying, var)
    return scope.sample(draw, cands, var)


def _sum(r, x, axis, keepdims: bool = False):
    """The sum of the lock-step array ``x`` over ``axis`` as XLA computes it: int32 wraps (NumPy's
    int32 sum would widen to int64), bfloat16 / float16 are summed in float32 and rounded once."""
    if str(x.dtype) == INT and r.xp is np:
        return np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int32)
    return compute(r, str(x.dtype), lambda v: r.xp.sum(v, axis=axis, keepdims=keepdims), x)


class Reducing(Collective):
    """psum / pmax / pmin / pmean over one or two axes."""

    params = {"axes": AXES}
    numpy = ""
    dtypes = NUMERIC

    def result(self, eqn, a, ctx, names):
        if "check_rep" in ctx.rules:
            for n in names:
                ax = ctx.axis(n)
                if ax.kind == "mesh" and ax.check_vma:
                    require(self.name not in ("pmax", "pmin"), f"{self.name} has no replication rule under check_rep")
                    require(n in a.vma, f"under check_rep {self.name} needs a value varying over {n!r}")
        return Ty(a.shape, a.vma - frozenset(names), a.dtype)

    def draw(self, draw, ctx, scope):
        axes = ctx.collective_axes()
        xs = scope.values(self.dtypes)
        if not axes or not xs:
            return None
        old = check_rep(ctx, scope.caps)
        if old and self.name in ("pmax", "pmin"):
            return None  # no replication rule for them under check_rep: keep clear
        a = _varying_first(draw, scope, xs, axes)
        names_ok = axes
        if old:
            checked = checked_axes(ctx)
            names_ok = [n for n in axes if n in scope.visible[a].vma or n not in checked]
            if not names_ok:
                return None
        mine = [n for n in names_ok if n in scope.visible[a].vma]  # (reducing over them does work)
        first = draw(st.sampled_from(_exchanging_first(draw, ctx, _preferred(draw, names_ok, mine))))
        # a second axis among all usable ones: over several axes, some the operand varies over and
        # some not, one primitive takes both paths of JAX's rule (a reduction, and a constant
        # times the axis size), which a second axis drawn among the varying ones rarely gave.
        # Over two checked manual axes jax 0.10.2 refuses such a mix ("can only accept axis_name
        # which corresponds to one of varying ... or invarying state", corpus entry
        # internal-error-399ae6f86548): there it stays in 1 draw of 4, not to spend a campaign on it
        vma = scope.visible[a].vma
        checked = checked_axes(ctx)
        rest = [n for n in names_ok if n != first]
        rest = _preferred(draw, rest, [n for n in rest if not ({n, first} <= checked and (n in vma) != (first in vma))])
        rest = _exchanging_first(draw, ctx, rest) if rest else []
        names = [first] + (draw(st.lists(st.sampled_from(rest), max_size=1)) if rest else [])
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axes": names}

    def reference(self, r, eqn, xs, ts, ctx):
        x = xs[0]
        ax = self.axes_js(eqn, ctx)
        if self.numpy == "sum":
            return [r.xp.broadcast_to(_sum(r, x, ax, keepdims=True), x.shape)]
        fn = getattr(r.xp, self.numpy)
        return [r.xp.broadcast_to(compute(r, str(x.dtype), lambda v: fn(v, axis=ax, keepdims=True), x), x.shape)]

    def expr(self, rr, eqn, a, ctx):
        return f"jax.lax.{self.name}({a[0]}, {rr.axes_source(eqn['axes'])})"


class Psum(Reducing):
    name, numpy = "psum", "sum"


class Pmax(Reducing):
    name, numpy = "pmax", "max"
    grad_ok = False


class Pmin(Reducing):
    name, numpy = "pmin", "min"
    grad_ok = False


class Pmean(Reducing):
    name, numpy = "pmean", "mean"
    dtypes = FLOATS


class AxisIndex(Collective):
    """``x + lax.axis_index(axes)``: the linear index over the axes, first name major."""

    name = "axis_index"
    params = {"axes": AXES}
    dtypes = NUMERIC

    def result(self, eqn, a, ctx, names):
        return Ty(a.shape, a.vma | frozenset(names), a.dtype)

    def draw(self, draw, ctx, scope):
        axes = ctx.collective_axes()
        xs = scope.values(self.dtypes)
        if not axes or not xs:
            return None
        a = scope.pick(draw, xs)
        # any usable axis, size 1 as likely as any: axis_index exchanges nothing, so the
        # preference of the other collectives for axes of size >= 2 (_exchanging_first) has
        # no ground here, and over a size-1 axis it lowers to its own case (a constant, or an
        # iota over a manual subgroup of one device): 1 axis_index of 48 in partial-manual
        # bodies named a size-1 axis with the preference (1500 programs, jax 0.4.38's rules)
        names = draw(st.lists(st.sampled_from(axes), min_size=1, max_size=2, unique=True))
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axes": names}

    def reference(self, r, eqn, xs, ts, ctx):
        x = xs[0]
        xp = r.xp
        idx = xp.zeros((1,) * x.ndim, np.int32)
        for j in self.axes_js(eqn, ctx):  # linear index, first name major
            shape = [1] * x.ndim
            shape[j] = ctx.axes[j].size
            idx = idx * ctx.axes[j].size + xp.arange(ctx.axes[j].size).reshape(shape)
        return [compute(r, str(x.dtype), lambda u, v: u + v, x, idx.astype(x.dtype))]

    def as_varying(self, arg, out, axes):
        return {"op": self.name, "args": [arg], "outs": [out], "axes": list(axes)}

    def expr(self, rr, eqn, a, ctx):
        return f"{a[0]} + jax.lax.axis_index({rr.axes_source(eqn['axes'])}).astype({a[0]}.dtype)"


class Pvary(Collective):
    """``lax.pcast(x, axes, to='varying')`` (jax >= 0.9.0; ``lax.pvary(x, axes)`` on 0.6.1 …
    0.9.x): marks a value that does not vary over the manual mesh axes ``axes`` as varying
    over them, its values unchanged (JAX's ``pvary_p``, jax/_src/core.py "Invariant ->
    Variant no-op cast"; its transpose is a psum over the axes, lax/parallel.py).

    JAX inserts the same cast itself where an op mixes an invariant and a varying operand;
    the explicit one is what the shard_map docs ask for where the types must agree (a scan
    carry, a cond's branches). Drawn over checked axes only (``check_vma`` on): with the
    check off jax 0.10.2 returns x as it is while 0.6.1 still binds the primitive, whose
    transpose (a psum) would then sum copies that the check-off body treats as one per device.
    The operand may not vary over any named axis already (``pcast`` refuses a varying ->
    varying cast: "Unsupported pcast from=varying").
    """

    name = "pvary"
    params = {"axes": AXES}
    since = "0.6.1"

    def result(self, eqn, a, ctx, names):
        require_checked(self.name, ctx, names)
        for n in names:
            require(n not in a.vma, f"pvary over {n!r} of a value that already varies over it")
        return Ty(a.shape, a.vma | frozenset(names), a.dtype)

    def draw(self, draw, ctx, scope):
        axes = checked_usable(ctx)
        cands = [v for v in scope.values(self.dtypes) if set(axes) - scope.visible[v].vma]
        if not cands:
            return None
        a = scope.pick(draw, cands)
        free = _exchanging_first(draw, ctx, [n for n in axes if n not in scope.visible[a].vma])
        names = draw(st.lists(st.sampled_from(free), min_size=1, max_size=2, unique=True))
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axes": names}

    def reference(self, r, eqn, xs, ts, ctx):
        return [xs[0]]  # lock-step arrays hold every device's copy already

    def expr(self, rr, eqn, a, ctx):
        axes = rr.axes_source(eqn["axes"])
        if (rr.caps or {}).get("pvary", "pcast") == "pvary":
            return f"jax.lax.pvary({a[0]}, {axes})"
        return f"jax.lax.pcast({a[0]}, {axes}, to='varying')"


def unreduced_refusal(op: str, ctx) -> str | None:
    """Why the unreduced collective ``op`` may not appear in ``ctx`` whatever its operand, or None:
    see :class:`UnreducedPsum`."""
    if ctx.batched:
        return f"{op} under vmap or a Jacobian (its batching rules raise)"
    if not ctx.jit and UNREDUCED_NEEDS_JIT in ctx.rules:
        return f"{op} outside jit on a release whose eager shard_map has no unreduced values"
    return None


def require_unreduced(op: str, ctx, names, a: Ty) -> None:
    """ProgramError unless the unreduced collective ``op`` may cast ``a`` to unreduced over the axes
    ``names`` here: not refused here, checked manual axes only, each one ``a`` varies over."""
    why = unreduced_refusal(op, ctx)
    require(why is None, why or "")
    require_checked(op, ctx, names)
    for n in names:
        require(n in a.vma, f"{op} over {n!r} of a value that does not vary over it")


class UnreducedPsum(Reducing):
    """``lax.psum(lax.pcast(x, axes, to='unreduced'), axes)`` (jax >= 0.9.0): a value varying over
    the checked manual mesh axes ``axes`` cast to *unreduced* over them (its logical value is
    the sum of the devices' values, not yet taken), then reduced: JAX's ``vary_unreduced_cast``
    and ``unreduced_psum`` primitives (lax/parallel.py; ``psum`` of an unreduced value binds
    the latter), whose transposes are ``reduced_vary_cast`` and ``preduced``. The value is
    psum's: the sum over the axes, invariant over them.

    Not under vmap, lax.map or a Jacobian (which vmaps): the four primitives' batching rules
    raise NotImplementedError on jax 0.10.2 (measured, vmap of a jitted shard_map); only under
    jit on a release whose eager shard_map does not implement unreduced values (release rule
    ``unreduced_needs_jit``, measured by the worker: jax 0.9.2). Over
    checked axes the operand varies over only: ``pcast`` to unreduced needs a varying value
    ("vary_unreduced_cast only accepts inputs that are varying"), and with the check off the
    cast is skipped (a plain psum).
    """

    name, numpy = "unreduced_psum", "sum"  # (psum's reference: Reducing.reference)
    dtypes = FLOATS
    since = "0.9.0"
    feature_names = ("unreduced",)

    def result(self, eqn, a, ctx, names):
        require_unreduced(self.name, ctx, names, a)
        return Ty(a.shape, a.vma - frozenset(names), a.dtype)

    def draw(self, draw, ctx, scope):
        if unreduced_refusal(self.name, ctx) is not None:
            return None
        axes = set(checked_usable(ctx))
        cands = [v for v in scope.values(self.dtypes) if scope.visible[v].vma & axes]
        if not cands:
            return None
        a = scope.pick(draw, cands)
        mine = _exchanging_first(draw, ctx, sorted(scope.visible[a].vma & axes))
        names = draw(st.lists(st.sampled_from(mine), min_size=1, max_size=2, unique=True))
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axes": names}

    def expr(self, rr, eqn, a, ctx):
        axes = rr.axes_source(eqn["axes"])
        return f"jax.lax.psum(jax.lax.pcast({a[0]}, {axes}, to='unreduced'), {axes})"


class Ppermute(Collective):
    """``lax.ppermute(x, axis, perm)``: for each pair ``[src, dst]`` of ``perm`` the device at index
    ``src`` of the axis sends its value to index ``dst``; an index that no pair sends to gets
    zeros. Sources are unique, destinations unique, each in ``[0, axis size)`` (the docstring of
    ``jax.lax.ppermute``: "For each index of the axis axis_name that does not correspond to a
    destination index in perm, the corresponding values in the result are filled with zeros").

    Over several axes (``axes`` a tuple) the index is the linear one, first name major, as
    ``lax.axis_index`` of the same tuple numbers devices (and ``all_gather`` / ``psum_scatter``
    order their blocks: measured on jax 0.10.2, ``jax.lax.axis_index(('y', 'x'))`` on a
    ('x', 'y') mesh is ``2 * y + x``); JAX's own test of it
    (``tests/shard_map_test.py::test_collective_permute_with_multiple_axis_names``) names the
    axes in mesh order only.

    Drawn (simplest first): a cyclic shift ``i -> (i + s) % n`` (a ring), a shift that does not
    wrap (a pipeline's send to the next stage: the first stage gets zeros), or any permutation
    with some of its pairs dropped. Over an axis of size 2 a full permutation is its own inverse
    (a transpose rule that forgets to invert it is right there, and 2 is the size meshes and
    vmaps have most); a partial one, ``[[0, 1]]``, is not. One ppermute in three over a mesh axis
    where another is usable names two axes, in either order (feature ``ppermute_multi_axis``): over two
    axes of size 2 there are permutations that are not their own inverse, and over part of a
    mesh several groups permute at once.

    From jax 0.11.1 on (release rule ``ppermute_mesh_order``, measured by the worker:
    ``ppermute_any_order``) a tuple of mesh axes must follow the mesh's order wherever the order
    changes the device numbering (two axes of size >= 2): JAX's lowering raises RuntimeError
    "Make sure that the axis_name passed to jax.lax.ppermute is in the same order as the
    axis_names declared on the mesh" (jax/_src/lax/parallel.py _pcollectives_lowering_common,
    behind the config option ``jax_raise_on_ppermute_sort_diff``, on by default: "it leads to
    wrong answers"). Drawn there in mesh order only; earlier releases draw both orders (the
    wrong answer of corpus entry differential-5c6cf26ebca0).
    """

    name = "ppermute"
    params = {"axes": {**AXES, "maxItems": 2}, "perm": PERM}
    least_size = 3  # one_axis prefers axes of size >= 3: more permutations that are not involutions

    def features(self, eqn):
        return {"ppermute"} | ({"ppermute_multi_axis"} if len(eqn["axes"]) > 1 else set())

    def result(self, eqn, a, ctx, names):
        n = math.prod(ctx.axis(m).size for m in names)
        perm = eqn["perm"]
        require(all(len(pair) == 2 and 0 <= pair[0] < n and 0 <= pair[1] < n for pair in perm),
                f"ppermute pairs must be [source, destination] in [0, {n})")
        for k, what in ((0, "sources"), (1, "destinations")):
            require(len({pair[k] for pair in perm}) == len(perm), f"ppermute {what} must be unique")
        if PPERMUTE_MESH_ORDER in ctx.rules:
            why = mesh_order_refusal(names, ctx)
            require(why is None, why or "")
        return Ty(a.shape, a.vma | frozenset(names), a.dtype)

    def draw(self, draw, ctx, scope):
        xs = scope.values(self.dtypes)
        name = self.one_axis(draw, ctx, scope) if xs else None
        if name is None:
            return None
        names = [name]
        # a second axis only among mesh (and pmap) axes: JAX's batching rule of a ppermute over a
        # tuple with a vmap axis binds the tuple's perm over the remaining axes unchanged, so every
        # such program raises "Permutation doesn't match the axis size!" or an AssertionError in
        # core.pvary (measured on 0.10.2; jax/_src/lax/parallel.py _ppermute_batcher, also on main)
        others = [m for m in ctx.collective_axes() if m != name and ctx.axis(m).kind != "vmap"]
        if (ctx.axis(name).kind != "vmap" and others and "ppermute_multi_axis" not in scope.disabled
                and draw(st.integers(0, 2)) == 2):
            other = draw(st.sampled_from(_exchanging_first(draw, ctx, others)))
            names = draw(st.sampled_from([[name, other], [other, name]]))
            if PPERMUTE_MESH_ORDER in ctx.rules:  # (the same draws, the order then the mesh's)
                names = sorted(names, key=list(ctx.mesh).index)
        a = _varying_first(draw, scope, xs, names)
        # JAX's batching rule of ppermute over a vmap axis asserts a full permutation (corpus entry
        # internal-error-fc489a4c49a2, every release since 0.4.26): there a partial one stays
        # reachable in 1 draw of 4, not half, not to spend a campaign on that known failure
        wraps = 6 if any(ctx.axis(m).kind == "vmap" for m in names) else 2
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axes": names,
                "perm": draw_perm(draw, math.prod(ctx.axis(m).size for m in names), wraps)}

    def reference(self, r, eqn, xs, ts, ctx):
        js = self.axes_js(eqn, ctx)
        sizes = tuple(ctx.axes[j].size for j in js)
        n = math.prod(sizes)
        xp = r.xp
        src, got = np.zeros(n, np.int32), np.zeros(n, bool)
        for s, d in eqn["perm"]:
            src[d], got[d] = s, True
        front = tuple(range(len(js)))
        y = xp.moveaxis(xs[0], js, front)  # the named dims first, first name major
        rest = y.shape[len(js):]
        y = xp.take(y.reshape((n,) + rest), src, axis=0)  # linear index d reads index src[d]
        if not got.all():
            y = xp.where(got.reshape((n,) + (1,) * len(rest)), y, xp.zeros_like(y))
        return [xp.moveaxis(y.reshape(sizes + rest), front, js)]

    def expr(self, rr, eqn, a, ctx):
        perm = [(int(rr.int(s)), int(rr.int(d))) for s, d in eqn["perm"]]
        return f"jax.lax.ppermute({a[0]}, {rr.axes_source(eqn['axes'])}, perm={perm})"


def mesh_order_refusal(names, ctx) -> str | None:
    """Why a ppermute over the axes ``names`` is refused under the release rule
    ``ppermute_mesh_order`` (see :class:`Ppermute`), or None: its mesh axes of size >= 2 are not in
    the mesh's order (``ctx.mesh``). Over a size-1 axis the order numbers the devices alike, and
    jax 0.12.1 runs it (measured: ('y', 'x') on a mesh ('x': 2, 'y': 1))."""
    order = list(ctx.mesh)
    ranks = [order.index(n) for n in names if ctx.axis(n).kind == "mesh" and ctx.axis(n).size >= 2]
    if ranks != sorted(ranks):
        return (f"ppermute over {tuple(names)}: not in the mesh's axis order {tuple(order)} "
                "(jax >= 0.11.1 raises 'Make sure that the axis_name passed to jax.lax.ppermute is in the same order')")
    return None


def draw_perm(draw, n: int, wraps: int = 2) -> list:
    """The ``perm`` of a ppermute over an axis of size ``n``: [[source, destination], ...].

    A cyclic shift by 1 .. n-1 in ``wraps`` draws of ``wraps + 2`` (what shrinking moves
    toward), else a shift of -(n-1) .. n-1 that does not wrap, else a permutation of
    ``range(n)`` with some pairs dropped.
    """
    kind = draw(st.integers(0, wraps + 1))
    if kind < wraps or n == 1:
        s = draw(st.integers(1, max(1, n - 1))) % n
        return [[i, (i + s) % n] for i in range(n)]
    if kind == wraps:
        s = draw(st.integers(1, n - 1)) * draw(st.sampled_from([1, -1]))
        return [[i, i + s] for i in range(n) if 0 <= i + s < n]
    dst = draw(st.permutations(range(n)))
    drop = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return [[i, d] for i, (d, gone) in enumerate(zip(dst, drop)) if not gone]


class AllGather(Collective):
    """``lax.all_gather`` at dim ``axis``, ``tiled`` or as a new dim."""

    name = "all_gather"
    params = {"axes": ONE_AXIS, "axis": DIM, "tiled": BOOL}

    def result(self, eqn, a, ctx, names):
        n = ctx.axis(names[0]).size
        vma = a.vma | frozenset(names)
        d = eqn["axis"]
        if eqn["tiled"]:
            require(a.rank >= 1 and 0 <= d < a.rank, "tiled all_gather needs a dim")
            return Ty(a.shape[:d] + (a.shape[d] * n,) + a.shape[d + 1:], vma, a.dtype)
        require(0 <= d <= a.rank, "all_gather axis out of range")
        return Ty(a.shape[:d] + (n,) + a.shape[d:], vma, a.dtype)

    def usable(self, ctx, name: str) -> bool:
        """Whether it may gather over axis ``name`` here (every usable collective axis)."""
        return True

    def operand_ok(self, ctx, name: str, ty: Ty) -> bool:
        """Whether it may gather a value of type ``ty`` over axis ``name`` (any)."""
        return True

    def draw(self, draw, ctx, scope):
        name = self.one_axis(draw, ctx, scope, usable=lambda n: self.usable(ctx, n))
        if name is None:
            return None
        n = ctx.axis(name).size
        cands = [v for v in scope.values(self.dtypes) if scope.visible[v].size * n <= scope.max_elements
                 and self.operand_ok(ctx, name, scope.visible[v])]
        if not cands:
            return None
        # a value of rank >= 1 3 times in 4 when one varies over the axis: inside a vmap the
        # per-example values are often scalars, and an all_gather of a scalar can only stack
        # (16 of 17 live all_gathers over a vmap axis in 800 drawn programs), never tile a dim
        ranked = [v for v in cands if scope.visible[v].rank >= 1]
        if any(scope.visible[v].vma & {name} for v in ranked):
            cands = _preferred(draw, cands, ranked)
        a = _varying_first(draw, scope, cands, [name])
        rank = scope.visible[a].rank
        tiled = rank >= 1 and draw(st.booleans())
        if not tiled and rank >= scope.max_rank:
            tiled = True
        axis = draw(st.integers(0, rank - 1 if tiled else rank))
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axes": [name], "axis": axis, "tiled": tiled}

    def reference(self, r, eqn, xs, ts, ctx):
        xp = r.xp
        K = len(ctx.axes)
        x = xs[0]
        (j,) = self.axes_js(eqn, ctx)
        n = ctx.axes[j].size
        d = eqn["axis"]
        y = xp.moveaxis(x, j, K - 1 + d)
        if eqn["tiled"]:
            p = K - 1 + d
            y = y.reshape(y.shape[:p] + (y.shape[p] * y.shape[p + 1],) + y.shape[p + 2:])
        y = xp.expand_dims(y, j)
        return [xp.broadcast_to(y, y.shape[:j] + (n,) + y.shape[j + 1:])]

    def expr(self, rr, eqn, a, ctx):
        return (f"jax.lax.all_gather({a[0]}, {rr.axes_source(eqn['axes'])}, axis={rr.int(eqn['axis'])}, "
                f"tiled={rr.bool(eqn['tiled'])})")


class AllGatherInvariant(AllGather):
    """``lax.all_gather(x, axis, axis=d, tiled=t, to='invarying')`` (jax >= 0.9.0;
    ``lax.all_gather_invariant`` on 0.6.2 ... 0.8.x): all_gather's values, but its result is
    invariant over the axis, not varying (JAX's ``all_gather_invariant_p``, lax/parallel.py:
    "all_gather_invariant is Varying -> Invariant ... transposes to dynamic_slice", where
    all_gather transposes to a psum_scatter), so that a shard_map may return it with an
    out_spec that leaves the axis out.

    Over manual mesh axes only (the manual axis type is shard_map's notion: under a vmap axis
    name jax 0.10.2 raises "pvary should be called under jax.shard_map", measured); over a
    checked axis (check_vma on) of a value that varies over it.
    """

    name = "all_gather_invariant"
    since = "0.6.2"

    def usable(self, ctx, name):
        return ctx.axis(name).kind == "mesh"

    def operand_ok(self, ctx, name, ty):
        ax = ctx.axis(name)
        return not ax.check_vma or name in ty.vma

    def result(self, eqn, a, ctx, names):
        (n,) = names
        require(self.usable(ctx, n), f"all_gather_invariant over {n!r}, which is not a manual mesh axis")
        require(self.operand_ok(ctx, n, a), f"all_gather_invariant over the checked axis {n!r} of a value that "
                                            "does not vary over it")
        ty = super().result(eqn, a, ctx, names)
        return Ty(ty.shape, a.vma - frozenset(names), a.dtype)

    def expr(self, rr, eqn, a, ctx):
        how = (rr.caps or {}).get("all_gather_invariant", "to")
        args = f"{a[0]}, {rr.axes_source(eqn['axes'])}, axis={rr.int(eqn['axis'])}, tiled={rr.bool(eqn['tiled'])}"
        if how == "function":
            return f"jax.lax.all_gather_invariant({args})"
        return f"jax.lax.all_gather({args}, to='invarying')"


def _divisible_dims(scope, n: int, dtypes: tuple) -> list:
    return [(v, d) for v in scope.values(dtypes) for d in range(scope.visible[v].rank)
            if scope.visible[v].shape[d] % n == 0]


def _split_dim(op, draw, ctx, scope):
    """(axis name, operand, dim) for a collective that splits a dim over one axis (psum_scatter,
    all_to_all): the dim must be divisible by the axis size. None when nothing fits here.

    The axis is drawn among those that some operand's dim divides by: drawn first and
    checked after, a named vmap axis (whose per-example values have lost a dim) failed the
    check most of the time, and the op went unused there (3 live all_to_all over a vmap
    axis of size >= 2 on a varying operand in 800 drawn programs, against 85 over mesh axes).
    """
    cands = {n: _divisible_dims(scope, ctx.axis(n).size, op.dtypes) for n in ctx.collective_axes()}
    name = op.one_axis(draw, ctx, scope, usable=lambda n: bool(cands[n]))
    if name is None:
        return None
    a, d = _varying_first(draw, scope, cands[name], [name])
    return name, a, d


class PsumScatter(Collective):
    """``lax.psum_scatter`` at dim ``axis``, tiled."""

    name = "psum_scatter"
    params = {"axes": ONE_AXIS, "axis": DIM}
    dtypes = NUMERIC

    def result(self, eqn, a, ctx, names):
        n = ctx.axis(names[0]).size
        d = eqn["axis"]
        require(a.rank >= 1 and 0 <= d < a.rank and a.shape[d] % n == 0, "psum_scatter dim must divide")
        return Ty(a.shape[:d] + (a.shape[d] // n,) + a.shape[d + 1:], a.vma | frozenset(names), a.dtype)

    def draw(self, draw, ctx, scope):
        got = _split_dim(self, draw, ctx, scope)
        if got is None:
            return None
        name, a, d = got
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axes": [name], "axis": d}

    def reference(self, r, eqn, xs, ts, ctx):
        xp = r.xp
        K = len(ctx.axes)
        (j,) = self.axes_js(eqn, ctx)
        n = ctx.axes[j].size
        d = eqn["axis"]
        s = _sum(r, xs[0], j)
        p = K - 1 + d
        s = s.reshape(s.shape[:p] + (n, s.shape[p] // n) + s.shape[p + 1:])
        return [xp.moveaxis(s, p, j)]

    def expr(self, rr, eqn, a, ctx):
        return (f"jax.lax.psum_scatter({a[0]}, {rr.axes_source(eqn['axes'])}, "
                f"scatter_dimension={rr.int(eqn['axis'])}, tiled=True)")


class UnreducedPsumScatter(PsumScatter):
    """``lax.psum_scatter(lax.pcast(x, axes, to='unreduced'), axes, scatter_dimension=d,
    tiled=True)`` (jax >= 0.9.0): psum_scatter's values, taken from a value cast to unreduced
    over the one checked manual axis. JAX binds ``vary_unreduced_cast`` then
    ``unreduced_reduce_scatter`` (lax/parallel.py: psum_scatter of an unreduced value is
    "Unreduced -> Varying"), whose transposes are ``all_gather_reduced`` and
    ``reduced_vary_cast``: under grad the cotangent goes through the *reduced* manual type.

    Its rules are unreduced_psum's (:class:`UnreducedPsum`): not under vmap or a Jacobian, only
    under jit where the release's eager shard_map has no unreduced values, over a checked axis
    the operand varies over.
    """

    name = "unreduced_psum_scatter"
    dtypes = FLOATS
    since = "0.9.0"
    feature_names = ("unreduced", "psum_scatter")

    def result(self, eqn, a, ctx, names):
        require_unreduced(self.name, ctx, names, a)
        return super().result(eqn, a, ctx, names)

    def draw(self, draw, ctx, scope):
        if unreduced_refusal(self.name, ctx) is not None:
            return None
        checked = set(checked_usable(ctx))
        cands = {n: [(v, d) for v, d in _divisible_dims(scope, ctx.axis(n).size, self.dtypes)
                     if n in scope.visible[v].vma] for n in checked}
        name = self.one_axis(draw, ctx, scope, usable=lambda n: bool(cands.get(n)))
        if name is None:
            return None
        a, d = scope.sample(draw, cands[name], lambda c: c[0])
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axes": [name], "axis": d}

    def expr(self, rr, eqn, a, ctx):
        axes = rr.axes_source(eqn["axes"])
        return (f"jax.lax.psum_scatter(jax.lax.pcast({a[0]}, {axes}, to='unreduced'), {axes}, "
                f"scatter_dimension={rr.int(eqn['axis'])}, tiled=True)")


class AllToAll(Collective):
    """``lax.all_to_all`` splitting dim ``split_axis`` and concatenating along ``concat_axis``, tiled."""

    name = "all_to_all"
    params = {"axes": ONE_AXIS, "split_axis": DIM, "concat_axis": DIM}

    def result(self, eqn, a, ctx, names):
        n = ctx.axis(names[0]).size
        s, c = eqn["split_axis"], eqn["concat_axis"]
        require(a.rank >= 1 and 0 <= s < a.rank and 0 <= c < a.rank, "all_to_all axes out of range")
        require(a.shape[s] % n == 0, "all_to_all split dim must divide")
        shape = list(a.shape)
        shape[s] //= n
        shape[c] *= n
        return Ty(tuple(shape), a.vma | frozenset(names), a.dtype)

    def draw(self, draw, ctx, scope):
        got = _split_dim(self, draw, ctx, scope)
        if got is None:
            return None
        name, a, d = got
        c = draw(st.integers(0, scope.visible[a].rank - 1))
        if math.prod(scope.visible[a].shape) > scope.max_elements:
            c = d
        return {"op": self.name, "args": [a], "outs": [scope.new_var()], "axes": [name], "split_axis": d,
                "concat_axis": c}

    def reference(self, r, eqn, xs, ts, ctx):
        xp = r.xp
        K = len(ctx.axes)
        x = xs[0]
        (j,) = self.axes_js(eqn, ctx)
        n = ctx.axes[j].size
        s, c = eqn["split_axis"], eqn["concat_axis"]
        p = K + s
        y = x.reshape(x.shape[:p] + (n, x.shape[p] // n) + x.shape[p + 1:])
        y = xp.swapaxes(y, j, p)  # named axis: destination; payload: source
        y = xp.moveaxis(y, p, K + c)
        q = K + c
        return [y.reshape(y.shape[:q] + (y.shape[q] * y.shape[q + 1],) + y.shape[q + 2:])]

    def expr(self, rr, eqn, a, ctx):
        return (f"jax.lax.all_to_all({a[0]}, {rr.axes_source(eqn['axes'])}, {rr.int(eqn['split_axis'])}, "
                f"{rr.int(eqn['concat_axis'])}, tiled=True)")


OPS = (Psum(), Pmean(), Pmax(), Pmin(), AxisIndex(), Pvary(), UnreducedPsum(), AllGather(), AllGatherInvariant(),
       Ppermute(), PsumScatter(), UnreducedPsumScatter(), AllToAll())
