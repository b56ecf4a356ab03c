"""jax.checkpoint (remat), with one of the policies the program model names."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from fuzz import typecheck as T
from fuzz.transforms.base import Transform


class Checkpoint(Transform):
    maps_outputs = True
    kind = "checkpoint"
    api = ("checkpoint",)
    doc = "https://docs.jax.dev/en/latest/_autosummary/jax.checkpoint.html"
    schema = {"properties": {"kind": {"const": "checkpoint"},
                             "policy": {"enum": [None, "everything_saveable", "nothing_saveable", "dots_saveable"]}},
              "required": ["policy"], "additionalProperties": False}
    feature_names = tuple(f"checkpoint_policy:{p}" for p in T.CHECKPOINT_POLICIES if p is not None)

    def enter(self, t, ctx, args, top):
        T._require(t["policy"] in T.CHECKPOINT_POLICIES, f"unknown checkpoint policy {str(t['policy'])[:40]!r}")
        return (replace(ctx, rules=ctx.rules | {T.NO_EFFECTS}) if ctx.in_grad else ctx), list(args)

    def exit(self, t, outer, inner, args, results):
        return list(results)

    def render(self, r, t, f, nested, typed):
        policy = t["policy"]
        if policy is None:
            return f"jax.checkpoint({f})"
        if policy not in T.CHECKPOINT_POLICIES:
            raise T.ProgramError(f"unknown checkpoint policy {str(policy)[:40]!r}")
        return f"jax.checkpoint({f}, policy=jax.checkpoint_policies.{policy})"

    def evaluate(self, r, t, rest, fn, ctx, inner_ctx, xs, inner_ts, env):
        return r.call(rest, fn, inner_ctx, xs, inner_ts, env)

    def features(self, t, out, mesh, manual):
        if t["policy"] is not None:
            out.add(f"checkpoint_policy:{t['policy']}")
        return manual

    def draw(self, g, ctx, args, pools):
        return {"kind": "checkpoint", "policy": g.draw(st.sampled_from(T.CHECKPOINT_POLICIES))}  # None first


TRANSFORMS = (Checkpoint(),)
