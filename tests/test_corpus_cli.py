"""Saving and replaying the corpus: what save keeps and refuses, replay's verdicts and its bad input."""
import json
import os
import subprocess
import sys

import pytest

from fuzz.program import CorpusError, entries_from_report, load_entry, save_entries
from fuzz.replay import DOES_NOT, NOT_APPLICABLE, REPRODUCES, Replay, applicable
from support.programs import JIT, call, eqn, fn, program, shard_map
from oracles import SAVABLE

REPORT = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2"}


def a_program():
    return program(inputs=[("x0", (4,), 0)], functions={"f0": fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])},
                   calls=[call("f0", [JIT], ["x0"])])


def finding(oracle, k=0):
    return {"signature": f"{oracle}: kind: message {k}", "oracle": oracle, "kind": "kind", "message": "m",
            "call": 0, "program": a_program()}


def test_a_finding_of_every_oracle_saves_and_reloads(tmp_path):
    report = {**REPORT, "findings": [finding(o, k) for k, o in enumerate(SAVABLE)]}
    assert {"determinism", "crash", "hang", "differential", "internal-error"} <= set(SAVABLE)
    written = save_entries(tmp_path, entries_from_report(report, [], "", "r.json"))
    assert [what for _, what in written] == ["saved"] * len(SAVABLE)
    for (path, _), f in zip(written, report["findings"]):
        e = load_entry(path)
        assert (e["oracle"], e["signature"], e["call"]) == (f["oracle"], f["signature"], 0)


@pytest.mark.parametrize("oracle", ["generator", "reference"])
def test_findings_about_shardfuzz_itself_are_refused(oracle):
    report = {**REPORT, "findings": [finding("internal-error"), finding(oracle)]}
    with pytest.raises(CorpusError, match="not of JAX"):
        entries_from_report(report, [], "", "r.json")


def test_triage_is_added_once_and_never_overwritten(tmp_path):
    report = {**REPORT, "findings": [finding("crash")]}
    [(path, what)] = save_entries(tmp_path, entries_from_report(report, [], "", "r.json"))
    assert what == "saved" and "triage" not in load_entry(path)
    [(_, what)] = save_entries(tmp_path, entries_from_report(report, [], "a real abort", "r.json"), "a real abort")
    assert what == "triage added" and load_entry(path)["triage"] == "a real abort"
    with pytest.raises(CorpusError, match="already has a triage"):
        save_entries(tmp_path, entries_from_report(report, [], "another text", "r.json"), "another text")
    assert load_entry(path)["triage"] == "a real abort"


def test_a_bad_index_writes_nothing(tmp_path):
    report = {**REPORT, "findings": [finding("crash")]}
    with pytest.raises(CorpusError, match="out of range"):
        entries_from_report(report, [1, 2], "", "r.json")


def test_replay_verdicts_check_the_status_only_on_the_recorded_release():
    assert not Replay("p", "s", "open", DOES_NOT, True).ok  # fixed upstream: mark the entry fixed
    assert not Replay("p", "s", "fixed", REPRODUCES, True).ok  # a regression
    assert Replay("p", "s", "open", REPRODUCES, True).ok
    assert Replay("p", "s", "open", DOES_NOT, False).ok  # another release: information only
    assert Replay("p", "s", "open", NOT_APPLICABLE, True).ok


def test_a_program_an_old_release_cannot_express_is_not_applicable():
    p = program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4,), 0)],
                functions={"f0": fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])},
                calls=[call("f0", [shard_map([[["x"]]], [[["x"]]], axis_names=["x"])], ["x0"])])
    newest = {"shard_map": "jax", "check_kw": "check_vma", "partial_manual": "axis_names", "explicit": True,
              "n_devices": 8}
    assert applicable(p, newest) == ""
    assert "partial-manual" in applicable(p, {**newest, "partial_manual": None})
    assert "devices" in applicable(p, {**newest, "n_devices": 2})


def _cli(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "-m", "fuzz", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=env)


def test_replay_with_nothing_to_replay_exits_2(tmp_path):
    r = _cli("replay", cwd=tmp_path)  # run from another directory: no corpus/ here
    assert r.returncode == 2 and "no corpus directory" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "corpus").mkdir()
    r = _cli("replay", cwd=tmp_path)
    assert r.returncode == 2 and "nothing to replay" in r.stderr


def test_save_cli_refuses_a_generator_finding_and_writes_nothing(tmp_path):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({**REPORT, "findings": [finding("crash"), finding("generator")]}))
    r = _cli("save", str(report), "--corpus", str(tmp_path / "c"), cwd=tmp_path)
    assert r.returncode == 2 and "not of JAX" in r.stderr
    assert not (tmp_path / "c").exists()


def test_a_face_of_a_known_bug_is_kept_in_its_entry_and_known_to_campaigns(tmp_path):
    from fuzz.maintain import _merge
    from fuzz.program import corpus_files, known_signatures

    corpus = tmp_path / "c"
    [(path, _)] = save_entries(corpus, entries_from_report({**REPORT, "findings": [finding("internal-error", 1)]},
                                                           [], "the bug", "r.json"))
    report = tmp_path / "r.json"
    report.write_text(json.dumps({**REPORT, "findings": [finding("internal-error", 2), finding("crash", 3)]}))
    r = _cli("save", str(report), "--finding", "1", "--face-of", str(path), cwd=tmp_path)
    assert r.returncode == 2 and "--triage" in r.stderr  # a face is a triage decision: say why
    r = _cli("save", str(report), "--finding", "2", "--face-of", str(path), "--triage", "t", cwd=tmp_path)
    assert r.returncode == 2 and "same oracle" in r.stderr and load_entry(path).get("faces") is None  # a crash
    r = _cli("save", str(report), "--finding", "1", "--face-of", str(path), "--triage", "same raise site",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    e = load_entry(path)
    assert e["faces"] == ["internal-error: kind: message 2"] and e["triage"] == "the bug\nsame raise site"
    assert [p.name for p in corpus.iterdir()] == [path.name]  # no new entry
    known = known_signatures(corpus_files(corpus))
    assert known == {"internal-error: kind: message 1": path.name, "internal-error: kind: message 2": path.name}
    # a merge keeps the merged entry's signature and faces as faces
    gone = {**e, "signature": "internal-error: kind: message 9", "faces": ["internal-error: kind: message 8"]}
    merged = _merge(load_entry(path), gone)
    assert merged["faces"] == ["internal-error: kind: message 2", "internal-error: kind: message 9",
                               "internal-error: kind: message 8"]


def test_a_face_may_come_from_another_oracle_of_the_programs_outcome(tmp_path):
    """A wrong shape from a batching rule is a wrong value in one program and an internal error
    of the autodiff that consumes it in another: one root cause, one entry."""
    from fuzz.program import known_signatures, corpus_files

    corpus = tmp_path / "c"
    [(path, _)] = save_entries(corpus, entries_from_report({**REPORT, "findings": [finding("differential", 1)]},
                                                           [], "the bug", "r.json"))
    report = tmp_path / "r.json"
    report.write_text(json.dumps({**REPORT, "findings": [finding("internal-error", 2)]}))
    r = _cli("save", str(report), "--face-of", str(path), "--triage", "the cotangent gets the wrong shape",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "internal-error: kind: message 2" in known_signatures(corpus_files(corpus))


def test_a_face_past_the_formats_limit_is_refused_in_one_line_and_nothing_is_written(tmp_path):
    from fuzz.program import schema

    most = schema("corpus_entry")["properties"]["faces"]["maxItems"]
    corpus = tmp_path / "c"
    [(path, _)] = save_entries(corpus, entries_from_report({**REPORT, "findings": [finding("internal-error", 0)]},
                                                           [], "the bug", "r.json"))
    full = {**load_entry(path), "faces": [f"internal-error: kind: face {k}" for k in range(most)]}
    path.write_text(json.dumps(full))
    before = path.read_bytes()
    report = tmp_path / "r.json"
    report.write_text(json.dumps({**REPORT, "findings": [finding("internal-error", 2)]}))
    r = _cli("save", str(report), "--finding", "1", "--face-of", str(path), "--triage", "t", cwd=tmp_path)
    assert r.returncode == 2 and f"more than the {most}" in r.stderr and "fix or remove" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and path.read_bytes() == before
