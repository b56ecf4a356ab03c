"""Jacobians (jax.jacrev / jax.jacfwd) and control flow transforms.

Typing rules (shapes, varying axes, what they refuse), the reference against JAX on
hand-written programs (inside shard_map, under vmap and grad), the rendered source, and
a derandomized generation test that sees each new feature.
"""
import copy

import numpy as np
import pytest
from hypothesis import given, settings

from fuzz import typecheck as T
from fuzz.features import features
from fuzz.program import validate_program
from fuzz.reference import evaluate, make_input
from fuzz.render import render
from fuzz.repro import render_repro
from fuzz.typecheck import ProgramError, check_program
from strategies.programs import programs
from support.judging import agree_with_jax
from support.programs import GRAD, JIT, call, eqn, fn, program, ring, shard_map, vmap

COND = {"kind": "cond"}
LIN = {"kind": "linearize", "seed": 7}


def jac(kind, k=0):
    return {"kind": kind, "argnums": [k]}


# v = sin(a) * b, w = a * a: two arguments, two results
BODY = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("mul", ["s", "b"], ["v"]), eqn("mul", ["a", "a"], ["w"])],
          ["v", "w"])
# shard_map bodies over x: a collective mixes the devices (psum: unvarying; ppermute: a permutation)
PSUM = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("mul", ["s", "b"], ["m"]), eqn("psum", ["m"], ["r"], axes=["x"]),
                       eqn("mul", ["a", "b"], ["w"])], ["r", "w"])
PERMUTE = fn(["a", "b"], [eqn("mul", ["a", "a"], ["m"]), eqn("ppermute", ["m"], ["r"], axes=["x"], perm=ring(2)),
                          eqn("mul", ["r", "b"], ["w"])], ["w"])
# b unvarying (P()), an output varying through axis_index: (b + index) * b + a
INDEXED = fn(["a", "b"], [eqn("axis_index", ["b"], ["i"], axes=["x"]), eqn("mul", ["b", "i"], ["w"]),
                          eqn("add", ["w", "a"], ["r"])], ["r"])


def two_inputs(calls, functions=None, mesh=(("x", 2),)):
    """Inputs x0 (4, 2) and x1 (2,); the functions the calls name (default: f0 = BODY)."""
    functions = functions or {"f0": BODY}
    used = {c["function"] for c in calls}
    return program(mesh=mesh, inputs=[("x0", (4, 2), 1), ("x1", (2,), 2)],
                   functions={n: f for n, f in functions.items() if n in used}, calls=calls)


# ------------------------------------------------------------------ jacrev / jacfwd
def test_jacobians_are_typed_per_output():
    p = two_inputs([call("f0", [jac("jacrev", 0)], ["x0", "x1"]), call("f0", [jac("jacfwd", 1)], ["x0", "x1"])])
    validate_program(p)
    rev, fwd = check_program(p)
    assert rev == [T.Ty((4, 2, 4, 2)), T.Ty((4, 2, 4, 2))]
    assert fwd == [T.Ty((4, 2, 2)), T.Ty((4, 2, 2))]


def test_jacobians_vary_as_measured_inside_shard_map():
    # x1 unvarying (P()) inside the body, the output varying (axis_index): jacrev's result is
    # unvarying (summed over x), jacfwd's varies (jax.typeof on jax 0.10.2)
    types = {}
    for kind in T.JACOBIANS:
        body = fn(["a", "b"], [eqn("call", ["a", "b"], ["j"], transforms=[jac(kind, 1)], fn=INDEXED)], ["j"])
        p = two_inputs([call("f0", [shard_map([[["x"], None], [None]], [[["x"], None, None]])], ["x0", "x1"])],
                       functions={"f0": body})
        check_program(p, on_eqn=lambda e, ctx, args, kind=kind: e["op"] == "call" or types.__setitem__(kind, ctx))
        inner = T.call_types([jac(kind, 1)], INDEXED, types[kind], [T.Ty((2, 2), frozenset({"x"})), T.Ty((2,))], {})
        types[kind] = inner[0].vma
    assert types == {"jacrev": frozenset(), "jacfwd": frozenset({"x"})}


@pytest.mark.parametrize("t,match", [
    ({"kind": "jacrev", "argnums": [0, 1]}, "one argnums"),
    ({"kind": "jacfwd", "argnums": [2]}, "out of range"),
])
def test_jacobian_rules_refuse(t, match):
    p = two_inputs([call("f0", [t], ["x0", "x1"])])
    with pytest.raises(ProgramError, match=match):
        check_program(p)
    with pytest.raises(ProgramError):
        validate_program(p)


def test_jacobians_refuse_ties_and_int_arguments():
    maxed = fn(["a"], [eqn("max", ["a"], ["m"], axis=None)], ["m"])
    p = program(inputs=[("x0", (4,), 1)], functions={"f0": maxed}, calls=[call("f0", [jac("jacrev")], ["x0"])])
    with pytest.raises(ProgramError, match="not under grad"):
        check_program(p)
    p = program(inputs=[("x0", (4,), 1)], functions={"f0": fn(["a", "i"], [], ["a"])},
                calls=[call("f0", [jac("jacfwd", 1)], ["x0", "x1"])])
    p["inputs"].append({"name": "x1", "shape": [], "dtype": "int32", "spec": None, "seed": 3})
    with pytest.raises(ProgramError, match="int32"):
        check_program(p)


def test_jacobian_reference_by_hand():
    p = two_inputs([call("f0", [jac("jacrev", 1)], ["x0", "x1"]), call("f0", [jac("jacfwd", 0)], ["x0", "x1"])])
    (rv, rw), (fv, fw) = evaluate(p)["results"]
    x0, x1 = make_input(1, (4, 2)), make_input(2, (2,))
    # d(sin(a) * b)[i, j] / d b[k] = sin(a)[i, j] * (j == k); d(a * a) / d b = 0
    np.testing.assert_allclose(rv, np.sin(x0)[:, :, None] * np.eye(2)[None], rtol=1e-6, atol=1e-7)
    assert rw.shape == (4, 2, 2) and not rw.any()
    # d(sin(a) * b)[i, j] / d a[k, l] = cos(a)[i, j] * b[j] * (i, j == k, l)
    eye = np.eye(8).reshape(4, 2, 4, 2)
    np.testing.assert_allclose(fv, (np.cos(x0) * x1)[:, :, None, None] * eye, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(fw, (2 * x0)[:, :, None, None] * eye, rtol=1e-6, atol=1e-7)


def test_jacobian_rendering():
    p = two_inputs([call("f0", [JIT, jac("jacrev", 1)], ["x0", "x1"]), call("f0", [jac("jacfwd", 0)], ["x0", "x1"])])
    src = render(p)
    assert "jax.jit(tuple_jac(jax.jacrev, f0, argnums=1))" in src and "tuple_jac(jax.jacfwd, f0, argnums=0)" in src
    assert src.count("def tuple_jac(") == 1
    compile(src, "<program>", "exec")
    repro = render_repro(p, None, {"oracle": "differential", "kind": "wrong-values", "message": "", "call": 1})
    assert "def tuple_jac(" in repro
    compile(repro, "<repro>", "exec")
    bad = copy.deepcopy(p)
    bad["calls"][0]["transforms"][1]["argnums"] = ["0); import os; ("]
    with pytest.raises(ProgramError):
        render(bad)


def test_jacobians_agree_with_jax(worker):
    # under vmap, inside shard_map bodies (check_vma on: psum, ppermute, axis_index
    # with an unvarying argument; off: no collective may cross the derivative), under grad
    rank4 = [["x"], None, None, None]

    def inside(kind, k, body, out_specs, check=True):
        outs = [f"j{n}" for n in range(len(body["results"]))]
        nested = fn(["a", "b"], [eqn("call", ["a", "b"], outs, transforms=[jac(kind, k)], fn=body)], outs)
        return nested, [JIT, shard_map([[["x"], None], [None]], out_specs, check)]

    funcs = {"f0": BODY, "fl": fn(["a", "b"], [
        eqn("call", ["a", "b"], ["j", "k"], transforms=[jac("jacrev", 1)], fn=BODY),
        eqn("wsum", ["j"], ["l"], seed=3)], ["l"])}
    calls = [call("f0", [vmap([0, None], [0, 1]), jac("jacrev", 1)], ["x0", "x1"]),
             call("fl", [{"kind": "grad", "argnums": [0, 1]}], ["x0", "x1"])]
    for n, (kind, body, k, outs, check) in enumerate((
            ("jacfwd", PSUM, 0, [rank4, rank4], True), ("jacrev", PSUM, 0, [rank4, rank4], True),
            ("jacrev", PERMUTE, 0, [rank4], True),
            ("jacrev", INDEXED, 1, [rank4[:3]], True), ("jacfwd", INDEXED, 1, [rank4[:3]], True),
            ("jacrev", BODY, 1, [rank4[:3]] * 2, False))):
        funcs[f"h{n}"], chain = inside(kind, k, body, outs, check)
        calls.append(call(f"h{n}", chain, ["x0", "x1"]))
    agree_with_jax(worker, two_inputs(calls, funcs))


def test_the_reducer_keeps_new_transforms_valid():
    from fuzz.reduce import reduce_program

    p = two_inputs([call("f0", [JIT, jac("jacrev", 1), vmap([0, None], [0, 0])], ["x0", "x1"])])

    def has(kind):
        return lambda q, k: any(t["kind"] == kind for t in q["calls"][0]["transforms"])

    kept = reduce_program(p, has("jacrev"), 0, max_seconds=60)
    assert kept.reduced and [t["kind"] for t in kept.program["calls"][0]["transforms"]] == ["jacrev"]
    check_program(kept.program)

    # a loop's trip count goes toward 0 and outputs are dropped through cond and loops
    p = two_inputs([call("f0", [JIT, COND, loop("fori_loop", 3)], ["x0", "x1"])])
    kept = reduce_program(p, lambda q, k: any(t["kind"] == "fori_loop" for t in q["calls"][0]["transforms"]), 0,
                          max_seconds=60)
    assert kept.reduced and kept.program["calls"][0]["transforms"] == [loop("fori_loop", 0)]
    assert len(kept.program["functions"]["f0"]["results"]) == 1


# ------------------------------------------------------------------ cond


def test_cond_keeps_types_and_varies_with_its_predicate():
    sm_off = shard_map([[["x"], None], [None]], [[["x"], None]], check_vma=False)
    p = two_inputs([call("f0", [COND], ["x0", "x1"]), call("f0", [vmap([0, None], [0, 0]), COND], ["x0", "x1"])])
    validate_program(p)
    assert check_program(p) == [[T.Ty((4, 2)), T.Ty((4, 2))], [T.Ty((4, 2)), T.Ty((4, 2))]]
    seen = {}
    body = fn(["a", "b"], [eqn("call", ["b", "a"], ["v", "w"], transforms=[COND], fn=BODY)], ["v"])
    p = two_inputs([call("f0", [sm_off], ["x0", "x1"])], functions={"f0": body})
    check_program(p, on_eqn=lambda e, ctx, args: seen.setdefault("ctx", ctx))
    # the predicate comes from b (unvarying): a cond of (b, a) keeps w = b * b unvarying
    (v, w) = T.call_types([COND], BODY, seen["ctx"], [T.Ty((2,)), T.Ty((2, 2), frozenset({"x"}))], {})
    assert w.vma == frozenset() and v.vma == frozenset({"x"})
    (v, w) = T.call_types([COND], BODY, seen["ctx"], [T.Ty((2, 2), frozenset({"x"})), T.Ty((2,))], {})
    assert w.vma == frozenset({"x"})  # a predicate varying over the unchecked axis x


def test_cond_refusals():
    # a predicate varying over a checked manual axis (jax-ml/jax#40823)
    p = two_inputs([call("f0", [shard_map([[["x"], None], [None]], [[["x"], None], [["x"], None]]), COND],
                         ["x0", "x1"])])
    with pytest.raises(ProgramError, match="40823"):
        check_program(p)
    p["calls"][0]["args"] = ["x0", "x1"]
    p["calls"][0]["transforms"][0]["check_vma"] = False
    check_program(p)
    # an io_callback inside a cond under vmap ("IO effect not supported in vmap-of-cond")
    cb = fn(["a"], [eqn("io_callback", ["a"], [], tag="cb1", ordered=False, returns=False, stop_gradient=False)],
            ["a"])
    p = program(inputs=[("x0", (4,), 1)], functions={"f0": cb}, calls=[call("f0", [vmap([0], [0]), COND], ["x0"])])
    with pytest.raises(ProgramError, match="vmap-of-cond"):
        check_program(p)
    p["calls"] = [call("f0", [COND, vmap([0], [0])], ["x0"])]
    check_program(p)
    # jacfwd / jacrev batch what is under them as vmap does (a campaign found jacfwd(cond(f)) raising it)
    p["functions"]["f0"]["eqns"][0]["stop_gradient"] = True  # (a derivative: the callback's argument under stop_gradient)
    for kind in ("jacfwd", "jacrev"):
        p["calls"] = [call("f0", [{"kind": kind, "argnums": [0]}, COND], ["x0"])]
        with pytest.raises(ProgramError, match="vmap-of-cond"):
            check_program(p)
    p["calls"] = [call("f0", [{"kind": "jvp", "seed": 1}, COND], ["x0"])]
    check_program(p)


def test_cond_reference_by_hand():
    p = program(inputs=[("x0", (4, 2), 1), ("x1", (2,), 2)], functions={"f0": BODY},
                calls=[call("f0", [COND], ["x0", "x1"]), call("f0", [vmap([0, None], [0, 0]), COND], ["x0", "x1"])])
    (v, w), (bv, bw) = evaluate(p)["results"]
    x0, x1 = make_input(1, (4, 2)), make_input(2, (2,))
    sign = 1 if np.sign(x0).sum() >= 0 else -1
    np.testing.assert_allclose(v, sign * np.sin(x0) * x1, rtol=1e-6)
    rows = np.where(np.sign(x0).sum(axis=1) >= 0, 1, -1)[:, None]  # per example under vmap
    assert 1 in rows and -1 in rows  # (both branches taken)
    np.testing.assert_allclose(bw, rows * x0 * x0, rtol=1e-6)


def test_cond_rendering():
    p = two_inputs([call("f0", [JIT, COND], ["x0", "x1"])])
    src = render(p)
    assert "jax.jit(tuple_cond(f0))" in src and src.count("def tuple_cond(") == 1
    compile(src, "<program>", "exec")
    repro = render_repro(p, None, {"oracle": "differential", "kind": "wrong-values", "message": "", "call": 0})
    assert "def tuple_cond(" in repro
    compile(repro, "<repro>", "exec")


def test_cond_agrees_with_jax(worker):
    # batched predicate under vmap (a select) with a collective over the vmap axis; a
    # shard_map body with check_vma off whose devices take different branches around a
    # psum and a ppermute; check_vma on with an unvarying predicate; grad, jvp and jacfwd
    sm_off = shard_map([[["x"], None], [None]], [[["x"], None], [["x"], None]], check_vma=False)
    vpsum = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("psum", ["s"], ["r"], axes=["i"]),
                            eqn("mul", ["r", "b"], ["v"])], ["v"])
    loss = fn(["a", "b"], [eqn("call", ["a", "b"], ["v", "w"], transforms=[COND], fn=BODY),
                           eqn("wsum", ["v"], ["l"], seed=3)], ["l"])
    on_body = fn(["a", "b"], [eqn("call", ["b", "a"], ["r", "w"], transforms=[COND], fn=PSUM)], ["w"])
    funcs = {"f0": BODY, "f1": vpsum, "f2": PSUM, "f3": PERMUTE, "f4": loss, "f5": on_body}
    calls = [call("f0", [COND], ["x0", "x1"]),
             call("f1", [JIT, vmap([0, None], [0], axis_name="i"), COND], ["x0", "x1"]),
             call("f2", [JIT, sm_off, COND], ["x0", "x1"]),
             call("f3", [shard_map([[["x"], None], [None]], [[["x"], None]], check_vma=False), COND], ["x0", "x1"]),
             call("f5", [JIT, shard_map([[["x"], None], [None]], [[["x"], None]])], ["x0", "x1"]),
             call("f4", [{"kind": "grad", "argnums": [0, 1]}], ["x0", "x1"]),
             call("f0", [{"kind": "jvp", "seed": 5}, COND], ["x0", "x1"]),
             call("f0", [jac("jacfwd", 1), COND], ["x0", "x1"])]
    p = two_inputs(calls, funcs)
    ref = evaluate(p)["results"]
    assert (ref[2][0] > 0).any() and (ref[2][0] < 0).any()  # the devices took different branches
    agree_with_jax(worker, p)


# ------------------------------------------------------------------ fori_loop / while_loop
def loop(kind, n):
    return {"kind": kind, "n": n}


def test_loops_keep_types_and_while_refuses_reverse_mode():
    p = two_inputs([call("f0", [loop("fori_loop", 2)], ["x0", "x1"]), call("f0", [loop("while_loop", 0)], ["x0", "x1"])])
    validate_program(p)
    assert check_program(p) == [[T.Ty((4, 2)), T.Ty((4, 2))]] * 2
    loss = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("sum", ["s"], ["l"], axis=None)], ["l"])
    for chain, ok in (([GRAD, loop("fori_loop", 3)], True), ([GRAD, loop("while_loop", 1)], False),
                      ([GRAD, JIT, {"kind": "checkpoint", "policy": None}, loop("while_loop", 1)], False),
                      ([loop("while_loop", 1), GRAD], True)):
        p = two_inputs([call("f0", chain, ["x0", "x1"])], functions={"f0": loss})
        if ok:
            check_program(p)
        else:
            with pytest.raises(ProgramError, match="reverse mode"):
                check_program(p)
    for chain in ([{"kind": "vjp", "seed": 1}, loop("while_loop", 1)], [jac("jacrev"), loop("while_loop", 1)]):
        with pytest.raises(ProgramError, match="reverse mode"):
            check_program(two_inputs([call("f0", chain, ["x0", "x1"])]))
    for chain in ([{"kind": "jvp", "seed": 1}, loop("while_loop", 1)], [jac("jacfwd"), loop("while_loop", 2)]):
        check_program(two_inputs([call("f0", chain, ["x0", "x1"])]))
    p = two_inputs([call("f0", [loop("fori_loop", 4)], ["x0", "x1"])])
    with pytest.raises(ProgramError, match="0..3"):
        check_program(p)
    with pytest.raises(ProgramError):
        validate_program(p)


def test_loop_reference_and_rendering():
    p = two_inputs([call("f0", [loop("fori_loop", 3)], ["x0", "x1"]), call("f0", [JIT, loop("while_loop", 0)], ["x0", "x1"])])
    (v, w), (v0, w0) = evaluate(p)["results"]
    x0, x1 = make_input(1, (4, 2)), make_input(2, (2,))
    np.testing.assert_allclose(v, 4 * np.sin(x0) * x1, rtol=1e-6)
    np.testing.assert_allclose(w0, x0 * x0, rtol=1e-6)
    src = render(p)
    assert "tuple_fori(f0, 3)" in src and "jax.jit(tuple_while(f0, 0))" in src
    compile(src, "<program>", "exec")
    bad = copy.deepcopy(p)
    bad["calls"][0]["transforms"][0]["n"] = "3)); import os; ((3"
    with pytest.raises(ProgramError):
        render(bad)


def test_loops_and_linearize_agree_with_jax(worker):
    # inside shard_map bodies (check_vma on and off, collectives in the body), under vmap with a
    # collective over its axis, under grad / jacrev (fori_loop) and jvp / jacfwd (while_loop)
    sm = shard_map([[["x"], None], [None]], [[["x"], None], [["x"], None]])
    sm_off = shard_map([[["x"], None], [None]], [[["x"], None]], check_vma=False)
    vpsum = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("psum", ["s"], ["r"], axes=["i"]),
                            eqn("mul", ["r", "b"], ["v"])], ["v"])
    loss = fn(["a", "b"], [eqn("call", ["a", "b"], ["v", "w"], transforms=[loop("fori_loop", 2)], fn=BODY),
                           eqn("wsum", ["v"], ["l"], seed=3)], ["l"])
    funcs = {"f0": BODY, "f1": vpsum, "f2": PSUM, "f3": PERMUTE, "f4": loss}
    calls = [call("f2", [JIT, sm, loop("fori_loop", 2)], ["x0", "x1"]),
             call("f3", [sm_off, loop("while_loop", 3)], ["x0", "x1"]),
             call("f1", [vmap([0, None], [0], axis_name="i"), loop("while_loop", 1)], ["x0", "x1"]),
             call("f4", [{"kind": "grad", "argnums": [0, 1]}], ["x0", "x1"]),
             call("f0", [jac("jacrev", 1), loop("fori_loop", 1)], ["x0", "x1"]),
             call("f0", [{"kind": "jvp", "seed": 5}, loop("while_loop", 2)], ["x0", "x1"]),
             call("f0", [jac("jacfwd", 1), loop("while_loop", 1)], ["x0", "x1"]),
             # linearize (under jit, of a while_loop under vmap, of a shard_map of a cond)
             call("f0", [JIT, LIN], ["x0", "x1"]),
             call("f0", [vmap([0, None], [0, 0, 0, 0]), LIN, loop("while_loop", 1)], ["x0", "x1"]),
             call("f2", [LIN, JIT, shard_map([[["x"], None], [None]], [[["x"], None]] * 2, check_vma=False), COND],
                  ["x0", "x1"])]
    agree_with_jax(worker, two_inputs(calls, funcs))


# ------------------------------------------------------------------ linearize


def test_linearize_is_jvp_through_jax_linearize():
    p = two_inputs([call("f0", [LIN], ["x0", "x1"]), call("f0", [{"kind": "jvp", "seed": 7}], ["x0", "x1"])])
    validate_program(p)
    lin, jvp = check_program(p)
    assert lin == jvp == [T.Ty((4, 2))] * 4
    a, b = evaluate(p)["results"]
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    src = render(p)
    assert "tuple_linearize(f0, 7)" in src and src.count("def weights(") == 1
    compile(src, "<program>", "exec")
    sm = two_inputs([call("f0", [shard_map([[["x"], None], [None]], [[["x"], None]] * 4), LIN], ["x0", "x1"])])
    with pytest.raises(ProgramError, match="inside a shard_map body"):
        check_program(sm)


# ------------------------------------------------------------------ generator
NEW = ("jacrev", "jacfwd", "cond", "fori_loop", "while_loop", "linearize")
OTHERS = frozenset({"shard_map", "vmap", "grad", "value_and_grad", "vjp", "jvp", "checkpoint", "map"})


def test_the_generator_draws_each_new_transform():
    seen = {k: 0 for k in NEW}
    seen["programs"] = 0

    @settings(max_examples=240)  # (the rare kinds share one entry of the transform draw: ~2.5% of programs each)
    @given(programs(disabled=OTHERS))
    def check(p):
        validate_program(p)
        compile(render(p), "<program>", "exec")
        names, _ = features(p)
        seen["programs"] += 1
        for k in NEW:
            seen[k] += k in names

    check()
    assert all(seen[k] > 0 for k in NEW), seen


def test_nested_jacobians_stay_within_the_spec_rank():
    """Jacobians of Jacobians add their arguments' dims each time: the generator keeps every result
    within the schema's 8 dims of a spec (strategies.programs.JAC_MAX_RANK; a derandomized run drew
    jacrev(jit(jacrev(jacrev(f)))) with results of rank 9 before), and a reshape of a value of more
    dims than its own schema allows draws fewer dims (it drew 7)."""
    import fuzz.ops as O

    keep = {"broadcast", "sin", "reshape"}
    disabled = frozenset(n for n in O.REGISTRY if n not in keep) | {"shard_map", "vmap", "grad", "value_and_grad",
                                                                    "vjp", "jvp", "linearize", "checkpoint", "map",
                                                                    "cond", "fori_loop", "while_loop", "scan",
                                                                    "donate_argnums", "jit_inline", "set_mesh"}
    ranks = []

    @settings(max_examples=120, database=None, deadline=None)
    @given(programs(disabled=disabled))
    def check(p):
        validate_program(p)
        ranks.extend(len(s) for c in p["functions"].values() for e in c["eqns"] if e["op"] == "call"
                     for t in e["transforms"] for s in t.get("out_specs") or [] if s is not None)

    check()
    assert ranks and max(ranks) >= 5, ranks  # (Jacobians of rank >= 1 arguments were drawn)
