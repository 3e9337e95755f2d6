"""The GPU team (solver/gpu_team.py): on a GPU backend one block of threads runs the team's
launches (fused.py's substeps, a kept step, colouring rounds), and the scenes step bit for
bit as with a launch per stage group, in far fewer launches; on CUDA, scenes over the
block's slots run on a grid team, bit for bit as one block. Run on a GPU backend with
FX2D_TEST_ARCH (=vulkan on Mesa's software Vulkan driver too: minutes of compiling shaders,
which .ci/run's Vulkan subset has no room for); on the CPU backend only the choice of team
is checked (the CPU's own team: tests/test_team.py)."""

import numpy as np
import pytest
import taichi as ti

from fx2d_gpu import scenes
from fx2d_gpu.device import launching, runtime
from fx2d_gpu.physics.solver import gpu_team, team
from fx2d_gpu.physics.solver.plan import StepOptions

from .helpers import assert_same_trace, run, trace, with_options, xfail_where_paths_round_apart

#: Steps compared: the pyramid's boxes settle and the grid's chains swing, so pairs come and
#: go (new colourings, kept steps) and joints pull.
STEPS = 40


def _scenes(arch: str, solver: str):
    """Large worlds (over context.BY_WORLD_MAX_BODIES bodies, so not a world per thread): a
    10-row pyramid (55 boxes) and a 7 x 7 grid of jointed boxes."""
    return {
        "pyramid": scenes.pyramid(10, arch=arch, solver=solver),
        "joint_grid": scenes.joint_grid(7, 7, arch=arch, solver=solver),
    }


def _stepped(scene, steps: int):
    """(trace of `steps` steps, launches a step, the team that ran each step's substeps)."""
    run(scene, 3)  # compiled, and past the first step's colouring from scratch
    teams = []
    before = launching.launch_count()
    got = trace(scene, steps, each=lambda _: teams.append(team.status().step_threads))
    return got, (launching.launch_count() - before) / steps, teams


def _skip_without_a_gpu(arch: str):
    if arch == "cpu":
        pytest.skip("the GPU team runs on GPU backends only (FX2D_TEST_ARCH=vulkan or cuda)")
    if runtime.on_software_vulkan():
        pytest.skip(
            "no GPU: a software Vulkan driver runs no GPU team (gpu_team.threads_for: Mesa "
            "compiles its kernel for 7 to over 20 minutes); a GPU runs this "
            "(benchmarks/device_run.sh)"
        )


def test_the_gpu_team_steps_bit_for_bit_as_a_launch_per_stage(arch, solver, request):
    _skip_without_a_gpu(arch)
    xfail_where_paths_round_apart(request, arch)  # CUDA fuses multiply-adds per kernel
    for name, scene in _scenes(arch, solver).items():
        with_options(scene, team=False)
        per_stage, per_stage_launches, no_team = _stepped(scene, STEPS)
        scene = _scenes(arch, solver)[name]
        on_team, team_launches, teams = _stepped(scene, STEPS)
        assert_same_trace(per_stage, on_team)
        assert set(no_team) == {0} and set(teams) == {gpu_team.BLOCK_THREADS}, name
        # A launch per stage group: 5-14 launches a substep; the team: a handful a step.
        assert team_launches * 4 <= per_stage_launches, (name, team_launches, per_stage_launches)


def test_a_scene_over_the_gpu_teams_slots_launches_per_stage(arch):
    _skip_without_a_gpu(arch)
    scene = scenes.pyramid(10, arch=arch)  # 55 body slots (and a static ground)
    with_options(scene, gpu_team_slots=scene.n_bodies - 1, gpu_grid_team=False)
    _, _, teams = _stepped(scene, 3)
    assert set(teams) == {0}
    with_options(scene, gpu_grid_team=True)  # CUDA only: Vulkan and Metal keep per stage
    _, _, teams = _stepped(scene, 3)
    blocks = gpu_team.grid_blocks(0)
    assert set(teams) == {blocks * gpu_team.BLOCK_THREADS if arch == "cuda" else 0}
    with_options(scene, gpu_team_slots=scene.n_bodies)
    _, _, teams = _stepped(scene, 3)
    assert set(teams) == {gpu_team.BLOCK_THREADS}


def test_a_grid_team_steps_bit_for_bit_as_one_block(arch, solver):
    """The grid team (CUDA: blocks meeting at a grid-wide barrier) runs the same kernel as
    one block with more members: the same stages, items and colours in the same order, so
    the same results bit for bit (on one backend: no multiply-add is fused differently, as
    between the team's kernel and the per-stage kernels). Its blocks: 4 (asked for, so
    members share items unevenly and some have none) and one a multiprocessor."""
    if arch != "cuda":
        pytest.skip(
            "a grid team runs on CUDA only (gpu_team.py: Vulkan and Metal promise no "
            "residency across workgroups)"
        )
    blocks = gpu_team.grid_blocks(0)
    assert blocks >= 1, "the CUDA driver did not say how many multiprocessors the GPU has"
    for name in _scenes(arch, solver):
        one_block, block_launches, teams = _stepped(_scenes(arch, solver)[name], STEPS)
        assert set(teams) == {gpu_team.BLOCK_THREADS}, name
        for asked, team_blocks in ((4, 4), (0, blocks)):
            scene = with_options(
                _scenes(arch, solver)[name],
                gpu_team_slots=0,
                gpu_grid_team=True,
                gpu_grid_blocks=asked,
            )
            on_grid, grid_launches, teams = _stepped(scene, STEPS)
            assert set(teams) == {team_blocks * gpu_team.BLOCK_THREADS}, (name, asked)
            assert_same_trace(one_block, on_grid)
            assert grid_launches == block_launches, (name, asked)


def test_colours_by_turns_step_bit_for_bit_on_a_block_and_on_the_grid(arch, solver):
    """StepOptions.colors_by_turns on CUDA (coloring.take_turns: a pass's colours without
    the team's barriers between them, each constraint waiting for its bodies'
    constraints of lower colours, its memory fenced on either side): on one block, whose
    threads wait on each other's counters within their warps, and on the grid team, whose
    blocks wait on each other's through the L2 cache, the same results bit for bit as at
    a barrier after each colour, in as many launches. With its body stages by turns too
    (StepOptions.stages_by_turns, the default: the pyramid's substeps with no barrier
    between their stages; the joint grid's, with joints, as without it) and without."""
    if arch != "cuda":
        pytest.skip("the GPU team's fences and waits across blocks run on CUDA only")
    for name in _scenes(arch, solver):
        for grid in ({}, {"gpu_team_slots": 0, "gpu_grid_team": True}):
            plain, launches, teams = _stepped(
                with_options(_scenes(arch, solver)[name], **grid), STEPS
            )
            for stages_by_turns in (True, False):
                scene = with_options(
                    _scenes(arch, solver)[name],
                    **grid,
                    colors_by_turns=True,
                    stages_by_turns=stages_by_turns,
                )
                turned, turned_launches, turned_teams = _stepped(scene, STEPS)
                assert turned_teams == teams and turned_launches == launches, (name, grid)
                assert_same_trace(plain, turned)


def test_the_gpu_team_is_one_block_for_scenes_up_to_its_slots():
    threads = gpu_team.BLOCK_THREADS
    assert gpu_team.threads_for(20_000, serial=False, enabled=True, max_slots=20_000) == threads
    assert gpu_team.threads_for(20_001, serial=False, enabled=True, max_slots=20_000) == 0
    assert gpu_team.threads_for(100, serial=False, enabled=False, max_slots=20_000) == 0
    assert gpu_team.threads_for(100, serial=True, enabled=True, max_slots=20_000) == 0
    software = dict(serial=False, enabled=True, max_slots=20_000, software=True)
    assert gpu_team.threads_for(100, **software) == 0  # lavapipe: a launch per stage
    # A block of a GPU's warps (32 lanes) and of Vulkan's usual waves (64).
    assert threads % 64 == 0 and threads <= 1024


def test_a_grid_team_takes_scenes_over_the_slots_where_it_has_blocks():
    threads = gpu_team.BLOCK_THREADS
    over = dict(serial=False, enabled=True, max_slots=20_000, max_grid_slots=200_000)
    assert gpu_team.threads_for(20_001, **over, grid_blocks=132) == 132 * threads
    assert gpu_team.threads_for(200_000, **over, grid_blocks=132) == 132 * threads
    assert gpu_team.threads_for(200_001, **over, grid_blocks=132) == 0  # per stage
    assert gpu_team.threads_for(20_000, **over, grid_blocks=132) == threads  # one block
    assert gpu_team.threads_for(20_001, **over, grid_blocks=1) == 0  # a block is no grid
    assert gpu_team.threads_for(20_001, **over, grid_blocks=0) == 0
    assert gpu_team.threads_for(20_001, **over, software=True, grid_blocks=132) == 0
    assert gpu_team.threads_for(20_001, **{**over, "enabled": False}, grid_blocks=132) == 0


def test_a_grid_team_has_blocks_on_cuda_only(arch):
    """Off CUDA no grid team (0 blocks), whatever is asked; on CUDA a block per
    multiprocessor, as the driver says, or the blocks asked for."""
    if arch != "cuda":
        assert gpu_team.grid_blocks(0) == 0 and gpu_team.grid_blocks(8) == 0
        return
    assert gpu_team.grid_blocks(0) == runtime.cuda_multiprocessors() >= 1
    assert gpu_team.grid_blocks(8) == 8


def test_gpu_team_slots_grid_blocks_and_world_block_are_checked():
    assert StepOptions().gpu_team_slots == 2_048
    assert StepOptions().gpu_grid_team is True and StepOptions().gpu_grid_blocks == 0
    assert StepOptions().gpu_grid_team_slots == 200_000
    for count in ("gpu_team_slots", "gpu_grid_team_slots", "gpu_grid_blocks"):
        with pytest.raises(ValueError, match=f"{count} must be >= 0"):
            StepOptions(**{count: -1})
        with pytest.raises(TypeError, match=f"{count} must be int"):
            StepOptions(**{count: 1.5})
    with pytest.raises(TypeError, match="gpu_grid_team must be bool"):
        StepOptions(gpu_grid_team=1)
    top = gpu_team.MAX_GRID_BLOCKS
    StepOptions(gpu_grid_blocks=top)
    with pytest.raises(ValueError, match=f"gpu_grid_blocks must be at most {top}"):
        StepOptions(gpu_grid_blocks=top + 1)
    assert StepOptions().gpu_world_block == 256
    for block in (32, 512, 1024):
        StepOptions(gpu_world_block=block)
    for block in (0, 16, 100, 1056):
        with pytest.raises(ValueError, match="gpu_world_block must be a multiple of 32"):
            StepOptions(gpu_world_block=block)
    with pytest.raises(TypeError, match="gpu_world_block must be int"):
        StepOptions(gpu_world_block=256.0)


@ti.kernel
def _shares(begin: ti.i32, end: ti.i32, n_members: ti.i32, out: ti.types.ndarray()):
    for member in range(n_members):
        lo, hi = team.share(begin, end, member, n_members)
        out[member, 0], out[member, 1] = lo, hi


@pytest.mark.parametrize(
    "items, members",
    [
        (1_000_003, 132 * gpu_team.BLOCK_THREADS),  # a 1M pile's bodies on an H200's grid team
        (4_200_000, gpu_team.MAX_GRID_BLOCKS * gpu_team.BLOCK_THREADS),  # its pairs, most blocks
        (15_000, gpu_team.BLOCK_THREADS),  # the large pyramid's pairs on one block
        (3 * 65_536, 65_536),  # 65,536 cart-poles' body slots, a world per thread
        (7, 2),  # a CPU team: fewer items than...
        (3, 8),  # ...and more members than items
    ],
)
def test_a_teams_shares_are_the_exact_split_at_a_grid_teams_sizes(items, members):
    """team.share deals [begin, end) as begin + count * member // n_members onwards, in exact
    integers (Python's here), the shares tiling the items in order: also where count *
    member passes 32 bits (a grid team of 33,792 threads on a 1M pile's bodies: that product
    overflowed and the CUDA launch read out of bounds; a step without contacts shares a
    world's slots the same way, a world a thread)."""
    begin = 5
    got = np.zeros((members, 2), dtype=np.int32)
    _shares(begin, begin + items, members, got)
    member = np.arange(members, dtype=np.int64)
    assert np.array_equal(got[:, 0], begin + items * member // members)
    assert np.array_equal(got[:, 1], begin + items * (member + 1) // members)
    assert got[0, 0] == begin and got[-1, 1] == begin + items
    assert np.array_equal(got[1:, 0], got[:-1, 1])
