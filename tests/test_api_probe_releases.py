"""fuzz/jax_api.py on older releases: the probe resolves names as the rendered source does, and
what an old release lacks gates only the users that need it (never every program, never shard_map)."""
import types

from fuzz.jax_api import missing_users, present

# What a jax 0.4.28 worker reported missing (measured 2026-12-07 with the worker's probe, after the
# resolve fix below): no jax.shard_map (the experimental one), no Explicit axes, no reshard, ...
MISSING_0_4_28 = [
    "jax.experimental.shard_map.shard_map(axis_names=)", "jax.experimental.shard_map.shard_map(check_vma=)",
    "jax.freeze", "jax.lax.all_gather(to=)", "jax.lax.all_gather_invariant", "jax.lax.all_gather_invariant(axis=)",
    "jax.lax.all_gather_invariant(tiled=)", "jax.lax.optimization_barrier", "jax.lax.pcast(to=)", "jax.lax.pvary",
    "jax.lax.top_k(axis=)", "jax.new_ref", "jax.random.uniform(out_sharding=)", "jax.set_mesh", "jax.shard_map",
    "jax.shard_map(auto=)", "jax.shard_map(axis_names=)", "jax.shard_map(check_rep=)", "jax.shard_map(check_vma=)",
    "jax.shard_map(in_specs=)", "jax.shard_map(mesh=)", "jax.shard_map(out_specs=)", "jax.sharding.AxisType.Explicit",
    "jax.sharding.Mesh(axis_types=)", "jax.sharding.auto_axes", "jax.sharding.auto_axes(out_sharding=)",
    "jax.sharding.reshard", "jax.smap", "jax.smap(axis_name=)", "jax.smap(in_axes=)", "jax.smap(out_axes=)",
    "jax.typeof"]


def test_an_attribute_is_found_before_a_module_of_the_same_name():
    # jax 0.4.28: ``jax.config`` is a Config object with ``update``, and a deprecated module
    # jax/config.py without it; a rendered program calls jax.config.update after ``import jax``
    config = types.SimpleNamespace(update=lambda *a: None)
    jax = types.SimpleNamespace(config=config)
    shim = types.SimpleNamespace()

    def import_module(name):
        return {"jax": jax, "jax.config": shim}[name]

    assert present(("attr", "jax.config.update"), import_module, None)


def test_a_submodule_is_imported_when_no_attribute_has_its_name():
    shard_alike = types.SimpleNamespace(shard_alike=lambda x, y: (x, y))
    modules = {"jax": types.SimpleNamespace(experimental=types.SimpleNamespace()),
               "jax.experimental.shard_alike": shard_alike}

    def import_module(name):
        if name not in modules:
            raise ImportError(name)
        return modules[name]

    assert present(("attr", "jax.experimental.shard_alike.shard_alike"), import_module, None)
    assert not present(("attr", "jax.experimental.no_such_module.f"), import_module, None)


def test_an_old_release_keeps_every_program_and_shard_map():
    gated = missing_users(MISSING_0_4_28)
    assert "program" not in gated
    for transform in ("shard_map", "jit", "vmap", "grad", "value_and_grad", "vjp", "checkpoint"):
        assert f"transform:{transform}" not in gated, gated.get(f"transform:{transform}")
    # what 0.4.28 really lacks stays gated
    assert {"transform:smap", "transform:explicit", "transform:set_mesh", "op:optimization_barrier"} <= set(gated)
