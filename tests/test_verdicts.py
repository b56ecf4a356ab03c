"""Per-release verdicts of corpus entries (fuzz/verdicts.py) and ``shardfuzz replay`` on a release:
the check against the recorded verdict, the table, ``--record`` (fake runners and replays: no JAX)."""
import json
import os
import sys

import pytest
from click.testing import CliRunner

import fuzz.provision
import fuzz.replay
import fuzz.runner
from fuzz import verdicts as V
from fuzz.cli import main
from fuzz.program import CorpusError, load_entry, make_entry, write_entry
from fuzz.replay import DOES_NOT, FAILS_DIFFERENTLY, NOT_APPLICABLE, REPRODUCES, Replay
from support.programs import call, eqn, fn, program

OLD_FORM = {"tested": {"0.4.26": "not applicable here", "0.6.1": "fails differently", "0.9.2": "fails differently",
                       "0.10.2": "reproduces"},
            "affected": [["0.6.1", "0.10.2"]], "first_affected": "0.6.1", "last_unaffected": None,
            "fixed_in": None, "last_affected": None, "applicable": ["0.6.1", "0.10.2"],
            "range": ["0.4.26", "0.10.2"], "changes": [], "assumption": "a", "seconds": 53.6}


def an_entry(tmp_path, name="internal-error-a", releases=None, status="open"):
    p = program(mesh=(("x", 2),), inputs=[("x0", (2,), 1)],
                functions={"f0": fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])}, calls=[call("f0", [], ["x0"])])
    finding = {"signature": f"internal-error: builtins.ValueError: ?: {name}", "oracle": "internal-error",
               "kind": "builtins.ValueError", "message": "boom", "call": 0}
    entry = make_entry(finding, p, {"jax_version": "0.10.2", "jaxlib_version": "0.10.2"}, status=status,
                       triage="a user's triage text\nover two lines")
    if releases is not None:
        entry["releases"] = releases
    return write_entry(tmp_path / f"{name}.json", entry)


# -- the record ------------------------------------------------------------------------------

def test_old_string_verdicts_are_migrated_on_load_and_fails_differently_is_not_affected(tmp_path):
    path = an_entry(tmp_path, releases=OLD_FORM)
    rel = load_entry(path)["releases"]
    assert rel["tested"]["0.6.1"] == {"verdict": FAILS_DIFFERENTLY}
    assert rel["tested"]["0.4.26"] == {"verdict": NOT_APPLICABLE}
    # bisect had said "first affected 0.6.1" (fails differently counted as affected)
    assert rel["affected"] == [["0.10.2", "0.10.2"]]
    assert (rel["first_affected"], rel["last_unaffected"]) == ("0.10.2", "0.9.2")
    assert rel["fails_differently"] == [{"from": "0.6.1", "to": "0.9.2", "seen": ""}]
    assert rel["not_applicable"] == [{"from": "0.4.26", "to": "0.4.26", "why": ""}]
    assert (rel["assumption"], rel["seconds"]) == ("a", 53.6)  # the rest kept
    write_entry(path, load_entry(path))  # the migrated form is valid too
    assert load_entry(path)["releases"] == rel


@pytest.mark.parametrize("bad", [
    {"tested": {"0.10.2": "affected"}},
    {"tested": {"0.10": "reproduces"}},
    {"tested": {"0.10.2": {"verdict": "reproduces", "note": "x"}}},
    {"tested": {"0.10.2": {"verdict": "reproduces", "checked": "yesterday"}}},
    {"tested": {"0.10.2": "reproduces"}, "anything": 1},
    {"affected": [["0.1.0", "0.2.0"]]},
])
def test_a_malformed_release_record_is_refused(tmp_path, bad):
    path = an_entry(tmp_path)
    entry = json.loads(path.read_text())
    entry["releases"] = bad
    path.write_text(json.dumps(entry))
    with pytest.raises(CorpusError, match="releases"):
        load_entry(path)


def test_a_verdict_record_keeps_the_date_the_versions_and_what_showed():
    caps = {"jax_version": "0.12.1", "jaxlib_version": "0.12.1"}
    r = Replay("p", "s", "open", FAILS_DIFFERENTLY, False, "internal-error: x",
               seen=(("internal-error: builtins.ModuleNotFoundError: ?: No module named 'jax.experimental.x'",
                      "No module named 'jax.experimental.x'"),))
    rec = V.of_replay(r, caps)
    assert rec["verdict"] == FAILS_DIFFERENTLY and rec["jax"] == rec["jaxlib"] == "0.12.1"
    assert rec["seen"].startswith("internal-error: builtins.ModuleNotFoundError") and len(rec["checked"]) == 10
    assert "seen" not in V.of_replay(Replay("p", "s", "open", REPRODUCES, False), caps)
    assert V.of_replay(Replay("p", "s", "open", NOT_APPLICABLE, False, "no jax.smap"), caps)["seen"] == "no jax.smap"


def test_ranges_run_to_the_newest_release_recorded():
    rel = V.with_verdict(OLD_FORM, "0.12.1", V.record(REPRODUCES, checked="2026-12-07"))
    assert rel["affected"] == [["0.10.2", "0.12.1"]] and rel["fixed_in"] is None
    rel = V.with_verdict(rel, "0.11.2", V.record(DOES_NOT, checked="2026-12-07"))
    assert rel["affected"] == [["0.10.2", "0.10.2"], ["0.12.1", "0.12.1"]]  # fixed, then back: open
    rel = V.with_verdict(rel, "0.12.1", V.record(DOES_NOT, checked="2026-12-07"))  # a release checked again
    assert (rel["fixed_in"], rel["last_affected"]) == ("0.11.2", "0.10.2")
    assert V.newest_reproducing(rel) == "0.10.2" and V.newest_reproducing({"tested": {"x": 1}}) is None


# -- replay against the recorded verdicts ----------------------------------------------------

def test_a_verdict_other_than_the_recorded_one_on_the_running_release_is_a_change():
    def replay(verdict, expected, status="open", recorded_release=False):
        return Replay("p", "s", status, verdict, recorded_release, expected=expected)

    assert not replay(DOES_NOT, REPRODUCES).ok  # an open bug that stopped reproducing here
    assert not replay(REPRODUCES, DOES_NOT, status="fixed").ok  # a fixed bug that came back
    assert not replay(FAILS_DIFFERENTLY, REPRODUCES).ok
    assert not replay(REPRODUCES, NOT_APPLICABLE).ok
    assert replay(FAILS_DIFFERENTLY, FAILS_DIFFERENTLY).ok
    # a fixed entry stays a regression test of the releases where it showed
    assert replay(REPRODUCES, REPRODUCES, status="fixed", recorded_release=True).ok
    assert not replay(DOES_NOT, REPRODUCES, status="fixed", recorded_release=True).ok
    assert replay(DOES_NOT, None).ok  # no verdict recorded here: information


class FakeRunner:
    """Stands for fuzz.runner.Runner: a worker of jax 0.12.1 that runs nothing."""

    closed = 0

    def __init__(self, python=None, **kw):
        self.caps = {"jax_version": "0.12.1", "jaxlib_version": "0.12.1", "n_devices": 8}

    def close(self):
        FakeRunner.closed += 1


def fake_replays(monkeypatch, outcomes):
    """replay_entry gives ``outcomes[entry name]`` = (verdict, why, seen) on the fake 0.12.1 runner."""
    monkeypatch.setattr(fuzz.runner, "Runner", FakeRunner)
    for name in ("worker_python", "interpreter"):  # (whichever fuzz.provision offers: no venv is made)
        monkeypatch.setattr(fuzz.provision, name, lambda *a, **k: "/fake/python", raising=False)

    def replay_entry(entry, runner, path=""):
        verdict, why, seen = outcomes[os.path.basename(path)[:-5]]
        expected = V.verdict((entry.get("releases") or {}).get("tested", {}), runner.caps["jax_version"])
        return Replay(path, entry["signature"], entry["status"], verdict, False, why, seen, expected)

    monkeypatch.setattr(fuzz.replay, "replay_entry", replay_entry)


def test_replay_prints_the_table_and_exits_1_on_a_change(tmp_path, monkeypatch):
    recorded = {"tested": {"0.10.2": "reproduces", "0.12.1": {"verdict": "reproduces", "checked": "2026-12-01"}}}
    an_entry(tmp_path, "internal-error-a", releases=recorded)
    an_entry(tmp_path, "internal-error-b", releases={"tested": {"0.10.2": "reproduces"}})
    fake_replays(monkeypatch, {"internal-error-a": (DOES_NOT, "no finding", ()),
                               "internal-error-b": (FAILS_DIFFERENTLY, "internal-error: other", (("s", "m"),))})
    r = CliRunner().invoke(main, ["replay", "--corpus", str(tmp_path), "--jax-version", "0.12.1"])
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert lines[1].split()[:4] == ["entry", "status", "recorded", "on"]
    row = {ln.split()[0]: ln for ln in lines[2:4]}
    assert row["internal-error-a"].split()[:7] == ["internal-error-a", "open", "reproduces", "does", "not",
                                                   "reproduce", "0.10.2"] and "CHANGED" in row["internal-error-a"]
    assert "fails differently" in row["internal-error-b"] and "CHANGED" not in row["internal-error-b"]
    assert "1 changed" in lines[-1]
    r = CliRunner().invoke(main, ["replay", "--corpus", str(tmp_path), "--entry", "internal-error-b"])
    assert r.exit_code == 0 and "internal-error-a" not in r.output  # no verdict recorded on 0.12.1: information


def test_record_writes_the_verdicts_and_keeps_the_rest_of_each_entry(tmp_path, monkeypatch):
    a = an_entry(tmp_path, "internal-error-a", releases=OLD_FORM)
    b = an_entry(tmp_path, "internal-error-b")
    before = {p: json.loads(p.read_text()) for p in (a, b)}
    fake_replays(monkeypatch, {"internal-error-a": (REPRODUCES, "", ()),
                               "internal-error-b": (FAILS_DIFFERENTLY, "crash: x", (("crash: SIGABRT: x", "abort"),))})
    r = CliRunner().invoke(main, ["replay", "--corpus", str(tmp_path), "--record"])
    assert r.exit_code == 0, r.output
    for p in (a, b):
        after = json.loads(p.read_text())
        assert {k: v for k, v in after.items() if k != "releases"} == \
            {k: v for k, v in before[p].items() if k != "releases"}  # the triage and all else untouched
    rel = load_entry(a)["releases"]
    assert rel["tested"]["0.12.1"]["verdict"] == REPRODUCES and rel["tested"]["0.12.1"]["jax"] == "0.12.1"
    assert rel["tested"]["0.9.2"] == {"verdict": FAILS_DIFFERENTLY}  # the other releases kept
    assert rel["affected"] == [["0.10.2", "0.12.1"]]
    rel = load_entry(b)["releases"]
    assert rel["tested"]["0.12.1"]["seen"] == "crash: SIGABRT: x (abort)" and rel["affected"] == []
    assert sorted(os.listdir(tmp_path)) == ["internal-error-a.json", "internal-error-b.json"]  # no temp files


def test_record_writes_each_entry_atomically(tmp_path, monkeypatch):
    a = an_entry(tmp_path, "internal-error-a", releases=OLD_FORM)
    text = a.read_text()
    fake_replays(monkeypatch, {"internal-error-a": (REPRODUCES, "", ())})

    def replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", replace)
    r = CliRunner().invoke(main, ["replay", "--corpus", str(tmp_path), "--record"])
    assert r.exit_code == 2 and "the entry is unchanged" in r.output
    assert a.read_text() == text and os.listdir(tmp_path) == ["internal-error-a.json"]


# -- docs/bugs.md ------------------------------------------------------------------------------

def test_the_bugs_page_has_one_line_per_entry_from_its_record(tmp_path):
    from fuzz.bugs_page import component, main as bugs_main
    from fuzz.program import corpus_files

    rel = V.with_verdict(OLD_FORM, "0.12.1", V.record(DOES_NOT, checked="2026-12-07"))
    a = an_entry(tmp_path, "internal-error-a", releases=rel)
    entry = load_entry(a)
    entry["triage"] = "XLA SPMD partitioner bug | <b>: a pad"
    entry["upstream"] = ["https://github.com/openxla/xla/issues/49118"]
    entry["message"] = "boom | <img src=x>\n## not a heading"
    write_entry(a, entry)
    an_entry(tmp_path, "internal-error-b", releases={"tested": {"0.12.1": "reproduces"}})
    out = tmp_path / "bugs.md"
    assert bugs_main(["--corpus", str(tmp_path), "--out", str(out)]) == 0
    text = out.read_text()
    rows = [ln for ln in text.splitlines() if ln.startswith("| `")]
    assert len(rows) == 2 and "1 reproduce on jax 0.12.1" in text
    cells = [c.strip() for c in rows[0].split("|")[1:-1]]
    assert cells == ["`internal-error-a`", "GSPMD", "raises ValueError: boom / &lt;img src=x&gt; ## not a heading",
                     "0.10.2", "does not reproduce",
                     "[openxla/xla/issues/49118](https://github.com/openxla/xla/issues/49118)"]
    assert [c.strip() for c in rows[1].split("|")[1:-1]][1:5] == ["JAX transform", "raises ValueError: boom",
                                                                  "0.12.1", "reproduces"]
    assert (component("Shardy bug (GSPMD right): x"), component("XLA:CPU bug, x"),
            component("TypeError 'Cannot convert GSPMDSharding'")) == ("Shardy", "XLA:CPU", "JAX transform")
    assert bugs_main(["--corpus", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert len(corpus_files(tmp_path)) == 2


# -- export on the newest release where the finding reproduces ------------------------------------

def test_export_verifies_on_the_newest_release_the_entry_reproduces_on_and_says_what_was_checked(tmp_path,
                                                                                               monkeypatch):
    import fuzz.export as E

    rel = {"tested": {"0.10.2": "reproduces", "0.11.2": {"verdict": REPRODUCES, "checked": "2026-12-07"},
                      "0.12.1": {"verdict": DOES_NOT, "checked": "2026-12-07"}}}
    a = an_entry(tmp_path, "internal-error-a", releases=rel)
    b = an_entry(tmp_path, "internal-error-b", releases={"tested": {"0.10.2": "reproduces", "0.12.1": DOES_NOT}})
    asked = []
    monkeypatch.setattr(E, "choose_interpreter", lambda case, python, jax_version, log=None, **kw:
                        asked.append((python, jax_version)) or "/fake/python")
    monkeypatch.setattr(E, "export_case", lambda case, interp, target, log=None, xla_passes=False:
                        (target / "repro.py", target / "ISSUE.md"))
    monkeypatch.setattr(E, "installed_jax_version", lambda: "0.10.2")
    for path in (a, b):
        r = CliRunner().invoke(E.export, [str(path), "--out", str(tmp_path / "out")])
        assert r.exit_code == 0, r.output
    # b: only its recorded release reproduces, the one installed here: this interpreter
    assert asked == [(None, "0.11.2"), (sys.executable, None)]
    r = CliRunner().invoke(E.export, [str(a), "--out", str(tmp_path / "out"), "--jax-version", "0.10.2"])
    assert asked[-1] == (None, "0.10.2")  # the user's choice stands
    text = E._releases_text(load_entry(a)["releases"], "0.11.2")
    assert "- affected releases: 0.10.2 to 0.11.2" in text and "- fixed in: 0.12.1" in text
    assert "- checked: 0.10.2: reproduces, 0.11.2: reproduces, 0.12.1: does not reproduce" in text
    assert "verified on jax 0.11.2; the newest release checked where it reproduces: 0.11.2" in text
