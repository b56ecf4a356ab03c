"""The transform registry: every transform kind of the program model, declared once.

Each kind (a call's ``transforms`` entry ``{"kind": ...}``) is an instance of a subclass of
:class:`fuzz.transforms.base.Transform`, in one module per family, and carries its schema
clause, typing rule (enter / exit), rendering, reference, features, draw, the JAX APIs it
renders to (keys of :data:`fuzz.jax_api.TRANSFORMS`) and a documentation link. The typing
rules (:func:`fuzz.typecheck._enter` / ``_exit``), the program schema (:func:`fuzz.program.schema`),
the renderer, the reference, the features and the generator look kinds up here.

To add a transform: a module with its class and ``TRANSFORMS``, listed in :data:`MODULES`
(tests/test_transform_registry.py checks that it has every part and that its parts agree).
"""
from __future__ import annotations

from fuzz.transforms import auto_axes, checkpoint, control_flow, derivatives, hessian, jit, shard_map, vmap
from fuzz.transforms.base import Transform

MODULES = (jit, shard_map, vmap, derivatives, checkpoint, control_flow, auto_axes, hessian)

REGISTRY: dict = {}
for _module in MODULES:
    for _t in _module.TRANSFORMS:
        if _t.kind in REGISTRY:
            raise RuntimeError(f"transform {_t.kind!r} is declared twice")
        REGISTRY[_t.kind] = _t


def lookup(kind) -> Transform | None:
    """The transform of kind ``kind`` (any value: untrusted input), None for any other."""
    return REGISTRY.get(kind) if isinstance(kind, str) else None


def schema_clauses() -> list:
    """The program schema's ``$defs/transform`` clauses (one of which a transform entry matches):
    each distinct clause once, in registry order (kinds of a family may share one)."""
    out: list = []
    for t in REGISTRY.values():
        if not any(c is t.schema for c in out):
            out.append(t.schema)
    return out
