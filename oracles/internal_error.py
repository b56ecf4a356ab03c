"""Internal-error oracle: an exception JAX raised on a valid program.

There is no allow-list of messages: the generator avoids documented limitations by
construction (fuzz/typecheck.py), so every exception is a finding until triaged.
"""
from __future__ import annotations

from oracles.common import Finding, call_label


def judge(program: dict, outcome: dict) -> list:
    """One finding per call that raised, and one if the rendered module itself failed."""
    found = []
    if outcome.get("module_error"):
        e = outcome["module_error"]
        found.append(Finding("internal-error", e["type"], e["message"], None, e["traceback"]))
    for k, c in enumerate(outcome["calls"]):
        if not c["ok"]:
            e = c["error"]
            label = call_label(program["calls"][k])
            found.append(Finding("internal-error", e["type"], e["message"] or label, k,
                                 f"{label}\n{e['traceback']}"))
    return found
