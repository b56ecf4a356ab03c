"""``random_uniform`` (``jax.random.uniform(jax.random.fold_in(key, i), shape)``, fuzz/ops/random.py).

The NumPy Threefry reference against jax.random bit for bit, the typing rule, then JAX (the
session's worker) against the reference where the sharding transforms move the draw: a
shard_map body folding in each device's index, jit with the result split by a sharding
annotation (the partitioned counter), a named vmap folding in each example's index; a
reference off by one counter is caught; and derandomized generated programs agree.
"""
import numpy as np
import pytest

import oracles
from fuzz import typecheck as T
from fuzz.ops import random as R
from fuzz.reference import evaluate, make_input
from fuzz.render import render
from support.judging import agree_on_generated, agree_with_jax
from support.programs import JIT, call, eqn, fn, program, shard_map, vmap


def uniform(i, out, shape, dtype="float32", typed=True, seed=7, split=0):
    return eqn("random_uniform", [i], [out], seed=seed, dims=list(shape), dtype=dtype, typed=typed, split=split)


def test_reference_is_jax_bit_for_bit():
    import jax
    import jax.numpy as jnp

    for seed in (0, 200):
        for d in (0, 5, -2):
            for shape in ((), (3,), (2, 5)):
                for dtype in R.FORMATS:
                    want = R.uniform_reference(seed, np.array(d), shape, dtype)
                    for make in (jax.random.key, jax.random.PRNGKey):
                        got = np.asarray(jax.random.uniform(jax.random.fold_in(make(seed), jnp.int32(d)), shape,
                                                            getattr(jnp, dtype)))
                        assert got.dtype == want.dtype and got.shape == want.shape
                        np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}, data {d}, {shape}, {dtype}")
    # lock-step: one draw per element of the data, the shape after the data's dims
    lock = R.uniform_reference(3, np.array([[0, 1], [2, 3]]), (4,), "float32")
    assert lock.shape == (2, 2, 4)
    np.testing.assert_array_equal(lock[1, 0], R.uniform_reference(3, np.array(2), (4,), "float32"))
    assert len({tuple(v) for v in lock.reshape(4, 4)}) == 4


def test_typing_rule():
    ctx = T.Ctx(mesh={"x": 4}, axes=(T.Axis("x", 4, "mesh", True),))
    e = uniform("i", "u", (2, 3), dtype="bfloat16")
    (ty,) = T.eqn_types(e, [T.Ty((), frozenset({"x"}), "int32")], ctx)
    assert ty == T.Ty((2, 3), frozenset({"x"}), "bfloat16")
    with pytest.raises(T.ProgramError, match="scalar"):
        T.eqn_types(e, [T.Ty((2,), frozenset(), "int32")], ctx)
    with pytest.raises(T.ProgramError, match="int32"):
        T.eqn_types(e, [T.Ty((), frozenset(), "float32")], ctx)
    i = [T.Ty((), frozenset(), "int32")]
    for bad, match in (({"dtype": "int32"}, "random_uniform of"), ({"dims": [0]}, "dims"),
                       ({"dims": [2, 2, 2, 2]}, "dims"), ({"split": -1}, "split"), ({"seed": 300}, "seed")):
        with pytest.raises(T.ProgramError, match=match):
            T.eqn_types({**e, **bad}, i, ctx)


def per_device_program():
    """Each of 4 devices folds in its index and draws (2, 3); out_specs stack the blocks: (8, 3),
    under shard_map eagerly, under jit, and under jit(vmap) of the shard_map (x0's 3 examples)."""
    body = fn(["a"], [eqn("index", [], ["i"], axes=["x"], scale=1, offset=0), uniform("i", "u", (2, 3)),
                      eqn("add", ["u", "a"], ["v"])], ["v"])
    sm = shard_map([[["x"], None]], [[["x"], None]])
    return program(inputs=[("x0", (8, 3), 1), ("x1", (3, 8, 3), 2)], functions={"f0": body},
                   calls=[call("f0", [sm], ["x0"]), call("f0", [JIT, sm], ["x0"]),
                          call("f0", [JIT, vmap([0], [0]), sm], ["x1"])])


def split_result_program():
    """Under jit a constant key draws (8, 4), split 4 ways along dim 0 by a sharding constraint."""
    body = fn(["a"], [eqn("index", [], ["i"], axes=[], scale=1, offset=3), uniform("i", "u", (8, 4), typed=False),
                      eqn("with_sharding_constraint", ["u"], ["w"], axes=["x"], dim=0),
                      eqn("add", ["w", "a"], ["v"])], ["v"])
    return program(inputs=[("x0", (8, 4), 1)], functions={"f0": body}, calls=[call("f0", [JIT], ["x0"])])


def split_key_program():
    """Each of 4 devices picks element 2 * index - 3 of a split key array (a negative index wraps, past
    the end clamps), under jit of the shard_map and under jit(vmap(spmd_axis_name)) of it."""
    body = fn(["a"], [eqn("index", [], ["i"], axes=["x"], scale=2, offset=-3), uniform("i", "u", (2,), split=3),
                      eqn("add", ["u", "a"], ["v"])], ["v"])
    sm = shard_map([[["x"]]], [[["x"]]])
    return program(mesh=(("x", 4), ("y", 2)), inputs=[("x0", (8,), 1), ("x1", (2, 8), 2)], functions={"f0": body},
                   calls=[call("f0", [JIT, sm], ["x0"]),
                          call("f0", [JIT, vmap([0], [0], spmd_axis_name="y"), sm], ["x1"])])


def test_a_split_key_is_the_folded_key_of_the_clamped_index():
    out = np.asarray(evaluate(split_key_program())["results"][0][0]) - make_input(1, (8,))
    for dev, k in enumerate((0, 2, 1, 2)):  # indices -3, -1, 1, 3 into 3 keys: wrapped, wrapped, as is, clamped
        np.testing.assert_allclose(out[2 * dev:2 * dev + 2], R.uniform_reference(7, np.array(k), (2,), "float32"),
                                   atol=1e-6)


def vmapped_program():
    """A named vmap over 3 examples folds in each example's index (float16 draws, back to float32)."""
    body = fn(["a"], [eqn("index", [], ["i"], axes=["b"], scale=2, offset=1), uniform("i", "u", (4,), "float16"),
                      eqn("astype", ["u"], ["w"], dtype="float32"), eqn("mul", ["w", "a"], ["v"])], ["v"])
    return program(inputs=[("x0", (3, 4), 1)], functions={"f0": body},
                   calls=[call("f0", [vmap([0], [0], axis_name="b")], ["x0"]),
                          call("f0", [JIT, vmap([0], [0], axis_name="b")], ["x0"])])


def test_reference_draws_per_device():
    out = np.asarray(evaluate(per_device_program())["results"][0][0])
    x0 = make_input(1, (8, 3))
    for dev in range(4):  # device dev's block: its own draw plus its block of x0
        want = R.uniform_reference(7, np.array(dev), (2, 3), "float32") + x0[2 * dev:2 * dev + 2]
        np.testing.assert_allclose(out[2 * dev:2 * dev + 2], want, rtol=1e-6)
    assert len({float(v) for v in out[::2, 0] - x0[::2, 0]}) == 4  # four different draws


def explicit_program():
    """On an Explicit mesh (4, 2), the draw split over x by out_sharding, eagerly, under jit, under
    jit(vmap) folding in each example's index, and under grad of a weighted sum."""
    body = fn(["a"], [eqn("index", [], ["i"], axes=[], scale=1, offset=2),
                      {**uniform("i", "u", (8, 2)), "op": "random_uniform_sharded", "axes": ["x"]},
                      eqn("mul", ["u", "a"], ["v"])], ["v"])
    vbody = fn(["a"], [eqn("index", [], ["i"], axes=["b"], scale=1, offset=0),
                       {**uniform("i", "u", (8, 2), dtype="bfloat16"), "op": "random_uniform_sharded",
                        "axes": ["y", "x"]}, eqn("astype", ["u"], ["w"], dtype="float32"),
                       eqn("add", ["w", "a"], ["v"])], ["v"])
    loss = fn(["a"], [eqn("call", ["a"], ["v"], transforms=[], fn=body), eqn("wsum", ["v"], ["l"], seed=4)], ["l"])
    return program(mesh=(("x", 4), ("y", 2)), axis_type="explicit",
                   inputs=[("x0", (8, 2), 1), ("x1", (3, 8, 2), 2)],
                   functions={"f0": body, "f1": vbody, "f2": loss},
                   calls=[call("f0", [], ["x0"]), call("f0", [JIT], ["x0"]),
                          call("f1", [JIT, vmap([0], [0], axis_name="b")], ["x1"]),
                          call("f2", [{"kind": "grad", "argnums": [0]}], ["x0"])])


def test_the_sharded_draw_needs_an_explicit_mesh():
    e = {**uniform("i", "u", (8, 2)), "op": "random_uniform_sharded", "axes": ["x"]}
    arg = [T.Ty((), frozenset(), "int32")]
    assert T.eqn_types(e, arg, T.Ctx(mesh={"x": 4}, explicit=True)) == [T.Ty((8, 2), frozenset(), "float32")]
    with pytest.raises(T.ProgramError, match="Explicit"):
        T.eqn_types(e, arg, T.Ctx(mesh={"x": 4}))
    with pytest.raises(T.ProgramError, match="splits dim 6"):
        T.eqn_types({**e, "dims": [6]}, arg, T.Ctx(mesh={"x": 4}, explicit=True))


@pytest.mark.parametrize("make", [per_device_program, split_result_program, vmapped_program, explicit_program,
                                  split_key_program])
def test_jax_agrees(worker, make):
    agree_with_jax(worker, make())


def test_a_reference_one_counter_off_is_caught(worker, monkeypatch):
    p = per_device_program()
    out = worker.run(render(p, worker.caps), timeout=240)
    assert out["status"] == "ok", out
    right = R.uniform_reference
    monkeypatch.setattr(R, "uniform_reference", lambda seed, data, shape, dtype: right(seed, np.asarray(data) + 1,
                                                                                       shape, dtype))
    found = oracles.judge(p, out, evaluate(p))
    assert any(f.oracle == "differential" for f in found), [f.signature for f in found]


@pytest.mark.parametrize("op,feature", [("random_uniform", "random_uniform"),
                                        ("random_uniform_sharded", "random_out_sharding")])
def test_generated_programs_agree(worker, op, feature):
    # (with index, its prelude: a fresh start index as campaigns draw it, not only int32 inputs)
    seen = agree_on_generated(worker, op, 3, keep=("sin", "mul", "wsum", "sum", "psum", "ppermute", "broadcast",
                                                   "reshape", "index"))
    assert feature in seen
