"""Kill campaigns at random moments: is every finding kept, and is no worker left behind?

    python benchmarks/kills.py --count 50                 # SIGKILL: the findings file must hold them
    python benchmarks/kills.py --count 50 --signal TERM   # SIGTERM: the report must hold them

Each trial starts ``shardfuzz run`` in a fresh directory with faults injected
(``SHARDFUZZ_TEST_FAULT=abort:SHARE``: that share of programs aborts, always, with one
of 8 messages, so confirmed findings accumulate), waits until the campaign has started,
then a time drawn uniformly from ``--window``, and sends the signal. It then checks:

- KILL: the findings file (``<dir>/db/findings.jsonl``) reads, every line whole but
  possibly the last, and holds every finding the campaign announced ("finding N: ...")
  before the kill;
- TERM: exit 0 or 1, the report reads, says ``"interrupted": "SIGTERM"`` and holds every
  announced finding;
- both: every worker process the campaign ever had (polled from /proc) is gone within
  ``--grace`` seconds, and no new orphan worker appeared (``ps``-style scan of /proc).

Prints one JSON line per trial and a summary line; exits 1 if any trial failed.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzz import findings  # noqa: E402
from fuzz.faults import worker_processes  # noqa: E402

SIG_WIDTH = 150  # the CLI prints at most this many characters of a signature


def trial(index: int, args, rng: random.Random) -> dict:
    d = Path(tempfile.mkdtemp(prefix=f"shardfuzz-kills-{index}-"))
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["SHARDFUZZ_TEST_FAULT"] = f"abort:{args.share}"
    cmd = [sys.executable, "-m", "fuzz", "run", "--time", "3600", "--database", str(d / "db" / "examples"),
           "--report", str(d / "report.json")] + ([] if args.determinism else ["--no-determinism"])
    orphans_before = worker_processes(parent=1)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=d, env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    lines = []  # (monotonic time, line)

    def read():
        for ln in p.stderr:
            lines.append((time.monotonic(), ln.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    result = {"trial": index, "signal": args.signal, "dir": str(d)}
    while not any("host CPU devices" in ln for _, ln in lines):
        if p.poll() is not None or time.monotonic() - t0 > 300:
            p.kill()
            reader.join(5)
            return {**result, "ok": False, "error": "the campaign did not start",
                    "stderr": [ln for _, ln in lines][-5:]}
        time.sleep(0.05)
    delay = rng.uniform(*args.window)
    result["delay"] = round(delay, 2)
    seen_workers: set = set()
    until = time.monotonic() + delay
    while time.monotonic() < until and p.poll() is None:
        seen_workers |= worker_processes(parent=p.pid)
        time.sleep(0.2)
    seen_workers |= worker_processes(parent=p.pid)
    sent = time.monotonic()
    p.send_signal(signal.SIGKILL if args.signal == "KILL" else signal.SIGTERM)
    try:
        p.wait(timeout=args.grace + 120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        result["error"] = "did not exit within the grace time"
    reader.join(5)
    result["exit"] = p.returncode
    announced = [ln.split(": ", 1)[1] for t, ln in lines if t < sent and ln.startswith("finding ")]
    result["announced"] = len(announced)
    ok = "error" not in result
    try:
        if args.signal == "KILL":
            path = d / "db" / "findings.jsonl"
            raw = [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]
            records = findings.read_lines(str(path))
            result["whole_lines"] = len(records) == len(raw) or (len(records) == len(raw) - 1
                                                                 and not path.read_bytes().endswith(b"\n"))
            kept = {r["signature"][:SIG_WIDTH] for r in findings.read(str(path))}
            ok &= result["whole_lines"]
        else:
            report = json.loads((d / "report.json").read_text())
            kept = {f["signature"][:SIG_WIDTH] for f in report["findings"]}
            result["interrupted"] = report.get("interrupted")
            ok &= p.returncode in (0, 1) and report.get("interrupted") == "SIGTERM"
        result["readable"] = True
    except (OSError, ValueError, KeyError) as e:
        result["readable"] = False
        result["error"] = f"{type(e).__name__}: {e}"
        kept = set()
        ok = False
    result["kept"] = len(kept)
    result["missing"] = [s for s in announced if s not in kept]
    deadline = time.monotonic() + args.grace
    while seen_workers & worker_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    result["workers_seen"] = len(seen_workers)
    result["workers_left"] = sorted(seen_workers & worker_processes())
    result["orphans_new"] = sorted(worker_processes(parent=1) - orphans_before)
    result["seconds"] = round(time.monotonic() - t0, 1)
    result["ok"] = bool(ok and not result["missing"] and not result["workers_left"] and not result["orphans_new"])
    if result["ok"] and not args.keep:
        import shutil

        shutil.rmtree(d, ignore_errors=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=50, help="trials")
    ap.add_argument("--signal", choices=("KILL", "TERM"), default="KILL")
    ap.add_argument("--window", type=float, nargs=2, default=(2.0, 30.0), metavar=("FROM", "TO"),
                    help="seconds after the campaign started within which the signal is sent (uniform)")
    ap.add_argument("--share", type=float, default=0.3, help="share of programs that abort")
    ap.add_argument("--grace", type=float, default=5.0, help="seconds the workers may take to die")
    ap.add_argument("--no-determinism", dest="determinism", action="store_false",
                    help="one worker per campaign instead of two")
    ap.add_argument("--seed", type=int, default=None, help="seed of the kill times")
    ap.add_argument("--keep", action="store_true", help="keep the trial directories of passing trials too")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    t0 = time.monotonic()
    results = []
    for i in range(args.count):
        r = trial(i, args, rng)
        results.append(r)
        print(json.dumps(r), flush=True)
    print(json.dumps({
        "summary": True, "signal": args.signal, "trials": len(results), "ok": sum(r["ok"] for r in results),
        "announced": sum(r.get("announced", 0) for r in results),
        "missing": sum(len(r.get("missing", [])) for r in results),
        "unreadable": sum(not r.get("readable", False) for r in results),
        "workers_seen": sum(r.get("workers_seen", 0) for r in results),
        "workers_left": sum(len(r.get("workers_left", [])) for r in results),
        "orphans_new": sum(len(r.get("orphans_new", [])) for r in results),
        "seconds": round(time.monotonic() - t0, 1)}), flush=True)
    sys.exit(0 if all(r["ok"] for r in results) else 1)


if __name__ == "__main__":
    main()
