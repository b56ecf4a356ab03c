"""Crash and hang oracle: the worker process died, or exceeded its time or memory limit.

The kind is the signal (SIGABRT, SIGSEGV, ...) or exit code; the message is the first
``Check failed`` / ``F0000`` (absl fatal log) / ``Fatal Python error`` line of stderr,
so that the signature survives addresses, line numbers and device ids. A hang's message
and signature name where it hangs: the innermost JAX frame of the thread that runs the
program, from the stacks the worker dumps before it is killed (fuzz.execute.Worker.dump_stacks);
without them every hang had one signature, so a known hang made every other one known.
A worker killed past its resident memory limit (fuzz.execute, ``"memory"``) is a crash
of kind ``memory``, named where it grew as a hang is: a program of a few small arrays
that takes gigabytes is what the OOM killer would end, and on a machine it shares it
may end something else first.
"""
from __future__ import annotations

import re

from oracles.common import Finding
from oracles.internal_error import jax_site

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


_STACK_FRAME = re.compile(r'File "([^"]*)", line \d+ in (\S+)')  # faulthandler's frame line
_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-f]+ .*most recent call first", re.M)


def hung_thread(stacks: str) -> str:
    """The stack (faulthandler's text, innermost frame first) of the thread that runs the
    program (the one in fuzz/worker.py's ``run_program``), or '' if there is none."""
    starts = [m.start() for m in _THREAD.finditer(stacks)] + [len(stacks)]
    blocks = [stacks[a:b] for a, b in zip(starts, starts[1:])]
    return next((b for b in blocks if " in run_program" in b), "")


def hang_site(stacks: str) -> str:
    """``jax._src.module:function`` of the innermost JAX frame of the hung thread ('' if none)."""
    return jax_site(reversed(_STACK_FRAME.findall(hung_thread(stacks))))  # (faulthandler: innermost first)


def judge(program: dict, outcome: dict) -> list:
    """One finding: ``crash`` with the signal and fatal line, ``hang`` with the time limit
    and where it hangs (signature ``hang: timeout: in jax._src.module:function``, or ``hang:
    timeout`` when the worker gave no stack), or ``crash`` of kind ``memory`` with the limit
    and where the worker was when it passed it (``crash: memory: in jax._src.module:function``)."""
    if outcome["status"] in ("memory", "hang"):  # killed by the parent: named where it was (its stacks)
        stacks = outcome.get("stacks", "")
        site = hang_site(stacks)
        if outcome["status"] == "memory":
            oracle, kind, what = "crash", "memory", f"resident memory passed {outcome['limit'] / (1 << 30):.1f} GiB"
            thread = "the running thread's stack"
        else:
            oracle, kind, what = "hang", "timeout", f"no answer within {outcome['timeout']:.0f} s"
            thread = "the hung thread's stack"
        details = outcome.get("stderr", "")[-3000:]
        if site:
            details += f"\n{thread}, innermost frame first:\n" + hung_thread(stacks)[:6000]
        return [Finding(oracle, kind, what + (f" in {site}" if site else ""), None, details,
                        signature=f"{oracle}: {kind}: in {site}" if site else f"{oracle}: {kind}")]
    line = fatal_line(outcome.get("stderr", ""))
    return [Finding("crash", outcome["signal"], line or f"worker died ({outcome['signal']})", None,
                    outcome.get("stderr", "")[-3000:])]
