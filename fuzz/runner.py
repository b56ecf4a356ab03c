"""Run and judge one program at a time: the workers, crash confirmation, recycling.

Shared by a campaign (``fuzz.campaign``) and corpus replay (``fuzz.replay``).
"""
from __future__ import annotations

import contextlib

import math
import time
from collections import Counter, deque
from dataclasses import dataclass, field

import oracles
from fuzz.execute import Worker
from fuzz.reference import evaluate
from fuzz.render import render
from fuzz.typecheck import ProgramError, check_program
from fuzz.util import INTERRUPTS
from oracles.common import Finding

HISTORY = 6  # earlier programs kept per worker, to find the shortest history a crash needs
RECYCLE_PROGRAMS = 400  # a worker is restarted after this many programs...
RECYCLE_BYTES = 6 << 30  # ...or once its resident memory exceeds this (bytes)
ROTATE_HASH_SEED = 50  # programs between hash seeds of the lowering worker (see Runner.recycle)
# The lowering worker's PYTHONHASHSEEDs, in turn (the main worker's is 0). JAX keeps axis
# names in sets and frozensets (manual axes, varying axes, residual shardings: seed B in
# benchmarks/rediscover.py), so a lowering that depends on hash order shows when the two seeds
# iterate a set of axis names in other orders. For a pair of names that is a coin toss
# for a seed picked at random (seed 2 orders {'x', 'y'} as seed 0 does), so these are
# seeds of 1..399 whose iteration order differs from seed 0's on most sets of axis names
# (chosen on the pairs {a, b} of x, y, z, w, i, j, k, l, m in both insertion orders and the
# sets of three and four mesh axis names: 33-37 of 41, against 13-29 for seeds 1-8; each
# differs on 29-32 of the 36 pairs, CPython 3.11's SipHash-1-3 string hash;
# tests/test_judge_path.py checks the pairs). Job j of a run starts at the j-th.
LOWERING_HASH_SEEDS = (334, 302, 264, 175, 9, 389, 360, 338)
UNCONFIRMED_KEPT = 20  # unconfirmed crashes kept (the last ones) in Stats.unconfirmed


def generator_error(caps: dict, api_error: str) -> str:
    """The one-line message of a program that reached an API its JAX lacks (``api_error`` from
    fuzz/worker.py ``program_api_error``): "generator error: JAX 0.12.1 has no jax.experimental.shard_alike"."""
    return f"generator error: JAX {caps.get('jax_version', '?')} {api_error}"


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
    # of those, programs whose own code reached a JAX API this release lacks (Runner.run): {message: programs}
    generator_errors: Counter = field(default_factory=Counter)
    worker_seconds: float = 0.0  # seconds spent waiting for the workers (the reference overlaps their runs)
    reference_seconds: float = 0.0
    features: Counter = field(default_factory=Counter)
    depths: Counter = field(default_factory=Counter)
    unconfirmed_total: int = 0  # crashes and hangs that did not happen again in a fresh worker
    # the last UNCONFIRMED_KEPT of those: {"worker": "execute" | "lowering", "status": "crash" | "hang" | "memory",
    # "signal": str, "seconds": wall time of the run, "stderr": its stderr tail}
    unconfirmed: deque = field(default_factory=lambda: deque(maxlen=UNCONFIRMED_KEPT))


class Runner:
    """Workers for one JAX (``python``: its interpreter, None for this one) and the oracles.

    ``determinism``: also lower every program in a second worker with another
    PYTHONHASHSEED; ``timeout``: seconds per program (None: :func:`default_timeout`);
    ``source_hook``: applied to each rendered source before it runs (fault injection in
    tests); ``job``: the job's index in a run of several (``--jobs``), which picks the
    lowering worker's first hash seed (job j starts at the j-th of LOWERING_HASH_SEEDS). Raises fuzz.execute.WorkerError if a worker does not start.

    ``trust_fresh`` (default False): a crash or hang of a worker that had run nothing since
    it started counts as confirmed without a second run. The reducers set it while they
    run candidates of a crash: a candidate is kept only when it shows the recorded
    finding's signature (signal and ``Check failed`` line), which a kill from outside
    would not, and most candidates of a crash crash too, each in the worker the last
    crash restarted, so the second run would only double their cost.
    """

    def __init__(self, python: str | None = None, determinism: bool = True, timeout: float | None = None,
                 source_hook=None, job: int = 0):
        self.timeout = timeout
        self.source_hook = source_hook or (lambda src: src)
        self.worker = Worker(python=python, hash_seed=0)
        self.lowerer = None
        try:
            first = LOWERING_HASH_SEEDS[job % len(LOWERING_HASH_SEEDS)]  # (jobs of a run compare against other seeds)
            self.lowerer = Worker(python=python, hash_seed=first) if determinism else None
        except BaseException:
            self.worker.kill()
            raise
        self.caps = self.worker.caps
        self.history: deque = deque(maxlen=HISTORY)  # (source, program) of the worker's last programs
        self.stats = Stats()
        self.trust_fresh = False
        self.last_generator_errors: list = []  # the generator errors of the last run (see run)

    def run(self, program: dict) -> tuple:
        """Execute and judge one program: (findings, rendered source).

        ``findings`` is a list of Finding; crash and hang findings carry the earlier
        programs (sources) they need in ``history``. A crash or hang is a finding only
        when it happens again in a fresh worker (:meth:`confirm`); one that does not
        (a worker killed from outside, the OOM killer, a flaky machine) is counted in
        ``stats.unconfirmed_total`` and ``stats.unconfirmed`` instead. The same holds
        for the lowering worker: its crash is re-run in a fresh lowering worker.

        A program whose own code raised reaching a JAX API this release lacks (a module, an
        attribute, a keyword: ``oracles.internal_error.api_errors``) is the generator's fault:
        no finding, counted in ``stats.invalid`` and ``stats.generator_errors``, its messages
        ("generator error: JAX 0.12.1 has no jax.experimental.shard_alike") in
        ``last_generator_errors``.
        """
        INTERRUPTS.check()  # a safe point for a pending stop signal (see fuzz.util.INTERRUPTS)
        self.stats.programs += 1
        self.last_generator_errors = []
        try:
            check_program(program, caps=self.caps)
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
        # The main worker lowers each call once after running them all; the lowering worker
        # (another PYTHONHASHSEED, nothing executed) lowers, clears JAX's caches and lowers
        # again. Clearing caches in the main worker instead would make every eager op of
        # its next program compile again (measured: 14.0 s against 8.4 s for 80 drawn
        # programs with and without that second round, jax 0.10.2).
        lower = True if self.lowerer else False
        t0 = time.perf_counter()
        fresh = self.worker.programs_run == 0  # nothing ran in this worker since it started
        if self.lowerer is not None:
            self.lowerer.submit(source, "only")
        self.worker.submit(source, lower=lower)
        # The reference runs in this process while the workers run the program (a second
        # core is used instead of waiting); it is used only if the program ran.
        t_ref = time.perf_counter()
        reference, reference_error = self._reference(program)
        t0 += time.perf_counter() - t_ref  # (worker_seconds: the time spent waiting for the workers)
        outcome = self.worker.collect(timeout, watch=(self.lowerer,) if self.lowerer is not None else ())
        other = self.lowerer.collect(timeout) if self.lowerer is not None else None
        history = [src for src, _ in self.history]
        earlier_programs = [p for _, p in self.history]
        self.history.append((source, program))
        lowering_note = ""
        if outcome["status"] != "ok":
            if fresh and self.trust_fresh:
                outcome["history"] = []  # it failed alone in a fresh worker already (see trust_fresh)
            else:
                outcome["history"] = self.confirm(source, outcome, history, timeout, lower)
            self.history.clear()
            if outcome["history"] is None:
                self._unconfirmed("execute", outcome)
                self.stats.worker_seconds += time.perf_counter() - t0
                self.recycle()
                return [], source
        elif other is not None and other["status"] != "ok":
            again = self.lowerer.run(source, timeout, lower="only")  # collect() restarted it: a fresh worker
            if self.same_failure(again, other):
                lowering_note = "reproduced alone in a fresh lowering worker"
            else:
                self._unconfirmed("lowering", other)
                other = again if again["status"] == "ok" else None
        self.stats.worker_seconds += time.perf_counter() - t0
        self.recycle()
        wrong = oracles.internal_error.api_errors(outcome) or oracles.internal_error.api_errors(other)
        if wrong:  # the program itself reached an API this JAX lacks: the generator's fault, on any release
            self.stats.invalid += 1
            self.last_generator_errors = [generator_error(self.caps, w) for w in wrong]
            self.stats.generator_errors.update(self.last_generator_errors)
            return [], source
        found = []
        if outcome["status"] != "ok":
            reference = None
        elif reference_error is not None:  # the reference refused a program the generator made: our bug
            self.stats.invalid += 1
            found.append(Finding("reference", type(reference_error).__name__, str(reference_error)))
        found += oracles.judge(program, outcome, reference, other,
                               seeds=(self.worker.hash_seed, self.lowerer.hash_seed if self.lowerer else None))
        if outcome["status"] != "ok":
            h = outcome["history"]
            note = ("reproduced alone in a fresh worker" if not h else
                    f"reproduced in a fresh worker after {len(h)} earlier program(s) (kept in the finding)")
            for f in found:
                f.details = f"{note}\n{f.details}"
                f.history = h
                f.history_programs = earlier_programs[len(earlier_programs) - len(h):] if h else []
        elif lowering_note:
            for f in found:
                if f.oracle in ("crash", "hang"):  # (the execution went fine: these come from the lowering worker)
                    f.details = f"{lowering_note}\n{f.details}"
        if any(f.oracle == "internal-error" for f in found):
            self.stats.rejected += 1
        return found, source

    @contextlib.contextmanager
    def trusting_fresh(self):
        """``trust_fresh`` on for the ``with`` block (a reducer's candidates: see the class docstring)."""
        self.trust_fresh = True
        try:
            yield self
        finally:
            self.trust_fresh = False

    def _reference(self, program: dict) -> tuple:
        """(reference results or None, the exception the reference raised or None); times it."""
        t0 = time.perf_counter()
        try:
            return evaluate(program, self.caps), None
        except Exception as e:
            return None, e
        finally:
            self.stats.reference_seconds += time.perf_counter() - t0

    @staticmethod
    def same_failure(again: dict, outcome: dict) -> bool:
        """Whether a re-run failed as the first run did: both hung, or both died of the same signal."""
        return again["status"] == outcome["status"] != "ok" and again.get("signal") == outcome.get("signal")

    def _unconfirmed(self, worker: str, outcome: dict) -> None:
        self.stats.unconfirmed_total += 1
        self.stats.unconfirmed.append({"worker": worker, "status": outcome["status"],
                                       "signal": outcome.get("signal", "timeout" if outcome["status"] == "hang"
                                                             else outcome["status"]),
                                       "seconds": round(outcome.get("wall", 0.0), 1),
                                       "stderr": outcome.get("stderr", "")[-1500:]})

    def confirm(self, source: str, outcome: dict, history: list, timeout: float, lower: bool | str = False):
        """Re-run a program that killed or hung its worker in a fresh one (with the same ``lower`` mode).

        Returns [] when it fails alone, the shortest suffix of ``history`` (earlier
        programs of that worker) after which it fails, or None when nothing reproduces.
        """
        def fails(earlier: list) -> bool:
            self.worker.restart()
            for src in earlier:
                if self.worker.run(src, timeout, lower=lower)["status"] != "ok":
                    return False  # an earlier program failed by itself: not this history
            return self.same_failure(self.worker.run(source, timeout, lower=lower), outcome)

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

        The lowering worker also moves to the next of LOWERING_HASH_SEEDS every
        ROTATE_HASH_SEED programs: each was chosen to order sets of axis names unlike seed 0,
        and no one seed does so for every set, so comparing against several finds more
        order-dependent lowerings than comparing against one.
        """
        for w in (self.worker, self.lowerer):
            if w is None:
                continue
            rotate = w is self.lowerer and w.programs_run >= ROTATE_HASH_SEED
            if rotate or w.programs_run >= RECYCLE_PROGRAMS or w.rss_bytes() > RECYCLE_BYTES:
                if rotate:  # the next of LOWERING_HASH_SEEDS
                    k = LOWERING_HASH_SEEDS.index(w.hash_seed) if w.hash_seed in LOWERING_HASH_SEEDS else -1
                    w.hash_seed = LOWERING_HASH_SEEDS[(k + 1) % len(LOWERING_HASH_SEEDS)]
                w.restart()
                if w is self.worker:
                    self.history.clear()

    def close(self) -> None:
        """Kill the workers (and anything they started)."""
        for w in (self.worker, self.lowerer):
            if w is not None:
                w.kill()

