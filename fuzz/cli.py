"""``shardfuzz`` command line: run a campaign, show progress and a summary of distinct findings.

Exit codes: 0 nothing found, 1 something found, 2 bad input or an error (one line on
stderr says what is wrong and what to do; an unexpected error prints
``shardfuzz: internal error: ...``, with the traceback when ``SHARDFUZZ_DEBUG=1``).

``run`` stops on SIGINT (Ctrl-C), SIGTERM and SIGHUP alike: the workers are killed, the
report is written and the summary printed, and it exits 0 or 1 as after a full run.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import sys
import tempfile
import threading
import time

import click

from fuzz import __version__
from fuzz.util import INTERRUPTS, StopSignals, UsageError, atomic_write_text, check_environment, unsupported

DEBUG_ENV = "SHARDFUZZ_DEBUG"  # =1: print the traceback of an internal error
FAULT_ENV = "SHARDFUZZ_TEST_FAULT"  # test-only: inject faults into every program (see fuzz.faults.hook_from_spec)


def _fail(msg: str) -> None:
    click.echo(f"shardfuzz: {msg}", err=True)
    sys.exit(2)


class _Shardfuzz(click.Group):
    """The command group, with one exit path for what no command expected: exit 2 and one line."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except UsageError as e:  # (bad input found below the CLI: fuzz.util.UsageError)
            _fail(str(e))
        except KeyboardInterrupt as e:
            _fail(f"interrupted ({e.args[0] if e.args else 'SIGINT'})")
        except Exception as e:
            if os.environ.get(DEBUG_ENV) == "1":
                import traceback

                traceback.print_exc()
            msg = " ".join(str(e).split())[:300]
            _fail(f"internal error: {type(e).__name__}: {msg} (please report; {DEBUG_ENV}=1 shows the traceback)")


@click.group(cls=_Shardfuzz)
@click.version_option(__version__, prog_name="shardfuzz")
def main() -> None:
    """shardfuzz: a fuzzer for JAX's sharding transforms (jit, shard_map, vmap, grad, io_callback)."""


def _unwritable(directory: str) -> str:
    """'' when a file can be created in ``directory``, else the reason (a temporary file is tried)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".shardfuzz-probe-")
    except OSError as e:
        return e.strerror or str(e)
    os.close(fd)
    os.unlink(tmp)
    return ""


@main.command()
@click.option("--time", "seconds", type=click.FloatRange(min=1), default=600, show_default=True,
              help="Stop generating after this many seconds (a shrink in progress may finish).")
@click.option("--max-examples", type=click.IntRange(min=1), default=None, help="Stop after this many programs.")
@click.option("--seed", type=int, default=None,
              help="Hypothesis seed, for a repeatable campaign (the database is then written, not replayed).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None,
              help="Write the JSON report here (default: report-<date>-<time>-<pid>.json beside the database, "
                   "e.g. .shardfuzz/report-20261204-151200-4242.json).")
@click.option("--python", "python", default=None, help="Interpreter whose JAX the workers use.")
@click.option("--jax-version", default=None,
              help="Fuzz this released JAX (X.Y.Z, X.Y.Z.W or 'newest') in a cached venv.")
@click.option("--venv-python", default=None, metavar="PATH",
              help="Python to make the --jax-version venv with when its wheels fit (default: $SHARDFUZZ_VENV_PYTHON, "
                   "this one, or a python3.N on PATH that fits).")
@click.option("--determinism/--no-determinism", default=True, show_default=True,
              help="Lower every program in a second process with another hash seed and compare.")
@click.option("--database", default=".shardfuzz/examples", show_default=True,
              help="Hypothesis example database directory ('' for none); findings.jsonl is written beside it. "
                   "redis://HOST:PORT/N: one campaign across machines (docs/distributed.md).")
@click.option("--timeout", type=click.FloatRange(min=1), default=None,
              help="Seconds a program may run before it is a hang (default: scaled to the program).")
@click.option("--corpus", "corpus_dir", default="corpus", show_default=True,
              help="Corpus whose findings are known: reported apart, not as new ('' for none).")
@click.option("--fail-on-known", is_flag=True, help="Exit 1 when a known (corpus) finding shows too, not only a new one.")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Campaigns run at once, sharing the database, the findings file and the report "
                   "(default: the cores, at most 8 and one per 3 GiB of memory).")
@click.option("--swarm/--no-swarm", default=False, show_default=True,
              help="Swarm testing: each program leaves out a random half of the ops and transforms.")
@click.option("--avoid-known/--no-avoid-known", default=True, show_default=True,
              help="Now and then leave out a feature that a known bug's smallest program needs.")
@click.option("--look-past/--no-look-past", default=True, show_default=True,
              help="Run a program that raised a known finding once more without the ops that finding needs.")
@click.option("--fresh-draws/--hypothesis-mutations", "fresh", default=True, show_default=True,
              help="Draw every program anew; --hypothesis-mutations keeps Hypothesis' generate phase, whose "
                   "draws are mostly mutants of the draw before (for comparison).")
@click.option("--shrink/--no-shrink", default=True, show_default=True,
              help="Shrink and reduce each new finding; --no-shrink keeps findings as found (to reduce them "
                   "later with `shardfuzz reduce --also-on`).")
@click.option("--disable", "disabled", multiple=True, metavar="NAME",
              help="Never draw this op, transform, 'call' or option (explicit_mesh, spmd_axis_name, "
                   "vmap_axis_name, partial_manual, check_vma_off, capture, enable_checks, "
                   "unbatched_collective); repeatable.")
def run(seconds, max_examples, seed, report_path, python, jax_version, venv_python, determinism, database, timeout,
        corpus_dir, fail_on_known, jobs, swarm, avoid_known, look_past, fresh, shrink, disabled):
    """Run a fuzzing campaign against JAX on 8 host CPU devices."""
    stop = StopSignals()
    from fuzz import parallel

    n_jobs = min(jobs or parallel.default_jobs(), max_examples or math.inf)  # (each job draws one program at least)
    from rich.console import Console

    console = Console(stderr=True)
    check_environment()
    for name, value in (("--time", seconds), ("--timeout", timeout)):
        if value is not None and not math.isfinite(value):
            _fail(f"{name} {value} is not a finite number of seconds; give one such as {name} 600")
    from fuzz.provision import NewerJaxCheck, ProvisionError, check_options, worker_python

    try:
        check_options(python, jax_version, venv_python)
    except ProvisionError as e:
        _fail(str(e))
    newer = NewerJaxCheck()  # (asks the package index in the background; the summary says if a newer JAX exists)
    from strategies.programs import check_disabled

    try:
        disabled = check_disabled(disabled)
    except ValueError as e:
        _fail(f"--disable: {e}")
    if report_path:
        if report_path.endswith(("/", os.sep)):
            _fail(f"--report {report_path} names a directory; give a file name (e.g. {report_path}report.json)")
        d = os.path.dirname(os.path.abspath(report_path))
        why = "no such directory" if not os.path.isdir(d) else _unwritable(d)
        if why:
            _fail(f"cannot write the report to {report_path}: {d} is not a writable directory ({why}); "
                  f"choose another --report")
    # the findings file (and a report that cannot go to --report) lives beside the database
    from fuzz import distributed

    shown_db, remote = database, distributed.is_url(database)  # (a Redis URL is shown without its password)
    if remote:  # the examples and findings in Redis, the findings file in .shardfuzz/
        try:
            shown_db = distributed.open_url(database)[0].display()
        except distributed.RedisInputError as e:
            _fail(str(e))
    state_dir = (os.path.dirname(os.path.normpath(database)) or ".") if database and not remote else ".shardfuzz"
    findings_path = os.path.join(state_dir, "findings.jsonl")
    if os.path.exists(state_dir) and not os.path.isdir(state_dir):
        _fail(f"{state_dir} is a file, not a directory: shardfuzz keeps its findings file and reports there; "
              f"move the file away or pass --database in another directory")
    try:
        os.makedirs(state_dir, exist_ok=True)
        with open(findings_path, "a"):
            pass
    except OSError as e:
        _fail(f"cannot write the findings file {findings_path} ({e.strerror or e}); "
              f"pass --database in a writable directory")
    # every campaign keeps its report (save and export read findings from it)
    report_path = report_path or os.path.join(state_dir, _report_name())
    corpus_signatures, known_ops, upstream = {}, {}, {}
    if corpus_dir:
        from fuzz.program import CorpusError, corpus_files, known_ops as corpus_ops, known_signatures

        try:
            entries = corpus_files(corpus_dir)
        except CorpusError as e:
            _fail(f"{e} (or pass --corpus '' to fuzz without a corpus)")
        corpus_signatures = known_signatures(entries)
        upstream = {os.path.basename(path): entry["upstream"] for path, entry in entries if entry.get("upstream")}
        known_ops = corpus_ops(entries)  # the ops of each entry's reduced program (for --look-past)
    hook = None
    if os.environ.get(FAULT_ENV):
        from fuzz.faults import hook_from_spec

        try:
            hook = hook_from_spec(os.environ[FAULT_ENV])
        except ValueError as e:
            _fail(str(e))
    from fuzz.campaign import Campaign
    from fuzz.execute import WorkerError

    try:
        with console.status(f"preparing a venv with JAX {jax_version}…") if jax_version else contextlib.nullcontext():
            python = worker_python(python, jax_version, venv_python, log=console.print)
    except ProvisionError as e:
        _fail(str(e))

    announced: set = set()  # signatures announced, by any job
    lock = threading.Lock()

    def announce(signature: str) -> None:  # (after the finding is in the findings file)
        with lock:
            if signature in announced:
                return
            announced.add(signature)
            console.print(f"finding {len(announced)}: {signature[:150]}", markup=False, highlight=False,
                          soft_wrap=True)

    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}" if n_jobs > 1 else None
    seeds = [parallel.job_seed(seed, j) for j in range(n_jobs)]
    shares = parallel.split(max_examples, n_jobs)
    findings_offset = os.path.getsize(findings_path)
    with console.status("starting JAX workers…"):
        try:
            campaign = Campaign(seconds=seconds, max_examples=shares[0], seed=seed, python=python,
                                database=database or None, timeout=timeout, determinism=determinism,
                                source_hook=hook, findings_path=findings_path,
                                on_finding=lambda c, rec: announce(rec.finding.signature),
                                corpus_signatures=corpus_signatures, run_id=run_id, job=0, swarm=swarm,
                                avoid_known=avoid_known, shrink=shrink, disabled=disabled,
                                known_ops=known_ops, look_past=look_past, fresh=fresh)
        except WorkerError as e:
            _fail(f"{e} Pass --python with an interpreter that has jax installed.")
        except distributed.RedisInputError as e:
            _fail(str(e))
        campaign.peers_offset = findings_offset
    # From here a stop signal waits for a safe point of the campaign (which then reports what it has),
    # also while the start is announced: a signal right after the announcement must not lose the report.
    with INTERRUPTS.deferred():
        problem = unsupported(campaign.caps)
        if problem:
            campaign.close()
            _fail(problem)
        console.print(f"shardfuzz: JAX {campaign.caps['jax_version']} (jaxlib {campaign.caps['jaxlib_version']}), "
                      f"{campaign.caps['n_devices']} host CPU devices; findings go to {findings_path}"
                      + (f" and {shown_db}" if remote else "") + " as found",
                      markup=False, highlight=False, soft_wrap=True)
        if seed is not None and database:
            console.print(f"shardfuzz: --seed {seed}: examples are saved to {shown_db} but not replayed, "
                          f"so that the campaign repeats", markup=False, highlight=False, soft_wrap=True)
        if hook is not None:
            console.print(f"shardfuzz: {FAULT_ENV} is set: faults are injected (for tests only)", markup=False,
                          soft_wrap=True)
        children = None
        if n_jobs > 1:
            console.print(f"shardfuzz: {n_jobs} jobs" + (f" (seeds {', '.join(map(str, seeds))})" if seed is not None
                                                         else ""), markup=False, highlight=False, soft_wrap=True)
            config = {"deadline": time.time() + seconds, "python": python, "database": database or None,
                      "swarm": swarm, "avoid_known": avoid_known, "shrink": shrink, "disabled": sorted(disabled),
                      "timeout": timeout, "determinism": determinism, "findings_path": findings_path,
                      "findings_offset": findings_offset, "corpus_signatures": corpus_signatures, "run_id": run_id,
                      "known_ops": known_ops, "look_past": look_past, "fresh": fresh}
            children = parallel.Jobs(n_jobs, config, seeds, shares, on_finding=lambda job, sig: announce(sig))
            stop.forward = children.stop
            if stop.name is not None:  # (a stop signal came during the announcement: start none)
                children.stop()
            try:
                children.start()
            except OSError as e:
                campaign.close()
                _fail(f"cannot start job processes ({e.strerror or e}); pass --jobs 1")
        report, error = _run_with_progress(campaign, console, seconds, max_examples, stop, children,
                                           announced, corpus_signatures)
    report["jobs"] = n_jobs
    report["interrupted"] = stop.name
    report["announced"] = len(announced)
    from oracles.common import resembling

    for f in report["findings"]:
        f["resembles"] = resembling(f["signature"], corpus_signatures or {})
    for k in report.get("known", []):  # (already reported: nothing to file)
        if k["entry"] in upstream:
            k["upstream"] = upstream[k["entry"]]
    report["newer_jax"] = newer.note(report.get("jax_version"))
    written = _write_report(report, report_path, state_dir, console)
    _summary(report, console, written)
    if error:
        _fail(error)
    sys.exit(1 if report["findings"] or (fail_on_known and report["known"]) else 0)


def _report_name() -> str:
    """``report-<date>-<time>-<pid>.json``: the pid too, so that two campaigns started in the same
    second do not overwrite each other's report."""
    return f"report-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"


def _write_report(report: dict, report_path: str, state_dir: str, console) -> str:
    """Write the report to ``report_path``; if that fails, beside the database, here, or in /tmp, and say where.

    Returns the path written, or '' when none could be (one line then names the findings file).
    """
    text = json.dumps(report, indent=1, default=str)
    try:
        atomic_write_text(report_path, text)
        return report_path
    except OSError as e:
        first = e
    for d in (state_dir, ".", tempfile.gettempdir()):
        path = os.path.join(d, _report_name())
        try:
            os.makedirs(d, exist_ok=True)
            atomic_write_text(path, text)
        except OSError:
            continue
        console.print(f"shardfuzz: cannot write the report to {report_path} ({first.strerror or first}); "
                      f"wrote it to {path}", markup=False, highlight=False, soft_wrap=True)
        return path
    console.print(f"shardfuzz: cannot write the report to {report_path} ({first.strerror or first}) nor to "
                  f"{state_dir}, . or {tempfile.gettempdir()}; the findings are in {report['findings_file']}",
                  markup=False, highlight=False, soft_wrap=True)
    return ""


JOB_ERROR = "a job's internal error"  # the KeyboardInterrupt that stops job 0 when another job failed


def _run_with_progress(campaign, console, seconds, max_examples, stop, jobs=None, announced=None,
                       corpus_signatures=None) -> tuple:
    """Run the campaign under a progress bar: (report, '' or the one-line internal error that ended it early).

    ``jobs``: the other jobs of ``--jobs N`` (:class:`fuzz.parallel.Jobs`, not started
    here): the bar sums their progress, they are stopped when this campaign is
    interrupted or fails (and this campaign when one of them fails), and the report is
    the merge of all (:func:`fuzz.reports.merge_reports`); ``announced``: the set of
    signatures announced so far (the bar's findings count with ``jobs``).
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    total = max_examples if max_examples else seconds
    progress = Progress(TextColumn("[bold]fuzzing"), BarColumn(), TimeElapsedColumn(),
                        TextColumn("{task.fields[programs]} programs, {task.fields[rate]:.2f}/s, "
                                   "{task.fields[findings]} findings"), console=console, transient=False)
    t0 = time.monotonic()

    def update(c=campaign):
        elapsed = time.monotonic() - t0
        programs, generated = c.stats.programs, c.stats.generated
        if jobs is not None:
            more = jobs.totals()
            programs, generated = programs + more[0], generated + more[1]
        done = generated if max_examples else min(elapsed, seconds)
        progress.update(task, completed=done, programs=programs, rate=programs / max(elapsed, 1e-9),
                        findings=len(c.records) if jobs is None else len(announced))

    def job_failed(job) -> None:  # (a reader thread): stop this campaign at its next program, and the other jobs
        INTERRUPTS.pending = INTERRUPTS.pending or JOB_ERROR
        jobs.stop()

    error = failure = ""
    with progress:
        task = progress.add_task("fuzz", total=total, programs=0, rate=0.0, findings=0)
        campaign.on_progress = update
        if jobs is not None:
            jobs.on_progress = update
            jobs.on_error = job_failed
            if jobs.failed() is not None:
                job_failed(jobs.failed())
        try:
            with INTERRUPTS.deferred():  # a stop signal is raised at a safe point only
                report = campaign.run()
        except KeyboardInterrupt as e:
            stop.wrap_up()
            if not (e.args and e.args[0] == JOB_ERROR and stop.name is None):
                console.print(f"interrupted ({stop.name or 'SIGINT'}): writing what was found so far")
            report = campaign.report()
        except Exception as e:  # a bug of ours: keep what was found, then exit 2
            stop.wrap_up()
            if os.environ.get(DEBUG_ENV) == "1":
                import traceback

                traceback.print_exc()
            failure = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
            error = _internal_error(failure)
            report = campaign.report()
        finally:
            stop.wrap_up()
            campaign.close()
        if jobs is not None:
            report, error = _gather(jobs, campaign, report, failure, stop, console, corpus_signatures, t0)
        update(campaign)
    return report, error


def _internal_error(what: str) -> str:
    return f"internal error: {what} (please report; {DEBUG_ENV}=1 shows the traceback)"


def _gather(jobs, campaign, report, failure, stop, console, corpus_signatures, t0) -> tuple:
    """Wait for the other jobs (stopping them first if this campaign was stopped or failed: ``failure``, its
    internal error) and merge their reports with ``report`` (job 0's): (merged report, '' or the internal
    error line of the first job that failed)."""
    from fuzz import parallel
    from fuzz.reports import merge_reports

    if failure or stop.name or jobs.failed() is not None:
        jobs.stop()
    # (they end by themselves at the same deadline; reducing what they found may take shrink_seconds more)
    limit = time.monotonic() + campaign.shrink_seconds + parallel.STOP_GRACE
    stopped_at = None
    while jobs.running():
        now = time.monotonic()
        if jobs.stopped and stopped_at is None:
            stopped_at = now
        if stopped_at is None and now > limit:
            jobs.stop()
        elif stopped_at is not None and now > stopped_at + parallel.STOP_GRACE:
            jobs.kill()
            break
        time.sleep(0.2)
    jobs.kill()  # (reaps them; none is left running by now)
    results, problems = jobs.results(campaign.findings_path, campaign.run_id)
    for line in problems:
        console.print(f"shardfuzz: {line}", markup=False, highlight=False, soft_wrap=True)
    job0 = {"job": 0, "seed": campaign.seed, "report": report, "started": campaign.started,
            "peer_hits": dict(campaign.peer_hits), "aliases": campaign.aliases, "error": failure, "recovered": False}
    error = _internal_error(failure) if failure else ""
    failed = next((r for r in results if r["error"]), None)
    if not error and failed is not None:
        if failed.get("traceback"):
            console.print(failed["traceback"], markup=False, highlight=False)
        error = _internal_error(f"job {failed['job']}: {failed['error']}")
    merged = merge_reports([job0] + results, time.monotonic() - t0, corpus_signatures)
    return merged, error


def _summary(report: dict, console, report_path: str = "") -> None:
    from rich.syntax import Syntax
    from rich.table import Table

    console.print(f"{report['programs']} programs in {report['seconds']:.0f} s "
                  f"({report['programs_per_second']:.2f}/s), {report['rejected']} raised in JAX, "
                  f"{report['invalid']} invalid (generator bugs)")
    if report.get("unconfirmed_crash_count"):
        console.print(f"{report['unconfirmed_crash_count']} crash(es) or hang(s) did not happen again in a fresh "
                      f"worker: not findings (see unconfirmed_crashes in the report)", soft_wrap=True)
    if report.get("findings_file_error"):
        console.print(f"shardfuzz: could not append to the findings file: {report['findings_file_error']}",
                      markup=False, highlight=False, soft_wrap=True)
    if report.get("known"):
        hits = sum(k["count"] for k in report["known"])
        entries = list(dict.fromkeys(k["entry"] for k in report["known"]))  # (an entry's faces: one name)
        reported = {k["entry"] for k in report["known"] if k.get("upstream")}
        console.print(f"known (in the corpus, not new): {len(report['known'])} signature(s) of {len(entries)} "
                      f"entries, {hits} hit(s), {report['known_seconds']:.0f} s of programs: "
                      + ", ".join(e + (" (reported upstream)" if e in reported else "") for e in entries),
                      markup=False, highlight=False, soft_wrap=True)
    if report.get("look_past_runs"):
        console.print(f"looked past known findings: {report['look_past_runs']} variant(s) of programs that raised them, "
                      f"run without the ops they need or with shard_map's vma checks off "
                      f"({report.get('look_past_vma_runs', 0)} of them; {report['look_past_seconds']:.0f} s), "
                      f"{report['look_past_clear']} of them then raised no known finding",
                      markup=False, highlight=False, soft_wrap=True)
    if report_path:
        console.print(f"report: {report_path}", markup=False, highlight=False, soft_wrap=True)
    if (report.get("newer_jax") or {}).get("line"):
        console.print(report["newer_jax"]["line"], markup=False, highlight=False, soft_wrap=True)
    gone = report.get("announced", 0) - len(report["findings"])
    if gone > 0:
        console.print(f"{gone} of the {report['announced']} findings announced while running turned out known "
                      f"or the same as another once shrunk and reduced (a corpus entry's face, or merged)",
                      markup=False, highlight=False, soft_wrap=True)
    if not report["findings"]:
        console.print("[green]no new findings[/green]")
        return
    # (quoted for the shell; a path starting with '-' would read as an option)
    shown = shlex.quote(("./" if report_path.startswith("-") else "") + report_path) if report_path else "REPORT"
    table = Table(title=f"{len(report['findings'])} new distinct findings")
    for col in ("#", "oracle", "kind", "message", "hits", "first at", "reduced"):
        table.add_column(col)
    for i, f in enumerate(report["findings"], 1):
        table.add_row(str(i), f["oracle"], f["kind"].split(".")[-1], f["message"].splitlines()[0][:90] if f["message"] else "",
                      str(f["count"]), f"{f['first_seconds']:.0f} s",
                      ("yes" if f.get("reduced") else "no") + f" ({f.get('reduction_runs', 0)} runs)")
    console.print(table)
    for i, f in enumerate(report["findings"], 1):
        console.rule(f"finding {i}: {f['signature'][:100]}")
        console.print(Syntax(_short_source(f["source"]), "python", line_numbers=False))
        if f.get("resembles"):
            console.print(f"may be a face of {', '.join(f['resembles'])} (same oracle and kind, a subset of these "
                          f"features); if so: shardfuzz save {shown} --finding {i} --face-of corpus/"
                          f"{f['resembles'][0]} --triage WHY", markup=False, highlight=False, soft_wrap=True)
        if f["details"]:
            console.print(f["details"][-800:], markup=False, highlight=False)
    console.rule()
    console.print(f"keep one in the corpus: shardfuzz save {shown} --finding N --triage WHY; write its repro and "
                  f"issue text: shardfuzz export {shown} --finding N", markup=False, highlight=False, soft_wrap=True)


def _short_source(source: str) -> str:
    """The program part of a rendered source (helpers and imports left out)."""
    lines = source.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("mesh = ")), 0)
    keep = [ln for ln in lines[start:] if ln.strip()]
    stop = next((i for i, ln in enumerate(keep) if ln.startswith('if __name__')), len(keep))
    return "\n".join(keep[:stop])


@main.command("save")
@click.argument("report_path", type=click.Path(dir_okay=False))
@click.option("--finding", "indexes", type=int, multiple=True,
              help="1-based number of a finding in the report (repeatable; default: all).")
@click.option("--triage", default="", help="Why the finding is a real JAX bug (stored in the entry).")
@click.option("--corpus", "corpus_dir", default="corpus", show_default=True, type=click.Path(file_okay=False))
@click.option("--face-of", "face_of", default=None, type=click.Path(dir_okay=False),
              help="A corpus entry of the same root cause: the findings' signatures become its faces "
                   "(campaigns report them as known) instead of new entries; --triage says why.")
def save(report_path, indexes, triage, corpus_dir, face_of):
    """Save findings of a campaign report as corpus entries (status open).

    All or nothing: every chosen finding is validated (schema, typing rules, an oracle
    about JAX) before any file is written. A report is untrusted input. With
    ``--face-of ENTRY`` the findings are another face of ENTRY's bug (another message or
    raise site of one root cause): their signatures are added to its ``faces``.
    """
    from fuzz.program import (REPORT_WORDS, CorpusError, add_faces, entries_from_report, load_entry, save_entries,
                              write_entry)

    try:
        with open(report_path) as f:
            report = json.load(f)
        entries = entries_from_report(report, indexes, triage, report_path)
        if face_of is not None:
            if not triage:
                raise CorpusError("--face-of needs --triage: say why these findings are that entry's bug")
            entry = load_entry(face_of)
            if any(_face_group(e["oracle"]) != _face_group(entry["oracle"]) for e in entries):
                raise CorpusError(f"--face-of {face_of}: a face must come from the same oracle ({entry['oracle']}), "
                                  f"or both from the oracles of a program's outcome ({', '.join(OUTCOME_ORACLES)})")
            write_entry(face_of, add_faces(entry, [e["signature"] for e in entries], triage))
            click.echo(f"{face_of}: {len(entries)} face(s) added")
            return
        for path, what in save_entries(corpus_dir, entries, triage):
            click.echo(f"{path}: {what}")
    except OSError as e:
        _fail(f"cannot read {report_path} ({e.strerror}); pass {REPORT_WORDS}")
    except (ValueError, RecursionError) as e:  # json.JSONDecodeError and CorpusError are ValueErrors
        msg = str(e) if isinstance(e, CorpusError) else f"{report_path} is not a JSON report ({e})"
        _fail(" ".join(msg.split())[:300])


# One root cause may show through several of these oracles: a batching rule that gives a
# wrong shape is a wrong value in one program and an internal error of the autodiff that
# consumes it in another (differential-83bfe5218ca5). Crashes, hangs and lowerings that
# differ are judged apart (fresh processes), so their faces stay within their oracle.
OUTCOME_ORACLES = ("differential", "metamorphic", "callbacks", "internal-error")


def _face_group(oracle: str) -> str:
    """Oracles whose findings may be faces of one entry. A crash's or a hang's signature names
    only where the process stopped ("hang: timeout: in jax._src.api:block_until_ready"): as a
    face of a wrong value it would make every later hang there known."""
    return "outcome" if oracle in OUTCOME_ORACLES else oracle


@main.command()
@click.option("--corpus", "corpus_dir", default="corpus", show_default=True, type=click.Path(file_okay=False))
@click.option("--entry", "names", multiple=True, metavar="NAME",
              help="Replay only this entry of the corpus (its file name, with or without .json); repeatable.")
@click.option("--python", "python", default=None, help="Interpreter whose JAX the workers use.")
@click.option("--jax-version", default=None, help="Replay on this released JAX (X.Y.Z) in a cached venv.")
@click.option("--venv-python", default=None, metavar="PATH",
              help="Python to make the --jax-version venv with (default: $SHARDFUZZ_VENV_PYTHON).")
@click.option("--record", is_flag=True,
              help="Write each entry's verdict on this release into its releases record (atomically; nothing "
                   "else in the entry changes).")
def replay(corpus_dir, names, python, jax_version, venv_python, record):
    """Replay the corpus on one JAX: reproduces / fails differently / does not / not applicable, per entry.

    Prints a table: entry, status, the verdict recorded for this release, the verdict now,
    the first and last release the entry's record says it affects. Exit 1 when an entry
    gives another verdict than the one recorded for this release (without one: an open
    entry that stopped reproducing on the release it was recorded on, or a fixed one that
    came back): CHANGED. With --record the verdicts are written instead and the exit is 0.
    Exit 2 when there is nothing to replay, an entry is not valid, the JAX cannot be had,
    or --record is asked of a JAX that is not a release (X.Y.Z).
    """
    from pathlib import Path

    from fuzz.execute import WorkerError
    from fuzz.program import CorpusError, corpus_files, write_entry
    from fuzz.provision import ProvisionError, worker_python
    from fuzz.replay import replay_entry
    from fuzz.runner import Runner
    from fuzz.verdicts import VERSION, of_replay, with_verdict

    if not Path(corpus_dir).is_dir():
        _fail(f"no corpus directory at {os.path.abspath(corpus_dir)}; run from the repository root or pass --corpus")
    try:
        pairs = corpus_files(corpus_dir)
    except CorpusError as e:
        _fail(str(e))
    if not pairs:
        _fail(f"{os.path.abspath(corpus_dir)} holds no corpus entries (*.json); nothing to replay")
    if names:
        wanted = {n.removesuffix(".json") for n in names}
        missing = sorted(wanted - {p.stem for p, _ in pairs})
        if missing:
            _fail(f"no entry {missing[0]!r} in {os.path.abspath(corpus_dir)}; give a file name from there "
                  f"(e.g. {pairs[0][0].stem})")
        pairs = [(p, e) for p, e in pairs if p.stem in wanted]
    try:
        interp = worker_python(python, jax_version, venv_python, log=lambda s: click.echo(s, err=True))
    except ProvisionError as e:
        _fail(str(e))
    try:
        runner = Runner(python=interp)
    except WorkerError as e:
        _fail(str(e))
    release = str(runner.caps.get("jax_version"))
    if record and not VERSION.fullmatch(release):
        runner.close()
        _fail(f"jax {release[:40]} is not a release (X.Y.Z): --record keeps verdicts of releases only; "
              f"replay without --record")
    changed = 0
    counts: dict = {}
    try:
        click.echo(f"replaying {len(pairs)} entries on JAX {release}" + (" (recording the verdicts)" if record else ""))
        click.echo(_replay_row("entry", "status", f"recorded on {release}", f"verdict on {release}", "first affected",
                               "last affected", ""))
        for path, entry in pairs:
            r = replay_entry(entry, runner, str(path))
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
            releases = entry.get("releases")
            if record:
                releases = with_verdict(releases, release, of_replay(r, runner.caps))
                try:
                    write_entry(path, {**entry, "releases": releases})
                except (CorpusError, OSError) as e:
                    _fail(f"cannot write {path} ({e}); the entry is unchanged")
            changed += not r.ok
            ranges = (releases or {}).get("affected") or []
            mark = ("CHANGED, recorded" if record else "CHANGED") if not r.ok else ""
            click.echo(_replay_row(path.stem, entry["status"], r.expected or "-", r.verdict,
                                   ranges[0][0] if ranges else "-", ranges[-1][1] if ranges else "-", mark)
                       + (f"  {r.why[:100]}" if r.why and r.verdict != "reproduces" else ""))
    finally:
        runner.close()
    click.echo(", ".join(f"{n} {v}" for v, n in sorted(counts.items())) + f"; {changed} changed"
               + (f"; verdicts recorded in {len(pairs)} entries" if record else ""))
    sys.exit(1 if changed and not record else 0)


def _replay_row(entry: str, status: str, recorded: str, verdict: str, first: str, last: str, mark: str) -> str:
    """One line of ``shardfuzz replay``'s table (fixed-width columns)."""
    return f"{entry:<34} {status:<6} {recorded:<20} {verdict:<20} {first:<14} {last:<13} {mark}".rstrip()


def _register() -> None:
    """Commands that live in their own modules."""
    from fuzz.bisection import bisect
    from fuzz.export import export
    from fuzz.maintain import reduce_command

    from fuzz.distributed import status
    from fuzz.duplicates import duplicates, link_command

    for command in (export, bisect, reduce_command, status, duplicates, link_command):
        main.add_command(command)


_register()

if __name__ == "__main__":  # pragma: no cover
    main()
