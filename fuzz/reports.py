"""The one rule that merges campaign reports: jobs of ``run --jobs N`` (fuzz/parallel.py) and
machines of a distributed campaign (``shardfuzz status``, fuzz/distributed.py).

A finding is one finding across reports when its signature is the same, or its reduced
program is (:func:`fuzz.program.program_key`); the smaller program is kept.
"""
from __future__ import annotations

import json
from collections import Counter

from fuzz.program import program_key


def merge_generator_errors(reports: list) -> list:
    """The ``generator_errors`` of the jobs' reports (fuzz.campaign.Campaign.report), programs summed
    per message: [{"message", "programs"}], sorted by message."""
    merged: Counter = Counter()
    for rep in reports:
        for e in rep.get("generator_errors") or ():
            merged[e["message"]] += e["programs"]
    return [{"message": m, "programs": n} for m, n in sorted(merged.items())]


def _resolve(signature: str, aliases: dict) -> str:
    seen = set()
    while signature in aliases and signature not in seen:
        seen.add(signature)
        signature = aliases[signature]
    return signature


def _smaller(a: dict, b: dict) -> dict:
    """Of two reports of one finding, the one to keep: a reduced program before one that is not, then the shorter."""
    def size(f):
        return (not f.get("reduced"), len(json.dumps(f.get("program"), sort_keys=True)))

    return b if size(b) < size(a) else a


def _combine(a: dict, b: dict) -> dict:
    keep = dict(_smaller(a, b))
    keep["count"] = a.get("count", 0) + b.get("count", 0)
    keep["first_seconds"] = min(a.get("first_seconds", 0.0), b.get("first_seconds", 0.0))
    return keep


def merge_reports(results: list, seconds: float, corpus_signatures: dict | None = None) -> dict:
    """One report of N jobs, with the keys of :meth:`fuzz.campaign.Campaign.report` plus ``jobs`` and ``job_stats``.

    ``results``: per job (index order, job 0 first), a dict with ``job``, ``seed``,
    ``report`` (a campaign report; a recovered job's holds only ``findings``,
    ``programs`` and ``generated``), ``started`` (wall clock of its campaign's start,
    seconds since the epoch; None if unknown), ``peer_hits`` ({signature: hits of a
    finding another job recorded}), ``aliases`` ({old signature: new} of its records
    that moved), ``error`` and ``recovered``; ``seconds``: the run's wall time.

    Counters, seconds, features and depths are summed; findings merge as a campaign
    merges its own records: the same signature, or the same reduced program
    (:func:`fuzz.program.program_key`), is one finding, which keeps the smaller
    program (a reduced one first), the sum of the counts and the earliest
    ``first_seconds`` (seconds since job 0's start). Peer hits count for the finding
    they name (following ``aliases``) or, if that became a corpus finding, for it; hits
    of a signature that no report holds any more are dropped. ``known`` entries sum by
    signature; ``unconfirmed_crashes`` are every job's (each at most the last 20),
    marked with ``job``.
    """
    reports = [r["report"] for r in results]
    first = next((r for r in results if not r.get("recovered")), results[0])["report"]
    t0 = results[0].get("started") or 0.0
    aliases: dict = {}
    for r in results:
        aliases.update(r.get("aliases") or {})

    merged: dict = {}  # signature -> finding
    for r in results:
        offset = (r["started"] - t0) if r.get("started") and t0 else 0.0
        for f in r["report"].get("findings", []):
            f = {**f, "first_seconds": round(f.get("first_seconds", 0.0) + offset, 1)}
            sig = f["signature"]
            merged[sig] = _combine(merged[sig], f) if sig in merged else f
    # the same reduced program under two signatures (value findings sign what a program uses): one finding
    by_program: dict = {}  # program key -> signature
    for sig in sorted(merged, key=lambda s: merged[s]["first_seconds"]):
        f = merged[sig]
        if not f.get("program"):
            continue
        key = program_key(f["program"])
        if key not in by_program:
            by_program[key] = sig
            continue
        twin = by_program[key]
        both = _combine(merged.pop(twin), merged.pop(sig))
        by_program[key] = both["signature"]
        merged[both["signature"]] = both
        for old in (twin, sig):
            if old != both["signature"]:
                aliases[old] = both["signature"]

    known: dict = {}
    for rep in reports:
        for k in rep.get("known", []):
            if k["signature"] in known:
                known[k["signature"]]["count"] += k["count"]
            else:
                known[k["signature"]] = dict(k)
    corpus = corpus_signatures or {}
    for r in results:
        for sig, n in (r.get("peer_hits") or {}).items():
            sig = _resolve(sig, aliases)
            if sig in merged:
                merged[sig]["count"] += n
            elif sig in known:
                known[sig]["count"] += n
            elif sig in corpus:
                known[sig] = {"signature": sig, "entry": corpus[sig], "count": n}

    def total(key, digits=None):
        if digits is None:
            return sum(rep.get(key) or 0 for rep in reports)
        return round(sum((rep.get(key) or 0.0 for rep in reports), 0.0), digits)

    features: Counter = Counter()
    depths: Counter = Counter()
    for rep in reports:
        features.update(rep.get("features", {}))
        depths.update({int(k): v for k, v in rep.get("depth_histogram", {}).items()})
    unconfirmed = [{**u, "job": r["job"]} for r in results for u in r["report"].get("unconfirmed_crashes", [])]
    findings = sorted(merged.values(), key=lambda f: f.get("first_seconds", 0.0))
    programs = total("programs")
    return {
        "jax_version": first.get("jax_version"), "jaxlib_version": first.get("jaxlib_version"),
        "seed": results[0]["seed"], "determinism": first.get("determinism"),
        "database": first.get("database"), "database_use": first.get("database_use"),
        "findings_file": first.get("findings_file"),
        "findings_file_error": next((rep.get("findings_file_error") for rep in reports
                                     if rep.get("findings_file_error")), None),
        "unconfirmed_crash_count": total("unconfirmed_crash_count"), "unconfirmed_crashes": unconfirmed,
        "seconds": round(seconds, 1), "programs": programs, "generated": total("generated"),
        "rejected": total("rejected"), "generated_rejected": total("generated_rejected"), "invalid": total("invalid"),
        "generator_errors": merge_generator_errors(reports),
        "programs_per_second": round(programs / seconds, 3) if seconds else 0.0,
        "worker_seconds": total("worker_seconds", 1), "reference_seconds": total("reference_seconds", 1),
        "features": dict(sorted(features.items())),
        "depth_histogram": {str(k): v for k, v in sorted(depths.items())},
        "findings": findings,
        "known": sorted(known.values(), key=lambda k: -k["count"]),
        "known_seconds": total("known_seconds", 1),
        "swarm": first.get("swarm"), "avoid_known": first.get("avoid_known"), "shrink": first.get("shrink"),
        "disabled": first.get("disabled", []), "avoided": max((rep.get("avoided", 0) for rep in reports), default=0),
        "reduced": sum(bool(f.get("reduced")) for f in findings),
        "fresh": first.get("fresh", True), "look_past": first.get("look_past"), "look_past_runs": total("look_past_runs"),
        "look_past_clear": total("look_past_clear"), "look_past_seconds": total("look_past_seconds", 1),
        "look_past_vma_runs": total("look_past_vma_runs"), "look_past_vma_clear": total("look_past_vma_clear"),
        "shrunk_to_known": total("shrunk_to_known"),
        "jobs": len(results),
        "job_stats": [{"job": r["job"], "seed": r["seed"], "programs": r["report"].get("programs", 0),
                       "generated": r["report"].get("generated", 0), "seconds": r["report"].get("seconds"),
                       "findings": len(r["report"].get("findings", [])),
                       "peer_hits": sum((r.get("peer_hits") or {}).values()), "error": r.get("error") or None,
                       "recovered_from_findings_file": bool(r.get("recovered"))} for r in results],
    }
