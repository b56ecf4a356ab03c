"""``ref_update`` (``jax.new_ref`` / ``jax.freeze``, fuzz/ops/refs.py).

Its typing rule (equal shapes and dtypes; no ref in a shard_map body outside jit; a stored
value varies over no checked axis the ref's initial value does not), its rendering, then JAX
(the session's worker, jax >= 0.8.0) against the reference under jit, in a shard_map body,
under vmap and under grad; a planted bug is caught, and derandomized generated programs agree.
"""
import pytest

from fuzz import typecheck as T
from fuzz.reference import Reference
from fuzz.render import NEWEST_CAPS, render
from support.judging import agree_on_generated, agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap


def ref_program():
    body = fn(["a", "b"], [eqn("sin", ["a"], ["s"]),
                           eqn("ref_update", ["s", "b"], ["u"], mode="add", read="freeze"),
                           eqn("ref_update", ["u", "s"], ["v"], mode="set", read="index"),
                           eqn("mul", ["u", "v"], ["w"])], ["u", "w"])
    loss = fn(["a", "b"], [eqn("ref_update", ["a", "b"], ["u"], mode="add", read="index"),
                           eqn("sin", ["u"], ["s"]), eqn("mul", ["s", "a"], ["m"]),
                           eqn("wsum", ["m"], ["l"], seed=3)], ["l"])
    lone = fn(["a", "c"], [eqn("ref_update", ["a", "a"], ["u"], mode="add", read="freeze")], ["u"])
    sm = shard_map([[["x"]], [["x"]]], [[["x"]], [["x"]]])
    calls = [call("f0", [JIT], ["x0", "x1"]),
             call("f0", [JIT, sm], ["x0", "x1"]),
             call("f0", [JIT, vmap([0, 0], [0, 0])], ["x2", "x3"]),
             call("f1", [JIT, GRAD], ["x0", "x1"]),
             call("f0", [JIT, sm], ["x1", "x0"]),
             # the ref of unbatched operands under vmap: batched all the same (out_axes 0)
             call("f2", [JIT, vmap([None, 0], [0])], ["x0", "x2"])]
    return program(mesh=(("x", 2),), inputs=[("x0", (8,), 1), ("x1", (8,), 2), ("x2", (3, 4), 3), ("x3", (3, 4), 4)],
                   functions={"f0": body, "f1": loss, "f2": lone}, calls=calls)


def test_ref_update_typing():
    ctx = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),), jit=True)
    e = eqn("ref_update", ["a", "b"], ["v"], mode="add", read="freeze")
    vx = frozenset({"x"})
    assert T.eqn_types(e, [T.Ty((3,), vx), T.Ty((3,), frozenset())], ctx) == [T.Ty((3,), vx)]
    with pytest.raises(T.ProgramError, match="must be equal"):
        T.eqn_types(e, [T.Ty((3,), vx), T.Ty((1,), vx)], ctx)
    with pytest.raises(T.ProgramError, match="into a ref that does not"):
        T.eqn_types(e, [T.Ty((3,), frozenset()), T.Ty((3,), vx)], ctx)
    unchecked = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh", check_vma=False),), jit=True)
    assert T.eqn_types(e, [T.Ty((3,), frozenset()), T.Ty((3,), vx)], unchecked) == [T.Ty((3,), vx)]
    for eager in (T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),)), T.Ctx(mesh={})):
        with pytest.raises(T.ProgramError, match="outside jit"):
            T.eqn_types(e, [T.Ty((3,), vx), T.Ty((3,), vx)], eager)
    # under vmap JAX batches every ref made there (jax-ml/jax#31672): the result is batched
    vctx = T.Ctx(mesh={}, axes=(T.Axis("_vmap0", 3, "vmap", visible=False),), jit=True)
    assert T.eqn_types(e, [T.Ty((3,)), T.Ty((3,))], vctx) == [T.Ty((3,), frozenset({"_vmap0"}))]
    jacfwd = T.Ctx(mesh={}, grad_at=0, jit=True, rules=frozenset({T.JACOBIAN, T.FORWARD_MODE}))
    with pytest.raises(T.ProgramError, match="jacfwd"):
        T.eqn_types(e, [T.Ty((3,)), T.Ty((3,))], jacfwd)
    with pytest.raises(T.ProgramError, match="mixed dtypes"):
        T.eqn_types(e, [T.Ty((3,)), T.Ty((3,), dtype="int32")], T.Ctx(mesh={}, jit=True))


def test_ref_update_renders_new_ref_update_and_read():
    src = render(ref_program(), NEWEST_CAPS)
    assert "_ref = jax.new_ref(" in src and "_ref[...] += " in src and "_ref[...] = " in src
    assert "jax.freeze(" in src and "_ref[...]\n" in src


def _needs_refs(worker):
    if "no_op:ref_update" in T.release_rules(worker.caps):
        pytest.skip("this JAX has no jax.freeze (jax < 0.8.0)")


def test_jax_agrees_with_the_reference_on_ref_update(worker):
    _needs_refs(worker)
    agree_with_jax(worker, ref_program())


class Unset(Reference):
    """The reference with a planted bug: a ``set`` leaves the ref's initial value."""

    def primitive(self, e, xs, ts, ctx):
        if e["op"] == "ref_update" and e["mode"] == "set":
            return [xs[0]]
        return super().primitive(e, xs, ts, ctx)


def test_a_wrong_ref_update_is_caught(worker):
    _needs_refs(worker)
    p = ref_program()
    assert {c for o, c in judged(worker, p, Unset(p).evaluate()) if o == "differential"} == {0, 1, 2, 4}


def test_generated_programs_with_ref_update_agree(worker):
    _needs_refs(worker)
    assert "new_ref" in agree_on_generated(worker, "ref_update", 3)


def test_a_ref_in_an_inlined_jit_is_not_under_jit_when_its_enclosing_trace_runs_eagerly():
    """jax.jit(f, inline=True) traces f into the enclosing jaxpr: in an eager shard_map body (here
    under an eager checkpoint, which evaluates its jaxpr op by op) a ref there meets eager
    shard_map ("Eager shard_map cannot return a `jax.Ref`", jax 0.10.2: a campaign's finding that
    was the typing rules' fault). A jit that is not inlined compiles its body: allowed."""
    def prog(inline):
        inner = fn(["a"], [eqn("ref_update", ["a", "a"], ["u"], mode="set", read="index")], ["u"])
        jit = {"kind": "jit", "inline": True} if inline else {"kind": "jit"}
        body = fn(["a"], [eqn("call", ["a"], ["m"], transforms=[jit], fn=inner)], ["m"])
        return program(mesh=(("x", 2),), inputs=[("x0", (), 1)], functions={"f0": body},
                       calls=[call("f0", [{"kind": "checkpoint", "policy": None}, shard_map([[]], [[]])], ["x0"])])

    T.check_program(prog(False))
    with pytest.raises(T.ProgramError, match="outside jit"):
        T.check_program(prog(True))
