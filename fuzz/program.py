"""Loading, validating and saving programs and corpus entries (JSON, with JSON Schemas).

Schemas: ``fuzz/schemas/program.schema.json`` (the program model, version 1) and
``fuzz/schemas/corpus_entry.schema.json``. Files are written atomically.
"""
from __future__ import annotations

import datetime
import hashlib
import json
from functools import lru_cache
from pathlib import Path

import jsonschema

from fuzz.typecheck import ProgramError, check_program
from fuzz.util import atomic_write_text

SCHEMAS = Path(__file__).with_name("schemas")


class CorpusError(ValueError):
    """A corpus file that cannot be used: the message says which file, what is wrong and what to do."""


@lru_cache(maxsize=None)
def schema(name: str) -> dict:
    """A JSON Schema by name: "program" or "corpus_entry"."""
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def _first_error(instance, name: str):
    validator = jsonschema.Draft202012Validator(schema(name))
    return next(iter(sorted(validator.iter_errors(instance), key=lambda e: list(e.path))), None)


def validate_program(program) -> None:
    """Raise ProgramError (one line) unless ``program`` matches the schema and the typing rules."""
    err = _first_error(program, "program")
    if err is not None:
        where = "/".join(map(str, err.absolute_path)) or "top level"
        raise ProgramError(f"program does not match the schema at {where}: {err.message[:200]}")
    check_program(program)


def signature_id(signature: str) -> str:
    """A short stable file stem for a finding signature."""
    return hashlib.sha256(signature.encode()).hexdigest()[:12]


def make_entry(finding: dict, program: dict, caps: dict, status: str = "open", triage: str = "") -> dict:
    """A corpus entry record for a finding (the report's finding dict) and its program."""
    entry = {"format": "shardfuzz-corpus-entry", "version": 1, "signature": finding["signature"],
             "oracle": finding["oracle"], "kind": finding["kind"], "message": finding["message"][:2000],
             "status": status, "jax_version": caps.get("jax_version", "unknown"),
             "jaxlib_version": caps.get("jaxlib_version", "unknown"),
             "found": datetime.date.today().isoformat(), "program": program}
    if triage:
        entry["triage"] = triage
    return entry


def save_entry(directory: str | Path, entry: dict) -> Path:
    """Write a corpus entry as ``<directory>/<oracle>-<id>.json`` atomically; returns the path.

    An existing file for the same signature is left alone (nothing a user wrote is lost).
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{entry['oracle']}-{signature_id(entry['signature'])}.json"
    if not path.exists():
        atomic_write_text(str(path), json.dumps(entry, indent=1, sort_keys=True) + "\n")
    return path


def load_entry(path: str | Path) -> dict:
    """A validated corpus entry; CorpusError (one line) for unreadable, non-JSON or invalid files."""
    path = Path(path)
    try:
        entry = json.loads(path.read_text())
    except OSError as e:
        raise CorpusError(f"{path}: cannot read ({e.strerror}); check the file's permissions") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorpusError(f"{path}: not valid JSON ({e}); fix or remove the file") from None
    err = _first_error(entry, "corpus_entry")
    if err is not None:
        where = "/".join(map(str, err.absolute_path)) or "top level"
        raise CorpusError(f"{path}: not a corpus entry (at {where}: {err.message[:150]}); fix or remove the file")
    try:
        validate_program(entry["program"])
    except ProgramError as e:
        raise CorpusError(f"{path}: invalid program ({e}); fix or remove the file") from None
    return entry


def load_corpus(directory: str | Path) -> list:
    """All entries of a corpus directory, sorted by file name (missing directory: empty list)."""
    d = Path(directory)
    if not d.is_dir():
        return []
    return [load_entry(p) for p in sorted(d.glob("*.json"))]
