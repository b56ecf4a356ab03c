"""Fault injection through the real path: make a program's io_callback host function kill its process.

Used by ``tests/test_faults.py`` and ``benchmarks/faults.py`` to show that a campaign
survives aborts, segfaults and hangs inside JAX, records each, and leaves no process
behind.
"""
from __future__ import annotations

import itertools
import os

FAULTS = {
    "abort": "os.abort()",
    "segfault": "import ctypes; ctypes.string_at(0)",
    "hang": "import time; time.sleep(10 ** 6)",
}
_HOST = "    def host(x):\n"


def inject(source: str, fault: str) -> str:
    """The rendered ``source`` with every io_callback host function starting with ``fault``.

    Raises ValueError if the source has no io_callback host function.
    """
    if _HOST not in source:
        raise ValueError("the program has no io_callback host function to inject a fault into")
    return source.replace(_HOST, f"{_HOST}        import os; {FAULTS[fault]}\n")


def rotating(faults=("abort", "segfault", "hang")):
    """A source hook that injects the given faults in turn, one per program run."""
    cycle = itertools.cycle(faults)
    return lambda source: inject(source, next(cycle))


def worker_processes(parent: int | None = None) -> set:
    """PIDs of running shardfuzz worker processes (from /proc), to check for orphans.

    ``parent``: only those whose parent process is this PID (1: orphans adopted by init).
    """
    pids = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if any(part.endswith(b"fuzz/worker.py") for part in cmd) and (parent is None or ppid == parent):
            pids.add(int(d))
    return pids
