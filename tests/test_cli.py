"""The shardfuzz command line, run as a user would (a subprocess)."""
import json
import os
import subprocess
import sys

import pytest


def shardfuzz(*args, cwd=None, timeout=600):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "-m", "fuzz", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=env)


def test_run_writes_a_report(tmp_path):
    report = tmp_path / "r.json"
    r = shardfuzz("run", "--max-examples", "4", "--seed", "3", "--report", str(report), "--database", "",
                  cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(report.read_text())
    for key in ("jax_version", "seconds", "programs", "rejected", "findings", "features", "depth_histogram"):
        assert key in data
    assert data["generated"] == 4 and data["programs"] >= 4
    assert (r.returncode == 1) == bool(data["findings"])
    for f in data["findings"]:
        assert {"signature", "oracle", "message", "program"} <= set(f)
    assert "programs in" in r.stderr


@pytest.mark.parametrize("args, words", [
    (["run", "--report", "/nonexistent-dir/r.json"], "not a writable directory"),
    (["run", "--python", "/nonexistent/python", "--max-examples", "1"], "cannot start worker"),
    (["run", "--time", "-3"], "Invalid value"),
    (["run", "--jax-version", "0.3.0"], "older than the oldest supported"),
    (["run", "--jax-version", "latest"], "not of the form X.Y.Z"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, words):
    r = shardfuzz(*args, cwd=tmp_path, timeout=300)
    assert r.returncode == 2
    assert words in r.stderr
    if "Invalid value" not in words:
        assert len(r.stderr.strip().splitlines()) <= 2, r.stderr  # the message (and a status line)


def test_ctrl_c_writes_the_report_and_leaves_no_worker(tmp_path):
    import signal
    import time

    from fuzz.faults import worker_processes

    orphans_before = worker_processes(parent=1)
    report = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    p = subprocess.Popen([sys.executable, "-m", "fuzz", "run", "--time", "300", "--report", str(report),
                          "--database", ""], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(20)  # workers started, programs running
    children = worker_processes(parent=p.pid)
    assert children, "the campaign should have started workers"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode in (0, 1), err
    assert "interrupted" in err
    assert json.loads(report.read_text())["programs"] >= 1
    time.sleep(1)
    assert children & worker_processes() == set()
    assert worker_processes(parent=1) - orphans_before == set()
