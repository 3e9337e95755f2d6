"""ModelQueries: what a scene's model answers without its device state.

The bodies' and joints' indices, names, shapes and nominal values, read from a ModelBuilder
(builder.py). Scene and distributed.ShardedScene both answer them, the latter from the model
its shards were built from, with no round trip.
"""

from __future__ import annotations

from .. import shapes
from ..checks import as_index


class ModelQueries:
    """The model's questions, answered from `self._builder` (a builder.ModelBuilder)."""

    @property
    def n_bodies(self) -> int:
        """The number of bodies (every world holds them all; a chain counts one per link)."""
        return len(self._builder.bodies)

    @property
    def n_joints(self) -> int:
        """The number of joints (every world holds them all)."""
        return len(self._builder.joints)

    def body_index(self, name: str) -> int:
        """The index of the body added with `name`.

        Raises:
            ValueError: no body has this name.
        """
        return self._builder.body_index(name)

    def body_name(self, body: int) -> str | None:
        """The name `body` was added with, or None if it has none."""
        return self._builder.bodies[self._builder.check_body(body)].name

    def body_inertia(self, body: int) -> float:
        """The moment of inertia of `body` about its centre of mass, kg m² (inf for static
        bodies)."""
        return self._builder.bodies[self._builder.check_body(body)].inertia

    def body_shape(self, body: int, world: int | None = None) -> shapes.Shape:
        """The collision shape of `body`, in its body frame (see fx2d_gpu.shapes.Shape): the one
        it was added with, or with `world` (an index) that world's (Scene.set_shape_params)."""
        body = self._builder.check_body(body)
        if world is None:
            return self._builder.bodies[body].shape
        world = as_index(world, "world", self.n_worlds, "worlds")
        world_shapes = getattr(self, "_shapes", None)  # (a ShardedScene's worlds keep theirs)
        if world_shapes is None:
            return self._builder.bodies[body].shape
        return world_shapes.shape(self._builder, world, body)

    def body_mass(self, body: int) -> float:
        """The mass of `body`, kg (0 for static bodies)."""
        return self._builder.bodies[self._builder.check_body(body)].mass

    def body_damping(self, body: int) -> float:
        """The velocity damping of `body` (linear and angular), 1/s."""
        return self._builder.bodies[self._builder.check_body(body)].vel_damping

    def joint_index(self, name: str) -> int:
        """The index of the joint added with `name`.

        Raises:
            ValueError: no joint has this name.
        """
        return self._builder.joint_index(name)

    def joint_bodies(self, joint: int) -> tuple[int, int]:
        """The (parent, child) body indices of `joint`."""
        j = self._builder.joints[self._builder.check_joint(joint)]
        return j.parent, j.child
