"""Corpus entries that may be one JAX bug: candidate pairs with their evidence, and links between entries.

``shardfuzz duplicates`` lists candidate pairs (strongest first); ``shardfuzz link A B --why TEXT``
records a triage decision in both entries' ``related`` lists (file stems) and triage texts.
Reads corpus entries only (no JAX, no worker runs).

What an entry holds, and so what the evidence can be (checked on the corpus of 2026-12-07):
an entry keeps its signature (``oracle: kind: jax-site: normalized message`` for the
internal-error oracle, oracles/internal_error.py ``signature``; ``crash: SIGNAL: message``;
``differential: wrong-value: feature+...``), its ``faces`` (other signatures of the bug), its
message, program and triage text, but not the finding's traceback (fuzz.program.make_entry
drops ``details``) nor, for the differential oracle, the values (its message is only "values
differ from the reference"). So:

- raise site: the ``module:function`` of each internal-error signature (the entry's and its
  faces'), the innermost JAX frame (oracles.internal_error.jax_site);
- frame chain: JAX frames the triage text names (``core.get_mat``, ``parallel.py
  _ppermute_batcher``): the stored stand-in for the last few frames of a traceback, weaker;
- message: the normalized message of internal-error and crash signatures (oracles.common.normalize
  made them), a crash's ``Check failed:`` line among them;
- ratio of got to expected of a wrong value: from the triage text only ("twice the right",
  "1/4 of the right", "gives 1.0 for 2.0"), weaker;
- partitioner / XLA pass: keywords of the triage text (Shardy only / GSPMD too / algsimp),
  weakest: a conflict counts against the pair;
- a triage text that names the other entry, and the ops both programs use: supporting only.
"""
from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import click

from fuzz.util import UsageError

# evidence weights (a pair is proposed when its strong evidence reaches MIN_SCORE)
W_SITE, W_COMMON_SITE, W_MESSAGE, W_SIMILAR, W_FRAME, W_RATIO = 3.0, 1.0, 3.0, 1.5, 1.5, 2.0
W_MENTION, W_PARTITIONER, W_CONFLICT, W_OPS = 1.0, 0.5, -1.0, 0.5
MIN_SCORE = 1.5
MIN_WORDS = 5  # words (3 letters or more) a message needs to be compared by similarity
# sites through which any XLA error passes, and JAX's jaxpr checker (jax_enable_checks), which reports
# type errors that many bugs make: the same one says little about the bug
GENERIC_SITES = frozenset({"jax._src.compiler:backend_compile_and_load", "jax._src.api:block_until_ready",
                           "jax._src.interpreters.pxla:__call__", "jax._src.dispatch:apply_primitive",
                           "jax._src.core:check_jaxpr", "?"})
# a site shared by this many entries or more is common (an API check many bugs reach)
COMMON_SITE_ENTRIES = 4
GENERIC_MESSAGES = re.compile(r"^(worker died|timed out|hang)\b")
# an entry file stem (oracles.SAVABLE, as the schema's ``related`` pattern)
STEM = re.compile(r"\b((?:callbacks|crash|determinism|differential|hang|internal-error|metamorphic)-[0-9a-f]{12})\b")
_SIG = re.compile(r"^internal-error: ([^:\s]+(?:\.[^:\s]+)*): ([\w.]+:[\w<>]+): (.*)$", re.S)
_CRASH = re.compile(r"^crash: (\w+): (.*)$", re.S)
# JAX source modules whose functions a triage text names as frames ("core.get_mat", "parallel.py _x")
_JAX_MODULES = ("core|batching|partial_eval|ad|pxla|mlir|pjit|shard_map|parallel|lax|slicing|api|array|dispatch|"
                "primitives|indexing|scatter|sharding_impls|named_sharding|callback|custom_derivatives|loops|"
                "control_flow|debugging|compiler|sharding|utils|convolution|windowed_reductions")
_FRAME_NAMED = re.compile(r"\b(?:jax[./]_src[./](?:[a-z_]+[./])*)?(" + _JAX_MODULES + r")(?:\.py\s+|[.:])(_?[a-z][a-z0-9_]*)\b")
_INTERNAL_MODULES = frozenset({"core", "batching", "partial_eval", "ad", "pxla", "mlir", "pjit", "dispatch",
                               "sharding_impls", "named_sharding", "compiler"})
_RULE = re.compile(r"_(rule|batcher|transpose|lowering|abstract_eval|impl)$")
_NUM = r"(-?\d+(?:\.\d+)?)"
_RATIOS = [
    (re.compile(r"\btwice\b|\btwo times\b|\bdoubled\b", re.I), lambda m: 2.0),
    (re.compile(r"\bhalf (?:of )?the right\b", re.I), lambda m: 0.5),
    (re.compile(r"\b(\d+) times the right\b", re.I), lambda m: float(m.group(1))),
    (re.compile(r"\bthe right (?:one|value) times (\d+)\b", re.I), lambda m: float(m.group(1))),
    (re.compile(r"\b1/(\d+) of the right\b", re.I), lambda m: 1.0 / float(m.group(1))),
    (re.compile(r"\b(?:gives|returns|is) " + _NUM + r" for " + _NUM + r"\b"),
     lambda m: float(m.group(1)) / float(m.group(2)) if float(m.group(2)) else None),
]
_SHARDY_ONLY = re.compile(r"right with GSPMD|GSPMD right|\(GSPMD\) the value is right|behaves with GSPMD|"
                          r"Shardy'?s (?:path|partitioning)|Shardy-path|Shardy bug|jax_use_shardy_partitioner False\)?[^.]{0,40}right",
                          re.I)
_BOTH_PARTITIONERS = re.compile(r"wrong with GSPMD|stays with GSPMD|both partitioners|with GSPMD too|"
                                r"GSPMD[^.]{0,30}(?:fails|wrong) (?:alike|too)", re.I)
_ALGSIMP_FIXES = re.compile(r"right with (?:XLA's )?algsimp|algsimp[^.]{0,30}(?:off|disabled)[^.]{0,20}"
                            r"(?:makes it go|fixes|right)", re.I)
_ALGSIMP_NOT = re.compile(r"algsimp off does not change|with algsimp off \(not|wrong[^.]{0,60}algsimp off", re.I)


@dataclass
class Traits:
    """What one entry shows about its bug (see the module docstring): ``sites`` {site: from a face?},
    ``messages`` {(kind, normalized message)}, ``frames`` named in the triage, ``ratios`` of got to
    expected, ``tags`` of partitioner / pass keywords, ``mentions`` (other entry stems the triage
    names), ``ops`` of the program, ``linked`` (signatures of faces, stems of ``related``)."""

    stem: str
    signature: str
    sites: dict = field(default_factory=dict)
    messages: set = field(default_factory=set)
    frames: set = field(default_factory=set)
    ratios: set = field(default_factory=set)
    tags: set = field(default_factory=set)
    mentions: set = field(default_factory=set)
    ops: frozenset = frozenset()
    faces: frozenset = frozenset()
    related: frozenset = frozenset()


@dataclass
class Pair:
    """A candidate duplicate: entry stems ``a`` < ``b``, ``score`` (sum of the evidence weights),
    ``evidence`` [(weight, kind, detail)], strongest first, and ``linked`` (how the entries are
    linked already: "related", "faces" or "")."""

    a: str
    b: str
    score: float
    evidence: list
    linked: str = ""

    def to_json(self) -> dict:
        """The pair as a JSON object (``shardfuzz duplicates --json``)."""
        return {"a": self.a, "b": self.b, "score": round(self.score, 2), "linked": self.linked or None,
                "evidence": [{"weight": w, "kind": k, "detail": d} for w, k, d in self.evidence]}


def parse_signature(sig: str) -> tuple:
    """(site, kind, normalized message) of an internal-error or crash signature; (None, None, None) for
    the others (differential, callbacks ...: their signature is a feature set, not a message).
    A crash has no site (None)."""
    m = _SIG.match(sig)
    if m:
        return m.group(2), m.group(1), m.group(3).strip()
    m = _CRASH.match(sig)
    if m:
        return None, m.group(1), m.group(2).strip()
    return None, None, None


def ratios(text: str) -> set:
    """Ratios of got to expected that a triage text states (see _RATIOS), rounded to 4 digits; empty
    when it states none. Free text: a ratio of another face, or of a shape, may slip in (weak evidence)."""
    out = set()
    for pat, value in _RATIOS:
        for m in pat.finditer(text):
            v = value(m)
            if v is not None and v > 0 and abs(v - 1.0) > 1e-6:
                out.add(round(v, 4))
    return out


def tags(text: str) -> set:
    """Partitioner / XLA pass keywords of a triage text: "shardy-only", "both-partitioners",
    "algsimp-fixes", "algsimp-not" (several may hold: then they say nothing)."""
    out = set()
    if _SHARDY_ONLY.search(text):
        out.add("shardy-only")
    if _BOTH_PARTITIONERS.search(text):
        out.add("both-partitioners")
    if _ALGSIMP_FIXES.search(text):
        out.add("algsimp-fixes")
    if _ALGSIMP_NOT.search(text):
        out.add("algsimp-not")
    for a, b in (("shardy-only", "both-partitioners"), ("algsimp-fixes", "algsimp-not")):
        if a in out and b in out:
            out -= {a, b}
    return out


def named_frames(text: str) -> set:
    """``module:function`` of the JAX frames a text names ("core.get_mat", "parallel.py _x", "jax._src.core:x").

    A module whose name is also a public namespace (``lax.pad``, ``api.jit``) counts only with a
    private function or a rule's name (``lax._unbroadcast``, ``parallel.py _ppermute_batcher``)."""
    out = set()
    for m in _FRAME_NAMED.finditer(text):
        module, fn = m.group(1), m.group(2)
        if module in _INTERNAL_MODULES or fn.startswith("_") or _RULE.search(fn):
            out.add(f"{module}:{fn}")
    return out


def _short(site: str) -> str:
    """``core:get_mat`` of ``jax._src.core:get_mat`` (what a triage text would name)."""
    module, _, fn = site.partition(":")
    return f"{module.rsplit('.', 1)[-1]}:{fn}"


def traits(stem: str, entry: dict) -> Traits:
    """The :class:`Traits` of a corpus entry (a dict fuzz.program.load_entry accepted)."""
    from fuzz.features import op_names

    t = Traits(stem, entry["signature"])
    for i, sig in enumerate([entry["signature"], *entry.get("faces", [])]):
        site, kind, msg = parse_signature(sig)
        if site:
            t.sites.setdefault(site, i > 0)
            if i == 0:
                t.sites[site] = False
        if kind and msg and not GENERIC_MESSAGES.match(msg):
            t.messages.add((kind, msg))
    text = entry.get("triage", "")
    t.frames = named_frames(text)
    if entry["oracle"] == "differential" and entry["kind"] == "wrong-value":
        t.ratios = ratios(text)
    t.tags = tags(text)
    t.mentions = set(STEM.findall(text)) - {stem}
    t.ops = op_names(entry["program"])
    t.faces = frozenset(entry.get("faces", []))
    t.related = frozenset(entry.get("related", []))
    return t


def _jaccard(a, b) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _words(msg: str) -> set:
    return set(re.findall(r"[A-Za-z_]{3,}", msg))


def compare(x: Traits, y: Traits, site_count: dict) -> Pair:
    """The evidence that entries ``x`` and ``y`` are one bug. ``site_count``: {site: how many entries
    have it} (a common site weighs less)."""
    ev = []
    for site in sorted(set(x.sites) & set(y.sites)):
        via = " (through a face)" if x.sites[site] or y.sites[site] else ""
        if site in GENERIC_SITES or site_count.get(site, 0) >= COMMON_SITE_ENTRIES:
            ev.append((W_COMMON_SITE, "same raise site, common", f"{site}{via}: {site_count.get(site, 0)} entries"))
        else:
            ev.append((W_SITE, "same raise site", site + via))
    same = x.messages & y.messages
    for kind, msg in sorted(same):
        ev.append((W_MESSAGE, "same message", f"{kind}: {msg[:120]}"))
    if not same:
        # (a message-less assert's "raised in FILE in FUNCTION" is its site, compared above; a message
        # of few words shares them by chance: "Check failed: ShapeUtil::X(…)")
        best = max(((_jaccard(_words(a[1]), _words(b[1])), a, b) for a in x.messages for b in y.messages
                    if a[0] == b[0] and min(len(_words(a[1])), len(_words(b[1]))) >= MIN_WORDS
                    and not (a[1].startswith("raised in ") or b[1].startswith("raised in "))),
                   default=None, key=lambda t: t[0])
        if best and best[0] >= 0.6:
            ev.append((W_SIMILAR, "similar message", f"{best[0]:.2f} of words shared: {best[1][1][:80]!r} / "
                                                     f"{best[2][1][:80]!r}"))
    xs, ys = {_short(s) for s in x.sites}, {_short(s) for s in y.sites}
    chain = ((x.frames | xs) & (y.frames | ys)) - (xs & ys)
    for frame in sorted(chain):
        ev.append((W_FRAME, "frame named in triage (weaker)", frame))
    for r in sorted(x.ratios & y.ratios):
        ev.append((W_RATIO, "ratio got/expected in triage (weaker)", f"{r:g}"))
    if y.stem in x.mentions or x.stem in y.mentions:
        who = " and ".join(s.stem for s, o in ((x, y), (y, x)) if o.stem in s.mentions)
        ev.append((W_MENTION, "triage names the other (read it: may say 'unlike')", f"triage of {who}"))
    strong = sum(w for w, _, _ in ev)
    if strong > 0:  # supporting evidence only where there is some other
        for tag in sorted(x.tags & y.tags):
            ev.append((W_PARTITIONER, "partitioner/pass keyword (weak)", tag))
        for a, b in (("shardy-only", "both-partitioners"), ("algsimp-fixes", "algsimp-not")):
            if (a in x.tags and b in y.tags) or (b in x.tags and a in y.tags):
                ev.append((W_CONFLICT, "partitioner/pass keywords conflict (weak)", f"{a} vs {b}"))
        j = _jaccard(x.ops, y.ops)
        if j >= 0.5:
            ev.append((W_OPS, "ops shared by the programs (weak)", f"{j:.2f}: {'+'.join(sorted(x.ops & y.ops))}"))
    linked = ""
    if y.stem in x.related or x.stem in y.related:
        linked = "related"
    elif y.signature in x.faces or x.signature in y.faces:
        linked = "faces"
    ev.sort(key=lambda e: -e[0])
    a, b = sorted((x.stem, y.stem))
    return Pair(a, b, sum(w for w, _, _ in ev), ev, linked)


def find_duplicates(pairs: list, min_score: float = MIN_SCORE) -> list:
    """Candidate duplicates among corpus entries ``pairs`` [(path, entry)] (fuzz.program.corpus_files):
    each :class:`Pair` whose evidence weighs ``min_score`` or more, or that is linked already,
    strongest first (linked pairs after unlinked ones of the same score)."""
    ts = [traits(Path(p).stem, e) for p, e in pairs]
    site_count: dict = {}
    for t in ts:
        for s in t.sites:
            site_count[s] = site_count.get(s, 0) + 1
    out = []
    for x, y in combinations(ts, 2):
        p = compare(x, y, site_count)
        if p.score >= min_score or p.linked == "related":
            out.append(p)
    return sorted(out, key=lambda p: (-p.score, bool(p.linked), p.a, p.b))


def load(corpus_dir: str) -> list:
    """[(path, entry)] of a corpus directory; UsageError (one line) when it is missing, empty or holds a bad entry."""
    from fuzz.program import CorpusError, corpus_files

    d = Path(corpus_dir)
    if not d.is_dir():
        raise UsageError(f"no corpus directory at {d.resolve()}; run from the repository root or pass --corpus DIR")
    try:
        pairs = corpus_files(d)
    except CorpusError as e:
        raise UsageError(str(e)) from None
    if not pairs:
        raise UsageError(f"{d.resolve()} holds no corpus entries (*.json); pass --corpus DIR")
    return pairs


def link(corpus_dir: str, a: str, b: str, why: str, today: str | None = None) -> tuple:
    """Link entries ``a`` and ``b`` (file stems, ``.json`` optional) of ``corpus_dir`` as possibly one bug:
    each stem goes into the other's ``related`` list and "Possibly the same bug as OTHER: WHY" into both
    triage texts. Both entries are read again, both new entries validated, then each written atomically
    (fuzz.program.write_entry). Returns (path a, path b, changed?). Raises UsageError (nothing written)
    for a missing entry, a stem linked to itself, an empty ``why`` or a bad entry."""
    from fuzz.program import CorpusError, load_entry, validate_entry, write_entry

    why = " ".join(str(why).split())
    if not why:
        raise UsageError("--why is empty; say in a few words why the two entries may be one bug")
    stems = [s.removesuffix(".json") for s in (a, b)]
    if stems[0] == stems[1]:
        raise UsageError(f"{stems[0]} cannot be linked to itself; give two entries")
    paths = [Path(corpus_dir) / f"{s}.json" for s in stems]
    for s, p in zip(stems, paths):
        if not STEM.fullmatch(s) or not p.is_file():
            raise UsageError(f"no entry {s!r} in {Path(corpus_dir).resolve()}; give file names from there")
    try:
        entries = [load_entry(p) for p in paths]
    except CorpusError as e:
        raise UsageError(str(e)) from None
    day = today or datetime.date.today().isoformat()
    new, changed = [], False
    for entry, other in zip(entries, reversed(stems)):
        related = list(entry.get("related", []))
        note = f"Possibly the same bug as {other} (linked {day}): {why}"
        if other not in related:
            related.append(other)
            changed = True
        triage = entry.get("triage", "")
        if f"Possibly the same bug as {other}" not in triage:
            triage = (triage + "\n" if triage else "") + note
            changed = True
        new.append({**entry, "related": related, "triage": triage})
    if not changed:
        return paths[0], paths[1], False
    try:
        for p, e in zip(paths, new):
            validate_entry(e, str(p))
    except CorpusError as e:
        raise UsageError(str(e)) from None
    for p, e in zip(paths, new):
        write_entry(p, e)
    return paths[0], paths[1], True


# ------------------------------------------------------------------------------ the commands

def _text(pairs: list, shown: int) -> str:
    lines = []
    for p in pairs[:shown]:
        state = f"  [linked: {p.linked}]" if p.linked else ""
        lines.append(f"{p.score:5.1f}  {p.a}  {p.b}{state}")
        for w, kind, detail in p.evidence:
            lines.append(f"       {w:+.1f} {kind}: {detail}")
    return "\n".join(lines)


@click.command("duplicates")
@click.option("--corpus", "corpus_dir", default="corpus", show_default=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the pairs as JSON (a list of objects).")
@click.option("--min-score", type=click.FloatRange(min=0), default=MIN_SCORE, show_default=True,
              help="Leave out pairs whose evidence weighs less.")
@click.option("--unlinked", is_flag=True, help="Only pairs not linked yet (by related or faces).")
def duplicates(corpus_dir, as_json, min_score, unlinked):
    """List corpus entries that may be one JAX bug, strongest evidence first.

    Evidence: the JAX frame that raised (signatures and faces), the normalized message or
    Check-failed line, JAX frames and got/expected ratios the triage texts name, partitioner
    and XLA pass keywords (weak). Link a pair that is one bug with ``shardfuzz link A B --why``.
    """
    pairs = find_duplicates(load(corpus_dir), min_score)
    if unlinked:
        pairs = [p for p in pairs if not p.linked]
    if as_json:
        click.echo(json.dumps([p.to_json() for p in pairs], indent=1))
        return
    if not pairs:
        click.echo("no candidate duplicates")
        return
    click.echo(_text(pairs, len(pairs)))
    n = sum(1 for p in pairs if not p.linked)
    click.echo(f"{len(pairs)} pair(s), {n} not linked; link one bug with: shardfuzz link A B --why TEXT")


@click.command("link")
@click.argument("a")
@click.argument("b")
@click.option("--why", required=True, help="Why the two entries may be one bug (appended to both triage texts).")
@click.option("--corpus", "corpus_dir", default="corpus", show_default=True, type=click.Path(file_okay=False))
def link_command(a, b, why, corpus_dir):
    """Link two corpus entries (file names) as possibly one bug: both get the other in ``related``."""
    pa, pb, changed = link(corpus_dir, a, b, why)
    click.echo(f"linked {pa.stem} and {pb.stem}" if changed else f"{pa.stem} and {pb.stem} are linked already")
