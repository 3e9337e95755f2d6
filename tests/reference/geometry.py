"""Reference shapes (at their poses, AABBs) and narrow phase in float64 NumPy, written for
clarity, not speed. (The broad phase's brute-force pairs: broad_phase.py.)"""

import numpy as np

from fx2d_gpu.enums import SHAPE_CIRCLE

REFERENCE_FACE_TOLERANCE = 0.0005


def rotation(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


def world_shape(shape, position, angle):
    """('circle', centre, radius) or ('polygon', vertices (k,2), normals (k,2)) in world space."""
    r = rotation(angle)
    if shape.kind == SHAPE_CIRCLE:
        return ("circle", position + r @ shape.center, shape.radius)
    return ("polygon", position + shape.vertices @ r.T, shape.normals @ r.T)


def aabb(ws):
    if ws[0] == "circle":
        return ws[1] - ws[2], ws[1] + ws[2]
    return ws[1].min(axis=0), ws[1].max(axis=0)


def _closest_on_segment(p, a, b):
    e = b - a
    t = np.clip((p - a) @ e / (e @ e), 0.0, 1.0)
    return a + t * e


def circle_circle(c1, r1, c2, r2):
    d = c2 - c1
    dist = np.linalg.norm(d)
    depth = r1 + r2 - dist
    if depth <= 0:
        return None
    n = d / dist if dist > 1e-9 else np.array([0.0, 1.0])
    s1, s2 = c1 + r1 * n, c2 - r2 * n
    return n, [((s1 + s2) / 2, depth)]


def polygon_circle(verts, normals, c, r):
    """Normal from the polygon to the circle."""
    seps = np.einsum("ij,ij->i", normals, c - verts)
    k = len(verts)
    if seps.max() <= 0:  # centre inside: least-penetrated face
        i = int(np.argmax(seps))
        n = normals[i]
        surface = c - seps[i] * n
        depth = r - seps[i]
    else:
        cands = [_closest_on_segment(c, verts[i], verts[(i + 1) % k]) for i in range(k)]
        dists = [np.linalg.norm(c - q) for q in cands]
        i = int(np.argmin(dists))
        surface, dist = cands[i], dists[i]
        depth = r - dist
        if depth <= 0:
            return None
        n = (c - surface) / dist
    return n, [((surface + c - r * n) / 2, depth)]


def _max_separation(v1, n1, v2):
    """Per face of polygon 1: max projection gap of polygon 2 beyond that face (SAT)."""
    # Projection form: on axis n_i, polygon 1 reaches at most n_i.v1_i; polygon 2 starts at
    # min_j n_i.v2_j. Their difference is the separation along that axis.
    gaps = (v2 @ n1.T).min(axis=0) - np.einsum("ij,ij->i", n1, v1)
    i = int(np.argmax(gaps))
    return gaps[i], i


def polygon_polygon(va, na, vb, nb):
    sep_a, ia = _max_separation(va, na, vb)
    sep_b, ib = _max_separation(vb, nb, va)
    if sep_a > 0 or sep_b > 0:
        return None
    flip = sep_b > sep_a + REFERENCE_FACE_TOLERANCE
    if flip:
        rv, rn, iv, inn, edge = vb, nb, va, na, ib
    else:
        rv, rn, iv, inn, edge = va, na, vb, nb, ia
    k = len(rv)
    v1, v2, n = rv[edge], rv[(edge + 1) % k], rn[edge]
    j = int(np.argmin(inn @ n))
    segment = [iv[j], iv[(j + 1) % len(iv)]]
    # Sutherland-Hodgman: keep the part of the incident edge between the side planes.
    t = (v2 - v1) / np.linalg.norm(v2 - v1)
    for origin, direction in ((v1, t), (v2, -t)):
        d = [direction @ (q - origin) for q in segment]
        if d[0] < 0 and d[1] < 0:
            return None
        if d[0] < 0:
            segment[0] = segment[0] + (segment[1] - segment[0]) * d[0] / (d[0] - d[1])
        elif d[1] < 0:
            segment[1] = segment[1] + (segment[0] - segment[1]) * d[1] / (d[1] - d[0])
    points = []
    for q in segment:
        sep = n @ (q - v1)
        if sep <= 0:
            points.append((q - 0.5 * sep * n, -sep))
    if not points:
        return None
    return (-n if flip else n), points


def manifold(shape_a, pose_a, shape_b, pose_b):
    """(normal a->b, [(point, depth), ...]) or None; poses are (position, angle)."""
    wa, wb = world_shape(shape_a, *pose_a), world_shape(shape_b, *pose_b)
    if wa[0] == "circle" and wb[0] == "circle":
        return circle_circle(wa[1], wa[2], wb[1], wb[2])
    if wa[0] == "polygon" and wb[0] == "circle":
        return polygon_circle(wa[1], wa[2], wb[1], wb[2])
    if wa[0] == "circle" and wb[0] == "polygon":
        result = polygon_circle(wb[1], wb[2], wa[1], wa[2])
        return None if result is None else (-result[0], result[1])
    return polygon_polygon(wa[1], wa[2], wb[1], wb[2])


def sat_ambiguity(shape_a, pose_a, shape_b, pose_b):
    """How close a pair is to a tie in the choices the narrow phase makes (smaller = closer).

    Near a tie (two faces equally good, or a normal taken between points closer than 5 cm),
    float32 and float64 may legitimately differ by more than the tests' tolerance; tests skip
    pairs under 1e-4.
    """
    wa, wb = world_shape(shape_a, *pose_a), world_shape(shape_b, *pose_b)
    if wa[0] == "circle" and wb[0] == "circle":
        # The normal is the direction between the centres: ill-conditioned when they meet.
        return np.linalg.norm(wa[1] - wb[1]) / 0.05 * 1e-4
    if wa[0] == "circle" or wb[0] == "circle":
        (_, c, _), (_, verts, _) = (wa, wb) if wa[0] == "circle" else (wb, wa)
        # Near a vertex the normal is the direction from it to the centre (ill-conditioned
        # at short range, as 1e-7 relative error in float32 poses becomes error / distance).
        return np.linalg.norm(verts - c, axis=1).min() / 0.05 * 1e-4
    ga = (wb[1] @ wa[2].T).min(axis=0) - np.einsum("ij,ij->i", wa[2], wa[1])
    gb = (wa[1] @ wb[2].T).min(axis=0) - np.einsum("ij,ij->i", wb[2], wb[1])
    margins = [abs(gb.max() - ga.max() - REFERENCE_FACE_TOLERANCE), abs(max(ga.max(), gb.max()))]
    for g in (ga, gb):
        s = np.sort(g)
        margins.append(s[-1] - s[-2])
    # Incident-face choice and clip boundaries.
    flip = gb.max() > ga.max() + REFERENCE_FACE_TOLERANCE
    rn, inn = (wb[2], wa[2]) if flip else (wa[2], wb[2])
    n = rn[int(np.argmax(gb if flip else ga))]
    d = np.sort(inn @ n)
    margins.append(d[1] - d[0])
    return min(margins)


# ----------------------------------------------------------------------------- cores + skins
def core(shape, position, angle):
    """(vertices (k, 2), skin) of a shape's core in world space: a circle is its centre (k =
    1), a capsule or an edge its segment (k = 2), a polygon its vertices."""
    r = rotation(angle)
    if shape.kind == SHAPE_CIRCLE:
        return (position + r @ shape.center)[None, :], shape.radius
    return position + shape.vertices @ r.T, shape.radius


def _segments(vertices):
    k = len(vertices)
    if k == 1:
        return [(vertices[0], vertices[0])]
    if k == 2:
        return [(vertices[0], vertices[1])]
    return [(vertices[i], vertices[(i + 1) % k]) for i in range(k)]


def _closest(p, a, b):
    e = b - a
    if e @ e == 0.0:
        return a
    return a + np.clip((p - a) @ e / (e @ e), 0.0, 1.0) * e


def core_distance(va, vb):
    """(distance, point on a, point on b) between two cores by brute force over every vertex
    of one against every segment of the other (exact for disjoint convex cores)."""
    best = (np.inf, None, None)
    for p in va:
        for a, b in _segments(vb):
            q = _closest(p, a, b)
            if np.linalg.norm(q - p) < best[0]:
                best = (np.linalg.norm(q - p), p, q)
    for q in vb:
        for a, b in _segments(va):
            p = _closest(q, a, b)
            if np.linalg.norm(q - p) < best[0]:
                best = (np.linalg.norm(q - p), p, q)
    return best


def _faces(vertices):
    """(outward unit normal, a point on the face) of a core's edges (a segment's two sides,
    a counter-clockwise polygon's edges); none for a point."""
    if len(vertices) == 1:
        return []
    out = []
    for a, b in _segments(vertices):
        d = (b - a) / np.linalg.norm(b - a)
        out.append((np.array([d[1], -d[0]]), a))
        if len(vertices) == 2:
            out.append((np.array([-d[1], d[0]]), a))
    return out


def cores_overlap_depth(va, vb):
    """For overlapping cores (k >= 2 each), SAT by faces: how far the other core reaches
    past each face of either; the least of them, its normal oriented from a to b (a's faces
    point from a to b, b's the other way), and the gap to the next least (how close the
    choice is to a tie). None when some face separates them."""
    reaches = []
    for vertices, other, sign in ((va, vb, 1.0), (vb, va, -1.0)):
        for normal, point in _faces(vertices):
            reach = normal @ point - (other @ normal).min()
            if reach <= 0:
                return None
            reaches.append((reach, sign * normal))
    reaches.sort(key=lambda item: item[0])
    tie = reaches[1][0] - reaches[0][0] if len(reaches) > 1 else np.inf
    return reaches[0][0], reaches[0][1], tie


def skin_contact(shape_a, pose_a, shape_b, pose_b):
    """(normal a -> b, depth) of the deepest contact of two shapes as cores with skins, or
    None, or "ambiguous" where two answers are nearly equally right: depth = both skins
    minus the distance between the cores (apart) or plus their least overlap (overlapping).
    Written independently of the narrow phase's SAT and
    clipping, which must agree with it at the deepest point."""
    va, ra = core(shape_a, *pose_a)
    vb, rb = core(shape_b, *pose_b)
    skins = ra + rb
    normal, depth = None, -np.inf
    if len(va) >= 2 and len(vb) >= 2:
        overlap = cores_overlap_depth(va, vb)
        if overlap is not None:
            if overlap[2] < 1e-3:
                return "ambiguous"  # two faces overlap nearly as little: either is right
            normal, depth = overlap[1], skins + overlap[0]
    elif len(va) == 1 or len(vb) == 1:
        point, other, sign = (va[0], vb, -1.0) if len(va) == 1 else (vb[0], va, 1.0)
        if len(other) >= 3:
            # A point inside a polygon core: out through the nearest face.
            faces = [
                (np.array([(b - a)[1], -(b - a)[0]]) / np.linalg.norm(b - a), a)
                for a, b in _segments(other)
            ]
            separations = [n @ (point - a) for n, a in faces]
            if max(separations) <= 0:
                i = int(np.argmax(separations))
                normal, depth = sign * faces[i][0], skins - separations[i]
    if normal is None:
        distance, p, q = core_distance(va, vb)
        if distance < 1e-9:
            return None  # touching cores: no well-defined normal (tests skip these)
        if len(va) >= 2 and len(vb) >= 2:
            # The narrow phase keeps a's face unless b's separates by REFERENCE_FACE_TOLERANCE
            # more (against flicker): near that tie either face's normal is its answer.
            gaps = [
                max((other @ n).min() - n @ point for n, point in _faces(vertices))
                for vertices, other in ((va, vb), (vb, va))
            ]
            if abs(gaps[0] - gaps[1]) < 2 * REFERENCE_FACE_TOLERANCE:
                return "ambiguous"
        normal, depth = (q - p) / distance, skins - distance
    return (normal, depth) if depth > 0 else None
