"""The findings file: each distinct finding appended as one JSON line the moment it is recorded.

A campaign writes its findings into the report only at its end; this file is what is
left when the campaign is killed (SIGKILL, out of memory, a reboot). By default it is
``findings.jsonl`` beside the example database (``.shardfuzz/findings.jsonl``).

Each line is one complete JSON object with the keys of a report finding
(:meth:`fuzz.campaign.Campaign.finding_entry`) plus the campaign's ``campaign_started``
(UTC, ISO 8601), ``seed``, ``jax_version`` and ``jaxlib_version``. A finding is appended
again when it changes (shrunk); :func:`read` keeps the last line per signature. When a
finding moves to another signature (reduced to a program whose finding reads
differently, or merged into another), :func:`supersede` appends a line
``{"signature": old, "superseded_by": new}`` and :func:`read` leaves the old one out.

Writing is atomic per record: the whole line goes out in one ``os.write`` on a file
opened with ``O_APPEND``, followed by ``fsync``, under an exclusive ``fcntl.flock`` of
the file, so that the jobs of ``shardfuzz run --jobs N`` (processes appending to one
file) never interleave their lines. A line cut short (disk full, power loss during the
write) can only be the last one, and :func:`read` skips it; the next :func:`append`
starts a new line after it.

With ``--jobs N`` every record also carries ``run`` (an id of the ``shardfuzz run``) and
``job`` (0 … N-1): the jobs read each other's findings with :func:`read_since` so that a
finding one job has recorded is not reduced again by another.
"""
from __future__ import annotations

import fcntl
import json
import os


def append(path: str, record: dict) -> None:
    """Append ``record`` (JSON-serializable; non-JSON values are written with ``str``) as one line.

    Creates the file (mode 0644) but not its directory. Holds an exclusive
    ``fcntl.flock`` on the file while it checks the last byte and writes, so that
    processes appending at once do not interleave or glue lines. Raises OSError when it
    cannot be written completely (e.g. ENOSPC); what was written before stays readable.
    """
    line = (json.dumps(record, default=str, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # (released when fd is closed)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # an earlier write was cut short: do not glue this record onto it
        written = os.write(fd, line)
        if written != len(line):
            raise OSError(f"wrote {written} of {len(line)} bytes of a finding to {path}")
        os.fsync(fd)
    finally:
        os.close(fd)


def supersede(path: str, old: str, new: str, **extra) -> None:
    """Record that finding ``old`` is now known as ``new`` (see the module docstring). Raises OSError.

    ``extra``: more keys of the line (``run`` and ``job`` with ``--jobs N``).
    """
    append(path, {"signature": old, "superseded_by": new, **extra})


def read_lines(path: str) -> list:
    """Every complete record of the file in order (list of dict); lines that do not parse are skipped.

    Raises OSError when the file cannot be read (FileNotFoundError if it does not exist).
    """
    with open(path, "rb") as f:
        data = f.read()
    records = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:  # a record cut short by a crash or a full disk
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


def read_since(path: str, offset: int = 0) -> tuple:
    """The complete records appended after byte ``offset``: (list of dict, the offset to pass next time).

    Only whole lines (ending in a newline) are read: a line being written by another
    process is left for the next call. Lines that do not parse are skipped. Raises
    OSError when the file cannot be read.
    """
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    records = []
    for line in data[:end].split(b"\n"):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records, offset + end


def read(path: str) -> list:
    """The findings of the file: the last record per ``signature``, in order of first appearance,
    leaving out superseded ones. Raises OSError when the file cannot be read.
    """
    latest: dict = {}
    for rec in read_lines(path):
        latest[rec.get("signature")] = rec  # (dicts keep the first insertion's position)
    return [rec for rec in latest.values() if "superseded_by" not in rec]
