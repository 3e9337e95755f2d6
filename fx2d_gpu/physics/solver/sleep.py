"""Sleep by islands, on the device (as Box2D does it).

Rules
-----
* Per-body timer (Fx2D's rule): after each step a moving body (awake, dynamic or kinematic)
  slower than SLEEP_LINEAR_SPEED and SLEEP_ANGULAR_SPEED adds dt to body_sleep_time; a
  faster one resets it to 0.
* Islands: the nodes are the dynamic body slots (inverse mass > 0, not kinematic), awake or
  asleep, shape-less ones included. Edges join two nodes through
    - a candidate pair whose manifold touches: a point within TOUCH_DISTANCE (depth as of the
      step's first substep);
    - a joint slot;
    - a sleeping body and the island it fell asleep with (bodies.island from the last
      labelling). The broad phase finds no pair between two sleeping bodies, so a sleeping
      pile has no contacts of its own: it keeps its island until it wakes.
  Static, kinematic and shape-less bodies never join islands through contacts (static and
  kinematic ones are no nodes; shape-less ones have no contacts, only joints). A body that
  is no node is its own island. The label of an island (bodies.island) is the smallest slot
  in it, whatever the order of the threads.
* Falling asleep (update_sleep, once per step after the substeps): an island sleeps only when
  every body in it is ready (asleep already, or body_sleep_time >= SLEEP_TIME); its bodies
  then get body_sleeping = 1 and zero velocities. An island with a body that is not ready
  stays awake, and its sleeping bodies wake (timer 0): an awake body touching a sleeping one
  wakes it unless both are slow long enough, and a body resting on an awake body never
  sleeps.
* Waking (wake_islands, once per step right after the broad phase): a sleeping body's whole
  island wakes (body_sleeping = 0, body_sleep_time = 0) when
    - a candidate pair joins it to an awake dynamic body that moves faster than the sleep
      thresholds (its timer was reset at the end of the last step) or is pushed by a force,
      or that moves at all and whose pair with it is new this step (carry_contacts' rule),
      or to an awake kinematic body that moves. Not the timer itself: a body just woken
      has its timer at 0 too, and would wake every island near it, one ring a step;
    - a joint joins it to an awake dynamic body or to a moving kinematic one;
    - it has a non-zero applied force or torque.
  Marks are taken from the flags before any flag changes, so the result does not depend on
  the order of threads. The broad phase pairs no two sleeping bodies, so a step in which
  bodies woke runs the broad phase again: the woken bodies then meet each other in the same
  step, and a sleeping row hit by a ball behaves exactly as an awake one would.

Per step: save_previous_pairs -> broad phase -> wake_islands (> 0: broad phase again) ->
carry_contacts ... substeps ... -> update_sleep; or, where the broad phase would find last
step's pairs again (pairs.keeps_pairs: nothing refitted, no awake body that can move in a
world with a sleeper, as in a scene fast asleep), wake_islands on those pairs, and only
when bodies woke save_previous_pairs -> broad phase -> carry_contacts. Small worlds
(broad_phase's by-world pairs) wake inside their broad phase's one launch instead
(find_pairs_waking_by_world): the same marks, between placing the bodies and pairing them;
and where their pairs are stored world by world (StepContext.solves_by_world), a world per
thread labels its islands and settles them (label_world: a serial launch's steps, world
by world, the same answer), in the report's launch (reporting._report_by_world) or its
own (_label_by_world).

Fields (device.py): bodies.island (the labels); IslandScratch: previous_label (a sleeping
body's label before the labelling), parent (the union-find forest), wake (marks per island:
-1 in update_sleep, an island that stays awake; in wake_islands, the call's stamp,
islands.stamp, an island to wake), and the scalars not_converged, woken and stamp.

Labelling is a parallel connected-components pass over a union-find forest (islands.parent).
Each edge joins the roots of its two ends with atomic_min (a lock-free union: when the root
it hooks has been hooked meanwhile, the union goes on with its new parent), then every
body's parent is compressed to its root. The forest orders bodies by a key, a fixed
scrambling of the slots, not by slot: hooking by slot builds a tree as deep as a chain whose
bodies were added in order (a rope, a row of a pile), which GPU threads then walk one link
at a time (measured on an H100: 0.97 ms for a chain of 16,000 bodies in slot order, 0.15 ms
with keys, as for a shuffled chain). Each launch runs a round (every edge hooked, then every
parent compressed to its root) and a check (every edge hooked again); launches repeat until
a check changes nothing (read back from islands.not_converged). One round normally joins
everything, so a step needs one launch (a chain of 10,000 bodies too). Last, each island's
label is its smallest slot (atomic_min into the root, then read back by every member): the
result does not depend on the order of threads.
"""

from typing import TYPE_CHECKING

import taichi as ti

from ...device import MAX_MANIFOLD_POINTS
from ...device.launching import quick
from ..bodies import bounding_radius, can_move, has_sensor, is_sensor_pair
from ..collision.broad_phase import (
    begin_world_pairs,
    count_world_partners,
    place_world,
    world_pair_found,
    write_world_pairs,
)
from . import team
from .pairs import previous_pair, save_pairs, saved_pairs_args, world_pairs

if TYPE_CHECKING:
    from .context import StepContext

vec2 = ti.math.vec2

#: Fx2D's sleep rule: below both speeds for SLEEP_TIME seconds, a body sleeps.
SLEEP_LINEAR_SPEED = 0.05  # m/s
SLEEP_ANGULAR_SPEED = 0.05  # rad/s
SLEEP_TIME = 0.5  # s

#: A manifold joins two bodies' islands when one of its points is closer than this, m
#: (depth > -TOUCH_DISTANCE). It is above the speculative distance of resting contacts
#: (contacts.SPECULATIVE_DISTANCE, 8 mm): every point a resting pair keeps counts, as in
#: Box2D v3, where a manifold with any point (speculative ones included) is touching.
TOUCH_DISTANCE = 0.01

#: A body with a contact deeper than this, m, or than OVERLAP_FRACTION of the pair's smaller
#: bounding radius if that is more, never counts as resting (its timer restarts): the
#: push-out moves pose and previous pose together, so a body being pushed out of an overlap
#: (spawned inside another, MAX_PUSHOUT_SPEED at a time) has no velocity, and 300 circles
#: spawned at one point fell asleep in 40 steps with 304 pairs still 1 cm deep. Resting
#: contacts are a slop deep (contacts.LINEAR_SLOP, 2 mm) plus what a tall stack sinks.
OVERLAP_DEPTH = 0.01
OVERLAP_FRACTION = 0.05

_NO_LABEL = (1 << 31) - 1

#: More launches than this means the labelling does not converge: a bug.
MAX_LABEL_LAUNCHES = 1000


@ti.func
def _is_node(model: ti.template(), bodies: ti.template(), slot, n_bodies):
    """An enabled dynamic body (awake or asleep): it belongs to islands."""
    body = slot % n_bodies
    return model.inv_mass[body] > 0.0 and model.kinematic[body] == 0 and bodies.enabled[slot] == 1


@ti.func
def _can_sleep(model: ti.template(), bodies: ti.template(), slot, n_bodies):
    """An enabled dynamic or kinematic body: it has a sleep timer (static and disabled
    bodies never sleep)."""
    return can_move(model, slot % n_bodies) and bodies.enabled[slot] == 1


@ti.func
def _touching(model: ti.template(), manifolds: ti.template(), pair, n_bodies):
    """A manifold that joins islands: a point within TOUCH_DISTANCE, no sensor."""
    count = manifolds.point_count[pair]
    if is_sensor_pair(model, manifolds, pair, n_bodies):
        count = 0
    touching = False
    for i in ti.static(range(MAX_MANIFOLD_POINTS)):
        if i < count and manifolds.depth[pair, i] > -TOUCH_DISTANCE:
            touching = True
    return touching


@ti.func
def _overlaps(model: ti.template(), manifolds: ti.template(), pair, n_bodies):
    """Whether pair's manifold has a point deeper than OVERLAP_DEPTH (or OVERLAP_FRACTION of
    its smaller body), as of the step's first substep: its bodies are being pushed apart."""
    slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
    size = ti.min(
        bounding_radius(model, slot_a, slot_a % n_bodies),
        bounding_radius(model, slot_b, slot_b % n_bodies),
    )
    limit = ti.max(OVERLAP_DEPTH, OVERLAP_FRACTION * size)
    deep = False
    for i in ti.static(range(MAX_MANIFOLD_POINTS)):
        if i < manifolds.point_count[pair] and manifolds.depth[pair, i] > limit:
            deep = True
    return deep and not is_sensor_pair(model, manifolds, pair, n_bodies)


@ti.func
def _island_of(bodies: ti.template(), slot, n_bodies):
    """bodies.island[slot] if it is a plausible label (a root in the same world, not above the
    slot), else the slot itself: labels left by another scene or an older layout of this
    one must not index out of range or across worlds."""
    label = bodies.island[slot]
    result = slot
    if label >= 0 and label <= slot:
        if label // n_bodies == slot // n_bodies and bodies.island[label] == label:
            result = label
    return result


#: Keys: slot * _KEY_MUL modulo 2**31, a permutation of the slots that scatters neighbours.
_KEY_MUL = 0x2545F491
_KEY_INV = pow(_KEY_MUL, -1, 1 << 31)
_KEY_MASK = (1 << 31) - 1


@ti.func
def _key(slot):
    return ti.cast(
        (ti.cast(slot, ti.u32) * ti.cast(_KEY_MUL, ti.u32)) & ti.cast(_KEY_MASK, ti.u32), ti.i32
    )


@ti.func
def _slot(key):
    return ti.cast(
        (ti.cast(key, ti.u32) * ti.cast(_KEY_INV, ti.u32)) & ti.cast(_KEY_MASK, ti.u32), ti.i32
    )


@ti.func
def _root(islands: ti.template(), x):
    """The root slot of x's tree, halving the path on the way. islands.parent holds the
    parent's key, which is below the body's own key except at a root (parent = own key);
    keys only ever decrease and stay in the component, so concurrent halving is safe."""
    r = x
    while islands.parent[r] != _key(r):
        parent_key = islands.parent[r]
        grand_key = islands.parent[_slot(parent_key)]
        if grand_key != parent_key:
            ti.atomic_min(islands.parent[r], grand_key)
        r = _slot(grand_key)
    return r


@ti.func
def _union(islands: ti.template(), a, b):
    """Join a's and b's trees; 1 if a parent changed."""
    changed = 0
    x, y = a, b
    busy = 1
    while busy:
        rx, ry = _root(islands, x), _root(islands, y)
        if rx == ry:
            busy = 0
        else:
            kx, ky = _key(rx), _key(ry)
            hi = rx if kx > ky else ry
            lo_key = ti.min(kx, ky)
            old = ti.atomic_min(islands.parent[hi], lo_key)
            if old > lo_key:
                changed = 1
            if old == _key(hi):
                busy = 0  # hi was a root: now under lo
            else:
                # hi was hooked under `old` meanwhile; it points to min(old, lo) now, so
                # join old's and lo's trees as well.
                x, y = _slot(old), _slot(lo_key)
    return changed


@ti.func
def _joint_ends(joints: ti.template(), joint_slot, n_bodies, n_joints):
    world, joint = joint_slot // n_joints, joint_slot % n_joints
    return world * n_bodies + joints.parent[joint], world * n_bodies + joints.child[joint]


@ti.func
def _edge(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    islands: ti.template(),
    e,
    n_bodies,
    n_pairs,
    n_joints,
    n_joint_slots,
):
    """Edge e of the island graph as (u, v), or (-1, -1): candidate pairs [0, n_pairs), joint
    slots next, then one per body slot (a sleeping body to its previous island)."""
    u, v = -1, -1
    if e < n_pairs:
        a, b = manifolds.body_a[e], manifolds.body_b[e]
        if (
            _is_node(model, bodies, a, n_bodies)
            and _is_node(model, bodies, b, n_bodies)
            and _touching(model, manifolds, e, n_bodies)
        ):
            u, v = a, b
    elif e < n_pairs + n_joint_slots:
        a, b = _joint_ends(joints, e - n_pairs, n_bodies, n_joints)
        if _is_node(model, bodies, a, n_bodies) and _is_node(model, bodies, b, n_bodies):
            u, v = a, b
    else:
        slot = e - n_pairs - n_joint_slots
        previous = islands.previous_label[slot]
        if previous != slot:
            u, v = slot, previous
    return u, v


@ti.func
def _begin_slot(
    model: ti.template(), bodies: ti.template(), islands: ti.template(), slot, n_bodies, dt, settle
):
    """A pass's first launch, per body slot: with `settle`, its sleep timer (dt s); its old
    label kept in islands.previous_label if it sleeps; then a tree of its own."""
    if settle == 1 and bodies.sleeping[slot] == 0 and _can_sleep(model, bodies, slot, n_bodies):
        slow = (
            bodies.velocity[slot].norm() < SLEEP_LINEAR_SPEED
            and ti.abs(bodies.angular_velocity[slot]) < SLEEP_ANGULAR_SPEED
        )
        if slow:
            bodies.sleep_time[slot] = bodies.sleep_time[slot] + dt  # not atomic
        else:
            bodies.sleep_time[slot] = 0.0
    previous = slot
    if bodies.sleeping[slot] == 1 and _is_node(model, bodies, slot, n_bodies):
        label = _island_of(bodies, slot, n_bodies)  # other bodies' labels: not written here
        if _is_node(model, bodies, label, n_bodies):
            previous = label
    islands.previous_label[slot] = previous
    islands.parent[slot] = _key(slot)


@ti.func
def _hook_edge(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    islands: ti.template(),
    e,
    n_bodies,
    n_pairs,
    n_joints,
    n_joint_slots,
    begin,
    settle,
):
    """The round's union of edge e's ends; on a settling pass's first launch, a pair pushing
    an overlap out also restarts its bodies' sleep timers."""
    u, v = _edge(
        model, bodies, joints, manifolds, islands, e, n_bodies, n_pairs, n_joints, n_joint_slots
    )
    if u >= 0:
        _union(islands, u, v)
    # After the timers (the loop before): an overlap being pushed out restarts its
    # bodies' (several threads may write the same 0).
    if settle == 1 and begin == 1 and e < n_pairs and _overlaps(model, manifolds, e, n_bodies):
        for slot in ti.static((manifolds.body_a[e], manifolds.body_b[e])):
            if bodies.sleeping[slot] == 0 and _can_sleep(model, bodies, slot, n_bodies):
                bodies.sleep_time[slot] = 0.0


@ti.func
def _compress_slot(bodies: ti.template(), islands: ti.template(), slot):
    """Slot's parent compressed to its root; its label and island mark cleared for the
    check's gathering (_NO_LABEL: the labels' atomic_min starts above every slot)."""
    islands.parent[slot] = _key(_root(islands, slot))
    bodies.island[slot] = _NO_LABEL
    islands.wake[slot] = 0


@ti.func
def _check_edge(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    islands: ti.template(),
    e,
    n_bodies,
    n_pairs,
    n_joints,
    n_joint_slots,
    first_slot_edge,
    settle,
):
    """The check's union of edge e's ends (a change: not converged); a slot's edge also
    gathers into its root the island's smallest slot and, with `settle`, whether the slot
    is not ready to sleep (islands.wake -1)."""
    u, v = _edge(
        model, bodies, joints, manifolds, islands, e, n_bodies, n_pairs, n_joints, n_joint_slots
    )
    if u >= 0:
        if _union(islands, u, v):
            islands.not_converged[None] = 1
    if e >= first_slot_edge:
        slot = e - first_slot_edge
        root = _slot(islands.parent[slot])
        ti.atomic_min(bodies.island[root], slot)
        if (
            settle == 1
            and _can_sleep(model, bodies, slot, n_bodies)
            and bodies.sleeping[slot] == 0
            and bodies.sleep_time[slot] < SLEEP_TIME
        ):
            islands.wake[root] = -1


@ti.func
def _settle_slot(
    model: ti.template(), bodies: ti.template(), islands: ti.template(), slot, n_bodies, settle
):
    """Slot's label read from its root; with `settle`, it wakes with an island that has a
    body not ready, else falls asleep (zero velocities)."""
    root = _slot(islands.parent[slot])
    bodies.island[slot] = bodies.island[root]
    if settle == 1 and _can_sleep(model, bodies, slot, n_bodies):
        if islands.wake[root] == -1:
            if bodies.sleeping[slot] == 1:
                bodies.sleeping[slot] = 0
                bodies.sleep_time[slot] = 0.0
        elif bodies.sleeping[slot] == 0:
            bodies.sleeping[slot] = 1
            bodies.velocity[slot] = vec2(0.0, 0.0)
            bodies.angular_velocity[slot] = 0.0


@quick
@ti.kernel
def _label_launch(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    islands: ti.template(),
    serial: ti.template(),
    n_slots: ti.i32,
    n_bodies: ti.i32,
    n_pairs: ti.i32,
    n_joints: ti.i32,
    dt: ti.f32,
    begin: ti.i32,
    settle: ti.i32,
) -> ti.i32:
    """One launch of the island pass; returns 1 while the labelling has not converged.

    begin (first launch of a pass): with `settle`, the sleep timers; each sleeping body's
    old label kept in islands.previous_label; every body a tree of its own. Then a round (every edge
    hooked, every parent compressed to its root) and a check (every edge hooked again: a
    change means another launch). Once the check changed nothing: the labels (smallest
    slots), and with `settle`, ready islands fall asleep and the others wake.

    Five loops: each parallel loop costs ~50-70 us to start on the CPU backend (2-core
    machine, Taichi 1.7.4, even empty), so stages share loops where they can.
    """
    n_joint_slots = n_joints * (n_slots // ti.max(n_bodies, 1))
    first_slot_edge = n_pairs + n_joint_slots
    n_edges = first_slot_edge + n_slots
    ti.loop_config(serialize=serial)
    for slot in range(n_slots * begin):
        _begin_slot(model, bodies, islands, slot, n_bodies, dt, settle)
    ti.loop_config(serialize=serial)
    for e in range(n_edges):
        _hook_edge(
            model,
            bodies,
            joints,
            manifolds,
            islands,
            e,
            n_bodies,
            n_pairs,
            n_joints,
            n_joint_slots,
            begin,
            settle,
        )
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        _compress_slot(bodies, islands, slot)
    islands.not_converged[None] = 0
    # The check, and meanwhile (as if it will change nothing, so that every parent is a
    # root) each root gathers its island's smallest slot and whether a body in it is not
    # ready to sleep (such an island stays, or wakes, up). When the check changes something,
    # the next launch redoes all of it. Serial loops check only the last edges (one per
    # slot): with no concurrent hooks, one round is exact.
    ti.loop_config(serialize=serial)
    for e in range(first_slot_edge if ti.static(serial) else 0, n_edges):
        _check_edge(
            model,
            bodies,
            joints,
            manifolds,
            islands,
            e,
            n_bodies,
            n_pairs,
            n_joints,
            n_joint_slots,
            first_slot_edge,
            settle,
        )
    ti.loop_config(serialize=serial)
    for slot in range(n_slots * (1 - islands.not_converged[None])):
        _settle_slot(model, bodies, islands, slot, n_bodies, settle)
    return islands.not_converged[None]


@quick
@ti.kernel
def _label_by_world(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    islands: ti.template(),
    serial: ti.template(),
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    n_pairs: ti.i32,
    n_joints: ti.i32,
    dt: ti.f32,
    settle: ti.i32,
):
    """_label_launch's whole pass for worlds whose pairs are stored world by world (each
    world's in its bodies' pair_start range: StepContext.solves_by_world), a world per
    thread: the same steps in the same order as a serial launch (timers and trees, every
    edge hooked, parents compressed, the slots' edges checked, labels and sleep), each
    world's alone. Worlds share no body, so this is the serial launch's answer bit for bit
    (labels, timers, flags), in one launch of one loop instead of five loops over every
    slot and edge (4,096 small worlds, the soft step, 2-core CPU, old and new in turns:
    update_sleep 1.49-1.61 -> 0.97-1.08 ms a step)."""
    ti.loop_config(serialize=serial)
    for world in range(n_worlds):
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
            settle,
        )


@ti.func
def label_world(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    islands: ti.template(),
    world,
    n_worlds,
    n_bodies,
    n_pairs,
    n_joints,
    dt,
    settle,
):
    """_label_by_world's pass over one world, on its thread."""
    n_joint_slots = n_joints * n_worlds
    first_slot_edge = n_pairs + n_joint_slots
    first_slot, end_slot = world * n_bodies, (world + 1) * n_bodies
    first_pair, end_pair = world_pairs(manifolds, world, n_bodies, n_pairs)
    for slot in range(first_slot, end_slot):
        _begin_slot(model, bodies, islands, slot, n_bodies, dt, settle)
    # The world's edges, in the launch's order: pairs, joint slots, body slots.
    for e in range(first_pair, end_pair):
        _hook_edge(
            model,
            bodies,
            joints,
            manifolds,
            islands,
            e,
            n_bodies,
            n_pairs,
            n_joints,
            n_joint_slots,
            1,
            settle,
        )
    for e in range(n_pairs + world * n_joints, n_pairs + (world + 1) * n_joints):
        _hook_edge(
            model,
            bodies,
            joints,
            manifolds,
            islands,
            e,
            n_bodies,
            n_pairs,
            n_joints,
            n_joint_slots,
            1,
            settle,
        )
    for slot in range(first_slot, end_slot):
        _hook_edge(
            model,
            bodies,
            joints,
            manifolds,
            islands,
            first_slot_edge + slot,
            n_bodies,
            n_pairs,
            n_joints,
            n_joint_slots,
            1,
            settle,
        )
    for slot in range(first_slot, end_slot):
        _compress_slot(bodies, islands, slot)
    # One thread hooked every edge of the world: one round is exact (as in a serial
    # launch, only the slots' edges are checked, to gather the labels and marks).
    for slot in range(first_slot, end_slot):
        _check_edge(
            model,
            bodies,
            joints,
            manifolds,
            islands,
            first_slot_edge + slot,
            n_bodies,
            n_pairs,
            n_joints,
            n_joint_slots,
            first_slot_edge,
            settle,
        )
    for slot in range(first_slot, end_slot):
        _settle_slot(model, bodies, islands, slot, n_bodies, settle)


@ti.func
def update_sleep_by_team(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    islands: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_slots,
    n_bodies,
    n_pairs,
    n_joints,
    dt,
):
    """update_sleep on a team, at the end of its launch: _label_launch's loops, each shared
    among the members and the team meeting after each, its launches' rounds repeated until
    a check changes nothing (at most MAX_LABEL_LAUNCHES; the last, converged, round meets
    at no barrier after its settle: the caller's loop ends there, fused._sleep_by_team). The
    same labels, timers and
    sleep as its launches: a converged labelling's labels are each island's smallest slot
    whatever the order of the hooks, and the rest reads them. Returns 1 where it converged,
    else 0 (the host raises, as update_sleep does)."""
    n_joint_slots = n_joints * (n_slots // ti.max(n_bodies, 1))
    first_slot_edge = n_pairs + n_joint_slots
    n_edges = first_slot_edge + n_slots
    slots_lo, slots_hi = team.share(0, n_slots, member, n_members)
    edges_lo, edges_hi = team.share(0, n_edges, member, n_members)
    converged, begin, rounds = 0, 1, 0
    while converged == 0 and rounds < MAX_LABEL_LAUNCHES:
        if begin == 1:
            for slot in range(slots_lo, slots_hi):
                _begin_slot(model, bodies, islands, slot, n_bodies, dt, 1)
            team.barrier(counts, n_members, team.SPIN_LIMIT)
        for e in range(edges_lo, edges_hi):
            _hook_edge(
                model,
                bodies,
                joints,
                manifolds,
                islands,
                e,
                n_bodies,
                n_pairs,
                n_joints,
                n_joint_slots,
                begin,
                1,
            )
        team.barrier(counts, n_members, team.SPIN_LIMIT)
        for slot in range(slots_lo, slots_hi):
            _compress_slot(bodies, islands, slot)
        if member == 0:
            islands.not_converged[None] = 0
        team.barrier(counts, n_members, team.SPIN_LIMIT)
        for e in range(edges_lo, edges_hi):
            _check_edge(
                model,
                bodies,
                joints,
                manifolds,
                islands,
                e,
                n_bodies,
                n_pairs,
                n_joints,
                n_joint_slots,
                first_slot_edge,
                1,
            )
        team.barrier(counts, n_members, team.SPIN_LIMIT)
        if islands.not_converged[None] == 0:  # (after the team met: team.barrier)
            for slot in range(slots_lo, slots_hi):
                _settle_slot(model, bodies, islands, slot, n_bodies, 1)
            converged = 1
        else:
            # Every member has read the check's answer before member 0 clears it again
            # (where it converged the pass ends: the launch's last loop, whose end orders
            # the settled slots before anything reads them; every member read the same
            # answer, so all leave together).
            team.barrier(counts, n_members, team.SPIN_LIMIT)
        begin = 0
        rounds += 1
    return converged


def no_convergence():
    """The error of an island labelling that did not converge (a bug)."""
    return RuntimeError(f"island labelling did not converge in {MAX_LABEL_LAUNCHES} launches")


def _island_pass(ctx: "StepContext", dt: float, settle: int, by_world: bool = False) -> int:
    pool = ctx.pool
    groups = (pool.model, pool.bodies, pool.joints, pool.manifolds, pool.islands, ctx.serial)
    if by_world:
        _label_by_world(*groups, ctx.n_worlds, ctx.n_bodies, ctx.n_pairs, ctx.n_joints, dt, settle)
        return 1
    begin = 1
    for launches in range(1, MAX_LABEL_LAUNCHES + 1):
        if (
            _label_launch(
                *groups, ctx.n_slots, ctx.n_bodies, ctx.n_pairs, ctx.n_joints, dt, begin, settle
            )
            == 0
        ):
            return launches
        begin = 0
    raise no_convergence()


def label_islands(ctx: "StepContext", by_world: bool = False) -> int:
    """Label the islands into bodies.island (see the module docstring); returns the number
    of kernel launches it took. Reads the candidate pairs [0, n_pairs) and their manifolds
    (point_count, depth), the joints, and the sleeping bodies' labels from the last
    labelling; `by_world` as in update_sleep. update_sleep does the same (fused); this is
    for tests and tools.
    """
    return _island_pass(ctx, 0.0, 0, by_world)


def update_sleep(ctx: "StepContext", by_world: bool = False) -> int:
    """After the step's substeps: sleep timers (ctx.dt), island labels, then every island
    sleeps whole or stays awake whole (see the module docstring). Returns the kernel
    launches it took (usually 1). Reads the step's pairs and manifolds in any order;
    `by_world`: they are stored world by world (StepContext.solves_by_world), and a world
    per thread labels its own islands (_label_by_world: the same answer, one launch)."""
    return _island_pass(ctx, ctx.dt, 1, by_world)


#: How an awake body meets a sleeping one (_pushes).
_OLD_PAIR, _NEW_PAIR, _JOINT = 0, 1, 2


@ti.func
def _pushes(model: ti.template(), bodies: ti.template(), slot, n_bodies, link: ti.template()):
    """Whether the awake body at `slot` wakes a sleeping body it meets through `link`
    (_OLD_PAIR, _NEW_PAIR or _JOINT; see the module docstring). The velocity is the one the
    timer was judged by at the end of the last step."""
    body = slot % n_bodies
    result = False
    if bodies.sleeping[slot] == 0:
        speed, spin = bodies.velocity[slot].norm(), ti.abs(bodies.angular_velocity[slot])
        if model.inv_mass[body] > 0.0:
            if ti.static(link == _JOINT):
                result = True
            else:
                result = (
                    speed >= SLEEP_LINEAR_SPEED
                    or spin >= SLEEP_ANGULAR_SPEED
                    or bodies.force[slot].norm() > 0.0
                    or bodies.torque[slot] != 0.0
                )
                if ti.static(link == _NEW_PAIR):
                    result = result or speed > 0.0 or spin > 0.0
        elif model.kinematic[body] == 1:
            result = speed > 0.0 or spin > 0.0 or bodies.sleep_time[slot] == 0.0
    return result


@ti.func
def _new_stamp(islands: ti.template()):
    """A wake call's mark (and its woken count set to 0): one more than the last call's,
    > 0, so no mark needs clearing: older stamps and update_sleep's marks (0, -1) read as
    unmarked."""
    islands.woken[None] = 0
    islands.stamp[None] = ti.max(islands.stamp[None], 0) + 1
    return islands.stamp[None]


@ti.func
def _wake_if_marked(bodies: ti.template(), islands: ti.template(), slot, n_bodies, stamp):
    """Wake body slot if it sleeps in an island marked with this call's stamp (counted in
    islands.woken)."""
    if bodies.sleeping[slot] == 1 and islands.wake[_island_of(bodies, slot, n_bodies)] == stamp:
        bodies.sleeping[slot] = 0
        bodies.sleep_time[slot] = 0.0
        ti.atomic_add(islands.woken[None], 1)


@ti.func
def _mark_pushed_sleeper(
    model: ti.template(),
    bodies: ti.template(),
    previous: ti.template(),
    islands: ti.template(),
    a,
    b,
    n_bodies,
    stamp,
    kept: ti.template(),
):
    """Mark, for waking, the island of whichever of candidate pair (a, b) (slots, a < b)
    sleeps when the other, awake, pushes it (_pushes: as a pair last step had or a new
    one; `kept`: the step keeps last step's pairs, so every pair is one it had). A sensor
    exerts no force: it never wakes a sleeper."""
    sleeping_a, sleeping_b = bodies.sleeping[a] == 1, bodies.sleeping[b] == 1
    if sleeping_a != sleeping_b and not has_sensor(model, a, b, n_bodies):
        pushed = False
        if ti.static(kept) or previous_pair(previous, a, b) >= 0:
            pushed = _pushes(model, bodies, b if sleeping_a else a, n_bodies, _OLD_PAIR)
        else:
            pushed = _pushes(model, bodies, b if sleeping_a else a, n_bodies, _NEW_PAIR)
        if pushed:
            islands.wake[_island_of(bodies, a if sleeping_a else b, n_bodies)] = stamp


@ti.func
def _mark_joint_and_force_wakes(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    islands: ti.template(),
    serial: ti.template(),
    n_slots,
    n_bodies,
    n_joints,
    stamp,
):
    """Mark the islands that a joint to an awake body or an applied force wakes. Called at
    a kernel's top level: its loop is a parallel loop of the kernel."""
    n_joint_slots = n_joints * (n_slots // ti.max(n_bodies, 1))
    ti.loop_config(serialize=serial)
    for e in range(n_joint_slots + n_slots):
        _mark_joint_or_force_wake(
            model, bodies, joints, islands, e, n_joint_slots, n_bodies, n_joints, stamp
        )


@ti.func
def _mark_joint_or_force_wake(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    islands: ti.template(),
    e,
    n_joint_slots,
    n_bodies,
    n_joints,
    stamp,
):
    """Item e of the wake's joints-then-bodies range: joint slot e (_mark_joint_wake), or past
    the n_joint_slots joint slots, body slot e - n_joint_slots (_mark_force_wake)."""
    if e < n_joint_slots:
        _mark_joint_wake(model, bodies, joints, islands, e, n_bodies, n_joints, stamp)
    else:
        _mark_force_wake(bodies, islands, e - n_joint_slots, n_bodies, stamp)


@ti.func
def _mark_joint_wake(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    islands: ti.template(),
    joint_slot,
    n_bodies,
    n_joints,
    stamp,
):
    """Mark the island of a sleeping end of joint slot that its awake end moves."""
    a, b = _joint_ends(joints, joint_slot, n_bodies, n_joints)
    if bodies.enabled[a] == 0 or bodies.enabled[b] == 0:
        pass  # a joint with a disabled body is out of the simulation
    elif bodies.sleeping[b] == 1 and _pushes(model, bodies, a, n_bodies, _JOINT):
        islands.wake[_island_of(bodies, b, n_bodies)] = stamp
    if bodies.sleeping[a] == 1 and _pushes(model, bodies, b, n_bodies, _JOINT):
        islands.wake[_island_of(bodies, a, n_bodies)] = stamp


@ti.func
def _mark_force_wake(bodies: ti.template(), islands: ti.template(), slot, n_bodies, stamp):
    """Mark the island of body slot if it sleeps under an applied force or torque."""
    if bodies.sleeping[slot] == 1 and (
        bodies.force[slot].norm() > 0.0 or bodies.torque[slot] != 0.0
    ):
        islands.wake[_island_of(bodies, slot, n_bodies)] = stamp


@ti.func
def _wake_marked(
    bodies: ti.template(), islands: ti.template(), serial: ti.template(), n_slots, n_bodies, stamp
):
    """Wake every body of the islands marked with this call's stamp; returns how many woke.
    Called at a kernel's top level, after the marks."""
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        _wake_if_marked(bodies, islands, slot, n_bodies, stamp)
    return islands.woken[None]


@quick
@ti.kernel
def _wake_launch(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    islands: ti.template(),
    serial: ti.template(),
    n_slots: ti.i32,
    n_bodies: ti.i32,
    n_pairs: ti.i32,
    n_joints: ti.i32,
    kept: ti.template(),
) -> ti.i32:
    stamp = _new_stamp(islands)
    ti.loop_config(serialize=serial)
    for e in range(n_pairs):
        _mark_pushed_sleeper(
            model,
            bodies,
            previous,
            islands,
            manifolds.body_a[e],
            manifolds.body_b[e],
            n_bodies,
            stamp,
            kept,
        )
    _mark_joint_and_force_wakes(
        model, bodies, joints, islands, serial, n_slots, n_bodies, n_joints, stamp
    )
    return _wake_marked(bodies, islands, serial, n_slots, n_bodies, stamp)


@ti.func
def wake_islands_by_team(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    islands: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_slots,
    n_bodies,
    n_pairs,
    n_joints,
    kept: ti.template(),
):
    """wake_islands(kept) on a team, inside its launch (fused's kept step, after its refit or
    its broad phase: StepOptions.wake_in_launch): member 0 takes the call's stamp, the
    members mark their shares of the n_pairs pairs, the joints and the applied forces, then
    wake their shares of the marked islands' bodies, the team meeting between. The same
    marks and wakes as _wake_launch's loops (each mark writes the stamp, whatever the
    order). Returns the bodies woken, the same for every member."""
    if member == 0:
        _new_stamp(islands)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    stamp = islands.stamp[None]  # (after the team met: team.barrier)
    lo, hi = team.share(0, n_pairs, member, n_members)
    for e in range(lo, hi):
        _mark_pushed_sleeper(
            model,
            bodies,
            previous,
            islands,
            manifolds.body_a[e],
            manifolds.body_b[e],
            n_bodies,
            stamp,
            kept,
        )
    n_joint_slots = n_joints * (n_slots // ti.max(n_bodies, 1))
    lo, hi = team.share(0, n_joint_slots + n_slots, member, n_members)
    for e in range(lo, hi):
        _mark_joint_or_force_wake(
            model, bodies, joints, islands, e, n_joint_slots, n_bodies, n_joints, stamp
        )
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    lo, hi = team.share(0, n_slots, member, n_members)
    for slot in range(lo, hi):
        _wake_if_marked(bodies, islands, slot, n_bodies, stamp)
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    return islands.woken[None]  # (after the team met: team.barrier)


@quick
@ti.kernel
def _find_pairs_waking_by_world(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    previous: ti.template(),
    islands: ti.template(),
    coloring: ti.template(),
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    n_joints: ti.i32,
    cell_size: ti.f32,
    margin: ti.f32,
    motion_time: ti.f32,
    fat: ti.i32,
    save: ti.i32,
    n_old: ti.i32,
    ordered: ti.i32,
    colored: ti.i32,
) -> ti.math.ivec3:
    """The small worlds' broad phase (broad_phase._find_pairs_by_world) with wake_islands
    between its parts, a world per thread, after last step's pairs are saved where `save`
    (pairs.save_pairs, of n_old pairs; not in a launch again after the pool grew, whose
    first launch overwrote them): the bodies placed, the islands that the pairs
    found now would wake woken (_wake_launch's marks: each sleeping body checks the bodies
    of its world, as the pair's owner would), then the pairs counted; then written. Waking
    changes no box (a sleeping body has no velocity), only which pairs are wanted, so the
    pairs are those of a broad phase, wake_islands and a second broad phase: one pass over
    the bodies instead of two. A world's marks and wakes are its own (its islands, its
    joints), so a world at a time gives what each part over every world gives, bit for
    bit, in one loop instead of seven, and a prefix sum over the worlds instead of the
    slots (4,096 small worlds, soft step, 2-core CPU, old and new revision in turns, best
    of three 10-step windows from step 30: the launch 1.68-1.74 -> 1.51-1.53 ms)."""
    return find_pairs_waking(
        model,
        bodies,
        joints,
        manifolds,
        grid,
        counts,
        scan,
        serial,
        previous,
        islands,
        coloring,
        n_worlds,
        n_bodies,
        n_joints,
        cell_size,
        margin,
        motion_time,
        fat,
        save,
        n_old,
        ordered,
        colored,
        1,
    )


@ti.func
def find_pairs_waking(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    previous: ti.template(),
    islands: ti.template(),
    coloring: ti.template(),
    n_worlds,
    n_bodies,
    n_joints,
    cell_size,
    margin,
    motion_time,
    fat,
    save,
    n_old,
    ordered,
    colored,
    go,
):
    """_find_pairs_waking_by_world's loops (its answer), for a kernel of its own or the small
    worlds' step in one launch (fused.step_by_world); `go` 0: nothing is saved, woken or
    written, the answer zeros (a launch of steps in flight after one stopped). Called at a
    kernel's top level: its loops are the kernel's."""
    save_pairs(
        manifolds,
        previous,
        coloring,
        serial,
        n_worlds * n_bodies,
        n_old,
        ordered,
        colored,
        save * go,
    )
    stamp = 0
    if go == 1:
        begin_world_pairs(counts)
        stamp = _new_stamp(islands)
    ti.loop_config(serialize=serial)
    for world in range(n_worlds * go):
        first_slot, end_slot = world * n_bodies, (world + 1) * n_bodies
        place_world(
            model, bodies, grid, counts, world, n_bodies, cell_size, margin, motion_time, fat
        )
        for slot in range(first_slot, end_slot):
            if bodies.sleeping[slot] == 1:
                for other in range(first_slot, end_slot):
                    if world_pair_found(model, bodies, joints, grid, slot, other, n_bodies):
                        _mark_pushed_sleeper(
                            model,
                            bodies,
                            previous,
                            islands,
                            ti.min(slot, other),
                            ti.max(slot, other),
                            n_bodies,
                            stamp,
                            False,
                        )
        for joint_slot in range(world * n_joints, (world + 1) * n_joints):
            _mark_joint_wake(model, bodies, joints, islands, joint_slot, n_bodies, n_joints, stamp)
        for slot in range(first_slot, end_slot):
            _mark_force_wake(bodies, islands, slot, n_bodies, stamp)
        for slot in range(first_slot, end_slot):
            _wake_if_marked(bodies, islands, slot, n_bodies, stamp)
        count_world_partners(model, bodies, joints, manifolds, grid, world, n_bodies)
    return write_world_pairs(manifolds, grid, counts, scan, serial, n_worlds, n_bodies, go)


def find_pairs_waking_by_world(
    ctx: "StepContext", groups, margin: float, motion_time: float, fat: bool, save: bool = False
):
    """broad_phase.find_candidate_pairs' launch for small worlds (its `by_world`) in a
    step: their pairs found and the islands those pairs push woken, in one launch
    (_find_pairs_waking_by_world; the step then needs no wake_islands); `save`: last step's
    pairs saved first (pairs.save_previous_pairs), in the same launch."""
    pool = ctx.pool
    return _find_pairs_waking_by_world(
        *groups,
        pool.previous,
        pool.islands,
        pool.coloring,
        ctx.n_worlds,
        ctx.n_bodies,
        ctx.n_joints,
        ctx.cell_size,
        margin,
        motion_time,
        int(fat),
        int(save),
        *saved_pairs_args(ctx),
    )


def wake_islands(ctx: "StepContext", kept: bool = False) -> int:
    """Wake the sleeping islands that awake bodies are about to push (see the module
    docstring); returns how many bodies woke.

    Call it every step right after the broad phase, before pairs.carry_contacts (it tells
    new pairs by last step's, `previous`, as carry_contacts does). The broad phase pairs no
    two sleeping bodies, so when bodies woke (the result is > 0) the broad phase must run
    again to pair them with each other before the substeps. `kept`: instead of the broad
    phase, the step would keep last step's pairs (pairs.keeps_pairs), still in `contacts`:
    every pair is one the step before had; when bodies woke the step must find its pairs
    after all (step.find_pairs with woken=True).
    """
    pool = ctx.pool
    return _wake_launch(
        model=pool.model,
        bodies=pool.bodies,
        joints=pool.joints,
        manifolds=pool.manifolds,
        previous=pool.previous,
        islands=pool.islands,
        serial=ctx.serial,
        n_slots=ctx.n_slots,
        n_bodies=ctx.n_bodies,
        n_pairs=ctx.n_pairs,
        n_joints=ctx.n_joints,
        kept=kept,
    )


@quick
@ti.kernel
def _wake_launch_disabled(
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    islands: ti.template(),
    serial: ti.template(),
    n_slots: ti.i32,
    n_bodies: ti.i32,
    n_pairs: ti.i32,
    n_joints: ti.i32,
):
    n_joint_slots = n_joints * (n_slots // ti.max(n_bodies, 1))
    stamp = _new_stamp(islands)
    ti.loop_config(serialize=serial)
    for e in range(n_pairs + n_joint_slots):
        a, b = -1, -1
        if e < n_pairs:
            a, b = manifolds.body_a[e], manifolds.body_b[e]
        else:
            a, b = _joint_ends(joints, e - n_pairs, n_bodies, n_joints)
        off_a, off_b = bodies.enabled[a] == 0, bodies.enabled[b] == 0
        if off_a != off_b:
            other = b if off_a else a
            if bodies.sleeping[other] == 1:
                islands.wake[_island_of(bodies, other, n_bodies)] = stamp
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        _wake_if_marked(bodies, islands, slot, n_bodies, stamp)


def wake_what_disabled_bodies_held(ctx: "StepContext"):
    """Wake the sleeping islands that touched (the pairs reported touching at the end of the
    last step, which keep a sleeping body's contacts: the broad phase pairs no sleeping
    body with a static one) or were jointed to a body now disabled: a box asleep on a floor
    that is taken away falls (a disabled body pairs with nothing, so wake_islands never sees
    it go). Returns nothing, so that nothing waits for the device (a GPU's steps in flight
    go on)."""
    pool = ctx.pool
    _wake_launch_disabled(
        bodies=pool.bodies,
        joints=pool.joints,
        manifolds=pool.reported,
        islands=pool.islands,
        serial=ctx.serial,
        n_slots=ctx.n_slots,
        n_bodies=ctx.n_bodies,
        n_pairs=ctx.cache.n_reported,
        n_joints=ctx.n_joints,
    )
