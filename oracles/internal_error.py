"""Internal-error oracle: an exception JAX raised on a valid program.

There is no allow-list of messages: the generator avoids documented limitations by
construction (fuzz/typecheck.py), so every exception is a finding until triaged.
"""
from __future__ import annotations

import re

from oracles.common import Finding, call_label, normalize

NAMES = ("internal-error",)  # the oracle names of the findings this module makes

# The message of an exception ``str(jax.make_jaxpr(f)(*args))`` raised after the call ran
# (fuzz/worker.py ``_print_jaxpr``) starts with this; the repro prints that jaxpr (fuzz/render.py).
JAXPR_MARK = "while printing jax.make_jaxpr: "

_FRAME = re.compile(r'File "([^"]*)", line \d+, in (\S+)')


def jax_frames(frames) -> list:
    """The (path, function) pairs of ``frames`` that are inside JAX (jax or jaxlib), in their order."""
    return [(f, fn) for f, fn in frames if "/jax/" in f or "/jaxlib/" in f]


def raise_site(traceback_text: str) -> str:
    """``jax/_src/module.py in function`` of the innermost frame inside JAX ('' if none)."""
    sites = jax_frames(_FRAME.findall(traceback_text))
    if not sites:
        return ""
    path, func = sites[-1]
    return f"{path[path.rfind('/jax'):].lstrip('/')} in {func}"


def raise_module(traceback_text: str) -> str:
    """``jax._src.module:function`` of the innermost frame inside JAX ('' if none): the signature's site."""
    return jax_site(_FRAME.findall(traceback_text))


def jax_site(frames) -> str:
    """``jax._src.module:function`` of the last frame inside JAX of ``frames`` ((path, function)
    pairs, outermost first, as a traceback lists them), '' if none (also for hangs: oracles.crash)."""
    sites = jax_frames(frames)
    if not sites:
        return ""
    path, func = sites[-1]
    rel = path[path.rfind("/jax"):].lstrip("/")
    return rel.removesuffix(".py").replace("/", ".") + ":" + func


def signature(exc_type: str, message: str, traceback_text: str) -> str:
    """The deduplication key of an exception: oracle, exception type, JAX frame that raised, normalized message.

    The frame (``module:function``, innermost inside JAX) tracks the bug rather than its
    wording: one message raised from two places is two bugs, two wordings from one
    place with one type are usually one.
    """
    site = raise_module(traceback_text) or "?"
    return f"internal-error: {exc_type}: {site}: {normalize(message)}"


def api_errors(outcome: dict | None) -> list:
    """What the rendered program itself got wrong about JAX's API, one line each (each once, in
    order): the ``api_error`` of every error record of ``outcome`` (a worker's reply: the module's,
    each call's, its jaxpr's and lowering's), set by fuzz/worker.py ``program_api_error`` when
    the program's own frame raised an ImportError, AttributeError or bad-call TypeError reaching
    a JAX API. The generator's fault, never a finding (:func:`judge` skips them; fuzz.runner
    counts the program ``invalid``)."""
    if not outcome or outcome.get("status", "ok") != "ok":
        return []
    records = [outcome.get("module_error")]
    for c in outcome.get("calls") or ():
        records += [c.get("error"), c.get("jaxpr_error"), c.get("lowering_error")]
    return list(dict.fromkeys(r["api_error"] for r in records if isinstance(r, dict) and r.get("api_error")))


def judge(program: dict, outcome: dict) -> list:
    """One finding per call that raised, and one if the rendered module itself failed.

    A call that ran but whose jaxpr could not be printed (``outcome["calls"][k]["jaxpr_error"]``,
    fuzz/worker.py) is a finding too, its message starting with :data:`JAXPR_MARK`. An error the
    program's own code raised reaching a JAX API (``api_error``: see :func:`api_errors`) is not.
    """
    found = []
    if outcome.get("module_error") and not outcome["module_error"].get("api_error"):
        e = outcome["module_error"]
        found.append(Finding("internal-error", e["type"], e["message"], None, e["traceback"],
                             signature=signature(e["type"], e["message"], e["traceback"])))
    for k, c in enumerate(outcome["calls"]):
        if not c["ok"]:
            e = c["error"]
            if e.get("api_error"):
                continue
            label = call_label(program["calls"][k])
            # a message-less error (a bare assert) is located by where JAX raised it
            message = e["message"] or f"raised in {raise_site(e['traceback']) or 'an unknown place'}"
            found.append(Finding("internal-error", e["type"], message, k, f"{label}\n{e['traceback']}",
                                 signature=signature(e["type"], message, e["traceback"])))
        elif c.get("jaxpr_error") and not c["jaxpr_error"].get("api_error"):  # the call ran; printing its jaxpr raised
            e = c["jaxpr_error"]
            label = call_label(program["calls"][k])
            message = JAXPR_MARK + (e["message"] or f"raised in {raise_site(e['traceback']) or 'an unknown place'}")
            found.append(Finding("internal-error", e["type"], message, k,
                                 f"{label}: print(jax.make_jaxpr(f)(*args))\n{e['traceback']}",
                                 signature=signature(e["type"], message, e["traceback"])))
    return found
