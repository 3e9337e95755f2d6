"""The grid spatial queries walk: the broad phase's grid (broad_phase.build_grid) rebuilt at
the current poses with exact AABBs (margin 0) into the broad phase's scratch, and the box
around each world's bodies (grid.world_lower/upper), which rays are clipped to
(collision/ray_casts.py)."""

from typing import TYPE_CHECKING

import taichi as ti

from ...device.launching import quick
from .broad_phase import build_grid, grid_table_size

if TYPE_CHECKING:
    from ..solver.context import StepContext

vec2 = ti.math.vec2


@quick
@ti.kernel
def _build_query_grid(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    cell_size: ti.f32,
    table_mask: ti.i32,
) -> ti.i32:
    """The grid at the current poses (exact AABBs) and each world's bounds
    (grid.world_lower/upper: the box around its AABBs, +inf/-inf when it has none).
    Returns the grid entries needed (the grid is complete when they fit)."""
    build_grid(
        model,
        bodies,
        grid,
        counts,
        scan,
        serial,
        n_worlds,
        n_bodies,
        cell_size,
        table_mask,
        0.0,
        0.0,
        0,
    )
    ti.loop_config(serialize=serial)
    for world in range(n_worlds):
        grid.world_lower[world] = vec2(ti.math.inf, ti.math.inf)
        grid.world_upper[world] = vec2(-ti.math.inf, -ti.math.inf)
    # A parallel reduction (min and max do not depend on the order of the threads): one
    # world of a million bodies must not be one thread's loop on a GPU.
    ti.loop_config(serialize=serial)
    for slot in range(n_worlds * n_bodies):
        if grid.level[slot] >= 0:
            world = slot // n_bodies
            for axis in ti.static(range(2)):
                ti.atomic_min(grid.world_lower[world][axis], grid.aabb_lower[slot][axis])
                ti.atomic_max(grid.world_upper[world][axis], grid.aabb_upper[slot][axis])
    return counts.entries_needed[None]


def refresh_grid(ctx: "StepContext") -> int:
    """Rebuild the grid of every world at the current poses; returns its hash-table mask.
    A grid too big for the pool grows it (ctx.grow keeps the scene's state bitwise)."""
    cache = ctx.cache
    while True:
        pool = ctx.pool
        table_mask = grid_table_size(pool, ctx.n_slots) - 1
        needed = int(
            _build_query_grid(
                model=pool.model,
                bodies=pool.bodies,
                grid=pool.grid,
                counts=pool.counts,
                scan=pool.scan,
                serial=ctx.serial,
                n_worlds=ctx.n_worlds,
                n_bodies=ctx.n_bodies,
                cell_size=ctx.cell_size,
                table_mask=table_mask,
            )
        )
        if needed <= pool.entry_capacity:
            return table_mask
        cache.entry_need = max(cache.entry_need, needed)
        ctx.pool = ctx.grow()
