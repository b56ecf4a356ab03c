"""Stop signals wait for a safe point inside a campaign (fuzz.util.INTERRUPTS)."""
import pytest

from fuzz.util import _Interrupts

# These tests watch the process tree (orphans, signals, kills): under pytest-xdist they run
# one after another in one worker (--dist loadgroup), never beside each other.
pytestmark = pytest.mark.xdist_group("processes")


def test_a_stop_inside_a_deferred_section_waits_for_a_safe_point():
    it = _Interrupts()
    assert it.defer("SIGTERM") is False  # outside a campaign: the handler raises at once
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with it.deferred():
            assert it.defer("SIGTERM") is True  # inside: only marked
            assert it.defer("SIGHUP") is True
            with it.allowed():  # a safe point: the pending stop is raised here
                pass
            raise AssertionError("not reached")
    assert it.pending is None


def test_a_stop_while_waiting_is_raised_at_once_and_one_left_pending_at_the_end():
    it = _Interrupts()
    with it.deferred():
        with it.allowed():
            assert it.defer("SIGINT") is False  # waiting for a worker: the handler raises now
    with pytest.raises(KeyboardInterrupt, match="SIGHUP"):
        with it.deferred():
            it.defer("SIGHUP")
    with pytest.raises(KeyboardInterrupt):
        with it.deferred():
            it.defer("SIGTERM")
            it.check()
