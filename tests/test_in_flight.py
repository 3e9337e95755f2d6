"""Steps in flight (StepOptions.steps_in_flight, solver/in_flight.py): small worlds' steps
launched without the host waiting for their answers, which wait on the device until the
caller reads or edits the scene. Compiled on GPU backends; here on the CPU with
fold_on_cpu and steps_in_flight=True. Every run must give bit for bit what steps taken one
by one give (the option off): the state, contacts, events and the step cache, where every
step goes all the way and where one stops short in flight (an overflowing colour, a fault,
a pool too small: tests/test_small_worlds_one_launch.py's child) and the steps after it are
taken again."""

import gc

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.device import STEPS_IN_FLIGHT, launching
from fx2d_gpu.physics.solver import in_flight

from .helpers import COLORED_LIKE_GENERAL, DT, TRACE_FIELDS, launches_of
from .test_faults import pendulums
from .test_small_worlds_one_launch import PUSH, _piles

FLYING = {"fold_on_cpu": True, "steps_in_flight": True}
ONE_BY_ONE = {"fold_on_cpu": True, "steps_in_flight": False}
IN_FLIGHT = "fused._worlds_in_flight"


@pytest.fixture(autouse=True)
def _cpu_only(arch):
    if arch != "cpu":
        pytest.skip("the GPU path is counted on the CPU (fold_on_cpu); test_vulkan runs it")


#: The step's diagnostics (the StepCache's counts behind them: a step in flight notes them
#: when its answer is read).
DIAGNOSTICS = ("n_colors", "n_overflow", "colorings", "scratch_colorings", "lost_bodies")


def _seen(scene) -> list[np.ndarray]:
    """Everything a caller can read of the scene after its steps: the state, the contacts,
    the events, the candidate pairs, the diagnostics and the clock."""
    state = scene.get_state()
    contacts, events = scene.contacts(world=None), scene.contact_events()
    diagnostics = [getattr(scene, name) for name in DIAGNOSTICS]
    return [
        *(getattr(state, name) for name in TRACE_FIELDS),
        contacts.world,
        contacts.body_a,
        contacts.normal_impulse,
        contacts.tangent_impulse,
        events.begin.body_a,
        events.end.body_b,
        scene.candidate_pairs(),
        np.array(diagnostics, dtype=np.int64),
        np.array([scene.step_count, scene.time]),
    ]


def _assert_same(a, b):
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        np.testing.assert_array_equal(x, y, err_msg=f"entry {k}")


def _steps(scene, steps: int, read_every: int = 0, waits=None) -> list[list[np.ndarray]]:
    """`steps` steps of the piles (every third world's stack pushed before step PUSH: a
    force, which the steps in flight before it wait for), what the caller sees read every
    `read_every` steps (0: only at the end); `waits`: a list to append each step's launches
    of kernels that return a value to (each a wait for the device)."""
    seen, pushed = [], np.zeros((scene.n_worlds, 2), np.float32)
    pushed[::3] = (0.0, 40.0)
    for step in range(steps):
        if step == PUSH:
            scene.apply_force(2, pushed)
        returning = launching.returning_count()
        scene.step(DT)
        if waits is not None:
            waits.append(launching.returning_count() - returning)
        if read_every and step % read_every == 0:
            seen.append(_seen(scene))
    return [*seen, _seen(scene)]


def test_small_worlds_steps_in_flight_bitwise_as_one_by_one(solver):
    """100 steps of 64 piling, sleeping and woken worlds read only at the end: every step
    but the first (after set_state: edited) and the push's (a force) is launched in flight,
    with no launch that returns a value; then everything the caller reads is what steps
    taken one by one give. Read every 7th step, the same again."""
    scene = _piles("cpu", solver, **FLYING)
    flown, waits = launches_of(IN_FLIGHT), []
    flying = _steps(scene, 100, waits=waits)
    flown = launches_of(IN_FLIGHT) - flown
    assert flown == 98, flown  # not the first step (after set_state) nor the push's
    # Those two wait for their one launch each (the report in it); none in flight does.
    assert waits == [int(step in (0, PUSH)) for step in range(100)], waits
    one_by_one = _steps(_piles("cpu", solver, **ONE_BY_ONE), 100)
    _assert_same(flying[-1], one_by_one[-1])
    _assert_same(_steps(_piles("cpu", solver, **FLYING), 100, read_every=7)[-1], one_by_one[-1])


def test_a_flight_is_read_each_steps_in_flight_steps(solver):
    """The answers wait on the device for at most STEPS_IN_FLIGHT steps: the step after
    that many reads them first, and flies on."""
    scene = _piles("cpu", solver, **FLYING)
    scene.step(DT)  # (after set_state: not in flight)
    for _ in range(STEPS_IN_FLIGHT):
        scene.step(DT)
    assert scene.steps_in_flight == STEPS_IN_FLIGHT
    scene.step(DT)
    assert scene.steps_in_flight == 1
    assert scene.step_count == STEPS_IN_FLIGHT + 2
    scene.get_state()
    assert not scene.steps_in_flight


def test_a_step_flies_after_a_step_and_not_for_a_caller_that_reads_after_each():
    """Only a step called right after another flies: a caller that reads (or edits) between
    its steps waits for each, and never launches the flight's kernel. One that reads after
    every other step finds a lone step in flight at each read, which costs a read of the
    device more than waiting: after LONE_READS of them, steps fly only each PROBE_STEPS-th
    step (then on, once the caller stops reading)."""
    scene = _piles("cpu", "xpbd", n_worlds=8, **FLYING)
    flown = []
    for step in range(48):
        before = launches_of(IN_FLIGHT)
        scene.step(DT)
        flown.append(launches_of(IN_FLIGHT) - before)
        if step < 8 or step % 2 == 1:  # after each of the first 8, then every other
            scene.get_state()
    assert flown[:9] == [0] * 9, flown  # (the 9th follows a read too)
    # After a read (even steps) nothing flies; the odd ones fly twice, then no more: the
    # probes (step_count % PROBE_STEPS == 0) fall on even steps.
    assert flown[9:] == [1, 0, 1] + [0] * 36, flown
    for _ in range(12):  # steps 48 to 59, unread: the probe at 56 flies, and on
        scene.step(DT)
    assert in_flight.PROBE_STEPS == 8 and scene.steps_in_flight == 4


def _closing_hub(options: dict, arch: str = "cpu"):
    """_hub's circles thrown from further out (0.32 m from the hub, at 1 m/s): more than
    MAX_COLORS constraints on the hub once they reach it, ~20 steps in."""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, step_options=options)
    scene.add_circle((0.0, 0.0), 1.0)
    for angle in np.linspace(0.0, 2.0 * np.pi, 36, endpoint=False):
        direction = np.array([np.cos(angle), np.sin(angle)])
        scene.add_circle(1.4 * direction, 0.08, velocity=-direction)
    return scene


def test_an_overflowing_colour_stops_a_flight_finished_and_taken_again_on_read():
    """Circles closing on a hub, coloured as the general path colours: a step in flight
    overflows the colours, its launch stops after its colouring, the launches after it do
    nothing, and the read finishes that step across worlds and takes the others again:
    bitwise one by one."""
    seen = []
    for options in (FLYING, ONE_BY_ONE):
        scene = _closing_hub({**COLORED_LIKE_GENERAL, **options})
        for _ in range(24):  # (it overflows from step 18 to 31)
            scene.step(DT)
        if options is FLYING:
            assert scene.steps_in_flight == 23  # (the first builds the scene)
        seen.append(_seen(scene))
        assert scene.n_overflow > 0 and not scene.steps_in_flight
    _assert_same(*seen)


def _thrown_out(scene):
    """World 5's box 0.2e9 m short of the engine's coordinate bound (shapes.MAX_COORDINATE,
    1e15 m), thrown at 9e9 m/s (within MAX_SPEED) along it: the first step after this
    edit keeps it in, the second takes it out: a fault."""
    state = scene.get_state()
    state.position[5, 3] = (1e15 - 2e8, 1.0)
    state.velocity[5, 3] = (9e9, 0.0)
    scene.set_state(state)


def test_a_fault_in_flight_is_raised_by_the_next_read_at_its_step():
    """A world faults in the second step after an edit, the first in flight: the read after
    three steps raises the SimulationError step() would have, the clock at that step, the
    steps after it not taken; with on_fault="reset" the faulty world resets and the steps
    after it are taken again, bitwise one by one."""
    for on_fault in ("raise", "reset"):
        seen = []
        for options in (FLYING, ONE_BY_ONE):
            scene = pendulums("cpu", 8, on_fault=on_fault)
            scene.step_options = options
            for _ in range(3):
                scene.step(DT)
            _thrown_out(scene)
            scene.step(DT)  # (after an edit: not in flight)
            if on_fault == "raise" and options is FLYING:
                for _ in range(3):
                    scene.step(DT)  # the first faults; they all fly
                assert scene.steps_in_flight == 3
                with pytest.raises(fx.SimulationError, match=r"step 5: world 5, body 3"):
                    scene.get_state()
                assert scene.step_count == 5
            elif on_fault == "raise":
                with pytest.raises(fx.SimulationError, match=r"step 5: world 5, body 3"):
                    scene.step(DT)
            else:
                for _ in range(3):
                    scene.step(DT)
                assert list(scene.faulted_worlds) == []  # the last step's: none
            seen.append(_seen(scene))
        _assert_same(*seen)


def _hinges_and_a_free_box(options: dict, n_worlds: int = 8):
    """Per world: a bar hinged to a static pivot and a free box, none colliding with
    anything (mask_bits=0), sleep off: steps without contacts (StepPlan.contactless)."""
    scene = fx.Scene(n_worlds=n_worlds, arch="cpu", enable_sleep=False, step_options=options)
    pivot = scene.add_box((0.0, 4.0), (0.2, 0.2), mass=0, mask_bits=0)
    bar = scene.add_box((0.5, 4.0), (1.0, 0.1), mask_bits=0)
    scene.add_revolute_joint(pivot, bar, anchor=(0.0, 0.0))
    scene.add_box((3.0, 1.0), (0.5, 0.5), mask_bits=0)
    scene.add_box((-3.0, 1.0), (0.5, 0.5), mask_bits=0)
    return scene


def test_steps_without_contacts_fly_and_a_fault_in_flight_is_raised_by_the_read():
    """Steps without contacts fly too (substeps_in_flight): 40 swinging hinges read at the
    end, bitwise one by one; a box thrown out in the second step after an edit (the first
    in flight) faults, raised by the read at that step."""
    seen = []
    for options in (FLYING, ONE_BY_ONE):
        scene = _hinges_and_a_free_box(options)
        flown = launches_of(IN_FLIGHT)
        for _ in range(40):
            scene.step(DT)
        assert launches_of(IN_FLIGHT) - flown == (39 if options is FLYING else 0)
        seen.append(_seen(scene))
        _thrown_out(scene)
        scene.step(DT)
        if options is FLYING:
            scene.step(DT)
            scene.step(DT)
            with pytest.raises(fx.SimulationError, match=r"step 42: world 5, body 3"):
                scene.get_state()
        else:
            with pytest.raises(fx.SimulationError, match=r"step 42: world 5, body 3"):
                scene.step(DT)
        seen.append(_seen(scene))
    _assert_same(seen[0], seen[2])
    _assert_same(seen[1], seen[3])


def test_another_scene_reads_the_flight_before_it_takes_the_pool(solver):
    """Two scenes stepped in turns: each one's call on the device first reads the other's
    steps in flight (the pool holds one scene at a time); bitwise each alone."""
    a, b = _piles("cpu", solver, **FLYING), _piles("cpu", solver, n_worlds=8, **FLYING)
    for _ in range(5):
        for scene in (a, b):
            scene.step(DT)
            scene.step(DT)
    alone = []
    for n_worlds in (64, 8):
        scene = _piles("cpu", solver, n_worlds=n_worlds, **ONE_BY_ONE)
        for _ in range(10):
            scene.step(DT)
        alone.append(_seen(scene))
    _assert_same(_seen(a), alone[0])
    _assert_same(_seen(b), alone[1])


def test_a_scene_dropped_with_a_stopped_flight_leaves_the_next_flight_alone(solver):
    """A scene whose flight stopped short, dropped unread: the device's flag that stopped it
    does not stop the next scene's flight (its first launch clears it)."""
    dropped = _closing_hub({**COLORED_LIKE_GENERAL, **FLYING})
    for _ in range(24):  # (it overflows, in flight, from step 18)
        dropped.step(DT)
    del dropped
    gc.collect()
    seen = []
    for options in (FLYING, ONE_BY_ONE):
        scene = _piles("cpu", solver, n_worlds=8, **options)
        for _ in range(10):
            scene.step(DT)
        seen.append(_seen(scene))
    _assert_same(*seen)


def test_settings_changed_in_flight_apply_from_the_next_step():
    """Steps taken again after one that stopped short run with the settings they were
    launched with; a change of settings waits for the flight before it."""

    def run(options):
        scene = _closing_hub({**COLORED_LIKE_GENERAL, **options})
        for _ in range(30):
            scene.step(DT)
        scene.substeps = 3  # the steps before it ran with the default (one overflowed)
        scene.step(DT)
        return _seen(scene)

    _assert_same(run(FLYING), run(ONE_BY_ONE))


def test_a_body_added_in_flight_joins_after_the_flight():
    """A body added between steps in flight: the flight is read first, with the model it
    was launched with."""
    seen = []
    for options in (FLYING, ONE_BY_ONE):
        scene = _piles("cpu", "xpbd", n_worlds=8, **options)
        for _ in range(5):
            scene.step(DT)
        scene.add_circle((-4.0, 3.0), 0.2)
        for _ in range(5):
            scene.step(DT)
        seen.append(_seen(scene))
    _assert_same(*seen)
