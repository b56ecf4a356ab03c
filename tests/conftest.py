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
                     help="also run the tests marked slow (more generated programs against JAX, ~40 s); "
                          "the long Hypothesis profile runs them too")


@pytest.hookimpl(tryfirst=True)  # (before pytest-xdist reads the groups)
def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` are skipped (with a reason) unless --slow or a long profile asks for them:
    the default run stays within CI's 10 minutes on 2 cores.

    Under pytest-xdist (``--dist loadgroup``, pyproject.toml) each module runs whole in one
    test process, in file order, as without xdist: several modules share module-scoped
    fixtures across their tests (a campaign, a worker). Modules marked with a group of
    their own (``processes``) share a process.
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


@pytest.fixture(scope="session")
def worker():
    """One JAX worker process for the whole session (restarted by the tests that kill it)."""
    from fuzz.execute import Worker

    w = Worker()
    yield w
    w.kill()
