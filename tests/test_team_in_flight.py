"""Steps in flight of large worlds (solver/in_flight.py's team steps,
fused.kept_step_in_flight): a team's kept step launched without the host waiting for its
answer, taking what the host would tell it from the StepCache the step before it left on the
device, and leaving its own there; the host notes the last one when the caller reads or
edits the scene. Compiled on GPU backends (the GPU team); here on the CPU team with
fold_on_cpu and steps_in_flight=True. Every run must give bit for bit what steps taken one
by one give (the option off): the state, contacts, events, pairs, diagnostics and the whole
StepCache, where every step goes all the way (pairs kept, found and coloured in the launch,
a colouring from scratch falling due, a scene asleep) and where steps stop short in flight (a
scene falling asleep, sleepers beside a body that moves, a pile poured) and are finished and
taken again."""

import dataclasses

import pytest

import fx2d_gpu as fx
from fx2d_gpu import scenes
from fx2d_gpu.device import launching
from fx2d_gpu.physics.solver import in_flight
from fx2d_gpu.physics.solver.team import TeamTimings

from .helpers import DT, FOLDED_TEAM
from .test_in_flight import _assert_same, _seen

#: No reprobe of the CPU team's barriers mid-run (a GPU's team is never probed): each step
#: takes the team's kept launch, as a GPU's does.
STEADY = TeamTimings(reprobe_requests=10**9, reprobe_failed_requests=10**9)
FLYING = {"fold_on_cpu": True, "steps_in_flight": True, "team_timings": STEADY}
ONE_BY_ONE = {**FLYING, "steps_in_flight": False}
IN_FLIGHT = "fx2d_gpu.physics.solver.fused._team_in_flight"

pytestmark = FOLDED_TEAM


@pytest.fixture(autouse=True)
def _cpu_only(arch):
    if arch != "cpu":
        pytest.skip("the GPU path is counted on the CPU (fold_on_cpu); the GPU team's on CUDA")


def _pyramid(options: dict, base: int = 10, sleep: bool = False, arch: str = "cpu"):
    """Box2D's pyramid of `base` boxes a side (55 boxes for 10: large worlds, whose colouring
    is checked on the device), soft step."""
    specs, _ = scenes.pyramid_layout(base)
    return scenes.build_scene(
        specs, enable_sleep=sleep, arch=arch, solver="soft_step", step_options=options
    )


def _run(scene, steps: int, read_every: int = 0) -> dict:
    """`steps` steps, what the caller sees read every `read_every` steps (0: only at the end),
    and the launches: of the flight's kernel, of any kernel, of those that return a value
    (each a wait for the device)."""
    before = {
        "flown": launching.kernel_launches().get(IN_FLIGHT, 0),
        "launches": launching.launch_count(),
        "waits": launching.returning_count(),
    }
    for step in range(steps):
        scene.step(DT)
        if read_every and step % read_every == read_every - 1:
            _seen(scene)
    # The steps' launches: the reads below launch the kernels that copy fields to the host.
    launches = launching.launch_count() - before["launches"]
    seen = _seen(scene)
    return {
        "seen": seen,
        "cache": dataclasses.asdict(scene.step_context().cache),
        "flown": launching.kernel_launches().get(IN_FLIGHT, 0) - before["flown"],
        "launches": launches,
        "waits": launching.returning_count() - before["waits"],
    }


def _hop(scene):
    """The pyramid's top box tossed up at 0.4 m/s: it leaves its contacts and lands ~5 steps
    later, within its fat box (broad_phase.FAT_FRACTION of its bounding radius: 7 cm), so
    the pairs are kept while touching ends and begins again: the reported list's refresh
    fails and backs off (reporting.refreshed)."""
    state = scene.get_state()
    state.velocity[0, -1] = (0.0, 0.4)
    scene.set_state(state)


def _assert_same_runs(a: dict, b: dict):
    _assert_same(a["seen"], b["seen"])
    assert a["cache"] == b["cache"]


def test_a_hop_on_a_pyramid_flies_through_the_report_s_backoff_bitwise_as_one_by_one():
    """The top box hops on a pyramid whose pairs are kept: in flight, its contacts end and
    begin again, the reported list's refresh fails and the next ones back off, each step's
    launch told as the host would tell it (fused._flight_launch), bitwise one by one."""
    runs = []
    for options in (ONE_BY_ONE, FLYING):
        scene = _pyramid(options)
        _run(scene, 30)
        _hop(scene)
        runs.append(_run(scene, 40))
    _assert_same_runs(*runs)
    assert runs[1]["flown"] == 39 and runs[1]["cache"]["pair_reuses"] == 69, runs[1]["cache"]
    # At least two refreshes failed (its contacts ended, then began again).
    assert runs[1]["cache"]["report_refreshes"] <= 69 - 2, runs[1]["cache"]


def test_a_settling_pyramid_flies_bitwise_as_one_by_one():
    """100 steps of a settling pyramid read only at the end: every step after the first
    (it builds the scene) flies, keeping its pairs and its colouring, through colourings
    from scratch falling due (every 32 steps) and the reported list's refreshes, with no
    launch that returns a value; then everything the caller reads, and the StepCache, is
    what steps taken one by one give. Read every 9th step, the same again."""
    one_by_one = _run(_pyramid(ONE_BY_ONE), 100)
    flying = _run(_pyramid(FLYING), 100)
    assert flying["flown"] == 99, flying["flown"]
    assert flying["waits"] == one_by_one["waits"] - 99, (flying["waits"], one_by_one["waits"])
    assert flying["launches"] == one_by_one["launches"], (flying, one_by_one)
    assert flying["cache"]["pair_reuses"] == 99  # (a pile's pairs are found: the next test)
    _assert_same_runs(flying, one_by_one)
    _assert_same_runs(_run(_pyramid(FLYING), 100, read_every=9), one_by_one)


def test_a_pyramid_falling_asleep_flies_bitwise_as_one_by_one_one_launch_a_step_asleep():
    """A pyramid with sleep on: while it falls asleep, some steps stop short in flight (bodies
    asleep beside awake ones that move: the host pairs them), are finished and taken again,
    bitwise one by one. Asleep, each step's launch wakes nothing in its own wake pass
    (StepOptions.wake_in_launch) and goes on: every step after a read flies, one launch
    each, none waited for."""
    one_by_one = _run(_pyramid(ONE_BY_ONE, base=9, sleep=True), 300)
    scene = _pyramid(FLYING, base=9, sleep=True)
    flying = _run(scene, 300)
    _assert_same_runs(flying, one_by_one)
    assert flying["seen"][4][0, 1:].all()  # every box asleep (body 0: the ground)
    # Launches that ran nothing: those after a stop in a flight (each taken again).
    wasted = flying["launches"] - one_by_one["launches"]
    assert 0 <= wasted <= 0.25 * one_by_one["launches"], (wasted, one_by_one["launches"])
    asleep = _run(scene, in_flight.STEPS_IN_FLIGHT)
    assert asleep["flown"] == in_flight.STEPS_IN_FLIGHT - 1, asleep
    assert asleep["launches"] == in_flight.STEPS_IN_FLIGHT, asleep
    assert asleep["waits"] == 1, asleep  # the step after the read, not in flight


def test_a_pyramid_asleep_beside_a_drifting_ball_stops_its_flights_which_wait_then_probe():
    """A pyramid asleep and, in its world, a ball drifting up (no gravity, 0.2 m/s: it never
    sleeps): an awake body that moves beside sleepers, so with StepOptions.wake_in_launch
    off each step's launch stops after its refit (the host pairs the world and wakes what a
    new pair pushes) and a step in flight stops short at once. The read finishes it and
    takes the steps after it again, bitwise one by one; the flights that follow hold fewer
    steps and wait longer between them (Flight.budget, resume_at), so that the launches
    that ran nothing stay few."""

    def pyramid(options):
        # (The wake pass in the launch, on, would let the steps go on: they wake nothing.)
        scene = _pyramid({**options, "wake_in_launch": False}, base=9, sleep=True)
        scene.add_circle((-15.0, 1.0), 0.4, gravity_scale=0.0, velocity=(0.0, 0.2))
        return scene

    one_by_one = _run(pyramid(ONE_BY_ONE), 300)
    scene = pyramid(FLYING)
    flying = _run(scene, 300)
    _assert_same_runs(flying, one_by_one)
    assert flying["seen"][4][0, 1:-1].all() and not flying["seen"][4][0, -1]
    wasted = flying["launches"] - one_by_one["launches"]
    assert 0 < wasted <= 0.25 * one_by_one["launches"], (wasted, one_by_one["launches"])
    # A probe of Flight.budget (2) steps each hold_span (up to STEPS_IN_FLIGHT) steps.
    assert _run(scene, in_flight.STEPS_IN_FLIGHT)["flown"] <= 2


def test_a_poured_pile_flies_and_stops_bitwise_as_one_by_one():
    """A pile poured onto the floor: its pairs change every step (found and coloured in the
    launch), its first steps stop short (the broad phase finds more pairs than last step's
    colouring coloured, the colour lists overflow...), then flights grow, and it falls
    asleep: bitwise one by one throughout."""
    layout = scenes.pile_layout(150)

    def pile(options):
        return scenes.build_scene(layout, arch="cpu", solver="soft_step", step_options=options)

    one_by_one = _run(pile(ONE_BY_ONE), 200)
    flying = _run(pile(FLYING), 200, read_every=50)
    _assert_same_runs(flying, one_by_one)
    assert flying["flown"] > 100, flying["flown"]


def test_a_step_that_takes_no_kept_launch_runs_nothing_in_flight_and_is_taken_on_read():
    """Balls at rest apart, nothing to colour: where a colouring from scratch falls due (each
    32nd step) and last step's may not be kept instead (keep_fresh_coloring off), the host
    takes no kept launch (step._kept_launch_team), so that step's launch in flight runs
    nothing (fused.NOT_RUN); the read takes it as step() does, then the steps after it:
    bitwise one by one, StepCache too."""

    def balls(options):
        scene = fx.Scene(
            gravity=(0.0, 0.0),
            arch="cpu",
            solver="soft_step",
            enable_sleep=False,
            step_options={**options, "keep_fresh_coloring": False},
        )
        scene.add_circles([(float(i), 0.0) for i in range(48)], 0.2)
        return scene

    flying, one_by_one = _run(balls(FLYING), 100), _run(balls(ONE_BY_ONE), 100)
    _assert_same_runs(flying, one_by_one)
    assert flying["cache"]["scratch_colorings"] == 4  # steps 0, 32, 64, 96
    # Those steps, and the ones after them in their flights, were taken again, waiting.
    assert 1 < flying["waits"] < one_by_one["waits"] / 2, (flying["waits"], one_by_one["waits"])
