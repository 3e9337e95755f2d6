"""Reading a scene's device state into the records Scene hands back (records.py): body
state, enabled flags, motor targets, contacts, contact events and candidate pairs.

Each function takes the scene's StepContext (resident and up to date, Scene._context) and
reads world-major device fields (slot = world * n_bodies + body) into (n_worlds, ...) host
arrays. Reading changes nothing a later step reads.
"""

from __future__ import annotations

import numpy as np

from ..device import MAX_MANIFOLD_POINTS, FieldGroup
from ..physics.collision.broad_phase import find_candidate_pairs
from ..physics.collision.narrow_phase import compute_manifolds
from ..physics.solver.context import StepContext
from ..records import ContactEventList, ContactEvents, Contacts, State
from . import gather

#: Manifold fields contacts() reads.
_CONTACT_FIELDS = (
    "body_a",
    "body_b",
    "point_count",
    "normal",
    "point",
    "depth",
    "feature",
    "total_normal_impulse",
    "total_tangent_impulse",
)
#: Body fields body_state() reads.
_STATE_FIELDS = ("position", "angle", "velocity", "angular_velocity", "sleeping")


def float_dtype(dtype) -> np.dtype:
    """np.float32 or np.float64 from `dtype` (a NumPy dtype or its name), else TypeError."""
    try:
        value = np.dtype(dtype)
    except (TypeError, ValueError):
        value = None
    # `is None` first: NumPy compares None equal to float64 (`None in (...)` is True).
    if value is None or value not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be np.float32 or np.float64, got {dtype!r}"[:200])
    return value


def body_state(ctx: StepContext, rows: np.ndarray | None = None, dtype=np.float64) -> State:
    """Every world's poses, velocities and sleep flags (floats of `dtype`, sleeping bool)
    of the bodies `rows` ((k,) indices; None: all), new arrays (n_worlds, k, ...)."""
    w, nb = ctx.n_worlds, ctx.n_bodies
    state = ctx.pool.bodies.read(dict.fromkeys(_STATE_FIELDS, w * nb))

    def field(name, width=()):
        value = state[name].reshape(w, nb, *width)
        return value if rows is None else value[:, rows]

    return State(
        position=field("position", (2,)).astype(dtype),
        angle=field("angle").astype(dtype),
        velocity=field("velocity", (2,)).astype(dtype),
        angular_velocity=field("angular_velocity").astype(dtype),
        sleeping=field("sleeping").astype(bool),
    )


#: The State fields gather_state fills, with their trailing shape.
_GATHERED = (
    ("position", (2,)),
    ("angle", ()),
    ("velocity", (2,)),
    ("angular_velocity", ()),
    ("sleeping", ()),
)


def gather_state(ctx: StepContext, rows: np.ndarray | None, out: State) -> State:
    """Scene.get_state(out=...): the bodies `rows` ((k,) indices; None: all) of every world
    gathered straight into `out`'s arrays (NumPy arrays or torch tensors, checked: see
    gather.check_out), one kernel launch; fields of `out` left None are skipped."""
    k = ctx.n_bodies if rows is None else len(rows)
    targets = check_state_out(out, ctx.n_worlds, k)
    indices = np.arange(ctx.n_bodies, dtype=np.int32) if rows is None else rows.astype(np.int32)
    gather.gather_bodies(ctx, indices, targets)
    return out


def check_state_out(out, n_worlds: int, n_rows: int, backend: str | None = None) -> dict:
    """get_state(out=...)'s check, Scene's and ShardedScene's: `out` a State of arrays for
    n_worlds worlds of n_rows bodies (gather.check_out: shapes, one float dtype, bool
    sleeping, contiguous, writable, apart; torch tensors where `backend` writes, None: this
    process's Taichi backend). Returns {field: array} of the fields given."""
    return gather.check_out(out, _GATHERED, (n_worlds, n_rows), backend)


def enabled_flags(ctx: StepContext) -> np.ndarray:
    """(n_worlds, n_bodies) bool: which bodies take part in each world."""
    flags = ctx.pool.bodies.read({"enabled": ctx.n_slots})["enabled"]
    return flags.reshape(ctx.n_worlds, ctx.n_bodies).astype(bool)


def joint_targets(ctx: StepContext, joint: int) -> np.ndarray:
    """(n_worlds,) float64: `joint`'s motor target in every world, as the device holds it."""
    n = ctx.n_worlds * ctx.n_joints
    targets = ctx.pool.joints.read({"target": n})["target"]
    return targets.reshape(ctx.n_worlds, ctx.n_joints)[:, joint].astype(np.float64)


def current_contacts(ctx: StepContext) -> tuple[FieldGroup, int]:
    """(manifolds group, pair count) of the candidate pairs at the current poses: the last
    step's, or, after set_state, a broad and narrow phase (exact, no margins) into the
    scratch group, which no later step reads: a query never changes the simulation."""
    if ctx.cache.contacts_current:
        return ctx.pool.manifolds, ctx.cache.n_pairs
    n_pairs = find_candidate_pairs(ctx, into="staging")
    compute_manifolds(ctx, n_pairs, 0.0, into="staging")
    return ctx.pool.staging, n_pairs


def listed_pairs(ctx: StepContext) -> tuple[FieldGroup, int, bool]:
    """(manifolds group, pair count, stepped): the pairs contacts() lists, the last step's
    reported contacts where it was the last change (stepped), else current_contacts' (of
    which those with points: a collision pass at the current poses). Also read by a vector
    env's observation on the device (envs/device_step.py)."""
    if ctx.cache.contacts_current:
        return ctx.pool.reported, ctx.cache.n_reported, True
    return *current_contacts(ctx), False


def contacts(ctx: StepContext, sensor: np.ndarray, world: int | None) -> Contacts:
    """Scene.contacts: the touching pairs of `world` (None: every world), sorted by
    (world, body_a, body_b); `sensor` (n_bodies,) bool marks the sensors.

    After a step they are the step's reported contacts, with its impulses; otherwise the
    manifolds at the current poses that have points, with zero impulses.
    """
    manifolds, n, stepped = listed_pairs(ctx)
    fields = manifolds.read(dict.fromkeys(_CONTACT_FIELDS, n))
    keep = np.arange(n) if stepped else np.nonzero(fields["point_count"] > 0)[0]
    a = fields["body_a"][keep].astype(np.int64)
    b = fields["body_b"][keep].astype(np.int64)
    nb = ctx.n_bodies
    if not stepped:  # the broad phase's order: sort
        order = np.lexsort((b, a))
        keep, a, b = keep[order], a[order], b[order]
    if world is not None:
        mine = a // nb == world
        keep, a, b = keep[mine], a[mine], b[mine]

    def rows(name, dtype):
        return fields[name][keep].astype(dtype)

    count = rows("point_count", np.int64)
    used = np.arange(MAX_MANIFOLD_POINTS)[None, :] < count[:, None]

    def per_point(name, dtype, unused):
        """The field's rows, `unused` past each pair's count: the device leaves whatever an
        earlier pair (or scene) wrote there."""
        values = rows(name, dtype)
        return np.where(used.reshape(used.shape + (1,) * (values.ndim - 2)), values, unused)

    def impulses(name):  # 0 for points past the count, and when no step led here
        if not stepped:
            return np.zeros((len(keep), MAX_MANIFOLD_POINTS))
        return per_point(name, np.float64, 0.0)

    return Contacts(
        world=a // nb,
        body_a=a % nb,
        body_b=b % nb,
        normal=rows("normal", np.float64),
        point_count=count,
        points=per_point("point", np.float64, 0.0),
        depths=per_point("depth", np.float64, 0.0),
        features=per_point("feature", np.int64, -1),
        normal_impulse=impulses("total_normal_impulse"),
        tangent_impulse=impulses("total_tangent_impulse"),
        sensor=sensor[a % nb] | sensor[b % nb],
        n_worlds=ctx.n_worlds,
    )


def touching(ctx: StepContext, rows: np.ndarray) -> np.ndarray:
    """Scene.touching: (n_worlds, k) bool, [w, i] where body rows[i] ((k,) indices) is in one
    of world w's pairs that contacts(world=None) lists: after a step the step's reported
    contacts, otherwise the manifolds at the current poses that have points. One launch
    over those pairs, whose only host array is the flags' (the bodies' columns are kept on
    the device, gather.kept_on_device)."""
    manifolds, n, stepped = listed_pairs(ctx)
    distinct, where = np.unique(rows, return_inverse=True)  # (a body asked twice)
    column = np.full(ctx.n_bodies, -1, np.int32)
    column[distinct] = np.arange(len(distinct), dtype=np.int32)
    (column_nd,) = gather.kept_on_device(ctx.pool, column)
    flags = np.empty((ctx.n_worlds, len(distinct)), np.uint8)
    gather.mark_touching(manifolds, column_nd, n, ctx.n_bodies, not stepped, flags)
    return flags.view(bool)[:, where]


def contact_events(ctx: StepContext, sensor: np.ndarray) -> ContactEvents:
    """Scene.contact_events: the last step's begin and end events, each list sorted by
    (world, body_a, body_b); `sensor` (n_bodies,) bool marks the sensors."""
    cache, nb = ctx.cache, ctx.n_bodies
    lists = ctx.pool.events.read(
        {
            "begin_a": cache.n_begin_events,
            "begin_b": cache.n_begin_events,
            "end_a": cache.n_end_events,
            "end_b": cache.n_end_events,
        }
    )

    def listed(kind):
        a, b = (lists[f"{kind}_{end}"].astype(np.int64) for end in ("a", "b"))
        return ContactEventList(
            world=a // nb,
            body_a=a % nb,
            body_b=b % nb,
            sensor=sensor[a % nb] | sensor[b % nb],
            n_worlds=ctx.n_worlds,
        )

    return ContactEvents(begin=listed("begin"), end=listed("end"))


def candidate_pairs(ctx: StepContext) -> np.ndarray:
    """Scene.candidate_pairs: (k, 3) int64 rows of (world, body_a, body_b), body_a < body_b."""
    manifolds, n = current_contacts(ctx)
    pairs = manifolds.read({"body_a": n, "body_b": n})
    a, b = pairs["body_a"].astype(np.int64), pairs["body_b"].astype(np.int64)
    nb = ctx.n_bodies
    return np.stack([a // nb, a % nb, b % nb], axis=1)
