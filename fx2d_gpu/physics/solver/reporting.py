"""What touched what: the step's touching pairs, kept for the user, and its begin/end events.

After the substeps, `report_contacts` builds the *reported* list (pool.reported, saved with
the scene): every pair that touched in a substep of this step (manifolds.touching, set by
the velocity pass: TOUCHED, or HELD where last step's list has the pair, a hysteresis that
keeps resting neighbours from flickering), with its manifold and the impulses applied over
the step, plus the pairs that stay touching without being looked at: the broad phase pairs
no two bodies that are both asleep or static, so a sleeping pile keeps the contacts it had
when it fell asleep (as Box2D keeps a sleeping island's contacts) until one of its bodies
moves, is disabled, or the pair is filtered out (after Scene.set_state such pairs are
checked again at the new poses). The list is sorted by (lower slot, upper slot), which is
world first: the same order on every run and for a world alone or in a batch.

Events compare it with the last step's list: a pair in the new list and not the old one
began touching (begin), one in the old and not the new stopped (end). A pair that stays in
contact reports begin once, whatever the sleep of its bodies.

Everything is one kernel: count per lower slot, prefix sum, fill (in thread order), sort
each slot's entries by their upper slot (through a permutation in staging.color), mark and
place the events, then store the sorted list. Scratch used (all free after the substeps):
staging (the new list: each entry's bodies, and in staging.touching the step's pair it
comes from, or -1 for a pair of the old list copied there whole),
prepared.body_contact_cursor (fill cursors), coloring.rank and coloring.uncolored (event
flags and their prefix sums).

Small worlds whose pairs lie world by world (StepContext.solves_by_world) build the same list
and events a world per thread instead (_report_by_world): each world counts its entries and
events, one prefix sum over the worlds places them, each world fills, sorts and flags its
own part, and the list is stored: two loops over the worlds and one over the list instead
of eight over pairs and slots and three prefix sums (4,096 small worlds, 2-core CPU: 1.5-1.6
-> 0.8-0.9 ms, the kernel alone; bitwise the same list, which the tests compare).
"""

from typing import TYPE_CHECKING

import taichi as ti

from ...device.launching import quick
from ...device.scan import exclusive_scan
from ...enums import HELD, TOUCHED
from ..bodies import moves
from ..collision.broad_phase import never_collide
from ..collision.narrow_phase import collide_pair
from ..integrate import clear_force
from . import team, team_stages
from .pairs import copy_pair_fields
from .sleep import label_world

if TYPE_CHECKING:
    from .context import StepContext

#: Most steps between two tries of refresh_report while they fail.
MAX_REFRESH_BACKOFF = 15
#: A resting pair checked again after set_state still touches with points this far apart
#: (m): about the quarter slop of a touching point (contacts.TOUCH_FRACTION).
RESTING_MARGIN = 0.0005
#: Manifold fields a reported pair keeps (per pair, then per point).
_REPORTED_PAIR_FIELDS = ("body_a", "body_b", "point_count", "normal")
_REPORTED_POINT_FIELDS = (
    "point",
    "depth",
    "feature",
    "total_normal_impulse",
    "total_tangent_impulse",
)


@ti.func
def copy_report(dst: ti.template(), src: ti.template(), dst_pair, src_pair):
    """dst's pair dst_pair = src's pair src_pair: what the user is told about a contact."""
    copy_pair_fields(dst, src, dst_pair, src_pair, _REPORTED_PAIR_FIELDS, _REPORTED_POINT_FIELDS)


@ti.func
def _still_resting(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    reported: ti.template(),
    j,
    n_bodies,
):
    """Last step's reported pair j still touches without this step looking at it: neither
    body moved this step (asleep or static: the broad phase did not pair them), both are
    enabled, neither is a sensor (sensor pairs are always found again) and the filter still
    lets them collide."""
    a, b = reported.body_a[j], reported.body_b[j]
    body_a, body_b = a % n_bodies, b % n_bodies
    return (
        reported.point_count[j] > 0
        and not moves(model, bodies, a, body_a)
        and not moves(model, bodies, b, body_b)
        and bodies.enabled[a] == 1
        and bodies.enabled[b] == 1
        and model.sensor[body_a] == 0
        and model.sensor[body_b] == 0
        and not never_collide(model, joints, body_a, body_b)
    )


@ti.func
def _listed(manifolds: ti.template(), a, b, n_listed):
    """Whether pair (a, b) is in a list of n_listed pairs sorted into pair_start ranges."""
    found = False
    if n_listed > 0:
        start = ti.max(manifolds.pair_start[a], 0)
        end = ti.min(manifolds.pair_start[a + 1], n_listed)
        for i in range(start, end):
            if manifolds.body_b[i] == b:
                found = True
    return found


@ti.func
def _touching(manifolds: ti.template(), reported: ti.template(), k, n_held):
    """Whether the step's pair k touches: it touched in a substep (contacts.solve_velocity:
    TOUCHED), or it came within the hold distance (HELD) and is among the first n_held
    pairs of the last reported list (the whole list, or none after Scene.set_state)."""
    touching = manifolds.touching[k]
    result = False
    if manifolds.point_count[k] > 0:
        if touching == TOUCHED:
            result = True
        elif touching == HELD:
            result = _listed(reported, manifolds.body_a[k], manifolds.body_b[k], n_held)
    return result


@ti.func
def _count_entry(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    staging: ti.template(),
    reported: ti.template(),
    e,
    n_pairs,
    n_bodies,
    n_held,
):
    """Entry e of the step's pairs then last step's list, if it goes into the new list:
    counted on its lower slot (staging.pair_start)."""
    if e < n_pairs:
        if _touching(manifolds, reported, e, n_held):
            ti.atomic_add(staging.pair_start[manifolds.body_a[e]], 1)
    elif _still_resting(model, bodies, joints, reported, e - n_pairs, n_bodies):
        ti.atomic_add(staging.pair_start[reported.body_a[e - n_pairs]], 1)


@ti.func
def _fill_entry(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    staging: ti.template(),
    reported: ti.template(),
    prepared: ti.template(),
    e,
    n_pairs,
    n_bodies,
    n_held,
):
    """Entry e (as _count_entry) placed at its lower slot's cursor in staging. One of the
    step's pairs keeps its bodies and its pair (staging.touching); one of last step's list
    is copied whole (touching -1), as `reported` is overwritten at the end."""
    if e < n_pairs:
        if _touching(manifolds, reported, e, n_held):
            n = ti.atomic_add(prepared.body_contact_cursor[manifolds.body_a[e]], 1)
            staging.body_a[n] = manifolds.body_a[e]
            staging.body_b[n] = manifolds.body_b[e]
            staging.touching[n] = e
    elif _still_resting(model, bodies, joints, reported, e - n_pairs, n_bodies):
        j = e - n_pairs
        n = ti.atomic_add(prepared.body_contact_cursor[reported.body_a[j]], 1)
        copy_report(staging, reported, n, j)
        staging.touching[n] = -1


@ti.func
def _sort_slot(staging: ti.template(), slot):
    """Slot's staging entries ordered by their upper slot (unique within the slot), by
    insertion sort of a permutation: staging.color[n] is the entry that goes to place n."""
    start, end = staging.pair_start[slot], staging.pair_start[slot + 1]
    for i in range(start, end):
        staging.color[i] = i
    for i in range(start + 1, end):
        entry = staging.color[i]
        key = staging.body_b[entry]
        j = i - 1
        while j >= start:
            if staging.body_b[staging.color[j]] <= key:
                break
            staging.color[j + 1] = staging.color[j]
            j -= 1
        staging.color[j + 1] = entry


@ti.func
def _flag_event(
    staging: ti.template(),
    reported: ti.template(),
    coloring: ti.template(),
    e,
    n_new,
    n_old,
    n_events_new,
):
    """Event flag e (1: an event): for e < n_events_new, whether the new list's place e is
    missing from the old list (begin, into coloring.rank); after it, whether the old list's
    pair e - n_events_new is missing from the new one (end, into coloring.uncolored)."""
    if e < n_events_new:
        entry = staging.color[e]
        known = _listed(reported, staging.body_a[entry], staging.body_b[entry], n_old)
        coloring.rank[e] = 0 if known else 1
    else:
        j = e - n_events_new
        kept = _listed(staging, reported.body_a[j], reported.body_b[j], n_new)
        coloring.uncolored[j] = 0 if kept else 1


@ti.func
def _place_event(
    staging: ti.template(),
    reported: ti.template(),
    events: ti.template(),
    coloring: ti.template(),
    e,
    n_events_new,
):
    """Flagged event e (numbered as in _flag_event) written at its flags' prefix sum."""
    if e < n_events_new:
        if coloring.rank[e + 1] > coloring.rank[e]:
            entry = staging.color[e]
            events.begin_a[coloring.rank[e]] = staging.body_a[entry]
            events.begin_b[coloring.rank[e]] = staging.body_b[entry]
    else:
        j = e - n_events_new
        if coloring.uncolored[j + 1] > coloring.uncolored[j]:
            events.end_a[coloring.uncolored[j]] = reported.body_a[j]
            events.end_b[coloring.uncolored[j]] = reported.body_b[j]


@ti.func
def _store_entry(manifolds: ti.template(), staging: ti.template(), reported: ti.template(), i):
    """The new list's place i (sorted) into `reported`: from the step's pair it came from,
    or from its copy in staging (a resting pair of the old list: origin -1)."""
    entry = staging.color[i]
    pair = staging.touching[entry]
    reported.origin[i] = pair
    if pair >= 0:
        copy_report(reported, manifolds, i, pair)
    else:
        copy_report(reported, staging, i, entry)


@quick
@ti.kernel
def _report_contacts(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    staging: ti.template(),
    reported: ti.template(),
    events: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    n_slots: ti.i32,
    n_bodies: ti.i32,
    n_pairs: ti.i32,
    n_old: ti.i32,
    n_held: ti.i32,
) -> ti.math.ivec3:
    """The new reported list into `reported` and the events into `events` (module
    docstring); returns (reported pairs, begin events, end events). A new list over the
    pair capacity writes nothing: only its size returns.

    After Scene.set_state, _recheck_resting has found last step's manifolds again at the
    current poses (only those still touching stay), and no pair is held by its place in the
    old list (n_held 0; else n_old). Each loop takes the step's pairs then last step's list
    as one range, so that a CPU starts one loop for both (a start costs ~20-35 us there)."""
    n_both = n_pairs + n_old
    ti.loop_config(serialize=serial)
    for slot in range(n_slots + 1):
        staging.pair_start[slot] = 0
    ti.loop_config(serialize=serial)
    for e in range(n_both):
        _count_entry(
            model, bodies, joints, manifolds, staging, reported, e, n_pairs, n_bodies, n_held
        )
    exclusive_scan(scan, staging.pair_start, n_slots, serial)
    n_new = staging.pair_start[n_slots]
    fits = n_new <= staging.body_a.shape[0]
    n_fill = n_slots if fits else 0

    ti.loop_config(serialize=serial)
    for slot in range(n_fill):
        prepared.body_contact_cursor[slot] = staging.pair_start[slot]
    ti.loop_config(serialize=serial)
    for e in range(n_both if fits else 0):
        _fill_entry(
            model,
            bodies,
            joints,
            manifolds,
            staging,
            reported,
            prepared,
            e,
            n_pairs,
            n_bodies,
            n_held,
        )
    ti.loop_config(serialize=serial)
    for slot in range(n_fill):
        _sort_slot(staging, slot)

    # Events: flags (coloring.rank for the new list, coloring.uncolored for the old one),
    # prefix sums, then the pairs in list order.
    n_events_new = n_new if fits else 0
    n_events_old = n_old if fits else 0
    ti.loop_config(serialize=serial)
    for e in range(n_events_new + n_events_old):
        _flag_event(staging, reported, coloring, e, n_new, n_old, n_events_new)
    exclusive_scan(scan, coloring.rank, n_events_new, serial)
    exclusive_scan(scan, coloring.uncolored, n_events_old, serial)
    ti.loop_config(serialize=serial)
    for e in range(n_events_new + n_events_old):
        _place_event(staging, reported, events, coloring, e, n_events_new)
    n_begin = coloring.rank[n_events_new]
    n_end = coloring.uncolored[n_events_old]

    # The new list replaces the old one (read above), in sorted order.
    ti.loop_config(serialize=serial)
    for i in range(ti.max(n_fill + 1, n_events_new) if fits else 0):
        if i <= n_fill:
            reported.pair_start[i] = staging.pair_start[i]
        if i < n_events_new:
            _store_entry(manifolds, staging, reported, i)
    return ti.math.ivec3(n_new, n_begin, n_end)


@ti.func
def report_by_team(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    staging: ti.template(),
    reported: ti.template(),
    events: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    scan: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_slots,
    n_bodies,
    n_pairs,
    n_old,
    n_held,
):
    """_report_contacts on a team (solver/team.py, solver/gpu_team.py), after the substeps
    in the team's launch (fused._substeps with `report`): each of its loops split among the
    members, the team meeting after each, its prefix sums team_stages.exclusive_scan's.
    The same list and events: entries are placed at atomic cursors in whatever order they
    come, then sorted within each slot; events at their flags' prefix sums. Where the new
    list would not fit the pool, nothing is written (the host sees its size, grows the pool
    and builds it again: report_contacts). The list's counts are read after the launch
    (fused.report_counts)."""
    n_both = n_pairs + n_old
    lo, hi = team.share(0, n_slots + 1, member, n_members)
    for slot in range(lo, hi):
        staging.pair_start[slot] = 0
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    both_lo, both_hi = team.share(0, n_both, member, n_members)
    for e in range(both_lo, both_hi):
        _count_entry(
            model, bodies, joints, manifolds, staging, reported, e, n_pairs, n_bodies, n_held
        )
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    team_stages.exclusive_scan_to_cursors(
        scan, staging.pair_start, prepared.body_contact_cursor, counts, n_slots, member, n_members
    )
    n_new = staging.pair_start[n_slots]
    if n_new <= staging.body_a.shape[0]:  # the same for every member
        lo, hi = team.share(0, n_slots, member, n_members)
        for e in range(both_lo, both_hi):
            _fill_entry(
                model,
                bodies,
                joints,
                manifolds,
                staging,
                reported,
                prepared,
                e,
                n_pairs,
                n_bodies,
                n_held,
            )
        team.barrier(counts, n_members, team.SPIN_LIMIT)
        # A slot's new entries are flagged by the member that sorted it, at their sorted
        # places (staging.color); the old list's by their index, which needs the new list
        # filled, not sorted (_listed reads its entries' upper slots in any order).
        for slot in range(lo, hi):
            _sort_slot(staging, slot)
            for e in range(staging.pair_start[slot], staging.pair_start[slot + 1]):
                _flag_event(staging, reported, coloring, e, n_new, n_old, n_new)
        old_lo, old_hi = team.share(0, n_old, member, n_members)
        for j in range(old_lo, old_hi):
            _flag_event(staging, reported, coloring, n_new + j, n_new, n_old, n_new)
        team.barrier(counts, n_members, team.SPIN_LIMIT)
        events_lo, events_hi = team.share(0, n_new + n_old, member, n_members)
        team_stages.exclusive_scans(
            scan, coloring.rank, n_new, coloring.uncolored, n_old, counts, member, n_members
        )
        for e in range(events_lo, events_hi):
            _place_event(staging, reported, events, coloring, e, n_new)
        team.barrier(counts, n_members, team.SPIN_LIMIT)
        # The new list replaces the old one (read above), in sorted order.
        lo, hi = team.share(0, ti.max(n_slots + 1, n_new), member, n_members)
        for i in range(lo, hi):
            if i <= n_slots:
                reported.pair_start[i] = staging.pair_start[i]
            if i < n_new:
                _store_entry(manifolds, staging, reported, i)
        team.barrier(counts, n_members, team.SPIN_LIMIT)


@ti.func
def report_fits(staging: ti.template(), n_slots):
    """Whether the list report_by_team built fit the pool (else nothing of it was written)."""
    n_new = staging.pair_start[n_slots]
    return 0 <= n_new <= staging.body_a.shape[0]


@ti.func
def report_counts(staging: ti.template(), coloring: ti.template(), n_slots, n_old):
    """(reported pairs, begin events, end events) of the list report_by_team built (or the
    size of the list that did not fit, and zeros)."""
    n_new = staging.pair_start[n_slots]
    n_begin, n_end = 0, 0
    if report_fits(staging, n_slots):
        n_begin, n_end = coloring.rank[n_new], coloring.uncolored[n_old]
    return ti.Vector([n_new, n_begin, n_end])


# The small worlds' report (_report_by_world): the same list and events, a world per thread.
# Scratch: staging.pair_start holds each world's entries, begin events and end events (three
# runs of n_worlds counts, one prefix sum: the offsets), prepared.body_contact_cursor the new
# list's per-slot starts, coloring.rank and coloring.uncolored what each step's pair and each
# old entry is (found once, by _count_world).

#: A step's pair: not in the new list; in it and in the old one; in it and new (begins).
_NOT_LISTED, _LISTED, _BEGINS = 0, 1, 2
#: An old entry: resting (copied into the new list); touching still (its pair is in the new
#: list); gone (it ends).
_RESTS, _STAYS, _ENDS = 0, 1, 2


@ti.func
def _old_world_range(reported: ti.template(), first_slot, n_bodies, n_old):
    """[lo, hi) of last step's list holding the pairs whose lower slot is in the world
    starting at first_slot (the list is sorted by lower slot)."""
    lo, hi = 0, 0
    if n_old > 0:
        lo = ti.max(reported.pair_start[first_slot], 0)
        hi = ti.min(reported.pair_start[first_slot + n_bodies], n_old)
    return lo, hi


@ti.func
def _touches_in_world(manifolds: ti.template(), reported: ti.template(), a, b, n_held):
    """Whether the step's pair (a, b) of a small world exists and touches (_touching): it lies
    in its owner's pair_start range, a's or b's (broad_phase.write_world_partners)."""
    found = False
    for side in range(2):
        owner = a if side == 0 else b
        for k in range(manifolds.pair_start[owner], manifolds.pair_start[owner + 1]):
            if (
                manifolds.body_a[k] == a
                and manifolds.body_b[k] == b
                and _touching(manifolds, reported, k, n_held)
            ):
                found = True
    return found


@ti.func
def _count_world(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    staging: ti.template(),
    reported: ti.template(),
    coloring: ti.template(),
    world,
    n_worlds,
    n_bodies,
    n_old,
    n_held,
):
    """World's counts into staging.pair_start: entries of the new list (its touching pairs
    and last step's resting ones), begin events (touching pairs the old list lacks) and end
    events (old pairs that neither rest nor touch). What each entry is goes into
    coloring.rank (step's pair k: _NOT_LISTED, _LISTED or _BEGINS) and coloring.uncolored
    (old pair j: _RESTS, _STAYS or _ENDS) for _fill_world."""
    first = world * n_bodies
    n_new, n_begin, n_end = 0, 0, 0
    for k in range(manifolds.pair_start[first], manifolds.pair_start[first + n_bodies]):
        kind = _NOT_LISTED
        if _touching(manifolds, reported, k, n_held):
            n_new += 1
            kind = _LISTED
            if not _listed(reported, manifolds.body_a[k], manifolds.body_b[k], n_old):
                n_begin += 1
                kind = _BEGINS
        coloring.rank[k] = kind
    lo, hi = _old_world_range(reported, first, n_bodies, n_old)
    for j in range(lo, hi):
        kind = _STAYS
        if _still_resting(model, bodies, joints, reported, j, n_bodies):
            n_new += 1
            kind = _RESTS
        elif not _touches_in_world(
            manifolds, reported, reported.body_a[j], reported.body_b[j], n_held
        ):
            n_end += 1
            kind = _ENDS
        coloring.uncolored[j] = kind
    staging.pair_start[world] = n_new
    staging.pair_start[n_worlds + world] = n_begin
    staging.pair_start[2 * n_worlds + world] = n_end


@ti.func
def _fill_world(
    staging: ti.template(),
    reported: ti.template(),
    events: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    manifolds: ti.template(),
    world,
    n_worlds,
    n_bodies,
    n_old,
):
    """World's entries into staging from its offset (as _fill_entry), their sorted order
    (staging.color, by lower then upper slot) and per-slot starts
    (prepared.body_contact_cursor), and its events at their offsets: begin events in list
    order, end events in the old list's order (as _place_event); what each entry is, as
    _count_world found it."""
    first = world * n_bodies
    start = staging.pair_start[world]
    n = start
    for k in range(manifolds.pair_start[first], manifolds.pair_start[first + n_bodies]):
        if coloring.rank[k] != _NOT_LISTED:
            staging.body_a[n] = manifolds.body_a[k]
            staging.body_b[n] = manifolds.body_b[k]
            staging.touching[n] = k
            n += 1
    lo, hi = _old_world_range(reported, first, n_bodies, n_old)
    for j in range(lo, hi):
        if coloring.uncolored[j] == _RESTS:
            copy_report(staging, reported, n, j)
            staging.touching[n] = -1
            n += 1
    # Insertion sort of a permutation by (lower slot, upper slot): unique keys.
    for i in range(start, n):
        staging.color[i] = i
    for i in range(start + 1, n):
        entry = staging.color[i]
        key_a, key_b = staging.body_a[entry], staging.body_b[entry]
        j = i - 1
        while j >= start:
            other = staging.color[j]
            if staging.body_a[other] < key_a or (
                staging.body_a[other] == key_a and staging.body_b[other] <= key_b
            ):
                break
            staging.color[j + 1] = other
            j -= 1
        staging.color[j + 1] = entry
    place = start
    for body in range(n_bodies):
        prepared.body_contact_cursor[first + body] = place
        while place < n and staging.body_a[staging.color[place]] == first + body:
            place += 1
    begin = staging.pair_start[n_worlds + world] - staging.pair_start[n_worlds]
    for i in range(start, n):
        entry = staging.color[i]
        k = staging.touching[entry]
        if k >= 0 and coloring.rank[k] == _BEGINS:
            events.begin_a[begin] = staging.body_a[entry]
            events.begin_b[begin] = staging.body_b[entry]
            begin += 1
    end = staging.pair_start[2 * n_worlds + world] - staging.pair_start[2 * n_worlds]
    for j in range(lo, hi):
        if coloring.uncolored[j] == _ENDS:
            events.end_a[end] = reported.body_a[j]
            events.end_b[end] = reported.body_b[j]
            end += 1


@quick
@ti.kernel
def _report_by_world(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    staging: ti.template(),
    reported: ti.template(),
    events: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    islands: ti.template(),
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    n_old: ti.i32,
    n_held: ti.i32,
    n_pairs: ti.i32,
    n_joints: ti.i32,
    sleep: ti.i32,
    dt: ti.f32,
) -> ti.math.ivec3:
    """_report_contacts for small worlds whose step's pairs lie world by world in their
    owners' pair_start ranges (StepContext.solves_by_world) and of at least 3 bodies (the
    three runs of counts fit staging.pair_start): a world per thread counts, then fills
    and sorts its part of the list and writes its events, then the list is stored. The
    same list and events in the same order (the tests compare them): three loops and a
    prefix sum over worlds instead of eight loops and three prefix sums over pairs and
    slots. `sleep`: where the list fits, the step's sleep follows in the same launch
    (sleep.update_sleep's pass, a world per thread: sleep.label_world, dt s), which
    needs the report done first (a resting pair is one of bodies that did not move)."""
    return report_worlds(
        model,
        bodies,
        joints,
        manifolds,
        staging,
        reported,
        events,
        prepared,
        coloring,
        scan,
        serial,
        islands,
        n_worlds,
        n_bodies,
        n_old,
        n_held,
        n_pairs,
        n_joints,
        sleep,
        dt,
        1,
        0,
    )


@ti.func
def report_worlds(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    staging: ti.template(),
    reported: ti.template(),
    events: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    islands: ti.template(),
    n_worlds,
    n_bodies,
    n_old,
    n_held,
    n_pairs,
    n_joints,
    sleep,
    dt,
    go,
    clears_forces,
):
    """_report_by_world's loops (its answer), for a kernel of its own or the small worlds'
    step in one launch (fused.step_by_world); `go` 0: nothing is listed or put to sleep
    (that launch stopped before its substeps), and the answer means nothing. With
    `clears_forces` 1, where the list fits, each world's applied forces are cleared after
    its sleep pass (which reads them: integrate.clear_forces' work, in the world's
    thread). Called at a kernel's top level: its loops are the kernel's."""
    ti.loop_config(serialize=serial)
    for world in range(n_worlds * go):
        _count_world(
            model,
            bodies,
            joints,
            manifolds,
            staging,
            reported,
            coloring,
            world,
            n_worlds,
            n_bodies,
            n_old,
            n_held,
        )
    exclusive_scan(scan, staging.pair_start, 3 * n_worlds * go, serial)
    n_new = staging.pair_start[n_worlds]
    n_begin = staging.pair_start[2 * n_worlds] - n_new
    n_end = staging.pair_start[3 * n_worlds] - staging.pair_start[2 * n_worlds]
    fits = go == 1 and n_new <= staging.body_a.shape[0]
    ti.loop_config(serialize=serial)
    for world in range(n_worlds if fits else 0):
        _fill_world(
            staging,
            reported,
            events,
            prepared,
            coloring,
            manifolds,
            world,
            n_worlds,
            n_bodies,
            n_old,
        )
    n_slots = n_worlds * n_bodies
    ti.loop_config(serialize=serial)
    for i in range(ti.max(n_slots + 1, n_new) if fits else 0):
        if i < n_slots:
            reported.pair_start[i] = prepared.body_contact_cursor[i]
        elif i == n_slots:
            reported.pair_start[i] = n_new
        if i < n_new:
            _store_entry(manifolds, staging, reported, i)
    ti.loop_config(serialize=serial)
    for world in range(n_worlds if fits and (sleep == 1 or clears_forces == 1) else 0):
        if sleep == 1:
            label_world(
                model,
                bodies,
                joints,
                manifolds,
                islands,
                world,
                n_worlds,
                n_bodies,
                n_pairs,
                n_joints,
                dt,
                1,
            )
        if clears_forces == 1:
            for slot in range(world * n_bodies, (world + 1) * n_bodies):
                clear_force(bodies, slot)
    return ti.math.ivec3(n_new, n_begin, n_end)


@quick
@ti.kernel
def _refresh_report(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    reported: ti.template(),
    serial: ti.template(),
    n_pairs: ti.i32,
    n_old: ti.i32,
    n_bodies: ti.i32,
) -> ti.i32:
    """refresh_report's kernel: whether the step's touching pairs are those the reported
    list came from, and its resting pairs (origin -1) still rest (then each entry from a
    pair is copied again from it; a resting one stays as it is, as _report_contacts would
    copy it). They are where every pair of the list still touches (TOUCHED, or HELD: it is
    listed) and the TOUCHED pairs are all in the list: as many TOUCHED pairs among the
    list's origins as among all pairs (the origins are distinct pairs). A resting pair is
    one the broad phase did not pair (both bodies asleep or static), so no step's pair
    is listed twice."""
    n_touched, n_touched_listed, n_gone = 0, 0, 0
    ti.loop_config(serialize=serial)
    for e in range(n_pairs + n_old):
        tally = refresh_tally(model, bodies, joints, manifolds, reported, e, n_pairs, n_bodies)
        n_touched += tally[0]
        n_touched_listed += tally[1]
        n_gone += tally[2]
    same = refresh_holds(ti.Vector([n_touched, n_touched_listed, n_gone]))
    ti.loop_config(serialize=serial)
    for i in range(n_old if same else 0):
        copy_listed(reported, manifolds, i)
    return 1 if same else 0


@ti.func
def refresh_tally(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    reported: ti.template(),
    e,
    n_pairs,
    n_bodies,
):
    """Item e of _refresh_report's check (the step's pairs, then the old list's entries
    from n_pairs on): its part of (touching pairs, touching pairs in the list, listed
    pairs gone), 0 or 1 each; refresh_holds reads the sums."""
    tally = ti.Vector([0, 0, 0])
    if e < n_pairs:
        if manifolds.point_count[e] > 0 and manifolds.touching[e] == TOUCHED:
            tally[0] = 1
    else:
        j = e - n_pairs
        pair = reported.origin[j]
        if pair < 0:
            if not _still_resting(model, bodies, joints, reported, j, n_bodies):
                tally[2] = 1
        elif manifolds.point_count[pair] == 0 or manifolds.touching[pair] == 0:
            tally[2] = 1
        elif manifolds.touching[pair] == TOUCHED:
            tally[1] = 1
    return tally


@ti.func
def refresh_holds(tally):
    """Whether refresh_tally's sums say the list may be refreshed: every touching pair is
    listed, and no listed pair is gone."""
    return tally[0] == tally[1] and tally[2] == 0


@ti.func
def copy_listed(reported: ti.template(), manifolds: ti.template(), i):
    """Entry i of a refreshed list copied again from its pair (a resting one stays)."""
    if reported.origin[i] >= 0:
        copy_report(reported, manifolds, i, reported.origin[i])


def refresh_due(ctx: "StepContext", in_place: bool) -> bool:
    """Whether refresh_report would try the device's check now (without counting a skip),
    for a step whose pairs lie where the list was made from them (`in_place`, else never):
    the tail of a team's launch (solver/fused.py) tries it where it is due."""
    cache = ctx.cache
    return (
        in_place
        and cache.report_mapped
        and ctx.options.refresh_report
        and not cache.state_set
        and cache.refresh_skips == 0
    )


def refresh_report(ctx: "StepContext") -> bool:
    """The report of a step whose pairs stay where they lay when the last list was made
    from them (StepCache.pairs_in_place, report_mapped: each entry's pair in
    reported.origin, or -1 for a resting pair), if the same pairs touch and the resting
    ones still rest: each entry from a pair is copied again from it (the manifold and the
    step's impulses), in the same sorted order, and no event fires. Returns False,
    changing nothing, where another pair touches or one stopped (then _report_contacts
    builds the list). The same list _report_contacts would build (the tests compare them)
    for one loop over the pairs and one over the list instead of eight, two prefix sums
    and a sort: many pyramids awake: 3.6 -> 1.2 ms (2-core CPU); fast asleep (their
    contacts all resting pairs): 3.2 -> 0.5 ms."""
    cache = ctx.cache
    if not (
        cache.pairs_in_place
        and cache.report_mapped
        and ctx.options.refresh_report
        and not cache.state_set
    ):
        return False
    if cache.refresh_skips > 0:
        cache.refresh_skips -= 1
        return False
    pool = ctx.pool
    return refreshed(
        ctx,
        bool(
            _refresh_report(
                pool.model,
                pool.bodies,
                pool.joints,
                pool.manifolds,
                pool.reported,
                ctx.serial,
                ctx.n_pairs,
                cache.n_reported,
                ctx.n_bodies,
            )
        ),
    )


def refreshed(ctx: "StepContext", same: bool) -> bool:
    """The host's part of a refresh the device tried (_refresh_report, or a team's launch:
    ctx.report_refreshed): where the list was not the same, the next tries back off;
    returns `same`."""
    cache = ctx.cache
    if not same:
        # Where contacts begin or end every step (a pile settling; the awake large pyramid
        # had dozens of events a step before touching had hysteresis, 5 since) the check
        # is wasted (0.14 ms there): tries come 2, 4 ... 16 steps apart while they fail.
        cache.refresh_backoff = min(2 * cache.refresh_backoff + 1, MAX_REFRESH_BACKOFF)
        cache.refresh_skips = cache.refresh_backoff
        return False
    cache.refresh_backoff = 0
    cache.n_begin_events = cache.n_end_events = 0
    cache.report_refreshes += 1
    return True


# A kernel of its own, launched only after Scene.set_state: the narrow phase it inlines is
# most of a kernel's compile time (in _report_contacts: 1.6 of 2.8 s with an empty offline
# cache, 0.5 of 1.3 s with a filled one, 2-core CPU).
@quick
@ti.kernel
def _recheck_resting(
    model: ti.template(),
    bodies: ti.template(),
    reported: ti.template(),
    serial: ti.template(),
    n_old: ti.i32,
    n_bodies: ti.i32,
):
    """Last step's reported manifolds found again at the current poses (the state was set
    by hand since: the pairs that stay without being looked at are looked at)."""
    ti.loop_config(serialize=serial)
    for j in range(n_old):
        collide_pair(model, bodies, reported, j, n_bodies, RESTING_MARGIN)


def held_entries(cache) -> int:
    """The old reported list's entries a report holds a pair by (n_held): all of them, or
    none after a state written by hand (StepCache.state_set): the list reflects the new
    poses alone."""
    return 0 if cache.state_set else cache.n_reported


def report_contacts(ctx: "StepContext", sleep: bool = False) -> bool:
    """After the substeps: the reported pairs and this step's events (module docstring);
    sets ctx.cache.n_reported, n_begin_events and n_end_events. A list that outgrows the
    pair capacity grows the pool (nothing is dropped) and is built again. `sleep`: the
    step's sleep.update_sleep may follow in the same launch (small worlds solved by world:
    _report_by_world); returns whether it did (the launch woke the CPU thread pool once
    instead of twice)."""
    cache = ctx.cache
    if ctx.report_refreshed is not None:  # a team's launch tried it (refresh_due)
        if refreshed(ctx, ctx.report_refreshed):
            return False
    elif refresh_report(ctx):
        return False
    if ctx.report_built is not None and ctx.report_built[0] <= ctx.pool.pair_capacity:
        # A team's launch built it (report_by_team), after its substeps.
        note_report(cache, *ctx.report_built)
        return False
    # After set_state the list reflects the new poses alone (no pair held by the old list).
    n_held = held_entries(cache)
    if cache.resting_recheck and cache.n_reported:
        pool = ctx.pool
        _recheck_resting(
            pool.model, pool.bodies, pool.reported, ctx.serial, cache.n_reported, ctx.n_bodies
        )
    by_world = ctx.options.report_by_world and ctx.solves_by_world and ctx.n_bodies >= 3
    while True:
        pool = ctx.pool
        if by_world:
            counts = _report_by_world(
                model=pool.model,
                bodies=pool.bodies,
                joints=pool.joints,
                manifolds=pool.manifolds,
                staging=pool.staging,
                reported=pool.reported,
                events=pool.events,
                prepared=pool.prepared,
                coloring=pool.coloring,
                scan=pool.scan,
                serial=ctx.serial,
                islands=pool.islands,
                n_worlds=ctx.n_worlds,
                n_bodies=ctx.n_bodies,
                n_old=cache.n_reported,
                n_held=n_held,
                n_pairs=ctx.n_pairs,
                n_joints=ctx.n_joints,
                sleep=int(sleep),
                dt=ctx.dt,
            )
        else:
            counts = _report_contacts(
                model=pool.model,
                bodies=pool.bodies,
                joints=pool.joints,
                manifolds=pool.manifolds,
                staging=pool.staging,
                reported=pool.reported,
                events=pool.events,
                prepared=pool.prepared,
                coloring=pool.coloring,
                scan=pool.scan,
                serial=ctx.serial,
                n_slots=ctx.n_slots,
                n_bodies=ctx.n_bodies,
                n_pairs=ctx.n_pairs,
                n_old=cache.n_reported,
                n_held=n_held,
            )
        n_new, n_begin, n_end = (int(v) for v in counts)
        if n_new <= pool.pair_capacity:
            break
        cache.pair_need = max(cache.pair_need, n_new + n_new // 4)
        ctx.pool = ctx.grow()
    note_report(cache, n_new, n_begin, n_end)
    return by_world and sleep


def note_empty_report(cache):
    """The host's part of a step that reported nothing (no pair, no event: step.
    contactless_step), as a list built empty on the device would be noted."""
    note_report(cache, 0, 0, 0)


def note_report(cache, n_new: int, n_begin: int, n_end: int):
    """The host's part of a list built on the device: its counts (reported pairs, begin and
    end events), every entry's origin its pair in this step's list or -1 (resting)."""
    cache.n_reported, cache.n_begin_events, cache.n_end_events = n_new, n_begin, n_end
    cache.report_mapped = True
    cache.state_set = cache.resting_recheck = False
