"""Small worlds' substeps a block of worlds at a time (StepOptions.small_worlds_by_block,
fused.BY_BLOCK): the small worlds' step keeps its broad phase, colouring and report a world
a thread, and solves its substeps a block of worlds at a time, the block's threads sharing
each stage over the block's items and each colour over the block's constraints of that
colour, meeting at the block's barrier. On a CPU a block is one thread (CPU_BLOCK_WORLDS
worlds stepped stage by stage, colour after colour); tests/test_vulkan.py runs blocks of 256
threads on the SPIR-V path. A colour's constraints share no moving body, so every step must
be bit for bit what a world a thread gives with the same colours
(StepOptions.color_small_worlds), which is the independent reference here."""

import numpy as np
import pytest
import taichi as ti

from fx2d_gpu import StepOptions
from fx2d_gpu.physics.solver import fused
from fx2d_gpu.physics.solver.plan import current_plan

from .helpers import COLORED_LIKE_GENERAL, machine_scene
from .test_small_worlds_by_stage import _chained_piles
from .test_small_worlds_one_launch import N_WORLDS, _assert_same_steps, _run

#: The top box of every other world's stack, this many times its mass: worlds of uneven
#: masses (world_params.IMMOVABLE_SWEEP_RATIO, 10), whose XPBD velocity pass sweeps the
#: contacts with an immovable body again (fused._block_pass' last sweep).
HEAVY_TOP = 40.0


@pytest.fixture(autouse=True)
def _cpu_only(arch):
    if arch != "cpu":
        pytest.skip("a CPU's blocks of one thread; tests/test_vulkan.py runs a GPU's")


def _uneven(scene):
    """scene with the top box of its odd worlds' stacks HEAVY_TOP times heavier."""
    masses = scene.get_body_params([3])["mass"]
    masses[1::2] *= HEAVY_TOP
    scene.set_body_params([3], mass=masses)
    return scene


# XPBD in worlds of uneven masses (its joints' later sweeps and the immovable sweep) and
# the soft step, in the step's one launch, and the soft step's substeps in a launch of their
# own (fused.substeps_by_world: a CPU's way without fold_on_cpu): a kernel each.
@pytest.mark.parametrize(
    "solver, uneven, folded",
    [("xpbd", True, True), ("soft_step", False, True), ("soft_step", False, False)],
)
def test_small_worlds_by_block_step_bit_for_bit_as_a_world_a_thread(arch, solver, uneven, folded):
    """64 piling worlds (stacks, thrown circles, two bars hinged in a chain; they sleep, and
    a third are pushed awake at step 70), 100 steps, the substeps in the step's one launch
    or a launch of their own: states, contacts and events the same every step a block of
    worlds at a time as a world a thread, with the worlds in 16 blocks of 4."""
    make = _uneven if uneven else (lambda scene: scene)
    options = {**COLORED_LIKE_GENERAL, "fold_on_cpu": folded}
    by_block = make(_chained_piles(arch, solver, **options, small_worlds_by_block=True))
    ctx = by_block.step_context()
    assert ctx.immovable_sweep == uneven and current_plan(ctx).worlds_by_block
    assert fused.block_members(N_WORLDS, by_block.n_bodies) == N_WORLDS // fused.CPU_BLOCK_WORLDS
    stepped, _ = _run(by_block)
    a_world_a_thread, _ = _run(make(_chained_piles(arch, solver, **options)))
    _assert_same_steps(stepped, a_world_a_thread)


def _machines(arch, **options):
    """helpers.machine_scene's 24 worlds (a chain ground, a stack, thrown shapes, a capsule,
    a motorised hinge and slider, a kinematic pusher, a sensor, a bouncy ball) and a bullet
    fired through them, in one launch a step; their worlds are of uneven masses."""
    scene = machine_scene(
        24,
        arch,
        solver="xpbd",
        step_options={"fold_on_cpu": True, **COLORED_LIKE_GENERAL, **options},
    )
    scene.add_circle((-11.0, 1.0), 0.05, mass=0.02, velocity=(60.0, 0.0), bullet=True)
    return scene


def test_small_worlds_by_block_with_every_kind_of_body_bit_for_bit_as_a_world_a_thread(arch):
    """Every kind of body and constraint a small world holds (bullets and the continuous
    sweep's second round, a kinematic body, motors, a sensor, restitution, uneven masses),
    120 XPBD steps in blocks of 4 worlds: poses, velocities, contacts and joint
    coordinates the same every step as a world a thread in the same colours."""

    def trace(scene):
        steps = []
        for _ in range(120):
            scene.step(1.0 / 60.0)
            state, contacts = scene.get_state(), scene.contacts(world=None)
            steps.append(
                (
                    state.position,
                    state.angle,
                    state.velocity,
                    state.angular_velocity,
                    contacts.body_a,
                    contacts.body_b,
                    contacts.normal_impulse,
                    scene.joint_state().position,
                )
            )
        return steps

    by_block = _machines(arch, small_worlds_by_block=True)
    ctx = by_block.step_context()
    assert ctx.has_bullets and ctx.has_kinematic and ctx.immovable_sweep
    assert current_plan(ctx).worlds_by_block
    _assert_same_steps(trace(by_block), trace(_machines(arch)))


@ti.kernel
def _blocks_of(out: ti.types.ndarray(), block_size: ti.i32, n_members: ti.i32, n_worlds: ti.i32):
    for member in range(n_members):
        block = fused.block_worlds(member, block_size, n_members, n_worlds)
        for entry in ti.static(range(3)):
            out[member, entry] = block[entry]


@pytest.mark.parametrize(
    "n_worlds, n_bodies, block_size",
    [(64, 10, 256), (65_536, 8, 256), (1, 40, 256), (1_000, 3, 256), (37, 10, 1), (4, 1, 1)],
)
def test_a_blocks_worlds_are_its_own_and_every_world_has_a_block(
    arch, n_worlds, n_bodies, block_size
):
    """block_worlds over a launch's items (block_members' count at that block size): each
    item's lane is its place in its block, a block's threads agree on its worlds, the blocks
    take consecutive runs of worlds that cover every world once, and no block has more than
    its share (the worlds spread evenly: ceil(n_worlds / n_blocks)). Checked against the
    same partition built with NumPy."""
    per_block = max(1, block_size // n_bodies) if block_size > 1 else fused.CPU_BLOCK_WORLDS
    n_blocks = -(-n_worlds // per_block)
    n_members = n_blocks * block_size
    out = np.zeros((n_members, 3), np.int32)
    _blocks_of(out, block_size, n_members, n_worlds)
    lanes, firsts, ends = out.T
    np.testing.assert_array_equal(lanes, np.arange(n_members) % block_size)
    firsts, ends = firsts.reshape(n_blocks, block_size), ends.reshape(n_blocks, block_size)
    assert (firsts == firsts[:, :1]).all() and (ends == ends[:, :1]).all()
    firsts, ends = firsts[:, 0], ends[:, 0]
    share = -(-n_worlds // n_blocks)
    assert firsts[0] == 0 and ends[-1] == n_worlds
    np.testing.assert_array_equal(firsts[1:], ends[:-1])  # consecutive, no world twice
    assert ((ends - firsts >= 0) & (ends - firsts <= share)).all()
    covered = np.concatenate([np.arange(a, b) for a, b in zip(firsts, ends, strict=True)])
    np.testing.assert_array_equal(covered, np.arange(n_worlds))


@pytest.mark.parametrize(
    "n_worlds, n_bodies, n_joints, pairs_a_world",
    [(65_536, 8, 1, 7.6), (64, 10, 1, 9.0), (4_096, 3, 2, 0.0), (100, 40, 0, 300.0), (7, 1, 0, 0)],
)
def test_a_gpu_block_takes_the_most_worlds_that_give_each_thread_one_item(
    n_worlds, n_bodies, n_joints, pairs_a_world
):
    """block_members at a GPU's block of 256 threads: its worlds' body slots fit the
    threads, and so do their constraints (the last broad phase's pairs a world, rounded
    up, and the joint slots), and one world more would not fit (at least one world a
    block, however many it holds); `batched_small` (8 bodies, ~7.6 pairs and a joint a
    world) takes 28 worlds a block, 2,341 blocks at 65,536 worlds. A CPU's block (one
    thread) takes CPU_BLOCK_WORLDS."""
    threads = 256
    n_pairs = round(pairs_a_world * n_worlds)
    members = fused.block_members(n_worlds, n_bodies, n_joints, n_pairs, threads)
    assert members % threads == 0
    n_blocks = members // threads
    per_block = -(-n_worlds // n_blocks)  # (block_worlds' even spread)
    items = max(n_bodies, -(-n_pairs // n_worlds) + n_joints)
    assert per_block * items <= threads or per_block == 1
    assert -(-n_worlds // (n_blocks - 1)) * items > threads if n_blocks > 1 else True
    if (n_worlds, n_bodies) == (65_536, 8):
        assert n_blocks == 2_341 and threads // items == 28
    cpu = fused.block_members(n_worlds, n_bodies, n_joints, n_pairs, threads=1)
    assert cpu == -(-n_worlds // fused.CPU_BLOCK_WORLDS)


def test_by_block_needs_the_colours_and_is_not_by_stage():
    """A block shares a colour's constraints, so its worlds need several colours
    (color_small_worlds); by stage and by block are two ways to run the same substeps."""
    with pytest.raises(ValueError, match="small_worlds_by_block needs color_small_worlds"):
        StepOptions(small_worlds_by_block=True)
    with pytest.raises(ValueError, match="ask for one"):
        StepOptions(color_small_worlds=True, small_worlds_by_block=True, small_worlds_by_stage=True)
    with pytest.raises(TypeError, match="small_worlds_by_block"):
        StepOptions(color_small_worlds=True, small_worlds_by_block=1)
    assert StepOptions(color_small_worlds=True, small_worlds_by_block=True).small_worlds_by_block
