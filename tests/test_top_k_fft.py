"""``top_k`` (``lax.top_k``'s values) and ``fft`` (a part of ``jnp.fft.fft``), fuzz/ops/scans.py.

The reference against NumPy by hand (ties included), the typing rules and their release gate,
then JAX (the session's worker) against the reference under jit with the op's dim split (XLA's
partitioned TopK and distributed FFT), eagerly, inside a shard_map body, under vmap and under
grad, and on an Explicit mesh; a planted bug in the reference is caught, and derandomized
generated programs agree.
"""
import numpy as np
import pytest

from fuzz import typecheck as T
from fuzz.reference import Reference, evaluate, make_input
from fuzz.render import NEWEST_CAPS, render
from support.judging import agree_on_generated, agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap

SPLIT_1 = [None, ["x"]]  # (4, 8) split along dim 1, the ops' dim in f0's first and third equations


def ops_program(axis_type="auto"):
    body = fn(["a"], [eqn("top_k", ["a"], ["t0"], axis=1, k=3), eqn("top_k", ["a"], ["t1"], axis=0, k=2),
                      eqn("fft", ["a"], ["t2"], axis=1, part="real"), eqn("fft", ["a"], ["t3"], axis=0, part="imag")],
              ["t0", "t1", "t2", "t3"])
    loss = fn(["a"], [eqn("top_k", ["a"], ["t"], axis=1, k=6), eqn("fft", ["t"], ["u"], axis=1, part="imag"),
                      eqn("fft", ["a"], ["v"], axis=1, part="real"), eqn("sin", ["u"], ["y"]),
                      eqn("wsum", ["y"], ["l1"], seed=7), eqn("wsum", ["v"], ["l2"], seed=8),
                      eqn("add", ["l1", "l2"], ["l"])], ["l"])
    calls = [call("f0", [JIT], ["x0"]),
             call("f0", [], ["x0"]),
             call("f0", [JIT], ["x1"]),  # dim 1 split: partitioned top_k and fft along it
             call("f0", [JIT, shard_map([[["x"], None]], [[["x"], None]] * 4)], ["x0"]),
             call("f0", [JIT, vmap([0], [0] * 4)], ["x2"]),
             call("f1", [JIT, GRAD], ["x1"]),
             call("f1", [GRAD], ["x0"])]
    p = program(mesh=(("x", 2),), inputs=[("x0", (4, 8), 1), ("x1", (4, 8), 2), ("x2", (3, 4, 8), 3)],
                functions={"f0": body, "f1": loss}, calls=calls, axis_type=axis_type)
    p["inputs"][1]["spec"] = SPLIT_1
    if axis_type == "explicit":  # top_k along a split dim is refused there (jax 0.10.2); fft is not
        p["functions"] = {"f0": fn(["a"], body["eqns"][1:], ["t1", "t2", "t3"]),
                          "f1": fn(["a"], [eqn("fft", ["a"], ["v"], axis=1, part="imag"),
                                           eqn("wsum", ["v"], ["l"], seed=8)], ["l"])}
        p["calls"] = [call("f0", [JIT], ["x1"]), call("f0", [], ["x1"]),
                      call("f1", [JIT, GRAD], ["x1"]), call("f1", [GRAD], ["x1"])]
        p["inputs"] = p["inputs"][:2]
    return p


def top(x, k, axis):
    return np.take(-np.sort(-x, axis=axis), np.arange(k), axis=axis)


def snap(y):
    y = np.float32(y)
    return (np.round(y * 8 - np.float32(1 / 3)) + np.float32(1 / 3)) / 8


def test_reference_by_hand():
    res = evaluate(ops_program())["results"]
    x = make_input(1, (4, 8))
    want = [top(x, 3, 1), top(x, 2, 0), snap(np.fft.fft(x, axis=1).real), snap(np.fft.fft(x, axis=0).imag)]
    assert [w.shape for w in want] == [(4, 3), (2, 8), (4, 8), (4, 8)]
    for got, w in zip(res[0], want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)
        assert got.dtype == np.float32
    for k in range(4):  # eager and jit alike
        np.testing.assert_array_equal(res[1][k], res[0][k])
    # shard_map over x: each device's top 2 along dim 0 of its (2, 8) block, so both rows of each
    np.testing.assert_allclose(res[3][1], np.concatenate([top(x[:2], 2, 0), top(x[2:], 2, 0)]), rtol=1e-6)


def spectrum_ties_program():
    """A real input's spectrum has equal real parts (y[m], y[n - m]): argmax of them, and grad of
    a sort of them, eagerly and under jit along the split dim (XLA's distributed FFT)."""
    body = fn(["a"], [eqn("fft", ["a"], ["y"], axis=0, part="real"), eqn("argmax", ["y"], ["i"], axis=None),
                      eqn("astype", ["i"], ["o"], dtype="float32"), eqn("fft", ["a"], ["z"], axis=0, part="imag"),
                      eqn("neg", ["z"], ["nz"]), eqn("argmax", ["nz"], ["j"], axis=None),
                      eqn("astype", ["j"], ["q"], dtype="float32")], ["o", "q"])
    loss = fn(["a"], [eqn("fft", ["a"], ["y"], axis=0, part="real"), eqn("sort", ["y"], ["s"], axis=0),
                      eqn("wsum", ["s"], ["l"], seed=5)], ["l"])
    p = program(mesh=(("x", 2),), inputs=[("x0", (8,), 11), ("x1", (8,), 11)],
                functions={"f0": body, "f1": loss},
                calls=[call("f0", [], ["x0"]), call("f0", [JIT], ["x1"]), call("f1", [GRAD], ["x0"]),
                       call("f1", [JIT, GRAD], ["x1"])])
    p["inputs"][1]["spec"] = [["x"]]
    return p


def test_spectrum_ties_are_exact():
    x = make_input(11, (8,))
    y = np.fft.fft(x).real
    assert np.isclose(y[1], y[7]) and y[1] != 0, y  # the program's ties
    res = evaluate(spectrum_ties_program())["results"]
    got = np.asarray(res[0][0])
    assert got == np.argmax(snap(y)) and snap(y)[1] == snap(y)[7]


def test_fft_rounding_is_stable_at_multiples_of_powers_of_one_half():
    """The reference's fft rounds (through an FFT of length 1, the identity) every multiple of
    1/2**m in [-64, 64], m <= 12 (inputs are multiples of 1/8; products of a few of them, halved
    by cos = 1/2), to the same grid point as the value moved by 1e-6 either way: the few ulps by
    which FFT algorithms differ never tip the rounding (a grid k / 8 would: its midpoints are such
    multiples)."""
    from types import SimpleNamespace

    from fuzz.ops import get

    r, ctx = SimpleNamespace(xp=np), SimpleNamespace(axes=())
    for m in range(13):
        v = (np.arange(-64 * 2**m, 64 * 2**m + 1) / 2**m).reshape(-1, 1)
        snapped = [get("fft").reference(r, {"axis": 1, "part": "real"}, [v + d], [], ctx)[0]
                   for d in (-1e-6, 0.0, 1e-6)]
        assert np.array_equal(snapped[0], snapped[1]) and np.array_equal(snapped[1], snapped[2]), m
        assert np.max(np.abs(snapped[1] - v)) <= 1 / 16 + 1e-6


def test_jax_agrees_on_spectrum_ties(worker):
    agree_with_jax(worker, spectrum_ties_program())


def ties_program():
    """grad of wsum(top_k(a, 2)) at a = ones(8): every element ties."""
    p = program(mesh=(("x", 2),), inputs=[("x0", (8,), 1), ("x1", (8,), 1)],
                functions={"f2": fn(["a"], [eqn("top_k", ["a"], ["t"], axis=0, k=2),
                                           eqn("wsum", ["t"], ["l"], seed=3)], ["l"])},
                calls=[call("f2", [GRAD], ["x0"]), call("f2", [JIT, GRAD], ["x1"])])
    for i in p["inputs"]:
        i["values"] = "ones"
    p["inputs"][1]["spec"] = [["x"]]  # under jit, top_k along the split dim
    return p


def test_top_k_derivative_at_ties_takes_the_lower_index():
    """At ties the derivative goes to the lower indices, as JAX documents top_k's order."""
    res = evaluate(ties_program())["results"]
    for g in (res[0][0], res[1][0]):
        assert list(np.nonzero(g)[0]) == [0, 1], g


def test_jax_agrees_at_ties(worker):
    if T.version_tuple(worker.caps.get("jax_version") or "0.10.2") < (0, 8, 1):
        pytest.skip("top_k's axis argument came in jax 0.8.1")
    agree_with_jax(worker, ties_program())


def test_typing_and_release_gate():
    ctx = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),))
    a = T.Ty((4, 8), frozenset({"x"}))
    assert T.eqn_types(eqn("top_k", ["a"], ["t"], axis=1, k=3), [a], ctx) == [T.Ty((4, 3), frozenset({"x"}))]
    assert T.eqn_types(eqn("fft", ["a"], ["t"], axis=0, part="real"), [a], ctx) == [a]
    for e, msg in [(eqn("top_k", ["a"], ["t"], axis=1, k=9), "top_k of 9"),
                   (eqn("top_k", ["a"], ["t"], axis=2, k=1), "out of range"),
                   (eqn("fft", ["a"], ["t"], axis=2, part="real"), "out of range"),
                   (eqn("fft", ["a"], ["t"], axis=0, part="phase"), "fft part 'phase'")]:
        with pytest.raises(T.ProgramError, match=msg):
            T.eqn_types(e, [a], ctx)
    with pytest.raises(T.ProgramError, match="empty"):
        T.eqn_types(eqn("fft", ["a"], ["t"], axis=0, part="real"), [T.Ty((0, 8))], ctx)
    assert "no_op:top_k" in T.release_rules({**NEWEST_CAPS, "jax_version": "0.8.0"})
    assert "no_op:top_k" not in T.release_rules({**NEWEST_CAPS, "jax_version": "0.8.1"})
    assert "no_op:fft" not in T.release_rules({**NEWEST_CAPS, "jax_version": "0.4.26"})


def test_explicit_mesh_rules():
    """fft keeps a split along its own dim on an Explicit mesh; top_k is refused along one."""
    p = program(mesh=(("x", 2),), axis_type="explicit", inputs=[("x0", (4, 8), 1)],
                functions={"f2": fn(["a"], [eqn("fft", ["a"], ["t"], axis=1, part="real"),
                                           eqn("top_k", ["t"], ["u"], axis=0, k=2)], ["u"])},
                calls=[call("f2", [JIT], ["x0"])])
    p["inputs"][0]["spec"] = SPLIT_1
    T.check_program(p)
    src = render(p)
    assert "fft_part(a, 1, 'real')" in src and "def fft_part(" in src and "jax.lax.top_k(t, 2, axis=0)[0]" in src
    p["functions"]["f2"]["eqns"][1]["axis"] = 1
    with pytest.raises(T.ProgramError, match="top_k along dim 1"):
        T.check_program(p)


def test_jax_agrees_with_the_reference(worker):
    if T.version_tuple(worker.caps.get("jax_version") or "0.10.2") < (0, 8, 1):
        pytest.skip("top_k's axis argument came in jax 0.8.1")
    agree_with_jax(worker, ops_program())


def test_jax_agrees_on_an_explicit_mesh(worker):
    if worker.caps.get("explicit") is not True or "no_sharding_types" in T.release_rules(worker.caps):
        pytest.skip("this JAX release tracks no sharding types")
    agree_with_jax(worker, ops_program("explicit"))


class Swapped(Reference):
    """The reference with planted bugs: fft's real and imaginary parts swapped, top_k ascending."""

    def primitive(self, e, xs, ts, ctx):
        if e["op"] == "fft":
            e = {**e, "part": "imag" if e["part"] == "real" else "real"}
        out = super().primitive(e, xs, ts, ctx)
        if e["op"] == "top_k":
            out = [np.flip(out[0], axis=len(ctx.axes) + e["axis"])]
        return out


def test_a_wrong_reference_is_caught(worker):
    p = ops_program()
    assert {c for o, c in judged(worker, p, Swapped(p).evaluate()) if o == "differential"} == set(range(7))


@pytest.mark.parametrize("op", ["top_k", "fft"])
def test_generated_programs_agree(worker, op):
    assert op in agree_on_generated(worker, op, 3)


def test_an_exported_issue_cites_their_docs():
    from fuzz.export import feature_docs

    docs = dict(feature_docs(ops_program()))
    assert docs["fft"][1].endswith("jax.numpy.fft.fft.html") and docs["top_k"][1].endswith("jax.lax.top_k.html")
