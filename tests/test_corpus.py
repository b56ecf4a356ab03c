"""Corpus replay: every entry is replayed on the installed JAX; entries keep their status.

On the release an entry was recorded on, an ``open`` entry (a known JAX bug) must still
reproduce its signature and a ``fixed`` one must not: when JAX fixes a bug this test
fails (mark the entry ``fixed``: it becomes a regression test). On other releases the
verdict (reproduces / does not reproduce / not applicable here) is printed, not checked.
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


@pytest.mark.parametrize("path, entry", PAIRS, ids=[p.stem for p, _ in PAIRS])
def test_entry_keeps_its_status(runner, path, entry):
    result = replay_entry(entry, runner, str(path))
    print(f"{path.name}: {result.verdict} on JAX {runner.caps['jax_version']} {result.why}")
    assert result.ok, f"{path.name}: status {entry['status']} but {result.verdict} ({result.why})"
