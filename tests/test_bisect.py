"""``shardfuzz bisect``: the search over releases, with fake replays (no venvs; a real one is too slow here)."""
import json
import math

import pytest
from click.testing import CliRunner

from fuzz import bisection as B
from fuzz.program import load_entry, make_entry, write_entry
from fuzz.replay import DOES_NOT, NOT_APPLICABLE, REPRODUCES, Replay
from fuzz.util import version_tuple
from support.programs import call, eqn, fn, program

PIP_OUTPUT = """WARNING: something
jax (0.10.2)
Available versions: 0.10.2, 0.10.1, 0.10.0, 0.9.2, 0.9.1, 0.9.0.1, 0.9.0, 0.8.3, 0.8.2, 0.8.1, 0.8.0, 0.7.2, 0.7.1, \
0.7.0, 0.6.2, 0.6.1, 0.6.0, 0.5.3, 0.5.2, 0.5.1, 0.5.0, 0.4.38, 0.4.37, 0.4.36, 0.4.35, 0.4.34, 0.4.33, 0.4.31, \
0.4.30, 0.4.29, 0.4.28, 0.4.27, 0.4.26, 0.4.25, 0.4.24, 0.3.25
"""
VERSIONS = B.parse_pip_versions(PIP_OUTPUT)


def test_release_list_from_pip():
    assert VERSIONS[0] == "0.4.26" and VERSIONS[-1] == "0.10.2"
    assert "0.9.0.1" not in VERSIONS and "0.4.25" not in VERSIONS and len(VERSIONS) == 32
    assert VERSIONS.index("0.10.0") > VERSIONS.index("0.9.2")  # numeric order, not text order
    assert B.select(VERSIONS, "0.10.0", "0.10.2") == ["0.10.0", "0.10.1", "0.10.2"]
    with pytest.raises(B.BisectError, match="X.Y.Z"):
        B.select(VERSIONS, "0.10", None)
    with pytest.raises(B.BisectError, match="widen"):
        B.select(VERSIONS, "0.11.0", None)
    with pytest.raises(B.BisectError, match="PyPI"):
        B.parse_pip_versions("ERROR: No matching distribution found for jax")


def test_bisect_lists_the_releases_every_python_can_have(monkeypatch):
    """Ranges run to the newest release: jax 0.11.0 on needs Python >= 3.12, which a bisect run from
    Python 3.11 makes its venvs with; post-releases (0.12.0.1) are not bisected."""
    import fuzz.provision

    monkeypatch.setattr(fuzz.provision, "releases", lambda timeout=None: ["0.12.1", "0.12.0.1", "0.12.0", "0.11.2",
                                                                         "0.10.2", "0.4.26", "0.4.25"])
    assert B.released_versions() == ["0.4.26", "0.10.2", "0.11.2", "0.12.0", "0.12.1"]
    monkeypatch.setattr(fuzz.provision, "releases", lambda timeout=None: None)
    with pytest.raises(B.BisectError, match="PyPI"):
        B.released_versions()


def fake(rule):
    """A verdict function from ``rule(version tuple) -> verdict`` that counts its calls."""
    calls = []

    def verdict_of(v):
        calls.append(v)
        return rule(tuple(int(x) for x in v.split(".")))

    return verdict_of, calls


def budget(n):
    return 2 + 2 * math.ceil(math.log2(n)) + 1


def test_introduced_bug():
    verdict_of, calls = fake(lambda v: REPRODUCES if v >= (0, 5, 1) else DOES_NOT)
    r = B.search(VERSIONS, verdict_of)
    assert (r["first_affected"], r["last_unaffected"], r["fixed_in"]) == ("0.5.1", "0.5.0", None)
    assert r["changes"] == [{"last": "0.5.0", "first": "0.5.1", "from": DOES_NOT, "to": REPRODUCES}]
    assert len(calls) == len(set(calls)) <= budget(len(VERSIONS))
    assert r["tested"]["0.4.26"] == {"verdict": DOES_NOT} and r["tested"]["0.10.2"] == {"verdict": REPRODUCES}
    assert "at most one change" in r["assumption"]


def test_fixed_bug():
    verdict_of, calls = fake(lambda v: REPRODUCES if v <= (0, 6, 2) else DOES_NOT)
    r = B.search(VERSIONS, verdict_of)
    assert (r["first_affected"], r["last_unaffected"]) == ("0.4.26", None)
    assert (r["fixed_in"], r["last_affected"]) == ("0.7.0", "0.6.2")
    assert len(calls) <= budget(len(VERSIONS))


def test_not_applicable_releases_are_neither_affected_nor_unaffected():
    def rule(v):
        if v < (0, 6, 1):
            return NOT_APPLICABLE  # e.g. jax.shard_map appeared in 0.6.1
        return DOES_NOT if v < (0, 8, 1) else REPRODUCES

    verdict_of, calls = fake(rule)
    r = B.search(VERSIONS, verdict_of)
    assert r["applicable"] == ["0.6.1", "0.10.2"]
    assert (r["first_affected"], r["last_unaffected"]) == ("0.8.1", "0.8.0")
    assert all(r["tested"][c["last"]] != NOT_APPLICABLE for c in r["changes"])
    assert len(calls) <= 2 * budget(len(VERSIONS))


def test_affected_since_the_first_applicable_release():
    verdict_of, _ = fake(lambda v: NOT_APPLICABLE if v < (0, 4, 31) else REPRODUCES)
    r = B.search(VERSIONS, verdict_of)
    assert r["applicable"][0] == "0.4.31" and r["first_affected"] == "0.4.31" and r["last_unaffected"] is None
    assert "oldest applicable release" in "\n".join(B.summary(r))


def test_not_applicable_in_the_middle_of_a_search():
    # 0.5.3 (a midpoint) cannot run the program: the search steps to a neighbour
    def rule(v):
        if v == (0, 5, 3):
            return NOT_APPLICABLE
        return REPRODUCES if v >= (0, 6, 0) else DOES_NOT

    verdict_of, _ = fake(rule)
    r = B.search(VERSIONS, verdict_of)
    assert (r["first_affected"], r["last_unaffected"]) == ("0.6.0", "0.5.2")
    assert r["changes"][0]["from"] == DOES_NOT


def test_fails_differently_is_not_affected():
    """Seen on internal-error-9e2d606aca01: another error on 0.6.1-0.9.2, its own from 0.10.2 (bisect
    had said "first affected 0.6.1"): the search finds where the finding itself begins."""
    seen = "internal-error: builtins.ValueError: x: another error"
    verdict_of, _ = fake(lambda v: REPRODUCES if v >= (0, 7, 0) else
                         {"verdict": B.FAILS_DIFFERENTLY, "seen": seen, "checked": "2026-12-07"})
    r = B.search(VERSIONS, verdict_of)
    assert (r["first_affected"], r["last_unaffected"], r["fixed_in"]) == ("0.7.0", "0.6.2", None)
    assert r["affected"] == [["0.7.0", "0.10.2"]]
    assert r["changes"] == [{"last": "0.6.2", "first": "0.7.0", "from": B.FAILS_DIFFERENTLY, "to": REPRODUCES}]
    assert r["fails_differently"] == [{"from": "0.4.26", "to": "0.6.2", "seen": seen}]
    assert r["tested"]["0.4.26"]["seen"] == seen
    assert "fails differently (not counted as affected) on 0.4.26 to 0.6.2: internal-error" in "\n".join(B.summary(r))
    # a finding that fails differently everywhere affects nothing
    r = B.search(VERSIONS, fake(lambda v: B.FAILS_DIFFERENTLY)[0])
    assert r["affected"] == [] and r["first_affected"] is None


def test_recorded_release_finds_a_bug_introduced_and_fixed_inside_the_range():
    verdict_of, _ = fake(lambda v: REPRODUCES if (0, 6, 0) <= v <= (0, 8, 2) else DOES_NOT)
    r = B.search(VERSIONS, verdict_of, anchors=["0.7.1"])
    assert (r["first_affected"], r["last_unaffected"]) == ("0.6.0", "0.5.3")
    assert (r["fixed_in"], r["last_affected"]) == ("0.8.3", "0.8.2")


def test_a_bug_fixed_then_back_is_open_with_two_affected_stretches():
    # 0.7.0 affected, 0.7.1-0.9.0 not, again from 0.9.1 (seen on a corpus entry): not "fixed in 0.7.1"
    verdict_of, _ = fake(lambda v: REPRODUCES if v == (0, 7, 0) or v >= (0, 9, 1) else
                         NOT_APPLICABLE if v < (0, 7, 0) else DOES_NOT)
    r = B.search(VERSIONS, verdict_of)
    assert r["affected"] == [["0.7.0", "0.7.0"], ["0.9.1", "0.10.2"]]
    assert r["first_affected"] == "0.7.0" and r["last_unaffected"] is None
    assert r["fixed_in"] is None and r["last_affected"] is None
    assert "affected: 0.7.0; 0.9.1 to 0.10.2" in "\n".join(B.summary(r))


def test_affected_stretches_of_one_change_and_of_none():
    r = B.search(VERSIONS, fake(lambda v: REPRODUCES if v <= (0, 6, 2) else DOES_NOT)[0])
    assert r["affected"] == [["0.4.26", "0.6.2"]] and r["fixed_in"] == "0.7.0"
    r = B.search(VERSIONS, fake(lambda v: DOES_NOT)[0])
    assert r["affected"] == [] and r["first_affected"] is None and r["fixed_in"] is None
    assert "no tested release shows the finding" in B.summary(r)


def test_an_issue_text_says_which_releases_are_affected():
    from fuzz.export import _releases_text

    r = B.search(VERSIONS, fake(lambda v: REPRODUCES if v == (0, 7, 0) or v >= (0, 9, 1) else
                                NOT_APPLICABLE if v < (0, 7, 0) else DOES_NOT)[0])
    old = {k: v for k, v in r.items() if k != "affected"}  # an entry bisected before the field existed
    old["fixed_in"] = "0.7.1"
    for rec in (r, old):
        text = _releases_text(rec)
        assert "affected releases: 0.7.0; 0.9.1 to 0.10.2" in text and "fixed in" not in text, text
        assert "affected again from 0.9.1 (a regression; last unaffected 0.9.0)" in text, text
    # untrusted records: never a raise, never their text in the issue
    assert "malformed" in _releases_text({"tested": {"0.4.26": "x"}, "changes": "not a list"})
    hostile = {**r, "tested": {**r["tested"], "0.10.2\n\n## Fixed in 0.11 <img src=x>": REPRODUCES}}
    assert "malformed" in _releases_text(hostile) and "img" not in _releases_text(hostile)
    forged = {**r, "applicable": ["0.7.0", "0.10.2\n\n## Fixed in 0.11 <img src=x>"]}  # (derived: recomputed)
    assert "img" not in _releases_text(forged)
    odd = {**r, "tested": {**r["tested"], "0.4.26": "<script>"}}
    assert "<script>" not in _releases_text(odd)


def test_conclusions_come_from_the_tested_verdicts_alone():
    """Hand-edited derived fields (changes, applicable) are ignored; fails differently is not affected;
    string verdicts (the form before verdict records) and records mix."""
    tested = {"0.9.0": REPRODUCES, "0.6.0": {"verdict": REPRODUCES}, "0.7.0": B.FAILS_DIFFERENTLY,
              "0.8.0": {"verdict": DOES_NOT, "checked": "2026-12-07"}, "0.5.0": NOT_APPLICABLE}
    forged = [{"last": "0.5.0", "first": "0.5.1", "from": DOES_NOT, "to": REPRODUCES}]
    r = B.conclusions({"applicable": ["0.1.0", "0.9.9"], "tested": tested, "changes": forged})
    assert r["affected"] == [["0.6.0", "0.6.0"], ["0.9.0", "0.9.0"]] and r["fixed_in"] is None
    assert r["applicable"] == ["0.6.0", "0.9.0"] and r["range"] == ["0.5.0", "0.9.0"]
    assert [(c["last"], c["first"]) for c in r["changes"]] == [("0.6.0", "0.7.0"), ("0.7.0", "0.8.0"),
                                                              ("0.8.0", "0.9.0")]
    assert r["not_applicable"] == [{"from": "0.5.0", "to": "0.5.0", "why": ""}]
    with pytest.raises(ValueError):
        B.conclusions({"tested": {**tested, "0.9": REPRODUCES}})
    with pytest.raises(ValueError):
        B.conclusions({"tested": {"0.9.1": "affected"}})


def test_nothing_applicable_is_an_error():
    verdict_of, _ = fake(lambda v: NOT_APPLICABLE)
    with pytest.raises(B.BisectError, match="not applicable on any tested release"):
        B.search(VERSIONS, verdict_of)


def test_classify_replays():
    entry = {"oracle": "internal-error"}
    mk = lambda verdict, why="": Replay("p", "s", "open", verdict, False, why)  # noqa: E731
    assert B.classify(entry, mk(REPRODUCES)) == REPRODUCES
    assert B.classify(entry, mk(NOT_APPLICABLE, "no partial-manual shard_map")) == NOT_APPLICABLE
    assert B.classify(entry, mk(DOES_NOT, "no finding")) == DOES_NOT
    assert B.classify(entry, mk(DOES_NOT, "differential: wrong-value: f; internal-error: builtins.ValueError: x")) \
        == B.FAILS_DIFFERENTLY
    # another finding of any oracle is another failure (the program did not run clean)
    assert B.classify(entry, mk(DOES_NOT, "differential: wrong-value: f")) == B.FAILS_DIFFERENTLY
    assert B.classify(entry, mk(B.FAILS_DIFFERENTLY, "crash: SIGABRT: x")) == B.FAILS_DIFFERENTLY


# -- the command, with fake replays --------------------------------------------------------

def entry_file(tmp_path, jax_version="0.10.2"):
    p = program(mesh=(("x", 2),), inputs=[("x0", (2,), 1)], functions={"f0": fn(["a"], [eqn("sin", ["a"], ["v"])],
                                                                                   ["v"])},
                calls=[call("f0", [], ["x0"])])
    finding = {"signature": "internal-error: builtins.ValueError: ?: boom", "oracle": "internal-error",
               "kind": "builtins.ValueError", "message": "boom", "call": 0}
    entry = make_entry(finding, p, {"jax_version": jax_version, "jaxlib_version": jax_version})
    return write_entry(tmp_path / "internal-error-x.json", entry)


def test_bisect_command_writes_releases_into_the_entry(tmp_path, monkeypatch):
    path = entry_file(tmp_path)
    monkeypatch.setattr(B, "released_versions", lambda: VERSIONS)
    monkeypatch.setattr(B, "verdict_on",
                        lambda entry, v, log=None: REPRODUCES if version_tuple(v) >= (0, 10, 0) else DOES_NOT)
    r = CliRunner().invoke(B.bisect, [str(path), "--from", "0.9.0", "--to", "0.10.2"])
    assert r.exit_code == 0, r.output
    rel = load_entry(path)["releases"]
    assert (rel["first_affected"], rel["last_unaffected"]) == ("0.10.0", "0.9.2")
    assert rel["range"] == ["0.9.0", "0.10.2"] and "0.10.2" in rel["tested"]
    assert "first affected 0.10.0, last unaffected 0.9.2" in r.output


def test_bisect_command_keeps_the_verdicts_recorded_before(tmp_path, monkeypatch):
    path = entry_file(tmp_path)
    entry = load_entry(path)
    entry["releases"] = {"tested": {"0.4.26": NOT_APPLICABLE, "0.10.2": REPRODUCES}}
    write_entry(path, entry)
    monkeypatch.setattr(B, "released_versions", lambda: VERSIONS)
    monkeypatch.setattr(B, "verdict_on", lambda entry, v, log=None: {"verdict": REPRODUCES, "checked": "2026-12-07"})
    r = CliRunner().invoke(B.bisect, [str(path), "--from", "0.10.0"])
    assert r.exit_code == 0, r.output
    rel = load_entry(path)["releases"]
    assert rel["tested"]["0.4.26"] == {"verdict": NOT_APPLICABLE}  # outside --from: kept
    assert rel["tested"]["0.10.0"]["checked"] == "2026-12-07" and rel["affected"] == [["0.10.0", "0.10.2"]]


def test_bisect_command_leaves_a_stale_entry_unchanged(tmp_path, monkeypatch):
    path = entry_file(tmp_path)
    before = path.read_text()
    monkeypatch.setattr(B, "released_versions", lambda: VERSIONS)
    monkeypatch.setattr(B, "verdict_on", lambda entry, v, log=None: DOES_NOT)
    r = CliRunner().invoke(B.bisect, [str(path), "--from", "0.10.0"])
    assert r.exit_code == 2
    assert "does not reproduce on jax 0.10.2, the release it was recorded on" in r.output
    assert path.read_text() == before


def test_bisect_command_reports_a_release_that_cannot_be_installed(tmp_path, monkeypatch):
    path = entry_file(tmp_path, jax_version="0.4.30")
    before = path.read_text()
    monkeypatch.setattr(B, "released_versions", lambda: VERSIONS)

    def verdict_on(entry, v, log=None):
        raise B.BisectError(f"cannot install JAX {v} (no wheel); check the version exists: pip index versions jax")

    monkeypatch.setattr(B, "verdict_on", verdict_on)
    r = CliRunner().invoke(B.bisect, [str(path), "--from", "0.10.0"])
    assert r.exit_code == 2 and "cannot install JAX 0.10.0" in r.output
    assert path.read_text() == before
    r = CliRunner().invoke(B.bisect, [str(tmp_path / "nope.json")])
    assert r.exit_code == 2 and "cannot read" in r.output
    json.loads(path.read_text())


def test_a_program_that_fails_on_both_ends_but_runs_in_the_middle_is_not_called_affected_throughout():
    """Two bugs with one face (measured: a spmd vmap of a shard_map closing over a constant fails on
    0.4.26-0.4.35 and 0.8.0-0.10.2, runs on 0.4.36-0.7.2): the newest release of each minor series is tested."""
    verdict_of, calls = fake(lambda v: DOES_NOT if (0, 4, 36) <= v < (0, 8, 0) else REPRODUCES)
    r = B.search(VERSIONS, verdict_of)
    # open on the newest release: not "fixed in 0.4.36"
    assert (r["first_affected"], r["fixed_in"], r["last_affected"]) == ("0.4.26", None, None)
    assert r["affected"] == [["0.4.26", "0.4.35"], ["0.8.0", "0.10.2"]]
    assert [(c["last"], c["first"]) for c in r["changes"]] == [("0.4.35", "0.4.36"), ("0.7.2", "0.8.0")]
    assert {"0.5.3", "0.6.2", "0.7.2", "0.8.3", "0.9.2"} <= set(r["tested"])
    assert "minor series" in r["assumption"]
