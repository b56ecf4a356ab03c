"""Rules of old JAX releases, measured by the worker (fuzz/worker.py measured_rules), shape generation.

jax 0.4.28 (measured): a partial-manual shard_map (experimental ``auto=``) runs only
under jit and lowers no collective over a manual axis (none under reverse mode either: its
transpose psums), an io_callback may not sit under grad even on a stop_gradient argument,
and no lax.cond or lax.while_loop may sit in a shard_map with the replication check on
("No replication rule for cond"). The generator must not spend programs on any of them;
the typing rules refuse them for that release only.
"""
import pytest
from hypothesis import given, settings

from fuzz.ops.base import PPERMUTE_MESH_ORDER, version_tuple
from fuzz.render import NEWEST_CAPS, render
from fuzz.typecheck import ProgramError, check_program
from strategies.programs import programs
from support.programs import JIT, call, eqn, fn, program, shard_map

CAPS_0_4_28 = {"shard_map": "experimental", "check_kw": "check_rep", "partial_manual": "auto", "explicit": False,
               "eager_partial_manual": False, "callback_under_grad": False, "partial_manual_collectives": False,
               "checked_cond": False, "checked_while": False, "n_devices": 8}
COLLECTIVES = {"psum", "pmax", "pmin", "pmean", "all_gather", "psum_scatter", "ppermute", "all_to_all", "axis_index"}


def _walk(fn_, under_jit, out):
    for e in fn_["eqns"]:
        if e["op"] == "call":
            _chain(e["transforms"], e["fn"], under_jit, out)
        elif e["op"] == "io_callback":
            out.append(("callback", e["stop_gradient"]))


def _chain(transforms, fn_, under_jit, out):
    for t in transforms:
        if t["kind"] == "jit":
            under_jit = True
        if t["kind"] == "shard_map" and t["axis_names"] is not None:
            out.append(("partial", under_jit))
    _walk(fn_, under_jit, out)


@settings(max_examples=150)
@given(programs(caps=CAPS_0_4_28))
def test_old_release_programs_keep_its_rules(p):
    check_program(p, caps=CAPS_0_4_28)
    src = render(p, CAPS_0_4_28)
    seen = []
    for c in p["calls"]:
        _chain(c["transforms"], p["functions"][c["function"]], False, seen)
    assert all(under_jit for kind, under_jit in seen if kind == "partial")
    # under grad a callback's argument is under stop_gradient: on this release none may be there
    assert not any(kind == "callback" and stopped for kind, stopped in seen)
    assert "auto=frozenset(" in src or not any(kind == "partial" for kind, _ in seen)
    ctx_seen = []

    def note(e, ctx, args):
        partial = bool(ctx.manual) and ctx.manual != frozenset(ctx.mesh)
        mesh_axes = [n for n in e.get("axes", ()) if n in ctx.manual]
        # a partial-manual shard_map entered under reverse mode (its manual axes come after the
        # grad's place among the named axes); a grad inside its body runs on 0.4.28 (measured)
        transposed = "reverse_mode" in ctx.rules and any(
            a.kind == "mesh" and k >= ctx.grad_at for k, a in enumerate(ctx.axes))
        ctx_seen.append((e["op"], partial, bool(mesh_axes), transposed and partial))
        if e["op"] == "call" and any(a.check_vma for a in ctx.axes if a.kind == "mesh"):
            ctx_seen.append(("checked", [t["kind"] for t in e["transforms"]]))

    check_program(p, caps=CAPS_0_4_28, on_eqn=note)
    assert not any(x[0] in COLLECTIVES | {"index"} and x[1] and x[2] for x in ctx_seen if len(x) == 4)
    assert not any(x[3] for x in ctx_seen if len(x) == 4)
    assert not any(k in ("cond", "while_loop") for x in ctx_seen if x[0] == "checked" for k in x[1])


def partial_program(transforms):
    body = fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])
    return program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4,), 0)], functions={"f0": body},
                   calls=[call("f0", transforms, ["x0"])])


def test_eager_partial_manual_is_refused_only_where_the_release_cannot_run_it():
    sm = shard_map([[["x"]]], [[["x"]]], axis_names=["x"])
    eager, jitted = partial_program([sm]), partial_program([JIT, sm])
    check_program(eager)  # the newest release runs it
    check_program(jitted, caps=CAPS_0_4_28)
    with pytest.raises(ProgramError, match="only under jit"):
        check_program(eager, caps=CAPS_0_4_28)


def test_a_partial_manual_body_has_no_collective_on_a_release_that_cannot_lower_one():
    body = fn(["a"], [eqn("psum", ["a"], ["v"], axes=["x"])], ["v"])
    p = program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4,), 0)], functions={"f0": body},
                calls=[call("f0", [JIT, shard_map([[["x"]]], [[None]], axis_names=["x"], check_vma=False)], ["x0"])])
    check_program(p)  # the newest release lowers it
    with pytest.raises(ProgramError, match="not usable here"):
        check_program(p, caps=CAPS_0_4_28)
    grad_body = fn(["a"], [eqn("call", ["a"], ["v"], transforms=[shard_map([[["x"]]], [[["x"]]], axis_names=["x"],
                                                                             check_vma=False)],
                               fn=fn(["b"], [eqn("sin", ["b"], ["s"])], ["s"])),
                           eqn("sum", ["v"], ["l"], axis=None)], ["l"])
    g = program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4,), 0)], functions={"f0": grad_body},
                calls=[call("f0", [JIT, {"kind": "grad", "argnums": [0]}], ["x0"])])
    check_program(g)
    with pytest.raises(ProgramError, match="none under reverse mode"):
        check_program(g, caps=CAPS_0_4_28)


@pytest.mark.parametrize("kind", ["cond", "while_loop"])
def test_no_cond_or_while_in_a_checked_body_where_the_release_has_no_rule_for_it(kind):
    t = {"kind": kind} if kind == "cond" else {"kind": kind, "n": 1}
    inner = fn(["b"], [eqn("sin", ["b"], ["s"])], ["s"])
    body = fn(["a"], [eqn("call", ["a"], ["v"], transforms=[t], fn=inner)], ["v"])
    for check in (True, False):
        p = program(mesh=(("x", 2),), inputs=[("x0", (4,), 0)], functions={"f0": body},
                    calls=[call("f0", [JIT, shard_map([[None]], [[None]], check_vma=check)], ["x0"])])
        check_program(p)
        if check:
            with pytest.raises(ProgramError, match="no replication rule"):
                check_program(p, caps=CAPS_0_4_28)
        else:
            check_program(p, caps=CAPS_0_4_28)  # the rule is the replication check's


def test_measured_rules_match_this_release():
    from fuzz.execute import Worker

    with Worker() as w:
        caps = w.caps
    # the newest JAX (what the test suite installs) runs both; older releases are measured the same way
    assert caps["eager_partial_manual"] is True and caps["callback_under_grad"] is True
    assert caps["partial_manual_collectives"] is True and caps["checked_cond"] is True and caps["checked_while"]
    # (jax 0.11.1 and later refuse a ppermute out of the mesh's axis order: see below)
    assert caps["ppermute_any_order"] is (version_tuple(caps["jax_version"]) < (0, 11, 1))


def test_nested_shard_maps_are_not_applicable_on_the_experimental_api():
    from fuzz.replay import applicable

    inner = fn(["b"], [eqn("sin", ["b"], ["s"])], ["s"])
    body = fn(["a"], [eqn("call", ["a"], ["v"], transforms=[shard_map([[["y"]]], [[["y"]]])], fn=inner)], ["v"])
    p = program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4,), 0)], functions={"f0": body},
                calls=[call("f0", [JIT, shard_map([[["x"]]], [[["x"]]], axis_names=["x"])], ["x0"])])
    check_program(p)
    assert "cannot nest" in applicable(p, CAPS_0_4_28)


# jax 0.11.1 and later (measured: ppermute_any_order false on 0.12.1) raise RuntimeError "Make sure
# that the axis_name passed to jax.lax.ppermute is in the same order as the axis_names declared on
# the mesh" (config option jax_raise_on_ppermute_sort_diff) where 0.10.2 runs it
CAPS_MESH_ORDER = {**NEWEST_CAPS, "jax_version": "0.12.1", "ppermute_any_order": False}


def ppermute_program(mesh, axes):
    n = 1
    for name, size in mesh:
        n *= size if name in axes else 1
    body = fn(["a"], [eqn("ppermute", ["a"], ["v"], axes=list(axes), perm=[[i, (i + 1) % n] for i in range(n)])],
              ["v"])
    spec = [[[name for name, _ in mesh]]]
    return program(mesh=mesh, inputs=[("x0", (8,), 3)], functions={"f0": body},
                   calls=[call("f0", [JIT, shard_map(spec, spec)], ["x0"])])


@pytest.mark.parametrize("mesh, axes, refused", [
    ((("x", 2), ("y", 2)), ("y", "x"), True),
    ((("x", 2), ("y", 2)), ("x", "y"), False),
    ((("x", 2), ("y", 2), ("z", 2)), ("z", "x"), True),
    ((("x", 2), ("y", 1), ("z", 4)), ("z", "x"), True),
    ((("x", 2), ("y", 1)), ("y", "x"), False),  # over a size-1 axis the order numbers devices alike: 0.12.1 runs it
    ((("x", 1), ("y", 8)), ("y", "x"), False),
])
def test_a_ppermute_out_of_the_mesh_order_is_refused_only_where_the_release_raises(mesh, axes, refused):
    p = ppermute_program(mesh, axes)
    check_program(p)  # the newest rules have no such restriction ...
    check_program(p, caps={**CAPS_MESH_ORDER, "ppermute_any_order": True})  # ... nor a release that runs it
    if refused:
        with pytest.raises(ProgramError, match="not in the mesh's axis order"):
            check_program(p, caps=CAPS_MESH_ORDER)
    else:
        check_program(p, caps=CAPS_MESH_ORDER)


@pytest.mark.parametrize("rule", [False, True])
def test_a_drawn_two_axis_ppermute_follows_the_mesh_order_where_the_release_asks(rule):
    """300 derandomized draws in a body manual over ('x', 'y'): both orders without the rule, the
    mesh's only with it (the same draws otherwise: the order is sorted after it is drawn)."""
    from hypothesis import strategies as st

    from fuzz.ops import get
    from fuzz.ops.base import Axis, Ctx, Scope, Ty

    ctx = Ctx(mesh={"x": 2, "y": 4}, axes=(Axis("y", 4, "mesh"), Axis("x", 2, "mesh")),
              rules=frozenset({PPERMUTE_MESH_ORDER} if rule else ()))
    seen = []

    @settings(max_examples=300, derandomize=True, database=None)
    @given(st.data())
    def draw_many(data):
        scope = Scope({"a": Ty((4,), frozenset({"x", "y"}))}, ["a"], {}, frozenset(), lambda: "v1", lambda: "cb",
                      None, 4096, 4)
        e = get("ppermute").draw(data.draw, ctx, scope)
        get("ppermute").types(e, [scope.visible["a"]], ctx)  # (its typing rule accepts it)
        seen.append(tuple(e["axes"]))

    draw_many()
    assert {a for a in seen if len(a) == 2} == ({("x", "y")} if rule else {("x", "y"), ("y", "x")})


@settings(max_examples=60, deadline=None)
@given(programs(caps=CAPS_MESH_ORDER))
def test_programs_drawn_for_a_release_with_the_mesh_order_rule_keep_it(p):
    check_program(p, caps=CAPS_MESH_ORDER)

