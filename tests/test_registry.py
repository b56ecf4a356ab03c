"""The op registry (fuzz/ops/): every op has every part, and its parts agree.

Completeness: each op declares its name, family, parameters (JSON Schema), argument and
output counts, release gate, whether it may sit under grad, and defines its typing rule,
draw, reference, rendering and features; docs/program.md names it. Agreement: programs
drawn with only that op (every other op disabled) match the schema and the typing rules,
render to source that compiles, and the reference's value of each equation has the shape
and dtype the typing rules give it. The swarm hook (``programs(disabled=...)``) draws
valid programs without any disabled name, whatever subset is disabled.
"""
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz import ops as O
from fuzz import typecheck as T
from fuzz.features import features
from fuzz.ops.base import ExprOp, Op, version_tuple
from fuzz.program import schema, validate_program
from fuzz.reference import Reference
from fuzz.render import render
from strategies.programs import check_disabled, programs
from support.draws import alone
from support.judging import equations
from support.programs import call, eqn, fn, program

DOCS = (Path(__file__).resolve().parent.parent / "docs" / "program.md").read_text()
OPS = list(O.REGISTRY.values())
PARTS = ("types", "draw", "reference", "render")


def _defines(op: Op, method: str) -> bool:
    """Whether the op's class defines ``method`` (not Op's placeholder; render: ExprOp's expr)."""
    cls = type(op)
    if method == "render" and issubclass(cls, ExprOp):
        return cls.expr is not ExprOp.expr
    return getattr(cls, method) is not getattr(Op, method)


@pytest.mark.parametrize("op", OPS, ids=[op.name for op in OPS])
def test_every_op_has_every_part(op):
    assert op.name and O.REGISTRY[op.name] is op
    assert op.family in O.FAMILY_WEIGHTS and op.family not in O.STRUCTURAL
    assert isinstance(op.params, dict)
    for k, v in op.params.items():
        assert re.fullmatch(r"[a-z_]+", k) and k not in ("op", "args", "outs", "fn", "transforms"), k
        assert isinstance(v, dict) and v, (k, v)
    assert op.n_args is None or isinstance(op.n_args, (int, frozenset))
    assert isinstance(op.n_outs, frozenset) and op.n_outs
    assert isinstance(op.grad_ok, bool) and (op.grad_ok or op.no_grad_reason)
    assert isinstance(op.explicit_ok, bool)
    assert version_tuple(op.since) >= (0, 4), op.since
    missing = [m for m in PARTS if not _defines(op, m)]
    assert not missing, f"{op.name} lacks {missing}"
    assert all(isinstance(f, str) for f in op.feature_names)
    assert all(n in O.REGISTRY for n in op.preludes)
    assert f"`{op.name}`" in DOCS or re.search(rf"\b{op.name}\b", DOCS), f"docs/program.md does not name {op.name}"


def test_a_part_missing_is_noticed():
    class Half(Op):
        name, family = "half", "unary"

        def types(self, eqn, args, ctx):
            return [args[0]]

    assert [m for m in PARTS if not _defines(Half(), m)] == ["draw", "reference", "render"]


def test_the_generator_finds_its_roles_in_the_registry():
    # a grad's loss (sum first: shrinking goes there) and the op that makes a rank-0 result rank 1
    losses = [op.name for op in OPS if type(op).as_loss is not Op.as_loss]
    glues = [op.name for op in OPS if type(op).as_rank1 is not Op.as_rank1]
    assert losses[:2] == ["sum", "wsum"] and glues and glues[0] == "broadcast"
    for op in OPS:
        if op.name in glues:
            e = op.as_rank1("a", "b")
            assert T.eqn_types(e, [T.Ty(())], T.Ctx(mesh={"x": 2})) == [T.Ty((1,))]


def test_schema_and_signatures_come_from_the_registry():
    assert set(T.EQN_SIGNATURES) == set(O.REGISTRY) | {"call"}
    eqn_schema = schema("program")["$defs"]["eqn"]
    assert set(eqn_schema["properties"]["op"]["enum"]) == set(O.REGISTRY) | {"call"}
    for name, op in O.REGISTRY.items():
        assert T.EQN_SIGNATURES[name] == (op.n_args, op.n_outs, op.params)
    assert set(T.TIE_OPS) == {n for n, op in O.REGISTRY.items() if not op.grad_ok}


def _sin_program():
    return program(inputs=[("x0", (4,), 0)], functions={"f0": fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])},
                   calls=[call("f0", [], ["x0"])])


def test_an_unknown_op_is_an_error_everywhere():
    p = _sin_program()
    p["functions"]["f0"]["eqns"][0]["op"] = "erf"
    ctx = T.root_ctx(p)
    e = p["functions"]["f0"]["eqns"][0]
    with pytest.raises(T.ProgramError, match="unknown primitive"):
        T.eqn_types(e, [T.Ty((4,))], ctx)
    with pytest.raises(T.ProgramError, match="unknown primitive"):
        Reference(p).primitive(e, [np.zeros(4, np.float32)], [T.Ty((4,))], ctx)
    with pytest.raises(T.ProgramError, match="unknown primitive"):
        render(p)
    with pytest.raises(T.ProgramError, match="unknown primitive"):
        features(p)
    with pytest.raises(T.ProgramError):
        validate_program(p)


def test_an_unknown_transform_is_an_error_in_the_reference():
    p = _sin_program()
    ref = Reference(p)
    ctx = T.root_ctx(p)
    with pytest.raises(T.ProgramError, match="unknown transform"):
        ref.call([{"kind": "pmap"}], p["functions"]["f0"], ctx, [np.zeros(4, np.float32)], [T.Ty((4,))], {})


def test_release_gate_refuses_an_op_older_releases_lack():
    newest = next(op for op in OPS if op.name == "sin")
    caps = {"jax_version": "0.4.1", "n_devices": 8}
    assert f"no_op:{newest.name}" in T.release_rules(caps)
    with pytest.raises(T.ProgramError, match="this JAX release has no sin"):
        T.check_program(_sin_program(), caps=caps)
    assert not [r for r in T.release_rules({"jax_version": "0.10.2"}) if r.startswith("no_op:")]


# ------------------------------------------------------------------ parts agree on drawn equations
class CheckedReference(Reference):
    """The reference, checking every equation's values against the typing rules' types."""

    seen: set

    def primitive(self, e, xs, ts, ctx):
        outs = super().primitive(e, xs, ts, ctx)
        types = T.eqn_types(e, ts, ctx)
        sizes = tuple(a.size for a in ctx.axes)
        assert len(outs) == len(types), e
        for x, t in zip(outs, types):  # (x: a NumPy array, or a JAX tracer under a derivative)
            assert tuple(x.shape) == sizes + t.shape, (e, x.shape, sizes, t)
            assert np.dtype(x.dtype) == np.dtype(t.dtype), (e, x.dtype, t)
        self.seen.add(e["op"] if self.xp is np else ("under a derivative", e["op"]))
        return outs


DERIVATIVES = frozenset({"grad", "value_and_grad", "vjp", "jvp", "jacrev", "jacfwd", "linearize"})


def agree(p: dict, seen: set) -> None:
    validate_program(p)
    compile(render(p), "<program>", "exec")
    ref = CheckedReference(p)
    ref.seen = seen
    ref.evaluate()
    names, _ = features(p)
    for e in equations(p):
        if e["op"] != "call":
            assert O.get(e["op"]).features(e) <= names


@pytest.mark.parametrize("op", OPS, ids=[op.name for op in OPS])
def test_parts_agree_on_drawn_equations(op):
    # the op alone, without derivatives (the reference runs in NumPy: quick); rounds of 10
    # programs until one uses it (an op of Explicit meshes only applies on 1 mesh in 4)
    from hypothesis import seed as hseed

    seen = set()
    for k in range(4):
        @hseed(k)
        @settings(max_examples=10, suppress_health_check=list(HealthCheck))
        @given(programs(disabled=alone(op.name) | DERIVATIVES, max_depth=2, max_eqns=3, max_calls=2))
        def check(p):
            agree(p, seen)

        check()
        if op.name in seen:
            break
    assert op.name in seen, f"no drawn program used {op.name}: its draw never applies"


def test_parts_agree_under_derivatives():
    # every op together, derivatives included (the reference runs in eager jax.numpy there)
    seen = set()

    @settings(max_examples=30, suppress_health_check=list(HealthCheck))
    @given(programs(max_depth=3, max_eqns=4, max_calls=2))
    def check(p):
        agree(p, seen)

    check()
    assert len({op for op in seen if isinstance(op, tuple)}) >= 3, seen  # eager jax.numpy, under grad / vjp / jvp


# ------------------------------------------------------------------ swarm testing
NAMES = sorted(set(O.REGISTRY) | set(T.TRANSFORMS) | {"call"})


def used_names(p: dict) -> set:
    out = set()

    def walk(f):
        for e in f["eqns"]:
            out.add(e["op"])
            if e["op"] == "call":
                out.update(t["kind"] for t in e["transforms"])
                walk(e["fn"])

    for c in p["calls"]:
        out.update(t["kind"] for t in c["transforms"])
    for f in p["functions"].values():
        walk(f)
    return out


@settings(max_examples=150, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_programs_are_valid_whatever_is_disabled(data):
    disabled = data.draw(st.sets(st.sampled_from(NAMES)), label="disabled")
    p = data.draw(programs(disabled=disabled), label="program")
    validate_program(p)
    compile(render(p), "<program>", "exec")
    assert not used_names(p) & disabled, used_names(p) & disabled


def test_everything_disabled_leaves_identity_programs():
    @settings(max_examples=20)
    @given(programs(disabled=frozenset(NAMES)))
    def check(p):
        validate_program(p)
        assert used_names(p) == set()

    check()


def test_unknown_names_cannot_be_disabled():
    assert check_disabled(["sin", "jit", "call"]) == {"sin", "jit", "call"}
    with pytest.raises(ValueError, match="not an op"):
        check_disabled(["xmap"])


def test_pick_takes_the_most_recent_value_or_any():
    from fuzz.ops.base import Scope

    def scripted(*answers):
        it = iter(answers)
        return lambda strategy: next(it)

    scope = Scope({}, [], {}, frozenset(), None, None, None, 64, 4)
    assert scope.pick(scripted(False), ["v3", "v2", "a1"]) == "v3"  # the most recent (what shrinking gives)
    assert scope.pick(scripted(True, "a1"), ["v3", "v2", "a1"]) == "a1"  # or any, drawn


def test_a_programs_focus_ops_fill_its_equations():
    from fuzz.render import NEWEST_CAPS
    from support.programs import program
    from strategies.programs import _Gen

    shares = {}
    for focus in ((), ("roll",)):
        counts = [0, 0]

        @settings(max_examples=40, deadline=None, database=None)
        @given(st.data())
        def draw(data):
            g = _Gen(data.draw, NEWEST_CAPS, max_depth=1, max_eqns=5, disabled=frozenset({"call"}))
            g.focus = tuple(O.get(n) for n in focus)
            body, _ = g.function(T.root_ctx(program()), [T.Ty((4, 2))], {}, 1, want_scalar=False)
            counts[0] += sum(e["op"] == "roll" for e in body["eqns"])
            counts[1] += len(body["eqns"])

        draw()
        shares[focus] = counts[0] / max(counts[1], 1)
    # half of the equations try a focus op first: roll goes from ~1 equation in 60 to ~1 in 3
    assert shares[("roll",)] > 0.2 > 0.1 > shares[()], shares


def test_an_op_is_drawn_again_on_its_own_output():
    """One equation in four after an op repeats it on the value it just made (x.at[..].set(..).at[..].set(..))."""
    from fuzz.ops.base import Scope
    from fuzz.render import NEWEST_CAPS
    from support.programs import program
    from strategies.programs import _Gen

    scope = Scope({}, [], {}, frozenset(), None, None, None, 64, 4)
    scope.chained = True
    assert scope.pick(lambda strategy: pytest.fail("a chained pick draws nothing"), ["v3", "v2", "a1"]) == "v3"
    shares = {}
    for last in (None, "cumsum"):
        hits = [0, 0]

        @settings(max_examples=500, deadline=None, database=None)
        @given(st.integers(0, 2**30), st.data())
        def draw(_, data):  # (the first draw spreads the examples: Hypothesis enumerates a short choice tree)
            g = _Gen(data.draw, NEWEST_CAPS, max_depth=1, max_eqns=5, disabled=frozenset({"call"}))
            # (not v-names: the generator's fresh variables are v1, v2, ...)
            visible = {"u2": T.Ty((4, 2)), "a1": T.Ty((4, 2))}
            annotated = {}  # a sharding annotation the generator may put before the op (_Gen.annotate)
            for e, _ in g.equation(T.root_ctx(program()), visible, ["u2", "a1"], 1, O.get(last) if last else None):
                if e["op"] in ("with_sharding_constraint", "device_put"):
                    annotated[e["outs"][0]] = e["args"][0]
                hits[0] += e["op"] == "cumsum" and [annotated.get(a, a) for a in e["args"]] == ["u2"]
            hits[1] += 1

        draw()
        shares[last] = hits[0] / hits[1]
    # cumsum of the last value: under 0.01 here by the registry's weights, 0.15-0.21 after a cumsum (1 in 4
    # minus the misses; 0.09 in one run of 150 examples once a family was added, hence 500)
    assert shares["cumsum"] > 0.1 > 0.05 > shares[None], shares


def test_an_op_along_a_dim_is_annotated_as_split_along_it():
    """_Gen.annotate: half of the equations of an op with a dim of its own (Op.along) come with a
    sharding annotation splitting that dim, on the operand before it or on the result after it;
    never inside a shard_map body, never with the annotations disabled, and always well typed."""
    from fuzz.ops.base import Scope
    from fuzz.render import NEWEST_CAPS
    from strategies.programs import _Gen

    cumsum = O.get("cumsum")
    assert cumsum.along(eqn("cumsum", ["a"], ["b"], axis=1)) == (1, 1)
    assert O.get("sum").along(eqn("sum", ["a"], ["b"], axis=1)) == (1, None)
    assert O.get("sum").along(eqn("sum", ["a"], ["b"], axis=None)) == (None, None)
    assert O.get("at_set").along(eqn("at_set", ["a", "u"], ["b"], index=[0, 2])) == (0, 0)
    assert O.get("sin").along(eqn("sin", ["a"], ["b"])) == (None, None)
    counts = {"before": 0, "after": 0, "none": 0}
    manual_ctx = T.Ctx(mesh={"x": 2, "y": 4}, axes=(T.Axis("x", 2, "mesh"),))

    @settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 2**30), st.data())
    def draw(_, data):
        ctx = T.root_ctx(program(mesh=(("x", 2), ("y", 4))))
        visible = {"a1": T.Ty((4, 8))}
        for disabled, where in ((frozenset(), ctx), (frozenset({"with_sharding_constraint", "device_put"}), ctx),
                                (frozenset(), manual_ctx)):
            g = _Gen(data.draw, NEWEST_CAPS, max_depth=1, max_eqns=5, disabled=disabled)
            scope = Scope(visible, ["a1"], NEWEST_CAPS, disabled, g.var, g.tag,
                          lambda e: T.eqn_types(e, [scope.visible[a] for a in e["args"]], where), 4096, 4)
            e = cumsum.draw(data.draw, where, scope)
            typed = g._use(cumsum, e, where, scope)  # (raises ProgramError if ill typed)
            ops = [x["op"] for x, _ in typed]
            notes = [x for x, _ in typed if x["op"] in ("with_sharding_constraint", "device_put")]
            if disabled or where is manual_ctx:
                assert ops == ["cumsum"]
                continue
            if not notes:
                counts["none"] += 1
                continue
            (note,) = notes
            assert note["dim"] == e["axis"] and all(n in ("x", "y") for n in note["axes"])
            if ops[0] == "cumsum":
                counts["after"] += 1
                assert note["args"] == typed[0][0]["outs"]
            else:
                counts["before"] += 1
                assert typed[1][0]["args"] == note["outs"]

    draw()
    assert counts["before"] > 20 and counts["after"] > 20 and counts["none"] > 50, counts


def test_every_annotator_annotates_somewhere():
    """An op that defines Op.as_constraint (the generator's annotators) gives an annotation of a
    (4, 8) value along dim 0 on an Auto or an Explicit 2 x 4 mesh: one that always returns None
    would take a share of the annotations and make none."""
    from hypothesis import find

    annotators = [op for op in OPS if _defines(op, "as_constraint")]
    assert annotators
    for op in annotators:
        made = []
        for kind in ("auto", "explicit"):
            ctx = T.root_ctx(program(mesh=(("x", 2), ("y", 4)), axis_type=kind))
            made.append(op.as_constraint(lambda s: find(s, lambda _: True), ctx, "a", T.Ty((4, 8)), 0, "b"))
        assert any(m is not None for m in made), f"{op.name} defines as_constraint but never annotates"
