"""Headless rendering of a scene to an RGB image (NumPy only), PNG and GIF writers.

This draws what the device holds: filled shapes (a scene file's visual geometry and colours
when it has them), circle orientation marks and, optionally, contact points and normals.
Batched scenes are drawn as a grid of tiles, one per world. It needs no window or GPU, so it
works on any machine; the GGUI viewer (viewer.py) draws the same shapes in a window.
"""

import struct
import zlib

import numpy as np

from .enums import SHAPE_CIRCLE
from .shapes import AREALESS_KINDS, outline, rotation

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
    (io.fx2d_geometry marks their visuals entry `boundary`)."""
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
            points = p + outline(shape) @ rotation(angle).T
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


class _Canvas:
    """An image and the view onto it: bounds (xmin, ymin, xmax, ymax) m fitted into it,
    centred, y up."""

    def __init__(self, image: np.ndarray, bounds):
        self.image = image
        self.height, self.width = image.shape[:2]
        xmin, ymin, xmax, ymax = bounds
        self.scale = min(self.width / (xmax - xmin), self.height / (ymax - ymin))  # px per m
        self.centre = ((xmin + xmax) / 2, (ymin + ymax) / 2)

    def to_pixels(self, points) -> np.ndarray:
        """(n, 2) pixel coordinates (x right, y down) of points (n, 2) m."""
        points = np.atleast_2d(points)
        return np.stack([(points[:, 0] - self.centre[0]) * self.scale + self.width / 2,
                         self.height / 2 - (points[:, 1] - self.centre[1]) * self.scale],
                        axis=1)

    def pixel_grid(self, lo, hi):
        """(window, xs, ys): the image's pixels in the box lo..hi (pixels), their centres'
        coordinates; None if the box is off the image."""
        x0, y0 = np.maximum(np.floor(lo).astype(int), 0)
        x1, y1 = np.minimum(np.ceil(hi).astype(int) + 1, [self.width, self.height])
        if x0 >= x1 or y0 >= y1:
            return None
        ys, xs = np.mgrid[y0:y1, x0:x1]
        return (slice(y0, y1), slice(x0, x1)), xs + 0.5, ys + 0.5


def render(scene, world: int = 0, size=(800, 600), bounds=None, contacts: bool = False, state=None,
           rays=None):
    """(height, width, 3) uint8 image of `world`; bounds (xmin, ymin, xmax, ymax) in m.

    state: a State to draw (default: the scene's current one). rays: line segments drawn
    over the bodies, (starts (n, 2) m, ends (n, 2) m, hit (n,) bool): e.g. rays from their
    origins to where they hit (red) or to their full length (green, a miss).
    """
    width, height = size
    background = scene.meta.get("background", _BACKGROUND)
    if not isinstance(background, tuple | list | np.ndarray):
        background = _BACKGROUND  # an image: plain colour instead
    background = _rgb(background, (255, 255, 255))
    image = np.empty((height, width, 3), np.uint8)
    image[:] = background
    canvas = _Canvas(image, default_bounds(scene, world) if bounds is None else bounds)
    state = scene.get_state() if state is None else state
    for b in range(scene.n_bodies):
        if drawn(scene, b):
            shape, colour, border = _look(scene, b, background)
            _draw_body(canvas, shape, state.position[world, b], rotation(state.angle[world, b]),
                       colour, border)
    if contacts:
        _draw_contacts(canvas, scene.contacts(world))
    if rays is not None:
        starts, ends, hit = (np.asarray(a) for a in rays)
        for a, b, struck in zip(canvas.to_pixels(starts), canvas.to_pixels(ends), hit,
                                strict=True):
            _line(image, a, b, _RAY_HIT if struck else _RAY_MISS)
            if struck:
                _disc(image, b, 2.0, _RAY_HIT)
    return image


def _look(scene, body: int, background) -> tuple:
    """(shape drawn, fill colour, border colour) of a body: a scene file's visual where it
    has one, else its collision shape in the palette (static bodies grey)."""
    shape = scene.body_shape(body)
    colour = _STATIC if scene.body_mass(body) == 0 else _PALETTE[body % len(_PALETTE)]
    border = colour // 2
    visual = visual_of(scene, body)
    if visual is not None:
        shape = visual["shape"] or shape
        if isinstance(visual["fill"], tuple):
            colour = _rgb(visual["fill"], background)
            border = colour // 2
        if isinstance(visual["border"], tuple) and visual["border_thickness"] > 0:
            border = _rgb(visual["border"], background)
    return shape, colour, border


def _draw_body(canvas: _Canvas, shape, position, rot, colour, border):
    """A body's shape at position (2,) m turned by rot (2, 2): a disc with a spoke along
    its x axis, a 2-pixel line (edges and chain links: no inside), or a filled outline."""
    image, scale = canvas.image, canvas.scale
    if shape.kind == SHAPE_CIRCLE:
        centre = canvas.to_pixels(position + rot @ shape.center)[0]
        r = shape.radius * scale
        grid = canvas.pixel_grid(centre - r, centre + r)
        if grid is None:
            return
        window, xs, ys = grid
        d2 = (xs - centre[0]) ** 2 + (ys - centre[1]) ** 2
        image[window][d2 <= r * r] = colour
        image[window][(d2 <= r * r) & (d2 >= (r - max(1.0, 0.08 * r)) ** 2)] = border
        tip = canvas.to_pixels(position + rot @ (shape.center + [shape.radius, 0.0]))[0]
        _line(image, centre, tip, border)
    elif shape.kind in AREALESS_KINDS:
        ends = canvas.to_pixels(position + shape.vertices @ rot.T)
        for offset in (-0.5, 0.0, 0.5):
            _line(image, ends[0] + offset, ends[1] + offset, border)
    else:  # polygons, rounded or not, and capsules
        verts = canvas.to_pixels(position + outline(shape) @ rot.T)
        grid = canvas.pixel_grid(verts.min(0), verts.max(0))
        if grid is None:
            return
        window, xs, ys = grid
        inside = np.ones(xs.shape, bool)
        k = len(verts)
        for i in range(k):  # screen y points down, so the winding is clockwise here
            a, e = verts[i], verts[(i + 1) % k] - verts[i]
            inside &= (e[0] * (ys - a[1]) - e[1] * (xs - a[0])) <= 0
        image[window][inside] = colour
        for i in range(k):
            _line(image, verts[i], verts[(i + 1) % k], border)


def _draw_contacts(canvas: _Canvas, found):
    """Each contact point of `found` (a Contacts) as a red dot with its normal (6 px)."""
    red = np.array([200, 0, 0], np.uint8)
    for i in range(len(found)):
        for k in range(found.point_count[i]):
            p = canvas.to_pixels(found.points[i, k])[0]
            tip = canvas.to_pixels(found.points[i, k] + found.normal[i] * 6 / canvas.scale)[0]
            _line(canvas.image, p, tip, red)
            _disc(canvas.image, p, 2.5, red)


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
