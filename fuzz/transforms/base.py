"""The parts every transform declaration is made of: :class:`Transform`.

A transform is one entry of a call's ``transforms`` chain (``{"kind": ..., params}``,
fuzz/schemas/program.schema.json ``$defs/transform``). Each kind is declared once, as an
instance of a subclass of :class:`Transform` in its family's module of :mod:`fuzz.transforms`,
with:

- ``kind`` (the IR's name), ``api``: the keys of :data:`fuzz.jax_api.TRANSFORMS` its rendering
  uses (the worker loads fuzz/jax_api.py by path, without shardfuzz, so the API lists stay
  there), ``doc``: the JAX documentation page of its semantics;
- ``schema``: its clause of the program schema's ``$defs/transform`` (kinds of one family may
  share one clause object: the schema lists each clause once, :func:`fuzz.transforms.schema_clauses`);
- ``feature_names``: the feature names :meth:`features` may add (besides its own name);
- the typing rule: :meth:`enter` (inner context and argument types) and :meth:`exit`
  (outer result types), what :func:`fuzz.typecheck._enter` / :func:`fuzz.typecheck._exit` dispatch to;
- the rendering :meth:`render` (``fuzz.render.Renderer.transform``), the reference
  :meth:`evaluate` (``fuzz.reference.Reference.call``), the report's :meth:`features`
  (``fuzz.features``), and the generator's :meth:`draw` (its parameters once the generator
  picked the kind: ``strategies.programs._Gen.transform_in``) and :meth:`draw_out` (the
  parameters that need the inner results: ``_Gen.transform_out``).

The typing context's helpers (:mod:`fuzz.typecheck`) are reached at call time through the
module (``T.name``): typecheck looks the registry up inside its functions, so the two may
import each other.
"""
from __future__ import annotations


class Transform:
    """One transform kind of the program model (see the module's docstring)."""

    kind: str = ""
    api: tuple = ()  # keys of fuzz.jax_api.TRANSFORMS
    doc: str = ""  # a URL of JAX's documentation
    schema: dict = {}  # the clause of $defs/transform
    feature_names: tuple = ()
    # the generator's policy hooks (strategies.programs._Gen.transform_in / chain_call):
    draw_family: str | None = None  # kinds of one family share one entry of the draw ("jac", "loop")
    differentiates: bool = False  # takes a derivative of the function under it (fuzz.typecheck.DIFFERENTIATING)
    # the reducer's moves (fuzz/reduce.py): an output of the call may be dropped by dropping the
    # body's result it is (or, with argnums, one of the arguments it is the derivative by)
    maps_outputs: bool = False
    nullable: tuple = ()  # parameters the reducer tries as null (besides the axis names and policy)
    shrinkable: tuple = ()  # int parameters the reducer tries smaller values of

    def enter(self, t: dict, ctx, args: list, top: bool) -> tuple:
        """(inner Ctx, inner argument types) of ``t`` applied in ``ctx`` (``top``: a program
        call's first transform, ``ctx.top`` already cleared) to ``args`` (Ty). ProgramError if invalid."""
        raise NotImplementedError

    def exit(self, t: dict, outer, inner, args: list, results: list) -> list:
        """Outer result types from the inner ``results`` (Ty). ProgramError if invalid."""
        raise NotImplementedError

    def render(self, r, t: dict, f: str, nested: bool, typed: bool) -> str:
        """Python source of ``f`` under ``t``; ``r``: the ``fuzz.render.Renderer`` (its ``helpers``,
        ``caps``); ``nested``: inside a shard_map; ``typed``: a shard_map's results keep their types."""
        raise NotImplementedError

    def evaluate(self, r, t: dict, rest: list, fn: dict, ctx, inner_ctx, xs: list, inner_ts: list, env: dict):
        """(results, inner result types) of ``t`` over ``rest`` and ``fn`` at the values ``xs``:
        ``r`` is the ``fuzz.reference.Reference`` (its ``call`` evaluates ``rest``)."""
        raise NotImplementedError

    def reference(self, r, t: dict, rest: list, fn: dict, ctx, xs: list, ts: list, env: dict):
        """(results, outer result types): :meth:`evaluate` between the typing rule's two sides."""
        from fuzz import typecheck as T

        inner_ctx, inner_ts = T.enter(t, ctx, ts)
        outs, out_ts = self.evaluate(r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env)
        return outs, T.exit_(t, ctx, inner_ctx, ts, out_ts)

    def features(self, t: dict, out: set, mesh: tuple, manual: frozenset) -> frozenset:
        """Add the features of ``t`` beyond its name to ``out``; returns the mesh axes manual
        under it (``manual``: those manual outside)."""
        return manual

    def draw(self, g, ctx, args: list, pools: dict) -> dict:
        """The transform entry once the generator ``g`` (``strategies.programs._Gen``) drew this kind
        for ``args`` in ``ctx``; ``pools``: the generator's argument pools (``floats``,
        ``grad_args``, ``jac_args``). Parameters that need the results are left empty."""
        return {"kind": self.kind}

    def added_rank(self, t: dict, args: list) -> int | None:
        """For a Jacobian: the number of dims every result of ``t`` of ``args`` gains (the generator
        bounds the results' rank by it); None for a transform that is none."""
        return None

    def draw_out(self, g, t: dict, outer, inner, results: list, inner_args: list) -> None:
        """Fill the parameters of ``t`` that need the inner ``results`` (default: none)."""
        return None
