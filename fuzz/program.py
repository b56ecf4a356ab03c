"""Loading, validating and saving programs and corpus entries (JSON, with JSON Schemas).

Schemas: ``fuzz/schemas/program.schema.json`` (the program model, version 1) and
``fuzz/schemas/corpus_entry.schema.json``. Files are written atomically.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path

import jsonschema

from fuzz.typecheck import EQN_SIGNATURES, ProgramError, check_program
from fuzz.util import atomic_write_text

SCHEMAS = Path(__file__).with_name("schemas")


# the file to pass where a campaign report is wanted (one place for the words)
REPORT_WORDS = "a report written by 'shardfuzz run' (its summary names it)"


class CorpusError(ValueError):
    """A corpus file that cannot be used: the message says which file, what is wrong and what to do."""


def _eqn_schema() -> dict:
    """The program schema's ``$defs/eqn``, built from :data:`fuzz.typecheck.EQN_SIGNATURES` (the op registry).

    One ``if op == X then {exact fields of X}`` clause per op, so that a malformed
    equation is refused with the field that is wrong (not "matches none of N schemas").
    """
    var_list = {"type": "array", "items": {"$ref": "#/$defs/var"}, "maxItems": 16}
    clauses = []
    for op, (n_args, n_outs, params) in EQN_SIGNATURES.items():
        if n_args is None:
            args = dict(var_list)
        else:
            counts = [n_args] if isinstance(n_args, int) else sorted(n_args)
            args = {**var_list, "minItems": min(counts), "maxItems": max(counts)}
        outs = dict(var_list) if n_outs is None else {**var_list, "minItems": min(n_outs), "maxItems": max(n_outs)}
        clauses.append({"if": {"properties": {"op": {"const": op}}},
                        "then": {"properties": {"op": True, "args": args, "outs": outs, **params},
                                 "required": sorted(params), "additionalProperties": False}})
    return {"type": "object", "required": ["op", "args", "outs"],
            "properties": {"op": {"enum": sorted(EQN_SIGNATURES)}, "args": var_list, "outs": var_list},
            "allOf": clauses}


@lru_cache(maxsize=None)
def schema(name: str) -> dict:
    """A JSON Schema by name: "program" or "corpus_entry".

    Parts that other modules define are filled in here, so that they cannot drift:
    the program schema's equations (fuzz.typecheck.EQN_SIGNATURES) and transforms (the
    transform registry, fuzz/transforms/), and the corpus
    schema's oracle names (oracles.SAVABLE).
    """
    s = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    if name == "program":
        from fuzz.transforms import schema_clauses

        s["$defs"]["eqn"] = _eqn_schema()
        s["$defs"]["transform"] = {"type": "object", "required": ["kind"], "oneOf": schema_clauses()}
    if name == "corpus_entry":
        from oracles import SAVABLE

        s["properties"]["oracle"] = {"enum": list(SAVABLE)}
    return s


@lru_cache(maxsize=None)
def _validator(name: str):
    return jsonschema.Draft202012Validator(schema(name))


def _first_error(instance, name: str):
    """The schema error with the deepest path (the most precise field), or None."""
    try:
        errors = list(_validator(name).iter_errors(instance))
    except RecursionError:
        raise ProgramError("nested too deeply to validate") from None
    if not errors:
        return None
    return max(errors, key=lambda e: (len(e.absolute_path), -len(e.message)))


def _one_line(text: str, limit: int = 200) -> str:
    return " ".join(str(text).split())[:limit]


def validate_program(program, caps: dict | None = None) -> None:
    """Raise ProgramError (one line) unless ``program`` matches the schema and the typing rules
    (of the release of ``caps``, the worker's capabilities; None: the newest release's)."""
    err = _first_error(program, "program")
    if err is not None:
        where = "/".join(map(str, err.absolute_path)) or "top level"
        raise ProgramError(f"program does not match the schema at {where}: {_one_line(err.message)}")
    try:
        check_program(program, caps=caps)
    except RecursionError:
        raise ProgramError("nested too deeply to type-check") from None


def validate_entry(entry, where: str = "entry") -> None:
    """Raise CorpusError (one line, naming ``where``) unless ``entry`` is a valid corpus entry."""
    try:
        err = _first_error(entry, "corpus_entry")
    except ProgramError as e:
        raise CorpusError(f"{where}: {e}; fix or remove the file") from None
    if err is not None:
        field = "/".join(map(str, err.absolute_path)) or "top level"
        raise CorpusError(f"{where}: not a corpus entry (at {field}: {_one_line(err.message, 150)}); "
                          f"fix or remove the file")
    # an ``upstream`` item is printed into ISSUE.md: the schema's pattern again, matched whole, since
    # jsonschema searches it with Python's re, whose '$' lets a trailing newline by
    upstream = re.compile(schema("corpus_entry")["properties"]["upstream"]["items"]["pattern"])
    for url in entry.get("upstream", []):
        if not upstream.fullmatch(url):
            raise CorpusError(f"{where}: not a corpus entry (at upstream: {url[:80]!r} is not a GitHub issue or "
                              f"pull request address); fix or remove the file")
    if "releases" in entry:
        from fuzz.verdicts import conclusions

        try:
            conclusions(entry["releases"])
        except ValueError as e:
            raise CorpusError(f"{where}: not a corpus entry (at releases: {_one_line(e, 120)}); "
                              f"fix or remove the file") from None
    from fuzz.render import release_caps

    caps = release_caps(entry.get("jax_version"))  # typed under the rules of the release it was recorded on
    try:
        validate_program(entry["program"], caps)
        for h in entry.get("history", []):
            validate_program(h, caps)
    except ProgramError as e:
        raise CorpusError(f"{where}: invalid program ({_one_line(e)}); fix or remove the file") from None


def signature_id(signature: str) -> str:
    """A short stable file stem for a finding signature."""
    return hashlib.sha256(signature.encode()).hexdigest()[:12]


def make_entry(finding: dict, program: dict, caps: dict, status: str = "open", triage: str = "") -> dict:
    """A corpus entry record for a finding (the report's finding dict) and its program.

    Optional finding keys carried over: ``call`` (index of the call that shows it),
    ``history`` (programs a crash needs first), ``reduction`` ({reduced, runs}).
    """
    entry = {"format": "shardfuzz-corpus-entry", "version": 1, "signature": finding["signature"],
             "oracle": finding["oracle"], "kind": finding["kind"], "message": str(finding["message"])[:2000],
             "status": status, "jax_version": caps.get("jax_version", "unknown"),
             "jaxlib_version": caps.get("jaxlib_version", "unknown"),
             "found": datetime.date.today().isoformat(), "program": program}
    for key in ("call", "reduction"):
        if finding.get(key) is not None:
            entry[key] = finding[key]
    if finding.get("history_programs"):
        entry["history"] = finding["history_programs"]
    if triage:
        entry["triage"] = triage
    return entry


def entries_from_report(report, indexes, triage: str, where: str) -> list:
    """Validated corpus entries for findings ``indexes`` (1-based; empty: all) of a report.

    Raises CorpusError (one line) for the first finding that cannot be kept: an index
    out of range, a finding about shardfuzz itself (generator / reference), or an
    entry that is not valid; nothing is returned then, so nothing is written.
    """
    from oracles import OWN

    findings = report.get("findings") if isinstance(report, dict) else None
    if not isinstance(findings, list):
        raise CorpusError(f"{where}: no findings list; pass {REPORT_WORDS}")
    chosen = list(indexes) or list(range(1, len(findings) + 1))
    entries = []
    for i in chosen:
        if not 1 <= i <= len(findings):
            raise CorpusError(f"{where}: the report has {len(findings)} findings; --finding {i} is out of range")
        f = findings[i - 1]
        if not isinstance(f, dict) or not isinstance(f.get("program"), dict):
            raise CorpusError(f"{where}: finding {i} has no program; pass {REPORT_WORDS}")
        if f.get("oracle") in OWN:
            raise CorpusError(f"{where}: finding {i} is a bug of shardfuzz's own {f['oracle']}, not of JAX: "
                              f"fix shardfuzz instead of saving it")
        try:
            entry = make_entry(f, f["program"], report, triage=triage)
        except (KeyError, TypeError) as e:
            raise CorpusError(f"{where}: finding {i} lacks {e}; pass {REPORT_WORDS}") from None
        validate_entry(entry, f"{where}: finding {i}")
        entries.append(entry)
    return entries


def save_entries(directory: str | Path, entries: list, triage: str = "") -> list:
    """Write validated entries; returns [(path, "saved" | "exists" | "triage added")].

    An existing entry is never overwritten; ``triage`` is added to one that has none,
    and CorpusError (nothing written) is raised when it already holds another triage.
    """
    plan = []
    for entry in entries:
        path = entry_path(directory, entry)
        if not path.exists():
            plan.append((path, entry, "saved"))
            continue
        old = load_entry(path)
        if triage and old.get("triage") not in (None, "", triage):
            raise CorpusError(f"{path} already has a triage text; edit the file to change it")
        if triage and old.get("triage") != triage:
            plan.append((path, {**old, "triage": triage}, "triage added"))
        else:
            plan.append((path, None, "exists"))
    for path, entry, _ in plan:
        if entry is not None:
            write_entry(path, entry)
    return [(path, what) for path, _, what in plan]


def entry_path(directory: str | Path, entry: dict) -> Path:
    """Where a corpus entry lives: ``<directory>/<oracle>-<signature id>.json``."""
    return Path(directory) / f"{entry['oracle']}-{signature_id(entry['signature'])}.json"


def write_entry(path: str | Path, entry: dict) -> Path:
    """Validate ``entry`` (CorpusError if invalid: nothing is written) and write it atomically to ``path``."""
    validate_entry(entry, str(path))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(str(path), json.dumps(entry, indent=1, sort_keys=True) + "\n")
    return Path(path)


def save_entry(directory: str | Path, entry: dict) -> Path:
    """Validate and write a new corpus entry as :func:`entry_path` atomically; returns the path.

    Raises CorpusError for an invalid entry (nothing written). An existing file for
    the same signature is left alone (nothing a user wrote is lost).
    """
    path = entry_path(directory, entry)
    validate_entry(entry, str(path))
    if not path.exists():
        write_entry(path, entry)
    return path


def load_entry(path: str | Path) -> dict:
    """A validated corpus entry; CorpusError (one line) for unreadable, non-JSON or invalid files.

    Its ``releases`` record comes in the current form (fuzz.verdicts.migrate: verdict records,
    derived fields computed again from ``tested``)."""
    path = Path(path)
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CorpusError(f"{path}: cannot read ({e.strerror}); check the file's permissions") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorpusError(f"{path}: not valid JSON ({_one_line(e, 120)}); fix or remove the file") from None
    except RecursionError:
        raise CorpusError(f"{path}: JSON nested too deeply; fix or remove the file") from None
    validate_entry(entry, str(path))
    if "releases" in entry:  # bare verdict strings (the form before verdict records) become records
        from fuzz.verdicts import migrate

        entry["releases"] = migrate(entry["releases"])
    return entry


def load_corpus(directory: str | Path) -> list:
    """All entries of a corpus directory, sorted by file name (missing directory: empty list).

    Raises CorpusError (one line) for the first file that is not a valid entry.
    """
    return [entry for _, entry in corpus_files(directory)]


def known_signatures(pairs: list) -> dict:
    """{signature: entry file name} of corpus entries ``[(path, entry)]``: each entry's signature and its ``faces``."""
    out = {}
    for path, entry in pairs:
        for sig in [entry["signature"], *entry.get("faces", [])]:
            out.setdefault(sig, Path(path).name)
    return out


def known_ops(pairs: list) -> dict:
    """{signature: sorted op names of the entry's reduced program} of corpus entries ``[(path, entry)]``,
    each entry's signature and its ``faces`` (what a campaign looks past: ``fuzz.campaign.Campaign``'s
    ``known_ops``). Raises nothing for entries :func:`load_entry` accepted."""
    from fuzz.features import op_names

    out: dict = {}
    for _, entry in pairs:
        for sig in [entry["signature"], *entry.get("faces", [])]:
            out.setdefault(sig, sorted(op_names(entry["program"])))
    return out


def add_faces(entry: dict, signatures: list, triage: str = "") -> dict:
    """``entry`` with ``signatures`` (other than its own) added to its ``faces`` and ``triage`` appended to its triage.

    Raises CorpusError when that makes more faces than the schema's ``maxItems`` (an entry's size is
    bounded: corpus files may come from strangers)."""
    faces = list(entry.get("faces", []))
    faces += [s for s in signatures if s != entry["signature"] and s not in faces]
    most = schema("corpus_entry")["properties"]["faces"]["maxItems"]
    if len(faces) > most:
        raise CorpusError(f"{len(faces)} faces for the entry of {entry['signature'][:60]!r}, more than the {most} an "
                          f"entry holds; nothing written: keep the triage in docs/unsaved-findings.md instead")
    new = {**entry, "faces": faces} if faces else dict(entry)
    old = entry.get("triage", "")
    if triage and triage not in old:
        new["triage"] = (old + "\n" if old else "") + triage
    return new


def corpus_files(directory: str | Path) -> list:
    """[(path, entry)] of a corpus directory, sorted by file name; CorpusError for a bad file."""
    d = Path(directory)
    if not d.is_dir():
        return []
    return [(p, load_entry(p)) for p in sorted(d.glob("*.json"))]


def program_key(program: dict) -> str:
    """A stable hash of a program (16 hex digits; for caching, file names and merging findings)."""
    return hashlib.sha256(json.dumps(program, sort_keys=True).encode()).hexdigest()[:16]
