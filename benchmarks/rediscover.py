"""How long a campaign from an empty database takes to rediscover a seed bug's kind.

    python benchmarks/rediscover.py A --jax-version 0.4.38 --seeds 1 2 3
    python benchmarks/rediscover.py B --jax-version 0.4.28 --seeds 1 2 3
    python benchmarks/rediscover.py C --seeds 1 2 3          # newest JAX (this environment)
    python benchmarks/rediscover.py jax-18434 --seeds 1 2 3  # a public report, on its default release

Each run is a default campaign (determinism on, no database, ``--jobs`` campaigns at once
with the seeds ``shardfuzz run --jobs`` gives them: fuzz.parallel.job_seed) that stops at
the first finding of the bug's *kind* in any job (the seed bugs are described below), judged on the
finding and the program that showed it, never on hand-written programs:

- A: the worker aborts (SIGABRT with a ``Check failed`` line) on a program with an
  ordered io_callback;
- B: a lowering differs across processes with different PYTHONHASHSEED, on a program
  that takes a reverse-mode derivative (grad, value_and_grad, vjp, jacrev) through a shard_map;
- C: JAX raises on a valid program combining vmap with spmd_axis_name and shard_map,
  with one of the messages of seed C's family.
- public reports (issue 8's table; described in our words, matched by kind and features,
  never by program):
  - jax-21403 (0.4.26): a wrong value (differential) from calls with cumsum, cumprod or
    cummax under jit (see CUMULATIVE below);
  - jax-18434 (0.10.2): a wrong value from calls with `.at[].set` or `.at[].add` under jit
    (see AT_UPDATES);
  - xla-49122 (0.10.2): a wrong value from `lax.dynamic_slice` (per-shard clamping of the start)
    in calls that capture no input (see KINDS);
  - jax-29832 (0.6.1): JAX raises the report's "unexpected JAX type ... vjp function" on a
    valid program with jacrev inside a shard_map;
  - jax-34211 (0.8.1): JAX raises at the report's site (``op_shardings.get_num_ways_dim_sharded``)
    in a call with a custom_vjp under grad / vjp of a shard_map on an Explicit mesh;
  - jax-25699 (0.4.38): the worker aborts on XLA's "IsManual" check in a program with an
    axis_index over a size-1 mesh axis in a partial-manual shard_map.
  Internal errors are judged on the failing call's features (:func:`call_features`).
  ``--jax-version`` defaults to the release named here (``default`` for the seeds: the
  environment's JAX, except A: 0.4.38 and B: 0.4.28).

The three seed bugs are real JAX bugs that shardfuzz must find from its general grammar,
starting from an empty database (described here in our words; neither the generator nor the
corpus encodes them):

- A, ordered io_callback under shard_map: a function of a 2-D and a 1-D array calls
  ``io_callback(..., ordered=True)`` and returns ``x + y[..., None]``; run as
  ``jit(shard_map(f))`` on a 4-device mesh (first input split along its last dim) and, in the
  same process, as plain ``jit(f)``, the second call aborts (PJRT ``Check failed`` about a
  device buffer's layout: the token that orders effects is handed over in the wrong form).
  On 0.4.26-0.4.38 the ``jit(shard_map(f))`` call alone aborts earlier (``Check failed`` in
  XLA's sharding propagation: the token not counted as a parameter); both fixed in 0.5.0; not
  with ``ordered=False``. Some bugs need two calls in one process.
- B, grad of shard_map lowers differently in every process: ``jit(grad(f))`` of
  ``f(x) = sum(shard_map(g)(x))`` over a 4-axis mesh (all devices on the first axis), in_specs
  splitting x over the first two axes, body ``psum(sin(block), (first two axes))``. The
  residual's sharding lists the mesh axis names in Python's set order, so the StableHLO
  changes with ``PYTHONHASHSEED`` and the persistent compilation cache misses (0.4.27 and
  0.4.28; fixed in 0.4.29, names sorted).
- C, vmap with spmd_axis_name over a shard_map over a capturing vmap: an outer
  ``vmap(..., spmd_axis_name='x')`` on a 2x4 mesh ('x', 'y'); inside, a ``shard_map`` over 'y'
  applies ``vmap(lambda s: v + s)`` whose body captures ``v``, which the outer vmap batches.
  JAX raises on this valid program, worded by release: "too many values to unpack"
  (0.4.26-0.4.35), a StableHLO verifier error about a dimension size (0.4.36 on, checks off),
  "should be of type `Manual`" (0.7 on, check_vma on); every release from 0.4.26 to 0.10.2
  fails. Without spmd_axis_name it works.

Prints one JSON line per seed (seconds to the find, or null after --seconds; where the jobs'
time went: ``generated`` programs drawn fresh, ``shrink_seconds`` shrinking and reducing the
other findings met, ``look_past_seconds``, and ``findings`` distinct) and a summary.
The campaigns know the repository's corpus as a user's default ``shardfuzz run`` does (and
as ``benchmarks/seeded.py``'s do), less the entries of the bug looked for (2026-12-07@2290ae1; see
:func:`corpus_knowledge`); ``--corpus ''`` knows no
bug beforehand, as every rediscover run before 2026-12-07@75c9491: then every bug the campaign meets
is shrunk and reduced, with today's grammar a third of the time and more.
``--need K`` runs the seeds in order and stops once the verdict "found on at least K of
them" is settled (K finds, or too many misses for K), so a 2-of-3 check costs two
campaigns when the first two agree; the seeds left out are listed as ``skipped``.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import queue
import re
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzz.campaign import Campaign  # noqa: E402
from fuzz.features import features  # noqa: E402
from fuzz.parallel import default_jobs, job_seed  # noqa: E402
from fuzz.program import make_entry, save_entry  # noqa: E402
from fuzz.util import atomic_write_text  # noqa: E402
from oracles.common import split_value_signature  # noqa: E402

SEED_C_MESSAGES = re.compile(r"requires varying manual axes to match|should be of type `Manual`|too many values to "
                             r"unpack|pvary is a invariant->variant|dimension size")


# jax-21403 is a cumulative op along a sharded dim under jit, however the dim came to be
# split: on 0.4.26 and 0.4.28, cumsum, cumprod and cummax of a (8, 4) array split 4 ways
# along dim 0 are all wrong under jit whether the split comes from with_sharding_constraint,
# in_shardings, out_shardings or a committed argument, and all eight are right on 0.4.31
# (checked by hand, 2026-11-30@7e8450e), so they are one bug, fixed at once.
CUMULATIVE = ("cumsum", "cumprod", "cummax")
# jax-18434 is an .at[] update with a slice index followed by one with an integer index on
# its result, on a row-split operand under jit: on 0.10.2, a.at[:2].set(3.).at[-1].set(4.)
# and the same with .add are wrong, a single .at[] of either kind and two of the same index
# kind are right (checked by hand, 2026-11-30@7e8450e); the report's own-window update is not needed.
AT_UPDATES = ("at_set", "at_add")


def kind_a(f, program) -> bool:
    return (f.oracle == "crash" and f.kind == "SIGABRT" and "Check failed" in f.message
            and "io_callback_ordered" in features(program)[0])


# Seed B's residual annotation comes from the transpose of a shard_map, which every
# reverse-mode API runs (jax.grad is jax.vjp with a ones cotangent): on 0.4.28, jit(vjp) of a
# shard_map over a mesh ('x', 'y') lists the residual's axes as ('y', 'x') or ('x', 'y') by
# PYTHONHASHSEED, the diff seed B describes for jit(grad) (checked by hand, 2026-12-02@be7a43b)
REVERSE_MODE = {"grad", "value_and_grad", "vjp", "jacrev"}


def kind_b(f, program) -> bool:
    feats = features(program)[0]
    return (f.oracle == "determinism" and f.kind == "cross-process" and "shard_map" in feats
            and bool(feats & REVERSE_MODE))


def kind_c(f, program) -> bool:
    feats = features(program)[0]
    return (f.oracle == "internal-error" and {"vmap", "spmd_axis_name", "shard_map"} <= feats
            and bool(SEED_C_MESSAGES.search(f.message)))


def _value(*needed, any_of=(), none_of=(), unless=()):
    """A wrong value (differential finding) whose failing calls use ``needed`` (and one of
    ``any_of``, none of ``none_of``, and not all of ``unless`` together).

    A value finding's signature names the features of the calls that gave the wrong value
    (``oracles.common.value_signature``), so an op elsewhere in the program does not count.
    """
    def match(f, program):
        used = split_value_signature(f.signature)[2]
        return (f.oracle == "differential" and set(needed) <= used and (not any_of or bool(used & set(any_of)))
                and not used & set(none_of) and not (unless and set(unless) <= used))
    return match


def call_features(program: dict, call) -> set:
    """The features of one call of a program (``fuzz.features.features`` of the program cut
    down to that call; the mesh's options included), or of the whole program when ``call``
    is not a call index (a crash may name none)."""
    calls = program["calls"]
    if isinstance(call, int) and 0 <= call < len(calls):
        program = {**program, "calls": [calls[call]]}
    return features(program)[0]


def _raises(*needed, any_of=(), message=None):
    """JAX raising on a valid program (internal-error) whose failing call uses ``needed`` (and
    one of ``any_of``), with a message or signature matching the regular expression ``message``
    if given (another call of the program using them does not count)."""
    def match(f, program):
        feats = call_features(program, f.call)
        return (f.oracle == "internal-error" and set(needed) <= feats
                and (not any_of or bool(feats & set(any_of)))
                and (message is None or re.search(message, f.message + "\n" + f.signature) is not None))
    return match


def _at_chain(fn: dict, made: dict | None = None) -> bool:
    """Whether function ``fn`` (or a function nested in it, which may read its values) applies
    an .at[] update to the result of another, one with a slice index and the other with an
    integer (static or traced) index, in either order (both orders are wrong on 0.10.2)."""
    made = dict(made or {})
    for e in fn["eqns"]:
        if e["op"] in AT_UPDATES:
            first = made.get(e["args"][0])
            if first is not None and isinstance(first["index"], list) != isinstance(e["index"], list):
                return True
            made.update((o, e) for o in e["outs"])
        if e["op"] == "call" and _at_chain(e["fn"], made):
            return True
    return False


def kind_18434(f, program) -> bool:
    """A wrong value under jit from a call with two chained .at[] updates as in the report. The
    report's root cause is XLA's nested dynamic-slice fold (2026-12-04@2f29b17: its program gives the
    reference's values with the algsimp pass off), as is differential-b909f86363df's single
    .at[] on a sharded constant, which campaigns find often; only the report's chain counts here.
    The chain must be in the failing call's function (``f.call``)."""
    calls = program["calls"]
    if not (isinstance(f.call, int) and 0 <= f.call < len(calls)):
        return False
    return (_value("jit", any_of=AT_UPDATES)(f, program)
            and _at_chain(program["functions"][calls[f.call]["function"]]))


def _axis_index_of_size_one_in_partial_manual(program: dict) -> bool:
    """Whether some axis_index names a mesh axis of size 1 inside a partial-manual shard_map."""
    sizes = dict(zip(program["mesh"]["axis_names"], program["mesh"]["axis_sizes"]))

    def body(fn: dict, partial: bool) -> bool:
        for e in fn["eqns"]:
            if e["op"] == "call" and body(e["fn"], partial or any(
                    t["kind"] == "shard_map" and t.get("axis_names") is not None for t in e["transforms"])):
                return True
            if e["op"] == "axis_index" and partial and any(sizes.get(a) == 1 for a in e["axes"]):
                return True
        return False

    return any(body(program["functions"][c["function"]], any(
        t["kind"] == "shard_map" and t.get("axis_names") is not None for t in c["transforms"]))
        for c in program["calls"])


# the report's abort (jax-25699), in a message as raised or with its parentheses elided as a signature has them
IS_MANUAL_CHECK = re.compile(r"hlo->sharding\([^)]*\)\.IsManual\([^)]*\) \|\| hlo->sharding\([^)]*\)\.IsManualSubgroup")


def kind_25699(f, program) -> bool:
    """The worker aborts on XLA's check that an iota (axis_index's lowering in a partially manual
    computation) is manual, in a program with an axis_index over a size-1 manual axis of a
    partial-manual shard_map: the report's composition (on 0.4.38 its test aborts with "Check
    failed: hlo->sharding().IsManual() || hlo->sharding().IsManualSubgroup()", checked by hand).
    That check only: the 2026-12-06@23a0f5a seed-2 match aborted on another one ("target.IsManualSubgroup()
    == sharding().IsManualSubgroup()"), which reduced to an all_gather of a captured scalar in a
    partial-manual shard_map with no axis_index at all (another bug, gone by 0.10.2)."""
    return (f.oracle == "crash" and IS_MANUAL_CHECK.search(f.message) is not None
            and _axis_index_of_size_one_in_partial_manual(program))


KINDS = {"A": kind_a, "B": kind_b, "C": kind_c,
         "jax-21403": _value("jit", any_of=CUMULATIVE),
         "jax-18434": kind_18434,
         # without a captured input: a dynamic_slice of a captured (constant) array under jit with
         # its result split is XLA's nested dynamic-slice fold (differential-b909f86363df; it goes
         # with algsimp off, 2026-12-04@2f29b17), where the report's sliced array is an argument; nor under
         # lax.map / lax.scan, whose per-step dynamic slice of the argument meets the op's in the same
         # fold (2026-12-05@9d2d504: a lax.map of a dynamic_slice past the end, cleared by algsimp alone)
         # nor under reverse mode: a dynamic_slice's transpose is a dynamic_update_slice, whose
         # start past the end along a split dim XLA drops (openxla/xla#49118, corpus
         # differential-2a5536937256): the 2026-12-05@fa339ff first match was that, its forward right
         # (an eager call's captured array is no constant: the eager op gets it as an argument;
         # the 2026-12-06@8b7f604 match, differential-1687a4d9ac6e, is the report's bug by hand: right with
         # a constant start, right with algsimp off)
         # (and no shard_map in the call: in a shard_map body the slice is of a device's block, which
         # the SPMD partitioner does not split; the 2026-12-06@b554ed7 seed-1 match was such a body: a start past
         # the block's end folded with the reshard's per-device slice, differential-b909f86363df's fold)
         "xla-49122": _value("dynamic_slice", none_of=("lax_map", "scan", "grad", "value_and_grad", "vjp", "jacrev",
                                                       "shard_map"),
                             unless=("capture", "jit")),
         # the report's message; on 0.6.1 jacrev in a shard_map body with check_vma on raises it
         # for any function, even sin (checked by hand, 2026-11-30@7e8450e); without the message an
         # eager shard_map's "Eager evaluation of `closed_call`" (another error) matched
         "jax-29832": _raises("jacrev", "shard_map", message=r"unexpected JAX type .* argument to vjp function"),
         # the report's raise site: on 0.8.1 its test (a custom_vjp whose backward rule returns
         # None, in a shard_map with check_vma=False under grad, Explicit mesh) fails the assertion
         # in jax._src.op_shardings.get_num_ways_dim_sharded (checked by hand); a match by
         # features alone was another bug (internal-error-16e66adcd88f, in another call)
         "jax-34211": _raises("custom_vjp", "shard_map", "explicit_mesh", any_of=("grad", "value_and_grad", "vjp"),
                              message=r"get_num_ways_dim_sharded"),
         "jax-25699": kind_25699}
# The release each bug is measured on unless --jax-version says otherwise (None: this environment's JAX).
RELEASES = {"A": "0.4.38", "B": "0.4.28", "C": None, "jax-21403": "0.4.26", "jax-18434": None, "xla-49122": None,
            "jax-29832": "0.6.1", "jax-34211": "0.8.1", "jax-25699": "0.4.38"}


def _job(bug: str, seed: int, seconds: float, python, avoid: bool, keep, found, out, job: int = 0,
         known: tuple = (None, None)) -> None:
    """One job (a forked process): a Campaign that stops at its first match of ``bug`` or
    once ``found`` (a multiprocessing Event) is set by another job; puts its row on ``out``.
    ``keep``: a directory where the matching finding is saved as a corpus entry (for
    ``shardfuzz bisect``: its releases say whether it is the report's bug), or None.
    ``known``: (corpus signatures, their ops) the campaign knows (see :func:`corpus_knowledge`)."""
    def progress(c) -> None:
        if found.is_set():
            c.seconds = 0  # another job found it: stop at the next program

    shown: dict = {}

    def match(f, program) -> bool:
        if KINDS[bug](f, program):
            shown.setdefault("program", program)
            return True
        return False
    c = Campaign(seconds=seconds, seed=seed, python=python, shrink_seconds=0, stop_when=match, job=job,
                 avoid_known=avoid, on_progress=progress, corpus_signatures=known[0], known_ops=known[1])
    report = None
    try:
        report = c.run()
    finally:
        if c.matched:
            found.set()
        c.close()
    if keep and report is not None:
        _keep_report(keep, f"report-{bug}-seed{seed}-job{job}.json", report)
    hit = c.matched if c.matched and c.matched[0] <= seconds else None  # (found in the grace after: a miss)
    if hit and keep:
        f = hit[1]
        entry = make_entry({"signature": f.signature, "oracle": f.oracle, "kind": f.kind, "message": f.message,
                            "call": f.call}, shown["program"], c.caps,
                           triage=f"benchmarks/rediscover.py {bug}, a job with Hypothesis seed {seed}: the first "
                                  "match, not reduced")
        try:
            print(f"rediscover: kept {save_entry(keep, entry)}", file=sys.stderr)
        except (OSError, ValueError) as e:  # (CorpusError is a ValueError) the row still counts
            print(f"rediscover: could not keep the match in {keep}: {e}", file=sys.stderr)
    out.put({"jax_version": c.caps["jax_version"], "seconds_to_find": round(hit[0], 1) if hit else None,
             "programs": c.stats.programs, "signature": hit[1].signature[:160] if hit else None,
             # where the time went: generated programs, shrinking and reducing other findings,
             # reruns past known bugs, and the findings met on the way
             "generated": c.stats.generated, "shrink_seconds": round(c.shrink_spent, 1),
             "look_past_seconds": round(c.look_past_seconds, 1), "findings": len(c.records)})


def _keep_report(keep: str, name: str, report: dict) -> None:
    """Write a job's campaign report (its findings met besides the match, as shrunk and reduced
    then) atomically to ``keep/name``, for ``shardfuzz save`` or ``shardfuzz export --finding N``
    to triage later; an OSError is one line on stderr (the row still counts)."""
    try:
        Path(keep).mkdir(parents=True, exist_ok=True)
        atomic_write_text(str(Path(keep) / name), json.dumps(report, indent=1, default=str))
    except OSError as e:
        print(f"rediscover: could not keep the report in {keep}: {e}", file=sys.stderr)


def corpus_knowledge(directory: str | None, bug: str | None = None) -> tuple:
    """(signatures, ops) of the corpus entries in ``directory`` as ``shardfuzz run`` knows them
    (fuzz.program.known_signatures, fuzz.program.known_ops), or (None, None) without one.

    A campaign that knows them does not shrink or reduce those bugs again and looks past them
    (fuzz.campaign.Campaign), as a user's default campaign does. The entries of ``bug`` itself
    (an entry one of whose signatures its matcher in :data:`KINDS` accepts) are left out: a
    campaign avoids the ops of the known bugs it meets (``Campaign.avoid``), and a face of the
    target met outside the matcher's composition would steer the campaign off it; a user who
    has not found a bug does not know it either.
    Raises SystemExit with a one-line message for a corpus file that does not load."""
    if not directory:
        return None, None
    from fuzz.program import CorpusError, corpus_files, known_ops, known_signatures

    try:
        entries = corpus_files(directory)
    except CorpusError as e:
        raise SystemExit(f"rediscover: {e} (or leave out --corpus)")
    if bug is not None:
        entries = [(p, e) for p, e in entries if not _is_target(bug, e)]
    return known_signatures(entries), known_ops(entries)


# the public report behind each named bug, as a corpus entry's ``upstream`` addresses name it
REPORTS = {"jax-21403": "jax-ml/jax/issues/21403", "jax-18434": "jax-ml/jax/issues/18434",
           "xla-49122": "openxla/xla/issues/49122", "jax-29832": "jax-ml/jax/issues/29832",
           "jax-34211": "jax-ml/jax/pull/34211", "jax-25699": "jax-ml/jax/pull/25699"}


def _is_target(bug: str, entry: dict) -> bool:
    """Whether a corpus entry is ``bug``'s own: its ``upstream`` addresses name the bug's public
    report (:data:`REPORTS`), or ``bug``'s matcher accepts it under its signature or one of its faces.

    The first rule is needed where a report was triaged as a face of an entry found another way:
    jax-ml/jax#18434's chain was merged into differential-b909f86363df (XLA's nested dynamic-slice
    fold, 2026-12-04@2f29b17), whose own program, a single .at[] update, ``kind_18434`` does not accept;
    known, that entry made every campaign look past the report's chain and avoid its ops."""
    report = REPORTS.get(bug)
    if report and any(u.rstrip("/").endswith(report) for u in entry.get("upstream", [])):
        return True
    for sig in [entry["signature"], *entry.get("faces", [])]:
        own = sig == entry["signature"]
        oracle, kind, _ = split_value_signature(sig)  # ("oracle: kind: ..." for every oracle)
        f = SimpleNamespace(signature=sig, oracle=entry["oracle"] if own else oracle,
                            kind=entry.get("kind") if own else kind,
                            message=entry.get("message", "") if own else "", call=entry.get("call"))
        if KINDS[bug](f, entry["program"]):
            return True
    return False


def campaign(bug: str, seed: int, seconds: float, python, avoid: bool, jobs: int, keep=None,
             known: tuple = (None, None)) -> dict:
    """One default campaign of ``jobs`` jobs (job j draws with fuzz.parallel.job_seed(seed, j),
    as ``shardfuzz run --jobs`` does), each a Campaign in a forked process; it ends at the
    first match in any job. Returns {"jax_version", "seconds_to_find" (the earliest, seconds
    from each job's start, or None), "programs" (summed), "signature"}."""
    ctx = multiprocessing.get_context("fork")  # (no JAX in this process: the workers import it)
    found, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_job, args=(bug, job_seed(seed, j), seconds, python, avoid, keep, found, out, j,
                                            known))
             for j in range(jobs)]
    for p in procs:
        p.start()
    rows: list = []
    while len(rows) < len(procs):
        try:
            rows.append(out.get(timeout=5))
        except queue.Empty:
            if not any(p.is_alive() for p in procs):  # a job died without its row
                raise SystemExit(f"rediscover: a job of seed {seed} died; its log is on stderr above")
    for p in procs:
        p.join()
    hits = sorted((r for r in rows if r["seconds_to_find"] is not None), key=lambda r: r["seconds_to_find"])
    first = hits[0] if hits else rows[0]
    return {"jax_version": first["jax_version"], "seconds_to_find": first["seconds_to_find"],
            "programs": sum(r["programs"] for r in rows), "signature": first["signature"], "jobs": jobs,
            **{k: round(sum(r.get(k, 0) for r in rows), 1)
               for k in ("generated", "shrink_seconds", "look_past_seconds", "findings")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bug", choices=sorted(KINDS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--jax-version", default=None)
    ap.add_argument("--python", default=None)
    ap.add_argument("--need", type=int, default=None, metavar="K",
                    help="stop once 'found on at least K seeds' is settled (default: run every seed)")
    ap.add_argument("--jobs", type=int, default=default_jobs(),
                    help="campaigns at once per seed, as `shardfuzz run --jobs` (default: this machine's, %(default)s)")
    ap.add_argument("--keep", default=None, metavar="DIR",
                    help="save each matching finding as a corpus entry in DIR (then: shardfuzz bisect DIR/...), "
                         "and each job's campaign report with the other findings met (shardfuzz save / export)")
    ap.add_argument("--no-avoid", action="store_true", help="switch off avoidance of bugs found earlier in the run")
    ap.add_argument("--corpus", default=str(ROOT / "corpus"), metavar="DIR",
                    help="know the entries of this corpus as `shardfuzz run` does, less those the bug's matcher accepts "
                         "(default: the repository's, as benchmarks/seeded.py's campaigns; '': none, every bug met "
                         "is new, shrunk and reduced)")
    args = ap.parse_args()
    python = args.python
    version = args.jax_version or (None if python else RELEASES[args.bug])
    if version:
        from fuzz.provision import interpreter

        python = interpreter(version, log=lambda s: print(s, file=sys.stderr))
    known = corpus_knowledge(args.corpus, args.bug)
    times = []
    for i, s in enumerate(args.seeds):
        if args.need is not None:
            hits = sum(t is not None for t in times)
            if hits >= args.need or hits + len(args.seeds) - i < args.need:
                print(json.dumps({"bug": args.bug, "skipped": args.seeds[i:]}), flush=True)
                break
        row = {"bug": args.bug, "seed": s, **campaign(args.bug, s, args.seconds, python, not args.no_avoid, args.jobs,
                                                      args.keep, known)}
        times.append(row["seconds_to_find"])
        print(json.dumps(row), flush=True)
    found = [t for t in times if t is not None]
    print(json.dumps({"bug": args.bug, "found": f"{len(found)}/{len(times)}", "seeds": len(args.seeds),
                      "median_seconds": statistics.median(found) if found else None}))


if __name__ == "__main__":
    main()
