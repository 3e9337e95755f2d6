"""Step-level stages for a team's members (solver/team.py on a CPU, solver/gpu_team.py on a
GPU): each member does its share of a stage's items, and the team meets at a barrier before
the next, so the stages run inside the team's launch (fused._substeps) instead of in
launches of their own.

They serve a step whose broad phase found last step's pairs again (fused.found_step_by_team):
after begin_step's stages, the check that last step's colouring still holds
(found_coloring_holds: coloring._coloring_still_valid's), and where it holds the move to
colour order (gather_pairs: pairs._gather_pairs') and the per-body contact lists
(build_body_contacts: contacts._build_body_contacts'), then the substeps; and a kept step's
launch whose refit moved boxes saves last step's pairs (save_pairs) and finds the pairs
itself (find_pairs: broad_phase._find_pairs') before going on the same way. Each does what its
own kernel does, item by item, with integer sums only, so the results are those of the
kernels bit for bit. What it saves on a GPU: four launches and two of the host's waits for
the device a step (the check returned its answer), of the ten launches and six waits of
the awake large pyramid's step on a team (python -m benchmarks.launches).
"""

import taichi as ti

from ...device import LIST_CHUNK, LIST_KEYS, SCAN_BLOCK, SCAN_CHUNK, UNSOLVED_COLOR, scans_on_gpu
from ...device import scan as device_scan
from ...device.buckets import chunks_of, count_chunk, place_chunk
from ..collision.broad_phase import (
    file_grid_entry,
    place_body,
    visit_partners,
    write_grid_entries,
    write_slot_pairs,
)
from . import team
from .coloring import (
    check_slot,
    color_key,
    color_starts,
    colors_used,
    keep_joint_color,
    listed_color_key,
    overflow_count,
    pair_changed,
    uncolored_to_overflow,
)
from .contacts import sort_body_contacts
from .pairs import (
    ORDERED_PAIR_FIELDS,
    ORDERED_POINT_FIELDS,
    copy_pair_fields,
    place_listed_pair,
    rank_listed_pair,
    recolor_listed,
    save_pair,
)


@ti.func
def found_coloring_part(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    coloring: ti.template(),
    member,
    n_members,
    n_pairs,
    n_slots,
    n_bodies,
):
    """A member's part of coloring._coloring_still_valid (a colouring of large worlds:
    every pair's solve flag checked): (changed pairs and woken bodies, bodies marked fixed
    now) over its share of the pairs and of the body slots."""
    part = ti.Vector([0, 0])  # (changed, lowered)
    lo, hi = team.share(0, n_pairs, member, n_members)
    for k in range(lo, hi):
        if pair_changed(manifolds, previous, coloring, k, 0):
            part[0] += 1
    lo, hi = team.share(0, n_slots, member, n_members)
    for slot in range(lo, hi):
        part += ti.Vector(check_slot(model, bodies, coloring, slot, n_bodies))
    return part


@ti.func
def save_pairs(
    manifolds: ti.template(),
    previous: ti.template(),
    coloring: ti.template(),
    member,
    n_members,
    n_slots,
    n_pairs,
    ordered,
    colored,
):
    """pairs._save_previous_pairs on a team: each member copies its share of the body slots'
    pair ranges and of last step's pairs into `previous`, in the broad phase's order (pairs
    stored in colour order go back through pair_origin: `ordered`), with their colours
    where the colouring is valid (`colored`). The copies are independent: no meeting."""
    lo, hi = team.share(0, n_slots + 1, member, n_members)
    for slot in range(lo, hi):
        previous.pair_start[slot] = manifolds.pair_start[slot] if n_pairs > 0 else 0
    lo, hi = team.share(0, n_pairs, member, n_members)
    for k in range(lo, hi):
        save_pair(manifolds, previous, coloring, k, ordered, colored)


@ti.func
def gather_pairs(
    manifolds: ti.template(),
    staging: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_pairs,
):
    """pairs._gather_pairs on a team: each member moves its share of the pairs to their
    colour order (coloring.pair_origin) in `staging`, the team meets, then each copies its
    share back."""
    lo, hi = team.share(0, n_pairs, member, n_members)
    for n in range(lo, hi):
        copy_pair_fields(
            staging,
            manifolds,
            n,
            coloring.pair_origin[n],
            ORDERED_PAIR_FIELDS,
            ORDERED_POINT_FIELDS,
        )
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    for n in range(lo, hi):
        copy_pair_fields(manifolds, staging, n, n, ORDERED_PAIR_FIELDS, ORDERED_POINT_FIELDS)
    team.barrier(counts, n_members, team.SPIN_LIMIT)


@ti.func
def group_by_color(
    coloring: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    member,
    n_members,
    n_constraints,
):
    """coloring._group_by_color on a team: returns (colours used, overflow), the same for
    every member, and the same lists (each colour's in index order). The team meets first
    (the colouring's rounds end without meeting); each member counts its share of the
    chunks (device.buckets) and the team meets; the chunks' counts are scanned
    (exclusive_scan, which ends at a meeting); each member lists its chunks' constraints,
    the one that holds chunk 0 (whose counters hold the colours' starts until it lists
    them) the colours' starts first, and the team meets."""
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    n_chunks = chunks_of(n_constraints)
    lo, hi = team.share(0, n_chunks, member, n_members)
    for chunk in range(lo, hi):
        for k in range(chunk * LIST_CHUNK, ti.min(n_constraints, (chunk + 1) * LIST_CHUNK)):
            uncolored_to_overflow(coloring, k)
        count_chunk(
            color_key,
            coloring.color,
            coloring.list_counts,
            chunk,
            n_chunks,
            n_constraints,
            LIST_KEYS,
        )
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    exclusive_scan(scan, coloring.list_counts, counts, LIST_KEYS * n_chunks, member, n_members)
    if (lo == 0 and hi > 0) or (n_chunks == 0 and member == 0):
        color_starts(coloring, n_constraints)
        coloring.n_overflow_pairs[None] = 0
    for chunk in range(lo, hi):
        place_chunk(
            listed_color_key,
            coloring.color,
            coloring.list_counts,
            coloring.color_list,
            chunk,
            n_chunks,
            n_constraints,
        )
    joint_lo, joint_hi = team.share(0, n_constraints - counts.n_pairs[None], member, n_members)
    for joint_slot in range(joint_lo, joint_hi):
        keep_joint_color(coloring, counts, joint_slot)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    return ti.math.ivec2(colors_used(coloring), overflow_count(coloring))


@ti.func
def plan_color_order(
    coloring: ti.template(),
    scan: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_pairs,
    n_constraints,
):
    """pairs._plan_color_order on a team: each member ranks its share of color_list's
    entries, the team meets and scans the ranks (exclusive_scan, its blocks dealt otherwise
    than the shares; it ends with a meeting), then each member places its share's pairs at
    their new indices and gives them their colour there (an entry's steps read only that
    entry and the colours' starts), and the team meets before anything reads them."""
    lo, hi = team.share(0, n_constraints, member, n_members)
    for i in range(lo, hi):
        rank_listed_pair(coloring, i, n_pairs)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    exclusive_scan(scan, coloring.rank, counts, n_constraints, member, n_members)
    for i in range(lo, hi):
        place_listed_pair(coloring, i, n_pairs)
        recolor_listed(coloring, i)
    team.barrier(counts, n_members, team.SPIN_LIMIT)


@ti.func
def exclusive_scan(
    scan: ti.template(), data: ti.template(), counts: ti.template(), n, member, n_members
):
    """device.scan.exclusive_scan on a team: data[0:n] replaced by its exclusive prefix sum,
    the total in data[n] (_exclusive_scan)."""
    _exclusive_scan(scan, data, data, False, data, 0, False, counts, n, member, n_members)


@ti.func
def exclusive_scans(
    scan: ti.template(),
    first: ti.template(),
    n_first,
    second: ti.template(),
    n_second,
    counts: ti.template(),
    member,
    n_members,
):
    """exclusive_scan of first[0:n_first] and of second[0:n_second] at once (each total in
    the entry after its numbers): one prefix sum over both arrays' blocks, the second's
    sums less the first's total, so the team meets three times where two scans meet six.
    scan.blocks holds both arrays' blocks: ScanScratch is sized for two lists of the pair
    capacity (device.StepPool)."""
    _exclusive_scan(
        scan, first, first, False, second, n_second, True, counts, n_first, member, n_members
    )


@ti.func
def exclusive_scan_to_cursors(
    scan: ti.template(),
    data: ti.template(),
    cursors: ti.template(),
    counts: ti.template(),
    n,
    member,
    n_members,
):
    """exclusive_scan, each sum also written to cursors[i] (i < n): the cursors of a fill
    at atomic cursors that follows (a count, this scan, then each item placed at
    atomic_add(cursors[its slot], 1)), set without a loop and a team's meeting of their
    own."""
    _exclusive_scan(scan, data, cursors, True, data, 0, False, counts, n, member, n_members)


@ti.func
def _exclusive_scan(
    scan: ti.template(),
    data: ti.template(),
    cursors: ti.template(),
    copies: ti.template(),
    other: ti.template(),
    n_other,
    pairs: ti.template(),
    counts: ti.template(),
    n,
    member,
    n_members,
):
    """data[0:n] replaced by its exclusive prefix sum, the total in data[n], with `copies`
    each sum written to cursors[i] too, and with `pairs` other[0:n_other] scanned as well,
    its blocks after data's (exclusive_scans): by blocks on a CPU's team (_scan_by_block),
    a number at a time on a GPU's (_scan_by_number, device.scan's GPU passes). Integers:
    the same sums as any order gives."""
    if ti.static(scans_on_gpu()):
        _scan_by_number(
            scan, data, cursors, copies, other, n_other, pairs, counts, n, member, n_members
        )
    else:
        _scan_by_block(
            scan, data, cursors, copies, other, n_other, pairs, counts, n, member, n_members
        )


@ti.func
def _scan_by_number(
    scan: ti.template(),
    data: ti.template(),
    cursors: ti.template(),
    copies: ti.template(),
    other: ti.template(),
    n_other,
    pairs: ti.template(),
    counts: ti.template(),
    n,
    member,
    n_members,
):
    """_exclusive_scan on a GPU's team, as device.scan scans on a GPU: the members take the
    numbers in turn (member, member + n_members, ...: a warp's lanes neighbouring numbers)
    and sum the numbers before each in its block (scan.number_pass), the team meets, they
    take the block sums in turn (scan.block_pass), the team meets, and each writes its
    numbers' sums, and the team meets: three meetings, no member walking a block. other's
    blocks follow data's (pairs), its sums less data's total."""
    data_blocks = (n + SCAN_BLOCK - 1) // SCAN_BLOCK
    n_blocks = data_blocks
    if ti.static(pairs):
        n_blocks += (n_other + SCAN_BLOCK - 1) // SCAN_BLOCK
    for turn in range(team.turns(n, member, n_members)):
        device_scan.number_pass(scan, data, member + turn * n_members, n, 0)
    if ti.static(pairs):
        for turn in range(team.turns(n_other, member, n_members)):
            device_scan.number_pass(scan, other, member + turn * n_members, n_other, data_blocks)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    for turn in range(team.turns(n_blocks, member, n_members)):
        device_scan.block_pass(scan, member + turn * n_members, n_blocks)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    # data's total: the whole sum, or where other's blocks follow, the sum before them.
    total = device_scan.blocks_total(scan, n_blocks)
    data_total = total
    if ti.static(pairs):
        if data_blocks < n_blocks:
            data_total = device_scan.block_start(scan, data_blocks)
    for turn in range(team.turns(n, member, n_members)):
        i = member + turn * n_members
        running = device_scan.number_sum(scan, i, 0)
        data[i] = running
        if ti.static(copies):
            cursors[i] = running
    if ti.static(pairs):
        for turn in range(team.turns(n_other, member, n_members)):
            i = member + turn * n_members
            other[i] = device_scan.number_sum(scan, i, data_blocks) - data_total
    if member == 0:
        data[n] = data_total
        if ti.static(pairs):
            other[n_other] = total - data_total
    team.barrier(counts, n_members, team.SPIN_LIMIT)


@ti.func
def _scan_by_block(
    scan: ti.template(),
    data: ti.template(),
    cursors: ti.template(),
    copies: ti.template(),
    other: ti.template(),
    n_other,
    pairs: ti.template(),
    counts: ti.template(),
    n,
    member,
    n_members,
):
    """_exclusive_scan on a CPU's team (and wherever device.SCAN_PASSES is "cpu"): blocks
    of SCAN_BLOCK numbers dealt among the members: each sums its blocks into scan.blocks,
    and the team meets; the small team (team.small_team: a CPU team's first member, a grid
    team's first block, else the whole team) scans the block sums a chunk (SCAN_CHUNK)
    each and meets at its own barrier (a grid team's first block at its block's, not the
    grid's), then member 0 scans the chunks' totals (rather than a 1M pile's ~12,000 block
    sums), and the team meets; each writes its blocks' running sums, and the team meets:
    three meetings of the whole team."""
    data_blocks = (n + SCAN_BLOCK - 1) // SCAN_BLOCK
    n_blocks = data_blocks
    if ti.static(pairs):
        n_blocks += (n_other + SCAN_BLOCK - 1) // SCAN_BLOCK
    first, last = team.share(0, n_blocks, member, n_members)
    for blk in range(first, last):
        total = 0
        if blk < data_blocks:
            for i in range(blk * SCAN_BLOCK, ti.min(n, (blk + 1) * SCAN_BLOCK)):
                total += data[i]
        elif ti.static(pairs):
            lo = (blk - data_blocks) * SCAN_BLOCK
            for i in range(lo, ti.min(n_other, lo + SCAN_BLOCK)):
                total += other[i]
        scan.blocks[blk] = total
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    # The block sums scanned a chunk at a time by the small team, then the chunks' totals
    # by its first member.
    n_chunks = (n_blocks + SCAN_CHUNK - 1) // SCAN_CHUNK
    helpers = team.small_team(n_members)
    if member < helpers:
        chunk_lo, chunk_hi = team.share(0, n_chunks, member, helpers)
        for chunk in range(chunk_lo, chunk_hi):
            _scan_chunk(scan, chunk, n_blocks)
    if helpers < n_members:
        team.small_barrier(member, n_members)
    else:
        team.barrier(counts, n_members, team.SPIN_LIMIT)
    if member == 0:
        _scan_chunk_totals(scan, n_chunks, n_blocks)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    # data's total: the whole sum, or where other's blocks follow, the sum before them.
    data_total = scan.blocks[n_blocks]
    if ti.static(pairs):
        if data_blocks < n_blocks:
            data_total = _block_offset(scan, data_blocks)
    for blk in range(first, last):
        running = _block_offset(scan, blk)
        if blk < data_blocks:
            for i in range(blk * SCAN_BLOCK, ti.min(n, (blk + 1) * SCAN_BLOCK)):
                count = data[i]
                data[i] = running
                if ti.static(copies):
                    cursors[i] = running
                running += count
        elif ti.static(pairs):
            running -= data_total
            lo = (blk - data_blocks) * SCAN_BLOCK
            for i in range(lo, ti.min(n_other, lo + SCAN_BLOCK)):
                count = other[i]
                other[i] = running
                running += count
    if member == 0:
        data[n] = data_total
        if ti.static(pairs):
            other[n_other] = scan.blocks[n_blocks] - data_total
    team.barrier(counts, n_members, team.SPIN_LIMIT)


@ti.func
def _block_offset(scan: ti.template(), blk):
    """What the numbers before block `blk` sum to once a team's scan has scanned its block
    sums a chunk at a time."""
    return scan.blocks[blk] + scan.chunks[blk // SCAN_CHUNK]


@ti.func
def _scan_chunk(scan: ti.template(), chunk, n_blocks):
    """The block sums of `chunk` (SCAN_CHUNK of them) replaced by their exclusive prefix sum
    inside the chunk, the chunk's total in scan.chunks[chunk]."""
    end = ti.min(n_blocks, (chunk + 1) * SCAN_CHUNK)
    scan.chunks[chunk] = device_scan.scan_serially(scan.blocks, chunk * SCAN_CHUNK, end)


@ti.func
def _scan_chunk_totals(scan: ti.template(), n_chunks, n_blocks):
    """The chunks' totals replaced by their exclusive prefix sum (one thread), the whole
    total in scan.blocks[n_blocks]."""
    scan.blocks[n_blocks] = device_scan.scan_serially(scan.chunks, 0, n_chunks)


@ti.func
def build_body_contacts(
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    scan: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_slots,
    n_pairs,
):
    """contacts._build_body_contacts on a team, for pairs stored in colour order: each
    body's solved pairs, sorted by their broad-phase index (coloring.pair_origin). Counted
    with atomics, scanned (exclusive_scan), listed with atomic cursors (in whatever order
    they come) and then sorted within each body's range: the same lists."""
    slots_lo, slots_hi = team.share(0, n_slots + 1, member, n_members)
    for slot in range(slots_lo, slots_hi):
        prepared.body_contact_start[slot] = 0
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    pairs_lo, pairs_hi = team.share(0, n_pairs, member, n_members)
    for k in range(pairs_lo, pairs_hi):
        if coloring.color[k] != UNSOLVED_COLOR:  # no points all step: nothing to warm start
            ti.atomic_add(prepared.body_contact_start[manifolds.body_a[k]], 1)
            ti.atomic_add(prepared.body_contact_start[manifolds.body_b[k]], 1)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    exclusive_scan_to_cursors(
        scan,
        prepared.body_contact_start,
        prepared.body_contact_cursor,
        counts,
        n_slots,
        member,
        n_members,
    )
    slots_lo, slots_hi = team.share(0, n_slots, member, n_members)
    for k in range(pairs_lo, pairs_hi):
        if coloring.color[k] != UNSOLVED_COLOR:
            slot_a, slot_b = manifolds.body_a[k], manifolds.body_b[k]
            prepared.body_contacts[ti.atomic_add(prepared.body_contact_cursor[slot_a], 1)] = k
            prepared.body_contacts[ti.atomic_add(prepared.body_contact_cursor[slot_b], 1)] = k
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    for slot in range(slots_lo, slots_hi):
        sort_body_contacts(prepared, coloring, slot, 1)
    team.barrier(counts, n_members, team.SPIN_LIMIT)


@ti.func
def find_pairs(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    notes: ti.template(),
    member,
    n_members,
    n_worlds,
    n_bodies,
    cell_size,
    table_mask,
    margin,
    motion_time,
    note_room,
):
    """broad_phase._find_pairs on a team, for fat boxes (its `fat`): each of its loops shared
    among the members, the team meeting after each, its prefix sums by the team
    (exclusive_scan). Each body's pairs are its own and sorted by partner, so the list is
    the kernel's bit for bit whatever the members' timing. Returns (entries_needed,
    pairs_needed, lost_bodies), the same for every member; past the grid's entry capacity
    or the pair capacity nothing more is written (the host grows the pool and runs the
    broad phase again, as after the kernel)."""
    n_slots = n_worlds * n_bodies
    table_size = table_mask + 1
    lo, hi = team.share(0, n_worlds, member, n_members)
    for world in range(lo, hi):
        grid.world_level_mask[world] = 0
    lo, hi = team.share(0, table_size, member, n_members)
    for t in range(lo, hi):
        grid.grid_start[t] = 0
    if member == 0:
        counts.lost_bodies[None] = 0
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    slots_lo, slots_hi = team.share(0, n_slots, member, n_members)
    for slot in range(slots_lo, slots_hi):
        grid.entry_start[slot] = place_body(
            model, bodies, grid, counts, slot, n_bodies, cell_size, margin, motion_time, 1
        )
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    exclusive_scan(scan, grid.entry_start, counts, n_slots, member, n_members)
    entries = grid.entry_start[n_slots]
    write_slots = n_slots if entries <= grid.entry_body.shape[0] else 0
    lo, hi = team.share(0, write_slots, member, n_members)
    for slot in range(lo, hi):
        write_grid_entries(model, grid, slot, n_bodies, cell_size, table_mask)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    exclusive_scan_to_cursors(
        scan, grid.grid_start, grid.grid_cursor, counts, table_size, member, n_members
    )
    lo, hi = team.share(0, grid.entry_start[write_slots], member, n_members)
    for entry in range(lo, hi):
        file_grid_entry(grid, entry)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    lo, hi = team.share(0, write_slots, member, n_members)
    for slot in range(lo, hi):
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
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    exclusive_scan(scan, manifolds.pair_start, counts, write_slots, member, n_members)
    pairs = manifolds.pair_start[write_slots]
    fill = write_slots == n_slots and pairs <= manifolds.body_a.shape[0]
    lo, hi = team.share(0, n_slots if fill else 0, member, n_members)
    for slot in range(lo, hi):
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
    lost = counts.lost_bodies[None]  # (counted before the team's last meetings)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    if member == 0:
        counts.entries_needed[None] = entries
        counts.pairs_needed[None] = pairs
    return ti.math.ivec3(entries, pairs, lost)
