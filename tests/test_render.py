"""The image renderer (fx2d_gpu.draw.render, one kernel a frame): colours at known pixels, the
same picture as the NumPy renderer it replaced (benchmarks.viewer.legacy_render, body by
body), tiles, a scene file's background, and PNG / GIF files written with Pillow."""

import numpy as np
from PIL import Image

import fx2d_gpu as fx
from benchmarks.viewer import legacy_render
from fx2d_gpu import examples, shapes
from fx2d_gpu.draw.render import (
    default_bounds,
    frame_bounds,
    render,
    render_worlds,
    write_gif,
    write_png,
)

from .helpers import every_shape_kind

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
    np.uint8,
)
BACKGROUND = (250, 250, 248)


def two_bodies(arch):
    """A static ground (body 0), a box (1) centred at (2, 1.5) m and a disc (2) at (6, 4) m,
    no gravity: in bounds (0, 0, 8, 6) at 160 x 120 px, 20 px per m, y up."""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
    scene.add_box((4.0, 0.25), (8.0, 0.5), mass=0.0)
    scene.add_box((2.0, 1.5), (1.6, 1.0))
    scene.add_circle((6.0, 4.0), 0.8)
    return scene


def pixel(x, y):
    """(row, column) of the point (x, y) m at 20 px per m in a 120 px high image."""
    return int(120 - 20 * y), int(20 * x)


def test_fills_borders_marks_and_background_where_the_state_puts_them(arch):
    scene = two_bodies(arch)
    image = render(scene, size=(160, 120), bounds=(0.0, 0.0, 8.0, 6.0))
    assert image.shape == (120, 160, 3) and image.dtype == np.uint8
    assert tuple(image[pixel(2.0, 1.5)]) == tuple(PALETTE[1])  # the box's fill
    assert tuple(image[pixel(6.0, 4.3)]) == tuple(PALETTE[2])  # the disc's
    assert tuple(image[pixel(6.0, 4.795)]) == tuple(PALETTE[2] // 2)  # its rim
    assert tuple(image[pixel(6.5, 4.0)]) == tuple(PALETTE[2] // 2)  # its mark, along x
    assert tuple(image[pixel(4.0, 0.25)]) == (90, 90, 100)  # the static ground, grey
    assert tuple(image[pixel(4.0, 3.0)]) == BACKGROUND
    # The box moved up 2 m: drawn there, gone from where it was.
    state = scene.get_state()
    state.position[0, 1] += [0.0, 2.0]
    scene.set_state(state)
    image = render(scene, size=(160, 120), bounds=(0.0, 0.0, 8.0, 6.0))
    assert tuple(image[pixel(2.0, 3.5)]) == tuple(PALETTE[1])
    assert tuple(image[pixel(2.0, 1.5)]) == BACKGROUND


def every_kind(arch, n_worlds=1):
    """helpers.every_shape_kind, 50 steps after each world was thrown."""
    return every_shape_kind(arch, n_worlds, steps=50)


def assert_nearly_equal(image, expected, share=1e-3):
    """The same picture but for a few pixels (at most `share` of them) on a shape's edge,
    where float32 on the device and float64 in NumPy round differently."""
    assert image.shape == expected.shape
    differ = (image != expected).any(axis=-1)
    assert differ.mean() <= share, differ.sum()


def test_the_same_picture_as_the_numpy_renderer_with_contacts_and_rays(arch):
    scene = every_kind(arch)
    assert len(scene.contacts()) > 0
    starts = np.array([[-8.0, 5.0], [0.0, 5.0], [8.0, 5.0]])
    ends = np.array([[-8.0, 3.0], [0.0, 2.6], [8.0, 4.0]])
    rays = (starts, ends, np.array([True, True, False]))
    for size, bounds in (((400, 240), (-10.0, -1.0, 10.0, 6.0)), ((300, 300), None)):
        image = render(scene, size=size, bounds=bounds, contacts=True, rays=rays)
        expected = legacy_render(scene, size=size, bounds=bounds, contacts=True, rays=rays)
        assert_nearly_equal(image, expected)
        assert (image == [200, 0, 0]).all(-1).sum() > 10  # the contact dots
        assert (image == [120, 200, 120]).all(-1).sum() > 10  # the missed ray


def test_tiles_show_each_world_as_it_is(arch):
    scene = every_kind(arch, n_worlds=3)
    image = render_worlds(scene, size=(400, 300), bounds=(-10.0, -1.0, 10.0, 6.0))
    assert image.shape == (300, 400, 3)
    state = scene.get_state()
    for w in range(3):  # a 2 x 2 grid of 200 x 150 tiles, the last one empty
        r, c = divmod(w, 2)
        expected = legacy_render(scene, w, (200, 150), (-10.0, -1.0, 10.0, 6.0), state=state)
        assert_nearly_equal(
            image[r * 150 : (r + 1) * 150 - 1, c * 200 : (c + 1) * 200 - 1], expected[:-1, :-1]
        )
    assert (image[150:, 200:] == 40).all()  # no fourth world: the gap's grey


def test_a_scene_file_background_visual_colours_and_frame(arch):
    scene = fx.load_scene(examples.path("truck"), arch=arch)
    scene.step(1 / 60)
    assert default_bounds(scene) == (0.0, 0.0, 12.0, 6.0)  # the file's size
    image = render(scene, size=(240, 120))
    assert tuple(image[2, 2]) == (225, 225, 225)  # the file's background
    assert_nearly_equal(image, legacy_render(scene, size=(240, 120)))


def test_frame_bounds_hold_every_body(arch):
    scene = every_kind(arch)
    state = scene.get_state()
    lo, hi = np.full(2, np.inf), np.full(2, -np.inf)
    for b in range(scene.n_bodies):  # body by body, each collision shape's outline
        shape = scene.body_shape(b)
        p, angle = state.position[0, b], state.angle[0, b]
        if shape.kind == shapes.SHAPE_CIRCLE:
            points = p + np.array([[-1.0, -1.0], [1.0, 1.0]]) * shape.bounding_radius
        else:
            points = p + shapes.outline(shape) @ shapes.rotation(angle).T
        lo, hi = np.minimum(lo, points.min(0)), np.maximum(hi, points.max(0))
    pad = 0.05 * max(hi - lo)
    np.testing.assert_allclose(frame_bounds(scene), (*(lo - pad), *(hi + pad)), atol=1e-9)


def test_png_and_gif_written_with_pillow_read_back_the_same(arch, tmp_path):
    scene = two_bodies(arch)
    first = render(scene, size=(160, 120), bounds=(0.0, 0.0, 8.0, 6.0))
    write_png(tmp_path / "frame.png", first)
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "frame.png")), first)
    state = scene.get_state()
    state.position[0, 2] -= [3.0, 1.0]
    scene.set_state(state)
    second = render(scene, size=(160, 120), bounds=(0.0, 0.0, 8.0, 6.0))
    write_gif(tmp_path / "frames.gif", [first, second], fps=10)
    gif = Image.open(tmp_path / "frames.gif")
    assert gif.n_frames == 2
    for k, frame in enumerate((first, second)):  # a handful of colours: kept exactly
        gif.seek(k)
        np.testing.assert_array_equal(np.asarray(gif.convert("RGB")), frame)
