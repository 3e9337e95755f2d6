"""The benchmark scenes in pymunk, built from the same BodySpec lists as fx2d_gpu's."""

import math

from fx2d_gpu.scenes import BodySpec

#: pymunk multiplies the two shapes' frictions; each shape gets the square root so a
#: contact sees the same coefficient as fx2d_gpu's (min of the two, equal here).


def build_space(
    specs: list[BodySpec], iterations: int = 10, cell_size: float = 1.0, gravity=(0.0, -9.81)
):
    """(space, bodies): a pymunk Space with `specs` (bodies[i] = specs[i]), `iterations`
    solver iterations and its spatial-hash broad phase."""
    import pymunk

    space = pymunk.Space()
    space.gravity = gravity
    space.iterations = iterations
    space.use_spatial_hash(cell_size, max(1000, 2 * len(specs)))
    bodies = []
    for spec in specs:
        if spec.mass == 0.0:
            body = pymunk.Body(body_type=pymunk.Body.STATIC)
        elif spec.kind == "circle":
            body = pymunk.Body(spec.mass, pymunk.moment_for_circle(spec.mass, 0, spec.size[0]))
        else:
            body = pymunk.Body(spec.mass, pymunk.moment_for_box(spec.mass, spec.size))
        body.position = spec.position
        body.angle = spec.angle
        if spec.mass > 0.0:
            body.velocity = spec.velocity
        if spec.kind == "circle":
            shape = pymunk.Circle(body, spec.size[0])
        else:
            shape = pymunk.Poly.create_box(body, spec.size)
        shape.friction = math.sqrt(spec.friction)
        space.add(body, shape)
        bodies.append(body)
    return space, bodies
