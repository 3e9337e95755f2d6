"""Contacts with impulses, begin/end events and sensors: Fx2D's test_contact_events.cpp
scenarios (with bounds derived for the scenes built here, not Fx2D's figures), plus what a
batched engine adds (every world at once, events across sleep, impulses that measure
load)."""

import math

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import scenes
from fx2d_gpu.enums import HELD

from .helpers import launches_of, records_equal

FRAME = 1.0 / 60.0
G = 9.81  # the scenes' gravity (the engine's default), m/s^2

# landing_scene(): the box (0.5 m, 1 kg) dropped from y = 2 has its bottom 0.5 m above the
# ground's top (1.0 + 0.25): it lands after sqrt(2 h / g) = 0.319 s (frame 20) at
# sqrt(2 g h) = 3.13 m/s, and rebounds at e = min(0.1, 0.1) = 0.1 of that (above the
# 0.5 m/s restitution threshold): 0.31 m/s, a 5 mm hop of 2 * 0.31 / g = 0.064 s (4 frames).
LANDING_DROP = 0.5  # m
LANDING_FRAME = math.ceil(math.sqrt(2.0 * LANDING_DROP / G) / FRAME)
LANDING_SPEED = math.sqrt(2.0 * G * LANDING_DROP)
HOP_FRAMES = math.ceil(2.0 * 0.1 * LANDING_SPEED / G / FRAME)


def landing_scene(n_worlds=1, box_y=2.0, arch="cpu", **box):
    """Fx2D's: a static 8 x 0.5 ground at (6, 1) and a 0.5 box above it."""
    scene = fx.Scene(n_worlds=n_worlds, arch=arch)
    scene.add_box((6.0, 1.0), (8.0, 0.5), mass=0.0, name="ground")
    scene.add_box((6.0, box_y), (0.5, 0.5), name="box", **box)
    return scene


def sensor_box(scene, position, size, **extra):
    """Fx2D's sensor: static (mass 0), no gravity, is_sensor."""
    return scene.add_box(
        position, size, mass=0.0, gravity_scale=0.0, sensor=True, name="trigger", **extra
    )


def test_no_contacts_when_separated():
    scene = landing_scene(box_y=6.0)
    scene.step(FRAME)
    assert len(scene.contacts()) == 0
    events = scene.contact_events()
    assert len(events.begin) == 0 and len(events.end) == 0


def test_begin_fires_once_and_contact_reported_every_resting_step_asleep_too(arch):
    from fx2d_gpu.physics.solver.sleep import SLEEP_TIME

    scene = landing_scene(arch=arch)
    begins, ends, steps_with_contact, asleep_with_contact = 0, 0, 0, 0
    for _ in range(180):
        scene.step(FRAME)
        events = scene.contact_events()
        begins += (0, 1) in events.begin.pairs()
        ends += (0, 1) in events.end.pairs()
        touching = len(scene.contacts()) == 1
        steps_with_contact += touching
        asleep_with_contact += touching and bool(scene.get_state().sleeping[0, 1])
    # The landing begins contact; the rebound at 0.31 m/s hops v^2 / 2g = 5 mm, past the
    # hold distance (a pair stays touching within one slop, 2 mm): contact ends, and begins
    # again when the box comes down. Then it rests, and sleeps, touching.
    assert (begins, ends) == (2, 1)
    # Touching from the landing on, but for the hop: 180 - 20 - 4 = 156 frames (Fx2D's
    # figure, 100, was its own scene's).
    assert steps_with_contact >= 180 - LANDING_FRAME - HOP_FRAMES
    # The box sleeps on the ground, still touching it, once still for SLEEP_TIME (0.5 s,
    # 30 frames) after the hop: 156 - 30 = 126 frames.
    still = round(SLEEP_TIME / FRAME)
    assert asleep_with_contact >= 180 - LANDING_FRAME - HOP_FRAMES - still


def test_end_event_on_separation():
    scene = landing_scene()
    for _ in range(120):
        scene.step(FRAME)
    assert len(scene.contacts()) == 1
    state = scene.get_state()  # teleport the box away (Fx2D: pose set, woken)
    state.position[0, 1] = (6.0, 8.0)
    state.velocity[:] = 0.0
    state.sleeping[:] = False
    scene.set_state(state)
    assert len(scene.contact_events().begin) == 0  # set_state is no step: no events
    ends = 0
    for _ in range(5):
        scene.step(FRAME)
        ends += (0, 1) in scene.contact_events().end.pairs()
    assert ends == 1


def test_contact_geometry_and_impulses_measure_impact_and_load():
    scene = landing_scene()
    peak, last = 0.0, None
    for _ in range(120):
        scene.step(FRAME)
        contacts = scene.contacts()
        for row in range(len(contacts)):
            assert contacts.point_count[row] > 0
            assert abs(np.linalg.norm(contacts.normal[row]) - 1.0) < 1e-5
            assert np.all(np.isfinite(contacts.depths[row]))
            peak = max(peak, contacts.normal_impulse[row].sum())
        if len(contacts):
            last = contacts
    # At rest the impulse over the step carries the weight: sum / dt = m g (1 kg box).
    load = last.normal_impulse.sum() / FRAME
    assert load == pytest.approx(G, rel=1e-3)
    # Normal from the ground (body a) to the box (b): up.
    assert last.normal[0] == pytest.approx([0.0, 1.0], abs=1e-4)
    # The impact: the landing frame's contact stops the 1 kg box falling at 3.13 m/s
    # (LANDING_SPEED), so its impulse is at least m v = 3.13 N s (188 N over the frame, 19
    # times the load); 1 % off for the frame's discretisation of the fall. (Fx2D's figure
    # was a non-zero impulse; the bound here was 1.5 m g over a frame, 0.245 N s.)
    assert peak >= 0.99 * 1.0 * LANDING_SPEED


def test_sensor_detects_but_never_deflects(arch):
    scene = fx.Scene(arch=arch)
    sensor_box(scene, (6.0, 5.0), (1.0, 1.0))
    faller = scene.add_box((6.0, 8.0), (0.4, 0.4), name="faller")
    saw_begin = saw_end = saw_overlap = False
    slowest = np.inf
    for _ in range(200):
        scene.step(FRAME)
        events = scene.contact_events()
        saw_begin |= (0, 1) in events.begin.pairs()
        saw_end |= (0, 1) in events.end.pairs()
        contacts = scene.contacts()
        if len(contacts):
            saw_overlap = True
            assert contacts.sensor.all()
            slowest = min(slowest, abs(scene.get_state().velocity[0, faller, 1]))
        if scene.get_state().position[0, faller, 1] < 1.0:
            break
    assert saw_begin and saw_overlap and saw_end
    assert scene.get_state().position[0, faller, 1] < 4.0
    # A sensor does not slow what passes through: the faller (bottom at 7.8) overlaps the
    # sensor (top at 5.5) only after a free fall of 2.3 m, so never slower than
    # sqrt(2 g 2.3) = 6.72 m/s (the substeps' Euler gives v^2 = 2 g d n / (n + 1), n ~ 450
    # substeps: 0.1 % less). Fx2D's figure, 0.5 m/s, was its own scene's.
    assert slowest >= 0.998 * math.sqrt(2.0 * G * 2.3)


def test_sensor_contacts_are_triggers_and_carry_no_impulse():
    scene = fx.Scene(arch="cpu")
    sensor_box(scene, (6.0, 5.0), (1.5, 1.5))
    scene.add_box((6.0, 7.0), (0.4, 0.4), name="faller")
    checked = False
    for _ in range(200):
        scene.step(FRAME)
        for flag in scene.contact_events().begin.is_trigger:
            assert flag
        contacts = scene.contacts()
        if len(contacts):
            assert np.all(contacts.normal_impulse == 0.0)
            assert np.all(contacts.tangent_impulse == 0.0)
            checked = True
            break
    assert checked
    # A free fall through the sensor: its speed is gravity's alone.
    velocity = scene.get_state().velocity[0, 1, 1]
    assert velocity == pytest.approx(-9.81 * scene.time, rel=1e-3)


def test_sensor_does_not_wake_a_sleeper_but_reports_it():
    scene = landing_scene(box_y=1.75)
    for _ in range(240):
        scene.step(FRAME)
        if scene.get_state().sleeping[0, 1]:
            break
    assert scene.get_state().sleeping[0, 1]
    trigger = sensor_box(scene, (6.0, 1.75), (1.0, 1.0))
    for _ in range(30):
        scene.step(FRAME)
    assert scene.get_state().sleeping[0, 1]
    pairs = scene.contacts().pairs()
    assert (1, trigger) in pairs
    assert (0, 1) in pairs  # the resting contact survived the scene's rebuild


def test_dynamic_sensor_falls_through_and_wakes_nothing():
    """A dynamic sensor falls under gravity through a resting box."""
    scene = landing_scene(box_y=1.75)
    for _ in range(60):
        scene.step(FRAME)
    sensor = scene.add_circle((6.0, 4.0), 0.3, sensor=True)
    overlapped = False
    for _ in range(80):
        scene.step(FRAME)
        overlapped |= (1, sensor) in scene.contacts().pairs()
    state = scene.get_state()
    assert overlapped
    assert state.position[0, sensor, 1] < 0.0  # through the box and the ground, free fall
    assert state.velocity[0, sensor, 1] == pytest.approx(-9.81 * 80 * FRAME, rel=1e-3)
    # The box undisturbed: resting on the ground's top (1.25), half its 0.5 m up (it fell
    # 0.25 m before the sensor came), at most a slop (2 mm) deep.
    from fx2d_gpu.physics.solver.contacts import LINEAR_SLOP

    assert state.position[0, 1, 1] == pytest.approx(1.5, abs=LINEAR_SLOP)
    assert state.sleeping[0, 1]


def test_events_sorted_and_batched_like_single_worlds():
    """Three worlds with boxes dropped from different heights: each world's contacts and
    events are those of the same scene alone, and every list is sorted."""
    heights = [1.8, 2.4, 3.0]

    def build(n_worlds):
        scene = fx.Scene(n_worlds=n_worlds, arch="cpu")
        scene.add_box((6.0, 1.0), (8.0, 0.5), mass=0.0)
        for k in range(3):
            scene.add_box((4.0 + 2.0 * k, 2.0), (0.5, 0.5))
        return scene

    def run(scene, world_of):
        """Per step: per world, (begin pairs, end pairs, contact impulses)."""
        record = []
        for _ in range(60):
            scene.step(FRAME)
            events, everything = scene.contact_events(), scene.contacts(None)
            for rows in (events.begin, events.end, everything):
                keys = list(zip(rows.world, rows.body_a, rows.body_b, strict=True))
                assert keys == sorted(keys)
            record.append(
                [
                    (
                        events.begin.pairs(w),
                        events.end.pairs(w),
                        everything.normal_impulse[everything.world == w],
                    )
                    for w in world_of
                ]
            )
        return record

    batch = build(len(heights))
    state = batch.get_state()
    for w, h in enumerate(heights):
        state.position[w, 1:, 1] = h + 0.3 * np.arange(3)
    batch.set_state(state)
    together = run(batch, range(len(heights)))
    assert any(step[0][0] for step in together) and any(step[0][2].size for step in together)
    for w in range(len(heights)):
        single = build(1)
        alone_state = single.get_state()
        alone_state.position[0] = state.position[w]
        single.set_state(alone_state)
        for mine, theirs in zip(run(single, [0]), together, strict=True):
            assert mine[0][0] == theirs[w][0] and mine[0][1] == theirs[w][1]
            np.testing.assert_array_equal(mine[0][2], theirs[w][2])


def test_events_and_contacts_survive_snapshots_and_another_scene():
    scene = landing_scene()
    for _ in range(10):
        scene.step(FRAME)
    snap = scene.snapshot()
    steps = 0
    while not scene.contact_events().begin.pairs():
        scene.step(FRAME)
        steps += 1
        assert steps < 300, "the box never landed"
    other = landing_scene(box_y=3.0)  # another scene takes the pool meanwhile
    other.step(FRAME)
    assert scene.contact_events().begin.pairs() == {(0, 1)}
    impulses = scene.contacts().normal_impulse
    scene.restore(snap)
    for _ in range(steps):
        scene.step(FRAME)
    assert scene.contact_events().begin.pairs() == {(0, 1)}
    np.testing.assert_array_equal(scene.contacts().normal_impulse, impulses)


def test_set_state_checks_sleeping_contacts_again():
    """A sleeping box teleported by set_state (still asleep) ends its contact; a set_state
    that changes nothing keeps the sleeping pile's contacts without events."""
    scene = landing_scene(box_y=1.75)
    for _ in range(300):
        if scene.get_state().sleeping[0, 1]:
            break
        scene.step(FRAME)
    assert scene.get_state().sleeping[0, 1], "the box never fell asleep"
    scene.step(FRAME)
    scene.set_state(scene.get_state())  # nothing changes
    scene.step(FRAME)
    events = scene.contact_events()
    assert len(events.begin) == 0 and len(events.end) == 0
    assert scene.contacts().pairs() == {(0, 1)}
    state = scene.get_state()
    state.position[0, 1] = (6.0, 8.0)  # away, and still asleep
    scene.set_state(state)
    scene.step(FRAME)
    assert scene.get_state().sleeping[0, 1]
    assert scene.contact_events().end.pairs() == {(0, 1)}
    assert len(scene.contacts()) == 0


def test_restoring_the_start_clears_contacts_and_events():
    """Fx2D's reset(): back at the start, no contacts and no events."""
    scene = landing_scene()
    start = scene.snapshot()
    for _ in range(120):
        scene.step(FRAME)
    assert len(scene.contacts()) == 1
    scene.restore(start)
    assert len(scene.contacts()) == 0
    events = scene.contact_events()
    assert len(events.begin) == 0 and len(events.end) == 0


@pytest.mark.parametrize("in_launch", [True, False], ids=["in the team's launch", "alone"])
def test_a_refreshed_report_is_the_report_built_from_scratch(arch, in_launch):
    """A row of 50 boxes resting awake (a world whose steps keep their pairs) where a box
    hops a few millimetres every 10 steps: its contact ends and begins again while no fat
    box moves, or (the smaller hops, within the hold distance) is held. Steps in which the
    same pairs touch refresh the last list (reporting.refresh_report; on a CPU team, in
    the substeps' launch unless `in_launch` is off: StepOptions.refresh_in_launch); the others
    build it. Contacts and events after every step equal those of the same run with every
    list built from scratch."""
    from fx2d_gpu.device import runtime
    from fx2d_gpu.physics.solver import contacts as solver_contacts

    launched_before = launches_of("reporting._refresh_report")  # refreshes in their own launch

    def run(refresh):
        scene = fx.Scene(
            arch=arch,
            enable_sleep=False,
            step_options=dict(refresh_report=refresh, refresh_in_launch=in_launch),
        )
        scene.add_box((0.0, -0.5), (60.0, 1.0), mass=0.0)
        boxes = [scene.add_box((-25.0 + 1.0 * i, 0.25), (0.5, 0.5)) for i in range(50)]
        records, kept_with_events, refreshed_held = [], 0, 0
        for step in range(150):
            if step % 10 == 5:
                # Hops of ~3.7 mm and ~5 mm (its contact ends and begins again) and ~0.8
                # mm (held throughout: within a slop of touching) above the resting height.
                force = (22.0, 15.0, 26.0)[(step // 10) % 3]
                scene.apply_force(boxes[step // 10], (0.0, force))
            reuses, refreshes = scene.pair_reuses, scene.report_refreshes
            scene.step(FRAME)
            events = scene.contact_events()
            if scene.pair_reuses > reuses and len(events.begin.body_a) + len(events.end.body_a):
                kept_with_events += 1
            ctx = scene.step_context()
            touching = ctx.pool.manifolds.touching.to_numpy()[: ctx.n_pairs]
            if scene.report_refreshes > refreshes and np.any(touching == solver_contacts.HELD):
                refreshed_held += 1
            records.append((scene.contacts(), events))
        return scene, records, kept_with_events, refreshed_held

    refreshed, records, kept_with_events, refreshed_held = run(True)
    built, reference, _, _ = run(False)
    alone = launches_of("reporting._refresh_report") - launched_before
    assert refreshed.report_refreshes >= 50 and built.report_refreshes == 0
    if runtime.on_cpu() and in_launch:  # (GPU backends have no team)
        assert not alone
    else:
        assert alone >= refreshed.report_refreshes
    assert kept_with_events >= 10  # hops changed what touched in steps that kept their pairs
    assert refreshed_held >= 3  # and held pairs were refreshed (one step of each small hop)
    for step, (got, want) in enumerate(zip(records, reference, strict=True)):
        assert records_equal(got[0], want[0]) and records_equal(got[1], want[1]), step


def _drifting_pair(gap, speed, arch):
    """No gravity: a static 1 m box at the origin and a 1 m box `gap` m to its right moving
    along x at `speed` m/s, frictionless (nothing but the contact acts on it)."""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, enable_sleep=False)
    scene.add_box((0.0, 0.0), (1.0, 1.0), mass=0.0, static_friction=0.0, dynamic_friction=0.0)
    scene.add_box((1.0 + gap, 0.0), (1.0, 1.0), static_friction=0.0, dynamic_friction=0.0)
    state = scene.get_state()
    state.velocity[0, 1] = (speed, 0.0)
    scene.set_state(state)
    return scene


def _gap(scene):
    return float(scene.get_state().position[0, 1, 0]) - 1.0


def test_touching_has_hysteresis_between_a_quarter_slop_and_a_slop(arch):
    """A pair begins touching within a quarter slop (contacts.TOUCH_FRACTION) and, once
    reported, stays touching until it is a slop apart (HOLD_FRACTION): neighbours
    resting a quarter slop apart do not begin and end every few steps. The gaps are the
    box's positions (frictionless, no rotation), at 0.1 mm a step: a pair is touching in a
    step if a substep's velocity pass, after a substep's motion, finds it close enough."""
    from fx2d_gpu.physics.solver import contacts as solver_contacts

    slop = solver_contacts.LINEAR_SLOP  # 1 m boxes: the full slop
    touch, hold = solver_contacts.TOUCH_FRACTION * slop, solver_contacts.HOLD_FRACTION * slop
    per_step = 1e-4
    speed = per_step / FRAME

    scene = _drifting_pair(0.0, speed, arch)  # in contact, drifting apart
    gaps, ended = [], None
    for step in range(40):
        before = _gap(scene)
        scene.step(FRAME)
        events = scene.contact_events()
        if step == 0:
            assert events.begin.pairs() == {(0, 1)}
        if events.end.pairs():
            ended = before
            break
        gaps.append(_gap(scene))
        assert scene.contacts().pairs() == {(0, 1)}
    assert ended is not None
    substep = per_step / 11
    # Its first substep's velocity pass (after one substep's motion) is past the hold
    # distance, the last step's was not: reported past the touch distance, until the hold.
    assert hold - substep - 1e-6 <= ended < hold - substep + per_step + 1e-6
    assert max(gaps) > touch + 3 * per_step

    scene = _drifting_pair(3 * slop, -speed, arch)  # apart, closing
    for _ in range(80):
        before = _gap(scene)
        scene.step(FRAME)
        if scene.contact_events().begin.pairs():
            break
        assert len(scene.contacts()) == 0
    else:
        pytest.fail("never began")
    # Begins in the first step whose last substep comes within the touch distance (not the
    # hold one): the gap is past it at the start of the step, within at its end.
    assert touch - 1e-6 <= before < touch + per_step + 1e-6
    assert _gap(scene) < touch


def test_set_state_holds_no_pair_by_the_last_list(arch):
    """After set_state the report is the new poses' alone: a pair put between the touch and
    the hold distance, still, is not touching (an end event), though it was reported."""
    from fx2d_gpu.physics.solver import contacts as solver_contacts

    slop = solver_contacts.LINEAR_SLOP
    between = 0.5 * (solver_contacts.TOUCH_FRACTION + solver_contacts.HOLD_FRACTION) * slop
    scene = _drifting_pair(0.0, 0.0, arch)
    scene.step(FRAME)
    assert scene.contacts().pairs() == {(0, 1)}
    moved = _drifting_pair(between, 0.0, arch)  # the same pair, still, between the distances
    scene.set_state(moved.get_state())
    scene.step(FRAME)
    assert scene.contact_events().end.pairs() == {(0, 1)}
    assert len(scene.contacts()) == 0
    # Stepped on without set_state from a touching start it would be held: the same
    # distance reached by drifting stays reported (the hysteresis test above).


def test_unused_points_read_the_same_whatever_ran_before(arch):
    """A pair of one point leaves its second slot on the device holding whatever an
    earlier pair or scene wrote there: the read-out gives 0 (points, depths, impulses) and
    -1 (features) past point_count, so the same scene built twice reads the same, bit for
    bit."""

    def contacts_after(steps):
        scene = scenes.random_pile(150, n_worlds=2, arch=arch)
        dt = 1.0 / 60.0
        for _ in range(steps):
            scene.step(dt)
        return scene.contacts(None)

    first, second = contacts_after(40), contacts_after(40)
    one_point = first.point_count == 1
    assert one_point.any() and (first.point_count == 2).any()
    for name in (
        "world",
        "body_a",
        "body_b",
        "normal",
        "point_count",
        "points",
        "depths",
        "features",
        "normal_impulse",
        "tangent_impulse",
    ):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name), name)
    assert (first.points[one_point, 1] == 0.0).all() and (first.depths[one_point, 1] == 0.0).all()
    assert (first.features[one_point, 1] == -1).all()


#: The reported list's fields (pool.reported) the by-world report must write as the general
#: one does, whole: the user's contacts, where each came from, and the per-slot ranges.
_REPORTED_LIST_FIELDS = (
    "body_a",
    "body_b",
    "point_count",
    "normal",
    "point",
    "depth",
    "feature",
    "total_normal_impulse",
    "total_tangent_impulse",
    "origin",
)
_REPORTED_POINT_FIELDS = (
    "point",
    "depth",
    "feature",
    "total_normal_impulse",
    "total_tangent_impulse",
)


@pytest.mark.parametrize("n_worlds", [40, 600])
def test_small_worlds_report_a_world_per_thread_as_the_general_kernel(n_worlds):
    """Small worlds (8 bodies: a stack of three boxes, three circles thrown at it, a rod on
    a hinge) whose pairs lie world by world build the reported list a world per thread
    (reporting._report_by_world). Stepped with sleep on, the stacks falling asleep and
    struck awake, and at step 70 every third world set back to its start with its circles
    thrown again (Scene.set_state: the resting pairs are checked afresh, none held by the
    old list), the list (every field, its per-slot ranges and where each entry came from),
    the contacts and the events after every step are bitwise those of the general kernel.
    40 worlds run the kernels' loops serially, 600 in parallel (context.loops_run_serially).
    The run passes through what the list holds: begin and end events in one step, pairs
    resting asleep (the broad phase no longer pairs them: copied from the old list) and
    pairs held within the hold distance."""

    def run(by_world):
        scene = scenes.batched_small(
            n_worlds, seed=3, solver="soft_step", step_options={"report_by_world": by_world}
        )
        start = scene.get_state()
        rethrown = np.arange(0, n_worlds, 3)
        records, seen = [], {"events": 0, "resting": 0, "held": 0}
        for step in range(160):
            if step == 70:
                scene.set_state(start, worlds=rethrown)
            scene.step(FRAME)
            ctx = scene.step_context()
            # Copies of the used part (the pool's fields are sized for the largest scene
            # of the process: a view of a whole to_numpy() kept per step ran out of memory).
            lists = ctx.pool.reported.read(
                {
                    **dict.fromkeys(_REPORTED_LIST_FIELDS, ctx.cache.n_reported),
                    "pair_start": ctx.n_slots + 1,
                }
            )
            # A point slot past point_count holds whatever was there before: not compared.
            unused = np.arange(2)[None, :] >= lists["point_count"][:, None]
            for name in _REPORTED_POINT_FIELDS:
                lists[name][unused] = 0
            events = scene.contact_events()
            records.append((lists, scene.contacts(None), events))
            if len(events.begin.body_a) and len(events.end.body_a):
                seen["events"] += 1
            seen["resting"] += int((lists["origin"] < 0).sum())
            touching = ctx.pool.manifolds.read({"touching": ctx.cache.n_pairs})["touching"]
            seen["held"] += int((touching == HELD).sum())
        return records, seen

    before = launches_of("reporting._report_by_world")
    got, seen = run(True)
    by_world_launches = launches_of("reporting._report_by_world") - before
    want, _ = run(False)
    assert by_world_launches == 160
    assert launches_of("reporting._report_by_world") - before == by_world_launches
    assert seen["events"] >= 10 and seen["resting"] >= 100 and seen["held"] >= 10, seen
    for step, ((lists, contacts, events), (lists_w, contacts_w, events_w)) in enumerate(
        zip(got, want, strict=True)
    ):
        for name, value in lists.items():
            assert np.array_equal(value, lists_w[name]), (step, name)
        assert records_equal(contacts, contacts_w) and records_equal(events, events_w), step
