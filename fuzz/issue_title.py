"""The one-line title of an exported issue, in JAX's words: the JAX APIs of the failing call and its symptom.

JAX-free (the standard library and the program model only): tests/test_issue_text.py computes
the title of every corpus entry without running JAX. A title is at most :data:`TITLE_LIMIT`
characters, names the transforms of the failing call outermost first (``jax.jit of jax.grad``)
and the most telling ops of its program under their JAX names (the op registry's APIs,
fuzz/jax_api.py ``OPS``), then what goes wrong as the oracle that found it saw it:

- differential: "returns wrong values" / "returns an output of the wrong shape";
- callbacks: "never calls its io_callback" / "passes other values to its io_callback" / "calls
  ... that should not run" (oracles/callbacks.py's kinds ``not-called``, ``wrong-value``,
  ``unexpected-call``);
- internal-error: "raises ShardingTypeError while lowering: <message>", the phase from the
  recorded traceback (:func:`phase`), none named when the traceback does not tell;
- crash: "aborts (SIGABRT): Check failed: ..." (the fatal line, when the process printed one);
- hang, determinism ("lowers to different StableHLO in two processes" / "after
  jax.clear_caches()"), metamorphic.

Detail is dropped (then the message cut at a word boundary, with "…") only to stay within the limit.
"""
from __future__ import annotations

import re

TITLE_LIMIT = 100

# JAX's name of each transform kind (fuzz.typecheck.transform_name), as a title shows it
TRANSFORM_APIS = {
    "jit": "jax.jit", "vmap": "jax.vmap", "pmap": "jax.pmap", "map": "lax.map", "scan": "lax.scan",
    "grad": "jax.grad", "value_and_grad": "jax.value_and_grad", "vjp": "jax.vjp", "jvp": "jax.jvp",
    "linearize": "jax.linearize", "jacrev": "jax.jacrev", "jacfwd": "jax.jacfwd", "cond": "lax.cond",
    "fori_loop": "lax.fori_loop", "while_loop": "lax.while_loop", "checkpoint": "jax.checkpoint",
    "auto_axes": "jax.sharding.auto_axes", "shard_map": "jax.shard_map",
}
# feature names of fuzz.features for the transforms (KIND_FEATURES: lax_map is a ``map``)
_FEATURE_KIND = {"lax_map": "map"}

# ops whose JAX name is not the first API of fuzz/jax_api.py OPS that contains the op's name
_OP_OVERRIDES = {
    "neg": "jnp.negative", "add": "jnp.add", "sub": "jnp.subtract", "mul": "jnp.multiply", "matmul": "jnp.matmul",
    "astype": "jnp.ndarray.astype", "wsum": "jnp.sum", "conv": "lax.conv_general_dilated",
    "conv_nc": "lax.conv_general_dilated", "conv_nwc": "lax.conv_general_dilated", "slice": "basic slicing",
    "at_set": "jnp.ndarray.at[].set", "at_add": "jnp.ndarray.at[].add",
    "at_set_out_sharding": "jnp.ndarray.at[].set(out_sharding=)",
    "at_add_out_sharding": "jnp.ndarray.at[].add(out_sharding=)",
    "reduce_window_sum": "lax.reduce_window", "reduce_window_max": "lax.reduce_window", "index": "lax.axis_index",
    "ref_update": "jax.new_ref", "pvary": "lax.pcast", "unreduced_psum": "lax.psum of an unreduced value",
    "unreduced_psum_scatter": "lax.psum_scatter of an unreduced value",
    "all_gather_invariant": "lax.all_gather(to='invarying')", "io_callback": "io_callback",
    "pure_callback": "jax.pure_callback", "debug_callback": "jax.debug.callback", "debug_print": "jax.debug.print",
    "random_uniform": "jax.random.uniform", "random_uniform_sharded": "jax.random.uniform(out_sharding=)",
    "reshard_split": "jax.sharding.reshard", "shard_alike": "shard_alike",
}
# how telling an op family is in a title (lower first); unlisted families come last
_FAMILY_RANK = ("collective", "io_callback", "callback", "sharding", "custom", "state", "random", "scan", "matmul",
                "movement", "select", "reduce", "transpose", "broadcast", "index", "convert", "binary", "unary")


def short_api(name: str) -> str:
    """``jax.numpy.sum`` -> ``jnp.sum``, ``jax.lax.psum`` -> ``lax.psum`` (as JAX's docs write them)."""
    return re.sub(r"^jax\.numpy\.", "jnp.", re.sub(r"^jax\.lax\.", "lax.", name))


def op_api(op: str) -> str:
    """The JAX name of a registry op (fuzz/ops/, its APIs in fuzz/jax_api.py ``OPS``), short form; the op's
    own name when none is known."""
    from fuzz import jax_api

    if op in _OP_OVERRIDES:
        return _OP_OVERRIDES[op]
    names = [jax_api.apis(r)[0][1] for r in jax_api.OPS.get(op, ()) if jax_api.apis(r)[0][0] != "module"]
    return short_api(next((n for n in names if op in n.rsplit(".", 1)[-1]), names[0] if names else op))


def _chain_words(transforms: list, mesh: tuple) -> list:
    """[(API, detail)] of a call's transforms, outermost first (detail: its telling argument, or '')."""
    from fuzz.typecheck import transform_name

    out = []
    for t in transforms:
        name = transform_name(t)
        detail = ""
        if t["kind"] == "vmap" and t.get("spmd_axis_name"):
            detail = f"(spmd_axis_name={t['spmd_axis_name']!r})"
        elif t["kind"] == "shard_map" and t.get("axis_names") is not None and set(t["axis_names"]) != set(mesh):
            detail = f"(axis_names={set(t['axis_names'])!r})"
        elif t["kind"] == "shard_map" and t.get("check_vma") is False:
            detail = "(check_vma=False)"
        elif t["kind"] == "checkpoint" and t.get("policy"):
            detail = f"(policy={t['policy']})"
        elif t["kind"] == "jit" and (t.get("in_specs") is not None or t.get("out_specs") is not None):
            detail = "(in_shardings=)" if t.get("in_specs") is not None else "(out_shardings=)"
        out.append((TRANSFORM_APIS.get(name, name), detail))
    return out


def subject(program: dict, call: int | None, hint: str = "") -> list:
    """Ways to name what fails, most detailed first: strings like "jax.vmap(spmd_axis_name='x') of
    jax.shard_map of lax.psum". ``call``: the failing call (None: the whole program, whose calls'
    transforms are listed once each); ``hint``: text (a message, a raise site) whose op names put
    those ops first."""
    from fuzz import ops as O
    from fuzz.features import features, op_names

    mesh = tuple(program["mesh"]["axis_names"])
    calls = program["calls"] if call is None else [program["calls"][call]]
    chain: list = []
    for c in calls:
        for w in _chain_words(c["transforms"], mesh):
            if w not in chain:
                chain.append(w)
    names, _ = features(program)
    inner = [TRANSFORM_APIS[_FEATURE_KIND.get(n, n)] for n in sorted(names)
             if _FEATURE_KIND.get(n, n) in TRANSFORM_APIS]
    inner = [a for a in dict.fromkeys(inner) if a not in {api for api, _ in chain}]
    policies = sorted(n.split(":", 1)[1] for n in names if n.startswith("checkpoint_policy:"))
    inner_detail = {"jax.checkpoint": f"(policy={policies[0]})"} if len(policies) == 1 else {}
    hint_words = set(re.findall(r"[a-z_]+", hint.lower()))

    def rank(op: str):
        fam = O.get(op).family
        named = op in hint_words or op_api(op).rsplit(".", 1)[-1] in hint_words
        return (not named, _FAMILY_RANK.index(fam) if fam in _FAMILY_RANK else len(_FAMILY_RANK), op)
    ops = list(dict.fromkeys(op_api(o) for o in sorted(op_names(program), key=rank)))
    mesh_word = " on an Explicit mesh" if program["mesh"]["axis_type"] == "explicit" else ""

    def text(detail: bool, n_inner: int, n_ops: int, with_mesh: bool) -> str:
        parts = [api + (d if detail else "") for api, d in chain] + \
            [api + (inner_detail.get(api, "") if detail else "") for api in inner[:max(n_inner, 0 if chain else 1)]]
        shown = " and ".join(ops[:n_ops])
        if not parts:  # (a call without transforms runs its ops eagerly)
            return ("eager " + shown if shown else "an eager call") + (mesh_word if with_mesh else "")
        return " of ".join(parts + ([shown] if shown else [])) + (mesh_word if with_mesh else "")

    variants = [text(True, 2, 2, True), text(True, 1, 1, True), text(False, 1, 1, True), text(False, 1, 1, False),
                text(False, 0, 1, False), text(False, 0, 0, False)]
    return [v for v in dict.fromkeys(variants) if v != "an eager call"] or ["an eager call"]


# functions (innermost JAX frame or any frame of the stack) that tell the phase an exception was raised in
_COMPILE = {"backend_compile", "backend_compile_and_load", "compile_or_get_cached", "_cached_compilation",
            "from_hlo", "compile"}
_LOWER = {"lower_sharding_computation", "_cached_lowering_to_hlo", "lower_jaxpr_to_module", "jaxpr_subcomp",
          "_pjit_lower", "lower_jaxpr_to_fun", "lower_parallel_callable", "lower_mesh_computation"}
_TRACE = {"trace_to_jaxpr", "trace_to_jaxpr_dynamic", "_infer_params", "_infer_params_impl", "make_jaxpr_f",
          "trace_to_subjaxpr_dynamic", "to_jaxpr", "_create_pjit_jaxpr", "trace_to_jaxpr_final"}
_PRINT = {"pp_jaxpr", "pp_eqn", "pp_eqns", "pp_toplevel_jaxpr", "pretty_print", "_pp_eqn", "pp_kv_pair", "pp_var"}
_RUN = {"_execute", "execute_sharded", "execute_sharded_on_local_devices", "block_until_ready", "_value"}
_FRAME = re.compile(r'File "([^"]*)", line \d+, in (\S+)')


def jax_frames(traceback_text: str) -> list:
    """(path, function) of each frame inside JAX of a formatted traceback, outermost first."""
    return [(p, f) for p, f in _FRAME.findall(traceback_text or "") if "/jax/" in p or "/jaxlib/" in p]


def phase(message: str, site: str, frames: list | None = None) -> str:
    """When JAX raised: "while tracing", "while lowering", "while compiling" (XLA), "while running",
    "while printing the jaxpr", or '' when the evidence does not say.

    ``frames``: the (path, function) pairs inside JAX of the recorded traceback, outermost first
    (:func:`jax_frames`); the latest phase whose functions are on the stack wins (lowering traces
    sub-functions, compiling follows lowering). Without frames, the raise site alone
    (``jax._src.module:function``, the signature's, oracles/internal_error.py) decides when its
    module or function is one of a phase; ``message`` starting with
    oracles.internal_error.JAXPR_MARK: the exception came from ``print(jax.make_jaxpr(f)(*args))``
    after the call itself ran.
    """
    from oracles.internal_error import JAXPR_MARK

    jaxpr = message.startswith(JAXPR_MARK)
    module, _, func = site.partition(":")
    if frames:
        funcs = {f for _, f in frames}
        paths = " ".join(p for p, _ in frames)
        if jaxpr:
            if funcs & _PRINT or "pretty_printer" in paths:
                return "while printing the jaxpr of jax.make_jaxpr"
            return "while tracing for jax.make_jaxpr"
        if funcs & _RUN or "pxla.py" in paths and "__call__" in {f for p, f in frames if "pxla.py" in p}:
            return "while running"
        if funcs & _COMPILE or "compiler.py" in paths:
            return "while compiling"
        if funcs & _LOWER or "interpreters/mlir.py" in paths:
            return "while lowering"
        if funcs & _TRACE or "partial_eval.py" in paths:
            return "while tracing"
        return ""
    if jaxpr:
        if func in _PRINT or module.endswith("pretty_printer"):
            return "while printing the jaxpr of jax.make_jaxpr"
        return "in jax.make_jaxpr"
    if module == "jax._src.compiler" or func in _COMPILE:
        return "while compiling"
    if module == "jax._src.interpreters.mlir" or func in _LOWER:
        return "while lowering"
    if func in {"block_until_ready", "_value"}:
        return "while running"
    return ""


def cut(text: str, limit: int) -> str:
    """``text`` (one line) in at most ``limit`` characters, cut at a word boundary with "…"."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    if re.match(r"\w", text[limit - 1]):  # (a word goes on past the limit: drop it whole)
        space = head.rfind(" ")
        stops = [m.start() for m in re.finditer(r"\W", head)]
        j = space if space > len(head) // 2 or not stops else stops[-1]
        head = head[:max(j, 0)] if stops or space > 0 else ""
    head = head.rstrip(" ,;:(-=")
    return head + "…" if head else ""


def short_message(message: str) -> str:
    """A JAX message as a title quotes it: without the make_jaxpr mark, XLA's status prefix and source paths."""
    from oracles.internal_error import JAXPR_MARK

    text = " ".join(message.removeprefix(JAXPR_MARK).split())
    text = re.sub(r"^(INTERNAL|UNKNOWN|INVALID_ARGUMENT|UNIMPLEMENTED|FAILED_PRECONDITION): ", "", text)
    text = re.sub(r"\((?:external/)?[\w./-]*/([\w.-]+\.(?:cc|h|cpp)):\d+\)", r"in \1", text)  # RET_CHECK's source
    return re.sub(r"^error: ", "", re.sub(r"(?:<program>|[\w./-]*repro\.py):\d+:\d+: ", "", text))


def jax_words(message: str) -> str:
    """A finding's one-line message (oracles/*.py) as an issue or a repro says it: "values differ from the
    same computation without sharding" (not "from the reference"), "the process died (SIGSEGV)" (not
    "worker died"), without the mark of an error of ``jax.make_jaxpr`` (the issue says where it was raised).
    JAX's own text is kept as it is."""
    from oracles.internal_error import JAXPR_MARK

    text = re.sub(r"\b(differ|shapes differ|values differ) from the reference\b",
                  r"\1 from the same computation without sharding", str(message).removeprefix(JAXPR_MARK))
    return re.sub(r"^worker died \(", "the process died (", text)


def symptom(oracle: str, kind: str, message: str, site: str = "", frames: list | None = None) -> tuple:
    """(what goes wrong, a detail to quote after a colon or '') for a finding of ``oracle``."""
    if oracle == "internal-error":
        words = f"raises {kind.rsplit('.', 1)[-1]}"
        when = phase(message, site, frames)
        return (f"{words} {when}" if when else words), short_message(message)
    if oracle == "crash" and kind == "memory":
        return "takes gigabytes of memory", ""
    if oracle == "crash":
        how = {"SIGABRT": "aborts the process (SIGABRT)", "SIGSEGV": "crashes the process (SIGSEGV)"}.get(
            kind, f"kills the process ({kind})")
        line = message.removeprefix("while lowering only: ")
        fatal = "" if re.match(r"worker died|process died", line) else line
        return (how + (" when lowered" if message.startswith("while lowering only") else "")), fatal
    if oracle == "hang":
        return "hangs", ""
    if oracle == "differential":
        return ("returns an output of the wrong shape" if kind == "wrong-shape" else "returns wrong values"), ""
    if oracle == "callbacks":
        m = re.search(r"\ban? ([\w.]+(?: callback)?) (?:never ran|received|ran that)", message)
        cb = m.group(1) if m else "host callback"
        if kind == "not-called":
            return f"never calls its {cb}", ""
        if kind == "unexpected-call":
            return f"calls its {cb} when it should not", ""
        return f"passes other values to its {cb}", ""
    if oracle == "metamorphic":
        return "returns other values under jit / with spmd_axis_name than without", ""
    if oracle == "determinism":
        if kind == "within-process":
            return "lowers to different StableHLO after jax.clear_caches()", ""
        return "lowers to different StableHLO in two processes", ""
    return f"fails ({kind})", ""


def compose(program: dict, call: int | None, oracle: str, kind: str, message: str, site: str = "",
            frames: list | None = None, limit: int = TITLE_LIMIT) -> str:
    """The title: ``subject symptom[: detail]`` in at most ``limit`` characters (see the module
    docstring). ``site``: the raise site of an internal error (``jax._src.module:function``);
    ``frames``: its traceback's JAX frames when known (:func:`phase`)."""
    what, detail = symptom(oracle, kind, message, site, frames)
    variants = subject(program, call, f"{site} {message}")
    for room in (40, 25, 15):  # the most detailed subject that leaves room for that much detail
        for subj in variants:
            head = f"{subj} {what}"
            if len(head) > limit:
                continue
            if not detail:
                return head
            quoted = cut(detail, limit - len(head) - 2)
            if len(head) + 2 + min(len(detail), room) <= limit and quoted:
                return f"{head}: {quoted}"
    head = f"{variants[-1]} {what}"
    if detail and len(head) + 12 <= limit and cut(detail, limit - len(head) - 2):
        return f"{head}: {cut(detail, limit - len(head) - 2)}"
    return cut(head, limit)
