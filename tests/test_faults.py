"""Faults injected through the real path: the campaign records each and leaves no orphan process."""
import time

import pytest

from fuzz.campaign import Campaign
from fuzz.faults import rotating, worker_processes
from support.programs import JIT, call, eqn, fn, program

# These tests watch the process tree (orphans, signals, kills): under pytest-xdist they run
# one after another in one worker (--dist loadgroup), never beside each other.
pytestmark = pytest.mark.xdist_group("processes")


def callback_program():
    body = fn(["a"], [eqn("io_callback", ["a"], [], tag="cb1", ordered=False, returns=False, stop_gradient=False),
                      eqn("sin", ["a"], ["v"])], ["v"])
    return program(inputs=[("x0", (4,), 1)], functions={"f0": body}, calls=[call("f0", [JIT], ["x0"])])


def test_aborts_segfaults_and_hangs_are_recorded_and_reaped():
    import os

    orphans_before = worker_processes(parent=1)
    others = worker_processes(parent=os.getpid())  # workers of session fixtures, alive throughout
    c = Campaign(seconds=3600, determinism=False, timeout=3, source_hook=rotating())
    c.start = time.monotonic()
    try:
        for _ in range(3):  # one abort, one segfault, one hang (fuzz.faults.rotating)
            found = c.run_program(callback_program())
            assert len(found) == 1
        assert worker_processes(parent=os.getpid()) - others == {c.runner.worker.proc.pid}  # only the live worker
    finally:
        c.close()
    kinds = {rec.finding.kind: rec.count for rec in c.records.values()}
    assert kinds == {"SIGABRT": 1, "SIGSEGV": 1, "timeout": 1}
    # the hang names where it hangs: JAX's frame that called the host function, from the stacks
    # the worker dumped before it was killed (the host function's own frame is the program's)
    (hang,) = [rec.finding for rec in c.records.values() if rec.finding.oracle == "hang"]
    assert hang.signature.startswith("hang: timeout: in jax._src.callback:"), hang.signature
    assert 'File "<program>"' in hang.details and " in host" in hang.details, hang.details[-2000:]
    assert all("reproduced alone" in rec.finding.details for rec in c.records.values())
    time.sleep(0.5)
    assert worker_processes(parent=os.getpid()) - others == set()
    assert worker_processes(parent=1) - orphans_before == set()


def test_a_crash_that_does_not_reproduce_is_counted_not_a_finding(tmp_path):
    """The fault fires in the first worker only (a marker file): a crash the fresh worker does not repeat
    (as after a kill -9 from outside, or the OOM killer) is not a finding, but it is counted."""
    from fuzz.faults import once

    marker = tmp_path / "fired"
    c = Campaign(seconds=3600, determinism=False, timeout=60, source_hook=once("abort", str(marker)))
    c.start = time.monotonic()
    try:
        found = c.run_program(callback_program())
    finally:
        c.close()
    assert marker.exists()  # the fault did fire once
    assert found == [] and c.records == {}
    report = c.report()
    assert report["findings"] == [] and report["unconfirmed_crash_count"] == 1
    [u] = report["unconfirmed_crashes"]
    assert (u["worker"], u["status"], u["signal"]) == ("execute", "crash", "SIGABRT")


def test_the_lowering_workers_crashes_are_confirmed_too(tmp_path):
    """A crash of the determinism oracle's lowering worker is a finding only if a fresh lowering worker repeats it."""
    from fuzz.faults import lowering_only

    marker = tmp_path / "fired"
    c = Campaign(seconds=3600, determinism=True, timeout=60, source_hook=lowering_only("abort", once=str(marker)))
    c.start = time.monotonic()
    try:
        first = c.run_program(callback_program())
        assert marker.exists()
        c.runner.source_hook = lowering_only("abort")  # now every lowering worker aborts
        second = c.run_program(callback_program())
    finally:
        c.close()
    assert first == []
    assert c.stats.unconfirmed_total == 1 and c.stats.unconfirmed[0]["worker"] == "lowering"
    assert [(f.oracle, f.kind) for f in second] == [("crash", "SIGABRT")]
    assert "reproduced alone in a fresh lowering worker" in second[0].details


def test_a_reducer_trusts_the_crash_of_a_fresh_worker_and_confirms_any_other():
    """Runner.trust_fresh: a crash of a worker that ran nothing before needs no second run; after another
    program it is confirmed in a fresh worker as always."""
    from fuzz.faults import inject
    from fuzz.runner import Runner

    plain = program(inputs=[("x0", (4,), 1)], functions={"f0": fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])},
                    calls=[call("f0", [JIT], ["x0"])])
    r = Runner(determinism=False, timeout=60, source_hook=lambda s: inject(s, "abort"))
    confirms = []
    confirm = r.confirm
    r.confirm = lambda *a, **k: confirms.append(1) or confirm(*a, **k)
    try:
        r.trust_fresh = True
        first, _ = r.run(callback_program())  # the worker's first program
        again, _ = r.run(callback_program())  # in the worker the crash restarted: fresh again
        assert confirms == []
        assert r.run(plain)[0] == []
        after, _ = r.run(callback_program())  # after another program: confirmed alone
        assert confirms == [1]
        r.trust_fresh = False
        last, _ = r.run(callback_program())
        assert confirms == [1, 1]
    finally:
        r.close()
    for found in (first, again, after, last):
        assert [(f.oracle, f.kind, f.history) for f in found] == [("crash", "SIGABRT", [])]


@pytest.mark.slow  # (waits out time limits, 20 s: the default run stays under CI's 10 minutes)
def test_a_hang_is_not_reduced_when_two_time_limits_exceed_the_budget():
    """A candidate that still hangs costs the time limit, twice with its confirmation: with a
    60-s limit and 5 s left, the hang is kept as found and nothing runs; with a 1-s limit the
    reducer runs candidates (each hangs or not within a second)."""
    from fuzz.campaign import Record
    from oracles.common import Finding

    for limit, runs in ((60, False), (1, True)):
        c = Campaign(seconds=3600, determinism=False, timeout=limit, source_hook=rotating(["hang"]))
        c.start = time.monotonic()
        try:
            f = Finding("hang", "timeout", "no answer", call=None)
            c.records[f.signature] = Record(f, callback_program(), "", 1)
            assert c.reduce(f.signature, deadline=time.monotonic() + 5) == f.signature
            assert (c.runner.stats.programs > 0) is runs, (limit, c.runner.stats.programs)
        finally:
            c.close()


def test_a_hang_site_is_the_innermost_jax_frame_of_the_thread_that_runs_the_program():
    """faulthandler's dump lists each thread innermost frame first; other threads (XLA's, the
    parent watchdog) and frames outside JAX (the program's, NumPy's) do not name the hang."""
    from oracles.crash import hang_site, judge

    stacks = (
        'Thread 0x00007f0000000001 (most recent call first):\n'
        '  File "/v/lib/python3.11/site-packages/jax/_src/dispatch.py", line 10 in wait_for_tokens\n'
        '  File "/v/lib/python3.11/threading.py", line 9 in run\n\n'
        'Current thread 0x00007f0000000002 (most recent call first):\n'
        '  File "/v/lib/python3.11/site-packages/numpy/core/fromnumeric.py", line 3 in sum\n'
        '  File "/v/lib/python3.11/site-packages/jax/_src/interpreters/mlir.py", line 1422 in lower_jaxpr_to_module\n'
        '  File "/v/lib/python3.11/site-packages/jax/_src/pjit.py", line 1264 in _pjit_lower\n'
        '  File "/w/fuzz/worker.py", line 220 in run_program\n')
    assert hang_site(stacks) == "jax._src.interpreters.mlir:lower_jaxpr_to_module"
    assert hang_site(stacks.replace(" in run_program", " in main")) == ""  # no thread runs the program
    assert hang_site("") == ""
    (f,) = judge({}, {"status": "hang", "timeout": 75.0, "stderr": "", "stacks": stacks})
    assert f.signature == "hang: timeout: in jax._src.interpreters.mlir:lower_jaxpr_to_module"
    assert f.message == "no answer within 75 s in jax._src.interpreters.mlir:lower_jaxpr_to_module"
    (g,) = judge({}, {"status": "hang", "timeout": 75.0, "stderr": ""})  # a worker that gave no stack
    assert g.signature == "hang: timeout"


def test_a_worker_past_its_memory_limit_is_killed_and_recorded(monkeypatch):
    """A host function that takes 64 MiB more every 0.05 s (fuzz.faults "memory") in a worker limited
    to 1.5 GiB: killed at the limit (not at 4 GiB, nor by the time limit), one confirmed crash finding
    of kind memory named where it grew, and the next program runs in a fresh worker."""
    import os

    from fuzz.execute import default_memory_limit
    from fuzz.faults import inject

    monkeypatch.setenv("SHARDFUZZ_WORKER_MEMORY", "1.5")
    assert default_memory_limit() == 3 << 29
    others = worker_processes(parent=os.getpid())
    c = Campaign(seconds=3600, determinism=False, timeout=60, source_hook=lambda s: inject(s, "memory"))
    c.start = time.monotonic()
    try:
        t0 = time.monotonic()
        (found,) = c.run_program(callback_program())
        assert time.monotonic() - t0 < 50  # (a hang would take the 60-s limit twice)
        assert (found.oracle, found.kind) == ("crash", "memory"), (found.oracle, found.kind, found.message)
        assert found.message.startswith("resident memory passed 1.5 GiB in jax._src.callback:"), found.message
        assert found.signature.startswith("crash: memory: in jax._src.callback:"), found.signature
        assert "reproduced alone" in found.details
        assert 0 < c.runner.worker.rss_bytes() < 3 << 29  # a fresh worker
        c.runner.source_hook = lambda s: s
        assert c.run_program(callback_program()) == []
        assert worker_processes(parent=os.getpid()) - others == {c.runner.worker.proc.pid}
    finally:
        c.close()


@pytest.mark.parametrize("value", ["0", "-2", "lots", "nan", "inf"])
def test_a_bad_worker_memory_setting_is_a_one_line_error(monkeypatch, value):
    from fuzz.execute import WorkerError, default_memory_limit

    monkeypatch.setenv("SHARDFUZZ_WORKER_MEMORY", value)
    with pytest.raises(WorkerError, match=r"^SHARDFUZZ_WORKER_MEMORY=.* is not a positive number of GiB; set it"):
        default_memory_limit()
    monkeypatch.delenv("SHARDFUZZ_WORKER_MEMORY")
    assert default_memory_limit() >= 2 << 30


WAIT_FOR_EXIT = """
import time
for _ in range(1200):
    try:
        with open("/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                break
    except OSError:
        break
    time.sleep(0.1)
"""


def test_a_lowering_worker_past_its_limit_is_stopped_while_the_other_is_waited_for():
    """Worker.collect(watch=...) checks the lowering worker's memory while it waits for the main
    one: the runaway lowering worker is stopped long before the main program ends, and its own
    collect then gives the "memory" outcome."""
    from fuzz.execute import Worker
    from fuzz.faults import inject_module
    from fuzz.render import render

    p = callback_program()
    main = Worker(hash_seed=0)
    lowering = Worker(hash_seed=1, memory_limit=3 << 29)
    try:
        source = render(p, main.caps)
        lowering.submit(inject_module(source, "memory"), "only")
        # the main program lasts until the lowering worker is stopped (a zombie until reaped, or
        # gone), up to 120 s: a fixed 6 s was too short for it to import JAX and grow on a loaded
        # 2-core machine (2026-12-06@23a0f5a: the breach came after the main program had ended)
        main.submit(source + WAIT_FOR_EXIT.format(pid=lowering.proc.pid))
        assert main.collect(60, watch=(lowering,))["status"] == "ok"
        assert lowering._breach is not None  # stopped (killed) while main ran
        # (its threads may still be exiting: a killed process is reaped once all have)
        assert lowering.proc.wait(timeout=30) is not None
        out = lowering.collect(60)
        assert out["status"] == "memory" and out["rss"] > 3 << 29, out.get("status")
        assert lowering.run(source, 60, lower="only")["status"] == "ok"  # a fresh lowering worker
    finally:
        main.kill()
        lowering.kill()
