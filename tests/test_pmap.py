"""jax.pmap (a vmap transform with ``pmap: true``): typing rules, rendering, generation,
reduction, and agreement with JAX (the unsharded reference evaluates it as the vmap it maps like)."""
import json

import pytest

from fuzz.features import features
from fuzz.reduce import reduce_program
from fuzz.render import render
from fuzz.typecheck import ProgramError, check_program
from support.judging import agree_with_jax
from support.programs import JIT, call, eqn, fn, program, ring, shard_map, vmap

MESH = (("a", 2), ("b", 2))  # 4 devices: a pmap maps over a dim of 4


def pmap(in_axes, out_axes, axis_name="i"):
    return {**vmap(in_axes, out_axes, axis_name=axis_name), "pmap": True}


def body():
    """Per device (3,): sin, a ring ppermute over the pmap's axis, and its psum times the value."""
    return fn(["a"], [eqn("sin", ["a"], ["s"]), eqn("ppermute", ["s"], ["q"], axes=["i"], perm=ring(4)),
                      eqn("psum", ["q"], ["p"], axes=["i"]), eqn("mul", ["p", "a"], ["m"])], ["m", "q"])


def pmap_program(transforms, shape=(4, 3), in_axis=0, spec=None):
    """``f0`` (:func:`body`) under ``transforms`` around a pmap over dim ``in_axis`` of x0."""
    p = program(mesh=MESH, inputs=[("x0", shape, 5)], functions={"f0": body()},
                calls=[call("f0", [*transforms, pmap([in_axis], [in_axis, 0])], ["x0"])])
    p["inputs"][0]["spec"] = spec
    return p


@pytest.mark.parametrize("transforms,shape,in_axis", [
    ([], (4, 3), 0),                                    # eager, at the call, an uncommitted input
    ([JIT], (3, 4), 1),                                 # under jit, mapped over dim 1
    ([JIT, {"kind": "grad", "argnums": [0]}], (4, 3), 0),  # reverse mode through the ppermute (the ring's inverse)
])
def test_pmap_renders_and_agrees_with_the_reference(worker, transforms, shape, in_axis):
    p = pmap_program(transforms, shape, in_axis)
    if transforms and transforms[-1]["kind"] == "grad":  # a scalar loss of the pmap's results
        p["functions"]["g"] = p["functions"].pop("f0")
        p["functions"]["f0"] = fn(["x"], [eqn("call", ["x"], ["m", "q"], transforms=[pmap([0], [0, 0])],
                                              fn=p["functions"].pop("g")),
                                          eqn("wsum", ["m"], ["l1"], seed=3), eqn("wsum", ["q"], ["l2"], seed=4),
                                          eqn("add", ["l1", "l2"], ["l"])], ["l"])
        p["calls"][0]["transforms"] = transforms
    check_program(p)
    src = render(p, worker.caps)
    assert "jax.pmap(" in src and "axis_name='i'" in src
    assert "pmap" in features(p)[0] and "vmap" not in features(p)[0]
    agree_with_jax(worker, p)


def test_pmap_typing_rules():
    check_program(pmap_program([JIT]))
    with pytest.raises(ProgramError, match="committed input"):  # eager: pmap does not reshard its inputs
        check_program(pmap_program([], spec=[["a"], None]))
    with pytest.raises(ProgramError, match="mesh of another count"):  # 2 devices beside the mesh's 4
        check_program(pmap_program([JIT], shape=(2, 3)))
    inner = pmap_program([JIT])
    inner["calls"][0]["transforms"] = [JIT, shard_map([[None, None]], [[None, None], [None, None]])]
    inner["functions"]["f0"] = fn(["x"], [eqn("call", ["x"], ["m", "q"], transforms=[pmap([0], [0, 0])],
                                              fn=body())], ["m", "q"])
    with pytest.raises(ProgramError, match="pmap inside a shard_map"):
        check_program(inner)
    spmd = pmap_program([JIT])
    spmd["calls"][0]["transforms"][-1]["spmd_axis_name"] = "a"
    with pytest.raises(ProgramError, match="pmap has no spmd_axis_name"):
        check_program(spmd)
    # nothing inside a pmap names the program's mesh: no sharding annotation there
    annotated = pmap_program([JIT])
    annotated["functions"]["f0"]["eqns"].insert(
        1, eqn("with_sharding_constraint", ["s"], ["s2"], axes=["a"], dim=0))
    with pytest.raises(ProgramError, match="pmap body"):
        check_program(annotated)


def test_the_generator_draws_valid_pmaps():
    from support.draws import drawn_programs

    progs = [p for p in drawn_programs(range(6), 150, cached=True) if "pmap" in features(p)[0]]
    assert len(progs) >= 3, len(progs)
    for p in progs:
        check_program(p)  # (the typing rules: never in a shard_map body, over the mesh's device count)
        assert "jax.pmap(" in render(p)


def test_the_reducer_turns_a_pmap_the_finding_does_not_need_into_a_vmap():
    p = pmap_program([JIT])

    def interesting(q, call):  # (a finding about the ppermute, not about pmap)
        return any(e["op"] == "ppermute" for f in q["functions"].values() for e in f["eqns"])

    out = reduce_program(p, interesting)
    assert '"ppermute"' in json.dumps(out.program) and '"pmap": true' not in json.dumps(out.program)


def test_an_issue_and_a_finding_name_pmap_and_link_its_documentation():
    from fuzz.export import DOCS, Case, _label, feature_docs, title

    from oracles.common import call_label

    p = pmap_program([JIT])
    assert _label(p, 0) == "jit(pmap(f0))" and call_label(p["calls"][0]) == "jit(pmap(f))"
    docs = dict(feature_docs(p))
    assert docs["pmap"][1] == "https://docs.jax.dev/en/latest/_autosummary/jax.pmap.html" and set(docs) <= set(DOCS)
    case = Case(name="t", oracle="internal-error", kind="builtins.ValueError", message="boom", signature="s", call=0,
                program=p, history=[], jax_version="0.10.2")
    assert title(case).startswith("jax.jit of jax.pmap ")
