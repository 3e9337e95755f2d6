"""The GGUI viewer (fx2d_gpu/draw/viewer.py) for real.

Its input handling through ViewerController with synthetic events and real physics: a
dragged body follows the cursor (heavy and light alike), zoom keeps the point under the
cursor, panning, choosing worlds, the overlays, pause / step / reset. Then GGUI itself:
an offscreen window draws bodies where the camera projects them and follows a moved body
(skipped where GGUI cannot start on Vulkan; CI installs Mesa's software driver), `fx2d view
--offscreen` records, falls back to the image renderer without Vulkan, and under xvfb-run
the interactive `fx2d view` opens a real window and screenshots it (skipped without
xvfb-run).
"""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import fx2d_gpu as fx
from fx2d_gpu.draw.render import _PALETTE, _STATIC
from fx2d_gpu.draw.viewer import (
    SPRING_HERTZ,
    ViewerController,
    ViewerUnavailable,
    overlay_geometry,
    tile_grid,
)
from fx2d_gpu.shapes import rotation

SIZE = (400, 300)


def cursor_over(controller, point, view=None):
    """Move the cursor over world point (2,) m of `view` (default: the only view)."""
    view = controller.views()[0] if view is None else view
    controller.move_cursor(*view.to_window(point)[0])


def world_under_cursor(controller):
    return controller.view_at().to_world(controller.cursor)


def open_scene(arch, gravity=(0.0, 0.0), n_worlds=1):
    scene = fx.Scene(gravity=gravity, n_worlds=n_worlds, arch=arch)
    scene.meta["size"] = (12.0, 9.0)
    scene.meta["origin"] = (-6.0, -1.0)
    return scene


# ---------------------------------------------------------------------------- dragging
def drag(controller, body, grab_offset, displacement, frames):
    """Grab `body` (world 0) at grab_offset (2,) m from its centre, move the cursor by
    displacement (2,) m, run `frames` frames; the grabbed point's path (frames, 2) m."""
    scene = controller.scene
    start = scene.get_state().position[0, body] + grab_offset
    cursor_over(controller, start)
    controller.press("LMB")
    assert controller.drag is not None and controller.drag.body == body
    cursor_over(controller, start + displacement)
    path = []
    for _ in range(frames):
        controller.frame()
        state = scene.get_state()
        arm = rotation(state.angle[0, body]) @ controller.drag.local_anchor
        path.append(state.position[0, body] + arm)
    return start, np.array(path)


def test_a_dragged_body_follows_the_cursor_heavy_or_light_alike(arch):
    """The left button holds the body under the cursor by the point grabbed; the spring's
    stiffness and damping are per kg, so a 40 kg box follows the same path as a 0.5 kg one
    (no gravity: the same motion to rounding); after a second either is at the cursor."""
    scene = open_scene(arch)
    light = scene.add_box((-3.0, 2.0), (1.0, 1.0), mass=0.5)
    heavy = scene.add_box((3.0, 2.0), (1.0, 1.0), mass=40.0)
    controller = ViewerController(scene, size=SIZE)
    offset, move = np.array([0.3, -0.2]), np.array([1.5, 2.0])
    start, light_path = drag(controller, light, offset, move, 60)
    np.testing.assert_allclose(light_path[-1], start + move, atol=0.02)
    # Released: no more pull; with nothing else acting, the velocity stays as it was.
    controller.release("LMB")
    assert controller.drag is None
    before = scene.get_state().velocity[0, light]
    for _ in range(3):
        controller.frame()
    np.testing.assert_allclose(scene.get_state().velocity[0, light], before, atol=1e-5)
    controller.press("r")  # reset: both boxes back where they were
    start_heavy, heavy_path = drag(controller, heavy, offset, move, 60)
    np.testing.assert_allclose(heavy_path - start_heavy, light_path - start, atol=2e-3)
    # It is a spring, not a teleport: a sixth of a period (1/30 s) in, it is under way.
    travelled = np.linalg.norm(heavy_path[1] - start_heavy) / np.linalg.norm(move)
    assert 0.0 < travelled < 0.5, (travelled, SPRING_HERTZ)


def test_drag_lifts_a_box_off_the_ground_against_gravity(arch):
    scene = open_scene(arch, gravity=(0.0, -9.81))
    ground = scene.add_box((0.0, -0.5), (12.0, 1.0), mass=0)
    box = scene.add_box((0.0, 0.5), (1.0, 1.0), mass=2.0)
    controller = ViewerController(scene, size=SIZE)
    # The static ground and empty space cannot be grabbed.
    for where in ((4.0, -0.5), (4.0, 4.0)):
        cursor_over(controller, where)
        controller.press("LMB")
        assert controller.drag is None
        controller.release("LMB")
    start, path = drag(controller, box, np.zeros(2), np.array([1.0, 3.0]), 90)
    # Held 3 m up; the spring sags by g / (2 pi f)^2 = 1 cm under its weight.
    np.testing.assert_allclose(path[-1], start + [1.0, 3.0], atol=0.03)
    assert path[-1][1] < start[1] + 3.0
    assert controller.drag.body != ground


# ---------------------------------------------------------------------------- the camera
def test_zoom_keeps_the_point_under_the_cursor_and_pan_drags_the_view(arch):
    scene = open_scene(arch)
    scene.add_box((0.0, 0.0), (1.0, 1.0))
    controller = ViewerController(scene, size=SIZE)
    controller.move_cursor(0.3, 0.7)
    held = world_under_cursor(controller)
    width = np.ptp(controller.views()[0].to_window([[0.0, 0.0], [1.0, 0.0]])[:, 0])
    controller.press("z")  # zoom in 1.25x
    np.testing.assert_allclose(world_under_cursor(controller), held, atol=1e-9)
    zoomed = np.ptp(controller.views()[0].to_window([[0.0, 0.0], [1.0, 0.0]])[:, 0])
    assert zoomed == pytest.approx(1.25 * width)
    controller.move_cursor(0.8, 0.2)
    held = world_under_cursor(controller)
    controller.wheel(-2)
    controller.press("x")
    np.testing.assert_allclose(world_under_cursor(controller), held, atol=1e-9)
    # Right (or middle) button: the world point grabbed stays under the cursor.
    for button in ("RMB", "MMB"):
        controller.move_cursor(0.2, 0.3)
        held = world_under_cursor(controller)
        controller.press(button)
        controller.move_cursor(0.6, 0.5)
        controller.move_cursor(0.7, 0.9)
        np.testing.assert_allclose(world_under_cursor(controller), held, atol=1e-9)
        controller.release(button)
        centre = controller.camera.centre.copy()
        controller.move_cursor(0.1, 0.1)  # released: the view stays
        np.testing.assert_array_equal(controller.camera.centre, centre)
    # Arrows pan a tenth of the view's height; h fits the scene's frame again.
    height = 2 * controller.camera.half_height
    controller.press("Right")
    controller.press("Up")
    np.testing.assert_allclose(controller.camera.centre - centre, [0.1 * height] * 2)
    controller.press("h")
    xmin, ymin, xmax, ymax = controller.views()[0].bounds
    assert xmin <= -6.0 and xmax >= 6.0 and ymin <= -1.0 and ymax >= 8.0
    assert min(xmax - xmin - 12.0, ymax - ymin - 9.0) < 0.5  # fitted, not merely inside


# ---------------------------------------------------------------------------- worlds
def test_tiles_of_worlds_choosing_one_and_dragging_in_its_tile(arch):
    """A batched scene starts as tiles, one world each; t over a tile shows that world
    alone, Tab / Shift+Tab cycle; a body dragged in a tile moves in that world only."""
    scene = open_scene(arch, n_worlds=5)
    box = scene.add_box((0.0, 2.0), (1.0, 1.0))
    controller = ViewerController(scene, size=SIZE)
    views = controller.views()
    assert controller.tiled and [v.world for v in views] == [0, 1, 2, 3, 4]
    columns, rows = tile_grid(5)
    assert (columns, rows) == (3, 2)
    for view in views:  # tiles of a third of the width and half the height, apart
        x0, y0, x1, y1 = view.rect
        assert (x1 - x0, y1 - y0) == pytest.approx((1 / 3, 1 / 2))
    assert len({v.rect for v in views}) == 5
    # The third tile's box, grabbed and pulled: only world 2's box moves.
    third = views[2]
    cursor_over(controller, (0.0, 2.0), third)
    assert controller.view_at() is not None and controller.view_at().world == 2
    controller.press("LMB")
    assert controller.drag.world == 2
    cursor_over(controller, (1.0, 3.0), third)
    for _ in range(20):
        controller.frame()
    position = scene.get_state().position[:, box]
    assert np.linalg.norm(position[2] - [0.0, 2.0]) > 0.5
    np.testing.assert_array_equal(np.delete(position, 2, axis=0), [[0.0, 2.0]] * 4)
    controller.release("LMB")
    # t over world 3's tile: world 3 alone, in the whole window; Tab cycles, wrapping.
    cursor_over(controller, (0.0, 2.0), views[3])
    controller.press("t")
    assert not controller.tiled and [v.world for v in controller.views()] == [3]
    assert controller.views()[0].rect == (0.0, 0.0, 1.0, 1.0)
    controller.press("Tab")
    controller.press("Tab")
    assert controller.world == 0
    controller.press("Shift")
    controller.press("Tab")
    controller.release("Shift")
    assert controller.world == 4
    controller.press("t")
    assert controller.tiled and len(controller.views()) == 5


# ---------------------------------------------------------------------------- overlays
def to_world(view, window_points):
    x0, y0, x1, y1 = view.rect
    xmin, ymin, xmax, ymax = view.bounds
    p = np.asarray(window_points, float)
    return np.stack(
        [
            xmin + (p[:, 0] - x0) / (x1 - x0) * (xmax - xmin),
            ymin + (p[:, 1] - y0) / (y1 - y0) * (ymax - ymin),
        ],
        1,
    )


def test_overlay_toggles_draw_contacts_aabbs_joints_and_sleepers(arch):
    scene = open_scene(arch)
    left = scene.add_box((0.0, 0.0), (1.0, 1.0))
    scene.add_box((0.9, 0.0), (1.0, 1.0))  # overlaps the first by 0.1 m
    scene.add_box((-4.0, 4.0), (2.0, 1.0), angle=np.pi / 2)
    bar = scene.add_box((4.0, 6.0), (2.0, 0.2), mass=0)
    ball = scene.add_circle((4.0, 4.0), 0.5)
    scene.add_revolute_joint(bar, ball, anchor=(0.0, 0.0))
    controller = ViewerController(scene, size=SIZE)
    view = controller.views()[0]
    state = scene.get_state()
    plain = overlay_geometry(controller, state, None)
    assert len(plain.lines) == 0 and len(plain.dots) == 0
    for key in "cajs":
        controller.press(key)
    overlays = controller.overlays
    assert overlays.contacts and overlays.aabbs and overlays.joints and overlays.sleeping
    state.sleeping[0, left] = True  # a sleeper, to be marked at its centre
    scene.set_state(state)
    from fx2d_gpu.draw.viewer import _LocalOutlines

    drawn = overlay_geometry(controller, scene.get_state(), _LocalOutlines(scene))
    dots = to_world(view, drawn.dots)
    # Contacts: the two points halfway through the 0.1 m overlap, at the boxes' corners.
    red = np.all(np.isclose(drawn.dot_colours, [0.85, 0.1, 0.1], atol=1e-3), axis=1)
    contact = dots[red]
    assert len(contact) == 2
    np.testing.assert_allclose(np.sort(contact[:, 1]), [-0.5, 0.5], atol=0.02)
    assert np.all(np.abs(contact[:, 0] - 0.45) < 0.06)
    # AABBs: the turned 2 x 1 box spans 1 m across and 2 m up.
    green = np.all(np.isclose(drawn.line_colours, [0.1, 0.65, 0.25], atol=1e-3), axis=1)
    segments = to_world(view, drawn.lines[green])
    near_turned = segments[np.linalg.norm(segments - [-4.0, 4.0], axis=1) < 1.5]
    np.testing.assert_allclose(near_turned.min(0), [-4.5, 3.0], atol=1e-4)
    np.testing.assert_allclose(near_turned.max(0), [-3.5, 5.0], atol=1e-4)
    # The joint: its anchors (both at the bar's centre) marked.
    teal = np.all(np.isclose(drawn.dot_colours, [0.0, 0.55, 0.6], atol=1e-3), axis=1)
    np.testing.assert_allclose(dots[teal], [[4.0, 6.0]] * 2, atol=1e-4)
    # The sleeper, at its centre, and no other body.
    violet = np.all(np.isclose(drawn.dot_colours, [0.55, 0.35, 0.75], atol=1e-3), axis=1)
    np.testing.assert_allclose(dots[violet], [[0.0, 0.0]], atol=1e-4)


# ---------------------------------------------------------------------------- pause, reset
def test_overlays_read_the_state_back_only_when_they_need_it(arch):
    """overlay_geometry(controller, None) reads the bodies' state (a host copy of every
    body, through its read_state) only for AABBs, joints, sleeping bodies or a held body; a
    plain frame reads none (GGUIPainter.draw passes None), and the overlays it draws are
    those drawn from a state read beforehand."""
    from fx2d_gpu.draw.viewer import _LocalOutlines

    scene = open_scene(arch)
    scene.add_box((0.0, 0.0), (1.0, 1.0))
    controller = ViewerController(scene, size=SIZE)
    reads = []

    def read_state():
        reads.append(1)
        return scene.get_state()

    outlines = _LocalOutlines(scene)
    overlay_geometry(controller, None, outlines, read_state)
    controller.press("c")  # contacts come from Scene.contacts, not the state
    overlay_geometry(controller, None, outlines, read_state)
    assert reads == []
    controller.press("a")
    lazy = overlay_geometry(controller, None, outlines, read_state)
    assert reads == [1]
    eager = overlay_geometry(controller, scene.get_state(), outlines, read_state)
    assert reads == [1]
    np.testing.assert_array_equal(lazy.lines, eager.lines)


def test_pause_single_step_reset_and_heads_up_text(arch):
    scene = open_scene(arch, gravity=(0.0, -9.81))
    scene.add_box((0.0, -0.5), (12.0, 1.0), mass=0)
    scene.add_box((0.0, 3.0), (1.0, 1.0))
    scene.add_box((0.0, 0.5), (1.0, 1.0))
    controller = ViewerController(scene, dt=1 / 60, size=SIZE)
    first = scene.get_state()
    controller.frame()
    assert scene.step_count == 1
    controller.press(" ")
    for _ in range(3):
        controller.frame()
    assert controller.paused and scene.step_count == 1
    controller.press("n")
    controller.frame()
    controller.frame()
    assert controller.paused and scene.step_count == 2
    controller.press("r")
    assert scene.step_count == 0 and scene.time == 0.0
    np.testing.assert_array_equal(scene.get_state().position, first.position)
    controller.press(" ")
    controller.frame()
    assert scene.step_count == 1
    text = controller.hud_lines()
    assert "3 bodies x 1 worlds" in text[0] and "ms/step" in text[0]
    assert f"{len(scene.contacts(world=None))} contact pairs" in text[0]
    assert "world 0 of 1" in text[1]
    assert any("drag a body" in line for line in controller.key_lines())
    controller.press("p")
    assert controller.screenshot_requested
    controller.press("Escape")
    assert not controller.running


# ---------------------------------------------------------------------------- GGUI
_GGUI = {}


def ggui_window(size):
    """An offscreen GGUI window, or a skip naming why GGUI cannot start here."""
    from fx2d_gpu.draw.viewer import open_window

    if "error" in _GGUI:
        pytest.skip(_GGUI["error"])
    try:
        return open_window(size, offscreen=True)
    except ViewerUnavailable as exc:
        _GGUI["error"] = f"GGUI cannot open a Vulkan window here: {exc}"
        pytest.skip(_GGUI["error"])


def pixel(view, point, size):
    """(row, column) of world point (2,) m in an image of `size` (width, height)."""
    x, y = view.to_window(point)[0]
    return int(size[1] * (1 - y)), int(size[0] * x)


def test_offscreen_ggui_draws_the_bodies_where_the_camera_puts_them(arch, in_tmp_path):
    """A demo drawn offscreen through GGUI: each domino's colour at its projected pixel, the
    background between them, and a domino moved up by set_state drawn at its new place."""
    from fx2d_gpu.demos import demo_dominoes
    from fx2d_gpu.draw.viewer import GGUIPainter

    size = (320, 240)  # (ImGui writes its imgui.ini in the working folder, in_tmp_path)
    scene = demo_dominoes(arch=arch, count=5)
    controller = ViewerController(scene, size=size)
    controller.press(" ")  # paused: the dominoes stay where they are
    window = ggui_window(size)
    try:
        painter = GGUIPainter(window, controller)
        painter.draw()
        image = painter.image().astype(int)
        assert image.shape == (240, 320, 3)
        view = controller.views()[0]
        state = scene.get_state()
        for body in range(1, scene.n_bodies):
            colour = _PALETTE[body % len(_PALETTE)]
            row, column = pixel(view, state.position[0, body], size)
            assert np.abs(image[row, column] - colour).sum() < 12, (body, image[row, column])
        gap = pixel(view, (state.position[0, 1] + state.position[0, 2]) / 2, size)
        assert np.abs(image[gap] - [250, 250, 248]).sum() < 12  # the background
        # Domino 3 lifted 2.5 m: drawn there, gone from where it stood.
        moved, old = state.position[0, 3] + [0.0, 2.5], state.position[0, 3].copy()
        state.position[0, 3] = moved
        scene.set_state(state)
        controller.frame()  # paused: no step
        painter.draw()
        image = painter.image().astype(int)
        colour = _PALETTE[3 % len(_PALETTE)]
        assert np.abs(image[pixel(view, moved, size)] - colour).sum() < 12
        assert np.abs(image[pixel(view, old, size)] - [250, 250, 248]).sum() < 12
    finally:
        window.destroy()


def test_ggui_takes_the_frame_from_the_device_where_it_shares_it(arch, in_tmp_path, monkeypatch):
    """On the Vulkan backend, whose device GGUI renders with, a frame's vertices and indices
    reach GGUI as device ndarrays, never copied to the host (VertexBuffer.ggui_vertices,
    the host copy, is not called); on the other backends as host arrays. Either way the
    picture is the one the host hand-off draws, pixel for pixel."""
    from fx2d_gpu.demos import demo_dominoes
    from fx2d_gpu.device import runtime
    from fx2d_gpu.draw import frame_geometry
    from fx2d_gpu.draw.viewer import GGUIPainter

    size = (320, 240)  # (ImGui writes its imgui.ini in the working folder, in_tmp_path)
    scene = demo_dominoes(arch=arch, count=5)
    controller = ViewerController(scene, size=size)
    controller.press(" ")
    controller.press("i")  # no heads-up text: its timings change from frame to frame
    window = ggui_window(size)
    host_copies, handed = [], []
    ggui_vertices = frame_geometry.VertexBuffer.ggui_vertices
    canvas_call = frame_geometry._canvas_call
    monkeypatch.setattr(
        frame_geometry.VertexBuffer,
        "ggui_vertices",
        lambda buffer: host_copies.append(1) or ggui_vertices(buffer),
    )
    monkeypatch.setattr(
        frame_geometry,
        "_canvas_call",
        lambda canvas, kind, vertices, size=0.0, indices=None: (
            handed.append((kind, type(vertices), type(indices))),
            canvas_call(canvas, kind, vertices, size, indices),
        ),
    )
    try:
        painter = GGUIPainter(window, controller)
        painter.draw()
        on_device = painter.image()
        assert {kind for kind, _, _ in handed} == {"triangles", "lines"}
        if runtime.backend_name() == "vulkan":
            assert not host_copies
            assert all(not issubclass(t, np.ndarray) for _, v, i in handed for t in (v, i))
        else:
            assert host_copies
            assert all(issubclass(v, np.ndarray) for _, v, _ in handed)
        monkeypatch.setattr(frame_geometry, "DEVICE_HAND_OFF", ())
        host_copies.clear()
        painter.draw()
        assert host_copies  # the host hand-off, for comparison
        np.testing.assert_array_equal(painter.image(), on_device)
        assert (on_device != on_device[0, 0]).any()  # the dominoes are in the picture
    finally:
        window.destroy()


def test_fx2d_view_offscreen_records_frames_of_tiled_worlds(in_tmp_path, arch, capsys):
    """`fx2d view --offscreen`: GGUI without a display. Four worlds as 2 x 2 tiles, each
    tile with its ground and stack of boxes; a PNG per frame and the last as a screenshot;
    ImGui's imgui.ini is not left behind."""
    from fx2d_gpu.cli import main

    tmp_path = in_tmp_path
    ggui_window((32, 32)).destroy()  # skips where GGUI cannot start
    (tmp_path / "imgui.ini").unlink(missing_ok=True)
    frames, shot = tmp_path / "frames", tmp_path / "last.png"
    assert (
        main(
            [
                "view",
                "--demo",
                "batched",
                "--worlds",
                "4",
                "--offscreen",
                "--frames",
                "3",
                "--png-dir",
                str(frames),
                "--screenshot",
                str(shot),
                "--size",
                "200x160",
                "--arch",
                arch,
                "--no-hud",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"wrote {frames}/ (3 frames)" in out and f"wrote {shot}" in out
    pictures = sorted(frames.glob("*.png"))
    assert len(pictures) == 3
    image = np.asarray(Image.open(pictures[-1]).convert("RGB")).astype(int)
    np.testing.assert_array_equal(np.asarray(Image.open(shot).convert("RGB")), image)
    assert image.shape == (160, 200, 3)
    for rows in (slice(0, 80), slice(80, 160)):
        for columns in (slice(0, 100), slice(100, 200)):
            tile = image[rows, columns].reshape(-1, 3)
            assert (np.abs(tile - _STATIC).sum(1) < 12).sum() > 50
            for box in (1, 2, 3):
                colour = _PALETTE[box % len(_PALETTE)]
                assert (np.abs(tile - colour).sum(1) < 12).sum() > 10, box
    assert not (tmp_path / "imgui.ini").exists()


def test_recorder_writes_png_frames_a_gif_and_the_last_frame(tmp_path):
    from fx2d_gpu.draw.viewer import Recorder

    images = [np.full((24, 32, 3), value, np.uint8) for value in (0, 120, 240)]
    gif = Recorder(gif=tmp_path / "a.gif", screenshot=tmp_path / "last.png", fps=30)
    pngs = Recorder(png_dir=tmp_path / "frames")
    for image in images:
        gif.add(image)
        pngs.add(image)
    assert gif.finish() == [f"{tmp_path / 'a.gif'} (3 frames)", str(tmp_path / "last.png")]
    assert pngs.finish() == [f"{tmp_path / 'frames'}/ (3 frames)"]
    assert Image.open(tmp_path / "a.gif").n_frames == 3
    assert np.asarray(Image.open(tmp_path / "last.png"))[0, 0, 0] == 240
    assert sorted(p.name for p in (tmp_path / "frames").iterdir()) == [
        "frame_00000.png",
        "frame_00001.png",
        "frame_00002.png",
    ]


def test_offscreen_without_vulkan_says_so_and_uses_the_image_renderer(tmp_path, arch, capsys):
    """Where GGUI cannot start (no Vulkan driver: GGUI's own RuntimeError), --offscreen
    says so and draws the frames with render.py instead, the bodies in them; the
    interactive viewer says it cannot open a window and how to record instead."""
    from fx2d_gpu.cli import main
    from fx2d_gpu.draw.viewer import WindowFactory

    def no_vulkan(*args, **kwargs):
        raise RuntimeError("Vulkan must be available for GGUI")  # what GGUI raises then

    windows = WindowFactory(window_class=no_vulkan, environ={"DISPLAY": ":99"})
    shot = tmp_path / "shot.png"
    assert (
        main(
            [
                "view",
                "--demo",
                "newtons_cradle",
                "--offscreen",
                "--frames",
                "2",
                "--screenshot",
                str(shot),
                "--size",
                "160x120",
                "--arch",
                arch,
            ],
            windows=windows,
        )
        == 0
    )
    said = capsys.readouterr().err
    assert "GGUI cannot render offscreen here" in said and "image renderer" in said
    assert "Vulkan must be available" in said
    image = np.asarray(Image.open(shot).convert("RGB")).astype(int).reshape(-1, 3)
    for ball in range(1, 6):  # discs of 6 px radius
        assert (np.abs(image - _PALETTE[ball]).sum(1) < 12).sum() > 40, ball
    with pytest.raises(SystemExit) as stop:
        main(["view", "--demo", "newtons_cradle", "--arch", arch], windows=windows)
    assert "cannot open a window: GGUI failed to start" in str(stop.value)
    assert "--offscreen --frames 300 --gif out.gif" in str(stop.value)


def fx2d(*args, env=None, wrap=(), cwd=None):
    return subprocess.run(
        [*wrap, sys.executable, "-m", "fx2d_gpu.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


def test_interactive_fx2d_view_under_xvfb_opens_a_window_and_screenshots_it(in_tmp_path):
    """The interactive viewer in a real (virtual) X display: it opens its window, draws 10
    frames (paused: a fresh process would spend most of this test loading the step's
    kernels), screenshots the window and exits. The cradle's static bar and each ball are
    drawn where the viewer's camera puts them, and the heads-up panel (ImGui's title bar
    colour) at the top left."""
    # Looked up here, not at import: the self-containment test imports every test module
    # and flags a PATH search (stat of folders outside the repository).
    if shutil.which("xvfb-run") is None:
        pytest.skip("xvfb-run is not installed (apt-get install xvfb)")
    from fx2d_gpu.demos import demo_newtons_cradle

    tmp_path = in_tmp_path  # where ImGui would write its imgui.ini
    ggui_window((32, 32)).destroy()  # skips where GGUI cannot start
    (tmp_path / "imgui.ini").unlink(missing_ok=True)
    shot = tmp_path / "window.png"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    result = fx2d(
        "view",
        "--demo",
        "newtons_cradle",
        "--paused",
        "--frames",
        "10",
        "--screenshot",
        str(shot),
        "--size",
        "480x360",
        "--arch",
        "cpu",
        env=env,
        wrap=("xvfb-run", "-a", "-s", "-screen 0 640x480x24"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    image = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert image.shape == (360, 480, 3)
    scene = demo_newtons_cradle(arch="cpu")
    controller = ViewerController(scene, size=(480, 360))  # the same camera as the window's
    view = controller.views()[0]
    position = scene.get_state().position[0]
    for dx in (-1.5, 1.5):
        at = pixel(view, position[0] + [dx, 0.0], (480, 360))
        assert np.abs(image[at] - _STATIC).sum() < 12
    for ball in range(1, 6):  # beside the centre: the spoke from it is drawn dark
        at = pixel(view, position[ball] + [0.0, 0.1], (480, 360))
        assert np.abs(image[at] - _PALETTE[ball]).sum() < 12, (ball, image[at])
    assert np.abs(image[3, 3] - [41, 74, 122]).sum() < 12
    assert not (tmp_path / "imgui.ini").exists()


def test_fx2d_view_offscreen_draws_every_demo_and_example(in_tmp_path, arch):
    """`fx2d view` of every demo and every example scene, one offscreen GGUI frame each: a
    picture with the scene in it (pixels neither the background nor all one colour)."""
    from fx2d_gpu import examples
    from fx2d_gpu.cli import main
    from fx2d_gpu.demos import DEMOS

    tmp_path = in_tmp_path
    ggui_window((32, 32)).destroy()  # skips where GGUI cannot start
    sources = [("--demo", name) for name in sorted(DEMOS)]
    sources += [("--example", name) for name in examples.names()]
    for flag, name in sources:
        shot = tmp_path / f"{name}.png"
        assert (
            main(
                [
                    "view",
                    flag,
                    name,
                    "--offscreen",
                    "--frames",
                    "1",
                    "--screenshot",
                    str(shot),
                    "--size",
                    "160x120",
                    "--no-hud",
                    "--arch",
                    arch,
                ]
            )
            == 0
        ), name
        image = np.asarray(Image.open(shot).convert("RGB")).astype(int).reshape(-1, 3)
        background = np.median(image, axis=0)
        drawn = np.abs(image - background).sum(1) > 30
        assert drawn.sum() > 40, (name, drawn.sum())
        assert len(np.unique(image[drawn], axis=0)) > 1, name  # fills and their borders
