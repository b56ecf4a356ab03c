"""Mutable array references made inside a function: ``jax.new_ref`` / ``jax.freeze``.

``ref_update`` of ``a`` and ``b`` renders as::

    r = jax.new_ref(a)
    r[...] += b          # mode "add";  r[...] = b  for mode "set"
    out = jax.freeze(r)  # read "freeze";  out = r[...]  for read "index"

Its value is ``a + b`` (add) or ``b`` (set). JAX stages refs made under a trace as state
effects and discharges them (``jax._src.state.discharge``; under jit ``pxla``'s
``_discharge_internal_refs``, in a shard_map body under jit ``shard_map``'s discharge rule),
a path no other op takes: the docs page "Mutable arrays" (``jax.new_ref``, ``jax.freeze``;
https://docs.jax.dev/en/latest/array_refs.html).

Typing rules (measured on jax 0.10.2):

- ``a`` and ``b`` share one shape and dtype (a ``set`` of another shape raises "Invalid shape
  for `swap`");
- under jit only. Eagerly a ref's value is committed to one device (``SingleDeviceSharding``
  of device 0 for an uncommitted operand, measured), so an op mixing it with an array
  committed to the mesh raises "Received incompatible devices for jitted computation" (a
  default campaign's finding, 2026-12-05@a09b8b5: the program's fault, not JAX's); in a shard_map body
  eager shard_map evaluates each primitive on its own and raises "Eager shard_map cannot
  return a `jax.Ref`. Please wrap your shard_map in `jax.jit`" (JAX's rule, tested in its
  tests/shard_map_test.py);
- over a checked manual axis, ``b`` may vary only over axes ``a`` varies over: the ref's
  manual type is its initial value's (storing a value varying over more raises a ValueError
  from ``pvary``);
- under vmap the result is batched whatever its operands are: JAX batches every ref made
  under vmap ("Defensively batch array refs created under vmap", jax-ml/jax#31672), so a
  ``vmap(..., out_axes=None)`` of it raises "output was batched" (corpus finding of session
  31, judged JAX's design): typed as varying over every enclosing vmap axis;
- not under ``jax.jacfwd``, for the same reason: jacfwd vmaps the JVP over tangents with the
  primal output unbatched, and a ref of the primal comes out batched ("at vmap out_axes[0],
  got axis spec None but output was batched", 0.8.1-0.10.2, measured; jax.jvp runs).

Since jax 0.8.0 (``jax.freeze`` is public there; ``jax.new_ref`` since 0.7.2).
"""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz.ops.base import JACOBIAN, NUMERIC, Op, Ty, checked_axes, compute, require, same_dtype, vmap_axes
from fuzz.ops.custom import FORWARD_MODE


def _refusal(ctx) -> str | None:
    if not ctx.jit:
        return "a jax.Ref outside jit (eagerly its value is committed to one device)"
    if JACOBIAN in ctx.rules and FORWARD_MODE in ctx.rules:
        return "a jax.Ref under jax.jacfwd (a ref made under vmap is batched: the primal output would be)"
    return None


class RefUpdate(Op):
    """``jax.new_ref(a)``, updated with ``b`` (``+=`` or ``=``), read back (``jax.freeze`` or
    ``r[...]``): shapes and dtypes of ``a`` and ``b`` equal; result ``a + b`` or ``b`` with
    ``a``'s shape and dtype, varying where either varies, and over every enclosing vmap axis. See the module docstring for the rules."""

    name = "ref_update"
    family = "state"
    n_args = 2
    params = {"mode": {"enum": ["add", "set"]}, "read": {"enum": ["freeze", "index"]}}
    dtypes = NUMERIC
    since = "0.8.0"
    feature_names = ("new_ref",)

    def types(self, eqn, args, ctx):
        a, b = args
        dt = same_dtype(self.name, args, self.dtypes)
        require(a.shape == b.shape, f"ref_update of shapes {a.shape} and {b.shape} (they must be equal)")
        why = _refusal(ctx)
        require(why is None, why or "")
        extra = (b.vma - a.vma) & checked_axes(ctx)
        require(not extra, f"ref_update stores a value varying over {sorted(extra)} into a ref that does not")
        return [Ty(a.shape, a.vma | b.vma | vmap_axes(ctx), dt)]  # (see the module docstring)

    def draw(self, draw, ctx, scope):
        if _refusal(ctx) is not None:
            return None
        xs = scope.values(self.dtypes)
        if not xs:
            return None
        a = scope.pick(draw, xs)
        ta = scope.visible[a]
        checked = checked_axes(ctx)
        partners = [b for b in xs if scope.visible[b].dtype == ta.dtype and scope.visible[b].shape == ta.shape
                    and not ((scope.visible[b].vma - ta.vma) & checked)]
        b = draw(st.sampled_from(partners))  # (a itself is one)
        return {"op": self.name, "args": [a, b], "outs": [scope.new_var()],
                "mode": draw(st.sampled_from(["add", "set"])), "read": draw(st.sampled_from(["freeze", "index"]))}

    def reference(self, r, eqn, xs, ts, ctx):
        a, b = xs
        if eqn["mode"] == "set":
            return [b]
        return [compute(r, ts[0].dtype, r.xp.add, a, b)]  # (in the operands' dtype, as Binary's add)

    def render(self, rr, eqn, args, outs, ctx, ind):
        ref = f"{outs[0]}_ref"
        update = "+=" if eqn["mode"] == "add" else "="
        read = f"jax.freeze({ref})" if eqn["read"] == "freeze" else f"{ref}[...]"
        return [f"{ind}{ref} = jax.new_ref({args[0]})", f"{ind}{ref}[...] {update} {args[1]}",
                f"{ind}{outs[0]} = {read}"]


OPS = (RefUpdate(),)
