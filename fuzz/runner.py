"""Run and judge one program at a time: the workers, crash confirmation, recycling.

Shared by a campaign (``fuzz.campaign``) and corpus replay (``fuzz.replay``).
"""
from __future__ import annotations

import math
import time
from collections import Counter, deque
from dataclasses import dataclass, field

import oracles
from fuzz.execute import Worker
from fuzz.reference import evaluate
from fuzz.render import render
from fuzz.typecheck import ProgramError, check_program
from oracles.common import Finding

HISTORY = 6  # earlier programs kept per worker, to find the shortest history a crash needs
RECYCLE_PROGRAMS = 400  # a worker is restarted after this many programs...
RECYCLE_BYTES = 6 << 30  # ...or once its resident memory exceeds this (bytes)
ROTATE_HASH_SEED = 50  # programs between hash seeds of the lowering worker (see Runner.recycle)


def default_timeout(program: dict) -> float:
    """Seconds a program may take before it counts as a hang: 30 s plus 15 s per call.

    Generous on purpose: the first compile of a program on a loaded 2-core machine
    can take several seconds, and a slow compile is not a hang.
    """
    return 30.0 + 15.0 * len(program["calls"])


@dataclass
class Stats:
    programs: int = 0          # programs executed (shrinking included)
    generated: int = 0         # programs drawn fresh (not shrink steps)
    rejected: int = 0          # programs on which JAX raised (internal-error findings)
    generated_rejected: int = 0  # of those, programs drawn fresh (the rate of JAX exceptions per program)
    invalid: int = 0           # programs our own type checker or reference refused: generator bugs
    worker_seconds: float = 0.0
    reference_seconds: float = 0.0
    features: Counter = field(default_factory=Counter)
    depths: Counter = field(default_factory=Counter)


class Runner:
    """Workers for one JAX (``python``: its interpreter, None for this one) and the oracles.

    ``determinism``: also lower every program in a second worker with another
    PYTHONHASHSEED; ``timeout``: seconds per program (None: :func:`default_timeout`);
    ``source_hook``: applied to each rendered source before it runs (fault injection in
    tests). Raises fuzz.execute.WorkerError if a worker does not start.
    """

    def __init__(self, python: str | None = None, determinism: bool = True, timeout: float | None = None,
                 source_hook=None):
        self.timeout = timeout
        self.source_hook = source_hook or (lambda src: src)
        self.worker = Worker(python=python, hash_seed=0)
        self.lowerer = None
        try:
            self.lowerer = Worker(python=python, hash_seed=1) if determinism else None
        except BaseException:
            self.worker.kill()
            raise
        self.caps = self.worker.caps
        self.history: deque = deque(maxlen=HISTORY)
        self.stats = Stats()

    def run(self, program: dict) -> tuple:
        """Execute and judge one program: (findings, rendered source).

        ``findings`` is a list of Finding; crash and hang findings carry the earlier
        programs (sources) they need in ``history``.
        """
        self.stats.programs += 1
        try:
            check_program(program)
            need = math.prod(program["mesh"]["axis_sizes"])
            if need > self.caps["n_devices"]:
                raise ProgramError(f"the mesh needs {need} devices but the worker has {self.caps['n_devices']}; "
                                   f"use a smaller mesh")
            source = render(program, self.caps)
        except (ProgramError, ValueError) as e:
            self.stats.invalid += 1
            return [Finding("generator", type(e).__name__, str(e))], ""
        source = self.source_hook(source)
        timeout = self.timeout or default_timeout(program)
        t0 = time.perf_counter()
        if self.lowerer is not None:
            self.lowerer.submit(source, "only")
        outcome = self.worker.run(source, timeout, lower="after" if self.lowerer else False)
        other = self.lowerer.collect(timeout) if self.lowerer is not None else None
        self.stats.worker_seconds += time.perf_counter() - t0
        history = list(self.history)
        self.history.append(source)
        if outcome["status"] != "ok":
            outcome["history"] = self.confirm(source, outcome, history, timeout)
            self.history.clear()
        self.recycle()
        reference = None
        found = []
        if outcome["status"] == "ok":
            t0 = time.perf_counter()
            try:
                reference = evaluate(program)
            except Exception as e:  # the reference refused a program the generator made: our bug
                self.stats.invalid += 1
                found.append(Finding("reference", type(e).__name__, str(e)))
            self.stats.reference_seconds += time.perf_counter() - t0
        found += oracles.judge(program, outcome, reference, other,
                               seeds=(self.worker.hash_seed, self.lowerer.hash_seed if self.lowerer else None))
        if outcome["status"] != "ok":
            h = outcome["history"]
            note = ("not reproduced in a fresh worker" if h is None else
                    "reproduced alone in a fresh worker" if not h else
                    f"reproduced in a fresh worker after {len(h)} earlier program(s) (kept in the finding)")
            for f in found:
                f.details = f"{note}\n{f.details}"
                f.history = h or []
        if any(f.oracle == "internal-error" for f in found):
            self.stats.rejected += 1
        return found, source

    def confirm(self, source: str, outcome: dict, history: list, timeout: float):
        """Re-run a program that killed or hung its worker in a fresh one.

        Returns [] when it fails alone, the shortest suffix of ``history`` (earlier
        programs of that worker) after which it fails, or None when nothing reproduces.
        """
        def fails(earlier: list) -> bool:
            self.worker.restart()
            for src in earlier:
                if self.worker.run(src, timeout)["status"] != "ok":
                    return False  # an earlier program failed by itself: not this history
            again = self.worker.run(source, timeout)
            return again["status"] == outcome["status"] and again.get("signal") == outcome.get("signal")

        for n in range(0, len(history) + 1):
            if outcome["status"] == "hang" and n > 0:
                break  # a hang costs its whole time limit per attempt: confirm it alone only
            if fails(history[len(history) - n:]):
                self.worker.restart()
                return history[len(history) - n:]
        self.worker.restart()
        return None

    def recycle(self) -> None:
        """Restart a worker after RECYCLE_PROGRAMS programs or RECYCLE_BYTES of memory.

        The lowering worker also moves to the next hash seed every ROTATE_HASH_SEED
        programs: whether two hash seeds order a given set of axis names differently is
        a matter of luck, so comparing against many seeds finds more order-dependent
        lowerings than comparing against one.
        """
        for w in (self.worker, self.lowerer):
            if w is None:
                continue
            rotate = w is self.lowerer and w.programs_run >= ROTATE_HASH_SEED
            if rotate or w.programs_run >= RECYCLE_PROGRAMS or w.rss_bytes() > RECYCLE_BYTES:
                if rotate:
                    w.hash_seed += 1
                w.restart()
                if w is self.worker:
                    self.history.clear()

    def close(self) -> None:
        """Kill the workers (and anything they started)."""
        for w in (self.worker, self.lowerer):
            if w is not None:
                w.kill()

