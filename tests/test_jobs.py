"""``shardfuzz run --jobs N``: N campaigns, one findings file, one report (fuzz/parallel.py)."""
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from fuzz import findings
from fuzz.faults import worker_processes
from fuzz.parallel import merge_reports, split
from oracles.common import Finding
from support.campaigns import StubRunner, finish, start_campaign

# These tests watch the process tree (orphans, signals, kills): under pytest-xdist they run
# one after another in one worker (--dist loadgroup), never beside each other.
pytestmark = pytest.mark.xdist_group("processes")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def env_without_xla():
    return {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "SHARDFUZZ_DEBUG")}


def job_processes(parent: int) -> set:
    """PIDs of child job processes (fuzz.parallel.job_main) of the process ``parent``."""
    pids = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"job_main()" in cmd and ppid == parent:
            pids.add(int(d))
    return pids


# ------------------------------------------------------------------ merging, without JAX
def finding(sig, count, first, program, reduced=True, **more):
    return {"signature": sig, "oracle": "internal-error", "kind": "builtins.ValueError", "message": sig,
            "details": "", "call": 0, "count": count, "history": [], "history_programs": [],
            "first_seconds": first, "shrunk": True, "reduced": reduced, "reduction_runs": 3,
            "reduction_seconds": 1.0, "program": program, "source": "", **more}


def report(programs, findings_, known=(), **more):
    base = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "seed": None, "determinism": True,
            "database": "db", "database_use": "replay and save", "findings_file": "f.jsonl",
            "findings_file_error": None, "unconfirmed_crash_count": 1,
            "unconfirmed_crashes": [{"worker": "execute", "status": "crash"}], "seconds": 10.0,
            "programs": programs, "generated": programs - 1, "rejected": 2, "generated_rejected": 1, "invalid": 0,
            "programs_per_second": 1.0, "worker_seconds": 4.25, "reference_seconds": 1.5,
            "features": {"jit": 3, "vmap": 1}, "depth_histogram": {"1": 2, "10": 1}, "findings": list(findings_),
            "known": list(known), "known_seconds": 2.0, "swarm": False, "avoid_known": True, "shrink": True, "disabled": [], "avoided": 0,
            "reduced": 0, "fresh": True, "look_past": True, "look_past_runs": 3, "look_past_clear": 1, "look_past_seconds": 1.25,
            "look_past_vma_runs": 2, "look_past_vma_clear": 1, "shrunk_to_known": 2,
            "generator_errors": []}
    return {**base, **more}


def test_merged_report_sums_counters_and_merges_findings_by_signature():
    small, big = {"calls": [1]}, {"calls": [1, 2, 3]}
    job0 = report(10, [finding("A", 3, 5.0, big), finding("B", 1, 7.0, {"calls": [9]})],
                  known=[{"signature": "K", "entry": "k.json", "count": 2}])
    job1 = report(20, [finding("A", 2, 1.0, small), finding("C", 4, 2.0, {"calls": [9]}),
                       finding("D", 1, 3.0, {"calls": [4, 4]}, reduced=False)],
                  known=[{"signature": "K", "entry": "k.json", "count": 5}], features={"jit": 1, "grad": 2},
                  depth_histogram={"2": 4, "10": 1})
    results = [
        {"job": 0, "seed": 7, "report": job0, "started": 1000.0, "peer_hits": {"C": 2, "old": 1, "K2": 3},
         "aliases": {"old": "D"}, "error": "", "recovered": False},
        {"job": 1, "seed": 1007, "report": job1, "started": 1004.0, "peer_hits": {"A": 1}, "aliases": {},
         "error": "", "recovered": False},
    ]
    m = merge_reports(results, seconds=15.0, corpus_signatures={"K2": "k2.json"})
    assert m["jobs"] == 2 and [s["seed"] for s in m["job_stats"]] == [7, 1007]
    assert (m["programs"], m["generated"], m["rejected"], m["generated_rejected"]) == (30, 28, 4, 2)
    assert m["programs_per_second"] == 2.0 and m["seconds"] == 15.0
    assert (m["worker_seconds"], m["reference_seconds"], m["known_seconds"]) == (8.5, 3.0, 4.0)
    assert (m["look_past_runs"], m["look_past_clear"], m["look_past_seconds"]) == (6, 2, 2.5)
    assert (m["look_past_vma_runs"], m["look_past_vma_clear"]) == (4, 2)
    assert m["shrunk_to_known"] == 4
    assert m["features"] == {"grad": 2, "jit": 4, "vmap": 1}
    assert m["depth_histogram"] == {"1": 2, "2": 4, "10": 2}  # (numeric order)
    assert m["unconfirmed_crash_count"] == 2 and [u["job"] for u in m["unconfirmed_crashes"]] == [0, 1]
    by = {f["signature"]: f for f in m["findings"]}
    # A: both jobs; the smaller program kept; counts summed (+1 peer hit); the earliest time, on job 0's clock
    assert by["A"]["program"] == small and by["A"]["count"] == 3 + 2 + 1 and by["A"]["first_seconds"] == 5.0
    # B and C: the same reduced program under two signatures: one finding (C's first, at 4 + 2 s)
    assert ("B" in by) != ("C" in by)
    bc = by.get("B") or by["C"]
    assert bc["count"] == 1 + 4 + 2 and bc["first_seconds"] == 6.0
    # D: a peer hit of a signature that moved to D counts for D
    assert by["D"]["count"] == 2
    assert [f["first_seconds"] for f in m["findings"]] == sorted(f["first_seconds"] for f in m["findings"])
    known = {k["signature"]: k["count"] for k in m["known"]}
    assert known == {"K": 7, "K2": 3}  # a peer hit of a finding that became a corpus finding
    assert m["reduced"] == 2  # A and B/C (D was not reduced)
    single = report(1, [])
    assert set(single) | {"jobs", "job_stats"} == set(m)


def test_max_examples_are_shared_out():
    assert split(None, 3) == [None] * 3
    assert split(5, 2) == [3, 2] and split(2, 2) == [1, 1] and sum(split(10, 4)) == 10


# ------------------------------------------------------------------ the findings file, shared
def test_an_append_waits_for_the_lock_another_process_holds(tmp_path):
    path = str(tmp_path / "findings.jsonl")
    findings.append(path, {"signature": "first"})
    fd = os.open(path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    t = threading.Thread(target=findings.append, args=(path, {"signature": "second"}))
    t.start()
    time.sleep(0.5)
    try:
        assert [r["signature"] for r in findings.read(path)] == ["first"]  # still waiting
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    t.join(5)
    assert [r["signature"] for r in findings.read(path)] == ["first", "second"]


def test_read_since_reads_whole_lines_only(tmp_path):
    path = str(tmp_path / "findings.jsonl")
    findings.append(path, {"signature": "a"})
    got, offset = findings.read_since(path, 0)
    assert [r["signature"] for r in got] == ["a"]
    with open(path, "ab") as f:
        f.write(b'{"signature": "b"')  # being written
    assert findings.read_since(path, offset) == ([], offset)
    with open(path, "ab") as f:
        f.write(b"}\n")
    got, offset2 = findings.read_since(path, offset)
    assert [r["signature"] for r in got] == ["b"] and offset2 == os.path.getsize(path)


def test_a_finding_another_job_recorded_is_counted_not_recorded_again(tmp_path, monkeypatch):
    import fuzz.campaign

    monkeypatch.setattr(fuzz.campaign, "Runner", StubRunner)
    path = str(tmp_path / "findings.jsonl")
    theirs = Finding("internal-error", "builtins.ValueError", "found by job 1 first")
    other_run = Finding("internal-error", "builtins.ValueError", "found in another run")
    findings.append(path, {"signature": theirs.signature, "run": "r1", "job": 1, "program": {}})
    findings.append(path, {"signature": other_run.signature, "run": "r0", "job": 1, "program": {}})
    # (avoid_known off: the stub programs here are not programs whose names could be read)
    c = fuzz.campaign.Campaign(findings_path=path, run_id="r1", job=0, avoid_known=False)
    c.start = time.monotonic()
    c.runner.found = [theirs, other_run]
    c.run_program({"functions": {}, "calls": []})  # (two programs that differ; no shard_map to look past)
    c.run_program({"functions": {}, "calls": [], "inputs": []})
    assert list(c.records) == [other_run.signature]  # (another run's finding is new to this one)
    assert c.records[other_run.signature].count == 2
    assert c.peer_hits == {theirs.signature: 2} and theirs.signature in c.known
    mine = [r for r in findings.read_lines(path) if r.get("job") == 0]
    assert [(r["signature"], r["run"]) for r in mine] == [(other_run.signature, "r1")]
    single = fuzz.campaign.Campaign(findings_path=path)  # one job: no run id, nothing is a peer's
    single.start = time.monotonic()
    single.runner.found = [theirs]
    single.run_program({"functions": {}, "calls": []})
    assert list(single.records) == [theirs.signature] and not single.peer_hits
    assert "run" not in findings.read_lines(path)[-1]


# ------------------------------------------------------------------ the command line
def test_two_jobs_write_one_report(tmp_path):
    orphans_before = worker_processes(parent=1)
    out = tmp_path / "r.json"
    args = [sys.executable, "-m", "fuzz", "run", "--jobs", "2", "--max-examples", "4", "--seed", "3",
            "--no-determinism", "--report", str(out), "--database", str(tmp_path / "db" / "examples")]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env_without_xla())
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(out.read_text())
    assert data["jobs"] == 2 and data["generated"] == 4
    stats = data["job_stats"]
    assert [(s["job"], s["seed"], s["generated"]) for s in stats] == [(0, 3, 2), (1, 1003, 2)]
    assert data["programs"] == sum(s["programs"] for s in stats) >= 2  # (a program drawn twice runs once)
    assert (r.returncode == 1) == bool(data["findings"])
    assert r.stderr.count("programs in") == 1 and "2 jobs (seeds 3, 1003)" in r.stderr
    for line in findings.read_lines(str(tmp_path / "db" / "findings.jsonl")):
        assert line["job"] in (0, 1) and line["run"]
    assert worker_processes(parent=1) - orphans_before == set()


def test_a_stop_signal_stops_every_job_and_a_killed_job_loses_nothing_else(tmp_path):
    """--jobs 3: job 2 is SIGKILLed (one line; its workers die with it), then SIGTERM to shardfuzz: jobs 0 and 1
    stop, one report with all three jobs, one "interrupted" line, no process left."""
    orphans_before = worker_processes(parent=1)
    out = tmp_path / "r.json"
    p, lines = start_campaign(["--jobs", "3", "--time", "300", "--no-determinism", "--report", str(out),
                               "--database", ""], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while True:  # until both child jobs run programs (their workers are up)
            jobs = job_processes(p.pid)
            workers = {j: worker_processes(parent=j) for j in jobs}
            if len(jobs) == 2 and all(workers.values()):
                break
            assert p.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.5)
        time.sleep(5)  # (JAX starts in the workers: most likely the jobs run programs by now)
        own = worker_processes(parent=p.pid)
        victim = max(jobs)  # (started last: job 2)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while workers[victim] & worker_processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert workers[victim] & worker_processes() == set(), "a killed job's workers must die with it"
        time.sleep(1)
        p.send_signal(signal.SIGTERM)
        err = finish(p, lines)
    finally:
        p.kill()
    assert p.returncode in (0, 1), err
    assert err.count("interrupted") == 1 and "interrupted (SIGTERM)" in err, err
    lost = [ln for ln in err.splitlines() if "ended without a report" in ln]
    assert len(lost) == 1 and lost[0].startswith("shardfuzz: job 2 ") and "SIGKILL" in lost[0], err
    data = json.loads(out.read_text())
    assert data["interrupted"] == "SIGTERM" and data["jobs"] == 3
    assert [s["job"] for s in data["job_stats"]] == [0, 1, 2] and data["job_stats"][2]["recovered_from_findings_file"]
    assert not any(s["error"] for s in data["job_stats"])  # (job 1 reported, or said it stopped before it began)
    time.sleep(1)
    left = (own | set().union(*workers.values())) & worker_processes()
    assert left == set() and job_processes(p.pid) == set()
    assert worker_processes(parent=1) - orphans_before == set()


FAIL_IN_JOB_1 = """
import fuzz.campaign
_run = fuzz.campaign.Campaign.run
def run(self):
    if self.job == 1:
        raise RuntimeError("boom in job 1")
    return _run(self)
fuzz.campaign.Campaign.run = run
"""


def test_an_internal_error_in_one_job_stops_all_and_keeps_the_report(tmp_path):
    """Job 1 raises (a bug of ours): every job stops, the merged report is written, exit 2 and one line."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(FAIL_IN_JOB_1)  # (imported by every Python process started with it)
    env = env_without_xla()
    env["PYTHONPATH"] = os.pathsep.join([str(site), ROOT])
    args = [sys.executable, "-m", "fuzz", "run", "--jobs", "2", "--no-determinism", "--database", "",
            "--report", "r.json"]
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stderr
    assert time.monotonic() - t0 < 200, "the other job was not stopped"
    assert r.stderr.strip().splitlines()[-1] == ("shardfuzz: internal error: job 1: RuntimeError: boom in job 1 "
                                                 "(please report; SHARDFUZZ_DEBUG=1 shows the traceback)")
    assert "Traceback" not in r.stderr and "interrupted" not in r.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["jobs"] == 2 and data["job_stats"][1]["error"] == "RuntimeError: boom in job 1"
    assert data["interrupted"] is None


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_bad_jobs_is_exit_2(tmp_path, jobs):
    r = subprocess.run([sys.executable, "-m", "fuzz", "run", "--jobs", jobs], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path, env=env_without_xla())
    assert r.returncode == 2 and "--jobs" in r.stderr
