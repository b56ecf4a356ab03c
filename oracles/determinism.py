"""Determinism oracle: the same program lowers to the same StableHLO text in every process.

The campaign lowers every call in its main worker after running them all, and in a second
worker started with another ``PYTHONHASHSEED`` (lowering only, no compile: twice, before
and after ``jax.clear_caches()``). Any difference is a finding with a unified diff of the
first differing lines: a lowering that depends on Python's hash seed defeats the
persistent compilation cache (seed B in ``../shared/seeds.md``).
"""
from __future__ import annotations

import difflib
import re

from oracles.common import Finding, call_label, normalize

NAMES = ("determinism",)  # the oracle names of the findings this module makes

# Fields that legitimately differ between processes: a host callback is named in the
# lowering by the address of its Python object (custom_call backend_config).
# Older releases pass that address as an i64 constant instead.
_VOLATILE = [(re.compile(r'backend_config = "\d+"'), 'backend_config = "<callback>"'),
             (re.compile(r"dense<\d{10,}>"), "dense<callback>")]


def canonical(text: str) -> str:
    """A lowering with the per-process callback addresses blanked."""
    for pat, rep in _VOLATILE:
        text = pat.sub(rep, text)
    return text


def first_diff(a: str, b: str, context: int = 2, limit: int = 40) -> tuple:
    """(first differing line of ``a`` (or ``b``), unified diff of at most ``limit`` lines)."""
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "first", "second", n=context, lineterm=""))
    changed = next((ln for ln in lines[2:] if ln[:1] in "+-"), "")
    return changed[1:].strip(), "\n".join(lines[:limit])


def judge(program: dict, outcome: dict, other: dict | None, seeds: tuple = ("0", "1")) -> list:
    """Findings for calls whose lowering differs across processes or after clearing caches.

    ``outcome``: the main worker's (``lowering`` per call); ``other``: the second worker's
    lowering-only outcome (``lowering`` and ``relowering`` per call; None when not run).
    A ``relowering`` in either (each worker mode that clears caches gives one) is compared
    with that worker's own ``lowering``.
    """
    found = []
    for k, call in enumerate(outcome.get("calls", [])):
        text = call.get("lowering")
        if not text:
            continue
        text = canonical(text)
        label = call_label(program["calls"][k])
        ok_other = other is not None and other.get("status") == "ok" and k < len(other["calls"])
        for rec in [call] + ([other["calls"][k]] if ok_other else []):
            first, again = rec.get("lowering"), rec.get("relowering")
            if first is None or again is None:
                continue
            first, again = canonical(first), canonical(again)
            if again != first:
                line, diff = first_diff(first, again)
                found.append(Finding("determinism", "within-process",
                                     f"{label}: lowering changes after jax.clear_caches(): {line[:120]}", k, diff,
                                     signature=f"determinism: within-process: {normalize(line)}"))
                break
        if ok_other:
            theirs = other["calls"][k].get("lowering")
            theirs = canonical(theirs) if theirs is not None else None
            if theirs is not None and theirs != text:
                line, diff = first_diff(text, theirs)
                found.append(Finding("determinism", "cross-process",
                                     f"{label}: lowering differs between PYTHONHASHSEED={seeds[0]} and "
                                     f"{seeds[1]}: {line[:120]}", k, diff,
                                     signature=f"determinism: cross-process: {normalize(line)}"))
    return found
