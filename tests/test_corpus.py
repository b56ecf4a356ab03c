"""Corpus replay: every entry is replayed on the installed JAX; entries keep their verdicts.

Where an entry records a verdict for the installed release (``releases.tested``, written by
``shardfuzz replay --record`` and ``shardfuzz bisect``), the replay must give the same one: an
open bug that stopped reproducing, or a fixed one that came back, fails this test (record the
new verdict, and mark the entry ``fixed`` once it no longer reproduces on the newest release:
it stays a regression test of the releases where it showed). Without a recorded verdict, only
on the release an entry was recorded on is its status checked; elsewhere the verdict
(fuzz/replay.py) is printed, not checked.
"""
from pathlib import Path

import pytest

from fuzz.program import corpus_files
from fuzz.replay import replay_entry

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
PAIRS = corpus_files(CORPUS)


@pytest.fixture(scope="module")
def runner():
    from fuzz.runner import Runner

    r = Runner()
    yield r
    r.close()


def test_corpus_is_not_empty():
    assert PAIRS, "corpus/ holds no entries"


def marks(i: int, entry: dict) -> list:
    """Two xdist groups (each test process replays about half, with a runner of its own): the whole
    corpus in one process is the longest stretch of the default run. A crash entry is slow (``--slow``):
    its replay crashes a worker twice (the confirmation in a fresh one) after its history, about
    31 s each on a loaded 2-core machine (2026-12-07): a third of the corpus's time for a tenth of
    its entries; the crash path itself stays in the default run (tests/test_faults.py)."""
    return [pytest.mark.xdist_group(f"corpus-{i % 2}")] + ([pytest.mark.slow] if entry.get("oracle") == "crash" else [])


@pytest.mark.parametrize("path, entry", [pytest.param(p, e, id=p.stem, marks=marks(i, e)) for i, (p, e) in enumerate(PAIRS)])
def test_entry_keeps_its_status(runner, path, entry):
    result = replay_entry(entry, runner, str(path))
    print(f"{path.name}: {result.verdict} on JAX {runner.caps['jax_version']} {result.why}")
    assert result.ok, f"{path.name}: status {entry['status']} but {result.verdict} ({result.why})"
