"""Determinism oracle: the same program lowers to the same StableHLO text in every process.

The campaign lowers every call in its main worker after running them all, and in a second
worker started with another ``PYTHONHASHSEED`` (lowering only, no compile: twice, before
and after ``jax.clear_caches()``). Any difference is a finding with a unified diff of the
first differing lines: a lowering that depends on Python's hash seed defeats the
persistent compilation cache (seed B, described in ``benchmarks/rediscover.py``).
"""
from __future__ import annotations

import difflib
import re

from oracles.common import Finding, call_label

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
    """(first removed line of ``a`` (or added line of ``b``), first added line ("" if none),
    unified diff of at most ``limit`` lines)."""
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "first", "second", n=context, lineterm=""))
    body = lines[2:]
    removed = next((ln[1:].strip() for ln in body if ln[:1] == "-"), "")
    added = next((ln[1:].strip() for ln in body if ln[:1] == "+"), "")
    return removed or added, added if removed else "", "\n".join(lines[:limit])


_OP = re.compile(r"^([A-Za-z_][\w.]*)")  # the op a line starts with: dialect.op (sdy.sharding_group, func.func), module
_SSA = re.compile(r"^(%[\w#:, %]+=\s*)")  # the results an op line starts with
_ATTR = re.compile(r"([A-Za-z_][\w.]*)\s*=\s*(\"[^\"]*\"|#[\w.]+<[^>]*>|\[[^\]]*\]|[^\s,{}()]+)")


def diff_key(line: str, other: str) -> str:
    """What a lowering difference is about, for its signature: the MLIR op of the first
    differing line (``sdy.sharding_group``; else its first word) and, when the other lowering
    has a changed version of that line, the attributes whose values differ (``group_id``).

    One root cause gives one key whatever the shapes, SSA names and counters around it (a
    process-wide counter in ``shard_alike``'s lowering changed ``group_id`` in lines that
    differed in 14 other ways). The op and attribute syntax is StableHLO's / Shardy's printed
    MLIR (https://mlir.llvm.org/docs/LangRef/)."""
    stripped = _SSA.sub("", line)
    m = _OP.match(stripped)
    op = m.group(1)[:60] if m else "?"
    attrs = []
    if other:
        mine, theirs = dict(_ATTR.findall(stripped)), dict(_ATTR.findall(_SSA.sub("", other)))
        attrs = sorted(k for k in mine.keys() & theirs.keys() if mine[k] != theirs[k])
    return op + (f": {', '.join(a[:40] for a in attrs[:4])}" if attrs else "")


def _finding(kind: str, what: str, a: str, b: str, call: int) -> Finding:
    """A determinism finding of ``kind`` for lowerings ``a`` and ``b`` of call ``call``."""
    line, other, diff = first_diff(a, b)
    return Finding("determinism", kind, f"{what}: {line[:120]}", call, diff,
                   signature=f"determinism: {kind}: {diff_key(line, other)}")


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
                found.append(_finding("within-process", f"{label}: lowering changes after jax.clear_caches()",
                                      first, again, k))
                break
        if ok_other:
            theirs = other["calls"][k].get("lowering")
            theirs = canonical(theirs) if theirs is not None else None
            if theirs is not None and theirs != text:
                found.append(_finding("cross-process", f"{label}: lowering differs between "
                                      f"PYTHONHASHSEED={seeds[0]} and {seeds[1]}", text, theirs, k))
    return found
