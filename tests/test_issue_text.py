"""The text of an exported issue (fuzz/export.py ``issue_text`` and ``title``, fuzz/issue_title.py) of each corpus entry.

No JAX runs here: the repro is rendered for the release the entry was recorded on
(fuzz.render.release_caps), the verification run is a stand-in without output, and the
expected values of a differential / callbacks repro are left to render_repro (the reference,
NumPy; eager jax.numpy only under a derivative).

Checked: a title of at most 100 characters that does not end in a cut word and names a JAX
API; an ISSUE.md in JAX's words (none of the fuzzer's own vocabulary outside what JAX itself
printed, quoted as it is); the phase of an internal error from its traceback; other releases'
outcomes listed apart from the affected ones, with what they showed.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from fuzz.export import Run, _releases_text, issue_text, load_case, title
from fuzz.issue_title import TITLE_LIMIT, jax_words, phase
from fuzz.render import release_caps
from fuzz.repro import render_repro
from fuzz.util import hide_install_path

CORPUS = sorted((Path(__file__).resolve().parent.parent / "corpus").glob("*.json"))
# the fuzzer's vocabulary, which a JAX maintainer cannot check
BANNED = re.compile(r"shardfuzz's|\btyping rules?\b|\breferences?\b|\bworkers?\b|\bfaces?\b|\bsignatures?\b|"
                    r"\bcorpus\b|\b(?:fuzz|oracles)/\w+\.py\b", re.I)
API = re.compile(r"\b(?:jax|lax|jnp)\.\w|\b(?:jit|vmap|pmap|shard_map|grad|vjp|jvp|io_callback|pure_callback)\b")
NO_RUN = Run(returncode=1, stdout="", stderr="", error=None, seconds=0.0)


def cut_mid_word(title_text: str, message: str) -> bool:
    """Whether the title ends inside a word of the message it quotes: its last 20 characters stand in
    the message right before another letter, digit or _."""
    stem = title_text.removesuffix("…")
    tail = stem[-20:]
    if not tail or not re.match(r"\w", tail[-1]):
        return False
    ends = [m.end() for m in re.finditer(re.escape(tail), " ".join(message.split()))]
    text = " ".join(message.split())
    return any(e < len(text) and re.match(r"\w", text[e]) for e in ends)


def issue_of(path: Path) -> tuple:
    case = load_case(str(path), None)
    finding = {"oracle": case.oracle, "kind": case.kind, "message": case.message, "call": case.call}
    source = render_repro(case.program, release_caps(case.jax_version), finding, None, case.history)
    return case, issue_text(case, source, NO_RUN, "jax: (system info)", case.jax_version)


def prose(case, text: str) -> str:
    """ISSUE.md without what JAX itself said: the finding's message and other releases' exceptions."""
    text = text.replace(_line_of(case.message), "")
    return re.sub(r"`raises [^`]*`", "", text)


def _line_of(message: str) -> str:
    return " ".join(jax_words(hide_install_path(message)).split())[:300]


def all_titles() -> list:
    """(entry name, title) of every corpus entry, as ISSUE.md shows it without a run."""
    return [(p.stem, title(load_case(str(p), None))) for p in CORPUS]


def test_the_corpus_is_there():
    assert len(CORPUS) > 50


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_an_issue_title_is_short_whole_worded_and_names_the_jax_api(path):
    case = load_case(str(path), None)
    t = title(case)
    assert len(t) <= TITLE_LIMIT, (len(t), t)
    assert not cut_mid_word(t, hide_install_path(case.message)), t
    assert API.search(t), t
    if case.oracle == "callbacks" and case.kind == "not-called":
        assert "receive" not in t and "never" in t, t  # (it never ran: it received nothing)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_an_issue_is_in_jax_words(path):
    case, text = issue_of(path)
    hits = sorted({m.group(0) for m in BANNED.finditer(prose(case, text))})
    assert not hits, hits
    assert text.startswith(f"# {title(case)}\n")


def test_a_cut_word_is_caught():
    message = "shard_map applied to the function was given argument arrays with axis sizes that are not equal"
    assert cut_mid_word("jax.shard_map raises ValueError: ... with axis sizes tha", message)
    assert not cut_mid_word("jax.shard_map raises ValueError: ... with axis sizes…", message)


def test_the_phase_of_an_internal_error_comes_from_its_traceback():
    mark = "while printing jax.make_jaxpr: "
    trace = [("/x/jax/_src/api.py", "make_jaxpr_f"), ("/x/jax/_src/interpreters/partial_eval.py", "trace_to_jaxpr"),
             ("/x/jax/_src/core.py", "get_mat")]
    printing = [("/x/jax/_src/core.py", "__str__"), ("/x/jax/_src/core.py", "pp_jaxpr"),
                ("/x/jax/_src/core.py", "get_mat")]
    assert phase(mark + "boom", "jax._src.core:get_mat", trace) == "while tracing for jax.make_jaxpr"
    assert phase(mark + "boom", "jax._src.core:get_mat", printing) == "while printing the jaxpr of jax.make_jaxpr"
    lowering = [("/x/jax/_src/pjit.py", "_pjit_lower"), ("/x/jax/_src/interpreters/mlir.py", "jaxpr_subcomp"),
                ("/x/jax/_src/interpreters/partial_eval.py", "trace_to_jaxpr"), ("/x/jax/_src/core.py", "get_mat")]
    assert phase("boom", "jax._src.core:get_mat", lowering) == "while lowering"
    assert phase("boom", "jax._src.core:get_mat", trace) == "while tracing"
    assert phase("boom", "jax._src.core:get_mat") == ""  # (no traceback, a site of no one phase: none named)
    assert phase("boom", "jax._src.compiler:backend_compile_and_load") == "while compiling"


def test_other_releases_are_listed_apart_with_what_they_showed():
    seen = ("internal-error: builtins.ValueError: jax._src.core:f: bad (…) (bad (thing) happened in "
            "/home/me/.venv/lib/python3.11/site-packages/jax/_src/core.py)")
    releases = {"tested": {"0.9.2": {"verdict": "not applicable here",
                                     "seen": "this JAX release lacks an API shard_alike renders to (fuzz/jax_api.py)"},
                           "0.10.2": {"verdict": "reproduces"},
                           "0.11.2": {"verdict": "fails differently", "seen": seen}}}
    text = _releases_text(releases)
    assert "- affected releases: 0.10.2\n" in text
    assert ("- fails differently (another error, not counted as affected): 0.11.2: `raises ValueError: bad (thing) "
            "happened in .../site-packages/jax/_src/core.py`") in text, text
    assert "- not applicable (the release cannot run this program): 0.9.2: `this JAX release lacks the API of " \
           "shard_alike that the repro uses`" in text, text
    assert not BANNED.search(text), text
