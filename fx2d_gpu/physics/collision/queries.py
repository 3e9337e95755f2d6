"""Spatial queries on the device, what ray casts and overlap queries share: the shape
geometry every query reads, and the count-then-fill protocol of variable-length results.

Every query of every world runs in parallel, one thread per (world, query), over the
broad phase's grid rebuilt at the current poses (collision/query_grid.py) into the broad
phase's scratch, which every step rebuilds: a query changes nothing a later step reads.
Bodies the grid leaves out (disabled, shape-less, at a non-finite pose) are never
reported; sensors only when a query asks for them. Rays: collision/ray_casts.py; points,
boxes and shapes: collision/overlaps.py. Inputs and outputs are ndarrays (any number of
queries compiles once); the host sorts variable-length results, so they are deterministic.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import taichi as ti

from ...device import SERIAL_QUERIES, runtime
from ...enums import SHAPE_CIRCLE
from ..math2d import rotate

if TYPE_CHECKING:
    from ..solver.context import StepContext

f32_1d = ti.types.ndarray(dtype=ti.f32, ndim=1)
f32_2d = ti.types.ndarray(dtype=ti.f32, ndim=2)
f32_3d = ti.types.ndarray(dtype=ti.f32, ndim=3)
i32_1d = ti.types.ndarray(dtype=ti.i32, ndim=1)


@ti.func
def reported(model: ti.template(), body, sensors):
    """A body a query may report: any but a sensor, unless the query asks for sensors."""
    return sensors != 0 or model.sensor[body] == 0


@ti.func
def body_pose(bodies: ti.template(), slot):
    angle = bodies.angle[slot]
    return bodies.position[slot], ti.cos(angle), ti.sin(angle)


@ti.func
def core_vertex(model: ti.template(), row, i, c, s):
    """Vertex i of the core of shape row `row` (bodies.shape_row), relative to the body's
    position, world axes, m (a circle's core is its centre)."""
    v = model.shape_center[row]
    if model.shape_kind[row] != SHAPE_CIRCLE:
        v = model.shape_vertices[row, i]
    return rotate(v, c, s)


@ti.func
def core_size(model: ti.template(), row):
    """Vertices of the core of shape row `row`: 1 for a circle (its centre)."""
    k = 1
    if model.shape_kind[row] != SHAPE_CIRCLE:
        k = model.shape_vertex_count[row]
    return k


@ti.func
def point_segment_distance(p, a, b):
    """Distance (m) from point p to the segment a-b."""
    e = b - a
    t = 0.0
    ee = e.dot(e)
    if ee > 0.0:
        t = ti.math.clamp((p - a).dot(e) / ee, 0.0, 1.0)
    return (p - a - t * e).norm()


def serial(ctx: "StepContext", n_queries: int) -> bool:
    """Whether a launch of n_queries queries runs serialized (a small scene on the CPU,
    where threads cost more than they save)."""
    return ctx.serial and n_queries <= SERIAL_QUERIES and runtime.on_cpu()


def count_then_fill(
    n_queries: int,
    count: Callable[[np.ndarray], None],
    fill: Callable[[np.ndarray, int], tuple[np.ndarray, ...]],
):
    """Variable-length results of n_queries queries, in two launches: count(found) writes
    how many results each query has into found ((n_queries,) int32); the host sizes the
    output; fill(offsets, capacity) writes query q's results from offsets[q] ((n_queries,)
    int32) into arrays of `capacity` rows, and returns them.

    Returns:
        (query (total,) int64: the query of each result, in query order; the arrays fill
        returned, cut to their `total` rows).
    """
    found = np.empty(n_queries, np.int32)
    count(found)
    offsets = np.concatenate([[0], np.cumsum(found, dtype=np.int64)])
    total = int(offsets[-1])
    # At least one row, so that the fill kernel is never handed an empty array.
    results = fill(offsets[:-1].astype(np.int32), max(total, 1))
    return np.repeat(np.arange(n_queries), found), tuple(r[:total] for r in results)
