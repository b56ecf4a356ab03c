"""The reference encodes JAX's documented semantics: each case checked against NumPy by hand."""
import numpy as np
import pytest

from fuzz.reference import evaluate, make_input
from fuzz.typecheck import ProgramError
from helpers import JIT, call, eqn, fn, program, shard_map, vmap


def run1(p):
    return evaluate(p)["results"][0]


def test_psum_of_unvarying_value_multiplies_by_axis_size():
    # design.md: P() input [0,1,2,3], psum over a 4-device axis gives [0,4,8,12]
    p = program(inputs=[("x0", (4,), 1)], functions={"f0": fn(["a"], [eqn("psum", ["a"], ["v"], axes=["x"])], ["v"])},
                calls=[call("f0", [shard_map([[None]], [[None]])], ["x0"])])
    np.testing.assert_allclose(run1(p)[0], 4 * make_input(1, (4,)))


def test_blocks_and_axis_index_follow_in_specs():
    p = program(inputs=[("x0", (8,), 2)], functions={"f0": fn(["a"], [eqn("axis_index", ["a"], ["v"], axes=["x"])], ["v"])},
                calls=[call("f0", [JIT, shard_map([[["x"]]], [[["x"]]])], ["x0"])])
    np.testing.assert_allclose(run1(p)[0], make_input(2, (8,)) + np.repeat(np.arange(4), 2))


def test_two_axis_spec_is_major_to_minor():
    mesh = (("x", 2), ("y", 2))
    p = program(mesh=mesh, inputs=[("x0", (4,), 3)],
                functions={"f0": fn(["a"], [eqn("axis_index", ["a"], ["v"], axes=["y"])], ["v"])},
                calls=[call("f0", [shard_map([[["x", "y"]]], [[["x", "y"]]])], ["x0"])])
    # device (x, y) holds element 2x + y; axis_index('y') adds y
    np.testing.assert_allclose(run1(p)[0], make_input(3, (4,)) + np.array([0, 1, 0, 1]))


def test_all_gather_tiled_and_untiled():
    body = fn(["a"], [eqn("all_gather", ["a"], ["v"], axes=["x"], axis=0, tiled=True),
                      eqn("all_gather", ["a"], ["w"], axes=["x"], axis=1, tiled=False)], ["v", "w"])
    p = program(inputs=[("x0", (8,), 4)], functions={"f0": body},
                calls=[call("f0", [shard_map([[["x"]]], [[["x"]], [None, ["x"]]])], ["x0"])])
    x = make_input(4, (8,))
    v, w = run1(p)
    np.testing.assert_allclose(v, np.tile(x, 4))
    np.testing.assert_allclose(w, np.tile(x.reshape(4, 2).T, (1, 4)))


def test_ppermute_shifts_blocks():
    body = fn(["a"], [eqn("ppermute", ["a"], ["v"], axes=["x"], shift=1)], ["v"])
    p = program(inputs=[("x0", (8,), 5)], functions={"f0": body},
                calls=[call("f0", [shard_map([[["x"]]], [[["x"]]])], ["x0"])])
    np.testing.assert_allclose(run1(p)[0], np.roll(make_input(5, (8,)), 2))


def test_psum_scatter_and_all_to_all():
    body = fn(["a"], [eqn("psum_scatter", ["a"], ["v"], axes=["x"], axis=0),
                      eqn("all_to_all", ["a"], ["w"], axes=["x"], split_axis=0, concat_axis=0)], ["v", "w"])
    p = program(inputs=[("x0", (16,), 6)], functions={"f0": body},
                calls=[call("f0", [shard_map([[["x"]]], [[["x"]], [["x"]]])], ["x0"])])
    x = make_input(6, (16,))
    v, w = run1(p)
    np.testing.assert_allclose(v, x.reshape(4, 4).sum(0), rtol=1e-6)  # device i: sum_j block_j[i]
    np.testing.assert_allclose(w, x.reshape(4, 4).T.ravel())


def test_vmap_axes_and_collective_over_vmap_axis():
    body = fn(["a"], [eqn("psum", ["a"], ["v"], axes=["i"])], ["v"])
    p = program(inputs=[("x0", (3, 4), 7)], functions={"f0": body},
                calls=[call("f0", [vmap([1], [0], axis_name="i")], ["x0"])])
    x = make_input(7, (3, 4))
    np.testing.assert_allclose(run1(p)[0], np.tile(x.sum(1), (4, 1)), rtol=1e-6)


@pytest.mark.parametrize("check_vma", [True, False])
def test_grad_of_unvarying_value_inside_shard_map(check_vma):
    # design.md trap: with check_vma the gradient of an unvarying value is summed over the axis
    inner = fn(["w"], [eqn("sin", ["w"], ["s"]), eqn("mul", ["s", "a"], ["m"]), eqn("sum", ["m"], ["l"], axis=None)], ["l"])
    body = fn(["a", "b"], [eqn("call", ["b"], ["g"], transforms=[{"kind": "grad", "argnums": [0]}], fn=inner)], ["g"])
    p = program(inputs=[("x0", (8,), 8), ("x1", (2,), 9)], functions={"f0": body},
                calls=[call("f0", [shard_map([[["x"]], [None]], [[["x"]]], check_vma=check_vma)], ["x0", "x1"])])
    x, w = make_input(8, (8,)), make_input(9, (2,))
    blocks = x.reshape(4, 2)
    want = np.tile(np.cos(w) * blocks.sum(0), 4) if check_vma else (np.cos(w) * blocks).ravel()
    np.testing.assert_allclose(run1(p)[0], want, rtol=1e-5)


def test_grad_outside_shard_map_is_the_total_derivative():
    body = fn(["a"], [eqn("psum", ["a"], ["p"], axes=["x"]), eqn("sin", ["p"], ["s"])], ["s"])
    outer = fn(["a"], [eqn("call", ["a"], ["y"], transforms=[shard_map([[["x"]]], [[None]])], fn=body),
                       eqn("sum", ["y"], ["l"], axis=None)], ["l"])
    p = program(inputs=[("x0", (8,), 10)], functions={"f0": outer},
                calls=[call("f0", [JIT, {"kind": "grad", "argnums": [0]}], ["x0"])])
    x = make_input(10, (8,))
    # y = sin(sum of the 4 blocks) (2 values); d/dx of sum(y) = cos(block sum) at each element
    np.testing.assert_allclose(run1(p)[0], np.tile(np.cos(x.reshape(4, 2).sum(0)), 4), rtol=1e-5)


def test_callbacks_record_what_each_device_receives():
    body = fn(["a"], [eqn("io_callback", ["a"], [], tag="cb1", ordered=True, returns=False, stop_gradient=False)], ["a"])
    p = program(inputs=[("x0", (8,), 11)], functions={"f0": body},
                calls=[call("f0", [shard_map([[["x"]]], [[["x"]]])], ["x0"])])
    got = evaluate(p)["callbacks"][0]["cb1"]
    np.testing.assert_allclose(got, np.unique(make_input(11, (8,))))


def test_invalid_program_is_refused():
    body = fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])
    p = program(inputs=[("x0", (8,), 1)], functions={"f0": body},
                calls=[call("f0", [shard_map([[["x"]]], [[None]])], ["x0"])])  # varies over x, out_specs omit it
    with pytest.raises(ProgramError, match="omit"):
        evaluate(p)


REDUCERS = {"psum": np.sum, "pmax": np.max, "pmin": np.min, "pmean": np.mean}


def reducing_body(axes):
    """pmax, pmin, pmean and psum of one argument over ``axes``: four results in that order."""
    ops = ["pmax", "pmin", "pmean", "psum"]
    return fn(["a"], [eqn(op, ["a"], [f"v{k}"], axes=axes) for k, op in enumerate(ops)],
              [f"v{k}" for k in range(len(ops))]), ops


def test_reducing_collectives_over_one_axis_of_differing_blocks():
    body, ops = reducing_body(["x"])
    p = program(inputs=[("x0", (8,), 12)], functions={"f0": body},
                calls=[call("f0", [shard_map([[["x"]]], [[None]] * 4)], ["x0"])])
    blocks = make_input(12, (8,)).reshape(4, 2)  # device i holds blocks[i]
    assert not np.allclose(blocks.max(0), blocks.min(0))  # the blocks differ: min and max tell apart
    got = run1(p)
    for op, g in zip(ops, got):
        np.testing.assert_allclose(g, REDUCERS[op](blocks, axis=0), rtol=1e-6, err_msg=op)


def test_reducing_collectives_over_the_minor_axis_of_two():
    # device (x, y) holds element 2x + y; a reduction over y combines the pair of each x
    body, ops = reducing_body(["y"])
    p = program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4,), 13)], functions={"f0": body},
                calls=[call("f0", [shard_map([[["x", "y"]]], [[["x"]]] * 4)], ["x0"])])
    pairs = make_input(13, (4,)).reshape(2, 2)
    assert not np.allclose(pairs.max(1), pairs.min(1))
    for op, g in zip(ops, run1(p)):
        np.testing.assert_allclose(g, REDUCERS[op](pairs, axis=1), rtol=1e-6, err_msg=op)


def test_reducing_collectives_over_both_axes_of_a_2d_input():
    # rows split over x, columns over y: device (x, y) holds the 2x2 block [x, y]
    body, ops = reducing_body(["x", "y"])
    p = program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4, 4), 14)], functions={"f0": body},
                calls=[call("f0", [JIT, shard_map([[["x"], ["y"]]], [[None, None]] * 4)], ["x0"])])
    x = make_input(14, (4, 4))
    blocks = x.reshape(2, 2, 2, 2).transpose(0, 2, 1, 3).reshape(4, 2, 2)  # (device, row, col)
    assert not np.allclose(blocks.max(0), blocks.min(0))
    for op, g in zip(ops, run1(p)):
        np.testing.assert_allclose(g, REDUCERS[op](blocks, axis=0), rtol=1e-6, err_msg=op)


def test_reducing_collectives_over_a_vmap_axis():
    body, ops = reducing_body(["i"])
    p = program(inputs=[("x0", (3, 5), 15)], functions={"f0": body},
                calls=[call("f0", [vmap([0], [0] * 4, axis_name="i")], ["x0"])])
    x = make_input(15, (3, 5))
    for op, g in zip(ops, run1(p)):
        np.testing.assert_allclose(g, np.broadcast_to(REDUCERS[op](x, axis=0), (3, 5)), rtol=1e-6, err_msg=op)


def test_pmax_of_an_unvarying_value_is_the_value_and_psum_multiplies_it():
    # P() input: every device holds the whole array
    body, ops = reducing_body(["x"])
    p = program(inputs=[("x0", (4,), 16)], functions={"f0": body},
                calls=[call("f0", [shard_map([[None]], [[None]] * 4)], ["x0"])])
    x = make_input(16, (4,))
    want = {"pmax": x, "pmin": x, "pmean": x, "psum": 4 * x}
    for op, g in zip(ops, run1(p)):
        np.testing.assert_allclose(g, want[op], rtol=1e-6, err_msg=op)
