"""``scan`` (a ``jax.lax.scan`` transform with a carry; fuzz/typecheck.py, fuzz/render.py, fuzz/reference.py).

The reference by hand (a running product through the carry), the typing rule (a carry
must keep its type: shape, dtype, varying axes), then JAX (the session's worker) against
the reference under jit, eagerly, inside a shard_map body with a collective, under vmap
with a collective over the vmap axis, and under grad; a planted bug in the reference (a
carry that never advances) is caught; the reducer drops a carried result; generated
programs with a carry agree.
"""
import numpy as np
import pytest

from fuzz import typecheck as T
from fuzz.reference import Reference, evaluate, make_input
from support.judging import agree_on_generated, agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, ring, shard_map, vmap


def scan(in_axes, carry):
    return {"kind": "scan", "in_axes": list(in_axes), "carry": list(carry)}


# f(c, x) = (c * x, sin(c)): the carry c becomes c * x; the outputs are c * x and sin(c)
STEP = fn(["c", "x"], [eqn("mul", ["c", "x"], ["y"]), eqn("sin", ["c"], ["s"])], ["y", "s"])
PSUM_STEP = fn(["c", "x"], [eqn("mul", ["c", "x"], ["m"]), eqn("psum", ["m"], ["y"], axes=["x"])], ["y", "m"])
VMAP_STEP = fn(["c", "x"], [eqn("mul", ["c", "x"], ["m"]), eqn("ppermute", ["m"], ["p"], axes=["i"], perm=ring(4)),
                            eqn("add", ["c", "p"], ["y"])], ["y"])


def scan_program():
    loss = fn(["c", "xs"], [eqn("call", ["c", "xs"], ["ys", "ss"], transforms=[scan([None, 0], [0, None])], fn=STEP),
                            eqn("wsum", ["ys"], ["l"], seed=3)], ["l"])
    in_shard = fn(["c", "xs"], [eqn("call", ["c", "xs"], ["ys", "ms"], transforms=[scan([None, 0], [0, None])],
                                    fn=PSUM_STEP)], ["ys", "ms"])
    calls = [call("f0", [JIT, scan([None, 0], [0, None])], ["x0", "x1"]),
             call("f0", [scan([None, 0], [0, None])], ["x0", "x1"]),
             call("f0", [scan([0, 0], [None, None])], ["x1", "x1"]),          # no carry: a lax.map
             call("f1", [JIT, shard_map([[None], [None, ["x"]]], [[None, None], [None, ["x"]]])], ["x5", "x1"]),
             call("f2", [JIT, vmap([0, 0], [0], axis_name="i"), scan([None, 0], [0, None])], ["x2", "x3"]),
             call("f3", [JIT, GRAD], ["x0", "x1"]),
             call("f3", [vmap([None, 0], [0]), GRAD], ["x0", "x4"])]
    return program(mesh=(("x", 2),), inputs=[("x0", (4,), 1), ("x1", (3, 4), 2), ("x2", (4, 2), 3),
                                             ("x3", (4, 3, 2), 4), ("x4", (2, 3, 4), 5), ("x5", (2,), 6)],
                   functions={"f0": STEP, "f1": in_shard, "f2": VMAP_STEP, "f3": loss}, calls=calls)


def test_scan_reference_by_hand():
    res = evaluate(scan_program())["results"]
    c, xs = make_input(1, (4,)), make_input(2, (3, 4))
    cs = [c, c * xs[0], c * xs[0] * xs[1]]
    np.testing.assert_allclose(res[0][0], np.stack([cs[1], cs[2], cs[2] * xs[2]]), rtol=1e-6)
    np.testing.assert_allclose(res[0][1], np.sin(np.stack(cs)), rtol=1e-6)
    np.testing.assert_allclose(res[2][0], xs * xs, rtol=1e-6)
    for k in range(2):
        np.testing.assert_array_equal(res[1][k], res[0][k])


def test_scan_typing():
    ctx = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),))
    c, xs = T.Ty((4,)), T.Ty((3, 4), frozenset({"x"}))
    inner_ctx, inner = T.enter(scan([None, 0], [0, None]), ctx, [c, xs])
    assert inner == [c, T.Ty((4,), frozenset({"x"}))] and inner_ctx.axes == ctx.axes
    ok = T.exit_(scan([None, 0], [0, None]), ctx, inner_ctx, [c, xs], [T.Ty((4,)), T.Ty((2,), frozenset({"x"}))])
    assert ok == [T.Ty((3, 4)), T.Ty((3, 2), frozenset({"x"}))]
    with pytest.raises(T.ProgramError, match="scan carry"):  # the carry would start varying over x
        T.exit_(scan([None, 0], [0, None]), ctx, inner_ctx, [c, xs], [T.Ty((4,), frozenset({"x"}))])
    with pytest.raises(T.ProgramError, match="scan carry"):
        T.exit_(scan([None, 0], [0, None]), ctx, inner_ctx, [c, xs], [T.Ty((5,))])
    with pytest.raises(T.ProgramError, match="scanned over"):
        T.exit_(scan([0, 0], [0, None]), ctx, inner_ctx, [xs, xs], [T.Ty((4,), frozenset({"x"}))])
    with pytest.raises(T.ProgramError, match="differ"):
        T.enter(scan([0, 0], [None, None]), ctx, [T.Ty((2, 4)), xs])
    with pytest.raises(T.ProgramError, match="no argument"):
        T.enter(scan([None, None], [None, None]), ctx, [c, xs])


def test_jax_agrees_with_the_reference_on_scan(worker):
    agree_with_jax(worker, scan_program())


class StuckCarry(Reference):
    """The reference with a planted bug: the carry never advances (every step sees the initial value)."""

    def scan(self, t, *rest):
        return super().scan({**t, "carry": [None] * len(t["carry"])}, *rest)


def test_a_stuck_carry_in_the_reference_is_caught(worker):
    p = scan_program()
    assert {c for o, c in judged(worker, p, StuckCarry(p).evaluate()) if o == "differential"} == {0, 1, 3, 4, 5, 6}


def test_the_reducer_drops_a_carried_result():
    from fuzz.reduce import _drop_arg, _drop_output

    chain, k = _drop_output([JIT, scan([None, 0, None], [1, None, 0])], 0)
    assert k == 0 and chain[1]["carry"] == [0, None, None]  # result 1 is now result 0; result 0 is gone
    assert _drop_arg([scan([None, 0, None], [1, None, 0])], 0)[0] == scan([0, None], [None, 0])


def test_generated_programs_with_a_carry_agree(worker):
    """The first 3 derandomized generated programs with a carried scan: JAX agrees with the reference."""
    assert "scan_carry" in agree_on_generated(worker, None, 3, feature="scan_carry", tries=(133, 533, 2133))
