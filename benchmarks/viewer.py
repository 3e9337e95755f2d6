"""Seeing large scenes: the viewer's frame geometry and the image renderer, on the device,
beside the NumPy code they replaced.

    python -m benchmarks.viewer [--arch cpu] [--quick] [--sizes 1000,10000,100000]
                                [--legacy-max 10000] [--results DIR]

For a poured pile of N boxes and discs (scenes.pile, 30 steps into its pour: every body
falling), per N (the median timed window after a first call):
    step            one Scene.step, for scale
    geometry        FrameGeometry.update of the whole scene in one view, every body drawn
                    again (the view moves a little each frame: the worst case), in each
                    buffer layout ("compact": the least memory; "ggui": GGUI's vertex
                    layout, which draw() hands to GGUI as it is)
    geometry_step   the same after a step, the view kept (bodies at rest are skipped)
    render          render.render, an 800 x 600 image of the scene
    ggui_frame      an offscreen GGUI window (1024 x 768): update, draw and read the
                    image back (get_image_buffer_as_numpy; software Vulkan on a machine
                    without a GPU), where GGUI can start
and "before" rows where N <= --legacy-max (they take seconds a frame; the brief's
measurements at 100,000 bodies: build_mesh 16.9 s, render 26.4 s): the NumPy build_mesh
and renderer as they were (copied below), and a GGUI frame of the old viewer (build_mesh,
then fields uploaded from NumPy).

On the Vulkan backend, where GGUI takes the frame on the device (frame_geometry.
DEVICE_HAND_OFF), the ggui_frame rows are timed twice: handed over on the device, and
through the host ("host hand-off").

ms is wall time per call; cpu_ms this process's CPU time per call, every thread's: on a
machine shared with other work, wall time grows with the others' load, CPU time less so.
Saves benchmarks/results/<device>/viewer.csv (viewer_vulkan.csv on the Vulkan backend,
beside another backend's on the same device).
"""

import argparse
import datetime
import math
import time

import numpy as np

from fx2d_gpu.device import runtime

from .common import RESULTS, device_name, print_table, save_csv

SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (200,)
POUR_STEPS = 30
IMAGE_SIZE = (800, 600)
WINDOW_SIZE = (1024, 768)


# ---------------------------------------------------------------------------- before
# The NumPy code this replaced, as it was (fx2d_gpu/draw/viewer.py's build_mesh and
# fx2d_gpu/draw/render.py's renderer before issue 45), kept here to be timed.
_STATIC = np.array([90, 90, 100], np.uint8)
_PALETTE = np.array(
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
_BACKGROUND = np.array([250, 250, 248], np.uint8)
_CIRCLE_SEGMENTS = 20


def legacy_build_mesh(scene, state, world=0, bounds=None, rect=(0.0, 0.0, 1.0, 1.0), aspect=4 / 3):
    """viewer.build_mesh before issue 45: (triangles, their colours, lines, their colours)
    in window coordinates, body by body."""
    from fx2d_gpu.draw.render import default_bounds, drawn, visual_of
    from fx2d_gpu.enums import SHAPE_CIRCLE
    from fx2d_gpu.shapes import AREALESS_KINDS, outline, rotation

    if bounds is None:
        bounds = default_bounds(scene, world)
    xmin, ymin, xmax, ymax = bounds
    rx0, ry0, rx1, ry1 = rect
    sx = (rx1 - rx0) / (xmax - xmin)
    sy = (ry1 - ry0) / (ymax - ymin)
    scale_x = min(sx, sy / aspect)
    scale_y = scale_x * aspect
    cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
    mx, my = (rx0 + rx1) / 2, (ry0 + ry1) / 2

    def to_window(points):
        return np.stack(
            [(points[:, 0] - cx) * scale_x + mx, (points[:, 1] - cy) * scale_y + my], axis=1
        )

    tris, tri_cols, lines, line_cols = [], [], [], []
    ring = np.linspace(0, 2 * np.pi, _CIRCLE_SEGMENTS, endpoint=False)
    for b in range(scene.n_bodies):
        if not drawn(scene, b):
            continue
        shape = scene.body_shape(b)
        visual = visual_of(scene, b)
        if visual is not None and visual["shape"] is not None:
            shape = visual["shape"]
        fill = (_STATIC if scene.body_mass(b) == 0 else _PALETTE[b % len(_PALETTE)]) / 255.0
        if visual is not None and isinstance(visual["fill"], tuple):
            fill = np.array(visual["fill"][:3]) / 255.0
        edge = fill * 0.5
        rot = rotation(state.angle[world, b])
        pos = state.position[world, b]
        if shape.kind == SHAPE_CIRCLE:
            centre = pos + rot @ shape.center
            boundary = centre + shape.radius * np.stack([np.cos(ring), np.sin(ring)], 1)
            mark = np.array([centre, centre + rot @ np.array([shape.radius, 0.0])])
            lines.append(to_window(mark))
            line_cols.append(np.tile(edge, (2, 1)))
        elif shape.kind in AREALESS_KINDS:
            lines.append(to_window(pos + shape.vertices @ rot.T))
            line_cols.append(np.tile(edge, (2, 1)))
            continue
        else:
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
        return (
            np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, width), np.float32)
        )

    return stack(tris, 2), stack(tri_cols, 3), stack(lines, 2), stack(line_cols, 3)


def legacy_render(
    scene, world=0, size=(800, 600), bounds=None, contacts=False, state=None, rays=None
):
    """render.render before issue 45: (height, width, 3) uint8, NumPy, body by body (a
    full-image mask per dot)."""
    from fx2d_gpu.draw.render import _rgb, default_bounds, drawn, visual_of
    from fx2d_gpu.enums import SHAPE_CIRCLE
    from fx2d_gpu.shapes import AREALESS_KINDS, outline, rotation

    width, height = size
    background = scene.meta.get("background", _BACKGROUND)
    if not isinstance(background, tuple | list | np.ndarray):
        background = _BACKGROUND
    background = _rgb(background, (255, 255, 255))
    image = np.empty((height, width, 3), np.uint8)
    image[:] = background
    xmin, ymin, xmax, ymax = default_bounds(scene, world) if bounds is None else bounds
    scale = min(width / (xmax - xmin), height / (ymax - ymin))
    centre_m = ((xmin + xmax) / 2, (ymin + ymax) / 2)

    def to_pixels(points):
        points = np.atleast_2d(points)
        return np.stack(
            [
                (points[:, 0] - centre_m[0]) * scale + width / 2,
                height / 2 - (points[:, 1] - centre_m[1]) * scale,
            ],
            axis=1,
        )

    def pixel_grid(lo, hi):
        x0, y0 = np.maximum(np.floor(lo).astype(int), 0)
        x1, y1 = np.minimum(np.ceil(hi).astype(int) + 1, [width, height])
        if x0 >= x1 or y0 >= y1:
            return None
        ys, xs = np.mgrid[y0:y1, x0:x1]
        return (slice(y0, y1), slice(x0, x1)), xs + 0.5, ys + 0.5

    state = scene.get_state() if state is None else state
    for b in range(scene.n_bodies):
        if not drawn(scene, b):
            continue
        shape = scene.body_shape(b)
        colour = _STATIC if scene.body_mass(b) == 0 else _PALETTE[b % len(_PALETTE)]
        border = colour // 2
        visual = visual_of(scene, b)
        if visual is not None:
            shape = visual["shape"] or shape
            if isinstance(visual["fill"], tuple):
                colour = _rgb(visual["fill"], background)
                border = colour // 2
            if isinstance(visual["border"], tuple) and visual["border_thickness"] > 0:
                border = _rgb(visual["border"], background)
        position, rot = state.position[world, b], rotation(state.angle[world, b])
        if shape.kind == SHAPE_CIRCLE:
            centre = to_pixels(position + rot @ shape.center)[0]
            r = shape.radius * scale
            grid = pixel_grid(centre - r, centre + r)
            if grid is None:
                continue
            window, xs, ys = grid
            d2 = (xs - centre[0]) ** 2 + (ys - centre[1]) ** 2
            image[window][d2 <= r * r] = colour
            image[window][(d2 <= r * r) & (d2 >= (r - max(1.0, 0.08 * r)) ** 2)] = border
            tip = to_pixels(position + rot @ (shape.center + [shape.radius, 0.0]))[0]
            _legacy_line(image, centre, tip, border)
        elif shape.kind in AREALESS_KINDS:
            ends = to_pixels(position + shape.vertices @ rot.T)
            for offset in (-0.5, 0.0, 0.5):
                _legacy_line(image, ends[0] + offset, ends[1] + offset, border)
        else:
            verts = to_pixels(position + outline(shape) @ rot.T)
            grid = pixel_grid(verts.min(0), verts.max(0))
            if grid is None:
                continue
            window, xs, ys = grid
            inside = np.ones(xs.shape, bool)
            k = len(verts)
            for i in range(k):
                a, e = verts[i], verts[(i + 1) % k] - verts[i]
                inside &= (e[0] * (ys - a[1]) - e[1] * (xs - a[0])) <= 0
            image[window][inside] = colour
            for i in range(k):
                _legacy_line(image, verts[i], verts[(i + 1) % k], border)
    if contacts:
        found = scene.contacts(world)
        red = np.array([200, 0, 0], np.uint8)
        for i in range(len(found)):
            for k in range(found.point_count[i]):
                p = to_pixels(found.points[i, k])[0]
                tip = to_pixels(found.points[i, k] + found.normal[i] * 6 / scale)[0]
                _legacy_line(image, p, tip, red)
                _legacy_disc(image, p, 2.5, red)
    if rays is not None:
        starts, ends, hit = (np.asarray(a) for a in rays)
        for a, b, struck in zip(to_pixels(starts), to_pixels(ends), hit, strict=True):
            colour = np.array([220, 40, 40] if struck else [120, 200, 120], np.uint8)
            _legacy_line(image, a, b, colour)
            if struck:
                _legacy_disc(image, b, 2.0, colour)
    return image


def _legacy_line(image, a, b, colour):
    n = int(max(abs(b[0] - a[0]), abs(b[1] - a[1]))) + 1
    xs = np.linspace(a[0], b[0], n).astype(int)
    ys = np.linspace(a[1], b[1], n).astype(int)
    ok = (xs >= 0) & (xs < image.shape[1]) & (ys >= 0) & (ys < image.shape[0])
    image[ys[ok], xs[ok]] = colour


def _legacy_disc(image, centre, radius, colour):
    y, x = np.ogrid[: image.shape[0], : image.shape[1]]
    image[(x + 0.5 - centre[0]) ** 2 + (y + 0.5 - centre[1]) ** 2 <= radius**2] = colour


# ---------------------------------------------------------------------------- timing
def _timed(fn, repeats: int, windows: int) -> tuple[float, float]:
    """(wall ms, CPU ms) per call: the window of `repeats` calls with the median wall time,
    after a first call. CPU ms is this process's CPU time (every thread's): on a machine
    shared with other work, wall time grows with their load and CPU time much less."""
    import taichi as ti

    fn()
    ti.sync()
    times = []
    for _ in range(windows):
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(repeats):
            fn()
        ti.sync()
        times.append(
            (
                (time.perf_counter() - start) * 1000.0 / repeats,
                (time.process_time() - cpu) * 1000.0 / repeats,
            )
        )
    return sorted(times)[len(times) // 2]


def _each_after(before, fn, repeats: int) -> tuple[float, float]:
    """(wall ms, CPU ms) of fn(), the median call of `repeats`, each after an untimed
    before()."""
    import taichi as ti

    before()
    fn()  # compiles
    times = []
    for _ in range(repeats):
        before()
        ti.sync()
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        ti.sync()
        times.append(((time.perf_counter() - start) * 1000.0, (time.process_time() - cpu) * 1000.0))
    return sorted(times)[len(times) // 2]


def _ggui_window():
    """An offscreen GGUI window, or (None, why) where GGUI cannot start."""
    import taichi as ti

    try:
        return ti.ui.Window("benchmarks.viewer", WINDOW_SIZE, show_window=False), ""
    except Exception as exc:  # noqa: BLE001 - GGUI raises RuntimeError variants
        return None, f"GGUI cannot open a window here: {exc}"


def measure(n: int, quick: bool, legacy_max: int, window) -> list[dict]:
    """The rows of one pile size."""
    from fx2d_gpu import scenes
    from fx2d_gpu.draw import render
    from fx2d_gpu.draw.frame_geometry import FrameGeometry, FrameView

    scene = scenes.pile(n, arch="auto", seed=0)  # the backend run() started
    for _ in range(POUR_STEPS if not quick else 3):
        scene.step(1 / 60)
    bounds = render.default_bounds(scene)
    aspect = WINDOW_SIZE[0] / WINDOW_SIZE[1]
    fast = n <= 20_000
    repeats, windows = (2, 2) if quick else ((5, 3) if fast else (3, 3))
    rows = []

    def row(measure_name, implementation, timing, note=""):
        ms, cpu_ms = timing
        rows.append(
            {
                "bodies": scene.n_bodies,
                "measure": measure_name,
                "implementation": implementation,
                "ms": round(ms, 3),
                "cpu_ms": round(cpu_ms, 3),
                "note": note,
            }
        )
        print(
            f"  {scene.n_bodies:>7} {measure_name:14s} {implementation:22s} {ms:10.2f} ms"
            f" (CPU {cpu_ms:.2f} ms)",
            flush=True,
        )

    row("step", "device", _timed(lambda: scene.step(1 / 60), 1 if not fast else 3, windows))
    views = [FrameView(0, (0.0, 0.0, 1.0, 1.0), bounds)]
    nudged = [FrameView(0, (0.0, 0.0, 1.0, 1.0), tuple(np.add(bounds, 1e-3)))]
    for layout in ("compact", "ggui"):
        geometry = FrameGeometry(scene, layout=layout)
        geometry.update(views, aspect)
        flip = [0]

        def moved(geometry=geometry, flip=flip):
            flip[0] ^= 1
            geometry.update(nudged if flip[0] else views, aspect)

        frame = geometry.update(views, aspect)
        row(
            "geometry",
            f"device ({layout})",
            _timed(moved, repeats, windows),
            f"{geometry.n_triangle_vertices} triangle, {geometry.n_line_vertices} line "
            f"corners drawn from {frame.triangles.count} + {frame.lines.count} vertices, "
            "every body drawn again",
        )
        ms = _each_after(
            lambda: scene.step(1 / 60),
            lambda geometry=geometry: geometry.update(views, aspect),
            repeats if fast else 3,
        )
        row("geometry_step", f"device ({layout})", ms, "after a step, the view kept")
    state = scene.get_state()
    if n <= legacy_max:
        ms = _timed(
            lambda: legacy_build_mesh(scene, state, 0, bounds, aspect=aspect),
            1,
            1 if not quick else 2,
        )
        row("geometry", "numpy (before)", ms, "viewer.build_mesh as it was")
    row(
        "render",
        "device",
        _timed(lambda: render.render(scene, size=IMAGE_SIZE, bounds=bounds), repeats, windows),
        f"{IMAGE_SIZE[0]}x{IMAGE_SIZE[1]}",
    )
    if n <= legacy_max:
        ms = _timed(
            lambda: legacy_render(scene, size=IMAGE_SIZE, bounds=bounds), 1, 1 if not quick else 2
        )
        row("render", "numpy (before)", ms, f"{IMAGE_SIZE[0]}x{IMAGE_SIZE[1]}, as it was")
    if window is not None:
        _ggui_frames(scene, window, (views, nudged), aspect, n <= legacy_max, quick, row)
    return rows


def _ggui_frames(scene, window, views, aspect, legacy: bool, quick: bool, row):
    """Whole offscreen GGUI frames, every body drawn again (the view moves a little each
    frame), timed into `row`: FrameGeometry's (each layout), and the old viewer's."""
    import taichi as ti

    from fx2d_gpu.draw import frame_geometry
    from fx2d_gpu.draw.frame_geometry import FrameGeometry

    canvas = window.get_canvas()
    repeats, windows = (1, 2) if quick else (2, 3)
    # Where GGUI takes the frame on the device (frame_geometry.DEVICE_HAND_OFF: the Vulkan
    # backend), the same frames handed over through the host too, for comparison.
    hand_offs = [frame_geometry.DEVICE_HAND_OFF]
    if runtime.backend_name() in frame_geometry.DEVICE_HAND_OFF:
        hand_offs.append(())
    for layout in ("ggui", "compact"):
        for hand_off in hand_offs:
            frame_geometry.DEVICE_HAND_OFF = hand_off
            geometry = FrameGeometry(scene, layout=layout)
            flip = [0]

            def frame(geometry=geometry, flip=flip):
                flip[0] ^= 1
                canvas.set_background_color((0.98, 0.98, 0.97))
                geometry.update(views[flip[0]], aspect).draw(canvas)
                window.get_image_buffer_as_numpy()

            through = "" if hand_off == hand_offs[0] else ", host hand-off"
            row(
                "ggui_frame",
                f"device ({layout}{through})",
                _timed(frame, repeats, windows),
                f"{WINDOW_SIZE[0]}x{WINDOW_SIZE[1]} offscreen GGUI (Vulkan): update, draw, "
                "image read back",
            )
        frame_geometry.DEVICE_HAND_OFF = hand_offs[0]
    if legacy:
        fields = {}

        def upload(name, data, width):
            if name not in fields or fields[name].shape[0] != max(len(data), 1):
                fields[name] = ti.Vector.field(width, ti.f32, shape=max(len(data), 1))
            fields[name].from_numpy(data)
            return fields[name]

        def old_frame():
            state = scene.get_state()
            tris, tri_cols, lines, line_cols = legacy_build_mesh(
                scene, state, 0, views[0][0].bounds, aspect=aspect
            )
            canvas.set_background_color((0.98, 0.98, 0.97))
            canvas.triangles(upload("t", tris, 2), per_vertex_color=upload("tc", tri_cols, 3))
            canvas.lines(
                upload("l", lines, 2), width=0.002, per_vertex_color=upload("lc", line_cols, 3)
            )
            window.get_image_buffer_as_numpy()

        row(
            "ggui_frame",
            "numpy (before)",
            _timed(old_frame, 1, 1 if not quick else 2),
            "build_mesh, fields uploaded from NumPy",
        )


def run(
    sizes=SIZES, arch: str = "auto", quick: bool = False, legacy_max: int = 10_000, results=None
) -> list[dict]:
    backend = runtime.ensure_initialized(arch)
    window, why = _ggui_window()
    if window is None:
        print(f"(no GGUI frames: {why})")
    rows = []
    for n in sizes:
        rows += measure(n, quick, legacy_max, window)
    if window is not None:
        window.destroy()
    device = device_name(backend)
    for row in rows:
        row.update(device=device, backend=backend, date=datetime.date.today().isoformat())
    print_table(
        [{k: r[k] for k in ("bodies", "measure", "implementation", "ms", "cpu_ms")} for r in rows]
    )
    path = save_csv(backend, "viewer_vulkan" if backend == "vulkan" else "viewer", rows, results)
    print(f"saved {path}")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="auto")
    parser.add_argument("--quick", action="store_true", help="a tiny pile (for tests)")
    parser.add_argument(
        "--sizes", default=None, help="comma-separated pile sizes (default: 1000,10000,100000)"
    )
    parser.add_argument(
        "--legacy-max",
        type=int,
        default=10_000,
        help="largest pile the old NumPy code is timed on (default 10000)",
    )
    parser.add_argument("--results", default=None, help=f"results folder (default {RESULTS})")
    args = parser.parse_args(argv)
    sizes = (
        (QUICK_SIZES if args.quick else SIZES)
        if args.sizes is None
        else tuple(int(n) for n in args.sizes.split(","))
    )
    start = time.perf_counter()
    run(sizes, args.arch, args.quick, args.legacy_max, args.results)
    print(f"{math.ceil(time.perf_counter() - start)} s")


if __name__ == "__main__":
    main()
