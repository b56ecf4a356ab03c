"""Host callbacks beyond io_callback: pure_callback, jax.debug.callback, jax.debug.print.

Their typing rules (fuzz/ops/callbacks.py), the renderer's keyword per release
(``vmap_method`` / ``vectorized``), the callbacks oracle's documented checks per kind of
callback (oracles/callbacks.py), and real runs in the JAX worker under jit, vmap (each
vmap_method), shard_map (fully and partially manual), grad and vjp, with no finding.
"""
import os

import numpy as np
import pytest

import oracles
from fuzz import typecheck as T
from fuzz.execute import Worker
from fuzz.program import validate_program
from fuzz.reference import evaluate
from fuzz.render import NEWEST_CAPS, render
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap
from oracles import callbacks as cb_oracle


def pure(arg, out, tag, method="sequential", stop_gradient=False):
    return eqn("pure_callback", [arg], [out], tag=tag, vmap_method=method, stop_gradient=stop_gradient)


def debug(arg, tag):
    return eqn("debug_callback", [arg], [], tag=tag)


def dprint(arg):
    return eqn("debug_print", [arg], [])


def run(worker, p):
    out = worker.run(render(p, worker.caps), timeout=180)
    assert out["status"] == "ok", out
    return out


# ------------------------------------------------------------------ typing rules
def types(e, arg: T.Ty, ctx: T.Ctx):
    return T.eqn_types(e, [arg], ctx)


MESH = {"x": 2, "y": 2}
MANUAL_X = T.Axis("x", 2, "mesh")
MANUAL_Y = T.Axis("y", 2, "mesh")


def test_pure_callback_result_has_its_arguments_type():
    ctx = T.Ctx(mesh=MESH, axes=(T.Axis("b", 3, "vmap"),))
    assert types(pure("a", "v", "c"), T.Ty((2,), frozenset({"b"})), ctx) == [T.Ty((2,), frozenset({"b"}))]


def test_pure_callback_refuses_what_jax_refuses():
    full = T.Ctx(mesh=MESH, axes=(MANUAL_X, MANUAL_Y))
    with pytest.raises(T.ProgramError, match="check_vma on"):  # JAX would type the result unvarying
        types(pure("a", "v", "c"), T.Ty((2,), frozenset({"x"})), full)
    unchecked = T.Ctx(mesh=MESH, axes=(T.Axis("x", 2, "mesh", check_vma=False), T.Axis("y", 2, "mesh", False)))
    assert types(pure("a", "v", "c"), T.Ty((2,), frozenset({"x"})), unchecked) == [T.Ty((2,), frozenset({"x"}))]
    with pytest.raises(T.ProgramError, match="partial-manual"):
        types(pure("a", "v", "c"), T.Ty((2,)), T.Ctx(mesh=MESH, axes=(MANUAL_X,)))
    with pytest.raises(T.ProgramError, match="stop_gradient"):
        types(pure("a", "v", "c"), T.Ty((2,)), T.Ctx(mesh=MESH, grad_at=0))
    assert types(pure("a", "v", "c", stop_gradient=True), T.Ty((2,)), T.Ctx(mesh=MESH, grad_at=0)) == [T.Ty((2,))]
    explicit_vmap = T.Ctx(mesh=MESH, explicit=True, axes=(T.Axis("b", 3, "vmap"),))
    with pytest.raises(T.ProgramError, match="Explicit"):
        types(pure("a", "v", "c"), T.Ty((2,)), explicit_vmap)
    assert types(pure("a", "v", "c", "expand_dims"), T.Ty((2,)), explicit_vmap) == [T.Ty((2,))]
    with pytest.raises(T.ProgramError, match="vmap_method"):
        types(pure("a", "v", "c", "sequential_unrolled"), T.Ty((2,)), T.Ctx(mesh=MESH))


def test_a_callback_result_varies_over_checked_axes_under_check_rep():
    # the experimental shard_map (jax 0.4.26 - 0.5.x) cannot infer a callback's result replicated
    ctx = T.Ctx(mesh=MESH, axes=(MANUAL_X, T.Axis("y", 2, "mesh", check_vma=False)), rules=frozenset({"check_rep"}))
    io = eqn("io_callback", ["a"], ["v"], tag="c", ordered=False, returns=True, stop_gradient=False)
    for e in (pure("a", "v", "c"), io):
        assert types(e, T.Ty((2,)), ctx) == [T.Ty((2,), frozenset({"x"}))]
        assert types(e, T.Ty((2,)), T.Ctx(mesh=MESH, axes=ctx.axes)) == [T.Ty((2,))]


def test_debug_callbacks_go_anywhere():
    for ctx in (T.Ctx(mesh=MESH, axes=(MANUAL_X,)), T.Ctx(mesh=MESH, grad_at=0),
                T.Ctx(mesh=MESH, axes=(MANUAL_X, MANUAL_Y), grad_at=0)):
        for e in (debug("a", "c"), dprint("a")):
            assert types(e, T.Ty((2,), frozenset({"x"})), ctx) == []


# ------------------------------------------------------------------ rendering per release
def vmap_program(method):
    body = fn(["a"], [pure("a", "v", "cb1", method)], ["v"])
    return program(inputs=[("x0", (4, 2), 1)], functions={"f0": body},
                   calls=[call("f0", [JIT, vmap([0], [0])], ["x0"])])


def test_vmap_method_is_rendered_as_the_release_names_it():
    for method in ("sequential", "expand_dims", "broadcast_all"):
        p = vmap_program(method)
        validate_program(p)
        assert f"vmap_method={method!r}" in render(p)
        old = render(p, {**NEWEST_CAPS, "pure_callback_kw": "vectorized"})
        assert f"vectorized={method != 'sequential'}" in old and "vmap_method" not in old


def test_a_repro_logs_a_pure_callback_only_when_it_checks_callbacks():
    # a repro of another oracle has no log: no line at all (it once rendered "lambda x: None(x)")
    from fuzz.repro import render_repro

    p = vmap_program("sequential")
    for oracle, logs in (("internal-error", False), ("callbacks", True)):
        finding = {"oracle": oracle, "kind": "k", "message": "m", "call": 0}
        src = render_repro(p, NEWEST_CAPS, finding, {"results": [[np.zeros((4, 2), np.float32)]],
                                                     "callbacks": [{"cb1": np.zeros((4, 2))}]})
        compile(src, "repro.py", "exec")
        assert "None(x)" not in src
        assert ("    record('cb1', rank=1)(x)" in src) == logs and ("logs x, returns" in src) == logs, src


# ------------------------------------------------------------------ the oracle's checks per kind
def kinds_program():
    body = fn(["a"], [eqn("io_callback", ["a"], [], tag="io", ordered=False, returns=False, stop_gradient=False),
                      pure("a", "v", "pc"), debug("a", "dc")], ["a"])
    return program(inputs=[("x0", (4,), 1)], functions={"f0": body}, calls=[call("f0", [], ["x0"])])


def at0(values) -> np.ndarray:
    """Cells (position, value) of values all at position 0 (a scalar argument's record)."""
    values = np.asarray(values, dtype=np.float64)
    return np.stack([np.zeros(values.size), values], axis=1)


def judge_received(received: dict, want_io=(1.0, 2.0)):
    """The oracle's findings on ``received`` ({tag: values}), all at position 0."""
    p = kinds_program()
    want = {"io": at0(np.sort(np.array(want_io))), "pc": at0([1.0, 2.0]), "dc": at0([1.0, 2.0])}
    outcome = {"calls": [{"ok": True, "callbacks": {t: at0(v) for t, v in received.items()}}]}
    return [(f.kind, f.details.split(":")[0]) for f in cb_oracle.judge(p, outcome, {"callbacks": [want]})]


def test_oracle_knows_each_tags_kind():
    assert cb_oracle.callback_kinds(kinds_program()) == {"io": "io_callback", "pc": "pure_callback",
                                                         "dc": "debug_callback"}


def test_oracle_checks_what_jax_documents_per_kind():
    both = np.array([1.0, 2.0])
    assert judge_received({"io": both, "pc": both, "dc": both}) == []
    # pure and debug callbacks may be elided, dropped or run on part of the values; an io_callback may not
    assert judge_received({"io": both}) == []
    assert judge_received({"io": both, "pc": np.array([2.0]), "dc": np.array([1.0])}) == []
    assert judge_received({}) == [("not-called", "callback io expected values [(0, 1), (0, 2)]")]
    assert judge_received({"io": np.array([1.0]), "pc": both, "dc": both}) == [("wrong-value", "callback io")]
    # a value the program never gives the host function is a finding for every kind
    for tag in ("io", "pc", "dc"):
        got = {"io": both, "pc": both, "dc": both, tag: np.array([1.0, 2.0, 3.0])}
        assert judge_received(got) == [("wrong-value", f"callback {tag}")]
    assert judge_received({"io": both, "zz": both}) == [("unexpected-call", "callback zz")]


def test_oracle_compares_values_position_by_position():
    """Values are compared per position of the argument's local block: the same values at
    other positions (a permutation within the block) are a wrong value; a 1-D record is
    values at position 0 (rank 0), where no permutation shows."""
    cells = np.array([[0.0, 1.0], [1.0, 2.0]])
    swapped = np.array([[0.0, 2.0], [1.0, 1.0]])
    p = kinds_program()
    assert cb_oracle.judge(p, {"calls": [{"ok": True, "callbacks": {"io": cells}}]}, {"callbacks": [{"io": cells}]}) == []
    found = cb_oracle.judge(p, {"calls": [{"ok": True, "callbacks": {"io": swapped}}]}, {"callbacks": [{"io": cells}]})
    assert [(f.kind, f.details) for f in found] == [
        ("wrong-value", "callback io: unexpected [(0, 2), (1, 1)], missing [(0, 1), (1, 2)] (position in its "
                        "argument, value)")]
    # values all at position 0 (a scalar argument): their order does not matter
    assert cb_oracle.judge(p, {"calls": [{"ok": True, "callbacks": {"io": at0([2.0, 1.0])}}]},
                           {"callbacks": [{"io": at0([1.0, 2.0])}]}) == []


def test_oracle_edge_cases_by_position():
    """NaN is covered by a NaN at the same position only; infinities by the same infinity; a
    value missing at one position is missing even where another position has it; NaN rows and
    -0.0 are merged when the worker dedupes."""
    from fuzz.worker import unique_cells

    p = kinds_program()

    def judged(got, want):
        return [f.kind for f in cb_oracle.judge(p, {"calls": [{"ok": True, "callbacks": {"io": got}}]},
                                                {"callbacks": [{"io": want}]})]

    nan_inf = np.array([[0.0, np.nan], [1.0, np.inf], [2.0, -np.inf]])
    assert judged(nan_inf, nan_inf) == []
    assert judged(np.array([[1.0, np.nan], [0.0, np.inf], [2.0, -np.inf]]), nan_inf) == ["wrong-value"]
    cells = np.array([[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]])
    assert judged(cells, cells) == [] and judged(cells, cells[:2]) == ["wrong-value"]
    assert judged(cells, np.array([[0.0, 1.0], [1.0, 2.0], [2.0, 2.0]])) == ["wrong-value"]
    merged = unique_cells(np, [np.array([[0.0, np.nan], [0.0, np.nan], [1.0, -0.0], [1.0, 0.0]])])
    assert merged.shape == (2, 2) and merged[1].tolist() == [1.0, 0.0] and np.signbit(merged[1, 1]) == 0


def test_the_repros_check_reads_positions_nan_inf_and_both_expected_forms():
    from fuzz.repro import render_repro

    p = vmap_program("sequential")
    finding = {"oracle": "callbacks", "kind": "wrong-value", "message": "m", "call": 0}
    src = render_repro(p, NEWEST_CAPS, finding, {"results": [[np.zeros((4, 2), np.float32)]],
                                                "callbacks": [{"cb1": np.zeros((4, 2))}]})
    ns = {"np": np}
    exec(src[src.index("def check_callbacks"):src.index("received = {}")], ns)
    check = ns["check_callbacks"]
    block = np.array([[np.nan, 1.0, np.inf]])  # one call, batch dim leading, rank 1
    check({"t": [(block, 1)]}, {"t": np.array([np.nan, 1.0, np.inf], np.float32)})
    check({"t": [(block, 1)]}, {"t": (np.array([0, 1, 2], np.int32), np.array([np.nan, 1.0, np.inf], np.float32))})
    check({"t": [(np.array([1.0, 2.0]), 3)]}, {"t": (np.zeros(2, np.int32), np.array([1.0, 2.0], np.float32))})
    with pytest.raises(AssertionError, match="at position 0"):
        check({"t": [(np.array([[1.0, np.nan, np.inf]]), 1)]}, {"t": np.array([np.nan, 1.0, np.inf], np.float32)})


def test_oracle_matches_nan_and_infinities():
    """NaN and inf are values a program may give a callback (take with mode='fill' out of
    bounds gives NaN): the same non-finite value on both sides is no finding, another one is."""
    special = (np.nan, np.inf, -np.inf, 1.0)
    assert judge_received({"io": np.sort(np.array(special))}, want_io=special) == []
    assert judge_received({"io": np.array([1.0, np.nan])}, want_io=(1.0, 2.0)) == [("wrong-value", "callback io")]
    assert judge_received({"io": np.array([1.0, np.inf])}, want_io=(1.0, -np.inf)) == [("wrong-value", "callback io")]


# ------------------------------------------------------------------ real runs
def everywhere_program():
    """Each new callback under jit, vmap (every vmap_method, nested), shard_map (full and partial), grad, vjp."""
    inner = fn(["b"], [pure("b", "w1", "cb1", "sequential"), pure("w1", "w2", "cb2", "expand_dims"),
                       pure("w2", "w3", "cb3", "broadcast_all"), debug("w3", "cb4"), dprint("w3")], ["w3"])
    nested = fn(["a"], [eqn("call", ["a"], ["v1"], transforms=[vmap([0], [0])], fn=inner)], ["v1"])
    manual = fn(["c"], [pure("c", "u1", "cb5"), debug("u1", "cb6"), dprint("c"),
                        eqn("psum", ["u1"], ["u2"], axes=["x", "y"])], ["u2"])
    partial = fn(["d"], [debug("d", "cb7"), dprint("d"), eqn("sin", ["d"], ["t1"])], ["t1"])
    graded = fn(["g"], [pure("g", "s1", "cb8", stop_gradient=True), debug("g", "cb9"), dprint("g"),
                        eqn("mul", ["s1", "g"], ["s2"]), eqn("sum", ["s2"], ["s3"], axis=None)], ["s3"])
    return program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4, 2), 1), ("x1", (4, 2), 2)],
                   functions={"f0": fn(["a"], [eqn("call", ["a"], ["v1"], transforms=[vmap([0], [0])], fn=nested)],
                                       ["v1"]),
                              "f1": manual, "f2": partial, "f3": graded},
                   calls=[call("f0", [JIT], ["x1"]), call("f0", [], ["x1"]),
                          call("f1", [JIT, shard_map([[None, None]], [[None, None]])], ["x0"]),
                          call("f1", [JIT, shard_map([[["x"], None]], [[["x"], None]], check_vma=False)], ["x0"]),
                          call("f2", [JIT, shard_map([[["x"], None]], [[["x"], None]], axis_names=["x"])], ["x0"]),
                          call("f3", [JIT, GRAD], ["x0"]), call("f3", [GRAD], ["x0"]),
                          call("f3", [{"kind": "vjp", "seed": 3}], ["x0"])])


def check_everywhere(worker):
    p = everywhere_program()
    validate_program(p)
    T.check_program(p, caps=worker.caps)
    ref = evaluate(p)
    out = run(worker, p)
    assert [c["error"] for c in out["calls"] if not c["ok"]] == []
    assert oracles.judge(p, out, ref) == []
    ran = [set(c["callbacks"]) for c in out["calls"]]
    # every host function here feeds a result or has an effect: each ran and received what the reference says
    assert ran[0] == ran[1] == {"cb1", "cb2", "cb3", "cb4"} and ran[2] == ran[3] == {"cb5", "cb6"}
    assert ran[4] == {"cb7"} and ran[5] == ran[6] == ran[7] == {"cb8", "cb9"}
    for got, want in zip(out["calls"], ref["callbacks"]):
        for tag in got["callbacks"]:
            assert np.allclose(got["callbacks"][tag], want[tag]), tag  # (position, value) rows, both sorted
    # positions run over the local block: (4, 2) unsplit, (2, 2) split over 'x'
    assert [out["calls"][k]["callbacks"]["cb5"][:, 0].max() for k in (2, 3)] == [7, 3]
    return out


def test_callbacks_run_everywhere_with_no_finding(worker):
    check_everywhere(worker)


def test_the_oracle_sees_a_wrong_value_of_a_pure_callback(worker):
    p = everywhere_program()
    ref = evaluate(p)
    ref["callbacks"][2]["cb5"] = ref["callbacks"][2]["cb5"] + 0.25  # as if the host function got other values
    found = oracles.judge(p, run(worker, p), ref)
    assert [(f.oracle, f.kind, f.call) for f in found] == [("callbacks", "wrong-value", 2)]


OLD_VENV = os.path.expanduser("~/.cache/shardfuzz/venvs/jax-0.4.26")


@pytest.mark.skipif(not os.path.exists(os.path.join(OLD_VENV, ".shardfuzz-ready")),
                    reason="needs the cached jax 0.4.26 venv (shardfuzz run --jax-version 0.4.26 makes it)")
def test_callbacks_run_everywhere_on_jax_0_4_26():
    # vectorized= instead of vmap_method=, the experimental shard_map's check_rep
    w = Worker(python=os.path.join(OLD_VENV, "bin", "python"))
    try:
        assert w.caps["pure_callback_kw"] == "vectorized"
        check_everywhere(w)
    finally:
        w.kill()


def test_a_wrong_result_of_a_pure_callback_is_a_differential_finding(worker):
    # as if JAX handed back something else than the host function's result: every call that returns it differs
    p = everywhere_program()
    src = render(p, worker.caps)
    assert src.count("return np.asarray(x) * 2 + 1") == 5
    out = worker.run(src.replace("return np.asarray(x) * 2 + 1", "return np.asarray(x) * 2"), timeout=180)
    assert out["status"] == "ok", out
    found = oracles.judge(p, out, evaluate(p))
    # (and the callbacks fed by such a result, in calls 0 to 3, receive other values)
    assert {(f.oracle, f.call) for f in found} == ({("differential", k) for k in (0, 1, 2, 3, 5, 6, 7)}
                                                   | {("callbacks", k) for k in (0, 1, 2, 3)}), found


def test_a_failed_callback_does_not_leak_its_error_into_the_next_call():
    """jax.effects_barrier() keeps the runtime token of a multi-device computation whose io_callback
    raised, and raises its error again at every later barrier (jax._src.dispatch.runtime_tokens,
    checked on 0.10.2): the worker drops it (fuzz.worker._drop_effect_tokens), so that a later
    call, here a plain jnp.sin, is not charged with the earlier call's error (2026-12-06@b554ed7: a
    campaign's finding whose program was one jnp.sin)."""
    from fuzz import worker
    import jax

    source = "\n".join([
        "import contextlib, jax, jax.numpy as jnp, numpy as np",
        "from jax.experimental import io_callback",
        "from jax.sharding import Mesh, PartitionSpec as P",
        "CALLBACK_LOG = []",
        "mesh_context = contextlib.nullcontext",
        "mesh = Mesh(np.array(jax.devices()[:2]), ('x',))",
        "def bad(v):",
        "    raise RuntimeError('the host function failed')",
        "def f0(a):",
        "    return io_callback(bad, jax.ShapeDtypeStruct(a.shape, a.dtype), a, ordered=False)",
        "g0 = jax.shard_map(f0, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False)",
        "CALLS = [('g0', g0, (jnp.ones(2),)), ('sin', jnp.sin, (jnp.ones(3),))]",
    ])
    first, second = worker.run_program(jax, np, source, None)
    assert not first["ok"] and "the host function failed" in first["error"]["message"]
    assert second["ok"], second["error"]["message"][-300:]
    jax.effects_barrier()  # nothing stale left behind for the next program either
