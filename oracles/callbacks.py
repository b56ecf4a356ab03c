"""Callbacks oracle: the values each host callback receives match the reference's.

Values are compared per callback tag and per *position* as sets of float values: the
position of an element is its flat index within the trailing dims of the array the host
function received that are the argument's local dims (one device's block in a shard_map,
one example under vmap; batch dims lead: ``fuzz.typecheck.note_callback_rank``). How many
times a host function runs, and how many leading batch dims it sees, depends on the
transforms, and only some of it is documented; where an element sits within the local
block does not, so a wrong permutation of a block's elements shows (a permutation of whole
blocks between devices or examples does not). What JAX documents,
and therefore what is checked, per kind of callback (the op that carries the tag):

- ``io_callback``: "guaranteed execution" (the table of the External callbacks guide,
  https://docs.jax.dev/en/latest/external-callbacks.html): a callback the reference runs
  must run (``not-called``), and its host function receives exactly the values the
  reference's does, none missing and none other (``wrong-value``).
- ``pure_callback``: "safe to be called multiple times ... or not to be called at all when
  e.g. the output of a jit-decorated function has no data dependence on its value"; it
  "may be silently elided or called multiple times" (the ``jax.pure_callback`` docstring,
  https://docs.jax.dev/en/latest/_autosummary/jax.pure_callback.html, and the guide). So a
  pure callback that never runs, or misses values, is no finding (its result, where a
  call returns it, is checked by the differential oracle); a value its host function
  receives that the reference's never does is (``wrong-value``).
- ``debug_callback`` (``jax.debug.callback``): "the effect could be dropped, duplicated,
  or potentially reordered" (its docstring): checked as pure_callback is.

How often a host function runs is not compared, for any kind: the counts JAX documents
are "once per batch element" under vmap with ``vmap_method="sequential"`` (one call on
the batched arguments with "expand_dims" / "broadcast_all"), "one invocation per device,
each seeing only its own shard" in a fully manual shard_map, and one call "with the full
global value" under jit with automatic or explicit sharding (the guide's "Callbacks and
sharding" section), but pure and debug callbacks may be elided or duplicated on top of
that, and the worker records each tag's distinct values only (``fuzz/worker.py``).
A tag the reference never records (a callback that ran where the program does not run
it) is a finding for every kind (``unexpected-call``). ``jax.debug.print`` has no tag:
what it prints is not checked, only that it runs (the internal-error oracle).
"""
from __future__ import annotations

import numpy as np

from oracles.common import Finding, call_label, value_signature
from oracles.differential import tolerance

NAMES = ("callbacks",)  # the oracle names of the findings this module makes

# Callbacks whose host function JAX may skip or run on part of the values (see the docstring).
MAY_SKIP = frozenset({"pure_callback", "debug_callback"})


def callback_kinds(program: dict) -> dict:
    """{tag: the op that carries it} for every equation with a ``tag`` (nested functions included)."""
    out = {}

    def walk(fn):
        for e in fn["eqns"]:
            if e["op"] == "call":
                walk(e["fn"])
            elif "tag" in e:
                out[e["tag"]] = e["op"]

    for fn in program["functions"].values():
        walk(fn)
    return out


def _a(kind: str) -> str:
    """"an io_callback", "a pure_callback", ...: the op name with its article."""
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def as_cells(a) -> np.ndarray:
    """A record of what a host function received as (n, 2) float64 rows of (position, value)
    (``fuzz.worker.callback_cells``; an empty record may come as any empty array)."""
    return np.asarray(a, dtype=np.float64).reshape(-1, 2)


def _uncovered(xs: np.ndarray, ys: np.ndarray, tol: float) -> np.ndarray:
    """The rows of cells ``xs`` whose value no row of ``ys`` at the same position covers.

    Covered: within ``tol`` (relative, at least absolute ``tol``) of a value at that position,
    or equal to one (an infinity), or NaN where that position has a NaN (``take(...,
    mode='fill')`` out of bounds sends NaN to a callback on both sides). O(n log n): each row
    of ``xs`` is looked up among ``ys`` sorted by (position, value rank).
    """
    xs, ys = xs.reshape(-1, 2), ys.reshape(-1, 2)
    if not len(xs) or not len(ys):
        return xs
    vals = np.unique(np.concatenate([xs[:, 1], ys[:, 1]]))  # sorted, one NaN last
    m = vals.size + 1
    kx = xs[:, 0].astype(np.int64) * m + np.searchsorted(vals, xs[:, 1])
    ky = ys[:, 0].astype(np.int64) * m + np.searchsorted(vals, ys[:, 1])
    order = np.argsort(ky, kind="stable")
    ky, yp, yv = ky[order], ys[order, 0], ys[order, 1]
    i = np.searchsorted(ky, kx)
    exact = ky[np.minimum(i, ky.size - 1)] == kx  # the same value (NaN, inf included) at the same position
    near = np.full(len(xs), np.inf)
    with np.errstate(invalid="ignore"):
        for j in (np.clip(i - 1, 0, ky.size - 1), np.minimum(i, ky.size - 1)):  # the neighbours by value
            d = np.abs(yv[j] - xs[:, 1])
            near = np.where((yp[j] == xs[:, 0]) & (d < near), d, near)
        close = (near <= tol * np.maximum(1.0, np.abs(xs[:, 1]))) & np.isfinite(xs[:, 1])
    return xs[~(exact | close)]


def _show(cells: np.ndarray) -> str:
    """Up to ten (position, value) rows, as ``[(position, value), ...]``."""
    return "[" + ", ".join(f"({int(p)}, {v:g})" for p, v in cells[:10]) + (", ..." if len(cells) > 10 else "") + "]"


def judge(program: dict, outcome: dict, reference: dict) -> list:
    """Findings for callbacks that never ran, or received values the reference does not (see the docstring).

    ``outcome["calls"][k]["callbacks"]`` and ``reference["callbacks"][k]``: {tag: (n, 2)
    array of the distinct (position, value) rows received} per call ``k``
    (``fuzz.worker.callback_cells``). A value is
    compared with the reference's values at the same position within the argument's local
    dims.
    """
    found = []
    tol = tolerance(program)  # a callback argument may be computed through bfloat16
    kinds = callback_kinds(program)
    for k, (got, want) in enumerate(zip(outcome["calls"], reference["callbacks"])):
        if not got["ok"]:
            continue
        label = call_label(program["calls"][k])
        for tag, ref in sorted(want.items()):
            kind = kinds.get(tag, "io_callback")
            may_skip = kind in MAY_SKIP
            if tag not in got["callbacks"]:
                if not may_skip:
                    found.append(Finding("callbacks", "not-called", f"{label}: {_a(kind)} never ran", k,
                                         f"callback {tag} expected values {_show(as_cells(ref))}",
                                         signature=value_signature("callbacks", "not-called", program, [k])))
                continue
            act, ref = as_cells(got["callbacks"][tag]), as_cells(ref)
            extra = _uncovered(act, ref, tol)
            missing = _uncovered(ref, act, tol) if not may_skip else ref[:0]
            if extra.size or missing.size:
                found.append(Finding("callbacks", "wrong-value", f"{label}: {_a(kind)} received other values", k,
                                     f"callback {tag}: unexpected {_show(extra)}, missing {_show(missing)} "
                                     f"(position in its argument, value)",
                                     signature=value_signature("callbacks", "wrong-value", program, [k])))
        for tag in sorted(set(got["callbacks"]) - set(want)):
            kind = kinds.get(tag, "io_callback")
            found.append(Finding("callbacks", "unexpected-call", f"{label}: {_a(kind)} ran that should not", k,
                                 f"callback {tag}",
                                 signature=value_signature("callbacks", "unexpected-call", program, [k])))
    return found
