"""Seeded-bug benchmark: how long a default campaign takes to find a wrong-value bug planted in JAX.

    python benchmarks/seeded.py                                   # every mutant, seeds 1 2 3, 300 s each
    python benchmarks/seeded.py --mutants ppermute_batch_inverse --seeds 1 --seconds 180
    python benchmarks/seeded.py --seeds 1 --seconds 180 --out seeded.json   # resumable: done runs are skipped
    python benchmarks/seeded.py --exposure 1000 --out seeded.json # how often the generator draws each composition
    python benchmarks/seeded.py --exposure 800 --exposure-seeds 11,12,13,14,15,16   # summed over six seeds
    python benchmarks/seeded.py --list

The mutants are in ``benchmarks/mutants.py`` (each a small monkeypatch of one rule of JAX
0.10.2, wrong only under one composition, with a tiny check that shows it live; run
``python benchmarks/mutants.py --check``).

**How the worker is patched.** ``shardfuzz run --python PY`` starts its workers as
``PY -u <fuzz/worker.py>`` (``fuzz.execute.Worker._start``). For each mutant this script
writes, in a temporary directory, a shell script ``worker-<mutant>.sh`` that runs
``<this python> -u boot.py <mutant> "$@"``; ``boot.py`` loads ``fuzz/worker.py`` as a
module (its ``__main__`` guard does not fire), wraps the worker's ``capabilities(jax)``
so that the mutant is applied right after the worker has imported JAX (after the worker
has set up its parent-death guard, before it measures its release rules and says hello),
and calls the worker's ``main()``. Only the worker processes (execute and lowering) run
the mutant; the campaign's unsharded reference runs in the shardfuzz process with the
unpatched JAX, so a mutant that changes a sharded value shows as a ``differential``,
``metamorphic`` or ``callbacks`` finding. Nothing in ``fuzz/`` is changed.

**Each run** is ``shardfuzz run --seed S --time T --database '' --corpus <repo>/corpus
--report ... --python <wrapper>`` (determinism on unless ``--no-determinism``), started
in a temporary directory (its findings file stays there). The end-of-campaign reduction
may run past T; the run is stopped with SIGTERM (the report is still written) ``--grace``
seconds after T (counted from the workers' start), since only findings first seen by T count.

**Which code runs.** By default (``--snapshot HEAD``) the benchmark runs itself again from
``git archive HEAD`` in a temporary directory (``PYTHONPATH`` set there, so ``fuzz`` is
imported from the snapshot, not the editable install): other people edit the working
tree during an hour-long benchmark, and every run should use one version of shardfuzz,
the mutants and the corpus; ``--snapshot ''`` runs the working tree. ``--jobs N`` is
passed to ``shardfuzz run`` (default: shardfuzz's own default).

**Which findings are the mutant's** (decided here, not by a control campaign: two
campaigns with one seed part ways at the first program whose outcome differs, so the
findings of a control run are not comparable one by one). Every finding of the report
whose oracle can be replayed (all but crash, hang and determinism) is run again, its
reduced ``program`` as reported, in a fresh worker with the mutant and one without: the
finding is *caused* by the mutant when it shows again with the mutant (same oracle and
kind on the same call, ``fuzz.maintain.matches``) and not without. The *time to detect*
is the smallest ``first_seconds`` (seconds into the campaign when the finding was first
seen) of a caused finding of a value oracle (differential, metamorphic, callbacks) with
``first_seconds <= T``; caused internal errors are recorded too but do not count.

**Exposure** (``--exposure N [--hit-rate K]``): N programs drawn by the generator
(``strategies.programs``, Hypothesis' random phase, no JAX run) are type-checked and
searched for each mutant's composition (:data:`EXPOSURE`: a static, necessary condition
such as "a ppermute over a vmap axis with a permutation that is not its own
inverse"); the share of programs that contain it says how often a campaign can meet the
mutant at all. With ``--hit-rate K`` up to K of those programs per mutant are run with and
without the mutant (:func:`hit_rate`): a mutant drawn but not shown is a blind spot of the
oracles (the wrong value does not reach a compared output), one rarely drawn a blind spot
of the generator.

Output: a table on stdout (mutant, kind, detected on k of n seeds, median seconds to
detect, caused findings of other oracles, exposure, shown/tried of the hit rate) and,
with ``--out``, a JSON file written atomically after every run
(``fuzz.util.atomic_write_text``) with each run's findings, their attribution and the
report's feature counts. With ``--out``, runs already in the file (same mutant, seed,
seconds, determinism and jobs) are skipped, so an interrupted benchmark resumes.
``--need K`` (e.g. 2 with the default three seeds) stops a mutant's runs once "detected on
at least K seeds" is settled, so a mutant that two seeds agree on costs two campaigns.

**Measured** (code 2028f74, jax 0.10.2, 2 shared cores, ``--seeds 1 --seconds 180``,
``--jobs`` default 2, determinism on; exposure and hit rate: ``--exposure 2000 --hit-rate
10``): 1 of 13 mutants detected (io_callback_dce_unordered at 14.5 s); 147-319 programs
per campaign. Live exposure per 2000 drawn programs: 0 for six mutants
(ppermute_batch_inverse, ppermute_transpose_forward, all_gather_batch_interleave,
psum_scatter_transpose_axis0, ppermute_lowering_multigroup, all_to_all_batch_interleave),
3-25 for six more, 378 for the DCE mutant; shown by 0-4 of 10 exposed programs (10 of 10
for the DCE mutant), most of the others dying first on a JAX error (pvary assertion,
in_specs mismatch) or computing a value no compared output depends on.

Re-measured (issue 9, 2026-11-30, ``--exposure 2000 --hit-rate 10``, load 7-17 on 2 cores):
code 9f7d366 exposure 0-3 of 2000 for nine mutants (31, 10, 4, 135 for the other four);
code 46e5db6 (collectives prefer axes of size >= 2 and axes a value varies over, known-bug
avoidance capped per name, and a stricter liveness: a nested call's unused results and
unread arguments are dead) 0-4 for nine (15, 3, 11, 72 for the others). Over 600 drawn
programs the collectives over an axis of size >= 2 on a varying operand that a result
uses went 11 -> 22 with the collectives changes alone (code 3039630 against 9f7d366). The
generator's structure keeps most mutants rare: with three changes to
``strategies/programs.py`` and the typing rules (every sink a result or part of the loss,
collectives 3 times their weight where an axis of size >= 2 is in scope, collectives over
a named vmap axis allowed across grad / vjp / jvp / jacobians inside that vmap) exposure
rose to 22, 13, 6, 16, 0, 3, 11, 1, 9 of 2000 for the first nine (seed 0). Time to detect
(``--seeds 1 --seconds 300 --jobs 1``) was not measurable under load 14-18: 37-61 programs
per campaign instead of 300-600, none detected.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

import mutants  # noqa: E402
from fuzz.util import atomic_write_text  # noqa: E402

VALUE_ORACLES = ("differential", "metamorphic", "callbacks")
NOT_REPLAYED = ("crash", "hang", "determinism", "generator", "reference")
SNAPSHOT_ENV = "SHARDFUZZ_SEEDED_SNAPSHOT"  # set in the re-executed benchmark: the commit it runs
STARTUP_ALLOWANCE = 90.0  # seconds: starting two JAX workers on a loaded 2-core machine

BOOT = '''\
"""Run shardfuzz's worker with a seeded mutant of JAX applied (written by benchmarks/seeded.py)."""
import importlib.util
import sys

mutant, args = sys.argv[1], sys.argv[2:]
script = next(a for a in args if not a.startswith("-"))
sys.path.insert(0, {bench!r})
import mutants  # noqa: E402  (standard library, NumPy and JAX only)
del sys.path[0]

spec = importlib.util.spec_from_file_location("shardfuzz_worker", script)
worker = importlib.util.module_from_spec(spec)
sys.argv = [script] + args[args.index(script) + 1:]
spec.loader.exec_module(worker)
original = worker.capabilities


def capabilities(jax):
    mutants.apply(mutant)  # JAX is imported by now; the worker has not run anything yet
    sys.stderr.write("shardfuzz seeded benchmark: mutant %s applied in this worker\\n" % mutant)
    return original(jax)


worker.capabilities = capabilities
worker.main()
'''


def write_wrapper(directory: str, mutant: str, python: str | None = None) -> str:
    """Write the worker wrapper for ``mutant`` into ``directory``; return the path to pass as ``--python``.

    ``python``: the interpreter with JAX (default: this one). Writes ``boot.py`` (once)
    and an executable ``worker-<mutant>.sh``. Raises KeyError for an unknown mutant and
    OSError when the directory is not writable.
    """
    if mutant not in mutants.BY_NAME:
        raise KeyError(f"unknown mutant {mutant!r}; known: {', '.join(mutants.BY_NAME)}")
    python = python or sys.executable
    boot = os.path.join(directory, "boot.py")
    atomic_write_text(boot, BOOT.format(bench=str(BENCH)))
    script = os.path.join(directory, f"worker-{mutant}.sh")
    atomic_write_text(script, "#!/bin/sh\n"
                              f"exec {shlex.quote(python)} -u {shlex.quote(boot)} {shlex.quote(mutant)} \"$@\"\n")
    os.chmod(script, 0o755)
    return script


# ------------------------------------------------------------------ exposure: static conditions per mutant

_DIFF = ("grad", "value_and_grad", "vjp", "jacrev")  # transforms that transpose (jvp, jacfwd do not)
# transforms whose outputs are their function's results, one for one (the others: derivatives)
_POSITIONAL = ("jit", "checkpoint", "vmap", "shard_map", "map", "cond", "fori_loop", "while_loop")
_COLLECTIVES = ("psum", "pmean", "pmax", "pmin", "ppermute", "all_gather", "psum_scatter", "all_to_all", "axis_index", "pvary")


def _not_involution(e: dict) -> bool:
    """Whether a ppermute's ``perm`` differs from its inverse (a full permutation of an axis of size 2
    never does; a partial one such as [[0, 1]] does)."""
    pairs = {tuple(p) for p in e["perm"]}
    return pairs != {(d, s) for s, d in pairs}


def _axis_kind(ctx, name: str) -> str:
    return ctx.axis(name).kind


def _unmentioned_manual(t: dict, ctx_mesh: dict, manual_before: frozenset) -> bool:
    """Whether a shard_map transform leaves a manual axis of size >= 2 out of one of its out_specs."""
    names = t["axis_names"] if t["axis_names"] is not None else [a for a in ctx_mesh if a not in manual_before]
    for spec in t["out_specs"]:
        used = {a for entry in spec if entry for a in entry}
        if any(ctx_mesh[a] >= 2 and a not in used for a in names):
            return True
    return False


def _transposed(stack: list, ctx, name: str) -> bool:
    """Whether a collective over ``name`` under the transforms ``stack`` (outermost first) is transposed.

    A collective over a mesh axis stays a primitive, transposed by any enclosing grad /
    value_and_grad / vjp (inside or outside the shard_map); one over a vmap axis is
    batched away by its vmap, so only a differentiation inside that vmap transposes it.
    """
    if ctx.axis(name).kind == "mesh":
        return any(t["kind"] in _DIFF for t in stack)
    binders = [i for i, t in enumerate(stack) if t["kind"] == "vmap" and t.get("axis_name") == name]
    return bool(binders) and any(t["kind"] in _DIFF for t in stack[binders[-1] + 1:])


def _batching_axes(ctx, stack: list) -> list:
    """The axes of ``ctx`` a vmap binds (batching rules apply), not those of a lax.map (a loop).

    Both are typed as vmap axes (fuzz.typecheck.as_vmap); ``stack`` (the transforms
    around the equation, outermost first) tells them apart: each vmap or map adds one
    axis, in order.
    """
    kinds = [t["kind"] for t in stack if t["kind"] in ("vmap", "map")]
    axes = [a for a in ctx.axes if a.kind == "vmap"]
    return [a for a, k in zip(axes, kinds) if k == "vmap"]


def _eqn_exposures(e: dict, ctx, args: list, stack: list, used: bool, active=None) -> set:
    """Names of the mutants whose composition this equation (in ``ctx``, under the transforms
    ``stack``, outermost first; ``used``: its outputs are used) has. Necessary conditions
    only: see :data:`EXPOSURE`. ``active``: the program's active values
    (:func:`fuzz.features.active_values`; None: not checked): a collective is transposed only
    when its operand is one (2026-12-06@a5cb656: 4 of 6 silent programs with psum_scatter's
    composition scattered a value the derivative never reaches)."""
    op = e["op"]

    def transposed(name: str) -> bool:
        return _transposed(stack, ctx, name) and (active is None or (bool(e["args"]) and e["args"][0] in active))

    if op == "io_callback":
        out = set()
        vmap_axes = {a.name for a in _batching_axes(ctx, stack) if a.size >= 2}
        if e["returns"] and used and args[0].vma & vmap_axes:
            out.add("io_callback_batch_reversed")
        if not e["ordered"] and not used and ctx.jit:  # no result, or one nobody uses: DCE removes it
            out.add("io_callback_dce_unordered")
        return out
    if not used:
        return set()
    out = set()
    diff = any(t["kind"] in _DIFF for t in stack)
    names = (e.get("axes") or []) if op in _COLLECTIVES else []
    sizes = {n: ctx.axis(n).size for n in names}
    varies = bool(names) and names[0] in args[0].vma  # the operand differs along the (first) axis

    def batch(n: str) -> bool:
        """``n`` is a vmap axis of two or more examples (over one, a collective exchanges nothing:
        the 2026-12-06@23a0f5a hit rate found all_to_alls over size-1 vmaps counted as exposed)."""
        return _axis_kind(ctx, n) == "vmap" and sizes[n] >= 2

    if op == "ppermute":  # (over one axis or several: the linear index over them, first name major)
        size = math.prod(sizes.values())
        varies = bool(args[0].vma & set(names))  # (along any of its axes)
        kinds = {_axis_kind(ctx, m) for m in names}
        if _not_involution(e):
            if kinds == {"vmap"} and len(names) == 1 and varies and len(e["perm"]) == size:  # (JAX's batcher asserts a full one)
                out.add("ppermute_batch_inverse")
            elif kinds == {"mesh"} and varies and math.prod(ctx.mesh.values()) // size > 1:
                out.add("ppermute_lowering_multigroup")
            if any(transposed(m) for m in names):
                out.add("ppermute_transpose_forward")
    elif op == "all_gather":
        n = names[0]
        if e["tiled"] and batch(n) and varies and args[0].shape[e["axis"]] > 1:
            out.add("all_gather_batch_interleave")
        if not e["tiled"] and sizes[n] >= 2 and transposed(n):
            out.add("all_gather_transpose_mean")
    elif op == "psum_scatter":
        n, d = names[0], e["axis"]
        if sizes[n] >= 2 and d >= 1 and math.prod(args[0].shape[:d]) > 1 and transposed(n):
            out.add("psum_scatter_transpose_axis0")
    elif op == "all_to_all":
        n = names[0]
        if (batch(n) and varies and e["split_axis"] == e["concat_axis"]
                and args[0].shape[e["split_axis"]] // sizes[n] > 1):
            out.add("all_to_all_batch_interleave")
    elif op in ("psum", "pmean"):
        mesh_names = [n for n in names if _axis_kind(ctx, n) == "mesh"]
        if len(mesh_names) >= 2 and sizes[mesh_names[-1]] >= 2:
            out.add("psum_lowering_two_axes")
        if len(names) >= 2 and any(batch(n) and n not in args[0].vma for n in names):
            out.add("psum_batch_unbatched_multi")
    if diff and op in ("add", "sub", "mul", "maximum", "matmul") and len(args) == 2:
        checked = {a.name for a in ctx.axes if a.kind == "mesh" and a.check_vma and a.size >= 2}
        if (args[0].vma ^ args[1].vma) & checked:  # an implicit pvary of one operand
            out.add("pvary_transpose_mean")
    if diff and op == "pvary" and any(ctx.axis(n).size >= 2 for n in names):
        out.add("pvary_transpose_mean")  # the explicit cast (fuzz/ops/collectives.py Pvary)
    if (diff and op in ("all_gather", "ppermute", "psum_scatter", "all_to_all", "psum", "pmean")
            and any(ctx.axis(n).kind == "mesh" and ctx.axis(n).check_vma and ctx.axis(n).size >= 2
                    and n not in args[0].vma for n in names)):
        out.add("pvary_transpose_mean")  # the collective pvary-s its operand first
    return out


def live_equations(program: dict) -> dict:
    """{id(eqn): whether its outputs are used} for the equations that matter (the rest is dead code).

    Backward from each called function's results: an equation matters when one of its
    outputs is used (it reaches a call's outputs or an io_callback's argument), or when it
    is (or a nested call contains) an io_callback, whose effect counts even when its
    result is unused; a nested call makes used the results of its function whose outputs
    are used (all of them when a derivative is in its chain, whose outputs mix them), and
    the variables its part that matters captures from enclosing scopes. (Under grad the
    loss's inputs are used by the same rule.)
    """
    live: dict = {}

    def effects(fn: dict) -> bool:
        return any(e["op"] == "io_callback" or (e["op"] == "call" and effects(e["fn"])) for e in fn["eqns"])

    def walk(fn: dict, results_used: set) -> set:
        """The variables of ``fn``'s body used, given its results used: its parameters and captures."""
        used = set(results_used)
        defined = {o for e in fn["eqns"] for o in e["outs"]}
        for e in reversed(fn["eqns"]):
            outs_used = any(o in used for o in e["outs"])
            if not (outs_used or e["op"] == "io_callback" or (e["op"] == "call" and effects(e["fn"]))):
                continue
            live[id(e)] = outs_used
            if e["op"] != "call":
                used.update(e["args"])
                continue
            inner = e["fn"]
            if all(t["kind"] in _POSITIONAL for t in e["transforms"]):
                mine = {r for r, o in zip(inner["results"], e["outs"]) if o in used}
            else:
                mine = set(inner["results"]) if outs_used else set()
            got = walk(inner, mine)
            used.update(a for a, p in zip(e["args"], inner["params"]) if p in got)  # the arguments it reads
            used.update(v for v in got if v not in inner["params"])  # its captures
        return {v for v in used if v not in defined}

    for call in program["calls"]:
        fn = program["functions"][call["function"]]
        walk(fn, set(fn["results"]))
    return live


def exposures(program: dict, live_only: bool = True, live: dict | None = None) -> set:
    """Names of the mutants whose composition (:data:`EXPOSURE`) ``program`` contains (a static check).

    ``live_only``: count only equations (and nested shard_maps) whose values are used
    (:func:`live_equations`, or ``live`` when the caller has it already); False counts dead code too.
    """
    from fuzz import typecheck as T
    from fuzz.features import active_values

    stacks: dict = {}
    found: set = set()
    active = active_values(program)
    if not live_only:
        live = None
    elif live is None:
        live = live_equations(program)

    def walk_chain(transforms: list, fn: dict, stack: list, manual: frozenset, mesh: dict, used: bool) -> None:
        inner = list(stack)
        for t in transforms:
            if (used and t["kind"] == "shard_map" and not t["check_vma"]
                    and any(u["kind"] in _DIFF for u in inner) and _unmentioned_manual(t, mesh, manual)):
                found.add("shard_map_transpose_nodiv")
            if t["kind"] == "shard_map":
                manual = manual | frozenset(t["axis_names"] if t["axis_names"] is not None
                                            else [a for a in mesh if a not in manual])
            inner.append(t)
        for e in fn["eqns"]:
            stacks[id(e)] = inner
            if e["op"] == "call":
                used_here = used and (live is None or live.get(id(e), False))
                walk_chain(e["transforms"], e["fn"], inner, manual, mesh, used_here)

    def on_eqn(e, ctx, args) -> None:
        if live is None:  # dead code counts: every value is taken as used, a callback's result when it has one
            used = bool(e["outs"]) if e["op"] == "io_callback" else True
            found.update(_eqn_exposures(e, ctx, args, stacks.get(id(e), []), used, active))
        elif id(e) in live:
            found.update(_eqn_exposures(e, ctx, args, stacks.get(id(e), []), live[id(e)], active))

    mesh = dict(zip(program["mesh"]["axis_names"], program["mesh"]["axis_sizes"]))
    for call in program["calls"]:
        walk_chain(call["transforms"], program["functions"][call["function"]], [], frozenset(), mesh, True)
    T.check_program(program, on_eqn=on_eqn)
    return found


EXPOSURE = {m.name: m.composition for m in mutants.MUTANTS}


def program_shape(program: dict) -> str:
    """A program's mesh and its calls' transform kinds, as a string: two draws with the same
    shape are counted as near-duplicates by :func:`measure_exposure`."""
    return json.dumps([program["mesh"], [[t["kind"] for t in c["transforms"]] for c in program["calls"]]],
                      sort_keys=True)


def measure_exposure(n: int, seed: int = 0, keep: int = 0) -> dict:
    """Draw ``n`` programs from the generator (no JAX run) and count, per mutant, those with its composition.

    Returns {"programs": n, "counts": {mutant: programs with the composition in live code},
    "counts_with_dead_code": {mutant: the same, dead code included}, "live": {"equations",
    "collectives": [live, all] over the drawn programs, nested bodies included, by
    :func:`live_equations`}} and, with ``keep`` >
    0, "kept": {mutant: [the first ``keep`` programs with the composition live, each with
    another mesh or other call chains than the ones kept before]} (Hypothesis' own generate
    phase, before strategies/fresh.py, drew near-duplicates: the five programs kept for
    ppermute_lowering_multigroup in 2026-12-01@e7efef9 were one program), and "distinct": {mutant: programs counted that
    differ so} (a lower bound: :func:`program_shape` ignores bodies and nested calls).
    Draws as a campaign does (``strategies.swarm.swarm_programs``, nothing to avoid,
    ``fuzz.campaign.draw_settings``: fresh draws), with Hypothesis' generate phase only,
    seeded with ``seed``.
    """
    from hypothesis import Phase, given, settings
    from hypothesis import seed as hseed

    from fuzz.campaign import draw_settings
    from strategies.swarm import swarm_programs

    counts = {m.name: 0 for m in mutants.MUTANTS}
    counts_any = dict(counts)
    kept: dict = {m.name: [] for m in mutants.MUTANTS}
    shapes: dict = {m.name: set() for m in mutants.MUTANTS}  # mesh and call chains of the programs counted
    drawn = [0]
    live = {"equations": [0, 0], "collectives": [0, 0]}

    def tally(fn: dict, alive: dict) -> None:
        for e in fn["eqns"]:
            for key in ("equations", "collectives") if e["op"] in _COLLECTIVES else ("equations",):
                live[key][0] += bool(alive.get(id(e)))
                live[key][1] += 1
            if e["op"] == "call":
                tally(e["fn"], alive)

    @hseed(seed)
    @settings(draw_settings(max_examples=n), phases=[Phase.generate])  # as a campaign draws, generation only
    @given(swarm_programs())  # the campaign's strategy, no known bug to avoid
    def draw(p):
        drawn[0] += 1
        alive = live_equations(p)
        for f in p["functions"].values():
            tally(f, alive)
        for name in exposures(p, live_only=False):
            counts_any[name] += 1
        key = program_shape(p)
        for name in exposures(p, live=alive):
            counts[name] += 1
            if key in shapes[name]:
                continue
            shapes[name].add(key)
            if len(kept[name]) < keep:
                kept[name].append(json.loads(json.dumps(p)))

    draw()
    out = {"programs": drawn[0], "counts": counts, "counts_with_dead_code": counts_any,
           "distinct": {name: len(v) for name, v in shapes.items()}, "live": live}
    if keep:
        out["kept"] = kept
    return out


def merge_exposure(parts: list) -> dict:
    """The exposures of several :func:`measure_exposure` runs (other seeds) as one: programs,
    counts, counts_with_dead_code, distinct and live summed; "kept" programs concatenated.

    Hypothesis' own generate phase drew correlated programs (strategies/fresh.py), so one
    seed's counts swung by about 30% between two versions of the generator that differed only
    in unrelated draws; fresh draws swing less, but sum several seeds before comparing two
    versions all the same.
    """
    out: dict = {"programs": 0, "counts": {}, "counts_with_dead_code": {}, "distinct": {},
                 "live": {"equations": [0, 0], "collectives": [0, 0]}}
    for part in parts:
        out["programs"] += part["programs"]
        for key in ("counts", "counts_with_dead_code", "distinct"):
            for name, v in part[key].items():
                out[key][name] = out[key].get(name, 0) + v
        for key in ("equations", "collectives"):
            out["live"][key] = [a + b for a, b in zip(out["live"][key], part["live"][key])]
        for name, programs in part.get("kept", {}).items():
            out.setdefault("kept", {}).setdefault(name, []).extend(programs)
    return out


def hit_rate(kept: dict, names: list, directory: str) -> dict:
    """Run programs that have a mutant's composition with and without the mutant: how many show it?

    ``kept``: {mutant: [programs]} (from :func:`measure_exposure`). A program *shows* the
    mutant when a value oracle (differential, metamorphic, callbacks) flags a call with
    the mutant and not without it (same oracle, kind and call); one that does not is
    *raised* when JAX raised (or died) on one of its calls without the mutant (a known or
    new JAX bug stood in the way), else *silent* (the wrong value did not reach a compared
    output, or did not change it). Returns {mutant: {"tried", "shown", "raised",
    "silent", "programs": [{"outcome", "mutant": [signatures], "plain": [signatures],
    "program": the program}]}} (the program, to see why a mutant stayed silent): whether a
    silent mutant is a blind spot of the generator (its composition is rarely drawn) or
    of the oracles (drawn, but not seen).
    """
    from fuzz.runner import Runner

    out = {}
    plain = Runner(python=None, determinism=False)
    try:
        for name in names:
            progs = kept.get(name, [])
            row = {"tried": len(progs), "shown": 0, "raised": 0, "silent": 0, "programs": []}
            if progs:
                r = Runner(python=write_wrapper(directory, name), determinism=False)
                try:
                    for p in progs:
                        got_m, _ = r.run(p)
                        got_p, _ = plain.run(p)
                        base = {(f.oracle, f.kind, f.call) for f in got_p}
                        new = [f for f in got_m if f.oracle in VALUE_ORACLES and (f.oracle, f.kind, f.call) not in base]
                        raised = any(f.oracle in ("internal-error", "crash", "hang") for f in got_p)
                        outcome = "shown" if new else "raised" if raised else "silent"
                        row[outcome] += 1
                        row["programs"].append({"outcome": outcome, "mutant": [f.signature[:120] for f in got_m],
                                                "plain": [f.signature[:120] for f in got_p], "program": p})
                finally:
                    r.close()
            out[name] = row
            print(json.dumps({"hit_rate": name, **{k: row[k] for k in ("tried", "shown", "raised", "silent")}}),
                  flush=True)
    finally:
        plain.close()
    return out


# ------------------------------------------------------------------ campaigns

def run_campaign(wrapper: str, seed: int, seconds: float, workdir: str, determinism: bool = True,
                 grace: float = 10.0, jobs: int | None = None, stop_when=None) -> dict:
    """One ``shardfuzz run`` with the worker wrapper; returns {"report": dict | None, "exit_code", "wall",
    "stderr", "stopped_early"}.

    The campaign's clock starts when shardfuzz announces its workers ("findings go to"
    on stderr; at most :data:`STARTUP_ALLOWANCE` seconds after the process start). It is
    stopped with SIGTERM ``grace`` seconds after ``seconds`` on that clock (the report is
    still written; only the end-of-campaign reduction is cut short), and with SIGKILL
    120 s later (then ``report`` is None: see the findings file in ``workdir``). With
    ``stop_when`` (a callable of the findings file's path, polled every
    :data:`POLL_SECONDS`), it is stopped the same way as soon as that returns True.
    """
    report_path = os.path.join(workdir, "report.json")
    cmd = [sys.executable, "-m", "fuzz", "run", "--seed", str(seed), "--time", str(seconds), "--database", "",
           "--corpus", str(ROOT / "corpus"), "--report", report_path, "--python", wrapper]
    if not determinism:
        cmd.append("--no-determinism")
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    log_path = os.path.join(workdir, "shardfuzz.log")
    t0 = time.monotonic()
    started = None
    stopped_early = False
    polled = t0
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if started is None:
                    with open(log_path, "rb") as f:
                        if b"findings go to" in f.read():
                            started = now
                begin = started if started is not None else t0 + STARTUP_ALLOWANCE
                early = False
                if stop_when is not None and now > polled + POLL_SECONDS:
                    polled = now
                    early = stopped_early = stop_when(os.path.join(workdir, ".shardfuzz", "findings.jsonl"))
                if early or now > begin + seconds + grace:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(timeout=120)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
                    break
                time.sleep(1.0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    wall = time.monotonic() - t0
    with open(log_path, "rb") as f:
        tail = f.read()[-3000:].decode(errors="replace")
    report = None
    if os.path.exists(report_path):
        with open(report_path) as f:
            report = json.load(f)
    return {"report": report, "exit_code": proc.returncode, "wall": wall, "stderr": tail,
            "stopped_early": stopped_early}


POLL_SECONDS = 10.0  # how often a campaign run with --stop-at-detection has its new findings replayed


class LiveDetection:
    """``stop_when`` for :func:`run_campaign`: whether a running campaign has found the mutant.

    Reads the campaign's findings file (:func:`fuzz.findings.read`) and replays each value
    finding first seen by ``seconds`` (once per signature and call) with and without the mutant,
    as :func:`attribute` does, on two workers kept open for the run; True once one is the
    mutant's. Stopping there changes no result: the detection time is that finding's
    ``first_seconds``, and the report's findings are attributed afresh after the run.
    """

    def __init__(self, wrapper: str, seconds: float):
        self.wrapper, self.seconds = wrapper, seconds
        self.checked = set()
        self.runners = None

    def __call__(self, path: str) -> bool:
        from fuzz import findings as findings_file

        try:
            found = findings_file.read(path)
        except OSError:
            return False
        new = [f for f in found if f.get("oracle") in VALUE_ORACLES and not f.get("history")
               and (f.get("signature"), f.get("call")) not in self.checked
               and f.get("first_seconds") is not None and f["first_seconds"] <= self.seconds]
        if not new:
            return False
        if self.runners is None:
            self.runners = replay_runners(self.wrapper)
        self.checked.update((f.get("signature"), f.get("call")) for f in new)
        return any(a["caused"] for a in attribute(new, self.wrapper, self.seconds, runners=self.runners))

    def close(self) -> None:
        for r in (self.runners or {}).values():
            r.close()


def replay_runners(wrapper: str) -> dict:
    """Two workers to replay findings on: {"mutant": with the wrapper's mutant, "plain": without}.
    Raises fuzz.execute.WorkerError when one does not start."""
    from fuzz.runner import Runner

    return {"mutant": Runner(python=wrapper, determinism=False), "plain": Runner(python=None, determinism=False)}


def attribute(findings: list, wrapper: str, seconds: float | None = None, runners: dict | None = None) -> list:
    """For each finding of a report: was it caused by the mutant? (see the module docstring)

    Returns one dict per finding: ``signature``, ``oracle``, ``kind``, ``call``,
    ``first_seconds``, ``message`` and ``caused``: True / False, or None when not replayed
    (crash, hang, determinism, or first seen after ``seconds``), with ``replay``: what the
    two replays showed; and ``program`` when the finding shows without the mutant (a bug of
    the unpatched JAX, or a false positive: kept for triage, since the campaign's directory
    is temporary). ``runners``: {"mutant": Runner, "plain": Runner} to replay on (left open),
    else two are started and closed here.
    """
    from fuzz.execute import WorkerError
    from fuzz.maintain import matches

    out = []
    todo = [f for f in findings if f["oracle"] not in NOT_REPLAYED and not f.get("history")
            and (seconds is None or f["first_seconds"] <= seconds)]
    why = ""
    own = runners is None
    runners = runners or {}
    try:
        if todo and own:
            try:
                runners = replay_runners(wrapper)
            except WorkerError as e:
                runners = {}
                why = f"replay workers did not start: {e}"
        for f in findings:
            row = {k: f.get(k) for k in ("signature", "oracle", "kind", "call", "first_seconds", "look_past")}
            row["message"] = (f.get("message") or "")[:200]
            row["caused"], row["replay"] = None, "not replayed (oracle, history, or seen after the campaign's time)"
            if f in todo and runners:
                shows = {}
                for which, r in runners.items():
                    found, _ = r.run(f["program"])
                    shows[which] = any(matches(g, f) and g.call == f["call"] and not g.history for g in found)
                row["caused"] = shows["mutant"] and not shows["plain"]
                if shows["plain"]:
                    row["program"] = f["program"]
                row["replay"] = (f"with the mutant: {'shows' if shows['mutant'] else 'does not show'}; "
                                 f"without: {'shows' if shows['plain'] else 'does not show'}")
            elif f in todo:
                row["replay"] = why
            out.append(row)
    finally:
        for r in runners.values() if own else ():
            r.close()
    return out


def detection(attributed: list, seconds: float) -> dict | None:
    """The first caused value finding seen by ``seconds``, or None."""
    hits = [a for a in attributed if a["caused"] and a["oracle"] in VALUE_ORACLES
            and a["first_seconds"] is not None and a["first_seconds"] <= seconds]
    return min(hits, key=lambda a: a["first_seconds"]) if hits else None


RELEVANT_FEATURES = ("vmap", "vmap_axis_name", "shard_map", "check_vma_off", "grad", "value_and_grad", "vjp", "jvp",
                     "jit", "psum", "pmean", "ppermute", "all_gather", "psum_scatter", "all_to_all",
                     "io_callback_unordered", "io_callback_result", "capture", "wsum")


def one_run(mutant: str, seed: int, seconds: float, determinism: bool, grace: float = 10.0,
            jobs: int | None = None, stop_at_detection: bool = False) -> dict:
    """Run the campaign for one mutant and seed, attribute its findings; one result row.

    A run whose shardfuzz exits 2 (bad input or an internal error) is a row with
    ``error`` (and the log's tail), retried when the benchmark resumes; one killed before
    it wrote a report is judged on its findings file (``.shardfuzz/findings.jsonl`` in
    its directory, written as findings are recorded) and says so in ``report``. With
    ``stop_at_detection`` the campaign stops once the mutant is found (:class:`LiveDetection`):
    the same detection time, the rest of the run's time saved.
    """
    with tempfile.TemporaryDirectory(prefix=f"seeded-{mutant}-") as d:
        wrapper = write_wrapper(d, mutant)
        live = LiveDetection(wrapper, seconds) if stop_at_detection else None
        try:
            res = run_campaign(wrapper, seed, seconds, d, determinism=determinism, grace=grace, jobs=jobs,
                               stop_when=live)
        finally:
            if live is not None:
                live.close()
        rep = res["report"]
        row = {"mutant": mutant, "seed": seed, "seconds": seconds, "determinism": determinism, "jobs": jobs,
               "code": os.environ.get(SNAPSHOT_ENV) or "working tree",
               "exit_code": res["exit_code"], "wall_seconds": round(res["wall"], 1),
               "stopped_at_detection": res["stopped_early"]}
        if rep is None:
            # killed before it wrote a report: what it found is in the findings file (fuzz.findings)
            from fuzz import findings as findings_file

            path = os.path.join(d, ".shardfuzz", "findings.jsonl")
            found = findings_file.read(path) if os.path.exists(path) else []
            rep = {"findings": found, "seconds": None, "programs": None, "generated": None,
                   "generated_rejected": None, "features": {}, "interrupted": "SIGKILL (no report)"}
            row["report"] = "none: shardfuzz did not end after SIGTERM; findings read from its findings file"
            row["log_tail"] = res["stderr"]
        elif res["exit_code"] == 2:
            row.update(error="shardfuzz exited 2", log_tail=res["stderr"])
            return row
        attributed = attribute(rep["findings"], wrapper, seconds)
    hit = detection(attributed, seconds)
    row.update({
        "seconds_to_detect": hit["first_seconds"] if hit else None,
        "detected_by": hit,
        "campaign_seconds": rep["seconds"], "programs": rep["programs"], "generated": rep["generated"],
        "generated_rejected": rep["generated_rejected"], "known_seconds": rep.get("known_seconds"),
        "interrupted": rep.get("interrupted"),
        "features": {k: rep["features"].get(k, 0) for k in RELEVANT_FEATURES},
        "findings": attributed,
    })
    return row


def summary(rows: list, exposure: dict | None, hits: dict | None = None) -> list:
    """One line per mutant: detected k of n, median seconds to detect (of the detecting seeds),
    caused non-value findings, exposure (drawn programs with the composition) and hit rate."""
    out = []
    counts = (exposure or {}).get("counts", {})
    n_prog = (exposure or {}).get("programs")
    for m in mutants.MUTANTS:
        mine = [r for r in rows if r["mutant"] == m.name and "error" not in r]
        times = [r["seconds_to_detect"] for r in mine if r.get("seconds_to_detect") is not None]
        other = sum(1 for r in mine for f in r.get("findings", []) if f["caused"] and f["oracle"] not in VALUE_ORACLES)
        out.append({"mutant": m.name, "kind": m.kind, "detected": len(times), "runs": len(mine),
                    "median_seconds": statistics.median(times) if times else None,
                    "caused_other_findings": other,
                    "exposure": f"{counts[m.name]}/{n_prog}" if n_prog and m.name in counts else None,
                    "distinct": (exposure or {}).get("distinct", {}).get(m.name),
                    "shown": (f"{hits[m.name]['shown']}/{hits[m.name]['tried']}" if hits and m.name in hits
                              else None)})
    return out


def print_table(lines: list) -> None:
    head = (f"{'mutant':30s} {'kind':9s} {'detected':>9s} {'median s':>9s} {'other':>6s} {'exposure':>10s} "
            f"{'shown':>6s}")
    print(head)
    print("-" * len(head))
    for s in lines:
        med = f"{s['median_seconds']:.0f}" if s["median_seconds"] is not None else "-"
        print(f"{s['mutant']:30s} {s['kind']:9s} {s['detected']:>4d} of {s['runs']:<2d} {med:>9s} "
              f"{s['caused_other_findings']:>6d} {s['exposure'] or '-':>10s} {s['shown'] or '-':>6s}")


def extract(sha: str, dest: str) -> bool:
    """The files of commit ``sha`` of this repository in directory ``dest`` (``git archive``); False on failure."""
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", sha], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    untar = subprocess.run(["tar", "-x", "-C", dest], stdin=archive.stdout, stderr=subprocess.DEVNULL)
    archive.stdout.close()
    return archive.wait() == 0 and untar.returncode == 0


def rerun_from_snapshot(rev: str, out: str | None) -> int:
    """Run this benchmark again from ``git archive <rev>`` of the repository in a temporary directory.

    Others may edit (and break) the working tree during an hour-long benchmark; a
    snapshot keeps one version of shardfuzz, the mutants and the corpus for every run.
    Returns the re-run's exit status; exits 2 when ``rev`` is not a commit.
    """
    got = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                         capture_output=True, text=True)
    if got.returncode != 0:
        print(f"seeded.py: --snapshot {rev!r} is not a commit of {ROOT}; give one, or '' for the working tree",
              file=sys.stderr)
        return 2
    sha = got.stdout.strip()
    code = tempfile.mkdtemp(prefix="seeded-code-")
    try:
        if not extract(sha, code):
            print(f"seeded.py: git archive {sha} failed", file=sys.stderr)
            return 2
        script = os.path.join(code, "benchmarks", "seeded.py")
        if not os.path.exists(script):
            print(f"seeded.py: commit {sha[:12]} has no benchmarks/seeded.py; choose a later --snapshot",
                  file=sys.stderr)
            return 2
        extra = ["--out", os.path.abspath(out)] if out else []
        print(f"seeded.py: running from a snapshot of {sha[:12]} in {code}", file=sys.stderr, flush=True)
        return subprocess.call([sys.executable, script] + sys.argv[1:] + extra,
                               env={**os.environ, "PYTHONPATH": code, SNAPSHOT_ENV: sha})
    finally:
        shutil.rmtree(code, ignore_errors=True)


def _ints(text: str) -> list:
    try:
        return [int(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of integers such as 1,2,3") from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutants", default=None, help="comma-separated mutant names (default: all)")
    ap.add_argument("--seeds", type=_ints, default=None,
                    help="Hypothesis seeds, e.g. 1,2,3 (default 1,2,3; none with --exposure unless given)")
    ap.add_argument("--seconds", type=float, default=300.0, help="campaign length (shardfuzz run --time)")
    ap.add_argument("--out", default=None, help="JSON results file (written after every run; resumes)")
    ap.add_argument("--no-determinism", action="store_true", help="pass --no-determinism to shardfuzz run")
    ap.add_argument("--grace", type=float, default=10.0,
                    help="seconds after --seconds (from the workers' start) before the campaign is stopped")
    ap.add_argument("--exposure", type=int, default=0, metavar="N",
                    help="also draw N programs and count each mutant's composition (no campaign if --seeds '')")
    ap.add_argument("--exposure-seeds", type=_ints, default=[0], metavar="S,S",
                    help="with --exposure: draw N programs with each of these Hypothesis seeds and sum the counts "
                         "(default 0)")
    ap.add_argument("--hit-rate", type=int, default=0, metavar="K",
                    help="with --exposure: run up to K drawn programs with each mutant's composition, with and "
                         "without the mutant, and count those that show it")
    ap.add_argument("--jobs", type=int, default=None, help="pass --jobs N to shardfuzz run (default: its default)")
    ap.add_argument("--snapshot", default="HEAD", metavar="REV",
                    help="run shardfuzz from `git archive REV` of this repository, a fixed version while others "
                         "edit the tree (default: HEAD); '' for the working tree")
    ap.add_argument("--need", type=int, default=None, metavar="K",
                    help="per mutant, stop once 'detected on at least K seeds' is settled (K detections, or too "
                         "many misses for K); default: run every seed")
    ap.add_argument("--stop-at-detection", action="store_true",
                    help="stop each campaign once a finding replays as the mutant's (the same detection times, "
                         "less wall time; a run's programs then count up to the stop)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = ap.parse_args()
    if args.list:
        for m in mutants.MUTANTS:
            print(f"{m.name:30s} {m.kind:9s} {m.breaks}\n{'':41s}wrong under: {m.composition}")
        return
    names = [n.strip() for n in args.mutants.split(",") if n.strip()] if args.mutants else list(mutants.BY_NAME)
    unknown = [n for n in names if n not in mutants.BY_NAME]
    if unknown:
        print(f"seeded.py: unknown mutant(s) {', '.join(unknown)}; see --list", file=sys.stderr)
        sys.exit(2)
    if not math.isfinite(args.seconds) or args.seconds < 1:
        print(f"seeded.py: --seconds {args.seconds} must be a finite number >= 1", file=sys.stderr)
        sys.exit(2)
    if args.jobs is not None and args.jobs < 1:
        print(f"seeded.py: --jobs {args.jobs} must be >= 1", file=sys.stderr)
        sys.exit(2)
    if args.snapshot and not os.environ.get(SNAPSHOT_ENV):
        sys.exit(rerun_from_snapshot(args.snapshot, args.out))
    if args.seeds is None:  # --exposure alone measures the exposure only (no campaign runs)
        args.seeds = [] if args.exposure else [1, 2, 3]
    determinism = not args.no_determinism
    data = {"format": "shardfuzz-seeded-benchmark", "runs": [], "exposure": None}
    if args.out and os.path.exists(args.out):
        try:
            with open(args.out) as f:
                data = json.load(f)
            assert isinstance(data.get("runs"), list)
        except (OSError, ValueError, AssertionError):
            print(f"seeded.py: {args.out} is not a results file of this benchmark; choose another --out",
                  file=sys.stderr)
            sys.exit(2)

    def save() -> None:
        data["summary"] = summary(data["runs"], data.get("exposure"), data.get("hit_rate"))
        if args.out:
            atomic_write_text(args.out, json.dumps(data, indent=1) + "\n")

    if args.exposure:
        t0 = time.monotonic()
        exp = merge_exposure([measure_exposure(args.exposure, seed=s, keep=args.hit_rate)
                              for s in args.exposure_seeds or [0]])
        kept = {m: v[:args.hit_rate] for m, v in exp.pop("kept", {}).items()}  # up to K in all, whatever the seeds
        data["exposure"] = {**exp, "seconds": round(time.monotonic() - t0, 1)}
        save()
        print(json.dumps({"exposure": data["exposure"]}), flush=True)
        if args.hit_rate:
            with tempfile.TemporaryDirectory(prefix="seeded-hit-rate-") as d:
                data["hit_rate"] = hit_rate(kept, names, d)
            save()
    def key(r: dict) -> tuple:
        return r["mutant"], r["seed"], r["seconds"], r["determinism"], r.get("jobs")

    done = {key(r) for r in data["runs"] if "error" not in r}
    for name in names:
        for i, s in enumerate(args.seeds):
            k = (name, s, args.seconds, determinism, args.jobs)
            if args.need is not None:
                prior = [r for r in data["runs"] if key(r)[0] == name and key(r)[2:] == k[2:]
                         and r["seed"] in args.seeds[:i] and "error" not in r]
                hits = sum(r.get("seconds_to_detect") is not None for r in prior)
                if hits >= args.need or hits + len(args.seeds) - i < args.need:
                    break  # settled: the seeds left are not run
            if k in done:
                continue
            row = one_run(name, s, args.seconds, determinism, args.grace, args.jobs, args.stop_at_detection)
            data["runs"] = [r for r in data["runs"] if key(r) != k] + [row]
            save()
            print(json.dumps({k: row.get(k) for k in ("mutant", "seed", "seconds_to_detect", "programs",
                                                      "generated", "wall_seconds", "error")}), flush=True)
    save()
    rows = [r for r in data["runs"] if r["mutant"] in names and r["seconds"] == args.seconds
            and r["determinism"] == determinism and r.get("jobs") == args.jobs]
    print_table([s for s in summary(rows, data.get("exposure"), data.get("hit_rate")) if s["mutant"] in names])


if __name__ == "__main__":
    main()
