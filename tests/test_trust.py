"""Corpus entries and reports are untrusted input: a hostile one is refused, one line, and runs nothing.

Each hostile variant puts a payload (code that would create a marker file) into one
field of a valid program. The schema, the typing rules and the renderer must each
refuse it or keep it inert (inside a string literal); replaying a corpus of such
entries and saving findings from such a report must exit 2 without creating the marker.
"""
import ast
import copy
import json
import os
import subprocess
import sys

import pytest

from fuzz.program import CorpusError, load_entry, make_entry, validate_program
from fuzz.render import render
from fuzz.typecheck import ProgramError
from support.programs import JIT, call, eqn, fn, program, shard_map, vmap

PAYLOAD = "__import__('pathlib').Path('PWNED').touch()"


def base():
    body = fn(["a"], [eqn("psum", ["a"], ["v"], axes=["x"]),
                      eqn("io_callback", ["v"], [], tag="cb1", ordered=False, returns=False, stop_gradient=False),
                      eqn("sum", ["v"], ["s"], axis=0),
                      eqn("call", ["v"], ["w"], transforms=[vmap([0], [0], axis_name="i")],
                          fn=fn(["b"], [eqn("broadcast", ["b"], ["c"], size=2)], ["c"]))],
              ["v", "w"])
    p = program(inputs=[("x0", (8,), 1)], functions={"f0": body},
                calls=[call("f0", [JIT, shard_map([[["x"]]], [[None], [None, None]])], ["x0"])])
    return p


def _set(path):
    def mutate(p):
        *head, last = path
        node = p
        for k in head:
            node = node[k]
        node[last] = mutate.value
        return p
    return mutate


def _rename_function(p, new):
    p["functions"][new] = p["functions"].pop("f0")
    p["calls"][0]["function"] = new
    return p


BODY = ["functions", "f0"]
EQN = BODY + ["eqns"]
CODE_NAME = f"f0(a):\n    pass\n{PAYLOAD}\ndef g"
QUOTE = f"x'); {PAYLOAD}; ('"
HOSTILE = {
    "function name with code": lambda p: _rename_function(p, CODE_NAME),
    "function name a builtin": lambda p: _rename_function(p, "exec"),
    "function name a module name": lambda p: _rename_function(p, "jax"),
    "parameter with code": (BODY + ["params", 0], f"a, b=({PAYLOAD})"),
    "parameter a keyword": (BODY + ["params", 0], "import"),
    "output variable with code": (EQN + [0, "outs", 0], f"v = {PAYLOAD}; q"),
    "argument variable with code": (EQN + [0, "args", 0], f"({PAYLOAD})"),
    "result with newline": (BODY + ["results", 0], f"v\n{PAYLOAD}"),
    "input name with code": (["inputs", 0, "name"], f"x0 = 1; {PAYLOAD}; y"),
    "callback tag with quotes": (EQN + [1, "tag"], QUOTE),
    "callback tag with newline": (EQN + [1, "tag"], "cb1\nx"),
    "dtype with code": (["inputs", 0, "dtype"], f"float32'); {PAYLOAD}; ('"),
    "mesh axis name with quotes": (["mesh", "axis_names", 0], QUOTE),
    "spec axis name with quotes": (["calls", 0, "transforms", 1, "in_specs", 0, 0, 0], QUOTE),
    "collective axis with quotes": (EQN + [0, "axes", 0], QUOTE),
    "vmap axis_name with quotes": (EQN + [3, "transforms", 0, "axis_name"], QUOTE),
    "nested parameter with code": (EQN + [3, "fn", "params", 0], f"b=({PAYLOAD})"),
    "integer param as code": (EQN + [2, "axis"], f"0); {PAYLOAD}; (0"),
    "size as code": (EQN + [3, "fn", "eqns", 0, "size"], f"1) + ({PAYLOAD}"),
    "boolean as code": (EQN + [1, "ordered"], f"False); {PAYLOAD}; (0"),
    "seed as code": (["inputs", 0, "seed"], PAYLOAD),
    "shape entry as code": (["inputs", 0, "shape", 0], PAYLOAD),
    "in_axes as code": (EQN + [3, "transforms", 0, "in_axes", 0], PAYLOAD),
    "unknown op": (EQN + [2, "op"], "exec"),
    "extra equation field": (EQN + [2, "code"], PAYLOAD),
    "axis_type with code": (["mesh", "axis_type"], QUOTE),
    "psum without axes": lambda p: (p["functions"]["f0"]["eqns"][0].pop("axes"), p)[1],
    "sin with two arguments": (EQN + [2], {"op": "sin", "args": ["v", "v"], "outs": ["s"]}),
    "unused function named with code": lambda p: (p["functions"].__setitem__(
        CODE_NAME, fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])), p)[1],
    "unused hostile function": lambda p: (p["functions"].__setitem__(
        "f1", fn(["a"], [eqn("sin", ["a"], [f"v = {PAYLOAD}"])], ["a"])), p)[1],
    "call of a nested function name": (["calls", 0, "function"], "g1"),
    "deep nesting": lambda p: _deep(p, 150),
}


def _deep(p, n):
    inner = fn(["b"], [], ["b"])
    for _ in range(n):
        inner = fn(["b"], [eqn("call", ["b"], ["c"], transforms=[], fn=inner)], ["c"])
    p["functions"]["f0"]["eqns"].append(eqn("call", ["v"], ["deep"], transforms=[], fn=inner))
    return p


def hostile(name):
    p = base()
    how = HOSTILE[name]
    if callable(how):
        return how(p)
    path, value = how
    m = _set(path)
    m.value = copy.deepcopy(value)
    return m(p)


def _no_code_from_payload(source: str) -> bool:
    """True when no ``__import__`` call made it into the source as code (string literals are inert)."""
    return not any(isinstance(n, ast.Name) and n.id == "__import__" for n in ast.walk(ast.parse(source)))


def test_base_program_is_valid():
    validate_program(base())
    assert _no_code_from_payload(render(base()))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_program_is_refused_with_one_line(name):
    p = hostile(name)
    with pytest.raises(ProgramError) as err:
        validate_program(p)
    assert "\n" not in str(err.value) and len(str(err.value)) < 400


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_renderer_refuses_or_keeps_payload_inert_without_the_schema(name):
    # the renderer is the last line of defence: it re-checks what it pastes into source
    try:
        source = render(hostile(name))
    except (ProgramError, ValueError, KeyError, TypeError, RecursionError):
        return
    assert _no_code_from_payload(source)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_corpus_entry_is_refused_with_one_line(tmp_path, name):
    path = tmp_path / "internal-error-0.json"
    entry = make_entry({"signature": "internal-error: X: y", "oracle": "internal-error", "kind": "X",
                        "message": "y"}, hostile(name), {"jax_version": "0.10.2", "jaxlib_version": "0.10.2"})
    path.write_text(json.dumps(entry))
    with pytest.raises(CorpusError) as err:
        load_entry(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def _cli(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run([sys.executable, "-m", "fuzz", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=env)


def test_replay_and_save_of_hostile_files_run_nothing(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    findings = []
    for k, name in enumerate(sorted(HOSTILE)):
        f = {"signature": f"internal-error: X: y{k}", "oracle": "internal-error", "kind": "X", "message": "y",
             "program": hostile(name), "call": 0}
        findings.append(f)
        (corpus / f"internal-error-{k:03d}.json").write_text(
            json.dumps(make_entry(f, f["program"], {"jax_version": "0.10.2", "jaxlib_version": "0.10.2"})))
    r = _cli("replay", "--corpus", str(corpus), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "findings": findings}))
    out = tmp_path / "saved"
    r = _cli("save", str(report), "--corpus", str(out), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists() or not any(out.iterdir())  # all or nothing: no part of the selection written
    assert not (tmp_path / "PWNED").exists()


def test_files_are_written_with_the_users_umask(tmp_path):
    from fuzz.util import atomic_write_text

    old = os.umask(0o022)
    try:
        atomic_write_text(str(tmp_path / "r.json"), "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


def test_repro_names_are_reserved_in_programs():
    from fuzz.repro import REPRO_NAMES
    from fuzz.typecheck import RESERVED

    assert REPRO_NAMES <= RESERVED


@pytest.mark.parametrize("url", ["https://github.com/jax-ml/jax/issues/1\n\n## Fixed <img src=x>",
                                 "https://github.com/jax-ml/jax/issues/1\n",
                                 "https://evil.example/jax-ml/jax/issues/1", "javascript:alert(1)",
                                 "https://github.com/jax-ml/jax/issues/1)](https://evil.example",
                                 "https://github.com/jax-ml/jax/commits/1"])
def test_an_upstream_address_other_than_a_github_issue_is_refused(tmp_path, url):
    """An entry's ``upstream`` is printed into ISSUE.md: only an issue or pull request address passes."""
    path = tmp_path / "internal-error-0.json"
    entry = make_entry({"signature": "internal-error: X: y", "oracle": "internal-error", "kind": "X",
                        "message": "y"}, base(), {"jax_version": "0.10.2", "jaxlib_version": "0.10.2"})
    good = ["https://github.com/openxla/xla/issues/49121", "https://github.com/jax-ml/jax/pull/34211"]
    path.write_text(json.dumps({**entry, "upstream": good}))
    assert load_entry(path)["upstream"] == good
    path.write_text(json.dumps({**entry, "upstream": [good[0], url]}))
    with pytest.raises(CorpusError) as err:
        load_entry(path)
    assert "\n" not in str(err.value) and "upstream" in str(err.value)


def test_a_hostile_message_cannot_stall_the_install_path_filter():
    """fuzz.util.hide_install_path runs on messages from reports and corpus files; a message of
    many "-/a" (each "/" a place a path may start, none reaching a site-packages/) made an
    unbounded pattern scan to the end from each of them: 9 s for 60 KB. Bounded, the 600-KB
    message here passes in well under a second on this machine; the limit is generous (60 s) so
    that only a quadratic search fails it."""
    import threading

    from fuzz.util import hide_install_path

    out = []
    t = threading.Thread(target=lambda: out.append(hide_install_path("-/a" * 200_000 + " /v/site-packages/jax")),
                         daemon=True)
    t.start()
    t.join(60)
    assert out and out[0].endswith(" .../site-packages/jax")
