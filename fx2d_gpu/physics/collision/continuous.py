"""Continuous collision: no body's centre crosses what it must not pass, at any speed.

After each substep's position pass, every body whose centre moved farther than its core
radius in the substep (a fast body) has its core, a circle about its centre of
CORE_FRACTION of the largest circle about the centre inside its shape (core_radius), swept
from where the substep began to where the body is now, against the shapes of its pairs that
it must not pass: immovable bodies (static, kinematic, asleep) and, for a bullet
(`bullet=True`), the dynamic bodies that are not bullets. Where the core first comes
within SWEEP_TARGET of one (time_of_impact: conservative advancement on exact
point-to-shape distances), the body is put back to that moment of the substep with its
velocity; the substep's velocity pass, or the next substep's contact, stops it there. A body
whose core is already that close when the substep begins and moves deeper stays where the
substep began. This is Box2D v3's continuous collision (time of impact of a fast body
against static shapes, bullets against dynamic ones), per substep instead of per step.

Speculative contacts (solver/contacts.py) stop fast bodies before what they meet; this
catches what they cannot: a body whose velocity turns within a substep (a bullet
ricocheting between two walls 0.3 m apart at 300 m/s, a spinning capsule) is through the
other wall before the next narrow phase has looked. Only the core is kept out, so the body
may end a substep deep in what it hit, its centre in front: the contacts push it out from
there, the right way.

Two passes, so that no thread reads a pose another is changing: every fast body against
its immovable partners (they never move here), then every fast bullet against its dynamic
partners that are not bullets, at their poses after the first pass.
"""

import taichi as ti

from ...enums import SHAPE_CHAIN, SHAPE_CIRCLE
from ..bodies import bounding_radius, moves, shape_row
from ..integrate import displace
from ..math2d import rotate_inv
from .queries import point_segment_distance

vec2 = ti.math.vec2

#: A body's core: this fraction of the largest circle about its centre inside its shape
#: (Box2D v3 sweeps its bodies' cores alike, b2_coreFraction). Small enough that resting
#: and sliding contacts never reach it, so only a body about to pass through is stopped.
CORE_FRACTION = 0.25
#: A swept core stops this fraction of its radius short of what it meets.
SWEEP_TARGET = 0.5
#: Most steps of conservative advancement per pair and substep; a sweep that has not
#: ended by then stops where it is (every step of it is safe).
SWEEP_ITERATIONS = 20


@ti.func
def point_distance(model: ti.template(), row, p):
    """Signed distance (m) from point p (body frame) to the shape of shape row `row`
    (bodies.shape_row), core and skin (negative inside)."""
    distance = 0.0
    if model.shape_kind[row] == SHAPE_CIRCLE:
        distance = (p - model.shape_center[row]).norm()
    else:
        count = model.shape_vertex_count[row]
        inside = -ti.math.inf
        if count >= 3:
            for i in range(count):
                inside = ti.max(
                    inside, model.shape_normals[row, i].dot(p - model.shape_vertices[row, i])
                )
        if count >= 3 and inside <= 0.0:
            distance = inside
        else:
            distance = ti.math.inf
            for i in range(count if count >= 3 else 1):
                distance = ti.min(
                    distance,
                    point_segment_distance(
                        p, model.shape_vertices[row, i], model.shape_vertices[row, (i + 1) % count]
                    ),
                )
    return distance - model.shape_radius[row]


@ti.func
def core_radius(model: ti.template(), row):
    """Radius (m) of the core of shape row `row` (bodies.shape_row): CORE_FRACTION of the
    largest circle about its centre (the body origin) inside its shape."""
    inner = 0.0
    if model.shape_kind[row] == SHAPE_CIRCLE:
        inner = -(model.shape_center[row].norm())
    else:
        count = model.shape_vertex_count[row]
        if count >= 3:
            inner = ti.math.inf
            for i in range(count):  # the centre's distance to each edge's line
                inner = ti.min(inner, model.shape_normals[row, i].dot(model.shape_vertices[row, i]))
        else:
            inner = -point_segment_distance(
                vec2(0.0, 0.0), model.shape_vertices[row, 0], model.shape_vertices[row, 1]
            )
    return CORE_FRACTION * ti.max(inner + model.shape_radius[row], 0.0)


@ti.func
def time_of_impact(
    model: ti.template(),
    row,
    start,
    motion,
    core,
    other_start,
    other_motion,
    other_angle,
    other_turn,
):
    """When (0..1 of the substep) a core of radius `core` whose centre moves from `start` by
    `motion` (m) first comes within SWEEP_TARGET of it of the other body's shape (its shape
    row `row`, bodies.shape_row),
    which moves from `other_start` by `other_motion` (m) and turns from `other_angle` by
    `other_turn` (rad); 1: never. A core already that close at 0 gives 0 if it moves
    deeper, else 1. A chain link stops only cores that begin in front of it."""
    target = SWEEP_TARGET * core + 1e-6
    offset, relative = start - other_start, motion - other_motion
    # How far the centre can move in the other body's frame as t goes from 0 to 1.
    reach = relative.norm() + ti.abs(other_turn) * (offset.norm() + relative.norm())
    result = 1.0
    angle = other_angle
    first = rotate_inv(offset, ti.cos(angle), ti.sin(angle))
    skip = False
    if model.shape_kind[row] == SHAPE_CHAIN:  # one-sided: its front is normals[1]
        skip = model.shape_normals[row, 1].dot(first - model.shape_vertices[row, 0]) < 0.0
    if reach > 0.0 and not skip:
        distance = point_distance(model, row, first) - core
        if distance <= target:
            angle = other_angle + other_turn
            last = rotate_inv(offset + relative, ti.cos(angle), ti.sin(angle))
            if point_distance(model, row, last) - core < distance:
                result = 0.0
        else:
            t, done = 0.0, False
            for _ in range(SWEEP_ITERATIONS):
                if not done:
                    # Each advance leaves the distance above target / 2 whatever the path.
                    t += (distance - 0.5 * target) / reach
                    if t >= 1.0:
                        done = True
                    else:
                        angle = other_angle + t * other_turn
                        point = rotate_inv(offset + t * relative, ti.cos(angle), ti.sin(angle))
                        distance = point_distance(model, row, point) - core
                        if distance <= target:
                            result, done = t, True
            if not done:
                result = t
    return result


@ti.func
def sweep_body(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    slot,
    n_bodies,
    bullets,
):
    """Put body slot back to where its core first meets what it must not pass in this
    substep (see the module docstring); `bullets`: the second pass (bullets against dynamic
    bodies that are not bullets) instead of the first (every fast body against immovable
    ones)."""
    body = slot % n_bodies
    if (
        moves(model, bodies, slot, body)
        and model.kinematic[body] == 0
        and model.sensor[body] == 0
        and (not bullets or model.bullet[body] == 1)
    ):
        motion = bodies.delta_position[slot] - bodies.prev_delta_position[slot]
        distance = motion.norm()
        # The core is at most CORE_FRACTION of the bounding radius: most bodies stop here.
        core = 0.0
        if distance > CORE_FRACTION * bounding_radius(model, slot, body):
            core = core_radius(model, shape_row(model, slot, body))
        if distance > core and core > 0.0:
            start = bodies.position[slot] - motion
            earliest = 1.0
            for j in range(
                prepared.body_contact_start[slot], prepared.body_contact_start[slot + 1]
            ):
                pair = prepared.body_contacts[j]
                is_a = manifolds.body_a[pair] == slot
                other = manifolds.body_b[pair] if is_a else manifolds.body_a[pair]
                other_body = other % n_bodies
                masses = prepared.solver_mass[pair]
                immovable = (
                    (masses[2] == 0.0 and masses[3] == 0.0)
                    if is_a
                    else (masses[0] == 0.0 and masses[1] == 0.0)
                )
                considered = immovable and not bullets
                if bullets and not immovable:
                    considered = model.bullet[other_body] == 0
                if considered and model.sensor[other_body] == 0:
                    other_motion = bodies.delta_position[other] - bodies.prev_delta_position[other]
                    other_turn = bodies.delta_angle[other] - bodies.prev_delta_angle[other]
                    earliest = ti.min(
                        earliest,
                        time_of_impact(
                            model,
                            shape_row(model, other, other_body),
                            start,
                            motion,
                            core,
                            bodies.position[other] - other_motion,
                            other_motion,
                            bodies.angle[other] - other_turn,
                            other_turn,
                        ),
                    )
            if earliest < 1.0:
                turn = bodies.delta_angle[slot] - bodies.prev_delta_angle[slot]
                displace(bodies, slot, (earliest - 1.0) * motion, (earliest - 1.0) * turn)
