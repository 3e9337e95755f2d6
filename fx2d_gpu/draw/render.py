"""Headless rendering of a scene to an RGB image, drawn by one Taichi kernel; PNG and GIF
files written with Pillow.

This draws what the device holds: filled shapes (a scene file's visual geometry and colours
when it has them), circle orientation marks and, optionally, contact points and normals and
rays. Batched scenes are drawn as a grid of tiles, one per world. It needs no window, so it
works on any machine and backend; the GGUI viewer (viewer.py, frame_geometry.py) draws the
same shapes in a window.

How a frame is drawn: each body's outline in its body frame (`body_outlines`) is built once
per scene on the host and kept; per frame one kernel launch rasterises every body in
parallel (pixel centres inside a polygon's edges or a disc, 1-pixel lines) into an *owner*
image that keeps, per pixel, the highest draw priority that covered it (atomic max of
2 * body + layer, layer 1 the border), then colours every pixel from its owner. The picture
is the painter's order of drawing the bodies one after another, fill then border, whatever
order the threads ran in. Overlays (contacts, rays) are drawn over it with NumPy, all at
once.
"""

import weakref
from dataclasses import dataclass

import numpy as np
import taichi as ti

from ..enums import SHAPE_CIRCLE
from ..shapes import AREALESS_KINDS, outline

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
_RAY_HIT = np.array([220, 40, 40], np.uint8)
_RAY_MISS = np.array([120, 200, 120], np.uint8)
_CONTACT = np.array([200, 0, 0], np.uint8)
_JOINT = np.array([40, 40, 48], np.uint8)
#: Grey between the tiles of render_worlds.
_TILE_GAP = 40

#: BodyOutlines.kind codes: a filled outline (polygons, rounded or not, and capsules), a
#: circle (its centre and radius: a disc), a segment (edges and chain links: a line only).
KIND_FILLED, KIND_CIRCLE, KIND_SEGMENT = 0, 1, 2
#: Pieces of a rounded corner's arc (shapes.outline's arc_segments).
ARC_SEGMENTS = 6


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


@dataclass(frozen=True)
class BodyOutlines:
    """The drawn bodies of a scene (`drawn`) and their shapes in the body frame, as flat
    arrays, for the kernels that draw them (here and frame_geometry.py). d drawn bodies,
    m outline points in all.

    Attributes:
        body: (d,) int32, each drawn body's index, in body order.
        kind: (d,) int32, KIND_FILLED, KIND_CIRCLE or KIND_SEGMENT.
        first: (d,) int32, the body's first point in `points`.
        count: (d,) int32, its points: the outline's vertices (shapes.outline: a rounded
            corner's arc included), a segment's 2 ends, 0 for a circle.
        centre: (d, 2) float64, m, body frame: the fan's centre of a filled outline (the
            core vertices' mean), a circle's centre.
        radius: (d,) float64, m: a circle's radius (0 for the others).
        reach: (d,) float64, m: Shape.bounding_radius (frame_bounds' box of a circle).
        points: (m, 2) float64, m, body frame, counter-clockwise.
        static: (d,) bool, mass 0.
    """

    body: np.ndarray
    kind: np.ndarray
    first: np.ndarray
    count: np.ndarray
    centre: np.ndarray
    radius: np.ndarray
    reach: np.ndarray
    points: np.ndarray
    static: np.ndarray

    def __len__(self) -> int:
        return len(self.body)

    def owners(self) -> np.ndarray:
        """(m,) int64: the index (into the d drawn bodies) of each point's body."""
        return np.repeat(np.arange(len(self.body)), self.count)


#: {scene: {visual flag: (signature, BodyOutlines)}}; a scene's outlines are built once and
#: built again when its bodies or visuals change (bodies added, a scene file's visuals).
_OUTLINES = weakref.WeakKeyDictionary()


def _signature(scene) -> tuple:
    world_shapes = getattr(scene, "_shapes", None)
    version = world_shapes.version if world_shapes is not None else 0
    return (scene.n_bodies, id(scene.visuals), len(scene.visuals or ()), version)


def _own_shapes(scene, world: int) -> list | None:
    """World `world`'s shapes, where some world of `scene` has shapes of its own
    (Scene.set_shape_params); None where every world draws the add_* shapes."""
    world_shapes = getattr(scene, "_shapes", None)
    if world_shapes is None or not world_shapes.columns:
        return None
    return world_shapes.world_shapes(scene._builder, world)


def body_outlines(scene, visual: bool = True, world: int = 0) -> BodyOutlines:
    """The drawn bodies' outlines in `world` (see BodyOutlines), built once per scene and
    kept (once per world where worlds have shapes of their own, Scene.set_shape_params).

    visual: True draws a scene file's visual shape where a body has one (what render and
    the viewer show); False its collision shape (frame_bounds).
    """
    signature = _signature(scene)
    own = _own_shapes(scene, world)
    key = visual if own is None else (visual, world)
    kept = _OUTLINES.setdefault(scene, {}).get(key)
    if kept is not None and kept[0] == signature:
        return kept[1]
    outlines = _build_outlines(scene, visual, own)
    _OUTLINES[scene][key] = (signature, outlines)
    return outlines


def world_outlines(scene, visual: bool = True) -> tuple[BodyOutlines, ...] | None:
    """Every world's outlines (body_outlines) where worlds have shapes of their own
    (Scene.set_shape_params), laid out alike: the same bodies, kinds and point counts in
    every world (a body rounded in some world is drawn rounded in all, a sharp world's arcs
    of radius 0), so that views of any world share one buffer layout
    (frame_geometry.FrameGeometry); None where every world draws the add_* shapes. Built
    once per scene, and again once its shapes change."""
    if _own_shapes(scene, 0) is None:
        return None
    signature = _signature(scene)
    kept = _OUTLINES.setdefault(scene, {}).get(("every world", visual))
    if kept is not None and kept[0] == signature:
        return kept[1]
    shapes_of = [_own_shapes(scene, w) for w in range(scene.n_worlds)]
    rounded = {
        b
        for b in range(scene.n_bodies)
        if any(own[b].radius > 0.0 for own in shapes_of) and shapes_of[0][b].kind != SHAPE_CIRCLE
    }
    found = tuple(_build_outlines(scene, visual, own, rounded) for own in shapes_of)
    _OUTLINES[scene][("every world", visual)] = (signature, found)
    return found


def _build_outlines(
    scene, visual: bool, own: list | None = None, rounded: set | frozenset = frozenset()
) -> BodyOutlines:
    # One pass in Python over the bodies (a million bodies take a few seconds, once); the
    # per-body NumPy calls are kept to shapes that need them (rounded ones, capsules).
    # `own`: each body's shape in the world drawn (_own_shapes), else the add_* shapes;
    # `rounded`: bodies drawn rounded whatever their radius (world_outlines).
    visuals = scene.visuals or ()
    rows, kinds, counts, radii, reaches, statics = [], [], [], [], [], []
    pieces, centres, sharp = [], [], []
    for b, body in enumerate(scene._builder.bodies):
        look = visuals[b] if b < len(visuals) else None
        if look is not None and look.get("boundary"):
            continue
        shape = body.shape if own is None else own[b]
        if visual and look is not None and look["shape"] is not None:
            shape = look["shape"]
        rows.append(b)
        statics.append(body.mass == 0)
        reaches.append(shape.bounding_radius)
        if shape.kind == SHAPE_CIRCLE:
            kinds.append(KIND_CIRCLE)
            counts.append(0)
            radii.append(shape.radius)
            centres.append(shape.center)
            sharp.append(False)
            continue
        radii.append(0.0)
        if shape.kind in AREALESS_KINDS:
            kinds.append(KIND_SEGMENT)
            points = shape.vertices
            centres.append(shape.center)
            sharp.append(False)
        else:
            kinds.append(KIND_FILLED)
            if shape.radius == 0.0 and b not in rounded:
                points = shape.vertices  # a sharp polygon is its vertices: its mean later
                centres.append(None)
                sharp.append(True)
            else:
                # (A sharp one drawn rounded: arcs of radius 0, each vertex repeated.)
                points = (
                    outline(shape, ARC_SEGMENTS)
                    if shape.radius > 0.0
                    else np.repeat(shape.vertices, ARC_SEGMENTS + 1, axis=0)
                )
                centres.append(shape.vertices.mean(axis=0))
                sharp.append(False)
        counts.append(len(points))
        pieces.append(points)
    count = np.array(counts, np.int32)
    first = (np.cumsum(count) - count).astype(np.int32)
    points = np.concatenate(pieces) if pieces else np.zeros((0, 2))
    centre = np.zeros((len(rows), 2))
    sharp = np.array(sharp, bool)
    if sharp.any():  # the vertices' mean of every sharp polygon at once
        # reduceat sums from each index to the next one given: give every body that has
        # points, so that each sum is one body's.
        has_points = count > 0
        sums = np.zeros((len(rows), 2))
        sums[has_points] = np.add.reduceat(points, first[has_points], axis=0)
        centre[sharp] = sums[sharp] / count[sharp, None]
    for i in np.flatnonzero(~sharp):
        centre[i] = centres[i]
    return BodyOutlines(
        body=np.array(rows, np.int32),
        kind=np.array(kinds, np.int32),
        first=first,
        count=count,
        centre=centre,
        radius=np.array(radii, np.float64),
        reach=np.array(reaches, np.float64),
        points=np.asarray(points, np.float64),
        static=np.array(statics, bool),
    )


def _rotated(points: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """points (k, 2) turned by angle (k,) rad, each by its own."""
    c, s = np.cos(angle), np.sin(angle)
    return np.stack(
        [c * points[:, 0] - s * points[:, 1], s * points[:, 0] + c * points[:, 1]], axis=1
    )


def frame_bounds(scene, world: int = 0, padding: float = 0.05):
    """(xmin, ymin, xmax, ymax), m: the box around every drawn body of `world` (collision
    shapes: a circle's box is its bounding radius about the body's position)."""
    state = scene.get_state()
    outlines = body_outlines(scene, visual=False, world=world)
    position = state.position[world, outlines.body]
    angle = state.angle[world, outlines.body]
    owners = outlines.owners()
    points = position[owners] + _rotated(outlines.points, angle[owners])
    circles = outlines.kind == KIND_CIRCLE
    reach = outlines.reach[circles, None]
    corners = np.concatenate([points, position[circles] - reach, position[circles] + reach])
    lo, hi = corners.min(axis=0), corners.max(axis=0)
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
        np.uint8
    )


def _background(scene) -> np.ndarray:
    """(3,) uint8: the scene file's background colour (an image: the default colour)."""
    background = scene.meta.get("background", _BACKGROUND)
    if not isinstance(background, tuple | list | np.ndarray):
        background = _BACKGROUND  # an image: plain colour instead
    return _rgb(background, (255, 255, 255))


def _looks(scene, outlines: BodyOutlines, background) -> tuple[np.ndarray, np.ndarray]:
    """(fill (d, 3), border (d, 3)) uint8 of the drawn bodies: a scene file's visual colours
    where it has them (over the background), else the palette by body index, static bodies
    grey; the border half the fill unless the visual gives one."""
    fill = _PALETTE[outlines.body % len(_PALETTE)]
    fill[outlines.static] = _STATIC
    border = fill // 2
    visuals = scene.visuals or ()
    for i in np.flatnonzero(outlines.body < len(visuals)):
        look = visuals[outlines.body[i]]
        if isinstance(look["fill"], tuple):
            fill[i] = _rgb(look["fill"], background)
            border[i] = fill[i] // 2
        if isinstance(look["border"], tuple) and look["border_thickness"] > 0:
            border[i] = _rgb(look["border"], background)
    return fill, border


class _Prepared:
    """A scene's outlines and colours as the raster kernel takes them (float32, int32,
    uint8, contiguous), kept with the outlines."""

    def __init__(self, scene, outlines: BodyOutlines, background):
        fill, border = _looks(scene, outlines, background)
        self.outlines = outlines
        self.background = background
        # The colour of each owner value + 1: the background, then fill and border by body.
        colours = np.concatenate([background[None], np.stack([fill, border], 1).reshape(-1, 3)])
        self.arrays = (
            outlines.body,
            outlines.kind,
            outlines.first,
            outlines.count,
            np.ascontiguousarray(outlines.centre, np.float32),
            np.ascontiguousarray(outlines.radius, np.float32),
            np.ascontiguousarray(outlines.points.reshape(-1, 2), np.float32),
            np.ascontiguousarray(colours.reshape(-1), np.uint8),
        )
        # Scratch: each outline point in pixels (written and read by the kernel).
        self.pixel_points = np.zeros((max(len(outlines.points), 1), 2), np.float32)


_PREPARED = weakref.WeakKeyDictionary()


def _prepared(scene, world: int = 0) -> _Prepared:
    outlines = body_outlines(scene, world=world)
    background = _background(scene)
    kept = _PREPARED.get(scene)
    if kept is None or kept.outlines is not outlines or (kept.background != background).any():
        kept = _PREPARED[scene] = _Prepared(scene, outlines, background)
    return kept


_F1 = ti.types.ndarray(dtype=ti.f32, ndim=1)
_F2 = ti.types.ndarray(dtype=ti.f32, ndim=2)
_I1 = ti.types.ndarray(dtype=ti.i32, ndim=1)
_U1 = ti.types.ndarray(dtype=ti.u8, ndim=1)


@ti.func
def _plot_line(owner: ti.template(), width, height, ax, ay, bx, by, priority):
    """Mark the pixels of the line a -> b (pixels) with `priority` where it is higher: the
    samples of NumPy's linspace(a, b, n), n = int(max(|dx|, |dy|)) + 1, truncated toward
    zero as astype(int) does (1 px wide). Only the samples that can land in the image are
    visited: a line far across the image costs its length in the image."""
    dx, dy = bx - ax, by - ay
    steps = ti.floor(ti.max(ti.abs(dx), ti.abs(dy)))  # n - 1
    lo, hi = 0.0, steps
    if steps > 0.0:
        # A sample i (a + i (b - a) / steps) lands in the image where -1 < x < width and
        # -1 < y < height (truncation toward zero): clip i to that, a sample either side.
        for axis in ti.static(range(2)):
            start = ax if axis == 0 else ay
            delta = (dx if axis == 0 else dy) / steps
            size = ti.cast(width if axis == 0 else height, ti.f32)
            if delta != 0.0:
                first = (-1.0 - start) / delta
                last = (size - start) / delta
                lo = ti.max(lo, ti.min(first, last) - 1.0)
                hi = ti.min(hi, ti.max(first, last) + 1.0)
    if lo <= hi:
        i = ti.cast(ti.max(ti.floor(lo), 0.0), ti.i32)
        end = ti.cast(ti.min(ti.ceil(hi), steps), ti.i32)
        n_steps = ti.cast(steps, ti.i32)
        while i <= end:
            x, y = ax, ay
            if i == n_steps and n_steps > 0:  # linspace ends on b exactly
                x, y = bx, by
            elif n_steps > 0:
                x, y = ax + i * (dx / steps), ay + i * (dy / steps)
            px, py = ti.cast(x, ti.i32), ti.cast(y, ti.i32)
            if 0 <= px < width and 0 <= py < height:
                ti.atomic_max(owner[py * width + px], priority)
            i += 1


@ti.kernel
def _raster(
    position: _F2,
    angle: _F1,
    body: _I1,
    kind: _I1,
    first: _I1,
    count: _I1,
    centre: _F2,
    radius: _F1,
    points: _F2,
    colours: _U1,
    pixel_points: _F2,
    view_x: ti.f32,
    view_y: ti.f32,
    scale: ti.f32,
    width: ti.i32,
    height: ti.i32,
    owner: _I1,
    image: _U1,
):
    """Draw the bodies (outlines, see BodyOutlines; poses position (n_bodies, 2) m and angle
    (n_bodies,) rad) into image (height * width * 3,), rows of RGB pixels top down: the view
    centred on (view_x, view_y) m, `scale` px per m, y up.

    owner (height * width,): -1 where nothing is drawn yet; left holding each pixel's
    priority (2 * drawn body + 1 for its border). colours (3 (2 d + 1),): the background's
    RGB, then each drawn body's fill and border. pixel_points (m, 2): scratch.
    (Flat arrays: a 3-d ndarray's indexing costs ~4 times a flat one's on the CPU.)
    """
    half_w, half_h = 0.5 * width, 0.5 * height
    for d in range(body.shape[0]):
        b = body[d]
        px, py = position[b, 0], position[b, 1]
        c, s = ti.cos(angle[b]), ti.sin(angle[b])
        fill_priority, border_priority = 2 * d, 2 * d + 1
        if kind[d] == KIND_CIRCLE:
            lx, ly = centre[d, 0], centre[d, 1]
            cx = (px + c * lx - s * ly - view_x) * scale + half_w
            cy = half_h - (py + s * lx + c * ly - view_y) * scale
            r = radius[d] * scale
            x0 = ti.max(ti.cast(ti.floor(cx - r), ti.i32), 0)
            y0 = ti.max(ti.cast(ti.floor(cy - r), ti.i32), 0)
            x1 = ti.min(ti.cast(ti.ceil(cx + r), ti.i32) + 1, width)
            y1 = ti.min(ti.cast(ti.ceil(cy + r), ti.i32) + 1, height)
            if x0 < x1 and y0 < y1:  # off the image: no disc, no mark
                inner = r - ti.max(1.0, 0.08 * r)
                for yy, xx in ti.ndrange((y0, y1), (x0, x1)):
                    d2 = (xx + 0.5 - cx) ** 2 + (yy + 0.5 - cy) ** 2
                    if d2 <= r * r:
                        ti.atomic_max(
                            owner[yy * width + xx],
                            border_priority if d2 >= inner * inner else fill_priority,
                        )
                tx, ty = lx + radius[d], ly  # the mark: centre to the rim along local x
                _plot_line(
                    owner,
                    width,
                    height,
                    cx,
                    cy,
                    (px + c * tx - s * ty - view_x) * scale + half_w,
                    half_h - (py + s * tx + c * ty - view_y) * scale,
                    border_priority,
                )
        else:
            k, start = count[d], first[d]
            lo_x, lo_y, hi_x, hi_y = ti.math.inf, ti.math.inf, -ti.math.inf, -ti.math.inf
            for i in range(k):
                lx, ly = points[start + i, 0], points[start + i, 1]
                vx = (px + c * lx - s * ly - view_x) * scale + half_w
                vy = half_h - (py + s * lx + c * ly - view_y) * scale
                pixel_points[start + i, 0] = vx
                pixel_points[start + i, 1] = vy
                lo_x, lo_y = ti.min(lo_x, vx), ti.min(lo_y, vy)
                hi_x, hi_y = ti.max(hi_x, vx), ti.max(hi_y, vy)
            if kind[d] == KIND_SEGMENT:  # 3 lines, half a pixel apart: 2 px wide
                ax, ay = pixel_points[start, 0], pixel_points[start, 1]
                bx, by = pixel_points[start + 1, 0], pixel_points[start + 1, 1]
                for offset in ti.static((-0.5, 0.0, 0.5)):
                    _plot_line(
                        owner,
                        width,
                        height,
                        ax + offset,
                        ay + offset,
                        bx + offset,
                        by + offset,
                        border_priority,
                    )
            else:
                x0 = ti.max(ti.cast(ti.floor(lo_x), ti.i32), 0)
                y0 = ti.max(ti.cast(ti.floor(lo_y), ti.i32), 0)
                x1 = ti.min(ti.cast(ti.ceil(hi_x), ti.i32) + 1, width)
                y1 = ti.min(ti.cast(ti.ceil(hi_y), ti.i32) + 1, height)
                if x0 < x1 and y0 < y1:
                    for yy, xx in ti.ndrange((y0, y1), (x0, x1)):
                        inside = True
                        for i in range(k):  # screen y points down: clockwise here
                            j = start + (i + 1) % k
                            ax, ay = pixel_points[start + i, 0], pixel_points[start + i, 1]
                            ex, ey = pixel_points[j, 0] - ax, pixel_points[j, 1] - ay
                            if ex * (yy + 0.5 - ay) - ey * (xx + 0.5 - ax) > 0.0:
                                inside = False
                                break
                        if inside:
                            ti.atomic_max(owner[yy * width + xx], fill_priority)
                    for i in range(k):
                        j = start + (i + 1) % k
                        _plot_line(
                            owner,
                            width,
                            height,
                            pixel_points[start + i, 0],
                            pixel_points[start + i, 1],
                            pixel_points[j, 0],
                            pixel_points[j, 1],
                            border_priority,
                        )
    for i in range(width * height):
        row = 3 * (owner[i] + 1)  # -1, nothing: the background's row
        for channel in ti.static(range(3)):
            image[3 * i + channel] = colours[row + channel]


def _view(bounds, width: int, height: int) -> tuple[float, float, float]:
    """(centre x, centre y, px per m) of bounds (xmin, ymin, xmax, ymax) m fitted into an
    image of width x height, centred."""
    xmin, ymin, xmax, ymax = bounds
    scale = min(width / (xmax - xmin), height / (ymax - ymin))
    return (xmin + xmax) / 2, (ymin + ymax) / 2, scale


def _to_pixels(points, view, width: int, height: int) -> np.ndarray:
    """(n, 2) pixel coordinates (x right, y down) of points (n, 2) m."""
    points = np.asarray(points, float).reshape(-1, 2)
    cx, cy, scale = view
    return np.stack(
        [(points[:, 0] - cx) * scale + width / 2, height / 2 - (points[:, 1] - cy) * scale], axis=1
    )


def render(
    scene,
    world: int = 0,
    size=(800, 600),
    bounds=None,
    contacts: bool = False,
    state=None,
    rays=None,
    joints: bool = False,
):
    """(height, width, 3) uint8 image of `world`; bounds (xmin, ymin, xmax, ymax) in m.

    state: a State to draw (default: the scene's current one). rays: line segments drawn
    over the bodies, (starts (n, 2) m, ends (n, 2) m, hit (n,) bool): e.g. rays from their
    origins to where they hit (red) or to their full length (green, a miss). joints: draw
    each joint as a line from its anchor on the parent to the child's centre, and a dot at
    the anchor, behind the bodies (a pendulum's string and pivot, where they cross open
    space), as fx2d run's frames do.
    """
    width, height = size
    prepared = _prepared(scene, world)
    if state is None:
        state = scene.get_state(dtype=np.float32)
    view = _view(default_bounds(scene, world) if bounds is None else bounds, width, height)
    position = np.ascontiguousarray(state.position[world], np.float32)
    angle = np.ascontiguousarray(state.angle[world], np.float32)
    image = np.empty((height, width, 3), np.uint8)
    owner = np.full(height * width, -1, np.int32)  # a memset: the kernel's loop is slower
    _raster(
        position,
        angle,
        *prepared.arrays,
        prepared.pixel_points,
        *view,
        width,
        height,
        owner,
        image.reshape(-1),
    )
    if joints and scene.n_joints:
        _draw_joints(image, scene, state, world, view, background=owner < 0)
    if contacts:
        _draw_contacts(image, scene.contacts(world), view)
    if rays is not None:
        starts, ends, hit = (np.asarray(a) for a in rays)
        _draw_rays(
            image,
            _to_pixels(starts, view, width, height),
            _to_pixels(ends, view, width, height),
            hit.astype(bool).reshape(-1),
        )
    return image


def _line_pixels(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(xs, ys, line) of the pixels of the lines starts[i] -> ends[i] ((k, 2) pixels each),
    1 px wide, line by line in order: each line's n = int(max(|dx|, |dy|)) + 1 samples of
    linspace(start, end, n) truncated toward zero; `line` is each pixel's line."""
    starts, ends = np.asarray(starts, float), np.asarray(ends, float)
    n = (np.abs(ends - starts).max(axis=1) if len(starts) else np.zeros(0)).astype(int) + 1
    line = np.repeat(np.arange(len(n)), n)
    step = (np.arange(len(line)) - np.repeat(np.cumsum(n) - n, n)).astype(float)
    last = n[line] - 1
    t = np.divide(step, last, out=np.zeros_like(step), where=last > 0)
    points = starts[line] + (ends - starts)[line] * t[:, None]
    points[step == last] = ends[line][step == last]  # linspace ends exactly on the end
    return points[:, 0].astype(int), points[:, 1].astype(int), line


def _disc_pixels(centres: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(xs, ys, disc) of the pixels whose centres lie within `radius` (px) of each of
    centres (k, 2) pixels, disc by disc in order."""
    centres = np.asarray(centres, float).reshape(-1, 2)
    reach = int(np.ceil(radius)) + 1
    offsets = np.arange(-reach, reach + 1)
    ox, oy = np.meshgrid(offsets, offsets)
    base = np.floor(centres).astype(int)
    xs = base[:, None, 0] + ox.reshape(1, -1)
    ys = base[:, None, 1] + oy.reshape(1, -1)
    inside = (xs + 0.5 - centres[:, None, 0]) ** 2 + (
        ys + 0.5 - centres[:, None, 1]
    ) ** 2 <= radius**2
    disc = np.broadcast_to(np.arange(len(centres))[:, None], xs.shape)
    return xs[inside], ys[inside], disc[inside]


def _paint(image: np.ndarray, xs, ys, colours):
    """image[ys, xs] = colours ((k, 3) or (3,)) where inside the image; where a pixel is
    painted more than once the last one stays (the order of drawing one after another)."""
    h, w = image.shape[:2]
    ok = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    flat = (ys * w + xs)[ok]
    colours = np.broadcast_to(colours, (len(xs), 3))[ok]
    # NumPy does not promise which of repeated indices an assignment keeps: keep the last
    # of each pixel explicitly.
    _, last = np.unique(flat[::-1], return_index=True)
    keep = len(flat) - 1 - last
    image.reshape(-1, 3)[flat[keep]] = colours[keep]


def _draw_joints(image: np.ndarray, scene, state, world: int, view, background: np.ndarray):
    """Each joint of `scene` in `world` (poses from `state`): a line from its parent's
    anchor to the child's centre and a dot (2.5 px) at the anchor, on the pixels that
    `background` ((h * w,) bool) marks, those no body covers: behind the bodies, so that a
    body's colour is never hidden (a wheel's axle, a slider's travel along its rail)."""
    from ..model.kinematics import joint_anchors

    h, w = image.shape[:2]
    joints = scene._builder.joints
    children = [joint.child for joint in joints]
    anchors = _to_pixels(joint_anchors(joints, state)[world, :, 0], view, w, h)
    centres = _to_pixels(np.asarray(state.position)[world, children], view, w, h)
    line_x, line_y, _ = _line_pixels(anchors, centres)
    dot_x, dot_y, _ = _disc_pixels(anchors, 2.5)
    xs, ys = np.concatenate([line_x, dot_x]), np.concatenate([line_y, dot_y])
    inside = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    xs, ys = xs[inside], ys[inside]
    shown = background[ys * w + xs]
    _paint(image, xs[shown], ys[shown], _JOINT)


def _draw_contacts(image: np.ndarray, found, view):
    """Each contact point of `found` (a Contacts) as a red dot with its normal (6 px)."""
    h, w = image.shape[:2]
    used = np.arange(found.points.shape[1])[None, :] < np.asarray(found.point_count)[:, None]
    points = found.points[used]
    normals = np.broadcast_to(found.normal[:, None, :], found.points.shape)[used]
    at = _to_pixels(points, view, w, h)
    tips = _to_pixels(points + normals * 6 / view[2], view, w, h)
    xs, ys, _ = _line_pixels(at, tips)
    _paint(image, xs, ys, _CONTACT)
    xs, ys, _ = _disc_pixels(at, 2.5)
    _paint(image, xs, ys, _CONTACT)


def _draw_rays(image: np.ndarray, starts: np.ndarray, ends: np.ndarray, hit: np.ndarray):
    """Ray i: a line starts[i] -> ends[i] (pixels), red where it hit (and a dot there),
    green where it missed; drawn one after another."""
    line_x, line_y, line = _line_pixels(starts, ends)
    dot_x, dot_y, dot = _disc_pixels(ends[hit], 2.0)
    dot = np.flatnonzero(hit)[dot]
    # In the order of drawing: ray by ray, its line then its dot.
    ray = np.concatenate([line, dot])
    order = np.argsort(
        2 * ray + np.concatenate([np.zeros_like(line), np.ones_like(dot)]), kind="stable"
    )
    colours = np.where(hit[line][:, None], _RAY_HIT, _RAY_MISS)
    colours = np.concatenate([colours, np.broadcast_to(_RAY_HIT, (len(dot), 3))])
    _paint(
        image,
        np.concatenate([line_x, dot_x])[order],
        np.concatenate([line_y, dot_y])[order],
        colours[order],
    )


#: Largest side of an image render_worlds draws, pixels: an 8192 x 8192 RGB frame is 192 MiB;
#: past it a typo (1000000x1000000) would end in a MemoryError.
MAX_IMAGE_SIDE = 8192
#: Smallest tile render_worlds draws a world in, pixels a side (its last row and column are
#: the gap between tiles).
MIN_TILE_SIDE = 8


def tile_grid(size, n_tiles: int) -> tuple[int, int, tuple[int, int]]:
    """(columns, rows, (tile width, tile height) pixels) of render_worlds' grid of n_tiles
    tiles in a (width, height) image."""
    columns = int(np.ceil(np.sqrt(n_tiles)))
    rows = int(np.ceil(n_tiles / columns))
    return columns, rows, (size[0] // columns, size[1] // rows)


def tiles_fit(size, n_tiles: int) -> bool:
    """Whether n_tiles tiles of at least MIN_TILE_SIDE pixels a side fit a (width, height)
    image (one tile is the whole image)."""
    return n_tiles <= 1 or min(tile_grid(size, n_tiles)[2]) >= MIN_TILE_SIDE


def check_image_size(size, name: str = "size") -> tuple[int, int]:
    """(width, height) in pixels, each 16 to MAX_IMAGE_SIDE, else ValueError naming `name`."""
    width, height = (int(v) for v in size)
    if not (16 <= width <= MAX_IMAGE_SIDE and 16 <= height <= MAX_IMAGE_SIDE):
        raise ValueError(
            f"{name} must be 16 to {MAX_IMAGE_SIDE} pixels a side, got {width} x {height}"
        )
    return width, height


def render_worlds(
    scene,
    size=(800, 600),
    bounds=None,
    contacts=False,
    max_tiles=64,
    rays=None,
    joints: bool = False,
):
    """All worlds (up to max_tiles, and no more than fit with MIN_TILE_SIDE pixels a side) as
    a grid of tiles in one (height, width, 3) image, size (width, height) 16 to
    MAX_IMAGE_SIDE pixels (else ValueError naming size).

    rays: (starts (n_worlds, n, 2), ends (n_worlds, n, 2), hit (n_worlds, n)), each world's
    segments drawn over its tile (see render). joints: draw the joints (see render)."""
    size = check_image_size(size)
    n = min(scene.n_worlds, max_tiles)
    while not tiles_fit(size, n):  # 289 worlds in 16 x 16 pixels: as many as can be seen
        n -= 1

    def world_rays(w):
        return None if rays is None else tuple(np.asarray(a)[w] for a in rays)

    if n == 1:
        return render(scene, 0, size, bounds, contacts, rays=world_rays(0), joints=joints)
    columns, _, tile = tile_grid(size, n)
    image = np.full((size[1], size[0], 3), _TILE_GAP, np.uint8)
    state = scene.get_state(dtype=np.float32)
    for w in range(n):
        r, c = divmod(w, columns)
        picture = render(
            scene, w, tile, bounds, contacts, state=state, rays=world_rays(w), joints=joints
        )
        image[r * tile[1] : (r + 1) * tile[1] - 1, c * tile[0] : (c + 1) * tile[0] - 1] = picture[
            :-1, :-1
        ]
    return image


def write_gif(path, frames, fps: float = 30.0):
    """Write (h, w, 3) uint8 frames as an animated GIF (Pillow)."""
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    images[0].save(
        path,
        save_all=True,
        append_images=images[1:],
        loop=0,
        duration=max(20, int(round(1000 / fps))),
        optimize=False,
    )


def write_png(path, image: np.ndarray):
    """Write an (h, w, 3) uint8 image as an 8-bit RGB PNG (Pillow)."""
    from PIL import Image

    Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8), "RGB").save(path, format="PNG")
