"""The program model: schema, typing rules, rendering, corpus files, features."""
import json

import pytest
from hypothesis import given, settings
from hypothesis_jsonschema import from_schema

from fuzz.features import features
from fuzz.program import CorpusError, load_entry, make_entry, save_entry, schema, validate_program
from fuzz.render import NEWEST_CAPS, render
from fuzz.typecheck import ProgramError, check_program
from helpers import JIT, call, eqn, fn, program, shard_map, vmap
from strategies.programs import programs

OLD_CAPS = {"shard_map": "experimental", "check_kw": "check_rep", "partial_manual": "auto", "explicit": False}


@settings(max_examples=300)
@given(programs())
def test_generated_programs_match_schema_and_typing_rules(p):
    validate_program(p)  # raises on any violation
    json.loads(json.dumps(p))  # JSON round trip
    compile(render(p), "<program>", "exec")


@settings(max_examples=100)
@given(programs(caps=OLD_CAPS))
def test_programs_for_old_releases_avoid_missing_features(p):
    validate_program(p)
    assert p["mesh"]["axis_type"] == "auto"
    src = render(p, OLD_CAPS)
    assert "jax.shard_map(" not in src and "check_vma" not in src
    compile(src, "<program>", "exec")


def body_sin():
    return fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])


@pytest.mark.parametrize("bad, match", [
    (program(inputs=[("x0", (8,), 0)], functions={"f0": body_sin()},
             calls=[call("f0", [shard_map([[["x"]]], [[None]])], ["x0"])]), "omit"),
    (program(inputs=[("x0", (6,), 0)], functions={"f0": body_sin()},
             calls=[call("f0", [shard_map([[["x"]]], [[["x"]]])], ["x0"])]), "divisible"),
    (program(inputs=[("x0", (3, 4), 0), ("x1", (5,), 0)], functions={"f0": fn(["a", "b"], [], ["a"])},
             calls=[call("f0", [vmap([0, 0], [0])], ["x0", "x1"])]), "batch sizes"),
    (program(inputs=[("x0", (3, 4), 0)],
             functions={"f0": fn(["a"], [eqn("io_callback", ["a"], [], tag="cb1", ordered=True, returns=False,
                                             stop_gradient=False)], ["a"])},
             calls=[call("f0", [vmap([0], [0])], ["x0"])]), "ordered"),
    (program(inputs=[("x0", (4,), 0)], functions={"f0": fn(["a"], [eqn("psum", ["a"], ["v"], axes=["x"])], ["v"])},
             calls=[call("f0", [JIT], ["x0"])]), "not usable"),
    (program(inputs=[("x0", (4,), 0)], functions={"f0": body_sin()},
             calls=[call("f0", [{"kind": "grad", "argnums": [0]}], ["x0"])]), "scalar"),
    (program(inputs=[("x0", (4,), 0)], functions={"f0": fn(["a"], [eqn("sin", ["zz"], ["v"])], ["v"])},
             calls=[call("f0", [], ["x0"])]), "not in scope"),
])
def test_typing_rules_refuse_invalid_programs(bad, match):
    with pytest.raises(ProgramError, match=match):
        check_program(bad)


def test_schema_refuses_malformed_programs():
    p = program(inputs=[("x0", (4,), 0)], functions={"f0": body_sin()}, calls=[call("f0", [], ["x0"])])
    validate_program(p)
    p["calls"][0]["transforms"] = [{"kind": "pmap"}]
    with pytest.raises(ProgramError, match="schema"):
        validate_program(p)


def test_render_follows_the_release_api():
    body = fn(["a"], [eqn("psum", ["a"], ["v"], axes=["x"])], ["v"])
    p = program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (8,), 0)], functions={"f0": body},
                calls=[call("f0", [JIT, shard_map([[["x"]]], [[None]], check_vma=False, axis_names=["x"])], ["x0"])])
    new, old = render(p, NEWEST_CAPS), render(p, OLD_CAPS)
    assert "jax.shard_map(f0, mesh=mesh, in_specs=(P('x'),), out_specs=(P(),), check_vma=False, axis_names={'x'})" in new
    assert "shard_map(f0, mesh=mesh, in_specs=(P('x'),), out_specs=(P(),), check_rep=False, auto=frozenset({'y'}))" in old
    assert "from jax.experimental.shard_map import shard_map" in old


def test_features_count_what_a_program_uses():
    inner = fn(["s"], [eqn("add", ["s", "a"], ["t"])], ["t"])  # captures a
    body = fn(["a", "b"], [eqn("call", ["b"], ["c"], transforms=[vmap([0], [0])], fn=inner),
                           eqn("psum", ["c"], ["d"], axes=["y"])], ["d"])
    p = program(mesh=(("x", 2), ("y", 4)), inputs=[("x0", (2, 3), 0), ("x1", (2, 8, 3), 1)], functions={"f0": body},
                calls=[call("f0", [vmap([0, 0], [0], spmd_axis_name="x"),
                                   shard_map([[None], [["y"], None]], [[None, None]])], ["x0", "x1"]),
                       call("f0", [vmap([0, 0], [0]), shard_map([[None], [["y"], None]], [[None, None]])],
                            ["x0", "x1"])])
    check_program(p)
    names, depth = features(p)
    assert {"vmap", "shard_map", "spmd_axis_name", "psum", "capture", "multi_call"} <= names
    assert "grad" not in names and depth == 3


@settings(max_examples=30)
@given(from_schema(schema("corpus_entry")))
def test_corpus_loader_gives_one_line_errors_for_any_bad_entry(tmp_path_factory, entry):
    path = tmp_path_factory.mktemp("corpus") / "e.json"
    path.write_text(json.dumps(entry))
    try:
        load_entry(path)
    except CorpusError as e:
        assert "\n" not in str(e) and str(path) in str(e)


def test_corpus_round_trip_and_corrupt_files(tmp_path):
    p = program(inputs=[("x0", (4,), 0)], functions={"f0": body_sin()}, calls=[call("f0", [JIT], ["x0"])])
    entry = make_entry({"signature": "internal-error: X: y", "oracle": "internal-error", "kind": "X", "message": "y"},
                       p, {"jax_version": "0.10.2", "jaxlib_version": "0.10.2"})
    path = save_entry(tmp_path, entry)
    assert load_entry(path) == entry
    path.write_text(path.read_text()[:-20])
    with pytest.raises(CorpusError, match="not valid JSON"):
        load_entry(path)
    path.write_text(json.dumps({**entry, "status": "maybe"}))
    with pytest.raises(CorpusError, match="not a corpus entry"):
        load_entry(path)
