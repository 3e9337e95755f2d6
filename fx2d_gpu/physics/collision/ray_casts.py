"""Ray casts on the device: the nearest body each ray hits, or every body it crosses.

Rays walk each grid level the world uses (collision/query_grid.py) with a 2D DDA
(Amanatides & Woo) from the origin, clipped to the box around the world's bodies, so a huge
max_distance never walks empty cells; the nearest-hit walk stops once its cells start
beyond the best hit. A ray that starts outside that box is first moved on the host, in
float64, to just outside it (approach): in float32 an origin at 1e15 m is rounded by tens
of thousands of km, and every hit with it; moved, a hit is as exact as the bodies' own
coordinates, wherever the ray starts within MAX_COORDINATE. Every shape is a core and a
skin (shapes.py): a sharp polygon is clipped by its edges' slabs; a core with a skin
(capsule, rounded polygon) is its edges pushed out by the skin plus a circle at each
vertex, the nearest of them (exact for convex cores); edges are two-sided segments, chain
links one-sided (hit only from the front, as their collisions). A ray that starts inside a
shape hits it at distance 0.
"""

from typing import TYPE_CHECKING

import numpy as np
import taichi as ti

from ...enums import SHAPE_CHAIN, SHAPE_CIRCLE, SHAPE_NONE
from ..bodies import bounding_radius, shape_row, world_cell_size
from ..math2d import cross, rotate
from .broad_phase import cell_coord, cell_slot, finite_pose
from .queries import (
    body_pose,
    core_size,
    core_vertex,
    count_then_fill,
    f32_1d,
    f32_2d,
    i32_1d,
    point_segment_distance,
    reported,
    serial,
)
from .query_grid import refresh_grid

if TYPE_CHECKING:
    from ..solver.context import StepContext

vec2 = ti.math.vec2

#: Modes of the ray walk (compile-time): the nearest hit, or every hit (count, then fill).
NEAREST, COUNT, FILL = 0, 1, 2


@ti.func
def ray_circle(origin, direction, center, radius, t_max):
    """(hit, t, unit normal) of a ray (unit direction) and a disc, t in [0, t_max]; an
    origin inside hits at t = 0 with the normal -direction."""
    m = origin - center
    b = m.dot(direction)
    hit, t, normal = False, 0.0, -direction
    if m.dot(m) <= radius * radius:
        hit = True
    elif b < 0.0:
        # Squared distance from the centre to the line, without cancellation.
        off = m - b * direction
        disc = radius * radius - off.dot(off)
        if disc >= 0.0:
            t = -b - ti.sqrt(disc)
            if t <= t_max:
                hit = True
                normal = (m + t * direction).normalized()
    return hit, t, normal


@ti.func
def ray_segment(origin, direction, a, b, t_max):
    """(hit, t) of a ray and the segment a-b, t in [0, t_max] (parallel rays miss)."""
    e = b - a
    denom = cross(direction, e)
    hit, t = False, 0.0
    if denom != 0.0:
        w = a - origin
        t = cross(w, e) / denom
        u = cross(w, direction) / denom
        hit = 0.0 <= t <= t_max and 0.0 <= u <= 1.0
    return hit, t


@ti.func
def ray_shape(model: ti.template(), bodies: ti.template(), slot, body, origin, direction, t_max):
    """(hit, t m, unit normal facing the ray) of a ray (origin m, unit direction) and a
    body's shape, t in [0, t_max]."""
    position, c, s = body_pose(bodies, slot)
    o = origin - position  # everything relative to the body, for precision far out
    row = shape_row(model, slot, body)
    kind = model.shape_kind[row]
    skin = model.shape_radius[row]
    k = core_size(model, row)
    hit, t_hit, normal = False, ti.math.inf, -direction
    if kind == SHAPE_CIRCLE:
        hit, t_hit, normal = ray_circle(o, direction, core_vertex(model, row, 0, c, s), skin, t_max)
    elif kind == SHAPE_CHAIN or (k == 2 and skin == 0.0):
        # A segment with no skin: an edge (either side) or a chain link (its front only).
        a, b = core_vertex(model, row, 0, c, s), core_vertex(model, row, 1, c, s)
        front = rotate(model.shape_normals[row, 1], c, s)
        if kind != SHAPE_CHAIN or front.dot(direction) < 0.0:
            hit, t_hit = ray_segment(o, direction, a, b, t_max)
            normal = front if front.dot(direction) < 0.0 else -front
    elif skin == 0.0:
        # A sharp convex polygon: clip the ray by each edge's half-plane (slab clipping).
        t_lo, t_hi = 0.0, t_max
        missed = False
        for i in range(k):
            n = rotate(model.shape_normals[row, i], c, s)
            num = n.dot(core_vertex(model, row, i, c, s) - o)  # >= 0: o inside this side
            den = n.dot(direction)
            if den == 0.0:
                if num < 0.0:
                    missed = True
            elif den < 0.0:
                t = num / den
                if t > t_lo:
                    t_lo = t
                    normal = n
            else:
                t_hi = ti.min(t_hi, num / den)
        if not missed and t_lo <= t_hi:
            hit, t_hit = True, t_lo
    else:
        # A core with a skin: inside when within the skin of the core (or in a polygon
        # core); else the nearest of the pushed-out edges (from outside) and vertex circles.
        inside = k >= 3
        nearest = ti.math.inf
        for i in range(k):
            v = core_vertex(model, row, i, c, s)
            w = core_vertex(model, row, (i + 1) % k, c, s)
            if rotate(model.shape_normals[row, i], c, s).dot(o - v) > 0.0:
                inside = False
            nearest = ti.min(nearest, point_segment_distance(o, v, w))
        if inside or nearest <= skin:
            hit, t_hit = True, 0.0
        else:
            for i in range(k):
                v = core_vertex(model, row, i, c, s)
                found, t, n = ray_circle(o, direction, v, skin, t_max)
                if found and t < t_hit:
                    hit, t_hit, normal = True, t, n
                n = rotate(model.shape_normals[row, i], c, s)
                if n.dot(direction) < 0.0:
                    w = core_vertex(model, row, (i + 1) % k, c, s)
                    found, t = ray_segment(o, direction, v + skin * n, w + skin * n, t_max)
                    if found and t < t_hit:
                        hit, t_hit, normal = True, t, n
    if hit and t_hit == 0.0:
        normal = -direction
    return hit, t_hit, normal


@ti.func
def _clip_to_world(grid: ti.template(), world, origin, direction, t_limit):
    """(t0, t1) m: the part [t0, t1] of a ray (origin m, unit direction) up to t_limit (m)
    inside the box around the world's bodies; t0 > t1 where it misses the box (empty
    worlds have lower = +inf)."""
    lower, upper = grid.world_lower[world], grid.world_upper[world]
    t0, t1 = 0.0, t_limit
    for axis in ti.static(range(2)):
        if direction[axis] != 0.0:
            ta = (lower[axis] - origin[axis]) / direction[axis]
            tb = (upper[axis] - origin[axis]) / direction[axis]
            t0 = ti.max(t0, ti.min(ta, tb))
            t1 = ti.min(t1, ti.max(ta, tb))
        elif not (lower[axis] <= origin[axis] <= upper[axis]):
            t1 = -1.0
    return t0, t1


@ti.func
def _seen_in_previous_cell(grid: ti.template(), other, inv_cell, prev_x, prev_y):
    """Whether body slot `other` also lies in the previous cell (prev_x, prev_y) of the
    walk (cells of size 1 / inv_cell m)."""
    lo, hi = grid.aabb_lower[other], grid.aabb_upper[other]
    return cell_coord(lo.x, inv_cell) <= prev_x <= cell_coord(hi.x, inv_cell) and cell_coord(
        lo.y, inv_cell
    ) <= prev_y <= cell_coord(hi.y, inv_cell)


@ti.func
def _visit_cell(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    world,
    level,
    cx,
    cy,
    inv_cell,
    prev_x,
    prev_y,
    has_prev,
    origin,
    direction,
    n_bodies,
    table_mask,
    sensors,
    mode: ti.template(),
    write_at,
    out_body: ti.template(),
    out_distance: ti.template(),
    out_normal: ti.template(),
    best_body,
    best_t,
    best_normal,
    found,
):
    """The ray against the bodies in grid cell (cx, cy) of `level`: returns the walk's
    (best_body, best_t, best_normal, found) updated as walk_ray describes."""
    table_slot = cell_slot(world, level, cx, cy, table_mask)
    for k in range(grid.grid_start[table_slot], grid.grid_start[table_slot + 1]):
        other = grid.grid_body[k]
        key = grid.grid_cell[k]
        body = other % n_bodies
        if (
            key.x == cx
            and key.y == cy
            and key.z == level
            and other // n_bodies == world
            and reported(model, body, sensors)
        ):
            fresh = True
            if ti.static(mode != NEAREST) and has_prev:
                # Each body once: skip it if the previous cell also holds it
                # (the cells a ray crosses in a body's 2 x 2 are consecutive).
                fresh = not _seen_in_previous_cell(grid, other, inv_cell, prev_x, prev_y)
            if fresh:
                hit, t, normal = ray_shape(model, bodies, other, body, origin, direction, best_t)
                if hit:
                    if ti.static(mode == NEAREST):
                        if t < best_t or best_body < 0 or body < best_body:
                            best_body, best_t, best_normal = body, t, normal
                    else:
                        if ti.static(mode == FILL):
                            index = write_at + found
                            out_body[index] = body
                            out_distance[index] = t
                            out_normal[index, 0] = normal.x
                            out_normal[index, 1] = normal.y
                        found += 1
    return best_body, best_t, best_normal, found


@ti.func
def _walk_level(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    world,
    level,
    origin,
    direction,
    t0,
    t1,
    n_bodies,
    cell_size,
    table_mask,
    sensors,
    mode: ti.template(),
    write_at,
    out_body: ti.template(),
    out_distance: ti.template(),
    out_normal: ti.template(),
    best_body,
    best_t,
    best_normal,
    found,
):
    """The cells of grid `level` (cells of cell_size * 2**level m) that the ray crosses over
    [t0, t1] m, in order (2D DDA); NEAREST stops at the first cell beyond best_t. Returns
    (best_body, best_t, best_normal, found) updated as walk_ray describes."""
    cell = cell_size * ti.cast(1 << level, ti.f32)
    inv_cell = 1.0 / cell
    start = origin + t0 * direction
    end = origin + t1 * direction
    cx, cy = cell_coord(start.x, inv_cell), cell_coord(start.y, inv_cell)
    n_cells = (
        ti.abs(cell_coord(end.x, inv_cell) - cx) + ti.abs(cell_coord(end.y, inv_cell) - cy) + 2
    )
    step_x = 1 if direction.x > 0.0 else -1
    step_y = 1 if direction.y > 0.0 else -1
    next_x, next_y = ti.math.inf, ti.math.inf  # t of the next cell boundary
    delta_x, delta_y = ti.math.inf, ti.math.inf
    if direction.x != 0.0:
        edge = ti.cast(cx + (1 if step_x > 0 else 0), ti.f32) * cell
        next_x = (edge - origin.x) / direction.x
        delta_x = cell / ti.abs(direction.x)
    if direction.y != 0.0:
        edge = ti.cast(cy + (1 if step_y > 0 else 0), ti.f32) * cell
        next_y = (edge - origin.y) / direction.y
        delta_y = cell / ti.abs(direction.y)
    t_enter = t0
    prev_x, prev_y, has_prev = 0, 0, False
    for _ in range(n_cells):
        reach = best_t if ti.static(mode == NEAREST) else t1
        if t_enter > reach:
            break
        best_body, best_t, best_normal, found = _visit_cell(
            model,
            bodies,
            grid,
            world,
            level,
            cx,
            cy,
            inv_cell,
            prev_x,
            prev_y,
            has_prev,
            origin,
            direction,
            n_bodies,
            table_mask,
            sensors,
            mode,
            write_at,
            out_body,
            out_distance,
            out_normal,
            best_body,
            best_t,
            best_normal,
            found,
        )
        prev_x, prev_y, has_prev = cx, cy, True
        if next_x < next_y:
            cx += step_x
            t_enter = next_x
            next_x += delta_x
        else:
            cy += step_y
            t_enter = next_y
            next_y += delta_y
    return best_body, best_t, best_normal, found


@ti.func
def walk_ray(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    world,
    origin,
    direction,
    t_limit,
    n_bodies,
    cell_size,
    table_mask,
    sensors,
    mode: ti.template(),
    query,
    write_at,
    out_body: ti.template(),
    out_distance: ti.template(),
    out_normal: ti.template(),
):
    """Walk the grid cells a ray (origin m, unit direction) crosses up to t_limit (m) on
    each level of its world. NEAREST: returns the nearest hit (body, t, normal; ties to the
    lowest body, -1 if none); COUNT: how many bodies it crosses (each once); FILL: the same,
    written from index write_at of the out arrays."""
    best_body, best_t, best_normal = -1, t_limit, vec2(0.0, 0.0)
    found = 0
    cell = world_cell_size(model, cell_size, world)
    # Clipped to the box around the world's bodies, so a huge t_limit walks no empty cells.
    t0, t1 = _clip_to_world(grid, world, origin, direction, t_limit)
    mask = grid.world_level_mask[world] if t0 <= t1 else 0
    level = 0
    while mask != 0:
        if mask & 1:
            best_body, best_t, best_normal, found = _walk_level(
                model,
                bodies,
                grid,
                world,
                level,
                origin,
                direction,
                t0,
                t1,
                n_bodies,
                cell,
                table_mask,
                sensors,
                mode,
                write_at,
                out_body,
                out_distance,
                out_normal,
                best_body,
                best_t,
                best_normal,
                found,
            )
        mask >>= 1
        level += 1
    return best_body, best_t, best_normal, found


@ti.func
def nearest_in_world(
    model: ti.template(), bodies: ti.template(), world, n_bodies, origin, direction, t_limit
):
    """The nearest hit of a ray (origin m, unit direction, float32) up to t_limit (m) among
    world's bodies, each tested in turn: (body, t m, normal), body -1 for a miss. The bodies
    walk_ray's grid holds (a shape, enabled, a finite pose) and a query reports (no
    sensor), and its answer, the least (t, body): where a world has a few bodies (a learning
    task's, envs/device_step.py), a thread asks each of them, with no grid to build (a
    launch, and a count read back)."""
    best_body, best_t, best_normal = -1, t_limit, vec2(0.0, 0.0)
    for body in range(n_bodies):
        slot = world * n_bodies + body
        if (
            model.shape_kind[body] != SHAPE_NONE
            and bodies.enabled[slot] == 1
            and finite_pose(bodies, slot)
            and reported(model, body, 0)
        ):
            if _may_reach(model, bodies, slot, body, origin, direction, best_t):
                hit, t, normal = ray_shape(model, bodies, slot, body, origin, direction, best_t)
                # (bodies in rising order: a tie keeps the lower body)
                if hit and (t < best_t or best_body < 0):
                    best_body, best_t, best_normal = body, t, normal
    return best_body, best_t, best_normal


@ti.func
def _may_reach(model: ti.template(), bodies: ti.template(), slot, body, origin, direction, t_max):
    """False only where the ray (origin m, unit direction) up to t_max (m) passes clear of
    the disc around body slot's shape (its bounding radius about its position) by more
    than float32's rounding there (a 1e-5 relative allowance): a test that never turns
    away a body ray_shape would hit, and spares it most bodies of a world."""
    offset = bodies.position[slot] - origin
    along = ti.min(ti.max(offset.dot(direction), 0.0), t_max)  # the nearest point's t
    gap = offset - along * direction
    reach = bounding_radius(model, slot, body)
    allowance = 1e-5 * (ti.abs(offset.x) + ti.abs(offset.y) + reach + t_max) + 1e-30
    return gap.dot(gap) <= (reach + allowance) * (reach + allowance)


@ti.kernel
def _ray_cast(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    serial: ti.template(),
    mode: ti.template(),
    origins: f32_2d,
    directions: f32_2d,
    limits: f32_1d,
    n_rays: ti.i32,
    n_bodies: ti.i32,
    cell_size: ti.f32,
    table_mask: ti.i32,
    sensors: ti.i32,
    offsets: i32_1d,
    out_body: i32_1d,
    out_distance: f32_1d,
    out_normal: f32_2d,
):
    """Rays q = world * n_rays + ray: origins (q, 2) m, unit directions (q, 2), limits (q,)
    m. NEAREST: out_body (q,) (-1: miss), out_distance (q,) m, out_normal (q, 2); COUNT:
    out_body (q,) the bodies each ray crosses; FILL: each ray's hits from offsets[q]."""
    ti.loop_config(serialize=serial)
    for q in range(limits.shape[0]):
        world = q // n_rays
        origin = vec2(origins[q, 0], origins[q, 1])
        direction = vec2(directions[q, 0], directions[q, 1])
        write_at = 0
        if ti.static(mode == FILL):
            write_at = offsets[q]
        body, t, normal, found = walk_ray(
            model,
            bodies,
            grid,
            world,
            origin,
            direction,
            limits[q],
            n_bodies,
            cell_size,
            table_mask,
            sensors,
            mode,
            q,
            write_at,
            out_body,
            out_distance,
            out_normal,
        )
        if ti.static(mode == NEAREST):
            out_body[q] = body
            out_distance[q] = t
            out_normal[q, 0] = normal.x
            out_normal[q, 1] = normal.y
        elif ti.static(mode == COUNT):
            out_body[q] = found


def nearest_hits(
    ctx: "StepContext",
    origins: np.ndarray,
    directions: np.ndarray,
    limits: np.ndarray,
    sensors: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The nearest hit of rays q = world * n_rays + ray (origins (q, 2) m and unit
    directions (q, 2), float64; limits (q,) m) at the current poses.

    Returns:
        (body (q,) int64, -1 for a miss; distance (q,) float64 m, inf for a miss; normal
        (q, 2) float64).
    """
    launch, skipped = _prepare(ctx, origins, directions, limits, sensors)
    n = len(limits)
    body = np.empty(n, np.int32)
    distance = np.empty(n, np.float32)
    normal = np.empty((n, 2), np.float32)
    launch(NEAREST, np.zeros(1, np.int32), body, distance, normal)
    distance = np.where(body >= 0, distance.astype(np.float64) + skipped, np.inf)
    return body.astype(np.int64), distance, normal.astype(np.float64)


def every_hit(
    ctx: "StepContext",
    origins: np.ndarray,
    directions: np.ndarray,
    limits: np.ndarray,
    sensors: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every body rays q cross (arguments as nearest_hits), each once, where the ray enters it.

    Returns:
        (ray q of each hit (h,) int64, body (h,) int64, distance (h,) float64 m, normal
        (h, 2) float64), sorted by (q, distance, body).
    """
    launch, skipped = _prepare(ctx, origins, directions, limits, sensors)
    n = len(limits)

    def count(found):
        launch(
            COUNT,
            np.zeros(1, np.int32),
            found,
            np.empty(n, np.float32),
            np.empty((n, 2), np.float32),
        )

    def fill(offsets, capacity):
        hits = (
            np.empty(capacity, np.int32),
            np.empty(capacity, np.float32),
            np.empty((capacity, 2), np.float32),
        )
        launch(FILL, offsets, *hits)
        return hits

    ray, (body, distance, normal) = count_then_fill(n, count, fill)
    body = body.astype(np.int64)
    order = np.lexsort((body, distance, ray))
    ray = ray[order]
    return (
        ray,
        body[order],
        distance[order].astype(np.float64) + skipped[ray],
        normal[order].astype(np.float64),
    )


def _prepare(
    ctx: "StepContext",
    origins: np.ndarray,
    directions: np.ndarray,
    limits: np.ndarray,
    sensors: bool,
):
    """The grid refreshed and the rays moved up to their worlds (approach): returns
    (launch(mode, offsets, out_body, out_distance, out_normal), the distance (q,) m each
    ray was moved)."""
    n = len(limits)
    table_mask = refresh_grid(ctx)
    pool = ctx.pool
    skipped = approach(pool, ctx.n_worlds, origins, directions, limits)
    moved = dict(
        origins=np.ascontiguousarray(origins + skipped[:, None] * directions, np.float32),
        directions=np.ascontiguousarray(directions, np.float32),
        limits=np.ascontiguousarray(limits - skipped, np.float32),
    )
    in_serial = serial(ctx, n)

    def launch(mode, offsets, out_body, out_distance, out_normal):
        _ray_cast(
            model=pool.model,
            bodies=pool.bodies,
            grid=pool.grid,
            serial=in_serial,
            mode=mode,
            **moved,
            n_rays=n // ctx.n_worlds,
            n_bodies=ctx.n_bodies,
            cell_size=ctx.cell_size,
            table_mask=table_mask,
            sensors=int(sensors),
            offsets=offsets,
            out_body=out_body,
            out_distance=out_distance,
            out_normal=out_normal,
        )

    return launch, skipped


def approach(
    pool, n_worlds: int, origins: np.ndarray, directions: np.ndarray, limits: np.ndarray
) -> np.ndarray:
    """How far (m, float64, (q,)) to move each ray (q = world * n_rays + ray; origins and
    unit directions float64, limits m) before the device casts it: to where it enters its
    world's box (grid.world_lower/upper, as refresh_grid left it) grown by a pad, when it
    starts outside and reaches the box within its limit; 0 otherwise (the ray then starts
    near or in the box, or misses it, as the kernel finds).

    The pad (1 m + 1e-6 of the box's largest coordinate) exceeds float32's rounding of
    the coordinates there many times over, so the moved origin never starts inside a body
    (a hit at distance 0, normal -direction), and is small against the box's distance
    from 0: the origin's rounding is then the bodies' own."""
    box = pool.grid.read({"world_lower": n_worlds, "world_upper": n_worlds})
    # Each world's box and pad first, then each axis of the (world, ray) grid apart: the
    # same float64 arithmetic as ray by ray on (q, 2) arrays, without their temporaries
    # and reductions over an axis of 2 (524,288 rays on a 2-core VM: 137 -> 37 ms from
    # random origins, 135 -> 11 ms where every ray starts in its world's box).
    lower = box["world_lower"].reshape(n_worlds, 2).astype(np.float64)
    upper = box["world_upper"].reshape(n_worlds, 2).astype(np.float64)
    filled = np.isfinite(lower).all(1) & np.isfinite(upper).all(1)  # empty: +inf / -inf
    lower[~filled], upper[~filled] = 0.0, 0.0
    pad = 1.0 + 1e-6 * np.maximum(np.abs(lower), np.abs(upper)).max(1, initial=0.0)
    lower -= pad[:, None]
    upper += pad[:, None]
    shape = (n_worlds, len(limits) // n_worlds)
    axes = [
        (origins[:, axis].reshape(shape), lower[:, axis, None], upper[:, axis, None])
        for axis in range(2)
    ]
    between = [(low <= origin) & (origin <= high) for origin, low, high in axes]
    if (between[0] & between[1]).all():
        # Every ray starts in its world's box (a learning task's sensors, usually): each
        # one's entry is behind it, t_in <= 0, and it is not moved.
        return np.zeros(len(limits))
    t_in, t_out = None, None
    for axis, (origin, low, high) in enumerate(axes):
        direction = directions[:, axis].reshape(shape)
        moving = direction != 0.0
        step = np.where(moving, direction, 1.0)
        ta, tb = (low - origin) / step, (high - origin) / step
        # (between[axis]: where the ray does not move on this axis, whether it lies in the box)
        near = np.where(moving, np.minimum(ta, tb), np.where(between[axis], -np.inf, np.inf))
        far = np.where(moving, np.maximum(ta, tb), np.where(between[axis], np.inf, -np.inf))
        t_in = near if t_in is None else np.maximum(t_in, near)
        t_out = far if t_out is None else np.minimum(t_out, far)
    t_in, t_out = t_in.reshape(-1), t_out.reshape(-1)
    filled = np.repeat(filled, shape[1])
    return np.where(filled & (t_in > 0.0) & (t_in <= t_out) & (t_in < limits), t_in, 0.0)
