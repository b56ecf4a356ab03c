"""The seeded values of a program: its inputs and the weights of wsum, cotangents and tangents.

One definition, used by the reference (fuzz/reference.py) and the ops that carry seeded
constants (a convolution's kernel, a windowed sum's weights: fuzz/ops/linalg.py,
fuzz/ops/reductions.py); the rendered source's ``make_input`` and ``weights`` helpers
(fuzz/render.py) compute the same values in the worker. NumPy only.
"""
from __future__ import annotations

import math

import numpy as np

from fuzz.errors import ProgramError


def make_input(seed: int, shape, values: str = "seeded", dtype: str = "float32") -> np.ndarray:
    """The value of a program input (float32 array of ``shape``), the same as the rendered source's.

    ``values`` (the input's optional "values" field, program schema ``$defs/input``):
    "seeded" (default): multiples of 1/8 in [-1, 1] drawn from ``seed``; "arange":
    ``k / n`` for the ``n`` elements in row-major order; "ones": all 1. Raises
    ProgramError for another ``values``. An int32 input (``dtype``, a scalar start index):
    "seeded": an integer in [-4, 20] drawn from ``seed`` (negative and past-the-end starts
    included); "arange": 0; "ones": 1.
    """
    shape = tuple(shape)
    n = math.prod(shape)
    if dtype == "int32":
        if values not in ("seeded", "arange", "ones"):
            raise ProgramError(f"input values {str(values)[:40]!r} is not seeded, arange or ones")
        v = {"arange": 0, "ones": 1}.get(values)
        if v is None:
            v = np.random.default_rng(seed).integers(-4, 21)
        return np.full(shape, v, np.int32)
    if values == "ones":
        return np.ones(shape, np.float32)
    if values == "arange":
        return np.arange(n, dtype=np.float32).reshape(shape) / n
    if values != "seeded":
        raise ProgramError(f"input values {str(values)[:40]!r} is not seeded, arange or ones")
    return (np.random.default_rng(seed).integers(-8, 9, size=shape).astype(np.float32) / 8)


def weights(seed: int, shape) -> np.ndarray:
    """Seeded weights of a ``wsum`` and cotangents / tangents of ``vjp`` / ``jvp`` (float32, ``shape``).

    Multiples of 1/8 in [-1, 1] without 0 (so every element counts), drawn from ``seed``
    as inputs are (:func:`make_input`); never all equal when there are two or more
    elements (the first is negated), so that a permuted cotangent differs. The rendered
    source's ``weights`` helper (fuzz/render.py) is the same code.
    """
    w = np.random.default_rng(seed).integers(-8, 8, size=tuple(shape))
    w = (w + (w >= 0)).astype(np.float32) / 8
    if w.size > 1 and (w == w.flat[0]).all():
        w.flat[0] = -w.flat[0]
    return w
