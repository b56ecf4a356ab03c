"""Where a program's time goes, per phase, for one JAX release (issue: half the cost of a program).

    python benchmarks/phases.py --programs 150 --seed 1                         # the installed JAX
    python benchmarks/phases.py --programs 150 --seed 1 --python VENV/bin/python # another JAX
    python benchmarks/phases.py --programs 150 --seed 1 --jax-version 0.12.1 --venv-python PY313

Programs are drawn as a campaign draws them (``fuzz.campaign.draw_settings``, fresh draws,
round ``i`` of seed ``s`` seeded ``s * 7919 + i``, nothing avoided, no shrinking) and each is
run once by ``fuzz.runner.Runner.run`` with determinism on, exactly as a campaign runs it.
The workers are started with ``SHARDFUZZ_PHASES=1`` (fuzz/phases.py), so each reply says how
its seconds split into JAX's phases. Per program, in seconds of one core:

- fuzzer process: ``generate`` (Hypothesis drawing the program), ``typecheck``, ``render``,
  ``reference`` (the unsharded NumPy reference; it runs while the workers run), ``judge``
  (the oracles), ``ipc`` (each request's time from the fuzzer's write until the worker read
  it, both workers, and decoding the replies' arrays; the reply's own way back is not
  counted: it waits in a pipe while the fuzzer computes the reference, which overlaps);
- execution worker: ``trace``, ``lower``, ``compile``, ``execute``, ``other`` (dispatch,
  eager bookkeeping, the program's own Python, printing each call's jaxpr, encoding results);
- lowering worker (another PYTHONHASHSEED, lowers twice, runs nothing): ``det_trace``,
  ``det_lower``, ``det_compile`` (should be 0), ``det_other``.

Prints one JSON line per program (``--rows``), then one summary JSON line: the mean and median
of each phase, the total core-seconds per program, its share, and the wall seconds per
program (the reference overlaps the workers). ``--markdown`` also prints the table for
docs/measurements.md. The first ``--warmup`` programs (default 3) are run but not counted
(a worker's first compilations pay for JAX's own start).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

FUZZER = ("generate", "typecheck", "render", "reference", "judge", "ipc")
WORKER = ("trace", "lower", "compile", "execute", "other")
LOWERER = ("det_trace", "det_lower", "det_compile", "det_other")
ALL = FUZZER + WORKER + LOWERER


def _timed(owner, name: str, acc: dict, key: str) -> None:
    """Wrap ``owner.name`` so that its seconds add to ``acc[key]``."""
    fn = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[key] = acc.get(key, 0.0) + time.perf_counter() - t0

    setattr(owner, name, wrapper)


def measure(python: str | None, programs: int, seed: int, warmup: int = 3, on_row=None) -> dict:
    """Run ``programs`` drawn programs (plus ``warmup``) on the JAX of ``python`` (None: this
    interpreter's) and return the summary of the module docstring; ``on_row(row)`` is called with
    each counted program's row. Raises fuzz.execute.WorkerError when the workers do not start."""
    os.environ["SHARDFUZZ_PHASES"] = "1"  # (read by the workers: fuzz/phases.py)
    from hypothesis import given
    from hypothesis import seed as hseed
    from hypothesis import settings

    import fuzz.runner as R
    import oracles
    from fuzz.campaign import ROUND, draw_settings
    from fuzz.execute import Worker
    from strategies.swarm import swarm_programs

    acc: dict = {}
    _timed(R, "check_program", acc, "typecheck")
    _timed(R, "render", acc, "render")
    _timed(R, "evaluate", acc, "reference")
    _timed(oracles, "judge", acc, "judge")
    replies: list = []
    collect = Worker.collect

    def collecting(self, *args, **kwargs):
        out = collect(self, *args, **kwargs)
        replies.append((self, out))
        return out

    submit = Worker.submit

    def submitting(self, *args, **kwargs):
        self.submitted_at = time.time()
        return submit(self, *args, **kwargs)

    Worker.collect, Worker.submit = collecting, submitting
    import fuzz.execute as E

    _timed(E, "decode", acc, "decode")
    runner = R.Runner(python=python, determinism=True)
    rows: list = []
    state = {"left": programs + warmup, "since": time.perf_counter()}
    try:
        index = 0
        while state["left"] > 0:
            @hseed(seed * 7919 + index)
            @settings(draw_settings(True, max_examples=min(ROUND, state["left"])))
            @given(swarm_programs(runner.caps))
            def one(program):
                generate = time.perf_counter() - state["since"]
                acc.clear()
                replies.clear()
                t0 = time.perf_counter()
                runner.run(program)
                wall = time.perf_counter() - t0 + generate
                state["left"] -= 1
                row = {"generate": generate, **{k: acc.get(k, 0.0) for k in ("typecheck", "render", "reference",
                                                                               "judge")}}
                row.update(dict.fromkeys(WORKER + LOWERER, 0.0))
                row["ipc"] = acc.get("decode", 0.0)  # (and below, each request's time in the pipe)
                for w, out in replies:
                    seconds, phases = out.get("seconds", 0.0), out.get("phases") or {}
                    if "received_at" in out:  # (the request's time in the pipe: worker and fuzzer share a clock)
                        row["ipc"] += max(0.0, out["received_at"] - w.submitted_at)
                    prefix = "det_" if w is runner.lowerer else ""
                    for k in ("trace", "lower", "compile", "execute"):
                        if prefix + k in row:
                            row[prefix + k] += phases.get(k, 0.0)
                    row[prefix + "other"] += max(0.0, seconds - sum(phases.get(k, 0.0) for k in
                                                                   ("trace", "lower", "compile", "execute")))
                row["wall"] = wall
                if state["left"] < programs:  # (past the warm-up)
                    rows.append(row)
                    if on_row:
                        on_row(row)
                if state["left"] <= 0:
                    raise _Done()
                state["since"] = time.perf_counter()

            try:
                one()
            except _Done:
                break
            index += 1
    finally:
        Worker.collect, Worker.submit = collect, submit
        runner.close()
    return summarize(rows, runner.caps)


class _Done(BaseException):
    """Raised in the Hypothesis test once enough programs ran (a BaseException: not a failure)."""


def summarize(rows: list, caps: dict) -> dict:
    """Mean and median seconds per phase over ``rows`` (dicts of phase -> seconds), the total
    core-seconds per program, each phase's share of it, and the mean wall seconds per program."""
    phases = [k for k in ALL if any(k in r for r in rows)]
    total = [sum(r.get(k, 0.0) for k in phases) for r in rows]
    mean_total = statistics.mean(total) if rows else 0.0
    return {"jax_version": caps.get("jax_version"), "python": caps.get("python_version"), "programs": len(rows),
            "mean": {k: round(statistics.mean(r.get(k, 0.0) for r in rows), 4) for k in phases},
            "median": {k: round(statistics.median(r.get(k, 0.0) for r in rows), 4) for k in phases},
            "share": {k: round(statistics.mean(r.get(k, 0.0) for r in rows) / mean_total, 3) if mean_total else 0.0
                      for k in phases},
            "core_seconds_per_program": round(mean_total, 4),
            "median_core_seconds_per_program": round(statistics.median(total), 4) if rows else 0.0,
            "wall_seconds_per_program": round(statistics.mean(r["wall"] for r in rows), 4) if rows else 0.0}


def markdown(summary: dict) -> str:
    """The summary as a markdown table: phase, mean s, median s, share."""
    lines = [f"JAX {summary['jax_version']}, {summary['programs']} programs: "
             f"{summary['core_seconds_per_program']} core-s per program (median "
             f"{summary['median_core_seconds_per_program']}), wall {summary['wall_seconds_per_program']} s",
             "", "| phase | mean s | median s | share |", "|---|---|---|---|"]
    for k in summary["mean"]:
        lines.append(f"| {k} | {summary['mean'][k]:.4f} | {summary['median'][k]:.4f} | {summary['share'][k]:.1%} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--python", default=None, help="interpreter whose JAX the workers use")
    ap.add_argument("--jax-version", default=None, help="a released JAX in a cached venv (fuzz.provision)")
    ap.add_argument("--venv-python", default=None, help="the interpreter to make that venv with")
    ap.add_argument("--rows", action="store_true", help="print every program's row")
    ap.add_argument("--markdown", action="store_true", help="print the table too")
    args = ap.parse_args(argv)
    python = args.python
    if args.jax_version:
        from fuzz.provision import ProvisionError, worker_python

        try:
            python = worker_python(None, args.jax_version, args.venv_python, log=lambda s: print(s, file=sys.stderr))
        except ProvisionError as e:
            print(f"phases.py: {e}", file=sys.stderr)
            return 2
    summary = measure(python, args.programs, args.seed, args.warmup,
                      on_row=(lambda r: print(json.dumps({k: round(v, 4) for k, v in r.items()}), flush=True))
                      if args.rows else None)
    print(json.dumps(summary), flush=True)
    if args.markdown:
        print(markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
