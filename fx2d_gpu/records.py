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
    """Touching pairs, one row per pair (Scene.contacts), sorted by (world, body_a, body_b).

    world: (m,) the world of each pair. body_a, body_b: (m,) body indices, body_a < body_b.
    normal: (m, 2) unit, from a to b. point_count: (m,) 1 or 2. points: (m, 2, 2) world
    points, m, halfway between the surfaces (rows past point_count are unused). depths:
    (m, 2) penetration per point when the step's manifold was found, m. features: (m, 2)
    feature ids. sensor: (m,) True where either body is a sensor (no impulses).

    normal_impulse, tangent_impulse: (m, 2) N s, what each point applied to body b over
    the step's substeps (a gets the opposite), tangent along (-normal.y, normal.x). Unlike
    Fx2D's (the velocity-level impulse of the last substep, which decays to 0 at rest), they
    measure load: a body resting on the ground has sum(normal_impulse) / dt = its weight,
    and an impact shows as a spike. Zero before the first step and after set_state.
    """

    world: np.ndarray
    body_a: np.ndarray
    body_b: np.ndarray
    normal: np.ndarray
    point_count: np.ndarray
    points: np.ndarray
    depths: np.ndarray
    features: np.ndarray
    normal_impulse: np.ndarray
    tangent_impulse: np.ndarray
    sensor: np.ndarray

    def __len__(self) -> int:
        return len(self.body_a)

    def pairs(self, world: int = 0) -> set[tuple[int, int]]:
        """{(body_a, body_b)} of the rows of `world`."""
        return _pairs_of(self, world)

    @property
    def depth(self) -> np.ndarray:
        """(m,) deepest penetration of each manifold, m."""
        masked = np.where(np.arange(MAX_MANIFOLD_POINTS)[None, :] < self.point_count[:, None],
                          self.depths, -np.inf)
        return masked.max(axis=1) if len(self) else np.zeros(0)


@dataclass
class ContactEventList:
    """Pairs of one kind of contact event, sorted by (world, body_a, body_b): world, body_a,
    body_b (k,) int64 (body_a < body_b); sensor (k,) bool, True where either body is a
    sensor (Fx2D's is_trigger)."""

    world: np.ndarray
    body_a: np.ndarray
    body_b: np.ndarray
    sensor: np.ndarray

    def __len__(self) -> int:
        return len(self.body_a)

    @property
    def is_trigger(self) -> np.ndarray:
        """Fx2D's name for `sensor`."""
        return self.sensor

    def pairs(self, world: int = 0) -> set[tuple[int, int]]:
        """{(body_a, body_b)} of `world`."""
        return _pairs_of(self, world)


@dataclass
class ContactEvents:
    """The last step's contact events (Scene.contact_events): `begin`, pairs that touch now
    and did not at the end of the step before; `end`, pairs that did and do not now."""

    begin: ContactEventList
    end: ContactEventList


@dataclass
class JointState:
    """Joint coordinates per world: position (n_worlds, n_joints) is the relative angle (rad,
    revolute) or the travel along the axis (m, prismatic); rate is its time derivative."""

    position: np.ndarray
    rate: np.ndarray


def _pairs_of(rows, world: int) -> set[tuple[int, int]]:
    """{(body_a, body_b)} of the rows (world, body_a, body_b arrays) of one world."""
    mine = rows.world == world
    return set(zip(rows.body_a[mine].tolist(), rows.body_b[mine].tolist(), strict=True))


@dataclass
class RayHits:
    """The nearest hit of each ray (Scene.ray_cast), world first.

    body: (n_worlds, n_rays) int64, the body hit, -1 where the ray hits nothing.
    distance: (n_worlds, n_rays) float64, m along the ray to the hit (0 when the ray
    starts inside the body); inf on a miss.
    point: (n_worlds, n_rays, 2) float64, the hit point, m (the origin when it starts
    inside); NaN on a miss.
    normal: (n_worlds, n_rays, 2) float64, unit surface normal at the hit, facing back
    along the ray (-direction when the ray starts inside); NaN on a miss.
    """

    body: np.ndarray
    distance: np.ndarray
    point: np.ndarray
    normal: np.ndarray

    @property
    def hit(self) -> np.ndarray:
        """(n_worlds, n_rays) bool: the ray hit something."""
        return self.body >= 0


@dataclass
class RayHitList:
    """Every body each ray crosses (Scene.ray_cast_all), one row per (ray, body), sorted by
    (world, ray, distance, body); each body once per ray (where the ray enters it).

    world, ray, body: (k,) int64. distance: (k,) float64 m. point, normal: (k, 2) float64:
    the entry point, m, and the unit normal there facing back along the ray.
    """

    world: np.ndarray
    ray: np.ndarray
    body: np.ndarray
    distance: np.ndarray
    point: np.ndarray
    normal: np.ndarray

    def __len__(self) -> int:
        return len(self.body)

    def bodies(self, world: int = 0, ray: int = 0) -> np.ndarray:
        """The bodies ray `ray` of `world` crosses, nearest first."""
        return self.body[(self.world == world) & (self.ray == ray)]


@dataclass
class Overlaps:
    """What overlap queries found (Scene.query_point, query_aabb, overlap_shape): one row
    per (query, body), sorted by (world, query, body).

    world, query, body: (k,) int64 (query: the query's index in the call, the same in
    every world).
    """

    world: np.ndarray
    query: np.ndarray
    body: np.ndarray

    def __len__(self) -> int:
        return len(self.body)

    def bodies(self, world: int = 0, query: int = 0) -> np.ndarray:
        """(m,) int64: the bodies query `query` of `world` overlaps, sorted."""
        return self.body[(self.world == world) & (self.query == query)]
