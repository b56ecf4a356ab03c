"""What the generator (strategies/programs.py) draws, for counts and for per-op draws."""
from fuzz import ops as O


def alone(name: str) -> frozenset:
    """The ``disabled`` set that leaves only op ``name`` and the ops its draw may put before it; for an
    op only drawn as a prelude (family weight 0), the ops it is a prelude of stay enabled too."""
    keep = {name} | set(O.REGISTRY[name].preludes)
    if O.FAMILY_WEIGHTS[O.REGISTRY[name].family] == 0:
        keep |= {n for n, op in O.REGISTRY.items() if name in op.preludes}
    return frozenset(O.REGISTRY) - keep


def drawn_programs(seeds, n: int, **kwargs) -> list:
    """The programs ``strategies.programs.programs(**kwargs)`` draws, ``n`` per Hypothesis seed
    of ``seeds`` (generate phase only, no database), drawn anew as a campaign draws them
    (strategies/fresh.py): for counts over what the generator draws."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from strategies.fresh import fresh_backend
    from strategies.programs import programs

    out = []
    for s in seeds:
        @hseed(s)
        @settings(max_examples=n, phases=[Phase.generate], database=None, deadline=None,
                  suppress_health_check=list(HealthCheck), backend=fresh_backend())
        @given(programs(**kwargs))
        def collect(p):
            out.append(p)
        collect()
    return out
