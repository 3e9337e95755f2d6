"""What a body is to the solver (ti.func): whether it moves, its mass as constraints see it,
its size. One rule each, shared by integration, contacts, joints, colouring and sleep."""

import taichi as ti


@ti.func
def active(bodies: ti.template(), slot):
    """True for an awake, enabled body slot (a disabled one is out of the simulation)."""
    return bodies.sleeping[slot] == 0 and bodies.enabled[slot] == 1


@ti.func
def moves(model: ti.template(), bodies: ti.template(), slot, body):
    """True for an awake, enabled body that integration moves: dynamic or kinematic."""
    return (model.inv_mass[body] > 0.0 or model.kinematic[body] == 1) and active(bodies, slot)


@ti.func
def moving_kinematic(model: ti.template(), bodies: ti.template(), slot, body):
    """True for an awake, enabled kinematic body: it moves whatever it meets."""
    return model.kinematic[body] == 1 and active(bodies, slot)


@ti.func
def can_move(model: ti.template(), body):
    """True for a dynamic or kinematic body (awake or not): static bodies never move."""
    return model.inv_mass[body] > 0.0 or model.kinematic[body] == 1


@ti.func
def awake_dynamic(model: ti.template(), bodies: ti.template(), slot, n_bodies):
    """True for a dynamic body that is awake and enabled: contacts and joints can move it
    (static, kinematic, sleeping and disabled bodies act as fixed)."""
    return awake_dynamic_body(model, bodies, slot, slot % n_bodies)


@ti.func
def awake_dynamic_body(model: ti.template(), bodies: ti.template(), slot, body):
    """awake_dynamic for slot `slot` of model row `body`, known already (no division)."""
    return model.inv_mass[body] > 0.0 and active(bodies, slot)


@ti.func
def material_row(model: ti.template(), slot, body):
    """The row of body slot `slot` (model row `body`) in the material fields (mass,
    inertia, friction, restitution, damping, gravity scale: device.BodyModel): the model
    row, shared by every world, or the slot itself once a world has values of its own
    (Scene.set_body_params)."""
    row = body
    if model.per_world[None] == 1:
        row = slot
    return row


@ti.func
def world_gravity(model: ti.template(), slot, n_bodies):
    """The gravity of body slot `slot`'s world, m/s^2 (Scene.set_gravity)."""
    return model.gravity[slot // n_bodies]


@ti.func
def solver_mass(model: ti.template(), bodies: ti.template(), slot, body):
    """(inverse mass 1/kg, inverse inertia 1/(kg m^2)) of body slot `slot` (model row
    `body`) as contacts and joints see them: 0 when static, kinematic, asleep or
    disabled."""
    inv_mass, inv_inertia = 0.0, 0.0
    if active(bodies, slot):
        row = material_row(model, slot, body)
        inv_mass = model.inv_mass[row]
        inv_inertia = model.inv_inertia[row]
    return inv_mass, inv_inertia


@ti.func
def shape_row(model: ti.template(), slot, body):
    """The row of body slot `slot` (model row `body`) in the shape fields (radius, bounding
    radius, centre, vertices, normals: device.BodyModel): the model row, shared by every
    world, or the slot itself once a world has geometry of its own
    (Scene.set_shape_params). A body's kind and vertex count are the same in every world:
    model row `body` tells them either way."""
    row = body
    if model.shape_per_world[None] == 1:
        row = slot
    return row


@ti.func
def world_cell_size(model: ti.template(), cell_size, world):
    """The level-0 grid cell (m) of `world`: the scene's `cell_size`, or the world's own
    once worlds have geometry of their own (each world's cell is what a one-world scene of
    its shapes would take, builder.cell_size, so its pairs come in the same order)."""
    cell = cell_size
    if model.shape_per_world[None] == 1:
        cell = model.world_cell[world]
    return cell


@ti.func
def bounding_radius(model: ti.template(), slot, body):
    """Largest distance from the origin of body slot `slot` (model row `body`) to its shape
    (core and skin), m: stored per shape row when the model is built
    (Shape.bounding_radius)."""
    return model.bounding_radius[shape_row(model, slot, body)]


@ti.func
def should_collide(model: ti.template(), body_a, body_b):
    """The collision filter of two bodies (model rows): Fx2D's collision_group (bodies
    sharing a negative group never collide, a positive one always do, 0 is no group), else
    Box2D's category and mask bits: each body's category must be in the other's mask."""
    group = model.collision_group[body_a]
    result = True
    if group != 0 and group == model.collision_group[body_b]:
        result = group > 0
    else:
        result = (model.category_bits[body_a] & model.mask_bits[body_b]) != 0 and (
            model.category_bits[body_b] & model.mask_bits[body_a]
        ) != 0
    return result


@ti.func
def is_sensor_pair(model: ti.template(), manifolds: ti.template(), pair, n_bodies):
    """True when either body of the pair is a sensor: the pair is reported (contacts,
    events) but exerts no force, never wakes a body and joins no island."""
    return has_sensor(model, manifolds.body_a[pair], manifolds.body_b[pair], n_bodies)


@ti.func
def has_sensor(model: ti.template(), slot_a, slot_b, n_bodies):
    """is_sensor_pair for body slots slot_a and slot_b (a pair not yet stored)."""
    return model.sensor[slot_a % n_bodies] == 1 or model.sensor[slot_b % n_bodies] == 1
