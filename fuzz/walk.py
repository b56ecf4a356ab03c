"""Walkers of the program tree (the JSON IR of fuzz/schemas/program.schema.json): JAX-free.

A function is a dict with ``params``, ``eqns`` and ``results``; an equation may nest
functions as a value (``call``'s ``fn``) or as list items (``cond``'s branches). Used by the
reducer (fuzz/reduce.py) and the features of a program (fuzz/features.py).
"""
from __future__ import annotations


def is_fn(x) -> bool:
    """Whether ``x`` is a function of the program model."""
    return isinstance(x, dict) and {"params", "eqns", "results"} <= x.keys()


def subfns(eqn: dict):
    """(key path, function) of each function nested in an equation: a value or list item."""
    for k, v in eqn.items():
        if is_fn(v):
            yield (k,), v
        elif isinstance(v, list):
            for j, w in enumerate(v):
                if is_fn(w):
                    yield (k, j), w


def scopes(program: dict):
    """(path, function) of every function, nested ones too, in pre-order; a path is the tuple of
    keys and indices that reaches the function from the program (``("functions", "f0", "eqns", 2,
    "fn")``)."""
    def walk(path, fn):
        yield path, fn
        for i, e in enumerate(fn["eqns"]):
            for key, sub in subfns(e):
                yield from walk(path + ("eqns", i) + key, sub)
    for name, fn in program["functions"].items():
        yield from walk(("functions", name), fn)
