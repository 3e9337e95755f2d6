"""The viewer's frame geometry, filled on the device from the scene's body state: one kernel
launch per frame, no body state on the host.

What a frame draws (the same as viewer.build_mesh, which builds it body by body in NumPy):
each drawn body (render.drawn: not a scene file's boundary walls) as a triangle fan (a
circle as CIRCLE_SEGMENTS segments; polygons, rounded polygons and capsules from
shapes.outline) and its outline as line segments, a circle's orientation mark (centre to
rim along its local x), edges and chain links as one line each; in normalised window
coordinates [0, 1]^2, y up (GGUI's canvas), in the colours render.py paints (RGB 0-1).

    geometry = FrameGeometry(scene)                # the bodies' templates, built once
    frame = geometry.update(views, aspect)         # each frame: one launch
    frame.draw(canvas, line_width=0.002)           # GGUI: triangles, lines, overlays

A view is one world drawn into one rectangle of the window (FrameView, or the viewer's View:
world, rect, bounds); with several views (tiles), what reaches past a view's rect is pressed
onto its edge, as the viewer's body_geometry does (GGUI cannot clip). tile_views lays worlds
out as viewer.build_tiles does.

How: each drawn body's outline in its body frame, its colours and its place in the output
buffers are built once on the host when the FrameGeometry first draws (render.body_outlines;
again when the scene's bodies change). Every frame one kernel, run over (view, body), reads
each body's pose from the device pool and writes its vertices; a body whose pose is the one
it was last drawn at, in an unchanged view, is skipped (static and sleeping bodies are not
drawn again until the view changes), and its colours are written only when its look changes
(dimmed while asleep, with dim_sleeping). Each point is written once: a fan of b triangles
has b + 1 vertices and an outline of b segments b, which index arrays, built once on the
host, turn into 3 b and 2 b corners (GGUI draws through them), so a frame writes and hands
to GGUI 2.2-2.5 times fewer vertices than drawing every corner (a disc: 21 + 22 vertices
for 60 + 42 corners). Vertex counts are known on the host from the templates, so no count
is read back.

The buffers are NumPy arrays on the CPU backends (the kernel writes them in place) and device
ndarrays elsewhere, in one of two layouts (VertexBuffer): "ggui" (the default), GGUI's own
vertex layout (12 float32 a vertex: position, normal, texture coordinates, RGBA), which
`draw` hands to GGUI's canvas as it is, without the copy into a new vertex array that
ti.ui.Canvas.triangles makes of a field every frame; or "compact", positions and colours
apart, the least memory a frame writes (the fastest update; `draw` packs it first). On the
Vulkan backend, the device GGUI renders with, `draw` hands GGUI the device ndarrays
themselves (Taichi 1.7.4's own description of an ndarray for GGUI is broken, so
_ggui_source writes it): the frame never leaves the device. Elsewhere (CUDA) it copies the
buffers to the host once a frame: GGUI 1.7.4 takes host memory or its own device's ndarrays
only.

Overlays, each a toggle on the FrameGeometry, drawn as more line buffers: AABBs (the box of
each drawn body's outline, filled by the same launch), joints (parent centre -> parent
anchor -> child anchor -> child centre, one more launch) and contacts (points and normals,
read with Scene.contacts on the host: a debug overlay). `dim_sleeping` fades sleeping
bodies toward the background.
"""

import math
from dataclasses import dataclass

import numpy as np
import taichi as ti

from ..device import runtime
from .render import (
    KIND_CIRCLE,
    KIND_SEGMENT,
    _background,
    _looks,
    body_outlines,
    default_bounds,
    world_outlines,
)

#: Backends whose device ndarrays GGUI draws from without a trip through the host: Vulkan,
#: the device GGUI renders with (VertexBuffer.ggui_arrays; benchmarks/viewer.py empties it
#: to time the host hand-off).
DEVICE_HAND_OFF = ("vulkan",)
#: Segments of a circle's fan and outline.
CIRCLE_SEGMENTS = 20
#: Floats of one GGUI vertex: position (3), normal (3), texture coordinates (2), RGBA (4).
VERTEX_FLOATS = 12
#: The first colour float of a GGUI vertex.
COLOUR_COLUMN = 8
#: Overlay colours (RGB 0-1), as the viewer draws them.
BOX_COLOUR = (0.1, 0.65, 0.25)
JOINT_COLOUR = (0.0, 0.55, 0.6)
CONTACT_COLOUR = (0.85, 0.1, 0.1)
#: Line vertices of one body's AABB (4 segments) and of one joint (3 segments).
BOX_VERTICES, JOINT_VERTICES = 8, 6


@dataclass(frozen=True)
class FrameView:
    """One world drawn into one rectangle of the window (the viewer's View has the same
    attributes and may be passed instead).

    world: the world shown. rect: (x0, y0, x1, y1), fractions of the window, y up.
    bounds: (xmin, ymin, xmax, ymax), m: the part of the world fitted into rect (centred,
    the same metres per pixel both ways).
    """

    world: int
    rect: tuple
    bounds: tuple


def tile_views(scene, bounds=None, worlds=None, max_tiles: int = 64) -> list[FrameView]:
    """Views of `worlds` (None: the first max_tiles worlds; an int: that world alone, filling
    the window) laid out as viewer.build_tiles lays them out: a grid as square as can be,
    row by row from the top. bounds: (xmin, ymin, xmax, ymax) m for every tile; None: each
    world's render.default_bounds; a dict: {world: bounds}, each world's default_bounds
    computed where it has none and kept there (the view stays put as bodies move)."""
    if worlds is None:
        worlds = range(min(scene.n_worlds, max_tiles))
    elif isinstance(worlds, int | np.integer):
        worlds = [int(worlds)]
    worlds = [int(w) for w in worlds][:max_tiles]
    columns = int(math.ceil(math.sqrt(len(worlds))))
    rows = int(math.ceil(len(worlds) / columns))
    views = []
    for k, world in enumerate(worlds):
        r, c = divmod(k, columns)
        rect = (c / columns, 1 - (r + 1) / rows, (c + 1) / columns, 1 - r / rows)
        if bounds is None:
            shown = default_bounds(scene, world)
        elif isinstance(bounds, dict):
            if world not in bounds:
                bounds[world] = default_bounds(scene, world)
            shown = bounds[world]
        else:
            shown = bounds
        views.append(FrameView(world, rect, tuple(float(v) for v in shown)))
    return views


def view_transforms(views, aspect: float) -> np.ndarray:
    """(v, 10) float32 per view: the view's centre (cx, cy) m, scale (x, y) window units per
    m, the rect's centre (mx, my), and the rect (x0, y0, x1, y1): a point q m is drawn at
    ((q - c) * scale + m), as viewer.build_mesh maps it. aspect: the window's width / height
    (scale_y = scale_x * aspect: the same metres per pixel both ways)."""
    rows = []
    for view in views:
        xmin, ymin, xmax, ymax = (float(v) for v in view.bounds)
        x0, y0, x1, y1 = (float(v) for v in view.rect)
        scale_x = min((x1 - x0) / (xmax - xmin), (y1 - y0) / (ymax - ymin) / aspect)
        rows.append(
            (
                (xmin + xmax) / 2,
                (ymin + ymax) / 2,
                scale_x,
                scale_x * aspect,
                (x0 + x1) / 2,
                (y0 + y1) / 2,
                x0,
                y0,
                x1,
                y1,
            )
        )
    return np.array(rows, np.float32).reshape(-1, 10)


def _to_device(values: np.ndarray):
    """`values`, flattened, as a kernel argument kept between launches: a NumPy array on
    the CPU backends (the kernels read and write it in place), a device ndarray elsewhere
    (copied once). Flat: on the CPU backend a 1-d ndarray's indexing costs a fraction of a
    2-d one's (its shape is not multiplied through on every access). An empty array gets
    one row of zeros (the kernels read only what the counts say)."""
    values = np.ascontiguousarray(values)
    if values.size == 0:
        values = np.zeros((1, *values.shape[1:]), values.dtype)
    values = values.reshape(-1)
    if runtime.on_cpu():
        return values
    array = ti.ndarray(ti.f32 if values.dtype == np.float32 else ti.i32, values.shape)
    array.from_numpy(values)
    return array


def _to_host(array, width: int) -> np.ndarray:
    """(n, width) rows of a flat array from _to_device (a view of it on the CPU)."""
    flat = array if isinstance(array, np.ndarray) else array.to_numpy()
    return flat.reshape(-1, width)


class VertexBuffer:
    """`count` vertices: window coordinates and RGB 0-1 colours, float32, held in one of two
    layouts (flat NumPy arrays on the CPU backends, device ndarrays elsewhere), and
    `indices` (int32 on the host, 3 a triangle or 2 a segment; None: the vertices in
    order), which GGUI draws them through:

    "ggui": one array of count rows of VERTEX_FLOATS, GGUI's own vertex layout (alpha 1; z,
        normal and texture 0): `draw` hands it to GGUI as it is; a frame writes 8 of every
        48 bytes (slower to fill: the whole rows move through the caches).
    "compact": positions xy (count rows of 2) and colours rgb (count rows of 3): the least
        memory a frame writes; `draw` packs them into GGUI's layout first (one more
        launch over every vertex).

    The kernels write position i at xy[xy_stride * i + (0, 1)] and its colour at
    rgb[rgb_stride * i + colour_offset + (0, 1, 2)]. positions() and colours() read them
    back as (count, 2) and (count, 3) arrays (views of the NumPy arrays on the CPU
    backends: copy them to keep them).
    """

    def __init__(
        self, count: int, colour=None, layout: str = "ggui", indices: np.ndarray | None = None
    ):
        if layout not in ("ggui", "compact"):
            raise ValueError(f"layout must be 'ggui' or 'compact', got {layout!r}")
        self.count = count
        self.indices = indices
        self.layout = layout
        self._packed = None
        self._device_indices = None  # ggui_arrays, on Vulkan
        if layout == "ggui":
            self.xy = self.rgb = _to_device(_ggui_rows(count, colour))
            self.xy_stride = self.rgb_stride = VERTEX_FLOATS
            self.colour_offset = COLOUR_COLUMN
        else:
            rgb = np.zeros((count, 3), np.float32)
            if colour is not None:
                rgb[:] = colour
            self.xy = _to_device(np.zeros((count, 2), np.float32))
            self.rgb = _to_device(rgb)
            self.xy_stride, self.rgb_stride, self.colour_offset = 2, 3, 0

    @property
    def corners(self) -> int:
        """What is drawn: the indices' count (3 a triangle, 2 a segment), else count."""
        return self.count if self.indices is None else len(self.indices)

    def positions(self) -> np.ndarray:
        return _to_host(self.xy, self.xy_stride)[: self.count, :2]

    def colours(self) -> np.ndarray:
        start = self.colour_offset
        return _to_host(self.rgb, self.rgb_stride)[: self.count, start : start + 3]

    def drawn(self, values: np.ndarray) -> np.ndarray:
        """positions() or colours() as drawn: a row per corner (through the indices)."""
        return values if self.indices is None else values[self.indices]

    def ggui_vertices(self) -> np.ndarray:
        """(count, VERTEX_FLOATS) float32 in GGUI's layout, on the host: the array itself
        ("ggui" on the CPU), else packed or copied into one kept for the purpose."""
        return _to_host(self._ggui_layout(), VERTEX_FLOATS)[: self.count]

    def ggui_arrays(self):
        """(vertices, indices) to hand GGUI: on the Vulkan backend, whose device GGUI draws
        with, device ndarrays (the flat array in GGUI's layout, count * VERTEX_FLOATS
        float32, which GGUI reads as count vertices; the indices copied once), so the frame
        stays on the device; elsewhere ggui_vertices() and the host indices (GGUI 1.7.4
        copies from host memory or from its own Vulkan device only: a CUDA or CPU ndarray
        raises "Not supported")."""
        if runtime.backend_name() not in DEVICE_HAND_OFF:
            return self.ggui_vertices(), self.indices
        if self.indices is not None and self._device_indices is None:
            self._device_indices = _to_device(np.asarray(self.indices, np.int32))
        return self._ggui_layout(), self._device_indices

    def _ggui_layout(self):
        """The vertices in GGUI's layout, flat (_to_device's kind of array): the buffer
        itself ("ggui"), or the positions and colours packed into one kept for it."""
        if self.layout == "ggui":
            return self.xy
        if self._packed is None:
            self._packed = _to_device(_ggui_rows(self.count, None))
        _pack(self.count, self.xy, self.rgb, self._packed)
        return self._packed


def _ggui_rows(count: int, colour) -> np.ndarray:
    """(count, VERTEX_FLOATS) float32 zeros, alpha 1 and the colour (RGB 0-1) if given.
    Made on the host: the array is touched here, once, not by the first frame."""
    rows = np.zeros((count, VERTEX_FLOATS), np.float32)
    rows[:, COLOUR_COLUMN + 3] = 1.0
    if colour is not None:
        rows[:, COLOUR_COLUMN : COLOUR_COLUMN + 3] = colour
    return rows


def _draw_lines(canvas, buffer: VertexBuffer | None, width: float):
    if buffer is not None and buffer.corners:
        vertices, indices = buffer.ggui_arrays()
        _canvas_call(canvas, "lines", vertices, width, indices)


def _canvas_call(
    canvas, kind: str, vertices: np.ndarray, size: float = 0.0, indices: np.ndarray | None = None
):
    """Hand a vertex array in GGUI's layout (host memory) to the canvas: "triangles",
    "lines" (size: the width) or "circles" (size: the radius), coloured per vertex, drawn
    through `indices` (int32, host; None: in order). This is GGUI 1.7.4's own call behind
    ti.ui.Canvas.triangles / lines / circles, which first copy a field into a new such
    array every frame; where GGUI's internals differ, the frame is copied into fields and
    drawn with the public calls instead."""
    try:
        info, index_info = _ggui_source(vertices), _ggui_source(indices)
        grey = (0.5, 0.5, 0.5)
        if kind == "triangles":
            canvas.canvas.triangles(info, index_info, True, grey)
        elif kind == "lines":
            canvas.canvas.lines(info, index_info, True, grey, size)
        else:
            canvas.canvas.circles(info, True, False, grey, size)
    except (ImportError, AttributeError, TypeError):
        if not isinstance(vertices, np.ndarray):  # flat device ndarrays (ggui_arrays)
            vertices = _to_host(vertices, VERTEX_FLOATS)
            indices = None if indices is None else indices.to_numpy()
        if indices is not None:
            vertices = vertices[indices]
        positions, colours = _fields(vertices)
        if kind == "triangles":
            canvas.triangles(positions, per_vertex_color=colours)
        elif kind == "lines":
            canvas.lines(positions, size, per_vertex_color=colours)
        else:
            canvas.circles(positions, size, per_vertex_color=colours)


def _ggui_source(array):
    """GGUI's description of a vertex or index array (taichi.ui.utils.get_field_info's):
    a host array as it describes it; a device ndarray written here, because Taichi
    1.7.4's get_field_info calls Ndarray.arr.get_device_allocation, which its C++
    binding names device_allocation (an AttributeError for every ndarray)."""
    from taichi._lib import core as ti_core
    from taichi.ui.utils import get_field_info

    if array is None or isinstance(array, np.ndarray):
        return get_field_info(array)
    info = ti_core.FieldInfo()
    info.valid = True
    info.field_source = ti_core.FieldSource.TaichiNDarray
    info.dev_alloc = array.arr.device_allocation()
    info.dtype = array.dtype
    info.shape = tuple(array.shape) + tuple(array.element_shape)
    info.num_elements = int(np.prod(info.shape))
    return info


_FIELDS: dict = {}


def _fields(vertices: np.ndarray):
    """(positions, colours) fields of exactly len(vertices) (kept per length: GGUI compiles
    its copy per field) holding the array's positions and colours."""
    n = len(vertices)
    if n not in _FIELDS:
        _FIELDS[n] = (ti.Vector.field(2, ti.f32, n), ti.Vector.field(3, ti.f32, n))
    positions, colours = _FIELDS[n]
    positions.from_numpy(np.ascontiguousarray(vertices[:, :2]))
    colours.from_numpy(np.ascontiguousarray(vertices[:, COLOUR_COLUMN : COLOUR_COLUMN + 3]))
    return positions, colours


def _body_indices(
    kind: np.ndarray, boundary: np.ndarray, triangle_start: np.ndarray, line_start: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(triangle indices (3 a triangle), line indices (2 a segment)), int32, of one view's
    bodies into the vertices _fill_bodies writes (triangle_start and line_start: each
    body's first). A body of boundary b: the fan (centre, boundary n, boundary n + 1) for
    n < b, from the centre at its first vertex; the outline's segments (boundary n,
    boundary n + 1) after a circle's mark (its first two vertices); a segment, its two
    ends. The same corners, in the same order, as viewer.build_mesh writes out."""
    filled = kind != KIND_SEGMENT
    mark = (kind == KIND_CIRCLE).astype(np.int64)
    fan = np.where(filled, boundary, 0)
    body = np.repeat(np.arange(len(kind)), fan)
    n = np.arange(len(body)) - np.repeat(np.cumsum(fan) - fan, fan)
    ring = triangle_start[body] + 1
    triangles = np.stack([triangle_start[body], ring + n, ring + (n + 1) % boundary[body]], 1)
    # Segments a body draws: the circle's mark, then its boundary's (or the segment).
    segments = np.where(filled, boundary + mark, 1)
    body = np.repeat(np.arange(len(kind)), segments)
    n = np.arange(len(body)) - np.repeat(np.cumsum(segments) - segments, segments)
    first = line_start[body]
    edge = n - mark[body]  # the boundary's segment n (-1: the mark)
    ring = first + 2 * mark[body]
    size = np.maximum(boundary[body], 1)
    lines = np.where(
        (filled[body] & (edge >= 0))[:, None],
        np.stack([ring + edge, ring + (edge + 1) % size], 1),
        np.stack([first, first + 1], 1),
    )
    return triangles.reshape(-1).astype(np.int32), lines.reshape(-1).astype(np.int32)


def _per_view(indices: np.ndarray, n_views: int, vertices_per_view: int) -> np.ndarray:
    """One view's indices repeated for n_views views, view v's offset by v times a view's
    vertices."""
    offsets = np.repeat(np.arange(n_views, dtype=np.int64) * vertices_per_view, len(indices))
    return (np.tile(indices, n_views) + offsets).astype(np.int32)


@dataclass
class Frame:
    """One frame's geometry (FrameGeometry.update): the buffers GGUI draws, in order.

    triangles, lines: the bodies. boxes, joints, contact_lines: the overlays switched on
    (None otherwise). contact_points: (k, 2) float32 window coordinates of the contact
    points (for canvas.circles), or None.
    """

    triangles: VertexBuffer
    lines: VertexBuffer
    boxes: VertexBuffer | None = None
    joints: VertexBuffer | None = None
    contact_lines: VertexBuffer | None = None
    contact_points: np.ndarray | None = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(triangles (3t, 2), triangle colours (3t, 3), lines (2l, 2), line colours (2l,
        3)), float32 copies: what viewer.build_mesh returns (for tests and other
        renderers)."""
        triangles, lines = self.triangles, self.lines
        return (
            triangles.drawn(triangles.positions()).copy(),
            triangles.drawn(triangles.colours()).copy(),
            lines.drawn(lines.positions()).copy(),
            lines.drawn(lines.colours()).copy(),
        )

    def draw(self, canvas, line_width: float = 0.002, point_radius: float = 0.004):
        """Draw the frame on a GGUI canvas (ti.ui.Window.get_canvas()): the bodies' fans,
        their outlines, then the overlays. line_width: a fraction of the window height, as
        canvas.lines takes it; point_radius: the contact points', likewise."""
        if self.triangles.corners:
            vertices, indices = self.triangles.ggui_arrays()
            _canvas_call(canvas, "triangles", vertices, indices=indices)
        _draw_lines(canvas, self.lines, line_width)
        for overlay in (self.boxes, self.joints, self.contact_lines):
            _draw_lines(canvas, overlay, line_width)
        if self.contact_points is not None and len(self.contact_points):
            rows = _ggui_rows(len(self.contact_points), CONTACT_COLOUR)
            rows[:, :2] = self.contact_points
            _canvas_call(canvas, "circles", rows, point_radius)


_I1 = ti.types.ndarray(dtype=ti.i32, ndim=1)
_F1 = ti.types.ndarray(dtype=ti.f32, ndim=1)
#: The columns of a view's transform (view_transforms): its centre, scale, rect centre, rect.
TRANSFORM_COLUMNS = 10


@ti.func
def _to_window(view, x, y, clamp):
    """Window coordinates of (x, y), m from the centre of the view whose transform row
    (view_transforms) is `view`; pressed into its rect where `clamp` (GGUI cannot clip to a
    tile)."""
    wx = x * view[2] + view[4]
    wy = y * view[3] + view[5]
    if clamp:
        wx = ti.min(ti.max(wx, view[6]), view[8])
        wy = ti.min(ti.max(wy, view[7]), view[9])
    return ti.Vector([wx, wy])


@ti.func
def _put(vertices: ti.template(), stride, i, point):
    vertices[stride * i] = point.x
    vertices[stride * i + 1] = point.y


@ti.kernel
def _fill_bodies(
    bodies: ti.template(),
    n_bodies: ti.i32,
    view_world: _I1,
    transform: _F1,
    clamp: ti.i32,
    body: _I1,
    kind: _I1,
    first: _I1,
    count: _I1,
    centre: _F1,
    radius: _F1,
    points: _F1,
    drawn_stride: ti.i32,
    points_stride: ti.i32,
    ring: _F1,
    triangle_start: _I1,
    line_start: _I1,
    triangles_per_view: ti.i32,
    lines_per_view: ti.i32,
    fill: _F1,
    edge: _F1,
    drawn_pose: _F1,
    drawn_look: _I1,
    redraw: ti.i32,
    dim_sleeping: ti.i32,
    dim_to: ti.types.vector(3, ti.f32),
    dim_amount: ti.f32,
    triangles: _F1,
    triangle_rgb: _F1,
    lines: _F1,
    line_rgb: _F1,
    xy_stride: ti.i32,
    rgb_stride: ti.i32,
    colour_offset: ti.i32,
    with_boxes: ti.i32,
    boxes: _F1,
):
    """Per view v and drawn body d (templates: render.BodyOutlines and the buffers'
    offsets; flat arrays, rows of 2 (points, centre, ring), 3 (fill, edge, drawn_pose)
    or TRANSFORM_COLUMNS), write the body's vertices where its pose (bodies.position and
    angle of slot view_world[v] * n_bodies + body[d]) differs from drawn_pose (or
    `redraw`), and its colours where its look (1: dimmed, asleep with dim_sleeping)
    differs from drawn_look. Buffers as VertexBuffer lays them out, each vertex written
    once: the triangles' fan centre then its boundary, the lines' circle mark (centre,
    rim) then the boundary, or a segment's two ends (the triangles and segments index
    them: _body_indices); boxes: 8 line vertices (GGUI's layout) a body's AABB, when
    with_boxes. Where worlds have shapes of their own (render.world_outlines), centre and
    radius hold drawn_stride rows a world and points points_stride (else both 0)."""
    n_drawn = body.shape[0]
    for v, d in ti.ndrange(view_world.shape[0], n_drawn):
        slot = view_world[v] * n_bodies + body[d]
        e = view_world[v] * drawn_stride + d  # the body's centre and radius in its world
        first_point = view_world[v] * points_stride + first[d]
        p = bodies.position[slot]
        a = bodies.angle[slot]
        key = v * n_drawn + d
        kd, k = kind[d], count[d]
        boundary = k
        if kd == KIND_CIRCLE:
            boundary = CIRCLE_SEGMENTS
        t0 = v * triangles_per_view + triangle_start[d]
        l0 = v * lines_per_view + line_start[d]
        if (
            redraw != 0
            or p.x != drawn_pose[3 * key]
            or p.y != drawn_pose[3 * key + 1]
            or a != drawn_pose[3 * key + 2]
        ):
            drawn_pose[3 * key] = p.x
            drawn_pose[3 * key + 1] = p.y
            drawn_pose[3 * key + 2] = a
            view = ti.Vector(
                [transform[TRANSFORM_COLUMNS * v + i] for i in ti.static(range(TRANSFORM_COLUMNS))]
            )
            c, s = ti.cos(a), ti.sin(a)
            # Metres from the view's centre first: a far-off scene keeps its digits.
            rx, ry = p.x - view[0], p.y - view[1]
            lo = ti.Vector([ti.math.inf, ti.math.inf])
            hi = -lo
            if kd == KIND_SEGMENT:
                for i in range(2):
                    lx, ly = points[2 * (first_point + i)], points[2 * (first_point + i) + 1]
                    q = _to_window(view, rx + c * lx - s * ly, ry + s * lx + c * ly, clamp)
                    _put(lines, xy_stride, l0 + i, q)
                    lo, hi = ti.min(lo, q), ti.max(hi, q)
            else:
                ox = rx + c * centre[2 * e] - s * centre[2 * e + 1]
                oy = ry + s * centre[2 * e] + c * centre[2 * e + 1]
                middle = _to_window(view, ox, oy, clamp)
                r = radius[e]
                line = l0
                if kd == KIND_CIRCLE:  # the mark, centre -> rim along local x, comes first
                    _put(lines, xy_stride, line, middle)
                    _put(
                        lines, xy_stride, line + 1, _to_window(view, ox + c * r, oy + s * r, clamp)
                    )
                    line += 2
                    # The box about the centre as it is, then pressed into the rect below
                    # (as each of its corners would be).
                    reach = ti.Vector([r * view[2], r * view[3]])
                    at = _to_window(view, ox, oy, 0)
                    lo, hi = at - reach, at + reach
                # Boundary vertex j: a circle's ring (not turned with the body, as build_mesh
                # draws it), else the outline's point j; each is written once, and the
                # fan's triangles and the outline's segments index them.
                _put(triangles, xy_stride, t0, middle)
                for j in range(boundary):
                    q = ti.Vector([0.0, 0.0])
                    if kd == KIND_CIRCLE:
                        q = _to_window(view, ox + r * ring[2 * j], oy + r * ring[2 * j + 1], clamp)
                    else:
                        lx = points[2 * (first_point + j)]
                        ly = points[2 * (first_point + j) + 1]
                        q = _to_window(view, rx + c * lx - s * ly, ry + s * lx + c * ly, clamp)
                        lo, hi = ti.min(lo, q), ti.max(hi, q)
                    _put(triangles, xy_stride, t0 + 1 + j, q)
                    _put(lines, xy_stride, line + j, q)
            if with_boxes != 0:
                if clamp:
                    for axis in ti.static(range(2)):
                        lo[axis] = ti.max(lo[axis], view[6 + axis])
                        hi[axis] = ti.min(hi[axis], view[8 + axis])
                corners = (
                    ti.Vector([lo.x, lo.y]),
                    ti.Vector([hi.x, lo.y]),
                    ti.Vector([hi.x, hi.y]),
                    ti.Vector([lo.x, hi.y]),
                )
                for i in ti.static(range(4)):
                    _put(boxes, VERTEX_FLOATS, BOX_VERTICES * key + 2 * i, corners[i])
                    _put(boxes, VERTEX_FLOATS, BOX_VERTICES * key + 2 * i + 1, corners[(i + 1) % 4])
        look = 0
        if dim_sleeping != 0 and bodies.sleeping[slot] != 0:
            look = 1
        if look != drawn_look[key]:
            drawn_look[key] = look
            amount = dim_amount * look
            body_fill = ti.Vector([fill[3 * d], fill[3 * d + 1], fill[3 * d + 2]])
            body_edge = ti.Vector([edge[3 * d], edge[3 * d + 1], edge[3 * d + 2]])
            body_fill += (dim_to - body_fill) * amount
            body_edge += (dim_to - body_edge) * amount
            n_triangle_vertices, n_line_vertices = boundary + 1, boundary
            if kd == KIND_SEGMENT:
                n_triangle_vertices, n_line_vertices = 0, 2
            elif kd == KIND_CIRCLE:
                n_line_vertices += 2
            for i in range(n_triangle_vertices):
                for channel in ti.static(range(3)):
                    triangle_rgb[rgb_stride * (t0 + i) + colour_offset + channel] = body_fill[
                        channel
                    ]
            for i in range(n_line_vertices):
                for channel in ti.static(range(3)):
                    line_rgb[rgb_stride * (l0 + i) + colour_offset + channel] = body_edge[channel]


@ti.kernel
def _pack(n: ti.i32, xy: _F1, rgb: _F1, vertices: _F1):
    """vertices (n rows of VERTEX_FLOATS) = GGUI's layout of positions xy (n rows of 2)
    and colours rgb (n rows of 3)."""
    for i in range(n):
        for column in ti.static(range(2)):
            vertices[VERTEX_FLOATS * i + column] = xy[2 * i + column]
        for channel in ti.static(range(3)):
            vertices[VERTEX_FLOATS * i + COLOUR_COLUMN + channel] = rgb[3 * i + channel]


@ti.kernel
def _fill_joints(
    bodies: ti.template(),
    n_bodies: ti.i32,
    view_world: _I1,
    transform: _F1,
    clamp: ti.i32,
    parent: _I1,
    child: _I1,
    anchor_parent: _F1,
    anchor_child: _F1,
    joints: _F1,
):
    """Per view and joint, 3 segments (GGUI's layout): parent centre -> parent anchor ->
    child anchor -> child centre (the anchors part where the joint does not hold);
    anchors in the bodies' frames, m, rows of 2."""
    n_joints = parent.shape[0]
    for v, j in ti.ndrange(view_world.shape[0], n_joints):
        base = view_world[v] * n_bodies
        out = JOINT_VERTICES * (v * n_joints + j)
        view = ti.Vector(
            [transform[TRANSFORM_COLUMNS * v + i] for i in ti.static(range(TRANSFORM_COLUMNS))]
        )
        for side in ti.static(range(2)):
            slot = base + (parent[j] if side == 0 else child[j])
            p = bodies.position[slot] - ti.Vector([view[0], view[1]])
            a = bodies.angle[slot]
            c, s = ti.cos(a), ti.sin(a)
            lx = anchor_parent[2 * j] if side == 0 else anchor_child[2 * j]
            ly = anchor_parent[2 * j + 1] if side == 0 else anchor_child[2 * j + 1]
            centre = _to_window(view, p.x, p.y, clamp)
            anchor = _to_window(view, p.x + c * lx - s * ly, p.y + s * lx + c * ly, clamp)
            # The path's vertices 0, 1 (1, 2), (2, 3) 4, 5: centre, anchor | anchor, centre.
            _put(joints, VERTEX_FLOATS, out + (0 if side == 0 else 5), centre)
            _put(joints, VERTEX_FLOATS, out + (1 if side == 0 else 3), anchor)
            _put(joints, VERTEX_FLOATS, out + (2 if side == 0 else 4), anchor)


class FrameGeometry:
    """A scene's frame geometry for GGUI, filled on the scene's device (see the module
    docstring). Make one per scene; call update() every frame, then draw() the Frame.

    Args:
        scene: the Scene to draw (it is built, if it was not, by the first update).
        dim_sleeping: fade sleeping bodies toward the background (by dim_amount).
        boxes: draw each body's AABB (of its drawn outline).
        joints: draw the joints (parent centre -> anchor -> anchor -> child centre).
        contacts: draw the contact points and normals (Scene.contacts: read on the host).
        dim_amount: 0-1, how far a sleeping body's colours go toward the background.
        normal_length: contact normals' length, a fraction of the window height.
        layout: the bodies' buffers, "ggui" (GGUI's vertex layout: draw() needs no copy;
            the fastest whole GGUI frame) or "compact" (positions and colours apart: the
            fastest update, for reading the geometry back); see VertexBuffer.

    The toggles are attributes: set them between frames.
    """

    def __init__(
        self,
        scene,
        *,
        dim_sleeping: bool = False,
        boxes: bool = False,
        joints: bool = False,
        contacts: bool = False,
        dim_amount: float = 0.5,
        normal_length: float = 0.015,
        layout: str = "ggui",
    ):
        if layout not in ("ggui", "compact"):
            raise ValueError(f"layout must be 'ggui' or 'compact', got {layout!r}")
        self.scene = scene
        self.layout = layout
        self.dim_sleeping = dim_sleeping
        self.boxes = boxes
        self.joints = joints
        self.contacts = contacts
        self.dim_amount = dim_amount
        self.normal_length = normal_length
        self._templates = None
        self._layout_key = None
        self._last_views = None
        self._boxes_drawn = False
        ring = np.linspace(0, 2 * np.pi, CIRCLE_SEGMENTS, endpoint=False)
        self._no_boxes = _to_device(np.zeros((1, VERTEX_FLOATS), np.float32))
        self._default_bounds: dict[int, tuple] = {}
        self._ring = _to_device(np.stack([np.cos(ring), np.sin(ring)], 1).astype(np.float32))

    # ------------------------------------------------------------------ templates
    def _build_templates(self):
        """The drawn bodies' outlines, colours and offsets into a view's buffers, and the
        joints' bodies and anchors, on the device; buffers are made again by the next
        layout."""
        scene = self.scene
        signature = body_outlines(scene)
        # Worlds with shapes of their own: every world's centres, radii and points, laid
        # out alike (render.world_outlines: world 0's layout serves them all), each view
        # reading its world's.
        every = world_outlines(scene) or (signature,)
        outlines = every[0]
        background = _background(scene)
        fill, edge = _looks(scene, outlines, background)
        kind, count = outlines.kind, outlines.count
        boundary = np.where(kind == KIND_CIRCLE, CIRCLE_SEGMENTS, count)
        # Vertices a body writes (its fan's centre and boundary; its outline's boundary, a
        # circle's mark, a segment's ends); the triangles and segments index them.
        triangle_counts = np.where(kind == KIND_SEGMENT, 0, boundary + 1)
        line_counts = np.where(kind == KIND_SEGMENT, 2, boundary + 2 * (kind == KIND_CIRCLE))
        triangle_start = (np.cumsum(triangle_counts) - triangle_counts).astype(np.int32)
        line_start = (np.cumsum(line_counts) - line_counts).astype(np.int32)
        joints = scene._builder.joints
        self._templates = {
            "n_drawn": len(outlines),
            "signature": signature,
            "body": _to_device(outlines.body.astype(np.int32)),
            "kind": _to_device(kind.astype(np.int32)),
            "first": _to_device(outlines.first.astype(np.int32)),
            "count": _to_device(count.astype(np.int32)),
            "centre": _to_device(
                np.concatenate([o.centre for o in every]).astype(np.float32).reshape(-1, 2)
            ),
            "radius": _to_device(np.concatenate([o.radius for o in every]).astype(np.float32)),
            "points": _to_device(
                np.concatenate([o.points.reshape(-1, 2) for o in every]).astype(np.float32)
            ),
            "drawn_stride": len(outlines) if len(every) > 1 else 0,
            "points_stride": len(outlines.points) if len(every) > 1 else 0,
            "triangle_start": _to_device(triangle_start),
            "line_start": _to_device(line_start),
            "indices": _body_indices(kind, boundary, triangle_start, line_start),
            "triangles_per_view": int(triangle_counts.sum()),
            "lines_per_view": int(line_counts.sum()),
            "fill": _to_device((fill / 255.0).astype(np.float32)),
            "edge": _to_device((edge / 255.0).astype(np.float32)),
            "background": (background / 255.0).astype(np.float32),
            "n_joints": len(joints),
            "parent": _to_device(np.array([j.parent for j in joints], np.int32)),
            "child": _to_device(np.array([j.child for j in joints], np.int32)),
            "anchor_parent": _to_device(
                np.array([j.anchor_parent for j in joints], np.float32).reshape(-1, 2)
            ),
            "anchor_child": _to_device(
                np.array([j.anchor_child for j in joints], np.float32).reshape(-1, 2)
            ),
        }
        self._layout_key = None

    def _current_templates(self) -> dict:
        outlines = body_outlines(self.scene)  # kept by render: the same object until the
        # scene's bodies or visuals change
        if (
            self._templates is None
            or self._templates["signature"] is not outlines
            or self._templates["n_joints"] != self.scene.n_joints
        ):
            self._build_templates()
        return self._templates

    def _layout(self, n_views: int):
        """The buffers for n_views views (made again when the count changes)."""
        t = self._templates
        if self._layout_key == n_views:
            return
        n_keys = n_views * t["n_drawn"]
        triangle_indices, line_indices = t["indices"]
        self._triangles = VertexBuffer(
            n_views * t["triangles_per_view"],
            layout=self.layout,
            indices=_per_view(triangle_indices, n_views, t["triangles_per_view"]),
        )
        self._lines = VertexBuffer(
            n_views * t["lines_per_view"],
            layout=self.layout,
            indices=_per_view(line_indices, n_views, t["lines_per_view"]),
        )
        self._box_buffer = None
        self._joint_buffer = None
        # Never drawn yet: NaN poses differ from every pose, -1 from every look.
        self._drawn_pose = _to_device(np.full((n_keys, 3), np.nan, np.float32))
        self._drawn_look = _to_device(np.full(n_keys, -1, np.int32))
        self._layout_key = n_views
        self._last_views = None

    # ------------------------------------------------------------------ frames
    @property
    def n_triangle_vertices(self) -> int:
        """Triangle corners of the last update (3 per triangle; drawn from fewer vertices,
        by index: VertexBuffer.count)."""
        return self._triangles.corners if self._layout_key is not None else 0

    @property
    def n_line_vertices(self) -> int:
        """Body line ends of the last update (2 per segment; by index, as the triangles)."""
        return self._lines.corners if self._layout_key is not None else 0

    def update(
        self, views=None, aspect: float = 4 / 3, *, bounds=None, worlds=None, max_tiles: int = 64
    ) -> Frame:
        """Fill this frame's geometry: one kernel launch (two with joints; contacts read on
        the host).

        Args:
            views: what to draw where, a sequence of FrameView (or the viewer's View: any
                object with world, rect and bounds); None: tile_views(scene, bounds,
                worlds, max_tiles). With more than one view, what reaches past a view's
                rect is pressed onto its edge (GGUI cannot clip), as the viewer does.
            aspect: the window's width / height (pixels).
            bounds, worlds, max_tiles: tile_views' arguments, where views is None.

        Returns:
            The Frame: its buffers are this FrameGeometry's, filled again by the next
            update.
        """
        views = self._checked_views(views, bounds, worlds, max_tiles)
        ctx = self.scene.step_context()  # the scene built and resident in the device pool
        t = self._current_templates()
        self._layout(len(views))
        transform = view_transforms(views, aspect)
        view_worlds = np.array([view.world for view in views], np.int32)
        clamp = int(len(views) > 1)
        redraw = self._views_changed(transform, view_worlds)
        if self.boxes and self._box_buffer is None:
            self._box_buffer = VertexBuffer(len(views) * t["n_drawn"] * BOX_VERTICES, BOX_COLOUR)
        if self.boxes and not self._boxes_drawn:
            redraw = True  # boxes are filled only where a body is drawn
        self._boxes_drawn = bool(self.boxes)
        boxes = self._box_buffer.xy if self.boxes else self._no_boxes
        transform = transform.reshape(-1)  # flat, as the kernels take it
        if t["n_drawn"]:
            self._draw_bodies(ctx, t, view_worlds, transform, clamp, redraw, boxes)
        frame = Frame(self._triangles, self._lines, boxes=self._box_buffer if self.boxes else None)
        if self.joints and t["n_joints"]:
            frame.joints = self._draw_joints(ctx, t, view_worlds, transform, clamp)
        if self.contacts:
            frame.contact_points, frame.contact_lines = self._contacts(
                views, transform.reshape(-1, TRANSFORM_COLUMNS), clamp
            )
        return frame

    def _checked_views(self, views, bounds, worlds, max_tiles) -> list:
        """update's `views` as a list (None: tile_views'), each of a world of the scene."""
        scene = self.scene
        if views is None:
            views = tile_views(
                scene, bounds if bounds is not None else self._default_bounds, worlds, max_tiles
            )
        views = list(views)
        for view in views:
            if not 0 <= view.world < scene.n_worlds:
                raise ValueError(
                    f"view of world {view.world}: the scene has worlds 0 to {scene.n_worlds - 1}"
                )
        return views

    def _views_changed(self, transform: np.ndarray, view_worlds: np.ndarray) -> bool:
        """Whether the views (their (n_views, TRANSFORM_COLUMNS) transforms and worlds)
        differ from the last update's, which every body must then be drawn again for;
        remembers these."""
        changed = self._last_views is None or not (
            np.array_equal(transform, self._last_views[0])
            and np.array_equal(view_worlds, self._last_views[1])
        )
        self._last_views = (transform, view_worlds)
        return changed

    def _draw_bodies(self, ctx, t: dict, view_worlds, transform, clamp: int, redraw, boxes):
        """The _fill_bodies launch: every drawn body of templates `t` in every view, into the
        triangle and line buffers (and `boxes`, where drawn)."""
        _fill_bodies(
            ctx.pool.bodies,
            ctx.n_bodies,
            view_worlds,
            transform,
            clamp,
            t["body"],
            t["kind"],
            t["first"],
            t["count"],
            t["centre"],
            t["radius"],
            t["points"],
            t["drawn_stride"],
            t["points_stride"],
            self._ring,
            t["triangle_start"],
            t["line_start"],
            t["triangles_per_view"],
            t["lines_per_view"],
            t["fill"],
            t["edge"],
            self._drawn_pose,
            self._drawn_look,
            int(redraw),
            int(bool(self.dim_sleeping)),
            ti.Vector(t["background"].tolist()),
            float(self.dim_amount),
            self._triangles.xy,
            self._triangles.rgb,
            self._lines.xy,
            self._lines.rgb,
            self._triangles.xy_stride,
            self._triangles.rgb_stride,
            self._triangles.colour_offset,
            int(bool(self.boxes)),
            boxes,
        )

    def _draw_joints(self, ctx, t: dict, view_worlds, transform, clamp: int) -> VertexBuffer:
        """The joints' buffer (made on first use), filled for every view by _fill_joints."""
        if self._joint_buffer is None:
            self._joint_buffer = VertexBuffer(
                len(view_worlds) * t["n_joints"] * JOINT_VERTICES, JOINT_COLOUR
            )
        _fill_joints(
            ctx.pool.bodies,
            ctx.n_bodies,
            view_worlds,
            transform,
            clamp,
            t["parent"],
            t["child"],
            t["anchor_parent"],
            t["anchor_child"],
            self._joint_buffer.xy,
        )
        return self._joint_buffer

    def _contacts(self, views, transform: np.ndarray, clamp: int):
        """(points (k, 2), normal lines VertexBuffer) of every view's contact points, in
        window coordinates (Scene.contacts, on the host)."""
        found = self.scene.contacts(world=None)
        points, lines = [], []
        for v, view in enumerate(views):
            rows = np.flatnonzero(found.world == view.world)
            if not len(rows):
                continue
            used = np.arange(found.points.shape[1])[None] < found.point_count[rows][:, None]
            at = found.points[rows][used]
            normal = np.broadcast_to(found.normal[rows][:, None], found.points[rows].shape)[used]
            cx, cy, sx, sy, mx, my, x0, y0, x1, y1 = transform[v].astype(float)
            # normal_length is a fraction of the window height: sy window units per metre.
            tips = at + normal * self.normal_length / sy

            def window(q, cx=cx, cy=cy, sx=sx, sy=sy, mx=mx, my=my, x0=x0, y0=y0, x1=x1, y1=y1):
                out = np.stack([(q[:, 0] - cx) * sx + mx, (q[:, 1] - cy) * sy + my], 1)
                return np.clip(out, [x0, y0], [x1, y1]) if clamp else out

            points.append(window(at))
            lines.append(np.stack([window(at), window(tips)], 1).reshape(-1, 2))
        points = (
            np.concatenate(points).astype(np.float32) if points else np.zeros((0, 2), np.float32)
        )
        segments = np.concatenate(lines) if lines else np.zeros((0, 2))
        buffer = VertexBuffer(len(segments), CONTACT_COLOUR)
        rows = _to_host(buffer.xy, VERTEX_FLOATS)
        rows[: len(segments), :2] = segments
        if not isinstance(buffer.xy, np.ndarray):
            buffer.xy.from_numpy(rows.reshape(-1))
        return points, buffer
