"""fuzz/jaxpr_numpy.py: the reference's derivatives evaluated with NumPy give JAX's values.

Each NumPy rule is checked against JAX's own eager evaluation of the same primitive; the
reference with the NumPy path against the reference run eagerly (as before the path existed),
on drawn programs with derivatives, judged as the differential oracle judges JAX.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax import lax

from fuzz import jaxpr_numpy as J
from fuzz.reference import Reference
from support.programs import call, eqn, fn, program

F = np.arange(-6, 6, dtype=np.float32).reshape(3, 4) / 4
G = np.arange(12, dtype=np.float32).reshape(4, 3) / 8 - 0.5
I = np.arange(12, dtype=np.int32).reshape(3, 4) - 5

# (primitive, function, arguments): each primitive of J.RULES in a small function
CASES = [
    ("neg", lambda x: -x, (F,)), ("sin", jnp.sin, (F,)), ("cos", jnp.cos, (F,)), ("tan", jnp.tan, (F,)),
    ("tanh", jnp.tanh, (F,)), ("exp", jnp.exp, (F,)), ("log", jnp.log, (F + 2,)), ("log1p", jnp.log1p, (F,)),
    ("expm1", jnp.expm1, (F,)), ("abs", lax.abs, (F,)), ("sign", lax.sign, (F,)), ("floor", lax.floor, (F,)),
    ("ceil", lax.ceil, (F,)), ("sqrt", lax.sqrt, (F + 2,)), ("rsqrt", lax.rsqrt, (F + 2,)),
    ("square", lax.square, (F,)), ("logistic", lax.logistic, (F * 40,)), ("is_finite", lax.is_finite, (np.array([np.nan, np.inf, -np.inf, 1.0], np.float32),)),
    ("integer_pow", lambda x: lax.integer_pow(x, 31) + lax.integer_pow(x, -7) + lax.integer_pow(x, 0), (F + 1.04,)),
    ("copy", lambda x: lax.copy_p.bind(x), (F,)), ("stop_gradient", lambda x: x * lax.stop_gradient(x), (F,)), ("integer_pow", lambda x: x ** 3, (F,)),
    ("add", lax.add, (F, F)), ("add_any", lambda x: jax.grad(lambda y: jnp.sum(y * y + y))(x), (F,)),
    ("sub", lax.sub, (F, F.T.reshape(3, 4))), ("mul", lax.mul, (F, F)), ("div", lax.div, (F, F + 10)),
    ("rem", lax.rem, (F * 3, F + 10)), ("max", lax.max, (F, -F)), ("min", lax.min, (F, -F)),
    ("pow", lax.pow, (F + 2, F)), ("atan2", lax.atan2, (F, F.T.reshape(3, 4))),
    ("and", lax.bitwise_and, (I, I + 3)), ("or", lax.bitwise_or, (I, I + 3)), ("xor", lax.bitwise_xor, (I, I + 3)),
    ("not", lax.bitwise_not, (F > 0,)),
    ("eq", lax.eq, (F, -F)), ("ne", lax.ne, (F, -F)), ("lt", lax.lt, (F, -F)), ("le", lax.le, (F, -F)),
    ("gt", lax.gt, (F, -F)), ("ge", lax.ge, (F, -F)),
    ("select_n", lambda p, x, y: lax.select_n(p, x, y), (F > 0, F, -F)),
    ("clamp", lambda x: lax.clamp(np.float32(-0.5), x, np.float32(0.25)), (F,)),
    ("convert_element_type", lambda x: x.astype(jnp.float32) * 2, (I,)),
    ("broadcast_in_dim", lambda x: jnp.broadcast_to(x[:, None, :], (3, 2, 4)), (F,)),
    ("reshape", lambda x: x.reshape(2, 6), (F,)), ("transpose", lambda x: x.T, (F,)),
    ("squeeze", lambda x: lax.squeeze(x[None], (0,)), (F,)), ("rev", lambda x: lax.rev(x, (1,)), (F,)),
    ("concatenate", lambda x: jnp.concatenate([x, -x], axis=1), (F,)),
    ("pad", lambda x: lax.pad(x, np.float32(9), ((1, -2, 1), (-1, 2, 0))), (F,)),
    ("slice", lambda x: x[1:, ::2], (F,)), ("split", lambda x: jnp.split(x, [1, 3], axis=1), (F,)),
    ("dynamic_slice", lambda x, i: lax.dynamic_slice(x, (i, i), (2, 3)), (F, np.int32(7))),
    ("dynamic_update_slice", lambda x, i: lax.dynamic_update_slice(x, -x[:2, :2], (i, -i)), (F, np.int32(5))),
    ("iota", lambda x: x + lax.broadcasted_iota(jnp.float32, (3, 4), 1), (F,)),
    ("reduce_sum", lambda x: jnp.sum(x, axis=1), (F,)), ("reduce_max", lambda x: jnp.max(x, axis=0), (F,)),
    ("reduce_min", lambda x: jnp.min(x, axis=(0, 1)), (F,)), ("reduce_prod", lambda x: jnp.prod(x, axis=1), (F,)),
    ("reduce_and", lambda x: jnp.all(x > -1, axis=1), (F,)), ("reduce_or", lambda x: jnp.any(x > 1, axis=0), (F,)),
    ("reduce_and", lambda i: lax.reduce_and_p.bind(i, axes=(0,)), (I + 7,)),  # (bitwise on int32)
    ("reduce_or", lambda i: lax.reduce_or_p.bind(i, axes=(0, 1)), (I + 7,)),
    ("cumsum", lambda x: lax.cumsum(x, axis=1, reverse=True), (F,)), ("cumprod", lambda x: lax.cumprod(x, axis=0), (F,)),
    ("cummax", lambda x: lax.cummax(x, axis=1), (F,)), ("cummin", lambda x: lax.cummin(x, axis=1, reverse=True), (F,)),
    ("dot_general", lambda x, y: lax.dot_general(x[None].repeat(2, 0), y[None].repeat(2, 0), (((2,), (1,)), ((0,), (0,)))),
     (F, G)),
    ("dot_general", lambda p, q: lax.dot_general(p, q, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32),
     (F > 0, G > 0)),
    ("dot_general", lambda i, j: lax.dot_general(i, j, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32),
     (I * 65536, I.T * 65536)),
]


def numpy_and_jax(f, args):
    """(outputs by fuzz.jaxpr_numpy, by JAX eagerly, {primitive: equations evaluated by a NumPy rule})."""
    closed = jax.make_jaxpr(f)(*args)
    before = dict(J.STATS.numpy)
    got = J.evaluate(closed, [np.asarray(a) for a in args])
    ran = {k: v - before.get(k, 0) for k, v in J.STATS.numpy.items() if v > before.get(k, 0)}
    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(f(*args))]
    return got, want, ran


def check_case(name, f, args):
    got, want, ran = numpy_and_jax(f, args)
    assert name in ran, f"{name} was not evaluated by its NumPy rule: {ran}"
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("name,f,args", CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_each_numpy_rule_gives_jax_s_values(name, f, args):
    check_case(name, f, args)


def test_a_pure_callback_runs_its_host_function():
    seen = []

    def host(x):
        seen.append(x)
        return np.asarray(x) * 2

    f = lambda x: jnp.sin(jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential"))
    got, _, ran = numpy_and_jax(f, (F,))
    assert "pure_callback" in ran and len(seen) == 2  # (numpy_and_jax also runs f with JAX)
    np.testing.assert_allclose(got[0], np.sin(2 * F), rtol=1e-6)


def test_every_rule_has_a_case():
    assert set(J.RULES) - {"copy_p"} <= {c[0] for c in CASES}


def test_a_wrong_rule_fails_its_case(monkeypatch):
    monkeypatch.setitem(J.RULES, "sin", J.RULES["cos"])
    with pytest.raises(AssertionError):
        check_case("sin", jnp.sin, (F,))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(n=st.integers(1, 5), lo=st.integers(-4, 3), hi=st.integers(-4, 3), interior=st.integers(0, 2),
       start=st.integers(-8, 8), size=st.integers(1, 5))
def test_windows_clamp_and_crop_as_jax_does(n, lo, hi, interior, start, size):
    x = np.arange(1, n + 1, dtype=np.float32)
    if n + (n - 1) * interior + lo + hi >= 0:
        check_case("pad", lambda v: lax.pad(v, np.float32(-1), ((lo, hi, interior),)), (x,))
    size = min(size, n)
    check_case("dynamic_slice", lambda v, i: lax.dynamic_slice_in_dim(v, i, size), (x, np.int32(start)))
    check_case("dynamic_update_slice", lambda v, i: lax.dynamic_update_slice_in_dim(v, -v[:size], i, 0),
               (x, np.int32(start)))


def test_a_primitive_without_a_rule_is_bound_with_jax():
    x = np.array([3.0, 1.0, 2.0], np.float32)
    before = J.STATS.bound.get("sort", 0)
    got, want, _ = numpy_and_jax(jnp.sort, (x,))
    np.testing.assert_array_equal(got[0], want[0])
    assert J.STATS.bound.get("sort", 0) == before + 1


DERIVATIVES = {"grad", "value_and_grad", "vjp", "jvp", "linearize", "jacrev", "jacfwd"}


@pytest.mark.slow  # (16 drawn programs through eager JAX, ~25 s idle; every rule's own case and the benchmark's planted rule stay)
def test_the_numpy_path_agrees_with_the_eager_reference_on_drawn_programs():
    """As the differential and callbacks oracles judge JAX (benchmarks/reference.py's ``disagree``):
    the eager reference's values (what the reference gave before the NumPy path) agree with the
    NumPy path's, or differ by the rounding noise the program amplifies."""
    from fuzz.features import features
    from support.draws import drawn_programs

    bench = reference_benchmark()
    progs = [p for p in drawn_programs([5, 6], 60, cached=True) if features(p)[0] & DERIVATIVES][:16]
    assert len(progs) >= 10
    numpy_eqns = sum(J.STATS.numpy.values())
    for p in progs:
        fast, _ = bench.timed(p, True)
        eager, _ = bench.timed(p, False)
        assert bench.disagree(p, fast, eager) is None
    assert sum(J.STATS.numpy.values()) > numpy_eqns + 100  # (the NumPy path ran)


def reference_benchmark():
    """benchmarks/reference.py as a module."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import reference
    return reference


def test_a_callback_under_grad_is_recorded_from_the_jaxpr():
    body = fn(["a"], [eqn("sin", ["a"], ["s"]),
                      eqn("io_callback", ["s"], [], tag="cb1", ordered=False, returns=False, stop_gradient=True),
                      eqn("wsum", ["s"], ["v"], seed=3)], ["v"])
    p = program(inputs=[("x0", (4,), 2)], functions={"f0": body},
                calls=[call("f0", [{"kind": "grad", "argnums": [0]}], ["x0"])])
    eager = Reference(p)
    eager.jaxpr_numpy = False
    before = dict(J.STATS.eager)
    got, want = Reference(p).evaluate(), eager.evaluate()
    assert J.STATS.eager == before  # (traced, not run eagerly)
    np.testing.assert_allclose(got["results"][0][0], want["results"][0][0], rtol=1e-6)
    assert list(got["callbacks"][0]) == ["cb1"] and len(got["callbacks"][0]["cb1"]) == 4
    np.testing.assert_allclose(got["callbacks"][0]["cb1"], want["callbacks"][0]["cb1"], rtol=1e-6)


def test_the_reference_benchmark_finds_no_disagreement_and_can_find_one(monkeypatch):
    bench = reference_benchmark()
    row = bench.run_seed(8, 3)
    assert row["programs"] == 8 and row["numpy_seconds"] > 0 and row["disagree"] == []
    p = next(p for p in bench.drawn(30, 3) if {"grad", "vjp", "jvp"} & set(p_features(p)))
    fast, _ = bench.timed(p, True)
    monkeypatch.setitem(J.RULES, "mul", J.RULES["add"])  # a planted wrong rule
    monkeypatch.setitem(J.RULES, "add_any", J.RULES["sub"])
    wrong, _ = bench.timed(p, True)
    eager, _ = bench.timed(p, False)
    assert bench.disagree(p, fast, eager) is None
    assert bench.disagree(p, wrong, eager) is not None


def p_features(p):
    from fuzz.features import features
    return features(p)[0]


def test_a_rule_that_raises_leaves_the_derivative_to_eager_jax(monkeypatch):
    body = fn(["a"], [eqn("sin", ["a"], ["s"]), eqn("wsum", ["s"], ["v"], seed=3)], ["v"])
    p = program(inputs=[("x0", (4,), 2)], functions={"f0": body},
                calls=[call("f0", [{"kind": "grad", "argnums": [0]}], ["x0"])])
    want = Reference(p).evaluate()["results"][0][0]

    def broken(*a, **k):
        raise AssertionError("a broken rule")

    monkeypatch.setattr(J, "_equation", broken)
    before = J.STATS.eager.get("evaluate: AssertionError", 0)
    got = Reference(p).evaluate()["results"][0][0]
    assert J.STATS.eager["evaluate: AssertionError"] == before + 1
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("y", [2, 3, 7, 31, 100, -1, -7])
def test_integer_pow_rounds_as_lax_does(y):
    # lax multiplies by repeated squaring (powf rounds otherwise: 13 ulp apart at y = 31)
    x = np.random.default_rng(y + 50).uniform(0.9, 1.1, size=256).astype(np.float32)
    got, want, ran = numpy_and_jax(lambda v: lax.integer_pow(v, y), (x,))
    assert "integer_pow" in ran
    np.testing.assert_array_equal(got[0], want[0])
