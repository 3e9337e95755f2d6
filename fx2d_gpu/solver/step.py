"""The XPBD substep pipeline (seed 003), as device kernels.

Per step:   keep last step's contacts -> broad phase (AABBs grown by the step's motion)
            -> carry impulses and colours to the new pairs, wake bodies hit by new contacts
            -> colour the constraints (or keep last step's colouring) -> store the pairs in
            colour order
Per substep: motors, integrate velocities -> refresh contacts (narrow phase: every pair on
            the first substep, fast pairs on every substep) -> warm start -> integrate
            positions (one kernel) -> penetration and joint constraints (COLORS_PER_LAUNCH
            colours per kernel) -> derive velocities -> velocity pass
Per step:   sleep by islands (sleep.py).
"""

import taichi as ti

from ..collision.broad_phase import bounding_radius
from ..collision.narrow_phase import collide_pair
from ..device import MAX_COLORS, MAX_MANIFOLD_POINTS
from ..integrate import (
    begin_step_pose,
    integrate_position,
    integrate_velocity,
    moves,
)
from ..launching import quick
from ..math2d import exclusive_scan
from .contacts import (
    FAST_MOTION_FRACTION,
    SPECULATIVE_SLOPS,
    STICK_SPEED,
    mixed_friction,
    prepare_pair,
    prepare_point,
    relative_velocity,
    resolve_penetration,
    solve_velocity,
    warm_start_body,
)
from .joints import motor_load, solve_joint, update_motor

vec2 = ti.math.vec2



_PAIR_FIELDS = ("contact_point_count", "contact_normal")
_POINT_FIELDS = ("contact_point", "contact_feature", "contact_normal_impulse",
                 "contact_tangent_impulse")


@ti.func
def copy_manifold(p: ti.template(), to: ti.template(), from_: ti.template(), dst, src):
    """Copy the manifold kept for warm starting between the current fields and the previous
    step's (`to` / `from_`: field-name prefixes, "" or "prev_")."""
    for name in ti.static(_PAIR_FIELDS):
        ti.static(getattr(p, to + name))[dst] = ti.static(getattr(p, from_ + name))[src]
    for name in ti.static(_POINT_FIELDS):
        for i in ti.static(range(MAX_MANIFOLD_POINTS)):
            ti.static(getattr(p, to + name))[dst, i] = ti.static(getattr(p, from_ + name))[src, i]


@quick
@ti.kernel
def save_previous_pairs(p: ti.template(), n_slots: ti.i32, n_pairs: ti.i32, ordered: ti.i32,
                        colored: ti.i32):
    """Copy this step's pairs and manifolds aside, in the broad phase's order (`ordered`: the
    pairs were reordered by colour, pair_origin maps them back), to be matched after the
    next broad phase; with their colours if `colored` (pair_color holds this step's)."""
    ti.loop_config(serialize=p.serial)
    for slot in range(n_slots + 1):
        p.prev_body_pair_start[slot] = p.body_pair_start[slot] if n_pairs > 0 else 0
    ti.loop_config(serialize=p.serial)
    for k in range(n_pairs):
        j = p.pair_origin[k] if ordered else k
        p.prev_pair_body_a[j] = p.pair_body_a[k]
        p.prev_pair_body_b[j] = p.pair_body_b[k]
        p.prev_pair_color[j] = p.pair_color[k] if colored else -1
        copy_manifold(p, "prev_", "", j, k)


@quick
@ti.kernel
def order_pairs_by_color(p: ti.template(), n_pairs: ti.i32, n_constraints: ti.i32):
    """Plan storing the pairs in colour order: pair_origin[n] = the broad-phase index of the
    pair to be stored at n; color_list and pair_color are rewritten for the new indices.
    gather_pairs then moves them."""
    ti.loop_config(serialize=p.serial)
    for i in range(n_constraints):
        p.constraint_rank[i] = 1 if p.color_list[i] < n_pairs else 0
    exclusive_scan(p.scan_blocks, p.constraint_rank, n_constraints, p.serial)
    ti.loop_config(serialize=p.serial)
    for i in range(n_constraints):
        k = p.color_list[i]
        if k < n_pairs:
            n = p.constraint_rank[i]
            p.pair_origin[n] = k
            p.color_list[i] = n
    ti.loop_config(serialize=p.serial)
    for i in range(n_constraints):
        color = 0
        while p.color_start[color + 1] <= i:
            color += 1
        p.pair_color[p.color_list[i]] = color


@quick
@ti.kernel
def gather_pairs(p: ti.template(), n_pairs: ti.i32):
    """Store the pairs in colour order (after carry_contacts, before the first refresh), so
    each colour's solve reads its contacts from consecutive memory instead of scattered
    across the pair arrays (on the CPU this made the solver passes ~30% faster).

    The previous step's arrays (prev_*), no longer needed once the impulses were carried,
    hold the reordered copy on the way.
    """
    ti.loop_config(serialize=p.serial)
    for n in range(n_pairs):
        k = p.pair_origin[n]
        p.prev_pair_body_a[n] = p.pair_body_a[k]
        p.prev_pair_body_b[n] = p.pair_body_b[k]
        copy_manifold(p, "prev_", "", n, k)
    ti.loop_config(serialize=p.serial)
    for n in range(n_pairs):
        p.pair_body_a[n] = p.prev_pair_body_a[n]
        p.pair_body_b[n] = p.prev_pair_body_b[n]
        copy_manifold(p, "", "prev_", n, n)


@ti.func
def find_previous(p: ti.template(), owner, a, b):
    """Index of last step's pair (a, b) among the pairs `owner` found then, or -1."""
    found = -1
    for j in range(p.prev_body_pair_start[owner], p.prev_body_pair_start[owner + 1]):
        if p.prev_pair_body_a[j] == a and p.prev_pair_body_b[j] == b:
            found = j
    return found


@quick
@ti.kernel
def carry_contacts(p: ti.template(), n_slots: ti.i32, n_pairs: ti.i32, n_bodies: ti.i32,
                   n_joints: ti.i32):
    """Give each new pair last step's manifold and impulses (warm starting) and colour, if it
    had them.

    (Waking sleepers touched by new pairs is sleep.wake_islands'.) Also records the step's
    constraint counts in step_counts.
    """
    p.step_counts[0] = n_pairs
    p.step_counts[1] = n_joints
    ti.loop_config(serialize=p.serial)
    for k in range(n_pairs):
        a, b = p.pair_body_a[k], p.pair_body_b[k]
        j = find_previous(p, a, a, b)
        if j < 0:
            j = find_previous(p, b, a, b)
        p.pair_kept_color[k] = p.prev_pair_color[j] if j >= 0 else -1
        if j >= 0:
            copy_manifold(p, "", "prev_", k, j)
        else:
            p.contact_point_count[k] = 0


@ti.func
def turning_speed(p: ti.template(), slot, n_bodies):
    """Fastest a point of the body moves about its centre, m/s."""
    return ti.abs(p.body_angular_velocity[slot]) * bounding_radius(p, slot % n_bodies)


@ti.func
def motion_bound(p: ti.template(), slot, n_bodies, time):
    """How far (m) any point of the body can travel in `time` (s) at its current speeds."""
    return time * (p.body_velocity[slot].norm() + turning_speed(p, slot, n_bodies))


@ti.func
def relative_motion_bound(p: ti.template(), slot_a, slot_b, n_bodies, time):
    """How far (m) a point of body a can move relative to body b in `time` (s) at their
    current speeds (their centres' relative motion plus both bodies' turning)."""
    return time * ((p.body_velocity[slot_a] - p.body_velocity[slot_b]).norm()
                   + turning_speed(p, slot_a, n_bodies) + turning_speed(p, slot_b, n_bodies))


@ti.func
def refresh_contacts(p: ti.template(), pair, n_bodies, dt, h, first):
    """Narrow phase at the current poses, carrying impulses of points with the same feature.

    On the step's first substep (`first`) every pair is refreshed. A pair whose bodies can
    move against each other by less than FAST_MOTION_FRACTION of the smaller one's size in
    the step keeps that manifold for the whole step (each point's depth tracked through the
    bodies' rigid motion, as Box2D v3 does): its margin covers the step's motion. Faster
    pairs are refreshed every substep with a margin that covers one substep, so a fast
    body's contacts follow its true geometry: points tracked over a whole step would slide
    off their faces and turn fast tangential motion into false, deep penetrations. Bodies
    moving together (a falling pile) are slow, whatever their speed: in a 100k pile in free
    fall, refreshing them every substep was 60 % of the step. The margin adds up both
    bodies' own motion, not their relative motion: bodies falling side by side can close
    the gap once one of them is stopped by something else.
    """
    old_count = p.contact_point_count[pair]
    old_feature = ti.Vector([p.contact_feature[pair, 0], p.contact_feature[pair, 1]])
    old_normal = ti.Vector([p.contact_normal_impulse[pair, 0], p.contact_normal_impulse[pair, 1]])
    old_tangent = ti.Vector([p.contact_tangent_impulse[pair, 0],
                             p.contact_tangent_impulse[pair, 1]])
    old_bounced = ti.Vector([p.contact_bounced[pair, 0], p.contact_bounced[pair, 1]])
    old_friction = ti.Vector([p.contact_friction[pair, 0], p.contact_friction[pair, 1]])
    slot_a, slot_b = p.pair_body_a[pair], p.pair_body_b[pair]
    smallest = prepare_pair(p, pair, slot_a, slot_b, n_bodies)
    mu_static, mu_kinetic = mixed_friction(p, slot_a % n_bodies, slot_b % n_bodies)
    margin = 0.0
    if first:
        reach = motion_bound(p, slot_a, n_bodies, dt) + motion_bound(p, slot_b, n_bodies, dt)
        relative = relative_motion_bound(p, slot_a, slot_b, n_bodies, dt)
        fast = relative > FAST_MOTION_FRACTION * smallest  # see the docstring
        p.pair_refresh[pair] = 1 if fast else 0
        margin = reach
        if fast:
            margin = motion_bound(p, slot_a, n_bodies, h) + motion_bound(p, slot_b, n_bodies, h)
    else:
        margin = motion_bound(p, slot_a, n_bodies, h) + motion_bound(p, slot_b, n_bodies, h)
    collide_pair(p, pair, n_bodies, SPECULATIVE_SLOPS * p.pair_slop[pair] + margin)
    delta_a, delta_b = p.body_delta_position[slot_a], p.body_delta_position[slot_b]
    p.pair_ref_shift[pair] = ti.math.vec4(delta_a.x, delta_a.y, delta_b.x, delta_b.y)
    p.pair_ref_turn[pair] = vec2(p.body_delta_angle[slot_a], p.body_delta_angle[slot_b])
    normal = p.contact_normal[pair]
    for i in range(p.contact_point_count[pair]):
        feature = p.contact_feature[pair, i]
        match = -1
        if old_count > 0 and old_feature[0] == feature:
            match = 0
        elif old_count > 1 and old_feature[1] == feature:
            match = 1
        point = p.contact_point[pair, i]
        ra = point - p.body_position[slot_a]
        rb = point - p.body_position[slot_b]
        jn, jt = 0.0, 0.0
        if match >= 0:
            jn, jt = old_normal[match], old_tangent[match]
        p.contact_normal_impulse[pair, i] = jn
        p.contact_tangent_impulse[pair, i] = jt
        if first or match < 0:
            # A point's friction regime is that of the moment it is first found in the
            # step, before the solver acts on it; it may bounce once in the step.
            velocity = relative_velocity(p, slot_a, slot_b, ra, rb)
            p.contact_bounced[pair, i] = 0
            # Not sliding when the step begins: static friction holds it.
            sliding = ti.abs(velocity.dot(vec2(-normal.y, normal.x))) >= STICK_SPEED
            p.contact_friction[pair, i] = mu_kinetic if sliding else mu_static
        else:
            p.contact_bounced[pair, i] = old_bounced[match]
            p.contact_friction[pair, i] = old_friction[match]
        prepare_point(p, pair, i, ra, rb)


@quick
@ti.kernel
def build_body_contacts(p: ti.template(), n_slots: ti.i32, n_pairs: ti.i32):
    """Per body, the pairs it belongs to (sorted), so warm starting can gather impulses per
    body in a fixed order instead of scattering them with floating-point atomics."""
    ti.loop_config(serialize=p.serial)
    for slot in range(n_slots + 1):
        p.body_contact_start[slot] = 0
    ti.loop_config(serialize=p.serial)
    for k in range(n_pairs):
        ti.atomic_add(p.body_contact_start[p.pair_body_a[k]], 1)
        ti.atomic_add(p.body_contact_start[p.pair_body_b[k]], 1)
    exclusive_scan(p.scan_blocks, p.body_contact_start, n_slots, p.serial)
    ti.loop_config(serialize=p.serial)
    for slot in range(n_slots):
        p.body_contact_cursor[slot] = p.body_contact_start[slot]
    ti.loop_config(serialize=p.serial)
    for k in range(n_pairs):
        p.body_contacts[ti.atomic_add(p.body_contact_cursor[p.pair_body_a[k]], 1)] = k
        p.body_contacts[ti.atomic_add(p.body_contact_cursor[p.pair_body_b[k]], 1)] = k
    # Sorted by each pair's broad-phase index (deterministic), not by its storage index,
    # which follows the colouring's atomics within a colour.
    ti.loop_config(serialize=p.serial)
    for slot in range(n_slots):
        start, end = p.body_contact_start[slot], p.body_contact_start[slot + 1]
        for i in range(start + 1, end):
            key = p.body_contacts[i]
            j = i - 1
            while j >= start:
                if p.pair_origin[p.body_contacts[j]] <= p.pair_origin[key]:
                    break
                p.body_contacts[j + 1] = p.body_contacts[j]
                j -= 1
            p.body_contacts[j + 1] = key


@quick
@ti.kernel
def begin_substep(p: ti.template(), n_slots: ti.i32, n_bodies: ti.i32, n_pairs: ti.i32,
                  n_joints: ti.i32, gravity: vec2, h: ti.f32, dt: ti.f32, substep: ti.i32):
    """The substep's first stages: motors, integrate velocities, (first substep of the step:
    refresh the contacts), warm start, integrate positions.

    Contacts are found at the poses before the first move; slow pairs keep that manifold for
    the step, each point's depth tracked through the bodies' rigid motion (moved_depth), as
    Box2D v3 does, while fast pairs run the narrow phase again every substep (see
    refresh_contacts). Measured on the awake large pyramid (CPU), keeping resting contacts
    saves the narrow phase's 28% of the step that refreshing every pair every substep cost.
    Warm starting re-applies each point's impulse before the move, so resting bodies do not
    creep.
    """
    ti.loop_config(serialize=p.serial)
    for joint_slot in range(n_joints * (n_slots // ti.max(n_bodies, 1))):
        update_motor(p, joint_slot, n_joints, n_bodies, h)
    ti.loop_config(serialize=p.serial)
    for slot in range(n_slots):
        body = slot % n_bodies
        if moves(p, slot, body):
            force, torque = vec2(0.0, 0.0), 0.0
            if p.body_has_joint[body]:
                force, torque = motor_load(p, slot, body, n_joints, n_bodies)
            integrate_velocity(p, slot, body, gravity, h, force, torque)
        if substep == 0:
            begin_step_pose(p, slot)
    ti.loop_config(serialize=p.serial)
    for pair in range(n_pairs):
        if substep == 0 or p.pair_refresh[pair] == 1:
            refresh_contacts(p, pair, n_bodies, dt, h, substep == 0)
    ti.loop_config(serialize=p.serial)
    for slot in range(n_slots):
        if moves(p, slot, slot % n_bodies):
            warm_start_body(p, slot, n_bodies)
            integrate_position(p, slot, h)


@quick
@ti.kernel
def derive_velocities(p: ti.template(), n_slots: ti.i32, n_bodies: ti.i32, h: ti.f32):
    """v = (x - x_prev) / h, w = (theta - theta_prev) / h for bodies that have joints.

    Contacts move pose and previous pose together, so for other bodies this would return the
    integrated velocity plus rounding noise (|x| * 1e-7 / h); joint corrections move the pose
    alone, and this turns them into velocity.
    """
    ti.loop_config(serialize=p.serial)
    for slot in range(n_slots):
        body = slot % n_bodies
        if p.body_has_joint[body] and moves(p, slot, body):
            p.body_velocity[slot] = (p.body_delta_position[slot]
                                     - p.body_prev_delta_position[slot]) / h
            p.body_angular_velocity[slot] = (p.body_delta_angle[slot]
                                             - p.body_prev_delta_angle[slot]) / h


@ti.func
def solve_position_constraint(p: ti.template(), k, n_bodies, h):
    if k < p.step_counts[0]:
        resolve_penetration(p, k, n_bodies, h)
    else:
        solve_joint(p, k - p.step_counts[0], n_bodies, h)


@ti.func
def solve_velocity_constraint(p: ti.template(), k, n_bodies, h):
    if k < p.step_counts[0]:  # joints are position-level only (seed 003)
        solve_velocity(p, k, n_bodies, h)


#: Colours solved per kernel launch. Each colour is a top-level (parallel) loop of the
#: kernel, run one after the other; more per launch means fewer launches from Python
#: (~30-60 us each on the CPU backend, 2 passes x colours x 11 substeps a step) but a longer
#: first compile, which grows faster than linearly (CPU, cold cache: 1 colour 0.7 s,
#: 2: 1.5 s, 4: 4 s, 13: 30 s per pass).
COLORS_PER_LAUNCH = 4


@quick
@ti.kernel
def solve_colors(p: ti.template(), stage: ti.template(), first_color: ti.i32,
                 n_bodies: ti.i32, h: ti.f32):
    """stage(p, constraint, n_bodies, h) for every constraint of colours first_color ...
    first_color + COLORS_PER_LAUNCH - 1 (those below MAX_COLORS): one colour's constraints in
    parallel, colours in sequence."""
    for j in ti.static(range(COLORS_PER_LAUNCH)):
        color = ti.min(first_color + j, MAX_COLORS)  # MAX_COLORS: an empty range
        end = p.color_start[color + 1] if color < MAX_COLORS else p.color_start[color]
        ti.loop_config(serialize=p.serial)
        for i in range(p.color_start[color], end):
            stage(p, p.color_list[i], n_bodies, h)


@quick
@ti.kernel
def solve_overflow(p: ti.template(), stage: ti.template(), n_bodies: ti.i32, h: ti.f32):
    """stage for the overflow colour: one thread, in constraint order."""
    for _ in range(1):
        for i in range(p.color_start[MAX_COLORS], p.color_start[MAX_COLORS + 1]):
            stage(p, p.color_list[i], n_bodies, h)


def solve_pass(pool, stage, n_bodies, h, n_colors, overflow):
    """stage over all constraints, colour after colour, then the overflow colour."""
    for first_color in range(0, n_colors, COLORS_PER_LAUNCH):
        solve_colors(pool, stage, first_color, n_bodies, h)
    if overflow:
        solve_overflow(pool, stage, n_bodies, h)


def run_substep(pool, n_slots, n_bodies, n_pairs, n_joints, gravity, h, dt, substep, n_colors,
                overflow):
    """One XPBD substep of length h (s) of a step of dt (s) for every world; `substep`: its
    index in the step (0: every contact is refreshed)."""
    begin_substep(pool, n_slots, n_bodies, n_pairs, n_joints, gravity, h, dt, substep)
    solve_pass(pool, solve_position_constraint, n_bodies, h, n_colors, overflow)
    if n_joints:
        derive_velocities(pool, n_slots, n_bodies, h)
    if n_pairs:
        solve_pass(pool, solve_velocity_constraint, n_bodies, h, n_colors, overflow)
