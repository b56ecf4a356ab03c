"""The whole pipeline as a Hypothesis property: generate, render, run in JAX, judge.

Always: every generated program matches the schema and typing rules, the reference
evaluates it, and no finding outside the corpus says that *values* are wrong
(differential, callbacks, metamorphic) or that lowering is not deterministic: either
would be a bug of shardfuzz's reference or a JAX bug to triage into ``corpus/``.

JAX's own exceptions and crashes on generated programs are live upstream bugs (about
one program in five on jax 0.10.2, see docs/measurements.md): the quick default profile records
them with ``note`` and goes on, so that CI does not fail on upstream bugs nobody has
triaged yet. ``pytest --hypothesis-profile=long`` is a campaign: there any finding
outside the corpus fails the test, shrunk, with its repro.
"""
from pathlib import Path

import pytest
from hypothesis import given, note, settings

import oracles
from fuzz.program import corpus_files, known_signatures, load_corpus, validate_program
from fuzz.reference import evaluate
from fuzz.render import render
from fuzz.runner import default_timeout
from strategies.programs import programs
from support.judging import KNOWN, VALUE_ORACLES

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


@pytest.fixture(scope="module")
def workers():
    from fuzz.execute import Worker

    with Worker(hash_seed=0) as a, Worker(hash_seed=1) as b:
        yield a, b


QUICK = settings(max_examples=12) if settings.default.max_examples <= 100 else settings()  # long: the profile's


@QUICK
@given(program=programs())
def test_pipeline(workers, program):
    main, lowerer = workers
    strict = settings.default.max_examples > 100  # a long campaign, not the quick default
    validate_program(program)
    source = render(program, main.caps)
    note(source)
    timeout = default_timeout(program)
    lowerer.submit(source, "only")
    outcome = main.run(source, timeout, lower="after")
    other = lowerer.collect(timeout)
    reference = evaluate(program) if outcome["status"] == "ok" else None
    found = [f for f in oracles.judge(program, outcome, reference, other) if f.signature not in KNOWN]
    for f in found:
        note(f"{f.signature}\n{f.details[-1500:]}")
    failing = [f for f in found if (strict or f.oracle in VALUE_ORACLES) and not known_once_reduced(program, f)]
    assert not failing, "\n".join(f"{f.signature}\n{f.details[-1500:]}" for f in failing)


def known_once_reduced(program: dict, finding) -> bool:
    """Whether a finding is a corpus entry's once reduced, as a campaign judges it (fuzz.campaign.Campaign.reduce).

    A wrong value is signed by what the failing program uses (oracles.common.value_signature),
    so one known bug drawn inside a larger program reads as a new signature until the
    reducer (fuzz.maintain.reduce_entry) has taken it back to the bug's own features.
    """
    from fuzz.maintain import reduce_entry
    from fuzz.program import make_entry
    from fuzz.runner import Runner

    if finding.oracle == "determinism" or finding.call is None:
        return False
    runner = Runner(determinism=False)
    try:
        entry = make_entry(vars(finding), program, runner.caps)
        reduced = reduce_entry(entry, runner, max_runs=80, max_seconds=120).entry
    finally:
        runner.close()
    return reduced is not None and reduced["signature"] in KNOWN


def test_known_signatures_come_from_a_readable_corpus():
    entries = load_corpus(CORPUS)
    assert len({e["signature"] for e in entries}) == len(entries)  # one entry per signature
    faces = [s for e in entries for s in e.get("faces", [])]
    assert len(KNOWN) == len(entries) + len(faces)  # a face belongs to one entry and is no entry's signature


def test_a_known_wrong_value_inside_a_larger_program_is_known_once_reduced():
    """differential-83bfe5218ca5 (all_to_all over a vmap axis of an operand the vmap does not batch) with a
    psum and a jit around it: a new value signature, the corpus entry's once reduced."""
    import copy
    import json

    entry = json.loads((CORPUS / "differential-83bfe5218ca5.json").read_text())
    p = copy.deepcopy(entry["program"])
    body = p["functions"]["f0"]
    body["eqns"].append({"op": "psum", "args": ["a1"], "outs": ["w1"], "axes": ["i"]})
    body["results"].append("w1")
    p["calls"][0]["transforms"][0]["out_axes"].append(0)
    p["calls"][0]["transforms"].insert(0, {"kind": "jit"})
    validate_program(p)
    from fuzz.runner import Runner

    runner = Runner(determinism=False)
    try:
        [f] = [f for f in runner.run(p)[0] if f.oracle == "differential"]
    finally:
        runner.close()
    assert f.signature not in KNOWN
    assert known_once_reduced(p, f)


def test_a_value_finding_with_a_known_entrys_features_and_more_may_be_its_face():
    """oracles.common.resembling: same oracle and kind, the known features a subset; nothing else."""
    from oracles.common import resembling

    known = known_signatures(corpus_files(CORPUS))  # {signature: entry file name}
    name = "differential-83bfe5218ca5.json"
    # the entry's fewest-feature wrong shape (its faces may add more of them)
    sig = min((s for s, n in known.items() if n == name and s.startswith("differential: wrong-shape: ")), key=len)
    oracle_kind, feats = sig.rsplit(": ", 1)
    assert resembling(f"{oracle_kind}: {feats}+take", known) == [name]
    assert name not in resembling(f"{oracle_kind}: {feats.split('+', 1)[-1]}", known)  # one feature fewer
    assert name not in resembling(f"metamorphic: disagree: {feats}+take", known)  # another oracle
    assert resembling(f"internal-error: ValueError: {feats}", known) == []


def test_the_summary_says_which_known_entry_a_new_wrong_value_may_be():
    from rich.console import Console

    from fuzz.cli import _summary

    f = {"oracle": "differential", "kind": "wrong-shape", "message": "shape (2,) instead of (4,)", "count": 1,
         "first_seconds": 3.0, "reduced": True, "reduction_runs": 5, "signature": "differential: wrong-shape: x",
         "source": "mesh = None\nprint(1)\n", "details": "", "resembles": ["differential-83bfe5218ca5.json"]}
    report = {"programs": 3, "seconds": 4.0, "programs_per_second": 0.75, "rejected": 0, "invalid": 0,
              "findings": [f, {**f, "resembles": []}]}
    console = Console(record=True, width=200)
    _summary(report, console, ".shardfuzz/report-1.json")
    text = console.export_text()
    assert text.count("may be a face of") == 1
    assert "save .shardfuzz/report-1.json --finding 1 --face-of corpus/differential-83bfe5218ca5.json" in text
    assert "shardfuzz export .shardfuzz/report-1.json --finding N" in text
    console = Console(record=True, width=200)
    _summary({**report, "findings": [], "announced": 3}, console, ".shardfuzz/report-1.json")
    text = console.export_text()
    assert "3 of the 3 findings announced while running turned out known" in text and "no new findings" in text
    console = Console(record=True, width=200)
    known = [{"signature": "a", "entry": "e1.json", "count": 2}, {"signature": "b", "entry": "e1.json", "count": 1},
             {"signature": "c", "entry": "e2.json", "count": 1, "upstream": ["https://github.com/jax-ml/jax/issues/1"]}]
    _summary({**report, "findings": [], "known": known, "known_seconds": 5.0}, console)
    text = console.export_text()
    assert "3 signature(s) of 2 entries, 4 hit(s)" in text and text.count("e1.json") == 1
    assert "e1.json, e2.json (reported upstream)" in text
    console = Console(record=True, width=200)  # a report path the shell would read as an option, or split
    _summary(report, console, "-r 1.json")
    assert "shardfuzz export './-r 1.json' --finding N" in console.export_text()
