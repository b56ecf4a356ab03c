"""Replay corpus entries: an ``open`` entry must still show its finding, a ``fixed`` one must not.

Used by ``shardfuzz replay`` and by the test suite (``tests/test_corpus.py``), so CI
notices when a known bug disappears (it was fixed: mark the entry ``fixed``) or a fixed
one comes back.
"""
from __future__ import annotations

from dataclasses import dataclass

from fuzz.runner import Runner


@dataclass
class Replay:
    """Outcome of replaying one entry: ``ok`` when its status still holds."""

    path: str
    signature: str
    status: str
    reproduced: bool
    skipped: str = ""  # why it was not replayed (another JAX version)

    @property
    def ok(self) -> bool:
        return bool(self.skipped) or self.reproduced == (self.status == "open")


def replay_entry(entry: dict, runner: Runner, path: str = "") -> Replay:
    """Run one corpus entry's program (after its recorded history, for crashes) and judge it."""
    if entry["jax_version"] != runner.caps.get("jax_version"):
        return Replay(path, entry["signature"], entry["status"], False,
                      skipped=f"recorded on JAX {entry['jax_version']}, running {runner.caps.get('jax_version')}")
    runner.worker.restart()
    runner.history.clear()
    found, _ = runner.run(entry["program"])
    return Replay(path, entry["signature"], entry["status"], any(f.signature == entry["signature"] for f in found))
