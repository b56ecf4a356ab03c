"""A campaign reduces each new finding, and counts findings already in the corpus apart.

Uses a real JAX bug of jax 0.10.2 (an eager io_callback with a result on a committed
input raises inside JAX: corpus/internal-error-16e66adcd88f.json) hidden in a larger
program, so that the reduction has something to remove.
"""
import collections
import contextlib
import json
import time

import pytest

from fuzz.campaign import Campaign, program_key
from fuzz.maintain import program_lines
from oracles.common import Finding
from support.programs import JIT, call, eqn, fn, program, shard_map


def bloated():
    body = fn(["a", "b"], [eqn("cos", ["b"], ["u"]), eqn("mul", ["u", "b"], ["w"]),
                           eqn("io_callback", ["a"], ["v"], tag="cb1", ordered=False, returns=True, stop_gradient=False),
                           eqn("tanh", ["w"], ["t"]), eqn("sin", ["v"], ["s"]), eqn("add", ["t", "t"], ["z"])],
              ["s", "z"])
    p = program(mesh=(("y", 2),), inputs=[("x0", (), 0), ("x1", (4, 2), 3)], functions={"f0": body},
                calls=[call("f0", [JIT], ["x0", "x1"]), call("f0", [], ["x0", "x1"])])
    p["inputs"][0]["spec"] = []  # committed with NamedSharding(mesh, P())
    return p


@pytest.fixture(scope="module")
def campaign():
    c = Campaign(seconds=3600, determinism=False)
    c.start = __import__("time").monotonic()
    yield c
    c.close()


def test_a_new_finding_is_reduced_to_a_few_lines(campaign):
    p = bloated()
    found = campaign.run_program(p)
    [f] = [f for f in found if f.oracle == "internal-error"]
    assert f.call == 1  # the eager call; the jitted one works
    sig = campaign.reduce(f.signature)
    rec = campaign.records[sig]
    assert rec.reduced and rec.reduction_runs > 0
    assert rec.finding.call == 0  # the jitted call was dropped, the index followed
    assert program_lines(rec.program) < program_lines(p) <= 12
    assert program_lines(rec.program) <= 5
    assert rec.finding.signature == sig
    assert campaign.report()["findings"][0]["reduced"] is True


def test_corpus_findings_are_known_not_new(campaign):
    [f] = [f for f in campaign.run_program(bloated()) if f.oracle == "internal-error"]
    campaign.corpus[f.signature] = "internal-error-x.json"  # as if loaded from the corpus (Campaign.__init__)
    campaign.known.add(f.signature)
    records = dict(campaign.records)
    counts = {s: r.count for s, r in records.items()}
    campaign.run_program(bloated())
    assert campaign.records == records and {s: r.count for s, r in records.items()} == counts
    assert campaign.known_hits[f.signature] == 1 and campaign.known_seconds > 0
    assert campaign.report()["known"] == [{"signature": f.signature, "entry": "internal-error-x.json", "count": 1}]


def test_findings_past_the_shrink_share_are_reduced_later(campaign):
    import time

    [f] = [f for f in campaign.run_program(bloated()) if f.oracle == "internal-error"]
    sig = f.signature
    campaign.records.pop(sig, None)  # (earlier tests recorded it, or made it a corpus finding)
    campaign.corpus.pop(sig, None)
    campaign.known.discard(sig)
    campaign.run_program(bloated())
    assert not campaign.records[sig].reduced
    campaign.defer([sig])
    spent, campaign.shrink_spent = campaign.shrink_spent, 10 ** 9  # the share is used up: it waits
    campaign.reduce_pending(time.monotonic() + 120)
    assert campaign.pending == [sig] and not campaign.records[sig].reduced
    campaign.shrink_spent = spent
    campaign.reduce_pending(time.monotonic() + 120, share=False)  # the end of a campaign
    assert campaign.pending == [] and campaign.records[sig].reduced


def test_one_wrong_value_bug_has_one_signature_however_its_transforms_nest():
    from oracles.common import value_signature

    inner = fn(["a"], [eqn("all_to_all", ["x0"], ["v"], axes=["i"], split_axis=0, concat_axis=0)], ["v"])
    vmap_i = {"kind": "vmap", "in_axes": [0], "out_axes": [0], "axis_name": "i", "spmd_axis_name": None}
    at_call = program(inputs=[("x0", (1,), 0)], functions={"f0": inner}, calls=[call("f0", [vmap_i], ["x0"])])
    nested = program(inputs=[("x0", (1,), 0)],
                     functions={"f0": fn([], [eqn("call", ["x0"], ["w"], transforms=[vmap_i], fn=inner)], ["w"])},
                     calls=[call("f0", [], [])])
    a = value_signature("differential", "wrong-shape", at_call, [0])
    assert a == value_signature("differential", "wrong-shape", nested, [0])
    assert a != value_signature("differential", "wrong-value", at_call, [0])
    assert "all_to_all" in a and "vmap" in a


A2A_SIGNATURE = "differential: wrong-shape: all_to_all+capture+vmap+vmap_axis_name"  # the reduced program's


def all_to_all_bloated() -> dict:
    """vmap of all_to_all on a closed-over operand (corpus/differential-83bfe5218ca5.json) under
    jit, with ops and transforms around it that the bug does not need (wrong shape on 0.10.2)."""
    inner = fn(["a"], [eqn("all_to_all", ["x0"], ["v"], axes=["i"], split_axis=0, concat_axis=0),
                       eqn("sin", ["a"], ["s"]), eqn("mul", ["s", "s"], ["m"])], ["v", "m"])
    vmap_i = {"kind": "vmap", "in_axes": [0], "out_axes": [0, 0], "axis_name": "i", "spmd_axis_name": None}
    body = fn(["b"], [eqn("call", ["b"], ["w", "z"], transforms=[JIT, vmap_i], fn=inner), eqn("cos", ["z"], ["c"])],
              ["w", "c"])
    return program(inputs=[("x0", (2,), 0)], functions={"f0": body}, calls=[call("f0", [JIT], ["x0"])])


def test_a_wrong_value_bug_reduces_to_one_record():
    """vmap of all_to_all on a closed-over operand gives the wrong shape (corpus/differential-83bfe5218ca5.json):
    while it is reduced, its smaller programs carry other value signatures, which must not become new findings."""
    import time

    p = all_to_all_bloated()
    c = Campaign(seconds=3600, determinism=False)
    c.start = time.monotonic()
    ran = {}  # the programs run, by key (the cache keeps only their findings)
    run = c.run_program

    def run_and_keep(q):
        ran[program_key(q)] = q
        return run(q)

    c.run_program = run_and_keep
    try:
        [f] = [f for f in c.run_program(p) if f.oracle == "differential"]
        sig = c.reduce(f.signature)
        # Hypothesis may draw one of those smaller programs later: replayed from the cache, its
        # finding (counted, never recorded, not known) must not become the target of a shrink
        # (it did: KeyError in the README check of 2026-12-04@4bbee13, a 2-job campaign at 350 s)
        counted = [k for k, found in c.cache.items()
                   if any(g.signature not in c.records and g.signature not in c.known for g in found)]
        assert counted, "no smaller program carried another value signature: the test lost its premise"
        for k in counted:
            c._test(ran[k])  # (a new finding would raise _Found here; a counted one is not new)
    finally:
        c.close()
    assert list(c.records) == [sig]
    assert sig == A2A_SIGNATURE
    assert c.records[sig].reduced and c.records[sig].count > 1  # smaller programs were counted, not recorded


def test_a_reduction_goes_past_the_corpus_signatures_it_meets_to_the_smallest_program():
    """A value finding's signature names what its program uses, so reducing it passes through
    other signatures; one that is a corpus signature (a known bug's face, which may name more
    features than a new bug needs) must not end the reduction and make the finding pass for
    known: the finding is judged on its smallest program (here a new one), and only there a
    corpus signature makes it known (``shrunk_to_known``). JAX is faked: any program with an
    all_to_all "gives a wrong shape", its signature the program's features."""
    import time

    from fuzz.features import features

    def fake_jax(program):  # (Campaign.run_program's result: the findings of one program)
        feats = features(program)[0]
        return [Finding("differential", "wrong-shape", "", call=0,
                        signature="differential: wrong-shape: " + "+".join(sorted(feats)))] if "all_to_all" in feats else []

    p = all_to_all_bloated()  # and a second call, whose features the reduction drops apart from jit's
    p["functions"]["f1"] = fn(["a"], [eqn("sin", ["a"], ["s"])], ["s"])
    p["calls"].append(call("f1", [shard_map([[None]], [[None]], check_vma=False)], ["x0"]))

    def reduce_in(corpus: dict):
        c = Campaign(seconds=3600, determinism=False, corpus_signatures=corpus)
        c.start = time.monotonic()
        seen = []  # the signatures of the candidates the reducer ran

        def run(q):
            found = fake_jax(q)
            seen.extend(g.signature for g in found)
            return found

        c.run_program = run
        try:
            [f] = fake_jax(p)
            c.record(f, p, "")
            return c, f, c.reduce(f.signature), seen
        finally:
            c.close()

    c, f, final, seen = reduce_in({})
    assert final in c.records and c.records[final].reduced and c.report()["shrunk_to_known"] == 0
    passed = set(seen) - {f.signature, final}
    assert passed, "the reduction met no other signature: the test lost its premise"
    c, _, sig, _ = reduce_in({s: "differential-x.json" for s in passed})
    assert sig == final and list(c.records) == [final] and c.report()["shrunk_to_known"] == 0
    c, _, sig, _ = reduce_in({final: "differential-y.json"})
    assert sig == final and c.records == {} and c.known_hits[final] == 1
    assert c.report()["shrunk_to_known"] == 1 and c.aliases == {f.signature: final}


def test_a_shrink_candidate_showing_only_a_known_bug_of_its_kind_is_not_the_finding():
    """Hypothesis' shrink may drop the call that shows the finding and keep another that shows
    a known bug of the same oracle and kind: that candidate is neither the target (the shrink
    does not move to it) nor a reason to stop and call the finding known."""
    c = Campaign(seconds=3600, determinism=False, corpus_signatures={A2A_SIGNATURE: "differential-83bfe5218ca5.json"})
    c.start = time.monotonic()
    try:
        f = Finding("differential", "wrong-shape", "", call=0,
                    signature="differential: wrong-shape: all_to_all+capture+jit+vmap+vmap_axis_name")
        c.record(f, all_to_all_bloated(), "")  # (as if run: no JAX needed)
        c.target, c.target_start = f.signature, time.monotonic()
        c.cache[program_key(bloated())] = [Finding("differential", f.kind, "", call=0, signature=A2A_SIGNATURE)]
        c._test(bloated())  # neither _Found (a smaller program of the finding) nor _ShrinkOver
        assert c.target == f.signature and f.signature in c.records and c.shrunk_to_known == 0
    finally:
        c.close()


def test_without_shrinking_a_finding_is_kept_as_found():
    import time

    c = Campaign(seconds=3600, determinism=False, shrink=False)
    c.start = time.monotonic()
    try:
        c._test(bloated())  # a shrinking campaign raises here to shrink the new finding
        [rec] = [r for r in c.records.values() if r.finding.oracle == "internal-error"]
        assert rec.program == bloated() and not rec.shrunk and not rec.reduced
        assert c.pending == []
        c.reduce_pending(time.monotonic() + 60, share=False)
        assert not rec.reduced and rec.reduction_runs == 0
        assert c.report()["shrink"] is False
    finally:
        c.close()


def test_a_shrink_out_of_time_ends_at_once():
    """Once a shrink is out of time, a program the shrinker has not run ends the Hypothesis run
    (fuzz.campaign._ShrinkOver, let through by Hypothesis); returning instead let the
    shrinker go on drawing programs for minutes (a 150-s campaign ran 371 s). A program
    already run is replayed from the cache, and no JAX run starts."""
    import time

    from fuzz.campaign import _ShrinkOver

    c = Campaign(seconds=1, determinism=False)
    try:
        c.start = time.monotonic() - 100
        c.target, c.target_start = "some finding", time.monotonic() - 100
        ran = []
        c.run_program = lambda p: ran.append(p) or []
        with pytest.raises(_ShrinkOver):
            c._test(bloated())
        assert ran == []
        c.cache[program_key(bloated())] = []
        c._test(bloated())  # known: replayed, nothing raised
        assert ran == []
    finally:
        c.close()


def wrong_without_callbacks(source: str) -> str:
    """A source hook: a program without io_callback computes tanh as sin (a wrong value)."""
    return source if "io_callback(" in source else source.replace("jnp.tanh(", "jnp.sin(")


@contextlib.contextmanager
def known_bloated_bug(needs: frozenset):
    """A campaign with the ``wrong_without_callbacks`` hook where the bug bloated()'s eager call
    raises is known (as from the corpus) with the op set ``needs``: yields (campaign, finding)."""
    c = Campaign(seconds=3600, determinism=False, source_hook=wrong_without_callbacks)
    c.start = time.monotonic()
    try:
        [f] = [f for f in c.run_program(bloated()) if f.oracle == "internal-error"]
        assert c.look_past_runs == 0 and not any(r.finding.oracle == "differential" for r in c.records.values())
        c.records.clear()
        c.corpus[f.signature] = "internal-error-x.json"
        c.known.add(f.signature)
        c.needs[f.signature] = frozenset(needs)
        yield c, f
    finally:
        c.close()


def test_a_known_bug_is_looked_past_and_what_it_hid_is_found():
    """bloated()'s eager call raises a known bug that needs its io_callback; run again without
    it, the call's other outputs are judged, and the wrong tanh the hook planted in programs
    without io_callback is recorded (queued for reduction, not shrunk by Hypothesis)."""
    with known_bloated_bug({"io_callback", "sin"}) as (c, f):  # (as from the corpus entry's program)
        found = c.run_program(bloated())
        assert [g.signature for g in found if g.oracle == "internal-error"] == [f.signature]
        assert not any(g.oracle == "differential" for g in found)  # the variant's findings are its own
        assert c.look_past_runs == 1 and c.look_past_clear == 1 and c.look_past_seconds > 0
        recs = [r for r in c.records.values() if r.finding.oracle == "differential"]  # (jit and eager calls)
        assert recs and all("io_callback" not in json.dumps(r.program) and r.finding.signature in c.pending
                            for r in recs)
        assert c.needs[f.signature] == {"io_callback", "sin"}
        rep = c.report()
        assert (rep["look_past_runs"], rep["look_past_clear"]) == (1, 1)


def test_ops_a_known_bug_turns_out_not_to_need_leave_its_set():
    """A variant without ``cos`` still raises the known bug: cos is not what it needs."""
    c = Campaign(seconds=3600, determinism=False)
    c.start = __import__("time").monotonic()
    try:
        [f] = [f for f in c.run_program(bloated()) if f.oracle == "internal-error"]
        c.known.add(f.signature)
        c.corpus[f.signature] = "internal-error-x.json"
        c.needs[f.signature] = frozenset({"cos", "io_callback", "matmul"})
        c.look_past = False
        c.run_program(bloated())
        assert c.look_past_runs == 0 and c.needs[f.signature] == {"cos", "io_callback"}  # no matmul in it
        c.look_past = True
        c.needs[f.signature] = frozenset({"cos"})
        c.run_program(bloated())
        assert c.look_past_runs == 1 and c.look_past_clear == 0 and c.needs[f.signature] == frozenset()
        c.run_program(bloated())
        assert c.look_past_runs == 1  # nothing left to drop
    finally:
        c.close()


def test_a_used_up_op_set_falls_back_to_one_op_of_its_families_at_a_time():
    """The known bug's op set is used up (no op of it in the program): variants drop one op at
    a time of the families of its reduced program's ops, at most LOOK_PAST_TRIES of them, ops
    that cleared it before first; the first clear variant ends the tries."""
    from fuzz.campaign import LOOK_PAST_TRIES

    with known_bloated_bug(frozenset()) as (c, f):
        c.seed_needs[f.signature] = frozenset({"sub"})  # binary: bloated() has add and mul, neither needed
        c.run_program(bloated())
        assert LOOK_PAST_TRIES == 2 and c.look_past_runs == 2 and c.look_past_clear == 0
        assert f.signature not in c.cleared
        c.seed_needs[f.signature] = frozenset({"sub", "io_callback"})  # io_callback comes last in the registry
        c.run_program(bloated())
        assert c.look_past_runs == 4 and c.look_past_clear == 0  # add and mul again: the tries ran out
        c.cleared[f.signature] = collections.Counter({"io_callback": 1})
        found = c.run_program(bloated())
        assert c.look_past_runs == 5 and c.look_past_clear == 1  # io_callback first, and clear: no more tries
        assert c.cleared[f.signature]["io_callback"] == 2 and not any(g.oracle == "differential" for g in found)
        assert any(r.finding.oracle == "differential" and "io_callback" not in json.dumps(r.program)
                   for r in c.records.values())  # the variant's wrong tanh, recorded


def vma_bug(source: str) -> str:
    """A source hook: a program with a shard_map that checks vma raises at its tanh; one
    without computes tanh as sin (a wrong value that only the check_vma=False variant shows)."""
    if "check_vma=False" in source:
        return source.replace("jnp.tanh(", "jnp.sin(")
    return source.replace("jnp.tanh(", "jnp.tanh(None + ")


def test_a_known_bug_of_a_vma_checking_shard_map_is_looked_past_with_the_checks_off():
    """The known bug has no op set (as for shard_map spec errors): the program is run again
    with every shard_map's check_vma False (all its ops kept), first, and what that hid is
    recorded; a program with no shard_map gets no such variant."""
    from fuzz.campaign import VMA_CHECKS_OFF

    inner = fn(["a"], [eqn("tanh", ["a"], ["t"]), eqn("mul", ["t", "a"], ["m"])], ["m"])
    body = fn(["b"], [eqn("call", ["b"], ["w"], transforms=[shard_map([[["x"]]], [[["x"]]])], fn=inner)], ["w"])
    p = program(mesh=(("x", 2),), inputs=[("x0", (4,), 0)], functions={"f0": body},
                calls=[call("f0", [JIT], ["x0"])])
    c = Campaign(seconds=3600, determinism=False, source_hook=vma_bug)
    c.start = time.monotonic()
    try:
        [f] = [f for f in c.run_program(p) if f.oracle == "internal-error"]
        assert c.look_past_runs == 0 and not any(r.finding.oracle == "differential" for r in c.records.values())
        assert not c.records[f.signature].look_past  # (a drawn program's)
        c.records.clear()
        c.corpus[f.signature] = "internal-error-x.json"
        c.known.add(f.signature)
        c.needs[f.signature] = frozenset()
        c.seed_needs[f.signature] = frozenset({"mul"})  # one op of its family: the checks go first all the same
        c.run_program(p)
        assert (c.look_past_runs, c.look_past_clear) == (1, 1)
        assert c.cleared[f.signature] == collections.Counter({VMA_CHECKS_OFF: 1})
        assert (c.report()["look_past_vma_runs"], c.report()["look_past_vma_clear"]) == (1, 1)
        [rec] = [r for r in c.records.values() if r.finding.oracle == "differential"]
        assert '"check_vma": false' in json.dumps(rec.program) and '"tanh"' in json.dumps(rec.program)
        assert rec.look_past and c.report()["findings"][0]["look_past"] is True
    finally:
        c.close()
    with known_bloated_bug(frozenset()) as (c, f):  # no shard_map, no op family: nothing to run
        c.run_program(bloated())
        assert c.look_past_runs == 0


def test_a_variant_that_raises_any_finding_known_before_it_ran_is_not_clear():
    """look_past_clear counts variants that raised no finding known before they ran: the
    variant's own new finding does not spoil it, a known one without an op set does."""
    with known_bloated_bug({"io_callback"}) as (c, f):
        c.run_program(bloated())
        assert (c.look_past_runs, c.look_past_clear) == (1, 1)  # its new differential finding: still clear
        new = sorted(s for s, r in c.records.items() if r.finding.oracle == "differential")
        assert new and all(s in c.known for s in new)
        for s in new:  # now in the corpus, with no op set
            c.corpus[s] = "differential-x.json"
        c.run_program(bloated())
        assert (c.look_past_runs, c.look_past_clear) == (2, 1)
