"""Headless rendering of a scene to an RGB image (NumPy only), PNG and GIF writers.

This draws what the device holds: filled shapes (a scene file's visual geometry and colours
when it has them), circle orientation marks and, optionally, contact points and normals.
Batched scenes are drawn as a grid of tiles, one per world. It needs no window or GPU, so it
works on any machine; the GGUI viewer (viewer.py) draws the same shapes in a window.
"""

import struct
import zlib

import numpy as np

from .shapes import AREALESS_KINDS, SHAPE_CIRCLE, outline

_STATIC = np.array([90, 90, 100], np.uint8)
_PALETTE = np.array([[66, 133, 244], [219, 68, 55], [244, 180, 0], [15, 157, 88],
                     [171, 71, 188], [0, 172, 193], [255, 112, 67]], np.uint8)
_BACKGROUND = np.array([250, 250, 248], np.uint8)
_RAY_HIT = np.array([220, 40, 40], np.uint8)
_RAY_MISS = np.array([120, 200, 120], np.uint8)


def visual_of(scene, body: int) -> dict | None:
    """The body's visuals entry from a scene file, or None (a scene built in code, or a body
    added after the file was loaded)."""
    visuals = scene.visuals or ()
    return visuals[body] if body < len(visuals) else None


def drawn(scene, body: int) -> bool:
    """False for bodies that are not scene content: the boundary walls a scene file gets
    (io.scene_yaml marks their visuals entry `boundary`)."""
    visual = visual_of(scene, body)
    return not (visual is not None and visual.get("boundary"))


def frame_bounds(scene, world: int = 0, padding: float = 0.05):
    """(xmin, ymin, xmax, ymax), m: the box around every body of `world`."""
    state = scene.get_state()
    lo, hi = np.full(2, np.inf), np.full(2, -np.inf)
    for b in range(scene.n_bodies):
        if not drawn(scene, b):
            continue
        shape = scene.body_shape(b)
        p, angle = state.position[world, b], state.angle[world, b]
        if shape.kind != SHAPE_CIRCLE:
            c, s = np.cos(angle), np.sin(angle)
            points = p + outline(shape) @ np.array([[c, -s], [s, c]]).T
        else:
            points = p + np.array([[-1.0, -1.0], [1.0, 1.0]]) * shape.bounding_radius
        lo, hi = np.minimum(lo, points.min(0)), np.maximum(hi, points.max(0))
    pad = padding * max(hi - lo)
    return (lo[0] - pad, lo[1] - pad, hi[0] + pad, hi[1] + pad)


def default_bounds(scene, world: int = 0):
    """The frame to show: a scene file's `size` (from the origin), else all bodies."""
    if scene.meta.get("size"):
        w, h = scene.meta["size"]
        x0, y0 = scene.meta.get("origin", (0.0, 0.0))
        return (float(x0), float(y0), float(x0 + w), float(y0 + h))
    return frame_bounds(scene, world)


def _rgb(color, background):
    """RGBA 0-255 blended over the background, as uint8 RGB."""
    rgba = np.asarray(color, float)
    alpha = rgba[3] / 255.0 if len(rgba) > 3 else 1.0
    return np.round(rgba[:3] * alpha + np.asarray(background[:3], float) * (1 - alpha)).astype(
        np.uint8)


def render(scene, world: int = 0, size=(800, 600), bounds=None, contacts: bool = False, state=None,
           rays=None):
    """(height, width, 3) uint8 image of `world`; bounds (xmin, ymin, xmax, ymax) in m.

    state: a State to draw (default: the scene's current one). rays: line segments drawn
    over the bodies, (starts (n, 2) m, ends (n, 2) m, hit (n,) bool): e.g. rays from their
    origins to where they hit (red) or to their full length (green, a miss).
    """
    width, height = size
    if bounds is None:
        bounds = default_bounds(scene, world)
    xmin, ymin, xmax, ymax = bounds
    scale = min(width / (xmax - xmin), height / (ymax - ymin))  # pixels per metre
    cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
    background = scene.meta.get("background", _BACKGROUND)
    if not isinstance(background, tuple | list | np.ndarray):
        background = _BACKGROUND  # an image: plain colour instead
    background = _rgb(background, (255, 255, 255))
    image = np.empty((height, width, 3), np.uint8)
    image[:] = background

    def to_pixels(points):
        points = np.atleast_2d(points)
        return np.stack([(points[:, 0] - cx) * scale + width / 2,
                         height / 2 - (points[:, 1] - cy) * scale], axis=1)

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
        angle = state.angle[world, b]
        c, s = np.cos(angle), np.sin(angle)
        rot = np.array([[c, -s], [s, c]])
        pos = state.position[world, b]
        if shape.kind == SHAPE_CIRCLE:
            centre = to_pixels(pos + rot @ shape.center)[0]
            r = shape.radius * scale
            grid = pixel_grid(centre - r, centre + r)
            if grid is None:
                continue
            window, xs, ys = grid
            d2 = (xs - centre[0]) ** 2 + (ys - centre[1]) ** 2
            image[window][d2 <= r * r] = colour
            image[window][(d2 <= r * r) & (d2 >= (r - max(1.0, 0.08 * r)) ** 2)] = border
            # Orientation mark: a spoke from the centre along the body's x axis.
            tip = to_pixels(pos + rot @ (shape.center + [shape.radius, 0.0]))[0]
            _line(image, centre, tip, border)
        elif shape.kind in AREALESS_KINDS:  # edges and chain links
            ends = to_pixels(pos + shape.vertices @ rot.T)
            for offset in (-0.5, 0.0, 0.5):  # a 2-pixel line: an edge has no inside
                _line(image, ends[0] + offset, ends[1] + offset, border)
        else:  # polygons, rounded or not, and capsules: their outline, filled
            verts = to_pixels(pos + outline(shape) @ rot.T)
            grid = pixel_grid(verts.min(0), verts.max(0))
            if grid is None:
                continue
            window, xs, ys = grid
            inside = np.ones(xs.shape, bool)
            k = len(verts)
            for i in range(k):  # screen y points down, so the winding is clockwise here
                a, e = verts[i], verts[(i + 1) % k] - verts[i]
                inside &= (e[0] * (ys - a[1]) - e[1] * (xs - a[0])) <= 0
            image[window][inside] = colour
            for i in range(k):
                _line(image, verts[i], verts[(i + 1) % k], border)
    if contacts:
        found = scene.contacts(world)
        for i in range(len(found)):
            for k in range(found.point_count[i]):
                p = to_pixels(found.points[i, k])[0]
                tip = to_pixels(found.points[i, k] + found.normal[i] * 6 / scale)[0]
                _line(image, p, tip, np.array([200, 0, 0], np.uint8))
                _disc(image, p, 2.5, np.array([200, 0, 0], np.uint8))
    if rays is not None:
        starts, ends, hit = (np.asarray(a) for a in rays)
        for a, b, struck in zip(to_pixels(starts), to_pixels(ends), hit, strict=True):
            _line(image, a, b, _RAY_HIT if struck else _RAY_MISS)
            if struck:
                _disc(image, b, 2.0, _RAY_HIT)
    return image


def render_worlds(scene, size=(800, 600), bounds=None, contacts=False, max_tiles=64,
                  rays=None):
    """All worlds (up to max_tiles) as a grid of tiles in one (height, width, 3) image.

    rays: (starts (n_worlds, n, 2), ends (n_worlds, n, 2), hit (n_worlds, n)), each world's
    segments drawn over its tile (see render)."""
    n = min(scene.n_worlds, max_tiles)

    def world_rays(w):
        return None if rays is None else tuple(np.asarray(a)[w] for a in rays)

    if n == 1:
        return render(scene, 0, size, bounds, contacts, rays=world_rays(0))
    columns = int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / columns))
    tile = (size[0] // columns, size[1] // rows)
    image = np.full((size[1], size[0], 3), 40, np.uint8)
    state = scene.get_state()
    for w in range(n):
        r, c = divmod(w, columns)
        picture = render(scene, w, tile, bounds, contacts, state=state, rays=world_rays(w))
        image[r * tile[1]:(r + 1) * tile[1] - 1, c * tile[0]:(c + 1) * tile[0] - 1] = \
            picture[:-1, :-1]
    return image


def write_gif(path, frames, fps: float = 30.0):
    """Write (h, w, 3) uint8 frames as an animated GIF (Pillow)."""
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], loop=0,
                   duration=max(20, int(round(1000 / fps))), optimize=False)


def _line(image, a, b, colour):
    n = int(max(abs(b[0] - a[0]), abs(b[1] - a[1]))) + 1
    xs = np.linspace(a[0], b[0], n).astype(int)
    ys = np.linspace(a[1], b[1], n).astype(int)
    ok = (xs >= 0) & (xs < image.shape[1]) & (ys >= 0) & (ys < image.shape[0])
    image[ys[ok], xs[ok]] = colour


def _disc(image, centre, radius, colour):
    y, x = np.ogrid[: image.shape[0], : image.shape[1]]
    image[(x + 0.5 - centre[0]) ** 2 + (y + 0.5 - centre[1]) ** 2 <= radius**2] = colour


def write_png(path, image: np.ndarray):
    """Write an (h, w, 3) uint8 image as an 8-bit RGB PNG."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    h, w, _ = image.shape
    raw = b"".join(b"\x00" + image[row].tobytes() for row in range(h))

    def chunk(tag, data):
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))
