"""How a campaign ends: signals write the report, workers never outlive the fuzzer, findings survive SIGKILL."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from fuzz import findings
from fuzz.faults import worker_processes
from support.campaigns import finish, start_campaign

# These tests watch the process tree (orphans, signals, kills): under pytest-xdist they run
# one after another in one worker (--dist loadgroup), never beside each other.
pytestmark = pytest.mark.xdist_group("processes")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gone(pids, seconds: float) -> set:
    """The pids of ``pids`` still running shardfuzz workers after waiting up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        left = pids & worker_processes()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def test_sigterm_and_sighup_end_a_campaign_like_ctrl_c(tmp_path):
    """SIGTERM (while a program hangs) and SIGHUP: report written, summary, exit 0/1, no worker left."""
    orphans_before = worker_processes(parent=1)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    runs = {}
    for name, extra in (("SIGTERM", {"SHARDFUZZ_TEST_FAULT": "hang"}), ("SIGHUP", {})):
        d = tmp_path / name
        d.mkdir()
        args = ["--time", "300", "--timeout", "600", "--report", str(d / "r.json"), "--database", ""]
        runs[name] = (d, *start_campaign(args, cwd=d, env={**env, **extra}))
    time.sleep(3)  # programs running (the SIGTERM one hangs in its first)
    children = {}
    for name, (d, p, lines) in runs.items():
        children[name] = worker_processes(parent=p.pid)
        assert len(children[name]) == 2, name  # the worker and the lowering worker
        p.send_signal(getattr(signal, name))
    for name, (d, p, lines) in runs.items():
        err = finish(p, lines)
        assert p.returncode in (0, 1), err
        assert f"interrupted ({name})" in err and "programs in" in err, err
        report = json.loads((d / "r.json").read_text())
        assert report["interrupted"] == name
        assert gone(children[name], 2) == set(), name
    assert worker_processes(parent=1) - orphans_before == set()


HANG = "import time\ntime.sleep(10 ** 6)\n"
WORKERS = """
import sys, time
from fuzz.execute import Worker
ws = [Worker(), Worker(death_signal=False), Worker(watchdog=False)]
for w in ws:
    w.submit(sys.argv[1])
print(" ".join(str(w.proc.pid) for w in ws), flush=True)
time.sleep(600)
"""


def test_workers_die_with_a_killed_parent_even_while_a_program_hangs():
    """SIGKILL of the fuzzer while its workers hang: each dies within seconds, whether by PR_SET_PDEATHSIG
    alone (no watchdog), by the watchdog thread alone (no death signal), or by both (the default)."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    p = subprocess.Popen([sys.executable, "-c", WORKERS, HANG], cwd=ROOT, env={**env, "PYTHONPATH": ROOT},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        pids = [int(x) for x in line.split()]
        assert len(pids) == 3, p.stderr.read() if p.poll() is not None else line
        time.sleep(1.5)  # the programs are hanging now
        assert set(pids) <= worker_processes(parent=p.pid)
    finally:
        p.kill()
        p.wait()
    left = gone(set(pids), 5)
    for pid in left:  # (do not leave them hanging when the test fails)
        os.kill(pid, signal.SIGKILL)
    names = dict(zip(pids, ["both", "death signal only", "watchdog only"]))
    assert left == set(), [names[x] for x in left]


CAMPAIGN = """
import sys
from fuzz.campaign import Campaign
from fuzz.faults import abort_some
c = Campaign(seconds=600, determinism=False, timeout=60, source_hook=abort_some(0.5), findings_path=sys.argv[1],
             on_finding=lambda c, rec: print(rec.finding.signature, flush=True))
print("started", flush=True)
c.run()
"""


def test_findings_are_on_disk_as_soon_as_recorded_and_survive_sigkill(tmp_path):
    """Half of all programs abort (always, so each is confirmed): SIGKILL at a random moment after the first
    finding leaves a readable findings file with every finding the campaign had announced."""
    path = tmp_path / "findings.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    p = subprocess.Popen([sys.executable, "-c", CAMPAIGN, str(path)], cwd=ROOT, env={**env, "PYTHONPATH": ROOT},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    announced = []
    threading.Thread(target=lambda: announced.extend(ln.strip() for ln in p.stdout), daemon=True).start()
    delay = random.uniform(0, 4)
    try:
        deadline = time.monotonic() + 180
        # "started", then a first crash (a real JAX bug found first, an internal error, is no crash)
        while not any(a.startswith("crash") for a in announced[1:]):
            assert p.poll() is None and time.monotonic() < deadline, p.stderr.read() if p.poll() else "too slow"
            time.sleep(0.05)
        time.sleep(delay)
        workers = worker_processes(parent=p.pid)
        p.kill()
        p.wait()
    finally:
        p.kill()
    time.sleep(0.3)  # (the reader thread drains the pipe)
    seen = {r["signature"]: r for r in findings.read(str(path))}
    lines = [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]
    assert len(findings.read_lines(str(path))) == len(lines)  # every line whole
    for sig in announced[1:]:
        assert sig in seen, (delay, sig)
    crashes = [r for r in seen.values() if r["oracle"] == "crash"]
    assert crashes, seen.keys()
    for some in crashes:
        assert {"signature", "oracle", "kind", "message", "program", "source", "count", "campaign_started", "seed",
                "jax_version"} <= set(some)
        assert "injected fault" in some["message"]
    assert gone(workers, 5) == set()


def test_a_seeded_campaign_still_saves_to_the_example_database(tmp_path):
    """Hypothesis's @seed turns the database off; a seeded campaign writes it anyway (and does not replay it)."""
    from fuzz.campaign import Campaign
    from fuzz.faults import raising

    db = tmp_path / "examples"
    c = Campaign(seconds=3, shrink_seconds=3, max_examples=3, seed=1, database=str(db), determinism=False,
                 source_hook=raising())
    try:
        report = c.run()
    finally:
        c.close()
    assert report["findings"], "every program raises: there must be a finding"
    assert report["database"] == str(db) and report["database_use"].startswith("save only")
    assert [p for p in db.rglob("*") if p.is_file()], "the failing example was not saved"


def test_the_findings_file_reader_keeps_the_last_whole_record_per_signature(tmp_path):
    """A record cut short (a kill or a full disk mid-write) is skipped, and the next append is not glued to it."""
    path = str(tmp_path / "findings.jsonl")
    findings.append(path, {"signature": "a", "count": 1})
    findings.append(path, {"signature": "b", "count": 1})
    findings.append(path, {"signature": "a", "count": 5})
    with open(path, "ab") as f:
        f.write(b'{"signature": "c", "cou')  # cut short
    assert [(r["signature"], r["count"]) for r in findings.read(path)] == [("a", 5), ("b", 1)]
    findings.append(path, {"signature": "d", "count": 1})
    findings.supersede(path, "b", "d")
    assert [r["signature"] for r in findings.read(path)] == ["a", "d"]
    assert len(findings.read_lines(path)) == 5  # all but the cut one
