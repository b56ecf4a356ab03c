"""The program reducer: shrink a finding's program to a repro of a few lines (C-Reduce style).

A finding comes with a program (``fuzz/schemas/program.schema.json``) that an oracle
flagged. :func:`reduce_program` repeatedly proposes smaller *candidate* programs and
keeps a candidate when the caller's predicate says it still shows the same finding,
until no proposal is accepted (a fixed point) or the budget is spent. As in C-Reduce
(Regehr et al., PLDI 2012) the proposals come from passes, cheapest first, repeated
until none applies; dead code is first removed all at once and, when that loses the
finding (a bug may need dead code to be traced), in halving chunks as in delta
debugging (Zeller and Hildebrandt, TSE 2002).

**Op-agnostic.** The reducer never looks at what an equation computes. It works from
the generic structure of the IR (an equation has ``op``, ``args``, ``outs`` and
parameters; a value of the form ``{"params", "eqns", "results"}`` is a nested function;
``transforms`` is a chain of the transforms of ``fuzz.typecheck.TRANSFORMS``) and from
the typing rules of :mod:`fuzz.typecheck`, the one definition of validity: the type of each value
(:class:`fuzz.typecheck.Ty`, shape and vma) is computed by
:func:`fuzz.typecheck.function_types` on each equation, whatever its op. So an op
added to the typing rules later is reduced with no change here. Candidates that break
a typing rule are discarded without running them.

**Candidates.** Every candidate is type-checked and schema-validated
(:func:`fuzz.program.validate_program`) and rendered (:func:`fuzz.render.render` with
the worker's capabilities) before the predicate sees it; invalid ones cost no run.
Predicate results are cached by the SHA-256 of the candidate's canonical JSON
(``json.dumps(sort_keys=True)``, together with the tracked call index).

**Size.** :func:`size` is a tuple compared lexicographically, and every accepted step
strictly decreases it, so a reduction terminates:

1. ``structure``: equations + transforms + calls + top-level functions + inputs + mesh
   axes + function params and results + equation args and outs + call args;
2. ``values``: for each input log2(elements) + rank, plus log2 of each mesh axis size;
3. ``params``: parameter complexity (true booleans, absolute values of integers and
   lengths of lists among equation parameters; non-null PartitionSpec entries and
   ``axis_names`` / ``axis_name`` / ``spmd_axis_name`` / a checkpoint's ``policy`` /
   in_axes / out_axes; a loop's trip count ``n``;
   ``check_vma=False``; grad ``argnums``; ``value_and_grad``; input specs and nonzero
   seeds; a transform's true options; an Explicit mesh; ``set_mesh``; ``checks``);
4. ``names``: 0 when names are canonical (v1.., a1.., f0.., x0.., cb1..), else 1.

**Passes** (:data:`PASSES`, cheapest first, repeated until a whole round accepts
nothing; each iterates over every equation of every function, nested ones too,
addressed by a path of JSON keys from the program's root):

1. ``dead-code``: equations whose outs are unused (transitively, through results and
   nested functions' captures), uncalled functions and unused inputs, all at once, then
   in halving chunks. An equation with no outs is an effect and is kept.
2. ``calls``: keep only the finding's call, or drop one other call (and the functions
   no call uses); the finding's index follows.
3. ``rewire``: drop an equation; its uses read one of its args (unary -> identity) or a
   visible value of the same Ty (defined earlier, a param, captured, an input).
4. ``interface``: drop unused outs of nested calls (with out_specs / out_axes entries,
   or a grad's argnum, or value_and_grad -> grad), results of top-level functions, params
   with their args and in_specs / in_axes entries (a used param first reads another
   param or a captured value of its Ty), inputs (merged into one of the same Ty).
5. ``transforms``: remove one transform of a chain; inline a nested call with none left.
6. ``mesh``: drop an axis wherever it is named (an equation left with an empty list of
   axis names becomes the identity), shrink an axis to 1 or by half.
7. ``shapes``: input dims to 1 or by half, drop a dim (and its spec entries).
8. ``params``: equation booleans to False, integers toward 0, lists lose an element;
   check_vma to True; axis_names, axis_name, spmd_axis_name, a checkpoint's policy,
   spec entries, in_axes / out_axes to null (or 0), a scan's carry entries to null; a
   loop's trip count toward 0; a transform's true options (inline, pmap, infer, smap,
   negative_axes) off; input spec to null, seed to 0; mesh axis_type to auto, set_mesh off;
   the program's ``checks`` (jax_enable_checks) off.

After the fixed point, names are made canonical (:func:`canonical`) if the predicate
still holds. Every candidate is first *repaired*: a step that changes a value's rank
carries on downstream, as each chain's per-argument and per-result entries (in_specs,
in_axes, out_specs, out_axes) are fitted to the ranks the typing rules derive. When the
current program has no dead code, a step's candidate also loses the dead code it
creates (one run instead of two).
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field

from fuzz import transforms as TR
from fuzz import typecheck as T
from fuzz.program import validate_program
from fuzz.render import NEWEST_CAPS, render
from fuzz.typecheck import ProgramError
from fuzz.walk import is_fn as _is_fn
from fuzz.walk import scopes as _scopes
from fuzz.walk import subfns as _subfns

# Keys every equation has; any other key of an equation is a parameter, except a nested
# function (a dict with params/eqns/results, or a list of them) and a transform chain.
_STRUCTURAL = ("op", "args", "outs", "fn", "transforms")
_NAME_KEYS = ("tag",)  # string parameters that are names (renamed by canonical(), never simplified)


# ----------------------------------------------------------------------------- results
@dataclass
class Reduction:
    """What :func:`reduce_program` found.

    ``program``: the smallest interesting program found (valid, same schema);
    ``call``: index of the finding's call in ``program`` (None: the whole program);
    ``reduced``: True when a fixed point was reached within the budget; ``runs``:
    predicate evaluations that were not cache hits (each one JAX run); ``seconds``: wall
    time spent; ``log``: one line per accepted step (pass name, size before -> after).
    """

    program: dict
    call: int | None
    reduced: bool
    runs: int
    seconds: float
    log: list = field(default_factory=list)


@dataclass(frozen=True, order=True)
class Size:
    """The reduction measure (compared as a tuple, see the module docstring)."""

    structure: int
    values: float
    params: int
    names: int = 0

    def __str__(self) -> str:
        return f"{self.structure}/{self.values:g}/{self.params}/{self.names}"


class _OutOfBudget(Exception):
    pass


# ----------------------------------------------------------------------------- JSON helpers
def _copy(x):
    return json.loads(json.dumps(x))


def _get(obj, path):
    for k in path:
        obj = obj[k]
    return obj


def _chains(program: dict):
    """Path of every transform chain: calls' and nested calls' ``transforms`` lists."""
    for c in range(len(program["calls"])):
        yield ("calls", c, "transforms")
    for path, fn in _scopes(program):
        for i, e in enumerate(fn["eqns"]):
            if isinstance(e.get("transforms"), list):
                yield path + ("eqns", i, "transforms")


def _params_of(eqn: dict):
    """(key, value) of an equation's simplifiable parameters."""
    for k, v in eqn.items():
        if k in _STRUCTURAL or k in _NAME_KEYS or _is_fn(v) or (isinstance(v, list) and any(map(_is_fn, v))):
            continue
        yield k, v


def _closed(program: dict, eqn: dict) -> bool:
    """Whether a nested function may not capture (shard_map over an Explicit mesh, docs/program.md)."""
    return program["mesh"]["axis_type"] == "explicit" and any(
        t.get("kind") == "shard_map" for t in eqn.get("transforms") or ())


def _path_key(path):
    return tuple((0, x) if isinstance(x, int) else (1, x) for x in path)


# ----------------------------------------------------------------------------- size
def _spec_score(spec) -> int:
    return 0 if spec is None else sum(len(e) for e in spec if e)


def _chain_score(chain: list) -> int:
    s = 0
    for t in chain:
        s += t.get("check_vma") is False
        s += t.get("kind") == "value_and_grad"
        s += len(t.get("argnums") or ())
        if t.get("axis_names") is not None:
            s += 1 + len(t["axis_names"])
        s += (t.get("axis_name") is not None) + (t.get("spmd_axis_name") is not None)
        s += t.get("policy") is not None
        # options that are off by default (a jit inlined, a vmap run as jax.pmap, a shard_map's
        # in_specs inferred or written as jax.smap, its axes counted from the end)
        s += sum(1 for k, v in t.items() if v is True and k != "check_vma")
        s += t.get("n") or 0  # a loop's trip count
        s += sum(_spec_score(x) for x in (t.get("in_specs") or []) + (t.get("out_specs") or []))
        s += sum(1 + a for a in (t.get("in_axes") or []) + (t.get("out_axes") or []) if a is not None)
    return s


def _value_score(v) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return abs(v)
    if isinstance(v, list):
        return len(v)
    return 0


def _size3(program: dict) -> tuple:
    m = program["mesh"]
    structure = len(program["calls"]) + len(program["functions"]) + len(program["inputs"]) + len(m["axis_names"])
    params = int(m["axis_type"] != "auto") + int(bool(m.get("set_mesh"))) + int(bool(program.get("checks")))
    for c in program["calls"]:
        structure += len(c["args"]) + len(c["transforms"])
        params += _chain_score(c["transforms"])
    for _, fn in _scopes(program):
        structure += len(fn["params"]) + len(fn["results"]) + len(fn["eqns"])
        for e in fn["eqns"]:
            structure += len(e["args"]) + len(e["outs"])
            chain = e.get("transforms")
            if isinstance(chain, list):
                structure += len(chain)
                params += _chain_score(chain)
            params += sum(_value_score(v) for _, v in _params_of(e))
    values = sum(math.log2(s) for s in m["axis_sizes"])
    for i in program["inputs"]:
        values += math.log2(math.prod(i["shape"])) + len(i["shape"])
        params += (0 if i["spec"] is None else 1 + _spec_score(i["spec"])) + (i["seed"] != 0)
    return structure, round(values, 6), params


def size(program: dict) -> Size:
    """The reduction measure of a program (see the module docstring); program: a valid program dict."""
    return Size(*_size3(program), names=int(canonical(program) != program))


# ----------------------------------------------------------------------------- index
@dataclass
class _Scope:
    path: tuple            # JSON path of the function
    fn: dict
    parent: tuple | None   # path of the enclosing function (None: top level)
    at: int | None         # index of the equation of ``parent`` that holds this function
    captured: list         # Defs visible from outside, innermost first (top level: the inputs)
    params: list = field(default_factory=list)   # Def of each param
    outs: list = field(default_factory=list)     # per equation, the Def of each out

    def visible(self, i: int, name_of: dict) -> list:
        """Defs readable by name before equation ``i``, innermost first (shadowed ones left out)."""
        seen, out = set(), []
        for d in [d for ds in reversed(self.outs[:i]) for d in reversed(ds)] + self.params + self.captured:
            if name_of[d] not in seen:
                seen.add(name_of[d])
                out.append(d)
        return out


class _Index:
    """Definitions, uses, liveness and types of one program.

    A *Def* is ("in", name) for an input, ("p", path, k) for param k of the function at
    ``path``, ("o", path, i, k) for out k of its equation i. A *use* location is
    ("arg", path, i, k), ("res", path, k) or ("call", c, k). Names resolve as in
    :func:`fuzz.typecheck.function_types`: params shadow captured names; nested functions
    see the enclosing scope as it is at their equation.
    """

    def __init__(self, program: dict, caps: dict | None = None):
        self.p = program
        self.caps = caps  # the release whose typing rules give the types (None: the newest)
        self.scopes: dict = {}
        self.name: dict = {}
        self.uses: dict = {}
        self.def_at: dict = {}
        self._types = None
        self._call_types = None
        env = {}
        for inp in program["inputs"]:
            d = ("in", inp["name"])
            self._define(d, inp["name"])
            env[inp["name"]] = d
        self.inputs = list(env.values())
        for fname, fn in program["functions"].items():
            self._visit(("functions", fname), fn, env, None, None, list(self.inputs))
        for c, call in enumerate(program["calls"]):
            for k, a in enumerate(call["args"]):
                self._use(env.get(a), ("call", c, k))

    def _define(self, d, name):
        self.name[d] = name
        self.uses[d] = []

    def _use(self, d, loc):
        if d is not None:
            self.uses[d].append(loc)
            self.def_at[loc] = d

    def _visit(self, path, fn, env, parent, at, captured):
        sc = _Scope(path, fn, parent, at, captured)
        self.scopes[path] = sc
        env = dict(env)
        for k, p in enumerate(fn["params"]):
            d = ("p", path, k)
            self._define(d, p)
            env[p] = d
            sc.params.append(d)
        for i, e in enumerate(fn["eqns"]):
            for k, a in enumerate(e["args"]):
                self._use(env.get(a), ("arg", path, i, k))
            subs = list(_subfns(e))
            if subs:
                vis = [] if _closed(self.p, e) else sc.visible(i, self.name)
                for key, sub in subs:
                    self._visit(path + ("eqns", i) + key, sub, env, path, i, vis)
            ds = []
            for k, o in enumerate(e["outs"]):
                d = ("o", path, i, k)
                self._define(d, o)
                env[o] = d
                ds.append(d)
            sc.outs.append(ds)
        for k, r in enumerate(fn["results"]):
            self._use(env.get(r), ("res", path, k))

    def eqn(self, path, i) -> dict:
        return self.scopes[path].fn["eqns"][i]

    def calls_of(self, fname: str) -> list:
        return [c for c, call in enumerate(self.p["calls"]) if call["function"] == fname]

    # -- liveness ---------------------------------------------------------------------
    def liveness(self) -> tuple:
        """(live equations {(path, i)}, live scopes {path}, live Defs).

        A top-level function is live when a call uses it; in a live function the results
        and the equations with no outs (kept for their effect) are live; an equation is
        live when an out is, and then its args and nested functions are.
        """
        live_e, live_s, live_d = set(), set(), set()
        work = [("s", ("functions", c["function"])) for c in self.p["calls"]]
        for c, call in enumerate(self.p["calls"]):
            work += [("d", self.def_at.get(("call", c, k))) for k in range(len(call["args"]))]
        while work:
            kind, x = work.pop()
            if kind == "d":
                if x is None or x in live_d:
                    continue
                live_d.add(x)
                if x[0] == "o":
                    work.append(("e", (x[1], x[2])))
            elif kind == "e":
                if x in live_e:
                    continue
                live_e.add(x)
                path, i = x
                e = self.eqn(path, i)
                work += [("d", self.def_at.get(("arg", path, i, k))) for k in range(len(e["args"]))]
                work += [("s", path + ("eqns", i) + key) for key, _ in _subfns(e)]
            else:
                if x in live_s or x not in self.scopes:
                    continue
                live_s.add(x)
                fn = self.scopes[x].fn
                work += [("d", self.def_at.get(("res", x, k))) for k in range(len(fn["results"]))]
                work += [("e", (x, i)) for i, e in enumerate(fn["eqns"]) if not e["outs"]]
        return live_e, live_s, live_d

    def dead(self) -> tuple:
        """(dead equations of live functions [(path, i)], uncalled functions, unused input indices)."""
        live_e, live_s, live_d = self.liveness()
        eqns = [(path, i) for path, sc in self.scopes.items() if path in live_s
                for i in range(len(sc.fn["eqns"])) if (path, i) not in live_e]
        fns = [n for n in self.p["functions"] if ("functions", n) not in live_s]
        ins = [k for k, d in enumerate(self.inputs) if d not in live_d]
        if len(ins) == len(self.inputs):
            ins = ins[1:]  # a program keeps one input
        return eqns, fns, ins

    def enclosing(self, path, i):
        """(path, i) of the equation and of every equation that encloses it, innermost first."""
        while path is not None:
            yield path, i
            sc = self.scopes[path]
            path, i = sc.parent, sc.at

    # -- types --------------------------------------------------------------------------
    @property
    def types(self) -> dict:
        """{Def: {call index (None for inputs): Ty}}: each value's type in each call that reaches it."""
        if self._types is None:
            self._types = {}
            try:
                self._type_program()
            except (ProgramError, KeyError, IndexError, TypeError, ValueError):
                pass  # partial types: steps that need the missing ones are not proposed
        return self._types

    def call_outputs(self, c: int) -> int:
        """Number of results of call ``c`` (0 when the program does not type-check)."""
        if self._call_types is None:
            try:
                self._call_types = T.check_program(self.p, caps=self.caps)
            except (ProgramError, KeyError, IndexError, TypeError, ValueError):
                self._call_types = []
        return len(self._call_types[c]) if c < len(self._call_types) else 0

    def _type_program(self):
        ctx = T.root_ctx(self.p, self.caps)
        ins = T.input_types(self.p)
        for n, ty in ins.items():
            self._types[("in", n)] = {None: ty}
        for c, call in enumerate(self.p["calls"]):
            path = ("functions", call["function"])
            if path in self.scopes:
                self._type_chain(c, path, call["transforms"], ctx, [ins[a] for a in call["args"]], ins)

    def _type_chain(self, inst, path, chain, ctx, args, env):
        # The input side of each transform, outermost first (fuzz.typecheck.call_types).
        for t in chain:
            inner, args = T.enter(t, ctx, args)
            if T.sealed(t, ctx):
                env = {}
            ctx = inner
        self._type_fn(inst, path, ctx, args, env)

    def _type_fn(self, inst, path, ctx, param_types, env):
        fn = self.scopes[path].fn
        env = dict(env)
        for k, (p, ty) in enumerate(zip(fn["params"], param_types)):
            env[p] = ty
            self._types.setdefault(("p", path, k), {})[inst] = ty
        for i, e in enumerate(fn["eqns"]):
            if "fn" in e and isinstance(e.get("transforms"), list):
                self._type_chain(inst, path + ("eqns", i, "fn"), e["transforms"], ctx,
                                 [env[a] for a in e["args"]], env)
            # The equation's out types, by the typing rules themselves, whatever its op.
            outs = T.function_types({"params": [], "eqns": [e], "results": list(e["outs"])}, ctx, [], env)
            for k, (o, ty) in enumerate(zip(e["outs"], outs)):
                env[o] = ty
                self._types.setdefault(("o", path, i, k), {})[inst] = ty

    def same_type(self, a, b) -> bool:
        """Whether Defs ``a`` and ``b`` have the same Ty (shape and vma) in every call reaching them."""
        ta, tb = self.types.get(a), self.types.get(b)
        if not ta or not tb:
            return False
        insts = (set(ta) | set(tb)) - {None} or {None}

        def at(t, i):
            return t[None] if None in t else t.get(i)
        return all(at(ta, i) is not None and at(ta, i) == at(tb, i) for i in insts)


# ----------------------------------------------------------------------------- edits
class _Edit:
    """A copy of a program to change by the original's paths: set fields first, deletions last."""

    def __init__(self, ix: _Index):
        self.ix = ix
        self.p = _copy(ix.p)
        self.dels = set()

    def at(self, path):
        return _get(self.p, path)

    def use(self, loc, name):
        if loc[0] == "arg":
            _get(self.p, loc[1])["eqns"][loc[2]]["args"][loc[3]] = name
        elif loc[0] == "res":
            _get(self.p, loc[1])["results"][loc[2]] = name
        else:
            self.p["calls"][loc[1]]["args"][loc[2]] = name

    def rewire(self, d, name):
        """Every use of Def ``d`` reads ``name`` instead."""
        for loc in self.ix.uses[d]:
            self.use(loc, name)

    def delete(self, path):
        self.dels.add(tuple(path))

    def result(self) -> dict:
        for path in sorted(self.dels, key=_path_key, reverse=True):
            del _get(self.p, path[:-1])[path[-1]]
        return self.p


def _dce(ix: _Index, eqns, fns, ins) -> dict:
    e = _Edit(ix)
    for path, i in eqns:
        e.delete(path + ("eqns", i))
    for n in fns:
        e.delete(("functions", n))
    for k in ins:
        e.delete(("inputs", k))
    return e.result()


def _without_dead_code(program: dict) -> dict | None:
    """``program`` with all dead code removed, or None when it has none."""
    try:
        ix = _Index(program)
        eqns, fns, ins = ix.dead()
    except (KeyError, IndexError, TypeError):
        return None
    if not (eqns or fns or ins):
        return None
    outer = set(eqns)
    eqns = [(p, i) for p, i in eqns if not any(x in outer for x in list(ix.enclosing(p, i))[1:])]
    return _dce(ix, eqns, fns, ins)


# ----------------------------------------------------------------------------- chain surgery
# Transforms whose outputs this module can map to their body's results when one is dropped.
# (Transform.maps_outputs of the transform registry, fuzz/transforms/)
_MAPPED_OUTPUTS = tuple(k for k, t in TR.REGISTRY.items() if t.maps_outputs)


def _drop_output(chain: list, k: int):
    """Remove output ``k`` of a call through ``chain`` (outermost first).

    Returns (new chain, index of the function result to remove, or None when a grad-like
    transform absorbs the output: one of its argnums is dropped, or value_and_grad
    becomes grad), or None when impossible.
    """
    chain = _copy(chain)
    if any(t["kind"] not in _MAPPED_OUTPUTS for t in chain):
        return None  # a transform whose outputs are not its body's, one for one (vjp, jvp): left alone
    for t in chain:
        if "argnums" in t:
            value = int(t["kind"] == "value_and_grad")
            if value and k == 0:
                t["kind"] = "grad"
                return chain, None
            m = k - value
            if len(t["argnums"]) < 2 or not 0 <= m < len(t["argnums"]):
                return None
            del t["argnums"][m]
            return chain, None
        for key in ("out_specs", "out_axes"):
            if t.get(key) is not None:
                if k >= len(t[key]):
                    return None
                del t[key][k]
        if t.get("carry") is not None:  # a scan: the argument that carried result k is carried no more
            t["carry"] = [None if c is None or c == k else c - (c > k) for c in t["carry"]]
    return chain, k


def _drop_arg(chain: list, k: int):
    """``chain`` without argument ``k`` (in_specs / in_axes entries, argnums renumbered), or None."""
    chain = _copy(chain)
    for t in chain:
        for key in ("in_specs", "in_axes", "carry"):
            if t.get(key) is not None:
                if k >= len(t[key]):
                    return None
                del t[key][k]
        if "argnums" in t:
            if k in t["argnums"]:
                return None
            t["argnums"] = [a - (a > k) for a in t["argnums"]]
    return chain


def _drop_dim(chain: list, k: int, d: int):
    """``chain`` for argument ``k`` losing dim ``d`` (spec entries dropped, in_axes moved), or None."""
    chain = _copy(chain)
    for t in chain:
        if t.get("in_specs") is not None:
            spec = t["in_specs"][k]
            if d >= len(spec):
                return None
            del spec[d]
        if "in_axes" in t:
            ax = t["in_axes"][k]
            if ax is None:
                continue
            if ax == d:
                return None
            if ax < d:
                d -= 1
            else:
                t["in_axes"][k] = ax - 1
    return chain


def _spec_without(spec, axis: str):
    if spec is None:
        return None
    return [None if e is None else ([x for x in e if x != axis] or None) for e in spec]


def _smaller_ints(v: int) -> list:
    """Integers of smaller magnitude to try for ``v``, smallest first."""
    s = -1 if v < 0 else 1
    a = abs(v)
    return [s * x for x in sorted({0, 1, a // 2, a - 1}) if x < a]


# ----------------------------------------------------------------------------- repair
def _fit_spec(spec: list, rank: int) -> list:
    """A spec of length ``rank``: unnamed entries go first, then trailing ones; Nones pad."""
    spec = list(spec)
    while len(spec) > rank and None in spec:
        del spec[len(spec) - 1 - spec[::-1].index(None)]
    del spec[rank:]
    return spec + [None] * (rank - len(spec))


def _fit_in(chain: list, ranks: list) -> None:
    """Fit a chain's in_specs / in_axes to its arguments' ranks (in place)."""
    ranks = list(ranks)
    for t in chain:
        for k, spec in enumerate(t.get("in_specs") or []):
            if k < len(ranks):
                t["in_specs"][k] = _fit_spec(spec, ranks[k])
        for k, ax in enumerate(t.get("in_axes") or []):
            if ax is not None and k < len(ranks):
                t["in_axes"][k] = min(ax, ranks[k] - 1) if ranks[k] else None
                ranks[k] -= 1 if ranks[k] else 0


def _fit_out(t: dict, ranks: list) -> None:
    """Fit one transform's out_specs / out_axes to its inner results' ranks (in place)."""
    for k, spec in enumerate(t.get("out_specs") or []):
        if k < len(ranks):
            t["out_specs"][k] = _fit_spec(spec, ranks[k])
    for k, ax in enumerate(t.get("out_axes") or []):
        if ax is not None and k < len(ranks):
            t["out_axes"][k] = min(ax, ranks[k])


def _repair(program: dict, caps: dict | None = None) -> dict:
    """Fit every chain's per-argument and per-result entries to the ranks the typing rules
    (of the release of ``caps``, None: the newest) derive, in place, so that a step that changes
    a value's rank carries on downstream (e.g. a shard_map's out_specs lose an entry). Stops at
    the first other typing error."""
    try:
        ctx = T.root_ctx(program, caps)
        ins = T.input_types(program)
        for call in program["calls"]:
            fn = program["functions"][call["function"]]
            _repair_chain(call["transforms"], fn, ctx, [ins[a] for a in call["args"]], ins)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, ArithmeticError):
        pass  # ProgramError included: the candidate is refused later
    return program


def _repair_chain(chain, fn, ctx, args, env):
    _fit_in(chain, [a.rank for a in args])
    levels = []
    for t in chain:
        inner, inner_args = T.enter(t, ctx, args)
        levels.append((t, ctx, inner, args))
        if T.sealed(t, ctx):
            env = {}  # as fuzz.typecheck.call_types
        ctx, args = inner, inner_args
    results = _repair_fn(fn, ctx, args, env)
    for t, outer, inner, a in reversed(levels):
        _fit_out(t, [r.rank for r in results])
        results = T.exit_(t, outer, inner, a, results)
    return results


def _repair_fn(fn, ctx, params, env):
    env = dict(env)
    env.update(zip(fn["params"], params))
    for e in fn["eqns"]:
        args = [env[v] for v in e["args"]]
        if _is_fn(e.get("fn")) and isinstance(e.get("transforms"), list):
            outs = _repair_chain(e["transforms"], e["fn"], ctx, args, env)
        else:
            outs = T.function_types({"params": [], "eqns": [e], "results": list(e["outs"])}, ctx, [], env)
        env.update(zip(e["outs"], outs))
    return [env[r] for r in fn["results"]]


# ----------------------------------------------------------------------------- names
def canonical(program: dict) -> dict:
    """``program`` with canonical names: top-level functions f0.. (in order of first call),
    inputs x0.., params a1.. and variables v1.. in order of definition (reading order, a
    nested function before the outs of its equation), ``tag`` parameters cb1...

    Behaviour is unchanged for a valid program (names are resolved by scope).
    """
    ix = _Index(program)
    order = []
    for c in program["calls"]:
        if c["function"] not in order and c["function"] in program["functions"]:
            order.append(c["function"])
    order += [n for n in program["functions"] if n not in order]
    fmap = {n: f"f{k}" for k, n in enumerate(order)}
    new = {}
    for k, d in enumerate(ix.inputs):
        new[d] = f"x{k}"
    counters = {"a": 0, "v": 0}
    tags: dict = {}
    e = _Edit(ix)

    def fresh(prefix):
        counters[prefix] += 1
        return f"{prefix}{counters[prefix]}"

    def walk(path):
        sc = ix.scopes[path]
        for d in sc.params:
            new[d] = fresh("a")
        for i, eq in enumerate(sc.fn["eqns"]):
            for key, _ in _subfns(eq):
                walk(path + ("eqns", i) + key)
            for d in sc.outs[i]:
                new[d] = fresh("v")
            for k in _NAME_KEYS:
                if isinstance(eq.get(k), str):
                    tags.setdefault(eq[k], f"cb{len(tags) + 1}")
                    e.at(path)["eqns"][i][k] = tags[eq[k]]

    for n in order:
        walk(("functions", n))
    for d, name in new.items():
        e.rewire(d, name)
        if d[0] == "in":
            e.p["inputs"][[i["name"] for i in program["inputs"]].index(d[1])]["name"] = name
        elif d[0] == "p":
            e.at(d[1])["params"][d[2]] = name
        else:
            e.at(d[1])["eqns"][d[2]]["outs"][d[3]] = name
    p = e.result()
    p["functions"] = {fmap[n]: p["functions"][n] for n in order}
    for c in p["calls"]:
        c["function"] = fmap.get(c["function"], c["function"])
    return p


def _valid(cand: dict, caps: dict) -> bool:
    """Whether a candidate passes the typing rules and the schema and renders with ``caps``
    on at most ``caps["n_devices"]`` devices."""
    try:
        T.check_program(cand, caps=caps)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, ArithmeticError):
        # a malformed candidate (say, a parameter below its schema's minimum: a broadcast
        # of size 0 that a vmap then maps over) can trip the checker before the schema says why;
        # typing first also rejects most invalid candidates before the slower jsonschema check
        # (merging the two into validate_program alone: 708 corpus candidates 1.96 s -> 3.75 s)
        return False
    try:
        validate_program(cand, caps)
        render(cand, caps)
    except ValueError:  # ProgramError included
        return False
    n = caps.get("n_devices")
    return n is None or math.prod(cand["mesh"]["axis_sizes"]) <= n


# ----------------------------------------------------------------------------- the reducer
class _Reducer:
    def __init__(self, program, interesting, call, max_runs, max_seconds, caps):
        self.best = program
        self.best_size = _size3(program)
        self.call = call
        self.interesting = interesting
        self.max_runs = max_runs
        self.t0 = time.monotonic()
        self.deadline = self.t0 + max_seconds
        self.caps = caps
        self.cache: dict = {}
        self.runs = 0
        self.log: list = []
        self.auto_dce = _without_dead_code(program) is None

    # -- one candidate ------------------------------------------------------------------
    def valid(self, cand: dict) -> bool:
        return _valid(cand, self.caps)

    def check(self, cand: dict, call) -> bool | None:
        """Predicate result for a candidate (cached); None when it is invalid. May raise _OutOfBudget."""
        if time.monotonic() > self.deadline:
            raise _OutOfBudget
        key = hashlib.sha256(json.dumps([cand, call], sort_keys=True).encode()).hexdigest()
        if key not in self.cache:
            if not self.valid(cand):
                self.cache[key] = None
            else:
                if self.runs >= self.max_runs:
                    raise _OutOfBudget
                self.runs += 1
                self.cache[key] = bool(self.interesting(cand, call))
        return self.cache[key]

    def attempt(self, name: str, cand: dict, call) -> bool:
        """Keep ``cand`` if it is smaller, valid and interesting; log it."""
        if cand is None:
            return False
        _repair(cand, self.caps)
        if self.auto_dce:
            cand = _without_dead_code(cand) or cand
        s = _size3(cand)
        if not s < self.best_size:
            return False
        if not self.check(cand, call):
            return False
        self.log.append(f"{name}: {Size(*self.best_size)} -> {Size(*s)}")
        self.best, self.best_size, self.call = cand, s, call
        return True

    # -- passes -------------------------------------------------------------------------
    def run_pass(self, name: str, gen) -> bool:
        """Run one pass until it has nothing left to propose; True when it changed the program."""
        start, changed = 0, False
        while True:
            ix = _Index(self.best, self.caps)
            for slot, make in gen(ix, self.call, start):
                if slot < start:
                    continue
                built = make()
                if built is not None and self.attempt(name, *built):
                    start, changed = slot, True
                    self.auto_dce = _without_dead_code(self.best) is None
                    break
            else:
                return changed

    def fixed_point(self) -> None:
        while True:
            changed = False
            for name, gen in PASSES:
                changed |= self.run_pass(name, gen)
            if not changed:
                return

    def finish(self) -> None:
        """Canonical names, kept if the predicate still holds (one run)."""
        cand = canonical(self.best)
        if cand != self.best and self.check(cand, self.call):
            self.log.append(f"names: {Size(*self.best_size, 1)} -> {Size(*self.best_size, 0)}")
            self.best = cand


def _slots(items):
    """Number proposals: (slot, make) pairs from (make) items, slot = ordinal."""
    return enumerate(items)


# Pass 1 ---------------------------------------------------------------------------------
def _pass_dead(ix: _Index, call, start):
    """Dead equations (outs unused, transitively), uncalled functions, unused inputs: all at
    once, then (a bug may need dead code to be traced) the functions and inputs alone and
    the equations in halving chunks, each chunk with the dead equations that read it."""
    eqns, fns, ins = ix.dead()
    if not (eqns or fns or ins):
        return
    outer = set(eqns)
    eqns = [(p, i) for p, i in eqns if not any(x in outer for x in list(ix.enclosing(p, i))[1:])]
    dead = set(eqns)
    yield 0, lambda: (_dce(ix, eqns, fns, ins), call)
    yield 1, lambda: (_dce(ix, [], fns, ins), call) if (fns or ins) else None

    def closure(chunk):
        # a chunk goes with the dead equations that read its outs (or enclose such a reader)
        out, work = set(chunk), list(chunk)
        while work:
            path, i = work.pop()
            for d in ix.scopes[path].outs[i]:
                for loc in ix.uses[d]:
                    if loc[0] == "arg":
                        where = (loc[1], loc[2])
                    elif loc[0] == "res" and ix.scopes[loc[1]].parent is not None:
                        where = (ix.scopes[loc[1]].parent, ix.scopes[loc[1]].at)
                    else:
                        continue
                    for x in ix.enclosing(*where):
                        if x in dead:
                            if x not in out:
                                out.add(x)
                                work.append(x)
                            break
        return sorted(out, key=lambda x: _path_key(x[0] + ("eqns", x[1])))

    slot, n = 2, len(eqns) // 2
    while n >= 1:
        for j in range(0, len(eqns), n):
            chunk = eqns[j:j + n]
            yield slot, lambda chunk=chunk: (_dce(ix, closure(chunk), [], []), call)
            slot += 1
        n //= 2


# Pass 2 ---------------------------------------------------------------------------------
def _keep_calls(ix: _Index, keep: list, call):
    p = _copy(ix.p)
    p["calls"] = [p["calls"][k] for k in keep]
    used = {c["function"] for c in p["calls"]}
    p["functions"] = {n: f for n, f in p["functions"].items() if n in used}
    return p, (None if call is None else keep.index(call))


def _pass_calls(ix: _Index, call, start):
    """Keep only the finding's call; drop one other call (the finding's own is never dropped)."""
    n = len(ix.p["calls"])
    if n <= 1:
        return
    keeps = [[call]] if call is not None else []
    keeps += [[k for k in range(n) if k != j] for j in reversed(range(n)) if j != call]
    for slot, keep in enumerate(keeps):
        yield slot, lambda keep=keep: _keep_calls(ix, keep, call)


# Pass 3 ---------------------------------------------------------------------------------
def _pass_rewire(ix: _Index, call, start, ops=None):
    """Drop an equation: its uses read one of its args (unary -> identity; downstream types
    follow from the typing rules) or a visible value of the same type instead. Equations
    with no outs are just dropped. ``ops``: only equations whose op is among these names."""
    slot = 0
    for path, sc in list(ix.scopes.items()):
        for i, e in enumerate(sc.fn["eqns"]):
            slot += 1
            if slot < start or (ops is not None and e["op"] not in ops):
                continue
            outs = sc.outs[i]
            if not outs:
                yield slot, lambda path=path, i=i: _rewired(ix, path, i, [], call)
                continue
            args = [ix.def_at.get(("arg", path, i, k)) for k in range(len(e["args"]))]
            order = []
            for d in args + sc.visible(i, ix.name):
                if d is not None and d not in order and d not in outs:
                    order.append(d)
            choices = []
            for d in outs:
                # its own args even when the type differs (downstream types follow, or the
                # candidate is refused for free), then visible values of the same type
                choices.append([None] if not ix.uses[d] else
                               [r for r in order if r in args or ix.same_type(r, d)])
            if not all(choices):
                continue
            for j in range(max(map(len, choices))):
                pick = [c[min(j, len(c) - 1)] for c in choices]
                yield slot, lambda path=path, i=i, pick=pick: _rewired(ix, path, i, pick, call)


def _rewired(ix, path, i, pick, call):
    e = _Edit(ix)
    for d, r in zip(ix.scopes[path].outs[i], pick):
        if r is not None:
            e.rewire(d, ix.name[r])
    e.delete(path + ("eqns", i))
    return e.result(), call


# Pass 4 ---------------------------------------------------------------------------------
def _pass_interface(ix: _Index, call, start):
    """Drop unused outputs (with their out_specs / out_axes entries, or a grad's argnum),
    function params with their call args (a used param first reads another param or a
    captured value of the same type), and inputs (merged into another of the same type)."""
    makes = []
    p = ix.p
    # (a) outputs of nested calls
    for path, sc in ix.scopes.items():
        for i, e in enumerate(sc.fn["eqns"]):
            if not (isinstance(e.get("transforms"), list) and _is_fn(e.get("fn"))) or len(e["outs"]) < 2:
                continue
            for k, d in enumerate(sc.outs[i]):
                if not ix.uses[d]:
                    makes.append(lambda path=path, i=i, k=k: _drop_eqn_output(ix, path, i, k, call))
    # (b) results of top-level functions, through every call of them; (c) a call's grad outputs
    for fname, fn in p["functions"].items():
        calls = ix.calls_of(fname)
        for k in range(len(fn["results"]) if len(fn["results"]) > 1 and calls else 0):
            makes.append(lambda fname=fname, k=k, calls=calls: _drop_fn_result(ix, fname, k, calls, call))
    for c, cl in enumerate(p["calls"]):
        if any("argnums" in t for t in cl["transforms"]):
            for k in range(ix.call_outputs(c)):
                makes.append(lambda c=c, k=k: _drop_call_output(ix, c, k, call))
    # (d) params of nested functions, (e) of top-level functions
    for path, sc in ix.scopes.items():
        eq = ix.eqn(sc.parent, sc.at) if sc.parent is not None else None
        if eq is not None and not (path[-1] == "fn" and isinstance(eq.get("transforms"), list)):
            continue
        if eq is None and not ix.calls_of(path[1]):
            continue
        for k, d in enumerate(sc.params):
            reps = [None] if not ix.uses[d] else [r for r in sc.visible(0, ix.name) if r != d and ix.same_type(r, d)]
            for r in reps:
                makes.append(lambda path=path, k=k, r=r: _drop_param(ix, path, k, r, call))
    # (f) inputs
    for k, d in enumerate(ix.inputs):
        reps = [None] if not ix.uses[d] else [r for r in ix.inputs if r != d and ix.same_type(r, d)]
        for r in reps:
            makes.append(lambda k=k, d=d, r=r: _drop_input(ix, k, d, r, call))
    yield from _slots(makes)


def _drop_eqn_output(ix, path, i, k, call):
    e = _Edit(ix)
    eq = e.at(path)["eqns"][i]
    got = _drop_output(eq["transforms"], k)
    if got is None:
        return None
    eq["transforms"], inner = got
    if inner is not None:
        if len(eq["fn"]["results"]) < 2 or inner >= len(eq["fn"]["results"]):
            return None
        e.delete(path + ("eqns", i, "fn", "results", inner))
    e.delete(path + ("eqns", i, "outs", k))
    return e.result(), call


def _drop_fn_result(ix, fname, k, calls, call):
    e = _Edit(ix)
    for c in calls:
        got = _drop_output(e.p["calls"][c]["transforms"], k)
        if got is None or got[1] != k:
            return None
        e.p["calls"][c]["transforms"] = got[0]
    e.delete(("functions", fname, "results", k))
    return e.result(), call


def _drop_call_output(ix, c, k, call):
    got = _drop_output(ix.p["calls"][c]["transforms"], k)
    if got is None or got[1] is not None:
        return None
    p = _copy(ix.p)
    p["calls"][c]["transforms"] = got[0]
    return p, call


def _drop_param(ix, path, k, r, call):
    sc = ix.scopes[path]
    e = _Edit(ix)
    if r is not None:
        e.rewire(sc.params[k], ix.name[r])
    if sc.parent is None:
        for c in ix.calls_of(path[1]):
            chain = _drop_arg(e.p["calls"][c]["transforms"], k)
            if chain is None:
                return None
            e.p["calls"][c]["transforms"] = chain
            e.delete(("calls", c, "args", k))
    else:
        eq = e.at(sc.parent)["eqns"][sc.at]
        chain = _drop_arg(eq["transforms"], k)
        if chain is None:
            return None
        eq["transforms"] = chain
        e.delete(sc.parent + ("eqns", sc.at, "args", k))
    e.delete(path + ("params", k))
    return e.result(), call


def _drop_input(ix, k, d, r, call):
    if len(ix.inputs) < 2:
        return None
    e = _Edit(ix)
    if r is not None:
        e.rewire(d, ix.name[r])
    e.delete(("inputs", k))
    return e.result(), call


# Pass 5 ---------------------------------------------------------------------------------
def _pass_transforms(ix: _Index, call, start):
    """Remove one transform of a chain; inline a nested call with no transforms left."""
    makes = []
    for cpath in _chains(ix.p):
        for t in range(len(_get(ix.p, cpath))):
            makes.append(lambda cpath=cpath, t=t: _drop_transform(ix, cpath, t, call))
    for path, sc in ix.scopes.items():
        for i, e in enumerate(sc.fn["eqns"]):
            if e.get("transforms") == [] and _is_fn(e.get("fn")) and set(e) <= set(_STRUCTURAL):
                makes.append(lambda path=path, i=i: _inline(ix, path, i, call))
    yield from _slots(makes)


_ONE_FOR_ONE = tuple(k for k in _MAPPED_OUTPUTS if k not in ("grad", "value_and_grad"))


def _drop_transform(ix, cpath, t, call):
    """Remove transform ``t`` of the chain at ``cpath``.

    A nested call's jvp / linearize / vjp also gives up the outputs it adds when every
    transform outside it maps outputs one for one: uses of a tangent read the primal
    output it belongs to, uses of a cotangent the call's argument it belongs to (same
    shape; the typing rules refuse the candidate where the vma differs). Without this a
    finding under jvp kept the jvp (measured: grad(jvp(map(f))) of the io_callback
    finding of the corpus stayed a new signature instead of reaching its known face).
    """
    e = _Edit(ix)
    chain = e.at(cpath)
    kind = chain[t]["kind"]
    if kind in T.LINEARIZED and cpath[0] != "calls" and all(x["kind"] in _ONE_FOR_ONE for x in chain[:t]):
        path, i = cpath[:-3], cpath[-2]
        eq = e.at(path)["eqns"][i]
        outs = ix.scopes[path].outs[i]
        n = len(outs) - len(eq["args"]) if kind == "vjp" else len(outs) // 2
        for k in range(n, len(outs)):
            e.rewire(outs[k], eq["args"][k - n] if kind == "vjp" else ix.name[outs[k - n]])
        eq["outs"] = eq["outs"][:n]
        for x in chain[:t]:
            for key in ("out_specs", "out_axes"):
                if x.get(key) is not None:
                    x[key] = x[key][:n]
    e.delete(cpath + (t,))
    return e.result(), call


def _inline(ix: _Index, path, i, call):
    """Move the body of a transform-less nested call into the enclosing function.

    Params read the call's args; the body's outs get fresh names where they would clash;
    uses of the call's outs read the body's results.
    """
    inner = path + ("eqns", i, "fn")
    sc, outer = ix.scopes[inner], ix.scopes[path]
    eq = outer.fn["eqns"][i]
    count = Counter(ix.name.values())
    e = _Edit(ix)
    new = {d: eq["args"][k] for k, d in enumerate(sc.params)}
    n = 0
    for ds in sc.outs:
        for d in ds:
            name = ix.name[d]
            if count[name] > 1:  # defined elsewhere too: would clash once moved
                while f"r{n}" in count:
                    n += 1
                name = f"r{n}"
                count[name] += 1
            new[d] = name
    for d, name in new.items():
        e.rewire(d, name)
        if d[0] == "o":
            e.at(inner)["eqns"][d[2]]["outs"][d[3]] = name
    for k, d in enumerate(outer.outs[i]):
        res = ix.def_at.get(("res", inner, k))
        if res is None:
            return None
        e.rewire(d, new.get(res, ix.name[res]))
    body = e.at(inner)["eqns"]
    p = e.result()
    eqns = _get(p, path)["eqns"]
    eqns[i:i + 1] = body
    return p, call


# Pass 6 ---------------------------------------------------------------------------------
def _pass_mesh(ix: _Index, call, start):
    """Drop a mesh axis (everywhere it is named), shrink an axis size to 1 or by half."""
    makes = []
    m = ix.p["mesh"]
    for j, a in enumerate(m["axis_names"]):
        if len(m["axis_names"]) > 1:
            makes.append(lambda j=j, a=a: _drop_axis(ix, j, a, call))
        s = m["axis_sizes"][j]
        for v in sorted({1, s // 2} - {0, s}):
            makes.append(lambda j=j, v=v: _set_axis_size(ix, j, v, call))
    yield from _slots(makes)


def _set_axis_size(ix, j, v, call):
    p = _copy(ix.p)
    p["mesh"]["axis_sizes"][j] = v
    return p, call


def _drop_axis(ix: _Index, j, a, call):
    e = _Edit(ix)
    p = e.p
    e.delete(("mesh", "axis_names", j))
    e.delete(("mesh", "axis_sizes", j))
    for inp in p["inputs"]:
        inp["spec"] = _spec_without(inp["spec"], a)
    for cpath in _chains(ix.p):
        for ti, t in enumerate(e.at(cpath)):
            for key in ("in_specs", "out_specs"):
                if t.get(key) is not None:
                    t[key] = [_spec_without(s, a) for s in t[key]]
            if t.get("axis_names") is not None and a in t["axis_names"]:
                t["axis_names"].remove(a)
                if not t["axis_names"]:
                    e.delete(cpath + (ti,))  # a shard_map over that axis only: its body sees global values
            if t.get("spmd_axis_name") == a:
                t["spmd_axis_name"] = None
    # An equation parameter listing axis names loses the axis; an equation left with an
    # empty list (a collective over that axis only) becomes the identity on its args.
    repl = {}
    for path, sc in ix.scopes.items():
        for i, eq in enumerate(sc.fn["eqns"]):
            new = e.at(path)["eqns"][i]
            bypass = False
            for k, v in _params_of(eq):
                if isinstance(v, list) and a in v and all(isinstance(x, str) for x in v):
                    new[k] = [x for x in v if x != a]
                    bypass |= not new[k]
            if bypass:
                if eq["outs"] and not eq["args"]:
                    return None
                names = [repl.get(ix.def_at.get(("arg", path, i, k)), x) for k, x in enumerate(eq["args"])]
                for k, d in enumerate(sc.outs[i]):
                    repl[d] = names[k if k < len(names) else 0]
                    e.rewire(d, repl[d])
                e.delete(path + ("eqns", i))
    return e.result(), call


# Pass 7 ---------------------------------------------------------------------------------
def _pass_shapes(ix: _Index, call, start):
    """Input dims to 1 or half, then drop a dim (from the shape, the input's spec and the
    in_specs / in_axes of calls that take the input)."""
    makes = []
    for k, inp in enumerate(ix.p["inputs"]):
        for d, n in enumerate(inp["shape"]):
            for v in sorted({1, n // 2} - {0, n}):
                makes.append(lambda k=k, d=d, v=v: _set_dim(ix, k, d, v, call))
            makes.append(lambda k=k, d=d: _drop_input_dim(ix, k, d, call))
    yield from _slots(makes)


def _set_dim(ix, k, d, v, call):
    p = _copy(ix.p)
    p["inputs"][k]["shape"][d] = v
    return p, call


def _drop_input_dim(ix, k, d, call):
    p = _copy(ix.p)
    inp = p["inputs"][k]
    del inp["shape"][d]
    if inp["spec"] is not None:
        del inp["spec"][d]
    for c in p["calls"]:
        for j, a in enumerate(c["args"]):
            if a == inp["name"]:
                chain = _drop_dim(c["transforms"], j, d)
                if chain is None:
                    return None
                c["transforms"] = chain
    return p, call


# Pass 8 ---------------------------------------------------------------------------------
def _pass_params(ix: _Index, call, start):
    """Simplify parameters one at a time: equation booleans to False, integers toward 0,
    lists lose an element; shard_map check_vma to True, axis_names to null, spec entries
    to null or one axis fewer, a jit's in_specs / out_specs (its shardings) to null; vmap axis_name / spmd_axis_name and checkpoint policy to
    null, in_axes / out_axes to 0 or null, a transform's other true options (inline, pmap, infer, smap,
    negative_axes) to False; a loop's trip count toward 0; input spec to null (or an entry), seed
    to 0; mesh axis_type to auto and set_mesh off; the program's jax_enable_checks off (first)."""
    makes = []

    def setter(path, key, value):
        def make():
            p = _copy(ix.p)
            _get(p, path)[key] = value
            return p, call
        return make

    if ix.p.get("checks"):
        def no_checks():
            p = _copy(ix.p)
            del p["checks"]
            return p, call
        makes.append(no_checks)

    for path, sc in ix.scopes.items():
        for i, eq in enumerate(sc.fn["eqns"]):
            ep = path + ("eqns", i)
            for k, v in _params_of(eq):
                if v is True:
                    makes.append(setter(ep, k, False))
                elif isinstance(v, int) and not isinstance(v, bool):
                    makes += [setter(ep, k, x) for x in _smaller_ints(v)]
                elif isinstance(v, list) and len(v) > 1:
                    makes += [setter(ep, k, v[:j] + v[j + 1:]) for j in range(len(v))]
    for cpath in _chains(ix.p):
        for ti, t in enumerate(_get(ix.p, cpath)):
            tp = cpath + (ti,)
            if t.get("check_vma") is False:
                makes.append(setter(tp, "check_vma", True))
            for key, v in t.items():  # options off (a pmap without its option is the vmap of the same values)
                if v is True and key != "check_vma":
                    makes.append(setter(tp, key, False))
            # (a jit's in_specs / out_specs: its in_shardings / out_shardings, null for none; donate_argnums)
            tr = TR.lookup(t.get("kind"))
            nullable = tr.nullable if tr is not None else ()
            for key in ("axis_names", "axis_name", "spmd_axis_name", "policy") + nullable:
                if t.get(key) is not None:
                    makes.append(setter(tp, key, None))
            for key in tr.shrinkable if tr is not None else ():
                if t.get(key):
                    makes += [setter(tp, key, x) for x in _smaller_ints(t[key])]
            for key in ("in_specs", "out_specs"):
                for s, spec in enumerate(t.get(key) or []):
                    makes += _spec_moves(setter, tp + (key,), s, spec)
            for key in ("in_axes", "out_axes"):
                for s, ax in enumerate(t.get(key) or []):
                    if ax is None:
                        continue
                    if ax > 0:
                        makes.append(setter(tp + (key,), s, 0))
                    makes.append(setter(tp + (key,), s, None))
            for s, c in enumerate(t.get("carry") or []):  # a scan's carried argument closed over instead
                if c is not None:
                    makes.append(setter(tp + ("carry",), s, None))
    for k, inp in enumerate(ix.p["inputs"]):
        if inp["spec"] is not None:
            makes.append(setter(("inputs", k), "spec", None))
            makes += _spec_moves(setter, ("inputs", k), "spec", inp["spec"])
        if inp["seed"] != 0:
            makes.append(setter(("inputs", k), "seed", 0))
    if ix.p["mesh"]["axis_type"] != "auto":
        makes.append(setter(("mesh",), "axis_type", "auto"))
    if ix.p["mesh"].get("set_mesh"):
        makes.append(setter(("mesh",), "set_mesh", False))
    yield from _slots(makes)


def _spec_moves(setter, path, key, spec) -> list:
    out = []
    for d, entry in enumerate(spec):
        if entry is None:
            continue
        variants = [None] + ([entry[:j] + entry[j + 1:] for j in range(len(entry))] if len(entry) > 1 else [])
        for v in variants:
            out.append(setter(path, key, spec[:d] + [v] + spec[d + 1:]))
    return out


PASSES = (
    ("dead-code", _pass_dead),
    ("calls", _pass_calls),
    ("rewire", _pass_rewire),
    ("interface", _pass_interface),
    ("transforms", _pass_transforms),
    ("mesh", _pass_mesh),
    ("shapes", _pass_shapes),
    ("params", _pass_params),
)


def candidates(program: dict, call: int | None = None, caps: dict | None = None):
    """Every single step the passes propose for ``program``: (pass name, candidate, call);
    ``caps``: the release whose typing rules type it (None: the newest).

    Candidates may be invalid or not smaller (the reducer skips those). When ``program``
    has no dead code, each step comes with the dead code it leaves removed, as in
    :func:`reduce_program`. For tests: a reduced program is a fixed point when no valid,
    smaller candidate is interesting.
    """
    auto = _without_dead_code(program) is None
    ix = _Index(program, caps)
    for name, gen in PASSES:
        for _, make in gen(ix, call, 0):
            built = make()
            if built is not None:
                cand, c = built
                _repair(cand, caps)
                yield name, (_without_dead_code(cand) or cand) if auto else cand, c


def reduce_program(program: dict, interesting, call: int | None = None, *, max_runs: int = 300,
                   max_seconds: float = 120.0, caps: dict | None = None) -> Reduction:
    """Reduce a finding's program to a small one that still shows the finding.

    ``program``: a valid program (dict, ``fuzz/schemas/program.schema.json``);
    ``interesting(candidate, call) -> bool``: runs a candidate (e.g. in a JAX worker) and
    says whether it shows the same finding signature on call index ``call`` (None: on the
    program as a whole); ``call``: the finding's call in ``program`` (never dropped; the
    index follows when earlier calls are dropped); ``max_runs``: predicate evaluations
    that miss the cache; ``max_seconds``: wall-clock seconds; ``caps``: the worker's
    capabilities (default :data:`fuzz.render.NEWEST_CAPS`): candidates must render with them.

    ``program`` is assumed interesting and is not run. Returns a :class:`Reduction`
    (``reduced=False`` with the best program so far when the budget ran out). Raises
    fuzz.typecheck.ProgramError for an invalid ``program`` and ValueError for one that
    does not render with ``caps`` or a ``call`` out of range; exceptions from
    ``interesting`` propagate.
    """
    caps = caps or NEWEST_CAPS
    validate_program(program, caps)
    render(program, caps)
    if call is not None and not 0 <= call < len(program["calls"]):
        raise ValueError(f"call index {call} out of range: the program has {len(program['calls'])} calls")
    r = _Reducer(_copy(program), interesting, call, max_runs, max_seconds, caps)
    reduced = False
    try:
        r.fixed_point()
        reduced = True
        r.finish()
    except _OutOfBudget:
        pass
    return Reduction(program=r.best, call=r.call, reduced=reduced, runs=r.runs,
                     seconds=time.monotonic() - r.t0, log=r.log)


def without_ops(program: dict, ops, caps: dict | None = None) -> dict | None:
    """``program`` with every equation whose op is named in ``ops`` dropped, or None.

    Used to look past a known bug (:class:`fuzz.campaign.Campaign`): a program that
    raised a known signature is run again without the ops that bug needs, so that the
    rest of it is still judged. Op-agnostic like the reducer: each equation is dropped
    by the ``rewire`` pass (its uses read one of its args or a visible value of the same
    type), taking the first candidate that is valid (:func:`fuzz.typecheck.check_program`,
    the schema, :func:`fuzz.render.render` with ``caps``, default
    :data:`fuzz.render.NEWEST_CAPS`); dead code is kept (a bug may need it traced).
    ``program``: a valid program dict (not modified); ``ops``: a collection of op names
    (``fuzz.ops`` registry names; ``"call"`` is never dropped). Returns None when no
    equation has such an op or one of them cannot be dropped validly. Raises nothing
    for a valid ``program``.
    """
    caps = caps or NEWEST_CAPS
    ops = frozenset(ops) - {"call"}
    if not ops:
        return None
    best, changed = program, False
    while True:
        ix = _Index(best, caps)
        if not any(e["op"] in ops for sc in ix.scopes.values() for e in sc.fn["eqns"]):
            return best if changed else None
        for _, make in _pass_rewire(ix, None, 0, ops=ops):
            built = make()
            if built is None:
                continue
            cand = built[0]
            _repair(cand, caps)
            if _valid(cand, caps):
                best, changed = cand, True
                break
        else:
            return None


def without_vma_checks(program: dict, caps: dict | None = None) -> dict | None:
    """``program`` with every shard_map's ``check_vma`` set to False, or None.

    A look-past variant (:class:`fuzz.campaign.Campaign`) that keeps every op: many JAX
    bugs are raised by shard_map's varying-manual-axes checks (``core.pvary`` assertions,
    "requires varying manual axes to match", ``get_mat``), and ``check_vma=False`` turns
    those checks off (``jax.shard_map`` docstring, jax/_src/shard_map.py), so the program's
    collectives and transforms are still run and judged. All shard_maps at once: a nested
    shard_map keeps the enclosing one's ``check_vma`` (``fuzz.typecheck.enter``).
    ``program``: a valid program dict (not modified). Returns None when no shard_map has
    ``check_vma`` True or the variant is not valid under the typing rules (e.g. a rank-0
    gradient that would then vary over a manual axis directly under a shard_map); raises
    nothing for a valid ``program``.
    """
    caps = caps or NEWEST_CAPS
    cand, changed = _copy(program), False
    for path in _chains(cand):
        for t in _get(cand, path):
            if t.get("kind") == "shard_map" and t.get("check_vma") is True:
                t["check_vma"], changed = False, True
    return cand if changed and _valid(cand, caps) else None
