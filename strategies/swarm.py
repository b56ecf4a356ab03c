"""Swarm testing and the avoidance of known bugs, on top of ``programs(disabled=...)``.

Swarm testing (Groce, Zhang, Eide, Chen, Regehr: "Swarm Testing", ISSTA 2012): instead of
letting every program use every feature of the grammar, each program first draws a random
subset of features to leave out (each one with probability 1/2), so that programs differ
more from one another and a feature that suppresses a bug (here: an op that usually
raises a known error first) is absent from half of the programs.

Avoidance of known bugs: a campaign on a release with many known bugs spends much of its
time on programs that die on one of them before their values can be compared (jax 0.10.2:
13-19% of fresh programs). For every known signature the campaign has hit, the generator
picks one of the names (ops, transforms, "call") of the smallest program seen with it;
each name picked is then left out with probability ``AVOID_PROBABILITY``: every known
bug is avoided at least that often, which lowers the weight of the feature set it needs
without removing any feature from the grammar. A name is drawn once however many bugs
picked it, so that no name is left out of more programs than ``AVOID_PROBABILITY`` says.
One draw per bug did otherwise: 19 of the 24 corpus entries of jax 0.10.2 need
``shard_map`` and many ``vmap`` or ``call``; with 10 known bugs hit whose smallest
programs have 8 names each, shard_map among them, shard_map was left out of 1 - (15/16)^10
= 48% of the programs, and with two bugs whose smallest program is a bare shard_map, of 75%,
which starves every collective over a mesh axis.

The names are those ``strategies.programs.programs`` accepts in ``disabled``: the ops of
the registry (fuzz/ops/), the transforms (``fuzz.typecheck.TRANSFORMS``), "call" and the
options of ``strategies.programs.OPTIONS`` (an Explicit mesh, spmd_axis_name, a vmap's
axis_name, a partial-manual shard_map, check_vma=False, capture, jax_enable_checks, a
collective over a vmap axis of a value the vmap does not batch). Without the options, a
known bug that needs one (an Explicit mesh, say) could only be avoided through the
transforms it shares with many others (vmap, shard_map).
"""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz import ops as O
from fuzz import typecheck as T
from fuzz.features import features
from fuzz.render import NEWEST_CAPS
from strategies.programs import CORE, OPTIONS, programs

AVOID_PROBABILITY = 0.5  # per known bug and program: leave out one of its names
CORE_SHARE = 4  # one program in CORE_SHARE is drawn from the core grammar alone (see swarm_programs)


def swarmable() -> tuple:
    """The names a program may leave out (sorted): ops, transforms, "call" and the options
    (``strategies.programs.OPTIONS``: explicit_mesh, spmd_axis_name, ...)."""
    return tuple(sorted(set(O.REGISTRY) | set(T.TRANSFORMS) | {"call"} | set(OPTIONS)))


def program_names(program: dict, caps: dict | None = None) -> frozenset:
    """The swarmable names a program uses: its ops, its transform kinds, "call" if it nests
    calls, and the options it uses (as ``fuzz.features.features`` names them, and
    "unbatched_collective", judged on the program typed for the release of ``caps``, None for
    the newest: :func:`_has_unbatched_collective`)."""
    out: set = set(features(program)[0] & set(OPTIONS)) if program.get("calls") else set()
    if program.get("calls") and _has_unbatched_collective(program, caps):
        out.add("unbatched_collective")

    def walk(fn: dict) -> None:
        for e in fn["eqns"]:
            if e["op"] == "call":
                out.add("call")
                out.update(t["kind"] for t in e["transforms"])
                walk(e["fn"])
            else:
                out.add(e["op"])

    for c in program.get("calls", []):
        out.update(t["kind"] for t in c["transforms"])
        fn = program.get("functions", {}).get(c["function"])
        if fn is not None:
            walk(fn)
    return frozenset(out) & frozenset(swarmable())


def _has_unbatched_collective(program: dict, caps: dict | None = None) -> bool:
    """Whether some collective of ``program`` names a vmap axis its operand does not vary over
    (:func:`strategies.programs.unbatched_collective`, judged on the typed program; False for a
    program the typing rules refuse)."""
    from strategies.programs import unbatched_collective

    hit = []

    def on_eqn(e, ctx, args):
        if not hit and unbatched_collective(e, args, ctx):
            hit.append(e)
    try:
        T.check_program(program, on_eqn=on_eqn, caps=caps)
    except (T.ProgramError, RecursionError):  # (every invalid program raises ProgramError: check_program)
        return False
    return bool(hit)


def specific(names, avoid: tuple) -> list:
    """The names of one known bug (sorted, swarmable only) that avoidance may leave out.

    A name that more than half of the known bugs' programs use (``avoid``: their name
    sets) is the grammar's backbone, not what sets this bug apart: leaving it out avoids
    every bug at once and starves what it carries. Measured on jax 0.10.2: with the
    corpus's bugs known, a 10-minute campaign drew shard_map in 18% of its programs
    against 27% without avoidance, and the collectives (which need shard_map or a named
    vmap) with it. Those names are dropped unless the bug has no other name.
    """
    names = sorted(set(names) & set(swarmable()))
    common = {n for n in names if 2 * sum(n in other for other in avoid) > len(avoid)}
    return [n for n in names if n not in common] or names


@st.composite
def swarm_programs(draw, caps: dict = NEWEST_CAPS, swarm: bool = False, avoid: tuple = (),
                   disabled: frozenset = frozenset(), core: bool = True):
    """A program of ``strategies.programs.programs`` with some names disabled.

    ``swarm``: leave out each swarmable name with probability 1/2 (drawn, so Hypothesis
    shrinks toward leaving nothing out). ``avoid``: name sets of known bugs (from
    :func:`program_names` of the smallest program that showed each); one name is picked
    for each, and each name picked is left out with probability ``AVOID_PROBABILITY``
    (once, however many bugs picked it). ``disabled``: names left out of every program
    (``shardfuzz run --disable``). ``core``: one program in :data:`CORE_SHARE` leaves out
    every name outside ``strategies.programs.CORE``, the mission's core grammar (jit,
    shard_map, vmap, grad, io_callback, the collectives, elementwise and reduction ops): as
    the grammar grew to ~60 ops and ~20 transforms each core kind became ~1 transform draw in
    15, and a composition of three of them (vmap with spmd_axis_name of a shard_map whose body
    vmaps: seed C's) ~1 program in 1000 (4 in 1000 with the core share; live collectives
    +54% over 4800 drawn programs, seeds 11-16). Returns the program
    dict (``fuzz/schemas/program.schema.json``); never raises for a valid ``caps``.
    """
    disabled = set(disabled)
    # the core grammar last: shrinking goes to the whole grammar, whose simplest options are the core's
    # (a percentage: Hypothesis draws a small range's last value less often than its share, an
    # integers(1, 4) == 4 in ~9% of the programs)
    if core and draw(st.integers(0, 99)) >= 100 - 100 // CORE_SHARE:
        disabled |= set(swarmable()) - CORE
    if swarm:
        for name in swarmable():
            if draw(st.booleans()):
                disabled.add(name)
    chosen: set = set()
    for names in avoid:  # one name per known bug, then each distinct name left out with AVOID_PROBABILITY
        names = specific(names, avoid)
        if names:
            chosen.add(draw(st.sampled_from(names)))
    for name in sorted(chosen):
        if draw(st.integers(0, 99)) < AVOID_PROBABILITY * 100:
            disabled.add(name)
    return draw(programs(caps, disabled=frozenset(disabled)))
