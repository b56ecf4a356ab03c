"""The shardfuzz command line, run as a user would (a subprocess)."""
import json
import os
import subprocess
import sys

import pytest

from support.campaigns import finish, start_campaign

# These tests watch the process tree (orphans, signals, kills): under pytest-xdist they run
# one after another in one worker (--dist loadgroup), never beside each other.
pytestmark = pytest.mark.xdist_group("processes")


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
    # programs: JAX runs; a program Hypothesis draws twice runs once (the campaign's cache)
    assert data["generated"] == 4 and 1 <= data["programs"]
    assert (r.returncode == 1) == bool(data["findings"])
    for f in data["findings"]:
        assert {"signature", "oracle", "message", "program"} <= set(f)
    assert "programs in" in r.stderr
    assert data["disabled"] == []


def test_run_without_report_keeps_one_beside_the_database_and_names_it(tmp_path):
    """The README's plain `shardfuzz run` must leave a report that `save` and `export` can read."""
    r = shardfuzz("run", "--max-examples", "2", "--seed", "3", "--no-determinism",
                  "--database", str(tmp_path / "db" / "examples"), cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    written = list((tmp_path / "db").glob("report-*.json"))
    assert len(written) == 1, r.stderr
    import re  # the process id in the name: two campaigns started in the same second keep both reports
    assert re.fullmatch(r"report-\d{8}-\d{6}-\d+\.json", written[0].name), written[0].name
    assert json.loads(written[0].read_text())["generated"] == 2
    assert f"report: {written[0]}" in r.stderr


def test_run_disable_leaves_names_out_of_every_program(tmp_path):
    report = tmp_path / "r.json"
    r = shardfuzz("run", "--max-examples", "6", "--seed", "3", "--report", str(report), "--database", "",
                  "--no-determinism", "--disable", "jit", "--disable", "capture", cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(report.read_text())
    assert data["disabled"] == ["capture", "jit"]
    assert data["generated"] == 6 and not {"jit", "capture"} & set(data["features"]), data["features"]


@pytest.mark.parametrize("args, words", [
    (["run", "--report", "/nonexistent-dir/r.json"], "not a writable directory"),
    (["run", "--python", "/nonexistent/python", "--max-examples", "1"], "cannot start worker"),
    (["run", "--time", "-3"], "Invalid value"),
    (["run", "--jax-version", "0.3.0"], "older than the oldest supported"),
    (["run", "--jax-version", "latest"], "not of the form X.Y.Z"),
    (["run", "--time", "nan"], "--time nan is not a finite number of seconds"),
    (["run", "--time", "inf"], "--time inf is not a finite number of seconds"),
    (["run", "--timeout", "nan"], "--timeout nan is not a finite number of seconds"),
    (["run", "--report", "/proc/version"], "/proc is not a writable directory"),
    (["run", "--disable", "xmap"], "--disable: cannot disable 'xmap'"),
    (["run", "--report", "newdir/"], "--report newdir/ names a directory; give a file name"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, words):
    r = shardfuzz(*args, cwd=tmp_path, timeout=300)
    assert r.returncode == 2
    assert words in r.stderr
    if "Invalid value" not in words:
        assert len(r.stderr.strip().splitlines()) <= 2, r.stderr  # the message (and a status line)


def test_a_file_where_the_state_directory_goes_is_one_line_and_kept(tmp_path):
    (tmp_path / ".shardfuzz").write_text("mine")
    r = shardfuzz("run", "--max-examples", "1", cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and ".shardfuzz is a file, not a directory" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (tmp_path / ".shardfuzz").read_text() == "mine"


def test_ctrl_c_writes_the_report_and_leaves_no_worker(tmp_path):
    import signal
    import time

    from fuzz.faults import worker_processes

    orphans_before = worker_processes(parent=1)
    report = tmp_path / "r.json"
    p, lines = start_campaign(["--time", "300", "--report", str(report), "--database", ""], cwd=tmp_path)
    time.sleep(3)  # programs running
    children = worker_processes(parent=p.pid)
    assert children, "the campaign should have started workers"
    p.send_signal(signal.SIGINT)
    err = finish(p, lines)
    assert p.returncode in (0, 1), err
    assert "interrupted" in err
    assert json.loads(report.read_text())["interrupted"] == "SIGINT"
    time.sleep(1)
    assert children & worker_processes() == set()
    assert worker_processes(parent=1) - orphans_before == set()


def test_a_report_that_cannot_be_written_at_the_end_goes_beside_the_database(tmp_path):
    """The --report directory vanishes during the campaign: the report goes to .shardfuzz/, one line says so."""
    import shutil
    import signal

    sub = tmp_path / "sub"
    sub.mkdir()
    p, lines = start_campaign(["--time", "300", "--no-determinism", "--report", str(sub / "r.json"),
                               "--database", str(tmp_path / "db" / "examples")], cwd=tmp_path)
    shutil.rmtree(sub)  # (after the up-front check)
    p.send_signal(signal.SIGTERM)
    err = finish(p, lines)
    assert p.returncode in (0, 1), err
    assert "Traceback" not in err
    written = list((tmp_path / "db").glob("report-*.json"))
    assert len(written) == 1, err
    assert json.loads(written[0].read_text())["interrupted"] == "SIGTERM"
    says = [ln for ln in err.splitlines() if "cannot write the report" in ln]
    assert len(says) == 1 and str(written[0].name) in says[0], err
    assert "programs in" in err  # the summary still printed


def test_an_internal_error_is_one_line_and_exit_2_and_keeps_the_report(tmp_path):
    """A bug of ours during the campaign: exit 2 (never 1), one line, the report still written."""
    script = ("import sys, fuzz.campaign, fuzz.cli\n"
              "class Broken(fuzz.campaign.Campaign):\n"
              "    def run(self):\n"
              "        import time; self.start = time.monotonic()\n"
              "        raise RuntimeError('boom\\nsecond line')\n"
              "fuzz.campaign.Campaign = Broken\n"
              "fuzz.cli.main(sys.argv[1:], prog_name='shardfuzz')\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "SHARDFUZZ_DEBUG")}
    env["PYTHONPATH"] = root
    args = [sys.executable, "-c", script, "run", "--no-determinism", "--database", "", "--report", "r.json"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1] == ("shardfuzz: internal error: RuntimeError: boom second line "
                                                 "(please report; SHARDFUZZ_DEBUG=1 shows the traceback)")
    assert "Traceback" not in r.stderr
    assert json.loads((tmp_path / "r.json").read_text())["programs"] == 0
    debug = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                           env={**env, "SHARDFUZZ_DEBUG": "1"})
    assert debug.returncode == 2 and "Traceback" in debug.stderr and "RuntimeError: boom" in debug.stderr
