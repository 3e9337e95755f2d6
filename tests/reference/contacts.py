"""Reference contacts in float64 NumPy: the closing-speed bound by brute force over a fine
sweep of surface normals; one position-pass push-out (XPBD); one point's sequential
impulses with Coulomb friction.

The references of solver/contacts.py's closing_speed (how fast two bodies can close after
one impact each, the margin a pair is looked for with), resolve_penetration and
solve_velocity (one point against a static body)."""

import numpy as np

from fx2d_gpu.physics.solver.contacts import CONTACT_COMPLIANCE, MAX_PUSHOUT_SPEED

_ANGLES = np.linspace(0.0, 2.0 * np.pi, 721)
NORMALS = np.stack([np.cos(_ANGLES), np.sin(_ANGLES)], 1)  # the sweep: every half degree


def after_impacts(velocity, restitution, normals=NORMALS):
    """The velocity (2,) as it is and after a single impact of restitution `restitution`
    with a surface of each normal m it moves into (v - (1 + e)(v.m)m): (1 + hits, 2)."""
    along = normals @ velocity
    hit = along < 0.0  # a surface the body moves into
    out = velocity - (1.0 + restitution) * along[hit, None] * normals[hit]
    return np.vstack([velocity[None], out])


def closing_speed(velocity_a, restitution_a, velocity_b, restitution_b):
    """The fastest two bodies can close along any direction once each has had at most one
    impact: the largest |a' - b'| over the sweep of both bodies' normals."""
    a = after_impacts(np.asarray(velocity_a, np.float64), float(restitution_a))
    b = after_impacts(np.asarray(velocity_b, np.float64), float(restitution_b))
    return np.linalg.norm(a[:, None] - b[None], axis=2).max()


def cross(r, v):
    return r[0] * v[1] - r[1] * v[0]


def perp(r):
    return np.array([-r[1], r[0]])


def reference_push(slop, h, normal, depths, arms_a, arms_b, wa, ia, wb, ib):
    """resolve_penetration's docstring in NumPy: each point deeper than the slop gets
    lambda = min(d - slop, MAX_PUSHOUT_SPEED h) / (count K), K = w_a + w_b + I_a (r_a x n)^2
    + I_b (r_b x n)^2 + compliance / h^2, all from the same poses. Returns
    (shift_a, turn_a, shift_b, turn_b)."""
    count = len(depths)
    shift_a, turn_a, shift_b, turn_b = np.zeros(2), 0.0, np.zeros(2), 0.0
    for depth, ra, rb in zip(depths, arms_a, arms_b, strict=True):
        if depth > slop:
            rna, rnb = cross(ra, normal), cross(rb, normal)
            k = wa + wb + ia * rna**2 + ib * rnb**2 + CONTACT_COMPLIANCE / h**2
            lam = min(depth - slop, MAX_PUSHOUT_SPEED * h) / (count * k)
            shift_a -= wa * lam * normal
            turn_a -= ia * lam * rna
            shift_b += wb * lam * normal
            turn_b += ib * lam * rnb
    return shift_a, turn_a, shift_b, turn_b


def sequential_impulse(v, w, r, normal, wb, ib, target, mu):
    """One point of a body against a static one (a point of b at arm r), Box2D's sequential
    impulses: normal jn = max((target - vn) m_n, 0) applied, then the tangent impulse
    jt = clamp(-vt m_t, -mu jn, mu jn) (Coulomb); tangent = (-n.y, n.x).
    Returns (v, w, jn, jt)."""
    tangent = perp(normal)
    vn = (v + w * perp(r)) @ normal
    jn = max((target - vn) / (wb + ib * cross(r, normal) ** 2), 0.0)
    v, w = v + wb * jn * normal, w + ib * cross(r, jn * normal)
    vt = (v + w * perp(r)) @ tangent
    limit = mu * jn
    jt = min(max(-vt / (wb + ib * cross(r, tangent) ** 2), -limit), limit)
    return v + wb * jt * tangent, w + ib * cross(r, jt * tangent), jn, jt


def manifold_sweep(
    velocities, masses, normal, arms_a, arms_b, targets, mu, normal_impulses, tangent_impulses
):
    """One Gauss-Seidel sweep over a manifold between two moving bodies, row by row from
    the bodies' velocities (solve_velocity's sweep without the block solver): for each point
    in turn, its normal row (accumulated jn >= 0, the point's normal velocity brought to
    its target) applied to both bodies, then its friction row on the velocities that left
    (accumulated jt within +-mu jn). velocities = (v_a (2,), w_a, v_b (2,), w_b); masses =
    (w_a, I_a, w_b, I_b); arms (count, 2). Returns (velocities, normal impulses, tangent
    impulses) after the sweep."""
    va, wa, vb, wb = (
        np.array(velocities[0], np.float64),
        float(velocities[1]),
        np.array(velocities[2], np.float64),
        float(velocities[3]),
    )
    inv_ma, inv_ia, inv_mb, inv_ib = masses
    normal = np.asarray(normal, np.float64)
    tangent = perp(normal)
    jn = np.array(normal_impulses, np.float64)
    jt = np.array(tangent_impulses, np.float64)

    def closing(ra, rb, direction):
        return (vb + wb * perp(rb) - va - wa * perp(ra)) @ direction

    def mass(ra, rb, direction):
        return 1.0 / (
            inv_ma
            + inv_mb
            + inv_ia * cross(ra, direction) ** 2
            + inv_ib * cross(rb, direction) ** 2
        )

    for i, (ra, rb) in enumerate(zip(arms_a, arms_b, strict=True)):
        for direction in (normal, tangent):
            if direction is normal:
                new = max(
                    jn[i] + (targets[i] - closing(ra, rb, normal)) * mass(ra, rb, normal), 0.0
                )
                change, jn[i] = new - jn[i], new
            else:
                limit = mu[i] * jn[i]
                new = min(
                    max(jt[i] - closing(ra, rb, tangent) * mass(ra, rb, tangent), -limit), limit
                )
                change, jt[i] = new - jt[i], new
            impulse = change * direction
            va, wa = va - inv_ma * impulse, wa - inv_ia * cross(ra, impulse)
            vb, wb = vb + inv_mb * impulse, wb + inv_ib * cross(rb, impulse)
    return (va, wa, vb, wb), jn, jt
