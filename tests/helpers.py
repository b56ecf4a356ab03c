"""Hand-built programs for the tests (small, readable, each with a known answer)."""
import copy


def program(mesh=((("x", 4),)), inputs=(), functions=None, calls=(), axis_type="auto"):
    names = [n for n, _ in mesh]
    sizes = [s for _, s in mesh]
    return {"format": "shardfuzz-program", "version": 1,
            "mesh": {"axis_names": names, "axis_sizes": sizes, "axis_type": axis_type},
            "inputs": [dict(name=n, shape=list(s), dtype="float32", spec=None, seed=seed)
                       for n, s, seed in inputs],
            "functions": copy.deepcopy(functions or {}), "calls": list(calls)}


def fn(params, eqns, results):
    return {"params": list(params), "eqns": list(eqns), "results": list(results)}


def eqn(op, args, outs, **params):
    return {"op": op, "args": list(args), "outs": list(outs), **params}


def ring(n, shift=1):
    """A ppermute's ``perm`` that shifts device i of an axis of size n to (i + shift) % n."""
    return [[i, (i + shift) % n] for i in range(n)]


def shard_map(in_specs, out_specs, check_vma=True, axis_names=None):
    return {"kind": "shard_map", "in_specs": in_specs, "out_specs": out_specs, "check_vma": check_vma,
            "axis_names": axis_names}


def vmap(in_axes, out_axes, axis_name=None, spmd_axis_name=None):
    return {"kind": "vmap", "in_axes": in_axes, "out_axes": out_axes, "axis_name": axis_name,
            "spmd_axis_name": spmd_axis_name}


def call(function, transforms, args):
    return {"function": function, "transforms": transforms, "args": list(args)}


JIT = {"kind": "jit"}


def agree_with_jax(worker, p, ignore=()):
    """JAX (the ``worker``) and the unsharded reference give the same values on every call of ``p``:
    no finding of any oracle but those in ``ignore``. Returns the worker's outcome."""
    import oracles
    from fuzz.program import validate_program
    from fuzz.reference import evaluate
    from fuzz.render import render

    validate_program(p)
    out = worker.run(render(p, worker.caps), timeout=240)
    assert out["status"] == "ok", out
    assert all(c["ok"] for c in out["calls"]), [c.get("error") for c in out["calls"]]
    found = [f for f in oracles.judge(p, out, evaluate(p)) if f.oracle not in ignore]
    assert not found, [(f.signature, f.details) for f in found]
    return out


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
