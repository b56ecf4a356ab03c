"""Callbacks oracle: the values each io_callback receives match the reference's.

Compared as *sets* of float values per callback tag: how many times a host function
runs (once per device under shard_map, once or per element under vmap) is not
specified by JAX, what it receives is.
"""
from __future__ import annotations

import numpy as np

from oracles.common import TOLERANCE, Finding, call_label, value_signature

NAMES = ("callbacks",)  # the oracle names of the findings this module makes


def _covered(xs: np.ndarray, ys: np.ndarray, tol: float) -> np.ndarray:
    """Which of the sorted values xs lie within tol (relative) of some value in sorted ys."""
    if ys.size == 0:
        return np.zeros(xs.shape, bool)
    i = np.clip(np.searchsorted(ys, xs), 1, ys.size - 1) if ys.size > 1 else np.zeros(xs.shape, int)
    near = np.minimum(np.abs(ys[i] - xs), np.abs(ys[np.maximum(i - 1, 0)] - xs))
    return near <= tol * np.maximum(1.0, np.abs(xs))


def judge(program: dict, outcome: dict, reference: dict) -> list:
    """Findings for callbacks that never ran, or received values the reference does not."""
    found = []
    tol = TOLERANCE["float32"]
    for k, (got, want) in enumerate(zip(outcome["calls"], reference["callbacks"])):
        if not got["ok"]:
            continue
        label = call_label(program["calls"][k])
        for tag, ref in sorted(want.items()):
            if tag not in got["callbacks"]:
                found.append(Finding("callbacks", "not-called", f"{label}: an io_callback never ran", k,
                                     f"callback {tag} expected values {ref[:10]}",
                                     signature=value_signature("callbacks", "not-called", program, [k])))
                continue
            act = np.sort(got["callbacks"][tag])
            extra = act[~_covered(act, ref, tol)]
            missing = ref[~_covered(ref, act, tol)]
            if extra.size or missing.size:
                found.append(Finding("callbacks", "wrong-value", f"{label}: an io_callback received other values", k,
                                     f"callback {tag}: unexpected {extra[:10]}, missing {missing[:10]}",
                                     signature=value_signature("callbacks", "wrong-value", program, [k])))
        for tag in sorted(set(got["callbacks"]) - set(want)):
            found.append(Finding("callbacks", "unexpected-call", f"{label}: an io_callback ran that should not", k,
                                 f"callback {tag}",
                                 signature=value_signature("callbacks", "unexpected-call", program, [k])))
    return found
