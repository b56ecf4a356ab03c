"""Corpus maintenance: re-reduce entries in place and merge those that turn out to be one bug.

``shardfuzz reduce corpus/*.json`` runs the program reducer (:mod:`fuzz.reduce`) on
each entry with a predicate that executes candidates in a worker of the installed JAX,
then re-records the entry from its reduced program: the new signature (format of
:mod:`oracles`), message, call index and a ``reduction`` record. An entry whose reduced
program equals another entry's (or whose new signature is another entry's) is merged
into it: one entry per root cause. Files are written atomically; the old file is
removed only after its replacement is written.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import click

from fuzz.program import CorpusError, add_faces, corpus_files, entry_path, load_entry, write_entry
from fuzz.reduce import Reduction, reduce_program
from fuzz.render import render
from fuzz.runner import Runner
from fuzz.util import UsageError
from oracles.common import Finding, normalize, same_finding


def program_lines(program: dict, caps: dict | None = None) -> int:
    """Lines of the program part of a rendered program: function bodies plus the ``CALLS`` entries.

    The fixed preamble (imports, mesh, helpers, inputs) is not counted.
    """
    lines = render(program, caps).splitlines()
    starts = tuple(f"def {name}(" for name in program["functions"])
    first = next(i for i, ln in enumerate(lines) if ln.startswith(starts))
    calls = lines.index("CALLS = [")
    end = lines.index("]", calls)
    return sum(1 for ln in lines[first:calls] if ln.strip()) + (end - calls - 1)


def matches(found: Finding, entry: dict) -> bool:
    """Whether a finding is the entry's (:func:`oracles.common.same_finding`).

    Entries recorded before signatures named the JAX frame that raised also match on
    (oracle, kind, normalized message).
    """
    if same_finding(found, entry["signature"], entry["oracle"], entry["kind"]):
        return True
    return (found.oracle, found.kind, normalize(found.message)) == (
        entry["oracle"], entry["kind"], normalize(entry["message"]))


def _hit(findings: list, entry: dict, call):
    for f in findings:
        if matches(f, entry) and (call is False or f.call == call) and not f.history:
            return f
    return None


@dataclass
class Rerecord:
    """The result of :func:`reduce_entry`: the new entry (None: it did not reproduce) and how it went."""

    entry: dict | None
    reduction: Reduction | None
    lines_before: int
    lines_after: int | None
    why: str = ""


def finding_on(runner: Runner, program: dict, oracle: str, call) -> Finding | None:
    """The finding of ``oracle`` that ``program`` shows on ``call`` on ``runner``'s JAX release.

    None when it shows none there, or when that release cannot express the program
    (:func:`fuzz.replay.applicable`). A finding that needs earlier programs (a crash's
    history) does not count.
    """
    from fuzz.replay import applicable

    if applicable(program, runner.caps):
        return None
    return next((f for f in runner.run(program)[0] if f.oracle == oracle and f.call == call and not f.history), None)


def fails_alike(runner: Runner, program: dict, target: Finding, call) -> bool:
    """Whether ``program`` shows ``target`` on ``call`` on ``runner``'s (other) JAX release.

    ``target`` is what the entry's program shows on that release (:func:`finding_on`):
    another release may word the same bug differently (seed C: three messages over the
    releases, ``benchmarks/rediscover.py``), so each release keeps its own finding through
    the reduction (:func:`oracles.common.same_finding`), as the main release keeps the
    entry's.
    """
    found = finding_on(runner, program, target.oracle, call)
    return found is not None and same_finding(found, target.signature, target.oracle, target.kind)


def reduce_entry(entry: dict, runner: Runner, max_runs: int = 300, max_seconds: float = 300.0,
                 also: list | None = None) -> Rerecord:
    """Reduce one corpus entry on ``runner``'s JAX and re-record it from the reduced program.

    A crash counts only when it reproduces alone in a fresh worker. ``also``: runners of
    other releases on which every kept candidate must fail alike too (:func:`fails_alike`:
    the finding of the entry's oracle the entry's program shows there, kept), so that the
    reduced program keeps the range of releases the bug affects. Raises
    nothing for an entry that does not reproduce: the result's ``entry`` is None and
    ``why`` says so.
    """
    also = also or []
    before = program_lines(entry["program"], runner.caps)
    if entry["jax_version"] != runner.caps.get("jax_version"):
        return Rerecord(None, None, before, None, f"recorded on JAX {entry['jax_version']}, "
                                                  f"running {runner.caps.get('jax_version')}: re-reduce there")
    found, _ = runner.run(entry["program"])
    first = _hit(found, entry, entry.get("call", False))
    if first is None:
        seen = "; ".join(f.signature[:80] for f in found) or "no finding"
        return Rerecord(None, None, before, None, f"does not reproduce here ({seen})")

    targets = []
    for other in also:
        target = finding_on(other, entry["program"], entry["oracle"], first.call)
        if target is None:
            return Rerecord(None, None, before, None, f"shows no {entry['oracle']} finding on call {first.call} "
                                                      f"on JAX {other.caps.get('jax_version')}")
        targets.append(target)

    def interesting(candidate: dict, call) -> bool:
        return (_hit(runner.run(candidate)[0], entry, call) is not None
                and all(fails_alike(other, candidate, t, call) for other, t in zip(also, targets)))

    with runner.trusting_fresh():  # (a candidate must show the entry's signature: see fuzz.runner.Runner)
        r = reduce_program(entry["program"], interesting, first.call, max_runs=max_runs, max_seconds=max_seconds,
                           caps=runner.caps)
    final = _hit(runner.run(r.program)[0], entry, r.call)
    if final is None:  # flaky: keep the program as it was
        return Rerecord(None, r, before, None, "the reduced program did not reproduce on a last run (flaky)")
    first_size = entry.get("reduction", {}).get("lines_before", before)  # as first recorded, over re-reductions
    new = {**entry, "program": r.program, "call": final.call, "signature": final.signature,
           "message": final.message[:2000], "kind": final.kind,
           "reduction": {"reduced": r.reduced, "runs": r.runs, "seconds": round(r.seconds, 1),
                         "lines_before": first_size, "lines_after": program_lines(r.program, runner.caps)}}
    if final.call is None:
        new.pop("call")
    return Rerecord(new, r, before, new["reduction"]["lines_after"])


def _same_program(a: dict, b: dict) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _merge(kept: dict, gone: dict) -> dict:
    """``kept`` with the other entry's triage text appended (nothing a user wrote is lost) and its
    signatures kept as faces (campaigns go on reporting them as known)."""
    t2 = gone.get("triage", "")
    return add_faces(kept, [gone["signature"], *gone.get("faces", [])],
                     f"(merged from {gone['signature'][:100]}) {t2}" if t2 else "")


@click.command("reduce")
@click.argument("entries", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--max-runs", type=click.IntRange(min=1), default=300, show_default=True,
              help="JAX runs per entry at most.")
@click.option("--max-seconds", type=click.FloatRange(min=1, max=86400), default=300.0, show_default=True,
              help="Seconds per entry at most.")
@click.option("--python", "python", default=None, help="Interpreter whose JAX the workers use.")
@click.option("--also-on", "also_on", multiple=True,
              help="Another JAX release (X.Y.Z) on which the reduced program must fail alike too (repeatable).")
@click.option("--venv-python", default=None, metavar="PATH",
              help="Python to make the --also-on venvs with when their wheels fit (default: $SHARDFUZZ_VENV_PYTHON, "
                   "this one, or a python3.N on PATH that fits).")
def reduce_command(entries, max_runs, max_seconds, python, also_on, venv_python):
    """Re-reduce corpus entries in place and merge entries that are one bug.

    Each entry is reduced on the installed JAX (it must be the release the entry was
    recorded on), re-recorded from its reduced program (new signature, message, call)
    and written atomically; an entry whose reduced program or signature equals another
    entry's of the same directory is merged into that one.
    """
    from fuzz.execute import WorkerError

    try:
        loaded = [(Path(p), load_entry(p)) for p in entries]
    except CorpusError as e:
        raise UsageError(str(e))
    from fuzz.provision import ProvisionError, check_venv_python, worker_python

    if venv_python and not also_on:
        raise UsageError("--venv-python makes the venvs of --also-on releases; give --also-on X.Y.Z too")
    others, runner = [], None
    try:
        if also_on:
            check_venv_python(venv_python)  # (fails fast, before a worker starts)
        runner = Runner(python=worker_python(python), determinism=any(e["oracle"] == "determinism" for _, e in loaded))
        for version in also_on:
            others.append(Runner(python=worker_python(jax_version=version, venv_python=venv_python, log=click.echo),
                                 determinism=False))
    except (WorkerError, ProvisionError) as e:
        for r in others + ([runner] if runner else []):
            r.close()
        raise UsageError(str(e))
    try:
        for path, entry in loaded:
            res = reduce_entry(entry, runner, max_runs, max_seconds, also=others)
            if res.entry is None:
                click.echo(f"{path.name}: unchanged: {res.why}")
                continue
            new = res.entry
            target = entry_path(path.parent, new)
            siblings = [(p, e) for p, e in corpus_files(path.parent) if p != path]
            twin = next(((p, e) for p, e in siblings if p == target or _same_program(e["program"], new["program"])),
                        None)
            if twin is not None:
                write_entry(twin[0], _merge(twin[1], new))
                path.unlink()
                click.echo(f"{path.name}: merged into {twin[0].name} (same "
                           f"{'signature' if twin[0] == target else 'reduced program'})")
                continue
            write_entry(target, new)
            if target != path:
                path.unlink()
            red = new["reduction"]
            click.echo(f"{path.name} -> {target.name}: {res.lines_before} -> {res.lines_after} lines, "
                       f"{red['runs']} runs, {red['seconds']} s, {'fixed point' if red['reduced'] else 'budget spent'}")
    finally:
        runner.close()
        for r in others:
            r.close()
