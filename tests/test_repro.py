"""Repros (fuzz.repro.render_repro): each shows its finding by its exit status, run as a user runs it.

Every repro here runs in a fresh ``python repro.py`` process with an environment
without XLA_FLAGS (the script sets the device count itself): non-zero when the bug
shows, 0 when JAX behaves. Wrong values are simulated by a perturbed reference (JAX is
right on these programs), a crash by a fault appended to the script
(fuzz.faults.inject_module), a lowering that changes across processes by a hash-seed
dependent suffix; the internal error is a real one of jax 0.10.2.
"""
import copy
import os
import subprocess
import sys

import numpy as np
import pytest

from fuzz.faults import inject_module
from fuzz.program import validate_program
from fuzz.reference import evaluate, make_input
from fuzz.render import NEWEST_CAPS, render
from fuzz.repro import BUG_MARK, render_repro
from fuzz.typecheck import ProgramError
from support.programs import JIT, call, eqn, fn, program, shard_map

TIMEOUT = 300  # seconds per repro run (importing JAX on a loaded 2-core machine)


def run_repro(source: str, tmp_path, name: str = "repro.py", xla_flags: str | None = None):
    path = tmp_path / name
    path.write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS", "PYTHONPATH")}
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=TIMEOUT)


def finding(oracle, call_index, kind="", message="m"):
    return {"oracle": oracle, "kind": kind, "message": message, "call": call_index}


def values_program():
    """jit(shard_map) over 4 devices of three inputs (seeded and split, arange, ones): sin, psum, mul."""
    body = fn(["a", "b", "c"], [eqn("sin", ["a"], ["v1"]), eqn("psum", ["b"], ["v2"], axes=["x"]),
                                eqn("mul", ["c", "c"], ["v3"])], ["v1", "v2", "v3"])
    p = program(mesh=(("x", 4),), inputs=[("x0", (8,), 3), ("x1", (4,), 0), ("x2", (2, 3), 0)],
                functions={"f0": body},
                calls=[call("f0", [JIT, shard_map([[["x"]], [None], [None, None]], [[["x"]], [None], [None, None]])],
                            ["x0", "x1", "x2"])])
    p["inputs"][0]["spec"] = [["x"]]
    p["inputs"][1]["values"] = "arange"
    p["inputs"][2]["values"] = "ones"
    validate_program(p)
    return p


def callback_program():
    body = fn(["a"], [eqn("sin", ["a"], ["v1"]),
                      eqn("io_callback", ["v1"], [], tag="cb1", ordered=False, returns=False, stop_gradient=False)],
              ["v1"])
    return program(mesh=(("x", 4),), inputs=[("x0", (4,), 5)], functions={"f0": body},
                   calls=[call("f0", [JIT], ["x0"])])


def sdy_program(calls):
    """Eager io_callback with a result on a committed input: TypeError 'Cannot convert GSPMDSharding' (jax 0.10.2)."""
    body = fn(["a1"], [eqn("io_callback", ["a1"], ["v1"], tag="cb1", ordered=False, returns=True,
                           stop_gradient=False), eqn("sin", ["v1"], ["v2"])], ["v2"])
    p = program(mesh=(("x", 1), ("y", 2)), inputs=[("x0", (1, 1, 1), 0)], functions={"f0": body}, calls=calls)
    p["inputs"][0]["spec"] = [None, None, None]
    validate_program(p)
    return p


# -- inputs: the "values" field ----------------------------------------------------------

def test_values_field_in_reference_and_worker_source():
    p = values_program()
    module = {"__name__": "not_main"}
    exec(compile(render(p, NEWEST_CAPS), "<program>", "exec"), module)
    for inp in p["inputs"]:
        want = make_input(inp["seed"], inp["shape"], inp.get("values", "seeded"))
        np.testing.assert_array_equal(np.asarray(module[inp["name"]]), want)
    np.testing.assert_array_equal(make_input(0, (4,), "arange"), [0, 0.25, 0.5, 0.75])
    np.testing.assert_array_equal(make_input(0, (2, 3), "ones"), np.ones((2, 3)))
    bad = copy.deepcopy(p)
    bad["inputs"][0]["values"] = "zeros"
    with pytest.raises(ProgramError, match="values"):
        validate_program(bad)
    with pytest.raises(ProgramError):
        render(bad)


def test_repro_holds_only_what_it_uses():
    p = values_program()
    src = render_repro(p, NEWEST_CAPS, finding("differential", 0, "wrong-value"))
    for absent in ("CALLBACK_LOG", "log_callback", "make_input", "io_callback", "seeded(", "CALLS", "run_earlier"):
        assert absent not in src
    assert "jnp.arange(4, dtype=jnp.float32) / 4" in src
    assert "jnp.ones((2, 3), jnp.float32)" in src
    src = render_repro(callback_program(), NEWEST_CAPS, finding("internal-error", 0))
    assert "io_callback(lambda x: None, None, v1" in src and "record(" not in src


def test_repro_refuses_a_program_name_it_needs():
    p = values_program()
    p["functions"]["f0"]["params"][0] = "record"
    p["functions"]["f0"]["eqns"][0]["args"] = ["record"]
    with pytest.raises(ProgramError, match="record"):
        render_repro(p, NEWEST_CAPS, finding("internal-error", 0))


# -- differential -------------------------------------------------------------------------

def test_differential_repro_fails_on_wrong_value_and_passes_on_reference(tmp_path):
    p = values_program()
    ref = evaluate(p)
    wrong = copy.deepcopy(ref)
    wrong["results"][0][1] = wrong["results"][0][1] + 0.5
    bad = run_repro(render_repro(p, NEWEST_CAPS, finding("differential", 0, "wrong-value"), wrong), tmp_path)
    assert bad.returncode == 1, bad.stderr[-2000:]
    assert "AssertionError" in bad.stderr and "output 1" in bad.stderr
    assert "expected" in bad.stdout  # both arrays printed
    good = run_repro(render_repro(p, NEWEST_CAPS, finding("differential", 0, "wrong-value"), ref), tmp_path)
    assert good.returncode == 0, good.stderr[-2000:]
    assert "JAX behaves" in good.stdout


def test_differential_repro_fails_on_wrong_shape(tmp_path):
    p = values_program()
    ref = evaluate(p)
    ref["results"][0][0] = ref["results"][0][0][:4]
    r = run_repro(render_repro(p, NEWEST_CAPS, finding("differential", 0, "wrong-shape"), ref), tmp_path)
    assert r.returncode == 1 and "shape (8,), expected (4,)" in r.stderr, r.stderr[-2000:]


def test_repro_sets_its_device_count_whatever_xla_flags_say(tmp_path):
    p = values_program()  # a mesh of 4 devices
    r = run_repro(render_repro(p, NEWEST_CAPS, finding("differential", 0), evaluate(p)), tmp_path,
                  xla_flags="--xla_force_host_platform_device_count=2")
    assert r.returncode == 0, r.stderr[-2000:]


# -- callbacks ------------------------------------------------------------------------------

def test_callbacks_repro_fails_on_other_values_and_passes_on_reference(tmp_path):
    p = callback_program()
    ref = evaluate(p)
    wrong = copy.deepcopy(ref)
    wrong["callbacks"][0]["cb1"] = wrong["callbacks"][0]["cb1"] + [0.0, 1.0]  # (position, value) rows
    bad = run_repro(render_repro(p, NEWEST_CAPS, finding("callbacks", 0, "wrong-value"), wrong), tmp_path)
    assert bad.returncode == 1 and "AssertionError: callback 'cb1' at position" in bad.stderr, bad.stderr[-2000:]
    good = run_repro(render_repro(p, NEWEST_CAPS, finding("callbacks", 0, "wrong-value"), ref), tmp_path)
    assert good.returncode == 0, good.stderr[-2000:]
    # the same values at other positions of the block (a permutation): the repro fails too
    moved = copy.deepcopy(ref)
    cells = moved["callbacks"][0]["cb1"]
    assert len(np.unique(cells[:, 0])) == 4
    cells[:, 0] = 3 - cells[:, 0]
    bad = run_repro(render_repro(p, NEWEST_CAPS, finding("callbacks", 0, "wrong-value"), moved), tmp_path)
    assert bad.returncode == 1 and "AssertionError: callback 'cb1' at position" in bad.stderr, bad.stderr[-2000:]


# -- internal error, and an earlier call that fails -----------------------------------------

def test_internal_error_repro_raises_the_real_jax_error(tmp_path):
    bad = run_repro(render_repro(sdy_program([call("f0", [], ["x0"])]), NEWEST_CAPS, finding("internal-error", 0)),
                    tmp_path)
    assert bad.returncode == 1 and "TypeError: Cannot convert GSPMDSharding" in bad.stderr, bad.stderr[-2000:]
    good = run_repro(render_repro(sdy_program([call("f0", [JIT], ["x0"])]), NEWEST_CAPS,
                                  finding("internal-error", 0)), tmp_path)
    assert good.returncode == 0 and "no error: JAX behaves" in good.stdout, good.stderr[-2000:]


def test_earlier_call_that_fails_is_reported_and_the_script_goes_on(tmp_path):
    p = sdy_program([call("f0", [], ["x0"]), call("f0", [JIT], ["x0"])])
    src = render_repro(p, NEWEST_CAPS, finding("differential", 1, "wrong-value"), evaluate(p))
    r = run_repro(src, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "call 0: f0 raised as expected, going on: TypeError" in r.stdout


def test_repro_keeps_only_the_calls_up_to_the_finding():
    p = sdy_program([call("f0", [JIT], ["x0"]), call("f0", [], ["x0"]), call("f0", [JIT], ["x0"])])
    src = render_repro(p, NEWEST_CAPS, finding("internal-error", 1))
    assert "call 1: f0" in src and "call 2" not in src and "run_earlier('call 0: jit(f0)'" in src


# -- metamorphic ------------------------------------------------------------------------------

def test_metamorphic_repro_compares_the_two_calls(tmp_path):
    p = callback_program()
    p["calls"] = [call("f0", [JIT], ["x0"]), call("f0", [], ["x0"])]
    src = render_repro(p, NEWEST_CAPS, finding("metamorphic", 1, "disagree"))
    good = run_repro(src, tmp_path)
    assert good.returncode == 0, good.stderr[-2000:]
    # simulate a second call that returns other values
    bugged = src.replace("check_outputs(out, first)", "check_outputs([o + 1 for o in out], first)")
    assert bugged != src
    bad = run_repro(bugged, tmp_path)
    assert bad.returncode == 1 and "AssertionError" in bad.stderr, bad.stderr[-2000:]


def test_export_takes_a_callbacks_repros_own_assertion_as_the_finding():
    """export's judge (fuzz.export.judge_run) knows the message of the repro's check_callbacks:
    a callbacks finding whose repro fails on the values its host function received is shown
    (2026-12-07@2290ae1: the judge still looked for the message the repro had before 2026-12-06@bd982f0, and
    refused every callbacks finding); the repro passing is not."""
    from fuzz.export import Case, judge_run
    from fuzz.export import run_repro as export_run

    p = callback_program()
    ref = evaluate(p)
    wrong = copy.deepcopy(ref)
    wrong["callbacks"][0]["cb1"] = wrong["callbacks"][0]["cb1"] + [0.0, 1.0]
    case = Case("c", "callbacks", "wrong-value", "jit(f0): an io_callback received other values",
                "callbacks: wrong-value: io_callback+jit", 0, p, [], "0.10.2")
    for expected, shows in ((wrong, True), (ref, False)):
        run = export_run(render_repro(p, NEWEST_CAPS, finding("callbacks", 0, "wrong-value"), expected),
                         sys.executable, timeout=TIMEOUT)
        assert (judge_run(case, run) == "") == shows, (judge_run(case, run), run.stderr[-1000:])


# -- crash ------------------------------------------------------------------------------------

def test_crash_repro_dies_with_the_fault_and_runs_its_history_first(tmp_path):
    p = callback_program()
    history = [sdy_program([call("f0", [], ["x0"])])]
    src = render_repro(p, NEWEST_CAPS, finding("crash", None, "SIGABRT"), history=history)
    good = run_repro(src, tmp_path)
    assert good.returncode == 0 and "no crash: JAX behaves" in good.stdout, good.stderr[-2000:]
    out = good.stdout
    assert out.index("program 1, call 0: f0 raised as expected") < out.index("call 0: jit(f0) ran")
    assert "the crash shown here kills the process" in src and "not the bug shown here" not in src
    bad = run_repro(inject_module(src, "abort", message="Check failed: injected fault alpha"), tmp_path)
    assert bad.returncode == -6 and "Check failed: injected fault alpha" in bad.stderr


# -- determinism ----------------------------------------------------------------------------

def test_determinism_repro_compares_two_processes(tmp_path):
    p = values_program()
    src = render_repro(p, NEWEST_CAPS, finding("determinism", 0, "cross-process",
                                                "jit(shard_map(f)): lowering differs between PYTHONHASHSEED=0 and 3"))
    assert 'lowering_in("0"), lowering_in("3")' in src
    good = run_repro(src, tmp_path)
    assert good.returncode == 0 and "same lowering in both processes" in good.stdout, good.stderr[-2000:]
    # simulate a lowering that depends on the hash seed
    bugged = src.replace(".as_text()", '.as_text() + f"// {hash(\'shard\')}"')
    assert bugged != src
    bad = run_repro(bugged, tmp_path)
    assert bad.returncode == 1 and BUG_MARK in bad.stdout and "+++ PYTHONHASHSEED=3" in bad.stdout, bad.stderr[-2000:]


def test_determinism_repro_within_process(tmp_path):
    p = values_program()
    src = render_repro(p, NEWEST_CAPS, finding("determinism", 0, "within-process"))
    good = run_repro(src, tmp_path)
    assert good.returncode == 0 and "after jax.clear_caches(): JAX behaves" in good.stdout, good.stderr[-2000:]
    bugged = src.replace("jax.clear_caches()\n", "jax.clear_caches()\nnp.random.seed(1)\n").replace(
        ".as_text()", ".as_text() + str(np.random.rand())")
    bad = run_repro(bugged, tmp_path)
    assert bad.returncode == 1 and BUG_MARK in bad.stdout, bad.stderr[-2000:]


OLD_VENV = os.path.expanduser("~/.cache/shardfuzz/venvs/jax-0.4.28")


@pytest.mark.skipif(not os.path.exists(os.path.join(OLD_VENV, ".shardfuzz-ready")),
                    reason="needs the cached jax 0.4.28 venv (shardfuzz run --jax-version 0.4.28 makes it)")
def test_determinism_repro_shows_seed_b_on_jax_0_4_28(tmp_path):
    # seed B (benchmarks/rediscover.py): grad of a shard_map over a 4-axis mesh lowers with the axis names in
    # hash-seed order on jax 0.4.27-0.4.28
    g = fn(["b"], [eqn("sin", ["b"], ["s"]), eqn("psum", ["s"], ["p"], axes=["x", "y"])], ["p"])
    f0 = fn(["a"], [eqn("call", ["a"], ["v1"], transforms=[shard_map([[["x", "y"]]], [[None]])], fn=g),
                    eqn("sum", ["v1"], ["v2"], axis=None)], ["v2"])
    p = program(mesh=(("x", 8), ("y", 1), ("z", 1), ("w", 1)), inputs=[("x0", (8,), 1)], functions={"f0": f0},
                calls=[call("f0", [JIT, {"kind": "grad", "argnums": [0]}], ["x0"])])
    validate_program(p)
    caps = {"jax_version": "0.4.28", "shard_map": "experimental", "check_kw": "check_rep", "partial_manual": None,
            "explicit": False}
    src = render_repro(p, caps, finding("determinism", 0, "cross-process"))
    path = tmp_path / "repro.py"
    path.write_text(src)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH")}
    r = subprocess.run([os.path.join(OLD_VENV, "bin", "python"), str(path)], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=TIMEOUT)
    assert r.returncode == 1 and BUG_MARK in r.stdout and "jax.result_info" in r.stdout, (r.stdout, r.stderr[-2000:])


def test_hang_repro_ends_itself_after_the_recorded_time(tmp_path):
    src = render_repro(callback_program(), NEWEST_CAPS, finding("hang", None, "timeout", "no answer within 3 s"))
    good = run_repro(src, tmp_path)
    assert good.returncode == 0 and "no hang: JAX behaves" in good.stdout, good.stderr[-2000:]
    bad = run_repro(inject_module(src, "hang"), tmp_path)
    assert bad.returncode == 1 and "Timeout (0:00:03)!" in bad.stderr, bad.stderr[-2000:]
