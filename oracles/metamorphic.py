"""Metamorphic oracle: calls of one function under wrappings that cannot change values agree.

Wrappings are equivalent when they differ only by ``jit`` and by vmap's
``spmd_axis_name`` (which only adds a mesh axis to the batching of shardings: the
``jax.vmap`` docstring). ``check_vma`` can change values (gradients of unvarying values
are summed over devices with the check on), so it is not an equivalence.
"""
from __future__ import annotations

import json

from oracles.common import Finding, call_label, value_signature
from oracles.differential import agree, ill_conditioned, tolerance

NAMES = ("metamorphic",)  # the oracle names of the findings this module makes


def equivalence_key(call: dict) -> str:
    """Calls with the same key must return the same values.

    jit and jax.checkpoint do not change values (jax.checkpoint's docstring: it only
    decides what is saved for the backward pass), nor does a vmap's spmd_axis_name.
    """
    chain = [{**t, "spmd_axis_name": None} if t["kind"] == "vmap" else t
             for t in call["transforms"] if t["kind"] not in ("jit", "checkpoint")]
    return json.dumps([call["function"], call["args"], chain], sort_keys=True)


def judge(program: dict, outcome: dict, reference: dict | None = None) -> list:
    """A finding for each successful call that disagrees with the first equivalent one.

    With the ``reference`` (:func:`fuzz.reference.evaluate`'s result), outputs that differ by no
    more than rounding noise amplified by the program are not a finding
    (:func:`oracles.differential.ill_conditioned`: equivalent calls share the reference's values).
    """
    found = []
    first: dict = {}
    nudged: dict = {}
    tol = tolerance(program)  # jit against eager of a bfloat16 program: a bf16 rounding apart (excess precision)

    def noise(k: int, i: int, x, y) -> bool:
        return reference is not None and ill_conditioned(reference, k, i, y, x, nudged)

    for k, (call, got) in enumerate(zip(program["calls"], outcome["calls"])):
        if not got["ok"]:
            continue
        key = equivalence_key(call)
        if key not in first:
            first[key] = k
            continue
        j = first[key]
        a, b = outcome["calls"][j]["outputs"], got["outputs"]
        if len(a) != len(b) or not all(agree(y, x, tol) or noise(k, i, x, y) for i, (x, y) in enumerate(zip(a, b))):
            found.append(Finding("metamorphic", "disagree",
                                 f"{call_label(program['calls'][j])} and {call_label(call)} disagree", k,
                                 f"call {j} and call {k} of one function differ",
                                 signature=value_signature("metamorphic", "disagree", program, [j, k])))
    return found
