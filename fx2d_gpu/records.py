"""The records Scene hands back and takes: host NumPy arrays, world first.

State (Scene.get_state, Scene.set_state), Contacts (Scene.contacts), ContactEvents and
ContactEventList (Scene.contact_events), JointState (Scene.joint_state), RayHits
(Scene.ray_cast), RayHitList (Scene.ray_cast_all) and Overlaps (Scene.query_point,
query_aabb, overlap_shape). Each is a dataclass of arrays, copies of the device's: changing
one changes nothing in the scene.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from .checks import as_index
from .shapes import MAX_MANIFOLD_POINTS


@dataclass
class State:
    """A copy of every world's dynamic state, world first (Scene.get_state, Scene.set_state).

    Float64 arrays (sleeping: bool). To give each world its own initial conditions, change
    the arrays of Scene.get_state() and pass the State to Scene.set_state.

    Attributes:
        position: (n_worlds, n_bodies, 2) centre of mass, m.
        angle: (n_worlds, n_bodies) orientation, rad, counter-clockwise.
        velocity: (n_worlds, n_bodies, 2) velocity of the centre of mass, m/s.
        angular_velocity: (n_worlds, n_bodies) rad/s, counter-clockwise.
        sleeping: (n_worlds, n_bodies) bool: True where the body is asleep (set_state also
            takes integers that are all 0 or 1, and refuses any other value).
    """

    position: np.ndarray
    angle: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray
    sleeping: np.ndarray

    def copy(self) -> State:
        """A deep copy: the same values in new arrays."""
        return State(
            *(
                np.array(a, copy=True)
                for a in (
                    self.position,
                    self.angle,
                    self.velocity,
                    self.angular_velocity,
                    self.sleeping,
                )
            )
        )


@dataclass
class Contacts:
    """Touching pairs, one row per pair (Scene.contacts), sorted by (world, body_a, body_b).

    One row per pair, m rows; each pair has one or two contact points (the entries past
    point_count are unused: points, depths and impulses 0, features -1).

    The impulses measure load: a body resting on the ground has sum(normal_impulse) / dt =
    its weight, and an impact shows as a spike. Fx2D reports instead the velocity-level
    impulse of the last substep, which decays to 0 at rest.

    Attributes:
        world: (m,) int64, the world of each pair.
        body_a: (m,) int64 body index, body_a < body_b.
        body_b: (m,) int64 body index.
        normal: (m, 2) unit contact normal, from a to b.
        point_count: (m,) int64, 1 or 2: the contact points of each pair.
        points: (m, 2, 2) world points, m, halfway between the two surfaces.
        depths: (m, 2) penetration at each point when the step's manifold was found, m.
        features: (m, 2) int64 feature ids of the points.
        normal_impulse: (m, 2) N s per point: what the point applied to body b over the
            step's substeps, along the normal (body a gets the opposite). Zero before the
            first step and after set_state.
        tangent_impulse: (m, 2) N s per point, as normal_impulse along the tangent
            (-normal.y, normal.x).
        sensor: (m,) bool: True where either body is a sensor (no impulses).
        n_worlds: the scene's worlds (None: not known, and pairs checks only that a world
            is an int >= 0).
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
    n_worlds: int | None = None

    def __len__(self) -> int:
        return len(self.body_a)

    def pairs(self, world: int = 0) -> set[tuple[int, int]]:
        """The pairs touching in `world`: a set of (body_a, body_b) tuples.

        Raises:
            TypeError: `world` is not an int.
            ValueError: `world` out of range (below 0, or n_worlds or more).
        """
        return _pairs_of(self, world)

    @property
    def depth(self) -> np.ndarray:
        """(m,) float64: the deepest penetration of each pair's points, m."""
        masked = np.where(
            np.arange(MAX_MANIFOLD_POINTS)[None, :] < self.point_count[:, None],
            self.depths,
            -np.inf,
        )
        return masked.max(axis=1) if len(self) else np.zeros(0)


@dataclass
class ContactEventList:
    """Pairs of one kind of contact event (begin or end), sorted by (world, body_a, body_b).

    Attributes:
        world: (k,) int64, the world of each pair.
        body_a: (k,) int64 body index, body_a < body_b.
        body_b: (k,) int64 body index.
        sensor: (k,) bool: True where either body is a sensor (Fx2D's is_trigger).
        n_worlds: the scene's worlds (None: not known, and pairs checks only that a world
            is an int >= 0).
    """

    world: np.ndarray
    body_a: np.ndarray
    body_b: np.ndarray
    sensor: np.ndarray
    n_worlds: int | None = None

    def __len__(self) -> int:
        return len(self.body_a)

    @property
    def is_trigger(self) -> np.ndarray:
        """Fx2D's name for `sensor`."""
        return self.sensor

    def pairs(self, world: int = 0) -> set[tuple[int, int]]:
        """The pairs of `world`: a set of (body_a, body_b) tuples.

        Raises:
            TypeError: `world` is not an int.
            ValueError: `world` out of range (below 0, or n_worlds or more).
        """
        return _pairs_of(self, world)


@dataclass
class ContactEvents:
    """The last step's contact events (Scene.contact_events), in every world.

    Attributes:
        begin: pairs that touch now and did not at the end of the step before.
        end: pairs that did and do not now.
    """

    begin: ContactEventList
    end: ContactEventList


@dataclass
class JointState:
    """Joint coordinates and rates, in every world (Scene.joint_state).

    Attributes:
        position: (n_worlds, n_joints) float64: the relative angle, rad, of a revolute
            joint (0 where its bodies started); the travel along the axis, m, of a prismatic
            one (0 where its child started).
        rate: (n_worlds, n_joints) float64: position's time derivative, rad/s or m/s.
    """

    position: np.ndarray
    rate: np.ndarray


def _pairs_of(rows, world: int) -> set[tuple[int, int]]:
    """{(body_a, body_b)} of the rows (world, body_a, body_b arrays) of one world."""
    mine = rows.world == _checked(world, "world", rows.n_worlds, "worlds")
    return set(zip(rows.body_a[mine].tolist(), rows.body_b[mine].tolist(), strict=True))


def _checked(index, label: str, count: int | None, plural: str, owner: str = "scene") -> int:
    """A record's world, query or ray index, held to the scene's rule for one
    (checks.as_index): an index past the record's range would select no rows, an answer
    that reads as "none found" to a question never asked. count None (a record built
    without it): an int >= 0."""
    try:
        return as_index(index, label, sys.maxsize if count is None else count, plural, owner)
    except ValueError:
        if count is None:
            raise ValueError(f"{label} {index} out of range (an index is >= 0)") from None
        raise


@dataclass
class RayHits:
    """The nearest hit of each ray (Scene.ray_cast), world first.

    Attributes:
        body: (n_worlds, n_rays) int64, the body hit; -1 where the ray hits nothing.
        distance: (n_worlds, n_rays) float64, m along the ray to the hit (0 when the ray
            starts inside the body); inf on a miss.
        point: (n_worlds, n_rays, 2) float64, the hit point, m (the origin when the ray
            starts inside); NaN on a miss.
        normal: (n_worlds, n_rays, 2) float64, the unit surface normal at the hit, facing
            back along the ray (-direction when the ray starts inside); NaN on a miss.
    """

    body: np.ndarray
    distance: np.ndarray
    point: np.ndarray
    normal: np.ndarray

    @property
    def hit(self) -> np.ndarray:
        """(n_worlds, n_rays) bool: True where the ray hit a body."""
        return self.body >= 0


@dataclass
class RayHitList:
    """Every body each ray crosses (Scene.ray_cast_all), one row per (ray, body).

    Rows are sorted by (world, ray, distance, body); each body appears once per ray, where the
    ray enters it.

    Attributes:
        world: (k,) int64, the world of each hit.
        ray: (k,) int64, the ray's index in the call (the same in every world).
        body: (k,) int64, the body crossed.
        distance: (k,) float64, m along the ray to where it enters the body.
        point: (k, 2) float64, that entry point, m.
        normal: (k, 2) float64, the unit surface normal there, facing back along the ray.
        n_worlds: the scene's worlds (None: not known, and bodies checks only that a world
            is an int >= 0).
        n_rays: the rays of the call, in each world (None: not known, as n_worlds).
    """

    world: np.ndarray
    ray: np.ndarray
    body: np.ndarray
    distance: np.ndarray
    point: np.ndarray
    normal: np.ndarray
    n_worlds: int | None = None
    n_rays: int | None = None

    def __len__(self) -> int:
        return len(self.body)

    def bodies(self, world: int = 0, ray: int = 0) -> np.ndarray:
        """The bodies ray `ray` of `world` crosses, nearest first: (j,) int64.

        Raises:
            TypeError: `world` or `ray` is not an int.
            ValueError: `world` or `ray` out of range (below 0, or n_worlds / n_rays or
                more).
        """
        world = _checked(world, "world", self.n_worlds, "worlds")
        ray = _checked(ray, "ray", self.n_rays, "rays", "the call")
        return self.body[(self.world == world) & (self.ray == ray)]


@dataclass
class Overlaps:
    """What an overlap query found, one row per (query, body), sorted by (world, query, body).

    Scene.query_point, Scene.query_aabb and Scene.overlap_shape return one.

    Attributes:
        world: (k,) int64, the world of each row.
        query: (k,) int64, the query's index in the call (the same in every world).
        body: (k,) int64, the body found.
        n_worlds: the scene's worlds (None: not known, and bodies checks only that a world
            is an int >= 0).
        n_queries: the queries of the call, in each world (None: not known, as n_worlds).
    """

    world: np.ndarray
    query: np.ndarray
    body: np.ndarray
    n_worlds: int | None = None
    n_queries: int | None = None

    def __len__(self) -> int:
        return len(self.body)

    def bodies(self, world: int = 0, query: int = 0) -> np.ndarray:
        """The bodies query `query` of `world` found: (j,) int64, sorted.

        Raises:
            TypeError: `world` or `query` is not an int.
            ValueError: `world` or `query` out of range (below 0, or n_worlds / n_queries
                or more).
        """
        world = _checked(world, "world", self.n_worlds, "worlds")
        query = _checked(query, "query", self.n_queries, "queries", "the call")
        return self.body[(self.world == world) & (self.query == query)]
