"""Test setup: 8 fake host CPU devices (set before JAX is imported) and Hypothesis profiles.

Profiles: ``dev`` (default, quick and derandomized so that CI is repeatable) and ``long``
(``pytest --hypothesis-profile=long``: a long randomized campaign, with the example
database in ``.hypothesis/``, every example drawn anew as a campaign draws them:
``strategies/fresh.py``).
"""
import os

os.environ["XLA_FLAGS"] = " ".join(
    [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
    + ["--xla_force_host_platform_device_count=8"])
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["SHARDFUZZ_NO_INDEX"] = "1"  # tests never ask the package index (fuzz.provision; its tests fake it)

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from strategies.fresh import fresh_backend  # noqa: E402

settings.register_profile("dev", max_examples=25, deadline=None, derandomize=True, database=None,
                          suppress_health_check=list(HealthCheck), print_blob=True)
settings.register_profile("long", max_examples=2000, deadline=None, backend=fresh_backend(),
                          suppress_health_check=list(HealthCheck), print_blob=True)
settings.load_profile("dev")  # --hypothesis-profile=... overrides this


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run the tests marked slow (more generated programs against JAX, long campaigns); "
                          "`pytest --slow -m slow` runs only them (.ci/run); the long Hypothesis profile runs them too")


@pytest.hookimpl(tryfirst=True)  # (before pytest-xdist reads the groups)
def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` are skipped (with a reason) unless --slow or a long profile asks for them:
    the default run (the README's ``pytest``) stays within 5 minutes on 2 idle cores.

    Under pytest-xdist (``--dist loadgroup``, pyproject.toml) each module runs whole in one
    test process, in file order, as without xdist: several modules share module-scoped
    fixtures across their tests (a campaign, a worker). Modules marked with a group of
    their own (``processes``) share a process; tests marked with groups of their own (the
    corpus replay's two halves) run apart from their module. See :class:`_XdistGroups`.
    """
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    if config.getoption("--slow") or settings.default.max_examples > 100:
        return
    skip = pytest.mark.skip(reason="slow: run with --slow or --hypothesis-profile=long")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


class _XdistGroups:
    """pytest-xdist (3.8) tells ``--dist loadgroup`` a test's group by the suffix ``@group`` of its
    node id, which it writes to ``Item._nodeid``; from pytest 9.2 a node id lives in ``Item._id``
    (a ``_pytest.nodeid.NodeId``) and that write is lost: the groups are ignored and a module's
    tests spread over both processes (its module-scoped fixtures made twice, the ``processes``
    tests beside each other). This adds the suffix where xdist's did not take."""

    @pytest.hookimpl(trylast=True)  # (after xdist's own hook: on older pytest its suffix is there)
    def pytest_collection_modifyitems(self, config, items):
        if not getattr(config.option, "loadgroup", False):  # (set in xdist's test processes only)
            return
        for item in items:
            names = {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                     for m in item.iter_markers("xdist_group")}
            suffix = "@" + "_".join(sorted(names))
            if not names or item.nodeid.endswith(suffix):
                continue
            if isinstance(getattr(item, "_id", None), str) or not hasattr(item, "_id"):
                item._nodeid = item.nodeid + suffix
            else:
                item._id = type(item._id).parse(item.nodeid + suffix)


def pytest_configure(config):
    config.pluginmanager.register(_XdistGroups(), "shardfuzz-xdist-groups")


@pytest.fixture(scope="session", autouse=True)
def _shared_draws(tmp_path_factory):
    """``drawn_programs(..., cached=True)`` (tests/support/draws.py) keeps its draws in a directory
    both test processes of the session share (pytest-xdist gives each a basetemp under one parent)."""
    from support import draws

    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "drawn-programs"
    shared.mkdir(exist_ok=True)
    draws.CACHE_DIR = shared
    yield
    draws.CACHE_DIR = None


@pytest.fixture(scope="session")
def worker():
    """One JAX worker process for the whole session (restarted by the tests that kill it)."""
    from fuzz.execute import Worker

    w = Worker()
    yield w
    w.kill()
