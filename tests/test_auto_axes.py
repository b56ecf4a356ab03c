"""The ``auto_axes`` transform: ``jax.sharding.auto_axes(f, out_sharding=...)`` on an Explicit mesh.

Typing rules (fuzz.typecheck.enter / exit_ / sealed / context_refusal), rendering, the
reference (the identity) against JAX under jit, grad and vmap with ops that an Explicit
mesh refuses outside (cumsum, dynamic_slice: Auto inside), a planted bug caught, and
derandomized generated programs with auto_axes that agree with the reference.
"""
import pytest
from hypothesis import HealthCheck, given, settings

import oracles
from fuzz import ops as O
from fuzz import typecheck as T
from fuzz.features import features
from fuzz.reference import Reference
from fuzz.render import render
from strategies.programs import programs
from support.judging import agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap


def auto(*out_specs):
    return {"kind": "auto_axes", "out_specs": list(out_specs)}


def body():
    """cumsum and a dynamic_slice (refused on an Explicit mesh outside auto_axes), then a loss."""
    return fn(["a"], [eqn("cumsum", ["a"], ["c"], axis=0), eqn("index", [], ["i"], axes=[], scale=1, offset=3),
                      eqn("dynamic_slice", ["c", "i"], ["d"], axis=0, size=2), eqn("sin", ["d"], ["s"])], ["s", "c"])


def loss():
    return fn(["a"], [eqn("cumsum", ["a"], ["c"], axis=1), eqn("sin", ["c"], ["s"]), eqn("wsum", ["s"], ["l"], seed=7)],
              ["l"])


def auto_program():
    calls = [call("f0", [auto([["x"], None], [None, ["y"]])], ["x0"]),
             call("f0", [JIT, auto([None, None], [["x", "y"], None])], ["x0"]),
             call("f1", [JIT, GRAD, auto([])], ["x0"]),
             call("f1", [auto([["x"], ["y"]]), GRAD], ["x0"]),
             call("f0", [JIT, vmap([0], [0, 0]), auto([None, ["y"]], [None, None])], ["x1"])]
    return program(mesh=(("x", 2), ("y", 4)), axis_type="explicit",
                   inputs=[("x0", (8, 4), 1), ("x1", (2, 8, 4), 2)], functions={"f0": body(), "f1": loss()},
                   calls=calls)


def test_auto_axes_typing():
    T.check_program(auto_program())
    explicit = T.Ctx(mesh={"x": 2, "y": 4}, explicit=True)
    t = auto([["x"]])
    inner, args = T.enter(t, explicit, [T.Ty((8,))])
    assert not inner.explicit and T.AUTO_BODY in inner.rules and args == [T.Ty((8,))]
    assert T.exit_(t, explicit, inner, args, [T.Ty((8,))]) == [T.Ty((8,))]
    with pytest.raises(T.ProgramError, match="divisible"):
        T.exit_(auto([["y"]]), explicit, inner, args, [T.Ty((2,))])
    with pytest.raises(T.ProgramError, match="'z' is not a mesh axis"):
        T.exit_(auto([["z"]]), explicit, inner, args, [T.Ty((8,))])
    with pytest.raises(T.ProgramError, match="Explicit"):  # an Auto mesh
        T.enter(t, T.Ctx(mesh={"x": 2}), [T.Ty((8,))])
    with pytest.raises(T.ProgramError, match="shard_map inside auto_axes"):
        T.enter(shard_map([[["x"]]], [[["x"]]]), inner, [T.Ty((8,))])
    assert T.context_refusal(O.get("with_sharding_constraint"), inner) is not None
    # an op without a sharding rule (conv) is refused on the Explicit mesh, allowed in the Auto body;
    # cumsum, with one, also where sharding types are tracked, but not where they are not (OPAQUE)
    assert T.context_refusal(O.get("conv"), inner) is None and T.context_refusal(O.get("conv"), explicit)
    opaque = T.Ctx(mesh={"x": 2, "y": 4}, explicit=True, rules=frozenset({T.OPAQUE}))
    assert T.context_refusal(O.get("cumsum"), explicit) is None and T.context_refusal(O.get("cumsum"), opaque)
    assert T.sealed(t, explicit) and not T.sealed(t, inner)
    with pytest.raises(T.ProgramError, match="no jax.sharding.auto_axes"):  # the release gate
        T.enter(t, T.Ctx(mesh={"x": 2}, explicit=True, rules=frozenset({"no_auto_axes"})), [T.Ty((8,))])
    # a body reading an input it was not passed (a capture) is refused under auto_axes
    p = auto_program()
    p["functions"] = {"f2": fn(["a"], [eqn("mul", ["a", "x0"], ["m"])], ["m"])}
    p["calls"] = [call("f2", [auto([None, None])], ["x0"])]
    with pytest.raises(T.ProgramError):
        T.check_program(p)
    p["calls"] = [call("f2", [], ["x0"])]
    T.check_program(p)


def test_auto_axes_rendering():
    src = render(auto_program())
    assert "jax.sharding.auto_axes(" in src and "auto_axes_replicated(f0, (P('x'), P(None, 'y')))" in src


def test_jax_agrees_with_the_reference_on_auto_axes(worker):
    if not worker.caps.get("auto_axes"):
        pytest.skip("this JAX has no jax.sharding.auto_axes")
    out = agree_with_jax(worker, auto_program())
    assert len(out["calls"]) == 5


class CumsumReversed(Reference):
    """The reference with a planted bug: cumsum runs from the other end."""

    def primitive(self, e, xs, ts, ctx):
        if e["op"] == "cumsum":
            xp = self.xp
            pos = len(ctx.axes) + e["axis"]
            return [xp.flip(xp.cumsum(xp.flip(xs[0], pos), axis=pos), pos)]
        return super().primitive(e, xs, ts, ctx)


def test_a_planted_bug_under_auto_axes_is_caught(worker):
    p = auto_program()
    assert {c for o, c in judged(worker, p, CumsumReversed(p).evaluate()) if o == "differential"} == {0, 1, 2, 3, 4}


@pytest.mark.slow  # (up to 3200 draws to find 3 programs, ~25 s idle; the hand-written auto_axes programs stay)
def test_generated_programs_with_auto_axes_agree(worker):
    keep = {"sin", "mul", "add", "cumsum", "wsum", "sum", "dynamic_slice", "index", "take", "argmax", "broadcast"}
    disabled = frozenset(O.REGISTRY) - keep
    got = []

    from hypothesis import seed as hseed

    # seeded runs until 3 are found: one run's count moves with every change to the draws, and
    # they come in clusters (2026-12-06@a5cb656: 4 / 0 / 0 / 5 / 0 / 3 programs with auto_axes in seeds
    # 0-5 of 400 before the active-values change, 0 / 1 / 0 / 3 / 0 / 10 after)
    for s in range(8):
        @hseed(s)
        @settings(max_examples=400, database=None, suppress_health_check=list(HealthCheck))
        @given(programs(disabled=disabled, max_depth=2, max_eqns=4, max_calls=1))
        def collect(p):
            if len(got) < 3 and "auto_axes" in features(p)[0]:
                got.append(p)

        collect()
        if len(got) == 3:
            break
    assert len(got) == 3
    for p in got:
        out = worker.run(render(p, worker.caps), timeout=240)
        assert out["status"] == "ok", out
        from fuzz.reference import evaluate

        found = [f for f in oracles.judge(p, out, evaluate(p)) if f.oracle != "internal-error"]
        assert not found, ([f.signature for f in found], render(p))
