"""Differential oracle: each call's outputs against the unsharded reference (fuzz/reference.py).

Tolerance by dtype: outputs are float32 (function results stay float32), but a program
that converts values to bfloat16 or float16 (``astype``, fuzz/ops/elementwise.py) carries
that precision into them: every output of it is compared with the tolerance of the least
precise float dtype the program uses (:func:`tolerance`), the table of
``oracles.common.TOLERANCE``. Why not exact: the reference rounds every low-precision op
to its dtype (as eager JAX does), while XLA under jit keeps excess precision
(``xla_allow_excess_precision``, on by default: the rounding of a bfloat16 op's result is
dropped when it is converted to float32 right away, measured on jax 0.10.2), and float32
sums are ordered differently, which may move a value across a rounding boundary of the
low-precision dtype: a difference of about one unit in the last place of that dtype per
op. bfloat16 has 8 significand bits (unit roundoff u = 2**-8 = 3.9e-3): 3e-2 is about 8 u;
float16 has 11 (u = 2**-11 = 4.9e-4): 1e-2 is about 20 u. As for float32 the absolute
part is scaled by the largest magnitude of the expected output. A wrong shard or a wrong
permutation moves values by a multiple of 1/8 (inputs are multiples of 1/8): still far
outside (tests/test_dtypes.py plants one with bfloat16 in the program). An integer or bool
output (none today: results are float32) is compared exactly.
"""
from __future__ import annotations

import numpy as np

from oracles.common import TOLERANCE, Finding, call_label, value_signature

NAMES = ("differential",)  # the oracle names of the findings this module makes

LOW_PRECISION = ("bfloat16", "float16")  # least precise first


def tolerance(program: dict) -> float:
    """The relative tolerance of the program's float outputs: the least precise float dtype it
    converts values to (its ``features``: bfloat16, float16), else float32's."""
    from fuzz.features import features

    used, _ = features(program)
    for dt in LOW_PRECISION:
        if dt in used:
            return TOLERANCE[dt]
    return TOLERANCE["float32"]


def agree(actual: np.ndarray, expected: np.ndarray, tol: float) -> bool:
    """Whether two arrays agree: exactly for integer and bool dtypes; else within ``tol``
    relative, and ``tol`` times the largest finite expected magnitude (at least 1) absolute
    (NaN equals NaN)."""
    if actual.shape != expected.shape:
        return False
    if expected.dtype.kind in "biu":
        return actual.dtype.kind in "biu" and bool(np.array_equal(actual, expected))
    exp = np.asarray(expected, dtype=np.float64)
    act = np.asarray(actual, dtype=np.float64)
    finite = np.abs(exp[np.isfinite(exp)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    tol = max(tol, TOLERANCE.get(str(expected.dtype), 0.0))
    return bool(np.allclose(act, exp, rtol=tol, atol=tol * scale, equal_nan=True))


# Rounding noise of the reference's conditioning check (fuzz.reference.evaluate's ``nudge``:
# about 2 float32 ulps per op) and how much more than the noise's effect a difference must be
# to count: XLA and NumPy differ by a few ulps per op (transcendentals, sum orders).
NUDGE = 2.0 ** -22
NOISE_FACTOR = 64.0


def ill_conditioned(reference: dict, k: int, j: int, actual: np.ndarray, expected: np.ndarray, nudged: dict) -> bool:
    """Whether output ``j`` of call ``k`` differs from the reference by no more than
    :data:`NOISE_FACTOR` times what a rounding-size nudge of every op moves it by: a program that
    amplifies last-bit differences (a chaotic scan) has no right answer in float32 for the
    oracle to hold JAX to. The move is half the distance between the reference evaluated with
    every float32 op result nudged up and down (:meth:`fuzz.reference.Reference.nudged`), which does
    not depend on ``expected``. ``reference``: :func:`fuzz.reference.evaluate`'s result (one
    without its ``"nudged"`` function, as a test may build, is never ill-conditioned);
    ``nudged``: a cache shared by the outputs of one program.

    Inputs are multiples of 1/8 and a wrong shard, permutation or index moves values by such
    steps, far beyond a well-conditioned program's nudge (about 1e-7 relative).
    """
    if "nudged" not in reference or np.shape(actual) != np.shape(expected):
        return False
    if not nudged:
        nudged["up"], nudged["down"] = reference["nudged"](NUDGE), reference["nudged"](-NUDGE)
    if k >= len(nudged["up"]) or j >= len(nudged["up"][k]) or np.shape(nudged["up"][k][j]) != np.shape(expected):
        return False  # (another number or shape of outputs than the reference's: not a rounding matter)
    up, down = (np.asarray(nudged[w][k][j], np.float64) for w in ("up", "down"))
    err = np.asarray(actual, np.float64) - np.asarray(expected, np.float64)
    moved = (up - down) / 2
    if not (np.all(np.isfinite(moved)) and np.all(np.isfinite(err))):
        return False
    return float(np.max(np.abs(err), initial=0.0)) <= NOISE_FACTOR * float(np.max(np.abs(moved), initial=0.0))


def judge(program: dict, outcome: dict, reference: dict) -> list:
    """Findings for calls that returned a different number, shape or value of outputs.

    A value that differs by no more than rounding noise amplified by the program
    (:func:`ill_conditioned`) is not a finding."""
    found = []
    tol = tolerance(program)
    nudged: dict = {}
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
            if not agree(a, b, tol) and not ill_conditioned(reference, k, j, a, b, nudged):
                d = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
                err = float(np.nanmax(d)) if not np.all(np.isnan(d)) else float("nan")
                found.append(Finding("differential", "wrong-value", f"{label}: values differ from the reference",
                                     k, f"output {j}: max abs error {err:.3g}\ngot      {np.array2string(a, threshold=40)}"
                                        f"\nexpected {np.array2string(b, threshold=40)}",
                                     signature=value_signature("differential", "wrong-value", program, [k])))
                break
    return found
