"""Fat boxes and kept pairs (collision/broad_phase.refit_fat_boxes, solver/pairs.find_step_pairs,
solver/step._keep_pairs): the step's candidate pairs in worlds of more than 40 bodies,
checked against brute-force box overlap, and keeping them across steps (in colour order, with
their colouring or a new one) checked against finding them every step."""

import dataclasses

import numpy as np

from fx2d_gpu import scenes
from fx2d_gpu.enums import HELD
from fx2d_gpu.physics.collision import broad_phase
from fx2d_gpu.physics.solver import step as solver_step
from fx2d_gpu.physics.solver.contacts import SPECULATIVE_DISTANCE

from .helpers import FOLDED_TEAM, records_equal
from .reference.broad_phase import exact_boxes

DT = 1 / 60
#: The scenes of the test of a colouring of no constraints: on the CPU, where pools of both
#: are resident in turn.
ARCH_CPU = "cpu"


#: StepOptions that find the pairs every step (never keep last step's).
ALWAYS_FIND = {"reuse_pairs": False}


def pyramid(arch, n_worlds=1, base=12, enable_sleep=False, step_options=None):
    specs, _ = scenes.pyramid_layout(base)
    return scenes.build_scene(
        specs, arch=arch, n_worlds=n_worlds, enable_sleep=enable_sleep, step_options=step_options
    )


def state_of(scene) -> np.ndarray:
    state = scene.get_state()
    return np.concatenate(
        [
            state.position.ravel(),
            state.angle.ravel(),
            state.velocity.ravel(),
            state.angular_velocity.ravel(),
            state.sleeping.ravel().astype(np.float64),
        ]
    )


def step_pairs(scene) -> set:
    """The last step's candidate pairs, {(world, body_a, body_b)}, read from the device."""
    ctx = scene.step_context(DT)
    n, nb = ctx.cache.n_pairs, scene.n_bodies
    a = ctx.pool.manifolds.body_a.to_numpy()[:n]
    b = ctx.pool.manifolds.body_b.to_numpy()[:n]
    found = {(int(x) // nb, int(x) % nb, int(y) % nb) for x, y in zip(a, b, strict=True)}
    assert len(found) == n, "a pair was found twice"
    return found


def test_kept_pairs_are_the_pairs_the_broad_phase_finds(arch, monkeypatch):
    # An awake pyramid jitters by micrometres: no box leaves its fat box, and the pairs
    # are kept; finding them every step gives the same results bit for bit.
    kept = pyramid(arch)
    for _ in range(90):
        kept.step(DT)
    found = pyramid(arch, step_options=ALWAYS_FIND)
    for _ in range(90):
        found.step(DT)
    assert kept.pair_reuses > 60, kept.pair_reuses
    assert found.pair_reuses == 0
    np.testing.assert_array_equal(state_of(kept), state_of(found))
    assert step_pairs(kept) == step_pairs(found)


def test_kept_pairs_whose_colouring_fails_match_finding_them(arch):
    # Balls rolling slowly up to a pyramid: their fat boxes hold the pyramid's nearest boxes
    # before they touch, so a pair gains its first points in a step that keeps its pairs,
    # and the colouring no longer holds (coloring_holds_in_order): the kept pairs go back
    # to the broad phase's order (pairs.restore_broad_order's kernel) for a new colouring.
    # Bit for bit as finding them.
    from .helpers import launches_of

    def run(step_options=None):
        scene = pyramid(arch, base=10, step_options=step_options)
        for i, x in enumerate((-5.5, -6.6, -7.75, -8.9)):
            scene.add_circle(
                (x, 0.41 + i), 0.4, velocity=(0.4, 0.0), static_friction=0.0, dynamic_friction=0.0
            )
        for _ in range(90):
            scene.step(DT)
        return scene

    before = launches_of("pairs._scatter_to_broad_order")
    kept = run()
    fallbacks = launches_of("pairs._scatter_to_broad_order") - before
    assert kept.pair_reuses > 15 and fallbacks, (kept.pair_reuses, fallbacks)
    found = run(ALWAYS_FIND)
    assert found.pair_reuses == 0
    np.testing.assert_array_equal(state_of(kept), state_of(found))
    assert step_pairs(kept) == step_pairs(found)


def test_fat_pairs_cover_every_touching_pair_and_no_far_one(arch):
    # A ball thrown across a pyramid: boxes get refitted as it passes. Every pair whose
    # exact boxes overlap must be a candidate; no candidate may be farther apart than the
    # two fat margins plus the step's motion and the speculative distance.
    scene = pyramid(arch, base=10)
    scene.add_circle((-12.0, 4.0), 0.4, velocity=(9.0, 2.0))
    radius = np.array([scene.body_shape(b).bounding_radius for b in range(scene.n_bodies)])
    for step in range(60):
        scene.step(DT)
        if step % 6:
            continue
        got = step_pairs(scene)
        lower, upper, state = exact_boxes(scene)
        speed = (
            np.linalg.norm(state.velocity[0], axis=1) + np.abs(state.angular_velocity[0]) * radius
        )
        moving = np.array([scene.body_mass(b) > 0 for b in range(scene.n_bodies)])
        for a in range(scene.n_bodies):
            for b in range(a + 1, scene.n_bodies):
                if not (moving[a] or moving[b]):
                    continue
                gap = np.max(np.maximum(lower[0, a] - upper[0, b], lower[0, b] - upper[0, a]))
                if gap < -1e-4:
                    assert (0, a, b) in got, (step, a, b)
                reach = sum(
                    2 * SPECULATIVE_DISTANCE
                    + 2 * DT * speed[i]
                    + 2 * broad_phase.FAT_FRACTION * radius[i]
                    for i in (a, b)
                )
                if (0, a, b) in got:
                    assert gap <= reach + 0.05, (step, a, b, gap, reach)


def test_a_moving_body_stops_the_reuse_and_a_batch_matches_worlds_alone(arch):
    # Two worlds: one at rest, one hit by a ball. The resting world's results must not
    # depend on its neighbour (the pairs are kept only when no world's boxes moved).
    batch = pyramid(arch, n_worlds=2, base=10)
    ball = batch.add_circle((-15.0, 3.0), 0.4)
    state = batch.get_state()
    state.velocity[1, ball] = (12.0, 0.0)
    batch.set_state(state)
    alone = []
    for world in range(2):
        scene = pyramid(arch, base=10)
        scene.add_circle((-15.0, 3.0), 0.4)
        single = scene.get_state()
        single.velocity[0, ball] = state.velocity[world, ball]
        scene.set_state(single)
        alone.append(scene)
    for _ in range(80):
        batch.step(DT)
        for scene in alone:
            scene.step(DT)
    assert alone[0].pair_reuses > 20  # once its ball (dropped from 3 m) lies still
    assert alone[1].pair_reuses < alone[0].pair_reuses
    together = batch.get_state()
    for world, scene in enumerate(alone):
        single = scene.get_state()
        np.testing.assert_array_equal(together.position[world], single.position[0])
        np.testing.assert_array_equal(together.velocity[world], single.velocity[0])


def test_sleeping_worlds_pair_swept_boxes_and_wake_as_before(arch):
    # With a sleeper in the world the step pairs swept boxes, not fat ones: a ball rolling
    # slowly up to a sleeping stack wakes it as a new pair appears (sleep.wake_islands),
    # whatever the fat margin would have paired earlier.
    scene = pyramid(arch, base=10, enable_sleep=True, step_options=ALWAYS_FIND)
    for _ in range(240):
        scene.step(DT)
    assert scene.get_state().sleeping[0, 1:].all()
    ball = scene.add_circle((-8.0, 0.41), 0.4, velocity=(1.0, 0.0))
    woke_at = None
    for step in range(240):
        scene.step(DT)
        lower, upper, state = exact_boxes(scene)
        if woke_at is None and not state.sleeping[0, 1:ball].all():
            woke_at = step
            gap = np.max(
                np.maximum(lower[0, 1:ball] - upper[0, ball], lower[0, ball] - upper[0, 1:ball]),
                axis=1,
            ).min()
            # The pair appeared when the swept boxes met (a gap under 2 speculative
            # distances plus the ball's 1.7 cm a step), so after the step's move the gap is
            # under 2 speculative distances (measured: 1 mm); fat boxes for the sleepers'
            # world would have woken them 4 cm earlier (measured: 3.3 cm).
            assert gap < 2 * SPECULATIVE_DISTANCE, gap
            break
    assert woke_at is not None


def test_a_sleeping_pyramid_keeps_its_pairs_and_report_as_finding_them(arch, monkeypatch):
    # A pyramid falls asleep; then nothing in its world can move, so the broad phase would
    # find last step's pairs again and the report is last step's: steps keep both
    # (keeps_pairs with sleepers, reporting.refresh_report with resting pairs). A force
    # left on the device on a sleeping box (apply_force would wake the box itself as it
    # uploads it) wakes the pyramid through the kept pairs' wake check
    # (find_pairs(woken=True)); an applied force wakes it again later; asleep again, a
    # slow ball rolls in (an awake body in a sleeping world, inside its fat box: its swept
    # box moves, the pairs are
    # found). Everything after every step as in the same run with the pairs found and the
    # report built every step.

    woken_finds = []
    find = solver_step._find_pairs

    def counted_find(ctx, refit, profile, woken, solve, saved=False):
        woken_finds.append(woken)
        return find(ctx, refit, profile, woken, solve, saved)

    monkeypatch.setattr(solver_step, "_find_pairs", counted_find)

    def run(step_options=None):
        scene = pyramid(arch, base=10, enable_sleep=True, step_options=step_options)
        top = scene.n_bodies - 1
        records, kept_asleep, refreshed_asleep, asleep_at = [], 0, 0, {}
        for step in range(850):
            if step in (300, 480, 660):
                asleep_at[step] = scene.get_state().sleeping[0, 1:].all()
            if step == 300:
                ctx = scene.step_context()
                ctx.pool.bodies.force[top] = (0.0, 30.0)
                ctx.cache.forces_on_device = True  # (cleared after the step)
            if step == 480:
                scene.apply_force(top, (0.0, 30.0))
            if step == 660:
                scene.add_circle((-5.9, 0.41), 0.4, velocity=(0.2, 0.0))
            reuses, refreshes = scene.pair_reuses, scene.report_refreshes
            scene.step(DT)
            asleep = scene.get_state().sleeping[0, 1:].any()
            kept_asleep += asleep and scene.pair_reuses > reuses
            refreshed_asleep += asleep and scene.report_refreshes > refreshes
            records.append((state_of(scene), scene.contacts(), scene.contact_events()))
        return scene, records, kept_asleep, refreshed_asleep, asleep_at

    kept, records, kept_asleep, refreshed_asleep, asleep_at = run()
    woke_on_kept_pairs = sum(woken_finds)
    found, reference, _, _, _ = run({**ALWAYS_FIND, "refresh_report": False})
    assert all(asleep_at.values()), asleep_at
    assert woke_on_kept_pairs == 1
    assert kept_asleep > 300 and refreshed_asleep > 300, (kept_asleep, refreshed_asleep)
    assert found.pair_reuses == 0 and found.report_refreshes == 0

    def pyramid_sleeps(step):  # (state_of's last entries: the sleep flags, ground first)
        n = len(records[step][0]) // 7
        return records[step][0][-n + 1 :][:55].all()

    assert not pyramid_sleeps(300) and not pyramid_sleeps(480)  # the forces woke it
    assert not all(pyramid_sleeps(step) for step in range(660, 850))  # and the ball did
    for step, (got, want) in enumerate(zip(records, reference, strict=True)):
        np.testing.assert_array_equal(got[0], want[0], err_msg=f"step {step}")
        assert records_equal(got[1], want[1]) and records_equal(got[2], want[2]), step


def test_filters_and_set_state_find_the_pairs_again(arch):
    scene = pyramid(arch, base=10)
    for _ in range(30):
        scene.step(DT)
    before = step_pairs(scene)
    top = scene.n_bodies - 1
    scene.set_collision_filter(top, collision_group=-1)
    scene.set_collision_filter(top - 1, collision_group=-1)
    scene.step(DT)
    assert (0, top - 1, top) in before and (0, top - 1, top) not in step_pairs(scene)
    state = scene.get_state()
    state.position[0, top] += (30.0, 0.0)  # teleported far from the pyramid
    scene.set_state(state)
    scene.step(DT)
    assert not any(top in (a, b) for _, a, b in step_pairs(scene))


def test_kept_pairs_survive_snapshots_and_other_scenes(arch):
    # The fat boxes are saved with the scene; the per-body contact lists a kept step reuses
    # are scratch, so a restored snapshot or another scene in the pool must rebuild them.
    scene = pyramid(arch, base=10)
    for _ in range(30):
        scene.step(DT)
    snapshot = scene.snapshot()
    for _ in range(30):
        scene.step(DT)
    straight = state_of(scene)
    # Other pairs and lists: the top box thrown up, then the snapshot restored.
    state = scene.get_state()
    state.velocity[0, -1] = (3.0, 6.0)
    scene.set_state(state)
    for _ in range(20):
        scene.step(DT)
    scene.restore(snapshot)
    reuses = scene.pair_reuses
    for _ in range(30):
        scene.step(DT)
    assert scene.pair_reuses > reuses
    np.testing.assert_array_equal(state_of(scene), straight)
    # Two scenes stepped in turn, each as if alone.
    scene.restore(snapshot)
    other = pyramid(arch, base=11)
    for _ in range(30):
        scene.step(DT)
        other.step(DT)
    np.testing.assert_array_equal(state_of(scene), straight)
    alone = pyramid(arch, base=11)
    for _ in range(30):
        alone.step(DT)
    np.testing.assert_array_equal(state_of(other), state_of(alone))


def test_a_kept_step_in_one_launch_is_its_four_launches(arch, solver):
    """On a CPU team a step that may keep its pairs runs the fat boxes' refit, begin_step,
    the colouring's check and the substeps in one launch (fused.kept_step_by_team): the
    same states, contacts and events every step as four launches, where the refit keeps the
    pairs and where it does not (balls rolling up to a pyramid), where the colouring holds
    and where it does not (they gain their first points in kept steps). Which way each step
    went is read from the kernels it launched (launching.kernel_launches)."""
    from fx2d_gpu.device import launching

    from .helpers import assert_same_trace, trace

    watched = {
        "refit": "fx2d_gpu.physics.collision.broad_phase._refit_fat_boxes",
        "found": "fx2d_gpu.physics.collision.broad_phase._find_pairs",
        "fallback": "fx2d_gpu.physics.solver.pairs._scatter_to_broad_order",
    }
    steps = []  # per step: {watched kernel: launches}, and whether it kept its pairs

    def note(scene):
        counts = launching.kernel_launches()
        now = {name: counts[kernel] for name, kernel in watched.items()}
        steps.append(({name: now[name] - last[0][name] for name in now}, scene.pair_reuses))
        last[0] = now

    last = [{name: launching.kernel_launches()[kernel] for name, kernel in watched.items()}]

    def run(step_options=None):
        specs, _ = scenes.pyramid_layout(10)
        scene = scenes.build_scene(
            specs, arch=arch, solver=solver, substeps=None, step_options=step_options
        )
        for i, x in enumerate((-5.5, -6.6, -7.75, -8.9)):
            scene.add_circle(
                (x, 0.41 + i), 0.4, velocity=(0.4, 0.0), static_friction=0.0, dynamic_friction=0.0
            )
        return trace(scene, 90, each=note)

    def ways(records):
        """(kept steps whose colouring held, kept steps that coloured again, steps after a
        kept step whose refit found moved boxes, refits in launches of their own)."""
        kept = [records[i][1] > records[i - 1][1] for i in range(1, len(records))]
        held = sum(k and not r[0]["fallback"] for k, r in zip(kept, records[1:], strict=True))
        failed = sum(k and r[0]["fallback"] > 0 for k, r in zip(kept, records[1:], strict=True))
        moved = sum(k and r[0]["found"] > 0 for k, r in zip(kept[:-1], records[2:], strict=True))
        return held, failed, moved, sum(r[0]["refit"] for r in records)

    one_launch = run()
    held, failed, moved, alone = ways(steps)
    if arch == "cpu":  # a team runs the steps (on a GPU's team too, where it has one)
        assert held > 10 and failed > 0 and moved > 0, (held, failed, moved)
    steps.clear()
    four_launches = run({"kept_in_one_launch": False})
    held_alone, failed_alone, moved_alone, alone_four = ways(steps)
    assert (held_alone, failed_alone, moved_alone) == (held, failed, moved)
    # Where the kept step's launch ran, its refit now has a launch of its own.
    assert alone_four >= alone + held + failed + moved, (alone_four, alone)
    assert_same_trace(one_launch, four_launches)


@FOLDED_TEAM
def test_a_found_step_in_one_launch_is_its_own_launches(arch, solver):
    """On a team, a step whose broad phase found its pairs runs begin_step, the colouring's
    check and, where last step's colouring holds, the move to colour order, the per-body
    lists and the substeps in one launch (fused.found_step_by_team): the same states,
    contacts and events every step as with each in launches of its own, where the
    colouring holds (the awake pyramid's pairs found again) and where it does not (balls
    rolling up to it bring new pairs), in fewer launches."""
    from fx2d_gpu.device import launching

    from .helpers import assert_same_trace, trace

    def run(found_in_one_launch):
        specs, _ = scenes.pyramid_layout(10)
        scene = scenes.build_scene(
            specs,
            arch=arch,
            solver=solver,
            enable_sleep=False,
            step_options={
                "found_in_one_launch": found_in_one_launch,
                "reuse_pairs": False,
                "fold_on_cpu": True,
            },
        )
        for i, x in enumerate((-5.5, -6.6, -7.75, -8.9)):
            scene.add_circle(
                (x, 0.41 + i), 0.4, velocity=(0.4, 0.0), static_friction=0.0, dynamic_friction=0.0
            )
        before = launching.launch_count()
        got = trace(scene, 90)
        return got, launching.launch_count() - before, scene.colorings

    one_launch, fewer, colorings = run(True)
    # Both kinds of found step: colourings for new pairs, and steps that kept the colouring.
    assert 0 < colorings < 60, colorings
    own_launches, more, same_colorings = run(False)
    assert_same_trace(one_launch, own_launches)
    assert same_colorings == colorings
    if arch == "cpu":  # a team runs the steps (a GPU's team where it has one: test_gpu_team)
        # Four launches fewer in each step that kept its colouring.
        assert more - fewer >= 4 * (90 - colorings) - 5, (more, fewer, colorings)


def _pile_colored_by_team(arch, solver, color_in_launch):
    """A poured pile of 300 bodies on the GPU team's path (StepOptions.fold_on_cpu), whose
    found steps colour in the team's launch where `color_in_launch`: its pairs change
    nearly every step, so most steps colour."""
    return scenes.random_pile(
        300,
        arch=arch,
        seed=3,
        solver=solver,
        step_options={"color_in_launch": color_in_launch, "fold_on_cpu": True},
    )


@FOLDED_TEAM
def test_a_found_step_that_colours_in_its_launch_is_its_own_launches(arch, solver):
    """On a team, a found step whose colouring no longer holds (or may not be reused: its
    pairs are not as many as last step's colouring coloured) colours the constraints in
    its launch and goes on there (StepOptions.color_in_launch, fused._color_by_team): a
    poured pile whose pairs change nearly every step gives the same states, contacts and
    events every step as the host's colouring in launches of its own, with the same
    colourings, and its colourings take no launch of the host's colouring and a handful of
    launches fewer each."""
    from fx2d_gpu.device import launching

    from .helpers import assert_same_trace, launches_of, trace

    def run(color_in_launch):
        scene = _pile_colored_by_team(arch, solver, color_in_launch)
        steps, last = [], [launching.launch_count(), scene.colorings]

        def note(scene):  # (launches since the last step's note, whether it coloured)
            now = [launching.launch_count(), scene.colorings]
            steps.append((now[0] - last[0], now[1] - last[1]))
            last[:] = now

        hosted = launches_of("coloring._start_coloring")
        got = trace(scene, 40, note)
        return got, steps, launches_of("coloring._start_coloring") - hosted

    in_launch, steps, hosted = run(True)
    own_launches, own_steps, own_hosted = run(False)
    assert_same_trace(in_launch, own_launches)
    colored = [step for step, (_, made) in enumerate(own_steps) if made]
    assert [made for _, made in steps] == [made for _, made in own_steps]
    assert len(colored) > 20, colored  # the pile's colouring fails most steps
    assert own_hosted >= len(colored) - 1, own_hosted
    if arch == "cpu":  # a team runs the steps (a GPU's team where it has one)
        # The colourings ran in the team's launch, not the host's: at most the step after
        # a set_state or a kept step whose check failed colours on the host.
        assert hosted <= 2, (hosted, own_hosted)
        # The colour's 3 launches and the order's 2, the carry's, begin_step's, the body
        # lists' and the substeps' launches folded into one.
        saved = [own_steps[step][0] - steps[step][0] for step in colored[1:]]
        assert min(saved) >= 5, saved


@FOLDED_TEAM
def test_a_teams_colour_lists_are_in_index_order(arch, solver):
    """A team that colours in its launch (team_stages.group_by_color: its members share the
    chunks of device.buckets' counting sort) lists each colour's constraints in index order,
    as the host's colouring does, on every backend: a poured pile, checked after each of 40
    steps that coloured (the pairs then stored in colour order, in the list's order:
    test_solver.assert_listed_in_index_order reads it back through pair_origin). The
    traces of test_a_found_step_that_colours_in_its_launch_is_its_own_launches do not see
    the order inside a colour: a colour's pairs share no moving body."""
    from .test_solver import assert_listed_in_index_order, coloring

    scene = _pile_colored_by_team(arch, solver, color_in_launch=True)
    checked = 0
    for _ in range(40):
        colorings = scene.colorings
        scene.step(DT)
        if scene.colorings > colorings:
            _, _, _, starts, listed = coloring(scene)
            assert_listed_in_index_order(scene, listed, starts)
            checked += 1
    assert checked > 20, checked


@FOLDED_TEAM
def test_a_report_built_in_the_teams_launch_is_its_own_launchs(arch, solver):
    """A team's launch that ran the substeps builds the reported list and the step's events
    at its end where the list was not refreshed (reporting.report_by_team,
    StepOptions.report_in_launch): every step's contacts (with their impulses) and begin
    and end events as _report_contacts' own launch gives them, with balls rolling into a
    pyramid (contacts begin and end), a set_state in between (with the soft step every body
    awake then: the list built in the step's launch; XPBD's pyramid has sleepers already),
    another of every body as it is but awake where pairs lie within the hold distance (the
    list built in the step's launch, holding no pair by the old one: a held pair is not
    listed), the pyramid falling asleep (resting pairs kept) and a set_state of the
    sleeping pyramid as it is (the resting pairs checked again at their poses on the host's
    path, and the list built there)."""
    from .helpers import launches_of, records_equal

    apart = ("reporting._report_contacts", "reporting._recheck_resting")
    after_set, asleep, held = {}, {}, {}

    def run(report_in_launch):
        specs, _ = scenes.pyramid_layout(10)
        scene = scenes.build_scene(
            specs,
            arch=arch,
            solver=solver,
            step_options={"report_in_launch": report_in_launch, "fold_on_cpu": True},
        )
        for i, x in enumerate((-5.5, -6.6, -7.75, -8.9)):
            scene.add_circle((x, 0.41 + i), 0.4, velocity=(0.6, 0.0))
        steps = []
        for step in range(150):
            if step in (60, 85, 140):
                state = scene.get_state()
                if step == 60:
                    state.velocity[0, -1] = (-0.5, 2.0)
                if step == 85:
                    state.sleeping[:] = False
                asleep[step] = int(state.sleeping.sum())
                scene.set_state(state)
            before = launches_of(*apart)
            scene.step(DT)
            if report_in_launch and step in (60, 85, 140):
                after_set[step] = launches_of(*apart) - before
            if step == 85:
                ctx = scene.step_context()
                touching = ctx.pool.manifolds.read({"touching": ctx.cache.n_pairs})["touching"]
                held[report_in_launch] = int((touching == HELD).sum())
            steps.append((scene.contacts(world=None), scene.contact_events()))
        return steps

    before = launches_of("reporting._report_contacts")
    in_launch = run(True)
    built_alone = launches_of("reporting._report_contacts") - before
    own_launch = run(False)
    if arch == "cpu":  # a CPU team ran the steps: their lists were built in its launches
        assert built_alone < 10, built_alone  # after set_state, and where a step had no team
        assert asleep[140] > 50, asleep
        # The check and the list apart where a sleeper was written, else neither.
        assert after_set == {step: 2 if asleep[step] else 0 for step in (60, 85, 140)}, asleep
        assert solver == "xpbd" or asleep[60] == 0, asleep
    began = 0
    for step, ((contacts, events), (contacts_own, events_own)) in enumerate(
        zip(in_launch, own_launch, strict=True)
    ):
        assert records_equal(contacts, contacts_own), step
        assert records_equal(events, events_own), step
        began += len(events.begin.world)
    assert began > 4  # the balls' and the thrown ball's contacts began
    assert held[True] == held[False] > 0, held  # (pairs the old list would have held)


@FOLDED_TEAM
def test_a_kept_launch_that_finds_its_pairs_is_its_own_launches(arch, solver):
    """On a team, a kept step's launch whose refit moved boxes (nothing asleep) saves last
    step's pairs, runs the broad phase and goes on as a found step's launch
    (StepOptions.broad_phase_in_launch, fused._find_pairs_by_team): the same states,
    contacts and events every step as with the broad phase in a launch of its own, where
    last step's colouring holds, where it does not and where the pairs are not last step's
    number (the launch stops after its broad phase): balls rolling into a pyramid, and a
    settling pile; with the broad phase's own launch far rarer."""
    from .helpers import assert_same_trace, launches_of, trace

    def rolling(options):
        return balls_rolling_into_a_pyramid(arch, solver, options)

    def pile(options):
        return scenes.random_pile(
            400, arch=arch, seed=2, solver=solver, enable_sleep=False, step_options=options
        )

    for build, steps in ((rolling, 90), (pile, 25)):
        got = {}
        for in_launch in (True, False):
            scene = build({"broad_phase_in_launch": in_launch, "fold_on_cpu": True})
            before = launches_of_broad_phase()
            got[in_launch] = trace(scene, steps)
            got[in_launch]["broad phases"] = launches_of_broad_phase() - before
            got[in_launch]["colorings"] = scene.colorings
        assert_same_trace(got[True], got[False])
        assert got[True]["colorings"] == got[False]["colorings"]
        if arch == "cpu":  # a CPU team ran the steps (a GPU's team: test_gpu_team)
            assert got[False]["broad phases"] > steps // 2, got[False]["broad phases"]
            assert got[True]["broad phases"] < got[False]["broad phases"] // 4, got
    assert launches_of("fused._substeps") > 0


def balls_rolling_into_a_pyramid(arch, solver, options):
    """A pyramid of base 10, sleep off, and four frictionless balls rolling into its side at
    0.4 m/s (they gain their first points in steps that keep their pairs)."""
    specs, _ = scenes.pyramid_layout(10)
    scene = scenes.build_scene(
        specs, arch=arch, solver=solver, enable_sleep=False, step_options=options
    )
    for i, x in enumerate((-5.5, -6.6, -7.75, -8.9)):
        scene.add_circle(
            (x, 0.41 + i), 0.4, velocity=(0.4, 0.0), static_friction=0.0, dynamic_friction=0.0
        )
    return scene


def launches_of_broad_phase() -> int:
    """Launches so far of the broad phase's own kernel (broad_phase._find_pairs)."""
    from fx2d_gpu.device import launching

    return launching.kernel_launches()["fx2d_gpu.physics.collision.broad_phase._find_pairs"]


@FOLDED_TEAM
def test_a_step_due_to_colour_afresh_runs_in_the_kept_launch(arch, solver):
    """Every FRESH_COLORING_STEPS steps a large world colours from scratch
    (coloring.keeps_colors). On a team whose launch colours (folded, color_in_launch), the
    kept step's launch takes that step too: where its refit moves boxes (a falling pile),
    its broad phase and colouring run in it, one launch, not the refit's, the broad phase's
    and the save's own launches before it; where nothing moved (a settled pyramid), it stops
    after begin_step's stages and the host colours (balls rolling into a pyramid). The same
    states, contacts and events every step as without the kept launch, over two such
    steps."""
    from fx2d_gpu.device import launching
    from fx2d_gpu.physics.solver.coloring import FRESH_COLORING_STEPS

    from .helpers import assert_same_trace, trace

    own_launches = (
        "fx2d_gpu.physics.collision.broad_phase._refit_fat_boxes",
        "fx2d_gpu.physics.solver.pairs._save_previous_pairs",
    )

    def launched_alone():
        counts = launching.kernel_launches()
        return sum(counts[kernel] for kernel in own_launches)

    def pile(options):
        return scenes.random_pile(
            300, arch=arch, seed=3, solver=solver, enable_sleep=False, step_options=options
        )

    def pyramid(options):
        # Balls rolling into it: its colouring stops being the one from scratch.
        return balls_rolling_into_a_pyramid(arch, solver, options)

    steps = 2 * FRESH_COLORING_STEPS + 2
    for build in (pile, pyramid):
        got, alone = {}, {}
        for kept in (True, False):
            before = launched_alone()
            got[kept] = trace(build({"kept_in_one_launch": kept, "fold_on_cpu": True}), steps)
            alone[kept] = launched_alone() - before
        assert_same_trace(got[True], got[False])
        if arch == "cpu" and build is pile:  # a CPU team ran the steps
            # Without the kept launch every step refits and saves in launches of their own;
            # with it only the first step does (it has no pairs to keep), not the two
            # steps due to colour afresh.
            assert alone[False] == len(own_launches) * steps, alone
            assert alone[True] == len(own_launches), alone


def test_a_colouring_of_no_constraints_is_checked_alike_whatever_the_pool_held():
    """A pile poured from above has no pair in its first steps: its colourings colour
    nothing, yet the next step's check asks which bodies they treated as moving
    (coloring.woke). Those flags are the colouring's own (coloring._flag_bodies), not
    what a scene resident before it left in the pool: the same scene colours alike after
    a scene of resting boxes (flags set) and after one of static ones (flags clear)."""
    caches = []
    for before in (pyramid(ARCH_CPU, base=20), _static_boxes()):
        for _ in range(3):
            before.step(DT)
        pile = scenes.build_scene(scenes.pile_layout(150), arch=ARCH_CPU)
        for _ in range(4):
            pile.step(DT)
        caches.append(dataclasses.asdict(pile.step_context().cache))
    assert caches[0]["n_pairs"] == 0 and caches[0]["colorings"] >= 1, caches[0]
    assert caches[0] == caches[1]


def _static_boxes():
    """A scene of 200 static boxes (each body slot: not moving, as a colouring flags it)."""
    specs = [scenes.BodySpec("box", (2.0 * i, 0.0), (1.0, 1.0), mass=0.0) for i in range(200)]
    specs.append(scenes.BodySpec("box", (0.0, 5.0), (1.0, 1.0)))
    return scenes.build_scene(specs, arch=ARCH_CPU)
