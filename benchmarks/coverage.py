"""Line coverage of JAX's sharding modules: a shardfuzz campaign's workers beside JAX's own shard_map tests.

    python benchmarks/coverage.py --seconds 300 --jax-git DIR --suite-cache suite.json --out coverage.json
    python benchmarks/coverage.py --seconds 300 --suite-cache suite.json --out coverage.json   # suite side cached
    python benchmarks/coverage.py --no-campaign --suite-file shard_map_test.py --suite-cache suite.json
    python benchmarks/coverage.py --seconds 60 --suite-file shard_map_test.py --suite-k "test_identity" --out c.json
    python benchmarks/coverage.py --campaign-from /tmp/shardfuzz-coverage-XXXX --suite-cache suite.json  # kept campaign

Measures, with coverage.py (line coverage, no branches), which statements of the modules
in ``MODULES`` (under ``jax/_src/`` of the JAX this interpreter has; a module that moved
is looked for by name elsewhere in the jax package, one that is not found is listed in
``missing_modules``) are reached by

- **campaign**: ``shardfuzz run --time SECONDS --seed S --jobs J`` (fresh example
  database, the repository's corpus) whose workers run under coverage, and only the
  workers: the fuzzer's own process (generation, the reference evaluation, oracles) is not
  measured. The fuzzer is not changed: ``--python`` gets a wrapper that starts the worker
  script under ``coverage.Coverage`` and saves the data each time the worker waits for its
  next program, so that a worker killed with SIGKILL (after a hang or crash, or at the end
  of the campaign) keeps all but the program it was running;
- **suite**: JAX's own ``tests/shard_map_test.py`` of the installed release (``--suite-file``,
  or taken with ``git show jax-vX.Y.Z:tests/shard_map_test.py`` from a JAX clone given
  as ``--jax-git``), run with pytest under ``coverage run`` (``--suite-k`` restricts it
  with pytest's ``-k``). It needs absl-py (``pip install -e '.[bench]'``). Its result can be
  cached in ``--suite-cache`` (reused while the JAX release, the module files, the test
  file and ``-k`` are the same), so that the campaign side can be rerun alone. Ctrl-C while
  the suite runs ends it early and keeps what ran (``"complete": false`` in the results).

Code that JAX runs on threads it starts itself (host callbacks run by XLA) is not seen
by coverage.py's tracer under Python < 3.12; that holds for both sides alike.

Writes ``--out`` (JSON, atomically): per module the statements, the lines reached by the
campaign, by the suite, by both, by the campaign only and by the suite only; every
function (coverage.py's code regions: qualified name, nested functions apart) with lines
the suite reaches and the campaign does not, sorted by those lines (the generator's blind
spots), and the reverse list; ``traced_lines``: the same per-module counts on the line
numbers the tracer recorded (continuation lines of multi-line statements included), which
coverage.py's reports do not count. Prints a table and the top ``--top`` functions.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent


def _import_coverage_library():
    """Import coverage.py, not this file (``benchmarks/coverage.py`` shadows it when benchmarks/ is on sys.path)."""
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    try:
        import coverage as library
        from coverage.python import PythonFileReporter
    finally:
        sys.path[:] = saved
    return library, PythonFileReporter


coverage_lib, PythonFileReporter = _import_coverage_library()
sys.path.insert(0, str(ROOT))

from fuzz.util import atomic_write_text  # noqa: E402

# The modules behind the sharding transforms, relative to jax/_src/ (jax 0.10.2 layout).
MODULES = ("shard_map.py", "interpreters/batching.py", "lax/parallel.py", "interpreters/pxla.py", "pjit.py",
           "callback.py", "core.py", "interpreters/ad.py", "interpreters/partial_eval.py", "interpreters/mlir.py")
SUITE_TEST = "tests/shard_map_test.py"
CAMPAIGN_META = "campaign.json"  # the campaign's figures, in the work directory (for --campaign-from)
CACHE_FORMAT = 2

BOOT = '''\
"""Run shardfuzz's worker under coverage.py (written by benchmarks/coverage.py).

argv: DATA_FILE INCLUDE_JSON then the worker's own arguments (``-u .../worker.py``);
any other command is run by this interpreter unchanged.
"""
import json
import os
import runpy
import sys

data_file, include_file, args = sys.argv[1], sys.argv[2], sys.argv[3:]
scripts = [a for a in args if not a.startswith("-")]
if len(scripts) != 1 or os.path.basename(scripts[0]) != "worker.py":
    os.execv(sys.executable, [sys.executable] + args)
script = os.path.abspath(scripts[0])
with open(include_file) as f:
    include = json.load(f)

import coverage  # noqa: E402

cov = coverage.Coverage(data_file=data_file, data_suffix=True, include=include, config_file=False)


class SavingLines:
    """sys.stdin for the worker: the data is saved each time the worker asks for its next request line."""

    def __init__(self, stream):
        self.stream = stream

    def __iter__(self):
        while True:
            try:
                cov.save()
            except Exception as e:  # a full disk must not stop the campaign
                sys.stderr.write("coverage benchmark: cannot save coverage data: %s\\n" % e)
            line = self.stream.readline()
            if not line:
                return
            yield line

    def __getattr__(self, name):
        return getattr(self.stream, name)


sys.stdin = SavingLines(sys.stdin)
sys.argv = [script]
sys.path[0] = os.path.dirname(script)  # as for `python worker.py` (the worker drops it again)
cov.start()
runpy.run_path(script, run_name="__main__")
'''


class BenchError(Exception):
    """Bad input or a side that could not run: a one-line reason (exit 2)."""


# ------------------------------------------------------------------ modules

def jax_root() -> Path:
    """The directory of the installed ``jax`` package (found without importing it). Raises BenchError."""
    spec = importlib.util.find_spec("jax")
    if spec is None or not spec.submodule_search_locations:
        raise BenchError("jax is not installed in this interpreter; run the benchmark with shardfuzz's venv")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def resolve_modules(root: Path, modules=MODULES) -> tuple[dict, dict]:
    """Map each name of ``modules`` (relative to ``root/_src``) to its file.

    Returns ``({name: absolute path}, {name: reason})``: a file missing at its place is
    looked for by base name anywhere in the package and taken when exactly one matches
    (the release moved it); otherwise it is missing, with the reason.
    """
    found, missing = {}, {}
    for name in modules:
        path = root / "_src" / name
        if path.is_file():
            found[name] = str(path)
            continue
        matches = sorted(p for p in root.rglob(Path(name).name) if p.is_file())
        if len(matches) == 1:
            found[name] = str(matches[0])
        else:
            missing[name] = ("not in this release" if not matches
                             else "moved, several candidates: " + ", ".join(str(m.relative_to(root)) for m in matches))
    return found, missing


def file_sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------------ coverage data

def reached_lines(data_files: list[str], paths: list[str]) -> tuple[dict, dict, dict]:
    """Statements of each file of ``paths`` and those that ``data_files`` (coverage.py data) record as run.

    Returns ``({path: set of statement line numbers}, {path: set reached}, {path: set traced})``.
    Statement lines are coverage.py's (a multi-line statement counts once, at its first
    line; ``# pragma: no cover`` lines are not statements): what its reports count.
    Traced lines are the line numbers the tracer recorded as they are, which include the
    continuation lines of multi-line statements that Python reports line events for.
    """
    cov = coverage_lib.Coverage(data_file=None, config_file=False)
    data = cov.get_data()
    for f in data_files:
        part = coverage_lib.CoverageData(basename=f)
        part.read()
        data.update(part)
    statements, reached, traced = {}, {}, {}
    for p in paths:
        _, stmts, _, missing, _ = cov.analysis2(p)
        statements[p] = set(stmts)
        reached[p] = set(stmts) - set(missing)
        traced[p] = set(data.lines(p) or ())
    return statements, reached, traced


def function_regions(path: str) -> list:
    """coverage.py's function regions of a Python file: ``CodeRegion(kind, name, start, lines)``.

    ``name`` is qualified (``Class.method``, ``outer.inner``); a nested function's lines
    belong to it, not to the function around it; the ``def`` and decorator lines belong to
    no function (they run when the module is imported).
    """
    cov = coverage_lib.Coverage(data_file=None, config_file=False)
    return [r for r in PythonFileReporter(path, cov).code_regions() if r.kind == "function"]


def function_table(module: str, regions, statements: set, suite: set, campaign: set) -> list[dict]:
    """One row per function of ``regions`` with statements: its counts of statement lines.

    ``statements``, ``suite``, ``campaign``: line numbers of one module (statements, reached
    by the suite, reached by the campaign). Statements in no function count under
    ``<module>``. Row: ``module``, ``function`` (qualified name), ``line`` (of the ``def``;
    0 for ``<module>``), ``statements``, ``suite``, ``campaign``, ``suite_only``,
    ``campaign_only``.
    """
    rows, claimed = [], set()
    groups = [(r.name, r.start, set(r.lines) & statements) for r in regions]
    for _, _, lines in groups:
        claimed |= lines
    groups.append(("<module>", 0, statements - claimed))
    for name, start, lines in groups:
        if not lines:
            continue
        rows.append({"module": module, "function": name, "line": start, "statements": len(lines),
                     "suite": len(lines & suite), "campaign": len(lines & campaign),
                     "suite_only": len(lines & (suite - campaign)), "campaign_only": len(lines & (campaign - suite))})
    return rows


def blind_spots(rows: list[dict], key: str = "suite_only") -> list[dict]:
    """The rows with ``key`` > 0, most such lines first (ties: module, then line)."""
    return sorted((r for r in rows if r[key] > 0), key=lambda r: (-r[key], r["module"], r["line"]))


def module_table(statements: dict | None, suite: dict, campaign: dict) -> dict:
    """Line counts per module: ``statements``, ``campaign``, ``suite``, ``both``, ``campaign_only``, ``suite_only``.

    ``statements``: {name: set of statement lines} (None: no ``statements`` count);
    ``suite``, ``campaign``: {name: set of lines reached}.
    """
    out = {}
    for name in suite:
        s, c = suite[name], campaign[name]
        out[name] = ({"statements": len(statements[name])} if statements is not None else {}) | {
            "campaign": len(c), "suite": len(s), "both": len(s & c), "campaign_only": len(c - s),
            "suite_only": len(s - c)}
    return out


# ------------------------------------------------------------------ the two sides

def load_cache(path: str, key: dict, ignore=()) -> dict | None:
    """The suite side cached in ``path`` if its key equals ``key`` (but for the fields ``ignore``); None if no file.

    Raises BenchError when the file is not a cache of this benchmark or is for another key.
    """
    if not os.path.exists(path):
        return None
    try:
        cached = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise BenchError(f"{path} is not readable JSON ({e}); choose another --suite-cache") from None
    if not isinstance(cached, dict) or cached.get("format") != CACHE_FORMAT or "key" not in cached:
        raise BenchError(f"{path} is not a suite cache of this benchmark; choose another --suite-cache")
    diff = sorted(k for k in set(key) | set(cached["key"]) if k not in ignore and key.get(k) != cached["key"].get(k))
    if diff:
        raise BenchError(f"{path} was made for another {', '.join(diff)}; pass --rerun-suite to replace it")
    return cached


def suite_source(args, version: str, work: str) -> str:
    """Path of the shard_map test file to run (``--suite-file``, or from ``--jax-git`` at tag jax-v<version>)."""
    if args.suite_file:
        if not os.path.isfile(args.suite_file):
            raise BenchError(f"--suite-file {args.suite_file} does not exist")
        return os.path.abspath(args.suite_file)
    if not args.jax_git:
        raise BenchError("the suite side needs JAX's tests/shard_map_test.py: give --suite-file or --jax-git")
    r = subprocess.run(["git", "-C", args.jax_git, "show", f"jax-v{version}:{SUITE_TEST}"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise BenchError(f"cannot read jax-v{version}:{SUITE_TEST} from {args.jax_git}: "
                         f"{(r.stderr.strip().splitlines() or ['git failed'])[-1]}")
    path = os.path.join(work, "shard_map_test.py")
    atomic_write_text(path, r.stdout)
    return path


def run_suite(test_file: str, include: list[str], k: str | None, work: str) -> dict:
    """Run the test file with pytest under ``coverage run`` in ``work``.

    Returns ``{"data_files", "tests", "passed", "failed", "errors", "skipped", "seconds",
    "returncode", "complete"}`` (counts from pytest's JUnit XML). A Ctrl-C (SIGINT to the
    ``coverage run`` process) ends pytest's session early but keeps what ran: ``complete``
    is then false. Raises BenchError when pytest collected nothing or could not start.
    """
    local = os.path.join(work, "shard_map_test.py")
    if os.path.abspath(test_file) != local:
        atomic_write_text(local, Path(test_file).read_text())
    data = os.path.join(work, ".coverage.suite")
    junit = os.path.join(work, "junit.xml")
    env = {k_: v for k_, v in os.environ.items() if k_ != "PYTHONPATH"}
    env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, "-m", "coverage", "run", f"--data-file={data}", f"--include={','.join(include)}",
           "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", "shard_map_test.py"]
    if k:
        cmd += ["-k", k]
    log = os.path.join(work, "suite.log")
    t0 = time.monotonic()
    # Ctrl-C: pytest stops and keeps what ran, this process carries on. A handler, not SIG_IGN,
    # which the child would inherit (a caught signal is reset to its default by exec).
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        with open(log, "w") as out:
            r = subprocess.run(cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
    finally:
        signal.signal(signal.SIGINT, previous)
    seconds = time.monotonic() - t0
    if not os.path.exists(junit) or not os.path.exists(data):
        tail = Path(log).read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise BenchError(f"the suite did not run (pytest exit {r.returncode}: {tail[0]}); see {log}")
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {a: int(suite.get(a, 0)) for a in ("tests", "failures", "errors", "skipped")}
    if counts["tests"] == 0:
        raise BenchError(f"pytest ran no test of {test_file} (-k {k!r}?); see {log}")
    return {"data_files": [data], "tests": counts["tests"],
            "passed": counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"],
            "failed": counts["failures"], "errors": counts["errors"], "skipped": counts["skipped"],
            "seconds": round(seconds, 1), "returncode": r.returncode,
            "complete": r.returncode in (0, 1)}  # pytest: 2 is an interrupted session (Ctrl-C), counts are partial


def write_wrapper(work: str, include: list[str], python: str | None = None) -> str:
    """Write the worker wrapper into ``work``; return the path to pass as ``shardfuzz run --python``.

    The workers it starts write coverage.py data files ``work/.coverage.campaign.*``.
    """
    python = python or sys.executable
    boot = os.path.join(work, "boot.py")
    atomic_write_text(boot, BOOT)
    inc = os.path.join(work, "include.json")
    atomic_write_text(inc, json.dumps(include))
    data = os.path.join(work, ".coverage.campaign")
    script = os.path.join(work, "worker.sh")
    atomic_write_text(script, "#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in (python, "-u", boot, data, inc))
                      + ' "$@"\n')
    os.chmod(script, 0o755)
    return script


def run_campaign(include: list[str], seconds: float, seed: int, jobs: int, extra: list[str], work: str) -> dict:
    """Run ``shardfuzz run`` (in the repository, fresh database) with its workers under coverage.

    Returns the campaign's figures and ``data_files``. Raises BenchError on exit 2 or
    when no worker wrote coverage data.
    """
    wrapper = write_wrapper(work, include)
    report = os.path.join(work, "report.json")
    cmd = [sys.executable, "-m", "fuzz", "run", "--time", str(seconds), "--seed", str(seed), "--jobs", str(jobs),
           "--python", wrapper, "--database", os.path.join(work, "examples"), "--report", report, *extra]
    log = os.path.join(work, "campaign.log")
    t0 = time.monotonic()
    with open(log, "w") as out:
        r = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    data_files = sorted(str(p) for p in Path(work).glob(".coverage.campaign.*") if not p.name.endswith("-journal"))
    if r.returncode not in (0, 1) or not os.path.exists(report):
        tail = Path(log).read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise BenchError(f"the campaign failed (exit {r.returncode}: {tail[0]}); see {log}")
    if not data_files:
        raise BenchError(f"no worker wrote coverage data; see {log}")
    rep = json.loads(Path(report).read_text())
    meta = {"command": shlex.join(["shardfuzz", *cmd[3:]]), "wall_seconds": round(wall, 1),
            "seconds": rep.get("seconds"), "programs": rep.get("programs"),
            "findings": len(rep.get("findings", [])), "known": len(rep.get("known", []) or []),
            "worker_processes": len(data_files), "returncode": r.returncode,
            "loadavg_end": [round(x, 2) for x in os.getloadavg()]}
    atomic_write_text(os.path.join(work, CAMPAIGN_META), json.dumps(meta) + "\n")
    return dict(meta, data_files=data_files)


def campaign_from(work: str) -> dict:
    """The figures and ``data_files`` of a campaign that ran in ``work`` (a directory kept with ``--keep``).

    Raises BenchError when ``work`` holds no finished campaign of this benchmark.
    """
    meta_path = os.path.join(work, CAMPAIGN_META)
    data_files = sorted(str(p) for p in Path(work).glob(".coverage.campaign.*") if not p.name.endswith("-journal"))
    if not os.path.exists(meta_path) or not data_files:
        raise BenchError(f"{work} holds no finished campaign of this benchmark (run it with --keep)")
    return dict(json.loads(Path(meta_path).read_text()), data_files=data_files, reused_from=os.path.abspath(work))


def suite_side(args, version: str, paths: list[str], names: dict, work: str) -> tuple[dict, dict, dict]:
    """The suite's figures, ``{module name: set of statement lines reached}`` and ``{module name: set of
    traced lines}`` (see :func:`reached_lines`), from ``--suite-cache`` or a run.

    A run writes the cache when ``--suite-cache`` is given. Without a test file
    (``--suite-file`` / ``--jax-git``) the cache is trusted for the test file's hash.
    Raises BenchError (no test file and no cache, a cache made for another key, a failed run).
    """
    test_file = suite_source(args, version, work) if (args.suite_file or args.jax_git) else None
    key = {"jax_version": version, "suite_sha256": file_sha(test_file) if test_file else None, "k": args.suite_k,
           "modules": {names[p]: file_sha(p) for p in paths}}
    if args.suite_cache and not args.rerun_suite:
        cached = load_cache(args.suite_cache, key, ignore=() if test_file else ("suite_sha256",))
        if cached is not None:
            print(f"coverage.py: suite side from {args.suite_cache}", file=sys.stderr)
            return (cached["suite"], {n: set(v) for n, v in cached["reached"].items()},
                    {n: set(v) for n, v in cached["traced"].items()})
    if test_file is None:
        raise BenchError("the suite side needs JAX's tests/shard_map_test.py: give --suite-file or --jax-git"
                         + (f" (there is no {args.suite_cache} yet)" if args.suite_cache else ""))
    print(f"coverage.py: running {SUITE_TEST} of jax {version} under coverage"
          + (f" (-k {args.suite_k})" if args.suite_k else ""), file=sys.stderr)
    meta = run_suite(test_file, paths, args.suite_k, work)
    meta["k"] = args.suite_k
    meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    _, reached, traced = reached_lines(meta.pop("data_files"), paths)
    suite_reached = {names[p]: reached[p] for p in paths}
    suite_traced = {names[p]: traced[p] for p in paths}
    if args.suite_cache:
        atomic_write_text(args.suite_cache, json.dumps(
            {"format": CACHE_FORMAT, "key": key, "suite": meta,
             "reached": {n: sorted(v) for n, v in suite_reached.items()},
             "traced": {n: sorted(v) for n, v in suite_traced.items()}}) + "\n")
    return meta, suite_reached, suite_traced


# ------------------------------------------------------------------ report

def table(modules: dict, totals: dict, top: list[dict], traced_total: dict | None = None) -> str:
    """The human-readable summary: one line per module, the totals (statement lines, then traced
    lines if ``traced_total``), then the top blind spots."""
    head = f"{'module':<28}{'stmts':>7}{'campaign':>10}{'suite':>8}{'both':>8}{'camp-only':>11}{'suite-only':>11}"
    lines = [head]
    rows = list(modules.items()) + [("total", totals)] + ([("total, traced lines", traced_total)] if traced_total
                                                          else [])
    for name, m in rows:
        lines.append(f"{name:<28}{m.get('statements', ''):>7}{m['campaign']:>10}{m['suite']:>8}{m['both']:>8}"
                     f"{m['campaign_only']:>11}{m['suite_only']:>11}")
    if top:
        lines += ["", "functions the suite reaches and the campaign does not (suite-only lines / statements, "
                      "campaign-reached lines):"]
        for r in top:
            lines.append(f"{r['suite_only']:>5} / {r['statements']:<5} {r['campaign']:>4}  "
                         f"{r['module']}:{r['line']} {r['function']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300, help="campaign time (shardfuzz run --time), seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1, help="shardfuzz run --jobs")
    ap.add_argument("--campaign-args", default="", help="more options for shardfuzz run, one shell-quoted string")
    ap.add_argument("--no-campaign", action="store_true", help="run (and cache) the suite side only")
    ap.add_argument("--campaign-from", metavar="DIR",
                    help="do not run a campaign: analyse the one kept (--keep) in this work directory")
    ap.add_argument("--suite-file", help="JAX's tests/shard_map_test.py of the installed release")
    ap.add_argument("--jax-git", help="a JAX git clone to take it from (tag jax-vX.Y.Z)")
    ap.add_argument("--suite-k", default=None, help="pytest -k expression restricting the suite")
    ap.add_argument("--suite-cache", help="JSON file caching the suite side (read if it matches, else written)")
    ap.add_argument("--rerun-suite", action="store_true", help="run the suite even if --suite-cache has it")
    ap.add_argument("--out", default="coverage.json", help="JSON results file (written atomically)")
    ap.add_argument("--top", type=int, default=20, help="blind-spot functions shown in the table")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, coverage data)")
    args = ap.parse_args(argv)
    if args.seconds < 1 or args.jobs < 1 or args.top < 0:
        ap.error("--seconds and --jobs must be at least 1 and --top at least 0")
    for opt, path in (("--out", args.out), ("--suite-cache", args.suite_cache)):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            ap.error(f"{opt} {path}: its directory does not exist")
    work = tempfile.mkdtemp(prefix="shardfuzz-coverage-")
    try:
        run(args, work)
    except BenchError as e:
        print(f"coverage.py: {e} (work directory kept: {work})", file=sys.stderr)
        return 2
    if args.keep:
        print(f"coverage.py: work directory kept: {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def run(args, work: str) -> None:
    """Measure the sides ``args`` asks for (``work``: scratch directory); write ``args.out``, print the table."""
    version = importlib.metadata.version("jax")
    root = jax_root()
    found, missing = resolve_modules(root)
    if not found:
        raise BenchError(f"none of the modules is in jax {version} at {root}")
    for name, why in missing.items():
        print(f"coverage.py: jax/_src/{name}: {why}; left out", file=sys.stderr)
    paths = [os.path.realpath(p) for p in found.values()]
    names = dict(zip(paths, found))
    result = {"jax_version": version, "jax_root": str(root), "python": sys.version.split()[0],
              "coverage_version": coverage_lib.__version__,
              "modules_resolved": {n: str(Path(p).relative_to(root.parent)) for n, p in found.items()},
              "missing_modules": missing, "loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    suite_meta, suite_reached, suite_traced = suite_side(args, version, paths, names, work)
    result["suite"] = suite_meta
    if args.no_campaign:
        result["suite"]["lines"] = sum(len(v) for v in suite_reached.values())
        atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
        print(f"suite: {suite_meta['tests']} tests, {result['suite']['lines']} lines reached; {args.out}")
        return

    if args.campaign_from:
        camp = campaign_from(args.campaign_from)
    else:
        print(f"coverage.py: campaign of {args.seconds:g} s (seed {args.seed}, {args.jobs} job(s)) with workers "
              f"under coverage; work directory {work}", file=sys.stderr)
        camp = run_campaign(paths, args.seconds, args.seed, args.jobs, shlex.split(args.campaign_args), work)
    statements, reached, traced = reached_lines(camp.pop("data_files"), paths)
    result["campaign"] = camp
    stmts = {names[p]: statements[p] for p in paths}
    campaign_reached = {names[p]: reached[p] for p in paths}
    modules = module_table(stmts, suite_reached, campaign_reached)
    totals = {k: sum(m[k] for m in modules.values()) for k in next(iter(modules.values()))}
    tracer = module_table(None, suite_traced, {names[p]: traced[p] for p in paths})
    tracer["total"] = {k: sum(m[k] for m in tracer.values()) for k in next(iter(tracer.values()))}
    rows = []
    for p in paths:
        n = names[p]
        rows += function_table(n, function_regions(p), stmts[n], suite_reached[n], campaign_reached[n])
    result["modules"] = modules
    result["totals"] = totals
    result["traced_lines"] = tracer
    result["suite_only_functions"] = blind_spots(rows, "suite_only")
    result["campaign_only_functions"] = blind_spots(rows, "campaign_only")
    atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    print(table(modules, totals, result["suite_only_functions"][:args.top], tracer["total"]))
    print(f"\ncampaign: {camp['programs']} programs in {camp['wall_seconds']} s, {camp['worker_processes']} worker "
          f"processes; suite: {suite_meta['tests']} tests ({suite_meta['passed']} passed) in "
          f"{suite_meta['seconds']} s; {args.out}")


if __name__ == "__main__":
    sys.exit(main())
