"""``shardfuzz run --jobs N``: N campaigns at once, one example database, one findings file, one report.

Design (described in docs/usage.md, ``--jobs``; measured against one job in docs/measurements.md): each job is a
whole :class:`fuzz.campaign.Campaign` (its own Hypothesis engine, workers and seed).
Job 0 runs in the ``shardfuzz`` process itself, as ``--jobs 1`` does; jobs 1 … N-1 are
subprocesses (``python -c 'from fuzz.parallel import job_main; job_main()'``) that this
module starts (:class:`Jobs`) after job 0's workers are up. They share:

- the Hypothesis example database directory (``DirectoryBasedExampleDatabase`` writes
  each example through a temporary file and a rename: safe from several processes);
- the findings file (:mod:`fuzz.findings`, appends under ``fcntl.flock``); each record
  carries the run's id and its job, and a job does not record (shrink, reduce) a
  signature another job of the run has already written there: it counts its hits as
  ``peer_hits`` instead (:meth:`fuzz.campaign.Campaign._peer`).

A child job talks to the parent in JSON lines on its stdout (its own stdout is moved to
stderr, which goes to a temporary file): ``{"started": wall clock}``, ``{"progress":
{"programs", "generated"}}`` (at most every PROGRESS_PERIOD seconds), ``{"finding":
signature}`` (after it is in the findings file), and last ``{"done": {"report",
"peer_hits", "aliases", "error"}}``. The parent sums the progress into one bar and merges
the reports into one (:func:`merge_reports`).

Stopping: the parent forwards its stop signal (SIGINT, SIGTERM, SIGHUP) to every child
as SIGTERM (:meth:`Jobs.stop`); a child stops at its campaign's next safe point
(:data:`fuzz.util.INTERRUPTS`), sends its report and exits without printing anything.
A child dies with the parent (``PR_SET_PDEATHSIG`` and a parent-pid watchdog, as the
workers do: :func:`fuzz.worker.guard_parent`); its workers die with it. A child that
ends without a report (killed from outside) is reported in one line, and its findings
are read back from the findings file; an internal error in any job stops every job,
and the run ends with the merged report and exit 2, as one job's internal error does.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from fuzz.reports import merge_generator_errors, merge_reports  # noqa: F401 (the one merge rule; tests import it from here)

PROGRESS_PERIOD = 0.5  # seconds between two progress lines of a child job
STOP_GRACE = 60.0  # seconds a stopped child has to send its report before it is killed
MAX_DEFAULT_JOBS = 8  # the default --jobs is the machine's cores, at most this many...
JOB_BYTES = 3 << 30  # ...and at most one job per this much memory (bytes; fuzzer + two workers)
SEED_STRIDE = 1000  # job j of a campaign with --seed S runs with seed S + SEED_STRIDE * j
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where fuzz/, strategies/, oracles/ live


def default_jobs() -> int:
    """The default of ``--jobs``: the cores this process may run on (``os.sched_getaffinity``,
    else ``os.cpu_count()``), at most MAX_DEFAULT_JOBS and at most one per JOB_BYTES of
    physical memory; at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = JOB_BYTES * MAX_DEFAULT_JOBS
    return max(1, min(cores, MAX_DEFAULT_JOBS, memory // JOB_BYTES))


def job_seed(seed: int | None, job: int) -> int | None:
    """The Hypothesis seed of job ``job`` (0-based) of a run with ``--seed seed``: None stays None,
    job 0 keeps ``seed`` (so ``--jobs 1`` repeats the campaign it always did), job j gets
    ``seed + SEED_STRIDE * j`` (``shardfuzz run --jobs 1 --seed`` that value draws job j's programs)."""
    return None if seed is None else seed + SEED_STRIDE * job


def split(total: int | None, jobs: int) -> list:
    """``total`` programs (None: no limit) shared out among ``jobs`` jobs, as even as can be."""
    if total is None:
        return [None] * jobs
    return [total // jobs + (j < total % jobs) for j in range(jobs)]


# ------------------------------------------------------------------------------ child side
def job_main() -> None:
    """Run one child job: read its configuration (JSON) on stdin, run a campaign, report on stdout.

    The configuration holds ``job``, ``seed``, ``deadline`` (wall clock, seconds since the
    epoch, when generation stops), ``max_examples``, ``python``, ``database``,
    ``timeout``, ``determinism``, ``findings_path``, ``findings_offset`` (bytes of the
    findings file from before the run), ``corpus_signatures``, ``run_id`` and
    ``parent`` (pid). Never raises and never prints but on the JSON channel (see the
    module docstring); exits 0.
    """
    from fuzz.util import StopSignals  # the handlers first: a stop signal from here on is a clean stop

    stop = StopSignals()
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what anything else prints goes to stderr (a file the parent keeps)
    lock = threading.Lock()

    def send(message: dict) -> None:
        with lock:
            try:
                channel.write(json.dumps(message, default=str, separators=(",", ":")) + "\n")
                channel.flush()
            except (OSError, ValueError):  # the parent is gone: the guard ends this process
                pass

    try:
        config = json.loads(sys.stdin.read())
        from fuzz.worker import guard_parent

        guard_parent(int(config["parent"]))
        _run_job(config, stop, send)
    except BaseException as e:  # (a stop before the campaign existed, or a bug of ours: say it, never a traceback)
        if isinstance(e, KeyboardInterrupt):
            send({"done": {"report": None, "error": ""}})
        else:
            send({"done": {"report": None, "error": _one_line(e), "traceback": _traceback()}})
    channel.close()
    os._exit(0)  # (no interpreter teardown: JAX and the workers' reader threads are not needed any more)


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"


def _traceback() -> str:
    """The traceback being handled when SHARDFUZZ_DEBUG=1 (the parent prints it), else ''."""
    if os.environ.get("SHARDFUZZ_DEBUG") != "1":
        return ""
    import traceback

    return traceback.format_exc()


def _run_job(config: dict, stop, send) -> None:
    from fuzz.campaign import Campaign
    from fuzz.util import INTERRUPTS

    hook = None
    if os.environ.get("SHARDFUZZ_TEST_FAULT"):
        from fuzz.faults import hook_from_spec

        hook = hook_from_spec(os.environ["SHARDFUZZ_TEST_FAULT"])
    last = [0.0]

    def progress(c) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_PERIOD:
            last[0] = now
            send({"progress": {"programs": c.stats.programs, "generated": c.stats.generated}})

    campaign = Campaign(seconds=0, max_examples=config["max_examples"], seed=config["seed"], python=config["python"],
                        database=config["database"], timeout=config["timeout"], determinism=config["determinism"],
                        source_hook=hook, findings_path=config["findings_path"], on_progress=progress,
                        on_finding=lambda c, rec: send({"finding": rec.finding.signature}),
                        corpus_signatures=config["corpus_signatures"], run_id=config["run_id"], job=config["job"],
                        swarm=config.get("swarm", False), avoid_known=config.get("avoid_known", True),
                        shrink=config.get("shrink", True), disabled=frozenset(config.get("disabled", ())),
                        known_ops=config.get("known_ops"), look_past=config.get("look_past", True),
                        fresh=config.get("fresh", True))
    campaign.peers_offset = config["findings_offset"]
    campaign.on_generator_error = lambda c, message: send({"generator_error": message})  # (the parent shows it once)
    error = trace = ""
    try:
        with INTERRUPTS.deferred():  # a stop signal is raised at a safe point only
            campaign.seconds = max(0.0, config["deadline"] - time.time())
            send({"started": time.time()})
            report = campaign.run()
    except KeyboardInterrupt:
        stop.wrap_up()
        report = campaign.report()
    except Exception as e:  # a bug of ours: the parent says it in one line and stops the run
        stop.wrap_up()
        error, trace = _one_line(e), _traceback()
        report = campaign.report()
    finally:
        stop.wrap_up()
        campaign.close()
    send({"progress": {"programs": campaign.stats.programs, "generated": campaign.stats.generated}})
    send({"done": {"report": report, "started": campaign.started, "peer_hits": dict(campaign.peer_hits),
                   "aliases": campaign.aliases, "error": error, "traceback": trace}})


# ------------------------------------------------------------------------------ parent side
class Job:
    """What the parent knows of one job: its progress, findings announced, and the end."""

    def __init__(self, index: int, seed):
        self.index = index
        self.seed = seed
        self.programs = 0
        self.generated = 0
        self.started: float | None = None  # wall clock of the campaign's start
        self.done: dict | None = None  # the "done" message (None until it came)
        self.proc = None
        self.stderr = None
        self.reader: threading.Thread | None = None
        self.returncode: int | None = None

    def stderr_tail(self) -> str:
        """The last non-empty line the child wrote to stderr ('' if none)."""
        if self.stderr is None:
            return ""
        try:
            self.stderr.seek(0, os.SEEK_END)
            self.stderr.seek(max(0, self.stderr.tell() - 4000))
            lines = [ln for ln in self.stderr.read().decode(errors="replace").splitlines() if ln.strip()]
        except (OSError, ValueError):
            return ""
        return lines[-1].strip()[:200] if lines else ""


class Jobs:
    """The child jobs 1 … N-1 of a run (job 0 is the caller's own campaign).

    ``config``: the keys of :func:`job_main`'s configuration but ``job``, ``seed``,
    ``max_examples`` and ``parent``; ``seeds``, ``shares``: per job (index 0 included,
    unused here); ``on_progress()``: called (from a reader thread) when a child's
    progress changes; ``on_finding(job, signature)``: when a child recorded a new
    finding; ``on_error(job)``: when a child reported an internal error (a :class:`Job`).
    Nothing starts before :meth:`start`.
    """

    def __init__(self, n: int, config: dict, seeds: list, shares: list, on_progress=None, on_finding=None,
                 on_error=None):
        self.config = config
        self.shares = shares
        self.children = [Job(j, seeds[j]) for j in range(1, n)]
        self.on_progress = on_progress or (lambda: None)
        self.on_finding = on_finding or (lambda job, sig: None)
        self.on_error = on_error or (lambda job: None)
        self.stopped = False  # stop() was called: children that end without a report are not news

    def start(self) -> None:
        """Start every child (from the main thread: a child's death signal follows the thread that started it).

        Raises OSError when a process cannot be started (the ones started are stopped first).
        """
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        for job in self.children:
            if self.stopped:
                return
            config = {**self.config, "job": job.index, "seed": job.seed, "max_examples": self.shares[job.index],
                      "parent": os.getpid()}
            job.stderr = tempfile.TemporaryFile()
            try:
                job.proc = subprocess.Popen(
                    [sys.executable, "-c", "from fuzz.parallel import job_main; job_main()"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=job.stderr, env=env,
                    start_new_session=True)  # (a Ctrl-C reaches the parent only; it forwards the stop)
                job.proc.stdin.write(json.dumps(config).encode())
                job.proc.stdin.close()
            except OSError:
                self.stop()
                self.wait(STOP_GRACE)
                raise
            job.reader = threading.Thread(target=self._read, args=(job,), name=f"shardfuzz-job-{job.index}",
                                          daemon=True)
            job.reader.start()

    def _read(self, job: Job) -> None:
        for line in job.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "progress" in msg:
                job.programs = msg["progress"]["programs"]
                job.generated = msg["progress"]["generated"]
                self.on_progress()
            elif "finding" in msg:
                self.on_finding(job.index, msg["finding"])
            elif "generator_error" in msg:
                from fuzz.campaign import announce_generator_error

                announce_generator_error(str(msg["generator_error"]))
            elif "started" in msg:
                job.started = msg["started"]
            elif "done" in msg:
                job.done = msg["done"]
                if job.done.get("error"):
                    self.on_error(job)
        job.returncode = job.proc.wait()

    def totals(self) -> tuple:
        """(programs, generated) of the children so far."""
        return sum(j.programs for j in self.children), sum(j.generated for j in self.children)

    def stop(self) -> None:
        """Ask every running child to stop (SIGTERM; it reports what it found). Safe in a signal handler."""
        self.stopped = True
        for job in self.children:
            if job.proc is not None and job.proc.returncode is None:
                try:
                    os.kill(job.proc.pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass

    def failed(self) -> Job | None:
        """A child that reported an internal error, if any."""
        return next((j for j in self.children if j.done and j.done.get("error")), None)

    def running(self) -> bool:
        """Whether a child has not ended yet (its output is still being read)."""
        return any(j.reader is not None and j.reader.is_alive() for j in self.children)

    def wait(self, timeout: float | None, poll=None) -> bool:
        """Wait until every child has ended, at most ``timeout`` seconds (None: no limit); True if all did.

        ``poll()``: called about every 0.2 s while waiting (e.g. to check for a failed job).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.running():
            if deadline is not None and time.monotonic() > deadline:
                return False
            if poll is not None:
                poll()
            time.sleep(0.2)
        return True

    def kill(self) -> None:
        """SIGKILL every child still running (its workers die with it) and reap it."""
        for job in self.children:
            if job.proc is not None and job.proc.poll() is None:
                try:
                    os.kill(job.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if job.proc is not None:
                try:
                    job.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            if job.reader is not None:
                job.reader.join(5)

    def finish(self, grace: float = STOP_GRACE) -> None:
        """Stop the children, give them ``grace`` seconds to report, then kill what is left."""
        self.stop()
        if not self.wait(grace):
            self.kill()

    def results(self, findings_path: str | None, run_id: str) -> tuple:
        """After the children ended: (list of per-job results for :func:`merge_reports`, list of one-line problems).

        A child without a report is described from its last progress and the findings it
        wrote to the findings file (``recovered``: True).
        """
        out, problems = [], []
        for job in self.children:
            done = job.done or {}
            if done.get("error"):
                problems.append(f"job {job.index}: internal error: {done['error']}")
            report = done.get("report")
            if report is None:
                recovered = _recover(findings_path, run_id, job.index)
                # (stopped before its campaign began: it said so, or the SIGTERM came before its handler)
                if not (self.stopped and (job.done is not None or job.returncode == -signal.SIGTERM)):
                    why = f"exit {job.returncode}" if job.returncode is None or job.returncode >= 0 else \
                        f"killed by {_signal_name(-job.returncode)}"
                    tail = job.stderr_tail()
                    problems.append(f"job {job.index} ended without a report ({why}{': ' + tail if tail else ''}); "
                                    f"{len(recovered)} finding(s) of it read back from {findings_path}")
                report = {"findings": recovered, "programs": job.programs, "generated": job.generated}
            out.append({"job": job.index, "seed": job.seed, "report": report,
                        "started": done.get("started") or job.started, "peer_hits": done.get("peer_hits", {}),
                        "aliases": done.get("aliases", {}), "error": done.get("error", ""),
                        "traceback": done.get("traceback", ""),
                        "recovered": job.done is None or done.get("report") is None})
        return out, problems


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


FILE_ONLY = ("campaign_started", "seed", "jax_version", "jaxlib_version", "run", "job")  # findings-file keys


def _recover(path: str | None, run_id: str, job: int) -> list:
    """The findings job ``job`` of run ``run_id`` wrote to the findings file (last record per signature,
    superseded ones left out), as report findings; [] if the file cannot be read."""
    if not path:
        return []
    from fuzz import findings as findings_file

    try:
        lines = findings_file.read_lines(path)
    except OSError:
        return []
    latest: dict = {}
    for rec in lines:
        if rec.get("run") == run_id and rec.get("job") == job:
            latest[rec.get("signature")] = rec
    return [{k: v for k, v in rec.items() if k not in FILE_ONLY} for rec in latest.values()
            if "superseded_by" not in rec and "program" in rec]
