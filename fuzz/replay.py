"""Replay corpus entries on the installed JAX: does each still show its finding?

Used by ``shardfuzz replay`` and by the test suite (``tests/test_corpus.py``). Every
entry is replayed whatever release it was recorded on, and gets one of three verdicts:

- ``reproduces``: the entry's finding (same signature) shows again;
- ``does not reproduce``;
- ``not applicable here``: this JAX cannot express the program (an API the release
  lacks, see fuzz/render.py) or the mesh needs more devices than the worker has.

Only on the release an entry was recorded on is its status checked: an ``open`` entry
must reproduce there (else JAX fixed the bug: mark it ``fixed``), a ``fixed`` one must
not (a regression). On other releases the verdict is information (see ``shardfuzz
bisect`` for which releases a bug affects).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from fuzz.render import render
from fuzz.runner import Runner
from fuzz.typecheck import ProgramError

REPRODUCES, DOES_NOT, NOT_APPLICABLE = "reproduces", "does not reproduce", "not applicable here"


@dataclass
class Replay:
    """Outcome of replaying one entry.

    ``verdict``: one of REPRODUCES, DOES_NOT, NOT_APPLICABLE; ``why``: a short reason
    for NOT_APPLICABLE or the signatures seen instead; ``recorded_release``: whether the
    installed JAX is the release the entry was recorded on (only then is ``ok`` checked).
    """

    path: str
    signature: str
    status: str
    verdict: str
    recorded_release: bool
    why: str = ""

    @property
    def ok(self) -> bool:
        """False only when the status no longer holds on the recorded release."""
        if not self.recorded_release or self.verdict == NOT_APPLICABLE:
            return True
        return (self.verdict == REPRODUCES) == (self.status == "open")


def applicable(program: dict, caps: dict) -> str:
    """'' when the worker's JAX can run ``program``, else why not (one line)."""
    need = math.prod(program["mesh"]["axis_sizes"])
    if need > caps.get("n_devices", 0):
        return f"the mesh needs {need} devices, the worker has {caps.get('n_devices')}"
    try:
        render(program, caps)
    except (ValueError, ProgramError) as e:  # ProgramError is a ValueError too
        return str(e)
    return ""


def replay_entry(entry: dict, runner: Runner, path: str = "") -> Replay:
    """Run one corpus entry's program in a fresh worker (after its recorded history, for crashes) and judge it."""
    recorded = entry["jax_version"] == runner.caps.get("jax_version")
    for program in entry.get("history", []) + [entry["program"]]:
        why = applicable(program, runner.caps)
        if why:
            return Replay(path, entry["signature"], entry["status"], NOT_APPLICABLE, recorded, why)
    runner.worker.restart()
    runner.history.clear()
    for program in entry.get("history", []):
        runner.run(program)
    found, _ = runner.run(entry["program"])
    if any(f.signature == entry["signature"] for f in found):
        return Replay(path, entry["signature"], entry["status"], REPRODUCES, recorded)
    seen = "; ".join(sorted({f.signature[:80] for f in found})) or "no finding"
    return Replay(path, entry["signature"], entry["status"], DOES_NOT, recorded, seen)
