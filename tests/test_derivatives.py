"""Non-uniform derivatives: the seeded weighted sum ``wsum`` and the ``vjp`` / ``jvp`` transforms.

The reference is checked against NumPy by hand; then, through the real JAX worker, a
wrong transpose rule of ppermute (planted in the reference) is caught with a seeded
cotangent and missed with the all-ones cotangent of a plain ``sum``: that is why the
loss of a grad is drawn between the two.
"""
import numpy as np
import pytest

import oracles
from fuzz.reference import Reference, evaluate, make_input, weights
from fuzz.render import _JVP_SRC, _VJP_SRC, _WEIGHTS_SRC, render
from fuzz.repro import render_repro
from fuzz.typecheck import ProgramError, check_program
from support.draws import drawn_programs
from support.programs import JIT, call, eqn, fn, jvp, program, ring, shard_map, vjp, vmap


def run1(p):
    return evaluate(p)["results"][0]


def grad(*argnums):
    return {"kind": "grad", "argnums": list(argnums)}


# ------------------------------------------------------------------ weights
def test_weights_are_nonzero_eighths_never_all_equal():
    for seed in range(256):
        for shape in [(2,), (3, 2), (8,)]:
            w = weights(seed, shape)
            assert w.shape == shape and w.dtype == np.float32
            assert np.all(w != 0) and np.all(np.abs(w) <= 1) and np.all(w * 8 == np.round(w * 8))
            assert not np.all(w == w.flat[0]), (seed, shape)
    assert weights(0, ()).shape == () and weights(3, ()) != 0
    assert not np.array_equal(weights(1, (4,)), weights(2, (4,)))  # the seed matters


def test_rendered_helpers_compute_the_reference_weights():
    import jax
    import jax.numpy as jnp

    scope = {"np": np, "jnp": jnp, "jax": jax}
    exec("\n".join(_WEIGHTS_SRC + _VJP_SRC + _JVP_SRC), scope)
    for seed, shape in [(0, ()), (5, (2,)), (255, (3, 4)), (17, (1, 1, 2))]:
        np.testing.assert_array_equal(scope["weights"](seed, shape), weights(seed, shape))


# ------------------------------------------------------------------ wsum
def test_wsum_weights_each_element():
    body = fn(["a"], [eqn("wsum", ["a"], ["v"], seed=7)], ["v"])
    p = program(inputs=[("x0", (3, 4), 1)], functions={"f0": body}, calls=[call("f0", [JIT], ["x0"])])
    x = make_input(1, (3, 4))
    np.testing.assert_allclose(run1(p)[0], np.sum(x * weights(7, (3, 4))), rtol=1e-6)


def test_wsum_inside_shard_map_and_vmap_weights_the_block_and_the_example():
    # the weights have the per-block / per-example shape and are the same on every device / example
    sm = fn(["a"], [eqn("wsum", ["a"], ["v"], seed=3), eqn("broadcast", ["v"], ["w"], size=1)], ["w"])
    vm = fn(["a"], [eqn("wsum", ["a"], ["v"], seed=4)], ["v"])
    p = program(inputs=[("x0", (8, 3), 2)], functions={"f0": sm, "f1": vm},
                calls=[call("f0", [shard_map([[["x"], None]], [[["x"]]])], ["x0"]),
                       call("f1", [vmap([0], [0])], ["x0"])])
    x = make_input(2, (8, 3))
    got = evaluate(p)["results"]
    np.testing.assert_allclose(got[0][0], (x.reshape(4, 2, 3) * weights(3, (2, 3))).sum((1, 2)), rtol=1e-6)
    np.testing.assert_allclose(got[1][0], (x * weights(4, (3,))).sum(1), rtol=1e-6)


def test_grad_of_wsum_is_the_weights_times_the_derivative():
    body = fn(["a"], [eqn("sin", ["a"], ["s"]), eqn("wsum", ["s"], ["l"], seed=9)], ["l"])
    p = program(inputs=[("x0", (4, 2), 3)], functions={"f0": body}, calls=[call("f0", [grad(0)], ["x0"])])
    x = make_input(3, (4, 2))
    np.testing.assert_allclose(run1(p)[0], np.cos(x) * weights(9, (4, 2)), rtol=1e-6)


# ------------------------------------------------------------------ vjp and jvp
def test_vjp_of_sin_is_cos_times_the_cotangent():
    body = fn(["a"], [eqn("sin", ["a"], ["s"])], ["s"])
    p = program(inputs=[("x0", (6,), 4)], functions={"f0": body}, calls=[call("f0", [JIT, vjp(11)], ["x0"])])
    x = make_input(4, (6,))
    out, ct = run1(p)
    np.testing.assert_allclose(out, np.sin(x), rtol=1e-6)
    np.testing.assert_allclose(ct, np.cos(x) * weights(11, (6,)), rtol=1e-6)


def test_jvp_of_sin_is_cos_times_the_tangent():
    body = fn(["a"], [eqn("sin", ["a"], ["s"])], ["s"])
    p = program(inputs=[("x0", (6,), 4)], functions={"f0": body}, calls=[call("f0", [jvp(12)], ["x0"])])
    x = make_input(4, (6,))
    out, tangent = run1(p)
    np.testing.assert_allclose(out, np.sin(x), rtol=1e-6)
    np.testing.assert_allclose(tangent, np.cos(x) * weights(12, (6,)), rtol=1e-6)


def test_vjp_and_jvp_of_two_outputs_and_two_arguments():
    # f(a, b) = (a * b, sin(a)): cotangent k has seed + k, tangent of argument k has seed + k
    body = fn(["a", "b"], [eqn("mul", ["a", "b"], ["m"]), eqn("sin", ["a"], ["s"])], ["m", "s"])
    p = program(inputs=[("x0", (4,), 5), ("x1", (4,), 6)], functions={"f0": body},
                calls=[call("f0", [vjp(20)], ["x0", "x1"]), call("f0", [jvp(30)], ["x0", "x1"])])
    a, b = make_input(5, (4,)), make_input(6, (4,))
    (m, s, ca, cb), (m2, s2, tm, ts) = evaluate(p)["results"]
    c0, c1 = weights(20, (4,)), weights(21, (4,))
    np.testing.assert_allclose(ca, c0 * b + c1 * np.cos(a), rtol=1e-6)
    np.testing.assert_allclose(cb, c0 * a, rtol=1e-6)
    ta, tb = weights(30, (4,)), weights(31, (4,))
    np.testing.assert_allclose(tm, ta * b + a * tb, rtol=1e-6)
    np.testing.assert_allclose(ts, np.cos(a) * ta, rtol=1e-6)
    np.testing.assert_allclose(m, m2)
    np.testing.assert_allclose(s, s2)


def ppermute_body(shift=1):
    return fn(["b"], [eqn("ppermute", ["b"], ["p"], axes=["x"], perm=ring(4, shift))], ["p"])


def test_vjp_of_ppermute_is_the_inverse_permutation_of_the_cotangent():
    # 4 devices, blocks of 2: the forward moves block i to device i + 1 (a roll by 2 elements)
    p = program(inputs=[("x0", (8,), 7)], functions={"f0": ppermute_body()},
                calls=[call("f0", [vjp(40), shard_map([[["x"]]], [[["x"]]])], ["x0"]),
                       call("f0", [jvp(41), shard_map([[["x"]]], [[["x"]]])], ["x0"])])
    x = make_input(7, (8,))
    (out, ct), (out2, tangent) = evaluate(p)["results"]
    np.testing.assert_array_equal(out, np.roll(x, 2))
    np.testing.assert_array_equal(ct, np.roll(weights(40, (8,)), -2))  # the inverse permutation
    assert not np.array_equal(ct, np.roll(weights(40, (8,)), 2))  # which the forward one is not
    np.testing.assert_array_equal(tangent, np.roll(weights(41, (8,)), 2))


def test_vjp_under_vmap_gives_each_example_its_own_cotangent():
    # an unbatched argument's cotangent varies over the batch: out_axes=None is refused
    body = fn(["a", "b"], [eqn("mul", ["a", "b"], ["m"])], ["m"])
    p = program(inputs=[("x0", (3, 2), 8), ("x1", (2,), 9)], functions={"f0": body},
                calls=[call("f0", [vmap([0, None], [0, 0, 0]), vjp(50)], ["x0", "x1"])])
    a, b = make_input(8, (3, 2)), make_input(9, (2,))
    m, ca, cb = run1(p)
    w = weights(50, (2,))  # the per-example shape, the same cotangent for every example
    np.testing.assert_allclose(ca, np.broadcast_to(w * b, (3, 2)), rtol=1e-6)
    np.testing.assert_allclose(cb, w * a, rtol=1e-6)  # row i: example i's own cotangent
    p["calls"][0]["transforms"][0]["out_axes"] = [0, 0, None]
    with pytest.raises(ProgramError, match="out_axes None"):
        check_program(p)


def test_vjp_and_jvp_are_refused_inside_a_shard_map_body():
    # jax 0.10.2 refuses a constant cotangent of a varying output there ("expected float32[2]{V:x}")
    for t in (vjp(1), jvp(1)):
        inner = fn(["c"], [eqn("sin", ["c"], ["s"])], ["s"])
        body = fn(["b"], [eqn("call", ["b"], ["s", "g"], transforms=[t], fn=inner)], ["s", "g"])
        p = program(inputs=[("x0", (8,), 1)], functions={"f0": body},
                    calls=[call("f0", [shard_map([[["x"]]], [[["x"]], [["x"]]])], ["x0"])])
        with pytest.raises(ProgramError, match="inside a shard_map body"):
            check_program(p)


def test_rendered_source_defines_the_helpers_it_uses():
    body = fn(["a"], [eqn("wsum", ["a"], ["v"], seed=3), eqn("broadcast", ["v"], ["w"], size=1)], ["w"])
    plain = program(inputs=[("x0", (4,), 1)], functions={"f0": body}, calls=[call("f0", [], ["x0"])])
    src = render(plain)
    assert "def weights(" in src and "def tuple_vjp(" not in src
    p = program(inputs=[("x0", (4,), 1)], functions={"f0": fn(["a"], [eqn("sin", ["a"], ["s"])], ["s"])},
                calls=[call("f0", [vjp(3)], ["x0"]), call("f0", [jvp(4)], ["x0"])])
    src = render(p)
    assert "tuple_vjp(f0, 3)" in src and "tuple_jvp(f0, 4)" in src and "def weights(" in src
    repro = render_repro(p, None, {"oracle": "differential", "kind": "wrong-value", "message": "m", "call": 0})
    assert "def tuple_vjp(" in repro and "def weights(" in repro and "def tuple_jvp(" not in repro
    compile(repro, "<repro>", "exec")


# ------------------------------------------------------------------ real JAX: a wrong transpose is caught
class WrongPpermuteTranspose(Reference):
    """The reference with a planted bug: ppermute transposed with the forward permutation."""

    def collective(self, e, x, ctx):
        if e["op"] != "ppermute" or self.xp is np:
            return super().collective(e, x, ctx)
        jax = self.jax

        def forward(y):  # the right ppermute, of a value or of a cotangent
            return super(WrongPpermuteTranspose, self).collective(e, y, ctx)

        @jax.custom_vjp
        def permute(y):
            return forward(y)

        permute.defvjp(lambda y: (forward(y), None),
                       lambda _, ct: (forward(ct),))  # right: the inverse permutation of ct
        return permute(x)


def grad_of_ppermute(loss: dict) -> dict:
    """grad(f0) where f0 = loss(shard_map(ppermute by one device)) on 4 devices."""
    body = fn(["a"], [eqn("call", ["a"], ["v"], transforms=[shard_map([[["x"]]], [[["x"]]])], fn=ppermute_body()),
                      eqn(loss.pop("op"), ["v"], ["l"], **loss)], ["l"])
    return program(inputs=[("x0", (8,), 3)], functions={"f0": body}, calls=[call("f0", [JIT, grad(0)], ["x0"])])


def judged(worker, p, reference):
    out = worker.run(render(p, worker.caps), timeout=120)
    assert out["status"] == "ok", out
    return [(f.oracle, f.kind, f.call) for f in oracles.judge(p, out, reference)]


def test_a_wrong_ppermute_transpose_is_caught_with_wsum_and_missed_with_sum(worker):
    weighted = grad_of_ppermute({"op": "wsum", "seed": 5})
    plain = grad_of_ppermute({"op": "sum", "axis": None})
    # the reference by hand: the gradient is the weights rolled back (inverse permutation)
    np.testing.assert_array_equal(run1(weighted)[0], np.roll(weights(5, (8,)), -2))
    np.testing.assert_array_equal(run1(plain)[0], np.ones(8, np.float32))
    assert judged(worker, weighted, evaluate(weighted)) == []  # jax 0.10.2 agrees with the reference
    assert judged(worker, plain, evaluate(plain)) == []
    # the planted bug: invisible to an all-ones cotangent, caught by a seeded one
    assert judged(worker, plain, WrongPpermuteTranspose(plain).evaluate()) == []
    assert judged(worker, weighted, WrongPpermuteTranspose(weighted).evaluate()) == [
        ("differential", "wrong-value", 0)]


def test_a_wrong_ppermute_transpose_is_caught_by_vjp(worker):
    chain = [shard_map([[["x"]]], [[["x"]]])]
    p = program(inputs=[("x0", (8,), 7)], functions={"f0": ppermute_body()},
                calls=[call("f0", [vjp(40)] + chain, ["x0"]), call("f0", [JIT, vjp(40)] + chain, ["x0"])])
    assert judged(worker, p, evaluate(p)) == []
    assert judged(worker, p, WrongPpermuteTranspose(p).evaluate()) == [
        ("differential", "wrong-value", 0), ("differential", "wrong-value", 1)]


def test_a_partial_ppermute_fills_zeros_and_its_vjp_runs_the_inverse(worker):
    """A pipeline's send over 2 and 4 devices: index 0 gets zeros (lax.ppermute's docstring), the
    cotangent goes back along the inverse pairs. Over an axis of size 2 the one full permutation is
    its own inverse, so only a partial one like [[0, 1]] shows a transpose that forgets to invert."""
    x = make_input(7, (8,))
    for n, perm in ((4, [[0, 1], [1, 2], [2, 3]]), (2, [[0, 1]])):
        body = fn(["b"], [eqn("ppermute", ["b"], ["p"], axes=["x"], perm=perm)], ["p"])
        chain = [shard_map([[["x"]]], [[["x"]]])]
        p = program(mesh=(("x", n),), inputs=[("x0", (8,), 7)], functions={"f0": body},
                    calls=[call("f0", chain, ["x0"]), call("f0", [JIT] + chain, ["x0"]),
                           call("f0", [JIT, vjp(40)] + chain, ["x0"])])
        k = 8 // n
        want = np.concatenate([np.zeros(k, np.float32), x[:-k]])  # block i -> i + 1, the first gets zeros
        np.testing.assert_array_equal(run1(p)[0], want)
        assert judged(worker, p, evaluate(p)) == []
        assert judged(worker, p, WrongPpermuteTranspose(p).evaluate()) == [("differential", "wrong-value", 2)]


def test_jax_agrees_with_the_reference_on_jvp_and_vjp_of_collectives(worker):
    inner = fn(["b", "c"], [eqn("ppermute", ["b"], ["p"], axes=["x"], perm=ring(4, 3)),
                            eqn("mul", ["p", "c"], ["m"]), eqn("psum", ["m"], ["s"], axes=["x"])], ["p", "s"])
    p = program(inputs=[("x0", (8, 2), 7), ("x1", (2,), 8)], functions={"f0": inner},
                calls=[call("f0", [jvp(41), shard_map([[["x"], None], [None]], [[["x"], None], [None, None]])],
                            ["x0", "x1"]),
                       call("f0", [JIT, vjp(42), shard_map([[["x"], None], [None]], [[["x"], None], [None, None]])],
                            ["x0", "x1"])])
    assert judged(worker, p, evaluate(p)) == []


def test_repro_of_a_vjp_finding_runs_standalone(tmp_path):
    # the repro defines weights / tuple_vjp itself: exit 0 against the right values, 1 against the wrong ones
    import subprocess
    import sys

    p = program(inputs=[("x0", (8,), 7)], functions={"f0": ppermute_body()},
                calls=[call("f0", [vjp(40), shard_map([[["x"]]], [[["x"]]])], ["x0"])])
    finding = {"oracle": "differential", "kind": "wrong-value", "message": "planted", "call": 0}
    codes = []
    for name, ref in (("right", evaluate(p)), ("wrong", WrongPpermuteTranspose(p).evaluate())):
        path = tmp_path / f"repro_{name}.py"
        path.write_text(render_repro(p, None, finding, expected=ref))
        codes.append(subprocess.run([sys.executable, str(path)], capture_output=True, timeout=300).returncode)
    assert codes == [0, 1]


def test_a_wrong_ppermute_transpose_inside_the_body_is_caught_only_by_a_varying_loss(worker):
    """grad inside a shard_map body: the weights of a wsum are the same on every device, so the
    cotangent reaching the ppermute is the same block everywhere and a wrong permutation of it
    changes nothing; the loss L * (L + axis_index) the generator draws there (_Gen.vary_loss)
    scales it by 2 L + i on device i, and the planted bug shows."""
    def body(varying):
        eqns = [eqn("ppermute", ["b"], ["p"], axes=["x"], perm=ring(4)), eqn("wsum", ["p"], ["l"], seed=5)]
        if varying:
            eqns += [eqn("axis_index", ["l"], ["i"], axes=["x"]), eqn("mul", ["l", "i"], ["t"])]
        p = program(inputs=[("x0", (8,), 3)], functions={"f0": fn(["b"], eqns, ["t" if varying else "l"])},
                    calls=[call("f0", [JIT, shard_map([[["x"]]], [["x"]]), grad(0)], ["x0"])])
        check_program(p)
        return p

    uniform, varying = body(False), body(True)
    # by hand: the gradient on device i is the weights (rolled back within the block: a no-op
    # for a ppermute of whole blocks) times 1, or times 2 L_i + i
    np.testing.assert_array_equal(run1(uniform)[0], np.tile(weights(5, (2,)), 4))
    for p in (uniform, varying):
        assert judged(worker, p, evaluate(p)) == []  # jax 0.10.2 agrees with the reference
    assert judged(worker, uniform, WrongPpermuteTranspose(uniform).evaluate()) == []
    assert judged(worker, varying, WrongPpermuteTranspose(varying).evaluate()) == [("differential", "wrong-value", 0)]

    # the generator draws that loss where it can: over 600 programs, some grads inside a body
    # or a named vmap take it (none without _Gen.vary_loss). Twelve seeds of 50, not two of 150:
    # a seed's programs come in clusters (Hypothesis' span mutations), and two seeds gave 0 to 11
    # as unrelated draws moved; twelve gave 19-31 (2026-12-04@d4987c0)
    drawn = []

    def walk(f):
        es = f["eqns"]
        for e, nxt in zip(es, es[1:]):
            if e["op"] == "axis_index" and nxt["op"] == "mul" and nxt["args"] == [e["args"][0], e["outs"][0]]:
                drawn.append(e)
        for e in es:
            if e["op"] == "call":
                walk(e["fn"])

    for p in drawn_programs(tuple(range(1, 13)), 50, cached=True):
        for f in p["functions"].values():
            walk(f)
    assert len(drawn) >= 3, drawn


def test_active_values_follow_argnums_calls_captures_and_stop_gradient():
    """fuzz.features.active_values: grad's argnums only; through a vmap in order; a captured
    active value makes a nested body's results active; a captured input and what only it
    reaches, a parameter outside argnums and an io_callback under stop_gradient do not."""
    from fuzz.features import active_values

    inner = fn(["b1"], [eqn("sin", ["b1"], ["w1"]), eqn("mul", ["w1", "v1"], ["w2"]),
                        eqn("cos", ["x1"], ["w3"])], ["w2", "w3"])
    body = fn(["a1", "a2"], [eqn("sin", ["a1"], ["v1"]), eqn("cos", ["a2"], ["v2"]), eqn("sin", ["x1"], ["v3"]),
                             eqn("call", ["v3"], ["v4", "v5"], transforms=[vmap([0], [0, 0])], fn=inner),
                             eqn("io_callback", ["v1"], ["v6"], tag="t", ordered=False, returns=True,
                                 stop_gradient=True),
                             eqn("add", ["v1", "v2"], ["v7"])], ["v7"])
    p = program(inputs=[("x0", (4,), 0), ("x1", (4,), 1)], functions={"f": body},
                calls=[call("f", [{"kind": "grad", "argnums": [0]}], ["x0", "x1"])])
    got = active_values(p)
    # v1 reaches the nested body as a capture: its mul is active, and with it the call's results
    assert got == {"a1", "v1", "w2", "v4", "v5", "v7"}, sorted(got)
    p["calls"][0]["transforms"] = [{"kind": "vjp", "seed": 1}]  # every argument
    assert {"a2", "v2"} <= active_values(p)
    p["calls"][0]["transforms"] = [JIT]  # no derivative: nothing active
    assert active_values(p) == frozenset()
    # a grad taken inside a nested call of a constant: active inside, a constant outside
    p["calls"][0]["transforms"] = [{"kind": "grad", "argnums": [0]}]
    alone = fn(["b1"], [eqn("sin", ["b1"], ["w1"])], ["w1"])  # (no capture)
    body["eqns"][3] = eqn("call", ["v3"], ["v4"], transforms=[{"kind": "grad", "argnums": [0]}], fn=alone)
    p["functions"]["f"] = body
    got = active_values(p)
    assert {"b1", "w1"} <= got and "v4" not in got, sorted(got)


def test_under_a_derivative_operands_are_picked_among_the_values_it_reaches(monkeypatch):
    """Scope.local, among which an op under a derivative picks its operand 3 times in 4, is
    exactly the visible values the derivative reaches (fuzz.features.active_values, a walk of
    each drawn program's JSON; a subset of them where one function is called under two
    chains), so it leaves out the body's values computed from captured constants only (a
    psum_scatter of such a value never runs its transpose: the 2026-12-06@a5cb656 silent seeded
    mutant). Both checks fail on the 2026-12-06@b554ed7 rule (the body's own values)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    import strategies.programs as SP
    from fuzz.features import active_values
    from fuzz.ops.base import Scope
    from strategies.fresh import fresh_backend

    seen = []  # (local, visible) of each pick under a derivative, since the last program began
    real_sample, real_init = Scope.sample, SP._Gen.__init__

    def sample(self, draw, cands, var=lambda c: c):
        if self.local is not None:
            seen.append((self.local, frozenset(self.visible)))
        return real_sample(self, draw, cands, var)

    gens = []

    def init(self, *a, **k):
        seen.clear()  # (one _Gen per drawn program)
        gens[:] = [self]
        real_init(self, *a, **k)

    monkeypatch.setattr(Scope, "sample", sample)
    monkeypatch.setattr(SP._Gen, "__init__", init)
    count = {"programs": 0, "picks": 0, "exact": 0, "replaced": 0}
    for s in range(61, 67):
        @hseed(s)
        @settings(max_examples=40, phases=[Phase.generate], database=None, deadline=None,
                  suppress_health_check=list(HealthCheck), backend=fresh_backend())
        @given(SP.programs())
        def check(p):
            active = active_values(p)
            count["programs"] += 1
            once = len({c["function"] for c in p["calls"]}) == len(p["calls"])
            if gens[0].replaced_jacobians:  # (a body drawn differentiated, then called under a jit)
                count["replaced"] += 1
                return
            for local, visible in seen:
                if once:  # (a function called under two chains is active where either makes it so)
                    assert local == visible & active, (sorted(local ^ (visible & active)), p)
                    count["exact"] += 1
                else:
                    assert local <= active, (sorted(local - active), p)
                count["picks"] += 1
        check()
    assert count["programs"] >= 200 and count["picks"] >= 100 and count["exact"] >= 50, count
    assert count["replaced"] <= count["programs"] // 20, count  # (the exception stays rare)


@pytest.mark.slow  # (a statistic over drawn programs, 25 s: the default run stays under CI's 10 minutes)
def test_ops_under_a_derivative_mostly_read_the_functions_own_values(monkeypatch):
    """Under a derivative the generator picks an operand among the values the derivative
    reaches (Scope.local) 3 times in 4 (Scope.sample): a captured value is a constant to the
    derivative, so a collective on it is never transposed. Over 600 drawn programs,
    collectives under a derivative read their function's own values in 85% of draws; uniform
    picks read them in 58% (measured, 2026-12-03@c112f03). Since 2026-12-06@a5cb656 Scope.local holds the
    active values only, and a draw counts here when some candidate is one."""
    import fuzz.ops.collectives as C

    count = {"drawn": 0, "own": 0}
    inner = C._varying_first

    def spy(draw, scope, cands, names):
        out = inner(draw, scope, cands, names)
        some = any((c[0] if isinstance(c, tuple) else c) in (scope.local or ()) for c in cands)
        if some:  # (a choice to make: some candidate is active)
            count["drawn"] += 1
            count["own"] += (out[0] if isinstance(out, tuple) else out) in scope.local
        return out

    monkeypatch.setattr(C, "_varying_first", spy)
    # many seeds, few programs each: Hypothesis' generation copies parts of a program into the
    # next ones (span mutations), so a seed's programs come in clusters. Two seeds of 300 fell
    # from 85% to 71% with ppermute's axis preference (2026-12-03@aa939ad), which twelve seeds of 50 show
    # leaves the share as it was: 78-84% against 78-86% on three disjoint seed ranges
    # (60 a seed since the casts pvary and unreduced_psum joined the collectives, 2026-12-04@4bbee13: they
    # pick their operand otherwise, and 50 a seed gave 36 draws here, under the 40 the share needs)
    # (2026-12-05@3a4e10b, with the random ops: 73% over seeds 11-46, 62.5% with uniform picks; single
    # ranges of 12 seeds gave 66-79%, and one run order 64%: hence 36 seeds and 0.67)
    drawn_programs(tuple(range(11, 47)), 60)
    assert count["drawn"] >= 120, count
    assert count["own"] > 0.67 * count["drawn"], count
