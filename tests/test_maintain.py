"""``shardfuzz reduce --also-on``: a reduction that keeps the finding on other releases too (fake runners, no JAX)."""
import contextlib
import math

from fuzz.maintain import fails_alike, finding_on, reduce_entry
from fuzz.program import make_entry
from fuzz.render import NEWEST_CAPS
from support.programs import call, eqn, fn, program, shard_map
from oracles.common import Finding


class FakeRunner:
    """A runner whose 'JAX' shows ``rule(program)`` (a Finding or None) on call 0."""

    def __init__(self, version, rule):
        self.caps = {**NEWEST_CAPS, "jax_version": version, "n_devices": 8}
        self.rule = rule
        self.runs = 0

    def trusting_fresh(self):
        return contextlib.nullcontext()

    def run(self, prog):
        self.runs += 1
        f = self.rule(prog)
        return ([f] if f is not None else []), ""


def devices(prog):
    return math.prod(prog["mesh"]["axis_sizes"])


NEW = Finding("internal-error", "builtins.ValueError", "newest wording", 0)
OLD = Finding("internal-error", "builtins.AssertionError", "oldest wording", 0)
OTHER = Finding("internal-error", "builtins.TypeError", "another bug", 0)


def newest(prog):  # fails with any mesh: a reduction alone shrinks it to one device
    return NEW if prog["calls"] else None


def oldest(prog):  # the same bug, worded otherwise, shows only with 2 devices or more
    if not prog["calls"]:
        return None
    return OLD if devices(prog) >= 2 else OTHER


def entry_of(prog):
    f = NEW
    return make_entry({"signature": f.signature, "oracle": f.oracle, "kind": f.kind, "message": f.message,
                       "call": 0}, prog, {"jax_version": "0.10.2"})


PROGRAM = program(mesh=(("x", 4),), inputs=[("x0", (4,), 1)],
                  functions={"f0": fn(["a"], [eqn("sin", ["a"], ["b"]), eqn("cos", ["b"], ["c"])], ["c"])},
                  calls=[call("f0", [shard_map([[["x"]]], [[["x"]]])], ["x0"])])


def test_fails_alike_asks_for_the_finding_the_release_showed_not_the_main_one():
    old = FakeRunner("0.4.26", oldest)
    assert finding_on(old, PROGRAM, "internal-error", 0).signature == OLD.signature
    assert finding_on(old, PROGRAM, "differential", 0) is None
    assert fails_alike(old, PROGRAM, OLD, 0)
    assert not fails_alike(old, PROGRAM, NEW, 0)  # another wording there: the main release's is not asked
    one_device = program(mesh=(("x", 1),), inputs=[("x0", (4,), 1)], functions=PROGRAM["functions"],
                         calls=PROGRAM["calls"])
    assert not fails_alike(old, one_device, OLD, 0)  # another bug there


def test_a_reduction_also_on_an_old_release_keeps_what_that_release_needs():
    alone = reduce_entry(entry_of(PROGRAM), FakeRunner("0.10.2", newest), max_runs=200, max_seconds=60)
    assert alone.entry is not None and devices(alone.entry["program"]) == 1
    both = reduce_entry(entry_of(PROGRAM), FakeRunner("0.10.2", newest), max_runs=200, max_seconds=60,
                        also=[FakeRunner("0.4.26", oldest)])
    assert both.entry is not None and devices(both.entry["program"]) == 2
    assert both.entry["signature"] == NEW.signature
    assert both.lines_after <= both.lines_before


def test_an_entry_the_other_release_does_not_show_is_left_unchanged():
    res = reduce_entry(entry_of(PROGRAM), FakeRunner("0.10.2", newest), also=[FakeRunner("0.4.26", lambda p: None)])
    assert res.entry is None and "0.4.26" in res.why and "no internal-error finding" in res.why
