"""``reduce_window_sum`` / ``reduce_window_max`` (``lax.reduce_window``, fuzz/ops/scans.py) and ``flip``
(``jnp.flip``, fuzz/ops/movement.py).

The reference against a loop by hand (windows, strides, padding, both dilations), the typing
rule, then JAX (the session's worker) against the reference under jit, eagerly, inside a
shard_map body, under vmap, under grad and with the dim split by a sharding constraint (XLA's
SPMD partitioner exchanges halos there); a planted bug in the reference is caught, and
derandomized generated programs agree.
"""
import numpy as np
import pytest

from fuzz import typecheck as T
from fuzz.ops.scans import ReduceWindow
from fuzz.reference import Reference, evaluate, make_input
from helpers import JIT, agree_with_jax, call, eqn, fn, program, shard_map, vmap
from test_custom_ops import agree_on_generated, judged

GRAD = {"kind": "grad", "argnums": [0]}
# (window, stride, lo, hi, base_dilation, window_dilation) along dim 1 of a (4, 6) operand
WINDOWS = ((1, 1, 0, 0, 1, 1), (2, 1, 0, 0, 1, 1), (3, 2, 1, 2, 1, 1), (2, 1, 0, 1, 2, 1), (2, 2, 2, 0, 1, 2),
           (3, 1, 2, 2, 2, 2), (4, 3, 3, 3, 3, 1))
KEYS = ("window", "stride", "lo", "hi", "base_dilation", "window_dilation")


def by_hand(x, kind, window, stride, lo, hi, base_dilation, window_dilation):
    """lax.reduce_window along dim 1 as XLA's ReduceWindow describes it, one window at a time."""
    init = 0.0 if kind == "sum" else -np.inf
    n = x.shape[1]
    padded = np.full((x.shape[0], lo + hi + (n - 1) * base_dilation + 1), init, np.float32)
    padded[:, lo:lo + (n - 1) * base_dilation + 1:base_dilation] = x
    extent = (window - 1) * window_dilation + 1
    cols = []
    for k in range((padded.shape[1] - extent) // stride + 1):
        w = padded[:, k * stride:k * stride + extent:window_dilation]
        cols.append(w.sum(axis=1) if kind == "sum" else w.max(axis=1))
    return np.stack(cols, axis=1)


def window_eqns(a, kind, prefix):
    """One equation per window of WINDOWS; for the max, a window of init values only (the fifth,
    on odd positions) gets a window dilation of 1."""
    return [eqn(f"reduce_window_{kind}", [a], [f"{prefix}{k}"], axis=1, **dict(zip(KEYS, max_window(w, kind))))
            for k, w in enumerate(WINDOWS)]


def max_window(w, kind):
    ok = kind == "sum" or T.O.get("reduce_window_max").windows_ok(ReduceWindow.positions(6, dict(zip(KEYS, w))))
    return w if ok else w[:5] + (1,)


def windows_program(split=False):
    n = len(WINDOWS)
    body = fn(["a"], window_eqns("a", "sum", "s") + window_eqns("a", "max", "m") + [eqn("flip", ["a"], ["r"], axis=1)],
              [f"s{k}" for k in range(n)] + [f"m{k}" for k in range(n)] + ["r"])
    loss = fn(["a"], [eqn("reduce_window_sum", ["a"], ["t"], axis=1, **dict(zip(KEYS, WINDOWS[5]))),
                      eqn("flip", ["t"], ["u"], axis=1), eqn("sin", ["u"], ["y"]),
                      eqn("wsum", ["y"], ["l"], seed=7)], ["l"])
    calls = [call("f0", [JIT], ["x0"]),
             call("f0", [], ["x0"]),
             call("f0", [JIT, shard_map([[["x"], None]], [[["x"], None]] * (2 * n + 1))], ["x0"]),
             call("f0", [vmap([0], [0] * (2 * n + 1))], ["x1"]),
             call("f1", [JIT, GRAD], ["x0"]),
             call("f1", [JIT, vmap([0], [0]), GRAD], ["x1"])]
    functions = {"f0": body, "f1": loss}
    if split:  # the windowed dim split over the mesh before each op (halo exchanges between shards)
        c = eqn("with_sharding_constraint", ["a"], ["c"], axes=["x"], dim=1)
        # (sums and maxes apart: XLA shares one padded halo between windows of one shape,
        # whatever their init values, corpus/differential-... records that bug)
        for name, kind, prefix in (("f2", "sum", "s"), ("f4", "max", "m")):
            functions[name] = fn(["a"], [c] + window_eqns("c", kind, prefix) + [eqn("flip", ["c"], ["r"], axis=1)],
                                 [f"{prefix}{k}" for k in range(n)] + ["r"])
        functions["f3"] = fn(["a"], [c, {**loss["eqns"][0], "args": ["c"]}] + loss["eqns"][1:], ["l"])
        calls += [call("f2", [JIT], ["x0"]), call("f4", [JIT], ["x0"]), call("f3", [JIT, GRAD], ["x0"])]
    return program(mesh=(("x", 2),), inputs=[("x0", (4, 6), 1), ("x1", (3, 4, 6), 2)], functions=functions,
                   calls=calls)


def test_windows_reference_by_hand():
    res = evaluate(windows_program())["results"]
    x = make_input(1, (4, 6))
    for k, w in enumerate(WINDOWS):
        np.testing.assert_allclose(res[0][k], by_hand(x, "sum", *w), rtol=1e-6)
        np.testing.assert_array_equal(res[0][len(WINDOWS) + k], by_hand(x, "max", *max_window(w, "max")))
    assert max_window(WINDOWS[5], "max") != WINDOWS[5]
    np.testing.assert_array_equal(res[0][-1], x[:, ::-1])


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
    assert not op.windows_ok(ReduceWindow.positions(3, dict(zip(KEYS, (1, 1, 0, 0, 2, 1)))))
    assert op.windows_ok(ReduceWindow.positions(3, dict(zip(KEYS, (2, 1, 0, 0, 2, 1)))))
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


@pytest.mark.parametrize("op", ["reduce_window_sum", "reduce_window_max", "flip"])
def test_generated_programs_with_windows_agree(worker, op):
    assert op in agree_on_generated(worker, op, 2)
