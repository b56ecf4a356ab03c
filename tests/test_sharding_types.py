"""Sharding types on an Explicit mesh (``Ty.spec``): inputs split in their types, the ops'
rules (Op.sharding_types), the transforms that keep them (fuzz.typecheck.SPEC_THROUGH), the
generator's use of them, and agreement with JAX on programs that read split values."""
import pytest

from fuzz.render import render
from fuzz.typecheck import NO_SHARDING_TYPES, ProgramError, check_program, release_rules
from support.draws import drawn_programs
from support.judging import agree_with_jax
from support.programs import JIT, call, eqn, fn, program, shard_map, vmap

MESH = (("x", 2), ("y", 2))


def explicit(eqns, results, transforms=(), spec=(("x",), None), shape=(8, 4)):
    """f0(a, b) over x0 (``shape``, split by ``spec``) and x1 (8, 4) split along dim 1 over y."""
    p = program(mesh=MESH, axis_type="explicit", inputs=[("x0", shape, 3), ("x1", (8, 4), 4)],
                functions={"f0": fn(["a", "b"], eqns, results)}, calls=[call("f0", list(transforms), ["x0", "x1"])])
    p["inputs"][0]["spec"] = [list(s) if s else None for s in spec]
    p["inputs"][1]["spec"] = [None, ["y"]]
    return p


def types_of(p) -> dict:
    """{variable: its sharding type (per dim)} of every op's results, as the typing rules give them."""
    seen = {}

    def on_eqn(e, ctx, args):
        seen.update({a: t.dims for a, t in zip(e["args"], args)})
    check_program(p, on_eqn=on_eqn)
    return seen


def test_inputs_and_kept_dims_are_typed():
    p = explicit([eqn("sin", ["a"], ["s"]), eqn("sum", ["s"], ["r"], axis=1), eqn("transpose", ["a"], ["t"]),
                  eqn("broadcast", ["r"], ["u"], size=2), eqn("neg", ["t"], ["n"]), eqn("neg", ["u"], ["m"]),
                  eqn("neg", ["b"], ["nb"])],
                 ["s", "n", "m", "nb"])
    seen = types_of(p)
    assert seen["a"] == (("x",), ()) and seen["b"] == ((), ("y",))
    assert seen["s"] == (("x",), ())       # unary: the operand's
    assert seen["t"] == ((), ("x",))       # transpose: dims reversed
    assert seen["u"] == ((), ("x",))       # sum over dim 1 keeps dim 0's split, broadcast adds an unsplit dim


INDEX = eqn("index", [], ["i"], axes=[], scale=1, offset=1)


@pytest.mark.parametrize("before,e,why", [
    ([INDEX], eqn("dynamic_slice", ["a", "i"], ["o"], axis=0, size=3), "not divisible"),  # 3 rows over 2 shards
    ([], eqn("cumsum", ["a"], ["o"], axis=0), "split over"),                             # along the split dim
    ([eqn("transpose", ["a"], ["t"])], eqn("add", ["a", "t"], ["o"]), "axis twice"),      # x on both dims
    ([eqn("sum", ["a"], ["a1"], axis=0)], eqn("at_set", ["a", "a1"], ["o"], index=2), "split first dim"),
    ([], eqn("slice", ["a"], ["o"], axis=0, start=0, stop=4), "eager slice"),            # part of a split dim, eagerly
    ([eqn("sin", ["b"], ["s"])], eqn("concatenate", ["a", "s"], ["o"], axis=0), "split differently"),
    ([], eqn("argmin", ["b"], ["o"], axis=None), "after the first"),  # jnp ravels: a split dim 1 merged
])
def test_sharding_rules_refuse_what_jax_refuses(before, e, why):
    """Each refused as JAX 0.10.2 refuses it (a ShardingTypeError, measured by hand)."""
    with pytest.raises(ProgramError, match=why):
        check_program(explicit(before + [e], ["o"], shape=(8, 8) if e["op"] == "add" else (8, 4)))


def test_an_argmax_over_all_dims_of_a_value_split_along_its_first_dim_is_allowed():
    check_program(explicit([eqn("argmax", ["a"], ["o"], axis=None), eqn("astype", ["o"], ["of"], dtype="float32")],
                           ["of"]))  # a: split along dim 0 only


def test_orthogonal_splits_broadcast():
    """x on dim 0 and y on dim 1 add up to a value split over both (jax.typeof: float32[8@x,4@y])."""
    assert types_of(explicit([eqn("add", ["a", "b"], ["o"]), eqn("neg", ["o"], ["n"])], ["n"]))["o"] == (("x",), ("y",))


def test_a_jitted_slice_of_a_split_dim_is_typed_with_its_split():
    p = explicit([eqn("slice", ["a"], ["o"], axis=0, start=2, stop=6), eqn("neg", ["o"], ["n"])], ["n"], [JIT])
    assert types_of(p)["o"] == (("x",), ())


def test_split_values_do_not_enter_transforms_that_lose_their_types():
    with pytest.raises(ProgramError, match="into vmap"):
        check_program(explicit([eqn("sin", ["a"], ["s"])], ["s"], [vmap([0, None], [0])]))
    # a vmap over a replicated value may not read a split one it captures
    inner = fn(["c"], [eqn("add", ["c", "a"], ["d"])], ["d"])
    p = explicit([eqn("sum", ["b"], ["r"], axis=1), eqn("call", ["r"], ["o"], transforms=[vmap([0], [0])], fn=inner)],
                 ["o"], shape=(4,), spec=(("x",),))
    with pytest.raises(ProgramError, match="does not keep sharding types"):
        check_program(p)


def test_generator_reads_split_values_on_explicit_meshes():
    """Programs draw ops on values split in their sharding types, the data-movement ops among them
    (before, those ops were refused on an Explicit mesh and inputs were never split there)."""
    from fuzz import ops as O
    from fuzz import typecheck as T

    ops = set()
    for p in drawn_programs([1, 2], 300, cached=True):
        if p["mesh"]["axis_type"] != "explicit":
            continue

        def on_eqn(e, ctx, args):
            if e["op"] != "call" and ctx.explicit and not ctx.manual and any(a.sharded for a in args):
                ops.add(e["op"])
        T.check_program(p, on_eqn=on_eqn)
    assert len(ops) >= 8, ops
    assert any(not O.get(n).explicit_ok for n in ops), ops


@pytest.mark.parametrize("transforms", [[], [JIT], [JIT, {"kind": "grad", "argnums": [0]}]])
def test_programs_on_split_values_agree_with_jax(worker, transforms):
    """Eager, jitted and differentiated: a chain of ops with rules along and beside the split dim."""
    if worker.caps.get("explicit") is not True:
        pytest.skip("this JAX release has no Explicit axes")
    eqns = [eqn("sin", ["a"], ["s"]), eqn("pad", ["s"], ["q"], axis=0, lo=-2, hi=2, interior=0),
            eqn("flip", ["q"], ["fl"], axis=0), eqn("cumsum", ["fl"], ["c"], axis=1),
            eqn("concatenate", ["c", "s"], ["k"], axis=1), eqn("mul", ["k", "k"], ["m"]),
            eqn("wsum", ["m"], ["l"], seed=7)]
    p = explicit(eqns, ["l"] if transforms[-1:] and transforms[-1]["kind"] == "grad" else ["m"], transforms)
    assert types_of(p)["k"] == (("x",), ())
    agree_with_jax(worker, p)


def test_releases_before_0_9_track_no_sharding_types():
    """jax 0.8.1 differs from the measured rules (fuzz.typecheck.release_rules: no_sharding_types):
    no input split on an Explicit mesh there, and the data-movement ops stay off Explicit meshes."""
    from fuzz.render import NEWEST_CAPS

    old = {**NEWEST_CAPS, "jax_version": "0.8.1"}
    p = explicit([eqn("sin", ["a"], ["s"])], ["s"])
    check_program(p, caps={**NEWEST_CAPS, "jax_version": "0.10.2"})
    with pytest.raises(ProgramError, match="from jax 0.9.0"):
        check_program(p, caps=old)
    p["inputs"][0]["spec"] = p["inputs"][1]["spec"] = None
    check_program(p, caps=old)
    p["functions"]["f0"] = fn(["a", "b"], [eqn("cumsum", ["a"], ["c"], axis=1)], ["c"])
    check_program(p)
    with pytest.raises(ProgramError, match="not modelled here"):
        check_program(p, caps=old)
    drawn = [p for p in drawn_programs([3], 200, cached=True, caps=old) if p["mesh"]["axis_type"] == "explicit"]
    assert drawn and not any(i["spec"] and any(i["spec"]) for p in drawn for i in p["inputs"])


def test_reshard_split_makes_a_split_that_later_rules_see():
    """A one-way reshard of a replicated value is split in its type (the campaign of 2026-12-05@fa339ff
    drew a split of 8 over 8 shards into halves JAX refuses when it was typed replicated)."""
    p = program(mesh=(("x", 2), ("y", 4)), axis_type="explicit", inputs=[("x0", (1, 8), 3)],
                functions={"f0": fn(["a"], [eqn("reshard_split", ["a"], ["r"], axes=["y", "x"], dim=1),
                                            eqn("split", ["r"], ["h", "k"], axis=1)], ["h"])},
                calls=[call("f0", [], ["x0"])])
    with pytest.raises(ProgramError, match="not divisible"):
        check_program(p)
    p["functions"]["f0"]["eqns"][0]["axes"] = ["y"]  # 8 over 4 shards: halves of 4 stay split
    assert types_of(p)["r"] == ((), ("y",))


def shard_map_result_program(after, results, transforms=(), spec=(None, None)):
    """f0(a, b): o = shard_map(sin, in_specs P('x'), out_specs P('x'))(a), then ``after``."""
    body = fn(["c"], [eqn("sin", ["c"], ["d"])], ["d"])
    sm = shard_map([[["x"], None]], [[["x"], None]])
    return explicit([eqn("call", ["a"], ["o"], transforms=[sm], fn=body)] + after,
                    results, transforms, spec=spec)


def test_a_shard_maps_results_are_split_as_its_out_specs():
    """On an Explicit mesh JAX types a shard_map's results by its out_specs (jax.typeof after
    out_specs P('x'): float32[16@x,2], jax 0.10.2): where types are tracked they are left so and
    the next ops' rules see the split; inside a transform that loses types they are resharded."""
    p = shard_map_result_program([eqn("cumsum", ["o"], ["c"], axis=1)], ["c"], [JIT])
    assert types_of(p)["o"] == (("x",), ())
    assert "replicate=False" in render(p)
    with pytest.raises(ProgramError, match="split over"):  # cumsum along the split dim: refused as JAX does
        check_program(shard_map_result_program([eqn("cumsum", ["o"], ["c"], axis=0)], ["c"]))
    body = fn(["c"], [eqn("sin", ["c"], ["d"])], ["d"])
    inner = [eqn("call", ["a"], ["o"], transforms=[vmap([0], [0]), shard_map([[["x"]]], [[["x"]]])], fn=body),
             eqn("cumsum", ["o"], ["c"], axis=1)]
    p = explicit(inner, ["c"], spec=(None, None))
    p["inputs"][1]["spec"] = None
    assert types_of(p)["o"] == ((), ())  # (a vmap's results: replicated in their types)
    assert "replicate=False" not in render(p)


@pytest.mark.parametrize("transforms", [[], [JIT], [JIT, {"kind": "grad", "argnums": [0]}]])
def test_ops_on_a_shard_maps_split_results_agree_with_jax(worker, transforms):
    if worker.caps.get("explicit") is not True or NO_SHARDING_TYPES in release_rules(worker.caps):
        pytest.skip("sharding types: jax >= 0.9.0")
    after = [eqn("cumsum", ["o"], ["c"], axis=1), eqn("mul", ["c", "o"], ["m"]), eqn("sum", ["m"], ["r"], axis=0),
             eqn("wsum", ["m"], ["l"], seed=5)]
    grad = transforms[-1:] and transforms[-1]["kind"] == "grad"
    p = shard_map_result_program(after, ["l"] if grad else ["m", "r"], transforms)
    assert types_of(p)["m"] == (("x",), ())
    agree_with_jax(worker, p)


def test_the_reference_and_reducer_type_a_program_under_its_releases_rules():
    """On jax 0.8.1 (no sharding types) an io_callback may read a shard_map's result on an
    Explicit mesh, which the newest rules call split and refuse. The generator draws such
    programs for 0.8.1 (2 in a 10-minute campaign of 2026-12-07@cd44d21); the reference, the reducer's
    validity check and corpus validation typed them under the newest rules and called them
    invalid (an ``invalid`` finding of the generator's own making)."""
    from fuzz.program import validate_entry, validate_program
    from fuzz.reduce import _valid
    from fuzz.reference import evaluate
    from fuzz.render import NEWEST_CAPS, release_caps

    old = {**NEWEST_CAPS, "jax_version": "0.8.1"}
    cb = eqn("io_callback", ["o"], ["r"], tag="cb1", ordered=False, returns=True, stop_gradient=False)
    p = shard_map_result_program([cb], ["r"])
    p["inputs"][1]["spec"] = None
    check_program(p, caps=old)
    with pytest.raises(ProgramError, match="split in its sharding type"):
        check_program(p)
    got = evaluate(p, old)
    assert got["results"][0][0].shape == (8, 4)
    assert set(got["callbacks"][0]) == {"cb1"}
    with pytest.raises(ProgramError, match="split in its sharding type"):
        evaluate(p)
    validate_program(p, old)
    assert _valid(p, old) and not _valid(p, NEWEST_CAPS)
    assert release_caps("0.8.1") == old and release_caps(None) == NEWEST_CAPS
    entry = {"format": "shardfuzz-corpus-entry", "version": 1, "found": "2026-12-07", "jax_version": "0.8.1",
             "jaxlib_version": "0.8.1", "oracle": "differential", "kind": "wrong-value", "message": "m",
             "signature": "differential: wrong-value: io_callback_unordered+shard_map", "status": "open",
             "triage": "t", "program": p, "call": 0}
    validate_entry(entry)
    from fuzz.program import CorpusError
    with pytest.raises(CorpusError, match="split in its sharding type"):
        validate_entry({**entry, "jax_version": "0.10.2", "jaxlib_version": "0.10.2"})


@pytest.mark.parametrize("transforms", [[], [JIT], [JIT, {"kind": "grad", "argnums": [0]}]])
def test_at_updates_with_out_sharding_of_a_split_first_dim_agree_with_jax(worker, transforms):
    """at_set_out_sharding / at_add_out_sharding: the updates the plain ops may not make on an
    Explicit mesh (a split first dim: "Use .at[...].set(out_sharding=)"), static slice, integer
    and traced index, eager, jitted and differentiated; the result keeps the operand's type."""
    from fuzz.util import version_tuple

    if worker.caps.get("explicit") is not True or version_tuple(worker.caps["jax_version"]) < (0, 7, 2):
        pytest.skip("this JAX release has no Explicit axes or no out_sharding in .at[]")
    eqns = [eqn("sum", ["a"], ["r"], axis=0), eqn("sin", ["a"], ["s"]),
            eqn("at_set_out_sharding", ["s", "r"], ["u"], index=[1, -2]),
            eqn("at_add_out_sharding", ["u", "r"], ["v"], index=-3),
            eqn("index", [], ["i"], axes=[], scale=1, offset=5),
            eqn("at_set_out_sharding", ["v", "r", "i"], ["w"], index=None),
            eqn("mul", ["w", "w"], ["m"]), eqn("wsum", ["m"], ["l"], seed=3)]
    grad = transforms[-1:] and transforms[-1]["kind"] == "grad"
    p = explicit(eqns, ["l"] if grad else ["w"], transforms)
    seen = types_of(p)
    assert seen["u"] == seen["w"] == (("x",), ())
    with pytest.raises(ProgramError, match="split first dim"):
        check_program(explicit([e if e["op"] != "at_set_out_sharding" else {**e, "op": "at_set"} for e in eqns],
                               ["w"], transforms))
    agree_with_jax(worker, p)


def test_at_out_sharding_only_on_explicit_meshes_and_releases_that_have_it():
    p = program(mesh=MESH, inputs=[("x0", (8, 4), 3)],
                functions={"f0": fn(["a"], [eqn("at_set_out_sharding", ["a", "a"], ["o"], index=[0, 8])], ["o"])},
                calls=[call("f0", [], ["x0"])])
    with pytest.raises(ProgramError, match="Explicit mesh"):
        check_program(p)
    e = explicit([eqn("sum", ["a"], ["r"], axis=0), eqn("at_add_out_sharding", ["a", "r"], ["o"], index=0)], ["o"])
    check_program(e)
    replicated = {**p, "mesh": e["mesh"]}  # no split input (those are typed from jax 0.9.0 on)
    check_program(replicated, caps={"jax_version": "0.9.0", "explicit": True})  # (types tracked from 0.9.0)
    with pytest.raises(ProgramError, match="0.7.2"):
        check_program(replicated, caps={"jax_version": "0.7.0", "explicit": True})
