"""Narrow phase: one contact manifold per candidate pair, all pairs in parallel.

Conventions (the solver relies on them):
- the normal is a unit vector from body a to body b (a is the lower body slot);
- a manifold has 0, 1 or 2 points; each point lies halfway between the two surfaces and has
  its own depth (positive when the shapes overlap);
- each point has a feature id (reference edge, incident edge, clip end) that stays the same
  while the same features touch, so impulses can be matched from one step to the next.

Every shape is a core and a skin radius around it (Fx2D's unified shape, as in Box2D): a
circle is a point with a radius, a capsule a segment with one, an edge a segment without, a
rounded polygon a polygon with one. Two routines cover every pair: a point core against any
other core (collide_circles, collide_polygon_circle), and two cores of 2 or more vertices
(collide_polygons): SAT over both cores' edge normals (a segment has two, one per side), then
clip the incident edge against the reference edge's side planes (seed 000); the skins are
added in one place, when a separation becomes a depth and a point is placed halfway between
the two surfaces. Work is done in the reference body's frame, so precision does not depend
on how far the bodies are from the world origin.
"""

from typing import TYPE_CHECKING

import taichi as ti

from ...device.launching import quick
from ...enums import SHAPE_CHAIN, SHAPE_CIRCLE, SHAPE_POLYGON
from ...shapes import MAX_POLYGON_VERTICES
from ..bodies import shape_row
from ..math2d import rotate, rotate_inv

if TYPE_CHECKING:
    from ..solver.context import StepContext

vec2 = ti.math.vec2

#: A polygon's edge must beat the other's separation by this much (m) to become the reference;
#: the bias keeps the reference face from flickering between two nearly equal candidates.
#: Bodies smaller than REFERENCE_FACE_TOLERANCE / REFERENCE_FACE_FRACTION use that fraction
#: of the smaller bounding radius (half a millimetre is half a 1 mm box).
REFERENCE_FACE_TOLERANCE = 0.0005
REFERENCE_FACE_FRACTION = 0.01
#: Cores (without their skins) apart by more than this (m) can touch corner to corner
#: through their skins (see clip_polygons); Box2D v3 uses 0.1 of its linear slop.
DISJOINT_CORES = 0.0005
#: Feature ids of corner-to-corner points start here (clipped points' ids are below 2^10).
CORNER_FEATURE = 1 << 12


@ti.func
def body_frame(bodies: ti.template(), slot):
    angle = bodies.angle[slot]
    return bodies.position[slot], ti.cos(angle), ti.sin(angle)


@ti.func
def shape_extent(model: ti.template(), bodies: ti.template(), slot, body, axis):
    """(lowest, highest) projection (m) of body slot's shape, core and skin, on the unit
    world axis `axis`."""
    position, c, s = body_frame(bodies, slot)
    row = shape_row(model, slot, body)
    lowest, highest = ti.math.inf, -ti.math.inf
    if model.shape_kind[row] == SHAPE_CIRCLE:
        lowest = (position + rotate(model.shape_center[row], c, s)).dot(axis)
        highest = lowest
    else:
        for i in range(model.shape_vertex_count[row]):
            projection = (position + rotate(model.shape_vertices[row, i], c, s)).dot(axis)
            lowest = ti.min(lowest, projection)
            highest = ti.max(highest, projection)
    skin = model.shape_radius[row]
    return lowest - skin, highest + skin


@ti.func
def set_point(manifolds: ti.template(), pair, index, point, depth, feature):
    manifolds.point[pair, index] = point
    manifolds.depth[pair, index] = depth
    manifolds.feature[pair, index] = feature


@ti.func
def spawn_direction(body):
    """A unit vector of its own for each body (its index hashed to an angle): where two
    circles share a centre (n bodies spawned at one point), each is pushed out along its own
    direction, so that the pile spreads over the plane; one fixed direction for every pair
    would only stack them into a column."""
    angle = ti.cast(ti.cast(body, ti.u32) * ti.u32(2654435761) >> ti.u32(8), ti.f32) * (
        2.0 * ti.math.pi / 16777216.0
    )
    return vec2(ti.cos(angle), ti.sin(angle))


@ti.func
def concentric_normal(body_a, body_b):
    """The normal (from a to b) of two circles with the same centre: from body a's
    spawn_direction to body b's (any direction separates them; these spread a pile)."""
    chord = spawn_direction(body_b) - spawn_direction(body_a)
    normal = vec2(0.0, 1.0)
    if chord.norm() > 1e-6:
        normal = chord.normalized()
    return normal


@ti.func
def collide_circles(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    pair,
    slot_a,
    body_a,
    slot_b,
    body_b,
    margin,
):
    pos_a, ca, sa = body_frame(bodies, slot_a)
    pos_b, cb, sb = body_frame(bodies, slot_b)
    row_a, row_b = shape_row(model, slot_a, body_a), shape_row(model, slot_b, body_b)
    center_a = pos_a + rotate(model.shape_center[row_a], ca, sa)
    center_b = pos_b + rotate(model.shape_center[row_b], cb, sb)
    ra, rb = model.shape_radius[row_a], model.shape_radius[row_b]
    d = center_b - center_a
    distance = d.norm()
    depth = ra + rb - distance
    count = 0
    if depth > -margin:
        normal = concentric_normal(body_a, body_b)
        if distance > 1e-9:
            normal = d / distance
        manifolds.normal[pair] = normal
        set_point(manifolds, pair, 0, center_a + normal * (ra - 0.5 * depth), depth, 0)
        count = 1
    manifolds.point_count[pair] = count


@ti.func
def collide_polygon_circle(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    pair,
    slot_poly,
    body_poly,
    slot_circle,
    body_circle,
    polygon_is_a,
    margin,
):
    """A polygon, capsule or edge core (2 or more vertices, with its skin) against a circle;
    normal from a to b whichever of the two is body a. The skins add up: the circle's centre
    is tested against the core inflated by both radii."""
    pos, c, s = body_frame(bodies, slot_poly)
    pos_c, cc, sc = body_frame(bodies, slot_circle)
    row_poly = shape_row(model, slot_poly, body_poly)
    row_circle = shape_row(model, slot_circle, body_circle)
    circle_radius = model.shape_radius[row_circle]
    skin = model.shape_radius[row_poly]
    radius = circle_radius + skin
    # Circle centre in the polygon's frame.
    center = rotate_inv(pos_c + rotate(model.shape_center[row_circle], cc, sc) - pos, c, s)
    n_verts = model.shape_vertex_count[row_poly]
    best_separation = -ti.math.inf
    best_edge = 0
    for i in range(n_verts):
        separation = model.shape_normals[row_poly, i].dot(
            center - model.shape_vertices[row_poly, i]
        )
        if separation > best_separation:
            best_separation = separation
            best_edge = i
    count = 0
    if best_separation <= radius + margin:
        outward = model.shape_normals[row_poly, best_edge]  # polygon -> circle, polygon frame
        surface = center - best_separation * outward
        distance = best_separation
        feature = best_edge
        if best_separation > 0.0 or n_verts == 2:
            # Centre outside (a segment has no inside): the nearest core point over all
            # edges (exact for convex cores).
            best_d2 = ti.math.inf
            for i in range(n_verts):
                v1 = model.shape_vertices[row_poly, i]
                edge = model.shape_vertices[row_poly, (i + 1) % n_verts] - v1
                t = ti.math.clamp((center - v1).dot(edge) / edge.dot(edge), 0.0, 1.0)
                q = v1 + t * edge
                d2 = (center - q).norm_sqr()
                if d2 < best_d2:
                    best_d2 = d2
                    surface = q
                    feature = i + 8 * (1 if t <= 0.0 else (2 if t >= 1.0 else 0))
            distance = ti.sqrt(best_d2)
            if feature < 8:
                # Face region: the face normal is exact; (center - surface) / distance would
                # lose precision when the centre is close to the face. A segment's two
                # faces are one edge: the side the centre is on is the one that separates
                # most.
                if n_verts == 2:
                    feature = best_edge
                outward = model.shape_normals[row_poly, feature]
                distance = outward.dot(center - model.shape_vertices[row_poly, feature])
            elif distance > 1e-9:
                outward = (center - surface) / distance
        depth = radius - distance
        if depth > -margin:
            # Halfway between the polygon's skin and the circle's surface.
            midpoint = 0.5 * (surface + skin * outward + center - circle_radius * outward)
            normal = rotate(outward, c, s)
            if not polygon_is_a:
                normal = -normal
            manifolds.normal[pair] = normal
            set_point(manifolds, pair, 0, pos + rotate(midpoint, c, s), depth, feature)
            count = 1
    manifolds.point_count[pair] = count


@ti.func
def max_separation(model: ti.template(), body1, body2, rel_pos, rel_c, rel_s):
    """Largest separation of body2's polygon from one of body1's edges, and that edge.

    body2's vertices are mapped into body1's frame by the relative pose (rel_pos, rel_c, rel_s);
    body1 and body2 are shape rows (bodies.shape_row).
    """
    best = -ti.math.inf
    best_edge = 0
    for i in range(model.shape_vertex_count[body1]):
        n = model.shape_normals[body1, i]
        # n.(rel_pos + R w_j - v) = n.(rel_pos - v) + (R^T n).w_j: one rotation per edge.
        n2 = rotate_inv(n, rel_c, rel_s)
        deepest = ti.math.inf
        for j in range(model.shape_vertex_count[body2]):
            deepest = ti.min(deepest, n2.dot(model.shape_vertices[body2, j]))
        separation = n.dot(rel_pos - model.shape_vertices[body1, i]) + deepest
        if separation > best:
            best = separation
            best_edge = i
    return best, best_edge


@ti.func
def closest_on_segments(p1, q1, p2, q2):
    """Closest points of segments p1-q1 and p2-q2: (s, t) with points p1 + s (q1 - p1) and
    p2 + t (q2 - p2), s and t in [0, 1] (Ericson, Real-Time Collision Detection 5.1.9)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, f = d1.dot(d1), d2.dot(d2), d2.dot(r)
    c, b = d1.dot(r), d1.dot(d2)
    denom = a * e - b * b
    s = 0.0
    if denom > 1e-12 * a * e:
        s = ti.math.clamp((b * f - c * e) / denom, 0.0, 1.0)
    t = (b * s + f) / e
    if t < 0.0:
        t = 0.0
        s = ti.math.clamp(-c / a, 0.0, 1.0)
    elif t > 1.0:
        t = 1.0
        s = ti.math.clamp((b - c) / a, 0.0, 1.0)
    return s, t


@ti.func
def vertex_pair_feature(ref_vertex, inc_vertex, flip):
    """A clipped point's feature id from the reference and incident edges' vertices that end
    the overlap on its side: (body a's, body b's), whichever is the reference (flip: b's
    face is)."""
    a_vertex, b_vertex = ref_vertex, inc_vertex
    if flip:
        a_vertex, b_vertex = inc_vertex, ref_vertex
    return a_vertex * MAX_POLYGON_VERTICES + b_vertex


@ti.func
def closest_point_contact(
    manifolds: ti.template(),
    pair,
    v1,
    v2,
    w1,
    w2,
    ref_skin,
    inc_skin,
    ref_pos,
    ref_c,
    ref_s,
    flip,
    margin,
    base_feature,
):
    """One point where the skins around segments v1-v2 (reference) and w1-w2 (incident,
    both in the reference frame) overlap, along the line between their closest points;
    returns the point count (0 when the skins are apart by more than margin)."""
    s, t = closest_on_segments(v1, v2, w1, w2)
    p, q = v1 + s * (v2 - v1), w1 + t * (w2 - w1)
    gap = (q - p).norm()
    count = 0
    if gap - (ref_skin + inc_skin) <= margin and gap > 1e-9:
        direction = (q - p) / gap
        world_normal = rotate(direction, ref_c, ref_s)
        manifolds.normal[pair] = -world_normal if flip else world_normal
        midpoint = 0.5 * (p + ref_skin * direction + q - inc_skin * direction)
        set_point(
            manifolds,
            pair,
            0,
            ref_pos + rotate(midpoint, ref_c, ref_s),
            ref_skin + inc_skin - gap,
            CORNER_FEATURE + base_feature + ti.cast(2 * s + t, ti.i32),
        )
        count = 1
    return count


@ti.func
def clip_polygons(
    model: ti.template(),
    manifolds: ti.template(),
    pair,
    ref_body,
    inc_body,
    ref_edge,
    ref_pos,
    ref_c,
    ref_s,
    rel_pos,
    rel_c,
    rel_s,
    flip,
    margin,
    core_separation,
    allow_corner,
):
    """Clip the incident edge against the reference edge; write up to 2 points.

    Everything is in the reference body's frame; rel_* maps the incident body into it.
    ref_body and inc_body are shape rows (bodies.shape_row).
    Cores with skins (rounded polygons, capsules) that are apart by more than
    DISJOINT_CORES may touch corner to corner, where the face normal is wrong: when the
    closest points of the two edges are both ends, one point along the line between them is
    written instead (Box2D v3's rule), unless allow_corner is 0 (chain links: their ends'
    normals are the links' business, see collide_link_polygon).
    """
    n_ref = model.shape_vertex_count[ref_body]
    n_inc = model.shape_vertex_count[inc_body]
    ref_skin, inc_skin = model.shape_radius[ref_body], model.shape_radius[inc_body]
    skins = ref_skin + inc_skin
    v1 = model.shape_vertices[ref_body, ref_edge]
    v2 = model.shape_vertices[ref_body, (ref_edge + 1) % n_ref]
    normal = model.shape_normals[ref_body, ref_edge]
    tangent = vec2(-normal.y, normal.x)  # along v1 -> v2 for counter-clockwise polygons
    # Incident edge: the one whose normal is most anti-parallel to the reference normal.
    inc_edge = 0
    best = ti.math.inf
    for j in range(n_inc):
        d = normal.dot(rotate(model.shape_normals[inc_body, j], rel_c, rel_s))
        if d < best:
            best = d
            inc_edge = j
    w1 = rel_pos + rotate(model.shape_vertices[inc_body, inc_edge], rel_c, rel_s)
    w2 = rel_pos + rotate(model.shape_vertices[inc_body, (inc_edge + 1) % n_inc], rel_c, rel_s)
    base_feature = (flip * 8 + ref_edge) * 16 + inc_edge * 2
    # A clipped point is named by the vertices of body a and of body b that end the
    # overlap on its side (Box2D v3's rule), not by which body's face is the reference:
    # point 0 starts from the incident edge's first vertex, at the reference edge's far
    # end; point 1 from its second, at the near end. Two nearly equal faces (a loaded
    # stack, the boxes tilted a milliradian) trade the reference role from step to step;
    # the points keep their ids, and so their warm-started impulses (they restarted cold
    # at every trade, and a 30-row pyramid kept rocking at 1 mm/s under the soft step).
    ref_vertices = ti.Vector([(ref_edge + 1) % n_ref, ref_edge])
    inc_vertices = ti.Vector([inc_edge, (inc_edge + 1) % n_inc])
    count = 0
    corner = False
    if allow_corner and skins > 0.0 and core_separation > DISJOINT_CORES:
        s, t = closest_on_segments(v1, v2, w1, w2)
        corner = (s == 0.0 or s == 1.0) and (t == 0.0 or t == 1.0)
    if not corner:
        length = tangent.dot(v2 - v1)
        # Side planes: 0 <= tangent.(w - v1) <= length.
        u1, u2 = tangent.dot(w1 - v1), tangent.dot(w2 - v1)
        if not (u1 < 0.0 and u2 < 0.0) and not (u1 > length and u2 > length):
            q1, q2 = w1, w2
            if u1 < 0.0:
                q1 = w1 + (w2 - w1) * (u1 / (u1 - u2))
            elif u2 < 0.0:
                q2 = w2 + (w1 - w2) * (u2 / (u2 - u1))
            if u1 > length:
                q1 = w1 + (w2 - w1) * ((u1 - length) / (u1 - u2))
            elif u2 > length:
                q2 = w2 + (w1 - w2) * ((u2 - length) / (u2 - u1))
            world_normal = rotate(normal, ref_c, ref_s)
            manifolds.normal[pair] = -world_normal if flip else world_normal
            for k in ti.static(range(2)):
                q = q1 if k == 0 else q2
                separation = normal.dot(q - v1)  # of the cores; the skins close it
                if separation - skins <= margin:
                    # Halfway between the reference skin and the incident skin.
                    midpoint = q - 0.5 * (separation - ref_skin + inc_skin) * normal
                    set_point(
                        manifolds,
                        pair,
                        count,
                        ref_pos + rotate(midpoint, ref_c, ref_s),
                        skins - separation,
                        vertex_pair_feature(ref_vertices[k], inc_vertices[k], flip),
                    )
                    count += 1
    # Corner to corner; or nothing between the side planes, yet the skins may touch beyond
    # them: two segments end to end along one line (no face normal separates them).
    if corner or (count == 0 and allow_corner and skins > 0.0):
        count = closest_point_contact(
            manifolds,
            pair,
            v1,
            v2,
            w1,
            w2,
            ref_skin,
            inc_skin,
            ref_pos,
            ref_c,
            ref_s,
            flip,
            margin,
            base_feature,
        )
    manifolds.point_count[pair] = count


@ti.func
def collide_polygons(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    pair,
    slot_a,
    body_a,
    slot_b,
    body_b,
    margin,
):
    """Two cores of 2 or more vertices (polygons, capsules, edges) with their skins: SAT on
    the cores, contact when they are apart by less than the skins (plus margin)."""
    pos_a, ca, sa = body_frame(bodies, slot_a)
    pos_b, cb, sb = body_frame(bodies, slot_b)
    # b in a's frame and a in b's frame.
    ba_pos = rotate_inv(pos_b - pos_a, ca, sa)
    ba_c, ba_s = ca * cb + sa * sb, ca * sb - sa * cb
    ab_pos = rotate_inv(pos_a - pos_b, cb, sb)
    ab_c, ab_s = ba_c, -ba_s
    row_a, row_b = shape_row(model, slot_a, body_a), shape_row(model, slot_b, body_b)
    sep_a, edge_a = max_separation(model, row_a, row_b, ba_pos, ba_c, ba_s)
    sep_b, edge_b = max_separation(model, row_b, row_a, ab_pos, ab_c, ab_s)
    reach = margin + model.shape_radius[row_a] + model.shape_radius[row_b]
    if sep_a > reach or sep_b > reach:
        manifolds.point_count[pair] = 0
    else:
        # a's face is the reference unless b's separates clearly more. One call of
        # clip_polygons with the roles chosen here: every call site inlines all of it.
        ref_body, inc_body, ref_edge, flip = row_a, row_b, edge_a, 0
        ref_pos, ref_c, ref_s, rel_pos, rel_c, rel_s = pos_a, ca, sa, ba_pos, ba_c, ba_s
        if sep_b > sep_a + ti.min(
            REFERENCE_FACE_TOLERANCE,
            REFERENCE_FACE_FRACTION
            * ti.min(model.bounding_radius[row_a], model.bounding_radius[row_b]),
        ):
            ref_body, inc_body, ref_edge, flip = row_b, row_a, edge_b, 1
            ref_pos, ref_c, ref_s, rel_pos, rel_c, rel_s = pos_b, cb, sb, ab_pos, ab_c, ab_s
        clip_polygons(
            model,
            manifolds,
            pair,
            ref_body,
            inc_body,
            ref_edge,
            ref_pos,
            ref_c,
            ref_s,
            rel_pos,
            rel_c,
            rel_s,
            flip,
            margin,
            ti.max(sep_a, sep_b),
            1,
        )


@ti.func
def cross2(u, v):
    return u.x * v.y - u.y * v.x


@ti.func
def within_cone(front, bound, normal):
    """True when unit `normal` lies between unit vectors `front` and `bound` (the angle
    between them is under pi); when bound is front, only front itself (within ~1e-3 rad)."""
    turn = cross2(front, bound)
    inside = False
    if ti.abs(turn) < 1e-6 and front.dot(bound) > 0.0:
        inside = normal.dot(front) > 1.0 - 5e-7
    else:
        inside = (
            cross2(front, normal) * turn >= -1e-6
            and cross2(normal, bound) * turn >= -1e-6
            and normal.dot(front) > -1e-6
        )
    return inside


@ti.func
def collide_link_circle(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    pair,
    slot_link,
    body_link,
    slot_circle,
    body_circle,
    link_is_a,
    margin,
):
    """A chain link (shapes.chain: one-sided, its ends' normals bounded by its neighbours)
    against a circle: the face's normal over the link, the direction from an end beyond
    it only where that end's cone allows it (a convex corner), nothing behind the link."""
    pos, c, s = body_frame(bodies, slot_link)
    pos_c, cc, sc = body_frame(bodies, slot_circle)
    row_link = shape_row(model, slot_link, body_link)
    row_circle = shape_row(model, slot_circle, body_circle)
    radius = model.shape_radius[row_circle]
    center = rotate_inv(pos_c + rotate(model.shape_center[row_circle], cc, sc) - pos, c, s)
    a, b = model.shape_vertices[row_link, 0], model.shape_vertices[row_link, 1]
    front = model.shape_normals[row_link, 1]
    count = 0
    if front.dot(center - a) >= 0.0:
        edge = b - a
        t = (center - a).dot(edge) / edge.dot(edge)
        found = False
        outward, surface, distance, feature = front, a, 0.0, 0
        if 0.0 < t < 1.0:
            found = True
            distance = front.dot(center - a)
            surface = center - distance * front
        else:
            end = 0 if t <= 0.0 else 1
            corner = a if end == 0 else b
            offset = center - corner
            distance = offset.norm()
            if distance > 1e-9:
                outward = offset / distance
                found = within_cone(front, model.shape_normals[row_link, 2 + end], outward)
                surface, feature = corner, 1 + end
        depth = radius - distance
        if found and depth > -margin:
            midpoint = 0.5 * (surface + center - radius * outward)
            normal = rotate(outward, c, s)
            manifolds.normal[pair] = normal if link_is_a else -normal
            set_point(manifolds, pair, 0, pos + rotate(midpoint, c, s), depth, feature)
            count = 1
    manifolds.point_count[pair] = count


@ti.func
def collide_link_polygon(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    pair,
    slot_link,
    body_link,
    slot_other,
    body_other,
    link_is_a,
    margin,
):
    """A chain link against a core of 2 or more vertices (polygon, capsule, rounded): the
    link's front face is the reference, so a body sliding over flat or concave joints never
    meets an end of a link (the ghost collision that makes boxes catch); one of the body's
    faces is, instead, only where it separates more and its normal is one the link's convex
    end allows. A body whose centre is behind the link does not touch it (one-sided)."""
    pos_l, cl, sl = body_frame(bodies, slot_link)
    pos_o, co, so = body_frame(bodies, slot_other)
    other_pos = rotate_inv(pos_o - pos_l, cl, sl)  # the other body in the link's frame
    other_c, other_s = cl * co + sl * so, cl * so - sl * co
    link_pos = rotate_inv(pos_l - pos_o, co, so)  # the link in the other body's frame
    link_c, link_s = other_c, -other_s
    row_link = shape_row(model, slot_link, body_link)
    row_other = shape_row(model, slot_other, body_other)
    a = model.shape_vertices[row_link, 0]
    front = model.shape_normals[row_link, 1]
    count_written = False
    if front.dot(other_pos - a) >= 0.0:
        sep_front = ti.math.inf
        for j in range(model.shape_vertex_count[row_other]):
            w = other_pos + rotate(model.shape_vertices[row_other, j], other_c, other_s)
            sep_front = ti.min(sep_front, front.dot(w - a))
        if sep_front <= model.shape_radius[row_other] + margin:
            sep_face, face = max_separation(model, row_other, row_link, link_pos, link_c, link_s)
            use_face = False
            if sep_face > sep_front + REFERENCE_FACE_TOLERANCE:
                normal = -rotate(model.shape_normals[row_other, face], other_c, other_s)
                use_face = within_cone(
                    front, model.shape_normals[row_link, 2], normal
                ) or within_cone(front, model.shape_normals[row_link, 3], normal)
            # One call of clip_polygons (see collide_polygons): the link's front face as
            # reference, or the other body's face.
            ref_body, inc_body, ref_edge, separation = row_link, row_other, 1, sep_front
            ref_pos, ref_c, ref_s = pos_l, cl, sl
            rel_pos, rel_c, rel_s = other_pos, other_c, other_s
            flip = 0 if link_is_a else 1
            if use_face:
                ref_body, inc_body, ref_edge = row_other, row_link, face
                separation = ti.max(sep_face, sep_front)
                ref_pos, ref_c, ref_s = pos_o, co, so
                rel_pos, rel_c, rel_s = link_pos, link_c, link_s
                flip = 1 - flip
            clip_polygons(
                model,
                manifolds,
                pair,
                ref_body,
                inc_body,
                ref_edge,
                ref_pos,
                ref_c,
                ref_s,
                rel_pos,
                rel_c,
                rel_s,
                flip,
                margin,
                separation,
                0,
            )
            count_written = True
    if not count_written:
        manifolds.point_count[pair] = 0


@ti.func
def collide_pair(
    model: ti.template(), bodies: ti.template(), manifolds: ti.template(), pair, n_bodies, margin
):
    """The manifold of candidate pair `pair` (contacts' body_a, body_b slots), normal from a
    to b; point_count 0 when apart by more than margin (m)."""
    slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
    kind_a, kind_b = model.shape_kind[slot_a % n_bodies], model.shape_kind[slot_b % n_bodies]
    # Each routine takes its shapes in one order (a chain link first, then a polygon, then a
    # circle) and is called once: every call site inlines all of it, and the narrow phase
    # is most of the compile time of each kernel that runs it.
    first_is_a = not (
        (kind_a == SHAPE_CIRCLE and kind_b == SHAPE_POLYGON)
        or (kind_b == SHAPE_CHAIN and kind_a != SHAPE_CHAIN)
    )
    slot1, slot2, kind1, kind2 = slot_a, slot_b, kind_a, kind_b
    if not first_is_a:
        slot1, slot2, kind1, kind2 = slot_b, slot_a, kind_b, kind_a
    body1, body2 = slot1 % n_bodies, slot2 % n_bodies
    if kind1 == SHAPE_CIRCLE and kind2 == SHAPE_CIRCLE:
        collide_circles(model, bodies, manifolds, pair, slot1, body1, slot2, body2, margin)
    elif kind1 == SHAPE_POLYGON and kind2 == SHAPE_CIRCLE:
        collide_polygon_circle(
            model, bodies, manifolds, pair, slot1, body1, slot2, body2, first_is_a, margin
        )
    elif kind1 == SHAPE_POLYGON and kind2 == SHAPE_POLYGON:
        collide_polygons(model, bodies, manifolds, pair, slot1, body1, slot2, body2, margin)
    elif kind1 == SHAPE_CHAIN and kind2 == SHAPE_CIRCLE:
        collide_link_circle(
            model, bodies, manifolds, pair, slot1, body1, slot2, body2, first_is_a, margin
        )
    elif kind1 == SHAPE_CHAIN and kind2 == SHAPE_POLYGON:
        collide_link_polygon(
            model, bodies, manifolds, pair, slot1, body1, slot2, body2, first_is_a, margin
        )
    else:  # chain-chain, chain-edge, edge-edge: never (and never paired: all static)
        manifolds.point_count[pair] = 0


@quick
@ti.kernel
def _compute_manifolds(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    serial: ti.template(),
    n_pairs: ti.i32,
    n_bodies: ti.i32,
    margin: ti.f32,
):
    """Contact manifolds of pairs [0, n_pairs); margin (m) keeps points up to that far apart."""
    ti.loop_config(serialize=serial)
    for pair in range(n_pairs):
        collide_pair(model, bodies, manifolds, pair, n_bodies, margin)
        if ti.static(hasattr(manifolds, "found_margin")):
            manifolds.found_margin[pair] = 0.0  # not the step's manifold: never kept


def compute_manifolds(
    ctx: "StepContext", n_pairs: int, margin: float = 0.0, into: str = "manifolds"
):
    """Contact manifolds of the candidate pairs [0, n_pairs) of the Manifolds group `into`
    at the current poses; margin (m) keeps points up to that far apart."""
    pool = ctx.pool
    _compute_manifolds(
        pool.model, pool.bodies, getattr(pool, into), ctx.serial, n_pairs, ctx.n_bodies, margin
    )
