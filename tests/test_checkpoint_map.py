"""The ``checkpoint`` (jax.checkpoint with a policy) and ``map`` (jax.lax.map) transforms.

Typing rules (identity; a vmap over dim 0 without axis names), what they refuse, the
reference against JAX, the rendered source, the generator, the reducer (policy toward
null, transforms dropped), the report's features and the export's documentation links.
"""
import copy

import numpy as np
import pytest
from hypothesis import given, settings

from fuzz import typecheck as T
from fuzz.export import DOCS, Case, _label, feature_docs, title
from fuzz.features import features
from fuzz.program import validate_program
from fuzz.reduce import candidates, reduce_program
from fuzz.reference import evaluate, make_input
from fuzz.render import render
from fuzz.repro import render_repro
from fuzz.typecheck import ProgramError, check_program
from strategies.programs import chain_variants, programs
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap


def ckpt(policy=None):
    return {"kind": "checkpoint", "policy": policy}


def lax_map(in_axes):
    return {"kind": "map", "in_axes": in_axes}


# v = sin(a) * b: two arguments, one result; l: a weighted sum of v (a grad's loss)
BODY = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("mul", ["s", "b"], ["v"])], ["v"])
LOSS = fn(["a", "b"], BODY["eqns"] + [eqn("wsum", ["v"], ["l"], seed=5)], ["l"])


def two_inputs(calls, functions=None, mesh=(("x", 2),)):
    """Inputs x0 (4, 2) and x1 (2,); the functions the calls name (default: f0 = BODY, f1 = LOSS)."""
    functions = functions or {"f0": BODY, "f1": LOSS}
    used = {c["function"] for c in calls}
    return program(mesh=mesh, inputs=[("x0", (4, 2), 1), ("x1", (2,), 2)],
                   functions={n: f for n, f in functions.items() if n in used}, calls=calls)


# ------------------------------------------------------------------ typing rules
def test_checkpoint_is_the_identity_on_types():
    p = two_inputs([call("f0", [ckpt("dots_saveable")], ["x0", "x1"]), call("f0", [], ["x0", "x1"]),
                    call("f1", [GRAD, ckpt("nothing_saveable")], ["x0", "x1"]), call("f1", [GRAD], ["x0", "x1"])])
    validate_program(p)
    with_ckpt, plain, grad_ckpt, grad = check_program(p)
    assert with_ckpt == plain == [T.Ty((4, 2))]
    assert grad_ckpt == grad == [T.Ty((4, 2))]


def test_map_is_typed_as_a_vmap_over_dim_0():
    p = two_inputs([call("f0", [lax_map([0, None])], ["x0", "x1"]),
                    call("f0", [vmap([0, None], [0])], ["x0", "x1"]),
                    call("f0", [lax_map([None, 0])], ["x0", "x1"])])
    validate_program(p)
    mapped, vmapped, over_b = check_program(p)
    assert mapped == vmapped == [T.Ty((4, 2))]
    assert over_b == [T.Ty((2, 4, 2))]  # b's 2 elements, each giving sin(a) * b_k of shape (4, 2)
    assert T.as_vmap(lax_map([0, None]), 1) == vmap([0, None], [0])


@pytest.mark.parametrize("transforms,match", [
    ([lax_map([1, None])], "map's in_axes are 0"),
    ([lax_map([None, None])], "no batched argument"),
    ([ckpt("bogus")], "unknown checkpoint policy"),
])
def test_typing_rules_refuse(transforms, match):
    p = two_inputs([call("f0", transforms, ["x0", "x1"])])
    with pytest.raises(ProgramError, match=match):
        check_program(p)
    with pytest.raises(ProgramError):
        validate_program(p)  # the schema or the typing rules


def test_map_refuses_a_scalar_or_empty_leading_dim():
    p = program(inputs=[("x0", (), 1), ("x1", (0, 2), 2)], functions={"f0": fn(["a"], [], ["a"])},
                calls=[call("f0", [lax_map([0])], ["x0"])])
    with pytest.raises(ProgramError, match="out of range"):
        check_program(p)
    p["calls"] = [call("f0", [lax_map([0])], ["x1"])]
    with pytest.raises(ProgramError, match="empty dim"):
        check_program(p)


def test_no_collective_names_the_axis_of_a_map():
    # the loop's axis has no name: only the mesh axis of the enclosing shard_map is in scope
    inner = {}
    check_program(two_inputs([call("f0", [shard_map([[["x"], None], [None]], [[["x"], None]]), lax_map([0, None])],
                                   ["x0", "x1"])]),
                  on_eqn=lambda e, ctx, args: inner.setdefault("axes", ctx.collective_axes()))
    assert inner["axes"] == ["x"]


CALLBACK_LOSS = fn(["a"], [eqn("io_callback", ["a"], [], tag="cb1", ordered=False, returns=False,
                               stop_gradient=True),
                           eqn("sum", ["a"], ["l"], axis=None)], ["l"])


@pytest.mark.parametrize("transforms,ok", [
    ([GRAD, ckpt()], False),  # "Effects not supported in partial-eval of `checkpoint`/`remat`"
    ([GRAD, JIT, ckpt("everything_saveable")], False),
    ([{"kind": "vjp", "seed": 3}, ckpt()], False),
    ([ckpt(), GRAD], True),  # the checkpoint outside the derivative: measured to run
    ([GRAD], True),
])
def test_io_callback_is_refused_inside_a_checkpoint_under_a_derivative(transforms, ok):
    p = program(inputs=[("x0", (4,), 1)], functions={"f0": CALLBACK_LOSS}, calls=[call("f0", transforms, ["x0"])])
    if ok:
        check_program(p)
    else:
        with pytest.raises(ProgramError, match="checkpoint under grad"):
            check_program(p)


def test_the_rule_reaches_nested_calls():
    nested = fn(["a"], [eqn("call", ["a"], ["l"], transforms=[ckpt()], fn=CALLBACK_LOSS)], ["l"])
    p = program(inputs=[("x0", (4,), 1)], functions={"f0": nested}, calls=[call("f0", [GRAD], ["x0"])])
    with pytest.raises(ProgramError, match="checkpoint under grad"):
        check_program(p)
    p["calls"] = [call("f0", [], ["x0"])]
    check_program(p)


# ------------------------------------------------------------------ reference and source
def test_the_reference_maps_like_a_loop():
    p = two_inputs([call("f0", [lax_map([0, None])], ["x0", "x1"]), call("f0", [lax_map([None, 0])], ["x0", "x1"]),
                    call("f0", [ckpt("dots_saveable")], ["x0", "x1"])])
    (a,), (b,), (c,) = evaluate(p)["results"]
    x0, x1 = make_input(1, (4, 2)), make_input(2, (2,))
    np.testing.assert_allclose(a, np.stack([np.sin(x0[i]) * x1 for i in range(4)]), rtol=1e-6)
    np.testing.assert_allclose(b, np.stack([np.sin(x0) * x1[k] for k in range(2)]), rtol=1e-6)
    np.testing.assert_allclose(c, np.sin(x0) * x1, rtol=1e-6)


def test_rendering():
    p = two_inputs([call("f0", [ckpt("nothing_saveable")], ["x0", "x1"]), call("f0", [ckpt()], ["x0", "x1"]),
                    call("f0", [JIT, lax_map([0, None])], ["x0", "x1"])])
    src = render(p)
    assert "jax.checkpoint(f0, policy=jax.checkpoint_policies.nothing_saveable)" in src
    assert "jax.checkpoint(f0)" in src
    assert "jax.jit(lax_map(f0, in_axes=(0, None)))" in src
    assert src.count("def lax_map(") == 1
    compile(src, "<program>", "exec")
    bad = copy.deepcopy(p)
    bad["calls"][0]["transforms"][0]["policy"] = "x; import os"
    with pytest.raises(ProgramError):
        render(bad)
    # a repro defines the helper it uses
    repro = render_repro(p, None, {"oracle": "differential", "kind": "wrong-values", "message": "", "call": 2})
    assert "def lax_map(" in repro and "lax_map(f0, in_axes=(0, None))" in repro
    compile(repro, "<repro>", "exec")
    assert "lax_map" in T.RESERVED  # a program may not name a value like the helper


def test_reference_agrees_with_jax(worker):
    # map and checkpoint around and inside shard_map, under grad / vjp / jvp, every policy
    import oracles

    sm = shard_map([[["x"], None], [None]], [[["x"], None]])
    # a shard_map body: map(checkpoint(psum(sin(c) * d over x))) over its block, then a weighted sum
    sm_loss = fn(["a", "b"], [eqn("call", ["a", "b"], ["v"], transforms=[lax_map([0, None]), ckpt("dots_saveable")],
                                  fn=fn(["c", "d"], [eqn("sin", ["c"], ["s"]), eqn("mul", ["s", "d"], ["m"]),
                                                     eqn("psum", ["m"], ["r"], axes=["x"])], ["r"])),
                              eqn("wsum", ["v"], ["l"], seed=7)], ["l"])
    p = two_inputs([call("f0", [lax_map([0, None])], ["x0", "x1"]),
                    call("f0", [JIT, lax_map([None, 0])], ["x0", "x1"]),
                    call("f0", [lax_map([0, None]), shard_map([[["x"]], [None]], [[["x"]]])], ["x0", "x1"]),
                    call("f0", [JIT, sm, lax_map([0, None])], ["x0", "x1"]),
                    call("f1", [GRAD, ckpt()], ["x0", "x1"]),
                    call("f1", [JIT, GRAD, ckpt("everything_saveable")], ["x0", "x1"]),
                    call("f1", [{"kind": "value_and_grad", "argnums": [0, 1]}, JIT, ckpt("nothing_saveable")],
                         ["x0", "x1"]),
                    call("f0", [{"kind": "vjp", "seed": 4}, lax_map([0, None]), ckpt("dots_saveable")],
                         ["x0", "x1"]),
                    call("f0", [{"kind": "jvp", "seed": 9}, ckpt()], ["x0", "x1"]),
                    call("f2", [JIT, {"kind": "grad", "argnums": [0, 1]}, shard_map([[["x"], None], [None]], [[]])],
                         ["x0", "x1"])],
                   functions={"f0": BODY, "f1": LOSS, "f2": sm_loss})
    validate_program(p)
    out = worker.run(render(p, worker.caps), timeout=240)
    assert out["status"] == "ok", out
    assert all(c["ok"] for c in out["calls"]), [c.get("error") for c in out["calls"]]
    found = oracles.judge(p, out, evaluate(p))
    assert not found, [f.signature for f in found]


# ------------------------------------------------------------------ generator
def chains(p: dict) -> list:
    out = [c["transforms"] for c in p["calls"]]

    def walk(f):
        for e in f["eqns"]:
            if e["op"] == "call":
                out.append(e["transforms"])
                walk(e["fn"])

    for f in p["functions"].values():
        walk(f)
    return out


def drawn(max_examples: int, disabled=frozenset()) -> dict:
    """How many of the derandomized drawn programs use each new feature (each one checked)."""
    seen = {"checkpoint": 0, "lax_map": 0, "policy": 0, "programs": 0}

    @settings(max_examples=max_examples)
    @given(programs(disabled=disabled))
    def check(p):
        validate_program(p)
        compile(render(p), "<program>", "exec")
        names, _ = features(p)
        seen["programs"] += 1
        seen["checkpoint"] += "checkpoint" in names
        seen["lax_map"] += "lax_map" in names
        seen["policy"] += any(n.startswith("checkpoint_policy:") for n in names)
        for ch in chains(p):
            for t in ch:
                if t["kind"] == "map":
                    assert set(t) == {"kind", "in_axes"} and set(t["in_axes"]) <= {0, None}

    check()
    return seen


def test_the_generator_draws_both_but_they_do_not_dominate():
    # the other transforms left out: both are drawn, policies too
    seen = drawn(30, frozenset({"shard_map", "vmap", "grad", "value_and_grad", "vjp", "jvp"}))
    assert seen["checkpoint"] > 0 and seen["lax_map"] > 0 and seen["policy"] > 0, seen
    # every transform: a minority of programs (measured: 79 and 45 of 300 derandomized programs)
    seen = drawn(40)
    assert seen["checkpoint"] < seen["programs"] / 2 and seen["lax_map"] < seen["programs"] / 2, seen


def test_disabling_them_leaves_programs_without_them():
    @settings(max_examples=20)
    @given(programs(disabled=frozenset({"checkpoint", "map"})))
    def check(p):
        assert not {t["kind"] for ch in chains(p) for t in ch} & {"checkpoint", "map"}

    check()


def test_chain_variants_drop_a_checkpoint():
    p = two_inputs([call("f0", [JIT, ckpt("dots_saveable"), lax_map([0, None])], ["x0", "x1"])])
    variants = chain_variants(p, p["calls"][0])
    assert [lax_map([0, None])] not in variants  # jit and checkpoint are toggled one at a time
    assert [JIT, lax_map([0, None])] in variants and [ckpt("dots_saveable"), lax_map([0, None])] in variants


# ------------------------------------------------------------------ reducer, features, export
def test_the_reducer_simplifies_the_policy_and_drops_the_transforms():
    p = two_inputs([call("f0", [JIT, ckpt("dots_saveable"), lax_map([0, 0])], ["x0", "x0"])],
                   functions={"f0": BODY})
    steps = [c for _, c, _ in candidates(p, 0)]
    assert any(c["calls"][0]["transforms"][1] == ckpt() for c in steps if len(c["calls"][0]["transforms"]) == 3)

    def has(kind):
        return lambda q, k: any(t["kind"] == kind for ch in chains(q) for t in ch)

    kept_map = reduce_program(p, has("map"), 0, max_seconds=60)
    assert kept_map.reduced and [t["kind"] for t in kept_map.program["calls"][0]["transforms"]] == ["map"]
    kept_ckpt = reduce_program(p, has("checkpoint"), 0, max_seconds=60)
    assert kept_ckpt.reduced and kept_ckpt.program["calls"][0]["transforms"] == [ckpt()]


def test_features_and_documentation():
    p = two_inputs([call("f0", [ckpt("dots_saveable"), lax_map([0, None])], ["x0", "x1"])])
    names, depth = features(p)
    assert {"checkpoint", "checkpoint_policy:dots_saveable", "lax_map"} <= names and "map" not in names
    assert depth == 2
    docs = dict(feature_docs(p))
    assert docs["checkpoint"][1] == "https://docs.jax.dev/en/latest/_autosummary/jax.checkpoint.html"
    assert docs["lax_map"][1] == "https://docs.jax.dev/en/latest/_autosummary/jax.lax.map.html"
    assert set(docs) <= set(DOCS)
    assert _label(p, 0) == "checkpoint(lax.map(f0), policy=dots_saveable)"
    nested = two_inputs([call("f0", [JIT], ["x0", "x1"])], functions={"f0": fn(["a", "b"], [
        eqn("call", ["a", "b"], ["v"], transforms=[ckpt("nothing_saveable")], fn=BODY)], ["v"])})
    case = Case(name="t", oracle="internal-error", kind="builtins.ValueError", message="boom", signature="s", call=0,
                program=nested, history=[], jax_version="0.10.2")
    assert title(case) == ("jax.jit of jax.checkpoint(policy=nothing_saveable) of jnp.multiply raises "
                           "ValueError: boom")  # (the call's chain, then what is inside)
