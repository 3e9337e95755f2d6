"""Reference spatial queries in float64 NumPy, by brute force over every body, written for
clarity: a ray against each shape analytically (a shape with a skin is the union of its
core, a rectangle outside each edge and a disc at each vertex: convex pieces, whose ray
intervals join into the shape's), overlaps from the exact distance between cores.

Each answer comes with how close it is to flipping (a grazing ray, a touching overlap), so
tests can skip cases float32 may round either way.
"""

import numpy as np

from fx2d_gpu.enums import SHAPE_CHAIN, SHAPE_CIRCLE

from .geometry import _closest, _segments, core, core_distance


def _polygon_interval(vertices, o, d):
    """(t_in, t_out) of the line o + t d through a convex polygon (either winding), or None."""
    v = np.asarray(vertices, float)
    area = 0.5 * np.sum(v[:, 0] * np.roll(v[:, 1], -1) - np.roll(v[:, 0], -1) * v[:, 1])
    if area < 0:
        v = v[::-1]
    t_in, t_out = -np.inf, np.inf
    for i in range(len(v)):
        e = v[(i + 1) % len(v)] - v[i]
        n = np.array([e[1], -e[0]])  # outward for counter-clockwise
        num, den = n @ (v[i] - o), n @ d
        if den == 0.0:
            if num < 0.0:
                return None
        elif den < 0.0:
            t_in = max(t_in, num / den)
        else:
            t_out = min(t_out, num / den)
    return (t_in, t_out) if t_in <= t_out else None


def _circle_interval(c, r, o, d):
    m = o - c
    b = m @ d
    disc = b * b - (m @ m - r * r)
    if disc < 0.0:
        return None
    root = np.sqrt(disc)
    return (-b - root, -b + root)


def ray_shape(shape, position, angle, o, d, max_distance):
    """The ray (origin o, unit direction d) against one shape: (t or None, ambiguous).

    t: distance to where the ray enters the shape (0 when it starts inside), within
    max_distance. ambiguous: float32 may answer otherwise (the ray grazes it, meets it
    within 1e-5 m of max_distance or crosses a segment near an end or nearly along it).
    """
    vertices, skin = core(shape, position, angle)
    if shape.kind != SHAPE_CIRCLE and len(vertices) == 2 and skin == 0.0:
        a, b = vertices
        e = b - a
        denom = d[0] * e[1] - d[1] * e[0]
        length = np.linalg.norm(e)
        if abs(denom) < 1e-3 * length:
            return None, True
        w = a - o
        t = (w[0] * e[1] - w[1] * e[0]) / denom
        u = (w[0] * d[1] - w[1] * d[0]) / denom
        front = np.array([-e[1], e[0]]) / length  # left of a -> b: a chain link's front
        near_end = min(abs(u), abs(u - 1.0)) * length < 1e-4
        if shape.kind == SHAPE_CHAIN and front @ d >= 0.0:
            return None, False
        hit = 0.0 <= u <= 1.0 and 0.0 <= t <= max_distance
        ambiguous = near_end or abs(t) < 1e-5 or abs(t - max_distance) < 1e-5
        return (t if hit else None), ambiguous
    pieces = []
    if len(vertices) >= 3:
        pieces.append(_polygon_interval(vertices, o, d))
    if skin > 0.0:
        for v in vertices:
            pieces.append(_circle_interval(v, skin, o, d))
        # A rectangle outside each edge (a segment's two sides); the right of a -> b is
        # outward for a counter-clockwise core.
        edges = (
            []
            if len(vertices) == 1
            else (
                [(vertices[0], vertices[1]), (vertices[1], vertices[0])]
                if len(vertices) == 2
                else _segments(vertices)
            )
        )
        for a, b in edges:
            e = b - a
            n = np.array([e[1], -e[0]]) / np.linalg.norm(e)
            pieces.append(_polygon_interval([a, b, b + skin * n, a + skin * n], o, d))
    pieces = [p for p in pieces if p is not None]
    if not pieces:
        return None, False
    t_in = min(p[0] for p in pieces)
    t_out = max(p[1] for p in pieces)
    if t_out < 0.0:
        return None, False
    chord = t_out - max(t_in, 0.0)
    t = max(t_in, 0.0)
    ambiguous = chord < 0.05 or abs(t - max_distance) < 1e-5 or (0.0 < abs(t_in) < 1e-5)
    return (t if t <= max_distance else None), ambiguous


def ray_cast(shapes, poses, skip, o, d, max_distance):
    """Every body the ray enters: (sorted [(t, body)], set of ambiguous bodies). shapes:
    per body; poses: (position (n, 2), angle (n,)); skip: bodies no query sees."""
    d = np.asarray(d, float) / np.linalg.norm(d)
    hits, ambiguous = [], set()
    for body, shape in enumerate(shapes):
        if body in skip:
            continue
        t, unsure = ray_shape(
            shape, poses[0][body], poses[1][body], np.asarray(o, float), d, max_distance
        )
        if unsure:
            ambiguous.add(body)
        if t is not None:
            hits.append((t, body))
    return sorted(hits), ambiguous


def _crosses(a0, a1, b0, b1):
    def side(p, q, r):
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])

    return side(a0, a1, b0) * side(a0, a1, b1) < 0.0 and side(b0, b1, a0) * side(b0, b1, a1) < 0.0


def _inside(p, vertices):
    """p in a convex polygon of >= 3 vertices (either winding), boundary included."""
    if len(vertices) < 3:
        return False
    sides = [
        (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])
        for a, b in _segments(vertices)
    ]
    return min(sides) >= 0.0 or max(sides) <= 0.0


def overlap(va, ra, vb, rb):
    """Two cores (vertices, world space) with skins: (overlap, ambiguous). They overlap when
    the cores are within ra + rb of each other (or cross, or one holds the other);
    ambiguous within 1e-5 m of touching."""
    distance, _, _ = core_distance(va, vb)
    intersect = any(
        _crosses(a0, a1, b0, b1) for a0, a1 in _segments(va) for b0, b1 in _segments(vb)
    )
    intersect = intersect or _inside(va[0], vb) or _inside(vb[0], va)
    skins = ra + rb
    if intersect:
        # Barely overlapping cores have a vertex near the other's boundary.
        return True, skins < 1e-5 and distance < 1e-5
    return distance <= skins, abs(distance - skins) < 1e-5


def query_overlaps(shapes, poses, skip, query_vertices, query_skin):
    """(set of bodies the query core overlaps, set of ambiguous bodies)."""
    found, ambiguous = set(), set()
    qv = np.asarray(query_vertices, float)
    for body, shape in enumerate(shapes):
        if body in skip:
            continue
        vb, rb = core(shape, poses[0][body], poses[1][body])
        hit, unsure = overlap(qv, query_skin, vb, rb)
        if hit:
            found.add(body)
        if unsure:
            ambiguous.add(body)
    return found, ambiguous


def closest_on_core(p, vertices):
    """The point of a core nearest p (p itself inside a polygon core)."""
    if _inside(p, vertices):
        return p
    best = min(
        (_closest(p, a, b) for a, b in _segments(vertices)), key=lambda q: np.linalg.norm(q - p)
    )
    return best
