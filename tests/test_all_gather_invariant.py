"""``all_gather_invariant`` (``lax.all_gather(..., to='invarying')``, fuzz/ops/collectives.py).

all_gather's values with a result invariant over the manual axis: the typing rule, the
reference by hand, then JAX (the session's worker) against the reference inside a checked
shard_map under jit, eagerly and under vjp (its transpose is a dynamic_slice, all_gather's a
psum_scatter), with the result returned through an out_spec that leaves the axis out; and
derandomized generated programs agree.
"""
import numpy as np
import pytest

from fuzz import typecheck as T
from fuzz.reference import evaluate, make_input
from support.judging import agree_on_generated, agree_with_jax
from support.programs import JIT, call, eqn, fn, program, shard_map, vmap

VJP = {"kind": "vjp", "seed": 3}


def gather(tiled, axis=0):
    return fn(["a"], [eqn("all_gather_invariant", ["a"], ["v"], axes=["x"], axis=axis, tiled=tiled)], ["v"])


def gathered_program(tiled, check_vma=True):
    """x0 (8, 2) split over x (4 devices) along dim 0, gathered back: out_spec P() (invariant)."""
    out = [[None, None]] if tiled else [[None, None, None]]
    chain = [shard_map([[["x"], None]], out, check_vma=check_vma)]
    return program(inputs=[("x0", (8, 2), 4)], functions={"f0": gather(tiled)},
                   calls=[call("f0", chain, ["x0"]), call("f0", [JIT] + chain, ["x0"]),
                          call("f0", [JIT, VJP] + chain, ["x0"]), call("f0", [VJP] + chain, ["x0"])])


def test_the_result_is_invariant_over_the_axis():
    ctx = T.Ctx(mesh={"x": 4}, axes=(T.Axis("x", 4, "mesh", True), T.Axis("i", 2, "vmap")), jit=True)
    e = eqn("all_gather_invariant", ["a"], ["v"], axes=["x"], axis=0, tiled=True)
    (ty,) = T.eqn_types(e, [T.Ty((2, 3), frozenset({"x", "i"}))], ctx)
    assert ty == T.Ty((8, 3), frozenset({"i"}))
    (ty,) = T.eqn_types({**e, "tiled": False, "axis": 1}, [T.Ty((2, 3), frozenset({"x"}))], ctx)
    assert ty == T.Ty((2, 4, 3), frozenset())
    with pytest.raises(T.ProgramError, match="does not vary"):  # checked axis, invariant operand
        T.eqn_types(e, [T.Ty((2, 3), frozenset())], ctx)
    with pytest.raises(T.ProgramError, match="not a manual mesh axis"):
        T.eqn_types({**e, "axes": ["i"]}, [T.Ty((2, 3), frozenset({"i"}))], ctx)


def test_reference_gathers_the_blocks():
    x = make_input(4, (8, 2))
    res = evaluate(gathered_program(True))["results"]
    np.testing.assert_array_equal(res[0][0], x)  # tiled along dim 0: the whole array
    res = evaluate(gathered_program(False))["results"]
    np.testing.assert_array_equal(res[0][0], x.reshape(4, 2, 2))  # stacked: one block per device


@pytest.mark.parametrize("tiled", [True, False])
def test_jax_agrees_inside_a_checked_shard_map(worker, tiled):
    agree_with_jax(worker, gathered_program(tiled))


def test_jax_agrees_under_vmap_around_the_shard_map(worker):
    chain = [JIT, vmap([0], [0]), shard_map([[["x"], None]], [[None, None]])]
    p = program(inputs=[("x0", (3, 8, 2), 5)], functions={"f0": gather(True)}, calls=[call("f0", chain, ["x0"])])
    agree_with_jax(worker, p)


def test_generated_programs_agree(worker):
    seen = agree_on_generated(worker, "all_gather_invariant", 4)
    assert "all_gather_invariant" in seen
