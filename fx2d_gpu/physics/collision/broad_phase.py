"""Broad phase: a multi-level grid hash on the device.

Each body's AABB goes into the grid level whose cell size (cell_size * 2**level) is the first
at least as large as the AABB, so it touches at most 2 x 2 cells of that level, whatever the
mix of sizes (a 100 m ground and 2 cm circles sit on levels far apart and cost nothing extra).
Cells of all levels and worlds share one hash table keyed by (world, level, cx, cy).

A body finds its partners on its own level and on every non-empty coarser level, so each pair
is found by exactly one body: on the same level by the lower slot index, across levels by the
smaller body; and, among the cells both bodies share, only in the cell holding the lower-left
corner of the two boxes' intersection. Counting and filling the pairs are two passes with a
prefix sum between them, so the pair list is exactly sized, in a fixed order (each body's
partners sorted), with no floating-point atomics: the same input gives the same list.
"""

from typing import TYPE_CHECKING

import taichi as ti

from ...device import next_pow2
from ...device.launching import quick
from ...device.residency import CapacityError
from ...device.scan import exclusive_scan
from ...enums import SHAPE_CIRCLE, SHAPE_NONE
from ...shapes import MAX_COORDINATE
from ..bodies import (
    awake_dynamic,
    awake_dynamic_body,
    bounding_radius,
    can_move,
    moves,
    moving_kinematic,
    shape_row,
    should_collide,
    world_cell_size,
)
from ..math2d import rotate

if TYPE_CHECKING:
    from ..solver.context import StepContext

vec2 = ti.math.vec2
ivec3 = ti.math.ivec3

MAX_LEVEL = 30
#: A moving body's fat box is its swept box grown by this fraction of its bounding radius
#: (refit_fat_boxes; Box2D grows its AABBs by a fixed 0.1 m, b2_aabbMargin). The step's
#: pairs are those of the fat boxes, which change only when a body leaves its box, so a
#: world at rest (an awake pyramid jitters by micrometres) keeps its pairs step after step
#: and skips the broad phase. Larger: fewer refits, more pairs without points.
FAT_FRACTION = 0.1
# Partners a body notes while the broad phase counts its pairs (StepOptions.noted_partners,
# 8 by default), so that writing them needs no second search of the grid (_find_pairs); a
# body with more searches again. A 10k pile at rest owns 2.4 pairs a body.
#: A body that can cover its margin in fewer steps than this at its current speed gets none
#: (a falling pile: +3 % pairs and ~20 % more time a step with margins, measured on a
#: 100k pile's pour).
FAT_STEPS = 4
_COORD_LIMIT = 1.0e9  # cell coordinates are clamped to this (int32 range)
#: Candidate pairs a body slot may have on average, past PAIR_LIMIT_FLOOR pairs, before a
#: broad phase is refused (residency.CapacityError). A pile packs to 2-4 pairs a body
#: (residency.PAIRS_PER_SLOT); only bodies spawned on top of each other reach dozens: n
#: circles at one point make n (n - 1) / 2 pairs, which the colouring cannot spread over
#: its colours (measured, 2-core CPU: 1,000 at one point 5 s a step, 2,000 41 s for the
#: first step, 5,000 177 s; 10,000 wanted a 37 GiB pool). Refused, they are spread by the
#: caller instead (Scene.set_state).
MAX_PAIRS_PER_BODY = 32
#: Pairs always allowed, whatever the body count (a few hundred bodies at one point cost
#: under a second a step and separate in a few steps).
PAIR_LIMIT_FLOOR = 1 << 16


@ti.func
def cell_coord(x, inv_cell):
    return ti.cast(ti.floor(ti.math.clamp(x * inv_cell, -_COORD_LIMIT, _COORD_LIMIT)), ti.i32)


@ti.func
def cell_slot(world, level, cx, cy, table_mask):
    h = (ti.cast(cx, ti.u32) * ti.u32(73856093)) ^ (ti.cast(cy, ti.u32) * ti.u32(19349663))
    h ^= ti.cast(level, ti.u32) * ti.u32(83492791) + ti.cast(world, ti.u32) * ti.u32(2654435761)
    return ti.cast(h & ti.cast(table_mask, ti.u32), ti.i32)


@ti.func
def body_aabb(model: ti.template(), bodies: ti.template(), slot, body):
    """World AABB (lower, upper) of a body's shape, m."""
    position = bodies.position[slot]
    row = shape_row(model, slot, body)
    c, s = ti.cos(bodies.angle[slot]), ti.sin(bodies.angle[slot])
    lower = vec2(0.0, 0.0)
    upper = vec2(0.0, 0.0)
    if model.shape_kind[row] == SHAPE_CIRCLE:
        center = position + rotate(model.shape_center[row], c, s)
        r = model.shape_radius[row]
        lower = center - r
        upper = center + r
    else:
        lower = vec2(ti.math.inf, ti.math.inf)
        upper = -lower
        for i in range(model.shape_vertex_count[row]):
            v = position + rotate(model.shape_vertices[row, i], c, s)
            lower = ti.min(lower, v)
            upper = ti.max(upper, v)
        skin = model.shape_radius[row]  # rounded polygons and capsules
        lower -= skin
        upper += skin
    return lower, upper


@ti.func
def never_collide(model: ti.template(), joints: ti.template(), body, other_body):
    """True when the collision filter keeps the two bodies apart (bodies.should_collide), a
    joint links them (joined bodies do not collide) or their collision was disabled
    (Scene.disable_collision)."""
    linked = not should_collide(model, body, other_body)
    for k in range(joints.body_joint_start[body], joints.body_joint_start[body + 1]):
        joint = joints.body_joints[k]
        if joints.collide[joint] == 0 and (
            joints.parent[joint] == other_body or joints.child[joint] == other_body
        ):
            linked = True
    for k in range(model.filter_start[body], model.filter_start[body + 1]):
        if model.filters[k] == other_body:
            linked = True
    return linked


@ti.func
def sensed(model: ti.template(), sensor, movable, other_body):
    """A pair with a sensor (`sensor`: this body is one) is found whatever the bodies' sleep,
    unless neither can move (two static bodies never pair): a sensor never wakes a sleeper
    but still reports it."""
    return (sensor == 1 or model.sensor[other_body] == 1) and (
        movable or can_move(model, other_body)
    )


@ti.func
def pushes_sleeper(model: ti.template(), bodies: ti.template(), driven, body, other, other_body):
    """A moving kinematic body (`driven`: this one) and a dynamic body asleep are paired,
    so that sleep.wake_islands can wake the sleeper it is about to push (two bodies that
    are neither awake nor dynamic are otherwise never paired)."""
    return (driven and model.inv_mass[other_body] > 0.0) or (
        moving_kinematic(model, bodies, other, other_body) and model.inv_mass[body] > 0.0
    )


@ti.func
def pair_wanted(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    body,
    other,
    other_body,
    active,
    sensor,
    movable,
    driven,
    n_bodies,
):
    """Whether body (of the visiting slot: `active` awake and dynamic, `sensor`, `movable`,
    `driven` a moving kinematic body) and slot `other` (of body other_body), whose AABBs
    overlap, make a candidate pair: one of them moves (or a sensor or a pusher is
    involved), and nothing keeps them apart (never_collide)."""
    return (
        active
        or awake_dynamic_body(model, bodies, other, other_body)
        or sensed(model, sensor, movable, other_body)
        or pushes_sleeper(model, bodies, driven, body, other, other_body)
    ) and not never_collide(model, joints, body, other_body)


@ti.func
def pair_owner(model: ti.template(), bodies: ti.template(), grid: ti.template(), slot, n_bodies):
    """What the pair search reads once of body slot `slot` (placed: grid.level[slot] >= 0)
    for every candidate partner it owns: (world, body, lower, upper, active, sensor,
    movable, driven): its world and model row, its box in grid.aabb_lower/upper (m), and
    pair_wanted's flags of it."""
    body = slot % n_bodies
    return (
        slot // n_bodies,
        body,
        grid.aabb_lower[slot],
        grid.aabb_upper[slot],
        awake_dynamic(model, bodies, slot, n_bodies),
        model.sensor[body],
        can_move(model, body),
        moving_kinematic(model, bodies, slot, body),
    )


@ti.func
def boxes_overlap(lower, upper, other_lower, other_upper):
    """(corner, overlap): the lower corner of two boxes' intersection (m; its cell decides
    which grid cell reports the pair), and whether they overlap (touching counts)."""
    corner = ti.max(lower, other_lower)
    overlap_upper = ti.min(upper, other_upper)
    return corner, corner.x <= overlap_upper.x and corner.y <= overlap_upper.y


@ti.func
def visit_partners(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    grid: ti.template(),
    slot,
    n_bodies,
    cell_size,
    table_mask,
    fill: ti.template(),
    write_at,
    notes: ti.template(),
    note_room,
):
    """Count (fill=False) or write (fill=True, from index write_at) the pairs `slot` owns.
    Counting also notes the first note_room partners in notes.body_b[slot * note_room ...]
    (0: none; `notes`, a Manifolds group free as scratch), so that writing them needs no
    second search."""
    found = 0
    level = grid.level[slot]
    if level >= 0:
        world, body, lower, upper, active, sensor, movable, driven = pair_owner(
            model, bodies, grid, slot, n_bodies
        )
        # The world's slots are [first_slot, first_slot + n_bodies): compared, not divided
        # (an integer division per grid entry looked at was a tenth of the broad phase).
        first_slot = slot - body
        world_cell = world_cell_size(model, cell_size, world)
        mask = grid.world_level_mask[world] >> level
        grid_level = level
        while mask != 0:
            if mask & 1:
                inv_cell = 1.0 / (world_cell * ti.cast(1 << grid_level, ti.f32))
                cx0, cy0 = cell_coord(lower.x, inv_cell), cell_coord(lower.y, inv_cell)
                cx1, cy1 = cell_coord(upper.x, inv_cell), cell_coord(upper.y, inv_cell)
                for cx in range(cx0, cx1 + 1):
                    for cy in range(cy0, cy1 + 1):
                        table_slot = cell_slot(world, grid_level, cx, cy, table_mask)
                        for k in range(
                            grid.grid_start[table_slot], grid.grid_start[table_slot + 1]
                        ):
                            other = grid.grid_body[k]
                            cell = grid.grid_cell[k]
                            if (
                                cell.x == cx
                                and cell.y == cy
                                and cell.z == grid_level
                                and first_slot <= other < first_slot + n_bodies
                                and (grid_level > level or other > slot)
                            ):
                                other_body = other - first_slot
                                corner, overlap = boxes_overlap(
                                    lower, upper, grid.aabb_lower[other], grid.aabb_upper[other]
                                )
                                if (
                                    overlap
                                    and cell_coord(corner.x, inv_cell) == cx
                                    and cell_coord(corner.y, inv_cell) == cy
                                    and pair_wanted(
                                        model,
                                        bodies,
                                        joints,
                                        body,
                                        other,
                                        other_body,
                                        active,
                                        sensor,
                                        movable,
                                        driven,
                                        n_bodies,
                                    )
                                ):
                                    if ti.static(fill):
                                        index = write_at + found
                                        manifolds.body_a[index] = ti.min(slot, other)
                                        manifolds.body_b[index] = ti.max(slot, other)
                                    elif found < note_room:
                                        notes.body_b[slot * note_room + found] = other
                                    found += 1
            mask >>= 1
            grid_level += 1
    return found


@ti.func
def finite_pose(bodies: ti.template(), slot):
    """Whether body slot's pose is finite and within MAX_COORDINATE (NaN fails every
    comparison, so this rejects NaN and infinities alike)."""
    position = bodies.position[slot]
    return (
        ti.abs(position.x) < MAX_COORDINATE
        and ti.abs(position.y) < MAX_COORDINATE
        and ti.abs(bodies.angle[slot]) < MAX_COORDINATE
    )


@ti.func
def motion_reach(model: ti.template(), bodies: ti.template(), slot, body, motion_time):
    """How far any point of body slot can move in motion_time (s) at its current speed, m."""
    return motion_time * (
        bodies.velocity[slot].norm()
        + ti.abs(bodies.angular_velocity[slot]) * bounding_radius(model, slot, body)
    )


@ti.func
def swept_box(model: ti.template(), bodies: ti.template(), slot, body, margin, motion_time):
    """Body slot's AABB grown by margin (m) plus what it covers in motion_time (s) at its
    current speed: (lower, upper), m."""
    lower, upper = body_aabb(model, bodies, slot, body)
    reach = margin + motion_reach(model, bodies, slot, body, motion_time)
    return lower - reach, upper + reach


@ti.func
def place_body(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    slot,
    n_bodies,
    cell_size,
    margin,
    motion_time,
    fat,
):
    """Body slot's box (fat == 1: its fat box, refit_fat_boxes, unless a body of its world
    sleeps; else its swept_box with margin (m) and motion_time (s)) and grid level into
    grid.aabb_lower/upper and grid.level (-1: no shape, disabled, or a non-finite or
    absurd pose, counted in counts.lost_bodies), its level into grid.world_level_mask;
    returns the grid cells it occupies (nx * ny <= 4)."""
    body = slot % n_bodies
    count = 0
    level = -1
    if model.shape_kind[body] != SHAPE_NONE and bodies.enabled[slot] == 1:
        if not finite_pose(bodies, slot):
            ti.atomic_add(counts.lost_bodies[None], 1)
        else:
            world = slot // n_bodies
            lower, upper = grid.fat_lower[slot], grid.fat_upper[slot]
            if fat == 0 or grid.world_sleeps[world] == 1:
                lower, upper = swept_box(model, bodies, slot, body, margin, motion_time)
            # 1% headroom absorbs rounding in x / cell, so a box spans <= 2 cells per axis.
            extent = 1.01 * ti.max(upper.x - lower.x, upper.y - lower.y)
            level = 0
            cell = world_cell_size(model, cell_size, world)
            while cell < extent and level < MAX_LEVEL:
                cell *= 2.0
                level += 1
            if not cell >= extent:
                # Wider than the coarsest cell (a body at ~1e11 m/s sweeps that far in a
                # step): it would span billions of cells (a hang, or a crash once the
                # count overflows), so it is left out like a body at a non-finite pose.
                ti.atomic_add(counts.lost_bodies[None], 1)
                level = -1
            else:
                inv_cell = 1.0 / cell
                nx = cell_coord(upper.x, inv_cell) - cell_coord(lower.x, inv_cell) + 1
                ny = cell_coord(upper.y, inv_cell) - cell_coord(lower.y, inv_cell) + 1
                count = nx * ny
                grid.aabb_lower[slot] = lower
                grid.aabb_upper[slot] = upper
                # Most bodies find their level's bit set: reading first spares the threads
                # an atomic on one shared word per body.
                if (grid.world_level_mask[world] >> level) & 1 == 0:
                    ti.atomic_or(grid.world_level_mask[world], 1 << level)
    grid.level[slot] = level
    return count


@ti.func
def pairing_key(model: ti.template(), bodies: ti.template(), slot, body):
    """What, besides its box, decides which pairs body slot is in: whether the broad phase
    places it (a shape, enabled, a finite pose) and whether it sleeps (pair_wanted pairs
    no two bodies that are both asleep or static). A bit each."""
    placed = (
        model.shape_kind[body] != SHAPE_NONE
        and bodies.enabled[slot] == 1
        and finite_pose(bodies, slot)
    )
    return (1 if placed else 0) | (2 * bodies.sleeping[slot])


@quick
@ti.kernel
def _refit_fat_boxes(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    serial: ti.template(),
    n_slots: ti.i32,
    n_bodies: ti.i32,
    margin: ti.f32,
    motion_time: ti.f32,
    reset: ti.i32,
) -> ti.math.ivec4:
    """refit_fat_boxes' kernel; returns (slots refitted, sleeping slots, restless slots,
    slots that move: bodies.moves)."""
    refitted, sleepers, restless, movers = 0, 0, 0, 0
    ti.loop_config(serialize=serial)
    for world in range(n_slots // ti.max(n_bodies, 1)):
        grid.world_sleeps[world] = 0
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        slot_refitted, slot_sleeps = refit_slot(
            model, bodies, grid, slot, n_bodies, margin, motion_time, reset
        )
        refitted += slot_refitted
        sleepers += slot_sleeps
    # After the loop that marks the sleeping worlds: their awake bodies that can move.
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        restless += restless_slot(model, bodies, grid, slot, n_bodies)
        if moves(model, bodies, slot, slot % n_bodies):
            movers += 1
    return ti.math.ivec4(refitted, sleepers, restless, movers)


@ti.func
def refit_slot(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    slot,
    n_bodies,
    margin,
    motion_time,
    reset,
):
    """refit_fat_boxes' work on one body slot (after its world's grid.world_sleeps was
    cleared): its fat box refitted where it must be, its world marked where it sleeps;
    returns (1 if refitted, 1 if asleep)."""
    refitted, sleeps = 0, 0
    body = slot % n_bodies
    key = pairing_key(model, bodies, slot, body)
    if key & 2:  # asleep
        grid.world_sleeps[slot // n_bodies] = 1
        sleeps = 1
    stale = reset == 1 or key != grid.fat_key[slot]
    if key & 1:
        lower, upper = swept_box(model, bodies, slot, body, margin, motion_time)
        # Static and sleeping bodies stay in their box, and a body fast enough to leave
        # it within FAT_STEPS steps would: for them a margin would only add pairs (a
        # sleeper that wakes changes its key).
        grow = 0.0
        if can_move(model, body) and key & 2 == 0:
            grow = FAT_FRACTION * bounding_radius(model, slot, body)
            if FAT_STEPS * motion_reach(model, bodies, slot, body, motion_time) > grow:
                grow = 0.0
        fat_lower, fat_upper = grid.fat_lower[slot], grid.fat_upper[slot]
        # Refitted when the swept box leaves the fat box, and when the fat box is over
        # twice the margin too large on a side (a body that slowed down, or landed,
        # would otherwise keep the box of its fall and the pairs it brings).
        inside = (
            lower.x >= fat_lower.x
            and lower.y >= fat_lower.y
            and upper.x <= fat_upper.x
            and upper.y <= fat_upper.y
        )
        tight = (
            fat_lower.x >= lower.x - 2.0 * grow
            and fat_lower.y >= lower.y - 2.0 * grow
            and fat_upper.x <= upper.x + 2.0 * grow
            and fat_upper.y <= upper.y + 2.0 * grow
        )
        if stale or not (inside and tight):
            grid.fat_lower[slot] = lower - grow
            grid.fat_upper[slot] = upper + grow
            stale = True
    if stale:
        grid.fat_key[slot] = key
        refitted = 1
    return refitted, sleeps


@ti.func
def restless_slot(model: ti.template(), bodies: ti.template(), grid: ti.template(), slot, n_bodies):
    """1 where body slot is restless (refit_fat_boxes: an awake body that can move in a
    world with a sleeping body; after every slot's refit_slot marked the worlds), else 0."""
    body = slot % n_bodies
    restless = 0
    if (
        grid.world_sleeps[slot // n_bodies] == 1
        and bodies.sleeping[slot] == 0
        and can_move(model, body)
        and pairing_key(model, bodies, slot, body) & 1
    ):
        restless = 1
    return restless


def refit_fat_boxes(
    ctx: "StepContext", margin: float, motion_time: float, reset: bool
) -> tuple[int, int, int, int]:
    """Give every body slot whose swept_box (margin (m), motion_time (s)) left its fat box,
    or whose fat box grew too loose, or whose pairing_key changed, a new fat box: the swept
    box grown by FAT_FRACTION of its bounding radius (0 for static and sleeping bodies, and
    for bodies that would cover that within FAT_STEPS steps); `reset`: every slot. Marks
    the worlds with a sleeping body (grid.world_sleeps).
    Returns (slots refitted, sleeping slots, restless slots: awake bodies that can move, in
    the worlds with a sleeping body; slots that move, bodies.moves: awake bodies that can
    move, in any world).

    A world with a sleeping body pairs the swept boxes (_find_pairs with fat pairs them
    only in worlds where nothing sleeps): sleep.wake_islands wakes a sleeper when a pair
    with a moving body appears, and a fat box would make such pairs appear earlier. So where
    nothing was refitted and nothing sleeps, the step's candidate pairs are last step's;
    and where nothing was refitted and no restless slot is left, too: in a world with a
    sleeping body, static and sleeping bodies keep their swept boxes (they have no
    velocity, and a moved one leaves its box and is refitted)."""
    pool = ctx.pool
    counts = _refit_fat_boxes(
        model=pool.model,
        bodies=pool.bodies,
        grid=pool.grid,
        serial=ctx.serial,
        n_slots=ctx.n_slots,
        n_bodies=ctx.n_bodies,
        margin=margin,
        motion_time=motion_time,
        reset=int(reset),
    )
    return tuple(int(count) for count in counts)


@ti.func
def write_grid_entries(
    model: ti.template(), grid: ti.template(), slot, n_bodies, cell_size, table_mask
):
    """Body slot's grid entries (place_body placed it; grid.entry_start[slot] is its first
    entry, after the scan): each cell it occupies, counted into grid.grid_start."""
    level = grid.level[slot]
    if level >= 0:
        world = slot // n_bodies
        cell = world_cell_size(model, cell_size, world)
        inv_cell = 1.0 / (cell * ti.cast(1 << level, ti.f32))
        lower = grid.aabb_lower[slot]
        upper = grid.aabb_upper[slot]
        entry = grid.entry_start[slot]
        for cx in range(cell_coord(lower.x, inv_cell), cell_coord(upper.x, inv_cell) + 1):
            for cy in range(cell_coord(lower.y, inv_cell), cell_coord(upper.y, inv_cell) + 1):
                table_slot = cell_slot(world, level, cx, cy, table_mask)
                grid.entry_body[entry] = slot
                grid.entry_cell[entry] = ivec3(cx, cy, level)
                grid.entry_slot[entry] = table_slot
                ti.atomic_add(grid.grid_start[table_slot], 1)
                entry += 1


@ti.func
def file_grid_entry(grid: ti.template(), entry):
    """Grid entry `entry` filed under its hash-table slot: its body and cell copied to the
    slot's next free place in grid_body and grid_cell (grid_cursor), so that a search of a
    cell reads them in a row. (Filing the entry's index instead made every entry looked at
    two loads in a chain, the index and then the scattered body and cell: a GPU thread
    waits out each. On the 2-core CPU the two take the same time: a 100k pile's broad
    phase 21.0-21.8 ms with the index, 20.7-21.2 without.) The order inside a table slot
    depends on timing; nothing that reads it depends on it."""
    place = ti.atomic_add(grid.grid_cursor[grid.entry_slot[entry]], 1)
    grid.grid_body[place] = grid.entry_body[entry]
    grid.grid_cell[place] = grid.entry_cell[entry]


@ti.func
def write_slot_pairs(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    grid: ti.template(),
    notes: ti.template(),
    slot,
    n_bodies,
    cell_size,
    table_mask,
    note_room,
):
    """Body slot's pairs into manifolds.body_a/b from its range in manifolds.pair_start (after
    the scan of the counts): from the partners it noted while counting (notes.body_b) where
    they were at most note_room, else from a second search of the grid; then sorted by
    partner, so that the list does not depend on the grid's order."""
    start = manifolds.pair_start[slot]
    n = manifolds.pair_start[slot + 1] - start
    if n <= note_room:
        for i in range(n):
            other = notes.body_b[slot * note_room + i]
            manifolds.body_a[start + i] = ti.min(slot, other)
            manifolds.body_b[start + i] = ti.max(slot, other)
    else:
        visit_partners(
            model,
            bodies,
            joints,
            manifolds,
            grid,
            slot,
            n_bodies,
            cell_size,
            table_mask,
            True,
            start,
            notes,
            0,
        )
    for i in range(start + 1, start + n):
        a, b = manifolds.body_a[i], manifolds.body_b[i]
        key = a + b  # the owner is common to all, so the partner orders them
        j = i - 1
        while j >= start:
            if manifolds.body_a[j] + manifolds.body_b[j] <= key:
                break
            manifolds.body_a[j + 1] = manifolds.body_a[j]
            manifolds.body_b[j + 1] = manifolds.body_b[j]
            j -= 1
        manifolds.body_a[j + 1] = a
        manifolds.body_b[j + 1] = b


@ti.func
def build_grid(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    n_worlds,
    n_bodies,
    cell_size,
    table_mask,
    margin,
    motion_time,
    fat,
):
    """The grid of every world at the current poses (the first half of the broad phase,
    shared with the spatial queries, collision/query_grid.py): each body's AABB (grown by
    margin (m) plus what it covers in motion_time (s); fat == 1: its fat box where
    place_body says) and level in grid.aabb_lower/upper and grid.level (-1: no shape,
    disabled, or a non-finite or absurd pose, counted in counts.lost_bodies),
    grid.world_level_mask, the entries and the hash table
    (grid_start, grid_body, grid_cell). Must be called at the top level of a kernel (its loops are
    the kernel's). counts.entries_needed says how many entries the grid needed; returns the
    slots whose entries were written (n_slots, or 0 when they exceed the entry capacity).
    """
    n_slots = n_worlds * n_bodies
    table_size = table_mask + 1
    ti.loop_config(serialize=serial)
    for world in range(n_worlds):
        grid.world_level_mask[world] = 0
    ti.loop_config(serialize=serial)
    for t in range(table_size):
        grid.grid_start[t] = 0
    counts.lost_bodies[None] = 0

    # AABBs and grid levels; each body will occupy (nx * ny) <= 4 cells.
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        grid.entry_start[slot] = place_body(
            model, bodies, grid, counts, slot, n_bodies, cell_size, margin, motion_time, fat
        )

    exclusive_scan(scan, grid.entry_start, n_slots, serial)

    counts.entries_needed[None] = grid.entry_start[n_slots]
    # Past the entry capacity nothing more is done: the host grows the pool and runs again.
    entry_fits = grid.entry_start[n_slots] <= grid.entry_body.shape[0]
    write_slots = n_slots if entry_fits else 0
    ti.loop_config(serialize=serial)
    for slot in range(write_slots):
        write_grid_entries(model, grid, slot, n_bodies, cell_size, table_mask)

    exclusive_scan(scan, grid.grid_start, table_size, serial)

    ti.loop_config(serialize=serial)
    for t in range(table_size):
        grid.grid_cursor[t] = grid.grid_start[t]
    ti.loop_config(serialize=serial)
    for entry in range(grid.entry_start[write_slots]):
        file_grid_entry(grid, entry)
    return write_slots


@quick
@ti.kernel
def _find_pairs(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    notes: ti.template(),
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    cell_size: ti.f32,
    table_mask: ti.i32,
    margin: ti.f32,
    motion_time: ti.f32,
    fat: ti.i32,
    note_room: ti.i32,
) -> ti.math.ivec3:
    """Candidate pairs of all worlds into manifolds.body_a/b, each body's range in
    manifolds.pair_start; counts holds what the grid and the pair list needed.

    The count notes up to note_room partners a body in notes.body_b (visit_partners), and a
    body with no more than that writes its pairs from the notes instead of searching the
    grid again (the search is ~40 % of the broad phase: 10k pile at rest, 3.7 -> 2.2 ms
    without it); the others search again. The same pairs in the same order either way.

    cell_size: level-0 cell edge, m. table_mask: hash-table size - 1 (a power of two - 1).
    Each AABB is enlarged by margin (m) plus the distance the body covers in motion_time (s)
    at its current speed, so the pairs found stay valid for a whole step (fat == 1: each
    body's fat box instead, refit_fat_boxes).
    If the pairs exceed the pair capacity nothing is written and counts.pairs_needed says
    how many are needed. Returns (entries_needed, pairs_needed, lost_bodies).
    """
    n_slots = n_worlds * n_bodies
    write_slots = build_grid(
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
        margin,
        motion_time,
        fat,
    )
    entry_fits = write_slots == n_slots

    ti.loop_config(serialize=serial)
    for slot in range(write_slots):
        manifolds.pair_start[slot] = visit_partners(
            model,
            bodies,
            joints,
            manifolds,
            grid,
            slot,
            n_bodies,
            cell_size,
            table_mask,
            False,
            0,
            notes,
            note_room,
        )

    exclusive_scan(scan, manifolds.pair_start, write_slots, serial)

    counts.pairs_needed[None] = manifolds.pair_start[write_slots]
    fill_count = 0
    if entry_fits and manifolds.pair_start[write_slots] <= manifolds.body_a.shape[0]:
        fill_count = n_slots
    ti.loop_config(serialize=serial)
    for slot in range(fill_count):
        write_slot_pairs(
            model,
            bodies,
            joints,
            manifolds,
            grid,
            notes,
            slot,
            n_bodies,
            cell_size,
            table_mask,
            note_room,
        )
    return ti.math.ivec3(
        counts.entries_needed[None], counts.pairs_needed[None], counts.lost_bodies[None]
    )


@ti.func
def world_partners(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    grid: ti.template(),
    slot,
    n_bodies,
):
    """visit_partners without the grid, for small worlds: every body of the world is
    checked. The same pairs: a pair belongs to the body on the finer level, on one level
    to the lower slot. Returns how many the slot owns, and which (a bit per body of the
    world: bit i of word i // 32, BY_WORLD_MAX_BODIES <= 64), so that writing them
    (write_world_partners, in slot order) need not check them again."""
    found = 0
    mask = ti.Vector([0, 0])
    level = grid.level[slot]
    if level >= 0:
        world, body, lower, upper, active, sensor, movable, driven = pair_owner(
            model, bodies, grid, slot, n_bodies
        )
        for other_body in range(n_bodies):
            other = world * n_bodies + other_body
            other_level = grid.level[other]
            if other_level > level or (other_level == level and other > slot):
                _corner, overlap = boxes_overlap(
                    lower, upper, grid.aabb_lower[other], grid.aabb_upper[other]
                )
                if overlap and pair_wanted(
                    model,
                    bodies,
                    joints,
                    body,
                    other,
                    other_body,
                    active,
                    sensor,
                    movable,
                    driven,
                    n_bodies,
                ):
                    if other_body < 32:
                        mask[0] |= 1 << other_body
                    else:
                        mask[1] |= 1 << (other_body - 32)
                    found += 1
    return found, mask


@ti.func
def write_world_partners(manifolds: ti.template(), grid: ti.template(), slot, n_bodies, write_at):
    """The pairs world_partners found for `slot` (grid.partner_mask) written from write_at
    on, partners in slot order."""
    first = slot - slot % n_bodies
    mask = grid.partner_mask[slot]
    low, high = mask[0], mask[1]
    n = write_at
    for other_body in range(n_bodies):
        word = low if other_body < 32 else high
        if (word >> (other_body % 32)) & 1 == 1:
            other = first + other_body
            manifolds.body_a[n] = ti.min(slot, other)
            manifolds.body_b[n] = ti.max(slot, other)
            n += 1


@ti.func
def world_pair_found(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    grid: ti.template(),
    slot,
    other,
    n_bodies,
):
    """Whether world_partners finds the pair of body slots `slot` and `other` (of one
    world, after place_world_bodies), whichever of the two owns it."""
    level, other_level = grid.level[slot], grid.level[other]
    found = False
    if level >= 0 and other_level >= 0 and other != slot:
        owner, partner = slot, other
        if other_level < level or (other_level == level and other < slot):
            owner, partner = other, slot
        _world, body, lower, upper, active, sensor, movable, driven = pair_owner(
            model, bodies, grid, owner, n_bodies
        )
        _corner, overlap = boxes_overlap(
            lower, upper, grid.aabb_lower[partner], grid.aabb_upper[partner]
        )
        found = overlap and pair_wanted(
            model,
            bodies,
            joints,
            body,
            partner,
            partner % n_bodies,
            active,
            sensor,
            movable,
            driven,
            n_bodies,
        )
    return found


@ti.func
def begin_world_pairs(counts: ti.template()):
    """The small worlds' broad phase (_find_pairs_by_world) starts: nothing lost yet, and no
    grid entries needed."""
    counts.lost_bodies[None] = 0
    counts.entries_needed[None] = 0


@ti.func
def place_world(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    world,
    n_bodies,
    cell_size,
    margin,
    motion_time,
    fat,
):
    """The first part of a small world's broad phase, on its thread: every body's box and
    level (place_body)."""
    grid.world_level_mask[world] = 0
    for slot in range(world * n_bodies, (world + 1) * n_bodies):
        place_body(model, bodies, grid, counts, slot, n_bodies, cell_size, margin, motion_time, fat)


@ti.func
def count_world_partners(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    grid: ti.template(),
    world,
    n_bodies,
):
    """The second part, after place_world: each body's pairs (world_partners) counted into
    its manifolds.pair_start and noted in grid.partner_mask, their sum into
    grid.entry_start[world] (scratch: small worlds use no grid entries) for
    write_world_pairs."""
    found = 0
    for slot in range(world * n_bodies, (world + 1) * n_bodies):
        owned, mask = world_partners(model, bodies, joints, grid, slot, n_bodies)
        manifolds.pair_start[slot] = owned
        grid.partner_mask[slot] = mask
        found += owned
    grid.entry_start[world] = found


@ti.func
def write_world_pairs(
    manifolds: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    n_worlds,
    n_bodies,
    go,
):
    """The last part, after every world's count_world_partners: the worlds' ranges by a
    prefix sum over the worlds, each body's range in pair_start, and the pairs written (if
    they fit); returns (0, pairs_needed, lost_bodies), as _find_pairs does (no grid entries
    are needed). The same ranges as a prefix sum over the slots, an eighth as long (8-body
    worlds). `go` 0: nothing is written and the answer is zeros (a launch of steps in flight
    after one stopped: fused.step_by_world_in_flight). Called at a kernel's top level: its
    loops are the kernel's."""
    exclusive_scan(scan, grid.entry_start, n_worlds * go, serial)
    n_slots = n_worlds * n_bodies
    if go == 1:
        counts.pairs_needed[None] = grid.entry_start[n_worlds]
    fits = grid.entry_start[n_worlds] <= manifolds.body_a.shape[0]
    ti.loop_config(serialize=serial)
    for world in range(n_worlds * go):
        running = grid.entry_start[world]
        for slot in range(world * n_bodies, (world + 1) * n_bodies):
            owned = manifolds.pair_start[slot]
            manifolds.pair_start[slot] = running
            if fits:
                write_world_partners(manifolds, grid, slot, n_bodies, running)
            running += owned
    found = ti.math.ivec3(0, 0, 0)
    if go == 1:
        manifolds.pair_start[n_slots] = counts.pairs_needed[None]
        found = ti.math.ivec3(0, counts.pairs_needed[None], counts.lost_bodies[None])
    return found


@quick
@ti.kernel
def _find_pairs_by_world(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    cell_size: ti.f32,
    margin: ti.f32,
    motion_time: ti.f32,
    fat: ti.i32,
) -> ti.math.ivec3:
    """_find_pairs for small worlds (find_candidate_pairs): the same pairs, found by
    checking every body of a world (world_partners) instead of through the grid, a world
    per thread (its bodies placed, then their pairs counted), then written."""
    begin_world_pairs(counts)
    ti.loop_config(serialize=serial)
    for world in range(n_worlds):
        place_world(
            model, bodies, grid, counts, world, n_bodies, cell_size, margin, motion_time, fat
        )
        count_world_partners(model, bodies, joints, manifolds, grid, world, n_bodies)
    return write_world_pairs(manifolds, grid, counts, scan, serial, n_worlds, n_bodies, 1)


def _launch_pairs_by_world(
    ctx: "StepContext", groups, margin: float, motion_time: float, fat: bool
):
    """find_candidate_pairs' launch for small worlds: _find_pairs_by_world."""
    return _find_pairs_by_world(
        *groups, ctx.n_worlds, ctx.n_bodies, ctx.cell_size, margin, motion_time, int(fat)
    )


def pair_limit(n_slots: int) -> int:
    """The most candidate pairs a broad phase of n_slots body slots may find
    (check_pair_count)."""
    return max(MAX_PAIRS_PER_BODY * n_slots, PAIR_LIMIT_FLOOR)


def check_pair_count(pairs: int, n_slots: int):
    """CapacityError if `pairs` candidate pairs among n_slots body slots are more than
    MAX_PAIRS_PER_BODY a slot (and PAIR_LIMIT_FLOOR): bodies piled on top of each other,
    refused before the pool grows for them or a step spends minutes on them."""
    if pairs > pair_limit(n_slots):
        raise CapacityError(
            f"{pairs:,} candidate pairs among {n_slots:,} body slots ({pairs / n_slots:,.0f} a "
            f"body; at most {MAX_PAIRS_PER_BODY} a body or {PAIR_LIMIT_FLOOR:,} in all): the "
            "bodies overlap each other heavily (many spawned at one point?); spread them "
            "with set_state or remove some, then step again"
        )


def grid_table_size(pool, n_slots: int) -> int:
    """Hash-table slots the grid of n_slots body slots uses (a power of two)."""
    return min(next_pow2(max(4 * n_slots, 1024)), pool.table_capacity)


def find_candidate_pairs(
    ctx: "StepContext",
    margin: float = 0.0,
    motion_time: float = 0.0,
    into: str = "manifolds",
    fat: bool = False,
    by_world=None,
) -> int:
    """Candidate pairs of every world at the current poses (AABBs grown by margin (m) plus
    what each body covers in motion_time (s); `fat`: each body's fat box instead,
    refit_fat_boxes) into the Manifolds group `into`; returns their number. Into `manifolds`
    (the step's pairs) it also sets ctx.cache.n_pairs and lost_bodies; a query between
    steps uses `staging`, so that it changes nothing a later step reads. A grid or pair
    list too small for the scene grows the pool (ctx.grow keeps the scene's state bitwise)
    and the broad phase runs again.

    Small worlds (ctx.small_worlds: at most BY_WORLD_MAX_BODIES bodies) skip the grid: each
    body checks the AABBs of its world's bodies, which lie next to each other in memory
    (at most 40 checks a body instead of hashing up to 4 cells on each level); the same
    pairs in the same order, so nothing after it can tell. `by_world`: their launch,
    (ctx, groups, margin, motion_time, fat) -> (entries, pairs, lost bodies) needed; None:
    _find_pairs_by_world's (sleep.find_pairs_waking_by_world also wakes the islands the
    pairs push)."""
    by_world = by_world or _launch_pairs_by_world
    while True:
        pool = ctx.pool
        groups = (
            pool.model,
            pool.bodies,
            pool.joints,
            getattr(pool, into),
            pool.grid,
            pool.counts,
            pool.scan,
            ctx.serial,
        )
        if ctx.small_worlds:
            needed = by_world(ctx, groups, margin, motion_time, fat)
        else:
            table_size = grid_table_size(pool, ctx.n_slots)
            # Into the step's pairs the count notes partners in `staging` (scratch then); a
            # query, which writes `staging`, notes none.
            notes = pool.staging if into == "manifolds" else pool.manifolds
            needed = _find_pairs(
                *groups,
                notes,
                ctx.n_worlds,
                ctx.n_bodies,
                ctx.cell_size,
                table_size - 1,
                margin,
                motion_time,
                int(fat),
                note_room(ctx, into),
            )
        entries, pairs, lost = (int(v) for v in needed)
        if pairs_fit(ctx, entries, pairs, lost, into, fat):
            return pairs


def note_room(ctx: "StepContext", into: str) -> int:
    """Partners a body notes while the broad phase into the Manifolds group `into` counts
    its pairs (StepOptions.noted_partners, as the pool's notes hold them; none for a query,
    which writes `staging`, where the step's broad phase notes them)."""
    if into != "manifolds":
        return 0
    return min(ctx.options.noted_partners, ctx.pool.pair_capacity // max(ctx.n_slots, 1))


def pairs_fit(
    ctx: "StepContext", entries: int, pairs: int, lost: int, into: str = "manifolds", fat=True
) -> bool:
    """After a broad phase that needed `entries` grid entries and found `pairs` pairs with
    `lost` bodies left out (its answer), whether they fit the pool: then the step's
    (`into` "manifolds") pair count and lost bodies are noted. Else the pool grows for
    them (ctx.grow keeps the scene's state bitwise) and the broad phase must run again.
    CapacityError: more pairs than check_pair_count allows."""
    check_pair_count(pairs, ctx.n_slots)
    cache, pool = ctx.cache, ctx.pool
    if entries <= pool.entry_capacity and pairs <= pool.pair_capacity:
        if into == "manifolds":
            cache.lost_bodies = lost
            cache.n_pairs = pairs
            cache.pairs_fat = fat  # (solver/pairs.find_step_pairs)
        return True
    cache.entry_need = max(cache.entry_need, entries)
    cache.pair_need = max(cache.pair_need, pairs + pairs // 4)
    ctx.pool = ctx.grow()
    return False
