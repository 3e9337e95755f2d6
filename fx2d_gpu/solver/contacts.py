"""Contact constraints (seed 000): warm start, XPBD penetration resolution, velocity pass.

All functions handle one pair's manifold (up to 2 points) in one thread; the colouring
guarantees no other thread touches the same dynamic bodies meanwhile. Sleeping bodies act as
static ones (zero inverse mass).
"""

import taichi as ti

from ..math2d import cross, cross_sv

vec2 = ti.math.vec2

#: Penetration left alone by the position pass, m (avoids fighting contact noise).
LINEAR_SLOP = 0.002
#: XPBD compliance of contacts (seed: 1e-8), m/N.
CONTACT_COMPLIANCE = 1e-8
#: Restitution applies only to contacts closing faster than this, m/s (no micro-bounces).
RESTITUTION_THRESHOLD = 0.5
#: Points this far apart (m) are kept as speculative contacts: the velocity pass lets the
#: bodies close the gap but no more, so they land without overshooting.
SPECULATIVE_DISTANCE = 4.0 * LINEAR_SLOP
#: Points slipping slower than this (m/s) when the substep starts are held by static
#: friction (mu_s); faster ones slide with kinetic friction (mu_k). It is above the speed
#: gravity adds in one substep, so a body at rest stays at rest while mu_s allows.
STICK_SPEED = 0.05
#: Velocity iterations over a manifold's points per substep (multi-point convergence).
VELOCITY_ITERATIONS = 2


@ti.func
def solver_mass(p: ti.template(), slot, n_bodies):
    """(inverse mass, inverse inertia) as the solver sees them: 0 when static or asleep."""
    body = slot % n_bodies
    inv_mass, inv_inertia = 0.0, 0.0
    if p.body_sleeping[slot] == 0:
        inv_mass = p.body_inv_mass[body]
        inv_inertia = p.body_inv_inertia[body]
    return inv_mass, inv_inertia


@ti.func
def tangent_of(normal):
    return vec2(-normal.y, normal.x)


@ti.func
def apply_impulse(p: ti.template(), slot_a, slot_b, wa, ia, wb, ib, ra, rb, impulse):
    """Equal and opposite impulse (N s): -impulse on a at ra, +impulse on b at rb."""
    p.body_velocity[slot_a] -= wa * impulse
    p.body_angular_velocity[slot_a] -= ia * cross(ra, impulse)
    p.body_velocity[slot_b] += wb * impulse
    p.body_angular_velocity[slot_b] += ib * cross(rb, impulse)


@ti.func
def warm_start_body(p: ti.template(), slot, n_bodies):
    """Re-apply to one body the impulses its contacts carried at the end of the last substep.

    Gathered per body over its pairs in a fixed order (body_contacts), so the sum is the same
    on every run.
    """
    inv_mass, inv_inertia = solver_mass(p, slot, n_bodies)
    for j in range(p.body_contact_start[slot], p.body_contact_start[slot + 1]):
        pair = p.body_contacts[j]
        sign = 1.0 if p.pair_body_b[pair] == slot else -1.0  # b receives +impulse
        normal = p.contact_normal[pair]
        tangent = tangent_of(normal)
        for i in range(p.contact_point_count[pair]):
            impulse = sign * (p.contact_normal_impulse[pair, i] * normal
                              + p.contact_tangent_impulse[pair, i] * tangent)
            r = p.contact_point[pair, i] - p.body_position[slot]
            p.body_velocity[slot] += inv_mass * impulse
            p.body_angular_velocity[slot] += inv_inertia * cross(r, impulse)


@ti.func
def current_depth(p: ti.template(), pair, i, slot_a, slot_b):
    """A point's depth after the corrections made since the contacts were refreshed, m."""
    point = p.contact_point[pair, i]
    ra = point - p.body_anchor_position[slot_a]
    rb = point - p.body_anchor_position[slot_b]
    moved_a = (p.body_position[slot_a] - p.body_anchor_position[slot_a]
               + cross_sv(p.body_angle[slot_a] - p.body_anchor_angle[slot_a], ra))
    moved_b = (p.body_position[slot_b] - p.body_anchor_position[slot_b]
               + cross_sv(p.body_angle[slot_b] - p.body_anchor_angle[slot_b], rb))
    return p.contact_depth[pair, i] - p.contact_normal[pair].dot(moved_b - moved_a)


@ti.func
def resolve_penetration(p: ti.template(), pair, n_bodies, h):
    """XPBD position correction of each point deeper than the slop (seed 000).

    lambda = (d - slop) / (n_points K), K = w_a + w_b + I_a (r_a x n)^2 + I_b (r_b x n)^2
    + compliance / h^2; pose and previous pose move together, so no velocity is created.
    """
    count = p.contact_point_count[pair]
    slot_a, slot_b = p.pair_body_a[pair], p.pair_body_b[pair]
    wa, ia = solver_mass(p, slot_a, n_bodies)
    wb, ib = solver_mass(p, slot_b, n_bodies)
    normal = p.contact_normal[pair]
    for i in range(count):
        depth = current_depth(p, pair, i, slot_a, slot_b)
        if depth > LINEAR_SLOP:
            point = p.contact_point[pair, i]
            ra = point - p.body_position[slot_a]
            rb = point - p.body_position[slot_b]
            rna, rnb = cross(ra, normal), cross(rb, normal)
            k = wa + wb + ia * rna * rna + ib * rnb * rnb + CONTACT_COMPLIANCE / (h * h)
            lam = (depth - LINEAR_SLOP) / (count * k)
            shift_a, turn_a = -wa * lam * normal, -ia * lam * rna
            shift_b, turn_b = wb * lam * normal, ib * lam * rnb
            p.body_position[slot_a] += shift_a
            p.body_prev_position[slot_a] += shift_a
            p.body_angle[slot_a] += turn_a
            p.body_prev_angle[slot_a] += turn_a
            p.body_position[slot_b] += shift_b
            p.body_prev_position[slot_b] += shift_b
            p.body_angle[slot_b] += turn_b
            p.body_prev_angle[slot_b] += turn_b


@ti.func
def prepare_point(p: ti.template(), pair, i, slot_a, slot_b, n_bodies, ra, rb):
    """Per-step constants of a point for the velocity pass: lever arms and the inverse
    effective masses along the normal and the tangent (Box2D's prepare stage)."""
    wa, ia = solver_mass(p, slot_a, n_bodies)
    wb, ib = solver_mass(p, slot_b, n_bodies)
    normal = p.contact_normal[pair]
    tangent = tangent_of(normal)
    p.contact_arm_a[pair, i] = ra
    p.contact_arm_b[pair, i] = rb
    rna, rnb = cross(ra, normal), cross(rb, normal)
    rta, rtb = cross(ra, tangent), cross(rb, tangent)
    k_normal = wa + wb + ia * rna * rna + ib * rnb * rnb
    k_tangent = wa + wb + ia * rta * rta + ib * rtb * rtb
    p.contact_normal_mass[pair, i] = 1.0 / k_normal if k_normal > 0.0 else 0.0
    p.contact_tangent_mass[pair, i] = 1.0 / k_tangent if k_tangent > 0.0 else 0.0


@ti.func
def relative_velocity(p: ti.template(), slot_a, slot_b, ra, rb):
    return ((p.body_velocity[slot_b] + cross_sv(p.body_angular_velocity[slot_b], rb))
            - (p.body_velocity[slot_a] + cross_sv(p.body_angular_velocity[slot_a], ra)))


@ti.func
def solve_velocity(p: ti.template(), pair, n_bodies, h):
    """Normal impulses (accumulated, >= 0), Coulomb friction (mu_s while the point sticks,
    mu_k once it slides), then (last substep) restitution for points that closed faster than
    RESTITUTION_THRESHOLD.

    Speculative points (still apart) only stop the bodies from closing more than the gap.
    The accumulated impulses are kept for the next substep's warm start (restitution is not:
    re-applying a bounce would bounce twice).
    """
    count = p.contact_point_count[pair]
    if count > 0:
        slot_a, slot_b = p.pair_body_a[pair], p.pair_body_b[pair]
        wa, ia = solver_mass(p, slot_a, n_bodies)
        wb, ib = solver_mass(p, slot_b, n_bodies)
        body_a, body_b = slot_a % n_bodies, slot_b % n_bodies
        mu_s = ti.min(p.body_static_friction[body_a], p.body_static_friction[body_b])
        mu_k = ti.min(p.body_dynamic_friction[body_a], p.body_dynamic_friction[body_b])
        normal = p.contact_normal[pair]
        tangent = tangent_of(normal)
        # Touching: stop closing. Apart: close at most the gap in this substep.
        targets = vec2(0.0, 0.0)
        for i in ti.static(range(2)):
            if i < count:
                targets[i] = ti.min(current_depth(p, pair, i, slot_a, slot_b), 0.0) / h
        for _ in range(VELOCITY_ITERATIONS):
            for i in ti.static(range(2)):
                if i < count:
                    ra, rb = p.contact_arm_a[pair, i], p.contact_arm_b[pair, i]
                    vn = relative_velocity(p, slot_a, slot_b, ra, rb).dot(normal)
                    old = p.contact_normal_impulse[pair, i]
                    new = ti.max(old + (targets[i] - vn) * p.contact_normal_mass[pair, i], 0.0)
                    p.contact_normal_impulse[pair, i] = new
                    p.contact_max_impulse[pair, i] = ti.max(p.contact_max_impulse[pair, i], new)
                    apply_impulse(p, slot_a, slot_b, wa, ia, wb, ib, ra, rb, (new - old) * normal)

                    vt = relative_velocity(p, slot_a, slot_b, ra, rb).dot(tangent)
                    old_t = p.contact_tangent_impulse[pair, i]
                    candidate = old_t - vt * p.contact_tangent_mass[pair, i]
                    limit = mu_k * new
                    if p.contact_slide_speed[pair, i] < STICK_SPEED:
                        limit = mu_s * new  # not sliding: static friction
                    new_t = ti.math.clamp(candidate, -limit, limit)
                    p.contact_tangent_impulse[pair, i] = new_t
                    apply_impulse(p, slot_a, slot_b, wa, ia, wb, ib, ra, rb,
                                  (new_t - old_t) * tangent)
        # Restitution, once per step after the last substep's solve (as Box2D v3), for points
        # that closed faster than the threshold when the step began and pushed during it.
        restitution = ti.min(p.body_elasticity[body_a], p.body_elasticity[body_b])
        if p.step_counts[2] == 1 and restitution > 0.0:
            for i in ti.static(range(2)):
                approach = p.contact_approach_speed[pair, i]
                if (i < count and approach < -RESTITUTION_THRESHOLD
                        and p.contact_max_impulse[pair, i] > 0.0):
                    ra, rb = p.contact_arm_a[pair, i], p.contact_arm_b[pair, i]
                    vn = relative_velocity(p, slot_a, slot_b, ra, rb).dot(normal)
                    if vn < -restitution * approach:
                        impulse = (-restitution * approach - vn) * p.contact_normal_mass[pair, i]
                        apply_impulse(p, slot_a, slot_b, wa, ia, wb, ib, ra, rb, impulse * normal)
