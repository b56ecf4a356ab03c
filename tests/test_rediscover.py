"""benchmarks/rediscover.py: the matchers of the public reports judge the failing calls only."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import rediscover  # noqa: E402
from oracles.common import Finding, value_signature  # noqa: E402

from support.programs import eqn, fn, program  # noqa: E402


def _wrong(program_, calls):
    return Finding("differential", "wrong-value", "x", call=calls[0],
                   signature=value_signature("differential", "wrong-value", program_, calls))


def test_value_matchers_look_at_the_failing_calls_only():
    """jax-21403 needs a cumulative op under jit in the calls that gave the wrong value: a
    cumprod in another call of the program does not count, and neither does another oracle."""
    cum = fn(["a"], [eqn("cumprod", ["a"], ["b"], axis=0)], ["b"])
    plain = fn(["a"], [eqn("sin", ["a"], ["b"])], ["b"])
    p = program(inputs=[("x", (8, 4), 1)], functions={"f": cum, "g": plain},
                calls=[{"function": f, "transforms": [{"kind": "jit"}], "args": ["x"]} for f in ("f", "g")])
    match = rediscover.KINDS["jax-21403"]
    assert match(_wrong(p, [0]), p)
    assert not match(_wrong(p, [1]), p)
    raised = Finding("internal-error", "TypeError", "x")
    assert not match(raised, p)
    assert rediscover.KINDS["jax-18434"](_wrong(p, [0]), p) is False


def test_jax_29832_needs_the_reports_message():
    """An internal error of a program with jacrev and shard_map matches only with the report's message."""
    body = fn(["a"], [eqn("sin", ["a"], ["b"])], ["b"])
    p = program(mesh=(("x", 4),), inputs=[("x", (8,), 1)], functions={"f": body},
                calls=[{"function": "f", "args": ["x"], "transforms": [
                    {"kind": "shard_map", "in_specs": [[["x"]]], "out_specs": [[["x"], None]], "check_vma": True,
                     "axis_names": None}, {"kind": "jacrev", "argnums": [0]}]}])
    match = rediscover.KINDS["jax-29832"]
    report = ("unexpected JAX type (e.g. shape/dtype) for argument to vjp function: got float32[2], but expected "
              "float32[2]{V:x}")
    assert match(Finding("internal-error", "builtins.ValueError", report), p)
    assert not match(Finding("internal-error", "builtins.NotImplementedError",
                             "Eager evaluation of `closed_call` inside a `shard_map` isn't yet supported."), p)


def test_jax_18434_needs_two_chained_updates_of_both_index_kinds():
    """A single .at[].set under jit (the sharding-constrained constant of differential-b909f86363df)
    is another bug; the report chains a slice-index update and an integer-index one."""
    def prog(second_index):
        eqns = [eqn("at_set", ["a", "c"], ["b"], index=[0, 2])]
        if second_index is not None:
            eqns.append(eqn("at_set", ["b", "c"], ["d"], index=second_index))
        body = fn(["a", "c"], eqns, [eqns[-1]["outs"][0]])
        return program(inputs=[("x", (8, 4), 1), ("y", (), 2)], functions={"f": body},
                       calls=[{"function": "f", "transforms": [{"kind": "jit"}], "args": ["x", "y"]}])
    match = rediscover.KINDS["jax-18434"]
    both = prog(3)
    assert match(_wrong(both, [0]), both)
    for other in (prog(None), prog([1, 3])):  # one update; two with slice indices
        assert not match(_wrong(other, [0]), other)
    # the chain in another call's function, which gave the right value, does not count
    mixed = prog(None)
    mixed["functions"]["g"] = both["functions"]["f"]
    mixed["calls"].append({"function": "g", "transforms": [{"kind": "jit"}], "args": ["x", "y"]})
    assert not match(_wrong(mixed, [0]), mixed) and match(_wrong(mixed, [1]), mixed)
    # a nested function updating the outer update's result (read by capture) is a chain too
    inner = fn(["e"], [eqn("at_set", ["b", "e"], ["g"], index=3)], ["g"])
    outer = fn(["a", "c"], [eqn("at_set", ["a", "c"], ["b"], index=[0, 2]),
                            eqn("call", ["c"], ["h"], transforms=[{"kind": "jit"}], fn=inner)], ["h"])
    nested = program(inputs=[("x", (8, 4), 1), ("y", (), 2)], functions={"f": outer},
                     calls=[{"function": "f", "transforms": [{"kind": "jit"}], "args": ["x", "y"]}])
    assert match(_wrong(nested, [0]), nested)


def test_seed_b_needs_a_reverse_mode_derivative_through_a_shard_map():
    """Seed B is a cross-process lowering difference of a program with a shard_map under any
    reverse-mode API (grad, value_and_grad, vjp, jacrev); forward mode or another oracle is not it."""
    body = fn(["a"], [eqn("sin", ["a"], ["b"])], ["b"])
    sm = {"kind": "shard_map", "in_specs": [[["x"]]], "out_specs": [[["x"]]], "check_vma": True, "axis_names": None}
    lowering = Finding("determinism", "cross-process", "x")
    for kind, want in (("vjp", True), ("jvp", False)):
        p = program(mesh=(("x", 4),), inputs=[("x", (8,), 1)], functions={"f": body},
                    calls=[{"function": "f", "args": ["x"], "transforms": [{"kind": kind, "seed": 0}, sm]}])
        assert rediscover.KINDS["B"](lowering, p) is want, kind
        assert not rediscover.KINDS["B"](Finding("determinism", "within-process", "x"), p)


def test_jax_34211_needs_the_reports_site_in_the_failing_call():
    """A custom_vjp under grad of a shard_map on an Explicit mesh, raising at the report's site,
    matches; the same error from a call without the shard_map (another call has it) does not,
    and neither does another error of the same call."""
    sm = {"kind": "shard_map", "in_specs": [[["x"]]], "out_specs": [[["x"]]], "check_vma": False,
          "axis_names": None}
    body = fn(["a"], [eqn("custom_vjp", ["a"], ["b"], primal="sin", rule="none")], ["b"])
    plain = fn(["a"], [eqn("custom_vjp", ["a"], ["b"], primal="sin", rule="none"), eqn("sum", ["b"], ["c"], axis=None)],
               ["c"])
    p = program(mesh=(("x", 2),), inputs=[("x", (8,), 1)], functions={"f": body, "g": plain},
                axis_type="explicit",
                calls=[{"function": "f", "args": ["x"], "transforms": [{"kind": "vjp", "seed": 0}, sm]},
                       {"function": "g", "args": ["x"], "transforms": [{"kind": "grad", "argnums": [0]}]}])
    site = "internal-error: builtins.AssertionError: jax._src.op_shardings:get_num_ways_dim_sharded: "
    match = rediscover.KINDS["jax-34211"]
    assert match(Finding("internal-error", "builtins.AssertionError", "", call=0, signature=site), p)
    assert not match(Finding("internal-error", "builtins.AssertionError", "", call=1, signature=site), p)
    assert not match(Finding("internal-error", "builtins.TypeError", "Cannot convert GSPMDSharding", call=0), p)


def test_jax_25699_needs_an_axis_index_over_a_size_one_manual_axis():
    """The report's abort with an axis_index over a size-1 axis of a partial-manual shard_map;
    over a size-2 axis, another IsManual check, or the same abort in a program without axis_index,
    is something else."""
    check = "Check failed: hlo->sharding().IsManual() || hlo->sharding().IsManualSubgroup()"
    for sizes, want in (((1, 2), True), ((2, 2), False)):
        body = fn(["a"], [eqn("axis_index", ["a"], ["b"], axes=["i"])], ["b"])
        sm = {"kind": "shard_map", "in_specs": [[["i"]]], "out_specs": [[["i"]]], "check_vma": False,
              "axis_names": ["i"]}
        p = program(mesh=(("i", sizes[0]), ("j", sizes[1])), inputs=[("x", (4,), 1)], functions={"f": body},
                    calls=[{"function": "f", "args": ["x"], "transforms": [{"kind": "jit"}, sm]}])
        assert rediscover.KINDS["jax-25699"](Finding("crash", "SIGABRT", check), p) is want, sizes
        assert not rediscover.KINDS["jax-25699"](Finding("crash", "SIGABRT", "Check failed: other"), p)
        # the signature's elided form of the report's check matches; XLA's other IsManual check does not
        elided = "Check failed: hlo->sharding(…).IsManual(…) || hlo->sharding(…).IsManualSubgroup(…)"
        assert rediscover.KINDS["jax-25699"](Finding("crash", "SIGABRT", elided), p) is want, sizes
        other = "Check failed: target.IsManualSubgroup() == sharding().IsManualSubgroup() (0 vs. 1)"
        assert not rediscover.KINDS["jax-25699"](Finding("crash", "SIGABRT", other), p)


def test_xla_49122_is_not_a_dynamic_slice_of_a_captured_array():
    """A jitted dynamic_slice of an argument counts; of a captured (constant) input under jit it
    is XLA's nested dynamic-slice fold, another bug (differential-b909f86363df), and does not;
    of a captured input in an eager call it counts (differential-1687a4d9ac6e)."""
    arg = fn(["a", "i"], [eqn("dynamic_slice", ["a", "i"], ["b"], axis=0, size=2)], ["b"])
    captured = fn(["i"], [eqn("dynamic_slice", ["x", "i"], ["b"], axis=0, size=2)], ["b"])
    p = program(inputs=[("x", (4,), 1)], functions={"f": arg, "g": captured},
                calls=[{"function": "f", "transforms": [{"kind": "jit"}], "args": ["x", "k"]},
                       {"function": "g", "transforms": [{"kind": "jit"}], "args": ["k"]}])
    p["inputs"].append({"name": "k", "shape": [], "dtype": "int32", "spec": None, "seed": 0})
    match = rediscover.KINDS["xla-49122"]
    assert match(_wrong(p, [0]), p)
    assert not match(_wrong(p, [1]), p)
    # called eagerly, the captured array is the eager op's argument, no constant: it counts
    p["calls"][1]["transforms"] = []
    assert match(_wrong(p, [1]), p)
    # under grad the wrong value is the transpose's dynamic_update_slice (openxla/xla#49118): not it
    p["calls"][0]["transforms"] = [{"kind": "jit"}, {"kind": "grad", "argnums": [0]}]
    p["functions"]["f"] = fn(["a", "i"], [eqn("dynamic_slice", ["a", "i"], ["b"], axis=0, size=2),
                                          eqn("sum", ["b"], ["l"], axis=None)], ["l"])
    assert not match(_wrong(p, [0]), p)
    p["functions"]["f"] = arg
    # under lax.map the per-step slice of the argument folds with the op's (the same fold): not it
    p["calls"][0]["transforms"] = [{"kind": "jit"}, {"kind": "map", "in_axes": [0, None]}]
    p["inputs"][0]["shape"] = [2, 4]
    assert not match(_wrong(p, [0]), p)
    # in a shard_map body the slice is of a device's block (2026-12-06@b554ed7: the fold of differential-b909f86363df)
    p["inputs"][0]["shape"] = [4]
    p["calls"][0]["transforms"] = [{"kind": "jit"}, {"kind": "shard_map", "in_specs": [None, None], "out_specs": [None],
                                                     "check_vma": True, "axis_names": None}]
    assert not match(_wrong(p, [0]), p)


def test_corpus_knowledge_knows_every_signature_and_face_and_refuses_a_bad_file(tmp_path):
    import json
    import shutil

    import pytest

    src = sorted((ROOT / "corpus").glob("*.json"))
    with_faces = next(p for p in src if json.loads(p.read_text()).get("faces"))
    shutil.copy(with_faces, tmp_path / with_faces.name)
    entry = json.loads(with_faces.read_text())
    signatures, ops = rediscover.corpus_knowledge(str(tmp_path))
    assert set(signatures) == {entry["signature"], *entry["faces"]} == set(ops)
    from fuzz.features import op_names

    assert all(ops[s] == sorted(op_names(entry["program"])) for s in signatures)
    assert rediscover.corpus_knowledge(None) == (None, None)
    (tmp_path / "zz-broken.json").write_text("{not json")
    with pytest.raises(SystemExit, match="zz-broken.json.*leave out --corpus"):
        rediscover.corpus_knowledge(str(tmp_path))


def test_corpus_knowledge_leaves_out_the_entries_of_the_bug_looked_for(tmp_path):
    import json
    import shutil

    target = ROOT / "corpus" / "crash-48f6bf02119d.json"  # seed A's entry: kind_a accepts it
    other = next(p for p in sorted((ROOT / "corpus").glob("internal-error-*.json"))
                 if not rediscover._is_target("A", json.loads(p.read_text())))
    for p in (target, other):
        shutil.copy(p, tmp_path / p.name)
    assert rediscover._is_target("A", json.loads(target.read_text()))
    every, _ = rediscover.corpus_knowledge(str(tmp_path))
    known, ops = rediscover.corpus_knowledge(str(tmp_path), "A")
    assert json.loads(target.read_text())["signature"] in every
    assert set(known.values()) == {other.name} == {every[s] for s in ops}
    assert set(known) < set(every)


def test_keep_writes_each_jobs_report_with_the_other_findings_met(tmp_path, monkeypatch):
    import json
    import queue
    import threading
    from types import SimpleNamespace

    class FakeCampaign:  # what _job reads of fuzz.campaign.Campaign, without JAX
        def __init__(self, **kw):
            self.matched = None
            self.caps = {"jax_version": "0.0.0"}
            self.stats = SimpleNamespace(programs=3, generated=2)
            self.shrink_spent = self.look_past_seconds = 0.0
            self.records = {"differential: wrong-value: sin": None}

        def run(self):
            return {"findings": [{"signature": "differential: wrong-value: sin"}]}

        def close(self):
            pass

    monkeypatch.setattr(rediscover, "Campaign", FakeCampaign)
    out = queue.Queue()
    rediscover._job("xla-49122", 7, 1.0, None, True, str(tmp_path / "keep"), threading.Event(), out, 1)
    row = out.get_nowait()
    assert row["seconds_to_find"] is None and row["findings"] == 1
    report = json.loads((tmp_path / "keep" / "report-xla-49122-seed7-job1.json").read_text())
    assert report["findings"][0]["signature"] == "differential: wrong-value: sin"
    rediscover._job("xla-49122", 8, 1.0, None, True, None, threading.Event(), out, 0)  # no --keep: no file
    assert sorted(p.name for p in (tmp_path / "keep").iterdir()) == ["report-xla-49122-seed7-job1.json"]


def test_an_entry_whose_upstream_names_the_report_is_the_bugs_own():
    """differential-b909f86363df is the root cause jax-ml/jax#18434 was triaged into (its upstream
    names the report) but its program is a single .at[] update, which kind_18434 refuses: known,
    it made every jax-18434 campaign look past and avoid the report's chain."""
    import json

    entry = json.loads((ROOT / "corpus" / "differential-b909f86363df.json").read_text())
    assert any(u.endswith("jax-ml/jax/issues/18434") for u in entry["upstream"])
    assert rediscover._is_target("jax-18434", entry)
    assert not rediscover._is_target("jax-18434", {**entry, "upstream": []})  # the matcher alone refuses it
    assert not rediscover._is_target("jax-29832", entry)
    other = {**entry, "upstream": ["https://github.com/jax-ml/jax/issues/184345"]}  # another report
    assert not rediscover._is_target("jax-18434", other)
