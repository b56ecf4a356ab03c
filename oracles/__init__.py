"""Oracles: each judges one program's outcome and returns findings.

- :mod:`oracles.differential`: every call's outputs against the unsharded reference.
- :mod:`oracles.metamorphic`: calls of one function under equivalent wrappings agree.
- :mod:`oracles.callbacks`: the values io_callback host functions receive match the reference's.
- :mod:`oracles.internal_error`: JAX raised an exception on a valid program.
- :mod:`oracles.crash`: the worker died (signal) or hung (killed after the time limit).
- :mod:`oracles.determinism`: lowerings differ across processes or after clearing caches.

A finding's ``signature`` (oracle, kind, normalized message) deduplicates: a campaign
reports distinct bugs, not copies of one.
"""
from __future__ import annotations

from oracles import callbacks, crash, determinism, differential, internal_error, metamorphic
from oracles.common import Finding, normalize

__all__ = ["Finding", "judge", "normalize", "SAVABLE", "OWN"]

# Findings about JAX, which may be kept in the corpus (the corpus schema's oracle list is
# this tuple). Findings about shardfuzz itself ("generator": the generator drew a program
# the typing rules refuse; "reference": the reference refused one) are never saved.
SAVABLE = tuple(n for m in (differential, metamorphic, callbacks, internal_error, crash, determinism)
                for n in m.NAMES)
OWN = ("generator", "reference")


def judge(program: dict, outcome: dict, reference: dict | None, other: dict | None = None,
          seeds: tuple = (0, 1)) -> list:
    """All findings for one run (list of Finding).

    ``outcome``: from :meth:`fuzz.execute.Worker.run`; ``reference``: from
    :func:`fuzz.reference.evaluate`, or None when it was not computed; ``other``: the
    lowering-only outcome of a second worker with another hash seed (determinism);
    ``seeds``: the two workers' PYTHONHASHSEED values (for the message).
    """
    if outcome["status"] != "ok":
        return crash.judge(program, outcome)
    found = internal_error.judge(program, outcome)
    found += determinism.judge(program, outcome, other, seeds)
    if other is not None and other["status"] != "ok":
        found += [Finding(f.oracle, f.kind, f"while lowering only: {f.message}", f.call, f.details)
                  for f in crash.judge(program, other)]
    if reference is not None:
        found += differential.judge(program, outcome, reference)
        found += callbacks.judge(program, outcome, reference)
    found += metamorphic.judge(program, outcome, reference)
    return found
