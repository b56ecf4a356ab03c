"""``shardfuzz`` command line: run a campaign, show progress and a summary of distinct findings.

Exit codes: 0 nothing found, 1 something found, 2 bad input (one line on stderr says
what is wrong and what to do).
"""
from __future__ import annotations

import json
import os
import sys
import time

import click

from fuzz import __version__
from fuzz.util import atomic_write_text, check_environment, unsupported


def _fail(msg: str) -> None:
    click.echo(f"shardfuzz: {msg}", err=True)
    sys.exit(2)


@click.group()
@click.version_option(__version__, prog_name="shardfuzz")
def main() -> None:
    """shardfuzz: a fuzzer for JAX's sharding transforms (jit, shard_map, vmap, grad, io_callback)."""


@main.command()
@click.option("--time", "seconds", type=click.FloatRange(min=1), default=600, show_default=True,
              help="Stop generating after this many seconds (a shrink in progress may finish).")
@click.option("--max-examples", type=click.IntRange(min=1), default=None, help="Stop after this many programs.")
@click.option("--seed", type=int, default=None, help="Hypothesis seed, for a repeatable campaign.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None,
              help="Write the JSON report here.")
@click.option("--python", "python", default=None, help="Interpreter whose JAX the workers use.")
@click.option("--jax-version", default=None, help="Fuzz this released JAX (X.Y.Z) in a cached venv.")
@click.option("--determinism/--no-determinism", default=True, show_default=True,
              help="Lower every program in a second process with another hash seed and compare.")
@click.option("--database", default=".shardfuzz/examples", show_default=True,
              help="Hypothesis example database directory ('' for none).")
@click.option("--timeout", type=click.FloatRange(min=1), default=None,
              help="Seconds a program may run before it is a hang (default: scaled to the program).")
def run(seconds, max_examples, seed, report_path, python, jax_version, determinism, database, timeout):
    """Run a fuzzing campaign against JAX on 8 host CPU devices."""
    from rich.console import Console

    console = Console(stderr=True)
    check_environment()
    if report_path:
        d = os.path.dirname(os.path.abspath(report_path))
        if not os.path.isdir(d) or not os.access(d, os.W_OK):
            _fail(f"cannot write the report to {report_path}: {d} is not a writable directory; choose another --report")
    from fuzz.campaign import Campaign
    from fuzz.execute import WorkerError

    if jax_version and python:
        _fail("give either --python or --jax-version, not both")
    if jax_version:
        from fuzz.provision import ProvisionError, interpreter

        try:
            with console.status(f"preparing a venv with JAX {jax_version}…"):
                python = interpreter(jax_version, log=console.print)
        except ProvisionError as e:
            _fail(str(e))
    with console.status("starting JAX workers…"):
        try:
            campaign = Campaign(seconds=seconds, max_examples=max_examples, seed=seed, python=python,
                                database=database or None, timeout=timeout, determinism=determinism)
        except WorkerError as e:
            _fail(f"{e} Pass --python with an interpreter that has jax installed.")
    problem = unsupported(campaign.caps)
    if problem:
        campaign.close()
        _fail(problem)
    console.print(f"shardfuzz: JAX {campaign.caps['jax_version']} (jaxlib {campaign.caps['jaxlib_version']}), "
                  f"{campaign.caps['n_devices']} host CPU devices")
    report = _run_with_progress(campaign, console, seconds, max_examples)
    if report_path:
        atomic_write_text(report_path, json.dumps(report, indent=1, default=str))
    _summary(report, console)
    sys.exit(1 if report["findings"] else 0)


def _run_with_progress(campaign, console, seconds, max_examples) -> dict:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    total = max_examples if max_examples else seconds
    progress = Progress(TextColumn("[bold]fuzzing"), BarColumn(), TimeElapsedColumn(),
                        TextColumn("{task.fields[programs]} programs, {task.fields[rate]:.2f}/s, "
                                   "{task.fields[findings]} findings"), console=console, transient=False)

    def update(c):
        elapsed = time.monotonic() - c.start
        done = c.stats.generated if max_examples else min(elapsed, seconds)
        progress.update(task, completed=done, programs=c.stats.programs, rate=c.stats.programs / max(elapsed, 1e-9),
                        findings=len(c.records))

    with progress:
        task = progress.add_task("fuzz", total=total, programs=0, rate=0.0, findings=0)
        campaign.on_progress = update
        try:
            report = campaign.run()
        except KeyboardInterrupt:
            console.print("interrupted: writing what was found so far")
            report = campaign.report()
        finally:
            campaign.close()
        update(campaign)
    return report


def _summary(report: dict, console) -> None:
    from rich.syntax import Syntax
    from rich.table import Table

    console.print(f"{report['programs']} programs in {report['seconds']:.0f} s "
                  f"({report['programs_per_second']:.2f}/s), {report['rejected']} raised in JAX, "
                  f"{report['invalid']} invalid (generator bugs)")
    if not report["findings"]:
        console.print("[green]no findings[/green]")
        return
    table = Table(title=f"{len(report['findings'])} distinct findings")
    for col in ("#", "oracle", "kind", "message", "hits", "first at"):
        table.add_column(col)
    for i, f in enumerate(report["findings"], 1):
        table.add_row(str(i), f["oracle"], f["kind"].split(".")[-1], f["message"].splitlines()[0][:90] if f["message"] else "",
                      str(f["count"]), f"{f['first_seconds']:.0f} s")
    console.print(table)
    for i, f in enumerate(report["findings"], 1):
        console.rule(f"finding {i}: {f['signature'][:100]}")
        console.print(Syntax(_short_source(f["source"]), "python", line_numbers=False))
        if f["details"]:
            console.print(f["details"][-800:], markup=False, highlight=False)


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
def save(report_path, indexes, triage, corpus_dir):
    """Save findings of a campaign report as corpus entries (status open).

    All or nothing: every chosen finding is validated (schema, typing rules, an oracle
    about JAX) before any file is written. A report is untrusted input.
    """
    from fuzz.program import CorpusError, entries_from_report, save_entries

    try:
        with open(report_path) as f:
            report = json.load(f)
        entries = entries_from_report(report, indexes, triage, report_path)
        for path, what in save_entries(corpus_dir, entries, triage):
            click.echo(f"{path}: {what}")
    except OSError as e:
        _fail(f"cannot read {report_path} ({e.strerror}); pass a report written by 'shardfuzz run --report'")
    except (ValueError, RecursionError) as e:  # json.JSONDecodeError and CorpusError are ValueErrors
        msg = str(e) if isinstance(e, CorpusError) else f"{report_path} is not a JSON report ({e})"
        _fail(" ".join(msg.split())[:300])


@main.command()
@click.option("--corpus", "corpus_dir", default="corpus", show_default=True, type=click.Path(file_okay=False))
@click.option("--python", "python", default=None, help="Interpreter whose JAX the workers use.")
def replay(corpus_dir, python):
    """Replay the corpus on this JAX: reproduces / does not / not applicable, per entry.

    Exit 1 when an entry's status no longer holds on the release it was recorded on
    (an open entry that stopped reproducing, a fixed one that came back); 2 when there
    is nothing to replay or an entry is not valid.
    """
    from pathlib import Path

    from fuzz.execute import WorkerError
    from fuzz.program import CorpusError, corpus_files
    from fuzz.replay import replay_entry
    from fuzz.runner import Runner

    if not Path(corpus_dir).is_dir():
        _fail(f"no corpus directory at {os.path.abspath(corpus_dir)}; run from the repository root or pass --corpus")
    try:
        pairs = corpus_files(corpus_dir)
    except CorpusError as e:
        _fail(str(e))
    if not pairs:
        _fail(f"{os.path.abspath(corpus_dir)} holds no corpus entries (*.json); nothing to replay")
    try:
        runner = Runner(python=python)
    except WorkerError as e:
        _fail(str(e))
    changed = 0
    try:
        click.echo(f"replaying {len(pairs)} entries on JAX {runner.caps.get('jax_version')}")
        for path, entry in pairs:
            r = replay_entry(entry, runner, str(path))
            changed += not r.ok
            mark = "" if r.ok else "  CHANGED"
            where = "recorded release" if r.recorded_release else f"recorded on {entry['jax_version']}"
            click.echo(f"{path.name}: {r.verdict} ({entry['status']}, {where}){mark}"
                       + (f": {r.why[:120]}" if r.why else ""))
    finally:
        runner.close()
    sys.exit(1 if changed else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
