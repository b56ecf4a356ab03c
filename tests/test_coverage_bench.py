"""The coverage benchmark (benchmarks/coverage.py): function attribution, the worker wrapper, the suite cache.

No JAX here: a tiny fake module stands for JAX's, a tiny fake ``worker.py`` for shardfuzz's.
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# These tests watch the process tree (orphans, signals, kills): under pytest-xdist they run
# one after another in one worker (--dist loadgroup), never beside each other.
pytestmark = pytest.mark.xdist_group("processes")

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("coverage_bench", ROOT / "benchmarks" / "coverage.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

FAKE = textwrap.dedent("""\
    import os


    def top(x):
        if x > 0:
            return 1
        return 2


    class Box:
        def method(self, y):
            def inner(z):
                a = z + 1
                return a
            return inner(y)
    """)


@pytest.fixture
def fake(tmp_path):
    path = tmp_path / "fake.py"
    path.write_text(FAKE)
    return str(path)


def test_function_table_attributes_lines_to_the_innermost_function(fake):
    regions = bench.function_regions(fake)
    statements = {1, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15}
    suite = {1, 4, 5, 6, 10, 11, 12, 13, 14, 15}  # top(1) and Box().method(2)
    campaign = {1, 4, 5, 7, 10, 11}  # top(-1) only
    rows = {r["function"]: r for r in bench.function_table("fake.py", regions, statements, suite, campaign)}
    assert set(rows) == {"top", "Box.method", "Box.method.inner", "<module>"}
    assert rows["top"] == {"module": "fake.py", "function": "top", "line": 4, "statements": 3, "suite": 2,
                           "campaign": 2, "suite_only": 1, "campaign_only": 1}
    assert (rows["Box.method"]["statements"], rows["Box.method"]["suite_only"]) == (2, 2)  # lines 12 and 15
    assert (rows["Box.method.inner"]["statements"], rows["Box.method.inner"]["suite_only"]) == (2, 2)
    assert (rows["<module>"]["statements"], rows["<module>"]["suite_only"]) == (4, 0)  # import, def, class, def
    spots = bench.blind_spots(list(rows.values()))
    assert [r["function"] for r in spots] == ["Box.method", "Box.method.inner", "top"]  # ties: by line
    assert [r["function"] for r in bench.blind_spots(list(rows.values()), "campaign_only")] == ["top"]


def test_module_table_counts():
    t = bench.module_table({"m": {1, 2, 3, 4, 5}}, {"m": {1, 2, 3}}, {"m": {3, 4}})
    assert t["m"] == {"statements": 5, "campaign": 2, "suite": 3, "both": 1, "campaign_only": 1, "suite_only": 2}
    assert "statements" not in bench.module_table(None, {"m": {1}}, {"m": set()})["m"]


def test_wrapper_keeps_coverage_of_a_worker_killed_with_sigkill(fake, tmp_path):
    """The wrapper saves before each request line: a SIGKILL after a reply loses nothing that reply needed."""
    (tmp_path / "w").mkdir()
    worker = tmp_path / "w" / "worker.py"
    worker.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import fake
        print("hello", flush=True)
        for line in sys.stdin:
            print(fake.Box().method(int(line)) if line.startswith("2") else fake.top(int(line)), flush=True)
        """))
    wrapper = bench.write_wrapper(str(tmp_path), [fake])
    p = subprocess.Popen([wrapper, "-u", str(worker)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         cwd=tmp_path)
    try:
        assert p.stdout.readline() == "hello\n"
        for request, reply in (("-1", "2"), ("2", "3")):
            p.stdin.write(request + "\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == reply
        p.stdin.write("5\n")  # the third request: its reply is read, then the worker is killed (no atexit)
        p.stdin.flush()
        assert p.stdout.readline().strip() == "1"
    finally:
        os.kill(p.pid, signal.SIGKILL)  # the wrapper execs: this pid is the worker itself
        p.wait()
    files = [str(f) for f in tmp_path.glob(".coverage.campaign.*")]
    assert len(files) == 1
    statements, reached, traced = bench.reached_lines(files, [fake])
    path = os.path.realpath(fake)
    assert statements[path] == {1, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15}
    # top(-1) and Box().method(2) ran before the save of the third request; top(5) (line 6) may be lost
    assert {1, 4, 5, 7, 10, 11, 12, 13, 14, 15} <= reached[path]
    assert reached[path] <= traced[path]


def test_wrapper_runs_other_commands_unchanged(tmp_path):
    wrapper = bench.write_wrapper(str(tmp_path), [])
    out = subprocess.run([wrapper, "-c", "import sys; print(sys.argv[1:])", "a"], capture_output=True, text=True)
    assert out.stdout.strip() == "['a']"
    assert not list(tmp_path.glob(".coverage.campaign.*"))


def test_suite_cache_of_another_key_is_refused(tmp_path):
    key = {"jax_version": "0.10.2", "suite_sha256": "ab", "k": None, "modules": {"core.py": "cd"}}
    cache = tmp_path / "suite.json"
    assert bench.load_cache(str(cache), key) is None
    cache.write_text(json.dumps({"format": bench.CACHE_FORMAT, "key": key, "suite": {}, "reached": {}}))
    assert bench.load_cache(str(cache), key)["key"] == key
    other = dict(key, k="test_identity")
    with pytest.raises(bench.BenchError, match="another k;"):
        bench.load_cache(str(cache), other)
    assert bench.load_cache(str(cache), dict(key, suite_sha256=None), ignore=("suite_sha256",)) is not None
    cache.write_text("[]")
    with pytest.raises(bench.BenchError, match="not a suite cache"):
        bench.load_cache(str(cache), key)


def test_missing_and_moved_modules_are_resolved(tmp_path):
    (tmp_path / "_src" / "interpreters").mkdir(parents=True)
    (tmp_path / "_src" / "core.py").write_text("")
    (tmp_path / "experimental").mkdir()
    (tmp_path / "experimental" / "shard_map.py").write_text("")
    found, missing = bench.resolve_modules(tmp_path, ("core.py", "shard_map.py", "interpreters/ad.py"))
    assert found == {"core.py": str(tmp_path / "_src" / "core.py"),
                     "shard_map.py": str(tmp_path / "experimental" / "shard_map.py")}
    assert missing == {"interpreters/ad.py": "not in this release"}
    assert sys.modules.get("coverage") is not bench  # the benchmark did not shadow coverage.py


def test_campaign_from_needs_a_finished_campaign(tmp_path):
    with pytest.raises(bench.BenchError, match="no finished campaign"):
        bench.campaign_from(str(tmp_path))
    (tmp_path / ".coverage.campaign.host.pid1.x").write_text("")
    (tmp_path / ".coverage.campaign.host.pid1.x-journal").write_text("")
    (tmp_path / bench.CAMPAIGN_META).write_text(json.dumps({"programs": 7}))
    camp = bench.campaign_from(str(tmp_path))
    assert camp["programs"] == 7
    assert camp["data_files"] == [str(tmp_path / ".coverage.campaign.host.pid1.x")]
