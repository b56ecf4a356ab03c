"""Every JAX API the rendered programs and exported repros use, declared per user, and its probe.

JAX-free (standard library only): the worker (fuzz/worker.py, a script under any interpreter)
loads this file by path and probes each API when it starts (:func:`probe_all`); the missing
ones go to its hello capabilities as ``missing_apis`` (their :func:`api_name`), and
:func:`missing_users` turns them into the release rules of ``fuzz.typecheck.release_rules``
(``no_api:<user>``): an op or transform whose API this JAX lacks is not drawn, and a corpus
entry that needs it is "not applicable here". Capabilities without ``missing_apis`` (a
version-only ``fuzz.render.release_caps``, ``NEWEST_CAPS``) have every API.

An API is one of
- ``("module", "jax.experimental.shard_alike")``: the module imports;
- ``("attr", "jax.lax.pcast")``: the dotted name resolves (the longest importable module
  prefix, then attributes: ``jax.experimental.shard_alike.shard_alike`` imports the module);
- ``("keyword", "jax.lax.all_gather", "to")``: the callable resolves and its
  ``inspect.signature`` accepts that keyword (a named parameter or ``**kwargs``; a callable
  without a signature counts as accepting it).
A requirement is an API, or ``("any", api, api, ...)`` when the renderer picks one of several
by the worker's capabilities (``caps["pvary"]``: ``jax.lax.pcast(..., to=...)`` or
``jax.lax.pvary``): met when one of them is there.

Users: :data:`PROGRAM` (what every rendered program and repro runs: its head, inputs, calls,
lowering), :data:`OPS` (by op name, fuzz/ops/: its ``render`` and the render helpers it adds),
:data:`TRANSFORMS` (by ``fuzz.typecheck.transform_name``, plus ``smap`` for a shard_map written as
jax.smap, ``explicit`` for an Explicit mesh, ``set_mesh`` for an Auto mesh under jax.set_mesh:
fuzz/render.py). tests/test_jax_api.py renders drawn programs and repros and checks that each
``jax`` name, import and keyword their source uses is declared for one of the program's users.
"""
from __future__ import annotations

ANY = "any"

_NP = "jax.numpy"


def _fn(name: str, *keywords: str) -> tuple:
    """The attribute ``name`` and each keyword passed to it."""
    return (("attr", name),) + tuple(("keyword", name, k) for k in keywords)


PROGRAM = (
    ("module", "jax"), ("module", "jax.numpy"), ("module", "jax.sharding"), ("module", "jax.experimental"),
    ("attr", "jax.experimental.io_callback"), ("attr", "jax.sharding.Mesh"), ("attr", "jax.sharding.NamedSharding"),
    ("attr", "jax.sharding.PartitionSpec"), ("attr", "jax.devices"), ("attr", "jax.device_put"),
    ("attr", "jax.effects_barrier"), ("attr", "jax.block_until_ready"), ("attr", "jax.tree_util.tree_map"),
    ("attr", "jax.config.update"), ("attr", "jax.make_jaxpr"), ("attr", "jax.clear_caches"), ("attr", "jax.jit"),
    *_fn(f"{_NP}.asarray"), *_fn(f"{_NP}.array"), *_fn(f"{_NP}.copy"), *_fn(f"{_NP}.float32"), *_fn(f"{_NP}.int32"),
    *_fn(f"{_NP}.ones"), *_fn(f"{_NP}.zeros"), *_fn(f"{_NP}.arange", "dtype"), *_fn(f"{_NP}.shape"),
    *_fn(f"{_NP}.sum"), *_fn(f"{_NP}.sign"), *_fn(f"{_NP}.broadcast_to"),
)

_PCAST = ("keyword", "jax.lax.pcast", "to")
_STOP = ("attr", "jax.lax.stop_gradient")
_SDS = ("attr", "jax.ShapeDtypeStruct")
_CUSTOM = (*_fn(f"{_NP}.sin"), *_fn(f"{_NP}.cos"), *_fn(f"{_NP}.tanh"), *_fn(f"{_NP}.zeros_like"))
_CONV = (*_fn(f"{_NP}.moveaxis"), *_fn(f"{_NP}.reshape"), *_fn(f"{_NP}.ndim"),
         *_fn("jax.lax.conv_general_dilated", "dimension_numbers", "feature_group_count", "lhs_dilation",
              "rhs_dilation"))
_WINDOW = (*_fn("jax.lax.reduce_window", "base_dilation", "window_dilation"), *_fn(f"{_NP}.ndim"))
_RANDOM = (*_fn("jax.random.uniform", "dtype"), *_fn("jax.random.fold_in"), *_fn("jax.random.key"),
           *_fn("jax.random.PRNGKey"), *_fn("jax.random.split"), *_fn(f"{_NP}.float32"), *_fn(f"{_NP}.float16"),
           *_fn(f"{_NP}.bfloat16"))
_RESHARD = (("attr", "jax.sharding.reshard"),)

OPS = {
    "sin": _fn(f"{_NP}.sin"), "cos": _fn(f"{_NP}.cos"), "tanh": _fn(f"{_NP}.tanh"),
    "neg": (), "add": (), "sub": (), "mul": (), "matmul": (), "slice": (), "at_set": (), "at_add": (),
    "maximum": _fn(f"{_NP}.maximum"),
    "astype": (*_fn(f"{_NP}.float32"), *_fn(f"{_NP}.float16"), *_fn(f"{_NP}.bfloat16"), *_fn(f"{_NP}.int32")),
    "sum": _fn(f"{_NP}.sum", "axis"), "mean": _fn(f"{_NP}.mean", "axis"), "max": _fn(f"{_NP}.max", "axis"),
    "argmax": _fn(f"{_NP}.argmax", "axis"), "argmin": _fn(f"{_NP}.argmin", "axis"), "wsum": _fn(f"{_NP}.sum"),
    "einsum": _fn(f"{_NP}.einsum"), "transpose": _fn(f"{_NP}.transpose"),
    "conv": _CONV, "conv_nc": _CONV, "conv_nwc": _CONV,
    "broadcast": _fn(f"{_NP}.broadcast_to"), "roll": _fn(f"{_NP}.roll", "axis"), "flip": _fn(f"{_NP}.flip", "axis"),
    "pad": (*_fn("jax.lax.pad"), *_fn(f"{_NP}.pad")), "concatenate": _fn(f"{_NP}.concatenate", "axis"),
    "reshape": _fn(f"{_NP}.reshape"), "split": _fn(f"{_NP}.split", "axis"), "insert": _fn(f"{_NP}.insert", "axis"),
    "dynamic_slice": _fn("jax.lax.dynamic_slice_in_dim", "axis"),
    "dynamic_update_slice": _fn("jax.lax.dynamic_update_slice_in_dim", "axis"),
    "at_set_out_sharding": _fn("jax.typeof"), "at_add_out_sharding": _fn("jax.typeof"),
    "take": _fn(f"{_NP}.take", "axis", "mode"), "cumsum": _fn(f"{_NP}.cumsum", "axis"),
    "cumprod": _fn(f"{_NP}.cumprod", "axis"), "cummax": _fn("jax.lax.cummax", "axis", "reverse"),
    "reduce_window_sum": (*_WINDOW, *_fn("jax.lax.add")),
    "reduce_window_max": (*_WINDOW, *_fn("jax.lax.max"), *_fn(f"{_NP}.inf")),
    "sort": _fn(f"{_NP}.sort", "axis"), "top_k": _fn("jax.lax.top_k", "axis"),
    "fft": (*_fn(f"{_NP}.fft.fft", "axis"), *_fn(f"{_NP}.round"), _STOP),
    "where": _fn(f"{_NP}.where"), "with_sharding_constraint": _fn("jax.lax.with_sharding_constraint"),
    "device_put": _fn("jax.device_put"), "reshard": _RESHARD, "reshard_split": _RESHARD,
    "shard_alike": (("module", "jax.experimental.shard_alike"), ("attr", "jax.experimental.shard_alike.shard_alike")),
    "optimization_barrier": _fn("jax.lax.optimization_barrier"),
    "index": (*_fn("jax.lax.axis_index"), *_fn(f"{_NP}.int32")),
    "ref_update": (*_fn("jax.new_ref"), *_fn("jax.freeze")),
    "psum": _fn("jax.lax.psum"), "pmean": _fn("jax.lax.pmean"), "pmax": _fn("jax.lax.pmax"),
    "pmin": _fn("jax.lax.pmin"), "axis_index": _fn("jax.lax.axis_index"),
    "pvary": ((ANY, _PCAST, ("attr", "jax.lax.pvary")),),
    "unreduced_psum": (_PCAST, *_fn("jax.lax.psum")),
    "all_gather": _fn("jax.lax.all_gather", "axis", "tiled"),
    "all_gather_invariant": ((ANY, ("keyword", "jax.lax.all_gather", "to"), ("attr", "jax.lax.all_gather_invariant")),
                             ("keyword", "jax.lax.all_gather", "axis"), ("keyword", "jax.lax.all_gather", "tiled"),
                             (ANY, ("keyword", "jax.lax.all_gather", "to"),
                              ("keyword", "jax.lax.all_gather_invariant", "axis")),
                             (ANY, ("keyword", "jax.lax.all_gather", "to"),
                              ("keyword", "jax.lax.all_gather_invariant", "tiled"))),
    "ppermute": _fn("jax.lax.ppermute", "perm"),
    "psum_scatter": _fn("jax.lax.psum_scatter", "scatter_dimension", "tiled"),
    "unreduced_psum_scatter": (_PCAST, *_fn("jax.lax.psum_scatter", "scatter_dimension", "tiled")),
    "all_to_all": _fn("jax.lax.all_to_all", "tiled"),
    "io_callback": (_SDS, _STOP, ("keyword", "jax.experimental.io_callback", "ordered")),
    "pure_callback": (_SDS, _STOP, ("attr", "jax.pure_callback"),
                      (ANY, ("keyword", "jax.pure_callback", "vmap_method"),
                       ("keyword", "jax.pure_callback", "vectorized"))),
    "debug_callback": _fn("jax.debug.callback"), "debug_print": _fn("jax.debug.print", "x"),
    "custom_vjp": (*_fn("jax.custom_vjp"), *_CUSTOM),
    "custom_jvp": (*_fn("jax.custom_jvp"), *_fn("jax.custom_derivatives.SymbolicZero"), *_CUSTOM),
    "random_uniform": _RANDOM,
    "random_uniform_sharded": (*_RANDOM, *_RESHARD, ("keyword", "jax.random.uniform", "out_sharding")),
}

_SHARD_MAP = ("jax.shard_map", "jax.experimental.shard_map.shard_map")

TRANSFORMS = {
    "jit": _fn("jax.jit", "in_shardings", "out_shardings", "donate_argnums", "inline"),
    "vmap": _fn("jax.vmap", "in_axes", "out_axes", "axis_name", "spmd_axis_name"),
    "pmap": _fn("jax.pmap", "in_axes", "out_axes", "axis_name"),
    "map": _fn("jax.lax.map"), "scan": _fn("jax.lax.scan"),
    "grad": _fn("jax.grad", "argnums"), "value_and_grad": _fn("jax.value_and_grad", "argnums"),
    "vjp": (*_fn("jax.vjp"), *_fn(f"{_NP}.shape")), "jvp": (*_fn("jax.jvp"), *_fn(f"{_NP}.shape")),
    "linearize": (*_fn("jax.linearize"), *_fn(f"{_NP}.shape")),
    "jacrev": _fn("jax.jacrev", "argnums"), "jacfwd": _fn("jax.jacfwd", "argnums"),
    "hessian": _fn("jax.hessian", "argnums"),
    "cond": (*_fn("jax.lax.cond"), *_fn(f"{_NP}.sum"), *_fn(f"{_NP}.sign")),
    "fori_loop": _fn("jax.lax.fori_loop"), "while_loop": _fn("jax.lax.while_loop"),
    "checkpoint": (*_fn("jax.checkpoint", "policy"), ("attr", "jax.checkpoint_policies.everything_saveable"),
                   ("attr", "jax.checkpoint_policies.nothing_saveable"),
                   ("attr", "jax.checkpoint_policies.dots_saveable")),
    "auto_axes": (*_fn("jax.sharding.auto_axes", "out_sharding"), *_RESHARD),
    "shard_map": ((ANY, *(("attr", n) for n in _SHARD_MAP)),
                  *((ANY, *(("keyword", n, k) for n in _SHARD_MAP)) for k in ("mesh", "in_specs", "out_specs")),
                  (ANY, *(("keyword", n, k) for n in _SHARD_MAP for k in ("check_vma", "check_rep"))),
                  (ANY, *(("keyword", n, k) for n in _SHARD_MAP for k in ("axis_names", "auto")))),
    # (a shard_map on an Explicit mesh also reshards its inputs and results: the "explicit" user's
    # jax.sharding.reshard; on an Auto mesh it needs none, as on every release before jax 0.7)
    "smap": _fn("jax.smap", "in_axes", "out_axes", "axis_name"),
    "explicit": (("attr", "jax.sharding.AxisType.Explicit"), ("keyword", "jax.sharding.Mesh", "axis_types"),
                 ("attr", "jax.set_mesh"), *_RESHARD),
    "set_mesh": (("attr", "jax.set_mesh"),),
}


def apis(requirement) -> tuple:
    """The APIs of one requirement: itself, or the alternatives of an ``("any", ...)``."""
    return tuple(requirement[1:]) if requirement[0] == ANY else (requirement,)


def all_apis() -> list:
    """Every declared API (alternatives included), each once, in declaration order."""
    seen: dict = {}
    for group in (PROGRAM, *OPS.values(), *TRANSFORMS.values()):
        for req in group:
            for api in apis(req):
                seen.setdefault(tuple(api), None)
    return list(seen)


def api_name(api) -> str:
    """How an API is named in capabilities and messages: ``jax.lax.pcast`` (a module or
    attribute), ``jax.lax.all_gather(to=)`` (a keyword)."""
    return f"{api[1]}({api[2]}=)" if api[0] == "keyword" else api[1]


def resolve(name: str, import_module):
    """The object a dotted name reaches as the rendered source reaches it: the top module
    imported, then attributes, a submodule imported only where no attribute of that name is
    there yet (``jax.experimental.shard_alike``). Importing first would shadow an attribute by
    a module of the same name (``jax.config`` is a Config object; jax 0.4.28 also ships a
    deprecated ``jax/config.py`` without ``update``). Raises ImportError or AttributeError (or
    what an import raises) if the name does not resolve."""
    parts = name.split(".")
    obj = import_module(parts[0])
    for i in range(1, len(parts)):
        try:
            obj = getattr(obj, parts[i])
        except AttributeError:
            obj = import_module(".".join(parts[:i + 1]))
    return obj


def present(api, import_module, signature) -> bool:
    """Whether this JAX has ``api`` (see the module docstring). ``import_module``:
    ``importlib.import_module``; ``signature``: ``inspect.signature``. Never raises."""
    try:
        if api[0] == "module":
            import_module(api[1])
            return True
        obj = resolve(api[1], import_module)
        if api[0] == "attr":
            return True
        try:
            params = signature(obj).parameters
        except (TypeError, ValueError):  # (no signature to read: assume the keyword is taken)
            return True
        return api[2] in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
    except Exception:
        return False


def probe_all(import_module, signature) -> list:
    """The :func:`api_name` of every declared API this JAX lacks (sorted). Importing a module
    may warn (a deprecated one): warnings are the caller's to filter."""
    return sorted({api_name(a) for a in all_apis() if not present(a, import_module, signature)})


def unmet(requirements, missing) -> list:
    """The requirements of ``requirements`` none of whose APIs is available (``missing``: a
    set of :func:`api_name`), each named by its first API."""
    return [api_name(apis(r)[0]) for r in requirements if all(api_name(a) in missing for a in apis(r))]


def missing_users(missing) -> dict:
    """{user: [unmet API names]} for the users that need an API in ``missing`` (a set of
    :func:`api_name`): "program" (:data:`PROGRAM`), "op:<name>" (:data:`OPS`) and
    "transform:<name>" (:data:`TRANSFORMS`)."""
    missing = set(missing or ())
    if not missing:
        return {}
    out = {}
    users = [("program", PROGRAM), *((f"op:{k}", v) for k, v in OPS.items()),
             *((f"transform:{k}", v) for k, v in TRANSFORMS.items())]
    for user, reqs in users:
        gone = unmet(reqs, missing)
        if gone:
            out[user] = gone
    return out
