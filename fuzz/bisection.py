"""``shardfuzz bisect``: which released JAX versions show a corpus entry's finding.

Each tested release replays the entry (fuzz.replay.replay_entry, in a cached venv from
fuzz.provision; this interpreter for its own jax version) and gets a verdict record
(fuzz/verdicts.py: the verdict, the date, the jax / jaxlib versions, what showed instead):

- ``reproduces``: the same signature;
- ``fails differently``: another finding shows instead (messages change across releases:
  seed C's, described in benchmarks/rediscover.py, does; triage decides whether it is the same bug);
- ``does not reproduce``;
- ``not applicable here``: the release lacks an API the program needs (fuzz.replay).

"Affected" means reproduces, nothing else: a release that fails differently is listed apart
(``fails_differently``, with what it showed), and bisect looks for the change between it and
a release that reproduces as for any other change of verdict. The search tests the two ends of the
range (and the release the entry was recorded on, when inside), narrows the releases
where the program is applicable (assuming "not applicable" is a prefix or suffix of
the range: an API that appeared or went away), tests the newest release of every minor
series in between (0.4.38, 0.5.3, 0.6.2, …: a program that fails on both ends may run
in the middle, two bugs with one face), then binary-searches each change of status
between two tested releases, **assuming at most one change between two tested
releases** (a bug introduced and fixed between them is not seen). The result goes into
the entry's ``releases`` field, merged with the verdicts recorded there before (a release
tested again gets its new verdict; written atomically, only when the bisect succeeds).
"""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import click

from fuzz.provision import OLDEST
from fuzz.util import version_tuple
from fuzz.verdicts import (DOES_NOT, FAILS_DIFFERENTLY, NOT_APPLICABLE, REPRODUCES, VERDICTS, VERSION,  # noqa: F401
                           affected_text, conclusions, migrate, of_replay)
ASSUMPTION = ("at most one change of status between two tested releases (the newest release of every minor "
              "series is tested); not applicable releases form a prefix or a suffix of the range")


class BisectError(Exception):
    """Bisect cannot go on: a one-line reason and what to do (the command exits 2)."""


# ------------------------------------------------------------------------------ releases

def parse_pip_versions(text: str) -> list:
    """Released X.Y.Z versions from ``pip index versions jax`` output, oldest first, >= fuzz.provision.OLDEST.

    Versions of another form (0.9.0.1, release candidates) are left out: fuzz.provision
    installs X.Y.Z only. Raises BisectError when the text has no "Available versions:" line.
    """
    m = re.search(r"Available versions:\s*(.*)", text)
    if not m:
        raise BisectError("pip did not list the versions of jax; check that PyPI is reachable "
                          "(pip index versions jax)")
    out = [v.strip() for v in m.group(1).split(",")]
    out = [v for v in out if re.fullmatch(r"\d+\.\d+\.\d+", v) and version_tuple(v) >= OLDEST]
    return sorted(set(out), key=version_tuple)


def released_versions() -> list:
    """The released X.Y.Z jax versions the package index offers, oldest first, >= fuzz.provision.OLDEST,
    whatever Python each needs (fuzz.provision.releases: the venv of a release is made with an
    interpreter its wheels fit), so that ranges run to the newest release; X.Y.Z.W post-releases
    (0.12.0.1) are left out. BisectError when the index does not answer."""
    from fuzz.provision import releases

    found = releases()
    if not found:
        raise BisectError("the package index did not list the versions of jax; check that PyPI is reachable "
                          "(pip index versions jax)")
    return sorted({v for v in found if VERSION.fullmatch(v) and version_tuple(v) >= OLDEST}, key=version_tuple)


def select(versions: list, lo: str | None, hi: str | None) -> list:
    """The versions within [lo, hi] (inclusive; None: open). BisectError for a malformed bound or an empty range."""
    for name, v in (("--from", lo), ("--to", hi)):
        if v is not None and not re.fullmatch(r"\d+\.\d+\.\d+", v):
            raise BisectError(f"{name} {v!r} is not of the form X.Y.Z (e.g. 0.4.38)")
    out = [v for v in versions if (lo is None or version_tuple(v) >= version_tuple(lo))
           and (hi is None or version_tuple(v) <= version_tuple(hi))]
    if not out:
        raise BisectError(f"no released jax version >= {'.'.join(map(str, OLDEST))} lies in "
                          f"[{lo or 'oldest'}, {hi or 'newest'}]; widen --from / --to")
    return out


# ------------------------------------------------------------------------------ verdicts

def classify(entry: dict, replay) -> str:
    """The verdict of a fuzz.replay.Replay: its own, except that a DOES_NOT whose ``why`` names the
    signatures that showed (a Replay made before FAILS_DIFFERENTLY existed) is FAILS_DIFFERENTLY."""
    if replay.verdict == DOES_NOT and (replay.why or "no finding") != "no finding":
        return FAILS_DIFFERENTLY
    return replay.verdict


def _verdict(x) -> str:
    return x["verdict"] if isinstance(x, dict) else x


def _kind(verdict: str) -> str:
    """What the search compares: a fails-differently release is neither affected nor unaffected."""
    return {REPRODUCES: "affected", NOT_APPLICABLE: "n/a", FAILS_DIFFERENTLY: "other"}.get(_verdict(verdict),
                                                                                          "unaffected")


def search(versions: list, verdict_of, anchors=()) -> dict:
    """Bisect ``versions`` (oldest first) with ``verdict_of(version) -> verdict`` (a verdict string or
    a fuzz.verdicts.record; called once per version).

    ``anchors``: versions to test first besides the two ends (the recorded release).
    Returns the ``releases`` record: ``tested`` {version: verdict record} (oldest first),
    ``assumption`` and what fuzz.verdicts.conclusions derives from ``tested``: ``changes``
    [{"last": v, "first": w, "from": verdict, "to": verdict}] (neighbouring releases once the
    search is done), ``affected``, ``first_affected``, ``last_unaffected``, ``fixed_in``,
    ``last_affected``, ``applicable`` [oldest, newest] release where the program runs, ``range``,
    ``fails_differently``, ``not_applicable``. Raises BisectError when no tested release can
    run the program.
    """
    n = len(versions)
    tested: dict = {}

    def status(i: int) -> str:
        v = versions[i]
        if v not in tested:
            tested[v] = verdict_of(v)
        return _kind(tested[v])

    ends = [0, n - 1] + [versions.index(a) for a in anchors if a in versions]
    for i in sorted(set(ends)):
        status(i)
    applicable = sorted(i for i in set(ends) if status(i) != "n/a")
    if not applicable:
        raise BisectError(f"the program is not applicable on any tested release ({', '.join(tested)}); "
                          f"choose a range where its API exists")
    a, b = applicable[0], applicable[-1]
    if status(0) == "n/a":  # the oldest applicable release: "not applicable" is a prefix
        lo, hi = 0, a
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if status(mid) == "n/a" else (lo, mid)
        a = hi
    if status(n - 1) == "n/a":  # the newest applicable release: "not applicable" is a suffix
        lo, hi = b, n - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if status(mid) == "n/a" else (mid, hi)
        b = lo

    # one release of every minor series (its newest) as well: a bug fixed and brought back
    # between the two ends (two changes) shows on one of them unless both happen in one series
    series: dict = {}
    for i in range(a, b + 1):
        series[version_tuple(versions[i])[:2]] = i
    for i in sorted(series.values()):
        status(i)

    changes = []

    def split(lo: int, hi: int) -> None:
        if status(lo) == status(hi):
            return  # assumed: no change in between
        if hi - lo == 1:
            changes.append((lo, hi))
            return
        mid = (lo + hi) // 2
        if status(mid) == "n/a":  # an applicable release nearest the middle
            for c in sorted(range(lo + 1, hi), key=lambda i: (abs(i - mid), i)):
                if status(c) != "n/a":
                    mid = c
                    break
            else:
                changes.append((lo, hi))  # nothing applicable in between: the change lies across the gap
                return
        split(lo, mid)
        split(mid, hi)

    points = sorted(i for i in range(a, b + 1) if versions[i] in tested and status(i) != "n/a")
    for lo, hi in zip(points, points[1:]):
        split(lo, hi)
    return migrate({"tested": {v: tested[v] for v in versions if v in tested}, "assumption": ASSUMPTION})


def summary(result: dict) -> list:
    """Lines for a human: each tested release and its verdict (what showed instead), then the conclusions."""
    lines = []
    for v, rec in result["tested"].items():
        seen = rec.get("seen", "") if isinstance(rec, dict) else ""
        lines.append(f"  {v:>8}  {_verdict(rec)}" + (f": {seen[:100]}" if seen else ""))
    if result["applicable"] and result["applicable"] != result["range"]:
        lines.append(f"applicable from {result['applicable'][0]} to {result['applicable'][1]} "
                     f"(the others lack an API the program needs)")
    if result["first_affected"]:
        since = (f"first affected {result['first_affected']}" + (f", last unaffected {result['last_unaffected']}"
                 if result["last_unaffected"] else " (the oldest applicable release tested)"))
        lines.append(since)
        if len(result["affected"]) > 1:
            lines.append(f"affected: {affected_text(result['affected'])} (fixed, then back)")
    else:
        lines.append("no tested release shows the finding")
    if result["fixed_in"]:
        lines.append(f"fixed in {result['fixed_in']} (last affected {result['last_affected']})")
    for s in result.get("fails_differently", []):
        span = s["from"] if s["from"] == s["to"] else f"{s['from']} to {s['to']}"
        lines.append(f"fails differently (not counted as affected) on {span}" + (f": {s['seen'][:100]}" if s["seen"]
                                                                               else ""))
    lines.append(f"assumes {result.get('assumption', ASSUMPTION)}")
    return lines


# ------------------------------------------------------------------------------ replays

def verdict_on(entry: dict, version: str, log=lambda s: None) -> dict:
    """Replay ``entry`` on released jax ``version``: its verdict record (fuzz.verdicts.of_replay);
    BisectError if that jax cannot run."""
    from fuzz.execute import WorkerError
    from fuzz.provision import ProvisionError, worker_python
    from fuzz.replay import replay_entry
    from fuzz.runner import Runner

    try:  # (this interpreter for its own jax; a venv made with $SHARDFUZZ_VENV_PYTHON if it fits: bisect --venv-python)
        python = worker_python(jax_version=version, log=log, reuse_here=True)
    except ProvisionError as e:
        raise BisectError(str(e)) from None
    try:
        runner = Runner(python=python, determinism=entry["oracle"] == "determinism")
    except WorkerError as e:
        raise BisectError(f"jax {version}: {e}") from None
    try:
        return of_replay(replay_entry(entry, runner), runner.caps)
    finally:
        runner.close()


@click.command("bisect")
@click.argument("entry_path", type=click.Path(dir_okay=False))
@click.option("--from", "lo", default=None, help="Oldest release to test (X.Y.Z; default: the oldest supported).")
@click.option("--to", "hi", default=None, help="Newest release to test (X.Y.Z; default: the newest).")
@click.option("--venv-python", default=None, metavar="PATH",
              help="Python to make the releases' venvs with when their wheels fit (default: $SHARDFUZZ_VENV_PYTHON, "
                   "this one, or a python3.N on PATH that fits).")
def bisect(entry_path, lo, hi, venv_python):
    """Replay a corpus entry on released JAX versions: first affected, last unaffected, fixed in.

    Venvs are made once per release in ~/.cache/shardfuzz (about 1 GB and 30-90 s each).
    The result is written into the entry's ``releases`` field. Exit 2 (one line, entry
    unchanged) for an invalid entry or range, a release that cannot be installed, or an
    entry that does not reproduce on the release it was recorded on.
    """
    from fuzz.program import CorpusError, load_entry, write_entry

    def log(msg: str) -> None:
        click.echo(msg, err=True)

    try:
        if venv_python:  # (checked once; each release's venv is then made with it where it fits: verdict_on)
            from fuzz.provision import VENV_PYTHON_ENV, ProvisionError, check_venv_python

            try:
                check_venv_python(venv_python)
            except ProvisionError as e:
                raise BisectError(str(e)) from None
            os.environ[VENV_PYTHON_ENV] = venv_python
        try:
            entry = load_entry(entry_path)
        except CorpusError as e:
            raise BisectError(str(e)) from None
        versions = select(released_versions(), lo, hi)
        recorded = entry["jax_version"]
        anchors = [recorded] if recorded in versions else []
        log(f"bisecting {Path(entry_path).name} over {len(versions)} releases {versions[0]}..{versions[-1]} "
            f"(assumes {ASSUMPTION})")
        start = time.monotonic()
        cache: dict = {}

        def verdict_of(v: str) -> str:
            if v not in cache:
                t0 = time.monotonic()
                cache[v] = verdict_on(entry, v, log=log)
                log(f"jax {v}: {_verdict(cache[v])} ({time.monotonic() - t0:.0f} s)")
                if v == recorded and _verdict(cache[v]) != REPRODUCES:
                    raise BisectError(f"{entry_path} does not reproduce on jax {v}, the release it was recorded on "
                                      f"({_verdict(cache[v])}); re-save the entry or mark it fixed")
            return cache[v]

        if anchors:
            verdict_of(recorded)  # first: a stale entry fails fast
        found = search(versions, verdict_of, anchors)
        # merged with the verdicts recorded before (of releases outside --from / --to: they stay)
        before = (entry.get("releases") or {}).get("tested", {})
        result = migrate({"tested": {**before, **found["tested"]}, "assumption": ASSUMPTION,
                          "seconds": round(time.monotonic() - start, 1)})
        try:
            write_entry(entry_path, {**entry, "releases": result})
        except (CorpusError, OSError) as e:
            raise BisectError(f"cannot write {entry_path} ({e}); the entry is unchanged") from None
    except BisectError as e:
        click.echo(f"shardfuzz: {e}", err=True)
        sys.exit(2)
    for line in summary(result):
        click.echo(line)
    click.echo(f"{entry_path}: releases written ({result['seconds']:.0f} s)")
