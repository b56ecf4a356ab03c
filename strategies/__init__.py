"""Hypothesis strategies for shardfuzz's programs (:mod:`strategies.programs`, :mod:`strategies.swarm`).

Importing the package makes Hypothesis's draws independent of which modules are loaded.
Hypothesis (6.131 on; read in ``hypothesis/internal/conjecture/providers.py`` of 6.170.9)
returns, in about 1 draw in 40, a literal found in the source of a *local* module of
``sys.modules`` (any module outside site-packages and the standard library: shardfuzz's
own under an editable install, a user's script), a pool that grows as modules are
imported. Measured: importing ``fuzz.util`` before drawing changed an input's seed from 160
to 100 (its ``HYPOTHESIS_RANGE``) in the 33rd program of Hypothesis seed 11, and every
program after it; so the same ``--seed`` drew other programs after other imports, or
from a non-editable install, and derandomized tests drew according to the tests run
before them in the same process. The code under test here is JAX (site-packages, never
local), so the fuzzer's own literals carry no information: the local pool is kept empty.
Hypothesis's own constants (0, 1, -1, powers of two, ...) are drawn as before. Hypothesis
versions without the pool are left alone; :func:`local_constants_pinned` says which case
holds (a test checks that draws do not move with an import).
"""
from __future__ import annotations


def _pin_local_constants() -> bool:
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover (a Hypothesis without this module has no pool)
        return False
    if not (callable(getattr(providers, "_get_local_constants", None)) and hasattr(providers, "Constants")):
        return False
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    if hasattr(providers, "CONSTANTS_CACHE"):  # (values cached from a pool read before)
        providers.CONSTANTS_CACHE.cache.clear()
    return True


_PINNED = _pin_local_constants()


def local_constants_pinned() -> bool:
    """True when Hypothesis's pool of literals from local modules is pinned empty (see the module
    docstring); False for a Hypothesis without that pool."""
    return _PINNED
