"""``shardfuzz export``: a finding as ``repro.py`` and ``ISSUE.md``, checked in a fresh process first.

The input is a corpus entry or a campaign report (``--finding N``); both are untrusted
(they arrive by pull request or mail): the entry is validated by fuzz.program.load_entry,
a report finding's program (and history) by fuzz.program.validate_program, and the repro
is rendered again from the program (a report's ``source`` field is never used).

Self-verification: ``repro.py`` runs in a fresh process under the JAX the finding was
recorded on (this interpreter when its jax matches the entry's ``jax_version``; else
``--python`` or ``--jax-version``, see fuzz.provision) with ``JAX_TRACEBACK_FILTERING=off``,
and must show the same finding (see :func:`judge_run`); otherwise nothing is written and
the command exits 2 with one line saying why.

``ISSUE.md`` follows the layout of JAX's GitHub bug report form: a title, a
"Description" (what happens, what was expected and why the program is valid, the repro,
the observed output, the affected releases from ``shardfuzz bisect``) and "System info"
(``jax.print_environment_info()`` of the interpreter that ran the repro).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click

from fuzz.provision import installed_jax_version  # noqa: F401 (the jax installed here; tests import it from here)
from fuzz.render import release_caps
from fuzz.repro import BUG_MARK, CALLBACKS_MARK, render_repro
from fuzz.typecheck import transform_name
from fuzz.util import hide_install_path
from fuzz.verdicts import newest_reproducing
from oracles.internal_error import JAXPR_MARK

PER_CALL = ("internal-error", "differential", "callbacks", "metamorphic", "determinism")
STARTUP_SECONDS = 120.0  # importing JAX on a loaded 2-core machine
CALL_SECONDS = 60.0  # per call of the repro (compiles included)

# Runs a repro as `python repro.py` would, and records the exception that ended it
# (type as module.QualName, message, traceback: the fields of fuzz/worker.py's error_record).
_RUN = r'''
import json, runpy, sys, traceback
path, record = sys.argv[1], sys.argv[2]
sys.argv = [path]
try:
    runpy.run_path(path, run_name="__main__")
except Exception as e:
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next  # print the traceback from the repro's own frame, as python repro.py does
    traceback.print_exception(type(e), e, tb or e.__traceback__)
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    with open(record, "w") as f:  # (frames: every frame's file and function, for the phase it was raised in)
        json.dump({"type": type(e).__module__ + "." + type(e).__qualname__, "message": str(e),
                   "traceback": text[-4000:],
                   "frames": [[fr.filename, fr.name] for fr in traceback.extract_tb(e.__traceback__)]}, f)
    sys.exit(1)
'''

# Prints the worker's capabilities (the API differences render_repro needs) and
# jax.print_environment_info() of an interpreter, as one JSON object.
_PROBE = r'''
import contextlib, importlib.util, io, json, sys
spec = importlib.util.spec_from_file_location("shardfuzz_worker", sys.argv[1])  # (not on sys.path: no shadowing)
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)
capabilities = worker.capabilities
import jax
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    jax.print_environment_info()
try:  # the release's default SPMD partitioner (None: a release without the flag, GSPMD only)
    shardy = bool(jax.config.jax_use_shardy_partitioner)
except AttributeError:
    shardy = None
print(json.dumps({"caps": capabilities(jax), "info": buf.getvalue(), "shardy": shardy}))
'''

# (title, address, what it says) of the JAX documentation for each feature of a program
# (fuzz.features): why a program using it is valid.
DOCS = {
    "shard_map": ("Manual parallelism with shard_map", "https://docs.jax.dev/en/latest/notebooks/shard_map.html",
                  "shard_map maps a function over blocks of its arguments cut by `in_specs`; a result must name in "
                  "`out_specs` every manual mesh axis it varies over; collectives may name any manual axis"),
    "partial_manual": ("jax.shard_map", "https://docs.jax.dev/en/latest/_autosummary/jax.shard_map.html",
                       "`axis_names` makes the body manual over those mesh axes only, the others stay automatic"),
    "check_vma_off": ("jax.shard_map", "https://docs.jax.dev/en/latest/_autosummary/jax.shard_map.html",
                      "`check_vma=False` turns off the check of varying manual axes"),
    "vmap": ("jax.vmap", "https://docs.jax.dev/en/latest/_autosummary/jax.vmap.html",
             "`in_axes` / `out_axes` choose the mapped dimension of each argument and result (None: not mapped)"),
    "pmap": ("jax.pmap", "https://docs.jax.dev/en/latest/_autosummary/jax.pmap.html",
             "pmap maps f over argument axes like vmap (its docstring: 'Semantically it is comparable to vmap'), "
             "one device per index; since jax 0.8.0 it is jax.jit of jax.shard_map over a mesh of its own "
             "(https://docs.jax.dev/en/latest/migrate_pmap.html)"),
    "vmap_axis_name": ("jax.vmap", "https://docs.jax.dev/en/latest/_autosummary/jax.vmap.html",
                       "`axis_name` names the mapped axis so that collectives (psum, all_gather, all_to_all, "
                       "axis_index, ...) can refer to it"),
    "spmd_axis_name": ("jax.vmap", "https://docs.jax.dev/en/latest/_autosummary/jax.vmap.html",
                       "`spmd_axis_name` names a mesh axis over which the mapped dimension is sharded; it does not "
                       "change values"),
    "grad": ("jax.grad", "https://docs.jax.dev/en/latest/_autosummary/jax.grad.html",
             "grad of a scalar-valued function; the shard_map tutorial's autodiff section covers grad through "
             "shard_map"),
    "value_and_grad": ("jax.value_and_grad", "https://docs.jax.dev/en/latest/_autosummary/jax.value_and_grad.html",
                       "value and gradient of a scalar-valued function"),
    "io_callback": ("jax.experimental.io_callback",
                    "https://docs.jax.dev/en/latest/_autosummary/jax.experimental.io_callback.html",
                    "calls an impure host function (`ordered=True` keeps the calls in program order); the "
                    "External callbacks guide (https://docs.jax.dev/en/latest/external-callbacks.html) says callbacks "
                    "work under jit, vmap and grad"),
    "collective": ("jax.lax parallel operators", "https://docs.jax.dev/en/latest/jax.lax.html#parallel-operators",
                   "psum, pmax, pmin, pmean, all_gather, psum_scatter, ppermute, all_to_all and axis_index over any "
                   "axis name bound by an enclosing shard_map or vmap; `all_gather(..., to='invarying')` gives a "
                   "result invariant over a shard_map's manual axis (its transpose is a dynamic_slice); a ppermute "
                   "index that no (source, destination) pair sends to gets zeros"),
    "explicit_mesh": ("Explicit sharding", "https://docs.jax.dev/en/latest/notebooks/explicit-sharding.html",
                      "a mesh with `AxisType.Explicit` axes, used with `jax.set_mesh` and `jax.sharding.reshard`"),
    "auto_axes": ("Explicit sharding: auto_axes", "https://docs.jax.dev/en/latest/notebooks/explicit-sharding.html",
                  "`jax.sharding.auto_axes(f, out_sharding=...)` runs f with the mesh's axes in Auto mode (the "
                  "compiler chooses the shardings inside) and gives its results `out_sharding`; it does not change "
                  "values"),
    "enable_checks": ("jax.enable_checks", "https://docs.jax.dev/en/latest/_autosummary/jax.enable_checks.html",
                      "`jax_enable_checks` turns on invariant checking for JAX internals (e.g. every jaxpr a "
                      "transform builds is type-checked); a valid program must pass those checks"),
    "jit": ("jax.jit", "https://docs.jax.dev/en/latest/_autosummary/jax.jit.html",
            "jit does not change what a function computes"),
    "jit_shardings": ("jax.jit in_shardings / out_shardings", "https://docs.jax.dev/en/latest/_autosummary/jax.jit.html",
                      "`in_shardings` / `out_shardings` give the shardings of a jitted function's arguments and "
                      "results; they change where values live, not what the function computes"),
    "checkpoint": ("jax.checkpoint", "https://docs.jax.dev/en/latest/_autosummary/jax.checkpoint.html",
                   "checkpoint (remat) does not change what a function computes; its `policy` "
                   "(`jax.checkpoint_policies`) only chooses which intermediate values are saved for the backward "
                   "pass instead of recomputed"),
    "lax_map": ("jax.lax.map", "https://docs.jax.dev/en/latest/_autosummary/jax.lax.map.html",
                "`lax.map(f, xs)` applies f to each slice of xs along its leading axis and stacks the results "
                "along the leading axis, like vmap, as a loop (a scan)"),
    "scan": ("jax.lax.scan", "https://docs.jax.dev/en/latest/_autosummary/jax.lax.scan.html",
             "`lax.scan(f, init, xs)` loops f over the leading axis of xs, threading the carry from one step "
             "to the next, and stacks the per-step outputs along the leading axis"),
    "vjp": ("jax.vjp", "https://docs.jax.dev/en/latest/_autosummary/jax.vjp.html",
            "`jax.vjp(f, *primals)` returns f's outputs and the pullback, the transposed linear map of the "
            "derivative applied to cotangents"),
    "jvp": ("jax.jvp", "https://docs.jax.dev/en/latest/_autosummary/jax.jvp.html",
            "`jax.jvp(f, primals, tangents)` returns f's outputs and the derivative applied to the tangents"),
    "linearize": ("jax.linearize", "https://docs.jax.dev/en/latest/_autosummary/jax.linearize.html",
                  "`jax.linearize(f, *primals)` returns f's outputs and the linear map of jax.jvp at the primals"),
    "jacrev": ("jax.jacrev", "https://docs.jax.dev/en/latest/_autosummary/jax.jacrev.html",
               "the Jacobian of f with respect to argument `argnums`, by reverse mode: shape out.shape + arg.shape"),
    "jacfwd": ("jax.jacfwd", "https://docs.jax.dev/en/latest/_autosummary/jax.jacfwd.html",
               "the Jacobian of f with respect to argument `argnums`, by forward mode: shape out.shape + arg.shape"),
    "cond": ("jax.lax.cond", "https://docs.jax.dev/en/latest/_autosummary/jax.lax.cond.html",
             "`lax.cond(pred, true_fun, false_fun, *operands)` applies one of the two functions; under vmap a "
             "batched predicate selects per example"),
    "fori_loop": ("jax.lax.fori_loop", "https://docs.jax.dev/en/latest/_autosummary/jax.lax.fori_loop.html",
                  "`fori_loop(lower, upper, body, init)` applies `body(i, carry)` for i in [lower, upper); with a "
                  "static trip count it is reverse-differentiable"),
    "while_loop": ("jax.lax.while_loop", "https://docs.jax.dev/en/latest/_autosummary/jax.lax.while_loop.html",
                   "`while_loop(cond, body, init)` applies body while cond holds; forward-mode differentiable"),
    "custom_vjp": ("jax.custom_vjp", "https://docs.jax.dev/en/latest/_autosummary/jax.custom_vjp.html",
                   "a function with a custom reverse-mode rule (`defvjp(fwd, bwd)`); bwd may return None for a "
                   "zero cotangent"),
    "custom_jvp": ("jax.custom_jvp", "https://docs.jax.dev/en/latest/_autosummary/jax.custom_jvp.html",
                   "a function with a custom forward-mode rule (`defjvp`), transposed for reverse mode"),
    "pure_callback": ("jax.pure_callback", "https://docs.jax.dev/en/latest/_autosummary/jax.pure_callback.html",
                      "calls a pure host function whose result JAX may use; `vmap_method` says how it is batched; "
                      "JAX may elide or repeat calls"),
    "debug_callback": ("jax.debug.callback", "https://docs.jax.dev/en/latest/_autosummary/jax.debug.callback.html",
                       "calls a host function for its side effect, with the values it gets, under every transform"),
    "debug_print": ("jax.debug.print", "https://docs.jax.dev/en/latest/_autosummary/jax.debug.print.html",
                    "prints traced values at run time, under every transform"),
    "with_sharding_constraint": ("jax.lax.with_sharding_constraint",
                                 "https://docs.jax.dev/en/latest/_autosummary/jax.lax.with_sharding_constraint.html",
                                 "constrains the sharding of an intermediate value; it does not change the value"),
    "device_put": ("jax.device_put", "https://docs.jax.dev/en/latest/_autosummary/jax.device_put.html",
                   "places a value with a sharding; under jit it acts as a sharding annotation and does not change "
                   "the value"),
    "reduce_window": ("jax.lax.reduce_window", "https://docs.jax.dev/en/latest/_autosummary/jax.lax.reduce_window.html",
                      "reduces each window of the (base-dilated, padded) operand with `computation` from "
                      "`init_value`: XLA's ReduceWindow (https://openxla.org/xla/operation_semantics#reducewindow), "
                      "where padding and dilation holes hold the init value"),
    "conv_general_dilated": ("jax.lax.conv_general_dilated",
                             "https://docs.jax.dev/en/latest/_autosummary/jax.lax.conv_general_dilated.html",
                             "a general convolution (a correlation: the kernel is not flipped) with strides, "
                             "padding, lhs / rhs dilation and feature groups (feature_group_count): XLA's Conv "
                             "(https://openxla.org/xla/operation_semantics#conv)"),
    "einsum": ("jax.numpy.einsum", "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.einsum.html",
               "Einstein summation as numpy.einsum defines it: a label in both operands and the result is a batch "
               "dim, in both operands only a contracted (summed) dim"),
    "fft": ("jax.numpy.fft.fft", "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.fft.fft.html",
            "the one-dimensional discrete Fourier transform along `axis`, as numpy.fft.fft computes it; JAX "
            "lowers it to XLA's Fft (https://openxla.org/xla/operation_semantics#fft) of the moved-last dim"),
    "top_k": ("jax.lax.top_k", "https://docs.jax.dev/en/latest/_autosummary/jax.lax.top_k.html",
              "the `k` largest entries along `axis` and their indices; 'If two elements are equal, the "
              "lower-index element appears first'"),
    "dtypes": ("Type promotion semantics", "https://docs.jax.dev/en/latest/type_promotion.html",
               "binary operations on operands of one dtype keep that dtype; `astype` converts between dtypes"),
}
_COLLECTIVES = ("psum", "pmax", "pmin", "pmean", "all_gather", "all_gather_invariant", "psum_scatter", "ppermute",
                "all_to_all", "axis_index")


class ExportError(Exception):
    """Export cannot go on: a one-line reason and what to do (the command exits 2)."""


@dataclass
class Case:
    """One finding to export: its program, what it showed, and where it was recorded."""

    name: str  # file stem for the default output directory
    oracle: str
    kind: str
    message: str
    signature: str
    call: int | None
    program: dict
    history: list
    jax_version: str
    releases: dict | None = None  # its per-release verdicts (fuzz/verdicts.py)
    upstream: tuple = ()  # public reports of its root cause (addresses checked by fuzz.program.validate_entry)
    related: tuple = ()  # corpus entries (file stems) triage linked as possibly the same bug (fuzz/duplicates.py)


@dataclass
class Run:
    """A verification run of repro.py: exit status, output, the exception that ended it (or None), seconds."""

    returncode: int
    stdout: str
    stderr: str
    error: dict | None
    seconds: float
    path: str = ""  # where repro.py ran (messages that name a source location name it)


# ------------------------------------------------------------------------------ loading

def load_case(path: str, finding: int | None) -> Case:
    """The finding of a corpus entry file, or finding ``finding`` (1-based) of a report file.

    Raises ExportError (one line) for an unreadable file, an invalid entry, a report
    without that finding, or a finding whose program is not valid.
    """
    from fuzz.program import REPORT_WORDS, CorpusError, load_entry, validate_program
    from fuzz.typecheck import ProgramError

    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise ExportError(f"cannot read {path} ({e.strerror}); pass a corpus entry or a report file") from None
    except (ValueError, RecursionError) as e:
        raise ExportError(f"{path} is not JSON ({' '.join(str(e).split())[:100]}); pass a corpus entry or "
                          f"{REPORT_WORDS}") from None
    if isinstance(data, dict) and data.get("format") == "shardfuzz-corpus-entry":
        if finding is not None:
            raise ExportError(f"{path} is a corpus entry (one finding): drop --finding")
        try:
            entry = load_entry(path)
        except CorpusError as e:
            raise ExportError(str(e)) from None
        return Case(Path(path).stem, entry["oracle"], entry["kind"], entry["message"], entry["signature"],
                    entry.get("call"), entry["program"], entry.get("history", []), entry["jax_version"],
                    entry.get("releases"), tuple(entry.get("upstream", ())), tuple(entry.get("related", ())))
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise ExportError(f"{path} is neither a corpus entry nor a report (no findings list)")
    findings = data["findings"]
    if not findings:
        raise ExportError(f"{path} is a report without findings: nothing to export")
    if finding is None:
        raise ExportError(f"{path} is a report with {len(findings)} findings: pass --finding N (1 to {len(findings)})")
    if not 1 <= finding <= len(findings):
        raise ExportError(f"{path} has {len(findings)} findings; --finding {finding} is out of range")
    f = findings[finding - 1]
    where = f"{path}: finding {finding}"
    if not isinstance(f, dict):
        raise ExportError(f"{where} is not an object; pass {REPORT_WORDS}")
    fields = {"oracle": str, "kind": str, "message": str, "signature": str}
    for key, typ in fields.items():
        if not isinstance(f.get(key), typ):
            raise ExportError(f"{where} has no {key}; pass {REPORT_WORDS}")
    call = f.get("call")
    if call is not None and (isinstance(call, bool) or not isinstance(call, int)):
        raise ExportError(f"{where}: call {str(call)[:20]!r} is not an index")
    history = f.get("history_programs") or []
    if f["oracle"] in ("crash", "hang") and f.get("history") and not history:
        raise ExportError(f"{where} needs {len(f['history'])} earlier program(s) that the report does not hold as "
                          f"programs; save it with 'shardfuzz save' and export the entry")
    version = data.get("jax_version")
    try:
        for p in [f.get("program")] + list(history):
            validate_program(p, release_caps(version))  # (typed under the rules of the release it ran on)
    except ProgramError as e:
        raise ExportError(f"{where}: invalid program ({' '.join(str(e).split())[:200]})") from None
    if not isinstance(version, str):
        raise ExportError(f"{path} does not say which jax_version it ran; pass {REPORT_WORDS}")
    return Case(f"{Path(path).stem}-finding-{finding}", f["oracle"], f["kind"], f["message"], f["signature"], call,
                f["program"], list(history), version)


# ------------------------------------------------------------------------------ interpreters

def choose_interpreter(case: Case, python: str | None, jax_version: str | None, log=None,
                       venv_python: str | None = None) -> str:
    """The interpreter that verifies the repro: ``python``, a venv with ``jax_version`` (made with
    ``venv_python`` if it fits), or this one (fuzz.provision.worker_python decides).

    Raises ExportError when both are given, when the version cannot be installed, or
    when neither is given and this interpreter's jax is not the one the finding was
    recorded on.
    """
    from fuzz.provision import ProvisionError, worker_python

    try:
        return worker_python(python, jax_version, venv_python, log=log, recorded=case.jax_version)
    except ProvisionError as e:
        raise ExportError(str(e)) from None


def _env(traceback_off: bool = False, xla_flags: tuple = (), extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the repro must not see shardfuzz
    env.update(extra or {})
    env["XLA_FLAGS"] = " ".join([f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
                                + ["--xla_force_host_platform_device_count=8", *xla_flags])
    env["JAX_PLATFORMS"] = "cpu"
    if traceback_off:
        env["JAX_TRACEBACK_FILTERING"] = "off"  # keep JAX's frames: the signature names the one that raised
    return env


def probe(python: str) -> tuple:
    """(capabilities, ``jax.print_environment_info()`` text) of an interpreter; ExportError if it has no JAX.

    The capabilities also carry ``shardy_default``: whether the release partitions with Shardy
    by default (``jax_use_shardy_partitioner``), None for a release without that flag.
    """
    worker = str(Path(__file__).with_name("worker.py"))
    try:
        r = subprocess.run([python, "-c", _PROBE, worker], capture_output=True, text=True, env=_env(),
                           timeout=STARTUP_SECONDS, cwd=tempfile.gettempdir())
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ExportError(f"cannot run {python} ({type(e).__name__}); pass --python with a working interpreter") \
            from None
    try:
        data = json.loads(r.stdout.strip().splitlines()[-1])
        return {**data["caps"], "shardy_default": data.get("shardy")}, data["info"]
    except (ValueError, IndexError, KeyError, TypeError):
        last = (r.stderr.strip().splitlines() or ["no output"])[-1][:150]
        raise ExportError(f"{python} cannot import jax ({last}); pass --python with an interpreter that has jax") \
            from None


def locate_call(case: Case, python: str) -> int | None:
    """The index of the call that shows the finding, found by running the program (Runner) once.

    Needed for entries saved without ``call``. Raises ExportError when the program does
    not show the finding there.
    """
    from fuzz.execute import WorkerError
    from fuzz.runner import Runner

    try:
        runner = Runner(python=python, determinism=case.oracle == "determinism")
    except WorkerError as e:
        raise ExportError(str(e)) from None
    try:
        found, _ = runner.run(case.program)
    finally:
        runner.close()
    for f in found:
        if f.signature == case.signature:
            return f.call
    seen = "; ".join(sorted({f.signature[:90] for f in found})) or "no finding"
    raise ExportError(f"the program no longer shows its finding on jax {runner.caps.get('jax_version')} "
                      f"(saw: {seen}); mark the entry fixed or re-save it")


# ------------------------------------------------------------------------------ verification

def run_repro(source: str, python: str, timeout: float, xla_flags: tuple = (), env: dict | None = None) -> Run:
    """Run ``source`` as repro.py in a fresh process (a temporary directory, JAX_TRACEBACK_FILTERING=off,
    ``xla_flags`` added to XLA_FLAGS, ``env`` added to the environment)."""
    with tempfile.TemporaryDirectory(prefix="shardfuzz-export-") as d:
        path = os.path.join(d, "repro.py")
        record = os.path.join(d, "error.json")
        Path(path).write_text(source)
        t0 = time.perf_counter()
        try:
            r = subprocess.run([python, "-c", _RUN, path, record], capture_output=True, text=True, cwd=d,
                               env=_env(traceback_off=True, xla_flags=xla_flags, extra=env), timeout=timeout)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            return Run(-9, out, err + f"\n(killed after {timeout:.0f} s)", None, time.perf_counter() - t0, path)
        error = json.loads(Path(record).read_text()) if os.path.exists(record) else None
        return Run(r.returncode, r.stdout, r.stderr, error, time.perf_counter() - t0, path)


# the passes that split the program over the devices (XLA's dump names, jax 0.10.2 on CPU)
PARTITIONER_PASSES = frozenset({"shardy-xla", "spmd-partitioning", "spmd-partitioner", "sharding-propagation"})
# a pass name as XLA's per-pass dump files spell it ("...after_algsimp.before_simplify-sorts.txt")
_PASS_FILE = re.compile(r"\.after_([A-Za-z0-9_-]{1,80})\.before_")


def changing_passes(source: str, python: str, timeout: float) -> list:
    """Names of the XLA HLO passes that changed the repro's modules, sorted (none when XLA compiled nothing).

    Read from the file names of XLA's per-pass dump (``--xla_dump_to``,
    ``--xla_dump_hlo_pass_re=.*``: a module is dumped after each pass that changed it).
    """
    with tempfile.TemporaryDirectory(prefix="shardfuzz-passes-") as d:
        run_repro(source, python, timeout, ("--xla_dump_to=" + d, "--xla_dump_hlo_pass_re=.*"))
        names = {m.group(1) for f in os.listdir(d) if (m := _PASS_FILE.search(f))}
    return sorted(names - {"pipeline-start", "pipeline-end"})


def implicated_passes(source: str, python: str, timeout: float, log=lambda s: None) -> tuple:
    """(passes tried, passes without which the repro no longer shows the finding).

    Each XLA pass that changed the program is switched off on its own
    (``--xla_disable_hlo_passes=NAME``, XLA's debug option) and the repro run again: a
    pass is implicated when the run then exits 0 (JAX behaves) — not when it fails
    otherwise (some passes cannot be left out). A pass implicated alone points the report
    at XLA and at that pass; none says the bug needs no single pass (or is JAX's own).
    """
    from concurrent.futures import ThreadPoolExecutor

    names = changing_passes(source, python, timeout)
    log(f"switching off each of the {len(names)} XLA passes that changed the program…")

    def clears(name: str) -> bool:
        return run_repro(source, python, timeout, ("--xla_disable_hlo_passes=" + name,)).returncode == 0
    with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        cleared = list(pool.map(clears, names))
    return names, [n for n, c in zip(names, cleared) if c]


def other_partitioner(source: str, python: str, timeout: float, shardy_default: bool | None) -> tuple | None:
    """(the release's default SPMD partitioner, the other one, whether the finding disappears with the other).

    The repro is run once more with ``JAX_USE_SHARDY_PARTITIONER`` flipped (JAX's config
    flag ``jax_use_shardy_partitioner``: Shardy is the default from jax 0.7.0, GSPMD before;
    jax/_src/config.py). None for a release without the flag (GSPMD only). The finding
    disappears when that run exits 0 (JAX behaves), not when it fails otherwise.
    """
    if shardy_default is None:
        return None
    default, other = ("Shardy", "GSPMD") if shardy_default else ("GSPMD", "Shardy")
    run = run_repro(source, python, timeout, env={"JAX_USE_SHARDY_PARTITIONER": str(not shardy_default).lower()})
    return default, other, run.returncode == 0


def _partitioner_text(partitioner: tuple | None) -> list:
    if partitioner is None:
        return []
    default, other, cleared = partitioner
    head = (f"With the other SPMD partitioner ({other} instead of {default}, the default here: "
            f"`JAX_USE_SHARDY_PARTITIONER={str(other == 'Shardy').lower()}`) the finding")
    return [f"{head} disappears: {default}'s partitioning of the program is implicated." if cleared else
            f"{head} stays (or the program fails otherwise): it is not specific to {default}.", ""]


def _passes_text(passes: tuple | None, partitioner: tuple | None = None) -> list:
    """The "XLA passes" lines of ISSUE.md (none when not asked for); ``partitioner``: :func:`other_partitioner`'s."""
    if passes is None:
        return []
    tried, implicated = passes
    if not tried:
        head = "No XLA pass changed the program: the finding shows before XLA optimizes anything (in JAX)."
    elif implicated:
        head = (f"The finding needs each of these XLA passes: switched off alone "
                f"(`XLA_FLAGS=--xla_disable_hlo_passes=NAME`), each makes it disappear: "
                f"{', '.join(f'`{n}`' for n in implicated)}. Switching off any other one of the {len(tried)} passes "
                f"that changed the program leaves it. The miscompiling pass is among these (with those that build "
                f"what it rewrites).")
        if set(implicated) <= PARTITIONER_PASSES:
            head += (" These are the SPMD partitioner itself: without it the program is not split over the "
                     "devices, so this only says that the finding needs the partitioning.")
    else:
        why = (": see the partitioner below" if partitioner is not None and partitioner[2]
               else ", or the bug is before XLA, in JAX")
        head = (f"Switching off any one of the {len(tried)} XLA passes that changed the program leaves the finding "
                f"(no single pass is to blame{why}).")
    return ["XLA passes (`shardfuzz export --xla-passes`):", "", head, "", *_partitioner_text(partitioner)]


def judge_run(case: Case, run: Run) -> str:
    """'' when the run shows the case's finding, else what it showed instead (one line).

    internal-error: the exception's signature (oracles.internal_error.signature, from its
    type, message and traceback) equals the recorded one; crash: the same signal and fatal
    line (oracles.crash); hang: faulthandler's timeout ended it; differential, callbacks,
    metamorphic: the repro's own AssertionError (raised outside JAX; for a wrong shape, about
    a shape or the number of outputs); determinism: exit 1 with the repro's BUG line.
    """
    from fuzz.execute import signal_name
    from oracles import crash, internal_error

    err = run.error
    what = _what_happened(run)
    if case.oracle == "internal-error":
        if err is None:
            return f"repro.py {what}, not the recorded exception"
        # JAX names the source location of some errors: the worker runs the program as "<program>"
        message = err["message"].replace(run.path, "<program>") if run.path else err["message"]
        message = message or f"raised in {internal_error.raise_site(err['traceback']) or 'an unknown place'}"
        if case.message.startswith(JAXPR_MARK):  # (the repro prints the call's jaxpr)
            message = JAXPR_MARK + message
        sig = internal_error.signature(err["type"], message, err["traceback"])
        return "" if sig == case.signature else f"repro.py raised {sig[:200]!r}, not the recorded {case.signature[:200]!r}"
    if case.oracle == "crash" and case.kind == "memory":  # (the repro's watch_memory thread, fuzz.repro)
        ok = run.returncode == 1 and "Memory: resident" in run.stderr
        return "" if ok else f"repro.py {what}, its memory stayed under the recorded limit"
    if case.oracle == "crash":
        if run.returncode >= 0:
            return f"repro.py {what}, it did not die of a signal"
        found = crash.judge(case.program, {"status": "crash", "signal": signal_name(run.returncode),
                                           "stderr": run.stderr})[0]
        sig = found.signature
        if case.message.startswith("while lowering only"):
            from oracles.common import Finding

            sig = Finding(found.oracle, found.kind, f"while lowering only: {found.message}").signature
        return "" if sig == case.signature else f"repro.py died with {sig[:200]!r}, not {case.signature[:200]!r}"
    if case.oracle == "hang":
        return "" if run.returncode == 1 and "Timeout (" in run.stderr else f"repro.py {what}, it did not hang"
    if case.oracle in ("differential", "callbacks", "metamorphic"):
        if err is None or err["type"] != "builtins.AssertionError" or internal_error.raise_module(err["traceback"]):
            return f"repro.py {what}, not its own assertion"
        msg = err["message"]
        if case.oracle == "callbacks":  # (fuzz.repro's check_callbacks)
            ok = msg.startswith(CALLBACKS_MARK)
        elif case.kind == "wrong-shape":
            ok = bool(re.search(r"shape|outputs, expected", msg))
        elif case.oracle == "differential":
            ok = "Not equal to tolerance" in msg
        else:  # metamorphic: any disagreement of the two calls
            ok = bool(re.search(r"Not equal to tolerance|shape|outputs, expected", msg))
        return "" if ok else f"repro.py failed its assertion for another reason: {_line(msg)}"
    if case.oracle == "determinism":
        ok = run.returncode == 1 and any(ln.startswith(BUG_MARK) for ln in run.stdout.splitlines())
        return "" if ok else f"repro.py {what}, without its {BUG_MARK} line"
    return f"no repro for oracle {case.oracle!r}"


def _line(text: str, limit: int = 160) -> str:
    return " ".join(str(text).split())[:limit]


def _what_happened(run: Run) -> str:
    if run.error is not None:
        return f"raised {run.error['type']}: {_line(run.error['message'], 120)}"
    if run.returncode < 0:
        from fuzz.execute import signal_name

        return f"died of {signal_name(run.returncode)}"
    return f"exited with status {run.returncode}"


# ------------------------------------------------------------------------------ ISSUE.md

def _label(program: dict, k: int | None) -> str:
    if k is None:
        if len(program["calls"]) != 1:
            return " then ".join(_label(program, i) for i in range(len(program["calls"])))[:120]
        k = 0
    c = program["calls"][k]
    expr = c["function"]
    for t in reversed(c["transforms"]):
        inner = expr
        if t["kind"] == "vmap" and t.get("spmd_axis_name"):
            expr = f"vmap({inner}, spmd_axis_name={t['spmd_axis_name']!r})"
        elif t["kind"] == "shard_map" and t.get("axis_names") is not None:
            expr = f"shard_map({inner}, axis_names={set(t['axis_names'])!r})"
        elif t["kind"] == "checkpoint" and t.get("policy") is not None:
            expr = f"checkpoint({inner}, policy={t['policy']})"
        elif t["kind"] in ("map", "scan"):
            expr = f"lax.{t['kind']}({inner})"
        else:
            expr = f"{transform_name(t)}({inner})"
    return expr


def title(case: Case, run: Run | None = None) -> str:
    """The issue's one-line title (at most 100 characters, never cut mid-word): the JAX APIs of the
    failing call and what goes wrong (fuzz.issue_title.compose). ``run``: the verification run,
    whose traceback tells when an internal error was raised (tracing, lowering, compiling, ...);
    without it the raise site recorded in the finding's signature decides, or no phase is named."""
    from fuzz.issue_title import compose

    site, frames = _raise_site(case, run)
    return compose(case.program, case.call, case.oracle, case.kind, hide_install_path(case.message), site, frames)


def _raise_site(case: Case, run: Run | None) -> tuple:
    """(the raise site ``jax._src.module:function`` of an internal error's signature, or '';
    the JAX frames (path, function) of the run's traceback, outermost first, or None)."""
    from fuzz.issue_title import jax_frames

    parts = case.signature.split(": ", 3)
    site = parts[2] if case.oracle == "internal-error" and len(parts) > 3 and ":" in parts[2] else ""
    frames = None
    if run is not None and run.error:
        listed = run.error.get("frames")
        ok = isinstance(listed, list) and all(isinstance(x, list) and len(x) == 2 for x in listed)
        frames = ([(str(p), str(f)) for p, f in listed if "/jax/" in str(p) or "/jaxlib/" in str(p)]
                  if ok else jax_frames(str(run.error.get("traceback", ""))))
    return site, frames


def feature_docs(program: dict) -> list:
    """[(feature, (title, address, what it says))] for the features a program uses (fuzz.features)."""
    from fuzz.features import features

    names, _ = features(program)
    keys = []
    for key in ("jit", "shard_map", "partial_manual", "check_vma_off", "vmap", "pmap", "vmap_axis_name", "spmd_axis_name",
                "grad", "value_and_grad", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "checkpoint", "lax_map",
                "scan", "cond", "fori_loop", "while_loop", "custom_vjp", "custom_jvp", "debug_callback",
                "debug_print", "with_sharding_constraint", "device_put", "explicit_mesh", "auto_axes", "enable_checks"):
        if key in names:
            keys.append(key)
    if names & {"in_shardings", "out_shardings"}:
        keys.insert(1 if keys[:1] == ["jit"] else 0, "jit_shardings")
    if any(n.startswith("pure_callback") for n in names):  # its features name the vmap_method
        keys.append("pure_callback")
    if names & {"reduce_window_sum", "reduce_window_max"}:
        keys.append("reduce_window")
    if "conv_general_dilated" in names:
        keys.append("conv_general_dilated")
    keys += [k for k in ("einsum", "fft", "top_k") if k in names]
    if names & {"bfloat16", "float16", "int32", "bool"}:
        keys.append("dtypes")
    if any(n.startswith("io_callback") for n in names):
        keys.append("io_callback")
    if names & set(_COLLECTIVES):
        keys.append("collective")
    return [(k, DOCS[k]) for k in keys]


def _expected_text(case: Case, run: Run) -> str:
    docs = feature_docs(case.program)
    grouped: dict = {}  # one line per documentation page
    for _, (name, url, what) in docs:
        grouped.setdefault((name, url), []).append(what)
    listing = "\n".join(f"- [{name}]({url}): {'; '.join(whats)}." for (name, url), whats in grouped.items())
    others = _op_doc_links(case.program, {url for _, (_, url, _) in docs})
    if others:
        listing += ("\n" if listing else "") + "- also used as documented: " + ", ".join(others) + "."
    valid = "The program is valid: each API is used as its documentation says:\n\n" + listing
    if case.oracle == "internal-error" and case.message.startswith(JAXPR_MARK):
        return f"**Expected:** the call runs (it does) and `print(jax.make_jaxpr(f)(*args))` prints its jaxpr. {valid}"
    if case.oracle == "internal-error":
        return f"**Expected:** the call runs without error. {valid}"
    if case.oracle == "crash" and case.kind == "memory":
        return ("**Expected:** the program runs in a small part of that memory: its arrays have a few dozen "
                f"elements. {valid}")
    if case.oracle in ("crash", "hang"):
        what = "dies" if case.oracle == "crash" else "hangs"
        return (f"**Expected:** the process never {what}: at worst JAX raises a Python exception. {valid}")
    if case.oracle == "differential":
        return ("**Expected:** the values of the same computation without sharding, on whole arrays with NumPy "
                "(under a derivative: eagerly with plain jax.numpy): shard_map cuts its arguments into blocks and "
                "reassembles its results as its in_specs / out_specs say, vmap maps over the batch dimension, each "
                "collective combines the values along its named axis. Both arrays, as the repro prints them:\n\n"
                + _fenced(_arrays_printed(run)) + "\n\n" + valid)
    if case.oracle == "callbacks":
        return ("**Expected:** each host function runs and receives the values of its argument, computed without "
                "sharding (compared at each position of the argument's local block as sets of values: how often a "
                "host function runs is not specified), as the repro prints them:\n\n"
                + _fenced(_arrays_printed(run)) + "\n\n" + valid)
    if case.oracle == "metamorphic":
        return ("**Expected:** the same values from both calls: `jit` does not change what a function computes, and "
                "`spmd_axis_name` only adds a mesh axis to the sharding of the mapped dimension (jax.vmap "
                "docstring). Both outputs, as the repro prints them:\n\n" + _fenced(_arrays_printed(run)) + "\n\n"
                + valid)
    if case.oracle == "determinism":
        return ("**Expected:** the same StableHLO text in every process and after `jax.clear_caches()`: the "
                "persistent compilation cache keys on it, so a lowering that depends on Python's hash seed misses "
                "the cache in every new process.")
    return ""


_DOC_PAGE = "https://docs.jax.dev/en/latest/_autosummary/{}.html"
_DOC_NAMES = {"jax.new_ref": "jax.ref.new_ref", "jax.freeze": "jax.ref.freeze"}  # (documented in jax.ref)


def _op_doc_links(program: dict, linked: set) -> list:
    """Markdown links to the documentation page of each public ``jax.numpy`` / ``jax.lax`` /
    ``jax.random`` / ``jax.*`` function the program's ops render to (fuzz/jax_api.py ``OPS``), those
    of ``linked`` (addresses already listed) left out; JAX's API reference names each page
    ``_autosummary/<dotted name>.html``."""
    from fuzz import jax_api
    from fuzz.features import op_names
    from fuzz.issue_title import short_api

    out: dict = {}
    for op in sorted(op_names(program)):
        for req in jax_api.OPS.get(op, ()):
            kind, name = jax_api.apis(req)[0][:2]
            if kind == "module" or not re.fullmatch(r"jax\.(numpy\.|lax\.|random\.)?[a-z_]+", name) or \
                    name in ("jax.numpy.float32", "jax.numpy.float16", "jax.numpy.bfloat16", "jax.numpy.int32",
                             "jax.numpy.ndim", "jax.numpy.inf", "jax.lax.stop_gradient", "jax.typeof",
                             "jax.lax.pcast", "jax.lax.pvary", "jax.lax.all_gather_invariant"):  # (no page known)
                continue
            url = _DOC_PAGE.format(_DOC_NAMES.get(name, name))
            if url not in linked:
                out.setdefault(url, f"[{short_api(name)}]({url})")
    return list(out.values())


def _fenced(text: str, lang: str = "") -> str:
    """A Markdown code block that ``text`` (untrusted: messages, output) cannot close early."""
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def _arrays_printed(run: Run, limit: int = 40) -> str:
    lines = [ln for ln in run.stdout.splitlines() if not ln.endswith(" ran")]
    return "\n".join(lines[-limit:]).strip()


def _observed(run: Run, stdout_lines: int = 20, stderr_lines: int = 30) -> str:
    out = "\n".join(run.stdout.strip().splitlines()[-stdout_lines:])
    # (a native stack trace, "    @ 0x7f... symbol", says less than the fatal line and the Python stack)
    err_lines = [ln for ln in run.stderr.strip().splitlines() if not re.match(r"\s+@\s+0x", ln)]
    err = "\n".join(err_lines[-stderr_lines:])
    parts = [p for p in (out, err) if p]
    return ("\n".join(parts) or "(no output)") + f"\n(exit status {run.returncode})"


def _releases_text(releases, ran_on: str | None = None) -> str:
    """The "affected releases" part of ISSUE.md from an entry's ``releases`` record (untrusted:
    only X.Y.Z releases and known verdicts are printed; a malformed record says so). Only
    ``reproduces`` counts as affected (fuzz/verdicts.py); the releases that fail with another
    finding are named apart. ``ran_on``: the jax the repro was verified on, compared with the
    newest release the record says it reproduces on."""
    from fuzz.verdicts import affected_text, conclusions, newest_reproducing, normalise

    if not releases:
        return "Not checked on other releases yet."
    try:  # (derived again from what was tested: hand-edited records, records of the older form)
        r = conclusions(releases)
        tested = normalise(releases["tested"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return "The record of the releases checked is malformed: not shown."
    lines = [f"- affected releases: {affected_text(r['affected'])}"]
    before = {c["first"]: c["last"] for c in r["changes"]}
    for first, _ in r["affected"][1:]:  # fixed, then back: a regression
        lines.append(f"- affected again from {first} (a regression; last unaffected {before.get(first)})")
    for key, label in (("first_affected", "first affected release"), ("last_unaffected", "last unaffected release"),
                       ("fixed_in", "fixed in"), ("last_affected", "last affected release")):
        if r.get(key):
            lines.append(f"- {label}: {r[key]}")
    for key, label in (("fails_differently", "fails differently (another error, not counted as affected)"),
                       ("not_applicable", "not applicable (the release cannot run this program)")):
        for span in r.get(key) or ():
            when = span["from"] if span["from"] == span["to"] else f"{span['from']} to {span['to']}"
            said = _seen_words(span.get("seen") or span.get("why") or "")
            lines.append(f"- {label}: {when}" + (f": {said}" if said else ""))
    if tested:
        lines.append("- checked: " + ", ".join(f"{v}: {rec['verdict']}" for v, rec in tested.items()))
    newest = newest_reproducing(releases)
    if ran_on and newest:
        lines.append(f"- this repro was verified on jax {_line(ran_on, 40)}; the newest release checked where it "
                     f"reproduces: {newest}")
    lines.append("- releases in between are assumed to behave as the checked ones around them (the releases "
                 "where the outcome changes were checked)")
    return "\n".join(lines)


def _seen_words(seen: str, limit: int = 240) -> str:
    """What a release showed instead (a verdict record's ``seen`` or ``why``: untrusted, fuzz/verdicts.py)
    in JAX's words, as inline code: the exception and its message, the signal, the wrong values;
    '' for nothing recorded."""
    text = " ".join(str(seen).split())
    if not text:
        return ""
    m = re.match(r"(internal-error|crash|hang|differential|callbacks|metamorphic|determinism): ([\w.-]+): ?(.*)", text)
    if m:
        oracle, kind, rest = m.groups()
        message = rest
        if rest.endswith(")"):  # "signature (message)": the message is the last balanced group
            depth = 0
            for i in range(len(rest) - 1, -1, -1):
                depth += {")": 1, "(": -1}.get(rest[i], 0)
                if depth == 0:
                    message = rest[i + 1:-1] if i > 0 and rest[i - 1] == " " else rest
                    break
        text = {"internal-error": f"raises {kind.rsplit('.', 1)[-1]}: {message}",
                "crash": f"the process dies ({kind})" + ("" if "died" in message else f": {message}"),
                "hang": "the call hangs",
                "differential": "returns an output of the wrong shape" if kind == "wrong-shape" else
                "returns wrong values"}.get(oracle, f"{oracle} ({kind})")
    else:  # why a release cannot run it: the API it lacks
        text = re.sub(r"lacks an API (\w+) renders to", r"lacks the API of \1 that the repro uses", text)
        text = re.sub(r" \((?:fuzz|oracles)/[\w./]+\)", "", text)
    return "`" + _line(hide_install_path(text), limit).replace("`", "'") + "`"


def _related_lines(case: Case) -> list:
    """ISSUE.md's note naming the corpus entries linked to this one (``related``: file stems the schema's
    pattern checked), none when there are none."""
    if not case.related:
        return []
    return [f"> Possibly the same bug as {', '.join(case.related)} (findings of the same fuzzer, linked at "
            "triage): if one of them is filed already, add this repro there.", ""]


def issue_text(case: Case, source: str, run: Run, env_info: str, jax_version: str, passes: tuple | None = None,
               partitioner: tuple | None = None) -> str:
    """ISSUE.md: JAX's bug-report layout (title, Description, System info)."""
    from fuzz.issue_title import jax_words, phase

    message = case.message
    if case.oracle == "internal-error" and run.error and run.error.get("message"):  # (what the repro shows)
        message = str(run.error["message"]).replace(run.path, "repro.py") if run.path else str(run.error["message"])
        message = (JAXPR_MARK if case.message.startswith(JAXPR_MARK) else "") + message
    what = _line(jax_words(hide_install_path(message)), 300) if message else case.kind
    site, frames = _raise_site(case, run)
    when = phase(case.message, site, frames) if case.oracle == "internal-error" else ""
    callback = (re.search(r"\ban? ([\w.]+(?: callback)?) (?:never ran|received|ran that)", case.message) or
                [None, "host callback"])[1]
    happens = {
        "internal-error": f"JAX raises `{case.kind.removeprefix('builtins.')}` from its own code"
                          f"{' ' + when if when else ''} on a valid program:",
        "crash": {"SIGABRT": "The process aborts (SIGABRT):", "SIGSEGV": "The process crashes (SIGSEGV):",
                  "memory": "The process takes gigabytes of memory:"}.get(case.kind,
                                                                           f"The process is killed ({case.kind}):"),
        "hang": "The call never returns:",
        "differential": ("The call returns an output of another shape than the same computation without "
                         "sharding:" if case.kind == "wrong-shape" else
                         "The call returns other values than the same computation without sharding:"),
        "callbacks": {"not-called": f"The host function given to `{callback}` never runs:",
                      "unexpected-call": f"A host function given to `{callback}` runs that should not:"}.get(
                          case.kind, f"The host function given to `{callback}` receives other values than its "
                                     f"argument holds:"),
        "metamorphic": "Two calls of one function that may differ only by jit / spmd_axis_name return different values:",
        "determinism": "The StableHLO text of a jitted call is not the same every time:",
    }.get(case.oracle, "")
    known = ([f"> Already reported: {', '.join(case.upstream)}. It has the same root cause (triaged by hand): "
              "add this repro there as a comment instead of filing a new issue.", ""] if case.upstream else [])
    return "\n".join([
        f"# {title(case, run)}",
        "",
        *known,
        *_related_lines(case),
        "### Description",
        "",
        f"{happens}",
        "",
        _fenced(what),
        "",
        _expected_text(case, run),
        "",
        "Repro (`python repro.py`, needs only jax and numpy, fakes 8 CPU devices; exit status 0 when JAX behaves, "
        "non-zero while the bug shows):",
        "",
        _fenced(source, "python"),
        "",
        f"Observed on jax {jax_version} (`python repro.py`, run with `JAX_TRACEBACK_FILTERING=off`; last lines):",
        "",
        _fenced(_observed(run)),
        "",
        "Affected releases (the same program run on each release checked):",
        "",
        _releases_text(case.releases, jax_version),
        "",
        *_passes_text(passes, partitioner),
        "Found by shardfuzz, a fuzzer for JAX's sharding transforms.",
        "",
        "### System info (python version, jaxlib version, accelerator, etc.)",
        "",
        _fenced(env_info.strip()),
        "",
    ])


# ------------------------------------------------------------------------------ the command

def export_case(case: Case, python: str, out_dir: Path, log=lambda s: None, xla_passes: bool = False) -> tuple:
    """Render, verify and write one case; returns (repro path, issue path). ExportError if it does not verify.

    ``xla_passes``: also find the XLA passes without which the finding disappears
    (:func:`implicated_passes`; one run of the repro per pass that changed the program) and
    whether it disappears with the other SPMD partitioner (:func:`other_partitioner`, one run).
    """
    from fuzz.typecheck import ProgramError
    from fuzz.util import atomic_write_text

    if xla_passes and case.oracle in ("hang", "determinism"):  # (said before any run)
        raise ExportError(f"--xla-passes needs a finding that shows when the program runs; a {case.oracle} "
                          "finding does not: drop --xla-passes")
    caps, env_info = probe(python)
    if case.oracle in PER_CALL and case.call is None:
        if len(case.program["calls"]) == 1:
            case.call = 0
        else:
            log("locating the call that shows the finding (one run of the program)…")
            case.call = locate_call(case, python)
    expected = None
    if case.oracle in ("differential", "callbacks"):
        from fuzz.reference import evaluate

        try:
            expected = evaluate(case.program, caps)
        except ProgramError as e:
            raise ExportError(f"the reference cannot evaluate this program ({_line(e, 200)})") from None
    finding = {"oracle": case.oracle, "kind": case.kind, "message": case.message, "call": case.call}
    n_calls = len(case.program["calls"]) + sum(len(h["calls"]) for h in case.history)
    timeout = STARTUP_SECONDS + CALL_SECONDS * n_calls
    if case.oracle == "hang":
        m = re.search(r"within (\d+)", case.message)
        timeout += float(m.group(1)) if m else 60.0
    if case.oracle == "determinism":
        timeout *= 3  # the repro starts two more processes
    # a crash may need the lowerings the fuzzer's worker does after the calls: tried second
    for lower_after in ((False, True) if case.oracle in ("crash", "hang") else (False,)):
        try:
            source = render_repro(case.program, caps, finding, expected, case.history, lower_after=lower_after)
        except (ProgramError, ValueError) as e:  # ProgramError is a ValueError too
            raise ExportError(f"cannot write a repro for this finding on jax {caps.get('jax_version')}: "
                              f"{_line(e, 200)}") from None
        log(f"running repro.py with jax {caps.get('jax_version')} ({python})…")
        run = run_repro(source, python, timeout)
        why = judge_run(case, run)
        if not why:
            break
    if why:
        raise ExportError(f"the repro does not show the finding on jax {caps.get('jax_version')}: {why}")
    passes = implicated_passes(source, python, timeout, log) if xla_passes else None
    partitioner = other_partitioner(source, python, timeout, caps.get("shardy_default")) if xla_passes else None
    text = issue_text(case, source, run, env_info, caps.get("jax_version", "?"), passes, partitioner)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        repro_path, issue_path = out_dir / "repro.py", out_dir / "ISSUE.md"
        atomic_write_text(str(repro_path), source)
        try:
            atomic_write_text(str(issue_path), text)
        except OSError:
            repro_path.unlink(missing_ok=True)
            raise
    except OSError as e:
        raise ExportError(f"cannot write to {out_dir} ({e.strerror or e}); choose another --out") from None
    return repro_path, issue_path


def newest_release(case: Case) -> str:
    """The release to verify a repro on when the user names none: the newest where the entry's
    recorded verdicts (``releases.tested``, fuzz/verdicts.py) say the finding reproduces, or the
    release it was recorded on when that is newer or nothing is recorded (a report's finding)."""
    from fuzz.util import version_tuple
    from fuzz.verdicts import VERSION, newest_reproducing

    newest = newest_reproducing(case.releases)
    if newest is None or (VERSION.fullmatch(case.jax_version) and
                          version_tuple(case.jax_version) >= version_tuple(newest)):
        return case.jax_version
    return newest


@click.command("export")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--finding", "finding", type=int, default=None,
              help="1-based number of the finding, when PATH is a campaign report.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Directory for repro.py and ISSUE.md (default: export/<entry name>/).")
@click.option("--python", "python", default=None, help="Interpreter whose JAX verifies the repro.")
@click.option("--jax-version", default=None,
              help="Verify with this released JAX (X.Y.Z, X.Y.Z.W or 'newest') in a cached venv.")
@click.option("--venv-python", default=None, metavar="PATH",
              help="Python to make the --jax-version venv with when its wheels fit (default: $SHARDFUZZ_VENV_PYTHON, "
                   "this one, or a python3.N on PATH that fits).")
@click.option("--xla-passes", is_flag=True,
              help="Also switch off, one at a time, each XLA pass that changed the program, and name in "
                   "ISSUE.md those without which the finding disappears (a run per pass); and run it once "
                   "with the other SPMD partitioner (Shardy or GSPMD).")
def export(path, finding, out_dir, python, jax_version, venv_python, xla_passes):
    """Write repro.py and ISSUE.md for a corpus entry (or a report's finding), verified in a fresh process.

    Without --python / --jax-version the repro is verified on the newest release where the
    entry's recorded verdicts say the finding reproduces (a cached venv when that is not this
    interpreter's jax), and ISSUE.md names the releases checked.

    Exit 0 when written; 2 (one line on stderr, nothing written) when the input is not
    valid, the JAX cannot be found or installed, or the repro does not show the finding.
    """
    def log(msg: str) -> None:
        click.echo(msg, err=True)

    try:
        case = load_case(path, finding)
        if not (python or jax_version):  # the newest release the finding reproduces on, installed here or not
            newest = newest_release(case)
            if newest == installed_jax_version():
                python = sys.executable
            elif newest_reproducing(case.releases) is not None:  # (recorded: a venv is made for it)
                log(f"the finding reproduces on jax {newest}, the newest release its entry records it on: "
                    f"verifying there")
                jax_version = newest
        interp = choose_interpreter(case, python, jax_version, log=log, venv_python=venv_python)
        target = Path(out_dir) if out_dir else Path("export") / case.name
        repro_path, issue_path = export_case(case, interp, target, log=log, xla_passes=xla_passes)
    except ExportError as e:
        click.echo(f"shardfuzz: {e}", err=True)
        sys.exit(2)
    if case.upstream:
        log(f"already reported upstream: {', '.join(case.upstream)} (comment there rather than file a new issue)")
    click.echo(f"{repro_path}\n{issue_path}")
