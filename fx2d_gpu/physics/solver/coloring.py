"""Graph colouring of the constraints on the device.

Constraints (contact pairs with points, fast pairs, joints) that share a dynamic body must
not be solved at the same time. In worlds of more than SMALL_COLORING_MAX_BODIES the pairs
the solver does not look at this step (no points from the step's narrow phase, not fast:
coloring.solve, step.begin_step) take no colour (UNSOLVED_COLOR), as Box2D v3 colours only
touching constraints: in a poured pile half the broad phase's pairs are apart. Smaller
worlds colour every pair (see step.begin_step). Each round gives one colour: every
uncoloured constraint bids for its dynamic bodies with an atomic minimum of its priority
(first the constraints at bodies with the most constraints left uncoloured, then a fixed
permutation of its index), and those that win all their bodies take the colour (a few
sub-rounds per colour let the losers try bodies still free). Static and sleeping
bodies do not count: they never move, so any number of constraints may read them at once.
Integer atomics only, so the colouring is the same on every run. Constraints still
uncoloured after MAX_COLORS rounds form the overflow colour, solved in parallel after the
colours (solver/overflow.py): nothing is dropped.

From one step to the next most pairs persist (a pile in motion gains and loses a few pairs a
step), so a step starts from the last step's colours (start_coloring) and only new pairs bid:
each body keeps a bit mask of the colours its constraints hold. In worlds of more than
SMALL_COLORING_MAX_BODIES bodies the colouring starts from scratch every FRESH_COLORING_STEPS
steps, so the colours do not fragment.

Small worlds (StepContext.small_worlds) are solved a world per thread, one constraint after the
other, where colours bring no parallelism: they take one colour (StepOptions.color_small_worlds
off), every constraint solved in its world's order, its pairs in the broad phase's order, then its
joints. Coloured like the general path instead (color_small_worlds on, for the tests that compare
the two paths bit for bit), they colour a world per thread (_color_worlds: the same rounds on the
world's own constraints, so the same colours), and every step: starting from last step's colours
gives what reusing them would. Either way the same launch carries last step's contacts to the
world's pairs first and plans its solve order after.
"""

from typing import TYPE_CHECKING

import taichi as ti

from ...device import LIST_KEYS, MAX_COLORS, UNSOLVED_COLOR
from ...device.buckets import chunks_of, count_by_key, key_start, place_by_key
from ...device.launching import quick
from ...device.scan import exclusive_scan
from ..bodies import awake_dynamic, is_sensor_pair
from . import gpu_team, team
from .overflow import build_jacobi_lists
from .pairs import carry_pair, plan_world_order, record_constraint_counts, world_pairs

if TYPE_CHECKING:
    from .context import StepContext

_NO_CLAIM = 2147483647
_SUB_ROUNDS = 4

# Whether small worlds (colors_by_world) colour their constraints as the general path does
# (StepOptions.color_small_worlds): off, they take one colour (one_color_by_world). A world's thread
# solves its constraints one after the other in any case (Gauss-Seidel, as Box2D v2 and Fx2D solve a
# world on one thread), so a colouring only fixed their order, that of the general path, whose
# colours run in parallel: the two paths then agree bit for bit, and the tests that compare them
# turn it on. Its cost was the colouring's rounds in the carry's launch (4,096 small worlds: the
# launch 1.18-1.26 ms against 0.41-0.65 without them, 2-core CPU) and a round for every colour in
# each of the substeps' passes: the step 0.94-0.97 of the coloured one's time without them (both
# ways in turns in one process, either solver). And a small world coloured like a hub overflowed,
# leaving the path for the general one.


@ti.func
def constraint_bodies(
    joints: ti.template(), manifolds: ti.template(), counts: ti.template(), k, n_bodies
):
    """Body slots (a, b) of constraint k: a contact pair below n_pairs, else a joint slot."""
    n_pairs, n_joints = counts.n_pairs[None], counts.n_joints[None]
    a, b = 0, 0
    if k < n_pairs:
        a, b = manifolds.body_a[k], manifolds.body_b[k]
    else:
        joint_slot = k - n_pairs
        world, joint = joint_slot // n_joints, joint_slot % n_joints
        a = world * n_bodies + joints.parent[joint]
        b = world * n_bodies + joints.child[joint]
    return a, b


#: A bid's bits below its rank (priority): a permutation of the constraint's index in its
#: world, unique for worlds of up to 2**BID_INDEX_BITS constraints. Above the rank's 4 bits
#: (the constraints left uncoloured at the bidder's bodies, RANK_MAX and more alike), the
#: sign bit stays clear.
BID_INDEX_BITS = 27
RANK_MAX = 15


@ti.func
def by_parity(slot, round_):
    """The entry of body slot in a field of two a body (body_left by colour round,
    body_claim by sub-round) for `round_`: two by its parity, so that a round reads its own
    entries while it clears and counts the next round's (no pass, nor barrier, of its own
    to clear them)."""
    return 2 * slot + (round_ & 1)


@ti.func
def priority(
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    color,
    a,
    b,
    dyn_a,
    dyn_b,
):
    """Constraint k's bid in the round of `color` (the lowest wins): first its rank, the
    fewer constraints its moving bodies a and b have left uncoloured (coloring.body_left)
    the later; then a fixed pseudo-random permutation of its index within its world.

    The rank makes this an edge colouring's largest-degree-first: a body with d
    constraints left needs d more colours, so those at the busiest bodies go first. The
    large pyramid (a box meets up to 6 others that move) took 10 colours by the
    permutation alone (its last three held 620, 42 and 1 of 14,950 constraints) and takes
    8 ranked (the last holds 298); a 30-row pyramid 9 and 8 (tests/test_solver.py). The
    rank is recounted for every round (count_left): ranked once, from the degrees at the
    start, the large pyramid took 9 in a NumPy simulation of the rule. Inside a rank, the
    permutation instead of index order breaks the long chains (box i beats box i+1 beats
    ...) that leave most neighbours of a structured scene uncoloured. Using the index
    within the world (pairs are grouped by world) makes a world's colouring the same
    whether it is simulated alone or in a batch. Multiplying by an odd number is a
    bijection modulo 2^BID_INDEX_BITS, so no two constraints of a world bid the same; a
    world of more constraints than that bids by the permutation modulo 2^31 alone (unique
    again, unranked).
    """
    n_pairs, n_joints = counts.n_pairs[None], counts.n_joints[None]
    world = a // n_bodies
    first_pair = manifolds.pair_start[world * n_bodies]
    world_pairs = manifolds.pair_start[(world + 1) * n_bodies] - first_pair
    local = k - first_pair  # the pair's index among its world's pairs
    if k >= n_pairs:  # joints come after the world's pairs
        local = world_pairs + (k - n_pairs) % n_joints
    mixed = ti.cast(local, ti.u32) * ti.u32(2654435761)
    bid = ti.cast(mixed & ti.u32(0x7FFFFFFF), ti.i32)
    if world_pairs + n_joints <= 1 << BID_INDEX_BITS:
        left = 0
        if dyn_a:
            left += coloring.body_left[by_parity(a, color)]
        if dyn_b:
            left += coloring.body_left[by_parity(b, color)]
        index_bits = ti.cast(mixed & ti.u32((1 << BID_INDEX_BITS) - 1), ti.i32)
        bid = ((RANK_MAX - ti.min(left, RANK_MAX)) << BID_INDEX_BITS) | index_bits
    return bid


@ti.func
def count_left(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    color,
):
    """Constraint k, if it has no colour, counted at its moving bodies for the round of
    `color` (coloring.body_left, cleared before: _clear_claims for the first round, the
    round before's bids for the others)."""
    if coloring.color[k] < 0:
        a, b, dyn_a, dyn_b = _bodies_of(model, bodies, joints, manifolds, counts, k, n_bodies)
        if dyn_a:
            ti.atomic_add(coloring.body_left[by_parity(a, color)], 1)
        if dyn_b:
            ti.atomic_add(coloring.body_left[by_parity(b, color)], 1)


@ti.func
def _turn_of(coloring: ti.template(), slot, color):
    """(a constraint of `color`'s turn among body slot's constraints: how many of them hold
    a lower colour, the turns it has in all). A colour holds one constraint a moving body
    at most, so body_color_mask's bits are the moving body's constraints in colour order
    (a body that moves now moved when the colouring was made: one that woke since makes a
    new one)."""
    mask = coloring.body_color_mask[slot]
    return ti.math.popcnt(mask & ((1 << color) - 1)), ti.math.popcnt(mask)


@ti.func
def chain_event(turns, substep, group):
    """A chained launch's event at a body of `turns` constraints a pass, before group
    `group` (0: its body stages before the substep's first colour pass; 1: those before
    the second) of substep `substep`: the value of coloring.body_turn at which the group's
    stages may run. A chained substep is 2 * (turns + 1) events at the body: its first
    stages, a pass's turns, its second stages, the other pass's turns (take_turns,
    StepOptions.stages_by_turns)."""
    return (substep * 2 + group) * (turns + 1)


@ti.func
def _wait_turn(coloring: ti.template(), counts: ti.template(), slot, moves, color, chain):
    """Wait until the constraints of body slot below `color` have been solved in this pass
    (coloring.body_turn counts them; see take_turns), where the constraint `moves` it;
    in a chain (`chain` = (substep, pass, last), substep >= 0), also the body's stages
    before the pass. Outside a chain the body's first (turn 0) does not read the count: it
    is 0 when a pass starts (the last pass's last constraint set it back, before the team
    met), and on a GPU each read is a round trip through the L2 cache."""
    if moves:
        turn, turns = _turn_of(coloring, slot, color)
        if chain[0] >= 0:
            turn += chain_event(turns, chain[0], chain[1]) + 1
        if turn > 0:
            _wait_for(coloring, counts, slot, turn)


@ti.func
def _wait_for(coloring: ti.template(), counts: ti.template(), slot, event):
    """Spin until coloring.body_turn[slot] reaches `event` (team.wait_while)."""
    limit = team.SPIN_LIMIT
    if ti.static(gpu_team.on_gpu()):
        limit = gpu_team.GRID_SPIN_LIMIT
    team.wait_while(counts, coloring.body_turn, slot, event, False, limit)


@ti.func
def take_turns(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    chain,
    solved: ti.template(),
):
    """Around constraint k (of colour coloring.color[k]) in a colour pass whose colours run
    without the team's barriers between them (StepOptions.colors_by_turns): before it is
    solved (`solved` False), wait until every constraint of a lower colour on each body it
    moves was solved; after (`solved` True), pass each body's turn on to its next. Each
    moving body counts its constraints solved in the pass (coloring.body_turn, 0 when the
    pass starts and back to 0 after its last); a constraint's turn on the body is the
    number of its constraints of lower colours. So every body sees its constraints in
    colour order, as with a barrier after each colour: the same solves on the same values,
    bit for bit (a body it does not move, static, asleep or a sensor's, is only read, as
    in a colour). On CUDA a fence on either side: the bodies' values travel with the turn.
    The wait ends: a constraint waits only for lower colours, so the lowest colour left
    always runs, as long as every member goes through its constraints in colour order and
    all members run at once (a team's threads; a grid team's blocks are all resident).

    A chain (StepOptions.stages_by_turns; `chain` = (substep, pass: 0 or 1, whether it is
    the chain's last pass); substep -1: none) runs a launch's substeps with no barrier
    between its stages: the body's count goes on through the substeps (chain_event), its
    body stages taking a turn between the passes (wait_for_stages, stages_taken), and goes
    back to 0 after the chain's last constraint. Every member goes through its work in the
    substeps' order (its bodies' stages, its constraints in colour order, ...), and each
    wait is for work earlier in that order, so the earliest work left always runs."""
    if ti.static(solved and gpu_team.on_cuda()):
        ti.simt.grid.memfence()  # (release: the bodies' new values before the turn passes)
    a, b, moves_a, moves_b = _bodies_of(model, bodies, joints, manifolds, counts, k, n_bodies)
    color = coloring.color[k]
    if ti.static(solved):
        _pass_turn(coloring, a, moves_a, color, chain)
        _pass_turn(coloring, b, moves_b, color, chain)
    else:
        _wait_turn(coloring, counts, a, moves_a, color, chain)
        _wait_turn(coloring, counts, b, moves_b, color, chain)
        if ti.static(gpu_team.on_cuda()):
            ti.simt.grid.memfence()  # (acquire: the bodies' values after the wait)


@ti.func
def _pass_turn(coloring: ti.template(), slot, moves, color, chain):
    """The next constraint of body slot's turn (back to 0 after its last: the next pass
    starts there; in a chain, after its last of the chain's last pass), where the
    constraint `moves` it."""
    if moves:
        turn, turns = _turn_of(coloring, slot, color)
        if turn == turns - 1 and (chain[0] < 0 or chain[2] == 1):
            count = turn  # (the count now: only this constraint may change it)
            if chain[0] >= 0:
                count += chain_event(turns, chain[0], chain[1]) + 1
            ti.atomic_sub(coloring.body_turn[slot], count)
        else:
            ti.atomic_add(coloring.body_turn[slot], 1)


@ti.func
def _chained_turns(
    model: ti.template(), bodies: ti.template(), coloring: ti.template(), slot, n_bodies
):
    """Body slot's constraints in a pass, where they take turns at it (it moves: awake
    and dynamic); 0 where none does."""
    turns = 0
    if awake_dynamic(model, bodies, slot, n_bodies):
        turns = ti.math.popcnt(coloring.body_color_mask[slot])
    return turns


@ti.func
def wait_for_stages(
    model: ti.template(),
    bodies: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    slot,
    n_bodies,
    substep,
    group,
):
    """Before body slot's stages of `group` in a chained substep (take_turns' chain):
    wait until its constraints of the pass before were solved (nothing for a body no
    constraint moves: only its own stages touch it)."""
    turns = _chained_turns(model, bodies, coloring, slot, n_bodies)
    if turns > 0:
        event = chain_event(turns, substep, group)
        if event > 0:
            _wait_for(coloring, counts, slot, event)
        if ti.static(gpu_team.on_cuda()):
            ti.simt.grid.memfence()  # (acquire, as take_turns)


@ti.func
def stages_taken(
    model: ti.template(), bodies: ti.template(), coloring: ti.template(), slot, n_bodies
):
    """After body slot's stages of a group in a chained substep: its next constraint may
    go (take_turns' chain)."""
    if _chained_turns(model, bodies, coloring, slot, n_bodies) > 0:
        if ti.static(gpu_team.on_cuda()):
            ti.simt.grid.memfence()  # (release, as take_turns)
        ti.atomic_add(coloring.body_turn[slot], 1)


@ti.func
def woke(model: ti.template(), bodies: ti.template(), coloring: ti.template(), slot, n_bodies):
    """The body moves now but was static or asleep when the colours were last made."""
    return coloring.body_colored_dynamic[slot] == 0 and awake_dynamic(model, bodies, slot, n_bodies)


@ti.func
def _count_woken(
    model: ti.template(),
    bodies: ti.template(),
    coloring: ti.template(),
    serial: ti.template(),
    n_slots,
    n_bodies,
):
    """Bodies that the colouring treated as fixed (static or asleep) and that move now
    (the colouring no longer holds if any); then the bodies that fell asleep are marked
    fixed, as start_coloring would mark them, so whether a step reused the colouring or
    kept it pair by pair, the next step sees the same flags (a world colours the same
    alone or in a batch). A colouring stays valid when bodies fall asleep: that only
    removes conflicts. Returns (woken, lowered: bodies marked fixed now). Called at the top
    level of a kernel (its loops are the kernel's)."""
    woken, lowered = 0, 0
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        slot_woke, slot_lowered = check_slot(model, bodies, coloring, slot, n_bodies)
        woken += slot_woke
        lowered += slot_lowered
    return woken, lowered


@ti.func
def check_slot(
    model: ti.template(), bodies: ti.template(), coloring: ti.template(), slot, n_bodies
):
    """_count_woken's part of one body slot: (1 if it woke, 1 if it is marked fixed now),
    the mark after the check (lowering never hides a wake-up; a slot's check reads only
    its own mark)."""
    slot_woke, slot_lowered = 0, 0
    if woke(model, bodies, coloring, slot, n_bodies):
        slot_woke = 1
    if not awake_dynamic(model, bodies, slot, n_bodies):
        if coloring.body_colored_dynamic[slot] == 1:
            slot_lowered = 1
        coloring.body_colored_dynamic[slot] = 0
    return slot_woke, slot_lowered


@ti.func
def solves_other_pairs(coloring: ti.template(), pair):
    """Whether the solver must look at a kept pair it did not colour, or no longer at one
    it did (coloring.solve, found in colour order, against the pair's colour)."""
    return (coloring.color[pair] == UNSOLVED_COLOR) != (coloring.solve[pair] == 0)


@quick
@ti.kernel
def _coloring_still_valid(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    coloring: ti.template(),
    serial: ti.template(),
    n_slots: ti.i32,
    n_pairs: ti.i32,
    n_bodies: ti.i32,
    all_pairs: ti.i32,
) -> ti.i32:
    """HOLDS when last step's colouring still holds: the broad phase found the same pairs in
    the same order (`previous` holds last step's, in broad-phase order), the solver looks
    at the same ones (coloring.solve against last step's UNSOLVED_COLOR, unless `all_pairs`
    are coloured) and no body that the colouring treated as fixed moves now
    (_count_woken); plus LOWERED where a body it treated as moving is fixed now."""
    changed = 0
    ti.loop_config(serialize=serial)
    for k in range(n_pairs):
        if pair_changed(manifolds, previous, coloring, k, all_pairs):
            changed += 1
    woken, lowered = _count_woken(model, bodies, coloring, serial, n_slots, n_bodies)
    return holds_code(changed + woken, lowered)


@ti.func
def pair_changed(
    manifolds: ti.template(), previous: ti.template(), coloring: ti.template(), k, all_pairs
):
    """Whether found pair k is not last step's pair k (`previous`, in broad-phase order), or
    the solver looks at it where it did not or no longer where it did (coloring.solve
    against last step's UNSOLVED_COLOR; not where `all_pairs` are coloured)."""
    return (
        manifolds.body_a[k] != previous.body_a[k]
        or manifolds.body_b[k] != previous.body_b[k]
        or (all_pairs == 0 and (previous.color[k] == UNSOLVED_COLOR) != (coloring.solve[k] == 0))
    )


@quick
@ti.kernel
def _coloring_holds_in_order(
    model: ti.template(),
    bodies: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    serial: ti.template(),
    n_slots: ti.i32,
    n_pairs: ti.i32,
    n_joints: ti.i32,
    n_bodies: ti.i32,
) -> ti.i32:
    """_coloring_still_valid for a step that kept last step's pairs in colour order
    (step._keep_pairs): the pairs are the same, so what is left to check is that the
    solver looks at the same ones (coloring.solve, found in colour order, against each
    pair's colour) and that no fixed body woke (the same code as _coloring_still_valid).
    Records the step's constraint counts (counts.n_pairs, counts.n_joints), as
    carry_contacts does."""
    record_constraint_counts(counts, n_pairs, n_joints)
    changed = 0
    ti.loop_config(serialize=serial)
    for n in range(n_pairs):
        if solves_other_pairs(coloring, n):
            changed += 1
    woken, lowered = _count_woken(model, bodies, coloring, serial, n_slots, n_bodies)
    return holds_code(changed + woken, lowered)


#: Bits of the colouring checks' answer (_coloring_still_valid, _coloring_holds_in_order).
HOLDS, LOWERED = 1, 2


@ti.func
def holds_code(changed, lowered):
    """HOLDS where nothing changed, plus LOWERED where a body was marked fixed."""
    code = 0
    if changed == 0:
        code = HOLDS
    if lowered > 0:
        code += LOWERED
    return code


@ti.func
def _bodies_of(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
):
    """Body slots (a, b) of constraint k and whether the constraint moves each: dynamic and
    awake, in a constraint that is not a sensor pair (a sensor pair moves nothing, so it
    takes a colour without holding one on its bodies)."""
    a, b = constraint_bodies(joints, manifolds, counts, k, n_bodies)
    dyn_a = awake_dynamic(model, bodies, a, n_bodies)
    dyn_b = awake_dynamic(model, bodies, b, n_bodies)
    if k < counts.n_pairs[None] and is_sensor_pair(model, manifolds, k, n_bodies):
        dyn_a, dyn_b = False, False
    return a, b, dyn_a, dyn_b


@ti.func
def mark_color(coloring: ti.template(), slot, dynamic, color):
    """Record that a constraint of `color` moves the body (nothing for a body it does not
    move: any number of constraints may read a fixed body)."""
    if dynamic:
        ti.atomic_or(coloring.body_color_mask[slot], 1 << color)


@ti.func
def color_free(coloring: ti.template(), slot, dynamic, color):
    return not dynamic or (coloring.body_color_mask[slot] >> color) & 1 == 0


@ti.func
def _clear_claims(coloring: ti.template(), slot):
    """A new colouring's start for body slot: no bid on it, no colour held, none of its
    constraints counted for the first round (count_left), none of its turns taken
    (take_turns)."""
    coloring.body_claim[by_parity(slot, 0)] = _NO_CLAIM
    coloring.body_claim[by_parity(slot, 1)] = _NO_CLAIM
    coloring.body_color_mask[slot] = 0
    coloring.body_left[by_parity(slot, 0)] = 0
    coloring.body_turn[slot] = 0


@ti.func
def _kept_color(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    keep,
):
    """Constraint k's colour at a new colouring's start: with `keep`, the one it had last
    step (manifolds.color, coloring.joint_color) unless it had none (overflow, unsolved) or
    one of its bodies woke since (two constraints of one colour may share a body that was
    fixed then); else -1 (it bids)."""
    n_pairs = counts.n_pairs[None]
    color = -1
    if keep:
        color = manifolds.color[k] if k < n_pairs else coloring.joint_color[k - n_pairs]
        a, b = constraint_bodies(joints, manifolds, counts, k, n_bodies)
        if (
            color >= MAX_COLORS
            or woke(model, bodies, coloring, a, n_bodies)
            or woke(model, bodies, coloring, b, n_bodies)
        ):
            color = -1
    return color


@ti.func
def _mark_kept(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
):
    """Constraint k's colour, if it kept one, marked on its dynamic bodies; returns whether
    it has none yet (it bids)."""
    color = coloring.color[k]
    if 0 <= color < MAX_COLORS:
        a, b, dyn_a, dyn_b = _bodies_of(model, bodies, joints, manifolds, counts, k, n_bodies)
        mark_color(coloring, a, dyn_a, color)
        mark_color(coloring, b, dyn_b, color)
    return color < 0


@ti.func
def _flag_colored_dynamic(
    model: ti.template(), bodies: ti.template(), coloring: ti.template(), slot, n_bodies
):
    """Whether body slot is dynamic and awake as the colouring sees it (see woke)."""
    coloring.body_colored_dynamic[slot] = 1 if awake_dynamic(model, bodies, slot, n_bodies) else 0


@quick
@ti.kernel
def _flag_bodies(
    model: ti.template(),
    bodies: ti.template(),
    coloring: ti.template(),
    serial: ti.template(),
    n_slots: ti.i32,
    n_bodies: ti.i32,
):
    """A colouring of no constraints (_color): which bodies it treats as moving
    (coloring.body_colored_dynamic, as _start_coloring flags them)."""
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        _flag_colored_dynamic(model, bodies, coloring, slot, n_bodies)


@quick
@ti.kernel
def _start_coloring(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    serial: ti.template(),
    n_slots: ti.i32,
    n_constraints: ti.i32,
    n_bodies: ti.i32,
    keep: ti.i32,
    all_pairs: ti.i32,
) -> ti.i32:
    """Clear the bids and masks; give the pairs the solver does not look at UNSOLVED_COLOR
    (none with `all_pairs`); with `keep`, give each other constraint the colour it had last
    step (manifolds.color, coloring.joint_color) unless it had none (overflow, unsolved) or
    one of its bodies woke since (two constraints of one colour may share a body that was
    fixed then). Lists the constraints left without a colour in uncolored and returns their
    count."""
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        _clear_claims(coloring, slot)
    ti.loop_config(serialize=serial)
    for k in range(n_constraints):
        _start_color(
            model, bodies, joints, manifolds, coloring, counts, k, n_bodies, keep, all_pairs
        )
    ti.loop_config(serialize=serial)
    for k in range(n_constraints):
        _mark_kept(model, bodies, joints, manifolds, coloring, counts, k, n_bodies)
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        _flag_colored_dynamic(model, bodies, coloring, slot, n_bodies)
    coloring.n_uncolored[None] = 0
    ti.loop_config(serialize=serial)
    for k in range(n_constraints):
        _list_uncolored(coloring, k)
        count_left(model, bodies, joints, manifolds, coloring, counts, k, n_bodies, 0)
    return coloring.n_uncolored[None]


@ti.func
def _start_color(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    keep,
    all_pairs,
):
    """_start_coloring's colour for constraint k: UNSOLVED_COLOR for a pair the solver does
    not look at (unless `all_pairs` are coloured), else _kept_color's."""
    color = _kept_color(model, bodies, joints, manifolds, coloring, counts, k, n_bodies, keep)
    if k < counts.n_pairs[None] and all_pairs == 0 and coloring.solve[k] == 0:
        color = UNSOLVED_COLOR
    coloring.color[k] = color


@ti.func
def _list_uncolored(coloring: ti.template(), k):
    """Constraint k added to the uncoloured list where it has no colour yet (the list's order
    is free: bids are atomic minima). At an atomic cursor: most steps start from last
    step's colours, and few constraints bid (a list by chunks, device.buckets, costs two
    passes over all of them: a 1M pile's found step on the CPU 14 -> 18 ms); a colouring
    from scratch, every FRESH_COLORING_STEPS, queues every constraint on it."""
    if coloring.color[k] < 0:
        coloring.uncolored[ti.atomic_add(coloring.n_uncolored[None], 1)] = k


@ti.func
def start_coloring_by_team(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_slots,
    n_constraints,
    n_bodies,
    keep,
    all_pairs,
):
    """_start_coloring on a team (solver/team.py): each member clears its share of the body
    slots, the team meets, then each gives its share of the constraints their start colour,
    marks the kept ones on their bodies and lists the uncoloured (a constraint's three
    steps read only its own colour, so they run in one pass), the team meets before the
    body flags change (a start colour reads them: woke), and again after. Returns the
    uncoloured count, the same for every member."""
    if member == 0:
        coloring.n_uncolored[None] = 0
    lo, hi = team.share(0, n_slots, member, n_members)
    for slot in range(lo, hi):
        _clear_claims(coloring, slot)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    k_lo, k_hi = team.share(0, n_constraints, member, n_members)
    for k in range(k_lo, k_hi):
        _start_color(
            model, bodies, joints, manifolds, coloring, counts, k, n_bodies, keep, all_pairs
        )
        _mark_kept(model, bodies, joints, manifolds, coloring, counts, k, n_bodies)
        _list_uncolored(coloring, k)
        count_left(model, bodies, joints, manifolds, coloring, counts, k, n_bodies, 0)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    for slot in range(lo, hi):
        _flag_colored_dynamic(model, bodies, coloring, slot, n_bodies)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    return coloring.n_uncolored[None]  # (after the team met: team.barrier)


@ti.func
def _bid(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    color,
    sub_round,
):
    """Sub-round step 1 for constraint k: if it has no colour, clear its bodies' counts for
    the next round (count_left adds to them after this round's last sub-round) and, if
    `color` is free on its dynamic bodies, bid for them (atomic minimum of its
    priority)."""
    if coloring.color[k] < 0:
        a, b, dyn_a, dyn_b = _bodies_of(model, bodies, joints, manifolds, counts, k, n_bodies)
        if dyn_a:
            coloring.body_left[by_parity(a, color + 1)] = 0
        if dyn_b:
            coloring.body_left[by_parity(b, color + 1)] = 0
        if color_free(coloring, a, dyn_a, color) and color_free(coloring, b, dyn_b, color):
            bid = priority(
                joints, manifolds, coloring, counts, k, n_bodies, color, a, b, dyn_a, dyn_b
            )
            if dyn_a:
                ti.atomic_min(coloring.body_claim[by_parity(a, sub_round)], bid)
            if dyn_b:
                ti.atomic_min(coloring.body_claim[by_parity(b, sub_round)], bid)


@ti.func
def _take(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    color,
    sub_round,
):
    """Sub-round step 2 for constraint k, if it has no colour: it takes `color` if it won
    all its dynamic bodies, and marks them (a body has one winner, the lowest bid on it,
    so the marks of this pass change no other constraint's take); it clears its bodies'
    claims for the next sub-round; after the round's last sub-round, still without a
    colour, it counts itself at its bodies for the next round (count_left)."""
    if coloring.color[k] < 0:
        a, b, dyn_a, dyn_b = _bodies_of(model, bodies, joints, manifolds, counts, k, n_bodies)
        bid = priority(joints, manifolds, coloring, counts, k, n_bodies, color, a, b, dyn_a, dyn_b)
        won_a = not dyn_a or coloring.body_claim[by_parity(a, sub_round)] == bid
        won_b = not dyn_b or coloring.body_claim[by_parity(b, sub_round)] == bid
        if won_a and won_b:
            coloring.color[k] = color
            mark_color(coloring, a, dyn_a, color)
            mark_color(coloring, b, dyn_b, color)
        if dyn_a:
            coloring.body_claim[by_parity(a, sub_round + 1)] = _NO_CLAIM
        if dyn_b:
            coloring.body_claim[by_parity(b, sub_round + 1)] = _NO_CLAIM
        if sub_round == _SUB_ROUNDS - 1:
            count_left(model, bodies, joints, manifolds, coloring, counts, k, n_bodies, color + 1)


@quick
@ti.kernel
def _color_round(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    serial: ti.template(),
    n_uncolored: ti.i32,
    n_bodies: ti.i32,
    color: ti.i32,
) -> ti.i32:
    """Give `color` to a maximal-ish set of uncoloured constraints sharing no dynamic body
    with each other or with a constraint that has it already (_SUB_ROUNDS of _bid and
    _take, each a loop); returns how many constraints are still uncoloured. Only the
    constraints in uncolored[:n_uncolored] take part (the others have their colour).
    """
    for sub_round in ti.static(range(_SUB_ROUNDS)):
        ti.loop_config(serialize=serial)
        for i in range(n_uncolored):
            k = coloring.uncolored[i]
            _bid(model, bodies, joints, manifolds, coloring, counts, k, n_bodies, color, sub_round)
        ti.loop_config(serialize=serial)
        for i in range(n_uncolored):
            k = coloring.uncolored[i]
            _take(model, bodies, joints, manifolds, coloring, counts, k, n_bodies, color, sub_round)
    remaining = 0
    ti.loop_config(serialize=serial)
    for i in range(n_uncolored):
        if coloring.color[coloring.uncolored[i]] < 0:
            remaining += 1
    return remaining


@quick
@ti.kernel
def _color_rounds_by_team(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    n_uncolored: ti.i32,
    n_bodies: ti.i32,
    n_members: ti.i32,
):
    """Every round of _color_round, colour after colour until none is left uncoloured, in
    one launch on a CPU team of n_members threads (solver/team.py): each loop of a round
    split between the threads, a barrier after it (color_rounds_by_team; few uncoloured
    constraints, its first member alone). The same loops in the same order: the same
    colours. The rounds' counts of constraints left go to coloring.round_left, every
    member reads the round's total after a barrier, so all stop after the same round.

    After each take a member packs the constraints of its share still without a
    colour to the front of the share (in their order) and takes only those into the next:
    a round then visits what is left, not every constraint that started without a colour
    (bids are atomic minima and marks atomic ors, so the order they come in decides
    nothing; the same colours). A large pyramid's colouring from scratch (15k pairs, 10
    colours, 2-core CPU): its rounds 8.8 -> 4.7 ms."""
    stride = team.items_per_member(n_members)
    if ti.static(gpu_team.on_gpu()):
        ti.loop_config(block_dim=gpu_team.BLOCK_THREADS)  # a block, or a grid team's blocks
    for item in range(n_members * stride):
        member = team.member_of(item, stride)
        if member >= 0:
            color_rounds_by_team(
                model,
                bodies,
                joints,
                manifolds,
                coloring,
                counts,
                member,
                n_members,
                n_uncolored,
                n_bodies,
            )


@ti.func
def color_rounds_by_team(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_uncolored,
    n_bodies,
):
    """_color_rounds_by_team's rounds for one member of the team (its kernel's, or a team
    launch that colours the step's constraints itself: fused.found_step_by_team), or of
    its small team where few constraints are uncoloured (team.small_rounds: the others
    return at once). Returns without meeting the team after the last round: a caller
    meets it before any member reads the colours (the colour lists' first barrier,
    team_stages.group_by_color; a kernel's end)."""
    members = n_members
    if team.small_rounds(n_uncolored, n_members):
        members = team.small_team(n_members)
    if member < members:
        _color_rounds(
            model,
            bodies,
            joints,
            manifolds,
            coloring,
            counts,
            member,
            members,
            n_members,
            n_uncolored,
            n_bodies,
        )


@ti.func
def _color_rounds(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    member,
    members,
    n_members,
    n_uncolored,
    n_bodies,
):
    """color_rounds_by_team's rounds for one of the `members` first members of a team of
    n_members; every one of them returns after the same round. They meet after each
    sub-round's bids and after its takes (two barriers a sub-round: _take clears the next
    sub-round's claims and marks the winners itself). Whether the last round left anything
    uncoloured is read after the next round's first bids, which then had nothing to bid:
    no barrier of its own."""
    lo, hi = team.share(0, n_uncolored, member, members)
    if member == 0:
        for color in range(MAX_COLORS):
            coloring.round_left[color] = 0
    team.meet(counts, member, n_members, members < n_members)
    done = 0
    for color in range(MAX_COLORS):
        # A loop, not an unrolled one: unrolled, the kernel's machine code took
        # ~0.35 s more to build in every new process, offline cache or not.
        for sub_round in range(_SUB_ROUNDS):
            for i in range(lo, hi):
                k = coloring.uncolored[i]
                _bid(
                    model,
                    bodies,
                    joints,
                    manifolds,
                    coloring,
                    counts,
                    k,
                    n_bodies,
                    color,
                    sub_round,
                )
            team.meet(counts, member, n_members, members < n_members)
            if sub_round == 0 and color > 0:
                # After the whole team met, a plain read (team.barrier); after the small
                # team's block barrier, which fences nothing, an atomic one (few members).
                left_before = 0
                if members < n_members:
                    left_before = ti.atomic_add(coloring.round_left[color - 1], 0)
                else:
                    left_before = coloring.round_left[color - 1]
                if left_before == 0:
                    done = 1  # everything has a colour: the remaining rounds would do nothing
                    break
            left = 0
            for i in range(lo, hi):  # packed in place: a member's share is its own
                k = coloring.uncolored[i]
                _take(
                    model,
                    bodies,
                    joints,
                    manifolds,
                    coloring,
                    counts,
                    k,
                    n_bodies,
                    color,
                    sub_round,
                )
                if coloring.color[k] < 0:
                    coloring.uncolored[lo + left] = k
                    left += 1
            hi = lo + left
            if sub_round == _SUB_ROUNDS - 1 and left > 0:  # (a grid team's most are 0)
                ti.atomic_add(coloring.round_left[color], left)
            team.meet(counts, member, n_members, members < n_members)
        if done == 1:
            break


@ti.func
def _world_constraint(first_pair, end_pair, first_joint, i):
    """A small world's constraint i: its pairs [first_pair, end_pair), then its joint slots
    from first_joint."""
    n_world_pairs = end_pair - first_pair
    return first_pair + i if i < n_world_pairs else first_joint + i - n_world_pairs


@quick
@ti.kernel
def _color_worlds(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    serial: ti.template(),
    scan: ti.template(),
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    n_pairs: ti.i32,
    n_joints: ti.i32,
    keep: ti.i32,
    carry: ti.i32,
    one_color: ti.i32,
) -> ti.math.ivec2:
    """_start_coloring and the rounds of _color_round for small worlds, a world per thread
    (StepContext.small_worlds: their pairs lie world by world, in their bodies' pair_start
    ranges, and every pair takes a colour): the same steps on the world's constraints, in
    the same order, so the same colours (bids and claims are a world's own: its bodies and
    constraints are no other world's). No list of the uncoloured: a constraint coloured
    before the round makes no bid and takes nothing (its bodies' claims, if any, are its
    bidding neighbours', which clear them). One loop instead of _start_coloring's five loops
    and a launch (or a team's barriers) for each of every sub-round's two; then the
    colour lists (_group_by_color). Returns (colours used, overflow). `one_color`
    (one_color_by_world): every constraint takes colour 0 instead.

    `carry` (a step's colouring, step.find_pairs): the launch is the step's whole way from
    the broad phase's pairs to the solve: each world's thread first carries last step's
    contacts to its pairs (pairs.carry_contacts; the counts recorded), then colours them
    and plans its solve order (pairs.store_in_color_order: _plan_world_order, used only
    where nothing overflows). Each of those launches woke the CPU thread pool (~65 us on the
    2-core CPU VM) and read the world's pairs from memory again: 4,096 small worlds went from
    four launches to one."""
    return color_worlds(
        model,
        bodies,
        joints,
        manifolds,
        previous,
        prepared,
        coloring,
        counts,
        serial,
        scan,
        n_worlds,
        n_bodies,
        n_pairs,
        n_joints,
        keep,
        carry,
        one_color,
        1,
        1,
    )


@ti.func
def color_worlds(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    serial: ti.template(),
    scan: ti.template(),
    n_worlds,
    n_bodies,
    n_pairs,
    n_joints,
    keep,
    carry,
    one_color,
    go,
    lists,
):
    """_color_worlds's loops (its answer), for a kernel of its own or the small worlds'
    step in one launch (fused.step_by_world); `go` 0: nothing is coloured or recorded (that
    launch's broad phase found more pairs than the pool holds; the colour lists' counts are
    cleared, scratch), and the answer means nothing; `lists` 0 as well: the colour lists
    are left as they are (a launch of steps in flight after one that stopped: the host
    finishes that one from its lists). Called at a kernel's top level: its loops are the
    kernel's."""
    if carry == 1 and go == 1:
        record_constraint_counts(counts, n_pairs, n_joints)
    ti.loop_config(serialize=serial)
    for world in range(n_worlds * go):
        first_pair, end_pair = world_pairs(manifolds, world, n_bodies, n_pairs)
        if carry == 1:
            for k in range(first_pair, end_pair):
                carry_pair(manifolds, previous, k)
        first_joint = n_pairs + world * n_joints
        if one_color == 1:
            for i in range(end_pair - first_pair + n_joints):
                coloring.color[_world_constraint(first_pair, end_pair, first_joint, i)] = 0
        else:
            _color_world(
                model,
                bodies,
                joints,
                manifolds,
                coloring,
                counts,
                world,
                n_bodies,
                first_pair,
                end_pair,
                first_joint,
                n_joints,
                keep,
            )
        if carry == 1:
            # Its own colours stand for the scene's: the order is the same (no pair of it
            # has a colour between its highest and the scene's).
            plan_world_order(
                manifolds,
                prepared,
                coloring,
                world,
                n_bodies,
                first_pair,
                end_pair,
                _colors_of_world(coloring, first_pair, end_pair),
            )
    return _group_by_color(
        coloring, counts, scan, serial, (n_pairs + n_worlds * n_joints) * go, lists
    )


@ti.func
def _color_world(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    world,
    n_bodies,
    first_pair,
    end_pair,
    first_joint,
    n_joints,
    keep,
):
    """_color_worlds's colouring of one world: its pairs [first_pair, end_pair), then its
    joint slots from first_joint."""
    first_slot, end_slot = world * n_bodies, (world + 1) * n_bodies
    n_world = end_pair - first_pair + n_joints  # its pairs, then its joint slots
    for slot in range(first_slot, end_slot):
        _clear_claims(coloring, slot)
    for i in range(n_world):
        k = _world_constraint(first_pair, end_pair, first_joint, i)
        coloring.color[k] = _kept_color(
            model, bodies, joints, manifolds, coloring, counts, k, n_bodies, keep
        )
    left = 0
    for i in range(n_world):
        k = _world_constraint(first_pair, end_pair, first_joint, i)
        if _mark_kept(model, bodies, joints, manifolds, coloring, counts, k, n_bodies):
            left += 1
        count_left(model, bodies, joints, manifolds, coloring, counts, k, n_bodies, 0)
    for slot in range(first_slot, end_slot):
        _flag_colored_dynamic(model, bodies, coloring, slot, n_bodies)
    color = 0
    while left > 0 and color < MAX_COLORS:
        for sub_round in range(_SUB_ROUNDS):
            for i in range(n_world):
                k = _world_constraint(first_pair, end_pair, first_joint, i)
                _bid(
                    model,
                    bodies,
                    joints,
                    manifolds,
                    coloring,
                    counts,
                    k,
                    n_bodies,
                    color,
                    sub_round,
                )
            for i in range(n_world):
                k = _world_constraint(first_pair, end_pair, first_joint, i)
                _take(
                    model,
                    bodies,
                    joints,
                    manifolds,
                    coloring,
                    counts,
                    k,
                    n_bodies,
                    color,
                    sub_round,
                )
        left = 0
        for i in range(n_world):
            if coloring.color[_world_constraint(first_pair, end_pair, first_joint, i)] < 0:
                left += 1
        color += 1


@ti.func
def _colors_of_world(coloring: ti.template(), first_pair, end_pair):
    """One more than the highest colour of a world's pairs [first_pair, end_pair) below
    MAX_COLORS (0 if none)."""
    top = 0
    for k in range(first_pair, end_pair):
        color = coloring.color[k]
        if 0 <= color < MAX_COLORS:
            top = ti.max(top, color + 1)
    return top


@quick
@ti.kernel
def _build_color_lists(
    coloring: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    n_constraints: ti.i32,
) -> ti.math.ivec2:
    """_group_by_color's launch."""
    return _group_by_color(coloring, counts, scan, serial, n_constraints, 1)


@ti.func
def _group_by_color(
    coloring: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    n_constraints,
    run,
):
    """Group constraint indices by colour into color_list, each colour's in index order,
    the unsolved pairs last (the overflow colour's range is left for _order_overflow);
    returns (colours used, overflow). `run` 0 (and no constraints): nothing changes (and
    the answer means nothing). Counted and listed a chunk of constraints a thread
    (device.buckets), with no cursor every constraint's thread adds to: the same lists on
    every backend. Called at a kernel's top level: its loops are the kernel's."""
    ti.loop_config(serialize=serial)
    for k in range(n_constraints):
        uncolored_to_overflow(coloring, k)
    count_by_key(color_key, coloring.color, coloring.list_counts, n_constraints, LIST_KEYS, serial)
    exclusive_scan(scan, coloring.list_counts, LIST_KEYS * chunks_of(n_constraints), serial)
    used = 0
    ti.loop_config(serialize=True)  # one item: on the launching thread (device/scan.py)
    for _ in range(run):
        used = color_starts(coloring, n_constraints)
    # Inside a colour the order is free (its pairs touch disjoint bodies), but not in the
    # overflow colour (_order_overflow).
    place_by_key(
        listed_color_key,
        coloring.color,
        coloring.list_counts,
        coloring.color_list,
        n_constraints,
        serial,
    )
    ti.loop_config(serialize=serial)
    for joint_slot in range((n_constraints - counts.n_pairs[None]) * run):  # for the next step
        keep_joint_color(coloring, counts, joint_slot)
    overflow = 0
    if run == 1:
        coloring.n_overflow_pairs[None] = 0
        overflow = overflow_count(coloring)
    return ti.math.ivec2(used, overflow)


@ti.func
def color_key(color: ti.template(), k):
    """Constraint k's key in the colour lists: its colour (the overflow colour's and
    UNSOLVED_COLOR's counted too)."""
    return color[k]


@ti.func
def listed_color_key(color: ti.template(), k):
    """color_key where the constraint is listed now: not in the overflow colour, whose
    range _order_overflow fills."""
    return color[k] if color[k] != MAX_COLORS else -1


@ti.func
def color_starts(coloring: ti.template(), n_constraints):
    """color_start from the colour lists' counts, once scanned (device.buckets.key_start);
    returns the colours used. Serially: a few dozen colours."""
    for c in range(LIST_KEYS):
        coloring.color_start[c] = key_start(coloring.list_counts, c, n_constraints)
    coloring.color_start[LIST_KEYS] = coloring.list_counts[LIST_KEYS * chunks_of(n_constraints)]
    return colors_used(coloring)


@ti.func
def colors_used(coloring: ti.template()):
    """One more than the highest colour with a constraint (below the overflow colour), from
    color_start."""
    used = 0
    for c in range(MAX_COLORS):
        if coloring.color_start[c + 1] > coloring.color_start[c]:
            used = c + 1
    return used


@ti.func
def uncolored_to_overflow(coloring: ti.template(), k):
    """Constraint k, if the rounds left it without a colour, in the overflow colour."""
    if coloring.color[k] < 0:
        coloring.color[k] = MAX_COLORS


@ti.func
def keep_joint_color(coloring: ti.template(), counts: ti.template(), joint_slot):
    """A joint slot's colour kept for the next step's colouring to start from."""
    coloring.joint_color[joint_slot] = coloring.color[counts.n_pairs[None] + joint_slot]


@ti.func
def overflow_count(coloring: ti.template()):
    """Constraints in the overflow colour (after color_starts)."""
    return coloring.color_start[MAX_COLORS + 1] - coloring.color_start[MAX_COLORS]


@quick
@ti.kernel
def _order_overflow(
    coloring: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    n_constraints: ti.i32,
):
    """The overflow colour's range of color_list (after _build_color_lists, where it has
    any constraint): in index order (pairs first, then joint slots; n_overflow_pairs of them
    are pairs), since its entries are numbered by it (solver/overflow.py) and its joints are
    solved in it. A kernel of its own: its scan over every constraint was a third of
    _build_color_lists's time (4,096 small worlds), and most colourings overflow nothing."""
    ti.loop_config(serialize=serial)
    for k in range(n_constraints):
        coloring.rank[k] = 1 if coloring.color[k] == MAX_COLORS else 0
    exclusive_scan(scan, coloring.rank, n_constraints, serial)
    ti.loop_config(serialize=serial)
    for k in range(n_constraints):
        if coloring.color[k] == MAX_COLORS:
            coloring.color_list[coloring.color_start[MAX_COLORS] + coloring.rank[k]] = k
    coloring.n_overflow_pairs[None] = coloring.rank[ti.min(counts.n_pairs[None], n_constraints)]


def one_color_by_world(ctx: "StepContext") -> bool:
    """Whether ctx's worlds take one colour (colors_by_world without
    StepOptions.color_small_worlds): every constraint colour 0, so they are solved a world
    per thread, a profiled step's passes too (staged.colour_pass)."""
    return colors_by_world(ctx) and not ctx.options.color_small_worlds


def colors_by_world(ctx: "StepContext") -> bool:
    """Whether ctx's worlds colour a world per thread (_color_worlds): small worlds, whose
    pairs lie world by world. They colour every step, starting from last step's colours
    (the answer the reused colouring would give: every pair keeps its colour where none of
    its bodies woke), so their solve order (pairs.store_in_color_order) is always this
    step's."""
    return ctx.small_worlds and ctx.small_coloring


def keeps_colors(ctx: "StepContext") -> bool:
    """Whether a new colouring may start from last step's colours (see color_constraints)."""
    cache = ctx.cache
    return cache.coloring_valid and (ctx.small_coloring or not _fresh_coloring_due(cache))


def _fresh_coloring_due(cache) -> bool:
    """A colouring from scratch is due (FRESH_COLORING_STEPS; worlds of more than
    SMALL_COLORING_MAX_BODIES bodies)."""
    return cache.steps_since_fresh_coloring >= FRESH_COLORING_STEPS


def may_reuse_coloring(ctx: "StepContext") -> bool:
    """What the host knows of whether last step's colouring may be reused: it may be kept
    (keeps_colors) or it is the one a colouring from scratch would give
    (StepCache.colors_fresh), it coloured as many pairs as the step has, and nothing
    overflowed. The device checks the rest (_coloring_still_valid)."""
    cache = ctx.cache
    return (
        cache.coloring_valid
        and (keeps_colors(ctx) or (ctx.options.keep_fresh_coloring and cache.colors_fresh))
        and ctx.n_pairs == cache.colored_pairs
        and cache.n_overflow == 0
    )


def verdict_holds(ctx: "StepContext", code: int) -> bool:
    """Whether the device's answer (_coloring_still_valid, _coloring_holds_in_order) says
    the colouring holds; a body it counted moving and now fixed (LOWERED) makes it no
    longer the one a colouring from scratch would give (StepCache.colors_fresh)."""
    if code & LOWERED:
        ctx.cache.colors_fresh = False
    return bool(code & HOLDS)


def coloring_holds_in_order(ctx: "StepContext") -> bool:
    """For a step that kept last step's pairs in colour order (step._keep_pairs, where
    may_reuse_coloring): whether last step's colouring still holds
    (_coloring_holds_in_order)."""
    pool = ctx.pool
    return verdict_holds(
        ctx,
        _coloring_holds_in_order(
            model=pool.model,
            bodies=pool.bodies,
            coloring=pool.coloring,
            counts=pool.counts,
            serial=ctx.serial,
            n_slots=ctx.n_slots,
            n_pairs=ctx.n_pairs,
            n_joints=ctx.n_joints,
            n_bodies=ctx.n_bodies,
        ),
    )


def color_constraints(ctx: "StepContext", holds: bool | None = None, carry: bool = False) -> bool:
    """Colour the step's constraints (after pairs.carry_contacts), or keep last step's
    colouring; returns whether it coloured. `holds`: whether last step's colouring still
    holds, where the caller checked it (coloring_holds_in_order); None: checked here.
    `carry` (worlds coloured one per thread, colors_by_world): its launch carries last
    step's contacts first and plans the worlds' solve order after (_color_worlds), so
    neither pairs.carry_contacts nor pairs.store_in_color_order's plan runs.

    The last colouring is kept while the broad phase finds the same pairs, no fixed body
    started to move and nothing overflowed (a pile at rest keeps its pairs for many steps).
    Otherwise the constraints are coloured again, starting from last step's colours pair by
    pair when that colouring is valid (carry_contacts found them; the pool still holds its
    joint colours and body flags) and, in worlds of more than SMALL_COLORING_MAX_BODIES
    bodies, the last colouring from scratch is fewer than FRESH_COLORING_STEPS steps old.
    When one is due and the last colouring still holds and is the one it would give
    (StepCache.colors_fresh), it is kept and counts as one. Sets ctx.cache's n_colors
    (parallel colours used) and n_overflow (constraints in the overflow colour).
    """
    pool, cache, serial = ctx.pool, ctx.cache, ctx.serial
    if holds is None:
        holds = (
            not colors_by_world(ctx)
            and may_reuse_coloring(ctx)
            and verdict_holds(
                ctx,
                _coloring_still_valid(
                    model=pool.model,
                    bodies=pool.bodies,
                    manifolds=pool.manifolds,
                    previous=pool.previous,
                    coloring=pool.coloring,
                    serial=serial,
                    n_slots=ctx.n_slots,
                    n_pairs=ctx.n_pairs,
                    n_bodies=ctx.n_bodies,
                    all_pairs=int(ctx.small_coloring),
                ),
            )
        )
    if holds:
        if not ctx.small_coloring and _fresh_coloring_due(cache):
            # colors_fresh (may_reuse_coloring): a colouring from scratch would give these
            # colours again. Counted as one, so that a world's colourings from scratch come
            # at the same steps alone and in a batch (where another world's may not hold).
            cache.steps_since_fresh_coloring = 0
    else:
        keep = keeps_colors(ctx)
        _note_coloring(ctx, keep, *_color(ctx, keep=keep, carry=carry))
    cache.steps_since_fresh_coloring += 1
    cache.coloring_valid, cache.colored_pairs = True, ctx.n_pairs
    return not holds


def _note_coloring(ctx: "StepContext", keep: bool, used: int, overflow: int):
    """The host's side of a new colouring (`keep`: it started from last step's colours) that
    used `used` colours and left `overflow` constraints to the overflow colour."""
    cache = ctx.cache
    cache.n_colors, cache.n_overflow = used, overflow
    cache.colorings += 1
    # Started from last step's colours, the new pairs took what was left (fragments);
    # from scratch, these are the colours it gives.
    cache.colors_fresh = not keep
    if not keep:
        cache.scratch_colorings += 1
        cache.steps_since_fresh_coloring = 0


def colored_in_launch(ctx: "StepContext", keep: bool, used: int, overflow: int) -> bool:
    """color_constraints(carry=True) for small worlds whose step's one launch coloured them
    (fused.step_by_world: _color_worlds's loops, `keep` as keeps_colors said before it):
    where it overflowed, the overflow colour's order and Jacobi lists (their own launches,
    as _color runs them), and the host's side of the colouring; returns True (it
    coloured)."""
    if overflow:
        _order_overflow_lists(ctx)
    _note_coloring(ctx, keep, used, overflow)
    cache = ctx.cache
    cache.steps_since_fresh_coloring += 1
    cache.coloring_valid, cache.colored_pairs = True, ctx.n_pairs
    return True


#: Steps after which the constraints are coloured from scratch again. Starting from last
#: step's colours is cheap (only new pairs bid) but fragments: pairs that come later take
#: whatever colour their bodies leave free, and a poured 10k pile kept 17 colours where a
#: colouring from scratch needs 9 (each colour is a loop of every solver pass, and on a GPU
#: a launch per 2 colours). Measured on the 2-core CPU: the same ms/step with 32 and with
#: no fresh colouring (pile_10k and the awake large pyramid, within +-10 % noise). Counted
#: in steps, which a world has the same alone or in a batch, so a world's colouring stays
#: independent of the batch.
FRESH_COLORING_STEPS = 32
# A colouring from scratch that falls due keeps the colouring where it holds and is the one
# it would give (StepCache.colors_fresh; StepOptions.keep_fresh_coloring, which tests turn
# off to compare). A settled pile kept its colouring for good and still made one from
# scratch every 32 steps: a step of 17-19 ms against 6-7 in the large pyramid (soft step,
# 2-core CPU), 53 ms against 24 in many pyramids.


def _color(ctx: "StepContext", keep: bool, carry: bool = False) -> tuple[int, int]:
    """(parallel colours used, constraints in the overflow) of a new colouring (`carry`: as
    color_constraints')."""
    n_constraints = ctx.n_constraints
    pool, serial = ctx.pool, ctx.serial
    if n_constraints == 0 and not carry:  # (carrying, the launch still plans: no pairs)
        # Nothing to colour, but the bodies it treats as moving are this colouring's too:
        # the next step's check (woke) reads them, not what an earlier scene left in the pool.
        _flag_bodies(pool.model, pool.bodies, pool.coloring, serial, ctx.n_slots, ctx.n_bodies)
        return 0, 0
    if colors_by_world(ctx):
        used, overflow = _color_worlds(
            pool.model,
            pool.bodies,
            pool.joints,
            pool.manifolds,
            pool.previous,
            pool.prepared,
            pool.coloring,
            pool.counts,
            serial,
            pool.scan,
            ctx.n_worlds,
            ctx.n_bodies,
            ctx.n_pairs,
            ctx.n_joints,
            int(keep),
            int(carry),
            int(one_color_by_world(ctx)),
        )
    else:
        assert not carry, "only worlds coloured one per thread carry in the colouring"
        groups = (
            pool.model,
            pool.bodies,
            pool.joints,
            pool.manifolds,
            pool.coloring,
            pool.counts,
            serial,
        )
        uncolored = _start_coloring(
            *groups, ctx.n_slots, n_constraints, ctx.n_bodies, int(keep), int(ctx.small_coloring)
        )
        threads = team.threads_in_step(ctx)
        if uncolored and threads:
            _color_rounds_by_team(*groups[:-1], uncolored, ctx.n_bodies, threads)
        else:
            for color in range(MAX_COLORS if uncolored else 0):
                if _color_round(*groups, uncolored, ctx.n_bodies, color) == 0:
                    break  # everything has a colour: the remaining rounds would do nothing
        used, overflow = _build_color_lists(
            pool.coloring, pool.counts, pool.scan, serial, n_constraints
        )
    if overflow:
        _order_overflow_lists(ctx)
    return int(used), int(overflow)


def _order_overflow_lists(ctx: "StepContext"):
    """After a colouring that overflowed: the overflow colour's range in index order
    (_order_overflow) and its bodies' Jacobi lists (overflow.build_jacobi_lists)."""
    pool = ctx.pool
    _order_overflow(pool.coloring, pool.counts, pool.scan, ctx.serial, ctx.n_constraints)
    build_jacobi_lists(ctx)
