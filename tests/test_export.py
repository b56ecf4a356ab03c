"""``shardfuzz export``: repro.py and ISSUE.md, written only once the repro shows the finding again.

The findings are real ones of jax 0.10.2 (an internal error and a wrong shape), found
by running the hand-built programs through fuzz.runner.Runner as a campaign would.
"""
import json
import os

import pytest
from click.testing import CliRunner

from fuzz.export import export, installed_jax_version
from fuzz.program import make_entry, write_entry
from support.programs import JIT, call, eqn, fn, program, vmap

pytestmark = pytest.mark.skipif(installed_jax_version() != "0.10.2", reason="the findings here are jax 0.10.2's")


def sdy_program(transforms):
    """Eager io_callback with a result on a committed input: TypeError 'Cannot convert GSPMDSharding' (jax 0.10.2)."""
    body = fn(["a1"], [eqn("io_callback", ["a1"], ["v1"], tag="cb1", ordered=False, returns=True,
                           stop_gradient=False), eqn("sin", ["v1"], ["v2"])], ["v2"])
    p = program(mesh=(("x", 1), ("y", 2)), inputs=[("x0", (1, 1, 1), 0)], functions={"f0": body},
                calls=[call("f0", transforms, ["x0"])])
    p["inputs"][0]["spec"] = [None, None, None]
    return p


def all_to_all_program():
    """vmap of all_to_all on a closed-over operand: shape (1, 2, 1, 2, 1) instead of (1, 2, 1) (jax 0.10.2)."""
    body = fn(["a"], [eqn("all_to_all", ["x0"], ["v1"], axes=["i"], split_axis=1, concat_axis=1)], ["v1"])
    return program(mesh=(("x", 1),), inputs=[("x0", (2, 1), 1), ("x1", (1,), 2)], functions={"f0": body},
                   calls=[call("f0", [vmap([0], [0], axis_name="i")], ["x1"])])


def fold_program():
    """jit of dynamic_slice(dynamic_slice(x, j, 4), i, 1) with j = 0, i = 5 traced: x[5] for x[3] (jax 0.10.2),
    XLA's AlgebraicSimplifier folding the two slices without the inner clamp (openxla/xla#49121)."""
    body = fn(["a", "j", "i"], [eqn("dynamic_slice", ["a", "j"], ["v1"], axis=0, size=4),
                                eqn("dynamic_slice", ["v1", "i"], ["v2"], axis=0, size=1)], ["v2"])
    p = program(mesh=(("x", 1),), inputs=[("x0", (8,), 3)], functions={"f0": body},
                calls=[call("f0", [JIT], ["x0", "x1", "x2"])])
    p["inputs"] += [{"name": "x1", "shape": [], "dtype": "int32", "spec": None, "seed": 60},  # 0
                    {"name": "x2", "shape": [], "dtype": "int32", "spec": None, "seed": 24}]  # 5
    return p


@pytest.fixture(scope="module")
def found():
    """{name: (program, finding dict, caps)} for the three real findings."""
    from fuzz.runner import Runner

    runner = Runner(determinism=False)
    out = {}
    try:
        for name, p in (("sdy", sdy_program([])), ("all_to_all", all_to_all_program()), ("fold", fold_program())):
            fs, _ = runner.run(p)
            assert len(fs) == 1, [f.signature for f in fs]
            f = fs[0]
            out[name] = (p, {"signature": f.signature, "oracle": f.oracle, "kind": f.kind, "message": f.message,
                             "call": f.call}, dict(runner.caps))
    finally:
        runner.close()
    return out


def invoke(args):
    return CliRunner().invoke(export, [str(a) for a in args])


def test_export_of_an_entry_writes_a_verified_repro_and_issue(found, tmp_path):
    p, finding, caps = found["sdy"]
    entry = make_entry(finding, p, caps)
    entry["releases"] = {"first_affected": "0.10.0", "last_unaffected": "0.9.2", "applicable": ["0.9.2", "0.10.0"],
                         "tested": {"0.9.2": "does not reproduce", "0.10.0": "reproduces"},
                         "changes": [{"last": "0.9.2", "first": "0.10.0", "from": "does not reproduce",
                                      "to": "reproduces"}]}
    entry["upstream"] = ["https://github.com/jax-ml/jax/issues/1"]
    path = write_entry(tmp_path / "internal-error-sdy.json", entry)
    out = tmp_path / "out"
    r = invoke([path, "--out", out])
    assert r.exit_code == 0, r.output
    repro, issue = (out / "repro.py").read_text(), (out / "ISSUE.md").read_text()
    assert "> Already reported: https://github.com/jax-ml/jax/issues/1." in issue.splitlines()[2]
    assert "already reported upstream: https://github.com/jax-ml/jax/issues/1" in r.output
    assert "io_callback(lambda x: x" in repro and "CALLBACK_LOG" not in repro
    lines = issue.splitlines()
    assert lines[0].startswith("# eager io_callback raises TypeError")
    for part in ("### Description", "Cannot convert GSPMDSharding", "**Expected:** the call runs without error",
                 "https://docs.jax.dev/en/latest/_autosummary/jax.experimental.io_callback.html",
                 "```python\n" + repro.rstrip() + "\n```", "TypeError: Cannot convert GSPMDSharding {maximal device=0}",
                 "(exit status 1)", "- first affected release: 0.10.0", "- last unaffected release: 0.9.2",
                 "### System info", "jaxlib: 0.10.2"):
        assert part in issue, part


def test_export_refuses_an_entry_that_no_longer_reproduces(found, tmp_path):
    p, finding, caps = found["sdy"]
    entry = make_entry(finding, sdy_program([JIT]), caps)  # under jit the program runs fine
    path = write_entry(tmp_path / "internal-error-sdy.json", entry)
    out = tmp_path / "out"
    r = invoke([path, "--out", out])
    assert r.exit_code == 2
    assert "does not show the finding" in r.output and "exited with status 0" in r.output
    assert not out.exists()


def report_with(findings, jax_version="0.10.2"):
    return {"jax_version": jax_version, "jaxlib_version": jax_version, "findings": findings}


def test_export_of_a_report_finding_with_wrong_shape_shows_both_arrays(found, tmp_path):
    p, finding, caps = found["all_to_all"]
    marker = tmp_path / "source-ran"
    hostile = f"open({str(marker)!r}, 'w').close()"  # the report's source must never run
    report = tmp_path / "report.json"
    report.write_text(json.dumps(report_with([{**finding, "program": p, "source": hostile}])))
    out = tmp_path / "out"
    r = invoke([report, "--finding", 1, "--out", out])
    assert r.exit_code == 0, r.output
    issue = (out / "ISSUE.md").read_text()
    assert issue.startswith("# jax.vmap of lax.all_to_all returns an output of the wrong shape\n")
    assert "shape (1, 2, 1, 2, 1), expected (1, 2, 1)" in issue  # the assertion, in the observed output
    assert "expected\n[[[" in issue  # the expected array, as printed
    assert "https://docs.jax.dev/en/latest/_autosummary/jax.vmap.html" in issue
    assert "Already reported" not in issue  # (no upstream record)
    assert not marker.exists()


@pytest.mark.parametrize("args, message", [
    (["--finding", 2], "has 1 findings; --finding 2 is out of range"),
    ([], "pass --finding N"),
])
def test_export_report_finding_index(found, tmp_path, args, message):
    p, finding, _ = found["all_to_all"]
    report = tmp_path / "report.json"
    report.write_text(json.dumps(report_with([{**finding, "program": p}])))
    r = invoke([report, *args, "--out", tmp_path / "out"])
    assert r.exit_code == 2 and message in r.output and len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_export_of_a_report_without_findings_says_so(tmp_path):
    report = tmp_path / "report.json"
    report.write_text(json.dumps(report_with([])))
    r = invoke([report, "--out", tmp_path / "out"])
    assert r.exit_code == 2 and "a report without findings: nothing to export" in r.output, r.output
    assert not (tmp_path / "out").exists()


def test_export_refuses_an_invalid_report_program(found, tmp_path):
    p, finding, _ = found["all_to_all"]
    bad = json.loads(json.dumps(p))
    bad["functions"]["f0"]["eqns"][0]["op"] = "__import__"
    report = tmp_path / "report.json"
    report.write_text(json.dumps(report_with([{**finding, "program": bad}])))
    r = invoke([report, "--finding", 1, "--out", tmp_path / "out"])
    assert r.exit_code == 2 and "invalid program" in r.output
    assert not (tmp_path / "out").exists()


def test_export_needs_the_recorded_jax(found, tmp_path):
    p, finding, caps = found["sdy"]
    entry = make_entry(finding, p, {**caps, "jax_version": "0.4.30"})
    path = write_entry(tmp_path / "e.json", entry)
    r = invoke([path, "--out", tmp_path / "out"])
    assert r.exit_code == 2 and "pass --jax-version 0.4.30 or --python PATH" in r.output
    r = invoke([path, "--jax-version", "0.4", "--out", tmp_path / "out"])
    assert r.exit_code == 2 and "not of the form X.Y.Z" in r.output
    assert not (tmp_path / "out").exists()


def test_export_refuses_what_is_not_an_entry_or_report(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    r = invoke([path])
    assert r.exit_code == 2 and "neither a corpus entry nor a report" in r.output
    r = invoke([tmp_path / "missing.json"])
    assert r.exit_code == 2 and "cannot read" in r.output
    assert not os.path.exists("export/x")


def test_export_finds_the_call_of_an_entry_saved_without_one(found, tmp_path):
    # corpus entries saved before findings carried their call: the failing call is the second one
    p, finding, caps = found["sdy"]
    two = sdy_program([JIT])
    two["calls"].append(call("f0", [], ["x0"]))
    entry = make_entry({**finding, "call": None}, two, caps)
    assert "call" not in entry
    path = write_entry(tmp_path / "e.json", entry)
    r = invoke([path, "--out", tmp_path / "out"])
    assert r.exit_code == 0, r.output
    repro = (tmp_path / "out" / "repro.py").read_text()
    assert "run_earlier('call 0: jit(f0)'" in repro and "# call 1: f0 raises" in repro


def test_untrusted_text_cannot_close_a_code_block(found, tmp_path):
    from fuzz.export import _fenced

    text = _fenced("boom ```\n[click](http://x) ````")
    fence = text.splitlines()[0]
    assert fence == "`````" and text.endswith("\n`````") and text.count(fence) == 2


@pytest.mark.slow  # (one JAX run per changed XLA pass, 30 s: the default run stays under CI's 10 minutes)
def test_xla_passes_names_the_pass_without_which_a_wrong_value_goes(found, tmp_path):
    """--xla-passes: the nested dynamic-slice fold clears with algsimp off; the all_to_all batching
    bug (JAX's own) clears with no pass off."""
    p, finding, caps = found["fold"]
    path = write_entry(tmp_path / "differential-fold.json", make_entry(finding, p, caps))
    r = invoke([path, "--out", tmp_path / "fold", "--xla-passes"])
    assert r.exit_code == 0, r.output
    issue = (tmp_path / "fold" / "ISSUE.md").read_text()
    line = issue.split("XLA passes (`shardfuzz export --xla-passes`):\n\n", 1)[1].splitlines()[0]
    assert line.startswith("The finding needs each of these XLA passes") and "`algsimp`" in line, line
    p, finding, caps = found["all_to_all"]
    path = write_entry(tmp_path / "differential-a2a.json", make_entry(finding, p, caps))
    r = invoke([path, "--out", tmp_path / "a2a", "--xla-passes"])
    assert r.exit_code == 0, r.output
    issue = (tmp_path / "a2a" / "ISSUE.md").read_text()
    assert "Switching off any one of the" in issue and "leaves the finding" in issue
    assert "the finding stays (or the program fails otherwise): it is not specific to Shardy" in issue  # JAX's own
    r = invoke([path, "--out", tmp_path / "plain"])
    assert "XLA passes" not in (tmp_path / "plain" / "ISSUE.md").read_text()  # only when asked for


def test_xla_passes_text_says_what_each_outcome_means():
    from fuzz.export import _passes_text

    assert _passes_text(None) == []
    assert "before XLA optimizes anything" in _passes_text(([], []))[2]
    alone = _passes_text((["algsimp", "dce"], ["algsimp"]))[2]
    assert "`algsimp`" in alone and "`dce`" not in alone and "partitioner itself" not in alone
    assert "partitioner itself" in _passes_text((["shardy-xla", "dce"], ["shardy-xla"]))[2]
    assert "leaves the finding" in _passes_text((["dce"], []))[2]
    shardy = _passes_text((["dce"], []), ("Shardy", "GSPMD", True))
    assert "in JAX" not in shardy[2] and "see the partitioner below" in shardy[2]
    assert "`JAX_USE_SHARDY_PARTITIONER=false`) the finding disappears: Shardy's" in shardy[4]
    gspmd = _passes_text((["dce"], []), ("GSPMD", "Shardy", False))
    assert "in JAX" in gspmd[2] and "`JAX_USE_SHARDY_PARTITIONER=true`) the finding stays" in gspmd[4]
    # (a release without the flag: no partitioner line)
    assert not any("SPMD partitioner" in line for line in _passes_text((["dce"], []), None))


def test_xla_passes_refuses_a_hang_before_running_anything(found, tmp_path):
    p, finding, caps = found["all_to_all"]
    report = tmp_path / "r.json"
    report.write_text(json.dumps(report_with([{**finding, "oracle": "hang", "kind": "timeout", "program": p}])))
    r = invoke([report, "--finding", 1, "--out", tmp_path / "out", "--xla-passes"])
    assert r.exit_code == 2 and "--xla-passes needs a finding that shows when the program runs" in r.output
    assert "running repro.py" not in r.output and not (tmp_path / "out").exists()


def test_the_other_partitioner_clears_a_shardy_bug_only(tmp_path):
    """corpus/differential-cb0b3b1097ca.json (a 1-D conv over 1-element shards, doubled under jit on
    jax 0.10.2) is right with GSPMD (the all_to_all batching bug, JAX's own, is not: the test above)."""
    import sys
    from pathlib import Path

    from fuzz.export import other_partitioner

    entry = Path(__file__).resolve().parent.parent / "corpus" / "differential-cb0b3b1097ca.json"
    r = invoke([entry, "--python", sys.executable, "--out", tmp_path / "conv"])  # (jax 0.10.2, where it shows)
    assert r.exit_code == 0, r.output
    conv = (tmp_path / "conv" / "repro.py").read_text()
    assert other_partitioner(conv, sys.executable, 120, True) == ("Shardy", "GSPMD", True)
    assert other_partitioner(conv, sys.executable, 120, None) is None  # (a release without the flag)


def test_a_memory_finding_repro_ends_once_its_memory_passes_the_recorded_limit(found, tmp_path):
    """The repro of a crash of kind memory (fuzz.repro's watch_memory): it exits 1 with its
    "Memory:" line once the process passes the recorded GiB, and export's judge takes only that."""
    import sys

    from fuzz.export import Case, judge_run, run_repro
    from fuzz.repro import render_repro

    p, _, caps = found["fold"]
    for gib, shows in ((0.05, True), (64.0, False)):  # (importing JAX alone takes more than 0.05 GiB)
        finding = {"oracle": "crash", "kind": "memory", "message": f"resident memory passed {gib} GiB in x:y",
                   "call": None}
        source = render_repro(p, caps, finding)
        assert f"watch_memory({gib})" in source
        run = run_repro(source, sys.executable, timeout=120)
        case = Case("m", "crash", "memory", finding["message"], "crash: memory: in x:y", None, p, [], "0.10.2")
        assert (run.returncode == 1 and "Memory: resident" in run.stderr) == shows, (run.returncode, run.stderr[-500:])
        assert (judge_run(case, run) == "") == shows


def test_a_donated_argument_is_copied_outside_the_mesh_as_the_worker_copies_it(tmp_path):
    """On an Explicit mesh a repro's calls run under jax.set_mesh; a copy of a donated argument
    made there is committed to the mesh (replicated), unlike the worker's, which hid this real
    wrong value (jax 0.10.2: two cumulative ops of one input under jit, one resharded along the
    scanned dim, differential-261ffe16318b) from its export: the repro exited 0."""
    from fuzz.runner import Runner

    body = fn(["a1", "a2"], [eqn("cummax", ["a1"], ["v1"], axis=1, reverse=False),
                             eqn("reshard_split", ["v1"], ["v2"], axes=["y"], dim=1),
                             eqn("cumprod", ["a1"], ["v3"], axis=1)], ["v3", "v2"])
    p = program(mesh=(("y", 2),), inputs=[("x0", (1, 2), 0)], functions={"f0": body}, axis_type="explicit",
                calls=[call("f0", [{"kind": "jit", "donate_argnums": [0, 1]}], ["x0", "x1"])])
    p["inputs"].append({"name": "x1", "shape": [], "dtype": "int32", "spec": None, "seed": 0})
    runner = Runner(determinism=False)
    try:
        fs, _ = runner.run(p)
        caps = dict(runner.caps)
    finally:
        runner.close()
    assert [f.oracle for f in fs] == ["differential"], [f.signature for f in fs]
    f = fs[0]
    entry = make_entry({"signature": f.signature, "oracle": f.oracle, "kind": f.kind, "message": f.message,
                        "call": f.call}, p, caps)
    path = write_entry(tmp_path / "entry.json", entry)
    result = invoke([path, "--out", tmp_path / "out"])
    assert result.exit_code == 0, result.output
    source = (tmp_path / "out" / "repro.py").read_text()
    assert source.index("donated = {0: (jnp.copy(x0), jnp.copy(x1),)}") < source.index("with jax.set_mesh(mesh)")


def test_the_finders_install_path_stays_out_of_the_repro_and_the_issue():
    """A message that names a JAX file by absolute path (internal-error-d588cacc9fcc's "function
    <lambda> at /.../site-packages/jax/_src/lax/control_flow/loops.py:2735") is shown from
    site-packages on in the repro's header, the issue's title and its description."""
    from fuzz.export import Case, Run, issue_text, title
    from fuzz.render import NEWEST_CAPS
    from fuzz.repro import render_repro

    p = fold_program()
    message = ("function <lambda> at /home/someone/private/.venv/lib/python3.11/site-packages/jax/_src/lax/"
               "control_flow/loops.py:2735 traced for scan returned a mutable array reference")
    finding = {"oracle": "internal-error", "kind": "builtins.ValueError", "message": message, "call": 0}
    source = render_repro(p, dict(NEWEST_CAPS, jax_version="0.10.2"), finding)
    case = Case("e", "internal-error", "builtins.ValueError", message, "internal-error: x", 0, p, [], "0.10.2")
    run = Run(returncode=1, stdout="", stderr="", error=None, seconds=0.0)
    texts = {"repro": source.splitlines()[1], "title": title(case), "issue": issue_text(case, "", run, "", "0.10.2")}
    for name, text in texts.items():
        assert "/home/someone" not in text, name
        assert ".../site-packages/jax/_src/lax/" in text or name == "title", name  # (a title quotes less)
