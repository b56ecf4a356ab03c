"""Faults injected through the real path: the campaign records each and leaves no orphan process."""
import time

from fuzz.campaign import Campaign
from fuzz.faults import rotating, worker_processes
from helpers import JIT, call, eqn, fn, program


def callback_program():
    body = fn(["a"], [eqn("io_callback", ["a"], [], tag="cb1", ordered=False, returns=False, stop_gradient=False),
                      eqn("sin", ["a"], ["v"])], ["v"])
    return program(inputs=[("x0", (4,), 1)], functions={"f0": body}, calls=[call("f0", [JIT], ["x0"])])


def test_aborts_segfaults_and_hangs_are_recorded_and_reaped():
    import os

    orphans_before = worker_processes(parent=1)
    c = Campaign(seconds=3600, determinism=False, timeout=3, source_hook=rotating())
    c.start = time.monotonic()
    try:
        for _ in range(6):
            found = c.run_program(callback_program())
            assert len(found) == 1
        assert worker_processes(parent=os.getpid()) == {c.runner.worker.proc.pid}  # only the live worker
    finally:
        c.close()
    kinds = {rec.finding.kind: rec.count for rec in c.records.values()}
    assert kinds == {"SIGABRT": 2, "SIGSEGV": 2, "timeout": 2}
    assert all("reproduced alone" in rec.finding.details for rec in c.records.values())
    time.sleep(0.5)
    assert worker_processes(parent=os.getpid()) == set()
    assert worker_processes(parent=1) - orphans_before == set()
