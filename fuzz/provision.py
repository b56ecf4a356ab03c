"""Cached virtual environments for released JAX versions (``shardfuzz run --jax-version X.Y.Z``),
and the one place that decides which interpreter runs the workers (:func:`worker_python`).

Each venv lives in ``$SHARDFUZZ_CACHE`` (default ``~/.cache/shardfuzz``) under
``venvs/jax-X.Y.Z`` and holds only what the worker needs: jax, jaxlib and NumPy, with
the pins old releases need (jaxlib 0.4.x was built against NumPy 1, and its scipy /
ml_dtypes must be of the same era). A venv is used only once its install finished
(a marker file, which also records the interpreter it was made with), so an
interrupted install is redone, never half-used; a failed or interrupted one is removed.

A release's wheels support only some Pythons (jax 0.11.0 on need Python >= 3.12), so
the venv is made with an interpreter that the package index says fits the release
(:func:`fits`: ``pip index versions jax --python-version 3.N`` filters by jax's
Requires-Python, the same for jaxlib by its wheel tags), chosen among ``--venv-python`` /
``$SHARDFUZZ_VENV_PYTHON``, this interpreter and the ``python3.N`` found on PATH
(:func:`choose_venv_python`). Nothing here holds a table of which Python a release needs.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

OLDEST = (0, 4, 26)
VENV_PYTHON_ENV = "SHARDFUZZ_VENV_PYTHON"  # an interpreter to make venvs with (CI, benchmarks)
NO_INDEX_ENV = "SHARDFUZZ_NO_INDEX"  # set (tests): never ask the package index, answers are unknown
ASKED_MINORS = tuple(range(10, 15))  # the Pythons 3.N asked about to say which a release needs (3.10 .. 3.14)
PATH_MINORS = tuple(range(20, 9, -1))  # python3.N looked for on PATH, newest first
INDEX_TIMEOUT = 120.0  # seconds one `pip index versions` may take when provisioning
INDEX_TTL = 6 * 3600  # seconds an index answer is kept on disk (a new release shows within this)


class ProvisionError(RuntimeError):
    """A version that cannot be provisioned: a one-line reason and what to do."""


def cache_dir() -> Path:
    return Path(os.environ.get("SHARDFUZZ_CACHE", Path.home() / ".cache" / "shardfuzz"))


def pins(version: tuple) -> list:
    """Requirement strings for jax/jaxlib ``version`` (a 3- or 4-tuple) and the packages it needs pinned."""
    v = ".".join(map(str, version))
    # the newest jaxlib not newer than jax: some jax releases came without a jaxlib of their own
    # (jax 0.4.37 runs on jaxlib 0.4.36, 0.5.2 on 0.5.1: `pip index versions jaxlib`), and jax
    # itself requires the oldest jaxlib it runs on
    reqs = [f"jax=={v}", f"jaxlib<={v}"]
    if version < (0, 4, 36):
        # jaxlib < 0.4.36 has no NumPy 2 wheels support; keep its scientific stack of the same era
        reqs += ["numpy<2", "scipy<1.13", "ml_dtypes<0.5"]
    elif version < (0, 5, 0):
        reqs += ["numpy<2.2", "scipy<1.15"]
    return reqs


def release_tuple(text: str) -> tuple | None:
    """(0, 12, 0, 1) of a final release 'X.Y.Z' or 'X.Y.Z.W'; None for anything else (rc, dev, 'X.Y')."""
    m = re.fullmatch(r"\d+\.\d+\.\d+(?:\.\d+)?", text.strip())
    return tuple(int(p) for p in m.group(0).split(".")) if m else None


def _text(version: tuple) -> str:
    return ".".join(map(str, version))


def parse_version(text: str) -> tuple:
    """(major, minor, patch[, post]) of 'X.Y.Z' or 'X.Y.Z.W' (jax 0.12.0.1, 0.9.0.1 exist).

    Raises ProvisionError for anything else or a release older than :data:`OLDEST`.
    """
    v = release_tuple(text)
    if v is None:
        raise ProvisionError(f"--jax-version {text!r} is not of the form X.Y.Z (or X.Y.Z.W), nor 'newest' "
                             f"(e.g. 0.4.38)")
    if v < OLDEST:
        raise ProvisionError(f"JAX {text} is older than the oldest supported release "
                             f"{_text(OLDEST)}; choose a newer --jax-version")
    return v


# ------------------------------------------------------------------------------ the package index

def query_index(package: str, minor: int | None, timeout: float = INDEX_TIMEOUT) -> list | None:
    """The versions of ``package`` the package index offers, newest first, as pip lists them.

    ``minor``: only those with a wheel for CPython 3.``minor`` (``pip index versions P
    --python-version 3.N --only-binary=:all:``: jax by its Requires-Python, jaxlib by its
    wheel tags); None: every release, whatever Python it needs (``--ignore-requires-python``).
    Returns [] when pip says no version matches, None when the answer is unknown (pip
    missing, ``timeout`` seconds passed, the index unreachable: pip then retries and may
    list only what a local find-links directory holds, so that answer is not trusted).
    Tests replace this function (it is the only one here that reaches the network).
    """
    cmd = [sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"]
    cmd += ["--ignore-requires-python"] if minor is None else ["--python-version", f"3.{minor}", "--only-binary=:all:"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    out = r.stdout + "\n" + r.stderr
    if re.search(r"Retrying \(|NewConnectionError|Could not fetch URL|ConnectTimeout|ReadTimeout", out):
        return None
    m = re.search(r"Available versions:\s*(.*)", out)
    if m:
        return [v.strip() for v in m.group(1).split(",") if v.strip()]
    return [] if "No matching distribution found" in out else None


_MEMO: dict = {}  # (package, minor) -> versions, for this process
_MEMO_LOCK = threading.Lock()


def _disk_path() -> Path:
    return cache_dir() / "index-versions.json"


def _disk_read() -> dict:
    try:
        data = json.loads(_disk_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def index_versions(package: str, minor: int | None = None, timeout: float = INDEX_TIMEOUT) -> list | None:
    """:func:`query_index`, each known answer kept for this process and :data:`INDEX_TTL` seconds on disk
    (``$SHARDFUZZ_CACHE/index-versions.json``); None (unknown) is not kept. With ``$SHARDFUZZ_NO_INDEX``
    set every answer is None and the disk is not read."""
    if os.environ.get(NO_INDEX_ENV):
        return None
    key = f"{package}|{'any' if minor is None else f'3.{minor}'}"
    with _MEMO_LOCK:
        if key in _MEMO:
            return list(_MEMO[key])
    rec = _disk_read().get(key)
    if (isinstance(rec, dict) and isinstance(rec.get("versions"), list) and isinstance(rec.get("at"), (int, float))
            and 0 <= time.time() - rec["at"] < INDEX_TTL and all(isinstance(v, str) for v in rec["versions"])):
        found = rec["versions"]
    else:
        found = query_index(package, minor, timeout)
        if found is None:
            return None
        try:
            from fuzz.util import atomic_write_text

            _disk_path().parent.mkdir(parents=True, exist_ok=True)
            data = _disk_read()
            data[key] = {"at": time.time(), "versions": found}
            atomic_write_text(str(_disk_path()), json.dumps(data, sort_keys=True))
        except OSError:
            pass  # (an unwritable cache: asked again next time)
    with _MEMO_LOCK:
        _MEMO[key] = list(found)
    return list(found)


def releases(timeout: float = INDEX_TIMEOUT) -> list | None:
    """Final jax releases on the index (X.Y.Z and X.Y.Z.W), newest first, whatever Python they need; None if unknown."""
    found = index_versions("jax", None, timeout)
    if found is None:
        return None
    return sorted({_text(t) for t in map(release_tuple, found) if t}, key=release_tuple, reverse=True)


def fits(version: str, minor: int, timeout: float = INDEX_TIMEOUT) -> bool | None:
    """Whether jax ``version`` can be installed on CPython 3.``minor`` from the index's wheels.

    True when jax ``version`` is listed for that Python and so is a jaxlib <= ``version`` of the
    same minor series (0.12.x; the pin is ``jaxlib<=version``, :func:`pins`; jax 0.4.37 runs on
    jaxlib 0.4.36 and requires a jaxlib of its own series). Measured 2026-12-07: jax lists
    0.10.2 for Python 3.10 (its Requires-Python allows it) but jaxlib for 3.10 ends at 0.6.2,
    so both are asked. None when the index does not answer.
    """
    v = release_tuple(version)
    jax = index_versions("jax", minor, timeout)
    if jax is None:
        return None
    if v not in {release_tuple(x) for x in jax}:
        return False
    jaxlib = index_versions("jaxlib", minor, timeout)
    if jaxlib is None:
        return None
    older = [t for t in map(release_tuple, jaxlib) if t and t <= v]
    return bool(older) and max(older)[:2] == v[:2]


def pythons_for(version: str, minors=ASKED_MINORS, timeout: float = INDEX_TIMEOUT) -> list | None:
    """The minors N of ``minors`` whose CPython 3.N fits jax ``version`` (:func:`fits`, asked in parallel),
    ascending; None when the index did not answer for one of them."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda n: fits(version, n, timeout), minors))
    if any(a is None for a in answers):
        return None
    return [n for n, ok in zip(minors, answers) if ok]


def pythons_text(minors: list) -> str:
    """'Python >= 3.12' for a run up to the newest minor asked, else 'Python 3.10, 3.11'."""
    if minors and list(minors) == list(range(minors[0], ASKED_MINORS[-1] + 1)) and len(minors) > 1:
        return f"Python >= 3.{minors[0]}"
    return "Python " + ", ".join(f"3.{n}" for n in minors)


def resolve_version(text: str) -> str:
    """The release ``--jax-version text`` names: 'newest' is the newest on the index; else ``text``
    checked (:func:`parse_version`) and normalized. Raises ProvisionError when the form is wrong,
    the release too old, not on the index (the newest few are named), or 'newest' cannot be
    asked. An index that does not answer lets a well-formed release through (pip decides)."""
    if text.strip().lower() == "newest":
        found = releases()
        if not found:
            raise ProvisionError("cannot ask the package index for the newest JAX (pip index versions jax); "
                                 "pass --jax-version X.Y.Z")
        return found[0]
    return _text(parse_version(text))


def _check_listed(version: str) -> None:
    found = releases()
    if found is not None and version not in found:
        raise ProvisionError(f"JAX {version} is not a release on the package index (the newest: "
                             f"{', '.join(found[:6])}); choose one of them or --jax-version newest")


# ------------------------------------------------------------------------------ interpreters

_PROBES: dict = {}


def probe_python(path: str) -> tuple | None:
    """(sys.executable, minor, 'X.Y.Z') of the CPython 3 at ``path`` (a path or a name on PATH) when it
    runs and can make venvs (``venv``, ``ensurepip``), else None. A pyenv shim exists on PATH and fails:
    only running it tells."""
    if path in _PROBES:
        return _PROBES[path]
    found = shutil.which(path) if os.sep not in path else path
    out = None
    if found and os.path.isfile(found) and os.access(found, os.X_OK):
        try:
            r = subprocess.run([found, "-I", "-c", "import sys, venv, ensurepip; "
                                "print(sys.version_info[0], sys.version_info[1], sys.version.split()[0], "
                                "sys.executable)"],
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
            parts = r.stdout.strip().split(" ", 3) if r.returncode == 0 else []
            if len(parts) == 4 and parts[0] == "3" and parts[1].isdigit() and parts[3]:
                out = (parts[3], int(parts[1]), parts[2])
        except (OSError, subprocess.SubprocessError, ValueError):
            out = None
    _PROBES[path] = out
    if out is not None:
        _PROBES[out[0]] = out
    return out


def _explicit(venv_python: str | None) -> tuple:
    """(the interpreter asked for, the words naming where it came from) or (None, None)."""
    if venv_python:
        return venv_python, "--venv-python"
    if os.environ.get(VENV_PYTHON_ENV):
        return os.environ[VENV_PYTHON_ENV], VENV_PYTHON_ENV
    return None, None


def check_venv_python(venv_python: str | None) -> tuple | None:
    """:func:`probe_python` of ``--venv-python`` (else ``$SHARDFUZZ_VENV_PYTHON``); None when neither is
    given. Raises ProvisionError (one line) when it is not a working Python 3 (a missing file, a
    directory, a shell script, a failing shim)."""
    path, where = _explicit(venv_python)
    if path is None:
        return None
    probe = probe_python(path)
    if probe is None:
        why = ("no such file" if os.sep in path and not os.path.lexists(path) else
               "a directory" if os.path.isdir(path) else
               "not found on PATH" if os.sep not in path and not shutil.which(path) else
               "it does not run as a Python 3 with the venv and ensurepip modules")
        raise ProvisionError(f"{where} {path} is not a Python interpreter ({why}); pass the path of one, "
                             f"e.g. /usr/bin/python3.13 or ~/.pyenv/versions/3.13.0/bin/python3.13")
    return probe


def choose_venv_python(version: str, venv_python: str | None = None, log=None) -> str:
    """The interpreter to make jax ``version``'s venv with: the first that :func:`fits` it of
    ``--venv-python`` (``venv_python``, else ``$SHARDFUZZ_VENV_PYTHON``), this interpreter, and
    ``python3.N`` on PATH (newest N first), each validated by running it (:func:`probe_python`).
    When the index does not answer, the first working one (pip then decides).

    Raises ProvisionError (one line) when ``venv_python`` is not a Python, or when none fits:
    the line names the Pythons the release needs (asked of the index for 3.10 .. 3.14) and
    how to pass one.
    """
    say = log or (lambda s: None)
    explicit = check_venv_python(venv_python)
    names = [explicit[0]] if explicit else []
    names += [sys.executable] + [f"python3.{n}" for n in PATH_MINORS]
    seen, tried = set(), []
    for name in names:
        probe = probe_python(name)
        if probe is None:
            if os.sep not in name and shutil.which(name):
                tried.append(f"{name} on PATH does not run")
            continue
        exe, minor, _ = probe
        real = os.path.realpath(exe)
        if real in seen:
            continue
        seen.add(real)
        ok = fits(version, minor)
        if ok is None:
            say(f"the package index did not answer; making JAX {version}'s venv with Python 3.{minor} ({exe})")
            return exe
        if ok:
            if tried:
                say(f"JAX {version} has no wheels for {'; '.join(tried)}: using Python 3.{minor} ({exe})")
            return exe
        tried.append(f"Python 3.{minor} ({exe})")
    needed = pythons_for(version)
    found = "; ".join(tried) if tried else "no Python found"
    if needed == []:
        raise ProvisionError(f"JAX {version} has no jax and jaxlib wheels on the package index for any Python "
                             f"3.{ASKED_MINORS[0]} .. 3.{ASKED_MINORS[-1]}; choose another --jax-version")
    needs = f"{pythons_text(needed)}" if needed else "another Python"
    raise ProvisionError(f"JAX {version} needs {needs} (its wheels on the package index); found here: {found}; "
                         f"pass one with --venv-python PATH or {VENV_PYTHON_ENV}=PATH")


def _marker(root: Path) -> Path:
    return root / ".shardfuzz-ready"


def interpreter(version_text: str, venv_python: str | None = None, log=None, *, python: str | None = None) -> str:
    """Path of a Python interpreter with JAX ``version_text`` ('X.Y.Z', 'X.Y.Z.W' or 'newest')
    installed, creating the venv if needed with :func:`choose_venv_python`'s interpreter
    (``venv_python`` first if it fits; ``python`` is its former name). Commands call
    :func:`worker_python` rather than this.

    A ready venv (its marker written) is used whatever interpreter made it. A venv whose
    making fails or is interrupted (KeyboardInterrupt too) is removed. Raises ProvisionError
    (one line) when the version is malformed, too old, not on the index, has no wheels for
    any Python found, ``venv_python`` is not a Python, or pip cannot install it.
    """
    say = log or (lambda s: None)
    venv_python = venv_python or python
    version = resolve_version(version_text)
    check_venv_python(venv_python)
    root = cache_dir() / "venvs" / f"jax-{version}"
    py = root / "bin" / "python"
    if _marker(root).exists() and py.exists():
        return str(py)
    _check_listed(version)
    maker = choose_venv_python(version, venv_python, log=say)
    probe = probe_python(maker)
    reqs = pins(release_tuple(version))
    if root.exists() or root.is_symlink():
        shutil.rmtree(root, ignore_errors=True)  # an interrupted install: start again
    root.parent.mkdir(parents=True, exist_ok=True)
    say(f"creating a venv with JAX {version} and Python {probe[2]} in {root} (once; cached)")
    try:
        r = subprocess.run([maker, "-m", "venv", str(root)], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise ProvisionError(f"cannot make a venv with {maker} ({_last_line(r, 'python -m venv failed')}); "
                                 f"pass another --venv-python")
        r = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *reqs],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise ProvisionError(f"cannot install JAX {version} on Python {probe[2]} ({_last_line(r, 'pip failed')}); "
                                 f"check the version exists: pip index versions jax")
        from fuzz.util import atomic_write_text

        atomic_write_text(str(_marker(root)), json.dumps({"pins": reqs, "python": maker, "python_version": probe[2],
                                                          "made": time.strftime("%Y-%m-%d")}) + "\n")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)  # nothing half-made stays in the cache
        raise
    return str(py)


def _last_line(r, default: str) -> str:
    lines = [ln for ln in (r.stderr or r.stdout or "").splitlines() if ln.strip() and not ln.startswith("WARNING")]
    return lines[-1].strip()[:300] if lines else default


def installed_jax_version() -> str | None:
    """The version of the jax distribution installed for this interpreter (None if none), without importing it."""
    import importlib.metadata

    try:
        return importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return None


def check_options(python: str | None = None, jax_version: str | None = None, venv_python: str | None = None) -> None:
    """ProvisionError (one line) for options that do not go together: ``--python`` with ``--jax-version``,
    or ``--venv-python`` without ``--jax-version`` (it makes the venv of a release)."""
    if python and jax_version:
        raise ProvisionError("give either --python or --jax-version, not both")
    if venv_python and not jax_version:
        raise ProvisionError("--venv-python makes the venv of a --jax-version release; give --jax-version too, "
                             "or --python PATH for an interpreter that has JAX installed")


def worker_python(python: str | None = None, jax_version: str | None = None, venv_python: str | None = None,
                  log=None, recorded: str | None = None, reuse_here: bool = False) -> str:
    """The interpreter that runs the JAX workers: the one place that decides it.

    - ``python`` (``--python PATH``): that interpreter, as given (not checked here: a worker
      that does not start says why, fuzz.execute.WorkerError);
    - ``jax_version`` (``--jax-version X.Y.Z|X.Y.Z.W|newest``): the cached venv with that
      release (:func:`interpreter`, made once, with ``venv_python`` = ``--venv-python`` or
      ``$SHARDFUZZ_VENV_PYTHON`` if it fits the release's wheels, else another Python
      found); with ``reuse_here``, this interpreter when its own jax is that release
      (bisect does, to save a venv);
    - neither: this interpreter (``sys.executable``); with ``recorded`` (the release an
      input was recorded on, e.g. export's finding) it must have that jax.

    ``log``: a callable taking one line (progress while a venv is made). Returns a path.
    Raises ProvisionError (one line, for exit 2) for options that do not go together
    (:func:`check_options`), a release that cannot be provisioned, or ``recorded`` not
    installed here.

    Commands call it with their options as given, e.g. a ``--jax-version`` of
    ``shardfuzz replay``: ``Runner(python=worker_python(python, jax_version, venv_python,
    log=click.echo))``, turning ProvisionError into ``_fail(str(e))``.
    """
    check_options(python, jax_version, venv_python)
    if python:
        return python
    if jax_version:
        if reuse_here and jax_version == installed_jax_version():
            return sys.executable
        return interpreter(jax_version, venv_python=venv_python, log=log)
    if recorded is not None:
        here = installed_jax_version()
        if here != recorded:
            raise ProvisionError(f"the finding was recorded on jax {recorded} but this interpreter has jax "
                                 f"{here or '(none)'}; pass --jax-version {recorded} or --python PATH")
    return sys.executable


# ------------------------------------------------------------------------------ a newer release

def newest_release_info(timeout: float = 5.0) -> dict | None:
    """{"newest": 'X.Y.Z', "pythons": ['3.12', ...] or None (unknown), "here_fits": bool or None} of the
    newest jax on the index (each question ``timeout`` seconds at most); None when the index does not
    answer. Meant for a background thread at a campaign's start (:func:`newer_jax_note`)."""
    found = releases(timeout)
    if not found:
        return None
    newest = found[0]
    here = fits(newest, sys.version_info[1], timeout)
    needed = pythons_for(newest, timeout=timeout)
    return {"newest": newest, "pythons": None if needed is None else [f"3.{n}" for n in needed],
            "here_fits": here}


def newer_jax_note(info: dict | None, fuzzed: str | None) -> dict | None:
    """The report's ``newer_jax``: ``info`` (:func:`newest_release_info`) with ``fuzzed`` and a one-line
    ``line`` when the newest release is newer than the ``fuzzed`` jax, else None (also when either is
    unknown, or ``fuzzed`` is not a release: a dev build)."""
    if not info or not fuzzed:
        return None
    new, old = release_tuple(info["newest"]), release_tuple(fuzzed)
    if new is None or old is None or new <= old:
        return None
    needs = f" (needs {pythons_text([int(p.split('.')[1]) for p in info['pythons']])})" if info.get("pythons") else ""
    how = "shardfuzz run --jax-version newest" + ("" if info.get("here_fits") else " --venv-python PATH")
    return {**info, "fuzzed": fuzzed,
            "line": f"JAX {info['newest']} is the newest release{needs}; this campaign fuzzed {fuzzed}: {how}"}


class NewerJaxCheck:
    """:func:`newest_release_info` in a daemon thread, started at once; :meth:`note` never waits long."""

    def __init__(self, timeout: float = 5.0):
        self.info = None
        self.thread = threading.Thread(target=self._run, args=(timeout,), daemon=True, name="newer-jax")
        self.thread.start()

    def _run(self, timeout: float) -> None:
        try:
            self.info = newest_release_info(timeout)
        except Exception:  # (a background hint: never breaks a campaign)
            self.info = None

    def note(self, fuzzed: str | None, wait: float = 1.0) -> dict | None:
        """:func:`newer_jax_note` for ``fuzzed``, waiting at most ``wait`` seconds for the thread (None if not done)."""
        self.thread.join(wait)
        return None if self.thread.is_alive() else newer_jax_note(self.info, fuzzed)
