"""``take`` (fuzz/ops/gather.py) and ``argmax`` / ``argmin`` (fuzz/ops/reductions.py).

The reference against NumPy by hand (each ``mode`` of ``jnp.take`` with indices in and out
of bounds, negative ones included; argmax at ties), then JAX (the session's worker)
against the reference under jit, inside a shard_map body with sharded operand and
indices, under vmap and under grad; a planted bug in the reference is caught, and
derandomized generated programs with these ops agree.
"""
import numpy as np
import pytest

from fuzz import typecheck as T
from fuzz.reference import Reference, evaluate, make_input
from support.judging import agree_on_generated, agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap


def gather_program():
    """Indices from argmax (in [0, 4)) and from a start index past the end, taken with each mode."""
    body = fn(["a", "b"], [eqn("argmax", ["a"], ["i"], axis=0),             # (4,) int32 in [0, 4)
                           eqn("take", ["b", "i"], ["t0"], axis=1, mode="clip"),   # b's dim 1 has 2
                           eqn("take", ["b", "i"], ["t1"], axis=1, mode="wrap"),
                           eqn("take", ["b", "i"], ["t2"], axis=1, mode="fill"),
                           eqn("index", [], ["j"], axes=[], scale=1, offset=-3),
                           eqn("take", ["a", "j"], ["t3"], axis=0, mode="fill"),   # -3 counts from the end
                           eqn("argmin", ["b"], ["k"], axis=0),
                           eqn("astype", ["k"], ["kf"], dtype="float32")],  # (results are float32)
              ["t0", "t1", "t2", "t3", "kf"])
    loss = fn(["b", "a"], [eqn("argmax", ["a"], ["i"], axis=None),            # flattened: in [0, 16)
                           eqn("take", ["b", "i"], ["t"], axis=0, mode="wrap"),   # b's dim 0 has 8
                           eqn("sin", ["t"], ["s"]), eqn("wsum", ["s"], ["l"], seed=5)], ["l"])
    calls = [call("f0", [JIT], ["x0", "x1"]),
             call("f0", [], ["x0", "x1"]),
             call("f0", [JIT, shard_map([[None, ["x"]], [["x"], None]], [[["x"], None]] * 3 + [[["x"]], [["x"]]])],
                  ["x0", "x1"]),
             call("f0", [vmap([None, 0], [0, 0, 0, None, 0])], ["x0", "x2"]),
             call("f1", [JIT, GRAD], ["x3", "x0"]),
             call("f1", [JIT, vmap([0, None], [0]), GRAD], ["x4", "x0"])]
    return program(mesh=(("x", 2),), inputs=[("x0", (4, 4), 1), ("x1", (8, 2), 2), ("x2", (3, 8, 2), 3),
                                             ("x3", (8, 3), 4), ("x4", (2, 8, 3), 5)],
                   functions={"f0": body, "f1": loss}, calls=calls)


def test_take_and_argmax_reference_by_hand():
    res = evaluate(gather_program())["results"]
    a, b = make_input(1, (4, 4)), make_input(2, (8, 2))
    i = np.argmax(a, axis=0)
    assert set(i) - {0, 1}, "the test needs indices past b's dim 1"
    np.testing.assert_array_equal(res[0][0], b[:, np.clip(i, 0, 1)])
    np.testing.assert_array_equal(res[0][1], b[:, i % 2])
    want = np.where(i < 2, b[:, np.minimum(i, 1)], np.nan)
    np.testing.assert_array_equal(res[0][2], want)
    np.testing.assert_array_equal(res[0][3], a[1])  # -3 of 4 rows: row 1
    np.testing.assert_array_equal(res[0][4], np.argmin(b, axis=0))
    for k in range(5):  # eager and jit alike
        np.testing.assert_array_equal(res[1][k], res[0][k])


def test_take_typing():
    ctx = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),))
    e = eqn("take", ["b", "i"], ["t"], axis=1, mode="clip")
    x = T.Ty((3, 4, 5), frozenset({"x"}))
    assert T.eqn_types(e, [x, T.Ty((2, 6), frozenset(), "int32")], ctx) == [T.Ty((3, 2, 6, 5), frozenset({"x"}))]
    with pytest.raises(T.ProgramError, match="empty dim"):
        T.eqn_types(e, [T.Ty((3, 0)), T.Ty((), frozenset(), "int32")], ctx)
    fill = eqn("take", ["b", "i"], ["t"], axis=1, mode="fill")  # JAX raises IndexError whatever the mode
    with pytest.raises(T.ProgramError, match="non-empty index from an empty dim"):
        T.eqn_types(fill, [T.Ty((1, 0)), T.Ty((), frozenset(), "int32")], ctx)
    assert T.eqn_types(fill, [T.Ty((1, 0)), T.Ty((0,), frozenset(), "int32")], ctx) == [T.Ty((1, 0))]
    with pytest.raises(T.ProgramError):  # float indices
        T.eqn_types(e, [x, T.Ty((2,))], ctx)
    with pytest.raises(T.ProgramError, match="rank 3"):
        T.eqn_types(e, [x, T.Ty((1, 1, 1), frozenset(), "int32")], ctx)


def test_jax_agrees_with_the_reference_on_take(worker):
    agree_with_jax(worker, gather_program())


class ClipAsWrap(Reference):
    """The reference with a planted bug: take's clip mode wraps."""

    def primitive(self, e, xs, ts, ctx):
        if e["op"] == "take" and e["mode"] == "clip":
            e = {**e, "mode": "wrap"}
        return super().primitive(e, xs, ts, ctx)


def test_a_wrong_mode_in_the_reference_is_caught(worker):
    p = gather_program()
    assert {c for o, c in judged(worker, p, ClipAsWrap(p).evaluate()) if o == "differential"} == {0, 1, 2, 3}


@pytest.mark.parametrize("op", ["take", "argmax"])
def test_generated_programs_with_gathers_agree(worker, op):
    assert op in agree_on_generated(worker, op, 2)
