"""Overlap queries on the device: the bodies a point, a box or any placed shape overlaps.

Overlaps are exact: two cores (a point, a segment or a convex polygon) overlap with their
skins when the distance between them (0 when one crosses or holds the other) is at most
the sum of the skins; touching counts. A query's candidates come from the grid cells
(collision/query_grid.py) its AABB covers on each level (each body once: only in the cell
holding the lower-left corner of the two AABBs' intersection, as the broad phase pairs),
or from the world's bodies directly when that is fewer.
"""

from typing import TYPE_CHECKING

import numpy as np
import taichi as ti

from ..bodies import shape_row, world_cell_size
from ..math2d import cross
from .broad_phase import cell_coord, cell_slot
from .queries import (
    body_pose,
    core_size,
    core_vertex,
    count_then_fill,
    f32_1d,
    f32_3d,
    i32_1d,
    point_segment_distance,
    reported,
    serial,
)
from .query_grid import refresh_grid

if TYPE_CHECKING:
    from ..solver.context import StepContext

vec2 = ti.math.vec2


@ti.func
def segment_distance(a0, a1, b0, b1):
    """Distance between segments a0-a1 and b0-b1 (either may be a point), m."""
    d = ti.min(
        ti.min(point_segment_distance(a0, b0, b1), point_segment_distance(a1, b0, b1)),
        ti.min(point_segment_distance(b0, a0, a1), point_segment_distance(b1, a0, a1)),
    )
    ea, eb = a1 - a0, b1 - b0
    if (
        cross(ea, b0 - a0) * cross(ea, b1 - a0) < 0.0
        and cross(eb, a0 - b0) * cross(eb, a1 - b0) < 0.0
    ):
        d = 0.0  # they cross
    return d


@ti.func
def query_vertex(vertices: ti.template(), q, j, position):
    return vec2(vertices[q, j, 0], vertices[q, j, 1]) - position


@ti.func
def overlaps_body(
    model: ti.template(),
    bodies: ti.template(),
    slot,
    body,
    vertices: ti.template(),
    q,
    n_query,
    query_skin,
):
    """True when query q's shape (core: n_query vertices of vertices[q], m, world space,
    counter-clockwise; skin query_skin m) overlaps or touches the body's shape: the
    distance between the two cores (0 when one crosses or holds the other) is at most the
    sum of the skins."""
    position, c, s = body_pose(bodies, slot)
    row = shape_row(model, slot, body)
    k = core_size(model, row)
    reach = model.shape_radius[row] + query_skin
    body_edges = k if k >= 3 else 1
    query_edges = n_query if n_query >= 3 else 1
    distance = ti.math.inf
    for i in range(body_edges):
        a0 = core_vertex(model, row, i, c, s)
        a1 = core_vertex(model, row, (i + 1) % k, c, s)
        for j in range(query_edges):
            b0 = query_vertex(vertices, q, j, position)
            b1 = query_vertex(vertices, q, (j + 1) % n_query, position)
            distance = ti.min(distance, segment_distance(a0, a1, b0, b1))
    overlap = distance <= reach
    if not overlap and k >= 3:  # the query's core inside the body's polygon core
        p = query_vertex(vertices, q, 0, position)
        inside = True
        for i in range(k):
            v = core_vertex(model, row, i, c, s)
            w = core_vertex(model, row, (i + 1) % k, c, s)
            if cross(w - v, p - v) < 0.0:
                inside = False
        overlap = inside
    if not overlap and n_query >= 3:  # the body's core inside the query's polygon core
        p = core_vertex(model, row, 0, c, s)
        inside = True
        for j in range(n_query):
            v = query_vertex(vertices, q, j, position)
            w = query_vertex(vertices, q, (j + 1) % n_query, position)
            if cross(w - v, p - v) < 0.0:
                inside = False
        overlap = inside
    return overlap


@ti.func
def visit_overlaps(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    world,
    vertices: ti.template(),
    q,
    n_query,
    query_skin,
    n_bodies,
    cell_size,
    table_mask,
    sensors,
    fill: ti.template(),
    write_at,
    out_body: ti.template(),
):
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
    world_cell = world_cell_size(model, cell_size, world)
    # Cells the query's box covers on the world's levels (a float: it may be huge).
    mask = grid.world_level_mask[world]
    cells = 0.0
    level = 0
    while mask != 0:
        if mask & 1:
            inv_cell = 1.0 / (world_cell * ti.cast(1 << level, ti.f32))
            cells += (ti.floor(upper.x * inv_cell) - ti.floor(lower.x * inv_cell) + 1.0) * (
                ti.floor(upper.y * inv_cell) - ti.floor(lower.y * inv_cell) + 1.0
            )
        mask >>= 1
        level += 1
    if cells > n_bodies:  # fewer bodies than cells: test the world's bodies directly
        for body in range(n_bodies):
            slot = world * n_bodies + body
            if grid.level[slot] >= 0 and reported(model, body, sensors):
                lo, hi = grid.aabb_lower[slot], grid.aabb_upper[slot]
                if (
                    lo.x <= upper.x
                    and lo.y <= upper.y
                    and lower.x <= hi.x
                    and lower.y <= hi.y
                    and overlaps_body(model, bodies, slot, body, vertices, q, n_query, query_skin)
                ):
                    if ti.static(fill):
                        out_body[write_at + found] = body
                    found += 1
    else:
        mask = grid.world_level_mask[world]
        level = 0
        while mask != 0:
            if mask & 1:
                inv_cell = 1.0 / (world_cell * ti.cast(1 << level, ti.f32))
                for cx in range(cell_coord(lower.x, inv_cell), cell_coord(upper.x, inv_cell) + 1):
                    for cy in range(
                        cell_coord(lower.y, inv_cell), cell_coord(upper.y, inv_cell) + 1
                    ):
                        table_slot = cell_slot(world, level, cx, cy, table_mask)
                        for k in range(
                            grid.grid_start[table_slot], grid.grid_start[table_slot + 1]
                        ):
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
                                corner = ti.max(lower, grid.aabb_lower[other])
                                top = ti.min(upper, grid.aabb_upper[other])
                                # Each body once: in the cell of the boxes' overlap's corner.
                                if (
                                    corner.x <= top.x
                                    and corner.y <= top.y
                                    and cell_coord(corner.x, inv_cell) == cx
                                    and cell_coord(corner.y, inv_cell) == cy
                                    and overlaps_body(
                                        model, bodies, other, body, vertices, q, n_query, query_skin
                                    )
                                ):
                                    if ti.static(fill):
                                        out_body[write_at + found] = body
                                    found += 1
            mask >>= 1
            level += 1
    return found


@ti.kernel
def _overlap(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    serial: ti.template(),
    fill: ti.template(),
    vertices: f32_3d,
    counts: i32_1d,
    skins: f32_1d,
    n_queries: ti.i32,
    n_bodies: ti.i32,
    cell_size: ti.f32,
    table_mask: ti.i32,
    sensors: ti.i32,
    offsets: i32_1d,
    out_body: i32_1d,
):
    """Queries q = world * n_queries + query, each a core of counts[q] vertices
    (vertices[q, :counts[q]], m, world space, counter-clockwise) and skin skins[q] m.
    fill=False: out_body[q] = the bodies q overlaps; True: them, from offsets[q]."""
    ti.loop_config(serialize=serial)
    for q in range(skins.shape[0]):
        write_at = 0
        if ti.static(fill):
            write_at = offsets[q]
        found = visit_overlaps(
            model,
            bodies,
            grid,
            q // n_queries,
            vertices,
            q,
            counts[q],
            skins[q],
            n_bodies,
            cell_size,
            table_mask,
            sensors,
            fill,
            write_at,
            out_body,
        )
        if ti.static(not fill):
            out_body[q] = found


def overlap(
    ctx: "StepContext", vertices: np.ndarray, counts: np.ndarray, skins: np.ndarray, sensors: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Overlap queries q = world * n_queries + query at the current poses: cores of counts[q]
    vertices (vertices (q, k, 2) m, world space, counter-clockwise) with skins (q,) m.

    Returns:
        (query q of each overlap, body), (h,) int64 each, sorted by (q, body).
    """
    n = len(skins)
    queries = dict(
        vertices=np.ascontiguousarray(vertices, np.float32),
        counts=np.ascontiguousarray(counts, np.int32),
        skins=np.ascontiguousarray(skins, np.float32),
    )
    table_mask = refresh_grid(ctx)
    pool = ctx.pool
    in_serial = serial(ctx, n)

    def launch(fill: bool, offsets: np.ndarray, out_body: np.ndarray):
        _overlap(
            model=pool.model,
            bodies=pool.bodies,
            grid=pool.grid,
            serial=in_serial,
            fill=fill,
            **queries,
            n_queries=n // ctx.n_worlds,
            n_bodies=ctx.n_bodies,
            cell_size=ctx.cell_size,
            table_mask=table_mask,
            sensors=int(sensors),
            offsets=offsets,
            out_body=out_body,
        )

    def fill(offsets, capacity):
        bodies = np.empty(capacity, np.int32)
        launch(True, offsets, bodies)
        return (bodies,)

    query, (bodies,) = count_then_fill(
        n, lambda found: launch(False, np.zeros(1, np.int32), found), fill
    )
    bodies = bodies.astype(np.int64)
    order = np.lexsort((bodies, query))
    return query[order], bodies[order]
