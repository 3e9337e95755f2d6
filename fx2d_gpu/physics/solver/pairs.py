"""Contacts across steps: last step's pairs kept aside, the step's pairs found (or kept),
matched to last step's (warm starting), and stored in colour order.

Per step: save_previous_pairs (before the broad phase) -> find_step_pairs (the broad
phase) -> carry_contacts -> colouring -> store_in_color_order; or, where last step's pairs
are kept (keeps_pairs), they stay in colour order (step._keep_pairs), and go back to the
broad phase's order (restore_broad_order) only for a new colouring.
"""

from typing import TYPE_CHECKING

import taichi as ti

from ...device import MAX_MANIFOLD_POINTS, UNSOLVED_COLOR
from ...device.launching import quick
from ...device.scan import exclusive_scan
from ..collision.broad_phase import find_candidate_pairs, refit_fat_boxes
from .contacts import build_world_body_lists

if TYPE_CHECKING:
    from .context import StepContext

#: Manifold fields carried from one step to the next (per pair, then per point): the
#: manifold with what the step's first narrow phase needs to keep it
#: (contacts.reuse_manifold) or to match its points (warm starting).
_CARRIED_PAIR_FIELDS = (
    "body_a",
    "body_b",
    "color",
    "point_count",
    "normal",
    "found_pose",
    "found_margin",
    "drift",
)
_CARRIED_POINT_FIELDS = ("point", "depth", "feature", "normal_impulse", "tangent_impulse")
#: Fields moved when the pairs are stored in colour order: the carried ones and the rest of
#: what the step's first narrow phase wrote before the colouring (step.begin_step).
ORDERED_PAIR_FIELDS = _CARRIED_PAIR_FIELDS + ("touching",)
ORDERED_POINT_FIELDS = _CARRIED_POINT_FIELDS + ("total_normal_impulse", "total_tangent_impulse")


@ti.func
def copy_pair_fields(
    dst: ti.template(),
    src: ti.template(),
    dst_pair,
    src_pair,
    pair_fields: ti.template(),
    point_fields: ti.template(),
):
    """dst's pair dst_pair = src's pair src_pair (two Manifolds instances), for the named
    per-pair and per-point fields."""
    for name in ti.static(pair_fields):
        ti.static(getattr(dst, name))[dst_pair] = ti.static(getattr(src, name))[src_pair]
    for name in ti.static(point_fields):
        for i in ti.static(range(MAX_MANIFOLD_POINTS)):
            ti.static(getattr(dst, name))[dst_pair, i] = ti.static(getattr(src, name))[src_pair, i]


@ti.func
def copy_manifold(dst: ti.template(), src: ti.template(), dst_pair, src_pair):
    """dst's pair dst_pair = src's pair src_pair: bodies, colour, and what warm starting
    needs."""
    copy_pair_fields(dst, src, dst_pair, src_pair, _CARRIED_PAIR_FIELDS, _CARRIED_POINT_FIELDS)


@quick
@ti.kernel
def _save_previous_pairs(
    manifolds: ti.template(),
    previous: ti.template(),
    coloring: ti.template(),
    serial: ti.template(),
    n_slots: ti.i32,
    n_pairs: ti.i32,
    ordered: ti.i32,
    colored: ti.i32,
):
    save_pairs(manifolds, previous, coloring, serial, n_slots, n_pairs, ordered, colored, 1)


@ti.func
def save_pairs(
    manifolds: ti.template(),
    previous: ti.template(),
    coloring: ti.template(),
    serial: ti.template(),
    n_slots,
    n_pairs,
    ordered,
    colored,
    save,
):
    """_save_previous_pairs's loops (none where `save` is 0), for n_slots body slots and the
    arguments saved_pairs_args gives. Called at a kernel's top level: its loops are the kernel's."""
    ti.loop_config(serialize=serial)
    for slot in range(n_slots + 1 if save == 1 else 0):
        previous.pair_start[slot] = manifolds.pair_start[slot] if n_pairs > 0 else 0
    ti.loop_config(serialize=serial)
    for k in range(n_pairs if save == 1 else 0):
        save_pair(manifolds, previous, coloring, k, ordered, colored)


@ti.func
def save_pair(
    manifolds: ti.template(), previous: ti.template(), coloring: ti.template(), k, ordered, colored
):
    """Last step's stored pair k into `previous` at its broad-phase index (through
    pair_origin where `ordered`), with its colour where `colored` (else -1)."""
    # Ifs, not `a if ordered else b`: on Taichi's SPIR-V backend (Vulkan, Metal) that
    # select on a ti.func's i32 argument saved the pairs permuted (a small world's
    # pyramid 5 mm off the CPU backend's in 40 steps; tests/test_vulkan.py).
    j = k
    if ordered == 1:
        j = coloring.pair_origin[k]
    copy_manifold(previous, manifolds, j, k)
    color = -1
    if colored == 1:
        color = coloring.color[k]
    previous.color[j] = color


def saved_pairs_args(ctx: "StepContext") -> tuple[int, int, int]:
    """save_pairs's (n_pairs, ordered, colored) for ctx's last step's pairs."""
    cache = ctx.cache
    return cache.n_pairs, int(cache.pairs_ordered), int(cache.coloring_valid)


def save_previous_pairs(ctx: "StepContext"):
    """Copy the last step's pairs and manifolds into `previous`, in the broad phase's order
    (pairs stored in colour order go back through pair_origin), with their colours when the
    colouring is valid; the next broad phase then overwrites `contacts`. (Small worlds save
    them in their broad phase's launch: sleep.find_pairs_waking_by_world.)"""
    pool = ctx.pool
    _save_previous_pairs(
        pool.manifolds,
        pool.previous,
        pool.coloring,
        ctx.serial,
        ctx.n_slots,
        *saved_pairs_args(ctx),
    )


def refit_step_boxes(
    ctx: "StepContext", margin: float, motion_time: float
) -> tuple[int, int, int] | None:
    """Worlds with fat boxes (ctx.fat_boxes): refit them for AABBs grown by margin (m) plus
    what each body covers in motion_time (s) (broad_phase.refit_fat_boxes; all of them
    when the pairs in `contacts` are not fat boxes' pairs); returns (slots refitted,
    sleeping slots, restless slots). Small worlds: None (no fat boxes). Notes in
    ctx.still_bodies whether some body sleeps and none moves (bodies.moves): every wake
    that follows refits the boxes again (step._find_pairs, _pair_woken), so the note
    holds for the step's substeps."""
    if not ctx.fat_boxes:
        return None
    refitted, asleep, restless, movers = refit_fat_boxes(
        ctx, margin, motion_time, reset=not ctx.cache.pairs_fat
    )
    ctx.still_bodies = asleep > 0 and movers == 0
    return refitted, asleep, restless


def keeps_pairs(ctx: "StepContext", refit: tuple[int, int, int] | None) -> bool:
    """Whether the broad phase would find last step's pairs again, in the same order (refit:
    refit_step_boxes's answer): worlds with fat boxes whose pairs are fat boxes' pairs, when
    no box was made again and no world with a sleeping body holds an awake body that can
    move (broad_phase.refit_fat_boxes). Where something sleeps, the step must still ask
    sleep.wake_islands (kept=True) before keeping them: a force or a joint may wake it."""
    return (
        refit is not None
        and refit[0] == 0
        and refit[2] == 0
        and ctx.cache.pairs_fat
        and ctx.options.reuse_pairs
    )


def count_kept_pairs(ctx: "StepContext"):
    """Record that this step keeps last step's pairs (Scene.pair_reuses)."""
    ctx.cache.pair_reuses += 1
    ctx.cache.pairs_kept = True


def find_step_pairs(
    ctx: "StepContext",
    margin: float,
    motion_time: float,
    refit: tuple[int, int] | None = None,
    by_world=None,
) -> int:
    """The broad phase: the step's candidate pairs into `contacts` (broad phase order, each
    body's range in manifolds.pair_start; sets ctx.cache.n_pairs), for AABBs grown by margin
    (m) plus what each body covers in motion_time (s). Returns the sleeping body slots
    where it counted them (worlds with fat boxes), else -1. `refit`: refit_step_boxes's
    answer for this margin and time, if it already ran. `by_world`: the small worlds' launch
    (broad_phase.find_candidate_pairs'; None: its own).

    Small worlds (not ctx.fat_boxes) pair those boxes. Larger worlds pair fat boxes where
    no body sleeps (broad_phase.refit_fat_boxes: a body's box is made again only when it
    leaves it or grows loose, or its sleep, enabled flag or pose validity changes). A step
    in which no box was made again and no sleeping world holds a body that can move
    (keeps_pairs) does not call this: it keeps last step's pairs where they lie
    (step._keep_pairs), which this would find again in the same order (StepOptions.reuse_pairs off:
    the tests check it).
    """
    ctx.cache.pairs_kept = False
    if not ctx.fat_boxes:
        find_candidate_pairs(ctx, margin, motion_time, by_world=by_world)
        return -1
    if refit is None:
        refit = refit_step_boxes(ctx, margin, motion_time)
    find_candidate_pairs(ctx, margin, motion_time, fat=True)
    return refit[1]


@ti.func
def world_pairs(manifolds: ti.template(), world, n_bodies, n_pairs):
    """[first, end) of `world`'s candidate pairs where they lie world by world (the broad
    phase's order: each body slot's range in pair_start), within the step's n_pairs."""
    return (
        ti.min(manifolds.pair_start[world * n_bodies], n_pairs),
        ti.min(manifolds.pair_start[(world + 1) * n_bodies], n_pairs),
    )


@ti.func
def find_previous(previous: ti.template(), owner, a, b):
    """Index of last step's pair (a, b) among the pairs `owner` found then, or -1."""
    found = -1
    for j in range(previous.pair_start[owner], previous.pair_start[owner + 1]):
        if previous.body_a[j] == a and previous.body_b[j] == b:
            found = j
    return found


@ti.func
def previous_pair(previous: ti.template(), a, b):
    """Index of last step's pair (a, b) (slots a < b) in `previous`, or -1 if it had none."""
    found = find_previous(previous, a, a, b)
    if found < 0:
        found = find_previous(previous, b, a, b)
    return found


@ti.func
def record_constraint_counts(counts: ti.template(), n_pairs, n_joints):
    """The step's contact pairs and joints per world, for the kernels that read them from
    the device (counts.n_pairs, counts.n_joints)."""
    counts.n_pairs[None] = n_pairs
    counts.n_joints[None] = n_joints


@ti.func
def carry_pair(manifolds: ti.template(), previous: ti.template(), k):
    """The step's pair k takes last step's manifold of its bodies where it had one
    (carry_contacts), else starts with none and no colour."""
    j = previous_pair(previous, manifolds.body_a[k], manifolds.body_b[k])
    if j >= 0:
        copy_manifold(manifolds, previous, k, j)
    else:
        manifolds.color[k] = -1
        manifolds.point_count[k] = 0
        manifolds.found_margin[k] = 0.0  # found afresh in the step's narrow phase


@quick
@ti.kernel
def _carry_contacts(
    manifolds: ti.template(),
    previous: ti.template(),
    counts: ti.template(),
    serial: ti.template(),
    n_pairs: ti.i32,
    n_joints: ti.i32,
):
    record_constraint_counts(counts, n_pairs, n_joints)
    ti.loop_config(serialize=serial)
    for k in range(n_pairs):
        carry_pair(manifolds, previous, k)


def carry_contacts(ctx: "StepContext"):
    """Give each new pair last step's manifold, impulses (warm starting) and colour
    (manifolds.color, -1 if none), if it had them; records the step's constraint counts
    (counts.n_pairs, counts.n_joints). Waking sleepers touched by new pairs is
    sleep.wake_islands'."""
    pool = ctx.pool
    _carry_contacts(
        pool.manifolds, pool.previous, pool.counts, ctx.serial, ctx.n_pairs, ctx.n_joints
    )


@quick
@ti.kernel
def _plan_color_order(
    coloring: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    n_pairs: ti.i32,
    n_constraints: ti.i32,
):
    """pair_origin[n] = the broad-phase index of the pair to be stored at n; color_list and
    color rewritten for the new indices."""
    ti.loop_config(serialize=serial)
    for i in range(n_constraints):
        rank_listed_pair(coloring, i, n_pairs)
    exclusive_scan(scan, coloring.rank, n_constraints, serial)
    ti.loop_config(serialize=serial)
    for i in range(n_constraints):
        place_listed_pair(coloring, i, n_pairs)
    ti.loop_config(serialize=serial)
    for i in range(n_constraints):
        recolor_listed(coloring, i)


@ti.func
def rank_listed_pair(coloring: ti.template(), i, n_pairs):
    """_plan_color_order's first step for entry i of color_list: 1 where it is a pair (to be
    numbered by the scan), 0 for a joint slot."""
    coloring.rank[i] = 1 if coloring.color_list[i] < n_pairs else 0


@ti.func
def place_listed_pair(coloring: ti.template(), i, n_pairs):
    """_plan_color_order's second step (after the scan of rank) for entry i of color_list:
    a pair's new index n (its rank), pair_origin[n] the broad-phase index it comes from,
    and the entry rewritten to n."""
    k = coloring.color_list[i]
    if k < n_pairs:
        n = coloring.rank[i]
        coloring.pair_origin[n] = k
        coloring.color_list[i] = n


@ti.func
def recolor_listed(coloring: ti.template(), i):
    """_plan_color_order's last step: entry i of color_list (rewritten) takes the colour of
    the range it lies in, at its new index."""
    color = 0
    while coloring.color_start[color + 1] <= i:
        color += 1
    coloring.color[coloring.color_list[i]] = color


@quick
@ti.kernel
def _plan_world_order(
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    serial: ti.template(),
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    n_pairs: ti.i32,
    n_colors: ti.i32,
):
    """The solve order of worlds solved one per thread (StepContext.solves_by_world): in
    each world's range of the broad phase's order, pair_origin[n] is the pair its thread
    solves n-th, colour after colour, the unsolved ones last. The pairs stay where the broad
    phase put them: a world's lie in consecutive memory already, and moving them (as
    _gather_pairs does for a colour's) cost 4,096 small worlds ~0.9 ms a step. The same
    thread builds the world's per-body lists (contacts.build_world_body_lists)."""
    ti.loop_config(serialize=serial)
    for world in range(n_worlds):
        begin, end = world_pairs(manifolds, world, n_bodies, n_pairs)
        plan_world_order(manifolds, prepared, coloring, world, n_bodies, begin, end, n_colors)


@ti.func
def plan_world_order(
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    world,
    n_bodies,
    begin,
    end,
    n_colors,
):
    """_plan_world_order for one world, whose pairs are [begin, end): its per-body lists
    and its solve order (pair_origin over its range), its colours below n_colors (no
    overflow), then the unsolved."""
    build_world_body_lists(
        manifolds, prepared, world * n_bodies, (world + 1) * n_bodies, begin, end
    )
    n = begin
    for c in range(n_colors + 1):
        color = c if c < n_colors else UNSOLVED_COLOR
        for k in range(begin, end):
            if coloring.color[k] == color:
                coloring.pair_origin[n] = k
                n += 1


@quick
@ti.kernel
def _gather_pairs(
    manifolds: ti.template(),
    staging: ti.template(),
    coloring: ti.template(),
    serial: ti.template(),
    n_pairs: ti.i32,
):
    """Move the pairs to the order _plan_color_order chose, through `staging`: what is
    carried, and what the step's narrow phase found (step.begin_step)."""
    ti.loop_config(serialize=serial)
    for n in range(n_pairs):
        copy_pair_fields(
            staging,
            manifolds,
            n,
            coloring.pair_origin[n],
            ORDERED_PAIR_FIELDS,
            ORDERED_POINT_FIELDS,
        )
    ti.loop_config(serialize=serial)
    for n in range(n_pairs):
        copy_pair_fields(manifolds, staging, n, n, ORDERED_PAIR_FIELDS, ORDERED_POINT_FIELDS)


@quick
@ti.kernel
def _scatter_to_broad_order(
    manifolds: ti.template(),
    staging: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    serial: ti.template(),
    n_pairs: ti.i32,
    n_joints: ti.i32,
):
    """_gather_pairs undone: each pair back at its broad-phase index (pair_origin), its
    colour (coloring.color) in manifolds.color, as carry_contacts gives it, and its solve
    flag with it; the constraint counts recorded, as carry_contacts does."""
    record_constraint_counts(counts, n_pairs, n_joints)
    ti.loop_config(serialize=serial)
    for n in range(n_pairs):
        k = coloring.pair_origin[n]
        copy_pair_fields(staging, manifolds, k, n, ORDERED_PAIR_FIELDS, ORDERED_POINT_FIELDS)
        staging.color[k] = coloring.color[n]
        coloring.rank[k] = coloring.solve[n]  # rank: the colouring's scratch
    ti.loop_config(serialize=serial)
    for k in range(n_pairs):
        copy_pair_fields(manifolds, staging, k, k, ORDERED_PAIR_FIELDS, ORDERED_POINT_FIELDS)
        coloring.solve[k] = coloring.rank[k]


def restore_broad_order(ctx: "StepContext"):
    """Pairs kept in colour order (a step that kept last step's pairs, step._keep_pairs)
    whose colouring is not reused: put them back in the broad phase's order, as
    save_previous_pairs, carry_contacts and begin_step would have left them, for a new
    colouring and store_in_color_order."""
    pool = ctx.pool
    _scatter_to_broad_order(
        pool.manifolds,
        pool.staging,
        pool.coloring,
        pool.counts,
        ctx.serial,
        ctx.n_pairs,
        ctx.n_joints,
    )


def store_in_color_order(
    ctx: "StepContext", recolored: bool, planned: bool = False, moved: bool = False
):
    """Store the pairs in colour order (after the colouring, before the first substep
    prepares them), so each colour's solve reads its contacts from consecutive memory
    instead of scattered across the pair arrays (on the CPU this made the solver passes
    ~30% faster).

    recolored: the step made a new colouring (else the pairs are in the broad phase's order
    and the reused colouring's plan, pair_origin, still applies: a colouring is reused only
    without overflow, so for the same kind of solve). Worlds solved one per thread
    (ctx.solves_by_world, which colour every step: coloring.color_constraints) keep their
    pairs in the broad phase's order, each world's in its own range, and pair_origin holds
    the order each world's thread solves them in (_plan_world_order, which builds their
    per-body lists too: contacts.build_body_lists); `planned`: the colouring's launch
    planned it (coloring.color_constraints with carry); `moved`: a team's launch moved them
    (fused.found_step_by_team), only the note that they are in colour order is left."""
    cache, pool = ctx.cache, ctx.pool
    if ctx.solves_by_world:
        assert recolored, "small worlds colour every step"
        cache.pairs_ordered = False
        if not planned:
            _plan_world_order(
                pool.manifolds,
                pool.prepared,
                pool.coloring,
                ctx.serial,
                ctx.n_worlds,
                ctx.n_bodies,
                ctx.n_pairs,
                cache.n_colors,
            )
        return
    cache.pairs_ordered = True
    if ctx.n_pairs == 0 or moved:
        return
    if recolored:
        _plan_color_order(pool.coloring, pool.scan, ctx.serial, ctx.n_pairs, ctx.n_constraints)
    _gather_pairs(pool.manifolds, pool.staging, pool.coloring, ctx.serial, ctx.n_pairs)
