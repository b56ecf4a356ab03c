"""What oracles share: the Finding record, message normalization and numeric tolerances."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

# Relative and absolute tolerance per dtype; the absolute part is scaled by the largest
# reference magnitude of the output, so that sums and matmuls of many terms do not fire.
TOLERANCE = {"float32": 1e-3, "bfloat16": 3e-2, "float16": 1e-2, "float64": 1e-9}


@dataclass
class Finding:
    """One thing an oracle flagged.

    ``oracle``: which oracle; ``kind``: exception type, signal, or the kind of mismatch;
    ``message``: one line for a human; ``call``: index of the call (None: whole
    program); ``details``: longer text (traceback, stderr tail, diff); ``signature``:
    the deduplication key.
    """

    oracle: str
    kind: str
    message: str
    call: int | None = None
    details: str = ""
    signature: str = field(default="")
    history: list = field(default_factory=list)  # sources of earlier programs a crash needs
    history_programs: list = field(default_factory=list)  # the same earlier programs (program dicts)

    def __post_init__(self):
        if not self.signature:
            self.signature = f"{self.oracle}: {self.kind}: {normalize(self.message)}"


_PATTERNS = [
    # where JAX says the error occurred: a file and line of the program or of JAX, not the bug
    (re.compile(r"(This error occurs at source:).*"), r"\1 …"),
    (re.compile(r"\b([Pp]rimitive) \w+"), r"\1 …"),  # "Primitive add requires ..." is one bug for any primitive
    (re.compile(r"\b(axis names?:?|axis:) \w+"), r"\1 …"),  # "axis name x", "with axis: y of type ..."
    # "... passed to broadcast_in_dim" / "to index_to_gather": the op that met the bad sharding
    (re.compile(r"\b(passed to) [\w.]+"), r"\1 …"),
    # JAX 0.9 prints a PartitionSpec as P('x', None), older releases as PartitionSpec('x', None)
    # (observed: the DuplicateSpecError of internal-error-cd6435c07c68 on 0.8.3 and 0.9.2)
    (re.compile(r"\bPartitionSpec\("), "P("),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    # an absolute file path (a venv's site-packages, a temporary directory) is where JAX or the
    # worker happens to live, not the bug: found in /tmp/x/.venv and replayed from /work/venv, one
    # signature (internal-error-d588cacc9fcc's "function <lambda> at .../loops.py:2735 traced for
    # scan"). A URL's path (https://github.com/...) and a relative jax/_src/core.py are kept.
    (re.compile(r"(?<![\w.:/])/(?:[^\s'\":/]+/)+[^\s'\":/]+"), "<path>"),
    # f32[4,8], float32[2,1,4@y], float32[1]{V:x} (the varying axes are a detail of the same message)
    (re.compile(r"\b[a-z]+\d*\[[^\[\]]*\](\{[^{}]*\})?"), "T[…]"),
    (re.compile(r"'[^']*'"), "'…'"),
    (re.compile(r"\"[^\"]*\""), '"…"'),
]
# Applied until nothing changes, so that nested groups collapse too: AbstractMesh(…).
# (A collapsed group becomes a placeholder without brackets until the end.)
_NESTED = [
    (re.compile(r"\([^()]*\)"), "\x01"),
    (re.compile(r"\{[^{}]*\}"), "\x02"),
    (re.compile(r"\[[^\[\]]*\]"), "\x03"),
]
_LAST = [
    (re.compile(r"\b[avgf]\d+\b"), "v"),  # shardfuzz variable / function names
    (re.compile(r"\d+"), "N"),
    (re.compile(r"\s+"), " "),
]


_CALLBACK_TRACEBACK = re.compile(r"(error calling callback: )Traceback \(most recent call last\):")
_DISPATCH = re.compile(r"(?:Error dispatching computation: )+")
_MESH = re.compile(r"\b(Abstract)?Mesh\(")
_AXIS_TYPES = re.compile(r"\b(Auto|Explicit|Manual)\b")


def _mesh_kinds(text: str) -> str:
    """Each ``Mesh(...)`` / ``AbstractMesh(...)`` of a message reduced to the axis types it names:
    ``AbstractMesh<Auto+Explicit>`` (angle brackets: the bracketed details are blanked after).
    Axis names and sizes are details of one program, but the axis types tell JAX's mesh errors
    apart: "mesh should be the same across the entire program" between an Auto and an Explicit
    mesh (internal-error-1f2028a54d22) and between two Auto meshes (a pmap's own mesh and the
    program's, jax >= 0.8.0) are two bugs. The meshes' kinds are dealt out in sorted order: JAX
    names the two meshes of that message in either order from one run to the next."""
    spans, kinds = [], []
    for m in _MESH.finditer(text):
        if spans and m.start() < spans[-1][2]:
            continue
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        spans.append((m.start(), m.group(0)[:-1], j))
        kinds.append("+".join(sorted(set(_AXIS_TYPES.findall(text[m.end():j])))))
    out, i = [], 0
    for (start, name, end), k in zip(spans, sorted(kinds)):
        out += [text[i:start], f"{name}<{k}>"]
        i = end
    return "".join(out) + text[i:]


def normalize(message: str, limit: int = 160) -> str:
    """The first line of a message with addresses, paths, shapes, names, numbers and
    bracketed details blanked; a mesh keeps only its axis types (:func:`_mesh_kinds`).

    Two messages that differ only in those are the same bug for deduplication.
    """
    lines = [ln for ln in message.strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    # a host callback that raised: XLA's first line ends in "Traceback (most recent call last):",
    # the callback's own error is the last line ("RuntimeError: Incorrect output shape for
    # return value #0: ..."); and XLA prefixes "Error dispatching computation: " once per
    # enclosing dispatch (none to three), which the nesting of jit and shard_map decides, not
    # the bug (2026-12-06@b554ed7: one all_to_all batching bug, three signatures): dropped
    if _CALLBACK_TRACEBACK.search(first) and len(lines) > 1:
        first = _CALLBACK_TRACEBACK.sub(lambda m: m.group(1) + lines[-1].strip(), first)
    first = _DISPATCH.sub("", first)
    text = _mesh_kinds(first)
    for pat, rep in _PATTERNS:
        text = pat.sub(rep, text)
    before = None
    while before != text:
        before = text
        for pat, rep in _NESTED:
            text = pat.sub(rep, text)
    for pat, rep in _LAST:
        text = pat.sub(rep, text)
    text = text.replace("\x01", "(…)").replace("\x02", "{…}").replace("\x03", "[…]")
    return text.strip()[:limit]


def close(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Whether two arrays agree within the dtype's tolerance (NaN equals NaN)."""
    if actual.shape != expected.shape:
        return False
    tol = TOLERANCE.get(str(expected.dtype), 1e-3)
    exp = np.asarray(expected, dtype=np.float64)
    act = np.asarray(actual, dtype=np.float64)
    finite = np.abs(exp[np.isfinite(exp)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    return bool(np.allclose(act, exp, rtol=tol, atol=tol * scale, equal_nan=True))


def call_label(call: dict) -> str:
    """``jit(shard_map(f))`` for a call, with the function name blanked."""
    from fuzz.typecheck import transform_name

    expr = "f"
    for t in reversed(call["transforms"]):
        name = transform_name(t)
        if t["kind"] == "vmap" and t.get("spmd_axis_name"):
            name = "vmap[spmd]"
        expr = f"{name}({expr})"
    return expr


def value_signature(oracle: str, kind: str, program: dict, calls: list) -> str:
    """The signature of a value finding: oracle, kind and what the calls use (fuzz.features names).

    A wrong value has no message and no raising frame: what locates the bug is the set
    of transforms, collectives and options the failing calls use. While a finding is
    reduced that set shrinks to what the bug needs, so two reduced programs of one bug
    share a signature however their transforms are nested (one bug once was two entries
    because the call's label, ``vmap(f)`` vs ``f``, was in the signature).
    """
    from fuzz.features import features

    used, _ = features({**program, "calls": [program["calls"][k] for k in calls]})
    return f"{oracle}: {kind}: {'+'.join(sorted(used - {'multi_call'})) or 'plain'}"


def split_value_signature(signature: str) -> tuple:
    """(oracle, kind, set of feature names) of a signature made by :func:`value_signature`."""
    oracle, _, rest = signature.partition(": ")
    kind, _, feats = rest.partition(": ")
    return oracle, kind, set(feats.split("+"))


def resembling(signature: str, known: dict) -> list:
    """Known value findings that a new value finding may be a face of: sorted entry names.

    ``signature``: a new finding's signature; ``known``: {signature: corpus entry file
    name} (:func:`fuzz.program.known_signatures`). A value signature (:func:`value_signature`)
    names what the failing calls use; a known one of the same oracle and kind whose
    features are all among the new one's may be the same bug reached through other ops
    (one wrong shape from all_to_all shows through ``.at[].add`` in one program and through
    ``take`` in the next). Only a hint for the person triaging: the finding stays new
    until ``shardfuzz save --face-of`` says otherwise. Other oracles: always ``[]``.
    """
    oracle, kind, feats = split_value_signature(signature)
    if oracle not in LABELLED:
        return []
    out = set()
    for sig, name in known.items():
        o, k, f = split_value_signature(sig)
        if (o, k) == (oracle, kind) and f <= feats:
            out.add(name)
    return sorted(out)


# Value oracles: their signature names what the failing calls use (value_signature), which
# reduction shrinks, so for them "the same finding" is the same oracle and kind.
LABELLED = ("differential", "callbacks", "metamorphic")


def same_finding(found: Finding, wanted_signature: str, wanted_oracle: str, wanted_kind: str) -> bool:
    """Whether ``found`` is the finding a reduction must keep.

    Exceptions, crashes, hangs and determinism findings: the same signature. Value
    oracles (:data:`LABELLED`): the same oracle and kind, since their signature names
    what the program uses (:func:`value_signature`), which reduction changes.
    """
    if found.oracle in LABELLED:
        return (found.oracle, found.kind) == (wanted_oracle, wanted_kind)
    return found.signature == wanted_signature
