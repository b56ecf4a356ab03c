"""Each oracle fires on a program built to fail it and stays quiet on a correct one.

The programs run for real in the JAX worker; a failure is made by handing the oracle
a perturbed reference (JAX itself is not wrong on these), or by a source that aborts.
"""
import copy
import textwrap

import numpy as np

import oracles
from fuzz.reference import evaluate
from fuzz.render import render
from support.programs import JIT, call, eqn, fn, program, shard_map, vmap
from oracles.common import Finding, normalize


def run(worker, p):
    out = worker.run(render(p, worker.caps), timeout=120)
    assert out["status"] == "ok", out
    return out


def psum_program():
    body = fn(["a"], [eqn("psum", ["a"], ["v"], axes=["x"]),
                      eqn("io_callback", ["v"], [], tag="cb1", ordered=False, returns=False, stop_gradient=False)],
              ["v"])
    return program(inputs=[("x0", (8,), 1)], functions={"f0": body},
                   calls=[call("f0", [JIT, shard_map([[["x"]]], [[None]])], ["x0"]),
                          call("f0", [shard_map([[["x"]]], [[None]])], ["x0"])])


def test_correct_program_has_no_findings(worker):
    p = psum_program()
    assert oracles.judge(p, run(worker, p), evaluate(p)) == []


def test_differential_fires_on_wrong_value(worker):
    p = psum_program()
    ref = evaluate(p)
    ref["results"][0][0] = ref["results"][0][0] + 0.5
    found = oracles.judge(p, run(worker, p), ref)
    assert [(f.oracle, f.kind, f.call) for f in found] == [("differential", "wrong-value", 0)]


def chaotic_scan():
    """lax.scan carrying c -> sum(sin(x1 + c)) over 8 steps, x1 of 16 elements: each step can
    multiply a last-bit difference by up to 16 (a campaign's false finding, 2026-12-05@7735edd)."""
    step = fn(["c", "x"], [eqn("add", ["x1", "c"], ["v1"]), eqn("sin", ["v1"], ["v2"]),
                           eqn("sum", ["v2"], ["v3"], axis=None)], ["v3"])
    return program(mesh=(("y", 1),), inputs=[("x0", (), 0), ("x1", (16,), 0), ("x2", (8,), 0)],
                   functions={"f0": step},
                   calls=[call("f0", [{"kind": "scan", "in_axes": [None, 0], "carry": [0, None]}], ["x0", "x2"])])


def test_an_output_that_amplifies_rounding_noise_is_judged_by_how_much(worker):
    """JAX's values of the chaotic scan differ from NumPy's by more than float32's tolerance
    (0.18 at 12), within what nudging every op by two ulps moves the reference: no finding; a value
    off by 1/8 in a well-conditioned program, or by 1000 here, still is one."""
    from oracles.differential import agree, tolerance

    p = chaotic_scan()
    out, ref = run(worker, p), evaluate(p)
    assert not agree(out["calls"][0]["outputs"][0], ref["results"][0][0], tolerance(p)), "no longer differs"
    assert oracles.judge(p, out, ref) == []
    out["calls"][0]["outputs"][0] = out["calls"][0]["outputs"][0] + np.float32(1000)
    assert [(f.oracle, f.kind) for f in oracles.judge(p, out, ref)] == [("differential", "wrong-value")]
    q = psum_program()
    out = run(worker, q)
    out["calls"][0]["outputs"][0] = out["calls"][0]["outputs"][0] + np.float32(0.125)
    assert ("differential", 0) in [(f.oracle, f.call) for f in oracles.judge(q, out, evaluate(q))]


def test_equivalent_calls_of_an_amplifying_program_are_judged_by_how_much(worker):
    """The chaotic scan called eagerly and under jit: outputs apart by rounding noise the program
    amplifies are no metamorphic finding when the reference is known; 1000 apart still is."""
    p = chaotic_scan()
    p["calls"].append(call("f0", [JIT] + p["calls"][0]["transforms"], ["x0", "x2"]))
    out, ref = run(worker, p), evaluate(p)
    out["calls"][1]["outputs"][0] = out["calls"][0]["outputs"][0] + np.float32(0.5)  # the nudge moves it by ~3
    assert [f.oracle for f in oracles.metamorphic.judge(p, out)] == ["metamorphic"]  # without the reference
    assert oracles.metamorphic.judge(p, out, ref) == []
    out["calls"][1]["outputs"][0] = out["calls"][0]["outputs"][0] + np.float32(1000)
    assert [f.oracle for f in oracles.metamorphic.judge(p, out, ref)] == ["metamorphic"]


def test_differential_fires_on_wrong_shape(worker):
    p = psum_program()
    ref = evaluate(p)
    ref["results"][1][0] = ref["results"][1][0][:1]
    assert [f.kind for f in oracles.judge(p, run(worker, p), ref)] == ["wrong-shape"]


def test_callbacks_oracle_fires_on_other_values(worker):
    p = psum_program()
    ref = evaluate(p)
    ref["callbacks"][0]["cb1"] = ref["callbacks"][0]["cb1"] + [0.0, 1.0]  # (position, value) rows
    found = oracles.judge(p, run(worker, p), ref)
    assert [(f.oracle, f.call) for f in found] == [("callbacks", 0)]


def test_callbacks_oracle_fires_when_a_callback_never_ran(worker):
    p = psum_program()
    ref = evaluate(p)
    ref["callbacks"][1]["cb9"] = np.array([[0.0, 1.0]])  # (position, value) rows
    assert [f.kind for f in oracles.judge(p, run(worker, p), ref)] == ["not-called"]


def test_metamorphic_fires_when_equivalent_calls_disagree(worker):
    p = psum_program()
    out = run(worker, p)
    assert oracles.metamorphic.judge(p, out) == []
    out["calls"][1]["outputs"][0] = out["calls"][1]["outputs"][0] * 2 + 1
    assert [f.oracle for f in oracles.metamorphic.judge(p, out)] == ["metamorphic"]


def test_metamorphic_does_not_pair_check_vma_variants():
    p = psum_program()
    a, b = copy.deepcopy(p["calls"][0]), copy.deepcopy(p["calls"][0])
    b["transforms"][1]["check_vma"] = False
    key = oracles.metamorphic.equivalence_key
    assert key(a) != key(b)
    assert key(a) == key({**a, "transforms": a["transforms"][1:]})  # jit is an equivalence
    with_spmd = {**a, "transforms": [vmap([0], [0], spmd_axis_name="x")] + a["transforms"]}
    without = {**a, "transforms": [vmap([0], [0])] + a["transforms"]}
    assert key(with_spmd) == key(without)  # so is spmd_axis_name
    remat = {**a, "transforms": a["transforms"] + [{"kind": "checkpoint", "policy": "nothing_saveable"}]}
    assert key(remat) == key(a)  # and jax.checkpoint


def test_internal_error_fires_when_jax_raises(worker):
    body = fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])
    p = program(inputs=[("x0", (8,), 1)], functions={"f0": body},
                calls=[call("f0", [shard_map([[["x"]]], [[None]])], ["x0"])])  # hand-broken: omits a varying axis
    out = worker.run(_broken_source(worker), timeout=120)
    found = oracles.judge(p, out, None)
    assert [f.oracle for f in found] == ["internal-error"]
    assert "out_specs" in found[0].message or "replicat" in found[0].message


def _broken_source(worker):
    good = program(inputs=[("x0", (8,), 1)], functions={"f0": fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])},
                   calls=[call("f0", [shard_map([[["x"]]], [[["x"]]])], ["x0"])])
    src = render(good, worker.caps)
    assert "out_specs=(P('x'),)" in src
    return src.replace("out_specs=(P('x'),)", "out_specs=(P(),)")


ABORT = textwrap.dedent('''
    import os
    import contextlib
    mesh_context = contextlib.nullcontext
    CALLBACK_LOG = []
    def boom():
        os.abort()
    CALLS = [("boom", boom, ())]
''')


def test_crash_oracle_fires_and_worker_recovers(worker):
    out = worker.run(ABORT, timeout=60)
    assert out["status"] == "crash" and out["signal"] == "SIGABRT"
    p = psum_program()
    [f] = oracles.judge(p, out, None)
    assert (f.oracle, f.kind) == ("crash", "SIGABRT")
    assert oracles.judge(p, run(worker, p), evaluate(p)) == []  # a fresh worker took over


def test_hang_oracle_fires_after_the_time_limit(worker):
    src = ABORT.replace("os.abort()", "import time; time.sleep(600)")
    out = worker.run(src, timeout=3)
    assert out["status"] == "hang"
    [f] = oracles.judge(psum_program(), out, None)
    assert f.oracle == "hang"


def test_signature_ignores_names_numbers_and_addresses():
    a = Finding("internal-error", "ValueError", "Primitive add requires varying manual axes to match, but got "
                "[frozenset({'y', 'x'}), frozenset({'y'})] at 0x7f3a for v12")
    b = Finding("internal-error", "ValueError", "Primitive add requires varying manual axes to match, but got "
                "[frozenset({'x'}), frozenset({'z', 'x'})] at 0x55aa for v3")
    c = Finding("internal-error", "ValueError", "Primitive mul requires varying manual axes to match, but got []")
    assert a.signature == b.signature != c.signature
    assert normalize("Check failed: f32[4,8] 'abc' 12") == "Check failed: T[…] '…' N"
    # a value's varying axes are a detail: the same message with and without them (corpus 07c8090686ac)
    assert normalize("should match the aval mesh for shape float32[1]{V:x}. This error occurs at source: a.py:3") == \
        normalize("should match the aval mesh for shape float32[1]. This error occurs at source: b.py:9")
    # the op that met a bad sharding is a detail too (corpus internal-error-a26959bde684, once 8115efc277b0)
    assert normalize("should match the mesh of sharding AbstractMesh('x': 1) passed to index_to_gather.") == \
        normalize("should match the mesh of sharding AbstractMesh('y': 2) passed to jnp.broadcast_to.")
    # a PartitionSpec printed by JAX 0.8 and by 0.9 (corpus internal-error-cd6435c07c68 on both)
    assert normalize("but PartitionSpec('z', 'z') has duplicate entries for `z`") == \
        normalize("but P('z', 'z') has duplicate entries for `z`") == "but P(…) has duplicate entries for `z`"
    # a mesh keeps its axis types and nothing else: two Auto meshes (a pmap's own mesh and the
    # program's, 2026-12-05@9d2d504) are not an Auto and an Explicit one (corpus internal-error-1f2028a54d22)
    same = "mesh should be the same across the entire program. Got mesh shape for one sharding {} and {} for another"
    auto = "AbstractMesh('x': 4, 'y': 2, axis_types=(Auto, Auto), device_kind=cpu, num_cores=None, platform=cpu)"
    pmap = "AbstractMesh('i': 8, axis_types=(Auto,), device_kind=cpu, num_cores=None, platform=cpu)"
    explicit = "AbstractMesh('z': 1, axis_types=(Explicit,), device_kind=cpu, num_cores=None, platform=cpu)"
    assert normalize(same.format(auto, pmap)) == normalize(same.format(pmap, pmap)) != \
        normalize(same.format(explicit, pmap))
    assert normalize(same.format(explicit, pmap)) == normalize(same.format(pmap, explicit))  # (either order: JAX varies it)
    assert normalize(same.format(explicit, pmap)).endswith("AbstractMesh<Auto> and AbstractMesh<Explicit> for another")
    assert normalize("shard_map Mesh('i': 2, axis_types=(Auto,)) (x)") == "shard_map Mesh<Auto> (…)"
    # where JAX is installed is not the bug (internal-error-d588cacc9fcc, found in one venv, replayed in another)
    where = "function <lambda> at {}/jax/_src/lax/control_flow/loops.py:2735 traced for scan returned a ref"
    assert normalize(where.format("/tmp/fresh1/.venv/lib/python3.11/site-packages")) == \
        normalize(where.format("/work/venv/lib/python3.11/site-packages")) == \
        "function <lambda> at <path>:N traced for scan returned a ref"
    assert "github.com/jax-ml/jax/issues" in normalize("open an issue at https://github.com/jax-ml/jax/issues please")
    assert "jax/_src/core.py" in normalize("raised in jax/_src/core.py in pvary")
    # a host callback's error: its own last line is the bug, XLA's dispatch prefixes are not (2026-12-06@b554ed7)
    tb = ("CpuCallback error calling callback: Traceback (most recent call last):\n"
          '  File "/x/site-packages/jax/_src/callback.py", line 825, in _wrapped_callback\n'
          "RuntimeError: Incorrect output shape for return value #0: Expected: {}, Actual: (1, 1)")
    nested = [normalize("INTERNAL: " + "Error dispatching computation: " * k + tb.format("(1,)")) for k in range(4)]
    assert len(set(nested)) == 1 and "Incorrect output shape for return value" in nested[0], nested
    assert normalize("INTERNAL: " + tb.format("(2,)")) == nested[0]  # (shapes are details)
    assert normalize("INTERNAL: " + tb.replace("RuntimeError: Incorrect output shape", "ValueError: other")) != nested[0]


def test_crash_signature_uses_the_fatal_line():
    stderr = ("W0000 00:00:1 123 foo.cc:1] noise\n"
              "F0000 00:00:1700000000.123456 4242 pjrt_client.cc:99] Check failed: layout != nullptr (0x1 vs 0x2)\n"
              "Fatal Python error: Aborted\n")
    [f] = oracles.crash.judge({}, {"status": "crash", "signal": "SIGABRT", "stderr": stderr})
    assert f.message.startswith("Check failed: layout != nullptr")
    assert "pjrt_client.cc" not in f.signature and "0x1" not in f.signature


HASH_DEPENDENT = textwrap.dedent('''
    import contextlib
    import jax
    import jax.numpy as jnp
    mesh_context = contextlib.nullcontext
    CALLBACK_LOG = []
    def f(a):
        return jnp.sin(a)
    f.__name__ = "_".join({"x", "y", "z"})  # set order: depends on PYTHONHASHSEED
    CALLS = [("f", jax.jit(f), (jnp.ones(3),))]
''')


def test_determinism_oracle_fires_across_hash_seeds_and_not_within_one():
    from fuzz.execute import Worker

    program = {"calls": [{"function": "f0", "transforms": [{"kind": "jit"}], "args": []}]}
    with Worker(hash_seed=0) as a, Worker(hash_seed=1) as b:
        mine = a.run(HASH_DEPENDENT, timeout=120, lower="after")
        renamed = b.run(HASH_DEPENDENT.replace('"_".join({"x", "y", "z"})', '"fixed"'), timeout=120, lower="only")
        theirs = b.run(HASH_DEPENDENT, timeout=120, lower="only")
    assert oracles.determinism.judge(program, mine, mine) == []
    [f] = oracles.determinism.judge(program, mine, theirs)
    assert (f.oracle, f.kind) == ("determinism", "cross-process")
    assert "@@" in f.details and "jit_" in f.details  # a unified diff of the module names
    assert oracles.determinism.judge(program, mine, renamed)  # the name is in the lowering


RETRACE_DEPENDENT = textwrap.dedent('''
    import contextlib
    import jax
    import jax.numpy as jnp
    mesh_context = contextlib.nullcontext
    CALLBACK_LOG = []
    TRACES = [0]
    def f(a):
        TRACES[0] += 1  # each trace bakes another constant into the lowering
        return a * TRACES[0]
    CALLS = [("f", jax.jit(f), (jnp.ones(3),))]
''')


def test_determinism_oracle_fires_after_clearing_caches_in_the_lowering_worker():
    """The runner's setting: the main worker lowers once after running (lower=True), the
    lowering worker lowers, clears JAX's caches and lowers again ("only"): a lowering that
    changes after jax.clear_caches() is a within-process finding, from the lowering worker."""
    from fuzz.execute import Worker

    program = {"calls": [{"function": "f0", "transforms": [{"kind": "jit"}], "args": []}]}
    with Worker(hash_seed=0) as a, Worker(hash_seed=1) as b:
        mine = a.run(RETRACE_DEPENDENT, timeout=120, lower=True)
        theirs = b.run(RETRACE_DEPENDENT, timeout=120, lower="only")
        steady = b.run(HASH_DEPENDENT.replace('"_".join({"x", "y", "z"})', '"fixed"'), timeout=120, lower="only")
    assert "relowering" not in mine["calls"][0] and "relowering" in theirs["calls"][0]
    [f] = oracles.determinism.judge(program, mine, theirs)
    assert (f.oracle, f.kind) == ("determinism", "within-process")
    assert oracles.determinism.judge(program, steady, steady) == []


def test_a_call_that_raises_does_not_stop_the_others_from_being_judged(worker):
    """Each call is judged on its own: call 0 raises in JAX, call 1's wrong value is still found."""
    p = psum_program()
    src = render(p, worker.caps)
    assert src.count("out_specs=(P(),)") == 2
    broken = src.replace("out_specs=(P(),)", "out_specs=(P('nonexistent_axis'),)", 1)  # call 0 only
    out = worker.run(broken, timeout=120)
    assert out["status"] == "ok"
    ref = evaluate(p)
    ref["results"][1][0] = ref["results"][1][0] + 0.5
    found = oracles.judge(p, out, ref)
    assert sorted((f.oracle, f.call) for f in found) == [("differential", 1), ("internal-error", 0)]


def test_a_lowering_difference_is_keyed_by_its_op_and_the_attributes_that_differ():
    """One root cause, one signature: shard_alike's process-wide group counter changed
    ``group_id`` in lines that differed in SSA names and shapes too (14 signatures in one
    campaign before); a changed sharding annotation keys on the op and ``mhlo.sharding``."""
    from oracles.determinism import diff_key

    keys = {diff_key(f"{ssa}sdy.sharding_group {v} group_id={i} : tensor<{t}>",
                     f"{ssa}sdy.sharding_group {v} group_id={i + 5} : tensor<{t}>")
            for ssa in ("", "%2 = ") for v in ("%arg0", "%cst_3", "%7") for i in (0, 12) for t in ("f32", "2x4xf32")}
    assert keys == {"sdy.sharding_group: group_id"}
    assert diff_key('%0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{devices=[2,1]<=[2]}"} : '
                    '(tensor<8xf32>) -> tensor<8xf32>',
                    '%0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{devices=[1,2]<=[2]}"} : '
                    '(tensor<8xf32>) -> tensor<8xf32>') == "stablehlo.custom_call: mhlo.sharding"
    assert diff_key("%1 = stablehlo.add %0, %0 : tensor<4xf32>", "") == "stablehlo.add"
    assert diff_key("%1 = stablehlo.sine %0 : tensor<4xf32>", "%1 = stablehlo.cosine %0 : tensor<4xf32>") \
        == "stablehlo.sine"
