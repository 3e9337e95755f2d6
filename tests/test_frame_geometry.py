"""The viewer's frame geometry filled on the device (fx2d_gpu.draw.frame_geometry) against the
slow, obvious NumPy reference: viewer.build_mesh as it was, copied here, body by body.

Every shape kind in several worlds, one world and tiles, after steps (bodies moved and
turned), after the view changes (static bodies drawn again), after bodies are added, the
sleeping bodies' dimmed colours and the overlays (AABBs, joints, contacts), in both buffer
layouts; and one frame drawn through GGUI offscreen where GGUI can start."""

import math

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import examples, shapes
from fx2d_gpu.draw.frame_geometry import FrameGeometry, FrameView, tile_views
from fx2d_gpu.draw.render import default_bounds, drawn, visual_of
from fx2d_gpu.enums import SHAPE_CIRCLE

from .helpers import every_shape_kind

CIRCLE_SEGMENTS = 20
PALETTE = np.array(
    [
        [66, 133, 244],
        [219, 68, 55],
        [244, 180, 0],
        [15, 157, 88],
        [171, 71, 188],
        [0, 172, 193],
        [255, 112, 67],
    ],
    float,
)
STATIC = np.array([90, 90, 100], float)
ATOL = 2e-6  # window units (float32 on the device, float64 here): ~1e-3 px at 800 px


# ---------------------------------------------------------------------------- the reference
def blend(rgba, background):
    rgba = np.asarray(rgba, float)
    alpha = rgba[3] / 255.0 if len(rgba) > 3 else 1.0
    return np.round(rgba[:3] * alpha + np.asarray(background[:3], float) * (1 - alpha))


def background_of(scene):
    background = scene.meta.get("background", (250, 250, 248))
    if not isinstance(background, tuple | list | np.ndarray):
        background = (250, 250, 248)
    return blend(background, (255, 255, 255))


def body_colours(scene, b):
    """(fill, border) RGB 0-1 as render.py paints body b."""
    fill = STATIC.copy() if scene.body_mass(b) == 0 else PALETTE[b % len(PALETTE)].copy()
    border = fill // 2
    visual = visual_of(scene, b)
    if visual is not None:
        if isinstance(visual["fill"], tuple):
            fill = blend(visual["fill"], background_of(scene))
            border = fill // 2
        if isinstance(visual["border"], tuple) and visual["border_thickness"] > 0:
            border = blend(visual["border"], background_of(scene))
    return fill / 255.0, border / 255.0


def rotation(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]])


def build_mesh(scene, state, world, bounds, rect, aspect):
    """viewer.build_mesh (body by body, NumPy): (triangles, triangle colours, lines, line
    colours) of `world` in window coordinates; also each drawn body's (lower, upper) box."""
    xmin, ymin, xmax, ymax = bounds
    rx0, ry0, rx1, ry1 = rect
    scale_x = min((rx1 - rx0) / (xmax - xmin), (ry1 - ry0) / (ymax - ymin) / aspect)
    scale_y = scale_x * aspect
    cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
    mx, my = (rx0 + rx1) / 2, (ry0 + ry1) / 2

    def to_window(points):
        return np.stack(
            [(points[:, 0] - cx) * scale_x + mx, (points[:, 1] - cy) * scale_y + my], axis=1
        )

    tris, tri_cols, lines, line_cols, boxes = [], [], [], [], []
    ring = np.linspace(0, 2 * np.pi, CIRCLE_SEGMENTS, endpoint=False)
    for b in range(scene.n_bodies):
        if not drawn(scene, b):
            continue
        shape = scene.body_shape(b)
        visual = visual_of(scene, b)
        if visual is not None and visual["shape"] is not None:
            shape = visual["shape"]
        fill, edge = body_colours(scene, b)
        rot = rotation(state.angle[world, b])
        pos = state.position[world, b]
        if shape.kind == SHAPE_CIRCLE:
            centre = pos + rot @ shape.center
            boundary = centre + shape.radius * np.stack([np.cos(ring), np.sin(ring)], 1)
            mark = np.array([centre, centre + rot @ np.array([shape.radius, 0.0])])
            lines.append(to_window(mark))
            line_cols.append(np.tile(edge, (2, 1)))
            boxes.append(to_window(np.array([centre - shape.radius, centre + shape.radius])))
        elif shape.kind in shapes.AREALESS_KINDS:
            ends = to_window(pos + shape.vertices @ rot.T)
            lines.append(ends)
            line_cols.append(np.tile(edge, (2, 1)))
            boxes.append(np.array([ends.min(0), ends.max(0)]))
            continue
        else:
            centre = pos + rot @ shape.vertices.mean(axis=0)
            boundary = pos + shapes.outline(shape) @ rot.T
            drawn_boundary = to_window(boundary)
            boxes.append(np.array([drawn_boundary.min(0), drawn_boundary.max(0)]))
        k = len(boundary)
        nxt = np.roll(boundary, -1, axis=0)
        fan = np.stack([np.tile(centre, (k, 1)), boundary, nxt], axis=1).reshape(-1, 2)
        tris.append(to_window(fan))
        tri_cols.append(np.tile(fill, (3 * k, 1)))
        lines.append(to_window(np.stack([boundary, nxt], axis=1).reshape(-1, 2)))
        line_cols.append(np.tile(edge, (2 * k, 1)))

    def stack(parts, width):
        return np.concatenate(parts) if parts else np.zeros((0, width))

    return (
        stack(tris, 2),
        stack(tri_cols, 3),
        stack(lines, 2),
        stack(line_cols, 3),
        np.array(boxes).reshape(-1, 2, 2),
    )


def reference(scene, views, aspect):
    """Every view's build_mesh, what reaches past a view's rect pressed onto it where there
    are several views (the viewer's body_geometry)."""
    state = scene.get_state()
    parts = [[], [], [], [], []]
    for view in views:
        mesh = list(build_mesh(scene, state, view.world, view.bounds, view.rect, aspect))
        if len(views) > 1:
            x0, y0, x1, y1 = view.rect
            for i in (0, 2, 4):
                mesh[i] = np.clip(mesh[i], [x0, y0], [x1, y1])
        for part, array in zip(parts, mesh, strict=True):
            part.append(array)
    return tuple(np.concatenate(part) for part in parts)


def assert_frame_matches(frame, scene, views, aspect):
    tris, tri_cols, lines, line_cols, _ = reference(scene, views, aspect)
    got = frame.arrays()
    for name, mine, theirs in zip(
        ("triangles", "triangle colours", "lines", "line colours"),
        got,
        (tris, tri_cols, lines, line_cols),
        strict=True,
    ):
        assert mine.shape == theirs.shape, name
        np.testing.assert_allclose(mine, theirs, atol=ATOL, rtol=0, err_msg=name)


# ---------------------------------------------------------------------------- scenes
def every_kind(arch, n_worlds=3):
    """helpers.every_shape_kind with a revolute joint (the joints overlay), not stepped."""
    return every_shape_kind(arch, n_worlds, joint=True)


BOUNDS = (-10.0, -1.0, 10.0, 6.0)


@pytest.mark.parametrize("layout", ["ggui", "compact"])
def test_one_world_and_tiles_match_the_reference_as_bodies_move(arch, layout):
    scene = every_kind(arch)
    geometry = FrameGeometry(scene, layout=layout)
    aspect = 4 / 3
    for steps in (0, 12, 12):
        for _ in range(steps):
            scene.step(1 / 60)
        for world in (0, 2):  # one world filling the window
            views = [FrameView(world, (0.0, 0.0, 1.0, 1.0), BOUNDS)]
            assert_frame_matches(geometry.update(views, aspect), scene, views, aspect)
        views = tile_views(scene, BOUNDS)  # every world in its tile
        assert len(views) == 3
        assert_frame_matches(geometry.update(views, aspect), scene, views, aspect)
    # The bodies did move and turn in every world, differently.
    state = scene.get_state()
    assert np.ptp(state.position[:, 3, 0]) > 0.1 and np.ptp(state.angle[:, 1]) > 0.1


def test_convenience_views_a_world_and_default_bounds(arch):
    scene = every_kind(arch, n_worlds=2)
    geometry = FrameGeometry(scene)
    frame = geometry.update(worlds=1, aspect=1.5)  # bounds: the world's default_bounds
    views = [FrameView(1, (0.0, 0.0, 1.0, 1.0), default_bounds(scene, 1))]
    assert_frame_matches(frame, scene, views, 1.5)
    assert geometry.n_triangle_vertices == len(frame.arrays()[0])
    assert geometry.n_line_vertices == len(frame.arrays()[2])
    # Each point is written once and the triangles and segments index it: a fan of b
    # triangles has b + 1 vertices (3 b corners), an outline of b segments b vertices
    # (2 b ends), a circle's outline 2 more for its mark, a segment 2 ends of its own.
    from fx2d_gpu.draw.frame_geometry import CIRCLE_SEGMENTS
    from fx2d_gpu.draw.render import KIND_CIRCLE, KIND_SEGMENT, body_outlines

    outlines = body_outlines(scene)
    boundary = np.where(outlines.kind == KIND_CIRCLE, CIRCLE_SEGMENTS, outlines.count)
    filled = outlines.kind != KIND_SEGMENT
    assert frame.triangles.count == np.sum(np.where(filled, boundary + 1, 0))
    assert frame.lines.count == np.sum(
        np.where(filled, boundary, 2) + 2 * (outlines.kind == KIND_CIRCLE)
    )
    assert geometry.n_triangle_vertices == 3 * np.sum(np.where(filled, boundary, 0))


def test_a_changed_view_draws_static_and_resting_bodies_again(arch):
    """Bodies whose pose has not changed are not drawn again while the view stays; a new
    view (a zoom, tiles pressing shapes onto their edges) draws every body anew, and going
    back draws the first view again."""
    scene = every_kind(arch, n_worlds=2)
    geometry = FrameGeometry(scene)
    wide = [FrameView(0, (0.0, 0.0, 1.0, 1.0), BOUNDS)]
    zoomed = [
        FrameView(0, (0.0, 0.0, 0.5, 1.0), (-3.0, 0.0, 1.0, 3.0)),
        FrameView(1, (0.5, 0.0, 1.0, 1.0), (-3.0, 0.0, 1.0, 3.0)),
    ]
    for views in (wide, wide, zoomed, zoomed, wide):
        assert_frame_matches(geometry.update(views, 4 / 3), scene, views, 4 / 3)
        scene.step(1 / 60)
    # The zoomed tiles pressed the ground and the far bodies onto their edges.
    frame = geometry.update(zoomed, 4 / 3)
    assert np.isclose(frame.arrays()[0][:, 0], 0.5, atol=1e-7).any()


def test_bodies_added_later_are_drawn(arch):
    scene = every_kind(arch, n_worlds=1)
    geometry = FrameGeometry(scene)
    views = [FrameView(0, (0.0, 0.0, 1.0, 1.0), BOUNDS)]
    before = geometry.update(views, 4 / 3).arrays()[0].shape[0]
    scene.add_circle((3.0, 4.0), 0.3)
    scene.add_box((-3.0, 4.0), (0.4, 0.4))
    frame = geometry.update(views, 4 / 3)
    assert frame.arrays()[0].shape[0] == before + 3 * (CIRCLE_SEGMENTS + 4)
    assert_frame_matches(frame, scene, views, 4 / 3)


def test_sleeping_bodies_dimmed_toward_the_background(arch):
    scene = every_kind(arch, n_worlds=2)
    geometry = FrameGeometry(scene, dim_sleeping=True, dim_amount=0.5)
    views = tile_views(scene, BOUNDS)
    assert_frame_matches(geometry.update(views, 4 / 3), scene, views, 4 / 3)  # none asleep
    state = scene.get_state()
    state.sleeping[1, 3] = True  # the triangle, in world 1 only
    scene.set_state(state)
    frame = geometry.update(views, 4 / 3)
    tris, tri_cols, _, line_cols, _ = reference(scene, views, 4 / 3)
    got = frame.arrays()
    fill, edge = body_colours(scene, 3)
    background = background_of(scene) / 255.0
    dim_fill, dim_edge = (fill + background) / 2, (edge + background) / 2
    np.testing.assert_allclose(got[0], tris, atol=ATOL)
    changed = np.abs(got[1] - tri_cols).max(axis=1) > 1e-6
    assert changed.sum() == 3 * 3  # the triangle's 3 fan triangles, in one tile
    np.testing.assert_allclose(got[1][changed], np.tile(dim_fill, (9, 1)), atol=1e-6)
    changed = np.abs(got[3] - line_cols).max(axis=1) > 1e-6
    np.testing.assert_allclose(got[3][changed], np.tile(dim_edge, (6, 1)), atol=1e-6)
    geometry.dim_sleeping = False  # the toggle: full colours again
    assert_frame_matches(geometry.update(views, 4 / 3), scene, views, 4 / 3)


def test_overlays_boxes_joints_and_contacts(arch):
    scene = every_kind(arch, n_worlds=2)
    for _ in range(70):  # bodies land on the ground: contacts
        scene.step(1 / 60)
    geometry = FrameGeometry(scene, boxes=True, joints=True, contacts=True)
    views = tile_views(scene, BOUNDS)
    frame = geometry.update(views, 4 / 3)
    assert_frame_matches(frame, scene, views, 4 / 3)
    *_, boxes = reference(scene, views, 4 / 3)
    corners = frame.boxes.positions().reshape(-1, 4, 2, 2)  # per body: 4 segments
    np.testing.assert_allclose(corners[:, 0, 0], boxes[:, 0], atol=ATOL)  # lower left
    np.testing.assert_allclose(corners[:, 1, 1], boxes[:, 1], atol=ATOL)  # upper right
    np.testing.assert_allclose(corners[:, 1, 0], corners[:, 0, 1])  # a closed loop
    # Joints: parent centre -> parent anchor -> child anchor -> child centre.
    anchors, state = scene.joint_anchors(), scene.get_state()
    paths = frame.joints.positions().reshape(len(views), scene.n_joints, 6, 2)
    for v, view in enumerate(views):
        parent, child = scene.joint_bodies(0)
        expected = np.array(
            [
                state.position[view.world, parent],
                anchors[view.world, 0, 0],
                anchors[view.world, 0, 0],
                anchors[view.world, 0, 1],
                anchors[view.world, 0, 1],
                state.position[view.world, child],
            ]
        )
        np.testing.assert_allclose(paths[v, 0], to_window(view, expected, 4 / 3), atol=ATOL)
    # Contacts: every view's points, from Scene.contacts.
    found = scene.contacts(world=None)
    expected = []
    for view in views:
        for i in np.flatnonzero(found.world == view.world):
            expected.extend(to_window(view, found.points[i, : found.point_count[i]], 4 / 3))
    assert len(expected) >= 6
    np.testing.assert_allclose(frame.contact_points, expected, atol=ATOL)
    assert frame.contact_lines.count == 2 * len(expected)
    # Off again: no overlay buffers.
    geometry.boxes = geometry.joints = geometry.contacts = False
    frame = geometry.update(views, 4 / 3)
    assert frame.boxes is None and frame.joints is None and frame.contact_points is None


def to_window(view, points, aspect):
    """Window coordinates of points (n, 2) m in `view`, pressed into its rect."""
    xmin, ymin, xmax, ymax = view.bounds
    x0, y0, x1, y1 = view.rect
    scale_x = min((x1 - x0) / (xmax - xmin), (y1 - y0) / (ymax - ymin) / aspect)
    points = np.asarray(points, float)
    window = np.stack(
        [
            ((points[:, 0] - (xmin + xmax) / 2) * scale_x + (x0 + x1) / 2),
            ((points[:, 1] - (ymin + ymax) / 2) * scale_x * aspect + (y0 + y1) / 2),
        ],
        1,
    )
    return np.clip(window, [x0, y0], [x1, y1])


def test_a_scene_file_draws_its_visual_shapes_and_colours_not_its_walls(arch):
    scene = fx.load_scene(examples.path("joint_control_demo"), arch=arch)
    assert not all(drawn(scene, b) for b in range(scene.n_bodies))  # it has walls
    scene.step(1 / 60)
    geometry = FrameGeometry(scene)
    views = tile_views(scene)
    assert_frame_matches(geometry.update(views, 1.5), scene, views, 1.5)


def test_a_frame_drawn_offscreen_through_ggui(arch, in_tmp_path):  # ImGui may write there
    """draw() hands the buffers to GGUI's canvas: each body's fill at its projected centre,
    the background elsewhere (skipped where GGUI cannot open a window)."""
    import taichi as ti

    size = (240, 180)
    try:
        window = ti.ui.Window("frame geometry", size, show_window=False)
    except Exception as exc:  # noqa: BLE001 - GGUI raises RuntimeError variants
        pytest.skip(f"GGUI cannot open a window here: {exc}")
    try:
        scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
        scene.add_box((2.0, 1.5), (1.6, 1.0), angle=0.2)
        scene.add_circle((6.0, 4.0), 0.8)
        view = FrameView(0, (0.0, 0.0, 1.0, 1.0), (0.0, 0.0, 8.0, 6.0))
        canvas = window.get_canvas()
        for layout in ("ggui", "compact"):
            canvas.set_background_color((1.0, 1.0, 1.0))
            FrameGeometry(scene, layout=layout).update([view], 4 / 3).draw(canvas)
            image = window.get_image_buffer_as_numpy()  # (width, height, 4), y up
            for body, (x, y) in ((0, (2.0, 1.5)), (1, (6.0, 4.0))):
                colour = image[int(x / 8 * size[0]), int(y / 6 * size[1]), :3] * 255
                assert np.abs(colour - PALETTE[body]).max() < 3, (layout, body, colour)
            assert (image[int(4 / 8 * size[0]), int(5 / 6 * size[1]), :3] == 1.0).all()
    finally:
        window.destroy()
