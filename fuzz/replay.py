"""Replay corpus entries on a JAX: does each still show its finding?

Used by ``shardfuzz replay`` and by the test suite (``tests/test_corpus.py``). Every
entry is replayed whatever release it was recorded on, and gets one of four verdicts
(fuzz/verdicts.py):

- ``reproduces``: the entry's finding (same signature) shows again;
- ``fails differently``: another finding shows instead (its signature is kept);
- ``does not reproduce``: no finding shows;
- ``not applicable here``: this JAX cannot express the program (an API the release
  lacks, see fuzz/render.py) or the mesh needs more devices than the worker has.

Where the entry has a verdict recorded for the release being replayed (its
``releases.tested``, written by ``shardfuzz replay --record`` and ``shardfuzz bisect``),
the replay must give that verdict: an open bug that stopped reproducing there, or a
fixed one that came back, is a change (``Replay.ok`` False). A release without a
recorded verdict is information, except the release the entry was recorded on
(``jax_version``), where an ``open`` entry must reproduce and a ``fixed`` one must not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from fuzz.render import render
from fuzz.runner import Runner
from fuzz.typecheck import ProgramError
from fuzz.verdicts import DOES_NOT, FAILS_DIFFERENTLY, NOT_APPLICABLE, REPRODUCES, verdict as recorded_verdict

__all__ = ["DOES_NOT", "FAILS_DIFFERENTLY", "NOT_APPLICABLE", "REPRODUCES", "Replay", "applicable", "replay_entry"]


@dataclass
class Replay:
    """Outcome of replaying one entry.

    ``verdict``: one of REPRODUCES, FAILS_DIFFERENTLY, DOES_NOT, NOT_APPLICABLE; ``why``: a short
    reason for NOT_APPLICABLE or the signatures seen instead (cut to 80 characters each);
    ``recorded_release``: whether the worker's JAX is the release the entry was recorded on;
    ``seen``: (signature, message) of each other finding (FAILS_DIFFERENTLY); ``expected``: the
    verdict the entry records for the worker's release (None: none recorded).
    """

    path: str
    signature: str
    status: str
    verdict: str
    recorded_release: bool
    why: str = ""
    seen: tuple = ()
    expected: str | None = None

    @property
    def ok(self) -> bool:
        """False when the verdict differs from the one recorded for this release; without one, False
        only when the status no longer holds on the release the entry was recorded on."""
        if self.expected is not None:
            return self.verdict == self.expected
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
    """Run one corpus entry's program in a fresh worker (after its recorded history, for crashes) and judge it.

    The verdict is compared (``Replay.ok``) with the one ``entry["releases"]["tested"]`` records
    for the worker's jax version, if any.
    """
    release = runner.caps.get("jax_version")
    recorded = entry["jax_version"] == release
    tested = (entry.get("releases") or {}).get("tested") or {}
    done = dict(path=path, signature=entry["signature"], status=entry["status"], recorded_release=recorded,
                expected=recorded_verdict(tested, release) if isinstance(release, str) else None)
    for program in entry.get("history", []) + [entry["program"]]:
        why = applicable(program, runner.caps)
        if why:
            return Replay(verdict=NOT_APPLICABLE, why=why, **done)
    runner.worker.restart()
    runner.history.clear()
    for program in entry.get("history", []):
        runner.run(program)
    found, _ = runner.run(entry["program"])
    if runner.last_generator_errors:  # its own code reached an API this JAX lacks (fuzz.runner.Runner.run)
        return Replay(verdict=NOT_APPLICABLE, why="; ".join(runner.last_generator_errors), **done)
    if any(f.signature == entry["signature"] for f in found):
        return Replay(verdict=REPRODUCES, **done)
    if not found:
        return Replay(verdict=DOES_NOT, why="no finding", **done)
    why = "; ".join(sorted({f.signature[:80] for f in found}))
    others = tuple(sorted({(f.signature, str(f.message)[:300]) for f in found}))
    return Replay(verdict=FAILS_DIFFERENTLY, why=why, seen=others, **done)
