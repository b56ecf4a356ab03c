"""Hand-built programs for the tests (small, readable, each with a known answer).

The builders return the JSON IR of fuzz/schemas/program.schema.json (docs/program.md).
"""
import copy


def program(mesh=((("x", 4),)), inputs=(), functions=None, calls=(), axis_type="auto"):
    """A program on a mesh of ``(name, size)`` axes; ``inputs``: ``(name, shape, seed)`` float32, unsharded."""
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


def smap(in_specs, out_specs, axis, negative=False):
    """``jax.smap`` over ``axis`` (a one-axis shard_map, jax >= 0.7.0; tests/test_smap.py)."""
    t = {**shard_map(in_specs, out_specs, axis_names=[axis]), "smap": True}
    return {**t, "negative_axes": True} if negative else t


def vmap(in_axes, out_axes, axis_name=None, spmd_axis_name=None):
    return {"kind": "vmap", "in_axes": in_axes, "out_axes": out_axes, "axis_name": axis_name,
            "spmd_axis_name": spmd_axis_name}


def call(function, transforms, args):
    return {"function": function, "transforms": transforms, "args": list(args)}


JIT = {"kind": "jit"}
GRAD = {"kind": "grad", "argnums": [0]}


def jvp(seed):
    return {"kind": "jvp", "seed": seed}


def vjp(seed):
    return {"kind": "vjp", "seed": seed}


def donating(argnums, **kw):
    """``jax.jit(f, donate_argnums=argnums, **kw)`` (tests/test_donation.py)."""
    return {"kind": "jit", "donate_argnums": list(argnums), **kw}


def donation_program(axis_type="auto"):
    """On a (2, 2) mesh: four calls of one body, three donating inputs (tests/test_donation.py)."""
    body = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("mul", ["s", "b"], ["m"]), eqn("add", ["m", "a"], ["o"])],
              ["o"])
    sm = shard_map([[["x"]], [["x"]]], [[["x"]]])
    calls = [call("f0", [donating([0])], ["x0", "x1"]),  # a result of x0's shape and sharding: aliased
             call("f0", [donating([0, 1], out_specs=[[["y"]]])], ["x0", "x1"]),  # another sharding
             call("f0", [donating([1]), sm], ["x0", "x1"]),
             call("f0", [JIT], ["x0", "x1"])]  # reads the inputs the calls before donated
    p = program(mesh=(("x", 2), ("y", 2)), axis_type=axis_type,
                inputs=[("x0", (8,), 1), ("x1", (8,), 2)], functions={"f0": body}, calls=calls)
    if axis_type == "auto":
        p["inputs"][0]["spec"] = [["x"]]
    else:  # (no jit shardings on an Explicit mesh: fuzz.typecheck._jit_shardings)
        del p["calls"][1]["transforms"][0]["out_specs"]
        # a donated uncommitted input resharded inside the jit is a JAX bug on Explicit meshes
        # (XLA's "Expected aliased input ... to have the same size", jax 0.7.2-0.10.2): the
        # corpus replays it; here only the calls that do not reshard a donated input
        del p["calls"][2]
    return p


def top_program(negative=False):
    """On a (2, 4) Auto mesh whose calls run under jax.set_mesh: an smap over x along dim 0 and
    one over y along dim 1 (partial-manual), eagerly, under jit and under jit of grad."""
    body_y = fn(["a"], [eqn("sin", ["a"], ["s"]), eqn("psum", ["s"], ["p"], axes=["y"])], ["p"])
    body_x = fn(["a"], [eqn("cos", ["a"], ["c"]), eqn("mul", ["a", "c"], ["m"])], ["m"])
    over_y = smap([[None, ["y"]]], [[None, None]], "y", negative)
    over_x = smap([[["x"], None]], [[["x"], None]], "x", negative)
    loss = fn(["a"], [eqn("call", ["a"], ["m"], transforms=[over_x], fn=body_x), eqn("wsum", ["m"], ["l"], seed=5)],
              ["l"])
    calls = [call("f0", [over_y], ["x0"]), call("f2", [JIT, over_x], ["x0"]), call("f1", [JIT, GRAD], ["x0"])]
    p = program(mesh=(("x", 2), ("y", 4)), inputs=[("x0", (4, 8), 4)],
                functions={"f0": body_y, "f1": loss, "f2": body_x}, calls=calls)
    p["mesh"]["set_mesh"] = True
    return p
