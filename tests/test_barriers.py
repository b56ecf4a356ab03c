"""``shard_alike`` and ``optimization_barrier`` (fuzz/ops/sharding.py): identities on values with
rules of their own in every transform.

The typing rules (equal shapes for shard_alike; one result per operand; the check_rep release
rule), the rendering, JAX against the reference eagerly, under jit, grad, vmap (one operand
batched, the other not) and in shard_map bodies, a planted bug caught, and the generator.
"""
import pytest

from fuzz import typecheck as T
from fuzz.features import features
from fuzz.reference import Reference
from fuzz.render import NEWEST_CAPS, render
from support.draws import drawn_programs
from support.judging import agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap


def barrier_program():
    body = fn(["a", "b"], [eqn("sin", ["a"], ["s"]),
                           eqn("shard_alike", ["s", "b"], ["s2", "b2"]),
                           eqn("optimization_barrier", ["s2", "b2"], ["s3", "b3"]),
                           eqn("mul", ["s3", "b3"], ["m"]),
                           eqn("optimization_barrier", ["m"], ["m2"]),
                           eqn("add", ["m2", "a"], ["o"])], ["o"])
    loss = fn(["a", "b"], [eqn("call", ["a", "b"], ["o"], transforms=[], fn=body),
                           eqn("wsum", ["o"], ["l"], seed=3)], ["l"])
    sm = shard_map([[["x"]], [["x"]]], [[["x"]]])
    calls = [call("f0", [], ["x0", "x1"]),
             call("f0", [JIT], ["x0", "x1"]),
             call("f1", [JIT, GRAD], ["x0", "x1"]),
             call("f0", [JIT, vmap([0, None], [0])], ["x2", "x1"]),
             call("f0", [JIT, vmap([None, 0], [0], spmd_axis_name="y")], ["x0", "x2"]),
             call("f0", [JIT, sm], ["x0", "x1"]),
             call("f0", [sm], ["x0", "x1"]),
             call("f0", [JIT, {**sm, "check_vma": False}], ["x0", "x1"])]
    return program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (8,), 1), ("x1", (8,), 2), ("x2", (2, 8), 3)],
                   functions={"f0": body, "f1": loss}, calls=calls)


def test_the_typing_rules():
    T.check_program(barrier_program())
    p = barrier_program()
    p["functions"]["f0"]["eqns"][1]["args"] = ["s", "x2"]  # (a captured (2, 8) against an (8,))
    with pytest.raises(T.ProgramError, match="shard_alike of shapes"):
        T.check_program(p)
    p = barrier_program()
    p["functions"]["f0"]["eqns"][2]["outs"] = ["s3"]
    with pytest.raises(T.ProgramError):
        T.check_program(p)
    old = {**NEWEST_CAPS, "jax_version": "0.5.3", "check_kw": "check_rep"}
    rules = T.release_rules(old)
    assert "check_rep" in rules and "no_op:optimization_barrier" not in rules
    assert "no_op:optimization_barrier" in T.release_rules({**old, "jax_version": "0.4.38"})
    with pytest.raises(T.ProgramError, match="check_rep"):
        T.check_program(barrier_program(), caps=old)
    unchecked = barrier_program()
    unchecked["calls"] = [c for c in unchecked["calls"] if not any(t.get("check_vma") for t in c["transforms"])]
    T.check_program(unchecked, caps=old)


def test_rendering():
    src = render(barrier_program(), NEWEST_CAPS)
    assert "from jax.experimental.shard_alike import shard_alike\n    s2, b2 = shard_alike(s, b)" in src
    assert "s3, b3 = jax.lax.optimization_barrier((s2, b2))" in src
    assert "m2, = jax.lax.optimization_barrier((m,))" in src
    assert {"shard_alike", "optimization_barrier"} <= features(barrier_program())[0]


def test_jax_agrees_with_the_reference(worker):
    if T.version_tuple(worker.caps["jax_version"]) < (0, 5, 3):
        pytest.skip("optimization_barrier: jax >= 0.5.3 here")
    p = barrier_program()
    if "check_rep" in T.release_rules(worker.caps):
        p["calls"] = [c for c in p["calls"] if not any(t.get("check_vma") for t in c["transforms"])]
    agree_with_jax(worker, p)


def test_a_barrier_of_values_varying_differently_varies_as_both(worker):
    """Under check_vma JAX casts a barrier's operands to vary alike (core.standard_vma_rule):
    both results of a barrier of an unvarying and an x-varying value vary over x."""
    if "check_rep" in T.release_rules(worker.caps) or "no_op:optimization_barrier" in T.release_rules(worker.caps):
        pytest.skip("optimization_barrier in a shard_map body with check_vma: jax >= 0.6.0")
    body = fn(["a", "b"], [eqn("optimization_barrier", ["a", "b"], ["a2", "b2"]),
                           eqn("add", ["a2", "a"], ["o"])], ["o", "b2"])

    def prog(out):
        return program(mesh=(("x", 2),), inputs=[("x0", (8,), 1), ("x1", (8,), 2)], functions={"f0": body},
                       calls=[call("f0", t, ["x0", "x1"]) for t in
                              ([shard_map([[None], [["x"]]], [out, [["x"]]])],
                               [JIT, shard_map([[None], [["x"]]], [out, [["x"]]])])])
    with pytest.raises(T.ProgramError, match="omit axes"):
        T.check_program(prog([None]))
    agree_with_jax(worker, prog([["x"]]))


def test_shard_alike_under_vmap_batches_both_results(worker):
    """JAX broadcasts the unbatched operand of shard_alike under vmap (``_shard_alike_batcher``):
    its result is batched too, so out_axes None for it is refused, as JAX refuses it (ValueError
    "got axis spec None but output was batched"; a campaign of 2026-12-05@416e082 drew it)."""
    body = fn(["a"], [eqn("shard_alike", ["x1", "a"], ["s", "t"])], ["s"])

    def prog(out_axes):
        return program(mesh=(("x", 2),), inputs=[("x0", (2, 8), 1), ("x1", (8,), 2)], functions={"f0": body},
                       calls=[call("f0", [vmap([0], out_axes)], ["x0"])])
    with pytest.raises(T.ProgramError, match="out_axes None"):
        T.check_program(prog([None]))
    agree_with_jax(worker, prog([0]))


class Swapped(Reference):
    """The reference with a planted bug: shard_alike returns its second operand twice."""

    def primitive(self, e, xs, ts, ctx):
        if e["op"] == "shard_alike":
            return [xs[1], xs[1]]
        return super().primitive(e, xs, ts, ctx)


def test_a_wrong_value_is_caught(worker):
    if T.version_tuple(worker.caps["jax_version"]) < (0, 5, 3):
        pytest.skip("optimization_barrier: jax >= 0.5.3 here")
    p = barrier_program()
    p["calls"] = p["calls"][:2]
    del p["functions"]["f1"]
    assert {c for o, c in judged(worker, p, Swapped(p).evaluate()) if o == "differential"} == {0, 1}


def test_the_generator_draws_them():
    progs = drawn_programs(range(3), 300, cached=True)
    for name in ("shard_alike", "optimization_barrier"):
        drawn = [p for p in progs if name in features(p)[0]]
        assert len(drawn) >= 5, (name, len(drawn))
        for p in drawn[:10]:
            T.check_program(p)
