"""jax.hessian (fuzz/transforms/hessian.py): typed and evaluated as jacfwd(jacrev(f)).

Typing (shapes, varying axes, what it refuses), the reference by hand and against JAX
(inside a shard_map body with a collective, under vmap), the rendered source, and the
generator drawing it.
"""
import numpy as np
import pytest

from fuzz import typecheck as T
from fuzz.features import features
from fuzz.program import validate_program
from fuzz.reference import evaluate, make_input
from fuzz.render import render
from fuzz.typecheck import ProgramError, check_program
from support.draws import drawn_programs
from support.judging import agree_with_jax
from support.programs import call, eqn, fn, program, shard_map, vmap

# v = sin(a) * b, w = a * a: two arguments, two results
BODY = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("mul", ["s", "b"], ["v"]), eqn("mul", ["a", "a"], ["w"])],
          ["v", "w"])
PSUM = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("mul", ["s", "b"], ["m"]), eqn("psum", ["m"], ["r"], axes=["x"]),
                       eqn("mul", ["a", "b"], ["w"])], ["r", "w"])


def hess(k=0):
    return {"kind": "hessian", "argnums": [k]}


def two_inputs(calls, functions=None, mesh=(("x", 2),)):
    """Inputs x0 (4, 2) and x1 (2,); the functions the calls name (default: f0 = BODY)."""
    functions = functions or {"f0": BODY}
    return program(mesh=mesh, inputs=[("x0", (4, 2), 1), ("x1", (2,), 2)], functions=functions, calls=calls)


def test_hessian_is_typed_as_jacfwd_of_jacrev():
    p = two_inputs([call("f0", [hess(1)], ["x0", "x1"]),
                    call("f0", [{"kind": "jacfwd", "argnums": [1]}, {"kind": "jacrev", "argnums": [1]}],
                         ["x0", "x1"])])
    validate_program(p)
    h, composed = check_program(p)
    assert h == composed == [T.Ty((4, 2, 2, 2)), T.Ty((4, 2, 2, 2))]
    assert "hessian" in features(p)[0]


@pytest.mark.parametrize("t,match", [
    ({"kind": "hessian", "argnums": [0, 1]}, "one argnums"),
    ({"kind": "hessian", "argnums": [2]}, "out of range"),
])
def test_hessian_rules_refuse(t, match):
    p = two_inputs([call("f0", [t], ["x0", "x1"])])
    with pytest.raises(ProgramError, match=match):
        check_program(p)
    with pytest.raises(ProgramError):
        validate_program(p)


def test_hessian_refuses_int_arguments():
    p = program(inputs=[("x0", (4,), 1)], functions={"f0": fn(["a", "i"], [], ["a"])},
                calls=[call("f0", [hess(1)], ["x0", "x1"])])
    p["inputs"].append({"name": "x1", "shape": [], "dtype": "int32", "spec": None, "seed": 3})
    with pytest.raises(ProgramError, match="int32"):
        check_program(p)


def test_hessian_reference_by_hand():
    # the Hessian of sum(sin(a) * b) w.r.t. a: diag(-sin(a) * b); of a * a: 2 on the diagonal
    loss = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("mul", ["s", "b"], ["v"]),
                           eqn("sum", ["v"], ["l"], axis=None)], ["l"])
    p = two_inputs([call("f0", [hess(0)], ["x0", "x1"]), call("f1", [hess(0)], ["x0", "x1"])],
                   functions={"f0": loss, "f1": BODY})
    (h,), (hv, hw) = evaluate(p)["results"]
    x0, x1 = make_input(1, (4, 2)), make_input(2, (2,))
    eye = np.eye(8).reshape(4, 2, 4, 2)
    np.testing.assert_allclose(h, (-np.sin(x0) * x1)[:, :, None, None] * eye, rtol=1e-6, atol=1e-7)
    # d2 (sin(a) * b)[i, j] / d a[k, l] d a[m, n] = -sin(a)[i, j] * b[j] at (i, j) == (k, l) == (m, n)
    diag3 = np.einsum("ij,kl,mn->ijklmn", np.ones((4, 2)), np.ones((4, 2)), np.ones((4, 2))) * 0
    for i in range(4):
        for j in range(2):
            diag3[i, j, i, j, i, j] = 1
    np.testing.assert_allclose(hv, (-np.sin(x0) * x1)[:, :, None, None, None, None] * diag3, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(hw, 2 * diag3, rtol=1e-6, atol=1e-7)


def test_hessian_renders_to_jax_hessian():
    src = render(two_inputs([call("f0", [hess(1)], ["x0", "x1"])]))
    assert "tuple_jac(jax.hessian, f0, argnums=1)" in src
    compile(src, "<program>", "exec")


def test_hessian_agrees_with_jax(worker):
    # inside a shard_map body whose psum mixes the devices, under vmap, and of a scalar loss
    loss = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("mul", ["s", "b"], ["v"]),
                           eqn("sum", ["v"], ["l"], axis=None)], ["l"])
    body = fn(["a", "b"], [eqn("call", ["a", "b"], ["h", "k"], transforms=[hess(1)], fn=PSUM)], ["h", "k"])
    p = two_inputs([
        call("f0", [hess(0)], ["x0", "x1"]),
        call("f1", [{"kind": "jit"}, hess(1)], ["x0", "x1"]),
        call("f2", [shard_map([[["x"], None], [None]], [[["x"], None, None, None], [["x"], None, None, None]])],
             ["x0", "x1"]),
        call("f1", [vmap([0, None], [0, 0]), hess(0)], ["x0", "x1"]),
    ], functions={"f0": loss, "f1": BODY, "f2": body})
    check_program(p)
    agree_with_jax(worker, p)


def test_the_generator_draws_hessians():
    drawn = drawn_programs(range(3), 100, max_depth=3)
    kinds = [t["kind"] for p in drawn for c in p["calls"] for t in c["transforms"]]

    def nested(f):
        for e in f["eqns"]:
            if e["op"] == "call":
                kinds.extend(t["kind"] for t in e["transforms"])
                nested(e["fn"])

    for p in drawn:
        for f in p["functions"].values():
            nested(f)
    assert "hessian" in kinds
