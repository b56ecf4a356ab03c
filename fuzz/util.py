"""Small shared helpers: atomic file writes, the supported-version check, local paths hidden."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import uuid

# hypothesis-jsonschema 0.23.1 breaks from Hypothesis 6.170.10 on ("'many' object has
# no attribute 'more'"); shardfuzz is tested with 6.170.9 (see pyproject.toml).
HYPOTHESIS_RANGE = ((6, 100, 0), (6, 170, 9))


class EnvironmentProblem(SystemExit):
    """A one-line, exit-code-2 complaint about the installed environment."""

    def __init__(self, msg: str):
        import sys

        print(f"shardfuzz: {msg}", file=sys.stderr)
        super().__init__(2)


class UsageError(Exception):
    """Bad input a user can mend: its message is one line saying what is wrong and what to do.

    Raised below the command line (a command defined in fuzz/maintain.py or
    fuzz/distributed.py, say); ``shardfuzz`` prints it as ``shardfuzz: MESSAGE`` and exits 2
    (fuzz/cli.py).
    """


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, until :meth:`wrap_up`.

    After that (the report is being written, the workers killed) they are ignored, so
    that a second signal cannot cut the wrap-up short; ``name`` is the first signal's.
    ``forward()``, if set, is called on every such signal, also during the wrap-up
    (``--jobs N``: it asks the other jobs to stop, :meth:`fuzz.parallel.Jobs.stop`).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.name = None
        self.wrapping_up = False
        self.forward = None
        for s in self.SIGNALS:
            signal.signal(s, self._handle)

    def _handle(self, signum, frame) -> None:
        self.name = self.name or signal.Signals(signum).name
        if self.forward is not None:
            self.forward()
        if not self.wrapping_up and not INTERRUPTS.defer(signal.Signals(signum).name):
            raise KeyboardInterrupt(signal.Signals(signum).name)

    def wrap_up(self) -> None:
        self.wrapping_up = True
        INTERRUPTS.pending = None  # (handled: ``name`` keeps it for the report)


def atomic_write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: readers never see half a file.

    Raises OSError when the directory is not writable.
    """
    d = os.path.dirname(os.path.abspath(path))
    # os.open with mode 0o666 so that the umask decides (as for any file the user writes);
    # tempfile.mkstemp would make every report and corpus entry private (0600).
    tmp = os.path.join(d, f".tmp-{uuid.uuid4().hex[:12]}-{os.path.basename(path)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# (at most 32 directories before site-packages: unbounded, a hostile message of many
# "-/a" made the search quadratic, 9 s for 60 KB)
_SITE_PACKAGES = re.compile(r"(?<![\w.:/])/(?:[^\s'\":/]+/){0,32}site-packages/")


def hide_install_path(text: str) -> str:
    """``text`` with each absolute path up to a ``site-packages/`` shortened to ``.../site-packages/``.

    JAX's messages name its own files by absolute path ("function <lambda> at
    /home/me/.venv/lib/python3.11/site-packages/jax/_src/lax/control_flow/loops.py:2735"): where
    the finder installed JAX is no part of a repro or an issue text, and may be private.
    """
    return _SITE_PACKAGES.sub(".../site-packages/", str(text))


def version_tuple(v: str) -> tuple:
    out = []
    for part in v.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out + [0] * (3 - len(out)))


def check_environment() -> None:
    """Raise EnvironmentProblem (exit 2, one line) when Hypothesis is outside the supported range."""
    import hypothesis

    v = version_tuple(hypothesis.__version__)
    lo, hi = HYPOTHESIS_RANGE
    if not (lo <= v <= hi):
        raise EnvironmentProblem(
            f"Hypothesis {hypothesis.__version__} is not supported (need {'.'.join(map(str, lo))} to "
            f"{'.'.join(map(str, hi))}); run: pip install 'hypothesis=={'.'.join(map(str, hi))}'")


OLDEST_JAX = (0, 4, 26)
N_DEVICES = 8


def unsupported(caps: dict) -> str:
    """'' when a worker's JAX can be fuzzed, else a one-line reason with what to do."""
    v = caps.get("jax_version", "0")
    if version_tuple(v) < OLDEST_JAX:
        return (f"JAX {v} is older than the oldest supported release {'.'.join(map(str, OLDEST_JAX))}; "
                f"use --jax-version with a newer release")
    if caps.get("n_devices", 0) < N_DEVICES:
        return (f"the worker's JAX sees {caps.get('n_devices')} devices, not {N_DEVICES}: it ignored "
                f"--xla_force_host_platform_device_count; use a CPU build of jaxlib")
    return ""


class _Interrupts:
    """Where a stop signal (Ctrl-C, SIGTERM, SIGHUP) may interrupt the fuzzer's own process.

    A campaign runs under :meth:`deferred`: a signal then only marks the stop as pending,
    and the KeyboardInterrupt is raised at a safe point: inside :meth:`allowed` sections
    (waiting for a worker's answer, so that a stop is immediate even while a program
    hangs) or at :meth:`check` (before each program). Raising it anywhere else left some
    campaigns to hang or crash (SIGSEGV) on their way out without a report (measured:
    3 of 28 SIGTERMs with benchmarks/kills.py): JAX runs in this process too (the
    reference's eager ``jax.grad``), and so do Hypothesis's engine and rich's threads.
    """

    def __init__(self):
        self.depth = 0  # deferred() sections entered
        self.open = 0  # allowed() sections entered inside them
        self.pending = None

    def defer(self, name: str) -> bool:
        """For a signal handler: True (do not raise) when the stop must wait for a safe point."""
        if self.depth and not self.open:
            self.pending = self.pending or name
            return True
        return False

    def check(self) -> None:
        """Raise the pending stop, if any (a safe point)."""
        if self.pending:
            name, self.pending = self.pending, None
            raise KeyboardInterrupt(name)

    @contextlib.contextmanager
    def deferred(self):
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
        if not self.depth:
            self.check()

    @contextlib.contextmanager
    def allowed(self):
        self.open += 1
        try:
            self.check()
            yield
        finally:
            self.open -= 1


INTERRUPTS = _Interrupts()
