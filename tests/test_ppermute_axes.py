"""A ppermute over several axes: the linear index over them, first name major (as axis_index,
all_gather and psum_scatter number devices over the same tuple), against JAX and by hand."""
import numpy as np
import pytest

import oracles
from fuzz.reference import evaluate, make_input
from fuzz.render import render
from fuzz.typecheck import ProgramError, check_program
from support.judging import agree_with_jax
from support.programs import JIT, call, eqn, fn, program, ring, shard_map

MESH = (("x", 2), ("y", 2))


def two_axis(axes, perm, mesh=MESH, spec=(["x"], ["y"])):
    body = fn(["a"], [eqn("ppermute", ["a"], ["v"], axes=list(axes), perm=perm)], ["v"])
    sm = shard_map([list(spec)], [list(spec)])
    return program(mesh=mesh, inputs=[("x0", (2, 2), 5)], functions={"f0": body},
                   calls=[call("f0", [JIT, sm], ["x0"])])


@pytest.mark.parametrize("axes, expect", [
    # device (x, y) holds x0[x, y]; ring(4) sends linear index i to i + 1
    (("x", "y"), lambda a: np.roll(a.ravel(), 1).reshape(2, 2)),  # index 2x + y
    (("y", "x"), lambda a: np.roll(a.T.ravel(), 1).reshape(2, 2).T),  # index 2y + x
])
def test_reference_numbers_devices_first_name_major(axes, expect):
    got = evaluate(two_axis(axes, ring(4)))["results"][0][0]
    np.testing.assert_array_equal(got, expect(make_input(5, (2, 2))))


def test_a_partial_permutation_over_two_axes_fills_zeros():
    got = evaluate(two_axis(("x", "y"), [[0, 3]]))["results"][0][0]
    a = make_input(5, (2, 2))
    np.testing.assert_array_equal(got, np.array([[0, 0], [0, a[0, 0]]]))


def test_its_pairs_are_checked_against_the_product_of_the_sizes():
    check_program(two_axis(("x", "y"), [[3, 0]]))
    with pytest.raises(ProgramError, match=r"in \[0, 4\)"):
        check_program(two_axis(("x", "y"), [[4, 0]]))


def test_jax_agrees_in_mesh_order_and_over_part_of_a_mesh(worker):
    agree_with_jax(worker, two_axis(("x", "y"), ring(4, 3)))
    mesh3 = (("x", 2), ("y", 2), ("z", 2))  # two groups (z = 0, 1) permute at once
    body = fn(["a"], [eqn("ppermute", ["a"], ["v"], axes=["x", "z"], perm=[[0, 1], [1, 3], [3, 2], [2, 0]])], ["v"])
    p = program(mesh=mesh3, inputs=[("x0", (2, 2, 2), 6)], functions={"f0": body},
                calls=[call("f0", [JIT, shard_map([[["x"], ["y"], ["z"]]], [[["x"], ["y"], ["z"]]])], ["x0"])])
    agree_with_jax(worker, p)


def test_the_differential_oracle_sees_a_reference_that_ignores_the_order(worker, monkeypatch):
    """JAX's lowering numbers the devices of ('y', 'x') in mesh order (corpus entry
    differential-5c6cf26ebca0, every release through 0.10.2): the oracle fires against the
    right reference, and not against a planted one that ignores the tuple's order as JAX does."""
    from fuzz.ops import collectives

    p = two_axis(("y", "x"), ring(4))
    out = worker.run(render(p, worker.caps), timeout=240)
    right = [f.oracle for f in oracles.judge(p, out, evaluate(p))]
    orig = collectives.Ppermute.axes_js
    monkeypatch.setattr(collectives.Ppermute, "axes_js", lambda self, e, ctx: tuple(sorted(orig(self, e, ctx))))
    planted = [f.oracle for f in oracles.judge(p, out, evaluate(p))]
    assert "differential" in right and "differential" not in planted, (right, planted)


def test_a_drawn_ppermute_names_two_axes_in_either_order_sometimes():
    """Drawn in a body with two mesh axes (300 derandomized draws): one axis most of the time,
    two about one time in three, in both orders; its perm over the product of their sizes."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from fuzz.ops import get
    from fuzz.ops.base import Axis, Ctx, Scope, Ty

    ctx = Ctx(mesh={"x": 2, "y": 4}, axes=(Axis("x", 2, "mesh"), Axis("y", 4, "mesh")))
    seen = []

    @settings(max_examples=300, derandomize=True, database=None)
    @given(st.data())
    def draw_many(data):
        scope = Scope({"a": Ty((4,), frozenset({"x", "y"}))}, ["a"], {}, frozenset(), lambda: "v1", lambda: "cb",
                      None, 4096, 4)
        e = get("ppermute").draw(data.draw, ctx, scope)
        assert all(0 <= i < (8 if len(e["axes"]) == 2 else ctx.axis(e["axes"][0]).size) for pair in e["perm"]
                   for i in pair)
        seen.append(tuple(e["axes"]))

    draw_many()
    two = [a for a in seen if len(a) == 2]
    assert 0.15 < len(two) / len(seen) < 0.5, len(two) / len(seen)
    assert set(two) == {("x", "y"), ("y", "x")}
