"""Where a worker's seconds go: tracing, lowering, XLA compilation, execution (benchmarks/phases.py).

Imported by fuzz/worker.py (as a sibling module: the worker runs as a script under any
interpreter, so this module imports only the standard library, and JAX lazily) when the
environment variable ``SHARDFUZZ_PHASES`` is set; a campaign never sets it. Each reply of the
worker then carries ``phases``: {phase: seconds} for that program.

A phase is the *exclusive* time spent inside one of a few JAX functions, wrapped at the
worker's start (names measured in jax 0.10.2 and 0.12.1, jax/_src/...):

- ``trace``: ``interpreters.partial_eval.trace_to_jaxpr_dynamic`` / ``trace_to_jaxpr``
  (a Python function to a jaxpr: jit, shard_map, vmap and autodiff bodies, make_jaxpr);
- ``lower``: ``interpreters.pxla.lower_sharding_computation`` and
  ``interpreters.mlir.lower_jaxpr_to_module`` (a jaxpr to StableHLO, with the sharding
  annotations JAX computes in Python);
- ``compile``: ``compiler.compile_or_get_cached`` (XLA: HLO passes, the SPMD partitioner
  (Shardy or GSPMD), the CPU backend's optimisation and code generation);
- ``execute``: ``interpreters.pxla.ExecuteReplicated.__call__`` (running a compiled
  executable on the 8 host devices, up to the return of its output buffers).

Time inside a phase that is spent in a nested wrapped function counts for the inner one only,
so the phases add up to at most the program's seconds; the rest (``other``) is dispatch, eager
op-by-op bookkeeping, the program's own Python, callbacks' host functions, the worker's
encoding of results. A function a release lacks is simply not wrapped.
"""
from __future__ import annotations

import functools
import importlib
import time

ENV = "SHARDFUZZ_PHASES"

# (phase, module under jax._src, attribute path) of each wrapped function
TARGETS = (
    ("trace", "interpreters.partial_eval", "trace_to_jaxpr_dynamic"),
    ("trace", "interpreters.partial_eval", "trace_to_jaxpr"),
    ("lower", "interpreters.pxla", "lower_sharding_computation"),
    ("lower", "interpreters.mlir", "lower_jaxpr_to_module"),
    ("compile", "compiler", "compile_or_get_cached"),
    ("execute", "interpreters.pxla", "ExecuteReplicated.__call__"),
)
PHASES = ("trace", "lower", "compile", "execute")


class PhaseTimer:
    """Exclusive seconds per phase since the last :meth:`take` (float seconds, wall clock)."""

    def __init__(self):
        self.totals = dict.fromkeys(PHASES, 0.0)
        self._stack: list = []  # [phase, seconds spent in nested wrapped calls]
        self.wrapped: list = []  # "module:attribute" of each function wrapped

    def wrap(self, phase: str, fn):
        """``fn`` timed as ``phase`` (exclusive of nested wrapped calls); other attributes of ``fn``
        (a cache's ``evict_weakref``, say) pass through, and a method stays a method."""
        return _Timed(self, phase, fn)

    def install(self) -> list:
        """Wrap every function of TARGETS that this JAX has; returns the ones wrapped."""
        for phase, module, attr in TARGETS:
            try:
                owner = importlib.import_module("jax._src." + module)
                *outer, name = attr.split(".")
                for part in outer:
                    owner = getattr(owner, part)
                fn = getattr(owner, name)
            except (ImportError, AttributeError):
                continue
            setattr(owner, name, self.wrap(phase, fn))
            self.wrapped.append(f"{module}:{attr}")
        return self.wrapped

    def take(self) -> dict:
        """{phase: seconds} since the last call (rounded to microseconds), and start again."""
        out = {k: round(v, 6) for k, v in self.totals.items()}
        self.totals = dict.fromkeys(PHASES, 0.0)
        return out


class _Timed:
    """A wrapped function of :class:`PhaseTimer` (see ``PhaseTimer.wrap``)."""

    def __init__(self, timer: PhaseTimer, phase: str, fn):
        self._timer, self._phase, self.__wrapped__ = timer, phase, fn

    def __call__(self, *args, **kwargs):
        stack = self._timer._stack
        t0 = time.perf_counter()
        stack.append([self._phase, 0.0])
        try:
            return self.__wrapped__(*args, **kwargs)
        finally:
            _, nested = stack.pop()
            spent = time.perf_counter() - t0
            self._timer.totals[self._phase] += spent - nested
            if stack:
                stack[-1][1] += spent

    def __get__(self, obj, owner=None):  # (a method: bind the instance)
        return self if obj is None else functools.partial(self, obj)

    def __getattr__(self, name):
        return getattr(self.__wrapped__, name)
