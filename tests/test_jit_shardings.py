"""jax.jit's in_shardings / out_shardings (a jit transform's in_specs / out_specs): typing rules,
rendering, generation, reduction, and agreement with JAX."""
import json

import pytest
from hypothesis import HealthCheck, given, settings

from fuzz.features import features
from fuzz.reduce import reduce_program
from fuzz.render import render
from fuzz.typecheck import ProgramError, check_program
from strategies.programs import programs
from support.judging import agree_with_jax
from support.programs import JIT, call, eqn, fn, program, shard_map

MESH = (("a", 2), ("b", 4))


def jit(in_specs=None, out_specs=None):
    return {"kind": "jit", "in_specs": in_specs, "out_specs": out_specs}


def sharded(transforms, spec=None, body=None):
    """sin of an (8, 4) input, then sum over dim 1 and a cos (two results), under ``transforms``."""
    body = body or fn(["a"], [eqn("sin", ["a"], ["s"]), eqn("sum", ["s"], ["r"], axis=1), eqn("cos", ["r"], ["c"])],
                      ["s", "c"])
    p = program(mesh=MESH, inputs=[("x0", (8, 4), 3)], functions={"f0": body}, calls=[call("f0", transforms, ["x0"])])
    p["inputs"][0]["spec"] = spec
    return p


def test_in_and_out_shardings_render_and_type_check():
    p = sharded([jit([[["a"], ["b"]]], [[None, ["b"]], [["a", "b"]]])])
    check_program(p)
    src = render(p, {"shard_map": "jax", "check_kw": "check_vma", "partial_manual": "axis_names", "explicit": True})
    assert "in_shardings=(NamedSharding(mesh, P('a', 'b')),)" in src
    assert "out_shardings=(NamedSharding(mesh, P(None, 'b')), NamedSharding(mesh, P(('a', 'b'))))" in src
    assert {"in_shardings", "out_shardings"} <= features(p)[0]


@pytest.mark.parametrize("specs, why", [
    (([[["a"]]], None), "rank"),                                     # a spec of the wrong rank
    (([[["a"], ["a"]]], None), "twice"),                              # an axis twice
    ((None, [[None, ["b"]], [["b"]]]), "uneven split"),               # on a 2x3 mesh, below
])
def test_bad_jit_specs_are_refused(specs, why):
    p = sharded([jit(*specs)])
    if why == "uneven split":  # the second result has shape (8,): 'b' of size 3 does not divide it
        p["mesh"]["axis_sizes"] = [2, 3]
        p["functions"]["f0"] = fn(["a"], [eqn("sin", ["a"], ["s"]), eqn("sum", ["s"], ["r"], axis=1)], ["s", "r"])
    with pytest.raises(ProgramError, match=why):
        check_program(p)


def test_a_committed_input_needs_its_own_spec_at_the_call():
    ok = sharded([jit([[["a"], None]])], spec=[["a"], None])
    check_program(ok)
    with pytest.raises(ProgramError, match="differ from the sharding of an input"):
        check_program(sharded([jit([[None, ["b"]]])], spec=[["a"], None]))
    check_program(sharded([jit([[None, ["b"]]])], spec=None))  # an uncommitted input: any spec


def test_in_shardings_need_traced_arguments_below_the_call():
    inner = fn(["b"], [eqn("sin", ["b"], ["s"])], ["s"])
    nested = fn(["a"], [eqn("call", ["a"], ["y"], transforms=[jit([[None, ["b"]]])], fn=inner)], ["y"])
    with pytest.raises(ProgramError, match="eager function body"):
        check_program(sharded([], body=nested))  # the body runs eagerly: its values are committed arrays
    check_program(sharded([JIT], body=nested))  # traced: in_shardings only constrain
    with pytest.raises(ProgramError, match="eager function body"):
        check_program(sharded([{"kind": "grad", "argnums": [0]}, jit([[None, ["b"]]])],
                              body=fn(["a"], [eqn("sum", ["a"], ["r"], axis=None)], ["r"])))


def test_no_jit_shardings_inside_a_shard_map_body_or_on_an_explicit_mesh():
    body = fn(["a"], [eqn("call", ["a"], ["y"], transforms=[jit(None, [[None, None]])],
                          fn=fn(["b"], [eqn("sin", ["b"], ["s"])], ["s"]))], ["y"])
    with pytest.raises(ProgramError, match="inside a shard_map body"):
        check_program(sharded([JIT, shard_map([[["a"], None]], [[["a"], None]])], body=body))
    p = sharded([jit(None, [[["a"], None], [None]])])
    p["mesh"]["axis_type"] = "explicit"
    with pytest.raises(ProgramError, match="Explicit mesh"):
        check_program(p)


def test_the_reducer_drops_shardings_that_do_not_matter():
    p = sharded([jit([[["a"], ["b"]]], [[None, ["b"]], [["a", "b"]]])])
    r = reduce_program(p, lambda cand, c: '"cos"' in json.dumps(cand), call=0, max_runs=300)
    t = r.program["calls"][0]["transforms"]
    assert all(x.get("in_specs") is None and x.get("out_specs") is None for x in t), t


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(programs())
def test_generated_jit_shardings_type_check(p):
    check_program(p)
    for c in p["calls"]:
        for t in c["transforms"][1:]:  # below a program's call, in_shardings only on traced arguments
            assert t["kind"] != "jit" or t.get("in_specs") is None or c["transforms"][0]["kind"] == "jit" or any(
                x["kind"] == "jit" for x in c["transforms"][:c["transforms"].index(t)])


@pytest.mark.parametrize("transforms, spec", [
    ([jit([[["a"], ["b"]]], [[None, ["b"]], [["a", "b"]]])], None),
    ([jit([[["a"], None]], [[["b"], None], [None]])], [["a"], None]),
    ([JIT, {"kind": "vmap", "in_axes": [0], "out_axes": [0, 0], "axis_name": None, "spmd_axis_name": "a"},
      jit([[["b"]]], [[["b"]], []])], None),
])
def test_jit_shardings_agree_with_jax(worker, transforms, spec):
    p = sharded(transforms, spec=spec)
    if len(transforms) > 1:  # under vmap, per example (4,): the sum is over its only dim
        p["functions"]["f0"]["eqns"][1:] = [eqn("sum", ["s"], ["r"], axis=0), eqn("cos", ["r"], ["c"])]
    check_program(p)
    agree_with_jax(worker, p)


def inlined_program():
    """A traced jit with inline=True (with and without shardings) under grad, vmap and shard_map."""
    def inner(k):
        return fn([f"i{k}"], [eqn("sin", [f"i{k}"], [f"s{k}"]), eqn("mul", [f"s{k}", f"i{k}"], [f"t{k}"])], [f"t{k}"])

    body = fn(["a"], [eqn("call", ["a"], ["m"], transforms=[{**jit(out_specs=[[["a"]]]), "inline": True}],
                          fn=inner(1)),
                      eqn("call", ["m"], ["n"], transforms=[{"kind": "jit", "inline": True}], fn=inner(2)),
                      eqn("wsum", ["n"], ["l"], seed=2)], ["l"])
    sm_body = fn(["a"], [eqn("call", ["a"], ["m"], transforms=[{"kind": "jit", "inline": True}], fn=inner(3)),
                         eqn("psum", ["m"], ["p"], axes=["a"])], ["p"])
    calls = [call("f0", [JIT], ["x0"]), call("f0", [JIT, {"kind": "grad", "argnums": [0]}], ["x0"]),
             call("f1", [JIT, shard_map([[["a"]]], [[["a"]]])], ["x0"])]
    p = program(mesh=MESH, inputs=[("x0", (8,), 3)], functions={"f0": body, "f1": sm_body}, calls=calls)
    return p


def test_an_inlined_jit_renders_and_agrees_with_the_reference(worker):
    p = inlined_program()
    check_program(p)
    src = render(p, worker.caps)
    assert src.count("inline=True") == 3 and "out_shardings=(NamedSharding(mesh, P('a')),), inline=True)" in src
    assert "jit_inline" in features(p)[0]
    agree_with_jax(worker, p)


def test_the_generator_inlines_traced_jits_only():
    from support.draws import drawn_programs

    progs = [p for p in drawn_programs(range(2), 200, cached=True) if "jit_inline" in features(p)[0]]
    assert len(progs) >= 5, len(progs)
    for p in progs:
        assert not any(c["transforms"] and c["transforms"][0].get("inline") for c in p["calls"])


def test_the_reducer_drops_an_inline_the_finding_does_not_need():
    p = inlined_program()
    def interesting(q, call):  # (a finding that needs an inlined jit would keep one)
        return any(e["op"] == "call" for fn_ in q["functions"].values() for e in fn_["eqns"])

    out = reduce_program(p, interesting)
    assert "call" in json.dumps(out.program) and '"inline": true' not in json.dumps(out.program)
