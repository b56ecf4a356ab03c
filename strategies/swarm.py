"""Swarm testing and the avoidance of known bugs, on top of ``programs(disabled=...)``.

Swarm testing (Groce, Zhang, Eide, Chen, Regehr: "Swarm Testing", ISSTA 2012): instead of
letting every program use every feature of the grammar, each program first draws a random
subset of features to leave out (each one with probability 1/2), so that programs differ
more from one another and a feature that suppresses a bug (here: an op that usually
raises a known error first) is absent from half of the programs.

Avoidance of known bugs: a campaign on a release with many known bugs spends much of its
time on programs that die on one of them before their values can be compared (jax 0.10.2:
13-19% of fresh programs). For every known signature the campaign has hit, the generator
leaves out, with probability ``AVOID_PROBABILITY``, one of the names (ops, transforms,
"call") of the smallest program seen with it: that lowers the weight of the feature set
the bug needs without removing any feature from the grammar.

The names are those ``strategies.programs.programs`` accepts in ``disabled``: the ops of
the registry (fuzz/ops/), the transforms (``fuzz.typecheck.TRANSFORMS``) and "call".
"""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz import ops as O
from fuzz import typecheck as T
from fuzz.render import NEWEST_CAPS
from strategies.programs import programs

AVOID_PROBABILITY = 0.5  # per known bug and program: leave out one of its names


def swarmable() -> tuple:
    """The names a program may leave out (sorted): ops, transforms and "call"."""
    return tuple(sorted(set(O.REGISTRY) | set(T.TRANSFORMS) | {"call"}))


def program_names(program: dict) -> frozenset:
    """The swarmable names a program uses: its ops, its transform kinds, and "call" if it nests calls."""
    out: set = set()

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


@st.composite
def swarm_programs(draw, caps: dict = NEWEST_CAPS, swarm: bool = False, avoid: tuple = ()):
    """A program of ``strategies.programs.programs`` with some names disabled.

    ``swarm``: leave out each swarmable name with probability 1/2 (drawn, so Hypothesis
    shrinks toward leaving nothing out). ``avoid``: name sets of known bugs (from
    :func:`program_names` of the smallest program that showed each); for each, with
    probability ``AVOID_PROBABILITY``, one of its names is left out. Returns the program
    dict (``fuzz/schemas/program.schema.json``); never raises for a valid ``caps``.
    """
    disabled: set = set()
    if swarm:
        for name in swarmable():
            if draw(st.booleans()):
                disabled.add(name)
    for names in avoid:
        names = sorted(set(names) & set(swarmable()))
        if names and draw(st.integers(0, 99)) < AVOID_PROBABILITY * 100:
            disabled.add(draw(st.sampled_from(names)))
    return draw(programs(caps, disabled=frozenset(disabled)))
