"""The overflow colour, solved in parallel: Jacobi for its pairs, world by world for its joints.

The colouring (solver/coloring.py) leaves a constraint uncoloured only when one of its
bodies already has a constraint in every one of MAX_COLORS colours: a hub, like a large
dynamic body under dozens of small ones. Solving the leftovers one after the other would
put a single GPU thread in every pass. Instead, after the colours of a pass:

- **Pairs, Jacobi with averaging.** Every overflow pair is solved at once from the same
  body state, writing what it would do to each body (prepared.jacobi_delta, one entry per
  side) instead of doing it; then every body in overflow pairs takes the mean of its
  entries that act (not zero). The mean, not the sum: n constraints that each remove all of
  one overlap would push it out n times over. Only the entries that act: a pair without
  points this pass, one within the slop, one that does not bounce does nothing, and
  counting it would weaken the others (one deep pair among four resting ones would be
  pushed out a quarter of the way). Each pass clears a pair's entries before solving it
  (clear_entries): a pair that does nothing writes nothing, and the mean would take what
  the entry held from an earlier pass, or another scene. Averaging converges more slowly
  than Gauss-Seidel, which is why the colours hold all but a hub's surplus constraints.
- **Joints** (a body with more than MAX_COLORS joints; a joint chain runs through the
  anchor of the next): one thread per world walks that world's overflow joints in order, so
  a batch stays parallel over worlds.

A CPU team (solver/team.py) runs these same steps inside its one launch per step
(step._team_pass), with the kernels here for the other paths.

Determinism: a body's entries are summed in entry order (the overflow list is in constraint
index order, and each body's list is sorted), so the result does not depend on thread
timing, and a world gives the same result alone or in a batch.
"""

from typing import TYPE_CHECKING

import taichi as ti

from ...device import MAX_COLORS
from ...device.launching import quick
from ..bodies import awake_dynamic
from .contacts import shift_body

if TYPE_CHECKING:
    from .context import StepContext

vec2 = ti.math.vec2


@ti.func
def jacobi_side_slot(manifolds: ti.template(), coloring: ti.template(), entry):
    """Body slot of overflow entry `entry` (2 i: pair i's body a, 2 i + 1: its body b)."""
    pair = coloring.color_list[coloring.color_start[MAX_COLORS] + entry // 2]
    return manifolds.body_a[pair] if entry % 2 == 0 else manifolds.body_b[pair]


@quick
@ti.kernel
def _build_jacobi_lists(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    serial: ti.template(),
    n_bodies: ti.i32,
):
    """Per dynamic body of the overflow pairs, its entries, sorted: jacobi_bodies,
    jacobi_count, jacobi_start, jacobi_entries (see device.Coloring)."""
    n_entries = 2 * coloring.n_overflow_pairs[None]
    ti.loop_config(serialize=serial)
    for entry in range(n_entries):
        coloring.jacobi_count[jacobi_side_slot(manifolds, coloring, entry)] = 0
    coloring.n_jacobi_bodies[None] = 0
    coloring.jacobi_cursor[None] = 0
    ti.loop_config(serialize=serial)
    for entry in range(n_entries):
        slot = jacobi_side_slot(manifolds, coloring, entry)
        ticket = -1
        if awake_dynamic(model, bodies, slot, n_bodies):
            ticket = ti.atomic_add(coloring.jacobi_count[slot], 1)
        coloring.jacobi_ticket[entry] = ticket
    ti.loop_config(serialize=serial)
    for entry in range(n_entries):
        if coloring.jacobi_ticket[entry] == 0:  # the body's first entry places the body
            slot = jacobi_side_slot(manifolds, coloring, entry)
            coloring.jacobi_start[slot] = ti.atomic_add(
                coloring.jacobi_cursor[None], coloring.jacobi_count[slot]
            )
            coloring.jacobi_bodies[ti.atomic_add(coloring.n_jacobi_bodies[None], 1)] = slot
    ti.loop_config(serialize=serial)
    for entry in range(n_entries):
        ticket = coloring.jacobi_ticket[entry]
        if ticket >= 0:
            slot = jacobi_side_slot(manifolds, coloring, entry)
            coloring.jacobi_entries[coloring.jacobi_start[slot] + ticket] = entry
    ti.loop_config(serialize=serial)
    for i in range(coloring.n_jacobi_bodies[None]):
        # Tickets came in thread order: sort each body's few entries (insertion sort).
        slot = coloring.jacobi_bodies[i]
        start, count = coloring.jacobi_start[slot], coloring.jacobi_count[slot]
        for j in range(start + 1, start + count):
            value = coloring.jacobi_entries[j]
            k = j - 1
            while k >= start and coloring.jacobi_entries[k] > value:
                coloring.jacobi_entries[k + 1] = coloring.jacobi_entries[k]
                k -= 1
            coloring.jacobi_entries[k + 1] = value


def build_jacobi_lists(ctx: "StepContext"):
    """After a colouring with an overflow: each overflow body's entries (see the module
    docstring)."""
    pool = ctx.pool
    _build_jacobi_lists(
        pool.model, pool.bodies, pool.manifolds, pool.coloring, ctx.serial, ctx.n_bodies
    )


@ti.func
def clear_entries(prepared: ti.template(), jacobi_entry):
    """Overflow pair jacobi_entry // 2's two entries (a, b) at zero, before its solve in a
    pass: a pair that does nothing (no points, within the slop, no bounce) writes none."""
    prepared.jacobi_delta[jacobi_entry] = ti.math.vec3(0.0)
    prepared.jacobi_delta[jacobi_entry + 1] = ti.math.vec3(0.0)


@ti.func
def mean_delta(prepared: ti.template(), coloring: ti.template(), slot):
    """The mean of the body's overflow entries' jacobi_delta that act (not zero), summed in
    entry order; zero if none acts."""
    start, count = coloring.jacobi_start[slot], coloring.jacobi_count[slot]
    total = ti.math.vec3(0.0)
    acting = 0
    for j in range(start, start + count):
        delta = prepared.jacobi_delta[coloring.jacobi_entries[j]]
        if delta.any():
            total += delta
            acting += 1
    return total / ti.max(acting, 1)


@ti.func
def apply_mean_delta(
    bodies: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    slot,
    position: ti.template(),
):
    """Body slot takes the mean of its overflow entries: a move of pose and previous pose
    together (the position pass) or a change of velocity (the velocity pass)."""
    mean = mean_delta(prepared, coloring, slot)
    if ti.static(position):
        shift_body(bodies, slot, vec2(mean[0], mean[1]), mean[2])
    else:
        # Not `+=`, an atomic add: each slot is listed once.
        bodies.velocity[slot] = bodies.velocity[slot] + vec2(mean[0], mean[1])
        bodies.angular_velocity[slot] = bodies.angular_velocity[slot] + mean[2]


@quick
@ti.kernel
def _solve_overflow(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    serial: ti.template(),
    constraint: ti.template(),
    position: ti.template(),
    with_joints: ti.template(),
    joints_only: ti.i32,
    n_bodies: ti.i32,
    h: ti.f32,
):
    """One pass over the overflow colour: every overflow pair at once (`constraint`, a colour
    pass's constraint function, writing jacobi_delta), each body's mean applied (`position`:
    pose and previous pose moved together; else velocities), then (`with_joints`: the pass
    solves joints) the joints, one thread per world; `joints_only` (a later sweep over the
    joints): the joints alone."""
    first = coloring.color_start[MAX_COLORS]
    solved = 1 - joints_only  # ranges of 0 (not an if) keep the loops top-level: parallel
    ti.loop_config(serialize=serial)
    for i in range(coloring.n_overflow_pairs[None] * solved):
        pair = coloring.color_list[first + i]
        clear_entries(prepared, 2 * i)
        constraint(model, bodies, joints, manifolds, prepared, counts, pair, n_bodies, h, 2 * i)
    ti.loop_config(serialize=serial)
    for i in range(coloring.n_jacobi_bodies[None] * solved):
        apply_mean_delta(bodies, prepared, coloring, coloring.jacobi_bodies[i], position)
    if ti.static(with_joints):
        _solve_overflow_joints(
            model,
            bodies,
            joints,
            manifolds,
            prepared,
            coloring,
            counts,
            constraint,
            n_bodies,
            h,
            serial,
        )


@ti.func
def _solve_overflow_joints(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    constraint: ti.template(),
    n_bodies,
    h,
    serial: ti.template(),
):
    """The overflow joints (after the pairs, in joint-slot order, so grouped by world): the
    thread of each world's first one solves that world's in order."""
    n_pairs, n_joints = counts.n_pairs[None], counts.n_joints[None]
    begin = coloring.color_start[MAX_COLORS] + coloring.n_overflow_pairs[None]
    end = coloring.color_start[MAX_COLORS + 1]
    ti.loop_config(serialize=serial)
    for i in range(begin, end):
        world = (coloring.color_list[i] - n_pairs) // n_joints
        if i == begin or (coloring.color_list[i - 1] - n_pairs) // n_joints != world:
            j = i
            while j < end and (coloring.color_list[j] - n_pairs) // n_joints == world:
                constraint(
                    model,
                    bodies,
                    joints,
                    manifolds,
                    prepared,
                    counts,
                    coloring.color_list[j],
                    n_bodies,
                    h,
                    -1,
                )
                j += 1


def solve_overflow(ctx: "StepContext", stage, joints_only: bool = False):
    """The overflow colour's pass of a colour pass `stage` (solver/stages.py's Stage; see
    the module docstring); joints_only: a later sweep's, its joints."""
    pool = ctx.pool
    _solve_overflow(
        model=pool.model,
        bodies=pool.bodies,
        joints=pool.joints,
        manifolds=pool.manifolds,
        prepared=pool.prepared,
        coloring=pool.coloring,
        counts=pool.counts,
        serial=ctx.serial,
        constraint=stage.run,
        position=stage.position,
        with_joints=stage.joints,
        joints_only=int(joints_only),
        n_bodies=ctx.n_bodies,
        h=ctx.h,
    )
