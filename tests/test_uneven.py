"""Uneven splits: ``with_sharding_constraint`` under jit over mesh axes whose sizes do not divide
the dim (XLA's SPMD partitioner pads the last shards; fuzz/ops/sharding.py).

The typing rule (under jit only, not for device_put), JAX against the reference on padded
splits under jit, grad and vmap (with spmd_axis_name) with ops along the split dim, and the
generator drawing them.
"""
import pytest

from fuzz import typecheck as T
from support.draws import drawn_programs
from support.judging import agree_with_jax
from support.programs import GRAD, JIT, call, eqn, fn, program, vmap


def uneven_program():
    """x0 of 6 elements split over 4 devices (x, y) and over 4 (y, x); x1 of (2, 5) per example over y (2)."""
    body = fn(["a"], [eqn("with_sharding_constraint", ["a"], ["c"], axes=["x", "y"], dim=0),
                      eqn("cumsum", ["c"], ["s"], axis=0),
                      eqn("with_sharding_constraint", ["s"], ["d"], axes=["y", "x"], dim=0),
                      eqn("sin", ["d"], ["o"])], ["o"])
    loss = fn(["a"], [eqn("call", ["a"], ["o"], transforms=[], fn=body),
                      eqn("wsum", ["o"], ["l"], seed=5)], ["l"])
    per_example = fn(["a"], [eqn("with_sharding_constraint", ["a"], ["c"], axes=["y"], dim=0),
                             eqn("cumsum", ["c"], ["s"], axis=0)], ["s"])
    calls = [call("f0", [JIT], ["x0"]), call("f1", [JIT, GRAD], ["x0"]),
             call("f2", [JIT, vmap([0], [0], spmd_axis_name="x")], ["x1"])]
    return program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (6,), 1), ("x1", (2, 5), 2)],
                   functions={"f0": body, "f1": loss, "f2": per_example}, calls=calls)


def test_uneven_splits_are_typed_under_jit_only():
    T.check_program(uneven_program())
    eager = uneven_program()
    eager["calls"] = [call("f0", [], ["x0"])]
    del eager["functions"]["f1"], eager["functions"]["f2"]
    with pytest.raises(T.ProgramError, match="unevenly"):
        T.check_program(eager)
    put = uneven_program()
    put["functions"]["f0"]["eqns"][0]["op"] = "device_put"
    with pytest.raises(T.ProgramError, match="unevenly"):
        T.check_program(put)


def test_jax_agrees_with_the_reference_on_uneven_splits(worker):
    agree_with_jax(worker, uneven_program())


def test_the_generator_draws_uneven_splits():
    """Uneven with_sharding_constraint splits are drawn, and only under jit (on typed shapes)."""
    uneven = 0
    for p in drawn_programs(range(6), 200, cached=True):  # (pooled: 17 at 775bdd1, 22 after the sharding types)
        seen = []
        T.check_program(p, on_eqn=lambda e, ctx, args: seen.append((e, ctx, args)))
        for e, ctx, args in seen:
            if e["op"] == "with_sharding_constraint":
                k = 1
                for a in e["axes"]:
                    k *= ctx.mesh[a]
                if args[0].shape[e["dim"]] % k:
                    assert ctx.jit
                    uneven += 1
    assert uneven >= 5, uneven
