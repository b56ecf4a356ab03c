"""fuzz.provision: which interpreter makes a release's venv, read from a faked package index (no network here)."""
import io
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from fuzz import provision as P

# The index as measured 2026-12-07 (`pip index versions jax|jaxlib --python-version 3.N --only-binary=:all:`),
# cut down: jax lists 0.10.2 for 3.10 although jaxlib for 3.10 ends at 0.6.2.
ALL = ["0.12.1", "0.12.0.1", "0.12.0", "0.11.0", "0.10.2", "0.10.1", "0.6.2", "0.4.37", "0.4.36", "0.4.26", "0.3.25"]
INDEX = {
    ("jax", None): ALL,
    ("jax", 10): ["0.10.2", "0.6.2", "0.4.37", "0.4.36", "0.4.26"],
    ("jaxlib", 10): ["0.6.2", "0.4.36", "0.4.26"],
    ("jax", 11): ["0.10.2", "0.10.1", "0.6.2", "0.4.37", "0.4.36", "0.4.26"],
    ("jaxlib", 11): ["0.10.2", "0.10.1", "0.6.2", "0.4.36", "0.4.26"],
    **{("jax", n): ALL[:-2] for n in (12, 13, 14)},
    **{("jaxlib", n): ["0.12.1", "0.12.0", "0.11.0", "0.10.2", "0.10.1", "0.6.2", "0.4.36"] for n in (12, 13, 14)},
}
HERE = sys.executable


@pytest.fixture
def index(monkeypatch, tmp_path):
    """The faked index (its questions counted), an empty cache, no $SHARDFUZZ_VENV_PYTHON."""
    asked = []

    def query(package, minor, timeout=None):
        asked.append((package, minor))
        return list(INDEX.get((package, minor), []))

    monkeypatch.delenv(P.NO_INDEX_ENV, raising=False)
    monkeypatch.delenv(P.VENV_PYTHON_ENV, raising=False)
    monkeypatch.setenv("SHARDFUZZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(P, "query_index", query)
    monkeypatch.setattr(P, "_MEMO", {})
    monkeypatch.setattr(P, "_PROBES", {})
    return asked


@pytest.fixture
def pythons(monkeypatch):
    """Fake interpreters: this one is 3.11, /opt/py313 is 3.13; set ``found`` to change them."""
    found = {HERE: (HERE, 11, "3.11.7"), "/opt/py313": ("/opt/py313", 13, "3.13.0")}
    monkeypatch.setattr(P, "probe_python", lambda path: found.get(path))
    return found


def test_four_part_releases_parse_and_pin():
    assert P.parse_version("0.12.0.1") == (0, 12, 0, 1)
    assert P.parse_version("0.4.38") == (0, 4, 38)
    assert P.pins(P.parse_version("0.12.0.1"))[:2] == ["jax==0.12.0.1", "jaxlib<=0.12.0.1"]
    for bad in ("0.12", "0.12.1rc1", "latest", "0.12.0.1.2"):
        with pytest.raises(P.ProvisionError, match="not of the form"):
            P.parse_version(bad)
    with pytest.raises(P.ProvisionError, match="older than the oldest"):
        P.parse_version("0.4.25")


def test_fits_asks_jax_and_jaxlib(index):
    assert P.fits("0.10.2", 11) and P.fits("0.12.1", 13)
    assert not P.fits("0.12.1", 11)  # jax 0.11+ has no wheel for 3.11
    assert not P.fits("0.10.2", 10)  # jax lists it for 3.10, jaxlib for 3.10 ends at 0.6.2
    assert P.fits("0.4.37", 11)  # jax 0.4.37 runs on jaxlib 0.4.36
    assert not P.fits("0.4.26", 13)  # no jaxlib <= 0.4.26 for 3.13
    assert P.pythons_for("0.12.1") == [12, 13, 14] and P.pythons_for("0.4.26") == [10, 11]
    assert P.pythons_text([12, 13, 14]) == "Python >= 3.12" and P.pythons_text([10, 11]) == "Python 3.10, 3.11"


def test_a_python_too_old_for_the_wheels_is_passed_over(index, pythons, monkeypatch):
    monkeypatch.setattr(P.shutil, "which", lambda name: None)
    monkeypatch.setenv(P.VENV_PYTHON_ENV, "/opt/py313")
    said = []
    assert P.choose_venv_python("0.10.2", log=said.append) == "/opt/py313"  # the one asked for fits: first
    assert P.choose_venv_python("0.4.26", log=said.append) == HERE  # 3.13 has no jaxlib 0.4.26: this one
    assert "Python 3.13" in said[-1] and "0.4.26" in said[-1]
    monkeypatch.delenv(P.VENV_PYTHON_ENV)
    pythons["python3.13"] = pythons.pop("/opt/py313")  # found on PATH now
    assert P.choose_venv_python("0.12.1") == "/opt/py313"
    assert P.choose_venv_python("0.10.2") == HERE  # (this one comes before PATH's)


def test_none_fits_is_one_line_naming_the_pythons_needed(index, pythons, monkeypatch):
    monkeypatch.setattr(P.shutil, "which", lambda name: None)
    del pythons["/opt/py313"]
    with pytest.raises(P.ProvisionError) as e:
        P.choose_venv_python("0.12.1")
    msg = str(e.value)
    assert "\n" not in msg and "needs Python >= 3.12" in msg and "Python 3.11" in msg
    assert "--venv-python PATH" in msg and P.VENV_PYTHON_ENV in msg
    assert {("jax", n) for n in P.ASKED_MINORS} <= set(index)  # asked, not from a table


def test_a_release_with_no_wheels_for_any_python_is_refused(index, pythons, monkeypatch):
    monkeypatch.setattr(P.shutil, "which", lambda name: None)
    INDEX_NO_WHEELS = {**INDEX, ("jax", None): ["0.13.0", *ALL]}  # listed, but no wheel for any Python
    monkeypatch.setattr(P, "query_index", lambda package, minor, timeout=None: INDEX_NO_WHEELS.get((package, minor)))
    with pytest.raises(P.ProvisionError, match="no jax and jaxlib wheels .* for any Python"):
        P.interpreter("0.13.0")


def test_newest_resolves_and_an_unknown_release_is_named(index, pythons):
    assert P.resolve_version("newest") == "0.12.1"
    assert P.resolve_version("0.12.0.1") == "0.12.0.1" and P.resolve_version("0.12.01") == "0.12.1"
    with pytest.raises(P.ProvisionError, match=r"not a release on the package index \(the newest: 0.12.1, 0.12.0.1"):
        P.interpreter("0.12.7")


def test_the_index_is_asked_once_per_question(index, monkeypatch):
    assert P.releases() == P.releases()
    P.fits("0.12.1", 13)
    P.fits("0.12.0", 13)
    assert index.count(("jax", None)) == 1 and index.count(("jax", 13)) == 1 and index.count(("jaxlib", 13)) == 1
    P._MEMO.clear()  # another process: the disk keeps the answers
    P.fits("0.12.1", 13)
    assert index.count(("jax", 13)) == 1
    monkeypatch.setenv("SHARDFUZZ_CACHE", "/dev/null/cache")  # no disk cache: this process still asks once
    P.fits("0.12.1", 12)
    P.fits("0.12.0", 12)
    assert index.count(("jax", 12)) == 1


def test_an_unreachable_index_is_unknown_not_an_empty_answer(monkeypatch):
    outputs = iter([
        "jax (0.12.1)\nAvailable versions: 0.12.1, 0.12.0.1\n",
        "ERROR: No matching distribution found for jax\n",
        "WARNING: Retrying (Retry(total=4)) after connection broken by 'NewConnectionError'\n"
        "jax (0.10.2)\nAvailable versions: 0.10.2\n",  # (what a local find-links directory holds)
    ])

    def run(cmd, **kw):
        assert "--ignore-requires-python" in cmd or cmd[-3:] == ["--python-version", "3.13", "--only-binary=:all:"]
        return subprocess.CompletedProcess(cmd, 0, next(outputs), "")

    monkeypatch.setattr(P.subprocess, "run", run)
    assert P.query_index("jax", None) == ["0.12.1", "0.12.0.1"]
    assert P.query_index("jax", 13) == []
    assert P.query_index("jax", 13) is None


def write_script(path, text):
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def test_a_venv_python_that_is_not_a_python_is_refused(index, tmp_path, monkeypatch):
    script = write_script(tmp_path / "python3", "#!/bin/sh\necho 3 13 3.13.0 /x\nexit 1\n")
    for bad, why in ((script, "it does not run as a Python 3"), (str(tmp_path / "missing"), "no such file"), (str(tmp_path), "a directory")):
        with pytest.raises(P.ProvisionError) as e:
            P.interpreter("0.12.1", venv_python=bad)
        assert f"--venv-python {bad} is not a Python interpreter ({why}" in str(e.value) and "\n" not in str(e.value)
    monkeypatch.setenv(P.VENV_PYTHON_ENV, script)
    with pytest.raises(P.ProvisionError, match=f"{P.VENV_PYTHON_ENV} {script} is not a Python"):
        P.worker_python(jax_version="0.12.1")
    assert not (tmp_path / "cache" / "venvs").exists()
    assert P.probe_python(HERE)[1] == sys.version_info[1]  # a real one passes


def fake_making(monkeypatch, pip):
    """subprocess.run of provision: ``-m venv`` makes bin/python; the pip install calls ``pip(cmd)``."""
    def run(cmd, **kw):
        if cmd[1:3] == ["-m", "venv"]:
            os.makedirs(os.path.join(cmd[3], "bin"))
            open(os.path.join(cmd[3], "bin", "python"), "w").close()
            return subprocess.CompletedProcess(cmd, 0, "", "")
        return pip(cmd)

    monkeypatch.setattr(P.subprocess, "run", run)


def test_a_failed_install_leaves_no_venv(index, pythons, monkeypatch, tmp_path):
    fake_making(monkeypatch, lambda cmd: subprocess.CompletedProcess(
        cmd, 1, "", "WARNING: x\nERROR: No matching distribution found for jaxlib<=0.10.2\n"))
    root = tmp_path / "cache" / "venvs" / "jax-0.10.2"
    with pytest.raises(P.ProvisionError, match=r"cannot install JAX 0.10.2 on Python 3.11.7 \(ERROR: No matching"):
        P.interpreter("0.10.2")
    assert not root.exists()

    def interrupted(cmd):
        raise KeyboardInterrupt

    fake_making(monkeypatch, interrupted)
    with pytest.raises(KeyboardInterrupt):
        P.interpreter("0.10.2")
    assert not root.exists()


def test_the_marker_records_the_interpreter_and_a_ready_venv_is_reused(index, pythons, monkeypatch, tmp_path):
    installs = []
    fake_making(monkeypatch, lambda cmd: installs.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", ""))
    py = P.interpreter("0.12.1", venv_python="/opt/py313")
    assert py == str(tmp_path / "cache" / "venvs" / "jax-0.12.1" / "bin" / "python")
    marker = json.loads((tmp_path / "cache" / "venvs" / "jax-0.12.1" / ".shardfuzz-ready").read_text())
    assert marker["python"] == "/opt/py313" and marker["python_version"] == "3.13.0"
    assert "jax==0.12.1" in installs[0] and "jaxlib<=0.12.1" in installs[0]
    assert P.worker_python(jax_version="0.12.1") == py and len(installs) == 1  # made once


def test_worker_python_is_the_one_choice(index, monkeypatch):
    monkeypatch.setattr(P, "installed_jax_version", lambda: "0.10.2")
    assert P.worker_python() == HERE
    assert P.worker_python(python="/some/python") == "/some/python"
    assert P.worker_python(jax_version="0.10.2", reuse_here=True) == HERE
    assert P.worker_python(recorded="0.10.2") == HERE
    with pytest.raises(P.ProvisionError, match="pass --jax-version 0.4.30 or --python PATH"):
        P.worker_python(recorded="0.4.30")
    with pytest.raises(P.ProvisionError, match="either --python or --jax-version"):
        P.worker_python(python="/some/python", jax_version="0.10.2")
    with pytest.raises(P.ProvisionError, match="give --jax-version too"):
        P.worker_python(venv_python="/opt/py313")


def test_the_summary_names_a_newer_release_in_one_line(index):
    info = P.newest_release_info()
    assert info == {"newest": "0.12.1", "pythons": ["3.12", "3.13", "3.14"], "here_fits": sys.version_info[1] >= 12}
    info["here_fits"] = False
    note = P.newer_jax_note(info, "0.10.2")
    assert note["line"] == ("JAX 0.12.1 is the newest release (needs Python >= 3.12); this campaign fuzzed 0.10.2: "
                            "shardfuzz run --jax-version newest --venv-python PATH")
    assert P.newer_jax_note(info, "0.12.1") is None and P.newer_jax_note(None, "0.10.2") is None
    assert P.newer_jax_note(info, "0.13.0.dev20261201") is None  # a dev build: not compared
    from rich.console import Console

    from fuzz.cli import _summary

    out = io.StringIO()
    report = {"programs": 3, "seconds": 1.0, "programs_per_second": 3.0, "rejected": 0, "invalid": 0, "findings": [],
              "newer_jax": note}
    _summary(report, Console(file=out, width=300))
    assert note["line"] in out.getvalue()


def test_a_slow_index_does_not_hold_up_the_summary(index, monkeypatch, tmp_path):
    release = threading.Event()
    monkeypatch.setattr(P, "query_index", lambda package, minor, timeout=None: release.wait(10) and ALL)
    check = P.NewerJaxCheck()
    t0 = time.monotonic()
    assert check.note("0.10.2", wait=0.05) is None  # not known yet: nothing said, and no waiting for it
    assert time.monotonic() - t0 < 2
    release.set()
    check.thread.join(10)
    monkeypatch.setattr(P, "query_index", lambda package, minor, timeout=None: None)
    monkeypatch.setattr(P, "_MEMO", {})
    monkeypatch.setenv("SHARDFUZZ_CACHE", str(tmp_path / "other"))
    unknown = P.NewerJaxCheck()
    assert unknown.note("0.10.2", wait=10) is None
