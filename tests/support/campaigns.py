"""A ``shardfuzz run`` campaign as a subprocess, watched from its stderr (tests of signals, kills, jobs)."""
import os
import subprocess
import sys
import threading
import time


def start_campaign(args, cwd, env=None, seconds=180):
    """Start ``shardfuzz run ARGS`` and return (process, stderr lines so far: a list that keeps filling)
    once the campaign has started (its "host CPU devices" line), so that a signal reaches the campaign itself.
    """
    env = env or {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    p = subprocess.Popen([sys.executable, "-m", "fuzz", "run", *args], cwd=cwd, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True).start()
    deadline = time.monotonic() + seconds
    while not any("host CPU devices" in ln for ln in lines):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            raise AssertionError("the campaign did not start:\n" + "".join(lines))
        time.sleep(0.1)
    return p, lines


def finish(p, lines, timeout=120) -> str:
    """Wait for a process from :func:`start_campaign`; its whole stderr."""
    try:
        p.wait(timeout=timeout)
    finally:
        p.kill()
    time.sleep(0.2)  # (the reader thread drains the pipe)
    return "".join(lines)


class StubRunner:
    """A Runner without JAX: run() returns the findings set in ``found``."""

    def __init__(self, **kw):
        from fuzz.runner import Stats

        self.caps = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2"}
        self.stats = Stats()
        self.lowerer = None
        self.found = []
        self.last_generator_errors = []  # (fuzz.runner.Runner: the generator errors of the last run)

    def run(self, program):
        return list(self.found), "source"

    def close(self):
        pass
