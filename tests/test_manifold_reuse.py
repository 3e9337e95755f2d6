"""Manifolds kept across steps (solver/contacts.reuse_manifold): a slow pair's manifold found
at the start of one step is carried to the bodies' poses in the next ones instead of being
found again, while its bodies have moved little since it was found. Checked against the
float64 reference narrow phase (tests/reference/geometry.py) at the poses each step started
from."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import scenes
from fx2d_gpu.physics.solver.contacts import LINEAR_SLOP, REUSE_DRIFT_SLOPS

from .reference.geometry import manifold, sat_ambiguity

DT = 1 / 60
#: A 1 m box's pair slop is LINEAR_SLOP: the drift a kept manifold may carry.
BUDGET = REUSE_DRIFT_SLOPS * LINEAR_SLOP
#: float32 poses of bodies within ~12 m of the origin are good to ~1e-6 m; the reference
#: is float64. A kept manifold's points are tracked to second order in the turns since it
#: was found (drift^2 / radius: ~4e-7 m at the budget), so the same bound holds for both.
DEPTH_TOLERANCE = 2e-5
NORMAL_TOLERANCE = 1e-4


def step_manifolds(scene) -> dict:
    """{(body_a, body_b): (point_count, normal (2,), points (2, 2), depths (2,), drift,
    found_margin)} of world 0's pairs after the last step, read from the device."""
    ctx = scene.step_context(DT)
    group = ctx.pool.manifolds
    n = ctx.cache.n_pairs
    fields = {
        name: getattr(group, name).to_numpy()[:n]
        for name in (
            "body_a",
            "body_b",
            "point_count",
            "normal",
            "point",
            "depth",
            "drift",
            "found_margin",
        )
    }
    result = {}
    for k in range(n):
        a, b = int(fields["body_a"][k]), int(fields["body_b"][k])
        if a < scene.n_bodies:  # world 0
            result[(a, b)] = (
                int(fields["point_count"][k]),
                fields["normal"][k],
                fields["point"][k],
                fields["depth"][k],
                float(fields["drift"][k]),
                float(fields["found_margin"][k]),
            )
    return result


def compare_with_reference(scene, state, found: dict) -> tuple[int, int]:
    """Assert each pair's points that overlap by more than the tolerance are where the
    float64 narrow phase finds them at `state`'s poses (world 0); returns (pairs kept from
    an earlier step, pairs compared)."""
    shapes = {}
    kept, compared = 0, 0
    for (a, b), (count, normal, points, depths, drift, found_margin) in found.items():
        for body in (a, b):
            if body not in shapes:
                shapes[body] = scene.body_shape(body)
        pose_a = (state.position[0, a], state.angle[0, a])
        pose_b = (state.position[0, b], state.angle[0, b])
        if sat_ambiguity(shapes[a], pose_a, shapes[b], pose_b) < 1e-4:
            continue
        reference = manifold(shapes[a], pose_a, shapes[b], pose_b)
        deep = [i for i in range(count) if depths[i] > DEPTH_TOLERANCE]
        if not deep:
            continue
        assert reference is not None, (a, b, depths[:count])
        ref_normal, ref_points = reference
        compared += 1
        kept += drift > 0.0
        assert found_margin > 0.0, "a slow pair's manifold is kept for reuse"
        assert np.abs(normal - ref_normal).max() < NORMAL_TOLERANCE, (a, b, normal, ref_normal)
        for i in deep:
            # The reference's point nearest this one: points may be listed in either order.
            distances = [np.linalg.norm(points[i] - p) for p, _ in ref_points]
            j = int(np.argmin(distances))
            # A kept point moves by the mean of the two bodies' material motions at it; the
            # point found afresh lies halfway between the surfaces at the incident body's
            # vertex (or at the end of the reference face): they part by at most half the
            # bodies' relative motion, which the drift bounds.
            assert distances[j] <= 0.5 * drift + DEPTH_TOLERANCE, (
                a,
                b,
                points[i],
                ref_points,
                drift,
            )
            assert abs(depths[i] - ref_points[j][1]) < DEPTH_TOLERANCE, (
                a,
                b,
                i,
                depths[i],
                ref_points[j][1],
                drift,
            )
    return kept, compared


@pytest.mark.parametrize("solver", ["xpbd", "soft_step"])
def test_a_settled_pyramids_kept_manifolds_match_the_reference(arch, solver):
    # Base 12: 78 boxes, a world of more than 40 bodies (the narrow phase before the
    # colouring). Settled, its boxes creep by micrometres a step: most manifolds are kept.
    specs, _ = scenes.pyramid_layout(12)
    scene = scenes.build_scene(specs, arch=arch, solver=solver, enable_sleep=False)
    for _ in range(150):
        scene.step(DT)
    kept, compared = 0, 0
    for _ in range(30):
        state = scene.get_state()
        scene.step(DT)
        k, c = compare_with_reference(scene, state, step_manifolds(scene))
        kept, compared = kept + k, compared + c
    assert compared > 30 * 30, compared
    print(f"{solver}: {kept} of {compared} compared manifolds kept from an earlier step")
    assert kept > 0.5 * compared, (kept, compared)


def two_boxes(arch, solver):
    """Box 1 (1 m) resting 0.5 mm deep on static box 0, no gravity: a world of two bodies
    (small worlds find manifolds in their substeps' launch)."""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, solver=solver, enable_sleep=False)
    scene.add_box((0.0, -0.5), (4.0, 1.0), mass=0.0)
    scene.add_box((0.3, 0.4995), (1.0, 1.0), mass=1.0)
    return scene


def moved(scene, shift, turn, velocity=(0.0, 0.0)):
    """Box 1 moved by `shift` (m) and turned by `turn` (rad) at rest (or at `velocity`);
    returns the state it starts the next step from."""
    state = scene.get_state()
    state.position[0, 1] += shift
    state.angle[0, 1] += turn
    state.velocity[0, 1] = velocity
    state.angular_velocity[0, 1] = 0.0
    scene.set_state(state)
    return scene.get_state()


@pytest.mark.parametrize("solver", ["xpbd", "soft_step"])
def test_a_kept_manifold_follows_the_bodies_and_is_found_again_past_its_budget(arch, solver):
    scene = two_boxes(arch, solver)
    state = scene.get_state()
    scene.step(DT)
    first = step_manifolds(scene)[(0, 1)]
    assert first[0] == 2 and first[4] == 0.0 and first[5] > 0.0  # found afresh, keepable
    assert compare_with_reference(scene, state, {(0, 1): first}) == (0, 1)

    # Slid 0.25 mm, pushed 0.1 mm deeper and turned 0.1 mrad: within the budget, the
    # manifold is kept and its points and depths follow (left where they were, the points
    # would be 0.25 mm and the depths 0.1 mm off).
    found_at = state
    state = moved(scene, np.array([0.5 * BUDGET, -0.2 * BUDGET]), 1e-4)
    scene.step(DT)
    second = step_manifolds(scene)[(0, 1)]
    # Kept, its drift counted: box 1's shift since, and its turn times its bounding radius.
    drift = np.linalg.norm(state.position[0, 1] - found_at.position[0, 1]) + abs(
        state.angle[0, 1] - found_at.angle[0, 1]
    ) * np.sqrt(0.5)
    assert 0.1 * BUDGET < drift < BUDGET
    assert second[4] == pytest.approx(drift, abs=1e-6)
    assert second[5] == first[5]  # with the margin it was found with
    assert compare_with_reference(scene, state, {(0, 1): second}) == (1, 1)

    # Moved past what is left of the budget: found afresh.
    state = moved(scene, np.array([0.0, -2.0 * BUDGET]), 0.0)
    scene.step(DT)
    third = step_manifolds(scene)[(0, 1)]
    assert third[4] == 0.0, third[4]
    assert compare_with_reference(scene, state, {(0, 1): third}) == (0, 1)

    # Not moved, but closing at 0.3 m/s: the step's margin outgrows the one the manifold
    # was found with, so it is found afresh.
    state = moved(scene, np.zeros(2), 0.0, velocity=(0.0, -0.3))
    scene.step(DT)
    fourth = step_manifolds(scene)[(0, 1)]
    assert fourth[4] == 0.0, fourth[4]
    assert fourth[5] > third[5] + 0.2 * DT, (fourth[5], third[5])  # with the wider margin
    assert compare_with_reference(scene, state, {(0, 1): fourth}) == (0, 1)


def test_a_format_6_state_file_loads_with_its_manifolds_found_afresh(tmp_path):
    """Files from before manifolds were kept across steps (format 6) lack the fields that
    keep them: they load with found_margin 0, and the next step finds every manifold
    afresh; a format 7 file restores them, and the step after keeps them as the saving
    scene's does, bit for bit."""
    import json
    import zipfile

    specs, _ = scenes.pyramid_layout(6)
    scene = scenes.build_scene(specs, arch="cpu", solver="soft_step", enable_sleep=False)
    for _ in range(120):
        scene.step(DT)
    scene.save_state(tmp_path / "v7.npz")
    scene.step(DT)
    after = step_manifolds(scene)
    assert sum(m[4] > 0.0 for m in after.values()) > len(after) // 2  # mostly kept
    with (
        zipfile.ZipFile(tmp_path / "v7.npz") as new,
        zipfile.ZipFile(tmp_path / "v6.npz", "w") as old,
    ):
        for info in new.infolist():
            if info.filename.split("/")[-1] in ("found_pose.npy", "found_margin.npy", "drift.npy"):
                continue
            data = new.read(info)
            if info.filename == "meta.npy":
                meta = json.loads(str(np.load(new.open(info))[()]))
                meta["format_version"] = 6
                np.save(tmp_path / "meta.npy", np.array(json.dumps(meta)))
                data = (tmp_path / "meta.npy").read_bytes()
            old.writestr(info.filename, data)

    scene.load_state(tmp_path / "v7.npz")
    scene.step(DT)
    assert step_manifolds(scene).keys() == after.keys()
    for pair, m in step_manifolds(scene).items():
        assert m[4] == after[pair][4] and (m[3] == after[pair][3]).all(), pair

    scene.load_state(tmp_path / "v6.npz")
    ctx = scene.step_context(DT)
    assert (ctx.pool.manifolds.found_margin.to_numpy()[: ctx.cache.n_pairs] == 0.0).all()
    scene.step(DT)
    assert all(m[4] == 0.0 for m in step_manifolds(scene).values())  # all found afresh


@pytest.mark.parametrize("solver", ["xpbd", "soft_step"])
def test_frictionless_circles_poured_in_a_box_never_turn_and_fall_asleep(arch, solver):
    """A frictionless circle's contact forces all pass through its centre, so it never
    turns. Kept manifolds would carry a circle's contact point with its turn, off the line
    through its centre: the normal force then turned it (80 circles spun up to 0.2 rad/s
    and never slept), so circles' manifolds are found every step (contacts.keeps_manifold).
    A circle's lever arm is put on that line (contacts.prepare_manifold): rounding of the
    point and the centre left it off by the same amount every substep, and these circles
    turned up to 1.1e-3 rad/s (seeds 1-6: up to 2.4e-3); on the line, 6e-6 to 1.3e-5."""
    scene = fx.Scene(arch=arch, solver=solver)
    scene.add_box((0.0, -0.5), (6.0, 1.0), mass=0.0)
    for side in (-1.0, 1.0):
        scene.add_box((side * 3.5, 5.0), (1.0, 12.0), mass=0.0)
    rng = np.random.default_rng(1)
    for i in range(80):
        scene.add_circle(
            (float(rng.uniform(-2.5, 2.5)), 1.0 + 0.05 * i),
            float(rng.uniform(0.15, 0.3)),
            static_friction=0.0,
            dynamic_friction=0.0,
        )
    for step in range(480):
        scene.step(DT)
        if step % 20 == 19:
            assert np.abs(scene.get_state().angular_velocity).max() < 1e-4, step
    assert scene.get_state().sleeping[0, 3:].all()  # the circles (static bodies never sleep)
