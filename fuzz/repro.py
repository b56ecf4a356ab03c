"""Repros: one finding of a program, as a script a JAX maintainer runs as is (``shardfuzz export``).

The program part is fuzz/render.py's (the same source the worker ran); this module adds what
each oracle's finding needs around it: literal inputs, the expected values or the check the
oracle made (wrong values, callbacks received, a lowering compared across processes, a
crash's earlier programs), and a line starting with :data:`BUG_MARK` when the bug shows.
"""
from __future__ import annotations

import base64
import math
import re

import numpy as np

from fuzz.render import (NEWEST_CAPS, ProgramError, _id, _int, _int_input_line, _label, _linear_helpers, _Renderer,
                         _tuple_source, _values, call_args, spec_source)
from fuzz.issue_title import jax_words
from fuzz.util import hide_install_path

LITERAL_INPUT_MAX = 8  # seeded inputs with at most this many elements are written as literal arrays
LITERAL_ARRAY_MAX = 64  # expected arrays with more elements are embedded as base64 of their bytes
LOWERING_ENV = "REPRO_LOWERING_TO"  # set by a determinism repro in the child processes it starts
CALLBACKS_MARK = "callback "  # how the message of check_callbacks' assertion starts (fuzz.export judges by it)
BUG_MARK = "BUG:"  # a repro that checks by itself (no assert) prints a line starting with this when the bug shows
# Names a repro defines at module level or that its helpers read as globals; a program
# identifier equal to one is refused (ProgramError) rather than shadowing it.
REPRO_NAMES = frozenset({
    "sys", "subprocess", "difflib", "re", "tempfile", "faulthandler", "base64", "threading", "time", "watch_memory",
    "seeded", "run_earlier", "record",
    "received", "check_outputs", "check_callbacks", "canonical", "lowering", "lowering_in", "out", "first",
    "again", "diff", "expected", "f", "mesh", "donated"})
_HISTORY = "earlier_program_{}"  # name of the function that runs history program i (crash repros)


def _printable(text, limit: int = 160) -> str:
    """The first line of an untrusted text, as printable ASCII (safe in a comment or a string literal)."""
    lines = str(text).strip().splitlines() or [""]
    return re.sub(r"[^\x20-\x7e]", "?", lines[0])[:limit]


def _float_source(v) -> str:
    """A float as source: the shortest float32 repr when it is a float32 value."""
    if math.isnan(v):
        return "np.nan"
    if math.isinf(v):
        return "np.inf" if v > 0 else "-np.inf"
    v32 = np.float32(v)
    return str(v32) if float(v32) == float(v) else repr(float(v))


def _nested_source(a: np.ndarray) -> str:
    if a.ndim == 0:
        return _float_source(float(a))
    return "[" + ", ".join(_nested_source(x) for x in a) + "]"


_DTYPES = {"float32", "float64", "float16", "int32", "int64", "bool"}


def array_source(a, module: str = "np") -> str:
    """Source of a small array (``np.array([...], np.float32)``), or of its bytes in base64 when large."""
    a = np.asarray(a)
    dtype = str(a.dtype)
    if dtype not in _DTYPES:
        raise ValueError(f"cannot embed an array of dtype {dtype}")
    if a.size > LITERAL_ARRAY_MAX:
        b64 = base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()
        return f"np.frombuffer(base64.b64decode({b64!r}), np.{dtype}).reshape({_tuple_source(map(str, a.shape))})"
    return f"{module}.array({_nested_source(a)}, {module}.{dtype})"


def _cells_source(cells) -> str:
    """Source of what a callback's host function should receive (oracles/callbacks.py's rows):
    the value at each position of its argument's block when every position has one
    (``np.array(values)``), else ``(positions, values)`` (two flat arrays, one entry per row)."""
    from oracles.callbacks import as_cells

    c = as_cells(cells)
    pos = c[:, 0].astype(np.int64)
    if np.array_equal(pos, np.arange(len(pos))):
        return array_source(c[:, 1].astype(np.float32))
    return f"({array_source(pos.astype(np.int32))}, {array_source(c[:, 1].astype(np.float32))})"


def _identifiers(program: dict) -> set:
    """Every identifier of a program that reaches the source (inputs, functions, params, variables)."""
    out = {i["name"] for i in program["inputs"]} | set(program["functions"])

    def walk(fn: dict) -> None:
        out.update(fn["params"], fn["results"])
        for e in fn["eqns"]:
            out.update(e["args"], e["outs"])
            if e["op"] == "call":
                walk(e["fn"])

    for fn in program["functions"].values():
        walk(fn)
    return out


def _free_names(fn: dict) -> set:
    """Names a function body reads that it does not define (its captures), nested bodies included."""
    defined = set(fn["params"])
    free = set()
    for e in fn["eqns"]:
        free.update(a for a in e["args"] if a not in defined)
        if e["op"] == "call":
            free.update(n for n in _free_names(e["fn"]) if n not in defined)
        defined.update(e["outs"])
    free.update(r for r in fn["results"] if r not in defined)
    return free


class _ReproRenderer(_Renderer):
    """Renders the parts of one program a repro needs: mesh, inputs, functions, call expressions.

    ``record``: io_callback host functions keep what they receive (``record(tag)``);
    otherwise they are ``lambda x: None`` / ``lambda x: x``.
    """

    def __init__(self, program: dict, caps: dict, record: bool):
        super().__init__(program, caps)
        self.record = record
        self.prepare()
        clash = sorted(_identifiers(program) & REPRO_NAMES)
        if clash:
            raise ProgramError(f"the program uses the name {clash[0]!r}, which its repro needs; rename it")

    def callback_host(self, tag: str, returns: bool) -> str:
        if self.record:
            return f"record({tag!r}{', returns=True' if returns else ''}{self._rank(tag)})"
        return "lambda x: x" if returns else "lambda x: None"

    def mesh_line(self, ind: str) -> str:
        m = self.p["mesh"]
        n_dev = math.prod(int(_int(s)) for s in m["axis_sizes"])
        shape = _tuple_source(map(_int, m["axis_sizes"]))
        names = _tuple_source(repr(_id(n)) for n in m["axis_names"])
        if self.explicit:
            types = _tuple_source(["jax.sharding.AxisType.Explicit"] * len(m["axis_names"]))
            return f"{ind}mesh = Mesh(np.array(jax.devices()[:{n_dev}]).reshape({shape}), {names}, axis_types={types})"
        return f"{ind}mesh = Mesh(np.array(jax.devices()[:{n_dev}]).reshape({shape}), {names})"

    def input_line(self, inp: dict, ind: str) -> str:
        from fuzz.values import make_input

        if inp.get("dtype", "float32") != "float32":
            return _int_input_line(inp, ind)
        name = _id(inp["name"])
        shape = tuple(int(_int(s)) for s in inp["shape"])
        shape_src = _tuple_source(map(str, shape))
        n = math.prod(shape)
        values = _values(inp)
        if values == "ones" or (values == "arange" and n == 1):
            fill = "ones" if values == "ones" else "zeros"
            host, dev = f"np.{fill}({shape_src}, np.float32)", f"jnp.{fill}({shape_src}, jnp.float32)"
        elif values == "arange":
            reshape = "" if len(shape) == 1 else f".reshape({shape_src})"
            host = f"np.arange({n}, dtype=np.float32){reshape} / {n}"
            dev = f"jnp.arange({n}, dtype=jnp.float32){reshape} / {n}"
        elif n <= LITERAL_INPUT_MAX:
            lit = _nested_source(make_input(int(_int(inp["seed"])), shape))
            host, dev = f"np.array({lit}, np.float32)", f"jnp.array({lit}, jnp.float32)"
        else:
            host = f"seeded({_int(inp['seed'])}, {shape_src})"
            dev = f"jnp.asarray({host})"
        if inp["spec"] is None:
            return f"{ind}{name} = {dev}"
        return f"{ind}{name} = jax.device_put({host}, NamedSharding(mesh, {spec_source(inp['spec'])}))"

    def needed_inputs(self, calls: list) -> list:
        """The inputs the given calls read: as arguments or captured by their functions."""
        names = set()
        for c in calls:
            names.update(c["args"])
            names.update(_free_names(self.p["functions"][c["function"]]))
        return [i for i in self.p["inputs"] if i["name"] in names]

    def definitions(self, calls: list, ind: str) -> list:
        """Mesh, inputs and functions that ``calls`` need, as lines indented by ``ind``."""
        lines = [self.input_line(i, ind) for i in self.needed_inputs(calls)]
        done = set()
        for c in calls:
            name = c["function"]
            if name in done:
                continue
            done.add(name)
            lines.append("")
            lines.extend(self.function(_id(name), self.p["functions"][name], ind))
        uses = "\n".join(lines + [self.call_expr(c) for c in calls])
        if self.context_mesh or re.search(r"\bmesh\b", uses):
            lines.insert(0, self.mesh_line(ind))
        return lines

    def call_expr(self, c: dict) -> str:
        return self.wrap(c["transforms"], _id(c["function"]))

    def args_src(self, c: dict) -> str:
        return ", ".join(call_args(c))

    def lower_expr(self, c: dict) -> str:
        """Source of the call's jitted ``.lower`` (the call is wrapped in jax.jit unless it is jitted)."""
        expr = self.call_expr(c)
        target = expr if c["transforms"] and c["transforms"][0]["kind"] == "jit" else f"jax.jit({expr})"
        return f"{target}.lower"


def _with_mesh(lines: list, context_mesh: bool, ind: str = "") -> list:
    """Lines run under ``jax.set_mesh(mesh)`` when the program's calls run under it (an Explicit
    mesh, or ``set_mesh``: as the worker runs calls)."""
    if not context_mesh:
        return lines
    return [f"{ind}with jax.set_mesh(mesh):  # calls run under the mesh"] + [
        ("    " + ln if ln.strip() else ln) for ln in lines]


def _call_label(k: int, c: dict) -> str:
    return f"call {k}: {_label(c)}"


def render_repro(program: dict, caps: dict | None, finding: dict, expected: dict | None = None,
                 history: list | None = None, *, lower_after: bool = False) -> str:
    """A standalone repro (Python source, str) that shows one recorded finding and nothing else.

    ``program``: the finding's program; ``caps``: the API of the JAX it runs on (see the
    module docstring; None: the newest); ``finding``: ``oracle``, ``kind``, ``message``
    and ``call`` (index into program["calls"]; None: the whole program), as in a report
    or corpus entry; ``expected``: the reference (``fuzz.reference.evaluate(program)``,
    ``{"results": [[array]...], "callbacks": [{tag: array}...]}``) for the differential and
    callbacks oracles (None: computed here); ``history``: programs run first in the same
    process (crash and hang findings).

    The script needs only jax and numpy, sets 8 host CPU devices itself (whatever
    XLA_FLAGS says), runs the calls up to the finding's (earlier ones in ``run_earlier``:
    an error there is printed and the script goes on) and exits with status 0 when JAX
    behaves and non-zero while the bug shows: internal-error: the call raises (traceback,
    exit 1), or, for a message starting with ``oracles.internal_error.JAXPR_MARK``, the call
    runs and printing ``jax.make_jaxpr`` of it raises; crash: the process dies (of kind ``memory``: a thread ends it, exit 1, once its
    resident memory passes the recorded limit); hang: faulthandler ends it after the recorded time
    limit (exit 1); differential / callbacks / metamorphic: an AssertionError comparing
    with the embedded expected values (tolerance of oracles/common.py ``close``);
    determinism: exit 1 after printing a line starting with :data:`BUG_MARK` and a
    unified diff of the two lowerings.

    ``lower_after`` (crash and hang findings): then lower every call, before and after
    ``jax.clear_caches()``, as the fuzzer's workers do (the main worker lowers once after
    running them, the lowering worker again after clearing caches): a crash there needs it.

    Raises ProgramError for an invalid program (or one that uses a name the repro needs),
    ValueError for one this JAX cannot express or a finding this function cannot show
    (an unknown oracle, a call index out of range).
    """
    from oracles.common import TOLERANCE
    from oracles.determinism import _VOLATILE
    from oracles.internal_error import JAXPR_MARK
    from oracles.metamorphic import equivalence_key

    caps = caps or NEWEST_CAPS
    oracle = finding.get("oracle")
    calls = program["calls"]
    k = finding.get("call")
    if oracle in ("crash", "hang"):
        k = None
    if k is not None and not (isinstance(k, int) and 0 <= k < len(calls)):
        raise ValueError(f"the finding's call {str(k)[:20]} is not a call of the program (it has {len(calls)})")
    if oracle in ("differential", "callbacks", "metamorphic", "determinism") and k is None:
        raise ValueError(f"a {oracle} finding needs the index of its call")
    known = ("internal-error", "crash", "hang", "differential", "callbacks", "metamorphic", "determinism")
    if oracle not in known:
        raise ValueError(f"no repro for oracle {str(oracle)[:40]!r} (known: {', '.join(known)})")
    if oracle in ("differential", "callbacks") and expected is None:
        from fuzz.reference import evaluate

        expected = evaluate(program, caps)
    kept = list(calls) if k is None else list(calls[:k + 1])
    history = list(history or []) if oracle in ("crash", "hang") else []

    rr = _ReproRenderer(program, caps, record=oracle == "callbacks")
    body = rr.definitions(kept, "")
    # jax_enable_checks as the worker ran each program (it restores the setting after each):
    # one line at the top when all had it, else one per program when some did
    checks = [bool(h.get("checks")) for h in history] + [bool(program.get("checks"))]
    checks_each = len(set(checks)) > 1
    earlier_lines = []  # statements that run calls for the state they leave
    for i, h in enumerate(history, 1):
        hr = _ReproRenderer(h, caps, record=False)
        fn = _HISTORY.format(i)
        earlier_lines += ["", "", f"def {fn}():  # an earlier program the finding needs, run first in this process"]
        if checks_each:
            earlier_lines.append(f'    jax.config.update("jax_enable_checks", {bool(h.get("checks"))})')
        earlier_lines += [ln for ln in hr.definitions(h["calls"], "    ") if ln.strip()]
        runs = [f"    run_earlier({f'program {i}, ' + _call_label(j, c)!r}, {hr.call_expr(c)}, {hr.args_src(c)})"
                for j, c in enumerate(h["calls"])]
        earlier_lines += _with_mesh(runs, hr.context_mesh, "    ")
    calls_src = [(j, c, rr.call_expr(c), rr.args_src(c)) for j, c in enumerate(kept)]
    # The worker copies a jit's donated arguments before it enters the mesh; a copy made under
    # jax.set_mesh is committed to the mesh instead (replicated, measured on jax 0.10.2), which
    # hid a wrong value of differential-261ffe16318b's from its export (2026-12-06@8b7f604)
    copies = {j: a for j, _, _, a in calls_src if "jnp.copy(" in a} if rr.context_mesh else {}
    donated_lines = []
    if copies:
        donated_lines = ["# a donated argument's copy is made outside the mesh, as the fuzzer made it",
                         "donated = {" + ", ".join(f"{j}: ({a},)" for j, a in copies.items()) + "}"]
        calls_src = [(j, c, e, f"*donated[{j}]" if j in copies else a) for j, c, e, a in calls_src]
    text = "\n".join(body + earlier_lines)
    has_callbacks = any(c in text for c in ("io_callback(", "jax.pure_callback(", "jax.debug.callback(",
                                            "jax.debug.print("))
    barrier = ["jax.effects_barrier()"] if has_callbacks else []

    # -- the statements that show the finding -----------------------------------------
    tail = []
    mark_j = None
    if oracle == "metamorphic":
        key = equivalence_key(calls[k])
        mark_j = next((j for j in range(k) if equivalence_key(calls[j]) == key), None)
        if mark_j is None:
            raise ValueError(f"call {k} has no earlier call of the same function under an equivalent wrapping")
    for j, c, expr, args in calls_src:
        if oracle in ("crash", "hang"):
            if str(finding.get("message", "")).startswith("while lowering only"):
                tail.append(f"run_earlier({_call_label(j, c) + ' (lowered only)'!r}, {rr.lower_expr(c)}, {args})")
            else:
                tail.append(f"run_earlier({_call_label(j, c)!r}, {expr}, {args})")
        elif k is None:  # internal-error of the whole program: every call, uncaught
            tail.append(f"jax.block_until_ready({expr}({args}))  # {_call_label(j, c)}")
        elif j < k and j != mark_j and oracle != "determinism":
            tail.append(f"run_earlier({_call_label(j, c)!r}, {expr}, {args})")
        elif j == mark_j:
            tail.append(f"first = jax.block_until_ready({expr}({args}))  # {_call_label(j, c)}")
    last = calls_src[k] if k is not None else None
    helpers = set()
    if oracle in ("crash", "hang") or any(ln.startswith("run_earlier(") for ln in tail):
        helpers.add("run_earlier")
    first_lines = [f"{_HISTORY.format(i)}()" for i in range(1, len(history) + 1)]  # (not under this mesh)
    first_lines += donated_lines
    if checks_each:
        first_lines.append(f'jax.config.update("jax_enable_checks", {checks[-1]})  # as the fuzzer ran this program')
    if history:
        helpers.add("run_earlier")
    if oracle == "hang":
        limit = re.search(r"within (\d+)", str(finding.get("message", "")))
        seconds = int(limit.group(1)) if limit else 60
        first_lines.insert(0, f"faulthandler.dump_traceback_later({seconds}, exit=True)  # the fuzzer gave up "
                              f"after {seconds} s")
    memory = oracle == "crash" and finding.get("kind") == "memory"
    if memory:
        limit = re.search(r"passed ([\d.]+) GiB", str(finding.get("message", "")))
        gib = float(limit.group(1)) if limit else 8.0
        first_lines.insert(0, f"watch_memory({gib})  # ends the process once its resident memory passes {gib} GiB")
        helpers.add("watch_memory")
    if oracle in ("crash", "hang"):
        if lower_after:
            lowerings = [f"run_earlier({_call_label(j, c) + ' (lowered)'!r}, {rr.lower_expr(c)}, {args})"
                         for j, c, expr, args in calls_src]
            tail += ["# then lower every call, before and after jax.clear_caches() (the crash may need it)",
                     *lowerings, "jax.clear_caches()", *lowerings]
        tail += barrier + [f'print("no {oracle}: JAX behaves")']
    elif oracle == "internal-error":
        if last is None:
            tail += barrier + ['print("no error: JAX behaves")']
        elif str(finding.get("message", "")).startswith(JAXPR_MARK):
            j, c, expr, args = last
            tail += [f"out = jax.block_until_ready({expr}({args}))  # {_call_label(j, c)}: runs", *barrier,
                     "# printing its jaxpr raises inside JAX; expected: it prints",
                     f"print(jax.make_jaxpr({expr})({args}))",
                     'print("no error: JAX behaves")']
        else:
            j, c, expr, args = last
            tail += [f"# {_call_label(j, c)} raises inside JAX, although the program is valid; expected: it runs",
                     f"out = jax.block_until_ready({expr}({args}))", *barrier,
                     # (the values are read back as the fuzzer's worker does: some errors only show then)
                     f'print("no error: JAX behaves; {_call_label(j, c)} returned", '
                     f'jax.tree_util.tree_map(np.asarray, out))']
    elif oracle == "differential":
        j, c, expr, args = last
        want = expected["results"][k]
        tail += [f"out = {expr}({args})  # {_call_label(j, c)}", *barrier,
                 "# expected: the same computation without sharding, on whole arrays with NumPy (under a "
                 "derivative: eagerly with plain jax.numpy)",
                 "expected = [" + ", ".join(array_source(a) for a in want) + "]",
                 "check_outputs(out, expected)"]
        helpers.add("check_outputs")
    elif oracle == "metamorphic":
        j, c, expr, args = last
        tail += [f"out = {expr}({args})  # {_call_label(j, c)}: same function and arguments as call {mark_j}; the "
                 f"wrappings differ only by jit / spmd_axis_name, which do not change values",
                 "check_outputs(out, first)"]
        helpers.add("check_outputs")
    elif oracle == "callbacks":
        j, c, expr, args = last
        want = expected["callbacks"][k]
        from oracles.callbacks import MAY_SKIP, callback_kinds

        kinds = callback_kinds(program)
        skip = sorted(_id(t) for t in want if kinds.get(t) in MAY_SKIP)
        tail += ["received.clear()", f"out = jax.block_until_ready({expr}({args}))  # {_call_label(j, c)}",
                 "jax.effects_barrier()",
                 "# expected: the values each host function receives at each position of its argument's local "
                 "block, computed without sharding: one array by position, or (positions, values)",
                 "expected = {" + ", ".join(f"{_id(t)!r}: {_cells_source(v)}" for t, v in sorted(want.items())) + "}",
                 f"check_callbacks(received, expected, may_skip={set(skip) if skip else set()!r})"]
        helpers.add("check_callbacks")
    elif oracle == "determinism":
        j, c, expr, args = last
        earlier = [f"    run_earlier({_call_label(i, ci)!r}, {e}, {a})" for i, ci, e, a in calls_src[:k]]
        if earlier:
            helpers.add("run_earlier")
        canon = [f"    text = re.sub({p.pattern!r}, {r!r}, text)  # a host callback is named by its address"
                 for p, r in _VOLATILE] if has_callbacks else []
        fn = ["def lowering():  # the StableHLO text of " + _call_label(j, c), *earlier,
              f"    text = {rr.lower_expr(c)}({args}).as_text()", *canon, "    return text", ""]
        if finding.get("kind") == "within-process":
            tail += fn + ["first = lowering()", "jax.clear_caches()", "again = lowering()",
                          'diff = "\\n".join(difflib.unified_diff(first.splitlines(), again.splitlines(), '
                          '"first lowering", "after jax.clear_caches()", lineterm=""))',
                          "if diff:",
                          f'    print("{BUG_MARK} the lowering of {_call_label(j, c)} changes after '
                          f'jax.clear_caches():")',
                          "    print(diff[:8000])", "    sys.exit(1)",
                          'print("the same lowering after jax.clear_caches(): JAX behaves")']
        else:
            seeds = re.search(r"PYTHONHASHSEED=(\d+) and (\d+)", str(finding.get("message", "")))
            a, b = seeds.groups() if seeds else ("0", "1")
            tail += fn + [f"if os.environ.get({LOWERING_ENV!r}):  # a child process (below): write its lowering, stop",
                          f"    with open(os.environ[{LOWERING_ENV!r}], \"w\") as out:",
                          "        out.write(lowering())",
                          "    sys.exit(0)",
                          "",
                          "",
                          "def lowering_in(seed):  # the lowering in a fresh process (this script) with this hash seed",
                          "    with tempfile.TemporaryDirectory() as d:",
                          "        path = os.path.join(d, \"lowering.mlir\")",
                          f"        env = {{**os.environ, \"PYTHONHASHSEED\": seed, {LOWERING_ENV!r}: path}}",
                          "        subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, check=True)",
                          "        with open(path) as text:",
                          "            return text.read()",
                          "",
                          "",
                          f'first, again = lowering_in("{a}"), lowering_in("{b}")',
                          'diff = "\\n".join(difflib.unified_diff(first.splitlines(), again.splitlines(), '
                          f'"PYTHONHASHSEED={a}", "PYTHONHASHSEED={b}", lineterm=""))',
                          "if diff:",
                          f'    print("{BUG_MARK} the lowering of {_call_label(j, c)} differs between '
                          f'PYTHONHASHSEED={a} and {b}:")',
                          "    print(diff[:8000])", "    sys.exit(1)",
                          'print("the same lowering in both processes: JAX behaves")']
        helpers |= {"sys", "difflib"} | ({"re"} if has_callbacks else set()) | (
            {"subprocess", "tempfile"} if finding.get("kind") != "within-process" else set())

    # -- helpers ----------------------------------------------------------------------
    tol = TOLERANCE["float32"]
    helper_src = []
    if "run_earlier" in helpers:
        helper_src += ["", "",
                       "def run_earlier(label, f, *args):  # " + (
                           "runs a call: the crash shown here kills the process in one of them; "
                           "a Python error is printed and the next call runs" if oracle in ("crash", "hang") else
                           "a call kept for the state it leaves; its own error is not the bug shown here"),
                       "    try:", "        jax.block_until_ready(f(*args))",
                       *(["        jax.effects_barrier()"] if has_callbacks else []),
                       "    except Exception as e:",
                       '        print(f"{label} raised as expected, going on: {type(e).__name__}: '
                       '{str(e).strip()[:200]}")',
                       "    else:", '        print(f"{label} ran")']
    if "watch_memory" in helpers:
        helper_src += ["", "",
                       "def watch_memory(gib):  # end this process (exit 1) once its resident memory passes gib GiB "
                       "(Linux: /proc)",
                       "    def watch():",
                       "        while True:",
                       '            with open("/proc/self/status") as status:',
                       '                kib = next(int(ln.split()[1]) for ln in status if ln.startswith("VmRSS:"))',
                       "            if kib > gib * 2 ** 20:",
                       '                sys.stderr.write(f"Memory: resident {kib / 2 ** 20:.1f} GiB, past {gib} GiB\\n")',
                       "                faulthandler.dump_traceback()",
                       "                os._exit(1)",
                       "            time.sleep(0.2)",
                       "    threading.Thread(target=watch, daemon=True).start()"]
    if "check_outputs" in helpers:
        helper_src += ["", "",
                       f"def check_outputs(out, expected, rtol={tol}):  # tolerance: "
                       f"atol scales with the largest |expected|",
                       '    assert len(out) == len(expected), f"{len(out)} outputs, expected {len(expected)}"',
                       "    for i, (got, want) in enumerate(zip(out, expected)):",
                       "        got, want = np.asarray(got), np.asarray(want)",
                       '        print(f"output {i}: got\\n{got}\\nexpected\\n{want}")',
                       '        assert got.shape == want.shape, f"output {i}: shape {got.shape}, expected {want.shape}"',
                       "        atol = rtol * max(1.0, float(np.abs(want[np.isfinite(want)]).max(initial=0.0)))",
                       '        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"output {i}")',
                       '    print("the outputs match: JAX behaves")']
    if "check_callbacks" in helpers:
        helper_src += ["", "",
                       f"def check_callbacks(received, expected, may_skip=(), tol={tol}):  # as sets of values "
                       f"per position: how often a callback runs is not specified; pure_callback / "
                       f"jax.debug.callback calls may be elided (may_skip)",
                       "    def covered(v, pool):  # within tol of a value of pool, or equal (inf), or both NaN",
                       "        return bool(np.isin(v, pool) or (np.isnan(v) and np.isnan(pool).any())",
                       "                    or np.any(np.abs(pool - v) <= tol * max(1.0, abs(v))))",
                       "",
                       "    for tag in sorted(set(received) | set(expected)):",
                       "        got = {}  # position within the argument's local (trailing) dims -> values",
                       "        for x, rank in received.get(tag, []):",
                       "            rank = rank if rank <= x.ndim else 0",
                       "            if x.size:",
                       "                for p, col in enumerate(x.reshape(-1, int(np.prod(x.shape[x.ndim - rank:]))).T):",
                       "                    got.setdefault(p, set()).update(col.tolist())",
                       "        want = expected.get(tag, np.zeros(0))",
                       "        pos, vals = want if isinstance(want, tuple) else (np.arange(len(want)), want)",
                       "        want = {}",
                       "        for p, v in zip(pos.tolist(), vals.tolist()):",
                       "            want.setdefault(p, []).append(v)",
                       "        for p in sorted(set(got) | set(want)):",
                       "            g, w = np.array(sorted(got.get(p, ()))), np.array(want.get(p, []))",
                       '            print(f"callback {tag!r} at position {p}: received {g}, expected {w}")',
                       "            missing = [] if tag in may_skip else [v for v in w if not covered(v, g)]",
                       "            extra = [v for v in g if not covered(v, w)]",
                       '            assert not missing and not extra, f"' + CALLBACKS_MARK + '{tag!r} at position {p}: '
                       'missing {missing}, unexpected {extra}"',
                       '    print("every callback received what it should: JAX behaves")',
                       "", "",
                       "received = {}  # callback tag -> [(array its host function received, rank of the local dims)]",
                       "",
                       "",
                       "def record(tag, returns=False, rank=0):  # a host function that keeps what it receives",
                       "    def host(x):",
                       "        received.setdefault(tag, []).append((np.asarray(x, np.float64), rank))",
                       "        return x if returns else None",
                       "    return host"]
    every = set(rr.helpers).union(*[_helpers_of(h, caps) for h in history])
    if "grad" in every:
        helper_src += ["", "", "def tuple_grad(f, argnums):  # grad of the first (scalar) result, as a tuple",
                       "    return lambda *a: tuple(jax.grad(lambda *b: f(*b)[0], argnums=argnums)(*a))"]
    if "value_and_grad" in every:
        helper_src += ["", "", "def tuple_value_and_grad(f, argnums):  # value and grads of the first result",
                       "    def g(*a):",
                       "        v, gs = jax.value_and_grad(lambda *b: f(*b)[0], argnums=argnums)(*a)",
                       "        return (v, *gs)",
                       "    return g"]
    helper_src += _linear_helpers(every)
    text = "\n".join(body + earlier_lines + first_lines + tail)
    if re.search(r"\bseeded\(", text):
        helper_src += ["", "", "def seeded(seed, shape):  # multiples of 1/8 in [-1, 1], as the fuzzer drew them",
                       "    return np.random.default_rng(seed).integers(-8, 9, size=shape).astype(np.float32) / 8"]

    # -- header and imports -----------------------------------------------------------
    all_text = text + "\n".join(helper_src)
    version = f" on jax {_printable(caps['jax_version'], 40)}" if caps.get("jax_version") else ""
    head = [f"# Repro of a JAX bug{version}: {_printable(oracle, 20)}: "
            f"{_printable(finding.get('kind', ''), 40)}",
            f"# {_printable(jax_words(hide_install_path(finding.get('message', ''))), 110)}",
            "# `python repro.py` needs only jax and numpy; exit status 0 when JAX behaves, non-zero while the bug shows.",
            "import os",
            *(f"import {m}" for m in ("base64", "difflib", "faulthandler", "re", "subprocess", "sys", "tempfile",
                                      "threading", "time")
              if re.search(rf"\b{m}\.", all_text)),
            "",
            "# 8 host CPU devices, whatever XLA_FLAGS / JAX_PLATFORMS say (set before JAX is imported)",
            'os.environ["XLA_FLAGS"] = " ".join([f for f in os.environ.get("XLA_FLAGS", "").split()',
            '                                    if "force_host_platform_device_count" not in f]',
            '                                   + ["--xla_force_host_platform_device_count=8"])',
            'os.environ["JAX_PLATFORMS"] = "cpu"',
            "import jax"]
    if all(checks):
        head.append('jax.config.update("jax_enable_checks", True)  # JAX\'s internal invariant checks, as in its tests')
    if "jnp." in all_text:
        head.append("import jax.numpy as jnp")
    head.append("import numpy as np")
    if "io_callback(" in all_text:
        head.append("from jax.experimental import io_callback")
    if caps["shard_map"] != "jax" and re.search(r"(?<![.\w])shard_map\(", all_text):
        head.append("from jax.experimental.shard_map import shard_map")
    sharding = [n for n, pat in (("Mesh", r"\bMesh\("), ("NamedSharding", r"\bNamedSharding\("),
                                 ("PartitionSpec as P", r"\bP\(")) if re.search(pat, all_text)]
    if sharding:
        head.append("from jax.sharding import " + ", ".join(sharding))
    main = body + earlier_lines + ["", ""] + first_lines + _with_mesh(tail, rr.context_mesh)
    return "\n".join(head + helper_src + ["", ""] + _strip_blank_runs(main)) + "\n"


def _helpers_of(program: dict, caps: dict) -> set:
    r = _ReproRenderer(program, caps, record=False)
    r.definitions(program["calls"], "")
    for c in program["calls"]:
        r.call_expr(c)
    return r.helpers


def _strip_blank_runs(lines: list) -> list:
    """At most two blank lines in a row, none at the start."""
    out = []
    for ln in lines:
        if not ln.strip() and (not out or (len(out) >= 2 and not out[-1].strip() and not out[-2].strip())):
            continue
        out.append(ln)
    return out
