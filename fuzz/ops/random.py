"""Random numbers: ``random_uniform``, ``jax.random.uniform(jax.random.fold_in(key, i), shape)``.

The dropout idiom of sharded models: a key made from a constant seed, folded with an
int32 scalar ``i`` (a device's or an example's index, an input, a start index) and drawn
from. JAX documents the values as a function of the key and the shape alone, whatever
the sharding or batching ("jax.random" docs, "Random numbers": with the default
``jax_threefry_partitionable`` (True since jax 0.5.0, jax/_src/config.py) a sharded
result has the values of the unsharded one), so every transform must keep them: under
jit with the result split by a sharding annotation the SPMD partitioner cuts the
generator's counter (``iota_2x32_shape``, lowered so that it partitions), under vmap the
batching rules of ``random_fold_in`` / ``random_bits`` run, in a shard_map body each
device draws its own block of keys.

The reference is a NumPy Threefry-2x32 (Salmon et al., "Parallel random numbers: as easy
as 1, 2, 3", SC 2011: 20 rounds, rotations 13 15 26 6 / 17 29 16 24, key-schedule
constant 0x1BD11BDA), applied as jax/_src/random/threefry2x32.py applies it on 0.10.2:

- ``key(seed)`` / ``PRNGKey(seed)`` is the pair ``(0, seed)`` (threefry_seed);
- ``fold_in(k, i)`` hashes the counter pair ``(0, uint32(i))`` under ``k`` (threefry_fold_in);
- partitionable ``random_bits(k, 32, shape)`` hashes ``(hi, lo)`` of each element's
  row-major index under ``k`` and xors the two words; 16 and 8 bits keep the low bits;
- ``uniform`` keeps the top ``nmant`` bits as a mantissa of an exponent-0 float in [1, 2)
  and subtracts 1 (exact), drawing 8 bits for bfloat16 (nmant 7 < 8) and 16 for float16
  (jax/_src/random/core.py ``_uniform``).

``random_uniform_sharded`` draws the same values split by ``out_sharding`` on an Explicit mesh.

Not under a derivative's differentiated values in any way that matters: the result does
not depend on a float argument, so its derivative is zero (grad_ok). Since 0.5.0 only:
older releases draw with the original, non-partitionable counter layout by default.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from fuzz.ops.base import AXES, FLOAT, FLOATS, INT, SEED, ExprOp, Ty, int_schema, np_dtype, require
from fuzz.ops.indices import start_index
from fuzz.ops.sharding import splits
from fuzz.ops.slicing import lifted, named_shape

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
# (total bits, mantissa bits, bits drawn) per dtype: finfo(dtype).bits / .nmant; at least 8 drawn
FORMATS = {FLOAT: (32, 23, 32), "bfloat16": (16, 7, 8), "float16": (16, 10, 16)}
SHAPE = {"type": "array", "items": int_schema(1, 16), "maxItems": 3}


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32 (20 rounds) of the counter words ``x0``, ``x1`` under the key words ``k0``, ``k1``.

    All four are uint32 arrays that broadcast together (NumPy rules); returns the two uint32
    output words, of the broadcast shape. uint32 arithmetic wraps modulo 2**32 as XLA's does.
    """
    u = np.uint32
    k0, k1, x0, x1 = (np.asarray(v, u) for v in (k0, k1, x0, x1))
    ks = (k0, k1, k0 ^ k1 ^ u(0x1BD11BDA))
    with np.errstate(over="ignore"):  # (NumPy warns on a wrapping scalar; arrays wrap silently)
        x0, x1 = x0 + ks[0], x1 + ks[1]
        for i in range(5):
            for r in ROTATIONS[i % 2]:
                x0 = x0 + x1
                x1 = (x1 << u(r)) | (x1 >> u(32 - r))
                x1 = x1 ^ x0
            x0 = x0 + ks[(i + 1) % 3]
            x1 = x1 + ks[(i + 2) % 3] + u(i + 1)
    return x0, x1


def uniform_reference(seed: int, data, shape: tuple, dtype: str) -> np.ndarray:
    """``jax.random.uniform(jax.random.fold_in(jax.random.key(seed), d), shape, dtype)`` for each
    int32 ``d`` of the array ``data``: an array of ``data.shape + shape`` and dtype ``dtype``
    (partitionable Threefry, the default since jax 0.5.0; see the module docstring).

    ``seed``: 0 <= seed < 2**32 (a negative one raises OverflowError; the op's seeds are 0 ...
    255); ``shape``: fewer than 2**32 elements (the counter's high word is taken as 0);
    ``dtype``: a key of :data:`FORMATS` (KeyError otherwise)."""
    data = np.asarray(data, np.int32)
    lead = (Ellipsis,) + (None,) * len(shape)
    k0, k1 = threefry2x32(0, seed, 0, data.astype(np.uint32))  # fold_in: the counter pair (0, d)
    lo = np.arange(math.prod(shape), dtype=np.uint32).reshape(shape)  # row-major index, high word 0
    b0, b1 = threefry2x32(k0[lead], k1[lead], 0, lo)
    bits = b0 ^ b1
    nbits, nmant, drawn = FORMATS[dtype]
    uint = np.dtype(f"uint{nbits}")
    bits = (bits & np.uint32((1 << drawn) - 1)).astype(uint)  # the low bits, widened back
    one = np.array(1.0, np_dtype(dtype)).view(uint)
    floats = ((bits >> uint.type(drawn - nmant)) | one).view(np_dtype(dtype))
    return (floats.astype(np.float32) - np.float32(1.0)).astype(np_dtype(dtype))  # exact in float32


class RandomUniform(ExprOp):
    """``jax.random.uniform(jax.random.fold_in(jax.random.key(seed), i), dims, dtype)``: values
    in [0, 1) of the static shape ``dims`` and float ``dtype``, varying wherever the int32 scalar ``i``
    does. ``typed`` False renders the legacy raw key ``jax.random.PRNGKey(seed)`` (the same values);
    ``split`` n > 0 takes the key ``jax.random.split(key, n)[i]`` instead: an element of a key array
    picked by a traced index (wrapped once if negative, then clamped), which under partitionable
    Threefry is ``fold_in(key, i)`` for ``0 <= i < n`` (measured on jax 0.10.2, and so in the code:
    both hash the counter pair ``(0, i)``)."""

    name = "random_uniform"
    family = "random"
    n_args = 1
    params = {"seed": SEED, "dims": SHAPE, "dtype": {"enum": list(FLOATS)}, "typed": {"type": "boolean"},
              "split": int_schema(0, 8)}
    feature_names = ("random_uniform",)
    preludes = ("index",)
    since = "0.5.0"

    def arg_dtypes(self, eqn):
        return (INT,)

    def types(self, eqn, args, ctx):
        (i,) = args
        require(i.rank == 0, "random_uniform folds in a scalar")
        require(eqn["dtype"] in FORMATS, f"random_uniform of {str(eqn['dtype'])[:20]}")
        shape, n, seed = eqn["dims"], eqn["split"], eqn["seed"]
        require(isinstance(shape, list) and len(shape) <= 3
                and all(type(d) is int and 1 <= d <= 16 for d in shape), f"random_uniform dims {str(shape)[:40]}")
        require(type(n) is int and 0 <= n <= 8, f"random_uniform split {str(n)[:20]} (0 ... 8)")
        require(type(seed) is int and 0 <= seed <= 255, f"random_uniform seed {str(seed)[:20]} (0 ... 255)")
        return [Ty(tuple(eqn["dims"]), i.vma, eqn["dtype"])]

    def draw(self, draw, ctx, scope):
        got = start_index(draw, ctx, scope)
        if got is None:
            return None
        prelude, i = got
        # the shape of a float value in scope half of the time (a mask or noise for it), else small
        shapes = [scope.visible[v].shape for v in scope.floats() if 0 < scope.visible[v].size <= scope.max_elements
                  and all(1 <= d <= 16 for d in scope.visible[v].shape) and scope.visible[v].rank <= 3]
        if shapes and draw(st.booleans()):
            shape = list(draw(st.sampled_from(shapes)))
        else:
            shape = draw(st.lists(st.sampled_from([2, 4, 1, 8]), max_size=2))
        # the key: fold_in 3 times in 8, else an element of a split key array (a gather of keys)
        split = draw(st.sampled_from([0, 0, 0, 2, 4, 3, 8, 1]))
        return prelude + [{"op": self.name, "args": [i], "outs": [scope.new_var()], "seed": draw(st.integers(0, 255)),
                           "dims": shape, "dtype": draw(st.sampled_from(list(FLOATS))), "typed": draw(st.booleans()),
                           "split": split}]

    def along(self, eqn):
        # no operand dim; the result's first dim may be split after it (the partitioned counter)
        return None, (0 if eqn["dims"] else None)

    def reference(self, r, eqn, xs, ts, ctx):
        n = eqn["split"]

        def values(i):
            data = lifted(np, np.asarray(i), ctx)
            if n:  # split(key, n)[i] is fold_in(key, i) for 0 <= i < n (both hash (0, i) under the key, see
                # above); a traced index wraps once when negative and is clamped into range (JAX's retrieval indexing)
                data = np.clip(np.where(data < 0, data + n, data), 0, n - 1)
            return uniform_reference(eqn["seed"], data, tuple(eqn["dims"]), eqn["dtype"])

        # (int32: never differentiated, so NumPy under a derivative too)
        shape = named_shape(ctx) + tuple(eqn["dims"])
        return [r.host(values, shape, np_dtype(eqn["dtype"]), xs[0])]

    def expr(self, rr, eqn, a, ctx, extra: str = ""):
        """The draw's source; ``extra``: more keyword arguments of ``jax.random.uniform`` (``, name=...``)."""
        require(eqn["dtype"] in FORMATS, f"random_uniform of {str(eqn['dtype'])[:20]!r}")
        make = "jax.random.key" if rr.bool(eqn["typed"]) == "True" else "jax.random.PRNGKey"
        key = f"{make}({rr.int(eqn['seed'])})"
        n = int(rr.int(eqn["split"]))
        key = f"jax.random.split({key}, {n})[{a[0]}]" if n else f"jax.random.fold_in({key}, {a[0]})"
        return f"jax.random.uniform({key}, {rr.ints_source(eqn['dims'])}, jnp.{eqn['dtype']}{extra})"

    def features(self, eqn):
        return (set(self.feature_names) | ({eqn["dtype"]} if eqn["dtype"] != FLOAT else set())
                | ({"random_split"} if eqn["split"] else set()))


class RandomUniformSharded(RandomUniform):
    """``random_uniform`` drawn split: ``jax.random.uniform(..., out_sharding=P(axes))`` on an
    Explicit mesh (the sampler runs under ``auto_axes`` with that output sharding:
    ``maybe_auto_axes`` in jax/_src/random/core.py), then ``jax.sharding.reshard(..., P())``
    back to replicated, as the ``reshard`` op does, since sharding types are not modelled
    (fuzz/ops/sharding.py). ``axes``: mesh axes (major first) that divide the first dim.
    Rules: an Explicit mesh, outside shard_map bodies (ran by hand on jax 0.10.2 eagerly,
    under jit, vmap, jit(vmap) and grad: the values of the unsharded draw); from 0.7.0 on
    (``out_sharding`` came in 0.6.0, ``jax.sharding.reshard`` in 0.7.0).
    """

    name = "random_uniform_sharded"
    params = {**RandomUniform.params, "axes": AXES}
    feature_names = ("random_uniform", "random_out_sharding")
    since = "0.7.0"

    def types(self, eqn, args, ctx):
        (ty,) = super().types(eqn, args, ctx)
        require(ctx.explicit and not ctx.manual, "random_uniform_sharded outside an Explicit mesh or in a shard_map body")
        names = eqn["axes"]
        require(ty.rank >= 1, "random_uniform_sharded of a scalar (nothing to split)")
        require(len(set(names)) == len(names) and all(n in ctx.mesh for n in names),
                f"random_uniform_sharded over {names}, not distinct mesh axes")
        k = math.prod(ctx.mesh[n] for n in names)
        require(ty.shape[0] % k == 0, f"random_uniform_sharded splits dim {ty.shape[0]} into {k}")
        return [ty]

    def draw(self, draw, ctx, scope):
        if not ctx.explicit or ctx.manual:
            return None
        got = super().draw(draw, ctx, scope)
        if got is None:
            return None
        e = got[-1]
        opts = splits(e["dims"][0], list(ctx.mesh), ctx.mesh) if e["dims"] else []
        opts = [o for o in opts if math.prod(ctx.mesh[n] for n in o) > 1] or opts  # a real split first
        if not opts:
            return None
        e["op"], e["axes"] = self.name, draw(st.sampled_from(opts))
        return got

    def along(self, eqn):
        return None, None  # (replicated again after it; no annotations on an Explicit mesh)

    def expr(self, rr, eqn, a, ctx):
        split = super().expr(rr, eqn, a, ctx, extra=f", out_sharding={rr.spec_source([list(eqn['axes'])])}")
        return f"jax.sharding.reshard({split}, P())"


OPS = (RandomUniform(), RandomUniformSharded())
