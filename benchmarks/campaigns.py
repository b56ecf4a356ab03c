"""Default campaigns side by side: issue 9's changes on and off, or --jobs 2 against --jobs 1.

    python benchmarks/campaigns.py issue9 --seeds 1 2 3 --seconds 600   # with / without, one pair per seed
    python benchmarks/campaigns.py jobs --seeds 1 --seconds 600         # --jobs 1, then --jobs 2
    python benchmarks/campaigns.py swarm --seeds 1 2 3 --seconds 600    # default / --swarm, one pair per seed
    python benchmarks/campaigns.py lookpast --seeds 1 2 3 --seconds 600 # default / --no-look-past, one pair per seed
    python benchmarks/campaigns.py revs --revs 508d5b0 HEAD --seeds 1 2 --seconds 300   # two versions of shardfuzz

Each run is ``shardfuzz run --seed S --time T --database '' --report ...`` (the corpus as
known findings, determinism on) from a ``git archive`` snapshot of HEAD, so that edits to
the working tree cannot change a long benchmark.

- ``issue9``: *with* is the default campaign; *without* turns off what issue 9 added to the
  search: avoidance of known bugs (``--no-avoid-known``), looking past them (``--no-look-past``) and non-uniform derivatives
  (``--disable wsum --disable vjp --disable jvp --disable linearize``: grads then take plain
  sums, so their cotangents are all ones). The two runs of a seed go at the same time, each
  with ``--jobs 1``, so that they share the machine's load.
- ``swarm``: the default campaign against ``--swarm`` (strategies/swarm.py), at the same
  time, each with ``--jobs 1``, as for ``issue9``.
- ``lookpast``: the default campaign against ``--no-look-past`` (a program that raised a known
  finding is not run again without that finding's ops), at the same time, ``--jobs 1`` each.
- ``jobs``: ``--jobs 1`` and then ``--jobs 2``, one after the other (each wants every core).
- ``revs``: the default campaign of each git revision of ``--revs`` (each from its own
  ``git archive`` snapshot, its own corpus as the known findings), all at the same time,
  each with ``--jobs 1``: a change's cost in programs/s, side by side.

Per run: programs, programs/s, distinct signatures (new findings plus corpus entries hit),
new findings, and the share of the time spent on fresh programs that hit an already
known signature (``known_seconds / seconds``). Rows go to stdout as JSON lines, then a
table with the medians per variant. ``--keep DIR`` keeps each run's report (its findings)
and stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from seeded import extract  # noqa: E402
WITHOUT_ISSUE9 = ["--no-avoid-known", "--no-look-past"] + [a for n in ("wsum", "vjp", "jvp", "linearize") for a in ("--disable", n)]
# the comparisons whose two variants run at the same time: (variant, extra options of shardfuzz run)
PAIRS = {"issue9": [("with", []), ("without", WITHOUT_ISSUE9)],
         "swarm": [("default", []), ("swarm", ["--swarm"])],
         "lookpast": [("default", []), ("no_look_past", ["--no-look-past"])]}


def snapshot(dest: Path, rev: str = "HEAD") -> Path:
    """The files of git revision ``rev`` in ``dest`` (seeded.extract: git archive); returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    if not extract(rev, str(dest)):
        raise SystemExit(f"campaigns.py: git archive {rev[:40]} failed: is it a revision of this repository?")
    return dest


def start(code: Path, work: Path, name: str, seed: int, seconds: float, extra: list) -> tuple:
    """Start one campaign in ``work/name``; returns (process, report path)."""
    d = work / name
    d.mkdir()
    report = d / "report.json"
    env = {**os.environ, "PYTHONPATH": str(code)}
    env.pop("XLA_FLAGS", None)
    cmd = [sys.executable, "-m", "fuzz", "run", "--seed", str(seed), "--time", str(seconds), "--database", "",
           "--corpus", str(code / "corpus"), "--report", str(report), *extra]
    proc = subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=open(d / "stderr.txt", "w"))
    return proc, report


def row(variant: str, seed: int, report: Path) -> dict:
    """The figures of one finished run (``error`` when it wrote no report)."""
    if not report.exists():
        return {"variant": variant, "seed": seed, "error": f"no report (see {report.parent / 'stderr.txt'})"}
    r = json.loads(report.read_text())
    sigs = {f["signature"] for f in r["findings"]} | {k["signature"] for k in r["known"]}
    return {"variant": variant, "seed": seed, "programs": r["programs"], "seconds": r["seconds"],
            "programs_per_second": r["programs_per_second"], "distinct_signatures": len(sigs),
            "new_findings": len(r["findings"]), "known_entries_hit": len(r["known"]),
            "known_time_share": round(r["known_seconds"] / r["seconds"], 3) if r["seconds"] else None,
            "look_past_runs": r.get("look_past_runs"), "look_past_clear": r.get("look_past_clear"),
            "look_past_time_share": round(r.get("look_past_seconds", 0.0) / r["seconds"], 3) if r["seconds"] else None,
            # JAX (worker) and the unsharded reference per program, seconds: the programs' own cost,
            # apart from shrinking and generation
            "run_seconds_per_program": round((r["worker_seconds"] + r["reference_seconds"]) / r["programs"], 3)
            if r["programs"] else None,
            "jobs": r.get("jobs", 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("comparison", choices=["issue9", "swarm", "lookpast", "jobs", "revs"])
    ap.add_argument("--revs", nargs="+", default=[], help="Git revisions to compare (revs).")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--keep", default=None, help="Copy each run's directory (report, stderr) here.")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="shardfuzz-campaigns-") as tmp:
        if args.comparison == "revs" and len(args.revs) < 2:
            raise SystemExit("campaigns.py: revs needs two or more revisions: --revs OLD NEW")
        # the runs of a seed that go at the same time: (variant, directory label, code, extra options)
        if args.comparison == "revs":
            arms = [(rev, f"rev{k}", snapshot(Path(tmp) / f"code-{k}", rev), []) for k, rev in enumerate(args.revs)]
        else:
            code = snapshot(Path(tmp) / "code")
            arms = [(variant, variant, code, extra) for variant, extra in PAIRS.get(args.comparison, [])]
        work = Path(tmp) / "runs"
        work.mkdir()
        for seed in args.seeds:
            if arms:
                runs = [(variant, start(code_, work, f"{label}-{seed}", seed, args.seconds, ["--jobs", "1", *extra]))
                        for variant, label, code_, extra in arms]
                for _, (proc, _) in runs:
                    proc.wait()
            else:
                runs = []
                for jobs in (1, 2):
                    proc, report = start(code, work, f"jobs{jobs}-{seed}", seed, args.seconds, ["--jobs", str(jobs)])
                    proc.wait()
                    runs.append((f"jobs {jobs}", (proc, report)))
            for variant, (_, report) in runs:
                if args.keep:
                    shutil.copytree(report.parent, Path(args.keep) / report.parent.name, dirs_exist_ok=True)
                rows.append(row(variant, seed, report))
                print(json.dumps(rows[-1]), flush=True)
    print(f"\n{'variant':10} {'runs':>4} {'programs/s':>10} {'distinct sigs':>13} {'new':>5} {'known time':>10} "
          f"{'run s/program':>13}")
    for variant in dict.fromkeys(r["variant"] for r in rows):
        ok = [r for r in rows if r["variant"] == variant and "error" not in r]
        if not ok:
            print(f"{variant:10} {0:>4}")
            continue
        ok = [r for r in ok if r["programs"]]  # (a run without programs has no per-program figures)
        if not ok:
            print(f"{variant:10} {0:>4}")
            continue
        med = {k: statistics.median(r[k] for r in ok) for k in
               ("programs_per_second", "distinct_signatures", "new_findings", "known_time_share",
                "run_seconds_per_program")}
        print(f"{variant:10} {len(ok):>4} {med['programs_per_second']:>10.3f} {med['distinct_signatures']:>13} "
              f"{med['new_findings']:>5} {med['known_time_share']:>10.1%} {med['run_seconds_per_program']:>13.3f}")


if __name__ == "__main__":
    main()
