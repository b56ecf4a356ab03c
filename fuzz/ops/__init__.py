"""The op registry: every primitive of the program model, declared once.

Each op is an instance of a subclass of :class:`fuzz.ops.base.Op`, in one module per
family, and carries its parameters (JSON Schema), typing rule, draw (how to generate it
valid in a context), unsharded reference, JAX source rendering, release gate, whether it
may appear under grad, and its feature names. The typing rules (:mod:`fuzz.typecheck`),
the program schema (:mod:`fuzz.program`), the renderer, the reference, the generator
(:mod:`strategies.programs`) and the report's features look ops up here; an unknown op is
a ProgramError. The structural equation ``call`` (a nested function under a chain of
transforms) and the transforms themselves stay in those modules.

To add an op: a subclass in its family's module, listed in that module's ``OPS``
(tests/test_registry.py checks that it has every part and that its parts agree).
"""
from __future__ import annotations

from fuzz.ops import (callbacks, collectives, custom, elementwise, gather, indices, linalg, movement, random,
                      reductions, refs, scans, selection, sharding, slicing)
from fuzz.ops.base import Op, ProgramError

MODULES = (elementwise, reductions, linalg, movement, slicing, gather, scans, selection, sharding, indices,
           refs, collectives, callbacks, custom, random)

REGISTRY: dict = {}
for _module in MODULES:
    for _op in _module.OPS:
        if _op.name in REGISTRY:
            raise RuntimeError(f"op {_op.name!r} is declared twice")
        REGISTRY[_op.name] = _op

# Relative weight of each family when the generator draws an equation ("call": a nested
# call of a function under transforms, drawn by strategies.programs). The order is the
# generator's: simplest families first, so that shrinking moves toward them.
# "index" (start indices) has weight 0: its ops are drawn only before an op that needs one.
FAMILY_WEIGHTS = {"unary": 1, "convert": 1, "binary": 1, "reduce": 1, "transpose": 1, "matmul": 1, "broadcast": 1,
                  "movement": 2, "scan": 1, "select": 1, "sharding": 1, "state": 1, "index": 0, "collective": 3, "random": 1,
                  "io_callback": 1, "callback": 1, "custom": 1, "call": 2}

STRUCTURAL = ("call",)  # equations that are not ops: a nested function under a chain of transforms


def get(name) -> Op:
    """The op called ``name``; ProgramError ("unknown primitive") for any other name."""
    op = REGISTRY.get(name) if isinstance(name, str) else None
    if op is None:
        raise ProgramError(f"unknown primitive {str(name)[:40]!r}")
    return op


def family(name: str) -> tuple:
    """The ops of a family, in registry order."""
    return tuple(op for op in REGISTRY.values() if op.family == name)


def names(family_name: str | None = None) -> tuple:
    """Names of all ops (or of one family), in registry order."""
    return tuple(n for n, op in REGISTRY.items() if family_name is None or op.family == family_name)
