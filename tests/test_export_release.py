"""export verifies a repro on the newest release its entry records the finding reproducing on,
also when that release is not the one installed here (a venv is made for it), without JAX here."""
from types import SimpleNamespace

from click.testing import CliRunner

import fuzz.export as E


def _export(monkeypatch, recorded: str, newest: str, installed: str, recorded_verdicts: bool = True) -> dict:
    seen = {}
    case = SimpleNamespace(jax_version=recorded, releases={}, name="entry", upstream=[])
    monkeypatch.setattr(E, "load_case", lambda path, finding: case)
    monkeypatch.setattr(E, "newest_release", lambda c: newest)
    monkeypatch.setattr(E, "newest_reproducing", lambda releases: newest if recorded_verdicts else None)
    monkeypatch.setattr(E, "installed_jax_version", lambda: installed)

    def choose(c, python, jax_version, log=None, venv_python=None):
        seen.update(python=python, jax_version=jax_version)
        return "/some/python"

    monkeypatch.setattr(E, "choose_interpreter", choose)
    monkeypatch.setattr(E, "export_case", lambda *a, **k: ("repro.py", "ISSUE.md"))
    result = CliRunner().invoke(E.export, ["entry.json", "--out", "out"])
    assert result.exit_code == 0, result.output
    return seen


def test_a_finding_recorded_on_a_release_not_installed_is_verified_there(monkeypatch):
    seen = _export(monkeypatch, recorded="0.12.1", newest="0.12.1", installed="0.10.2")
    assert seen == {"python": None, "jax_version": "0.12.1"}


def test_a_newer_release_that_reproduces_it_is_preferred(monkeypatch):
    assert _export(monkeypatch, recorded="0.10.2", newest="0.12.1", installed="0.10.2")["jax_version"] == "0.12.1"


def test_the_installed_release_is_used_as_it_is(monkeypatch):
    seen = _export(monkeypatch, recorded="0.10.2", newest="0.10.2", installed="0.10.2")
    assert seen["jax_version"] is None and seen["python"]


def test_without_recorded_verdicts_the_recorded_release_is_asked_for(monkeypatch):
    # (nothing says where it reproduces: choose_interpreter then names the release to pass)
    seen = _export(monkeypatch, recorded="0.4.30", newest="0.4.30", installed="0.10.2", recorded_verdicts=False)
    assert seen == {"python": None, "jax_version": None}
