"""Parent side of the worker protocol: start, feed, time out, kill and restart workers.

A worker is ``python fuzz/worker.py`` in its own process group (so a kill reaches any
child it made), with ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` set before
JAX is imported there. Its stderr goes to a temporary file, so that a crash's last
lines can be reported without a pipe that could fill up and block it.

A worker dies with the process that started it, however that one ends (SIGKILL, the
OOM killer): told this process's pid (``SHARDFUZZ_PARENT_PID``), the worker asks the
kernel for SIGKILL on its parent's death (Linux ``PR_SET_PDEATHSIG``, see prctl(2)) and
runs a watchdog thread that exits when its parent pid changes (see fuzz/worker.py).
PR_SET_PDEATHSIG fires when the *thread* that started the worker ends, not the
process: start workers from the main thread (every caller in shardfuzz does), or from
a thread that lives as long as they should.

(The prctl call is made by the worker, not in a ``preexec_fn`` here: a ``preexec_fn``
runs Python between fork and exec in a process where JAX's threads run, which JAX
warns may deadlock.)

A worker's resident memory is watched while it runs a program (every
``MEMORY_POLL`` seconds, from ``/proc/PID/status``): past its limit (default a third of
the machine's memory, at least 2 GiB; ``SHARDFUZZ_WORKER_MEMORY`` in GiB sets it) the
worker is killed as a hung one is, and the outcome is ``"memory"``. A cap, not
RLIMIT_AS: XLA reserves far more address space than it touches (a worker of 0.5 GiB
resident maps tens of GiB), so an address-space limit breaks programs that fit.
"""
from __future__ import annotations

import base64
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from fuzz.util import INTERRUPTS

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
STARTUP_TIMEOUT = 120.0  # seconds: importing JAX on a loaded 2-core machine
STACK_SIGNAL = signal.SIGUSR1  # fuzz/worker.py dumps its threads' stacks on it (worker.STACK_SIGNAL)
STACK_WAIT = 3.0  # seconds a hung worker gets to write its stacks before it is killed
PARENT_ENV = "SHARDFUZZ_PARENT_PID"  # read by fuzz/worker.py (guard_parent)
GUARD_ENV = "SHARDFUZZ_PARENT_GUARD"  # "both" (default), "signal" or "watchdog": tests check each alone
MEMORY_ENV = "SHARDFUZZ_WORKER_MEMORY"  # a worker's resident memory limit in GiB (see default_memory_limit)
MEMORY_POLL = 0.2  # seconds between two reads of a running worker's resident memory


class WorkerError(RuntimeError):
    """The worker could not be started (bad interpreter, JAX missing): a one-line reason."""


def decode(a: dict) -> np.ndarray:
    """An array from the worker's ``{"dtype", "shape", "b64"}`` encoding."""
    return np.frombuffer(base64.b64decode(a["b64"]), dtype=np.dtype(a["dtype"])).reshape(a["shape"])


def signal_name(returncode: int | None) -> str:
    """'SIGABRT' for -6, 'exit 3' for 3, 'running' for None."""
    if returncode is None:
        return "running"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit {returncode}"


def machine_memory() -> int:
    """The machine's memory in bytes (``MemTotal`` of /proc/meminfo; 0 if unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def default_memory_limit() -> int:
    """A worker's resident memory limit in bytes: ``SHARDFUZZ_WORKER_MEMORY`` GiB if set, else a
    third of the machine's memory, at least 2 GiB (8 GiB where it is unknown). A campaign of
    two jobs runs up to four workers (each job's own and its lowering worker), so one runaway
    program leaves the others room. A program of shardfuzz's small arrays needs well under
    1 GiB (workers are restarted past 6 GiB, fuzz.runner.RECYCLE_BYTES, to stop slow growth).
    Raises WorkerError for a setting that is not a positive number.
    """
    text = os.environ.get(MEMORY_ENV, "").strip()
    if text:
        try:
            gib = float(text)
        except ValueError:
            gib = -1.0
        if not 0 < gib < float("inf"):  # (NaN fails too)
            raise WorkerError(f"{MEMORY_ENV}={text!r} is not a positive number of GiB; "
                              f"set it to e.g. 8, or unset it for a third of the machine's memory")
        return int(gib * (1 << 30))
    total = machine_memory()
    return max(2 << 30, total // 3) if total else 8 << 30


class Worker:
    """One persistent worker process.

    ``python``: interpreter to run it with (default: this one); ``n_devices``: host CPU
    devices JAX fakes; ``hash_seed``: PYTHONHASHSEED of the process (None: random).
    ``death_signal`` and ``watchdog``: the two ways the worker dies with this process
    (see the module docstring); both on by default, switched off only by the tests
    that check each alone. ``memory_limit``: bytes of resident memory a program may take
    it to (None: :func:`default_memory_limit`). Raises WorkerError when it does not start,
    or for a bad ``SHARDFUZZ_WORKER_MEMORY``.
    """

    def __init__(self, python: str | None = None, n_devices: int = 8, hash_seed: int | None = None,
                 death_signal: bool = True, watchdog: bool = True, memory_limit: int | None = None):
        self.memory_limit = memory_limit or default_memory_limit()
        self.python = python or sys.executable
        self.n_devices = n_devices
        self.hash_seed = hash_seed
        self.death_signal = death_signal
        self.watchdog = watchdog
        self.proc = None
        self.caps: dict = {}
        self.programs_run = 0
        self._breach = None  # (rss, stacks) of a program stopped past the memory limit (check_memory)
        self._start()

    def _start(self) -> None:
        env = dict(os.environ)
        flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
        env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={self.n_devices}"])
        env["JAX_PLATFORMS"] = "cpu"
        env["JAX_TRACEBACK_FILTERING"] = "off"  # keep JAX's own frames: they locate message-less errors
        env["PYTHONHASHSEED"] = str(self.hash_seed) if self.hash_seed is not None else "random"
        env.pop("PYTHONPATH", None)  # the worker must not see shardfuzz
        env.pop(PARENT_ENV, None)
        env.pop(GUARD_ENV, None)
        if self.death_signal or self.watchdog:
            env[PARENT_ENV] = str(os.getpid())
            env[GUARD_ENV] = "both" if self.death_signal and self.watchdog else (
                "signal" if self.death_signal else "watchdog")
        self.stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen([self.python, "-u", str(WORKER_SCRIPT)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.stderr, env=env,
                                         start_new_session=True, cwd=tempfile.gettempdir())
        except OSError as e:
            raise WorkerError(f"cannot start worker with {self.python}: {e.strerror}") from None
        try:
            self._handshake()
        except BaseException:  # interrupted (Ctrl-C, SIGTERM) while JAX was being imported
            self.kill()
            raise

    def _handshake(self) -> None:
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True).start()
        hello = self._next(STARTUP_TIMEOUT)
        if hello is None or "hello" not in hello:
            tail = self.stderr_tail()
            self.kill()
            last = tail.strip().splitlines()[-1] if tail.strip() else "no output"
            raise WorkerError(f"worker under {self.python} did not start ({last}); is JAX installed there?")
        self.caps = hello["hello"]
        self.programs_run = 0

    @staticmethod
    def _read(stream, q) -> None:
        for line in stream:
            q.put(line)
        q.put(None)

    def _next(self, timeout: float):
        try:
            with INTERRUPTS.allowed():  # a safe point for a stop signal (see fuzz.util.INTERRUPTS)
                line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return "timeout"
        return None if line is None else json.loads(line)

    def stderr_tail(self, start: int = 0, limit: int = 6000) -> str:
        self.stderr.flush()
        self.stderr.seek(0, os.SEEK_END)
        end = self.stderr.tell()
        self.stderr.seek(max(start, end - limit))
        return self.stderr.read().decode(errors="replace")

    def run(self, source: str, timeout: float, lower: bool | str = False) -> dict:
        """Run one rendered program. Returns an outcome dict:

        ``status``: "ok" (``calls`` as in fuzz/worker.py, arrays decoded), "crash"
        (``signal``, ``returncode``, ``stderr``), "hang" (killed after ``timeout``
        seconds; ``stacks``: its threads' stacks) or "memory" (killed when its resident
        memory passed ``limit`` bytes: ``rss``, ``limit``, ``stacks``); ``wall``: seconds.
        ``lower``: False, True (execute, then lower every
        call), "after" (execute, then lower every call twice: before and after
        ``jax.clear_caches()``) or "only" (lower every call twice so, execute nothing).
        After a crash, hang or memory breach the worker is restarted.
        """
        self.submit(source, lower)
        return self.collect(timeout)

    def submit(self, source: str, lower: bool | str = False) -> None:
        """Send a program without waiting for it (see :meth:`run`); :meth:`collect` gets the outcome."""
        self.programs_run += 1
        self._mark = self.stderr_tail_end()
        self._req_id = self.programs_run
        self._start_time = time.perf_counter()
        try:
            self.proc.stdin.write((json.dumps({"id": self._req_id, "source": source, "lower": lower}) + "\n").encode())
            self.proc.stdin.flush()
            self._sent = True
        except (BrokenPipeError, OSError):
            self._sent = False

    def collect(self, timeout: float, watch: tuple = ()) -> dict:
        """The outcome of the program last submitted (see :meth:`run`).

        ``watch``: other workers running a program meanwhile (a lowering worker), whose
        resident memory is checked too while this one is waited for: one past its limit is
        stopped at once, and its own :meth:`collect` then returns its "memory" outcome.
        """
        reply = None
        if self._sent:
            deadline = self._start_time + timeout
            while self._breach is None:
                left = deadline - time.perf_counter()
                reply = self._next(max(0.0, min(left, MEMORY_POLL)))
                if isinstance(reply, dict) and reply.get("id") != self._req_id:
                    continue  # a stale reply: skip it
                if reply != "timeout" or left <= MEMORY_POLL:
                    break
                for w in (self, *watch):
                    w.check_memory()
        if self._breach is not None:  # stopped past its memory limit (now, or while another was waited for)
            (rss, tail, stacks), self._breach = self._breach, None
            return self._memory_outcome(rss, tail, stacks)
        wall = time.perf_counter() - self._start_time
        if reply == "timeout":
            tail = self.stderr_tail(self._mark)
            stacks = self.dump_stacks()
            self.restart()
            return {"status": "hang", "wall": wall, "timeout": timeout, "stderr": tail, "stacks": stacks}
        if reply is None:
            try:
                rc = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                rc = None
            tail = self.stderr_tail(self._mark)
            self.restart()
            return {"status": "crash", "wall": wall, "returncode": rc, "signal": signal_name(rc), "stderr": tail}
        for c in reply.get("calls", []):
            c["outputs"] = [decode(o) for o in c["outputs"]]
            c["callbacks"] = {t: decode(v) for t, v in c["callbacks"].items()}
        reply["status"] = "ok"
        reply["wall"] = wall
        return reply

    def check_memory(self) -> None:
        """Stop this worker (stacks dumped, cut short if it grows by a quarter more; process group
        killed) if its resident memory is past its limit; :meth:`collect` then returns the
        "memory" outcome."""
        if self.proc is None or self._breach is not None:
            return
        rss = self.rss_bytes()
        if rss > self.memory_limit:
            tail = self.stderr_tail(self._mark)
            self._breach = (rss, tail, self.dump_stacks(stop_above=self.memory_limit + self.memory_limit // 4))
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _memory_outcome(self, rss: int, tail: str, stacks: str) -> dict:
        """The "memory" outcome (see :meth:`run`); the worker is restarted."""
        wall = time.perf_counter() - self._start_time
        self.restart()
        return {"status": "memory", "wall": wall, "rss": rss, "limit": self.memory_limit, "stderr": tail,
                "stacks": stacks}

    def dump_stacks(self, wait: float = STACK_WAIT, stop_above: int | None = None) -> str:
        """Every thread's Python stack, innermost frame first, of a worker that does not answer
        (faulthandler's text: "Thread 0x... (most recent call first):" then one 'File "...",
        line N in f' per frame): fuzz/worker.py writes it to stderr on STACK_SIGNAL, even from
        a thread stuck in native code. Waits up to ``wait`` seconds for it; '' if none came
        (a worker that died, or one stuck where no signal handler runs). ``stop_above``: stop
        waiting once the worker's resident memory passes this many bytes (a worker that
        grows while it writes).
        """
        start = self.stderr_tail_end()
        try:
            os.kill(self.proc.pid, STACK_SIGNAL)
        except (ProcessLookupError, PermissionError, AttributeError):
            return ""
        deadline = time.monotonic() + wait
        seen = ""
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if stop_above is not None and self.rss_bytes() > stop_above:
                break
            text = self.stderr_tail(start, limit=1 << 16)
            if "most recent call first" in text and text == seen:  # (written, and nothing more for 0.1 s)
                return text
            seen = text
        return seen if "most recent call first" in seen else ""

    def stderr_tail_end(self) -> int:
        """The current length of the worker's stderr, in bytes."""
        self.stderr.flush()
        return self.stderr.seek(0, os.SEEK_END)

    def rss_bytes(self) -> int:
        """Resident memory of the worker process in bytes (0 if unknown)."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except (OSError, AttributeError):
            pass
        return 0

    def kill(self) -> None:
        """Kill the worker's whole process group and reap it."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                s.close()
            except OSError:
                pass
        self.proc = None

    def restart(self) -> None:
        self.kill()
        self._start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
