"""The worker: a persistent subprocess that executes rendered programs with real JAX.

Runs as a script (``python fuzz/worker.py``) under any interpreter that has JAX, so it
imports only the standard library, NumPy and JAX; it must never import shardfuzz.
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` is set by the parent before
JAX is imported here.

Protocol: one JSON object per line. The worker first writes
``{"hello": {...capabilities...}}``; then for each request line
``{"id": k, "source": str, "lower": false | true | "after" | "only"}`` it execs the source as a
module, runs each entry of its ``CALLS`` in order (unless ``lower`` is "only") and
answers ``{"id": k, "calls": [...], "seconds": s}`` where each call is ``{"ok": bool,
"outputs": [array...], "error": {"type", "message", "traceback"}, "callbacks": {tag:
(n, 2) array of the distinct (position, value) rows received (:func:`callback_cells`)},
"jaxpr_error": error (only when ``str(jax.make_jaxpr(f)(*args))`` raised after the call ran),
"lowering": str | null, "relowering": str}``; ``lowering`` is
the StableHLO text of the jitted call (``jax.jit`` around calls that are not jitted),
``relowering`` the same after ``jax.clear_caches()`` (with "after" and "only"; ``true``
lowers once). Arrays are
``{"dtype", "shape", "b64"}``. Replies go to the original stdout; the program's own
prints go to stderr.

The worker dies with its parent (the fuzzer, whose pid is ``SHARDFUZZ_PARENT_PID``),
however that one ends, even while a program hangs: see :func:`guard_parent`. On
``STACK_SIGNAL`` (SIGUSR1) it writes every thread's Python stack to stderr
(``faulthandler``), which names where a hung program hangs.
"""
import os
import sys

# Run as a script, the worker has fuzz/ first on sys.path, where a module of shardfuzz
# could shadow one of the standard library's (a fuzz/bisect.py once broke `import
# random`). The worker needs nothing from that directory: drop it before importing more.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import base64  # noqa: E402
import faulthandler  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

WATCH_PERIOD = 0.5  # seconds between two checks of the parent pid
ORPHAN_EXIT = 75  # exit code of a worker whose parent died
STACK_SIGNAL = signal.SIGUSR1  # dumps every thread's stack to stderr (fuzz.execute.Worker.dump_stacks)


def death_signal() -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies; False where that is not available.

    Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (PR_SET_PDEATHSIG = 1, <linux/prctl.h>;
    prctl(2)): it fires when the parent *thread* that started this process ends.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        prctl.restype = ctypes.c_int
        return prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def guard_parent(parent: int, how: str = "both") -> None:
    """Make this process end when its parent ``parent`` ends.

    ``how``: "both" (the default), "signal" (:func:`death_signal` only) or "watchdog"
    (:func:`watch_parent` only); the tests check each alone. Exits at once if the
    parent is already gone (it died before the death signal was set).
    """
    if how in ("both", "signal"):
        death_signal()
    if os.getppid() != parent:
        os._exit(ORPHAN_EXIT)
    if how in ("both", "watchdog"):
        watch_parent(parent)


def watch_parent(parent: int, period: float = WATCH_PERIOD) -> threading.Thread:
    """Start a daemon thread that ends this process when its parent is no longer ``parent``.

    Checks ``os.getppid()`` every ``period`` seconds (an orphan is re-parented to init or
    a subreaper). It runs while the main thread waits inside JAX on a hung program; a
    thread that holds the GIL forever can stop it, which is what the death signal
    covers; the watchdog covers systems without prctl.
    """
    def loop() -> None:
        while True:
            if os.getppid() != parent:
                try:
                    sys.stderr.write("shardfuzz worker: the fuzzer that started me is gone; exiting\n")
                    sys.stderr.flush()
                finally:
                    os._exit(ORPHAN_EXIT)
            time.sleep(period)

    t = threading.Thread(target=loop, name="shardfuzz-parent-watchdog", daemon=True)
    t.start()
    return t


def capabilities(jax) -> dict:
    """What this JAX release offers (see fuzz/render.py for the meaning of each key)."""
    import inspect

    caps = {"jax_version": jax.__version__, "n_devices": len(jax.devices())}
    try:
        import jaxlib

        caps["jaxlib_version"] = jaxlib.__version__
    except Exception:  # pragma: no cover - jaxlib always there in practice
        caps["jaxlib_version"] = "unknown"
    if hasattr(jax, "shard_map"):
        caps["shard_map"] = "jax"
        sm = jax.shard_map
    else:
        from jax.experimental.shard_map import shard_map as sm

        caps["shard_map"] = "experimental"
    params = inspect.signature(sm).parameters
    caps["check_kw"] = "check_vma" if "check_vma" in params else "check_rep"
    # partial-manual shard_map: ``axis_names`` (manual axes named) or, in the experimental
    # shard_map, ``auto`` (the complement named)
    caps["partial_manual"] = "axis_names" if "axis_names" in params else ("auto" if "auto" in params else None)
    sharding = jax.sharding
    caps["explicit"] = hasattr(sharding, "AxisType") and hasattr(sharding.AxisType, "Explicit") and hasattr(
        sharding, "reshard")
    # jax.smap (jax >= 0.7.0) and jax.set_mesh (jax >= 0.7.1): fuzz.typecheck.smap_refusal, root_ctx
    caps["smap"] = hasattr(jax, "smap")
    caps["set_mesh"] = hasattr(jax, "set_mesh")
    # jax.sharding.auto_axes(f, out_sharding=...) (fuzz.render: the auto_axes transform)
    caps["auto_axes"] = bool(caps["explicit"] and hasattr(sharding, "auto_axes")
                             and "out_sharding" in inspect.signature(sharding.auto_axes).parameters)
    # jax.pure_callback's batching keyword: ``vmap_method`` (jax 0.4.35 and later) or, before, ``vectorized``
    caps["pure_callback_kw"] = ("vmap_method" if "vmap_method" in inspect.signature(jax.pure_callback).parameters
                                else "vectorized")
    # the explicit invariant -> varying cast: jax.lax.pcast(x, axes, to='varying') (jax >= 0.9.0)
    # or jax.lax.pvary(x, axes) (0.6.1 ... 0.9.x; removed in 0.10.0), fuzz/ops/collectives.py Pvary
    caps["pvary"] = "pcast" if hasattr(jax.lax, "pcast") else ("pvary" if hasattr(jax.lax, "pvary") else None)
    caps["all_gather_invariant"] = ("to" if "to" in inspect.signature(jax.lax.all_gather).parameters
                                    else "function" if hasattr(jax.lax, "all_gather_invariant") else None)
    caps.update(measured_rules(jax, sm, caps))
    caps.update(api_probes())
    return caps


def api_probes(path=None) -> dict:
    """``{"missing_apis": [...]}``: the JAX APIs declared in fuzz/jax_api.py (the rendered
    programs' modules, attributes and keywords) that this JAX lacks, by name
    (``jax_api.api_name``, sorted); ``fuzz.typecheck.release_rules`` keeps the generator off
    their users. That module (``path``, default the sibling of this file) is loaded by path:
    this script drops its own directory from sys.path. Warnings of deprecated modules it
    imports while probing are silenced.
    """
    import importlib
    import importlib.util
    import inspect
    import warnings

    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_api.py")
    spec = importlib.util.spec_from_file_location("shardfuzz_jax_api", path)
    api = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(api)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"missing_apis": api.probe_all(importlib.import_module, inspect.signature)}


def measured_rules(jax, sm, caps: dict) -> dict:
    """Rules of this release measured by running tiny programs (not assumed from the version).

    - ``eager_partial_manual``: a partial-manual shard_map runs outside jit (jax 0.4.26 to
      0.6.1 raise NotImplementedError there; under jit it works; measured).
    - ``callback_under_grad``: an io_callback on a stop_gradient argument may sit under grad
      (jax 0.4.28 raises "IO callbacks do not support JVP" even then; 0.4.38 does not; measured).
    - ``partial_manual_collectives``: a collective over a manual axis lowers inside a
      partial-manual shard_map under jit (jax 0.4.28 raises NotImplementedError "Collectives in
      manually partitioned computations are only supported when all mesh axes are
      partitioned manually", from ``SPMDAxisContext.axis_env`` in jax/_src/sharding_impls.py,
      which every collective's lowering and axis_index's read; measured).
    - ``eager_unreduced``: a shard_map whose body casts a value to unreduced and psums it
      (``jax.lax.pcast(x, axes, to='unreduced')``, jax >= 0.9.0) runs outside jit on an
      Explicit mesh (jax 0.9.2 raises NotImplementedError "Eager shard_map with
      unreduced/reduced is not implemented. Please wrap your shard_map in `jax.jit`"; 0.10.2
      runs it; measured);
    - ``checked_cond`` / ``checked_while``: a ``lax.cond`` / ``lax.while_loop`` runs inside a
      shard_map whose replication check is on (jax 0.4.26 and 0.4.28 raise NotImplementedError
      "No replication rule for cond" / "... for while": the experimental shard_map registers
      no check rule for them; 0.4.38 has cond's, not while's; measured).
    - ``ppermute_any_order``: a ppermute over a tuple of mesh axes not in the mesh's order, each
      of size 2, lowers inside a shard_map under jit (jax 0.4.26 to 0.10.2 run it, numbering the
      devices in mesh order: corpus entry differential-5c6cf26ebca0; 0.11.0 too, by its source;
      jax 0.11.1 to 0.12.1 raise RuntimeError "Make sure that the axis_name passed to
      jax.lax.ppermute is in the same order as the axis_names declared on the mesh", config
      option jax_raise_on_ppermute_sort_diff, default on: measured on 0.12.1, in the sources of
      0.11.1 to 0.12.0). Not measured on fewer than 4 devices.
    """
    import numpy as np
    from jax.experimental import io_callback

    rules = {"eager_partial_manual": False, "callback_under_grad": False, "partial_manual_collectives": False,
             "checked_cond": False, "checked_while": False}
    P = jax.sharding.PartitionSpec
    one = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("a",))
    # (the cond's predicate from a replicated argument, as the typing rules draw it in a checked body)
    bodies = {"checked_cond": lambda p, x: jax.lax.cond(p.sum() > 0, lambda v: v, lambda v: -v, x),
              "checked_while": lambda p, x: jax.lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] * 2),
                                                               (0, x))[1]}
    for key, body in bodies.items():
        try:
            checked = sm(body, mesh=one, in_specs=(P(), P("a")), out_specs=P("a"), **{caps["check_kw"]: True})
            jax.block_until_ready(jax.jit(checked)(np.ones(2, np.float32), np.ones(2, np.float32)))
            rules[key] = True
        except Exception:
            pass
    if caps["partial_manual"] and len(jax.devices()) >= 2:
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]).reshape(2, 1), ("a", "b"))
        kw = {"axis_names": {"a"}} if caps["partial_manual"] == "axis_names" else {"auto": frozenset({"b"})}
        x = np.zeros(2, np.float32)
        try:
            jax.block_until_ready(sm(lambda x: x + 1, mesh=mesh, in_specs=P("a"), out_specs=P("a"), **kw)(x))
            rules["eager_partial_manual"] = True
        except Exception:
            pass
        try:
            body = sm(lambda x: jax.lax.psum(x, "a"), mesh=mesh, in_specs=P("a"), out_specs=P(), **kw)
            jax.block_until_ready(jax.jit(body)(x))
            rules["partial_manual_collectives"] = True
        except Exception:
            pass

    if caps.get("explicit") and hasattr(jax.lax, "pcast") and len(jax.devices()) >= 2:
        axis_types = (jax.sharding.AxisType.Explicit,)
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("a",), axis_types=axis_types)
        x = jax.device_put(np.ones(2, np.float32), jax.sharding.NamedSharding(mesh, P("a")))
        try:
            body = sm(lambda v: jax.lax.psum(jax.lax.pcast(v, "a", to="unreduced"), "a"), mesh=mesh,
                      in_specs=P("a"), out_specs=P())
            jax.block_until_ready(body(x))
            rules["eager_unreduced"] = True
        except Exception:
            rules["eager_unreduced"] = False

    if len(jax.devices()) >= 4:
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("a", "b"))
        perm = [(0, 1), (1, 2), (2, 3), (3, 0)]
        body = sm(lambda v: jax.lax.ppermute(v, ("b", "a"), perm), mesh=mesh, in_specs=P(("a", "b")),
                  out_specs=P(("a", "b")))
        try:
            jax.block_until_ready(jax.jit(body)(np.zeros(4, np.float32)))
            rules["ppermute_any_order"] = True
        except Exception:
            rules["ppermute_any_order"] = False

    def f(x):
        io_callback(lambda v: None, None, jax.lax.stop_gradient(x), ordered=False)
        return (x * x).sum()

    try:
        jax.block_until_ready(jax.grad(f)(np.ones(2, np.float32)))
        jax.effects_barrier()
        rules["callback_under_grad"] = True
    except Exception:
        pass
    return rules


def callback_cells(np, value, rank: int):
    """The (position, value) rows of what a host function received: float64 array (n, 2).

    ``value``: the array a callback's host function got; its trailing ``rank`` dims are the
    argument's local dims (``fuzz.typecheck.note_callback_rank``), any leading ones batch
    dims. Position: the flat index within those trailing dims. ``rank`` 0 (or more than
    the array has) gives position 0 to every value: the values alone are compared.
    """
    a = np.asarray(value, dtype=np.float64)
    if rank > a.ndim:
        rank = 0
    m = 1
    for d in a.shape[a.ndim - rank:]:
        m *= d
    rows = a.reshape(-1, m) if m else np.zeros((0, 0))
    pos = np.broadcast_to(np.arange(m, dtype=np.float64), rows.shape)
    return np.stack([pos.ravel(), rows.ravel()], axis=1)


def unique_cells(np, cells: list):
    """The distinct rows of a list of ``callback_cells`` arrays, sorted by position, then value
    (NaN last): float64 array (n, 2). NaNs at one position are one row, -0.0 is 0.0."""
    if not cells:
        return np.zeros((0, 2))
    c = np.concatenate(cells, axis=0) + 0.0  # (+ 0.0: -0.0 becomes 0.0)
    c = c[np.lexsort((c[:, 1], c[:, 0]))]
    same = (c[1:, 0] == c[:-1, 0]) & ((c[1:, 1] == c[:-1, 1]) | (np.isnan(c[1:, 1]) & np.isnan(c[:-1, 1])))
    return c[np.concatenate([[True], ~same])] if len(c) else c


def encode(x) -> dict:
    import numpy as np

    a = np.array(x, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode()}


def run_program(jax, np, source: str, lower) -> list:
    """Exec a rendered program and run (or only lower) its calls; see the module docstring.

    All calls run first, in order, in one process state; lowerings come after, so that
    clearing caches for the second lowering cannot hide a bug that needs earlier calls.
    """
    checks = jax.config.jax_enable_checks  # a program may turn JAX's checks on for itself only
    try:
        return _run_program(jax, np, source, lower)
    finally:
        jax.config.update("jax_enable_checks", checks)


def _run_program(jax, np, source: str, lower) -> list:
    module = {"__name__": "shardfuzz_program"}
    exec(compile(source, PROGRAM_FILE, "exec"), module)
    log = module["CALLBACK_LOG"]
    calls = []
    for label, fn, args in module["CALLS"]:
        del log[:]
        rec = {"label": label, "ok": True, "outputs": [], "error": None, "callbacks": {}, "lowering": None}
        calls.append(rec)
        if lower == "only":
            continue
        try:
            with module["mesh_context"]():
                out = fn(*args)
            out = jax.block_until_ready(out)
            jax.effects_barrier()
            rec["outputs"] = [encode(o) for o in jax.tree_util.tree_leaves(out)]
        except Exception as e:  # an exception on a valid program is a finding: report it whole
            try:
                jax.effects_barrier()
            except Exception:
                _drop_effect_tokens()
            rec["ok"] = False
            rec["error"] = error_record(e)
        by_tag = {}
        for tag, value, rank in log:
            by_tag.setdefault(tag, []).append(callback_cells(np, value, rank))
        rec["callbacks"] = {t: encode(unique_cells(np, v)) for t, v in by_tag.items()}
        if rec["ok"]:
            _print_jaxpr(jax, module, fn, args, rec)
    if lower:
        rounds = [("lowering", False)] + ([("relowering", True)] if lower in ("after", "only") else [])
        for key, clear in rounds:
            if clear and hasattr(jax, "clear_caches"):
                jax.clear_caches()  # a second lowering from scratch must give the same text
            for rec, (label, fn, args) in zip(calls, module["CALLS"]):
                if not rec["ok"] or "lowering_error" in rec:
                    continue
                target = fn if hasattr(fn, "lower") else jax.jit(fn)
                try:
                    with module["mesh_context"]():
                        rec[key] = target.lower(*args).as_text()
                except Exception as e:
                    rec["lowering_error"] = error_record(e)
    return calls


def _print_jaxpr(jax, module: dict, fn, args, rec: dict) -> None:
    """Trace a call that ran with ``jax.make_jaxpr`` and print its jaxpr (``str``), as a user
    debugging it would; an exception goes to ``rec["jaxpr_error"]`` (an internal-error finding:
    a function that runs must trace and print). The printed text is not kept. A donated
    (deleted) argument still traces: only its shape, dtype and sharding are read (measured on
    jax 0.4.26, 0.4.38, 0.6.1 and 0.10.2).
    """
    try:
        with module["mesh_context"]():
            str(jax.make_jaxpr(fn)(*args))
    except Exception as e:
        rec["jaxpr_error"] = error_record(e)


def _drop_effect_tokens() -> None:
    """Forget the runtime tokens of JAX's effectful computations after one of them failed.

    ``jax.effects_barrier()`` waits on the tokens of the last effectful computations
    (``jax._src.dispatch.runtime_tokens``, jax 0.4.26-0.10.2) and clears them only when all are
    fine: a token whose computation failed (an io_callback that raised inside a multi-device
    computation) stays, and every later effects_barrier in the process raises its error again,
    whatever program runs (found 2026-12-06@b554ed7: a program of one jnp.sin got a stale io_callback
    error). Cleared here, the next call and program start clean.
    """
    try:
        from jax._src import dispatch

        dispatch.runtime_tokens.clear()
    except Exception:  # (a release without it: nothing to clear)
        pass


def error_record(e: BaseException) -> dict:
    """An exception as the reply holds it: ``type``, ``message``, ``traceback`` (its last 4000
    characters) and, when the program itself reached an API this JAX lacks, ``api_error``
    (:func:`program_api_error`)."""
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    rec = {"type": type(e).__module__ + "." + type(e).__qualname__, "message": str(e), "traceback": "".join(tb)[-4000:]}
    api = program_api_error(e)
    if api:
        rec["api_error"] = api
    return rec


PROGRAM_FILE = "<program>"  # the file name the rendered source is compiled under (_run_program)
# A TypeError of a call whose arguments the callee does not take (CPython's and nanobind's wording)
_BAD_CALL = re.compile(r"unexpected keyword argument|required (positional|keyword-only) argument|"
                       r"takes (from )?\d+ (to \d+ )?positional argument|got multiple values for argument|"
                       r"positional-only arguments passed as keyword|incompatible function arguments")
_NO_MODULE_ATTR = re.compile(r"module '(jax[\w.]*)' has no attribute '(\w+)'")
_NO_NAME = re.compile(r"cannot import name '(\w+)' from '(jax[\w.]*)'")


def _machinery(code) -> bool:
    """Whether a frame is import, attribute-lookup or wrapper machinery between a program's line
    and the error it raised: ``<frozen importlib...>``, a ``__getattr__`` (a module's or an
    enum's), JAX's deprecation getattr (jax/_src/deprecations.py) and JAX's API-boundary wrapper
    (jax/_src/traceback_util.py, around jax.jit, jax.vmap, ...: with JAX_TRACEBACK_FILTERING=off
    a call of jax.jit with an unknown keyword fails in its frame; measured on jax 0.10.2)."""
    name = code.co_filename.replace(os.sep, "/")
    return (name.startswith("<frozen importlib") or code.co_name == "__getattr__"
            or name.endswith(("jax/_src/deprecations.py", "jax/_src/traceback_util.py")))


def program_api_error(e: BaseException) -> str:
    """What the rendered program got wrong about JAX's API, or '' (the exception is JAX's).

    The generator's fault, never a finding (fuzz.runner counts it ``invalid``): an ImportError
    (ModuleNotFoundError too) of a jax module, an AttributeError of a jax module or class, or a
    TypeError of a call whose arguments the callee does not take, raised in the program's own
    frame: the innermost frame of the traceback, :func:`_machinery` frames skipped, is the
    program's (``PROGRAM_FILE``). An exception raised inside JAX's frames stays JAX's. Returns
    e.g. "has no jax.experimental.shard_alike" or "rejects a call: jit() got an unexpected
    keyword argument 'x'".
    """
    if not isinstance(e, (ImportError, AttributeError, TypeError)):
        return ""
    tb, last = e.__traceback__, None
    while tb is not None:
        if not _machinery(tb.tb_frame.f_code):
            last = tb.tb_frame.f_code
        tb = tb.tb_next
    if last is None or last.co_filename != PROGRAM_FILE:
        return ""
    message = str(e)
    if isinstance(e, ImportError):
        m = _NO_NAME.search(message)
        if m:
            return f"has no {m.group(2)}.{m.group(1)}"
        name = getattr(e, "name", None) or ""
        return f"has no {name}" if name.split(".")[0] == "jax" else ""
    if isinstance(e, AttributeError):
        obj, name = getattr(e, "obj", None), getattr(e, "name", None)
        if name and isinstance(obj, type(os)) and obj.__name__.split(".")[0] == "jax":
            return f"has no {obj.__name__}.{name}"
        if name and isinstance(obj, type) and obj.__module__.split(".")[0] == "jax":
            return f"has no {obj.__qualname__}.{name}"
        m = _NO_MODULE_ATTR.search(message)
        return f"has no {m.group(1)}.{m.group(2)}" if m else ""
    return f"rejects a call: {message.splitlines()[0][:200]}" if message and _BAD_CALL.search(message) else ""


def phase_timer():
    """A started ``fuzz/phases.py`` PhaseTimer (loaded by path, as fuzz/jax_api.py is: this
    script drops its own directory from sys.path): JAX's tracing, lowering, compilation and
    execution timed per program, for benchmarks/phases.py (``SHARDFUZZ_PHASES`` set)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "phases.py")
    spec = importlib.util.spec_from_file_location("shardfuzz_phases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    timer = module.PhaseTimer()
    timer.install()
    return timer


def main() -> None:
    parent = os.environ.get("SHARDFUZZ_PARENT_PID", "")
    if parent.isdigit():
        guard_parent(int(parent), os.environ.get("SHARDFUZZ_PARENT_GUARD", "both"))
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # program prints go to stderr
    sys.stdout = sys.stderr
    # on STACK_SIGNAL, every thread's Python stack goes to stderr, even from a thread stuck in
    # native code (the handler is faulthandler's, in C): where a hung worker hangs (fuzz.execute)
    faulthandler.register(STACK_SIGNAL, file=sys.stderr, all_threads=True)
    t0 = time.perf_counter()
    import numpy as np
    import jax

    caps = capabilities(jax)
    caps["import_seconds"] = time.perf_counter() - t0
    timer = phase_timer() if os.environ.get("SHARDFUZZ_PHASES") else None
    out.write(json.dumps({"hello": caps}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        received = time.time()  # (benchmarks/phases.py: the request's time in the pipe)
        req = json.loads(line)
        start = time.perf_counter()
        try:
            calls = run_program(jax, np, req["source"], req.get("lower", False))
            reply = {"id": req["id"], "calls": calls}
        except Exception as e:  # the source itself failed (module level): report, keep serving
            reply = {"id": req["id"], "calls": [], "module_error": error_record(e)}
        reply["seconds"] = time.perf_counter() - start
        if timer is not None:
            reply["phases"] = timer.take()
            reply["received_at"] = received
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
