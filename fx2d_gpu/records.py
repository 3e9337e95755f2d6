"""What Scene hands back and takes: State, Contacts, JointState (host NumPy arrays, world
first)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .device import MAX_MANIFOLD_POINTS


@dataclass
class State:
    """A copy of the scene's dynamic state, world first.

    position: (n_worlds, n_bodies, 2) centre of mass, m. angle: (n_worlds, n_bodies), rad.
    velocity: (n_worlds, n_bodies, 2), m/s. angular_velocity: (n_worlds, n_bodies), rad/s.
    sleeping: (n_worlds, n_bodies) bool.
    """

    position: np.ndarray
    angle: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray
    sleeping: np.ndarray

    def copy(self) -> State:
        return State(*(np.array(a, copy=True) for a in
                       (self.position, self.angle, self.velocity, self.angular_velocity,
                        self.sleeping)))


@dataclass
class Contacts:
    """Contact manifolds of one world, one row per touching pair.

    body_a, body_b: (m,) body indices, body_a < body_b. normal: (m, 2) unit, from a to b.
    point_count: (m,) 1 or 2. points: (m, 2, 2) world points, m (rows past point_count are
    unused). depths: (m, 2) penetration per point, m. features: (m, 2) feature ids.
    """

    world: np.ndarray
    body_a: np.ndarray
    body_b: np.ndarray
    normal: np.ndarray
    point_count: np.ndarray
    points: np.ndarray
    depths: np.ndarray
    features: np.ndarray

    def __len__(self) -> int:
        return len(self.body_a)

    @property
    def depth(self) -> np.ndarray:
        """(m,) deepest penetration of each manifold, m."""
        masked = np.where(np.arange(MAX_MANIFOLD_POINTS)[None, :] < self.point_count[:, None],
                          self.depths, -np.inf)
        return masked.max(axis=1) if len(self) else np.zeros(0)


@dataclass
class JointState:
    """Joint coordinates per world: position (n_worlds, n_joints) is the relative angle (rad,
    revolute) or the travel along the axis (m, prismatic); rate is its time derivative."""

    position: np.ndarray
    rate: np.ndarray
