"""The JAX APIs the rendered programs use (fuzz/jax_api.py), probed per release, gate the generator;
an error the program's own code raises reaching an API is the generator's, never a finding.

- the declarations are complete: every ``jax`` module, name and keyword of the source of drawn
  programs and of their repros is declared for one of the program's users (its ops, transforms, mesh);
- the probe: what a fake ``jax`` lacks (module, attribute, keyword) is reported missing;
- the gate: ops and transforms whose API is missing are not drawn, and a program needing them
  is not applicable; with only alternatives missing (jax 0.10.2) the draws are unchanged;
- a fake release (the real worker with ``jax.experimental.shard_alike`` blocked on import):
  probed missing, never drawn, not applicable, and a program using it anyway is invalid;
- the backstop on the real worker (installed JAX): a traced function that imports a missing
  module, calls a missing function or passes an unknown keyword is invalid, never a finding,
  while an exception raised inside JAX's frames still is one.
"""
from __future__ import annotations

import ast
import copy
import inspect
import os
import stat
import sys
import textwrap
import types

import pytest

import oracles
from fuzz import jax_api as A
from fuzz import ops as O
from fuzz.render import NEWEST_CAPS, render
from fuzz.repro import render_repro
from fuzz.replay import applicable
from fuzz.typecheck import TRANSFORMS, context_refusal, release_rules, root_ctx, transform_name
from support.draws import alone, drawn_programs
from support.programs import JIT, call, eqn, fn, program

OLD_API_CAPS = {**NEWEST_CAPS, "pvary": "pvary", "all_gather_invariant": "function", "pure_callback_kw": "vectorized"}


# ------------------------------------------------------------------ completeness
def used_apis(source: str) -> set:
    """Every JAX API a source uses: ("module", m) for each import of a jax module, ("attr", dotted)
    for each outermost attribute chain (or imported name) rooted at a jax name, ("keyword", f, k)
    for each keyword passed to a call of such a chain."""
    tree = ast.parse(source)
    alias, out = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "jax":
                    out.add(("module", a.name))
                    alias[a.asname or "jax"] = a.name if a.asname else "jax"
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "jax":
            out.add(("module", node.module))
            for a in node.names:
                alias[a.asname or a.name] = f"{node.module}.{a.name}"
                out.add(("attr", f"{node.module}.{a.name}"))

    def chain(n):
        if isinstance(n, ast.Name):
            return alias.get(n.id)
        if isinstance(n, ast.Attribute):
            c = chain(n.value)
            return c and f"{c}.{n.attr}"
        return None

    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner and chain(node):
            out.add(("attr", chain(node)))
        if isinstance(node, ast.Call) and chain(node.func):
            out.update(("keyword", chain(node.func), k.arg) for k in node.keywords if k.arg)
    return out


def users(p: dict) -> set:
    """The users (fuzz/jax_api.py) of a program: "program", its ops and transforms, its mesh's kinds."""
    out = {"program"}

    def transforms(ts):
        for t in ts:
            out.add(f"transform:{transform_name(t)}")
            if t.get("smap"):
                out.add("transform:smap")

    def walk(f):
        for e in f["eqns"]:
            if e["op"] == "call":
                transforms(e["transforms"])
                walk(e["fn"])
            else:
                out.add(f"op:{e['op']}")

    for f in p["functions"].values():
        walk(f)
    for c in p["calls"]:
        transforms(c["transforms"])
    if p["mesh"]["axis_type"] == "explicit":
        out.add("transform:explicit")
    if p["mesh"].get("set_mesh"):
        out.add("transform:set_mesh")
    return out


def declared(user_names: set) -> set:
    groups = {"program": A.PROGRAM, **{f"op:{k}": v for k, v in A.OPS.items()},
              **{f"transform:{k}": v for k, v in A.TRANSFORMS.items()}}
    return {tuple(api) for u in user_names for req in groups[u] for api in A.apis(req)}


def undeclared(source: str, p: dict) -> set:
    """The APIs ``source`` uses that none of ``p``'s users declares (a module used as a name counts,
    and so does a keyword of a name: its probe resolves the name)."""
    have = declared(users(p))
    names = {a[1] for a in have}
    return {a for a in used_apis(source) if a not in have and not (a[0] == "attr" and a[1] in names)}


def test_every_op_and_transform_has_a_declaration():
    assert set(A.OPS) == set(O.REGISTRY)
    assert {t for t in TRANSFORMS} <= set(A.TRANSFORMS)


@pytest.mark.parametrize("caps", [NEWEST_CAPS, OLD_API_CAPS], ids=["newest", "old-api"])
def test_drawn_programs_use_only_declared_apis(caps):
    n = 100 if caps is NEWEST_CAPS else 40
    programs = drawn_programs(range(3), n, cached=True, caps=caps)
    seen = set()
    for p in programs:
        source = render(p, caps)
        seen |= used_apis(source)
        assert not undeclared(source, p), (sorted(undeclared(source, p)), sorted(users(p)))
    assert ("module", "jax.experimental.shard_alike") in seen or caps is not NEWEST_CAPS  # (shard_alike is drawn)


def test_repros_use_only_declared_apis():
    finds = [{"oracle": "internal-error", "kind": "builtins.ValueError", "message": "m", "call": 0},
             {"oracle": "determinism", "kind": "lowering", "message": "m", "call": 0},
             {"oracle": "crash", "kind": "SIGSEGV", "message": "m", "call": None},
             {"oracle": "crash", "kind": "memory", "message": "m", "call": None},
             {"oracle": "callbacks", "kind": "not-called", "message": "m", "call": 0}]
    for p in drawn_programs(range(2), 15, cached=True):
        for f in finds:
            source = render_repro(p, None, f, lower_after=f["oracle"] == "crash")
            assert not undeclared(source, p), (f["oracle"], sorted(undeclared(source, p)))


def test_an_undeclared_api_is_noticed():
    p = program(inputs=[("x", (8,), 1)], functions={"f0": fn(["a1"], [eqn("sin", ["a1"], ["v1"])], ["v1"])},
                calls=[call("f0", [JIT], ["x"])])
    source = render(p).replace("jnp.sin(a1)", "jax.lax.erf(a1)")
    assert undeclared(source, p) == {("attr", "jax.lax.erf")}
    assert undeclared(render(p).replace("jax.jit(f0)", "jax.jit(f0, keep_unused=True)"), p) == {
        ("keyword", "jax.jit", "keep_unused")}


# ------------------------------------------------------------------ the probe
def fake_jax():
    """import_module over a fake jax: jax.lax (psum(x, axis_name), all_gather(x, axis_name, *, axis)),
    jax.numpy; no jax.experimental.shard_alike."""
    jax, lax, jnp, exp = (types.ModuleType(n) for n in ("jax", "jax.lax", "jax.numpy", "jax.experimental"))
    lax.psum = lambda x, axis_name: x
    lax.all_gather = lambda x, axis_name, *, axis=0: x
    jnp.sum = lambda x, **kw: x
    jax.lax, jax.numpy, jax.experimental = lax, jnp, exp
    modules = {m.__name__: m for m in (jax, lax, jnp, exp)}

    def import_module(name):
        if name not in modules:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return modules[name]

    return import_module


@pytest.mark.parametrize("api, there", [
    (("module", "jax.lax"), True), (("module", "jax.experimental.shard_alike"), False),
    (("attr", "jax.lax.psum"), True), (("attr", "jax.lax.pvary"), False),
    (("attr", "jax.experimental.shard_alike.shard_alike"), False),
    (("keyword", "jax.lax.all_gather", "axis"), True), (("keyword", "jax.lax.all_gather", "to"), False),
    (("keyword", "jax.numpy.sum", "anything"), True),  # (**kwargs takes every keyword)
    (("keyword", "jax.lax.pcast", "to"), False)])
def test_probe_of_a_fake_jax(api, there):
    assert A.present(api, fake_jax(), inspect.signature) is there


def test_missing_users_need_every_alternative_gone():
    assert A.missing_users(["jax.lax.pvary"]) == {}  # (pcast is there)
    assert A.missing_users(["jax.lax.pvary", "jax.lax.pcast(to=)"]) == {
        f"op:{n}": ["jax.lax.pcast(to=)"] for n in ("pvary", "unreduced_psum", "unreduced_psum_scatter")}
    assert "op:shard_alike" in A.missing_users(["jax.experimental.shard_alike"])
    assert "program" in A.missing_users(["jax.device_put"])


# ------------------------------------------------------------------ the gate
def test_release_rules_refuse_the_users_of_a_missing_api():
    caps = {**NEWEST_CAPS, "missing_apis": ["jax.experimental.shard_alike", "jax.checkpoint", "jax.smap"]}
    rules = release_rules(caps)
    assert {"no_api:op:shard_alike", "no_api:transform:checkpoint", "no_smap"} <= rules
    p = program()
    assert context_refusal(O.get("shard_alike"), root_ctx(p, caps))
    assert context_refusal(O.get("shard_alike"), root_ctx(p, NEWEST_CAPS)) is None
    with pytest.raises(ValueError, match="lacks an API every program uses"):
        root_ctx(p, {**NEWEST_CAPS, "missing_apis": ["jax.device_put"]})


def _uses(p: dict, name: str) -> bool:
    return name in users(p)


def test_a_missing_api_is_not_drawn_and_not_applicable():
    # one seed: of its 30 programs with shard_alike alone enabled, 29 use shard_alike and 18
    # checkpoint where nothing is missing (2026-12-07); the draws are slow (about 0.2 s each)
    caps = {**NEWEST_CAPS, "missing_apis": ["jax.experimental.shard_alike", "jax.checkpoint"]}
    drawn = drawn_programs([0], 30, cached=True, caps=caps, disabled=alone("shard_alike"))
    assert not any(_uses(p, "op:shard_alike") or _uses(p, "transform:checkpoint") for p in drawn)
    control = drawn_programs([0], 30, cached=True, caps=NEWEST_CAPS, disabled=alone("shard_alike"))
    assert any(_uses(p, "op:shard_alike") for p in control) and any(_uses(p, "transform:checkpoint") for p in control)
    p = next(p for p in control if _uses(p, "op:shard_alike"))
    assert applicable(p, {**NEWEST_CAPS, "n_devices": 8}) == ""
    assert "shard_alike" in applicable(p, {**caps, "n_devices": 8})


def test_only_alternatives_missing_draw_the_same_programs():
    # jax 0.10.2 lacks jax.lax.pvary and jax.lax.all_gather_invariant, whose alternatives it has
    caps = {**NEWEST_CAPS, "missing_apis": ["jax.lax.all_gather_invariant", "jax.lax.pvary", "jax.shard_map(auto=)"]}
    assert drawn_programs([7], 25, caps=caps) == drawn_programs([7], 25, caps=NEWEST_CAPS)


# ------------------------------------------------------------------ the backstop's judgment
def test_judge_skips_errors_of_the_programs_own_api_use():
    p = program(inputs=[("x", (8,), 1)], functions={"f0": fn(["a1"], [eqn("sin", ["a1"], ["v1"])], ["v1"])},
                calls=[call("f0", [JIT], ["x"])])
    err = {"type": "builtins.ModuleNotFoundError", "message": "No module named 'jax.experimental.shard_alike'",
           "traceback": 'File "<program>", line 3, in f0\n'}
    outcome = {"status": "ok", "calls": [{"ok": False, "outputs": [], "error": err, "callbacks": {}}]}
    assert len(oracles.judge(p, copy.deepcopy(outcome), None)) == 1  # a JAX error: a finding
    outcome["calls"][0]["error"]["api_error"] = "has no jax.experimental.shard_alike"
    assert oracles.judge(p, outcome, None) == []
    assert oracles.internal_error.api_errors(outcome) == ["has no jax.experimental.shard_alike"]
    module = {"status": "ok", "calls": [], "module_error": {**err, "api_error": "has no jax.lax.pvary"}}
    assert oracles.judge(p, module, None) == [] and oracles.internal_error.api_errors(module) == ["has no jax.lax.pvary"]


# ------------------------------------------------------------------ real workers
SIN = program(inputs=[("x", (8,), 1)], functions={"f0": fn(["a1"], [eqn("sin", ["a1"], ["v1"])], ["v1"])},
              calls=[call("f0", [JIT], ["x"])])


@pytest.fixture(scope="module")
def runner():
    from fuzz.runner import Runner

    r = Runner(determinism=False)
    yield r
    r.close()


@pytest.mark.parametrize("old, new, message", [
    ("    v1 = jnp.sin(a1)", "    from jax.experimental import no_such_module\n    v1 = jnp.sin(a1)",
     "has no jax.experimental.no_such_module"),
    ("    v1 = jnp.sin(a1)", "    import jax.experimental.no_such_module\n    v1 = jnp.sin(a1)",
     "has no jax.experimental.no_such_module"),
    ("jnp.sin(a1)", "jax.lax.no_such_fn(a1)", "has no jax.lax.no_such_fn"),
    ("jax.jit(f0)", "jax.jit(f0, no_such_kw=1)", "rejects a call: jit() got an unexpected keyword argument"),
    ("jnp.sin(a1)", "jax.lax.psum(a1, axis_name='i', no_such_kw=1)", "rejects a call: psum() got an unexpected"),
])
def test_the_programs_own_api_error_is_invalid_not_a_finding(runner, old, new, message):
    runner.source_hook = lambda src: src.replace(old, new)
    invalid = runner.stats.invalid
    found, _ = runner.run(SIN)
    assert found == []
    assert runner.stats.invalid == invalid + 1
    version = runner.caps["jax_version"]
    assert [m[:len(f"generator error: JAX {version} {message}")] for m in runner.last_generator_errors] == [
        f"generator error: JAX {version} {message}"]


def test_an_error_raised_inside_jax_is_still_a_finding(runner):
    runner.source_hook = lambda src: src.replace("jnp.sin(a1)", "jnp.reshape(a1, (3, 5))")  # (8,) -> (3, 5)
    invalid = runner.stats.invalid
    found, _ = runner.run(SIN)
    assert [f.oracle for f in found] == ["internal-error"] and "reshape" in found[0].message
    assert runner.stats.invalid == invalid and runner.last_generator_errors == []


BLOCK = textwrap.dedent('''
    import sys

    # a release without jax.experimental.shard_alike: importing it raises ModuleNotFoundError
    # from the import machinery itself, as for a module that is not there
    sys.modules["jax.experimental.shard_alike"] = None
''')


def test_a_release_without_shard_alike(tmp_path):
    """The real worker under an interpreter whose jax.experimental.shard_alike does not import."""
    from fuzz.runner import Runner

    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(BLOCK)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={shim} exec {sys.executable} "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    r = Runner(python=str(python), determinism=False)
    try:
        caps = r.caps
        assert "jax.experimental.shard_alike" in caps["missing_apis"]
        assert "no_api:op:shard_alike" in release_rules(caps)
        drawn = drawn_programs([0], 20, caps=caps, disabled=alone("shard_alike"))
        assert not any(_uses(p, "op:shard_alike") for p in drawn)
        p = next(p for p in drawn_programs([0], 20, cached=True, caps=NEWEST_CAPS, disabled=alone("shard_alike"))
                 if _uses(p, "op:shard_alike") and max(p["mesh"]["axis_sizes"]) <= 8)
        assert "shard_alike" in applicable(p, caps)
        # the backstop, had the probe missed it: the program runs and its own import fails
        r.caps = {**caps, "missing_apis": []}
        found, _ = r.run(p)
        assert found == [] and r.stats.invalid == 1
        assert r.last_generator_errors == [f"generator error: JAX {caps['jax_version']} has no "
                                           f"jax.experimental.shard_alike"]
    finally:
        r.close()
    assert os.path.exists(python)
