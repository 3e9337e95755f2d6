"""What a body is to the solver (ti.func): whether it moves, its mass as constraints see it,
its size. One rule each, shared by integration, contacts, joints, colouring and sleep."""

import taichi as ti

from .shapes import SHAPE_CIRCLE


@ti.func
def moves(model: ti.template(), bodies: ti.template(), slot, body):
    """True for an awake body that integration moves: dynamic or kinematic."""
    return (model.inv_mass[body] > 0.0 or model.kinematic[body] == 1) and \
        bodies.sleeping[slot] == 0


@ti.func
def awake_dynamic(model: ti.template(), bodies: ti.template(), slot, n_bodies):
    """True for a dynamic body that is awake: contacts and joints can move it (static,
    kinematic and sleeping bodies act as fixed)."""
    return model.inv_mass[slot % n_bodies] > 0.0 and bodies.sleeping[slot] == 0


@ti.func
def solver_mass(model: ti.template(), bodies: ti.template(), slot, body):
    """(inverse mass 1/kg, inverse inertia 1/(kg m^2)) of body slot `slot` (model row
    `body`) as contacts and joints see them: 0 when static, kinematic or asleep."""
    inv_mass, inv_inertia = 0.0, 0.0
    if bodies.sleeping[slot] == 0:
        inv_mass = model.inv_mass[body]
        inv_inertia = model.inv_inertia[body]
    return inv_mass, inv_inertia


@ti.func
def bounding_radius(model: ti.template(), body):
    """Largest distance from the body origin to its shape (core and skin), m."""
    r = 0.0
    if model.shape_kind[body] == SHAPE_CIRCLE:
        r = model.shape_center[body].norm()
    else:
        for i in range(model.shape_vertex_count[body]):
            r = ti.max(r, model.shape_vertices[body, i].norm())
    return r + model.shape_radius[body]
