"""Per-release verdicts of a corpus entry (its ``releases`` record) and what they say.

An entry's ``releases.tested`` maps a released JAX (X.Y.Z) to a verdict record::

    {"verdict": "reproduces" | "does not reproduce" | "fails differently" | "not applicable here",
     "checked": "2026-12-07", "jax": "0.12.1", "jaxlib": "0.12.1", "seen": "..."}

- ``reproduces``: the entry's own signature shows;
- ``does not reproduce``: the program runs and no finding shows;
- ``fails differently``: another finding shows instead (``seen``: its signature and message);
- ``not applicable here``: the release cannot express the program (``seen``: why).

Written by ``shardfuzz replay --record`` (fuzz/cli.py) and ``shardfuzz bisect``
(fuzz/bisection.py). Records written before this form hold the verdict string alone
(``"0.9.2": "fails differently"``); :func:`migrate` turns them into ``{"verdict": ...}``
(no date: bisect did not keep one). Everything else in the record (``affected`` ranges,
``first_affected`` ...) is derived from ``tested`` by :func:`conclusions` and written
again with it, so a hand-edited file cannot make them disagree.

Only ``reproduces`` counts as affected: a release where the program fails with another
finding shows another bug (or the same one through another door: triage decides), not
this one, and its stretches are listed apart (``fails_differently``), as are the releases
that cannot run the program (``not_applicable``). Between two tested releases the
verdict is assumed not to change unless they differ (bisect tests the ones between).
"""
from __future__ import annotations

import datetime
import re

from fuzz.util import version_tuple

REPRODUCES, DOES_NOT, NOT_APPLICABLE = "reproduces", "does not reproduce", "not applicable here"
FAILS_DIFFERENTLY = "fails differently"
VERDICTS = (REPRODUCES, FAILS_DIFFERENTLY, DOES_NOT, NOT_APPLICABLE)
VERSION = re.compile(r"\d+\.\d+\.\d+")  # a release as bisect and replay name it (X.Y.Z)
SEEN_LIMIT = 600  # characters of ``seen`` kept (the schema's maxLength)
DERIVED = ("range", "applicable", "changes", "affected", "first_affected", "last_unaffected", "fixed_in",
           "last_affected", "fails_differently", "not_applicable")


def record(verdict: str, seen: str = "", caps: dict | None = None, checked: str | None = None) -> dict:
    """A verdict record for ``releases.tested``: ``verdict`` (one of VERDICTS; ValueError else), the date
    checked (``checked``, ISO; default today), the worker's jax / jaxlib versions from ``caps`` (the
    capabilities fuzz.runner.Runner reports) and ``seen`` (what showed instead, or why not applicable;
    cut to SEEN_LIMIT characters, one line)."""
    if verdict not in VERDICTS:
        raise ValueError(f"{verdict!r} is not a verdict")
    out = {"verdict": verdict, "checked": checked or datetime.date.today().isoformat()}
    for key, cap in (("jax", "jax_version"), ("jaxlib", "jaxlib_version")):
        if caps and isinstance(caps.get(cap), str):
            out[key] = caps[cap][:40]
    text = " ".join(str(seen).split())[:SEEN_LIMIT]
    if text and verdict in (FAILS_DIFFERENTLY, NOT_APPLICABLE):
        out["seen"] = text
    return out


def of_replay(replay, caps: dict | None = None) -> dict:
    """The verdict record of a fuzz.replay.Replay on the worker of ``caps``: ``seen`` holds the other
    findings' signatures and messages (fails differently) or why the release cannot run it."""
    if replay.verdict == FAILS_DIFFERENTLY:
        seen = "; ".join(f"{sig} ({msg})" if msg and msg not in sig else sig for sig, msg in replay.seen)
        return record(replay.verdict, seen or replay.why, caps)
    return record(replay.verdict, replay.why if replay.verdict == NOT_APPLICABLE else "", caps)


def _version(v) -> str:
    if not (isinstance(v, str) and VERSION.fullmatch(v)):
        raise ValueError(f"{str(v)[:20]!r} is not an X.Y.Z release")
    return v


def normalise(tested) -> dict:
    """``tested`` with every value a verdict record (a bare verdict string becomes ``{"verdict": s}``),
    releases oldest first. ValueError for a release that is not X.Y.Z or a value that is not a verdict."""
    if not isinstance(tested, dict):
        raise ValueError("tested is not a mapping of releases to verdicts")
    out = {}
    for v in sorted(tested, key=lambda v: version_tuple(_version(v))):
        x = tested[v]
        rec = {"verdict": x} if isinstance(x, str) else x
        if not (isinstance(rec, dict) and rec.get("verdict") in VERDICTS):
            raise ValueError(f"the verdict of {v} is not one of {', '.join(VERDICTS)}")
        out[v] = dict(rec)
    return out


def verdict(tested: dict, release: str) -> str | None:
    """The verdict recorded for ``release`` in a ``tested`` mapping (either form), None if none."""
    x = tested.get(release) if isinstance(tested, dict) else None
    x = x.get("verdict") if isinstance(x, dict) else x
    return x if x in VERDICTS else None


def _stretches(releases: list, tested: dict, want: str, key: str = "seen") -> list:
    """Consecutive releases of ``releases`` whose verdict is ``want`` and whose ``seen`` is the same:
    [{"from": first, "to": last, key: text}]."""
    out: list = []
    prev = None
    for v in releases:
        rec = tested[v]
        if rec["verdict"] == want:
            text = rec.get("seen", "")
            if prev is not None and out and out[-1][key] == text:
                out[-1]["to"] = v
            else:
                out.append({"from": v, "to": v, key: text})
            prev = v
        else:
            prev = None
    return out


def conclusions(releases: dict) -> dict:
    """The derived part of a ``releases`` record, from its ``tested`` alone (untrusted: a corpus file).

    Returns ``range`` [oldest, newest] tested release; ``applicable`` [oldest, newest] release that
    can run the program (None when none can); ``changes`` [{"last", "first", "from", "to"}]: two
    applicable tested releases next to each other (no applicable one tested between) whose verdicts
    differ (the change lies after "last", at or before "first"; "not applicable" releases are
    skipped); ``affected`` [[first, last], ...]: the stretches of applicable tested releases that
    reproduce the finding, oldest first; ``first_affected`` and ``last_unaffected`` (the applicable
    release tested just before it, None when none): where the first stretch begins; ``fixed_in``
    and ``last_affected``: where the last stretch ends, both None while the newest applicable
    release reproduces (a bug fixed and back is open); ``fails_differently`` [{"from", "to",
    "seen"}] and ``not_applicable`` [{"from", "to", "why"}]: stretches of those verdicts with the
    same message. Raises ValueError for a malformed ``tested`` (see :func:`normalise`).
    """
    tested = normalise(releases.get("tested") if isinstance(releases, dict) else None)
    order = list(tested)
    appl = [v for v in order if tested[v]["verdict"] != NOT_APPLICABLE]
    changes = [{"last": a, "first": b, "from": tested[a]["verdict"], "to": tested[b]["verdict"]}
               for a, b in zip(appl, appl[1:]) if tested[a]["verdict"] != tested[b]["verdict"]]
    ranges: list = []
    for i, v in enumerate(appl):
        if tested[v]["verdict"] != REPRODUCES:
            continue
        if i and tested[appl[i - 1]]["verdict"] == REPRODUCES:
            ranges[-1][1] = v
        else:
            ranges.append([v, v])
    open_ = bool(ranges) and ranges[-1][1] == appl[-1]
    after = {a: b for a, b in zip(appl, appl[1:])}
    before = {b: a for a, b in zip(appl, appl[1:])}
    not_applicable = [{"from": s["from"], "to": s["to"], "why": s["seen"]}
                      for s in _stretches(order, tested, NOT_APPLICABLE)]
    return {"range": [order[0], order[-1]] if order else None,
            "applicable": [appl[0], appl[-1]] if appl else None,
            "changes": changes,
            "affected": ranges,
            "first_affected": ranges[0][0] if ranges else None,
            "last_unaffected": before.get(ranges[0][0]) if ranges else None,
            "fixed_in": None if open_ or not ranges else after.get(ranges[-1][1]),
            "last_affected": None if open_ or not ranges else ranges[-1][1],
            "fails_differently": _stretches(appl, tested, FAILS_DIFFERENTLY),
            "not_applicable": not_applicable}


def migrate(releases: dict) -> dict:
    """A ``releases`` record in the current form: string verdicts become records and the derived
    fields are computed again (:func:`conclusions`); the other fields (``assumption``, ``seconds``)
    are kept. ValueError for a malformed ``tested``."""
    out = {k: v for k, v in releases.items() if k not in DERIVED}
    out["tested"] = normalise(releases.get("tested"))
    return {**out, **conclusions(out)}


def with_verdict(releases: dict | None, release: str, rec: dict) -> dict:
    """``releases`` (None: an entry never checked) with ``rec`` recorded for ``release`` (replacing what
    was there) and the derived fields computed again. ValueError for a malformed release or record."""
    base = migrate(releases) if releases else {"tested": {}}
    tested = {**base["tested"], _version(release): dict(rec)}
    return migrate({**base, "tested": tested})


def affected_text(ranges: list) -> str:
    """``[["0.7.0", "0.7.0"], ["0.9.1", "0.10.2"]]`` -> "0.7.0; 0.9.1 to 0.10.2" ("none" for [])."""
    return "; ".join(a if a == b else f"{a} to {b}" for a, b in ranges) or "none"


def newest_reproducing(releases) -> str | None:
    """The newest release whose recorded verdict is ``reproduces`` (None: none, or a malformed record)."""
    try:
        tested = normalise(releases.get("tested") if isinstance(releases, dict) else None)
    except ValueError:
        return None
    found = [v for v, rec in tested.items() if rec["verdict"] == REPRODUCES]
    return found[-1] if found else None
