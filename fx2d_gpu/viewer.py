"""Interactive viewer on Taichi GGUI, and the triangle mesh it draws.

The mesh (filled shapes as triangle fans, outlines, circle orientation marks) is built with
NumPy from the scene's state, in normalised window coordinates, and handed to GGUI's canvas;
`build_mesh` needs no window, so it is tested headlessly. Where GGUI cannot start (no display,
no Vulkan) `run_viewer` raises ViewerUnavailable with the reason, and `fx2d view` suggests
rendering to a GIF instead (render.py draws the same scene without a window).

Keys: space pause/run, n single step, r reset, = / - zoom, arrows pan, c contacts, esc quit.
"""

import os
import sys

import numpy as np

from .enums import SHAPE_CIRCLE
from .render import _PALETTE, _STATIC, default_bounds, drawn, visual_of
from .shapes import AREALESS_KINDS, outline, rotation

CIRCLE_SEGMENTS = 20


class ViewerUnavailable(RuntimeError):
    """GGUI could not open a window here."""


def _body_colours(scene, b):
    fill = (_STATIC if scene.body_mass(b) == 0 else _PALETTE[b % len(_PALETTE)]) / 255.0
    visual = visual_of(scene, b)
    if visual is not None and isinstance(visual["fill"], tuple):
        fill = np.array(visual["fill"][:3]) / 255.0
    return fill, fill * 0.5


def build_mesh(scene, state, world=0, bounds=None, rect=(0.0, 0.0, 1.0, 1.0), aspect=4 / 3):
    """Triangles and line segments drawing `world`, in normalised window coordinates.

    rect: (x0, y0, x1, y1) part of the window to draw into (tiles for batched scenes).
    Returns (triangles (3t, 2), triangle colours (3t, 3), lines (2l, 2), line colours (2l, 3)),
    all float32; y is up, as in GGUI.
    """
    if bounds is None:
        bounds = default_bounds(scene, world)
    xmin, ymin, xmax, ymax = bounds
    rx0, ry0, rx1, ry1 = rect
    # Metres -> window units (x in widths, y in heights), the same metres per pixel both ways:
    # scale_y = scale_x * width / height.
    sx = (rx1 - rx0) / (xmax - xmin)
    sy = (ry1 - ry0) / (ymax - ymin)
    scale_x = min(sx, sy / aspect)
    scale_y = scale_x * aspect
    cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
    mx, my = (rx0 + rx1) / 2, (ry0 + ry1) / 2

    def to_window(points):
        return np.stack([(points[:, 0] - cx) * scale_x + mx, (points[:, 1] - cy) * scale_y + my],
                        axis=1)

    tris, tri_cols, lines, line_cols = [], [], [], []
    ring = np.linspace(0, 2 * np.pi, CIRCLE_SEGMENTS, endpoint=False)
    for b in range(scene.n_bodies):
        if not drawn(scene, b):
            continue
        shape = scene.body_shape(b)
        visual = visual_of(scene, b)
        if visual is not None and visual["shape"] is not None:
            shape = visual["shape"]
        fill, edge = _body_colours(scene, b)
        rot = rotation(state.angle[world, b])
        pos = state.position[world, b]
        if shape.kind == SHAPE_CIRCLE:
            centre = pos + rot @ shape.center
            boundary = centre + shape.radius * np.stack([np.cos(ring), np.sin(ring)], 1)
            mark = np.array([centre, centre + rot @ np.array([shape.radius, 0.0])])
            lines.append(to_window(mark))
            line_cols.append(np.tile(edge, (2, 1)))
        elif shape.kind in AREALESS_KINDS:  # edges, chain links: a line, nothing to fill
            lines.append(to_window(pos + shape.vertices @ rot.T))
            line_cols.append(np.tile(edge, (2, 1)))
            continue
        else:  # polygons, rounded or not, and capsules
            centre = pos + rot @ shape.vertices.mean(axis=0)
            boundary = pos + outline(shape) @ rot.T
        k = len(boundary)
        nxt = np.roll(boundary, -1, axis=0)
        fan = np.stack([np.tile(centre, (k, 1)), boundary, nxt], axis=1).reshape(-1, 2)
        tris.append(to_window(fan))
        tri_cols.append(np.tile(fill, (3 * k, 1)))
        lines.append(to_window(np.stack([boundary, nxt], axis=1).reshape(-1, 2)))
        line_cols.append(np.tile(edge, (2 * k, 1)))

    def stack(parts, width):
        return (np.concatenate(parts).astype(np.float32) if parts
                else np.zeros((0, width), np.float32))

    return stack(tris, 2), stack(tri_cols, 3), stack(lines, 2), stack(line_cols, 3)


def build_tiles(scene, state, bounds=None, aspect=4 / 3, max_tiles=64):
    """build_mesh for every world (up to max_tiles), laid out as a grid of tiles."""
    n = min(scene.n_worlds, max_tiles)
    columns = int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / columns))
    parts = [[], [], [], []]
    for w in range(n):
        r, c = divmod(w, columns)
        rect = (c / columns, 1 - (r + 1) / rows, (c + 1) / columns, 1 - r / rows)
        tile_aspect = aspect * rows / columns
        for i, part in enumerate(build_mesh(scene, state, w, bounds, rect, tile_aspect)):
            parts[i].append(part)
    return tuple(np.concatenate(p) for p in parts)


def _check_display():
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY")
                                                 or os.environ.get("WAYLAND_DISPLAY")):
        raise ViewerUnavailable("no display (neither DISPLAY nor WAYLAND_DISPLAY is set)")


def run_viewer(scene_factory, dt=1 / 60, size=(1024, 768)):
    """Open a GGUI window on the scene made by scene_factory() and run it interactively."""
    import taichi as ti

    _check_display()
    scene = scene_factory()
    try:
        window = ti.ui.Window("fx2d_gpu", size, vsync=True)
    except Exception as exc:  # GGUI raises RuntimeError variants without Vulkan
        raise ViewerUnavailable(f"GGUI failed to start ({exc})") from None
    canvas = window.get_canvas()
    aspect = size[0] / size[1]
    bounds = np.array(default_bounds(scene), float)
    paused, show_contacts = False, False
    fields = {}

    def upload(name, data, width):
        n = max(len(data), 1)
        if name not in fields or fields[name].shape[0] < n:
            fields[name] = ti.Vector.field(width, ti.f32, shape=max(n, 2 * len(data)))
        padded = np.zeros((fields[name].shape[0], width), np.float32)
        padded[: len(data)] = data
        fields[name].from_numpy(padded)
        return fields[name]

    while window.running:
        for event in window.get_events(ti.ui.PRESS):
            key = event.key
            if key == ti.ui.ESCAPE:
                window.running = False
            elif key == " ":
                paused = not paused
            elif key == "n":
                scene.step(dt)
            elif key == "r":
                scene = scene_factory()
            elif key == "c":
                show_contacts = not show_contacts
            elif key in ("=", "-"):
                centre = (bounds[:2] + bounds[2:]) / 2
                half = (bounds[2:] - bounds[:2]) / 2 * (0.8 if key == "=" else 1.25)
                bounds = np.concatenate([centre - half, centre + half])
            elif key in (ti.ui.LEFT, ti.ui.RIGHT, ti.ui.UP, ti.ui.DOWN):
                step = 0.1 * (bounds[2:] - bounds[:2])
                delta = {ti.ui.LEFT: (-step[0], 0), ti.ui.RIGHT: (step[0], 0),
                         ti.ui.UP: (0, step[1]), ti.ui.DOWN: (0, -step[1])}[key]
                bounds = bounds + np.array([*delta, *delta])
        if not paused:
            scene.step(dt)
        state = scene.get_state()
        tris, tri_cols, lines, line_cols = build_tiles(scene, state, tuple(bounds), aspect)
        canvas.set_background_color((0.97, 0.97, 0.96))
        if len(tris):
            canvas.triangles(upload("t", tris, 2), per_vertex_color=upload("tc", tri_cols, 3))
        if len(lines):
            canvas.lines(upload("l", lines, 2), width=0.002,
                         per_vertex_color=upload("lc", line_cols, 3))
        if show_contacts and scene.n_worlds == 1:
            found = scene.contacts()
            points = [found.points[i, k] for i in range(len(found))
                      for k in range(found.point_count[i])]
            if points:
                xmin, ymin, xmax, ymax = bounds
                p = np.array(points)
                p = np.stack([(p[:, 0] - xmin) / (xmax - xmin), (p[:, 1] - ymin) / (ymax - ymin)],
                             1)
                canvas.circles(upload("p", p, 2), radius=0.004, color=(0.8, 0.0, 0.0))
        window.show()
