"""``einsum`` (``jnp.einsum`` of two operands, fuzz/ops/linalg.py).

The reference against NumPy by hand (a batched matmul, a contraction over two dims, an outer
product, a permuted result), the typing rule, then JAX (the session's worker) against the
reference under jit with split batch / contracting / free dims, eagerly, inside a shard_map
body, under vmap and under grad; a planted bug in the reference is caught, and derandomized
generated programs agree.
"""
import numpy as np
import pytest

from fuzz import typecheck as T
from fuzz.reference import Reference, evaluate, make_input
from fuzz.program import validate_program
from fuzz.render import render
from support.judging import agree_on_generated, agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap

# (lhs, rhs, out) for a of shape (2, 4, 6) and b of shape (2, 6, 4)
CASES = [([0, 1, 2], [0, 2, 3], [0, 1, 3]),  # batched matmul "abc,acd->abd"
         ([0, 1, 2], [0, 2, 1], [0]),  # two contracting dims "abc,acb->a"
         ([0, 1, 2], [3, 2, 1], [0, 3]),  # contracting dims in other positions, no batch "abc,dcb->ad"
         ([0, 1, 2], [0, 2, 1], [1, 0])]  # batch dims only, result permuted "abc,acb->ba"


def einsum_program():
    body = fn(["a", "b"], [eqn("einsum", ["a", "b"], [f"t{k}"], lhs=l, rhs=r, out=o)
                           for k, (l, r, o) in enumerate(CASES)], [f"t{k}" for k in range(4)])
    loss = fn(["a", "b"], [eqn("einsum", ["a", "b"], ["t"], lhs=[0, 1, 2], rhs=[0, 2, 3], out=[3, 0, 1]),
                           eqn("sin", ["t"], ["y"]), eqn("wsum", ["y"], ["l"], seed=7)], ["l"])
    calls = [call("f0", [JIT], ["x0", "x1"]),
             call("f0", [], ["x0", "x1"]),
             call("f0", [JIT], ["x2", "x3"]),  # the batch dim split on both
             call("f0", [JIT], ["x4", "x5"]),  # a contracting dim split (partial sums)
             call("f0", [JIT, shard_map([[["x"], None, None]] * 2,
                                        [[["x"], None, None], [["x"]], [None, ["x"]], [None, ["x"]]])],
                  ["x0", "x1"]),
             call("f0", [JIT, vmap([0, 0], [0] * 4)], ["x6", "x7"]),
             call("f1", [JIT, GRAD], ["x2", "x3"]),
             call("f1", [JIT, vmap([0, None], [0]), GRAD], ["x6", "x1"])]
    p = program(mesh=(("x", 2),), inputs=[("x0", (2, 4, 6), 1), ("x1", (2, 6, 4), 2), ("x2", (2, 4, 6), 3),
                                          ("x3", (2, 6, 4), 4), ("x4", (2, 4, 6), 5), ("x5", (2, 6, 4), 6),
                                          ("x6", (3, 2, 4, 6), 7), ("x7", (3, 2, 6, 4), 8)],
                functions={"f0": body, "f1": loss}, calls=calls)
    specs = {"x2": [["x"], None, None], "x3": [["x"], None, None], "x4": [None, None, ["x"]], "x5": [None, ["x"], None]}
    for i in p["inputs"]:
        i["spec"] = specs.get(i["name"])
    return p


def test_einsum_reference_by_hand():
    res = evaluate(einsum_program())["results"]
    a, b = make_input(1, (2, 4, 6)), make_input(2, (2, 6, 4))
    want = [np.matmul(a, b), np.trace(np.matmul(a, b), axis1=1, axis2=2),
            np.tensordot(a, b, axes=([1, 2], [2, 1])), np.diagonal(np.matmul(a, b), axis1=1, axis2=2).T]
    assert [w.shape for w in want] == [(2, 4, 4), (2,), (2, 2), (4, 2)]
    for got, w in zip(res[0], want):
        np.testing.assert_allclose(got, w, rtol=1e-6)
    for k in range(4):  # eager and jit alike
        np.testing.assert_array_equal(res[1][k], res[0][k])


def test_einsum_typing():
    ctx = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),))
    a, b = T.Ty((2, 4, 6), frozenset({"x"})), T.Ty((2, 6, 4))
    l, r, o = CASES[0]
    assert T.eqn_types(eqn("einsum", ["a", "b"], ["t"], lhs=l, rhs=r, out=o), [a, b], ctx) == \
        [T.Ty((2, 4, 4), frozenset({"x"}))]
    assert T.eqn_types(eqn("einsum", ["a", "b"], ["t"], lhs=l, rhs=r, out=[3, 1, 0]), [a, b], ctx)[0].shape == (4, 4, 2)
    bad = [(dict(lhs=[0, 1], rhs=r, out=o), "ranks"),
           (dict(lhs=[0, 0, 2], rhs=r, out=o), "repeat"),
           (dict(lhs=l, rhs=[0, 1, 3], out=o), "sizes"),  # label 1: 4 in a, 6 in b
           (dict(lhs=l, rhs=r, out=[0, 1, 7]), "not in its operands"),
           (dict(lhs=l, rhs=r, out=[0, 1]), "summed in one operand alone")]  # label 3 of b dropped
    for params, msg in bad:
        with pytest.raises(T.ProgramError, match=msg):
            T.eqn_types(eqn("einsum", ["a", "b"], ["t"], **params), [a, b], ctx)
    with pytest.raises(T.ProgramError, match="same dtype|dtype"):
        T.eqn_types(eqn("einsum", ["a", "b"], ["t"], lhs=l, rhs=r, out=o), [a, T.Ty((2, 6, 4), dtype="int32")], ctx)


def test_einsum_renders_its_labels_as_letters_only():
    p = einsum_program()
    assert "jnp.einsum('abc,acd->abd', a, b)" in render(p)
    e = p["functions"]["f0"]["eqns"][0]
    e["lhs"], e["rhs"] = [0, 1, 99], [0, 99, 3]  # (types well; no letter)
    with pytest.raises(T.ProgramError, match="einsum labels"):
        render(p)
    with pytest.raises(Exception, match="99"):
        validate_program(p)


def test_jax_agrees_with_the_reference_on_einsum(worker):
    agree_with_jax(worker, einsum_program())


class Transposed(Reference):
    """The reference with a planted bug: a batched matmul's result transposed in its last two dims."""

    def primitive(self, e, xs, ts, ctx):
        out = super().primitive(e, xs, ts, ctx)
        if e["op"] == "einsum" and e["out"] == [0, 1, 3]:
            out = [np.swapaxes(out[0], -1, -2)]
        return out


def test_a_wrong_einsum_in_the_reference_is_caught(worker):
    p = einsum_program()
    assert {c for o, c in judged(worker, p, Transposed(p).evaluate()) if o == "differential"} == {0, 1, 2, 3, 4, 5}


def test_generated_programs_with_einsum_agree(worker):
    assert "einsum" in agree_on_generated(worker, "einsum", 3)
