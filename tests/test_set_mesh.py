"""An Auto mesh whose calls run under ``jax.set_mesh(mesh)`` (the mesh's ``set_mesh``, jax >= 0.7.1).

``jax.set_mesh`` sets the context mesh that jit, shard_map without ``mesh`` and ``jax.smap``
read (https://docs.jax.dev/en/latest/sharding/explicit-sharding.html); on an Explicit mesh the
worker always runs calls under it. The typing rule (Auto meshes only, the release, no pmap
under it), the rendering (the worker's and the exported script's), JAX against the reference
under it, and generated programs that draw it.
"""
import pytest

from fuzz import typecheck as T
from fuzz.features import features
from fuzz.render import NEWEST_CAPS, render
from fuzz.repro import render_repro
from support.draws import drawn_programs
from support.judging import agree_with_jax
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap


def context_program(set_mesh=True):
    """A (2, 4) Auto mesh: a shard_map with a psum over y, jitted with in_shardings, and the grad
    of a weighted sum of a with_sharding_constraint's result."""
    body = fn(["a"], [eqn("cos", ["a"], ["c"]), eqn("psum", ["c"], ["p"], axes=["y"])], ["p"])
    loss = fn(["a"], [eqn("with_sharding_constraint", ["a"], ["w"], axes=["x"], dim=0), eqn("sin", ["w"], ["s"]),
                      eqn("wsum", ["s"], ["l"], seed=2)], ["l"])
    sm = shard_map([[["x"], ["y"]]], [[["x"], None]])
    jit_in = {**JIT, "in_specs": [[None, ["y"]]]}
    calls = [call("f0", [sm], ["x0"]), call("f0", [jit_in, sm], ["x0"]), call("f1", [JIT, GRAD], ["x0"])]
    p = program(mesh=(("x", 2), ("y", 4)), inputs=[("x0", (4, 8), 3)], functions={"f0": body, "f1": loss},
                calls=calls)
    if set_mesh:
        p["mesh"]["set_mesh"] = True
    return p


def test_set_mesh_is_typed_on_auto_meshes_of_releases_that_have_it():
    T.check_program(context_program())
    explicit = context_program()
    explicit["mesh"]["axis_type"] = "explicit"
    with pytest.raises(T.ProgramError, match="set_mesh on an Explicit mesh"):
        T.check_program(explicit)
    old = {**NEWEST_CAPS, "jax_version": "0.7.0"}
    assert T.NO_SET_MESH in T.release_rules(old) and T.NO_SET_MESH not in T.release_rules({**old, "jax_version": "0.7.1"})
    with pytest.raises(T.ProgramError, match="jax < 0.7.1"):
        T.check_program(context_program(), caps=old)


def test_no_pmap_under_set_mesh():
    p = context_program()
    p["calls"] = [call("f0", [{**vmap([0], [0]), "pmap": True}], ["x1"])]
    p["functions"] = {"f0": fn(["a"], [eqn("sin", ["a"], ["s"])], ["s"])}
    p["inputs"] = [{**p["inputs"][0], "name": "x1", "shape": [8, 2]}]
    T.check_program(context_program(set_mesh=False) | {"calls": p["calls"], "functions": p["functions"],
                                                        "inputs": p["inputs"]})
    with pytest.raises(T.ProgramError, match="pmap under jax.set_mesh"):
        T.check_program(p)


def test_set_mesh_renders_the_context_for_the_worker_and_the_repro():
    src = render(context_program(), NEWEST_CAPS)
    assert "mesh_context = lambda: jax.set_mesh(mesh)" in src
    assert "mesh_context = contextlib.nullcontext" in render(context_program(set_mesh=False), NEWEST_CAPS)
    finding = {"oracle": "differential", "kind": "value", "message": "", "call": 2}
    assert "with jax.set_mesh(mesh):" in render_repro(context_program(), NEWEST_CAPS, finding)
    assert "jax.set_mesh" not in render_repro(context_program(set_mesh=False), NEWEST_CAPS, finding)
    assert "set_mesh" in features(context_program())[0]
    assert "set_mesh" not in features(context_program(set_mesh=False))[0]


def test_jax_agrees_with_the_reference_under_set_mesh(worker):
    if T.NO_SET_MESH in T.release_rules(worker.caps):
        pytest.skip("this JAX has no jax.set_mesh (jax < 0.7.1)")
    agree_with_jax(worker, context_program())


def test_the_generator_draws_set_mesh_on_auto_meshes_only():
    progs = drawn_programs(range(2), 200, cached=True)
    drawn = [p for p in progs if p["mesh"].get("set_mesh")]
    assert drawn and len(drawn) < len(progs) / 2
    assert all(p["mesh"]["axis_type"] == "auto" for p in drawn)
