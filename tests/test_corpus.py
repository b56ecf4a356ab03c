"""Corpus replay: every entry recorded on the installed JAX keeps its status.

An ``open`` entry (a known JAX bug) must still reproduce its signature; a ``fixed`` one
must not. When JAX fixes a bug this test fails: mark the entry ``fixed`` (it becomes a
regression test).
"""
from pathlib import Path

import pytest

from fuzz.program import load_corpus
from fuzz.replay import replay_entry

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
PAIRS = list(zip(sorted(CORPUS.glob("*.json")), load_corpus(CORPUS)))  # load_corpus sorts by path too


@pytest.fixture(scope="module")
def runner():
    from fuzz.runner import Runner

    r = Runner()
    yield r
    r.close()


def test_corpus_is_not_empty():
    assert PAIRS, "corpus/ holds no entries"


@pytest.mark.parametrize("path, entry", PAIRS, ids=[p.stem for p, _ in PAIRS])
def test_entry_keeps_its_status(runner, path, entry):
    result = replay_entry(entry, runner, str(path))
    if result.skipped:
        pytest.skip(result.skipped)
    assert result.ok, f"{path.name}: status {entry['status']} but reproduced={result.reproduced}"
