"""``reduce_window_sum`` / ``reduce_window_max`` (``lax.reduce_window``, fuzz/ops/scans.py), ``conv``
(``lax.conv_general_dilated`` along one dim, fuzz/ops/linalg.py) and ``flip`` (``jnp.flip``, fuzz/ops/movement.py).

The reference against a loop by hand (windows, strides, padding, both dilations), the typing
rule, then JAX (the session's worker) against the reference under jit, eagerly, inside a
shard_map body, under vmap, under grad and with the dim split by a sharding constraint (XLA's
SPMD partitioner exchanges halos there); a planted bug in the reference is caught, and
derandomized generated programs agree.
"""
import numpy as np
import pytest

from fuzz import typecheck as T
from fuzz.reference import Reference, evaluate, make_input, weights
from support.judging import agree_on_generated, agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap

# (window, stride, lo, hi, base_dilation, window_dilation) along dim 1 of a (4, 6) operand
WINDOWS = ((1, 1, 0, 0, 1, 1), (2, 1, 0, 0, 1, 1), (3, 2, 1, 2, 1, 1), (2, 1, 0, 1, 2, 1), (2, 2, 2, 0, 1, 2),
           (3, 1, 2, 2, 2, 2), (4, 3, 3, 3, 3, 1))
KEYS = ("window", "stride", "lo", "hi", "base_dilation", "window_dilation")


def by_hand(x, kind, window, stride, lo, hi, base_dilation, window_dilation, kernel=None):
    """lax.reduce_window along dim 1 as XLA's ReduceWindow describes it, one window at a time (with
    ``kernel``, a sum weighted by it: XLA's Conv)."""
    init = 0.0 if kind == "sum" else -np.inf
    n = x.shape[1]
    padded = np.full((x.shape[0], lo + hi + (n - 1) * base_dilation + 1), init, np.float32)
    padded[:, lo:lo + (n - 1) * base_dilation + 1:base_dilation] = x
    extent = (window - 1) * window_dilation + 1
    cols = []
    for k in range((padded.shape[1] - extent) // stride + 1):
        w = padded[:, k * stride:k * stride + extent:window_dilation]
        if kernel is not None:
            w = w * kernel
        cols.append(w.sum(axis=1) if kind == "sum" else w.max(axis=1))
    return np.stack(cols, axis=1)


def window_eqns(a, kind, prefix):
    """One equation per window of WINDOWS; for the max, a window of init values only (the fifth,
    on odd positions) gets a window dilation of 1; ``conv`` with kernels of seeds 10, 11, ..."""
    if kind == "conv":
        return [eqn("conv", [a], [f"{prefix}{k}"], axis=1, seed=10 + k, **dict(zip(CONV_KEYS, w)))
                for k, w in enumerate(WINDOWS)]
    return [eqn(f"reduce_window_{kind}", [a], [f"{prefix}{k}"], axis=1, **dict(zip(KEYS, max_window(w, kind))))
            for k, w in enumerate(WINDOWS)]


CONV_KEYS = ("window", "stride", "lo", "hi", "lhs_dilation", "rhs_dilation")


def max_window(w, kind):
    op = T.O.get("reduce_window_max")
    ok = kind == "sum" or op.windows_ok(op.positions(6, dict(zip(KEYS, w))))
    return w if ok else w[:5] + (1,)


def windows_program(split=False):
    """f0: every window of WINDOWS as a sum and a max, and a flip; f1: conv with them, and a flip; f2: a
    loss through a windowed sum, a conv and a flip; each under jit, eagerly, in a shard_map body, under
    vmap (f2: under grad). ``split``: the same along a dim a sharding constraint splits."""
    n = len(WINDOWS)

    def body(a, kinds, first=()):
        outs = [f"{kind[0]}{k}" for kind in kinds for k in range(n)] + ["r"]
        return fn(["a"], list(first) + [e for kind in kinds for e in window_eqns(a, kind, kind[0])]
                  + [eqn("flip", [a], ["r"], axis=1)], outs)

    def loss(a, first=()):
        return fn(["a"], list(first) + [
            eqn("reduce_window_sum", [a], ["t"], axis=1, **dict(zip(KEYS, WINDOWS[5]))),
            eqn("conv", ["t"], ["t2"], axis=1, seed=5, **dict(zip(CONV_KEYS, (3, 1, 1, 2, 1, 1)))),
            eqn("flip", ["t2"], ["u"], axis=1), eqn("sin", ["u"], ["y"]), eqn("wsum", ["y"], ["l"], seed=7)], ["l"])

    functions = {"f0": body("a", ("sum", "max")), "f1": body("a", ("conv",)), "f2": loss("a")}
    calls = []
    for f, m in (("f0", 2 * n + 1), ("f1", n + 1)):
        calls += [call(f, [JIT], ["x0"]), call(f, [], ["x0"]),
                  call(f, [JIT, shard_map([[["x"], None]], [[["x"], None]] * m)], ["x0"]),
                  call(f, [vmap([0], [0] * m)], ["x1"])]
    calls += [call("f2", [JIT, GRAD], ["x0"]), call("f2", [JIT, vmap([0], [0]), GRAD], ["x1"])]
    if split:  # the windowed dim split over the mesh before each op (halo exchanges between shards)
        c = [eqn("with_sharding_constraint", ["a"], ["c"], axes=["x"], dim=1)]
        # (sums and maxes apart: XLA shares one padded halo between windows of one shape, whatever
        # their init values, see corpus/differential-d2dab0ade064.json)
        functions.update(f3=body("c", ("sum",), c), f4=body("c", ("max",), c), f5=body("c", ("conv",), c),
                         f6=loss("c", c))
        calls += [call(f, [JIT], ["x0"]) for f in ("f3", "f4", "f5")] + [call("f6", [JIT, GRAD], ["x0"])]
    return program(mesh=(("x", 2),), inputs=[("x0", (4, 6), 1), ("x1", (3, 4, 6), 2)], functions=functions,
                   calls=calls)


def test_windows_reference_by_hand():
    res = evaluate(windows_program())["results"]
    x = make_input(1, (4, 6))
    n = len(WINDOWS)
    for k, w in enumerate(WINDOWS):
        np.testing.assert_allclose(res[0][k], by_hand(x, "sum", *w), rtol=1e-6)
        np.testing.assert_array_equal(res[0][len(WINDOWS) + k], by_hand(x, "max", *max_window(w, "max")))
    assert max_window(WINDOWS[5], "max") != WINDOWS[5]
    for k, w in enumerate(WINDOWS):
        kernel = weights(10 + k, (w[0],))
        np.testing.assert_allclose(res[4][k], by_hand(x, "sum", *w, kernel=kernel), rtol=1e-6)
    np.testing.assert_array_equal(res[0][-1], x[:, ::-1])
    np.testing.assert_array_equal(res[4][n], x[:, ::-1])


def test_windows_typing():
    ctx = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),))
    x = T.Ty((3, 6), frozenset({"x"}))
    e = eqn("reduce_window_sum", ["a"], ["t"], axis=1, **dict(zip(KEYS, WINDOWS[2])))
    assert T.eqn_types(e, [x], ctx) == [T.Ty((3, 4), frozenset({"x"}))]  # (1 + 2 + 6 - 3) // 2 + 1
    with pytest.raises(T.ProgramError, match="longer than"):
        T.eqn_types({**e, "window": 4, "window_dilation": 3, "lo": 0, "hi": 0}, [x], ctx)
    with pytest.raises(T.ProgramError, match="out of range"):
        T.eqn_types({**e, "axis": 2}, [x], ctx)
    assert T.eqn_types(eqn("flip", ["a"], ["f"], axis=0), [x], ctx) == [x]


def test_a_max_window_always_holds_an_element():
    # a window of padding (or base-dilation holes) only is -inf, which later ops make NaN
    op = T.O.get("reduce_window_max")
    assert not op.windows_ok(op.positions(3, dict(zip(KEYS, (1, 1, 0, 0, 2, 1)))))
    assert op.windows_ok(op.positions(3, dict(zip(KEYS, (2, 1, 0, 0, 2, 1)))))
    ctx = T.Ctx(mesh={"x": 2})
    e = eqn("reduce_window_max", ["a"], ["t"], axis=0, **dict(zip(KEYS, (1, 1, 0, 0, 2, 1))))
    with pytest.raises(T.ProgramError, match="init values only"):
        T.eqn_types(e, [T.Ty((3,))], ctx)
    assert T.eqn_types({**e, "op": "reduce_window_sum"}, [T.Ty((3,))], ctx) == [T.Ty((5,))]


def test_jax_agrees_with_the_reference_on_windows(worker):
    agree_with_jax(worker, windows_program())


def test_jax_agrees_with_windows_along_a_split_dim(worker):
    agree_with_jax(worker, windows_program(split=True))


class OffByOne(Reference):
    """The reference with a planted bug: a strided window starts one element late."""

    def primitive(self, e, xs, ts, ctx):
        if e["op"] == "reduce_window_sum" and e["stride"] > 1:
            e = {**e, "lo": max(e["lo"] - 1, 0), "hi": e["hi"] + (e["lo"] > 0)}
        return super().primitive(e, xs, ts, ctx)


def test_a_wrong_window_in_the_reference_is_caught(worker):
    p = windows_program()
    assert {c for o, c in judged(worker, p, OffByOne(p).evaluate()) if o == "differential"} == {0, 1, 2, 3}


def test_a_flipped_kernel_in_the_reference_is_caught(worker, monkeypatch):
    """A true convolution (the kernel flipped) in the reference instead of XLA's correlation."""
    import fuzz.values as V  # (the seeded weights the ops' references read)

    real = V.weights
    p = windows_program()
    monkeypatch.setattr(V, "weights", lambda seed, shape: real(seed, shape)[::-1].copy() if len(shape) == 1
                        else real(seed, shape))
    planted = evaluate(p)
    monkeypatch.undo()
    assert {c for o, c in judged(worker, p, planted) if o == "differential"} == {4, 5, 6, 7, 8, 9}


@pytest.mark.parametrize("op", ["reduce_window_sum", "reduce_window_max", "conv", "flip"])
def test_generated_programs_with_windows_agree(worker, op):
    assert {"conv": "conv_general_dilated"}.get(op, op) in agree_on_generated(worker, op, 2)
