"""Reference broad phase in float64 NumPy: each body's exact AABB (from the reference
geometry of its shape at its pose) and every pair of boxes that overlap, by brute force.

The reference of collision/broad_phase.py's candidate pairs (Scene.candidate_pairs, the
step's pairs)."""

import numpy as np

from .geometry import aabb, world_shape


def exact_boxes(scene):
    """Each body's exact AABB, per world: (lower (n_worlds, n_bodies, 2), upper (same),
    the scene's state they were computed from)."""
    state = scene.get_state()
    lower = np.zeros((scene.n_worlds, scene.n_bodies, 2))
    upper = np.zeros_like(lower)
    for w in range(scene.n_worlds):
        for body in range(scene.n_bodies):
            shape = world_shape(
                scene.body_shape(body), state.position[w, body], state.angle[w, body]
            )
            lower[w, body], upper[w, body] = aabb(shape)
    return lower, upper, state


def brute_force_pairs(lower, upper, world, active):
    """All (world, a, b), a < b, whose AABBs overlap in the same world, with one side active.

    lower, upper: (n, 2); world: (n,); active: (n,) bool. Also returns the overlap slack of
    each pair (how far from touching), for tolerance at the boundary.
    """
    pairs, slack = [], []
    n = len(lower)
    for a in range(n):
        b = np.arange(a + 1, n)
        gap = np.minimum(upper[a], upper[b]) - np.maximum(lower[a], lower[b])  # (m, 2)
        ok = (gap.min(axis=1) >= 0) & (world[b] == world[a]) & (active[a] | active[b])
        near = (np.abs(gap).min(axis=1) < 1e-4) & (world[b] == world[a])
        for j in b[ok]:
            pairs.append((world[a], a, j))
        for j in b[near]:
            slack.append((world[a], a, j))
    return set(pairs), set(slack)


def scene_pairs(scene):
    """The pairs the broad phase must find in `scene` as it is: {(world, a, b)} of bodies
    whose exact boxes overlap, one of them awake and dynamic, and the set of pairs within
    1e-4 m of touching (float32 may round those either way)."""
    lower, upper, state = exact_boxes(scene)
    n = scene.n_bodies
    world = np.repeat(np.arange(scene.n_worlds), n)
    dynamic = np.array([scene.body_mass(b) > 0 for b in range(n)])
    active = np.tile(dynamic, scene.n_worlds) & ~state.sleeping.reshape(-1)
    expected, near = brute_force_pairs(lower.reshape(-1, 2), upper.reshape(-1, 2), world, active)
    expected = {(w, a % n, b % n) for w, a, b in expected}
    near = {(w, a % n, b % n) for w, a, b in near}
    return expected, near
