"""fuzz/phases.py: a worker's seconds split into JAX's phases (benchmarks/phases.py)."""
import time
import types

from fuzz.phases import PhaseTimer


def test_nested_phases_count_for_the_inner_one_only():
    timer = PhaseTimer()

    def compile_(x):
        time.sleep(0.05)
        return x

    inner = timer.wrap("compile", compile_)

    def lower(x):
        time.sleep(0.02)
        return inner(x) + 1

    outer = timer.wrap("lower", lower)
    assert outer(1) == 2
    got = timer.take()
    assert 0.045 <= got["compile"] < 0.2
    assert 0.015 <= got["lower"] < 0.045  # (its own 0.02 s, not the nested compile's 0.05 s)
    assert timer.take() == dict.fromkeys(got, 0.0)  # take() starts again


def test_wrapped_methods_bind_and_attributes_pass_through():
    timer = PhaseTimer()

    class Executable:
        def __call__(self, x):
            return x * 2

    def traced(x):
        return x

    traced.evict_weakref = lambda key: "evicted"
    Executable.__call__ = timer.wrap("execute", Executable.__call__)
    assert Executable()(3) == 6
    assert timer.wrap("trace", traced).evict_weakref(0) == "evicted"
    assert timer.take()["execute"] > 0


def test_install_wraps_what_the_release_has(monkeypatch):
    import importlib

    timer = PhaseTimer()
    fake = types.SimpleNamespace(compile_or_get_cached=lambda: "compiled")
    real = importlib.import_module

    def fake_import(name):
        if name == "jax._src.compiler":
            return fake
        raise ImportError(name)  # (every other target is missing from this "release")

    monkeypatch.setattr(importlib, "import_module", fake_import)
    assert timer.install() == ["compiler:compile_or_get_cached"]
    monkeypatch.setattr(importlib, "import_module", real)
    assert fake.compile_or_get_cached() == "compiled"
    assert timer.take()["compile"] > 0
