"""Ops added one module each: ``custom_vjp`` / ``custom_jvp`` (fuzz/ops/custom.py), ``cumprod`` (scans.py), ``split`` (movement.py).

For each: the reference against NumPy by hand on a small program, then JAX 0.10.2 (the
session's worker) against the reference on hand-written programs that put the op under
grad / vjp / jvp, inside shard_map bodies (check_vma on and off), under vmap and jit, and
on derandomized generated programs that contain it; a wrong derivative planted in the
reference is caught (the comparison can fail). The typing rules refuse what JAX refuses
(custom_vjp under jvp).
"""
import numpy as np
import pytest

from fuzz import ops as O
from fuzz import typecheck as T
from fuzz.reference import Reference, evaluate, make_input, weights
from fuzz.render import render
from support.judging import agree_on_generated, judged, reference
from support.programs import GRAD, JIT, call, eqn, fn, jvp, program, shard_map, vjp, vmap

GRAD01 = {"kind": "grad", "argnums": [0, 1]}


class Planted(Reference):
    """The reference with a wrong derivative rule planted in one op: ``wrong(e)`` returns the equation to evaluate."""

    def __init__(self, program, wrong):
        super().__init__(program)
        self.wrong = wrong

    def primitive(self, e, xs, ts, ctx):
        return super().primitive(self.wrong(e), xs, ts, ctx)


# ------------------------------------------------------------------ custom_vjp
def vjp_loss(rule, primal="sin"):
    """f(a) = wsum(custom_vjp(a)) with seed 3."""
    return fn(["a"], [eqn("custom_vjp", ["a"], ["v"], primal=primal, rule=rule),
                      eqn("wsum", ["v"], ["l"], seed=3)], ["l"])


def vjp_program(rule, primal="sin"):
    """custom_vjp under grad, inside shard_map bodies (check_vma on and off, a varying and an
    unvarying argument), around a shard_map, under vmap and vjp; x0 (8,), x1 (4, 2)."""
    body = fn(["a"], [eqn("custom_vjp", ["a"], ["v"], primal=primal, rule=rule)], ["v"])
    around = fn(["a"], [eqn("call", ["a"], ["v"], transforms=[shard_map([[["x"]]], [[["x"]]])], fn=body),
                        eqn("wsum", ["v"], ["l"], seed=5)], ["l"])
    calls = [call("f0", [JIT, GRAD], ["x0"]),
             call("f0", [JIT, shard_map([[["x"]]], [[["x"]]]), GRAD], ["x0"]),
             call("f0", [JIT, shard_map([[["x"]]], [[["x"]]], check_vma=False), GRAD], ["x0"]),
             call("f0", [JIT, shard_map([[None]], [[None]]), GRAD], ["x0"]),  # an unvarying argument
             call("f1", [JIT, GRAD], ["x0"]),
             call("f0", [JIT, vmap([1], [0], axis_name="i"), GRAD], ["x1"]),
             call("f2", [JIT, vjp(8), vmap([0], [1])], ["x1"]),
             call("f2", [], ["x1"])]
    return program(inputs=[("x0", (8,), 1), ("x1", (4, 2), 2)],
                   functions={"f0": vjp_loss(rule, primal), "f1": around, "f2": body}, calls=calls)


@pytest.mark.parametrize("rule, scale", [("true", 1), ("zero", 0), ("none", 0), ("scaled", 2)])
def test_custom_vjp_reference_by_hand(rule, scale):
    res = reference(vjp_program(rule))["results"]
    x0, x1 = make_input(1, (8,)), make_input(2, (4, 2))
    w = weights(3, (8,))
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    close(res[0][0], scale * w * np.cos(x0))
    # inside a shard_map body every block has its own weights (4 blocks of 2)
    close(res[1][0], scale * np.tile(weights(3, (2,)), 4) * np.cos(x0))
    # an unvarying argument: the loss is counted once, its gradient is the global one
    close(res[3][0], scale * w * np.cos(x0))
    close(res[4][0], scale * weights(5, (8,)) * np.cos(x0))
    close(res[5][0], scale * weights(3, (4,)) * np.cos(x1).T)  # (vmap over dim 1, out_axes 0)
    # vjp of a vmap over dim 0 (out_axes 1): the primal sin, then the cotangent weights(8, (2, 4)) pulled back
    close(res[6][0], np.sin(x1).T)
    close(res[6][1], scale * weights(8, (2, 4)).T * np.cos(x1))
    close(res[7][0], np.sin(x1))


def all_rules_program():
    """Every backward rule (and primal) inside shard_map bodies and under vjp of vmap."""
    functions, calls = {}, []
    for k, (rule, primal) in enumerate([("true", "square"), ("zero", "tanh"), ("none", "sin")]):
        functions[f"f{k}"] = vjp_loss(rule, primal)
        calls += [call(f"f{k}", [JIT, shard_map([[["x"]]], [[["x"]]]), GRAD], ["x0"]),
                  call(f"f{k}", [JIT, shard_map([[None]], [[None]], check_vma=False), GRAD], ["x0"]),
                  call(f"f{k}", [JIT, vmap([0], [0]), GRAD], ["x1"])]
    return program(inputs=[("x0", (8,), 1), ("x1", (4, 2), 2)], functions=functions, calls=calls)


def test_custom_vjp_primals():
    for primal, f in [("sin", np.sin), ("tanh", np.tanh), ("square", np.square)]:
        np.testing.assert_allclose(evaluate(plain_vjp_program("true", primal))["results"][0][0],
                                   f(make_input(1, (8,))), rtol=1e-6)


def test_custom_vjp_is_refused_under_jvp_however_deep():
    # JAX: "can't apply forward-mode autodiff (jvp) to a custom_vjp function" (measured on 0.10.2,
    # also for jvp(grad(f)) when the grad does not differentiate the op's operand)
    fs = vjp_program("true")["functions"]
    for c in [call("f2", [jvp(1)], ["x1"]), call("f0", [jvp(1), JIT, GRAD], ["x1"]),
              call("f0", [jvp(1), vmap([0], [0]), JIT, GRAD], ["x1"])]:
        p = program(inputs=[("x1", (4, 2), 2)], functions={c["function"]: fs[c["function"]]}, calls=[c])
        with pytest.raises(T.ProgramError, match="custom_vjp under jvp"):
            T.check_program(p)


def plain_vjp_program(rule, primal="sin"):
    body = fn(["a"], [eqn("custom_vjp", ["a"], ["v"], primal=primal, rule=rule)], ["v"])
    return program(inputs=[("x0", (8,), 1)], functions={"f0": body}, calls=[call("f0", [JIT], ["x0"])])


def test_custom_vjp_rendering():
    src = render(plain_vjp_program("none"))
    assert "@jax.custom_vjp" in src and "_cvjp_v.defvjp(_fwd_v, _bwd_v)" in src and "return (None,)" in src
    src = render(plain_vjp_program("scaled", "tanh"))
    assert "return (2 * g * (1 - jnp.tanh(x) ** 2),)" in src
    with pytest.raises(T.ProgramError):
        render(plain_vjp_program("sideways"))
    assert O.get("custom_vjp").features({"rule": "none"}) == {"custom_vjp", "custom_vjp_none_cotangent"}


def test_jax_agrees_with_the_reference_on_custom_vjp(worker):
    assert judged(worker, all_rules_program()) == []


def test_a_wrong_backward_rule_in_the_reference_is_caught(worker):
    p = vjp_program("scaled")
    assert judged(worker, p) == []

    def true_rule(e):  # the reference forgets the factor 2 of the scaled rule
        return {**e, "rule": "true"} if e["op"] == "custom_vjp" else e

    found = judged(worker, p, Planted(p, true_rule).evaluate())
    # every call with a derivative differs (vjp's primal outputs agree); the plain call (7) agrees
    assert sorted({c for _, c in found}) == list(range(7)) and {o for o, _ in found} == {"differential"}, found


def test_custom_vjp_on_an_explicit_mesh(worker):
    p = vjp_program("none")
    p["mesh"]["axis_type"] = "explicit"
    T.check_program(p)
    assert judged(worker, p) == []


def test_generated_programs_with_custom_vjp_agree(worker):
    seen = agree_on_generated(worker, "custom_vjp", 1)
    assert "custom_vjp" in seen


# ------------------------------------------------------------------ custom_jvp
def jvp_fns(rule, symbolic_zeros, primal="sin"):
    """f0(a, b) = wsum(custom_jvp(a, b)); f1(a) = wsum(custom_jvp(a)); f2(a, b) = custom_jvp(a, b)."""
    kw = {"primal": primal, "rule": rule, "symbolic_zeros": symbolic_zeros}
    return {"f0": fn(["a", "b"], [eqn("custom_jvp", ["a", "b"], ["v"], **kw), eqn("wsum", ["v"], ["l"], seed=3)],
                     ["l"]),
            "f1": fn(["a"], [eqn("custom_jvp", ["a"], ["v"], **kw), eqn("wsum", ["v"], ["l"], seed=3)], ["l"]),
            "f2": fn(["a", "b"], [eqn("custom_jvp", ["a", "b"], ["v"], **kw)], ["v"])}


def jvp_program(rule, symbolic_zeros, primal="sin"):
    """custom_jvp under grad (one argument of two: a symbolic zero tangent), inside shard_map bodies,
    under jvp, vjp of vmap, vmap of grad and jvp of grad; x0, x2 (8,), x1 (4, 2), x3 (2,)."""
    sm = [[["x"]], [None]]
    calls = [call("f0", [JIT, GRAD], ["x0", "x2"]),
             call("f0", [JIT, GRAD01], ["x0", "x2"]),
             call("f0", [JIT, shard_map(sm, [[["x"]]]), GRAD], ["x0", "x3"]),
             call("f0", [JIT, shard_map(sm, [[["x"]], [["x"]]], check_vma=False), GRAD01], ["x0", "x3"]),
             call("f2", [JIT, jvp(4)], ["x0", "x2"]),
             call("f2", [JIT, vjp(6), vmap([0, None], [0])], ["x1", "x3"]),
             call("f1", [JIT, vmap([0], [0]), GRAD], ["x1"]),
             call("f1", [jvp(2), JIT, GRAD], ["x0"])]
    return program(inputs=[("x0", (8,), 1), ("x1", (4, 2), 2), ("x2", (8,), 4), ("x3", (2,), 5)],
                   functions=jvp_fns(rule, symbolic_zeros, primal), calls=calls)


@pytest.mark.parametrize("rule, scale", [("true", 1), ("zero", 0), ("scaled", 2)])
def test_custom_jvp_reference_by_hand(rule, scale):
    res = reference(jvp_program(rule, True))["results"]
    a, b = make_input(1, (8,)), make_input(4, (8,))
    w = weights(3, (8,))
    close = lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)
    close(res[0][0], scale * w * np.cos(a) * b)
    close(res[1][1], scale * w * np.sin(a))
    close(res[2][0], scale * np.tile(weights(3, (2,)), 4) * np.cos(a) * np.tile(make_input(5, (2,)), 4))
    # jvp: the value sin(a) * b, then the tangent for the tangents weights(4) of a and weights(5) of b
    close(res[4][0], np.sin(a) * b)
    close(res[4][1], scale * (np.cos(a) * weights(4, (8,)) * b + np.sin(a) * weights(5, (8,))))
    # jvp of grad: the gradient scale * w * cos(a), then its derivative along weights(2)
    close(res[7][0], scale * w * np.cos(a))
    close(res[7][1], -scale * w * np.sin(a) * weights(2, (8,)))


def test_custom_jvp_rendering_and_typing():
    src = render(jvp_program("scaled", True))
    assert "_cjvp_v.defjvp(_jvprule_v, symbolic_zeros=True)" in src
    assert "if not isinstance(ty, jax.custom_derivatives.SymbolicZero):" in src and "return out, 2 * dt" in src
    src = render(jvp_program("true", False, "square"))
    assert "return out, 2 * x * tx * y + x * x * ty" in src and "symbolic_zeros" not in src
    # two operands broadcast as mul's, and vary where either does
    ctx = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),))
    e = eqn("custom_jvp", ["a", "b"], ["v"], primal="sin", rule="true", symbolic_zeros=False)
    assert T.eqn_types(e, [T.Ty((3, 1)), T.Ty((4,), frozenset({"x"}))], ctx) == [T.Ty((3, 4), frozenset({"x"}))]
    with pytest.raises(T.ProgramError):
        T.eqn_types(e, [T.Ty((3,)), T.Ty((4,))], ctx)
    assert O.get("custom_jvp").features({**e, "symbolic_zeros": True}) == {"custom_jvp", "custom_jvp_symbolic_zeros"}


def test_jax_agrees_with_the_reference_on_custom_jvp(worker):
    p = jvp_program("zero", True, "tanh")
    q = jvp_program("true", False, "square")
    p["functions"].update({k.replace("f", "h"): f for k, f in q["functions"].items()})
    p["calls"] += [{**c, "function": c["function"].replace("f", "h")} for c in q["calls"]]
    assert judged(worker, p) == []


def test_a_wrong_tangent_rule_in_the_reference_is_caught(worker):
    p = jvp_program("scaled", True)
    assert judged(worker, p) == []

    def true_rule(e):  # the reference forgets the factor 2 of the scaled rule
        return {**e, "rule": "true"} if e["op"] == "custom_jvp" else e

    found = judged(worker, p, Planted(p, true_rule).evaluate())
    assert sorted({c for _, c in found}) == list(range(8)) and {o for o, _ in found} == {"differential"}, found


def test_generated_programs_with_custom_jvp_agree(worker):
    assert "custom_jvp" in agree_on_generated(worker, "custom_jvp", 1)


# ------------------------------------------------------------------ cumprod
def cumprod_program():
    """wsum(cumprod(a, axis)) under grad, inside shard_map bodies and under vmap; x0 (4, 3) with a zero."""
    loss = fn(["a"], [eqn("cumprod", ["a"], ["v"], axis=1), eqn("wsum", ["v"], ["l"], seed=3)], ["l"])
    plain = fn(["a"], [eqn("cumprod", ["a"], ["v"], axis=0)], ["v"])
    calls = [call("f0", [JIT, GRAD], ["x0"]),
             call("f0", [JIT, shard_map([[["x"], None]], [[["x"], None]]), GRAD], ["x0"]),
             call("f0", [JIT, vmap([0], [0], axis_name="i"), GRAD], ["x1"]),
             call("f1", [JIT, shard_map([[None, None, ["x"]]], [[None, None, ["x"]]], check_vma=False)], ["x1"]),
             call("f1", [], ["x0"])]
    return program(mesh=(("x", 2),), inputs=[("x0", (4, 3), 1), ("x1", (2, 4, 4), 2)],
                   functions={"f0": loss, "f1": plain}, calls=calls)


def test_cumprod_reference_by_hand():
    res = reference(cumprod_program())["results"]
    x = make_input(1, (4, 3))
    assert (x == 0).any()  # a zero element: a derivative by division would be wrong there
    w = weights(3, (4, 3))
    # d/dx[r, j] of sum_i w[r, i] * prod_{k <= i} x[r, k] = sum_{i >= j} w[r, i] * prod_{k <= i, k != j} x[r, k]
    want = np.zeros_like(x)
    for r in range(4):
        for j in range(3):
            want[r, j] = sum(w[r, i] * np.prod([x[r, k] for k in range(i + 1) if k != j]) for i in range(j, 3))
    np.testing.assert_allclose(res[0][0], want, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(res[4][0], np.cumprod(x, axis=0))


def test_jax_agrees_with_the_reference_on_cumprod(worker):
    p = cumprod_program()
    assert judged(worker, p) == []

    def as_cumsum(e):  # a wrong op planted in the reference
        return {**e, "op": "cumsum"} if e["op"] == "cumprod" else e

    assert {c for _, c in judged(worker, p, Planted(p, as_cumsum).evaluate())} == set(range(5))


def test_generated_programs_with_cumprod_agree(worker):
    assert "cumprod" in agree_on_generated(worker, "cumprod", 1)


# ------------------------------------------------------------------ split
def split_program():
    """u, v = split(a, 2, axis=0); wsum(sin(u) * v) under grad, inside shard_map bodies and under vmap."""
    loss = fn(["a"], [eqn("split", ["a"], ["u", "v"], axis=0), eqn("sin", ["u"], ["s"]), eqn("mul", ["s", "v"], ["m"]),
                      eqn("wsum", ["m"], ["l"], seed=3)], ["l"])
    halves = fn(["a"], [eqn("split", ["a"], ["u", "v"], axis=1)], ["v", "u"])
    calls = [call("f0", [JIT, GRAD], ["x0"]),
             call("f0", [JIT, shard_map([[None, ["x"]]], [[None, ["x"]]]), GRAD], ["x0"]),
             call("f0", [JIT, vmap([1], [1]), GRAD], ["x0"]),
             call("f1", [JIT, shard_map([[["x"], None]], [[["x"], None], [["x"], None]])], ["x0"]),
             call("f1", [vmap([0], [0, 1])], ["x1"])]
    return program(mesh=(("x", 2),), inputs=[("x0", (4, 2), 1), ("x1", (2, 2, 4), 2)],
                   functions={"f0": loss, "f1": halves}, calls=calls)


def test_split_reference_by_hand():
    res = reference(split_program())["results"]
    x = make_input(1, (4, 2))
    w = weights(3, (2, 2))
    np.testing.assert_allclose(res[0][0], np.concatenate([w * np.cos(x[:2]) * x[2:], w * np.sin(x[:2])]), rtol=1e-6)
    x1 = make_input(2, (2, 2, 4))
    np.testing.assert_array_equal(res[4][0], x1[:, :, 2:])
    np.testing.assert_array_equal(res[4][1], np.moveaxis(x1[:, :, :2], 0, 1))
    # typing: an odd dim is refused, the halves vary where the operand does
    ctx = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),))
    e = eqn("split", ["a"], ["u", "v"], axis=1)
    assert T.eqn_types(e, [T.Ty((3, 4), frozenset({"x"}))], ctx) == [T.Ty((3, 2), frozenset({"x"}))] * 2
    with pytest.raises(T.ProgramError, match="odd"):
        T.eqn_types(e, [T.Ty((4, 3))], ctx)


def test_jax_agrees_with_the_reference_on_split(worker):
    p = split_program()
    assert judged(worker, p) == []

    assert {c for _, c in judged(worker, p, SwappedHalves(p).evaluate())} == {0, 1, 2, 3, 4}


class SwappedHalves(Reference):
    """The reference with a planted bug: split's halves swapped."""

    def primitive(self, e, xs, ts, ctx):
        outs = super().primitive(e, xs, ts, ctx)
        return outs[::-1] if e["op"] == "split" else outs


def test_generated_programs_with_split_agree(worker):
    assert "split" in agree_on_generated(worker, "split", 1)
