"""The program reducer (fuzz/reduce.py), with fake predicates on the program JSON: no JAX run."""
import ast
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz import reduce as R
from fuzz import typecheck as T
from fuzz.program import validate_program
from fuzz.reduce import candidates, canonical, reduce_program, size
from fuzz.render import NEWEST_CAPS, render
from fuzz.typecheck import ProgramError, check_program
from strategies.programs import programs
from support.programs import JIT, call, eqn, fn, program, shard_map, vmap

OLD_CAPS = {"shard_map": "experimental", "check_kw": "check_rep", "partial_manual": "auto", "explicit": False}
CALLBACK = dict(tag="cb1", ordered=True, returns=False, stop_gradient=False)


# ----------------------------------------------------------------------------- helpers
def eqns_of(p):
    """Every equation of a program, nested ones too, in reading order."""
    out = []

    def walk(f):
        for e in f["eqns"]:
            out.append(e)
            if "fn" in e:
                walk(e["fn"])
    for f in p["functions"].values():
        walk(f)
    return out


def ops(p):
    return [e["op"] for e in eqns_of(p)]


def arg_ranks(p):
    """[(op, max rank of its args)] for every equation, from the typing rules."""
    seen = []
    check_program(p, on_eqn=lambda e, ctx, args: seen.append((e["op"], max((a.rank for a in args), default=0))))
    return seen


def structure(s):
    return (s.structure, s.values, s.params)


class Recorder:
    """A JSON predicate that checks what the reducer shows it: every candidate validates
    and renders, the call index is in range, and no candidate is evaluated twice."""

    def __init__(self, pred, caps=NEWEST_CAPS):
        self.pred = pred
        self.caps = caps
        self.seen = set()
        self.calls = []
        self.candidates = []

    def __call__(self, cand, c):
        validate_program(cand)
        render(cand, self.caps)
        assert c is None or 0 <= c < len(cand["calls"])
        key = json.dumps([cand, c], sort_keys=True)
        assert key not in self.seen, "a cached candidate was evaluated again"
        self.seen.add(key)
        self.calls.append(c)
        self.candidates.append((cand, c))
        return bool(self.pred(cand, c))


def assert_fixed_point(r, pred, caps=NEWEST_CAPS):
    """No single step of any pass gives a valid, smaller program that is still interesting."""
    base = structure(size(r.program))
    for name, cand, c in candidates(r.program, r.call):
        try:
            validate_program(cand)
            render(cand, caps)
        except ValueError:
            continue
        if structure(size(cand)) < base:
            assert not pred(cand, c), f"a {name} step still applies: {json.dumps(cand)}"


def assert_log_decreases(r):
    for line in r.log:
        before, after = line.split(": ", 1)[1].split(" -> ")
        b = [float(x) for x in before.split("/")]
        a = [float(x) for x in after.split("/")]
        assert a < b, line


# ----------------------------------------------------------------------------- hand-built
def fifteen_with_psum():
    """15 equations in a shard_map over a 2-axis mesh; one psum among them."""
    body = fn(["a"], [
        eqn("sin", ["a"], ["v1"]), eqn("cos", ["v1"], ["v2"]), eqn("mul", ["v1", "v2"], ["v3"]),
        eqn("add", ["v3", "a"], ["v4"]), eqn("tanh", ["v4"], ["v5"]), eqn("neg", ["v5"], ["v6"]),
        eqn("psum", ["v6"], ["v7"], axes=["x", "y"]), eqn("sin", ["v7"], ["v8"]), eqn("mul", ["v8", "v4"], ["v9"]),
        eqn("cos", ["v9"], ["v10"]), eqn("sub", ["v10", "v1"], ["v11"]), eqn("tanh", ["v11"], ["v12"]),
        eqn("add", ["v12", "v2"], ["v13"]), eqn("neg", ["v13"], ["v14"]), eqn("sin", ["v14"], ["v15"])], ["v15"])
    return program(mesh=(("x", 2), ("y", 4)), inputs=[("x0", (8, 4), 3), ("x1", (8, 4), 4)], functions={"f0": body},
                   calls=[call("f0", [JIT, shard_map([[["x", "y"], None]], [[["x", "y"], None]])], ["x0"])])


def test_fifteen_equations_where_one_psum_matters_reduce_to_it():
    p = fifteen_with_psum()
    validate_program(p)
    assert len(eqns_of(p)) == 15
    rec = Recorder(lambda c, k: "psum" in ops(c))
    r = reduce_program(p, rec, call=0)
    assert r.reduced and r.call == 0
    assert ops(r.program) == ["psum"]
    # The known minimum: one call of one function through one shard_map (a psum needs a
    # manual axis), one equation reading the captured input, one result, a one-axis mesh
    # of size 1 and a rank-0 input: 9 structural items, no values.
    minimal = program(mesh=(("x", 1),), inputs=[("x0", (), 0)],
                      functions={"f0": fn([], [eqn("psum", ["x0"], ["v1"], axes=["x"])], ["v1"])},
                      calls=[call("f0", [shard_map([], [[]])], [])])
    validate_program(minimal)
    assert structure(size(r.program)) <= structure(size(minimal))
    assert size(r.program).structure == 9 and size(r.program).values == 0
    assert r.runs == len(rec.calls) and r.log
    assert_log_decreases(r)
    assert size(r.program).names == 0  # canonical names: v1, x0, f0
    assert_fixed_point(r, rec.pred)


def seed_c_like():
    """An outer vmap with spmd_axis_name over a function whose shard_map body vmaps a
    closure over the outer batched value, with a collective over the manual axis, and noise."""
    inner = fn(["s"], [eqn("add", ["a1", "s"], ["w1"]), eqn("sin", ["w1"], ["w2"])], ["w2"])
    body = fn(["b"], [
        eqn("cos", ["b"], ["u1"]),
        eqn("call", ["b"], ["u2"], transforms=[vmap([0], [0])], fn=inner),
        eqn("psum", ["u2"], ["u3"], axes=["y"]),
        eqn("mul", ["u2", "u3"], ["u4"]),
        eqn("tanh", ["u4"], ["u5"])], ["u5", "u3"])
    f = fn(["a1", "a2"], [
        eqn("sin", ["a1"], ["v1"]), eqn("neg", ["a2"], ["v2"]),
        eqn("call", ["v2"], ["v3", "v4"], fn=body,
            transforms=[shard_map([[["y"]]], [[["y"], None], [None, None]], axis_names=["y"])]),
        eqn("sum", ["v3"], ["v5"], axis=0), eqn("add", ["v5", "v1"], ["v6"]), eqn("mean", ["v4"], ["v7"], axis=None),
        eqn("cos", ["v6"], ["v8"])], ["v8", "v7"])
    return program(mesh=(("x", 2), ("y", 4)), inputs=[("x0", (2, 8), 1), ("x1", (2, 8), 2), ("x2", (3,), 5)],
                   functions={"f0": f}, calls=[call("f0", [JIT, vmap([0, 0], [0, 0], spmd_axis_name="x")],
                                                    ["x0", "x1"])])


def spmd_over_collective(p, _call=None):
    """Some chain has a vmap with spmd_axis_name, and the function under it has (at any
    depth) an equation naming a mesh axis in its "axes"."""
    mesh = set(p["mesh"]["axis_names"])

    def names_mesh_axis(f):
        return any(set(e.get("axes", ())) & mesh or ("fn" in e and names_mesh_axis(e["fn"])) for e in f["eqns"])

    def spmd(chain):
        return any(t["kind"] == "vmap" and t["spmd_axis_name"] for t in chain)
    if any(spmd(c["transforms"]) and names_mesh_axis(p["functions"][c["function"]]) for c in p["calls"]):
        return True
    return any("fn" in e and spmd(e["transforms"]) and names_mesh_axis(e["fn"]) for e in eqns_of(p))


def test_spmd_axis_name_over_a_collective_reduces_to_the_composition():
    p = seed_c_like()
    validate_program(p)
    rec = Recorder(spmd_over_collective)
    r = reduce_program(p, rec, call=0)
    assert r.reduced and spmd_over_collective(r.program)
    assert ops(r.program) == ["call", "psum"]
    # vmap(spmd_axis_name) over f(a1) = shard_map(lambda: psum(a1)) (), a 2-axis mesh of size 1
    minimal = program(mesh=(("x", 1), ("y", 1)), inputs=[("x0", (1,), 0)], functions={"f0": fn(["a1"], [
        eqn("call", [], ["v2"], transforms=[shard_map([], [[]], axis_names=None)],
            fn=fn([], [eqn("psum", ["a1"], ["v1"], axes=["y"])], ["v1"]))], ["v2"])},
        calls=[call("f0", [vmap([0], [0], spmd_axis_name="x")], ["x0"])])
    validate_program(minimal)
    assert structure(size(r.program)) <= structure(size(minimal))
    assert_log_decreases(r)
    assert_fixed_point(r, spmd_over_collective)


def two_call_program():
    """The finding needs call 3 (f1 plain) after call 1 (f1 under shard_map); calls 0 and 2 are noise."""
    noise = fn(["a"], [eqn("sin", ["a"], ["v1"]), eqn("cos", ["v1"], ["v2"])], ["v2"])
    f1 = fn(["a", "b"], [eqn("io_callback", ["a"], [], **CALLBACK), eqn("tanh", ["b"], ["w1"]),
                         eqn("add", ["a", "w1"], ["w2"])], ["w2"])
    return program(mesh=(("x", 4),), inputs=[("x0", (4, 8), 1), ("x1", (4, 8), 2)],
                   functions={"f0": noise, "f1": f1, "f2": noise},
                   calls=[call("f0", [JIT], ["x0"]),
                          call("f1", [JIT, shard_map([[None, ["x"]], [None, ["x"]]], [[None, ["x"]]])], ["x0", "x1"]),
                          call("f2", [JIT], ["x1"]),
                          call("f1", [JIT], ["x0", "x1"])])


def ordered_callback_after_shard_map(p, c):
    """Call ``c`` runs a function with an ordered io_callback without shard_map, after an
    earlier call ran the same function under a shard_map."""
    here = p["calls"][c]
    f = p["functions"][here["function"]]
    if not any(e["op"] == "io_callback" and e["ordered"] for e in f["eqns"]):
        return False
    if any(t["kind"] == "shard_map" for t in here["transforms"]):
        return False
    return any(d["function"] == here["function"] and any(t["kind"] == "shard_map" for t in d["transforms"])
               for d in p["calls"][:c])


def test_call_index_follows_dropped_calls_and_the_finding_call_stays():
    p = two_call_program()
    validate_program(p)
    assert ordered_callback_after_shard_map(p, 3)
    rec = Recorder(ordered_callback_after_shard_map)
    r = reduce_program(p, rec, call=3)
    assert r.reduced
    assert len(r.program["calls"]) == 2 and r.call == 1
    assert ordered_callback_after_shard_map(r.program, r.call)
    assert ops(r.program) == ["io_callback"]
    # the finding's call is the last one: the tracked index follows it as earlier calls go
    assert len(set(rec.calls)) >= 2
    assert all(k == len(cand["calls"]) - 1 for cand, k in rec.candidates)
    assert_fixed_point(r, ordered_callback_after_shard_map)


def test_calls_are_dropped_down_to_one_for_a_whole_program_finding():
    p = two_call_program()
    r = reduce_program(p, Recorder(lambda c, k: k is None and "io_callback" in ops(c)), call=None)
    assert r.reduced and r.call is None
    assert len(r.program["calls"]) == 1 and ops(r.program) == ["io_callback"]


def test_dead_code_that_matters_is_kept_by_chunks():
    # the interesting sin is dead (its result is unused): removing all dead code at once
    # loses it, so the reducer falls back to chunks and keeps it
    f = fn(["a"], [eqn("cos", ["a"], ["v1"]), eqn("tanh", ["v1"], ["v2"]), eqn("sin", ["a"], ["v3"]),
                   eqn("neg", ["v2"], ["v4"]), eqn("mul", ["a", "a"], ["v5"]), eqn("cos", ["v5"], ["v6"])], ["v6"])
    p = program(inputs=[("x0", (4,), 0)], functions={"f0": f}, calls=[call("f0", [JIT], ["x0"])])
    validate_program(p)
    r = reduce_program(p, Recorder(lambda c, k: "sin" in ops(c)), call=0)
    assert r.reduced and "sin" in ops(r.program)
    assert len(eqns_of(r.program)) == 1 and any(line.startswith("dead-code") for line in r.log)


def test_equations_without_outputs_are_kept_as_effects():
    f = fn(["a"], [eqn("io_callback", ["a"], [], **CALLBACK), eqn("sin", ["a"], ["v1"]), eqn("cos", ["a"], ["v2"])],
           ["v2"])
    p = program(inputs=[("x0", (4,), 0), ("x1", (2,), 1)], functions={"f0": f}, calls=[call("f0", [JIT], ["x0"])])
    out = R._without_dead_code(p)
    validate_program(out)
    assert ops(out) == ["io_callback", "cos"] and [i["name"] for i in out["inputs"]] == ["x0"]


def test_nested_call_without_transforms_is_inlined():
    inner = fn(["b"], [eqn("cos", ["b"], ["w1"]), eqn("sin", ["w1"], ["w2"])], ["w2"])
    f = fn(["a"], [eqn("neg", ["a"], ["v1"]), eqn("call", ["v1"], ["v2"], transforms=[JIT], fn=inner),
                   eqn("tanh", ["v2"], ["v3"])], ["v3"])
    p = program(inputs=[("x0", (4,), 0)], functions={"f0": f}, calls=[call("f0", [JIT], ["x0"])])
    r = reduce_program(p, Recorder(lambda c, k: {"cos", "sin"} <= set(ops(c))), call=0)
    assert r.reduced and sorted(ops(r.program)) == ["cos", "sin"]  # the nested call is gone
    assert any(line.startswith("transforms") for line in r.log)


# ----------------------------------------------------------------------------- budgets
def test_max_runs_counts_only_cache_misses():
    p = fifteen_with_psum()
    rec = Recorder(lambda c, k: "psum" in ops(c))
    r = reduce_program(p, rec, call=0, max_runs=3)
    assert not r.reduced and r.runs == 3 == len(rec.calls)
    validate_program(r.program)
    assert "psum" in ops(r.program)
    assert structure(size(r.program)) <= structure(size(p))
    full = reduce_program(p, Recorder(rec.pred), call=0)
    assert full.reduced and full.runs > 3


def test_max_seconds_stops_at_once():
    p = fifteen_with_psum()
    r = reduce_program(p, Recorder(lambda c, k: True), call=0, max_seconds=0.0)
    assert not r.reduced and r.runs == 0 and r.program == p and r.log == []


def test_bad_inputs_are_refused():
    p = fifteen_with_psum()
    with pytest.raises(ValueError, match="out of range"):
        reduce_program(p, lambda c, k: True, call=1)
    bad = json.loads(json.dumps(p))
    bad["calls"][0]["args"] = ["nope"]
    with pytest.raises(ProgramError):
        reduce_program(bad, lambda c, k: True)
    partial = program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4,), 0)],
                      functions={"f0": fn(["a"], [eqn("sin", ["a"], ["v1"])], ["v1"])},
                      calls=[call("f0", [shard_map([[["x"]]], [[["x"]]], axis_names=["x"])], ["x0"])])
    caps = {**NEWEST_CAPS, "partial_manual": None}
    with pytest.raises(ValueError, match="partial-manual"):
        reduce_program(partial, lambda c, k: True, caps=caps)


# ----------------------------------------------------------------------------- generated programs
@st.composite
def findings(draw):
    """A generated program and a JSON predicate it satisfies: "an equation with op X exists"
    or "an equation with op X reading an argument of rank >= 2 exists"."""
    caps = draw(st.sampled_from([NEWEST_CAPS, OLD_CAPS]))
    p = draw(programs(caps=caps))
    seen = [(o, r) for o, r in arg_ranks(p) if o != "call"]
    if not seen:
        return p, caps, lambda c, k: True
    op, rank = draw(st.sampled_from(seen))
    if rank >= 2 and draw(st.booleans()):
        return p, caps, lambda c, k: any(o == op and r >= 2 for o, r in arg_ranks(c))
    return p, caps, lambda c, k: op in ops(c)


@settings(max_examples=12)
@given(findings())
def test_generated_programs_reduce_to_fixed_points(case):
    p, caps, pred = case
    rec = Recorder(pred, caps)
    r = reduce_program(p, rec, call=0, max_runs=1000, caps=caps)
    assert r.reduced and r.runs == len(rec.calls)
    validate_program(r.program)
    assert pred(r.program, r.call)
    assert structure(size(r.program)) <= structure(size(p))
    assert_log_decreases(r)
    assert_fixed_point(r, pred, caps)


@settings(max_examples=30)
@given(programs())
def test_canonical_names_keep_types_and_are_idempotent(p):
    c = canonical(p)
    validate_program(c)
    render(c)
    assert check_program(c) == check_program(p)
    assert canonical(c) == c and size(c).names == 0
    assert list(c["functions"]) == [f"f{k}" for k in range(len(c["functions"]))]


# ----------------------------------------------------------------------------- op-agnostic
def test_reducer_names_no_primitive_and_no_op_parameter():
    """fuzz/reduce.py works from the typing rules and the IR's structure, never per op: no
    string literal in it is a primitive's name or one of the parameters only some ops take."""
    tree = ast.parse(Path(R.__file__).read_text())
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    primitives = set(T.UNARY + T.BINARY + T.REDUCE + T.COLLECTIVES) | {"io_callback", "matmul", "transpose",
                                                                        "broadcast"}
    primitives |= set(getattr(T, "EQN_SIGNATURES", {})) - {"call"}
    op_params = {k for _, _, params in getattr(T, "EQN_SIGNATURES", {}).values() for k in params}
    op_params -= {"fn", "transforms", "tag", "seed"}  # a nested function, its chain, callback names (canonical()), an input's seed
    assert primitives and not literals & primitives, sorted(literals & primitives)
    assert not literals & op_params, sorted(literals & op_params)


def test_transforms_whose_outputs_are_not_their_bodys_are_left_whole():
    # vjp returns the body's results and then one cotangent per argument: dropping one of
    # those outputs is not a matter of dropping a body result (this crashed the reducer)
    inner = fn(["b"], [eqn("sin", ["b"], ["s"]), eqn("cos", ["b"], ["c"])], ["s", "c"])
    chain = [{"kind": "vmap", "in_axes": [0], "out_axes": [0, 0, 0], "axis_name": None, "spmd_axis_name": None},
             {"kind": "vjp", "seed": 3}]
    body = fn(["a"], [eqn("call", ["a"], ["y", "w", "ct"], transforms=chain, fn=inner),
                      eqn("mul", ["y", "ct"], ["z"])], ["z", "w"])
    p = program(inputs=[("x0", (2, 4), 0)], functions={"f0": body}, calls=[call("f0", [], ["x0"])])
    seen = []

    def keeps_vjp(cand, c):
        seen.append(cand)
        return '"vjp"' in json.dumps(cand)

    r = reduce_program(p, keeps_vjp, call=0, max_runs=200)
    assert '"vjp"' in json.dumps(r.program) and r.reduced
    assert all(validate_program(c) is None for c in seen)


@pytest.mark.parametrize("kind", ["jvp", "linearize", "vjp"])
def test_a_linearizing_transform_is_dropped_with_the_outputs_it_adds(kind):
    # a campaign's finding under grad(jvp(map(f))) kept its jvp: dropping it left the call
    # with more outputs than its body's results. Uses of a tangent now read its primal
    # output, uses of a cotangent the argument it belongs to.
    inner = fn(["b"], [eqn("sin", ["b"], ["s"])], ["s"])
    chain = [JIT, {"kind": kind, "seed": 3}]
    body = fn(["a"], [eqn("call", ["a"], ["y", "t"], transforms=chain, fn=inner),
                      eqn("mul", ["y", "t"], ["z"]), eqn("cos", ["z"], ["w"])], ["w"])
    p = program(inputs=[("x0", (2, 4), 0)], functions={"f0": body}, calls=[call("f0", [], ["x0"])])
    check_program(p)
    rec = Recorder(lambda cand, c: {"call", "sin"} <= set(ops(cand)))  # the nested call must stay
    r = reduce_program(p, rec, call=0, max_runs=200)
    assert f'"{kind}"' not in json.dumps(r.program), json.dumps(r.program)
    assert_fixed_point(r, rec.pred)


def test_a_candidate_with_a_vmap_over_an_empty_dim_is_refused_not_raised():
    """A parameter simplified below its schema's minimum (broadcast size 0) makes a vmap over a
    dim of size 0, where all_to_all's rule would divide by the axis size: the type checker
    refuses it, and the reduction goes on (a campaign once ended with ZeroDivisionError here)."""
    inner = fn(["b"], [eqn("all_to_all", ["b"], ["w"], axes=["i"], split_axis=0, concat_axis=0)], ["w"])
    body = fn(["a"], [eqn("broadcast", ["a"], ["v"], size=2),
                      eqn("call", ["v"], ["u"], transforms=[vmap([0], [0], axis_name="i")], fn=inner)], ["u"])
    p = program(inputs=[("x0", (2,), 1)], functions={"f0": body}, calls=[call("f0", [], ["x0"])])
    check_program(p)
    bad = json.loads(json.dumps(p))
    bad["functions"]["f0"]["eqns"][0]["size"] = 0
    with pytest.raises(ProgramError, match="empty dim"):
        check_program(bad)  # (the schema refuses size 0 too)
    with pytest.raises(ValueError):
        validate_program(bad)
    assert R._repair(json.loads(json.dumps(bad)))  # no exception
    r = reduce_program(p, lambda q, c: any(e["op"] == "all_to_all" for e in eqns_of(q)), 0, max_runs=60,
                       max_seconds=30)
    assert any(e["op"] == "all_to_all" for e in eqns_of(r.program))


def test_an_input_spec_must_fit_its_shape_and_the_mesh():
    """jax.device_put refuses a dim that the spec's axes do not divide: so does the type checker,
    and the reducer, which shrinks shapes and axis sizes, never keeps such a program (a campaign
    once reported device_put's refusal of one as a JAX bug)."""
    body = fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])
    p = program(mesh=(("x", 2),), inputs=[("x0", (2,), 1)], functions={"f0": body},
                calls=[call("f0", [], ["x0"])])
    p["inputs"][0]["spec"] = [["x"]]
    check_program(p)
    for shape, spec, words in [([1], [["x"]], "not divisible"), ([2], [["y"]], "not a mesh axis"),
                               ([2, 2], [["x"], ["x"]], "twice"), ([2], [None, None], "entries for rank")]:
        bad = json.loads(json.dumps(p))
        bad["inputs"][0]["shape"], bad["inputs"][0]["spec"] = shape, spec
        with pytest.raises(ProgramError, match=words):
            check_program(bad)
    r = reduce_program(p, lambda q, c: q["inputs"][0]["spec"] is not None, 0, max_runs=60, max_seconds=30)
    check_program(r.program)
    inp = r.program["inputs"][0]
    assert all(d % 2 == 0 for d, e in zip(inp["shape"], inp["spec"]) if e)  # never 1 under P('x')


# ----------------------------------------------------------------------------- without_ops
@settings(max_examples=30)
@given(st.data())
def test_without_ops_drops_every_equation_of_those_ops_and_stays_valid(data):
    """The look-past variant (fuzz.campaign): what it returns is valid and lacks the ops."""
    caps = data.draw(st.sampled_from([NEWEST_CAPS, OLD_CAPS]))
    p = data.draw(programs(caps=caps))
    present = sorted(set(ops(p)) - {"call"})
    if not present:
        assert R.without_ops(p, {"psum"}, caps) is None
        return
    drop = set(data.draw(st.lists(st.sampled_from(present), min_size=1, max_size=2)))
    before = json.dumps(p, sort_keys=True)
    v = R.without_ops(p, drop, caps)
    assert json.dumps(p, sort_keys=True) == before  # not modified
    if v is None:
        return
    validate_program(v)
    render(v, caps)
    check_program(v)
    assert not set(ops(v)) & drop and set(ops(v)) - {"call"} <= set(present)


def test_without_ops_of_a_known_bug_leaves_the_rest():
    """The corpus' pvary assertion needs one all_gather: without it the call's shard_map of a
    vmap stays, and an op the program lacks gives None."""
    entry = json.loads((Path(__file__).parent.parent / "corpus" / "internal-error-d0aa84fa2c68.json").read_text())
    p = entry["program"]
    assert "all_gather" in ops(p)
    v = R.without_ops(p, {"all_gather"})
    assert v is not None and "all_gather" not in ops(v)
    assert [t["kind"] for t in v["functions"]["f0"]["eqns"][0]["transforms"]] == ["vmap", "shard_map"]
    assert R.without_ops(p, {"ppermute"}) is None and R.without_ops(p, {"call"}) is None


def test_options_a_finding_does_not_need_are_switched_off():
    """smap, negative_axes and set_mesh go when the predicate holds without them, stay when it needs them."""
    from support.programs import top_program

    def flags(p):
        out = {k for c in p["calls"] for t in c["transforms"] for k, v in t.items() if v is True and k != "check_vma"}
        return out | ({"set_mesh"} if p["mesh"].get("set_mesh") else set())

    p = top_program(negative=True)
    assert flags(p) == {"smap", "negative_axes", "set_mesh"}
    r = reduce_program(p, Recorder(lambda c, k: "psum" in ops(c)), call=0)
    assert r.reduced and flags(r.program) == set() and "psum" in ops(r.program)
    needs = lambda c, k: "negative_axes" in flags(c)  # noqa: E731
    r = reduce_program(top_program(negative=True), Recorder(needs), call=0)
    assert flags(r.program) == {"smap", "negative_axes", "set_mesh"}  # smap needs a context mesh here
    assert "jax.smap(" in render(r.program, NEWEST_CAPS)
