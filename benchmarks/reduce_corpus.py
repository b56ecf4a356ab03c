"""How far the program reducer shrinks corpus entries, with a real JAX predicate.

    python benchmarks/reduce_corpus.py --entries internal-error-012199fda02b --max-runs 60
    python benchmarks/reduce_corpus.py                      # every entry (slow: one JAX run per step)

For each corpus entry (``fuzz.program.load_corpus``) it runs
``fuzz.reduce.reduce_program`` with a predicate that executes the candidate in a JAX
worker of the installed JAX (``fuzz.runner.Runner``) and is true iff a finding with the
entry's signature appears on the tracked call (``finding.call``). The finding's call is
the entry's ``call`` when it has one, else the call of the first matching finding of one
run of the entry's program (that run is not counted in ``runs``). A finding matches when its
signature equals the entry's; entries saved before the signature format changed (it now
names the JAX frame that raised) also match on (oracle, kind, normalized message), unless
``--exact``.

Prints one JSON line per entry: ``lines_before`` / ``lines_after`` (lines of the program
part of ``fuzz.render.render``: non-blank lines of the function bodies plus the CALLS
entries), ``runs`` (predicate evaluations, i.e. JAX runs), ``seconds`` and ``reduced``
(a fixed point within the budget); then a summary line. ``--out DIR`` also writes each
reduced program as ``DIR/<entry>.json``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzz.maintain import matches as maintain_matches, program_lines  # noqa: E402
from fuzz.program import load_entry  # noqa: E402
from fuzz.reduce import reduce_program  # noqa: E402
from fuzz.runner import Runner  # noqa: E402
from fuzz.util import atomic_write_text  # noqa: E402


def matches(finding, entry: dict, exact: bool) -> bool:
    """Whether a finding is the entry's: the same signature if ``exact``, else as
    ``shardfuzz reduce`` decides (:func:`fuzz.maintain.matches`)."""
    return finding.signature == entry["signature"] if exact else maintain_matches(finding, entry)


def finding_call(runner: Runner, entry: dict, exact: bool):
    """The call index on which the entry's finding shows (None: whole program), or False when it does not."""
    if "call" in entry:
        return entry["call"]
    findings, _ = runner.run(entry["program"])
    for f in findings:
        if matches(f, entry, exact):
            return f.call
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="corpus", help="corpus directory (default: corpus)")
    ap.add_argument("--entries", nargs="*", help="entry file stems to reduce (default: all)")
    ap.add_argument("--max-runs", type=int, default=300)
    ap.add_argument("--max-seconds", type=float, default=600.0)
    ap.add_argument("--out", help="directory for the reduced programs")
    ap.add_argument("--exact", action="store_true", help="match findings on the exact signature only")
    args = ap.parse_args()

    paths = sorted(Path(args.corpus).glob("*.json"))
    if args.entries:
        paths = [p for p in paths if p.stem in set(args.entries)]
        missing = set(args.entries) - {p.stem for p in paths}
        if missing:
            sys.exit(f"reduce_corpus: no entry {sorted(missing)[0]!r} in {args.corpus}; list the directory for names")
    rows = []
    for path in paths:
        entry = load_entry(path)
        runner = Runner(determinism=entry["oracle"] == "determinism")
        try:
            call = finding_call(runner, entry, args.exact)
            before = program_lines(entry["program"], runner.caps)
            if call is False:
                row = {"entry": path.stem, "lines_before": before, "skipped": "does not reproduce here"}
            else:
                def interesting(candidate, c):
                    findings, _ = runner.run(candidate)
                    return any(matches(f, entry, args.exact) and f.call == c for f in findings)

                r = reduce_program(entry["program"], interesting, call, max_runs=args.max_runs,
                                   max_seconds=args.max_seconds, caps=runner.caps)
                row = {"entry": path.stem, "lines_before": before,
                       "lines_after": program_lines(r.program, runner.caps), "runs": r.runs,
                       "seconds": round(r.seconds, 1), "reduced": r.reduced, "steps": len(r.log)}
                if args.out:
                    Path(args.out).mkdir(parents=True, exist_ok=True)
                    atomic_write_text(str(Path(args.out) / f"{path.stem}.json"),
                                      json.dumps({"call": r.call, "log": r.log, "program": r.program}, indent=1) + "\n")
        finally:
            runner.close()
        rows.append(row)
        print(json.dumps(row), flush=True)
    done = [r for r in rows if "lines_after" in r]
    if done:
        print(json.dumps({"entries": len(done),
                          "median_lines_before": statistics.median(r["lines_before"] for r in done),
                          "median_lines_after": statistics.median(r["lines_after"] for r in done),
                          "median_runs": statistics.median(r["runs"] for r in done),
                          "median_seconds": statistics.median(r["seconds"] for r in done),
                          "reduced": sum(r["reduced"] for r in done)}))


if __name__ == "__main__":
    main()
