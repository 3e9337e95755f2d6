"""Spatial queries (spatial_queries.py; collision/ray_casts.py and overlaps.py): Fx2D's
scenarios (tests/test_queries.cpp), a brute-force float64 reference
(tests/reference/queries.py) on random mixed scenes, the narrow phase's verdicts, batches,
and that a query never disturbs the simulation."""

import math

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import shapes
from fx2d_gpu.enums import SHAPE_CHAIN
from fx2d_gpu.physics.collision import ray_casts

from .reference import geometry as ref_geometry
from .reference import queries as ref


def make_scene(arch, **kwargs):
    return fx.Scene(gravity=(0.0, 0.0), arch=arch, **kwargs)


def hit_body(scene, origin, direction, max_distance):
    hits = scene.ray_cast(origin, direction, max_distance)
    return int(hits.body[0, 0]), hits


# ------------------------------------------------------------------ Fx2D's scenarios
def test_ray_through_empty_space_misses(arch):
    scene = make_scene(arch)
    scene.add_box((10.0, 20.0), (1.0, 1.0), name="wall")
    body, hits = hit_body(scene, (0.0, 5.0), (1.0, 0.0), 30.0)
    assert body == -1 and not hits.hit[0, 0]
    assert hits.distance[0, 0] == math.inf
    assert np.isnan(hits.point[0, 0]).all() and np.isnan(hits.normal[0, 0]).all()


def test_ray_hits_box_face(arch):
    scene = make_scene(arch)
    wall = scene.add_box((10.0, 5.0), (2.0, 4.0), name="wall")  # spans x 9..11
    body, hits = hit_body(scene, (0.0, 5.0), (1.0, 0.0), 30.0)
    assert body == wall
    assert hits.distance[0, 0] == pytest.approx(9.0, abs=1e-5)
    np.testing.assert_allclose(hits.point[0, 0], (9.0, 5.0), atol=1e-5)
    assert hits.normal[0, 0, 0] < -0.9


def test_ray_stops_at_max_distance(arch):
    scene = make_scene(arch)
    scene.add_box((20.0, 5.0), (2.0, 4.0))  # near face at x = 19
    assert hit_body(scene, (0.0, 5.0), (1.0, 0.0), 10.0)[0] == -1
    assert hit_body(scene, (0.0, 5.0), (1.0, 0.0), 25.0)[0] == 0
    # Per-ray limits, and a limit far beyond the world (clipped to its bounds).
    hits = scene.ray_cast((0.0, 5.0), (1.0, 0.0), [[10.0, 25.0, 1e30]])
    assert hits.body.tolist() == [[-1, 0, 0]]


def test_ray_hits_circle_rim(arch):
    scene = make_scene(arch)
    scene.add_circle((10.0, 5.0), 1.5, name="ball")
    body, hits = hit_body(scene, (0.0, 5.0), (1.0, 0.0), 30.0)
    assert body == 0
    assert hits.distance[0, 0] == pytest.approx(8.5, abs=1e-5)
    assert hits.normal[0, 0, 0] < -0.9


def test_ray_direction_need_not_be_unit_length(arch):
    scene = make_scene(arch)
    scene.add_box((10.0, 5.0), (2.0, 4.0))
    hits = scene.ray_cast((0.0, 5.0), [(1.0, 0.0), (7.3, 0.0)], 30.0)
    assert hits.body.tolist() == [[0, 0]]
    assert hits.distance[0, 1] == pytest.approx(hits.distance[0, 0], abs=1e-6)


def test_ray_cast_all_is_sorted_by_distance(arch):
    scene = make_scene(arch)
    far = scene.add_box((20.0, 5.0), (1.0, 4.0))
    near = scene.add_box((8.0, 5.0), (1.0, 4.0))
    middle = scene.add_box((14.0, 5.0), (1.0, 4.0))
    scene.add_box((14.0, 30.0), (1.0, 4.0))  # off the lane
    hits = scene.ray_cast_all((0.0, 5.0), (1.0, 0.0), 40.0)
    assert hits.body.tolist() == [near, middle, far]
    assert np.all(np.diff(hits.distance) > 0)
    np.testing.assert_allclose(hits.distance, [7.5, 13.5, 19.5], atol=1e-5)
    np.testing.assert_allclose(hits.point, [[7.5, 5.0], [13.5, 5.0], [19.5, 5.0]], atol=1e-5)
    assert hits.bodies(0, 0).tolist() == [near, middle, far]


def test_ray_from_inside_reports_that_body(arch):
    scene = make_scene(arch)
    room = scene.add_box((10.0, 10.0), (6.0, 6.0))
    scene.add_capsule((30.0, 10.0), 2.0, 0.5)
    hits = scene.ray_cast([(10.0, 10.0), (30.9, 10.3)], (1.0, 0.0), 20.0)
    assert hits.body.tolist() == [[room, 1]]
    assert hits.distance[0].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(hits.point[0], [(10.0, 10.0), (30.9, 10.3)])
    np.testing.assert_allclose(hits.normal[0], [(-1.0, 0.0), (-1.0, 0.0)])


def test_queries_skip_disabled_and_shape_less_bodies(arch):
    scene = make_scene(arch)
    scene.add_box((10.0, 5.0), (2.0, 4.0), enabled=False)
    scene.add_shape((14.0, 5.0), shapes.box((2.0, 4.0)), collides=False)
    assert hit_body(scene, (0.0, 5.0), (1.0, 0.0), 30.0)[0] == -1
    assert len(scene.ray_cast_all((0.0, 5.0), (1.0, 0.0), 30.0)) == 0
    assert len(scene.overlap_shape(shapes.circle(2.0), (10.0, 5.0))) == 0
    assert len(scene.query_point([(10.0, 5.0), (14.0, 5.0)])) == 0
    # Enabled again, the first one is found.
    scene.set_enabled(0, True)
    assert hit_body(scene, (0.0, 5.0), (1.0, 0.0), 30.0)[0] == 0


def test_overlap_circle_selects_by_geometry(arch):
    scene = make_scene(arch)
    inside = scene.add_box((10.0, 10.0), (1.0, 1.0))
    touching = scene.add_box((12.5, 10.0), (1.0, 1.0))  # spans x 12..13: the circle reaches 12
    scene.add_box((20.0, 10.0), (1.0, 1.0))
    scene.add_box((11.5, 11.5), (1.0, 1.0))  # its corner (11, 11) is 1.41 from the centre
    found = scene.overlap_shape(shapes.circle(2.0), (10.0, 10.0))
    assert found.bodies().tolist() == [inside, touching, 3]
    # A corner just out of reach of a smaller circle.
    assert scene.overlap_shape(shapes.circle(1.4), (10.0, 10.0)).bodies().tolist() == [inside]


def test_overlap_box_selects_by_geometry(arch):
    scene = make_scene(arch)
    scene.add_box((10.0, 10.0), (1.0, 1.0), name="in")
    scene.add_box((18.0, 10.0), (1.0, 1.0), name="out")
    assert scene.query_aabb((8.0, 8.0), (12.0, 12.0)).bodies().tolist() == [0]
    assert scene.overlap_shape(shapes.box((4.0, 4.0)), (10.0, 10.0)).bodies().tolist() == [0]
    # A box rotated 45 degrees reaches 2.83 m: still not the body at 17.5.
    assert scene.overlap_shape(
        shapes.box((4.0, 4.0)), (10.0, 10.0), math.pi / 4
    ).bodies().tolist() == [0]


def test_point_query_picks_the_body_under_it(arch):
    scene = make_scene(arch)
    scene.add_box((10.0, 10.0), (2.0, 2.0), name="target")
    found = scene.query_point([(10.4, 9.6), (14.0, 10.0), (11.4, 10.0), (11.0, 10.0)])
    assert [found.bodies(0, q).tolist() for q in range(4)] == [[0], [], [], [0]]
    assert found.query.tolist() == [0, 3] and found.world.tolist() == [0, 0]


def test_queries_respect_rotation(arch):
    scene = make_scene(arch)
    scene.add_box((10.0, 10.0), (4.0, 0.4), angle=1.5708)  # stood on end
    found = scene.query_point([(10.0, 11.5), (11.5, 10.0)])
    assert found.bodies(0, 0).tolist() == [0] and found.bodies(0, 1).tolist() == []
    assert hit_body(scene, (10.0, 0.0), (0.0, 1.0), 30.0)[1].distance[0, 0] == pytest.approx(
        8.0, abs=1e-4
    )
    assert hit_body(scene, (0.0, 11.5), (1.0, 0.0), 30.0)[1].distance[0, 0] == pytest.approx(
        9.8, abs=1e-4
    )


def test_overlap_agrees_with_contacts_after_a_step(arch):
    scene = make_scene(arch)
    a = scene.add_box((10.0, 10.0), (1.0, 1.0), external_forces_enabled=False)
    b = scene.add_box((10.8, 10.0), (1.0, 1.0))  # overlapping a
    scene.step(1 / 60)
    assert (a, b) in scene.contacts().pairs()
    assert scene.query_aabb((8.4, 8.0), (12.4, 12.0)).bodies().tolist() == [a, b]
    assert len(scene.query_aabb((24.0, 24.0), (26.0, 26.0))) == 0
    # The overlap of the two bodies is seen by a point query inside both.
    state = scene.get_state()
    middle = 0.5 * (state.position[0, a] + state.position[0, b])
    assert scene.query_point(middle).bodies().tolist() == [a, b]


def test_contains_point_for_every_shape_family(arch):
    scene = make_scene(arch)
    circle = scene.add_circle((5.0, 5.0), 1.0)
    box = scene.add_box((5.0, 15.0), (2.0, 4.0))  # spans 4..6 by 13..17
    capsule = scene.add_capsule((15.0, 5.0), 2.0, 0.5)
    plank = scene.add_box((15.0, 15.0), (4.0, 0.4), angle=1.5708)
    points = {
        circle: ([(5.0, 5.0), (5.9, 5.0)], [(6.1, 5.0)]),
        box: ([(5.9, 16.9)], [(6.1, 15.0)]),
        capsule: ([(15.0, 5.4), (16.4, 5.0)], [(15.0, 5.6), (16.6, 5.0)]),
        plank: ([(15.0, 16.5)], [(16.5, 15.0)]),
    }
    for body, (inside, outside) in points.items():
        found = scene.query_point(inside + outside)
        for q in range(len(inside)):
            assert found.bodies(0, q).tolist() == [body], (body, q)
        for q in range(len(inside), len(inside) + len(outside)):
            assert found.bodies(0, q).tolist() == [], (body, q)


# ------------------------------------------------------------------ shapes and flags
def test_edges_are_two_sided_and_chains_one_sided(arch):
    scene = make_scene(arch)
    edge = scene.add_edge((0.0, 0.0), (-5.0, 2.0), (5.0, 2.0))
    chain = scene.add_chain((0.0, 0.0), [(-5.0, 6.0), (0.0, 6.0), (5.0, 6.0)])  # front: up
    hits = scene.ray_cast(
        [(1.0, 0.0), (1.0, 4.0), (1.0, 4.0), (1.0, 9.0)],
        [(0.0, 1.0), (0.0, -1.0), (0.0, 1.0), (0.0, -1.0)],
        20.0,
    )
    assert hits.body.tolist() == [[edge, edge, -1, chain + 1]]
    np.testing.assert_allclose(hits.distance[0], [2.0, 2.0, np.inf, 3.0], atol=1e-5)
    np.testing.assert_allclose(hits.normal[0, [0, 1, 3]], [(0, -1), (0, 1), (0, 1)], atol=1e-6)
    assert scene.query_point((2.5, 2.0)).bodies().tolist() == [edge]


def test_rounded_box_is_hit_on_its_rounded_corner(arch):
    scene = make_scene(arch)
    scene.add_box((0.0, 0.0), (2.0, 2.0), radius=0.5)  # corner arcs of 0.5 around (+-1, +-1)
    direction = np.array([-1.0, -1.0]) / math.sqrt(2.0)
    hits = scene.ray_cast((5.0, 5.0), direction, 20.0)
    expected = math.hypot(4.0, 4.0) - 0.5
    assert hits.distance[0, 0] == pytest.approx(expected, abs=1e-5)
    np.testing.assert_allclose(hits.normal[0, 0], -direction, atol=1e-5)
    # Along a face, the face pushed out by the radius.
    assert scene.ray_cast((0.3, 5.0), (0.0, -1.0), 20.0).distance[0, 0] == pytest.approx(
        3.5, abs=1e-5
    )


def test_sensors_only_when_asked(arch):
    scene = make_scene(arch)
    scene.add_box((10.0, 5.0), (2.0, 4.0), sensor=True)
    scene.add_box((20.0, 5.0), (2.0, 4.0))
    assert scene.ray_cast((0.0, 5.0), (1.0, 0.0), 30.0).body[0, 0] == 1
    assert scene.ray_cast((0.0, 5.0), (1.0, 0.0), 30.0, sensors=True).body[0, 0] == 0
    assert scene.query_point((10.0, 5.0)).bodies().tolist() == []
    assert scene.query_point((10.0, 5.0), sensors=True).bodies().tolist() == [0]


def test_ties_go_to_the_lowest_body(arch):
    scene = make_scene(arch)
    scene.add_box((10.0, 6.0), (2.0, 2.0))
    scene.add_box((10.0, 4.0), (2.0, 2.0))  # both faces at x = 9; the ray runs between them
    assert scene.ray_cast((0.0, 5.0), (1.0, 0.0), 30.0).body[0, 0] == 0


def test_bad_input_is_refused_naming_the_argument(arch):
    scene = make_scene(arch, n_worlds=2)
    scene.add_box((10.0, 5.0), (2.0, 4.0))
    with pytest.raises(ValueError, match="directions"):
        scene.ray_cast((0.0, 0.0), (0.0, 0.0), 10.0)
    with pytest.raises(ValueError, match="max_distance"):
        scene.ray_cast((0.0, 0.0), (1.0, 0.0), 0.0)
    with pytest.raises(ValueError, match="max_distance"):
        scene.ray_cast((0.0, 0.0), (1.0, 0.0), math.inf)
    with pytest.raises(ValueError, match="origins"):
        scene.ray_cast((0.0, math.nan), (1.0, 0.0), 1.0)
    with pytest.raises(ValueError, match="origins"):
        scene.ray_cast(np.zeros((3, 4, 2)), (1.0, 0.0), 1.0)  # 3 worlds of 2
    with pytest.raises(ValueError, match="origins and directions"):
        scene.ray_cast(np.zeros((3, 2)), np.ones((4, 2)), 1.0)
    with pytest.raises(TypeError, match="origins"):
        scene.ray_cast("here", (1.0, 0.0), 1.0)
    with pytest.raises(TypeError, match="sensors"):
        scene.ray_cast((0.0, 0.0), (1.0, 0.0), 1.0, sensors=1)
    with pytest.raises(ValueError, match="points"):
        scene.query_point((1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match="lower"):
        scene.query_aabb((1.0, 1.0), (0.0, 2.0))
    with pytest.raises(TypeError, match="shape"):
        scene.overlap_shape("circle", (0.0, 0.0))
    with pytest.raises(ValueError, match="angle"):
        scene.overlap_shape(shapes.circle(1.0), (0.0, 0.0), math.nan)
    # Nothing was changed, and an empty batch is fine.
    assert len(scene.query_point(np.zeros((0, 2)))) == 0
    assert scene.ray_cast(np.zeros((0, 2)), (1.0, 0.0), 1.0).body.shape == (2, 0)


# ------------------------------------------------------------------ against the reference
def mixed_scene(arch, n_worlds, seed, n_movable=24, extent=9.0):
    """Every shape kind, placed at random in each world (different states per world)."""
    rng = np.random.default_rng(seed)
    scene = make_scene(arch, n_worlds=n_worlds)
    scene.add_edge((0.0, 0.0), (-3.0, -2.0), (3.0, 1.0))
    scene.add_chain((0.0, 0.0), [(-4.0, -1.0), (-1.0, -2.0), (2.0, -1.5), (4.0, 0.5)])
    makers = (
        lambda: scene.add_circle((0, 0), rng.uniform(0.1, 1.2)),
        lambda: scene.add_box((0, 0), rng.uniform(0.1, 2.0, 2)),
        lambda: scene.add_polygon(
            (0, 0), [[0, 0], [rng.uniform(0.3, 1.5), 0], [0.2, rng.uniform(0.3, 1.5)]]
        ),
        lambda: scene.add_capsule((0, 0), rng.uniform(0.2, 2.0), rng.uniform(0.05, 0.5)),
        lambda: scene.add_box((0, 0), rng.uniform(0.1, 1.5, 2), radius=rng.uniform(0.05, 0.4)),
        lambda: scene.add_polygon((0, 0), [[0, 0], [1, 0], [1.2, 0.6], [0.4, 1.0]], radius=0.1),
    )
    for i in range(n_movable):
        makers[i % len(makers)]()
    scene.add_edge((0.0, 0.0), (-0.5, 0.0), (0.5, 0.2), mass=0.0)  # a loose small edge
    state = scene.get_state()
    n = scene.n_bodies
    state.position[:] = rng.uniform(-extent, extent, (n_worlds, n, 2))
    state.angle[:] = rng.uniform(-math.pi, math.pi, (n_worlds, n))
    scene.set_state(state)
    return scene


def reference_world(scene, world):
    state = scene.get_state()
    shapes_ = [scene.body_shape(b) for b in range(scene.n_bodies)]
    return shapes_, (state.position[world], state.angle[world])


def test_rays_match_the_reference_on_random_mixed_scenes(arch):
    n_worlds, n_rays = 3, 60
    scene = mixed_scene(arch, n_worlds, seed=5)
    rng = np.random.default_rng(6)
    origins = rng.uniform(-11.0, 11.0, (n_worlds, n_rays, 2))
    angles = rng.uniform(0, 2 * np.pi, (n_worlds, n_rays))
    directions = np.stack([np.cos(angles), np.sin(angles)], -1) * rng.uniform(
        0.2, 5.0, (n_worlds, n_rays, 1)
    )
    limits = rng.uniform(3.0, 30.0, (n_worlds, n_rays))
    hits = scene.ray_cast(origins, directions, limits)
    every = scene.ray_cast_all(origins, directions, limits)
    checked = hit_count = 0
    for w in range(n_worlds):
        shapes_, poses = reference_world(scene, w)
        for r in range(n_rays):
            expected, unsure = ref.ray_cast(
                shapes_, poses, set(), origins[w, r], directions[w, r], limits[w, r]
            )
            mine = every.bodies(w, r).tolist()
            sure = [b for _, b in expected if b not in unsure]
            assert set(mine) - unsure == set(sure), (w, r, mine, expected, unsure)
            if unsure:
                continue
            checked += 1
            if not expected:
                assert hits.body[w, r] == -1, (w, r)
                continue
            tie = len(expected) > 1 and expected[1][0] - expected[0][0] < 1e-4
            if not tie:
                hit_count += 1
                assert hits.body[w, r] == expected[0][1], (w, r, hits.body[w, r], expected)
                assert hits.distance[w, r] == pytest.approx(expected[0][0], abs=1e-5)
                assert mine == sure, (w, r)
                rows = (every.world == w) & (every.ray == r)
                np.testing.assert_allclose(
                    every.distance[rows], [t for t, _ in expected], atol=1e-5
                )
            # The normal is unit and faces back along the ray.
            normal = hits.normal[w, r]
            assert abs(np.linalg.norm(normal) - 1.0) < 1e-4
            assert normal @ directions[w, r] <= 1e-6
    assert checked > 0.8 * n_worlds * n_rays and hit_count > 40
    order = np.lexsort((every.body, every.distance, every.ray, every.world))
    assert np.array_equal(order, np.arange(len(every)))


def test_overlaps_match_the_reference_on_random_mixed_scenes(arch):
    n_worlds, n_queries = 3, 40
    scene = mixed_scene(arch, n_worlds, seed=7)
    rng = np.random.default_rng(8)
    points = rng.uniform(-10.0, 10.0, (n_worlds, n_queries, 2))
    lower = rng.uniform(-10.0, 9.0, (n_worlds, n_queries, 2))
    upper = lower + rng.uniform(0.0, 4.0, (n_worlds, n_queries, 2))
    angles = rng.uniform(-math.pi, math.pi, (n_worlds, n_queries))
    probes = [
        shapes.circle(0.7),
        shapes.capsule(1.5, 0.3),
        shapes.box((1.0, 2.5), radius=0.2),
        shapes.polygon([[0, 0], [2, 0], [0.5, 1.5]])[0],
        shapes.edge((-1, 0), (1, 0.5)),
    ]
    answers = [("point", scene.query_point(points)), ("aabb", scene.query_aabb(lower, upper))]
    answers += [(probe, scene.overlap_shape(probe, points, angles)) for probe in probes]
    checked = found_total = 0
    for w in range(n_worlds):
        shapes_, poses = reference_world(scene, w)
        for q in range(n_queries):
            for kind, answer in answers:
                if kind == "point":
                    core, skin = points[w, q][None, :], 0.0
                elif kind == "aabb":
                    lo, hi = lower[w, q], upper[w, q]
                    core, skin = np.array([lo, (hi[0], lo[1]), hi, (lo[0], hi[1])]), 0.0
                else:
                    core, skin = ref_geometry.core(kind, points[w, q], angles[w, q])
                expected, unsure = ref.query_overlaps(shapes_, poses, set(), core, skin)
                got = set(answer.bodies(w, q).tolist())
                assert (got ^ expected) <= unsure, (kind, w, q, got, expected, unsure)
                checked += 1
                found_total += len(expected)
    assert found_total > 100, found_total


def test_overlap_agrees_with_the_narrow_phase(arch):
    """Where the simulation's narrow phase (margin 0) finds a contact, overlap_shape with
    the body's own shape and pose finds the other body, and nowhere else, except within
    1e-5 m of touching (chain links are one-sided in collisions: left out)."""
    n_worlds = 4
    scene = mixed_scene(arch, n_worlds, seed=9, n_movable=30, extent=5.0)
    contacts = scene.contacts(None)  # before a step: the narrow phase at these poses
    touching = {
        (w, a, b)
        for w, a, b, n in zip(
            contacts.world, contacts.body_a, contacts.body_b, contacts.point_count, strict=True
        )
        if n > 0
    }
    assert len(touching) > 50  # 105 pairs touch here
    state = scene.get_state()
    n = scene.n_bodies
    movable = [b for b in range(n) if scene.body_mass(b) > 0]
    kinds = [scene.body_shape(b).kind for b in range(n)]
    for body in movable:
        shape = scene.body_shape(body)
        found = scene.overlap_shape(
            shape, state.position[:, body][:, None, :], state.angle[:, body][:, None]
        )
        for w in range(n_worlds):
            va, ra = ref_geometry.core(shape, state.position[w, body], state.angle[w, body])
            for other in range(n):
                if other == body or kinds[other] == SHAPE_CHAIN:
                    continue
                vb, rb = ref_geometry.core(
                    scene.body_shape(other), state.position[w, other], state.angle[w, other]
                )
                if ref.overlap(va, ra, vb, rb)[1]:
                    continue  # within 1e-5 m of touching
                pair = (w, min(body, other), max(body, other))
                queried = other in found.bodies(w, 0).tolist()
                assert queried == (pair in touching), (pair, queried)


# ------------------------------------------------------------------ batches, side effects
def test_a_world_of_a_batch_answers_as_the_scene_alone(arch):
    n_worlds = 64
    batch = mixed_scene(arch, n_worlds, seed=11, n_movable=6)
    rng = np.random.default_rng(12)
    origins = rng.uniform(-10, 10, (n_worlds, 8, 2))
    directions = rng.normal(size=(n_worlds, 8, 2))
    points = rng.uniform(-10, 10, (n_worlds, 8, 2))
    rays = batch.ray_cast(origins, directions, 25.0)
    every = batch.ray_cast_all(origins, directions, 25.0)
    inside = batch.query_point(points)
    state = batch.get_state()
    for w in (0, 37, 63):
        alone = mixed_scene(arch, 1, seed=11, n_movable=6)
        one = alone.get_state()
        for name in ("position", "angle", "velocity", "angular_velocity", "sleeping"):
            getattr(one, name)[0] = getattr(state, name)[w]
        alone.set_state(one)
        single = alone.ray_cast(origins[w], directions[w], 25.0)
        np.testing.assert_array_equal(single.body[0], rays.body[w])
        np.testing.assert_array_equal(single.distance[0], rays.distance[w])
        all_single = alone.ray_cast_all(origins[w], directions[w], 25.0)
        mine = every.world == w
        np.testing.assert_array_equal(all_single.body, every.body[mine])
        np.testing.assert_array_equal(all_single.distance, every.distance[mine])
        points_single = alone.query_point(points[w])
        np.testing.assert_array_equal(points_single.body, inside.body[inside.world == w])
        np.testing.assert_array_equal(points_single.query, inside.query[inside.world == w])


def test_queries_do_not_disturb_the_simulation(arch):
    scene = fx.Scene(arch=arch, n_worlds=2)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0)
    for i in range(6):
        scene.add_box((0.3 * i, 0.5 + 1.1 * i), (1.0, 1.0))
        scene.add_circle((-3.0 + 0.2 * i, 1.0 + i), 0.3)
    for _ in range(5):
        scene.step(1 / 60)
    start = scene.snapshot()
    for _ in range(5):
        scene.step(1 / 60)
    quiet, quiet_contacts = scene.get_state(), scene.contacts(None)
    scene.restore(start)
    for _ in range(5):
        scene.ray_cast((-8.0, 0.5), (1.0, 0.1), 50.0)
        scene.ray_cast_all((-8.0, 0.5), (1.0, 0.1), 50.0)
        scene.query_point([(0.0, 1.0), (5.0, 5.0)])
        scene.query_aabb((-5.0, -1.0), (5.0, 3.0))
        scene.overlap_shape(shapes.circle(2.0), (0.0, 2.0))
        scene.step(1 / 60)
    busy, busy_contacts = scene.get_state(), scene.contacts(None)
    for name in ("position", "angle", "velocity", "angular_velocity", "sleeping"):
        np.testing.assert_array_equal(getattr(busy, name), getattr(quiet, name), err_msg=name)
    np.testing.assert_array_equal(busy_contacts.normal_impulse, quiet_contacts.normal_impulse)


class _Boxes:
    """A stand-in for a pool's grid whose read gives each world's box (float32)."""

    def __init__(self, lower, upper):
        self.grid = self
        self._box = {"world_lower": lower.reshape(-1), "world_upper": upper.reshape(-1)}

    def read(self, names):
        return {name: self._box[name] for name in names}


def _approach_ray_by_ray(lower, upper, origins, directions, limits):
    """ray_casts.approach's rule, one ray at a time in plain Python floats."""
    out = np.zeros(len(limits))
    n_rays = len(limits) // len(lower)
    for q in range(len(limits)):
        low, high = lower[q // n_rays].astype(np.float64), upper[q // n_rays].astype(np.float64)
        filled = np.isfinite(low).all() and np.isfinite(high).all()
        if not filled:
            low, high = np.zeros(2), np.zeros(2)
        pad = 1.0 + 1e-6 * max(0.0, *np.abs(low), *np.abs(high))
        low, high = low - pad, high + pad
        near, far = [], []
        for axis in range(2):
            o, d = origins[q, axis], directions[q, axis]
            if d != 0.0:
                ta, tb = (low[axis] - o) / d, (high[axis] - o) / d
                near.append(min(ta, tb))
                far.append(max(ta, tb))
            else:
                inside = low[axis] <= o <= high[axis]
                near.append(-np.inf if inside else np.inf)
                far.append(np.inf if inside else -np.inf)
        t_in, t_out = max(near), min(far)
        if filled and 0.0 < t_in <= t_out and t_in < limits[q]:
            out[q] = t_in
    return out


def test_rays_approach_their_worlds_boxes_as_ray_by_ray():
    """ray_casts.approach (how far the host moves each ray before the device casts it),
    vectorised over worlds and axes, against the rule ray by ray: rays from outside and
    inside the boxes, along an axis and not, empty worlds; and all rays inside (its early
    answer)."""
    rng = np.random.default_rng(7)
    n_worlds, n_rays = 40, 6
    lower = rng.uniform(-20.0, 0.0, (n_worlds, 2)).astype(np.float32)
    upper = lower + rng.uniform(0.5, 20.0, (n_worlds, 2)).astype(np.float32)
    lower[::9], upper[::9] = np.inf, -np.inf  # empty worlds
    q = n_worlds * n_rays
    directions = rng.normal(size=(q, 2))
    directions[::4, 0] = 0.0  # along y
    directions[2::4, 1] = 0.0  # along x
    directions /= np.linalg.norm(directions, axis=1)[:, None]
    limits = rng.uniform(0.0, 60.0, q)
    pool = _Boxes(lower, upper)
    from_anywhere = rng.uniform(-40.0, 40.0, (q, 2))
    moved = ray_casts.approach(pool, n_worlds, from_anywhere, directions, limits)
    expected = _approach_ray_by_ray(lower, upper, from_anywhere, directions, limits)
    np.testing.assert_array_equal(moved, expected)
    assert 0 < np.count_nonzero(moved) < q  # both cases met
    filled = np.isfinite(lower).all(1)
    centre = np.zeros((n_worlds, 2))  # (an empty world's box: about 0, after its pad)
    centre[filled] = (lower[filled].astype(np.float64) + upper[filled]) / 2
    from_inside = np.repeat(centre, n_rays, axis=0)
    np.testing.assert_array_equal(
        ray_casts.approach(pool, n_worlds, from_inside, directions, limits), np.zeros(q)
    )
    # Within the box along x, above it along y: not inside, and some reach it.
    from_above = from_inside + (0.0, 25.0)
    moved = ray_casts.approach(pool, n_worlds, from_above, directions, limits)
    expected = _approach_ray_by_ray(lower, upper, from_above, directions, limits)
    np.testing.assert_array_equal(moved, expected)
    assert np.count_nonzero(moved) > 0
