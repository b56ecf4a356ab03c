"""docs/bugs.md: one line per root cause the corpus holds, made from the entries (so it can be redone).

    python -m fuzz.bugs_page [--corpus corpus] [--out docs/bugs.md] [--release X.Y.Z]

Each corpus entry is one root cause (its other signatures are its ``faces``). A line gives the
entry, the component its triage names (:func:`component`), the symptom (from the oracle and
the finding's kind), the releases it reproduces on (``releases.affected``, fuzz/verdicts.py),
its verdict on ``--release`` (default: the newest release any entry has a verdict for) and
the public reports in its ``upstream``. Entries are untrusted: every text put in the table is
one line without ``|``, and addresses come from the validated ``upstream`` field only.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from fuzz.util import atomic_write_text, hide_install_path, version_tuple
from fuzz.verdicts import REPRODUCES, affected_text, verdict

COMPONENTS = ("JAX transform", "Shardy", "GSPMD", "XLA:CPU")
# (GSPMD as a word: "Cannot convert GSPMDSharding" is JAX's error; StableHLO's verifier is JAX's lowering)
_GSPMD = re.compile(r"SPMD partitioner|\bGSPMD\b|spmd_partitioner|(?<!Stable)HLO verifier|convolution_handler|"
                    r"XLA aborts|XLA's SPMD|XLA SPMD|XLA/SPMD|hlo_instruction")


def component(triage: str) -> str:
    """Which part of the stack an entry's triage text blames, by the words of its opening (first 300
    characters): "XLA:CPU"; else "Shardy" when Shardy is named without GSPMD doing the same
    ("GSPMD and Shardy alike" is the XLA SPMD partitioner: "GSPMD"); else "GSPMD" for the XLA SPMD
    partitioner (its handlers, its verifier); else "JAX transform" (JAX's own tracing and
    transforms: vmap, shard_map, grad, jit ...). A heuristic: the triage text is prose."""
    head = (triage or "")[:300]
    if "XLA:CPU" in head:
        return "XLA:CPU"
    if "Shardy" in head[:200] and not re.search(r"Shardy alike|both partitioners|GSPMD and Shardy", head):
        return "Shardy"
    if _GSPMD.search(head):
        return "GSPMD"
    return "JAX transform"


def symptom(entry: dict) -> str:
    """A few words for what a user sees, from the entry's oracle and kind (and message, shortened)."""
    kind = str(entry.get("kind", "")).removeprefix("builtins.")
    words = {
        "internal-error": f"raises {kind}",
        "crash": f"process dies ({kind})",
        "hang": "never returns",
        "differential": "wrong shape" if kind == "wrong-shape" else "silent wrong values",
        "callbacks": "io_callback host function sees wrong values or does not run",
        "metamorphic": "jit / spmd_axis_name change the values",
        "determinism": "StableHLO text differs between processes",
    }.get(entry.get("oracle"), kind)
    msg = _cell(hide_install_path(entry.get("message", "")), 70)
    return f"{words}: {msg}" if msg and entry.get("oracle") in ("internal-error", "crash") else words


def _cell(text: str, limit: int = 200) -> str:
    """One table cell: one line, no '|', backticks or HTML, at most ``limit`` characters."""
    text = " ".join(str(text).split()).replace("|", "/").replace("`", "'").replace("<", "&lt;").replace(">", "&gt;")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def newest_release(entries: list) -> str | None:
    """The newest release any entry has a recorded verdict for (None: none)."""
    found = {v for e in entries for v in ((e.get("releases") or {}).get("tested") or {})}
    return max(found, key=version_tuple) if found else None


def page(pairs: list, release: str | None = None) -> str:
    """The Markdown of docs/bugs.md for corpus entries ``[(path, entry)]`` (as fuzz.program.corpus_files
    gives them) and the release whose status is shown (None: :func:`newest_release`)."""
    entries = [e for _, e in pairs]
    release = release or newest_release(entries) or "?"
    rows, open_here, counts = [], 0, {c: 0 for c in COMPONENTS}
    for path, e in pairs:
        rel = e.get("releases") or {}
        here = verdict(rel.get("tested") or {}, release) or "not checked"
        open_here += here == REPRODUCES
        comp = component(e.get("triage", ""))
        counts[comp] += 1
        upstream = ", ".join(f"[{_cell(u.split('github.com/')[1], 60)}]({u})" for u in e.get("upstream", []))
        rows.append(f"| `{Path(path).stem}` | {comp} | {_cell(symptom(e), 110)} | "
                    f"{affected_text(rel.get('affected') or [])} | {here} | {upstream or '-'} |")
    return "\n".join([
        "# Bugs the corpus holds",
        "",
        "One line per root cause (a corpus entry; its other messages are its `faces`). Made from `corpus/*.json` "
        "by `python -m fuzz.bugs_page` (redo it after `shardfuzz replay --record` or `shardfuzz bisect`).",
        "",
        "- component: the part of the stack the entry's triage text blames (fuzz/bugs_page.py `component`, "
        "by the words of the triage's opening: read the triage for the reasoning);",
        "- affected: the releases tested where the entry's own finding reproduces (`releases.affected`; releases "
        "where the program fails with another error, or cannot be written, are not counted; releases between two "
        "tested ones are assumed to behave like them);",
        f"- on {release}: the verdict recorded for jax {release} (`shardfuzz replay --jax-version {release} --record`).",
        "",
        f"{len(rows)} root causes ({', '.join(f'{n} {c}' for c, n in counts.items())}); "
        f"{open_here} reproduce on jax {release}.",
        "",
        f"| entry | component | symptom | affected | on {release} | public report |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ])


def main(argv=None) -> int:
    """Write the page; exit 2 with one line when the corpus cannot be read or the page not written."""
    from fuzz.program import CorpusError, corpus_files

    ap = argparse.ArgumentParser(prog="python -m fuzz.bugs_page", description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="corpus")
    ap.add_argument("--out", default="docs/bugs.md")
    ap.add_argument("--release", default=None, help="the release whose status is shown (X.Y.Z)")
    args = ap.parse_args(argv)
    if args.release is not None and not re.fullmatch(r"\d+\.\d+\.\d+", args.release):
        print(f"bugs_page: --release {args.release[:20]!r} is not of the form X.Y.Z (e.g. 0.12.1)", file=sys.stderr)
        return 2
    try:
        pairs = corpus_files(args.corpus)
    except CorpusError as e:
        print(f"bugs_page: {e}", file=sys.stderr)
        return 2
    if not pairs:
        print(f"bugs_page: no corpus entries in {args.corpus}; pass --corpus DIR", file=sys.stderr)
        return 2
    try:
        atomic_write_text(args.out, page(pairs, args.release))
    except OSError as e:
        print(f"bugs_page: cannot write {args.out} ({e.strerror or e}); choose another --out", file=sys.stderr)
        return 2
    print(f"{args.out}: {len(pairs)} root causes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
