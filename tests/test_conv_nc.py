"""``conv_nc`` (``lax.conv_general_dilated`` of an (N, C, spatial...) operand, fuzz/ops/linalg.py).

The reference against a direct loop over XLA's Conv formula (groups, strides, padding, both
dilations, one and two spatial dims), the typing rule, then JAX (the session's worker) against
the reference under jit with the batch, feature and spatial dims split, eagerly, inside a
shard_map body, under vmap and under grad; a planted bug in the reference is caught, and
derandomized generated programs agree.
"""
import numpy as np
import pytest

from fuzz import ops as O
from fuzz import typecheck as T
from fuzz.reference import Reference, evaluate, make_input, weights
from fuzz.render import render
from support.judging import agree_on_generated, agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap

W1 = dict(window=3, stride=1, lo=1, hi=2, lhs_dilation=1, rhs_dilation=2, features=2, groups=2, seed=4)
W2 = dict(window=2, stride=2, lo=0, hi=1, lhs_dilation=2, rhs_dilation=1, features=3, groups=1, seed=5)
# a kernel operand: x (2, 4, 6) with itself (features 2, groups 1, window 6) and with k (4, 2, 3)
SELF = dict(window=6, stride=1, lo=2, hi=3, lhs_dilation=1, rhs_dilation=1, features=2, groups=1, seed=0)
KER = dict(window=3, stride=1, lo=1, hi=1, lhs_dilation=1, rhs_dilation=2, features=4, groups=2, seed=0)


def by_loop(x, e, w=None):
    """XLA's Conv by its definition, one output element at a time (x: (N, C, S...), NumPy; the
    kernel ``w``, or the seeded one)."""
    spatial = x.ndim - 2
    n, c = x.shape[:2]
    g, o, k = e["groups"], e["features"], e["window"]
    w = weights(e["seed"], (o, c // g) + (k,) * spatial) if w is None else w
    xd = np.zeros((n, c) + tuple((m - 1) * e["lhs_dilation"] + 1 for m in x.shape[2:]), np.float32)
    xd[(slice(None),) * 2 + (slice(None, None, e["lhs_dilation"]),) * spatial] = x
    xp = np.pad(xd, [(0, 0)] * 2 + [(e["lo"], e["hi"])] * spatial)
    extent = (k - 1) * e["rhs_dilation"] + 1
    outs = [(m - extent) // e["stride"] + 1 for m in xp.shape[2:]]
    out = np.zeros((n, o) + tuple(outs), np.float32)
    for idx in np.ndindex(*out.shape):
        b, f, pos = idx[0], idx[1], idx[2:]
        group = f // (o // g)
        for cc in range(c // g):
            for j in np.ndindex(*(k,) * spatial):
                at = tuple(p * e["stride"] + jj * e["rhs_dilation"] for p, jj in zip(pos, j))
                out[idx] += w[(f, cc) + j] * xp[(b, group * (c // g) + cc) + at]
    return out


def conv_program():
    body = fn(["a", "b"], [eqn("conv_nc", ["a"], ["t0"], **W1), eqn("conv_nc", ["b"], ["t1"], **W2)], ["t0", "t1"])
    loss = fn(["a"], [eqn("conv_nc", ["a"], ["t"], **W1), eqn("sin", ["t"], ["y"]),
                      eqn("wsum", ["y"], ["l"], seed=7)], ["l"])
    kern = fn(["a", "k"], [eqn("conv_nc", ["a", "a"], ["t0"], **SELF), eqn("conv_nc", ["a", "k"], ["t1"], **KER),
                           eqn("sin", ["t1"], ["y"]), eqn("wsum", ["y"], ["l1"], seed=8),
                           eqn("wsum", ["t0"], ["l0"], seed=9), eqn("add", ["l0", "l1"], ["l"])], ["l"])
    calls = [call("f0", [JIT], ["x0", "x1"]),
             call("f0", [], ["x0", "x1"]),
             call("f0", [JIT], ["x2", "x3"]),  # batch / feature / spatial dims split
             call("f0", [JIT, shard_map([[["x"], None, None], [None, None, ["x"], None]],
                                        [[["x"], None, None], [None, None, ["x"], None]])], ["x0", "x1"]),
             call("f0", [JIT, vmap([0, 0], [0, 0])], ["x4", "x5"]),
             call("f1", [JIT, GRAD], ["x2"]),
             call("f1", [JIT, vmap([1], [0]), GRAD], ["x6"]),
             call("f2", [JIT], ["x2", "x7"]),
             call("f2", [JIT, {"kind": "grad", "argnums": [0, 1]}], ["x2", "x7"]),  # through the kernel too
             call("f2", [JIT, vmap([None, 0], [0]), {"kind": "grad", "argnums": [1]}], ["x0", "x8"])]
    p = program(mesh=(("x", 2), ("y", 2)),
                inputs=[("x0", (2, 4, 6), 1), ("x1", (2, 2, 4, 5), 2), ("x2", (2, 4, 6), 3), ("x3", (2, 2, 4, 5), 4),
                        ("x4", (2, 2, 4, 6), 5), ("x5", (2, 2, 2, 4, 5), 6), ("x6", (2, 2, 4, 6), 7),
                        ("x7", (4, 2, 3), 8), ("x8", (2, 4, 2, 3), 9)],
                functions={"f0": body, "f1": loss, "f2": kern}, calls=calls)
    specs = {"x2": [None, ["x"], ["y"]], "x3": [["y"], None, ["x"], None], "x6": [None, None, ["x"], None],
             "x7": [["x"], ["y"], None]}
    for i in p["inputs"]:
        i["spec"] = specs.get(i["name"])
    return p


def test_conv_nc_reference_by_hand():
    res = evaluate(conv_program())["results"]
    a, b = make_input(1, (2, 4, 6)), make_input(2, (2, 2, 4, 5))
    want = [by_loop(a, W1), by_loop(b, W2)]
    assert [w.shape for w in want] == [(2, 2, 5), (2, 3, 4, 5)]
    for got, w in zip(res[0], want):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-6)
    for k in range(2):  # eager and jit alike
        np.testing.assert_array_equal(res[1][k], res[0][k])
    x, k = make_input(3, (2, 4, 6)), make_input(8, (4, 2, 3))
    w8 = lambda y: float(np.sum(np.sin(y) * weights(8, y.shape)))
    l = float(np.sum(by_loop(x, SELF, x) * weights(9, (2, 2, 6)))) + w8(by_loop(x, KER, k))
    np.testing.assert_allclose(res[7][0], l, rtol=1e-5)


def test_conv_nc_typing():
    ctx = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),))
    e = eqn("conv_nc", ["a"], ["t"], **W1)
    assert T.eqn_types(e, [T.Ty((2, 4, 6), frozenset({"x"}))], ctx) == [T.Ty((2, 2, 5), frozenset({"x"}))]
    assert T.eqn_types(eqn("conv_nc", ["a", "k"], ["t"], **KER), [T.Ty((2, 4, 6)), T.Ty((4, 2, 3), frozenset({"x"}))],
                       ctx) == [T.Ty((2, 4, 4), frozenset({"x"}))]
    with pytest.raises(T.ProgramError, match="kernel of shape"):
        T.eqn_types(eqn("conv_nc", ["a", "k"], ["t"], **KER), [T.Ty((2, 4, 6)), T.Ty((4, 4, 3))], ctx)
    for ty, params, msg in [(T.Ty((2, 6)), {}, "rank 2"), (T.Ty((2, 3, 6)), {}, "groups 2 must divide"),
                            (T.Ty((2, 4, 6)), {"features": 3}, "groups 2 must divide"),
                            (T.Ty((2, 4, 0)), {}, "empty"), (T.Ty((2, 4, 1)), {"window": 3, "lo": 0, "hi": 0}, "longer")]:
        with pytest.raises(T.ProgramError, match=msg):
            T.eqn_types({**e, **params}, [ty], ctx)
    assert O.get("conv_nc").features(e) == {"conv_general_dilated", "feature_group_count"}


def test_conv_nc_renders_the_kernel_from_the_operand():
    src = render(conv_program())
    assert "conv_nc(a, weights(4, (2, a.shape[1] // 2) + (3,) * (a.ndim - 2)), 1, (1, 2), 2, rhs_dilation=2)" in src
    assert "feature_group_count=groups" in src


def test_jax_agrees_with_the_reference_on_conv_nc(worker):
    agree_with_jax(worker, conv_program())


class Ungrouped(Reference):
    """The reference with a planted bug: the groups' output features in the wrong order."""

    def primitive(self, e, xs, ts, ctx):
        out = super().primitive(e, xs, ts, ctx)
        if e["op"] == "conv_nc" and e["groups"] == 2 and isinstance(out[0], np.ndarray):  # (not under grad)
            out = [np.flip(out[0], axis=len(ctx.axes) + 1)]
        return out


def test_a_wrong_conv_nc_in_the_reference_is_caught(worker):
    p = conv_program()
    assert {c for o, c in judged(worker, p, Ungrouped(p).evaluate()) if o == "differential"} == {0, 1, 2, 3, 4, 7}


@pytest.mark.slow  # (~6 s idle of conv programs drawn and run; the hand-written ones and the planted bug stay)
def test_generated_programs_with_conv_nc_agree(worker):
    assert "conv_general_dilated" in agree_on_generated(worker, "conv_nc", 3)


# ------------------------------------------------------------------ conv_nwc (channels last)
def nwc_program():
    body = fn(["a", "k"], [eqn("conv_nwc", ["a"], ["t0"], **W1), eqn("conv_nwc", ["a", "k"], ["t1"], **KER)],
              ["t0", "t1"])
    loss = fn(["a", "k"], [eqn("conv_nwc", ["a", "k"], ["t"], **KER), eqn("sin", ["t"], ["y"]),
                           eqn("wsum", ["y"], ["l"], seed=7)], ["l"])
    calls = [call("f0", [JIT], ["x0", "x1"]),
             call("f0", [], ["x0", "x1"]),
             call("f0", [JIT], ["x2", "x3"]),  # batch / spatial / feature dims and the kernel split
             call("f0", [JIT, shard_map([[None, ["x"], None], [None, None, None]],
                                        [[None, ["x"], None], [None, ["x"], None]])], ["x0", "x1"]),
             call("f0", [JIT, vmap([0, None], [0, 0])], ["x4", "x1"]),
             call("f1", [JIT, {"kind": "grad", "argnums": [0, 1]}], ["x2", "x3"])]
    p = program(mesh=(("x", 2), ("y", 2)),
                inputs=[("x0", (2, 6, 4), 1), ("x1", (3, 2, 4), 2), ("x2", (2, 6, 4), 3), ("x3", (3, 2, 4), 4),
                        ("x4", (3, 2, 6, 4), 5)],
                functions={"f0": body, "f1": loss}, calls=calls)
    specs = {"x2": [["y"], ["x"], None], "x3": [None, None, ["x"]]}
    for i in p["inputs"]:
        i["spec"] = specs.get(i["name"])
    return p


def test_conv_nwc_is_conv_nc_in_the_channels_last_layout():
    res = evaluate(nwc_program())["results"]
    x, k = make_input(1, (2, 6, 4), ), make_input(2, (3, 2, 4))
    nc = lambda a: np.moveaxis(a, -1, 1)
    w1 = np.transpose(weights(W1["seed"], (3, 2, 2)), (2, 1, 0))  # (window, C // g, O) -> (O, C // g, window)
    want = [np.moveaxis(by_loop(nc(x), W1, w1), 1, -1), np.moveaxis(by_loop(nc(x), KER, np.transpose(k, (2, 1, 0))), 1, -1)]
    assert [w.shape for w in want] == [(2, 5, 2), (2, 4, 4)]
    for got, w in zip(res[0], want):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-6)
    src = render(nwc_program())
    assert "conv_nc(a, weights(4, (3,) * (a.ndim - 2) + (a.shape[-1] // 2, 2)), 1, (1, 2), 2, channels_last=True" in src
    assert O.get("conv_nwc").features(eqn("conv_nwc", ["a"], ["t"], **W1)) >= {"conv_general_dilated", "channels_last"}


def test_conv_nwc_typing():
    ctx = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),))
    assert T.eqn_types(eqn("conv_nwc", ["a", "k"], ["t"], **KER), [T.Ty((2, 6, 4)), T.Ty((3, 2, 4))], ctx) == \
        [T.Ty((2, 4, 4))]
    with pytest.raises(T.ProgramError, match="kernel of shape"):  # (an OIW kernel in a channels-last conv)
        T.eqn_types(eqn("conv_nwc", ["a", "k"], ["t"], **KER), [T.Ty((2, 6, 4)), T.Ty((4, 2, 3))], ctx)
    with pytest.raises(T.ProgramError, match="groups 2 must divide"):
        T.eqn_types(eqn("conv_nwc", ["a"], ["t"], **W1), [T.Ty((2, 6, 3))], ctx)


def test_jax_agrees_with_the_reference_on_conv_nwc(worker):
    agree_with_jax(worker, nwc_program())


@pytest.mark.slow  # (as conv_nc's)
def test_generated_programs_with_conv_nwc_agree(worker):
    assert "channels_last" in agree_on_generated(worker, "conv_nwc", 3)
