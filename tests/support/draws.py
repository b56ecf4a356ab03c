"""What the generator (strategies/programs.py) draws, for counts and for per-op draws."""
import copy
import hashlib
import json
import os
import time
from pathlib import Path

from fuzz import ops as O


def alone(name: str) -> frozenset:
    """The ``disabled`` set that leaves only op ``name`` and the ops its draw may put before it; for an
    op only drawn as a prelude (family weight 0), the ops it is a prelude of stay enabled too."""
    keep = {name} | set(O.REGISTRY[name].preludes)
    if O.FAMILY_WEIGHTS[O.REGISTRY[name].family] == 0:
        keep |= {n for n, op in O.REGISTRY.items() if name in op.preludes}
    return frozenset(O.REGISTRY) - keep


CACHE_DIR = None  # a directory the session's test processes share (tests/conftest.py sets it; None: memory only)
_MEMO: dict = {}


def drawn_programs(seeds, n: int, cached: bool = False, **kwargs) -> list:
    """The programs ``strategies.programs.programs(**kwargs)`` draws, ``n`` per Hypothesis seed
    of ``seeds`` (generate phase only, no database), drawn anew as a campaign draws them
    (strategies/fresh.py): for counts over what the generator draws.

    ``cached=True``: the same programs, drawn once per session (kept per seed and keyword
    arguments, in this process and in :data:`CACHE_DIR`; the first ``n`` of a longer draw of
    the same seed, since every case is drawn afresh from the seeded random); deep copies, so a
    test may change them. Only for a test that does not patch the generator while it draws."""
    if not cached:
        return _draw(seeds, n, kwargs)
    out = []
    for s in seeds:
        out += copy.deepcopy(_seed_draws(s, n, kwargs))
    return out


def _seed_draws(s, n: int, kwargs: dict) -> list:
    key = hashlib.sha1(json.dumps([s, kwargs], sort_keys=True, default=_plain).encode()).hexdigest()[:20]
    got = _MEMO.get(key)
    if got is not None and len(got) >= n:
        return got[:n]
    if CACHE_DIR is None:
        return _draw_and_keep(key, s, n, kwargs, None)
    path, lock = Path(CACHE_DIR) / f"{key}.json", Path(CACHE_DIR) / f"{key}.lock"
    deadline = time.monotonic() + 600
    while True:  # (the other test process may be drawing this seed: wait for it rather than draw it twice)
        try:
            got = json.loads(path.read_text())
        except (OSError, ValueError):
            got = None
        if got is not None and len(got) >= n:
            _MEMO[key] = got
            return got[:n]
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            if time.monotonic() < deadline:
                time.sleep(0.2)
                continue
        try:
            return _draw_and_keep(key, s, n, kwargs, path)
        finally:
            lock.unlink(missing_ok=True)


def _draw_and_keep(key: str, s, n: int, kwargs: dict, path) -> list:
    got = _draw([s], n, kwargs)
    if len(got) == n:  # (a full draw: its prefixes are the shorter draws of this seed)
        _MEMO[key] = got
        text = json.dumps(got)
        if path is not None and json.loads(text) == got:  # (JSON keeps it as drawn: no tuples)
            tmp = path.with_name(f"{key}.{os.getpid()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
    return got


def _plain(v):
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    raise TypeError(f"drawn_programs(cached=True): cannot key the argument {v!r}")


def _draw(seeds, n: int, kwargs: dict) -> list:
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
