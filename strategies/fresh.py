"""Fresh draws: a Hypothesis backend under which every program a campaign generates is drawn anew.

With its own backend ("hypothesis"), Hypothesis' generate phase follows each random test
case with up to five *mutants* of it: copies of one span of its choices over another span
of the same label (``ConjectureRunner.generate_mutations_from``, hypothesis 6.170.9,
``internal/conjecture/engine.py``), and starts each run with ten or so "novel prefix, then
the simplest choices" cases. That suits a test whose cases cost microseconds; a campaign's
cost a JAX run each. Measured over 1600 draws made as a campaign makes them (rounds of 100,
no JAX; seeds 1 and 2): 1162 and 1158 were such mutants, only 438 and 442 fresh draws; 662 and
634 distinct meshes-and-transform-chains against 1495 and 1509 here; and the compositions
of the seeded-bug benchmark's mutants sat in 26 and 16 *independent* draws per 1600 where
fresh draws put 103 and 101 (io_callback_dce_unordered), 1 and 1 against 7 and 11
(ppermute_lowering_multigroup). A rare composition is met about once per cluster of
near-duplicates, so the chance that a 10-minute campaign meets it at all is set by the
number of independent draws.

Under any backend other than "hypothesis" the engine asks the backend's provider for each
test case afresh (``generate_new_test_cases``: no novel prefix, no mutations); a failing
case is replayed on Hypothesis' own provider and shrunk, and the example database is used,
exactly as before. :class:`FreshDraws` *is* Hypothesis' own provider (the same
distribution for every choice, the same seeded random, so ``--seed`` still fixes a
campaign), registered under another name; see Hypothesis' "Alternative backends" docs
(``hypothesis.internal.conjecture.providers.AVAILABLE_PROVIDERS``).
"""
from __future__ import annotations

from hypothesis.internal.conjecture import providers

FRESH_BACKEND = "shardfuzz-fresh"


class FreshDraws(providers.HypothesisProvider):
    """Hypothesis' own provider under the name :data:`FRESH_BACKEND` (see the module's docstring)."""


def fresh_backend() -> str:
    """Register :class:`FreshDraws` (idempotent) and return its backend name, for
    ``hypothesis.settings(backend=...)``. Raises nothing."""
    providers.AVAILABLE_PROVIDERS[FRESH_BACKEND] = FreshDraws
    return FRESH_BACKEND
