"""Narrow phase against hand-computed cases and the NumPy reference on random poses."""

import math
import zlib

import numpy as np
import pytest

import fx2d_gpu as fx

from .reference import geometry as ref


def contact_scene(arch, make_a, make_b, n_worlds=1, poses=None):
    scene = fx.Scene(gravity=(0, 0), n_worlds=n_worlds, arch=arch)
    make_a(scene)
    make_b(scene)
    if poses is not None:
        state = scene.get_state()
        state.position[:] = poses[0]
        state.angle[:] = poses[1]
        scene.set_state(state)
    return scene


def test_box_resting_on_box(arch):
    # A 1 m box whose bottom is 0.02 m inside a 4 m wide ground box.
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_box((0.0, -0.5), (4.0, 1.0), mass=0)
    scene.add_box((0.3, 0.48), (1.0, 1.0))
    c = scene.contacts()
    assert len(c) == 1 and c.point_count[0] == 2
    np.testing.assert_allclose(c.normal[0], [0, 1], atol=1e-6)
    np.testing.assert_allclose(c.depths[0], [0.02, 0.02], atol=1e-6)
    # Points at the overlap's two ends (x = 0.3 -+ 0.5), halfway through its depth.
    np.testing.assert_allclose(sorted(c.points[0, :, 0]), [-0.2, 0.8], atol=1e-6)
    np.testing.assert_allclose(c.points[0, :, 1], [-0.01, -0.01], atol=1e-6)


def test_box_hanging_over_an_edge_clips_to_the_support(arch):
    # Top box straddles the right end of the lower box (which ends at x = 1).
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_box((0.0, 0.0), (2.0, 1.0), mass=0)
    scene.add_box((1.2, 0.99), (1.0, 1.0))
    c = scene.contacts()
    assert c.point_count[0] == 2
    np.testing.assert_allclose(sorted(c.points[0, :, 0]), [0.7, 1.0], atol=1e-6)
    np.testing.assert_allclose(c.depths[0], [0.01, 0.01], atol=1e-6)


def test_capsule_lying_on_ground(arch):
    # A capsule (segment 2 m, radius 0.25 m) lying 0.01 m into the ground (top y = 0): its
    # core is parallel to the ground, so both ends of the segment give a point.
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0)
    scene.add_capsule((1.0, 0.24), 2.0, 0.25)
    c = scene.contacts()
    assert c.point_count[0] == 2
    np.testing.assert_allclose(c.normal[0], [0, 1], atol=1e-6)
    np.testing.assert_allclose(c.depths[0], [0.01, 0.01], atol=1e-6)
    np.testing.assert_allclose(sorted(c.points[0, :, 0]), [0.0, 2.0], atol=1e-6)
    np.testing.assert_allclose(c.points[0, :, 1], [-0.005, -0.005], atol=1e-6)


def test_capsule_against_circle_and_capsule(arch):
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_capsule((0.0, 0.0), 2.0, 0.2, mass=0)
    # A circle of radius 0.3 above the segment's interior, centre 0.45 m from it.
    scene.add_circle((0.4, 0.45), 0.3)
    # A vertical capsule whose lower cap centre is 0.35 m beyond the right end (1, 0).
    scene.add_capsule((1.35, 0.5), 1.0, 0.2, angle=math.pi / 2)
    c = scene.contacts()
    pairs = {(a, b): i for i, (a, b) in enumerate(zip(c.body_a, c.body_b, strict=True))}
    i = pairs[(0, 1)]
    np.testing.assert_allclose(c.normal[i], [0, 1], atol=1e-6)
    np.testing.assert_allclose(c.depths[i, 0], 0.05, atol=1e-6)
    np.testing.assert_allclose(c.points[i, 0], [0.4, 0.175], atol=1e-6)
    i = pairs[(0, 2)]  # cap end to cap end: along the line between the segment ends
    assert c.point_count[i] == 1
    np.testing.assert_allclose(c.normal[i], [1, 0], atol=1e-6)
    np.testing.assert_allclose(c.depths[i, 0], 0.05, atol=1e-6)
    np.testing.assert_allclose(c.points[i, 0], [1.175, 0.0], atol=1e-6)


def test_box_on_an_edge_and_rounded_corners(arch):
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_edge((0.0, 0.0), (-3.0, 0.0), (3.0, 0.0))
    scene.add_box((0.5, 0.49), (1.0, 1.0))  # 1 cm through the edge, from above
    # Two 1 m boxes rounded by 0.1 m, diagonal to each other: the cores' nearest corners
    # (4, 0.5) and (4.1, 0.6) are 0.1 sqrt(2) apart, the skins 0.2: one point on the
    # diagonal, depth 0.2 - 0.1414.
    scene.add_box((3.5, 0.0), (1.0, 1.0), radius=0.1, mass=0)
    scene.add_box((4.6, 1.1), (1.0, 1.0), radius=0.1)
    c = scene.contacts()
    pairs = {(a, b): i for i, (a, b) in enumerate(zip(c.body_a, c.body_b, strict=True))}
    i = pairs[(0, 1)]
    assert c.point_count[i] == 2
    np.testing.assert_allclose(c.normal[i], [0, 1], atol=1e-6)
    np.testing.assert_allclose(c.depths[i], [0.01, 0.01], atol=1e-6)
    np.testing.assert_allclose(sorted(c.points[i, :, 0]), [0.0, 1.0], atol=1e-6)
    i = pairs[(2, 3)]
    assert c.point_count[i] == 1
    np.testing.assert_allclose(c.normal[i], [math.sqrt(0.5)] * 2, atol=1e-6)
    np.testing.assert_allclose(c.depths[i, 0], 0.2 - 0.1 * math.sqrt(2), atol=1e-6)
    np.testing.assert_allclose(c.points[i, 0], [4.05, 0.55], atol=1e-6)


def test_rotated_box_corner_on_ground(arch):
    # A unit box rotated 45 deg; its lowest corner 0.05 m below the ground surface y = 0.
    half_diag = math.sqrt(0.5)
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_box((0.0, -1.0), (10.0, 2.0), mass=0)
    scene.add_box((2.0, half_diag - 0.05), (1.0, 1.0), angle=math.pi / 4)
    c = scene.contacts()
    assert c.point_count[0] == 1
    np.testing.assert_allclose(c.normal[0], [0, 1], atol=1e-6)
    np.testing.assert_allclose(c.depths[0, 0], 0.05, atol=2e-6)
    np.testing.assert_allclose(c.points[0, 0], [2.0, -0.025], atol=2e-6)


def test_circle_in_polygon_corner_region(arch):
    # Circle centre beyond the box's corner (1, 1): the normal is along the diagonal.
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_box((0.0, 0.0), (2.0, 2.0), mass=0)
    d = 0.3  # centre distance from the corner
    scene.add_circle((1 + d / math.sqrt(2), 1 + d / math.sqrt(2)), 0.5)
    c = scene.contacts()
    assert len(c) == 1
    diag = np.array([1.0, 1.0]) / math.sqrt(2)
    np.testing.assert_allclose(c.normal[0], diag, atol=1e-6)  # from box (a) to circle (b)
    np.testing.assert_allclose(c.depths[0, 0], 0.5 - d, atol=1e-6)
    # Halfway between the corner and the circle's surface point (d - r along the diagonal).
    np.testing.assert_allclose(c.points[0, 0], 1.0 + diag * 0.5 * (d - 0.5), atol=1e-6)


def test_circle_centre_inside_polygon_deep_penetration(arch):
    # The circle (body a) is added first: the normal points from it into the box.
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_circle((0.7, 0.1), 0.25)
    scene.add_box((0.0, 0.0), (2.0, 2.0), mass=0)
    c = scene.contacts()
    # Nearest face is x = 1 (0.3 away): depth = r + 0.3, normal from circle to box = -x.
    np.testing.assert_allclose(c.normal[0], [-1, 0], atol=1e-6)
    np.testing.assert_allclose(c.depths[0, 0], 0.55, atol=1e-6)
    # Halfway between the box face point (1, 0.1) and the circle's far surface (0.45, 0.1).
    np.testing.assert_allclose(c.points[0, 0], [0.725, 0.1], atol=1e-6)


def test_deep_box_penetration_picks_least_overlap_axis(arch):
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_box((0.0, 0.0), (2.0, 2.0))
    scene.add_box((1.2, 0.1), (2.0, 2.0))  # 0.8 overlap in x, 1.9 in y
    c = scene.contacts()
    np.testing.assert_allclose(c.normal[0], [1, 0], atol=1e-6)
    np.testing.assert_allclose(c.depths[0, : c.point_count[0]], 0.8, atol=1e-6)


def test_separated_and_touching_shapes(arch):
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_circle((0, 0), 0.5)
    scene.add_circle((1.001, 0), 0.5)
    scene.add_box((3, 0), (1, 1))
    scene.add_box((4.01, 0), (1, 1))
    assert len(scene.contacts()) == 0


SHAPES = {
    "circle": lambda s, r: s.add_circle((0, 0), r.uniform(0.2, 0.8)),
    "box": lambda s, r: s.add_box((0, 0), r.uniform(0.3, 1.5, size=2)),
    "polygon": lambda s, r: s.add_polygon((0, 0), _random_convex(r)),
}


def _random_convex(rng):
    k = rng.integers(3, 9)
    angles = np.sort(rng.uniform(0, 2 * np.pi, size=k))
    while np.max(np.diff(np.concatenate([angles, [angles[0] + 2 * np.pi]]))) > 2.5:
        angles = np.sort(rng.uniform(0, 2 * np.pi, size=k))
    radius = rng.uniform(0.3, 0.9)
    return np.stack([np.cos(angles), np.sin(angles)], 1) * radius * rng.uniform(0.6, 1.4, 2)


def random_pair_poses(arch, make_a, make_b, n_worlds, reach, seed_text):
    """Bodies 0 and 1 (made by make_a, make_b) at random poses in each world, b within
    `reach` (m, per axis) of a: (scene, the state the device holds, contacts of all worlds,
    {world: its contact row}). Within a few metres of the origin float32 poses are exact to
    ~5e-7 m; references evaluate the device's (float32) poses in float64."""
    rng = np.random.default_rng(zlib.crc32(seed_text.encode()))
    scene = fx.Scene(gravity=(0, 0), n_worlds=n_worlds, arch=arch)
    make_a(scene, rng)
    make_b(scene, rng)
    state = scene.get_state()
    state.position[:, 0] = rng.uniform(-4, 4, size=(n_worlds, 2))
    state.position[:, 1] = state.position[:, 0] + rng.uniform(-reach, reach, size=(n_worlds, 2))
    state.angle[:] = rng.uniform(-np.pi, np.pi, size=(n_worlds, 2))
    scene.set_state(state)
    c = scene.contacts(world=None)
    return scene, scene.get_state(), c, {w: i for i, w in enumerate(c.world)}


@pytest.mark.parametrize(
    "kind_a,kind_b",
    [
        ("circle", "circle"),
        ("circle", "box"),
        ("box", "circle"),
        ("polygon", "circle"),
        ("box", "box"),
        ("box", "polygon"),
        ("polygon", "polygon"),
    ],
)
def test_random_poses_match_numpy_reference(arch, kind_a, kind_b):
    n_worlds = 600
    scene, state, c, got = random_pair_poses(
        arch, SHAPES[kind_a], SHAPES[kind_b], n_worlds, 1.1, f"{kind_a}-{kind_b}"
    )
    shape_a, shape_b = scene.body_shape(0), scene.body_shape(1)
    checked = skipped = 0
    for w in range(n_worlds):
        pose_a = (state.position[w, 0], state.angle[w, 0])
        pose_b = (state.position[w, 1], state.angle[w, 1])
        expected = ref.manifold(shape_a, pose_a, shape_b, pose_b)
        if ref.sat_ambiguity(shape_a, pose_a, shape_b, pose_b) < 1e-4:
            skipped += 1
            continue
        if expected is None:
            # Only grazing contacts may differ between float32 and float64.
            if w in got:
                assert c.depths[got[w]].max() < 1e-5, f"world {w}: unexpected contact"
            continue
        normal, points = expected
        if w not in got:
            assert max(d for _, d in points) < 1e-5, f"world {w}: contact missed"
            continue
        i = got[w]
        kept = [(p, d) for p, d in points if d > 1e-5]
        if c.point_count[i] != len(points) and len(kept) == c.point_count[i]:
            points = kept  # a point grazing the surface, dropped by one side only
        assert c.point_count[i] == len(points), f"world {w}"
        np.testing.assert_allclose(c.normal[i], normal, atol=1e-5, err_msg=f"world {w}")
        for k, (point, depth) in enumerate(points):
            np.testing.assert_allclose(c.depths[i, k], depth, atol=1e-5, err_msg=f"world {w}")
            np.testing.assert_allclose(c.points[i, k], point, atol=1e-4, err_msg=f"world {w}")
        checked += 1
    assert checked > n_worlds // 6, (checked, skipped)
    assert skipped < n_worlds // 20


SKIN_SHAPES = {
    "circle": SHAPES["circle"],
    "box": SHAPES["box"],
    "capsule": lambda s, r: s.add_capsule((0, 0), r.uniform(0.2, 1.2), r.uniform(0.1, 0.4)),
    "rounded_box": lambda s, r: s.add_box(
        (0, 0), r.uniform(0.2, 1.0, size=2), radius=r.uniform(0.05, 0.3)
    ),
    "rounded_polygon": lambda s, r: s.add_polygon(
        (0, 0), 0.7 * _random_convex(r), radius=r.uniform(0.05, 0.3)
    ),
    "edge": lambda s, r: s.add_edge(
        (0, 0), (-r.uniform(0.5, 1.5), 0.0), (r.uniform(0.5, 1.5), 0.0)
    ),
}


@pytest.mark.parametrize(
    "kind_a,kind_b",
    [
        ("capsule", "circle"),
        ("capsule", "box"),
        ("capsule", "capsule"),
        ("rounded_box", "circle"),
        ("rounded_box", "box"),
        ("rounded_polygon", "rounded_box"),
        ("capsule", "rounded_polygon"),
        ("edge", "circle"),
        ("edge", "box"),
        ("edge", "capsule"),
        ("edge", "rounded_box"),
    ],
)
def test_cores_with_skins_match_numpy_reference(arch, kind_a, kind_b):
    """Capsules, rounded polygons and edges on random poses: the deepest point's depth and
    the normal against tests/reference's brute-force core distance (apart) or least overlap
    (overlapping), plus both skins."""
    n_worlds = 400
    scene, state, c, got = random_pair_poses(
        arch, SKIN_SHAPES[kind_a], SKIN_SHAPES[kind_b], n_worlds, 1.3, f"skin-{kind_a}-{kind_b}"
    )
    shape_a, shape_b = scene.body_shape(0), scene.body_shape(1)
    checked = skipped = 0
    for w in range(n_worlds):
        pose_a = (state.position[w, 0], state.angle[w, 0])
        pose_b = (state.position[w, 1], state.angle[w, 1])
        expected = ref.skin_contact(shape_a, pose_a, shape_b, pose_b)
        if isinstance(expected, str):
            skipped += 1
            continue
        if expected is None or expected[1] < 1e-4:
            if w in got:  # only grazing contacts may differ
                assert c.depths[got[w], : c.point_count[got[w]]].max() < 1e-4, f"world {w}"
            continue
        normal, depth = expected
        assert w in got, f"world {w}: contact of depth {depth} missed"
        i = got[w]
        deepest = c.depths[i, : c.point_count[i]].max()
        np.testing.assert_allclose(deepest, depth, atol=2e-4, err_msg=f"world {w}")
        np.testing.assert_allclose(c.normal[i], normal, atol=2e-3, err_msg=f"world {w}")
        checked += 1
    assert checked > n_worlds // 8, checked
    assert skipped < n_worlds // 20, skipped


def test_a_reference_face_that_changes_sides_keeps_its_points_ids(arch):
    """A box straddling half of another (a pyramid's bond), 2 mm into it, tilted by -3 to
    +3 mrad: near zero the two faces separate almost equally, and which one is the
    reference changes with the tilt's sign. Each point's feature id must name the vertices
    of a and of b that end the overlap on that point's side (found here from the bodies'
    facing edges), whichever face is the reference, so that warm starting finds its
    impulses after a change of side (they restarted cold, and a 30-row pyramid never
    settled under the soft step)."""
    tilts = np.linspace(-3e-3, 3e-3, 13)
    scene = fx.Scene(gravity=(0, 0), n_worlds=len(tilts), arch=arch)
    scene.add_box((0.0, 0.0), (1.0, 1.0), mass=0)
    scene.add_box((0.5, 0.998), (1.0, 1.0))
    state = scene.get_state()
    state.angle[:, 1] = tilts
    scene.set_state(state)
    c = scene.contacts(None)
    assert sorted(c.world.tolist()) == list(range(len(tilts)))
    shape_a, shape_b = scene.body_shape(0), scene.body_shape(1)

    def facing_edge(vertices, normals, towards):
        edge = int(np.argmax(normals @ towards))
        return [edge, (edge + 1) % len(vertices)]

    b_is_reference = []
    for i, world in enumerate(c.world):
        assert c.point_count[i] == 2
        tilt = tilts[world]
        turn = np.array([[np.cos(tilt), -np.sin(tilt)], [np.sin(tilt), np.cos(tilt)]])
        b_vertices = shape_b.vertices @ turn.T + [0.5, 0.998]
        normal = c.normal[i]
        b_is_reference.append(abs(normal[0]) > 1e-9)  # b's face is the tilted one
        edge_a = facing_edge(shape_a.vertices, shape_a.normals, normal)
        edge_b = facing_edge(b_vertices, shape_b.normals @ turn.T, -normal)
        middle = c.points[i, :2].mean(axis=0)
        for k in range(2):
            side = c.points[i, k] - middle
            end_a = max(edge_a, key=lambda v: shape_a.vertices[v] @ side)
            end_b = max(edge_b, key=lambda v: b_vertices[v] @ side)
            assert c.features[i, k] == end_a * fx.MAX_POLYGON_VERTICES + end_b, (
                world,
                k,
                c.features[i],
            )
    # Both faces were the reference somewhere in the sweep, and the ids never changed.
    assert any(b_is_reference) and not all(b_is_reference)
    assert len({tuple(sorted(f)) for f in c.features.tolist()}) == 1
