"""The program model: schema, typing rules, rendering, corpus files, features."""
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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


# ------------------------------------------------------------------ corpus entries
# Written against the public functions of fuzz.program only, not the schemas' details.
ENTRY_ORACLES = ("differential", "internal-error", "crash")  # oracles whose findings are kept in the corpus
CAPS = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2"}


@st.composite
def corpus_entries(draw):
    """A valid corpus entry: make_entry of a generated (valid) program and a finding."""
    oracle = draw(st.sampled_from(ENTRY_ORACLES))
    kind = draw(st.sampled_from(["ValueError", "SIGABRT", "wrong-value"]))
    message = draw(st.text(min_size=1, max_size=80))
    finding = {"oracle": oracle, "kind": kind, "message": message, "signature": f"{oracle}: {kind}: {message}"}
    return make_entry(finding, draw(programs()), CAPS, status=draw(st.sampled_from(["open", "fixed"])),
                      triage=draw(st.text(max_size=40)))


def assert_refused(path):
    """load_entry(path) raises CorpusError, and only that, with one line naming the file."""
    with pytest.raises(CorpusError) as e:
        load_entry(path)
    message = str(e.value)
    assert len(message.splitlines()) == 1, message
    assert str(path) in message


@settings(max_examples=25)
@given(corpus_entries())
def test_corpus_round_trip_of_generated_programs(tmp_path_factory, entry):
    directory = tmp_path_factory.mktemp("corpus")
    path = save_entry(directory, entry)
    assert load_entry(path) == entry
    assert save_entry(directory, entry) == path and load_entry(path) == entry  # saving again changes nothing


@settings(max_examples=30)
@given(from_schema(schema("corpus_entry")))
def test_corpus_loader_gives_one_line_errors_for_any_bad_entry(tmp_path_factory, entry):
    # The schema leaves "program" open, so these programs are arbitrary objects: an entry
    # loads only if its program is valid, and otherwise the loader must refuse it.
    path = tmp_path_factory.mktemp("corpus") / "e.json"
    path.write_text(json.dumps(entry))
    try:
        validate_program(entry["program"])
        for h in entry.get("history", []):
            validate_program(h)
    except ProgramError:
        assert_refused(path)
    else:
        assert load_entry(path) == entry


def valid_entry():
    p = program(inputs=[("x0", (4,), 0)], functions={"f0": body_sin()}, calls=[call("f0", [JIT], ["x0"])])
    return make_entry({"signature": "internal-error: X: y", "oracle": "internal-error", "kind": "X", "message": "y"},
                      p, CAPS, triage="a real bug")


HOSTILE = "f0'); __import__('os').system('touch /tmp/shardfuzz_pwned'); ('"


def without(key):
    def f(e):
        del e[key]
    return f


def setting(key, value):
    def f(e):
        e[key] = value
    return f


def in_program(change):
    def f(e):
        change(e["program"])
    return f


def rename_function(p):
    p["functions"][HOSTILE] = p["functions"].pop("f0")
    p["calls"][0]["function"] = HOSTILE


def callback_tag(p):
    p["functions"]["f0"]["eqns"].append(eqn("io_callback", ["v"], [], tag=HOSTILE, ordered=False, returns=False,
                                            stop_gradient=False))


CORRUPT_RECORDS = {
    "no format": without("format"), "no version": without("version"), "no signature": without("signature"),
    "no oracle": without("oracle"), "no status": without("status"), "no program": without("program"),
    "version a string": setting("version", "1"), "status a number": setting("status", 3),
    "status unknown": setting("status", "maybe"), "signature a number": setting("signature", 5),
    "message a list": setting("message", ["y"]), "oracle unknown": setting("oracle", "nonsense"),
    "program a list": setting("program", []), "program null": setting("program", None),
    "program empty": setting("program", {}),
    "program without calls": in_program(lambda p: p.pop("calls")),
    "input shape a string": in_program(lambda p: p["inputs"][0].update(shape="4")),
    "unknown op": in_program(lambda p: p["functions"]["f0"]["eqns"][0].update(op="exec")),
    "call of a missing function": in_program(lambda p: p["calls"][0].update(function="f9")),
    "hostile function name": in_program(rename_function),
    "hostile input name": in_program(lambda p: (p["inputs"][0].update(name=HOSTILE),
                                                p["calls"][0].update(args=[HOSTILE]))),
    "hostile axis name": in_program(lambda p: p["mesh"].update(axis_names=[HOSTILE])),
    "hostile callback tag": in_program(callback_tag),
    "hostile dtype": in_program(lambda p: p["inputs"][0].update(dtype="float32'); import os; ('")),
}


@pytest.mark.parametrize("corrupt", CORRUPT_RECORDS.values(), ids=list(CORRUPT_RECORDS))
def test_corpus_loader_refuses_a_corrupt_record(tmp_path, corrupt):
    entry = valid_entry()
    corrupt(entry)
    path = tmp_path / "e.json"
    path.write_text(json.dumps(entry))
    assert_refused(path)
    assert not os.path.exists("/tmp/shardfuzz_pwned")


def test_corpus_round_trip_and_corrupt_files(tmp_path):
    entry = valid_entry()
    path = save_entry(tmp_path, entry)
    assert load_entry(path) == entry
    text = path.read_text()
    for cut in (0, 1, len(text) // 2, len(text) - 3):  # empty, truncated
        bad = tmp_path / f"cut{cut}.json"
        bad.write_text(text[:cut])
        assert_refused(bad)
    assert '"y"' in text  # the message: made a non-UTF-8 byte below
    for name, data in [("not-utf8.json", text.replace('"y"', '"\udcff"').encode("utf-8", "surrogateescape")),
                       ("utf16.json", text.encode("utf-16")), ("binary.json", bytes(range(256)))]:
        bad = tmp_path / name
        bad.write_bytes(data)
        assert_refused(bad)
    for name, value in [("list.json", [entry]), ("string.json", "entry"), ("null.json", None)]:
        bad = tmp_path / name
        bad.write_text(json.dumps(value))
        assert_refused(bad)
    (tmp_path / "dir.json").mkdir()
    assert_refused(tmp_path / "dir.json")
    assert_refused(tmp_path / "missing.json")
    assert load_entry(path) == entry  # the good file is untouched
