"""Spatial queries on the device: ray casts and overlap queries (points, boxes, any shape),
every query of every world in parallel, one thread per (world, query).

Queries walk the broad phase's grid (broad_phase.build_grid), rebuilt at the current poses
with exact AABBs (margin 0) into the broad phase's scratch, which every step rebuilds: a
query changes nothing a later step reads. Bodies the grid leaves out (disabled, shape-less,
at a non-finite pose) are never reported; sensors only when a query asks for them.

- Rays walk each grid level the world uses with a 2D DDA (Amanatides & Woo) from the
  origin, clipped to the box around the world's bodies, so a huge max_distance never walks
  empty cells; the nearest-hit walk stops once its cells start beyond the best hit. A ray
  that starts outside that box is first moved on the host, in float64, to just outside it
  (approach): in float32 an origin at 1e15 m is rounded by tens of thousands of km, and
  every hit with it; moved, a hit is as exact as the bodies' own coordinates, wherever the
  ray starts within MAX_COORDINATE. Every shape is a core and a skin (shapes.py): a sharp
  polygon is clipped by its edges' slabs; a core with a skin (capsule, rounded polygon) is
  its edges pushed out by the skin plus a circle at each vertex, the nearest of them
  (exact for convex cores); edges are two-sided segments, chain links one-sided (hit only
  from the front, as their collisions). A ray that starts inside a shape hits it at
  distance 0.
- Overlaps are exact: two cores (a point, a segment or a convex polygon) overlap with
  their skins when the distance between them (0 when one crosses or holds the other) is at
  most the sum of the skins; touching counts. A query's candidates come from the grid
  cells its AABB covers on each level (each body once: only in the cell holding the
  lower-left corner of the two AABBs' intersection, as the broad phase pairs), or from the
  world's bodies directly when that is fewer.

Inputs and outputs are ndarrays (any number of queries compiles once). Variable-length
results (overlaps, every hit of a ray) are a count pass, then the host sizes the output,
then a fill pass; the host sorts them, so the output is deterministic.
"""

import numpy as np
import taichi as ti

from .. import runtime
from ..builder import as_real_array
from ..device import SERIAL_SLOTS
from ..launching import quick
from ..math2d import cross, rotate
from ..shapes import MAX_COORDINATE, MAX_POLYGON_VERTICES, SHAPE_CHAIN, SHAPE_CIRCLE, Shape
from .broad_phase import build_grid, cell_coord, cell_slot, grid_table_size

vec2 = ti.math.vec2

#: Modes of the ray walk (compile-time): the nearest hit, or every hit (count, then fill).
NEAREST, COUNT, FILL = 0, 1, 2

_f32_2d = ti.types.ndarray(dtype=ti.f32, ndim=2)
_f32_1d = ti.types.ndarray(dtype=ti.f32, ndim=1)
_f32_3d = ti.types.ndarray(dtype=ti.f32, ndim=3)
_i32_1d = ti.types.ndarray(dtype=ti.i32, ndim=1)


# ----------------------------------------------------------------------------- the grid
@quick
@ti.kernel
def _build_query_grid(model: ti.template(), bodies: ti.template(), broad: ti.template(),
                      counts: ti.template(), scan: ti.template(), serial: ti.template(),
                      n_worlds: ti.i32, n_bodies: ti.i32, cell_size: ti.f32,
                      table_mask: ti.i32) -> ti.i32:
    """The grid at the current poses (exact AABBs) and each world's bounds
    (broad.world_lower/upper: the box around its AABBs, +inf/-inf when it has none).
    Returns the grid entries needed (the grid is complete when they fit)."""
    build_grid(model, bodies, broad, counts, scan, serial, n_worlds, n_bodies, cell_size,
               table_mask, 0.0, 0.0, 0)
    ti.loop_config(serialize=serial)
    for world in range(n_worlds):
        broad.world_lower[world] = vec2(ti.math.inf, ti.math.inf)
        broad.world_upper[world] = vec2(-ti.math.inf, -ti.math.inf)
    # A parallel reduction (min and max do not depend on the order of the threads): one
    # world of a million bodies must not be one thread's loop on a GPU.
    ti.loop_config(serialize=serial)
    for slot in range(n_worlds * n_bodies):
        if broad.level[slot] >= 0:
            world = slot // n_bodies
            for axis in ti.static(range(2)):
                ti.atomic_min(broad.world_lower[world][axis], broad.aabb_lower[slot][axis])
                ti.atomic_max(broad.world_upper[world][axis], broad.aabb_upper[slot][axis])
    return counts.entries_needed[None]


def refresh_grid(ctx) -> int:
    """Rebuild the grid of every world at the current poses; returns its hash-table mask.
    A grid too big for the pool grows it (ctx.grow keeps the scene's state bitwise)."""
    cache = ctx.cache
    while True:
        pool = ctx.pool
        table_mask = grid_table_size(pool, ctx.n_slots) - 1
        needed = int(_build_query_grid(pool.model, pool.bodies, pool.grid, pool.counts,
                                       pool.scan, ctx.serial, ctx.n_worlds, ctx.n_bodies,
                                       ctx.cell_size, table_mask))
        if needed <= pool.entry_capacity:
            return table_mask
        cache.entry_need = max(cache.entry_need, needed)
        ctx.pool = ctx.grow()


@ti.func
def reported(model: ti.template(), body, sensors):
    """A body a query may report: any but a sensor, unless the query asks for sensors."""
    return sensors != 0 or model.sensor[body] == 0


@ti.func
def body_pose(bodies: ti.template(), slot):
    angle = bodies.angle[slot]
    return bodies.position[slot], ti.cos(angle), ti.sin(angle)


@ti.func
def core_vertex(model: ti.template(), body, i, c, s):
    """Vertex i of a body's core, relative to the body's position, world axes, m (a
    circle's core is its centre)."""
    v = model.shape_center[body]
    if model.shape_kind[body] != SHAPE_CIRCLE:
        v = model.shape_vertices[body, i]
    return rotate(v, c, s)


@ti.func
def core_size(model: ti.template(), body):
    """Vertices of a body's core: 1 for a circle (its centre)."""
    k = 1
    if model.shape_kind[body] != SHAPE_CIRCLE:
        k = model.shape_vertex_count[body]
    return k


# ----------------------------------------------------------------------------- rays
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
def point_segment_distance(p, a, b):
    """Distance (m) from point p to the segment a-b."""
    e = b - a
    t = 0.0
    ee = e.dot(e)
    if ee > 0.0:
        t = ti.math.clamp((p - a).dot(e) / ee, 0.0, 1.0)
    return (p - a - t * e).norm()


@ti.func
def ray_shape(model: ti.template(), bodies: ti.template(), slot, body, origin, direction,
              t_max):
    """(hit, t m, unit normal facing the ray) of a ray (origin m, unit direction) and a
    body's shape, t in [0, t_max]."""
    position, c, s = body_pose(bodies, slot)
    o = origin - position  # everything relative to the body, for precision far out
    kind = model.shape_kind[body]
    skin = model.shape_radius[body]
    k = core_size(model, body)
    hit, t_hit, normal = False, ti.math.inf, -direction
    if kind == SHAPE_CIRCLE:
        hit, t_hit, normal = ray_circle(o, direction, core_vertex(model, body, 0, c, s), skin,
                                        t_max)
    elif kind == SHAPE_CHAIN or (k == 2 and skin == 0.0):
        # A segment with no skin: an edge (either side) or a chain link (its front only).
        a, b = core_vertex(model, body, 0, c, s), core_vertex(model, body, 1, c, s)
        front = rotate(model.shape_normals[body, 1], c, s)
        if kind != SHAPE_CHAIN or front.dot(direction) < 0.0:
            hit, t_hit = ray_segment(o, direction, a, b, t_max)
            normal = front if front.dot(direction) < 0.0 else -front
    elif skin == 0.0:
        # A sharp convex polygon: clip the ray by each edge's half-plane (slab clipping).
        t_lo, t_hi = 0.0, t_max
        missed = False
        for i in range(k):
            n = rotate(model.shape_normals[body, i], c, s)
            num = n.dot(core_vertex(model, body, i, c, s) - o)  # >= 0: o inside this side
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
            v = core_vertex(model, body, i, c, s)
            w = core_vertex(model, body, (i + 1) % k, c, s)
            if rotate(model.shape_normals[body, i], c, s).dot(o - v) > 0.0:
                inside = False
            nearest = ti.min(nearest, point_segment_distance(o, v, w))
        if inside or nearest <= skin:
            hit, t_hit = True, 0.0
        else:
            for i in range(k):
                v = core_vertex(model, body, i, c, s)
                found, t, n = ray_circle(o, direction, v, skin, t_max)
                if found and t < t_hit:
                    hit, t_hit, normal = True, t, n
                n = rotate(model.shape_normals[body, i], c, s)
                if n.dot(direction) < 0.0:
                    w = core_vertex(model, body, (i + 1) % k, c, s)
                    found, t = ray_segment(o, direction, v + skin * n, w + skin * n, t_max)
                    if found and t < t_hit:
                        hit, t_hit, normal = True, t, n
    if hit and t_hit == 0.0:
        normal = -direction
    return hit, t_hit, normal


@ti.func
def walk_ray(model: ti.template(), bodies: ti.template(), broad: ti.template(), world,
             origin, direction, t_limit, n_bodies, cell_size, table_mask, sensors,
             mode: ti.template(), query, write_at, out_body: ti.template(),
             out_distance: ti.template(), out_normal: ti.template()):
    """Walk the grid cells a ray (origin m, unit direction) crosses up to t_limit (m) on
    each level of its world. NEAREST: returns the nearest hit (body, t, normal; ties to the
    lowest body, -1 if none); COUNT: how many bodies it crosses (each once); FILL: the same,
    written from index write_at of the out arrays."""
    best_body, best_t, best_normal = -1, t_limit, vec2(0.0, 0.0)
    found = 0
    lower, upper = broad.world_lower[world], broad.world_upper[world]
    # Clip to the box around the world's bodies (empty worlds have lower = +inf).
    t0, t1 = 0.0, t_limit
    for axis in ti.static(range(2)):
        if direction[axis] != 0.0:
            ta = (lower[axis] - origin[axis]) / direction[axis]
            tb = (upper[axis] - origin[axis]) / direction[axis]
            t0 = ti.max(t0, ti.min(ta, tb))
            t1 = ti.min(t1, ti.max(ta, tb))
        elif not (lower[axis] <= origin[axis] <= upper[axis]):
            t1 = -1.0
    mask = broad.world_level_mask[world] if t0 <= t1 else 0
    level = 0
    while mask != 0:
        if mask & 1:
            cell = cell_size * ti.cast(1 << level, ti.f32)
            inv_cell = 1.0 / cell
            start = origin + t0 * direction
            end = origin + t1 * direction
            cx, cy = cell_coord(start.x, inv_cell), cell_coord(start.y, inv_cell)
            n_cells = (ti.abs(cell_coord(end.x, inv_cell) - cx)
                       + ti.abs(cell_coord(end.y, inv_cell) - cy) + 2)
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
                table_slot = cell_slot(world, level, cx, cy, table_mask)
                for k in range(broad.grid_start[table_slot], broad.grid_start[table_slot + 1]):
                    entry = broad.grid_entries[k]
                    other = broad.entry_body[entry]
                    key = broad.entry_cell[entry]
                    body = other % n_bodies
                    if (key.x == cx and key.y == cy and key.z == level
                            and other // n_bodies == world and reported(model, body, sensors)):
                        fresh = True
                        if ti.static(mode != NEAREST) and has_prev:
                            # Each body once: skip it if the previous cell also holds it
                            # (the cells a ray crosses in a body's 2 x 2 are consecutive).
                            lo, hi = broad.aabb_lower[other], broad.aabb_upper[other]
                            fresh = not (cell_coord(lo.x, inv_cell) <= prev_x
                                         <= cell_coord(hi.x, inv_cell)
                                         and cell_coord(lo.y, inv_cell) <= prev_y
                                         <= cell_coord(hi.y, inv_cell))
                        if fresh:
                            hit, t, normal = ray_shape(model, bodies, other, body, origin,
                                                       direction, best_t)
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
                prev_x, prev_y, has_prev = cx, cy, True
                if next_x < next_y:
                    cx += step_x
                    t_enter = next_x
                    next_x += delta_x
                else:
                    cy += step_y
                    t_enter = next_y
                    next_y += delta_y
        mask >>= 1
        level += 1
    return best_body, best_t, best_normal, found


@ti.kernel
def _ray_cast(model: ti.template(), bodies: ti.template(), broad: ti.template(),
              serial: ti.template(), mode: ti.template(), origins: _f32_2d, directions: _f32_2d,
              limits: _f32_1d, n_rays: ti.i32, n_bodies: ti.i32, cell_size: ti.f32,
              table_mask: ti.i32, sensors: ti.i32, offsets: _i32_1d, out_body: _i32_1d,
              out_distance: _f32_1d, out_normal: _f32_2d):
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
        body, t, normal, found = walk_ray(model, bodies, broad, world, origin, direction,
                                          limits[q], n_bodies, cell_size, table_mask, sensors,
                                          mode, q, write_at, out_body, out_distance,
                                          out_normal)
        if ti.static(mode == NEAREST):
            out_body[q] = body
            out_distance[q] = t
            out_normal[q, 0] = normal.x
            out_normal[q, 1] = normal.y
        elif ti.static(mode == COUNT):
            out_body[q] = found


# ----------------------------------------------------------------------------- overlaps
@ti.func
def segment_distance(a0, a1, b0, b1):
    """Distance between segments a0-a1 and b0-b1 (either may be a point), m."""
    d = ti.min(ti.min(point_segment_distance(a0, b0, b1), point_segment_distance(a1, b0, b1)),
               ti.min(point_segment_distance(b0, a0, a1), point_segment_distance(b1, a0, a1)))
    ea, eb = a1 - a0, b1 - b0
    if (cross(ea, b0 - a0) * cross(ea, b1 - a0) < 0.0
            and cross(eb, a0 - b0) * cross(eb, a1 - b0) < 0.0):
        d = 0.0  # they cross
    return d


@ti.func
def query_vertex(vertices: ti.template(), q, j, position):
    return vec2(vertices[q, j, 0], vertices[q, j, 1]) - position


@ti.func
def overlaps_body(model: ti.template(), bodies: ti.template(), slot, body,
                  vertices: ti.template(), q, n_query, query_skin):
    """True when query q's shape (core: n_query vertices of vertices[q], m, world space,
    counter-clockwise; skin query_skin m) overlaps or touches the body's shape: the
    distance between the two cores (0 when one crosses or holds the other) is at most the
    sum of the skins."""
    position, c, s = body_pose(bodies, slot)
    k = core_size(model, body)
    reach = model.shape_radius[body] + query_skin
    body_edges = k if k >= 3 else 1
    query_edges = n_query if n_query >= 3 else 1
    distance = ti.math.inf
    for i in range(body_edges):
        a0 = core_vertex(model, body, i, c, s)
        a1 = core_vertex(model, body, (i + 1) % k, c, s)
        for j in range(query_edges):
            b0 = query_vertex(vertices, q, j, position)
            b1 = query_vertex(vertices, q, (j + 1) % n_query, position)
            distance = ti.min(distance, segment_distance(a0, a1, b0, b1))
    overlap = distance <= reach
    if not overlap and k >= 3:  # the query's core inside the body's polygon core
        p = query_vertex(vertices, q, 0, position)
        inside = True
        for i in range(k):
            v = core_vertex(model, body, i, c, s)
            w = core_vertex(model, body, (i + 1) % k, c, s)
            if cross(w - v, p - v) < 0.0:
                inside = False
        overlap = inside
    if not overlap and n_query >= 3:  # the body's core inside the query's polygon core
        p = core_vertex(model, body, 0, c, s)
        inside = True
        for j in range(n_query):
            v = query_vertex(vertices, q, j, position)
            w = query_vertex(vertices, q, (j + 1) % n_query, position)
            if cross(w - v, p - v) < 0.0:
                inside = False
        overlap = inside
    return overlap


@ti.func
def visit_overlaps(model: ti.template(), bodies: ti.template(), broad: ti.template(), world,
                   vertices: ti.template(), q, n_query, query_skin, n_bodies, cell_size,
                   table_mask, sensors, fill: ti.template(), write_at, out_body: ti.template()):
    """Count (fill=False) or write (from write_at) the bodies query q overlaps."""
    lower = vec2(ti.math.inf, ti.math.inf)
    upper = -lower
    for j in range(n_query):
        v = vec2(vertices[q, j, 0], vertices[q, j, 1])
        lower = ti.min(lower, v)
        upper = ti.max(upper, v)
    lower -= query_skin
    upper += query_skin
    found = 0
    # Cells the query's box covers on the world's levels (a float: it may be huge).
    mask = broad.world_level_mask[world]
    cells = 0.0
    level = 0
    while mask != 0:
        if mask & 1:
            inv_cell = 1.0 / (cell_size * ti.cast(1 << level, ti.f32))
            cells += ((ti.floor(upper.x * inv_cell) - ti.floor(lower.x * inv_cell) + 1.0)
                      * (ti.floor(upper.y * inv_cell) - ti.floor(lower.y * inv_cell) + 1.0))
        mask >>= 1
        level += 1
    if cells > n_bodies:  # fewer bodies than cells: test the world's bodies directly
        for body in range(n_bodies):
            slot = world * n_bodies + body
            if broad.level[slot] >= 0 and reported(model, body, sensors):
                lo, hi = broad.aabb_lower[slot], broad.aabb_upper[slot]
                if (lo.x <= upper.x and lo.y <= upper.y and lower.x <= hi.x and lower.y <= hi.y
                        and overlaps_body(model, bodies, slot, body, vertices, q, n_query,
                                          query_skin)):
                    if ti.static(fill):
                        out_body[write_at + found] = body
                    found += 1
    else:
        mask = broad.world_level_mask[world]
        level = 0
        while mask != 0:
            if mask & 1:
                inv_cell = 1.0 / (cell_size * ti.cast(1 << level, ti.f32))
                for cx in range(cell_coord(lower.x, inv_cell), cell_coord(upper.x, inv_cell) + 1):
                    for cy in range(cell_coord(lower.y, inv_cell),
                                    cell_coord(upper.y, inv_cell) + 1):
                        table_slot = cell_slot(world, level, cx, cy, table_mask)
                        for k in range(broad.grid_start[table_slot],
                                       broad.grid_start[table_slot + 1]):
                            entry = broad.grid_entries[k]
                            other = broad.entry_body[entry]
                            key = broad.entry_cell[entry]
                            body = other % n_bodies
                            if (key.x == cx and key.y == cy and key.z == level
                                    and other // n_bodies == world
                                    and reported(model, body, sensors)):
                                corner = ti.max(lower, broad.aabb_lower[other])
                                top = ti.min(upper, broad.aabb_upper[other])
                                # Each body once: in the cell of the boxes' overlap's corner.
                                if (corner.x <= top.x and corner.y <= top.y
                                        and cell_coord(corner.x, inv_cell) == cx
                                        and cell_coord(corner.y, inv_cell) == cy
                                        and overlaps_body(model, bodies, other, body, vertices,
                                                          q, n_query, query_skin)):
                                    if ti.static(fill):
                                        out_body[write_at + found] = body
                                    found += 1
            mask >>= 1
            level += 1
    return found


@ti.kernel
def _overlap(model: ti.template(), bodies: ti.template(), broad: ti.template(),
             serial: ti.template(), fill: ti.template(), vertices: _f32_3d, counts: _i32_1d,
             skins: _f32_1d, n_queries: ti.i32, n_bodies: ti.i32, cell_size: ti.f32,
             table_mask: ti.i32, sensors: ti.i32, offsets: _i32_1d, out_body: _i32_1d):
    """Queries q = world * n_queries + query, each a core of counts[q] vertices
    (vertices[q, :counts[q]], m, world space, counter-clockwise) and skin skins[q] m.
    fill=False: out_body[q] = the bodies q overlaps; True: them, from offsets[q]."""
    ti.loop_config(serialize=serial)
    for q in range(skins.shape[0]):
        write_at = 0
        if ti.static(fill):
            write_at = offsets[q]
        found = visit_overlaps(model, bodies, broad, q // n_queries, vertices, q, counts[q],
                               skins[q], n_bodies, cell_size, table_mask, sensors, fill,
                               write_at, out_body)
        if ti.static(not fill):
            out_body[q] = found


# ----------------------------------------------------------------------------- host side
def _serial(ctx, n_queries: int) -> bool:
    return ctx.serial and n_queries <= SERIAL_SLOTS and runtime.on_cpu()


def ray_cast(ctx, origins: np.ndarray, directions: np.ndarray, limits: np.ndarray,
             sensors: bool, every: bool = False):
    """Rays q = world * n_rays + ray (origins (n_worlds * n_rays, 2) m, unit directions,
    limits (n_worlds * n_rays,) m) against the scene at its current poses.

    every=False: (body (q,) int, -1 for a miss; distance (q,) m, inf for a miss; normal
    (q, 2)). every=True: (ray q of each hit, body, distance, normal), sorted by (q,
    distance, body).
    """
    n = len(limits)
    n_rays = n // ctx.n_worlds
    table_mask = refresh_grid(ctx)
    pool = ctx.pool
    skipped = approach(pool, ctx.n_worlds, origins, directions, limits)
    origins = np.ascontiguousarray(origins + skipped[:, None] * directions, np.float32)
    directions = np.ascontiguousarray(directions, np.float32)
    limits = np.ascontiguousarray(limits - skipped, np.float32)
    serial = _serial(ctx, n)
    common = (origins, directions, limits, n_rays, ctx.n_bodies, ctx.cell_size, table_mask,
              int(sensors))
    body = np.empty(n, np.int32)
    distance = np.empty(n, np.float32)
    normal = np.empty((n, 2), np.float32)
    offsets = np.zeros(1, np.int32)
    if not every:
        _ray_cast(pool.model, pool.bodies, pool.grid, serial, NEAREST, *common, offsets, body,
                  distance, normal)
        distance = np.where(body >= 0, distance.astype(np.float64) + skipped, np.inf)
        return body.astype(np.int64), distance, normal.astype(np.float64)
    _ray_cast(pool.model, pool.bodies, pool.grid, serial, COUNT, *common, offsets, body,
              distance, normal)
    counts = body.astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    total = int(offsets[-1])
    out_body = np.empty(max(total, 1), np.int32)
    out_distance = np.empty(max(total, 1), np.float32)
    out_normal = np.empty((max(total, 1), 2), np.float32)
    _ray_cast(pool.model, pool.bodies, pool.grid, serial, FILL, *common,
              offsets[:-1].astype(np.int32), out_body, out_distance, out_normal)
    ray = np.repeat(np.arange(n), counts)
    out_body, out_distance = out_body[:total].astype(np.int64), out_distance[:total]
    order = np.lexsort((out_body, out_distance, ray))
    ray = ray[order]
    return (ray, out_body[order], out_distance[order].astype(np.float64) + skipped[ray],
            out_normal[:total][order].astype(np.float64))


def approach(pool, n_worlds: int, origins: np.ndarray, directions: np.ndarray,
             limits: np.ndarray) -> np.ndarray:
    """How far (m, float64, (q,)) to move each ray (q = world * n_rays + ray; origins and
    unit directions float64, limits m) before the device casts it: to where it enters its
    world's box (broad.world_lower/upper, as refresh_grid left it) grown by a pad, when it
    starts outside and reaches the box within its limit; 0 otherwise (the ray then starts
    near or in the box, or misses it, as the kernel finds).

    The pad (1 m + 1e-6 of the box's largest coordinate) exceeds float32's rounding of
    the coordinates there many times over, so the moved origin never starts inside a body
    (a hit at distance 0, normal -direction), and is small against the box's distance
    from 0: the origin's rounding is then the bodies' own."""
    box = pool.grid.read({"world_lower": n_worlds, "world_upper": n_worlds})
    world = np.arange(len(limits)) // (len(limits) // n_worlds)
    lower = box["world_lower"].reshape(n_worlds, 2).astype(np.float64)[world]
    upper = box["world_upper"].reshape(n_worlds, 2).astype(np.float64)[world]
    filled = np.isfinite(lower).all(1) & np.isfinite(upper).all(1)  # empty: +inf / -inf
    lower[~filled], upper[~filled] = 0.0, 0.0
    pad = 1.0 + 1e-6 * np.maximum(np.abs(lower), np.abs(upper)).max(1, initial=0.0)
    lower -= pad[:, None]
    upper += pad[:, None]
    moving = directions != 0.0
    step = np.where(moving, directions, 1.0)
    ta, tb = (lower - origins) / step, (upper - origins) / step
    between = (lower <= origins) & (origins <= upper)  # an axis the ray does not move on
    near = np.where(moving, np.minimum(ta, tb), np.where(between, -np.inf, np.inf))
    far = np.where(moving, np.maximum(ta, tb), np.where(between, np.inf, -np.inf))
    t_in, t_out = near.max(1), far.min(1)
    return np.where(filled & (t_in > 0.0) & (t_in <= t_out) & (t_in < limits), t_in, 0.0)


def overlap(ctx, vertices: np.ndarray, counts: np.ndarray, skins: np.ndarray,
            sensors: bool) -> tuple[np.ndarray, np.ndarray]:
    """Overlap queries q = world * n_queries + query: cores of counts[q] vertices
    (vertices (q, k, 2) m, world space, counter-clockwise) with skins (q,) m. Returns (query
    q of each overlap, body), sorted by (q, body)."""
    n = len(skins)
    n_queries = n // ctx.n_worlds
    vertices = np.ascontiguousarray(vertices, np.float32)
    counts = np.ascontiguousarray(counts, np.int32)
    skins = np.ascontiguousarray(skins, np.float32)
    table_mask = refresh_grid(ctx)
    pool = ctx.pool
    serial = _serial(ctx, n)
    found = np.empty(n, np.int32)
    common = (vertices, counts, skins, n_queries, ctx.n_bodies, ctx.cell_size, table_mask,
              int(sensors))
    _overlap(pool.model, pool.bodies, pool.grid, serial, False, *common, np.zeros(1, np.int32),
             found)
    offsets = np.concatenate([[0], np.cumsum(found, dtype=np.int64)])
    total = int(offsets[-1])
    bodies = np.empty(max(total, 1), np.int32)
    _overlap(pool.model, pool.bodies, pool.grid, serial, True, *common,
             offsets[:-1].astype(np.int32), bodies)
    query = np.repeat(np.arange(n), found)
    bodies = bodies[:total].astype(np.int64)
    order = np.lexsort((bodies, query))
    return query[order], bodies[order]


# ----------------------------------------------------------------------------- inputs
def batch_vectors(value, name: str, n_worlds: int) -> np.ndarray:
    """(1 or n_worlds, 1 or n, 2) float64 from (2,), (n, 2) or (n_worlds, n, 2): finite,
    within +-MAX_COORDINATE m; TypeError/ValueError naming `name` otherwise (TypeError for
    anything but real numbers: builder.as_real_array)."""
    array = as_real_array(value, name)
    if not 1 <= array.ndim <= 3 or array.shape[-1] != 2:
        raise ValueError(f"{name} must have shape (2,), (n, 2) or (n_worlds, n, 2), got "
                         f"{array.shape}")
    array = array.reshape((1,) * (3 - array.ndim) + array.shape)
    if array.shape[0] not in (1, n_worlds):
        raise ValueError(f"{name}: the first of 3 axes must be n_worlds ({n_worlds}) or 1, "
                         f"got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite")
    if array.size and np.abs(array).max() >= MAX_COORDINATE:
        raise ValueError(f"{name} must be within +-{MAX_COORDINATE:g} m")
    return array


def batch_scalars(value, name: str, n_worlds: int) -> np.ndarray:
    """(1 or n_worlds, 1 or n) float64 from a scalar, (n,) or (n_worlds, n), finite;
    TypeError/ValueError naming `name` otherwise (TypeError for anything but real numbers:
    builder.as_real_array)."""
    array = as_real_array(value, name)
    if array.ndim > 2:
        raise ValueError(f"{name} must be a scalar, (n,) or (n_worlds, n), got {array.shape}")
    array = array.reshape((1,) * (2 - array.ndim) + array.shape)
    if array.shape[0] not in (1, n_worlds):
        raise ValueError(f"{name}: the first of 2 axes must be n_worlds ({n_worlds}) or 1, "
                         f"got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite")
    return array


def broadcast(n_worlds: int, **arrays) -> tuple[int, list[np.ndarray]]:
    """(n, the arrays broadcast to (n_worlds, n, ...)); ValueError naming them if their
    query counts (axis 1) disagree."""
    try:
        n = np.broadcast_shapes(*((1, a.shape[1]) for a in arrays.values()))[1]
    except ValueError:
        shapes = ", ".join(f"{name} {a.shape}" for name, a in arrays.items())
        raise ValueError(f"{' and '.join(arrays)} must broadcast together, got {shapes}") from None
    return n, [np.broadcast_to(a, (n_worlds, n) + a.shape[2:]) for a in arrays.values()]


def shape_cores(shape: Shape, position: np.ndarray, angle: np.ndarray):
    """World-space cores of `shape` at poses position (w, n, 2) m and angle (w, n) rad:
    (vertices (w, n, k, 2), k, skin m) (a circle's core is its centre, k = 1)."""
    c, s = np.cos(angle)[..., None], np.sin(angle)[..., None]
    local = shape.center[None, :] if shape.kind == SHAPE_CIRCLE else shape.vertices
    assert 1 <= len(local) <= MAX_POLYGON_VERTICES
    x = c * local[:, 0] - s * local[:, 1]
    y = s * local[:, 0] + c * local[:, 1]
    vertices = np.stack([x, y], axis=-1) + position[..., None, :]
    return vertices, len(local), float(shape.radius)
