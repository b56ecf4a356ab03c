"""Helpers shared by the test modules (import them from here, never from another test module).

- :mod:`support.programs`: hand-built programs (``program``, ``fn``, ``eqn``, ``call``, the
  transforms ``JIT``, ``GRAD``, ``shard_map``, ``vmap``, ``smap``, ``jvp``, ``vjp``, ``donating``,
  ``ring``) and a few whole programs more than one module runs (``donation_program``, ``top_program``).
- :mod:`support.judging`: JAX (the session's ``worker`` fixture, tests/conftest.py) against the
  reference: ``agree_with_jax``, ``judged``, ``agree_on_generated`` (derandomized generated
  programs that use an op), ``KNOWN`` (the corpus's signatures), ``VALUE_ORACLES``.
- :mod:`support.draws`: what the generator draws: ``drawn_programs``, ``alone`` (every op disabled but one).
- :mod:`support.campaigns`: ``start_campaign`` / ``finish``, a ``shardfuzz run`` subprocess watched
  from its stderr.

``tests/`` is on ``sys.path`` when pytest runs (rootdir conftest, no ``__init__.py`` in tests/),
so a test module writes ``from support.programs import program``. See tests/README.md.
"""
