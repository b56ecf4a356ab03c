"""The transform registry (fuzz/transforms/): every transform has every part, and its parts agree.

Completeness: each transform declares its kind, the JAX APIs it renders to (keys of
fuzz/jax_api.py TRANSFORMS), a documentation link, its clause of the program schema and its
feature names, and defines its typing rule (enter, exit), rendering, reference and draw
(a kind with parameters). Agreement: programs drawn with only that transform (every other
one disabled) match the schema and the typing rules, render to source that compiles, use the
transform, and the reference's value of each transform's results has the shape the typing
rules give them; their features name it. Stages look transforms up there: an unknown kind
is an error in each of them.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hseed

from fuzz import jax_api as A
from fuzz import transforms as TR
from fuzz import typecheck as T
from fuzz.features import features
from fuzz.program import schema, validate_program
from fuzz.reference import Reference
from fuzz.render import render
from fuzz.transforms.base import Transform
from support.programs import call, eqn, fn, program
from strategies.programs import programs

KINDS = list(TR.REGISTRY.values())
PARTS = ("enter", "exit", "render")


def _defines(t: Transform, method: str) -> bool:
    """Whether the transform's class defines ``method`` (not Transform's placeholder)."""
    return getattr(type(t), method) is not getattr(Transform, method)


def _schema_kinds(clause: dict) -> set:
    k = clause["properties"]["kind"]
    return {k["const"]} if "const" in k else set(k["enum"])


@pytest.mark.parametrize("t", KINDS, ids=[t.kind for t in KINDS])
def test_every_transform_has_every_part(t):
    assert t.kind and TR.REGISTRY[t.kind] is t and t.kind in T.TRANSFORMS
    assert t.api and all(key in A.TRANSFORMS for key in t.api), t.api
    assert t.doc.startswith("https://docs.jax.dev/"), t.doc
    assert t.kind in _schema_kinds(t.schema)
    assert t.schema.get("additionalProperties") is False
    assert any(c is t.schema for c in schema("program")["$defs"]["transform"]["oneOf"])
    assert all(isinstance(f, str) for f in t.feature_names)
    missing = [m for m in PARTS if not _defines(t, m)]
    assert not missing, f"{t.kind} lacks {missing}"
    assert _defines(t, "evaluate") or _defines(t, "reference"), f"{t.kind} lacks a reference"
    # a kind with parameters draws them (the default draw gives the kind alone)
    assert _defines(t, "draw") or not set(t.schema.get("required", ())) - {"kind"}, f"{t.kind} lacks a draw"


def test_a_part_missing_is_noticed():
    class Half(Transform):
        kind = "half"
        schema = {"properties": {"kind": {"const": "half"}, "n": {"type": "integer"}}, "required": ["n"]}

        def enter(self, t, ctx, args, top):
            return ctx, list(args)

    half = Half()
    assert [m for m in PARTS if not _defines(half, m)] == ["exit", "render"]
    assert not (_defines(half, "evaluate") or _defines(half, "reference"))
    assert not _defines(half, "draw") and set(half.schema["required"]) - {"kind"}


def test_the_schema_clauses_are_the_registry_and_each_kind_matches_one():
    clauses = schema("program")["$defs"]["transform"]["oneOf"]
    assert clauses == TR.schema_clauses()
    for t in KINDS:
        assert sum(t.kind in _schema_kinds(c) for c in clauses) == 1, t.kind
    assert set().union(*map(_schema_kinds, clauses)) == set(TR.REGISTRY)


def _sin_program():
    return program(inputs=[("x0", (4,), 0)], functions={"f0": fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])},
                   calls=[call("f0", [{"kind": "hadamard"}], ["x0"])])


def test_an_unknown_transform_is_an_error_in_every_stage():
    p = _sin_program()
    ctx = T.root_ctx(p)
    with pytest.raises(T.ProgramError, match="unknown transform 'hadamard'"):
        T.enter({"kind": "hadamard"}, ctx, [T.Ty((4,))])
    with pytest.raises(T.ProgramError, match="unknown transform"):
        Reference(p).call([{"kind": "hadamard"}], p["functions"]["f0"], ctx, [np.zeros(4, np.float32)],
                          [T.Ty((4,))], {})
    with pytest.raises(T.ProgramError):
        render(p)
    with pytest.raises(T.ProgramError):
        validate_program(p)
    assert TR.lookup("hadamard") is None and TR.lookup(["jit"]) is None  # (untrusted input: any value)


# ------------------------------------------------------------------ parts agree on drawn programs
class CheckedReference(Reference):
    """The reference, checking every transform's results against the typing rules' types."""

    seen: set

    def call(self, transforms, fn, ctx, xs, ts, env):
        outs, out_ts = super().call(transforms, fn, ctx, xs, ts, env)
        if transforms:
            sizes = tuple(a.size for a in ctx.axes)
            assert len(outs) == len(out_ts), transforms[0]
            for x, t in zip(outs, out_ts):
                assert tuple(x.shape) == sizes + t.shape, (transforms[0], x.shape, sizes, t)
            self.seen.add(transforms[0]["kind"])
        return outs, out_ts


def agree(p: dict, seen: set) -> None:
    validate_program(p)
    compile(render(p), "<program>", "exec")
    ref = CheckedReference(p)
    ref.seen = seen
    ref.evaluate()
    names, _ = features(p)
    mesh = tuple(p["mesh"]["axis_names"])
    for c in p["calls"]:
        manual = frozenset()
        for t in c["transforms"]:
            name = T.transform_name(t)
            assert {"map": "lax_map"}.get(name, name) in names
            added: set = set()
            manual = TR.REGISTRY[t["kind"]].features(t, added, mesh, manual)
            assert added <= set(TR.REGISTRY[t["kind"]].feature_names) and added <= names, (t, added)


@pytest.mark.parametrize("t", KINDS, ids=[t.kind for t in KINDS])
def test_parts_agree_on_drawn_programs(t):
    # the transform alone (every other one disabled); rounds of 10 programs until one uses it
    # (auto_axes applies on an Explicit mesh only, a Jacobian to a small float argument)
    seen = set()
    disabled = frozenset(T.TRANSFORMS) - {t.kind}
    for k in range(6):
        @hseed(k)
        @settings(max_examples=10, suppress_health_check=list(HealthCheck), deadline=None)
        @given(programs(disabled=disabled, max_depth=2, max_eqns=3, max_calls=2))
        def check(p):
            agree(p, seen)

        check()
        if t.kind in seen:
            break
    assert t.kind in seen, f"no drawn program used {t.kind}: its draw never applies"
