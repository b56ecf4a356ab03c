"""Cached virtual environments for released JAX versions (``shardfuzz run --jax-version X.Y.Z``).

Each venv lives in ``$SHARDFUZZ_CACHE`` (default ``~/.cache/shardfuzz``) under
``venvs/jax-X.Y.Z`` and holds only what the worker needs: jax, jaxlib and NumPy, with
the pins old releases need (jaxlib 0.4.x was built against NumPy 1, and its scipy /
ml_dtypes must be of the same era). A venv is used only once its install finished
(a marker file), so an interrupted install is redone, never half-used.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

OLDEST = (0, 4, 26)


class ProvisionError(RuntimeError):
    """A version that cannot be provisioned: a one-line reason and what to do."""


def cache_dir() -> Path:
    return Path(os.environ.get("SHARDFUZZ_CACHE", Path.home() / ".cache" / "shardfuzz"))


def pins(version: tuple) -> list:
    """Requirement strings for jax/jaxlib ``version`` (a 3-tuple) and the packages it needs pinned."""
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


def parse_version(text: str) -> tuple:
    """(major, minor, patch) of 'X.Y.Z'; ProvisionError for anything else or a release too old."""
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text.strip())
    if not m:
        raise ProvisionError(f"--jax-version {text!r} is not of the form X.Y.Z (e.g. 0.4.38)")
    v = tuple(int(g) for g in m.groups())
    if v < OLDEST:
        raise ProvisionError(f"JAX {text} is older than the oldest supported release "
                             f"{'.'.join(map(str, OLDEST))}; choose a newer --jax-version")
    return v


def interpreter(version_text: str, python: str | None = None, log=None) -> str:
    """Path of a Python interpreter with JAX ``version_text`` installed, creating the venv if needed.

    Raises ProvisionError when the version is malformed, too old, or pip cannot install it.
    """
    version = parse_version(version_text)
    root = cache_dir() / "venvs" / f"jax-{version_text}"
    py = root / "bin" / "python"
    marker = root / ".shardfuzz-ready"
    if marker.exists() and py.exists():
        return str(py)
    if root.exists():
        shutil.rmtree(root)  # an interrupted install: start again
    root.parent.mkdir(parents=True, exist_ok=True)
    (log or (lambda s: None))(f"creating a venv with JAX {version_text} in {root} (once; cached)")
    subprocess.run([python or sys.executable, "-m", "venv", str(root)], check=True, capture_output=True)
    r = subprocess.run([str(py), "-m", "pip", "install", "--quiet", *pins(version)], capture_output=True, text=True)
    if r.returncode != 0:
        lines = [ln for ln in (r.stderr or r.stdout).splitlines() if ln.strip() and not ln.startswith("WARNING")]
        shutil.rmtree(root, ignore_errors=True)
        why = lines[-1] if lines else "pip failed"
        raise ProvisionError(f"cannot install JAX {version_text} ({why}); check the version exists: "
                             f"pip index versions jax")
    marker.write_text(" ".join(pins(version)) + "\n")
    return str(py)
