"""A fuzzing campaign: Hypothesis draws programs, a worker runs them, oracles judge them.

Hypothesis drives generation and shrinking (``strategies.programs``). A campaign keeps
going after a finding: the first new signature seen becomes the *target*, Hypothesis
shrinks toward the smallest program that still shows it (a short first pass), then the
op-agnostic reducer (:mod:`fuzz.reduce`) takes it to a fixed point within a budget;
once it is recorded the signature is *known* and stops failing, so each distinct bug is
reduced once. Signatures of the corpus (``corpus_signatures``) are known from the start:
they are counted apart (``known`` in the report), never reduced again.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.errors import Flaky

from fuzz import distributed
from fuzz import features as F
from fuzz import findings as findings_file
from fuzz import ops as O
from fuzz.program import program_key
from fuzz.reduce import reduce_program, without_ops, without_vma_checks
from fuzz.render import render
from fuzz.runner import Runner, default_timeout
from fuzz.typecheck import ProgramError
from oracles.common import LABELLED, Finding, same_finding
from strategies.fresh import fresh_backend
from strategies.swarm import program_names, swarm_programs

_ANNOUNCED: set = set()  # the generator errors this process has shown (announce_generator_error)


def announce_generator_error(message: str) -> None:
    """Write a generator error (fuzz.runner.generator_error: a program reached an API its JAX
    lacks) to stderr, once per message in this process."""
    import sys

    if message not in _ANNOUNCED:
        _ANNOUNCED.add(message)
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


ROUND = 100  # Hypothesis examples per round (a round ends early when a finding is shrunk)
SHRINK_BUDGET = 10.0  # seconds of Hypothesis shrinking per distinct finding (the reducer's first pass)
REDUCE_RUNS = 150  # JAX runs of the reducer per distinct finding
REDUCE_SECONDS = 60.0  # seconds of the reducer per distinct finding
# variants per program that raised a known bug whose op set is used up (see Campaign._look_past)
LOOK_PAST_TRIES = 2
# the look-past move that keeps every op and turns shard_map's vma checks off (fuzz.reduce.without_vma_checks)
VMA_CHECKS_OFF = "check_vma=False"
SHRINK_SHARE = 0.35  # at most this share of the campaign's time goes to shrinking and reducing
# Hypothesis' phases but "explain": once a test case fails, Hypothesis traces every later
# execution (sys.settrace on Python < 3.12: hypothesis.internal.scrutineer.Tracer, enabled by
# StateForActualGivenExecution._should_trace when the shrink and explain phases are both on)
# to explain the failure, which a campaign never prints; traced, generation, rendering and the
# reference ran under a tracer while shrinking (21% of the campaign process's samples in the
# tracer itself, py-spy, jax 0.10.2, 150 s)
PHASES = tuple(p for p in Phase if p is not Phase.explain)


def draw_settings(fresh: bool = True, database: ExampleDatabase | None = None,
                  max_examples: int = ROUND) -> settings:
    """The Hypothesis settings of a campaign's round of ``max_examples`` programs.

    ``fresh``: every program drawn anew (:mod:`strategies.fresh`); False: Hypothesis' own
    generate phase, which follows each draw with mutants of it. ``database``: where found
    examples are saved (and, unless a seed wraps it in :class:`SaveOnlyDatabase`, replayed).
    Raises nothing.
    """
    return settings(
        max_examples=max_examples, deadline=None, database=database, derandomize=False, phases=PHASES,
        backend=fresh_backend() if fresh else "hypothesis", suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet, report_multiple_bugs=False, print_blob=False)


class _Found(Exception):
    """Raised inside the Hypothesis test so that it shrinks the program."""


class _ShrinkOver(BaseException):
    """Raised inside the Hypothesis test when a shrink is out of time, to end it at once.

    A BaseException, so that Hypothesis does not take it for a failure but lets it through.
    Returning instead made every later candidate of the shrinker pass: Hypothesis went on
    through its shrink passes, drawing a program each time (a 150-s campaign ran 371 s, 83%
    of it drawing programs in the shrinker, py-spy, 2026-12-03@c112f03). The smallest program that
    showed the finding is already recorded (``_test``).
    """


class SaveOnlyDatabase(ExampleDatabase):
    """An example database that keeps what Hypothesis saves but gives nothing back.

    For a seeded campaign: Hypothesis's ``@seed`` switches the database off, because
    replaying stored examples first would make the run depend on earlier runs. With
    this wrapper a seeded campaign still repeats, and the failures it finds are saved
    for the next unseeded campaign (which replays them first). ``db``: the real database.
    """

    def __init__(self, db: ExampleDatabase):
        super().__init__()
        self.db = db

    def __repr__(self) -> str:
        return f"SaveOnlyDatabase({self.db!r})"

    def fetch(self, key: bytes):
        return iter(())

    def save(self, key: bytes, value: bytes) -> None:
        self.db.save(key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        self.db.delete(key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.db.move(src, dest, value)


@dataclass
class Record:
    """A distinct finding: the smallest program seen for it and how often it was hit."""

    finding: Finding
    program: dict
    source: str
    count: int = 0
    first_seconds: float = 0.0  # seconds into the campaign when first seen
    shrunk: bool = False  # False: kept as first seen (shrinking had used its share of the time)
    reduced: bool = False  # True: the reducer reached a fixed point within its budget
    reduction_runs: int = 0  # JAX runs the reducer used
    reduction_seconds: float = 0.0
    look_past: bool = False  # first seen in a look-past variant (Campaign._look_past), not a drawn program


class Campaign:
    """One campaign against one JAX (a :class:`fuzz.runner.Runner`).

    ``seconds``: generation stops after this much wall time (shrinking of a finding in
    progress may take up to ``shrink_seconds`` more); ``max_examples``: or after this
    many programs; ``seed``: Hypothesis seed (None: random); ``python``: interpreter for
    the worker; ``database``: Hypothesis example database directory (None: no database;
    with a seed it is written but not replayed, see :class:`SaveOnlyDatabase`), or a
    ``redis://`` URL: one campaign across machines (:mod:`fuzz.distributed`: the examples
    and the findings records in Redis, a signature claimed once across machines; raises
    :class:`fuzz.distributed.RedisInputError` when that server cannot be used);
    ``timeout``: per-program seconds before a hang (None: :func:`default_timeout`);
    ``findings_path``: the findings file (see :mod:`fuzz.findings`; None: none), each
    distinct finding is appended there when recorded and again when shrunk;
    ``on_finding(campaign, record)``: called after a new distinct finding was recorded
    (and appended); ``corpus_signatures``: {signature: corpus entry name} of findings
    already in the corpus: hits are counted in ``known_hits``, not recorded as findings.
    ``run_id`` and ``job``: set by ``shardfuzz run --jobs N`` (:mod:`fuzz.parallel`) for
    each of the N campaigns sharing one findings file: records carry them, and a
    signature that another job of the same run has already written there is not
    recorded (nor shrunk, nor reduced) here: its hits are counted in ``peer_hits``.
    ``shrink``: False keeps every finding as it was found (no Hypothesis shrinking, no
    reducer), e.g. to reduce it later with ``shardfuzz reduce --also-on`` so that the
    reduced program keeps failing on other releases too.
    ``fresh``: True (the default) draws every program anew (:mod:`strategies.fresh`);
    False keeps Hypothesis' own generate phase, whose draws are mostly mutants of the one
    before (``shardfuzz run --hypothesis-mutations``, for comparison).
    Raises fuzz.execute.WorkerError if the worker does not start.
    """

    def __init__(self, seconds: float = 600, max_examples: int | None = None, seed: int | None = None,
                 python: str | None = None, database: str | None = None, timeout: float | None = None,
                 shrink_seconds: float = 180, on_progress=None, determinism: bool = True,
                 source_hook=None, stop_when=None, findings_path: str | None = None, on_finding=None,
                 corpus_signatures: dict | None = None, run_id: str | None = None, job: int = 0,
                 swarm: bool = False, avoid_known: bool = True, shrink: bool = True,
                 disabled: frozenset = frozenset(), known_ops: dict | None = None, look_past: bool = True,
                 fresh: bool = True):
        self.seconds = seconds
        # every program drawn anew (strategies.fresh), not Hypothesis' mutants of its last draw
        self.fresh = fresh
        self.shrink = shrink  # False: findings are kept as found (neither shrunk nor reduced)
        self.max_examples = max_examples
        self.seed = seed
        self.shrink_seconds = shrink_seconds
        self.on_progress = on_progress or (lambda c: None)
        self.stop_when = stop_when  # stop_when(finding, program) -> bool: end the campaign at the first match
        self.matched: tuple | None = None  # (seconds into the campaign, Finding) of that match
        self.runner = Runner(python=python, determinism=determinism, timeout=timeout, source_hook=source_hook, job=job)
        self.caps = self.runner.caps
        self.stats = self.runner.stats
        self.database = database or None
        self.store = None  # a distributed campaign's Redis (fuzz.distributed.Store), with --database redis://...
        if database and distributed.is_url(database):
            try:
                self.store = distributed.Store(database, run=run_id, job=job)
            except distributed.RedisInputError:
                self.runner.close()
                raise
            self.database = self.store.address.display()  # (never the password)
            self.db = self.store.example_database()
        else:
            self.db = DirectoryBasedExampleDatabase(database) if database else None
        if self.db is not None and seed is not None:
            self.db = SaveOnlyDatabase(self.db)
        self.findings_path = findings_path
        self.findings_error = ""  # the first error appending to the findings file ('' if none)
        self.on_finding = on_finding or (lambda c, rec: None)
        # a generator error (fuzz.runner.generator_error), shown once per message: on stderr, or
        # sent to the parent by a job of a parallel run (fuzz.parallel)
        self.on_generator_error = lambda c, message: announce_generator_error(message)
        self.generator_errors_shown: set = set()
        self.started = time.time()  # wall clock (seconds since the epoch) of the campaign's start
        self.records: dict = {}
        self.pending: list = []  # signatures waiting for reduction (see reduce_pending)
        self.reducing: str | None = None  # the signature being reduced
        self.corpus = dict(corpus_signatures or {})
        self.known_hits: Counter = Counter()  # corpus signatures seen, and how often
        # seconds of programs drawn fresh that hit an already known signature (of the corpus,
        # or found earlier in this campaign): time a known bug took from the search
        self.known_seconds = 0.0
        self.swarm = swarm  # each program leaves out a random half of the grammar (strategies.swarm)
        self.avoid_known = avoid_known
        self.disabled = frozenset(disabled)  # names no program of the campaign may use (--disable)
        # {known signature: names of the smallest program seen with it}: the generator leaves
        # one of them out now and then (strategies.swarm.swarm_programs)
        self.avoid: dict = {}
        self.known: set = set(self.corpus)
        # Looking past known bugs: {known signature: the op names every program seen with it
        # uses} (seeded with the ops of the corpus entries' reduced programs, ``known_ops``,
        # and of this campaign's reduced findings). A program that raises such a signature is
        # run once more without those ops (fuzz.reduce.without_ops), so that what else it
        # holds is still judged; a variant that raises it again shows the dropped ops were
        # not what the bug needs, and they leave its set.
        self.look_past = look_past
        self.needs: dict = {sig: frozenset(ops) for sig, ops in (known_ops or {}).items()}
        # Once a bug's set is used up (programs raise it through different ops of one family:
        # the pvary assertion of d0aa84fa2c68 through any collective over a vmap axis), one op
        # at a time of the families its reduced program's ops belong to (``seed_needs``) is
        # dropped instead, the ops whose removal cleared it before first (``cleared``).
        self.seed_needs: dict = dict(self.needs)
        self.cleared: dict = {}  # {known signature: Counter of ops whose removal alone cleared it}
        self.looking_past = False
        self.look_past_runs = 0  # variants run
        self.look_past_clear = 0  # variants that raised no known signature
        self.look_past_vma_runs = 0  # of those run, the VMA_CHECKS_OFF variants
        self.look_past_vma_clear = 0  # and of those clear
        self.look_past_seconds = 0.0
        self.run_id = run_id
        self.job = job
        self.peers: set = set()  # signatures other jobs of this run wrote to the findings file
        self.peers_offset = 0  # bytes of the findings file read for them so far
        self.peer_hits: Counter = Counter()  # hits here of findings other jobs recorded
        self.aliases: dict = {}  # {old signature: new} of this campaign's records that moved (see reduce)
        self.target: str | None = None
        self.target_start = 0.0
        # findings recorded as new whose reduced program shows a corpus signature (a known bug's
        # face): counted as that known finding, no longer as findings (see reduce)
        self.shrunk_to_known = 0
        self.shrink_spent = 0.0  # seconds spent shrinking so far
        self.cache: dict = {}
        self.start = 0.0
        self.stopped = False

    # ----------------------------------------------------------------- one program
    def run_program(self, program: dict) -> list:
        """Execute and judge one program (see :meth:`fuzz.runner.Runner.run`); records its findings."""
        t0 = time.monotonic()
        found, source = self.runner.run(program)
        for message in self.runner.last_generator_errors:  # (never a finding: counted invalid, shown once)
            if message not in self.generator_errors_shown:
                self.generator_errors_shown.add(message)
                self.on_generator_error(self, message)
        shrinking = self.reducing or self.target
        if not shrinking and not self.looking_past and any(f.signature in self.known for f in found):
            self.known_seconds += time.monotonic() - t0
        ops = None
        for f in found:
            if not shrinking and f.signature in self.known:
                self._avoid(f.signature, program)
                if f.signature in self.needs:
                    ops = F.op_names(program) if ops is None else ops
                    self.needs[f.signature] &= ops  # an op this program lacks is not what the bug needs
            if f.signature in self.corpus:
                self.known_hits[f.signature] += 1
            elif f.signature in self.records:
                self.records[f.signature].count += 1
            elif shrinking in self.records and self._is_shrinking(f, self.records[shrinking].finding):
                # the finding being shrunk or reduced, under the signature of a smaller program
                self.records[shrinking].count += 1
            elif self._peer(f.signature):
                self.peer_hits[f.signature] += 1
            else:
                self.record(f, program, source)
            if self.stop_when is not None and self.matched is None and self.stop_when(f, program):
                self.matched = (time.monotonic() - self.start, f)
                self.stopped = True
        if self.look_past and not shrinking and not self.looking_past and not self.stopped:
            self._look_past(program, found)
        return found

    def _look_past(self, program: dict, found: list) -> None:
        """Run ``program`` again without the ops of the known bugs it raised (see ``needs``).

        When their sets hold none of its ops, up to :data:`LOOK_PAST_TRIES` variants each
        make one move: drop one op of the families of the ops those bugs' reduced programs
        use (``seed_needs``), or keep every op and turn off every shard_map's vma checks
        (:data:`VMA_CHECKS_OFF`, :func:`fuzz.reduce.without_vma_checks`); moves that cleared
        them before first, then the vma checks, then ops in registry order; the first
        variant clear of every known bug ends the tries. The variants' findings are
        judged as any program's; a new one is queued for reduction (it is not the drawn
        example's, so Hypothesis cannot shrink it).
        """
        raised = [f.signature for f in found if f.signature in self.known]
        if not raised:
            return
        drop = frozenset().union(*(self.needs.get(s, frozenset()) for s in raised))
        variant = without_ops(program, drop, self.caps) if drop else None
        if variant is not None:
            self._run_variant(variant)
            return
        families = {O.REGISTRY[op].family for s in raised for op in self.seed_needs.get(s, ()) if op in O.REGISTRY}
        order = {VMA_CHECKS_OFF: -1, **{op: k for k, op in enumerate(O.REGISTRY)}}
        # (no op move for a finding whose reduced program has no op: shard_map spec errors)
        moves = [op for op in F.op_names(program) if op in O.REGISTRY and O.REGISTRY[op].family in families]
        moves.append(VMA_CHECKS_OFF)  # (no variant when no shard_map checks vma: not a try)
        moves.sort(key=lambda m: (-sum(self.cleared.get(s, Counter())[m] for s in raised), order[m]))
        tries = 0
        for move in moves:
            if tries == LOOK_PAST_TRIES:
                break
            variant = (without_vma_checks(program, self.caps) if move == VMA_CHECKS_OFF
                       else without_ops(program, {move}, self.caps))
            if variant is None:
                continue
            tries += 1
            again, clear = self._run_variant(variant)
            if move == VMA_CHECKS_OFF:
                self.look_past_vma_runs += 1
                self.look_past_vma_clear += clear
            for s in set(raised) - {f.signature for f in again}:
                self.cleared.setdefault(s, Counter())[move] += 1
            if clear:
                break

    def _run_variant(self, variant: dict) -> tuple:
        """Run a look-past variant: (its findings, whether it raised no known signature)."""
        t0 = time.monotonic()
        known = set(self.known)  # (the variant's new findings become known as they are queued)
        self.looking_past = True
        try:
            again = self.run_program(variant)
        finally:
            self.looking_past = False
        clear = not any(f.signature in known for f in again)
        self.look_past_runs += 1
        self.look_past_clear += clear
        self.look_past_seconds += time.monotonic() - t0
        return again, clear

    def _avoid(self, signature: str, program: dict) -> None:
        """Remember the names of the smallest program known to show ``signature`` (for avoidance)."""
        if not self.avoid_known:
            return
        names = program_names(program, self.caps)
        old = self.avoid.get(signature)
        if names and (old is None or len(names) < len(old)):
            self.avoid[signature] = names

    def _peer(self, signature: str) -> bool:
        """Whether another job of this run has recorded ``signature`` (read from the findings file),
        or, in a distributed campaign, another machine has claimed it (:meth:`fuzz.distributed.Store.claim`;
        this machine claims it otherwise).

        A peer's signature becomes known here, so that it is neither shrunk nor reduced
        again. Without ``run_id`` (one job) and Redis, or when the file cannot be read: False.
        """
        if signature not in self.peers and self.run_id is not None and self.findings_path:
            try:
                lines, self.peers_offset = findings_file.read_since(self.findings_path, self.peers_offset)
            except OSError:
                lines = []
            self.peers.update(r.get("signature") for r in lines
                              if r.get("run") == self.run_id and r.get("job") != self.job)
        if signature not in self.peers and self.store is not None:
            self._read_peers()
            if signature not in self.peers and not self.store.claim(signature):
                self.peers.add(signature)
        if signature in self.peers:
            self.known.add(signature)
            return True
        return False

    def _read_peers(self) -> None:
        """Take in the findings records other machines pushed to Redis since the last call (checked:
        :meth:`fuzz.distributed.Store.read_new`): their signatures (and those they moved to) are
        peers' here, and a reduced one's ops seed ``needs`` and ``avoid`` as this campaign's own do."""
        for rec in self.store.read_new():
            sig = rec.get("superseded_by") or rec["signature"]
            self.peers.update({rec["signature"], sig})
            if rec.get("reduced") and rec.get("program") and sig not in self.needs:
                ops = F.op_names(rec["program"])
                self.needs[sig] = ops
                self.seed_needs.setdefault(sig, ops)
                try:
                    self._avoid(sig, rec["program"])
                except (KeyError, ValueError, TypeError):  # (a program of another release's API)
                    pass

    @staticmethod
    def _is_shrinking(found: Finding, shrunk: Finding) -> bool:
        """Whether ``found`` is the value finding being shrunk: value signatures name what the
        program uses, which shrinking changes (oracles.common.value_signature)."""
        return found.oracle in LABELLED and same_finding(found, shrunk.signature, shrunk.oracle, shrunk.kind)

    def record(self, finding: Finding, program: dict, source: str) -> Record:
        """Record a new distinct finding (seen once): keep it, append it to the findings file, call ``on_finding``.

        One seen while another finding is shrunk or reduced is queued for reduction (:meth:`defer`).
        """
        rec = Record(finding, program, source, 1, time.monotonic() - self.start, look_past=self.looking_past)
        self.records[finding.signature] = rec
        if self.target is not None or self.reducing or self.looking_past:
            self.defer([finding.signature])
        self.save_record(finding.signature)
        self.on_finding(self, rec)
        return rec

    def save_record(self, signature: str) -> None:
        """Append the current state of a finding to the findings file (the reader keeps the last line).

        An error (disk full) is kept in ``findings_error`` and does not stop the
        campaign: the findings are still in memory and go into the report.
        """
        if not self.findings_path:
            return
        entry = {**self.finding_entry(signature, self.records[signature]),
                 "campaign_started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
                 "seed": self.seed, "jax_version": self.caps.get("jax_version"),
                 "jaxlib_version": self.caps.get("jaxlib_version")}
        if self.run_id is not None:
            entry.update(run=self.run_id, job=self.job)
        try:
            findings_file.append(self.findings_path, entry)
        except OSError as e:
            self.findings_error = self.findings_error or f"{self.findings_path}: {e}"
        if self.store is not None:  # (before on_finding announces it; queued while the server is away)
            self.store.push(entry)

    def close(self) -> None:
        """Kill the workers (and anything they started); a distributed campaign's last heartbeat and pushes."""
        self.runner.close()
        if self.store is not None:
            self.store.close()

    # ----------------------------------------------------------------- hypothesis
    def _test(self, program: dict) -> None:
        now = time.monotonic()
        key = program_key(program)
        if self.target is None:
            if self.done(now):
                self.stopped = True
                return
            self.stats.generated += 1
            feats, depth = F.features(program)
            self.stats.features.update(feats)
            self.stats.depths[depth] += 1
        elif key not in self.cache and (now > self.start + self.seconds + self.shrink_seconds
                                        or now > self.target_start + SHRINK_BUDGET):
            raise _ShrinkOver  # out of shrinking time: end this shrink (replays of known keys stay free)
        if key not in self.cache:
            self.cache[key] = self.run_program(program)
            if self.target is None and any(f.oracle == "internal-error" for f in self.cache[key]):
                self.stats.generated_rejected += 1
            self.on_progress(self)
        if not self.shrink:
            return
        # (a finding run_program counted toward the one being shrunk or reduced, under another
        # value signature, is neither known nor recorded: not new, so never a shrink's target)
        new = [f for f in self.cache[key] if f.signature not in self.known and f.signature in self.records]
        if new and self.target is None:
            if self.shrink_spent > SHRINK_SHARE * (now - self.start):
                # shrinking has had its share of the time: go on generating; the finding is
                # reduced later, when the share allows or at the end (reduce_pending)
                self.defer(f.signature for f in new)
                return
            self.target = new[0].signature
            self.target_start = now
            self.defer(f.signature for f in new[1:])
        hit = [f for f in new if f.signature == self.target
               or (self.target in self.records and self._is_shrinking(f, self.records[self.target].finding))]
        if hit:
            rec = self.records[self.target]
            if len(json.dumps(program)) <= len(json.dumps(rec.program)):
                rec.program, rec.finding = program, hit[0]
                rec.source = render(program, self.caps)
            raise _Found(self.target)

    def done(self, now: float | None = None) -> bool:
        if self.stopped:
            return True
        now = time.monotonic() if now is None else now
        if now > self.start + self.seconds:
            return True
        return self.max_examples is not None and self.stats.generated >= self.max_examples

    def _round(self, index: int) -> None:
        @given(swarm_programs(self.caps, swarm=self.swarm, avoid=tuple(self.avoid.values()), disabled=self.disabled))
        def shardfuzz_campaign(program):
            self._test(program)

        if self.seed is not None:
            shardfuzz_campaign = seed(self.seed * 7919 + index)(shardfuzz_campaign)
        # (applied after @seed, which sets database=None: a seeded campaign saves to a SaveOnlyDatabase)
        shardfuzz_campaign = draw_settings(self.fresh, self.db)(shardfuzz_campaign)
        interrupted = False
        try:
            shardfuzz_campaign()
        except (_Found, Flaky, _ShrinkOver):
            pass
        except ProgramError as e:  # the generator drew an invalid program: our bug, never the campaign's end
            self.stats.invalid += 1
            f = Finding("generator", type(e).__name__, str(e))
            if f.signature in self.records:
                self.records[f.signature].count += 1
            else:
                self.record(f, {}, "")
        except BaseException:  # interrupted (Ctrl-C, SIGTERM): end quickly, keep the smallest program so far
            interrupted = True
            raise
        finally:
            if self.target is not None:
                target, self.target = self.target, None
                self.known.add(target)
                self.records[target].shrunk = not interrupted
                if not interrupted:
                    target = self.reduce(target)
                self.shrink_spent += time.monotonic() - self.target_start
                if target in self.records:
                    self.save_record(target)

    def defer(self, signatures) -> None:
        """Queue findings for reduction outside Hypothesis (:meth:`reduce_pending`); they stop being targets."""
        for sig in signatures:
            if sig not in self.known:
                self.known.add(sig)
                self.pending.append(sig)

    def reduce_pending(self, deadline: float, share: bool = True) -> None:
        """Reduce queued findings until ``deadline`` (time.monotonic()), within the shrink share if ``share``."""
        while self.pending and time.monotonic() < deadline and self.matched is None:
            now = time.monotonic()
            if share and self.shrink_spent > SHRINK_SHARE * (now - self.start):
                return
            sig = self.pending.pop(0)
            if sig not in self.records:
                continue
            self.records[sig].shrunk = False
            sig = self.reduce(sig, deadline)
            self.shrink_spent += time.monotonic() - now
            if sig in self.records:
                self.save_record(sig)

    def _findings_of(self, program: dict) -> list:
        """The findings of a program, run once per campaign (cached by program hash)."""
        key = program_key(program)
        if key not in self.cache:
            self.cache[key] = self.run_program(program)
            self.on_progress(self)
        return self.cache[key]

    def reduce(self, signature: str, deadline: float | None = None) -> str:
        """Reduce a recorded finding's program with :func:`fuzz.reduce.reduce_program`; returns its signature after.

        A candidate is kept when it shows the same finding (:func:`oracles.common.same_finding`)
        on the tracked call; a crash only when it happens alone in a fresh worker. The
        reduced program's own finding replaces the record's: value oracles name the
        (now shorter) transform chain in their signature, so the record may move to a new
        signature, merge with one already recorded, or turn out to be a corpus finding
        (then it counts in ``known_hits``). Records whose reduced programs are equal merge.
        """
        rec = self.records[signature]
        want = rec.finding
        if want.history or not rec.program:  # a crash that needs earlier programs: kept as found
            return signature

        def show(program: dict, call):
            for f in self._findings_of(program):
                if same_finding(f, want.signature, want.oracle, want.kind) and f.call == call and not f.history:
                    return f
            return None

        deadline = deadline or self.start + self.seconds + self.shrink_seconds
        budget = min(REDUCE_SECONDS, max(1.0, deadline - time.monotonic()))
        if want.oracle == "hang" and budget < 2 * (self.runner.timeout or default_timeout(rec.program)):
            # a candidate that still hangs costs the time limit, twice with its confirmation:
            # one would overrun the budget by minutes (kept as found; `shardfuzz reduce` has time)
            return signature
        self.reducing = signature
        try:
            with self.runner.trusting_fresh():  # (a candidate must show this signature: see Runner)
                r = reduce_program(rec.program, lambda p, c: show(p, c) is not None, want.call,
                                   max_runs=REDUCE_RUNS, max_seconds=budget, caps=self.caps)
        except (ProgramError, ValueError):  # a program this release cannot render: keep it as found
            return signature
        finally:
            self.reducing = None
        final = show(r.program, r.call)
        if final is None:  # flaky: keep the program as found
            return signature
        rec.program, rec.finding, rec.source = r.program, final, render(r.program, self.caps)
        rec.reduced, rec.reduction_runs, rec.reduction_seconds = r.reduced, r.runs, r.seconds
        new = final.signature
        self.known.add(new)
        self._avoid(new, r.program)
        ops = F.op_names(r.program)
        self.needs[new] = self.needs.get(new, ops) & ops
        self.seed_needs.setdefault(new, ops)
        key = program_key(r.program)
        twin = next((s for s, o in self.records.items() if o is not rec and (s == new or program_key(o.program) == key)),
                    None)
        if new in self.corpus:
            self._known_now(signature, new)
        elif twin is None and new != signature and self.store is not None and self._peer(new):
            # (another machine of a distributed campaign recorded the reduced program's signature first)
            self.peer_hits[new] += self.records.pop(signature).count
            self._supersede(signature, new)
        elif twin is not None:
            self.records[twin].count += rec.count
            del self.records[signature]
            self._supersede(signature, twin)
            return twin
        elif new != signature:
            del self.records[signature]
            self.records[new] = rec
            self._supersede(signature, new)
        return new

    def _known_now(self, signature: str, known: str) -> None:
        """Count the record ``signature``, whose reduced program shows the corpus signature
        ``known``, as hits of that known finding, and drop it from the findings.

        Only at the end of a reduction, never at the first candidate showing a corpus
        signature: a new bug whose smallest program needs fewer features than a known bug's
        face it passes through would pass for that bug (tried and reverted in 2026-12-07@bf30fd4)."""
        rec = self.records.pop(signature)
        self.known_hits[known] += rec.count
        self.shrunk_to_known += 1
        self._supersede(signature, known)

    def _supersede(self, old: str, new: str) -> None:
        """Tell the findings file that finding ``old`` is now ``new`` (moved, merged, or known)."""
        self.aliases[old] = new
        if self.findings_path:
            extra = {} if self.run_id is None else {"run": self.run_id, "job": self.job}
            try:
                findings_file.supersede(self.findings_path, old, new, **extra)
            except OSError as e:
                self.findings_error = self.findings_error or f"{self.findings_path}: {e}"
        if self.store is not None:
            self.store.push({"signature": old, "superseded_by": new,
                             **({} if self.run_id is None else {"run": self.run_id, "job": self.job})})

    def run(self) -> dict:
        """Run until time or examples run out; returns the report (see :meth:`report`)."""
        self.start = time.monotonic()
        self.started = time.time()
        if self.store is not None:
            self.store.start(self._heartbeat_stats)
        index = 0
        try:
            while not self.done():  # (done() is also true once stopped)
                self._round(index)
                index += 1
                # (a reduction started near the end may run into the shrink time: a finding
                # queued late gets its whole budget, not what is left of the generation time)
                self.reduce_pending(self.start + self.seconds + self.shrink_seconds)
            # the end: reduce what is still queued, in the time shrinking may run over
            self.reduce_pending(self.start + self.seconds + self.shrink_seconds, share=False)
        finally:
            self.elapsed = time.monotonic() - self.start
        return self.report()

    def _heartbeat_stats(self) -> dict:
        """This campaign's stats as a distributed campaign's heartbeat carries them (JSON values)."""
        elapsed = max(time.monotonic() - self.start, 1e-9)
        s = self.stats
        return {"programs": s.programs, "generated": s.generated, "findings": len(self.records),
                "peer_hits": sum(self.peer_hits.values()), "started": self.started, "seconds": round(elapsed, 1),
                "programs_per_second": round(s.programs / elapsed, 3), "seed": self.seed,
                "jax_version": self.caps.get("jax_version")}

    @staticmethod
    def finding_entry(signature: str, rec: Record) -> dict:
        """One finding as the report (and the findings file) shows it."""
        return {"signature": signature, "oracle": rec.finding.oracle, "kind": rec.finding.kind,
                "message": rec.finding.message, "details": rec.finding.details[-3000:],
                "call": rec.finding.call, "count": rec.count,
                "history": rec.finding.history, "history_programs": rec.finding.history_programs,
                "first_seconds": round(rec.first_seconds, 1), "shrunk": rec.shrunk,
                "reduced": rec.reduced, "reduction_runs": rec.reduction_runs,
                "reduction_seconds": round(rec.reduction_seconds, 1), "look_past": rec.look_past,
                "program": rec.program, "source": rec.source}

    def database_use(self) -> str:
        """How this campaign uses the example database, in a few words."""
        if self.db is None:
            return "none (--database '')"
        if isinstance(self.db, SaveOnlyDatabase):
            return "save only: a seeded campaign does not replay earlier examples, so that it repeats"
        return "replay and save"

    def report(self) -> dict:
        """The JSON report: versions, counts, timings, features and distinct findings.

        ``unconfirmed_crashes``: the last crashes and hangs that did not happen again in
        a fresh worker (not findings; see :meth:`fuzz.runner.Runner.run`), of
        ``unconfirmed_crash_count`` in all.
        """
        s = self.stats
        elapsed = getattr(self, "elapsed", time.monotonic() - self.start)
        findings = [self.finding_entry(sig, rec)
                    for sig, rec in sorted(self.records.items(), key=lambda kv: kv[1].first_seconds)]
        return {
            "jax_version": self.caps.get("jax_version"), "jaxlib_version": self.caps.get("jaxlib_version"),
            "seed": self.seed, "determinism": self.runner.lowerer is not None,
            "database": self.database, "database_use": self.database_use(),
            "findings_file": self.findings_path, "findings_file_error": self.findings_error or None,
            "unconfirmed_crash_count": s.unconfirmed_total, "unconfirmed_crashes": list(s.unconfirmed),
            "seconds": round(elapsed, 1), "programs": s.programs, "generated": s.generated,
            "rejected": s.rejected, "generated_rejected": s.generated_rejected, "invalid": s.invalid,
            "generator_errors": [{"message": m, "programs": n} for m, n in sorted(s.generator_errors.items())],
            "programs_per_second": round(s.programs / elapsed, 3) if elapsed else 0.0,
            "worker_seconds": round(s.worker_seconds, 1), "reference_seconds": round(s.reference_seconds, 1),
            "features": dict(sorted(s.features.items())),
            "depth_histogram": {str(k): v for k, v in sorted(s.depths.items())},
            "findings": findings,
            "known": [{"signature": sig, "entry": self.corpus[sig], "count": n}
                      for sig, n in sorted(self.known_hits.items(), key=lambda kv: -kv[1])],
            "known_seconds": round(self.known_seconds, 1),
            "swarm": self.swarm, "avoid_known": self.avoid_known, "shrink": self.shrink,
            "disabled": sorted(self.disabled), "avoided": len(self.avoid),
            "reduced": sum(r.reduced for r in self.records.values()),
            "fresh": self.fresh, "look_past": self.look_past, "look_past_runs": self.look_past_runs,
            "look_past_clear": self.look_past_clear, "look_past_seconds": round(self.look_past_seconds, 1),
            "look_past_vma_runs": self.look_past_vma_runs, "look_past_vma_clear": self.look_past_vma_clear,
            "shrunk_to_known": self.shrunk_to_known,
        }

