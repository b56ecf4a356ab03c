"""Differential oracle: each call's outputs against the unsharded reference (fuzz/reference.py)."""
from __future__ import annotations

import numpy as np

from oracles.common import Finding, call_label, close, value_signature

NAMES = ("differential",)  # the oracle names of the findings this module makes


def judge(program: dict, outcome: dict, reference: dict) -> list:
    """Findings for calls that returned a different number, shape or value of outputs."""
    found = []
    for k, (got, want) in enumerate(zip(outcome["calls"], reference["results"])):
        if not got["ok"]:
            continue
        label = call_label(program["calls"][k])
        outs = got["outputs"]
        if len(outs) != len(want) or any(a.shape != b.shape for a, b in zip(outs, want)):
            found.append(Finding("differential", "wrong-shape", f"{label}: shapes differ from the reference",
                                 k, f"got {[a.shape for a in outs]}, expected {[b.shape for b in want]}",
                                 signature=value_signature("differential", "wrong-shape", program, [k])))
            continue
        for j, (a, b) in enumerate(zip(outs, want)):
            if not close(a, b):
                err = float(np.nanmax(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
                found.append(Finding("differential", "wrong-value", f"{label}: values differ from the reference",
                                     k, f"output {j}: max abs error {err:.3g}\ngot      {np.array2string(a, threshold=40)}"
                                        f"\nexpected {np.array2string(b, threshold=40)}",
                                     signature=value_signature("differential", "wrong-value", program, [k])))
                break
    return found
