"""Fault injection through the real path: make a rendered program kill or hang its worker.

Used by ``tests/test_faults.py``, ``tests/test_lifetime.py``, ``benchmarks/faults.py``
and ``benchmarks/kills.py`` to show that a campaign survives aborts, segfaults, hangs and runaway memory
inside JAX, records each that reproduces (and only those), and leaves no process behind.

A fault goes either into every io_callback host function (:func:`inject`: it fires
inside JAX's execution) or at the end of the module (:func:`inject_module`: it fires
when the worker execs the source, for any program). Hooks (``source -> source``) for
``Campaign(source_hook=...)``: :func:`rotating`, :func:`once`, :func:`abort_some`, :func:`raise_some`,
:func:`lowering_only`, :func:`raising`; :func:`hook_from_spec` builds one from the test-only
``SHARDFUZZ_TEST_FAULT`` environment variable that ``shardfuzz run`` reads.
"""
from __future__ import annotations

import hashlib
import itertools
import os

FAULTS = {
    "abort": "os.abort()",
    "segfault": "import ctypes; ctypes.string_at(0)",
    "hang": "import time; time.sleep(10 ** 6)",
    # 64 MiB more resident memory every 0.05 s up to 4 GiB, then a hang: past a worker's
    # memory limit (fuzz.execute) long before the end, and never the machine's memory
    "memory": "import time; _held = [(b'm' * (1 << 26), time.sleep(0.05)) for _ in range(64)]; time.sleep(10 ** 6)",
}
_HOST = "    def host(x):\n"


# distinct words for distinct injected abort messages (letters survive oracles.common.normalize)
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


def _guarded(code: str, once: str | None) -> str:
    """``code`` as one line, run only if the marker file ``once`` does not exist yet (it is created first)."""
    if once is None:
        return code
    return f"if not os.path.exists({once!r}): open({once!r}, 'w').close(); {code}"


def inject(source: str, fault: str, once: str | None = None) -> str:
    """The rendered ``source`` with every io_callback host function starting with ``fault``.

    ``fault``: a key of FAULTS; ``once``: path of a marker file: the fault fires only in
    the first process that finds it missing (it is created just before), so that the
    crash does *not* reproduce in a fresh worker. Raises ValueError if the source has no
    io_callback host function.
    """
    if _HOST not in source:
        raise ValueError("the program has no io_callback host function to inject a fault into")
    return source.replace(_HOST, f"{_HOST}        import os\n        {_guarded(FAULTS[fault], once)}\n")


def inject_module(source: str, fault: str, once: str | None = None, message: str = "",
                  only_lowering_worker: bool = False) -> str:
    """``source`` with ``fault`` run at the end of the module, i.e. when a worker execs it.

    ``message``: a line written to stderr first (the crash oracle takes a ``Check
    failed ...`` line as the finding's message); ``once``: as in :func:`inject`;
    ``only_lowering_worker``: fire only in the determinism oracle's lowering worker
    (the one whose PYTHONHASHSEED is not 0, see fuzz.runner.Runner).
    """
    code = FAULTS[fault]
    if message:
        code = f"import sys; sys.stderr.write({message + chr(10)!r}); sys.stderr.flush(); {code}"
    line = _guarded(code, once)
    if only_lowering_worker:
        line = f"if os.environ.get('PYTHONHASHSEED') != '0':\n    {line}"
    return f"{source}\nimport os\n{line}\n"


def rotating(faults=("abort", "segfault", "hang")):
    """A source hook that injects the given faults in turn, one per program run."""
    cycle = itertools.cycle(faults)
    return lambda source: inject(source, next(cycle))


def once(fault: str, marker: str):
    """A source hook whose io_callback fault fires in one process only (marker file ``marker``).

    The first run crashes; the crash confirmation in a fresh worker does not: an
    *unconfirmed* crash, which must not become a finding.
    """
    return lambda source: inject(source, fault, once=marker)


def abort_some(share: float = 1.0, words: int = len(WORDS)):
    """A source hook that makes a share of programs abort with one of ``words`` distinct messages.

    Which programs, and which message, depend only on the source text (sha256), so
    the crash reproduces in a fresh worker and each message is one distinct finding:
    ``crash: SIGABRT: Check failed: injected fault <word>``. ``share``: in [0, 1].
    """
    def hook(source: str) -> str:
        h = int(hashlib.sha256(source.encode()).hexdigest(), 16)
        if (h % 10000) >= share * 10000:
            return source
        word = WORDS[(h // 10000) % words]
        return inject_module(source, "abort", message=f"Check failed: injected fault {word}")

    return hook


def raising():
    """A source hook that makes every call of every program raise ``RuntimeError('injected fault')``.

    No crash, no compile: a quick internal-error finding for every program (the module
    rebinds ``CALLS`` at its end).
    """
    code = ("def _shardfuzz_injected(*args):\n"
            "    raise RuntimeError('injected fault')\n"
            "CALLS = [(label, _shardfuzz_injected, args) for label, fn, args in CALLS]\n")
    return lambda source: f"{source}\n{code}"


def raise_some(share: float = 1.0, words: int = len(WORDS)):
    """A source hook that makes every call of a share of programs raise ``RuntimeError('injected fault WORD')``.

    Which programs, and which of ``words`` messages, depend only on the program's mesh
    line (sha256), which reducing a program keeps: an internal-error finding per word, no
    crash (no fresh worker), whose reduction converges in a few runs. ``share``: in [0, 1].
    """
    def hook(source: str) -> str:
        mesh = next((ln for ln in source.splitlines() if ln.startswith("mesh = ")), source)
        h = int(hashlib.sha256(mesh.encode()).hexdigest(), 16)
        if (h % 10000) >= share * 10000:
            return source
        word = WORDS[(h // 10000) % words]
        return (f"{source}\ndef _shardfuzz_injected(*args):\n    raise RuntimeError('injected fault {word}')\n"
                f"CALLS = [(label, _shardfuzz_injected, args) for label, fn, args in CALLS]\n")

    return hook


def lowering_only(fault: str, once: str | None = None):
    """A source hook whose fault fires only in the lowering worker (see :func:`inject_module`)."""
    return lambda source: inject_module(source, fault, once=once, only_lowering_worker=True)


def hook_from_spec(spec: str):
    """The source hook named by ``SHARDFUZZ_TEST_FAULT`` (test-only; never set it for a real campaign).

    ``abort`` or ``abort:SHARE`` (:func:`abort_some`, SHARE in [0, 1], default 1);
    ``raise`` or ``raise:SHARE`` (:func:`raise_some`); ``hang`` (every program hangs at
    module level). Raises ValueError for anything else.
    """
    kind, _, arg = spec.partition(":")
    if kind in ("abort", "raise"):
        try:
            share = float(arg) if arg else 1.0
        except ValueError:
            share = -1.0
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"SHARDFUZZ_TEST_FAULT={spec}: the share after '{kind}:' must be in [0, 1]")
        return abort_some(share) if kind == "abort" else raise_some(share)
    if kind == "hang" and not arg:
        return lambda source: inject_module(source, "hang")
    raise ValueError(f"SHARDFUZZ_TEST_FAULT={spec} is not 'abort', 'abort:SHARE', 'raise', 'raise:SHARE' or 'hang' "
                     f"(a test-only setting)")


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
