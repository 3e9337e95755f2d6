"""A CPU team (solver/team.py) runs a step's substeps in one launch, its threads meeting at
barriers between stages. The independent reference is the path that launches one kernel per
stage and group of colours: the two must agree bit for bit, since a barrier orders the
stages exactly as separate loops do and a colour's constraints share no dynamic body."""

import dataclasses

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import device, scenes
from fx2d_gpu.device import launching, runtime
from fx2d_gpu.physics.solver import stages, team

from .helpers import (
    FOLDED_TEAM,
    GENERAL_PATH,
    PER_STAGE,
    assert_same_trace,
    colours_in_small_runs,
    machine_scene,
    stacks_of_two,
    step_until_asleep,
    still_or_thrown,
    trace,
    with_options,
)
from .reference.coloring import SUB_ROUNDS


def hanging_chains_over_a_pile(arch: str, n_worlds: int = 1, solver: str = "xpbd") -> fx.Scene:
    """A world of more than device.TEAM_OF_ONE_SLOTS bodies (a team of several threads): a
    pile of boxes and circles poured on the ground and two chains of 30 links, each hung
    from a static anchor, swinging into the pile. A chain's joints alternate between two
    colours out of joint order (each link shares a body with the joints on either side),
    and the pile overlaps at the start, so contacts, joints and sleep all run."""
    rng = np.random.default_rng(5)
    scene = fx.Scene(n_worlds=n_worlds, arch=arch, solver=solver)
    friction = dict(static_friction=0.6, dynamic_friction=0.5)
    scene.add_box((0.0, -0.5), (60.0, 1.0), mass=0.0, **friction)
    for i in range(560):
        x, y = -14.0 + (i % 40) * 0.7, 0.4 + (i // 40) * 0.62 + rng.uniform(0.0, 0.05)
        if i % 3:
            scene.add_box(
                (x, y), rng.uniform(0.3, 0.6, size=2), angle=rng.uniform(-0.3, 0.3), **friction
            )
        else:
            scene.add_circle((x, y), rng.uniform(0.15, 0.3), **friction)
    for side in (-1.0, 1.0):
        previous = scene.add_box((side * 16.0, 14.0), (0.2, 0.2), mass=0.0)
        for link in range(30):
            body = scene.add_box((side * (16.25 + 0.5 * link), 14.0), (0.5, 0.12), mass=0.3)
            scene.add_revolute_joint(
                previous, body, anchor=(0.0, 0.0) if link == 0 else (side * 0.25, 0.0)
            )
            previous = body
    return scene


#: Timings under which every step of a large scene takes the team the last probe gave,
#: whatever this machine's timing noise: no duel trials (TeamTimings.duel_steps, and no
#: step counts as slow) and no new barrier probe (reprobe_requests, and
#: reprobe_failed_requests after a probe that a busy moment failed).
STEADY = team.TeamTimings(
    reprobe_requests=10**9, reprobe_failed_requests=10**9, duel_slow=float("inf"), duel_steps=10**9
)


def steady(scene: fx.Scene, **timings) -> fx.Scene:
    """`scene` on STEADY timings, changed by `timings` (keyword per TeamTimings attribute).
    New timings start the duel afresh (a team of several threads, no history)."""
    return with_options(scene, team_timings=dataclasses.replace(STEADY, **timings))


def team_sizes(scene: fx.Scene, steps: int, sizes: list) -> list:
    """`steps` steps of `scene`, each appending to `sizes` the threads of the team that ran
    its substeps (team.status().step_threads; 0: no team ran them); returns `sizes`."""
    for _ in range(steps):
        scene.step(1 / 60)
        sizes.append(team.status().step_threads)
    return sizes


def on_team(sizes: list):
    """trace()'s `each`: appends each step's team (as team_sizes)."""
    return lambda scene: sizes.append(team.status().step_threads)


def team_scene(arch):
    """hanging_chains_over_a_pile on STEADY timings after a step, or None where this
    machine gives it no team of several threads (checked: none, or one)."""
    scene = steady(hanging_chains_over_a_pile(arch))
    scene.step(1 / 60)
    if expected_threads(scene) < 2:
        assert team.threads_for(scene.step_context()) in (0, 1)
        return None
    return scene


def expected_threads(scene: fx.Scene) -> int:
    """The team a large scene gets: the CPU backend's threads if its probe passed (else a
    team of one); none on a GPU backend, whose threads are not all resident at once (a
    barrier could wait forever)."""
    counts = scene.step_context().pool.counts
    timings = scene.step_options.team_timings
    return team.probe_threads(counts, timings) if runtime.on_cpu() else 0


def team_of_every_step(sizes: list, n_steps: int) -> int:
    """The team size all n_steps steps ran on (sizes: each step's team, as team_sizes): one
    size throughout, the CPUs this process may use or one thread (a probe that found the
    barriers slow); no team off a CPU. Read from the steps, not probed again: a probe
    after the steps can meet a busier machine."""
    assert len(sizes) == n_steps
    if not runtime.on_cpu():
        assert not any(sizes)
        return 0
    assert len(set(sizes)) == 1, set(sizes)
    threads = sizes[0]
    assert threads in (1, team.usable_threads())
    return threads


@pytest.mark.parametrize("n_worlds", [1, 2])
def test_a_team_steps_bit_for_bit_like_one_launch_per_stage(arch, n_worlds):
    sizes = []
    scene = steady(hanging_chains_over_a_pile(arch, n_worlds))
    teamed = trace(scene, 40, each=on_team(sizes))
    team_of_every_step(sizes, 40)
    assert scene.n_overflow == 0 and scene.n_colors >= 4  # every colour took its turn
    assert teamed["events"][0][0] > 0  # contacts from the first step on

    sizes.clear()
    per_stage = trace(
        with_options(hanging_chains_over_a_pile(arch, n_worlds), **PER_STAGE),
        40,
        each=on_team(sizes),
    )
    assert not any(sizes)
    assert_same_trace(teamed, per_stage)
    # The chains held (the joints were solved in every colour): no anchor gap past 1 cm.
    anchors = scene.joint_anchors()
    assert np.linalg.norm(anchors[..., 0, :] - anchors[..., 1, :], axis=-1).max() < 0.01


def test_colours_per_launch_change_no_bit(arch):
    """One launch per stage solves StepOptions.colors_per_launch colours a launch (a GPU's
    way): 3 a launch (the last launch's colours past the scene's left empty) steps bit for
    bit like the default 2, as colours run in the same order whatever the launches (the
    launch counter: the same steps of the same scene, only the colour passes differ)."""
    before = launching.launch_count()
    default = trace(with_options(hanging_chains_over_a_pile(arch), **PER_STAGE), 25)
    per_default = launching.launch_count() - before
    before = launching.launch_count()
    three = trace(
        with_options(hanging_chains_over_a_pile(arch), **PER_STAGE, colors_per_launch=3), 25
    )
    assert_same_trace(default, three)
    assert launching.launch_count() - before < per_default  # fewer launches, the same work
    scene = with_options(hanging_chains_over_a_pile(arch), **PER_STAGE)
    with pytest.raises(ValueError, match="colors_per_launch"):
        scene.step_options = {"team": False, "colors_per_launch": 0}
    with pytest.raises(TypeError, match="colors_per_launch"):
        scene.step_options = scene.step_options.replace(colors_per_launch=2.0)
    assert scene.step_options == fx.StepOptions(**PER_STAGE)  # as it was


def with_overflow(scene: fx.Scene) -> fx.Scene:
    """scene plus, far from the rest, more constraints on one body than there are colours:
    MAX_COLORS + 9 boxes resting on a dynamic plank (pairs in the overflow colour) and a
    pinned hub with MAX_COLORS + 9 spokes (joints in it)."""
    n = device.MAX_COLORS + 9
    scene.add_box((100.0, -0.5), (60.0, 1.0), mass=0.0)
    friction = dict(static_friction=0.5, dynamic_friction=0.4)
    scene.add_box((100.0, 0.25), (0.6 * n + 1.0, 0.5), mass=20.0, **friction)
    for i in range(n):
        scene.add_box(
            (100.0 + 0.6 * (i - n / 2), 0.751),
            (0.5, 0.5),
            mass=1.0,
            velocity=(0.3, 0.0),
            **friction,
        )  # sliding: friction in the overflow
    pin = scene.add_box((100.0, 10.0), (0.1, 0.1), mass=0.0)
    hub = scene.add_circle((100.0, 10.0), 0.3, mass=2.0, angular_velocity=3.0)
    scene.add_revolute_joint(pin, hub)
    for angle in np.linspace(0.0, 2.0 * np.pi, n, endpoint=False):
        direction = np.array([np.cos(angle), np.sin(angle)])
        spoke = scene.add_box(
            tuple(direction * 0.8 + (100.0, 10.0)), (0.2, 0.05), angle=angle, mass=0.1
        )
        scene.add_revolute_joint(hub, spoke, anchor=tuple(direction * 0.5))  # hub frame
    return scene


def test_a_team_solves_the_overflow_colour_bit_for_bit_like_its_kernels(arch):
    """The overflow colour (Jacobi pairs, joints in order) inside the team's launch, on a
    scene large enough for a team of several threads: the same results as the overflow's
    own kernels (solver/overflow.py) between one launch per stage."""
    sizes, overflow = [], []

    def each(scene):
        sizes.append(team.status().step_threads)
        overflow.append(scene.n_overflow)

    scene = steady(with_overflow(hanging_chains_over_a_pile(arch)))
    teamed = trace(scene, 30, each=each)
    team_of_every_step(sizes, 30)
    assert min(overflow) >= 20  # 10 pairs on the plank, 10 spokes' joints
    assert min(overflow) > 0 and scene.n_colors == device.MAX_COLORS

    sizes.clear()
    per_stage = trace(
        with_options(with_overflow(hanging_chains_over_a_pile(arch)), **PER_STAGE),
        30,
        each=on_team(sizes),
    )
    assert not any(sizes)
    assert_same_trace(teamed, per_stage)


def test_a_team_of_one_thread_runs_a_serial_scene(arch):
    """Scenes of at most device.TEAM_OF_ONE_SLOTS body slots on a CPU: one launch on one thread,
    with the results of their ~100 serial launches (the small-world machine, stepped as
    large worlds)."""
    sizes = []
    scene = machine_scene(3, arch, step_options={"small_world_path": False})
    assert scene.n_bodies * 3 <= device.TEAM_OF_ONE_SLOTS
    teamed = trace(scene, 100, each=on_team(sizes))
    assert sizes == [1 if runtime.on_cpu() else 0] * 100
    sizes.clear()  # the general path and no team either
    general = trace(machine_scene(3, arch, step_options=GENERAL_PATH), 100, each=on_team(sizes))
    assert_same_trace(teamed, general)
    assert not any(sizes)


def test_a_team_larger_than_the_thread_pool_times_out_instead_of_hanging(arch):
    """One member more than Taichi has threads: the last cannot start until another one's
    task ends, so the others' waits hit their limit: counted, never a hang."""
    scene = hanging_chains_over_a_pile(arch)
    if not runtime.on_cpu():
        assert team.threads_for(scene.step_context()) == 0
        return
    counts = scene.step_context().pool.counts
    threads = team.usable_threads()
    team.clear_barriers(counts)
    assert team.probe_barriers(counts, threads + 1, 2) > 0
    team.clear_barriers(counts)
    if threads > 1:  # a team that fits passes the same barriers
        assert team.probe_barriers(counts, threads, 2) == 0


def test_a_wait_past_its_limit_raises_and_later_steps_launch_per_stage(arch):
    scene = team_scene(arch)
    if scene is None:  # no barrier to wait at
        return
    try:
        # A wait that ran out, as the device counts it (the substeps' launch reads the count).
        scene.step_context().pool.counts.barrier[team.TIMEOUTS] = 1
        with pytest.raises(RuntimeError, match="never reached a barrier"):
            scene.step(1 / 60)
        assert team.status().broken
        assert team.probe_threads(scene.step_context().pool.counts) == 0
        sizes = team_sizes(scene, 1, [])
        assert sizes == [0]
    finally:
        team.reset()  # the team back for the process's later tests


def test_a_busy_machine_stops_using_the_team_and_a_quiet_one_takes_it_back(arch):
    """Probed again every TeamTimings.reprobe_requests calls (one a step): barriers slower
    than max_barrier_s (here made impossible to meet) leave a team of one thread (no
    barrier to wait at, no kernel to compile), and the team comes back once they are
    fast."""
    scene = team_scene(arch)
    if scene is None:
        return
    sizes = []
    compiled = device.compiled_kernel_count()
    # Probed again within 4 steps (every 3), every barrier counting as too slow.
    steady(scene, reprobe_requests=3, max_barrier_s=0.0)
    team_sizes(scene, 4, sizes)
    assert team.status().probed_threads == 1 and sizes[-1] == 1
    assert device.compiled_kernel_count() == compiled
    steady(scene, reprobe_requests=3, max_barrier_s=1.0)
    team_sizes(scene, 4, sizes)
    assert team.status().probed_threads == team.usable_threads()
    assert sizes[-1] == team.usable_threads()


def test_a_probe_that_failed_once_is_tried_again_soon(arch):
    """A moment of other work can fail every try of one barrier probe: the team of one it
    leaves is probed again after TeamTimings.reprobe_failed_requests calls (one a step),
    not reprobe_requests (here never), and the team comes back."""
    scene = team_scene(arch)
    if scene is None:
        return
    sizes = []
    steady(scene, reprobe_requests=1, max_barrier_s=0.0)  # a probe at the next step fails
    team_sizes(scene, 1, sizes)
    assert team.status().probed_threads == 1 and sizes[-1] == 1
    steady(scene, reprobe_failed_requests=5, max_barrier_s=1.0)  # the moment has passed
    team_sizes(scene, 5 + 2, sizes)
    assert team.status().probed_threads == team.usable_threads()
    assert sizes[-1] == team.usable_threads()


def test_steps_slowed_by_other_processes_move_to_a_team_of_one_and_back(arch):
    """The duel (team.DUEL_STEPS): a step's wall time shows what the barrier probe cannot,
    a machine busy with other processes. Here a clock (TeamTimings.clock) stands in for
    the machine: a step on a team of several threads takes 1 s while the machine is busy,
    0.1 s when it is quiet; one on a team of one thread 0.4 s. Two slow steps call a trial
    of the team of one, which wins; the periodic trial of the team wins once the machine is
    quiet; bit for bit the same states all along."""
    scene = hanging_chains_over_a_pile(arch)
    scene.step(1 / 60)
    if expected_threads(scene) < 2:
        assert team.threads_for(scene.step_context()) in (0, 1)
        return
    reference = hanging_chains_over_a_pile(arch)
    reference.step(1 / 60)
    sizes = []
    machine = {"busy": False, "now": 0.0, "calls": 0}

    def clock():
        # Called when a duelling step starts, then when it ends: its duration is charged at
        # its end, on the team that ran it.
        machine["calls"] += 1
        if machine["calls"] % 2 == 0:
            many = team.status().step_threads > 1
            machine["now"] += (1.0 if machine["busy"] else 0.1) if many else 0.4
        return machine["now"]

    # New timings: the duel starts afresh. No periodic trial before the busy steps, then
    # one every 5-6 steps.
    with_options(
        scene, team_timings=team.TeamTimings(clock=clock, duel_steps=100, duel_max_steps=6)
    )
    states = []
    for i in range(26):
        machine["busy"] = 4 <= i < 14
        team_sizes(scene, 1, sizes)
        states.append(scene.get_state().position)
    threads = team.usable_threads()
    assert sizes[:6] == [threads] * 6  # quiet, then the first two busy steps: the team
    assert sizes[6] == 1  # the trial the two slow steps called: a team of one, which wins
    assert sizes[7:9] == [threads] * 2  # its checks: the team, still slow
    assert sizes[9:14].count(threads) <= 1  # busy: a team of one (the team on a trial)
    # Quiet from step 14: a trial of the team wins and two steps of one confirm it.
    assert sizes[21:24] == [threads] * 3 and team.status().many  # the team is back
    assert sizes[21:].count(1) <= 1  # (a team of one on a trial)
    assert team.status().switches >= 2
    reference.step_options = PER_STAGE  # the reference: a launch per stage
    for i in range(26):
        reference.step(1 / 60)
        np.testing.assert_array_equal(reference.get_state().position, states[i])


def test_a_scenes_own_slow_steps_leave_the_team_in_place(arch):
    """Slow steps that are the scene's own work (a fresh colouring, a step that colours
    again: 2-5 times its usual step on the 2-core CPU), not a busy machine, call a trial
    that wins against them; the steps that check it run at the usual speed, so the team
    stays. A clock (TeamTimings.clock) stands in for the machine: a step on the team takes
    0.1 s, 0.5 s in a burst of three costly steps (two that call the trial, one after it),
    on a team of one 0.4 s. With a single check step (the costly one) the duel switched to
    a team of one."""
    scene = hanging_chains_over_a_pile(arch)
    scene.step(1 / 60)
    if expected_threads(scene) < 2:
        return
    sizes = []
    clock_state = {"now": 0.0, "calls": 0, "step": 0}
    costly = {4, 5, 7}  # two slow steps, the trial (6), one more slow step

    def clock():
        clock_state["calls"] += 1
        if clock_state["calls"] % 2 == 0:
            many = team.status().step_threads > 1
            slow = clock_state["step"] in costly
            clock_state["now"] += (0.5 if slow else 0.1) if many else 0.4
            clock_state["step"] += 1
        return clock_state["now"]

    # New timings: the duel starts afresh; no periodic trial in these steps.
    with_options(scene, team_timings=team.TeamTimings(clock=clock, duel_steps=100))
    switches = team.status().switches
    team_sizes(scene, 16, sizes)
    threads = team.usable_threads()
    assert sizes[6] == 1  # the trial the two slow steps called
    assert sizes[:6] + sizes[7:] == [threads] * 15  # and the team all along otherwise
    assert team.status().many and team.status().switches == switches


def first_step_barriers(scene: fx.Scene) -> tuple[int, int]:
    """(barriers its team met at, colours in runs of small colours) of `scene`'s first step,
    on a team of several threads (the test skips where the machine gives none).

    The barriers are benchmarks.launches' count (the team's generation counter); a run is a
    colour followed by another small one (team.small_color: at most SMALL_COLOR_ITEMS_CPU
    constraints), read from the step's colouring."""
    from benchmarks.launches import barrier_generation

    scene = steady(scene, max_barrier_s=1.0)  # a slow probe keeps the team
    expected_threads(scene)  # (a probe clears the counter: before it is read)
    before = barrier_generation(scene)
    scene.step(1 / 60)
    if team.status().step_threads < 2:
        pytest.skip("this machine gave the scene no team of several threads")
    met = barrier_generation(scene) - before
    start = scene.step_context().pool.coloring.color_start.to_numpy()
    return met, colours_in_small_runs(np.diff(start[: scene.n_colors + 1]))


def test_a_teams_barriers_a_step_grow_by_its_colour_passes_each_substep(arch):
    """benchmarks.launches' barriers_per_step (what a grid team's step costs on a GPU, where
    each barrier is a round trip through the L2 cache) reads the team's generation counter:
    a barrier the members meet at is one step of it. The same first step of one scene with
    2, 3 and 4 substeps (the same colouring: it is made before the substeps) meets at
    a + b * substeps barriers: b the same between 2 and 3 as between 3 and 4, and at least
    two a colour (XPBD solves positions colour by colour, then velocities) but for a colour
    in a run of small ones (first_step_barriers), which the team's first member solves
    alone, one after the other."""
    team.reset()  # probed afresh: a team of several threads wherever there are two CPUs
    met = []
    for substeps in (2, 3, 4):
        scene = hanging_chains_over_a_pile(arch)
        scene.substeps = substeps
        barriers, in_runs = first_step_barriers(scene)
        met.append(barriers)
    per_substep = met[1] - met[0]
    assert met[2] - met[1] == per_substep, met
    assert per_substep >= 2 * (scene.n_colors - in_runs), (met, scene.n_colors, in_runs)


def bodies_apart(arch: str, substeps: int = 11) -> fx.Scene:
    """600 circles 2 m apart (more than device.TEAM_OF_ONE_SLOTS: a team's scene), thrown at up
    to 0.4 m/s and spinning: they fall together and never pair, and nothing joins them, so
    each step is idle (stages.Substep.idle)."""
    rng = np.random.default_rng(11)
    scene = fx.Scene(arch=arch, substeps=substeps)
    index = np.arange(600)
    scene.add_circles(np.stack([index % 30 * 2.0, index // 30 * 2.0], axis=1), np.full(600, 0.3))
    state = scene.get_state()
    state.velocity[:] = rng.uniform(-0.4, 0.4, state.velocity.shape)
    state.angular_velocity[:] = rng.uniform(-2.0, 2.0, state.angular_velocity.shape)
    scene.set_state(state)
    return scene


def test_an_idle_steps_team_meets_in_its_last_substep_alone(arch):
    """A step with no pair and no joint slot (fused._meets_after, Substep.idle): each item
    stage touches the member's own body slots, so the team meets after them in the last
    substep alone, and its barriers a step do not grow with the substeps (they grew by the
    item stages' meetings each substep before); the bodies move as launching a stage at a
    time moves them, bit for bit."""
    team.reset()
    met = []
    for substeps in (2, 3, 4):
        scene = bodies_apart(arch, substeps)
        met.append(first_step_barriers(scene)[0])
        assert len(scene.candidate_pairs()) == 0
    assert met[0] == met[1] == met[2], met
    steps = 30
    on_team = trace(steady(bodies_apart(arch), max_barrier_s=1.0), steps)
    if team.status().step_threads < 2:
        pytest.skip("this machine gave the scene no team of several threads")
    assert_same_trace(on_team, trace(with_options(bodies_apart(arch), **PER_STAGE), steps))


def uneven_stacks(arch: str, solver: str, substeps: int) -> fx.Scene:
    """stacks_of_two's 260 stacks, each a box of 12 kg with one of 1 kg on it: a world of
    uneven masses (world_params.IMMOVABLE_SWEEP_RATIO, 10), whose contacts read each
    body's support count of the step before (contacts.prepare_pair holds the lower box for
    the lighter upper one)."""
    return scenes.build_scene(stacks_of_two(12.0, 1.0), arch=arch, solver=solver, substeps=substeps)


#: The last stack's top box in uneven_stacks' scene (bodies 0-520: the ground, then each
#: stack's lower and upper box).
TOP_BOX = 520


def with_a_far_mover(scene: fx.Scene) -> fx.Scene:
    """`scene` with a kinematic box 500 m from everything else sliding at 1 m/s: it never
    sleeps and meets no body, so none of the scene's steps is still (stages.STILL: every
    substep runs), and the other bodies step as they would without it (a body that moves
    in a world with sleepers has the pairs found every step, which are the pairs kept:
    tests/test_pair_reuse.py)."""
    scene.add_box(
        (-500.0, 50.0), (1.0, 1.0), mass=1.0, external_forces_enabled=False, velocity=(1.0, 0.0)
    )
    return scene


def asleep_then_pushed(scene: fx.Scene) -> dict:
    """`scene` (uneven_stacks, perhaps with_a_far_mover) stepped until its stacks are asleep
    whole, then 20 steps more (still where nothing else moves), a force on TOP_BOX for a
    step, and 60 steps: the trace of the last 81 steps and every stack box's support count
    (device field bodies.support) after each of the still steps and the step after the
    force, as the next step reads it; the stacks' bodies alone (TOP_BOX and below)."""
    n = TOP_BOX + 1
    step_until_asleep(scene, end=n)
    supports = []

    def note_support(scene):
        if len(supports) < 21:
            supports.append(scene.step_context().pool.bodies.support.to_numpy()[:n])

    still = trace(scene, 20, each=note_support)
    scene.apply_force(TOP_BOX, (0.0, 3000.0))
    pushed = trace(scene, 61, each=note_support)
    for part in (still, pushed):
        part["state"] = {name: value[:, :n] for name, value in part["state"].items()}
    return {"still": still, "pushed": pushed, "supports": supports}


def assert_same_stacks(got: dict, want: dict):
    """Two asleep_then_pushed runs equal bit for bit: states, contacts, events, supports."""
    for part in ("still", "pushed"):
        assert_same_trace(got[part], want[part])
    for got_support, want_support in zip(got["supports"], want["supports"], strict=True):
        np.testing.assert_array_equal(got_support, want_support)


@pytest.mark.parametrize("folded", [False, pytest.param(True, marks=FOLDED_TEAM)])
@pytest.mark.parametrize("solver", ["xpbd", "soft_step"])
def test_a_still_step_runs_one_substep_and_meets_at_no_stage(arch, solver, folded):
    """A step with nothing to pair or join in which nothing awake moves (a world asleep
    whole: stages.STILL) runs its first substep alone, the team meeting after none of its
    stages: its barriers do not depend on the substeps, and are fewer than an idle step's
    with one body moving (a box thrown far from the stacks), which meets after the item
    stages of its last substep. Stacks of uneven masses asleep, still for 20 steps, then
    one pushed awake by a force on its top box, step bit for bit as the same stacks
    launching a stage at a time beside a body that keeps moving far away (no step still:
    every substep runs): the same states, contacts and support counts (which a still
    step's one substep resets, and the step after it reads). On a CPU's
    path the launch counts what moves; on a GPU's (`folded`, StepOptions.fold_on_cpu), the
    kept step's launch takes it from its refit's tally."""
    team.reset()  # probed afresh: a team of several threads wherever there are two CPUs
    from benchmarks.launches import barrier_generation

    met = {}
    for substeps in (2, 3):
        for thrown in (False, True):
            scene = steady(uneven_stacks(arch, solver, substeps), max_barrier_s=1.0)
            with_options(scene, fold_on_cpu=folded)
            expected_threads(scene)  # (a probe clears the counter: before it is read)
            still_or_thrown(scene, thrown, each=expected_threads)
            before = barrier_generation(scene)
            scene.step(1 / 60)
            if team.status().step_threads < 2:
                pytest.skip("this machine gave the scene no team of several threads")
            met[substeps, thrown] = barrier_generation(scene) - before
            assert len(scene.candidate_pairs()) == 0
    assert met[2, False] == met[3, False] < met[2, True] == met[3, True], met
    on_team = with_options(
        steady(uneven_stacks(arch, solver, 4), max_barrier_s=1.0), fold_on_cpu=folded
    )
    expected_threads(on_team)
    on_team = asleep_then_pushed(on_team)
    every = with_a_far_mover(with_options(uneven_stacks(arch, solver, 4), **PER_STAGE))
    assert_same_stacks(on_team, asleep_then_pushed(every))
    # Pushed awake: the force lifted the last stack's top box, and the supports of the
    # step after it are counted from its contacts (not all UNSUPPORTED, as after a still
    # step).
    assert not on_team["pushed"]["state"]["sleeping"][0, TOP_BOX]
    assert (on_team["supports"][-1] != on_team["supports"][0]).any()


@pytest.mark.parametrize("solver", ["xpbd", "soft_step"])
def test_a_still_step_launching_a_stage_at_a_time_runs_one_substep(arch, solver):
    """Launching a stage at a time (a GPU's path without a team: Vulkan, Metal), a still
    step runs its first substep alone, as the host's refit of the fat boxes found bodies
    asleep and none moving (step.substeps_to_run): its launches do not grow with the
    substeps, where an idle step's with a box thrown far away do, and are fewer. The
    stacks of uneven masses asleep, still, then pushed, step bit for bit as beside a body
    that keeps moving far away (no step still: every substep runs): the same states,
    contacts and support counts."""
    from fx2d_gpu.device import launching

    def step_launches(substeps: int, thrown: bool) -> int:
        scene = with_options(uneven_stacks(arch, solver, substeps), **PER_STAGE)
        still_or_thrown(scene, thrown)
        before = launching.launch_count()
        scene.step(1 / 60)
        return launching.launch_count() - before

    still = [step_launches(n, False) for n in (2, 3)]
    idle = [step_launches(n, True) for n in (2, 3)]
    assert still[0] == still[1] < idle[0] < idle[1], (still, idle)
    skipped = asleep_then_pushed(with_options(uneven_stacks(arch, solver, 4), **PER_STAGE))
    every = with_a_far_mover(with_options(uneven_stacks(arch, solver, 4), **PER_STAGE))
    assert_same_stacks(skipped, asleep_then_pushed(every))


def hub_of_balls(spokes: int) -> list[scenes.BodySpec]:
    """A ball of radius 1 m high in the air (x 60 m, y 20 m) touched by `spokes` balls of
    radius 0.3 m around it (1 cm into it) that touch nothing else: its pairs share the hub,
    so they take a colour each."""
    spokes_at = np.linspace(0.0, 2.0 * np.pi, spokes, endpoint=False)
    return [scenes.BodySpec("circle", (60.0, 20.0), (1.0, 1.0))] + [
        scenes.BodySpec("circle", (60.0 + 1.29 * np.cos(t), 20.0 + 1.29 * np.sin(t)), (0.3, 0.3))
        for t in spokes_at
    ]


def step_barriers(specs: list[scenes.BodySpec], arch: str, **options) -> tuple[int, ...]:
    """(outside, per substep, colours, colours in runs) of the first step of `specs`'
    scene (its StepOptions changed by `options`), which meets at outside + per substep *
    substeps barriers: counted with 2 and 3 substeps (first_step_barriers)."""
    met = []
    for substeps in (2, 3):
        scene = scenes.build_scene(specs, arch=arch, substeps=substeps)
        scene.step_options = scene.step_options.replace(**options)
        barriers, in_runs = first_step_barriers(scene)
        met.append(barriers)
    per_substep = met[1] - met[0]
    return met[0] - 2 * per_substep, per_substep, scene.n_colors, in_runs


def test_a_run_of_small_colours_meets_the_team_once(arch):
    """A run of small colours (team.small_color: a colour and the next both of at most
    SMALL_COLOR_ITEMS_CPU constraints) is solved by the team's first member alone, the team
    meeting once after it. Two scenes without joints, coloured in their first step: a
    pyramid of 34 boxes a side beside a hub of 10 balls (the hub's pairs, ranked first, take
    colours 0 to 9, the pyramid's 8 colours, whose last holds 17: colours 7, 8 and 9 are a
    run of three), and a pyramid of 40 alone (8 colours, the last two of 249 and 45: no
    run). A substep meets at two barriers a colour pass (XPBD: positions, then velocities)
    and the same other stages in both: so the barriers a substep less two per colour
    outside runs are the same for both, which they would not be if the run met at a
    barrier after each colour. The colourings are read, not assumed. Those other stages:
    each item stage meets once after it (the XPBD substep's declared stages,
    stages.SUBSTEP_STAGES), but for one over joint slots (the motors) in a scene without
    joints, and those that touch only their own bodies where no pair is fast
    (Stage.own_bodies_after_first), whose barriers a substep after the first skips
    (fused._meets_after)."""
    team.reset()  # probed afresh: a team of several threads wherever there are two CPUs
    others, runs = [], []
    for specs in (scenes.pyramid_layout(34)[0] + hub_of_balls(10), scenes.pyramid_layout(40)[0]):
        _, per_substep, colors, in_runs = step_barriers(specs, arch)
        runs.append(in_runs)
        others.append(per_substep - 2 * (colors - in_runs))
    assert runs == [2, 0], "the scenes' colourings changed: choose sides with and without a run"
    item_stages = [
        stage
        for stage in stages.SUBSTEP_STAGES
        if not stage.is_pass
        and stage.domain != stages.JOINT_SLOTS
        and stage.when != stages.JOINTED
        and not stage.own_bodies_after_first  # (a pyramid's first step has no fast pair)
    ]
    assert others[0] == others[1] == len(item_stages), (others, [s.name for s in item_stages])


def test_a_colouring_round_meets_the_team_twice_a_sub_round_and_few_constraints_never(arch):
    """A colouring from scratch (a first step) gives a colour a round; each of its
    SUB_ROUNDS sub-rounds meets the team after the bids and after the takes, which clear
    the next sub-round's claims and mark their winners themselves (no third pass). A hub of
    12 balls takes 2 colours more than one of 10 (a colour a pair: they share the hub), so
    beside a pyramid of 34 boxes a side (its 8 colours: 2,000 constraints to colour) its
    first step meets at 2 * 2 * SUB_ROUNDS more barriers outside the substeps (its
    substeps' more are left out: see step_barriers). Beside 600 balls apart instead,
    its 10 or 12 constraints are few (team.small_rounds): the team's first member colours
    them alone and the team meets at no barrier for them, as many either way."""
    team.reset()  # probed afresh: a team of several threads wherever there are two CPUs
    pyramid = scenes.pyramid_layout(34)[0]
    apart = [
        scenes.BodySpec("circle", (3.0 * (i % 40), 40.0 + 3.0 * (i // 40)), (0.5, 0.5))
        for i in range(600)
    ]
    more = [
        step_barriers(bodies + hub_of_balls(12), arch)[0]
        - step_barriers(bodies + hub_of_balls(10), arch)[0]
        for bodies in (pyramid, apart)
    ]
    assert more == [2 * 2 * SUB_ROUNDS, 0], more


def test_colours_by_turns_step_bit_for_bit_and_meet_the_team_once_a_pass(arch):
    """StepOptions.colors_by_turns: a pass's colours run without the team's barriers
    between them, each constraint waiting for its bodies' constraints of lower colours
    (coloring.take_turns). Every body then sees its constraints in colour order, as with a
    barrier after each colour: the chains over a pile with an overflow colour (pairs
    solved Jacobi, joints in order, after the colours; the chains' joints swept again
    after the first sweep, at barriers) step bit for bit as without, on the same team;
    and with the soft step (its solve, relax and restitution passes) the chains over the
    pile alone (its soft joints tear at the overflow's hub of spokes, with turns or without).
    And a pyramid of 40 boxes a side (8 colours, none small), its body stages meeting
    the team (stages_by_turns off), meets at 2 * (8 - 1) barriers fewer a substep (XPBD:
    a position and a velocity pass, each meeting once instead of once a colour), counted
    from its first step with 2 and 3 substeps."""
    for solver in ("xpbd", "soft_step"):
        sizes = []
        traces = []
        for options in ({}, {"colors_by_turns": True}):
            scene = hanging_chains_over_a_pile(arch, solver=solver)
            if solver == "xpbd":
                scene = with_overflow(scene)
            traces.append(trace(with_options(steady(scene), **options), 30, each=on_team(sizes)))
        if team_of_every_step(sizes, 60) < 2:
            pytest.skip("this machine gave the scene no team of several threads")
        assert_same_trace(*traces)
    specs = scenes.pyramid_layout(40)[0]
    counted = [
        step_barriers(specs, arch, colors_by_turns=turns, stages_by_turns=False)
        for turns in (False, True)
    ]
    assert [colors for _, _, colors, _ in counted] == [8, 8]
    assert counted[0][1] - counted[1][1] == 2 * (8 - 1), counted


def test_stages_by_turns_step_bit_for_bit_and_meet_the_team_only_where_a_stage_must(arch):
    """StepOptions.stages_by_turns (with colors_by_turns, the default then): a substep's
    body stages take turns at each body too (coloring.take_turns' chain), so the team
    meets at no barrier from substep 0's narrow phase to the last pass. A pyramid of 40
    boxes a side (820 boxes, no joints), XPBD and the soft step: 20 steps bit for bit as
    without turns, and its first step meets at no barrier a substep (as many with 2 and 3
    substeps: step_barriers) where colours by turns alone meet at several (its passes, its
    stages over body slots). Where a stage in the chain would read another body that
    moves, the team meets as with colours by turns alone, bit for bit as without turns:
    a kinematic box pushing into the pyramid's foot at 1 m/s (fused._chains, on the host) and the
    soft step's ball beside the pyramid coming down fast, whose pair with the ground is
    fast (its narrow phase reads both bodies every substep: fused._chain_starts, on the
    device), where the same ball coming down slowly chains."""
    team.reset()  # probed afresh: a team of several threads wherever there are two CPUs
    specs = scenes.pyramid_layout(40)[0]
    for solver in ("xpbd", "soft_step"):
        sizes = []
        traces = []
        for options in ({}, {"colors_by_turns": True}):
            scene = steady(scenes.build_scene(specs, arch=arch, solver=solver))
            traces.append(trace(with_options(scene, **options), 20, each=on_team(sizes)))
        if team_of_every_step(sizes, 40) < 2:
            pytest.skip("this machine gave the scene no team of several threads")
        assert_same_trace(*traces)
    turns = dict(colors_by_turns=True)
    alone = dict(turns, stages_by_turns=False)
    per_substep = [step_barriers(specs, arch, **options)[1] for options in (turns, alone)]
    assert per_substep[0] == 0 and per_substep[1] >= 4, per_substep

    def pushed(substeps: int = 11) -> fx.Scene:
        scene = scenes.build_scene(specs, arch=arch, substeps=substeps)
        scene.add_box(
            (-20.55, 0.5), (1.0, 1.0), mass=1.0, external_forces_enabled=False, velocity=(1.0, 0.0)
        )
        return scene

    pushed_per_substep = []
    for options in (turns, alone):
        met = [first_step_barriers(with_options(pushed(n), **options))[0] for n in (2, 3)]
        pushed_per_substep.append(met[1] - met[0])
    assert pushed_per_substep[0] == pushed_per_substep[1] >= 4, pushed_per_substep
    assert_same_trace(*(trace(steady(with_options(pushed(), **o)), 20) for o in ({}, turns)))
    for speed, chains in ((SLOW, True), (FAST, False)):
        met = [
            first_step_barriers(with_options(pyramid_beside_a_ball(arch, speed, n), **turns))[0]
            for n in (2, 3)
        ]
        assert (met[1] == met[0]) == chains, (speed, met)
        balls = (steady(with_options(pyramid_beside_a_ball(arch, speed), **o)) for o in ({}, turns))
        assert_same_trace(*(trace(scene, 12) for scene in balls))


def pyramid_beside_a_ball(arch: str, speed: float, substeps: int = 4) -> fx.Scene:
    """A soft-step pyramid of 34 boxes a side (595 boxes: a team's scene) and, 30 m to its
    side, a ball of radius 0.5 m and elasticity 0.9 (pairs take the larger of their
    bodies') a centimetre above the ground coming down at `speed` (m/s). Past the soft
    step's restitution threshold (soft_contacts.RESTITUTION_THRESHOLD, 1 m/s) it bounces;
    past 1.5 m/s its pair with the ground is fast (it may move more than
    contacts.FAST_MOTION_FRACTION, 0.05, of its 0.5 m radius in a step: its narrow phase
    runs every substep). The boxes settle onto each other at a few cm/s: neither."""
    specs, _ = scenes.pyramid_layout(34)
    scene = scenes.build_scene(
        specs, arch=arch, solver="soft_step", restitution_mixing="max", substeps=substeps
    )
    scene.add_circle((30.0, 0.51), 0.5, elasticity=0.9, velocity=(0.0, -speed))
    return scene


#: pyramid_beside_a_ball's speeds: nothing may bounce and no pair is fast; the ball
#: bounces; it bounces and its pair is fast.
SLOW, BOUNCING, FAST = 0.2, 1.2, 5.0


def test_a_soft_steps_team_meets_for_bounces_and_fast_pairs_only_where_the_step_has_them(arch):
    """The team skips what a step without them does not need, the same results bit for
    bit: the soft step's restitution pass (its last substep's colour pass) where no point
    prepared in the step approached faster than the threshold on a pair with restitution
    (stages.bounce_possible: its pairs would write back what they read), and in a substep
    after the first, where no pair is fast, the barriers after integrate velocities and
    after the narrow phase, which then has nothing to do (Stage.own_bodies_after_first).
    The same pyramid and ball, slow, bouncing or fast, with 2 and 3 substeps: the same
    colouring; the bouncing ball's first step meets at a barrier more a colour of the
    restitution pass than the slow one's (but for colours in a run of small ones, met
    once: first_step_barriers), the fast one's at 2 more a substep after the first than
    the bouncing one's. All step bit for bit like the per-stage executor, which runs every
    pass and stage, and the fast ball leaves the ground going up."""
    team.reset()  # probed afresh: a team of several threads wherever there are two CPUs
    met, runs, colors = {}, set(), set()
    for speed in (SLOW, BOUNCING, FAST):
        for substeps in (2, 3):
            scene = pyramid_beside_a_ball(arch, speed, substeps)
            met[speed, substeps], in_runs = first_step_barriers(scene)
            runs.add(in_runs)
            colors.add(scene.n_colors)
            assert scene.n_overflow == 0
    assert len(colors) == 1 and len(runs) == 1, (colors, runs)
    restitution_barriers = colors.pop() - runs.pop()
    assert restitution_barriers >= 1
    for substeps in (2, 3):
        assert met[BOUNCING, substeps] - met[SLOW, substeps] == restitution_barriers, met
        assert met[FAST, substeps] - met[BOUNCING, substeps] == 2 * (substeps - 1), met
    for speed in (SLOW, BOUNCING, FAST):
        teamed = trace(steady(pyramid_beside_a_ball(arch, speed), max_barrier_s=1.0), 12)
        per_stage = trace(with_options(pyramid_beside_a_ball(arch, speed), **PER_STAGE), 12)
        assert_same_trace(teamed, per_stage)
    # The fast ball bounced in its first step: 0.9 of 5 m/s up, less 12 steps of gravity.
    assert teamed["state"]["velocity"][0, -1, 1] > 2.0, teamed["state"]["velocity"][0, -1]
