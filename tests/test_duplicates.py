"""Candidate duplicates among corpus entries (fuzz/duplicates.py) and linking two entries (``related``)."""
import json
import os
import subprocess
import sys

import pytest

from fuzz import duplicates as D
from fuzz.program import CorpusError, load_entry, make_entry, save_entry, validate_entry
from fuzz.util import UsageError
from support.programs import JIT, call, eqn, fn, program

CAPS = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2"}


def a_program(op="sin"):
    return program(inputs=[("x0", (4,), 0)], functions={"f0": fn(["a"], [eqn(op, ["a"], ["v"])], ["v"])},
                   calls=[call("f0", [JIT], ["x0"])])


def entry(signature, oracle="internal-error", kind="builtins.AssertionError", triage="", op="sin", **more):
    e = make_entry({"signature": signature, "oracle": oracle, "kind": kind, "message": "m", "call": 0},
                   a_program(op), CAPS, triage=triage)
    return {**e, **more}


def corpus(tmp_path, *entries):
    d = tmp_path / "corpus"
    paths = [save_entry(d, e) for e in entries]
    return d, [p.stem for p in paths]


SIG_A = "internal-error: builtins.AssertionError: jax._src.core:get_mat: ManualAxisType(…)"
SIG_B = "internal-error: builtins.AssertionError: jax._src.core:get_mat: while printing jax.make_jaxpr: ManualAxisType(…)"
SIG_C = "internal-error: builtins.ValueError: jax._src.shard_map:_check_specs: out_specs must refer to a manual axis"


def pairs_of(d):
    return {(p.a, p.b): p for p in D.find_duplicates(D.load(str(d)))}


def test_the_same_raise_site_is_proposed_and_another_is_not(tmp_path):
    d, (a, b, c) = corpus(tmp_path, entry(SIG_A), entry(SIG_B), entry(SIG_C, kind="builtins.ValueError", op="cos"))
    found = pairs_of(d)
    key = tuple(sorted((a, b)))
    assert key in found and not found[key].linked
    assert ("same raise site", "jax._src.core:get_mat") in [(k, v) for _, k, v in found[key].evidence]
    assert not any(c in k for k in found)  # another site, another message: no pair


def test_a_face_gives_its_site_and_a_linked_pair_is_shown_linked(tmp_path):
    e_a = entry(SIG_C, kind="builtins.ValueError", faces=[SIG_A])  # SIG_A is a face of this one
    d, (a, b) = corpus(tmp_path, e_a, entry(SIG_A))
    p = pairs_of(d)[tuple(sorted((a, b)))]
    assert p.linked == "faces"
    d2, (x, y) = corpus(tmp_path / "two", entry(SIG_A), entry(SIG_C, kind="builtins.ValueError", op="cos"))
    assert not pairs_of(d2)  # nothing in common
    D.link(str(d2), x, y, "checked by hand")
    assert pairs_of(d2)[tuple(sorted((x, y)))].linked == "related"  # shown although the evidence is none


def test_the_same_ratio_in_the_triage_texts_is_evidence_for_wrong_values(tmp_path):
    t1 = "the conv gives 0.5625 under jit: twice the right one. Shardy's partitioning; right with GSPMD."
    t2 = "returns 8 for 4; GSPMD right."
    t3 = "gives 1.0 for 4.0 on 4 devices"
    d, (a, b, c) = corpus(tmp_path, entry("differential: wrong-value: conv+jit", "differential", "wrong-value", t1),
                          entry("differential: wrong-value: conv", "differential", "wrong-value", t2),
                          entry("differential: wrong-value: pad", "differential", "wrong-value", t3, op="cos"))
    found = pairs_of(d)
    p = found[tuple(sorted((a, b)))]
    kinds = [k for _, k, _ in p.evidence]
    assert "ratio got/expected in triage (weaker)" in kinds and "partitioner/pass keyword (weak)" in kinds
    assert not any(c in k for k in found)
    assert D.ratios(t3) == {0.25} and D.tags(t1) == {"shardy-only"}


def test_the_cli_refuses_a_missing_corpus_directory_with_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "fuzz", "duplicates", "--corpus", str(tmp_path / "nope")],
                       capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert r.returncode == 2, r.stderr
    assert "no corpus directory" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.json").write_text("{")
    r = subprocess.run([sys.executable, "-m", "fuzz", "duplicates", "--corpus", str(tmp_path / "bad"), "--json"],
                       capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert r.returncode == 2 and "not valid JSON" in r.stderr


def test_the_cli_lists_pairs_as_json(tmp_path):
    d, (a, b) = corpus(tmp_path, entry(SIG_A), entry(SIG_B))
    r = subprocess.run([sys.executable, "-m", "fuzz", "duplicates", "--corpus", str(d), "--json"],
                       capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [(p["a"], p["b"]) for p in out] == [tuple(sorted((a, b)))] and out[0]["linked"] is None


@pytest.mark.parametrize("bad", ["differential-cb0b3b1097c", "differential-cb0b3b1097ca\n", "../x-cb0b3b1097ca",
                                 "differential-CB0B3B1097CA", "generator-cb0b3b1097ca", 7])
def test_the_schema_refuses_a_bad_related_value(bad):
    e = entry(SIG_A, related=["differential-cb0b3b1097ca"])
    validate_entry(e)  # a good one passes
    with pytest.raises(CorpusError, match="related"):
        validate_entry({**e, "related": [bad]})
    with pytest.raises(CorpusError, match="related"):
        validate_entry({**e, "related": ["crash-0123456789ab", "crash-0123456789ab"]})  # twice


def test_link_writes_both_entries_atomically(tmp_path, monkeypatch):
    d, (a, b) = corpus(tmp_path, entry(SIG_A, triage="first"), entry(SIG_C, kind="builtins.ValueError"))
    written = []
    import fuzz.util

    real = fuzz.util.atomic_write_text

    def spy(path, text):
        written.append(os.path.basename(path))
        real(path, text)

    monkeypatch.setattr(fuzz.program, "atomic_write_text", spy)
    pa, pb, changed = D.link(str(d), a, b + ".json", "  same   frame chain ", today="2026-12-07")
    assert changed and sorted(written) == sorted([f"{a}.json", f"{b}.json"])
    ea, eb = load_entry(pa), load_entry(pb)
    assert ea["related"] == [b] and eb["related"] == [a]
    assert ea["triage"] == f"first\nPossibly the same bug as {b} (linked 2026-12-07): same frame chain"
    assert eb["triage"].endswith(f"Possibly the same bug as {a} (linked 2026-12-07): same frame chain")
    written.clear()
    assert D.link(str(d), b, a, "again")[2] is False and written == []  # linked already: nothing written
    assert not [p for p in os.listdir(d) if p.startswith(".tmp")]


def test_link_writes_neither_entry_when_one_would_be_invalid(tmp_path):
    full = [f"crash-{k:012x}" for k in range(32)]  # the schema's maxItems: one more is invalid
    d, (a, b) = corpus(tmp_path, entry(SIG_A), entry(SIG_C, kind="builtins.ValueError", related=full))
    before = {p: (d / p).read_text() for p in os.listdir(d)}
    with pytest.raises(UsageError, match="related"):
        D.link(str(d), a, b, "one bug")
    assert {p: (d / p).read_text() for p in os.listdir(d)} == before


def test_link_refuses_bad_input_and_writes_nothing(tmp_path):
    d, (a, b) = corpus(tmp_path, entry(SIG_A), entry(SIG_C, kind="builtins.ValueError"))
    before = {p: (d / p).read_text() for p in os.listdir(d)}
    for args, words in [((a, a, "x"), "itself"), ((a, "crash-0123456789ab", "x"), "no entry"),
                        ((a, "../../etc/passwd", "x"), "no entry"), ((a, b, "  "), "--why is empty")]:
        with pytest.raises(UsageError, match=words):
            D.link(str(d), *args)
    assert {p: (d / p).read_text() for p in os.listdir(d)} == before


def test_export_names_the_related_entries_in_issue_md(tmp_path):
    from fuzz.export import Run, issue_text, load_case

    d, (a, b) = corpus(tmp_path, entry(SIG_A), entry(SIG_C, kind="builtins.ValueError"))
    run = Run(1, "", "AssertionError", None, 0.1)
    assert "Possibly the same bug" not in issue_text(load_case(str(d / f"{a}.json"), None), "src", run, "env", "0.10.2")
    D.link(str(d), a, b, "one bug")
    text = issue_text(load_case(str(d / f"{a}.json"), None), "src", run, "env", "0.10.2")
    assert f"\n> Possibly the same bug as {b} (findings of the same fuzzer" in text
