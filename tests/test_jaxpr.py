"""The worker prints each call's jaxpr after the call ran (``str(jax.make_jaxpr(f)(*args))``).

A function that runs must trace and print: an exception there (in a primitive's pretty-printing
rule, for instance) is an internal-error finding whose message starts with
``oracles.internal_error.JAXPR_MARK``, and its repro runs the call, then prints its jaxpr.
Tested with a planted fault in ``jax._src.core.pp_eqn`` (the worker's ``run_program`` in the
test process, and the repro under ``runpy``), and without it, where nothing may be flagged.
"""
import os
import subprocess
import sys

from fuzz.render import NEWEST_CAPS

from fuzz.repro import render_repro
from support.programs import JIT, call, donation_program, eqn, fn, program
from oracles import internal_error
from oracles.internal_error import JAXPR_MARK

def broken_pp_eqn(*args, **kwargs):
    raise IndexError("planted fault in pp_eqn")


def jit_sin():
    return program(inputs=[("x0", (8,), 1)], functions={"f0": fn(["a"], [eqn("sin", ["a"], ["s"])], ["s"])},
                   calls=[call("f0", [JIT], ["x0"]), call("f0", [], ["x0"])])


def test_a_jaxpr_that_does_not_print_is_an_internal_error():
    outcome = {"calls": [{"ok": True, "outputs": [], "error": None, "callbacks": {},
                          "jaxpr_error": {"type": "builtins.IndexError", "message": "tuple index out of range",
                                          "traceback": 'File "/x/jax/_src/core.py", line 1, in pp_eqn\n'}},
                         {"ok": True, "outputs": [], "error": None, "callbacks": {}}]}
    found = internal_error.judge(jit_sin(), outcome)
    assert [(f.oracle, f.kind, f.call, f.message) for f in found] == [
        ("internal-error", "builtins.IndexError", 0, JAXPR_MARK + "tuple index out of range")]
    # the same exception raised by the call itself is another signature (its repro does not print)
    outcome["calls"][0].update(ok=False, error=outcome["calls"][0].pop("jaxpr_error"))
    (raised,) = internal_error.judge(jit_sin(), outcome)
    assert raised.message == "tuple index out of range" and raised.signature != found[0].signature


def test_the_worker_flags_a_jaxpr_that_does_not_print(monkeypatch):
    """The worker's own run_program, in this process: clean on JAX as it is; with pp_eqn broken
    (printing raises; tracing and running do not use it) each call that ran is flagged."""
    import jax
    import numpy as np
    from jax._src import core

    from fuzz import worker
    from fuzz.render import render

    p = jit_sin()
    source = render(p, NEWEST_CAPS)
    assert internal_error.judge(p, {"calls": worker.run_program(jax, np, source, False)}) == []
    monkeypatch.setattr(core, "pp_eqn", broken_pp_eqn)
    found = internal_error.judge(p, {"calls": worker.run_program(jax, np, source, False)})
    assert [(f.call, f.kind, f.message) for f in found] == [
        (k, "builtins.IndexError", JAXPR_MARK + "planted fault in pp_eqn") for k in (0, 1)]


def test_a_call_with_donated_arguments_prints_its_jaxpr(worker):
    """A donated argument is deleted once the call ran; tracing it again reads only its type."""
    from fuzz.render import render

    out = worker.run(render(donation_program(), worker.caps), timeout=600)
    assert out["status"] == "ok" and [c["ok"] for c in out["calls"]] == [True] * 4
    assert [c.get("jaxpr_error") for c in out["calls"]] == [None] * 4


def test_the_repro_runs_the_call_then_prints_its_jaxpr(tmp_path):
    finding = {"oracle": "internal-error", "kind": "builtins.IndexError", "call": 1,
               "message": JAXPR_MARK + "planted fault in pp_eqn"}
    src = render_repro(jit_sin(), NEWEST_CAPS, finding)
    assert "print(jax.make_jaxpr(f0)(x0))" in src
    path = tmp_path / "repro.py"
    path.write_text(src)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    good = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, env=env)
    assert good.returncode == 0 and "no error: JAX behaves" in good.stdout, good.stderr[-2000:]
    assert "sin" in good.stdout  # the printed jaxpr
    # the same repro under a JAX whose pp_eqn raises: the call runs, printing its jaxpr raises (exit 1)
    patched = ("import runpy\nfrom jax._src import core\n\n\ndef pp_eqn(*a, **k):\n"
               "    raise IndexError('planted fault in pp_eqn')\n\n\ncore.pp_eqn = pp_eqn\n"
               f"runpy.run_path({str(path)!r}, run_name='__main__')\n")
    bad = subprocess.run([sys.executable, "-c", patched], capture_output=True, text=True, timeout=600, env=env)
    assert bad.returncode == 1 and "IndexError: planted fault in pp_eqn" in bad.stderr, bad.stderr[-2000:]
    assert "f0: runs" not in bad.stderr and "no error" not in bad.stdout
