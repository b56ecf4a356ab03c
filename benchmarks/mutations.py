"""Mutation check: does the test suite fail when a piece of shardfuzz is broken on purpose?

    python benchmarks/mutations.py                      # every mutation, the default suite each (slow)
    python benchmarks/mutations.py --quick              # each mutation with its own narrow selection
    python benchmarks/mutations.py --only reference-pmin-as-max --quick
    python benchmarks/mutations.py --select "tests/test_oracles.py -k differential"
    python benchmarks/mutations.py --list

Each mutation replaces one exact piece of text of one file. The tracked and new (not
ignored) files of the repository, as they are in the working tree, are copied to a
temporary directory once; each mutation is applied there, pytest runs there with this
interpreter (``PYTHONPATH`` set to the copy, so that the editable install does not
import the real tree), and the file is restored before the next one. The real tree is
never modified.

Output, on stdout: one JSON line per mutation (``name``, ``file``, ``description``,
``selection``, ``status``, ``seconds``; ``tail``: the end of pytest's output when it did
not simply pass or fail), then one summary line. ``status`` is ``killed`` (pytest
reported a failed test), ``survived`` (every selected test passed: the suite misses
this fault), ``stale`` (the text to replace is not in the file, or not once: the code
changed, update the mutation), ``error`` (pytest could not run: collection error, no
test selected, ...) or ``timeout``. Before the mutations, the unmutated copy is run
with each selection used (``baseline``): a mutation check on a failing suite means
nothing, so the run stops if a baseline does not pass (``--no-baseline`` skips it).

Exit status: 0 when every applicable mutation was killed, 1 when one survived or could
not be judged, 2 for bad usage or a failing baseline.
"""
from __future__ import annotations

import argparse
import re
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ()  # the default suite: ``pytest -x -q`` with the project's testpaths


@dataclass(frozen=True)
class Mutation:
    """One fault: in ``file`` (relative to the repository), ``old`` (exact text, once) becomes ``new``.

    ``tests``: the pytest selection that must kill it (default: the whole default suite);
    ``quick``: a narrow selection that should be enough (``--quick``).
    """

    name: str
    file: str
    old: str
    new: str
    description: str
    quick: tuple
    tests: tuple = DEFAULT


MUTATIONS = [
    # -- the four faults of issue 6 ("Tests that must be able to fail")
    Mutation("reference-pmin-as-max", "fuzz/ops/collectives.py",
             'name, numpy = "pmin", "min"', 'name, numpy = "pmin", "max"',
             "the reference computes pmin as a max", ("tests/test_reference.py",)),
    Mutation("judge-skips-determinism", "oracles/__init__.py",
             "    found += determinism.judge(program, outcome, other, seeds)\n", "",
             "oracles.judge never calls the determinism oracle", ("tests/test_judge_path.py",)),
    Mutation("runner-drops-lowering-outcome", "fuzz/runner.py",
             "found += oracles.judge(program, outcome, reference, other,",
             "found += oracles.judge(program, outcome, reference, None,",
             "Runner.run does not pass the lowering worker's outcome to the oracles", ("tests/test_judge_path.py",)),
    Mutation("runner-confirm-always", "fuzz/runner.py",
             "        def fails(earlier: list) -> bool:\n",
             "        return []\n\n        def fails(earlier: list) -> bool:\n",
             "crash confirmation always succeeds (Runner.confirm returns [])", ("tests/test_faults.py",)),
    Mutation("loader-skips-program", "fuzz/program.py",
             'validate_program(entry["program"], caps)', 'entry["program"]',
             "the corpus loader does not validate an entry's program", ("tests/test_model.py", "-k", "corpus")),
    # -- more faults that matter
    Mutation("loader-skips-schema", "fuzz/program.py",
             'err = _first_error(entry, "corpus_entry")', "err = None",
             "the corpus loader does not check the entry record against its schema",
             ("tests/test_model.py", "-k", "corpus")),
    Mutation("reference-psum-unvarying-identity", "fuzz/reference.py",
             "            return [self.collective(e, x, ctx)]",
             '            return [x if e["op"] == "psum" and not set(e["axes"]) & ts[0].vma '
             "else self.collective(e, x, ctx)]",
             "the reference's psum leaves an unvarying value as is (no multiplication by the axis size)",
             ("tests/test_reference.py",)),
    Mutation("reference-ppermute-backwards", "fuzz/ops/collectives.py",
             "src[d], got[d] = s, True", "src[s], got[s] = d, True",
             "the reference's ppermute moves values the inverse way", ("tests/test_reference.py",)),
    Mutation("close-always-true", "oracles/differential.py",
             "    return bool(np.allclose(act, exp, rtol=tol, atol=tol * scale, equal_nan=True))",
             "    return True",
             "the differential and metamorphic oracles' agree() accepts any values", ("tests/test_oracles.py",)),
    Mutation("crash-oracle-silent", "oracles/crash.py",
             '    line = fatal_line(outcome.get("stderr", ""))\n',
             '    return []\n    line = fatal_line(outcome.get("stderr", ""))\n',
             "the crash oracle returns no finding for a dead worker",
             ("tests/test_oracles.py", "-k", "crash")),
    Mutation("metamorphic-never-compares", "oracles/metamorphic.py",
             "        if len(a) != len(b) or not all(agree(y, x, tol) or noise(k, i, x, y) for i, (x, y) in enumerate(zip(a, b))):",
             "        if False:",
             "the metamorphic oracle never compares equivalent calls", ("tests/test_oracles.py", "-k", "metamorphic")),
    Mutation("internal-error-ignored", "oracles/internal_error.py",
             '        if not c["ok"]:', "        if False:",
             "the internal-error oracle ignores exceptions JAX raised", ("tests/test_oracles.py", "-k", "internal")),
    Mutation("callbacks-never-compare", "oracles/callbacks.py",
             "            if extra.size or missing.size:", "            if False:",
             "the callbacks oracle accepts any values a host function received",
             ("tests/test_oracles.py", "-k", "callbacks")),
    Mutation("callbacks-ignore-positions", "oracles/callbacks.py",
             "    xs, ys = xs.reshape(-1, 2), ys.reshape(-1, 2)\n",
             "    xs, ys = xs.reshape(-1, 2) * [0.0, 1.0], ys.reshape(-1, 2) * [0.0, 1.0]\n",
             "the callbacks oracle compares a host function's values as one set, whatever their positions",
             ("tests/test_callbacks.py", "-k", "position")),
    Mutation("reference-callback-rank-zero", "fuzz/reference.py",
             "callback_cells(np, np.asarray(x), self.ranks.get(tag, 0))", "callback_cells(np, np.asarray(x), 0)",
             "the reference records a callback's values without their positions in the local block",
             ("tests/test_reference.py", "-k", "callbacks")),
    Mutation("determinism-never-cross-process", "oracles/determinism.py",
             'ok_other = other is not None and other.get("status") == "ok" and k < len(other["calls"])',
             "ok_other = False",
             "the determinism oracle never compares with the other hash seed's lowering",
             ("tests/test_oracles.py", "tests/test_judge_path.py", "-k", "determinism or hash_seed")),
]


def repo_files(root: Path) -> list:
    """Tracked and new (not ignored) files of the working tree, relative paths."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                         capture_output=True, check=True).stdout.decode()
    return sorted({p for p in out.split("\0") if p})


def copy_repo(root: Path, dest: Path) -> int:
    """Copy the working tree's files (see :func:`repo_files`) into ``dest``; returns how many."""
    n = 0
    for rel in repo_files(root):
        src = root / rel
        if not (src.is_file() or src.is_symlink()):
            continue  # deleted in the working tree, or a submodule
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel, follow_symlinks=False)
        n += 1
    return n


def env_for(copy: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy)  # before the editable install's finder, which points at the real tree
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a restored file must never run from a mutant's cached bytecode
    return env


def check_isolated(copy: Path) -> None:
    """Exit 2 unless the copy's packages are the ones imported there (not the real tree's)."""
    code = "import fuzz, oracles, strategies; print(fuzz.__file__); print(oracles.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=copy, env=env_for(copy), capture_output=True, text=True)
    paths = out.stdout.split()
    if out.returncode != 0 or len(paths) != 2 or not all(Path(p).resolve().is_relative_to(copy.resolve())
                                                         for p in paths):
        sys.exit(f"error: the copy in {copy} imports {paths or out.stderr.strip()[-200:]}, not its own files; "
                 f"run this script with the project's venv python")


def run_pytest(copy: Path, selection: tuple, timeout: float) -> tuple:
    """(status, seconds, output tail) of ``pytest -x -q <selection>`` in the copy."""
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *selection]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=copy, env=env_for(copy), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        status = {0: "passed", 1: "failed"}.get(proc.returncode, "error")
        if proc.returncode == 2 and re.search(rb"^FAILED ", out, re.M) and b"stopping after" in out:
            status = "failed"  # pytest-xdist ends a -x session that met a failure with exit status 2
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        status = "timeout"
    tail = "\n".join(out.decode(errors="replace").rstrip().splitlines()[-8:])
    return status, round(time.monotonic() - t0, 1), tail


def apply(copy: Path, m: Mutation):
    """Apply a mutation in the copy; returns the original text, or None (stale) with the reason."""
    path = copy / m.file
    if not path.is_file():
        return None, f"{m.file} does not exist"
    text = path.read_text()
    count = text.count(m.old)
    if count != 1:
        return None, f"the text to replace occurs {count} times in {m.file}"
    path.write_text(text.replace(m.old, m.new))
    return text, ""


def selection_of(m: Mutation, args) -> tuple:
    if args.select is not None:
        return tuple(shlex.split(args.select))
    return m.quick if args.quick else m.tests


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="run each mutation's own narrow pytest selection")
    ap.add_argument("--select", metavar="ARGS", help='one pytest selection for every mutation, e.g. "tests/x.py -k y"')
    ap.add_argument("--only", metavar="NAME", action="append", help="run this mutation only (repeatable)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per pytest run (default 1800)")
    ap.add_argument("--no-baseline", action="store_true", help="do not first run the unmutated selections")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy (its path is printed)")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = ap.parse_args()
    if args.quick and args.select is not None:
        ap.error("--quick and --select exclude each other")
    names = [m.name for m in MUTATIONS]
    unknown = [n for n in args.only or [] if n not in names]
    if unknown:
        ap.error(f"no mutation named {unknown[0]!r}; known: {', '.join(names)}")
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.name:36s} {m.file:24s} {m.description}")
        return

    t_start = time.monotonic()
    copy = Path(tempfile.mkdtemp(prefix="shardfuzz-mutations-"))
    counts: dict = {}
    try:
        n = copy_repo(ROOT, copy)
        check_isolated(copy)
        print(f"copied {n} files to {copy}", file=sys.stderr)
        if not args.no_baseline:
            for sel in dict.fromkeys(selection_of(m, args) for m in chosen):
                status, seconds, tail = run_pytest(copy, sel, args.timeout)
                emit({"baseline": True, "selection": " ".join(sel) or "(default suite)", "status": status,
                      "seconds": seconds, **({"tail": tail} if status != "passed" else {})})
                if status != "passed":
                    print("error: the unmutated suite does not pass with this selection: fix it first "
                          "(or use --no-baseline)", file=sys.stderr)
                    sys.exit(2)
        for m in chosen:
            sel = selection_of(m, args)
            record = {"name": m.name, "file": m.file, "description": m.description,
                      "selection": " ".join(sel) or "(default suite)"}
            original, why = apply(copy, m)
            if original is None:
                record.update(status="stale", seconds=0.0, reason=why)
            else:
                try:
                    status, seconds, tail = run_pytest(copy, sel, args.timeout)
                finally:
                    (copy / m.file).write_text(original)
                status = {"failed": "killed", "passed": "survived"}.get(status, status)
                record.update(status=status, seconds=seconds)
                if status not in ("killed", "survived"):
                    record["tail"] = tail
            counts[record["status"]] = counts.get(record["status"], 0) + 1
            emit(record)
    finally:
        if args.keep:
            print(f"kept the copy in {copy}", file=sys.stderr)
        else:
            shutil.rmtree(copy, ignore_errors=True)
    emit({"summary": True, "mutations": len(chosen), **{k: counts.get(k, 0) for k in
          ("killed", "survived", "stale", "error", "timeout")}, "seconds": round(time.monotonic() - t_start, 1)})
    bad = sum(counts.get(k, 0) for k in ("survived", "error", "timeout"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
