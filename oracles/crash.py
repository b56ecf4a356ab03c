"""Crash and hang oracle: the worker process died or exceeded its time limit.

The kind is the signal (SIGABRT, SIGSEGV, ...) or exit code; the message is the first
``Check failed`` / ``F0000`` (absl fatal log) / ``Fatal Python error`` line of stderr,
so that the signature survives addresses, line numbers and device ids.
"""
from __future__ import annotations

import re

from oracles.common import Finding

NAMES = ("crash", "hang")  # the oracle names of the findings this module makes

_FATAL = [re.compile(p) for p in (r"Check failed.*", r"^F\d{4} .*", r"Fatal Python error.*", r"Segmentation fault.*",
                                  r"terminate called.*")]


def fatal_line(stderr: str) -> str:
    """The most telling fatal line of a stderr text, without its file:line prefix; '' if none."""
    for pat in _FATAL:
        for line in stderr.splitlines():
            m = pat.search(line.strip())
            if m:
                text = m.group(0)
                return re.sub(r"^F\d{4} [\d:.]+\s+\d+\s+[\w./-]+:\d+\]\s*", "", text)
    return ""


def judge(program: dict, outcome: dict) -> list:
    """One finding: ``crash`` with the signal and fatal line, or ``hang`` with the time limit."""
    if outcome["status"] == "hang":
        return [Finding("hang", "timeout", f"no answer within {outcome['timeout']:.0f} s", None,
                        outcome.get("stderr", "")[-3000:], signature="hang: timeout")]
    line = fatal_line(outcome.get("stderr", ""))
    return [Finding("crash", outcome["signal"], line or f"worker died ({outcome['signal']})", None,
                    outcome.get("stderr", "")[-3000:])]
