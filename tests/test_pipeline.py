"""The whole pipeline as a Hypothesis property: generate, render, run in JAX, judge.

Every finding must be a known one (a corpus entry); anything else fails the test with
the shrunk program. ``pytest --hypothesis-profile=long`` turns this into a long campaign.
"""
from pathlib import Path

from hypothesis import given, note

import oracles
from fuzz.runner import default_timeout
from fuzz.program import load_corpus, validate_program
from fuzz.reference import evaluate
from fuzz.render import render
from strategies.programs import programs

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
KNOWN = {e["signature"] for e in load_corpus(CORPUS)}


@given(program=programs())
def test_pipeline_finds_nothing_unknown(worker, program):
    validate_program(program)
    source = render(program, worker.caps)
    note(source)
    outcome = worker.run(source, timeout=default_timeout(program))
    reference = evaluate(program) if outcome["status"] == "ok" else None
    found = [f for f in oracles.judge(program, outcome, reference) if f.signature not in KNOWN]
    assert not found, "\n".join(f"{f.signature}\n{f.details[-1500:]}" for f in found)


def test_known_signatures_come_from_a_readable_corpus():
    entries = load_corpus(CORPUS)
    assert len(KNOWN) == len(entries)  # one entry per signature
